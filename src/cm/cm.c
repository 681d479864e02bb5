/* The rdma_cm core (cm.h): the lock, the CM thread, event channels and events, devices, ids,
 * addresses, listen / connect / accept / reject / disconnect. The protocols are in
 * cm_roce.c and cm_iwarp.c, QP helpers in cm_qp.c, rdma_getaddrinfo and the endpoint calls in
 * cm_ep.c. */
#define _GNU_SOURCE
#include "cm/cm.h"
#include "util/mark.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define POLL_MAX_MS 1000

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* acks, for rdma_destroy_id / rdma_migrate_id */
	bool devs_done;
	int ndev;
	struct cm_dev devs[CM_MAX_DEV];
	struct cm_id *ids;
	struct cm_channel *chans;
	struct cm_linger *lingers;
	int wake_fd;
	bool thread_started;
	/* The thread sleeps in poll() on our sockets: a descriptor closed meanwhile keeps its
	 * socket alive (and a listener listening) until the poll returns. quiesce() waits for
	 * that. */
	bool in_poll;
	uint64_t poll_gen;
	struct pollfd *pfd;
	size_t pfd_cap;
	uint64_t rng;
	/* RoCE: this process's CM endpoint (core/gsi.h): comm IDs are tag << 16 | seq */
	int gsi_fd;
	uint16_t tag, seq;
	struct cm_event *out;	     /* events handed out, not yet acked */
	void *graves[CM_QUARANTINE]; /* freed ids and channels, zeroed (cm.h) */
	unsigned ngraves;
	/* Blocking channels destroyed under a thread that read them (channel_free). */
	struct {
		const void *ch;
		pthread_t reader;
	} left[CM_LEFT_MAX];
	unsigned nleft;
} cm = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .cond = PTHREAD_COND_INITIALIZER,
    .wake_fd = -1,
    .gsi_fd = -1,
};

static _Atomic uint64_t counters[CM_C__COUNT];

const char *const cm_counter_names[CM_C__COUNT] = {
#define CM_COUNTER_NAME(name, desc) #name,
    CM_COUNTERS(CM_COUNTER_NAME)
#undef CM_COUNTER_NAME
};

static const char *const state_names[CM__NSTATES] = {
#define CM_STATE_NAME(name, desc) #name,
    CM_STATES(CM_STATE_NAME)
#undef CM_STATE_NAME
};

const char *cm_state_name(int s)
{
	return s >= 0 && s < CM__NSTATES ? state_names[s] : "?";
}

void cm_count(enum cm_counter c)
{
	atomic_fetch_add_explicit(&counters[c], 1, memory_order_relaxed);
}

uint64_t cm_counter(const char *name)
{
	for (int i = 0; i < CM_C__COUNT; i++)
		if (!strcmp(name, cm_counter_names[i]))
			return atomic_load_explicit(&counters[i], memory_order_relaxed);
	return 0;
}

void cm_each_counter(void (*fn)(void *arg, const char *name, uint64_t value), void *arg)
{
	for (int i = 0; i < CM_C__COUNT; i++)
		fn(arg, cm_counter_names[i],
		   atomic_load_explicit(&counters[i], memory_order_relaxed));
}

void cm_lock(void)
{
	pthread_mutex_lock(&cm.lock);
}

void cm_unlock(void)
{
	pthread_mutex_unlock(&cm.lock);
}

uint64_t cm_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t cm_timeout_ns(void)
{
	const char *s = getenv(CM_TIMEOUT_ENV);
	long ms = s && *s ? strtol(s, NULL, 10) : 0;
	if (ms <= 0 || ms > 3600000)
		ms = 10000;
	return (uint64_t)ms * 1000000ull;
}

/* 24 random bits for a starting PSN (splitmix64 over the clock and a counter). */
uint32_t cm_random_psn(void)
{
	/* Unpredictable where the kernel gives entropy: PSNs and comm IDs are what a blind
	 * forger must guess. */
	uint32_t v;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v & 0xFFFFFF;
	uint64_t z = (cm.rng += 0x9e3779b97f4a7c15ull) ^ cm_now() ^ (uint64_t)getpid() << 32;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31)) & 0xFFFFFF;
}

static int fail(int err)
{
	errno = err;
	return -1;
}

/* One-time notes for what is not supported, naming the call. */
static void note_once(bool *said, const char *what)
{
	if (!*said && !getenv("SOFTRDMA_QUIET")) {
		*said = true;
		fprintf(stderr, "softrdma: rdma_cm: %s\n", what);
	}
}

/* Frees an id's or a channel's memory after CM_QUARANTINE more such frees (cm.h). */
static void bury(void *p, size_t size)
{
	memset(p, 0, size);
	unsigned i = cm.ngraves++ % CM_QUARANTINE;
	free(cm.graves[i]);
	cm.graves[i] = p;
}

/* ---- fork: the child starts with an empty CM (the parent's sockets and thread are not its) */

static void atfork_prepare(void)
{
	pthread_mutex_lock(&cm.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&cm.lock);
}

static void atfork_child(void)
{
	/* Only close() here: the objects are leaked, the parent still owns the sockets. */
	for (struct cm_id *id = cm.ids; id; id = id->next) {
		for (int i = 0; i < id->nlis; i++)
			close(io_tcp_listener_fd(id->lis[i]));
		if (id->tcp)
			close(io_tcp_fd(id->tcp));
		if (id->watch_fd >= 0)
			close(id->watch_fd);
		if (id->sid_fd >= 0)
			close(id->sid_fd);
		if (id->resv_fd >= 0)
			close(id->resv_fd);
		cm_probe_free(id);
	}
	if (cm.gsi_fd >= 0)
		close(cm.gsi_fd);
	cm.gsi_fd = -1;
	for (struct cm_channel *ch = cm.chans; ch; ch = ch->next) {
		close(ch->ch.fd);
		close(ch->wfd);
	}
	for (struct cm_linger *l = cm.lingers; l; l = l->next)
		close(io_tcp_fd(l->tcp));
	if (cm.wake_fd >= 0)
		close(cm.wake_fd);
	cm.ids = NULL;
	cm.chans = NULL;
	cm.lingers = NULL;
	memset(cm.left, 0, sizeof(cm.left));
	cm.wake_fd = -1;
	cm.thread_started = false;
	cm.in_poll = false;
	cm.devs_done = false;
	cm.ndev = 0;
	cm.pfd = NULL;
	cm.pfd_cap = 0;
	pthread_mutex_init(&cm.lock, NULL);
	pthread_cond_init(&cm.cond, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_register(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- addresses ---- */

static bool is_mapped(const uint8_t a[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(a, prefix, 12);
}

/* Link-local IPv6 needs a scope id, which a GID cannot carry: no device uses such an address
 * (README: refused by the verbs too). */
static bool is_link_local(const uint8_t a[16])
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

static bool is_any(const uint8_t a[16])
{
	static const uint8_t zero[16];
	return !memcmp(a, zero, 16) || (is_mapped(a) && !memcmp(a + 12, zero, 4));
}

/* 127.0.0.0/8 and ::1. The kernel's rdma_cm counts them as wildcards (cma_any_addr): a bind
 * to one takes no device (libfabric's verbs provider binds "localhost" and relies on that),
 * and resolving the wildcard itself connects locally (cma_resolve_loopback). */
static bool is_loopback(const uint8_t a[16])
{
	static const uint8_t one6[16] = {[15] = 1};
	return (is_mapped(a) && a[12] == 127) || !memcmp(a, one6, 16);
}

/* sockaddr -> 16 bytes + port. -EAFNOSUPPORT for other families, -EINVAL for NULL. */
static int sa_get(const struct sockaddr *sa, uint8_t a[16], uint16_t *port, bool *v6)
{
	if (!sa)
		return -EINVAL;
	memset(a, 0, 16);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
		a[10] = a[11] = 0xff;
		memcpy(a + 12, &s->sin_addr, 4);
		*port = ntohs(s->sin_port);
		*v6 = false;
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
		memcpy(a, &s->sin6_addr, 16);
		*port = ntohs(s->sin6_port);
		*v6 = !is_mapped(a);
		return 0;
	}
	return -EAFNOSUPPORT;
}

void cm_sockaddr_set(struct sockaddr_storage *ss, const uint8_t a[16], uint16_t port, bool v6)
{
	memset(ss, 0, sizeof(*ss));
	if (!v6 && is_mapped(a)) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		memcpy(&s->sin_addr, a + 12, 4);
		s->sin_port = htons(port);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, a, 16);
		s->sin6_port = htons(port);
	}
}

/* The id's addresses as the application reads them (route.addr, ibaddr). */
static void id_sync_route(struct cm_id *id)
{
	struct rdma_addr *ra = &id->id.route.addr;
	cm_sockaddr_set(&ra->src_storage, id->laddr, id->lport, id->v6);
	if (id->state != CM_IDLE && id->state != CM_BOUND && id->state != CM_LISTEN)
		cm_sockaddr_set(&ra->dst_storage, id->raddr, id->rport, id->v6);
	memcpy(ra->addr.ibaddr.sgid.raw, id->laddr, 16);
	memcpy(ra->addr.ibaddr.dgid.raw, id->raddr, 16);
	ra->addr.ibaddr.pkey = htobe16(0xFFFF);
}

/* rdma_bind_addr to port 0: a port now, as the kernel's cma_alloc_any_port (cm.h resv_fd). A
 * TCP socket with SO_REUSEADDR bound to (a, 0) holds it; rdma_listen's listener and an iWARP
 * connect bind the same port next to it (both SO_REUSEADDR, neither listening) and the hold
 * ends. 0 or a negative errno. */
static int port_reserve(struct cm_id *id, const uint8_t a[16], uint16_t *port)
{
	struct sockaddr_storage ss, got;
	cm_sockaddr_set(&ss, a, 0, id->v6);
	socklen_t sl =
	    ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	socklen_t gl = sizeof(got);
	int one = 1, r = 0;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    (ss.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
	    bind(fd, (struct sockaddr *)&ss, sl) != 0 ||
	    getsockname(fd, (struct sockaddr *)&got, &gl) != 0)
		r = -errno;
	if (r < 0) {
		close(fd);
		return r;
	}
	*port = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
					       : ((struct sockaddr_in6 *)&got)->sin6_port);
	id->resv_fd = fd;
	return 0;
}

