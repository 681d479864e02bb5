/* UC and UD queue pairs on the virtual clock (tests/lib/sim.h): engine pairs built here with
 * eng_qp_create (the harness connects RC QPs only) and driven by sim_step.
 *
 * UC: SEND and RDMA WRITE (+ immediate) at every interesting size for three path MTUs, through
 * the wire codec too; no ACK ever, AckReq never set; sends complete when their last packet is
 * out. Loss: a PSN gap drops the rest of its message, the next FIRST resyncs, and the receive
 * WQE of the dropped SEND is used again (SRQ: completes with an error, rxe class E); missing
 * FIRST and missing LAST; no receive posted, buffer too small, WRITE not enabled or with a bad
 * R_Key: dropped and counted, the QP stays in RTS; a bad local key in a receive WQE is fatal.
 *
 * UD: SEND (+ immediate) to a destination chosen per WR (two QPs behind one node; the
 * address-handle handle handed out with each packet), the DETH (Q_Key, source QPN), the GRH
 * area (zeros from sim, a given header when the caller passes one, scattered over odd SGEs),
 * byte_len = 40 + payload, src_qp, IBV_WC_GRH; the Q_Key check and controlled Q_Keys; a send
 * longer than the MTU completes without a packet (C10-93.1.1) and does not stall the next;
 * oversized inbound packets, no receive, receive too small (SRQ: error completion), bad local
 * key, posts the QP type does not allow, transports that do not match, flush in ERR.
 * Every byte, completion field and drop counter is checked. */
#include "check.h"
#include "sim.h"

#include "engine/dcqcn.h"

#define BUFSZ (1u << 20)
#define GUARD 64
#define QKEY1 0x11111111u
#define QKEY2 0x22222222u

static struct sim s;
static struct sim_node *A, *B;
static struct sim_mr *a_src, *a_dst, *b_src, *b_dst;
static struct eng_qp *qa, *qb, *qb2;
static struct eng_rq srq;
static bool have_srq;
static const unsigned ALL_ACCESS = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

/* ---- tap: every packet A sends is looked at ---- */

struct probe {
	uint64_t pkts, ackreq, wrong_transport, last_qkey, last_psn, last_src_qpn;
	uint64_t first_at, last_at; /* when the first and the last packet left */
	uint32_t first_psn;
	bool have_psn, psn_gap;
	uint8_t want_transport; /* ROCE_TR_* of A's QP */
};
static struct probe probe;

static enum sim_action tap(struct sim *sim, int dir, uint64_t index, const struct roce_pkt *p,
			   enum sim_action chosen, uint64_t *delay_ns, void *arg)
{
	struct probe *pr = arg;
	const struct roce_opinfo *oi = roce_opinfo(p->bth.opcode);

	(void)index;
	(void)delay_ns;
	if (dir != SIM_AB)
		return chosen;
	pr->pkts++;
	if (p->bth.ackreq)
		pr->ackreq++;
	if (!oi || oi->transport != pr->want_transport)
		pr->wrong_transport++;
	if (pr->have_psn && p->bth.psn != ((pr->last_psn + 1) & 0xFFFFFF))
		pr->psn_gap = true;
	if (!pr->have_psn) {
		pr->first_psn = p->bth.psn;
		pr->first_at = sim->now;
	}
	pr->last_at = sim->now;
	pr->have_psn = true;
	pr->last_psn = p->bth.psn;
	pr->last_qkey = p->deth.qkey;
	pr->last_src_qpn = p->deth.src_qpn;
	return chosen;
}

/* ---- set-up ---- */

static struct eng_qp *new_qp(struct sim_node *n, enum ibv_qp_type type, struct eng_rq *rq)
{
	struct eng_qp_init init = {0};
	struct eng_qp *qp = NULL;

	init.type = type;
	init.qpn = 0x100u * (uint32_t)(n->id + 1) + (uint32_t)n->nqp + 1;
	init.pd = 1;
	init.max_send_wr = 256;
	init.max_send_sge = 4;
	init.max_inline = ENG_MAX_INLINE;
	init.max_recv_wr = 256;
	init.max_recv_sge = 4;
	init.srq = rq;
	init.send_cq = &n->cq;
	init.recv_cq = &n->cq;
	REQUIRE(n->nqp < SIM_MAX_QP);
	REQUIRE(eng_qp_create(&init, &n->env, &qp) == 0);
	n->qp[n->nqp++] = qp;
	return qp;
}

static void bring_up(struct eng_qp *qp, const struct eng_qp_attr *at)
{
	eng_qp_set_state(qp, IBV_QPS_INIT, s.now);
	eng_qp_set_attr(qp, at);
	eng_qp_set_state(qp, IBV_QPS_RTR, s.now);
	eng_qp_set_state(qp, IBV_QPS_RTS, s.now);
	CHECK_EQ(eng_qp_state(qp), IBV_QPS_RTS);
}

static void setup_common(bool wire, uint8_t transport)
{
	sim_init(&s, 7);
	s.wire = wire;
	A = &s.node[SIM_A];
	B = &s.node[SIM_B];
	a_src = sim_mr_reg(A, 1, BUFSZ, ALL_ACCESS);
	a_dst = sim_mr_reg(A, 1, BUFSZ, ALL_ACCESS);
	b_src = sim_mr_reg(B, 1, BUFSZ, ALL_ACCESS);
	b_dst = sim_mr_reg(B, 1, BUFSZ, ALL_ACCESS);
	sim_fill(a_src->host, BUFSZ, 11);
	sim_fill(b_src->host, BUFSZ, 22);
	memset(&probe, 0, sizeof(probe));
	probe.want_transport = transport;
	s.tap = tap;
	s.tap_arg = &probe;
	have_srq = false;
}

/* A UC pair A -> B (B's access flags given; B on an SRQ if srq_b). */
static void setup_uc(uint32_t pmtu, bool wire, unsigned access_b, bool srq_b)
{
	struct eng_qp_attr at = {0};

	setup_common(wire, ROCE_TR_UC);
	if (srq_b) {
		REQUIRE(eng_rq_init(&srq, 64, 4, true) == 0);
		have_srq = true;
	}
	qa = new_qp(A, IBV_QPT_UC, NULL);
	qb = new_qp(B, IBV_QPT_UC, srq_b ? &srq : NULL);
	at.pmtu = pmtu;
	at.pkey = 0xFFFF;
	at.dest_qpn = eng_qp_num(qb);
	at.sq_psn = 0x100;
	at.rq_psn = 0x200;
	at.access = IBV_ACCESS_REMOTE_WRITE;
	bring_up(qa, &at);
	at.dest_qpn = eng_qp_num(qa);
	at.sq_psn = 0x200;
	at.rq_psn = 0x100;
	at.access = access_b;
	bring_up(qb, &at);
}

