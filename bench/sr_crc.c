/* sr_crc: throughput of every CRC implementation in src/util/crc.c (crc32_ieee_with,
 * crc32c_with), on one core, in one run, so that old and new paths are compared under the
 * same load (absolute figures drift here; the ratios hold).
 *
 *   sr_crc [-r rounds] [-m ms_per_round] [size ...]  (default sizes 64 128 256 1024 4096 65536)
 *
 * For each CRC, size and available implementation: `rounds` (default 7) timed loops of about
 * `ms` (default 20) milliseconds over one warm buffer starting one byte past an aligned address
 * (RoCE payloads start 12 bytes into the packet), each call continuing the previous call's
 * CRC; the best round is kept. Prints one line each:
 *   "crc crc32_ieee size=4096 impl=hw gbps=12.70 ns_per_call=322.5 vs_hw=1.00"
 * gbps is GB/s of input (10^9 bytes per second); vs_hw is the ratio to impl=hw in this run. */
#define _GNU_SOURCE
#include <stdint.h>

#include "lib/bench.h"
#include "util/crc.h"

typedef int (*with_fn)(enum crc_impl impl, uint32_t crc, const void *buf, size_t len,
		       uint32_t *out);

/* Seconds per call, best of `rounds`; < 0 if the implementation is not available. */
static double time_impl(with_fn f, enum crc_impl impl, const uint8_t *buf, size_t len, int rounds,
			double round_s)
{
	uint32_t crc = 0;
	double best = -1;

	if (f(impl, 0, buf, len, &crc) != 0)
		return -1;
	/* Calibrate: calls per round. */
	size_t calls = 1;
	for (;;) {
		double t0 = now_s();
		for (size_t i = 0; i < calls; i++)
			f(impl, crc, buf, len, &crc);
		if (now_s() - t0 >= round_s / 8 || calls >= ((size_t)1 << 30))
			break;
		calls *= 2;
	}
	calls *= 8;
	for (int r = 0; r < rounds; r++) {
		double t0 = now_s();
		for (size_t i = 0; i < calls; i++)
			f(impl, crc, buf, len, &crc);
		double t = (now_s() - t0) / (double)calls;
		if (best < 0 || t < best)
			best = t;
	}
	/* Keep the result alive. */
	if (crc == 0x12345678u)
		fprintf(stderr, "(crc %08x)\n", crc);
	return best;
}

static void run(const char *name, with_fn f, const uint8_t *buf, size_t len, int rounds,
		double round_s)
{
	double t[CRC_IMPL__COUNT];

	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++)
		t[impl] = time_impl(f, impl, buf, len, rounds, round_s);
	for (int impl = 0; impl < CRC_IMPL__COUNT; impl++) {
		if (t[impl] < 0) {
			printf("crc %s size=%zu impl=%s unavailable\n", name, len,
			       crc_impl_name(impl));
			continue;
		}
		printf("crc %s size=%zu impl=%s gbps=%.2f ns_per_call=%.1f", name, len,
		       crc_impl_name(impl), (double)len / t[impl] / 1e9, t[impl] * 1e9);
		if (t[CRC_IMPL_HW] > 0)
			printf(" vs_hw=%.2f", t[CRC_IMPL_HW] / t[impl]);
		printf("\n");
	}
}

/* A size argument: 1 to 2^30 bytes, or the program ends with a message. */
static size_t parse_size(const char *arg)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, 0);
	if (errno || end == arg || *end || v < 1 || v > (1ull << 30)) {
		fprintf(stderr, "sr_crc: size '%s' is not a byte count from 1 to 2^30\n", arg);
		exit(2);
	}
	return (size_t)v;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sr_crc [-r rounds] [-m ms_per_round] [size ...]\n"
		"  times every CRC-32 and CRC-32C implementation of src/util/crc.c on one core\n"
		"  -r  timed rounds per case, the best kept (default 7)\n"
		"  -m  milliseconds per round (default 20)\n"
		"  size  buffer sizes in bytes, 1 to 2^30 (default 64 128 256 1024 4096 65536)\n");
}

int main(int argc, char **argv)
{
	static const size_t def_sizes[] = {64, 128, 256, 1024, 4096, 65536};
	int rounds = 7, opt;
	double round_ms = 20;

	if (argc > 1 && !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	while ((opt = getopt(argc, argv, "r:m:h")) != -1) {
		switch (opt) {
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'm':
			round_ms = atof(optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (rounds < 1 || round_ms <= 0) {
		fprintf(stderr, "sr_crc: -r and -m must be positive\n");
		return 2;
	}

	size_t nsizes =
	    argc > optind ? (size_t)(argc - optind) : sizeof(def_sizes) / sizeof(def_sizes[0]);
	size_t *sizes = calloc(nsizes, sizeof(*sizes)), max = 0;
	if (!sizes)
		die("memory");
	for (size_t i = 0; i < nsizes; i++) {
		sizes[i] = argc > optind ? parse_size(argv[optind + (int)i]) : def_sizes[i];
		if (sizes[i] > max)
			max = sizes[i];
	}
	uint8_t *mem = malloc(max + 64);
	if (!mem)
		die("memory");
	for (size_t i = 0; i < max + 64; i++)
		mem[i] = (uint8_t)(i * 131 + (i >> 8));
	const uint8_t *buf = mem + 1;

	for (size_t i = 0; i < nsizes; i++) {
		run("crc32_ieee", crc32_ieee_with, buf, sizes[i], rounds, round_ms / 1e3);
		run("crc32c", crc32c_with, buf, sizes[i], rounds, round_ms / 1e3);
	}
	free(mem);
	free(sizes);
	return 0;
}