/* The port is held by its listener or connection now (or the id is gone). */
static void port_release(struct cm_id *id)
{
	if (id->resv_fd >= 0) {
		close(id->resv_fd);
		id->resv_fd = -1;
	}
}

/* ---- devices ---- */

static void devs_init(void)
{
	if (cm.devs_done)
		return;
	cm.devs_done = true;
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return;
	for (int i = 0; i < n && cm.ndev < CM_MAX_DEV; i++) {
		struct cm_dev *d = &cm.devs[cm.ndev];
		memset(d, 0, sizeof(*d));
		d->ibdev = list[i];
		d->ctx = sr_cm_open_device(list[i]);
		if (!d->ctx)
			continue;
		struct ibv_port_attr pa;
		if (ibv_query_device(d->ctx, &d->attr) || ibv_query_port(d->ctx, 1, &pa)) {
			ibv_close_device(d->ctx);
			continue;
		}
		d->iwarp = list[i]->transport_type == IBV_TRANSPORT_IWARP;
		d->mtu = pa.active_mtu;
		for (int g = 0; g < pa.gid_tbl_len && d->ngid < 16; g++) {
			union ibv_gid gid;
			if (ibv_query_gid(d->ctx, 1, g, &gid) == 0)
				memcpy(d->gid[d->ngid++], gid.raw, 16);
		}
		cm.ndev++;
	}
	/* The devices themselves are never freed (verbs: contexts outlive the list). */
	ibv_free_device_list(list);
}

int cm_gid_index(const struct cm_dev *d, const uint8_t addr[16])
{
	for (int g = 0; g < d->ngid; g++)
		if (!memcmp(d->gid[g], addr, 16))
			return g;
	return -1;
}

/* ---- which transport (cm.h "Which transport") ---- */

/* What the process settled for addr without asking the peer: SOFTRDMA_TRANSPORT, else the
 * transport of the devices holding addr that the application opened itself, if they are of
 * one transport; CM_TR_NONE otherwise. */
static enum cm_transport pinned_transport(const uint8_t addr[16])
{
	const char *t = getenv(CM_TRANSPORT_ENV);
	if (t && !strcmp(t, "iwarp"))
		return CM_TR_IWARP;
	if (t && !strcmp(t, "roce"))
		return CM_TR_ROCE;
	devs_init();
	bool roce = false, iw = false;
	for (int i = 0; i < cm.ndev; i++) {
		const struct cm_dev *d = &cm.devs[i];
		if (cm_gid_index(d, addr) < 0 || !sr_cm_app_opened(d->ibdev))
			continue;
		iw |= d->iwarp;
		roce |= !d->iwarp;
	}
	return roce == iw ? CM_TR_NONE : roce ? CM_TR_ROCE : CM_TR_IWARP;
}

/* The device of addr and transport tr, or NULL. */
static struct cm_dev *dev_of(const uint8_t addr[16], enum cm_transport tr)
{
	devs_init();
	for (int i = 0; i < cm.ndev; i++)
		if (cm.devs[i].iwarp == (tr == CM_TR_IWARP) && cm_gid_index(&cm.devs[i], addr) >= 0)
			return &cm.devs[i];
	return NULL;
}

/* Both transports could serve addr, and nothing settled which: the peer is asked (active) or
 * both are taken (passive). */
static bool transport_open(const uint8_t addr[16])
{
	return pinned_transport(addr) == CM_TR_NONE && dev_of(addr, CM_TR_ROCE) &&
	       dev_of(addr, CM_TR_IWARP);
}

/* The device whose GID table holds addr: of transport tr if both have it (tr NONE: the pinned
 * one, else RoCE), else any; NULL if none. */
static struct cm_dev *dev_for_addr(const uint8_t addr[16], enum cm_transport tr)
{
	devs_init();
	enum cm_transport want = tr != CM_TR_NONE ? tr : pinned_transport(addr);
	bool iw = want == CM_TR_IWARP;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < cm.ndev; i++) {
			struct cm_dev *d = &cm.devs[i];
			if ((pass == 0 && d->iwarp != iw) || cm_gid_index(d, addr) < 0)
				continue;
			if (pass == 1 && tr != CM_TR_NONE)
				return NULL; /* the transport the peer speaks has no device here */
			return d;
		}
	return NULL;
}

/* Binds the id to d: id->verbs, the default PD, port 1. */
static void id_set_dev(struct cm_id *id, struct cm_dev *d)
{
	if (!d->pd)
		d->pd = ibv_alloc_pd(d->ctx);
	id->dev = d;
	id->tr = d->iwarp ? CM_TR_IWARP : CM_TR_ROCE;
	id->id.verbs = d->ctx;
	id->id.pd = d->pd;
	id->id.port_num = 1;
}

/* ---- channels and events ---- */

static struct cm_channel *channel_new(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));
	int sv[2];
	if (!ch)
		return NULL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		free(ch);
		return NULL;
	}
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	ch->ch.fd = sv[0];
	ch->wfd = sv[1];
	/* The address of a destroyed channel may come back for a new one. */
	for (unsigned i = 0; i < CM_LEFT_MAX; i++)
		if (cm.left[i].ch == ch)
			cm.left[i].ch = NULL;
	ch->next = cm.chans;
	cm.chans = ch;
	return ch;
}

/* Takes up to n event bytes off the channel without blocking (events purged). */
static void channel_drain(struct cm_channel *ch, unsigned n)
{
	char buf[64];
	while (n) {
		ssize_t r = recv(ch->ch.fd, buf, n < sizeof(buf) ? n : sizeof(buf), MSG_DONTWAIT);
		if (r <= 0)
			break;
		n -= (unsigned)r;
	}
}

static void channel_release(struct cm_channel *ch)
{
	close(ch->ch.fd);
	close(ch->wfd);
	bury(ch, sizeof(*ch));
}

/* A channel the application may use: created, not destroyed. Under the lock. */
static bool channel_live(const struct cm_channel *ch)
{
	for (const struct cm_channel *c = cm.chans; c; c = c->next)
		if (c == ch)
			return true;
	return false;
}

static void channel_free(struct cm_channel *ch)
{
	for (struct cm_channel **pp = &cm.chans; *pp; pp = &(*pp)->next)
		if (*pp == ch) {
			*pp = ch->next;
			break;
		}
	while (ch->head) {
		struct cm_event *e = ch->head;
		ch->head = e->next;
		free(e);
	}
	ch->tail = NULL;
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (id->ch == ch) {
			id->ch = NULL;
			id->id.channel = NULL;
		}
	ch->dead = true;
	/* Its event thread may be between two rdma_get_cm_event calls, about to come back:
	 * remember it (the memory is buried, the pointer may come back to us). */
	int fl = ch->has_reader && !pthread_equal(ch->reader, pthread_self())
		     ? fcntl(ch->ch.fd, F_GETFL)
		     : -1;
	if (fl >= 0 && !(fl & O_NONBLOCK)) {
		unsigned i = cm.nleft++ % CM_LEFT_MAX;
		cm.left[i].ch = ch;
		cm.left[i].reader = ch->reader;
	}
	if (!ch->readers)
		channel_release(ch);
}

/* Did another thread destroy this (blocking) channel under the caller, its event reader?
 * Under the lock. */
static bool channel_left_reader(const void *ch)
{
	for (unsigned i = 0; i < CM_LEFT_MAX; i++)
		if (cm.left[i].ch == ch && pthread_equal(cm.left[i].reader, pthread_self()))
			return true;
	return false;
}

struct rdma_event_channel *sr_rdma_create_event_channel(void)
{
	pthread_once(&atfork_once, atfork_register);
	cm_lock();
	struct cm_channel *ch = channel_new();
	cm_unlock();
	if (!ch) {
		errno = errno ? errno : ENOMEM;
		return NULL;
	}
	return &ch->ch;
}
CM_ALIAS(create_event_channel);

static void print_counter(void *arg, const char *name, uint64_t v)
{
	if (v)
		fprintf(arg, "softrdma: rdma_cm: %s=%llu\n", name, (unsigned long long)v);
}

void sr_rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (!channel)
		return;
	/* SOFTRDMA_STATS: the CM's counters, as the verbs print theirs at close. */
	if (getenv("SOFTRDMA_STATS"))
		cm_each_counter(print_counter, stderr);
	cm_lock();
	if (channel_live((struct cm_channel *)channel))
		channel_free((struct cm_channel *)channel); /* else destroyed already: nothing */
	cm_unlock();
}
CM_ALIAS(destroy_event_channel);