/* A UD QP on A; two on B (Q_Keys QKEY1 and QKEY2). */
static void setup_ud(uint32_t pmtu_a, uint32_t pmtu_b, bool wire, bool srq_b)
{
	struct eng_qp_attr at = {0};

	setup_common(wire, ROCE_TR_UD);
	if (srq_b) {
		REQUIRE(eng_rq_init(&srq, 64, 4, true) == 0);
		have_srq = true;
	}
	qa = new_qp(A, IBV_QPT_UD, NULL);
	qb = new_qp(B, IBV_QPT_UD, srq_b ? &srq : NULL);
	qb2 = new_qp(B, IBV_QPT_UD, NULL);
	at.pkey = 0xFFFF;
	at.sq_psn = 0x300;
	at.pmtu = pmtu_a;
	at.qkey = QKEY1;
	bring_up(qa, &at);
	at.pmtu = pmtu_b;
	bring_up(qb, &at);
	at.qkey = QKEY2;
	bring_up(qb2, &at);
}

static void teardown(void)
{
	sim_fini(&s);
	if (have_srq)
		eng_rq_fini(&srq);
	have_srq = false;
}

static void run_idle(void)
{
	REQUIRE(sim_run(&s, 10ull * 1000 * 1000 * 1000));
}

static void expect_empty(struct sim_node *n)
{
	struct ibv_wc wc;

	CHECK_EQ(sim_poll(n, &wc, 1), 0);
}

/* Polls one receive completion and checks every field that matters. */
static void expect_recv(struct sim_node *n, uint64_t wr_id, enum ibv_wc_status st,
			enum ibv_wc_opcode opc, uint32_t byte_len, uint32_t src_qp,
			struct eng_qp *qp, unsigned flags, uint32_t imm)
{
	struct ibv_wc wc;

	memset(&wc, 0xA5, sizeof(wc));
	if (sim_poll(n, &wc, 1) != 1) {
		CHECK(!"receive completion expected");
		return;
	}
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.status, st);
	CHECK_EQ(wc.qp_num, eng_qp_num(qp));
	if (st != IBV_WC_SUCCESS)
		return;
	CHECK_EQ(wc.opcode, opc);
	CHECK_EQ(wc.byte_len, byte_len);
	CHECK_EQ(wc.src_qp, src_qp);
	CHECK_EQ(wc.wc_flags, flags);
	CHECK_EQ(wc.pkey_index, 0);
	if (flags & IBV_WC_WITH_IMM)
		CHECK_EQ(wc.imm_data, imm);
}

static int post_recv(struct eng_qp *qp, uint64_t wr_id, struct sim_mr *mr, uint64_t off,
		     uint32_t len)
{
	return sim_post_recv(qp, wr_id, mr, off, len);
}

static int post_srq(uint64_t wr_id, struct sim_mr *mr, uint64_t off, uint32_t len)
{
	struct ibv_sge sge = {sim_va(mr, off), len, mr->key};
	struct ibv_recv_wr wr = {0};
	const struct ibv_recv_wr *bad;

	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return eng_rq_post(&srq, &wr, &bad);
}

static bool zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static bool all_byte(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

static uint32_t npkts(uint32_t len, uint32_t pmtu)
{
	return len ? (len + pmtu - 1) / pmtu : 1;
}

/* ---- UC ---- */

static void uc_one(enum ibv_wr_opcode op, uint32_t len, uint32_t pmtu, uint64_t wr)
{
	uint32_t imm = 0xC0DE0000u + len;
	struct ibv_sge sge = {sim_va(a_src, 3), len, a_src->key};
	struct ibv_send_wr w = {0};
	const struct ibv_send_wr *bad;
	uint64_t before = probe.pkts;
	bool recv = op != IBV_WR_RDMA_WRITE;

	memset(b_dst->host, 0, len + 2 * GUARD);
	w.wr_id = wr;
	w.opcode = op;
	w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.imm_data = imm;
	w.wr.rdma.remote_addr = sim_va(b_dst, GUARD);
	w.wr.rdma.rkey = b_dst->key;
	if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM)
		CHECK_EQ(post_recv(qb, wr + 1000, b_dst, GUARD, len), 0);
	else if (recv)
		CHECK_EQ(post_recv(qb, wr + 1000, NULL, 0, 0), 0);
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(
	    A, wr, IBV_WC_SUCCESS,
	    op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ? IBV_WC_SEND : IBV_WC_RDMA_WRITE, len);
	if (recv) {
		bool has_imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;

		expect_recv(B, wr + 1000, IBV_WC_SUCCESS,
			    op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM
							     : IBV_WC_RECV,
			    len, eng_qp_num(qa), qb, has_imm ? IBV_WC_WITH_IMM : 0, imm);
	}
	CHECK(zero(b_dst->host, GUARD));
	CHECK_MEM(b_dst->host + GUARD, a_src->host + 3, len);
	CHECK(zero(b_dst->host + GUARD + len, GUARD));
	CHECK_EQ(probe.pkts - before, npkts(len, pmtu));
	expect_empty(A);
	expect_empty(B);
}

static void uc_sizes_and_ops(uint32_t pmtu, bool wire)
{
	const uint32_t sizes[] = {0, 1, pmtu - 1, pmtu, pmtu + 1, 3 * pmtu + 5, 65536};
	const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					  IBV_WR_RDMA_WRITE_WITH_IMM};
	uint64_t wr = 1;

	setup_uc(pmtu, wire, ALL_ACCESS, false);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			uc_one(ops[o], sizes[i], pmtu, wr++);
	/* Never acknowledged: B sent nothing, A never asked. */
	CHECK_EQ(s.stats.entered[SIM_BA], 0);
	CHECK_EQ(probe.ackreq, 0);
	CHECK_EQ(probe.wrong_transport, 0);
	CHECK(!probe.psn_gap);
	CHECK_EQ(probe.first_psn, 0x100);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_rx_packets], probe.pkts);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_tx_packets], probe.pkts);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_retransmits], 0);
	CHECK_EQ(eng_qp_deadline(qa), UINT64_MAX);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	teardown();
}

