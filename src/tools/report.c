/* `softrdma report RESULT.json [-o FILE.html]`: the HTML report of a `softrdma compare` result,
 * or of one or several `softrdma compare --scenario` results in one page (both formats are
 * documented in report.h).
 *
 * The input is untrusted (a file someone sent): every string goes through esc(), every number
 * is checked before it is used as a coordinate, and every list is capped, so a hostile file
 * yields a bounded, harmless page. The page carries a Content-Security-Policy that forbids
 * scripts and every fetch, as a second line of defence should escaping ever be missed.
 *
 * No libm: the CLI does not link it, and a plot needs only logarithms to a few digits (lg2). */
#include "tools/report.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/json.h"
#include "tools/tools.h"

/* Caps that bound the page whatever the input holds (the schema's real sizes are far below). */
#define MAX_TRANSPORTS 32
#define MAX_SERIES     32   /* per section */
#define MAX_POINTS     1024 /* per series in a plot */
#define MAX_CATEGORIES 64   /* rows of the bandwidth and loss tables */
#define MAX_TICKS      64

#define NONE __builtin_nan("") /* a missing number: printed as a dash */

/* Colours by position in "transports" (chosen to stay distinct for colour-blind readers). */
static const char *const palette[] = {"#0072b2", "#d55e00", "#009e73", "#cc79a7",
				      "#e69f00", "#56b4e9", "#6a3d9a", "#7f7f7f"};
#define NPALETTE   (sizeof(palette) / sizeof(palette[0]))
#define GREY_UNKWN "#999999" /* a series whose transport is not listed */

struct transport {
	const char *id, *label, *kind, *device; /* strings owned by the JSON tree; NULL if absent */
};

struct report {
	FILE *out;
	const struct json *doc;
	struct transport tp[MAX_TRANSPORTS];
	size_t ntp;
};

/* ---- numbers without libm ---- */

static bool is_finite(double v)
{
	return v == v && v - v == 0.0; /* false for NaN and +-inf */
}

/* log2 of x > 0 (finite): exponent from the bits, mantissa by the atanh series; error below
 * 1e-12, far beyond a pixel. */
static double lg2(double x)
{
	uint64_t b;
	int adj = 0;
	if (x < 0x1p-1000) {
		x *= 0x1p200; /* subnormal or tiny: scale into the normal range first */
		adj = 200;
	}
	memcpy(&b, &x, sizeof(b));
	int e = (int)((b >> 52) & 0x7ff) - 1023;
	b = (b & ((1ull << 52) - 1)) | (1023ull << 52);
	double m;
	memcpy(&m, &b, sizeof(m));
	if (m > 1.4142135623730951) {
		m /= 2;
		e++;
	}
	double z = (m - 1) / (m + 1), z2 = z * z, t = z, sum = 0;
	for (int k = 1; k < 40; k += 2) {
		sum += t / k;
		t *= z2;
	}
	return e - adj + 2 * sum / 0.6931471805599453;
}

static double lg10(double x)
{
	return lg2(x) * 0.30102999566398120;
}

static double flr(double x)
{
	double t = (double)(long long)x;
	return t > x ? t - 1 : t;
}

static double cel(double x)
{
	double t = (double)(long long)x;
	return t < x ? t + 1 : t;
}

static double ipow(double base, int k)
{
	double r = 1;
	for (int i = 0; i < (k < 0 ? -k : k); i++)
		r *= base;
	return k < 0 ? 1 / r : r;
}

/* ---- text ---- */

/* Writes s HTML-escaped (valid in text and in double- or single-quoted attributes). Control
 * characters become spaces: they are HTML parse errors and never meant to be shown. */
static void esc(FILE *out, const char *s)
{
	if (!s)
		return;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&#39;", out);
			break;
		default:
			fputc((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? ' ' : c, out);
		}
	}
}

/* v with dec decimals, or an en dash for a missing value. */
static const char *fnum(char *buf, size_t n, double v, int dec)
{
	if (!is_finite(v))
		snprintf(buf, n, "\u2013");
	else
		snprintf(buf, n, "%.*f", dec, v);
	return buf;
}

/* A rate with about three significant digits, without exponent for everyday values. */
static const char *frate(char *buf, size_t n, double v)
{
	if (!is_finite(v))
		snprintf(buf, n, "\u2013");
	else if (v >= 100 || v <= -100)
		snprintf(buf, n, "%.0f", v);
	else if (v >= 1 || v <= -1)
		snprintf(buf, n, "%.2f", v);
	else if (v == 0)
		snprintf(buf, n, "0");
	else
		snprintf(buf, n, "%.2g", v);
	return buf;
}

/* A size in bytes: "8 B", "1 KiB", "64 KiB", "4 MiB"; exact multiples only, else bytes. */
static const char *fsize(char *buf, size_t n, double v)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	if (!is_finite(v) || v < 0 || v >= 0x1p63) {
		snprintf(buf, n, "%g B", v);
		return buf;
	}
	unsigned long long b = (unsigned long long)v;
	if ((double)b != v) {
		snprintf(buf, n, "%g B", v);
		return buf;
	}
	size_t u = 0;
	while (u + 1 < sizeof(unit) / sizeof(unit[0]) && b >= 1024 && b % 1024 == 0) {
		b /= 1024;
		u++;
	}
	snprintf(buf, n, "%llu %s", b, unit[u]);
	return buf;
}

static const char *fduration(char *buf, size_t n, double s)
{
	if (!is_finite(s) || s < 0)
		snprintf(buf, n, "\u2013");
	else if (s < 60)
		snprintf(buf, n, "%.1f s", s);
	else if (s < 3600)
		snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
	else if (s < 1e9)
		snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
	else
		snprintf(buf, n, "%.3g s", s);
	return buf;
}

/* A percentage for the loss axis: 0, 0.01, 0.1, 1, 5 ... with a % sign. */
static const char *fpct(char *buf, size_t n, double v)
{
	snprintf(buf, n, "%g%%", v);
	return buf;
}

/* ---- transports ---- */

static int tp_index(const struct report *r, const char *id)
{
	if (!id)
		return -1;
	for (size_t i = 0; i < r->ntp; i++)
		if (r->tp[i].id && strcmp(r->tp[i].id, id) == 0)
			return (int)i;
	return -1;
}

static const char *tp_colour(int i)
{
	return i < 0 ? GREY_UNKWN : palette[(size_t)i % NPALETTE];
}

/* The name to show for a series' transport: its label, else its id. */
static const char *tp_name(const struct report *r, int i, const char *id)
{
	if (i >= 0 && r->tp[i].label)
		return r->tp[i].label;
	return id ? id : "(unnamed)";
}

static void tp_cell(struct report *r, const char *id)
{
	int i = tp_index(r, id);
	fprintf(r->out, "<th scope=\"row\"><span class=\"sw\" style=\"background:%s\"></span>",
		tp_colour(i));
	esc(r->out, tp_name(r, i, id));
	fputs("</th>", r->out);
}

/* ---- sections ---- */

/* Whether section sec has data; if not, prints why (missing, null, skipped, malformed) and
 * returns false. */
static bool section_ok(struct report *r, const struct json *sec, const char *name)
{
	const char *why = NULL;
	if (json_type(sec) == JSON_NULL)
		why = "not measured in this run";
	else if (json_type(sec) != JSON_OBJECT)
		why = "malformed section in the result file";
	else if (json_get(sec, "skipped"))
		why = json_str(json_get(sec, "skipped")) ? json_str(json_get(sec, "skipped"))
							 : "skipped";
	else if (json_type(json_get(sec, "series")) != JSON_ARRAY)
		why = "no series in the result file";
	if (!why)
		return true;
	fprintf(r->out, "<p class=\"skipped\" data-section=\"%s\">Skipped: ", name);
	esc(r->out, why);
	fputs("</p>\n", r->out);
	return false;
}

static void section_head(struct report *r, const char *id, const char *title,
			 const struct json *sec)
{
	fprintf(r->out, "<section id=\"%s\">\n<h2>%s</h2>\n", id, title);
	const char *what = json_str(json_get(sec, "what"));
	if (what) {
		fputs("<p class=\"what\">", r->out);
		esc(r->out, what);
		fputs("</p>\n", r->out);
	}
}

static void error_cell(struct report *r, const char *msg, int colspan)
{
	fprintf(r->out, "<td class=\"err\" colspan=\"%d\">error: ", colspan);
	esc(r->out, msg);
	fputs("</td>", r->out);
}

/* ---- plots ---- */

/* Plot geometry in SVG user units; the page scales the whole picture. */
#define PW     820.0
#define PH     440.0
#define PLEFT  72.0
#define PRIGHT 24.0
#define PBOT   62.0

struct tick {
	double t; /* position in axis units (log units for log axes) */
	char label[32];
	bool major; /* labelled and drawn solid */
};

struct axis {
	double t0, t1; /* range in axis units */
	struct tick ticks[MAX_TICKS];
	size_t nticks;
	const char *title;
};

struct pt {
	double tx, ty;	 /* position in axis units */
	double x, y;	 /* data values, for the tooltip */
	const char *err; /* non-NULL: an error point, drawn as a cross at the bottom */
};

struct series {
	const char *id; /* transport id from the series (owned by the tree) */
	int tp;		/* index in r->tp, -1 if unknown */
	struct pt *pts;
	size_t n;
};

struct plot {
	const char *id, *title;
	struct axis x, y;
	struct series s[MAX_SERIES];
	size_t ns;
	bool markers; /* a circle per point (sparse data) */
	/* tooltip text of a point */
	void (*tip)(char *buf, size_t n, const struct pt *p);
};

static void plot_free(struct plot *p)
{
	for (size_t i = 0; i < p->ns; i++)
		free(p->s[i].pts);
}

static void add_tick(struct axis *a, double t, bool major, const char *label)
{
	if (a->nticks >= MAX_TICKS)
		return;
	struct tick *k = &a->ticks[a->nticks++];
	k->t = t;
	k->major = major;
	snprintf(k->label, sizeof(k->label), "%s", label ? label : "");
}

/* A log10 axis over [lo, hi] (values > 0), its ends rounded out to 1, 2 or 5 times a power of
 * ten so the data fill the plot. Ticks at 1x, 2x and 5x each decade: all labelled over up to
 * three decades, only the powers of ten (thinned to about ten) beyond. fmt labels a value. */
static void log10_axis(struct axis *a, double lo, double hi,
		       const char *(*fmt)(char *, size_t, double))
{
	static const double mult[] = {1, 2, 5};
	const double lm[] = {0, lg10(2), lg10(5)};
	double dlo = flr(lg10(lo)), dhi = flr(lg10(hi));
	a->t0 = dlo;
	for (size_t i = 0; i < 3; i++)
		if (mult[i] * ipow(10, (int)dlo) <= lo * (1 + 1e-9))
			a->t0 = dlo + lm[i];
	a->t1 = dhi + 1;
	for (size_t i = 3; i-- > 0;)
		if (mult[i] * ipow(10, (int)dhi) >= hi * (1 - 1e-9))
			a->t1 = dhi + lm[i];
	if (a->t1 <= a->t0)
		a->t1 = a->t0 + lm[1];
	int span = (int)(a->t1 - a->t0 + 0.999);
	int step = span <= 10 ? 1 : (span + 9) / 10;
	for (int k = (int)dlo; k <= (int)dhi + 1; k++) {
		for (size_t i = 0; i < 3; i++) {
			double t = k + lm[i];
			if (t < a->t0 - 1e-9 || t > a->t1 + 1e-9)
				continue;
			if ((i > 0 && span > 6) || (span > 10 && k % step))
				continue; /* more lines would only blur a wide axis */
			char b[32];
			bool lab = span <= 3 ? true : i == 0 && k % step == 0;
			add_tick(a, t, i == 0 || lab,
				 lab ? fmt(b, sizeof(b), mult[i] * ipow(10, k)) : NULL);
		}
	}
}

