/* Error paths: remote access violations (key, bounds incl. va+len overflow, access flags),
 * invalid requests (disabled operation, misaligned atomic, receive too small, no responder
 * resources), local protection errors, RNR exhaustion and recovery, peer gone (retry
 * exhaustion at the right virtual time), flush in ERR, ORD on the wire, fence, duplicate
 * atomics, SQD, SRQ limit and COMM_EST. */
#include <stdlib.h>

#include "check.h"
#include "sim.h"

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *a_src, *a_dst, *b_src, *b_dst;
static struct sim_node *A, *B;

#define ALL_ACCESS                                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static void setup_cfg(const struct sim_qp_cfg *cfg, unsigned b_dst_access)
{
	sim_init(&s, 3);
	A = &s.node[SIM_A];
	B = &s.node[SIM_B];
	sim_connect(&s, cfg, &qa, &qb);
	a_src = sim_mr_reg(A, 1, 65536, ALL_ACCESS);
	a_dst = sim_mr_reg(A, 1, 65536, ALL_ACCESS);
	b_src = sim_mr_reg(B, 1, 65536, ALL_ACCESS);
	b_dst = sim_mr_reg(B, 1, 65536, b_dst_access);
	sim_fill(a_src->host, 65536, 1);
	sim_fill(b_src->host, 65536, 2);
}

static void setup(void)
{
	setup_cfg(NULL, ALL_ACCESS);
}

static void run_idle(void)
{
	REQUIRE(sim_run(&s, 100ull * 1000 * 1000 * 1000));
}

static void expect_empty(struct sim_node *n)
{
	struct ibv_wc wc;

	CHECK_EQ(sim_poll(n, &wc, 1), 0);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A remote error on WR 2 of 3 (WR 4 posted after the error): WR 1 succeeds, WR 2 gets
 * `status`, WR 3 and 4 are flushed; both QPs end in ERR; B's receive is flushed. */
static void remote_error(enum ibv_wr_opcode op, uint64_t va, uint32_t rkey, uint32_t len,
			 enum ibv_wc_status status, enum ibv_event_type b_event)
{
	uint64_t orig;

	setup();
	CHECK_EQ(sim_post_recv(qb, 50, b_dst, 0, 100), 0);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 3000, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD)
		CHECK_EQ(sim_post_atomic(A, qa, 2, op, a_dst, 0, va, rkey, 1, 0, IBV_SEND_SIGNALED),
			 0);
	else
		CHECK_EQ(sim_post_send(A, qa, 2, op, op == IBV_WR_RDMA_READ ? a_dst : a_src, 0, len,
				       va, rkey, IBV_SEND_SIGNALED),
			 0);
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_RDMA_WRITE, a_src, 0, 10, sim_va(b_dst, 0),
			       b_dst->key, 0),
		 0);
	memcpy(&orig, b_dst->host + 8000, 8);
	run_idle();
	CHECK_EQ(sim_post_send(A, qa, 4, IBV_WR_SEND, a_src, 0, 10, 0, 0, IBV_SEND_SIGNALED), 0);
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	SIM_EXPECT_WC(A, 2, status, 0, -1);
	SIM_EXPECT_WC(A, 3, IBV_WC_WR_FLUSH_ERR, 0, -1);
	SIM_EXPECT_WC(A, 4, IBV_WC_WR_FLUSH_ERR, 0, -1);
	SIM_EXPECT_WC(B, 50, IBV_WC_WR_FLUSH_ERR, 0, -1);
	expect_empty(A);
	expect_empty(B);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_ERR);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	CHECK(sim_has_event(B, b_event));
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_naks_sent], 1);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_naks_rcvd], 1);
	CHECK_MEM(b_dst->host, a_src->host, 3000);
	CHECK(all_zero(a_dst->host, 65536)); /* nothing read back */
	/* A WRITE that failed put no byte anywhere but where WR 1 wrote. */
	CHECK(all_zero(b_dst->host + 3000, 65536 - 3000));
	sim_fini(&s);
}

