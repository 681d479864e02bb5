/* The fault stage without sockets: the specification parser (good and bad input, the UDP keys
 * and the TCP keys tcp_reset / tcp_chunk / tcp_rx_chunk), pass-through with no faults, and the
 * statistics of every fault on 100000 packets (seeded, with tolerances of about five standard
 * deviations), the delay distribution on a virtual clock, the pool limit, determinism, and that
 * the TCP keys change nothing on the UDP side. (The TCP faults themselves act in io/tcp.c:
 * tests/e2e/test_iw_faults.c.) */
#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "check.h"
#include "io/fault.h"

#define N    100000
#define PLEN 64

/* The sink records what comes out. */
struct rec {
	uint32_t seq;
	uint32_t bitdiff; /* bits that differ from the pattern of seq */
	uint64_t at;	  /* virtual time of the call that released it */
	const uint8_t *buf;
};

static struct rec *log_;
static size_t nlog, caplog;
static uint64_t vnow;

static void pattern(uint8_t *b, uint32_t seq)
{
	memcpy(b, &seq, 4);
	for (int j = 4; j < PLEN; j++)
		b[j] = (uint8_t)(seq * 31 + (uint32_t)j);
}

static int sink(void *ctx, const struct io_pkt *pkts, int n)
{
	(void)ctx;
	for (int i = 0; i < n; i++) {
		uint8_t want[PLEN];
		uint32_t seq, diff = 0;
		REQUIRE(pkts[i].len == PLEN);
		/* the sequence number may itself be hit by corruption: take the majority guess by
		 * comparing with the pattern of the recorded value and of the bytes 4.. */
		memcpy(&seq, pkts[i].buf, 4);
		pattern(want, seq);
		for (int j = 0; j < PLEN; j++)
			diff += (uint32_t)__builtin_popcount(want[j] ^ pkts[i].buf[j]);
		if (nlog == caplog) {
			caplog = caplog ? 2 * caplog : 4096;
			log_ = realloc(log_, caplog * sizeof(*log_));
			REQUIRE(log_);
		}
		log_[nlog++] =
		    (struct rec){.seq = seq, .bitdiff = diff, .at = vnow, .buf = pkts[i].buf};
	}
	return n;
}

static uint64_t ctr(struct io_fault *f, enum io_fault_counter c)
{
	uint64_t v[IO_FAULT_NCOUNTERS];
	io_fault_counters(f, v);
	return v[c];
}

/* Sends N packets in batches of 1..16, advancing the virtual clock by step_ns per packet, then
 * flushes far in the future. Returns the stage (caller destroys). */
static struct io_fault *run(const struct io_fault_cfg *cfg, uint32_t pool, uint64_t step_ns)
{
	static uint8_t bufs[16][PLEN];
	struct io_pkt pkts[16];
	struct io_fault *f;
	uint32_t seq = 0;
	uint64_t batch_rng = 12345;

	nlog = 0;
	vnow = 1000000;
	REQUIRE(io_fault_create(cfg, pool, 256, &f) == 0);
	io_fault_set_sink(f, sink, NULL);
	while (seq < N) {
		batch_rng = batch_rng * 6364136223846793005ull + 1442695040888963407ull;
		int n = (int)(batch_rng >> 60) + 1;
		if (n > (int)(N - seq))
			n = (int)(N - seq);
		for (int i = 0; i < n; i++) {
			pattern(bufs[i], seq++);
			pkts[i] =
			    (struct io_pkt){.buf = bufs[i], .cap = PLEN, .len = PLEN, .sport = 7};
		}
		CHECK_EQ(io_fault_send(f, NULL, pkts, n, vnow), n);
		for (int i = 0; i < n; i++) {
			uint8_t want[PLEN];
			pattern(want, seq - (uint32_t)n + (uint32_t)i);
			if (memcmp(bufs[i], want, PLEN) != 0) { /* never modified */
				CHECK(false);
				break;
			}
		}
		vnow += step_ns * (uint64_t)n;
		io_fault_flush(f, NULL, vnow);
	}
	/* drain at the exact deadlines, so that release times stay exact */
	for (int guard = 0; io_fault_held(f) && guard < 1000000; guard++) {
		if (io_fault_deadline(f) > vnow)
			vnow = io_fault_deadline(f);
		io_fault_flush(f, NULL, vnow);
	}
	CHECK_EQ(io_fault_held(f), 0);
	CHECK(io_fault_deadline(f) == UINT64_MAX);
	return f;
}

