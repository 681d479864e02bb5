/* The iWARP progress loop and connection set-up (iw_progress.h). */
#define _GNU_SOURCE
#include "core/iw_progress.h"
#include "core/iw_int.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "engine/iw_conn.h"
#include "io/tcp.h"
#include "util/sys.h"

/* recv / send calls per connection and pass: bounded so that one busy stream cannot hold the
 * lock (and the other connections) for long; the caller comes back when there is more. */
#define RX_BUDGET 256
/* Reads the engine wants smaller than this go through the staging buffer only (conn_rx). */
#define STAGE_MIN 1024
/* A payload read at least this long means large FPDUs: read only RX_TAIL bytes past it. */
#define RX_BIG	  (16 * 1024)
#define RX_TAIL	  512
#define TX_BUDGET 256
/* Up to this many connections a pass visits each (a recv that finds nothing costs about what
 * asking epoll would); beyond, only those with work (run_ready). */
#define FEW_CONNS 4
/* Passes in a row that read only the connection last readable (run_ready). */
#define HOT_PASSES 16
/* Connections one pass takes from epoll; more ready ones are left to the next pass. */
#define READY_MAX 64
/* A busy-polling application retries a full socket at most this often: each try is a
 * sendmsg that takes the socket lock and fails with EAGAIN (tens of thousands per second
 * otherwise, competing with the kernel's own work on that socket). At 40 Gbit/s 10 us is
 * 50 KB, a small part of the send buffer the kernel keeps filled. */
#define TX_RETRY_NS 10000ull
/* The thread's longest sleep: iWARP has no timers, this only bounds a lost wake-up. */
#define WAIT_MS 20
/* The handshake polls at least this often (its own deadline may be earlier). */
#define HS_POLL_MS 50
/* Nudges per connection we initiate (see struct iwp_conn): at 1, 2, 4 ... 512 ms. */
#define NUDGES 10
/* A QP leaving a connection less than this after the peer's last bytes: the FIN waits until
 * the stream has been quiet that long (iwp_qp_detach). */
#define LINGER_QUIET_NS (20 * 1000000ull)

int iwp_crc_policy(const char *s)
{
	if (!s || !*s || !strcmp(s, "peer"))
		return IW_CONN_CRC_PEER;
	if (!strcmp(s, "on") || !strcmp(s, "required"))
		return IW_CONN_CRC_REQUIRED;
	if (!strcmp(s, "strict"))
		return IW_CONN_CRC_REQUIRED_STRICT;
	if (!strcmp(s, "off"))
		return IW_CONN_CRC_OFF_STRICT;
	return -EINVAL;
}

/* The process's iWARP contexts, for iwp_flush's same-process pass (below). */
static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct iwp *procs;
static atomic_int nprocs;
/* Connections in PH_LINGER in this process (lingering_pid's: a fork child has no threads to
 * end them), waited for at exit. */
static atomic_int lingering;
static pid_t lingering_pid;

int iwp_create(struct core_ctx *core, struct iwp **out)
{
	struct iwp *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->core = core;
	p->epfd = p->kickfd = -1;
	mover_init(&p->mv);
	int crc = iwp_crc_policy(getenv(IWP_CRC_ENV));
	if (crc < 0) {
		free(p);
		return crc;
	}
	p->crc = (uint8_t)crc;
	const char *nudge = getenv(IWP_NUDGE_ENV);
	p->nudge = !nudge || strcmp(nudge, "0") != 0;
	pthread_mutex_init(&p->accept_lock, NULL);
	p->pid = getpid();
	pthread_mutex_lock(&procs_lock);
	p->proc_next = procs;
	procs = p;
	atomic_fetch_add(&nprocs, 1);
	pthread_mutex_unlock(&procs_lock);
	*out = p;
	return 0;
}

void iwp_app_enter(struct iwp *p, bool poll)
{
	mover_enter(&p->mv, poll ? MOVER_IN_POLL : MOVER_IN_POST);
}

void iwp_app_leave(struct iwp *p, bool poll, uint64_t now)
{
	mover_leave(&p->mv, poll ? MOVER_IN_POLL : MOVER_IN_POST, now);
}

static void kick(struct iwp *p);

void iwp_app_blocks(struct iwp *p)
{
	if (p->has_thread && mover_app_blocks(&p->mv))
		kick(p);
}

/* ---- the data path (under the lock) ---- */

/* The work list: connections a pass visits besides those epoll reports (struct iwp_conn,
 * listed). */
static void work_add(struct iwp *p, struct iwp_conn *k)
{
	if (k->listed)
		return;
	k->listed = true;
	k->wnext = p->work;
	k->wprev = &p->work;
	if (p->work)
		p->work->wprev = &k->wnext;
	p->work = k;
}

static void work_del(struct iwp_conn *k)
{
	if (!k->listed)
		return;
	*k->wprev = k->wnext;
	if (k->wnext)
		k->wnext->wprev = k->wprev;
	k->listed = false;
}

/* After a visit: does k have work that epoll would not report? Bytes to send (also announced
 * by env->wake, iwp_qp_wake), a budget that ran out, a blocked socket (retried on the
 * application's poll, as before), an ending stream. */
static void relist(struct iwp *p, struct iwp_conn *k)
{
	if (k->more || k->tx_blocked || k->dead || k->phase != PH_OPEN ||
	    iw_qp_state(k->qp) == IBV_QPS_ERR || iw_qp_tx_pending(k->qp))
		work_add(p, k);
	else
		work_del(k);
}

/* With few connections every pass visits each: the list is kept from the (FEW_CONNS + 1)-th
 * on, when all join it once (conn_link). */
void iwp_qp_wake(struct iwp *p, struct iw_qp *qp)
{
	if (p->nconns <= FEW_CONNS)
		return;
	struct iwp_conn *k = iw_qp_link(qp);
	if (k)
		work_add(p, k);
}

int iwp_forget_memory(struct iwp *p, const void *addr, size_t len)
{
	for (struct iwp_conn *k = p->conns; k; k = k->next) {
		int e = k->qp ? iw_qp_tx_forget(k->qp, addr, len) : 0;
		if (e < 0)
			return e;
	}
	return 0;
}

