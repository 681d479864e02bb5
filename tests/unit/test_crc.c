/* CRC-32 / CRC-32C: published check values, equality of every implementation (bytewise,
 * slicing-by-8, CPU instructions on one chain and wide) on random buffers of every length
 * 0..300 at every alignment 0..15, every length to 2100, the sizes around each path's block
 * boundaries up to 64 KiB at odd alignments, always from a random starting CRC; incremental
 * use through every implementation, cut anywhere in short buffers; two buffers fed as one
 * (crc32_ieee_raw2); no read outside the buffer (guard pages on both sides); thread-safe first
 * use; and the GF(2) algebra (crc32_ieee_shift, crc32_ieee_mulmod) the ICRC solver relies on. */
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/crc.h"

static uint64_t rng;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the printed seed. */
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* ---- first use from several threads at once (must run before any other CRC call) ---- */

#define NTHREADS 4
static uint8_t tbuf[4096];

static void *thread_crc(void *arg)
{
	uint32_t *out = arg;

	out[0] = crc32_ieee(0, tbuf, sizeof(tbuf));
	out[1] = crc32c(0, tbuf, sizeof(tbuf));
	return NULL;
}

static void test_concurrent_first_use(void)
{
	pthread_t th[NTHREADS];
	uint32_t res[NTHREADS][2];

	fill(tbuf, sizeof(tbuf));
	for (int i = 0; i < NTHREADS; i++)
		REQUIRE(pthread_create(&th[i], NULL, thread_crc, res[i]) == 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 1; i < NTHREADS; i++) {
		CHECK_EQ(res[i][0], res[0][0]);
		CHECK_EQ(res[i][1], res[0][1]);
	}
	uint32_t ref;
	CHECK_EQ(crc32_ieee_with(CRC_IMPL_BYTEWISE, 0, tbuf, sizeof(tbuf), &ref), 0);
	CHECK_EQ(res[0][0], ref);
	CHECK_EQ(crc32c_with(CRC_IMPL_BYTEWISE, 0, tbuf, sizeof(tbuf), &ref), 0);
	CHECK_EQ(res[0][1], ref);
}

/* ---- published check values ---- */

static void test_known_values(void)
{
	static const char fox[] = "The quick brown fox jumps over the lazy dog";
	uint8_t b[32];

	CHECK_EQ(crc32_ieee(0, "123456789", 9), 0xCBF43926u);
	CHECK_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
	CHECK_EQ(crc32_ieee(0, "", 0), 0);
	CHECK_EQ(crc32c(0, "", 0), 0);
	CHECK_EQ(crc32_ieee(0, fox, sizeof(fox) - 1), 0x414FA339u);
	/* Raw register: crc32_ieee = ~raw(~crc). */
	CHECK_EQ(crc32_ieee_raw(0xFFFFFFFFu, "123456789", 9), ~0xCBF43926u);
	/* The ICRC's starting state after 8 bytes 0xFF (spec 6.1). */
	memset(b, 0xFF, 8);
	CHECK_EQ(crc32_ieee_raw(0xFFFFFFFFu, b, 8), 0xDEBB20E3u);

	/* RFC 3720 B.4 (iSCSI CRC32C examples). */
	memset(b, 0, 32);
	CHECK_EQ(crc32c(0, b, 32), 0x8A9136AAu);
	memset(b, 0xFF, 32);
	CHECK_EQ(crc32c(0, b, 32), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	CHECK_EQ(crc32c(0, b, 32), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	CHECK_EQ(crc32c(0, b, 32), 0x113FDB5Cu);

	/* Every implementation on the check string. */
	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
		uint32_t v;

		if (crc32_ieee_with(impl, 0, "123456789", 9, &v) == 0)
			CHECK_EQ(v, 0xCBF43926u);
		if (crc32c_with(impl, 0, "123456789", 9, &v) == 0)
			CHECK_EQ(v, 0xE3069283u);
	}
}

/* ---- all paths agree ---- */

/* Compares every available implementation with the bytewise reference for one buffer and a
 * random starting CRC. */
static void compare_impls(const uint8_t *p, size_t n, int *mismatches)
{
	uint32_t init = (uint32_t)rnd();
	uint32_t ref_i, ref_c;

	crc32_ieee_with(CRC_IMPL_BYTEWISE, init, p, n, &ref_i);
	crc32c_with(CRC_IMPL_BYTEWISE, init, p, n, &ref_c);
	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
		uint32_t v;

		if (crc32_ieee_with(impl, init, p, n, &v) == 0 && v != ref_i)
			(*mismatches)++;
		if (crc32c_with(impl, init, p, n, &v) == 0 && v != ref_c)
			(*mismatches)++;
	}
	if (crc32_ieee(init, p, n) != ref_i || crc32c(init, p, n) != ref_c)
		(*mismatches)++;
}

