/* The progress loop (core.h). */
#define _GNU_SOURCE
#include "core/core.h"

#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "io/fault.h"
#include "io/io.h"
#include "io/mcast.h"
#include "wire/roce/roce.h"
#include "core/gsi.h"
#include "core/mgroup.h"
#include "core/mover.h"
#include "util/lock.h"
#include "util/mark.h"
#include "engine/dcqcn.h"
#include "util/tmheap.h"
#include "util/sys.h"

#define BATCH 32
/* Room for the largest packet: headers, 4096 bytes of payload, pad, ICRC. */
#define PKT_ROOM (ROCE_MAX_HDR_LEN + 4096 + 4 + ROCE_ICRC_LEN)
/* Packets one QP may emit per pass before the others get a turn. */
#define QP_BURST 64
/* Payloads at least this long are sent from registered memory (drain_qp). */
#define REF_MIN 1024
/* The least time between two CNPs of one QP (RoCE NICs' min_time_between_cnps, 4 us). */
#define CNP_INTERVAL_NS 4000
/* The hop limit of a UD QP's CNP (the datagram's own is not kept): Linux's default. */
#define UD_CNP_TTL 64
/* Longest the progress thread sleeps without looking at the time. */
#define MAX_SLEEP_NS 20000000ull

const char *const core_counter_names[CORE_CNT__COUNT] = {
#define CORE_COUNTER_NAME(name, desc) #name,
    CORE_COUNTERS(CORE_COUNTER_NAME)
#undef CORE_COUNTER_NAME
};

/* Per address family: the UDP socket and its fault stage. */
enum { FAM_V4, FAM_V6, FAM__COUNT };

struct core_qp {
	struct eng_qp *qp;
	uint32_t qpn;
	bool has_path;
	bool queued;
	bool ud;	     /* UD: no path; destinations come per packet (core_ah) */
	uint16_t sport_ref;  /* the source port whose socket reference we hold */
	uint8_t id_mode;     /* enum id_mode: what the peer puts in the IPv4 identification */
	uint16_t peer_sport; /* the port the peer binds and sends from, once seen (0: not yet) */
	/* DCQCN's notification point (engine/dcqcn.h): CNPs for CE-marked packets. */
	struct dcqcn_np np;
	struct core_path path;
	/* UD, per family: the source port referenced (0: none yet) and the one packets carry
	 * (differs when the port is held by someone else, io_udp_sport_get). */
	uint16_t ud_ref[FAM__COUNT];
	uint16_t ud_sport[FAM__COUNT];
	struct core_qp *next_run;
	/* The QP's deadline in the context's timer heap (in it while the engine has one). */
	struct tmheap_node timer;
	struct core_qp *next_due; /* run_timers' list of QPs due in this pass */
};

/* An address handle (core.h): where a UD packet goes. */
struct core_ah {
	struct core_path path;
	uint16_t gen; /* bumped at every create in this slot: stale handles never match */
	bool used;
};

/* The receive check solves the ICRC for the IPv4 ID it cannot see (roce_icrc_check), which
 * leaves 16 bits of the CRC unchecked. A softrdma peer sends ID 0, or 0, 1, 2, ... within a GSO
 * train (io.h), so once a QP's peer has shown ID 0, a packet that needs an ID of
 * IO_UDP_TRAIN_MAX or more is corrupt: 26 bits are checked. A kernel peer (rxe) sends varying
 * IDs and keeps the 16-bit residual check. */
enum id_mode { ID_UNKNOWN, ID_ZERO, ID_ANY };

struct core_ctx {
	struct sr_lock lock;	   /* the context lock (util/lock.h) */
	struct core_ctx *all_next; /* every context of the process (ctxs), for core_at_exit */
	pid_t pid;
	struct core_config cfg;
	struct io_udp *io; /* IPv4: opened by core_start */
	struct io_fault *fault;
	struct io_udp *io6; /* IPv6: opened at the first QP with an IPv6 path, same slot */
	struct io_fault *fault6;
	/* UD multicast: the group sockets (opened at the first attach, then kept; published with
	 * release for the progress thread's arming) and which QPs are attached to which group. */
	struct io_mcast *mc;
	struct core_mgroups mg;
	bool mc_armed;
	bool tx_v6; /* family of the packets in the transmit batch */
	uint32_t qpn_base;
	/* The attached QPs by n (QPN = qpn_base | n): a table grown at attach, NULL where none.
	 * Entries are allocated at attach and freed at detach (an idle QP costs its own entry
	 * and a pointer, not the context a row of every table at its maximum). */
	struct core_qp **qps;
	uint32_t nqps; /* entries in qps */
	uint32_t nattached;
	/* The deadlines of the QPs that have one (eng_env.deadline keeps it current): a pass
	 * looks at the earliest only, so idle QPs cost the data path nothing. */
	struct tmheap timers;
	struct core_qp *run_head, *run_tail;
	uint32_t deferred; /* posts left for the next poll (core_posted) since the last output */
	bool out_held;	   /* a poll has let the output wait once more (core_poll_cq) */
	bool rx_full;	   /* the last receive filled its batch: more may wait */
	uint64_t counters[CORE_CNT__COUNT];
	struct core_ah *ahs; /* grown on ibv_create_ah (control path); index 0 unused */
	uint32_t nahs;	     /* slots allocated */
	uint32_t ah_last;    /* slot taken last (next-fit search) */

	/* progress thread */
	pthread_t thread;
	bool has_thread;
	atomic_bool stop;
	int epfd;
	int kickfd;
	bool sock_armed[FAM__COUNT];	 /* in the epoll set */
	struct mover mv;		 /* who moves the packets: the application or the thread */
	_Atomic uint64_t thread_wake_at; /* when the sleeping thread will look again */
	uint64_t next_deadline;

	uint8_t rxbuf[BATCH][PKT_ROOM];
	uint8_t txbuf[BATCH][PKT_ROOM];
	struct io_pkt rx[BATCH];
	struct io_pkt rxv[BATCH]; /* io_udp_recv_view's entries: the packets stay in io (GRO) */
	struct io_pkt tx[BATCH];
	int ntx;
	uint32_t gsi_psn; /* BTH PSN of QP1's sends */
};

uint64_t core_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void core_lock(struct core_ctx *c)
{
	sr_lock_take(&c->lock);
}

void core_unlock(struct core_ctx *c)
{
	sr_lock_give(&c->lock);
}

bool core_trylock(struct core_ctx *c)
{
	return sr_lock_try(&c->lock);
}

uint32_t core_qpn_base(const struct core_ctx *c)
{
	return c->qpn_base;
}

void core_set_qpn_base(struct core_ctx *c, uint32_t base)
{
	c->qpn_base = base;
}

const uint64_t *core_counters(const struct core_ctx *c)
{
	return c->counters;
}

uint8_t core_tos(const struct core_ctx *c, uint8_t tclass)
{
	return mark_tos(c->cfg.dscp, c->cfg.ecn, tclass);
}

uint8_t core_priority(const struct core_ctx *c)
{
	return mark_priority(core_tos(c, 0));
}

static struct io_udp *io_of(struct core_ctx *c, bool v6)
{
	return v6 ? c->io6 : c->io;
}

static int start_v6(struct core_ctx *c);

/* The attached QP of that number, or NULL. */
static struct core_qp *slot_of(struct core_ctx *c, uint32_t qpn)
{
	if ((qpn & ~0xFFFFu) != c->qpn_base)
		return NULL;
	uint32_t n = qpn & 0xFFFFu;
	return n < c->nqps ? c->qps[n] : NULL;
}

int core_qp_attach(struct core_ctx *c, struct eng_qp *qp, uint32_t qpn)
{
	uint32_t n = qpn & 0xFFFFu;
	if ((qpn & ~0xFFFFu) != c->qpn_base || n == 0 || n >= CORE_MAX_QP)
		return -EINVAL;
	if (slot_of(c, qpn))
		return -EEXIST;
	if (n >= c->nqps) {
		uint32_t size = c->nqps ? c->nqps : 64;
		while (size <= n)
			size *= 2;
		if (size > CORE_MAX_QP)
			size = CORE_MAX_QP;
		struct core_qp **t = realloc(c->qps, size * sizeof(*t));
		if (!t)
			return -ENOMEM;
		memset(t + c->nqps, 0, (size - c->nqps) * sizeof(*t));
		c->qps = t;
		c->nqps = size;
	}
	/* Room in the timer heap for every QP: filing a deadline never allocates. */
	if (tmheap_reserve(&c->timers, c->nattached + 1) < 0)
		return -ENOMEM;
	struct core_qp *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->qp = qp;
	s->qpn = qpn;
	s->np.interval_ns = CNP_INTERVAL_NS;
	c->qps[n] = s;
	c->nattached++;
	core_qp_deadline(c, qp); /* a QP is created in RESET: none yet, but say so */
	return 0;
}

