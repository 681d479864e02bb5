/* tools/json: the strict RFC 8259 parser behind `softrdma report`. Valid documents and the
 * accessors (missing keys, wrong types, duplicates), every escape, surrogate pairs and lone
 * surrogates, UTF-8 validation, the number grammar and range, the depth limit (and a very deep
 * input that must not exhaust the stack), a table of malformed inputs with the exact
 * line:column of the error, every truncation of the sample result, the file reader's errors,
 * and seeded random mutations of the sample (reproducible with SOFTRDMA_SEED) that must never
 * crash or leak, with a sane error position whenever they fail. */
#include "check.h"

#include <errno.h>

#include "tools/json.h"

static uint64_t rng;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the printed seed. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

static int parse(const char *s, struct json **v, struct json_error *e)
{
	return json_parse(s, strlen(s), v, e);
}

/* Parses s, which must be valid; returns the tree (caller frees). */
static struct json *ok(const char *s)
{
	struct json *v = NULL;
	struct json_error e;
	int rc = parse(s, &v, &e);
	if (rc) {
		fprintf(stderr, "unexpected failure on <%s>: %d:%d: %s\n", s, e.line, e.column,
			e.msg);
	}
	CHECK_EQ(rc, 0);
	return v;
}

static void test_valid(void)
{
	struct json *v = ok(" {\"a\": [1, 2.5, -3e2, true, false, null, \"x\", {}, []],\n"
			    "\t\"b\": {\"c\": \"d\"}, \"a\": \"dup\", \"\": 7}\r\n");
	REQUIRE(v);
	CHECK_EQ(json_type(v), JSON_OBJECT);
	CHECK_EQ(json_len(v), 4);
	const struct json *a = json_get(v, "a");
	CHECK_EQ(json_type(a), JSON_ARRAY); /* the first of the duplicated keys */
	CHECK_EQ(json_len(a), 9);
	CHECK(json_num(json_at(a, 0), 0) == 1.0);
	CHECK(json_num(json_at(a, 1), 0) == 2.5);
	CHECK(json_num(json_at(a, 2), 0) == -300.0);
	CHECK(json_bool(json_at(a, 3), false) == true);
	CHECK(json_bool(json_at(a, 4), true) == false);
	CHECK_EQ(json_type(json_at(a, 5)), JSON_NULL);
	CHECK(json_at(a, 5) != NULL);
	CHECK(strcmp(json_str(json_at(a, 6)), "x") == 0);
	CHECK_EQ(json_type(json_at(a, 7)), JSON_OBJECT);
	CHECK_EQ(json_len(json_at(a, 7)), 0);
	CHECK_EQ(json_len(json_at(a, 8)), 0);
	CHECK(json_at(a, 9) == NULL);
	CHECK(strcmp(json_str(json_get(json_get(v, "b"), "c")), "d") == 0);
	CHECK(json_num(json_get(v, ""), 0) == 7.0);
	CHECK(strcmp(json_key(v, 2), "a") == 0);
	CHECK(strcmp(json_str(json_at(v, 2)), "dup") == 0);
	CHECK(json_key(v, 4) == NULL);
	CHECK(json_key(a, 0) == NULL);
	/* Wrong types and missing members read as defaults, never crash. */
	CHECK(json_get(v, "missing") == NULL);
	CHECK(json_get(a, "a") == NULL);
	CHECK(json_get(NULL, "a") == NULL);
	CHECK(json_get(v, NULL) == NULL);
	CHECK(json_at(NULL, 0) == NULL);
	CHECK(json_at(json_at(a, 0), 0) == NULL);
	CHECK_EQ(json_len(NULL), 0);
	CHECK_EQ(json_len(json_at(a, 6)), 0);
	CHECK(json_num(json_at(a, 6), 42) == 42);
	CHECK(json_num(NULL, -1) == -1);
	CHECK(json_str(json_at(a, 0)) == NULL);
	CHECK(json_str(NULL) == NULL);
	CHECK_EQ(json_strlen(json_at(a, 0)), 0);
	CHECK(json_bool(json_at(a, 0), true) == true);
	CHECK_EQ(json_type(NULL), JSON_NULL);
	json_free(v);
	json_free(NULL);

	/* Any value at the top level (RFC 8259 2), and a byte order mark is skipped. */
	static const char *const tops[] = {"0",	    "-0",   "\"\"",  "true",
					   "false", "null", " [ ] ", "\xef\xbb\xbf{}"};
	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++)
		json_free(ok(tops[i]));
}

