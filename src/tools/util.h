/* Small things every softrdma subcommand needs: clocks, the signals it catches, a growing text
 * buffer for JSON, and the numbers-with-units its options take (perf.c, floor.c, compare.c). */
#ifndef SOFTRDMA_TOOLS_UTIL_H
#define SOFTRDMA_TOOLS_UTIL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* How the measurement clients (perf.c, floor.c) begin the error of a server they never
 * reached; compare.c retries such a measurement on another port. */
#define TOOL_NO_SERVER "cannot connect to the server"

/* A subcommand's signals while it runs: SIGINT and SIGTERM call `handler` (no SA_RESTART, so a
 * blocking call returns EINTR and the subcommand ends cleanly), SIGPIPE is ignored (a write to
 * a peer that went away fails with EPIPE instead). tool_signals_restore puts back what was
 * there before. */
struct tool_signals {
	struct sigaction old_int, old_term, old_pipe;
};
void tool_signals_catch(struct tool_signals *s, void (*handler)(int));
void tool_signals_restore(const struct tool_signals *s);

/* What a subcommand that runs copies of itself needs: this executable's path in self, and a
 * fresh private directory made from the mkdtemp template tmpl in tmp. 0, or -1 with the
 * reason on stderr after "softrdma CMD: ". */
int tool_self_and_tmpdir(const char *cmd, char *self, size_t selflen, char *tmp, size_t tmplen,
			 const char *tmpl);

/* CLOCK_MONOTONIC in ns. */
uint64_t tool_now_ns(void);

/* CPU time of the whole process (user + system, every thread: softrdma's progress thread
 * included), in ns. */
uint64_t tool_cpu_ns(void);

/* A text buffer that grows as needed. Zero-initialise it; p is NUL-terminated once anything
 * was added; the owner frees p. After an allocation failure oom is set and later additions are
 * ignored (the text so far stays valid). */
struct strbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

void sb_add(struct strbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* str as a JSON string: quoted, with '"', '\' and control characters escaped. */
void sb_json_str(struct strbuf *s, const char *str);

/* Option values. 0, or -EINVAL (not such a number), -ERANGE (overflow).
 * Bytes: 64, 4K, 4KB, 4KiB, 1M, 8MiB, 1G (binary multiples, any case), 2B.
 * Counts: 1000, 10k, 2M (decimal multiples).
 * Seconds: 5, 2.5, 2.5s, 500ms, 100us, 1min (0 .. 1e7 before the unit). */
int parse_bytes(const char *s, uint64_t *out);
int parse_count(const char *s, uint64_t *out);
int parse_seconds(const char *s, double *out);

/* The numeric IPv4 or IPv6 address text with port, in *a. Returns its length, or 0 when text
 * is neither. */
socklen_t tool_addr(const char *text, uint16_t port, struct sockaddr_storage *a);

/* Where a subcommand's server listens: the numeric address in SOFTRDMA_TOOL_BIND when it is set
 * (`compare --server` sets it to the address its client reached it on, so that what it starts
 * listens there only), else the wildcard address of family (AF_INET or AF_INET6). Fills *a with
 * that address and port; returns its length, or 0 when SOFTRDMA_TOOL_BIND is not an IPv4 or
 * IPv6 address (why says so). */
socklen_t tool_listen_addr(int family, uint16_t port, struct sockaddr_storage *a, char *why,
			   size_t whylen);

#endif
