/* Latency/bandwidth statistics and perftest-style report lines: see stats.h. */
#include "util/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* ---- small numeric helpers (no libm) ---- */

static bool is_finite(double x)
{
	return x == x && x - x == 0.0; /* false for NaN and +-inf */
}

/* IEEE square root, correctly rounded; x >= 0. */
static double sqrt_d(double x)
{
	if (!(x > 0.0))
		return 0.0;
#if defined(__SSE2__)
	return _mm_cvtsd_f64(_mm_sqrt_sd(_mm_setzero_pd(), _mm_set_sd(x)));
#else
	/* Portable fallback: Newton's iteration from a bit-level first guess, then a last
	 * correction to the closer neighbour. */
	double y;
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	bits = (bits >> 1) + (UINT64_C(1023) << 51);
	memcpy(&y, &bits, sizeof y);
	for (int i = 0; i < 60; i++) {
		double next = 0.5 * (y + x / y);
		if (next == y)
			break;
		y = next;
	}
	return y;
#endif
}

/* ceil for 0 <= x < 2^63 (the only range used here). */
static uint64_t ceil_u64(double x)
{
	if (!(x > 0.0))
		return 0;
	uint64_t t = (uint64_t)x;
	return (double)t < x ? t + 1 : t;
}

/* Truncation toward zero into int, clamped to the int range (perftest's `int temp_var = ...`,
 * without the undefined behaviour of an out-of-range conversion). */
static int64_t trunc_to_int(double x)
{
	if (x != x)
		return 0;
	if (x >= 2147483647.0)
		return 2147483647;
	if (x <= -2147483648.0)
		return -2147483647 - 1;
	return (int64_t)x;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* ---- collection ---- */

int stats_init(struct stats *s, double *buf, size_t cap)
{
	if (!s || (!buf && cap > 0))
		return -EINVAL;
	memset(s, 0, sizeof *s);
	s->buf = buf;
	s->cap = cap;
	return 0;
}

void stats_reset(struct stats *s)
{
	s->n = 0;
	s->sorted = false;
	s->min = s->max = s->mean = s->m2 = 0.0;
}

int stats_add(struct stats *s, double ns)
{
	if (!is_finite(ns) || ns < 0.0)
		return -EINVAL;
	if (ns == 0.0)
		ns = 0.0; /* not -0.0: its sign bit would sort it last (sort_samples) */
	if (s->n >= s->cap)
		return -ENOSPC;
	s->buf[s->n++] = ns;
	s->sorted = false;
	if (s->n == 1) {
		s->min = s->max = s->mean = ns;
		s->m2 = 0.0;
		return 0;
	}
	if (ns < s->min)
		s->min = ns;
	if (ns > s->max)
		s->max = ns;
	/* Welford: numerically stable running mean and sum of squared deviations. */
	double delta = ns - s->mean;
	s->mean += delta / (double)s->n;
	s->m2 += delta * (ns - s->mean);
	return 0;
}

/* Sorts n samples (finite, >= 0, never -0.0: stats_add): a radix sort on their bits, which
 * for such doubles order as the numbers do (sign 0, then exponent, then mantissa), in passes
 * of RADIX_BITS, skipping a pass where every sample has the same digit (the high bits of
 * samples of one magnitude). About 100 instructions per sample under callgrind against
 * qsort's 300-350 for 4,000 samples: `softrdma lat` and the floors sort every round trip's
 * time (bench/callgrind.sh subtracts that; a plain callgrind run of them does not). qsort
 * for few samples, or when there is no memory for the second buffer. */
#define RADIX_BITS   11
#define RADIX_PASSES ((64 + RADIX_BITS - 1) / RADIX_BITS)
#define RADIX_MIN    256

static void sort_samples(double *v, size_t n)
{
	uint64_t *tmp = n >= RADIX_MIN ? malloc(n * sizeof *tmp) : NULL;
	size_t(*count)[1u << RADIX_BITS] = tmp ? calloc(RADIX_PASSES, sizeof *count) : NULL;
	if (!count) {
		free(tmp);
		qsort(v, n, sizeof *v, cmp_double);
		return;
	}
	uint64_t *a = (uint64_t *)(void *)v, *b = tmp; /* the same bits, read as integers */
	const uint64_t mask = (1u << RADIX_BITS) - 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t k;
		memcpy(&k, &v[i], sizeof k);
		for (int p = 0; p < RADIX_PASSES; p++)
			count[p][(k >> (p * RADIX_BITS)) & mask]++;
	}
	for (int p = 0; p < RADIX_PASSES; p++) {
		int shift = p * RADIX_BITS;
		uint64_t k0;
		memcpy(&k0, a, sizeof k0);
		if (count[p][(k0 >> shift) & mask] == n)
			continue; /* one digit for all: the order stays */
		size_t pos = 0;
		for (size_t d = 0; d <= mask; d++) {
			size_t c = count[p][d];
			count[p][d] = pos;
			pos += c;
		}
		for (size_t i = 0; i < n; i++) {
			uint64_t k;
			memcpy(&k, &a[i], sizeof k);
			memcpy(&b[count[p][(k >> shift) & mask]++], &k, sizeof k);
		}
		uint64_t *t = a;
		a = b;
		b = t;
	}
	if (a != (uint64_t *)(void *)v)
		memcpy(v, a, n * sizeof *v);
	free(count);
	free(tmp);
}

