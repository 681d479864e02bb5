/* The verbs calls on iWARP devices (iwarp_<ifname>): QPs run the iWARP engine
 * (engine/iw_eng.h) over TCP connections that core/iw_progress.c owns. Everything that is not
 * QP-specific (PD, MR, CQ, SRQ, completion channels, async events) is shared with RoCE.
 *
 * Connections: real iWARP makes them with rdma_cm. softrdma also makes them (a) with the
 * internal calls of softrdma.h (softrdma_iw_listen / _accept / _connect), which run TCP and
 * the MPA exchange and take the QP from INIT to RTS, and (b) by itself when the consumer
 * moves a QP to RTR with the peer's GID and QPN, as socket-exchange programs do on RoCE
 * (auto-connect, core/iw_progress.h): the QP shows the RTR / RTS the consumer asked for
 * while the connection is made in the background, and sends posted meanwhile wait for it.
 *
 * RESET and INIT are one state here, as in siw (its IDLE, which siw_query_qp reports as
 * INIT, as cxgb4 does): a new QP is in INIT, accepts receives and queries as INIT; a move to
 * RESET empties the queues as IBA's RESET does and leaves the QP in INIT again. ibqp.state
 * is libibverbs' copy, as there: RESET at create, the state asked by each modify, the state
 * found by each query. Consumers that
 * step RESET -> INIT -> RTR -> RTS still can: their first step is INIT -> INIT, whose
 * attributes (P_Key index, port, access flags) are the same, optional. */
#define _GNU_SOURCE
#include "api/api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma.h"

/* ---- ops and engine callbacks ---- */

static int iw_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	struct sr_context *ctx = cq->ctx;
	if (num_entries < 0)
		return -1;
	iwp_app_enter(ctx->iwp, true);
	core_lock(ctx->core);
	/* One clock read per call: a busy-polling application's poll mostly finds nothing, and
	 * each read (about 20 ns in a virtual machine) delays its seeing the next message. */
	uint64_t now = core_now_ns();
	/* Moves bytes on this thread (DESIGN.md decision 4), as RoCE does. */
	int n = iwp_poll_cq(ctx->iwp, &cq->ecq, num_entries, wc, now);
	core_unlock(ctx->core);
	iwp_after_unlock(ctx->iwp);
	iwp_app_leave(ctx->iwp, true, now);
	return n;
}

static int iw_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct sr_context *ctx = qp->ctx;
	iwp_app_enter(ctx->iwp, false); /* an application that posts is active too */
	core_lock(ctx->core);
	uint64_t now = core_now_ns(); /* one clock read per call, as in poll */
	/* Into the socket right away, on the caller's thread (no hand-off on the latency path),
	 * unless it joins a pipeline that the next poll sends (iwp_posted). */
	int ret = iwp_post_send(ctx->iwp, qp->iqp, wr, (const struct ibv_send_wr **)bad, now);
	core_unlock(ctx->core);
	iwp_after_unlock(ctx->iwp);
	iwp_app_leave(ctx->iwp, false, now);
	return -ret;
}

/* The loop visits every connection at each pass, so a QP with new output needs no queueing:
 * post_send flushes it and the progress thread's next pass sends what input caused. */
static void iw_env_wake(void *c, struct eng_qp_base *qp)
{
	struct sr_context *ctx = c;
	iwp_qp_wake(ctx->iwp, iw_qp_of(qp));
}

int sr_iw_open(struct sr_context *ctx)
{
	int ret = iwp_create(ctx->core, &ctx->iwp);
	if (ret == -EINVAL)
		fprintf(stderr, "softrdma: %s=%s: expected peer, on, strict or off\n", IWP_CRC_ENV,
			getenv(IWP_CRC_ENV));
	if (ret < 0)
		return ret;
	struct ibv_context_ops *ops = &ctx->vctx.context.ops;
	ops->poll_cq = iw_poll_cq;
	ops->post_send = iw_post_send;
	ctx->env.wake = iw_env_wake; /* post_recv and env.event: sr_fill_ops's, for both engines */
	return 0;
}

void sr_iw_close(struct sr_context *ctx)
{
	iwp_destroy(ctx->iwp);
	ctx->iwp = NULL;
}

/* ---- queue pairs ---- */

struct ibv_qp *sr_iw_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	/* iWARP is connected only (siw: RC only). */
	int ret = sr_qp_check_init(pd, init, IW_MAX_SGE);
	if (ret)
		goto fail;
	struct sr_context *ctx = sr_ctx(pd->context);
	struct sr_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		ret = ENOMEM;
		goto fail;
	}

	core_lock(ctx->core);
	/* No UDP socket: the slot in the QPN comes from the auto-connect rendezvous, which
	 * finds a QP's process by it. */
	uint32_t qpn = 0;
	int r = iwp_slot(ctx->iwp);
	if (r > 0) {
		core_set_qpn_base(ctx->core, (uint32_t)r << 16);
		r = sr_alloc_qpn(ctx, qp, &qpn);
	}
	struct eng_qp_init ei = sr_qp_eng_init(pd, init, qpn, qp);
	if (r == 0) {
		r = iw_qp_create(&ei, &ctx->env, &qp->iqp);
		if (r < 0)
			sr_free_qpn(ctx, qpn);
	}
	core_unlock(ctx->core);
	if (r < 0) {
		free(qp);
		ret = -r;
		goto fail;
	}
	sr_qp_publish(qp, ctx, pd, init, qpn, ctx->dev->max_mtu);
	/* ibqp.state stays RESET: libibverbs sets it so at create, whatever the device says. */
	core_lock(ctx->core);
	iw_qp_set_state(qp->iqp, IBV_QPS_INIT, core_now_ns());
	qp->attr.qp_state = IBV_QPS_INIT;
	core_unlock(ctx->core);
	return &qp->ibqp;
