/* The iWARP receive state machine (iw_rx_step) on generated streams and malformed input:
 * - long generated streams (every opcode, 0..9000-byte messages, MSS-sized FPDUs, random
 *   Terminates, random non-zero pad bytes like siw's, CRC on and off) fed in random
 *   segmentations (seeded; the seed is printed) give exactly the FPDUs that were built;
 * - truncated streams never give an error, only "need more";
 * - every malformation gives its specific error at the byte that reveals it, the same in one
 *   piece and one byte at a time; errors are sticky; iw_term_from_err turns them into
 *   Terminates;
 * Every input chunk is an exact-size heap copy, so ASan catches any read past it. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "util/crc.h"
#include "wire/iwarp/iwarp.h"

static uint64_t rng_state;

static uint32_t rnd(void)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng_state >> 33);
}

static uint32_t rnd_in(uint32_t lo, uint32_t hi) /* inclusive */
{
	return lo + rnd() % (hi - lo + 1);
}

/* ---- What an FPDU looks like to the receiver ---- */

struct ent {
	uint16_t raw_len;
	uint8_t raw[IW_FPDU_HDR_MAX];
	uint32_t payload_len, payload_crc;
	uint8_t pad[3], pad_len;
	uint32_t crc;
};

struct stream {
	uint8_t *b;
	size_t n, cap;
	struct ent *e;
	size_t ne, ecap;
};

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	if (need > *cap) {
		while (*cap < need)
			*cap = *cap ? 2 * *cap : 4096;
		p = realloc(p, *cap * elem);
		REQUIRE(p);
	}
	return p;
}

/* Appends one FPDU built by hand from the transmit builder's header (so the expected entry
 * is known without decoding), with random pad bytes when `junk_pad`. */
static void append_fpdu(struct stream *s, const uint8_t *hdr, int hl, const uint8_t *pay,
			uint32_t pl, bool crc, bool junk_pad)
{
	uint32_t ulpdu = (uint32_t)hl - 2 + pl;
	uint8_t pad[3] = {0, 0, 0};
	struct ent e;
	size_t at;
	uint32_t c = 0;

	if (junk_pad)
		for (int i = 0; i < 3; i++)
			pad[i] = (uint8_t)rnd();
	s->b = grow(s->b, &s->cap, s->n + iw_fpdu_len(ulpdu), 1);
	at = s->n;
	memcpy(s->b + at, hdr, (size_t)hl);
	if (pl)
		memcpy(s->b + at + hl, pay, pl);
	if (crc)
		c = crc32c(0, s->b + at, (size_t)hl + pl);
	iw_fpdu_trailer(s->b + at + hl + pl, ulpdu, c, crc, pad);
	s->n += iw_fpdu_len(ulpdu);

	memset(&e, 0, sizeof(e));
	e.raw_len = (uint16_t)hl;
	memcpy(e.raw, hdr, (size_t)hl);
	e.payload_len = pl;
	e.payload_crc = crc32c(0, pay, pl);
	e.pad_len = (uint8_t)iw_fpdu_pad(ulpdu);
	memcpy(e.pad, pad, e.pad_len);
	const uint8_t *t = s->b + s->n - 4;
	e.crc = (uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24;
	s->e = grow(s->e, &s->ecap, s->ne + 1, sizeof(*s->e));
	s->e[s->ne++] = e;
}

static void random_term(struct iw_term *t)
{
	memset(t, 0, sizeof(*t));
	t->layer = (uint8_t)rnd_in(0, 2);
	t->etype = (uint8_t)rnd_in(0, 15);
	t->ecode = (uint8_t)rnd();
	t->m = rnd() & 1;
	t->d = rnd() & 1;
	if (t->d) {
		t->ddp_seg_len = (uint16_t)rnd();
		t->ddp_hdr_len = (rnd() & 1) ? 14 : 18;
		for (int i = 0; i < t->ddp_hdr_len; i++)
			t->ddp_hdr[i] = (uint8_t)rnd();
		t->ddp_hdr[0] =
		    (uint8_t)((t->ddp_hdr[0] & 0x7f) | (t->ddp_hdr_len == 14 ? 0x80 : 0));
	}
	t->r = rnd() & 1;
	if (t->r && (rnd() & 1)) {
		t->rdmap_hdr_len = 28;
		for (int i = 0; i < 28; i++)
			t->rdmap_hdr[i] = (uint8_t)rnd();
	}
}

static void gen_stream(struct stream *s, bool crc, size_t target)
{
	static uint8_t msg[9001], hdr[IW_FPDU_HDR_MAX];
	uint32_t msn[IW_QN__COUNT] = {1, 1, 1};

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)rnd();
	while (s->n < target) {
		uint8_t op = (uint8_t)rnd_in(0, IW_OP__COUNT - 1);
		const struct iw_opinfo *oi = iw_opinfo(op);
		uint32_t len = 0, off, pl;
		uint16_t mulpdu = iw_mulpdu(rnd_in(80, 9000));
		struct iw_hdr h;
		struct iw_tx tx;
		bool junk = (rnd() % 4) == 0;
		int hl;

		if (oi->payload) {
			uint32_t k = rnd() % 8;
			len = k == 0 ? 0 : k < 5 ? rnd_in(1, 64) : rnd_in(65, 9000);
		}
		iw_hdr_init(&h, op);
		h.stag = rnd();
		h.to = (uint64_t)rnd() << 32 | rnd();
		h.msn = msn[h.qn]++;
		if (oi->inval)
			h.rsvdulp = rnd();
		if (op == IW_OP_READ_REQ)
			h.rreq =
			    (struct iw_rreq){rnd(), (uint64_t)rnd() << 20, rnd(), rnd(), rnd()};
		if (op == IW_OP_TERMINATE)
			random_term(&h.term);
		REQUIRE(iw_tx_init(&tx, &h, len, mulpdu, crc) == 0);
		while ((hl = iw_tx_next_hdr(&tx, hdr, sizeof(hdr), &off, &pl)) > 0)
			append_fpdu(s, hdr, hl, msg + off, pl, crc, junk);
		REQUIRE(hl == 0);
	}
}