static void check_string(const char *json, const char *want, size_t wantlen)
{
	struct json *v = ok(json);
	CHECK_EQ(json_type(v), JSON_STRING);
	CHECK_EQ(json_strlen(v), wantlen);
	if (json_str(v) && json_strlen(v) == wantlen)
		CHECK_MEM(json_str(v), want, wantlen + 1);
	json_free(v);
}

static void test_strings(void)
{
	check_string("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8);
	check_string("\"\\u0041\\u00e9\\u00E9\\u20ac\"", "A\xc3\xa9\xc3\xa9\xe2\x82\xac", 8);
	check_string("\"\\u007f\\u0080\\u07ff\\u0800\\uffff\"",
		     "\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf", 11);
	/* Surrogate pairs: U+1F600 and the extremes U+10000, U+10FFFF. */
	check_string("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4);
	check_string("\"\\uD800\\uDC00\\uDBFF\\uDFFF\"", "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 8);
	/* Raw UTF-8 passes through unchanged. */
	check_string("\"h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
		     "h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 12);
	/* \u0000 is kept: json_str reads as if cut, json_strlen knows better. */
	struct json *v = ok("\"a\\u0000b\"");
	CHECK_EQ(json_strlen(v), 3);
	CHECK(strcmp(json_str(v), "a") == 0);
	json_free(v);
	check_string("\"\"", "", 0);
	/* A long string (larger than any small-buffer path). */
	char big[5000];
	big[0] = '"';
	memset(big + 1, 'z', sizeof(big) - 3);
	big[sizeof(big) - 2] = '"';
	big[sizeof(big) - 1] = '\0';
	v = ok(big);
	CHECK_EQ(json_strlen(v), sizeof(big) - 3);
	json_free(v);
}

static void test_numbers(void)
{
	static const struct {
		const char *s;
		double v;
	} good[] = {
	    {"0", 0},
	    {"-0", 0},
	    {"7", 7},
	    {"-12", -12},
	    {"1.5", 1.5},
	    {"-0.25", -0.25},
	    {"1e2", 100},
	    {"1E+2", 100},
	    {"25e-2", 0.25},
	    {"0.5e1", 5},
	    {"123456789012345678901234567890", 1.2345678901234568e29},
	    {"1.7976931348623157e308", 1.7976931348623157e308},
	    {"1e-400", 0}, /* underflow: 0, not an error */
	    {"4.9406564584124654e-324", 4.9406564584124654e-324},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		struct json *v = ok(good[i].s);
		CHECK_EQ(json_type(v), JSON_NUMBER);
		if (json_num(v, -99) != good[i].v) {
			fprintf(stderr, "number %s read as %.17g\n", good[i].s, json_num(v, -99));
			CHECK(0);
		}
		json_free(v);
	}
	/* Long digit strings (past the parser's small buffer) still convert. */
	char digits[300];
	memset(digits, '1', sizeof(digits) - 1);
	digits[sizeof(digits) - 1] = '\0';
	struct json *v = ok(digits);
	CHECK(json_num(v, 0) > 1.1e298 && json_num(v, 0) < 1.2e298);
	json_free(v);

	static const char *const bad[] = {
	    "01",    "-01",    "+1",	".5",  "1.",  "1.e5",	  "-",	       "-a",
	    "1e",    "1e+",    "1E-",	"NaN", "nan", "Infinity", "-Infinity", "0x10",
	    "1e400", "-1e400", "1_000", "1,5", "- 1", "0.5.5",	  "1e5e5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct json *w = (struct json *)1;
		struct json_error e;
		int rc = parse(bad[i], &w, &e);
		if (rc != -EINVAL)
			fprintf(stderr, "number <%s> accepted\n", bad[i]);
		CHECK_EQ(rc, -EINVAL);
		CHECK(w == NULL);
		CHECK_EQ(e.line, 1);
		CHECK(e.column >= 1);
	}
}

static void test_depth(void)
{
	char buf[2 * JSON_MAX_DEPTH + 8];
	/* Exactly JSON_MAX_DEPTH levels parse. */
	size_t n = 0;
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		buf[n++] = '[';
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		buf[n++] = ']';
	struct json *v = NULL;
	struct json_error e;
	CHECK_EQ(json_parse(buf, n, &v, &e), 0);
	json_free(v);
	/* One more is refused, at the bracket that opens it. */
	n = 0;
	for (int i = 0; i <= JSON_MAX_DEPTH; i++)
		buf[n++] = '[';
	for (int i = 0; i <= JSON_MAX_DEPTH; i++)
		buf[n++] = ']';
	CHECK_EQ(json_parse(buf, n, &v, &e), -EINVAL);
	CHECK(v == NULL);
	CHECK_EQ(e.column, JSON_MAX_DEPTH + 1);
	CHECK(strstr(e.msg, "nesting") != NULL);
	/* Objects count too. */
	char obj[64 * 8 + 64];
	n = 0;
	for (int i = 0; i <= JSON_MAX_DEPTH; i++)
		n += (size_t)sprintf(obj + n, "{\"a\":");
	CHECK_EQ(json_parse(obj, n, &v, &e), -EINVAL);
	CHECK(strstr(e.msg, "nesting") != NULL);
	/* A million brackets: fails at the limit, no stack exhaustion. */
	size_t big = 1 << 20;
	char *deep = malloc(big);
	REQUIRE(deep);
	memset(deep, '[', big);
	CHECK_EQ(json_parse(deep, big, &v, &e), -EINVAL);
	CHECK_EQ(e.column, JSON_MAX_DEPTH + 1);
	free(deep);
}

static void test_malformed(void)
{
	static const struct {
		const char *s;
		size_t len; /* 0: strlen */
		int line, col;
		const char *msg; /* a substring of the message */
	} cases[] = {
	    {"", 0, 1, 1, "end of input"},
	    {"   ", 0, 1, 4, "end of input"},
	    {"[1,]", 0, 1, 4, "expected a value"},
	    {"[1 2]", 0, 1, 4, "',' or ']'"},
	    {"[1,2", 0, 1, 5, "end of input"},
	    {"{\"a\" 1}", 0, 1, 6, "':'"},
	    {"{\"a\":1,}", 0, 1, 8, "object key"},
	    {"{\"a\":1 \"b\":2}", 0, 1, 8, "',' or '}'"},
	    {"{1:2}", 0, 1, 2, "object key"},
	    {"{'a':2}", 0, 1, 2, "object key"},
	    {"{\"a\"}", 0, 1, 5, "':'"},
	    {"{\"a\":}", 0, 1, 6, "a value"},
	    {"[1]x", 0, 1, 4, "end of input after the value"},
	    {"1 2", 0, 1, 3, "end of input after the value"},
	    {"\"abc", 0, 1, 5, "in a string"},
	    {"\"abc\\\"", 0, 1, 7, "in a string"},
	    {"\"a\tb\"", 0, 1, 3, "control character"},
	    {"\"a\nb\"", 0, 1, 3, "control character"},
	    {"\"\\x\"", 0, 1, 3, "invalid escape"},
	    {"\"\\U0041\"", 0, 1, 3, "invalid escape"},
	    {"\"\\u12g4\"", 0, 1, 6, "hex digit"},
	    {"\"\\u12\"", 0, 1, 6, "hex digit"},
	    {"\"\\ud800\"", 0, 1, 2, "high surrogate"},
	    {"\"\\ud800x\"", 0, 1, 2, "high surrogate"},
	    {"\"\\udc00\"", 0, 1, 2, "lone low surrogate"},
	    {"\"\\ud800\\u0041\"", 0, 1, 8, "not a low surrogate"},
	    {"\"\\ud800\\ud800\"", 0, 1, 8, "not a low surrogate"},
	    {"\"\\ud800\\u00\"", 0, 1, 12, "hex digit"},
	    {"\"\xff\"", 0, 1, 2, "UTF-8"},
	    {"\"\xc0\xaf\"", 0, 1, 2, "UTF-8"},		/* overlong '/' */
	    {"\"\xe0\x80\xaf\"", 0, 1, 2, "UTF-8"},	/* overlong, 3 bytes */
	    {"\"\xed\xa0\x80\"", 0, 1, 2, "UTF-8"},	/* encoded surrogate */
	    {"\"\xf4\x90\x80\x80\"", 0, 1, 2, "UTF-8"}, /* above U+10FFFF */
	    {"\"\xc3\"", 0, 1, 2, "UTF-8"},		/* cut before the quote */
	    {"\"ab\x80\"", 0, 1, 4, "UTF-8"},		/* stray continuation byte */
	    {"[1,\0]", 5, 1, 4, "byte 0x00"},
	    {"tru", 0, 1, 4, "true"},
	    {"trUe", 0, 1, 3, "true"},
	    {"nul1", 0, 1, 4, "null"},
	    {"falsey", 0, 1, 6, "end of input after"},
	    {"// c\n1", 0, 1, 1, "'/'"},
	    {"/* c */ 1", 0, 1, 1, "'/'"},
	    {"'a'", 0, 1, 1, "'''"},
	    {"01", 0, 1, 1, "leading zero"},
	    {"[0,01]", 0, 1, 4, "leading zero"},
	    {"1e400", 0, 1, 1, "out of range"},
	    {"[\n  1,\n  x]", 0, 3, 3, "'x'"},
	    {"[1]\n\n ]", 0, 3, 2, "after the value"},
	    {"{\"a\":\n[1,\r\n2,,3]}", 0, 3, 3, "','"},
	    {"\xef\xbb\xbf", 0, 1, 4, "end of input"},
	    {"\xef\xbb", 0, 1, 1, "byte 0xef"},
	    {"\x01", 0, 1, 1, "byte 0x01"},
	    {"[\"a\"\f]", 0, 1, 5, "byte 0x0c"}, /* form feed is not JSON whitespace */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t len = cases[i].len ? cases[i].len : strlen(cases[i].s);
		struct json *v = (struct json *)1;
		struct json_error e;
		int rc = json_parse(cases[i].s, len, &v, &e);
		CHECK_EQ(rc, -EINVAL);
		CHECK(v == NULL);
		if (rc != -EINVAL || e.line != cases[i].line || e.column != cases[i].col ||
		    !strstr(e.msg, cases[i].msg)) {
			fprintf(stderr, "case %zu: got %d:%d '%s', want %d:%d '...%s...'\n", i,
				e.line, e.column, e.msg, cases[i].line, cases[i].col, cases[i].msg);
			check_failures++;
		}
		CHECK(e.offset <= len);
	}
	/* err may be NULL. */
	struct json *v;
	CHECK_EQ(json_parse("[", 1, &v, NULL), -EINVAL);
	CHECK_EQ(json_parse(NULL, 0, &v, NULL), -EINVAL);
	/* The size limit is checked before the text is read. */
	struct json_error e;
	CHECK_EQ(json_parse("1", (size_t)JSON_MAX_SIZE + 1, &v, &e), -E2BIG);
	CHECK(strstr(e.msg, "larger") != NULL);
}

static char *read_sample(size_t *len)
{
	FILE *f = fopen(SOFTRDMA_TEST_DATA "/compare_sample.json", "rb");
	REQUIRE(f);
	char *buf = malloc(1 << 20);
	REQUIRE(buf);
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	REQUIRE(*len > 100);
	return buf;
}

static void test_file(void)
{
	struct json *v = NULL;
	struct json_error e;
	CHECK_EQ(json_parse_file(SOFTRDMA_TEST_DATA "/compare_sample.json", &v, &e), 0);
	REQUIRE(v);
	CHECK(strcmp(json_str(json_get(v, "tool")), "softrdma compare") == 0);
	const struct json *lat0 = json_at(json_get(json_get(v, "latency"), "series"), 0);
	CHECK(json_num(json_get(lat0, "p50_us"), 0) == 16.3);
	CHECK_EQ(json_len(json_get(json_get(v, "latency"), "series")), 4);
	json_free(v);
	CHECK_EQ(json_parse_file(SOFTRDMA_TEST_DATA "/no_such_file.json", &v, &e), -ENOENT);
	CHECK(v == NULL);
	CHECK(strstr(e.msg, "open") != NULL);
	CHECK_EQ(json_parse_file(SOFTRDMA_TEST_DATA, &v, &e), -EISDIR);
	CHECK_EQ(json_parse_file("/dev/null", &v, &e), -EINVAL); /* empty: no value */
	CHECK_EQ(e.line, 1);
	CHECK_EQ(e.column, 1);
}

/* Every proper prefix of the sample (up to its closing brace) must fail cleanly. */
static void test_truncations(void)
{
	size_t len;
	char *doc = read_sample(&len);
	size_t end = len;
	while (end > 0 && doc[end - 1] != '}')
		end--;
	for (size_t n = 0; n <= len; n++) {
		/* A private copy of exactly n bytes, so ASan sees any read past the end. */
		char *cut = malloc(n ? n : 1);
		REQUIRE(cut);
		memcpy(cut, doc, n);
		struct json *v = (struct json *)1;
		struct json_error e;
		int rc = json_parse(cut, n, &v, &e);
		if (n < end) {
			CHECK_EQ(rc, -EINVAL);
			CHECK(v == NULL);
			CHECK(e.offset <= n);
			CHECK(e.line >= 1 && e.column >= 1 && e.msg[0]);
		} else {
			CHECK_EQ(rc, 0);
		}
		json_free(v == (struct json *)1 ? NULL : v);
		free(cut);
	}
	free(doc);
}

/* Touches every value of a tree through the accessors. */
static size_t walk(const struct json *v)
{
	size_t n = 1;
	(void)json_num(v, 0);
	(void)json_bool(v, false);
	if (json_str(v))
		n += strlen(json_str(v)) <= json_strlen(v) ? 0 : 1000000; /* must not happen */
	for (size_t i = 0; i < json_len(v); i++) {
		if (json_type(v) == JSON_OBJECT)
			(void)json_get(v, json_key(v, i));
		n += walk(json_at(v, i));
	}
	return n;
}

static void test_mutations(void)
{
	static const char interesting[] = "{}[]\",:\\u0123456789-+.eEtfnl \n\t\x00\x80\xc3\xff";
	size_t len;
	char *doc = read_sample(&len);
	char *buf = malloc(len * 2 + 64);
	REQUIRE(buf);
	rng = check_seed(0x6a736f6e);
	if (!rng)
		rng = 1;
	int accepted = 0, rejected = 0;
	for (int it = 0; it < 4000; it++) {
		size_t n = len;
		memcpy(buf, doc, len);
		int muts = 1 + (int)(rnd() % 8);
		for (int m = 0; m < muts && n > 0; m++) {
			size_t at = rnd() % n;
			switch (rnd() % 6) {
			case 0: /* flip a bit */
				buf[at] ^= (char)(1u << (rnd() % 8));
				break;
			case 1: /* replace with an interesting byte */
				buf[at] = interesting[rnd() % (sizeof(interesting) - 1)];
				break;
			case 2: /* insert one */
				if (n < len * 2 + 32) {
					memmove(buf + at + 1, buf + at, n - at);
					buf[at] = interesting[rnd() % (sizeof(interesting) - 1)];
					n++;
				}
				break;
			case 3: /* delete a run */
			{
				size_t k = 1 + rnd() % 16;
				if (k > n - at)
					k = n - at;
				memmove(buf + at, buf + at + k, n - at - k);
				n -= k;
				break;
			}
			case 4: /* truncate */
				n = at;
				break;
			default: /* duplicate a short run */
			{
				size_t k = 1 + rnd() % 32;
				if (k > n - at)
					k = n - at;
				if (n + k <= len * 2 + 32) {
					memmove(buf + at + k, buf + at, n - at);
					n += k;
				}
				break;
			}
			}
		}
		/* An exact-size copy so that ASan catches any read beyond n. */
		char *cut = malloc(n ? n : 1);
		REQUIRE(cut);
		memcpy(cut, buf, n);
		struct json *v = NULL;
		struct json_error e;
		int rc = json_parse(cut, n, &v, &e);
		if (rc == 0) {
			accepted++;
			CHECK(walk(v) < 1000000);
			json_free(v);
		} else {
			rejected++;
			CHECK_EQ(rc, -EINVAL);
			CHECK(v == NULL);
			CHECK(e.offset <= n && e.line >= 1 && e.column >= 1 && e.msg[0]);
		}
		free(cut);
	}
	/* Pure noise too. */
	for (int it = 0; it < 2000; it++) {
		size_t n = rnd() % 64;
		for (size_t i = 0; i < n; i++)
			buf[i] = (rnd() & 1) ? (char)rnd()
					     : interesting[rnd() % (sizeof(interesting) - 1)];
		char *cut = malloc(n ? n : 1);
		REQUIRE(cut);
		memcpy(cut, buf, n);
		struct json *v = NULL;
		struct json_error e;
		if (json_parse(cut, n, &v, &e) == 0)
			json_free(v);
		else
			CHECK(e.offset <= n);
		free(cut);
	}
	printf("mutations: %d accepted, %d rejected\n", accepted, rejected);
	CHECK(rejected > 0);
	free(buf);
	free(doc);
}

int main(void)
{
	test_valid();
	test_strings();
	test_numbers();
	test_depth();
	test_malformed();
	test_file();
	test_truncations();
	test_mutations();
	return check_exit();
}