static void test_paths_agree(void)
{
	static uint8_t buf[16 + 65536 + 64];
	/* Block boundaries: PCLMULQDQ folds 64 bytes a turn, VPCLMULQDQ 128, the three CRC-32C
	 * streams take 3 * 16 * k bytes a pass up to 6 KiB; RoCE packets carry up to 4 KiB
	 * after 12 to 40 bytes of headers. */
	static const size_t sizes[] = {1024,  1025,  4095,  4096,  4097,      4099,
				       4108,  4111,  4124,  4136,  6143,      6144,
				       6145,  6191,  6192,  6239,  12287,     12288,
				       12289, 16384, 65535, 65536, 65536 + 7, 65536 + 64};
	int mismatches = 0, cases = 0;

	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
		uint32_t v;

		fprintf(stderr, "crc impl %-8s crc32_ieee %s, crc32c %s\n", crc_impl_name(impl),
			crc32_ieee_with(impl, 0, "", 0, &v) == 0 ? "available" : "not available",
			crc32c_with(impl, 0, "", 0, &v) == 0 ? "available" : "not available");
	}
	/* Every length 0..300 at every alignment 0..15. */
	for (size_t len = 0; len <= 300; len++) {
		for (size_t al = 0; al < 16; al++) {
			fill(buf + al, len);
			compare_impls(buf + al, len, &mismatches);
			cases++;
		}
	}
	/* Every length on to 2100, each at a random alignment: the loops and all their tails. */
	for (size_t len = 301; len <= 2100; len++) {
		size_t al = (size_t)(rnd() % 16);

		fill(buf + al, len);
		compare_impls(buf + al, len, &mismatches);
		cases++;
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		static const size_t aligns[] = {0, 1, 3, 8, 13};

		for (size_t j = 0; j < sizeof(aligns) / sizeof(aligns[0]); j++) {
			fill(buf + aligns[j], sizes[i]);
			compare_impls(buf + aligns[j], sizes[i], &mismatches);
			cases++;
		}
	}
	/* Random long buffers. */
	for (int i = 0; i < 100; i++) {
		size_t len = (size_t)(rnd() % 20000), al = (size_t)(rnd() % 16);

		fill(buf + al, len);
		compare_impls(buf + al, len, &mismatches);
		cases++;
	}
	fprintf(stderr, "impl comparison: %d buffers, %d mismatches\n", cases, mismatches);
	CHECK_EQ(mismatches, 0);
}

/* ---- incremental use: any split gives the same CRC ---- */

static void test_incremental(void)
{
	uint8_t buf[200];
	int bad = 0;

	fill(buf, sizeof(buf));
	uint32_t whole_i = crc32_ieee(0, buf, sizeof(buf));
	uint32_t whole_c = crc32c(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut++) {
		if (crc32_ieee(crc32_ieee(0, buf, cut), buf + cut, sizeof(buf) - cut) != whole_i)
			bad++;
		if (crc32c(crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut) != whole_c)
			bad++;
	}
	CHECK_EQ(bad, 0);
}