/* ---- Feeding ---- */

struct log {
	struct ent *e;
	size_t n, cap;
	int err;
	size_t consumed; /* stream bytes consumed in total */
	bool open;
	uint32_t seen, pcrc;
	struct ent cur;
	size_t whole; /* FPDUs taken by iw_rx_fpdu */
};

/* Whether feed() tries iw_rx_fpdu at every FPDU boundary before iw_rx_step, as the engine
 * does: every test runs both ways, and must see the same FPDUs and the same errors. */
static bool whole_first;

/* Feeds s[from, to) as one chunk (an exact-size heap copy); checks every event. */
static int feed(struct iw_rx *rx, const uint8_t *s, size_t from, size_t to, struct log *lg)
{
	size_t len = to - from, pos = 0, used;
	uint8_t *c = malloc(len ? len : 1);
	struct iw_rx_ev ev;
	int r = IW_RX_NEED_MORE;

	REQUIRE(c);
	memcpy(c, s + from, len);
	do {
		if (whole_first && !lg->open) {
			/* The engine's order: the shortcut first at every FPDU boundary. */
			int w = iw_rx_fpdu(rx, c + pos, len - pos, &used, &ev);
			CHECK(w == 0 || w == 1);
			if (w == 1) {
				REQUIRE(used <= len - pos);
				CHECK_EQ(used, iw_fpdu_len(ev.ulpdu_len));
				CHECK_EQ(ev.raw_len, 2 + iw_hdr_len(ev.hdr));
				CHECK_EQ(ev.len, ev.payload_len);
				CHECK_EQ(ev.off, 0);
				CHECK(ev.len ? ev.data == c + pos + ev.raw_len : ev.data == NULL);
				memset(&lg->cur, 0, sizeof(lg->cur));
				lg->cur.raw_len = ev.raw_len;
				memcpy(lg->cur.raw, ev.raw, ev.raw_len);
				lg->cur.payload_len = ev.payload_len;
				lg->cur.payload_crc = ev.len ? crc32c(0, ev.data, ev.len) : 0;
				memcpy(lg->cur.pad, ev.pad, 3);
				lg->cur.pad_len = ev.pad_len;
				lg->cur.crc = ev.crc;
				lg->e = grow(lg->e, &lg->cap, lg->n + 1, sizeof(*lg->e));
				lg->e[lg->n++] = lg->cur;
				lg->whole++;
				pos += used;
				lg->consumed += used;
				r = IW_RX_END;
				continue;
			}
			CHECK_EQ(used, 0);
		}
		r = iw_rx_step(rx, c + pos, len - pos, &used, &ev);
		REQUIRE(used <= len - pos);
		pos += used;
		lg->consumed += used;
		if (r < 0) {
			lg->err = r;
			break;
		}
		if (r == IW_RX_NEED_MORE) {
			CHECK_EQ(pos, len);
			break;
		}
		REQUIRE(used > 0);
		if (r == IW_RX_HDR) {
			CHECK(!lg->open);
			lg->open = true;
			lg->seen = 0;
			lg->pcrc = 0;
			memset(&lg->cur, 0, sizeof(lg->cur));
			lg->cur.raw_len = ev.raw_len;
			memcpy(lg->cur.raw, ev.raw, ev.raw_len);
			lg->cur.payload_len = ev.payload_len;
			CHECK_EQ(ev.raw_len, 2 + iw_hdr_len(ev.hdr));
		} else if (r == IW_RX_DATA) {
			CHECK(lg->open);
			CHECK(ev.len > 0 && ev.data >= c && ev.data + ev.len == c + pos);
			CHECK_EQ(ev.off, lg->seen);
			lg->pcrc = crc32c(lg->pcrc, ev.data, ev.len);
			lg->seen += ev.len;
		} else {
			CHECK(lg->open && r == IW_RX_END);
			CHECK_EQ(lg->seen, ev.payload_len);
			lg->cur.payload_crc = lg->pcrc;
			memcpy(lg->cur.pad, ev.pad, 3);
			lg->cur.pad_len = ev.pad_len;
			lg->cur.crc = ev.crc;
			lg->e = grow(lg->e, &lg->cap, lg->n + 1, sizeof(*lg->e));
			lg->e[lg->n++] = lg->cur;
			lg->open = false;
		}
	} while (pos < len);
	free(c);
	return r;
}

