/* End to end over real UDP sockets on loopback, through the verbs API: two device contexts
 * (each with its own socket, steering slot and progress thread) connected by RC QPs.
 * Every opcode at 0 B, 1 B, MTU-1, MTU, MTU+1 and 1 MiB with every byte checked; remote
 * access violations; RNR; a peer that disappears; bad API arguments.
 *
 * The device is roce_lo, or the one $SOFTRDMA_TEST_DEV or --dev NAME names. On an iWARP device
 * (iwarp_lo) the QPs connect the same way (INIT -> RTR -> RTS; softrdma makes the TCP
 * connection and the MPA exchange: core/iw_progress.h) and everything runs, with what iWARP
 * does differently asserted instead (each printed as a note):
 *   - immediate data and atomics do not exist in RDMAP (RFC 5040): refused at post (EINVAL);
 *   - an RDMA WRITE completes when its bytes are handed to TCP, not when placed: the target's
 *     bytes are checked after a READ behind it on the same QP has returned them;
 *   - a WRITE that the target refuses (bad rkey, no remote write) has completed already: the
 *     target sends a Terminate, both QPs go to ERR, and the READ behind the WRITE, outstanding
 *     when the Terminate arrives, completes with the Terminate's status (REM_ACCESS_ERR);
 *   - no RNR NAK: a SEND with no receive posted is fatal (Terminate, both QPs in ERR); the
 *     "wait for the receive" case is skipped;
 *   - no retry count: a peer QP that disappears resets the TCP connection, the QP goes to ERR;
 *   - messages at the FPDU boundaries are added (around each sender's MULPDU, read from the
 *     QP: white box), and the FPDUs each SEND and WRITE takes are counted;
 *   - with SOFTRDMA_IW_CRC=on (strict, required), MPA must have negotiated CRC32c.
 * Back-to-back posts on a pipeline (core_posted) are checked to leave, in order, whether the
 * application polls after them or calls nothing. A poll that takes a SEND while the progress
 * thread moves the packets sends its ACK at once. --no-thread: the receiver's ACK without a
 * progress thread (SOFTRDMA_PROGRESS_THREAD=0, RoCE) when it calls nothing after its last
 * completion.
 * $SOFTRDMA_IW_PORT (the rendezvous port) is made random per process unless it is set. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "softrdma.h"
#include "wire/iwarp/iwarp.h"

static bool use_ipv6;
static bool iw;				 /* the device is iWARP */
static const char *dev_name = "roce_lo"; /* $SOFTRDMA_TEST_DEV or --dev */

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
		if (!strcmp(ibv_get_device_name((*list)[i]), dev_name))
			return (*list)[i];
	return NULL;
}