int stats_finalize(struct stats *s)
{
	if (s->n == 0)
		return -ENODATA;
	if (!s->sorted)
		sort_samples(s->buf, s->n);
	s->sorted = true;
	return 0;
}

size_t stats_count(const struct stats *s)
{
	return s->n;
}

double stats_min(const struct stats *s)
{
	return s->n ? s->min : 0.0;
}

double stats_max(const struct stats *s)
{
	return s->n ? s->max : 0.0;
}

double stats_mean(const struct stats *s)
{
	return s->n ? s->mean : 0.0;
}

double stats_stdev(const struct stats *s)
{
	if (s->n < 2)
		return 0.0;
	return sqrt_d(s->m2 / (double)(s->n - 1));
}

double stats_stdev_population(const struct stats *s)
{
	if (s->n < 1)
		return 0.0;
	return sqrt_d(s->m2 / (double)s->n);
}

static int order_check(const struct stats *s)
{
	if (s->n == 0)
		return -ENODATA;
	if (!s->sorted)
		return -EINVAL;
	return 0;
}

int stats_median(const struct stats *s, double *out)
{
	int err = order_check(s);
	if (err)
		return err;
	size_t h = s->n / 2;
	if (s->n % 2)
		*out = s->buf[h];
	else
		*out = s->buf[h - 1] + (s->buf[h] - s->buf[h - 1]) / 2.0; /* no overflow */
	return 0;
}

int stats_percentile(const struct stats *s, double p, double *out)
{
	if (!(p >= 0.0 && p <= 100.0))
		return -EINVAL;
	int err = order_check(s);
	if (err)
		return err;
	double x = p * (double)s->n / 100.0;
	uint64_t r = (uint64_t)x; /* floor: x >= 0 */
	if (x - (double)r > 1e-9 * x)
		r++; /* a genuine fraction: round the rank up */
	if (r < 1)
		r = 1;
	if (r > s->n)
		r = s->n;
	*out = s->buf[r - 1];
	return 0;
}

int stats_jitter(const struct stats *s, double *out)
{
	double p50, p99;
	int err = stats_percentile(s, 50.0, &p50);
	if (err)
		return err;
	stats_percentile(s, 99.0, &p99);
	*out = p99 - p50;
	return 0;
}

/* ---- histogram ---- */

unsigned stats_hist_bucket(double ns)
{
	if (!(ns >= 1.0))
		return 0;
	if (ns >= 4611686018427387904.0) /* 2^62 */
		return STATS_HIST_BUCKETS - 1;
	uint64_t u = (uint64_t)ns; /* floor; bucket bounds are integers */
	return (unsigned)(64 - __builtin_clzll(u));
}