/* READ, atomics and SEND with Invalidate do not exist on UC (spec 3): refused at post. */
static void uc_post_checks(void)
{
	const enum ibv_wr_opcode bad_ops[] = {IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
					      IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV};
	struct ibv_sge sge = {sim_va(a_src, 0), 8, a_src->key};
	struct ibv_send_wr w[2];
	const struct ibv_send_wr *bad = NULL;

	setup_uc(1024, false, ALL_ACCESS, false);
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		memset(w, 0, sizeof(w));
		w[0].wr_id = 1;
		w[0].opcode = IBV_WR_RDMA_WRITE;
		w[0].send_flags = IBV_SEND_SIGNALED;
		w[0].sg_list = &sge;
		w[0].num_sge = 1;
		w[0].wr.rdma.remote_addr = sim_va(b_dst, 0);
		w[0].wr.rdma.rkey = b_dst->key;
		w[0].next = &w[1];
		w[1] = w[0];
		w[1].wr_id = 2;
		w[1].opcode = bad_ops[i];
		w[1].next = NULL;
		bad = NULL;
		CHECK_EQ(eng_qp_post_send(qa, w, &bad, s.now), -EINVAL);
		CHECK(bad == &w[1]);
		run_idle();
		SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 8); /* the first went */
		expect_empty(A);
	}
	CHECK_MEM(b_dst->host, a_src->host, 8);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	teardown();
}

static int uc_send(uint64_t wr, uint64_t src_off, uint32_t len)
{
	return sim_post_send(A, qa, wr, IBV_WR_SEND, a_src, src_off, len, 0, 0, IBV_SEND_SIGNALED);
}

/* Message 1 (3 packets) loses packet `lost`; message 2 (2 packets) follows. The receive WQE
 * message 1 took is used again by message 2 (class D1, rxe), or with an SRQ completes with an
 * error (class E). */
static void uc_gap(int lost, bool with_srq)
{
	const uint32_t l1 = 2 * 1024 + 100, l2 = 1024 + 7;

	setup_uc(1024, true, ALL_ACCESS, with_srq);
	sim_rule(&s, SIM_AB, (uint64_t)lost, SIM_DROP, 0);
	if (with_srq) {
		CHECK_EQ(post_srq(11, b_dst, 0, 4096), 0);
		CHECK_EQ(post_srq(12, b_dst, 8192, 4096), 0);
	} else {
		CHECK_EQ(post_recv(qb, 11, b_dst, 0, 4096), 0);
		CHECK_EQ(post_recv(qb, 12, b_dst, 8192, 4096), 0);
	}
	CHECK_EQ(uc_send(1, 0, l1), 0);
	CHECK_EQ(uc_send(2, 50000, l2), 0);
	run_idle();
	/* The sender knows nothing of the loss. */
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, l1);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, l2);
	if (with_srq) {
		expect_recv(B, 11, IBV_WC_REM_INV_REQ_ERR, 0, 0, 0, qb, 0, 0);
		expect_recv(B, 12, IBV_WC_SUCCESS, IBV_WC_RECV, l2, eng_qp_num(qa), qb, 0, 0);
		CHECK_MEM(b_dst->host + 8192, a_src->host + 50000, l2);
	} else {
		expect_recv(B, 11, IBV_WC_SUCCESS, IBV_WC_RECV, l2, eng_qp_num(qa), qb, 0, 0);
		CHECK_MEM(b_dst->host, a_src->host + 50000, l2);
	}
	expect_empty(B);
	CHECK_EQ(s.stats.dropped[SIM_AB], 1);
	/* lost FIRST: the MIDDLE shows the gap, the LAST goes with it; lost MIDDLE: the LAST
	 * shows it and cuts message 1 short; lost LAST: message 2's FIRST cuts it short. */
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_psn_gap], lost == 2 ? 0 : 1);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_uc_msg], lost == 0 ? 1 : 0);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_uc_abandoned], lost == 0 ? 0 : 1);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_rx_packets], 5 - 1 -
							      (lost == 0   ? 2
							       : lost == 1 ? 1
									   : 0));
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	if (!with_srq) {
		/* WQE 12 is still there, in order, for the next message. */
		CHECK_EQ(uc_send(3, 70000, 300), 0);
		run_idle();
		SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, 300);
		expect_recv(B, 12, IBV_WC_SUCCESS, IBV_WC_RECV, 300, eng_qp_num(qa), qb, 0, 0);
		CHECK_MEM(b_dst->host + 8192, a_src->host + 70000, 300);
	}
	teardown();
}

/* A WRITE with immediate that loses its middle packet places its first packet only and
 * completes nothing; the next one consumes the receive WQE. */
static void uc_write_gap(void)
{
	struct ibv_sge sge = {sim_va(a_src, 0), 3000, a_src->key};
	struct ibv_send_wr w = {0};
	const struct ibv_send_wr *bad;

	setup_uc(1024, false, ALL_ACCESS, false);
	sim_rule(&s, SIM_AB, 1, SIM_DROP, 0);
	CHECK_EQ(post_recv(qb, 11, NULL, 0, 0), 0);
	w.wr_id = 1;
	w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.imm_data = 0x1234;
	w.wr.rdma.remote_addr = sim_va(b_dst, 0);
	w.wr.rdma.rkey = b_dst->key;
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	sge.addr = sim_va(a_src, 100000);
	sge.length = 500;
	w.wr_id = 2;
	w.imm_data = 0x5678;
	w.wr.rdma.remote_addr = sim_va(b_dst, 200000);
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 500);
	expect_recv(B, 11, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 500, eng_qp_num(qa), qb,
		    IBV_WC_WITH_IMM, 0x5678);
	expect_empty(B);
	CHECK_MEM(b_dst->host, a_src->host, 1024);    /* FIRST placed */
	CHECK(zero(b_dst->host + 1024, 3000 - 1024)); /* the rest never arrived */
	CHECK_MEM(b_dst->host + 200000, a_src->host + 100000, 500);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_psn_gap], 1);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_uc_abandoned], 1);
	teardown();
}

/* No receive posted: the SEND is dropped (class D), the sender completes; a WRITE with
 * immediate without a receive places nothing. Then a receive makes the next one work. */