/* Newton's square root: the test links no libm (neither does the library). */
static double root(double v)
{
	double r = v > 1 ? v : 1;
	for (int i = 0; i < 100; i++)
		r = (r + v / r) / 2;
	return r;
}

static double absd(double v)
{
	return v < 0 ? -v : v;
}

/* |x - n p| within 5 sigma of a binomial(n, p). */
static bool near_binomial(uint64_t x, double n, double p)
{
	double mean = n * p, sd = root(n * p * (1 - p));
	bool ok = absd((double)x - mean) <= 5 * sd + 1;
	if (!ok)
		fprintf(stderr, "  %llu vs expected %.1f +- %.1f\n", (unsigned long long)x, mean,
			5 * sd);
	return ok;
}

static void test_parse_good(void)
{
	struct io_fault_cfg c;
	char err[128];

	CHECK_EQ(io_fault_parse(
		     "loss=1%,dup=0.1%,reorder=1%,corrupt=0.01%,delay=100us,jitter=20us,seed=7", &c,
		     err, sizeof(err)),
		 0);
	CHECK(absd(c.loss - 0.01) < 1e-12);
	CHECK(absd(c.dup - 0.001) < 1e-12);
	CHECK(absd(c.reorder - 0.01) < 1e-12);
	CHECK(absd(c.corrupt - 0.0001) < 1e-12);
	CHECK_EQ(c.delay_us, 100);
	CHECK_EQ(c.jitter_us, 20);
	CHECK_EQ(c.seed, 7);
	CHECK_EQ(err[0], '\0');

	CHECK_EQ(io_fault_parse(" loss = 0.05 , seed=0x10 ", &c, err, sizeof(err)), 0);
	CHECK(absd(c.loss - 0.05) < 1e-12);
	CHECK_EQ(c.seed, 16);
	CHECK_EQ(c.delay_us, 0);
	CHECK_EQ(io_fault_parse("delay=1.5ms,jitter=2s", &c, err, sizeof(err)), 0);
	CHECK_EQ(c.delay_us, 1500);
	CHECK_EQ(c.jitter_us, 2000000);
	CHECK_EQ(io_fault_parse("delay=500ns,jitter=250", &c, err, sizeof(err)), 0);
	CHECK_EQ(c.delay_us, 1); /* rounded to whole microseconds */
	CHECK_EQ(c.jitter_us, 250);
	CHECK_EQ(io_fault_parse("loss=100%,dup=1,corrupt=0,reorder=.5", &c, err, sizeof(err)), 0);
	CHECK(c.loss == 1.0 && c.dup == 1.0 && c.corrupt == 0 && c.reorder == 0.5);
	CHECK_EQ(io_fault_parse("", &c, err, sizeof(err)), 0);
	CHECK_EQ(io_fault_parse("   ", &c, err, sizeof(err)), 0);
	CHECK_EQ(io_fault_parse(NULL, &c, NULL, 0), 0);
	CHECK(c.loss == 0 && c.seed == 0);
	CHECK_EQ(io_fault_parse("seed=18446744073709551615", &c, err, sizeof(err)), 0);
	CHECK(c.seed == UINT64_MAX);

	/* format, then parse back */
	struct io_fault_cfg a = {.loss = 0.0125,
				 .dup = 0.5,
				 .reorder = 0,
				 .corrupt = 0.001,
				 .delay_us = 77,
				 .jitter_us = 3,
				 .seed = 99};
	char spec[256];
	io_fault_format(&a, spec, sizeof(spec));
	CHECK_EQ(io_fault_parse(spec, &c, err, sizeof(err)), 0);
	CHECK(absd(c.loss - a.loss) < 1e-9 && absd(c.dup - a.dup) < 1e-9 &&
	      absd(c.corrupt - a.corrupt) < 1e-9);
	CHECK(c.delay_us == 77 && c.jitter_us == 3 && c.seed == 99);
}

