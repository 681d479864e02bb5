/* tools/report: the HTML page of a compare result. On tests/data/compare_sample.json: every
 * table (right ids, row counts and values with their formatting), the three plots (series per
 * transport, points per series, error markers, axis labels), run facts, summary and errors, and
 * that the page is self-contained (no script, no external URL). On compare_hostile.json: no
 * markup from the data survives (every string escaped), skipped / missing / malformed sections
 * show their reason. Then the refusals (not an object, wrong schema), a write error, random
 * mutations of the sample (seeded) that must render safely, and the `softrdma report` command
 * line (cmd_report): help, usage errors, unreadable and invalid files, default output name.
 * Scenario results (softrdma compare --scenario): incast, victim and loss each render with their
 * figures in the table, a row not measured with its hostile error escaped, and their bar charts;
 * several files make one page with a section each; malformed ones (wrong types, no rows,
 * another schema, out-of-range numbers) are refused with the member at fault and nothing
 * written; seeded mutations are refused or rendered safely; and the command line with several
 * files. */
#define _GNU_SOURCE /* strcasestr */
#include "check.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/json.h"
#include "tools/report.h"
#include "tools/tools.h"

static uint64_t rng;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the printed seed. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

/* The page for a parsed doc; rc gets report_html's result. Caller frees. */
static char *render(const struct json *doc, int *rc, char *err, size_t errlen)
{
	char *page = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&page, &len);
	REQUIRE(f);
	*rc = report_html(doc, f, err, errlen);
	REQUIRE(fclose(f) == 0);
	return page;
}

static char *render_file(const char *path)
{
	struct json *doc;
	struct json_error e;
	REQUIRE(json_parse_file(path, &doc, &e) == 0);
	char err[128];
	int rc;
	char *page = render(doc, &rc, err, sizeof(err));
	CHECK_EQ(rc, 0);
	json_free(doc);
	return page;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0, k = strlen(needle);
	for (const char *p = hay; (p = strstr(p, needle)); p += k)
		n++;
	return n;
}

/* Copy of the element that starts at the first `start` (e.g. id="table-cpu") up to the next
 * `end` (e.g. "</table>"); "" if absent. Caller frees. */
static char *element(const char *html, const char *start, const char *end)
{
	const char *a = strstr(html, start);
	const char *b = a ? strstr(a, end) : NULL;
	size_t n = a && b ? (size_t)(b - a) : 0;
	char *s = malloc(n + 1);
	REQUIRE(s);
	memcpy(s, a, n);
	s[n] = '\0';
	return s;
}

/* Rows of the tbody of table id. */
static size_t table_rows(const char *html, const char *id)
{
	char key[64];
	snprintf(key, sizeof(key), "id=\"%s\"", id);
	char *t = element(html, key, "</table>");
	char *body = element(t, "<tbody>", "</tbody>");
	size_t n = count(body, "<tr>");
	free(body);
	free(t);
	return n;
}

/* The series of plot id in document order: transport ids, polyline points, circles, error
 * markers. Returns how many series. */
struct series_info {
	char transport[64];
	size_t points, circles, errors, polylines;
};

static size_t plot_series(const char *html, const char *id, struct series_info *out, size_t max)
{
	char key[64];
	snprintf(key, sizeof(key), "<svg id=\"%s\"", id);
	char *svg = element(html, key, "</svg>");
	size_t n = 0;
	for (const char *p = svg; (p = strstr(p, "<g class=\"series\"")) && n < max; n++) {
		const char *end = strstr(p, "</g>");
		REQUIRE(end);
		struct series_info *s = &out[n];
		memset(s, 0, sizeof(*s));
		const char *t = strstr(p, "data-transport=\"");
		REQUIRE(t && t < end);
		t += strlen("data-transport=\"");
		size_t k = (size_t)(strchr(t, '"') - t);
		snprintf(s->transport, sizeof(s->transport), "%.*s", (int)k, t);
		for (const char *q = p; (q = strstr(q, " points=\"")) && q < end; q++) {
			s->polylines++;
			q += strlen(" points=\"");
			for (; *q != '"'; q++)
				s->points += *q == ',';
		}
		for (const char *q = p; (q = strstr(q, "<circle")) && q < end; q++)
			s->circles++;
		for (const char *q = p; (q = strstr(q, "class=\"error-point\"")) && q < end; q++)
			s->errors++;
		p = end;
	}
	free(svg);
	return n;
}