static const char *fplain(char *buf, size_t n, double v)
{
	snprintf(buf, n, "%g", v);
	return buf;
}

/* A linear axis from 0 to a round number at or above hi (1 if hi <= 0), in five steps. */
static void linear_axis(struct axis *a, double hi)
{
	double top = hi > 0 ? hi : 1, mag = ipow(10, (int)flr(lg10(top))), nice = mag;
	static const double mult[] = {1, 2, 2.5, 5, 10};
	char b[32];
	for (size_t i = 0; i < sizeof(mult) / sizeof(mult[0]); i++)
		if (mult[i] * mag >= top) {
			nice = mult[i] * mag;
			break;
		}
	a->t0 = 0;
	if (!is_finite(nice))
		nice = top; /* top near DBL_MAX: no rounder number above it */
	a->t1 = nice;
	for (int i = 0; i <= 5; i++)
		add_tick(a, nice / 5 * i, true, fplain(b, sizeof(b), nice / 5 * i));
}

static const char *fus(char *buf, size_t n, double v)
{
	if (v >= 1e6)
		snprintf(buf, n, "%g s", v / 1e6);
	else if (v >= 1000)
		snprintf(buf, n, "%g ms", v / 1000);
	else
		snprintf(buf, n, "%g us", v);
	return buf;
}

static double px_x(const struct plot *p, double t)
{
	return PLEFT + (t - p->x.t0) / (p->x.t1 - p->x.t0) * (PW - PLEFT - PRIGHT);
}

static double px_y(const struct plot *p, double t, double top)
{
	return PH - PBOT - (t - p->y.t0) / (p->y.t1 - p->y.t0) * (PH - PBOT - top);
}

/* Number of code points in s, for the legend layout. */
static size_t text_width(const char *s)
{
	size_t n = 0;
	for (; s && *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n * 7 + 30; /* ~7 units per glyph at 12px, plus the swatch and a gap */
}

static bool in_range(const struct plot *p, const struct pt *q)
{
	return !q->err && is_finite(q->tx) && is_finite(q->ty) && q->tx >= p->x.t0 - 1e-9 &&
	       q->tx <= p->x.t1 + 1e-9 && q->ty >= p->y.t0 - 1e-9 && q->ty <= p->y.t1 + 1e-9;
}

static void draw_plot(struct report *r, struct plot *p)
{
	FILE *o = r->out;
	/* Legend rows first: they set the top margin. */
	double lx = PLEFT, top = 36;
	double lpos[MAX_SERIES][2];
	for (size_t i = 0; i < p->ns; i++) {
		double w = (double)text_width(tp_name(r, p->s[i].tp, p->s[i].id));
		if (w > PW - PLEFT - PRIGHT)
			w = PW - PLEFT - PRIGHT;
		if (lx + w > PW - PRIGHT && lx > PLEFT) {
			lx = PLEFT;
			top += 18;
		}
		lpos[i][0] = lx;
		lpos[i][1] = top - 18;
		lx += w + 12;
	}
	top += 8;

	fprintf(
	    o,
	    "<svg id=\"%s\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f "
	    "%.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-labelledby=\"%s-title\">\n"
	    "<title id=\"%s-title\">%s</title>\n",
	    p->id, PW, PH, PW, PH, p->id, p->id, p->title);
	double x0 = PLEFT, x1 = PW - PRIGHT, y0 = top, y1 = PH - PBOT;
	fprintf(o, "<rect class=\"area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
		x0, y0, x1 - x0, y1 - y0);
	/* Grid and tick labels. */
	fputs("<g class=\"axis x\">\n", o);
	for (size_t i = 0; i < p->x.nticks; i++) {
		const struct tick *k = &p->x.ticks[i];
		double x = px_x(p, k->t);
		fprintf(o, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
			k->major ? "grid" : "grid minor", x, y0, x, y1);
		if (k->major) {
			fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x,
				y1 + 18);
			esc(o, k->label);
			fputs("</text>", o);
		}
		fputc('\n', o);
	}
	fprintf(o, "<text class=\"title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
		(x0 + x1) / 2, PH - 16, p->x.title);
	fputs("</g>\n<g class=\"axis y\">\n", o);
	for (size_t i = 0; i < p->y.nticks; i++) {
		const struct tick *k = &p->y.ticks[i];
		double y = px_y(p, k->t, top);
		fprintf(o, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
			k->major ? "grid" : "grid minor", x0, y, x1, y);
		if (k->label[0]) {
			fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", x0 - 6,
				y + 4);
			esc(o, k->label);
			fputs("</text>", o);
		}
		fputc('\n', o);
	}
	fprintf(o,
		"<text class=\"title\" transform=\"translate(16 %.1f) rotate(-90)\" "
		"text-anchor=\"middle\">%s</text>\n</g>\n",
		(y0 + y1) / 2, p->y.title);

	/* The series: polylines split at error points, markers, error crosses. */
	char tip[160];
	for (size_t i = 0; i < p->ns; i++) {
		const struct series *s = &p->s[i];
		const char *col = tp_colour(s->tp);
		fputs("<g class=\"series\" data-transport=\"", o);
		esc(o, s->id);
		fprintf(o, "\" data-points=\"%zu\">\n", s->n);
		bool open = false;
		for (size_t j = 0; j < s->n; j++) {
			const struct pt *q = &s->pts[j];
			if (!in_range(p, q)) {
				if (open)
					fputs("\"/>\n", o);
				open = false;
				continue;
			}
			if (!open)
				fprintf(o,
					"<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
					"stroke-linejoin=\"round\" points=\"",
					col);
			fprintf(o, "%s%.1f,%.1f", open ? " " : "", px_x(p, q->tx),
				px_y(p, q->ty, top));
			open = true;
		}
		if (open)
			fputs("\"/>\n", o);
		for (size_t j = 0; j < s->n; j++) {
			const struct pt *q = &s->pts[j];
			const char *name = tp_name(r, s->tp, s->id);
			if (q->err && is_finite(q->tx) && q->tx >= p->x.t0 && q->tx <= p->x.t1) {
				double x = px_x(p, q->tx);
				fprintf(o,
					"<path class=\"error-point\" stroke=\"%s\" "
					"stroke-width=\"2.5\" "
					"d=\"M%.1f %.1fl10 10m0 -10l-10 10\"><title>",
					col, x - 5, y1 - 14);
				esc(o, name);
				fputs(": error: ", o);
				esc(o, q->err);
				fputs("</title></path>\n", o);
			} else if (p->markers && in_range(p, q)) {
				p->tip(tip, sizeof(tip), q);
				fprintf(
				    o,
				    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>",
				    px_x(p, q->tx), px_y(p, q->ty, top), col);
				esc(o, name);
				fputs(": ", o);
				esc(o, tip);
				fputs("</title></circle>\n", o);
			}
		}
		fputs("</g>\n", o);
	}
	/* Legend. */
	fputs("<g class=\"legend\">\n", o);
	for (size_t i = 0; i < p->ns; i++) {
		fprintf(o,
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"18\" height=\"4\" fill=\"%s\"/>"
			"<text x=\"%.1f\" y=\"%.1f\">",
			lpos[i][0], lpos[i][1] - 4, tp_colour(p->s[i].tp), lpos[i][0] + 24,
			lpos[i][1]);
		esc(o, tp_name(r, p->s[i].tp, p->s[i].id));
		fputs("</text>\n", o);
	}
	fputs("</g>\n</svg>\n", o);
}

/* Adds a series for entry ent (an object with "transport") with room for n points. */
static struct series *add_series(struct plot *p, struct report *r, const struct json *ent, size_t n)
{
	if (p->ns >= MAX_SERIES)
		return NULL;
	if (n > MAX_POINTS)
		n = MAX_POINTS;
	struct series *s = &p->s[p->ns];
	s->id = json_str(json_get(ent, "transport"));
	s->tp = tp_index(r, s->id);
	s->n = 0;
	s->pts = calloc(n ? n : 1, sizeof(*s->pts));
	if (!s->pts)
		return NULL;
	p->ns++;
	return s;
}

static void tip_cdf(char *buf, size_t n, const struct pt *q)
{
	snprintf(buf, n, "%.2f us, %.1f%%", q->x, q->y * 100);
}

static void tip_bw(char *buf, size_t n, const struct pt *q)
{
	char b[32], g[32];
	snprintf(buf, n, "%s: %s Gbit/s", fsize(b, sizeof(b), q->x), frate(g, sizeof(g), q->y));
}

static void tip_loss(char *buf, size_t n, const struct pt *q)
{
	char g[32];
	snprintf(buf, n, "%g%% loss: %s Gbit/s", q->x, frate(g, sizeof(g), q->y));
}

static void no_points(struct report *r)
{
	fputs("<p class=\"skipped\">No data points to plot.</p>\n", r->out);
}

/* ---- latency ---- */

static int latency_plot(struct report *r, const struct json *series)
{
	struct plot p = {.id = "plot-latency-cdf",
			 .title = "Latency CDF: fraction of round trips at or below a time",
			 .tip = tip_cdf};
	double lo = 0, hi = 0;
	int rc = 0;
	for (size_t i = 0; i < json_len(series); i++) {
		const struct json *ent = json_at(series, i);
		const struct json *cdf = json_get(ent, "cdf");
		if (json_get(ent, "error") || json_type(cdf) != JSON_ARRAY)
			continue;
		struct series *s = add_series(&p, r, ent, json_len(cdf));
		if (!s) {
			rc = p.ns >= MAX_SERIES ? 0 : -ENOMEM;
			break;
		}
		for (size_t j = 0; j < json_len(cdf) && s->n < MAX_POINTS; j++) {
			const struct json *pair = json_at(cdf, j);
			double x = json_num(json_at(pair, 0), -1),
			       y = json_num(json_at(pair, 1), -1);
			if (json_len(pair) != 2 || !(x > 0) || !(y >= 0 && y <= 1) || !is_finite(x))
				continue; /* not drawable on a log axis: leave it out */
			s->pts[s->n++] = (struct pt){.tx = lg10(x), .ty = y, .x = x, .y = y};
			if (lo == 0 || x < lo)
				lo = x;
			if (x > hi)
				hi = x;
		}
	}
	if (rc)
		goto out;
	if (hi <= 0) {
		no_points(r);
		goto out;
	}
	log10_axis(&p.x, lo, hi, fus);
	p.x.title = "round-trip time (log scale)";
	p.y.t0 = 0;
	p.y.t1 = 1;
	static const double yt[] = {0, 0.25, 0.5, 0.75, 0.9, 1};
	for (size_t i = 0; i < sizeof(yt) / sizeof(yt[0]); i++) {
		char b[16];
		snprintf(b, sizeof(b), "%g%%", yt[i] * 100);
		add_tick(&p.y, yt[i], true, b);
	}
	add_tick(&p.y, 0.99, false, NULL); /* the p99 line, unlabelled: too close to 100% */
	p.y.title = "fraction of samples (linear)";
	draw_plot(r, &p);
out:
	plot_free(&p);
	return rc;
}