fail:
	errno = ret;
	return NULL;
}

int sr_iw_destroy_qp(struct sr_qp *qp)
{
	struct sr_context *ctx = qp->ctx;
	core_lock(ctx->core);
	iwp_qp_detach(ctx->iwp, qp->iqp);
	iw_qp_destroy(qp->iqp);
	sr_free_qpn(ctx, qp->ibqp.qp_num);
	core_unlock(ctx->core);
	pthread_mutex_destroy(&qp->ibqp.mutex);
	pthread_cond_destroy(&qp->ibqp.cond);
	free(qp);
	return 0;
}

enum ibv_qp_state sr_iw_qp_state(const struct sr_qp *qp)
{
	enum ibv_qp_state e = iw_qp_state(qp->iqp);
	if (e == IBV_QPS_ERR || e == IBV_QPS_RESET || e == IBV_QPS_SQD || e == IBV_QPS_SQE)
		return e;
	return qp->attr.qp_state;
}

/* iWARP's limits on top of the common attribute checks. */
static int check_iw_attr(struct sr_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > IW_MAX_ORD)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > IW_MAX_IRD)
		return EINVAL;
	/* The rest as RoCE, whose engine has its own (lower) READ limits. */
	return sr_check_qp_attr(qp, a,
				mask & ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC));
}

/* Remembers the attributes the consumer set (reported by ibv_query_qp). On iWARP most of
 * them are the connection's business (TCP retransmits, MPA negotiates IRD/ORD); they are
 * accepted as verbs requires them and kept. */
static void keep_attrs(struct sr_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *s = &qp->attr;
	if (mask & IBV_QP_ACCESS_FLAGS)
		s->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PORT)
		s->port_num = a->port_num;
	if (mask & IBV_QP_PATH_MTU)
		s->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		s->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		s->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		s->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		s->rq_psn = a->rq_psn & 0xFFFFFF;
	if (mask & IBV_QP_SQ_PSN)
		s->sq_psn = a->sq_psn & 0xFFFFFF;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		s->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		s->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		s->dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_AV)
		s->ah_attr = a->ah_attr;
}

