/* CRC-32 (IEEE 802.3, reflected; the zlib/Ethernet CRC, used by the RoCE ICRC) and CRC-32C
 * (Castagnoli; iWARP MPA, RFC 5044 8). Four implementations of each, chosen once at run
 * time: bytewise (the reference), portable slicing-by-8, the CPU's instructions on one
 * dependency chain (PCLMULQDQ folding on 128-bit registers for CRC-32, the SSE4.2 crc32
 * instruction for CRC-32C), and a wide form of those (VPCLMULQDQ folding on 256-bit registers;
 * three interleaved crc32 streams). Every path gives identical results (tests/unit/test_crc.c
 * checks that on random buffers). The folding paths take every buffer of 16 bytes or more
 * (RoCE headers and ACKs included) and end in carry-less products, not table lookups: only
 * buffers under 16 bytes, and CPUs without PCLMULQDQ and SSE4.1, use the tables.
 *
 * Register convention ("raw"): reflected, no inversion; bit 31 holds the coefficient of x^0,
 * bit 0 that of x^31. Feeding one byte b into register s is
 *     s = T[(s ^ b) & 0xff] ^ (s >> 8),
 * which computes s' = (s * x^8 + b' * x^32) mod P. The zlib-style entry points invert before
 * and after. */
#include "util/crc.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define CRC_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define CRC_X86 0
#endif

#define POLY_IEEE 0xEDB88320u /* 0x04C11DB7 reflected */
#define POLY_C	  0x82F63B78u /* 0x1EDC6F41 reflected */

typedef uint32_t (*raw_fn)(uint32_t state, const uint8_t *p, size_t n);
/* Two buffers, one after the other (crc32_ieee_raw2). */
typedef uint32_t (*raw2_fn)(uint32_t state, const uint8_t *a, size_t na, const uint8_t *b,
			    size_t nb);

/* Tables are built once by init() under pthread_once; after that they are read-only. */
static uint32_t tab_ieee[8][256];
static uint32_t tab_c[8][256];
/* x^(8*2^j) and x^(-8*2^j) mod P (reflected), for crc32_ieee_shift. */
static uint32_t pow_fwd[64];
static uint32_t pow_back[64];
static bool cpu_pclmul;
static bool cpu_sse42;
static bool cpu_vpclmul; /* AVX2 + VPCLMULQDQ, and the OS saves the 256-bit registers */
#if CRC_X86
/* Folding constants for the PCLMULQDQ paths, {low lane, high lane}: see fold() below. */
static uint64_t k128[2], k256[2], k512[2], k1024[2];
/* The final reduction (reduce128): x^63 mod P, and Barrett's {mu, P}, as 64-bit lanes. */
static uint64_t k_low, k_bar[2];
/* Combining the three CRC-32C streams: x^(8 * C3_GRAIN * k) and x^(16 * C3_GRAIN * k) mod the
 * Castagnoli polynomial, for streams of C3_GRAIN * k bytes: see c_sse42_3way() below. */
#define C3_GRAIN 16
#define C3_KMAX	 128
static uint32_t c3_shift1[C3_KMAX + 1], c3_shift2[C3_KMAX + 1];
#endif

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static atomic_bool init_done;

static void init(void);

static void ensure_init(void)
{
	if (!atomic_load_explicit(&init_done, memory_order_acquire))
		pthread_once(&init_once, init);
}

/* ---- portable paths ---- */

static inline uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t bytewise(const uint32_t t[256], uint32_t s, const uint8_t *p, size_t n)
{
	while (n--)
		s = t[(s ^ *p++) & 0xff] ^ (s >> 8);
	return s;
}

/* Slicing-by-8: t[k][i] is byte i followed by k zero bytes, so eight lookups advance the
 * register by eight bytes at once. */