void core_qp_deadline(struct core_ctx *c, struct eng_qp *qp)
{
	struct core_qp *s = slot_of(c, eng_qp_num(qp));
	if (!s || s->qp != qp)
		return;
	uint64_t d = eng_qp_deadline(qp);
	/* Filed early is filed well enough: a deadline that moves later (an ACK disarms the
	 * timer that the request armed, the next request arms it again further on) leaves the
	 * entry where it is. It comes due before the engine's deadline, eng_qp_timer finds
	 * nothing due then (its timers check the clock), and run_qp_timers files the real one.
	 * A ping-pong thus moves no heap entry per round trip, at the cost of one look per timeout
	 * period; a deadline that moves earlier (or a QP that has none filed) is filed at once,
	 * so no timer is ever late. */
	if (tmheap_has(&s->timer) && s->timer.key <= d)
		return;
	tmheap_set(&c->timers, &s->timer, d);
	/* Earlier than the progress thread will look: kick_thread_if_late, at the end of the
	 * pass or post that got us here, wakes it. */
	if (d < c->next_deadline)
		__atomic_store_n(&c->next_deadline, d, __ATOMIC_RELAXED);
}

void core_qp_detach(struct core_ctx *c, uint32_t qpn)
{
	struct core_qp *s = slot_of(c, qpn);
	if (!s || !s->qp)
		return;
	/* What is due goes out first: ACKs that a poll deferred (core_poll_cq) are owed to
	 * the peer, whose requests would otherwise be retried against a QP that is gone. */
	core_flush(c);
	if (s->has_path)
		io_udp_sport_put(io_of(c, s->path.ipv6), s->sport_ref);
	for (int f = 0; f < FAM__COUNT; f++)
		if (s->ud_ref[f])
			io_udp_sport_put(io_of(c, f == FAM_V6), s->ud_ref[f]);
	/* Its multicast attachments go with it, as uverbs detaches them at destroy. */
	uint8_t mgid[16];
	while (core_mg_first_of(&c->mg, qpn, mgid) == 0)
		if (core_mg_detach(&c->mg, mgid, qpn) == 1)
			io_mcast_leave(c->mc, mgid);
	/* Unlink from the run list. */
	struct core_qp **pp = &c->run_head;
	c->run_tail = NULL;
	while (*pp) {
		if (*pp == s) {
			*pp = s->next_run;
			continue;
		}
		c->run_tail = *pp;
		pp = &(*pp)->next_run;
	}
	tmheap_remove(&c->timers, &s->timer);
	c->qps[qpn & 0xFFFFu] = NULL;
	c->nattached--;
	free(s);
}

int core_qp_set_path(struct core_ctx *c, uint32_t qpn, const struct core_path *path)
{
	struct core_qp *s = slot_of(c, qpn);
	if (!s || !s->qp)
		return -EINVAL;
	if (path->ipv6) {
		int r = start_v6(c);
		if (r < 0)
			return r;
	}
	struct io_udp *io = io_of(c, path->ipv6);
	int ret = io_udp_sport_get(io, path->sport);
	if (ret < 0)
		return ret;
	if (s->has_path)
		io_udp_sport_put(io_of(c, s->path.ipv6), s->sport_ref);
	s->sport_ref = path->sport;
	s->path = *path;
	s->path.tos = core_tos(c, path->tos);
	/* The port is held by someone else: packets leave from the main socket, and the ICRC
	 * must cover the port they really carry. */
	if (ret == 1)
		s->path.sport = io_udp_port(io);
	s->has_path = true;
	s->id_mode = ID_UNKNOWN;
	if (c->cfg.ecn) {
		/* ECN-capable traffic reacts to the CNPs it causes: DCQCN with the NICs' defaults.
		 */
		int r = eng_qp_set_cc(s->qp, &c->cfg.cc);
		if (r < 0 && r != -EINVAL)
			return r;
	}
	s->peer_sport = 0;
	return 0;
}

/* Takes the UD QP's source-port reference on the socket of family f. */
static int ud_sport_get(struct core_ctx *c, struct core_qp *s, int f)
{
	struct io_udp *io = io_of(c, f == FAM_V6);
	uint16_t sport = roce_udp_sport_initial(s->qpn);
	if (!io || s->ud_ref[f])
		return 0;
	int r = io_udp_sport_get(io, sport);
	if (r < 0)
		return r;
	s->ud_ref[f] = sport;
	/* Held by someone else: packets leave from the main socket, with its port. */
	s->ud_sport[f] = r == 1 ? io_udp_port(io) : sport;
	return 0;
}

int core_qp_set_ud(struct core_ctx *c, uint32_t qpn)
{
	struct core_qp *s = slot_of(c, qpn);
	if (!s || !s->qp || !c->io)
		return -EINVAL;
	/* ECN-capable datagrams (c->cfg.ecn) react to the CNPs they cause, as RC does. */
	if (c->cfg.ecn) {
		int r = eng_qp_set_cc(s->qp, &c->cfg.cc);
		if (r < 0 && r != -EINVAL)
			return r;
	}
	s->ud = true;
	/* A UD QP receives from anyone, in either family: the context listens on its IPv6
	 * address too (when it has one; a failure only leaves IPv6 datagrams unreceived, and
	 * this QP's IPv6 sends counted in tx_bad_ah). */
	if (c->cfg.has_v6)
		(void)start_v6(c);
	for (int f = 0; f < FAM__COUNT; f++) {
		int r = ud_sport_get(c, s, f);
		if (r < 0) {
			for (int g = 0; g < FAM__COUNT; g++)
				if (s->ud_ref[g])
					io_udp_sport_put(io_of(c, g == FAM_V6), s->ud_ref[g]);
			memset(s->ud_ref, 0, sizeof(s->ud_ref));
			s->ud = false;
			return r;
		}
	}
	return 0;
}

/* epoll data: the IPv4 and IPv6 sockets, the kick eventfd, the multicast group sockets, the
 * mover's deadman timer. */
#define EV_SOCK4   0u
#define EV_KICK	   1u
#define EV_SOCK6   2u
#define EV_MCAST   3u
#define EV_DEADMAN 4u

int core_mcast_attach(struct core_ctx *c, uint32_t qpn, const uint8_t mgid[16])
{
	struct core_qp *s = slot_of(c, qpn);
	if (!s || !s->qp || !s->ud || !io_mcast_gid_is_mcast(mgid))
		return -EINVAL;
	if (!c->mc) {
		struct io_mcast_config mcfg = {.ifindex = c->cfg.ifindex,
					       .port = c->cfg.port ? c->cfg.port : ROCE_UDP_PORT,
					       .rcvbuf = 4 << 20};
		struct io_mcast *m;
		int r = io_mcast_open(&mcfg, &m);
		if (r < 0)
			return r;
		if (c->epfd >= 0) {
			struct epoll_event ev = {.events = 0, .data.u32 = EV_MCAST};
			if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, io_mcast_fd(m), &ev) != 0) {
				r = -errno;
				io_mcast_close(m);
				return r;
			}
		}
		/* The progress thread arms it without the lock (arm_socket). */
		__atomic_store_n(&c->mc, m, __ATOMIC_RELEASE);
	}
	int r = core_mg_attach(&c->mg, mgid, qpn);
	if (r == 1) {
		/* A new group for this context: its socket joins on the device's interface. */
		int j = io_mcast_join(c->mc, mgid);
		if (j < 0) {
			core_mg_detach(&c->mg, mgid, qpn);
			return j;
		}
	}
	return r < 0 ? r : 0;
}

int core_mcast_detach(struct core_ctx *c, uint32_t qpn, const uint8_t mgid[16])
{
	int r = core_mg_detach(&c->mg, mgid, qpn);
	if (r == 1)
		io_mcast_leave(c->mc, mgid);
	return r < 0 ? r : 0;
}

static struct core_ah *ah_lookup(struct core_ctx *c, uint32_t handle)
{
	uint32_t idx = handle & 0xFFFFu;
	if (idx == 0 || idx >= c->nahs)
		return NULL;
	struct core_ah *a = &c->ahs[idx];
	if (!a->used || a->gen != (uint16_t)(handle >> 16))
		return NULL;
	return a;
}

int core_ah_create(struct core_ctx *c, const struct core_path *path, uint32_t *handle)
{
	/* Next fit from the last slot taken: a freed slot is not reused at once, which keeps
	 * (index, generation) pairs apart for longer. */
	uint32_t idx = c->nahs;
	for (uint32_t i = 1; i < c->nahs; i++) {
		uint32_t k = 1 + (c->ah_last + i - 1) % (c->nahs - 1);
		if (!c->ahs[k].used) {
			idx = k;
			break;
		}
	}
	if (idx >= c->nahs) {
		/* Grow (control path, under the lock; the data path only reads the table). */
		uint32_t n = c->nahs ? c->nahs * 2 : 64;
		if (n > CORE_MAX_AH + 1)
			n = CORE_MAX_AH + 1;
		if (idx >= n)
			return -ENOMEM;
		struct core_ah *t = realloc(c->ahs, n * sizeof(*t));
		if (!t)
			return -ENOMEM;
		memset(t + c->nahs, 0, (n - c->nahs) * sizeof(*t));
		c->ahs = t;
		c->nahs = n;
		if (idx == 0)
			idx = 1; /* the first table */
	}
	if (path->ipv6 && c->io) {
		int r = start_v6(c);
		if (r < 0)
			return r;
	}
	struct core_ah *a = &c->ahs[idx];
	a->used = true;
	c->ah_last = idx;
	if (++a->gen == 0)
		a->gen = 1;
	a->path = *path;
	a->path.sport = 0; /* the sending QP's */
	a->path.tos = core_tos(c, path->tos);
	*handle = (uint32_t)a->gen << 16 | idx;
	return 0;
}

