/* Clocks, the JSON text buffer and the option numbers of the softrdma tools (util.h). */
#define _GNU_SOURCE
#include "tools/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tool_signals_catch(struct tool_signals *s, void (*handler)(int))
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &s->old_int);
	sigaction(SIGTERM, &sa, &s->old_term);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, &s->old_pipe);
}

void tool_signals_restore(const struct tool_signals *s)
{
	sigaction(SIGINT, &s->old_int, NULL);
	sigaction(SIGTERM, &s->old_term, NULL);
	sigaction(SIGPIPE, &s->old_pipe, NULL);
}

uint64_t tool_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t tool_cpu_ns(void)
{
	return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

void sb_add(struct strbuf *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || s->oom)
		return;
	if (s->len + (size_t)n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 1024;
		while (cap < s->len + (size_t)n + 1)
			cap *= 2;
		char *p = realloc(s->p, cap);
		if (!p) {
			s->oom = true;
			return;
		}
		s->p = p;
		s->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(s->p + s->len, s->cap - s->len, fmt, ap);
	va_end(ap);
	s->len += (size_t)n;
}

void sb_json_str(struct strbuf *s, const char *str)
{
	sb_add(s, "\"");
	for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
		if (*c == '"' || *c == '\\')
			sb_add(s, "\\%c", *c);
		else if (*c < 0x20)
			sb_add(s, "\\u%04x", *c);
		else
			sb_add(s, "%c", *c);
	}
	sb_add(s, "\"");
}

struct unit {
	const char *suffix;
	uint64_t mult;
};

/* An unsigned integer with one of units' suffixes (any case), scaled without overflow. */
static int parse_units(const char *s, const struct unit *units, size_t n, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(end, units[i].suffix))
			continue;
		if (v > UINT64_MAX / units[i].mult)
			return -ERANGE;
		*out = v * units[i].mult;
		return 0;
	}
	return -EINVAL;
}

int parse_bytes(const char *s, uint64_t *out)
{
	static const struct unit units[] = {{"", 1},	      {"b", 1},		{"k", 1 << 10},
					    {"kb", 1 << 10},  {"kib", 1 << 10}, {"m", 1 << 20},
					    {"mb", 1 << 20},  {"mib", 1 << 20}, {"g", 1u << 30},
					    {"gb", 1u << 30}, {"gib", 1u << 30}};
	return parse_units(s, units, sizeof(units) / sizeof(units[0]), out);
}

int parse_count(const char *s, uint64_t *out)
{
	static const struct unit units[] = {
	    {"", 1}, {"k", 1000}, {"m", 1000000}, {"g", 1000000000}};
	return parse_units(s, units, sizeof(units) / sizeof(units[0]), out);
}

int parse_seconds(const char *s, double *out)
{
	static const struct {
		const char *suffix;
		double mult;
	} units[] = {{"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"min", 60}};
	if (!isdigit((unsigned char)*s) && *s != '.')
		return -EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !(v >= 0.0) || v > 1e7)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (!strcasecmp(end, units[i].suffix)) {
			*out = v * units[i].mult;
			return 0;
		}
	}
	return -EINVAL;
}

socklen_t tool_addr(const char *text, uint16_t port, struct sockaddr_storage *a)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)a;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)a;
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, text, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		return sizeof(*a4);
	}
	if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		return sizeof(*a6);
	}
	return 0;
}

socklen_t tool_listen_addr(int family, uint16_t port, struct sockaddr_storage *a, char *why,
			   size_t whylen)
{
	const char *env = getenv("SOFTRDMA_TOOL_BIND");
	if (env && *env) {
		socklen_t len = tool_addr(env, port, a);
		if (!len)
			snprintf(why, whylen,
				 "SOFTRDMA_TOOL_BIND=%s is not an IPv4 or IPv6 address", env);
		return len;
	}
	return tool_addr(family == AF_INET6 ? "::" : "0.0.0.0", port, a);
}

int tool_self_and_tmpdir(const char *cmd, char *self, size_t selflen, char *tmp, size_t tmplen,
			 const char *tmpl)
{
	ssize_t n = readlink("/proc/self/exe", self, selflen - 1);
	if (n <= 0) {
		fprintf(stderr, "softrdma %s: cannot find its own executable: %s\n", cmd,
			strerror(errno));
		return -1;
	}
	self[n] = 0;
	snprintf(tmp, tmplen, "%s", tmpl);
	if (!mkdtemp(tmp)) {
		fprintf(stderr, "softrdma %s: cannot make a temporary directory: %s\n", cmd,
			strerror(errno));
		return -1;
	}
	return 0;
}
