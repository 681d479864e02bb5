/* softrdma's rdma_cm: librdmacm's API (sr_rdma.h) over softrdma's own devices, so that
 * unmodified rdma_cm programs (rping, ucmatose, rdma_server / rdma_client, perftest -R) run
 * over RoCEv2 and iWARP.
 *
 * ---- Model ----
 * As librdmacm + the kernel's rdma_cm together: event channels (a pollable fd), ids, the
 * connection protocols and the QP transitions librdmacm drives (verbs-abi.md 6.5) all live in
 * this process. One background thread per process ("the CM thread", started at the first
 * listen or connect) runs every connection's protocol on non-blocking sockets (io/tcp.h) and
 * its timers; application calls change state under the same lock and wake it. Every wait for
 * the network has a deadline (cm_timeout_ns: SOFTRDMA_CM_TIMEOUT ms, default 10000), so every
 * operation ends in an event in bounded time; calls that block (rdma_get_cm_event on a
 * blocking fd, the synchronous ids of rdma_create_ep / channel NULL) wait for such an event.
 *
 * ---- Devices ----
 * rdma_bind_addr / rdma_resolve_addr pick the device whose GID table holds the local address
 * (127.0.0.1 -> roce_lo or iwarp_lo). A wildcard listener (0.0.0.0, ::) has no device: each
 * incoming connection gets the device of its local address and of the protocol the peer
 * speaks. A loopback address no device has (lo down, 127.0.0.2) binds like a wildcard, as the
 * kernel binds every loopback address (cma_any_addr: libfabric's verbs provider binds
 * "localhost" and expects no device); 127.0.0.1 with lo up is roce_lo's / iwarp_lo's. The
 * wildcard as a destination resolves to the bound address or loopback (cma_resolve_loopback).
 * id->verbs is one ibv_context per device and process, opened at the first need and
 * shared (rdma_get_devices returns them); each has a default PD (id->pd).
 *
 * ---- Which transport (an address with both a RoCEv2 and an iWARP device) ----
 * 1. SOFTRDMA_TRANSPORT=roce|iwarp (`softrdma run --transport`) decides, both sides.
 * 2. Else the device the program opened itself with ibv_open_device (perftest -d iwarp_lo
 *    does before it uses rdma_cm), if those holding the address are of one transport.
 * 3. Else the peer: a listener takes both (id->verbs: RoCE's device until a request comes);
 *    an active RC id asks the peer at rdma_resolve_addr (cm_probe.c: a SIDR_REQ the peer's IB
 *    CM answers, and a TCP connection closed once accepted) and ADDR_RESOLVED comes with the
 *    device of the answer: RoCE if the peer's RoCE CM has the listener (both: RoCE), iWARP if
 *    only TCP answers. The decision is made there, not at rdma_connect, because id->verbs
 *    and the QP the program makes on it must already be of that transport. UD and XRC ids
 *    are RoCE's (iWARP has neither).
 * A listener settled on one transport (1, 2) refuses the other's requests as a peer without
 * it would (REJ 8 / SIDR status 1 / the TCP connection closed), so that asking peers find the
 * one it speaks.
 *
 * ---- iWARP (iwarp_<if>): exactly what iWARP rdma_cm does ----
 * The connection is a TCP connection to the listener's address and port, carrying the MPA
 * exchange (engine/iw_conn.h: revision 2 with the RFC 6581 IRD/ORD block, the application's
 * private data after it, CRC per SOFTRDMA_IW_CRC), then the QP's FPDU stream: the CM hands the
 * socket to the QP (iwp_adopt_conn). Byte-compatible with Linux siw's rdma_cm (iwarp.md 2).
 * CONNECT_REQUEST carries the peer's private data (exact length) and responder_resources /
 * initiator_depth from the IRD/ORD block; rdma_accept sends the Reply and moves the QP to RTS;
 * rdma_reject sends a Reject (R bit) with the private data. Once the QP owns the socket the CM
 * watches a duplicate of it for the peer's close (DISCONNECTED). Self-managed QPs (created
 * with ibv_create_qp, conn_param->qp_num: rping -q) are handed the stream as siw's iw_cm does:
 * rdma_connect / rdma_accept claim the QP of that number (sr_cm_iw_claim), rdma_init_qp_attr
 * gives iw_cm's masks (RTR: the access flags; RTS: the state), a QP stepped to RTR without an
 * address vector is not auto-connected, and once connected its owner's INIT / RTR / RTS steps
 * change nothing but the access flags (siw); rdma_establish then returns 0.
 *
 * ---- RoCEv2 (roce_<if>): the IB CM's MADs on QP1, as the kernel's rdma_cm ----
 * REQ / REP / RTU / REJ / DREQ / DREP / MRA and SIDR_REQ / SIDR_REP (wire/roce/cm_mad.h) with
 * rdma_cm's IP private-data header, as UD SEND ONLYs to QP1 at the peer's address, so a kernel
 * rdma_cm peer (rxe, a RoCE NIC) is a peer like another softrdma process (cm_roce.c; the values
 * rxe's rdma_cm puts in its REQ / REP are copied, and the PSN rule is Linux's: each side sends
 * from the Starting PSN the other announced). Each softrdma process has its own CM: core/gsi.h
 * routes the MADs that reach the host's QP1 to the listener of their service ID or to the
 * process whose comm ID they name (unix sockets in the user's run directory), and answers those for
 * nobody as the kernel's CM does (REJ 8, SIDR status 1, DREP). A RoCE listener takes its service
 * ID's endpoint (another process on the same port space and port: EADDRINUSE) and starts QP1 on its
 * device (all RoCE devices for a wildcard). Requests are sent again until answered (cm_roce.c),
 * duplicates answered again. Events, statuses, private-data lengths (REQ 56, REP 196, REJ 148,
 * zero padded) and the QP transitions are those of rdma_cm on a kernel RoCE device: INIT at
 * rdma_create_qp; active: REP -> INIT(access) -> RTR -> RTS -> RTU -> ESTABLISHED; passive:
 * rdma_accept -> INIT -> RTR -> RTS -> REP, ESTABLISHED on RTU. A peer process that dies leaves
 * no CM behind to send the DREQ the kernel's would: a connection to a process on this host
 * watches the peer's comm-ID endpoint (gsi_tag_alive, every CM_PEER_CHECK_NS) and reports
 * DISCONNECTED when it is gone; during a handshake, the router answers for the dead process
 * (REJ 6 for a REP, DREP for a DREQ). A remote peer's end shows only through its QP.
 *
 * ---- Errors on the wire ----
 * Nobody listens: REJECTED after CM_REFUSED_RETRY_NS of retries (iWARP status -ECONNREFUSED;
 * RoCE status 8, IB_CM_REJ_INVALID_SERVICE_ID with 148 zero bytes,
 * below). The peer rejects: REJECTED with its private data (iWARP -ECONNRESET as siw;
 * RoCE 28, consumer defined). No answer within the timeout: UNREACHABLE -ETIMEDOUT. iWARP: the
 * peer goes away mid-handshake (reset / close): CONNECT_ERROR -ECONNRESET (Linux's siw
 * reports a peer close during MPA as REJECTED; softrdma keeps REJECTED for real rejects);
 * bytes that are not MPA: the connection is closed and counted. RoCE: a MAD that does not
 * parse, or is not valid in the id's state, is dropped and counted (cm_counter; printed by
 * rdma_destroy_event_channel with SOFTRDMA_STATS), never more.
 * SOFTRDMA_CM_DEBUG prints every event as it is queued.
 *
 * ---- Sockets and the thread's poll ----
 * A socket closed by an application thread stays alive while the CM thread's poll() holds
 * it; the thread is woken at every such close, and rdma_destroy_id of a listener waits until
 * it has let go, so that the port can be bound again at once (perftest -R re-listens on it).
 *
 * ---- UD ids (RDMA_PS_UDP, RDMA_PS_IPOIB: udaddy): SIDR, RoCEv2 only ----
 * As the kernel's rdma_cm (cma_resolve_ib_udp, cma_sidr_rep_handler, cma_send_sidr_rep) over
 * the IB CM's SIDR exchange (IBTA 12.11): SIDR_REQ / SIDR_REP MADs like the others, the
 * request's ID one of the process's comm IDs (the reply is routed to it). The id's qp_type is
 * IBV_QPT_UD; rdma_create_qp takes the UD QP to INIT (Q_Key RDMA_UDP_QKEY, 0x01234567, for both
 * port spaces: on RoCE there is no IPoIB broadcast group whose Q_Key PS_IPOIB would take), RTR and
 * RTS (SQ PSN 0), as librdmacm's ucma_init_ud_qp. active   rdma_connect sends SIDR_REQ (private
 * data up to 180 bytes) and gets ESTABLISHED with param.ud: ah_attr (GRH: dgid the peer's address,
 * sgid_index ours, hop limit 64, traffic class = TOS; dlid 0, port 1), the peer's qp_num and qkey,
 * and the reply's 136 bytes of private data. A non-zero SIDR status is UNREACHABLE with that status
 * (1 nobody listens / wrong port space, 2 rdma_reject) and the 136 bytes; no answer: UNREACHABLE
 * -ETIMEDOUT (garbage is dropped). A reply whose Q_Key is not the QP's: ADDR_ERROR -EINVAL
 * (cma_set_qkey). passive  CONNECT_REQUEST with param.ud holding only the private data (180 bytes):
 * a SIDR_REQ carries neither the requester's QPN nor its Q_Key (the kernel leaves ah_attr, qp_num,
 * qkey 0 too); the server learns them from the first datagram (udaddy: ibv_create_ah_from_wc, the
 * immediate data). rdma_accept sends SIDR_REP (status 0, its QPN, the Q_Key, up to 136 bytes) and
 * reports nothing more: no ESTABLISHED on the passive side, as in the kernel. rdma_reject:
 * status 2. both     rdma_disconnect moves the QP to ERR (librdmacm ucma_shutdown) and reports no
 *            event: there is no connection to tear down.
 * iWARP has no UD: rdma_create_id and the resolves work as with siw, rdma_create_qp(UD) fails
 * with EOPNOTSUPP (siw_create_qp: RC only), rdma_connect with EINVAL (iw_cm_connect finds no
 * QP of that number). A PS_UDP listener still takes the TCP port of its number (every
 * listener does, for iWARP's connections), so it cannot share a port with a PS_TCP listener
 * (the kernel's port spaces are separate); a request of the other kind finds no listener of
 * its service ID (REJ 8 / SIDR status 1).
 *
 * ---- Multicast (UD ids, RoCEv2): cm_mcast.c ----
 * As the kernel's rdma_cm on a RoCE device (cma_iboe_join_multicast: no SA, the MGID from the
 * IP address, the join local) with librdmacm's part (rdma_join_multicast2, ucma_process_join,
 * rdma_leave_multicast): rdma_join_multicast / _ex (join flags FULLMEMBER, SENDONLY_FULLMEMBER)
 * on a UD id bound to a device (BOUND or ADDR_RESOLVED) queue RDMA_CM_EVENT_MULTICAST_JOIN at
 * once, param.ud: ah_attr is_global, dgid the MGID (::ffff:a.b.c.d, or the IPv6 address), sgid
 * the id's address, hop limit 64, traffic class 0, dlid 0 (no LIDs on RoCE: the kernel's
 * RoCE AH has none), qp_num 0xFFFFFF, qkey RDMA_UDP_QKEY, private_data the join's context.
 * When the application takes the event (rdma_get_cm_event) the id's QP is attached
 * (ibv_attach_mcast, which joins the IP group on the device's interface, io/mcast.h) unless
 * the join is send-only; a refused attach turns the event into MULTICAST_ERROR (status -1,
 * errno set), as librdmacm does. rdma_leave_multicast detaches the QP, drops the group's
 * events not yet taken, waits for those taken to be acknowledged, and forgets the group
 * (another address: EADDRNOTAVAIL). rdma_destroy_id forgets them all (the QP stays attached
 * until it is detached or destroyed, as with the kernel's verbs). Beyond the kernel, which
 * answers ENOTSUPP for IPv6 groups on RoCEv2, IPv6 groups work as IPv4 ones. iWARP ids:
 * ENOSYS, as the kernel's rdma_cm on siw (no multicast).
 *
 * ---- ECE (RoCE RC): selective repeat between softrdma peers (cm_ece.c, wire/roce/ece.h) ----
 * As the kernel's IB CM and librdmacm carry ECE: the REQ and the REP hold a vendor ID and an
 * options word (wire/roce/cm_mad.h, where Linux's ib_cm puts them).
 * - Active: the REQ carries the id's local ECE: rdma_set_local_ece's if the application set
 *   one, else its QP's (ibv_query_ece; zeros for a self-managed QP or a QP without ECE).
 * - Passive: the REQ's ECE is the remote one (rdma_get_remote_ece). rdma_accept agrees on
 *   selective repeat only if it is softrdma's SR ECE and the id offers it too; the id's QP gets
 *   ibv_set_ece (SR on, else off) before RTR, and the REP carries the SR ECE, or vendor 0 /
 *   options 0 (as the REP of a device without ECE, rxe's; librdmacm then clears its options).
 * - Active, on the REP: SR only if the REQ offered it and the REP carries the SR ECE; anything
 *   else (rxe's zeros, a foreign vendor, a garbled value) leaves go-back-N. The QP gets
 *   ibv_set_ece before RTR.
 * - A self-managed QP is the application's: it passes rdma_get_remote_ece to ibv_set_ece
 *   itself (pyverbs' external-QP tests do).
 * Unlike librdmacm, whose rdma_create_qp replaces a local ECE set before it by the QP's, the
 * application's rdma_set_local_ece stays what the id offers. iWARP's MPA has no such field:
 * the remote ECE reads as zeros.
 *
 * ---- Not here ----
 * rsockets: the shim (abi/rdmacm.c) fails rsockets with ENOSYS. SIDR to a
 * PS_IB listener (the kernel's PS_IB takes both kinds). XRC ids (RoCE: cm_qp.c) are connected
 * as RC ones with the REQ's transport XRC (ext. type 1), as the kernel's CM sends it.
 *
 * Lock order: the CM lock, then a context's core lock (verbs calls); never the reverse. */