/* cm_event_post / cm_event_post_ud: the event's param is conn or ud (one of them, or none). */
static struct cm_event *event_post(struct cm_id *owner, struct cm_id *evid,
				   enum rdma_cm_event_type type, int status,
				   const struct rdma_conn_param *param,
				   const struct rdma_ud_param *ud, const void *pd, size_t pd_len)
{
	struct cm_channel *ch = owner->ch;
	struct cm_id *about = evid ? evid : owner;
	if (getenv(CM_DEBUG_ENV))
		fprintf(stderr, "softrdma: rdma_cm: id %p (%s, %s): %s status %d%s\n",
			(void *)about, about->tr == CM_TR_IWARP ? "iWARP" : "RoCE",
			cm_state_name(about->state), sr_rdma_event_str(type), status,
			!ch || owner->destroying ? " (dropped: no channel)" : "");
	if (!ch || owner->destroying)
		return NULL;
	struct cm_event *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (pd_len > CM_PD_MAX)
		pd_len = CM_PD_MAX;
	e->ev.id = evid ? &evid->id : &owner->id;
	e->ev.listen_id = type == RDMA_CM_EVENT_CONNECT_REQUEST ? &owner->id : NULL;
	e->ev.event = type;
	e->ev.status = status;
	if (param) {
		e->ev.param.conn = *param;
		e->ev.param.conn.private_data = pd_len ? e->pd : NULL;
		e->ev.param.conn.private_data_len = (uint8_t)pd_len;
	} else {
		/* param.ud; also what a parameterless event shows through param.conn, whose
		 * private data fields are at the same place. */
		if (ud)
			e->ev.param.ud = *ud;
		e->ev.param.ud.private_data = pd_len ? e->pd : NULL;
		e->ev.param.ud.private_data_len = (uint8_t)pd_len;
	}
	if (pd && pd_len)
		memcpy(e->pd, pd, pd_len);
	e->owner = owner;
	e->ch = ch;
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	char b = 1;
	if (send(ch->wfd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
		/* Cannot happen short of 200 KB of unread events; the reader still finds the
		 * event at its next byte. */
	}
	return e;
}

void cm_event_post(struct cm_id *owner, struct cm_id *evid, enum rdma_cm_event_type type,
		   int status, const struct rdma_conn_param *param, const void *pd, size_t pd_len)
{
	event_post(owner, evid, type, status, param, NULL, pd, pd_len);
}

struct cm_event *cm_event_post_ud(struct cm_id *owner, struct cm_id *evid,
				  enum rdma_cm_event_type type, int status,
				  const struct rdma_ud_param *ud, const void *pd, size_t pd_len)
{
	return event_post(owner, evid, type, status, NULL, ud, pd, pd_len);
}

static struct cm_event *channel_pop(struct cm_channel *ch)
{
	struct cm_event *e = ch->head;
	if (!e)
		return NULL;
	ch->head = e->next;
	if (!ch->head)
		ch->tail = NULL;
	e->next = NULL;
	return e;
}

/* A thread cancelled in rdma_get_cm_event (in recv or pause) leaves as a reader. */
static void reader_cancelled(void *arg)
{
	struct cm_channel *ch = arg;
	cm_lock();
	if (--ch->readers == 0 && ch->dead)
		channel_release(ch);
	cm_unlock();
}

int sr_rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (!channel || !event)
		return fail(EINVAL);
	struct cm_channel *ch = (struct cm_channel *)channel;
	/* While this thread is in here it counts as a reader: the channel (and its fd) outlive
	 * an rdma_destroy_event_channel until the last reader has left. */
	cm_lock();
	if (!channel_live(ch)) {
		bool wait = channel_left_reader(ch);
		cm_unlock();
		/* Destroyed by another thread while this one, its reader, was between two calls
		 * (Debian's rping: main destroys the channel as soon as its CM thread acked the
		 * DISCONNECTED). The kernel's read blocks for good if the reader got to the fd
		 * first, and fails with EBADF if the close did: an order of two threads that the
		 * program cannot see. The reader waits, as in the first order, and the program
		 * ends as it meant to. The destroying thread itself gets EBADF. */
		if (wait)
			for (;;)
				pause(); /* a cancellation point, as read() is */
		return fail(EBADF);	 /* destroyed (its fd closed), or never a channel */
	}
	ch->readers++;
	for (;;) {
		char b;
		cm_unlock();
		/* Blocks unless the application made the fd non-blocking (then EAGAIN). */
		ssize_t n;
		pthread_cleanup_push(reader_cancelled, ch);
		n = recv(ch->ch.fd, &b, 1, 0);
		pthread_cleanup_pop(0);
		int err = errno;
		cm_lock();
		if (ch->dead) {
			/* rdma_destroy_event_channel ran while this thread was in here (librdmacm
			 * 44's rping and others destroy the channel under their event thread). The
			 * kernel's read stays blocked then (the file lives while a read is in it)
			 * and so does this one: nothing is ever posted on a destroyed channel.
			 * A non-blocking read gets what it would get there: EAGAIN. */
			int fl = fcntl(ch->ch.fd, F_GETFL);
			if (fl >= 0 && !(fl & O_NONBLOCK)) {
				cm_unlock(); /* still a reader: the fd stays open */
				pthread_cleanup_push(reader_cancelled, ch);
				for (;;)
					pause(); /* a cancellation point, as read() is */
				pthread_cleanup_pop(0);
			}
			if (--ch->readers == 0)
				channel_release(ch);
			cm_unlock();
			return fail(EAGAIN);
		}
		struct cm_event *e = n == 1 ? channel_pop(ch) : NULL;
		if (e) {
			ch->readers--;
			ch->reader = pthread_self();
			ch->has_reader = true;
			e->retrieved = true;
			e->ch = NULL;
			e->out_next = cm.out;
			cm.out = e;
			e->owner->ev_reported++;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST)
				((struct cm_id *)e->ev.id)->listener = NULL;
			if (e->mc)
				cm_mc_retrieved(e); /* cm_mcast.c: attaches the QP */
			cm_unlock();
			*event = &e->ev;
			return 0;
		}
		if (n < 0 && err == EINTR)
			continue;
		if (n <= 0) {
			ch->readers--;
			cm_unlock();
			return fail(n == 0 ? ENODEV : err);
		}
		/* A byte of an event purged by rdma_destroy_id: look again. */
	}
}
CM_ALIAS(get_cm_event);

/* Acks an event handed out (and frees it); false for one that was not (cm.h). */
static bool ack_locked(struct cm_event *e)
{
	struct cm_event **pp = &cm.out;
	while (*pp && *pp != e)
		pp = &(*pp)->out_next;
	if (!*pp)
		return false;
	*pp = e->out_next;
	e->owner->ev_acked++;
	if (e->mc)
		cm_mc_acked(e);
	pthread_cond_broadcast(&cm.cond);
	free(e);
	return true;
}

int sr_rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return fail(EINVAL);
	cm_lock();
	bool ok = ack_locked((struct cm_event *)event);
	cm_unlock();
	return ok ? 0 : fail(EINVAL);
}
CM_ALIAS(ack_cm_event);

/* Unretrieved events of id (its own, and those naming it; with mc, only that group's) leave
 * its channel. */
void cm_purge_events(struct cm_id *id, const struct cm_mc *mc)
{
	struct cm_channel *ch = id->ch;
	if (!ch)
		return;
	unsigned n = 0;
	struct cm_event **pp = &ch->head, *last = NULL;
	while (*pp) {
		struct cm_event *e = *pp;
		if (mc ? e->mc == mc : e->owner == id || e->ev.id == &id->id) {
			*pp = e->next;
			free(e);
			n++;
		} else {
			last = e;
			pp = &e->next;
		}
	}
	ch->tail = last;
	channel_drain(ch, n);
}

const char *sr_rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
	    "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
	    "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
	    "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	    "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
	    "RDMA_CM_EVENT_REJECTED",	     "RDMA_CM_EVENT_ESTABLISHED",
	    "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
	    "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
	    "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
	if ((int)event < 0 || (size_t)event >= sizeof(names) / sizeof(names[0]))
		return "UNKNOWN EVENT";
	return names[event];
}
CM_ALIAS(event_str);

void cm_wait(void)
{
	pthread_cond_wait(&cm.cond, &cm.lock);
}

/* librdmacm ucma_complete: a synchronous id waits for its next event; a failure status
 * becomes errno (REJECTED: ECONNREFUSED). */
int cm_sync_complete(struct cm_id *id)
{
	if (!id->sync)
		return 0;
	if (id->id.event) {
		sr_rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	struct rdma_cm_event *e;
	if (sr_rdma_get_cm_event(id->id.channel, &e))
		return -1;
	id->id.event = e;
	if (e->status) {
		if (e->event == RDMA_CM_EVENT_REJECTED)
			return fail(ECONNREFUSED);
		return fail(e->status < 0 ? -e->status : e->status);
	}
	return 0;
}

/* ---- ids ---- */

static struct cm_id *id_new(struct cm_channel *ch, void *context, enum rdma_port_space ps)
{
	struct cm_id *id = calloc(1, sizeof(*id));
	if (!id)
		return NULL;
	if (!ch) {
		ch = channel_new();
		if (!ch) {
			free(id);
			return NULL;
		}
		id->sync = true;
	}
	id->ch = ch;
	id->watch_fd = -1;
	id->sid_fd = -1;
	id->resv_fd = -1;
	id->id.channel = &ch->ch;
	id->id.context = context;
	id->id.ps = ps;
	/* librdmacm rdma_create_id: the port space decides the QP type. */
	id->id.qp_type = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
	id->state = CM_IDLE;
	id->next = cm.ids;
	cm.ids = id;
	return id;
}

static void id_unlink(struct cm_id *id)
{
	for (struct cm_id **pp = &cm.ids; *pp; pp = &(*pp)->next)
		if (*pp == id) {
			*pp = id->next;
			return;
		}
}

static void id_free(struct cm_id *id)
{
	id_unlink(id);
	port_release(id);
	cm_probe_free(id);
	if (id->sync && id->ch)
		channel_free(id->ch);
	free(id->path);
	free(id->ep_attr);
	free(id->connect_pd);
	bury(id, sizeof(*id));
}

struct cm_id *cm_id_live(const struct rdma_cm_id *rid)
{
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (&id->id == rid)
			return id->destroying ? NULL : id;
	return NULL;
}

int cm_id_check(const struct rdma_cm_id *rid)
{
	if (!rid)
		return -EINVAL;
	cm_lock();
	bool live = cm_id_live(rid) != NULL;
	cm_unlock();
	return live ? 0 : -ENOENT;
}

struct cm_id *cm_id_lock(struct rdma_cm_id *rid)
{
	if (!rid) {
		errno = EINVAL;
		return NULL;
	}
	cm_lock();
	struct cm_id *id = cm_id_live(rid);
	if (!id) {
		cm_unlock();
		errno = ENOENT;
	}
	return id;
}

int sr_rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		      enum rdma_port_space ps)
{
	if (!id)
		return fail(EINVAL);
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB && ps != RDMA_PS_UDP && ps != RDMA_PS_IPOIB)
		return fail(EINVAL);
	pthread_once(&atfork_once, atfork_register);
	cm_lock();
	if (channel && !channel_live((struct cm_channel *)channel)) {
		cm_unlock();
		return fail(EBADF);
	}
	struct cm_id *c = id_new((struct cm_channel *)channel, context, ps);
	cm_unlock();
	if (!c)
		return fail(ENOMEM);
	*id = &c->id;
	return 0;
}
CM_ALIAS(create_id);

void cm_conn_drop(struct cm_id *id, bool abort)
{
	if (id->tcp) {
		if (abort)
			io_tcp_abort(id->tcp);
		else
			io_tcp_close(id->tcp);
		id->tcp = NULL;
		/* The thread's poll may hold the socket: it lets go at its next wake-up. */
		if (cm.thread_started)
			cm_kick();
	}
	free(id->iw);
	id->iw = NULL;
	if (id->watch_fd >= 0) {
		close(id->watch_fd);
		id->watch_fd = -1;
		if (cm.thread_started)
			cm_kick();
	}
	id->tcp_connecting = false;
	id->ev = 0;
	id->rx_len = 0;
	id->deadline = 0;
}

