/* XRC (IBA 9.8.x) over real sockets on roce_lo, through the verbs API as rdma-core's inline
 * ibv_open_xrcd / ibv_create_srq_ex / ibv_get_srq_num / ibv_create_qp_ex reach it: two device
 * contexts in one process, an initiator (XRC_SEND QPs) and a target (an XRC domain with two
 * XRC SRQs, their CQs, XRC_RECV QPs; a second domain with a third SRQ).
 *
 * - XRC domains: the fd / oflags rules (O_CREAT, O_EXCL, the same file twice = the same domain,
 *   fd -1 = anonymous, a bad fd), close while in use (EBUSY); device cap flag IBV_DEVICE_XRC.
 * - Argument checks: XRC SRQ without CQ / XRCD, ibv_get_srq_num of a basic SRQ, XRC_RECV
 *   without XRCD, post_recv on XRC QPs, post_send on XRC_RECV, the XRC state-machine masks.
 * - Data: one chain through one XRC_SEND QP with SENDs (multi-packet, with immediate) to both
 *   SRQs of the domain: each lands in its own SRQ's buffer and completes on that SRQ's CQ with
 *   qp_num = the XRC_RECV QP, src_qp = the XRC_SEND QP; every payload byte checked. RDMA WRITE,
 *   READ, FETCH_ADD and CMP_SWAP over XRC, the R_Key checked in the SRQ's PD.
 * - Errors: an unknown SRQ number, and an SRQ of another domain: the requester completes with
 *   IBV_WC_REM_ACCESS_ERR, the target QP goes to ERR, the refusal is counted (drop_xrc_srq),
 *   and nothing lands in any SRQ.
 * - iWARP (iwarp_lo): every XRC verb fails with EOPNOTSUPP. */
#define _GNU_SOURCE
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "softrdma.h"
#include "vutil.h"

#define BUF  (64u * 1024)
#define MSG1 3000 /* three packets at MTU 1024 */
#define MSG2 700

struct ini {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gidx;
	union ibv_gid gid;
};

struct tgt {
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd_other;
	struct ibv_xrcd *xrcd, *xrcd2;
	struct ibv_cq *cq1, *cq2, *cq3;
	struct ibv_srq *srq1, *srq2, *srq3;
	uint32_t n1, n2, n3;
	struct ibv_mr *mr, *mr_other;
	uint8_t *buf, *buf_other;
	int gidx;
	union ibv_gid gid;
};

static int gid_v4(struct ibv_context *ctx, union ibv_gid *out)
{
	static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
	for (int i = 0; i < 16; i++) {
		if (ibv_query_gid(ctx, 1, i, out))
			continue;
		if (!memcmp(out->raw, v4, 16))
			return i;
	}
	return -1;
}

static struct ibv_srq *xsrq(struct tgt *t, struct ibv_xrcd *x, struct ibv_cq *cq, uint32_t *num)
{
	struct ibv_srq_init_attr_ex a = {0};
	a.attr.max_wr = 16;
	a.attr.max_sge = 2;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		      IBV_SRQ_INIT_ATTR_PD;
	a.srq_type = IBV_SRQT_XRC;
	a.xrcd = x;
	a.cq = cq;
	a.pd = t->pd;
	struct ibv_srq *s = ibv_create_srq_ex(t->ctx, &a);
	REQUIRE(s);
	REQUIRE(ibv_get_srq_num(s, num) == 0);
	CHECK(*num != 0 && *num <= 0xFFFFFF);
	return s;
}

static void ini_open(struct ini *s, struct ibv_device *dev)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ibv_open_device(dev);
	REQUIRE(s->ctx);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->buf = calloc(1, BUF);
	REQUIRE(s->pd && s->cq && s->buf);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr);
	s->gidx = gid_v4(s->ctx, &s->gid);
	REQUIRE(s->gidx >= 0);
}

