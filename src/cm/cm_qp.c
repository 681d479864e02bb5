/* QPs and SRQs on rdma_cm ids (librdmacm semantics, verbs-abi.md 6.5): rdma_create_qp creates
 * the QP on id->verbs (the id's default PD when none is given; completion queues and channels
 * of its own when the attributes name none, with the id as their context) and moves it to INIT
 * with rdma_init_qp_attr's attributes; the CM moves it on at connect / accept. A UD id's QP
 * (UD, RoCE only) goes on to RTR and RTS at once, as librdmacm's ucma_init_ud_qp does. XRC
 * (RoCE only, rdma_xserver / rdma_xclient -c x): an XRC_RECV QP and an XRC SRQ take the device's
 * XRC domain, opened once per device as librdmacm's ucma_get_xrcd does; the SRQ completes on
 * the id's receive CQ. */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static int fail(int err)
{
	errno = err;
	return -1;
}

/* librdmacm ucma_get_xrcd: one XRC domain per device, never closed. Under no lock. */
static struct ibv_xrcd *dev_xrcd(struct cm_id *id)
{
	cm_lock();
	struct ibv_xrcd *x = id->dev ? id->dev->xrcd : NULL;
	if (id->dev && !x) {
		struct ibv_xrcd_init_attr a = {.comp_mask = IBV_XRCD_INIT_ATTR_FD |
							    IBV_XRCD_INIT_ATTR_OFLAGS,
					       .fd = -1,
					       .oflags = O_CREAT};
		x = id->dev->xrcd = ibv_open_xrcd(id->id.verbs, &a);
	}
	cm_unlock();
	return x;
}

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq)
			ibv_destroy_cq(id->send_cq);
		id->recv_cq = NULL;
		id->send_cq = NULL;
	} else if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
		id->recv_cq_channel = NULL;
		id->send_cq_channel = NULL;
	} else if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* librdmacm ucma_create_cqs: a channel and a CQ per direction that has none. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id, id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id, id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:;
	int e = errno ? errno : ENOMEM;
	destroy_cqs(id);
	return -e;
}

int sr_rdma_init_qp_attr(struct rdma_cm_id *rid, struct ibv_qp_attr *a, int *mask)
{
	if (!rid || !a || !mask)
		return fail(EINVAL);
	cm_lock();
	struct cm_id *id = cm_id_live(rid);
	int r = id ? -EINVAL : -ENOENT;
	if (id && id->dev)
		r = id->tr == CM_TR_IWARP ? cm_iw_init_qp_attr(id, a, mask)
					  : cm_roce_init_qp_attr(id, a, mask);
	cm_unlock();
	return r < 0 ? fail(-r) : 0;
}
CM_ALIAS(init_qp_attr);

int sr_rdma_create_qp_ex(struct rdma_cm_id *rid, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *id = (struct cm_id *)rid;
	int e = cm_id_check(rid);
	if (e < 0)
		return fail(-e);
	if (!attr || !rid->verbs || rid->qp)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = rid->pd;
	} else if (attr->pd->context != rid->verbs) {
		return fail(EINVAL);
	}
	if (!attr->pd)
		return fail(EINVAL);
	bool ud = cm_is_ud(id);
	bool xrc = attr->qp_type == IBV_QPT_XRC_SEND || attr->qp_type == IBV_QPT_XRC_RECV;
	if ((ud || xrc) && id->tr == CM_TR_IWARP)
		return fail(EOPNOTSUPP); /* siw_create_qp: RC QPs only */
	if (ud && attr->qp_type != IBV_QPT_UD)
		return fail(EINVAL); /* librdmacm: a UD id's QP state steps fail on others */
	if (!ud && attr->qp_type != IBV_QPT_RC && !xrc)
		return fail(EOPNOTSUPP);
	/* softrdma's QPs take the basic attributes only, and XRC's domain. */
	if (attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD))
		return fail(EOPNOTSUPP);
	if (attr->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = dev_xrcd(id);
		if (!attr->xrcd)
			return fail(errno ? errno : ENOMEM);
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if ((rid->recv_cq && attr->recv_cq && rid->recv_cq != attr->recv_cq) ||
	    (rid->send_cq && attr->send_cq && rid->send_cq != attr->send_cq))
		return fail(EINVAL);
	int r = create_cqs(rid, attr->send_cq || rid->send_cq ? 0 : attr->cap.max_send_wr,
			   attr->recv_cq || rid->recv_cq ? 0 : attr->cap.max_recv_wr);
	if (r < 0)
		return fail(-r);
	if (!attr->send_cq)
		attr->send_cq = rid->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = rid->recv_cq;
	if (rid->srq && !attr->srq)
		attr->srq = rid->srq;
	struct ibv_qp *qp;
	if (xrc) {
		/* XRC_SEND: a PD, no receive side; XRC_RECV: the domain only. */
		struct ibv_qp_init_attr_ex x = *attr;
		x.srq = NULL;
		if (attr->qp_type == IBV_QPT_XRC_RECV) {
			x.comp_mask = IBV_QP_INIT_ATTR_XRCD;
			x.pd = NULL;
			x.send_cq = x.recv_cq = NULL;
		} else {
			x.comp_mask = IBV_QP_INIT_ATTR_PD;
			x.xrcd = NULL;
		}
		qp = ibv_create_qp_ex(rid->verbs, &x);
	} else {
		qp = ibv_create_qp(attr->pd, (struct ibv_qp_init_attr *)attr);
	}
	if (!qp) {
		e = errno;
		destroy_cqs(rid);
		return fail(e);
	}
	/* librdmacm ucma_init_conn_qp: INIT with the CM's attributes; ucma_init_ud_qp: INIT, RTR
	 * and RTS. */
	static const enum ibv_qp_state steps[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS};
	r = 0;
	for (size_t i = 0; r == 0 && i < (ud ? 3u : 1u); i++) {
		struct ibv_qp_attr a = {.qp_state = steps[i]};
		int mask;
		cm_lock();
		r = id->tr == CM_TR_IWARP ? cm_iw_init_qp_attr(id, &a, &mask)
					  : cm_roce_init_qp_attr(id, &a, &mask);
		cm_unlock();
		if (r == 0)
			r = -ibv_modify_qp(qp, &a, mask);
	}
	if (r < 0) {
		ibv_destroy_qp(qp);
		destroy_cqs(rid);
		return fail(-r);
	}
	cm_lock();
	if (qp->pd)
		rid->pd = qp->pd;
	rid->qp = qp;
	cm_unlock();
	return 0;
}
CM_ALIAS(create_qp_ex);