void cm_qp_to_err(struct cm_id *id)
{
	if (!id->id.qp)
		return;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
	ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

/* Under the lock: returns once the thread is not inside a poll() that began before the call
 * (it is woken for that), so sockets closed before are really gone: a port is free again. */
static void quiesce(void)
{
	if (!cm.thread_started || !cm.in_poll)
		return;
	uint64_t gen = cm.poll_gen;
	cm_kick();
	while (cm.in_poll && cm.poll_gen == gen)
		pthread_cond_wait(&cm.cond, &cm.lock);
}

/* The TCP options of an iWARP id's connections: its marking (util/mark.h), from its TOS
 * (RDMA_OPTION_ID_TOS; the kernel's TCP sets the ECN bits) or the device default. A listener's
 * are its accepted connections' too. */
static struct io_tcp_opts tcp_opts(const struct cm_id *id)
{
	uint8_t dscp;
	bool ecn;
	(void)mark_config(&dscp, &ecn); /* a bad setting failed the device's open already */
	uint8_t tos = mark_tos(dscp, false, id->tos);
	return (struct io_tcp_opts){.tos = tos & 0xFC, .priority = mark_priority(tos)};
}

static void listeners_close(struct cm_id *id)
{
	for (int i = 0; i < id->nlis; i++)
		io_tcp_listener_close(id->lis[i]);
	id->nlis = 0;
	if (id->sid_fd >= 0) {
		gsi_ep_close(id->sid_fd);
		id->sid_fd = -1;
	}
	/* rdma_destroy_id of a listener frees its port at once, as the kernel's: a program may
	 * bind it again right away (perftest -R does, between its two connections). */
	quiesce();
}

/* Children of a destroyed listener whose CONNECT_REQUEST the application never took are
 * destroyed with it; the others are the application's. */
static void orphan_children(struct cm_id *lis)
{
	for (struct cm_id *c = cm.ids, *next; c; c = next) {
		next = c->next;
		if (c->listener != lis)
			continue;
		c->listener = NULL;
		if (c->state == CM_INCOMING || c->state == CM_REQ_RCVD) {
			cm_purge_events(c, NULL);
			if (c->tr == CM_TR_ROCE && c->state == CM_REQ_RCVD)
				cm_roce_reject(c, NULL, 0, CM_REJ_CONSUMER_DEFINED);
			else if (c->tr == CM_TR_IWARP && c->state == CM_REQ_RCVD)
				cm_iw_reject(c, NULL, 0);
			cm_conn_drop(c, true);
			id_free(c);
		}
	}
	for (struct cm_id *c = cm.ids; c; c = c->next)
		if (c->listener == lis)
			c->listener = NULL;
}

int sr_rdma_destroy_id(struct rdma_cm_id *rid)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (id->id.event) {
		ack_locked((struct cm_event *)id->id.event);
		id->id.event = NULL;
	}
	cm_purge_events(id, NULL);
	id->destroying = true;
	if (id->state == CM_LISTEN) {
		listeners_close(id);
		orphan_children(id);
	}
	if (id->tr == CM_TR_ROCE)
		cm_roce_destroy(id);
	else if (id->tr == CM_TR_IWARP)
		cm_iw_destroy(id);
	cm_conn_drop(id, true);
	while (id->ev_acked != id->ev_reported)
		pthread_cond_wait(&cm.cond, &cm.lock);
	cm_mc_free_all(id);
	id_free(id);
	cm_unlock();
	return 0;
}
CM_ALIAS(destroy_id);

/* When a process ends, the kernel closes its rdma_cm ids (ucma's release) as rdma_destroy_id
 * would: a connected RoCE id sends its DREQ, so the peer is DISCONNECTED at once. Programs rely
 * on it: perftest's ib_atomic_lat server returns from main with its ids connected, and rxe's
 * client then waited over a minute in rdma_disconnect for the DREP of a process that was gone.
 * So at exit every RoCE id still talking to a peer says goodbye the same way (DREQ, or the REJ
 * of a handshake in progress), once. iWARP's TCP connections close with the process. Runs
 * before core's last pass (core_at_exit, priority 150), which routes what is still queued. */
__attribute__((destructor(200))) static void cm_at_exit(void)
{
	if (!cm.ids) /* none, or a fork's child: atfork_child gave it an empty CM */
		return;
	if (pthread_mutex_trylock(&cm.lock) != 0)
		return; /* a thread is inside the CM: walking its ids is not safe */
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (!id->destroying && id->tr == CM_TR_ROCE)
			cm_roce_destroy(id);
	pthread_mutex_unlock(&cm.lock);
}

int sr_rdma_migrate_id(struct rdma_cm_id *rid, struct rdma_event_channel *channel)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (id->sync && !channel) {
		cm_unlock();
		return fail(EINVAL);
	}
	if (channel && !channel_live((struct cm_channel *)channel)) {
		cm_unlock();
		return fail(EBADF);
	}
	struct cm_channel *to = (struct cm_channel *)channel;
	bool sync = !to;
	if (sync && !(to = channel_new())) {
		cm_unlock();
		return fail(ENOMEM);
	}
	struct cm_channel *from = id->ch;
	if (id->sync && id->id.event) {
		ack_locked((struct cm_event *)id->id.event);
		id->id.event = NULL;
	}
	/* Unretrieved events of the id move along, in order. */
	if (from && from != to) {
		struct cm_event **pp = &from->head, *last = NULL;
		unsigned n = 0;
		while (*pp) {
			struct cm_event *e = *pp;
			if (e->owner != id) {
				last = e;
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			e->next = NULL;
			e->ch = to;
			if (to->tail)
				to->tail->next = e;
			else
				to->head = e;
			to->tail = e;
			char b = 1;
			if (send(to->wfd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1) {
				/* see cm_event_post */
			}
			n++;
		}
		from->tail = last;
		channel_drain(from, n);
	}
	bool was_sync = id->sync;
	id->ch = to;
	id->id.channel = &to->ch;
	id->sync = sync;
	if (was_sync && from && from != to)
		channel_free(from);
	while (id->ev_acked != id->ev_reported)
		pthread_cond_wait(&cm.cond, &cm.lock);
	cm_unlock();
	return 0;
}
CM_ALIAS(migrate_id);

/* ---- bind, resolve, listen ---- */

static bool port_taken(const struct cm_id *self, const uint8_t a[16], uint16_t port)
{
	for (const struct cm_id *o = cm.ids; o; o = o->next) {
		if (o == self || o->destroying || o->lport != port || o->listener ||
		    !(o->state == CM_BOUND || o->state == CM_LISTEN || o->state == CM_RESOLVING ||
		      o->state == CM_ADDR_RESOLVED || o->state == CM_ROUTE_RESOLVED))
			continue;
		if (o->v6 != self->v6 && !o->bound_any && !self->bound_any)
			continue;
		if (!o->bound_any && !is_any(a) && memcmp(o->laddr, a, 16))
			continue;
		if (self->reuseaddr && o->reuseaddr && o->state != CM_LISTEN)
			continue;
		return true;
	}
	return false;
}

/* Under the lock. 0 or a positive errno. */
static int bind_locked(struct cm_id *id, const struct sockaddr *sa)
{
	uint8_t a[16];
	uint16_t port;
	bool v6;
	int r = sa_get(sa, a, &port, &v6);
	if (r < 0)
		return -r;
	if (id->state != CM_IDLE)
		return EINVAL;
	if (is_link_local(a))
		return EADDRNOTAVAIL;
	id->v6 = v6;
	if (port && port_taken(id, a, port)) {
		if (getenv(CM_DEBUG_ENV))
			fprintf(stderr, "softrdma: rdma_cm: rdma_bind_addr port %u: in use here\n",
				port);
		return EADDRINUSE;
	}
	/* A loopback address softrdma has no device for (lo down in a network namespace,
	 * 127.0.0.2) is bound as the kernel binds every loopback address: as a wildcard, no
	 * device (is_loopback). One it has (127.0.0.1 on roce_lo / iwarp_lo) is an address of
	 * those devices: programs bind it and use id->verbs (pyverbs' rdma_cm tests on lo). */
	struct cm_dev *d = NULL;
	if (!is_any(a) && !(d = dev_for_addr(a, CM_TR_NONE)) && !is_loopback(a))
		return EADDRNOTAVAIL;
	if (!port) {
		/* A loopback address may not be up (lo down): the port is reserved on the
		 * wildcard then (rdma_cm's ports are its own, not the interface's). */
		static const uint8_t any4[16] = {[10] = 0xff, [11] = 0xff}, any6[16];
		r = port_reserve(id, a, &port);
		if (r == -EADDRNOTAVAIL && !d && is_loopback(a))
			r = port_reserve(id, v6 ? any6 : any4, &port);
		if (r < 0)
			return -r;
	}
	if (d)
		id_set_dev(id, d);
	id->tr_open = d && transport_open(a);
	id->bound_any = is_any(a);
	memcpy(id->laddr, a, 16);
	id->lport = port;
	id->state = CM_BOUND;
	id_sync_route(id);
	return 0;
}

int sr_rdma_bind_addr(struct rdma_cm_id *rid, struct sockaddr *addr)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (!addr) {
		cm_unlock();
		return fail(EINVAL);
	}
	int r = bind_locked(id, addr);
	if (!r)
		((struct cm_id *)rid)->bound_app = true;
	cm_unlock();
	return r ? fail(r) : 0;
}
CM_ALIAS(bind_addr);

/* The source address the kernel would use towards dst (no packet is sent). */
static int route_source(const uint8_t dst[16], bool v6, uint8_t src[16])
{
	struct sockaddr_storage ss, ls;
	cm_sockaddr_set(&ss, dst, 9, v6);
	int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	socklen_t sl =
	    ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	socklen_t ll = sizeof(ls);
	int r = 0;
	if (connect(fd, (struct sockaddr *)&ss, sl) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ls, &ll) != 0)
		r = -errno;
	close(fd);
	if (r)
		return r;
	uint16_t port;
	bool lv6;
	return sa_get((struct sockaddr *)&ls, src, &port, &lv6);
}

