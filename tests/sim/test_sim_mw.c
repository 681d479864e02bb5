/* Memory windows through the engine: BIND_MW and LOCAL_INV as local operations of the send
 * queue (run in order, once, without packets; completions in order; fence; errors and flush;
 * which QP types take them), and the responder's key resolution through windows (WRITE, READ,
 * atomics through a window's R_Key; out of the window, after LOCAL_INV or a remote SEND with
 * Invalidate, through another QP than a type 2 window's: Remote Access Error). The windows are
 * obj/mw.c's (the harness's env binds them to its regions). */
#include <stdlib.h>

#include "check.h"
#include "sim.h"

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *a_src, *a_dst, *b_dst;
static struct sim_node *A, *B;

#define RW	   (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define ALL_ACCESS (RW | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static void setup_cfg(const struct sim_qp_cfg *cfg)
{
	sim_init(&s, 11);
	A = &s.node[SIM_A];
	B = &s.node[SIM_B];
	sim_connect(&s, cfg, &qa, &qb);
	a_src = sim_mr_reg(A, 1, 65536, ALL_ACCESS);
	a_dst = sim_mr_reg(A, 1, 65536, ALL_ACCESS | IBV_ACCESS_MW_BIND);
	/* B's region grants no remote access itself: only its windows do. */
	b_dst = sim_mr_reg(B, 1, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	sim_fill(a_src->host, 65536, 1);
	sim_fill(b_dst->host, 65536, 2);
}

static void setup(void)
{
	setup_cfg(NULL);
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

static uint64_t cnt(struct eng_qp *qp, enum eng_counter c)
{
	return eng_qp_counters(qp)[c];
}

/* B binds a window of `type` to [b_dst + 4096, + 8192) on qb; returns its new key. */
static uint32_t bind_b(enum ibv_mw_type type, unsigned access, struct obj_mw **out)
{
	struct obj_mw *mw = sim_mw_alloc(B, 1, type);
	uint32_t key = 0;

	CHECK_EQ(sim_post_bind(B, qb, 77, mw, b_dst, 4096, 8192, access, IBV_SEND_SIGNALED, &key),
		 0);
	run_idle();
	SIM_EXPECT_WC(B, 77, IBV_WC_SUCCESS, IBV_WC_BIND_MW, 0);
	CHECK_EQ(mw->key, key);
	if (out)
		*out = mw;
	return key;
}

/* A's WR 1 through `key` at `va` fails with Remote Access Error; B's QP goes to ERR. */
static void expect_refused(enum ibv_wr_opcode op, uint64_t va, uint32_t key, uint32_t len)
{
	CHECK_EQ(sim_post_send(A, qa, 1, op, op == IBV_WR_RDMA_READ ? a_dst : a_src, 0, len, va,
			       key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_ACCESS_ERR,
		      op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, -1);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_ERR);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	CHECK(sim_has_event(B, IBV_EVENT_QP_ACCESS_ERR));
}

/* WRITE, READ and an atomic through a type 2 window; the window's rights, not the region's. */
static void data_through_window(void)
{
	setup();
	uint32_t key = bind_b(IBV_MW_TYPE_2, ALL_ACCESS, NULL);
	uint64_t base = sim_va(b_dst, 4096);

	CHECK_EQ(cnt(qb, ENG_CNT_local_ops), 1);
	CHECK_EQ(cnt(qb, ENG_CNT_tx_packets), 0); /* the bind sent nothing */
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 5000, base + 100, key,
			       IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(
	    sim_post_send(A, qa, 2, IBV_WR_RDMA_READ, a_dst, 0, 8192, base, key, IBV_SEND_SIGNALED),
	    0);
	CHECK_EQ(sim_post_atomic(A, qa, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 16384, base + 8, key,
				 5, 0, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 5000);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 8192);
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
	CHECK_MEM(b_dst->host + 4096 + 100, a_src->host, 5000);
	CHECK_MEM(a_dst->host + 100, a_src->host, 5000); /* read back what was written */
	expect_empty(B);
	sim_fini(&s);

	/* A window without remote read: READ refused, though the region is B's. */
	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	expect_refused(IBV_WR_RDMA_READ, sim_va(b_dst, 4096), key, 8);
	sim_fini(&s);
}

/* Out of the window (inside the region), the window's old key, and a type 2 window reached
 * through another QP of the same PD. */
static void refused(void)
{
	uint32_t key;

	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	expect_refused(IBV_WR_RDMA_WRITE, sim_va(b_dst, 4096 + 8192 - 10), key, 11);
	CHECK(b_dst->host[4096 + 8192] != 0); /* nothing placed, not even the first bytes */
	sim_fini(&s);

	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	expect_refused(IBV_WR_RDMA_WRITE, sim_va(b_dst, 4095), key, 2);
	sim_fini(&s);

	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	expect_refused(IBV_WR_RDMA_WRITE, sim_va(b_dst, 4096), key - 1, 8);
	sim_fini(&s);

	/* A second QP pair: the window is qb's, the WRITE comes in at qb2. */
	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	{
		struct eng_qp *qa2, *qb2;

		sim_connect(&s, NULL, &qa2, &qb2);
		CHECK_EQ(sim_post_send(A, qa2, 9, IBV_WR_RDMA_WRITE, a_src, 0, 8,
				       sim_va(b_dst, 4096), key, IBV_SEND_SIGNALED),
			 0);
		run_idle();
		SIM_EXPECT_WC(A, 9, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, -1);
		CHECK_EQ(eng_qp_state(qb2), IBV_QPS_ERR);
		CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	}
	/* ... while qb still takes it. */
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 8, sim_va(b_dst, 4096), key,
			       IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 8);
	sim_fini(&s);

	/* A type 1 window answers every QP of its PD. */
	setup();
	key = bind_b(IBV_MW_TYPE_1, RW, NULL);
	{
		struct eng_qp *qa2, *qb2;

		sim_connect(&s, NULL, &qa2, &qb2);
		CHECK_EQ(sim_post_send(A, qa2, 9, IBV_WR_RDMA_WRITE, a_src, 0, 8,
				       sim_va(b_dst, 4096), key, IBV_SEND_SIGNALED),
			 0);
		run_idle();
		SIM_EXPECT_WC(A, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 8);
	}
	sim_fini(&s);
}

/* LOCAL_INV, and a SEND with Invalidate from the peer: the key stops working. */
static void invalidate(void)
{
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;
	uint32_t key;

	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	wr.wr_id = 5;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = key;
	CHECK_EQ(eng_qp_post_send(qb, &wr, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(B, 5, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, 0);
	expect_refused(IBV_WR_RDMA_WRITE, sim_va(b_dst, 4096), key, 8);
	sim_fini(&s);

	setup();
	key = bind_b(IBV_MW_TYPE_2, RW, NULL);
	CHECK_EQ(sim_post_recv(qb, 50, b_dst, 0, 64), 0);
	wr = (struct ibv_send_wr){.wr_id = 6,
				  .opcode = IBV_WR_SEND_WITH_INV,
				  .send_flags = IBV_SEND_SIGNALED,
				  .invalidate_rkey = key};
	CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(A, 6, IBV_WC_SUCCESS, IBV_WC_SEND, 0);
	{
		struct ibv_wc wc;

		REQUIRE(sim_poll(B, &wc, 1) == 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK(wc.wc_flags & IBV_WC_WITH_INV);
		CHECK_EQ(wc.invalidated_rkey, key);
	}
	expect_refused(IBV_WR_RDMA_WRITE, sim_va(b_dst, 4096), key, 8);
	sim_fini(&s);

	/* A type 1 window cannot be invalidated remotely (o10-37.2.26): the receive fails
	 * (class J: no NAK, the sender runs out of retries), as for any key that cannot be. */
	struct sim_qp_cfg cfg = {.retry_cnt = 1};
	setup_cfg(&cfg);
	key = bind_b(IBV_MW_TYPE_1, RW, NULL);
	CHECK_EQ(sim_post_recv(qb, 50, b_dst, 0, 64), 0);
	wr.invalidate_rkey = key;
	CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(B, 50, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, -1);
	SIM_EXPECT_WC(A, 6, IBV_WC_RETRY_EXC_ERR, IBV_WC_SEND, -1);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	sim_fini(&s);
}

static enum sim_action drop_some(struct sim *sim, int dir, uint64_t index, const struct roce_pkt *p,
				 enum sim_action chosen, uint64_t *delay_ns, void *arg)
{
	(void)sim;
	(void)p;
	(void)delay_ns;
	(void)arg;
	/* B's 2nd and 5th request packets (one in each WRITE around the bind), and A's first
	 * ACK. */
	if ((dir == SIM_BA && (index == 1 || index == 4)) || (dir == SIM_AB && index == 0))
		return SIM_DROP;
	return chosen;
}

/* A bind between WRITEs runs once, in order, though the WRITEs around it are sent again
 * (go-back-N); completions come in posting order; the window's key works afterwards. */
static void in_order_with_loss(void)
{
	struct obj_mw *mw;
	uint32_t key = 0;

	setup();
	s.tap = drop_some;
	mw = sim_mw_alloc(B, 1, IBV_MW_TYPE_2);
	/* B's own stream: B writes to A around its bind (the window is B's). */
	struct sim_mr *b_src = sim_mr_reg(B, 1, 65536, ALL_ACCESS);
	CHECK_EQ(sim_post_send(B, qb, 1, IBV_WR_RDMA_WRITE, b_src, 0, 3000, sim_va(a_dst, 0),
			       a_dst->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_bind(B, qb, 2, mw, b_dst, 0, 4096, RW, IBV_SEND_SIGNALED, &key), 0);
	CHECK_EQ(sim_post_send(B, qb, 3, IBV_WR_RDMA_WRITE, b_src, 0, 3000, sim_va(a_dst, 8192),
			       a_dst->key, IBV_SEND_SIGNALED),
		 0);
	/* Unsignaled: completes silently. */
	struct obj_mw *mw2 = sim_mw_alloc(B, 1, IBV_MW_TYPE_1);
	CHECK_EQ(sim_post_bind(B, qb, 4, mw2, b_dst, 0, 64, RW, 0, NULL), 0);
	CHECK_EQ(sim_post_send(B, qb, 5, IBV_WR_RDMA_WRITE, b_src, 0, 100, sim_va(a_dst, 16384),
			       a_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(B, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	SIM_EXPECT_WC(B, 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW, 0);
	SIM_EXPECT_WC(B, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	SIM_EXPECT_WC(B, 5, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	expect_empty(B);
	CHECK(cnt(qb, ENG_CNT_retransmits) > 0);
	CHECK_EQ(cnt(qb, ENG_CNT_local_ops), 2);
	CHECK_MEM(a_dst->host + 8192, b_src->host, 3000);
	s.tap = NULL;
	CHECK_EQ(sim_post_send(A, qa, 7, IBV_WR_RDMA_WRITE, a_src, 0, 4096, sim_va(b_dst, 0), key,
			       IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 7, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 4096);
	CHECK_MEM(b_dst->host, a_src->host, 4096);
	sim_fini(&s);
}

/* With IBV_SEND_FENCE a local operation waits for every earlier WQE to complete; without, it
 * runs as soon as the requester reaches it. */
static void fence(void)
{
	struct obj_mw *mw;

	setup();
	mw = sim_mw_alloc(A, 1, IBV_MW_TYPE_2);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 2000, sim_va(a_dst, 0), 0xBAD,
			       IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(
	    sim_post_bind(A, qa, 2, mw, a_dst, 0, 64, RW, IBV_SEND_SIGNALED | IBV_SEND_FENCE, NULL),
	    0);
	sim_step(&s);
	CHECK_EQ(cnt(qa, ENG_CNT_local_ops), 0); /* the WRITE is not acknowledged yet */
	run_idle();
	/* The WRITE failed (bad key): the fenced bind never ran, it is flushed. */
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, -1);
	SIM_EXPECT_WC(A, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_BIND_MW, -1);
	CHECK_EQ(cnt(qa, ENG_CNT_local_ops), 0);
	CHECK(!mw->mr);
	sim_fini(&s);

	setup();
	mw = sim_mw_alloc(A, 1, IBV_MW_TYPE_2);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 2000, sim_va(a_dst, 0), 0xBAD,
			       IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_bind(A, qa, 2, mw, a_dst, 0, 64, RW, IBV_SEND_SIGNALED, NULL), 0);
	sim_step(&s);
	CHECK_EQ(cnt(qa, ENG_CNT_local_ops), 1); /* unfenced: ran behind the WRITE's packets */
	CHECK(mw->mr != NULL);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE, -1);
	SIM_EXPECT_WC(A, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_BIND_MW, -1); /* run, not completed */
	sim_fini(&s);

	/* Fenced behind a READ that succeeds: runs once the READ completed, then completes. */
	setup();
	mw = sim_mw_alloc(A, 1, IBV_MW_TYPE_2);
	uint32_t key = bind_b(IBV_MW_TYPE_2, IBV_ACCESS_REMOTE_READ, NULL);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_READ, a_dst, 0, 8192, sim_va(b_dst, 4096), key,
			       IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(
	    sim_post_bind(A, qa, 2, mw, a_dst, 0, 64, RW, IBV_SEND_SIGNALED | IBV_SEND_FENCE, NULL),
	    0);
	sim_step(&s);
	CHECK_EQ(cnt(qa, ENG_CNT_local_ops), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 8192);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW, 0);
	CHECK_EQ(cnt(qa, ENG_CNT_local_ops), 1);
	CHECK(mw->mr != NULL);
	CHECK_MEM(a_dst->host, b_dst->host + 4096, 8192);
	sim_fini(&s);
}

/* Refused local operations complete in error, in order, and the QP goes to ERR; later WQEs
 * are flushed; in ERR they flush at once. */
static void errors(void)
{
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;
	struct obj_mw *mw;

	/* A type 2 window bound twice. */
	setup();
	bind_b(IBV_MW_TYPE_2, RW, &mw);
	CHECK_EQ(sim_post_bind(B, qb, 2, mw, b_dst, 0, 64, RW, 0, NULL), 0);
	CHECK_EQ(sim_post_send(B, qb, 3, IBV_WR_RDMA_WRITE, a_src, 0, 8, sim_va(a_dst, 0),
			       a_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(B, 2, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW, -1); /* unsignaled: still */
	SIM_EXPECT_WC(B, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, -1);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	CHECK_EQ(cnt(qb, ENG_CNT_local_op_errors), 1);
	CHECK_EQ(s.stats.entered[SIM_BA], 0);
	/* Posted in ERR: flushed at once, with their opcodes. */
	CHECK_EQ(sim_post_bind(B, qb, 4, mw, b_dst, 0, 64, RW, 0, NULL), 0);
	wr = (struct ibv_send_wr){.wr_id = 5, .opcode = IBV_WR_LOCAL_INV, .invalidate_rkey = 1};
	CHECK_EQ(eng_qp_post_send(qb, &wr, &bad, s.now), 0);
	SIM_EXPECT_WC(B, 4, IBV_WC_WR_FLUSH_ERR, IBV_WC_BIND_MW, -1);
	SIM_EXPECT_WC(B, 5, IBV_WC_WR_FLUSH_ERR, IBV_WC_LOCAL_INV, -1);
	sim_fini(&s);

	/* LOCAL_INV of no window, and of a registered region (not invalidatable locally). */
	for (int i = 0; i < 2; i++) {
		setup();
		wr = (struct ibv_send_wr){.wr_id = 6,
					  .opcode = IBV_WR_LOCAL_INV,
					  .invalidate_rkey =
					      i ? b_dst->key : OBJ_MW_INDEX_BASE << 8};
		CHECK_EQ(eng_qp_post_send(qb, &wr, &bad, s.now), 0);
		run_idle();
		SIM_EXPECT_WC(B, 6, IBV_WC_LOC_QP_OP_ERR, IBV_WC_LOCAL_INV, -1);
		CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
		sim_fini(&s);
	}

	/* Refused at post: no window, SGEs or immediate data with a bind. */
	setup();
	mw = sim_mw_alloc(B, 1, IBV_MW_TYPE_2);
	struct ibv_mw ibmw = {.rkey = mw->key};
	struct ibv_sge sge = {sim_va(b_dst, 0), 8, b_dst->key};
	wr = (struct ibv_send_wr){.opcode = IBV_WR_BIND_MW};
	CHECK_EQ(eng_qp_post_send(qb, &wr, &bad, s.now), -EINVAL);
	wr.bind_mw.mw = &ibmw;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	CHECK_EQ(eng_qp_post_send(qb, &wr, &bad, s.now), -EINVAL);
	wr.num_sge = 0;
	wr.imm_data = 1;
	CHECK_EQ(eng_qp_post_send(qb, &wr, &bad, s.now), -EINVAL);
	CHECK_EQ(cnt(qb, ENG_CNT_local_ops), 0);
	expect_empty(B);
	sim_fini(&s);
}

/* Which QP types take local operations: RC both; UC the bind (rxe); UD neither. */
static void qp_types(void)
{
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;
	struct eng_qp *q;
	struct eng_qp_init init = {0};
	struct eng_qp_attr at = {.pmtu = 1024, .qkey = 1};
	struct roce_pkt pkt;
	uint8_t buf[4096];

	setup();
	struct obj_mw *mw = sim_mw_alloc(B, 1, IBV_MW_TYPE_2);
	struct ibv_mw ibmw = {.rkey = mw->key};
	struct ibv_mr ibmr = {.lkey = b_dst->key};
	for (int t = 0; t < 2; t++) {
		init.type = t ? IBV_QPT_UD : IBV_QPT_UC;
		init.qpn = 0x40 + (uint32_t)t;
		init.pd = 1;
		init.max_send_wr = init.max_recv_wr = 4;
		init.max_send_sge = init.max_recv_sge = 1;
		init.send_cq = init.recv_cq = &B->cq;
		REQUIRE(eng_qp_create(&init, &B->env, &q) == 0);
		eng_qp_set_attr(q, &at);
		eng_qp_set_state(q, IBV_QPS_INIT, 0);
		eng_qp_set_state(q, IBV_QPS_RTR, 0);
		eng_qp_set_state(q, IBV_QPS_RTS, 0);
		wr = (struct ibv_send_wr){.wr_id = 1, .opcode = IBV_WR_LOCAL_INV};
		CHECK_EQ(eng_qp_post_send(q, &wr, &bad, 0), -EINVAL);
		wr = (struct ibv_send_wr){
		    .wr_id = 2, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED};
		wr.bind_mw.mw = &ibmw;
		wr.bind_mw.rkey = ibv_inc_rkey(mw->key);
		wr.bind_mw.bind_info = (struct ibv_mw_bind_info){&ibmr, sim_va(b_dst, 0), 64, RW};
		CHECK_EQ(eng_qp_post_send(q, &wr, &bad, 0), t ? -EINVAL : 0);
		CHECK_EQ(eng_qp_output(q, 0, &pkt, buf, sizeof(buf)), 0);
		if (!t) {
			SIM_EXPECT_WC(B, 2, IBV_WC_SUCCESS, IBV_WC_BIND_MW, 0);
			CHECK(mw->mr && mw->qpn == init.qpn);
		}
		expect_empty(B);
		eng_qp_destroy(q);
	}
	sim_fini(&s);
}

int main(void)
{
	data_through_window();
	refused();
	invalidate();
	in_order_with_loss();
	fence();
	errors();
	qp_types();
	return check_exit();
}
