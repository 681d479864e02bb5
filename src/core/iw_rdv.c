/* Auto-connect for iWARP QPs (iw_progress.h, "auto-connect"): the rendezvous listener, the
 * passing of accepted sockets to the process that owns the QP, and the MPA exchanges, all on
 * one background thread per context ("the rendezvous thread").
 *
 * Lock: the context's core lock guards every field below. The thread takes it for each pass
 * (non-blocking socket calls only) and sleeps in poll() without it. Only the thread frees
 * connection objects and closes their sockets; the verbs calls (under the lock) add QPs and
 * cancel them (qp = NULL) and wake the thread, so the descriptors it polls stay valid.
 *
 * Wire: the initiator's MPA Request (revision 2, or 1) carries, after the RFC 6581 IRD/ORD
 * block, the 24-byte block below. The responder peeks at it (MSG_PEEK: nothing consumed, so
 * the socket can be passed on untouched), then either passes the socket to the owner of the
 * destination QPN's slot, or matches it with a QP waiting for exactly that peer (address and
 * QPN) and PSNs, and runs the MPA responder on it; the Reply's private data is the 16-byte
 * block below with the responder's PSNs, which the initiator checks (iw_progress.h: what the
 * PSNs prove). A connection that matches nothing is closed (the initiator retries). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/iw_int.h"
#include "io/forkdrop.h"
#include "io/rundir.h"

#define RETRY_MIN_NS  1000000ull    /* the initiator's first retry after a failure */
#define RETRY_MAX_NS  100000000ull  /* and its longest back-off */
#define PARK_NS	      5000000000ull /* an incoming connection waits this long for its QP */
#define PARK_PER_PEER 16	    /* incoming connections waiting, per source address */
#define PEEK_RETRY_NS 2000000ull    /* a half-arrived Request is looked at again after this */
#define HS_FRAME_NS   5000000000ull /* each MPA frame (iw_conn timeout) */
#define POLL_MAX_MS   100
#define MAX_LIS	      4	 /* rendezvous addresses per context */
#define MAX_IN	      64 /* incoming connections not yet established */
#define MAX_SLOT      255

/* The auto-connect block of the Request's private data. */
#define PD_MAGIC   "sRDV"
#define PD_VERSION 2
#define PD_LEN	   24	/* magic[4] version[1] flags[1] reserved[2] dst_qpn[4] src_qpn[4] psns[8] */
#define PD_REPLY   16	/* magic[4] version[1] flags[1] reserved[2] psns[8]; all big-endian */
#define PD_HAS_SQ  0x01 /* flags: the sender is in RTS, psns[0..3] is its SQ PSN */
/* psns: the sender's SQ PSN (if PD_HAS_SQ), then its RQ PSN. */
#define MPA_KEY_REQ "MPA ID Req Frame"
#define MPA_HDR	    20 /* key[16] flags[1] rev[1] pd_length[2] */
#define MPA_IRD_ORD 4  /* revision 2: the RFC 6581 block heads the private data */
/* The tag of a socket passed between processes (the datagram's only bytes). */
#define FD_TAG "sRFD"

#define RDV_COUNTERS(X)                                                                            \
	X(started, "QPs whose connection auto-connect started (RTR)")                              \
	X(established_active, "auto-connected QPs: we connected")                                  \
	X(established_passive, "auto-connected QPs: the peer connected")                           \
	X(retries, "connection attempts that failed and were retried (peer not ready)")            \
	X(timeouts, "QPs whose peer never came: ERR (SOFTRDMA_IW_CONNECT_TIMEOUT)")                \
	X(accepted, "connections accepted on the rendezvous port")                                 \
	X(passed_out, "connections passed on to the process owning the QP")                        \
	X(passed_in, "connections taken from another process")                                     \
	X(pass_failed, "connections for a QPN slot no process owns (reset)")                       \
	X(pass_refused, "passed sockets refused (another user, bad tag, not TCP)")                 \
	X(drop_not_ours, "connections that sent no auto-connect MPA Request (closed)")             \
	X(drop_unmatched, "Requests for no QP in RTR, or none in RTS within 5 s (closed)")         \
	X(drop_bad_psn, "Requests or Replies whose PSN was not the one the QP expects (closed)")   \
	X(drop_other, "incoming connections lost otherwise (closed, handshake failed, too many)")

/* clang-format off */
enum rdv_counter {
#define RDV_ENUM(name, desc) RC_##name,
	RDV_COUNTERS(RDV_ENUM)
#undef RDV_ENUM
	RC__COUNT
};
/* clang-format on */

static const char *const rdv_counter_names[] = {
#define RDV_NAME(name, desc) "iw_rdv_" #name,
    RDV_COUNTERS(RDV_NAME)
#undef RDV_NAME
};

struct rdv_in;

