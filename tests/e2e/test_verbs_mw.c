/* Memory windows through the verbs API, over real sockets on roce_lo (as rxe has them): the
 * device's capabilities; ibv_alloc_mw / ibv_dealloc_mw of both types; type 1 bound by
 * ibv_bind_mw, type 2 by a BIND_MW work request (ibv_post_send and ibv_wr_bind_mw); RDMA WRITE,
 * READ and atomics from the peer through a window's R_Key into a region that grants no remote
 * access itself; refused with Remote Access Error: out of the window, without the right, after
 * a zero-length rebind, LOCAL_INV, a remote SEND with Invalidate or ibv_dealloc_mw, and through
 * another QP than a type 2 window's; a region with windows bound can neither go nor change.
 * iwarp_lo has no windows, as siw: EOPNOTSUPP. */
#include "check.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF 65536
#define WIN 4096 /* the windows: b's buffer [WIN, 3 * WIN) */
#define RW  (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
#define ALL (RW | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr;
	uint8_t *buf;
};

static struct ibv_device *find_device(struct ibv_device **list, const char *name)
{
	for (int i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			return list[i];
	return NULL;
}

static void end_open(struct end *e, struct ibv_device *dev, bool qp_ex)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ibv_open_device(dev);
	REQUIRE(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	e->buf = calloc(1, BUF);
	/* No remote access of its own: only windows give it. */
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	REQUIRE(e->pd && e->cq && e->buf && e->mr);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr_ex qia = {.send_cq = e->cq,
						  .recv_cq = e->cq,
						  .qp_type = IBV_QPT_RC,
						  .cap = {.max_send_wr = 16,
							  .max_recv_wr = 16,
							  .max_send_sge = 1,
							  .max_recv_sge = 1},
						  .comp_mask = IBV_QP_INIT_ATTR_PD,
						  .pd = e->pd};
		if (qp_ex) {
			qia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			qia.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_BIND_MW |
					     IBV_QP_EX_WITH_LOCAL_INV;
		}
		e->qp[i] = ibv_create_qp_ex(e->ctx, &qia);
		REQUIRE(e->qp[i]);
	}
}

static void end_close(struct end *e)
{
	for (int i = 0; i < 2; i++)
		CHECK_EQ(ibv_destroy_qp(e->qp[i]), 0);
	CHECK_EQ(ibv_dereg_mr(e->mr), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(e->pd), 0);
	CHECK_EQ(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid dgid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = ALL};
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.dgid = dgid;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	a.max_rd_atomic = 4;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

/* a (the requester) and b (the target), their QPs i connected to each other. */
static void pair_open(struct end *a, struct end *b, struct ibv_device *dev, bool qp_ex)
{
	union ibv_gid ga, gb;
	end_open(a, dev, qp_ex);
	end_open(b, dev, qp_ex);
	ibv_query_gid(a->ctx, 1, 0, &ga);
	ibv_query_gid(b->ctx, 1, 0, &gb);
	for (int i = 0; i < 2; i++) {
		connect_qp(a->qp[i], b->qp[i]->qp_num, gb);
		connect_qp(b->qp[i], a->qp[i]->qp_num, ga);
	}
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			return 0;
	}
}

/* Polls one completion and checks it; returns its status (-1: none). */
static int expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
		     enum ibv_wc_opcode op)
{
	struct ibv_wc wc;
	if (poll_one(cq, &wc) != 1) {
		CHECK(!"a completion");
		return -1;
	}
	CHECK_EQ(wc.wr_id, wr_id);
	CHECK_EQ(wc.status, st);
	if (st == IBV_WC_SUCCESS)
		CHECK_EQ(wc.opcode, op);
	return wc.status;
}

/* a's RDMA op on QP q from a.buf + loff, len bytes, at `raddr` through `rkey`. */
static void rdma(struct end *a, int q, enum ibv_wr_opcode op, uint32_t loff, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)a->buf + loff, .length = len, .lkey = a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	CHECK_EQ(ibv_post_send(a->qp[q], &wr, &bad), 0);
}