int sr_rdma_resolve_addr(struct rdma_cm_id *rid, struct sockaddr *src_addr,
			 struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	uint8_t dst[16];
	uint16_t dport;
	bool v6;
	int r = sa_get(dst_addr, dst, &dport, &v6);
	if (r == 0 && src_addr && id->state == CM_IDLE) {
		r = -bind_locked(id, src_addr);
		id->bound_app = r == 0;
	} else if (r == 0 && id->state == CM_IDLE)
		id->v6 = v6;
	if (r == 0 && id->state != CM_BOUND && id->state != CM_IDLE)
		r = -EINVAL;
	if (r == 0 && id->state == CM_BOUND && !id->bound_any && id->v6 != v6)
		r = -EINVAL;
	if (r < 0) {
		cm_unlock();
		return fail(-r);
	}
	/* The wildcard as destination: the kernel connects to the id's own device
	 * (cma_resolve_loopback: dgid = sgid); here to the bound address, else loopback. */
	if (is_any(dst)) {
		static const uint8_t lo4[16] = {[10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1};
		static const uint8_t lo6[16] = {[15] = 1};
		if (id->state == CM_BOUND && !id->bound_any)
			memcpy(dst, id->laddr, 16);
		else
			memcpy(dst, v6 ? lo6 : lo4, 16);
	}
	memcpy(id->raddr, dst, 16);
	id->rport = dport;
	id->v6 = v6;
	uint8_t src[16];
	int err = 0;
	if (id->state == CM_BOUND && !id->bound_any)
		memcpy(src, id->laddr, 16);
	else
		err = route_source(dst, v6, src);
	if (!err && (is_link_local(src) || is_link_local(dst)))
		err = -EADDRNOTAVAIL;
	bool settled = id->dev && !id->tr_open;
	struct cm_dev *d = err ? NULL : settled ? id->dev : dev_for_addr(src, CM_TR_NONE);
	if (!err && !d)
		err = -EADDRNOTAVAIL;
	/* Which transport: asked of the peer when nothing here settled it (cm.h). UD and XRC
	 * ids are RoCE's (iWARP has neither); a QP made on the bound id's device keeps it. */
	bool ask =
	    !err && !settled && id->id.qp_type == IBV_QPT_RC && !id->id.qp && transport_open(src);
	if (err) {
		cm_event_post(id, NULL, RDMA_CM_EVENT_ADDR_ERROR, err, NULL, NULL, 0);
	} else {
		memcpy(id->laddr, src, 16);
		id->bound_any = false;
		if (!ask || cm_probe_start(id, dev_of(src, CM_TR_ROCE), dev_of(src, CM_TR_IWARP),
					   cm_now(), timeout_ms) < 0)
			cm_addr_resolved(id, d);
	}
	cm_unlock();
	return cm_sync_complete(id);
}
CM_ALIAS(resolve_addr);

int sr_rdma_resolve_route(struct rdma_cm_id *rid, int timeout_ms)
{
	(void)timeout_ms;
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (id->state != CM_ADDR_RESOLVED) {
		cm_unlock();
		return fail(EINVAL);
	}
	if (id->tr == CM_TR_ROCE && !id->path) {
		/* One path record, as librdmacm fills for IB transports. */
		id->path = calloc(1, sizeof(*id->path));
		if (id->path) {
			struct ibv_sa_path_rec *p = id->path;
			memcpy(p->sgid.raw, id->laddr, 16);
			memcpy(p->dgid.raw, id->raddr, 16);
			p->pkey = htobe16(0xFFFF);
			p->hop_limit = 64;
			p->traffic_class = id->tos;
			p->reversible = 1;
			p->numb_path = 1;
			p->mtu_selector = 2;
			p->mtu = id->dev->mtu;
			p->rate_selector = 2;
			p->rate = 3; /* 10 Gb/s, a placeholder as rxe reports */
			p->packet_life_time_selector = 2;
			p->packet_life_time = 16;
			id->id.route.path_rec = p;
			id->id.route.num_paths = 1;
		}
	}
	id->state = CM_ROUTE_RESOLVED;
	cm_event_post(id, NULL, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL, 0);
	cm_unlock();
	return cm_sync_complete(id);
}
CM_ALIAS(resolve_route);

int sr_rdma_listen(struct rdma_cm_id *rid, int backlog)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	int err = 0;
	if (id->state == CM_LISTEN) {
		id->backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
		goto out;
	}
	if (id->state == CM_IDLE) {
		struct sockaddr_in any = {.sin_family = AF_INET};
		err = bind_locked(id, (struct sockaddr *)&any);
	}
	if (!err && id->state != CM_BOUND)
		err = EINVAL;
	if (err)
		goto out;
	if (!id->bound_any && id->dev) {
		/* Which transport (cm.h): settled now, or both. */
		id->tr_open = transport_open(id->laddr);
		struct cm_dev *d = dev_for_addr(id->laddr, CM_TR_NONE);
		if (d && d != id->dev)
			id_set_dev(id, d);
	}
	int lbl = backlog > 0 ? backlog : 0;
	struct io_tcp_opts o = tcp_opts(id);
	int r = io_tcp_listen(id->laddr, id->lport, lbl, &o, &id->lis[0]);
	if (r == 0) {
		id->nlis = 1;
		id->lport = io_tcp_listener_port(id->lis[0]);
		port_release(id); /* the listener holds it now */
		/* "::" listens for IPv4 too unless RDMA_OPTION_ID_AFONLY (as the kernel's
		 * bindv6only = 0). */
		if (id->v6 && id->bound_any && !id->afonly) {
			uint8_t any4[16] = {0};
			any4[10] = any4[11] = 0xff;
			if (io_tcp_listen(any4, id->lport, lbl, &o, &id->lis[1]) == 0)
				id->nlis = 2;
		}
		/* RoCE (the device's, both, or any for a wildcard): the IB CM's REQs come as
		 * MADs. */
		if (!id->dev || !id->dev->iwarp || id->tr_open)
			r = cm_roce_listen(id);
		if (r == 0)
			r = cm_kick();
	}
	if (r < 0) {
		if (getenv(CM_DEBUG_ENV))
			fprintf(stderr, "softrdma: rdma_cm: rdma_listen port %u: %s\n", id->lport,
				strerror(-r));
		listeners_close(id);
		err = -r;
		goto out;
	}
	id->backlog = backlog > 0 && backlog < 1024 ? backlog : 1024;
	id->state = CM_LISTEN;
	id_sync_route(id);
out:
	cm_unlock();
	return err ? fail(err) : 0;
}
CM_ALIAS(listen);

/* ---- connect, accept, reject, disconnect ---- */

/* librdmacm ucma_valid_param. */
static int valid_param(struct cm_id *id, const struct rdma_conn_param *p)
{
	if (!id->id.qp && !p)
		return EINVAL;
	if (!p)
		return 0;
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > id->dev->attr.max_qp_rd_atom)
		return EINVAL;
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > id->dev->attr.max_qp_init_rd_atom)
		return EINVAL;
	return 0;
}

int cm_collect_pd(struct cm_id *id, const struct rdma_conn_param *p, size_t max)
{
	size_t n = id->connect_len, add = p && p->private_data ? p->private_data_len : 0;
	if (n + add > max)
		return -EINVAL;
	if (n)
		memcpy(id->pd, id->connect_pd, n);
	if (add)
		memcpy(id->pd + n, p->private_data, add);
	id->pd_len = (uint8_t)(n + add);
	return 0;
}

static bool said_self_qp;

/* Starts the active side's TCP connection (non-blocking). 0 or io_tcp_connect's error. The
 * socket is bound first only when the application bound the id (as siw binds to the rdma_cm
 * address): a bind to port 0 with SO_REUSEADDR may be given the very port it connects to,
 * which then connects to itself; connect()'s own choice of port avoids ports in use, and its
 * source address is the one the route lookup gave. */
static int start_tcp(struct cm_id *id)
{
	struct io_tcp_opts o = tcp_opts(id);
	int r = io_tcp_connect(id->bound_app ? id->laddr : NULL, id->bound_app ? id->lport : 0,
			       id->raddr, id->rport, &o, &id->tcp);
	if (r < 0) {
		id->tcp = NULL;
		return r;
	}
	port_release(id); /* the connection holds it now */
	id->tcp_connecting = true;
	id->ev = POLLOUT;
	return 0;
}

static bool said_ud_iwarp;

/* rdma_connect's checks and parameters for a UD id (cm.h "UD ids"): the SIDR_REQ's. Under
 * the lock; 0 or a positive errno. librdmacm checks no parameters for UD (ucma_valid_param:
 * RDMA_PS_TCP only). */
static int connect_ud_params(struct cm_id *id, const struct rdma_conn_param *p)
{
	if (id->tr == CM_TR_IWARP) {
		/* siw: iw_cm_connect looks the QP number up and finds no UD QP (none can
		 * exist on iWARP): EINVAL. */
		note_once(&said_ud_iwarp, "UD (RDMA_PS_UDP) over iWARP: there are no UD QPs; "
					  "rdma_connect fails with EINVAL");
		return EINVAL;
	}
	/* IB CM: the SIDR_REQ's private data is 216 bytes, rdma_cm's header included. */
	if (cm_collect_pd(id, p, CM_SIDR_REQ_PD) < 0)
		return EINVAL;
	id->qpn = id->id.qp ? id->id.qp->qp_num : p ? p->qp_num : 0;
	/* IBTA 12.11.1: a Request ID the reply must echo. */
	id->req_id = cm_random_psn() << 8 ^ cm_random_psn();
	return 0;
}

/* rdma_connect's checks and parameters for an RC id: the REQ's / MPA Request's. Under the
 * lock; 0 or a positive errno. */
static int connect_rc_params(struct cm_id *id, const struct rdma_conn_param *p)
{
	int err = valid_param(id, p);
	if (!err && id->tr == CM_TR_IWARP && !id->id.qp) {
		/* A self-managed QP (rping -q): rdma_cm connects it, as siw's iw_cm does. */
		id->self_qp = sr_cm_iw_claim(id->dev->ctx, p->qp_num);
		if (!id->self_qp) {
			note_once(&said_self_qp, "conn_param->qp_num names no iWARP QP in INIT on "
						 "this device: EINVAL");
			err = EINVAL;
		}
	}
	if (!err && cm_collect_pd(id, p, id->tr == CM_TR_ROCE ? CM_REQ_PD : CM_IW_PD_MAX) < 0)
		err = EINVAL;
	if (err)
		return err;
	const struct ibv_device_attr *da = &id->dev->attr;
	id->depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH
			? p->initiator_depth
			: (uint8_t)(da->max_qp_init_rd_atom > 255 ? 255 : da->max_qp_init_rd_atom);
	id->rr = p && p->responder_resources != RDMA_MAX_RESP_RES
		     ? p->responder_resources
		     : (uint8_t)(da->max_qp_rd_atom > 255 ? 255 : da->max_qp_rd_atom);
	id->retry = p ? p->retry_count & 7 : 7;
	id->rnr = p ? p->rnr_retry_count & 7 : 7;
	id->qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
	id->srq = id->id.qp ? id->id.qp->srq != NULL : p->srq;
	id->psn = cm_random_psn();
	return 0;
}

