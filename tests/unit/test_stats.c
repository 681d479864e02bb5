/* util/stats: hand-computed moments and order statistics (1..100, constant, one and two
 * samples, unsorted, huge and tiny magnitudes), error returns, the power-of-two histogram, the
 * perftest-compatible latency report on hand-worked examples (tail drop, truncated median and
 * stdev, ceil-index percentiles), and the exact perftest table lines and JSON objects. */
#include "check.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/stats.h"

static int near(double a, double b, double tol)
{
	double d = a - b;
	if (d < 0)
		d = -d;
	return d <= tol;
}

/* Value of "key": in a JSON object text, parsed back with strtod; NaN if absent. */
static double json_get(const char *json, const char *key)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	const char *p = strstr(json, pat);
	if (!p)
		return __builtin_nan("");
	return strtod(p + strlen(pat), NULL);
}

static void test_one_to_hundred(void)
{
	double buf[100];
	struct stats s;
	REQUIRE(stats_init(&s, buf, 100) == 0);
	/* Added in a scrambled order: 37 is coprime with 100. */
	for (int i = 0; i < 100; i++)
		REQUIRE(stats_add(&s, (double)((i * 37) % 100 + 1)) == 0);
	CHECK_EQ(stats_count(&s), 100);
	CHECK(stats_min(&s) == 1.0);
	CHECK(stats_max(&s) == 100.0);
	CHECK(near(stats_mean(&s), 50.5, 1e-12));
	/* sum (i - 50.5)^2 = 100 * (100^2 - 1) / 12 = 83325; / 99 = 841.666...; sqrt
	 * = 29.0114919... */
	CHECK(near(stats_stdev(&s), 29.011491975882016, 1e-12));
	CHECK(near(stats_stdev_population(&s), 28.86607004772212, 1e-12)); /* sqrt(833.25) */

	double v;
	CHECK_EQ(stats_median(&s, &v), -EINVAL); /* not finalized yet */
	REQUIRE(stats_finalize(&s) == 0);
	for (int i = 0; i < 100; i++)
		CHECK(buf[i] == (double)(i + 1));
	CHECK(stats_median(&s, &v) == 0 && v == 50.5);
	CHECK(stats_percentile(&s, 99.0, &v) == 0 && v == 99.0);
	CHECK(stats_percentile(&s, 99.9, &v) == 0 && v == 100.0);
	CHECK(stats_percentile(&s, 50.0, &v) == 0 && v == 50.0);
	CHECK(stats_percentile(&s, 0.0, &v) == 0 && v == 1.0);
	CHECK(stats_percentile(&s, 1.0, &v) == 0 && v == 1.0);
	CHECK(stats_percentile(&s, 1.5, &v) == 0 && v == 2.0);
	CHECK(stats_percentile(&s, 100.0, &v) == 0 && v == 100.0);
	CHECK(stats_jitter(&s, &v) == 0 && v == 49.0); /* p99 - p50 = 99 - 50 */
	CHECK_EQ(stats_percentile(&s, 100.5, &v), -EINVAL);
	CHECK_EQ(stats_percentile(&s, -1.0, &v), -EINVAL);
	CHECK_EQ(stats_percentile(&s, __builtin_nan(""), &v), -EINVAL);

	/* A later add invalidates the order until the next finalize. */
	CHECK_EQ(stats_add(&s, 1.0), -ENOSPC);
	stats_reset(&s);
	CHECK_EQ(stats_count(&s), 0);
	CHECK_EQ(stats_finalize(&s), -ENODATA);
	CHECK_EQ(stats_median(&s, &v), -ENODATA);
	CHECK(stats_mean(&s) == 0.0 && stats_stdev(&s) == 0.0);
	REQUIRE(stats_add(&s, 3.0) == 0);
	REQUIRE(stats_finalize(&s) == 0);
	REQUIRE(stats_add(&s, 1.0) == 0);
	CHECK_EQ(stats_median(&s, &v), -EINVAL);
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(stats_median(&s, &v) == 0 && v == 2.0);
}

