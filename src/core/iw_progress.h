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
#include "engine/iw_conn.h"
#include "engine/iw_eng.h"
#include "io/tcp.h"

struct iwp;

/* CRC32c on iWARP connections, read at context open: SOFTRDMA_IW_CRC =
 *   peer (default, as siw): off unless the peer asks for it;
 *   on / required: asked for as initiator, turned on as responder; a peer refusing fails;
 *   strict: as on, and a responder rejects a Request without it;
 *   off: refused (a peer asking for CRC is rejected / fails).
 * iwp_crc_policy maps the text to enum iw_conn_crc, or -EINVAL. */
#define IWP_CRC_ENV "SOFTRDMA_IW_CRC"
int iwp_crc_policy(const char *s);

/* SOFTRDMA_IW_NUDGE=0 turns off the nudges (zero-length RDMA Writes, iw_qp_nudge) that
 * connections we initiate send during their first 512 ms, for Linux siw's responder. */
#define IWP_NUDGE_ENV "SOFTRDMA_IW_NUDGE"

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

/* ---- auto-connect (iw_rdv.c; DESIGN.md's extension for socket-exchange programs) ----
 *
 * A QP moved to RTR with a peer GID and QPN (ibv_modify_qp, as ibv_rc_pingpong and perftest
 * without -R do) gets its TCP connection and MPA exchange from softrdma, in the background:
 * of the two QPs, the one with the lower (GID, QPN) connects to the other's address on the
 * rendezvous port (TCP, SOFTRDMA_IW_PORT, default 4791), carrying both QPNs in the MPA
 * Request's private data; the other accepts. Each side proves it is the peer the application
 * named by the PSNs, which only the two applications exchanged (the QPNs and the address are
 * guessable): each side's frame (Request, Reply) carries its SQ PSN once its QP is in RTS
 * and its RQ PSN, and the other side checks them against its own RQ PSN (from RTR) and SQ PSN
 * (from RTS). A Request that fails a check is closed (iw_rdv_drop_bad_psn; the initiator
 * retries), one for no QP in RTR at once; one that nothing could be checked against yet
 * (neither side in RTS: a receive-only QP, as perftest's bandwidth server, stays in RTR)
 * waits for the QP's RTS, at most 16 per source address; the initiator, reaching RTS, starts
 * again with its SQ PSN. So a pair of QPs that both stay in RTR does not connect, and a
 * Request shows the initiator's PSNs to whoever holds the rendezvous port at the peer's
 * address. Every softrdma process listens on that port
 * with SO_REUSEPORT; a process that accepts a connection for another process's QP passes the
 * socket to it over a local socket (softrdma-iw-<slot> in the user's run directory,
 * io/rundir.h; the slot is the QPN's bits 16..23, so QPNs are unique per network namespace
 * and user). The connecting side
 * retries until the peer is ready, for at most SOFTRDMA_IW_CONNECT_TIMEOUT ms (default
 * 20000); then the QP goes to ERR with IBV_EVENT_QP_FATAL. Sends posted in RTS before the
 * connection is up are queued. */
#define IWP_PORT_ENV	 "SOFTRDMA_IW_PORT"
#define IWP_TIMEOUT_ENV	 "SOFTRDMA_IW_CONNECT_TIMEOUT"
#define IWP_DEFAULT_PORT 4791

/* The context's QPN slot (1..255), claimed at the first call (not under the lock, or
 * under it: it only binds a local socket). Returns the slot or -EADDRINUSE (all taken),
 * -EINVAL (SOFTRDMA_IW_PORT is set and not a port: said on stderr), or a socket errno. */
int iwp_slot(struct iwp *p);
/* Under the lock: starts connecting qp (INIT or RTR) from local to peer / peer_qpn
 * (addresses IPv4-mapped as io/tcp.h), announcing ird / ord. Returns 0, or -EINVAL (the peer
 * is qp itself, or qp is connecting already), or the listener's error (-EADDRINUSE: a
 * program that is not softrdma, or another user, has the rendezvous port). */
int iwp_auto_connect(struct iwp *p, struct iw_qp *qp, const uint8_t local[16],
		     const uint8_t peer[16], uint32_t peer_qpn, uint32_t rq_psn, uint16_t ird,
		     uint16_t ord);
/* Under the lock: qp, being auto-connected, is in RTS with sq_psn: the exchange can start.
 * Nothing when qp is not being auto-connected. */
void iwp_auto_connect_rts(struct iwp *p, struct iw_qp *qp, uint32_t sq_psn);

/* The auto-connect counters ("iw_rdv_*", and "iw_peer_closed": auto-connected streams whose
 * peer QP went away between messages; such a QP stays as it is, as on RoCE, and fails at its
 * next send), for softrdma_query_counters. Under the lock. */
void iwp_each_counter(struct iwp *p, core_counter_fn fn, void *arg);

