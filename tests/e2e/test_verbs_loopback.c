/* End to end over real UDP sockets on loopback, through the verbs API: two device contexts
 * (each with its own socket, steering slot and progress thread) connected by RC QPs.
 * Every opcode at 0 B, 1 B, MTU-1, MTU, MTU+1 and 1 MiB with every byte checked; remote
 * access violations; RNR; a peer that disappears; bad API arguments. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static bool use_ipv6;

#define BUF_SIZE ((2u << 20) + 4096) /* two 1 MiB messages and guard bytes */

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static struct ibv_device *find_lo(struct ibv_device ***list)
{
	int n;
	*list = ibv_get_device_list(&n);
	for (int i = 0; *list && i < n; i++)
		if (!strcmp(ibv_get_device_name((*list)[i]), "roce_lo"))
			return (*list)[i];
	return NULL;
}

static void side_open(struct side *s, struct ibv_device *dev, unsigned mr_access)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ibv_open_device(dev);
	REQUIRE(s->ctx);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = calloc(1, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, (int)mr_access);
	REQUIRE(s->pd && s->cq && s->buf && s->mr);
	struct ibv_qp_init_attr qia = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4, .max_recv_sge = 4}};
	s->qp = ibv_create_qp(s->pd, &qia);
	REQUIRE(s->qp);
	struct ibv_port_attr pa;
	REQUIRE(ibv_query_port(s->ctx, 1, &pa) == 0);
	s->mtu = pa.active_mtu;
	s->gid_index = -1;
	/* An IPv4-mapped GID, or with --ipv6 the IPv6 one (::1 on lo). */
	for (int i = 0; i < pa.gid_tbl_len && s->gid_index < 0; i++)
		if (!ibv_query_gid(s->ctx, 1, i, &s->gid) && (s->gid.raw[10] == 0xff) != use_ipv6)
			s->gid_index = i;
	REQUIRE(s->gid_index >= 0);
}

