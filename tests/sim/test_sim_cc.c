/* Congestion control wired into the engine (eng_qp_set_cc, eng_qp_cnp), on the simulator's
 * virtual clock:
 *   - without a CNP a QP with DCQCN sends as one without (no pacing at line rate);
 *   - after a CNP and the cut it makes, a 256 KiB RDMA WRITE leaves at the QP's rate: the
 *     request packets' spacing on the clock gives that rate within 1 %, and every byte
 *     arrives;
 *   - the rate climbs back by the timers alone as DCQCN says (half the gap per increase event,
 *     300 us each) and the timers stop at line rate;
 *   - a READ's responses leave at the responder's rate once it was cut, unpaced before;
 *   - parameters that make no sense are refused, and CNPs to a QP without congestion control
 *     change nothing. */
#include "check.h"
#include "sim.h"

#include "engine/dcqcn.h"

#define LEN   (256u * 1024)
#define US    1000ull
#define GBPS  1000000000ull
#define PMTU  1024u
#define FRAME (PMTU + 58u) /* what dcqcn_sent counts for a full packet */

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *src, *dst;
static uint64_t first_at, last_at, npkts;
static uint64_t rfirst_at, rlast_at, nresp; /* B's READ responses */

/* Records when A's WRITE packets leave (the tap sees each as it enters the link). */
static enum sim_action tap(struct sim *sm, int dir, uint64_t index, const struct roce_pkt *p,
			   enum sim_action chosen, uint64_t *delay_ns, void *arg)
{
	(void)index;
	(void)delay_ns;
	(void)arg;
	if (dir == SIM_AB && roce_opinfo(p->bth.opcode) &&
	    roce_opinfo(p->bth.opcode)->kind == ROCE_KIND_WRITE) {
		if (npkts == 0)
			first_at = sm->now;
		last_at = sm->now;
		npkts++;
	}
	if (dir == SIM_BA && roce_opinfo(p->bth.opcode) &&
	    roce_opinfo(p->bth.opcode)->kind == ROCE_KIND_READ_RESP) {
		if (nresp == 0)
			rfirst_at = sm->now;
		rlast_at = sm->now;
		nresp++;
	}
	return chosen;
}

static void setup(bool cc, uint64_t line)
{
	struct sim_qp_cfg cfg = {.pmtu = PMTU};
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	sim_init(&s, 1);
	sim_connect(&s, &cfg, &qa, &qb);
	src = sim_mr_reg(&s.node[SIM_A], 1, LEN, acc);
	dst = sim_mr_reg(&s.node[SIM_B], 1, LEN, acc);
	sim_fill(src->host, LEN, 5);
	s.tap = tap;
	npkts = 0;
	if (cc) {
		struct dcqcn_params p;
		dcqcn_params_default(&p, line);
		p.time_reset_ns = 1000000000ull; /* the rate holds still while the WRITE runs */
		p.byte_reset = 1ull << 40;
		CHECK_EQ(eng_qp_set_cc(qa, &p), 0);
	}
}

/* Runs the simulator until A's completion (not until idle: a QP whose rate was cut keeps
 * timers, its recovery, afterwards) and checks it. */
static void run_to_completion(void)
{
	struct ibv_wc wc;
	int got = 0;
	for (uint64_t end = s.now + 100000 * US; !got && s.now < end;) {
		bool more = sim_step(&s);
		got = sim_poll(&s.node[SIM_A], &wc, 1);
		if (!more)
			break;
	}
	CHECK_EQ(got, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
}

/* A 256 KiB WRITE from A to B, run to completion; checks the bytes and the completion. */
static void write_all(void)
{
	npkts = 0;
	CHECK_EQ(sim_post_send(&s.node[SIM_A], qa, 7, IBV_WR_RDMA_WRITE, src, 0, LEN,
			       sim_va(dst, 0), dst->key, IBV_SEND_SIGNALED),
		 0);
	run_to_completion();
	CHECK_MEM(dst->host, src->host, LEN);
	CHECK_EQ(npkts, LEN / PMTU);
}

static void test_no_cnp(void)
{
	/* The same WRITE without congestion control, then with it but no CNP: the packets
	 * leave at the same times (the window and the ACKs set them, not a rate). */
	setup(false, 0);
	write_all();
	uint64_t plain = last_at - first_at;
	sim_fini(&s);
	setup(true, 10 * GBPS);
	write_all();
	CHECK_EQ(last_at - first_at, plain);
	CHECK_EQ(eng_qp_cc_rate(qa), 10 * GBPS);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_cc_held], 0);
	sim_fini(&s);
}

