/* DCQCN (engine/dcqcn.h) on a virtual clock, against what the algorithm says in closed form:
 * the rate after n CNPs (each cut takes alpha / 2 of the rate), the floor, the recovery towards
 * the target (half the distance per increase event, so k events leave 2^-k of it), additive
 * and hyper increase of the target, alpha's decay, the pacing rate, the notification point's
 * one CNP per interval, and the timers stopping once everything is back at line rate. */
#include "check.h"

#include <errno.h>
#include <math.h>

#include "engine/dcqcn.h"

#define US   1000ull
#define MS   1000000ull
#define GBPS 1000000000ull

/* A fresh reaction point with p that took one CNP at time 0 and made its cut at the
 * decrease check 4 us later. */
static void cut_once(struct dcqcn *d, const struct dcqcn_params *p)
{
	dcqcn_init(d, p);
	dcqcn_cnp(d, 0);
	dcqcn_timer(d, p->decrease_period_ns);
}

static void test_params(void)
{
	struct dcqcn_params p;
	dcqcn_params_default(&p, 25 * GBPS);
	CHECK_EQ(dcqcn_params_check(&p), 0);
	CHECK_EQ(p.g, 1019);
	CHECK_EQ(p.time_reset_ns, 300 * US);
	struct dcqcn_params q = p;
	q.g = 1024;
	CHECK_EQ(dcqcn_params_check(&q), -EINVAL);
	q = p;
	q.alpha_period_ns = 0;
	CHECK_EQ(dcqcn_params_check(&q), -EINVAL);
	q = p;
	q.min_rate = q.line_rate + 1;
	CHECK_EQ(dcqcn_params_check(&q), -EINVAL);
	q = p;
	q.initial_alpha = 1024;
	CHECK_EQ(dcqcn_params_check(&q), -EINVAL);
	q = p;
	q.line_rate = 0;
	CHECK_EQ(dcqcn_params_check(&q), -EINVAL);
	CHECK_EQ(dcqcn_params_check(NULL), -EINVAL);
}

/* No CNP, nothing: no timer, no pacing, line rate whatever is sent. */
static void test_quiet(void)
{
	struct dcqcn_params p;
	struct dcqcn d;
	dcqcn_params_default(&p, 10 * GBPS);
	dcqcn_init(&d, &p);
	CHECK_EQ(dcqcn_deadline(&d), UINT64_MAX);
	for (uint64_t t = 0; t < 10 * MS; t += 7 * US) {
		CHECK(dcqcn_send_at(&d) <= t);
		dcqcn_sent(&d, 4096, t);
		dcqcn_timer(&d, t);
	}
	CHECK_EQ(d.rate, 10 * GBPS);
	CHECK_EQ(d.increases, 0);
	CHECK_EQ(dcqcn_deadline(&d), UINT64_MAX);
}

/* One CNP at line rate with the NIC's defaults: alpha starts at 1023, the CNP's period keeps
 * it there (the decay takes 5/1024, the CNP adds 5), the next three decay it (1018, 1013,
 * 1008: alpha * 1019 / 1024 rounded down), and the check 4 us after the CNP cuts Rc by
 * Rc * alpha / 2048. */
static void test_one_cut(void)
{
	struct dcqcn_params p;
	struct dcqcn d;
	uint64_t r = 10 * GBPS;
	dcqcn_params_default(&p, r);
	dcqcn_init(&d, &p);
	dcqcn_cnp(&d, 0);
	CHECK_EQ(dcqcn_deadline(&d), 1 * US); /* the first alpha update */
	dcqcn_timer(&d, 1 * US);
	CHECK_EQ(d.alpha, 1023);
	dcqcn_timer(&d, 2 * US);
	CHECK_EQ(d.alpha, 1018);
	dcqcn_timer(&d, 3 * US);
	CHECK_EQ(d.alpha, 1013);
	CHECK_EQ(d.rate, r);	 /* not before the decrease check */
	dcqcn_timer(&d, 4 * US); /* alpha's update first (1008), then the check */
	CHECK_EQ(d.alpha, 1008);
	CHECK_EQ(d.cuts, 1);
	CHECK_EQ(d.rate, r - r * 1008 / 2048);
	CHECK_EQ(d.target, r); /* no increase counted yet: the target is not clamped */
	CHECK_EQ(d.cnps, 1);
}