void core_ah_destroy(struct core_ctx *c, uint32_t handle)
{
	struct core_ah *a = ah_lookup(c, handle);
	if (!a)
		return;
	a->used = false;
}

void core_qp_wake(struct core_ctx *c, struct eng_qp *qp)
{
	struct core_qp *s = slot_of(c, eng_qp_num(qp));
	if (!s || s->qp != qp || s->queued)
		return;
	s->queued = true;
	s->next_run = NULL;
	if (c->run_tail)
		c->run_tail->next_run = s;
	else
		c->run_head = s;
	c->run_tail = s;
}

static void kick(struct core_ctx *c)
{
	uint64_t one = 1;
	if (sys_write(c->kickfd, &one, sizeof(one)) < 0) {
		/* eventfd counter saturated: the thread is awake anyway */
	}
}

void core_app_enter(struct core_ctx *c, bool poll)
{
	mover_enter(&c->mv, poll ? MOVER_IN_POLL : MOVER_IN_POST);
}

void core_app_leave(struct core_ctx *c, bool poll)
{
	mover_leave(&c->mv, poll ? MOVER_IN_POLL : MOVER_IN_POST, core_now_ns());
}

void core_app_blocks(struct core_ctx *c)
{
	if (c->has_thread && mover_app_blocks(&c->mv))
		kick(c);
}

/* ---- transmit ---- */

/* Whether b goes where a goes, the same way (one GSO train, io.h). */
/* The same QP too (BTH DestQP, bytes 5-7): the peer's kernel steers a super-packet to one
 * socket by its first packet's QP (io/steer.h), so a train for the QPs of two processes on one
 * host would leave its later packets at the wrong one. */
static bool same_way(const struct io_pkt *a, const struct io_pkt *b)
{
	return a->sport == b->sport && a->dport == b->dport && a->tos == b->tos &&
	       a->ttl == b->ttl && a->ipv6 == b->ipv6 && memcmp(a->dst, b->dst, 16) == 0 &&
	       memcmp(a->buf + 5, b->buf + 5, 3) == 0;
}

static enum roce_kind kind_of(const struct io_pkt *p)
{
	const struct roce_opinfo *oi = roce_opinfo(p->buf[0]);
	return oi ? (enum roce_kind)oi->kind : ROCE_KIND_CNP;
}

static bool is_request(const struct io_pkt *p)
{
	enum roce_kind k = kind_of(p);
	return k == ROCE_KIND_SEND || k == ROCE_KIND_WRITE || k == ROCE_KIND_READ_REQ ||
	       k == ROCE_KIND_ATOMIC;
}

/* The engine emits a QP's responder output (the ACK of what it received) before its
 * requests (the application's reply), and a GSO train needs its smaller packet last (io.h):
 * an ACK moves behind the requests that follow it to the same place. The two belong to
 * different PSN spaces (IBTA 9.7.1), so the peer sees each in its order still. */
static void acks_last(struct io_pkt *t, int n)
{
	for (int i = 0; i + 1 < n; i++) {
		if (kind_of(&t[i]) != ROCE_KIND_ACK)
			continue;
		int j = i;
		while (j + 1 < n && same_way(&t[j], &t[j + 1]) && is_request(&t[j + 1]) &&
		       t[j + 1].len >= t[j].len) {
			struct io_pkt tmp = t[j];
			t[j] = t[j + 1];
			t[j + 1] = tmp;
			j++;
		}
		i = j;
	}
}

/* How many packets from t[0] on (of n) form one GSO train (io.h): one way, all of the
 * first's length but a shorter last one, within the kernel's limits. */
static int train_len(const struct io_pkt *t, int n)
{
	size_t total = t[0].len;
	int k = 1;
	while (k < n && k < IO_UDP_TRAIN_MAX && same_way(&t[0], &t[k]) && t[k].len <= t[0].len &&
	       total + t[k].len <= IO_UDP_TRAIN_BYTES) {
		total += t[k].len;
		k++;
		if (t[k - 1].len < t[0].len)
			break; /* a shorter one ends the train */
	}
	return k;
}

/* Writes p's ICRC (its last 4 bytes, in buf) for the IPv4 Identification the kernel will give
 * it. */
static void seal(struct io_pkt *p, uint16_t ip_id)
{
	struct roce_envelope env = {.ipv6 = p->ipv6,
				    .ip_id = p->ipv6 ? 0 : ip_id,
				    .df = true,
				    .sport = p->sport,
				    .dport = p->dport};
	memcpy(env.src, p->src, 16);
	memcpy(env.dst, p->dst, 16);
	if (p->ext) {
		/* headers | payload where it lies | pad, ICRC (drain_qp) */
		size_t pad = p->len - p->ext_len - p->ext_at - ROCE_ICRC_LEN;
		uint8_t *tail = p->buf + p->ext_at;
		roce_icrc_put(tail + pad,
			      roce_icrc3(&env, p->buf, p->ext_at, p->ext, p->ext_len, tail, pad));
		return;
	}
	size_t len = p->len - ROCE_ICRC_LEN;
	roce_icrc_put(p->buf + len, roce_icrc(&env, p->buf, len));
}

/* Sends the transmit batch. The ICRCs are written here, once the batch is known: a packet's
 * IPv4 Identification, which the ICRC covers, depends on its place in a GSO train (io.h). */
static void flush_tx(struct core_ctx *c, uint64_t now)
{
	if (c->ntx == 0)
		return;
	struct io_udp *io = io_of(c, c->tx_v6);
	struct io_fault *fault = c->tx_v6 ? c->fault6 : c->fault;
	/* The fault stage drops and reorders packet by packet: no trains through it. */
	bool gso = !fault && io_udp_gso(io);
	if (gso)
		acks_last(c->tx, c->ntx);
	for (int i = 0; i < c->ntx;) {
		int k = gso ? train_len(&c->tx[i], c->ntx - i) : 1;
		c->tx[i].train = (uint8_t)k;
		for (int j = 0; j < k; j++) {
			if (j)
				c->tx[i + j].train = 0;
			seal(&c->tx[i + j], (uint16_t)j);
		}
		i += k;
	}
	int sent =
	    fault ? io_fault_send(fault, io, c->tx, c->ntx, now) : io_udp_send(io, c->tx, c->ntx);
	if (sent < 0)
		sent = 0;
	c->counters[CORE_CNT_tx_packets] += (uint64_t)sent;
	c->counters[CORE_CNT_tx_errors] += (uint64_t)(c->ntx - sent);
	c->ntx = 0;
}

/* Pulls up to QP_BURST packets from one QP into the transmit batch. Returns true if the QP
 * may have more. A payload of REF_MIN bytes or more in one piece of registered memory stays
 * there: the kernel's copy into the datagram is its only one (io_pkt.ext: the datagram is
 * headers | payload | pad, ICRC, sent before the context's lock is let go, as eng_qp_output_ref
 * asks). A shorter one, or one the fault stage may hold, the engine copies straight to where it
 * goes in the room, the headers written in front of it: copying it costs less than the kernel's
 * walk over three pieces. */
