/* Fault injection stage in front of io_udp_send (semantics: fault.h). */
#define _GNU_SOURCE
#include "io/fault.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUT_BATCH	 64	  /* packets passed to the sink per call */
#define REORDER_GRACE_NS 1000000u /* a held-back packet with no successor leaves after 1 ms */
#define ITEM_MAX	 128

/* A held packet: its bytes live in the pool buffer of the same index. */
struct held {
	uint64_t due; /* release time; for a reorder-held packet, its deadline */
	uint64_t seq; /* tie-break: release order among equal due times */
	struct io_pkt pkt;
};

struct io_fault {
	struct io_fault_cfg cfg;
	uint64_t rng[4]; /* xoshiro256** state */
	bool delayed;	 /* delay_us or jitter_us non-zero */
	uint32_t npool;
	size_t max_pkt;
	uint8_t *bufs;	  /* npool * max_pkt bytes */
	struct held *ent; /* npool */
	uint32_t *freel;  /* free entry indices (stack) */
	uint32_t nfree;
	uint32_t *heap; /* entries waiting for their due time, min-heap on (due, seq) */
	uint32_t nheap;
	uint32_t *waiting; /* reorder-held entries waiting for a successor, FIFO */
	uint32_t nwaiting;
	uint64_t seq;
	struct io_pkt out[OUT_BATCH]; /* staged for the sink */
	int nout;
	uint32_t release[OUT_BATCH]; /* pool entries in `out`, freed after the sink returns */
	int nrelease;
	io_fault_sink_fn sink;
	void *sink_ctx;
	struct io_udp *io; /* for the default sink, set per call */
	uint64_t cnt[IO_FAULT_NCOUNTERS];
};

static const char *const counter_names[] = {
#define X_NAME(name, desc) #name,
    IO_FAULT_COUNTERS(X_NAME)
#undef X_NAME
};

/* ---- PRNG: splitmix64 seeding xoshiro256** (public-domain algorithms by Vigna) ---- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct io_fault *f)
{
	uint64_t *s = f->rng;
	uint64_t r = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* True with probability p; draws only when p > 0 so that zero faults consume no randomness. */
static bool chance(struct io_fault *f, double p)
{
	if (p <= 0)
		return false;
	return (double)(rng_next(f) >> 11) * 0x1.0p-53 < p;
}

/* Uniform in [0, n). */
static uint64_t below(struct io_fault *f, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rng_next(f) * n) >> 64);
}

/* ---- pool and heap ---- */

static bool before(const struct io_fault *f, uint32_t a, uint32_t b)
{
	const struct held *x = &f->ent[a], *y = &f->ent[b];
	return x->due < y->due || (x->due == y->due && x->seq < y->seq);
}

static void heap_push(struct io_fault *f, uint32_t e)
{
	uint32_t i = f->nheap++;
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (!before(f, e, f->heap[p]))
			break;
		f->heap[i] = f->heap[p];
		i = p;
	}
	f->heap[i] = e;
}

static uint32_t heap_pop(struct io_fault *f)
{
	uint32_t top = f->heap[0], last = f->heap[--f->nheap], i = 0;
	for (;;) {
		uint32_t c = 2 * i + 1;
		if (c >= f->nheap)
			break;
		if (c + 1 < f->nheap && before(f, f->heap[c + 1], f->heap[c]))
			c++;
		if (!before(f, f->heap[c], last))
			break;
		f->heap[i] = f->heap[c];
		i = c;
	}
	if (f->nheap)
		f->heap[i] = last;
	return top;
}

/* Copies p into a free pool entry; returns its index or -1 (counted). */
static int copy_in(struct io_fault *f, const struct io_pkt *p)
{
	if (p->len > f->max_pkt) {
		f->cnt[IO_FAULT_C_drop_too_big]++;
		return -1;
	}
	if (f->nfree == 0) {
		f->cnt[IO_FAULT_C_drop_pool_full]++;
		return -1;
	}
	uint32_t e = f->freel[--f->nfree];
	uint8_t *buf = f->bufs + (size_t)e * f->max_pkt;
	memcpy(buf, p->buf, p->len);
	f->ent[e].pkt = *p;
	f->ent[e].pkt.buf = buf;
	f->ent[e].pkt.cap = f->max_pkt;
	return (int)e;
}

/* ---- output ---- */

