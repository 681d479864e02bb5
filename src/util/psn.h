/* 24-bit packet sequence numbers (IBTA 9.7.1). PSNs wrap modulo 2^24: compare and add only
 * through these helpers, never with < or +. */
#ifndef SOFTRDMA_UTIL_PSN_H
#define SOFTRDMA_UTIL_PSN_H

#include <stdint.h>

#define PSN_MASK 0xFFFFFFu

static inline uint32_t psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & PSN_MASK;
}

/* Signed distance a - b in the window +-2^23: < 0 when a is before b, 0 equal, > 0 after. */
static inline int32_t psn_cmp(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

#endif