static uint32_t slice8(const uint32_t t[8][256], uint32_t s, const uint8_t *p, size_t n)
{
	while (n >= 8) {
		uint32_t lo = s ^ le32(p);
		uint32_t hi = le32(p + 4);

		s = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
		    t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
		    t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	return bytewise(t[0], s, p, n);
}

static uint32_t ieee_bytewise(uint32_t s, const uint8_t *p, size_t n)
{
	return bytewise(tab_ieee[0], s, p, n);
}

static uint32_t ieee_slice8(uint32_t s, const uint8_t *p, size_t n)
{
	return slice8(tab_ieee, s, p, n);
}

/* The table paths gain nothing from seeing both buffers at once. */
static uint32_t ieee2_bytewise(uint32_t s, const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	return ieee_bytewise(ieee_bytewise(s, a, na), b, nb);
}

static uint32_t ieee2_slice8(uint32_t s, const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	return ieee_slice8(ieee_slice8(s, a, na), b, nb);
}

static uint32_t c_bytewise(uint32_t s, const uint8_t *p, size_t n)
{
	return bytewise(tab_c[0], s, p, n);
}

static uint32_t c_slice8(uint32_t s, const uint8_t *p, size_t n)
{
	return slice8(tab_c, s, p, n);
}

/* ---- GF(2)[x] / P arithmetic in reflected order ---- */

/* v * x mod P, for P = POLY_IEEE or POLY_C. */
static inline uint32_t mul_x(uint32_t v, uint32_t poly)
{
	return (v >> 1) ^ (poly & (0u - (v & 1)));
}

/* v * x^-1 mod P. P = x^32 + p(x) with p(0) = 1, so if v has an x^0 term, adding P clears it
 * and the sum divides exactly by x; the x^32 term of P lands on x^31 (bit 0). */
static inline uint32_t div_x(uint32_t v)
{
	if (v & 0x80000000u)
		return ((v ^ POLY_IEEE) << 1) | 1u;
	return v << 1;
}

/* Reference product mod `poly`: for each power x^d of a (bit 31-d), add b * x^d. */
static uint32_t mulmod_poly(uint32_t a, uint32_t b, uint32_t poly)
{
	uint32_t prod = 0;

	for (uint32_t m = 0x80000000u; m; m >>= 1) {
		prod ^= b & (0u - (uint32_t)((a & m) != 0));
		b = mul_x(b, poly);
	}
	return prod;
}

static uint32_t mulmod_bitwise(uint32_t a, uint32_t b)
{
	return mulmod_poly(a, b, POLY_IEEE);
}

/* Reduces a carry-less product of two reflected 32-bit operands. Such a product, shifted left
 * by one, holds x^63..x^32 in bits 0..31 (that is lo(x) * x^32 with lo read as a reflected
 * register) and x^31..x^0 in bits 32..63. lo * x^32 mod P is what four zero bytes do to a
 * register: four slicing-table lookups. */
static uint32_t reduce_product(uint64_t clmul)
{
	uint64_t v = clmul << 1;
	uint32_t lo = (uint32_t)v;

	return (uint32_t)(v >> 32) ^ tab_ieee[3][lo & 0xff] ^ tab_ieee[2][(lo >> 8) & 0xff] ^
	       tab_ieee[1][(lo >> 16) & 0xff] ^ tab_ieee[0][lo >> 24];
}

/* Portable product: a carry-less multiply four bits at a time, then the table reduction. */
static uint32_t mulmod_table(uint32_t a, uint32_t b)
{
	uint64_t mult[16], prod = 0;

	mult[0] = 0;
	mult[1] = b;
	for (int i = 2; i < 16; i++)
		mult[i] = (i & 1) ? mult[i - 1] ^ b : mult[i / 2] << 1;
	for (int j = 28; j >= 0; j -= 4)
		prod = (prod << 4) ^ mult[(a >> j) & 0xF];
	return reduce_product(prod);
}

typedef uint32_t (*mulmod_fn)(uint32_t a, uint32_t b);

static mulmod_fn mulmod_auto = mulmod_table; /* set by init() */

uint32_t crc32_ieee_mulmod(uint32_t a, uint32_t b)
{
	ensure_init();
	return mulmod_auto(a, b);
}

static uint32_t shift_with(mulmod_fn mul, uint32_t state, int64_t nbytes)
{
	uint64_t u = nbytes < 0 ? 0 - (uint64_t)nbytes : (uint64_t)nbytes;
	const uint32_t *pw = nbytes < 0 ? pow_back : pow_fwd;

	/* x^(8n) = product of x^(8 * 2^j) over the bits j of n. */
	for (unsigned j = 0; u; j++, u >>= 1)
		if (u & 1)
			state = mul(state, pw[j]);
	return state;
}

uint32_t crc32_ieee_shift(uint32_t state, int64_t nbytes)
{
	ensure_init();
	return shift_with(mulmod_auto, state, nbytes);
}

/* x^e mod P, reflected. Only used at init, for small e. */
static uint32_t xpow(unsigned e)
{
	uint32_t v = 0x80000000u;

	while (e--)
		v = mul_x(v, POLY_IEEE);
	return v;
}

/* ---- x86 instructions ---- */

#if CRC_X86
/* One folding step. X (128 bits, loaded little-endian) holds message bits in reflected order:
 * its low quadword H is the earlier (higher-degree) half, X = H*x^64 + L. Advancing X by d
 * bits is X*x^d = H*x^(d+64) + L*x^d, and each term may be replaced by its residue mod P.
 * A carry-less product of two reflected 64-bit operands is the reflected 128-bit value of the
 * product times x, so the constants are x^(d+63) and x^(d-1) mod P, placed in the high half
 * of a 64-bit lane (reflected 32 -> reflected 64). The 96-bit products fit in 128 bits. */
static void fold_consts(uint64_t k[2], unsigned d)
{
	k[0] = (uint64_t)xpow(d + 63) << 32;
	k[1] = (uint64_t)xpow(d - 1) << 32;
}

/* Barrett's constants for reduce128, in lanes as fold_consts places its own: {mu, P}, each
 * times x^31, where mu = x^64 div P. The division runs in the ordinary bit order (bit i holds
 * x^i), then each 33-bit polynomial is reflected into bits 0..32 of its lane (x^i at 32 - i). */
static void barrett_consts(uint64_t bar[2])
{
	const uint64_t p = 0x104C11DB7ull; /* x^32 + POLY_IEEE, ordinary order */
	unsigned __int128 rem = (unsigned __int128)1 << 64;
	uint64_t mu = 0;

	for (int i = 64; i >= 32; i--) {
		if ((rem >> i) & 1) {
			rem ^= (unsigned __int128)p << (i - 32);
			mu |= 1ull << (i - 32);
		}
	}
	bar[0] = bar[1] = 0;
	for (int i = 0; i <= 32; i++) {
		bar[0] |= ((mu >> i) & 1) << (32 - i);
		bar[1] |= ((p >> i) & 1) << (32 - i);
	}
}

#define PCL_TARGET __attribute__((target("pclmul,sse4.1")))

PCL_TARGET static inline __m128i fold(__m128i x, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* A pair of 64-bit constants {low lane, high lane} as one register. */
PCL_TARGET static inline __m128i lanes(const uint64_t k[2])
{
	return _mm_set_epi64x((long long)k[1], (long long)k[0]);
}

PCL_TARGET static inline __m128i load128(const uint8_t *p)
{
	return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* From the 128-bit accumulator X (congruent mod P to everything consumed) to the register,
 * X * x^32 mod P, without tables. In the lane notation of fold() (bit b of a 64-bit lane holds
 * x^(63-b); a carry-less product of two lanes is the 128-bit value of their product times x):
 *  1. X = H*x^64 + L: H*x^64 == H * (x^63 mod P) * x, which has degree < 96 and lands on the
 *     bits of L and the upper half of the low lane: 96 bits, still congruent to X.
 *  2. The same step moves those upper 32 bits of the low lane into the high lane: 64 bits R.
 *  3. R * x^32 = Rh*x^64 + Rl*x^32 == Rh * (x^63 mod P) * x + Rl*x^32: 64 bits Q.
 *  4. Barrett: with mu = x^64 div P, q = (Qh * mu) div x^32 and Q mod P = Ql + (q*P mod x^32)
 *     (Intel, "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ", 2009). mu and P
 *     are 33-bit polynomials, kept times x^31 so that each product's useful part lands on a
 *     lane or dword boundary. */
PCL_TARGET static inline uint32_t reduce128(__m128i x)
{
	const __m128i k = _mm_cvtsi64_si128((long long)k_low);
	const __m128i bar = lanes(k_bar);

	/* 1: H into the rest; the low lane's lower half is left zero. */
	x = _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
			  _mm_unpackhi_epi64(_mm_setzero_si128(), x));
	/* 2: R in the high lane. */
	x = _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), x);
	/* 3: Q in the high lane (Rh moved to the lane's upper half is Rh alone). */
	x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_slli_epi64(x, 32), k, 0x01),
			  _mm_srli_epi64(x, 32));
	/* 4: q in the low lane's upper half; then Ql + q*P mod x^32 in dword 2. */
	__m128i q = _mm_clmulepi64_si128(_mm_slli_epi64(x, 32), bar, 0x01);
	__m128i r = _mm_xor_si128(_mm_clmulepi64_si128(q, bar, 0x10), _mm_srli_epi64(x, 32));
	return (uint32_t)_mm_extract_epi32(r, 2);
}