static void uc_no_recv(void)
{
	setup_uc(1024, false, ALL_ACCESS, false);
	CHECK_EQ(uc_send(1, 0, 100), 0);
	CHECK_EQ(uc_send(2, 0, 2500), 0); /* 3 packets: FIRST dropped, the rest with it */
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_RDMA_WRITE_WITH_IMM, a_src, 0, 64, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 100);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 2500);
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 64);
	expect_empty(B);
	CHECK(zero(b_dst->host, 4096));
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_no_recv], 3);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_uc_msg], 2);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_rx_packets], 0);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	CHECK_EQ(post_recv(qb, 9, b_dst, 0, 4096), 0);
	CHECK_EQ(uc_send(4, 777, 2500), 0);
	run_idle();
	SIM_EXPECT_WC(A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 2500);
	expect_recv(B, 9, IBV_WC_SUCCESS, IBV_WC_RECV, 2500, eng_qp_num(qa), qb, 0, 0);
	CHECK_MEM(b_dst->host, a_src->host + 777, 2500);
	teardown();
}

/* A receive buffer too small drops the message and keeps the WQE for the next one (rxe class
 * D); found on the FIRST or in the middle of the message. */
static void uc_recv_short(void)
{
	setup_uc(1024, false, ALL_ACCESS, false);
	CHECK_EQ(post_recv(qb, 31, b_dst, 0, 100), 0);
	CHECK_EQ(uc_send(1, 0, 200), 0);
	CHECK_EQ(uc_send(2, 1000, 50), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 200);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 50);
	expect_recv(B, 31, IBV_WC_SUCCESS, IBV_WC_RECV, 50, eng_qp_num(qa), qb, 0, 0);
	CHECK_MEM(b_dst->host, a_src->host + 1000, 50);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_recv_short], 1);

	CHECK_EQ(post_recv(qb, 32, b_dst, 10000, 1500), 0);
	CHECK_EQ(uc_send(3, 0, 2500), 0); /* fits the FIRST, not the MIDDLE */
	CHECK_EQ(uc_send(4, 3000, 1400), 0);
	run_idle();
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, 2500);
	SIM_EXPECT_WC(A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 1400);
	expect_recv(B, 32, IBV_WC_SUCCESS, IBV_WC_RECV, 1400, eng_qp_num(qa), qb, 0, 0);
	CHECK_MEM(b_dst->host + 10000, a_src->host + 3000, 1400);
	expect_empty(B);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_recv_short], 2);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_uc_msg], 1); /* message 3's LAST */
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	teardown();
}

/* WRITEs B does not allow, with a bad R_Key, or out of bounds: dropped, counted, B stays up. */
static void uc_write_errors(void)
{
	setup_uc(1024, false, IBV_ACCESS_LOCAL_WRITE, false); /* no REMOTE_WRITE */
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 100, sim_va(b_dst, 0),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	CHECK(zero(b_dst->host, 200));
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_access], 1);
	teardown();

	setup_uc(1024, false, ALL_ACCESS, false);
	CHECK_EQ(sim_post_send(A, qa, 1, IBV_WR_RDMA_WRITE, a_src, 0, 100, sim_va(b_dst, 0),
			       b_dst->key + 99, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_RDMA_WRITE, a_src, 0, 3000,
			       sim_va(b_dst, BUFSZ - 1000), b_dst->key, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_send(A, qa, 3, IBV_WR_RDMA_WRITE, a_src, 0, 2100, sim_va(b_dst, 64),
			       b_dst->key, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2100);
	CHECK(zero(b_dst->host, 64));
	CHECK_MEM(b_dst->host + 64, a_src->host, 2100);
	CHECK(zero(b_dst->host + BUFSZ - 1000, 1000));
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_access], 2);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_uc_msg], 2); /* WRITE 2's MIDDLE and LAST */
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	teardown();
}

/* A receive WQE whose buffer fails its key check is fatal even on UC (class A). */
static void uc_bad_lkey(void)
{
	struct ibv_sge sge = {sim_va(b_dst, 0), 4096, 0xBAD};
	struct ibv_recv_wr r = {0};
	const struct ibv_recv_wr *rbad;

	setup_uc(1024, false, ALL_ACCESS, false);
	r.wr_id = 41;
	r.sg_list = &sge;
	r.num_sge = 1;
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qb), &r, &rbad), 0);
	r.wr_id = 42;
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qb), &r, &rbad), 0);
	CHECK_EQ(uc_send(1, 0, 100), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 100);
	expect_recv(B, 41, IBV_WC_LOC_PROT_ERR, 0, 0, 0, qb, 0, 0);
	expect_recv(B, 42, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, qb, 0, 0);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	CHECK(sim_has_event(B, IBV_EVENT_QP_FATAL));
	teardown();
}

/* ERR flushes a receive WQE held back from a dropped message first, then the others. */
static void uc_flush_spare(void)
{
	setup_uc(1024, false, ALL_ACCESS, false);
	sim_rule(&s, SIM_AB, 1, SIM_DROP, 0);
	CHECK_EQ(post_recv(qb, 51, b_dst, 0, 4096), 0);
	CHECK_EQ(post_recv(qb, 52, b_dst, 4096, 4096), 0);
	CHECK_EQ(uc_send(1, 0, 3000), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 3000);
	expect_empty(B);
	eng_qp_set_state(qb, IBV_QPS_ERR, s.now);
	expect_recv(B, 51, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, qb, 0, 0);
	expect_recv(B, 52, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, qb, 0, 0);
	expect_empty(B);
	/* Sends posted in ERR complete flushed at once. */
	eng_qp_set_state(qa, IBV_QPS_ERR, s.now);
	CHECK_EQ(uc_send(2, 0, 10), 0);
	SIM_EXPECT_WC(A, 2, IBV_WC_WR_FLUSH_ERR, 0, -1);
	teardown();
}

/* ---- UD ---- */

static int ud_post(struct eng_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, uint64_t src_off,
		   uint32_t len, uint32_t ah, uint32_t dqpn, uint32_t qkey, unsigned flags,
		   uint32_t imm)
{
	struct ibv_sge sge = {sim_va(a_src, src_off), len, a_src->key};
	/* A handle on the stack, gone after the post: the engine keeps only its value. */
	struct ibv_ah handle = {.handle = ah};
	struct ibv_send_wr w = {0};
	const struct ibv_send_wr *bad;

	w.wr_id = wr_id;
	w.opcode = op;
	w.send_flags = flags;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.imm_data = imm;
	w.wr.ud.ah = &handle;
	w.wr.ud.remote_qpn = dqpn;
	w.wr.ud.remote_qkey = qkey;
	return eng_qp_post_send(qp, &w, &bad, s.now);
}

