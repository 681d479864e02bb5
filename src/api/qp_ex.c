/* QPs with the ibv_wr_* interface (ibv_wr_post(3); ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS), on RoCE devices, as rxe has it: ibv_wr_start opens a
 * batch, each builder call (ibv_wr_send, ibv_wr_rdma_write, ...) starts a work request with the
 * qp_ex's wr_id and wr_flags, the setters (ibv_wr_set_sge / _sge_list / _inline_data /
 * _inline_data_list / _ud_addr / _xrc_srqn) complete the last one, and ibv_wr_complete posts
 * the whole batch through the QP's post_send (ibv_wr_abort drops it). The operations are
 * those softrdma's engine has for the QP type, as rxe has them (RC / XRC_SEND: SEND, SEND
 * with immediate or invalidate, RDMA WRITE with and without immediate, RDMA READ, both atomics,
 * memory window bind, local invalidate; UC: SEND and WRITE kinds, bind; UD: SEND, SEND with
 * immediate); TSO and atomic write are not there: EOPNOTSUPP at create. iWARP devices refuse
 * the interface with EOPNOTSUPP, as siw.
 *
 * Ownership: the batch (work requests, SGE lists, copies of inline data) belongs to the QP,
 * sized at create for max_send_wr requests; a batch longer than that fails at
 * ibv_wr_complete with ENOMEM, as it could not fit the send queue either. A setter or builder
 * used wrongly (no request to complete, too many SGEs, inline data too long) makes
 * ibv_wr_complete fail with EINVAL and post nothing. One batch at a time per QP: the QP's
 * batch lock is held from ibv_wr_start to ibv_wr_complete / ibv_wr_abort. */
#define _GNU_SOURCE
#include "api/api.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct sr_wr {
	struct ibv_send_wr wr;
	struct ibv_sge sge[ENG_MAX_SGE];
	uint8_t inl[ENG_MAX_INLINE]; /* inline data, copied when set (the caller's may go) */
};

struct sr_wr_batch {
	pthread_mutex_t lock;
	uint32_t cap, n;
	int err; /* first misuse since ibv_wr_start: ibv_wr_complete returns it */
	struct sr_wr w[];
};

#define OPS_RC                                                                                     \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |    \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                                 \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |                 \
	 IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV)
#define OPS_UC                                                                                     \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |    \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_SEND_WITH_INV | IBV_QP_EX_WITH_BIND_MW)
#define OPS_UD (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

static struct sr_qp *qp_of(struct ibv_qp_ex *qx)
{
	return (struct sr_qp *)(void *)qx;
}

/* Starts the next request of the batch: NULL (and the batch marked failed) when it is full. */
static struct ibv_send_wr *next_wr(struct ibv_qp_ex *qx, enum ibv_wr_opcode op)
{
	struct sr_wr_batch *b = qp_of(qx)->batch;
	if (b->n == b->cap) {
		if (!b->err)
			b->err = ENOMEM;
		return NULL;
	}
	struct sr_wr *w = &b->w[b->n++];
	memset(&w->wr, 0, sizeof(w->wr));
	w->wr.wr_id = qx->wr_id;
	w->wr.send_flags = qx->wr_flags;
	w->wr.opcode = op;
	w->wr.sg_list = w->sge;
	return &w->wr;
}

/* The request the setters complete: the last one started, or NULL (batch marked failed). */
static struct sr_wr *last_wr(struct ibv_qp_ex *qx)
{
	struct sr_wr_batch *b = qp_of(qx)->batch;
	if (b->n == 0) {
		if (!b->err)
			b->err = EINVAL;
		return NULL;
	}
	return &b->w[b->n - 1];
}

static void misuse(struct ibv_qp_ex *qx)
{
	struct sr_wr_batch *b = qp_of(qx)->batch;
	if (!b->err)
		b->err = EINVAL;
}

/* ---- builders ---- */

