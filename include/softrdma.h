/* softrdma extras: what the verbs API lacks. Everything else is the standard
 * <infiniband/verbs.h> API, which softrdma implements. */
#ifndef SOFTRDMA_H
#define SOFTRDMA_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One counter: every drop, retry and fault softrdma sees is counted by reason. */
struct softrdma_counter {
	char name[64];	/* e.g. "rx_bad_icrc", "udp_rx_misdelivered", "retransmits" */
	uint64_t value; /* events since the context (or QP) was created */
};

/* Copies up to `max` context-wide counters (packets dropped before they reach a QP, the UDP
 * backend's, the fault injector's) into out. Returns how many exist (may exceed max), or -1
 * with errno = EINVAL. Thread-safe. */
int softrdma_query_counters(struct ibv_context *ctx, struct softrdma_counter *out, int max);

/* The same for one QP (the transport engine's counters: retransmits, NAKs, duplicates, ...).
 * A RoCE QP with congestion control (SOFTRDMA_ECN=1) also has one gauge, not a count:
 * "cc_rate_kbps", the rate its requests may leave at now (kbit/s; its line rate when nothing
 * slowed it). */
int softrdma_query_qp_counters(struct ibv_qp *qp, struct softrdma_counter *out, int max);

/* Convenience: the value of the named counter of a context (or QP if qp != NULL), or
 * UINT64_MAX if there is no such counter. */
uint64_t softrdma_counter(struct ibv_context *ctx, struct ibv_qp *qp, const char *name);

/* iWARP connections without rdma_cm (issue 3's internal connect/listen API, for tests and
 * tools). Real iWARP connects QPs with rdma_cm; until softrdma provides it, these calls run the
 * TCP connection and the MPA exchange (revision 2, no CRC unless the peer asks, siw's shape)
 * themselves and move the QP from INIT to RTS. The QP must be an RC QP of an iwarp_<ifname>
 * device, in INIT (ibv_modify_qp RESET -> INIT sets its access flags). They block the caller
 * for at most timeout_ms (< 0: no limit) and return 0, or -1 with errno: EINVAL (not an iWARP
 * QP / context, QP not in INIT, no listener), ETIMEDOUT, ECONNREFUSED (nobody listens, or the
 * peer rejected), EPROTO (the peer does not speak MPA), or another errno from the sockets. */

/* Listens on the device's first IPv4 address, port `port` (0: the kernel picks one), once per
 * context. Returns the port, or -1 with errno (EBUSY: this context listens already,
 * EADDRINUSE, ...). */
int softrdma_iw_listen(struct ibv_context *ctx, uint16_t port);

/* Takes the next incoming connection of the context's listener for qp (MPA responder: it
 * accepts with the QP's maximum IRD/ORD, which MPA lowers to what the peer needs). One accept
 * at a time per context; others wait. */
int softrdma_iw_accept(struct ibv_qp *qp, int timeout_ms);

/* Connects qp to ip:port (IPv4 dotted quad or IPv6 text; MPA initiator). */
int softrdma_iw_connect(struct ibv_qp *qp, const char *ip, uint16_t port, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