static void test_small_series(void)
{
	double buf[1000];
	struct stats s;
	double v;

	/* Constant: the deviation is exactly zero. */
	REQUIRE(stats_init(&s, buf, 1000) == 0);
	for (int i = 0; i < 1000; i++)
		REQUIRE(stats_add(&s, 7.5) == 0);
	CHECK(stats_stdev(&s) == 0.0);
	CHECK(stats_mean(&s) == 7.5);
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(stats_jitter(&s, &v) == 0 && v == 0.0);

	/* One sample. */
	REQUIRE(stats_init(&s, buf, 1000) == 0);
	REQUIRE(stats_add(&s, 1234.0) == 0);
	CHECK(stats_stdev(&s) == 0.0 && stats_stdev_population(&s) == 0.0);
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(stats_median(&s, &v) == 0 && v == 1234.0);
	CHECK(stats_percentile(&s, 99.0, &v) == 0 && v == 1234.0);
	CHECK(stats_percentile(&s, 0.0, &v) == 0 && v == 1234.0);

	/* Two samples: mean 15, sample variance ((-5)^2 + 5^2) / 1 = 50. */
	REQUIRE(stats_init(&s, buf, 1000) == 0);
	REQUIRE(stats_add(&s, 20.0) == 0);
	REQUIRE(stats_add(&s, 10.0) == 0);
	CHECK(stats_mean(&s) == 15.0);
	CHECK(near(stats_stdev(&s), 7.0710678118654755, 1e-14));
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(stats_median(&s, &v) == 0 && v == 15.0);
	CHECK(stats_percentile(&s, 50.0, &v) == 0 && v == 10.0);
	CHECK(stats_percentile(&s, 50.1, &v) == 0 && v == 20.0);
	CHECK(stats_percentile(&s, 99.0, &v) == 0 && v == 20.0);

	/* Unsorted: 5 3 9 1 7 -> mean 5, deviations^2 0 4 16 16 4, variance 40 / 4 = 10. */
	REQUIRE(stats_init(&s, buf, 1000) == 0);
	const double u[] = {5, 3, 9, 1, 7};
	for (int i = 0; i < 5; i++)
		REQUIRE(stats_add(&s, u[i]) == 0);
	CHECK(stats_min(&s) == 1.0 && stats_max(&s) == 9.0);
	CHECK(near(stats_stdev(&s), 3.1622776601683795, 1e-14));
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(buf[0] == 1 && buf[1] == 3 && buf[2] == 5 && buf[3] == 7 && buf[4] == 9);
	CHECK(stats_median(&s, &v) == 0 && v == 5.0);

	/* Huge: 1e15 + 0..9. A sum-of-squares formula loses everything here (1e30 vs 82.5);
	 * Welford gives sqrt(82.5 / 9) = 3.02765... exactly. */
	REQUIRE(stats_init(&s, buf, 1000) == 0);
	for (int i = 9; i >= 0; i--)
		REQUIRE(stats_add(&s, 1e15 + i) == 0);
	CHECK(stats_mean(&s) == 1e15 + 4.5);
	CHECK(near(stats_stdev(&s), 3.0276503540974917, 1e-12));
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(stats_median(&s, &v) == 0 && v == 1e15 + 4.5);
	CHECK(stats_percentile(&s, 90.0, &v) == 0 && v == 1e15 + 8);

	/* Tiny: 0.001 0.002 0.003 ns -> stdev 0.001, not rounded away. */
	REQUIRE(stats_init(&s, buf, 1000) == 0);
	REQUIRE(stats_add(&s, 0.003) == 0);
	REQUIRE(stats_add(&s, 0.001) == 0);
	REQUIRE(stats_add(&s, 0.002) == 0);
	CHECK(near(stats_mean(&s), 0.002, 1e-18));
	CHECK(near(stats_stdev(&s), 0.001, 1e-17));
	REQUIRE(stats_finalize(&s) == 0);
	CHECK(stats_median(&s, &v) == 0 && v == 0.002);

	/* Rejected samples change nothing. */
	CHECK_EQ(stats_add(&s, __builtin_nan("")), -EINVAL);
	CHECK_EQ(stats_add(&s, __builtin_inf()), -EINVAL);
	CHECK_EQ(stats_add(&s, -1.0), -EINVAL);
	CHECK_EQ(stats_count(&s), 3);
	CHECK_EQ(stats_init(NULL, buf, 1), -EINVAL);
	CHECK_EQ(stats_init(&s, NULL, 1), -EINVAL);
	REQUIRE(stats_init(&s, NULL, 0) == 0);
	CHECK_EQ(stats_add(&s, 1.0), -ENOSPC);
}

