/* rdma_cm over RoCEv2: the IB CM's MADs on QP1 (IBTA 12; ../shared/spec/roce.md section 11),
 * with rdma_cm's IP private-data header, as the kernel's rdma_cm + ib_cm send them, so that
 * softrdma talks to kernel rdma_cm peers (rxe, RoCE NICs) and to other softrdma processes. The
 * MADs reach this process through core/gsi.h: the listener's service-ID endpoint takes REQs and
 * SIDR_REQs, the process's endpoint everything that names one of our comm IDs.
 *
 * Which MAD each state takes (others are counted and dropped: a datagram protocol has no
 * connection to fail):
 *   active   CONNECTING     REP (-> RTR, RTS, RTU, ESTABLISHED; or CONNECT_RESPONSE when the
 *                           QP is the application's), REJ (-> REJECTED; reason 8 "nobody
 *                           listens" is retried for CM_REFUSED_RETRY_NS first), MRA (waits)
 *            REP_RCVD       DREQ
 *            ESTABLISHED    REP again (the RTU was lost: sent again)
 *   passive  REQ_RCVD       REQ again (ignored: the application has not answered yet)
 *            ACCEPTING      RTU (-> ESTABLISHED), REJ (-> REJECTED), DREQ, REQ again (REP again)
 *   both     ESTABLISHED    DREQ (-> DREP, DISCONNECTED)
 *            DISCONNECTING  DREP, DREQ (both sides disconnected at once)
 *            DISCONNECTED   DREQ again (DREP again)
 * Requests (REQ, REP, DREQ, SIDR_REQ) are sent again every CM_RESEND_NS, doubling, until the
 * answer or the deadline (cm_timeout_ns): then the active side reports UNREACHABLE -ETIMEDOUT,
 * the passive one (no RTU) UNREACHABLE -ETIMEDOUT (kernel cma: IB_CM_REP_ERROR), a DREQ
 * DISCONNECTED anyway. A MAD for a comm ID we do not have: DREQ is answered with a DREP, REP
 * with REJ 6 (invalid comm ID), as the kernel CM does.
 *
 * UD ids (SIDR, IBTA 12.11; cm.h "UD ids"): the active side sends SIDR_REQ and takes only
 * SIDR_REP (ESTABLISHED, or UNREACHABLE with its status; status 1 is retried like REJ 8). The
 * passive side answers with rdma_accept / rdma_reject (SIDR_REP) and again when the request
 * comes again.
 *
 * Not done: the alternate path (APM), LAP/APR, ClassPortInfo redirection, sending MRA; a
 * DREQ / REJ sent by rdma_destroy_id goes once (the id is gone: nothing resends it). */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "wire/roce/ece.h"

#define MIN_RNR_TIMER 12 /* 0.64 ms, as the verbs examples use (the kernel CM's 0 is 655 ms) */
#define ACK_TIMEOUT   14 /* 67 ms: rdma_cm's default for RoCE is in this range */
#define HOP_LIMIT     64
/* What the kernel's rdma_cm puts in the MADs' fields softrdma has no use for itself (seen in
 * rxe's REQ / REP, tests/data/rxe_rdmacm_*.pcap). */
#define CM_RESPONSE_TIMEOUT 20 /* CMA_CM_RESPONSE_TIMEOUT: 4.096 us * 2^20 */
#define CM_MAX_RETRIES	    15 /* CMA_MAX_CM_RETRIES */
#define REQ_PACKET_RATE	    0
#define REQ_LOCAL_ACK	    19 /* packet lifetime 18 + 1 (rxe's CA ACK delay is less) */
#define REP_TARGET_ACK	    15
#define CM_RESEND_NS	    250000000ull  /* first resend of an unanswered request */
#define CM_RESEND_MAX_NS    2000000000ull /* the resend interval doubles up to this */
#define CM_PEER_CHECK_NS    250000000ull  /* a peer process on this host: looked at this often */

static bool said_wrong_tr;

static bool mapped(const uint8_t a[16])
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(a, pre, 12);
}

/* rdma_cm's service ID for the id's port space and the destination port (cma_get_service_id;
 * IBTA A3.2.3 for the IP-based ranges). */
static uint64_t service_id(enum rdma_port_space ps, uint16_t port)
{
	return (uint64_t)ps << 16 | port;
}

static uint64_t new_tid(uint32_t comm_id)
{
	uint32_t hi = 0;
	if (getrandom(&hi, sizeof(hi), GRND_NONBLOCK) != (ssize_t)sizeof(hi))
		hi = cm_random_psn();
	return (uint64_t)hi << 32 | comm_id;
}

/* ---- sending ---- */

/* Sends a built MAD to the id's peer QP1. 0 or a negative errno (counted). */
static int send_raw(struct cm_id *id, const uint8_t mad[CM_MAD_LEN])
{
	struct gsi_frame f = {.ipv6 = !mapped(id->gsi_peer), .tos = id->tos};
	memcpy(f.src, id->laddr, 16);
	memcpy(f.dst, id->gsi_peer, 16);
	memcpy(f.mad, mad, CM_MAD_LEN);
	int r = id->dev ? sr_cm_gsi_send(id->dev->ctx, &f) : -ENODEV;
	if (r < 0)
		cm_count(CM_C_mad_send_errors);
	return r;
}