static void access_errors(void)
{
	/* Bad rkey. */
	remote_error(IBV_WR_RDMA_WRITE, 0x100000000ull, 0xBAD, 100, IBV_WC_REM_ACCESS_ERR,
		     IBV_EVENT_QP_ACCESS_ERR);
	remote_error(IBV_WR_RDMA_READ, 0x100000000ull, 0xBAD, 100, IBV_WC_REM_ACCESS_ERR,
		     IBV_EVENT_QP_ACCESS_ERR);
	/* Out of bounds: one byte past the end, and before the start. The MR's iova is known
	 * from sim_mr_reg's layout: use the MR itself. */
	setup();
	{
		uint64_t end = sim_va(b_dst, 65536);
		uint64_t start = sim_va(b_dst, 0);
		uint32_t key = b_dst->key;

		sim_fini(&s);
		remote_error(IBV_WR_RDMA_WRITE, end - 99, key, 100, IBV_WC_REM_ACCESS_ERR,
			     IBV_EVENT_QP_ACCESS_ERR);
		remote_error(IBV_WR_RDMA_WRITE, start - 1, key, 100, IBV_WC_REM_ACCESS_ERR,
			     IBV_EVENT_QP_ACCESS_ERR);
		remote_error(IBV_WR_RDMA_READ, end - 4000, key, 4001, IBV_WC_REM_ACCESS_ERR,
			     IBV_EVENT_QP_ACCESS_ERR);
		/* va + len overflows 2^64: must not wrap into the region. */
		remote_error(IBV_WR_RDMA_WRITE, UINT64_MAX - 10, key, 100, IBV_WC_REM_ACCESS_ERR,
			     IBV_EVENT_QP_ACCESS_ERR);
		remote_error(IBV_WR_RDMA_READ, UINT64_MAX - 10, key, 100, IBV_WC_REM_ACCESS_ERR,
			     IBV_EVENT_QP_ACCESS_ERR);
		remote_error(IBV_WR_ATOMIC_FETCH_AND_ADD, UINT64_MAX - 7, key, 8,
			     IBV_WC_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR);
		/* Misaligned atomic: Invalid Request. */
		remote_error(IBV_WR_ATOMIC_FETCH_AND_ADD, start + 8004, key, 8,
			     IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR);
	}
}

/* The MR lacks the right asked for: Remote Access Error. */
static void mr_access_flags(void)
{
	struct sim_qp_cfg cfg = {0};
	uint64_t v = 42, got;

	setup_cfg(&cfg, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 100, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE, a_src, 0, 100, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 100);
	SIM_EXPECT_WC(A, 2, IBV_WC_REM_ACCESS_ERR, 0, -1);
	CHECK(all_zero(b_dst->host, 65536));
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	sim_fini(&s);

	setup_cfg(&cfg, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	memcpy(b_dst->host + 64, &v, 8);
	CHECK_EQ(sim_post_atomic(A, qa, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 0, sim_va(b_dst, 64),
				 b_dst->key, 1, 0, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_ACCESS_ERR, 0, -1);
	memcpy(&got, b_dst->host + 64, 8);
	CHECK_EQ(got, 42);
	sim_fini(&s);
}

/* The QP's own access flags or resources do not allow the operation: Invalid Request. */
static void qp_disabled_ops(void)
{
	struct sim_qp_cfg cfg = {0};

	cfg.access = IBV_ACCESS_REMOTE_WRITE;
	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 100, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_INV_REQ_ERR, 0, -1);
	CHECK(sim_has_event(B, IBV_EVENT_QP_REQ_ERR));
	sim_fini(&s);

	memset(&cfg, 0, sizeof(cfg));
	cfg.max_rd_atomic = 4;
	cfg.no_defaults_rd_atomic = true; /* B has no responder resources */
	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 100, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_INV_REQ_ERR, 0, -1);
	sim_fini(&s);

	/* Our own ORD 0 forbids READ: a local error, nothing on the wire. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.no_defaults_rd_atomic = true;
	cfg.max_dest_rd_atomic = 4;
	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 100, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_LOC_QP_OP_ERR, 0, -1);
	CHECK_EQ(s.stats.entered[SIM_AB], 0);
	sim_fini(&s);
}

/* Receive buffer too small: Invalid Request to the sender, LOC_LEN_ERR on the receive. */
static void recv_too_small(void)
{
	setup();
	CHECK_EQ(sim_post_recv(qb, 50, b_dst, 0, 2000), 0);
	CHECK_EQ(sim_post_recv(qb, 51, b_dst, 4096, 2000), 0);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_SEND, a_src, 0, 3000, 0, 0, IBV_SEND_SIGNALED), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_INV_REQ_ERR, 0, -1);
	SIM_EXPECT_WC(B, 50, IBV_WC_LOC_LEN_ERR, 0, -1);
	SIM_EXPECT_WC(B, 51, IBV_WC_WR_FLUSH_ERR, 0, -1);
	expect_empty(A);
	expect_empty(B);
	CHECK(all_zero(b_dst->host + 2000, 65536 - 2000)); /* never past the buffer */
	sim_fini(&s);
}