/* Every size to two QPs behind B, alternating per WR: GRH area, payload, guard bytes. */
static void ud_basic(bool wire)
{
	const uint32_t sizes[] = {0, 1, 100, 1023, 1024};
	uint64_t wr = 1;

	setup_ud(1024, 1024, wire, false);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int k = 0; k < 2; k++) {
			struct eng_qp *dst = k ? qb2 : qb;
			uint32_t len = sizes[i];
			enum ibv_wr_opcode op = k ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
			uint64_t off = 4096 * k;

			/* The receive buffer is poisoned: the GRH bytes must be written. */
			memset(b_dst->host + off, 0xEE, 4096);
			CHECK_EQ(post_recv(dst, wr + 1000, b_dst, off, ENG_GRH_LEN + len), 0);
			CHECK_EQ(ud_post(qa, wr, op, 7 * i, len, 0x10001u + (uint32_t)k,
					 eng_qp_num(dst), k ? QKEY2 : QKEY1, IBV_SEND_SIGNALED,
					 0xABC0u + (uint32_t)i),
				 0);
			run_idle();
			SIM_EXPECT_WC(A, wr, IBV_WC_SUCCESS, IBV_WC_SEND, len);
			expect_recv(B, wr + 1000, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + len,
				    eng_qp_num(qa), dst, IBV_WC_GRH | (k ? IBV_WC_WITH_IMM : 0),
				    0xABC0u + (uint32_t)i);
			CHECK(zero(b_dst->host + off, ENG_GRH_LEN)); /* sim passes no header */
			CHECK_MEM(b_dst->host + off + ENG_GRH_LEN, a_src->host + 7 * i, len);
			CHECK(all_byte(b_dst->host + off + ENG_GRH_LEN + len,
				       4096 - ENG_GRH_LEN - len, 0xEE));
			CHECK_EQ(probe.last_qkey, k ? QKEY2 : QKEY1);
			CHECK_EQ(probe.last_src_qpn, eng_qp_num(qa));
			expect_empty(A);
			expect_empty(B);
			wr++;
		}
	}
	CHECK_EQ(probe.pkts, 10);
	CHECK_EQ(probe.ackreq, 0);
	CHECK_EQ(probe.wrong_transport, 0);
	CHECK(!probe.psn_gap); /* one PSN per message from sq_psn */
	CHECK_EQ(probe.first_psn, 0x300);
	CHECK_EQ(s.stats.entered[SIM_BA], 0);
	/* To a QPN nobody has: it leaves, nobody takes it. */
	CHECK_EQ(ud_post(qa, 99, IBV_WR_SEND, 0, 10, 1, 0x7777, QKEY1, IBV_SEND_SIGNALED, 0), 0);
	run_idle();
	SIM_EXPECT_WC(A, 99, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
	CHECK_EQ(s.stats.no_qp[SIM_AB], 1);
	teardown();
}

/* The packet says where it goes: the handle of the WR's address handle, one per packet; RC /
 * UC packets say 0 (their QP's path). */
static void ud_dest_per_packet(void)
{
	struct roce_pkt out;
	uint32_t ah = 0;

	setup_ud(1024, 1024, false, false);
	s.tap = NULL;
	CHECK_EQ(ud_post(qa, 1, IBV_WR_SEND, 0, 10, 0x10001, 0x201, QKEY1, 0, 0), 0);
	CHECK_EQ(ud_post(qa, 2, IBV_WR_SEND_WITH_IMM, 0, 20, 0x20002, 0x202, 0x80000000u,
			 IBV_SEND_SOLICITED, 0x99),
		 0);
	CHECK_EQ(ud_post(qa, 3, IBV_WR_SEND, 0, 30, 0x30003, 0x203, QKEY2, 0, 0), 0);
	for (uint32_t i = 0; i < 3; i++) {
		ah = 0;
		REQUIRE(eng_qp_output_dest(qa, s.now, &out, s.buf, 4096, &ah) == 1);
		CHECK_EQ(ah, 0x10001u * (i + 1));
		CHECK_EQ(out.bth.dqpn, 0x201 + i);
		CHECK_EQ(out.bth.psn, 0x300 + i);
		CHECK_EQ(out.bth.opcode, i == 1 ? ROCE_UD_SEND_ONLY_IMM : ROCE_UD_SEND_ONLY);
		CHECK_EQ(out.bth.se, i == 1);
		CHECK(!out.bth.ackreq);
		CHECK_EQ(out.bth.pkey, 0xFFFF);
		CHECK_EQ(out.payload_len, 10 * (i + 1));
		CHECK_EQ(out.deth.src_qpn, eng_qp_num(qa));
		/* Controlled Q_Key (bit 31): the QP's own. */
		CHECK_EQ(out.deth.qkey, i == 0 ? QKEY1 : i == 1 ? QKEY1 : QKEY2);
	}
	CHECK_EQ(eng_qp_output_dest(qa, s.now, &out, s.buf, 4096, &ah), 0);
	CHECK_EQ(ah, 0);
	teardown();

	setup_uc(1024, false, ALL_ACCESS, false);
	s.tap = NULL;
	CHECK_EQ(uc_send(1, 0, 10), 0);
	ah = 12345;
	REQUIRE(eng_qp_output_dest(qa, s.now, &out, s.buf, 4096, &ah) == 1);
	CHECK_EQ(ah, 0);
	CHECK_EQ(out.bth.opcode, ROCE_UC_SEND_ONLY);
	CHECK_EQ(out.bth.dqpn, eng_qp_num(qb));
	CHECK(!out.bth.ackreq);
	teardown();
}