/* Builds m into out (or a scratch buffer) and sends it. */
static int send_mad(struct cm_id *id, const struct cm_mad *m, uint8_t *out)
{
	uint8_t buf[CM_MAD_LEN];
	uint8_t *b = out ? out : buf;
	if (cm_mad_build(m, b) != CM_MAD_LEN)
		return -EINVAL;
	return send_raw(id, b);
}

/* A request that is sent again until answered (id->mad). */
static int send_request(struct cm_id *id, const struct cm_mad *m, uint64_t now)
{
	int r = send_mad(id, m, id->mad);
	id->mad_pending = true;
	id->resend_step = CM_RESEND_NS;
	id->resend_at = now + id->resend_step;
	return r;
}

/* Connected: a peer on this host is a softrdma process, whose end leaves nobody to send the
 * DREQ the kernel's CM would send for it; its comm-ID endpoint is watched instead. */
static void watch_peer(struct cm_id *id)
{
	id->peer_check_at = cm_dev_for(id->gsi_peer, CM_TR_ROCE) && id->peer_comm_id
				? cm_now() + CM_PEER_CHECK_NS
				: 0;
}

static void answered(struct cm_id *id)
{
	id->mad_pending = false;
	id->resend_at = 0;
}

static void mad_init(struct cm_mad *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->attr = attr;
	m->tid = tid;
}

static void fill_pd(uint8_t *dst, size_t room, const uint8_t *pd, size_t len)
{
	memset(dst, 0, room);
	if (len)
		memcpy(dst, pd, len < room ? len : room);
}

static void send_rej(struct cm_id *id, uint8_t msg, uint16_t reason, const void *pd, size_t len)
{
	struct cm_mad m;
	mad_init(&m, CM_ATTR_REJ, id->tid);
	m.local_id = id->comm_id;
	m.remote_id = id->peer_comm_id;
	m.msg_rejected = msg;
	m.reason = reason;
	fill_pd(m.pd, CM_MAD_REJ_PD, pd, len);
	cm_count(CM_C_rejects_sent);
	send_mad(id, &m, NULL);
}