/* One QP being connected. */
struct rdv_ac {
	struct iw_qp *qp; /* NULL: cancelled (the thread frees it) */
	uint32_t qpn, peer_qpn;
	uint32_t rq_psn, sq_psn; /* what the peer proves, what we prove */
	uint8_t local[16], peer[16];
	uint16_t ird, ord;
	bool rts;		 /* sq_psn is known */
	bool active;		 /* we connect (else we wait for the peer) */
	bool hs;		 /* active: the MPA exchange runs on tcp (else TCP connects) */
	bool done;		 /* established or failed: free at the next pass */
	short ev;		 /* poll events wanted on tcp */
	struct io_tcp_conn *tcp; /* active: the attempt in progress */
	struct iw_conn c;
	/* Active: the attempt whose Request went out before our RTS, without our SQ PSN. The
	 * peer may have accepted it (it checked our RQ PSN), so it runs on beside the new one
	 * until it gets its Reply or fails; the peer accepts at most one of the two. */
	struct io_tcp_conn *old_tcp;
	short old_ev;
	struct iw_conn old_c;
	struct rdv_in *in; /* passive: the connection matched with us */
	uint64_t deadline, next_try, backoff;
	struct rdv_ac *next;
};

/* One incoming connection, until it is passed on, established or dropped. */
struct rdv_in {
	struct io_tcp_conn *tcp;
	uint8_t peer[16];
	bool matched;	   /* the MPA responder runs, for ac */
	bool parked;	   /* waits for its QP to reach RTS */
	struct rdv_ac *ac; /* NULL once matched: its QP went away */
	short ev;	   /* poll events wanted (0: parked or waiting for a timer) */
	struct iw_conn c;
	uint64_t deadline, next_peek;
	struct rdv_in *next;
};

struct iwp_rdv {
	struct iwp *p;
	uint16_t port;
	uint64_t timeout_ns;
	int slot;
	int ufd; /* AF_UNIX datagram socket bound to our slot's name: sockets passed to us */
	int evfd;
	struct {
		uint8_t addr[16];
		struct io_tcp_listener *l;
	} lis[MAX_LIS];
	int nlis;
	struct rdv_ac *acs;
	struct rdv_in *ins;
	int nin;
	pthread_t thread;
	bool has_thread;
	atomic_bool stop;
	struct pollfd *pfd;
	size_t pfd_cap;
	uint64_t cnt[RC__COUNT];
};

#define CNT(r, name) ((r)->cnt[RC_##name]++)

void iwp_each_counter(struct iwp *p, core_counter_fn fn, void *arg)
{
	uint64_t zero[RC__COUNT] = {0};
	const uint64_t *v = p->rdv ? p->rdv->cnt : zero;
	for (int i = 0; i < RC__COUNT; i++)
		fn(arg, rdv_counter_names[i], v[i]);
	fn(arg, "iw_peer_closed", p->peer_closed);
	/* Connections visited by the progress passes, and the passes: with many idle
	 * connections a pass visits only those with work. */
	fn(arg, "iw_conn_visits", p->visits);
	fn(arg, "iw_passes", p->passes);
	fn(arg, "iw_hot_reads", p->hot_reads);
	fn(arg, "iw_tx_deferred", p->tx_deferred);
	char name[64];
	for (int i = 0; i < MOVER_NCOUNTERS; i++) {
		snprintf(name, sizeof(name), "iw_mover_%s", mover_counter_names[i]);
		fn(arg, name, __atomic_load_n(&p->mv.n[i], __ATOMIC_RELAXED));
	}
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void put_be32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* A slot's local socket name: in the user's private run directory (io/rundir.h), so no other
 * user can take a slot or receive a connection meant for one of ours; per network namespace
 * like the rendezvous port itself. */
static void slot_name(int slot, char *buf, size_t n)
{
	snprintf(buf, n, "softrdma-iw-%d", slot);
}

static unsigned long env_ulong(const char *name, unsigned long dflt, unsigned long max)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v == 0 || v > max) {
		fprintf(stderr, "softrdma: %s=%s is not a number in 1..%lu; using %lu\n", name, s,
			max, dflt);
		return dflt;
	}
	return v;
}

/* ---- creation: the slot ---- */