static int section_latency(struct report *r)
{
	const struct json *sec = json_get(r->doc, "latency");
	char b[32];
	section_head(r, "latency", "Latency", sec);
	if (!section_ok(r, sec, "latency"))
		goto done;
	const struct json *series = json_get(sec, "series");
	double size = json_num(json_get(sec, "size"), -1);
	if (size >= 0)
		fprintf(r->out, "<p>Message size %s. All times in microseconds (us).</p>\n",
			fsize(b, sizeof(b), size));
	static const char *const cols[][2] = {
	    {"min_us", "min"},	 {"p50_us", "p50"},	{"p90_us", "p90"},
	    {"p99_us", "p99"},	 {"p999_us", "p99.9"},	{"max_us", "max"},
	    {"mean_us", "mean"}, {"stdev_us", "stdev"}, {"jitter_us", "jitter"}};
	const size_t ncols = sizeof(cols) / sizeof(cols[0]);
	fputs("<table id=\"table-latency\">\n<thead><tr><th scope=\"col\">Transport</th>"
	      "<th scope=\"col\">samples</th>",
	      r->out);
	for (size_t c = 0; c < ncols; c++)
		fprintf(r->out, "<th scope=\"col\">%s <span class=\"u\">us</span></th>",
			cols[c][1]);
	fputs("</tr></thead>\n<tbody>\n", r->out);
	for (size_t i = 0; i < json_len(series) && i < MAX_SERIES; i++) {
		const struct json *ent = json_at(series, i);
		fputs("<tr>", r->out);
		tp_cell(r, json_str(json_get(ent, "transport")));
		if (json_get(ent, "error")) {
			error_cell(r, json_str(json_get(ent, "error")), (int)ncols + 1);
		} else {
			fprintf(r->out, "<td>%s</td>",
				fnum(b, sizeof(b), json_num(json_get(ent, "samples"), NONE), 0));
			for (size_t c = 0; c < ncols; c++)
				fprintf(r->out, "<td>%s</td>",
					fnum(b, sizeof(b),
					     json_num(json_get(ent, cols[c][0]), NONE), 2));
		}
		fputs("</tr>\n", r->out);
	}
	fputs("</tbody>\n</table>\n<p class=\"note\">jitter = p99 &minus; p50.</p>\n", r->out);
	int rc = latency_plot(r, series);
	if (rc)
		return rc;
done:
	fputs("</section>\n", r->out);
	return 0;
}

/* ---- bandwidth and loss: points keyed by a number (size or loss rate) ---- */

/* The distinct values of key over every point of every series, ascending, at most
 * MAX_CATEGORIES; returns how many. Only finite values >= 0 count. */
static size_t categories(const struct json *series, const char *key, double *cat)
{
	size_t n = 0;
	for (size_t i = 0; i < json_len(series) && i < MAX_SERIES; i++) {
		const struct json *pts = json_get(json_at(series, i), "points");
		for (size_t j = 0; j < json_len(pts) && j < MAX_POINTS; j++) {
			double v = json_num(json_get(json_at(pts, j), key), -1);
			if (!is_finite(v) || v < 0)
				continue;
			size_t k = 0;
			while (k < n && cat[k] < v)
				k++;
			if (k < n && cat[k] == v)
				continue;
			if (n == MAX_CATEGORIES)
				continue; /* full: this value is left out */
			memmove(cat + k + 1, cat + k, (n - k) * sizeof(*cat));
			cat[k] = v;
			n++;
		}
	}
	return n;
}

/* The point of pts whose key equals v, or NULL. */
static const struct json *point_at(const struct json *pts, const char *key, double v)
{
	for (size_t j = 0; j < json_len(pts) && j < MAX_POINTS; j++)
		if (json_num(json_get(json_at(pts, j), key), -1) == v)
			return json_at(pts, j);
	return NULL;
}

/* Table rows = categories, columns = series; each cell shows the given fields (or the point's
 * error across them). */
static void point_table(struct report *r, const char *id, const struct json *series,
			const char *key, const double *cat, size_t ncat, const char *const *fields,
			const char *const *heads, size_t nf,
			const char *(*fmt_key)(char *, size_t, double))
{
	FILE *o = r->out;
	char b[32];
	size_t ns = json_len(series) < MAX_SERIES ? json_len(series) : MAX_SERIES;
	fprintf(o, "<table id=\"%s\">\n<thead><tr><th scope=\"col\" rowspan=\"%d\">%s</th>", id,
		nf > 1 ? 2 : 1, strcmp(key, "size") == 0 ? "Message size" : "Packet loss");
	for (size_t i = 0; i < ns; i++) {
		const char *tid = json_str(json_get(json_at(series, i), "transport"));
		int t = tp_index(r, tid);
		fprintf(o,
			"<th scope=\"colgroup\" colspan=\"%zu\"><span class=\"sw\" "
			"style=\"background:%s\"></span>",
			nf, tp_colour(t));
		esc(o, tp_name(r, t, tid));
		if (nf == 1)
			fprintf(o, " <span class=\"u\">%s</span>", heads[0]);
		fputs("</th>", o);
	}
	fputs("</tr>\n", o);
	if (nf > 1) {
		fputs("<tr>", o);
		for (size_t i = 0; i < ns; i++)
			for (size_t f = 0; f < nf; f++)
				fprintf(o, "<th scope=\"col\" class=\"u\">%s</th>", heads[f]);
		fputs("</tr>\n", o);
	}
	fputs("</thead>\n<tbody>\n", o);
	for (size_t c = 0; c < ncat; c++) {
		fprintf(o, "<tr><th scope=\"row\">%s</th>", fmt_key(b, sizeof(b), cat[c]));
		for (size_t i = 0; i < ns; i++) {
			const struct json *pt =
			    point_at(json_get(json_at(series, i), "points"), key, cat[c]);
			if (json_get(pt, "error")) {
				error_cell(r, json_str(json_get(pt, "error")), (int)nf);
				continue;
			}
			for (size_t f = 0; f < nf; f++)
				fprintf(
				    o, "<td>%s</td>",
				    frate(b, sizeof(b), json_num(json_get(pt, fields[f]), NONE)));
		}
		fputs("</tr>\n", o);
	}
	fputs("</tbody>\n</table>\n", o);
}

/* Fills p's series from the "points" of each entry: x from key, y from "gbps". xlog: x in
 * log2 units (sizes), else the index of the value in cat (categories). Points with y <= 0 are
 * left out when ylog. Returns 0 or -ENOMEM; *ylo / *yhi get the range of y drawn. */
static int fill_points(struct plot *p, struct report *r, const struct json *series, const char *key,
		       const double *cat, size_t ncat, bool xlog, bool ylog, double *ylo,
		       double *yhi)
{
	*ylo = 0;
	*yhi = 0;
	for (size_t i = 0; i < json_len(series) && i < MAX_SERIES; i++) {
		const struct json *ent = json_at(series, i);
		const struct json *pts = json_get(ent, "points");
		if (json_type(pts) != JSON_ARRAY)
			continue;
		struct series *s = add_series(p, r, ent, json_len(pts));
		if (!s)
			return -ENOMEM;
		for (size_t j = 0; j < json_len(pts) && s->n < MAX_POINTS; j++) {
			const struct json *pt = json_at(pts, j);
			double x = json_num(json_get(pt, key), -1);
			double y = json_num(json_get(pt, "gbps"), -1);
			size_t k = 0;
			while (k < ncat && cat[k] != x)
				k++;
			if (k == ncat || (xlog && !(x > 0)))
				continue; /* not a category (invalid, or beyond the cap) */
			double tx = xlog ? lg2(x) : (double)k;
			struct pt *q = &s->pts[s->n];
			if (json_get(pt, "error")) {
				const char *e = json_str(json_get(pt, "error"));
				*q = (struct pt){.tx = tx, .x = x, .err = e ? e : "error"};
				s->n++;
				continue;
			}
			if (!is_finite(y) || y < 0 || (ylog && y <= 0))
				continue;
			*q = (struct pt){.tx = tx, .ty = ylog ? lg10(y) : y, .x = x, .y = y};
			s->n++;
			if (*yhi == 0 || y < *ylo)
				*ylo = y;
			if (y > *yhi)
				*yhi = y;
		}
	}
	return 0;
}

static const char *fgbps(char *buf, size_t n, double v)
{
	return fplain(buf, n, v);
}

static int section_bandwidth(struct report *r)
{
	const struct json *sec = json_get(r->doc, "bandwidth");
	int rc = 0;
	section_head(r, "bandwidth", "Bandwidth", sec);
	if (!section_ok(r, sec, "bandwidth"))
		goto done;
	const struct json *series = json_get(sec, "series");
	double cat[MAX_CATEGORIES];
	size_t ncat = categories(series, "size", cat);
	struct plot p = {.id = "plot-bandwidth",
			 .title = "Bandwidth by message size",
			 .markers = true,
			 .tip = tip_bw};
	double lo, hi;
	rc = fill_points(&p, r, series, "size", cat, ncat, true, true, &lo, &hi);
	if (rc)
		goto free_plot;
	/* x: powers of two over the sizes present (one label per power of 4 when crowded). */
	double xlo = 0, xhi = 0;
	for (size_t c = 0; c < ncat; c++)
		if (cat[c] >= 1) {
			if (xlo == 0)
				xlo = cat[c];
			xhi = cat[c];
		}
	if (hi <= 0 || xlo == 0) {
		no_points(r);
	} else {
		p.x.t0 = flr(lg2(xlo));
		p.x.t1 = cel(lg2(xhi));
		if (p.x.t1 <= p.x.t0)
			p.x.t1 = p.x.t0 + 1;
		int span = (int)(p.x.t1 - p.x.t0);
		int step = span <= 12 ? 1 : span <= 24 ? 2 : (span + 11) / 12;
		for (int k = (int)p.x.t0; k <= (int)p.x.t1; k++) {
			char b[32];
			bool lab = k % step == 0; /* even exponents: 1 KiB, 64 KiB, 4 MiB */
			add_tick(&p.x, k, lab, lab ? fsize(b, sizeof(b), ipow(2, k)) : NULL);
		}
		p.x.title = "message size (bytes, log2 scale)";
		log10_axis(&p.y, lo, hi, fgbps);
		p.y.title = "throughput (Gbit/s, log scale)";
		draw_plot(r, &p);
	}
	static const char *const fields[] = {"gbps", "mpps"};
	static const char *const heads[] = {"Gbit/s", "Mpps"};
	point_table(r, "table-bandwidth", series, "size", cat, ncat, fields, heads, 2, fsize);
	fputs("<p class=\"note\">Gbit/s = 10<sup>9</sup> bit/s of payload; Mpps = million "
	      "messages per second.</p>\n",
	      r->out);
free_plot:
	plot_free(&p);
	if (rc)
		return rc;
done:
	fputs("</section>\n", r->out);
	return 0;
}