static void test_histogram(void)
{
	CHECK_EQ(stats_hist_bucket(0.0), 0);
	CHECK_EQ(stats_hist_bucket(0.999), 0);
	CHECK_EQ(stats_hist_bucket(-5.0), 0);
	CHECK_EQ(stats_hist_bucket(__builtin_nan("")), 0);
	CHECK_EQ(stats_hist_bucket(1.0), 1);
	CHECK_EQ(stats_hist_bucket(1.999), 1);
	CHECK_EQ(stats_hist_bucket(2.0), 2);
	CHECK_EQ(stats_hist_bucket(3.0), 2);
	CHECK_EQ(stats_hist_bucket(4.0), 3);
	CHECK_EQ(stats_hist_bucket(1000.0), 10);
	CHECK_EQ(stats_hist_bucket(1023.9), 10);
	CHECK_EQ(stats_hist_bucket(1024.0), 11);
	CHECK_EQ(stats_hist_bucket(1e9), 30);
	CHECK_EQ(stats_hist_bucket(1e18), 60);
	CHECK_EQ(stats_hist_bucket(4611686018427387904.0), 63);
	CHECK_EQ(stats_hist_bucket(1e300), 63);

	double lo, hi;
	CHECK(stats_hist_bounds(0, &lo, &hi) == 0 && lo == 0.0 && hi == 1.0);
	CHECK(stats_hist_bounds(10, &lo, &hi) == 0 && lo == 512.0 && hi == 1024.0);
	CHECK(stats_hist_bounds(62, &lo, &hi) == 0 && lo == 2305843009213693952.0 &&
	      hi == 4611686018427387904.0);
	CHECK(stats_hist_bounds(63, &lo, &hi) == 0 && lo == 4611686018427387904.0 && hi > 1e308);
	CHECK_EQ(stats_hist_bounds(64, &lo, &hi), -EINVAL);
	/* Every boundary value lands in the bucket it opens. */
	for (unsigned k = 1; k < STATS_HIST_BUCKETS; k++) {
		REQUIRE(stats_hist_bounds(k, &lo, &hi) == 0);
		CHECK_EQ(stats_hist_bucket(lo), k);
	}

	double buf[16];
	struct stats s;
	const double v[] = {0.5, 1, 1.5, 2, 3, 4, 1000, 1023, 1024, 1e9, 5e18};
	REQUIRE(stats_init(&s, buf, 16) == 0);
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		REQUIRE(stats_add(&s, v[i]) == 0);
	struct stats_hist h;
	stats_hist_build(&s, &h);
	CHECK_EQ(h.total, 11);
	CHECK_EQ(h.count[0], 1);
	CHECK_EQ(h.count[1], 2);
	CHECK_EQ(h.count[2], 2);
	CHECK_EQ(h.count[3], 1);
	CHECK_EQ(h.count[10], 2);
	CHECK_EQ(h.count[11], 1);
	CHECK_EQ(h.count[30], 1);
	CHECK_EQ(h.count[63], 1);
	uint64_t sum = 0;
	for (unsigned k = 0; k < STATS_HIST_BUCKETS; k++)
		sum += h.count[k];
	CHECK_EQ(sum, 11);

	/* Text: 1000, 1000, 1024 -> [512,1024): 2 (66.67%, 40 #), [1024,2048): 1 (20 #). */
	char text[512];
	REQUIRE(stats_init(&s, buf, 16) == 0);
	stats_add(&s, 1000);
	stats_add(&s, 1024);
	stats_add(&s, 1000);
	stats_hist_build(&s, &h);
	const char *want = "[         512,         1024) ns          2  66.67% "
			   "########################################\n"
			   "[        1024,         2048) ns          1  33.33% "
			   "####################\n";
	int n = stats_hist_format(&h, text, sizeof text);
	CHECK_EQ(n, (long long)strlen(want));
	CHECK(strcmp(text, want) == 0);
	if (strcmp(text, want) != 0)
		fprintf(stderr, "got:\n%s", text);

	/* The open-ended last bucket (the fullest bucket always gets the full 40-# bar), and a
	 * too-small buffer. */
	REQUIRE(stats_init(&s, buf, 16) == 0);
	stats_add(&s, 5e18);
	stats_hist_build(&s, &h);
	REQUIRE(stats_hist_format(&h, text, sizeof text) > 0);
	CHECK(strstr(text, "[4611686018427387904,          inf) ns          1 100.00% "
			   "########################################\n") != NULL);
	CHECK_EQ(stats_hist_format(&h, text, 10), -ENOSPC);
	CHECK_EQ(strlen(text), 9);

	REQUIRE(stats_init(&s, buf, 16) == 0);
	stats_hist_build(&s, &h);
	CHECK(stats_hist_format(&h, text, sizeof text) == 13 &&
	      strcmp(text, "(no samples)\n") == 0);
}