static int push_out(struct io_fault *f)
{
	int n = f->nout, r;
	if (n == 0)
		return 0;
	if (f->sink)
		r = f->sink(f->sink_ctx, f->out, n);
	else if (f->io)
		r = io_udp_send(f->io, f->out, n);
	else
		r = -EINVAL;
	f->cnt[IO_FAULT_C_out] += (uint64_t)n;
	if (r < 0)
		f->cnt[IO_FAULT_C_sink_drops] += (uint64_t)n;
	else if (r < n)
		f->cnt[IO_FAULT_C_sink_drops] += (uint64_t)(n - r);
	for (int i = 0; i < f->nrelease; i++)
		f->freel[f->nfree++] = f->release[i];
	f->nout = 0;
	f->nrelease = 0;
	return n;
}

/* Stages p for the sink; e >= 0 is the pool entry holding its bytes (freed after the sink). */
static void stage(struct io_fault *f, const struct io_pkt *p, int e)
{
	if (f->nout == OUT_BATCH)
		push_out(f);
	f->out[f->nout++] = *p;
	if (e >= 0)
		f->release[f->nrelease++] = (uint32_t)e;
}

/* A packet took its place in the output order, leaving now (immediate) or at `due`: the
 * reorder-held packets go right behind it. */
static void successor(struct io_fault *f, bool immediate, uint64_t due)
{
	for (uint32_t i = 0; i < f->nwaiting; i++) {
		uint32_t e = f->waiting[i];
		if (immediate) {
			stage(f, &f->ent[e].pkt, (int)e);
		} else {
			f->ent[e].due = due;
			f->ent[e].seq = f->seq++;
			heap_push(f, e);
		}
	}
	f->nwaiting = 0;
}

/* Places one packet in the output. p points to the caller's bytes (e < 0) or to pool entry e. */
static void place(struct io_fault *f, const struct io_pkt *p, int e, bool reorder, bool delayed,
		  uint64_t due, uint64_t deadline)
{
	if (reorder || delayed) {
		if (e < 0 && (e = copy_in(f, p)) < 0)
			return;
		struct held *h = &f->ent[e];
		if (reorder) {
			h->due = deadline;
			f->waiting[f->nwaiting++] = (uint32_t)e;
			f->cnt[IO_FAULT_C_reordered]++;
			return;
		}
		h->due = due;
		h->seq = f->seq++;
		heap_push(f, (uint32_t)e);
		f->cnt[IO_FAULT_C_delayed]++;
		successor(f, false, due);
		return;
	}
	stage(f, p, e);
	successor(f, true, 0);
}

static int release_due(struct io_fault *f, uint64_t now_ns)
{
	int n = 0;
	/* Reorder-held packets whose successor never came; deadlines grow in FIFO order. */
	uint32_t k = 0;
	while (k < f->nwaiting && f->ent[f->waiting[k]].due <= now_ns) {
		stage(f, &f->ent[f->waiting[k]].pkt, (int)f->waiting[k]);
		k++;
		n++;
	}
	if (k) {
		memmove(f->waiting, f->waiting + k, (f->nwaiting - k) * sizeof(*f->waiting));
		f->nwaiting -= k;
	}
	while (f->nheap && f->ent[f->heap[0]].due <= now_ns) {
		uint32_t e = heap_pop(f);
		stage(f, &f->ent[e].pkt, (int)e);
		n++;
	}
	return n;
}

/* ---- API ---- */

int io_fault_create(const struct io_fault_cfg *cfg, uint32_t pool_packets, size_t max_pkt_size,
		    struct io_fault **out)
{
	struct io_fault *f;
	const double p[5] = {cfg ? cfg->loss : 0, cfg ? cfg->dup : 0, cfg ? cfg->reorder : 0,
			     cfg ? cfg->corrupt : 0, cfg ? cfg->ce : 0};
	uint64_t seed;