static void conn_link(struct iwp *p, struct iwp_conn *k)
{
	k->next = p->conns;
	k->pprev = &p->conns;
	if (p->conns)
		p->conns->pprev = &k->next;
	p->conns = k;
	if (++p->nconns == FEW_CONNS + 1)
		for (struct iwp_conn *c = p->conns; c; c = c->next)
			work_add(p, c);
}

static void events_change(struct iwp *p, struct iwp_conn *k, uint32_t ev);

/* What epoll watches on k becomes ev (0: nothing). Inline: at the end of every visit it mostly
 * stays as it was. */
static inline void set_events(struct iwp *p, struct iwp_conn *k, uint32_t ev)
{
	if (ev != k->events || (!k->in_epoll && ev))
		events_change(p, k, ev);
}

static void events_change(struct iwp *p, struct iwp_conn *k, uint32_t ev)
{
	struct epoll_event e = {.events = ev, .data.ptr = k};
	if (!ev) {
		/* Nothing to wait for (the peer's stream ended, nothing blocked): out of the
		 * set, or its hang-up would wake the thread for ever. */
		if (k->in_epoll)
			epoll_ctl(p->epfd, EPOLL_CTL_DEL, io_tcp_fd(k->tcp), NULL);
		k->in_epoll = false;
	} else if (!k->in_epoll) {
		k->in_epoll = epoll_ctl(p->epfd, EPOLL_CTL_ADD, io_tcp_fd(k->tcp), &e) == 0;
	} else {
		epoll_ctl(p->epfd, EPOLL_CTL_MOD, io_tcp_fd(k->tcp), &e);
	}
	k->events = ev;
}

/* Also takes k out of the lists. */
static void conn_free(struct iwp *p, struct iwp_conn *k, bool reset)
{
	*k->pprev = k->next;
	if (k->next)
		k->next->pprev = k->pprev;
	p->nconns--;
	work_del(k);
	if (p->hot == k)
		p->hot = NULL;
	if (k->qp)
		iw_qp_set_link(k->qp, NULL);
	if (k->in_epoll)
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, io_tcp_fd(k->tcp), NULL);
	if (reset)
		io_tcp_abort(k->tcp);
	else
		io_tcp_close(k->tcp);
	free(k);
}

/* The QP leaves a live connection (destroyed, moved to ERR / RESET, context closed): an
 * orderly close, so that bytes our completed sends handed to TCP still reach the peer (an
 * iWARP send completes when TCP has its bytes; the application may destroy the QP and exit
 * right after, as ibv_rc_pingpong does). Input still queued is read and dropped first:
 * closing a socket with unread input would send a reset, and a reset discards what we have
 * not sent yet. The kernel finishes sending in the background; the peer sees the end of the
 * stream and flushes. */
static void conn_close(struct iwp *p, struct iwp_conn *k)
{
	for (int i = 0; i < 64; i++)
		if (io_tcp_recv(k->tcp, p->discard, sizeof(p->discard)) <= 0)
			break;
	io_tcp_shutdown(k->tcp);
	conn_free(p, k, false);
}

/* The transport is gone (reset, close, failure): every outstanding WR is flushed. */
static void conn_lost(struct iwp_conn *k, uint64_t now)
{
	k->dead = true;
	if (iw_qp_state(k->qp) != IBV_QPS_ERR)
		iw_qp_set_state(k->qp, IBV_QPS_ERR, now);
}

/* Feeds n bytes that one recvmsg put at the engine's place (direct bytes) and then into the
 * staging buffer. Returns 0 or iw_qp_rx_done's / iw_qp_rx_bytes's error. */
static int rx_feed(struct iwp *p, struct iwp_conn *k, size_t n, size_t direct, uint64_t now)
{
	size_t used, placed = n < direct ? n : direct;
	int e = 0;

	if (placed)
		e = iw_qp_rx_done(k->qp, placed, now);
	if (!e && n > direct)
		e = iw_qp_rx_bytes(k->qp, p->stage, n - direct, &used, now);
	return e;
}

/* Reads the stream. Payload the engine wants read in place (len >= STAGE_MIN: registered
 * memory it has validated) goes there; the same recvmsg reads on into the staging buffer, which
 * the engine then parses and copies from: trailers, headers, small payloads. With small FPDUs
 * (MSS-sized at MTU 1500) one call so reads many FPDUs, at the price of copying their payload
 * once; with large ones (loopback: 64 KiB) it reads only RX_TAIL bytes past the payload
 * (the trailer and the next header), so payload is almost never copied. A read that does not
 * fill what was offered has emptied the socket: the pass ends there instead of asking again
 * for an EAGAIN (epoll is level-triggered, the next poll or the thread comes back). */
static bool conn_rx(struct iwp *p, struct iwp_conn *k, uint64_t now)
{
	bool did = false;
	for (int i = 0; i < RX_BUDGET; i++) {
		void *dst;
		size_t len, direct = 0;
		struct iovec iov[2];
		int n = 0;
		if (iw_qp_rx_want(k->qp, &dst, &len) < 0)
			return did; /* the QP takes no more bytes (ERR) */
		if (len >= STAGE_MIN) {
			iov[n++] = (struct iovec){.iov_base = dst, .iov_len = len};
			direct = len;
		}
		size_t tail = iw_qp_rx_fpdu_payload(k->qp) >= RX_BIG ? RX_TAIL : sizeof(p->stage);
		iov[n++] = (struct iovec){.iov_base = p->stage, .iov_len = tail};
		ssize_t r = io_tcp_recvv(k->tcp, iov, n);
		if (r == -EAGAIN)
			return did;
		did = true;
		if (r == -ESHUTDOWN && k->lenient_eof && iw_qp_rx_quiescent(k->qp)) {
			k->peer_done = true;
			p->peer_closed++;
			return did;
		}
		if (r < 0) {
			conn_lost(k, now);
			return did;
		}
		k->last_rx = now;
		int e = rx_feed(p, k, (size_t)r, direct, now);
		if (e == -ECONNRESET) { /* a Terminate from the peer: it closes too */
			k->dead = true;
			return did;
		}
		if (e < 0)
			return did; /* -EPROTO: our Terminate is queued, the tx side sends it */
		if ((size_t)r < direct + tail)
			return did; /* the socket is empty */
	}
	k->more = true;
	return did;
}