static bool ent_eq(const struct ent *a, const struct ent *b)
{
	return a->raw_len == b->raw_len && !memcmp(a->raw, b->raw, a->raw_len) &&
	       a->payload_len == b->payload_len && a->payload_crc == b->payload_crc &&
	       a->pad_len == b->pad_len && !memcmp(a->pad, b->pad, a->pad_len) && a->crc == b->crc;
}

static bool log_matches(const struct log *lg, const struct stream *s)
{
	if (lg->err || lg->n != s->ne)
		return false;
	for (size_t i = 0; i < s->ne; i++)
		if (!ent_eq(&lg->e[i], &s->e[i]))
			return false;
	return true;
}

static void log_reset(struct log *lg)
{
	lg->n = 0;
	lg->err = 0;
	lg->consumed = 0;
	lg->open = false;
}

static void test_generated(void)
{
	struct log lg = {0};

	for (int crc = 0; crc < 2; crc++) {
		struct stream s;
		struct iw_rx rx;

		gen_stream(&s, crc, 3u << 20);
		/* one piece */
		log_reset(&lg);
		iw_rx_init(&rx, crc, 0);
		lg.whole = 0;
		feed(&rx, s.b, 0, s.n, &lg);
		CHECK(log_matches(&lg, &s));
		CHECK(iw_rx_idle(&rx));
		CHECK_EQ(rx.fpdus, s.ne);
		CHECK_EQ(lg.whole, whole_first ? s.ne : 0); /* in one piece, every FPDU is whole */
		CHECK(strcmp(iw_rx_state_name(&rx), "HDR") == 0);
		/* random segmentations: mostly tiny pieces, some medium, some large */
		for (int run = 0; run < 6; run++) {
			size_t pos = 0;

			log_reset(&lg);
			iw_rx_init(&rx, crc, 0);
			while (pos < s.n) {
				uint32_t k = rnd() % 10, n;
				n = k < 5   ? rnd_in(1, 8)
				    : k < 8 ? rnd_in(9, 300)
					    : rnd_in(301, 20000);
				if (n > s.n - pos)
					n = (uint32_t)(s.n - pos);
				feed(&rx, s.b, pos, pos + n, &lg);
				pos += n;
			}
			CHECK(log_matches(&lg, &s));
			CHECK(iw_rx_idle(&rx));
		}
		/* one byte at a time over the first 256 KiB (from a 1-byte heap buffer) */
		{
			size_t lim = s.n < (256u << 10) ? s.n : (256u << 10), nfull = 0, at = 0;

			while (nfull < s.ne &&
			       at + iw_fpdu_len(s.e[nfull].raw_len - 2u + s.e[nfull].payload_len) <=
				   lim) {
				at += iw_fpdu_len(s.e[nfull].raw_len - 2u + s.e[nfull].payload_len);
				nfull++;
			}
			log_reset(&lg);
			iw_rx_init(&rx, crc, 0);
			for (size_t k = 0; k < at; k++)
				feed(&rx, s.b, k, k + 1, &lg);
			CHECK_EQ(lg.n, nfull);
			for (size_t i = 0; i < nfull && i < lg.n; i++)
				CHECK(ent_eq(&lg.e[i], &s.e[i]));
		}
		fprintf(stderr,
			"generated stream (crc %d): %zu bytes, %zu FPDUs, 8 segmentations\n", crc,
			s.n, s.ne);
		free(s.b);
		free(s.e);
	}
	free(lg.e);
}

