/* Strict RFC 8259 JSON parser (see json.h): recursive descent over a bounded cursor; depth is
 * limited, so the recursion is too. Every failure path frees what it built. */
#include "tools/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct json {
	enum json_type type;
	bool boolean;
	double number;
	char *str;	     /* JSON_STRING: NUL-terminated UTF-8 */
	size_t len;	     /* JSON_STRING: bytes; ARRAY/OBJECT: children */
	struct json **items; /* ARRAY/OBJECT: children in document order */
	char **keys;	     /* OBJECT: keys[i] names items[i] */
};

struct parser {
	const unsigned char *p;
	size_t len;
	size_t pos;
	int depth;
	int rc; /* first error: -EINVAL or -ENOMEM */
	struct json_error *err;
};

static void fail_at(struct parser *ps, size_t at, int rc, const char *fmt, ...)
{
	if (ps->rc)
		return; /* keep the first error: later ones are consequences */
	ps->rc = rc;
	if (!ps->err)
		return;
	int line = 1, col = 1;
	for (size_t i = 0; i < at && i < ps->len; i++) {
		if (ps->p[i] == '\n') {
			line++;
			col = 1;
		} else {
			col++;
		}
	}
	ps->err->line = line;
	ps->err->column = col;
	ps->err->offset = at;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ps->err->msg, sizeof(ps->err->msg), fmt, ap);
	va_end(ap);
}

/* The byte at the cursor for an error message: printable as itself, else as hex. */
static const char *describe(const struct parser *ps, size_t at, char *buf, size_t n)
{
	if (at >= ps->len)
		return "end of input";
	unsigned char c = ps->p[at];
	if (c > 0x20 && c < 0x7f)
		snprintf(buf, n, "'%c'", c);
	else
		snprintf(buf, n, "byte 0x%02x", c);
	return buf;
}

static void fail_unexpected(struct parser *ps, size_t at, const char *expected)
{
	char b[16];
	if (at >= ps->len)
		fail_at(ps, at, -EINVAL, "unexpected end of input, expected %s", expected);
	else
		fail_at(ps, at, -EINVAL, "unexpected %s, expected %s",
			describe(ps, at, b, sizeof(b)), expected);
}

