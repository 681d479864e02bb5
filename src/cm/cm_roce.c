/* The interim RoCE connection manager (cm.h "RoCEv2"): the IB CM exchange over a TCP
 * connection between two softrdma processes, with rdma_cm's QP transitions.
 *
 * Which message each state takes (anything else closes the connection and is counted):
 *   active   CONNECTING     REP (-> RTR, RTS, RTU, ESTABLISHED; or CONNECT_RESPONSE when the
 *                           QP is the application's), REJ (-> REJECTED)
 *            REP_RCVD       DREQ
 *   passive  REQ_RCVD       nothing (the peer waits for our REP or REJ)
 *            ACCEPTING      RTU (-> ESTABLISHED), REJ (-> REJECTED), DREQ
 *   both     ESTABLISHED    DREQ (-> DREP, DISCONNECTED)
 *            DISCONNECTING  DREP, DREQ (both sides disconnected at once)
 * The connection's loss: before the REP UNREACHABLE, after it CONNECT_ERROR, once connected
 * DISCONNECTED (status -ECONNRESET, or -EPROTO for a protocol error).
 *
 * UD ids (SIDR, IBTA 12.11; cm.h "UD ids"): the active side sends SIDR_REQ and takes only
 * SIDR_REP (ESTABLISHED, or UNREACHABLE with its status); its loss before that is UNREACHABLE
 * whatever the cause. The passive side takes nothing after the SIDR_REQ: rdma_accept /
 * rdma_reject send the SIDR_REP as the last message; a requester that goes away meanwhile
 * changes nothing (SIDR keeps no connection: the reply would just be lost). */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#define MIN_RNR_TIMER 12 /* 0.64 ms, as the verbs examples use (the kernel CM's 0 is 655 ms) */
#define ACK_TIMEOUT   14 /* 67 ms: rdma_cm's default for RoCE is in this range */
#define HOP_LIMIT     64

static bool said_wrong_tr;

/* ---- sending ---- */

static int msg_queue(struct cm_id *id, const struct cm_msg *m)
{
	int n = cm_msg_build(m, id->tx + id->tx_len, sizeof(id->tx) - id->tx_len);
	if (n < 0)
		return n;
	id->tx_len += (size_t)n;
	return 0;
}

/* Sends what is queued. 0 (maybe with bytes left: wait for POLLOUT) or the socket's error. */
static int flush(struct cm_id *id)
{
	while (id->tx_len) {
		ssize_t r = io_tcp_send(id->tcp, id->tx, id->tx_len);
		if (r == -EAGAIN || r == 0)
			return 0;
		if (r < 0)
			return (int)r;
		memmove(id->tx, id->tx + r, id->tx_len - (size_t)r);
		id->tx_len -= (size_t)r;
	}
	return 0;
}

static void msg_fill_pd(struct cm_msg *m, const uint8_t *pd, size_t len)
{
	memset(m->pd, 0, sizeof(m->pd));
	if (len)
		memcpy(m->pd, pd, len);
}

/* The last message on a connection: it goes out (in the background if it must), then the
 * connection closes. */
static void send_last(struct cm_id *id, const struct cm_msg *m)
{
	uint8_t buf[CM_MSG_MAX * 3];
	size_t n = 0;
	if (id->tx_len <= sizeof(buf) - CM_MSG_MAX) {
		memcpy(buf, id->tx, id->tx_len);
		n = id->tx_len;
	}
	int k = cm_msg_build(m, buf + n, sizeof(buf) - n);
	if (k > 0)
		n += (size_t)k;
	struct io_tcp_conn *tcp = id->tcp;
	id->tcp = NULL;
	cm_conn_drop(id, false);
	cm_linger(tcp, buf, n);
}

static void send_rej(struct cm_id *id, uint16_t reason, const void *pd, size_t len)
{
	struct cm_msg m = {.type = CM_MSG_REJ, .reason = reason};
	msg_fill_pd(&m, pd, len);
	cm_count(CM_C_rejects_sent);
	send_last(id, &m);
}

/* ---- QP attributes (rdma_init_qp_attr for RoCE; librdmacm ucma_modify_qp_rtr / _rts) ---- */

static uint8_t cap8(unsigned v, unsigned max)
{
	return (uint8_t)(v < max ? v : max);
}

