/* Which of two series leads at which message sizes, in words, for softrdma compare's summary:
 * "RoCEv2 at 64 B - 1 KiB, a tie at 4 KiB, iWARP from 64 KiB on". A lead within tie (e.g.
 * 0.05: 5 %) of the other is a tie; sizes where either value is missing are left out, and
 * split the runs around them. */
#ifndef SOFTRDMA_TOOLS_LEADERS_H
#define SOFTRDMA_TOOLS_LEADERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct lead_pt {
	uint64_t size; /* bytes */
	bool ok;       /* both values measured */
	double a, b;   /* higher is better */
};

/* Writes the sentence fragment into out (always terminated, cut to len) and returns the number
 * of runs (0: nothing measured). */
int leaders_text(const struct lead_pt *pts, size_t n, const char *a_name, const char *b_name,
		 double tie, char *out, size_t len);

void leaders_fmt_size(uint64_t s, char *out, size_t len);

#endif