/* Q_Key: a mismatch is a silent drop; a controlled key in the WR means the sender QP's. */
static void ud_qkey(void)
{
	setup_ud(1024, 1024, true, false);
	CHECK_EQ(post_recv(qb, 11, b_dst, 0, 4096), 0);
	CHECK_EQ(post_recv(qb2, 21, b_dst, 8192, 4096), 0);
	CHECK_EQ(ud_post(qa, 1, IBV_WR_SEND, 0, 64, 1, eng_qp_num(qb), QKEY2, IBV_SEND_SIGNALED, 0),
		 0);
	CHECK_EQ(ud_post(qa, 2, IBV_WR_SEND, 0, 64, 1, eng_qp_num(qb2), 0x80000000u,
			 IBV_SEND_SIGNALED, 0),
		 0); /* becomes QKEY1: not qb2's */
	CHECK_EQ(ud_post(qa, 3, IBV_WR_SEND, 100, 65, 1, eng_qp_num(qb), 0x80001234u,
			 IBV_SEND_SIGNALED, 0),
		 0); /* becomes QKEY1: qb's */
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, 65);
	expect_recv(B, 11, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + 65, eng_qp_num(qa), qb,
		    IBV_WC_GRH, 0);
	CHECK_MEM(b_dst->host + ENG_GRH_LEN, a_src->host + 100, 65);
	expect_empty(B);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_qkey], 1);
	CHECK_EQ(eng_qp_counters(qb2)[ENG_CNT_drop_qkey], 1);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_rx_packets], 1);
	CHECK_EQ(eng_qp_state(qb2), IBV_QPS_RTS);
	teardown();
}

/* IBA C10-93.1.1 (rxe): longer than the MTU completes successfully and sends nothing, and the
 * WR behind it is not held up. */
static void ud_too_long(void)
{
	struct ibv_sge sge[2] = {{sim_va(a_src, 0), 1025, a_src->key},
				 {sim_va(a_src, 5000), 10, a_src->key}};
	struct ibv_ah ah = {.handle = 1};
	struct ibv_send_wr w[2];
	const struct ibv_send_wr *bad;

	setup_ud(1024, 1024, false, false);
	CHECK_EQ(post_recv(qb, 11, b_dst, 0, 4096), 0);
	memset(w, 0, sizeof(w));
	for (int i = 0; i < 2; i++) {
		w[i].wr_id = (uint64_t)i + 1;
		w[i].opcode = IBV_WR_SEND;
		w[i].send_flags = IBV_SEND_SIGNALED;
		w[i].sg_list = &sge[i];
		w[i].num_sge = 1;
		w[i].wr.ud.ah = &ah;
		w[i].wr.ud.remote_qpn = eng_qp_num(qb);
		w[i].wr.ud.remote_qkey = QKEY1;
	}
	w[0].next = &w[1];
	CHECK_EQ(eng_qp_post_send(qa, w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 1025);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
	expect_recv(B, 11, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + 10, eng_qp_num(qa), qb,
		    IBV_WC_GRH, 0);
	CHECK_MEM(b_dst->host + ENG_GRH_LEN, a_src->host + 5000, 10);
	CHECK_EQ(probe.pkts, 1);
	CHECK_EQ(probe.first_psn, 0x301); /* the long one took a PSN */
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_tx_ud_too_long], 1);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_tx_packets], 1);
	teardown();
}

/* Inbound: longer than the receiver's port MTU is dropped (rxe check_length). */
static void ud_rx_too_long(void)
{
	setup_ud(4096, 1024, true, false);
	CHECK_EQ(post_recv(qb, 11, b_dst, 0, 8192), 0);
	CHECK_EQ(
	    ud_post(qa, 1, IBV_WR_SEND, 0, 2000, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0),
	    0);
	CHECK_EQ(
	    ud_post(qa, 2, IBV_WR_SEND, 9, 1000, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0),
	    0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 2000);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 1000);
	expect_recv(B, 11, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + 1000, eng_qp_num(qa), qb,
		    IBV_WC_GRH, 0);
	CHECK_MEM(b_dst->host + ENG_GRH_LEN, a_src->host + 9, 1000);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_bad_length], 1);
	CHECK_EQ(probe.pkts, 2);
	teardown();
}

/* No receive: dropped. Too small (the GRH counts): dropped, the WQE stays for the next; on
 * an SRQ it completes with an error (rxe class E). */
static void ud_no_recv_and_short(bool with_srq)
{
	setup_ud(1024, 1024, false, with_srq);
	CHECK_EQ(ud_post(qa, 1, IBV_WR_SEND, 0, 50, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 50);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_no_recv], 1);
	if (with_srq) {
		CHECK_EQ(post_srq(11, b_dst, 0, ENG_GRH_LEN + 50), 0);
		CHECK_EQ(post_srq(12, b_dst, 4096, ENG_GRH_LEN + 50), 0);
	} else {
		CHECK_EQ(post_recv(qb, 11, b_dst, 0, ENG_GRH_LEN + 50), 0);
	}
	CHECK_EQ(ud_post(qa, 2, IBV_WR_SEND, 0, 51, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0),
		 0);
	CHECK_EQ(
	    ud_post(qa, 3, IBV_WR_SEND, 60, 50, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0), 0);
	run_idle();
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 51);
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_SEND, 50);
	if (with_srq) {
		expect_recv(B, 11, IBV_WC_REM_INV_REQ_ERR, 0, 0, 0, qb, 0, 0);
		expect_recv(B, 12, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + 50, eng_qp_num(qa),
			    qb, IBV_WC_GRH, 0);
		CHECK_MEM(b_dst->host + 4096 + ENG_GRH_LEN, a_src->host + 60, 50);
	} else {
		expect_recv(B, 11, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + 50, eng_qp_num(qa),
			    qb, IBV_WC_GRH, 0);
		CHECK_MEM(b_dst->host + ENG_GRH_LEN, a_src->host + 60, 50);
	}
	expect_empty(B);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_recv_short], 1);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	teardown();
}

