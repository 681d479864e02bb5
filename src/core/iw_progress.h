/* The iWARP side of the progress loop: the TCP connections of one iWARP device context, the
 * MPA handshake that sets each one up, and the loop that moves stream bytes between the
 * sockets (io/tcp.h) and the QP engine (engine/iw_eng.h) - DESIGN.md decisions 2 and 4.
 *
 * Lock: the context's core lock (core_lock) guards every QP, CQ and MR, as for RoCE. Calls
 * marked "under the lock" need it held; the connect / accept calls take it themselves, because
 * they wait for the network in between (the QP is in INIT then: nothing else touches its
 * stream).
 *
 * Progress: the application's thread moves bytes in post_send (iwp_flush) and poll_cq
 * (iwp_poll_cq); a progress thread, started with the first connection, does it when the
 * application does not poll (a passive RDMA WRITE / READ target), waking on TCP readability
 * and, while a send is blocked on a full socket buffer, writability. */
#ifndef SOFTRDMA_CORE_IW_PROGRESS_H
#define SOFTRDMA_CORE_IW_PROGRESS_H

#include <stdint.h>

#include "core/core.h"
#include "engine/iw_eng.h"

struct iwp;

/* CRC32c on iWARP connections, read at context open: SOFTRDMA_IW_CRC =
 *   peer (default, as siw): off unless the peer asks for it;
 *   on / required: asked for as initiator, turned on as responder; a peer refusing fails;
 *   strict: as on, and a responder rejects a Request without it;
 *   off: refused (a peer asking for CRC is rejected / fails).
 * iwp_crc_policy maps the text to enum iw_conn_crc, or -EINVAL. */
#define IWP_CRC_ENV "SOFTRDMA_IW_CRC"
int iwp_crc_policy(const char *s);

/* Creates the state of one context; binds nothing. 0, -ENOMEM, or -EINVAL (bad
 * SOFTRDMA_IW_CRC). */
int iwp_create(struct core_ctx *core, struct iwp **out);
/* Stops the thread, resets every connection still open, closes the listener. Not under the
 * lock. NULL is ignored. */
void iwp_destroy(struct iwp *p);

/* Listens on addr (IPv4-mapped) : port (0: the kernel picks). Returns the port, or -EBUSY (this
 * context listens already) or io_tcp_listen's error. Not under the lock. */
int iwp_listen(struct iwp *p, const uint8_t addr[16], uint16_t port);
/* Waits up to timeout_ms (< 0: forever) for the next connection on the listener, runs the MPA
 * responder on it (accepting with our IRD/ORD) and moves qp, which must be in INIT, to RTS.
 * Returns 0, or -EINVAL (no listener, QP not in INIT), -ETIMEDOUT, or the handshake's error.
 * Not under the lock. */
int iwp_accept(struct iwp *p, struct iw_qp *qp, int timeout_ms);
/* TCP connect to addr:port, MPA initiator, then qp (in INIT) to RTS. Returns as iwp_accept
 * (-ECONNREFUSED: nobody listens, or the peer rejected). Not under the lock. */
int iwp_connect(struct iwp *p, struct iw_qp *qp, const uint8_t addr[16], uint16_t port,
		int timeout_ms);

/* The QP leaves the stream (ERR, RESET, destroy): its connection, if any, is reset now.
 * Under the lock. */
void iwp_qp_detach(struct iwp *p, struct iw_qp *qp);

/* Moves what can move on every connection. Under the lock. Returns true if it did anything. */
bool iwp_progress(struct iwp *p);
/* post_send: sends what is due now, on the caller's thread. Under the lock. */
void iwp_flush(struct iwp *p);
/* poll_cq: completions from cq (up to n), moving bytes first when it is empty. Under the
 * lock. */
int iwp_poll_cq(struct iwp *p, struct eng_cq *cq, int n, struct ibv_wc *wc);
/* The application is polling or posting (the thread stays out of its way meanwhile). */
void iwp_note_app(struct iwp *p);

#endif