static void test_sample(void)
{
	char *html = render_file(SOFTRDMA_TEST_DATA "/compare_sample.json");
	REQUIRE(html);
	CHECK(strncmp(html, "<!DOCTYPE html>\n", 16) == 0);
	CHECK(strstr(html, "</html>\n") != NULL);
	/* Self-contained: no script, nothing fetched (the SVG namespace is a name, not a fetch). */
	CHECK(strstr(html, "<script") == NULL);
	CHECK_EQ(count(html, "http://"), count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
	CHECK(strstr(html, "https:") == NULL);
	CHECK(strstr(html, " src=") == NULL);
	CHECK_EQ(count(html, "href="), 1); /* the data: favicon */
	CHECK(strstr(html, "<link rel=\"icon\" href=\"data:,\">") != NULL);
	CHECK(strstr(html, "Content-Security-Policy") != NULL);

	/* Title and facts. */
	CHECK(strstr(html, "<title>softrdma compare: box, 2026-12-02T19:30:00Z</title>") != NULL);
	CHECK(strstr(html, "<h1>RoCEv2 vs iWARP vs UDP (floor) vs TCP (floor)</h1>") != NULL);
	CHECK(strstr(html, "<dd>6.1.0-18-amd64</dd>") != NULL);
	CHECK(strstr(html, "<dd>loopback</dd>") != NULL);
	CHECK(strstr(html, "<dd>2 \u00d7 AMD EPYC 7B13 64-Core Processor</dd>") != NULL);
	CHECK(strstr(html, "<dd>1 min 35 s</dd>") != NULL);
	CHECK_EQ(table_rows(html, "table-transports"), 4);

	/* Summary and errors. */
	char *sum = element(html, "<ul id=\"summary\"", "</ul>");
	CHECK_EQ(count(sum, "<li>"), 2);
	CHECK(strstr(sum, "RoCEv2&#39;s median round trip (16.3 us)") != NULL);
	free(sum);
	char *errs = element(html, "<ul id=\"errors\"", "</ul>");
	CHECK_EQ(count(errs, "<li>"), 1);
	CHECK(strstr(errs, "<li>iwarp bandwidth 4 MiB: timed out</li>") != NULL);
	free(errs);

	/* Latency: 4 rows, us with 2 decimals, samples as an integer. */
	CHECK_EQ(table_rows(html, "table-latency"), 4);
	char *lat = element(html, "id=\"table-latency\"", "</table>");
	CHECK(strstr(lat, "RoCEv2</th><td>20000</td><td>12.10</td><td>16.30</td><td>20.00</td>"
			  "<td>80.20</td><td>190.40</td><td>900.00</td><td>18.00</td><td>9.50</td>"
			  "<td>63.90</td></tr>") != NULL);
	CHECK_EQ(count(lat, "<span class=\"u\">us</span>"), 9);
	free(lat);

	/* Bandwidth: 11 sizes x 4 transports (Gbit/s and Mpps), iWARP's 4 MiB error. */
	CHECK_EQ(table_rows(html, "table-bandwidth"), 11);
	char *bw = element(html, "id=\"table-bandwidth\"", "</table>");
	CHECK(strstr(bw, "<tr><th scope=\"row\">8 B</th>") != NULL);
	CHECK(strstr(bw, "<tr><th scope=\"row\">2 KiB</th>") != NULL);
	CHECK(strstr(bw, "<tr><th scope=\"row\">4 MiB</th><td>9.09</td>") != NULL);
	CHECK(strstr(bw, "<td class=\"err\" colspan=\"2\">error: timed out</td>") != NULL);
	CHECK_EQ(count(bw, ">Gbit/s</th>"), 4);
	CHECK_EQ(count(bw, ">Mpps</th>"), 4);
	free(bw);

	/* CPU (two tests per transport), set-up (no UDP), loss (5 rates, one error). */
	CHECK_EQ(table_rows(html, "table-cpu"), 8);
	char *cpu = element(html, "id=\"table-cpu\"", "</table>");
	CHECK(strstr(cpu, "<td>bandwidth 64 KiB</td><td>14.00</td><td>6.00</td>") != NULL);
	free(cpu);
	CHECK_EQ(table_rows(html, "table-setup"), 3);
	char *setup = element(html, "id=\"table-setup\"", "</table>");
	CHECK(strstr(setup, "<td>20</td><td>0.45</td><td>0.60</td><td>1.20</td>") != NULL);
	free(setup);
	CHECK_EQ(table_rows(html, "table-loss"), 5);
	char *loss = element(html, "id=\"table-loss\"", "</table>");
	CHECK(strstr(loss, "<th scope=\"row\">0.01%</th>") != NULL);
	CHECK(strstr(loss, "error: retry exceeded") != NULL);
	free(loss);

	/* Plots: one series per transport with all its points. */
	struct series_info s[8];
	CHECK_EQ(plot_series(html, "plot-latency-cdf", s, 8), 4);
	static const char *const ids[] = {"roce", "iwarp", "udp", "tcp"};
	for (size_t i = 0; i < 4; i++) {
		CHECK(strcmp(s[i].transport, ids[i]) == 0);
		CHECK_EQ(s[i].points, 20);
		CHECK_EQ(s[i].polylines, 1);
	}
	CHECK_EQ(plot_series(html, "plot-bandwidth", s, 8), 4);
	for (size_t i = 0; i < 4; i++) {
		size_t want = i == 1 ? 10 : 11; /* iWARP's 4 MiB point is an error */
		CHECK_EQ(s[i].points, want);
		CHECK_EQ(s[i].circles, want);
		CHECK_EQ(s[i].errors, i == 1);
	}
	CHECK_EQ(plot_series(html, "plot-loss", s, 8), 3);
	CHECK(strcmp(s[0].transport, "roce") == 0 && strcmp(s[2].transport, "tcp") == 0);
	CHECK_EQ(s[0].points, 4);
	CHECK_EQ(s[0].errors, 1);
	CHECK_EQ(s[1].points, 5);
	CHECK_EQ(s[2].points, 5);
	/* Axis labels with units; the stated scales. */
	char *svg = element(html, "<svg id=\"plot-bandwidth\"", "</svg>");
	static const char *const labels[] = {">1 KiB</text>", ">64 KiB</text>", ">4 MiB</text>",
					     ">16 B</text>",  ">0.1</text>",	">10</text>"};
	for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
		CHECK(strstr(svg, labels[i]) != NULL);
	CHECK(strstr(svg, "Gbit/s, log scale") != NULL);
	CHECK(strstr(svg, "class=\"legend\"") != NULL);
	free(svg);
	svg = element(html, "<svg id=\"plot-latency-cdf\"", "</svg>");
	CHECK(strstr(svg, ">10 us</text>") != NULL);
	CHECK(strstr(svg, ">1 ms</text>") != NULL);
	CHECK(strstr(svg, ">50%</text>") != NULL);
	CHECK(strstr(svg, "log scale") != NULL);
	free(svg);
	svg = element(html, "<svg id=\"plot-loss\"", "</svg>");
	CHECK(strstr(svg, ">0%</text>") != NULL);
	CHECK(strstr(svg, ">5%</text>") != NULL);
	free(svg);
	/* Colours follow the transports' order. */
	CHECK(strstr(html, "<span class=\"sw\" style=\"background:#0072b2\"></span>RoCEv2") !=
	      NULL);
	CHECK(strstr(html, "<span class=\"sw\" style=\"background:#d55e00\"></span>iWARP") != NULL);
	CHECK(strstr(html, "class=\"skipped\"") == NULL);
	free(html);
}

static void test_hostile(void)
{
	char *html = render_file(SOFTRDMA_TEST_DATA "/compare_hostile.json");
	REQUIRE(html);
	/* Nothing from the data became markup. */
	CHECK(strcasestr(html, "<script") == NULL);
	CHECK(strcasestr(html, "<img") == NULL);
	CHECK(strstr(html, "<b>") == NULL);
	CHECK(strstr(html, "<i>") == NULL);
	CHECK(strstr(html, "onmouseover=\"") == NULL);
	CHECK(strstr(html, "<title>softrdma compare: &lt;script&gt;alert(1)&lt;/script&gt;, "
			   "2026-12-02T19:30:00Z&lt;script&gt;") != NULL);
	CHECK(count(html, "&lt;script&gt;alert(1)&lt;/script&gt;") >= 3); /* title, host, device */
	CHECK(strstr(html, "6.1 &quot;quoted&quot; &amp; &#39;single&#39; &lt;img") != NULL);
	CHECK(strstr(html, "Q&#39;uote&quot;d &amp; &lt;i&gt;") != NULL);
	CHECK(strstr(html, "dev") != NULL); /* cut at \u0000, still shown */
	CHECK_EQ(count(html, "alert(5)"), count(html, "&lt;script&gt;alert(5)"));
	CHECK(count(html, "alert(5)") >= 1); /* the id column of the transports table */
	/* Skipped, missing, null and malformed sections say so. */
	CHECK(strstr(html, "<p class=\"skipped\" data-section=\"loss\">Skipped: needs root: "
			   "&lt;script&gt;alert(9)&lt;/script&gt; &amp; &quot;CAP_NET_ADMIN&quot;"
			   "</p>") != NULL);
	CHECK(strstr(html, "data-section=\"cpu\">Skipped: not measured in this run") != NULL);
	CHECK(strstr(html, "data-section=\"setup\">Skipped: not measured in this run") != NULL);
	CHECK(strstr(html, "data-section=\"bandwidth\">Skipped: malformed") != NULL);
	CHECK(strstr(html, "id=\"table-loss\"") == NULL);
	CHECK(strstr(html, "id=\"plot-loss\"") == NULL);
	CHECK(strstr(html, "id=\"table-cpu\"") == NULL);
	/* Latency: three rows (one an escaped error), the CDF has the drawable points only. */
	CHECK_EQ(table_rows(html, "table-latency"), 3);
	CHECK(strstr(html, "error: &lt;script&gt;alert(7)&lt;/script&gt; &amp; failed") != NULL);
	struct series_info s[8];
	CHECK_EQ(plot_series(html, "plot-latency-cdf", s, 8), 2);
	CHECK(strcmp(s[0].transport, "roce") == 0);
	CHECK_EQ(s[0].points, 3); /* [1.5,0] [2,0.5] [6,1]; x <= 0, y > 1 and junk left out */
	CHECK(strcmp(s[1].transport, "ghost") == 0);
	CHECK_EQ(s[1].points, 1);
	/* Non-string summary and error entries are left out. */
	char *sum = element(html, "<ul id=\"summary\"", "</ul>");
	CHECK_EQ(count(sum, "<li>"), 2);
	CHECK(strstr(sum, "Tom &amp; Jerry&#39;s &quot;test&quot;") != NULL);
	free(sum);
	char *errs = element(html, "<ul id=\"errors\"", "</ul>");
	CHECK_EQ(count(errs, "<li>"), 1);
	free(errs);
	CHECK(strstr(html, "softrdma compare &lt;b&gt;evil&lt;/b&gt;") != NULL);
	free(html);
}

static void test_refusals(void)
{
	static const struct {
		const char *json;
		const char *msg;
	} cases[] = {
	    {"[]", "not an object"},
	    {"\"x\"", "not an object"},
	    {"{}", "no \"schema\""},
	    {"{\"schema\": \"1\"}", "no \"schema\""},
	    {"{\"schema\": 2}", "schema version 2"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json *doc;
		REQUIRE(json_parse(cases[i].json, strlen(cases[i].json), &doc, NULL) == 0);
		char err[128];
		int rc;
		free(render(doc, &rc, err, sizeof(err)));
		CHECK_EQ(rc, -EINVAL);
		CHECK(strstr(err, cases[i].msg) != NULL);
		json_free(doc);
	}
	/* The least result: every section says it was not measured. */
	struct json *doc;
	REQUIRE(json_parse("{\"schema\": 1}", 13, &doc, NULL) == 0);
	int rc;
	char *html = render(doc, &rc, NULL, 0);
	CHECK_EQ(rc, 0);
	CHECK_EQ(count(html, "Skipped: not measured in this run"), 5);
	CHECK(strstr(html, "No errors.") != NULL);
	CHECK(strstr(html, "</html>") != NULL);
	free(html);
	/* A write error is reported. */
	FILE *full = fopen("/dev/full", "w");
	if (full) {
		char err[64];
		CHECK_EQ(report_html(doc, full, err, sizeof(err)), -EIO);
		CHECK(strstr(err, "write") != NULL);
		fclose(full);
	}
	json_free(doc);
}

/* Replaces up to `times` number or string tokens of buf (n bytes of cap) at random places with
 * junk, keeping the JSON valid more often than random bytes would; returns the new length. */
static size_t mutate(char *buf, size_t n, size_t cap, int times, const char *const *junk,
		     size_t njunk)
{
	for (int m = 0; m < times; m++) {
		size_t at = rnd() % n, e = at;
		if (!(buf[at] == '"' || (buf[at] >= '0' && buf[at] <= '9')))
			continue;
		if (buf[at] == '"') {
			e = at + 1;
			while (e < n && buf[e] != '"')
				e++;
			e++;
		} else {
			while (e < n && strchr("0123456789.eE+-", buf[e]))
				e++;
		}
		const char *j = junk[rnd() % njunk];
		size_t k = strlen(j);
		if (e > n || n - (e - at) + k >= cap)
			continue;
		memmove(buf + at + k, buf + e, n - e);
		memcpy(buf + at, j, k);
		n = n - (e - at) + k;
	}
	return n;
}

/* Numbers at the edges of a double: no NaN or infinity may reach a coordinate or a label. */
static void test_extremes(void)
{
	static const char doc[] =
	    "{\"schema\": 1, \"transports\": [{\"id\": \"a\"}, {\"id\": \"b\"}],"
	    " \"latency\": {\"series\": [{\"transport\": \"a\", \"cdf\": [[4.9e-324, 0], "
	    "[1e-300, 0.5], [1.7e308, 1]]}, {\"transport\": \"b\", \"cdf\": [[5, 0.5]]}]},"
	    " \"bandwidth\": {\"series\": [{\"transport\": \"a\", \"points\": ["
	    "{\"size\": 1, \"gbps\": 1e-320, \"mpps\": -1}, {\"size\": 1.5, \"gbps\": 1},"
	    " {\"size\": 9.2e18, \"gbps\": 1.7e308}, {\"size\": 1e300, \"gbps\": 2},"
	    " {\"size\": -8, \"gbps\": 3}, {\"size\": 0, \"gbps\": 3}]}]},"
	    " \"loss\": {\"series\": [{\"transport\": \"a\", \"points\": ["
	    "{\"loss_pct\": 0, \"gbps\": 1.7976931348623157e308}, {\"loss_pct\": 1e308, "
	    "\"gbps\": 0}, {\"loss_pct\": 5, \"gbps\": -1}]}]},"
	    " \"duration_s\": 1e300, \"host\": {\"cpus\": -1e300}}";
	struct json *v;
	struct json_error e;
	int rc = json_parse(doc, strlen(doc), &v, &e);
	if (rc)
		fprintf(stderr, "extremes: %d:%d: %s\n", e.line, e.column, e.msg);
	REQUIRE(rc == 0);
	char *html = render(v, &rc, NULL, 0);
	CHECK_EQ(rc, 0);
	CHECK(strstr(html, "nan") == NULL);
	CHECK(strstr(html, "inf") == NULL);
	CHECK(strstr(html, "id=\"plot-latency-cdf\"") != NULL);
	CHECK(strstr(html, "id=\"plot-bandwidth\"") != NULL);
	CHECK(strstr(html, "id=\"plot-loss\"") != NULL);
	free(html);
	json_free(v);
}

static void test_mutations(void)
{
	FILE *f = fopen(SOFTRDMA_TEST_DATA "/compare_sample.json", "rb");
	REQUIRE(f);
	static char doc[1 << 16], buf[1 << 16];
	size_t len = fread(doc, 1, sizeof(doc), f);
	fclose(f);
	REQUIRE(len > 100 && len < sizeof(doc));
	rng = check_seed(0x7265706f7274);
	if (!rng)
		rng = 1;
	/* Replacements that keep the JSON valid more often than random bytes do, so the report
	 * sees wrong types, huge and negative numbers and markup rather than parse errors. */
	static const char *const junk[] = {"0",	      "-1", "1e308", "1e-300", "null",
					   "\"<s>\"", "[]", "{}",    "true",   "\"\"",
					   "[[0]]",   "-0", "1e20",  "\"&\"",  "4e9"};
	int rendered = 0;
	for (int it = 0; it < 600; it++) {
		memcpy(buf, doc, len);
		size_t n = len;
		n = mutate(buf, n, sizeof(buf), 1 + (int)(rnd() % 6), junk,
			   sizeof(junk) / sizeof(junk[0]));
		struct json *v;
		if (json_parse(buf, n, &v, NULL))
			continue;
		int rc;
		char err[128];
		char *html = render(v, &rc, err, sizeof(err));
		CHECK(rc == 0 || rc == -EINVAL);
		if (rc == 0) {
			rendered++;
			CHECK(strstr(html, "<s>") == NULL);
			CHECK(strstr(html, "</html>") != NULL);
			CHECK(strstr(html, "nan") == NULL && strstr(html, "inf\"") == NULL);
		}
		free(html);
		json_free(v);
	}
	printf("mutations: %d rendered\n", rendered);
	CHECK(rendered > 100);
}

/* Runs cmd_report with the given arguments (argv[0] "report"). */
static int run(const char *a1, const char *a2, const char *a3, const char *a4)
{
	char *argv[6] = {"report", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
	int argc = 1;
	while (argc < 5 && argv[argc])
		argc++;
	return cmd_report(argc, argv);
}

static void test_cli(void)
{
	char dir[] = "/tmp/test_report_XXXXXX";
	REQUIRE(mkdtemp(dir));
	char in[128], out[128], bad[128], def[128];
	snprintf(in, sizeof(in), "%s/r.json", dir);
	snprintf(out, sizeof(out), "%s/out.html", dir);
	snprintf(bad, sizeof(bad), "%s/bad.json", dir);
	snprintf(def, sizeof(def), "%s/r.html", dir);
	FILE *f = fopen(in, "w");
	REQUIRE(f);
	fputs("{\"schema\": 1, \"summary\": [\"ok\"]}\n", f);
	fclose(f);
	f = fopen(bad, "w");
	REQUIRE(f);
	fputs("{\"schema\": 1,\n \"x\": [1,]}\n", f);
	fclose(f);

	FILE *saved = stdout;
	stdout = fopen("/dev/null", "w"); /* the help text */
	REQUIRE(stdout);
	CHECK_EQ(run("-h", NULL, NULL, NULL), 0);
	CHECK_EQ(run("--help", NULL, NULL, NULL), 0);
	fclose(stdout);
	stdout = saved;
	CHECK_EQ(run(NULL, NULL, NULL, NULL), 2);
	CHECK_EQ(run("--bogus", in, NULL, NULL), 2);
	CHECK_EQ(run(in, "extra", NULL, NULL), 2);
	CHECK_EQ(run(in, "-o", NULL, NULL), 2);
	CHECK_EQ(run("/nonexistent/x.json", NULL, NULL, NULL), 1);
	CHECK_EQ(run(bad, "-o", out, NULL), 1);
	struct stat st;
	CHECK(stat(out, &st) != 0); /* nothing written for a bad input */
	CHECK_EQ(run(in, "-o", out, NULL), 0);
	CHECK(stat(out, &st) == 0 && st.st_size > 1000);
	CHECK_EQ(run(in, NULL, NULL, NULL), 0); /* default: r.json -> r.html */
	CHECK(stat(def, &st) == 0 && st.st_size > 1000);
	CHECK_EQ(run("-o", "/nonexistent/dir/x.html", in, NULL), 1);
	unlink(in);
	unlink(out);
	unlink(bad);
	unlink(def);
	rmdir(dir);
}

/* ---- scenario results (softrdma compare --scenario) ---- */

static const char sc_incast[] =
    "{\"tool\": \"softrdma compare --scenario\", \"schema\": 1, \"started\": "
    "\"2026-12-07T16:10:00Z\", \"duration_s\": 52, \"scenario\": \"incast\", \"senders\": 2, "
    "\"rate_bps\": 200000000, \"seconds\": 10, \"message_bytes\": 65536, \"probe_bytes\": 100, "
    "\"rows\": [\n"
    "{\"id\": \"roce\", \"label\": \"RoCEv2, lossy, go-back-N\", \"ok\": true, "
    "\"throughput_gbps\": 0.123456, \"shares_gbps\": [0.06, 0.063456], \"app_shares_gbps\": "
    "[0.05, 0.05], \"jain\": 0.9993, \"goodput_gbps\": 0.1, \"lost\": 0, \"probe_p50_us\": "
    "812.5, \"probe_p99_us\": 20321.4, \"drops\": 311, \"marks\": 0, \"cnps\": 0, \"pauses\": "
    "0, \"pause_ms\": 0, \"queue_max_kib\": 511.9, \"resent\": 4242, \"sr_resent\": 0, "
    "\"sacks\": 0},\n"
    "{\"id\": \"roce_pfc\", \"label\": \"RoCEv2, PFC\", \"ok\": true, \"throughput_gbps\": "
    "0.19, \"shares_gbps\": [0.095, 0.095], \"app_shares_gbps\": [0.09, 0.09], \"jain\": 1, "
    "\"goodput_gbps\": 0.18, \"lost\": 0, \"probe_p50_us\": 2500.2, \"probe_p99_us\": 4100.6, "
    "\"drops\": 0, \"marks\": 0, \"cnps\": 0, \"pauses\": 120, \"pause_ms\": 4321.2, "
    "\"queue_max_kib\": 100, \"resent\": 0, \"sr_resent\": 0, \"sacks\": 0},\n"
    "{\"id\": \"roce_dcqcn\", \"label\": \"RoCEv2, DCQCN\", \"ok\": false, \"error\": "
    "\"sender 1: <script>alert(1)</script> & \\\"timed out\\\"\"},\n"
    "{\"id\": \"roce_pfc_dcqcn\", \"label\": \"RoCEv2, PFC + DCQCN\", \"ok\": true, "
    "\"throughput_gbps\": 0.17, \"shares_gbps\": [0.08, 0.09], \"jain\": 0.997, "
    "\"goodput_gbps\": 0.16, \"probe_p50_us\": 900.1, \"probe_p99_us\": 1800.3, \"drops\": 0, "
    "\"marks\": 88, \"cnps\": 77, \"pauses\": 3, \"pause_ms\": 12.3, \"resent\": 0},\n"
    "{\"id\": \"iwarp\", \"label\": \"iWARP, TCP (cubic, ECN)\", \"ok\": true, "
    "\"throughput_gbps\": 0.185, \"shares_gbps\": [0.1, 0.085], \"jain\": 0.993, "
    "\"goodput_gbps\": 0.19, \"probe_p50_us\": 300.4, \"probe_p99_us\": 700.4, \"drops\": 12, "
    "\"marks\": 40, \"cnps\": 0, \"pauses\": 0, \"pause_ms\": 0}\n]}\n";

static const char sc_victim[] =
    "{\"tool\": \"softrdma compare --scenario\", \"schema\": 1, \"scenario\": \"victim\", "
    "\"senders\": 2, \"rate_bps\": 200000000, \"seconds\": 3, \"message_bytes\": 65536, "
    "\"probe_bytes\": 100, \"rows\": [\n"
    "{\"id\": \"roce\", \"label\": \"RoCEv2, lossy, go-back-N\", \"ok\": true, "
    "\"throughput_gbps\": 0.15, \"shares_gbps\": [0.05, 0.1], \"jain\": 0.9, "
    "\"victim_gbps\": 0.0875, \"victim_app_gbps\": 0.08, \"drops\": 5, \"marks\": 0, "
    "\"cnps\": 0, \"pauses\": 0, \"pause_ms\": 0, \"resent\": 17},\n"
    "{\"id\": \"roce_pfc\", \"label\": \"RoCEv2, PFC\", \"ok\": true, \"throughput_gbps\": "
    "0.19, \"shares_gbps\": [0.095, 0.095], \"jain\": 1, \"victim_gbps\": 0.0213, "
    "\"victim_app_gbps\": 0.02, \"drops\": 0, \"marks\": 0, \"cnps\": 0, \"pauses\": 50, "
    "\"pause_ms\": 2000.4, \"resent\": 0}\n]}\n";

static const char sc_loss[] =
    "{\"tool\": \"softrdma compare --scenario\", \"schema\": 1, \"started\": "
    "\"2026-12-07T16:20:00Z\", \"scenario\": \"loss\", \"senders\": 1, \"rate_bps\": "
    "200000000, \"seconds\": 10, \"message_bytes\": 65536, \"probe_bytes\": 100, \"loss\": "
    "0.01, \"rows\": [\n"
    "{\"id\": \"roce\", \"label\": \"RoCEv2, lossy, go-back-N\", \"ok\": true, "
    "\"throughput_gbps\": 0.18, \"shares_gbps\": [0.18], \"jain\": 1, \"goodput_gbps\": "
    "0.05, \"lost\": 120, \"probe_p50_us\": 700.2, \"probe_p99_us\": 10400.2, \"drops\": 0, "
    "\"marks\": 0, \"cnps\": 0, \"pauses\": 0, \"pause_ms\": 0, \"resent\": 3000, "
    "\"sr_resent\": 0, \"sacks\": 0},\n"
    "{\"id\": \"roce_sr\", \"label\": \"RoCEv2, selective repeat\", \"ok\": true, "
    "\"throughput_gbps\": 0.175, \"shares_gbps\": [0.175], \"jain\": 1, \"goodput_gbps\": "
    "0.17, \"lost\": 118, \"probe_p50_us\": 650.2, \"probe_p99_us\": 2400.2, \"drops\": 0, "
    "\"marks\": 0, \"cnps\": 0, \"pauses\": 0, \"pause_ms\": 0, \"resent\": 130, "
    "\"sr_resent\": 121, \"sacks\": 119},\n"
    "{\"id\": \"iwarp\", \"label\": \"iWARP, TCP (cubic, ECN)\", \"ok\": true, "
    "\"throughput_gbps\": 0.17, \"shares_gbps\": [0.17], \"jain\": 1, \"goodput_gbps\": "
    "0.16, \"lost\": 110, \"probe_p50_us\": 400.2, \"probe_p99_us\": 1200.2, \"drops\": 0, "
    "\"marks\": 0, \"cnps\": 0, \"pauses\": 0, \"pause_ms\": 0}\n]}\n";

static struct json *parse_str(const char *text)
{
	struct json *doc;
	struct json_error e;
	int rc = json_parse(text, strlen(text), &doc, &e);
	if (rc)
		fprintf(stderr, "%d:%d: %s\n", e.line, e.column, e.msg);
	REQUIRE(rc == 0);
	return doc;
}

static char *render_str(const char *text)
{
	struct json *doc = parse_str(text);
	char err[256];
	int rc;
	char *page = render(doc, &rc, err, sizeof(err));
	if (rc)
		fprintf(stderr, "render: %s\n", err);
	CHECK_EQ(rc, 0);
	json_free(doc);
	return page;
}

/* The <g class="bar" ...> groups of svg id: measured bars, rows not measured. */
static void bars(const char *html, const char *id, size_t *measured, size_t *errors)
{
	char key[64];
	snprintf(key, sizeof(key), "<svg id=\"%s\"", id);
	char *svg = element(html, key, "</svg>");
	*measured = count(svg, "<g class=\"bar\" data-row=");
	*errors = count(svg, "<g class=\"bar error\" data-row=");
	CHECK_EQ(count(svg, "<rect x="), *measured); /* one bar each (the area is class=) */
	free(svg);
}

static void test_scenario_incast(void)
{
	char *html = render_str(sc_incast);
	REQUIRE(html);
	CHECK(strncmp(html, "<!DOCTYPE html>\n", 16) == 0);
	CHECK(strstr(html, "</html>\n") != NULL);
	CHECK(strstr(html, "Content-Security-Policy") != NULL);
	CHECK(strcasestr(html, "<script") == NULL);
	CHECK(strstr(html, "https:") == NULL);
	CHECK(strstr(html, "<title>softrdma scenarios: incast, 2026-12-07T16:10:00Z</title>") !=
	      NULL);
	CHECK(strstr(html, "<h2>incast: 2 senders \u2192 1 receiver, 200 Mbit/s port, 10 s per "
			   "row</h2>") != NULL);
	CHECK(strstr(html, "<dd>100 B ping-pong</dd>") != NULL);
	CHECK(strstr(html, "<dd>4 of 5</dd>") != NULL);
	CHECK(strstr(html, "id=\"table-scenarios\"") == NULL); /* one file: no index */
	CHECK(strstr(html, "<section id=\"scenario-1\" class=\"scenario\" "
			   "data-scenario=\"incast\">") != NULL);

	/* The table: every row, figures in their units, the escaped error. */
	CHECK_EQ(table_rows(html, "table-scenario-1"), 5);
	char *t = element(html, "id=\"table-scenario-1\"", "</table>");
	CHECK(strstr(t, "<th scope=\"col\">through<br><span class=\"u\">Mbit/s</span></th>") !=
	      NULL);
	CHECK(strstr(t, "<th scope=\"col\">probe p99<br><span class=\"u\">us</span></th>") != NULL);
	CHECK(strstr(t, "<th scope=\"col\">paused<br><span class=\"u\">ms</span></th>") != NULL);
	CHECK(strstr(t, "data-row=\"roce\"><span class=\"sw\" style=\"background:#0072b2\"></span>"
			"RoCEv2, lossy, go-back-N</th><td>123.5</td><td>60.0 / 63.5</td>"
			"<td>0.999</td><td>812.5</td><td>20321.4</td><td>311</td><td>0</td>"
			"<td>0</td><td>0.0</td><td>4242</td></tr>") != NULL);
	CHECK(strstr(t, "RoCEv2, PFC</th><td>190.0</td><td>95.0 / 95.0</td><td>1.000</td>"
			"<td>2500.2</td><td>4100.6</td><td>0</td><td>0</td><td>0</td>"
			"<td>4321.2</td><td>0</td></tr>") != NULL);
	CHECK(strstr(t, "<td class=\"err\" colspan=\"10\">not measured: sender 1: "
			"&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;timed out&quot;</td>") !=
	      NULL);
	CHECK(strstr(t, "<td>88</td><td>77</td><td>12.3</td>") != NULL);
	CHECK(strstr(t, "<td>0.0</td><td class=\"na\" title=\"TCP's own, not counted\">TCP's</td>"
			"</tr>") != NULL);
	free(t);

	/* Throughput bars against the port; the probe's p99 on a log scale. */
	size_t m, e;
	bars(html, "plot-throughput-1", &m, &e);
	CHECK_EQ(m, 4);
	CHECK_EQ(e, 1);
	char *svg = element(html, "<svg id=\"plot-throughput-1\"", "</svg>");
	CHECK(strstr(svg, "class=\"plot bars\"") != NULL);
	CHECK_EQ(count(svg, "<line class=\"ref\""), 1);
	CHECK(strstr(svg, ">port 200 Mbit/s</text>") != NULL);
	CHECK(strstr(svg, "Mbit/s, linear") != NULL);
	CHECK(strstr(svg, "<g class=\"bar error\" data-row=\"roce_dcqcn\"><text class=\"err\"") !=
	      NULL);
	CHECK(strstr(svg, "&lt;script&gt;") != NULL);
	CHECK(strstr(svg, ">250</text>") != NULL); /* axis to 250 Mbit/s: above the port */
	CHECK(strstr(svg, "RoCEv2, PFC: 190 Mbit/s</title>") != NULL);
	free(svg);
	bars(html, "plot-probe-1", &m, &e);
	CHECK_EQ(m, 4);
	CHECK_EQ(e, 1);
	svg = element(html, "<svg id=\"plot-probe-1\"", "</svg>");
	CHECK(strstr(svg, "log scale") != NULL);
	CHECK_EQ(count(svg, "<line class=\"p50\""), 4);
	CHECK(strstr(svg, "<line class=\"ref\"") == NULL);
	CHECK(strstr(svg, ">10 ms</text>") != NULL);
	CHECK(strstr(svg, ": 20321 us (p50 812 us)</title>") != NULL);
	CHECK(strstr(svg, "<text class=\"val\" x=") != NULL &&
	      strstr(svg, ">20 ms</text>") != NULL && strstr(svg, ">700 us</text>") != NULL);
	free(svg);
	CHECK(strstr(html, "id=\"plot-victim-1\"") == NULL);
	free(html);
}

static void test_scenario_victim_loss(void)
{
	char *html = render_str(sc_victim);
	REQUIRE(html);
	CHECK(strstr(html, "<h2>victim: 2 senders \u2192 1 receiver and a victim flow, 200 Mbit/s "
			   "port, 3 s per row</h2>") != NULL);
	CHECK_EQ(table_rows(html, "table-scenario-1"), 2);
	char *t = element(html, "id=\"table-scenario-1\"", "</table>");
	CHECK(strstr(t, "<th scope=\"col\">victim<br><span class=\"u\">Mbit/s</span></th>") !=
	      NULL);
	CHECK(strstr(t, "probe") == NULL);
	CHECK(strstr(t, "<td>0.900</td><td>87.5</td><td>5</td>") != NULL);
	CHECK(strstr(t, "<td>21.3</td><td>0</td><td>0</td><td>0</td><td>2000.4</td>") != NULL);
	free(t);
	size_t m, e;
	bars(html, "plot-throughput-1", &m, &e);
	CHECK_EQ(m, 2);
	CHECK_EQ(e, 0);
	bars(html, "plot-victim-1", &m, &e);
	CHECK_EQ(m, 2);
	char *svg = element(html, "<svg id=\"plot-victim-1\"", "</svg>");
	CHECK(strstr(svg, "<line class=\"ref\"") != NULL);
	CHECK(strstr(svg, "RoCEv2, PFC: 21.30 Mbit/s</title>") != NULL);
	free(svg);
	CHECK(strstr(html, "id=\"plot-probe-1\"") == NULL);
	free(html);

	html = render_str(sc_loss);
	REQUIRE(html);
	CHECK(strstr(html, "<h2>loss: 1 sender \u2192 1 receiver, 200 Mbit/s port dropping 1% at "
			   "random, 10 s per row</h2>") != NULL);
	CHECK(strstr(html, "<dd>1% of the packets</dd>") != NULL);
	CHECK_EQ(table_rows(html, "table-scenario-1"), 3);
	t = element(html, "id=\"table-scenario-1\"", "</table>");
	CHECK(strstr(t, "<th scope=\"col\">goodput<br><span class=\"u\">Mbit/s</span></th>"
			"<th scope=\"col\">on the wire<br><span class=\"u\">Mbit/s</span></th>") !=
	      NULL);
	CHECK(strstr(t, "go-back-N</th><td>50.0</td><td>180.0</td><td>700.2</td><td>10400.2</td>"
			"<td>120</td><td>3000</td><td>0</td><td>0</td></tr>") != NULL);
	CHECK(strstr(t, "selective repeat</th><td>170.0</td><td>175.0</td><td>650.2</td>"
			"<td>2400.2</td><td>118</td><td>130</td><td>121</td><td>119</td></tr>") !=
	      NULL);
	CHECK(strstr(t, "<td>110</td><td class=\"na\" title=\"TCP's own, not counted\">TCP's</td>"
			"<td class=\"na\">\u2013</td><td class=\"na\" title=\"TCP's own, not "
			"counted\">TCP's</td></tr>") != NULL);
	CHECK(strstr(t, "jain") == NULL && strstr(t, "CNPs") == NULL);
	free(t);
	bars(html, "plot-throughput-1", &m, &e);
	CHECK_EQ(m, 3);
	svg = element(html, "<svg id=\"plot-throughput-1\"", "</svg>");
	CHECK(strstr(svg, "goodput (Mbit/s, linear)") != NULL);
	CHECK(strstr(svg, "RoCEv2, selective repeat: 170 Mbit/s</title>") != NULL);
	CHECK(strstr(svg, "<line class=\"ref\"") != NULL);
	free(svg);
	bars(html, "plot-probe-1", &m, &e);
	CHECK_EQ(m, 3);
	free(html);
}

/* A sweep: several files in one page, a section each, an index, names escaped. */
static void test_scenario_several(void)
{
	struct json *doc[3] = {parse_str(sc_incast), parse_str(sc_victim), parse_str(sc_loss)};
	const struct json *cdoc[3] = {doc[0], doc[1], doc[2]};
	const char *const names[] = {"incast.json", "<b>victim</b>.json", "loss.json"};
	char *page = NULL, err[256];
	size_t len = 0;
	FILE *f = open_memstream(&page, &len);
	REQUIRE(f);
	CHECK_EQ(report_scenarios_html(cdoc, names, 3, f, err, sizeof(err)), 0);
	REQUIRE(fclose(f) == 0);
	CHECK(strstr(page, "<title>softrdma scenarios: incast, victim, loss, "
			   "2026-12-07T16:10:00Z</title>") != NULL);
	CHECK_EQ(table_rows(page, "table-scenarios"), 3);
	CHECK(strstr(page, "<a href=\"#scenario-2\">victim</a>") != NULL);
	CHECK(strstr(page, "<b>") == NULL);
	CHECK(count(page, "&lt;b&gt;victim&lt;/b&gt;.json") == 2); /* index and facts */
	CHECK(strstr(page, "<td>1%</td><td>10 s</td><td>3 of 3</td>") != NULL);
	static const char *const ids[] = {
	    "<section id=\"scenario-1\" class=\"scenario\" data-scenario=\"incast\">",
	    "<section id=\"scenario-2\" class=\"scenario\" data-scenario=\"victim\">",
	    "<section id=\"scenario-3\" class=\"scenario\" data-scenario=\"loss\">",
	    "id=\"table-scenario-3\"",
	    "<svg id=\"plot-throughput-1\"",
	    "<svg id=\"plot-throughput-2\"",
	    "<svg id=\"plot-throughput-3\"",
	    "<svg id=\"plot-victim-2\"",
	    "<svg id=\"plot-probe-1\"",
	    "<svg id=\"plot-probe-3\""};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		CHECK_EQ(count(page, ids[i]), 1);
	CHECK_EQ(count(page, "<svg "), 6);
	CHECK_EQ(table_rows(page, "table-scenario-2"), 2);
	free(page);

	/* One bad file refuses the page, naming it; nothing is written. */
	struct json *bad = parse_str("{\"tool\": \"softrdma compare --scenario\", \"schema\": 2}");
	cdoc[1] = bad;
	page = NULL;
	f = open_memstream(&page, &len);
	REQUIRE(f);
	CHECK_EQ(report_scenarios_html(cdoc, names, 3, f, err, sizeof(err)), -EINVAL);
	REQUIRE(fclose(f) == 0);
	CHECK_EQ(len, 0);
	CHECK(strstr(err, "<b>victim</b>.json: schema version 2") == err);
	free(page);
	/* A compare result among them. */
	struct json *cmp = parse_str("{\"tool\": \"softrdma compare\", \"schema\": 1}");
	cdoc[1] = cmp;
	free(render(cmp, &(int){0}, err, sizeof(err))); /* alone it is fine */
	page = NULL;
	f = open_memstream(&page, &len);
	REQUIRE(f);
	CHECK_EQ(report_scenarios_html(cdoc, NULL, 3, f, err, sizeof(err)), -EINVAL);
	REQUIRE(fclose(f) == 0);
	CHECK(strstr(err, "result 2: a compare result") == err);
	free(page);
	page = NULL;
	f = open_memstream(&page, &len);
	REQUIRE(f);
	CHECK_EQ(report_scenarios_html(cdoc, NULL, 0, f, err, sizeof(err)), -EINVAL);
	REQUIRE(fclose(f) == 0);
	free(page);
	json_free(cmp);
	json_free(bad);
	for (size_t i = 0; i < 3; i++)
		json_free(doc[i]);
}

#define SC_TOP                                                                                     \
	"\"tool\": \"softrdma compare --scenario\", \"schema\": 1, \"scenario\": \"incast\", "     \
	"\"senders\": 2, \"rate_bps\": 2e8, \"seconds\": 1"
#define SC_ROW "\"id\": \"roce\", \"label\": \"x\", \"ok\": true, \"throughput_gbps\": 0.1"

/* Malformed scenario results are refused with the member at fault, and nothing is written.
 * (json_get takes the first of duplicate keys: a key put first overrides SC_TOP's.) */
static void test_scenario_refusals(void)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
	    {"{\"schema\": 2, " SC_TOP ", \"rows\": [{" SC_ROW "}]}", "schema version 2 is not"},
	    {"{\"schema\": \"1\", " SC_TOP ", \"rows\": [{" SC_ROW "}]}", "no \"schema\": 1"},
	    {"{" SC_TOP "}", "\"rows\": missing"},
	    {"{" SC_TOP ", \"rows\": {}}", "\"rows\": not an array"},
	    {"{" SC_TOP ", \"rows\": []}", "\"rows\": 0 rows"},
	    {"{\"scenario\": \"fire\", " SC_TOP ", \"rows\": [{" SC_ROW "}]}",
	     "\"scenario\": not \"incast\""},
	    {"{\"scenario\": 5, " SC_TOP ", \"rows\": [{" SC_ROW "}]}",
	     "\"scenario\": not a string"},
	    {"{\"senders\": \"2\", " SC_TOP ", \"rows\": [{" SC_ROW "}]}",
	     "\"senders\": not a number"},
	    {"{\"senders\": 0, " SC_TOP ", \"rows\": [{" SC_ROW "}]}", "\"senders\": 0 is out of"},
	    {"{\"senders\": 1.5, " SC_TOP ", \"rows\": [{" SC_ROW "}]}", "not a whole number"},
	    {"{\"tool\": \"softrdma compare --scenario\", \"schema\": 1, \"scenario\": \"incast\", "
	     "\"senders\": 2, \"seconds\": 1, \"rows\": [{" SC_ROW "}]}",
	     "\"rate_bps\": missing"},
	    {"{\"seconds\": null, " SC_TOP ", \"rows\": [{" SC_ROW "}]}", "\"seconds\": missing"},
	    {"{\"started\": 5, " SC_TOP ", \"rows\": [{" SC_ROW "}]}", "\"started\": not a string"},
	    {"{\"scenario\": \"loss\", " SC_TOP ", \"rows\": [{" SC_ROW ", \"goodput_gbps\": 1}]}",
	     "\"loss\": missing"},
	    {"{\"scenario\": \"loss\", \"loss\": 2, " SC_TOP ", \"rows\": [{" SC_ROW
	     ", \"goodput_gbps\": 1}]}",
	     "\"loss\": 2 is out of range"},
	    {"{\"scenario\": \"loss\", \"loss\": 0.1, " SC_TOP ", \"rows\": [{" SC_ROW "}]}",
	     "rows[0].\"goodput_gbps\": missing"},
	    {"{" SC_TOP ", \"rows\": [1]}", "rows[0]: not an object"},
	    {"{" SC_TOP ", \"rows\": [{\"ok\": \"yes\", " SC_ROW "}]}",
	     "rows[0].\"ok\": not true or false"},
	    {"{" SC_TOP ", \"rows\": [{\"id\": \"roce\", \"label\": \"x\"}]}",
	     "rows[0].\"ok\": missing"},
	    {"{" SC_TOP ", \"rows\": [{\"label\": 7, " SC_ROW "}]}",
	     "rows[0].\"label\": not a string"},
	    {"{" SC_TOP ", \"rows\": [{\"throughput_gbps\": \"fast\", " SC_ROW "}]}",
	     "rows[0].\"throughput_gbps\": not a number"},
	    {"{" SC_TOP ", \"rows\": [{\"id\": \"roce\", \"label\": \"x\", \"ok\": true}]}",
	     "rows[0].\"throughput_gbps\": missing"},
	    {"{" SC_TOP ", \"rows\": [{\"drops\": -1, " SC_ROW "}]}",
	     "rows[0].\"drops\": -1 is out of range"},
	    {"{" SC_TOP ", \"rows\": [{\"jain\": 2, " SC_ROW "}]}", "rows[0].\"jain\": 2 is out"},
	    {"{" SC_TOP ", \"rows\": [{\"probe_p99_us\": 1e300, " SC_ROW "}]}",
	     "rows[0].\"probe_p99_us\": 1e+300 is out"},
	    {"{" SC_TOP ", \"rows\": [{\"shares_gbps\": [0.1, \"a\"], " SC_ROW "}]}",
	     "rows[0].\"shares_gbps\"[1]: not a number"},
	    {"{" SC_TOP ", \"rows\": [{\"app_shares_gbps\": 3, " SC_ROW "}]}",
	     "rows[0].\"app_shares_gbps\": not an array"},
	    {"{" SC_TOP ", \"rows\": [{\"id\": \"roce\", \"label\": \"x\", \"ok\": false, "
	     "\"error\": 5}]}",
	     "rows[0].\"error\": not a string"},
	    {"{" SC_TOP ", \"rows\": [{" SC_ROW "}, {\"id\": 1, \"label\": \"y\", \"ok\": true}]}",
	     "rows[1].\"id\": not a string"},
	    {"{\"scenario\": \"incast\", \"rows\": []}", "from before its format had"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json *doc = parse_str(cases[i].json);
		char err[256];
		int rc;
		char *page = render(doc, &rc, err, sizeof(err));
		CHECK_EQ(rc, -EINVAL);
		if (!strstr(err, cases[i].msg))
			fprintf(stderr, "case %zu: got \"%s\", want \"%s\"\n", i, err,
				cases[i].msg);
		CHECK(strstr(err, cases[i].msg) != NULL);
		CHECK(page && page[0] == '\0'); /* nothing written */
		free(page);
		json_free(doc);
	}
	/* The least valid result renders; null figures and a row without a reason are fine. */
	char *html = render_str("{" SC_TOP ", \"rows\": [{\"jain\": null, " SC_ROW
				"}, {\"id\": \"iwarp\", \"label\": \"y\", \"ok\": false}]}");
	CHECK(strstr(html, "not measured: no reason given") != NULL);
	CHECK(strstr(html, "<svg id=\"plot-throughput-1\"") != NULL);
	CHECK(strstr(html, "<svg id=\"plot-probe-1\"") == NULL);
	free(html);
	/* A label longer than a chart has room for is cut there, whole code points. */
	html = render_str("{" SC_TOP ", \"rows\": [{\"label\": \"\u00e9\u00e9\u00e9\u00e9\u00e9"
			  "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
			  "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
			  "\u00e9xyz\", " SC_ROW "}]}");
	CHECK(strstr(html,
		     "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
		     "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"
		     "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u2026<title>") != NULL);
	free(html);
}

/* Random mutations of a scenario result: refused or rendered, never unsafe. */
static void test_scenario_mutations(void)
{
	static char buf[1 << 14];
	const size_t len = strlen(sc_incast);
	REQUIRE(len < sizeof(buf));
	static const char *const junk[] = {"0",	   "-1", "1e308", "1e-300", "null",  "\"<s>\"",
					   "[]",   "{}", "true",  "\"\"",   "[[0]]", "-0",
					   "1e20", "2",	 "\"&\"", "0.5"};
	int rendered = 0, refused = 0;
	for (int it = 0; it < 400; it++) {
		memcpy(buf, sc_incast, len);
		size_t n = len;
		n = mutate(buf, n, sizeof(buf), 1 + (int)(rnd() % 3), junk,
			   sizeof(junk) / sizeof(junk[0]));
		struct json *v;
		if (json_parse(buf, n, &v, NULL))
			continue;
		int rc;
		char err[256];
		char *html = render(v, &rc, err, sizeof(err));
		CHECK(rc == 0 || rc == -EINVAL);
		if (rc == 0) {
			rendered++;
			CHECK(strstr(html, "<s>") == NULL);
			CHECK(strstr(html, "</html>") != NULL);
			CHECK(strstr(html, "nan") == NULL && strstr(html, "inf\"") == NULL &&
			      strstr(html, ">inf") == NULL);
		} else {
			refused++;
			CHECK(html[0] == '\0' && err[0] != '\0');
		}
		free(html);
		json_free(v);
	}
	printf("scenario mutations: %d rendered, %d refused\n", rendered, refused);
	CHECK(rendered > 20 && refused > 20);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	fputs(text, f);
	REQUIRE(fclose(f) == 0);
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "r");
	REQUIRE(f);
	static char buf[1 << 18];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* `softrdma report a.json b.json c.json -o page.html`: one page; refusals leave no page. */
static void test_scenario_cli(void)
{
	char dir[] = "/tmp/test_report_XXXXXX";
	REQUIRE(mkdtemp(dir));
	char inc[128], los[128], cmp[128], bad[128], out[128], def[128];
	snprintf(inc, sizeof(inc), "%s/incast.json", dir);
	snprintf(los, sizeof(los), "%s/loss.json", dir);
	snprintf(cmp, sizeof(cmp), "%s/compare.json", dir);
	snprintf(bad, sizeof(bad), "%s/bad.json", dir);
	snprintf(out, sizeof(out), "%s/all.html", dir);
	snprintf(def, sizeof(def), "%s/incast.html", dir);
	write_file(inc, sc_incast);
	write_file(los, sc_loss);
	write_file(cmp, "{\"tool\": \"softrdma compare\", \"schema\": 1}\n");
	write_file(bad, "{" SC_TOP ", \"rows\": [{\"ok\": 1, " SC_ROW "}]}\n");
	struct stat st;
	CHECK_EQ(run(inc, los, NULL, NULL), 2); /* several files need -o */
	CHECK_EQ(run(inc, cmp, "-o", out), 1);
	CHECK_EQ(run(inc, bad, "-o", out), 1);
	CHECK_EQ(run(bad, NULL, NULL, NULL), 1);
	CHECK(stat(out, &st) != 0); /* nothing written for a refused file */
	CHECK(stat(def, &st) != 0);
	CHECK_EQ(run(inc, los, "-o", out), 0);
	char *html = read_all(out);
	CHECK_EQ(table_rows(html, "table-scenarios"), 2);
	CHECK(strstr(html, "id=\"scenario-2\"") != NULL);
	CHECK(strstr(html, "<td class=\"l\">") != NULL && strstr(html, "/loss.json</td>") != NULL);
	CHECK_EQ(run(inc, NULL, NULL, NULL), 0); /* one scenario file: incast.json -> incast.html */
	html = read_all(def);
	CHECK(strstr(html, "<svg id=\"plot-throughput-1\"") != NULL);
	CHECK(strstr(html, "id=\"table-scenarios\"") == NULL);
	unlink(inc);
	unlink(los);
	unlink(cmp);
	unlink(bad);
	unlink(out);
	unlink(def);
	rmdir(dir);
}

int main(void)
{
	test_sample();
	test_hostile();
	test_refusals();
	test_extremes();
	test_mutations();
	test_cli();
	test_scenario_incast();
	test_scenario_victim_loss();
	test_scenario_several();
	test_scenario_refusals();
	test_scenario_mutations();
	test_scenario_cli();
	return check_exit();
}
