/* What rdma_cm (src/cm, cm.h) needs from the verbs objects beyond the public verbs calls: the
 * hand-over of an iWARP connection whose MPA exchange the CM ran to the QP, and the iWARP CRC
 * policy of a context. */
#include "api/api.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cm/cm.h"
#include "core/gsi.h"
#include "io/tcp.h"

bool sr_cm_qp_is_iwarp(struct ibv_qp *ibqp)
{
	return ibqp && ((struct sr_qp *)ibqp)->iqp != NULL;
}

int sr_cm_iw_crc(struct ibv_context *context)
{
	struct sr_context *ctx = sr_ctx(context);
	return ctx->iwp ? iwp_crc(ctx->iwp) : IW_CONN_CRC_PEER;
}

int sr_cm_iw_adopt(struct ibv_qp *ibqp, struct io_tcp_conn *tcp, const struct iw_conn *c,
		   const uint8_t *left, size_t nleft)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	if (!sr_cm_qp_is_iwarp(ibqp)) {
		io_tcp_abort(tcp);
		return -EINVAL;
	}
	struct sr_context *ctx = qp->ctx;
	core_lock(ctx->core);
	int r = iwp_adopt_conn(ctx->iwp, qp->iqp, tcp, c, left, nleft);
	if (r == 0) {
		/* The state the consumer sees (sr_iw_qp_state) follows the connection, as after
		 * softrdma_iw_connect; the negotiated IRD / ORD too (ibv_query_qp). */
		struct iw_conn_info info;
		iw_conn_info(c, &info);
		qp->attr.qp_state = IBV_QPS_RTS;
		qp->ibqp.state = IBV_QPS_RTS;
		qp->attr.max_dest_rd_atomic = (uint8_t)(info.ird > 255 ? 255 : info.ird);
		qp->attr.max_rd_atomic = (uint8_t)(info.ord > 255 ? 255 : info.ord);
	}
	core_unlock(ctx->core);
	return r;
}

int sr_cm_gsi_start(struct ibv_context *context)
{
	struct sr_context *ctx = sr_ctx(context);
	if (ctx->dev->iwarp)
		return -EPROTOTYPE;
	char err[256];
	core_lock(ctx->core);
	int r = core_start(ctx->core, err, sizeof(err));
	core_unlock(ctx->core);
	if (r < 0 && !getenv("SOFTRDMA_QUIET"))
		fprintf(stderr, "softrdma: %s: rdma_cm: %s\n", ctx->dev->ibdev.name, err);
	return r;
}

int sr_cm_gsi_send(struct ibv_context *context, const struct gsi_frame *f)
{
	struct sr_context *ctx = sr_ctx(context);
	if (ctx->dev->iwarp)
		return -EPROTOTYPE;
	core_lock(ctx->core);
	int r = core_gsi_send(ctx->core, f);
	core_unlock(ctx->core);
	return r;
}

struct ibv_context *sr_cm_open_device(struct ibv_device *device)
{
	sr_cm_opening = true;
	struct ibv_context *c = ibv_open_device(device);
	sr_cm_opening = false;
	return c;
}

bool sr_cm_app_opened(struct ibv_device *device)
{
	return __atomic_load_n(&((struct sr_device *)device)->app_opens, __ATOMIC_RELAXED) > 0;
}

uint64_t sr_cm_node_guid(struct ibv_context *context)
{
	return be64toh(sr_ctx(context)->dev->guid);
}

struct ibv_qp *sr_cm_iw_claim(struct ibv_context *context, uint32_t qpn)
{
	struct sr_context *ctx = sr_ctx(context);
	if (!ctx->dev->iwarp)
		return NULL;
	core_lock(ctx->core);
	struct sr_qp *qp = sr_qp_by_num(ctx, qpn);
	if (qp && qp->ibqp.qp_num == qpn && iw_qp_state(qp->iqp) == IBV_QPS_INIT)
		qp->cm_owned = true;
	else
		qp = NULL;
	core_unlock(ctx->core);
	return qp ? &qp->ibqp : NULL;
}