static bool drain_qp(struct core_ctx *c, struct core_qp *s, uint64_t now)
{
	uint32_t ref_min = c->fault || c->fault6 ? UINT32_MAX : REF_MIN;
	for (int n = 0; n < QP_BURST; n++) {
		/* A batch goes out through one socket: one family per batch. */
		if (c->ntx == BATCH || (!s->ud && c->ntx && c->tx_v6 != s->path.ipv6))
			flush_tx(c, now);
		uint8_t *room = c->txbuf[c->ntx];
		uint8_t *payload = room + ROCE_MAX_HDR_LEN;
		struct roce_pkt pkt;
		uint32_t ah = 0;
		if (eng_qp_output_ref(s->qp, now, &pkt, payload,
				      PKT_ROOM - ROCE_MAX_HDR_LEN - 4 - ROCE_ICRC_LEN, &ah,
				      ref_min) != 1)
			return false;
		bool ref = pkt.payload != payload;
		/* Where it goes: the QP's path, or for UD the WR's address handle, resolved
		 * for this packet alone. */
		const struct core_path *path;
		uint16_t sport;
		if (ah) {
			const struct core_ah *a = ah_lookup(c, ah);
			int f = a && a->path.ipv6 ? FAM_V6 : FAM_V4;
			if (!a || !s->ud || !s->ud_ref[f]) {
				c->counters[CORE_CNT_tx_bad_ah]++;
				continue;
			}
			path = &a->path;
			sport = s->ud_sport[f];
			if (c->ntx && c->tx_v6 != path->ipv6) {
				/* The family changes: send the batch, and move this packet's
				 * payload to the first room. */
				flush_tx(c, now);
				room = c->txbuf[0];
				if (!ref) {
					memcpy(room + ROCE_MAX_HDR_LEN, payload, pkt.payload_len);
					pkt.payload = room + ROCE_MAX_HDR_LEN;
				}
				payload = room + ROCE_MAX_HDR_LEN;
			}
		} else {
			if (!s->has_path)
				continue; /* nowhere to send: a QP without an address vector */
			path = &s->path;
			sport = s->path.sport;
		}
		size_t hlen = roce_hdr_len(pkt.bth.opcode);
		uint8_t *start = payload - hlen;
		if (hlen == 0 || roce_build_hdrs(&pkt, start, hlen) != hlen)
			continue;
		/* The pad (and the ICRC) follow the headers when the payload is elsewhere. */
		size_t in_room = ref ? 0 : pkt.payload_len;
		size_t pad = (4 - (pkt.payload_len & 3)) & 3;
		memset(start + hlen + in_room, 0, pad);
		size_t len = hlen + pkt.payload_len + pad;
		uint16_t dport = c->cfg.port ? c->cfg.port : ROCE_UDP_PORT;
		len += ROCE_ICRC_LEN; /* written by flush_tx */

		c->tx_v6 = path->ipv6;
		struct io_pkt *p = &c->tx[c->ntx++];
		p->buf = start;
		p->len = len;
		p->cap = len;
		p->ipv6 = path->ipv6;
		memcpy(p->src, path->src, 16);
		memcpy(p->dst, path->dst, 16);
		p->sport = sport;
		p->dport = dport;
		p->tos = path->tos;
		p->ttl = path->ttl;
		p->ext = ref ? pkt.payload : NULL;
		p->ext_len = ref ? pkt.payload_len : 0;
		p->ext_at = ref ? (uint32_t)hlen : 0;
	}
	return true;
}

static bool run_output(struct core_ctx *c, uint64_t now)
{
	bool did = false;
	/* Take the current list; QPs woken while we drain go on a fresh one. */
	struct core_qp *s = c->run_head;
	c->run_head = c->run_tail = NULL;
	c->deferred = 0;
	c->out_held = false;
	while (s) {
		struct core_qp *next = s->next_run;
		s->queued = false;
		did = true;
		if (drain_qp(c, s, now))
			core_qp_wake(c, s->qp); /* more to send: back of the line */
		s = next;
	}
	flush_tx(c, now);
	return did;
}

/* ---- QP1 (core/gsi.h) ---- */

void core_gsi_count(struct core_ctx *c, int counter)
{
	if (counter >= 0 && counter < CORE_CNT__COUNT)
		c->counters[counter]++;
}

int core_gsi_send(struct core_ctx *c, const struct gsi_frame *f)
{
	if (!c->io) {
		char err[160];
		int r = core_start(c, err, sizeof(err));
		if (r < 0)
			return r;
	}
	if (f->ipv6) {
		int r = start_v6(c);
		if (r < 0)
			return r;
	}
	struct io_udp *io = io_of(c, f->ipv6);
	if (!io)
		return -EAFNOSUPPORT;
	/* A peer on our own address is a softrdma process of this host: the MAD goes straight to
	 * its endpoint, as the QP1 router would pass it on. Through UDP it would reach whichever
	 * process routes QP1 for the host, and that may be this one, about to exit (rdma_reject
	 * then _exit: the REJ went down with it). Nobody there: through UDP after all, and the
	 * router answers as the kernel's CM (REJ 8, ...). */
	const uint8_t *self = f->ipv6 ? c->cfg.local_addr6 : c->cfg.local_addr;
	if (!memcmp(f->dst, self, 16)) {
		struct gsi_frame d = *f;
		d.sport = io_udp_port(io);
		if (gsi_deliver(&d) == 0) {
			c->counters[CORE_CNT_gsi_local]++;
			return 0;
		}
	}
	uint8_t buf[ROCE_BTH_LEN + ROCE_DETH_LEN + CM_MAD_LEN + ROCE_ICRC_LEN];
	struct roce_pkt pkt;
	memset(&pkt, 0, sizeof(pkt));
	pkt.bth.opcode = ROCE_UD_SEND_ONLY;
	pkt.bth.pkey = ROCE_DEFAULT_PKEY;
	pkt.bth.dqpn = 1;
	pkt.bth.psn = c->gsi_psn++ & 0xFFFFFFu;
	pkt.deth.qkey = ROCE_GSI_QKEY;
	pkt.deth.src_qpn = 1;
	pkt.payload = f->mad;
	pkt.payload_len = CM_MAD_LEN;
	size_t len = roce_build(&pkt, buf, sizeof(buf));
	if (len != sizeof(buf))
		return -EINVAL;
	uint16_t sport = io_udp_port(io);
	uint16_t dport = c->cfg.port ? c->cfg.port : ROCE_UDP_PORT;
	/* The ICRC covers the address the socket really sends from. */
	const uint8_t *src = f->ipv6 ? c->cfg.local_addr6 : c->cfg.local_addr;
	struct roce_envelope env = {.ipv6 = f->ipv6, .df = true, .sport = sport, .dport = dport};
	memcpy(env.src, src, 16);
	memcpy(env.dst, f->dst, 16);
	roce_icrc_put(buf + len - ROCE_ICRC_LEN, roce_icrc(&env, buf, len - ROCE_ICRC_LEN));
	struct io_pkt p = {.buf = buf,
			   .cap = len,
			   .len = len,
			   .ipv6 = f->ipv6,
			   .sport = sport,
			   .dport = dport,
			   .tos = core_tos(c, f->tos)};
	memcpy(p.src, src, 16);
	memcpy(p.dst, f->dst, 16);
	if (io_udp_send(io, &p, 1) != 1) {
		c->counters[CORE_CNT_tx_errors]++;
		return -EIO;
	}
	c->counters[CORE_CNT_tx_packets]++;
	c->counters[CORE_CNT_gsi_tx]++;
	return 0;
}

/* ---- receive ---- */

/* The GRH area of a UD receive (spec 10, rxe execute): the IPv6 header, or for IPv4 20 zero
 * bytes and the IPv4 header, rebuilt byte for byte from what the socket reports (TOS / traffic
 * class, TTL / hop limit, addresses) and the IPv4 ID that the ICRC check solved. The flow
 * label is 0, as rxe sends it. */
static void build_grh(uint8_t grh[ENG_GRH_LEN], const struct io_pkt *p, uint16_t ip_id)
{
	uint32_t udp_len = 8 + (uint32_t)p->len;
	memset(grh, 0, ENG_GRH_LEN);
	if (p->ipv6) {
		grh[0] = (uint8_t)(0x60 | p->tos >> 4);
		grh[1] = (uint8_t)(p->tos << 4);
		grh[4] = (uint8_t)(udp_len >> 8);
		grh[5] = (uint8_t)udp_len;
		grh[6] = 17; /* UDP */
		grh[7] = p->ttl;
		memcpy(grh + 8, p->src, 16);
		memcpy(grh + 24, p->dst, 16);
		return;
	}
	uint8_t *h = grh + 20;
	uint32_t total = 20 + udp_len, sum = 0;
	h[0] = 0x45;
	h[1] = p->tos;
	h[2] = (uint8_t)(total >> 8);
	h[3] = (uint8_t)total;
	h[4] = (uint8_t)(ip_id >> 8);
	h[5] = (uint8_t)ip_id;
	h[6] = 0x40; /* DF */
	h[8] = p->ttl;
	h[9] = 17;
	memcpy(h + 12, p->src + 12, 4);
	memcpy(h + 16, p->dst + 12, 4);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	h[10] = (uint8_t)(~sum >> 8);
	h[11] = (uint8_t)~sum;
}

/* Parses a datagram and checks its ICRC: true when it is a good RoCEv2 packet (*pkt filled,
 * *ip_id the IPv4 ID the check solved), else counted and false. */
