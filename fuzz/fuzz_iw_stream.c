// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc src/util/crc.c src/wire/iwarp/*.c fuzz/fuzz_iw_stream.c -o fuzz_iw_stream -pthread
// clang-format on

/* libFuzzer target for the iWARP receive state machine (iw_rx_step) on arbitrary bytes, in
 * arbitrary segmentations chosen by the input. Input layout:
 *   byte 0      bit 0: CRC negotiated
 *   bytes 1-2   max ULPDU (big-endian; 0 = 65535)
 *   byte 3      m: number of chunk-length bytes
 *   m bytes     chunk lengths (1..256, used cyclically) for the split run
 *   the rest    the TCP stream
 * Oracles (abort() on violation):
 * - the stream in one piece, in the input's chunks, and one byte at a time give the same
 *   digest: the same FPDU headers, payload bytes, pads, CRC fields, final error and bytes
 *   consumed; every chunk is an exact-size heap copy (ASan sees any read past it);
 * - events are well-formed: used <= len, DATA chunks inside the input with contiguous
 *   offsets, END only after the whole payload, errors are iw_err codes and sticky;
 * - every accepted header re-encodes (iw_hdr_encode) to exactly the bytes received;
 * - every error's Terminate (iw_term_from_err + iw_term_build) decodes back to itself;
 * - the engine's way (iw_rx_fpdu first wherever an FPDU starts and lies whole in the chunk,
 *   iw_rx_step otherwise), in the input's chunks, gives the same digest as iw_rx_step
 *   alone: the whole-FPDU shortcut accepts exactly what the steps accept, with the same
 *   header, payload, pad and CRC field. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/iwarp/iwarp.h"

static void must(int cond)
{
	if (!cond)
		abort();
}

struct run {
	uint64_t h; /* FNV-1a digest */
	uint64_t consumed;
	int err;
	bool open;
	uint32_t seen, pay_len;
};

static void mix(struct run *ru, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		ru->h = (ru->h ^ b[i]) * 1099511628211ull;
}

static void check_hdr(const struct iw_rx_ev *ev)
{
	uint8_t out[IW_FPDU_HDR_MAX];
	int n = iw_hdr_encode(ev->hdr, ev->payload_len, out, sizeof(out));

	must(n == ev->raw_len);
	must(memcmp(out, ev->raw, (size_t)n) == 0);
}

static void check_term(int err, const struct iw_rx *rx)
{
	static uint8_t out[256];
	struct iw_term t;
	struct iw_fpdu f;
	size_t rl;
	const uint8_t *raw = iw_rx_raw(rx, &rl);
	int n;

	must(iw_term_from_err(err, raw, rl, &t) == 0);
	n = iw_term_build(&t, 1, true, out, sizeof(out));
	must(n > 0);
	must(iw_fpdu_decode(out, (size_t)n, true, 0, &f) == n);
	must(f.hdr.opcode == IW_OP_TERMINATE && f.hdr.term.layer == t.layer);
	must(f.hdr.term.ecode == t.ecode && f.hdr.term.d == t.d && f.hdr.term.r == t.r);
	must(f.hdr.term.ddp_hdr_len == t.ddp_hdr_len);
	must(memcmp(f.hdr.term.ddp_hdr, t.ddp_hdr, t.ddp_hdr_len) == 0);
}

/* Feeds one chunk (copied to an exact-size heap buffer). fast: the engine's way
 * (engine/iw_rx.c feed): an FPDU that starts here and lies whole in the chunk is taken by
 * iw_rx_fpdu in one call, and digested as its HDR, DATA and END events would be. */
