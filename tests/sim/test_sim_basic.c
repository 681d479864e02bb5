/* Engine pair on a perfect link: every operation at the interesting sizes for three path
 * MTUs, scatter/gather on both sides, inline data, immediates, invalidate, atomics and
 * unsignaled completions. Every destination byte and every completion field is checked,
 * including that bytes next to the destination were not touched. The sizes, scatter/gather
 * and inline runs are repeated with the payloads left where they lie (eng_qp_output_ref, as
 * core/ sends them), which must happen for some packets and change no byte. */
#include "check.h"
#include "sim.h"

#define MIB   (1u << 20)
#define GUARD 64
#define BUFSZ (MIB + 4096 + 2 * GUARD)

static struct sim s;
static struct eng_qp *qa, *qb;
static struct sim_mr *a_src, *a_dst, *b_src, *b_dst;
static uint64_t next_wr = 1;
static uint32_t ref_min; /* s.ref_min of the next setup */

static void setup(uint32_t pmtu, bool wire)
{
	struct sim_qp_cfg cfg = {0};
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;

	sim_init(&s, 1);
	s.wire = wire;
	s.ref_min = ref_min;
	cfg.pmtu = pmtu;
	sim_connect(&s, &cfg, &qa, &qb);
	a_src = sim_mr_reg(&s.node[SIM_A], 1, BUFSZ, acc);
	a_dst = sim_mr_reg(&s.node[SIM_A], 1, BUFSZ, acc);
	b_src = sim_mr_reg(&s.node[SIM_B], 1, BUFSZ, acc);
	b_dst = sim_mr_reg(&s.node[SIM_B], 1, BUFSZ, acc);
	sim_fill(a_src->host, BUFSZ, 11);
	sim_fill(b_src->host, BUFSZ, 22);
}

static void run_idle(void)
{
	REQUIRE(sim_run(&s, 60ull * 1000 * 1000 * 1000));
}

/* dst[GUARD .. GUARD+len) equals src, the guard bytes around it are still zero. */
static void check_dst(const uint8_t *dst, const uint8_t *src, uint32_t len)
{
	static const uint8_t zero[GUARD];

	CHECK_MEM(dst, zero, GUARD);
	CHECK_MEM(dst + GUARD, src, len);
	CHECK_MEM(dst + GUARD + len, zero, GUARD);
}

static void expect_empty(struct sim_node *n)
{
	struct ibv_wc wc;

	CHECK_EQ(sim_poll(n, &wc, 1), 0);
}

static void one_op(enum ibv_wr_opcode op, uint32_t len)
{
	uint64_t wr = next_wr++;
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	uint32_t imm = 0x12345678u + len;
	struct ibv_sge sge = {sim_va(a_src, 0), len, a_src->key};
	struct ibv_send_wr w = {0};
	const struct ibv_send_wr *bad;
	struct ibv_wc wc;

	memset(a_dst->host, 0, len + 2 * GUARD);
	memset(b_dst->host, 0, len + 2 * GUARD);
	w.wr_id = wr;
	w.opcode = op;
	w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.imm_data = imm;
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		CHECK_EQ(sim_post_recv(qb, wr + 1000000, b_dst, GUARD, len), 0);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		CHECK_EQ(sim_post_recv(qb, wr + 1000000, NULL, 0, 0), 0);
		/* fall through */
	case IBV_WR_RDMA_WRITE:
		w.wr.rdma.remote_addr = sim_va(b_dst, GUARD);
		w.wr.rdma.rkey = b_dst->key;
		break;
	case IBV_WR_RDMA_READ:
		sge.addr = sim_va(a_dst, GUARD);
		sge.lkey = a_dst->key;
		w.wr.rdma.remote_addr = sim_va(b_src, 0);
		w.wr.rdma.rkey = b_src->key;
		break;
	default:
		break;
	}
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		SIM_EXPECT_WC(A, wr, IBV_WC_SUCCESS, IBV_WC_SEND, len);
		CHECK_EQ(sim_poll(B, &wc, 1), 1);
		CHECK_EQ(wc.wr_id, wr + 1000000);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, len);
		CHECK_EQ(wc.qp_num, eng_qp_num(qb));
		CHECK_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), op == IBV_WR_SEND_WITH_IMM);
		if (op == IBV_WR_SEND_WITH_IMM)
			CHECK_EQ(wc.imm_data, imm);
		check_dst(b_dst->host, a_src->host, len);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		SIM_EXPECT_WC(A, wr, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, len);
		if (op == IBV_WR_RDMA_WRITE_WITH_IMM) {
			CHECK_EQ(sim_poll(B, &wc, 1), 1);
			CHECK_EQ(wc.wr_id, wr + 1000000);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
			CHECK_EQ(wc.byte_len, len);
			CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
			CHECK_EQ(wc.imm_data, imm);
		}
		check_dst(b_dst->host, a_src->host, len);
		break;
	case IBV_WR_RDMA_READ:
		SIM_EXPECT_WC(A, wr, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
		check_dst(a_dst->host, b_src->host, len);
		break;
	default:
		break;
	}
	expect_empty(A);
	expect_empty(B);
}