/* app_poll: called from the application's poll (ibv_poll_cq), which may come back at once. */
static bool conn_tx(struct iwp_conn *k, uint64_t now, bool app_poll, bool *idle)
{
	bool did = false;
	*idle = false;
	if (k->tx_blocked && app_poll && now < k->tx_retry_at)
		return false; /* still blocked, as far as we know: EPOLLOUT stays asked for */
	k->tx_blocked = false;
	for (int i = 0; i < TX_BUDGET; i++) {
		/* A batch of FPDUs per sendmsg (iw_qp_tx_want), not one call per FPDU; 0 when
		 * nothing is ready (it asks what iw_qp_tx_pending would). */
		struct iovec iov[IW_TX_BATCH_IOV];
		int n = iw_qp_tx_want(k->qp, now, iov, IW_TX_BATCH_IOV);
		if (n <= 0) {
			*idle = true;
			return did;
		}
		if (k->peer_done) {
			/* The peer's QP is gone: what we would send now can never arrive. The
			 * QP fails and its work requests are flushed (RoCE would time out). */
			conn_lost(k, now);
			return true;
		}
		size_t offered = 0;
		for (int j = 0; j < n; j++)
			offered += iov[j].iov_len;
		/* The kernel copies the bytes now, under the lock, so the MRs they point into
		 * cannot go away meanwhile (iw_eng.h "Threads"). */
		ssize_t r = io_tcp_sendv(k->tcp, iov, n);
		if (r == -EAGAIN) {
			k->tx_blocked = true;
			k->tx_retry_at = now + TX_RETRY_NS;
			return did;
		}
		if (r < 0) {
			conn_lost(k, now);
			return true;
		}
		iw_qp_tx_done(k->qp, (size_t)r);
		did = true;
		if ((size_t)r < offered) {
			k->tx_blocked = true;
			k->tx_retry_at = now + TX_RETRY_NS;
			return did;
		}
	}
	k->more = true;
	return did;
}

/* Wakes the progress thread (it also looks at stop and the timer within WAIT_MS anyway). */
static void kick(struct iwp *p)
{
	uint64_t one = 1;
	if (sys_write(p->kickfd, &one, sizeof(one)) < 0) {
		/* full or closed: the thread is awake or gone */
	}
}

/* A connection's timer (nudge, linger end) is due at t: the thread's wait ends by then. */
static void timer_due(struct iwp *p, uint64_t t)
{
	uint64_t cur = atomic_load_explicit(&p->next_timer, memory_order_relaxed);
	if (!cur || t < cur)
		atomic_store_explicit(&p->next_timer, t, memory_order_relaxed);
	kick(p);
}

static uint64_t data_fpdus(const struct iw_qp *qp)
{
	const uint64_t *c = iw_qp_counters(qp);
	return c[IW_CNT_tx_fpdus] - c[IW_CNT_tx_nudges];
}

/* A nudge is due: a zero-length Write goes out if FPDUs of ours went out since RTS (only those
 * can be sitting unread at the peer; an earlier nudge may have landed in the same blind
 * window), then the next is scheduled. */
static void nudge_step(struct iwp_conn *k, uint64_t now)
{
	if (now < k->nudge_next)
		return;
	if (k->peer_done) { /* the peer's stream ended: nothing of ours is read any more */
		k->nudge_next = 0;
		return;
	}
	if (data_fpdus(k->qp) != k->nudge_fpdus)
		(void)iw_qp_nudge(k->qp); /* -EBUSY: bytes are going out anyway */
	k->nudge_n++;
	k->nudge_next = k->nudge_n < NUDGES ? k->nudge_base + (1000000ull << k->nudge_n) : 0;
}

/* Discards input after our Terminate; true once the peer has closed. */
static bool conn_drain(struct iwp *p, struct iwp_conn *k)
{
	for (int i = 0; i < RX_BUDGET; i++) {
		ssize_t r = io_tcp_recv(k->tcp, p->discard, sizeof(p->discard));
		if (r == -EAGAIN)
			return false;
		if (r < 0)
			return true;
	}
	k->more = true;
	return false;
}

/* conn_run of a connection that is closing (PH_LINGER, PH_DRAINING): out of line, so that
 * the open connection's pass stays small. */
__attribute__((noinline)) static bool conn_closing(struct iwp *p, struct iwp_conn *k, uint64_t now,
						   bool *gone)
{
	if (k->phase == PH_LINGER) {
		bool closed = conn_drain(p, k);
		if (!closed && now < k->linger_until)
			return false;
		atomic_fetch_sub(&lingering, 1);
		if (closed) { /* the peer ended the stream first */
			conn_free(p, k, false);
			*gone = true;
			return true;
		}
		io_tcp_shutdown(k->tcp);
		k->phase = PH_DRAINING;
		set_events(p, k, EPOLLIN);
		return true;
	}
	if (conn_drain(p, k) || k->dead) {
		conn_free(p, k, false);
		*gone = true;
		return true;
	}
	return false;
}

/* One pass over one connection. Returns true if it did anything; *gone if k was freed; *sent
 * set if it sent stream bytes. */