static void feed(struct iw_rx *rx, const uint8_t *p, size_t len, struct run *ru, bool fast)
{
	uint8_t *c = malloc(len ? len : 1);
	size_t pos = 0, used;
	struct iw_rx_ev ev;

	must(c != NULL);
	memcpy(c, p, len);
	while (pos < len && !ru->err) {
		if (fast && !ru->open && iw_rx_fpdu(rx, c + pos, len - pos, &used, &ev)) {
			must(used > 0 && used <= len - pos && ev.raw == c + pos);
			check_hdr(&ev);
			must(ev.payload_len == (uint32_t)ev.ulpdu_len + 2 - ev.raw_len);
			must(ev.len == ev.payload_len && ev.off == 0);
			must(ev.payload_len == 0 || ev.data == c + pos + ev.raw_len);
			must(ev.pad_len < 4 && used == (size_t)ev.raw_len + ev.payload_len +
							   ev.pad_len + IW_FPDU_CRC_SIZE);
			mix(ru, "H", 1);
			mix(ru, ev.raw, ev.raw_len);
			if (ev.payload_len)
				mix(ru, ev.data, ev.len);
			mix(ru, "E", 1);
			mix(ru, ev.pad, ev.pad_len);
			mix(ru, &ev.crc, sizeof(ev.crc));
			pos += used;
			ru->consumed += used;
			continue;
		}
		int r = iw_rx_step(rx, c + pos, len - pos, &used, &ev);

		must(used <= len - pos);
		pos += used;
		ru->consumed += used;
		if (r < 0) {
			must(iw_is_err(r));
			ru->err = r;
			mix(ru, &r, sizeof(r));
			/* sticky, consumes nothing */
			must(iw_rx_step(rx, c, len, &used, &ev) == r && used == 0);
			check_term(r, rx);
			break;
		}
		if (r == IW_RX_NEED_MORE) {
			must(pos == len);
			break;
		}
		must(used > 0);
		switch (r) {
		case IW_RX_HDR:
			must(!ru->open);
			check_hdr(&ev);
			ru->open = true;
			ru->seen = 0;
			ru->pay_len = ev.payload_len;
			must(ev.payload_len == (uint32_t)ev.ulpdu_len + 2 - ev.raw_len);
			mix(ru, "H", 1);
			mix(ru, ev.raw, ev.raw_len);
			break;
		case IW_RX_DATA:
			must(ru->open && ev.len > 0 && ev.off == ru->seen);
			must(ev.data >= c && ev.data + ev.len == c + pos);
			must(ru->seen + ev.len <= ru->pay_len);
			ru->seen += ev.len;
			mix(ru, ev.data, ev.len);
			break;
		case IW_RX_END:
			must(ru->open && ru->seen == ru->pay_len && ev.pad_len < 4);
			ru->open = false;
			mix(ru, "E", 1);
			mix(ru, ev.pad, ev.pad_len);
			mix(ru, &ev.crc, sizeof(ev.crc));
			break;
		default:
			must(0);
		}
	}
	free(c);
}

/* Feeds the n stream bytes at s in the input's chunks (m lengths at lens, used cyclically;
 * none: 7 bytes each). */
static void feed_chunks(struct iw_rx *rx, const uint8_t *s, size_t n, const uint8_t *lens, size_t m,
			struct run *ru, bool fast)
{
	for (size_t i = 0, pos = 0; pos < n && !ru->err; i++) {
		size_t k = m ? (size_t)lens[i % m] + 1 : 7;

		if (k > n - pos)
			k = n - pos;
		feed(rx, s + pos, k, ru, fast);
		pos += k;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct run a = {.h = 1469598103934665603ull}, b = a, c = a, d = a;
	struct iw_rx rx;
	const uint8_t *lens, *s;
	size_t m, n;
	bool crc;
	uint16_t max;

	if (size < 4)
		return 0;
	crc = data[0] & 1;
	max = (uint16_t)(data[1] << 8 | data[2]);
	m = data[3];
	if (size - 4 < m)
		return 0;
	lens = data + 4;
	s = lens + m;
	n = size - 4 - m;

	iw_rx_init(&rx, crc, max);
	feed(&rx, s, n, &a, false);

	iw_rx_init(&rx, crc, max);
	feed_chunks(&rx, s, n, lens, m, &b, false);
	must(a.h == b.h && a.consumed == b.consumed && a.err == b.err);

	if (n <= 4096) {
		iw_rx_init(&rx, crc, max);
		for (size_t pos = 0; pos < n && !c.err; pos++)
			feed(&rx, s + pos, 1, &c, false);
		must(a.h == c.h && a.consumed == c.consumed && a.err == c.err);
	}

	iw_rx_init(&rx, crc, max);
	feed_chunks(&rx, s, n, lens, m, &d, true);
	must(a.h == d.h && a.consumed == d.consumed && a.err == d.err);
	return 0;
}