/* The QP's READ limits: responder resources (max_dest_rd_atomic) and initiator depth
 * (max_rd_atomic). Passive: what rdma_accept settled (before it: what the REQ asked); active:
 * what the REP says (IB CM: the REP's initiator depth is our responder resources and the
 * reverse; cm_rep_handler). Capped by the device. */
static void qp_limits(const struct cm_id *id, uint8_t *rr, uint8_t *depth)
{
	const struct ibv_device_attr *da = &id->dev->attr;
	unsigned r = id->rr, d = id->depth;
	if (!id->passive && id->peer_known) {
		r = id->peer_depth;
		d = id->peer_rr;
	}
	*rr = cap8(r, (unsigned)da->max_qp_rd_atom);
	*depth = cap8(d, (unsigned)da->max_qp_init_rd_atom);
}

/* A UD id's QP (librdmacm ucma_init_ud_qp): INIT with the P_Key index, port and Q_Key
 * (kernel cma_ib_init_qp_attr, cma_set_qkey: RDMA_UDP_QKEY), RTR with nothing more, RTS with
 * SQ PSN 0. (The kernel answers every state with INIT's set, which verbs refuse for INIT ->
 * RTR on UD (IBTA 11.2.5.1: the port is not modifiable then): librdmacm only asks for INIT.) */
static int ud_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *a, int *mask)
{
	switch (a->qp_state) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = id->id.port_num ? id->id.port_num : 1;
		a->qkey = RDMA_UDP_QKEY;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
		return 0;
	case IBV_QPS_RTR:
		*mask = IBV_QP_STATE;
		return 0;
	case IBV_QPS_RTS:
		a->sq_psn = 0;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		return 0;
	default:
		return -EINVAL;
	}
}

int cm_roce_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;
	uint8_t rr, depth;
	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	if (cm_is_ud(id))
		return ud_init_qp_attr(id, a, mask);
	switch (want) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = id->id.port_num ? id->id.port_num : 1;
		/* IB CM cm_init_qp_init_attr: REMOTE_WRITE, READ and ATOMIC with responder
		 * resources; nothing before the connection's parameters are known. */
		if (id->peer_known) {
			qp_limits(id, &rr, &depth);
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (rr)
				a->qp_access_flags |=
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		}
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR: {
		if (!id->peer_known)
			return -EINVAL;
		int sgid = cm_gid_index(id->dev, id->laddr);
		if (sgid < 0)
			return -EADDRNOTAVAIL;
		qp_limits(id, &rr, &depth);
		a->path_mtu = (enum ibv_mtu)id->mtu;
		a->dest_qp_num = id->peer_qpn;
		a->rq_psn = id->peer_psn;
		a->max_dest_rd_atomic = rr;
		a->min_rnr_timer = MIN_RNR_TIMER;
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
		a->ah_attr.grh.sgid_index = (uint8_t)sgid;
		a->ah_attr.grh.hop_limit = HOP_LIMIT;
		a->ah_attr.grh.traffic_class = id->tos;
		memcpy(a->ah_attr.grh.dgid.raw, id->peer_gid, 16);
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		return 0;
	}
	case IBV_QPS_RTS:
		if (!id->peer_known)
			return -EINVAL;
		qp_limits(id, &rr, &depth);
		a->timeout = id->ack_timeout_set ? id->ack_timeout : ACK_TIMEOUT;
		/* IB CM: the active side retries as it asked; the passive side as the REQ says.
		 * RNR retries: each side as the peer asked (REQ / REP RNR Retry Count). */
		a->retry_cnt = id->passive ? id->peer_retry : id->retry;
		a->rnr_retry = id->peer_rnr;
		a->sq_psn = id->psn;
		a->max_rd_atomic = depth;
		*mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return -EINVAL;
	}
}

/* INIT (again, with the CM's access flags) -> RTR -> RTS on the id's QP. 0 or -errno. */
static int qp_to_rts(struct cm_id *id)
{
	static const enum ibv_qp_state steps[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS};
	if (!id->id.qp)
		return 0;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct ibv_qp_attr a = {.qp_state = steps[i]};
		int mask, r = cm_roce_init_qp_attr(id, &a, &mask);
		if (r < 0)
			return r;
		r = ibv_modify_qp(id->id.qp, &a, mask);
		if (r)
			return -r;
	}
	return 0;
}