static int section_loss(struct report *r)
{
	const struct json *sec = json_get(r->doc, "loss");
	int rc = 0;
	char b[32];
	section_head(r, "loss", "Goodput under packet loss", sec);
	if (!section_ok(r, sec, "loss"))
		goto done;
	const char *link = json_str(json_get(sec, "link"));
	double size = json_num(json_get(sec, "size"), -1);
	if (link || size >= 0) {
		fputs("<p>", r->out);
		if (link) {
			fputs("Link: ", r->out);
			esc(r->out, link);
			fputs(". ", r->out);
		}
		if (size >= 0)
			fprintf(r->out, "Message size %s.", fsize(b, sizeof(b), size));
		fputs("</p>\n", r->out);
	}
	const struct json *series = json_get(sec, "series");
	double cat[MAX_CATEGORIES];
	size_t ncat = categories(series, "loss_pct", cat);
	struct plot p = {.id = "plot-loss",
			 .title = "Goodput by packet loss rate",
			 .markers = true,
			 .tip = tip_loss};
	double lo, hi;
	rc = fill_points(&p, r, series, "loss_pct", cat, ncat, false, false, &lo, &hi);
	if (rc)
		goto free_plot;
	if (ncat == 0) {
		no_points(r);
	} else {
		/* x: the measured rates as evenly spaced categories (0 has no place on a log axis,
		 * and the rates are chosen by decade anyway). */
		p.x.t0 = -0.5;
		p.x.t1 = (double)ncat - 0.5;
		for (size_t c = 0; c < ncat; c++)
			add_tick(&p.x, (double)c, true, fpct(b, sizeof(b), cat[c]));
		p.x.title = "packet loss (each direction, categories)";
		linear_axis(&p.y, hi);
		p.y.title = "goodput (Gbit/s, linear)";
		draw_plot(r, &p);
	}
	static const char *const fields[] = {"gbps"};
	static const char *const heads[] = {"Gbit/s"};
	point_table(r, "table-loss", series, "loss_pct", cat, ncat, fields, heads, 1, fpct);
free_plot:
	plot_free(&p);
	if (rc)
		return rc;
done:
	fputs("</section>\n", r->out);
	return 0;
}

/* ---- cpu and setup: one row per entry ---- */

static void simple_table(struct report *r, const char *sect, const char *title, const char *id,
			 const char *const (*cols)[3], size_t ncols)
{
	const struct json *sec = json_get(r->doc, sect);
	char b[32];
	section_head(r, sect, title, sec);
	if (!section_ok(r, sec, sect))
		goto done;
	const struct json *series = json_get(sec, "series");
	fprintf(r->out, "<table id=\"%s\">\n<thead><tr><th scope=\"col\">Transport</th>", id);
	for (size_t c = 0; c < ncols; c++) {
		fprintf(r->out, "<th scope=\"col\">%s", cols[c][1]);
		if (cols[c][2][0])
			fprintf(r->out, " <span class=\"u\">%s</span>", cols[c][2]);
		fputs("</th>", r->out);
	}
	fputs("</tr></thead>\n<tbody>\n", r->out);
	for (size_t i = 0; i < json_len(series) && i < MAX_SERIES * 8; i++) {
		const struct json *ent = json_at(series, i);
		fputs("<tr>", r->out);
		tp_cell(r, json_str(json_get(ent, "transport")));
		if (json_get(ent, "error")) {
			error_cell(r, json_str(json_get(ent, "error")), (int)ncols);
		} else {
			for (size_t c = 0; c < ncols; c++) {
				const struct json *v = json_get(ent, cols[c][0]);
				fputs("<td>", r->out);
				if (json_type(v) == JSON_STRING)
					esc(r->out, json_str(v));
				else
					fputs(fnum(b, sizeof(b), json_num(v, NONE),
						   strcmp(cols[c][0], "samples") ? 2 : 0),
					      r->out);
				fputs("</td>", r->out);
			}
		}
		fputs("</tr>\n", r->out);
	}
	fputs("</tbody>\n</table>\n", r->out);
done:
	fputs("</section>\n", r->out);
}

/* ---- page ---- */

static const char css[] =
    ":root{--fg:#1d2330;--muted:#5b6577;--line:#d9dee7;--bg:#fff;--band:#f5f7fa;--err:#b00020}"
    "*{box-sizing:border-box}"
    "body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"
    "'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif}"
    "main{max-width:1040px;margin:0 auto;padding:24px 28px 48px}"
    "h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 6px;padding-bottom:4px;"
    "border-bottom:2px solid var(--line)}"
    ".sub{color:var(--muted);margin:0 0 18px}"
    "dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 18px;margin:0 0 8px}"
    "dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}"
    ".what{color:var(--muted);margin:0 0 10px;font-style:italic}"
    "table{border-collapse:collapse;margin:10px 0;font-variant-numeric:tabular-nums;"
    "font-size:14px;display:block;max-width:100%;overflow-x:auto}"
    "th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:right;"
    "white-space:nowrap}"
    "thead th{background:var(--band);font-weight:600;border-bottom:2px solid var(--line)}"
    "thead th:first-child{text-align:left}"
    "th.l,td.l{text-align:left}"
    "th[scope=row]{text-align:left;font-weight:600}"
    "tbody tr:nth-child(even){background:#fafbfc}"
    ".u{color:var(--muted);font-weight:400;font-size:12px}"
    ".sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:7px;"
    "vertical-align:-1px}"
    "td.err{color:var(--err);text-align:left;white-space:normal}"
    ".skipped{background:#fff7e0;border-left:4px solid #e0a800;padding:8px 12px}"
    ".note{color:var(--muted);font-size:13px}"
    "ul.summary li{margin:4px 0}ul.errors li{color:var(--err)}"
    "svg.plot{display:block;max-width:100%;height:auto;margin:14px 0;font-size:12px;"
    "font-family:inherit}"
    "svg.plot .area{fill:#fcfdfe;stroke:#8a93a3}"
    "svg.plot .grid{stroke:#dde2ea;stroke-width:1}"
    "svg.plot .grid.minor{stroke:#eef1f5;stroke-dasharray:3 3}"
    "svg.plot text{fill:var(--fg)}svg.plot .title{fill:var(--muted);font-size:13px}"
    "svg.plot .error-point{fill:none}"
    "svg.plot .ref{stroke:#b00020;stroke-width:1.5;stroke-dasharray:6 4}"
    "svg.plot .reflabel{fill:#b00020}svg.plot .p50{stroke:#1d2330;stroke-width:2}"
    "svg.plot .err{fill:var(--err)}svg.plot .val{fill:var(--fg)}"
    "td.na{color:var(--muted)}a{color:#0b5cad}table.sc th,table.sc td{padding:4px 7px}"
    "svg.plot .val{paint-order:stroke;stroke:#fff;stroke-width:3px}"
    "h3.plot{font-size:15px;margin:22px 0 0}"
    "footer{margin-top:40px;color:var(--muted);font-size:12px}";

/* The page up to the text of its <title>. No script may run and nothing may be fetched: the
 * page is data only (CSP level 2). */
static void page_open(FILE *out)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
	      "style-src 'unsafe-inline'; img-src data:\">\n"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	      "<meta name=\"generator\" content=\"softrdma report\">\n"
	      "<link rel=\"icon\" href=\"data:,\">\n<title>",
	      out);
}

/* From the end of the <title> to the opening of <main>. */
static void page_body(FILE *out)
{
	fprintf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n<main>\n", css);
}

static void facts(struct report *r)
{
	FILE *o = r->out;
	const struct json *d = r->doc, *host = json_get(d, "host");
	char b[48];
	fputs("<dl class=\"facts\">\n", o);
	const struct {
		const char *name;
		const struct json *v;
	} strs[] = {{"Host", json_get(host, "name")},
		    {"Kernel", json_get(host, "kernel")},
		    {"Mode", json_get(d, "mode")},
		    {"Server", json_get(d, "server")},
		    {"Started", json_get(d, "started")}};
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		fprintf(o, "<dt>%s</dt><dd>", strs[i].name);
		esc(o, json_str(strs[i].v) ? json_str(strs[i].v) : "\u2013");
		fputs("</dd>\n", o);
	}
	fprintf(o, "<dt>CPUs</dt><dd>%s",
		fnum(b, sizeof(b), json_num(json_get(host, "cpus"), NONE), 0));
	if (json_str(json_get(host, "cpu_model"))) {
		fputs(" \u00d7 ", o);
		esc(o, json_str(json_get(host, "cpu_model")));
	}
	fputs("</dd>\n", o);
	fprintf(o, "<dt>Duration</dt><dd>%s%s</dd>\n",
		fduration(b, sizeof(b), json_num(json_get(d, "duration_s"), NONE)),
		json_bool(json_get(d, "quick"), false) ? " (quick run: fewer samples)" : "");
	fputs("</dl>\n", o);

	/* The transports and their colours, the key to every plot. */
	fputs("<table id=\"table-transports\">\n<thead><tr><th scope=\"col\">Transport</th>"
	      "<th scope=\"col\" class=\"l\">id</th><th scope=\"col\" class=\"l\">kind</th>"
	      "<th scope=\"col\" class=\"l\">device</th>"
	      "</tr></thead>\n<tbody>\n",
	      o);
	for (size_t i = 0; i < r->ntp; i++) {
		fputs("<tr>", o);
		tp_cell(r, r->tp[i].id);
		const char *cells[] = {r->tp[i].id, r->tp[i].kind, r->tp[i].device};
		for (size_t c = 0; c < 3; c++) {
			fputs("<td class=\"l\">", o);
			esc(o, cells[c] ? cells[c] : "\u2013");
			fputs("</td>", o);
		}
		fputs("</tr>\n", o);
	}
	fputs("</tbody>\n</table>\n", o);
}

static void string_list(struct report *r, const char *key, const char *cls, const char *none)
{
	const struct json *list = json_get(r->doc, key);
	size_t n = 0;
	for (size_t i = 0; i < json_len(list); i++)
		n += json_str(json_at(list, i)) != NULL;
	if (n == 0) {
		fprintf(r->out, "<p id=\"%s\">%s</p>\n", key, none);
		return;
	}
	fprintf(r->out, "<ul id=\"%s\" class=\"%s\">\n", key, cls);
	for (size_t i = 0; i < json_len(list); i++) {
		const char *s = json_str(json_at(list, i));
		if (!s)
			continue;
		fputs("<li>", r->out);
		esc(r->out, s);
		fputs("</li>\n", r->out);
	}
	fputs("</ul>\n", r->out);
}

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || !errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

