/* rdma_cm over iWARP (cm.h "iWARP"): the TCP connection to the listener's address and port
 * carries the MPA exchange (engine/iw_conn.h, run here on the CM thread), then becomes the
 * QP's FPDU stream (sr_cm_iw_adopt -> iwp_adopt_conn). What siw's rdma_cm does, on the wire
 * byte for byte (../shared/spec/iwarp.md section 2).
 *
 * Events, as Linux's cma_iw_handler makes them from siw's upcalls:
 *   CONNECT_REQUEST  the Request's private data (exact length); responder_resources = the
 *                    IRD we would need (min(peer ORD, max)), initiator_depth = the ORD we
 *                    may use (min(peer IRD, max))
 *   ESTABLISHED      active: the Reply's private data; both: initiator_depth = our final IRD,
 *                    responder_resources = our final ORD (cma_iw_handler's assignment)
 *   REJECTED         the peer's Reject (R bit): -ECONNRESET (siw) and its private data;
 *                    nobody listens: -ECONNREFUSED
 *   UNREACHABLE      no Reply within the timeout: -ETIMEDOUT
 *   CONNECT_ERROR    the peer closed / reset mid-handshake (-ECONNRESET), a malformed MPA
 *                    frame (-EPROTO), the QP could not take the stream
 *   DISCONNECTED     rdma_disconnect here (the QP goes to ERR, which closes the stream in
 *                    order), or the peer's close seen on a duplicate of the socket */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/iw_progress.h"
#include "engine/iw_eng.h"

static bool said_wrong_tr;

static uint16_t cap16(unsigned v, unsigned max)
{
	return (uint16_t)(v < max ? v : max);
}

static uint8_t cap8(unsigned v)
{
	return (uint8_t)(v < 255 ? v : 255);
}

/* One non-blocking step of the MPA exchange on the CM thread (core's iwp_hs_step): 1 when
 * the handshake needs the ULP or is established (stream bytes behind it in left[0..*nleft)),
 * 0 when it waits for id->ev, or the handshake's error. */
static int step(struct cm_id *id, uint64_t now, uint8_t *left, size_t *nleft)
{
	return iwp_hs_step(id->tcp, id->iw, now, left, nleft, &id->ev);
}

/* The handshake failed: what it still has to say (a Reject, a Terminate) goes out, then the
 * connection closes. */
static void finish_conn(struct cm_id *id)
{
	const uint8_t *d = NULL;
	size_t n = id->iw ? iw_conn_tx_peek(id->iw, &d) : 0;
	struct io_tcp_conn *tcp = id->tcp;
	id->tcp = NULL;
	/* cm_linger sends or copies the bytes (they live in id->iw) before the drop frees them. */
	if (tcp)
		cm_linger(tcp, d ? d : (const uint8_t *)"", n);
	cm_conn_drop(id, false);
}

static void note_wrong_transport(void)
{
	if (!said_wrong_tr && !getenv("SOFTRDMA_QUIET")) {
		said_wrong_tr = true;
		fprintf(stderr,
			"softrdma: rdma_cm: an iWARP (MPA) connection request reached a RoCE "
			"listener: rejected (both sides need the same SOFTRDMA_TRANSPORT)\n");
	}
}

static void set_access(struct cm_id *id)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT};
	int mask;
	if (id->id.qp && cm_iw_init_qp_attr(id, &a, &mask) == 0)
		ibv_modify_qp(id->id.qp, &a, mask);
}

/* The handshake is done: the QP takes the stream; the CM keeps a duplicate of the socket to
 * see the peer's close. */
