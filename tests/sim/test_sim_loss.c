/* Exhaustive small loss patterns (picoquic style): for small workloads of multi-packet
 * WRITE, READ, SEND, atomics and a mix, every single drop, every double drop, and a
 * duplication and two reorderings of every packet, in either direction (requests, ACKs, read
 * responses, NAKs and retransmissions alike, counted by position on the link). Every run
 * must end with the data exact, every WR completed exactly once, in order, successfully, and
 * atomics executed exactly once. Everything runs twice: with go-back-N, and with selective
 * repeat on both QPs (engine/sr.h), where held requests and SACKs are in play. */
#include "check.h"
#include "sim.h"

#define PMTU  256
#define BIG   (5 * PMTU - 100) /* 5 packets */
#define SMALL 300	       /* 2 packets */

enum workload { W_WRITE, W_READ, W_SEND, W_ATOMIC, W_MIXED, W__COUNT };
static const char *const wl_names[W__COUNT] = {"write", "read", "send", "atomic", "mixed"};

struct pos {
	int dir;
	uint64_t index;
};

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *a_src, *a_dst, *b_src, *b_dst;
static int failures_before;
static uint64_t runs;
static bool sr; /* selective repeat on both QPs */

static void setup(void)
{
	struct sim_qp_cfg cfg = {0};
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	uint64_t v = 100;

	sim_init(&s, 7);
	cfg.pmtu = PMTU;
	cfg.timeout = 8;      /* ~1 ms */
	cfg.psn_a = 0xFFFFFE; /* wraps inside the workload */
	sim_connect(&s, &cfg, &qa, &qb);
	if (sr) {
		REQUIRE(eng_qp_set_sr(qa, true) == 0);
		REQUIRE(eng_qp_set_sr(qb, true) == 0);
	}
	a_src = sim_mr_reg(&s.node[SIM_A], 1, 16384, acc);
	a_dst = sim_mr_reg(&s.node[SIM_A], 1, 16384, acc);
	b_src = sim_mr_reg(&s.node[SIM_B], 1, 16384, acc);
	b_dst = sim_mr_reg(&s.node[SIM_B], 1, 16384, acc);
	sim_fill(a_src->host, 16384, 1);
	sim_fill(b_src->host, 16384, 2);
	memcpy(b_dst->host + 8192, &v, 8);
}

static void post(enum workload w)
{
	struct sim_node *A = &s.node[SIM_A];
	const unsigned sig = IBV_SEND_SIGNALED;

	switch (w) {
	case W_WRITE:
		CHECK_EQ(sim_post_recv(qb, 100, NULL, 0, 0), 0);
		CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, BIG, sim_va(b_dst, 0),
				       b_dst->key, sig),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE_WITH_IMM, a_src, 2000, SMALL,
				       sim_va(b_dst, 2000), b_dst->key, sig),
			 0);
		break;
	case W_READ:
		CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, BIG, sim_va(b_src, 0),
				       b_src->key, sig),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_READ, a_dst, 2000, SMALL,
				       sim_va(b_src, 2000), b_src->key, sig),
			 0);
		break;
	case W_SEND:
		CHECK_EQ(sim_post_recv(qb, 100, b_dst, 0, 2048), 0);
		CHECK_EQ(sim_post_recv(qb, 101, b_dst, 4096, 2048), 0);
		CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_SEND, a_src, 0, BIG, 0, 0, sig), 0);
		CHECK_EQ(
		    sim_post_send(A, qa, 2, IBV_WR_SEND_WITH_IMM, a_src, 2000, SMALL, 0, 0, sig),
		    0);
		break;
	case W_ATOMIC:
		CHECK_EQ(sim_post_atomic(A, qa, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 0,
					 sim_va(b_dst, 8192), b_dst->key, 5, 0, sig),
			 0);
		CHECK_EQ(sim_post_atomic(A, qa, 2, IBV_WR_ATOMIC_CMP_AND_SWP, a_dst, 8,
					 sim_va(b_dst, 8192), b_dst->key, 105, 1, sig),
			 0);
		CHECK_EQ(sim_post_atomic(A, qa, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 16,
					 sim_va(b_dst, 8192), b_dst->key, 10, 0, sig),
			 0);
		break;
	case W_MIXED:
		CHECK_EQ(sim_post_recv(qb, 100, b_dst, 4096, 2048), 0);
		CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, BIG, sim_va(b_dst, 0),
				       b_dst->key, sig),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_READ, a_dst, 0, BIG, sim_va(b_src, 0),
				       b_src->key, sig),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_SEND, a_src, 4000, SMALL, 0, 0, sig), 0);
		CHECK_EQ(sim_post_atomic(A, qa, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 4096,
					 sim_va(b_dst, 8192), b_dst->key, 5, 0, sig),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 5, IBV_WR_RDMA_WRITE, a_src, 2000, SMALL,
				       sim_va(b_dst, 2000), b_dst->key, 0),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 6, IBV_WR_RDMA_READ, a_dst, 6000, SMALL,
				       sim_va(b_src, 6000), b_src->key, sig),
			 0);
		break;
	default:
		break;
	}
}

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static void verify(enum workload w)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	struct ibv_wc wc;

	switch (w) {
	case W_WRITE:
		SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, BIG);
		SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, SMALL);
		SIM_EXPECT_WC(B, 100, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, SMALL);
		CHECK_MEM(b_dst->host, a_src->host, BIG);
		CHECK_MEM(b_dst->host + 2000, a_src->host + 2000, SMALL);
		CHECK_EQ(b_dst->host[BIG], 0);
		CHECK_EQ(b_dst->host[2000 + SMALL], 0);
		break;
	case W_READ:
		SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, BIG);
		SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, SMALL);
		CHECK_MEM(a_dst->host, b_src->host, BIG);
		CHECK_MEM(a_dst->host + 2000, b_src->host + 2000, SMALL);
		CHECK_EQ(a_dst->host[BIG], 0);
		CHECK_EQ(a_dst->host[2000 + SMALL], 0);
		break;
	case W_SEND:
		SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, BIG);
		SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, SMALL);
		SIM_EXPECT_WC(B, 100, IBV_WC_SUCCESS, IBV_WC_RECV, BIG);
		SIM_EXPECT_WC(B, 101, IBV_WC_SUCCESS, IBV_WC_RECV, SMALL);
		CHECK_MEM(b_dst->host, a_src->host, BIG);
		CHECK_MEM(b_dst->host + 4096, a_src->host + 2000, SMALL);
		CHECK_EQ(b_dst->host[BIG], 0);
		CHECK_EQ(b_dst->host[4096 + SMALL], 0);
		break;
	case W_ATOMIC:
		SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
		SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 8);
		SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
		CHECK_EQ(u64_at(a_dst->host), 100);
		CHECK_EQ(u64_at(a_dst->host + 8), 105);
		CHECK_EQ(u64_at(a_dst->host + 16), 1);
		CHECK_EQ(u64_at(b_dst->host + 8192), 11); /* each executed exactly once */
		break;
	case W_MIXED:
		SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, BIG);
		SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, BIG);
		SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, SMALL);
		SIM_EXPECT_WC(A, 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
		SIM_EXPECT_WC(A, 6, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, SMALL);
		SIM_EXPECT_WC(B, 100, IBV_WC_SUCCESS, IBV_WC_RECV, SMALL);
		CHECK_MEM(b_dst->host, a_src->host, BIG);
		CHECK_MEM(a_dst->host, b_src->host, BIG);
		CHECK_MEM(b_dst->host + 4096, a_src->host + 4000, SMALL);
		CHECK_MEM(b_dst->host + 2000, a_src->host + 2000, SMALL);
		CHECK_MEM(a_dst->host + 6000, b_src->host + 6000, SMALL);
		CHECK_EQ(u64_at(a_dst->host + 4096), 100);
		CHECK_EQ(u64_at(b_dst->host + 8192), 105);
		break;
	default:
		break;
	}
	CHECK_EQ(sim_poll(A, &wc, 1), 0);
	CHECK_EQ(sim_poll(B, &wc, 1), 0);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
}