int stats_hist_bounds(unsigned k, double *lo, double *hi)
{
	if (k >= STATS_HIST_BUCKETS)
		return -EINVAL;
	if (k == 0) {
		*lo = 0.0;
		*hi = 1.0;
		return 0;
	}
	*lo = (double)(UINT64_C(1) << (k - 1));
	*hi = k == STATS_HIST_BUCKETS - 1 ? __builtin_inf() : (double)(UINT64_C(1) << k);
	return 0;
}

void stats_hist_build(const struct stats *s, struct stats_hist *h)
{
	memset(h, 0, sizeof *h);
	for (size_t i = 0; i < s->n; i++)
		h->count[stats_hist_bucket(s->buf[i])]++;
	h->total = s->n;
}

/* ---- bounded text output ---- */

struct out {
	char *buf;
	size_t len;
	size_t pos; /* characters that would have been written */
};

__attribute__((format(printf, 2, 3))) static void outf(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->pos < o->len ? o->len - o->pos : 0;
	int n = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->pos += (size_t)n;
}

static int out_done(const struct out *o)
{
	if (o->pos >= o->len)
		return -ENOSPC; /* vsnprintf has left a NUL-terminated prefix */
	return (int)o->pos;
}

static bool out_start(struct out *o, char *buf, size_t len)
{
	if (!buf || len == 0 || len > (size_t)INT32_MAX)
		return false;
	o->buf = buf;
	o->len = len;
	o->pos = 0;
	buf[0] = '\0';
	return true;
}

int stats_hist_format(const struct stats_hist *h, char *buf, size_t len)
{
	struct out o;
	if (!h || !out_start(&o, buf, len))
		return -EINVAL;
	if (h->total == 0) {
		outf(&o, "(no samples)\n");
		return out_done(&o);
	}
	uint64_t most = 0;
	for (unsigned k = 0; k < STATS_HIST_BUCKETS; k++)
		if (h->count[k] > most)
			most = h->count[k];
	for (unsigned k = 0; k < STATS_HIST_BUCKETS; k++) {
		uint64_t c = h->count[k];
		if (c == 0)
			continue;
		double lo, hi;
		stats_hist_bounds(k, &lo, &hi);
		if (k == STATS_HIST_BUCKETS - 1)
			outf(&o, "[%12.0f, %12s) ns", lo, "inf");
		else
			outf(&o, "[%12.0f, %12.0f) ns", lo, hi);
		unsigned bar = (unsigned)((double)c * 40.0 / (double)most);
		if (bar == 0)
			bar = 1;
		outf(&o, " %10llu %6.2f%% %.*s\n", (unsigned long long)c,
		     100.0 * (double)c / (double)h->total, (int)bar,
		     "########################################");
	}
	return out_done(&o);
}

/* ---- latency reports ---- */

int stats_lat_report(const struct stats *s, uint64_t bytes, uint64_t iters,
		     struct stats_lat_report *out)
{
	double med, p99, p999;
	int err = stats_median(s, &med);
	if (err)
		return err;
	stats_percentile(s, 99.0, &p99);
	stats_percentile(s, 99.9, &p999);
	out->bytes = bytes;
	out->iters = iters;
	out->t_min_us = s->min / 1000.0;
	out->t_max_us = s->max / 1000.0;
	out->t_typical_us = med / 1000.0;
	out->t_avg_us = s->mean / 1000.0;
	out->t_stdev_us = stats_stdev(s) / 1000.0;
	out->p99_us = p99 / 1000.0;
	out->p999_us = p999 / 1000.0;
	return 0;
}

#define PERFTEST_LAT_MEASURE_TAIL 2