/* A bad lkey on the sender: LOC_PROT_ERR after the earlier WR completed, rest flushed. */
static void local_prot(void)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;

	setup();
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 5000, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	sge = (struct ibv_sge){sim_va(a_src, 65000), 1000, a_src->key}; /* past the end */
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.rdma.remote_addr = sim_va(b_dst, 10000);
	wr.wr.rdma.rkey = b_dst->key;
	CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), 0);
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_RDMA_READ, a_dst, 0, 100, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 5000);
	SIM_EXPECT_WC(A, 2, IBV_WC_LOC_PROT_ERR, 0, -1);
	SIM_EXPECT_WC(A, 3, IBV_WC_WR_FLUSH_ERR, 0, -1);
	expect_empty(A);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_ERR);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	CHECK(all_zero(b_dst->host + 10000, 1000));
	/* Receives posted in ERR are flushed at once. */
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qa), &(struct ibv_recv_wr){.wr_id = 9}, NULL), 0);
	SIM_EXPECT_WC(A, 9, IBV_WC_WR_FLUSH_ERR, 0, -1);
	sim_fini(&s);
}

/* No receive posted, rnr_retry 2: three RNR NAKs, each after the NAKed wait, then
 * RNR_RETRY_EXC_ERR. */
static void rnr_exhausted(void)
{
	struct sim_qp_cfg cfg = {0};
	uint64_t wait = (uint64_t)roce_rnr_timer_us(14) * 1000;

	cfg.rnr_retry = 2;
	cfg.min_rnr_timer = 14; /* 1.28 ms */
	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_SEND, a_src, 0, 3000, 0, 0, IBV_SEND_SIGNALED), 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_SEND, a_src, 0, 10, 0, 0, IBV_SEND_SIGNALED), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_RNR_RETRY_EXC_ERR, 0, -1);
	SIM_EXPECT_WC(A, 2, IBV_WC_WR_FLUSH_ERR, 0, -1);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_rnr_naks_sent], 3);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_rnr_naks_rcvd], 3);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_ERR);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS); /* RNR leaves the responder as it was */
	/* Two full waits, plus a few link latencies. */
	CHECK(s.now >= 2 * wait && s.now < 2 * wait + 20000);
	sim_fini(&s);
}