/* The caller's network header lands first, scattered with the payload over odd pieces. */
static void ud_grh_scatter(void)
{
	static const uint32_t cut[3] = {7, 50, 200};
	uint8_t grh[ENG_GRH_LEN], payload[150];
	struct ibv_sge sge[3];
	struct ibv_recv_wr r = {0};
	const struct ibv_recv_wr *rbad;
	struct roce_pkt p = {0};
	uint8_t expect[ENG_GRH_LEN + 150];
	uint32_t off = 0, imm;

	setup_ud(1024, 1024, false, false);
	for (int i = 0; i < ENG_GRH_LEN; i++)
		grh[i] = (uint8_t)(i + 1);
	sim_fill(payload, sizeof(payload), 5);
	memcpy(expect, grh, ENG_GRH_LEN);
	memcpy(expect + ENG_GRH_LEN, payload, sizeof(payload));
	memset(b_dst->host, 0xEE, 65536);
	for (int i = 0; i < 3; i++) {
		sge[i].addr = sim_va(b_dst, 1000u * (uint32_t)i + 3);
		sge[i].length = cut[i];
		sge[i].lkey = b_dst->key;
	}
	r.wr_id = 61;
	r.sg_list = sge;
	r.num_sge = 3;
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qb), &r, &rbad), 0);
	p.bth.opcode = ROCE_UD_SEND_ONLY_IMM;
	p.bth.pkey = 0xFFFF;
	p.bth.dqpn = eng_qp_num(qb);
	p.bth.psn = 0x123456; /* UD does not check PSNs */
	p.bth.se = true;
	p.deth.qkey = QKEY1;
	p.deth.src_qpn = 0xABCDEF;
	memcpy(p.imm, "\x01\x02\x03\x04", 4);
	p.payload = payload;
	p.payload_len = sizeof(payload);
	memcpy(&imm, p.imm, 4);
	B->cq.armed = 2; /* solicited only: the SE bit must reach the CQ */
	eng_qp_input_net(qb, &p, grh, s.now);
	CHECK_EQ(B->cq.armed, 0);
	expect_recv(B, 61, IBV_WC_SUCCESS, IBV_WC_RECV, ENG_GRH_LEN + 150, 0xABCDEF, qb,
		    IBV_WC_GRH | IBV_WC_WITH_IMM, imm);
	for (int i = 0; i < 3; i++) {
		uint32_t n =
		    cut[i] < sizeof(expect) - off ? cut[i] : (uint32_t)sizeof(expect) - off;
		uint8_t *d = b_dst->host + 1000u * (uint32_t)i + 3;

		CHECK_MEM(d, expect + off, n);
		CHECK_EQ(d[-1], 0xEE);
		CHECK_EQ(d[n], 0xEE);
		off += n;
	}
	CHECK_EQ(off, sizeof(expect));
	teardown();
}

/* A receive buffer with a bad key: LOC_PROT_ERR, the QP goes to ERR, later packets dropped. */
static void ud_bad_lkey(void)
{
	struct ibv_sge sge = {sim_va(b_dst, 0), 4096, 0xBAD};
	struct ibv_recv_wr r = {0};
	const struct ibv_recv_wr *rbad;

	setup_ud(1024, 1024, false, false);
	r.wr_id = 71;
	r.sg_list = &sge;
	r.num_sge = 1;
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qb), &r, &rbad), 0);
	CHECK_EQ(ud_post(qa, 1, IBV_WR_SEND, 0, 10, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0),
		 0);
	CHECK_EQ(ud_post(qa, 2, IBV_WR_SEND, 0, 10, 1, eng_qp_num(qb), QKEY1, IBV_SEND_SIGNALED, 0),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
	expect_recv(B, 71, IBV_WC_LOC_PROT_ERR, 0, 0, 0, qb, 0, 0);
	expect_empty(B);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_ERR);
	CHECK(sim_has_event(B, IBV_EVENT_QP_FATAL));
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_bad_state], 1);
	teardown();
}

/* What UD does not take at post, and posting outside RTS. */
static void ud_post_checks(void)
{
	const enum ibv_wr_opcode bad_ops[] = {
	    IBV_WR_RDMA_WRITE,	       IBV_WR_RDMA_WRITE_WITH_IMM,  IBV_WR_RDMA_READ,
	    IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_SEND_WITH_INV};
	struct ibv_sge sge = {sim_va(a_src, 0), 8, a_src->key};
	struct ibv_send_wr w = {0};
	const struct ibv_send_wr *bad;

	setup_ud(1024, 1024, false, false);
	for (size_t i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++)
		CHECK_EQ(ud_post(qa, 1, bad_ops[i], 0, 8, 1, eng_qp_num(qb), QKEY1, 0, 0), -EINVAL);
	w.wr_id = 2;
	w.opcode = IBV_WR_SEND;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.wr.ud.ah = NULL; /* no destination */
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), -EINVAL);
	CHECK(bad == &w);
	run_idle();
	expect_empty(A);
	CHECK_EQ(probe.pkts, 0);
	/* RTR does not send. */
	{
		struct eng_qp *q = new_qp(A, IBV_QPT_UD, NULL);
		struct eng_qp_attr at = {.pmtu = 1024, .pkey = 0xFFFF, .qkey = QKEY1};

		eng_qp_set_state(q, IBV_QPS_INIT, s.now);
		eng_qp_set_attr(q, &at);
		eng_qp_set_state(q, IBV_QPS_RTR, s.now);
		CHECK_EQ(ud_post(q, 3, IBV_WR_SEND, 0, 8, 1, eng_qp_num(qb), QKEY1, 0, 0), -EINVAL);
	}
	teardown();
}