/* Truncation is never an error: every prefix of a valid stream gives "need more" at its end
 * and exactly the FPDUs it holds. */
static void test_truncation(void)
{
	struct stream s;
	struct log lg = {0};

	gen_stream(&s, true, 6000);
	size_t *ends = malloc(s.ne * sizeof(*ends)), at = 0;
	REQUIRE(ends);
	for (size_t i = 0; i < s.ne; i++) {
		at += iw_fpdu_len(s.e[i].raw_len - 2u + s.e[i].payload_len);
		ends[i] = at;
	}
	REQUIRE(at == s.n);
	for (size_t k = 0; k <= s.n; k++) {
		struct iw_rx rx;
		size_t want = 0;

		while (want < s.ne && ends[want] <= k)
			want++;
		log_reset(&lg);
		iw_rx_init(&rx, true, 0);
		int r = feed(&rx, s.b, 0, k, &lg);
		CHECK(r >= 0);
		CHECK_EQ(lg.n, want);
		CHECK_EQ(lg.consumed, k);
		CHECK_EQ(iw_rx_idle(&rx), k == 0 || ends[want ? want - 1 : 0] == k);
	}
	free(ends);
	free(s.b);
	free(s.e);
	free(lg.e);
}

/* ---- Malformations ---- */

/* Expects `err` after exactly `at` consumed bytes, in one piece and byte by byte; then checks
 * that the error is sticky. */
static void expect_err(const uint8_t *b, size_t n, bool crc, uint16_t max, int err, size_t at,
		       int line)
{
	struct log lg = {0};
	struct iw_rx rx;
	struct iw_rx_ev ev;
	size_t used = 99;

	iw_rx_init(&rx, crc, max);
	feed(&rx, b, 0, n, &lg);
	if (lg.err != err || lg.consumed != at)
		fprintf(stderr, "line %d: got %s after %zu, want %s after %zu\n", line,
			iw_err_name(lg.err), lg.consumed, iw_err_name(err), at);
	CHECK_EQ(lg.err, err);
	CHECK_EQ(lg.consumed, at);
	/* sticky */
	CHECK_EQ(iw_rx_step(&rx, b, n, &used, &ev), err);
	CHECK_EQ(used, 0);
	CHECK(!iw_rx_idle(&rx));
	CHECK(strcmp(iw_rx_state_name(&rx), "ERROR") == 0);

	log_reset(&lg);
	iw_rx_init(&rx, crc, max);
	for (size_t k = 0; k < n && !lg.err; k++)
		feed(&rx, b, k, k + 1, &lg);
	CHECK_EQ(lg.err, err);
	CHECK_EQ(lg.consumed, at);
	free(lg.e);
}

#define EXPECT_ERR(b, n, crc, max, err, at) expect_err(b, n, crc, max, err, at, __LINE__)

/* An FPDU with the given header and payload, CRC on. */
static size_t mk(uint8_t *out, const struct iw_hdr *h, uint32_t pl, bool crc)
{
	static uint8_t pay[2000];
	struct iw_fpdu f;
	int n;

	memset(&f, 0, sizeof(f));
	f.hdr = *h;
	f.payload = pay;
	f.payload_len = pl;
	n = iw_fpdu_encode(&f, crc, out, 4096);
	REQUIRE(n > 0);
	return (size_t)n;
}

static void set_len(uint8_t *b, uint16_t ulpdu)
{
	b[0] = (uint8_t)(ulpdu >> 8);
	b[1] = (uint8_t)ulpdu;
}