/* RNR, then the receive appears: the SEND gets through, exactly once. */
static void rnr_recover(void)
{
	struct sim_qp_cfg cfg = {0};

	cfg.rnr_retry = 3;
	cfg.min_rnr_timer = 12;
	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(
	    sim_post_send(A, qa, 1, IBV_WR_SEND_WITH_IMM, a_src, 0, 3000, 0, 0, IBV_SEND_SIGNALED),
	    0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE_WITH_IMM, a_src, 0, 3000,
			       sim_va(b_dst, 8192), b_dst->key, IBV_SEND_SIGNALED),
		 0);
	sim_run(&s, 700000); /* ~1 RNR wait */
	CHECK(eng_qp_counters(qa)[ENG_CNT_rnr_naks_rcvd] >= 1);
	CHECK_EQ(sim_post_recv(qb, 50, b_dst, 0, 4096), 0);
	run_idle(); /* the WRITE with imm finds no receive: RNR again, until... */
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_ERR);
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 3000);
	SIM_EXPECT_WC(A, 2, IBV_WC_RNR_RETRY_EXC_ERR, 0, -1);
	SIM_EXPECT_WC(B, 50, IBV_WC_SUCCESS, IBV_WC_RECV, 3000);
	CHECK_MEM(b_dst->host, a_src->host, 3000);
	/* The WRITE's data landed (it was placed before its last packet was refused). */
	sim_fini(&s);

	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE_WITH_IMM, a_src, 0, 3000,
			       sim_va(b_dst, 8192), b_dst->key, IBV_SEND_SIGNALED),
		 0);
	sim_run(&s, 700000);
	CHECK(eng_qp_counters(qa)[ENG_CNT_rnr_naks_rcvd] >= 1);
	CHECK_EQ(sim_post_recv(qb, 51, NULL, 0, 0), 0);
	run_idle();
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	SIM_EXPECT_WC(B, 51, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 3000);
	CHECK_MEM(b_dst->host + 8192, a_src->host, 3000);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	expect_empty(A);
	expect_empty(B);
	sim_fini(&s);
}

static enum sim_action drop_all(struct sim *sim, int dir, uint64_t index, const struct roce_pkt *p,
				enum sim_action chosen, uint64_t *delay_ns, void *arg)
{
	(void)sim;
	(void)index;
	(void)p;
	(void)delay_ns;
	(void)arg;
	return dir == SIM_AB ? SIM_DROP : chosen;
}

/* The peer is gone: retry_cnt + 1 local ACK timeouts, then RETRY_EXC_ERR. */
static void peer_gone(uint8_t retry_cnt)
{
	struct sim_qp_cfg cfg = {0};
	uint64_t t = roce_ack_timeout_ns(12);

	cfg.retry_cnt = retry_cnt;
	cfg.timeout = 12; /* 16.8 ms */
	setup_cfg(&cfg, ALL_ACCESS);
	s.tap = drop_all;
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 5000, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_READ, a_dst, 0, 100, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_RETRY_EXC_ERR, 0, -1);
	SIM_EXPECT_WC(A, 2, IBV_WC_WR_FLUSH_ERR, 0, -1);
	expect_empty(A);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_ack_timeouts], retry_cnt + 1);
	CHECK_EQ(s.now, (uint64_t)(retry_cnt + 1) * t);
	/* 6 packets per round: 5 WRITE + 1 READ request. */
	CHECK_EQ(s.stats.entered[SIM_AB], 6u * (retry_cnt + 1));
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_ERR);
	CHECK(all_zero(b_dst->host, 65536));
	/* Posted after ERR: flushed at once. */
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_SEND, a_src, 0, 1, 0, 0, 0), 0);
	SIM_EXPECT_WC(A, 3, IBV_WC_WR_FLUSH_ERR, 0, -1);
	sim_fini(&s);
}

/* ---- ORD on the wire ---- */

struct ord_probe {
	int outstanding, max;
	int reqs;
};

static enum sim_action count_reads(struct sim *sim, int dir, uint64_t index,
				   const struct roce_pkt *p, enum sim_action chosen,
				   uint64_t *delay_ns, void *arg)
{
	struct ord_probe *o = arg;

	(void)sim;
	(void)index;
	(void)delay_ns;
	/* A request enters the wire; the response that completes it left B one latency
	 * before A sees it, so count it at A's side: the requester cannot send the next
	 * request before that anyway. Outstanding = requests sent - last responses sent. */
	if (dir == SIM_AB && p->bth.opcode == ROCE_RC_READ_REQUEST) {
		o->reqs++;
		if (++o->outstanding > o->max)
			o->max = o->outstanding;
	}
	if (dir == SIM_BA &&
	    (p->bth.opcode == ROCE_RC_READ_RESPONSE_LAST ||
	     p->bth.opcode == ROCE_RC_READ_RESPONSE_ONLY || p->bth.opcode == ROCE_RC_ATOMIC_ACK))
		o->outstanding--;
	return chosen;
}