static void test_parse_bad(void)
{
	static const struct {
		const char *spec;
		const char *needle; /* must appear in the error text */
	} bad[] = {
	    {"loss", "expected key=value"},
	    {"loss=", "missing value"},
	    {"loss=abc", "not a probability"},
	    {"loss=150%", "more than 100%"},
	    {"loss=1.5", "at most 1"},
	    {"loss=-1%", "not a probability"},
	    {"loss=1%x", "unexpected"},
	    {"loss=1x", "unexpected"},
	    {"loss=nan", "not a probability"},
	    {"loss=inf", "not a probability"},
	    {"loss=0x1p-3", "not a probability"},
	    {"foo=1", "unknown key 'foo'"},
	    {"loss=1%,loss=2%", "given twice"},
	    {"delay=5xs", "unknown unit 'xs'"},
	    {"delay=-5us", "not a duration"},
	    {"delay=5000s", "too long"},
	    {"seed=-1", "not an unsigned integer"},
	    {"seed=abc", "not an unsigned integer"},
	    {"seed=12ab", "not an unsigned integer"},
	    {"seed=99999999999999999999999", "larger than 64 bits"},
	    {"loss=1%,,dup=1%", "empty item"},
	    {"loss=1%,", "empty item"},
	    {",loss=1%", "empty item"},
	    {"=5", "unknown key ''"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct io_fault_cfg c;
		char err[160] = "";
		int r = io_fault_parse(bad[i].spec, &c, err, sizeof(err));
		CHECK_EQ(r, -EINVAL);
		if (!strstr(err, bad[i].needle)) {
			fprintf(stderr, "spec \"%s\": error \"%s\" lacks \"%s\"\n", bad[i].spec,
				err, bad[i].needle);
			CHECK(false);
		}
	}
	/* a short error buffer is truncated and terminated */
	struct io_fault_cfg c;
	char small[8];
	memset(small, 'X', sizeof(small));
	CHECK_EQ(io_fault_parse("foo=1", &c, small, sizeof(small)), -EINVAL);
	CHECK(strlen(small) == 7);
	CHECK_EQ(io_fault_parse("foo=1", &c, NULL, 0), -EINVAL);
	/* create refuses what the parser would */
	struct io_fault *f;
	struct io_fault_cfg bc = {.loss = 1.5};
	CHECK_EQ(io_fault_create(&bc, 4, 64, &f), -EINVAL);
	bc.loss = NAN;
	CHECK_EQ(io_fault_create(&bc, 4, 64, &f), -EINVAL);
	bc.loss = 0;
	CHECK_EQ(io_fault_create(&bc, 0, 64, &f), -EINVAL);
	CHECK_EQ(io_fault_create(&bc, 4, 0, &f), -EINVAL);
}

/* The TCP keys: sizes with K / KiB / M / MiB, their ranges, format and parse back. */
static void test_parse_tcp(void)
{
	struct io_fault_cfg c;
	char err[160], spec[256];

	CHECK_EQ(io_fault_parse("tcp_reset=8M,tcp_chunk=7,tcp_rx_chunk=3", &c, err, sizeof(err)),
		 0);
	CHECK(c.tcp_reset == 8u << 20);
	CHECK_EQ(c.tcp_chunk, 7);
	CHECK_EQ(c.tcp_rx_chunk, 3);
	CHECK(c.loss == 0 && c.dup == 0 && c.delay_us == 0 && c.seed == 0);
	CHECK_EQ(err[0], '\0');
	CHECK_EQ(io_fault_parse(" tcp_reset = 100 , tcp_chunk=64KiB,tcp_rx_chunk=1K", &c, err,
				sizeof(err)),
		 0);
	CHECK(c.tcp_reset == 100);
	CHECK_EQ(c.tcp_chunk, 65536);
	CHECK_EQ(c.tcp_rx_chunk, 1024);
	CHECK_EQ(io_fault_parse("tcp_reset=1MiB,tcp_chunk=4095M", &c, err, sizeof(err)), 0);
	CHECK(c.tcp_reset == 1u << 20);
	CHECK(c.tcp_chunk == 4095u << 20);
	CHECK_EQ(c.tcp_rx_chunk, 0); /* absent: off */
	CHECK_EQ(io_fault_parse("tcp_reset=18446744073709551615,tcp_chunk=4294967295", &c, err,
				sizeof(err)),
		 0);
	CHECK(c.tcp_reset == UINT64_MAX);
	CHECK(c.tcp_chunk == UINT32_MAX);
	CHECK_EQ(io_fault_parse("tcp_reset=17592186044415M", &c, err, sizeof(err)), 0);
	CHECK(c.tcp_reset == 17592186044415ull << 20);
	/* mixed with the UDP keys, in any order */
	CHECK_EQ(io_fault_parse("tcp_chunk=1,loss=1%,seed=3,tcp_reset=30", &c, err, sizeof(err)),
		 0);
	CHECK(absd(c.loss - 0.01) < 1e-12 && c.seed == 3 && c.tcp_chunk == 1 && c.tcp_reset == 30);

	/* A UDP-only configuration formats exactly as before the TCP keys existed. */
	struct io_fault_cfg z = {0};
	io_fault_format(&z, spec, sizeof(spec));
	CHECK(strcmp(spec, "loss=0%,dup=0%,reorder=0%,corrupt=0%,delay=0us,jitter=0us,seed=0") ==
	      0);
	struct io_fault_cfg a = {.loss = 0.25, .seed = 9, .tcp_reset = 5000000, .tcp_rx_chunk = 3};
	io_fault_format(&a, spec, sizeof(spec));
	CHECK(strcmp(spec, "loss=25%,dup=0%,reorder=0%,corrupt=0%,delay=0us,jitter=0us,seed=9,"
			   "tcp_reset=5000000,tcp_rx_chunk=3") == 0);
	a = (struct io_fault_cfg){
	    .tcp_reset = UINT64_MAX, .tcp_chunk = UINT32_MAX, .tcp_rx_chunk = UINT32_MAX};
	CHECK_EQ(io_fault_format(&a, spec, sizeof(spec)), (int)strlen(spec));
	CHECK_EQ(io_fault_parse(spec, &c, err, sizeof(err)), 0);
	CHECK(c.tcp_reset == a.tcp_reset && c.tcp_chunk == a.tcp_chunk &&
	      c.tcp_rx_chunk == a.tcp_rx_chunk);

	static const struct {
		const char *spec;
		const char *needle;
	} bad[] = {
	    {"tcp_reset=0", "at least 1 byte"},
	    {"tcp_chunk=0K", "at least 1 byte"},
	    {"tcp_rx_chunk=0", "at least 1 byte"},
	    {"tcp_reset=", "missing value"},
	    {"tcp_chunk=-1", "not a size"},
	    {"tcp_chunk=abc", "not a size"},
	    {"tcp_chunk=.5K", "not a size"},
	    {"tcp_chunk=1.5K", "unknown unit '.5K'"},
	    {"tcp_chunk=4G", "unknown unit 'G'"},
	    {"tcp_chunk=7kb", "unknown unit 'kb'"},
	    {"tcp_chunk=7 K", "unknown unit ' K'"},
	    {"tcp_reset=0x10", "unknown unit 'x10'"},
	    {"tcp_chunk=4294967296", "too large"},
	    {"tcp_rx_chunk=4096M", "too large"},
	    {"tcp_chunk=4194304K", "too large"},
	    {"tcp_reset=18446744073709551616", "too large"},
	    {"tcp_reset=17592186044416M", "too large"},
	    {"tcp_chunk=1,tcp_chunk=2", "given twice"},
	    {"tcp_resets=1", "unknown key 'tcp_resets'"},
	    {"tcp_reset=5,", "empty item"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		int r = io_fault_parse(bad[i].spec, &c, err, sizeof(err));
		CHECK_EQ(r, -EINVAL);
		if (!strstr(err, bad[i].needle)) {
			fprintf(stderr, "spec \"%s\": error \"%s\" lacks \"%s\"\n", bad[i].spec,
				err, bad[i].needle);
			CHECK(false);
		}
	}
}

static void test_passthrough(void)
{
	struct io_fault_cfg c = {.seed = 1};
	struct io_fault *f = run(&c, 64, 1000);
	CHECK_EQ(nlog, N);
	size_t bad = 0;
	for (size_t i = 0; i < nlog; i++)
		bad += log_[i].seq != i || log_[i].bitdiff != 0 || log_[i].at == 0;
	CHECK_EQ(bad, 0);
	CHECK_EQ(ctr(f, IO_FAULT_C_in), N);
	CHECK_EQ(ctr(f, IO_FAULT_C_out), N);
	for (int i = IO_FAULT_C_lost; i < IO_FAULT_NCOUNTERS; i++)
		CHECK_EQ(ctr(f, i), 0);
	io_fault_destroy(f);

	/* without a copy: the sink sees the caller's own buffer */
	uint8_t b[PLEN];
	pattern(b, 5);
	struct io_pkt p = {.buf = b, .len = PLEN};
	REQUIRE(io_fault_create(&c, 4, 256, &f) == 0);
	io_fault_set_sink(f, sink, NULL);
	nlog = 0;
	CHECK_EQ(io_fault_send(f, NULL, &p, 1, 0), 1);
	CHECK_EQ(nlog, 1);
	CHECK(log_[0].buf == b);
	CHECK_EQ(io_fault_send(f, NULL, NULL, 0, 0), 0);
	CHECK_EQ(io_fault_send(f, NULL, NULL, 1, 0), -EINVAL);
	io_fault_set_sink(f, NULL, NULL);
	CHECK_EQ(io_fault_send(f, NULL, &p, 1, 0), -EINVAL); /* no sink and no io */
	io_fault_destroy(f);
}

static void test_loss(void)
{
	struct io_fault_cfg c = {.loss = 0.01, .seed = 11};
	struct io_fault *f = run(&c, 64, 1000);
	uint64_t lost = ctr(f, IO_FAULT_C_lost);
	CHECK(near_binomial(lost, N, 0.01));
	CHECK_EQ(nlog, N - lost);
	size_t disorder = 0;
	for (size_t i = 1; i < nlog; i++)
		disorder += log_[i].seq <= log_[i - 1].seq;
	CHECK_EQ(disorder, 0);
	io_fault_destroy(f);
}

static void test_dup(void)
{
	struct io_fault_cfg c = {.dup = 0.02, .seed = 12};
	struct io_fault *f = run(&c, 64, 1000);
	uint64_t dups = ctr(f, IO_FAULT_C_duplicated);
	CHECK(near_binomial(dups, N, 0.02));
	CHECK_EQ(nlog, N + dups);
	size_t seen_dups = 0, bad = 0;
	for (size_t i = 1; i < nlog; i++) {
		if (log_[i].seq == log_[i - 1].seq)
			seen_dups++; /* a duplicate follows its original at once */
		else
			bad += log_[i].seq != log_[i - 1].seq + 1;
	}
	CHECK_EQ(seen_dups, dups);
	CHECK_EQ(bad, 0);
	io_fault_destroy(f);
}

static void test_corrupt(void)
{
	struct io_fault_cfg c = {.corrupt = 0.01, .seed = 13};
	struct io_fault *f = run(&c, 64, 1000);
	uint64_t corrupted = ctr(f, IO_FAULT_C_corrupted);
	CHECK(near_binomial(corrupted, N, 0.01));
	CHECK_EQ(nlog, N);
	size_t one_bit = 0, other = 0;
	for (size_t i = 0; i < nlog; i++) {
		if (log_[i].bitdiff == 1 || log_[i].seq != i)
			one_bit++; /* a flip in the sequence field shows as a wrong seq */
		else if (log_[i].bitdiff != 0)
			other++;
	}
	CHECK_EQ(one_bit, corrupted);
	CHECK_EQ(other, 0);
	io_fault_destroy(f);
}

static void test_reorder(void)
{
	struct io_fault_cfg c = {.reorder = 0.01, .seed = 14};
	struct io_fault *f = run(&c, 64, 1000);
	uint64_t reordered = ctr(f, IO_FAULT_C_reordered);
	CHECK(near_binomial(reordered, N, 0.01));
	CHECK_EQ(nlog, N);
	/* every packet arrives once; a held-back packet lands right behind its successor, so it is
	 * the one whose sequence number is lower than the one before it */
	uint8_t *seen = calloc(N, 1);
	size_t late = 0, dupes = 0, far = 0;
	for (size_t i = 0; i < nlog; i++) {
		dupes += seen[log_[i].seq]++ != 0;
		if (i && log_[i].seq < log_[i - 1].seq) {
			late++;
			far +=
			    log_[i - 1].seq - log_[i].seq > 3; /* runs of held packets are short */
		}
	}
	CHECK_EQ(dupes, 0);
	CHECK(late <= reordered && late + reordered / 50 + 2 >= reordered);
	CHECK_EQ(far, 0);
	free(seen);
	io_fault_destroy(f);
}

static void test_delay(void)
{
	/* 1 packet per virtual microsecond; flushes after every batch */
	struct io_fault_cfg c = {.delay_us = 100, .jitter_us = 20, .seed = 15};
	struct io_fault *f = run(&c, 512, 1000);
	CHECK_EQ(nlog, N);
	CHECK_EQ(ctr(f, IO_FAULT_C_delayed), N);
	CHECK_EQ(ctr(f, IO_FAULT_C_drop_pool_full), 0);
	/* reconstruct the send time of each packet: the run sends seq at 1 ms + the start of its
	 * batch; bound the delay by the flush granularity (one batch, at most 16 us) */
	double sum = 0;
	uint64_t mn = UINT64_MAX, mx = 0;
	size_t out_of_order = 0;
	for (size_t i = 0; i < nlog; i++) {
		uint64_t sent = 1000000 + (uint64_t)log_[i].seq * 1000;
		uint64_t d = log_[i].at - sent;
		sum += (double)d;
		mn = d < mn ? d : mn;
		mx = d > mx ? d : mx;
		out_of_order += i && log_[i].seq < log_[i - 1].seq;
	}
	double mean_us = sum / (double)nlog / 1000;
	fprintf(stderr, "  delay: min %.1f us, mean %.2f us, max %.1f us, %zu overtaken\n",
		(double)mn / 1000, mean_us, (double)mx / 1000, out_of_order);
	CHECK(mn >= 85000);  /* 100 us minus at most a batch of send-time skew */
	CHECK(mx <= 137000); /* 120 us plus the flush granularity */
	CHECK(mean_us > 105 && mean_us < 120);
	CHECK(out_of_order > 0); /* jitter 20 us > 1 us spacing reorders, as netem does */
	io_fault_destroy(f);

	/* the deadline is exact: one packet, delay 50 us, no jitter */
	struct io_fault_cfg d = {.delay_us = 50};
	uint8_t b[PLEN];
	pattern(b, 0);
	struct io_pkt p = {.buf = b, .len = PLEN};
	REQUIRE(io_fault_create(&d, 4, 256, &f) == 0);
	io_fault_set_sink(f, sink, NULL);
	nlog = 0;
	CHECK_EQ(io_fault_send(f, NULL, &p, 1, 1000), 1);
	CHECK_EQ(nlog, 0);
	CHECK_EQ(io_fault_held(f), 1);
	CHECK(io_fault_deadline(f) == 51000);
	CHECK_EQ(io_fault_flush(f, NULL, 50999), 0);
	CHECK_EQ(io_fault_flush(f, NULL, 51000), 1);
	CHECK_EQ(nlog, 1);
	CHECK(io_fault_deadline(f) == UINT64_MAX);
	io_fault_destroy(f);
}

static void test_reorder_deadline_and_pool(void)
{
	/* a held-back packet with no successor leaves at its deadline (1 ms grace) */
	struct io_fault_cfg c = {.reorder = 1.0};
	struct io_fault *f;
	uint8_t b[2][PLEN];
	pattern(b[0], 0);
	pattern(b[1], 1);
	struct io_pkt p[2] = {{.buf = b[0], .len = PLEN}, {.buf = b[1], .len = PLEN}};
	REQUIRE(io_fault_create(&c, 4, 256, &f) == 0);
	io_fault_set_sink(f, sink, NULL);
	nlog = 0;
	CHECK_EQ(io_fault_send(f, NULL, p, 1, 0), 1);
	CHECK_EQ(io_fault_held(f), 1);
	CHECK(io_fault_deadline(f) == 1000000);
	CHECK_EQ(io_fault_flush(f, NULL, 999999), 0);
	CHECK_EQ(io_fault_flush(f, NULL, 1000000), 1);
	CHECK_EQ(nlog, 1);
	io_fault_destroy(f);

	/* swap with the successor */
	struct io_fault_cfg half = {.reorder = 0.5, .seed = 3};
	REQUIRE(io_fault_create(&half, 4, 256, &f) == 0);
	io_fault_set_sink(f, sink, NULL);
	nlog = 0;
	for (int tries = 0; tries < 64 && nlog == 0; tries++) {
		io_fault_send(f, NULL, p, 2, 0);
		io_fault_flush(f, NULL, 10000000);
		if (nlog == 2 && log_[0].seq == 1 && log_[1].seq == 0)
			break; /* first held, second went, first right behind */
		nlog = 0;
	}
	CHECK_EQ(nlog, 2);
	io_fault_destroy(f);

	/* a full pool drops, counted; too-big packets too */
	struct io_fault_cfg d = {.delay_us = 1000};
	REQUIRE(io_fault_create(&d, 16, 256, &f) == 0);
	io_fault_set_sink(f, sink, NULL);
	nlog = 0;
	for (int i = 0; i < 100; i++)
		io_fault_send(f, NULL, p, 1, 0);
	CHECK_EQ(io_fault_held(f), 16);
	CHECK_EQ(ctr(f, IO_FAULT_C_drop_pool_full), 84);
	struct io_pkt big = {.buf = b[0], .len = 300};
	io_fault_send(f, NULL, &big, 1, 0);
	CHECK_EQ(ctr(f, IO_FAULT_C_drop_too_big), 1);
	CHECK_EQ(io_fault_flush(f, NULL, 2000000), 16);
	CHECK_EQ(nlog, 16);
	io_fault_destroy(f);
}

static uint64_t log_hash(void)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < nlog; i++) {
		h = (h ^ log_[i].seq) * 1099511628211ull;
		h = (h ^ log_[i].bitdiff) * 1099511628211ull;
		h = (h ^ log_[i].at) * 1099511628211ull;
	}
	return h;
}

