/* PSN wrap (starting PSNs just below 2^24) for long messages in both directions, clean and
 * with losses placed around the wrap; and the requester's wire discipline: at most 128
 * unacknowledged PSNs in flight, AckReq at least every 66th packet and on every last one. */
#include "check.h"
#include "util/psn.h"
#include "sim.h"

#define MIB (1u << 20)

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *a_src, *a_dst, *b_src, *b_dst;

struct wire_probe {
	uint32_t noack_run, max_noack_run;
	uint64_t ack_at[16384];
	uint32_t ack_psn[16384];
	int nacks;
	int32_t max_inflight;
	bool last_without_ackreq;
};

static enum sim_action probe_tap(struct sim *sim, int dir, uint64_t index, const struct roce_pkt *p,
				 enum sim_action chosen, uint64_t *delay_ns, void *arg)
{
	struct wire_probe *w = arg;
	const struct roce_opinfo *oi = roce_opinfo(p->bth.opcode);

	(void)index;
	(void)delay_ns;
	if (chosen == SIM_DROP)
		return chosen;
	/* Anything B sends answers A's requests up to its PSN (read responses included). */
	if (dir == SIM_BA && oi && oi->kind != ROCE_KIND_SEND && oi->kind != ROCE_KIND_WRITE &&
	    oi->kind != ROCE_KIND_READ_REQ && w->nacks < 16384) {
		w->ack_at[w->nacks] = sim->now + sim->link[dir].latency_ns;
		w->ack_psn[w->nacks++] = p->bth.psn;
	}
	if (dir == SIM_AB && oi && oi->kind != ROCE_KIND_ACK) {
		int32_t newest = -1;
		uint32_t acked = 0;

		/* The newest ACK A had received when it sent this packet. */
		for (int i = w->nacks - 1; i >= 0; i--) {
			if (w->ack_at[i] <= sim->now) {
				acked = w->ack_psn[i];
				newest = i;
				break;
			}
		}
		if (newest >= 0) {
			int32_t inflight = psn_cmp(p->bth.psn, acked);

			if (inflight > w->max_inflight)
				w->max_inflight = inflight;
		}
		if ((oi->pos & ROCE_POS_LAST) && !p->bth.ackreq)
			w->last_without_ackreq = true;
		if (p->bth.ackreq) {
			w->noack_run = 0;
		} else if (++w->noack_run > w->max_noack_run) {
			w->max_noack_run = w->noack_run;
		}
	}
	return chosen;
}

static void setup(uint32_t psn_a, uint32_t psn_b)
{
	struct sim_qp_cfg cfg = {0};
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	sim_init(&s, 5);
	cfg.pmtu = 256;
	cfg.timeout = 8;
	cfg.psn_a = psn_a;
	cfg.psn_b = psn_b;
	sim_connect(&s, &cfg, &qa, &qb);
	a_src = sim_mr_reg(&s.node[SIM_A], 1, MIB, acc);
	a_dst = sim_mr_reg(&s.node[SIM_A], 1, MIB, acc);
	b_src = sim_mr_reg(&s.node[SIM_B], 1, MIB, acc);
	b_dst = sim_mr_reg(&s.node[SIM_B], 1, MIB, acc);
	sim_fill(a_src->host, MIB, 1);
	sim_fill(b_src->host, MIB, 2);
}

/* A: WRITE 1 MiB, READ 1 MiB, SEND 64 KiB; B at the same time: SEND 64 KiB, WRITE 100 KiB. */
static void traffic(const char *what)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	struct ibv_wc wc;
	int fails = check_failures;

	CHECK_EQ(sim_post_recv(qb, 50, b_dst, MIB - 65536, 65536), 0);
	CHECK_EQ(sim_post_recv(qa, 60, a_dst, MIB - 65536, 65536), 0);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, MIB - 65536, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_READ, a_dst, 0, MIB - 65536, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_SEND, a_src, 0, 65536, 0, 0, IBV_SEND_SIGNALED), 0);
	CHECK_EQ(sim_post_send(B, qb, 4, IBV_WR_SEND, b_src, 0, 65536, 0, 0, IBV_SEND_SIGNALED), 0);
	REQUIRE(sim_run(&s, 100ull * 1000 * 1000 * 1000));
	/* Each node's CQ holds its send completions (in post order) and its receive. */
	{
		const uint64_t want_send[2][3] = {{1, 2, 3}, {4, 0, 0}};
		const int nsend[2] = {3, 1};

		for (int n = 0; n < 2; n++) {
			int si = 0, nrecv = 0;

			while (sim_poll(&s.node[n], &wc, 1) == 1) {
				CHECK_EQ(wc.status, IBV_WC_SUCCESS);
				if (wc.opcode & IBV_WC_RECV) {
					CHECK_EQ(wc.wr_id, n == 0 ? 60 : 50);
					CHECK_EQ(wc.byte_len, 65536);
					nrecv++;
				} else {
					CHECK(si < nsend[n]);
					if (si < nsend[n])
						CHECK_EQ(wc.wr_id, want_send[n][si]);
					si++;
				}
			}
			CHECK_EQ(si, nsend[n]);
			CHECK_EQ(nrecv, 1);
		}
	}
	CHECK_MEM(b_dst->host, a_src->host, MIB - 65536);
	CHECK_MEM(a_dst->host, b_src->host, MIB - 65536);
	CHECK_MEM(b_dst->host + MIB - 65536, a_src->host, 65536);
	CHECK_MEM(a_dst->host + MIB - 65536, b_src->host, 65536);
	if (check_failures != fails)
		fprintf(stderr, "  ^ in %s\n", what);
	sim_fini(&s);
}

int main(void)
{
	static struct wire_probe probe;
	const uint32_t starts[] = {0xFFFFFF, 0xFFFFF0, 0xFFF000};

	for (size_t i = 0; i < sizeof(starts) / sizeof(starts[0]); i++) {
		setup(starts[i], starts[i]);
		traffic("clean");
	}
	/* Losses right at the wrap: A's packets 0..2 are PSN 0xFFFFFF, 0, 1. */
	for (uint64_t k = 0; k < 3; k++) {
		setup(0xFFFFFF, 0xFFFFFE);
		sim_rule(&s, SIM_AB, k, SIM_DROP, 0);
		sim_rule(&s, SIM_BA, k, SIM_DROP, 0);
		sim_rule(&s, SIM_AB, 100 + k, SIM_DUP, 3000);
		traffic("losses at the wrap");
	}
	/* Wire discipline on a clean run. */
	setup(0xFFFFFF, 0x10);
	memset(&probe, 0, sizeof(probe));
	s.tap = probe_tap;
	s.tap_arg = &probe;
	traffic("probe");
	CHECK(probe.max_inflight <= 128);
	CHECK(probe.max_inflight >= 100); /* and the window is actually used */
	CHECK_EQ(probe.max_noack_run, 65);
	CHECK(!probe.last_without_ackreq);
	fprintf(stderr, "max in flight %d, longest run without AckReq %u\n", probe.max_inflight,
		probe.max_noack_run);
	return check_exit();
}