#ifndef SOFTRDMA_CM_H
#define SOFTRDMA_CM_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cm/cm_msg.h"
#include "core/gsi.h"
#include "cm/sr_rdma.h"
#include "engine/iw_conn.h"
#include "io/tcp.h"

/* libsoftrdma also answers to librdmacm's names (sr_rdma.h, "Who exports what"). */
#define CM_ALIAS(name)                                                                             \
	extern __typeof__(sr_rdma_##name) rdma_##name __attribute__((alias("sr_rdma_" #name)))

#define CM_TIMEOUT_ENV	 "SOFTRDMA_CM_TIMEOUT"
#define CM_TRANSPORT_ENV "SOFTRDMA_TRANSPORT"
#define CM_DEBUG_ENV	 "SOFTRDMA_CM_DEBUG" /* set: every event is printed (stderr) */
#define CM_MAX_DEV	 32
#define CM_PD_MAX	 256				     /* rdma_cm's RDMA_MAX_PRIVATE_DATA */
#define CM_IW_PD_MAX	 (IW_MPA_PD_MAX_SIW - IW_MPA_V2_LEN) /* 252: what siw accepts */
#define CM_REQ_WAIT_NS	 5000000000ull /* an accepted connection sends its request within */
#define CM_LINGER_NS	 2000000000ull /* last bytes (REJ, Reject, DREP) get this long */
/* A connection refused because nobody listens (RoCE: REJ 8 / SIDR status 1; iWARP: the TCP
 * connection refused) is tried again for this long before it counts as REJECTED / UNREACHABLE,
 * every CM_REFUSED_STEP_NS. A kernel CM resolves the address and route asynchronously before
 * its request leaves, which gives a server that re-listens on its port (perftest -R does so
 * between its two connections) the time to do so; softrdma resolves at once. perftest 4.5's
 * own retry after a refusal uses the ids it destroyed (cm.h "The application's handles"): it
 * cannot connect, against a siw server either, unless the first try finds the listener. */
#define CM_REFUSED_RETRY_NS 250000000ull
#define CM_REFUSED_STEP_NS  10000000ull

/* The states of an id: X(name, description). */
#define CM_STATES(X)                                                                               \
	X(IDLE, "created")                                                                         \
	X(BOUND, "address bound")                                                                  \
	X(RESOLVING, "active: asking the peer which transport it speaks (cm_probe.c)")             \
	X(ADDR_RESOLVED, "address resolved")                                                       \
	X(ROUTE_RESOLVED, "route resolved")                                                        \
	X(LISTEN, "listening")                                                                     \
	X(CONNECTING, "active: connecting, request sent, waiting for the answer")                  \
	X(REP_RCVD, "active, self-managed QP: CONNECT_RESPONSE out, rdma_establish sends RTU")     \
	X(INCOMING, "passive: connection accepted, waiting for the request (not yet visible)")     \
	X(REQ_RCVD, "passive: CONNECT_REQUEST out, waiting for rdma_accept / rdma_reject")         \
	X(ACCEPTING, "passive: accepted, waiting for the RTU / sending the MPA Reply")             \
	X(ESTABLISHED, "connected")                                                                \
	X(DISCONNECTING, "RoCE: DREQ sent, waiting for the DREP")                                  \
	X(DISCONNECTED, "DISCONNECTED reported")                                                   \
	X(CLOSED, "ended without a connection (rejected, failed); the event is out")

/* clang-format off */
enum cm_state {
#define CM_STATE_ENUM(name, desc) CM_##name,
	CM_STATES(CM_STATE_ENUM)
#undef CM_STATE_ENUM
	CM__NSTATES
};
/* clang-format on */
const char *cm_state_name(int s);

enum cm_transport { CM_TR_NONE = 0, CM_TR_ROCE, CM_TR_IWARP };

/* Counters (process-wide), X(name, description). */
#define CM_COUNTERS(X)                                                                             \
	X(accepted, "TCP connections accepted by listeners")                                       \
	X(req_roce, "RoCE connection requests received")                                           \
	X(req_iwarp, "iWARP MPA Requests received")                                                \
	X(established, "connections established")                                                  \
	X(rejects_sent, "rejects sent (rdma_reject, or the protocol)")                             \
	X(rejects_rcvd, "rejects received")                                                        \
	X(refused, "connects refused: nobody listens")                                             \
	X(refused_retries, "connects tried again after a refusal (CM_REFUSED_RETRY_NS)")           \
	X(timeouts, "handshakes that timed out")                                                   \
	X(lost, "connections the peer closed or reset before they were up")                        \
	X(rx_garbage, "connections closed: bytes neither MPA nor the RoCE CM protocol")            \
	X(rx_bad_version, "connections closed: RoCE CM message of another version")                \
	X(rx_bad_msg, "connections closed: unknown type, wrong length, field out of range")        \
	X(rx_unexpected, "connections closed: a message not valid in the connection's state")      \
	X(rx_mpa_failed, "connections closed: the MPA exchange failed (protocol error)")           \
	X(wrong_transport, "requests closed: iWARP to a RoCE listener or the reverse")             \
	X(req_sidr, "RoCE SIDR requests received (UD ids)")                                        \
	X(wrong_port_space, "requests refused: RC to a UD listener or SIDR to an RC one")          \
	X(sidr_unknown, "SIDR replies dropped: not for the request outstanding")                   \
	X(backlog_full, "times a listener stopped accepting: backlog of pending requests full")    \
	X(disconnects, "connections disconnected")                                                 \
	X(mad_resends, "RoCE CM MADs sent again: no answer yet (REQ, REP, DREQ, SIDR_REQ)")        \
	X(mad_dups, "RoCE CM MADs received twice: answered again or ignored")                      \
	X(mad_unknown, "RoCE CM MADs for a connection this process does not have")                 \
	X(rx_forged, "RoCE CM MADs dropped: not the peer's comm ID, or a DREQ not for our QP")     \
	X(mad_bad_frames, "frames dropped on the CM endpoints: bad sender, magic, length")         \
	X(mad_send_errors, "RoCE CM MADs that could not be sent (QP1 socket)")                     \
	X(peer_gone, "RoCE connections whose peer process on this host ended: DISCONNECTED")       \
	X(probes, "rdma_resolve_addr: peers asked which transport they speak (cm_probe.c)")        \
	X(probe_roce, "probes answered by a RoCE listener (SIDR_REP status other than 1)")         \
	X(probe_iwarp, "probes answered by TCP only: iWARP")                                       \
	X(probe_default, "probes answered by neither in time: RoCE, the default")                  \
	X(probe_conns, "TCP connections closed before their first byte (a peer's probe)")

/* clang-format off */
enum cm_counter {
#define CM_COUNTER_ENUM(name, desc) CM_C_##name,
	CM_COUNTERS(CM_COUNTER_ENUM)
#undef CM_COUNTER_ENUM
	CM_C__COUNT
};
/* clang-format on */
extern const char *const cm_counter_names[CM_C__COUNT];
/* The value of counter `name` (without prefix), or 0 for an unknown name. Any thread. */
uint64_t cm_counter(const char *name);
/* Calls fn for every counter. Any thread. */
void cm_each_counter(void (*fn)(void *arg, const char *name, uint64_t value), void *arg);

/* One device as rdma_cm sees it. */
struct cm_dev {
	struct ibv_device *ibdev;
	struct ibv_context *ctx; /* opened once, never closed */
	struct ibv_pd *pd;	 /* the default PD, at the first need */
	struct ibv_xrcd *xrcd;	 /* RoCE: librdmacm's per-device XRC domain, at the first need */
	bool iwarp;
	struct ibv_device_attr attr;
	enum ibv_mtu mtu; /* the port's active MTU */
	int ngid;
	uint8_t gid[16][16];
};

struct cm_mc;

struct cm_event {
	struct rdma_cm_event ev; /* first: the application's pointer */
	struct cm_id *owner;	 /* whose ack count it is (the listener for CONNECT_REQUEST) */
	struct cm_mc *mc;	 /* MULTICAST_JOIN / _ERROR: the group it is about (cm_mcast.c) */
	struct cm_channel *ch;	 /* queued on, until retrieved */
	bool retrieved;
	struct cm_event *out_next; /* retrieved, not yet acked (the process's list) */
	uint8_t pd[CM_PD_MAX];
	struct cm_event *next;
};

struct cm_channel {
	struct rdma_event_channel ch; /* first; ch.fd: read end of a socketpair, a byte per event */
	int wfd;
	struct cm_event *head, *tail; /* not yet retrieved */
	/* Threads inside rdma_get_cm_event. A channel destroyed under a blocked reader stays
	 * open and allocated for it (as the kernel's file stays referenced by a blocked read):
	 * the reader keeps waiting instead of failing (Debian's rping destroys its channel while
	 * its CM thread waits in rdma_get_cm_event, then exits). */
	int readers;
	bool dead;
	/* The thread that last took an event from here. When another thread destroys the
	 * channel, this one may be on its way back into rdma_get_cm_event (rping's CM thread
	 * after its DISCONNECTED): it then waits there as if it had entered first (cm.c). */
	pthread_t reader;
	bool has_reader;
	struct cm_channel *next;
};

/* Bytes still to go out on a connection whose id is gone or finished (a REJ, a Reject, a
 * DREP), then the close. */
struct cm_linger {
	struct io_tcp_conn *tcp;
	uint8_t buf[1024]; /* an MPA frame (532) or three RoCE CM messages (708) */
	size_t len, off;
	uint64_t deadline;
	struct cm_linger *next;
};

struct cm_id {
	struct rdma_cm_id id;  /* first: the application's pointer */
	struct cm_channel *ch; /* NULL once the channel is destroyed (events are dropped) */
	bool sync;	       /* created without a channel: ch is the id's own */
	bool destroying;
	uint8_t state; /* enum cm_state */
	uint8_t tr;    /* enum cm_transport */
	uint32_t ev_reported, ev_acked;
	struct cm_dev *dev;
	struct cm_id *listener; /* passive: until its CONNECT_REQUEST is out */

	/* addresses: 16 bytes (IPv4-mapped), ports in host order */
	bool v6;
	bool bound_any;
	bool bound_app; /* the application bound the id (rdma_bind_addr, resolve's src_addr) */
	/* Its address has both transports and nothing chose one ("Which transport"): a listener
	 * takes both, an active id asks the peer at rdma_resolve_addr (id->dev: RoCE meanwhile). */
	bool tr_open;
	struct cm_probe *probe; /* CM_RESOLVING: the question to the peer (cm_probe.c) */
	/* A TCP socket bound (not listening) to the port rdma_bind_addr chose for port 0, as the
	 * kernel's rdma_cm picks one at bind (qperf sends it to its client before listening),
	 * held until rdma_listen / rdma_connect take the port over; or -1. */
	int resv_fd;
	uint8_t laddr[16], raddr[16];
	uint16_t lport, rport;

	/* rdma_set_option */
	uint8_t tos, ack_timeout;
	bool tos_set, ack_timeout_set;
	int reuseaddr, afonly;

	/* listener */
	struct io_tcp_listener *lis[2];
	int nlis, backlog, pending;
	bool backlog_noted;

	/* the connection */
	struct io_tcp_conn *tcp;
	bool tcp_connecting;
	short ev;			  /* poll events the connection waits for */
	uint64_t deadline;		  /* of the current wait, or 0 */
	uint64_t retry_at, refused_until; /* active RoCE: refused connects tried again */
	uint8_t rx[4];			  /* an incoming connection's first bytes ("MPA ") */
	size_t rx_len;
	struct iw_conn *iw; /* iWARP handshake */
	int watch_fd;	    /* iWARP after adoption: a duplicate of the socket (peer close) */

	/* connection parameters: ours (what we sent) and the peer's (what it sent) */
	uint32_t qpn, psn;
	uint8_t rr, depth, retry, rnr;
	bool srq;
	uint8_t pd[CM_PD_MAX];
	uint8_t pd_len;
	uint32_t req_id; /* UD (SIDR): active ours, passive the requester's */
	uint32_t peer_qpn, peer_psn;
	uint8_t peer_gid[16];
	uint8_t peer_rr, peer_depth, peer_retry, peer_rnr, mtu;
	bool peer_known;     /* peer parameters valid (REQ / REP seen) */
	bool passive;	     /* the id of an incoming connection */
	uint8_t *connect_pd; /* rdma_create_ep's ai_connect, prepended to the connect data */
	uint8_t connect_len;
	struct ibv_qp_init_attr *ep_attr; /* rdma_create_ep (passive): QPs of get_request */
	struct ibv_sa_path_rec *path;
	struct ibv_qp *self_qp; /* iWARP: the application's QP of conn_param->qp_num */
	/* ECE ("ECE"): rdma_set_local_ece's value (if local_ece_set), and what the peer's REQ /
	 * REP carried (zeros until then, and for a peer without ECE). */
	struct ibv_ece local_ece, remote_ece;
	bool local_ece_set;

	/* RoCE: the IB CM's MADs on QP1 (core/gsi.h) */
	uint32_t comm_id, peer_comm_id; /* Local / Remote Communication ID */
	uint64_t tid;			/* the handshake's TransactionID */
	uint8_t gsi_peer[16];		/* where the peer's QP1 is (IPv4-mapped) */
	uint8_t mad[CM_MAD_LEN];	/* the request outstanding (REQ, REP, DREQ, SIDR_REQ) */
	bool mad_pending;		/* mad is sent again at resend_at until answered */
	uint64_t resend_at, resend_step;
	uint8_t reply[CM_MAD_LEN]; /* the last answer (RTU, SIDR_REP): sent again on duplicates */
	bool has_reply;
	int sid_fd;		/* listener: its service ID's endpoint (gsi_ep_open_sid), or -1 */
	uint64_t peer_check_at; /* connected to a process on this host: when to see it lives */

	struct cm_mc *mcs; /* multicast groups joined (cm_mcast.c) */

	struct cm_id *next;
};

/* ---- cm.c: the core (global lock, thread, events, devices) ---- */

/* The application's handles. librdmacm trusts the pointers it is given; here every call looks
 * its id, channel or event up among the live ones first, by address (a stale or garbage
 * pointer is never dereferenced), and fails on one it does not find: an id destroyed, being
 * destroyed or never created: ENOENT (the kernel's ucma for a handle it no longer has); a
 * destroyed channel: EBADF (its fd is closed); an event not handed out or acked already:
 * EINVAL. perftest 4.5 retries a failed rdma_cm connection on ids it destroyed, read from an
 * array it freed. Freed ids and channels are kept, zeroed, for the next CM_QUARANTINE frees
 * before their memory goes back to malloc, so that a stale pointer does not soon name a new
 * id at the same address. */
#define CM_QUARANTINE 32
/* Destroyed channels whose event thread is remembered (cm.c, rdma_get_cm_event). */
#define CM_LEFT_MAX 8
/* The live id at rid, or NULL. Under the lock. */
struct cm_id *cm_id_live(const struct rdma_cm_id *rid);
/* Takes the lock and finds the live id at rid: NULL, the lock released and errno set (EINVAL
 * for NULL, ENOENT for no live id), if there is none. */
struct cm_id *cm_id_lock(struct rdma_cm_id *rid);
/* The same, taking the lock: 0, -EINVAL for NULL, -ENOENT for no live id. */
int cm_id_check(const struct rdma_cm_id *rid);

/* The lock and condition every CM object lives under. */
void cm_lock(void);
void cm_unlock(void);
/* Wakes the CM thread (under the lock); starts it if needed. 0 or a negative errno. */
int cm_kick(void);
uint64_t cm_timeout_ns(void);
/* CLOCK_MONOTONIC in ns. */
uint64_t cm_now(void);
/* 24 random bits: a starting PSN. Under the lock. */
uint32_t cm_random_psn(void);
/* The TCP connection of an active id failed (e: io_tcp_connect_done's error): REJECTED when
 * refused, else UNREACHABLE. Under the lock. */
void cm_connect_failed(struct cm_id *id, int e);
/* A new synchronous id (rdma_create_ep). */
struct cm_id *cm_id_new_sync(void *context, enum rdma_port_space ps);

/* Queues an event for owner's channel (under the lock). evid: event->id (NULL: owner); pd /
 * pd_len: private data copied into the event. param: responder_resources / initiator_depth /
 * ... (private_data fields ignored; NULL: zeros). Counts against owner's ack count. */
void cm_event_post(struct cm_id *owner, struct cm_id *evid, enum rdma_cm_event_type type,
		   int status, const struct rdma_conn_param *param, const void *pd, size_t pd_len);

/* The same for the events of UD ids, whose parameters are param.ud (ud NULL: zeros). Returns
 * the event queued, or NULL (no channel, the owner is being destroyed, no memory). */
struct cm_event *cm_event_post_ud(struct cm_id *owner, struct cm_id *evid,
				  enum rdma_cm_event_type type, int status,
				  const struct rdma_ud_param *ud, const void *pd, size_t pd_len);
/* Drops the id's events not yet retrieved (its own and those naming it; with mc, only that
 * group's) from its channel. Under the lock. */
void cm_purge_events(struct cm_id *id, const struct cm_mc *mc);
/* Waits on the CM's condition (signalled at every acknowledgement), under the lock. */
void cm_wait(void);
/* librdmacm ucma_complete: a synchronous id (no channel of the application's) retrieves its
 * next event and returns -1 with errno from a failure status; 0 otherwise and for other ids.
 * Under no lock. */
int cm_sync_complete(struct cm_id *id);

/* A UD id (RDMA_PS_UDP / RDMA_PS_IPOIB: librdmacm's rdma_create_id gives it IBV_QPT_UD). */
static inline bool cm_is_ud(const struct cm_id *id)
{
	return id->id.qp_type == IBV_QPT_UD;
}

/* Finishes a connection: sends data[0..len) (best effort, in the background if the socket is
 * full), then closes. Takes tcp. */
void cm_linger(struct io_tcp_conn *tcp, const uint8_t *data, size_t len);
/* Closes the id's connection now (reset if abort), and its watch fd. */
void cm_conn_drop(struct cm_id *id, bool abort);

void cm_count(enum cm_counter c);

/* Moves the id's QP (if any, and CM-managed) to ERR (librdmacm ucma_modify_qp_err). */
void cm_qp_to_err(struct cm_id *id);

/* Address helpers: sockaddr <-> 16 bytes (IPv4-mapped) + port. */
void cm_sockaddr_set(struct sockaddr_storage *ss, const uint8_t a[16], uint16_t port, bool v6);

/* The GID index of addr on the id's device, or -1. */
int cm_gid_index(const struct cm_dev *d, const uint8_t addr[16]);

/* The private data an active side sends: rdma_create_ep's ai_connect, then the parameter's.
 * Returns 0 or -EINVAL (too long for max). */
int cm_collect_pd(struct cm_id *id, const struct rdma_conn_param *p, size_t max);

/* An incoming connection has told us which protocol it speaks: the id (INCOMING) gets the
 * device for its local address and that transport. Returns 0, or -EPROTOTYPE when the
 * listener is bound to a device of the other transport, or -ENODEV. */
int cm_incoming_device(struct cm_id *id, enum cm_transport tr);
/* The incoming id's request is complete: it becomes visible with CONNECT_REQUEST on the
 * listener's channel (param: what the peer announced; pd: its private data). */
void cm_incoming_request(struct cm_id *id, const struct rdma_conn_param *param, const void *pd,
			 size_t pd_len);
/* The same for a UD id's SIDR request: param.ud all zero but the private data. */
void cm_incoming_request_ud(struct cm_id *id, const void *pd, size_t pd_len);

/* ---- cm.c: what cm_roce.c needs of the core ---- */
/* A fresh Local Communication ID of this process (its endpoint's tag in the top 16 bits),
 * opening the endpoint at the first call. 0 or a negative errno. */
int cm_new_comm_id(uint32_t *out);
/* The live RoCE id whose Local Comm ID is comm_id, or NULL. */
struct cm_id *cm_find_comm(uint32_t comm_id);
/* The first id for which match(id, arg) is true, or NULL. */
struct cm_id *cm_find(bool (*match)(const struct cm_id *id, const void *arg), const void *arg);
/* A new passive id under lis (INCOMING, not yet visible), or NULL. */
struct cm_id *cm_incoming_new(struct cm_id *lis);
/* Frees an id the application never saw. */
void cm_id_discard(struct cm_id *id);
/* Pending (not yet accepted) children of a listener. */
int cm_pending_of(const struct cm_id *lis);
/* The device of that local address and transport, or NULL. */
struct cm_dev *cm_dev_for(const uint8_t addr[16], enum cm_transport tr);
/* Whether listener lis takes a request of transport tr to its local address addr. */
bool cm_listener_takes(const struct cm_id *lis, enum cm_transport tr, const uint8_t addr[16]);
/* An active id's address is resolved on device d: ADDR_RESOLVED. Under the lock. */
void cm_addr_resolved(struct cm_id *id, struct cm_dev *d);

/* ---- cm_probe.c: which transport the peer speaks (an active id in CM_RESOLVING) ---- */
/* Asks the peer of id (raddr / rport; laddr its source) through roce which of roce and iwarp, the
 * devices of laddr; the id goes to CM_RESOLVING. 0, or a negative errno (nothing asked). */
int cm_probe_start(struct cm_id *id, struct cm_dev *roce, struct cm_dev *iwarp, uint64_t now,
		   int timeout_ms);
/* The CM thread: answers, resends, the decision (cm_addr_resolved). */
void cm_probe_run(struct cm_id *id, uint64_t now, uint64_t *wake);
/* A SIDR_REP from src for request req_id: true if it answered a probe. */
bool cm_probe_sidr_rep(uint32_t req_id, const uint8_t src[16], uint8_t status, uint64_t now);
/* Ends the probe, if any (rdma_destroy_id, a fork's child): it holds nothing but memory. */
void cm_probe_free(struct cm_id *id);
/* Starts QP1 on every RoCE device (a wildcard listener). */
void cm_gsi_start_all(void);

/* ---- cm_mcast.c: multicast joins (UD ids, RoCE) ---- */
/* rdma_get_cm_event took e (e->mc set): count it, and for MULTICAST_JOIN attach the QP. Under
 * the lock. */
void cm_mc_retrieved(struct cm_event *e);
/* rdma_ack_cm_event of e (e->mc set). Under the lock. */
void cm_mc_acked(struct cm_event *e);
/* rdma_destroy_id: forgets the id's groups (their events are gone). Under the lock. */
void cm_mc_free_all(struct cm_id *id);

/* ---- cm_roce.c: rdma_cm over the IB CM's MADs ---- */
/* rdma_connect: sends the REQ / SIDR_REQ. 0 or a negative errno (nothing sent). */
int cm_roce_connect(struct cm_id *id, uint64_t now);
/* rdma_listen on a device that may be RoCE: the service ID's endpoint. 0 or a negative errno. */
int cm_roce_listen(struct cm_id *id);
/* A frame from an endpoint: lis is the listener whose service ID endpoint it came from, or
 * NULL for the process's own (comm ID) endpoint. */
void cm_roce_mad_in(struct cm_id *lis, const struct gsi_frame *f, uint64_t now);
void cm_roce_run(struct cm_id *id, uint64_t now, uint64_t *wake);
int cm_roce_accept(struct cm_id *id, const struct rdma_conn_param *p);
/* REJ with `reason` (CM_REJ_CONSUMER_DEFINED, or CM_REJ_VENDOR_OPTION for rdma_reject_ece); a UD
 * id answers SIDR_REP status 2 whatever the reason, as the kernel does. */
int cm_roce_reject(struct cm_id *id, const void *pd, uint8_t len, uint16_t reason);
int cm_roce_establish(struct cm_id *id);
int cm_roce_disconnect(struct cm_id *id);
void cm_roce_notify_established(struct cm_id *id);
void cm_roce_destroy(struct cm_id *id);
int cm_roce_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *a, int *mask);