static bool parse_checked(struct core_ctx *c, const struct io_pkt *p, struct roce_pkt *pkt,
			  uint16_t *ip_id)
{
	static const enum core_counter parse_counter[ROCE_ERR__COUNT] = {
	    [ROCE_ERR_TRUNCATED] = CORE_CNT_rx_truncated,
	    [ROCE_ERR_UNKNOWN_OPCODE] = CORE_CNT_rx_unknown_opcode,
	    [ROCE_ERR_BAD_TVER] = CORE_CNT_rx_bad_tver,
	    [ROCE_ERR_BAD_PAD] = CORE_CNT_rx_bad_pad,
	    [ROCE_ERR_UNEXPECTED_PAYLOAD] = CORE_CNT_rx_unexpected_payload,
	};
	enum roce_parse_err perr = roce_parse(p->buf, p->len, pkt);
	if (perr != ROCE_ERR_NONE) {
		c->counters[parse_counter[perr]]++;
		return false;
	}
	/* Every QP is in the default partition (rxe check_keys: the P_Key must match 0xFFFF,
	 * full or limited member). */
	if ((pkt->bth.pkey & 0x7FFF) != 0x7FFF) {
		c->counters[CORE_CNT_rx_bad_pkey]++;
		return false;
	}
	/* The ID a softrdma sender gave it (io.h): 0, or its place in a GSO train, which GRO
	 * keeps together (a good guess makes the check one CRC pass). */
	struct roce_envelope env = {
	    .ipv6 = p->ipv6, .df = true, .ip_id = p->train, .sport = p->sport, .dport = p->dport};
	memcpy(env.src, p->src, 16);
	memcpy(env.dst, p->dst, 16);
	*ip_id = 0;
	if (roce_icrc_check(&env, p->buf, p->len, ip_id) != 0) {
		c->counters[CORE_CNT_rx_bad_icrc]++;
		return false;
	}
	return true;
}

/* DCQCN's notification (spec 9.1, IBA A17; as RoCE NICs send it): a CNP to QP dqpn at dst
 * (from src, UDP source port sport), BTH opcode 0x81 with BECN set and PSN 0, 16 reserved
 * bytes, in a class of its own (DSCP 48, not ECN-capable), sent at once. */
static void send_cnp(struct core_ctx *c, bool ipv6, const uint8_t src[16], const uint8_t dst[16],
		     uint16_t sport, uint8_t ttl, uint32_t dqpn)
{
	uint8_t buf[ROCE_BTH_LEN + 16 + ROCE_ICRC_LEN];
	struct roce_pkt pkt;
	memset(&pkt, 0, sizeof(pkt));
	pkt.bth.opcode = ROCE_CNP;
	pkt.bth.pkey = ROCE_DEFAULT_PKEY;
	pkt.bth.becn = true;
	pkt.bth.dqpn = dqpn;
	size_t len = roce_build(&pkt, buf, sizeof(buf));
	if (len != sizeof(buf))
		return;
	struct io_pkt p = {.buf = buf,
			   .cap = len,
			   .len = len,
			   .ipv6 = ipv6,
			   .sport = sport,
			   .dport = c->cfg.port ? c->cfg.port : ROCE_UDP_PORT,
			   .tos = MARK_CNP_DSCP << 2,
			   .ttl = ttl};
	memcpy(p.src, src, 16);
	memcpy(p.dst, dst, 16);
	seal(&p, 0); /* alone: IPv4 ID 0 */
	if (io_udp_send(io_of(c, ipv6), &p, 1) != 1) {
		c->counters[CORE_CNT_tx_errors]++;
		return;
	}
	c->counters[CORE_CNT_tx_packets]++;
	c->counters[CORE_CNT_cnp_tx]++;
}

/* A connected QP's CNP: to its peer, along its path. */
static void send_cnp_rc(struct core_ctx *c, struct core_qp *s)
{
	send_cnp(c, s->path.ipv6, s->path.src, s->path.dst, s->path.sport, s->path.ttl,
		 eng_qp_dest_num(s->qp));
}

/* A UD QP's CNP for datagram p: to the QP that sent it (the DETH's source QP), at the address
 * and port it came from, from this QP's source port. As for RC, at most one per interval per
 * receiving QP (dcqcn_np_mark), whichever sender's datagram was marked. */
static void send_cnp_ud(struct core_ctx *c, struct core_qp *s, const struct io_pkt *p,
			uint32_t src_qpn)
{
	int f = p->ipv6 ? FAM_V6 : FAM_V4;
	if (!s->ud_ref[f])
		return;
	send_cnp(c, p->ipv6, p->dst, p->src, s->ud_sport[f], UD_CNP_TTL, src_qpn);
}

static void input_one(struct core_ctx *c, const struct io_pkt *p, uint64_t now)
{
	struct roce_pkt pkt;
	uint16_t ip_id;
	if (!parse_checked(c, p, &pkt, &ip_id))
		return;
	bool ce = (p->tos & 3) == MARK_CE;
	if (ce)
		c->counters[CORE_CNT_rx_ecn_ce]++; /* RFC 3168 */
	if (pkt.bth.dqpn == ROCE_MCAST_QPN) {
		/* rxe_rcv_mcast_pkt: the group is the packet's destination address, and this
		 * socket's is unicast: no group. */
		c->counters[CORE_CNT_rx_mcast_unicast]++;
		return;
	}
	if (pkt.bth.dqpn == 1) {
		gsi_route(c, p, &pkt);
		return;
	}
	struct core_qp *s = slot_of(c, pkt.bth.dqpn);
	if (!s || !s->qp) {
		c->counters[CORE_CNT_rx_unknown_qp]++;
		return;
	}
	if (s->ud) {
		/* DCQCN on UD as on RC (mlx5 rate-limits UD QPs too): a CNP cuts the QP's rate
		 * for every destination; a marked datagram is answered with one. Like the
		 * datagrams themselves, a CNP may come from anyone. */
		if (pkt.bth.opcode == ROCE_CNP) {
			c->counters[CORE_CNT_cnp_rx]++;
			eng_qp_cnp(s->qp, now);
			return;
		}
		if (ce && c->cfg.ecn && dcqcn_np_mark(&s->np, now))
			send_cnp_ud(c, s, p, pkt.deth.src_qpn);
		/* A UD QP takes datagrams from anyone (rxe checks the peer of RC / UC QPs only);
		 * the receive buffer gets the IP header they came in. The ICRC residual stays
		 * 16 bits: peers vary, so no per-peer IPv4 ID rule applies. */
		uint8_t grh[ENG_GRH_LEN];
		build_grh(grh, p, ip_id);
		eng_qp_input_net(s->qp, &pkt, grh, now);
		return;
	}
	if (!s->has_path) {
		c->counters[CORE_CNT_rx_no_path]++;
		return;
	}
	/* RC: the IP source must be the QP's peer (rxe check_addr). */
	if (memcmp(p->src, s->path.dst, 16) != 0) {
		c->counters[CORE_CNT_rx_wrong_peer]++;
		return;
	}
	/* A peer that sends from a port it binds - the pair's port, which rxe and softrdma both
	 * compute from the two QPNs (roce_udp_sport), or the RoCE port itself (softrdma's
	 * fallback) - is the only sender from that port on its address: no other user can bind
	 * it. Once it has been seen there, the QP takes packets from that port only, so a local
	 * user sending from 127.0.0.1 forges no ACK, NAK or request. Other peers (NICs with
	 * their own port choice) keep the address check alone, as on rxe. */
	if (!s->peer_sport) {
		if (p->sport == s->sport_ref || p->sport == p->dport)
			s->peer_sport = p->sport;
	} else if (p->sport != s->peer_sport) {
		c->counters[CORE_CNT_rx_wrong_port]++;
		return;
	}
	if (s->id_mode == ID_UNKNOWN) {
		s->id_mode = ip_id == 0 ? ID_ZERO : ID_ANY;
	} else if (s->id_mode == ID_ZERO && ip_id >= IO_UDP_TRAIN_MAX) {
		c->counters[CORE_CNT_rx_bad_icrc]++;
		return;
	}
	if (pkt.bth.opcode == ROCE_CNP) {
		c->counters[CORE_CNT_cnp_rx]++;
		eng_qp_cnp(s->qp, now);
		return;
	}
	if (ce && c->cfg.ecn && dcqcn_np_mark(&s->np, now))
		send_cnp_rc(c, s);
	eng_qp_input(s->qp, &pkt, now);
}

/* A datagram from a group socket: every QP of this context attached to the group gets it, in
 * attach order, each through its own checks (state, Q_Key, receive WQE: the engine counts its
 * drops per QP), as rxe_rcv_mcast_pkt clones the packet for each QP of the group. Other
 * processes and contexts that joined got their own copy from the kernel (io/mcast.h). */
static void input_mcast_one(struct core_ctx *c, const struct io_pkt *p, uint64_t now)
{
	struct roce_pkt pkt;
	uint16_t ip_id;
	c->counters[CORE_CNT_rx_mcast]++;
	if (!parse_checked(c, p, &pkt, &ip_id))
		return;
	/* A multicast packet carries DestQP 0xFFFFFF (spec 1.1, rxe hdr_check). */
	if (pkt.bth.dqpn != ROCE_MCAST_QPN) {
		c->counters[CORE_CNT_rx_mcast_bad_qpn]++;
		return;
	}
	const struct core_mgroup *g = core_mg_find(&c->mg, p->dst);
	if (!g) {
		c->counters[CORE_CNT_rx_mcast_no_group]++;
		return;
	}
	uint8_t grh[ENG_GRH_LEN];
	build_grh(grh, p, ip_id);
	for (uint32_t k = 0; k < g->nqp; k++) {
		struct core_qp *s = slot_of(c, g->qpn[k]);
		if (!s || !s->qp)
			continue; /* cannot happen: a QP leaves its groups when it goes */
		c->counters[CORE_CNT_mcast_deliveries]++;
		eng_qp_input_net(s->qp, &pkt, grh, now);
	}
}