/* Packets of another transport, and to a QP that does not receive yet: dropped, counted. */
static void transport_mismatch(void)
{
	static const uint8_t payload[] = "0123456789abcdef";
	struct roce_pkt p = {0};
	struct eng_qp *uc, *rc_like;
	struct eng_qp_attr at = {.pmtu = 1024, .pkey = 0xFFFF, .qkey = QKEY1};

	setup_ud(1024, 1024, false, false);
	CHECK_EQ(post_recv(qb, 11, b_dst, 0, 4096), 0);
	p.bth.pkey = 0xFFFF;
	p.bth.dqpn = eng_qp_num(qb);
	p.deth.qkey = QKEY1;
	p.payload = payload;
	p.payload_len = 16;
	p.bth.opcode = ROCE_UC_SEND_ONLY;
	eng_qp_input(qb, &p, s.now);
	p.bth.opcode = ROCE_RC_SEND_ONLY;
	eng_qp_input(qb, &p, s.now);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_drop_bad_opcode], 2);
	expect_empty(B);
	uc = new_qp(B, IBV_QPT_UC, NULL);
	eng_qp_set_state(uc, IBV_QPS_INIT, s.now);
	eng_qp_set_attr(uc, &at);
	CHECK_EQ(post_recv(uc, 12, b_dst, 0, 4096), 0);
	p.bth.dqpn = eng_qp_num(uc);
	p.bth.opcode = ROCE_UC_SEND_ONLY;
	eng_qp_input(uc, &p, s.now); /* INIT: not yet */
	CHECK_EQ(eng_qp_counters(uc)[ENG_CNT_drop_bad_state], 1);
	eng_qp_set_state(uc, IBV_QPS_RTR, s.now);
	p.bth.opcode = ROCE_UD_SEND_ONLY;
	eng_qp_input(uc, &p, s.now);
	p.bth.opcode = ROCE_RC_SEND_ONLY;
	eng_qp_input(uc, &p, s.now);
	CHECK_EQ(eng_qp_counters(uc)[ENG_CNT_drop_bad_opcode], 2);
	expect_empty(B);
	/* The right one is taken by the QP in RTR (and PSN 0 is what it expects). */
	p.bth.opcode = ROCE_UC_SEND_ONLY;
	eng_qp_input(uc, &p, s.now);
	expect_recv(B, 12, IBV_WC_SUCCESS, IBV_WC_RECV, 16, 0, uc, 0, 0);
	CHECK_MEM(b_dst->host, payload, 16);
	CHECK(sim_has_event(B, IBV_EVENT_COMM_EST));
	/* A UD QP in INIT takes nothing either. */
	rc_like = new_qp(A, IBV_QPT_UD, NULL);
	eng_qp_set_state(rc_like, IBV_QPS_INIT, s.now);
	eng_qp_set_attr(rc_like, &at);
	p.bth.dqpn = eng_qp_num(rc_like);
	p.bth.opcode = ROCE_UD_SEND_ONLY;
	eng_qp_input(rc_like, &p, s.now);
	CHECK_EQ(eng_qp_counters(rc_like)[ENG_CNT_drop_bad_state], 1);
	teardown();
}

/* ERR flushes posted receives; sends posted in ERR complete flushed. */
static void ud_flush(void)
{
	setup_ud(1024, 1024, false, false);
	CHECK_EQ(post_recv(qb, 81, b_dst, 0, 100), 0);
	CHECK_EQ(post_recv(qb, 82, b_dst, 100, 100), 0);
	eng_qp_set_state(qb, IBV_QPS_ERR, s.now);
	expect_recv(B, 81, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, qb, 0, 0);
	expect_recv(B, 82, IBV_WC_WR_FLUSH_ERR, 0, 0, 0, qb, 0, 0);
	eng_qp_set_state(qa, IBV_QPS_ERR, s.now);
	CHECK_EQ(ud_post(qa, 1, IBV_WR_SEND, 0, 8, 1, eng_qp_num(qb), QKEY1, 0, 0), 0);
	SIM_EXPECT_WC(A, 1, IBV_WC_WR_FLUSH_ERR, 0, -1);
	expect_empty(A);
	teardown();
}

/* DCQCN on a UD QP (SOFTRDMA_ECN): without a CNP its datagrams leave as without congestion
 * control; after one, at the rate the cut left, one rate for every destination: the spacing
 * of 32 datagrams to two QPs on the clock gives that rate within 1 %, and each arrives. */
static void ud_paced(bool cnp)
{
	const uint64_t line = 10ull * 1000 * 1000 * 1000; /* 10 Gbit/s */
	const uint32_t len = 1024, n = 32;
	struct dcqcn_params p;
	struct ibv_wc wc;

	setup_ud(1024, 1024, false, false);
	dcqcn_params_default(&p, line);
	p.time_reset_ns = 1000000000ull; /* the rate holds still meanwhile */
	p.byte_reset = 1ull << 40;
	CHECK_EQ(eng_qp_set_cc(qa, &p), 0);
	if (cnp) {
		eng_qp_cnp(qa, s.now);
		sim_run(&s, 10000); /* the decrease check 4 us later cuts */
	}
	uint64_t rate = eng_qp_cc_rate(qa);
	CHECK(cnp ? rate < line && rate > line / 4 : rate == line);
	for (uint32_t i = 0; i < n; i++) {
		struct eng_qp *dst = i % 2 ? qb2 : qb;
		CHECK_EQ(post_recv(dst, 1000 + i, b_dst, 4096 * (i % 2), ENG_GRH_LEN + len), 0);
		CHECK_EQ(ud_post(qa, i, IBV_WR_SEND, 0, len, 0x10001u + i % 2, eng_qp_num(dst),
				 i % 2 ? QKEY2 : QKEY1, 0, 0),
			 0);
	}
	/* 1 ms: time for every datagram at the cut rate (DCQCN's timers keep the QP busy for
	 * seconds after a cut: the simulator is never idle). */
	sim_run(&s, 1000000);
	for (uint32_t i = 0; i < n; i++) {
		REQUIRE(sim_poll(B, &wc, 1) == 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, ENG_GRH_LEN + len);
	}
	expect_empty(B);
	CHECK_EQ(probe.pkts, n);
	/* n - 1 gaps of one frame each at the rate (what the pacing counts: payload + 58). */
	double want = (double)(n - 1) * (len + 58) * 8e9 / (double)rate;
	double got = (double)(probe.last_at - probe.first_at);
	if (cnp) {
		CHECK(got > 0.99 * want && got < 1.01 * want);
		CHECK(eng_qp_counters(qa)[ENG_CNT_cc_held] > 0);
		CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_cc_cuts], 1);
	} else {
		CHECK(got < 0.5 * want);
		CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_cc_held], 0);
	}
	teardown();
}

int main(void)
{
	const uint32_t pmtus[] = {256, 1024, 4096};

	for (size_t i = 0; i < sizeof(pmtus) / sizeof(pmtus[0]); i++)
		uc_sizes_and_ops(pmtus[i], i == 1);
	uc_post_checks();
	for (int lost = 0; lost < 3; lost++)
		uc_gap(lost, false);
	uc_gap(1, true);
	uc_write_gap();
	uc_no_recv();
	uc_recv_short();
	uc_write_errors();
	uc_bad_lkey();
	uc_flush_spare();
	ud_basic(false);
	ud_basic(true);
	ud_dest_per_packet();
	ud_qkey();
	ud_too_long();
	ud_rx_too_long();
	ud_no_recv_and_short(false);
	ud_no_recv_and_short(true);
	ud_grh_scatter();
	ud_bad_lkey();
	ud_post_checks();
	transport_mismatch();
	ud_flush();
	ud_paced(false);
	ud_paced(true);
	return check_exit();
}