/* ---- cm_iwarp.c: MPA over the TCP connection, then the QP's stream ---- */
int cm_iw_start(struct cm_id *id, uint64_t now); /* active: TCP is up: send the Request */
bool cm_iw_incoming(struct cm_id *id, uint64_t now, uint64_t *wake);
void cm_iw_run(struct cm_id *id, uint64_t now, uint64_t *wake);
int cm_iw_accept(struct cm_id *id, const struct rdma_conn_param *p);
int cm_iw_reject(struct cm_id *id, const void *pd, uint8_t len);
int cm_iw_disconnect(struct cm_id *id);
void cm_iw_destroy(struct cm_id *id);
int cm_iw_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *a, int *mask);

/* ---- cm_ece.c: ECE for cm_roce.c (cm.h "ECE"), under the lock ---- */
/* Sets id->local_ece to what the id offers: rdma_set_local_ece's value, else its QP's
 * (ibv_query_ece), else zeros; the vendor ID cut to its 24 wire bits. */
void cm_ece_offer(struct cm_id *id);
/* Selective repeat is agreed: the local ECE (cm_ece_offer) and the remote one are both
 * softrdma's SR ECE (wire/roce/ece.h sr_ece_is_sr). */
bool cm_ece_sr(const struct cm_id *id);
/* Tells the id's QP (one of rdma_create_qp's; a self-managed QP is the application's) the
 * outcome through ibv_set_ece: the SR ECE when sr, else softrdma's vendor ID with options 0
 * (go-back-N). 0 (also for a QP without ECE), or a negative errno. */