/* pshufb masks for a byte shift by a variable count t (1..15): loaded at shuf_tab + t, a
 * left shift by 16 - t (byte i moves to i + 16 - t); at shuf_tab + 16 + t, a right shift by t
 * (byte i moves to i - t). 0x80 makes a byte zero. */
static const uint8_t shuf_tab[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,	  1,	2,    3,    4,	  5,	6,    7,    8,	  9,	10,   11,   12,	  13,	14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
};

/* The end of both folding paths: x holds everything consumed so far (the initial register
 * folded in), and at least 16 bytes of the buffer lie before p. Folds in the remaining 16-byte
 * blocks of p, then the last n % 16 bytes; returns the accumulator, not yet reduced. */
PCL_TARGET static __m128i fold_rest(__m128i x, const uint8_t *p, size_t n)
{
	const __m128i k = lanes(k128);

	while (n >= 16) {
		x = _mm_xor_si128(fold(x, k), load128(p));
		p += 16;
		n -= 16;
	}
	if (n) {
		/* X followed by the t = n tail bytes T is X*x^(8t) + T. Split X into its first t
		 * bytes A and the rest B: X*x^(8t) = A*x^128 + B*x^(8t). B*x^(8t) + T is one block:
		 * B moved down by t bytes, T after it, and T is where it sits in the last 16 bytes
		 * of the buffer (already consumed bytes before it, so no read outside). A*x^128 is
		 * one fold. */
		const __m128i right = load128(shuf_tab + 16 + n);
		__m128i a = _mm_shuffle_epi8(x, load128(shuf_tab + n));
		__m128i bt =
		    _mm_blendv_epi8(_mm_shuffle_epi8(x, right), load128(p + n - 16), right);

		x = _mm_xor_si128(fold(a, k), bt);
	}
	return x;
}