	if (!cfg || !out || pool_packets == 0 || max_pkt_size == 0 ||
	    (size_t)pool_packets > SIZE_MAX / max_pkt_size)
		return -EINVAL;
	for (int i = 0; i < 5; i++) {
		if (!(p[i] >= 0 && p[i] <= 1)) /* also rejects NaN */
			return -EINVAL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->cfg = *cfg;
	f->npool = pool_packets;
	f->max_pkt = max_pkt_size;
	f->delayed = cfg->delay_us || cfg->jitter_us;
	f->bufs = malloc((size_t)pool_packets * max_pkt_size);
	f->ent = calloc(pool_packets, sizeof(*f->ent));
	f->freel = calloc(pool_packets, sizeof(*f->freel));
	f->heap = calloc(pool_packets, sizeof(*f->heap));
	f->waiting = calloc(pool_packets, sizeof(*f->waiting));
	if (!f->bufs || !f->ent || !f->freel || !f->heap || !f->waiting) {
		io_fault_destroy(f);
		return -ENOMEM;
	}
	/* Pop order 0, 1, 2, ...: keeps the pool's use deterministic too. */
	for (uint32_t i = 0; i < pool_packets; i++)
		f->freel[i] = pool_packets - 1 - i;
	f->nfree = pool_packets;
	seed = cfg->seed;
	for (int i = 0; i < 4; i++)
		f->rng[i] = splitmix64(&seed);
	*out = f;
	return 0;
}

void io_fault_destroy(struct io_fault *f)
{
	if (!f)
		return;
	free(f->waiting);
	free(f->heap);
	free(f->freel);
	free(f->ent);
	free(f->bufs);
	free(f);
}

void io_fault_set_sink(struct io_fault *f, io_fault_sink_fn fn, void *ctx)
{
	f->sink = fn;
	f->sink_ctx = ctx;
}

int io_fault_send(struct io_fault *f, struct io_udp *io, const struct io_pkt *pkts, int n,
		  uint64_t now_ns)
{
	const struct io_fault_cfg *c;

	if (!f || n < 0 || (n > 0 && !pkts) || (!io && !f->sink))
		return -EINVAL;
	for (int i = 0; i < n; i++)
		if (pkts[i].ext)
			return -EINVAL; /* held packets are copied whole (io.h) */
	c = &f->cfg;
	f->io = io;
	release_due(f, now_ns);
	for (int i = 0; i < n; i++) {
		const struct io_pkt *p = &pkts[i];
		struct io_pkt tmp;
		uint64_t due = now_ns;
		/* Not jittered, so deadlines grow in FIFO order (release_due relies on it). */
		uint64_t deadline =
		    now_ns + ((uint64_t)c->delay_us + c->jitter_us) * 1000u + REORDER_GRACE_NS;
		int e = -1;

		f->cnt[IO_FAULT_C_in]++;
		if (chance(f, c->loss)) {
			f->cnt[IO_FAULT_C_lost]++;
			continue;
		}
		bool corrupt = chance(f, c->corrupt) && p->len > 0;
		bool dup = chance(f, c->dup);
		bool reorder = chance(f, c->reorder);
		struct io_pkt marked;
		if (chance(f, c->ce) && (p->tos & 3) != 0 && (p->tos & 3) != 3) {
			/* The descriptor only: the TOS is not in the bytes (copies below take it).
			 */
			marked = *p;
			marked.tos |= 3;
			p = &marked;
			f->cnt[IO_FAULT_C_ce_marked]++;
		}
		if (f->delayed)
			due += (uint64_t)c->delay_us * 1000u +
			       below(f, (uint64_t)c->jitter_us * 1000u + 1);
		if (corrupt) {
			e = copy_in(f, p);
			if (e < 0)
				continue;
			uint64_t bit = below(f, (uint64_t)p->len * 8);
			f->ent[e].pkt.buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			f->cnt[IO_FAULT_C_corrupted]++;
			p = &f->ent[e].pkt;
		}
		if (dup) {
			/* The copy is made before `p` may be staged (which can push and recycle e).
			 */
			tmp = *p;
			int d = -1;
			if (reorder || f->delayed || e >= 0) {
				d = copy_in(f, p);
				if (d >= 0)
					tmp = f->ent[d].pkt;
			}
			place(f, p, e, reorder, f->delayed, due, deadline);
			if (d >= 0 || (!reorder && !f->delayed && e < 0)) {
				place(f, &tmp, d, reorder, f->delayed, due, deadline);
				f->cnt[IO_FAULT_C_duplicated]++;
			}
			continue;
		}
		place(f, p, e, reorder, f->delayed, due, deadline);
	}
	push_out(f);
	f->io = NULL;
	return n;
}

int io_fault_flush(struct io_fault *f, struct io_udp *io, uint64_t now_ns)
{
	int n;
	if (!f || (!io && !f->sink))
		return -EINVAL;
	f->io = io;
	n = release_due(f, now_ns);
	push_out(f);
	f->io = NULL;
	return n;
}

uint64_t io_fault_deadline(const struct io_fault *f)
{
	uint64_t t = UINT64_MAX;
	if (f->nheap)
		t = f->ent[f->heap[0]].due;
	if (f->nwaiting && f->ent[f->waiting[0]].due < t)
		t = f->ent[f->waiting[0]].due;
	return t;
}

uint32_t io_fault_held(const struct io_fault *f)
{
	return f->nheap + f->nwaiting;
}

void io_fault_counters(const struct io_fault *f, uint64_t out[IO_FAULT_NCOUNTERS])
{
	memcpy(out, f->cnt, sizeof(f->cnt));
}

const char *io_fault_counter_name(enum io_fault_counter c)
{
	return (unsigned)c < IO_FAULT_NCOUNTERS ? counter_names[c] : NULL;
}

/* ---- the specification parser ---- */

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* A number as strtod reads it, but only plain decimal notation (no inf, nan, hex). */
static bool number(const char *s, double *v, const char **end)
{
	char *e;
	if (!isdigit((unsigned char)s[0]) && !(s[0] == '.' && isdigit((unsigned char)s[1])))
		return false;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return false;
	errno = 0;
	*v = strtod(s, &e);
	if (errno || e == s || !isfinite(*v))
		return false;
	*end = e;
	return true;
}

static int parse_prob(const char *key, const char *val, double *out, char *err, size_t errlen)
{
	const char *end;
	double v;
	if (!number(val, &v, &end))
		return fail(err, errlen, "%s=%s: not a probability (write 1%% or 0.01)", key, val);
	if (*end == '%') {
		if (end[1] != '\0')
			return fail(err, errlen, "%s=%s: unexpected '%s' after '%%'", key, val,
				    end + 1);
		if (v > 100)
			return fail(err, errlen, "%s=%s: more than 100%%", key, val);
		v /= 100;
	} else if (*end != '\0') {
		return fail(err, errlen, "%s=%s: unexpected '%s' (write 1%% or 0.01)", key, val,
			    end);
	} else if (v > 1) {
		return fail(err, errlen, "%s=%s: a fraction must be at most 1 (did you mean %s%%?)",
			    key, val, val);
	}
	*out = v;
	return 0;
}

static int parse_time(const char *key, const char *val, uint32_t *out, char *err, size_t errlen)
{
	static const struct {
		const char *unit;
		double us;
	} units[] = {{"", 1}, {"ns", 1e-3}, {"us", 1}, {"ms", 1e3}, {"s", 1e6}};
	const char *end;
	double v;
	if (!number(val, &v, &end))
		return fail(err, errlen, "%s=%s: not a duration (write 100us, 1.5ms, 2s)", key,
			    val);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		/* rounded by hand: the library does not link libm */
		double us = v * units[i].us + 0.5;
		if (us >= (double)UINT32_MAX + 1)
			return fail(err, errlen, "%s=%s: too long (at most %u us)", key, val,
				    UINT32_MAX);
		*out = (uint32_t)us; /* truncation of x + 0.5: round half up */
		return 0;
	}
	return fail(err, errlen, "%s=%s: unknown unit '%s' (use ns, us, ms or s)", key, val, end);
}

