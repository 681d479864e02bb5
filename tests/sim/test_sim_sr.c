/* Selective repeat (engine/sr.h) against go-back-N, on the simulator's clock:
 *   - one request lost in a 64-packet WRITE: go-back-N sends the 58 after it again,
 *     selective repeat sends that one only; the responder keeps the 58 and takes them in
 *     order once the hole is filled; SACKs cross, through the codec (wire mode);
 *   - READ responses lost: go-back-N asks for all the rest again, selective repeat places
 *     the responses after a lost one and asks for the lost ones only (a READ request for
 *     just them); a lost re-request and a lost last response end with the timer;
 *   - the last packet lost: nothing follows to show the gap, so only the ACK timer finds it.
 *     Go-back-N waits IB's timeout (67 ms at timeout 14); selective repeat its RTO from the
 *     measured round trip, at least ENG_SR_RTO_MIN_NS, and then sends only the last packet
 *     again (the probe);
 *   - each loss pattern of a SEND + READ + WRITE mix, in both directions, ends with the data
 *     exact and each completion once (the exhaustive runs are test_sim_loss's);
 *   - with only one side on, the two ends still agree: a SACK taken by a go-back-N QP is a
 *     NAK PSN sequence error, and a go-back-N responder's NAK is one for selective repeat;
 *   - what a hostile peer can do: a request too far ahead is not kept, a SACK of the wrong
 *     length is dropped, a SACK bitmap naming PSNs never sent changes nothing;
 *   - a hole sent again and lost again is sent once more as soon as requests sent after it
 *     arrive (RACK), not after the ACK timer;
 *   - an RNR NAK in the middle of requests the peer keeps: after each RNR wait only the
 *     NAKed request goes again, not everything after it;
 *   - random loss: selective repeat needs fewer retransmissions and less time;
 *   - a peer that stopped answering is given up on after as long as with go-back-N
 *     ((retry_cnt + 1) IB timeouts), though the RTO fires much sooner. */
#include "check.h"
#include "sim.h"

#include "engine/sr.h"
#include "util/psn.h"

#define PMTU 1024u
#define NPKT 64u
#define LEN  (NPKT * PMTU)
#define MS   1000000ull

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *src, *dst, *rsrc, *rdst;

static const uint64_t *cnt(struct eng_qp *qp)
{
	return eng_qp_counters(qp);
}

static void setup(bool sr_a, bool sr_b, uint8_t timeout)
{
	struct sim_qp_cfg cfg = {.pmtu = PMTU, .timeout = timeout};
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	sim_init(&s, 5);
	s.wire = true;
	sim_connect(&s, &cfg, &qa, &qb);
	REQUIRE(eng_qp_set_sr(qa, sr_a) == 0);
	REQUIRE(eng_qp_set_sr(qb, sr_b) == 0);
	CHECK_EQ(eng_qp_sr(qa), sr_a);
	CHECK_EQ(eng_qp_sr(qb), sr_b);
	src = sim_mr_reg(&s.node[SIM_A], 1, LEN, acc);
	rdst = sim_mr_reg(&s.node[SIM_A], 1, LEN, acc);
	dst = sim_mr_reg(&s.node[SIM_B], 1, LEN, acc);
	rsrc = sim_mr_reg(&s.node[SIM_B], 1, LEN, acc);
	sim_fill(src->host, LEN, 11);
	sim_fill(rsrc->host, LEN, 12);
}

static uint64_t done_at;
static bool got_wc(struct sim *sm, void *arg)
{
	(void)arg;
	if ((sm->node[SIM_A].cq.tail - sm->node[SIM_A].cq.head) == 0)
		return false;
	done_at = sm->now;
	return true;
}

/* A 64-packet WRITE from A with A->B packet `drop` (index on the link) lost; returns the
 * virtual time it took. */