static void tgt_open(struct tgt *t, struct ibv_device *dev)
{
	memset(t, 0, sizeof(*t));
	t->ctx = ibv_open_device(dev);
	REQUIRE(t->ctx);
	t->pd = ibv_alloc_pd(t->ctx);
	t->pd_other = ibv_alloc_pd(t->ctx);
	t->cq1 = ibv_create_cq(t->ctx, 64, NULL, NULL, 0);
	t->cq2 = ibv_create_cq(t->ctx, 64, NULL, NULL, 0);
	t->cq3 = ibv_create_cq(t->ctx, 64, NULL, NULL, 0);
	t->buf = calloc(1, BUF);
	t->buf_other = calloc(1, BUF);
	REQUIRE(t->pd && t->pd_other && t->cq1 && t->cq2 && t->cq3 && t->buf && t->buf_other);
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	t->mr = ibv_reg_mr(t->pd, t->buf, BUF, (int)acc);
	t->mr_other = ibv_reg_mr(t->pd_other, t->buf_other, BUF, (int)acc);
	REQUIRE(t->mr && t->mr_other);
	struct ibv_xrcd_init_attr xa = {
	    .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1};
	t->xrcd = ibv_open_xrcd(t->ctx, &xa);
	t->xrcd2 = ibv_open_xrcd(t->ctx, &xa);
	REQUIRE(t->xrcd && t->xrcd2 && t->xrcd != t->xrcd2);
	t->srq1 = xsrq(t, t->xrcd, t->cq1, &t->n1);
	t->srq2 = xsrq(t, t->xrcd, t->cq2, &t->n2);
	t->srq3 = xsrq(t, t->xrcd2, t->cq3, &t->n3);
	CHECK(t->n1 != t->n2 && t->n1 != t->n3 && t->n2 != t->n3);
	t->gidx = gid_v4(t->ctx, &t->gid);
	REQUIRE(t->gidx >= 0);
}

static struct ibv_qp *xrc_send_qp(struct ini *s)
{
	/* As ibv_xsrq_pingpong: comp_mask PD alone, so rdma-core's inline goes to
	 * ibv_create_qp with recv_cq NULL. */
	struct ibv_qp_init_attr_ex a = {0};
	a.qp_type = IBV_QPT_XRC_SEND;
	a.send_cq = s->cq;
	a.cap.max_send_wr = 32;
	a.cap.max_send_sge = 2;
	a.comp_mask = IBV_QP_INIT_ATTR_PD;
	a.pd = s->pd;
	struct ibv_qp *qp = ibv_create_qp_ex(s->ctx, &a);
	REQUIRE(qp);
	CHECK_EQ(qp->qp_type, IBV_QPT_XRC_SEND);
	CHECK(qp->recv_cq == NULL && qp->srq == NULL);
	return qp;
}

static struct ibv_qp *xrc_recv_qp(struct tgt *t, struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = {0};
	a.qp_type = IBV_QPT_XRC_RECV;
	a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	a.xrcd = x;
	struct ibv_qp *qp = ibv_create_qp_ex(t->ctx, &a);
	REQUIRE(qp);
	CHECK(qp->pd == NULL && qp->send_cq == NULL && qp->recv_cq == NULL);
	return qp;
}

static void to_init(struct ibv_qp *qp, unsigned access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	a.qp_access_flags = access;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
}

static void av(struct ibv_qp_attr *a, int sgid, const union ibv_gid *dgid)
{
	a->ah_attr.is_global = 1;
	a->ah_attr.port_num = 1;
	a->ah_attr.grh.hop_limit = 64;
	a->ah_attr.grh.sgid_index = (uint8_t)sgid;
	a->ah_attr.grh.dgid = *dgid;
}