int sr_rdma_connect(struct rdma_cm_id *rid, struct rdma_conn_param *p)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	int err = id->state != CM_ROUTE_RESOLVED ? EINVAL
		  : cm_is_ud(id)		 ? connect_ud_params(id, p)
						 : connect_rc_params(id, p);
	if (err) {
		cm_unlock();
		return fail(err);
	}
	free(id->connect_pd);
	id->connect_pd = NULL;
	id->connect_len = 0;

	uint64_t now = cm_now();
	id->deadline = now + cm_timeout_ns();
	id->refused_until = now + CM_REFUSED_RETRY_NS;
	id->retry_at = 0;
	int r = id->tr == CM_TR_ROCE ? cm_roce_connect(id, now) : start_tcp(id);
	if (id->tr == CM_TR_ROCE && r < 0) {
		cm_unlock();
		return fail(-r);
	}
	if (id->tr == CM_TR_ROCE)
		id_sync_route(id); /* the port it connects from */
	if (r == -EADDRINUSE || r == -EADDRNOTAVAIL || r == -EINVAL || r == -ENOMEM ||
	    r == -EMFILE) {
		cm_unlock();
		return fail(-r);
	}
	id->state = CM_CONNECTING;
	if (r < 0)
		/* Refused or unreachable at once: the event says so, as it would later. */
		cm_connect_failed(id, r);
	r = cm_kick();
	if (r < 0 && id->state == CM_CONNECTING) {
		cm_conn_drop(id, true);
		id->state = CM_ROUTE_RESOLVED;
		cm_unlock();
		return fail(-r);
	}
	cm_unlock();
	return cm_sync_complete(id);
}
CM_ALIAS(connect);

void cm_connect_failed(struct cm_id *id, int e)
{
	uint64_t deadline = id->deadline, now = cm_now();
	cm_conn_drop(id, true);
	if (e == -ECONNREFUSED && now < id->refused_until && now < deadline) {
		cm_count(CM_C_refused_retries);
		id->deadline = deadline;
		id->retry_at = now + CM_REFUSED_STEP_NS;
		return; /* still CONNECTING: the thread tries again */
	}
	id->retry_at = 0;
	id->state = CM_CLOSED;
	if (e == -ECONNREFUSED) {
		/* Nobody listens: the CM at that address rejects (RoCE: invalid service ID,
		 * with the REJ's private data, all zero; iWARP: the TCP refusal itself). */
		cm_count(CM_C_refused);
		if (cm_is_ud(id)) {
			/* The IB CM answers a SIDR_REQ for a service ID nobody serves with
			 * status 1 (cm_sidr_req_handler); rdma_cm reports it as UNREACHABLE
			 * with the reply's private data (cma_sidr_rep_handler). */
			cm_event_post_ud(id, NULL, RDMA_CM_EVENT_UNREACHABLE, CM_SIDR_UNSUPPORTED,
					 NULL, NULL, CM_SIDR_REP_PD);
			return;
		}
		cm_qp_to_err(id);
		if (id->tr == CM_TR_ROCE)
			cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, CM_REJ_INVALID_SERVICE_ID,
				      NULL, NULL, CM_REJ_PD);
		else
			cm_event_post(id, NULL, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED, NULL, NULL,
				      0);
		return;
	}
	if (e == -ETIMEDOUT)
		cm_count(CM_C_timeouts);
	cm_event_post(id, NULL, RDMA_CM_EVENT_UNREACHABLE, e, NULL, NULL, 0);
}

/* rdma_accept on a UD id (cm.h "UD ids"): the SIDR_REP, and no event to wait for. librdmacm
 * checks no parameters for UD, and a synchronous id's CONNECT_REQUEST is acked here. */
static int accept_ud(struct cm_id *id, const struct rdma_conn_param *p)
{
	int err = id->state == CM_REQ_RCVD && (id->id.qp || p) ? 0 : EINVAL;
	size_t len = p && p->private_data ? p->private_data_len : 0;
	if (!err && len > CM_SIDR_REP_PD)
		err = EINVAL; /* ib_send_cm_sidr_rep: 136 bytes at most */
	if (!err) {
		id->qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
		id->pd_len = (uint8_t)len;
		if (len)
			memcpy(id->pd, p->private_data, len);
		int r = cm_roce_accept(id, p);
		err = r < 0 ? -r : 0;
	}
	if (!err && id->sync && id->id.event) {
		ack_locked((struct cm_event *)id->id.event);
		id->id.event = NULL;
	}
	return err;
}

int sr_rdma_accept(struct rdma_cm_id *rid, struct rdma_conn_param *p)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (cm_is_ud(id)) {
		int e = accept_ud(id, p);
		cm_unlock();
		return e ? fail(e) : 0;
	}
	int err = id->state == CM_REQ_RCVD ? valid_param(id, p) : EINVAL;
	if (!err && id->tr == CM_TR_IWARP && !id->id.qp) {
		id->self_qp = sr_cm_iw_claim(id->dev->ctx, p->qp_num);
		if (!id->self_qp) {
			note_once(&said_self_qp, "conn_param->qp_num names no iWARP QP in INIT on "
						 "this device: EINVAL");
			err = EINVAL;
		}
	}
	if (!err) {
		size_t max = id->tr == CM_TR_ROCE ? CM_REP_PD : CM_IW_PD_MAX;
		size_t add = p && p->private_data ? p->private_data_len : 0;
		if (add > max)
			err = EINVAL;
	}
	if (!err) {
		/* librdmacm rdma_accept: 0xFF (or no parameters) means what the request asked
		 * for, capped by the device; other values are taken as they are. */
		const struct ibv_device_attr *da = &id->dev->attr;
		if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
			id->depth = (uint8_t)(id->depth < da->max_qp_init_rd_atom
						  ? id->depth
						  : da->max_qp_init_rd_atom);
		else
			id->depth = p->initiator_depth;
		if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
			id->rr =
			    (uint8_t)(id->rr < da->max_qp_rd_atom ? id->rr : da->max_qp_rd_atom);
		else
			id->rr = p->responder_resources;
		id->rnr = p ? p->rnr_retry_count & 7 : 7;
		id->qpn = id->id.qp ? id->id.qp->qp_num : p->qp_num;
		id->srq = id->id.qp ? id->id.qp->srq != NULL : p->srq;
		id->pd_len = (uint8_t)(p && p->private_data ? p->private_data_len : 0);
		if (id->pd_len)
			memcpy(id->pd, p->private_data, id->pd_len);
		int r = id->tr == CM_TR_ROCE ? cm_roce_accept(id, p) : cm_iw_accept(id, p);
		err = r < 0 ? -r : 0;
	}
	cm_unlock();
	if (err)
		return fail(err);
	return cm_sync_complete(id);
}
CM_ALIAS(accept);

static int reject(struct rdma_cm_id *rid, const void *private_data, uint8_t private_data_len,
		  uint16_t reason)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	int r = -EINVAL;
	if (id->state == CM_REQ_RCVD)
		r = id->tr == CM_TR_ROCE
			? cm_roce_reject(id, private_data, private_data_len, reason)
			: cm_iw_reject(id, private_data, private_data_len);
	cm_unlock();
	return r < 0 ? fail(-r) : 0;
}

int sr_rdma_reject(struct rdma_cm_id *rid, const void *private_data, uint8_t private_data_len)
{
	return reject(rid, private_data, private_data_len, CM_REJ_CONSUMER_DEFINED);
}
CM_ALIAS(reject);

/* librdmacm sends the IB CM's "vendor option not supported" (35) as the reason, which the
 * active side reads as the REJECTED event's status; iWARP's MPA reject has no reason. */
int sr_rdma_reject_ece(struct rdma_cm_id *rid, const void *private_data, uint8_t private_data_len)
{
	return reject(rid, private_data, private_data_len, CM_REJ_VENDOR_OPTION);
}
CM_ALIAS(reject_ece);

int sr_rdma_disconnect(struct rdma_cm_id *rid)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (cm_is_ud(id)) {
		/* librdmacm: the QP to ERR (ucma_shutdown); the kernel has no connection to end
		 * (rdma_disconnect finds the SIDR's IB CM id idle: neither DREQ nor DREP goes
		 * out) and reports no event. EINVAL before a request was made or received. */
		bool had = id->state == CM_CONNECTING || id->state == CM_REQ_RCVD ||
			   id->state == CM_ESTABLISHED || id->state == CM_CLOSED;
		if (had)
			cm_qp_to_err(id);
		cm_unlock();
		return had ? 0 : fail(EINVAL);
	}
	int r = -EINVAL;
	if (id->tr == CM_TR_ROCE)
		r = cm_roce_disconnect(id);
	else if (id->tr == CM_TR_IWARP)
		r = cm_iw_disconnect(id);
	cm_unlock();
	if (r < 0)
		return fail(-r);
	return cm_sync_complete(id);
}
CM_ALIAS(disconnect);

int sr_rdma_establish(struct rdma_cm_id *rid)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (rid->qp) {
		cm_unlock();
		return fail(EINVAL);
	}
	/* iWARP: the connection is up when ESTABLISHED is reported (iw_cm has no RTU); a
	 * self-managed QP's owner calling it then (rping -q) is told it is done. */
	int r = id->tr == CM_TR_ROCE			     ? cm_roce_establish(id)
		: id->state == CM_ESTABLISHED && id->self_qp ? 0
							     : -EINVAL;
	cm_unlock();
	return r < 0 ? fail(-r) : 0;
}
CM_ALIAS(establish);