static bool conn_run(struct iwp *p, struct iwp_conn *k, bool rx, uint64_t now, bool *gone,
		     bool *sent)
{
	bool did = false, idle = false;
	*gone = false;
	k->more = false;
	if (k->phase == PH_LINGER || k->phase == PH_DRAINING)
		return conn_closing(p, k, now, gone);
	if (rx && !k->dead && !k->peer_done)
		did |= conn_rx(p, k, now);
	if (k->nudge_next && !k->dead)
		nudge_step(k, now);
	if (k->dead)
		;
	else if (!k->tx_blocked && iw_qp_tx_idle(k->qp))
		idle = true; /* most passes: what came in asked for nothing to be sent */
	else if (conn_tx(k, now, p->app_poll, &idle)) {
		did = true;
		*sent = true;
	}
	if (k->dead) {
		conn_free(p, k, false);
		*gone = true;
		return true;
	}
	if (iw_qp_state(k->qp) == IBV_QPS_ERR) {
		/* Our Terminate (if any) is out: end the stream gracefully. A QP with nothing
		 * left to send counts as finished too, so that a wait for writability that can
		 * never be satisfied usefully does not spin. */
		if (iw_qp_tx_finished(k->qp) || (idle && !k->tx_blocked)) {
			io_tcp_shutdown(k->tcp);
			k->phase = PH_DRAINING;
			set_events(p, k, EPOLLIN);
			return true;
		}
		set_events(p, k, EPOLLOUT);
		return did;
	}
	/* A budget that ran out (k->more) leaves work behind that no input may ever announce
	 * (Read Responses to send while the application has stopped polling): writability
	 * wakes the thread for it at once. */
	set_events(p, k,
		   (k->peer_done ? 0u : EPOLLIN) | (k->tx_blocked || k->more ? EPOLLOUT : 0u));
	return did;
}

static uint64_t conn_due(const struct iwp_conn *k)
{
	return k->phase == PH_LINGER ? k->linger_until : k->nudge_next;
}

/* One visit of connection k in a pass (rx: it reads too): adds to *did what it did and what
 * it left to do (k->more, which also brings the pass back at once). False if k went. */
static bool conn_visit(struct iwp *p, struct iwp_conn *k, bool rx, uint64_t now, bool *did,
		       bool *sent)
{
	bool gone;
	p->visits++;
	*did |= conn_run(p, k, rx, now, &gone, sent);
	if (gone)
		return false;
	*did |= k->more;
	p->again |= k->more;
	return true;
}

/* One pass over every connection, or (timers_only) over those whose timer is due; *sent set if
 * stream bytes went out. Sets next_timer. */
static bool run_every(struct iwp *p, bool rx, bool timers_only, uint64_t now, bool *sent)
{
	uint64_t timer = 0;
	bool did = false;
	for (struct iwp_conn *k = p->conns, *next; k; k = next) {
		next = k->next;
		uint64_t due = conn_due(k);
		if (!timers_only || (due && due <= now)) {
			if (!conn_visit(p, k, rx, now, &did, sent))
				continue;
			if (timers_only)
				relist(p, k);
			due = conn_due(k);
		}
		if (due && (!timer || due < timer))
			timer = due;
	}
	atomic_store_explicit(&p->next_timer, timer, memory_order_relaxed);
	return did;
}

/* rx: reads the connection epoll last reported readable; true if bytes came. */
static bool run_hot(struct iwp *p, uint64_t now, bool *did, bool *sent)
{
	struct iwp_conn *h = p->hot;
	if (!h || p->hot_passes >= HOT_PASSES)
		return false;
	uint64_t before = h->last_rx;
	if (!conn_visit(p, h, true, now, did, sent))
		return false;
	relist(p, h);
	return h->last_rx != before;
}

/* One pass over the connections with something to do: those epoll reports (rx: readable,
 * hung up, or writable where that was asked for), those on the work list, and those whose
 * timer is due. epoll is level-triggered: an event this thread takes from the set is still
 * reported to the progress thread (which may wait on the same set) while its cause remains,
 * and whatever epoll does not report stays on the work list until done (relist).
 * The connection that epoll last reported readable is read first, and epoll asked only when
 * it had nothing (or after HOT_PASSES passes that it served alone, so that the others wait
 * at most that long): a ping-pong's message then costs one system call, its recv, instead of
 * an epoll_wait and the recv (100 B round trips with 1,000 idle QPs open took 1.15x those
 * with none; with few connections each pass reads every one, FEW_CONNS). */
static bool run_ready(struct iwp *p, bool rx, uint64_t now, bool *sent)
{
	bool did = false;
	if (rx && run_hot(p, now, &did, sent)) {
		p->hot_passes++;
		p->hot_reads++;
	} else if (rx) {
		p->hot_passes = 0;
		struct epoll_event evs[READY_MAX];
		int n = sys_epoll_peek(p->epfd, evs, READY_MAX);
		for (int i = 0; i < n; i++) {
			struct iwp_conn *k = evs[i].data.ptr;
			if (!k || evs[i].data.ptr == p)
				continue; /* the kick: the thread's */
			if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))
				k->rx_due = true;
			if (evs[i].events & EPOLLIN)
				p->hot = k;
			work_add(p, k);
		}
		if (n == READY_MAX)
			did = p->again = true; /* more may be ready: come back at once */
	}
	for (struct iwp_conn *k = p->work, *next; k; k = next) {
		next = k->wnext;
		bool krx = rx && (k->rx_due || k->more);
		k->rx_due = false;
		if (conn_visit(p, k, krx, now, &did, sent))
			relist(p, k);
	}
	uint64_t timer = atomic_load_explicit(&p->next_timer, memory_order_relaxed);
	if (timer && now >= timer)
		did |= run_every(p, false, true, now, sent);
	return did;
}

static bool run_conns(struct iwp *p, bool rx, uint64_t now, bool *sent)
{
	p->passes++;
	p->again = false;
	if (p->nconns > FEW_CONNS)
		return run_ready(p, rx, now, sent);
	return run_every(p, rx, false, now, sent);
}

/* On loopback, siw places what a peer sends before the sender's send() returns: the
 * receive runs in the sender's system call. softrdma's target places it when its progress
 * thread wakes, tens of microseconds later, so a program holding both ends that reads the
 * target's memory right after the writer's RDMA WRITE completes (pyverbs' rdma_traffic; iWARP
 * acknowledges nothing, RFC 5040 5.3) would find it there on siw and not here. So a pass that
 * sent bytes, when the process has other iWARP contexts, asks for a receive pass of each of
 * them (neighbours_due), which the thread makes once it has let go of its own context's lock
 * (iwp_after_unlock), before it returns to the application: bytes sent on loopback are in the
 * peer socket when send returns, so they are placed before the writer can see its completion.
 * No thread ever holds two contexts' locks; procs_lock is taken before a context's lock,
 * never after (create and destroy take it alone); nprocs is read without it, as a hint. */
