/* DCQCN's reaction and notification points (dcqcn.h). */
#include "engine/dcqcn.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

void dcqcn_params_default(struct dcqcn_params *p, uint64_t line_rate)
{
	*p = (struct dcqcn_params){
	    .line_rate = line_rate,
	    .min_rate = 1000000,	/* rpg_min_rate 1 Mbit/s */
	    .first_cnp_rate = 0,	/* rate_to_set_on_first_cnp 0 */
	    .ai_rate = 5000000,		/* rpg_ai_rate 5 Mbit/s */
	    .hai_rate = 50000000,	/* rpg_hai_rate 50 Mbit/s */
	    .time_reset_ns = 300000,	/* rpg_time_reset 300 us */
	    .byte_reset = 32767u * 64u, /* rpg_byte_reset 32767 (64-byte units) */
	    .alpha_period_ns = 1000,	/* dce_tcp_rtt 1 us */
	    .decrease_period_ns = 4000, /* rate_reduce_monitor_period 4 us */
	    .threshold = 1,		/* rpg_threshold */
	    .g = 1019,			/* dce_tcp_g */
	    .initial_alpha = 1023,	/* initial_alpha_value */
	    .min_dec_pct = 50,		/* rpg_min_dec_fac */
	    .clamp_target = false,	/* clamp_tgt_rate */
	    .clamp_after_time_inc = true,
	};
}

int dcqcn_params_check(const struct dcqcn_params *p)
{
	if (!p || p->line_rate == 0 || p->min_rate == 0 || p->min_rate > p->line_rate ||
	    p->first_cnp_rate > p->line_rate || p->time_reset_ns == 0 || p->byte_reset == 0 ||
	    p->alpha_period_ns == 0 || p->decrease_period_ns == 0 || p->g >= 1024 ||
	    p->initial_alpha > 1023 || p->min_dec_pct > 100 ||
	    p->line_rate > UINT64_MAX / 1024 /* rate * alpha */)
		return -EINVAL;
	return 0;
}

/* ---- SOFTRDMA_DCQCN ---- */

enum unit { U_RATE, U_TIME, U_BYTES, U_INT, U_FLAG };

/* One settable field: its key, unit and place in struct dcqcn_params. The unit says the
 * field's type: U_INT a uint32_t, U_FLAG a bool, the others a uint64_t. */
struct param_key {
	const char *key;
	enum unit unit;
	size_t off;
};

#define KEY(k, f, u)                                                                               \
	{                                                                                          \
		k, u, offsetof(struct dcqcn_params, f)                                             \
	}
static const struct param_key param_keys[] = {
    KEY("line_rate", line_rate, U_RATE),
    KEY("min_rate", min_rate, U_RATE),
    KEY("first_cnp_rate", first_cnp_rate, U_RATE),
    KEY("ai_rate", ai_rate, U_RATE),
    KEY("hai_rate", hai_rate, U_RATE),
    KEY("time_reset", time_reset_ns, U_TIME),
    KEY("byte_reset", byte_reset, U_BYTES),
    KEY("alpha_period", alpha_period_ns, U_TIME),
    KEY("decrease_period", decrease_period_ns, U_TIME),
    KEY("threshold", threshold, U_INT),
    KEY("g", g, U_INT),
    KEY("initial_alpha", initial_alpha, U_INT),
    KEY("min_dec_pct", min_dec_pct, U_INT),
    KEY("clamp_target", clamp_target, U_FLAG),
    KEY("clamp_after_time_inc", clamp_after_time_inc, U_FLAG),
};

struct suffix {
	const char *s;
	uint64_t mult;
};

/* A decimal number [t, end) followed by one of the unit's suffixes; false if it is not one
 * or overflows. */