static void sizes_and_ops(uint32_t pmtu, bool wire)
{
	const uint32_t sizes[] = {0, 1, pmtu - 1, pmtu, pmtu + 1, 3 * pmtu, MIB};
	const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
					  IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ};

	setup(pmtu, wire);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			one_op(ops[o], sizes[i]);
	CHECK_EQ(eng_qp_counters(qa)[ENG_CNT_retransmits], 0);
	CHECK_EQ(eng_qp_counters(qb)[ENG_CNT_retransmits], 0);
	CHECK_EQ(eng_qp_state(qa), IBV_QPS_RTS);
	CHECK_EQ(eng_qp_state(qb), IBV_QPS_RTS);
	if (ref_min)
		CHECK(s.stats.ref_out > 0);
	else
		CHECK_EQ(s.stats.ref_out, 0);
	sim_fini(&s);
}

/* SEND gathered from 3 SGEs into a receive scattered over 4; WRITE from 3 SGEs; READ into 3. */
static void scatter_gather(void)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	struct ibv_sge as[3] = {{sim_va(a_src, 5), 700, a_src->key},
				{sim_va(a_dst, 3000), 1, a_dst->key},
				{sim_va(a_src, 9000), 2000, a_src->key}};
	struct ibv_sge bs[4] = {{sim_va(b_dst, 100), 10, b_dst->key},
				{sim_va(b_dst, 5000), 1500, b_dst->key},
				{sim_va(b_src, 50000), 0, b_src->key},
				{sim_va(b_dst, 20000), 1200, b_dst->key}};
	uint8_t expect[2701];
	struct ibv_send_wr w = {0};
	struct ibv_recv_wr r = {0};
	const struct ibv_send_wr *bad;
	const struct ibv_recv_wr *rbad;
	uint32_t off = 0;

	setup(1024, false);
	sim_fill(a_dst->host, BUFSZ, 33);
	memcpy(expect, a_src->host + 5, 700);
	memcpy(expect + 700, a_dst->host + 3000, 1);
	memcpy(expect + 701, a_src->host + 9000, 2000);

	r.wr_id = 77;
	r.sg_list = bs;
	r.num_sge = 4;
	CHECK_EQ(eng_base_post_recv(eng_qp_base(qb), &r, &rbad), 0);
	w.wr_id = 1;
	w.opcode = IBV_WR_SEND;
	w.send_flags = IBV_SEND_SIGNALED;
	w.sg_list = as;
	w.num_sge = 3;
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, 2701);
	SIM_EXPECT_WC(B, 77, IBV_WC_SUCCESS, IBV_WC_RECV, 2701);
	CHECK_MEM(b_dst->host + 100, expect, 10);
	CHECK_MEM(b_dst->host + 5000, expect + 10, 1500);
	CHECK_MEM(b_dst->host + 20000, expect + 1510, 1191);
	CHECK_EQ(b_dst->host[99], 0);
	CHECK_EQ(b_dst->host[110], 0);
	CHECK_EQ(b_dst->host[6500], 0);
	CHECK_EQ(b_dst->host[21191], 0);

	w.wr_id = 2;
	w.opcode = IBV_WR_RDMA_WRITE;
	w.wr.rdma.remote_addr = sim_va(b_dst, 100000);
	w.wr.rdma.rkey = b_dst->key;
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 2701);
	CHECK_MEM(b_dst->host + 100000, expect, sizeof(expect));
	CHECK_EQ(b_dst->host[100000 + sizeof(expect)], 0);

	/* READ scattered into three local buffers. */
	{
		struct ibv_sge ds[3] = {{sim_va(a_dst, 200000), 1000, a_dst->key},
					{sim_va(a_dst, 300000), 24, a_dst->key},
					{sim_va(a_dst, 400000), 3000, a_dst->key}};

		memset(a_dst->host + 200000, 0, 300000);
		w.wr_id = 3;
		w.opcode = IBV_WR_RDMA_READ;
		w.sg_list = ds;
		w.num_sge = 3;
		w.wr.rdma.remote_addr = sim_va(b_src, 777);
		w.wr.rdma.rkey = b_src->key;
		CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
		run_idle();
		SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 4024);
		off = 777;
		CHECK_MEM(a_dst->host + 200000, b_src->host + off, 1000);
		CHECK_MEM(a_dst->host + 300000, b_src->host + off + 1000, 24);
		CHECK_MEM(a_dst->host + 400000, b_src->host + off + 1024, 3000);
		CHECK_EQ(a_dst->host[201000], 0);
		CHECK_EQ(a_dst->host[300024], 0);
		CHECK_EQ(a_dst->host[403000], 0);
	}
	expect_empty(A);
	expect_empty(B);
	sim_fini(&s);
}

