/* CRCs used on the wire: CRC-32 (IEEE 802.3, reflected, as zlib; RoCE ICRC) and CRC-32C
 * (Castagnoli; iWARP MPA). Both use the zlib convention: pass 0 to start, pass the previous
 * return value to continue; the pre- and post-inversion are done inside. The CPU's CRC
 * instructions are used where available, chosen once at run time. Thread-safe, no state. */
#ifndef SOFTRDMA_UTIL_CRC_H
#define SOFTRDMA_UTIL_CRC_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32_ieee(uint32_t crc, const void *buf, size_t len);
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* Raw register operations for CRC algebra (the ICRC solver): the reflected CRC-32 register,
 * without pre/post inversion. crc32_ieee_raw(s, p, n) feeds n bytes into register s. */
uint32_t crc32_ieee_raw(uint32_t state, const void *buf, size_t len);

/* crc32_ieee_raw over `a` (na bytes) and then `b` (nb bytes), as if they were one buffer:
 * equal to crc32_ieee_raw(crc32_ieee_raw(state, a, na), b, nb), but with the carry-less
 * multiply paths reducing once instead of twice when both are at least 16 bytes. For a header
 * assembled on the stack followed by a payload in place (the RoCE ICRC). */
uint32_t crc32_ieee_raw2(uint32_t state, const void *a, size_t na, const void *b, size_t nb);

/* Multiplies register `state` by x^(8*nbytes) modulo the CRC-32 (IEEE) polynomial, in the
 * reflected bit order of crc32_ieee_raw: for nbytes > 0 this equals feeding nbytes zero bytes
 * (crc32_ieee_raw(state, zeros, nbytes)); for nbytes < 0 it undoes that (x is invertible
 * modulo the polynomial). O(log |nbytes|) carry-less multiplications, no table walk over the
 * bytes. Used to solve the ICRC for the unknown IPv4 identification (wire/roce/icrc.c). */
uint32_t crc32_ieee_shift(uint32_t state, int64_t nbytes);

/* Carry-less product a*b modulo the CRC-32 (IEEE) polynomial, both operands and the result
 * in the reflected bit order of the CRC register (bit 31 = coefficient of x^0). */
uint32_t crc32_ieee_mulmod(uint32_t a, uint32_t b);

/* ---- Implementation selection: for tests and benchmarks only ----
 * Production code calls crc32_ieee/crc32c, which use the fastest implementation this CPU
 * supports (CRC_IMPL_AUTO). Every implementation returns identical results. */
enum crc_impl {
	CRC_IMPL_AUTO,	   /* what crc32_ieee / crc32c use on this CPU */
	CRC_IMPL_BYTEWISE, /* one 256-entry table lookup per byte: the reference */
	CRC_IMPL_SLICE8,   /* portable slicing-by-8 */
	CRC_IMPL_HW,	   /* CRC-32: PCLMULQDQ (and SSE4.1) folding; CRC-32C: SSE4.2 crc32 */
	CRC_IMPL_WIDE,	   /* CRC-32: VPCLMULQDQ folding on 256-bit registers (AVX2);
			    * CRC-32C: three interleaved crc32 streams joined with PCLMULQDQ */
	CRC_IMPL__COUNT
};

/* Same contract as crc32_ieee / crc32c, through one chosen implementation. Returns 0 and the
 * CRC in *out, or -ENOTSUP if this CPU (or build) lacks the instructions `impl` needs. */
int crc32_ieee_with(enum crc_impl impl, uint32_t crc, const void *buf, size_t len, uint32_t *out);
/* crc32_ieee over a then b (the zlib form of crc32_ieee_raw2) through one implementation. */
int crc32_ieee2_with(enum crc_impl impl, uint32_t crc, const void *a, size_t na, const void *b,
		     size_t nb, uint32_t *out);
int crc32c_with(enum crc_impl impl, uint32_t crc, const void *buf, size_t len, uint32_t *out);
/* crc32_ieee_shift through one implementation of the modular product: BYTEWISE = one bit at a
 * time, SLICE8 = four bits at a time + table reduction, HW = PCLMULQDQ + table reduction;
 * WIDE has no product of its own (-ENOTSUP). */
int crc32_ieee_shift_with(enum crc_impl impl, uint32_t state, int64_t nbytes, uint32_t *out);

/* "auto", "bytewise", "slice8", "hw", "wide"; "?" for anything else. */
const char *crc_impl_name(enum crc_impl impl);

#endif