/* The expected perftest lines below are REPORT_FMT_LAT expanded by hand:
 * " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f
 *  \t\t%-7.2f" */

static void test_perftest_compat(void)
{
	struct stats_lat_report r;

	/* 8 post time stamps (ns) -> 7 deltas 4000 2000 6000 3000 10000 100000 5000; sorted
	 * 2000 3000 4000 5000 6000 | 10000 100000 (the 2 largest dropped, m = 5). q = 1000 ticks
	 * per us * rtt 2 = 2000. Kept /q: 1 1.5 2 2.5 3. t_min 1; t_max d[5]/q = 5 (a dropped
	 * one); median d[2]/q = 2; avg 2; deviations 1 .5 0 -.5 -1 truncate to 1 0 0 0 -1, so
	 * stdev = sqrt(2 / 5) = 0.632 (the exact population figure would be 0.707);
	 * 99%: d[ceil(4.95)] = d[5] -> 5; 99.9%: d[ceil(4.995)] = d[5] -> 5. */
	uint64_t ts[] = {0, 4000, 6000, 12000, 15000, 25000, 125000, 130000};
	REQUIRE(stats_perftest_lat_tstamps(ts, 8, 1000.0, 2, 2, &r) == 0);
	CHECK_EQ(r.bytes, 2);
	CHECK_EQ(r.iters, 8);
	CHECK(r.t_min_us == 1.0);
	CHECK(r.t_max_us == 5.0);
	CHECK(r.t_typical_us == 2.0);
	CHECK(r.t_avg_us == 2.0);
	CHECK(near(r.t_stdev_us, 0.6324555320336759, 1e-15));
	CHECK(r.p99_us == 5.0);
	CHECK(r.p999_us == 5.0);

	char line[512];
	const char *want = " 2       8          1.00           5.00         2.00     \t       2.00"
			   "        \t0.63   \t\t5.00    \t\t5.00   ";
	int n = stats_format_lat_line(&r, line, sizeof line);
	CHECK_EQ(n, (long long)strlen(want));
	CHECK(strcmp(line, want) == 0);
	if (strcmp(line, want) != 0)
		fprintf(stderr, "got  [%s]\nwant [%s]\n", line, want);

	/* Even m: the median is the integer mean of the middle two, truncated to a tick.
	 * Deltas 1000 2001 3000 4000 | 50000 60000, rtt 1: (2001 + 3000) / 2 = 2500 -> 2.5 us
	 * (not 2.5005); avg (1 + 2.001 + 3 + 4) / 4 = 2.50025; deviations 1.50025 .49925
	 * -.49975 -1.49975 truncate to 1 0 0 -1 -> sqrt(2/4); t_max = 99% = 99.9% = d[4] = 50. */
	uint64_t d[] = {60000, 4000, 1000, 50000, 3000, 2001};
	REQUIRE(stats_perftest_lat_deltas(d, 6, 1000.0, 1, 64, 7, &r) == 0);
	CHECK(r.t_typical_us == 2.5);
	CHECK(near(r.t_avg_us, 2.50025, 1e-12));
	CHECK(near(r.t_stdev_us, 0.7071067811865476, 1e-15));
	CHECK(r.t_min_us == 1.0 && r.t_max_us == 50.0 && r.p99_us == 50.0 && r.p999_us == 50.0);

	/* 1002 deltas 1..1002 (scrambled), 1 tick/us, rtt 1: m = 1000; median (500 + 501) / 2
	 * = 500 (truncated); 99% = d[ceil(990)] = 991; 99.9% = d[ceil(999)] = 1000; t_max = d[1000]
	 * = 1001; avg 500.5; deviations 499.5 .. -499.5 truncate to 499..0,0..-499, so
	 * S = 2 * sum_{k<500} k^2 = 83083500 and stdev^2 = 83083.5. Nearest-rank on the same
	 * 1000 kept samples would give 99% = 990 and 99.9% = 999. */
	static uint64_t big[1002];
	for (int i = 0; i < 1002; i++)
		big[i] = (uint64_t)((i * 379) % 1002 + 1); /* 379 coprime with 1002 */
	REQUIRE(stats_perftest_lat_deltas(big, 1002, 1.0, 1, 2, 1003, &r) == 0);
	CHECK(r.t_min_us == 1.0);
	CHECK(r.t_max_us == 1001.0);
	CHECK(r.t_typical_us == 500.0);
	CHECK(r.t_avg_us == 500.5);
	CHECK(near(r.t_stdev_us * r.t_stdev_us, 83083.5, 1e-6));
	CHECK(r.p99_us == 991.0);
	CHECK(r.p999_us == 1000.0);

	/* Errors. */
	uint64_t few[] = {1, 2, 3};
	CHECK_EQ(stats_perftest_lat_tstamps(few, 3, 1.0, 1, 2, &r), -EINVAL);
	uint64_t back[] = {1, 2, 3, 2, 5};
	CHECK_EQ(stats_perftest_lat_tstamps(back, 5, 1.0, 1, 2, &r), -EINVAL);
	CHECK(back[0] == 1 && back[3] == 2); /* left untouched */
	CHECK_EQ(stats_perftest_lat_deltas(few, 2, 1.0, 1, 2, 3, &r), -EINVAL);
	CHECK_EQ(stats_perftest_lat_deltas(few, 3, 0.0, 1, 2, 3, &r), -EINVAL);
	CHECK_EQ(stats_perftest_lat_deltas(few, 3, 1.0, 0, 2, 3, &r), -EINVAL);
	CHECK_EQ(stats_perftest_lat_deltas(few, 3, __builtin_nan(""), 1, 2, 3, &r), -EINVAL);
	CHECK_EQ(stats_perftest_lat_deltas(few, 3, 1.0, 1, 2, 3, &r), 0); /* m = 1 */
	CHECK(r.t_min_us == 1.0 && r.t_typical_us == 1.0 && r.t_max_us == 2.0 && r.p99_us == 2.0 &&
	      r.t_stdev_us == 0.0);
}