static void establish(struct cm_id *id, const uint8_t *left, size_t nleft)
{
	struct iw_conn_info info;
	iw_conn_info(id->iw, &info);
	struct rdma_conn_param p = {.initiator_depth = cap8(info.ird),
				    .responder_resources = cap8(info.ord)};
	uint8_t pd[CM_PD_MAX];
	size_t pd_len = 0;
	if (!id->passive && info.peer_pd_len) {
		pd_len = info.peer_pd_len < sizeof(pd) ? info.peer_pd_len : sizeof(pd);
		memcpy(pd, info.peer_pd, pd_len);
	}
	int fd = fcntl(io_tcp_fd(id->tcp), F_DUPFD_CLOEXEC, 0);
	struct io_tcp_conn *tcp = id->tcp;
	id->tcp = NULL;
	int r = fd < 0 ? -errno : 0;
	struct ibv_qp *qp = id->id.qp ? id->id.qp : id->self_qp;
	if (r == 0 && qp) {
		if (!id->passive)
			set_access(id);
		r = sr_cm_iw_adopt(qp, tcp, id->iw, left, nleft);
	} else {
		io_tcp_abort(tcp);
		if (r == 0)
			r = -EINVAL;
	}
	cm_conn_drop(id, false);
	if (r < 0) {
		if (fd >= 0)
			close(fd);
		id->state = CM_CLOSED;
		cm_qp_to_err(id);
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_ERROR, r, NULL, NULL, 0);
		return;
	}
	id->watch_fd = fd;
	id->state = CM_ESTABLISHED;
	id->deadline = 0;
	cm_count(CM_C_established);
	cm_event_post(id, NULL, RDMA_CM_EVENT_ESTABLISHED, 0, &p, pd, pd_len);
}

/* The active handshake ended without a connection (err: step's error). */
static void active_failed(struct cm_id *id, int err)
{
	struct iw_conn_info info;
	iw_conn_info(id->iw, &info);
	if (iw_conn_state(id->iw) == IW_CONN_REJECTED) {
		/* The peer's Reject: siw reports -ECONNRESET, with the Reject's private data. */
		uint8_t pd[CM_PD_MAX];
		size_t n = info.peer_pd_len < sizeof(pd) ? info.peer_pd_len : sizeof(pd);
		if (n)
			memcpy(pd, info.peer_pd, n);
		cm_count(CM_C_rejects_rcvd);
		finish_conn(id);
		id->state = CM_CLOSED;
		cm_qp_to_err(id);
		cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, -ECONNRESET, NULL, pd, n);
		return;
	}
	enum rdma_cm_event_type type = RDMA_CM_EVENT_CONNECT_ERROR;
	int status = err;
	if (err == -ETIMEDOUT) {
		cm_count(CM_C_timeouts);
		type = RDMA_CM_EVENT_UNREACHABLE;
	} else if (err == -ECONNRESET || err == -ESHUTDOWN || err == -EPIPE) {
		cm_count(CM_C_lost);
		status = -ECONNRESET;
	} else {
		cm_count(CM_C_rx_mpa_failed);
		if (iw_is_err(err))
			status = -EPROTO;
	}
	finish_conn(id);
	id->state = CM_CLOSED;
	cm_event_post(id, NULL, type, status, NULL, NULL, 0);
}

/* A passive handshake ended without a connection after its CONNECT_REQUEST. */
static void passive_failed(struct cm_id *id, int err)
{
	if (err == -ETIMEDOUT)
		cm_count(CM_C_timeouts);
	else if (err == -ECONNRESET || err == -ESHUTDOWN || err == -EPIPE)
		cm_count(CM_C_lost);
	else
		cm_count(CM_C_rx_mpa_failed);
	finish_conn(id);
	id->state = CM_CLOSED;
	cm_qp_to_err(id);
	cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_ERROR,
		      iw_is_err(err) ? -EPROTO : (err == -ESHUTDOWN ? -ECONNRESET : err), NULL,
		      NULL, 0);
}

