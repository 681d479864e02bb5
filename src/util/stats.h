/* Latency and bandwidth statistics for the `softrdma lat` / `softrdma bw` tools, and their
 * perftest-style report lines.
 *
 * struct stats collects samples in nanoseconds (double) into a buffer the caller owns and sizes
 * once (stats_init); adding a sample never allocates. Running min, max, mean and variance are
 * kept with Welford's method in double, so they are exact to rounding for any order and any
 * magnitude and are available at any time. Order statistics (median, percentiles, jitter,
 * histogram) need stats_finalize(), which sorts the buffer in place (qsort: no allocation).
 *
 * Two ways to turn samples into the perftest latency columns:
 *   - native (stats_lat_report): every sample counts; t_typical is the median; t_stdev the
 *     sample standard deviation (n - 1); percentiles are nearest-rank (below).
 *   - perftest compatible (stats_perftest_lat*): reproduces print_report_lat() of perftest
 *     (linux-rdma/perftest src/perftest_parameters.c) step by step, including its quirks; see
 *     the comment above stats_perftest_lat_deltas.
 *
 * Formatting functions write into a caller buffer with snprintf semantics and return the length
 * written (without the NUL), -EINVAL for bad arguments or -ENOSPC if the buffer is too small (the
 * buffer then holds a NUL-terminated prefix). Nothing here prints, allocates or keeps global
 * state; a struct stats is not thread-safe, distinct ones are independent. No libm needed. */
#ifndef SOFTRDMA_UTIL_STATS_H
#define SOFTRDMA_UTIL_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct stats {
	double *buf;	 /* caller-owned, cap entries */
	size_t cap;	 /* capacity of buf */
	size_t n;	 /* samples added */
	bool sorted;	 /* buf[0..n) ascending (stats_finalize since the last add) */
	double min, max; /* running extremes (valid when n > 0) */
	double mean;	 /* Welford running mean */
	double m2;	 /* Welford running sum of squared deviations from the mean */
};

/* Uses buf[0..cap) for samples. -EINVAL if s is NULL, or buf is NULL while cap > 0. */
int stats_init(struct stats *s, double *buf, size_t cap);
/* Forgets all samples, keeps the buffer. */
void stats_reset(struct stats *s);
/* Adds one sample (ns). -ENOSPC when the buffer is full; -EINVAL for NaN, infinity or a
 * negative value (a latency is never negative). */
int stats_add(struct stats *s, double ns);
/* Sorts the samples ascending so the order statistics below can be read. -ENODATA if empty. */
int stats_finalize(struct stats *s);

size_t stats_count(const struct stats *s);
/* The following return 0.0 when there are no samples. */
double stats_min(const struct stats *s);
double stats_max(const struct stats *s);
double stats_mean(const struct stats *s);
/* Sample standard deviation sqrt(sum((x - mean)^2) / (n - 1)), from Welford's running sums in
 * double (no truncation). 0.0 for fewer than two samples. */
double stats_stdev(const struct stats *s);
/* Population standard deviation sqrt(sum((x - mean)^2) / n). 0.0 when empty. */
double stats_stdev_population(const struct stats *s);

/* Median of the sorted samples: the middle one for odd n, the mean of the two middle ones for
 * even n. -ENODATA if empty, -EINVAL if not finalized. */
int stats_median(const struct stats *s, double *out);
/* Nearest-rank percentile: with the samples sorted x[1] <= ... <= x[n] and 0 < p <= 100, the
 * result is x[r] with r = ceil(p / 100 * n) (the smallest sample such that at least p% of the
 * samples are <= it); p = 0 gives x[1]. r is computed as ceil(p * n / 100) in double, a value
 * within 1e-9 (relative) of an integer counting as that integer, so p = 99, n = 100 gives
 * exactly rank 99. Never interpolates: the result is always one of the samples.
 * -EINVAL for p outside [0, 100] or NaN or if not finalized, -ENODATA if empty. */
int stats_percentile(const struct stats *s, double p, double *out);
/* Jitter as the spread of the bulk: p99 - p50, both nearest-rank. Same errors as above. The
 * other common jitter figure is the standard deviation: stats_stdev(). */
int stats_jitter(const struct stats *s, double *out);