static uint64_t write_with_drop(uint64_t drop)
{
	uint64_t t0 = s.now;

	if (drop != UINT64_MAX)
		sim_rule(&s, SIM_AB, s.stats.entered[SIM_AB] + drop, SIM_DROP, 0);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 1, IBV_WR_RDMA_WRITE, src, 0, LEN, sim_va(dst, 0),
			      dst->key, IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_run_until(&s, got_wc, NULL, 1000 * MS));
	SIM_EXPECT_WC(&s.node[SIM_A], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, LEN);
	CHECK_MEM(dst->host, src->host, LEN);
	return done_at - t0;
}

static void test_one_hole(void)
{
	/* Go-back-N: everything after the lost packet again. */
	setup(false, false, 14);
	write_with_drop(5);
	CHECK_EQ(cnt(qa)[ENG_CNT_retransmits], NPKT - 5);
	CHECK_EQ(cnt(qb)[ENG_CNT_drop_psn_gap], NPKT - 6);
	CHECK_EQ(cnt(qb)[ENG_CNT_sr_held], 0);
	sim_fini(&s);

	/* Selective repeat: the hole only. */
	setup(true, true, 14);
	write_with_drop(5);
	CHECK_EQ(cnt(qa)[ENG_CNT_retransmits], 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_resent], 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 0);
	CHECK_EQ(cnt(qb)[ENG_CNT_sr_held], NPKT - 6);
	CHECK_EQ(cnt(qb)[ENG_CNT_drop_psn_gap], 0);
	CHECK(cnt(qb)[ENG_CNT_sr_sacks_sent] >= 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_sacks_rcvd], cnt(qb)[ENG_CNT_sr_sacks_sent]);
	CHECK_EQ(cnt(qb)[ENG_CNT_seq_naks_sent], 0);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	sim_fini(&s);

	/* Two holes, one of them the first packet. */
	setup(true, true, 14);
	sim_rule(&s, SIM_AB, 0, SIM_DROP, 0);
	write_with_drop(40);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_resent], 2);
	CHECK_EQ(cnt(qa)[ENG_CNT_retransmits], 2);
	sim_fini(&s);
}

/* A 64-packet READ by A with B->A response `drop` lost (UINT64_MAX: none) and, if a2b is not
 * UINT64_MAX, A->B packet a2b too; returns the responses B sent. */
static uint64_t read_with_drop(uint64_t drop, uint64_t a2b)
{
	uint64_t tx0 = cnt(qb)[ENG_CNT_tx_packets];

	memset(rdst->host, 0, LEN);
	if (drop != UINT64_MAX)
		sim_rule(&s, SIM_BA, s.stats.entered[SIM_BA] + drop, SIM_DROP, 0);
	if (a2b != UINT64_MAX)
		sim_rule(&s, SIM_AB, s.stats.entered[SIM_AB] + a2b, SIM_DROP, 0);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 2, IBV_WR_RDMA_READ, rdst, 0, LEN,
			      sim_va(rsrc, 0), rsrc->key, IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_run_until(&s, got_wc, NULL, 1000 * MS));
	SIM_EXPECT_WC(&s.node[SIM_A], 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, LEN);
	CHECK_MEM(rdst->host, rsrc->host, LEN);
	return cnt(qb)[ENG_CNT_tx_packets] - tx0;
}

/* READ responses lost: go-back-N asks again for everything from the lost one on, selective
 * repeat places the responses after it where they go and asks for the lost ones only. */