int stats_perftest_lat_deltas(uint64_t *deltas, size_t n_deltas, double ticks_per_us,
			      unsigned rtt_factor, uint64_t bytes, uint64_t iters,
			      struct stats_lat_report *out)
{
	if (!deltas || !out || n_deltas < PERFTEST_LAT_MEASURE_TAIL + 1 ||
	    !is_finite(ticks_per_us) || !(ticks_per_us > 0.0) || rtt_factor == 0)
		return -EINVAL;
	uint64_t *d = deltas;
	qsort(d, n_deltas, sizeof *d, cmp_u64);
	size_t m = n_deltas - PERFTEST_LAT_MEASURE_TAIL;
	double q = ticks_per_us * (double)rtt_factor; /* cycles_rtt_quotient */

	/* get_median(): integer mean of the two middle ones for even m, truncated to a tick.
	 * floor((a + b) / 2) without the 64-bit overflow of a + b. */
	uint64_t median;
	if ((m - 1) % 2) {
		uint64_t a = d[m / 2], b = d[m / 2 - 1];
		median = a / 2 + b / 2 + (a % 2 + b % 2) / 2;
	} else {
		median = d[m / 2];
	}

	double average_sum = 0.0;
	for (size_t i = 0; i < m; i++)
		average_sum += (double)d[i] / q;
	double average = average_sum / (double)m;

	double stdev_sum = 0.0;
	for (size_t i = 0; i < m; i++) {
		int64_t temp_var = trunc_to_int(average - (double)d[i] / q);
		stdev_sum += (double)(temp_var * temp_var);
	}

	size_t iters_99 = (size_t)ceil_u64((double)m * 0.99);
	size_t iters_99_9 = (size_t)ceil_u64((double)m * 0.999);

	out->bytes = bytes;
	out->iters = iters;
	out->t_min_us = (double)d[0] / q;
	out->t_max_us = (double)d[m] / q;
	out->t_typical_us = (double)median / q;
	out->t_avg_us = average;
	out->t_stdev_us = sqrt_d(stdev_sum / (double)m);
	out->p99_us = (double)d[iters_99] / q;
	out->p999_us = (double)d[iters_99_9] / q;
	return 0;
}

int stats_perftest_lat_tstamps(uint64_t *tstamps, size_t n_stamps, double ticks_per_us,
			       unsigned rtt_factor, uint64_t bytes, struct stats_lat_report *out)
{
	if (!tstamps || n_stamps < PERFTEST_LAT_MEASURE_TAIL + 2)
		return -EINVAL;
	for (size_t i = 0; i + 1 < n_stamps; i++)
		if (tstamps[i + 1] < tstamps[i])
			return -EINVAL;
	for (size_t i = 0; i + 1 < n_stamps; i++)
		tstamps[i] = tstamps[i + 1] - tstamps[i];
	return stats_perftest_lat_deltas(tstamps, n_stamps - 1, ticks_per_us, rtt_factor, bytes,
					 n_stamps, out);
}