/* ---- Histogram with logarithmic (power-of-two) buckets ----
 * Bucket 0 holds [0, 1) ns; bucket k, 1 <= k < STATS_HIST_BUCKETS - 1, holds [2^(k-1), 2^k) ns;
 * the last bucket (k = 63) holds [2^62, +inf) ns. So 1 ns -> bucket 1, 2..3 ns -> 2, 1000 ns ->
 * bucket 10 ([512, 1024)), 1 s = 1e9 ns -> bucket 30 ([2^29, 2^30)). */
#define STATS_HIST_BUCKETS 64

struct stats_hist {
	uint64_t count[STATS_HIST_BUCKETS];
	uint64_t total;
};

/* The bucket index for a sample of `ns` nanoseconds (negative or NaN count as 0). */
unsigned stats_hist_bucket(double ns);
/* Bucket k's bounds [lo, hi) in ns; hi is +infinity for the last bucket. -EINVAL if k is out of
 * range. */
int stats_hist_bounds(unsigned k, double *lo, double *hi);
/* Counts every sample of s (finalized or not) into h (cleared first). */
void stats_hist_build(const struct stats *s, struct stats_hist *h);
/* Text rendering, one line per non-empty bucket, lowest first, each
 *   "[%12.0f, %12.0f) ns %10llu %6.2f%% <bar>\n"  (hi printed as "inf" for the last bucket)
 * where the bar is up to 40 '#' scaled to the fullest bucket (at least one '#' for a non-empty
 * bucket). An empty histogram renders as "(no samples)\n". */
int stats_hist_format(const struct stats_hist *h, char *buf, size_t len);

/* ---- perftest latency report ---- */

/* One latency table row; times in microseconds. */
struct stats_lat_report {
	uint64_t bytes;	     /* message size (#bytes) */
	uint64_t iters;	     /* #iterations as perftest prints it (the -n value) */
	double t_min_us;     /* t_min[usec] */
	double t_max_us;     /* t_max[usec] */
	double t_typical_us; /* t_typical[usec]: the median */
	double t_avg_us;     /* t_avg[usec] */
	double t_stdev_us;   /* t_stdev[usec] */
	double p99_us;	     /* 99% percentile[usec] */
	double p999_us;	     /* 99.9% percentile[usec] */
};

/* Native report from finalized samples (ns): min, max, median, mean, sample stdev, nearest-rank
 * p99 and p99.9, all divided by 1000; bytes and iters are copied. -ENODATA if empty, -EINVAL if
 * not finalized. */
int stats_lat_report(const struct stats *s, uint64_t bytes, uint64_t iters,
		     struct stats_lat_report *out);

/* perftest-compatible report, reproducing print_report_lat() for the latency tests
 * (linux-rdma/perftest src/perftest_parameters.c, read in a 2025 mirror of upstream; 4.x-era
 * forks have the same steps) from raw time-stamp deltas. perftest counts CPU cycles; with
 * nanosecond ticks (ticks_per_us = 1000) the one truncation below is to 1 ns instead:
 *   1. the deltas are sorted ascending (qsort on integer ticks);
 *   2. the LAT_MEASURE_TAIL = 2 largest are dropped: m = n_deltas - 2;
 *   3. every figure is divided by q = ticks_per_us * rtt_factor (perftest: cycles_to_units =
 *      CPU MHz, rtt_factor = 2 for send/write "half round trip", 1 for read/atomic);
 *   4. t_min = d[0] / q; t_max = d[m] / q: the first *dropped* delta, i.e. the third largest
 *      of all, not the largest kept one;
 *   5. t_typical = get_median(m, d) / q, where get_median takes, for even m, the integer mean
 *      (d[m/2 - 1] + d[m/2]) / 2 truncated to a whole tick, and for odd m d[m/2];
 *   6. t_avg = (sum over i < m of d[i] / q) / m;
 *   7. t_stdev = sqrt(S / m) (population, not n - 1), where S sums, over i < m, the square of
 *      the deviation t_avg - d[i] / q truncated toward zero to an int: deviations below one
 *      microsecond count as zero (perftest's `int temp_var`). We square that integer exactly in
 *      64 bits; perftest's `int pow_var = pow(temp_var, 2)` overflows for deviations above
 *      46340 us, which we do not reproduce;
 *   8. 99% = d[ceil(m * 0.99)] / q and 99.9% = d[ceil(m * 0.999)] / q (indices into the full
 *      sorted array, so they can reach the dropped tail; ceil in double as perftest does).
 * Requires n_deltas >= 3 (m >= 1); -EINVAL otherwise or for ticks_per_us <= 0 or rtt_factor
 * == 0. `deltas` is sorted in place. */