/* Through every implementation, as the ICRC uses the raw form: a running register fed the
 * pseudo-header, then the packet after its BTH. Any cut, from any state, gives the register of
 * the whole buffer. */
static void test_incremental_impls(void)
{
	static uint8_t buf[5000];
	static const size_t cuts[] = {0, 1, 12, 15, 40, 63, 64, 127, 128, 129, 200, 1000, 4096};
	int bad = 0;

	int (*const with[2])(enum crc_impl, uint32_t, const void *, size_t,
			     uint32_t *) = {crc32_ieee_with, crc32c_with};

	fill(buf, sizeof(buf));
	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
		for (int f = 0; f < 2; f++) {
			uint32_t init = (uint32_t)rnd(), whole, v;

			if (with[f](impl, init, buf, sizeof(buf), &whole) != 0)
				continue; /* not on this CPU */
			for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
				size_t cut = cuts[i];

				with[f](impl, init, buf, cut, &v);
				with[f](impl, v, buf + cut, sizeof(buf) - cut, &v);
				if (v != whole)
					bad++;
			}
		}
	}
	CHECK_EQ(bad, 0);
	/* The raw register: feeding a buffer in two calls = feeding it in one. */
	uint32_t s = crc32_ieee_raw(0xFFFFFFFFu, buf, 40);
	CHECK_EQ(crc32_ieee_raw(s, buf + 40, 4096), crc32_ieee_raw(0xFFFFFFFFu, buf, 4136));
}

/* Short buffers cut at every point, through every implementation: the short paths (one
 * 16-byte block, the tail folded in by a shifted load of the buffer's last 16 bytes) and the
 * final reduction, entered from every register state the first part leaves. */
static void test_short_splits(void)
{
	uint8_t buf[160];
	int bad = 0, cases = 0;

	for (size_t len = 0; len <= sizeof(buf); len++) {
		fill(buf, len);
		for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
			uint32_t init = (uint32_t)rnd(), whole, ref, v;

			if (crc32_ieee_with(impl, init, buf, len, &whole) != 0)
				continue;
			crc32_ieee_with(CRC_IMPL_BYTEWISE, init, buf, len, &ref);
			if (whole != ref)
				bad++;
			for (size_t cut = 0; cut <= len; cut++) {
				crc32_ieee_with(impl, init, buf, cut, &v);
				crc32_ieee_with(impl, v, buf + cut, len - cut, &v);
				if (v != ref)
					bad++;
				cases++;
			}
		}
	}
	fprintf(stderr, "short splits: %d cases, %d mismatches\n", cases, bad);
	CHECK_EQ(bad, 0);
}

/* Two buffers as one (crc32_ieee_raw2, the ICRC's pseudo-header then packet): every first
 * length to 80 against second lengths across each path's boundaries, at odd alignments,
 * through every implementation, against the bytewise CRC of the two copied into one. */
static void test_two_buffers(void)
{
	static uint8_t a[96], b[16 + 70000], whole[96 + 70000];
	static const size_t nbs[] = {0,	  1,   4,   15,	 16,   17,   31,   32,	  33,	    63,
				     64,  65,  100, 127, 128,  129,  143,  159,	  160,	    200,
				     255, 256, 257, 300, 4096, 4099, 4108, 65535, 65536 + 7};
	int bad = 0, cases = 0;

	for (size_t na = 0; na <= 80; na++) {
		for (size_t i = 0; i < sizeof(nbs) / sizeof(nbs[0]); i++) {
			size_t nb = nbs[i], al = (size_t)(rnd() % 16);
			uint32_t init = (uint32_t)rnd(), ref, v;

			if (nb > 300 && na % 8 != 3)
				continue; /* the long ones at a few first lengths */
			fill(a, na);
			fill(b + al, nb);
			memcpy(whole, a, na);
			memcpy(whole + na, b + al, nb);
			crc32_ieee_with(CRC_IMPL_BYTEWISE, init, whole, na + nb, &ref);
			for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
				if (crc32_ieee2_with(impl, init, a, na, b + al, nb, &v) == 0 &&
				    v != ref)
					bad++;
			}
			if (crc32_ieee_raw2(~init, a, na, b + al, nb) != ~ref)
				bad++;
			cases++;
		}
	}
	fprintf(stderr, "two buffers: %d cases, %d mismatches\n", cases, bad);
	CHECK_EQ(bad, 0);
	uint32_t v = 3;
	CHECK_EQ(crc32_ieee2_with(CRC_IMPL__COUNT, 0, a, 1, b, 1, &v), -ENOTSUP);
	CHECK_EQ(v, 3);
}