static int parse_seed(const char *val, uint64_t *out, char *err, size_t errlen)
{
	char *end;
	if (!isdigit((unsigned char)val[0]))
		return fail(err, errlen, "seed=%s: not an unsigned integer", val);
	errno = 0;
	unsigned long long v = strtoull(val, &end, 0);
	if (errno == ERANGE)
		return fail(err, errlen, "seed=%s: larger than 64 bits", val);
	if (errno || *end != '\0')
		return fail(err, errlen, "seed=%s: not an unsigned integer", val);
	*out = v;
	return 0;
}

/* A byte count >= 1: decimal digits, then nothing, K / KiB or M / MiB; at most max. */
static int parse_size(const char *key, const char *val, uint64_t max, uint64_t *out, char *err,
		      size_t errlen)
{
	static const struct {
		const char *unit;
		uint64_t mult;
	} units[] = {{"", 1},
		     {"K", 1ull << 10},
		     {"KiB", 1ull << 10},
		     {"M", 1ull << 20},
		     {"MiB", 1ull << 20}};
	char *end;
	if (!isdigit((unsigned char)val[0]))
		return fail(err, errlen, "%s=%s: not a size in bytes (write 4096, 64K or 8MiB)",
			    key, val);
	errno = 0;
	unsigned long long v = strtoull(val, &end, 10);
	if (errno == ERANGE)
		return fail(err, errlen, "%s=%s: too large (at most %llu bytes)", key, val,
			    (unsigned long long)max);
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].unit) != 0)
			continue;
		if (v == 0)
			return fail(err, errlen,
				    "%s=%s: must be at least 1 byte (leave the key out "
				    "for no fault)",
				    key, val);
		if (v > max / units[i].mult)
			return fail(err, errlen, "%s=%s: too large (at most %llu bytes)", key, val,
				    (unsigned long long)max);
		*out = v * units[i].mult;
		return 0;
	}
	return fail(err, errlen, "%s=%s: unknown unit '%s' (use K, KiB, M or MiB: powers of 1024)",
		    key, val, end);
}

