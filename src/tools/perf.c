/* `softrdma lat` and `softrdma bw`: perftest-style latency and bandwidth tests (RC SEND, RDMA
 * WRITE, RDMA READ, atomics) between two processes, on the standard verbs API only, so they run
 * on any verbs device (softrdma's roce_* and iwarp_*, or real RDMA hardware).
 *
 * Like perftest, one process is the server (no address given) and one the client. A TCP
 * side-band connection (the "channel") carries the test parameters (the client's; the server
 * follows them), the QP numbers, PSNs, GIDs and buffer keys, a barrier before each size, the
 * end-of-size counts and the result rows, which both sides print. Every step of the channel has
 * a timeout, and while the data moves each side also watches the channel, so a vanished or
 * interrupted peer ends the run with a clear message instead of a hang.
 *
 * Data are checked, so that a broken transport cannot produce a fast wrong number: each size
 * starts with an unmeasured round whose data are verified byte for byte; the first and last
 * bytes of every received message are checked (and cleared again before the buffer is reused);
 * the last message of each latency run and every used buffer slot of a bandwidth run are
 * verified in full; atomics check every returned value and the final counter; every completion
 * status is checked. Any mismatch: a message naming the byte, and exit status 1.
 *
 * Statistics and the perftest report lines come from util/stats.h.
 *
 * Test hook: SOFTRDMA_PERF_CORRUPT=1 makes a side flip one byte of what it sends or lends
 * (tests/e2e/test_perf_cli.sh checks that the peer reports the mismatch). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/tools.h"
#include "tools/util.h"
#include "util/stats.h"

#define DEFAULT_PORT	18515
#define DEFAULT_TIMEOUT 10.0
#define LAT_RX_SLOTS	4	    /* SEND latency: receive slots (3 posted + 1 held) */
#define BW_SLOT_BUDGET	(16u << 20) /* bytes of message slots per area, shared by the QPs */
#define MAX_SIZE	(256u << 20)
#define MAX_BUFFERS	(UINT64_C(1) << 30) /* all QPs' buffers together */
#define MAX_QPS		64
#define MAX_DEPTH	16384
#define SWEEP_MAX_LOG2	23 /* -a: 2 B .. 8 MiB, as perftest */
#define MAX_RD_ATOMIC	16 /* perftest's default outstanding READs/atomics (-o) */
#define INLINE_LAT	236
#define CHAN_MAX	16384 /* largest channel payload */
#define CHAN_HDR	4
#define HEARTBEAT_NS	1000000000ull
#define CHAN_CHECK_NS	1000000ull
#define NS_PER_S	1000000000ull

/* wr_id: QP index in bits 48-63, a receive / flush flag, then the sequence number or slot. */
#define WR_RECV	    (UINT64_C(1) << 47)
#define WR_FLUSH    (UINT64_C(1) << 46)
#define WR_SEQ_MASK ((UINT64_C(1) << 46) - 1)

enum test { T_LAT, T_BW };
enum verb { V_SEND, V_WRITE, V_READ, V_ATOMIC, V_COUNT };

static const struct {
	const char *name;  /* --verb */
	const char *title; /* perftest's test title */
	const char *what;  /* in messages */
	bool half_rtt;	   /* latency reported as half the round trip (perftest) */
} verbs[V_COUNT] = {
    [V_SEND] = {"send", "Send", "SEND", true},
    [V_WRITE] = {"write", "RDMA_Write", "RDMA WRITE", true},
    [V_READ] = {"read", "RDMA_Read", "RDMA READ", false},
    [V_ATOMIC] = {"atomic", "Atomic", "atomic", false},
};

/* The test parameters: the client's govern; a server that was given one must agree. */
struct params {
	uint32_t verb;
	bool cas;    /* atomics: CMP_AND_SWAP instead of FETCH_AND_ADD */
	bool all;    /* -a */
	bool bidir;  /* -b */
	bool compat; /* --perftest-compat */
	uint64_t size;
	uint64_t iters;
	uint64_t duration_us; /* -D; 0: -n */
	uint32_t qps;
	uint32_t tx_depth;
	uint32_t rx_depth;
};

enum {
	SET_VERB = 1 << 0,
	SET_CAS = 1 << 1,
	SET_ALL = 1 << 2,
	SET_BIDIR = 1 << 3,
	SET_COMPAT = 1 << 4,
	SET_SIZE = 1 << 5,
	SET_ITERS = 1 << 6,
	SET_DURATION = 1 << 7,
	SET_QPS = 1 << 8,
	SET_TX = 1 << 9,
	SET_RX = 1 << 10,
};

enum msg_type {
	M_HELLO = 1,
	M_HELLO_OK,
	M_QPINFO,
	M_START,
	M_READY,
	M_DONE,
	M_STALE,
	M_ROW,
	M_HB,
	M_ERROR,
	M_ABORT,
	M_BYE,
	M_CREDIT,
	M_COUNT
};
static const char *const msg_names[M_COUNT] = {
    [M_HELLO] = "HELLO",   [M_HELLO_OK] = "HELLO_OK", [M_QPINFO] = "QPINFO", [M_START] = "START",
    [M_READY] = "READY",   [M_DONE] = "DONE",	      [M_STALE] = "STALE",   [M_ROW] = "ROW",
    [M_HB] = "HEARTBEAT",  [M_ERROR] = "ERROR",	      [M_ABORT] = "ABORT",   [M_BYE] = "BYE",
    [M_CREDIT] = "CREDIT",
};

#define HELLO_MAGIC   0x53525046u /* "SRPF" */
#define HELLO_VERSION 1u

/* The TCP side-band channel. Messages: type (1 byte), 0, payload length (2 bytes, big
 * endian), payload; every number in a payload is big endian. */
struct chan {
	int fd;
	uint8_t rx[2 * (CHAN_MAX + CHAN_HDR)];
	size_t rx_len;
	bool eof;
	bool dead; /* the peer failed or left: send it nothing more */
	uint64_t last_rx;
	uint8_t msg[CHAN_MAX + 1]; /* the last message taken by chan_expect, NUL-terminated */
	size_t msg_len;
};

struct qpctx {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf; /* out area [0, out_len), in area [out_len, out_len + in_len) */
	size_t out_len, in_len;
	uint32_t psn;
	uint32_t rqpn, rpsn, rrkey;
	uint64_t rin_addr, rin_len;
	/* per size */
	uint64_t posted, done; /* issued work requests (sequence numbers) */
	uint64_t flush_posted,
	    flush_done; /* zero-byte SENDs that consume the peer's stale receives */
	uint64_t rx_posted, rx_done, rx_zero;
	bool rx_full_checked;
	int64_t held; /* SEND latency: the slot holding the last message, -1 none */
	uint64_t peer_count, peer_stale, own_stale;
	uint64_t peer_rx_posted; /* iWARP SEND: receives the peer has posted (credits) */
	uint64_t credit_sent;	 /* iWARP SEND: our rx_posted when we last announced it */
};

struct opts {
	enum test test;
	struct params p;
	unsigned set;
	const char *dev_name;
	int gid_index;
	int port;
	long inline_size; /* -1: default */
	bool gbits, histogram, cdf;
	const char *json;
	double timeout_s;
	const char *server;
};

struct perf {
	struct opts o;
	struct params p; /* effective */
	enum test test;
	const char *cmd;
	bool client;
	const char *role, *peer;
	uint64_t timeout_ns;
	/* device */
	struct ibv_device **list;
	struct ibv_context *ctx;
	const char *dev_name;
	bool iwarp, atomics;
	bool credits; /* iWARP SEND bandwidth: flow control by receive credits */
	bool corrupt; /* SOFTRDMA_PERF_CORRUPT=1 (tests): send or lend one wrong byte */
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	int gid_index;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct qpctx *q;
	uint32_t nq;
	uint32_t sq_cap, rq_cap, inline_max, ird, ord;
	enum ibv_mtu mtu;
	/* sizes */
	uint64_t *sizes;
	size_t nsizes;
	uint64_t max_size, cur_size;
	/* channel */
	struct chan chan;
	uint64_t next_hb, next_chan;
	uint64_t spins;
	uint64_t poll_time; /* when the last non-empty poll returned */
	/* CPU time of this process (all threads, the progress thread included) over the
	 * current size's measurement, and the peer's, from its DONE. */
	uint64_t cpu_start, cpu_ns, peer_cpu_ns;
	/* latency samples */
	double *samples;
	uint64_t *stamps;
	size_t samples_cap;
	/* output */
	FILE *out;
	FILE *json;
	struct strbuf rows;
	char error[512];
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* ---- messages ---- */

static void cpu_begin(struct perf *pf)
{
	pf->cpu_start = tool_cpu_ns();
}

static void cpu_end(struct perf *pf)
{
	pf->cpu_ns = tool_cpu_ns() - pf->cpu_start;
}

static void vreport(struct perf *pf, const char *fmt, va_list ap)
{
	char msg[sizeof(pf->error)];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fflush(stdout);
	fprintf(stderr, "softrdma %s: %s\n", pf->cmd, msg);
	if (!pf->error[0])
		memcpy(pf->error, msg, sizeof(msg));
}

/* Prints an error; the peer is not told (it failed or left). Returns -1. */
__attribute__((format(printf, 2, 3))) static int report(struct perf *pf, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(pf, fmt, ap);
	va_end(ap);
	return -1;
}

static void chan_send_quiet(struct perf *pf, uint8_t type, const void *payload, size_t len);

/* Prints an error and sends it to the peer, which prints it too. Returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(struct perf *pf, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vreport(pf, fmt, ap);
	va_end(ap);
	chan_send_quiet(pf, M_ERROR, pf->error, strlen(pf->error));
	pf->chan.dead = true;
	return -1;
}

__attribute__((format(printf, 2, 3))) static void say(struct perf *pf, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(pf->out, fmt, ap);
	va_end(ap);
	fflush(pf->out);
}

/* ---- data patterns ---- */

static uint64_t mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* What a message carries: a pseudo-random pattern of its byte offsets, seeded by the sending
 * side and the size. WRITE latency messages are "stamped" with their iteration: the first bytes
 * XORed with it and the last byte a tag that changes every iteration (and is never 0, the
 * cleared value), on which the target spins, as ib_write_lat does. */
struct msgfmt {
	uint64_t seed;
	bool stamped;
	uint64_t iter;
};

static uint8_t tag_of(uint64_t iter)
{
	return (uint8_t)(iter % 255 + 1);
}

static uint8_t pat_byte(uint64_t seed, size_t k)
{
	uint64_t w = mix64(seed ^ (uint64_t)(k & ~(size_t)7));
	return (uint8_t)(w >> (8 * (k & 7)));
}

static size_t head_len(size_t size)
{
	return size < 8 ? size : 8;
}

static uint8_t msg_byte(const struct msgfmt *f, size_t size, size_t k)
{
	if (f->stamped) {
		if (k == size - 1)
			return tag_of(f->iter);
		if (k < head_len(size - 1))
			return pat_byte(f->seed, k) ^ (uint8_t)(f->iter >> (8 * k));
	}
	return pat_byte(f->seed, k);
}

static void pat_fill(uint8_t *p, size_t n, uint64_t seed)
{
	size_t j = 0;
	for (; j + 8 <= n; j += 8) {
		uint64_t w = htole64(mix64(seed ^ (uint64_t)j));
		memcpy(p + j, &w, 8);
	}
	if (j < n) {
		uint64_t w = htole64(mix64(seed ^ (uint64_t)j));
		memcpy(p + j, &w, n - j);
	}
}

/* The first offset in [from, to) where p differs from the plain pattern, or -1. */
static int64_t pat_diff(const uint8_t *p, size_t from, size_t to, uint64_t seed)
{
	size_t k = from;
	while (k < to) {
		size_t base = k & ~(size_t)7;
		uint64_t w = htole64(mix64(seed ^ (uint64_t)base));
		uint8_t wb[8];
		memcpy(wb, &w, 8);
		size_t end = base + 8 < to ? base + 8 : to;
		if (k == base && end == base + 8 && !memcmp(p + k, wb, 8)) {
			k = end;
			continue;
		}
		for (; k < end; k++)
			if (p[k] != wb[k - base])
				return (int64_t)k;
	}
	return -1;
}

/* What n (1..8) bytes of a message from offset `from` must be: msg_byte's answers, byte i in
 * bits 8i, from one or two pattern words (the ends are checked and cleared on every message:
 * they should cost less than the stack under test). */
static uint64_t msg_word(const struct msgfmt *f, size_t size, size_t from, size_t n)
{
	size_t sh = from & 7, block = from - sh;
	uint64_t w = mix64(f->seed ^ (uint64_t)block) >> (8 * sh);
	if (sh && sh + n > 8)
		w |= mix64(f->seed ^ (uint64_t)(block + 8)) << (8 * (8 - sh));
	if (f->stamped) {
		size_t hs = head_len(size - 1);
		if (from < hs) {
			size_t m = hs - from < n ? hs - from : n;
			uint64_t st = f->iter >> (8 * from);
			w ^= m < 8 ? st & ((UINT64_C(1) << (8 * m)) - 1) : st;
		}
		if (from + n == size) {
			w &= ~(UINT64_C(0xff) << (8 * (n - 1)));
			w |= (uint64_t)tag_of(f->iter) << (8 * (n - 1));
		}
	}
	return n < 8 ? w & ((UINT64_C(1) << (8 * n)) - 1) : w;
}

/* The first of n (1..8) bytes at p that differs from the word's, or -1. */
static int64_t word_diff(const uint8_t *p, size_t n, uint64_t w)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (uint8_t)(w >> (8 * i)))
			return (int64_t)i;
	return -1;
}

/* Checks a message's first and last bytes, or (full) every byte. -1 if it is right, else the
 * first wrong offset. */
static int64_t msg_diff(const uint8_t *p, size_t size, const struct msgfmt *f, bool full)
{
	size_t h = head_len(size), t = head_len(size - h);
	int64_t bad = word_diff(p, h, msg_word(f, size, 0, h));
	if (bad >= 0)
		return bad;
	if (t && (bad = word_diff(p + size - t, t, msg_word(f, size, size - t, t))) >= 0)
		return (int64_t)(size - t) + bad;
	if (!full || h + t >= size)
		return -1;
	/* A stamp is within the head and the last byte: the middle is the plain pattern. */
	return pat_diff(p, h, size - t, f->seed);
}

/* Sets the first and last bytes to the complement of what the next message must write. */
static void msg_clear_ends(uint8_t *p, size_t size, const struct msgfmt *f)
{
	size_t h = head_len(size), t = head_len(size - h);
	uint64_t w = ~msg_word(f, size, 0, h);
	for (size_t i = 0; i < h; i++)
		p[i] = (uint8_t)(w >> (8 * i));
	w = t ? ~msg_word(f, size, size - t, t) : 0;
	for (size_t i = 0; i < t; i++)
		p[size - t + i] = (uint8_t)(w >> (8 * i));
}

