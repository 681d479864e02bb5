/* tools/leaders: the "who leads at which sizes" fragment of softrdma compare's summary. One
 * leader throughout; a leader that changes back and forth (every run named, not only the
 * first change); ties within the threshold; unmeasured sizes left out and splitting runs; a
 * single point; nothing measured; a short buffer cut but terminated. */
#include "check.h"

#include <string.h>

#include "tools/leaders.h"

#define KI 1024ull
#define MI (1024ull * 1024ull)

static void check_text(const struct lead_pt *p, size_t n, const char *want, int want_runs)
{
	char out[400];
	int runs = leaders_text(p, n, "RoCEv2", "iWARP", 0.05, out, sizeof(out));
	CHECK_EQ(runs, want_runs);
	CHECK(strcmp(out, want) == 0);
	if (strcmp(out, want) != 0)
		fprintf(stderr, "  got:  %s\n  want: %s\n", out, want);
}

int main(void)
{
	/* iWARP everywhere. */
	struct lead_pt one[] = {{64, true, 1, 2}, {4 * KI, true, 2, 3}, {64 * KI, true, 4, 17}};
	check_text(one, 3, "iWARP at 64 B - 64 KiB", 1);

	/* The case the old summary got wrong: RoCEv2 at 4 KiB only. */
	struct lead_pt flip[] = {{64, true, 0.1, 0.2},	   {1 * KI, true, 1, 1.5},
				 {4 * KI, true, 5, 3},	   {16 * KI, true, 6, 6.1},
				 {64 * KI, true, 4.3, 17}, {1 * MI, true, 4.6, 19.8}};
	check_text(flip, 6,
		   "iWARP at 64 B - 1 KiB, RoCEv2 at 4 KiB, a tie at 16 KiB, iWARP from 64 KiB on",
		   4);

	/* Unmeasured sizes are left out and split the runs. */
	struct lead_pt gap[] = {
	    {64, true, 3, 1}, {1 * KI, false, 0, 0}, {4 * KI, true, 3, 1}, {16 * KI, false, 0, 0}};
	check_text(gap, 4, "RoCEv2 at 64 B, RoCEv2 at 4 KiB", 2);

	/* A zero against a zero is a tie, not a lead. */
	struct lead_pt zero[] = {{64, true, 0, 0}};
	check_text(zero, 1, "a tie at 64 B", 1);

	struct lead_pt none[] = {{64, false, 1, 2}};
	check_text(none, 1, "", 0);
	check_text(none, 0, "", 0);

	/* A short buffer: cut, terminated. */
	char small[10];
	int runs = leaders_text(flip, 6, "RoCEv2", "iWARP", 0.05, small, sizeof(small));
	CHECK_EQ(runs, 4);
	CHECK(strlen(small) < sizeof(small));
	CHECK(strncmp(small, "iWARP at", 8) == 0);
	return check_exit();
}