/* n CNPs, one before each decrease check, alpha held at 1023 (a period longer than the test):
 * each cut leaves 1025 / 2048 of the rate, so Rc(n) = R (1025/2048)^n, to the rounding of n
 * steps; then the floor. */
static void test_n_cuts(void)
{
	struct dcqcn_params p;
	struct dcqcn d;
	uint64_t r = 40 * GBPS, t = 0;
	dcqcn_params_default(&p, r);
	p.alpha_period_ns = 1000 * MS;
	p.time_reset_ns = 1000 * MS;
	dcqcn_init(&d, &p);
	for (int n = 1; n <= 40; n++) {
		dcqcn_cnp(&d, t);
		t += p.decrease_period_ns;
		dcqcn_timer(&d, t);
		double want = (double)r * pow(1025.0 / 2048.0, n);
		if (want < (double)p.min_rate)
			want = (double)p.min_rate;
		CHECK(fabs((double)d.rate - want) <= n + 1);
		CHECK_EQ(d.cuts, n);
	}
	CHECK_EQ(d.rate, p.min_rate); /* 40 Gbit/s / 2^40 is far below 1 Mbit/s */
	/* A cut never takes more than min_dec_pct: with alpha 1023 it takes just under half. */
	p.min_dec_pct = 80; /* at most 20 % */
	cut_once(&d, &p);
	CHECK_EQ(d.rate, r - r / 5);
}

/* Recovery after one cut, by time alone: the target stays at line rate (never clamped: no
 * increase was counted before the cut), and every event halves the distance to it: after k
 * events (k * 300 us) Rc = R - ceil((R - Rc0) / 2^k) up to rounding. Back at line rate with
 * alpha decayed to 0, the timers stop. */
static void test_recovery(void)
{
	struct dcqcn_params p;
	struct dcqcn d;
	uint64_t r = 10 * GBPS;
	dcqcn_params_default(&p, r);
	cut_once(&d, &p);
	uint64_t rc0 = d.rate, cut_at = 4 * US;
	for (int k = 1; k <= 20; k++) {
		dcqcn_timer(&d, cut_at + k * p.time_reset_ns);
		CHECK_EQ(d.increases, k);
		double gap = (double)(r - rc0) / pow(2.0, k);
		CHECK(fabs((double)(r - d.rate) - gap) <= 1.0);
		CHECK_EQ(d.target, r);
	}
	/* Within 1 % of line rate after ceil(log2(100 * (R - Rc0) / R)) = 6 events: 1.8 ms. */
	cut_once(&d, &p);
	dcqcn_timer(&d, 4 * US + 5 * p.time_reset_ns);
	CHECK(d.rate < r - r / 100);
	dcqcn_timer(&d, 4 * US + 6 * p.time_reset_ns);
	CHECK(d.rate >= r - r / 100);
	/* Alpha decays by g / 1024 per microsecond without CNPs: 1023 (1019/1024)^k, less one
	 * per step at most for the rounding down. */
	dcqcn_init(&d, &p);
	dcqcn_cnp(&d, 0);
	dcqcn_timer(&d, 1 * US); /* the CNP's period: back to 1023 */
	CHECK_EQ(d.alpha, 1023);
	for (int k = 1; k <= 200; k++) {
		dcqcn_timer(&d, (1 + k) * US);
		double want = 1023.0 * pow(1019.0 / 1024.0, k);
		CHECK((double)d.alpha <= want + 1e-9 && (double)d.alpha >= want - k);
	}
	/* Everything settles and stops: one call far ahead terminates and leaves no timer. */
	dcqcn_timer(&d, 10000 * MS);
	CHECK_EQ(d.rate, r);
	CHECK_EQ(d.alpha, 0);
	CHECK(!d.active);
	CHECK_EQ(dcqcn_deadline(&d), UINT64_MAX);
	CHECK_EQ(dcqcn_send_at(&d), 0);
}