static void test_native_report_and_format(void)
{
	/* i * 1000 ns, i = 1..100: t_min 1, t_max 100, median 50.5, mean 50.5, sample stdev
	 * 29.011..., nearest-rank 99% = 99, 99.9% = 100 (us). */
	double buf[100];
	struct stats s;
	REQUIRE(stats_init(&s, buf, 100) == 0);
	for (int i = 100; i >= 1; i--)
		REQUIRE(stats_add(&s, i * 1000.0) == 0);
	struct stats_lat_report r;
	CHECK_EQ(stats_lat_report(&s, 64, 100, &r), -EINVAL); /* not finalized */
	REQUIRE(stats_finalize(&s) == 0);
	REQUIRE(stats_lat_report(&s, 64, 100, &r) == 0);
	CHECK(r.t_min_us == 1.0 && r.t_max_us == 100.0);
	CHECK(near(r.t_typical_us, 50.5, 1e-12) && near(r.t_avg_us, 50.5, 1e-12));
	CHECK(near(r.t_stdev_us, 29.011491975882016, 1e-12));
	CHECK(r.p99_us == 99.0 && r.p999_us == 100.0);

	char line[512];
	const char *want = " 64      100          1.00           100.00       50.50    \t       "
			   "50.50       \t29.01  \t\t99.00   \t\t100.00 ";
	int n = stats_format_lat_line(&r, line, sizeof line);
	CHECK_EQ(n, (long long)strlen(want));
	CHECK(strcmp(line, want) == 0);
	if (strcmp(line, want) != 0)
		fprintf(stderr, "got  [%s]\nwant [%s]\n", line, want);

	const char *hdr = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
			  "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
			  "percentile[usec] ";
	n = stats_format_lat_header(line, sizeof line);
	CHECK_EQ(n, (long long)strlen(hdr));
	CHECK(strcmp(line, hdr) == 0);

	/* JSON: every key back with its value. */
	char json[512];
	n = stats_format_lat_json(&r, json, sizeof json);
	REQUIRE(n > 0);
	CHECK_EQ(n, (long long)strlen(json));
	CHECK(json[0] == '{' && json[n - 1] == '}');
	CHECK(strstr(json, "\"MsgSize\": 64, ") != NULL);
	CHECK(strstr(json, "\"n_iterations\": 100, ") != NULL);
	CHECK(strstr(json, "\"t_stdev\": 29.01, ") != NULL);
	CHECK(strstr(json, "\"percentile_99.9\": 100.00}") != NULL);
	CHECK(json_get(json, "MsgSize") == 64.0);
	CHECK(json_get(json, "n_iterations") == 100.0);
	CHECK(json_get(json, "t_min") == 1.0);
	CHECK(json_get(json, "t_max") == 100.0);
	CHECK(json_get(json, "t_typical") == 50.5);
	CHECK(json_get(json, "t_avg") == 50.5);
	CHECK(json_get(json, "t_stdev") == 29.01);
	CHECK(json_get(json, "percentile_99") == 99.0);
	CHECK(json_get(json, "percentile_99.9") == 100.0);
	r.t_stdev_us = __builtin_nan("");
	REQUIRE(stats_format_lat_json(&r, json, sizeof json) > 0);
	CHECK(strstr(json, "\"t_stdev\": null, ") != NULL);

	/* Buffer handling. */
	CHECK_EQ(stats_format_lat_line(&r, line, 8), -ENOSPC);
	CHECK(strcmp(line, " 64    ") == 0);
	CHECK_EQ(stats_format_lat_line(&r, NULL, 8), -EINVAL);
	CHECK_EQ(stats_format_lat_line(NULL, line, 8), -EINVAL);
	CHECK_EQ(stats_format_lat_header(line, 0), -EINVAL);
}