static void test_read_holes(void)
{
	uint64_t gbn, sr;

	setup(false, false, 14);
	gbn = read_with_drop(5, UINT64_MAX);
	CHECK_EQ(gbn, NPKT + NPKT - 5);
	CHECK_EQ(cnt(qa)[ENG_CNT_implicit_naks], 1);
	sim_fini(&s);

	setup(true, true, 14);
	sr = read_with_drop(5, UINT64_MAX);
	CHECK_EQ(sr, NPKT + 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_read_ahead], NPKT - 6);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_resent], 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_implicit_naks], 0);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 0);
	CHECK_EQ(cnt(qb)[ENG_CNT_dup_reads_replayed], 1);
	fprintf(stderr,
		"one response lost in a 64-packet READ: responses sent %llu (go-back-N), "
		"%llu (selective repeat)\n",
		(unsigned long long)gbn, (unsigned long long)sr);
	/* The same QPs go on: a READ with nothing lost afterwards, and one with two holes, the
	 * first of them its first response (the re-request's reply starts the READ again). */
	CHECK_EQ(read_with_drop(UINT64_MAX, UINT64_MAX), NPKT);
	sim_rule(&s, SIM_BA, s.stats.entered[SIM_BA] + 40, SIM_DROP, 0);
	CHECK_EQ(read_with_drop(0, UINT64_MAX), NPKT + 2);
	CHECK_EQ(cnt(qa)[ENG_CNT_implicit_naks], 0);
	/* Three holes in a row and one further on. */
	sim_rule(&s, SIM_BA, s.stats.entered[SIM_BA] + 11, SIM_DROP, 0);
	sim_rule(&s, SIM_BA, s.stats.entered[SIM_BA] + 12, SIM_DROP, 0);
	sim_rule(&s, SIM_BA, s.stats.entered[SIM_BA] + 50, SIM_DROP, 0);
	CHECK_EQ(read_with_drop(10, UINT64_MAX), NPKT + 4);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 0);
	sim_fini(&s);

	/* The re-request lost too (A->B: the READ, then the re-request): the timer, then the
	 * rest from the hole (go-back-N). */
	setup(true, true, 14);
	read_with_drop(5, 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 1);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	/* The last response lost: nothing after it shows it, the timer does. */
	read_with_drop(NPKT - 1, UINT64_MAX);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 2);
	sim_fini(&s);
}

static void test_tail_loss(void)
{
	uint64_t gbn, sr, srtt;

	setup(false, false, 14);
	write_with_drop(UINT64_MAX);
	gbn = write_with_drop(NPKT - 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 1);
	CHECK(gbn >= 67 * MS);
	sim_fini(&s);

	setup(true, true, 14);
	write_with_drop(UINT64_MAX); /* a round trip measured */
	srtt = eng_sr_srtt(qa);
	/* The link is 1 us each way; the ACK leaves when the last of 64 packets arrived. */
	CHECK(srtt >= 2000 && srtt <= 100000);
	sr = write_with_drop(NPKT - 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_retransmits], 1);
	CHECK(sr >= ENG_SR_RTO_MIN_NS && sr < ENG_SR_RTO_MIN_NS + 1 * MS);
	fprintf(stderr, "tail loss: go-back-N %.1f ms, selective repeat %.1f ms (srtt %.1f us)\n",
		(double)gbn / MS, (double)sr / MS, (double)srtt / 1000);
	sim_fini(&s);
}

static bool all_done(struct sim *sm, void *arg);

static bool a_sent(struct sim *sm, void *arg)
{
	return sm->stats.entered[SIM_AB] >= *(const uint64_t *)arg;
}

/* A 16-packet WRITE loses its packet 5 and then the copy sent for the SACK (link packet 16);
 * a second WRITE, posted once that copy left, is sent after it: once the peer keeps it, the
 * copy was lost again and goes once more. Without that, only the ACK timer (67 ms: no round
 * trip measured yet) would find it. */