int sr_rdma_notify(struct rdma_cm_id *rid, enum ibv_event_type event)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	/* IB CM: data arriving before the RTU establishes the connection (COMM_EST). */
	if (event == IBV_EVENT_COMM_EST && id->tr == CM_TR_ROCE && id->state == CM_ACCEPTING)
		cm_roce_notify_established(id);
	cm_unlock();
	return 0;
}
CM_ALIAS(notify);

int sr_rdma_set_option(struct rdma_cm_id *rid, int level, int optname, void *optval, size_t optlen)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (!optval || level != RDMA_OPTION_ID) {
		cm_unlock();
		/* RDMA_OPTION_IB_PATH: no IB paths here */
		return fail(!optval ? EINVAL : ENOSYS);
	}
	int err = 0;
	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t)) {
			err = EINVAL;
			break;
		}
		id->tos = *(uint8_t *)optval;
		id->tos_set = true;
		if (id->tcp) {
			/* An iWARP id with its connection already (a passive side's before
			 * rdma_accept, which took the listener's marks): from now on. */
			struct io_tcp_opts o = tcp_opts(id);
			(void)io_tcp_mark(id->tcp, &o);
		}
		break;
	case RDMA_OPTION_ID_REUSEADDR:
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int)) {
			err = EINVAL;
			break;
		}
		if (optname == RDMA_OPTION_ID_REUSEADDR)
			id->reuseaddr = *(int *)optval != 0;
		else
			id->afonly = *(int *)optval != 0;
		break;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t)) {
			err = EINVAL;
			break;
		}
		id->ack_timeout = *(uint8_t *)optval;
		id->ack_timeout_set = true;
		break;
	default:
		err = ENOSYS;
	}
	cm_unlock();
	return err ? fail(err) : 0;
}
CM_ALIAS(set_option);

/* The port of a route address: 0 for an id that is not live. */
static __be16 id_port(struct rdma_cm_id *rid, bool src)
{
	__be16 port = 0;
	if (!cm_id_lock(rid))
		return 0;
	const struct rdma_addr *a = &rid->route.addr;
	const struct sockaddr *sa = src ? &a->src_addr : &a->dst_addr;
	if (sa->sa_family == AF_INET6)
		port = src ? a->src_sin6.sin6_port : a->dst_sin6.sin6_port;
	else if (sa->sa_family == AF_INET)
		port = src ? a->src_sin.sin_port : a->dst_sin.sin_port;
	cm_unlock();
	return port;
}

__be16 sr_rdma_get_src_port(struct rdma_cm_id *id)
{
	return id_port(id, true);
}
CM_ALIAS(get_src_port);

__be16 sr_rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id_port(id, false);
}
CM_ALIAS(get_dst_port);

struct ibv_context **sr_rdma_get_devices(int *num_devices)
{
	cm_lock();
	devs_init();
	struct ibv_context **list = calloc((size_t)cm.ndev + 1, sizeof(*list));
	int n = 0;
	if (list)
		for (int i = 0; i < cm.ndev; i++)
			list[n++] = cm.devs[i].ctx;
	cm_unlock();
	if (num_devices)
		*num_devices = list ? n : 0;
	if (!list)
		errno = ENOMEM;
	return list;
}
CM_ALIAS(get_devices);

void sr_rdma_free_devices(struct ibv_context **list)
{
	free(list);
}
CM_ALIAS(free_devices);

/* ---- for cm_roce.c ---- */

int cm_new_comm_id(uint32_t *out)
{
	if (cm.gsi_fd < 0) {
		int fd = gsi_ep_open_tag(&cm.tag);
		if (fd < 0)
			return fd;
		cm.gsi_fd = fd;
		cm.seq = (uint16_t)cm_random_psn();
	}
	/* The tag routes MADs to this process (core/gsi.h); the low half is random, not a
	 * counter, and not one a live id has: a forged MAD must guess it (and, once the peer's
	 * is known, the peer's too: on_mad in cm_roce.c). */
	for (int i = 0; i < 64; i++) {
		uint16_t seq = (uint16_t)cm_random_psn();
		uint32_t id = (uint32_t)cm.tag << 16 | seq;
		if (seq != 0 && !cm_find_comm(id)) {
			*out = id;
			return 0;
		}
	}
	if (++cm.seq == 0) /* 64 draws all taken: the table is nearly full */
		cm.seq = 1;
	*out = (uint32_t)cm.tag << 16 | cm.seq;
	return 0;
}

struct cm_id *cm_find_comm(uint32_t comm_id)
{
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (id->comm_id == comm_id && id->tr == CM_TR_ROCE && !id->destroying &&
		    id->state != CM_LISTEN)
			return id;
	return NULL;
}

struct cm_id *cm_find(bool (*match)(const struct cm_id *id, const void *arg), const void *arg)
{
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (!id->destroying && match(id, arg))
			return id;
	return NULL;
}

struct cm_dev *cm_dev_for(const uint8_t addr[16], enum cm_transport tr)
{
	return dev_for_addr(addr, tr);
}

void cm_gsi_start_all(void)
{
	devs_init();
	for (int i = 0; i < cm.ndev; i++)
		if (!cm.devs[i].iwarp)
			sr_cm_gsi_start(cm.devs[i].ctx);
}

void cm_id_discard(struct cm_id *id)
{
	cm_conn_drop(id, true);
	id_free(id);
}

/* ---- incoming connections ---- */

bool cm_listener_takes(const struct cm_id *lis, enum cm_transport tr, const uint8_t addr[16])
{
	if (lis->dev && !lis->tr_open)
		return lis->tr == tr;
	enum cm_transport pin = pinned_transport(addr);
	return (pin == CM_TR_NONE || pin == tr) && dev_of(addr, tr);
}

void cm_addr_resolved(struct cm_id *id, struct cm_dev *d)
{
	id_set_dev(id, d);
	id->tr_open = false;
	id->state = CM_ADDR_RESOLVED;
	id_sync_route(id);
	cm_event_post(id, NULL, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, NULL, 0);
}

int cm_incoming_device(struct cm_id *id, enum cm_transport tr)
{
	struct cm_id *lis = id->listener;
	if (lis && !cm_listener_takes(lis, tr, id->laddr))
		return lis->dev && !lis->tr_open ? -EPROTOTYPE : -ENODEV;
	struct cm_dev *d =
	    lis && lis->dev && !lis->tr_open ? lis->dev : dev_for_addr(id->laddr, tr);
	if (!d)
		return -ENODEV;
	id_set_dev(id, d);
	return 0;
}

void cm_incoming_request(struct cm_id *id, const struct rdma_conn_param *param, const void *pd,
			 size_t pd_len)
{
	struct cm_id *lis = id->listener;
	id->state = CM_REQ_RCVD;
	id->deadline = 0;
	id_sync_route(id);
	cm_event_post(lis, id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, param, pd, pd_len);
}

void cm_incoming_request_ud(struct cm_id *id, const void *pd, size_t pd_len)
{
	struct cm_id *lis = id->listener;
	id->state = CM_REQ_RCVD;
	id->deadline = 0;
	id_sync_route(id);
	cm_event_post_ud(lis, id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, NULL, pd, pd_len);
}

struct cm_id *cm_incoming_new(struct cm_id *lis)
{
	struct cm_id *c = id_new(lis->ch, lis->id.context, lis->id.ps);
	if (!c)
		return NULL;
	if (lis->sync) {
		/* A synchronous listener's children are synchronous (librdmacm). */
		struct cm_channel *own = channel_new();
		if (!own) {
			id_free(c);
			return NULL;
		}
		c->ch = own;
		c->id.channel = &own->ch;
		c->sync = true;
	}
	c->listener = lis;
	c->state = CM_INCOMING;
	c->lport = lis->lport;
	c->passive = true;
	/* The listener's TOS, as the kernel's rdma_cm gives its new ids (RoCE: the REQ's
	 * traffic class replaces it, cm_roce.c). */
	c->tos = lis->tos;
	c->tos_set = lis->tos_set;
	return c;
}

static void incoming_new(struct cm_id *lis, struct io_tcp_conn *tcp, uint64_t now)
{
	struct cm_id *c = cm_incoming_new(lis);
	if (!c) {
		io_tcp_abort(tcp);
		return;
	}
	c->tcp = tcp;
	if (c->tos_set) {
		/* A TOS set on the listener after it listened: the connection follows it. */
		struct io_tcp_opts o = tcp_opts(c);
		(void)io_tcp_mark(tcp, &o);
	}
	c->ev = POLLIN;
	c->deadline = now + CM_REQ_WAIT_NS;
	uint16_t port;
	if (io_tcp_local(tcp, c->laddr, &port) != 0)
		memcpy(c->laddr, lis->laddr, 16);
	c->lport = lis->lport;
	if (io_tcp_peer(tcp, c->raddr, &c->rport) != 0)
		memset(c->raddr, 0, 16);
	c->v6 = !is_mapped(c->laddr);
	c->passive = true;
	cm_count(CM_C_accepted);
}

int cm_pending_of(const struct cm_id *lis)
{
	int n = 0;
	for (const struct cm_id *c = cm.ids; c; c = c->next)
		if (c->listener == lis && (c->state == CM_INCOMING || c->state == CM_REQ_RCVD))
			n++;
	return n;
}

static void accept_some(struct cm_id *lis, uint64_t now)
{
	for (int i = 0; i < lis->nlis; i++)
		for (int k = 0; k < 16; k++) {
			if (cm_pending_of(lis) >= lis->backlog)
				return;
			struct io_tcp_conn *tcp;
			int e = io_tcp_accept(lis->lis[i], &tcp, NULL, NULL);
			if (e == -ECONNABORTED)
				continue;
			if (e < 0)
				break;
			incoming_new(lis, tcp, now);
		}
}

/* Reads the first bytes of an incoming connection and hands it to its protocol. Returns
 * false when it is to be dropped. */