int sr_rdma_create_qp(struct rdma_cm_id *rid, struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	int e = cm_id_check(rid);
	if (e < 0)
		return fail(-e);
	if (!init)
		return fail(EINVAL);
	struct ibv_qp_init_attr_ex ex;
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, init, sizeof(*init));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd ? pd : rid->pd;
	int r = sr_rdma_create_qp_ex(rid, &ex);
	memcpy(init, &ex, sizeof(*init));
	return r;
}
CM_ALIAS(create_qp);

void sr_rdma_destroy_qp(struct rdma_cm_id *rid)
{
	if (!rid)
		return;
	cm_lock();
	if (!cm_id_live(rid)) {
		cm_unlock();
		return;
	}
	struct ibv_qp *qp = rid->qp;
	rid->qp = NULL;
	cm_unlock();
	if (qp)
		ibv_destroy_qp(qp);
	destroy_cqs(rid);
}
CM_ALIAS(destroy_qp);

int sr_rdma_create_srq_ex(struct rdma_cm_id *rid, struct ibv_srq_init_attr_ex *attr)
{
	int e = cm_id_check(rid);
	if (e < 0)
		return fail(-e);
	if (!attr || !rid->verbs)
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return fail(EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = rid->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		/* librdmacm rdma_create_srq_ex: the device's XRC domain, the id's receive CQ. */
		struct cm_id *id = (struct cm_id *)rid;
		if (id->tr != CM_TR_ROCE)
			return fail(EOPNOTSUPP);
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = dev_xrcd(id);
			if (!attr->xrcd)
				return fail(errno ? errno : ENOMEM);
			attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (!rid->recv_cq) {
				int r = create_cqs(rid, 0, attr->attr.max_wr);
				if (r < 0)
					return fail(-r);
			}
			attr->cq = rid->recv_cq;
			attr->comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
		}
		struct ibv_srq *srq = ibv_create_srq_ex(rid->verbs, attr);
		if (!srq)
			return -1;
		rid->srq = srq;
		return 0;
	}
	if (attr->srq_type != IBV_SRQT_BASIC || !attr->pd)
		return fail(EOPNOTSUPP);
	struct ibv_srq_init_attr basic = {.srq_context = attr->srq_context, .attr = attr->attr};
	struct ibv_srq *srq = ibv_create_srq(attr->pd, &basic);
	if (!srq)
		return -1;
	attr->attr = basic.attr;
	if (!rid->pd)
		rid->pd = attr->pd;
	rid->srq = srq;
	return 0;
}
CM_ALIAS(create_srq_ex);

int sr_rdma_create_srq(struct rdma_cm_id *rid, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	int e = cm_id_check(rid);
	if (e < 0)
		return fail(-e);
	if (!attr)
		return fail(EINVAL);
	struct ibv_srq_init_attr_ex ex;
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, attr, sizeof(*attr));
	ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	/* librdmacm rdma_create_srq: an XRC SRQ on an XRC_RECV id. */
	ex.srq_type = rid->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ex.pd = pd;
	int r = sr_rdma_create_srq_ex(rid, &ex);
	memcpy(attr, &ex, sizeof(*attr));
	return r;
}
CM_ALIAS(create_srq);

void sr_rdma_destroy_srq(struct rdma_cm_id *rid)
{
	if (cm_id_check(rid) < 0)
		return;
	if (rid->srq)
		ibv_destroy_srq(rid->srq);
	rid->srq = NULL;
	destroy_cqs(rid);
}
CM_ALIAS(destroy_srq);