/* The accumulator of n >= 16 bytes, with `in` XORed into the first 16 of them: the register
 * (which XORs into the next four message bytes: raw CRC is linear), or the accumulator of a
 * buffer before this one (see carry()). */
PCL_TARGET static __m128i fold_pclmul(__m128i in, const uint8_t *p, size_t n)
{
	__m128i x0 = _mm_xor_si128(load128(p), in);

	/* Short buffers: one accumulator. */
	if (n < 64)
		return fold_rest(x0, p + 16, n - 16);

	const __m128i k4 = lanes(k512);
	const __m128i k1 = lanes(k128);
	__m128i x1 = load128(p + 16);
	__m128i x2 = load128(p + 32);
	__m128i x3 = load128(p + 48);

	p += 64;
	n -= 64;
	/* Four independent accumulators hide the multiplier latency. */
	while (n >= 64) {
		x0 = _mm_xor_si128(fold(x0, k4), load128(p));
		x1 = _mm_xor_si128(fold(x1, k4), load128(p + 16));
		x2 = _mm_xor_si128(fold(x2, k4), load128(p + 32));
		x3 = _mm_xor_si128(fold(x3, k4), load128(p + 48));
		p += 64;
		n -= 64;
	}
	/* Horner: x0*x^384 + x1*x^256 + x2*x^128 + x3. */
	__m128i x = _mm_xor_si128(fold(x0, k1), x1);
	x = _mm_xor_si128(fold(x, k1), x2);
	x = _mm_xor_si128(fold(x, k1), x3);
	return fold_rest(x, p, n);
}

/* The accumulator X of one buffer, made the `in` of the next: X followed by a buffer B of n
 * bytes is X*x^(8n) + B, and X*x^128 placed on B's first 16 bytes is exactly X*x^(8n). */
PCL_TARGET static inline __m128i carry(__m128i x)
{
	return fold(x, lanes(k128));
}