int report_html(const struct json *doc, FILE *out, char *err, size_t errlen)
{
	struct report r = {.out = out, .doc = doc};
	int rc;
	seterr(err, errlen, "");
	if (json_type(doc) != JSON_OBJECT) {
		seterr(err, errlen,
		       "not a softrdma compare result: the top level is not an object");
		return -EINVAL;
	}
	if (report_is_scenario(doc))
		return report_scenarios_html(&doc, NULL, 1, out, err, errlen);
	const struct json *schema = json_get(doc, "schema");
	if (json_num(schema, -1) != 1) {
		if (json_type(schema) == JSON_NUMBER)
			seterr(err, errlen,
			       "schema version %g is not supported (this softrdma reads 1)",
			       json_num(schema, 0));
		else if (json_get(doc, "scenario") && json_get(doc, "rows"))
			seterr(err, errlen,
			       "a scenario result from before its format had \"tool\" and "
			       "\"schema\": run the scenario again");
		else
			seterr(err, errlen, "not a softrdma compare result: no \"schema\": 1");
		return -EINVAL;
	}
	const struct json *tps = json_get(doc, "transports");
	for (size_t i = 0; i < json_len(tps) && r.ntp < MAX_TRANSPORTS; i++) {
		const struct json *t = json_at(tps, i);
		r.tp[r.ntp++] = (struct transport){
		    json_str(json_get(t, "id")), json_str(json_get(t, "label")),
		    json_str(json_get(t, "kind")), json_str(json_get(t, "device"))};
	}

	const char *hostname = json_str(json_get(json_get(doc, "host"), "name"));
	const char *started = json_str(json_get(doc, "started"));
	page_open(out);
	fputs("softrdma compare", out);
	if (hostname) {
		fputs(": ", out);
		esc(out, hostname);
	}
	if (started) {
		fputs(", ", out);
		esc(out, started);
	}
	page_body(out);
	fputs("<header>\n<h1>", out);
	for (size_t i = 0; i < r.ntp; i++) {
		if (i)
			fputs(" vs ", out);
		esc(out, tp_name(&r, (int)i, r.tp[i].id));
	}
	if (r.ntp == 0)
		fputs("Transport comparison", out);
	fputs("</h1>\n<p class=\"sub\">softrdma compare: RDMA transports measured against the "
	      "raw UDP and TCP floors, in one run on the same machine.</p>\n",
	      out);
	facts(&r);
	fputs("</header>\n<section id=\"summary-section\">\n<h2>Summary</h2>\n", out);
	string_list(&r, "summary", "summary", "No summary in this result.");
	fputs("</section>\n", out);

	rc = section_latency(&r);
	if (!rc)
		rc = section_bandwidth(&r);
	if (rc) {
		seterr(err, errlen, "out of memory");
		return rc;
	}
	static const char *const cpu_cols[][3] = {{"test", "Test", ""},
						  {"client_us_per_msg", "client", "us/msg"},
						  {"server_us_per_msg", "server", "us/msg"}};
	simple_table(&r, "cpu", "CPU per message", "table-cpu", cpu_cols, 3);
	static const char *const setup_cols[][3] = {{"samples", "samples", ""},
						    {"p50_ms", "p50", "ms"},
						    {"p90_ms", "p90", "ms"},
						    {"max_ms", "max", "ms"}};
	simple_table(&r, "setup", "Connection set-up time", "table-setup", setup_cols, 4);
	rc = section_loss(&r);
	if (rc) {
		seterr(err, errlen, "out of memory");
		return rc;
	}
	fputs("<section id=\"errors-section\">\n<h2>Errors</h2>\n", out);
	string_list(&r, "errors", "errors", "No errors.");
	if (json_len(json_get(doc, "retried"))) {
		fputs("<h3>Retried</h3>\n<p>Measurements whose server was not there at first, and "
		      "why; each ran once more on another port.</p>\n",
		      out);
		string_list(&r, "retried", "errors", "");
	}
	fputs(
	    "</section>\n<footer>Generated by <code>softrdma report</code> from the JSON result of "
	    "<code>softrdma compare</code>",
	    out);
	const char *tool = json_str(json_get(doc, "tool"));
	if (tool && strcmp(tool, "softrdma compare") != 0) {
		fputs(" (the file says it was written by \u201c", out);
		esc(out, tool);
		fputs("\u201d)", out);
	}
	fputs(". Self-contained: no scripts, no external resources.</footer>\n</main>\n</body>\n"
	      "</html>\n",
	      out);
	if (fflush(out) || ferror(out)) {
		seterr(err, errlen, "write error");
		return -EIO;
	}
	return 0;
}

/* ==== Scenario results (report.h, second part) ====
 *
 * Parse, validate, render: sc_check reads and checks a whole file before a byte of the page is
 * written, so a malformed file is refused with the member at fault and the renderer below can
 * trust the types and ranges (it still treats every string as hostile). */

#define SC_TOOL	       "softrdma compare --scenario"
#define SC_MAX_FILES   64
#define SC_MAX_ROWS    64
#define SC_MAX_SENDERS 64
#define SC_MAX_NUM     1e15 /* any figure: far above a real one, far below overflow in x1000 */
#define SC_LABEL_CP    30   /* row labels in charts: code points shown before an ellipsis */
#define SC_CUT_MAX     64   /* the most esc_cut shows */

enum sc_kind { SC_INCAST, SC_VICTIM, SC_LOSS };
static const char *const sc_kind_name[] = {"incast", "victim", "loss"};

/* A scenario result that passed sc_check: the parameters the page shows, read once. */
struct sc_doc {
	const struct json *doc, *rows;
	const char *name; /* what to call the file (untrusted); NULL: none */
	enum sc_kind kind;
	double senders, rate_bps, seconds, msg, probe, loss, duration; /* NONE if absent */
	const char *started;
	size_t nrows, measured;
	bool probe_any; /* a measured row has probe_p99_us */
};

/* The figures of a measured row: the key and the upper bound of its value. */
static const struct {
	const char *key;
	double max;
} sc_figures[] = {
    {"throughput_gbps", SC_MAX_NUM},
    {"goodput_gbps", SC_MAX_NUM},
    {"jain", 1.01},
    {"lost", SC_MAX_NUM},
    {"probe_p50_us", SC_MAX_NUM},
    {"probe_p99_us", SC_MAX_NUM},
    {"victim_gbps", SC_MAX_NUM},
    {"victim_app_gbps", SC_MAX_NUM},
    {"drops", SC_MAX_NUM},
    {"marks", SC_MAX_NUM},
    {"cnps", SC_MAX_NUM},
    {"pauses", SC_MAX_NUM},
    {"pause_ms", SC_MAX_NUM},
    {"queue_max_kib", SC_MAX_NUM},
    {"resent", SC_MAX_NUM},
    {"sr_resent", SC_MAX_NUM},
    {"sacks", SC_MAX_NUM},
};

/* Colours by row id, the same in every section of a sweep; unknown ids are grey. */
static const char *const sc_ids[] = {"roce",	       "roce_pfc", "roce_dcqcn",
				     "roce_pfc_dcqcn", "roce_sr",  "iwarp"};

static const char *sc_colour(const char *id)
{
	for (size_t i = 0; id && i < sizeof(sc_ids) / sizeof(sc_ids[0]); i++)
		if (strcmp(id, sc_ids[i]) == 0)
			return palette[i % NPALETTE];
	return GREY_UNKWN;
}

/* Member key of o: *v its value if it is a number in [lo, hi], NONE if it is absent or null
 * (an error if required). Else -EINVAL with "WHEREkey: why" in err. */
static int sc_num(const struct json *o, const char *where, const char *key, double lo, double hi,
		  bool required, double *v, char *err, size_t errlen)
{
	const struct json *m = json_get(o, key);
	*v = NONE;
	if (json_type(m) == JSON_NULL) {
		if (!required)
			return 0;
		seterr(err, errlen, "%s\"%s\": missing", where, key);
		return -EINVAL;
	}
	if (json_type(m) != JSON_NUMBER) {
		seterr(err, errlen, "%s\"%s\": not a number", where, key);
		return -EINVAL;
	}
	double x = json_num(m, NONE);
	if (!(x >= lo && x <= hi)) {
		seterr(err, errlen, "%s\"%s\": %g is out of range (%g to %g)", where, key, x, lo,
		       hi);
		return -EINVAL;
	}
	*v = x;
	return 0;
}

/* Member key of o as a string: *v (NULL if absent or null and not required). */
static int sc_str(const struct json *o, const char *where, const char *key, bool required,
		  const char **v, char *err, size_t errlen)
{
	const struct json *m = json_get(o, key);
	*v = json_str(m);
	if (*v || (json_type(m) == JSON_NULL && !required))
		return 0;
	seterr(err, errlen, "%s\"%s\": %s", where, key,
	       json_type(m) == JSON_NULL ? "missing" : "not a string");
	return -EINVAL;
}

/* An array of at most SC_MAX_SENDERS figures in Gbit/s, or absent. */
static int sc_shares(const struct json *row, const char *where, const char *key, char *err,
		     size_t errlen)
{
	const struct json *a = json_get(row, key);
	if (json_type(a) == JSON_NULL)
		return 0;
	if (json_type(a) != JSON_ARRAY || json_len(a) > SC_MAX_SENDERS) {
		seterr(err, errlen, "%s\"%s\": not an array of at most %d numbers", where, key,
		       SC_MAX_SENDERS);
		return -EINVAL;
	}
	for (size_t i = 0; i < json_len(a); i++) {
		double x = json_num(json_at(a, i), -1);
		if (!(x >= 0 && x <= SC_MAX_NUM)) {
			seterr(err, errlen, "%s\"%s\"[%zu]: not a number from 0 to %g", where, key,
			       i, SC_MAX_NUM);
			return -EINVAL;
		}
	}
	return 0;
}

static int sc_check_row(struct sc_doc *d, size_t i, char *err, size_t errlen)
{
	const struct json *row = json_at(d->rows, i);
	char where[32];
	const char *s;
	double v;
	snprintf(where, sizeof(where), "rows[%zu].", i);
	if (json_type(row) != JSON_OBJECT) {
		seterr(err, errlen, "rows[%zu]: not an object", i);
		return -EINVAL;
	}
	if (sc_str(row, where, "id", true, &s, err, errlen) ||
	    sc_str(row, where, "label", true, &s, err, errlen))
		return -EINVAL;
	const struct json *ok = json_get(row, "ok");
	if (json_type(ok) != JSON_BOOL) {
		seterr(err, errlen, "%s\"ok\": %s", where,
		       json_type(ok) == JSON_NULL ? "missing" : "not true or false");
		return -EINVAL;
	}
	if (!json_bool(ok, false))
		return sc_str(row, where, "error", false, &s, err, errlen);
	for (size_t k = 0; k < sizeof(sc_figures) / sizeof(sc_figures[0]); k++) {
		bool required =
		    strcmp(sc_figures[k].key, "throughput_gbps") == 0 ||
		    (d->kind == SC_LOSS && strcmp(sc_figures[k].key, "goodput_gbps") == 0);
		if (sc_num(row, where, sc_figures[k].key, 0, sc_figures[k].max, required, &v, err,
			   errlen))
			return -EINVAL;
	}
	if (sc_shares(row, where, "shares_gbps", err, errlen) ||
	    sc_shares(row, where, "app_shares_gbps", err, errlen))
		return -EINVAL;
	d->measured++;
	d->probe_any |= json_type(json_get(row, "probe_p99_us")) == JSON_NUMBER;
	return 0;
}

