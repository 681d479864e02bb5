/* Inside core/'s iWARP side: what iw_progress.c (the data path, explicit connect / accept)
 * and iw_rdv.c (auto-connect) share. Not for other layers. */
#ifndef SOFTRDMA_CORE_IW_INT_H
#define SOFTRDMA_CORE_IW_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/iw_progress.h"
#include "core/mover.h"
#include "engine/iw_conn.h"
#include "io/tcp.h"

enum conn_phase {
	PH_OPEN,     /* the QP owns the stream */
	PH_LINGER,   /* the QP has left (destroyed, ERR) right after the peer sent something: the
			stream stays open a moment before our FIN (iwp_qp_detach), input discarded */
	PH_DRAINING, /* our last bytes (a Terminate) are out and writing is shut down: input is
			discarded until the peer closes, so that it reads those bytes before a
			reset (closing with unread input would send one) */
};

struct iwp_conn {
	struct iw_qp *qp;
	struct io_tcp_conn *tcp;
	uint8_t phase;
	bool dead;	 /* the connection failed: close it */
	bool tx_blocked; /* the socket buffer is full: wait for EPOLLOUT */
	bool more;	 /* a budget ran out: come back at once */
	bool in_epoll;
	/* Auto-connected (socket-exchange programs, RoCE semantics): an orderly end of the
	 * peer's stream between messages leaves the QP as it is - as a RoCE QP whose peer was
	 * destroyed - instead of flushing it; the next send finds the connection gone. */
	bool lenient_eof;
	bool peer_done; /* the peer's stream ended that way: we read no more */
	/* Nudges after an MPA exchange we initiated (iw_qp_nudge: Linux siw as responder leaves
	 * bytes that arrive right after its Reply unread until more bytes come): the k-th at
	 * 2^k ms after RTS (1 .. 512 ms), each only if FPDUs of ours went out since RTS.
	 * nudge_next 0: no more. */
	uint8_t nudge_n;
	uint64_t nudge_base, nudge_next;
	uint64_t nudge_fpdus;  /* our FPDUs (nudges excluded) at RTS */
	uint64_t last_rx;      /* when stream bytes last came in (core_now_ns), 0: never */
	uint64_t tx_retry_at;  /* tx_blocked: the application's poll tries again from then */
	uint64_t linger_until; /* PH_LINGER: when our FIN goes */
	uint32_t events;       /* epoll interest registered */
	bool rx_due;	       /* epoll reported it this pass (run_ready) */
	/* On the work list (struct iwp, work) while it has something to do that epoll does not
	 * report: bytes to send, a budget that ran out, a blocked socket, an ending stream.
	 * Kept only with more than a few connections (iw_progress.c, FEW_CONNS). */
	bool listed;
	struct iwp_conn *next, **pprev;	 /* struct iwp, conns */
	struct iwp_conn *wnext, **wprev; /* the work list */
};

struct iwp {
	struct core_ctx *core;
	pthread_mutex_t accept_lock; /* one iwp_accept at a time uses the listener */
	struct io_tcp_listener *lis;
	struct iwp_conn *conns;
	/* With more than a few connections a pass visits only these and those epoll reports
	 * readable (or writable): an idle connection costs nothing (run_ready). */
	struct iwp_conn *work;
	unsigned nconns;
	/* The connection epoll last reported readable: read first by the next pass, which asks
	 * epoll only when it had nothing, or after HOT_PASSES passes that did not (run_ready). */
	struct iwp_conn *hot;
	unsigned hot_passes; /* passes in a row served by hot alone */
	uint64_t hot_reads;  /* passes served by hot alone, all passes (a test's measure) */
	uint64_t visits;     /* connections a pass looked at, all passes (a test's measure) */
	uint64_t passes;
	int epfd, kickfd;
	pthread_t thread;
	bool has_thread;
	atomic_bool stop;
	struct mover mv; /* who moves the bytes: the application or the thread */
	uint8_t crc;	 /* enum iw_conn_crc for every handshake (SOFTRDMA_IW_CRC) */
	bool nudge;	 /* nudge connections we initiate (SOFTRDMA_IW_NUDGE, default on) */
	_Atomic uint64_t next_timer; /* the earliest nudge due on any connection, 0: none */
	struct iwp_rdv *rdv;	     /* auto-connect (iw_rdv.c), created at the first QP */
	uint64_t peer_closed;	     /* auto-connected streams the peer ended between messages */
	struct iwp *proc_next;	     /* the process's iWARP contexts (iw_progress.c, procs) */
	atomic_bool neighbours_due;  /* a pass sent bytes: the others' receive pass is due */
	bool app_poll;		     /* under the lock: the pass runs for ibv_poll_cq */
	uint32_t deferred;	     /* under the lock: posts left for the next pass (iwp_posted) */
	uint64_t tx_deferred;	     /* posts left for the next pass, all posts */
	bool again;		     /* under the lock: the last pass left reads unfinished */
	pid_t pid;		     /* the process that made it (a fork's copy is not its own) */
	uint8_t discard[4096];
	/* Reads past the payload the engine places: trailers, headers, small FPDUs (conn_rx). */
	uint8_t stage[64 * 1024];
};

/* Under the lock: the handshake c on tcp is done; qp (INIT or RTR) takes over the stream
 * (RTS, attributes from MPA) and joins the loop. Takes tcp in every case (reset on failure).
 * lenient: the connection takes auto-connect's semantics (lenient_eof above). Returns 0, or
 * -EINVAL (the QP was modified meanwhile), -ENOMEM, ... */
int iwp_establish_locked(struct iwp *p, struct iw_qp *qp, struct io_tcp_conn *tcp,
			 const struct iw_conn *c, const uint8_t *left, size_t nleft, bool lenient);

/* Under the lock: the data-path thread and its epoll set, if not yet there. */
int iwp_start_thread(struct iwp *p);

/* iw_rdv.c: frees the auto-connect state (threads stopped, sockets closed). Not under the
 * lock. */
void iwp_rdv_destroy(struct iwp *p);
/* Under the lock: qp leaves auto-connect (detach, ERR, RESET, destroy). */
void iwp_rdv_cancel(struct iwp *p, struct iw_qp *qp);

/* The TCP options of the device's connections: its marking (util/mark.h; the kernel's TCP
 * sets the ECN bits). */
struct io_tcp_opts iwp_tcp_opts(const struct iwp *p);

#endif