static void test_paced(void)
{
	setup(true, 10 * GBPS);
	eng_qp_cnp(qa, s.now);
	sim_run(&s, 10 * US); /* the decrease check 4 us later cuts */
	uint64_t rate = eng_qp_cc_rate(qa);
	CHECK(rate < 10 * GBPS && rate > 4 * GBPS);
	write_all();
	CHECK_EQ(eng_qp_cc_rate(qa), rate);
	/* npkts - 1 gaps of one frame each at the rate. */
	double want = (double)(npkts - 1) * FRAME * 8e9 / (double)rate;
	double got = (double)(last_at - first_at);
	CHECK(got > 0.99 * want && got < 1.01 * want);
	const uint64_t *ctr = eng_qp_counters(qa);
	CHECK_EQ(ctr[ENG_CNT_cc_cnps], 1);
	CHECK_EQ(ctr[ENG_CNT_cc_cuts], 1);
	CHECK(ctr[ENG_CNT_cc_held] > 0);
	sim_fini(&s);
}

/* With the default timers: the cut, then 2^-k of the gap after k increase events of 300 us,
 * by the engine's timer alone (the simulator runs what eng_qp_deadline asks). */
static void test_recovery(void)
{
	struct dcqcn_params p;
	uint64_t line = 10 * GBPS;
	sim_init(&s, 2);
	struct sim_qp_cfg cfg = {.pmtu = PMTU};
	sim_connect(&s, &cfg, &qa, &qb);
	dcqcn_params_default(&p, line);
	CHECK_EQ(eng_qp_set_cc(qa, &p), 0);
	uint64_t t0 = s.now;
	eng_qp_cnp(qa, t0);
	sim_run(&s, 5 * US);
	uint64_t gap0 = line - eng_qp_cc_rate(qa);
	CHECK(gap0 > 0);
	for (int k = 1; k <= 8; k++) {
		/* just past the k-th event: 4 us (the cut) + k * 300 us */
		while (s.now < t0 + 4 * US + k * p.time_reset_ns + 1)
			if (!sim_step(&s))
				break;
		double gap = (double)(line - eng_qp_cc_rate(qa));
		double want = (double)gap0 / (double)(1u << k);
		CHECK(gap <= want + 1.0 && gap >= want - 1.0);
	}
	/* Far ahead: back at line rate, and the QP has no deadline left. */
	CHECK(sim_run(&s, 100000 * US));
	CHECK_EQ(eng_qp_cc_rate(qa), line);
	CHECK_EQ(eng_qp_deadline(qa), UINT64_MAX);
	sim_fini(&s);
}

static void test_refused(void)
{
	struct dcqcn_params p;
	setup(false, 0);
	dcqcn_params_default(&p, 10 * GBPS);
	p.g = 2000; /* refused parameters */
	CHECK_EQ(eng_qp_set_cc(qa, &p), -EINVAL);
	CHECK_EQ(eng_qp_cc_rate(qa), 0);
	eng_qp_cnp(qa, s.now); /* no congestion control: nothing happens */
	write_all();
	CHECK(last_at - first_at < 10 * US); /* paced at a cut rate it would take ~400 us */
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_cc_cnps], 0);
	sim_fini(&s);
}

/* The responder's data is paced too: B, with its rate cut, answers a 256 KiB READ at that
 * rate (the response packets' spacing within 1 %), and every byte arrives; without a cut the
 * responses leave as without congestion control. */
static void read_all(struct sim_mr *into, struct sim_mr *from)
{
	nresp = 0;
	CHECK_EQ(sim_post_send(&s.node[SIM_A], qa, 9, IBV_WR_RDMA_READ, into, 0, LEN,
			       sim_va(from, 0), from->key, IBV_SEND_SIGNALED),
		 0);
	run_to_completion();
	CHECK_MEM(into->host, from->host, LEN);
	CHECK_EQ(nresp, LEN / PMTU);
}

static void test_read_paced(void)
{
	struct dcqcn_params p;
	/* Unpaced: the time the responses take without congestion control. */
	setup(false, 0);
	sim_fill(dst->host, LEN, 9);
	read_all(src, dst);
	uint64_t plain = rlast_at - rfirst_at;
	sim_fini(&s);

	setup(false, 0);
	dcqcn_params_default(&p, 10 * GBPS);
	p.time_reset_ns = 1000000000ull;
	p.byte_reset = 1ull << 40;
	CHECK_EQ(eng_qp_set_cc(qb, &p), 0);
	sim_fill(dst->host, LEN, 9);
	read_all(src, dst);
	CHECK_EQ(rlast_at - rfirst_at, plain); /* no CNP: no pacing */
	eng_qp_cnp(qb, s.now);
	sim_run(&s, 10 * US);
	uint64_t rate = eng_qp_cc_rate(qb);
	CHECK(rate < 10 * GBPS && rate > 4 * GBPS);
	uint64_t held = eng_qp_counters(qb)[ENG_CNT_cc_held];
	sim_fill(dst->host, LEN, 11);
	read_all(src, dst);
	double want = (double)(nresp - 1) * FRAME * 8e9 / (double)rate;
	double got = (double)(rlast_at - rfirst_at);
	CHECK(got > 0.99 * want && got < 1.01 * want);
	CHECK(eng_qp_counters(qb)[ENG_CNT_cc_held] > held);
	sim_fini(&s);
}

int main(void)
{
	test_no_cnp();
	test_paced();
	test_read_paced();
	test_recovery();
	test_refused();
	return check_exit();
}