/* Runs the workload with the given faults; returns how many packets crossed each way. */
static void run(enum workload w, const struct sim_rule *rules, int nrules, uint64_t counts[2])
{
	setup();
	for (int i = 0; i < nrules; i++)
		sim_rule(&s, rules[i].dir, rules[i].index, rules[i].action, rules[i].delay_ns);
	post(w);
	failures_before = check_failures;
	REQUIRE(sim_run(&s, 5ull * 1000 * 1000 * 1000));
	verify(w);
	runs++;
	if (check_failures != failures_before) {
		fprintf(stderr, "  ^ workload %s (%s) with faults:", wl_names[w],
			sr ? "selective repeat" : "go-back-N");
		for (int i = 0; i < nrules; i++)
			fprintf(stderr, " [%s #%" PRIu64 " action %d delay %" PRIu64 "]",
				rules[i].dir == SIM_AB ? "A->B" : "B->A", rules[i].index,
				rules[i].action, rules[i].delay_ns);
		fprintf(stderr, "\n");
	}
	if (counts) {
		counts[0] = s.stats.entered[0];
		counts[1] = s.stats.entered[1];
	}
	sim_fini(&s);
}

static void exhaustive(enum workload w)
{
	uint64_t base[2];
	struct pos p[128];
	int np = 0;
	uint64_t before = runs;

	run(w, NULL, 0, base);
	/* Positions: every packet of the clean run and a few retransmissions beyond. */
	for (int d = 0; d < 2; d++)
		for (uint64_t i = 0; i < base[d] + 4 && np < 128; i++)
			p[np++] = (struct pos){d, i};

	for (int i = 0; i < np; i++) {
		struct sim_rule r[2] = {{p[i].dir, p[i].index, SIM_DROP, 0}};

		run(w, r, 1, NULL);
		r[0].action = SIM_DUP;
		r[0].delay_ns = 0;
		run(w, r, 1, NULL);
		r[0].delay_ns = 2500; /* the copy arrives after the next packets */
		run(w, r, 1, NULL);
		r[0].action = SIM_DELAY;
		r[0].delay_ns = 1500;
		run(w, r, 1, NULL);
		r[0].delay_ns = 50000;
		run(w, r, 1, NULL);
		for (int j = i + 1; j < np; j++) {
			r[1] = (struct sim_rule){p[j].dir, p[j].index, SIM_DROP, 0};
			run(w, r, 2, NULL);
		}
	}
	fprintf(stderr,
		"%s, %s: %d positions (%" PRIu64 " + %" PRIu64 " packets clean), %" PRIu64
		" runs\n",
		wl_names[w], sr ? "selective repeat" : "go-back-N", np, base[0], base[1],
		runs - before);
}

int main(void)
{
	for (int pass = 0; pass < 2; pass++) {
		sr = pass == 1;
		for (int w = 0; w < W__COUNT; w++)
			exhaustive((enum workload)w);
	}
	return check_exit();
}