static void test_lost_again(void)
{
	int want[2] = {2, 0};

	setup(true, true, 14);
	sim_rule(&s, SIM_AB, 5, SIM_DROP, 0);
	sim_rule(&s, SIM_AB, 16, SIM_DROP, 0);
	/* A late copy of the last packet: an event 50 us on, where the clock stops next
	 * (sim_step moves it to the next event) instead of at the ACK timer. */
	sim_rule(&s, SIM_AB, 15, SIM_DUP, 50000);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 1, IBV_WR_RDMA_WRITE, src, 0, 16 * PMTU,
			      sim_va(dst, 0), dst->key, IBV_SEND_SIGNALED) == 0);
	uint64_t n = 17;
	REQUIRE(sim_run_until(&s, a_sent, &n, 1000 * MS));
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_resent], 1);
	CHECK(s.now < 100000);
	uint64_t t0 = s.now;
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 2, IBV_WR_RDMA_WRITE, src, 16 * PMTU, 16 * PMTU,
			      sim_va(dst, 16 * PMTU), dst->key, IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_run_until(&s, all_done, want, 1000 * MS));
	uint64_t t = s.now - t0;
	SIM_EXPECT_WC(&s.node[SIM_A], 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 16 * PMTU);
	SIM_EXPECT_WC(&s.node[SIM_A], 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 16 * PMTU);
	CHECK_MEM(dst->host, src->host, 32 * PMTU);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_resent], 2);
	CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 0);
	CHECK(t < 1 * MS);
	fprintf(stderr, "lost again: both WRITEs done %.1f us after the second was posted\n",
		(double)t / 1000);
	sim_fini(&s);
}

/* Three 8-packet SENDs, one receive posted: the second SEND meets no receive (RNR NAK, 10
 * us waits) until two more are posted 100 us later. Returns A's retransmissions. */
static uint64_t rnr_run(bool sr)
{
	int want[2] = {3, 3};

	setup(sr, sr, 14);
	REQUIRE(sim_post_recv(qb, 10, dst, 0, 8 * PMTU) == 0);
	for (int i = 0; i < 3; i++)
		REQUIRE(sim_post_send(&s.node[SIM_A], qa, (uint64_t)i, IBV_WR_SEND, src,
				      (uint64_t)i * 8 * PMTU, 8 * PMTU, 0, 0,
				      IBV_SEND_SIGNALED) == 0);
	sim_run(&s, 100000);
	CHECK(cnt(qa)[ENG_CNT_rnr_naks_rcvd] >= 3);
	REQUIRE(sim_post_recv(qb, 11, dst, 8 * PMTU, 8 * PMTU) == 0);
	REQUIRE(sim_post_recv(qb, 12, dst, 16 * PMTU, 8 * PMTU) == 0);
	REQUIRE(sim_run_until(&s, all_done, want, 1000 * MS));
	for (int i = 0; i < 3; i++)
		SIM_EXPECT_WC(&s.node[SIM_A], (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND, 8 * PMTU);
	for (int i = 0; i < 3; i++)
		SIM_EXPECT_WC(&s.node[SIM_B], (uint64_t)(10 + i), IBV_WC_SUCCESS, IBV_WC_RECV,
			      8 * PMTU);
	CHECK_MEM(dst->host, src->host, 24 * PMTU);
	uint64_t r = cnt(qa)[ENG_CNT_retransmits], n = cnt(qa)[ENG_CNT_rnr_naks_rcvd];
	if (sr)
		CHECK_EQ(r, n); /* one packet per RNR wait */
	else
		CHECK(r >= 16 * (n - 1)); /* the second and third SEND again each time */
	sim_fini(&s);
	return r;
}

static void test_rnr_kept(void)
{
	uint64_t gbn = rnr_run(false), sr = rnr_run(true);

	fprintf(stderr,
		"RNR with 16 requests behind: go-back-N resent %" PRIu64
		", selective repeat %" PRIu64 "\n",
		gbn, sr);
	CHECK(sr < gbn);
}

static bool all_done(struct sim *sm, void *arg)
{
	int *want = arg;
	return (sm->node[SIM_A].cq.tail - sm->node[SIM_A].cq.head) == (uint32_t)want[0] &&
	       (sm->node[SIM_B].cq.tail - sm->node[SIM_B].cq.head) == (uint32_t)want[1];
}

/* SEND (3 packets), READ (4 responses), WRITE (5 packets) from A; one or two link packets
 * lost (either way); everything must end exact. */
static void mix_run(bool sr_a, bool sr_b, int dir1, uint64_t i1, int dir2, uint64_t i2)
{
	int want[2] = {3, 1};
	struct ibv_wc wc;

	setup(sr_a, sr_b, 8);
	if (i1 != UINT64_MAX)
		sim_rule(&s, dir1, i1, SIM_DROP, 0);
	if (i2 != UINT64_MAX)
		sim_rule(&s, dir2, i2, SIM_DROP, 0);
	REQUIRE(sim_post_recv(qb, 50, dst, 0, 4 * PMTU) == 0);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 1, IBV_WR_SEND, src, 0, 3 * PMTU - 7, 0, 0,
			      IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 2, IBV_WR_RDMA_READ, rdst, 0, 4 * PMTU,
			      sim_va(rsrc, 0), rsrc->key, IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 3, IBV_WR_RDMA_WRITE, src, 8 * PMTU, 5 * PMTU,
			      sim_va(dst, 8 * PMTU), dst->key, IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_run_until(&s, all_done, want, 1000 * MS));
	SIM_EXPECT_WC(&s.node[SIM_A], 1, IBV_WC_SUCCESS, IBV_WC_SEND, 3 * PMTU - 7);
	SIM_EXPECT_WC(&s.node[SIM_A], 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 4 * PMTU);
	SIM_EXPECT_WC(&s.node[SIM_A], 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 5 * PMTU);
	SIM_EXPECT_WC(&s.node[SIM_B], 50, IBV_WC_SUCCESS, IBV_WC_RECV, 3 * PMTU - 7);
	CHECK_MEM(dst->host, src->host, 3 * PMTU - 7);
	CHECK_MEM(rdst->host, rsrc->host, 4 * PMTU);
	CHECK_MEM(dst->host + 8 * PMTU, src->host + 8 * PMTU, 5 * PMTU);
	sim_run(&s, 10 * MS);
	CHECK_EQ(sim_poll(&s.node[SIM_A], &wc, 1), 0);
	CHECK_EQ(sim_poll(&s.node[SIM_B], &wc, 1), 0);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	sim_fini(&s);
}