/* Inline SEND and WRITE: the source buffer is overwritten right after posting. */
static void inline_data(void)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	uint8_t keep[ENG_MAX_INLINE];
	const uint32_t sizes[] = {0, 1, 17, 255, 256};

	setup(256, true);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t len = sizes[i];

		memcpy(keep, a_src->host + 64, len);
		memset(b_dst->host, 0, 4096);
		CHECK_EQ(sim_post_recv(qb, 500 + i, b_dst, GUARD, 1024), 0);
		CHECK_EQ(sim_post_send(A, qa, 100 + i, IBV_WR_SEND, a_src, 64, len, 0, 0,
				       IBV_SEND_INLINE | IBV_SEND_SIGNALED),
			 0);
		CHECK_EQ(sim_post_send(A, qa, 200 + i, IBV_WR_RDMA_WRITE, a_src, 64, len,
				       sim_va(b_dst, 2048), b_dst->key,
				       IBV_SEND_INLINE | IBV_SEND_SIGNALED),
			 0);
		memset(a_src->host + 64, 0xEE, len); /* inline: copied at post time */
		run_idle();
		SIM_EXPECT_WC(A, 100 + i, IBV_WC_SUCCESS, IBV_WC_SEND, len);
		SIM_EXPECT_WC(A, 200 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, len);
		SIM_EXPECT_WC(B, 500 + i, IBV_WC_SUCCESS, IBV_WC_RECV, len);
		CHECK_MEM(b_dst->host + GUARD, keep, len);
		CHECK_MEM(b_dst->host + 2048, keep, len);
		CHECK_EQ(b_dst->host[GUARD + len], 0);
		CHECK_EQ(b_dst->host[2048 + len], 0);
		memcpy(a_src->host + 64, keep, len);
	}
	/* An empty entry without an address next to one with the data, as UCX posts them (its
	 * inline header SGE may be {0, 0}): the empty one adds nothing (and is never read). */
	{
		struct ibv_sge sge[2] = {{.addr = 0, .length = 0, .lkey = 0},
					 {.addr = (uint64_t)(uintptr_t)(a_src->host + 64),
					  .length = 17,
					  .lkey = a_src->key}};
		struct ibv_send_wr wr = {.wr_id = 300,
					 .sg_list = sge,
					 .num_sge = 2,
					 .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED};
		const struct ibv_send_wr *bad = NULL;
		memset(b_dst->host, 0, 4096);
		CHECK_EQ(sim_post_recv(qb, 600, b_dst, GUARD, 1024), 0);
		CHECK_EQ(eng_qp_post_send(qa, &wr, &bad, s.now), 0);
		run_idle();
		SIM_EXPECT_WC(A, 300, IBV_WC_SUCCESS, IBV_WC_SEND, 17);
		SIM_EXPECT_WC(B, 600, IBV_WC_SUCCESS, IBV_WC_RECV, 17);
		CHECK_MEM(b_dst->host + GUARD, a_src->host + 64, 17);
	}
	/* Too long for inline: refused at post. */
	CHECK_EQ(sim_post_send(A, qa, 999, IBV_WR_SEND, a_src, 0, ENG_MAX_INLINE + 1, 0, 0,
			       IBV_SEND_INLINE),
		 -EINVAL);
	expect_empty(A);
	expect_empty(B);
	if (ref_min)
		CHECK(s.stats.ref_out > 0); /* from the WQE's inline copy */
	sim_fini(&s);
}