int io_fault_parse(const char *spec, struct io_fault_cfg *cfg, char *err, size_t errlen)
{
	static const char *const keys[] = {"loss",	"dup",		"reorder", "corrupt",
					   "delay",	"jitter",	"seed",	   "tcp_reset",
					   "tcp_chunk", "tcp_rx_chunk", "ce"};
	unsigned seen = 0;

	if (!cfg)
		return fail(err, errlen, "no configuration to fill");
	memset(cfg, 0, sizeof(*cfg));
	if (err && errlen)
		err[0] = '\0';
	if (!spec)
		return 0;
	const char *s = spec;
	while (isspace((unsigned char)*s))
		s++;
	if (*s == '\0')
		return 0;
	for (;;) {
		char item[ITEM_MAX];
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (len >= sizeof(item))
			return fail(err, errlen, "'%.20s...': item too long", s);
		memcpy(item, s, len);
		item[len] = '\0';
		char *it = trim(item);
		if (*it == '\0')
			return fail(err, errlen, "empty item at offset %zu of \"%s\"",
				    (size_t)(s - spec), spec);
		char *eq = strchr(it, '=');
		if (!eq)
			return fail(err, errlen, "'%s': expected key=value", it);
		*eq = '\0';
		char *key = trim(it), *val = trim(eq + 1);
		int k = -1;
		for (int i = 0; i < (int)(sizeof(keys) / sizeof(keys[0])); i++) {
			if (strcmp(key, keys[i]) == 0)
				k = i;
		}
		if (k < 0)
			return fail(
			    err, errlen,
			    "unknown key '%s' (expected loss, dup, reorder, corrupt, ce, delay, "
			    "jitter, seed, tcp_reset, tcp_chunk or tcp_rx_chunk)",
			    key);
		if (seen & (1u << k))
			return fail(err, errlen, "key '%s' given twice", key);
		seen |= 1u << k;
		if (*val == '\0')
			return fail(err, errlen, "%s: missing value", key);
		int r;
		uint64_t size = 0;
		switch (k) {
		case 0:
			r = parse_prob(key, val, &cfg->loss, err, errlen);
			break;
		case 1:
			r = parse_prob(key, val, &cfg->dup, err, errlen);
			break;
		case 2:
			r = parse_prob(key, val, &cfg->reorder, err, errlen);
			break;
		case 3:
			r = parse_prob(key, val, &cfg->corrupt, err, errlen);
			break;
		case 4:
			r = parse_time(key, val, &cfg->delay_us, err, errlen);
			break;
		case 5:
			r = parse_time(key, val, &cfg->jitter_us, err, errlen);
			break;
		case 6:
			r = parse_seed(val, &cfg->seed, err, errlen);
			break;
		case 7:
			r = parse_size(key, val, UINT64_MAX, &cfg->tcp_reset, err, errlen);
			break;
		case 8:
			r = parse_size(key, val, UINT32_MAX, &size, err, errlen);
			cfg->tcp_chunk = (uint32_t)size;
			break;
		case 9:
			r = parse_size(key, val, UINT32_MAX, &size, err, errlen);
			cfg->tcp_rx_chunk = (uint32_t)size;
			break;
		default:
			r = parse_prob(key, val, &cfg->ce, err, errlen);
			break;
		}
		if (r)
			return r;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

int io_fault_format(const struct io_fault_cfg *cfg, char *buf, size_t len)
{
	char tcp[128] = "";
	int n = 0;
	/* ce and the TCP keys only when set: a configuration without formats as it always did. */
	if (cfg->ce > 0)
		n += snprintf(tcp + n, sizeof(tcp) - (size_t)n, ",ce=%g%%", cfg->ce * 100);
	/* The TCP keys only when set: a UDP-only configuration formats as it always did. */
	if (cfg->tcp_reset)
		n += snprintf(tcp + n, sizeof(tcp) - (size_t)n, ",tcp_reset=%llu",
			      (unsigned long long)cfg->tcp_reset);
	if (cfg->tcp_chunk)
		n += snprintf(tcp + n, sizeof(tcp) - (size_t)n, ",tcp_chunk=%u", cfg->tcp_chunk);
	if (cfg->tcp_rx_chunk)
		snprintf(tcp + n, sizeof(tcp) - (size_t)n, ",tcp_rx_chunk=%u", cfg->tcp_rx_chunk);
	return snprintf(buf, len,
			"loss=%g%%,dup=%g%%,reorder=%g%%,corrupt=%g%%,delay=%uus,jitter=%uus,"
			"seed=%llu%s",
			cfg->loss * 100, cfg->dup * 100, cfg->reorder * 100, cfg->corrupt * 100,
			cfg->delay_us, cfg->jitter_us, (unsigned long long)cfg->seed, tcp);
}