int stats_perftest_lat_deltas(uint64_t *deltas, size_t n_deltas, double ticks_per_us,
			      unsigned rtt_factor, uint64_t bytes, uint64_t iters,
			      struct stats_lat_report *out);
/* The same from the per-iteration post time stamps, as perftest's ping-pong latency tests
 * (ib_send_lat, ib_write_lat, ib_read_lat, ib_atomic_lat) record them: tposted[i] is taken just
 * before iteration i's post, so iteration i lasted delta[i] = tposted[i + 1] - tposted[i]
 * (n_stamps - 1 deltas: perftest's measure_cnt = iters - 1), one full round trip for send and
 * write. #iterations is reported as n_stamps. The deltas overwrite tstamps[0..n_stamps-1) (no
 * allocation); time stamps must not decrease (-EINVAL otherwise). Requires n_stamps >= 4.
 * (perftest's LAT_BY_BW mode, delta = tcompleted[i] - tposted[i], is stats_perftest_lat_deltas
 * on those differences.) */
int stats_perftest_lat_tstamps(uint64_t *tstamps, size_t n_stamps, double ticks_per_us,
			       unsigned rtt_factor, uint64_t bytes, struct stats_lat_report *out);

/* perftest's latency header (RESULT_FMT_LAT), exactly, without a newline:
 * " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
 * "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] " */
int stats_format_lat_header(char *buf, size_t len);
/* One row in perftest's REPORT_FMT_LAT layout (same fields, widths, precision (%.2f), spaces
 * and tabs), without the trailing newline perftest prints separately. */
int stats_format_lat_line(const struct stats_lat_report *r, char *buf, size_t len);
/* A one-line JSON object with perftest's --out_json keys (REPORT_FMT_LAT_JSON) and precision:
 * {"MsgSize": 2, "n_iterations": 1000, "t_min": 1.00, "t_max": 5.00, "t_typical": 2.00,
 *  "t_avg": 2.00, "t_stdev": 0.63, "percentile_99": 5.00, "percentile_99.9": 5.00}
 * A non-finite figure is written as null. */
int stats_format_lat_json(const struct stats_lat_report *r, char *buf, size_t len);

/* ---- perftest bandwidth report ---- */

struct stats_bw_report {
	uint64_t bytes;	 /* message size */
	uint64_t iters;	 /* messages completed */
	double bw_peak;	 /* MiB/s (2^20 bytes/s), or Gb/s (10^9 bit/s) with gbits */
	double bw_avg;	 /* same unit */
	double msg_rate; /* Mpps (10^6 messages/s) */
	bool gbits;	 /* units of bw_*: false MiB/sec, true Gb/sec (perftest --report_gbits) */
};

/* Fills r as perftest's print_report_bw does, from nanoseconds instead of cycles:
 *   bw_avg   = bytes * iters / elapsed / F,     F = 2^20 (MiB) or 125000000 (Gb: 10^9 / 8)
 *   msg_rate = iters / elapsed / 10^6
 *   bw_peak  = bytes / best / F, `best` the shortest per-message time perftest finds over
 *              windows of the run (pass 0 to get 0, perftest's --run_infinitely/noPeak case)
 * with elapsed the time from the first post to the last completion. -EINVAL if elapsed_ns <= 0
 * or best_ns < 0 or either is not finite. */
int stats_bw_report(uint64_t bytes, uint64_t iters, double elapsed_ns, double best_ns, bool gbits,
		    struct stats_bw_report *r);
/* perftest 4.5's RESULT_FMT / RESULT_FMT_G header without a newline:
 * " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]" (or
 * [Gb/sec]). Newer perftest appends a "BW min" column, which we do not have. */
int stats_format_bw_header(bool gbits, char *buf, size_t len);
/* One row in perftest's REPORT_FMT layout (%.2f, %.2f, %.6f), or REPORT_FMT_EXT (%.6f for all
 * three) when perftest would use it: Gb/sec with an average below 0.1. No trailing newline. */
int stats_format_bw_line(const struct stats_bw_report *r, char *buf, size_t len);
/* {"MsgSize": 65536, "n_iterations": 5000, "BW_peak": 1.00, "BW_average": 1.00,
 *  "MsgRate": 0.000016, "unit": "MiB/sec"} (keys and precision of perftest's REPORT_FMT_JSON /
 *  REPORT_FMT_EXT_JSON; "unit" is ours, "Gb/sec" with gbits). */
int stats_format_bw_json(const struct stats_bw_report *r, char *buf, size_t len);

#endif
