/* Minimal test assertions shared by every test program. A failed CHECK prints where and why
 * and counts; the program's exit status is non-zero if any check failed (check_exit()).
 * Randomised tests print their seed with check_seed() so a failure can be replayed. */
#ifndef SOFTRDMA_TEST_CHECK_H
#define SOFTRDMA_TEST_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(cond)) {                                                                     \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b);                    \
		check_count++;                                                                     \
		if (check_a_ != check_b_) {                                                        \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld vs %lld)\n",       \
				__FILE__, __LINE__, #a, #b, check_a_, check_b_);                   \
		}                                                                                  \
	} while (0)

#define CHECK_MEM(a, b, n)                                                                         \
	do {                                                                                       \
		check_count++;                                                                     \
		if (memcmp((a), (b), (n)) != 0) {                                                  \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK_MEM failed: %s vs %s (%zu bytes)\n",         \
				__FILE__, __LINE__, #a, #b, (size_t)(n));                          \
		}                                                                                  \
	} while (0)

/* Stops the test at once (for setup failures that make further checks meaningless). */
#define REQUIRE(cond)                                                                              \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Prints the test's seed (from $SOFTRDMA_SEED if set, else `dflt`) and returns it. */
uint64_t check_seed(uint64_t dflt);

/* Prints a summary; returns the exit status for main(): 0 only if checks ran and none failed. */
int check_exit(void);

#endif