int stats_format_lat_header(char *buf, size_t len)
{
	struct out o;
	if (!out_start(&o, buf, len))
		return -EINVAL;
	outf(&o, "%s",
	     " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
	     "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
	return out_done(&o);
}

int stats_format_lat_line(const struct stats_lat_report *r, char *buf, size_t len)
{
	struct out o;
	if (!r || !out_start(&o, buf, len))
		return -EINVAL;
	/* perftest REPORT_FMT_LAT, field for field. */
	outf(&o,
	     " %-7llu %llu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f"
	     "\t\t%-7.2f \t\t%-7.2f",
	     (unsigned long long)r->bytes, (unsigned long long)r->iters, r->t_min_us, r->t_max_us,
	     r->t_typical_us, r->t_avg_us, r->t_stdev_us, r->p99_us, r->p999_us);
	return out_done(&o);
}

static void json_num(struct out *o, const char *key, double v, int prec, bool last)
{
	if (is_finite(v))
		outf(o, "\"%s\": %.*f%s", key, prec, v, last ? "" : ", ");
	else
		outf(o, "\"%s\": null%s", key, last ? "" : ", ");
}

int stats_format_lat_json(const struct stats_lat_report *r, char *buf, size_t len)
{
	struct out o;
	if (!r || !out_start(&o, buf, len))
		return -EINVAL;
	outf(&o, "{\"MsgSize\": %llu, \"n_iterations\": %llu, ", (unsigned long long)r->bytes,
	     (unsigned long long)r->iters);
	json_num(&o, "t_min", r->t_min_us, 2, false);
	json_num(&o, "t_max", r->t_max_us, 2, false);
	json_num(&o, "t_typical", r->t_typical_us, 2, false);
	json_num(&o, "t_avg", r->t_avg_us, 2, false);
	json_num(&o, "t_stdev", r->t_stdev_us, 2, false);
	json_num(&o, "percentile_99", r->p99_us, 2, false);
	json_num(&o, "percentile_99.9", r->p999_us, 2, true);
	outf(&o, "}");
	return out_done(&o);
}

/* ---- bandwidth reports ---- */

int stats_bw_report(uint64_t bytes, uint64_t iters, double elapsed_ns, double best_ns, bool gbits,
		    struct stats_bw_report *r)
{
	if (!r || !is_finite(elapsed_ns) || !(elapsed_ns > 0.0) || !is_finite(best_ns) ||
	    best_ns < 0.0)
		return -EINVAL;
	/* perftest: format_factor = (report_fmt == MBS) ? 0x100000 : 125000000 */
	double factor = gbits ? 125000000.0 : 1048576.0;
	double ticks_per_s = 1e9; /* our "cycles_to_units": nanoseconds per second */
	r->bytes = bytes;
	r->iters = iters;
	r->gbits = gbits;
	r->bw_avg = ((double)bytes * (double)iters * ticks_per_s) / (elapsed_ns * factor);
	r->msg_rate = ((double)iters * ticks_per_s) / (elapsed_ns * 1000000.0);
	r->bw_peak = best_ns > 0.0 ? ((double)bytes * ticks_per_s) / (best_ns * factor) : 0.0;
	return 0;
}

int stats_format_bw_header(bool gbits, char *buf, size_t len)
{
	struct out o;
	if (!out_start(&o, buf, len))
		return -EINVAL;
	if (gbits)
		outf(&o, "%s",
		     " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
		     "MsgRate[Mpps]");
	else
		outf(&o, "%s",
		     " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   "
		     "MsgRate[Mpps]");
	return out_done(&o);
}

/* perftest: inc_accuracy = ((bw_avg < 0.1) && (report_fmt == GBS)) */
static bool bw_inc_accuracy(const struct stats_bw_report *r)
{
	return r->gbits && r->bw_avg < 0.1;
}

int stats_format_bw_line(const struct stats_bw_report *r, char *buf, size_t len)
{
	struct out o;
	if (!r || !out_start(&o, buf, len))
		return -EINVAL;
	if (bw_inc_accuracy(r)) /* REPORT_FMT_EXT */
		outf(&o, " %-7llu    %llu           %-7.6f            %-7.6f            %-7.6f",
		     (unsigned long long)r->bytes, (unsigned long long)r->iters, r->bw_peak,
		     r->bw_avg, r->msg_rate);
	else /* REPORT_FMT */
		outf(&o, " %-7llu    %-10llu       %-7.2f            %-7.2f\t\t   %-7.6f",
		     (unsigned long long)r->bytes, (unsigned long long)r->iters, r->bw_peak,
		     r->bw_avg, r->msg_rate);
	return out_done(&o);
}

int stats_format_bw_json(const struct stats_bw_report *r, char *buf, size_t len)
{
	struct out o;
	if (!r || !out_start(&o, buf, len))
		return -EINVAL;
	int prec = bw_inc_accuracy(r) ? 6 : 2;
	outf(&o, "{\"MsgSize\": %llu, \"n_iterations\": %llu, ", (unsigned long long)r->bytes,
	     (unsigned long long)r->iters);
	json_num(&o, "BW_peak", r->bw_peak, prec, false);
	json_num(&o, "BW_average", r->bw_avg, prec, false);
	json_num(&o, "MsgRate", r->msg_rate, 6, false);
	outf(&o, "\"unit\": \"%s\"}", r->gbits ? "Gb/sec" : "MiB/sec");
	return out_done(&o);
}