static uint64_t win(const struct end *b, uint64_t off)
{
	return (uintptr_t)b->buf + WIN + off;
}

/* a writes 8 bytes through `rkey` at `raddr` on QP q and gets Remote Access Error; b's QP
 * goes to ERR with an access error event. */
static void expect_refused(struct end *a, struct end *b, int q, uint64_t raddr, uint32_t rkey)
{
	rdma(a, q, IBV_WR_RDMA_WRITE, 0, 8, raddr, rkey, 99);
	expect_wc(a->cq, 99, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	struct pollfd pfd = {.fd = b->ctx->async_fd, .events = POLLIN};
	struct ibv_async_event ev;
	CHECK_EQ(poll(&pfd, 1, 5000), 1);
	CHECK_EQ(ibv_get_async_event(b->ctx, &ev), 0);
	CHECK_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
	CHECK(ev.element.qp == b->qp[q]);
	ibv_ack_async_event(&ev);
}

static int post_bind2(struct end *b, int q, struct ibv_mw *mw, uint64_t off, uint64_t len,
		      unsigned access, uint32_t *rkey)
{
	struct ibv_send_wr wr = {.wr_id = 7,
				 .opcode = IBV_WR_BIND_MW,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = (struct ibv_mw_bind_info){b->mr, win(b, off), len, (int)access};
	*rkey = wr.bind_mw.rkey;
	return ibv_post_send(b->qp[q], &wr, &bad);
}

static void caps_and_alloc(struct ibv_device *roce, struct ibv_device *iwarp)
{
	struct ibv_context *ctx = ibv_open_device(roce);
	REQUIRE(ctx);
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	CHECK(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	CHECK(!(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A)); /* as rxe */
	CHECK(da.max_mw >= 4096);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	REQUIRE(pd);
	struct ibv_mr *mr = ibv_reg_mr(pd, &da, sizeof(da), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mw *m1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	struct ibv_mw *m2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	REQUIRE(mr && m1 && m2);
	CHECK_EQ(m1->type, IBV_MW_TYPE_1);
	CHECK_EQ(m2->type, IBV_MW_TYPE_2);
	CHECK(m1->pd == pd && m1->context == ctx);
	CHECK(m1->rkey != m2->rkey && m1->rkey != mr->rkey && m2->rkey != mr->rkey);
	errno = 0;
	CHECK(ibv_alloc_mw(pd, (enum ibv_mw_type)3) == NULL); /* pyverbs' test_reg_mw_wrong_type */
	CHECK_EQ(errno, EINVAL);
	/* ibv_bind_mw is for type 1 (verbs.h checks it). */
	struct ibv_mw_bind mb = {.bind_info = {.mr = mr}};
	CHECK_EQ(ibv_bind_mw(NULL, m2, &mb), EINVAL);
	CHECK_EQ(ibv_dealloc_mw(m1), 0);
	CHECK_EQ(ibv_dealloc_mw(m2), 0);
	CHECK_EQ(ibv_dereg_mr(mr), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);

	/* iWARP: none, as siw. */
	ctx = ibv_open_device(iwarp);
	REQUIRE(ctx);
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK(!(da.device_cap_flags & (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B)));
	CHECK_EQ(da.max_mw, 0);
	pd = ibv_alloc_pd(ctx);
	REQUIRE(pd);
	errno = 0;
	CHECK(ibv_alloc_mw(pd, IBV_MW_TYPE_2) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	errno = 0;
	CHECK(ibv_alloc_mw(pd, IBV_MW_TYPE_1) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

/* Type 1: ibv_bind_mw; any QP of the PD; READ, WRITE, atomics; a zero-length rebind. */
static void type1(struct ibv_device *dev)
{
	struct end a, b;
	pair_open(&a, &b, dev, false);
	for (int i = 0; i < BUF; i++)
		a.buf[i] = (uint8_t)(i * 7 + 1);
	struct ibv_mw *mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_1);
	REQUIRE(mw);
	uint32_t k0 = mw->rkey;
	struct ibv_mw_bind mb = {.wr_id = 5,
				 .send_flags = IBV_SEND_SIGNALED,
				 .bind_info = {b.mr, win(&b, 0), 2 * WIN, ALL}};
	/* Zero-based type 1 windows do not exist (o10-36.2.2): refused at the call. */
	mb.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
	CHECK_EQ(ibv_bind_mw(b.qp[0], mw, &mb), EINVAL);
	CHECK_EQ(mw->rkey, k0);
	mb.bind_info.mw_access_flags = ALL;
	CHECK_EQ(ibv_bind_mw(b.qp[0], mw, &mb), 0);
	CHECK_EQ(mw->rkey, ibv_inc_rkey(k0));
	expect_wc(b.cq, 5, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	/* The region cannot go or change while the window is bound to it. */
	CHECK_EQ(ibv_dereg_mr(b.mr), EINVAL);
	CHECK_EQ(
	    ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
	    IBV_REREG_MR_ERR_CMD);
	/* WRITE through QP 0 and QP 1 (type 1: any QP of the PD), READ back, an atomic. */
	rdma(&a, 0, IBV_WR_RDMA_WRITE, 0, 3000, win(&b, 10), mw->rkey, 1);
	rdma(&a, 1, IBV_WR_RDMA_WRITE, 3000, 3000, win(&b, 3010), mw->rkey, 2);
	expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	CHECK_MEM(b.buf + WIN + 10, a.buf, 6000);
	CHECK(b.buf[WIN + 9] == 0 && b.buf[WIN + 6010] == 0);
	rdma(&a, 0, IBV_WR_RDMA_READ, 32768, 6000, win(&b, 10), mw->rkey, 3);
	expect_wc(a.cq, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	CHECK_MEM(a.buf + 32768, a.buf, 6000);
	uint64_t before;
	memcpy(&before, b.buf + WIN + 8000, 8);
	rdma(&a, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, 40000, 8, win(&b, 8000), mw->rkey, 4);
	expect_wc(a.cq, 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	uint64_t after, orig;
	memcpy(&after, b.buf + WIN + 8000, 8);
	memcpy(&orig, a.buf + 40000, 8);
	CHECK_EQ(orig, before);
	CHECK_EQ(after, before + 1);
	/* Rebound with length 0: unbound, with a new key; the old key reaches nothing. */
	uint32_t k1 = mw->rkey;
	mb.bind_info = (struct ibv_mw_bind_info){b.mr, win(&b, 0), 0, 0};
	CHECK_EQ(ibv_bind_mw(b.qp[1], mw, &mb), 0);
	expect_wc(b.cq, 5, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	CHECK(mw->rkey != k1);
	expect_refused(&a, &b, 0, win(&b, 0), k1);
	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	end_close(&a);
	end_close(&b);
}

/* Type 2: a BIND_MW work request; only through the QP that bound it; the window's bounds
 * and rights. Each refusal ends the QP pair it came through: one pair per case. */
static void type2(struct ibv_device *dev)
{
	enum { OK, OUT_END, OUT_START, NO_READ, OTHER_QP, LOCAL_INV, REMOTE_INV, DEALLOC, N };
	for (int c = 0; c < N; c++) {
		struct end a, b;
		uint32_t rkey;
		pair_open(&a, &b, dev, false);
		memset(a.buf, 0xA5, BUF);
		struct ibv_mw *mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
		REQUIRE(mw);
		CHECK_EQ(post_bind2(&b, 0, mw, 0, 2 * WIN, c == NO_READ ? RW : ALL, &rkey), 0);
		expect_wc(b.cq, 7, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
		CHECK_EQ(ibv_dereg_mr(b.mr), EINVAL);
		/* A type 2 window is bound once until invalidated (o10-37.2.30): the second
		 * bind, on QP 1, fails and ends that QP. */
		if (c == OK) {
			uint32_t k2;
			CHECK_EQ(post_bind2(&b, 1, mw, 0, 64, RW, &k2), 0);
			expect_wc(b.cq, 7, IBV_WC_MW_BIND_ERR, IBV_WC_BIND_MW);
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qi;
			CHECK_EQ(ibv_query_qp(b.qp[1], &qa, IBV_QP_STATE, &qi), 0);
			CHECK_EQ(qa.qp_state, IBV_QPS_ERR);
		}
		switch (c) {
		case OK:
			rdma(&a, 0, IBV_WR_RDMA_WRITE, 0, 2 * WIN, win(&b, 0), rkey, 1);
			expect_wc(a.cq, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
			CHECK_MEM(b.buf + WIN, a.buf, 2 * WIN);
			CHECK(b.buf[WIN - 1] == 0 && b.buf[3 * WIN] == 0);
			memset(a.buf, 0, 2 * WIN);
			rdma(&a, 0, IBV_WR_RDMA_READ, 0, 2 * WIN, win(&b, 0), rkey, 2);
			expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
			CHECK_MEM(a.buf, b.buf + WIN, 2 * WIN);
			break;
		case OUT_END: /* the last byte past the window, inside the region */
			expect_refused(&a, &b, 0, win(&b, 2 * WIN - 7), rkey);
			CHECK(b.buf[3 * WIN - 7] == 0); /* nothing placed */
			break;
		case OUT_START:
			expect_refused(&a, &b, 0, win(&b, 0) - 1, rkey);
			break;
		case NO_READ:
			rdma(&a, 0, IBV_WR_RDMA_READ, 0, 8, win(&b, 0), rkey, 3);
			expect_wc(a.cq, 3, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ);
			break;
		case OTHER_QP: /* b's QP 1, same PD: not the window's QP */
			expect_refused(&a, &b, 1, win(&b, 0), rkey);
			break;
		case LOCAL_INV: {
			struct ibv_send_wr wr = {.wr_id = 8,
						 .opcode = IBV_WR_LOCAL_INV,
						 .send_flags = IBV_SEND_SIGNALED,
						 .invalidate_rkey = rkey},
					   *bad;
			CHECK_EQ(ibv_post_send(b.qp[0], &wr, &bad), 0);
			expect_wc(b.cq, 8, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
			CHECK_EQ(ibv_dereg_mr(b.mr), 0); /* the region is free of it */
			b.mr = ibv_reg_mr(b.pd, b.buf, BUF, IBV_ACCESS_LOCAL_WRITE);
			REQUIRE(b.mr);
			expect_refused(&a, &b, 0, win(&b, 0), rkey);
			break;
		}
		case REMOTE_INV: {
			struct ibv_sge sge = {(uintptr_t)b.buf, 64, b.mr->lkey};
			struct ibv_recv_wr rwr = {.wr_id = 20, .sg_list = &sge, .num_sge = 1},
					   *rbad;
			CHECK_EQ(ibv_post_recv(b.qp[0], &rwr, &rbad), 0);
			struct ibv_send_wr wr = {.wr_id = 9,
						 .opcode = IBV_WR_SEND_WITH_INV,
						 .send_flags = IBV_SEND_SIGNALED,
						 .invalidate_rkey = rkey},
					   *bad;
			CHECK_EQ(ibv_post_send(a.qp[0], &wr, &bad), 0);
			expect_wc(a.cq, 9, IBV_WC_SUCCESS, IBV_WC_SEND);
			struct ibv_wc wc;
			REQUIRE(poll_one(b.cq, &wc) == 1);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK(wc.wc_flags & IBV_WC_WITH_INV);
			CHECK_EQ(wc.invalidated_rkey, rkey);
			expect_refused(&a, &b, 0, win(&b, 0), rkey);
			break;
		}
		case DEALLOC:
			CHECK_EQ(ibv_dealloc_mw(mw), 0);
			mw = NULL;
			expect_refused(&a, &b, 0, win(&b, 0), rkey);
			break;
		}
		if (mw)
			CHECK_EQ(ibv_dealloc_mw(mw), 0);
		end_close(&a);
		end_close(&b);
	}
}

/* The ibv_wr_* interface: ibv_wr_bind_mw and ibv_wr_local_inv in one batch with a WRITE. */
static void wr_interface(struct ibv_device *dev)
{
	struct end a, b;
	pair_open(&a, &b, dev, true);
	memset(a.buf, 0x3C, BUF);
	struct ibv_mw *mw = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
	REQUIRE(mw);
	struct ibv_qp_ex *bx = ibv_qp_to_qp_ex(b.qp[0]);
	REQUIRE(bx && bx->wr_bind_mw && bx->wr_local_inv);
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_mw_bind_info bi = {b.mr, win(&b, 0), 128, RW};
	ibv_wr_start(bx);
	bx->wr_id = 1;
	bx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(bx, mw, rkey, &bi);
	CHECK_EQ(ibv_wr_complete(bx), 0);
	expect_wc(b.cq, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	rdma(&a, 0, IBV_WR_RDMA_WRITE, 0, 128, win(&b, 0), rkey, 2);
	expect_wc(a.cq, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	CHECK_MEM(b.buf + WIN, a.buf, 128);
	ibv_wr_start(bx);
	bx->wr_id = 3;
	ibv_wr_local_inv(bx, rkey);
	CHECK_EQ(ibv_wr_complete(bx), 0);
	expect_wc(b.cq, 3, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	expect_refused(&a, &b, 0, win(&b, 0), rkey);
	CHECK_EQ(ibv_dealloc_mw(mw), 0);
	end_close(&a);
	end_close(&b);
}

/* A SEND with Invalidate naming an ordinary registered region (not a window) fails the
 * receive on RoCE, as on rxe (which invalidates only fast-registration regions): one peer
 * cannot take remote access away from every QP that uses the region. */
static void send_inv_region(struct ibv_device *dev)
{
	struct end a, b;
	pair_open(&a, &b, dev, false);
	struct ibv_mr *r = ibv_reg_mr(b.pd, b.buf, BUF, RW);
	REQUIRE(r);
	struct ibv_sge sge = {(uintptr_t)b.buf, 64, b.mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 30, .sg_list = &sge, .num_sge = 1}, *rbad;
	CHECK_EQ(ibv_post_recv(b.qp[0], &rwr, &rbad), 0);
	struct ibv_send_wr wr = {.wr_id = 31,
				 .opcode = IBV_WR_SEND_WITH_INV,
				 .send_flags = IBV_SEND_SIGNALED,
				 .invalidate_rkey = r->rkey},
			   *bad;
	CHECK_EQ(ibv_post_send(a.qp[0], &wr, &bad), 0);
	struct ibv_wc wc;
	REQUIRE(poll_one(b.cq, &wc) == 1);
	CHECK_EQ(wc.wr_id, 30);
	CHECK_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
	/* The region still serves the other QP. */
	memset(a.buf, 0x5A, 8);
	memset(b.buf + 512, 0, 8);
	rdma(&a, 1, IBV_WR_RDMA_WRITE, 0, 8, (uintptr_t)b.buf + 512, r->rkey, 32);
	/* a's CQ may hold the SEND's error first (b's QP went to ERR without answering). */
	bool written = false;
	for (int i = 0; i < 2 && !written; i++) {
		if (poll_one(a.cq, &wc) != 1)
			break;
		if (wc.wr_id == 32) {
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			written = true;
		}
	}
	CHECK(written);
	CHECK_MEM(b.buf + 512, a.buf, 8);
	CHECK_EQ(ibv_dereg_mr(r), 0);
	end_close(&a);
	end_close(&b);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	REQUIRE(list);
	struct ibv_device *roce = find_device(list, "roce_lo");
	struct ibv_device *iwarp = find_device(list, "iwarp_lo");
	REQUIRE(roce && iwarp);
	caps_and_alloc(roce, iwarp);
	type1(roce);
	type2(roce);
	wr_interface(roce);
	send_inv_region(roce);
	ibv_free_device_list(list);
	return check_exit();
}