int iwp_slot(struct iwp *p)
{
	if (p->rdv)
		return p->rdv->slot;
	struct iwp_rdv *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->p = p;
	r->evfd = -1;
	r->ufd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->ufd < 0) {
		int e = -errno;
		free(r);
		return e;
	}
	/* The lowest free name is ours for as long as the socket lives (a process that dies
	 * frees it), which makes QPNs unique among the processes of this namespace and user. */
	rundir_sweep();
	int err = -EADDRINUSE;
	for (int slot = 1; slot <= MAX_SLOT; slot++) {
		char name[32];
		slot_name(slot, name, sizeof(name));
		err = rundir_bind(r->ufd, name);
		if (err == 0)
			r->slot = slot;
		if (err != -EADDRINUSE)
			break;
	}
	int one = 1;
	if (!err && setsockopt(r->ufd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0)
		err = -errno;
	/* A fork's child must not keep the name answering after we close it: others would
	 * keep passing it connections for our slot that nobody takes. */
	if (!err)
		err = io_forkdrop_add(r->ufd);
	if (err) {
		io_forkdrop_remove(r->ufd);
		rundir_close(r->ufd);
		free(r);
		return err;
	}
	/* A port, or no QP: a typo must not send connections to some other port. */
	const char *port = getenv(IWP_PORT_ENV);
	r->port = IWP_DEFAULT_PORT;
	if (port && *port) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(port, &end, 10);
		if (port[0] < '0' || port[0] > '9' || errno || *end || v == 0 || v > 65535) {
			fprintf(stderr, "softrdma: %s=%s is not a TCP port (1..65535)\n",
				IWP_PORT_ENV, port);
			io_forkdrop_remove(r->ufd);
			rundir_close(r->ufd);
			free(r);
			return -EINVAL;
		}
		r->port = (uint16_t)v;
	}
	r->timeout_ns = env_ulong(IWP_TIMEOUT_ENV, 20000, 3600000) * 1000000ull;
	p->rdv = r;
	return r->slot;
}

/* ---- freeing ---- */

static void in_free(struct iwp_rdv *r, struct rdv_in *in, bool abort)
{
	if (in->ac)
		in->ac->in = NULL;
	if (abort)
		io_tcp_abort(in->tcp);
	else if (in->tcp)
		io_tcp_close(in->tcp);
	r->nin--;
	free(in);
}

static void ac_free(struct rdv_ac *ac)
{
	if (ac->in) {
		ac->in->ac = NULL;
		ac->in->ev = 0;
	}
	io_tcp_abort(ac->tcp);
	io_tcp_abort(ac->old_tcp);
	free(ac);
}

void iwp_rdv_cancel(struct iwp *p, struct iw_qp *qp)
{
	struct iwp_rdv *r = p->rdv;
	if (!r)
		return;
	for (struct rdv_ac *ac = r->acs; ac; ac = ac->next) {
		if (ac->qp == qp) {
			ac->qp = NULL;
			ac->done = true;
		}
	}
	if (r->evfd >= 0) {
		uint64_t one = 1;
		if (write(r->evfd, &one, sizeof(one)) < 0) {
			/* the counter is already non-zero: the thread wakes anyway */
		}
	}
}

void iwp_rdv_destroy(struct iwp *p)
{
	struct iwp_rdv *r = p->rdv;
	if (!r)
		return;
	if (r->has_thread) {
		atomic_store(&r->stop, true);
		uint64_t one = 1;
		if (write(r->evfd, &one, sizeof(one)) < 0) {
			/* the thread sees stop within POLL_MAX_MS */
		}
		pthread_join(r->thread, NULL);
	}
	while (r->ins) {
		struct rdv_in *in = r->ins;
		r->ins = in->next;
		in_free(r, in, true);
	}
	while (r->acs) {
		struct rdv_ac *ac = r->acs;
		r->acs = ac->next;
		ac_free(ac);
	}
	for (int i = 0; i < r->nlis; i++)
		io_tcp_listener_close(r->lis[i].l);
	if (r->evfd >= 0)
		close(r->evfd);
	io_forkdrop_remove(r->ufd);
	rundir_close(r->ufd);
	free(r->pfd);
	free(r);
	p->rdv = NULL;
}

/* ---- incoming connections ---- */

static void in_add(struct iwp_rdv *r, struct io_tcp_conn *tcp, const uint8_t peer[16], uint64_t now)
{
	struct rdv_in *in = r->nin < MAX_IN ? calloc(1, sizeof(*in)) : NULL;
	if (!in) {
		io_tcp_abort(tcp); /* too many half-open: the initiator retries */
		CNT(r, drop_other);
		return;
	}
	in->tcp = tcp;
	memcpy(in->peer, peer, 16);
	in->deadline = now + PARK_NS;
	in->ev = POLLIN;
	in->next = r->ins;
	r->ins = in;
	r->nin++;
}

static void accept_all(struct iwp_rdv *r, struct io_tcp_listener *l, uint64_t now)
{
	for (int i = 0; i < 16; i++) {
		struct io_tcp_conn *tcp;
		uint8_t peer[16];
		int e = io_tcp_accept(l, &tcp, peer, NULL);
		if (e == -ECONNABORTED)
			continue;
		if (e < 0)
			return;
		CNT(r, accepted);
		in_add(r, tcp, peer, now);
	}
}