static void ord_limit(void)
{
	struct sim_qp_cfg cfg = {0};
	struct ord_probe probe = {0};

	cfg.max_rd_atomic = 2;
	cfg.max_dest_rd_atomic = 2;
	setup_cfg(&cfg, ALL_ACCESS);
	s.tap = count_reads;
	s.tap_arg = &probe;
	for (int i = 0; i < 10; i++)
		CHECK_EQ(sim_post_send(A, qa, 1 + i, IBV_WR_RDMA_READ, a_dst, 3000u * i, 2500,
				       sim_va(b_src, 3000u * i), b_src->key, IBV_SEND_SIGNALED),
			 0);
	run_idle();
	for (int i = 0; i < 10; i++)
		SIM_EXPECT_WC(A, 1 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 2500);
	for (int i = 0; i < 10; i++)
		CHECK_MEM(a_dst->host + 3000 * i, b_src->host + 3000 * i, 2500);
	CHECK_EQ(probe.reqs, 10);
	CHECK_EQ(probe.max, 2);
	sim_fini(&s);
}

/* rxe's limits: ORD and IRD 128 (perftest takes the peer's advertised 128). All 128 READs are
 * in flight at once, the responder queues all their responses without dropping a request, and
 * nothing is retransmitted. */
static void ord_ird_max(void)
{
	struct sim_qp_cfg cfg = {0};
	struct ord_probe probe = {0};
	const int n = 200;

	cfg.max_rd_atomic = ENG_MAX_RD_ATOMIC;
	cfg.max_dest_rd_atomic = ENG_MAX_RD_ATOMIC;
	CHECK_EQ(ENG_MAX_RD_ATOMIC, 128);
	setup_cfg(&cfg, ALL_ACCESS);
	s.tap = count_reads;
	s.tap_arg = &probe;
	for (int i = 0; i < n; i++)
		CHECK_EQ(sim_post_send(A, qa, 1 + i, IBV_WR_RDMA_READ, a_dst, 300u * i, 300,
				       sim_va(b_src, 300u * i), b_src->key, IBV_SEND_SIGNALED),
			 0);
	run_idle();
	for (int i = 0; i < n; i++)
		SIM_EXPECT_WC(A, 1 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 300);
	CHECK_MEM(a_dst->host, b_src->host, 300u * n);
	CHECK_EQ(probe.reqs, n);
	CHECK_EQ(probe.max, 128);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_resp_busy], 0);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_retransmits], 0);
	sim_fini(&s);
}

/* ---- fence ---- */

struct fence_probe {
	uint64_t read_resp_at, write_at;
};

static enum sim_action fence_tap(struct sim *sim, int dir, uint64_t index, const struct roce_pkt *p,
				 enum sim_action chosen, uint64_t *delay_ns, void *arg)
{
	struct fence_probe *f = arg;

	(void)index;
	(void)delay_ns;
	if (dir == SIM_BA && p->bth.opcode == ROCE_RC_READ_RESPONSE_LAST)
		f->read_resp_at = sim->now + sim->link[dir].latency_ns;
	if (dir == SIM_AB && p->bth.opcode == ROCE_RC_WRITE_ONLY && !f->write_at)
		f->write_at = sim->now;
	return chosen;
}

static void fence(void)
{
	struct fence_probe f = {0};

	setup();
	s.tap = fence_tap;
	s.tap_arg = &f;
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 3000, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE, a_dst, 0, 1000, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED | IBV_SEND_FENCE),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 3000);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 1000);
	CHECK(f.write_at >= f.read_resp_at && f.read_resp_at > 0);
	/* The fenced WRITE sent the bytes the READ brought in. */
	CHECK_MEM(b_dst->host, b_src->host, 1000);
	sim_fini(&s);
}