PCL_TARGET static uint32_t ieee_pclmul(uint32_t s, const uint8_t *p, size_t n)
{
	/* Under one block: no safe 16-byte load, so the tables. */
	if (n < 16)
		return slice8(tab_ieee, s, p, n);
	return reduce128(fold_pclmul(_mm_cvtsi32_si128((int)s), p, n));
}

/* Two buffers, one reduction: the second continues from the first's accumulator. */
PCL_TARGET static uint32_t ieee2_pclmul(uint32_t s, const uint8_t *a, size_t na, const uint8_t *b,
					size_t nb)
{
	if (na < 16 || nb < 16)
		return ieee_pclmul(ieee_pclmul(s, a, na), b, nb);
	return reduce128(fold_pclmul(carry(fold_pclmul(_mm_cvtsi32_si128((int)s), a, na)), b, nb));
}

/* The same folding on 256-bit registers: each of the two 128-bit lanes folds as fold() does,
 * with the constants repeated in both lanes. Four accumulators of 32 bytes, 128 bytes a turn.
 * On this project's machines (AMD Zen, no AVX-512) a VPCLMULQDQ on a 256-bit register issues
 * as fast as a PCLMULQDQ on a 128-bit one: twice the bytes per second from 512 bytes on
 * (bench/README.md); eight accumulators measured slower. */
#define VPCL_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.1")))

VPCL_TARGET static inline __m256i fold256(__m256i y, __m256i k)
{
	return _mm256_xor_si256(_mm256_clmulepi64_epi128(y, k, 0x00),
				_mm256_clmulepi64_epi128(y, k, 0x11));
}

VPCL_TARGET static inline __m256i load256(const uint8_t *p)
{
	return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* The accumulator of n >= 128 bytes, `in` XORed into the first 16 (as fold_pclmul). */
VPCL_TARGET static __m128i fold_vpclmul(__m128i in, const uint8_t *p, size_t n)
{
	const __m256i k4 = _mm256_set_epi64x((long long)k1024[1], (long long)k1024[0],
					     (long long)k1024[1], (long long)k1024[0]);
	const __m256i k1 = _mm256_set_epi64x((long long)k256[1], (long long)k256[0],
					     (long long)k256[1], (long long)k256[0]);
	__m256i y0 = load256(p), y1 = load256(p + 32), y2 = load256(p + 64), y3 = load256(p + 96);

	y0 = _mm256_xor_si256(y0, _mm256_zextsi128_si256(in));
	p += 128;
	n -= 128;
	while (n >= 128) {
		y0 = _mm256_xor_si256(fold256(y0, k4), load256(p));
		y1 = _mm256_xor_si256(fold256(y1, k4), load256(p + 32));
		y2 = _mm256_xor_si256(fold256(y2, k4), load256(p + 64));
		y3 = _mm256_xor_si256(fold256(y3, k4), load256(p + 96));
		p += 128;
		n -= 128;
	}
	/* Horner over the accumulators (each lane moves 256 bits, onto the same lane of the
	 * next register), then over the remaining 32-byte blocks. */
	__m256i y = _mm256_xor_si256(fold256(y0, k1), y1);
	y = _mm256_xor_si256(fold256(y, k1), y2);
	y = _mm256_xor_si256(fold256(y, k1), y3);
	while (n >= 32) {
		y = _mm256_xor_si256(fold256(y, k1), load256(p));
		p += 32;
		n -= 32;
	}
	/* The low lane is the earlier 16 bytes. */
	const __m128i k = lanes(k128);
	__m128i x =
	    _mm_xor_si128(fold(_mm256_castsi256_si128(y), k), _mm256_extracti128_si256(y, 1));
	/* Done with the upper halves: clear them before legacy SSE code runs again (GCC 12 left
	 * this out before a tail call into the 128-bit code). */
	_mm256_zeroupper();
	return fold_rest(x, p, n);
}

VPCL_TARGET static uint32_t ieee_vpclmul(uint32_t s, const uint8_t *p, size_t n)
{
	/* Below four registers' worth, the 128-bit path. */
	if (n < 128)
		return ieee_pclmul(s, p, n);
	return reduce128(fold_vpclmul(_mm_cvtsi32_si128((int)s), p, n));
}

/* The first buffer is a header (tens of bytes): 128-bit folding; the second as its size says. */
VPCL_TARGET static uint32_t ieee2_vpclmul(uint32_t s, const uint8_t *a, size_t na, const uint8_t *b,
					  size_t nb)
{
	if (na < 16 || nb < 128)
		return ieee2_pclmul(s, a, na, b, nb);
	return reduce128(fold_vpclmul(carry(fold_pclmul(_mm_cvtsi32_si128((int)s), a, na)), b, nb));
}

PCL_TARGET static uint32_t mulmod_pclmul(uint32_t a, uint32_t b)
{
	__m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);

	return reduce_product((uint64_t)_mm_cvtsi128_si64(p));
}