/* Sockets other processes of ours accepted for our QPs. */
static void recv_passed(struct iwp_rdv *r, uint64_t now)
{
	for (int i = 0; i < 16; i++) {
		char tag[8];
		union {
			char buf[CMSG_SPACE(4 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr align;
		} cb;
		struct iovec iov = {.iov_base = tag, .iov_len = sizeof(tag)};
		struct msghdr m = {.msg_iov = &iov,
				   .msg_iovlen = 1,
				   .msg_control = cb.buf,
				   .msg_controllen = sizeof(cb.buf)};
		ssize_t n = recvmsg(r->ufd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0)
			return;
		int fds[4], nfd = 0;
		bool cred_ok = false;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET)
				continue;
			if (c->cmsg_type == SCM_RIGHTS) {
				size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
				for (size_t j = 0; j < k && nfd < 4; j++)
					memcpy(&fds[nfd++], CMSG_DATA(c) + j * sizeof(int),
					       sizeof(int));
			} else if (c->cmsg_type == SCM_CREDENTIALS) {
				struct ucred u;
				memcpy(&u, CMSG_DATA(c), sizeof(u));
				cred_ok = u.uid == getuid();
			}
		}
		/* Only a socket from a process of our own user, tagged as ours, is taken. */
		struct io_tcp_conn *tcp = NULL;
		if (cred_ok && nfd == 1 && n == 4 && !memcmp(tag, FD_TAG, 4) &&
		    !(m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) &&
		    io_tcp_adopt(fds[0], NULL, &tcp) == 0) {
			uint8_t peer[16];
			if (io_tcp_peer(tcp, peer, NULL) == 0) {
				CNT(r, passed_in);
				in_add(r, tcp, peer, now);
			} else {
				CNT(r, pass_refused);
				io_tcp_abort(tcp);
			}
			nfd = 0; /* fds[0] belongs to tcp (or is closed) now */
		} else {
			CNT(r, pass_refused);
		}
		for (int j = 0; j < nfd; j++)
			close(fds[j]);
	}
}