/* A lost atomic ACK: the retried atomic is answered from the saved result. */
static void dup_atomic(void)
{
	uint64_t v = 7, got;

	setup();
	memcpy(b_dst->host + 64, &v, 8);
	sim_rule(&s, SIM_BA, 0, SIM_DROP, 0);
	sim_rule(&s, SIM_AB, 0, SIM_DUP, 0); /* and a duplicate of the request itself */
	CHECK_EQ(sim_post_atomic(A, qa, 1, IBV_WR_ATOMIC_CMP_AND_SWP, a_dst, 0, sim_va(b_dst, 64),
				 b_dst->key, 7, 1000, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 8);
	memcpy(&got, a_dst->host, 8);
	CHECK_EQ(got, 7);
	memcpy(&got, b_dst->host + 64, 8);
	CHECK_EQ(got, 1000);
	/* The duplicate request was answered from the saved result, which stood in for the
	 * lost ACK: no timeout needed. */
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_dup_atomics_replayed], 1);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_ack_timeouts], 0);
	sim_fini(&s);

	/* Only the ACK lost: found by the timeout, replayed once. */
	setup();
	memcpy(b_dst->host + 64, &v, 8);
	sim_rule(&s, SIM_BA, 0, SIM_DROP, 0);
	CHECK_EQ(sim_post_atomic(A, qa, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 0, sim_va(b_dst, 64),
				 b_dst->key, 3, 0, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
	memcpy(&got, a_dst->host, 8);
	CHECK_EQ(got, 7);
	memcpy(&got, b_dst->host + 64, 8);
	CHECK_EQ(got, 10);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_dup_atomics_replayed], 1);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_ack_timeouts], 1);
	sim_fini(&s);
}

/* SQD: WRs in flight finish, later ones wait, SQ_DRAINED is reported; RTS resumes. */
static void sqd(void)
{
	setup();
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 5000, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	sim_step(&s); /* WR 1 is on the wire */
	eng_qp_set_state(qa, IBV_QPS_SQD, s.now);
	CHECK(!sim_has_event(A, IBV_EVENT_SQ_DRAINED));
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE, a_src, 0, 100, sim_va(b_dst, 9000),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 5000);
	expect_empty(A);
	CHECK(sim_has_event(A, IBV_EVENT_SQ_DRAINED));
	CHECK(all_zero(b_dst->host + 9000, 100));
	eng_qp_set_state(qa, IBV_QPS_RTS, s.now);
	run_idle();
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	CHECK_MEM(b_dst->host + 9000, a_src->host, 100);
	sim_fini(&s);
}

static int srq_events;
static void on_srq_limit(struct eng_rq *rq)
{
	(void)rq;
	srq_events++;
}

/* SRQ: receives shared, the limit event fires once when the count drops below it. */
static void srq_limit(void)
{
	struct eng_rq srq;
	struct sim_qp_cfg cfg = {0};
	struct ibv_sge sge[4];
	struct ibv_recv_wr wr[4];
	const struct ibv_recv_wr *bad;

	CHECK_EQ(eng_rq_init(&srq, 16, 4, true), 0);
	srq.limit_event = on_srq_limit;
	cfg.srq_b = &srq;
	setup_cfg(&cfg, ALL_ACCESS);
	for (int i = 0; i < 4; i++) {
		sge[i] = (struct ibv_sge){sim_va(b_dst, 4096u * i), 4096, b_dst->key};
		wr[i] = (struct ibv_recv_wr){.wr_id = 60u + i,
					     .sg_list = &sge[i],
					     .num_sge = 1,
					     .next = i < 3 ? &wr[i + 1] : NULL};
	}
	CHECK_EQ(eng_rq_post(&srq, wr, &bad), 0);
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qb), wr, &bad),
		 -EINVAL); /* SRQ QP: post to the SRQ */
	srq.limit = 3;
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_SEND, a_src, 0, 2000, 0, 0, IBV_SEND_SIGNALED), 0);
	run_idle();
	CHECK_EQ(srq_events, 0); /* 3 left: not below 3 */
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_SEND, a_src, 0, 2000, 0, 0, IBV_SEND_SIGNALED), 0);
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_SEND, a_src, 0, 2000, 0, 0, IBV_SEND_SIGNALED), 0);
	run_idle();
	CHECK_EQ(srq_events, 1);
	CHECK_EQ(srq.limit, 0); /* disarmed */
	CHECK_EQ(eng_rq_count(&srq), 1);
	for (int i = 0; i < 3; i++) {
		SIM_EXPECT_WC(A, 1 + i, IBV_WC_SUCCESS, IBV_WC_SEND, 2000);
		SIM_EXPECT_WC(B, 60 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 2000);
	}
	eng_qp_set_state(qb, IBV_QPS_ERR, s.now);
	CHECK(sim_has_event(B, IBV_EVENT_QP_LAST_WQE_REACHED));
	CHECK_EQ(eng_rq_count(&srq), 1); /* an SRQ is not flushed by one QP */
	sim_fini(&s);
	eng_rq_fini(&srq);
}