static void test_mixed_peers(void)
{
	static const bool modes[4][2] = {
	    {true, true}, {true, false}, {false, true}, {false, false}};

	for (int m = 0; m < 4; m++) {
		int before = check_failures;
		for (uint64_t i = 0; i < 12; i++) {
			mix_run(modes[m][0], modes[m][1], SIM_AB, i, SIM_AB, UINT64_MAX);
			mix_run(modes[m][0], modes[m][1], SIM_BA, i, SIM_AB, UINT64_MAX);
			for (uint64_t j = i + 1; j < 12; j++)
				mix_run(modes[m][0], modes[m][1], SIM_AB, i, SIM_AB, j);
		}
		if (check_failures != before)
			fprintf(stderr, "  ^ selective repeat A %d, B %d\n", modes[m][0],
				modes[m][1]);
	}

	/* A SACK taken by a go-back-N requester: it goes back to the SACK's PSN. */
	setup(false, true, 14);
	write_with_drop(5);
	CHECK(cnt(qa)[ENG_CNT_sr_sacks_rcvd] >= 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_resent], 0);
	CHECK(cnt(qa)[ENG_CNT_retransmits] >= NPKT - 5);
	sim_fini(&s);
	/* A go-back-N responder's NAK, taken by a selective-repeat requester. */
	setup(true, false, 14);
	write_with_drop(5);
	CHECK_EQ(cnt(qa)[ENG_CNT_seq_naks_rcvd], 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_sacks_rcvd], 0);
	CHECK_EQ(cnt(qa)[ENG_CNT_retransmits], NPKT - 5);
	sim_fini(&s);
}