/* ---- the protocol ---- */

/* rdma_cm's service ID for the id's port space and the destination port (cma_get_service_id;
 * IBTA A3.2.3 for the IP-based ranges). */
static uint64_t service_id(enum rdma_port_space ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

void cm_roce_start(struct cm_id *id, uint64_t now)
{
	if (cm_is_ud(id)) {
		/* kernel cma_resolve_ib_udp: SIDR_REQ for the port's service ID. */
		struct cm_msg m = {.type = CM_MSG_SIDR_REQ,
				   .req_id = id->req_id,
				   .pkey = 0xFFFF,
				   .sid = service_id(id->id.ps, id->rport)};
		msg_fill_pd(&m, id->pd, id->pd_len);
		msg_queue(id, &m);
		id->deadline = now + cm_timeout_ns();
		id->ev = POLLIN;
		return;
	}
	struct cm_msg m = {.type = CM_MSG_REQ,
			   .qpn = id->qpn & 0xFFFFFF,
			   .psn = id->psn,
			   .rr = id->rr,
			   .depth = id->depth,
			   .retry = id->retry,
			   .rnr = id->rnr,
			   .mtu = (uint8_t)id->dev->mtu,
			   .srq = id->srq};
	memcpy(m.gid, id->laddr, 16);
	msg_fill_pd(&m, id->pd, id->pd_len);
	msg_queue(id, &m);
	id->deadline = now + cm_timeout_ns();
	id->ev = POLLIN;
}

/* The connection ended before or after being established (err: why). */
static void conn_lost(struct cm_id *id, int err)
{
	enum cm_state s = id->state;
	cm_conn_drop(id, true);
	if (cm_is_ud(id)) {
		/* SIDR: the request failed (UNREACHABLE, as the IB CM's SIDR_REQ_ERROR), or
		 * there is nothing to lose (passive: the reply would just be lost). */
		if (s == CM_CONNECTING) {
			id->state = CM_CLOSED;
			cm_count(err == -ETIMEDOUT ? CM_C_timeouts : CM_C_lost);
			cm_event_post_ud(id, NULL, RDMA_CM_EVENT_UNREACHABLE, err, NULL, NULL, 0);
		}
		return;
	}
	switch (s) {
	case CM_CONNECTING:
		id->state = CM_CLOSED;
		if (err == -ETIMEDOUT)
			cm_count(CM_C_timeouts);
		else
			cm_count(CM_C_lost);
		cm_event_post(id, NULL,
			      err == -EPROTO ? RDMA_CM_EVENT_CONNECT_ERROR
					     : RDMA_CM_EVENT_UNREACHABLE,
			      err, NULL, NULL, 0);
		break;
	case CM_REP_RCVD:
	case CM_REQ_RCVD:
	case CM_ACCEPTING:
		id->state = CM_CLOSED;
		cm_count(err == -ETIMEDOUT ? CM_C_timeouts : CM_C_lost);
		cm_qp_to_err(id);
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_ERROR, err, NULL, NULL, 0);
		break;
	case CM_ESTABLISHED:
	case CM_DISCONNECTING:
		id->state = CM_DISCONNECTED;
		cm_count(CM_C_disconnects);
		cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
		break;
	default:
		break;
	}
}

static void peer_from(struct cm_id *id, const struct cm_msg *m)
{
	id->peer_qpn = m->qpn;
	id->peer_psn = m->psn;
	memcpy(id->peer_gid, m->gid, 16);
	id->peer_rr = m->rr;
	id->peer_depth = m->depth;
	id->peer_rnr = m->rnr;
	if (m->type == CM_MSG_REQ)
		id->peer_retry = m->retry;
	id->mtu = m->mtu < (uint8_t)id->dev->mtu ? m->mtu : (uint8_t)id->dev->mtu;
	id->peer_known = true;
}

/* The event parameters of a REQ / REP: IB CM reports the peer's initiator depth as our
 * responder resources and the reverse, so that they can be passed back as they are. */