static void test_malformed(void)
{
	uint8_t b[4096];
	struct iw_hdr h;
	size_t n;

	/* ULPDU_LENGTH below the smallest header: refused with the length. */
	for (uint16_t l = 0; l < 14; l++) {
		iw_hdr_init(&h, IW_OP_WRITE);
		n = mk(b, &h, 0, true);
		set_len(b, l);
		EXPECT_ERR(b, n, true, 0, -IW_E_ULPDU_LEN, 2);
	}
	/* Below the opcode's header / not its fixed size: refused with the control word. */
	iw_hdr_init(&h, IW_OP_SEND);
	n = mk(b, &h, 0, true);
	for (uint16_t l = 14; l < 18; l++) {
		set_len(b, l);
		EXPECT_ERR(b, n, true, 0, -IW_E_ULPDU_LEN, 4);
	}
	iw_hdr_init(&h, IW_OP_READ_REQ);
	n = mk(b, &h, 0, true);
	static const uint16_t rr[] = {14, 45, 47, 48, 100, 65535};
	for (size_t i = 0; i < sizeof(rr) / sizeof(rr[0]); i++) {
		set_len(b, rr[i]); /* a Read Request with payload: siw EPROTO */
		EXPECT_ERR(b, n, true, 0, -IW_E_ULPDU_LEN, 4);
	}
	iw_hdr_init(&h, IW_OP_TERMINATE);
	n = mk(b, &h, 0, true);
	set_len(b, 21);
	EXPECT_ERR(b, n, true, 0, -IW_E_ULPDU_LEN, 4);
	set_len(b, IW_TERM_ULPDU_MAX + 1);
	EXPECT_ERR(b, n, true, 0, -IW_E_ULPDU_LEN, 4);

	/* Above the negotiated maximum: refused with the length, before any payload. */
	iw_hdr_init(&h, IW_OP_SEND);
	n = mk(b, &h, 100 - 18, true);
	EXPECT_ERR(b, n, true, 99, -IW_E_ULPDU_TOO_BIG, 2);
	{
		struct log lg = {0};
		struct iw_rx rx;
		iw_rx_init(&rx, true, 100);
		feed(&rx, b, 0, n, &lg);
		CHECK(lg.err == 0 && lg.n == 1);
		free(lg.e);
	}

	/* CRC: any bit of the payload, pad or CRC field; ignored when CRC is off. */
	iw_hdr_init(&h, IW_OP_SEND);
	n = mk(b, &h, 5, true); /* ULPDU 23, pad 3 */
	for (size_t k = 20; k < n; k++) {
		b[k] ^= 0x10;
		EXPECT_ERR(b, n, true, 0, -IW_E_CRC, n);
		struct log lg = {0};
		struct iw_rx rx;
		iw_rx_init(&rx, false, 0);
		feed(&rx, b, 0, n, &lg);
		CHECK(lg.err == 0 && lg.n == 1);
		free(lg.e);
		b[k] ^= 0x10;
	}
	/* The reserved control bits are covered by the CRC but not checked. */
	h.ddp_rsvd = 0xf;
	h.rdmap_rsvd = 3;
	n = mk(b, &h, 5, true);
	{
		struct iw_fpdu f;
		CHECK_EQ(iw_fpdu_decode(b, n, true, 0, &f), (int)n);
		CHECK(f.hdr.ddp_rsvd == 0xf && f.hdr.rdmap_rsvd == 3);
	}

	/* Versions and opcodes, in siw's order: DV, then RV, then opcode. */
	for (int op = 0; op < 16; op++) {
		for (int dv = 0; dv < 4; dv++) {
			for (int rv = 0; rv < 4; rv++) {
				bool tagged = op == IW_OP_WRITE || op == IW_OP_READ_RESP;
				int want;

				iw_hdr_init(&h, op < IW_OP__COUNT ? (uint8_t)op : IW_OP_SEND);
				n = mk(b, &h, 0, true);
				b[2] = (uint8_t)((b[2] & ~3) | dv);
				b[3] = (uint8_t)((rv << 6) | op);
				if (dv != 1)
					want = tagged ? -IW_E_DDP_VERSION_T : -IW_E_DDP_VERSION_U;
				else if (rv != 1)
					want = -IW_E_RDMAP_VERSION;
				else if (op >= IW_OP__COUNT)
					want = -IW_E_OPCODE;
				else
					continue;
				EXPECT_ERR(b, n, true, 0, want, 4);
			}
		}
	}
	/* T inconsistent with the opcode; L = 0 on a single-segment message. */
	for (uint8_t op = 0; op < IW_OP__COUNT; op++) {
		iw_hdr_init(&h, op);
		n = mk(b, &h, 0, true);
		b[2] ^= 0x80;
		EXPECT_ERR(b, n, true, 0, -IW_E_DDP_FLAGS, 4);
		b[2] ^= 0x80 | 0x40;
		if (iw_opinfo(op)->single)
			EXPECT_ERR(b, n, true, 0, -IW_E_DDP_FLAGS, 4);
	}
	/* QN: the opcode's queue only. MO: 0 on single-segment messages. */
	static const uint32_t qns[] = {0, 1, 2, 3, 7, 0xffffffffu};
	for (uint8_t op = 0; op < IW_OP__COUNT; op++) {
		const struct iw_opinfo *oi = iw_opinfo(op);
		if (oi->tagged)
			continue;
		for (size_t i = 0; i < sizeof(qns) / sizeof(qns[0]); i++) {
			iw_hdr_init(&h, op);
			h.qn = qns[i];
			n = mk(b, &h, 0, true);
			if (qns[i] != oi->qn)
				EXPECT_ERR(b, n, true, 0, -IW_E_QN, 2 + iw_hdr_len(&h));
		}
		iw_hdr_init(&h, op);
		h.mo = 5;
		n = mk(b, &h, 0, true);
		if (oi->single) {
			EXPECT_ERR(b, n, true, 0, -IW_E_MO, 2 + iw_hdr_len(&h));
		} else {
			struct iw_fpdu f;
			CHECK_EQ(iw_fpdu_decode(b, n, true, 0, &f), (int)n); /* stateful check */
		}
	}
	/* A Terminate whose parts do not add up. */
	iw_hdr_init(&h, IW_OP_TERMINATE);
	n = mk(b, &h, 0, false);
	b[1] = 24;
	b[22] = 0x40; /* D, but only 2 bytes follow */
	uint8_t tb[64];
	memcpy(tb, b, 26);
	memset(tb + 26, 0, 4);
	EXPECT_ERR(tb, 30, false, 0, -IW_E_TERM_FMT, 26);

	/* The error's Terminate, with the offending header from iw_rx_raw. */
	{
		struct iw_rx rx;
		struct iw_rx_ev ev;
		struct iw_term t;
		size_t used, rl;
		const uint8_t *raw;

		iw_hdr_init(&h, IW_OP_SEND);
		h.qn = 5;
		h.msn = 7;
		n = mk(b, &h, 16, true);
		iw_rx_init(&rx, true, 0);
		CHECK_EQ(iw_rx_step(&rx, b, n, &used, &ev), -IW_E_QN);
		CHECK_EQ(used, 20);
		raw = iw_rx_raw(&rx, &rl);
		CHECK_EQ(rl, 20);
		CHECK_EQ(iw_term_from_err(-IW_E_QN, raw, rl, &t), 0);
		CHECK(t.layer == IW_LAYER_DDP && t.etype == 2 && t.ecode == 1 && t.m && t.d);
		CHECK_EQ(t.ddp_seg_len, 16);
		CHECK_MEM(t.ddp_hdr, b + 2, 18);
		/* ULPDU_LEN after 2 bytes: only the length is there, nothing to attach */
		set_len(b, 3);
		iw_rx_init(&rx, true, 0);
		CHECK_EQ(iw_rx_step(&rx, b, n, &used, &ev), -IW_E_ULPDU_LEN);
		raw = iw_rx_raw(&rx, &rl);
		CHECK_EQ(rl, 2);
		CHECK_EQ(iw_term_from_err(-IW_E_ULPDU_LEN, raw, rl, &t), 0);
		CHECK(!t.m && !t.d && t.layer == IW_LAYER_DDP);
	}

	/* The largest ULPDU goes through; 0 and NULL are fine. */
	{
		static uint8_t big[IW_FPDU_MAX], pay[IW_ULPDU_MAX];
		struct iw_fpdu f, d;
		memset(&f, 0, sizeof(f));
		iw_hdr_init(&f.hdr, IW_OP_WRITE);
		f.payload = pay;
		f.payload_len = IW_ULPDU_MAX - 14;
		CHECK_EQ(iw_fpdu_encode(&f, true, big, sizeof(big)), IW_FPDU_MAX);
		CHECK_EQ(iw_fpdu_decode(big, sizeof(big), true, 0, &d), IW_FPDU_MAX);
		CHECK_EQ(d.payload_len, IW_ULPDU_MAX - 14);
		struct iw_rx rx;
		struct iw_rx_ev ev;
		size_t used = 5;
		iw_rx_init(&rx, true, 0);
		CHECK_EQ(iw_rx_step(&rx, NULL, 0, &used, &ev), IW_RX_NEED_MORE);
		CHECK_EQ(used, 0);
		CHECK_EQ(iw_rx_step(&rx, NULL, 1, &used, &ev), -EINVAL);
	}
}