/* With the target clamped at every cut (Rt = Rc before the cut), the target climbs by ai_rate
 * per time event once the first (fast recovery) is past; with bytes counted too, by hai_rate
 * once both counts are above the threshold. Two cuts first, so that the target is below line
 * rate: the rate after the first. */
static void test_increase_kinds(void)
{
	struct dcqcn_params p;
	struct dcqcn d;
	uint64_t r = 100 * GBPS;
	dcqcn_params_default(&p, r);
	p.clamp_target = true;
	p.alpha_period_ns = 1000 * MS; /* alpha held: the cut is the same each time */
	cut_once(&d, &p);
	CHECK_EQ(d.target, r);
	uint64_t rc0 = d.rate;
	dcqcn_cnp(&d, 4 * US);
	dcqcn_timer(&d, 8 * US);
	CHECK_EQ(d.cuts, 2);
	CHECK_EQ(d.target, rc0);
	for (int k = 1; k <= 10; k++) {
		dcqcn_timer(&d, 8 * US + k * p.time_reset_ns);
		/* event 1: fast recovery (no counts yet); events 2..: additive */
		CHECK_EQ(d.target, rc0 + (uint64_t)(k - 1) * p.ai_rate);
	}
	/* Hyper: both counts above the threshold (1). Bytes: byte_reset per event. */
	cut_once(&d, &p);
	rc0 = d.rate;
	dcqcn_cnp(&d, 4 * US);
	dcqcn_timer(&d, 8 * US);
	uint64_t t = 8 * US, target = rc0;
	CHECK_EQ(d.target, target);
	for (int k = 1; k <= 6; k++) {
		t += p.time_reset_ns;
		dcqcn_timer(&d, t); /* a time event */
		uint32_t lo = d.stage_time - 1 < d.stage_bytes ? d.stage_time - 1 : d.stage_bytes;
		uint32_t hi = d.stage_time - 1 > d.stage_bytes ? d.stage_time - 1 : d.stage_bytes;
		target += lo > 1 ? p.hai_rate : hi >= 1 ? p.ai_rate : 0;
		CHECK_EQ(d.target, target);
		/* a byte event, counted as the pacing lets bytes out */
		uint32_t before_bytes = d.stage_bytes, st = d.stage_time;
		uint64_t sent = 0;
		while (sent < p.byte_reset) {
			uint32_t n = 65536;
			dcqcn_sent(&d, n, dcqcn_send_at(&d));
			sent += n;
		}
		CHECK_EQ(d.stage_bytes, before_bytes + 1);
		lo = st < before_bytes ? st : before_bytes;
		hi = st > before_bytes ? st : before_bytes;
		target += lo > 1 ? p.hai_rate : hi >= 1 ? p.ai_rate : 0;
		CHECK_EQ(d.target, target);
	}
	CHECK(d.target - rc0 >= 2 * p.hai_rate); /* hyper increase happened */
}

/* Pacing: back-to-back 1,000-byte packets as send_at allows leave at Rc. */
static void test_pacing(void)
{
	struct dcqcn_params p;
	struct dcqcn d;
	dcqcn_params_default(&p, 10 * GBPS);
	p.time_reset_ns = 1000 * MS; /* the rate holds still */
	p.byte_reset = 1ull << 40;
	cut_once(&d, &p);
	uint64_t rate = d.rate, t = 4 * US, start = t, bytes = 0;
	while (t < start + 10 * MS) {
		uint64_t at = dcqcn_send_at(&d);
		if (at > t)
			t = at;
		dcqcn_sent(&d, 1000, t);
		bytes += 1000;
	}
	double got = (double)bytes * 8e9 / (double)(t - start);
	CHECK(fabs(got - (double)rate) / (double)rate < 0.001);
	CHECK_EQ(d.rate, rate);
}

/* Notification point: one CNP per interval per QP, however many marked packets. */
static void test_np(void)
{
	struct dcqcn_np np = {.interval_ns = 4 * US};
	static const uint64_t at[] = {0, 1 * US, 3 * US, 4 * US, 5 * US, 9 * US, 9 * US, 20 * US};
	static const bool want[] = {true, false, false, true, false, true, false, true};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		CHECK_EQ(dcqcn_np_mark(&np, at[i]), want[i]);
	CHECK_EQ(np.marked, 8);
	CHECK_EQ(np.cnps, 4);
}