/* Every implementation reads only the buffer it is given: buffers of every length to 300
 * placed flush against an inaccessible page on either side (a stray read faults). */
static void test_no_overread(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t page = pg > 0 ? (size_t)pg : 4096;
	uint8_t *map =
	    mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int bad = 0;

	REQUIRE(map != MAP_FAILED);
	REQUIRE(mprotect(map, page, PROT_NONE) == 0);
	REQUIRE(mprotect(map + 2 * page, page, PROT_NONE) == 0);
	uint8_t *mid = map + page;
	fill(mid, page);
	for (size_t len = 0; len <= 300; len++) {
		const uint8_t *at[2] = {mid, mid + page - len}; /* flush left, flush right */

		for (int side = 0; side < 2; side++) {
			uint32_t ref_i, ref_c, v;

			crc32_ieee_with(CRC_IMPL_BYTEWISE, 0, at[side], len, &ref_i);
			crc32c_with(CRC_IMPL_BYTEWISE, 0, at[side], len, &ref_c);
			for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
				if (crc32_ieee_with(impl, 0, at[side], len, &v) == 0 && v != ref_i)
					bad++;

				if (crc32c_with(impl, 0, at[side], len, &v) == 0 && v != ref_c)
					bad++;
			}
		}
	}
	/* Two buffers (crc32_ieee_raw2): the first flush left, the second flush right. */
	for (size_t len = 0; len <= 300; len++) {
		static uint8_t cat[600];
		uint32_t ref, v;

		memcpy(cat, mid, len);
		memcpy(cat + len, mid + page - len, len);
		crc32_ieee_with(CRC_IMPL_BYTEWISE, 0, cat, 2 * len, &ref);
		for (int impl = 0; impl < CRC_IMPL__COUNT; impl++)
			if (crc32_ieee2_with(impl, 0, mid, len, mid + page - len, len, &v) == 0 &&
			    v != ref)
				bad++;
	}
	CHECK_EQ(bad, 0);
	munmap(map, 3 * page);
}

/* ---- algebra ---- */

/* Independent reference for the product (reflected: bit 31 = x^0): schoolbook, reducing
 * after every shift. */
static uint32_t ref_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	for (int d = 0; d < 32; d++) {
		if (a & (0x80000000u >> d))
			prod ^= b;
		b = (b & 1) ? (b >> 1) ^ 0xEDB88320u : b >> 1;
	}
	return prod;
}