static void atomics(void)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	uint64_t v = 1000, got;

	setup(1024, true);
	memcpy(b_dst->host + 64, &v, 8);
	CHECK_EQ(sim_post_atomic(A, qa, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 0, sim_va(b_dst, 64),
				 b_dst->key, 5, 0, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_atomic(A, qa, 2, IBV_WR_ATOMIC_CMP_AND_SWP, a_dst, 8, sim_va(b_dst, 64),
				 b_dst->key, 1005, 77, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_atomic(A, qa, 3, IBV_WR_ATOMIC_CMP_AND_SWP, a_dst, 16, sim_va(b_dst, 64),
				 b_dst->key, 1005, 99, IBV_SEND_SIGNALED),
		 0);
	CHECK_EQ(sim_post_atomic(A, qa, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 24,
				 sim_va(b_dst, 64), b_dst->key, (uint64_t)-7, 0, IBV_SEND_SIGNALED),
		 0);
	run_idle();
	SIM_EXPECT_WC(A, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 8);
	SIM_EXPECT_WC(A, 3, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 8);
	SIM_EXPECT_WC(A, 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
	memcpy(&got, a_dst->host, 8);
	CHECK_EQ(got, 1000);
	memcpy(&got, a_dst->host + 8, 8);
	CHECK_EQ(got, 1005); /* swapped to 77 */
	memcpy(&got, a_dst->host + 16, 8);
	CHECK_EQ(got, 77); /* compare failed */
	memcpy(&got, a_dst->host + 24, 8);
	CHECK_EQ(got, 77);
	memcpy(&got, b_dst->host + 64, 8);
	CHECK_EQ(got, 70);
	CHECK_EQ(b_dst->host[63], 0);
	CHECK_EQ(b_dst->host[72], 0);
	/* Wrong length: atomics take exactly 8 bytes. */
	CHECK_EQ(sim_post_send(A, qa, 9, IBV_WR_ATOMIC_FETCH_AND_ADD, a_dst, 0, 4,
			       sim_va(b_dst, 64), b_dst->key, 0),
		 -EINVAL);
	expect_empty(A);
	expect_empty(B);
	sim_fini(&s);
}

/* Unsignaled WRs complete silently; sq_sig_all signals everything. */
static void unsignaled(void)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	struct sim_qp_cfg cfg = {0};
	struct eng_qp *qa2, *qb2;

	setup(1024, false);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(sim_post_send(A, qa, 10 + i, i % 2 ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
				       i % 2 ? a_src : a_dst, 0, 3000, sim_va(b_dst, 0), b_dst->key,
				       i == 4 || i == 9 ? IBV_SEND_SIGNALED : 0),
			 0);
	run_idle();
	SIM_EXPECT_WC(A, 14, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 3000);
	SIM_EXPECT_WC(A, 19, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 3000);
	expect_empty(A);

	cfg.sq_sig_all = true;
	sim_connect(&s, &cfg, &qa2, &qb2);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(sim_post_send(A, qa2, 30 + i, IBV_WR_RDMA_WRITE, a_src, 0, 100,
				       sim_va(b_dst, 0), b_dst->key, 0),
			 0);
	run_idle();
	for (int i = 0; i < 3; i++)
		SIM_EXPECT_WC(A, 30 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	expect_empty(A);
	expect_empty(B);
	sim_fini(&s);
}

static int notified;
static void on_notify(struct eng_cq *cq)
{
	(void)cq;
	notified++;
}

/* SEND with Invalidate: the receive reports the R_Key and the MR is invalid afterwards. A CQ
 * armed for solicited completions fires only for a SEND that carried SE. */
static void send_inv(void)
{
	struct sim_node *A = &s.node[SIM_A], *B = &s.node[SIM_B];
	struct sim_mr *victim;
	struct ibv_send_wr w = {0};
	struct ibv_sge sge;
	const struct ibv_send_wr *bad;
	struct ibv_wc wc;

	setup(1024, true);
	B->cq.notify = on_notify;
	B->cq.armed = 2;
	CHECK_EQ(sim_post_recv(qb, 3, b_dst, 8192, 4096), 0);
	CHECK_EQ(sim_post_send(A, qa, 2, IBV_WR_SEND, a_src, 0, 10, 0, 0, IBV_SEND_SIGNALED), 0);
	run_idle();
	SIM_EXPECT_WC(A, 2, IBV_WC_SUCCESS, IBV_WC_SEND, 10);
	SIM_EXPECT_WC(B, 3, IBV_WC_SUCCESS, IBV_WC_RECV, 10);
	CHECK_EQ(notified, 0);
	victim = sim_mr_reg(B, 1, 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE);
	CHECK_EQ(sim_post_recv(qb, 5, b_dst, 0, 4096), 0);
	sge = (struct ibv_sge){sim_va(a_src, 0), 2000, a_src->key};
	w.wr_id = 4;
	w.opcode = IBV_WR_SEND_WITH_INV;
	w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	w.sg_list = &sge;
	w.num_sge = 1;
	w.invalidate_rkey = victim->key;
	CHECK_EQ(eng_qp_post_send(qa, &w, &bad, s.now), 0);
	run_idle();
	SIM_EXPECT_WC(A, 4, IBV_WC_SUCCESS, IBV_WC_SEND, 2000);
	CHECK_EQ(sim_poll(B, &wc, 1), 1);
	CHECK_EQ(wc.wr_id, 5);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK(wc.wc_flags & IBV_WC_WITH_INV);
	CHECK_EQ(wc.invalidated_rkey, victim->key);
	CHECK_EQ(wc.byte_len, 2000);
	CHECK(!victim->valid);
	CHECK_EQ(notified, 1); /* solicited: fired once, and disarmed */
	CHECK_EQ(B->cq.armed, 0);
	CHECK_MEM(b_dst->host, a_src->host, 2000);
	expect_empty(A);
	expect_empty(B);
	sim_fini(&s);
}

int main(void)
{
	sizes_and_ops(256, false);
	sizes_and_ops(1024, true);
	sizes_and_ops(4096, false);
	scatter_gather();
	inline_data();
	atomics();
	unsignaled();
	send_inv();
	/* Payloads from where they lie: every one (1), or those of a path MTU (1024). */
	ref_min = 1;
	sizes_and_ops(256, true);
	scatter_gather();
	inline_data();
	ref_min = 1024;
	sizes_and_ops(4096, false);
	return check_exit();
}