/* The receive array: each entry owns one of rxbuf's rooms, set once. Receiving only permutes
 * the entries (io_udp_recv, io_mcast_recv), so the rooms stay with the array and an (empty)
 * poll does not hand them out again. */
static void rx_rooms(struct core_ctx *c)
{
	if (c->rx[0].buf)
		return;
	for (int i = 0; i < BATCH; i++) {
		c->rx[i].buf = c->rxbuf[i];
		c->rx[i].cap = PKT_ROOM;
	}
}

static bool input_mcast(struct core_ctx *c, uint64_t now)
{
	rx_rooms(c);
	int n = io_mcast_recv(c->mc, c->rx, BATCH);
	c->rx_full |= n == BATCH;
	if (n <= 0)
		return false;
	c->counters[CORE_CNT_rx_packets] += (uint64_t)n;
	for (int i = 0; i < n; i++)
		input_mcast_one(c, &c->rx[i], now);
	return true;
}

/* With GRO the packets are read where io received them (io_udp_recv_view): a bulk transfer's
 * payload is then copied once in user space, into the memory region, instead of twice. */
static bool input_from(struct core_ctx *c, struct io_udp *io, uint64_t now)
{
	struct io_pkt *rx = c->rx;
	int n;
	if (io_udp_gro(io)) {
		rx = c->rxv;
		n = io_udp_recv_view(io, rx, BATCH, PKT_ROOM);
	} else {
		rx_rooms(c);
		n = io_udp_recv(io, rx, BATCH);
	}
	c->rx_full |= n == BATCH;
	if (n <= 0)
		return false;
	c->counters[CORE_CNT_rx_packets] += (uint64_t)n;
	for (int i = 0; i < n; i++)
		input_one(c, &rx[i], now);
	return true;
}

static bool run_input(struct core_ctx *c, uint64_t now)
{
	c->rx_full = false;
	bool did = input_from(c, c->io, now);
	if (c->io6)
		did |= input_from(c, c->io6, now);
	if (io_mcast_count(c->mc) > 0)
		did |= input_mcast(c, now);
	return did;
}

/* The QPs whose deadline has come, each once per pass: taken out of the heap first, so that
 * one whose timer leaves it due (it should not) waits for the next pass instead of looping;
 * eng_qp_timer re-files each through core_qp_deadline, and the last line makes sure of it. */
static void run_qp_timers(struct core_ctx *c, uint64_t now)
{
	struct core_qp *due = NULL;
	struct tmheap_node *t;
	while ((t = tmheap_top(&c->timers)) != NULL && t->key <= now) {
		struct core_qp *s = (struct core_qp *)((char *)t - offsetof(struct core_qp, timer));
		tmheap_remove(&c->timers, t);
		s->next_due = due;
		due = s;
	}
	for (struct core_qp *s = due; s; s = s->next_due) {
		eng_qp_timer(s->qp, now);
		tmheap_set(&c->timers, &s->timer, eng_qp_deadline(s->qp));
	}
}

static void run_timers(struct core_ctx *c, uint64_t now)
{
	if (tmheap_next(&c->timers) <= now)
		run_qp_timers(c, now);
	uint64_t next = tmheap_next(&c->timers);
	for (int f = 0; f < FAM__COUNT; f++) {
		struct io_udp *io = io_of(c, f == FAM_V6);
		struct io_fault *fault = f == FAM_V6 ? c->fault6 : c->fault;
		if (!io)
			continue;
		/* Steering bookkeeping: liveness of the other processes on our port (io.h). */
		if (io_udp_next_service_ns(io) <= now)
			io_udp_service(io);
		uint64_t svc = io_udp_next_service_ns(io);
		if (svc < next)
			next = svc;
		if (fault) {
			io_fault_flush(fault, io, now);
			uint64_t d = io_fault_deadline(fault);
			if (d < next)
				next = d;
		}
	}
	__atomic_store_n(&c->next_deadline, next,
			 __ATOMIC_RELAXED); /* the thread reads it unlocked */
}

static void kick_thread_if_late(struct core_ctx *c)
{
	if (!c->has_thread)
		return;
	uint64_t wake_at = atomic_load_explicit(&c->thread_wake_at, memory_order_relaxed);
	if (c->next_deadline < wake_at)
		kick(c);
}

void core_flush(struct core_ctx *c)
{
	if (c->io && c->run_head) {
		run_output(c, core_now_ns());
		kick_thread_if_late(c);
	}
}

/* Whether output made due during an application's call may wait for its next call: only
 * when a progress thread will send it should that call never come. That thread must be
 * looking at the application (APP: its look takes over from an application that went away
 * within a nap, core/mover.h). In THREAD it waits for packets and timers only and would not
 * see the output: an application that polls a completion there and then computes for a while
 * before it calls again (or waits on another channel) would keep the ACK from the peer until
 * the peer's retry. Without a thread, or in THREAD, it goes now. */
static bool output_may_wait(const struct core_ctx *c)
{
	return c->has_thread && mover_who(&c->mv) == MOVER_APP;
}

void core_posted(struct core_ctx *c, struct eng_qp *qp)
{
	/* A pipeline only while the application moves the packets: it will poll for them. */
	if (c->io && c->run_head &&
	    mover_post_waits(&c->mv, c->has_thread, eng_qp_awaits_response(qp), &c->deferred)) {
		c->counters[CORE_CNT_tx_deferred]++;
		return;
	}
	core_flush(c);
}

bool core_progress(struct core_ctx *c)
{
	if (!c->io)
		return false; /* no QP yet: nothing can move */
	uint64_t now = core_now_ns();
	bool did = run_input(c, now);
	run_timers(c, now);
	did |= run_output(c, now);
	if (c->run_head) /* timers or input made more output due */
		did |= run_output(c, now);
	kick_thread_if_late(c);
	return did;
}

int core_poll_cq(struct core_ctx *c, struct eng_cq *cq, int n, struct ibv_wc *wc)
{
	if (!c->io)
		return eng_cq_poll(cq, n, wc);
	uint64_t now = 0;
	/* What the previous call left due (ACKs) goes first: its completions are with the
	 * application by now. Unless no post waits in it, the output may wait, and this call
	 * finds completions already there: then the ACKs wait one call more, for the reply the
	 * application is about to post (core_posted sends both in one system call, one GSO
	 * train; a ping-pong's server sent the ACK of each request with a system call of its
	 * own, between the request and the reply). Once only, so that a stream's receiver, whose
	 * every poll finds completions, still acknowledges every other call. */
	if (c->run_head) {
		if (!c->out_held && c->deferred == 0 && output_may_wait(c)) {
			int got = eng_cq_poll(cq, n, wc);
			if (got) {
				c->out_held = true;
				return got;
			}
		}
		now = core_now_ns();
		run_output(c, now);
	}
	int got = eng_cq_poll(cq, n, wc);
	if (got)
		return got; /* the clock is read only when something needs it */
	if (!now)
		now = core_now_ns();
	run_input(c, now);
	run_timers(c, now);
	got = eng_cq_poll(cq, n, wc);
	/* A completion arrived: hand it over now and send the ACKs it caused at the next call,
	 * so the application's reply is not queued behind our ACK's system call (if the output
	 * may wait: without a progress thread a peer would wait for its ACK forever). */
	if (!got || !output_may_wait(c))
		run_output(c, now);
	kick_thread_if_late(c);
	return got;
}

/* ---- progress thread ---- */

static void arm_socket(struct core_ctx *c, bool arm)
{
	for (int f = 0; f < FAM__COUNT; f++) {
		struct io_udp *io = io_of(c, f == FAM_V6);
		if (!io || arm == c->sock_armed[f])
			continue;
		/* In the set only while the thread moves the packets (level-triggered: each of
		 * its passes reads what is there); out of it otherwise, so that a datagram the
		 * application reads wakes nobody. */
		struct epoll_event ev = {.events = EPOLLIN,
					 .data.u32 = f == FAM_V6 ? EV_SOCK6 : EV_SOCK4};
		epoll_ctl(c->epfd, arm ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, io_udp_fd(io), &ev);
		c->sock_armed[f] = arm;
	}
	struct io_mcast *mc = __atomic_load_n(&c->mc, __ATOMIC_ACQUIRE);
	if (mc && arm != c->mc_armed) {
		struct epoll_event ev = {.events = arm ? (EPOLLIN | EPOLLONESHOT) : 0,
					 .data.u32 = EV_MCAST};
		epoll_ctl(c->epfd, EPOLL_CTL_MOD, io_mcast_fd(mc), &ev);
		c->mc_armed = arm;
	}
}