static inline uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

__attribute__((target("sse4.2"))) static uint32_t c_sse42(uint32_t s, const uint8_t *p, size_t n)
{
	uint64_t s64 = s;

	while (n >= 8) {
		s64 = _mm_crc32_u64(s64, le64(p));
		p += 8;
		n -= 8;
	}
	s = (uint32_t)s64;
	while (n--)
		s = _mm_crc32_u8(s, *p++);
	return s;
}

/* a*b mod the Castagnoli polynomial (reflected operands, as mulmod_pclmul): the shifted
 * product's low word stands for lo*x^32, which is what feeding lo as four bytes into a zero
 * register computes, and the crc32 instruction does exactly that. */
__attribute__((target("pclmul,sse4.2"))) static inline uint32_t mulmod_c_pclmul(uint32_t a,
										uint32_t b)
{
	__m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)a), _mm_cvtsi32_si128((int)b), 0);
	uint64_t v = (uint64_t)_mm_cvtsi128_si64(p) << 1;

	return (uint32_t)(v >> 32) ^ _mm_crc32_u32(0, (uint32_t)v);
}

/* The crc32 instruction has a latency of three cycles and can start one every cycle: one
 * register chain uses a third of it. Cut the buffer into three streams A, B, C of L bytes, run
 * them side by side (B and C from a zero register), and join them by linearity:
 *     raw(s, A B C) = raw(s, A) * x^(16L) + raw(0, B) * x^(8L) + raw(0, C)   (mod P).
 * L is a multiple of C3_GRAIN, as large as the buffer allows up to C3_GRAIN * C3_KMAX, so the
 * join (two carry-less products) is paid once per up to 6 KiB and leaves < 3 grains over. */
__attribute__((target("pclmul,sse4.2"))) static uint32_t c_sse42_3way(uint32_t s, const uint8_t *p,
								      size_t n)
{
	while (n >= 3 * 2 * C3_GRAIN) {
		size_t k = n / (3 * C3_GRAIN);

		if (k > C3_KMAX)
			k = C3_KMAX;

		size_t len = k * C3_GRAIN;
		uint64_t a = s, b = 0, c = 0;

		for (const uint8_t *end = p + len; p < end; p += 8) {
			a = _mm_crc32_u64(a, le64(p));
			b = _mm_crc32_u64(b, le64(p + len));
			c = _mm_crc32_u64(c, le64(p + 2 * len));
		}
		s = mulmod_c_pclmul((uint32_t)a, c3_shift2[k]) ^
		    mulmod_c_pclmul((uint32_t)b, c3_shift1[k]) ^ (uint32_t)c;
		p += 2 * len;
		n -= 3 * len;
	}
	return c_sse42(s, p, n);
}

/* Whether the OS saves and restores the 256-bit registers (XCR0 bits 1 and 2: SSE and AVX
 * state): a CPU that has AVX2 is no use without that. */
static bool os_saves_ymm(void)
{
	unsigned eax, ebx, ecx, edx;
	uint32_t xcr0_lo, xcr0_hi;

	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE))
		return false;
	__asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	(void)xcr0_hi;
	return (xcr0_lo & 6) == 6;
}
#endif

/* ---- dispatch ---- */

static uint32_t ieee_first(uint32_t s, const uint8_t *p, size_t n);
static uint32_t ieee2_first(uint32_t s, const uint8_t *a, size_t na, const uint8_t *b, size_t nb);
static uint32_t c_first(uint32_t s, const uint8_t *p, size_t n);
/* Start at a resolver that initialises and then calls the chosen implementation; init()
 * replaces these with release stores after the tables are built. */
static _Atomic(raw_fn) ieee_fn = ieee_first;
static _Atomic(raw2_fn) ieee2_fn = ieee2_first;
static _Atomic(raw_fn) c_fn = c_first;