static void msg_stamp(uint8_t *p, size_t size, const struct msgfmt *f)
{
	size_t h = head_len(size - 1);
	for (size_t k = 0; k < h; k++)
		p[k] = msg_byte(f, size, k);
	p[size - 1] = tag_of(f->iter);
}

/* Data written or sent by the client, by the server. */
static uint64_t seed_of(bool client, uint64_t size)
{
	return mix64((client ? 0xc11e47ull : 0x5e7e7ull) ^ (size << 20));
}

static uint64_t my_seed(const struct perf *pf)
{
	return seed_of(pf->client, pf->cur_size);
}

static uint64_t peer_seed(const struct perf *pf)
{
	return seed_of(!pf->client, pf->cur_size);
}

static uint64_t atomic_base(uint32_t qi)
{
	return (UINT64_C(0xa70) << 40) | ((uint64_t)qi << 32);
}

static int data_fail(struct perf *pf, const char *what, uint32_t qi, uint64_t iter, size_t off,
		     uint8_t got, uint8_t want)
{
	return fail(pf,
		    "%s data mismatch: QP %u, message %llu of %llu bytes, byte %zu is 0x%02x, "
		    "expected 0x%02x",
		    what, qi, (unsigned long long)iter, (unsigned long long)pf->cur_size, off, got,
		    want);
}

/* Big-endian payload writer and reader. */
struct wbuf {
	uint8_t b[CHAN_MAX];
	size_t len;
};

static void w32(struct wbuf *w, uint32_t v)
{
	if (w->len + 4 > sizeof(w->b))
		return;
	v = htobe32(v);
	memcpy(w->b + w->len, &v, 4);
	w->len += 4;
}

static void w64(struct wbuf *w, uint64_t v)
{
	if (w->len + 8 > sizeof(w->b))
		return;
	v = htobe64(v);
	memcpy(w->b + w->len, &v, 8);
	w->len += 8;
}

static void wbytes(struct wbuf *w, const void *p, size_t n)
{
	if (w->len + n > sizeof(w->b))
		return;
	memcpy(w->b + w->len, p, n);
	w->len += n;
}

struct rbuf {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

static uint32_t r32(struct rbuf *r)
{
	uint32_t v = 0;
	if (r->pos + 4 > r->len) {
		r->bad = true;
		return 0;
	}
	memcpy(&v, r->p + r->pos, 4);
	r->pos += 4;
	return be32toh(v);
}

static uint64_t r64(struct rbuf *r)
{
	uint64_t v = 0;
	if (r->pos + 8 > r->len) {
		r->bad = true;
		return 0;
	}
	memcpy(&v, r->p + r->pos, 8);
	r->pos += 8;
	return be64toh(v);
}

static void rbytes(struct rbuf *r, void *p, size_t n)
{
	if (r->pos + n > r->len) {
		r->bad = true;
		memset(p, 0, n);
		return;
	}
	memcpy(p, r->p + r->pos, n);
	r->pos += n;
}

static struct rbuf rmsg(struct perf *pf)
{
	return (struct rbuf){.p = pf->chan.msg, .len = pf->chan.msg_len};
}

static uint64_t dbits(double d)
{
	uint64_t u;
	memcpy(&u, &d, 8);
	return u;
}

static double bitsd(uint64_t u)
{
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* ---- the side-band channel ---- */

static void chan_send_quiet(struct perf *pf, uint8_t type, const void *payload, size_t len)
{
	struct chan *c = &pf->chan;
	if (c->fd < 0 || c->dead || len > CHAN_MAX)
		return;
	uint8_t b[CHAN_HDR + CHAN_MAX];
	b[0] = type;
	b[1] = 0;
	b[2] = (uint8_t)(len >> 8);
	b[3] = (uint8_t)len;
	if (len)
		memcpy(b + CHAN_HDR, payload, len);
	/* Best effort, never blocks for long: the peer may be gone. */
	size_t off = 0, total = CHAN_HDR + len;
	for (int tries = 0; off < total && tries < 20; tries++) {
		ssize_t n = send(c->fd, b + off, total - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return;
		struct pollfd p = {.fd = c->fd, .events = POLLOUT};
		poll(&p, 1, 10);
	}
}

static int chan_send(struct perf *pf, uint8_t type, const void *payload, size_t len)
{
	struct chan *c = &pf->chan;
	if (c->fd < 0 || c->dead)
		return -1;
	if (len > CHAN_MAX)
		return fail(pf, "internal error: %s message of %zu bytes", msg_names[type], len);
	uint8_t b[CHAN_HDR + CHAN_MAX];
	b[0] = type;
	b[1] = 0;
	b[2] = (uint8_t)(len >> 8);
	b[3] = (uint8_t)len;
	if (len)
		memcpy(b + CHAN_HDR, payload, len);
	size_t off = 0, total = CHAN_HDR + len;
	uint64_t t0 = tool_now_ns();
	while (off < total) {
		ssize_t n = send(c->fd, b + off, total - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (stop_signal)
				return -1;
			if (pf->timeout_ns && tool_now_ns() - t0 > pf->timeout_ns) {
				c->dead = true;
				return report(pf,
					      "the %s accepts no data on the side-band connection",
					      pf->peer);
			}
			struct pollfd p = {.fd = c->fd, .events = POLLOUT};
			poll(&p, 1, 100);
			continue;
		}
		c->dead = true;
		return report(
		    pf, "the %s closed the side-band connection (%s): it exited or was killed",
		    pf->peer, strerror(errno));
	}
	return 0;
}

/* Reads what the socket has, waiting up to wait_ms for something. */
static void chan_fill(struct perf *pf, int wait_ms)
{
	struct chan *c = &pf->chan;
	if (c->fd < 0 || c->eof || c->rx_len == sizeof(c->rx))
		return;
	struct pollfd p = {.fd = c->fd, .events = POLLIN};
	if (poll(&p, 1, wait_ms) <= 0)
		return;
	ssize_t n = recv(c->fd, c->rx + c->rx_len, sizeof(c->rx) - c->rx_len, MSG_DONTWAIT);
	if (n > 0) {
		c->rx_len += (size_t)n;
		c->last_rx = tool_now_ns();
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		c->eof = true;
	}
}

/* The message at the front of the receive buffer, if it is complete. */
static bool chan_peek(struct chan *c, uint8_t *type, size_t *len)
{
	if (c->rx_len < CHAN_HDR)
		return false;
	*type = c->rx[0];
	*len = (size_t)c->rx[2] << 8 | c->rx[3];
	return c->rx_len >= CHAN_HDR + *len;
}

static void chan_pop(struct chan *c, size_t len)
{
	size_t n = CHAN_HDR + len;
	memmove(c->rx, c->rx + n, c->rx_len - n);
	c->rx_len -= n;
}

/* Reads without waiting and handles heartbeats, errors and aborts from the peer. Returns 1 if
 * another message is at the front, 0 if none, -1 if the peer failed or left (reported). */
static int chan_service(struct perf *pf)
{
	struct chan *c = &pf->chan;
	chan_fill(pf, 0);
	uint8_t type = 0;
	size_t len = 0;
	while (chan_peek(c, &type, &len)) {
		if (len > CHAN_MAX || type == 0 || type >= M_COUNT) {
			c->dead = true;
			return report(pf,
				      "protocol error on the side-band connection: is the %s a "
				      "softrdma %s?",
				      pf->peer, pf->cmd);
		}
		if (type == M_HB) {
			chan_pop(c, len);
			continue;
		}
		if (type == M_CREDIT) {
			struct rbuf r = {.p = c->rx + CHAN_HDR, .len = len};
			uint32_t n = r32(&r);
			for (uint32_t i = 0; i < n && i < pf->nq; i++) {
				uint64_t v = r64(&r);
				if (!r.bad && v > pf->q[i].peer_rx_posted)
					pf->q[i].peer_rx_posted = v;
			}
			chan_pop(c, len);
			continue;
		}
		if (type == M_ERROR || type == M_ABORT) {
			char text[CHAN_MAX + 1];
			memcpy(text, c->rx + CHAN_HDR, len);
			text[len] = 0;
			c->dead = true;
			if (type == M_ERROR)
				return report(pf, "%s: %s", pf->peer, text);
			return report(pf, "the %s stopped: %s", pf->peer, text);
		}
		return 1;
	}
	if (c->eof) {
		c->dead = true;
		return report(
		    pf,
		    "the %s closed the side-band connection during the test (it exited or "
		    "was killed)",
		    pf->peer);
	}
	return 0;
}

/* Waits for a message of type `want` (heartbeats keep it waiting; nothing at all from the peer
 * for the timeout ends it) and leaves its payload in chan.msg. */
static int chan_expect(struct perf *pf, uint8_t want)
{
	struct chan *c = &pf->chan;
	uint64_t since = tool_now_ns();
	for (;;) {
		if (stop_signal)
			return -1;
		int r = chan_service(pf);
		if (r < 0)
			return -1;
		if (r == 1) {
			uint8_t type = 0;
			size_t len = 0;
			chan_peek(c, &type, &len);
			if (type != want)
				return fail(pf, "protocol error: the %s sent %s, expected %s",
					    pf->peer, msg_names[type], msg_names[want]);
			memcpy(c->msg, c->rx + CHAN_HDR, len);
			c->msg[len] = 0;
			c->msg_len = len;
			chan_pop(c, len);
			return 0;
		}
		uint64_t t = tool_now_ns(), last = c->last_rx > since ? c->last_rx : since;
		if (pf->timeout_ns && t - last > pf->timeout_ns)
			return fail(pf,
				    "nothing from the %s for %.1f s (waiting for %s): giving up",
				    pf->peer, pf->o.timeout_s, msg_names[want]);
		chan_fill(pf, 100);
	}
}

static void heartbeat(struct perf *pf, uint64_t t)
{
	if (t >= pf->next_hb) {
		pf->next_hb = t + HEARTBEAT_NS;
		chan_send_quiet(pf, M_HB, NULL, 0);
	}
}

/* ---- connecting the channel ---- */

static int chan_listen(struct perf *pf)
{
	int one = 1, zero = 0, ls = -1;
	/* The wildcard of IPv6 (which takes IPv4 too), then of IPv4 where there is no IPv6; or
	 * SOFTRDMA_TOOL_BIND's address alone. */
	const char *bind_env = getenv("SOFTRDMA_TOOL_BIND");
	bool pinned = bind_env && *bind_env;
	for (int family = AF_INET6; ls < 0; family = AF_INET) {
		struct sockaddr_storage a;
		char why[160];
		socklen_t al = tool_listen_addr(family, (uint16_t)pf->o.port, &a, why, sizeof(why));
		if (!al)
			return report(pf, "%s", why);
		ls = socket(a.ss_family, SOCK_STREAM, 0);
		int e = errno;
		if (ls >= 0) {
			if (a.ss_family == AF_INET6)
				setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
			setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (bind(ls, (struct sockaddr *)&a, al) == 0)
				break;
			e = errno;
			close(ls);
			ls = -1;
		}
		if (pinned || family == AF_INET || e == EADDRINUSE)
			return report(pf, "cannot listen on TCP port %d: %s", pf->o.port,
				      strerror(e));
	}
	if (listen(ls, 1)) {
		int e = errno;
		close(ls);
		return report(pf, "cannot listen on TCP port %d: %s", pf->o.port, strerror(e));
	}
	say(pf, "\n************************************\n"
		"* Waiting for client to connect... *\n"
		"************************************\n");
	uint64_t t0 = tool_now_ns();
	int fd = -1;
	while (fd < 0) {
		if (stop_signal)
			break;
		if (pf->timeout_ns && tool_now_ns() - t0 > pf->timeout_ns) {
			report(pf, "no client connected to TCP port %d within %.1f s", pf->o.port,
			       pf->o.timeout_s);
			break;
		}
		struct pollfd p = {.fd = ls, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0 && errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
			report(pf, "accept: %s", strerror(errno));
			break;
		}
	}
	close(ls);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pf->chan.fd = fd;
	pf->chan.last_rx = tool_now_ns();
	return 0;
}

/* One non-blocking connect attempt within the remaining time; 0, or an errno. */
static int try_connect(const struct addrinfo *ai, uint64_t deadline, int *out)
{
	int fd =
	    socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
	if (fd < 0)
		return errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		goto connected;
	if (errno != EINPROGRESS) {
		int e = errno;
		close(fd);
		return e;
	}
	for (;;) {
		if (stop_signal) {
			close(fd);
			return EINTR;
		}
		uint64_t t = tool_now_ns();
		if (deadline && t >= deadline) {
			close(fd);
			return ETIMEDOUT;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, 100) > 0)
			break;
	}
	int err = 0;
	socklen_t l = sizeof(err);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l);
	if (err) {
		close(fd);
		return err;
	}
connected:;
	int flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
	*out = fd;
	return 0;
}

static int chan_connect(struct perf *pf)
{
	char service[16];
	snprintf(service, sizeof(service), "%d", pf->o.port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	int gai = getaddrinfo(pf->o.server, service, &hints, &res);
	if (gai)
		return report(pf, "cannot resolve server '%s': %s", pf->o.server,
			      gai_strerror(gai));
	uint64_t t0 = tool_now_ns(), deadline = pf->timeout_ns ? t0 + pf->timeout_ns : 0;
	int fd = -1, last = 0;
	while (fd < 0 && !stop_signal) {
		for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
			int e = try_connect(ai, deadline, &fd);
			if (e && e != ETIMEDOUT && e != EINTR)
				last = e;
		}
		if (fd >= 0 || (deadline && tool_now_ns() >= deadline))
			break;
		usleep(100000); /* the server may not be listening yet */
	}
	freeaddrinfo(res);
	if (fd < 0) {
		if (stop_signal)
			return -1;
		return report(pf, TOOL_NO_SERVER " %s port %d within %.1f s: %s", pf->o.server,
			      pf->o.port, pf->o.timeout_s, last ? strerror(last) : "no answer");
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	pf->chan.fd = fd;
	pf->chan.last_rx = tool_now_ns();
	return 0;
}

/* ---- parameters ---- */

static void hello_write(const struct perf *pf, struct wbuf *w)
{
	const struct params *p = &pf->p;
	w32(w, HELLO_MAGIC);
	w32(w, HELLO_VERSION);
	w32(w, pf->test);
	w32(w, p->verb);
	w32(w, (p->all ? 1u : 0) | (p->bidir ? 2u : 0) | (p->compat ? 4u : 0) | (p->cas ? 8u : 0));
	w64(w, p->size);
	w64(w, p->iters);
	w64(w, p->duration_us);
	w32(w, p->qps);
	w32(w, p->tx_depth);
	w32(w, p->rx_depth);
}

static const char *tests[] = {"lat", "bw"};

/* Parameter checks both sides make (the server on what the client sent). NULL if fine. */
static const char *params_check(enum test t, const struct params *p, char *why, size_t len)
{
	if (p->verb >= V_COUNT)
		return "unknown verb";
	if (!p->all && (p->size < 1 || p->size > MAX_SIZE)) {
		snprintf(why, len, "-s must be 1 .. %u bytes (256 MiB)", MAX_SIZE);
		return why;
	}
	if (p->verb == V_ATOMIC && !p->all && p->size != 8)
		return "atomics are 8 bytes: -s must be 8 (or left out) with --verb atomic";
	if (p->cas && p->verb != V_ATOMIC)
		return "-A/--atomic_type needs --verb atomic";
	if (!p->duration_us && p->iters < 1)
		return "-n must be at least 1";
	if (!p->duration_us && p->compat && p->iters < 4)
		return "--perftest-compat needs -n 4 or more (perftest drops the 2 largest "
		       "samples)";
	if (p->iters > (UINT64_C(1) << 40))
		return "-n is too large";
	if (p->qps < 1 || p->qps > MAX_QPS) {
		snprintf(why, len, "-q must be 1 .. %d", MAX_QPS);
		return why;
	}
	if (p->tx_depth < 1 || p->tx_depth > MAX_DEPTH || p->rx_depth < 1 ||
	    p->rx_depth > MAX_DEPTH) {
		snprintf(why, len, "-t and -r must be 1 .. %d", MAX_DEPTH);
		return why;
	}
	if ((uint64_t)p->qps * (p->tx_depth + p->rx_depth) > 65535)
		return "-q times (-t + -r) must stay below 65536 (completion queue entries)";
	if (t == T_LAT && (p->qps != 1 || p->bidir))
		return "-q and -b are bandwidth options (softrdma bw)";
	if (t == T_BW && p->compat)
		return "--perftest-compat is a latency option (softrdma lat)";
	return NULL;
}

/* The server adopts the client's parameters; a parameter given to both must agree. */
static int hello_read(struct perf *pf)
{
	struct rbuf r = rmsg(pf);
	uint32_t magic = r32(&r), version = r32(&r), test = r32(&r);
	struct params c = {0};
	c.verb = r32(&r);
	uint32_t flags = r32(&r);
	c.all = flags & 1;
	c.bidir = flags & 2;
	c.compat = flags & 4;
	c.cas = flags & 8;
	c.size = r64(&r);
	c.iters = r64(&r);
	c.duration_us = r64(&r);
	c.qps = r32(&r);
	c.tx_depth = r32(&r);
	c.rx_depth = r32(&r);
	if (r.bad || magic != HELLO_MAGIC)
		return fail(pf, "the client is not a softrdma lat/bw client");
	if (version != HELLO_VERSION)
		return fail(pf, "the client speaks protocol version %u, this server %u", version,
			    HELLO_VERSION);
	if (test != (uint32_t)pf->test)
		return fail(pf, "the client runs 'softrdma %s', this server 'softrdma %s'",
			    test < 2 ? tests[test] : "?", tests[pf->test]);
	char why[128];
	const char *bad = params_check(pf->test, &c, why, sizeof(why));
	if (bad)
		return fail(pf, "bad parameters from the client: %s", bad);
	const struct params *s = &pf->o.p;
	unsigned set = pf->o.set;
	struct {
		unsigned bit;
		bool differs;
		const char *name;
	} checks[] = {
	    {SET_VERB, s->verb != c.verb, "--verb"},
	    {SET_CAS, s->cas != c.cas, "-A/--atomic_type"},
	    {SET_ALL, s->all != c.all, "-a"},
	    {SET_SIZE, s->size != c.size || c.all, "-s"},
	    {SET_ITERS, s->iters != c.iters || c.duration_us, "-n"},
	    {SET_DURATION, s->duration_us != c.duration_us, "-D"},
	    {SET_QPS, s->qps != c.qps, "-q"},
	    {SET_TX, s->tx_depth != c.tx_depth, "-t"},
	    {SET_RX, s->rx_depth != c.rx_depth, "-r"},
	    {SET_BIDIR, s->bidir != c.bidir, "-b"},
	    {SET_COMPAT, s->compat != c.compat, "--perftest-compat"},
	};
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		if ((set & checks[i].bit) && checks[i].differs)
			return fail(pf,
				    "the client and the server disagree on %s (the server follows "
				    "the client: give it only to the client, or the same to both)",
				    checks[i].name);
	pf->p = c;
	return 0;
}

/* ---- device ---- */

static bool gid_is_v4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(g->raw, prefix, 12);
}

static bool gid_is_zero(const union ibv_gid *g)
{
	for (int i = 0; i < 16; i++)
		if (g->raw[i])
			return false;
	return true;
}

static int open_device(struct perf *pf)
{
	int n = 0;
	pf->list = ibv_get_device_list(&n);
	if (!pf->list)
		return report(pf, "cannot list RDMA devices: %s", strerror(errno));
	if (n == 0)
		return report(pf, "no RDMA device (softrdma offers one per network interface with "
				  "an IPv4 address)");
	struct ibv_device *dev = NULL;
	const char *want = pf->o.dev_name;
	for (int i = 0; i < n && !dev; i++)
		if (!strcmp(ibv_get_device_name(pf->list[i]), want ? want : "roce_lo"))
			dev = pf->list[i];
	if (!dev && !want)
		dev = pf->list[0];
	if (!dev) {
		char names[256] = "";
		size_t off = 0;
		for (int i = 0; i < n && off < sizeof(names); i++)
			off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s",
						i ? ", " : "", ibv_get_device_name(pf->list[i]));
		return report(pf, "no device named '%s' (available: %s)", want, names);
	}
	pf->dev_name = ibv_get_device_name(dev);
	pf->iwarp = dev->transport_type == IBV_TRANSPORT_IWARP;
	pf->ctx = ibv_open_device(dev);
	if (!pf->ctx)
		return report(pf, "cannot open device %s: %s", pf->dev_name, strerror(errno));
	if (ibv_query_device(pf->ctx, &pf->dattr) || ibv_query_port(pf->ctx, 1, &pf->pattr))
		return report(pf, "cannot query device %s", pf->dev_name);
	if (pf->pattr.state != IBV_PORT_ACTIVE)
		return report(pf, "port 1 of %s is not active (%s)", pf->dev_name,
			      ibv_port_state_str(pf->pattr.state));
	pf->atomics = pf->dattr.atomic_cap != IBV_ATOMIC_NONE;
	int idx = pf->o.gid_index;
	if (idx >= 0) {
		if (idx >= pf->pattr.gid_tbl_len || ibv_query_gid(pf->ctx, 1, idx, &pf->gid) ||
		    gid_is_zero(&pf->gid))
			return report(pf, "%s has no GID at index %d (see 'softrdma devices -v')",
				      pf->dev_name, idx);
	} else {
		/* perftest's auto-selection: the first IPv4-based GID, else the first one. */
		int first = -1;
		for (int i = 0; i < pf->pattr.gid_tbl_len && idx < 0; i++) {
			union ibv_gid g;
			if (ibv_query_gid(pf->ctx, 1, i, &g) || gid_is_zero(&g))
				continue;
			if (first < 0)
				first = i;
			if (gid_is_v4(&g))
				idx = i;
		}
		if (idx < 0)
			idx = first;
		if (idx < 0 || ibv_query_gid(pf->ctx, 1, idx, &pf->gid))
			return report(pf, "%s has no usable GID", pf->dev_name);
	}
	pf->gid_index = idx;
	return 0;
}