int cm_iw_start(struct cm_id *id, uint64_t now)
{
	struct iw_conn_cfg cfg = {.role = IW_CONN_INITIATOR,
				  .crc = (uint8_t)sr_cm_iw_crc(id->id.verbs),
				  .ird = cap16(id->rr, IW_MAX_IRD),
				  .ord = cap16(id->depth, IW_MAX_ORD),
				  .max_ird = IW_MAX_IRD,
				  .max_ord = IW_MAX_ORD,
				  .pd = id->pd,
				  .pd_len = id->pd_len,
				  .timeout_ns = cm_timeout_ns()};
	id->iw = calloc(1, sizeof(*id->iw));
	int r = id->iw ? iw_conn_init(id->iw, &cfg, now) : -ENOMEM;
	if (r < 0) {
		cm_conn_drop(id, true);
		id->state = CM_CLOSED;
		cm_event_post(id, NULL, RDMA_CM_EVENT_CONNECT_ERROR, r, NULL, NULL, 0);
		return r;
	}
	id->deadline = 0; /* the handshake has its own (iw_conn_deadline) */
	return 0;
}

static int crc_policy(void)
{
	int c = iwp_crc_policy(getenv(IWP_CRC_ENV));
	return c < 0 ? IW_CONN_CRC_PEER : c;
}

bool cm_iw_incoming(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	id->tr = CM_TR_IWARP;
	if (!id->iw) {
		struct iw_conn_cfg cfg = {.role = IW_CONN_RESPONDER,
					  .crc = (uint8_t)crc_policy(),
					  .max_ird = IW_MAX_IRD,
					  .max_ord = IW_MAX_ORD};
		id->iw = calloc(1, sizeof(*id->iw));
		if (!id->iw || iw_conn_init(id->iw, &cfg, now) < 0)
			return false;
		size_t used;
		iw_conn_input(id->iw, id->rx, id->rx_len, now, &used);
		id->rx_len = 0;
	}
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	int st = step(id, now, left, &nleft);
	if (st == 0) {
		uint64_t dl = iw_conn_deadline(id->iw);
		if (dl < *wake)
			*wake = dl;
		return true;
	}
	if (st < 0) {
		if (st == -ETIMEDOUT)
			cm_count(CM_C_timeouts);
		else if (st == -ECONNRESET || st == -ESHUTDOWN)
			cm_count(CM_C_lost);
		else if (iw_conn_state(id->iw) == IW_CONN_REJECTED)
			cm_count(CM_C_rejects_sent); /* the machine refused it (markers, ...) */
		else
			cm_count(CM_C_rx_mpa_failed);
		finish_conn(id);
		return false;
	}
	int d = cm_incoming_device(id, CM_TR_IWARP);
	if (d < 0) {
		cm_count(CM_C_wrong_transport);
		if (d == -EPROTOTYPE)
			note_wrong_transport();
		iw_conn_reject(id->iw, NULL, 0);
		finish_conn(id);
		return false;
	}
	cm_count(CM_C_req_iwarp);
	struct iw_conn_info info;
	iw_conn_info(id->iw, &info);
	/* rdma_accept's defaults: what the Request asks for (capped by the device). */
	id->rr = cap8(info.ird);
	id->depth = cap8(info.ord);
	id->peer_known = true;
	struct rdma_conn_param p = {.responder_resources = id->rr, .initiator_depth = id->depth};
	/* Until the application answers, only the peer's close matters. */
	id->ev = POLLRDHUP;
	cm_incoming_request(id, &p, info.peer_pd, info.peer_pd_len);
	return true;
}

void cm_iw_run(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	if (id->watch_fd >= 0) {
		struct pollfd pf = {.fd = id->watch_fd, .events = POLLRDHUP};
		if (poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			/* The peer closed the stream (its QP left it, or it died). */
			close(id->watch_fd);
			id->watch_fd = -1;
			if (id->state == CM_ESTABLISHED) {
				id->state = CM_DISCONNECTED;
				cm_count(CM_C_disconnects);
				cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL,
					      0);
			}
		}
		return;
	}
	if (!id->tcp || !id->iw)
		return;
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	int st;
	switch (id->state) {
	case CM_CONNECTING:
		st = step(id, now, left, &nleft);
		if (st < 0)
			active_failed(id, st);
		else if (st > 0)
			establish(id, left, nleft);
		break;
	case CM_REQ_RCVD: {
		/* The Request is in; any byte before our answer is the peer's error, the end of
		 * the stream its departure. */
		char b;
		ssize_t r = recv(io_tcp_fd(id->tcp), &b, 1, MSG_PEEK | MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			passive_failed(id, -ECONNRESET);
		else if (r > 0)
			passive_failed(id, -EPROTO); /* bytes before our Reply (siw: refused) */
		else
			id->ev = POLLRDHUP;
		return;
	}
	case CM_ACCEPTING:
		st = step(id, now, left, &nleft);
		if (st < 0)
			passive_failed(id, st);
		else if (st > 0)
			establish(id, left, nleft);
		break;
	default:
		return;
	}
	if (id->iw) {
		uint64_t dl = iw_conn_deadline(id->iw);
		if (dl < *wake)
			*wake = dl;
	}
}