/* Reads and checks d->doc (report.h); 0, or -EINVAL with the reason in err. */
static int sc_check(struct sc_doc *d, char *err, size_t errlen)
{
	const struct json *doc = d->doc;
	const char *s;
	if (json_type(doc) != JSON_OBJECT) {
		seterr(err, errlen, "not a scenario result: the top level is not an object");
		return -EINVAL;
	}
	if (!report_is_scenario(doc)) {
		const char *tool = json_str(json_get(doc, "tool"));
		if (tool && strcmp(tool, "softrdma compare") == 0)
			seterr(err, errlen,
			       "a compare result, which makes a page of its own: "
			       "several files must all be scenario results");
		else
			seterr(err, errlen,
			       "not a scenario result: \"tool\" is not \"" SC_TOOL "\"");
		return -EINVAL;
	}
	const struct json *schema = json_get(doc, "schema");
	if (json_num(schema, -1) != 1) {
		if (json_type(schema) == JSON_NUMBER)
			seterr(err, errlen,
			       "schema version %g is not supported (this softrdma reads 1)",
			       json_num(schema, 0));
		else
			seterr(err, errlen, "not a scenario result: no \"schema\": 1");
		return -EINVAL;
	}
	if (sc_str(doc, "", "scenario", true, &s, err, errlen))
		return -EINVAL;
	size_t k = 0;
	while (k < 3 && strcmp(s, sc_kind_name[k]))
		k++;
	if (k == 3) {
		seterr(err, errlen, "\"scenario\": not \"incast\", \"victim\" or \"loss\"");
		return -EINVAL;
	}
	d->kind = (enum sc_kind)k;
	if (sc_num(doc, "", "senders", 1, SC_MAX_SENDERS, true, &d->senders, err, errlen) ||
	    sc_num(doc, "", "rate_bps", 1, SC_MAX_NUM, true, &d->rate_bps, err, errlen) ||
	    sc_num(doc, "", "seconds", 0, 1e9, true, &d->seconds, err, errlen) ||
	    sc_num(doc, "", "message_bytes", 0, SC_MAX_NUM, false, &d->msg, err, errlen) ||
	    sc_num(doc, "", "probe_bytes", 0, SC_MAX_NUM, false, &d->probe, err, errlen) ||
	    sc_num(doc, "", "duration_s", 0, SC_MAX_NUM, false, &d->duration, err, errlen) ||
	    sc_num(doc, "", "loss", 0, 1, d->kind == SC_LOSS, &d->loss, err, errlen) ||
	    sc_str(doc, "", "started", false, &d->started, err, errlen))
		return -EINVAL;
	if ((double)(int)d->senders != d->senders) {
		seterr(err, errlen, "\"senders\": %g is not a whole number", d->senders);
		return -EINVAL;
	}
	d->rows = json_get(doc, "rows");
	if (json_type(d->rows) != JSON_ARRAY) {
		seterr(err, errlen, "\"rows\": %s",
		       json_type(d->rows) == JSON_NULL ? "missing" : "not an array");
		return -EINVAL;
	}
	d->nrows = json_len(d->rows);
	if (d->nrows == 0 || d->nrows > SC_MAX_ROWS) {
		seterr(err, errlen, "\"rows\": %zu rows (1 to %d)", d->nrows, SC_MAX_ROWS);
		return -EINVAL;
	}
	for (size_t i = 0; i < d->nrows; i++)
		if (sc_check_row(d, i, err, errlen))
			return -EINVAL;
	return 0;
}

bool report_is_scenario(const struct json *doc)
{
	const char *tool = json_str(json_get(doc, "tool"));
	return tool && strcmp(tool, SC_TOOL) == 0;
}

/* ---- scenario: text ---- */

/* A figure of row in display units (times scale), or NONE. */
static double fig(const struct json *row, const char *key, double scale)
{
	const struct json *v = json_get(row, key);
	return json_type(v) == JSON_NUMBER ? json_num(v, 0) * scale : NONE;
}

/* A rate in bit/s as "200 Mbit/s" or "25 Gbit/s". */
static const char *fbps(char *buf, size_t n, double bps)
{
	char b[32];
	if (bps >= 1e9)
		snprintf(buf, n, "%s Gbit/s", frate(b, sizeof(b), bps / 1e9));
	else
		snprintf(buf, n, "%s Mbit/s", frate(b, sizeof(b), bps / 1e6));
	return buf;
}

/* s, escaped, cut after max code points with an ellipsis (the input is valid UTF-8: the JSON
 * parser checked it). */
static void esc_cut(FILE *out, const char *s, size_t max)
{
	char buf[4 * SC_CUT_MAX + 1]; /* UTF-8: at most 4 bytes a code point */
	size_t cp = 0, i = 0;
	if (!s)
		return;
	if (max > SC_CUT_MAX)
		max = SC_CUT_MAX;
	for (; s[i] && i < sizeof(buf) - 1; i++) { /* the bound: should a tree hold bad UTF-8 */
		if (((unsigned char)s[i] & 0xc0) != 0x80 && cp++ == max)
			break;
		buf[i] = s[i];
	}
	buf[i] = '\0';
	esc(out, buf);
	if (s[i])
		fputs("\u2026", out);
}

static void sc_heading(FILE *o, const struct sc_doc *d)
{
	char r[48], b[32];
	unsigned n = (unsigned)d->senders;
	fprintf(o, "%s: %u sender%s \u2192 1 receiver", sc_kind_name[d->kind], n,
		n == 1 ? "" : "s");
	if (d->kind == SC_VICTIM)
		fputs(" and a victim flow", o);
	fprintf(o, ", %s port", fbps(r, sizeof(r), d->rate_bps));
	if (d->kind == SC_LOSS)
		fprintf(o, " dropping %s at random", fpct(b, sizeof(b), d->loss * 100));
	fprintf(o, ", %g s per row", d->seconds);
}

static const char *const sc_what[] = {
    [SC_INCAST] = "The senders write to one receiver through one switch port while a small "
		  "ping-pong (the probe) crosses the same port; once per fabric configuration, "
		  "each on a fresh switch.",
    [SC_VICTIM] = "The incast without the probe; the first sender also writes to a host whose "
		  "port is idle (the victim flow). It shares only its sender's link with the "
		  "congested traffic: PFC, pausing that sender, stops it too.",
    [SC_LOSS] = "The senders' flows through a switch that drops packets at random, in both "
		"directions, with a ping-pong (the probe) through the same port: RoCEv2 with "
		"go-back-N, with selective repeat, and iWARP on TCP.",
};

static void sc_facts(FILE *o, const struct sc_doc *d)
{
	char b[48];
	fputs("<dl class=\"facts\">\n", o);
	if (d->name) {
		fputs("<dt>File</dt><dd>", o);
		esc(o, d->name);
		fputs("</dd>\n", o);
	}
	fputs("<dt>Started</dt><dd>", o);
	esc(o, d->started ? d->started : "\u2013");
	fprintf(o, "</dd>\n<dt>Duration</dt><dd>%s</dd>\n", fduration(b, sizeof(b), d->duration));
	fprintf(o, "<dt>Senders</dt><dd>%u</dd>\n", (unsigned)d->senders);
	fprintf(o, "<dt>Port rate</dt><dd>%s</dd>\n", fbps(b, sizeof(b), d->rate_bps));
	fprintf(o, "<dt>Traffic per row</dt><dd>%g s</dd>\n", d->seconds);
	if (is_finite(d->msg))
		fprintf(o, "<dt>Messages</dt><dd>%s</dd>\n", fsize(b, sizeof(b), d->msg));
	if (is_finite(d->probe) && d->kind != SC_VICTIM)
		fprintf(o, "<dt>Probe</dt><dd>%s ping-pong</dd>\n", fsize(b, sizeof(b), d->probe));
	if (d->kind == SC_LOSS)
		fprintf(o, "<dt>Random loss</dt><dd>%s of the packets</dd>\n",
			fpct(b, sizeof(b), d->loss * 100));
	fprintf(o, "<dt>Rows measured</dt><dd>%zu of %zu</dd>\n</dl>\n", d->measured, d->nrows);
}

/* ---- scenario: the table ---- */

struct sc_col {
	const char *key; /* figure; NULL: a column with its own code (shares) */
	const char *head, *unit;
	double scale; /* display = figure x scale */
	int dec;
	bool roce; /* RoCE only: absent in iWARP rows, whose repairs are TCP's */
};

static const struct sc_col incast_cols[] = {
    {"throughput_gbps", "through", "Mbit/s", 1e3, 1, false},
    {NULL, "shares", "Mbit/s", 1e3, 1, false},
    {"jain", "Jain", "", 1, 3, false},
    {"probe_p50_us", "probe p50", "us", 1, 1, false},
    {"probe_p99_us", "probe p99", "us", 1, 1, false},
    {"drops", "drops", "pkts", 1, 0, false},
    {"marks", "marks", "pkts", 1, 0, false},
    {"cnps", "CNPs", "pkts", 1, 0, false},
    {"pause_ms", "paused", "ms", 1, 1, false},
    {"resent", "resent", "pkts", 1, 0, true},
};

static const struct sc_col victim_cols[] = {
    {"throughput_gbps", "through", "Mbit/s", 1e3, 1, false},
    {NULL, "shares", "Mbit/s", 1e3, 1, false},
    {"jain", "Jain", "", 1, 3, false},
    {"victim_gbps", "victim", "Mbit/s", 1e3, 1, false},
    {"drops", "drops", "pkts", 1, 0, false},
    {"marks", "marks", "pkts", 1, 0, false},
    {"cnps", "CNPs", "pkts", 1, 0, false},
    {"pause_ms", "paused", "ms", 1, 1, false},
    {"resent", "resent", "pkts", 1, 0, true},
};

static const struct sc_col loss_cols[] = {
    {"goodput_gbps", "goodput", "Mbit/s", 1e3, 1, false},
    {"throughput_gbps", "on the wire", "Mbit/s", 1e3, 1, false},
    {"probe_p50_us", "probe p50", "us", 1, 1, false},
    {"probe_p99_us", "probe p99", "us", 1, 1, false},
    {"lost", "lost", "pkts", 1, 0, false},
    {"resent", "resent", "pkts", 1, 0, true},
    {"sr_resent", "holes", "pkts", 1, 0, true},
    {"sacks", "SACKs", "", 1, 0, true},
};

static const char *const sc_notes[] = {
    [SC_INCAST] = "through: what the switch delivered from the senders (IP bytes, while all of "
		  "them send), summed; shares: each sender's part; Jain: the senders' fairness "
		  "(1: equal shares); probe: the ping-pong's round trip through the congested "
		  "port; drops: the switch's and the hosts' queues; marks: ECN marks at the "
		  "congested port; CNPs: priority-6 packets the switch carried; paused: the "
		  "senders' PFC pause time, summed; resent: the RoCE senders' retransmitted "
		  "packets (iWARP's are TCP's own).",
    [SC_VICTIM] = "through, shares, Jain: as in incast, for the congested flows; victim: the "
		  "victim flow at its receiver's port; drops, marks, CNPs, paused, resent: as in "
		  "incast.",
    [SC_LOSS] = "goodput: the senders' own figures (an iWARP SEND counts once TCP took it); on "
		"the wire: what crossed the port, resends included; lost: packets the switch "
		"dropped at random; resent: request packets sent again (go-back-N's and selective "
		"repeat's); holes: those selective repeat sent for a SACK's hole; SACKs: the ones "
		"the senders took.",
};