/* epoll_pwait2 (ns timeout) where the kernel has it (Linux 5.11); otherwise, and under
 * valgrind 3.19, which fails it with ENOSYS, epoll_wait with the timeout rounded up to whole
 * milliseconds: without this the thread would spin on the error. */
int core_epoll_nap(int epfd, struct epoll_event *evs, int max, uint64_t ns)
{
	static atomic_bool no_pwait2;
	if (!atomic_load_explicit(&no_pwait2, memory_order_relaxed)) {
		struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
		int n = epoll_pwait2(epfd, evs, max, &ts, NULL);
		if (n >= 0 || errno != ENOSYS)
			return n;
		atomic_store_explicit(&no_pwait2, true, memory_order_relaxed);
	}
	long long ms = (long long)((ns + 999999) / 1000000);
	return epoll_wait(epfd, evs, max, ms > INT_MAX ? INT_MAX : (int)ms);
}

static void *progress_main(void *arg)
{
	struct core_ctx *c = arg;
	mover_thread_setup();
	while (!atomic_load(&c->stop)) {
		uint64_t now = core_now_ns();
		/* Read without the lock: waiting for it here would queue the thread behind
		 * every poll of a busy application (and make each of its unlocks a wake-up). */
		uint64_t deadline = __atomic_load_n(&c->next_deadline, __ATOMIC_RELAXED);
		struct mover_wait w = mover_plan(&c->mv, now, deadline, MAX_SLEEP_NS);
		arm_socket(c, w.on_io);
		/* Kicks for earlier deadlines only while the thread runs the timers (core.h);
		 * while the application moves the packets it runs them. */
		atomic_store_explicit(&c->thread_wake_at,
				      mover_who(&c->mv) == MOVER_THREAD ? w.until : 0,
				      memory_order_relaxed);
		struct epoll_event evs[4];
		/* Datagrams a coalesced receive left in io (io.h "GRO") do not make the socket
		 * readable: the thread moves them before it sleeps. Read without the lock: a stale
		 * answer costs one pass, or one nap of the application's. */
		bool held = w.on_io && (io_udp_pending(c->io) || io_udp_pending(c->io6));
		int n = core_epoll_nap(c->epfd, evs, 4, held || w.until <= now ? 0 : w.until - now);
		atomic_store_explicit(&c->thread_wake_at, 0, memory_order_relaxed);
		bool on_io = held, dead = false, kicked = false;
		for (int i = 0; i < n; i++) {
			if (evs[i].data.u32 == EV_KICK) {
				uint64_t v;
				if (read(c->kickfd, &v, sizeof(v)) < 0) {
					/* spurious: nothing to clear */
				}
				kicked = true;
				continue;
			}
			if (evs[i].data.u32 == EV_DEADMAN) {
				mover_deadman_fired(&c->mv);
				dead = true;
				continue;
			}
			on_io = true;
			/* The multicast socket's event is one-shot; the unicast sockets stay in
			 * the set (level-triggered) until arm_socket takes them out. */
			if (evs[i].data.u32 == EV_MCAST)
				c->mc_armed = false;
		}
		if (atomic_load(&c->stop))
			break;
		now = core_now_ns();
		/* The deadman alone in THREAD (an application call armed it as the thread took
		 * over): no look, no time-out. */
		if (dead && !on_io && !kicked && now < w.until && mover_who(&c->mv) == MOVER_THREAD)
			continue;
		if (!mover_woke(&c->mv, now, on_io,
				__atomic_load_n(&c->next_deadline, __ATOMIC_RELAXED)))
			continue;
		bool waited = false;
		if (!core_trylock(c)) {
			if (!mover_lock_busy(&c->mv))
				continue;
			core_lock(c);
			waited = true;
		}
		bool did = core_progress(c);
		bool again = c->run_head || c->rx_full;
		core_unlock(c);
		/* Round again at once only for what a pass left: output still due (a QP's burst
		 * limit) or a full receive batch. Datagrams that come later make the socket
		 * readable (level-triggered epoll), and those a coalesced receive left in io are
		 * looked at before the wait (held): a pass more to find nothing would cost an empty
		 * recvmmsg at every wake-up. */
		for (int i = 0; again && i < 63; i++) {
			if (!core_trylock(c))
				break;
			core_progress(c);
			again = c->run_head || c->rx_full;
			core_unlock(c);
		}
		mover_passed(&c->mv, on_io, waited, did);
	}
	return NULL;
}

/* The process's contexts, for core_at_exit. Taken without a context's lock, never under one. */
static pthread_mutex_t ctxs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_ctx *ctxs;

int core_ctx_create(const struct core_config *cfg, struct core_ctx **out)
{
	struct core_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	sr_lock_init(&c->lock);
	c->cfg = *cfg;
	c->epfd = -1;
	c->kickfd = -1;
	c->next_deadline = UINT64_MAX;
	mover_init(&c->mv);
	tmheap_init(&c->timers);
	c->pid = getpid();
	pthread_mutex_lock(&ctxs_lock);
	c->all_next = ctxs;
	ctxs = c;
	pthread_mutex_unlock(&ctxs_lock);
	*out = c;
	return 0;
}

/* At exit, after the CM's goodbyes (cm.c cm_at_exit, priority 200, runs first): one last pass
 * of every RoCE context. The process may be the member of the UDP 4791 group that routes QP1
 * for the host (gsi.h): CM MADs queued on its socket, its own last REJ or DREQ to a local
 * peer among them, would go down with it; the pass routes them first. Contexts busy on another
 * thread are left alone (trylock). */
__attribute__((destructor(150))) static void core_at_exit(void)
{
	if (pthread_mutex_trylock(&ctxs_lock) != 0)
		return;
	for (struct core_ctx *c = ctxs; c; c = c->all_next) {
		if (c->pid != getpid() || !c->io || !core_trylock(c))
			continue;
		for (int i = 0; i < 8 && core_progress(c); i++) {
		}
		core_unlock(c);
	}
	pthread_mutex_unlock(&ctxs_lock);
}

bool core_started(const struct core_ctx *c)
{
	return c->io != NULL;
}

bool core_no_thread(const struct core_ctx *c)
{
	return c->cfg.no_thread;
}

/* Why the RoCE port could not be opened, in words that name who holds it and the way out. */
static void port_error(char *err, size_t errlen, int ret, const uint8_t addr[16], uint16_t port)
{
	if (ret == -EPERM) {
		snprintf(
		    err, errlen,
		    "the steering registry of UDP port %u needs a run directory of your own "
		    "(uid %u; the message above says what is wrong with it): remove the one in "
		    "the way, or name another in SOFTRDMA_RUN_DIR",
		    port, (unsigned)geteuid());
		return;
	}
	if (ret != -EADDRINUSE) {
		snprintf(err, errlen, "cannot open the UDP socket: %s", strerror(-ret));
		return;
	}
	long uid = io_udp_port_holder(addr, port);
	if (uid >= 0 && (uid_t)uid != geteuid()) {
		struct passwd pw, *who = NULL;
		char buf[1024];
		getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &who);
		snprintf(
		    err, errlen,
		    "UDP port %u on this address is held by user %s (uid %ld)%s: softrdma "
		    "processes share the port only with processes of the same user (a "
		    "SO_REUSEPORT group is one user's); run as that user, or use another port on "
		    "both ends (SOFTRDMA_UDP_PORT)",
		    port, who ? who->pw_name : "?", uid,
		    uid == 0 ? ", or by the kernel (rdma_rxe on this interface?)" : "");
		return;
	}
	if (uid >= 0)
		snprintf(
		    err, errlen,
		    "UDP port %u is held by another program of yours that is not in softrdma's "
		    "group%s; softrdma processes share it only among themselves",
		    port, uid == 0 ? " (or by the kernel's rdma_rxe)" : "");
	else
		snprintf(err, errlen,
			 "UDP port %u is held by another program (the kernel's rdma_rxe?); "
			 "softrdma processes share it only among themselves",
			 port);
}