/* Connects an XRC_SEND QP of s to an XRC_RECV QP of t, with the masks xsrq_pingpong uses. */
static void connect_pair(struct ini *s, struct ibv_qp *sq, struct tgt *t, struct ibv_qp *rq)
{
	struct ibv_qp_attr a;

	to_init(rq, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	to_init(sq, 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = sq->qp_num;
	a.path_mtu = IBV_MTU_1024;
	a.rq_psn = 0xfffffe; /* wraps inside the first message */
	a.min_rnr_timer = 1;
	a.max_dest_rd_atomic = 4;
	av(&a, t->gidx, &s->gid);
	REQUIRE(ibv_modify_qp(rq, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.sq_psn = 0x123;
	REQUIRE(ibv_modify_qp(rq, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN) == 0);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = rq->qp_num;
	a.path_mtu = IBV_MTU_1024;
	a.rq_psn = 0x456;
	av(&a, s->gidx, &t->gid);
	/* The initiator has no responder: IRD and the RNR timer are not its attributes. */
	CHECK_EQ(ibv_modify_qp(sq, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC),
		 EINVAL);
	REQUIRE(ibv_modify_qp(sq, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0xfffffe;
	a.max_rd_atomic = 4;
	/* Its requester needs retry counts and ORD, as RC. */
	CHECK_EQ(ibv_modify_qp(sq, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), EINVAL);
	REQUIRE(ibv_modify_qp(sq, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT |
				  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
	CHECK_EQ(vt_qp_state(sq), IBV_QPS_RTS);
	CHECK_EQ(vt_qp_state(rq), IBV_QPS_RTS);
}

static void srq_recv(struct ibv_srq *srq, struct ibv_mr *mr, uint8_t *addr, uint32_t len,
		     uint64_t id)
{
	/* Two SGEs: the message is scattered across them. */
	struct ibv_sge sg[2] = {
	    {.addr = (uintptr_t)addr, .length = len / 2, .lkey = mr->lkey},
	    {.addr = (uintptr_t)addr + len / 2, .length = len - len / 2, .lkey = mr->lkey}};
	struct ibv_recv_wr w = {.wr_id = id, .sg_list = sg, .num_sge = 2}, *bad;
	REQUIRE(ibv_post_srq_recv(srq, &w, &bad) == 0);
}

static void fill_wr(struct ibv_send_wr *w, struct ibv_sge *sg, struct ini *s, uint32_t off,
		    uint32_t len, enum ibv_wr_opcode op, uint32_t srqn, uint64_t id)
{
	memset(w, 0, sizeof(*w));
	sg->addr = (uintptr_t)s->buf + off;
	sg->length = len;
	sg->lkey = s->mr->lkey;
	w->wr_id = id;
	w->sg_list = sg;
	w->num_sge = 1;
	w->opcode = op;
	w->send_flags = IBV_SEND_SIGNALED;
	w->qp_type.xrc.remote_srqn = srqn;
}

static struct ibv_wc post_one(struct ini *s, struct ibv_qp *qp, struct ibv_send_wr *w)
{
	struct ibv_send_wr *bad;
	REQUIRE(ibv_post_send(qp, w, &bad) == 0);
	return vt_wait_wc(s->cq, 5000);
}

static bool quiet(struct ibv_cq *cq, int ms)
{
	struct ibv_wc wc;
	uint64_t stop = vt_now_ms() + (uint64_t)ms;
	while (vt_now_ms() < stop)
		if (ibv_poll_cq(cq, 1, &wc))
			return false;
	return true;
}

static void test_xrcd_files(struct ibv_context *ctx)
{
	char path[] = "/tmp/softrdma_xrcd_XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	struct ibv_xrcd_init_attr a = {
	    .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = fd, .oflags = 0};
	/* No domain of this file yet, and not O_CREAT. */
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &a) == NULL && errno == EINVAL);
	a.oflags = O_CREAT;
	struct ibv_xrcd *x1 = ibv_open_xrcd(ctx, &a);
	REQUIRE(x1);
	CHECK(x1->context == ctx);
	/* The same file again: the same domain (another fd of it too). */
	int fd2 = open(path, O_RDONLY);
	REQUIRE(fd2 >= 0);
	a.fd = fd2;
	a.oflags = 0;
	struct ibv_xrcd *x2 = ibv_open_xrcd(ctx, &a);
	CHECK(x2 == x1);
	a.oflags = O_CREAT | O_EXCL;
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &a) == NULL && errno == EINVAL);
	/* Both FD and OFLAGS are required (rdma-core's ibv_cmd_open_xrcd); bad fd: EBADF. */
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD;
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &a) == NULL && errno == EINVAL);
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	a.oflags = O_CREAT;
	a.fd = 987654;
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &a) == NULL && errno == EBADF);
	a.comp_mask |= IBV_XRCD_INIT_ATTR_RESERVED;
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &a) == NULL && errno == EOPNOTSUPP);
	/* In use by an SRQ: the last close is refused until the SRQ goes. */
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	REQUIRE(cq && pd);
	struct ibv_srq_init_attr_ex sa = {0};
	sa.attr.max_wr = 2;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.xrcd = x1;
	sa.pd = pd;
	errno = 0;
	CHECK(ibv_create_srq_ex(ctx, &sa) == NULL && errno == EINVAL); /* no CQ */
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sa.cq = cq;
	struct ibv_srq *srq = ibv_create_srq_ex(ctx, &sa);
	REQUIRE(srq);
	CHECK_EQ(ibv_close_xrcd(x2), 0); /* one of two opens */
	CHECK_EQ(ibv_close_xrcd(x1), EBUSY);
	CHECK_EQ(ibv_destroy_srq(srq), 0);
	CHECK_EQ(ibv_close_xrcd(x1), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	close(fd);
	close(fd2);
	unlink(path);
}