static void side_connect(struct side *s, const struct side *peer, uint8_t rnr_retry,
			 uint8_t timeout, uint8_t retry_cnt)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	REQUIRE(ibv_modify_qp(s->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->mtu;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = 0xfffff0; /* near the wrap */
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1; /* 10 us */
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
	a.ah_attr.grh.dgid = peer->gid;
	REQUIRE(ibv_modify_qp(s->qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 0xfffff0;
	a.max_rd_atomic = 4;
	REQUIRE(ibv_modify_qp(s->qp, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

static void side_close(struct side *s)
{
	if (s->qp)
		CHECK_EQ(ibv_destroy_qp(s->qp), 0);
	CHECK_EQ(ibv_dereg_mr(s->mr), 0);
	CHECK_EQ(ibv_destroy_cq(s->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(s->pd), 0);
	CHECK_EQ(ibv_close_device(s->ctx), 0);
	free(s->buf);
}

/* Waits up to 10 s for one completion. Returns 0 and *wc, or -1 on timeout. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n == 1)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 10)
			return -1;
	}
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static void post_recv(struct side *s, uint64_t off, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	CHECK_EQ(ibv_post_recv(s->qp, &wr, &bad), 0);
}

static int post_send(struct side *s, enum ibv_wr_opcode op, uint64_t off, uint32_t len,
		     uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(0x12345678);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

/* One message of `len` bytes for each data opcode, checked on both sides. */
static void data_ops(struct side *a, struct side *b, uint32_t len, unsigned seed)
{
	struct ibv_wc wc;
	const uint64_t src = 0, dst = 1u << 20;
	/* SEND and SEND with immediate */
	for (int imm = 0; imm < 2; imm++) {
		fill(a->buf + src, len, seed + (unsigned)imm);
		memset(b->buf + dst, 0xEE, len + 1);
		post_recv(b, dst, len, 77);
		CHECK_EQ(post_send(a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, src, len, 0, 0, 1),
			 0);
		REQUIRE(wait_wc(a->cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
		CHECK_EQ(wc.wr_id, 1);
		REQUIRE(wait_wc(b->cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, len);
		CHECK_EQ(wc.wr_id, 77);
		CHECK_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM), imm);
		if (imm)
			CHECK_EQ(be32toh(wc.imm_data), 0x12345678);
		CHECK_MEM(b->buf + dst, a->buf + src, len);
		CHECK_EQ(b->buf[dst + len], 0xEE); /* nothing past the message */
	}
	/* RDMA WRITE */
	fill(a->buf + src, len, seed + 2);
	memset(b->buf + dst, 0xEE, len + 1);
	CHECK_EQ(post_send(a, IBV_WR_RDMA_WRITE, src, len, (uintptr_t)b->buf + dst, b->mr->rkey, 2),
		 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	CHECK_MEM(b->buf + dst, a->buf + src, len);
	CHECK_EQ(b->buf[dst + len], 0xEE);
	/* RDMA WRITE with immediate consumes a receive */
	fill(a->buf + src, len, seed + 3);
	post_recv(b, dst, 0, 78);
	CHECK_EQ(post_send(a, IBV_WR_RDMA_WRITE_WITH_IMM, src, len, (uintptr_t)b->buf + dst,
			   b->mr->rkey, 3),
		 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	REQUIRE(wait_wc(b->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK_EQ(wc.byte_len, len);
	CHECK_MEM(b->buf + dst, a->buf + src, len);
	/* RDMA READ */
	fill(b->buf + dst, len, seed + 4);
	memset(a->buf + src, 0xEE, len + 1);
	CHECK_EQ(post_send(a, IBV_WR_RDMA_READ, src, len, (uintptr_t)b->buf + dst, b->mr->rkey, 4),
		 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_MEM(a->buf + src, b->buf + dst, len);
	CHECK_EQ(a->buf[src + len], 0xEE);
}

static void atomics(struct side *a, struct side *b)
{
	struct ibv_wc wc;
	uint64_t *target = (uint64_t *)(b->buf + 4096), *result = (uint64_t *)a->buf;
	*target = 1000;
	struct ibv_sge sge = {.addr = (uintptr_t)result, .length = 8, .lkey = a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = b->mr->rkey;
	wr.wr.atomic.compare_add = 1000;
	wr.wr.atomic.swap = 2000;
	CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_COMP_SWAP);
	CHECK_EQ(*result, 1000);
	CHECK_EQ(*target, 2000);
	/* A compare that does not match leaves memory alone and returns the value. */
	wr.wr.atomic.compare_add = 1;
	wr.wr.atomic.swap = 3;
	CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(*result, 2000);
	CHECK_EQ(*target, 2000);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.compare_add = 5;
	CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_FETCH_ADD);
	CHECK_EQ(*result, 2000);
	CHECK_EQ(*target, 2005);
}

static void api_misuse(struct side *a)
{
	struct ibv_send_wr wr = {.wr_id = 1, .opcode = (enum ibv_wr_opcode)99}, *bad = NULL;
	CHECK(ibv_post_send(a->qp, &wr, &bad) != 0);
	CHECK(bad == &wr);
	struct ibv_sge sges[20];
	memset(sges, 0, sizeof(sges));
	/* A zero-length WRITE needs neither a receive nor a valid rkey. */
	struct ibv_send_wr w1 = {.wr_id = 1,
				 .opcode = IBV_WR_RDMA_WRITE,
				 .sg_list = sges,
				 .num_sge = 0,
				 .send_flags = IBV_SEND_SIGNALED};
	struct ibv_send_wr w2 = {.wr_id = 2, .opcode = IBV_WR_SEND, .sg_list = sges, .num_sge = 20};
	w1.next = &w2;
	/* The first is fine, the second has too many SGEs: *bad points at the second. */
	CHECK_EQ(ibv_post_send(a->qp, &w1, &bad), EINVAL);
	CHECK(bad == &w2);
	struct ibv_wc wc;
	CHECK_EQ(wait_wc(a->cq, &wc), 0); /* w1's completion */
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	/* Illegal state transition and bad attribute values return errno values. */
	struct ibv_qp_attr at = {.qp_state = IBV_QPS_RTR};
	CHECK_EQ(ibv_modify_qp(a->qp, &at, IBV_QP_STATE), EINVAL);
	CHECK(ibv_reg_mr(a->pd, a->buf, 16, IBV_ACCESS_REMOTE_WRITE) == NULL);
	CHECK_EQ(errno, EINVAL);
	CHECK(ibv_create_cq(a->ctx, 0, NULL, NULL, 0) == NULL);
	struct ibv_qp_init_attr qia = {.send_cq = a->cq,
				       .recv_cq = a->cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = 1, .max_send_sge = 99}};
	CHECK(ibv_create_qp(a->pd, &qia) == NULL);
}

int main(int argc, char **argv)
{
	/* --data-only: the data path alone (used with fault injection, where a lost NAK turns an
	 * access error into a retry timeout, as it would on a real lossy network). */
	int data_only = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--data-only"))
			data_only = 1;
		else if (!strcmp(argv[i], "--ipv6"))
			use_ipv6 = true;
	}
	struct ibv_device **list;
	struct ibv_device *dev = find_lo(&list);
	REQUIRE(dev);
	const unsigned all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	struct side a, b;
	side_open(&a, dev, all);
	side_open(&b, dev, all);
	CHECK(a.qp->qp_num != b.qp->qp_num);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	uint32_t mtu = 128u << a.mtu;
	const uint32_t sizes[] = {0, 1, mtu - 1, mtu, mtu + 1, 1u << 20};
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fprintf(stderr, "data ops at %u bytes\n", sizes[i]);
		data_ops(&a, &b, sizes[i], i);
		data_ops(&b, &a, sizes[i], i + 100);
	}
	atomics(&a, &b);
	if (data_only) {
		side_close(&a);
		side_close(&b);
		ibv_free_device_list(list);
		return check_exit();
	}
	api_misuse(&a);

	/* Remote access violation: an rkey that does not exist. Both QPs go to ERR. */
	struct ibv_wc wc;
	CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey + 0x100, 5),
		 0);
	REQUIRE(wait_wc(a.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_ERR);
	/* Later work requests are flushed. */
	CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 8, 0, 0, 6), 0);
	REQUIRE(wait_wc(a.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 6);
	side_close(&a);
	side_close(&b);

	/* Out-of-bounds READ (past the end of the region, and va+len overflowing). */
	for (int overflow = 0; overflow < 2; overflow++) {
		side_open(&a, dev, all);
		side_open(&b, dev, all);
		side_connect(&a, &b, 7, 14, 7);
		side_connect(&b, &a, 7, 14, 7);
		uint64_t raddr = overflow ? UINT64_MAX - 16 : (uintptr_t)b.buf + BUF_SIZE - 8;
		CHECK_EQ(post_send(&a, IBV_WR_RDMA_READ, 0, 64, raddr, b.mr->rkey, 7), 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
		side_close(&a);
		side_close(&b);
	}

	/* Missing access right: b's region allows no remote write. */
	side_open(&a, dev, all);
	side_open(&b, dev, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 8), 0);
	REQUIRE(wait_wc(a.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	side_close(&a);
	side_close(&b);

	/* RNR: a SEND with no receive posted and rnr_retry 1 fails; with 7 it waits. */
	side_open(&a, dev, all);
	side_open(&b, dev, all);
	side_connect(&a, &b, 1, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 9), 0);
	REQUIRE(wait_wc(a.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	side_close(&a);
	side_close(&b);

	side_open(&a, dev, all);
	side_open(&b, dev, all);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 12), 0);
	struct timespec pause = {0, 20 * 1000 * 1000};
	nanosleep(&pause, NULL); /* a is retrying on RNR (rnr_retry 7: forever) */
	post_recv(&b, 0, 64, 13);
	REQUIRE(wait_wc(a.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 12);
	REQUIRE(wait_wc(b.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);

	/* RTS->RTS may change only a few attributes (not the timeout). */
	struct ibv_qp_attr rts = {.timeout = 8};
	CHECK_EQ(ibv_modify_qp(a.qp, &rts, IBV_QP_TIMEOUT), EINVAL);
	side_close(&a);
	side_close(&b);

	/* A peer that disappears: b's QP is destroyed; a's WRITE exhausts its retries
	 * (timeout 8 = ~1 ms, retry_cnt 3). */
	side_open(&a, dev, all);
	side_open(&b, dev, all);
	side_connect(&a, &b, 7, 8, 3);
	side_connect(&b, &a, 7, 8, 3);
	CHECK_EQ(ibv_destroy_qp(b.qp), 0);
	b.qp = NULL;
	CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 14), 0);
	REQUIRE(wait_wc(a.cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	side_close(&a);
	side_close(&b);

	ibv_free_device_list(list);
	return check_exit();
}