static void wr_send(struct ibv_qp_ex *qx)
{
	next_wr(qx, IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qx, __be32 imm)
{
	struct ibv_send_wr *wr = next_wr(qx, IBV_WR_SEND_WITH_IMM);
	if (wr)
		wr->imm_data = imm;
}

static void wr_send_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *wr = next_wr(qx, IBV_WR_SEND_WITH_INV);
	if (wr)
		wr->invalidate_rkey = rkey;
}

static void rdma(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		 __be32 imm)
{
	struct ibv_send_wr *wr = next_wr(qx, op);
	if (!wr)
		return;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = addr;
	wr->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	rdma(qx, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, __be32 imm)
{
	rdma(qx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}

static void wr_rdma_read(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr)
{
	rdma(qx, IBV_WR_RDMA_READ, rkey, addr, 0);
}

static void atomic(struct ibv_qp_ex *qx, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		   uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *wr = next_wr(qx, op);
	if (!wr)
		return;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.remote_addr = addr;
	wr->wr.atomic.compare_add = compare_add;
	wr->wr.atomic.swap = swap;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t compare,
			      uint64_t swap)
{
	atomic(qx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qx, uint32_t rkey, uint64_t addr, uint64_t add)
{
	atomic(qx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}

/* A memory window bind with the consumer's new key (rxe's wr_bind_mw): the window's current
 * key and the region's are read at ibv_wr_complete, when the batch is posted. */
static void wr_bind_mw(struct ibv_qp_ex *qx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct ibv_send_wr *wr = next_wr(qx, IBV_WR_BIND_MW);
	if (!wr)
		return;
	if (!mw || !info) {
		misuse(qx);
		return;
	}
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *info;
}

static void wr_local_inv(struct ibv_qp_ex *qx, uint32_t rkey)
{
	struct ibv_send_wr *wr = next_wr(qx, IBV_WR_LOCAL_INV);
	if (wr)
		wr->invalidate_rkey = rkey;
}

/* ---- setters ---- */

static void wr_set_sge(struct ibv_qp_ex *qx, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct sr_wr *w = last_wr(qx);
	if (!w)
		return;
	w->sge[0] = (struct ibv_sge){.addr = addr, .length = length, .lkey = lkey};
	w->wr.sg_list = w->sge;
	w->wr.num_sge = 1;
}

static void wr_set_sge_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_sge *list)
{
	struct sr_wr *w = last_wr(qx);
	if (!w)
		return;
	if (n > qp_of(qx)->cap.max_send_sge || (n && !list)) {
		misuse(qx);
		return;
	}
	if (n)
		memcpy(w->sge, list, n * sizeof(*list));
	w->wr.sg_list = w->sge;
	w->wr.num_sge = (int)n;
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qx, size_t n, const struct ibv_data_buf *bufs)
{
	struct sr_wr *w = last_wr(qx);
	if (!w)
		return;
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > ENG_MAX_INLINE - len) {
			misuse(qx);
			return;
		}
		memcpy(w->inl + len, bufs[i].addr, bufs[i].length);
		len += bufs[i].length;
	}
	/* The engine copies inline data from the SGE list at post, with no key. */
	w->sge[0] = (struct ibv_sge){.addr = (uintptr_t)w->inl, .length = (uint32_t)len};
	w->wr.sg_list = w->sge;
	w->wr.num_sge = 1;
	w->wr.send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qx, void *addr, size_t length)
{
	struct ibv_data_buf b = {.addr = addr, .length = length};
	wr_set_inline_data_list(qx, 1, &b);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qx, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct sr_wr *w = last_wr(qx);
	if (!w)
		return;
	w->wr.wr.ud.ah = ah;
	w->wr.wr.ud.remote_qpn = qpn;
	w->wr.wr.ud.remote_qkey = qkey;
}

static void wr_set_xrc_srqn(struct ibv_qp_ex *qx, uint32_t srqn)
{
	struct sr_wr *w = last_wr(qx);
	if (w)
		w->wr.qp_type.xrc.remote_srqn = srqn;
}

/* ---- the batch ---- */

static void wr_start(struct ibv_qp_ex *qx)
{
	struct sr_wr_batch *b = qp_of(qx)->batch;
	int r = pthread_mutex_lock(&b->lock);
	b->n = 0;
	/* A second ibv_wr_start by the thread holding the batch (error-checking lock:
	 * EDEADLK) makes the batch fail rather than hang. */
	b->err = r ? EINVAL : 0;
}

static int wr_complete(struct ibv_qp_ex *qx)
{
	struct sr_qp *qp = qp_of(qx);
	struct sr_wr_batch *b = qp->batch;
	int ret = b->err;
	if (!ret && b->n) {
		for (uint32_t i = 0; i < b->n; i++)
			b->w[i].wr.next = i + 1 < b->n ? &b->w[i + 1].wr : NULL;
		struct ibv_send_wr *bad;
		ret = qp->ibqp.context->ops.post_send(&qp->ibqp, &b->w[0].wr, &bad);
	}
	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

static void wr_abort(struct ibv_qp_ex *qx)
{
	struct sr_wr_batch *b = qp_of(qx)->batch;
	b->n = 0;
	b->err = 0;
	pthread_mutex_unlock(&b->lock);
}

/* ---- create / destroy ---- */

int sr_qp_ex_check(struct ibv_context *context, enum ibv_qp_type type, uint64_t ops)
{
	if (sr_ctx(context)->dev->iwarp)
		return EOPNOTSUPP; /* siw has no ibv_wr_* interface */
	uint64_t have = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND ? OPS_RC
			: type == IBV_QPT_UC			       ? OPS_UC
			: type == IBV_QPT_UD			       ? OPS_UD
								       : 0;
	return ops & ~have ? EOPNOTSUPP : 0;
}

int sr_qp_ex_init(struct sr_qp *qp, uint64_t ops)
{
	uint32_t cap = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;
	struct sr_wr_batch *b = calloc(1, sizeof(*b) + cap * sizeof(b->w[0]));
	if (!b)
		return ENOMEM;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&b->lock, &ma);
	pthread_mutexattr_destroy(&ma);
	b->cap = cap;
	qp->batch = b;
	struct ibv_qp_ex *qx = &qp->ibqp_ex;
	qx->wr_start = wr_start;
	qx->wr_complete = wr_complete;
	qx->wr_abort = wr_abort;
	qx->wr_set_sge = wr_set_sge;
	qx->wr_set_sge_list = wr_set_sge_list;
	qx->wr_set_inline_data = wr_set_inline_data;
	qx->wr_set_inline_data_list = wr_set_inline_data_list;
	if (qp->ibqp.qp_type == IBV_QPT_UD)
		qx->wr_set_ud_addr = wr_set_ud_addr;
	if (qp->ibqp.qp_type == IBV_QPT_XRC_SEND)
		qx->wr_set_xrc_srqn = wr_set_xrc_srqn;
	/* Builders only for the operations asked for, as providers do. */
	if (ops & IBV_QP_EX_WITH_SEND)
		qx->wr_send = wr_send;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		qx->wr_send_imm = wr_send_imm;
	if (ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		qx->wr_send_inv = wr_send_inv;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE)
		qx->wr_rdma_write = wr_rdma_write;
	if (ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		qx->wr_rdma_write_imm = wr_rdma_write_imm;
	if (ops & IBV_QP_EX_WITH_RDMA_READ)
		qx->wr_rdma_read = wr_rdma_read;
	if (ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	if (ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qx->wr_atomic_fetch_add = wr_atomic_fetch_add;
	if (ops & IBV_QP_EX_WITH_BIND_MW)
		qx->wr_bind_mw = wr_bind_mw;
	if (ops & IBV_QP_EX_WITH_LOCAL_INV)
		qx->wr_local_inv = wr_local_inv;
	return 0;
}

void sr_qp_ex_fini(struct sr_qp *qp)
{
	if (!qp->batch)
		return;
	pthread_mutex_destroy(&qp->batch->lock);
	free(qp->batch);
	qp->batch = NULL;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	return qp && qp->batch ? &qp->ibqp_ex : NULL;
}