static void pass_to_neighbours(struct iwp *p)
{
	pthread_mutex_lock(&procs_lock);
	for (struct iwp *q = procs; q; q = q->proc_next) {
		/* After fork() the list still holds the parent's contexts: their sockets are the
		 * parent's, and their locks may have been held by a thread that is not here. */
		if (q == p || !q->conns || q->pid != getpid())
			continue;
		core_lock(q->core);
		bool sent = false;
		run_conns(q, true, core_now_ns(), &sent);
		core_unlock(q->core);
	}
	pthread_mutex_unlock(&procs_lock);
}

void iwp_after_unlock(struct iwp *p)
{
	if (atomic_load_explicit(&p->neighbours_due, memory_order_relaxed) &&
	    atomic_exchange(&p->neighbours_due, false))
		pass_to_neighbours(p);
}

/* Stream bytes went out: with other iWARP contexts in the process, they get a receive pass
 * before we return to the application (pass_to_neighbours). */
static void neighbours_after_send(struct iwp *p)
{
	if (atomic_load_explicit(&nprocs, memory_order_relaxed) >= 2)
		atomic_store_explicit(&p->neighbours_due, true, memory_order_relaxed);
}

static bool run_all(struct iwp *p, bool rx, uint64_t now)
{
	bool sent = false;
	p->deferred = 0; /* the pass sends what the posts left */
	bool did = run_conns(p, rx, now, &sent);
	if (sent)
		neighbours_after_send(p);
	return did;
}

bool iwp_progress(struct iwp *p)
{
	return run_all(p, true, core_now_ns());
}

void iwp_flush(struct iwp *p, uint64_t now)
{
	run_all(p, false, now);
}

/* A post sends at once unless it may wait for the application's next poll. When no other
 * post waits (p->deferred), only its own connection can have new bytes to send: that one is
 * visited, sending only, instead of a pass over them all (whatever else is due, the next
 * pass of the application's poll or of the thread does as before). */
void iwp_posted(struct iwp *p, struct iw_qp *qp, uint64_t now)
{
	if (mover_post_waits(&p->mv, p->has_thread, iw_qp_send_cq_waiting(qp), &p->deferred)) {
		p->tx_deferred++;
		return;
	}
	struct iwp_conn *k = iw_qp_link(qp);
	if (p->deferred || !k) {
		iwp_flush(p, now);
		return;
	}
	bool did = false, sent = false;
	if (conn_visit(p, k, false, now, &did, &sent) && p->nconns > FEW_CONNS)
		relist(p, k);
	if (sent)
		neighbours_after_send(p);
}

/* Whether a post may take the direct way (iw_qp_post_one) on connection k: it is open, its
 * socket took everything so far, and the post would not wait for the next poll anyway
 * (iwp_posted: no deferred posts, no pipeline). */
static bool direct_ok(const struct iwp *p, const struct iwp_conn *k, const struct iw_qp *qp)
{
	return !p->deferred && k->phase == PH_OPEN && !k->dead && !k->peer_done && !k->tx_blocked &&
	       !mover_post_may_wait(&p->mv, p->has_thread, iw_qp_send_cq_waiting(qp));
}

int iwp_post_send(struct iwp *p, struct iw_qp *qp, const struct ibv_send_wr *wr,
		  const struct ibv_send_wr **bad, uint64_t now)
{
	struct iwp_conn *k = iw_qp_link(qp);
	const uint8_t *fpdu;
	size_t len;

	if (k && direct_ok(p, k, qp) && (fpdu = iw_qp_post_one(qp, wr, &len))) {
		/* The kernel copies the bytes now, under the lock (conn_tx). */
		ssize_t r = io_tcp_send(k->tcp, fpdu, len);
		iw_qp_one_sent(qp, wr, r > 0 ? (size_t)r : 0);
		if (r > 0)
			neighbours_after_send(p);
		if (r != (ssize_t)len)
			iwp_posted(p, qp, now); /* the rest, or the error, the ordinary way */
		return 0;
	}
	int ret = iw_qp_post_send(qp, wr, bad, now);
	iwp_posted(p, qp, now);
	return ret;
}

int iwp_poll_cq(struct iwp *p, struct eng_cq *cq, int n, struct ibv_wc *wc, uint64_t now)
{
	int got = eng_cq_poll(cq, n, wc);
	if (got) {
		if (p->deferred)
			run_all(p, false, now); /* the posts left for this poll (iwp_posted) */
		return got;
	}
	p->app_poll = true; /* the pass sends the posts left for it too */
	run_all(p, true, now);
	p->app_poll = false;
	return eng_cq_poll(cq, n, wc);
}

/* The QP leaves its connection (destroyed, moved to ERR or RESET: rdma_disconnect,
 * rdma_destroy_qp). If the peer sent something less than LINGER_QUIET_NS ago, our FIN waits
 * until the stream has been quiet that long: Linux siw completes a send WQE only after its
 * last byte is with TCP, and a FIN that arrives in between flushes that WQE with
 * IBV_WC_LOC_QP_OP_ERR (siw_sq_flush), although its bytes arrived. perftest's closing
 * handshake does exactly this: the client's SEND, the server's answer and the server's exit;
 * against siw under load, 'Bad wc status 2' at the client. The lingering connection belongs to
 * no QP; the progress thread shuts it down at linger_until (or frees it when the peer closes
 * first), and the process waits for it at exit (iwp_at_exit) and in iwp_destroy. */
void iwp_qp_detach(struct iwp *p, struct iw_qp *qp)
{
	iwp_rdv_cancel(p, qp);
	struct iwp_conn *k = iw_qp_link(qp);
	if (!k)
		return;
	uint64_t now = core_now_ns();
	if (k->phase == PH_OPEN && !k->dead && !k->peer_done && k->last_rx &&
	    now - k->last_rx < LINGER_QUIET_NS && p->has_thread) {
		iw_qp_set_link(qp, NULL);
		k->qp = NULL;
		k->phase = PH_LINGER;
		k->nudge_next = 0;
		k->linger_until = k->last_rx + LINGER_QUIET_NS;
		set_events(p, k, EPOLLIN);
		work_add(p, k);
		lingering_pid = getpid();
		atomic_fetch_add(&lingering, 1);
		timer_due(p, k->linger_until);
		return;
	}
	conn_close(p, k);
}