/* Passes in's socket to the process whose QPNs have slot `slot`. */
static void pass_on(struct iwp_rdv *r, struct rdv_in *in, int slot)
{
	struct sockaddr_un a;
	socklen_t alen;
	char name[32];
	slot_name(slot, name, sizeof(name));
	if (rundir_sockaddr(name, &a, &alen) != 0) {
		CNT(r, pass_failed);
		io_tcp_abort(in->tcp);
		in->tcp = NULL;
		return;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cb;
	memset(&cb, 0, sizeof(cb));
	struct iovec iov = {.iov_base = (void *)FD_TAG, .iov_len = 4};
	struct msghdr m = {.msg_name = &a,
			   .msg_namelen = alen,
			   .msg_iov = &iov,
			   .msg_iovlen = 1,
			   .msg_control = cb.buf,
			   .msg_controllen = sizeof(cb.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	int fd = io_tcp_fd(in->tcp);
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	/* Sent: our copy of the descriptor is closed (the socket lives on in the other
	 * process). Not sent (no such process): the initiator sees a reset. */
	bool sent = sendmsg(r->ufd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) == 4;
	if (!sent) {
		CNT(r, pass_failed);
		io_tcp_abort(in->tcp);
	} else {
		CNT(r, passed_out);
		io_tcp_close(in->tcp);
	}
	in->tcp = NULL;
}

/* A QP waiting for the connection from peer (address, QPN src) to its QPN dst. */
/* Writes what a peer can check: flags and psns (PD_HAS_SQ). */
static void psns_put(uint8_t *flags, uint8_t *psns, const struct rdv_ac *ac)
{
	*flags = ac->rts ? PD_HAS_SQ : 0;
	put_be32(psns, ac->rts ? ac->sq_psn : 0);
	put_be32(psns + 4, ac->rq_psn);
}

/* Checks the peer's flags and psns against what ac's QP was told: its SQ PSN is our RQ PSN,
 * its RQ PSN our SQ PSN. -1: a mismatch; 0: nothing could be checked (neither side in RTS);
 * 1: all that could be checked matched. */
static int psns_check(const uint8_t *flags, const uint8_t *psns, const struct rdv_ac *ac)
{
	int checked = 0;
	if (*flags & PD_HAS_SQ) {
		if (get_be32(psns) != ac->rq_psn)
			return -1;
		checked = 1;
	}
	if (ac->rts) {
		if (get_be32(psns + 4) != ac->sq_psn)
			return -1;
		checked = 1;
	}
	return checked;
}

static int parked_from(const struct iwp_rdv *r, const uint8_t peer[16])
{
	int n = 0;
	for (const struct rdv_in *in = r->ins; in; in = in->next)
		n += in->parked && !memcmp(in->peer, peer, 16);
	return n;
}

static struct rdv_ac *find_passive(struct iwp_rdv *r, uint32_t dst, uint32_t src,
				   const uint8_t peer[16])
{
	for (struct rdv_ac *ac = r->acs; ac; ac = ac->next)
		if (ac->qp && !ac->done && !ac->active && !ac->in && ac->qpn == dst &&
		    ac->peer_qpn == src && !memcmp(ac->peer, peer, 16))
			return ac;
	return NULL;
}

/* Looks at the Request without consuming it. Returns 1 when in is dealt with (passed on or
 * to be dropped: *drop), 0 when it waits (more bytes, or its QP), 2 when matched. */
static int in_peek(struct iwp_rdv *r, struct rdv_in *in, uint64_t now, bool *drop)
{
	uint8_t b[MPA_HDR + MPA_IRD_ORD + PD_LEN];
	*drop = false;
	ssize_t n = recv(io_tcp_fd(in->tcp), b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
		*drop = true; /* closed or reset before its Request */
		CNT(r, drop_other);
		return 1;
	}
	if (n < 0) {
		in->ev = POLLIN;
		return 0;
	}
	size_t got = (size_t)n;
	/* Not MPA, or not an auto-connect Request: this port serves nothing else. */
	size_t k = got < 16 ? got : 16;
	if (memcmp(b, MPA_KEY_REQ, k) != 0) {
		*drop = true;
		CNT(r, drop_not_ours);
		return 1;
	}
	size_t off = MPA_HDR;
	if (got >= MPA_HDR) {
		off += b[17] == 2 ? MPA_IRD_ORD : 0;
		size_t pdl = (size_t)b[18] << 8 | b[19];
		if (pdl < off - MPA_HDR + PD_LEN) {
			*drop = true;
			CNT(r, drop_not_ours);
			return 1;
		}
	}
	if (got < off + PD_LEN) {
		/* Part of it is there, so the socket polls readable: look again shortly. */
		in->ev = 0;
		in->next_peek = now + PEEK_RETRY_NS;
		return 0;
	}
	const uint8_t *pd = b + off;
	if (memcmp(pd, PD_MAGIC, 4) != 0 || pd[4] != PD_VERSION) {
		*drop = true;
		CNT(r, drop_not_ours);
		return 1;
	}
	uint32_t dst = get_be32(pd + 8), src = get_be32(pd + 12);
	int slot = (int)((dst >> 16) & 0xFF);
	if (slot != r->slot) {
		pass_on(r, in, slot);
		*drop = true;
		return 1;
	}
	struct rdv_ac *ac = find_passive(r, dst, src, in->peer);
	if (!ac) {
		/* No QP of ours is in RTR for it (not yet, or never): the initiator retries. */
		*drop = true;
		CNT(r, drop_unmatched);
		return 1;
	}
	int proof = psns_check(pd + 5, pd + 16, ac);
	if (proof < 0) {
		*drop = true; /* not the peer the application named */
		CNT(r, drop_bad_psn);
		return 1;
	}
	if (proof == 0) {
		/* Nothing to check yet (neither side in RTS): parked until our RTS (which
		 * wakes the thread) or PARK_NS has passed; a few per source address, so that
		 * no one sender fills the table. */
		if (!in->parked && parked_from(r, in->peer) >= PARK_PER_PEER) {
			*drop = true;
			CNT(r, drop_other);
			return 1;
		}
		in->parked = true;
		in->ev = 0;
		in->next_peek = UINT64_MAX;
		return 0;
	}
	struct iw_conn_cfg cfg = {.role = IW_CONN_RESPONDER,
				  .crc = r->p->crc,
				  .max_ird = IW_MAX_IRD,
				  .max_ord = IW_MAX_ORD,
				  .timeout_ns = HS_FRAME_NS};
	if (iw_conn_init(&in->c, &cfg, now) < 0) {
		*drop = true;
		CNT(r, drop_other);
		return 1;
	}
	in->matched = true;
	in->ac = ac;
	ac->in = in;
	return 2;
}

/* One pass over an incoming connection. Returns true when it is finished (free it). */
static bool in_run(struct iwp_rdv *r, struct rdv_in *in, uint64_t now, uint64_t *wake)
{
	if (!in->tcp)
		return true;
	if (!in->matched) {
		if (now >= in->deadline) {
			CNT(r, drop_unmatched);
			return true;
		}
		if (in->ev == 0 && now < in->next_peek) {
			*wake = min_u64(*wake, min_u64(in->next_peek, in->deadline));
			return false;
		}
		bool drop;
		int st = in_peek(r, in, now, &drop);
		if (st == 1)
			return true;
		if (st == 0) {
			*wake = min_u64(*wake, in->ev ? in->deadline
						      : min_u64(in->next_peek, in->deadline));
			return false;
		}
	}
	struct rdv_ac *ac = in->ac;
	if (!ac || !ac->qp) {
		CNT(r, drop_other);
		return true; /* its QP went away meanwhile */
	}
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	short ev = 0;
	int st = iwp_hs_step(in->tcp, &in->c, now, left, &nleft, &ev);
	if (st == 1 && iw_conn_state(&in->c) == IW_CONN_REQ_RCVD) {
		uint8_t pd[PD_REPLY] = {0};
		memcpy(pd, PD_MAGIC, 4);
		pd[4] = PD_VERSION;
		psns_put(pd + 5, pd + 8, ac);
		if (iw_conn_accept(&in->c, ac->ird, ac->ord, pd, sizeof(pd), now) < 0) {
			CNT(r, drop_other);
			return true;
		}
		st = iwp_hs_step(in->tcp, &in->c, now, left, &nleft, &ev);
	}
	if (st < 0) {
		CNT(r, drop_other);
		return true; /* the initiator retries */
	}
	if (st == 0) {
		in->ev = ev;
		*wake = min_u64(*wake, iw_conn_deadline(&in->c));
		return false;
	}
	struct io_tcp_conn *tcp = in->tcp;
	in->tcp = NULL;
	/* Auto-connected: RoCE's semantics when the peer QP goes away (iw_int.h). */
	if (iwp_establish_locked(r->p, ac->qp, tcp, &in->c, left, nleft, true) < 0)
		iw_qp_conn_failed(ac->qp, now);
	else
		CNT(r, established_passive);
	ac->done = true;
	return true;
}

/* ---- QPs being connected ---- */

/* The attempt failed (or could not start): another after the back-off, which *wake covers. */
static void retry_later(struct iwp_rdv *r, struct rdv_ac *ac, uint64_t now, uint64_t *wake)
{
	CNT(r, retries);
	io_tcp_abort(ac->tcp);
	ac->tcp = NULL;
	ac->hs = false;
	ac->ev = 0;
	ac->next_try = now + ac->backoff;
	ac->backoff = min_u64(ac->backoff * 2, RETRY_MAX_NS);
	*wake = min_u64(*wake, ac->next_try);
}

/* Whether the Reply on c carries the PSNs we expect (where either side could check). */
static bool reply_ok(const struct iw_conn *c, const struct rdv_ac *ac)
{
	struct iw_conn_info info;
	iw_conn_info(c, &info);
	const uint8_t *pd = info.peer_pd;
	return pd && info.peer_pd_len >= PD_REPLY && !memcmp(pd, PD_MAGIC, 4) &&
	       pd[4] == PD_VERSION && psns_check(pd + 5, pd + 8, ac) >= 0;
}

/* One step of an active attempt's handshake on tcp (c). 1: the Reply came with the PSNs we
 * expect and the QP has the connection (tcp is taken, ac is finished); 0: waiting (*ev and
 * *wake say for what); -1: failed - refused, reset, closed because the peer's QP is not ready
 * yet, or a Reply from someone who is not the peer the application named (the caller closes
 * tcp). */
static int attempt_step(struct iwp_rdv *r, struct rdv_ac *ac, struct io_tcp_conn *tcp,
			struct iw_conn *c, uint64_t now, uint64_t *wake, short *ev)
{
	uint8_t left[IWP_HS_BUF];
	size_t nleft = 0;
	*ev = 0;
	int st = iwp_hs_step(tcp, c, now, left, &nleft, ev);
	if (st == 0) {
		*wake = min_u64(*wake, iw_conn_deadline(c));
		return 0;
	}
	if (st < 0)
		return -1;
	if (!reply_ok(c, ac)) {
		CNT(r, drop_bad_psn);
		return -1;
	}
	if (iwp_establish_locked(r->p, ac->qp, tcp, c, left, nleft, true) < 0)
		iw_qp_conn_failed(ac->qp, now);
	else
		CNT(r, established_active);
	return 1;
}

/* One step of the attempt that went out before our RTS. Returns true when it established
 * the QP's connection (ac is finished); a failed one is dropped (the peer waited for the new
 * attempt, or is not the peer), the new attempt goes on. */
static bool old_run(struct iwp_rdv *r, struct rdv_ac *ac, uint64_t now, uint64_t *wake)
{
	int st = attempt_step(r, ac, ac->old_tcp, &ac->old_c, now, wake, &ac->old_ev);
	if (st == 0)
		return false;
	if (st < 0)
		io_tcp_abort(ac->old_tcp);
	ac->old_tcp = NULL;
	ac->old_ev = 0;
	return st > 0;
}

/* One pass over a QP being connected. Returns true when it is finished (free it). */
static bool ac_run(struct iwp_rdv *r, struct rdv_ac *ac, uint64_t now, uint64_t *wake)
{
	if (ac->done || !ac->qp)
		return true;
	if (now >= ac->deadline) {
		/* The peer never came (or never matched): the QP fails, as a timed-out
		 * connection does on siw. */
		iw_qp_conn_failed(ac->qp, now);
		CNT(r, timeouts);
		return true;
	}
	*wake = min_u64(*wake, ac->deadline);
	if (!ac->active)
		return false; /* an incoming connection will match it */
	if (ac->old_tcp && old_run(r, ac, now, wake))
		return true;
	if (!ac->tcp) {
		if (now < ac->next_try) {
			*wake = min_u64(*wake, ac->next_try);
			return false;
		}
		struct io_tcp_opts o = iwp_tcp_opts(r->p);
		if (io_tcp_connect(ac->local, 0, ac->peer, r->port, &o, &ac->tcp) < 0) {
			ac->tcp = NULL;
			retry_later(r, ac, now, wake);
			return false;
		}
	}
	if (!ac->hs) {
		int e = io_tcp_connect_done(ac->tcp);
		if (e == -EINPROGRESS) {
			ac->ev = POLLOUT;
			return false;
		}
		uint8_t pd[PD_LEN] = {0};
		memcpy(pd, PD_MAGIC, 4);
		pd[4] = PD_VERSION;
		put_be32(pd + 8, ac->peer_qpn);
		put_be32(pd + 12, ac->qpn);
		psns_put(pd + 5, pd + 16, ac);
		struct iw_conn_cfg cfg = {.role = IW_CONN_INITIATOR,
					  .crc = r->p->crc,
					  .ird = ac->ird,
					  .ord = ac->ord,
					  .max_ird = IW_MAX_IRD,
					  .max_ord = IW_MAX_ORD,
					  .pd = pd,
					  .pd_len = PD_LEN,
					  .timeout_ns = HS_FRAME_NS};
		if (e < 0 || iw_conn_init(&ac->c, &cfg, now) < 0) {
			retry_later(r, ac, now, wake);
			return false;
		}
		ac->hs = true;
	}
	int st = attempt_step(r, ac, ac->tcp, &ac->c, now, wake, &ac->ev);
	if (st > 0) {
		ac->tcp = NULL; /* the QP's now */
		return true;
	}
	if (st < 0)
		retry_later(r, ac, now, wake);
	return false;
}

/* ---- the thread ---- */

static void pass(struct iwp_rdv *r, uint64_t now, uint64_t *wake)
{
	recv_passed(r, now);
	for (int i = 0; i < r->nlis; i++)
		accept_all(r, r->lis[i].l, now);
	for (struct rdv_in **pp = &r->ins; *pp;) {
		struct rdv_in *in = *pp;
		if (in_run(r, in, now, wake)) {
			*pp = in->next;
			in_free(r, in, true);
		} else {
			pp = &in->next;
		}
	}
	for (struct rdv_ac **pp = &r->acs; *pp;) {
		struct rdv_ac *ac = *pp;
		if (ac_run(r, ac, now, wake)) {
			*pp = ac->next;
			ac_free(ac);
		} else {
			pp = &ac->next;
		}
	}
}

static bool pfd_add(struct iwp_rdv *r, size_t *n, int fd, short ev)
{
	if (*n == r->pfd_cap) {
		size_t cap = r->pfd_cap ? r->pfd_cap * 2 : 16;
		struct pollfd *np = realloc(r->pfd, cap * sizeof(*np));
		if (!np)
			return false;
		r->pfd = np;
		r->pfd_cap = cap;
	}
	r->pfd[(*n)++] = (struct pollfd){.fd = fd, .events = ev};
	return true;
}

/* Under the lock: what to sleep on. Returns the count, or 0 on allocation failure (the
 * caller then naps briefly). */
static size_t pollset(struct iwp_rdv *r)
{
	size_t n = 0;
	bool ok = pfd_add(r, &n, r->evfd, POLLIN) && pfd_add(r, &n, r->ufd, POLLIN);
	for (int i = 0; ok && i < r->nlis; i++)
		ok = pfd_add(r, &n, io_tcp_listener_fd(r->lis[i].l), POLLIN);
	for (struct rdv_in *in = r->ins; ok && in; in = in->next)
		if (in->tcp && in->ev)
			ok = pfd_add(r, &n, io_tcp_fd(in->tcp), in->ev);
	for (struct rdv_ac *ac = r->acs; ok && ac; ac = ac->next) {
		if (ac->tcp && ac->ev)
			ok = pfd_add(r, &n, io_tcp_fd(ac->tcp), ac->ev);
		if (ok && ac->old_tcp && ac->old_ev)
			ok = pfd_add(r, &n, io_tcp_fd(ac->old_tcp), ac->old_ev);
	}
	return ok ? n : 0;
}

static void *rdv_main(void *arg)
{
	struct iwp_rdv *r = arg;
	struct core_ctx *core = r->p->core;
	while (!atomic_load(&r->stop)) {
		core_lock(core);
		uint64_t now = core_now_ns();
		uint64_t wake = now + POLL_MAX_MS * 1000000ull;
		pass(r, now, &wake);
		size_t n = pollset(r);
		core_unlock(core);
		uint64_t ms = wake > now ? (wake - now + 999999) / 1000000 : 0;
		if (n == 0) {
			usleep(1000);
			continue;
		}
		poll(r->pfd, (nfds_t)n, (int)(ms > POLL_MAX_MS ? POLL_MAX_MS : ms));
		uint64_t v;
		if (r->pfd[0].revents && read(r->evfd, &v, sizeof(v)) < 0) {
			/* cleared by someone else */
		}
	}
	return NULL;
}

static int ensure_thread(struct iwp_rdv *r)
{
	if (r->has_thread)
		return 0;
	if (r->evfd < 0)
		r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->evfd < 0)
		return -errno;
	if (pthread_create(&r->thread, NULL, rdv_main, r) != 0)
		return -EAGAIN;
	r->has_thread = true;
	return 0;
}

/* Why the rendezvous port cannot be ours, in words that name who holds it and the way out
 * (as progress.c for the RoCE port). */
static void say_port_holder(const uint8_t addr[16], uint16_t port)
{
	long uid = io_tcp_port_holder(addr, port);
	if (uid < 0 || (uid_t)uid == geteuid()) {
		fprintf(stderr,
			"softrdma: TCP port %u (iWARP auto-connect) on this address is taken by a "
			"program that is not softrdma; use another port on both ends (%s)\n",
			port, IWP_PORT_ENV);
		return;
	}
	struct passwd pw, *who = NULL;
	char buf[1024];
	getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &who);
	fprintf(stderr,
		"softrdma: TCP port %u (iWARP auto-connect) on this address is held by user %s "
		"(uid %ld): softrdma processes share it only with processes of the same user (a "
		"SO_REUSEPORT group is one user's); run as that user, or use another port on both "
		"ends (%s)\n",
		port, who ? who->pw_name : "?", uid, IWP_PORT_ENV);
}

static int ensure_listener(struct iwp_rdv *r, const uint8_t addr[16])
{
	for (int i = 0; i < r->nlis; i++)
		if (!memcmp(r->lis[i].addr, addr, 16))
			return 0;
	if (r->nlis == MAX_LIS)
		return -ENOSPC;
	struct io_tcp_opts o = iwp_tcp_opts(r->p);
	o.reuseport = true;
	int e = io_tcp_listen(addr, r->port, 0, &o, &r->lis[r->nlis].l);
	if (e == -EADDRINUSE)
		say_port_holder(addr, r->port);
	if (e < 0)
		return e;
	memcpy(r->lis[r->nlis].addr, addr, 16);
	r->nlis++;
	return 0;
}

int iwp_auto_connect(struct iwp *p, struct iw_qp *qp, const uint8_t local[16],
		     const uint8_t peer[16], uint32_t peer_qpn, uint32_t rq_psn, uint16_t ird,
		     uint16_t ord)
{
	struct iwp_rdv *r = p->rdv;
	if (!r)
		return -EINVAL;
	uint32_t qpn = iw_qp_num(qp);
	/* The lower (address, QPN) connects: both sides reach the same answer. */
	int cmp = memcmp(local, peer, 16);
	if (cmp == 0)
		cmp = qpn < peer_qpn ? -1 : qpn > peer_qpn ? 1 : 0;
	if (cmp == 0)
		return -EINVAL; /* a TCP connection to itself: no */
	for (struct rdv_ac *ac = r->acs; ac; ac = ac->next)
		if (ac->qp == qp)
			return -EINVAL;
	int e = cmp > 0 ? ensure_listener(r, local) : 0;
	if (e == 0)
		e = ensure_thread(r);
	if (e < 0)
		return e;
	struct rdv_ac *ac = calloc(1, sizeof(*ac));
	if (!ac)
		return -ENOMEM;
	uint64_t now = core_now_ns();
	ac->qp = qp;
	ac->qpn = qpn;
	ac->peer_qpn = peer_qpn;
	ac->rq_psn = rq_psn;
	memcpy(ac->local, local, 16);
	memcpy(ac->peer, peer, 16);
	ac->ird = ird;
	ac->ord = ord;
	ac->active = cmp < 0;
	ac->deadline = now + r->timeout_ns;
	ac->next_try = now;
	ac->backoff = RETRY_MIN_NS;
	ac->next = r->acs;
	r->acs = ac;
	CNT(r, started);
	/* The thread polls a new listener, or starts connecting. */
	uint64_t one = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0) {
		/* already signalled */
	}
	return 0;
}