/* A case the device's protocol does not have (or has differently): said, never silent. */
static void note(const char *what, const char *why)
{
	fprintf(stderr, "NOTE (%s): %s: %s\n", dev_name, what, why);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	REQUIRE(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

/* Waits up to 10 s for qp to reach state; true if it did. */
static bool wait_state(struct ibv_qp *qp, enum ibv_qp_state state)
{
	uint64_t stop = now_ms() + 10000;
	while (qp_state(qp) != state) {
		if (now_ms() >= stop)
			return false;
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	return true;
}

/* iWARP, white box: the attributes of qp's connection, read from the QP under the context's
 * lock; no verb reports them. The MULPDU (largest DDP segment it sends) follows the MSS the
 * kernel reports once the MPA exchange is over, which varies with the peer's window; crc says
 * whether MPA negotiated CRC32c. */
static struct iw_qp_attr qp_iw_attr(struct ibv_qp *ibqp)
{
	struct sr_qp *q = (struct sr_qp *)ibqp;
	struct iw_qp_attr at;
	core_lock(q->ctx->core);
	iw_qp_get_attr(q->iqp, &at);
	core_unlock(q->ctx->core);
	return at;
}

static uint32_t qp_mulpdu(struct ibv_qp *ibqp)
{
	return qp_iw_attr(ibqp).mulpdu;
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
			   *bad = NULL;
	if (op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr.imm_data = htobe32(0x12345678);
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int r = ibv_post_send(s->qp, &wr, &bad);
	if (r)
		CHECK(bad == &wr);
	return r;
}

/* iWARP: posts `op` (64 bytes from a's offset 0 to raddr / rkey; wr_id) and a good 64-byte
 * READ of b's buffer into a's offset 4096 (read_id) in one call, so that both are handed to
 * TCP together: the READ is outstanding when b's answer to the first one comes back. (Two
 * calls would race with it: a Terminate that arrives in between puts the QP in ERR, and the
 * READ is flushed at post.) */
static void post_with_read(struct side *a, struct side *b, enum ibv_wr_opcode op, uint64_t raddr,
			   uint32_t rkey, uint64_t wr_id, uint64_t read_id)
{
	struct ibv_sge s1 = {.addr = (uintptr_t)a->buf, .length = 64, .lkey = a->mr->lkey};
	struct ibv_sge s2 = {.addr = (uintptr_t)a->buf + 4096, .length = 64, .lkey = a->mr->lkey};
	struct ibv_send_wr rd = {.wr_id = read_id,
				 .sg_list = &s2,
				 .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED},
			   wr = {.wr_id = wr_id,
				 .next = &rd,
				 .sg_list = &s1,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad = NULL;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	rd.wr.rdma.remote_addr = (uintptr_t)b->buf;
	rd.wr.rdma.rkey = b->mr->rkey;
	CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
}

/* iWARP: a's WRITE of `len` bytes to b's `dst` has completed, which only means that TCP has
 * the bytes (shared/spec/iwarp.md 6.4, as siw). A READ of the same bytes behind it on the same QP
 * returns after they were placed (the target handles its stream in order): the READ brings them
 * into a's own `dst` region, and both copies are checked by the caller against the source. */
static void read_back(struct side *a, struct side *b, uint64_t dst, uint32_t len)
{
	struct ibv_wc wc;
	memset(a->buf + dst, 0xEE, len + 1);
	CHECK_EQ(post_send(a, IBV_WR_RDMA_READ, dst, len, (uintptr_t)b->buf + dst, b->mr->rkey, 40),
		 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 40);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_EQ(a->buf[dst + len], 0xEE);
}

/* iWARP: the FPDUs a message of len bytes takes (RFC 5044 6.2: each carries at most MULPDU
 * bytes of DDP segment, header included; an empty message still takes one). */
static uint64_t fpdus_for(struct ibv_qp *qp, uint8_t opcode, uint32_t len)
{
	uint32_t room = qp_mulpdu(qp) - iw_opinfo(opcode)->hdr_len;
	return len ? (len + room - 1) / room : 1;
}

/* One message of `len` bytes for each data opcode, checked on both sides. */
static void data_ops(struct side *a, struct side *b, uint32_t len, unsigned seed)
{
	struct ibv_wc wc;
	const uint64_t src = 0, dst = 1u << 20;
	/* SEND and SEND with immediate */
	for (int imm = 0; imm < 2; imm++) {
		if (imm && iw) {
			/* RDMAP has no immediate data: refused at post, nothing sent. */
			CHECK_EQ(post_send(a, IBV_WR_SEND_WITH_IMM, src, len, 0, 0, 1), EINVAL);
			continue;
		}
		fill(a->buf + src, len, seed + (unsigned)imm);
		memset(b->buf + dst, 0xEE, len + 1);
		post_recv(b, dst, len, 77);
		uint64_t fpdus = iw ? softrdma_counter(NULL, a->qp, "tx_fpdus") : 0;
		CHECK_EQ(post_send(a, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, src, len, 0, 0, 1),
			 0);
		REQUIRE(wait_wc(a->cq, &wc) == 0);
		if (iw)
			CHECK_EQ(softrdma_counter(NULL, a->qp, "tx_fpdus") - fpdus,
				 fpdus_for(a->qp, IW_OP_SEND, len));
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
	uint64_t fpdus = iw ? softrdma_counter(NULL, a->qp, "tx_fpdus") : 0;
	CHECK_EQ(post_send(a, IBV_WR_RDMA_WRITE, src, len, (uintptr_t)b->buf + dst, b->mr->rkey, 2),
		 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	if (iw)
		CHECK_EQ(softrdma_counter(NULL, a->qp, "tx_fpdus") - fpdus,
			 fpdus_for(a->qp, IW_OP_WRITE, len));
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	if (iw) {
		read_back(a, b, dst, len);
		CHECK_MEM(a->buf + dst, a->buf + src, len);
	}
	CHECK_MEM(b->buf + dst, a->buf + src, len);
	CHECK_EQ(b->buf[dst + len], 0xEE);
	/* RDMA WRITE with immediate consumes a receive */
	fill(a->buf + src, len, seed + 3);
	if (iw) {
		/* RDMAP has no immediate data: refused at post. */
		CHECK_EQ(post_send(a, IBV_WR_RDMA_WRITE_WITH_IMM, src, len, (uintptr_t)b->buf + dst,
				   b->mr->rkey, 3),
			 EINVAL);
	} else {
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
	}
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

/* iWARP: RDMAP has no atomic operations (RFC 7306 adds them; softrdma, as siw, does not):
 * the device says so, and both are refused at post with nothing sent. */
static void atomics_refused(struct side *a, struct side *b)
{
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(a->ctx, &da), 0);
	CHECK_EQ(da.atomic_cap, IBV_ATOMIC_NONE);
	uint64_t *target = (uint64_t *)(b->buf + 4096);
	*target = 1000;
	struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = 8, .lkey = a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 9,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad = NULL;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = b->mr->rkey;
	wr.wr.atomic.compare_add = 1000;
	wr.wr.atomic.swap = 2000;
	CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	bad = NULL;
	CHECK_EQ(ibv_post_send(a->qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	/* Nothing went out: the QP is fine, the target untouched, no completion. */
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(a->cq, 1, &wc), 0);
	CHECK_EQ(qp_state(a->qp), IBV_QPS_RTS);
	read_back(a, b, 4096, 8);
	CHECK_EQ(*target, 1000);
	CHECK_EQ(*(uint64_t *)(a->buf + 4096), 1000);
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

/* iWARP: a's WRITE (wr 5) that b refuses, with a good READ (wr 15) queued behind it. The
 * WRITE completed when TCP took it (completion is local: shared/spec/iwarp.md 6.4); b checks
 * the STag, sends a Terminate (DDP tagged buffer error, iwarp.md 6.3) and goes to ERR; a
 * receives it while the READ is outstanding: the READ carries the Terminate's status
 * (REM_ACCESS_ERR) and a goes to ERR. Not a byte is placed. */
static void iw_refused_write(struct side *a, struct side *b, uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;
	memset(b->buf, 0x5A, 64);
	post_with_read(a, b, IBV_WR_RDMA_WRITE, raddr, rkey, 5, 15);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.wr_id, 5);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.wr_id, 15);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	CHECK(wait_state(a->qp, IBV_QPS_ERR));
	CHECK(wait_state(b->qp, IBV_QPS_ERR));
	CHECK_EQ(b->buf[0], 0x5A); /* not a byte placed */
	CHECK_EQ(b->buf[63], 0x5A);
}

/* Spins on a's CQ (empty) until a's application moves the packets itself (core/mover.h: its
 * progress thread has left the sockets), at most 5 s. Returns the thread's take-overs so far
 * (mover_to_thread) when it saw that, or UINT64_MAX if it never did. */
static uint64_t until_app_moves(struct side *a)
{
	const char *to_thread = iw ? "iw_mover_to_thread" : "mover_to_thread";
	const char *to_app = iw ? "iw_mover_to_app" : "mover_to_app";
	uint64_t stop = now_ms() + 5000;
	struct ibv_wc wc;
	while (now_ms() < stop) {
		CHECK_EQ(ibv_poll_cq(a->cq, 1, &wc), 0);
		uint64_t took = softrdma_counter(a->ctx, NULL, to_thread);
		if (softrdma_counter(a->ctx, NULL, to_app) > took)
			return took;
	}
	return UINT64_MAX;
}

/* Back-to-back SENDs while earlier ones await their ACKs (RoCE) or while the application has
 * not polled the completions of earlier ones (iWARP) wait for the next poll and leave together
 * (core_posted, iwp_posted: doorbell batching). Each arrives once, in order, with its bytes:
 * round 1 polls a's completions first (the poll sends them); in round 0 a's application calls
 * nothing after its posts (it computes, say), and its progress thread must send them.
 * Deferral happens only while the application moves the packets; on a loaded machine the
 * thread may take them over during the posts (the application descheduled for longer than
 * MOVER_GRACE_NS). A round where it did not must have deferred posts; rounds are repeated (at
 * most 8) until one defers some. */
static void pipelined_posts(struct side *a, struct side *b)
{
	enum { N = 48, LEN = 8, RX = 8192 };
	struct ibv_wc wc;
	bool checked = false;
	const char *counter = iw ? "iw_tx_deferred" : "tx_deferred";
	const char *to_thread = iw ? "iw_mover_to_thread" : "mover_to_thread";
	for (int round = 0; round < 2 || (!checked && round < 8); round++) {
		bool thread_sends = round == 0;
		for (int i = 0; i < N; i++)
			post_recv(b, RX + (uint64_t)i * LEN, LEN, 1000u + (unsigned)i);
		memset(b->buf + RX, 0, (size_t)N * LEN);
		fill(a->buf, (size_t)N * LEN, 40u + (unsigned)round);
		uint64_t took = until_app_moves(a);
		uint64_t deferred = softrdma_counter(a->ctx, NULL, counter);
		uint64_t t0 = now_ms();
		for (int i = 0; i < N; i++)
			CHECK_EQ(post_send(a, IBV_WR_SEND, (uint64_t)i * LEN, LEN, 0, 0,
					   2000u + (unsigned)i),
				 0);
		deferred = softrdma_counter(a->ctx, NULL, counter) - deferred;
		/* The application moved the packets from the look above to now. */
		bool kept = softrdma_counter(a->ctx, NULL, to_thread) == took;
		fprintf(stderr, "pipelined posts, round %d: %llu of %d left for the next poll%s\n",
			round, (unsigned long long)deferred, N,
			kept ? "" : " (the progress thread took the packets meanwhile)");
		if (kept)
			CHECK(deferred > 0);
		checked |= deferred > 0;
		for (int side = 0; side < 2; side++) {
			struct side *s = (side == 0) == thread_sends ? b : a;
			unsigned base = s == a ? 2000u : 1000u;
			for (int i = 0; i < N; i++) {
				REQUIRE(wait_wc(s->cq, &wc) == 0);
				CHECK_EQ(wc.status, IBV_WC_SUCCESS);
				CHECK_EQ(wc.wr_id, base + (unsigned)i);
				if (s == b)
					CHECK_EQ(wc.byte_len, LEN);
			}
			if (thread_sends && s == b)
				fprintf(stderr,
					"pipelined posts, round %d: all received after %llu ms "
					"with a calling nothing\n",
					round, (unsigned long long)(now_ms() - t0));
		}
		CHECK(memcmp(b->buf + RX, a->buf, (size_t)N * LEN) == 0);
		CHECK_EQ(ibv_poll_cq(a->cq, 1, &wc), 0);
		CHECK_EQ(ibv_poll_cq(b->cq, 1, &wc), 0);
	}
	if (!checked)
		note("pipelined posts", "no post waited: the progress thread took the packets in "
					"every round (a loaded machine); deferral not checked");
}

/* --no-thread (SOFTRDMA_PROGRESS_THREAD=0, RoCE and iWARP): only calls into the library move
 * packets (no progress thread makes a pass). A
 * receiver that takes its message and then calls nothing more (it exits, or waits on another
 * channel, as sr_perf's last round trip does) must have acknowledged it already: with no
 * thread to send a deferred ACK, the sender's completion would wait for a call that never
 * comes, and its retries would end in RETRY_EXC_ERR. */
static void without_thread(struct ibv_device *dev, unsigned access)
{
	struct side a, b;
	struct ibv_wc wc;
	side_open(&a, dev, access);
	side_open(&b, dev, access);
	side_connect(&a, &b, 7, 12, 3); /* ~17 ms timeout, 3 retries: a stuck ACK fails fast */
	side_connect(&b, &a, 7, 12, 3);
	for (unsigned i = 0; i < 4; i++) {
		post_recv(&b, 4096, 64, 30 + i);
		fill(a.buf, 64, i);
		CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 20 + i), 0);
		REQUIRE(wait_wc(b.cq, &wc) == 0); /* b's polls move the packets */
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 30 + i);
		CHECK(memcmp(b.buf + 4096, a.buf, 64) == 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0); /* b calls nothing meanwhile */
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 20 + i);
	}
	/* And no thread made a pass: the calls moved everything (iWARP too). */
	const char *passes = iw ? "iw_mover_passes" : "mover_passes";
	CHECK_EQ(softrdma_counter(a.ctx, NULL, passes), 0);
	CHECK_EQ(softrdma_counter(b.ctx, NULL, passes), 0);
	side_close(&a);
	side_close(&b);
}

/* The receiver's progress thread moves the packets (THREAD: the application announced a wait
 * for a completion event with ibv_req_notify_cq), but the application polls anyway and takes
 * the SEND itself, then calls nothing more (it computes before it replies, say). The ACK its
 * poll made due must leave in that poll: the thread in THREAD waits for packets and timers
 * only and would send it at its next look, up to 20 ms later (core/progress.c:
 * output_may_wait), or at the sender's retry. Rounds where the
 * thread took the packet first prove nothing; at least one round must be the application's. */
static void thread_mode_ack(struct ibv_device *dev, unsigned access)
{
	struct side a, b;
	struct ibv_wc wc;
	side_open(&a, dev, access);
	side_open(&b, dev, access);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	int app_rounds = 0;
	for (unsigned i = 0; i < 16 && app_rounds < 4; i++) {
		post_recv(&b, 4096, 64, 50 + i);
		CHECK_EQ(ibv_req_notify_cq(b.cq, 0), 0);
		/* THREAD from the start and after each take-over (core/mover.h): as many
		 * take-overs as hand-backs. */
		uint64_t stop = now_ms() + 5000;
		while (softrdma_counter(b.ctx, NULL, "mover_to_thread") <
			   softrdma_counter(b.ctx, NULL, "mover_to_app") &&
		       now_ms() < stop)
			usleep(200);
		REQUIRE(softrdma_counter(b.ctx, NULL, "mover_to_thread") >=
			softrdma_counter(b.ctx, NULL, "mover_to_app"));
		uint64_t work = softrdma_counter(b.ctx, NULL, "mover_work");
		uint64_t sent = softrdma_counter(b.ctx, NULL, "tx_packets");
		fill(a.buf, 64, 60 + i);
		CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 70 + i), 0);
		REQUIRE(wait_wc(b.cq, &wc) == 0); /* on loopback the datagram is there already */
		bool app = softrdma_counter(b.ctx, NULL, "mover_work") == work;
		/* The ACK went out in the poll that returned the completion. */
		uint64_t acked = softrdma_counter(b.ctx, NULL, "tx_packets") - sent;
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 50 + i);
		CHECK(memcmp(b.buf + 4096, a.buf, 64) == 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0); /* b calls nothing meanwhile */
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 70 + i);
		if (app) {
			app_rounds++;
			CHECK_EQ(acked, 1);
		}
	}
	fprintf(stderr, "ACK in THREAD mode: %d rounds where the application took the SEND\n",
		app_rounds);
	CHECK(app_rounds > 0);
	side_close(&a);
	side_close(&b);
}

