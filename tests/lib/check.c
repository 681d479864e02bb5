#include "check.h"

int check_failures;
int check_count;

uint64_t check_seed(uint64_t dflt)
{
	const char *s = getenv("SOFTRDMA_SEED");
	uint64_t seed = s ? strtoull(s, NULL, 0) : dflt;
	fprintf(stderr, "seed %" PRIu64 " (replay with SOFTRDMA_SEED=%" PRIu64 ")\n", seed, seed);
	return seed;
}

int check_exit(void)
{
	fprintf(stderr, "%d checks, %d failed\n", check_count, check_failures);
	if (check_count == 0) {
		fprintf(stderr, "no checks ran\n");
		return 1;
	}
	return check_failures ? 1 : 0;
}
