// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc src/util/crc.c src/wire/iwarp/*.c fuzz/fuzz_mpa.c -o fuzz_mpa -pthread
// clang-format on

/* libFuzzer target for the MPA handshake decoder (iw_mpa_decode) and the siw negotiation
 * helpers. Byte 0 chooses what the decoder expects (0 any, 1 Request, 2 Reply) and whether CRC
 * is required locally (bit 2); the rest is the start of a TCP stream. Oracles (abort()):
 * - resumable: every prefix decodes to -EAGAIN or to the full input's error, and an error,
 *   once visible, stays; a frame's prefixes are all -EAGAIN; bytes after the frame do not
 *   change it; every prefix is an exact-size heap copy (ASan sees overreads);
 * - a decoded frame (also one refused for markers) re-encodes to exactly its bytes;
 * - a decoded Request's siw Reply / Reject encode, decode as Replies and pass / fail
 *   iw_mpa_check_reply as siw's initiator would;
 * - the bytes after the frame go through the FPDU receiver without trouble. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/iwarp/iwarp.h"

static void must(int cond)
{
	if (!cond)
		abort();
}

static int decode_copy(const uint8_t *p, size_t n, uint8_t expect, struct iw_mpa *f)
{
	uint8_t *c = malloc(n ? n : 1);
	int r;

	must(c != NULL);
	memset(f, 0, sizeof(*f));
	memcpy(c, p, n);
	r = iw_mpa_decode(c, n, expect, f);
	if (f->pd) { /* the private data must lie inside the input; re-point it at p */
		must(f->pd >= c && f->pd + f->pd_len <= c + n);
		f->pd = p + (f->pd - c);
	}
	free(c);
	return r;
}

static void check_reply(const struct iw_mpa *req, bool crc_required)
{
	static uint8_t out[IW_MPA_FRAME_MAX];
	struct iw_mpa rep, back;
	int n, r;

	r = iw_mpa_reply_init(&rep, req, crc_required, 7, 9, (const uint8_t *)"pd", 2);
	must(r == (req->m ? -IW_E_MPA_MARKERS : 0));
	if (r == 0) {
		must(rep.c == (req->c || crc_required) && !rep.m && !rep.r);
		n = iw_mpa_encode(&rep, out, sizeof(out));
		must(n > 0); /* the reply carries our 2 bytes, not the request's data */
		must(iw_mpa_decode(out, (size_t)n, IW_MPA_REP, &back) == n);
		must(iw_mpa_check_reply(req, &back) == 0);
		if (iw_mpa_has_v2(req) && req->v2.p2p)
			must(back.v2.p2p && back.v2.rtr_write != back.v2.rtr_read);
	}
	iw_mpa_reject_init(&rep, req, NULL, 0);
	n = iw_mpa_encode(&rep, out, sizeof(out));
	must(n > 0);
	must(iw_mpa_decode(out, (size_t)n, IW_MPA_REP, &back) == n);
	must(back.r && !back.m && iw_mpa_check_reply(req, &back) == -ECONNREFUSED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[IW_MPA_FRAME_MAX];
	struct iw_mpa f, g;
	uint8_t expect;
	const uint8_t *s;
	size_t n;
	int r;

	if (size < 1 || size > 2048)
		return 0;
	expect = (uint8_t)((data[0] & 3) % 3);
	s = data + 1;
	n = size - 1;

	r = decode_copy(s, n, expect, &f);
	must(r > 0 || r == -EAGAIN || iw_is_err(r));
	must(r <= (int)n);

	/* resumable and monotone */
	bool seen_err = false;
	for (size_t k = 0; k < n; k++) {
		int rk = decode_copy(s, k, expect, &g);

		if (r > 0 && k < (size_t)r)
			must(rk == -EAGAIN);
		else if (r > 0)
			must(rk == r);
		else
			must(rk == -EAGAIN || rk == r);
		if (seen_err)
			must(rk == r);
		if (rk != -EAGAIN)
			seen_err = true;
	}

	if (r > 0 || r == -IW_E_MPA_MARKERS) {
		size_t flen = iw_mpa_len(&f);
		int e = iw_mpa_encode(&f, out, sizeof(out));

		must(flen <= n);
		if (f.r && f.kind == IW_MPA_REQ) {
			must(e == -EINVAL);
		} else {
			must(e == (int)flen);
			must(memcmp(out, s, flen) == 0);
		}
		if (f.kind == IW_MPA_REQ)
			check_reply(&f, data[0] & 4);
	}

	if (r > 0) { /* what follows the frame is the FPDU stream */
		struct iw_rx rx;
		struct iw_rx_ev ev;
		size_t pos = (size_t)r, used;

		iw_rx_init(&rx, f.c, 0);
		while (pos < n) {
			int e = iw_rx_step(&rx, s + pos, n - pos, &used, &ev);

			must(used <= n - pos);
			pos += used;
			if (e < 0) {
				must(iw_is_err(e));
				break;
			}
			if (e == IW_RX_NEED_MORE)
				break;
		}
	}
	return 0;
}