static void skip_ws(struct parser *ps)
{
	while (ps->pos < ps->len) {
		unsigned char c = ps->p[ps->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		ps->pos++;
	}
}

static struct json *new_value(struct parser *ps, enum json_type t)
{
	struct json *v = calloc(1, sizeof(*v));
	if (!v)
		fail_at(ps, ps->pos, -ENOMEM, "out of memory");
	else
		v->type = t;
	return v;
}

void json_free(struct json *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->len && v->items; i++)
		json_free(v->items[i]);
	if (v->keys)
		for (size_t i = 0; i < v->len; i++)
			free(v->keys[i]);
	free(v->items);
	free(v->keys);
	free(v->str);
	free(v);
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Four hex digits at at; -1 (and an error) if they are not. */
static long hex4(struct parser *ps, size_t at)
{
	long v = 0;
	for (size_t i = 0; i < 4; i++) {
		if (at + i >= ps->len) {
			fail_unexpected(ps, at + i, "a hex digit");
			return -1;
		}
		int h = hexval(ps->p[at + i]);
		if (h < 0) {
			fail_unexpected(ps, at + i, "a hex digit");
			return -1;
		}
		v = v * 16 + h;
	}
	return v;
}

static size_t put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Length of the valid UTF-8 sequence at at (RFC 3629 table 4: no overlong forms, no
 * surrogates, nothing above U+10FFFF), or 0 if it is not one. */
static size_t utf8_seq(const struct parser *ps, size_t at)
{
	const unsigned char *s = ps->p + at;
	size_t left = ps->len - at;
	unsigned char c = s[0];
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf; /* range of the second byte */
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (left < n)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* A string starting at the opening quote. Returns its decoded text (malloc'd) and length. */
static char *parse_string(struct parser *ps, size_t *outlen)
{
	size_t start = ++ps->pos; /* past the quote */
	size_t end = start;
	/* First find the closing quote, so the output is sized once: escapes only shrink
	 * (\uXXXX = 6 bytes -> at most 3; a pair, 12 -> 4). */
	while (end < ps->len && ps->p[end] != '"')
		end += ps->p[end] == '\\' ? 2 : 1;
	if (end >= ps->len) {
		fail_at(ps, ps->len, -EINVAL, "unexpected end of input in a string");
		return NULL;
	}
	char *o = malloc(end - start + 1);
	if (!o) {
		fail_at(ps, start, -ENOMEM, "out of memory");
		return NULL;
	}
	size_t n = 0, i = start;
	while (i < end) {
		unsigned char c = ps->p[i];
		if (c < 0x20) {
			fail_at(ps, i, -EINVAL, "control character 0x%02x in a string (escape it)",
				c);
			goto fail;
		}
		if (c != '\\') {
			size_t k = utf8_seq(ps, i);
			if (!k || i + k > end) {
				fail_at(ps, i, -EINVAL, "invalid UTF-8 in a string");
				goto fail;
			}
			memcpy(o + n, ps->p + i, k);
			n += k;
			i += k;
			continue;
		}
		/* i + 1 < end holds: the scan above stepped over the escaped byte. */
		unsigned char e = ps->p[i + 1];
		const char *simple = strchr("\"\\/bfnrt", e);
		if (e && simple) {
			static const char map[] = "\"\\/\b\f\n\r\t";
			o[n++] = map[simple - "\"\\/bfnrt"];
			i += 2;
			continue;
		}
		if (e != 'u') {
			char b[16];
			fail_at(ps, i + 1, -EINVAL, "invalid escape: %s after '\\'",
				describe(ps, i + 1, b, sizeof(b)));
			goto fail;
		}
		long cp = hex4(ps, i + 2);
		if (cp < 0)
			goto fail;
		if (cp >= 0xdc00 && cp <= 0xdfff) {
			fail_at(ps, i, -EINVAL, "lone low surrogate \\u%04lx", cp);
			goto fail;
		}
		if (cp >= 0xd800 && cp <= 0xdbff) {
			/* RFC 8259 7: a supplementary character is a high + low surrogate pair. */
			if (i + 7 >= ps->len || ps->p[i + 6] != '\\' || ps->p[i + 7] != 'u') {
				fail_at(ps, i, -EINVAL,
					"high surrogate \\u%04lx not followed by a low one", cp);
				goto fail;
			}
			long lo = hex4(ps, i + 8);
			if (lo < 0)
				goto fail;
			if (lo < 0xdc00 || lo > 0xdfff) {
				fail_at(ps, i + 6, -EINVAL, "\\u%04lx is not a low surrogate", lo);
				goto fail;
			}
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			i += 6;
		}
		n += put_utf8(o + n, (unsigned long)cp);
		i += 6;
	}
	o[n] = '\0';
	ps->pos = end + 1;
	*outlen = n;
	return o;
fail:
	free(o);
	return NULL;
}

static bool is_digit(const struct parser *ps, size_t at)
{
	return at < ps->len && ps->p[at] >= '0' && ps->p[at] <= '9';
}

static struct json *parse_number(struct parser *ps)
{
	size_t start = ps->pos, i = start;
	if (i < ps->len && ps->p[i] == '-')
		i++;
	if (!is_digit(ps, i)) {
		fail_unexpected(ps, i, "a digit");
		return NULL;
	}
	if (ps->p[i] == '0') {
		i++;
		if (is_digit(ps, i)) {
			fail_at(ps, i - 1, -EINVAL, "leading zero in a number");
			return NULL;
		}
	} else {
		while (is_digit(ps, i))
			i++;
	}
	if (i < ps->len && ps->p[i] == '.') {
		i++;
		if (!is_digit(ps, i)) {
			fail_unexpected(ps, i, "a digit after '.'");
			return NULL;
		}
		while (is_digit(ps, i))
			i++;
	}
	if (i < ps->len && (ps->p[i] == 'e' || ps->p[i] == 'E')) {
		i++;
		if (i < ps->len && (ps->p[i] == '+' || ps->p[i] == '-'))
			i++;
		if (!is_digit(ps, i)) {
			fail_unexpected(ps, i, "a digit in the exponent");
			return NULL;
		}
		while (is_digit(ps, i))
			i++;
	}
	/* The grammar is checked, so strtod reads exactly these bytes; copy them because the
	 * input need not be NUL-terminated. */
	size_t n = i - start;
	char small[64], *buf = n < sizeof(small) ? small : malloc(n + 1);
	if (!buf) {
		fail_at(ps, start, -ENOMEM, "out of memory");
		return NULL;
	}
	memcpy(buf, ps->p + start, n);
	buf[n] = '\0';
	errno = 0;
	double d = strtod(buf, NULL);
	int range = errno == ERANGE && (d > 1.0 || d < -1.0);
	if (buf != small)
		free(buf);
	if (range) {
		fail_at(ps, start, -EINVAL, "number out of range");
		return NULL;
	}
	struct json *v = new_value(ps, JSON_NUMBER);
	if (!v)
		return NULL;
	v->number = d;
	ps->pos = i;
	return v;
}

static struct json *parse_value(struct parser *ps);

/* Appends child (and key, for objects) to v, growing its arrays by doubling. On failure the
 * caller still owns child and key. */
static int append(struct parser *ps, struct json *v, size_t *cap, struct json *child, char *key)
{
	if (v->len == *cap) {
		size_t nc = *cap ? *cap * 2 : 4;
		if (nc > SIZE_MAX / sizeof(void *)) {
			fail_at(ps, ps->pos, -ENOMEM, "out of memory");
			return -ENOMEM;
		}
		struct json **ni = realloc(v->items, nc * sizeof(*ni));
		if (!ni) {
			fail_at(ps, ps->pos, -ENOMEM, "out of memory");
			return -ENOMEM;
		}
		v->items = ni;
		if (v->type == JSON_OBJECT) {
			char **nk = realloc(v->keys, nc * sizeof(*nk));
			if (!nk) {
				fail_at(ps, ps->pos, -ENOMEM, "out of memory");
				return -ENOMEM;
			}
			v->keys = nk;
		}
		*cap = nc;
	}
	v->items[v->len] = child;
	if (v->type == JSON_OBJECT)
		v->keys[v->len] = key;
	v->len++;
	return 0;
}

/* An array or object, the cursor on its opening bracket. */
static struct json *parse_container(struct parser *ps, enum json_type t)
{
	const char close = t == JSON_ARRAY ? ']' : '}';
	if (ps->depth >= JSON_MAX_DEPTH) {
		fail_at(ps, ps->pos, -EINVAL, "nesting deeper than %d", JSON_MAX_DEPTH);
		return NULL;
	}
	struct json *v = new_value(ps, t);
	if (!v)
		return NULL;
	ps->depth++;
	ps->pos++;
	size_t cap = 0;
	skip_ws(ps);
	if (ps->pos < ps->len && ps->p[ps->pos] == close) {
		ps->pos++;
		goto done;
	}
	for (;;) {
		char *key = NULL;
		skip_ws(ps);
		if (t == JSON_OBJECT) {
			if (ps->pos >= ps->len || ps->p[ps->pos] != '"') {
				fail_unexpected(ps, ps->pos, "a string (object key)");
				goto fail;
			}
			size_t klen;
			key = parse_string(ps, &klen);
			if (!key)
				goto fail;
			skip_ws(ps);
			if (ps->pos >= ps->len || ps->p[ps->pos] != ':') {
				fail_unexpected(ps, ps->pos, "':'");
				free(key);
				goto fail;
			}
			ps->pos++;
		}
		struct json *child = parse_value(ps);
		if (!child) {
			free(key);
			goto fail;
		}
		if (append(ps, v, &cap, child, key)) {
			json_free(child);
			free(key);
			goto fail;
		}
		skip_ws(ps);
		if (ps->pos < ps->len && ps->p[ps->pos] == ',') {
			ps->pos++;
			continue;
		}
		if (ps->pos < ps->len && ps->p[ps->pos] == close) {
			ps->pos++;
			break;
		}
		fail_unexpected(ps, ps->pos, t == JSON_ARRAY ? "',' or ']'" : "',' or '}'");
		goto fail;
	}
done:
	ps->depth--;
	return v;
fail:
	ps->depth--;
	json_free(v);
	return NULL;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	for (size_t i = 0; i < n; i++) {
		if (ps->pos + i >= ps->len || ps->p[ps->pos + i] != (unsigned char)word[i]) {
			fail_at(ps, ps->pos + i, -EINVAL, "invalid literal (expected '%s')", word);
			return false;
		}
	}
	ps->pos += n;
	return true;
}

static struct json *parse_value(struct parser *ps)
{
	skip_ws(ps);
	if (ps->pos >= ps->len) {
		fail_unexpected(ps, ps->pos, "a value");
		return NULL;
	}
	struct json *v;
	switch (ps->p[ps->pos]) {
	case '{':
		return parse_container(ps, JSON_OBJECT);
	case '[':
		return parse_container(ps, JSON_ARRAY);
	case '"': {
		size_t n;
		char *s = parse_string(ps, &n);
		if (!s)
			return NULL;
		v = new_value(ps, JSON_STRING);
		if (!v) {
			free(s);
			return NULL;
		}
		v->str = s;
		v->len = n;
		return v;
	}
	case 't':
	case 'f': {
		bool t = ps->p[ps->pos] == 't';
		if (!literal(ps, t ? "true" : "false"))
			return NULL;
		v = new_value(ps, JSON_BOOL);
		if (v)
			v->boolean = t;
		return v;
	}
	case 'n':
		return literal(ps, "null") ? new_value(ps, JSON_NULL) : NULL;
	case '-':
	case '0' ... '9':
		return parse_number(ps);
	default:
		fail_unexpected(ps, ps->pos, "a value");
		return NULL;
	}
}

int json_parse(const char *text, size_t len, struct json **out, struct json_error *err)
{
	struct parser ps = {.p = (const unsigned char *)text, .len = len, .err = err};
	if (err)
		memset(err, 0, sizeof(*err));
	*out = NULL;
	if (len > JSON_MAX_SIZE) {
		if (err)
			snprintf(err->msg, sizeof(err->msg), "input larger than %u bytes",
				 JSON_MAX_SIZE);
		return -E2BIG;
	}
	if (!text && len) {
		fail_at(&ps, 0, -EINVAL, "no input");
		return -EINVAL;
	}
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
		ps.pos = 3; /* RFC 8259 8.1: a parser MAY ignore a byte order mark */
	struct json *v = parse_value(&ps);
	if (v) {
		skip_ws(&ps);
		if (ps.pos < ps.len)
			fail_unexpected(&ps, ps.pos, "end of input after the value");
	}
	if (ps.rc) {
		json_free(v);
		return ps.rc;
	}
	*out = v;
	return 0;
}

int json_parse_file(const char *path, struct json **out, struct json_error *err)
{
	int rc;
	char *buf = NULL;
	size_t n = 0;
	*out = NULL;
	if (err)
		memset(err, 0, sizeof(*err));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (err)
			snprintf(err->msg, sizeof(err->msg), "cannot open: %s", strerror(-rc));
		return rc;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto close_fd;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = -EISDIR;
		goto close_fd;
	}
	/* Read until EOF rather than trusting st_size: pipes and /proc files report 0. */
	size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 && st.st_size <= JSON_MAX_SIZE
			 ? (size_t)st.st_size + 1
			 : 65536;
	buf = malloc(cap);
	if (!buf) {
		rc = -ENOMEM;
		goto close_fd;
	}
	for (;;) {
		if (n == cap) {
			if (cap > JSON_MAX_SIZE) {
				rc = -E2BIG;
				goto free_buf;
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				rc = -ENOMEM;
				goto free_buf;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			goto free_buf;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	rc = json_parse(buf, n, out, err);
	free(buf);
	return rc;
free_buf:
	free(buf);
close_fd:
	close(fd);
	if (err) {
		if (rc == -E2BIG)
			snprintf(err->msg, sizeof(err->msg), "file larger than %u bytes",
				 JSON_MAX_SIZE);
		else
			snprintf(err->msg, sizeof(err->msg), "cannot read: %s", strerror(-rc));
	}
	return rc;
}

enum json_type json_type(const struct json *v)
{
	return v ? v->type : JSON_NULL;
}

const struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT || !key)
		return NULL;
	for (size_t i = 0; i < obj->len; i++)
		if (strcmp(obj->keys[i], key) == 0)
			return obj->items[i];
	return NULL;
}

const struct json *json_at(const struct json *arr, size_t i)
{
	if (!arr || (arr->type != JSON_ARRAY && arr->type != JSON_OBJECT) || i >= arr->len)
		return NULL;
	return arr->items[i];
}

const char *json_key(const struct json *obj, size_t i)
{
	if (!obj || obj->type != JSON_OBJECT || i >= obj->len)
		return NULL;
	return obj->keys[i];
}

size_t json_len(const struct json *v)
{
	return v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT) ? v->len : 0;
}

double json_num(const struct json *v, double dflt)
{
	return v && v->type == JSON_NUMBER ? v->number : dflt;
}

bool json_bool(const struct json *v, bool dflt)
{
	return v && v->type == JSON_BOOL ? v->boolean : dflt;
}

const char *json_str(const struct json *v)
{
	return v && v->type == JSON_STRING ? v->str : NULL;
}

size_t json_strlen(const struct json *v)
{
	return v && v->type == JSON_STRING ? v->len : 0;
}