static void nap_ns(uint64_t ns);

/* Waits (bounded) until no connection of this process lingers: at exit, the kernel would send
 * their FINs at once. */
static void wait_lingering(void)
{
	for (int i = 0; i < (int)(LINGER_QUIET_NS / 1000000ull) + 10; i++) {
		if (atomic_load(&lingering) <= 0 || lingering_pid != getpid())
			return;
		nap_ns(1000000ull);
	}
}

__attribute__((destructor)) static void iwp_at_exit(void)
{
	wait_lingering();
}

/* ---- the progress thread ---- */

static void nap_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	nanosleep(&ts, NULL);
}

/* Waits on the kick and the mover's deadman alone (the application moves the bytes: the
 * connections are left to it) until the time runs out, a kick comes or the deadman fires (a
 * look: mover_deadman_fired). */
static void nap_on_kick(struct iwp *p, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
	struct pollfd k[2] = {{.fd = p->kickfd, .events = POLLIN},
			      {.fd = p->mv.deadman_fd, .events = POLLIN}};
	if (ppoll(k, p->mv.deadman_fd >= 0 ? 2 : 1, &ts, NULL) > 0 && (k[1].revents & POLLIN))
		mover_deadman_fired(&p->mv);
}

/* The data-path thread: who moves the bytes, the application or this thread, is core/mover.h's
 * policy, as for RoCE. While the application moves them the connections stay in the epoll set
 * (their wake-up callbacks find nobody waiting) and the thread only looks whether some wait. */
static void *iwp_main(void *arg)
{
	struct iwp *p = arg;
	mover_thread_setup();
	while (!atomic_load(&p->stop)) {
		uint64_t now = core_now_ns();
		uint64_t timer = atomic_load_explicit(&p->next_timer, memory_order_relaxed);
		struct mover_wait w =
		    mover_plan(&p->mv, now, timer ? timer : UINT64_MAX, WAIT_MS * 1000000ull);
		uint64_t ns = w.until > now ? w.until - now : 0;
		struct epoll_event evs[16];
		if (!w.on_io && ns > 0)
			nap_on_kick(p, ns);
		int n = core_epoll_nap(p->epfd, evs, 16, w.on_io ? ns : 0);
		bool on_io = false;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == p) {
				uint64_t v;
				if (read(p->kickfd, &v, sizeof(v)) < 0) {
					/* already cleared */
				}
			} else {
				on_io = true;
			}
		}
		if (atomic_load(&p->stop))
			break;
		now = core_now_ns();
		timer = atomic_load_explicit(&p->next_timer, memory_order_relaxed);
		if (!mover_woke(&p->mv, now, on_io, timer ? timer : UINT64_MAX))
			continue; /* nothing waits (a kick only asks for a new plan) */
		bool waited = false;
		if (!core_trylock(p->core)) {
			if (!mover_lock_busy(&p->mv))
				continue;
			core_lock(p->core);
			waited = true;
		}
		bool did = iwp_progress(p);
		bool again = p->again;
		core_unlock(p->core);
		iwp_after_unlock(p);
		/* Round again at once only for reads a pass left unfinished (a connection's read
		 * budget, a full epoll batch). Bytes that arrive later make their connection
		 * readable, which the level-triggered epoll reports: a pass more to find the
		 * sockets empty would cost a read that fails with EAGAIN at every wake-up. */
		for (int i = 0; again && i < 64; i++) {
			if (!core_trylock(p->core))
				break;
			iwp_progress(p);
			again = p->again;
			core_unlock(p->core);
			iwp_after_unlock(p);
		}
		mover_passed(&p->mv, on_io, waited, did);
	}
	return NULL;
}

/* Under the lock: the epoll set and the thread, at the first connection. Without a progress
 * thread (SOFTRDMA_PROGRESS_THREAD=0) the epoll set alone: only the application's calls move
 * the bytes, and a connection's end is not delayed (iwp_qp_detach: no lingering). */
int iwp_start_thread(struct iwp *p)
{
	if (p->has_thread || p->epfd >= 0)
		return 0;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->epfd < 0 || p->kickfd < 0)
		goto fail;
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = p};
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->kickfd, &e) != 0)
		goto fail;
	if (core_no_thread(p->core))
		return 0;
	mover_deadman_open(&p->mv); /* -1: looks by time-out */
	if (pthread_create(&p->thread, NULL, iwp_main, p) != 0) {
		errno = EAGAIN;
		goto fail;
	}
	p->has_thread = true;
	return 0;
fail:;
	int err = -errno;
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->kickfd >= 0)
		close(p->kickfd);
	p->epfd = p->kickfd = -1;
	mover_deadman_close(&p->mv);
	return err;
}

void iwp_destroy(struct iwp *p)
{
	if (!p)
		return;
	/* Out of the list first: no other context's post_send reaches this one any more. */
	pthread_mutex_lock(&procs_lock);
	for (struct iwp **pp = &procs; *pp; pp = &(*pp)->proc_next) {
		if (*pp == p) {
			*pp = p->proc_next;
			atomic_fetch_sub(&nprocs, 1);
			break;
		}
	}
	pthread_mutex_unlock(&procs_lock);
	iwp_rdv_destroy(p); /* first: its thread hands connections to the loop */
	wait_lingering();
	if (p->has_thread) {
		atomic_store(&p->stop, true);
		kick(p);
		pthread_join(p->thread, NULL);
	}
	while (p->conns) {
		struct iwp_conn *k = p->conns;
		if (k->phase == PH_LINGER)
			atomic_fetch_sub(&lingering, 1);
		conn_close(p, k);
	}
	io_tcp_listener_close(p->lis);
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->kickfd >= 0)
		close(p->kickfd);
	mover_deadman_close(&p->mv);
	pthread_mutex_destroy(&p->accept_lock);
	free(p);
}