/* COMM_EST: the first packet received in RTR. */
static void comm_est(void)
{
	struct eng_qp_attr at = {0};

	setup();
	eng_qp_set_state(qb, IBV_QPS_RESET, s.now);
	eng_qp_set_state(qb, IBV_QPS_INIT, s.now);
	at.dest_qpn = eng_qp_num(qa);
	at.rq_psn = 0x100;
	at.sq_psn = 0x200;
	at.pmtu = 1024;
	at.access = IBV_ACCESS_REMOTE_WRITE;
	at.max_dest_rd_atomic = 1;
	at.pkey = 0xFFFF;
	eng_qp_set_attr(qb, &at);
	eng_qp_set_state(qb, IBV_QPS_RTR, s.now);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 100, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	CHECK(sim_has_event(B, IBV_EVENT_COMM_EST));
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	CHECK_MEM(b_dst->host, a_src->host, 100);
	/* RTR does not send requests: posting is refused. */
	CHECK_EQ(sim_post_send(B, qb, 5, IBV_WR_SEND, b_src, 0, 1, 0, 0, 0), -EINVAL);
	sim_fini(&s);
}

/* Zero-length RDMA needs no valid key (spec 3). */
static void zero_len_no_key(void)
{
	setup();
	CHECK_EQ(
	    sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, NULL, 0, 0, 12345, 0xBAD, IBV_SEND_SIGNALED),
	    0);
	CHECK_EQ(
	    sim_post_send(A, qa, 2, IBV_WR_RDMA_READ, NULL, 0, 0, 12345, 0xBAD, IBV_SEND_SIGNALED),
	    0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 0);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	sim_fini(&s);
}

/* Post-time checks. */
static void post_checks(void)
{
	struct ibv_sge sge[ENG_MAX_SGE + 1];
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad = NULL;

	setup();
	for (int i = 0; i <= ENG_MAX_SGE; i++)
		sge[i] = (struct ibv_sge){sim_va(a_src, 0), 1, a_src->key};
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sge;
	wr.num_sge = ENG_MAX_SGE + 1;
	CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), -EINVAL);
	CHECK(bad == &wr);
	wr.num_sge = 2;
	sge[0].length = 0x80000000u;
	sge[1].length = 1; /* total > 2 GiB */
	CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), -EINVAL);
	wr.opcode = IBV_WR_BIND_MW;
	wr.num_sge = 0;
	CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), -EINVAL);
	expect_empty(A);
	CHECK_EQ(s.stats.entered[SIM_AB], 0);
	sim_fini(&s);
}

/* A duplicate READ is checked again: the region was invalidated after the first execution,
 * so the retried READ is dropped and the requester runs out of retries. */
static void dup_read_revalidated(void)
{
	struct sim_qp_cfg cfg = {0};

	cfg.retry_cnt = 1;
	setup_cfg(&cfg, ALL_ACCESS);
	sim_rule(&s, SIM_BA, 0, SIM_DROP, 0); /* first response packet lost */
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 3000, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	sim_step(&s); /* request out */
	sim_step(&s); /* request in, responses out */
	b_src->valid = false;
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_RETRY_EXC_ERR, 0, -1);
	CHECK(eng_qp_counters(qb)[ENG_CNT_drop_dup_unmatched] >= 1);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_dup_reads_replayed], 0);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	CHECK(all_zero(a_dst->host, 65536)); /* nothing placed from a gap */
	sim_fini(&s);
}