static void test_args(struct ini *s, struct tgt *t)
{
	struct ibv_device_attr da;
	REQUIRE(ibv_query_device(t->ctx, &da) == 0);
	CHECK(da.device_cap_flags & IBV_DEVICE_XRC);

	/* A basic SRQ through ibv_create_srq_ex has no SRQ number. */
	struct ibv_srq_init_attr_ex sa = {0};
	sa.attr.max_wr = 2;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_BASIC;
	sa.pd = t->pd;
	struct ibv_srq *basic = ibv_create_srq_ex(t->ctx, &sa);
	REQUIRE(basic);
	uint32_t n = 0;
	CHECK_EQ(ibv_get_srq_num(basic, &n), EINVAL);
	CHECK_EQ(ibv_destroy_srq(basic), 0);
	/* An XRC SRQ of a domain of another context: EINVAL. */
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		       IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.xrcd = t->xrcd;
	sa.cq = s->cq;
	errno = 0;
	CHECK(ibv_create_srq_ex(t->ctx, &sa) == NULL && errno == EINVAL);

	/* XRC_RECV needs its domain. */
	struct ibv_qp_init_attr_ex qa = {0};
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = t->pd;
	errno = 0;
	CHECK(ibv_create_qp_ex(t->ctx, &qa) == NULL && errno == EINVAL);
	/* XRC_SEND without a send CQ. */
	struct ibv_qp_init_attr ia = {.qp_type = IBV_QPT_XRC_SEND, .cap = {.max_send_wr = 1}};
	errno = 0;
	CHECK(ibv_create_qp(s->pd, &ia) == NULL && errno == EINVAL);

	/* Posting where the QP has no such queue. */
	struct ibv_qp *sq = xrc_send_qp(s);
	struct ibv_qp *rq = xrc_recv_qp(t, t->xrcd);
	struct ibv_sge sg = {.addr = (uintptr_t)s->buf, .length = 8, .lkey = s->mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &sg, .num_sge = 1}, *rbad = NULL;
	CHECK_EQ(ibv_post_recv(sq, &rw, &rbad), EINVAL);
	CHECK(rbad == &rw);
	CHECK_EQ(ibv_post_recv(rq, &rw, &rbad), EINVAL);
	/* The target's INIT -> RTR needs its IRD and RNR timer, as RC. */
	to_init(rq, 0);
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_RTR, .dest_qp_num = sq->qp_num, .path_mtu = IBV_MTU_1024};
	av(&a, t->gidx, &s->gid);
	CHECK_EQ(ibv_modify_qp(rq, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN),
		 EINVAL);
	CHECK_EQ(ibv_modify_qp(rq, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER),
		 0);
	a.qp_state = IBV_QPS_RTS;
	CHECK_EQ(ibv_modify_qp(rq, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN), 0);
	struct ibv_send_wr sw, *sbad = NULL;
	fill_wr(&sw, &sg, s, 0, 8, IBV_WR_SEND, t->n1, 2);
	CHECK_EQ(ibv_post_send(rq, &sw, &sbad), EINVAL); /* no send queue */
	/* The domain is in use by the QP. */
	CHECK_EQ(ibv_close_xrcd(t->xrcd), EBUSY);
	CHECK_EQ(ibv_destroy_qp(rq), 0);
	CHECK_EQ(ibv_destroy_qp(sq), 0);
	/* Options softrdma does not offer (TSO): EOPNOTSUPP. */
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = s->cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.pd = s->pd;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO;
	errno = 0;
	CHECK(ibv_create_qp_ex(s->ctx, &qa) == NULL && errno == EOPNOTSUPP);
}