/* Random garbage: an error or "need more", never anything else, never out of bounds. */
static void test_garbage(void)
{
	uint8_t b[512];
	int errs = 0;

	for (int t = 0; t < 20000; t++) {
		size_t n = rnd_in(1, sizeof(b));
		struct log lg = {0};
		struct iw_rx rx;

		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)rnd();
		if (t & 1) { /* plausible length and control word */
			b[0] = 0;
			b[1] = (uint8_t)rnd_in(14, 80);
			b[2] = (uint8_t)((b[2] & 0xc0) | 1);
			b[3] = (uint8_t)(0x40 | (b[3] & 7));
		}
		iw_rx_init(&rx, t & 2, (uint16_t)rnd());
		feed(&rx, b, 0, n, &lg);
		CHECK(lg.err == 0 || iw_is_err(lg.err));
		errs += lg.err != 0;
		free(lg.e);
	}
	CHECK(errs > 1000);
}

/* The shortcut takes whole, good FPDUs only: a bad CRC, a cut-short FPDU or one begun by
 * iw_rx_step are left to iw_rx_step, untouched. */
static void test_whole(void)
{
	uint8_t b[4096];
	struct iw_hdr h;
	struct iw_rx rx;
	struct iw_rx_ev ev;
	size_t used = 99, n;

	iw_hdr_init(&h, IW_OP_SEND);
	h.msn = 1;
	n = mk(b, &h, 100, true);
	iw_rx_init(&rx, true, 0);
	CHECK_EQ(iw_rx_fpdu(&rx, b, n - 1, &used, &ev), 0);
	CHECK_EQ(used, 0);
	CHECK_EQ(iw_rx_fpdu(&rx, b, n, &used, &ev), 1);
	CHECK_EQ(used, n);
	CHECK_EQ(ev.hdr->opcode, IW_OP_SEND);
	CHECK_EQ(ev.hdr->msn, 1);
	CHECK(iw_rx_idle(&rx));
	CHECK_EQ(rx.fpdus, 1);
	/* a flipped payload bit: not taken; iw_rx_step reports the CRC at the FPDU's end */
	b[30] ^= 4;
	CHECK_EQ(iw_rx_fpdu(&rx, b, n, &used, &ev), 0);
	CHECK_EQ(used, 0);
	CHECK(iw_rx_idle(&rx));
	EXPECT_ERR(b, n, true, 0, -IW_E_CRC, n);
	/* CRC off: the same bytes are a good FPDU */
	iw_rx_init(&rx, false, 0);
	CHECK_EQ(iw_rx_fpdu(&rx, b, n, &used, &ev), 1);
	/* one byte in through iw_rx_step: the rest is no FPDU start */
	iw_rx_init(&rx, true, 0);
	b[30] ^= 4;
	CHECK_EQ(iw_rx_step(&rx, b, 1, &used, &ev), IW_RX_NEED_MORE);
	CHECK_EQ(iw_rx_fpdu(&rx, b + 1, n - 1, &used, &ev), 0);
	CHECK_EQ(used, 0);
	CHECK_EQ(iw_rx_fpdu(&rx, NULL, 0, &used, &ev), 0);
}

int main(void)
{
	uint64_t seed = check_seed(7);
	for (int way = 0; way < 2; way++) {
		whole_first = way == 1;
		rng_state = seed;
		fprintf(stderr, "-- %s\n",
			whole_first ? "iw_rx_fpdu first, then iw_rx_step" : "iw_rx_step");
		test_generated();
		test_truncation();
		test_malformed();
		test_garbage();
	}
	test_whole();
	return check_exit();
}