int sr_iw_modify_qp(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct sr_context *ctx = qp->ctx;
	core_lock(ctx->core);
	enum ibv_qp_state eng = iw_qp_state(qp->iqp);
	enum ibv_qp_state cur = sr_iw_qp_state(qp);
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	int ret = 0;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		ret = EINVAL;
	/* A QP rdma_cm connects (a self-managed one: rping -q) takes rdma_init_qp_attr's masks,
	 * which are iWARP's (iw_cm: RTR with the access flags, RTS with nothing), not the IB
	 * table's; RTR with exactly iw_cm's mask (state and access flags, no address vector) is
	 * such a step, before rdma_accept names the QP: no auto-connect then. */
	bool to_rtr = cur == IBV_QPS_INIT && next == IBV_QPS_RTR;
	bool cm_rtr = to_rtr && (qp->cm_owned || mask == (IBV_QP_STATE | IBV_QP_ACCESS_FLAGS));
	bool cm_step = cm_rtr || (qp->cm_owned && cur == IBV_QPS_RTR && next == IBV_QPS_RTS);
	/* A QP rdma_cm has connected (engine at RTS): INIT / RTR / RTS asked again by its owner
	 * (rping -q steps its QP after ESTABLISHED) change nothing, as on siw, whose QP leaves
	 * RTS only for closing, terminate or error. */
	bool noop = !ret && qp->cm_owned && eng == IBV_QPS_RTS &&
		    (next == IBV_QPS_INIT || next == IBV_QPS_RTR || next == IBV_QPS_RTS);
	if (!noop && !ret && !cm_step && obj_qp_check_modify(qp->ibqp.qp_type, cur, next, mask) < 0)
		ret = EINVAL;
	if (!ret)
		ret = check_iw_attr(qp, attr, mask);
	/* SQD needs a stream to drain. */
	if (!ret && next == IBV_QPS_SQD && eng != IBV_QPS_RTS && eng != IBV_QPS_SQD)
		ret = EINVAL;
	if (ret)
		goto unlock;
	if (mask & IBV_QP_ACCESS_FLAGS) {
		struct iw_qp_attr a;
		iw_qp_get_attr(qp->iqp, &a);
		/* REMOTE_ATOMIC is accepted and means nothing, as on siw (perftest asks for
		 * it on every device); atomics themselves are refused at post. */
		a.access = attr->qp_access_flags & ~(unsigned)IBV_ACCESS_REMOTE_ATOMIC;
		if (iw_qp_set_attr(qp->iqp, &a) < 0) {
			ret = EINVAL;
			goto unlock;
		}
	}
	if (noop)
		goto unlock; /* (siw applies the access flags, as above, and nothing else) */
	if (cm_rtr)
		qp->cm_owned = true;
	if (to_rtr && !cm_rtr) {
		/* Auto-connect (iw_progress.h): the connection is made in the background. */
		const uint8_t *local = ctx->dev->gid[attr->ah_attr.grh.sgid_index];
		int r = iwp_auto_connect(ctx->iwp, qp->iqp, local, attr->ah_attr.grh.dgid.raw,
					 attr->dest_qp_num, attr->rq_psn & 0xFFFFFF, IW_MAX_IRD,
					 IW_MAX_ORD);
		if (r < 0) {
			ret = -r;
			goto unlock;
		}
		iw_qp_set_state(qp->iqp, IBV_QPS_RTR, core_now_ns());
	}
	keep_attrs(qp, attr, mask);
	if (mask & IBV_QP_STATE) {
		uint64_t now = core_now_ns();
		if (next == IBV_QPS_RTS && (eng == IBV_QPS_INIT || eng == IBV_QPS_RTR)) {
			iw_qp_set_early_send(qp->iqp, true); /* sends wait for the connection */
			if (!cm_step && cur == IBV_QPS_RTR)
				iwp_auto_connect_rts(ctx->iwp, qp->iqp, attr->sq_psn & 0xFFFFFF);
		} else if (next == IBV_QPS_INIT || next == IBV_QPS_SQD || next == IBV_QPS_ERR ||
			   next == IBV_QPS_RESET || (next == IBV_QPS_RTS && eng == IBV_QPS_SQD))
			iw_qp_set_state(qp->iqp, next, now);
		/* Leaving the stream: the peer sees a reset and flushes too. */
		if (next == IBV_QPS_ERR || next == IBV_QPS_RESET)
			iwp_qp_detach(ctx->iwp, qp->iqp);
		/* ibqp.state is what was asked (libibverbs' ibv_modify_qp sets it so). */
		qp->ibqp.state = next;
		if (next == IBV_QPS_RESET) {
			/* Emptied; now idle, as a new QP (siw: RESET is IDLE, shown as INIT). */
			next = IBV_QPS_INIT;
			iw_qp_set_state(qp->iqp, next, now);
		}
		qp->attr.qp_state = next;
	}
unlock:
	core_unlock(ctx->core);
	return ret;
}

/* ---- the internal connection API (softrdma.h) ---- */

static struct sr_qp *iwarp_qp(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	return ibqp && qp->iqp ? qp : NULL;
}

/* Handshake codes (-IW_E_*, a malformed MPA frame) are no errnos: EPROTO stands for them. */
static int to_errno(int r)
{
	return iw_is_err(r) ? EPROTO : -r;
}

static void mark_connected(struct sr_qp *qp)
{
	core_lock(qp->ctx->core);
	qp->attr.qp_state = iw_qp_state(qp->iqp);
	qp->ibqp.state = qp->attr.qp_state;
	core_unlock(qp->ctx->core);
}

int softrdma_iw_listen(struct ibv_context *context, uint16_t port)
{
	if (!context || !sr_ctx(context)->iwp) {
		errno = EINVAL;
		return -1;
	}
	struct sr_context *ctx = sr_ctx(context);
	int r = iwp_listen(ctx->iwp, ctx->dev->gid[ctx->dev->first_v4], port);
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

int softrdma_iw_accept(struct ibv_qp *ibqp, int timeout_ms)
{
	struct sr_qp *qp = iwarp_qp(ibqp);
	if (!qp) {
		errno = EINVAL;
		return -1;
	}
	int r = iwp_accept(qp->ctx->iwp, qp->iqp, timeout_ms);
	if (r < 0) {
		errno = to_errno(r);
		return -1;
	}
	mark_connected(qp);
	return 0;
}

int softrdma_iw_connect(struct ibv_qp *ibqp, const char *ip, uint16_t port, int timeout_ms)
{
	struct sr_qp *qp = iwarp_qp(ibqp);
	uint8_t addr[16] = {0};
	if (!qp || !ip) {
		errno = EINVAL;
		return -1;
	}
	/* IPv4 as IPv4-mapped IPv6, as io/tcp.h takes it. */
	addr[10] = addr[11] = 0xff;
	if (inet_pton(AF_INET, ip, addr + 12) != 1 && inet_pton(AF_INET6, ip, addr) != 1) {
		errno = EINVAL;
		return -1;
	}
	int r = iwp_connect(qp->ctx->iwp, qp->iqp, addr, port, timeout_ms);
	if (r < 0) {
		errno = to_errno(r);
		return -1;
	}
	mark_connected(qp);
	return 0;
}