static void test_hostile(void)
{
	struct roce_pkt p;
	uint8_t bits[ENG_SR_SACK_BYTES];
	uint64_t held, gap, bad;

	setup(true, true, 14);
	/* A request 200 PSNs ahead of B's expected one: not kept. */
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_WRITE_ONLY;
	p.bth.dqpn = eng_qp_num(qb);
	p.bth.psn = psn_add(0x100, 200);
	p.reth.va = sim_va(dst, 0);
	p.reth.rkey = dst->key;
	p.reth.dma_len = 4;
	p.payload = src->host;
	p.payload_len = 4;
	held = cnt(qb)[ENG_CNT_sr_held];
	gap = cnt(qb)[ENG_CNT_drop_psn_gap];
	eng_qp_input(qb, &p, s.now);
	CHECK_EQ(cnt(qb)[ENG_CNT_sr_held], held);
	CHECK_EQ(cnt(qb)[ENG_CNT_drop_psn_gap], gap + 1);
	/* One 100 ahead is kept, but never placed before its turn. */
	p.bth.psn = psn_add(0x100, 100);
	eng_qp_input(qb, &p, s.now);
	CHECK_EQ(cnt(qb)[ENG_CNT_sr_held], held + 1);
	CHECK_EQ(dst->host[0], 0);
	sim_fini(&s);

	/* SACKs to A, which has sent nothing: one of the wrong length is dropped; one whose
	 * bitmap names PSNs never sent is stale (nothing outstanding) and changes nothing. */
	setup(true, true, 14);
	memset(&p, 0, sizeof(p));
	memset(bits, 0xFF, sizeof(bits));
	p.bth.opcode = ROCE_SR_SACK;
	p.bth.dqpn = eng_qp_num(qa);
	p.bth.psn = 0x100;
	p.aeth.syndrome = ROCE_AETH_NAK | ROCE_NAK_PSN_SEQ;
	p.payload = bits;
	p.payload_len = ENG_SR_SACK_BYTES;
	eng_qp_input(qa, &p, s.now);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_sacks_rcvd], 0);
	/* Now with a WRITE outstanding (its packets held back on the link). */
	sim_rule(&s, SIM_AB, 0, SIM_DELAY, 5 * MS);
	for (uint64_t i = 1; i < NPKT; i++)
		sim_rule(&s, SIM_AB, i, SIM_DELAY, 5 * MS);
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 7, IBV_WR_RDMA_WRITE, src, 0, 2 * PMTU,
			      sim_va(dst, 0), dst->key, IBV_SEND_SIGNALED) == 0);
	sim_run(&s, 2000); /* the two packets are on the link */
	bad = cnt(qa)[ENG_CNT_drop_bad_length];
	p.payload_len = ENG_SR_SACK_BYTES - 1;
	eng_qp_input(qa, &p, s.now);
	CHECK_EQ(cnt(qa)[ENG_CNT_drop_bad_length], bad + 1);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_sacks_rcvd], 0);
	/* All bits set: PSNs 0x101 .. 0x17F "arrived", of which A sent only 0x101. */
	p.payload_len = ENG_SR_SACK_BYTES;
	eng_qp_input(qa, &p, s.now);
	CHECK_EQ(cnt(qa)[ENG_CNT_sr_sacks_rcvd], 1);
	int want[2] = {1, 0};
	REQUIRE(sim_run_until(&s, all_done, want, 1000 * MS));
	SIM_EXPECT_WC(&s.node[SIM_A], 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2 * PMTU);
	CHECK_MEM(dst->host, src->host, 2 * PMTU);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	sim_fini(&s);
}

/* Both ways at `ppm` random loss: 200 WRITEs of 16 packets from A. Returns the virtual time;
 * *rtx the retransmissions. */