/* ---- connection set-up (not under the lock: it waits for the network) ---- */

static uint64_t stop_time(int timeout_ms)
{
	return timeout_ms < 0 ? UINT64_MAX : core_now_ns() + (uint64_t)timeout_ms * 1000000ull;
}

/* Waits for events on fd until `until` (and at most HS_POLL_MS). -ETIMEDOUT once past. */
static int wait_fd(int fd, short events, uint64_t until)
{
	uint64_t now = core_now_ns();
	if (now >= until)
		return -ETIMEDOUT;
	uint64_t ms = (until - now + 999999) / 1000000;
	struct pollfd pf = {.fd = fd, .events = events};
	poll(&pf, 1, ms > HS_POLL_MS ? HS_POLL_MS : (int)ms);
	return 0;
}

int iwp_hs_step(struct io_tcp_conn *tcp, struct iw_conn *c, uint64_t now, uint8_t *left,
		size_t *nleft, short *events)
{
	uint8_t buf[IWP_HS_BUF];
	for (;;) {
		const uint8_t *d;
		size_t n;
		while ((n = iw_conn_tx_peek(c, &d)) > 0) {
			ssize_t r = io_tcp_send(tcp, d, n);
			if (r == -EAGAIN || r == 0)
				break; /* no room: wait for POLLOUT */
			if (r < 0) {
				/* After ESTABLISHED the machine ignores transport errors. */
				if (iw_conn_state(c) == IW_CONN_ESTABLISHED)
					return (int)r;
				iw_conn_llp_error(c, (int)r);
				break;
			}
			iw_conn_tx_advance(c, (size_t)r);
		}
		enum iw_conn_state st = iw_conn_state(c);
		if (st == IW_CONN_REJECTED || st == IW_CONN_FAILED) {
			/* A Reject or Terminate went out best effort (above). */
			return iw_conn_error(c) ? iw_conn_error(c) : -ECONNABORTED;
		}
		if (st == IW_CONN_REQ_RCVD || (st == IW_CONN_ESTABLISHED && iw_conn_tx_ready(c)))
			return 1;
		if (!iw_conn_rx_done(c)) {
			ssize_t r = io_tcp_recv(tcp, buf, sizeof(buf));
			if (r > 0) {
				size_t used = 0;
				iw_conn_input(c, buf, (size_t)r, now, &used);
				if (iw_conn_rx_done(c) && used < (size_t)r) {
					memcpy(left, buf + used, (size_t)r - used);
					*nleft = (size_t)r - used;
				}
				continue;
			}
			if (r != -EAGAIN) {
				iw_conn_llp_error(c, (int)r);
				continue;
			}
		}
		if (iw_conn_tick(c, now) < 0)
			continue;
		*events = (short)((iw_conn_rx_done(c) ? 0 : POLLIN) |
				  (iw_conn_tx_peek(c, NULL) ? POLLOUT : 0));
		return 0;
	}
}

/* Runs the MPA exchange until it needs the ULP (responder: REQ_RCVD), is established with
 * every handshake byte sent, or has ended, waiting for the socket in between. Returns 0,
 * -ETIMEDOUT at `until`, or the handshake's error. */
static int hs_drive(struct io_tcp_conn *tcp, struct iw_conn *c, uint64_t until, uint8_t *left,
		    size_t *nleft)
{
	for (;;) {
		uint64_t now = core_now_ns();
		short ev = 0;
		int r = iwp_hs_step(tcp, c, now, left, nleft, &ev);
		if (r < 0)
			return r;
		if (r > 0)
			return 0;
		if (now >= until)
			return -ETIMEDOUT;
		uint64_t until2 = iw_conn_deadline(c) < until ? iw_conn_deadline(c) : until;
		wait_fd(io_tcp_fd(tcp), ev, until2 > now ? until2 : now + 1);
	}
}

/* After a failed handshake: the peer reads our last bytes, then sees the close. */
static void hs_fail_close(struct io_tcp_conn *tcp)
{
	io_tcp_shutdown(tcp);
	io_tcp_close(tcp);
}

int iwp_establish_locked(struct iwp *p, struct iw_qp *qp, struct io_tcp_conn *tcp,
			 const struct iw_conn *c, const uint8_t *left, size_t nleft, bool lenient)
{
	struct iw_conn_info info;
	iw_conn_info(c, &info);
	int mss = io_tcp_mss(tcp);
	struct iwp_conn *k = calloc(1, sizeof(*k));
	if (!k) {
		io_tcp_abort(tcp);
		return -ENOMEM;
	}
	k->qp = qp;
	k->tcp = tcp;
	k->lenient_eof = lenient;
	uint64_t now = core_now_ns();
	int ret = -EINVAL;
	if (iw_qp_state(qp) != IBV_QPS_INIT && iw_qp_state(qp) != IBV_QPS_RTR)
		goto fail; /* modified meanwhile */
	struct iw_qp_attr a;
	iw_qp_get_attr(qp, &a);
	a.ird = info.ird > IW_MAX_IRD ? IW_MAX_IRD : info.ird;
	a.ord = info.ord < 1 ? 1 : info.ord > IW_MAX_ORD ? IW_MAX_ORD : info.ord;
	a.mulpdu = iw_mulpdu(mss > 0 ? (uint32_t)mss : 1460);
	if (a.mulpdu < IW_MIN_MULPDU)
		a.mulpdu = IW_MIN_MULPDU;
	a.max_rx_ulpdu = 0;
	a.crc = info.crc;
	ret = iw_qp_set_attr(qp, &a);
	if (ret < 0)
		goto fail;
	ret = iwp_start_thread(p);
	if (ret < 0)
		goto fail;
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = k};
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, io_tcp_fd(tcp), &e) != 0) {
		ret = -errno;
		goto fail;
	}
	k->in_epoll = true;
	k->events = EPOLLIN;
	iw_qp_set_state(qp, IBV_QPS_RTS, now);
	uint32_t tx_used[IW_QN__COUNT], rx_used[IW_QN__COUNT];
	for (int i = 0; i < IW_QN__COUNT; i++) {
		tx_used[i] = info.tx_msn_used[i];
		rx_used[i] = info.rx_msn_used[i];
	}
	iw_qp_set_rtr(qp, tx_used, rx_used, info.orq_rtr);
	/* Auto-connect's peers are softrdma (only it speaks the rendezvous): no nudges. */
	if (p->nudge && info.role == IW_CONN_INITIATOR && !lenient) {
		k->nudge_base = now;
		k->nudge_next = now + 1000000ull;
		k->nudge_fpdus = data_fpdus(qp);
		timer_due(p, k->nudge_next);
	}
	conn_link(p, k);
	iw_qp_set_link(qp, k);
	k->rx_due = true;
	if (p->nconns > FEW_CONNS)
		work_add(p, k);
	if (nleft) {
		/* FPDUs that came in the same segment as the handshake's last bytes. */
		size_t used;
		if (iw_qp_rx_bytes(qp, left, nleft, &used, now) == -ECONNRESET)
			k->dead = true;
	}
	iwp_progress(p);
	return 0;
