/* What the benchmark programs in bench/ share: fatal errors, clocks, and the blocking reads
 * and writes of their TCP side channels. Header only: each program is one file (CMakeLists). */
#ifndef SOFTRDMA_BENCH_H
#define SOFTRDMA_BENCH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Prints "<program>: what (errno's text)" and exits 1. */
static inline void die(const char *what)
{
	fprintf(stderr, "%s: %s (%s)\n", program_invocation_short_name, what, strerror(errno));
	exit(1);
}

static inline double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline double now_s(void)
{
	return now_us() / 1e6;
}

/* User + system CPU seconds of the whole process (every thread: the progress thread too). */
static inline double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static inline void send_all(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		die("side channel");
}

static inline void recv_all(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r <= 0)
			die("side channel");
		got += (size_t)r;
	}
}

#endif