static void test_bw(void)
{
	/* 1000 x 64 KiB in 1 s, best 0.5 ms per message: 62.5 MiB/s average, 125 peak,
	 * 0.001 Mpps. */
	struct stats_bw_report r;
	REQUIRE(stats_bw_report(65536, 1000, 1e9, 5e5, false, &r) == 0);
	CHECK(r.bw_avg == 62.5 && r.bw_peak == 125.0 && r.msg_rate == 0.001);
	char line[512];
	/* REPORT_FMT: " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf" */
	const char *want = " 65536      1000             125.00             62.50  \t\t   0.001000";
	int n = stats_format_bw_line(&r, line, sizeof line);
	CHECK_EQ(n, (long long)strlen(want));
	CHECK(strcmp(line, want) == 0);
	if (strcmp(line, want) != 0)
		fprintf(stderr, "got  [%s]\nwant [%s]\n", line, want);
	char json[256];
	REQUIRE(stats_format_bw_json(&r, json, sizeof json) > 0);
	CHECK(strcmp(json,
		     "{\"MsgSize\": 65536, \"n_iterations\": 1000, \"BW_peak\": 125.00, "
		     "\"BW_average\": 62.50, \"MsgRate\": 0.001000, \"unit\": \"MiB/sec\"}") == 0);
	CHECK(json_get(json, "BW_average") == 62.5);

	/* Gb/s: 65536 * 1000 * 8 bit / 1 s = 0.524288 Gb/s; peak 1.048576. */
	REQUIRE(stats_bw_report(65536, 1000, 1e9, 5e5, true, &r) == 0);
	CHECK(near(r.bw_avg, 0.524288, 1e-15) && near(r.bw_peak, 1.048576, 1e-15));
	n = stats_format_bw_line(&r, line, sizeof line);
	CHECK(strcmp(line,
		     " 65536      1000             1.05               0.52   \t\t   0.001000") ==
	      0);

	/* Below 0.1 Gb/s perftest switches to REPORT_FMT_EXT (6 decimals everywhere):
	 * " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf" */
	REQUIRE(stats_bw_report(2, 1000, 1e9, 5e5, true, &r) == 0);
	n = stats_format_bw_line(&r, line, sizeof line);
	want = " 2          1000           0.000032            0.000016            0.001000";
	CHECK(strcmp(line, want) == 0);
	if (strcmp(line, want) != 0)
		fprintf(stderr, "got  [%s]\nwant [%s]\n", line, want);
	REQUIRE(stats_format_bw_json(&r, json, sizeof json) > 0);
	CHECK(strstr(json, "\"BW_average\": 0.000016, ") != NULL);
	CHECK(strstr(json, "\"unit\": \"Gb/sec\"}") != NULL);

	/* No peak measured. */
	REQUIRE(stats_bw_report(2, 1000, 1e9, 0, false, &r) == 0);
	CHECK(r.bw_peak == 0.0);

	n = stats_format_bw_header(false, line, sizeof line);
	CHECK(strcmp(line, " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   "
			   "MsgRate[Mpps]") == 0);
	CHECK_EQ(n, (long long)strlen(line));
	stats_format_bw_header(true, line, sizeof line);
	CHECK(strcmp(line, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   "
			   "MsgRate[Mpps]") == 0);

	CHECK_EQ(stats_bw_report(2, 1, 0.0, 0, false, &r), -EINVAL);
	CHECK_EQ(stats_bw_report(2, 1, 1.0, -1.0, false, &r), -EINVAL);
	CHECK_EQ(stats_bw_report(2, 1, __builtin_inf(), 0, false, &r), -EINVAL);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The radix sort behind stats_finalize, for series long enough to take it: the same order as
 * qsort over every magnitude (zero, -0.0 taken as 0, subnormal, 1e300), duplicates, samples
 * of one magnitude (passes skipped), already sorted and reversed input. */
static void test_sort_long(void)
{
	enum { N = 20000 };
	static double buf[N], ref[N];
	uint64_t x = 88172645463325252ull;
	for (int shape = 0; shape < 4; shape++) {
		struct stats s;
		REQUIRE(stats_init(&s, buf, N) == 0);
		for (int i = 0; i < N; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			double v;
			switch (shape) {
			case 0: /* every magnitude */
				v = (double)(x >> 11) * 0x1p-53;
				v = (x & 7) == 0   ? 0.0
				    : (x & 7) == 1 ? -0.0
				    : (x & 7) == 2 ? v * 1e-310
				    : (x & 7) == 3 ? v * 1e300
				    : (x & 7) == 4 ? (double)(x % 100)
						   : v * (double)(x % 1000000007);
				break;
			case 1: /* one magnitude: round trips of 5-6 us */
				v = 5000.0 + (double)(x % 1000) / 7.0;
				break;
			case 2: /* sorted */
				v = (double)i * 3.5;
				break;
			default: /* reversed */
				v = (double)(N - i) * 0.25;
				break;
			}
			REQUIRE(stats_add(&s, v) == 0);
			ref[i] = v == 0.0 ? 0.0 : v;
		}
		qsort(ref, N, sizeof ref[0], cmp_d);
		REQUIRE(stats_finalize(&s) == 0);
		int bad = 0;
		for (int i = 0; i < N; i++)
			bad += memcmp(&buf[i], &ref[i], sizeof(double)) != 0;
		CHECK_EQ(bad, 0);
		CHECK(buf[0] == stats_min(&s) && buf[N - 1] == stats_max(&s));
	}
}

int main(void)
{
	test_one_to_hundred();
	test_small_series();
	test_histogram();
	test_perftest_compat();
	test_native_report_and_format();
	test_bw();
	test_sort_long();
	return check_exit();
}