static void test_data(struct ini *s, struct tgt *t)
{
	struct ibv_qp *sq = xrc_send_qp(s);
	struct ibv_qp *rq = xrc_recv_qp(t, t->xrcd);
	connect_pair(s, sq, t, rq);

	/* One chain through one XRC_SEND QP, to both SRQs of the domain. */
	uint8_t *r1 = t->buf, *r2 = t->buf + 8192;
	srq_recv(t->srq1, t->mr, r1, 4096, 101);
	srq_recv(t->srq2, t->mr, r2, 4096, 201);
	vt_fill(s->buf, MSG1, 1);
	vt_fill(s->buf + 4096, MSG2, 2);
	struct ibv_send_wr w[2], *bad;
	struct ibv_sge sg[2];
	fill_wr(&w[0], &sg[0], s, 0, MSG1, IBV_WR_SEND, t->n1, 11);
	fill_wr(&w[1], &sg[1], s, 4096, MSG2, IBV_WR_SEND_WITH_IMM, t->n2, 12);
	w[1].imm_data = htonl(0xC0FFEE);
	w[0].next = &w[1];
	REQUIRE(ibv_post_send(sq, &w[0], &bad) == 0);
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = vt_wait_wc(s->cq, 5000);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, 11 + (uint64_t)i);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
	}
	struct ibv_wc wc = vt_wait_wc(t->cq1, 5000);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 101);
	CHECK_EQ(wc.opcode, IBV_WC_RECV);
	CHECK_EQ(wc.byte_len, MSG1);
	CHECK_EQ(wc.qp_num, rq->qp_num); /* the XRC_RECV QP, as hardware reports it */
	CHECK_EQ(wc.src_qp, sq->qp_num);
	CHECK(!(wc.wc_flags & IBV_WC_WITH_IMM));
	CHECK_MEM(r1, s->buf, MSG1);
	wc = vt_wait_wc(t->cq2, 5000);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 201);
	CHECK_EQ(wc.byte_len, MSG2);
	CHECK_EQ(wc.qp_num, rq->qp_num);
	CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
	CHECK_EQ(ntohl(wc.imm_data), 0xC0FFEE);
	CHECK_MEM(r2, s->buf + 4096, MSG2);
	CHECK(quiet(t->cq1, 50) && quiet(t->cq2, 1) && quiet(t->cq3, 1));

	/* RDMA WRITE, then READ it back, over XRC (R_Key in the SRQ's PD). */
	vt_fill(s->buf, 5000, 3);
	struct ibv_send_wr x;
	struct ibv_sge xs;
	fill_wr(&x, &xs, s, 0, 5000, IBV_WR_RDMA_WRITE, t->n1, 21);
	x.wr.rdma.remote_addr = (uintptr_t)t->buf + 16384;
	x.wr.rdma.rkey = t->mr->rkey;
	wc = post_one(s, sq, &x);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_MEM(t->buf + 16384, s->buf, 5000);
	memset(s->buf + 32768, 0, 5000);
	fill_wr(&x, &xs, s, 32768, 5000, IBV_WR_RDMA_READ, t->n2, 22);
	x.wr.rdma.remote_addr = (uintptr_t)t->buf + 16384;
	x.wr.rdma.rkey = t->mr->rkey;
	wc = post_one(s, sq, &x);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_MEM(s->buf + 32768, s->buf, 5000);

	/* Atomics. */
	uint64_t v = 40;
	memcpy(t->buf + 40000, &v, 8);
	fill_wr(&x, &xs, s, 48000, 8, IBV_WR_ATOMIC_FETCH_AND_ADD, t->n1, 23);
	x.wr.atomic.remote_addr = (uintptr_t)t->buf + 40000;
	x.wr.atomic.rkey = t->mr->rkey;
	x.wr.atomic.compare_add = 2;
	wc = post_one(s, sq, &x);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	memcpy(&v, s->buf + 48000, 8);
	CHECK_EQ(v, 40);
	fill_wr(&x, &xs, s, 48008, 8, IBV_WR_ATOMIC_CMP_AND_SWP, t->n1, 24);
	x.wr.atomic.remote_addr = (uintptr_t)t->buf + 40000;
	x.wr.atomic.rkey = t->mr->rkey;
	x.wr.atomic.compare_add = 42;
	x.wr.atomic.swap = 7;
	wc = post_one(s, sq, &x);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	memcpy(&v, s->buf + 48008, 8);
	CHECK_EQ(v, 42);
	memcpy(&v, t->buf + 40000, 8);
	CHECK_EQ(v, 7);
	CHECK(softrdma_counter(t->ctx, rq, "rx_packets") >= 8);
	CHECK_EQ(softrdma_counter(t->ctx, rq, "drop_xrc_srq"), 0);

	/* An R_Key of another PD than the SRQ's: remote access error. */
	fill_wr(&x, &xs, s, 0, 64, IBV_WR_RDMA_WRITE, t->n1, 25);
	x.wr.rdma.remote_addr = (uintptr_t)t->buf_other;
	x.wr.rdma.rkey = t->mr_other->rkey;
	wc = post_one(s, sq, &x);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(vt_qp_state(rq), IBV_QPS_ERR);
	CHECK_EQ(ibv_destroy_qp(rq), 0);
	CHECK_EQ(ibv_destroy_qp(sq), 0);
}