void iwp_auto_connect_rts(struct iwp *p, struct iw_qp *qp, uint32_t sq_psn)
{
	struct iwp_rdv *r = p->rdv;
	struct rdv_ac *ac = r ? r->acs : NULL;
	while (ac && (ac->qp != qp || ac->done))
		ac = ac->next;
	if (!ac)
		return;
	ac->sq_psn = sq_psn;
	ac->rts = true;
	uint64_t now = core_now_ns();
	if (ac->active) {
		/* A Request without our SQ PSN may be out. A peer in RTS can check it (our RQ
		 * PSN) and may have accepted it already, so it is not closed (that would reset
		 * the peer's connection); a peer in RTR only cannot check it and parks it. So it
		 * runs on beside a new attempt that carries our SQ PSN, started at once. A TCP
		 * connect still in progress sends its Request later, with the SQ PSN. */
		if (ac->tcp && ac->hs) {
			io_tcp_abort(ac->old_tcp);
			ac->old_tcp = ac->tcp;
			ac->old_c = ac->c;
			ac->old_ev = ac->ev;
			ac->tcp = NULL;
			ac->hs = false;
			ac->ev = 0;
		}
		ac->next_try = now;
		ac->backoff = RETRY_MIN_NS;
	}
	/* Parked connections may be waiting for this QP. */
	for (struct rdv_in *in = r->ins; in; in = in->next)
		if (!in->matched && in->ev == 0)
			in->next_peek = now;
	uint64_t one = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0) {
		/* already signalled */
	}
}