static void test_all_and_determinism(uint64_t seed)
{
	struct io_fault_cfg c;
	char err[128];
	REQUIRE(io_fault_parse("loss=2%,dup=1%,reorder=3%,corrupt=0.5%,delay=30us,jitter=10us", &c,
			       err, sizeof(err)) == 0);
	c.seed = seed;
	struct io_fault *f = run(&c, 1024, 1000);
	uint64_t h1 = log_hash();
	uint64_t in = ctr(f, IO_FAULT_C_in), out = ctr(f, IO_FAULT_C_out);
	uint64_t lost = ctr(f, IO_FAULT_C_lost), dups = ctr(f, IO_FAULT_C_duplicated);
	uint64_t drops = ctr(f, IO_FAULT_C_drop_pool_full) + ctr(f, IO_FAULT_C_drop_too_big);
	CHECK_EQ(in, N);
	CHECK_EQ(drops, 0);
	CHECK_EQ(out, in - lost + dups);
	CHECK_EQ(nlog, out);
	CHECK(near_binomial(lost, N, 0.02));
	CHECK(near_binomial(dups, N - lost, 0.01));
	CHECK(near_binomial(ctr(f, IO_FAULT_C_corrupted), N - lost, 0.005));
	/* every copy (original and duplicate) of a reordered packet is counted */
	CHECK(near_binomial(ctr(f, IO_FAULT_C_reordered), N - lost + dups, 0.03));
	io_fault_destroy(f);

	f = run(&c, 1024, 1000);
	CHECK(log_hash() == h1); /* same seed, same calls: same output */
	io_fault_destroy(f);
	c.seed = seed + 1;
	f = run(&c, 1024, 1000);
	CHECK(log_hash() != h1);
	io_fault_destroy(f);

	/* The UDP side ignores the TCP keys: same seed, same packets out. */
	c.seed = seed;
	c.tcp_reset = 100;
	c.tcp_chunk = 1;
	c.tcp_rx_chunk = 3;
	f = run(&c, 1024, 1000);
	CHECK(log_hash() == h1);
	io_fault_destroy(f);
	struct io_fault_cfg t = {.seed = 1, .tcp_reset = 1, .tcp_chunk = 1, .tcp_rx_chunk = 1};
	f = run(&t, 64, 1000);
	CHECK_EQ(nlog, N);
	size_t bad = 0;
	for (size_t i = 0; i < nlog; i++)
		bad += log_[i].seq != i || log_[i].bitdiff != 0;
	CHECK_EQ(bad, 0);
	CHECK_EQ(ctr(f, IO_FAULT_C_out), N);
	io_fault_destroy(f);
}