static void build_table(uint32_t t[8][256], uint32_t poly)
{
	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (poly & (0u - (c & 1)));
		t[0][i] = c;
	}
	for (unsigned k = 1; k < 8; k++)
		for (unsigned i = 0; i < 256; i++)
			t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
}

static void init(void)
{
	raw_fn fi = ieee_slice8, fc = c_slice8;
	raw2_fn fi2 = ieee2_slice8;

	build_table(tab_ieee, POLY_IEEE);
	build_table(tab_c, POLY_C);

	uint32_t back = 0x80000000u;
	for (int i = 0; i < 8; i++)
		back = div_x(back);
	pow_fwd[0] = xpow(8);
	pow_back[0] = back;
	for (int j = 1; j < 64; j++) {
		pow_fwd[j] = mulmod_bitwise(pow_fwd[j - 1], pow_fwd[j - 1]);
		pow_back[j] = mulmod_bitwise(pow_back[j - 1], pow_back[j - 1]);
	}

#if CRC_X86
	fold_consts(k128, 128);
	fold_consts(k256, 256);
	fold_consts(k512, 512);
	fold_consts(k1024, 1024);
	k_low = (uint64_t)xpow(63) << 32;
	barrett_consts(k_bar);
	/* x^(8 * C3_GRAIN), its powers, and their squares, mod the Castagnoli polynomial. */
	uint32_t grain = 0x80000000u;
	for (int i = 0; i < 8 * C3_GRAIN; i++)
		grain = mul_x(grain, POLY_C);
	c3_shift1[0] = 0x80000000u;
	for (int k = 1; k <= C3_KMAX; k++)
		c3_shift1[k] = mulmod_poly(c3_shift1[k - 1], grain, POLY_C);
	for (int k = 0; k <= C3_KMAX; k++)
		c3_shift2[k] = mulmod_poly(c3_shift1[k], c3_shift1[k], POLY_C);

	/* Valgrind (3.19) runs neither AVX-512 nor VPCLMULQDQ and hides them from CPUID, so
	 * under it this picks the 128-bit path. */
	__builtin_cpu_init();
	cpu_pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
	cpu_sse42 = __builtin_cpu_supports("sse4.2");
	cpu_vpclmul = cpu_pclmul && __builtin_cpu_supports("avx2") &&
		      __builtin_cpu_supports("vpclmulqdq") && os_saves_ymm();
	if (cpu_pclmul) {
		fi = ieee_pclmul;
		fi2 = ieee2_pclmul;
		mulmod_auto = mulmod_pclmul;
	}
	if (cpu_vpclmul) {
		fi = ieee_vpclmul;
		fi2 = ieee2_vpclmul;
	}
	if (cpu_sse42)
		fc = c_sse42;
	if (cpu_sse42 && cpu_pclmul)
		fc = c_sse42_3way;
#endif
	atomic_store_explicit(&ieee_fn, fi, memory_order_release);
	atomic_store_explicit(&ieee2_fn, fi2, memory_order_release);
	atomic_store_explicit(&c_fn, fc, memory_order_release);
	atomic_store_explicit(&init_done, true, memory_order_release);
}

static uint32_t ieee_first(uint32_t s, const uint8_t *p, size_t n)
{
	pthread_once(&init_once, init);
	return atomic_load_explicit(&ieee_fn, memory_order_acquire)(s, p, n);
}

static uint32_t ieee2_first(uint32_t s, const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	pthread_once(&init_once, init);
	return atomic_load_explicit(&ieee2_fn, memory_order_acquire)(s, a, na, b, nb);
}

static uint32_t c_first(uint32_t s, const uint8_t *p, size_t n)
{
	pthread_once(&init_once, init);
	return atomic_load_explicit(&c_fn, memory_order_acquire)(s, p, n);
}

uint32_t crc32_ieee_raw(uint32_t state, const void *buf, size_t len)
{
	return atomic_load_explicit(&ieee_fn, memory_order_acquire)(state, buf, len);
}

uint32_t crc32_ieee_raw2(uint32_t state, const void *a, size_t na, const void *b, size_t nb)
{
	return atomic_load_explicit(&ieee2_fn, memory_order_acquire)(state, a, na, b, nb);
}