static uint64_t random_loss(bool sr, uint32_t ppm, uint64_t *rtx)
{
	const uint32_t n = 200, len = 16 * PMTU;
	int want[2] = {(int)n, 0};

	setup(sr, sr, 14);
	s.link[SIM_AB].drop_ppm = ppm;
	s.link[SIM_BA].drop_ppm = ppm;
	for (uint32_t i = 0; i < n; i++)
		REQUIRE(sim_post_send(&s.node[SIM_A], qa, i, IBV_WR_RDMA_WRITE, src, (i % 4) * len,
				      len, sim_va(dst, (i % 4) * len), dst->key,
				      IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_run_until(&s, all_done, want, 100000 * MS));
	for (uint32_t i = 0; i < n; i++)
		SIM_EXPECT_WC(&s.node[SIM_A], i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, len);
	CHECK_MEM(dst->host, src->host, 4 * len);
	*rtx = cnt(qa)[ENG_CNT_retransmits];
	uint64_t t = s.now;
	sim_fini(&s);
	return t;
}

static void test_random_loss(void)
{
	static const uint32_t ppm[] = {1000, 10000, 50000};

	for (unsigned i = 0; i < sizeof(ppm) / sizeof(ppm[0]); i++) {
		uint64_t rg, rs;
		uint64_t tg = random_loss(false, ppm[i], &rg);
		uint64_t ts = random_loss(true, ppm[i], &rs);

		fprintf(stderr,
			"loss %.1f%%: go-back-N %" PRIu64
			" resent, %.2f ms; selective repeat %" PRIu64 " resent, %.2f ms\n",
			ppm[i] / 1e4, rg, (double)tg / MS, rs, (double)ts / MS);
		CHECK(rs < rg);
		if (ppm[i] >= 10000)
			CHECK(ts < tg);
	}
}

/* Everything A sends is lost; retry_cnt 2, timeout 14: the WRITE fails after 3 IB timeouts
 * (201 ms) either way. Returns when it failed. */
static uint64_t dead_peer(bool sr)
{
	struct sim_qp_cfg cfg = {.pmtu = PMTU, .timeout = 14, .retry_cnt = 2};
	struct ibv_wc wc;

	sim_init(&s, 9);
	sim_connect(&s, &cfg, &qa, &qb);
	REQUIRE(eng_qp_set_sr(qa, sr) == 0);
	REQUIRE(eng_qp_set_sr(qb, sr) == 0);
	src = sim_mr_reg(&s.node[SIM_A], 1, LEN, IBV_ACCESS_LOCAL_WRITE);
	dst = sim_mr_reg(&s.node[SIM_B], 1, LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (sr) {
		/* A round trip measured first, so that the RTO is short. */
		REQUIRE(sim_post_send(&s.node[SIM_A], qa, 9, IBV_WR_RDMA_WRITE, src, 0, 64,
				      sim_va(dst, 0), dst->key, IBV_SEND_SIGNALED) == 0);
		REQUIRE(sim_run_until(&s, got_wc, NULL, 1000 * MS));
		SIM_EXPECT_WC(&s.node[SIM_A], 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 64);
		CHECK(eng_sr_srtt(qa) > 0);
	}
	s.link[SIM_AB].drop_ppm = 1000000;
	uint64_t t0 = s.now;
	REQUIRE(sim_post_send(&s.node[SIM_A], qa, 1, IBV_WR_RDMA_WRITE, src, 0, 4 * PMTU,
			      sim_va(dst, 0), dst->key, IBV_SEND_SIGNALED) == 0);
	REQUIRE(sim_run_until(&s, got_wc, NULL, 10000 * MS));
	uint64_t t = done_at - t0;
	REQUIRE(sim_poll(&s.node[SIM_A], &wc, 1) == 1);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	if (sr)
		CHECK(cnt(qa)[ENG_CNT_ack_timeouts] > 3); /* the RTO fired more often */
	else
		CHECK_EQ(cnt(qa)[ENG_CNT_ack_timeouts], 3);
	sim_fini(&s);
	return t;
}

static void test_dead_peer(void)
{
	uint64_t gbn = dead_peer(false), sr = dead_peer(true);

	fprintf(stderr,
		"dead peer given up on after: go-back-N %.1f ms, selective repeat %.1f ms\n",
		(double)gbn / MS, (double)sr / MS);
	CHECK(gbn >= 3 * 67 * MS && gbn < 3 * 68 * MS);
	CHECK(sr >= 3 * 67 * MS && sr < 4 * 68 * MS);
}

int main(void)
{
	test_one_hole();
	test_read_holes();
	test_tail_loss();
	test_mixed_peers();
	test_hostile();
	test_lost_again();
	test_rnr_kept();
	test_random_loss();
	test_dead_peer();
	return check_exit();
}