fail:
	if (k->in_epoll)
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, io_tcp_fd(tcp), NULL);
	free(k);
	io_tcp_abort(tcp);
	return ret;
}

int iwp_adopt_conn(struct iwp *p, struct iw_qp *qp, struct io_tcp_conn *tcp,
		   const struct iw_conn *c, const uint8_t *left, size_t nleft)
{
	return iwp_establish_locked(p, qp, tcp, c, left, nleft, false);
}

int iwp_crc(const struct iwp *p)
{
	return p->crc;
}

/* The handshake is done: the QP takes over the stream (RTS) and joins the loop. */
static int establish(struct iwp *p, struct iw_qp *qp, struct io_tcp_conn *tcp,
		     const struct iw_conn *c, const uint8_t *left, size_t nleft)
{
	core_lock(p->core);
	int ret = iwp_establish_locked(p, qp, tcp, c, left, nleft, false);
	core_unlock(p->core);
	return ret;
}

static int qp_in_init(struct iwp *p, struct iw_qp *qp)
{
	core_lock(p->core);
	bool ok = iw_qp_state(qp) == IBV_QPS_INIT;
	core_unlock(p->core);
	return ok ? 0 : -EINVAL;
}

struct io_tcp_opts iwp_tcp_opts(const struct iwp *p)
{
	uint8_t tos = core_tos(p->core, 0);
	return (struct io_tcp_opts){.tos = tos & 0xFC, .priority = core_priority(p->core)};
}

int iwp_listen(struct iwp *p, const uint8_t addr[16], uint16_t port)
{
	pthread_mutex_lock(&p->accept_lock);
	int ret = -EBUSY;
	if (!p->lis) {
		struct io_tcp_listener *l;
		struct io_tcp_opts o = iwp_tcp_opts(p);
		ret = io_tcp_listen(addr, port, 0, &o, &l);
		if (ret == 0)
			p->lis = l;
	}
	if (ret == 0)
		ret = io_tcp_listener_port(p->lis);
	pthread_mutex_unlock(&p->accept_lock);
	return ret;
}

int iwp_accept(struct iwp *p, struct iw_qp *qp, int timeout_ms)
{
	uint64_t until = stop_time(timeout_ms);
	int ret = qp_in_init(p, qp);
	if (ret < 0)
		return ret;
	struct io_tcp_conn *tcp = NULL;
	pthread_mutex_lock(&p->accept_lock);
	if (!p->lis)
		ret = -EINVAL;
	while (ret == 0) {
		ret = io_tcp_accept(p->lis, &tcp, NULL, NULL);
		if (ret == 0)
			break;
		if (ret == -EAGAIN || ret == -ECONNABORTED)
			ret = wait_fd(io_tcp_listener_fd(p->lis), POLLIN, until);
	}
	pthread_mutex_unlock(&p->accept_lock);
	if (ret < 0)
		return ret;

	struct iw_conn c;
	struct iw_conn_cfg cfg = {
	    .role = IW_CONN_RESPONDER, .crc = p->crc, .max_ird = IW_MAX_IRD, .max_ord = IW_MAX_ORD};
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	ret = iw_conn_init(&c, &cfg, core_now_ns());
	if (ret == 0)
		ret = hs_drive(tcp, &c, until, left, &nleft);
	if (ret == 0)
		ret = iw_conn_accept(&c, IW_MAX_IRD, IW_MAX_ORD, NULL, 0, core_now_ns());
	if (ret == 0)
		ret = hs_drive(tcp, &c, until, left, &nleft);
	if (ret < 0) {
		hs_fail_close(tcp);
		return ret;
	}
	return establish(p, qp, tcp, &c, left, nleft);
}

int iwp_connect(struct iwp *p, struct iw_qp *qp, const uint8_t addr[16], uint16_t port,
		int timeout_ms)
{
	uint64_t until = stop_time(timeout_ms);
	int ret = qp_in_init(p, qp);
	if (ret < 0)
		return ret;
	struct io_tcp_conn *tcp;
	struct io_tcp_opts o = iwp_tcp_opts(p);
	ret = io_tcp_connect(NULL, 0, addr, port, &o, &tcp);
	if (ret < 0)
		return ret;
	while ((ret = io_tcp_connect_done(tcp)) == -EINPROGRESS) {
		ret = wait_fd(io_tcp_fd(tcp), POLLOUT, until);
		if (ret < 0)
			break;
	}
	if (ret < 0) {
		io_tcp_close(tcp);
		return ret;
	}
	struct iw_conn c;
	struct iw_conn_cfg cfg = {.role = IW_CONN_INITIATOR,
				  .crc = p->crc,
				  .ird = IW_MAX_IRD,
				  .ord = IW_MAX_ORD,
				  .max_ird = IW_MAX_IRD,
				  .max_ord = IW_MAX_ORD};
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	ret = iw_conn_init(&c, &cfg, core_now_ns());
	if (ret == 0)
		ret = hs_drive(tcp, &c, until, left, &nleft);
	if (ret < 0) {
		hs_fail_close(tcp);
		return ret;
	}
	return establish(p, qp, tcp, &c, left, nleft);
}
