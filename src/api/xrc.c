/* XRC, the eXtended Reliable Connected service (IBA 9.8.x), at the verbs layer: XRC domains,
 * XRC SRQs and their numbers, and the extended verbs_context ops through which rdma-core's
 * inline ibv_open_xrcd / ibv_close_xrcd / ibv_create_srq_ex / ibv_get_srq_num /
 * ibv_create_qp_ex reach softrdma; plus the lookup by which the engine finds the SRQ an
 * inbound XRCETH names (eng_env.xsrq_lookup).
 *
 * The wire side lives in the engine: an XRC_SEND QP is an RC requester whose requests carry
 * the XRCETH (req.c), an XRC_RECV QP an RC responder that takes each request's receive WQE,
 * CQ and PD from the XRC SRQ of its domain the XRCETH names (resp.c).
 *
 * XRC domains are per device context. ibv_open_xrcd with a file (fd != -1) names the domain by
 * the file's inode within the context: opening it again gives the same domain (O_CREAT makes
 * one, O_EXCL refuses an existing one, as the kernel's uverbs). Other contexts and other
 * processes get domains of their own: an XRC SRQ is only ever reached through an XRC_RECV QP of
 * its own context, which is all one side of a connection needs.
 *
 * RoCE devices only: iWARP has no XRC (siw has none); there every call fails with EOPNOTSUPP.
 * Errors are verbs': NULL with errno, or a positive errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api/api.h"

/* ---- XRC domains ---- */

static struct ibv_xrcd *open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr)
{
	struct sr_context *ctx = sr_ctx(context);
	struct sr_xrcd *x;
	struct stat st;
	bool named;

	if (ctx->dev->iwarp) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!attr || attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		errno = attr ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	/* rdma-core's ibv_cmd_open_xrcd requires both (fd -1: an anonymous domain). */
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ||
	    (attr->oflags & ~(O_CREAT | O_EXCL))) {
		errno = EINVAL;
		return NULL;
	}
	named = attr->fd != -1;
	if (named && fstat(attr->fd, &st) != 0) {
		errno = EBADF;
		return NULL;
	}
	core_lock(ctx->core);
	for (x = named ? ctx->xrcds : NULL; x; x = x->next)
		if (x->has_inode && x->st_dev == st.st_dev && x->st_ino == st.st_ino)
			break;
	if (x) {
		if (attr->oflags & O_EXCL) {
			core_unlock(ctx->core);
			errno = EINVAL;
			return NULL;
		}
		x->opens++;
		core_unlock(ctx->core);
		return &x->ibxrcd;
	}
	if (named && !(attr->oflags & O_CREAT)) {
		core_unlock(ctx->core);
		errno = EINVAL; /* no domain of that file yet, and not asked to make one */
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		core_unlock(ctx->core);
		errno = ENOMEM;
		return NULL;
	}
	x->ibxrcd.context = context;
	x->ctx = ctx;
	x->handle = ++ctx->next_handle;
	if (x->handle == 0)
		x->handle = ++ctx->next_handle;
	x->has_inode = named;
	if (named) {
		x->st_dev = st.st_dev;
		x->st_ino = st.st_ino;
	}
	x->opens = 1;
	x->next = ctx->xrcds;
	ctx->xrcds = x;
	core_unlock(ctx->core);
	return &x->ibxrcd;
}

static int close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct sr_xrcd *x = (struct sr_xrcd *)ibxrcd;
	struct sr_context *ctx = x->ctx;

	core_lock(ctx->core);
	if (x->opens > 1) {
		x->opens--;
		core_unlock(ctx->core);
		return 0;
	}
	if (x->users > 0) {
		core_unlock(ctx->core);
		return EBUSY; /* XRC SRQs or XRC_RECV QPs still in it (as the kernel) */
	}
	for (struct sr_xrcd **pp = &ctx->xrcds; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	}
	core_unlock(ctx->core);
	free(x);
	return 0;
}

/* ---- XRC SRQs ---- */

struct eng_rq *sr_xsrq_lookup(void *c, uint32_t srqn)
{
	struct sr_context *ctx = c;

	if (srqn == 0 || srqn >= SR_MAX_XSRQ || !ctx->xsrq[srqn])
		return NULL;
	return &ctx->xsrq[srqn]->erq;
}

void sr_xrc_srq_release(struct sr_srq *srq)
{
	srq->ctx->xsrq[srq->srqn] = NULL;
	srq->xrcd->users--;
	srq->xrcd = NULL;
}