static int need_atomics(struct perf *pf)
{
	if (pf->p.verb == V_ATOMIC && !pf->atomics)
		return fail(pf, "device %s has no atomics (atomic_cap NONE%s)", pf->dev_name,
			    pf->iwarp ? ": iWARP has no atomic operations" : "");
	return 0;
}

/* ---- buffers and QPs ---- */

static size_t stride_of(uint64_t size)
{
	return (size_t)((size + 63) & ~(uint64_t)63);
}

struct layout {
	size_t stride;
	uint32_t out_slots, in_slots;
};

static uint32_t budget_slots(const struct perf *pf, size_t stride, uint32_t want, uint32_t min)
{
	uint64_t n = BW_SLOT_BUDGET / pf->p.qps / stride;
	if (n > want)
		n = want;
	if (n < min)
		n = min;
	return (uint32_t)n;
}

/* Where messages of `size` go. Both sides compute the same layout from the same parameters,
 * which is how an issuer knows the peer's slots. Latency: one stride (the largest size) for
 * every size, so receives posted for one size fit the next. */
static struct layout layout_of(const struct perf *pf, uint64_t size)
{
	struct layout l;
	if (pf->test == T_LAT) {
		l.stride = stride_of(pf->max_size);
		l.out_slots = 1;
		l.in_slots = pf->p.verb == V_SEND ? LAT_RX_SLOTS : 1;
		return l;
	}
	if (pf->p.verb == V_ATOMIC) {
		l.stride = 8;
		l.out_slots = pf->p.tx_depth; /* one result slot per outstanding atomic */
		l.in_slots = 1;		      /* the counter */
		return l;
	}
	l.stride = stride_of(size);
	l.out_slots = budget_slots(pf, l.stride, pf->p.tx_depth, 1);
	l.in_slots = pf->p.verb == V_SEND ? budget_slots(pf, l.stride, pf->p.rx_depth, 2)
					  : budget_slots(pf, l.stride, pf->p.tx_depth, 1);
	return l;
}

static uint8_t *out_slot(const struct perf *pf, struct qpctx *q, uint64_t i)
{
	struct layout l = layout_of(pf, pf->cur_size);
	return q->buf + (i % l.out_slots) * l.stride;
}

static uint8_t *in_slot(const struct perf *pf, struct qpctx *q, uint64_t i)
{
	struct layout l = layout_of(pf, pf->cur_size);
	return q->buf + q->out_len + (i % l.in_slots) * l.stride;
}

static int make_sizes(struct perf *pf)
{
	size_t n = 1;
	if (pf->p.verb == V_ATOMIC)
		n = 1;
	else if (pf->p.all)
		n = SWEEP_MAX_LOG2;
	pf->sizes = calloc(n, sizeof(*pf->sizes));
	if (!pf->sizes)
		return report(pf, "out of memory");
	pf->nsizes = n;
	if (pf->p.verb == V_ATOMIC)
		pf->sizes[0] = 8;
	else if (pf->p.all)
		for (size_t i = 0; i < n; i++)
			pf->sizes[i] = UINT64_C(2) << i;
	else
		pf->sizes[0] = pf->p.size;
	pf->max_size = pf->sizes[n - 1];
	return 0;
}

static int create_resources(struct perf *pf)
{
	const struct params *p = &pf->p;
	pf->nq = p->qps;
	if (pf->max_size > pf->pattr.max_msg_sz)
		return fail(pf, "%llu-byte messages exceed %s's largest message (%u bytes)",
			    (unsigned long long)pf->max_size, pf->dev_name, pf->pattr.max_msg_sz);
	pf->sq_cap = pf->test == T_LAT ? 4 : p->tx_depth;
	pf->rq_cap = 1;
	size_t out_len = 0, in_len = 0;
	for (size_t i = 0; i < pf->nsizes; i++) {
		struct layout l = layout_of(pf, pf->sizes[i]);
		if (l.out_slots * l.stride > out_len)
			out_len = l.out_slots * l.stride;
		if (l.in_slots * l.stride > in_len)
			in_len = l.in_slots * l.stride;
		if (p->verb == V_SEND && l.in_slots > pf->rq_cap)
			pf->rq_cap = l.in_slots;
	}
	out_len = stride_of(out_len);
	in_len = stride_of(in_len);
	if ((uint64_t)(out_len + in_len) * pf->nq > MAX_BUFFERS)
		return fail(pf,
			    "%u QPs with %llu-byte messages need %llu MiB of buffers (at most "
			    "%llu): use fewer QPs or smaller messages",
			    pf->nq, (unsigned long long)pf->max_size,
			    (unsigned long long)((out_len + in_len) * pf->nq >> 20),
			    (unsigned long long)(MAX_BUFFERS >> 20));
	if (pf->sq_cap > (uint32_t)pf->dattr.max_qp_wr ||
	    pf->rq_cap > (uint32_t)pf->dattr.max_qp_wr)
		return fail(pf, "%s allows at most %d work requests per queue", pf->dev_name,
			    pf->dattr.max_qp_wr);
	int cqe = (int)(pf->nq * (pf->sq_cap + pf->rq_cap));
	if (cqe > pf->dattr.max_cqe)
		return fail(pf, "%s allows at most %d completion queue entries (need %d)",
			    pf->dev_name, pf->dattr.max_cqe, cqe);
	pf->pd = ibv_alloc_pd(pf->ctx);
	if (!pf->pd)
		return fail(pf, "ibv_alloc_pd: %s", strerror(errno));
	pf->cq = ibv_create_cq(pf->ctx, cqe, NULL, NULL, 0);
	if (!pf->cq)
		return fail(pf, "ibv_create_cq(%d): %s", cqe, strerror(errno));
	pf->q = calloc(pf->nq, sizeof(*pf->q));
	if (!pf->q)
		return fail(pf, "out of memory");
	long want_inline =
	    pf->o.inline_size >= 0 ? pf->o.inline_size : (pf->test == T_LAT ? INLINE_LAT : 0);
	if (p->verb == V_READ || p->verb == V_ATOMIC)
		want_inline = 0;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		     (pf->atomics ? IBV_ACCESS_REMOTE_ATOMIC : 0);
	uint64_t seed = mix64(tool_now_ns() ^ (uint64_t)getpid() << 32);
	for (uint32_t i = 0; i < pf->nq; i++) {
		struct qpctx *q = &pf->q[i];
		q->out_len = out_len;
		q->in_len = in_len;
		size_t total = (out_len + in_len + 4095) & ~(size_t)4095;
		q->buf = aligned_alloc(4096, total);
		if (!q->buf)
			return fail(pf, "cannot allocate %zu bytes of buffers", total);
		memset(q->buf, 0, total);
		q->mr = ibv_reg_mr(pf->pd, q->buf, total, access);
		if (!q->mr)
			return fail(pf, "ibv_reg_mr(%zu bytes): %s", total, strerror(errno));
		struct ibv_qp_init_attr qia = {.send_cq = pf->cq,
					       .recv_cq = pf->cq,
					       .qp_type = IBV_QPT_RC,
					       .cap = {.max_send_wr = pf->sq_cap,
						       .max_recv_wr = pf->rq_cap,
						       .max_send_sge = 1,
						       .max_recv_sge = 1,
						       .max_inline_data = (uint32_t)want_inline}};
		q->qp = ibv_create_qp(pf->pd, &qia);
		if (!q->qp && want_inline) { /* the device has less inline room: none then */
			qia.cap.max_inline_data = 0;
			q->qp = ibv_create_qp(pf->pd, &qia);
		}
		if (!q->qp)
			return fail(pf, "ibv_create_qp: %s", strerror(errno));
		if (i == 0)
			pf->inline_max = want_inline ? qia.cap.max_inline_data : 0;
		if (pf->inline_max > (uint32_t)want_inline)
			pf->inline_max = (uint32_t)want_inline;
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
					.port_num = 1,
					.qp_access_flags =
					    (unsigned)access & ~IBV_ACCESS_LOCAL_WRITE};
		int e = ibv_modify_qp(q->qp, &a,
				      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					  IBV_QP_ACCESS_FLAGS);
		if (e)
			return fail(pf, "cannot move QP 0x%06x to INIT: %s", q->qp->qp_num,
				    strerror(e));
		q->psn = (uint32_t)mix64(seed + i) & 0xffffff;
		q->held = -1;
	}
	pf->ird = (uint32_t)pf->dattr.max_qp_rd_atom;
	if (pf->ird > MAX_RD_ATOMIC)
		pf->ird = MAX_RD_ATOMIC;
	if (pf->ird < 1)
		pf->ird = 1;
	return 0;
}