/* A request naming `srqn` reaches the target: it must be refused with a NAK (remote access
 * error at the requester), the target QP in ERR, counted, and no SRQ touched. */
static void test_bad_srq(struct ini *s, struct tgt *t, uint32_t srqn, const char *what)
{
	fprintf(stderr, "bad SRQ: %s (%#x)\n", what, srqn);
	struct ibv_qp *sq = xrc_send_qp(s);
	struct ibv_qp *rq = xrc_recv_qp(t, t->xrcd);
	connect_pair(s, sq, t, rq);
	srq_recv(t->srq3, t->mr, t->buf + 24576, 1024, 301);
	struct ibv_send_wr x;
	struct ibv_sge xs;
	fill_wr(&x, &xs, s, 0, 100, IBV_WR_SEND, srqn, 31);
	struct ibv_wc wc = post_one(s, sq, &x);
	CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(wc.wr_id, 31);
	CHECK_EQ(vt_qp_state(sq), IBV_QPS_ERR);
	CHECK_EQ(vt_qp_state(rq), IBV_QPS_ERR);
	CHECK_EQ(softrdma_counter(t->ctx, rq, "drop_xrc_srq"), 1);
	CHECK(quiet(t->cq1, 50) && quiet(t->cq2, 1) && quiet(t->cq3, 1));
	CHECK_EQ(ibv_destroy_qp(rq), 0);
	CHECK_EQ(ibv_destroy_qp(sq), 0);
}