static void test_algebra(void)
{
	static uint8_t zeros[5000];
	int bad = 0;

	/* The product against the reference; x^0 (bit 31) is the identity; it commutes and
	 * distributes over XOR. */
	for (int i = 0; i < 3000; i++) {
		uint32_t a = (uint32_t)rnd(), b = (uint32_t)rnd(), c = (uint32_t)rnd();

		if (i < 64) /* sparse operands: single powers of x */
			a = 0x80000000u >> (i & 31), b = i < 32 ? b : 1u << (i & 31);
		if (crc32_ieee_mulmod(a, b) != ref_mulmod(a, b))
			bad++;
		if (crc32_ieee_mulmod(a, 0x80000000u) != a)
			bad++;
		if (crc32_ieee_mulmod(a, b) != crc32_ieee_mulmod(b, a))
			bad++;
		if (crc32_ieee_mulmod(a, b ^ c) !=
		    (crc32_ieee_mulmod(a, b) ^ crc32_ieee_mulmod(a, c)))
			bad++;
	}
	CHECK_EQ(bad, 0);

	/* Every product implementation, through crc32_ieee_shift_with. */
	bad = 0;
	int impls = 0;
	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
		uint32_t v;

		if (crc32_ieee_shift_with(impl, 1, 1, &v) != 0)
			continue;
		impls++;
		for (int i = 0; i < 500; i++) {
			uint32_t s0 = (uint32_t)rnd();
			int64_t n = (int64_t)(rnd() % sizeof(zeros));

			if (crc32_ieee_shift_with(impl, s0, n, &v) != 0 ||
			    v != crc32_ieee_raw(s0, zeros, (size_t)n))
				bad++;
			if (crc32_ieee_shift_with(impl, v, -n, &v) != 0 || v != s0)
				bad++;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK(impls >= 3);
	uint32_t v = 7;
	CHECK_EQ(crc32_ieee_shift_with(CRC_IMPL__COUNT, 1, 1, &v), -ENOTSUP);
	CHECK_EQ(v, 7);

	/* Shifting by n bytes = feeding n zero bytes; a negative shift undoes it. */
	for (int64_t n = 0; n <= 300; n++) {
		uint32_t s = (uint32_t)rnd();

		if (crc32_ieee_shift(s, n) != crc32_ieee_raw(s, zeros, (size_t)n))
			bad++;
		if (crc32_ieee_shift(crc32_ieee_shift(s, n), -n) != s)
			bad++;
		if (crc32_ieee_shift(crc32_ieee_shift(s, -n), n) != s)
			bad++;
	}
	for (int i = 0; i < 50; i++) {
		uint32_t s = (uint32_t)rnd();
		int64_t n = (int64_t)(rnd() % sizeof(zeros));

		if (crc32_ieee_shift(s, n) != crc32_ieee_raw(s, zeros, (size_t)n))
			bad++;
	}
	/* Large and extreme shifts compose: x^(a) x^(b) = x^(a+b). */
	for (int i = 0; i < 50; i++) {
		uint32_t s = (uint32_t)rnd();
		int64_t a = (int64_t)(rnd() >> 2), b = -(int64_t)(rnd() >> 3);

		if (crc32_ieee_shift(crc32_ieee_shift(s, a), b) != crc32_ieee_shift(s, a + b))
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(crc32_ieee_shift(0, -12345), 0);
	CHECK_EQ(crc32_ieee_shift(0x1234u, 0), 0x1234u);
	(void)crc32_ieee_shift(0x1234u, INT64_MIN); /* must not overflow (UBSan) */
}

static void test_impl_api(void)
{
	uint32_t v = 0x5A5A5A5A;

	CHECK_EQ(crc32_ieee_with(CRC_IMPL__COUNT, 0, "a", 1, &v), -ENOTSUP);
	CHECK_EQ(crc32c_with((enum crc_impl) - 1, 0, "a", 1, &v), -ENOTSUP);
	CHECK_EQ(v, 0x5A5A5A5A);
	CHECK(strcmp(crc_impl_name(CRC_IMPL_AUTO), "auto") == 0);
	CHECK(strcmp(crc_impl_name(CRC_IMPL_HW), "hw") == 0);
	CHECK(strcmp(crc_impl_name(CRC_IMPL_WIDE), "wide") == 0);
	CHECK(strcmp(crc_impl_name(CRC_IMPL__COUNT), "?") == 0);
}

int main(void)
{
	rng = check_seed(0x5EEDC0FFEEull) | 1;
	test_concurrent_first_use();
	test_known_values();
	test_paths_agree();
	test_incremental();
	test_incremental_impls();
	test_short_splits();
	test_two_buffers();
	test_no_overread();
	test_algebra();
	test_impl_api();
	return check_exit();
}