static void qpinfo_write(const struct perf *pf, struct wbuf *w)
{
	w32(w, pf->pattr.active_mtu);
	w32(w, pf->ird);
	w32(w, pf->iwarp);
	w32(w, pf->nq);
	for (uint32_t i = 0; i < pf->nq; i++) {
		const struct qpctx *q = &pf->q[i];
		w32(w, q->qp->qp_num);
		w32(w, q->psn);
		w32(w, q->mr->rkey);
		w64(w, (uintptr_t)q->buf + q->out_len);
		w64(w, q->in_len);
		wbytes(w, pf->gid.raw, 16);
		/* The QP's ECE (zeros where the device has none): how two softrdma QPs agree
		 * on selective repeat without rdma_cm (ibv_set_ece with the peer's). */
		struct ibv_ece ece;
		memset(&ece, 0, sizeof(ece));
		if (ibv_query_ece(q->qp, &ece))
			memset(&ece, 0, sizeof(ece));
		w32(w, ece.vendor_id);
		w32(w, ece.options);
	}
}

static int connect_qps(struct perf *pf)
{
	struct rbuf r = rmsg(pf);
	uint32_t mtu = r32(&r), ird = r32(&r), iwarp = r32(&r), n = r32(&r);
	if (!r.bad && iwarp != pf->iwarp)
		return fail(pf,
			    "the %s uses %s, the %s %s (%s): both sides need the same transport",
			    pf->role, pf->iwarp ? "iWARP" : "RoCE", pf->peer,
			    iwarp ? "iWARP" : "RoCE", pf->dev_name);
	if (r.bad || n != pf->nq)
		return fail(pf, "the %s announced %u QPs, expected %u", pf->peer, n, pf->nq);
	pf->mtu = mtu < (uint32_t)pf->pattr.active_mtu ? (enum ibv_mtu)mtu : pf->pattr.active_mtu;
	pf->ord = (uint32_t)pf->dattr.max_qp_init_rd_atom;
	if (pf->ord > ird)
		pf->ord = ird;
	if (pf->ord > MAX_RD_ATOMIC)
		pf->ord = MAX_RD_ATOMIC;
	if (pf->ord < 1)
		pf->ord = 1;
	for (uint32_t i = 0; i < n; i++) {
		struct qpctx *q = &pf->q[i];
		union ibv_gid dgid;
		q->rqpn = r32(&r);
		q->rpsn = r32(&r) & 0xffffff;
		q->rrkey = r32(&r);
		q->rin_addr = r64(&r);
		q->rin_len = r64(&r);
		rbytes(&r, dgid.raw, 16);
		struct ibv_ece ece = {.vendor_id = r32(&r)};
		ece.options = r32(&r);
		if (r.bad)
			return fail(pf, "short QPINFO from the %s", pf->peer);
		/* Take the peer's ECE, as rdma_cm does with the one a REQ / REP carries: the
		 * options both sides have are used. A device without ECE says EOPNOTSUPP. */
		if (ece.vendor_id) {
			int e = ibv_set_ece(q->qp, &ece);
			if (e && e != EOPNOTSUPP)
				return fail(pf, "cannot set the %s's ECE on QP 0x%06x: %s",
					    pf->peer, q->qp->qp_num, strerror(e));
		}
		if (q->rin_len < q->in_len)
			return fail(pf, "the %s's buffers are smaller than expected", pf->peer);
		struct ibv_qp_attr a;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		a.path_mtu = pf->mtu;
		a.dest_qp_num = q->rqpn;
		a.rq_psn = q->rpsn;
		a.max_dest_rd_atomic = (uint8_t)pf->ird;
		a.min_rnr_timer = 1; /* 0.01 ms: a SEND bandwidth receiver reposts quickly */
		a.ah_attr.is_global = 1;
		a.ah_attr.port_num = 1;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.sgid_index = (uint8_t)pf->gid_index;
		a.ah_attr.grh.dgid = dgid;
		int e = ibv_modify_qp(q->qp, &a,
				      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER);
		if (e)
			return fail(pf, "cannot move QP 0x%06x to RTR: %s", q->qp->qp_num,
				    strerror(e));
		a.qp_state = IBV_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.sq_psn = q->psn;
		a.max_rd_atomic = (uint8_t)pf->ord;
		e = ibv_modify_qp(q->qp, &a,
				  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
		if (e)
			return fail(pf, "cannot move QP 0x%06x to RTS: %s", q->qp->qp_num,
				    strerror(e));
		if (i == 0) {
			char mine[INET6_ADDRSTRLEN], theirs[INET6_ADDRSTRLEN];
			inet_ntop(AF_INET6, pf->gid.raw, mine, sizeof(mine));
			inet_ntop(AF_INET6, dgid.raw, theirs, sizeof(theirs));
			say(pf,
			    " local address: QPN 0x%06x PSN 0x%06x RKey 0x%08x VAddr 0x%016llx\n"
			    " GID: %s\n"
			    " remote address: QPN 0x%06x PSN 0x%06x RKey 0x%08x VAddr 0x%016llx\n"
			    " GID: %s\n",
			    q->qp->qp_num, q->psn, q->mr->rkey,
			    (unsigned long long)((uintptr_t)q->buf + q->out_len), mine, q->rqpn,
			    q->rpsn, q->rrkey, (unsigned long long)q->rin_addr, theirs);
		}
	}
	return 0;
}

/* ---- posting and completions ---- */

static uint64_t wrid(uint32_t qi, uint64_t x)
{
	return (uint64_t)qi << 48 | x;
}

static int post_recv(struct perf *pf, uint32_t qi, uint32_t slot)
{
	struct qpctx *q = &pf->q[qi];
	struct layout l = layout_of(pf, pf->cur_size);
	struct ibv_sge sge = {.addr = (uintptr_t)in_slot(pf, q, slot),
			      .length = (uint32_t)l.stride,
			      .lkey = q->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wrid(qi, WR_RECV | slot), .sg_list = &sge, .num_sge = 1},
			   *bad;
	int e = ibv_post_recv(q->qp, &wr, &bad);
	if (e)
		return fail(pf, "ibv_post_recv: %s", strerror(e));
	q->rx_posted++;
	return 0;
}

/* Posts the issuer's work request `seq` (always signaled). */
static int post_op(struct perf *pf, uint32_t qi, uint64_t seq)
{
	struct qpctx *q = &pf->q[qi];
	struct layout l = layout_of(pf, pf->cur_size);
	uint32_t size = (uint32_t)pf->cur_size;
	struct ibv_sge sge = {
	    .addr = (uintptr_t)out_slot(pf, q, seq), .length = size, .lkey = q->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wrid(qi, seq),
				 .sg_list = &sge,
				 .num_sge = 1,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	uint64_t raddr = q->rin_addr + (seq % l.in_slots) * l.stride;
	switch (pf->p.verb) {
	case V_SEND:
		wr.opcode = IBV_WR_SEND;
		break;
	case V_WRITE:
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = q->rrkey;
		break;
	case V_READ:
		wr.opcode = IBV_WR_RDMA_READ;
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = q->rrkey;
		break;
	default: {
		uint64_t expect = atomic_base(qi) + seq;
		wr.wr.atomic.remote_addr = q->rin_addr;
		wr.wr.atomic.rkey = q->rrkey;
		if (pf->p.cas) {
			wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
			wr.wr.atomic.compare_add = expect;
			wr.wr.atomic.swap = expect + 1;
		} else {
			wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			wr.wr.atomic.compare_add = 1;
		}
		uint64_t *res = (uint64_t *)(void *)out_slot(pf, q, seq);
		*res = ~expect;
		break;
	}
	}
	if ((pf->p.verb == V_SEND || pf->p.verb == V_WRITE) && size <= pf->inline_max)
		wr.send_flags |= IBV_SEND_INLINE;
	int e = ibv_post_send(q->qp, &wr, &bad);
	if (e)
		return fail(pf, "QP %u: cannot post %s: %s", qi, verbs[pf->p.verb].what,
			    strerror(e));
	q->posted++;
	return 0;
}

static int post_flush(struct perf *pf, uint32_t qi)
{
	struct qpctx *q = &pf->q[qi];
	struct ibv_send_wr wr = {.wr_id = wrid(qi, WR_FLUSH),
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	int e = ibv_post_send(q->qp, &wr, &bad);
	if (e)
		return fail(pf, "QP %u: cannot post a zero-byte SEND: %s", qi, strerror(e));
	q->flush_posted++;
	return 0;
}

/* iWARP has no RNR: a SEND that finds no posted receive terminates the connection (RFC 5040
 * 7.2). So the receiver of a SEND bandwidth test announces its posted receives over the
 * channel, every quarter of its receive window, and the sender never runs ahead of them. */
static int announce_credits(struct perf *pf, struct qpctx *q)
{
	if (!pf->credits)
		return 0;
	uint64_t step = layout_of(pf, pf->cur_size).in_slots / 4;
	bool last = !pf->p.duration_us && q->rx_posted == pf->p.iters + 1; /* no more reposts */
	if (q->rx_posted == q->credit_sent ||
	    (q->rx_posted - q->credit_sent < (step ? step : 1) && !last))
		return 0;
	struct wbuf w = {.len = 0};
	w32(&w, pf->nq);
	for (uint32_t i = 0; i < pf->nq; i++) {
		w64(&w, pf->q[i].rx_posted);
		pf->q[i].credit_sent = pf->q[i].rx_posted;
	}
	return chan_send(pf, M_CREDIT, w.b, w.len);
}

static int on_recv(struct perf *pf, uint32_t qi, const struct ibv_wc *wc)
{
	struct qpctx *q = &pf->q[qi];
	uint32_t slot = (uint32_t)(wc->wr_id & 0xffffffff);
	if (wc->byte_len == 0 && pf->test == T_BW) { /* the peer consumes our stale receives */
		q->rx_zero++;
		return 0;
	}
	if (wc->byte_len != pf->cur_size)
		return fail(pf, "QP %u: received %u bytes, expected %llu", qi, wc->byte_len,
			    (unsigned long long)pf->cur_size);
	size_t size = (size_t)pf->cur_size;
	uint8_t *msg = in_slot(pf, q, slot);
	struct msgfmt f = {.seed = peer_seed(pf)};
	int64_t bad = msg_diff(msg, size, &f, !q->rx_full_checked);
	if (bad >= 0)
		return data_fail(pf, "SEND", qi, q->rx_done, (size_t)bad, msg[bad],
				 msg_byte(&f, size, (size_t)bad));
	q->rx_full_checked = true;
	q->rx_done++;
	if (pf->test == T_LAT) {
		/* Keep the last message intact for the final full check; reuse the one before. */
		if (q->held >= 0) {
			msg_clear_ends(in_slot(pf, q, (uint64_t)q->held), size, &f);
			if (post_recv(pf, qi, (uint32_t)q->held))
				return -1;
		}
		q->held = slot;
		return 0;
	}
	if (pf->p.duration_us || q->rx_posted < pf->p.iters + 1) {
		msg_clear_ends(msg, size, &f);
		if (post_recv(pf, qi, slot))
			return -1;
	}
	return announce_credits(pf, q);
}

/* Handles a completion; returns 1 for an issuer completion, 0 for others, -1 on error. */
static int on_wc(struct perf *pf, const struct ibv_wc *wc)
{
	uint32_t qi = (uint32_t)(wc->wr_id >> 48);
	if (qi >= pf->nq)
		return fail(pf, "completion with an unknown wr_id 0x%llx",
			    (unsigned long long)wc->wr_id);
	struct qpctx *q = &pf->q[qi];
	if (wc->status != IBV_WC_SUCCESS) {
		/* A peer that stopped or failed has said why on the channel (before it tore its
		 * QPs down): its word explains more than the flush it caused here. */
		for (uint64_t t0 = tool_now_ns(); tool_now_ns() - t0 < 300000000ull;) {
			chan_fill(pf, 20);
			int r = chan_service(pf);
			if (r < 0)
				return -1;
			if (r == 1)
				break;
		}
		const char *what = wc->wr_id & WR_RECV	  ? "receive"
				   : wc->wr_id & WR_FLUSH ? "zero-byte SEND"
							  : verbs[pf->p.verb].what;
		return fail(pf, "QP %u: %s failed: %s (status %d, vendor error 0x%x)", qi, what,
			    ibv_wc_status_str(wc->status), wc->status, wc->vendor_err);
	}
	if (wc->wr_id & WR_RECV)
		return on_recv(pf, qi, wc);
	if (wc->wr_id & WR_FLUSH) {
		q->flush_done++;
		return 0;
	}
	uint64_t seq = wc->wr_id & WR_SEQ_MASK;
	if (seq != q->done) /* RC completes a QP's work requests in order */
		return fail(pf, "QP %u: completion of request %llu, expected %llu", qi,
			    (unsigned long long)seq, (unsigned long long)q->done);
	q->done++;
	if (pf->p.verb == V_ATOMIC) {
		uint64_t got, want = atomic_base(qi) + seq;
		memcpy(&got, out_slot(pf, q, seq), 8);
		if (got != want)
			return fail(pf,
				    "QP %u: atomic %llu returned 0x%llx, expected 0x%llx (the "
				    "counter's value before it)",
				    qi, (unsigned long long)seq, (unsigned long long)got,
				    (unsigned long long)want);
	}
	return 1;
}

/* Polls once. Returns the number of issuer completions (>= 0) or -1. *any: completions of any
 * kind. */
static int poll_once(struct perf *pf, int *any)
{
	struct ibv_wc wc[32];
	int n = ibv_poll_cq(pf->cq, 32, wc);
	if (n < 0)
		return fail(pf, "ibv_poll_cq failed");
	if (any)
		*any = n;
	if (n == 0)
		return 0;
	pf->poll_time = tool_now_ns();
	int issued = 0;
	for (int i = 0; i < n; i++) {
		int r = on_wc(pf, &wc[i]);
		if (r < 0)
			return -1;
		issued += r;
	}
	return issued;
}

/* Busy-wait bookkeeping: heartbeats, the channel (every ms) and the inactivity limit.
 * tick() does it for the time t; wait_tick() every 256 spins. They return 0 to go on, 1 if a
 * channel message is pending (left there), -1 to stop. */
struct waiter {
	uint64_t last_progress;
	const char *what;
};

static void waiter_init(struct waiter *w, const char *what)
{
	w->last_progress = tool_now_ns();
	w->what = what;
}

static int tick(struct perf *pf, struct waiter *w, uint64_t t)
{
	if (stop_signal)
		return -1;
	heartbeat(pf, t);
	if (t >= pf->next_chan) {
		pf->next_chan = t + CHAN_CHECK_NS;
		int r = chan_service(pf);
		if (r)
			return r;
	}
	if (w && pf->timeout_ns && t > w->last_progress && t - w->last_progress > pf->timeout_ns)
		return fail(pf, "no %s for %.1f s: the %s stopped responding", w->what,
			    pf->o.timeout_s, pf->peer);
	return 0;
}

static int wait_tick(struct perf *pf, struct waiter *w)
{
	if (stop_signal)
		return -1;
	if (++pf->spins & 255)
		return 0;
	return tick(pf, w, tool_now_ns());
}

/* Waits until `*counter` reaches `target`, polling the CQ. */
static int wait_count(struct perf *pf, const uint64_t *counter, uint64_t target, const char *what)
{
	struct waiter w;
	waiter_init(&w, what);
	while (*counter < target) {
		int any;
		if (poll_once(pf, &any) < 0)
			return -1;
		if (any) {
			w.last_progress = pf->poll_time;
			continue;
		}
		if (wait_tick(pf, &w) < 0) /* a pending message waits for its reader */
			return -1;
	}
	return 0;
}

/* Waits until a message's bytes are all there: the target of an RDMA WRITE sees the last byte
 * (on which it spins) possibly before others of the same packet are copied. */
static int settle(struct perf *pf, const uint8_t *p, size_t size, const struct msgfmt *f, bool full,
		  const char *what, uint32_t qi, uint64_t iter)
{
	uint64_t t0 = 0;
	for (;;) {
		int64_t bad = msg_diff(p, size, f, full);
		if (bad < 0)
			return 0;
		uint64_t t = tool_now_ns();
		if (!t0)
			t0 = t;
		if (stop_signal)
			return -1;
		/* Half the inactivity limit: the peer hears of a mismatch before it times out. */
		if (t - t0 > (pf->timeout_ns ? pf->timeout_ns / 2 : 10 * NS_PER_S))
			return data_fail(pf, what, qi, iter, (size_t)bad, p[bad],
					 msg_byte(f, size, (size_t)bad));
	}
}

/* ---- per-size set-up ---- */

/* Fills what this side sends or lends, clears what it receives, posts receives. */
static int prepare_size(struct perf *pf, uint64_t size)
{
	pf->cur_size = size;
	struct layout l = layout_of(pf, size);
	struct msgfmt peer = {.seed = peer_seed(pf)};
	for (uint32_t qi = 0; qi < pf->nq; qi++) {
		struct qpctx *q = &pf->q[qi];
		uint8_t *out = q->buf, *in = q->buf + q->out_len;
		q->posted = q->done = q->flush_posted = q->flush_done = 0;
		q->rx_done = q->rx_zero = 0;
		q->rx_full_checked = false;
		q->peer_count = q->peer_stale = q->own_stale = 0;
		switch (pf->p.verb) {
		case V_SEND:
		case V_WRITE:
			for (uint32_t s = 0; s < l.out_slots; s++)
				pat_fill(out + s * l.stride, (size_t)size, my_seed(pf));
			break;
		case V_READ:
			for (uint32_t s = 0; s < l.in_slots; s++)
				pat_fill(in + s * l.stride, (size_t)size, my_seed(pf));
			memset(out, 0, l.out_slots * l.stride);
			break;
		default: {
			uint64_t v = atomic_base(qi);
			memcpy(in, &v, 8);
			break;
		}
		}
		if (pf->p.verb == V_WRITE)
			memset(in, 0, l.in_slots * l.stride);
		if (pf->corrupt && pf->p.verb != V_ATOMIC) /* test hook: the peer must notice */
			(pf->p.verb == V_READ ? in : out)[size / 2] ^= 0x20;
		if (pf->p.verb != V_SEND)
			continue;
		if (pf->test == T_LAT) {
			/* Receives stay posted from size to size (one stride for all sizes). */
			for (uint32_t s = 0; s < l.in_slots; s++)
				msg_clear_ends(in + s * l.stride, (size_t)size, &peer);
			if (q->rx_posted == 0) {
				for (uint32_t s = 0; s < l.in_slots; s++)
					if (post_recv(pf, qi, s))
						return -1;
			} else if (q->held >= 0 && post_recv(pf, qi, (uint32_t)q->held)) {
				return -1;
			}
			q->held = -1;
			continue;
		}
		bool receiving = !pf->client || pf->p.bidir;
		q->rx_posted = 0;
		uint64_t n = l.in_slots;
		if (!pf->p.duration_us && n > pf->p.iters + 1)
			n = pf->p.iters + 1;
		q->peer_rx_posted = n; /* what the peer posts first (the same computation) */
		q->credit_sent = n;
		if (!receiving)
			continue;
		for (uint32_t s = 0; s < n; s++) {
			msg_clear_ends(in + s * l.stride, (size_t)size, &peer);
			if (post_recv(pf, qi, s))
				return -1;
		}
	}
	return 0;
}

/* The client announces the size; the server prepares and answers READY. */
static int size_barrier(struct perf *pf, uint64_t size, size_t index)
{
	struct wbuf w = {.len = 0};
	if (pf->client) {
		if (prepare_size(pf, size))
			return -1;
		w64(&w, size);
		w32(&w, (uint32_t)index);
		if (chan_send(pf, M_START, w.b, w.len) || chan_expect(pf, M_READY))
			return -1;
		return 0;
	}
	if (chan_expect(pf, M_START))
		return -1;
	struct rbuf r = rmsg(pf);
	uint64_t got = r64(&r);
	uint32_t idx = r32(&r);
	if (r.bad || idx != index || got != size)
		return fail(pf, "protocol error: the client starts size %llu, expected %llu",
			    (unsigned long long)got, (unsigned long long)size);
	if (prepare_size(pf, size))
		return -1;
	return chan_send(pf, M_READY, NULL, 0);
}

/* ---- latency ---- */

static int grow_samples(struct perf *pf, struct stats *st)
{
	size_t cap = pf->samples_cap ? pf->samples_cap * 2 : 65536;
	double *s = realloc(pf->samples, cap * sizeof(*s));
	if (!s)
		return fail(pf, "out of memory for %zu samples", cap);
	pf->samples = s;
	uint64_t *t = realloc(pf->stamps, cap * sizeof(*t));
	if (!t)
		return fail(pf, "out of memory for %zu samples", cap);
	pf->stamps = t;
	pf->samples_cap = cap;
	st->buf = s;
	st->cap = cap;
	return 0;
}

/* Client: one round trip of iteration `i`; t0/t1 bracket it. */
static int lat_round_client(struct perf *pf, uint64_t i, uint64_t *t0, uint64_t *t1)
{
	struct qpctx *q = &pf->q[0];
	size_t size = (size_t)pf->cur_size;
	uint8_t *in = in_slot(pf, q, 0), *out = out_slot(pf, q, 0);
	volatile uint8_t *last = in + size - 1;
	bool full = i == 0;
	switch (pf->p.verb) {
	case V_SEND: {
		while (q->posted - q->done >= pf->sq_cap)
			if (wait_count(pf, &q->done, q->done + 1, "SEND completion"))
				return -1;
		uint64_t want = q->rx_done + 1;
		*t0 = tool_now_ns();
		if (post_op(pf, 0, q->posted))
			return -1;
		struct waiter w;
		waiter_init(&w, "reply");
		while (q->rx_done < want) {
			int any;
			if (poll_once(pf, &any) < 0)
				return -1;
			if (any)
				continue;
			if (wait_tick(pf, &w) < 0)
				return -1;
		}
		*t1 = pf->poll_time;
		return 0; /* on_recv checked the reply (in full for the first) */
	}
	case V_WRITE: {
		struct msgfmt mine = {.seed = my_seed(pf), .stamped = true, .iter = i};
		struct msgfmt theirs = {.seed = peer_seed(pf), .stamped = true, .iter = i};
		uint64_t need = size > pf->inline_max ? q->posted : q->posted + 1 - pf->sq_cap;
		if (q->posted >= pf->sq_cap || size > pf->inline_max)
			if (wait_count(pf, &q->done, need, "RDMA WRITE completion"))
				return -1;
		msg_stamp(out, size, &mine);
		uint8_t tag = tag_of(i);
		*t0 = tool_now_ns();
		if (post_op(pf, 0, q->posted))
			return -1;
		struct waiter w;
		waiter_init(&w, "RDMA WRITE from the server");
		while (*last != tag) {
			if (poll_once(pf, NULL) < 0)
				return -1;
			if (wait_tick(pf, &w) < 0)
				return -1;
		}
		*t1 = tool_now_ns();
		return settle(pf, in, size, &theirs, full, "RDMA WRITE", 0, i);
	}
	case V_READ: {
		struct msgfmt theirs = {.seed = peer_seed(pf)};
		msg_clear_ends(out, size, &theirs);
		uint64_t want = q->done + 1;
		*t0 = tool_now_ns();
		if (post_op(pf, 0, q->posted) ||
		    wait_count(pf, &q->done, want, "RDMA READ response"))
			return -1;
		*t1 = pf->poll_time;
		int64_t bad = msg_diff(out, size, &theirs, full);
		if (bad >= 0)
			return data_fail(pf, "RDMA READ", 0, i, (size_t)bad, out[bad],
					 msg_byte(&theirs, size, (size_t)bad));
		return 0;
	}
	default: {
		uint64_t want = q->done + 1;
		*t0 = tool_now_ns();
		if (post_op(pf, 0, q->posted) || wait_count(pf, &q->done, want, "atomic response"))
			return -1;
		*t1 = pf->poll_time; /* on_wc checked the returned value */
		return 0;
	}
	}
}

/* Server of SEND / WRITE latency: answers each message until the client's DONE. Returns the
 * number of rounds, or -1. */
static int64_t lat_serve(struct perf *pf)
{
	struct qpctx *q = &pf->q[0];
	size_t size = (size_t)pf->cur_size;
	uint8_t *in = in_slot(pf, q, 0), *out = out_slot(pf, q, 0);
	volatile uint8_t *last = in + size - 1;
	for (uint64_t i = 0;; i++) {
		struct waiter w;
		waiter_init(&w, "message from the client");
		for (;;) {
			bool arrived;
			if (pf->p.verb == V_SEND) {
				int any;
				if (poll_once(pf, &any) < 0)
					return -1;
				arrived = q->rx_done > i;
			} else {
				arrived = *last == tag_of(i);
				if (!arrived && poll_once(pf, NULL) < 0)
					return -1;
			}
			if (arrived)
				break;
			int r = wait_tick(pf, &w);
			if (r < 0)
				return -1;
			if (r == 1)
				return (int64_t)i; /* the client's DONE */
		}
		if (pf->p.verb == V_SEND) {
			while (q->posted - q->done >= pf->sq_cap)
				if (wait_count(pf, &q->done, q->done + 1, "SEND completion"))
					return -1;
		} else {
			struct msgfmt theirs = {.seed = peer_seed(pf), .stamped = true, .iter = i};
			if (settle(pf, in, size, &theirs, i == 0, "RDMA WRITE", 0, i))
				return -1;
			uint64_t need =
			    size > pf->inline_max ? q->posted : q->posted + 1 - pf->sq_cap;
			if (q->posted >= pf->sq_cap || size > pf->inline_max)
				if (wait_count(pf, &q->done, need, "RDMA WRITE completion"))
					return -1;
			struct msgfmt mine = {.seed = my_seed(pf), .stamped = true, .iter = i};
			msg_stamp(out, size, &mine);
		}
		if (post_op(pf, 0, q->posted))
			return -1;
	}
}

static int read_done(struct perf *pf, uint64_t *count)
{
	if (chan_expect(pf, M_DONE))
		return -1;
	struct rbuf r = rmsg(pf);
	*count = r64(&r);
	r64(&r);
	r64(&r);
	uint32_t n = r32(&r);
	if (r.bad || n != pf->nq)
		return fail(pf, "protocol error: bad DONE from the %s", pf->peer);
	for (uint32_t i = 0; i < n; i++)
		pf->q[i].peer_count = r64(&r);
	pf->peer_cpu_ns = r64(&r);
	return r.bad ? fail(pf, "protocol error: short DONE from the %s", pf->peer) : 0;
}

static int send_done(struct perf *pf, uint64_t msgs, uint64_t elapsed, double best)
{
	struct wbuf w = {.len = 0};
	w64(&w, msgs);
	w64(&w, elapsed);
	w64(&w, dbits(best));
	w32(&w, pf->nq);
	for (uint32_t i = 0; i < pf->nq; i++)
		w64(&w, pf->q[i].done);
	w64(&w, pf->cpu_ns);
	return chan_send(pf, M_DONE, w.b, w.len);
}

/* The row both sides print: table line, JSON object, histogram text (may be empty). */
static void emit_row(struct perf *pf, const char *line, const char *json, const char *hist)
{
	say(pf, "%s\n", line);
	if (hist && *hist)
		say(pf, "%s", hist);
	if (pf->rows.len)
		sb_add(&pf->rows, ",\n    ");
	sb_add(&pf->rows, "%s", json);
}

static int send_row(struct perf *pf, const char *line, const char *json, const char *hist)
{
	struct wbuf w = {.len = 0};
	size_t a = strlen(line) + 1, b = strlen(json) + 1, c = strlen(hist) + 1;
	if (a + b + c > sizeof(w.b))
		c = 1, hist = "";
	wbytes(&w, line, a);
	wbytes(&w, json, b);
	wbytes(&w, hist, c);
	return chan_send(pf, M_ROW, w.b, w.len);
}

static int recv_row(struct perf *pf)
{
	if (chan_expect(pf, M_ROW))
		return -1;
	const char *p = (const char *)pf->chan.msg, *end = p + pf->chan.msg_len;
	const char *line = p, *json, *hist;
	json = memchr(line, 0, (size_t)(end - line));
	if (!json || ++json >= end)
		return fail(pf, "protocol error: bad ROW");
	hist = memchr(json, 0, (size_t)(end - json));
	if (!hist || ++hist >= end || !memchr(hist, 0, (size_t)(end - hist)))
		return fail(pf, "protocol error: bad ROW");
	emit_row(pf, line, json, hist);
	return 0;
}

static int lat_report(struct perf *pf, struct stats *st, uint64_t measured)
{
	struct stats_lat_report rep;
	char line[512], json[CHAN_MAX / 2], hist[CHAN_MAX / 4] = "";
	unsigned rtt = verbs[pf->p.verb].half_rtt ? 2 : 1;
	if (stats_finalize(st))
		return fail(pf, "no samples");
	double jitter = 0;
	stats_jitter(st, &jitter);
	if (pf->p.compat) {
		if (measured < 4)
			return fail(pf, "--perftest-compat needs 4 or more iterations (got %llu)",
				    (unsigned long long)measured);
		if (stats_perftest_lat_tstamps(pf->stamps, measured, 1000.0, rtt, pf->cur_size,
					       &rep))
			return fail(pf, "bad time stamps");
	} else if (stats_lat_report(st, pf->cur_size, measured, &rep)) {
		return fail(pf, "cannot compute the statistics");
	}
	int n = stats_format_lat_line(&rep, line, sizeof(line));
	if (n < 0)
		return fail(pf, "cannot format the report");
	if (!pf->p.compat)
		snprintf(line + n, sizeof(line) - (size_t)n, "\t\t%-7.2f", jitter / 1000.0);
	n = stats_format_lat_json(&rep, json, sizeof(json));
	if (n < 2)
		return fail(pf, "cannot format the JSON report");
	struct strbuf j = {0};
	sb_add(&j, "%.*s, \"jitter\": %.2f", n - 1, json, jitter / 1000.0);
	if (measured)
		sb_add(&j, ", \"cpu_client_us\": %.3f, \"cpu_server_us\": %.3f",
		       (double)pf->cpu_ns / 1e3 / (double)measured,
		       (double)pf->peer_cpu_ns / 1e3 / (double)measured);
	if (pf->o.cdf && !pf->p.compat) {
		/* The distribution for plots: [usec, fraction of samples <= usec] at every
		 * percent, then finer in the tail (99.1 .. 99.9, 99.99) and the maximum. */
		static const double tail[] = {99.2, 99.4, 99.6, 99.8, 99.9, 99.95, 99.99};
		double v;
		sb_add(&j, ", \"cdf\": [");
		for (int k = 0; k <= 99; k++) {
			stats_percentile(st, k, &v);
			sb_add(&j, "%s[%.3f, %.4f]", k ? ", " : "", v / 1000.0, k / 100.0);
		}
		for (size_t k = 0; k < sizeof(tail) / sizeof(tail[0]); k++) {
			stats_percentile(st, tail[k], &v);
			sb_add(&j, ", [%.3f, %.4f]", v / 1000.0, tail[k] / 100.0);
		}
		sb_add(&j, ", [%.3f, 1.0]]", stats_max(st) / 1000.0);
	}
	if (pf->o.histogram) {
		struct stats_hist h;
		stats_hist_build(st, &h);
		stats_hist_format(&h, hist, sizeof(hist));
		sb_add(&j, ", \"histogram\": [");
		bool first = true;
		for (unsigned k = 0; k < STATS_HIST_BUCKETS; k++) {
			if (!h.count[k])
				continue;
			double lo, hi;
			stats_hist_bounds(k, &lo, &hi);
			if (k == STATS_HIST_BUCKETS - 1)
				sb_add(&j, "%s{\"lo_ns\": %.0f, \"hi_ns\": null, \"count\": %llu}",
				       first ? "" : ", ", lo, (unsigned long long)h.count[k]);
			else
				sb_add(&j, "%s{\"lo_ns\": %.0f, \"hi_ns\": %.0f, \"count\": %llu}",
				       first ? "" : ", ", lo, hi, (unsigned long long)h.count[k]);
			first = false;
		}
		sb_add(&j, "]");
	}
	sb_add(&j, "}");
	if (j.oom || !j.p) {
		free(j.p);
		return fail(pf, "out of memory");
	}
	if (strlen(j.p) >= sizeof(json)) {
		free(j.p);
		return fail(pf, "JSON row too long");
	}
	strcpy(json, j.p);
	free(j.p);
	emit_row(pf, line, json, hist);
	return send_row(pf, line, json, hist);
}

static int lat_size(struct perf *pf, uint64_t size, size_t index)
{
	if (size_barrier(pf, size, index))
		return -1;
	struct qpctx *q = &pf->q[0];
	bool active_server = pf->p.verb == V_SEND || pf->p.verb == V_WRITE;
	if (!pf->client) {
		uint64_t rounds = 0, count;
		cpu_begin(pf);
		if (active_server) {
			int64_t r = lat_serve(pf);
			if (r < 0)
				return -1;
			rounds = (uint64_t)r;
			/* Our last reply's completion, before the next size starts counting. */
			if (wait_count(pf, &q->done, q->posted, "completion"))
				return -1;
		}
		if (read_done(pf, &count))
			return -1;
		cpu_end(pf); /* a passive server's library work (READ, atomics) until the DONE */
		if (active_server && rounds != count)
			return fail(pf, "the client counted %llu round trips, the server %llu",
				    (unsigned long long)count, (unsigned long long)rounds);
		if (pf->p.verb == V_SEND && count) {
			struct msgfmt f = {.seed = peer_seed(pf)};
			uint8_t *m = in_slot(pf, q, (uint64_t)q->held);
			int64_t bad = msg_diff(m, (size_t)size, &f, true);
			if (bad >= 0)
				return data_fail(pf, "SEND", 0, count - 1, (size_t)bad, m[bad],
						 msg_byte(&f, (size_t)size, (size_t)bad));
		} else if (pf->p.verb == V_WRITE && count) {
			struct msgfmt f = {
			    .seed = peer_seed(pf), .stamped = true, .iter = count - 1};
			if (settle(pf, in_slot(pf, q, 0), (size_t)size, &f, true, "RDMA WRITE", 0,
				   count - 1))
				return -1;
		} else if (pf->p.verb == V_ATOMIC) {
			uint64_t v;
			memcpy(&v, in_slot(pf, q, 0), 8);
			if (v != atomic_base(0) + count)
				return fail(pf,
					    "the atomic counter is 0x%llx after %llu atomics, "
					    "expected 0x%llx",
					    (unsigned long long)v, (unsigned long long)count,
					    (unsigned long long)(atomic_base(0) + count));
		}
		if (send_done(pf, 0, 0, 0))
			return -1;
		return recv_row(pf);
	}

	struct stats st;
	stats_init(&st, pf->samples, pf->samples_cap);
	double div = verbs[pf->p.verb].half_rtt ? 2.0 : 1.0;
	uint64_t deadline = 0, i;
	pf->next_hb = tool_now_ns() + HEARTBEAT_NS;
	for (i = 0;; i++) {
		uint64_t t0, t1;
		if (i == 1)
			cpu_begin(pf);
		if (i == 1 && pf->p.duration_us)
			deadline = tool_now_ns() + pf->p.duration_us * 1000;
		if (i > 0 && (deadline ? tool_now_ns() >= deadline : i > pf->p.iters))
			break;
		if (lat_round_client(pf, i, &t0, &t1) || tick(pf, NULL, t1) < 0)
			return -1;
		if (i == 0)
			continue; /* the unmeasured check round */
		if (st.n == st.cap && grow_samples(pf, &st))
			return -1;
		pf->stamps[st.n] = t0;
		stats_add(&st, (double)(t1 - t0) / div);
	}
	uint64_t count = i, measured = count - 1;
	cpu_end(pf);
	/* The last message in full. */
	if (pf->p.verb == V_SEND) {
		struct msgfmt f = {.seed = peer_seed(pf)};
		uint8_t *m = in_slot(pf, q, (uint64_t)q->held);
		int64_t bad = msg_diff(m, (size_t)size, &f, true);
		if (bad >= 0)
			return data_fail(pf, "SEND", 0, count - 1, (size_t)bad, m[bad],
					 msg_byte(&f, (size_t)size, (size_t)bad));
	} else if (pf->p.verb == V_WRITE) {
		struct msgfmt f = {.seed = peer_seed(pf), .stamped = true, .iter = count - 1};
		if (settle(pf, in_slot(pf, q, 0), (size_t)size, &f, true, "RDMA WRITE", 0,
			   count - 1))
			return -1;
	} else if (pf->p.verb == V_READ) {
		struct msgfmt f = {.seed = peer_seed(pf)};
		uint8_t *m = out_slot(pf, q, 0);
		int64_t bad = msg_diff(m, (size_t)size, &f, true);
		if (bad >= 0)
			return data_fail(pf, "RDMA READ", 0, count - 1, (size_t)bad, m[bad],
					 msg_byte(&f, (size_t)size, (size_t)bad));
	}
	/* Reap our last completions (the QP stays in use for the next size). */
	if (wait_count(pf, &q->done, q->posted, "completion"))
		return -1;
	struct wbuf w = {.len = 0};
	w64(&w, count);
	w64(&w, 0);
	w64(&w, 0);
	w32(&w, 1);
	w64(&w, q->done);
	w64(&w, pf->cpu_ns);
	uint64_t peer_count;
	if (chan_send(pf, M_DONE, w.b, w.len) || read_done(pf, &peer_count))
		return -1;
	return lat_report(pf, &st, measured);
}

/* ---- bandwidth ---- */

struct bw_fig {
	uint64_t msgs;
	uint64_t elapsed_ns;
	double best_ns; /* shortest per-message time over windows of the run */
};

static bool all_issued(const struct perf *pf, uint64_t target, bool stop_posting)
{
	for (uint32_t i = 0; i < pf->nq; i++) {
		const struct qpctx *q = &pf->q[i];
		if (q->done != q->posted ||
		    (q->posted < target && !(stop_posting && q->posted >= 2)))
			return false;
	}
	return true;
}

static bool all_received(const struct perf *pf)
{
	for (uint32_t i = 0; i < pf->nq; i++)
		if (pf->q[i].rx_done < pf->q[i].peer_count)
			return false;
	return true;
}

static int take_done(struct perf *pf, struct bw_fig *peer)
{
	uint64_t count;
	if (read_done(pf, &count))
		return -1;
	struct rbuf r = rmsg(pf);
	peer->msgs = r64(&r);
	peer->elapsed_ns = r64(&r);
	peer->best_ns = bitsd(r64(&r));
	(void)count;
	return 0;
}

/* Verifies, after the run, what the peer wrote into or lent to this side. */
static int bw_verify(struct perf *pf, bool issuing, bool peer_issuing)
{
	struct layout l = layout_of(pf, pf->cur_size);
	size_t size = (size_t)pf->cur_size;
	struct msgfmt f = {.seed = peer_seed(pf)};
	for (uint32_t qi = 0; qi < pf->nq; qi++) {
		struct qpctx *q = &pf->q[qi];
		if (pf->p.verb == V_WRITE && peer_issuing) {
			uint64_t used = q->peer_count < l.in_slots ? q->peer_count : l.in_slots;
			/* On iWARP a WRITE completes once handed to TCP: the peer's DONE can
			 * overtake the data, so wait for it (bounded). */
			for (uint64_t s = 0; s < used; s++)
				if (settle(pf, in_slot(pf, q, s), size, &f, true, "RDMA WRITE", qi,
					   s))
					return -1;
		} else if (pf->p.verb == V_READ && issuing) {
			uint64_t used = q->done < l.out_slots ? q->done : l.out_slots;
			for (uint64_t s = 0; s < used; s++) {
				uint8_t *m = out_slot(pf, q, s);
				int64_t bad = msg_diff(m, size, &f, true);
				if (bad >= 0)
					return data_fail(pf, "RDMA READ", qi, s, (size_t)bad,
							 m[bad], msg_byte(&f, size, (size_t)bad));
			}
		} else if (pf->p.verb == V_ATOMIC && peer_issuing) {
			uint64_t v, want = atomic_base(qi) + q->peer_count;
			memcpy(&v, in_slot(pf, q, 0), 8);
			if (v != want)
				return fail(
				    pf,
				    "QP %u: the atomic counter is 0x%llx after %llu atomics, "
				    "expected 0x%llx",
				    qi, (unsigned long long)v, (unsigned long long)q->peer_count,
				    (unsigned long long)want);
		}
	}
	return 0;
}

/* SEND: receives still posted after the run are consumed by zero-byte SENDs from their peer,
 * so the next size starts with none (they have the old size's slots). */
static int bw_flush(struct perf *pf, bool sending, bool receiving)
{
	struct wbuf w = {.len = 0};
	w32(&w, pf->nq);
	for (uint32_t i = 0; i < pf->nq; i++) {
		struct qpctx *q = &pf->q[i];
		q->own_stale = receiving ? q->rx_posted - q->rx_done : 0;
		w64(&w, q->own_stale);
	}
	if (chan_send(pf, M_STALE, w.b, w.len) || chan_expect(pf, M_STALE))
		return -1;
	struct rbuf r = rmsg(pf);
	if (r32(&r) != pf->nq)
		return fail(pf, "protocol error: bad STALE from the %s", pf->peer);
	for (uint32_t i = 0; i < pf->nq; i++)
		pf->q[i].peer_stale = r64(&r);
	if (r.bad)
		return fail(pf, "protocol error: short STALE from the %s", pf->peer);
	if (pf->p.verb != V_SEND)
		return 0;
	for (uint32_t i = 0; i < pf->nq; i++) {
		struct qpctx *q = &pf->q[i];
		if (q->peer_stale && !sending)
			return fail(pf,
				    "protocol error: stale receives at a side that sends nothing");
		while (q->flush_posted < q->peer_stale) {
			while (q->flush_posted - q->flush_done >= pf->sq_cap)
				if (wait_count(pf, &q->flush_done, q->flush_done + 1,
					       "zero-byte SEND completion"))
					return -1;
			if (post_flush(pf, i))
				return -1;
		}
		if (wait_count(pf, &q->flush_done, q->flush_posted, "zero-byte SEND completion") ||
		    wait_count(pf, &q->rx_zero, q->own_stale, "zero-byte SEND"))
			return -1;
	}
	return 0;
}

static int bw_report(struct perf *pf, const struct bw_fig *me, const struct bw_fig *peer)
{
	struct stats_bw_report r, rp;
	if (stats_bw_report(pf->cur_size, me->msgs, (double)me->elapsed_ns, me->best_ns,
			    pf->o.gbits, &r))
		return fail(pf, "cannot compute the bandwidth (elapsed %llu ns)",
			    (unsigned long long)me->elapsed_ns);
	if (pf->p.bidir) { /* perftest -b: both directions added up */
		if (stats_bw_report(pf->cur_size, peer->msgs, (double)peer->elapsed_ns,
				    peer->best_ns, pf->o.gbits, &rp))
			return fail(pf, "bad figures from the server");
		r.bw_avg += rp.bw_avg;
		r.bw_peak += rp.bw_peak;
		r.msg_rate += rp.msg_rate;
	}
	/* #iterations as perftest prints it: -n per QP, or the messages counted with -D. */
	r.iters = pf->p.duration_us ? me->msgs + (pf->p.bidir ? peer->msgs : 0) : pf->p.iters;
	char line[256], json[512];
	int n = stats_format_bw_json(&r, json, sizeof(json));
	if (stats_format_bw_line(&r, line, sizeof(line)) < 0 || n < 2)
		return fail(pf, "cannot format the report");
	/* CPU per message: each side's CPU time over its part of the run, divided by all the
	 * messages of the run (both directions with -b). */
	uint64_t msgs = me->msgs + (pf->p.bidir ? peer->msgs : 0);
	if (msgs && snprintf(json + n - 1, sizeof(json) - (size_t)n + 1,
			     ", \"cpu_client_us\": %.3f, \"cpu_server_us\": %.3f}",
			     (double)pf->cpu_ns / 1e3 / (double)msgs,
			     (double)pf->peer_cpu_ns / 1e3 / (double)msgs) >=
			(int)(sizeof(json) - (size_t)n + 1))
		return fail(pf, "JSON row too long");
	emit_row(pf, line, json, "");
	return send_row(pf, line, json, "");
}

static int bw_size(struct perf *pf, uint64_t size, size_t index)
{
	if (size_barrier(pf, size, index))
		return -1;
	bool issuing = pf->client || pf->p.bidir;
	bool peer_issuing = !pf->client || pf->p.bidir;
	bool receiving = pf->p.verb == V_SEND && peer_issuing;
	uint64_t target = pf->p.duration_us ? WR_SEQ_MASK : pf->p.iters + 1;
	struct bw_fig me = {0}, peer = {0};
	bool issue_done = !issuing, peer_done = false;
	struct waiter w;
	waiter_init(&w, issuing ? "completion" : "message");
	pf->next_hb = tool_now_ns() + HEARTBEAT_NS;
	pf->next_chan = tool_now_ns() + CHAN_CHECK_NS;

	if (issuing) { /* the unmeasured check round: one message per QP, verified */
		for (uint32_t qi = 0; qi < pf->nq; qi++)
			if (post_op(pf, qi, 0))
				return -1;
		for (uint32_t qi = 0; qi < pf->nq; qi++) {
			struct qpctx *q = &pf->q[qi];
			if (wait_count(pf, &q->done, 1, "completion"))
				return -1;
			if (pf->p.verb == V_READ) {
				struct msgfmt f = {.seed = peer_seed(pf)};
				uint8_t *m = out_slot(pf, q, 0);
				int64_t bad = msg_diff(m, (size_t)size, &f, true);
				if (bad >= 0)
					return data_fail(pf, "RDMA READ", qi, 0, (size_t)bad,
							 m[bad],
							 msg_byte(&f, (size_t)size, (size_t)bad));
			}
		}
	}
	cpu_begin(pf);
	if (!issuing && !receiving) { /* a passive target: the library serves the peer */
		if (take_done(pf, &peer))
			return -1;
		peer_done = true;
	}
	uint64_t t_start = tool_now_ns(), deadline = 0, t_last = t_start;
	if (pf->p.duration_us)
		deadline = t_start + pf->p.duration_us * 1000;
	uint64_t win_start = t_start, win_msgs = 0;
	uint64_t win_min = (uint64_t)pf->nq * pf->p.tx_depth;
	if (win_min < 16)
		win_min = 16;
	double best = 0;
	/* Like perftest, keep polling until the peer is done too: an iWARP side that stops
	 * calling the library while the peer still READs from it can leave responses unsent
	 * (softrdma issue: see the report of `softrdma bw -b --verb read` on iwarp_lo). */
	while (!(issue_done && peer_done && (!receiving || all_received(pf)))) {
		uint64_t t = tool_now_ns();
		bool stop_posting = deadline && t >= deadline, starved = false;
		int r = tick(pf, &w, t);
		if (r < 0)
			return -1;
		if (r == 1 && !peer_done) {
			if (take_done(pf, &peer))
				return -1;
			peer_done = true;
		}
		for (uint32_t qi = 0; qi < pf->nq && !issue_done; qi++) {
			struct qpctx *q = &pf->q[qi];
			/* With -D, at least one measured message per QP. */
			while (q->posted < target && q->posted - q->done < pf->p.tx_depth &&
			       (!stop_posting || q->posted < 2)) {
				if (pf->credits && q->posted >= q->peer_rx_posted) {
					starved = true;
					break;
				}
				if (post_op(pf, qi, q->posted))
					return -1;
			}
		}
		if (starved && chan_service(pf) < 0) /* read the credits now */
			return -1;
		int any, n = poll_once(pf, &any);
		if (n < 0)
			return -1;
		if (any)
			w.last_progress = pf->poll_time;
		if (n > 0) {
			t_last = pf->poll_time;
			win_msgs += (uint64_t)n;
			if (win_msgs >= win_min && t_last - win_start >= 1000000) {
				double per = (double)(t_last - win_start) / (double)win_msgs;
				if (best == 0 || per < best)
					best = per;
				win_start = t_last;
				win_msgs = 0;
			}
		}
		if (!issue_done && all_issued(pf, target, stop_posting)) {
			issue_done = true;
			for (uint32_t qi = 0; qi < pf->nq; qi++)
				me.msgs += pf->q[qi].done - 1;
			me.elapsed_ns = t_last - t_start;
			if (me.elapsed_ns == 0)
				me.elapsed_ns = 1;
			double whole = (double)me.elapsed_ns / (double)me.msgs;
			me.best_ns = best == 0 || whole < best ? whole : best;
			cpu_end(pf);
			if (send_done(pf, me.msgs, me.elapsed_ns, me.best_ns))
				return -1;
		}
	}
	if (!issuing) {
		cpu_end(pf);
		if (send_done(pf, 0, 0, 0))
			return -1;
	}
	if (!peer_done) {
		if (take_done(pf, &peer))
			return -1;
	}
	if (bw_verify(pf, issuing, peer_issuing) || bw_flush(pf, issuing, receiving))
		return -1;
	if (!pf->client)
		return recv_row(pf);
	return bw_report(pf, &me, &peer);
}

/* ---- the run ---- */

static void banner(struct perf *pf)
{
	const char *dashes = "---------------------------------------------------------------"
			     "------------------------";
	const struct params *p = &pf->p;
	char title[96];
	if (p->verb == V_ATOMIC)
		snprintf(title, sizeof(title), "Atomic %s %s Test",
			 p->cas ? "CMP_AND_SWAP" : "FETCH_AND_ADD",
			 pf->test == T_LAT ? "Latency" : "BW");
	else
		snprintf(title, sizeof(title), "%s %s%s Test", verbs[p->verb].title,
			 p->bidir ? "Bidirectional " : "", pf->test == T_LAT ? "Latency" : "BW");
	char gid[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, pf->gid.raw, gid, sizeof(gid));
	say(pf, "%s\n                    %s (softrdma)\n", dashes, title);
	say(pf, " Device          : %-14s Transport type : %s\n", pf->dev_name,
	    pf->iwarp ? "IW (iWARP)" : "IB (RoCE)");
	say(pf, " Number of qps   : %-14u Connection type : RC\n", pf->nq);
	say(pf, " TX depth        : %-14u Mtu            : %d[B]\n",
	    pf->test == T_LAT ? 1 : p->tx_depth, 128 << pf->pattr.active_mtu);
	if (pf->test == T_BW && p->verb == V_SEND)
		say(pf, " RX depth        : %u\n", p->rx_depth);
	if (p->verb == V_READ || p->verb == V_ATOMIC)
		say(pf, " Outstand reads  : %u\n", pf->ord);
	say(pf, " Max inline data : %u[B]\n", pf->inline_max);
	say(pf, " GID index       : %d (%s)\n", pf->gid_index, gid);
	say(pf, " Data ex. method : Ethernet (TCP port %d)   Role : %s\n", pf->o.port, pf->role);
	if (p->duration_us)
		say(pf, " Duration        : %.3f s per size\n", (double)p->duration_us / 1e6);
	if (pf->test == T_LAT) {
		if (p->compat)
			say(pf, " Statistics      : perftest-compatible (time between posts; 2 "
				"largest dropped; stdev of whole usec)\n");
		else
			say(pf, " Statistics      : every sample; t_typical = median; stdev "
				"n-1; jitter = p99 - p50\n");
		say(pf, " Latency         : %s\n",
		    verbs[p->verb].half_rtt ? "half the round trip (as perftest)"
					    : "the round trip");
	}
	say(pf, "%s\n", dashes);
}

static void table_header(struct perf *pf)
{
	char h[512];
	const char *dashes = "---------------------------------------------------------------"
			     "------------------------";
	say(pf, "%s\n", dashes);
	if (pf->test == T_LAT) {
		int n = stats_format_lat_header(h, sizeof(h));
		if (n > 0 && !pf->p.compat)
			snprintf(h + n, sizeof(h) - (size_t)n, "  jitter[usec]");
	} else {
		stats_format_bw_header(pf->o.gbits, h, sizeof(h));
	}
	say(pf, "%s\n", h);
}

static int run(struct perf *pf)
{
	if (open_device(pf))
		return -1;
	if (pf->client && need_atomics(pf))
		return -1;
	if (pf->client ? chan_connect(pf) : chan_listen(pf))
		return -1;
	struct wbuf w = {.len = 0};
	if (pf->client) {
		hello_write(pf, &w);
		if (chan_send(pf, M_HELLO, w.b, w.len) || chan_expect(pf, M_HELLO_OK))
			return -1;
	} else {
		if (chan_expect(pf, M_HELLO) || hello_read(pf) || need_atomics(pf))
			return -1;
		if (chan_send(pf, M_HELLO_OK, NULL, 0))
			return -1;
	}
	if (make_sizes(pf) || create_resources(pf))
		return -1;
	pf->credits = pf->iwarp && pf->test == T_BW && pf->p.verb == V_SEND;
	banner(pf);
	w.len = 0;
	qpinfo_write(pf, &w);
	if (chan_send(pf, M_QPINFO, w.b, w.len) || chan_expect(pf, M_QPINFO) || connect_qps(pf))
		return -1;
	table_header(pf);
	uint64_t t_all = tool_now_ns();
	for (size_t i = 0; i < pf->nsizes; i++) {
		uint64_t t0 = tool_now_ns();
		int r = pf->test == T_LAT ? lat_size(pf, pf->sizes[i], i)
					  : bw_size(pf, pf->sizes[i], i);
		if (r)
			return -1;
		if (pf->nsizes > 1)
			fprintf(stderr, "softrdma %s: [%zu/%zu] %llu bytes done in %.2f s\n",
				pf->cmd, i + 1, pf->nsizes, (unsigned long long)pf->sizes[i],
				(double)(tool_now_ns() - t0) / 1e9);
	}
	if (pf->client) {
		if (chan_send(pf, M_BYE, NULL, 0))
			return -1;
	} else if (chan_expect(pf, M_BYE)) {
		return -1;
	}
	say(pf, "---------------------------------------------------------------"
		"------------------------\n");
	if (pf->nsizes > 1)
		fprintf(stderr, "softrdma %s: %zu sizes in %.2f s\n", pf->cmd, pf->nsizes,
			(double)(tool_now_ns() - t_all) / 1e9);
	return 0;
}

static void write_json(struct perf *pf, bool ok)
{
	if (!pf->json)
		return;
	struct strbuf s = {0};
	sb_add(&s,
	       "{\n  \"tool\": \"softrdma\",\n  \"test\": \"%s\",\n  \"verb\": ", tests[pf->test]);
	sb_json_str(&s, verbs[pf->p.verb < V_COUNT ? pf->p.verb : 0].name);
	sb_add(&s, ",\n  \"role\": \"%s\",\n  \"device\": ", pf->role);
	sb_json_str(&s, pf->dev_name ? pf->dev_name : "");
	sb_add(&s, ",\n  \"transport\": \"%s\",\n  \"gid_index\": %d,\n  \"qps\": %u,\n",
	       pf->iwarp ? "iWARP" : "RoCE", pf->gid_index, pf->p.qps);
	sb_add(&s, "  \"tx_depth\": %u,\n  \"bidirectional\": %s,\n", pf->p.tx_depth,
	       pf->p.bidir ? "true" : "false");
	if (pf->test == T_LAT)
		sb_add(&s,
		       "  \"statistics\": \"%s\",\n  \"latency\": \"%s\",\n  \"unit\": \"usec\",\n",
		       pf->p.compat ? "perftest" : "native",
		       verbs[pf->p.verb < V_COUNT ? pf->p.verb : 0].half_rtt ? "half round trip"
									     : "round trip");
	if (pf->p.verb == V_ATOMIC)
		sb_add(&s, "  \"atomic_type\": \"%s\",\n",
		       pf->p.cas ? "CMP_AND_SWAP" : "FETCH_AND_ADD");
	sb_add(&s, "  \"results\": [\n    %s\n  ]", pf->rows.len ? pf->rows.p : "");
	if (!ok) {
		sb_add(&s, ",\n  \"error\": ");
		sb_json_str(&s, pf->error[0] ? pf->error : "interrupted");
	}
	sb_add(&s, "\n}\n");
	if (s.p)
		fputs(s.p, pf->json);
	fflush(pf->json);
	free(s.p);
}

static void cleanup(struct perf *pf)
{
	for (uint32_t i = 0; pf->q && i < pf->nq; i++) {
		struct qpctx *q = &pf->q[i];
		if (q->qp)
			ibv_destroy_qp(q->qp);
		if (q->mr)
			ibv_dereg_mr(q->mr);
		free(q->buf);
	}
	free(pf->q);
	if (pf->cq)
		ibv_destroy_cq(pf->cq);
	if (pf->pd)
		ibv_dealloc_pd(pf->pd);
	if (pf->ctx)
		ibv_close_device(pf->ctx);
	if (pf->list)
		ibv_free_device_list(pf->list);
	if (pf->chan.fd >= 0)
		close(pf->chan.fd);
	if (pf->json && pf->json != stdout)
		fclose(pf->json);
	free(pf->sizes);
	free(pf->samples);
	free(pf->stamps);
	free(pf->rows.p);
}

/* ---- command line ---- */

static void usage(enum test t, FILE *f)
{
	const char *c = tests[t];
	fprintf(f,
		"usage: softrdma %s [options]           act as the server (waits for one client)\n"
		"       softrdma %s [options] SERVER    act as the client\n\n",
		c, c);
	if (t == T_LAT)
		fputs("Latency of RC SEND, RDMA WRITE, RDMA READ or atomics between two processes, "
		      "as\nib_send_lat, ib_write_lat, ib_read_lat and ib_atomic_lat measure it, "
		      "with perftest's\ntable. WRITE: the target spins on the last byte, as "
		      "ib_write_lat (on softrdma a\nprogress thread places the data). READ and "
		      "atomics: the client issues, the server\nonly lends its memory.\n\n",
		      f);
	else
		fputs(
		    "Bandwidth of RC SEND, RDMA WRITE, RDMA READ or atomics between two processes, "
		    "as\nib_send_bw, ib_write_bw, ib_read_bw and ib_atomic_bw measure it, with "
		    "perftest's\ntable. The client issues (both sides with -b).\n\n",
		    f);
	fputs("The client chooses the test and the server follows: a test option given to the\n"
	      "server too must agree.\n\n"
	      "  -V, --verb VERB          send (default), write, read or atomic\n"
	      "  -A, --atomic_type T      FETCH_AND_ADD (default) or CMP_AND_SWAP (--verb atomic)\n"
	      "  -d, --ib-dev DEV         device (default: roce_lo if present, else the first)\n"
	      "  -x, --gid-index N        GID index (default: the first IPv4-mapped GID)\n"
	      "  -p, --port PORT          TCP port of the side-band exchange (default 18515)\n",
	      f);
	if (t == T_LAT)
		fputs("  -s, --size BYTES         message size: 64, 4K, 1MiB... (default 2; "
		      "atomics 8)\n"
		      "  -a, --all                every size from 2 B to 8 MiB (powers of two)\n"
		      "  -n, --iters N            measured round trips per size: 1000, 10k... "
		      "(default 1000)\n",
		      f);
	else
		fputs("  -s, --size BYTES         message size: 64, 4K, 1MiB... (default 65536; "
		      "atomics 8)\n"
		      "  -a, --all                every size from 2 B to 8 MiB (powers of two)\n"
		      "  -n, --iters N            messages per QP and size: 5000, 10k... (default "
		      "5000)\n",
		      f);
	fputs("  -D, --duration SECONDS   run each size this long instead of -n: 5, 0.5, 500ms\n",
	      f);
	if (t == T_BW)
		fputs(
		    "  -q, --qp N               QPs (default 1), each with -t messages in flight\n"
		    "  -t, --tx-depth N         messages in flight per QP (default 128)\n"
		    "  -r, --rx-depth N         receives posted per QP for SEND (default 512)\n"
		    "  -b, --bidirectional      both sides issue; the figures are the sum\n"
		    "      --report_gbits       bandwidth in Gb/sec instead of MiB/sec\n",
		    f);
	else
		fputs("  -t, --tx-depth N         accepted for perftest's sake: one message is in "
		      "flight\n"
		      "      --perftest-compat    perftest's sample handling: the time between "
		      "posts, "
		      "the 2\n"
		      "                           largest dropped, stdev over whole microseconds\n"
		      "      --histogram          a log2 histogram of the samples after each row\n"
		      "      --cdf                the JSON rows get the latency distribution "
		      "(\"cdf\":\n"
		      "                           [usec, fraction] at every percentile and in the "
		      "tail)\n",
		      f);
	fprintf(f,
		"  -I, --inline_size BYTES  largest SEND/WRITE posted inline (default %d)\n"
		"      --json FILE|-        the results as JSON, to FILE or to stdout ('-': the "
		"table\n"
		"                           then goes to stderr)\n"
		"      --timeout SECONDS    limit for the side-band connect/accept and for "
		"silence\n"
		"                           from the peer during the test (default 10; 0: none)\n"
		"  -h, --help               this text\n\n",
		t == T_LAT ? INLINE_LAT : 0);
	if (t == T_LAT)
		fputs("Statistics (native, the default): every sample counts; t_typical is the "
		      "median,\nt_stdev the sample standard deviation (not truncated), 99%/99.9% "
		      "nearest-rank\npercentiles; an extra column gives the jitter, p99 - p50. "
		      "SEND and WRITE report\nhalf the round trip (as perftest), READ and atomics "
		      "the round trip.\n\n",
		      f);
	fputs("Checks: each size starts with an unmeasured round verified byte for byte; the "
	      "first\nand last bytes of every received message are checked, and the last "
	      "messages in full\n(atomics: every returned value and the final counters); any "
	      "error stops the run.\n\n"
	      "Connection: the QPs are connected with ibv_modify_qp from the GIDs, QPNs and "
	      "PSNs\nexchanged over TCP (perftest without -R). This works on softrdma's RoCE "
	      "devices and,\nthanks to softrdma's auto-connect, on its iWARP devices; real "
	      "iWARP hardware needs\nrdma_cm, which these tools do not use yet. iWARP has no "
	      "atomics.\n\n"
	      "Exit status: 0 success, 1 error, 2 bad usage, 130/143 stopped by SIGINT/SIGTERM.\n",
	      f);
}

enum { O_GBITS = 256, O_JSON, O_HIST, O_TIMEOUT, O_COMPAT, O_CDF };

/* 0: run; 1: help shown (exit 0); 2: usage error (shown). */
static int parse_args(struct perf *pf, int argc, char **argv)
{
	static const struct option opts[] = {{"ib-dev", required_argument, NULL, 'd'},
					     {"gid-index", required_argument, NULL, 'x'},
					     {"port", required_argument, NULL, 'p'},
					     {"size", required_argument, NULL, 's'},
					     {"all", no_argument, NULL, 'a'},
					     {"iters", required_argument, NULL, 'n'},
					     {"duration", required_argument, NULL, 'D'},
					     {"qp", required_argument, NULL, 'q'},
					     {"tx-depth", required_argument, NULL, 't'},
					     {"rx-depth", required_argument, NULL, 'r'},
					     {"bidirectional", no_argument, NULL, 'b'},
					     {"verb", required_argument, NULL, 'V'},
					     {"atomic_type", required_argument, NULL, 'A'},
					     {"inline_size", required_argument, NULL, 'I'},
					     {"report_gbits", no_argument, NULL, O_GBITS},
					     {"json", required_argument, NULL, O_JSON},
					     {"histogram", no_argument, NULL, O_HIST},
					     {"cdf", no_argument, NULL, O_CDF},
					     {"timeout", required_argument, NULL, O_TIMEOUT},
					     {"perftest-compat", no_argument, NULL, O_COMPAT},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct opts *o = &pf->o;
	struct params *p = &o->p;
	const char *cmd = tests[o->test];
	p->verb = V_SEND;
	p->iters = o->test == T_LAT ? 1000 : 5000;
	p->qps = 1;
	p->tx_depth = o->test == T_LAT ? 1 : 128;
	p->rx_depth = o->test == T_LAT ? LAT_RX_SLOTS : 512;
	o->gid_index = -1;
	o->port = DEFAULT_PORT;
	o->inline_size = -1;
	o->timeout_s = DEFAULT_TIMEOUT;
	opterr = 0;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, ":d:x:p:s:an:D:q:t:r:bV:A:I:h", opts, NULL)) != -1) {
		uint64_t v;
		double d;
		const char *arg = optarg;
		switch (c) {
		case 'd':
			o->dev_name = arg;
			break;
		case 'x':
			if (parse_count(arg, &v) || v > 255)
				goto bad_value;
			o->gid_index = (int)v;
			break;
		case 'p':
			if (parse_count(arg, &v) || v < 1 || v > 65535)
				goto bad_value;
			o->port = (int)v;
			break;
		case 's':
			if (parse_bytes(arg, &v) || v < 1 || v > MAX_SIZE)
				goto bad_value;
			p->size = v;
			o->set |= SET_SIZE;
			break;
		case 'a':
			p->all = true;
			o->set |= SET_ALL;
			break;
		case 'n':
			if (parse_count(arg, &v) || v < 1)
				goto bad_value;
			p->iters = v;
			o->set |= SET_ITERS;
			break;
		case 'D':
			if (parse_seconds(arg, &d) || d <= 0)
				goto bad_value;
			p->duration_us = (uint64_t)(d * 1e6);
			if (!p->duration_us)
				p->duration_us = 1;
			o->set |= SET_DURATION;
			break;
		case 'q':
			if (parse_count(arg, &v) || v < 1 || v > MAX_QPS)
				goto bad_value;
			p->qps = (uint32_t)v;
			o->set |= SET_QPS;
			break;
		case 't':
			if (parse_count(arg, &v) || v < 1 || v > MAX_DEPTH)
				goto bad_value;
			p->tx_depth = (uint32_t)v;
			o->set |= SET_TX;
			break;
		case 'r':
			if (parse_count(arg, &v) || v < 1 || v > MAX_DEPTH)
				goto bad_value;
			p->rx_depth = (uint32_t)v;
			o->set |= SET_RX;
			break;
		case 'b':
			p->bidir = true;
			o->set |= SET_BIDIR;
			break;
		case 'V': {
			uint32_t i;
			for (i = 0; i < V_COUNT; i++)
				if (!strcasecmp(arg, verbs[i].name))
					break;
			if (i == V_COUNT)
				goto bad_value;
			p->verb = i;
			o->set |= SET_VERB;
			break;
		}
		case 'A':
			if (!strcasecmp(arg, "CMP_AND_SWAP"))
				p->cas = true;
			else if (!strcasecmp(arg, "FETCH_AND_ADD"))
				p->cas = false;
			else
				goto bad_value;
			o->set |= SET_CAS;
			break;
		case 'I':
			if (parse_bytes(arg, &v) || v > 4096)
				goto bad_value;
			o->inline_size = (long)v;
			break;
		case O_GBITS:
			o->gbits = true;
			break;
		case O_JSON:
			o->json = arg;
			break;
		case O_HIST:
			o->histogram = true;
			break;
		case O_CDF:
			o->cdf = true;
			break;
		case O_TIMEOUT:
			if (parse_seconds(arg, &d))
				goto bad_value;
			o->timeout_s = d;
			break;
		case O_COMPAT:
			p->compat = true;
			o->set |= SET_COMPAT;
			break;
		case 'h':
			usage(o->test, stdout);
			return 1;
		case ':':
			fprintf(stderr, "softrdma %s: option '%s' needs a value\n", cmd,
				argv[optind - 1]);
			goto usage_hint;
		default:
			if (optopt)
				fprintf(stderr, "softrdma %s: unknown option '-%c'\n", cmd, optopt);
			else
				fprintf(stderr, "softrdma %s: unknown option '%s'\n", cmd,
					argv[optind - 1]);
			goto usage_hint;
		}
		continue;
	bad_value : {
		const char *name = argv[optind - 1] == arg ? argv[optind - 2] : argv[optind - 1];
		const char *eq = strchr(name, '=');
		int len = eq && name[1] == '-' ? (int)(eq - name) : (int)strlen(name);
		fprintf(stderr, "softrdma %s: bad value '%s' for option '%.*s'\n", cmd, arg, len,
			name);
	}
		goto usage_hint;
	}
	if (argc - optind > 1) {
		fprintf(stderr, "softrdma %s: one server address at most (got '%s' and '%s')\n",
			cmd, argv[optind], argv[optind + 1]);
		goto usage_hint;
	}
	o->server = optind < argc ? argv[optind] : NULL;
	if (o->test == T_BW && (o->histogram || p->compat || o->cdf)) {
		fprintf(stderr,
			"softrdma bw: --histogram, --cdf and --perftest-compat are latency options "
			"(softrdma lat)\n");
		goto usage_hint;
	}
	if (o->test == T_LAT && (p->bidir || (o->set & (SET_QPS | SET_RX)) || o->gbits)) {
		fprintf(stderr, "softrdma lat: -b, -q, -r and --report_gbits are bandwidth options "
				"(softrdma bw)\n");
		goto usage_hint;
	}
	if ((o->set & SET_DURATION) && (o->set & SET_ITERS)) {
		fprintf(stderr, "softrdma %s: -n and -D exclude each other\n", cmd);
		goto usage_hint;
	}
	if ((o->set & SET_ALL) && (o->set & SET_SIZE)) {
		fprintf(stderr, "softrdma %s: -a and -s exclude each other\n", cmd);
		goto usage_hint;
	}
	if (!(o->set & SET_SIZE))
		p->size = p->verb == V_ATOMIC ? 8 : (o->test == T_LAT ? 2 : 65536);
	char why[128];
	const char *bad = params_check(o->test, p, why, sizeof(why));
	if (bad) {
		fprintf(stderr, "softrdma %s: %s\n", cmd, bad);
		goto usage_hint;
	}
	return 0;
usage_hint:
	fprintf(stderr, "Run 'softrdma %s --help' for the options.\n", cmd);
	return 2;
}

static int perf_main(enum test t, int argc, char **argv)
{
	static struct perf pf; /* large (channel buffers); one run per process */
	memset(&pf, 0, sizeof(pf));
	pf.o.test = t;
	pf.test = t;
	pf.cmd = tests[t];
	pf.chan.fd = -1;
	pf.out = stdout;
	int pr = parse_args(&pf, argc, argv);
	if (pr)
		return pr == 1 ? 0 : 2;
	pf.p = pf.o.p;
	pf.client = pf.o.server != NULL;
	pf.role = pf.client ? "client" : "server";
	pf.peer = pf.client ? "server" : "client";
	pf.timeout_ns = (uint64_t)(pf.o.timeout_s * 1e9);
	const char *corrupt = getenv("SOFTRDMA_PERF_CORRUPT");
	pf.corrupt = corrupt && !strcmp(corrupt, "1");
	if (pf.o.json) {
		if (!strcmp(pf.o.json, "-")) {
			pf.json = stdout;
			pf.out = stderr;
		} else if (!(pf.json = fopen(pf.o.json, "w"))) {
			fprintf(stderr, "softrdma %s: cannot write %s: %s\n", pf.cmd, pf.o.json,
				strerror(errno));
			return 1;
		}
	}
	struct tool_signals sigs;
	stop_signal = 0;
	tool_signals_catch(&sigs, on_signal);

	int rc = run(&pf);
	int sig = stop_signal;
	if (sig) {
		char why[64];
		snprintf(why, sizeof(why), "interrupted by %s",
			 sig == SIGINT ? "SIGINT" : "SIGTERM");
		chan_send_quiet(&pf, M_ABORT, why, strlen(why));
		fflush(stdout);
		fprintf(stderr, "softrdma %s: %s\n", pf.cmd, why);
		if (!pf.error[0])
			snprintf(pf.error, sizeof(pf.error), "%s", why);
	}
	write_json(&pf, rc == 0 && !sig);
	cleanup(&pf);
	tool_signals_restore(&sigs);
	if (sig)
		return 128 + sig;
	return rc ? 1 : 0;
}

int cmd_lat(int argc, char **argv)
{
	return perf_main(T_LAT, argc, argv);
}

int cmd_bw(int argc, char **argv)
{
	return perf_main(T_BW, argc, argv);
}