int core_start(struct core_ctx *c, char *err, size_t errlen)
{
	int ret;
	if (c->io)
		return 0;
	struct io_udp_config icfg = {0};
	icfg.family = AF_INET;
	memcpy(icfg.addr, c->cfg.local_addr, 16);
	icfg.port = c->cfg.port ? c->cfg.port : ROCE_UDP_PORT;
	icfg.tos = core_tos(c, 0);
	icfg.priority = core_priority(c);
	/* Room for a full window of 4 KiB packets from many QPs (the kernel may clamp it). */
	icfg.rcvbuf = 8 << 20;
	icfg.sndbuf = 4 << 20;
	icfg.ifindex = c->cfg.ifindex;
	struct io_udp *io;
	ret = io_udp_open(&icfg, &io);
	if (ret < 0) {
		port_error(err, errlen, ret, icfg.addr, icfg.port);
		return ret;
	}

	const char *spec = c->cfg.fault_spec ? c->cfg.fault_spec : getenv(IO_FAULT_ENV);
	if (spec && *spec) {
		struct io_fault_cfg fcfg;
		char ferr[128];
		ret = io_fault_parse(spec, &fcfg, ferr, sizeof(ferr));
		if (ret < 0) {
			snprintf(err, errlen, "%s: %s", IO_FAULT_ENV, ferr);
			goto close_io;
		}
		ret = io_fault_create(&fcfg, 4096, PKT_ROOM, &c->fault);
		if (ret < 0) {
			snprintf(err, errlen, "fault injection: %s", strerror(-ret));
			goto close_io;
		}
	}

	if (!c->cfg.no_thread) {
		c->epfd = epoll_create1(EPOLL_CLOEXEC);
		c->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (c->epfd < 0 || c->kickfd < 0) {
			ret = -errno;
			snprintf(err, errlen, "epoll/eventfd: %s", strerror(errno));
			goto close_fds;
		}
		struct epoll_event ev = {.events = EPOLLIN};
		ev.data.u32 = EV_KICK;
		epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->kickfd, &ev);
		mover_deadman_open(&c->mv);
		ev.data.u32 = EV_DEADMAN;
		if (c->mv.deadman_fd >= 0 &&
		    epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->mv.deadman_fd, &ev) != 0)
			mover_deadman_close(&c->mv); /* looks by time-out */
	}
	c->qpn_base = (uint32_t)io_udp_slot(io) << 16;
	c->io = io;
	if (!c->cfg.no_thread) {
		ret = -pthread_create(&c->thread, NULL, progress_main, c);
		if (ret < 0) {
			snprintf(err, errlen, "progress thread: %s", strerror(-ret));
			c->io = NULL;
			goto close_fds;
		}
		c->has_thread = true;
	}
	return 0;

close_fds:
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->kickfd >= 0)
		close(c->kickfd);
	c->epfd = c->kickfd = -1;
	mover_deadman_close(&c->mv);
	if (c->fault)
		io_fault_destroy(c->fault);
	c->fault = NULL;
close_io:
	io_udp_close(io);
	return ret;
}

void core_dump_qp_counters(struct core_ctx *c, struct eng_qp *qp, FILE *f)
{
	(void)c;
	const uint64_t *v = eng_qp_counters(qp);
	fprintf(f, "softrdma: QP 0x%06x:", eng_qp_num(qp));
	for (int i = 0; i < ENG_CNT__COUNT; i++)
		if (v[i])
			fprintf(f, " %s=%llu", eng_counter_names[i], (unsigned long long)v[i]);
	if (eng_qp_cc_rate(qp))
		fprintf(f, " cc_rate_kbps=%llu", (unsigned long long)(eng_qp_cc_rate(qp) / 1000));
	fprintf(f, "\n");
}

/* Opens the IPv6 socket on the device's IPv6 address with the slot the IPv4 one has (QPNs
 * carry it), once. Under the lock. */
static int start_v6(struct core_ctx *c)
{
	if (c->io6)
		return 0;
	if (!c->cfg.has_v6 || !c->io)
		return -EAFNOSUPPORT;
	struct io_udp_config icfg = {0};
	icfg.family = AF_INET6;
	memcpy(icfg.addr, c->cfg.local_addr6, 16);
	icfg.port = c->cfg.port ? c->cfg.port : ROCE_UDP_PORT;
	icfg.slot = (uint8_t)(c->qpn_base >> 16);
	icfg.tos = core_tos(c, 0);
	icfg.priority = core_priority(c);
	icfg.rcvbuf = 8 << 20;
	icfg.sndbuf = 4 << 20;
	icfg.ifindex = c->cfg.ifindex;
	struct io_udp *io;
	int ret = io_udp_open(&icfg, &io);
	if (ret < 0)
		return ret == -EBUSY ? -EADDRINUSE : ret;
	const char *spec = c->cfg.fault_spec ? c->cfg.fault_spec : getenv(IO_FAULT_ENV);
	if (spec && *spec) {
		struct io_fault_cfg fcfg;
		char ferr[128];
		if (io_fault_parse(spec, &fcfg, ferr, sizeof(ferr)) == 0)
			ret = io_fault_create(&fcfg, 4096, PKT_ROOM, &c->fault6);
		if (ret < 0) {
			io_udp_close(io);
			return ret;
		}
	}
	c->io6 = io;
	/* UD QPs send from their own port in this family too. A failure leaves that QP's IPv6
	 * packets counted in tx_bad_ah. */
	for (uint32_t n = 0; n < c->nqps; n++) {
		struct core_qp *s = c->qps[n];
		if (s && s->ud)
			(void)ud_sport_get(c, s, FAM_V6);
	}
	return 0;
}

void core_each_counter(struct core_ctx *c, core_counter_fn fn, void *arg)
{
	char name[64];
	for (int i = 0; i < CORE_CNT__COUNT; i++)
		fn(arg, core_counter_names[i], c->counters[i]);
	for (int i = 0; i < MOVER_NCOUNTERS; i++) {
		snprintf(name, sizeof(name), "mover_%s", mover_counter_names[i]);
		fn(arg, name, __atomic_load_n(&c->mv.n[i], __ATOMIC_RELAXED));
	}
	if (c->io) {
		uint64_t v[IO_UDP_NCOUNTERS];
		io_udp_counters(c->io, v);
		for (int i = 0; i < IO_UDP_NCOUNTERS; i++) {
			snprintf(name, sizeof(name), "udp_%s",
				 io_udp_counter_name((enum io_udp_counter)i));
			fn(arg, name, v[i]);
		}
	}
	if (c->io6) {
		uint64_t v[IO_UDP_NCOUNTERS];
		io_udp_counters(c->io6, v);
		for (int i = 0; i < IO_UDP_NCOUNTERS; i++) {
			snprintf(name, sizeof(name), "udp6_%s",
				 io_udp_counter_name((enum io_udp_counter)i));
			fn(arg, name, v[i]);
		}
	}
	if (c->mc) {
		uint64_t v[IO_MCAST_NCOUNTERS];
		io_mcast_counters(c->mc, v);
		for (int i = 0; i < IO_MCAST_NCOUNTERS; i++) {
			snprintf(name, sizeof(name), "mcast_%s",
				 io_mcast_counter_name((enum io_mcast_counter)i));
			fn(arg, name, v[i]);
		}
	}
	for (int f = 0; f < FAM__COUNT; f++) {
		struct io_fault *fault = f == FAM_V6 ? c->fault6 : c->fault;
		if (!fault)
			continue;
		uint64_t v[IO_FAULT_NCOUNTERS];
		io_fault_counters(fault, v);
		for (int i = 0; i < IO_FAULT_NCOUNTERS; i++) {
			snprintf(name, sizeof(name), "%s_%s", f == FAM_V6 ? "fault6" : "fault",
				 io_fault_counter_name((enum io_fault_counter)i));
			fn(arg, name, v[i]);
		}
	}
}

static void print_nonzero(void *arg, const char *name, uint64_t v)
{
	if (v)
		fprintf(arg, " %s=%llu", name, (unsigned long long)v);
}

void core_dump_counters(struct core_ctx *c, FILE *f)
{
	fprintf(f, "softrdma: context:");
	core_each_counter(c, print_nonzero, f);
	fprintf(f, "\n");
}

void core_ctx_destroy(struct core_ctx *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&ctxs_lock);
	for (struct core_ctx **pp = &ctxs; *pp; pp = &(*pp)->all_next)
		if (*pp == c) {
			*pp = c->all_next;
			break;
		}
	pthread_mutex_unlock(&ctxs_lock);
	core_lock(c);
	core_flush(c); /* deferred ACKs (core_poll_cq) */
	core_unlock(c);
	if (c->has_thread) {
		atomic_store(&c->stop, true);
		uint64_t one = 1;
		if (write(c->kickfd, &one, sizeof(one)) < 0) {
			/* the thread will see stop at its next wake-up */
		}
		pthread_join(c->thread, NULL);
	}
	if (c->epfd >= 0)
		close(c->epfd);
	if (c->kickfd >= 0)
		close(c->kickfd);
	mover_deadman_close(&c->mv);
	if (c->fault)
		io_fault_destroy(c->fault);
	if (c->fault6)
		io_fault_destroy(c->fault6);
	if (c->io6)
		io_udp_close(c->io6);
	if (c->io)
		io_udp_close(c->io);
	io_mcast_close(c->mc);
	core_mg_free(&c->mg);
	free(c->ahs);
	tmheap_fini(&c->timers);
	for (uint32_t n = 0; n < c->nqps; n++)
		free(c->qps[n]); /* QPs the application did not destroy */
	free(c->qps);
	free(c);
}