/* The ce key: ECN-capable packets leave marked CE with its probability, others untouched, the
 * caller's descriptors never changed; parsed and formatted (only when set). */
static uint32_t tos_seen[4], tos_bad;

static int tos_sink(void *ctx, const struct io_pkt *pkts, int n)
{
	(void)ctx;
	for (int i = 0; i < n; i++) {
		/* byte 0 holds the TOS the packet was offered with */
		uint8_t offered = pkts[i].buf[0];
		if ((pkts[i].tos & 0xFC) != (offered & 0xFC) ||
		    ((offered & 3) == 0 && pkts[i].tos != offered) ||
		    ((offered & 3) == 3 && pkts[i].tos != offered))
			tos_bad++;
		tos_seen[pkts[i].tos & 3]++;
	}
	return n;
}

static void test_ce(void)
{
	struct io_fault_cfg c;
	char err[200], spec[256];
	CHECK_EQ(io_fault_parse("ce=30%,seed=5", &c, err, sizeof(err)), 0);
	CHECK(absd(c.ce - 0.3) < 1e-12);
	io_fault_format(&c, spec, sizeof(spec));
	CHECK(strstr(spec, ",ce=30%") != NULL);
	CHECK_EQ(io_fault_parse("ce=2", &c, err, sizeof(err)), -EINVAL);
	for (int round = 0; round < 2; round++) {
		double p = round ? 1.0 : 0.3;
		struct io_fault_cfg cfg = {.ce = p, .seed = 5};
		struct io_fault *f;
		static uint8_t bufs[4000][8];
		struct io_pkt pk;
		memset(tos_seen, 0, sizeof(tos_seen));
		tos_bad = 0;
		REQUIRE(io_fault_create(&cfg, 16, 64, &f) == 0);
		io_fault_set_sink(f, tos_sink, NULL);
		uint32_t ect = 0;
		for (int i = 0; i < 4000; i++) {
			/* not ECT, ECT(0), ECT(1), CE, in turn, over DSCP 26 */
			uint8_t tos = (uint8_t)(0x68 | (i & 3));
			bufs[i][0] = tos;
			ect += (i & 3) == 1 || (i & 3) == 2;
			pk = (struct io_pkt){.buf = bufs[i], .cap = 8, .len = 8, .tos = tos};
			CHECK_EQ(io_fault_send(f, NULL, &pk, 1, 1000), 1);
			CHECK_EQ(pk.tos, tos); /* the caller's descriptor as it was */
		}
		uint32_t marked = tos_seen[3] - 1000; /* the 1,000 offered as CE */
		CHECK_EQ(tos_bad, 0);
		CHECK_EQ(tos_seen[0], 1000);
		CHECK_EQ(ctr(f, IO_FAULT_C_ce_marked), marked);
		CHECK(absd((double)marked / ect - p) < 0.04);
		io_fault_destroy(f);
	}
}

int main(void)
{
	uint64_t seed = check_seed(42);
	test_parse_good();
	test_parse_bad();
	test_parse_tcp();
	test_passthrough();
	test_loss();
	test_dup();
	test_corrupt();
	test_reorder();
	test_delay();
	test_reorder_deadline_and_pool();
	test_all_and_determinism(seed);
	test_ce();
	for (int i = 0; i < IO_FAULT_NCOUNTERS; i++)
		CHECK(io_fault_counter_name(i) != NULL);
	free(log_);
	return check_exit();
}