static void sc_label_cell(FILE *o, const struct json *row)
{
	const char *id = json_str(json_get(row, "id"));
	fprintf(o, "<th scope=\"row\" data-row=\"");
	esc(o, id);
	fprintf(o, "\"><span class=\"sw\" style=\"background:%s\"></span>", sc_colour(id));
	esc(o, json_str(json_get(row, "label")));
	fputs("</th>", o);
}

static void sc_table(FILE *o, const struct sc_doc *d, size_t k)
{
	const struct sc_col *cols = d->kind == SC_LOSS	   ? loss_cols
				    : d->kind == SC_VICTIM ? victim_cols
							   : incast_cols;
	size_t ncols = d->kind == SC_LOSS     ? sizeof(loss_cols) / sizeof(loss_cols[0])
		       : d->kind == SC_VICTIM ? sizeof(victim_cols) / sizeof(victim_cols[0])
					      : sizeof(incast_cols) / sizeof(incast_cols[0]);
	char b[48];
	fprintf(o,
		"<table id=\"table-scenario-%zu\" class=\"sc\">\n<thead><tr><th "
		"scope=\"col\">Fabric</th>",
		k);
	for (size_t c = 0; c < ncols; c++) /* the unit under the name: a narrower table */
		fprintf(o, "<th scope=\"col\">%s<br><span class=\"u\">%s</span></th>", cols[c].head,
			cols[c].unit);
	fputs("</tr></thead>\n<tbody>\n", o);
	for (size_t i = 0; i < d->nrows; i++) {
		const struct json *row = json_at(d->rows, i);
		const char *id = json_str(json_get(row, "id"));
		bool iwarp = strncmp(id, "iwarp", 5) == 0;
		fputs("<tr>", o);
		sc_label_cell(o, row);
		if (!json_bool(json_get(row, "ok"), false)) {
			const char *e = json_str(json_get(row, "error"));
			fprintf(o, "<td class=\"err\" colspan=\"%zu\">not measured: ", ncols);
			esc(o, e ? e : "no reason given");
			fputs("</td></tr>\n", o);
			continue;
		}
		for (size_t c = 0; c < ncols; c++) {
			const struct sc_col *col = &cols[c];
			if (!col->key) { /* the shares, one per sender */
				const struct json *sh = json_get(row, "shares_gbps");
				fputs("<td>", o);
				for (size_t j = 0; j < json_len(sh); j++)
					fprintf(o, "%s%s", j ? " / " : "",
						fnum(b, sizeof(b),
						     json_num(json_at(sh, j), 0) * 1e3, col->dec));
				fputs(json_len(sh) ? "</td>" : "\u2013</td>", o);
				continue;
			}
			double v = fig(row, col->key, col->scale);
			if (!is_finite(v) && col->roce && iwarp)
				fputs(strcmp(col->key, "sr_resent")
					  ? "<td class=\"na\" title=\"TCP's own, not "
					    "counted\">TCP's</td>"
					  : "<td class=\"na\">\u2013</td>",
				      o);
			else
				fprintf(o, "<td>%s</td>", fnum(b, sizeof(b), v, col->dec));
		}
		fputs("</tr>\n", o);
	}
	fputs("</tbody>\n</table>\n<p class=\"note\">", o);
	fputs(sc_notes[d->kind], o);
	fputs("</p>\n", o);
}

/* ---- scenario: bar charts ---- */

#define BLEFT  210.0 /* row labels */
#define BRIGHT 96.0  /* room for the value after the longest bar */
#define BTOP   34.0  /* room for the reference line's label */
#define BROW   30.0
#define BBAR   18.0
#define BBOT   54.0

struct bar {
	const char *id, *label, *err; /* owned by the tree; err: the row was not measured */
	bool measured;
	double v, mark; /* the bar and a marker on it (display units); NONE: none */
};

struct barchart {
	char id[40];
	const char *title, *xtitle, *unit; /* static text */
	bool log;
	double ref; /* a reference line (display units), NONE: none */
	const char *ref_what;
	struct bar b[SC_MAX_ROWS];
	size_t n;
	struct axis x;
};

static double bar_px(const struct barchart *c, double v)
{
	double t = c->log ? lg10(v) : v;
	return BLEFT + (t - c->x.t0) / (c->x.t1 - c->x.t0) * (PW - BLEFT - BRIGHT);
}

/* The bars of chart c from figure key of each row (times scale); mark_key (may be NULL) for
 * the marker. Returns whether any bar has a value to draw. */
static bool bars_fill(struct barchart *c, const struct sc_doc *d, const char *key,
		      const char *mark_key, double scale)
{
	double lo = 0, hi = 0;
	c->n = 0;
	for (size_t i = 0; i < d->nrows && c->n < SC_MAX_ROWS; i++) {
		const struct json *row = json_at(d->rows, i);
		struct bar *b = &c->b[c->n++];
		b->id = json_str(json_get(row, "id"));
		b->label = json_str(json_get(row, "label"));
		b->measured = json_bool(json_get(row, "ok"), false);
		b->err = b->measured ? NULL : json_str(json_get(row, "error"));
		b->v = b->measured ? fig(row, key, scale) : NONE;
		b->mark = b->measured && mark_key ? fig(row, mark_key, scale) : NONE;
		const double vals[] = {b->v, b->mark};
		for (size_t j = 0; j < 2; j++) {
			double v = vals[j];
			if (!is_finite(v) || (c->log && v <= 0))
				continue;
			if (hi == 0 || v < lo)
				lo = v;
			if (v > hi)
				hi = v;
		}
	}
	if (is_finite(c->ref) && c->ref > hi)
		hi = c->ref;
	if (c->log) {
		if (hi <= 0)
			return false;
		log10_axis(&c->x, lo / 2, hi, fus); /* lo / 2: the shortest bar still shows */
	} else {
		linear_axis(&c->x, hi * 1.05); /* room beside a bar at the port's rate */
	}
	return hi > 0 || !c->log;
}

/* A bar's value: two or three significant digits, no more than a bar's length can show. */
static const char *fbar(char *buf, size_t n, double v)
{
	if (v >= 10)
		snprintf(buf, n, "%.0f", v);
	else if (v >= 1)
		snprintf(buf, n, "%.1f", v);
	else
		snprintf(buf, n, "%.2g", v);
	return buf;
}

/* The label beside a bar: short; times from 1 ms on in ms (the tooltip has the figure). */
static const char *bar_label(char *buf, size_t n, const struct barchart *c, double v)
{
	char b[32];
	if (strcmp(c->unit, "us") == 0)
		snprintf(buf, n, "%s %s", fbar(b, sizeof(b), v >= 1000 ? v / 1000 : v),
			 v >= 1000 ? "ms" : "us");
	else
		fbar(buf, n, v);
	return buf;
}

static void bars_draw(FILE *o, const struct barchart *c)
{
	double h = BTOP + (double)c->n * BROW + BBOT, y1 = BTOP + (double)c->n * BROW;
	char v[48], m[48];
	fprintf(o, "<h3 class=\"plot\">%s</h3>\n", c->title);
	fprintf(o,
		"<svg id=\"%s\" class=\"plot bars\" xmlns=\"http://www.w3.org/2000/svg\" "
		"viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" role=\"img\" "
		"aria-labelledby=\"%s-title\">\n<title id=\"%s-title\">%s</title>\n",
		c->id, PW, h, PW, h, c->id, c->id, c->title);
	fprintf(o, "<rect class=\"area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
		BLEFT, BTOP, PW - BLEFT - BRIGHT, y1 - BTOP);
	fputs("<g class=\"axis x\">\n", o);
	for (size_t i = 0; i < c->x.nticks; i++) {
		const struct tick *k = &c->x.ticks[i];
		double x = BLEFT + (k->t - c->x.t0) / (c->x.t1 - c->x.t0) * (PW - BLEFT - BRIGHT);
		fprintf(o, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
			k->major ? "grid" : "grid minor", x, BTOP, x, y1);
		if (k->label[0]) {
			fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", x,
				y1 + 18);
			esc(o, k->label);
			fputs("</text>", o);
		}
		fputc('\n', o);
	}
	fprintf(o,
		"<text class=\"title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n"
		"</g>\n",
		(BLEFT + PW - BRIGHT) / 2, h - 14, c->xtitle);
	for (size_t i = 0; i < c->n; i++) {
		const struct bar *b = &c->b[i];
		double y = BTOP + (double)i * BROW + (BROW - BBAR) / 2, ty = y + BBAR / 2 + 4;
		fprintf(o, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">", BLEFT - 8, ty);
		esc_cut(o, b->label, SC_LABEL_CP);
		fputs("<title>", o);
		esc(o, b->label);
		fputs("</title></text>\n", o);
		if (!b->measured) {
			fputs("<g class=\"bar error\" data-row=\"", o);
			esc(o, b->id);
			fprintf(o, "\"><text class=\"err\" x=\"%.1f\" y=\"%.1f\">not measured: ",
				BLEFT + 6, ty);
			esc_cut(o, b->err ? b->err : "no reason given", SC_CUT_MAX);
			fputs("<title>", o);
			esc(o, b->err ? b->err : "no reason given");
			fputs("</title></text></g>\n", o);
			continue;
		}
		if (!is_finite(b->v)) {
			fputs("<g class=\"bar missing\" data-row=\"", o);
			esc(o, b->id);
			fprintf(
			    o,
			    "\"><text class=\"val\" x=\"%.1f\" y=\"%.1f\">no figure</text></g>\n",
			    BLEFT + 6, ty);
			continue;
		}
		bool drawn = !c->log || b->v > 0;
		double x = drawn ? bar_px(c, b->v) : BLEFT;
		bar_label(v, sizeof(v), c, b->v);
		fputs("<g class=\"bar\" data-row=\"", o);
		esc(o, b->id);
		fprintf(o, "\">");
		if (drawn) {
			fprintf(o,
				"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
				"fill=\"%s\"><title>",
				BLEFT, y, x - BLEFT, BBAR, sc_colour(b->id));
			esc(o, b->label);
			fprintf(o, ": %s %s", frate(m, sizeof(m), b->v), c->unit);
			if (is_finite(b->mark))
				fprintf(o, " (p50 %s %s)", frate(m, sizeof(m), b->mark), c->unit);
			fputs("</title></rect>", o);
		}
		if (is_finite(b->mark) && (!c->log || b->mark > 0)) {
			double xm = bar_px(c, b->mark);
			fprintf(o,
				"<line class=\"p50\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				"y2=\"%.1f\"/>",
				xm, y - 2, xm, y + BBAR + 2);
		}
		fprintf(o, "<text class=\"val\" x=\"%.1f\" y=\"%.1f\">%s</text></g>\n", x + 6, ty,
			v);
	}
	if (is_finite(c->ref)) {
		double x = bar_px(c, c->ref);
		char r[48];
		fprintf(o,
			"<line class=\"ref\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
			"<text class=\"reflabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s "
			"%s %s</text>\n",
			x, BTOP - 8, x, y1, x, BTOP - 12, c->ref_what, fbar(r, sizeof(r), c->ref),
			c->unit);
	}
	fputs("</svg>\n", o);
}