static struct rdma_conn_param conn_param_of(const struct cm_msg *m)
{
	struct rdma_conn_param p = {.responder_resources = m->depth,
				    .initiator_depth = m->rr,
				    .flow_control = 1,
				    .retry_count = m->retry,
				    .rnr_retry_count = m->rnr,
				    .srq = m->srq,
				    .qp_num = m->qpn};
	return p;
}

static void on_rep(struct cm_id *id, const struct cm_msg *m)
{
	peer_from(id, m);
	struct rdma_conn_param p = conn_param_of(m);
	if (!id->id.qp) {
		/* The application's own QP (conn_param->qp_num): it moves it, then calls
		 * rdma_establish, which sends the RTU. */
		id->state = CM_REP_RCVD;
		id->deadline = 0;
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &p, m->pd, CM_REP_PD);
		return;
	}
	int r = qp_to_rts(id);
	if (r < 0) {
		/* librdmacm ucma_process_conn_resp: the QP to ERR, CONNECT_ERROR; the peer
		 * learns from a REJ. */
		cm_qp_to_err(id);
		send_rej(id, CM_REJ_INVALID_QP, NULL, 0);
		id->state = CM_CLOSED;
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_ERROR, r, NULL, NULL, 0);
		return;
	}
	struct cm_msg rtu = {.type = CM_MSG_RTU};
	msg_queue(id, &rtu);
	id->state = CM_ESTABLISHED;
	id->deadline = 0;
	cm_count(CM_C_established);
	cm_event_post(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, &p, m->pd, CM_REP_PD);
}

static void on_rej(struct cm_id *id, const struct cm_msg *m)
{
	cm_count(CM_C_rejects_rcvd);
	cm_conn_drop(id, false);
	id->state = CM_CLOSED;
	cm_qp_to_err(id); /* librdmacm does this for REJECTED */
	cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, m->reason, NULL, m->pd, CM_REJ_PD);
}

static void on_dreq(struct cm_id *id)
{
	struct cm_msg drep = {.type = CM_MSG_DREP};
	send_last(id, &drep);
	id->state = CM_DISCONNECTED;
	cm_count(CM_C_disconnects);
	cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
}

static void established_passive(struct cm_id *id)
{
	id->state = CM_ESTABLISHED;
	id->deadline = 0;
	cm_count(CM_C_established);
	cm_event_post(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL, 0);
}

void cm_roce_notify_established(struct cm_id *id)
{
	established_passive(id);
}

/* The SIDR_REP to our SIDR_REQ (kernel cma_sidr_rep_handler). */
static void on_sidr_rep(struct cm_id *id, const struct cm_msg *m)
{
	if (m->req_id != id->req_id) {
		/* IB CM cm_sidr_rep_handler: a reply matching no outstanding request is
		 * dropped; ours may still come (or the timeout). */
		cm_count(CM_C_sidr_unknown);
		return;
	}
	cm_conn_drop(id, false);
	id->state = CM_CLOSED;
	if (m->status != CM_SIDR_SUCCESS) {
		cm_count(CM_C_rejects_rcvd);
		cm_event_post_ud(id, NULL, RDMA_CM_EVENT_UNREACHABLE, m->status, NULL, m->pd,
				 CM_SIDR_REP_PD);
		return;
	}
	/* cma_set_qkey: the QP's Q_Key is set; a reply naming another cannot be used. */
	if (id->id.qp && m->qkey && m->qkey != RDMA_UDP_QKEY) {
		cm_event_post_ud(id, NULL, RDMA_CM_EVENT_ADDR_ERROR, -EINVAL, NULL, NULL, 0);
		return;
	}
	int sgid = cm_gid_index(id->dev, id->laddr);
	if (sgid < 0) {
		cm_event_post_ud(id, NULL, RDMA_CM_EVENT_ADDR_ERROR, -EADDRNOTAVAIL, NULL, NULL, 0);
		return;
	}
	/* ib_init_ah_attr_from_path on the resolved route, as the kernel reports it for RoCE:
	 * GRH required, no LID. */
	struct rdma_ud_param ud;
	memset(&ud, 0, sizeof(ud));
	ud.ah_attr.is_global = 1;
	ud.ah_attr.port_num = id->id.port_num ? id->id.port_num : 1;
	ud.ah_attr.grh.sgid_index = (uint8_t)sgid;
	ud.ah_attr.grh.hop_limit = HOP_LIMIT;
	ud.ah_attr.grh.traffic_class = id->tos;
	memcpy(ud.ah_attr.grh.dgid.raw, id->raddr, 16);
	ud.qp_num = m->qpn;
	ud.qkey = m->qkey;
	id->state = CM_ESTABLISHED;
	cm_count(CM_C_established);
	cm_event_post_ud(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, &ud, m->pd, CM_SIDR_REP_PD);
}