uint32_t crc32_ieee(uint32_t crc, const void *buf, size_t len)
{
	return ~crc32_ieee_raw(~crc, buf, len);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	return ~atomic_load_explicit(&c_fn, memory_order_acquire)(~crc, buf, len);
}

/* ---- implementation selection (tests, benchmarks) ---- */

static raw_fn pick(bool ieee, enum crc_impl impl)
{
	ensure_init();
	switch (impl) {
	case CRC_IMPL_AUTO:
		return atomic_load_explicit(ieee ? &ieee_fn : &c_fn, memory_order_acquire);
	case CRC_IMPL_BYTEWISE:
		return ieee ? ieee_bytewise : c_bytewise;
	case CRC_IMPL_SLICE8:
		return ieee ? ieee_slice8 : c_slice8;
	case CRC_IMPL_HW:
#if CRC_X86
		if (ieee && cpu_pclmul)
			return ieee_pclmul;
		if (!ieee && cpu_sse42)
			return c_sse42;
#endif
		return NULL;
	case CRC_IMPL_WIDE:
#if CRC_X86
		if (ieee && cpu_vpclmul)
			return ieee_vpclmul;
		if (!ieee && cpu_sse42 && cpu_pclmul)
			return c_sse42_3way;
#endif
		return NULL;
	default:
		return NULL;
	}
}

int crc32_ieee_with(enum crc_impl impl, uint32_t crc, const void *buf, size_t len, uint32_t *out)
{
	raw_fn f = pick(true, impl);

	if (!f)
		return -ENOTSUP;
	*out = ~f(~crc, buf, len);
	return 0;
}

int crc32_ieee2_with(enum crc_impl impl, uint32_t crc, const void *a, size_t na, const void *b,
		     size_t nb, uint32_t *out)
{
	raw2_fn f = NULL;

	ensure_init();
	switch (impl) {
	case CRC_IMPL_AUTO:
		f = atomic_load_explicit(&ieee2_fn, memory_order_acquire);
		break;
	case CRC_IMPL_BYTEWISE:
		f = ieee2_bytewise;
		break;
	case CRC_IMPL_SLICE8:
		f = ieee2_slice8;
		break;
	case CRC_IMPL_HW:
#if CRC_X86
		if (cpu_pclmul)
			f = ieee2_pclmul;
#endif
		break;
	case CRC_IMPL_WIDE:
#if CRC_X86
		if (cpu_vpclmul)
			f = ieee2_vpclmul;
#endif
		break;
	default:
		break;
	}
	if (!f)
		return -ENOTSUP;
	*out = ~f(~crc, a, na, b, nb);
	return 0;
}

int crc32c_with(enum crc_impl impl, uint32_t crc, const void *buf, size_t len, uint32_t *out)
{
	raw_fn f = pick(false, impl);

	if (!f)
		return -ENOTSUP;
	*out = ~f(~crc, buf, len);
	return 0;
}

int crc32_ieee_shift_with(enum crc_impl impl, uint32_t state, int64_t nbytes, uint32_t *out)
{
	mulmod_fn mul = NULL;

	ensure_init();
	switch (impl) {
	case CRC_IMPL_AUTO:
		mul = mulmod_auto;
		break;
	case CRC_IMPL_BYTEWISE:
		mul = mulmod_bitwise;
		break;
	case CRC_IMPL_SLICE8:
		mul = mulmod_table;
		break;
	case CRC_IMPL_HW:
#if CRC_X86
		if (cpu_pclmul)
			mul = mulmod_pclmul;
#endif
		break;
	default:
		break;
	}
	if (!mul)
		return -ENOTSUP;
	*out = shift_with(mul, state, nbytes);
	return 0;
}

const char *crc_impl_name(enum crc_impl impl)
{
	/* clang-format off */
	static const char *const names[CRC_IMPL__COUNT] = {
	    [CRC_IMPL_AUTO] = "auto",
	    [CRC_IMPL_BYTEWISE] = "bytewise",
	    [CRC_IMPL_SLICE8] = "slice8",
	    [CRC_IMPL_HW] = "hw",
	    [CRC_IMPL_WIDE] = "wide",
	};
	/* clang-format on */

	if ((unsigned)impl >= CRC_IMPL__COUNT)
		return "?";
	return names[impl];
}