static void send_simple(struct cm_id *id, uint16_t attr, uint64_t tid, uint8_t *keep)
{
	struct cm_mad m;
	mad_init(&m, attr, tid);
	m.local_id = id->comm_id;
	m.remote_id = id->peer_comm_id;
	if (attr == CM_ATTR_DREQ)
		m.qpn = id->peer_qpn & 0xFFFFFF;
	send_mad(id, &m, keep);
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

static enum ibv_qp_type qp_type_of(const struct cm_id *id)
{
	return id->id.qp ? id->id.qp->qp_type : id->id.qp_type;
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
		/* Linux's IB CM: the REQ's Starting PSN is what the passive side sends from and
		 * the active side receives at, the REP's the reverse (cm_req_handler sets
		 * sq_psn from the REQ; ib_send_cm_req rq_psn; seen in rxe's traffic). Each
		 * side receives at the PSN it announced. */
		a->rq_psn = id->psn;
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
		if (qp_type_of(id) == IBV_QPT_XRC_SEND) /* no responder: no IRD, no RNR timer */
			*mask &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
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
		a->sq_psn = id->peer_psn;
		a->max_rd_atomic = depth;
		*mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
		if (qp_type_of(id) == IBV_QPT_XRC_RECV) /* no requester: no retries, no ORD */
			*mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
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

/* A UD id's SIDR_REQ / an RC id's REQ (kernel cm_format_req / cm_format_sidr_req with
 * rdma_cm's values; the private data starts with rdma_cm's IP header). */
static void build_request(struct cm_id *id, struct cm_mad *m)
{
	struct cm_cma_hdr h = {.ipv6 = !mapped(id->laddr), .sport = id->lport};
	memcpy(h.src, id->laddr, 16);
	memcpy(h.dst, id->raddr, 16);
	if (cm_is_ud(id)) {
		mad_init(m, CM_ATTR_SIDR_REQ, id->tid);
		m->local_id = id->req_id;
		m->pkey = 0xFFFF;
		m->service_id = service_id(id->id.ps, id->rport);
		cm_cma_hdr_build(&h, m->pd);
		fill_pd(m->pd + CM_MAD_CMA_HDR_LEN, CM_SIDR_REQ_PD, id->pd, id->pd_len);
		return;
	}
	mad_init(m, CM_ATTR_REQ, id->tid);
	m->local_id = id->comm_id;
	m->service_id = service_id(id->id.ps, id->rport);
	m->ca_guid = sr_cm_node_guid(id->dev->ctx);
	m->qpn = id->qpn & 0xFFFFFF;
	m->resp_res = id->rr;
	m->init_depth = id->depth;
	m->remote_cm_timeout = CM_RESPONSE_TIMEOUT;
	enum ibv_qp_type t = qp_type_of(id);
	m->transport = t == IBV_QPT_UC	       ? CM_MAD_TS_UC
		       : t == IBV_QPT_XRC_SEND ? CM_MAD_TS_XRC_EXT
					       : CM_MAD_TS_RC;
	m->ext_transport = t == IBV_QPT_XRC_SEND ? 1 : 0; /* kernel cm_format_req for XRC */
	m->e2e_fc = false; /* rdma_cm passes conn_param->flow_control: 0 in rxe's REQs */
	m->psn = id->psn & 0xFFFFFF;
	m->local_cm_timeout = CM_RESPONSE_TIMEOUT;
	m->retry_count = id->retry & 7;
	m->pkey = 0xFFFF;
	m->mtu = (uint8_t)id->dev->mtu;
	m->rnr_retry = id->rnr & 7;
	m->max_cm_retries = CM_MAX_RETRIES;
	m->srq = id->srq;
	m->slid = m->dlid = 0xFFFF; /* permissive: RoCE has no LIDs */
	memcpy(m->sgid, id->laddr, 16);
	memcpy(m->dgid, id->raddr, 16);
	m->packet_rate = REQ_PACKET_RATE;
	m->traffic_class = id->tos;
	/* The flow label rdma_cm derives from the two ports (seen in rxe's REQs). */
	m->flow_label = ((uint32_t)id->lport * 31u + id->rport) & 0xFFFFFu;
	m->hop_limit = HOP_LIMIT;
	m->local_ack_timeout = REQ_LOCAL_ACK;
	/* ECE (cm.h "ECE"): what the id offers, where the kernel's cm_format_req puts it (the
	 * vendor ID in the REQ, the options in the MAD header's AttributeModifier). */
	cm_ece_offer(id);
	m->vendor_id = id->local_ece.vendor_id;
	m->attr_mod = id->local_ece.options;
	cm_cma_hdr_build(&h, m->pd);
	fill_pd(m->pd + CM_MAD_CMA_HDR_LEN, CM_REQ_PD, id->pd, id->pd_len);
}

/* An ephemeral rdma_cm port for an active id the application did not bind (the kernel's
 * rdma_cm port spaces are its own; any port this process does not use will do). */
static uint16_t ephemeral_port(void)
{
	uint16_t p = 0;
	if (getrandom(&p, sizeof(p), GRND_NONBLOCK) != (ssize_t)sizeof(p))
		p = (uint16_t)cm_random_psn();
	return (uint16_t)(32768 + p % 28232);
}

int cm_roce_connect(struct cm_id *id, uint64_t now)
{
	int r = cm_new_comm_id(&id->comm_id);
	if (r < 0)
		return r;
	if (cm_is_ud(id))
		id->req_id = id->comm_id; /* the reply is routed to us by it */
	if (!id->lport)
		id->lport = ephemeral_port();
	id->tid = new_tid(id->comm_id);
	id->peer_comm_id = 0;
	id->has_reply = false;
	memcpy(id->gsi_peer, id->raddr, 16);
	struct cm_mad m;
	build_request(id, &m);
	r = send_request(id, &m, now);
	if (r < 0) {
		answered(id);
		return r;
	}
	id->state = CM_CONNECTING;
	return 0;
}

int cm_roce_listen(struct cm_id *id)
{
	int fd = gsi_ep_open_sid(service_id(id->id.ps, id->lport));
	if (fd < 0)
		return fd;
	id->sid_fd = fd;
	if (id->dev)
		sr_cm_gsi_start(id->dev->ctx);
	else
		cm_gsi_start_all();
	return 0;
}

/* The peer is gone or never answered (err: why). */
static void conn_lost(struct cm_id *id, int err)
{
	enum cm_state s = id->state;
	answered(id);
	id->deadline = 0;
	if (cm_is_ud(id)) {
		if (s == CM_CONNECTING) {
			id->state = CM_CLOSED;
			cm_count(err == -ETIMEDOUT ? CM_C_timeouts : CM_C_lost);
			cm_event_post_ud(id, NULL, RDMA_CM_EVENT_UNREACHABLE, err, NULL, NULL, 0);
		}
		return;
	}
	switch (s) {
	case CM_CONNECTING:
	case CM_ACCEPTING:
		/* kernel cma: IB_CM_REQ_ERROR / IB_CM_REP_ERROR (no answer) */
		id->state = CM_CLOSED;
		cm_count(err == -ETIMEDOUT ? CM_C_timeouts : CM_C_lost);
		cm_qp_to_err(id);
		cm_event_post(id, NULL, RDMA_CM_EVENT_UNREACHABLE, err, NULL, NULL, 0);
		break;
	case CM_REP_RCVD:
	case CM_REQ_RCVD:
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

/* The peer's connection parameters from its REQ / REP (the REP's MTU is the one our REQ
 * proposed: the passive side takes the REQ's). */
static void peer_from(struct cm_id *id, const struct cm_mad *m, const struct gsi_frame *f)
{
	id->peer_qpn = m->qpn;
	id->peer_psn = m->psn;
	if (m->attr == CM_ATTR_REQ)
		memcpy(id->peer_gid, m->sgid, 16);
	else
		memcpy(id->peer_gid, f->src, 16);
	id->peer_rr = m->resp_res;
	id->peer_depth = m->init_depth;
	id->peer_rnr = m->rnr_retry;
	uint8_t mtu = (uint8_t)id->dev->mtu;
	if (m->attr == CM_ATTR_REQ) {
		id->peer_retry = m->retry_count;
		if (m->mtu && m->mtu < mtu)
			mtu = m->mtu;
	}
	id->mtu = mtu;
	id->peer_known = true;
}

/* The event parameters of a REQ / REP: IB CM reports the peer's initiator depth as our
 * responder resources and the reverse, so that they can be passed back as they are. */
static struct rdma_conn_param conn_param_of(const struct cm_mad *m)
{
	struct rdma_conn_param p = {.responder_resources = m->init_depth,
				    .initiator_depth = m->resp_res,
				    .flow_control = m->e2e_fc,
				    .retry_count = m->retry_count,
				    .rnr_retry_count = m->rnr_retry,
				    .srq = m->srq,
				    .qp_num = m->qpn};
	return p;
}

static void on_rep(struct cm_id *id, const struct cm_mad *m, const struct gsi_frame *f)
{
	answered(id);
	id->peer_comm_id = m->local_id;
	peer_from(id, m, f);
	/* The passive side's answer to our ECE (kernel cm_format_rep_event): kept for
	 * rdma_get_remote_ece; selective repeat only if both said so (cm_ece_sr). */
	id->remote_ece = (struct ibv_ece){.vendor_id = m->vendor_id, .options = m->attr_mod};
	struct rdma_conn_param p = conn_param_of(m);
	if (!id->id.qp) {
		/* The application's own QP (conn_param->qp_num): it moves it, then calls
		 * rdma_establish, which sends the RTU. */
		id->state = CM_REP_RCVD;
		id->deadline = 0;
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, &p, m->pd, CM_REP_PD);
		return;
	}
	/* librdmacm ucma_process_conn_resp_ece: ibv_set_ece before RTR. */
	int r = cm_ece_apply(id, cm_ece_sr(id));
	if (r == 0)
		r = qp_to_rts(id);
	if (r < 0) {
		/* librdmacm ucma_process_conn_resp: the QP to ERR, CONNECT_ERROR; the peer
		 * learns from a REJ. */
		cm_qp_to_err(id);
		send_rej(id, CM_MAD_MSG_REP, CM_REJ_INVALID_QP, NULL, 0);
		id->state = CM_CLOSED;
		id->deadline = 0;
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_ERROR, r, NULL, NULL, 0);
		return;
	}
	send_simple(id, CM_ATTR_RTU, id->tid, id->reply);
	id->has_reply = true;
	id->state = CM_ESTABLISHED;
	id->deadline = 0;
	watch_peer(id);
	cm_count(CM_C_established);
	cm_event_post(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, &p, m->pd, CM_REP_PD);
}

static void on_rej(struct cm_id *id, const struct cm_mad *m, uint64_t now)
{
	if (id->state == CM_CONNECTING && m->reason == CM_REJ_INVALID_SERVICE_ID &&
	    now < id->refused_until && now < id->deadline) {
		/* Nobody listens yet: tried again for a while (cm.h CM_REFUSED_RETRY_NS). */
		cm_count(CM_C_refused_retries);
		id->resend_step = CM_REFUSED_STEP_NS;
		id->resend_at = now + CM_REFUSED_STEP_NS;
		return;
	}
	answered(id);
	cm_count(m->reason == CM_REJ_INVALID_SERVICE_ID ? CM_C_refused : CM_C_rejects_rcvd);
	id->state = CM_CLOSED;
	id->deadline = 0;
	cm_qp_to_err(id); /* librdmacm does this for REJECTED */
	cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, m->reason, NULL, m->pd, CM_REJ_PD);
}

static void on_dreq(struct cm_id *id, const struct cm_mad *m)
{
	answered(id);
	send_simple(id, CM_ATTR_DREP, m->tid, NULL);
	if (id->state == CM_DISCONNECTED) {
		cm_count(CM_C_mad_dups);
		return;
	}
	id->state = CM_DISCONNECTED;
	id->deadline = 0;
	cm_count(CM_C_disconnects);
	cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
}

static void established_passive(struct cm_id *id)
{
	answered(id);
	id->state = CM_ESTABLISHED;
	id->deadline = 0;
	watch_peer(id);
	cm_count(CM_C_established);
	cm_event_post(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL, 0);
}

void cm_roce_notify_established(struct cm_id *id)
{
	established_passive(id);
}

/* The SIDR_REP to our SIDR_REQ (kernel cma_sidr_rep_handler). */
static void on_sidr_rep(struct cm_id *id, const struct cm_mad *m, uint64_t now)
{
	if (m->sidr_status == CM_SIDR_UNSUPPORTED && now < id->refused_until &&
	    now < id->deadline) {
		cm_count(CM_C_refused_retries);
		id->resend_step = CM_REFUSED_STEP_NS;
		id->resend_at = now + CM_REFUSED_STEP_NS;
		return;
	}
	answered(id);
	id->state = CM_CLOSED;
	id->deadline = 0;
	if (m->sidr_status != CM_SIDR_SUCCESS) {
		cm_count(m->sidr_status == CM_SIDR_UNSUPPORTED ? CM_C_refused : CM_C_rejects_rcvd);
		cm_event_post_ud(id, NULL, RDMA_CM_EVENT_UNREACHABLE, m->sidr_status, NULL, m->pd,
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

/* A MAD naming one of our RC ids. */
static void on_mad(struct cm_id *id, const struct cm_mad *m, const struct gsi_frame *f,
		   uint64_t now)
{
	if (memcmp(f->src, id->gsi_peer, 16) != 0) {
		cm_count(CM_C_rx_unexpected); /* our comm ID, from another address */
		return;
	}
	/* As the kernel's CM (cm_acquire_id with both IDs, cm_dreq_handler): once the peer's
	 * comm ID is known, a MAD of the connection names it as well as ours, and a DREQ names
	 * our QP; anything else is forged or stale, and dropped. */
	if ((id->peer_known && m->local_id != id->peer_comm_id) ||
	    (m->attr == CM_ATTR_DREQ && m->qpn != (id->qpn & 0xFFFFFF))) {
		cm_count(CM_C_rx_forged);
		return;
	}
	switch (id->state) {
	case CM_CONNECTING:
		if (m->attr == CM_ATTR_REP)
			return on_rep(id, m, f);
		if (m->attr == CM_ATTR_REJ)
			return on_rej(id, m, now);
		if (m->attr == CM_ATTR_MRA) {
			/* The peer needs more time (IBTA 12.6.6): wait for it, within reason. */
			id->deadline = now + cm_timeout_ns();
			return;
		}
		break;
	case CM_ACCEPTING:
		if (m->attr == CM_ATTR_RTU)
			return established_passive(id);
		if (m->attr == CM_ATTR_REJ) {
			answered(id);
			cm_count(CM_C_rejects_rcvd);
			id->state = CM_CLOSED;
			id->deadline = 0;
			cm_qp_to_err(id);
			cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, m->reason, NULL, m->pd,
				      CM_REJ_PD);
			return;
		}
		if (m->attr == CM_ATTR_DREQ)
			return on_dreq(id, m);
		break;
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
		if (m->attr == CM_ATTR_DREQ)
			return on_dreq(id, m);
		if (m->attr == CM_ATTR_REP && id->has_reply && !id->passive) {
			cm_count(CM_C_mad_dups); /* our RTU was lost */
			send_raw(id, id->reply);
			return;
		}
		if (m->attr == CM_ATTR_REP || m->attr == CM_ATTR_RTU) {
			cm_count(CM_C_mad_dups);
			return;
		}
		break;
	case CM_DISCONNECTING:
		if (m->attr == CM_ATTR_DREP) {
			answered(id);
			id->state = CM_DISCONNECTED;
			id->deadline = 0;
			cm_count(CM_C_disconnects);
			cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
			return;
		}
		if (m->attr == CM_ATTR_DREQ)
			return on_dreq(id, m);
		break;
	default:
		if (m->attr == CM_ATTR_DREQ)
			return on_dreq(id, m); /* disconnected or closed: DREP (again) */
		if (m->attr == CM_ATTR_DREP || m->attr == CM_ATTR_REP || m->attr == CM_ATTR_RTU) {
			cm_count(CM_C_mad_dups);
			return;
		}
		break;
	}
	cm_count(CM_C_rx_unexpected);
}

static void send_sidr_rep(struct cm_id *id, uint8_t status, uint32_t qpn, const void *pd,
			  size_t len)
{
	struct cm_mad m;
	mad_init(&m, CM_ATTR_SIDR_REP, id->tid);
	m.local_id = id->req_id;
	m.sidr_status = status;
	m.qpn = qpn & 0xFFFFFF;
	m.qkey = status == CM_SIDR_SUCCESS ? RDMA_UDP_QKEY : 0;
	m.service_id = service_id(id->id.ps, id->lport);
	fill_pd(m.pd, CM_MAD_SIDR_REP_PD, pd, len);
	if (status != CM_SIDR_SUCCESS)
		cm_count(CM_C_rejects_sent);
	if (send_mad(id, &m, id->reply) == 0)
		id->has_reply = true;
}

struct dup_key {
	uint32_t id;
	const uint8_t *peer;
	bool ud;
};

static bool is_dup(const struct cm_id *c, const void *arg)
{
	const struct dup_key *k = arg;
	return c->passive && c->tr == CM_TR_ROCE && cm_is_ud(c) == k->ud &&
	       (k->ud ? c->req_id : c->peer_comm_id) == k->id && !memcmp(c->gsi_peer, k->peer, 16);
}

/* A REQ / SIDR_REQ for a listener (kernel cm_req_handler + cma_ib_req_handler; for SIDR
 * cm_sidr_req_handler). */
static void request_in(struct cm_id *lis, const struct cm_mad *m, const struct gsi_frame *f)
{
	bool ud = m->attr == CM_ATTR_SIDR_REQ;
	struct dup_key k = {.id = m->local_id, .peer = f->src, .ud = ud};
	struct cm_id *dup = cm_find(is_dup, &k);
	if (dup) {
		/* The request came again: our answer was lost, or is still to come. */
		cm_count(CM_C_mad_dups);
		if (ud && dup->has_reply)
			send_raw(dup, dup->reply);
		else if (!ud && dup->state == CM_ACCEPTING)
			send_raw(dup, dup->mad);
		return;
	}
	struct cm_cma_hdr h;
	struct cm_id tmp; /* answers before an id exists go from the listener's view */
	memset(&tmp, 0, sizeof(tmp));
	tmp.tid = m->tid;
	tmp.peer_comm_id = m->local_id;
	tmp.req_id = m->local_id;
	tmp.id.ps = lis->id.ps;
	tmp.lport = lis->lport;
	memcpy(tmp.laddr, f->dst, 16);
	memcpy(tmp.gsi_peer, f->src, 16);
	tmp.dev = cm_dev_for(f->dst, CM_TR_ROCE);
	if (cm_cma_hdr_parse(m->pd, &h) != 0) {
		/* Not rdma_cm's (no IP header): cma_ib_req_handler fails, the CM rejects. */
		cm_count(CM_C_rx_bad_msg);
		if (ud)
			send_sidr_rep(&tmp, CM_SIDR_REJECT, 0, NULL, 0);
		else
			send_rej(&tmp, CM_MAD_MSG_REQ, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		return;
	}
	if ((!lis->bound_any && memcmp(lis->laddr, h.dst, 16) != 0) ||
	    !cm_listener_takes(lis, CM_TR_ROCE, h.dst)) {
		/* Not this listener's address or transport: the IB CM finds no listener for
		 * it. */
		cm_count(CM_C_wrong_transport);
		if (ud)
			send_sidr_rep(&tmp, CM_SIDR_UNSUPPORTED, 0, NULL, 0);
		else
			send_rej(&tmp, CM_MAD_MSG_REQ, CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	if (cm_is_ud(lis) != ud) {
		/* The other kind for this listener's service ID (a SIDR_REQ to an RC listener:
		 * what cm_probe.c asks): the kernel's rdma_cm refuses it (cma_ib_req_handler,
		 * cma_ib_check_req_qp_type) and its IB CM answers for the id it destroys
		 * (cm_destroy_id): SIDR status 2, REJ 28. */
		cm_count(CM_C_wrong_port_space);
		if (ud)
			send_sidr_rep(&tmp, CM_SIDR_REJECT, 0, NULL, 0);
		else
			send_rej(&tmp, CM_MAD_MSG_REQ, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		return;
	}
	struct cm_id *c = cm_incoming_new(lis);
	if (!c)
		return; /* it comes again */
	c->tr = CM_TR_ROCE;
	memcpy(c->laddr, h.dst, 16);
	memcpy(c->raddr, h.src, 16);
	c->rport = h.sport;
	c->v6 = h.ipv6;
	memcpy(c->gsi_peer, f->src, 16);
	c->tos = f->tos & 0xFC; /* the DSCP: ECN bits are each sender's own (core_tos) */
	c->tid = m->tid;
	c->peer_comm_id = m->local_id;
	int d = cm_new_comm_id(&c->comm_id);
	if (d == 0)
		d = cm_incoming_device(c, CM_TR_ROCE);
	if (d < 0) {
		cm_count(CM_C_wrong_transport);
		if (d == -EPROTOTYPE && !said_wrong_tr && !getenv("SOFTRDMA_QUIET")) {
			said_wrong_tr = true;
			fprintf(stderr, "softrdma: rdma_cm: a RoCE connection request reached an "
					"iWARP listener: refused (both sides need the same "
					"SOFTRDMA_TRANSPORT)\n");
		}
		if (ud)
			send_sidr_rep(&tmp, CM_SIDR_UNSUPPORTED, 0, NULL, 0);
		else
			send_rej(&tmp, CM_MAD_MSG_REQ, CM_REJ_INVALID_SERVICE_ID, NULL, 0);
		cm_id_discard(c);
		return;
	}
	if (ud) {
		cm_count(CM_C_req_sidr);
		c->req_id = m->local_id;
		memcpy(c->peer_gid, f->src, 16);
		cm_incoming_request_ud(c, m->pd + CM_MAD_CMA_HDR_LEN, CM_SIDR_REQ_PD);
		return;
	}
	cm_count(CM_C_req_roce);
	peer_from(c, m, f);
	/* The requester's ECE (kernel cm_format_req_event): rdma_get_remote_ece's, and what
	 * rdma_accept agrees with (cm.h "ECE"). */
	c->remote_ece = (struct ibv_ece){.vendor_id = m->vendor_id, .options = m->attr_mod};
	/* rdma_accept's defaults (librdmacm ucma_process_conn_req): what the request says. */
	c->rr = m->init_depth;
	c->depth = m->resp_res;
	c->psn = cm_random_psn();
	struct rdma_conn_param p = conn_param_of(m);
	cm_incoming_request(c, &p, m->pd + CM_MAD_CMA_HDR_LEN, CM_REQ_PD);
}

struct sidr_key {
	uint32_t req_id;
};

static bool is_sidr_waiting(const struct cm_id *c, const void *arg)
{
	const struct sidr_key *k = arg;
	return c->tr == CM_TR_ROCE && cm_is_ud(c) && !c->passive && c->state == CM_CONNECTING &&
	       c->req_id == k->req_id;
}

/* A MAD for a comm ID this process does not have (any more): as the kernel CM (cm_issue_drep
 * for a DREQ, cm_issue_rej INVALID_COMM_ID for a REP), the rest dropped. */
static void unknown_in(const struct cm_mad *m, const struct gsi_frame *f)
{
	cm_count(CM_C_mad_unknown);
	struct cm_mad a;
	if ((m->attr != CM_ATTR_DREQ && m->attr != CM_ATTR_REP) || cm_mad_answer_nobody(m, &a))
		return;
	struct cm_id tmp;
	memset(&tmp, 0, sizeof(tmp));
	memcpy(tmp.laddr, f->dst, 16);
	memcpy(tmp.gsi_peer, f->src, 16);
	tmp.tos = f->tos & 0xFC;
	tmp.dev = cm_dev_for(f->dst, CM_TR_ROCE);
	if (!tmp.dev)
		return;
	if (a.attr == CM_ATTR_REJ)
		cm_count(CM_C_rejects_sent);
	send_mad(&tmp, &a, NULL);
}

void cm_roce_mad_in(struct cm_id *lis, const struct gsi_frame *f, uint64_t now)
{
	struct cm_mad m;
	if (cm_mad_parse(f->mad, CM_MAD_LEN, &m) != 0) {
		cm_count(CM_C_rx_bad_msg);
		return;
	}
	if (lis) {
		if (m.attr == CM_ATTR_REQ || m.attr == CM_ATTR_SIDR_REQ)
			request_in(lis, &m, f);
		else
			cm_count(CM_C_rx_unexpected);
		return;
	}
	if (m.attr == CM_ATTR_REQ || m.attr == CM_ATTR_SIDR_REQ) {
		cm_count(CM_C_rx_unexpected);
		return;
	}
	if (m.attr == CM_ATTR_SIDR_REP) {
		struct sidr_key k = {.req_id = m.local_id};
		struct cm_id *id = cm_find(is_sidr_waiting, &k);
		if (!id || memcmp(id->gsi_peer, f->src, 16) != 0) {
			/* A transport probe's answer (cm_probe.c); else, as the IB CM's
			 * cm_sidr_rep_handler, a reply matching no outstanding request is
			 * dropped. */
			if (!cm_probe_sidr_rep(m.local_id, f->src, m.sidr_status, now))
				cm_count(CM_C_sidr_unknown);
			return;
		}
		on_sidr_rep(id, &m, now);
		return;
	}
	struct cm_id *id = cm_find_comm(m.remote_id);
	if (!id || cm_is_ud(id)) {
		unknown_in(&m, f);
		return;
	}
	on_mad(id, &m, f, now);
}

void cm_roce_run(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	if (id->peer_check_at && id->state != CM_ESTABLISHED)
		id->peer_check_at = 0;
	if (id->peer_check_at && now >= id->peer_check_at) {
		if (!gsi_tag_alive((uint16_t)(id->peer_comm_id >> 16))) {
			/* As the DREQ the kernel's CM sends when a process ends. */
			id->peer_check_at = 0;
			id->state = CM_DISCONNECTED;
			cm_count(CM_C_peer_gone);
			cm_count(CM_C_disconnects);
			cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
			return;
		}
		id->peer_check_at = now + CM_PEER_CHECK_NS;
	}
	if (id->peer_check_at && id->peer_check_at < *wake)
		*wake = id->peer_check_at;
	if (id->deadline && now >= id->deadline) {
		if (id->state == CM_DISCONNECTING) {
			/* No DREP: disconnected anyway (IB CM DREQ timeout). */
			answered(id);
			id->deadline = 0;
			id->state = CM_DISCONNECTED;
			cm_count(CM_C_disconnects);
			cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
		} else {
			conn_lost(id, -ETIMEDOUT);
		}
		return;
	}
	if (id->mad_pending && now >= id->resend_at) {
		cm_count(CM_C_mad_resends);
		send_raw(id, id->mad);
		id->resend_step *= 2;
		if (id->resend_step > CM_RESEND_MAX_NS)
			id->resend_step = CM_RESEND_MAX_NS;
		id->resend_at = now + id->resend_step;
	}
	if (id->mad_pending && id->resend_at < *wake)
		*wake = id->resend_at;
	if (id->deadline && id->deadline < *wake)
		*wake = id->deadline;
}

int cm_roce_accept(struct cm_id *id, const struct rdma_conn_param *p)
{
	(void)p;
	if (cm_is_ud(id)) {
		/* cma_send_sidr_rep: our QPN and Q_Key; no connection, no event follows. */
		send_sidr_rep(id, CM_SIDR_SUCCESS, id->qpn, id->pd, id->pd_len);
		id->state = CM_ESTABLISHED;
		cm_count(CM_C_established);
		return 0;
	}
	if (id->state != CM_REQ_RCVD)
		return -EINVAL;
	/* ECE (cm.h "ECE"): selective repeat if the REQ offered softrdma's and so do we; the QP
	 * learns it before RTR (librdmacm: ibv_set_ece at rdma_create_qp, before rdma_accept's
	 * RTR). */
	cm_ece_offer(id);
	bool sr = cm_ece_sr(id);
	int r = cm_ece_apply(id, sr);
	if (r == 0)
		r = qp_to_rts(id);
	if (r < 0)
		return r;
	struct cm_mad m;
	mad_init(&m, CM_ATTR_REP, id->tid);
	/* The REP's ECE (kernel cm_format_rep): ours when agreed, else none (vendor 0, as a
	 * device without ECE answers: librdmacm then clears its options, rxe's peers ignore it). */
	m.vendor_id = sr ? SR_ECE_VENDOR_ID : 0;
	m.attr_mod = sr ? SR_ECE_OPTIONS : 0;
	m.local_id = id->comm_id;
	m.remote_id = id->peer_comm_id;
	m.qpn = id->qpn & 0xFFFFFF;
	m.psn = id->psn & 0xFFFFFF;
	m.resp_res = id->rr;
	m.init_depth = id->depth;
	m.target_ack_delay = REP_TARGET_ACK;
	m.rnr_retry = id->rnr & 7;
	m.srq = id->srq;
	m.ca_guid = sr_cm_node_guid(id->dev->ctx);
	fill_pd(m.pd, CM_MAD_REP_PD, id->pd, id->pd_len);
	uint64_t now = cm_now();
	r = send_request(id, &m, now);
	id->state = CM_ACCEPTING;
	id->deadline = now + cm_timeout_ns();
	cm_kick();
	return r < 0 && r != -EIO ? r : 0;
}

int cm_roce_reject(struct cm_id *id, const void *pd, uint8_t len, uint16_t reason)
{
	if (cm_is_ud(id)) {
		/* rdma_reject on a UD id: SIDR_REP with status 2 (cma_send_sidr_rep
		 * IB_SIDR_REJECT) and the private data, 136 bytes at most. */
		if (len > CM_SIDR_REP_PD)
			return -EINVAL;
		send_sidr_rep(id, CM_SIDR_REJECT, 0, pd, len);
		id->state = CM_CLOSED;
		return 0;
	}
	if (len > CM_REJ_PD)
		return -EINVAL;
	send_rej(id, CM_MAD_MSG_REQ, reason, pd, len);
	id->state = CM_CLOSED;
	answered(id);
	return 0;
}

int cm_roce_establish(struct cm_id *id)
{
	if (id->state != CM_REP_RCVD)
		return -EINVAL;
	send_simple(id, CM_ATTR_RTU, id->tid, id->reply);
	id->has_reply = true;
	id->state = CM_ESTABLISHED;
	watch_peer(id);
	cm_count(CM_C_established);
	return 0;
}

int cm_roce_disconnect(struct cm_id *id)
{
	switch (id->state) {
	case CM_ESTABLISHED:
	case CM_ACCEPTING:
	case CM_REP_RCVD: {
		cm_qp_to_err(id);
		struct cm_mad m;
		mad_init(&m, CM_ATTR_DREQ, new_tid(id->comm_id));
		m.local_id = id->comm_id;
		m.remote_id = id->peer_comm_id;
		m.qpn = id->peer_qpn & 0xFFFFFF;
		uint64_t now = cm_now();
		send_request(id, &m, now);
		id->state = CM_DISCONNECTING;
		id->deadline = now + cm_timeout_ns();
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
	if (!id->dev || id->tr != CM_TR_ROCE)
		return;
	switch (id->state) {
	case CM_ESTABLISHED:
	case CM_ACCEPTING:
	case CM_REP_RCVD: {
		/* IB CM: destroying a connected id sends a DREQ; the peer disconnects. */
		struct cm_mad m;
		mad_init(&m, CM_ATTR_DREQ, new_tid(id->comm_id));
		m.local_id = id->comm_id;
		m.remote_id = id->peer_comm_id;
		m.qpn = id->peer_qpn & 0xFFFFFF;
		send_mad(id, &m, NULL);
		break;
	}
	case CM_CONNECTING:
		/* IB CM cm_destroy_id in REQ_SENT: REJ "timeout". */
		if (!cm_is_ud(id) && id->comm_id)
			send_rej(id, CM_MAD_MSG_OTHER, 4 /* IB_CM_REJ_TIMEOUT */, NULL, 0);
		break;
	case CM_REQ_RCVD:
		/* IB CM cm_destroy_id in REQ_RCVD / SIDR_REQ_RCVD: rejected. */
		if (cm_is_ud(id))
			send_sidr_rep(id, CM_SIDR_REJECT, 0, NULL, 0);
		else
			send_rej(id, CM_MAD_MSG_REQ, CM_REJ_CONSUMER_DEFINED, NULL, 0);
		break;
	default:
		break;
	}
	answered(id);
}