/* A whole message arrived on an id past INCOMING. */
static void on_msg(struct cm_id *id, const struct cm_msg *m)
{
	if (cm_is_ud(id)) {
		if (id->state == CM_CONNECTING && m->type == CM_MSG_SIDR_REP)
			return on_sidr_rep(id, m);
		cm_count(CM_C_rx_unexpected);
		conn_lost(id, -EPROTO);
		return;
	}
	switch (id->state) {
	case CM_CONNECTING:
		if (m->type == CM_MSG_REP)
			return on_rep(id, m);
		if (m->type == CM_MSG_REJ)
			return on_rej(id, m);
		break;
	case CM_ACCEPTING:
		if (m->type == CM_MSG_RTU)
			return established_passive(id);
		if (m->type == CM_MSG_REJ) {
			cm_count(CM_C_rejects_rcvd);
			cm_conn_drop(id, false);
			id->state = CM_CLOSED;
			cm_qp_to_err(id);
			cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, m->reason, NULL, m->pd,
				      CM_REJ_PD);
			return;
		}
		if (m->type == CM_MSG_DREQ)
			return on_dreq(id);
		break;
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
		if (m->type == CM_MSG_DREQ)
			return on_dreq(id);
		break;
	case CM_DISCONNECTING:
		if (m->type == CM_MSG_DREP) {
			cm_conn_drop(id, false);
			id->state = CM_DISCONNECTED;
			cm_count(CM_C_disconnects);
			cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
			return;
		}
		if (m->type == CM_MSG_DREQ)
			return on_dreq(id);
		break;
	default:
		break;
	}
	cm_count(CM_C_rx_unexpected);
	conn_lost(id, -EPROTO);
}

static enum cm_counter parse_error_counter(int r)
{
	return r == -EPROTO	       ? CM_C_rx_garbage
	       : r == -EPROTONOSUPPORT ? CM_C_rx_bad_version
				       : CM_C_rx_bad_msg;
}

/* Reads at most up to the end of the next message (never further: what follows is not ours
 * to take yet). Returns 1 with *m when a message is complete, 0 when more bytes are awaited,
 * or a negative code: a socket error / end (-ECONNRESET), or a parse error. */
static int read_msg(struct cm_id *id, struct cm_msg *m)
{
	for (;;) {
		size_t need;
		int p = cm_msg_parse(id->rx, id->rx_len, m, &need);
		if (p == 0) {
			id->rx_len = 0;
			return 1;
		}
		if (p != -EAGAIN)
			return p;
		ssize_t r = io_tcp_recv(id->tcp, id->rx + id->rx_len, need - id->rx_len);
		if (r == -EAGAIN)
			return 0;
		if (r <= 0)
			return r == -ECONNRESET || r == -ESHUTDOWN || r == 0 ? -ECONNRESET : (int)r;
		id->rx_len += (size_t)r;
	}
}

static void send_sidr_rep(struct cm_id *id, uint8_t status, uint32_t qpn, const void *pd,
			  size_t len)
{
	struct cm_msg m = {.type = CM_MSG_SIDR_REP,
			   .req_id = id->req_id,
			   .status = status,
			   .qpn = qpn & 0xFFFFFF,
			   .qkey = status == CM_SIDR_SUCCESS ? RDMA_UDP_QKEY : 0};
	msg_fill_pd(&m, pd, len);
	if (status != CM_SIDR_SUCCESS)
		cm_count(CM_C_rejects_sent);
	send_last(id, &m);
}

/* A SIDR_REQ on an incoming connection (kernel cma_ib_req_handler for SIDR; IB CM
 * cm_sidr_req_handler). Returns false when the connection is to be dropped. */