/* The region goes away while read responses are being produced: NAK remote access. */
static void read_mr_gone_midway(void)
{
	setup();
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 5000, sim_va(b_src, 0),
			       b_src->key, IBV_SEND_SIGNALED),
		 0);
	sim_step(&s); /* request out */
	/* Deliver the request without letting B produce output. */
	s.now += s.link[SIM_AB].latency_ns;
	{
		struct sim_inflight f = s.heap[0];

		s.nheap = 0;
		eng_qp_input(qb, &f.pkt, s.now);
		free(f.bytes);
	}
	b_src->valid = false;
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_ACCESS_ERR, 0, -1);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	CHECK(all_zero(a_dst->host, 65536));
	sim_fini(&s);
}

/* SEND with Invalidate of an R_Key that cannot be invalidated: the receive fails (spec 5.4
 * class J), no NAK; the sender runs out of retries. */
static void send_inv_bad_key(void)
{
	struct sim_qp_cfg cfg = {0};
	struct ibv_send_wr w = {0};
	struct ibv_sge sge;
	const struct ibv_send_wr *bad;

	cfg.retry_cnt = 1;
	setup_cfg(&cfg, ALL_ACCESS);
	CHECK_EQ(sim_post_recv(qb, 5, b_dst, 0, 4096), 0);
	sge = (struct ibv_sge){sim_va(a_src, 0), 100, a_src->key};
	w.wr_id = 4;
	w.opcode = IBV_WR_SEND_WITH_INV;
	w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.invalidate_rkey = 0xBAD;
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(B, 5, IBV_WC_REM_INV_REQ_ERR, 0, -1);
	SIM_EXPECT_WC(A, 4, IBV_WC_RETRY_EXC_ERR, 0, -1);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	sim_fini(&s);
}

/* RESET forgets everything without completions; the QP can be connected again. */
static void reset_reuse(void)
{
	struct eng_qp_attr at[2];

	setup();
	CHECK_EQ(sim_post_recv(qb, 5, b_dst, 0, 4096), 0);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_SEND, a_src, 0, 100, 0, 0, IBV_SEND_SIGNALED), 0);
	eng_qp_set_state(qa, IBV_QPS_RESET, s.now);
	eng_qp_set_state(qb, IBV_QPS_RESET, s.now);
	run_idle();
	expect_empty(A);
	expect_empty(B);
	for (int i = 0; i < 2; i++) {
		memset(&at[i], 0, sizeof(at[i]));
		at[i].dest_qpn = eng_qp_num(i ? qa : qb);
		at[i].sq_psn = i ? 0x777 : 0x555;
		at[i].rq_psn = i ? 0x555 : 0x777;
		at[i].pmtu = 512;
		at[i].access = IBV_ACCESS_REMOTE_WRITE;
		at[i].timeout = 10;
		at[i].retry_cnt = 7;
		at[i].rnr_retry = 7;
		at[i].pkey = 0xFFFF;
		eng_qp_set_state(i ? qb : qa, IBV_QPS_INIT, s.now);
		eng_qp_set_attr(i ? qb : qa, &at[i]);
		eng_qp_set_state(i ? qb : qa, IBV_QPS_RTR, s.now);
		eng_qp_set_state(i ? qb : qa, IBV_QPS_RTS, s.now);
	}
	CHECK_EQ(sim_post_recv(qb, 6, b_dst, 0, 4096), 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_SEND, a_src, 0, 1000, 0, 0, IBV_SEND_SIGNALED), 0);
	run_idle();
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 1000);
	SIM_EXPECT_WC(B, 6, IBV_WC_SUCCESS, IBV_WC_RECV, 1000);
	CHECK_MEM(b_dst->host, a_src->host, 1000);
	expect_empty(A);
	expect_empty(B);
	sim_fini(&s);
}

int main(void)
{
	access_errors();
	mr_access_flags();
	qp_disabled_ops();
	recv_too_small();
	local_prot();
	rnr_exhausted();
	rnr_recover();
	peer_gone(3);
	peer_gone(1);
	ord_limit();
	ord_ird_max();
	fence();
	dup_atomic();
	sqd();
	srq_limit();
	comm_est();
	zero_len_no_key();
	post_checks();
	dup_read_revalidated();
	read_mr_gone_midway();
	send_inv_bad_key();
	reset_reuse();
	return check_exit();
}