void sr_xrc_qp_release(struct sr_qp *qp)
{
	qp->xrcd->users--;
	qp->xrcd = NULL;
}

static struct ibv_srq *create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *attr)
{
	struct sr_context *ctx = sr_ctx(context);
	const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	const uint32_t xrc_need =
	    IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type type;
	struct sr_xrcd *x;
	struct sr_srq *srq;
	uint32_t n;

	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TM) {
		errno = EOPNOTSUPP; /* tag matching */
		return NULL;
	}
	if (attr->comp_mask & ~known) {
		errno = EINVAL;
		return NULL;
	}
	type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
	if (type == IBV_SRQT_BASIC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
		    attr->pd->context != context) {
			errno = EINVAL;
			return NULL;
		}
		/* ibv_srq_init_attr_ex begins with an ibv_srq_init_attr (verbs.h). */
		return ibv_create_srq(attr->pd, (struct ibv_srq_init_attr *)attr);
	}
	if (type != IBV_SRQT_XRC) {
		errno = type == IBV_SRQT_TM ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	if (ctx->dev->iwarp) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & xrc_need) != xrc_need || !attr->pd || !attr->xrcd || !attr->cq ||
	    attr->pd->context != context || attr->xrcd->context != context ||
	    attr->cq->context != context) {
		errno = EINVAL;
		return NULL;
	}
	x = (struct sr_xrcd *)attr->xrcd;
	srq = sr_srq_new(context, attr->pd, &attr->attr, attr->srq_context);
	if (!srq)
		return NULL;
	core_lock(ctx->core);
	for (n = 1; n < SR_MAX_XSRQ && ctx->xsrq[n]; n++)
		;
	if (n == SR_MAX_XSRQ) {
		core_unlock(ctx->core);
		ibv_destroy_srq(&srq->ibsrq);
		errno = ENOMEM;
		return NULL;
	}
	srq->srqn = n;
	srq->xrcd = x;
	srq->erq.xrcd = x->handle;
	srq->erq.pd = attr->pd->handle;
	srq->erq.cq = &((struct sr_cq *)attr->cq)->ecq;
	x->users++;
	ctx->xsrq[n] = srq;
	core_unlock(ctx->core);
	return &srq->ibsrq;
}

static int get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;

	if (!srq_num)
		return EINVAL;
	if (srq->ctx->dev->iwarp)
		return EOPNOTSUPP;
	if (!srq->xrcd)
		return EINVAL; /* a basic SRQ has no number (only XRC SRQs are named on the wire) */
	*srq_num = srq->srqn;
	return 0;
}

/* ---- QPs ---- */

static struct ibv_qp *create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	uint32_t mask;

	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	mask = attr->comp_mask;
	if ((mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags == 0)
		mask &= ~(uint32_t)IBV_QP_INIT_ATTR_CREATE_FLAGS;
	/* Creation flags, TSO and RSS are not offered (the errno rdma-core's inline gave before
	 * this op existed); the ibv_wr_* interface where qp_ex.c has the operations. */
	uint64_t ops = 0;
	if (mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ops = attr->send_ops_flags;
		int r = sr_qp_ex_check(context, attr->qp_type, ops);
		if (r) {
			errno = r;
			return NULL;
		}
		mask &= ~(uint32_t)IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	}
	if (mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* ibv_qp_init_attr_ex begins with the fields of an ibv_qp_init_attr (verbs.h). */
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		if (!(mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
		    attr->xrcd->context != context) {
			errno = sr_ctx(context)->dev->iwarp ? EOPNOTSUPP : EINVAL;
			return NULL;
		}
		return sr_create_qp(context, NULL, (struct ibv_qp_init_attr *)attr,
				    (struct sr_xrcd *)attr->xrcd);
	}
	if (!(mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	struct ibv_qp *qp = sr_create_qp(context, attr->pd, (struct ibv_qp_init_attr *)attr, NULL);
	if (qp && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		int r = sr_qp_ex_init((struct sr_qp *)qp, ops);
		if (r) {
			ibv_destroy_qp(qp);
			errno = r;
			return NULL;
		}
	}
	return qp;
}

void sr_xrc_fill_ops(struct sr_context *ctx)
{
	ctx->vctx.open_xrcd = open_xrcd;
	ctx->vctx.close_xrcd = close_xrcd;
	ctx->vctx.create_srq_ex = create_srq_ex;
	ctx->vctx.get_srq_num = get_srq_num;
	ctx->vctx.create_qp_ex = create_qp_ex;
}