static bool sidr_incoming(struct cm_id *id, const struct cm_msg *m)
{
	id->req_id = m->req_id;
	/* The IB CM answers status 1 for a service ID nobody serves: an RC listener (another
	 * port space), or one bound to an iWARP device. */
	bool served = cm_is_ud(id) && m->sid == service_id(id->id.ps, id->lport);
	if (!served || cm_incoming_device(id, CM_TR_ROCE) < 0) {
		cm_count(served ? CM_C_wrong_transport : CM_C_wrong_port_space);
		send_sidr_rep(id, CM_SIDR_UNSUPPORTED, 0, NULL, 0);
		return false;
	}
	cm_count(CM_C_req_sidr);
	id->passive = true;
	memcpy(id->peer_gid, id->raddr, 16);
	id->ev = POLLIN;
	cm_incoming_request_ud(id, m->pd, CM_SIDR_REQ_PD);
	return true;
}

bool cm_roce_incoming(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	(void)now; /* the deadline is the caller's */
	id->tr = CM_TR_ROCE;
	struct cm_msg m;
	int r = read_msg(id, &m);
	if (r == 0) {
		id->ev = POLLIN;
		if (id->deadline < *wake)
			*wake = id->deadline;
		return true;
	}
	if (r < 0) {
		cm_count(r == -ECONNRESET ? CM_C_lost : parse_error_counter(r));
		return false;
	}
	if (m.type == CM_MSG_SIDR_REQ)
		return sidr_incoming(id, &m);
	if (m.type != CM_MSG_REQ) {
		cm_count(CM_C_rx_unexpected);
		return false;
	}
	if (cm_is_ud(id)) {
		/* A REQ for a UD listener's port: the IB CM finds no listener for that service
		 * ID (the port spaces differ) and rejects. */
		cm_count(CM_C_wrong_port_space);
		send_rej(id, CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		return false;
	}
	int d = cm_incoming_device(id, CM_TR_ROCE);
	if (d < 0) {
		cm_count(CM_C_wrong_transport);
		if (d == -EPROTOTYPE && !said_wrong_tr && !getenv("SOFTRDMA_QUIET")) {
			said_wrong_tr = true;
			fprintf(stderr, "softrdma: rdma_cm: a RoCE connection request reached an "
					"iWARP listener: refused (both sides need the same "
					"SOFTRDMA_TRANSPORT)\n");
		}
		send_rej(id, CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		return false;
	}
	cm_count(CM_C_req_roce);
	id->passive = true;
	peer_from(id, &m);
	/* rdma_accept's defaults (librdmacm ucma_process_conn_req): what the request says. */
	id->rr = m.depth;
	id->depth = m.rr;
	id->psn = cm_random_psn();
	struct rdma_conn_param p = conn_param_of(&m);
	id->ev = POLLIN;
	cm_incoming_request(id, &p, m.pd, CM_REQ_PD);
	return true;
}

void cm_roce_run(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	if (!id->tcp)
		return;
	int r = flush(id);
	if (r < 0) {
		conn_lost(id, -ECONNRESET);
		return;
	}
	while (id->tcp) {
		struct cm_msg m;
		r = read_msg(id, &m);
		if (r == 0)
			break;
		if (r < 0) {
			if (r != -ECONNRESET) {
				cm_count(parse_error_counter(r));
				r = -EPROTO;
			}
			conn_lost(id, r);
			return;
		}
		on_msg(id, &m);
		if (id->tcp && flush(id) < 0) {
			conn_lost(id, -ECONNRESET);
			return;
		}
	}
	if (!id->tcp)
		return;
	if (id->deadline && now >= id->deadline) {
		if (id->state == CM_DISCONNECTING) {
			/* No DREP: disconnected anyway (IB CM DREQ timeout). */
			cm_conn_drop(id, true);
			id->state = CM_DISCONNECTED;
			cm_count(CM_C_disconnects);
			cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
		} else {
			conn_lost(id, -ETIMEDOUT);
		}
		return;
	}
	if (id->deadline && id->deadline < *wake)
		*wake = id->deadline;
	id->ev = (short)(POLLIN | (id->tx_len ? POLLOUT : 0));
}

int cm_roce_accept(struct cm_id *id, const struct rdma_conn_param *p)
{
	(void)p;
	if (cm_is_ud(id)) {
		/* cma_send_sidr_rep: our QPN and Q_Key; no connection, no event follows. A
		 * requester gone meanwhile just misses the reply. */
		if (id->tcp)
			send_sidr_rep(id, CM_SIDR_SUCCESS, id->qpn, id->pd, id->pd_len);
		id->state = CM_ESTABLISHED;
		cm_count(CM_C_established);
		return 0;
	}
	if (!id->tcp)
		return -ECONNRESET; /* the peer went away: CONNECT_ERROR is out */
	int r = qp_to_rts(id);
	if (r < 0)
		return r;
	struct cm_msg m = {.type = CM_MSG_REP,
			   .qpn = id->qpn & 0xFFFFFF,
			   .psn = id->psn,
			   .rr = id->rr,
			   .depth = id->depth,
			   .rnr = id->rnr,
			   .mtu = id->mtu,
			   .srq = id->srq};
	memcpy(m.gid, id->laddr, 16);
	msg_fill_pd(&m, id->pd, id->pd_len);
	r = msg_queue(id, &m);
	if (r < 0)
		return r;
	id->state = CM_ACCEPTING;
	id->deadline = cm_now() + cm_timeout_ns();
	if (flush(id) < 0) {
		conn_lost(id, -ECONNRESET);
		return 0;
	}
	id->ev = (short)(POLLIN | (id->tx_len ? POLLOUT : 0));
	cm_kick();
	return 0;
}

int cm_roce_reject(struct cm_id *id, const void *pd, uint8_t len)
{
	if (cm_is_ud(id)) {
		/* rdma_reject on a UD id: SIDR_REP with status 2 (cma_send_sidr_rep
		 * IB_SIDR_REJECT) and the private data, 136 bytes at most. */
		if (len > CM_SIDR_REP_PD)
			return -EINVAL;
		if (id->tcp)
			send_sidr_rep(id, CM_SIDR_REJECT, 0, pd, len);
		id->state = CM_CLOSED;
		return 0;
	}
	if (len > CM_REJ_PD)
		return -EINVAL;
	if (id->tcp)
		send_rej(id, CM_REJ_CONSUMER_DEFINED, pd, len);
	id->state = CM_CLOSED;
	return 0;
}

int cm_roce_establish(struct cm_id *id)
{
	if (id->state != CM_REP_RCVD || !id->tcp)
		return -EINVAL;
	struct cm_msg rtu = {.type = CM_MSG_RTU};
	msg_queue(id, &rtu);
	id->state = CM_ESTABLISHED;
	cm_count(CM_C_established);
	if (flush(id) < 0)
		conn_lost(id, -ECONNRESET);
	cm_kick();
	return 0;
}

int cm_roce_disconnect(struct cm_id *id)
{
	switch (id->state) {
	case CM_ESTABLISHED:
	case CM_ACCEPTING:
	case CM_REP_RCVD: {
		cm_qp_to_err(id);
		struct cm_msg dreq = {.type = CM_MSG_DREQ};
		msg_queue(id, &dreq);
		id->state = CM_DISCONNECTING;
		id->deadline = cm_now() + cm_timeout_ns();
		if (flush(id) < 0) {
			conn_lost(id, -ECONNRESET);
			return 0;
		}
		cm_kick();
		return 0;
	}
	case CM_DISCONNECTING:
	case CM_DISCONNECTED:
		cm_qp_to_err(id);
		return 0;
	default:
		return -EINVAL;
	}
}

void cm_roce_destroy(struct cm_id *id)
{
	if (!id->tcp)
		return;
	if (id->state == CM_ESTABLISHED || id->state == CM_ACCEPTING || id->state == CM_REP_RCVD) {
		/* IB CM: destroying a connected id sends a DREQ; the peer disconnects. */
		struct cm_msg dreq = {.type = CM_MSG_DREQ};
		send_last(id, &dreq);
	} else if (id->state == CM_REQ_RCVD && cm_is_ud(id)) {
		/* IB CM cm_destroy_id in SIDR_REQ_RCVD: rejected. */
		send_sidr_rep(id, CM_SIDR_REJECT, 0, NULL, 0);
	} else if (id->state == CM_REQ_RCVD) {
		send_rej(id, CM_REJ_CONSUMER_DEFINED, NULL, 0);
	}
}