static bool parse_value(const char *t, const char *end, enum unit u, uint64_t *out)
{
	static const struct suffix rate[] = {
	    {"", 1}, {"k", 1000}, {"M", 1000000}, {"G", 1000000000}, {NULL, 0}};
	static const struct suffix time[] = {
	    {"", 1}, {"ns", 1}, {"us", 1000}, {"ms", 1000000}, {NULL, 0}};
	static const struct suffix bytes[] = {{"", 1}, {"K", 1024}, {"M", 1024 * 1024}, {NULL, 0}};
	static const struct suffix plain[] = {{"", 1}, {NULL, 0}};
	const struct suffix *sx = u == U_RATE	 ? rate
				  : u == U_TIME	 ? time
				  : u == U_BYTES ? bytes
						 : plain;
	uint64_t v = 0;
	const char *c = t;

	if (c == end || *c < '0' || *c > '9')
		return false;
	for (; c < end && *c >= '0' && *c <= '9'; c++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	for (; sx->s; sx++) {
		size_t n = strlen(sx->s);
		if ((size_t)(end - c) == n && memcmp(c, sx->s, n) == 0) {
			if (sx->mult > 1 && v > UINT64_MAX / sx->mult)
				return false;
			*out = v * sx->mult;
			return true;
		}
	}
	return false;
}

static void say(char *why, size_t len, const char *what, const char *t, const char *end)
{
	if (!why || !len)
		return;
	int n = (int)(end - t);
	snprintf(why, len, "%s: '%.*s'", what, n > 60 ? 60 : n, t);
}

int dcqcn_params_parse(struct dcqcn_params *p, const char *spec, char *why, size_t len)
{
	struct dcqcn_params q = *p;

	if (why && len)
		why[0] = '\0';
	for (const char *t = spec; t && *t;) {
		const char *end = strchr(t, ',');
		if (!end)
			end = t + strlen(t);
		const char *eq = memchr(t, '=', (size_t)(end - t));
		const struct param_key *k = NULL;
		for (size_t i = 0; eq && i < sizeof(param_keys) / sizeof(param_keys[0]); i++)
			if (strlen(param_keys[i].key) == (size_t)(eq - t) &&
			    memcmp(param_keys[i].key, t, (size_t)(eq - t)) == 0)
				k = &param_keys[i];
		if (!k) {
			say(why, len, eq ? "unknown key" : "not key=value", t, end);
			return -EINVAL;
		}
		uint64_t v;
		if (!parse_value(eq + 1, end, k->unit, &v) ||
		    (k->unit == U_INT && v > UINT32_MAX) || (k->unit == U_FLAG && v > 1)) {
			say(why, len, "bad value", t, end);
			return -EINVAL;
		}
		uint8_t *f = (uint8_t *)&q + k->off;
		if (k->unit == U_FLAG) {
			bool b = v != 0;
			memcpy(f, &b, sizeof(b));
		} else if (k->unit == U_INT) {
			uint32_t w = (uint32_t)v;
			memcpy(f, &w, sizeof(w));
		} else {
			memcpy(f, &v, sizeof(v));
		}
		t = *end ? end + 1 : end;
	}
	if (dcqcn_params_check(&q) != 0) {
		if (why && len)
			snprintf(why, len,
				 "the parameters make no sense together (min_rate <= line_rate, "
				 "non-zero periods, g < 1024, initial_alpha <= 1023, min_dec_pct "
				 "<= 100)");
		return -EINVAL;
	}
	*p = q;
	return 0;
}

void dcqcn_init(struct dcqcn *d, const struct dcqcn_params *p)
{
	memset(d, 0, sizeof(*d));
	d->p = *p;
	d->rate = d->target = p->line_rate;
}

/* The first tick of a timer due at next, every period, that comes after t (next itself when
 * it does). */
static uint64_t tick_after(uint64_t next, uint64_t period, uint64_t t)
{
	return next > t ? next : next + ((t - next) / period + 1) * period;
}

void dcqcn_cnp(struct dcqcn *d, uint64_t now)
{
	d->cnps++;
	if (!d->active) {
		/* The first CNP of an episode starts the timers with alpha at its initial value. */
		d->active = true;
		d->alpha = d->p.initial_alpha;
		d->next_alpha = now + d->p.alpha_period_ns;
		d->next_decrease = now + d->p.decrease_period_ns;
		d->next_increase = now + d->p.time_reset_ns;
		d->stage_time = d->stage_bytes = 0;
		d->bytes = 0;
		if (d->p.first_cnp_rate) {
			d->rate = d->target = d->p.first_cnp_rate;
			d->cuts++;
			return;
		}
	}
	/* Timers with nothing to do were left out of the deadline (dcqcn_deadline): bring
	 * them to their first tick at or after now, on their grid, before they have work. */
	if (now > 0 && d->alpha == 0 && !d->cnp_alpha)
		d->next_alpha = tick_after(d->next_alpha, d->p.alpha_period_ns, now - 1);
	if (now > 0 && !d->cnp_cut)
		d->next_decrease = tick_after(d->next_decrease, d->p.decrease_period_ns, now - 1);
	d->cnp_alpha = true;
	d->cnp_cut = true;
}

static void alpha_update(struct dcqcn *d)
{
	uint32_t a = (uint32_t)((uint64_t)d->alpha * d->p.g / 1024);
	if (d->cnp_alpha)
		a += 1024 - d->p.g;
	d->alpha = a > 1023 ? 1023 : a;
	d->cnp_alpha = false;
}

static void decrease(struct dcqcn *d, uint64_t t)
{
	if (!d->cnp_cut)
		return;
	if (d->p.clamp_target || d->stage_bytes > 0 ||
	    (d->p.clamp_after_time_inc && d->stage_time > 0))
		d->target = d->rate;
	uint64_t by = d->rate * d->alpha >> 11; /* Rc * alpha / 2, alpha in 1/1024ths */
	uint64_t most = d->rate / 100 * (100 - d->p.min_dec_pct) +
			d->rate % 100 * (100 - d->p.min_dec_pct) / 100;
	d->rate -= by < most ? by : most;
	if (d->rate < d->p.min_rate)
		d->rate = d->p.min_rate;
	d->cnp_cut = false;
	d->stage_time = d->stage_bytes = 0;
	d->bytes = 0;
	d->next_increase = t + d->p.time_reset_ns;
	d->cuts++;
}

static void increase(struct dcqcn *d)
{
	uint32_t lo = d->stage_time < d->stage_bytes ? d->stage_time : d->stage_bytes;
	uint32_t hi = d->stage_time < d->stage_bytes ? d->stage_bytes : d->stage_time;
	if (lo > d->p.threshold)
		d->target += d->p.hai_rate; /* hyper increase */
	else if (hi >= d->p.threshold)
		d->target += d->p.ai_rate; /* additive increase */
	/* else: fast recovery, towards the target as it is */
	if (d->target > d->p.line_rate)
		d->target = d->p.line_rate;
	d->rate = (d->rate + d->target + 1) / 2; /* rounded up: it reaches the target */
	d->increases++;
}

/* Back where it started, with nothing left to recover or to learn: the timers stop. */
static bool settled(const struct dcqcn *d)
{
	return d->rate == d->p.line_rate && d->target == d->p.line_rate && d->alpha == 0 &&
	       !d->cnp_alpha && !d->cnp_cut;
}

void dcqcn_timer(struct dcqcn *d, uint64_t now)
{
	while (d->active) {
		/* Events with nothing to do are stepped over at once: an alpha update of a zero
		 * alpha with no CNP, a decrease check with no CNP (none comes in here). */
		if (d->alpha == 0 && !d->cnp_alpha)
			d->next_alpha = tick_after(d->next_alpha, d->p.alpha_period_ns, now);
		if (!d->cnp_cut)
			d->next_decrease =
			    tick_after(d->next_decrease, d->p.decrease_period_ns, now);
		uint64_t t = d->next_alpha;
		int which = 0;
		if (d->next_decrease < t) {
			t = d->next_decrease;
			which = 1;
		}
		if (d->next_increase < t) {
			t = d->next_increase;
			which = 2;
		}
		if (t > now)
			return;
		if (which == 0) {
			alpha_update(d);
			d->next_alpha += d->p.alpha_period_ns;
		} else if (which == 1) {
			decrease(d, t);
			d->next_decrease += d->p.decrease_period_ns;
		} else {
			increase(d);
			d->stage_time++;
			d->next_increase += d->p.time_reset_ns;
		}
		if (settled(d)) {
			d->active = false;
			d->next_send = 0;
		}
	}
}

uint64_t dcqcn_deadline(const struct dcqcn *d)
{
	if (!d->active)
		return UINT64_MAX;
	/* Only the timers that have work: an alpha to update, a CNP to act on, the increase. */
	uint64_t t = d->next_increase;
	if ((d->alpha || d->cnp_alpha) && d->next_alpha < t)
		t = d->next_alpha;
	if (d->cnp_cut && d->next_decrease < t)
		t = d->next_decrease;
	return t;
}

uint64_t dcqcn_send_at(const struct dcqcn *d)
{
	return d->rate < d->p.line_rate ? d->next_send : 0;
}

void dcqcn_sent(struct dcqcn *d, uint32_t bytes, uint64_t now)
{
	if (!d->active)
		return;
	if (d->rate < d->p.line_rate) {
		/* The packet occupies the link at Rc from when it may start. */
		uint64_t start = d->next_send > now ? d->next_send : now;
		unsigned __int128 bits_ns = (unsigned __int128)bytes * 8 * 1000000000u;
		d->next_send = start + (uint64_t)((bits_ns + d->rate - 1) / d->rate);
	}
	d->bytes += bytes;
	while (d->bytes >= d->p.byte_reset) {
		d->bytes -= d->p.byte_reset;
		increase(d);
		d->stage_bytes++;
	}
}

bool dcqcn_np_mark(struct dcqcn_np *np, uint64_t now)
{
	np->marked++;
	if (np->sent_once && now - np->last < np->interval_ns)
		return false;
	np->sent_once = true;
	np->last = now;
	np->cnps++;
	return true;
}
