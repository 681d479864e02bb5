/* Which series leads at which sizes (leaders.h). */
#include "tools/leaders.h"

#include <stdio.h>
#include <string.h>

void leaders_fmt_size(uint64_t s, char *out, size_t len)
{
	if (s >= (1u << 20) && s % (1u << 20) == 0)
		snprintf(out, len, "%llu MiB", (unsigned long long)(s >> 20));
	else if (s >= 1024 && s % 1024 == 0)
		snprintf(out, len, "%llu KiB", (unsigned long long)(s >> 10));
	else
		snprintf(out, len, "%llu B", (unsigned long long)s);
}

enum who { W_A, W_B, W_TIE };

static enum who who_leads(const struct lead_pt *p, double tie)
{
	double hi = p->a >= p->b ? p->a : p->b, lo = p->a >= p->b ? p->b : p->a;
	if (hi <= 0 || lo >= hi * (1.0 - tie))
		return W_TIE;
	return p->a > p->b ? W_A : W_B;
}

static void append(char *out, size_t len, const char *s)
{
	size_t used = strlen(out);
	if (used + 1 < len)
		snprintf(out + used, len - used, "%s", s);
}

int leaders_text(const struct lead_pt *pts, size_t n, const char *a_name, const char *b_name,
		 double tie, char *out, size_t len)
{
	if (len == 0)
		return 0;
	out[0] = '\0';
	int runs = 0;
	size_t i = 0;
	while (i < n) {
		if (!pts[i].ok) {
			i++;
			continue;
		}
		/* A run: consecutive measured sizes with the same leader. */
		enum who w = who_leads(&pts[i], tie);
		size_t j = i;
		while (j + 1 < n && pts[j + 1].ok && who_leads(&pts[j + 1], tie) == w)
			j++;
		bool to_end = true;
		for (size_t k = j + 1; k < n; k++)
			to_end &= !pts[k].ok;
		char from[32], to[32], piece[160];
		leaders_fmt_size(pts[i].size, from, sizeof(from));
		leaders_fmt_size(pts[j].size, to, sizeof(to));
		const char *name = w == W_A ? a_name : w == W_B ? b_name : "a tie";
		if (to_end && runs > 0 && j > i)
			snprintf(piece, sizeof(piece), "%s from %s on", name, from);
		else if (j > i)
			snprintf(piece, sizeof(piece), "%s at %s - %s", name, from, to);
		else
			snprintf(piece, sizeof(piece), "%s at %s", name, from);
		if (runs > 0)
			append(out, len, ", ");
		append(out, len, piece);
		runs++;
		i = j + 1;
	}
	return runs;
}