/* Under the lock: the memory [addr, addr + len) is about to go away (a region deregistered):
 * no connection sends from it afterwards (iw_qp_tx_forget). Returns 0, or -ENOMEM. */
int iwp_forget_memory(struct iwp *p, const void *addr, size_t len);

/* The largest handshake read: stream bytes after it go to the QP (`left`). */
#define IWP_HS_BUF 2048

/* One non-blocking step of the MPA exchange on tcp: sends what is due, reads what has come,
 * runs the timer. Returns 1 when the handshake needs the ULP (responder: REQ_RCVD) or is
 * established with every byte sent (stream bytes that followed it are in left[0..*nleft),
 * left has IWP_HS_BUF bytes); 0 when it must wait for the socket (*events: POLLIN / POLLOUT)
 * or iw_conn_deadline; or the handshake's error. Any thread; c and tcp are the caller's. */
int iwp_hs_step(struct io_tcp_conn *tcp, struct iw_conn *c, uint64_t now, uint8_t *left,
		size_t *nleft, short *events);

/* For rdma_cm (src/cm), which runs the MPA exchange itself (with the application's private
 * data) on a connection it made: under the lock, qp (INIT or RTR) takes over tcp, whose
 * handshake c has ended ESTABLISHED with every byte sent (iw_conn_tx_ready); left[0..nleft)
 * are stream bytes that arrived behind the handshake. The QP moves to RTS with the IRD/ORD,
 * CRC and RTR state MPA negotiated and joins the loop. Takes tcp in every case (reset on
 * failure). Returns 0 or a negative errno (-EINVAL: the QP is not in INIT / RTR). */
int iwp_adopt_conn(struct iwp *p, struct iw_qp *qp, struct io_tcp_conn *tcp,
		   const struct iw_conn *c, const uint8_t *left, size_t nleft);
/* The CRC policy of this context (SOFTRDMA_IW_CRC, enum iw_conn_crc), for handshakes run
 * outside core. */
int iwp_crc(const struct iwp *p);

/* The QP leaves the stream (ERR, RESET, destroy): its connection closes (in order; after a
 * short linger if the peer has just sent something, see iw_progress.c). Under the lock. */
void iwp_qp_detach(struct iwp *p, struct iw_qp *qp);

/* env->wake: qp has bytes to send (its connection joins the next pass). Under the lock. */
void iwp_qp_wake(struct iwp *p, struct iw_qp *qp);
/* Moves what can move on every connection. Under the lock. Returns true if it did anything. */
bool iwp_progress(struct iwp *p);
/* post_send: sends what is due now, on the caller's thread. Under the lock. now: the
 * caller's core_now_ns (the application's calls read the clock once, a poll that finds nothing
 * being most of them). */
void iwp_flush(struct iwp *p, uint64_t now);
/* post_send, after qp took work requests: iwp_flush, or, while the application moves the bytes
 * and has not yet polled the completions of qp's earlier sends, nothing (mover_post_waits):
 * its back-to-back posts then leave in one sendmsg at its next poll (iwp_poll_cq), at the
 * MOVER_DEFER_POSTS-th post, or at the thread's next look, instead of one system call each
 * (RoCE's core_posted). A post that finds those completions polled (every ping-pong) goes at
 * once. Under the lock. */
void iwp_posted(struct iwp *p, struct iw_qp *qp, uint64_t now);
/* post_send: posts the WR chain to qp (iw_qp_post_send: same results) and sends, as
 * iwp_posted. One small message on a connection with nothing else to do goes the direct way
 * instead (iw_qp_post_one): framed whole and handed to TCP here, in one send, without a send
 * queue entry or a pass (about 1,000 fewer instructions per message). Under the lock. */
int iwp_post_send(struct iwp *p, struct iw_qp *qp, const struct ibv_send_wr *wr,
		  const struct ibv_send_wr **bad, uint64_t now);
/* poll_cq: completions from cq (up to n), moving bytes first when it is empty or posts wait
 * (iwp_posted). Under the lock. */
int iwp_poll_cq(struct iwp *p, struct eng_cq *cq, int n, struct ibv_wc *wc, uint64_t now);
/* Right after the lock is let go by a thread that called iwp_progress / iwp_flush /
 * iwp_poll_cq: if that sent bytes while the process has other iWARP contexts, each of them
 * gets a receive pass now (takes their locks one at a time), so that on loopback a peer in
 * the same process has placed them before the sender returns, as with siw. Not under any
 * context's lock. */
void iwp_after_unlock(struct iwp *p);
/* Around the application's polls (poll: true) and posts, before the lock and after the
 * unlock (the thread stays out of its way meanwhile, core/mover.h); now: the time the call
 * read under the lock, which the mover takes as that of its last call. */
void iwp_app_enter(struct iwp *p, bool poll);
void iwp_app_leave(struct iwp *p, bool poll, uint64_t now);
/* The application is about to block for a completion event: the thread takes over now. */
void iwp_app_blocks(struct iwp *p);

#endif