static void test_iwarp(void)
{
	struct ibv_device *dev = vt_find_dev("iwarp_lo");
	struct ibv_context *ctx = ibv_open_device(dev);
	REQUIRE(ctx);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	REQUIRE(pd && cq);
	struct ibv_xrcd_init_attr xa = {
	    .comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS, .fd = -1};
	errno = 0;
	CHECK(ibv_open_xrcd(ctx, &xa) == NULL && errno == EOPNOTSUPP);
	struct ibv_srq_init_attr_ex sa = {0};
	sa.attr.max_wr = 2;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
		       IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = pd;
	sa.cq = cq;
	errno = 0;
	CHECK(ibv_create_srq_ex(ctx, &sa) == NULL && errno == EOPNOTSUPP);
	struct ibv_qp_init_attr_ex qa = {0};
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	errno = 0;
	CHECK(ibv_create_qp_ex(ctx, &qa) == NULL && errno == EOPNOTSUPP);
	struct ibv_qp_init_attr ia = {
	    .qp_type = IBV_QPT_XRC_SEND, .send_cq = cq, .cap = {.max_send_wr = 1}};
	errno = 0;
	CHECK(ibv_create_qp(pd, &ia) == NULL && errno == EOPNOTSUPP);
	struct ibv_device_attr da;
	REQUIRE(ibv_query_device(ctx, &da) == 0);
	CHECK(!(da.device_cap_flags & IBV_DEVICE_XRC));
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

int main(void)
{
	struct ibv_device *dev = vt_find_dev("roce_lo");
	struct ini s;
	struct tgt t;

	ini_open(&s, dev);
	tgt_open(&t, dev);
	test_xrcd_files(t.ctx);
	test_args(&s, &t);
	test_data(&s, &t);
	test_bad_srq(&s, &t, 0xABCDE, "no such SRQ number");
	test_bad_srq(&s, &t, 0, "SRQ number 0");
	test_bad_srq(&s, &t, t.n3, "an SRQ of another XRC domain");
	test_iwarp();

	/* Teardown in the order verbs requires: SRQs before their domains. */
	CHECK_EQ(ibv_destroy_srq(t.srq1), 0);
	CHECK_EQ(ibv_destroy_srq(t.srq2), 0);
	CHECK_EQ(ibv_destroy_srq(t.srq3), 0);
	CHECK_EQ(ibv_close_xrcd(t.xrcd), 0);
	CHECK_EQ(ibv_close_xrcd(t.xrcd2), 0);
	CHECK_EQ(ibv_dereg_mr(t.mr), 0);
	CHECK_EQ(ibv_dereg_mr(t.mr_other), 0);
	CHECK_EQ(ibv_destroy_cq(t.cq1), 0);
	CHECK_EQ(ibv_destroy_cq(t.cq2), 0);
	CHECK_EQ(ibv_destroy_cq(t.cq3), 0);
	CHECK_EQ(ibv_dealloc_pd(t.pd), 0);
	CHECK_EQ(ibv_dealloc_pd(t.pd_other), 0);
	CHECK_EQ(ibv_close_device(t.ctx), 0);
	CHECK_EQ(ibv_dereg_mr(s.mr), 0);
	CHECK_EQ(ibv_destroy_cq(s.cq), 0);
	CHECK_EQ(ibv_dealloc_pd(s.pd), 0);
	CHECK_EQ(ibv_close_device(s.ctx), 0);
	free(s.buf);
	free(t.buf);
	free(t.buf_other);
	return check_exit();
}