int cm_ece_apply(struct cm_id *id, bool sr);

/* ---- src/api/cm_glue.c: what the CM needs from the verbs objects ---- */
/* Under no lock (takes the core lock): qp (an iWARP QP in INIT) takes over tcp, whose MPA
 * handshake c is ESTABLISHED with every byte sent; left[0..nleft) followed the handshake.
 * The QP goes to RTS (iwp_adopt_conn). Takes tcp in every case. 0 or a negative errno. */
int sr_cm_iw_adopt(struct ibv_qp *qp, struct io_tcp_conn *tcp, const struct iw_conn *c,
		   const uint8_t *left, size_t nleft);
/* The SOFTRDMA_IW_CRC policy of an iWARP context (enum iw_conn_crc). */
int sr_cm_iw_crc(struct ibv_context *ctx);
/* True for a QP of softrdma's iWARP devices. */
bool sr_cm_qp_is_iwarp(struct ibv_qp *qp);
/* iWARP, a self-managed QP (conn_param->qp_num): the context's QP of that number, still in
 * INIT underneath, now connected by rdma_cm instead of auto-connected at RTR; or NULL. */
struct ibv_qp *sr_cm_iw_claim(struct ibv_context *ctx, uint32_t qpn);
/* RoCE: starts the context (its QP1 joins the port's group). 0 or a negative errno. */
int sr_cm_gsi_start(struct ibv_context *ctx);
/* RoCE: sends a CM MAD from QP1 (core_gsi_send). 0 or a negative errno. */
int sr_cm_gsi_send(struct ibv_context *ctx, const struct gsi_frame *f);
/* The device's node GUID (host order). */
uint64_t sr_cm_node_guid(struct ibv_context *ctx);
/* ibv_open_device for rdma_cm itself: not counted as the application's choice. */
struct ibv_context *sr_cm_open_device(struct ibv_device *device);
/* True while the application holds a context of the device it opened itself. Any thread. */
bool sr_cm_app_opened(struct ibv_device *device);

#endif