static void sc_charts(FILE *o, const struct sc_doc *d, size_t k)
{
	struct barchart c;
	double port = d->rate_bps / 1e6;
	c = (struct barchart){.unit = "Mbit/s", .ref = port, .ref_what = "port"};
	snprintf(c.id, sizeof(c.id), "plot-throughput-%zu", k);
	if (d->kind == SC_LOSS) {
		c.title = "Goodput per fabric, the port rate as a dashed line";
		c.xtitle = "goodput (Mbit/s, linear)";
	} else {
		c.title = "Throughput through the congested port per fabric, the port rate as a "
			  "dashed line";
		c.xtitle = "throughput (Mbit/s, linear)";
	}
	if (bars_fill(&c, d, d->kind == SC_LOSS ? "goodput_gbps" : "throughput_gbps", NULL, 1e3))
		bars_draw(o, &c);
	if (d->kind == SC_VICTIM) {
		c = (struct barchart){.unit = "Mbit/s", .ref = port, .ref_what = "port"};
		snprintf(c.id, sizeof(c.id), "plot-victim-%zu", k);
		c.title = "The victim flow per fabric (its own path is idle), the port rate as a "
			  "dashed line";
		c.xtitle = "victim flow (Mbit/s, linear)";
		if (bars_fill(&c, d, "victim_gbps", NULL, 1e3))
			bars_draw(o, &c);
	}
	if (d->probe_any) {
		c = (struct barchart){.unit = "us", .ref = NONE, .log = true};
		snprintf(c.id, sizeof(c.id), "plot-probe-%zu", k);
		c.title = "The probe's round trip per fabric: p99 as the bar, p50 as a dark line";
		c.xtitle = "probe round trip (us, log scale)";
		if (bars_fill(&c, d, "probe_p99_us", "probe_p50_us", 1))
			bars_draw(o, &c);
	}
}

static void sc_section(FILE *o, const struct sc_doc *d, size_t k)
{
	fprintf(o, "<section id=\"scenario-%zu\" class=\"scenario\" data-scenario=\"%s\">\n<h2>", k,
		sc_kind_name[d->kind]);
	sc_heading(o, d);
	fprintf(o, "</h2>\n<p class=\"what\">%s</p>\n", sc_what[d->kind]);
	sc_facts(o, d);
	sc_table(o, d, k);
	sc_charts(o, d, k);
	fputs("</section>\n", o);
}

/* The index of a sweep: one row per file, linked to its section. */
static void sc_index(FILE *o, const struct sc_doc *d, size_t n)
{
	char b[48];
	fputs("<table id=\"table-scenarios\">\n<thead><tr><th scope=\"col\">Scenario</th>"
	      "<th scope=\"col\" class=\"l\">file</th><th scope=\"col\">senders</th>"
	      "<th scope=\"col\">port</th><th scope=\"col\">loss</th>"
	      "<th scope=\"col\">per row</th><th scope=\"col\">measured</th></tr></thead>\n"
	      "<tbody>\n",
	      o);
	for (size_t i = 0; i < n; i++) {
		fprintf(o,
			"<tr><th scope=\"row\"><a href=\"#scenario-%zu\">%s</a></th>"
			"<td class=\"l\">",
			i + 1, sc_kind_name[d[i].kind]);
		esc(o, d[i].name ? d[i].name : "\u2013");
		fprintf(o, "</td><td>%u</td><td>%s</td>", (unsigned)d[i].senders,
			fbps(b, sizeof(b), d[i].rate_bps));
		fprintf(o, "<td>%s</td>",
			d[i].kind == SC_LOSS ? fpct(b, sizeof(b), d[i].loss * 100) : "\u2013");
		fprintf(o, "<td>%g s</td><td>%zu of %zu</td></tr>\n", d[i].seconds, d[i].measured,
			d[i].nrows);
	}
	fputs("</tbody>\n</table>\n", o);
}

int report_scenarios_html(const struct json *const *docs, const char *const *names, size_t n,
			  FILE *out, char *err, size_t errlen)
{
	struct sc_doc d[SC_MAX_FILES];
	char why[200];
	seterr(err, errlen, "");
	if (n == 0 || n > SC_MAX_FILES) {
		seterr(err, errlen, "%zu scenario results: 1 to %d in one page", n, SC_MAX_FILES);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		d[i] = (struct sc_doc){.doc = docs[i], .name = names ? names[i] : NULL};
		if (sc_check(&d[i], why, sizeof(why)) == 0)
			continue;
		if (n == 1 && !d[i].name)
			seterr(err, errlen, "%s", why);
		else if (d[i].name)
			seterr(err, errlen, "%s: %s", d[i].name, why);
		else
			seterr(err, errlen, "result %zu: %s", i + 1, why);
		return -EINVAL;
	}

	page_open(out);
	fputs("softrdma scenarios:", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s %s", i ? "," : "", sc_kind_name[d[i].kind]);
	if (d[0].started) {
		fputs(", ", out);
		esc(out, d[0].started);
	}
	page_body(out);
	fputs("<header>\n<h1>Fabric scenarios</h1>\n<p class=\"sub\">softrdma compare --scenario: "
	      "senders in network namespaces through a user-space switch, one row per fabric "
	      "configuration, each on a fresh switch.</p>\n",
	      out);
	if (n > 1)
		sc_index(out, d, n);
	fputs("</header>\n", out);
	for (size_t i = 0; i < n; i++)
		sc_section(out, &d[i], i + 1);
	fputs("<footer>Generated by <code>softrdma report</code> from the JSON result", out);
	fputs(n > 1 ? "s" : "", out);
	fputs(" of <code>softrdma compare --scenario</code>. Self-contained: no scripts, no "
	      "external resources.</footer>\n</main>\n</body>\n</html>\n",
	      out);
	if (fflush(out) || ferror(out)) {
		seterr(err, errlen, "write error");
		return -EIO;
	}
	return 0;
}

/* ---- the command ---- */

static const char *const report_usage =
    "usage: softrdma report RESULT.json [-o FILE.html]\n"
    "       softrdma report SCENARIO.json... -o FILE.html\n"
    "\n"
    "Writes a self-contained HTML page (no scripts, no external files) of a `softrdma compare`\n"
    "result: run facts, summary, latency table and CDF plot, bandwidth by message size, CPU per\n"
    "message, connection set-up time, goodput under packet loss and the errors. Of the results\n"
    "of `softrdma compare --scenario ... --json FILE` (one or several, e.g. a sweep's: one page\n"
    "with a section each): the parameters, the rows with their units, bar charts of throughput\n"
    "(loss: goodput) against the port rate and of the probe's p99.\n"
    "  -o, --output FILE   where to write the page (default, for one file: RESULT.html beside\n"
    "                      RESULT.json; '-' for standard output)\n"
    "  -h, --help          this text\n"
    "Exit status: 0 done, 1 unreadable or invalid result, 2 bad usage.\n";

/* RESULT.json -> RESULT.html; any other name gets .html appended. Caller frees. */
static char *default_output(const char *in)
{
	size_t n = strlen(in);
	if (n > 5 && strcmp(in + n - 5, ".json") == 0)
		n -= 5;
	char *o = malloc(n + 6);
	if (o) {
		memcpy(o, in, n);
		memcpy(o + n, ".html", 6);
	}
	return o;
}

int cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	const char *outpath = NULL;
	int c;
	optind = 0; /* glibc: 0 also resets the state of a previous parse */
	opterr = 0; /* our messages, with the command's name */
	while ((c = getopt_long(argc, argv, ":o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			outpath = optarg;
			break;
		case 'h':
			fputs(report_usage, stdout);
			return 0;
		case ':':
			fprintf(stderr, "softrdma report: %s needs a file name\n%s",
				argv[optind - 1], report_usage);
			return 2;
		default:
			fprintf(stderr, "softrdma report: unknown option %s\n%s", argv[optind - 1],
				report_usage);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "softrdma report: missing RESULT.json\n%s", report_usage);
		return 2;
	}
	size_t nin = (size_t)(argc - optind);
	if (nin > SC_MAX_FILES) {
		fprintf(stderr, "softrdma report: %zu result files: at most %d in one page\n", nin,
			SC_MAX_FILES);
		return 2;
	}
	if (nin > 1 && !outpath) {
		fprintf(stderr,
			"softrdma report: several result files make one page: name it with -o "
			"FILE.html\n%s",
			report_usage);
		return 2;
	}
	if (outpath && !outpath[0]) {
		fprintf(stderr, "softrdma report: -o needs a file name\n");
		return 2;
	}
	const char *in = argv[optind];
	int status = 1;
	struct json *doc[SC_MAX_FILES] = {NULL};
	const struct json *cdoc[SC_MAX_FILES];
	struct json_error jerr;
	char *page = NULL, *defout = NULL;
	size_t pagelen = 0;
	int rc = 0;
	for (size_t i = 0; i < nin; i++) {
		const char *path = argv[optind + (int)i];
		rc = json_parse_file(path, &doc[i], &jerr);
		if (rc == -EINVAL)
			fprintf(stderr, "softrdma report: %s:%d:%d: %s\n", path, jerr.line,
				jerr.column, jerr.msg);
		else if (rc)
			fprintf(stderr, "softrdma report: %s: %s\n", path, jerr.msg);
		if (rc)
			goto free_doc;
		cdoc[i] = doc[i];
	}
	/* Render into memory first: a result that cannot be reported leaves no half page behind,
	 * and an existing report is only replaced by a complete one. */
	FILE *mem = open_memstream(&page, &pagelen);
	if (!mem) {
		fprintf(stderr, "softrdma report: out of memory\n");
		goto free_doc;
	}
	char err[512];
	if (nin == 1)
		rc = report_html(cdoc[0], mem, err, sizeof(err));
	else
		rc = report_scenarios_html(cdoc, (const char *const *)(argv + optind), nin, mem,
					   err, sizeof(err));
	if (fclose(mem) && !rc) {
		rc = -ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
	}
	if (rc) {
		if (nin == 1)
			fprintf(stderr, "softrdma report: %s: %s\n", in, err);
		else
			fprintf(stderr, "softrdma report: %s\n", err);
		goto free_page;
	}
	if (!outpath) {
		defout = default_output(in);
		if (!defout) {
			fprintf(stderr, "softrdma report: out of memory\n");
			goto free_page;
		}
		outpath = defout;
	}
	bool to_stdout = strcmp(outpath, "-") == 0;
	FILE *f = to_stdout ? stdout : fopen(outpath, "w");
	if (!f) {
		fprintf(stderr, "softrdma report: cannot write %s: %s\n", outpath, strerror(errno));
		goto free_page;
	}
	size_t w = fwrite(page, 1, pagelen, f);
	int wr_err = w != pagelen || fflush(f) != 0 || ferror(f);
	int saved = errno;
	if (!to_stdout && fclose(f) != 0) {
		wr_err = 1;
		saved = errno;
	}
	if (wr_err) {
		fprintf(stderr, "softrdma report: cannot write %s: %s\n", outpath, strerror(saved));
		goto free_page;
	}
	if (!to_stdout)
		fprintf(stderr, "softrdma report: wrote %s\n", outpath);
	status = 0;
free_page:
	free(page);
	free(defout);
free_doc:
	for (size_t i = 0; i < nin; i++)
		json_free(doc[i]);
	return status;
}
