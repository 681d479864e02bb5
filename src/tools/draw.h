/* Seeded random draws for the tools' packet-dropping and marking decisions (lossy_link.c,
 * switch_model.c): the same seed and the same packets give the same decisions. */
#ifndef SOFTRDMA_TOOLS_DRAW_H
#define SOFTRDMA_TOOLS_DRAW_H

#include <stdbool.h>
#include <stdint.h>

/* splitmix64 (Vigna): tiny, seedable from any value, uniform enough to drop packets. */
static inline uint64_t draw_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Probability p as a threshold on draws: an event happens when draw_next() is below it.
 * UINT64_MAX for p >= 1 (then every draw but UINT64_MAX itself), 0 for p <= 0 and NaN. */
static inline uint64_t draw_threshold(double p)
{
	if (p >= 1.0)
		return UINT64_MAX;
	if (!(p > 0.0))
		return 0;
	return (uint64_t)(p * 18446744073709551616.0); /* p * 2^64 < 2^64: defined */
}

/* 0..1, NaN excluded. */
static inline bool draw_valid(double p)
{
	return p >= 0.0 && p <= 1.0;
}

#endif