int cm_iw_accept(struct cm_id *id, const struct rdma_conn_param *p)
{
	(void)p;
	if (!id->tcp || !id->iw)
		return -ECONNRESET;
	/* The QP gets the CM's access flags in INIT (librdmacm's INIT -> INIT), then the
	 * stream moves it to RTS with what MPA negotiated (as siw's QP goes to RTS before its
	 * Reply leaves). */
	set_access(id);
	uint64_t now = cm_now();
	int r = iw_conn_accept(id->iw, cap16(id->rr, IW_MAX_IRD), cap16(id->depth, IW_MAX_ORD),
			       id->pd, id->pd_len, now);
	if (r < 0)
		return r == -EMSGSIZE ? -EINVAL : r;
	id->state = CM_ACCEPTING;
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	int st = step(id, now, left, &nleft);
	if (st < 0)
		passive_failed(id, st);
	else if (st > 0)
		establish(id, left, nleft);
	else
		cm_kick();
	return 0;
}

int cm_iw_reject(struct cm_id *id, const void *pd, uint8_t len)
{
	if (len > CM_IW_PD_MAX)
		return -EINVAL;
	if (id->tcp && id->iw) {
		int r = iw_conn_reject(id->iw, pd, len);
		if (r < 0)
			return r == -EMSGSIZE ? -EINVAL : r;
		cm_count(CM_C_rejects_sent);
		finish_conn(id);
	}
	id->state = CM_CLOSED;
	return 0;
}

int cm_iw_disconnect(struct cm_id *id)
{
	switch (id->state) {
	case CM_ESTABLISHED:
		/* librdmacm moves an iWARP QP to SQD and the kernel closes the connection; here
		 * ERR does both: the QP leaves the stream with an orderly close (FIN). */
		cm_qp_to_err(id);
		if (id->watch_fd >= 0) {
			close(id->watch_fd);
			id->watch_fd = -1;
			cm_kick(); /* the thread's poll lets go of the socket */
		}
		id->state = CM_DISCONNECTED;
		cm_count(CM_C_disconnects);
		cm_event_post(id, NULL, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
		return 0;
	case CM_DISCONNECTED:
		cm_qp_to_err(id);
		return 0;
	default:
		return -EINVAL;
	}
}

void cm_iw_destroy(struct cm_id *id)
{
	if (id->state == CM_REQ_RCVD && id->tcp && id->iw) {
		iw_conn_reject(id->iw, NULL, 0);
		finish_conn(id);
	}
}

int cm_iw_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;
	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	if (want == IBV_QPS_RTS) {
		/* iw_cm_init_qp_attr: the state alone; the CM connects the QP. */
		*mask = IBV_QP_STATE;
		return 0;
	}
	if (want != IBV_QPS_INIT && want != IBV_QPS_RTR)
		return -EINVAL;
	a->port_num = id->id.port_num ? id->id.port_num : 1;
	/* iwcm_init_qp_init_attr: REMOTE_WRITE | REMOTE_READ once the connection is known. */
	if (id->peer_known || id->state == CM_CONNECTING || id->state >= CM_REQ_RCVD)
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	*mask = want == IBV_QPS_RTR
		    ? IBV_QP_STATE | IBV_QP_ACCESS_FLAGS
		    : IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	return 0;
}