int main(int argc, char **argv)
{
	/* --data-only: the data path alone (used with fault injection, where a lost NAK turns an
	 * access error into a retry timeout, as it would on a real lossy network). */
	int data_only = 0, no_thread = 0;
	if (getenv("SOFTRDMA_TEST_DEV") && *getenv("SOFTRDMA_TEST_DEV"))
		dev_name = getenv("SOFTRDMA_TEST_DEV");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--data-only"))
			data_only = 1;
		else if (!strcmp(argv[i], "--no-thread"))
			no_thread = 1;
		else if (!strcmp(argv[i], "--ipv6"))
			use_ipv6 = true;
		else if (!strcmp(argv[i], "--dev") && i + 1 < argc)
			dev_name = argv[++i];
	}
	/* iWARP's rendezvous port, random per process: parallel runs never meet. */
	if (!getenv("SOFTRDMA_IW_PORT")) {
		char port[16];
		snprintf(port, sizeof(port), "%d", 10000 + (int)(getpid() % 10000));
		setenv("SOFTRDMA_IW_PORT", port, 1);
	}
	if (no_thread)
		setenv("SOFTRDMA_PROGRESS_THREAD", "0", 1);
	struct ibv_device **list;
	struct ibv_device *dev = find_lo(&list);
	REQUIRE(dev);
	iw = dev->transport_type == IBV_TRANSPORT_IWARP;
	CHECK_EQ(iw, dev->node_type == IBV_NODE_RNIC);
	fprintf(stderr, "device %s (%s)\n", dev_name, iw ? "iWARP" : "RoCE");
	if (iw) {
		note("SEND / RDMA WRITE with immediate", "RDMAP has no immediate data; checked "
							 "to be refused at post (EINVAL)");
		note("RDMA WRITE", "completes when TCP has the bytes; the target is checked after "
				   "a READ behind it");
	}
	const unsigned all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	if (no_thread) {
		without_thread(dev, all);
		ibv_free_device_list(list);
		return check_exit();
	}
	struct side a, b;
	side_open(&a, dev, all);
	side_open(&b, dev, all);
	CHECK(a.qp->qp_num != b.qp->qp_num);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	uint32_t mtu = 128u << a.mtu;
	/* Per direction (iWARP: around the sender's FPDU, which each side sizes by itself). */
	uint32_t sizes[2][16];
	unsigned nsizes = 0;
	const uint32_t common[] = {0, 1, mtu - 1, mtu, mtu + 1};
	for (unsigned i = 0; i < sizeof(common) / sizeof(common[0]); i++, nsizes++)
		sizes[0][nsizes] = sizes[1][nsizes] = common[i];
	if (iw) {
		/* The connection is made in the background: wait for it (a READ comes back),
		 * then take each sender's MULPDU. Around it: a message that fills one FPDU
		 * exactly (MULPDU minus the untagged, then the tagged header), one byte more,
		 * and MULPDU itself +-1. */
		read_back(&a, &b, 0, 1);
		const char *crc = getenv("SOFTRDMA_IW_CRC");
		bool want_crc = crc && (!strcmp(crc, "on") || !strcmp(crc, "strict") ||
					!strcmp(crc, "required"));
		fprintf(stderr, "MPA CRC32c: %s\n", qp_iw_attr(a.qp).crc ? "on" : "off");
		CHECK_EQ(qp_iw_attr(a.qp).crc, want_crc);
		CHECK_EQ(qp_iw_attr(b.qp).crc, want_crc);
		for (int d = 0; d < 2; d++) {
			uint32_t m = qp_mulpdu(d ? b.qp : a.qp);
			uint32_t su = m - iw_opinfo(IW_OP_SEND)->hdr_len;
			uint32_t st = m - iw_opinfo(IW_OP_WRITE)->hdr_len;
			const uint32_t more[] = {su, su + 1, st, st + 1, m - 1, m, m + 1};
			fprintf(stderr, "%s's MULPDU %u\n", d ? "b" : "a", m);
			for (unsigned i = 0; i < sizeof(more) / sizeof(more[0]); i++)
				sizes[d][nsizes + i] = more[i];
		}
		nsizes += 7;
	}
	sizes[0][nsizes] = sizes[1][nsizes] = 1u << 20;
	nsizes++;
	for (unsigned i = 0; i < nsizes; i++) {
		fprintf(stderr, "data ops at %u / %u bytes\n", sizes[0][i], sizes[1][i]);
		data_ops(&a, &b, sizes[0][i], i);
		data_ops(&b, &a, sizes[1][i], i + 100);
	}
	pipelined_posts(&a, &b);
	if (iw) {
		note("atomics", "RDMAP has none (atomic_cap NONE); checked to be refused at post");
		atomics_refused(&a, &b);
	} else {
		atomics(&a, &b);
	}
	if (data_only) {
		side_close(&a);
		side_close(&b);
		ibv_free_device_list(list);
		return check_exit();
	}
	if (!iw) /* counts the packets a poll sends: not with a fault stage dropping some */
		thread_mode_ack(dev, all);
	api_misuse(&a);

	/* Remote access violation: an rkey that does not exist. Both QPs go to ERR. */
	struct ibv_wc wc;
	if (iw) {
		note("WRITE with a bad rkey", "completes locally; the READ behind it gets the "
					      "Terminate's REM_ACCESS_ERR");
		iw_refused_write(&a, &b, (uintptr_t)b.buf, b.mr->rkey + 0x100);
	} else {
		CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf,
				   b.mr->rkey + 0x100, 5),
			 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
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
		if (iw) {
			/* The Terminate ends the stream: both QPs in ERR. */
			CHECK(wait_state(a.qp, IBV_QPS_ERR));
			CHECK(wait_state(b.qp, IBV_QPS_ERR));
		}
		side_close(&a);
		side_close(&b);
	}

	/* Missing access right: b's region allows no remote write. */
	side_open(&a, dev, all);
	side_open(&b, dev, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	if (iw) {
		iw_refused_write(&a, &b, (uintptr_t)b.buf, b.mr->rkey);
	} else {
		CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 8),
			 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
	side_close(&a);
	side_close(&b);

	/* RNR: a SEND with no receive posted and rnr_retry 1 fails; with 7 it waits. */
	side_open(&a, dev, all);
	side_open(&b, dev, all);
	side_connect(&a, &b, 1, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	if (iw) {
		/* No RNR NAK in iWARP: a SEND that finds no receive is a fatal error at the
		 * target (DDP untagged buffer error "no buffer", shared/spec/iwarp.md): Terminate,
		 * both QPs in ERR. The SEND completed when TCP took it; the READ behind it gets
		 * the Terminate's status (REM_INV_REQ_ERR). */
		note("SEND with no receive posted", "no RNR retry in iWARP: fatal, both QPs in "
						    "ERR (asserted instead of RNR_RETRY_EXC_ERR)");
		post_with_read(&a, &b, IBV_WR_SEND, 0, 0, 9, 10);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.wr_id, 9);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.wr_id, 10);
		CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
		CHECK(wait_state(a.qp, IBV_QPS_ERR));
		CHECK(wait_state(b.qp, IBV_QPS_ERR));
		CHECK_EQ(ibv_poll_cq(b.cq, 1, &wc), 0); /* b had no receive to complete */
	} else {
		CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 9), 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	}
	side_close(&a);
	side_close(&b);

	side_open(&a, dev, all);
	side_open(&b, dev, all);
	side_connect(&a, &b, 7, 14, 7);
	side_connect(&b, &a, 7, 14, 7);
	if (iw) {
		note("SEND waiting on RNR until the receive is posted",
		     "skipped: iWARP has no RNR retry");
	} else {
		CHECK_EQ(post_send(&a, IBV_WR_SEND, 0, 64, 0, 0, 12), 0);
		struct timespec pause = {0, 20 * 1000 * 1000};
		nanosleep(&pause, NULL); /* a is retrying on RNR (rnr_retry 7: forever) */
		post_recv(&b, 0, 64, 13);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 12);
		REQUIRE(wait_wc(b.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}

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
	if (iw) {
		/* No retry count in iWARP: the connection is made first (a READ comes back),
		 * then b's QP is destroyed, which resets it (RFC 5044: TCP is the LLP); a sees
		 * the reset: ERR, and the WRITE fails. */
		note("peer QP destroyed",
		     "no retry count in iWARP: the peer's end of the stream is "
		     "seen, the next WRITE fails (asserted instead of "
		     "RETRY_EXC_ERR)");
		read_back(&a, &b, 0, 1);
		CHECK_EQ(ibv_destroy_qp(b.qp), 0);
		b.qp = NULL;
		/* As on RoCE, a's QP stays as it is (auto-connected: an orderly end of the
		 * peer's stream flushes nothing) until it sends: then it fails, flushed. */
		uint64_t stop = now_ms() + 10000;
		struct timespec ms = {0, 1000000};
		while (softrdma_counter(a.ctx, NULL, "iw_peer_closed") != 1 && now_ms() < stop)
			nanosleep(&ms, NULL);
		CHECK_EQ(softrdma_counter(a.ctx, NULL, "iw_peer_closed"), 1);
		CHECK_EQ(qp_state(a.qp), IBV_QPS_RTS);
		CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 14),
			 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc.wr_id, 14);
		CHECK(wait_state(a.qp, IBV_QPS_ERR));
	} else {
		CHECK_EQ(ibv_destroy_qp(b.qp), 0);
		b.qp = NULL;
		CHECK_EQ(post_send(&a, IBV_WR_RDMA_WRITE, 0, 64, (uintptr_t)b.buf, b.mr->rkey, 14),
			 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
	}
	side_close(&a);
	side_close(&b);

	ibv_free_device_list(list);
	return check_exit();
}