/* SOFTRDMA_DCQCN's syntax: every key with its unit, and every kind of mistake refused with the
 * parameters left as they were. */
static void test_parse(void)
{
	struct dcqcn_params p, d;
	char why[160];
	dcqcn_params_default(&d, 25 * GBPS);

	p = d;
	CHECK_EQ(dcqcn_params_parse(&p, NULL, why, sizeof(why)), 0);
	CHECK_EQ(dcqcn_params_parse(&p, "", why, sizeof(why)), 0);
	CHECK_MEM(&p, &d, sizeof(p));

	CHECK_EQ(dcqcn_params_parse(&p,
				    "line_rate=200M,min_rate=2M,first_cnp_rate=100M,ai_rate=1M,"
				    "hai_rate=10M,time_reset=50us,byte_reset=1M,alpha_period=2us,"
				    "decrease_period=8000ns,threshold=5,g=1000,initial_alpha=512,"
				    "min_dec_pct=25,clamp_target=1,clamp_after_time_inc=0",
				    why, sizeof(why)),
		 0);
	CHECK_EQ(p.line_rate, 200000000);
	CHECK_EQ(p.min_rate, 2000000);
	CHECK_EQ(p.first_cnp_rate, 100000000);
	CHECK_EQ(p.ai_rate, 1000000);
	CHECK_EQ(p.hai_rate, 10000000);
	CHECK_EQ(p.time_reset_ns, 50 * US);
	CHECK_EQ(p.byte_reset, 1024 * 1024);
	CHECK_EQ(p.alpha_period_ns, 2 * US);
	CHECK_EQ(p.decrease_period_ns, 8 * US);
	CHECK_EQ(p.threshold, 5);
	CHECK_EQ(p.g, 1000);
	CHECK_EQ(p.initial_alpha, 512);
	CHECK_EQ(p.min_dec_pct, 25);
	CHECK(p.clamp_target);
	CHECK(!p.clamp_after_time_inc);

	/* One key changes one field; a bare time is ns, a bare rate bit/s. */
	p = d;
	CHECK_EQ(dcqcn_params_parse(&p, "line_rate=1G,time_reset=7", why, sizeof(why)), 0);
	CHECK_EQ(p.line_rate, GBPS);
	CHECK_EQ(p.time_reset_ns, 7);
	CHECK_EQ(p.ai_rate, d.ai_rate);

	static const char *const bad[] = {
	    "speed=1G",			      /* unknown key */
	    "line_rate",		      /* no value */
	    "line_rate=",		      /* empty value */
	    "line_rate=1T",		      /* unknown unit */
	    "line_rate=1g",		      /* units are case-sensitive: M is mega, not milli */
	    "time_reset=5s",		      /* not a time unit here */
	    "g=1024",			      /* alpha could not decay */
	    "g=-1",			      /* not a number */
	    "min_rate=30G",		      /* above the line rate */
	    "clamp_target=2",		      /* a flag */
	    "threshold=4294967296",	      /* beyond 32 bits */
	    "line_rate=99999999999999999999", /* beyond 64 bits */
	    "line_rate=100000000000000G",     /* overflows with its unit */
	    "ai_rate=1M,,g=1000",	      /* an empty item */
	    "alpha_period=0",		      /* a period of 0 */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p = d;
		why[0] = '\0';
		int rc = dcqcn_params_parse(&p, bad[i], why, sizeof(why));
		CHECK_EQ(rc, -EINVAL);
		CHECK(why[0] != '\0');
		CHECK_MEM(&p, &d, sizeof(p));
		if (rc != -EINVAL)
			fprintf(stderr, "accepted: %s\n", bad[i]);
	}
}

int main(void)
{
	test_params();
	test_parse();
	test_quiet();
	test_one_cut();
	test_n_cuts();
	test_recovery();
	test_increase_kinds();
	test_pacing();
	test_np();
	return check_exit();
}