static bool incoming_run(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	static const char mpa[4] = {'M', 'P', 'A', ' '};
	if (now >= id->deadline) {
		cm_count(CM_C_timeouts);
		return false;
	}
	if (id->tr == CM_TR_IWARP)
		return cm_iw_incoming(id, now, wake);
	while (id->rx_len < 4) {
		ssize_t r = io_tcp_recv(id->tcp, id->rx + id->rx_len, 4 - id->rx_len);
		if (r == -EAGAIN) {
			id->ev = POLLIN;
			if (id->deadline < *wake)
				*wake = id->deadline;
			return true;
		}
		if (r <= 0) {
			/* Closed before its first byte: most likely an active side asking which
			 * transport we speak (cm_probe.c). */
			cm_count(r == 0 && id->rx_len == 0 ? CM_C_probe_conns : CM_C_lost);
			return false;
		}
		id->rx_len += (size_t)r;
		if (memcmp(id->rx, mpa, id->rx_len)) {
			cm_count(CM_C_rx_garbage);
			return false;
		}
	}
	/* The 4 bytes stay in rx: the protocol takes them from there. */
	if (!memcmp(id->rx, mpa, 4) && cm_is_ud(id)) {
		/* An MPA Request to a UD listener: iWARP has no UD (closed, as a request of
		 * the other transport). */
		cm_count(CM_C_wrong_transport);
		return false;
	}
	return cm_iw_incoming(id, now, wake);
}

/* ---- lingering connections ---- */

void cm_linger(struct io_tcp_conn *tcp, const uint8_t *data, size_t len)
{
	size_t off = 0;
	ssize_t r = 0;
	while (off < len) {
		r = io_tcp_send(tcp, data + off, len - off);
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	if (off == len || (r < 0 && r != -EAGAIN) || len > sizeof(((struct cm_linger *)0)->buf)) {
		/* Sent, or the peer is gone already: close (FIN after the bytes). */
		io_tcp_shutdown(tcp);
		io_tcp_close(tcp);
		return;
	}
	struct cm_linger *l = calloc(1, sizeof(*l));
	if (!l) {
		io_tcp_abort(tcp);
		return;
	}
	l->tcp = tcp;
	memcpy(l->buf, data, len);
	l->len = len;
	l->off = off;
	l->deadline = cm_now() + CM_LINGER_NS;
	l->next = cm.lingers;
	cm.lingers = l;
	cm_kick();
}

static void lingers_run(uint64_t now, uint64_t *wake)
{
	for (struct cm_linger **pp = &cm.lingers; *pp;) {
		struct cm_linger *l = *pp;
		ssize_t r = 0;
		while (l->off < l->len) {
			r = io_tcp_send(l->tcp, l->buf + l->off, l->len - l->off);
			if (r <= 0)
				break;
			l->off += (size_t)r;
		}
		bool done = l->off == l->len;
		bool gone = r < 0 && r != -EAGAIN; /* the peer is gone: nothing to wait for */
		if (!done && !gone && now < l->deadline) {
			if (l->deadline < *wake)
				*wake = l->deadline;
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		if (done) {
			io_tcp_shutdown(l->tcp);
			io_tcp_close(l->tcp);
		} else {
			io_tcp_abort(l->tcp);
		}
		free(l);
	}
}

/* ---- the thread ---- */

static void id_run(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	if (id->tr == CM_TR_ROCE) {
		cm_roce_run(id, now, wake);
		return;
	}
	if (id->state == CM_CONNECTING && !id->tcp && id->retry_at) {
		if (now < id->retry_at) {
			if (id->retry_at < *wake)
				*wake = id->retry_at;
			return;
		}
		id->retry_at = 0;
		int r = start_tcp(id);
		if (r < 0) {
			cm_connect_failed(id, r);
			if (id->retry_at && id->retry_at < *wake)
				*wake = id->retry_at;
			return;
		}
	}
	if (id->state == CM_CONNECTING && id->tcp && id->tcp_connecting) {
		int e = io_tcp_connect_done(id->tcp);
		if (e == -EINPROGRESS) {
			if (now >= id->deadline) {
				cm_connect_failed(id, -ETIMEDOUT);
				return;
			}
			id->ev = POLLOUT;
			if (id->deadline < *wake)
				*wake = id->deadline;
			return;
		}
		if (e < 0) {
			cm_connect_failed(id, e);
			return;
		}
		id->tcp_connecting = false;
		uint8_t a[16], pa[16];
		uint16_t pp;
		if (io_tcp_local(id->tcp, a, &id->lport) == 0 &&
		    io_tcp_peer(id->tcp, pa, &pp) == 0 && pp == id->lport && !memcmp(a, pa, 16)) {
			/* TCP's simultaneous open with itself (the source port picked was the
			 * destination's, nobody listening there): nobody listens. */
			cm_connect_failed(id, -ECONNREFUSED);
			return;
		}
		id_sync_route(id);
		if (cm_iw_start(id, now) < 0)
			return;
	}
	if (id->tr == CM_TR_ROCE)
		cm_roce_run(id, now, wake);
	else if (id->tr == CM_TR_IWARP)
		cm_iw_run(id, now, wake);
}

/* Frames on the RoCE CM endpoints: the process's own, then each listener's. */
static void gsi_drain(int fd, struct cm_id *lis, uint64_t now)
{
	for (int k = 0; k < 64; k++) {
		if (lis &&
		    (lis->destroying || lis->sid_fd != fd || cm_pending_of(lis) >= lis->backlog))
			return;
		struct gsi_frame f;
		int r = gsi_ep_recv(fd, &f);
		if (r == -EBADMSG) {
			cm_count(CM_C_mad_bad_frames);
			continue;
		}
		if (r <= 0)
			return;
		cm_roce_mad_in(lis, &f, now);
	}
}

static void pass(uint64_t now, uint64_t *wake)
{
	if (cm.gsi_fd >= 0)
		gsi_drain(cm.gsi_fd, NULL, now);
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (id->state == CM_LISTEN && id->sid_fd >= 0)
			gsi_drain(id->sid_fd, id, now);
	for (struct cm_id *id = cm.ids; id; id = id->next)
		if (id->state == CM_LISTEN && !id->destroying)
			accept_some(id, now);
	for (struct cm_id **pp = &cm.ids; *pp;) {
		struct cm_id *id = *pp;
		if (id->destroying) {
			pp = &id->next;
			continue;
		}
		if (id->state == CM_RESOLVING) {
			cm_probe_run(id, now, wake);
			pp = &id->next;
			continue;
		}
		if (id->state == CM_INCOMING && !incoming_run(id, now, wake)) {
			if (id->state == CM_INCOMING) {
				/* Never visible to the application: gone silently. */
				*pp = id->next;
				cm_conn_drop(id, true);
				id->next = NULL;
				id_free(id);
				continue;
			}
		} else if (id->state != CM_INCOMING &&
			   (id->tcp || id->watch_fd >= 0 || id->retry_at ||
			    (id->tr == CM_TR_ROCE &&
			     (id->mad_pending || id->deadline || id->peer_check_at)))) {
			id_run(id, now, wake);
			if (id->retry_at && id->retry_at < *wake)
				*wake = id->retry_at;
		}
		pp = &id->next;
	}
	lingers_run(now, wake);
}

static bool pfd_add(size_t *n, int fd, short ev)
{
	if (*n == cm.pfd_cap) {
		size_t cap = cm.pfd_cap ? cm.pfd_cap * 2 : 32;
		struct pollfd *p = realloc(cm.pfd, cap * sizeof(*p));
		if (!p)
			return false;
		cm.pfd = p;
		cm.pfd_cap = cap;
	}
	cm.pfd[(*n)++] = (struct pollfd){.fd = fd, .events = ev};
	return true;
}

static size_t pollset(void)
{
	size_t n = 0;
	bool ok = pfd_add(&n, cm.wake_fd, POLLIN);
	if (cm.gsi_fd >= 0)
		ok = ok && pfd_add(&n, cm.gsi_fd, POLLIN);
	for (struct cm_id *id = cm.ids; ok && id; id = id->next) {
		if (id->destroying)
			continue;
		if (id->state == CM_LISTEN) {
			if (cm_pending_of(id) >= id->backlog) {
				if (!id->backlog_noted)
					cm_count(CM_C_backlog_full);
				id->backlog_noted = true;
				continue;
			}
			id->backlog_noted = false;
			for (int i = 0; ok && i < id->nlis; i++)
				ok = pfd_add(&n, io_tcp_listener_fd(id->lis[i]), POLLIN);
			if (id->sid_fd >= 0)
				ok = ok && pfd_add(&n, id->sid_fd, POLLIN);
		}
		if (id->tcp && id->ev)
			ok = ok && pfd_add(&n, io_tcp_fd(id->tcp), id->ev);
		if (id->watch_fd >= 0)
			ok = ok && pfd_add(&n, id->watch_fd, POLLRDHUP);
	}
	for (struct cm_linger *l = cm.lingers; ok && l; l = l->next)
		ok = pfd_add(&n, io_tcp_fd(l->tcp), POLLOUT);
	return ok ? n : 0;
}

static void *cm_main(void *arg)
{
	(void)arg;
	cm_lock();
	for (;;) {
		uint64_t now = cm_now();
		uint64_t wake = now + POLL_MAX_MS * 1000000ull;
		pass(now, &wake);
		size_t n = pollset();
		int fd = cm.wake_fd;
		cm.in_poll = true;
		cm_unlock();
		uint64_t ms = wake > now ? (wake - now + 999999) / 1000000 : 0;
		if (n == 0) {
			usleep(1000);
		} else {
			poll(cm.pfd, (nfds_t)n, (int)(ms > POLL_MAX_MS ? POLL_MAX_MS : ms));
			uint64_t v;
			if (cm.pfd[0].revents && read(fd, &v, sizeof(v)) < 0) {
				/* cleared already */
			}
		}
		cm_lock();
		cm.in_poll = false;
		cm.poll_gen++;
		pthread_cond_broadcast(&cm.cond);
	}
	return NULL;
}

int cm_kick(void)
{
	if (cm.wake_fd < 0) {
		cm.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (cm.wake_fd < 0)
			return -errno;
	}
	if (!cm.thread_started) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		int r = pthread_create(&t, &a, cm_main, NULL);
		pthread_attr_destroy(&a);
		if (r != 0)
			return -r;
		cm.thread_started = true;
	}
	uint64_t one = 1;
	if (write(cm.wake_fd, &one, sizeof(one)) < 0) {
		/* already signalled */
	}
	return 0;
}

/* ---- helpers for cm_qp.c / cm_ep.c ---- */

struct cm_id *cm_id_new_sync(void *context, enum rdma_port_space ps)
{
	pthread_once(&atfork_once, atfork_register);
	cm_lock();
	struct cm_id *id = id_new(NULL, context, ps);
	cm_unlock();
	return id;
}
