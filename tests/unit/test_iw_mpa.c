/* MPA Request / Reply / Reject frames (RFC 5044 7.1, RFC 6581) and siw's negotiation rules,
 * against the validated examples of ../shared/spec/iwarp.md 2.5 and the decoder's resumable
 * and early-refusal behaviour on partial and garbage input. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "wire/iwarp/iwarp.h"

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
	size_t n = 0;
	int hi = -1;

	for (; *s; s++) {
		int v;

		if (*s >= '0' && *s <= '9')
			v = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			v = *s - 'a' + 10;
		else
			continue;
		if (hi < 0) {
			hi = v;
		} else {
			REQUIRE(n < cap);
			out[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	return n;
}

static const char *rev1_req = "4d504120494420526571204672616d65 40 01 0008 636c69656e742121";
static const char *rev2_req =
    "4d504120494420526571204672616d65 10 02 000c 0010 0010 636c69656e742121";

/* Decodes buf[0..n) from a heap copy of exactly n bytes (ASan sees any overread). */
static int decode_exact(const uint8_t *buf, size_t n, uint8_t expect, struct iw_mpa *out)
{
	uint8_t *copy = malloc(n ? n : 1);
	int r;

	REQUIRE(copy);
	memset(out, 0, sizeof(*out));
	memcpy(copy, buf, n);
	r = iw_mpa_decode(copy, n, expect, out);
	if (out->pd_len)
		out->pd = buf + (out->pd - copy); /* re-point into the caller's bytes */
	free(copy);
	return r;
}

static void test_vectors(void)
{
	uint8_t want[64], got[64];
	struct iw_mpa f, d;
	size_t n;

	/* Rev 1, CRC, 8 bytes "client!!". */
	n = unhex(rev1_req, want, sizeof(want));
	memset(&f, 0, sizeof(f));
	f.kind = IW_MPA_REQ;
	f.c = true;
	f.rev = 1;
	f.pd = (const uint8_t *)"client!!";
	f.pd_len = 8;
	CHECK_EQ(iw_mpa_len(&f), n);
	CHECK_EQ(iw_mpa_encode(&f, got, sizeof(got)), (int)n);
	CHECK_MEM(got, want, n);
	CHECK_EQ(decode_exact(want, n, IW_MPA_REQ, &d), (int)n);
	CHECK(d.kind == IW_MPA_REQ && d.c && !d.m && !d.r && !d.enhanced && d.rev == 1);
	CHECK(!iw_mpa_has_v2(&d));
	CHECK_EQ(d.pd_len, 8);
	CHECK_MEM(d.pd, "client!!", 8);

	/* Rev 2 (siw default shape), IRD 16 / ORD 16, "client!!". */
	n = unhex(rev2_req, want, sizeof(want));
	iw_mpa_req_init(&f, false, 16, 16, (const uint8_t *)"client!!", 8);
	CHECK_EQ(iw_mpa_encode(&f, got, sizeof(got)), (int)n);
	CHECK_MEM(got, want, n);
	CHECK_EQ(decode_exact(want, n, IW_MPA_ANY, &d), (int)n);
	CHECK(iw_mpa_has_v2(&d) && !d.c);
	CHECK_EQ(d.v2.ird, 16);
	CHECK_EQ(d.v2.ord, 16);
	CHECK(!d.v2.p2p && !d.v2.rtr_write && !d.v2.rtr_read && !d.v2.rtr_send);
	CHECK_EQ(d.pd_len, 8);

	/* Every prefix of a good frame: -EAGAIN, nothing consumed. */
	for (size_t k = 0; k < n; k++)
		CHECK_EQ(decode_exact(want, k, IW_MPA_REQ, &d), -EAGAIN);
	/* A Reply is not a Request, and the other way round; ANY takes both. */
	CHECK_EQ(decode_exact(want, n, IW_MPA_REP, &d), -IW_E_MPA_KEY);
	want[9] = 'p';
	CHECK_EQ(decode_exact(want, n, IW_MPA_REP, &d), (int)n);
	CHECK_EQ(d.kind, IW_MPA_REP);
	CHECK_EQ(decode_exact(want, n, IW_MPA_ANY, &d), (int)n);
	CHECK_EQ(decode_exact(want, n, IW_MPA_REQ, &d), -IW_E_MPA_KEY);
	CHECK_EQ(decode_exact(want, 9, IW_MPA_REQ, &d), -EAGAIN); /* "MPA ID Re" fits both */
	CHECK_EQ(decode_exact(want, 10, IW_MPA_REQ, &d), -IW_E_MPA_KEY);
}

static void test_garbage(void)
{
	uint8_t b[IW_MPA_FRAME_MAX + 8];
	struct iw_mpa d;
	size_t n;

	/* Refused at the first byte that cannot be MPA (a peer that speaks something else). */
	CHECK_EQ(decode_exact((const uint8_t *)"G", 1, IW_MPA_REQ, &d), -IW_E_MPA_KEY);
	CHECK_EQ(decode_exact((const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18, IW_MPA_ANY, &d),
		 -IW_E_MPA_KEY);
	CHECK_EQ(decode_exact((const uint8_t *)"MPA ID Req Framf", 16, IW_MPA_ANY, &d),
		 -IW_E_MPA_KEY);
	CHECK_EQ(decode_exact((const uint8_t *)"mpa", 3, IW_MPA_ANY, &d), -IW_E_MPA_KEY);

	/* Rev: 0 and 3..255 refused as soon as the Rev byte is in. */
	n = unhex(rev1_req, b, sizeof(b));
	for (int rev = 0; rev < 256; rev++) {
		b[17] = (uint8_t)rev;
		int want = (rev == 1 || rev == 2) ? -EAGAIN : -IW_E_MPA_REV;
		CHECK_EQ(decode_exact(b, 18, IW_MPA_REQ, &d), want);
	}
	b[17] = 1;
	/* PD_Length above 512 refused before the private data arrives; 512 accepted. */
	b[18] = 0x02;
	b[19] = 0x01;
	CHECK_EQ(decode_exact(b, 20, IW_MPA_REQ, &d), -IW_E_MPA_PD_LEN);
	b[18] = 0xff;
	b[19] = 0xff;
	CHECK_EQ(decode_exact(b, 20, IW_MPA_REQ, &d), -IW_E_MPA_PD_LEN);
	b[18] = 0x02;
	b[19] = 0x00;
	CHECK_EQ(decode_exact(b, 20, IW_MPA_REQ, &d), -EAGAIN);
	memset(b + 20, 'x', 512);
	CHECK_EQ(decode_exact(b, 532, IW_MPA_REQ, &d), 532);
	CHECK_EQ(d.pd_len, 512);
	/* Bytes after the frame are not part of it. */
	CHECK_EQ(decode_exact(b, 532 + 8, IW_MPA_REQ, &d), 532);

	/* Rev 2 + Enhanced needs PD_Length >= 4 (siw rejects); Rev 1 + Enhanced: no block. */
	n = unhex("4d504120494420526571204672616d65 10 02 0003 000000", b, sizeof(b));
	CHECK_EQ(decode_exact(b, n, IW_MPA_REQ, &d), -IW_E_MPA_V2);
	b[17] = 1;
	CHECK_EQ(decode_exact(b, n, IW_MPA_REQ, &d), (int)n);
	CHECK(d.enhanced && !iw_mpa_has_v2(&d) && d.pd_len == 3);

	/* Markers: a specific error, with the frame decoded so a reject can be sent. */
	n = unhex("4d504120494420526571204672616d65 d0 02 0004 8004 4002", b, sizeof(b));
	CHECK_EQ(decode_exact(b, n, IW_MPA_REQ, &d), -IW_E_MPA_MARKERS);
	CHECK(d.m && d.c && iw_mpa_has_v2(&d) && d.v2.p2p && d.v2.ird == 4 && d.v2.rtr_read);
	CHECK_EQ(decode_exact(b, n - 1, IW_MPA_REQ, &d), -EAGAIN);

	/* Every flag bit and reserved bit round-trips. */
	for (int fl = 0; fl < 256; fl++) {
		uint8_t out[64];

		n = unhex(rev2_req, b, sizeof(b));
		b[16] = (uint8_t)fl;
		int r = decode_exact(b, n, IW_MPA_ANY, &d);
		if (fl & IW_MPA_F_M) {
			CHECK_EQ(r, -IW_E_MPA_MARKERS);
		} else {
			CHECK_EQ(r, (int)n);
		}
		if (r > 0 || r == -IW_E_MPA_MARKERS) {
			int e = iw_mpa_encode(&d, out, sizeof(out));
			if (d.r && d.kind == IW_MPA_REQ) {
				CHECK_EQ(e, -EINVAL); /* R is a Reply flag */
			} else {
				CHECK_EQ(e, (int)n);
				CHECK_MEM(out, b, n);
			}
		}
	}
}

static void test_encode_errors(void)
{
	uint8_t out[IW_MPA_FRAME_MAX + 4], pd[600];
	struct iw_mpa f;

	memset(pd, 'p', sizeof(pd));
	iw_mpa_req_init(&f, true, 1, 1, pd, 508);
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), 532);
	f.pd_len = 509;
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), -EMSGSIZE);
	f.pd_len = 8;
	CHECK_EQ(iw_mpa_encode(&f, out, 31), -ENOSPC);
	CHECK_EQ(iw_mpa_encode(&f, out, 32), 32);
	f.v2.ird = 0x4000;
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), -EINVAL);
	f.v2.ird = 0x3fff;
	f.rev = 3;
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), -EINVAL);
	f.rev = 2;
	f.r = true;
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), -EINVAL);
	f.r = false;
	f.kind = 7;
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), -EINVAL);
	f.kind = IW_MPA_REQ;
	f.pd = NULL;
	CHECK_EQ(iw_mpa_encode(&f, out, sizeof(out)), -EINVAL);
	struct iw_mpa d;
	CHECK_EQ(iw_mpa_decode(out, 4, 9, &d), -EINVAL);
}

/* siw's responder and initiator rules (iwarp.md 2.3). */
static void test_negotiation(void)
{
	uint8_t buf[128];
	struct iw_mpa req, rep, d;
	int n;

	/* Default: the reply echoes Rev 2 + Enhanced, C as requested, carries our IRD/ORD. */
	iw_mpa_req_init(&req, false, 16, 8, NULL, 0);
	CHECK_EQ(iw_mpa_reply_init(&rep, &req, false, 8, 16, (const uint8_t *)"srv", 3), 0);
	CHECK(rep.kind == IW_MPA_REP && rep.rev == 2 && rep.enhanced && !rep.c && !rep.r);
	CHECK(rep.v2.ird == 8 && rep.v2.ord == 16 && !rep.v2.p2p);
	n = iw_mpa_encode(&rep, buf, sizeof(buf));
	CHECK_EQ(n, 20 + 4 + 3);
	CHECK_EQ(decode_exact(buf, (size_t)n, IW_MPA_REP, &d), n);
	CHECK_EQ(iw_mpa_check_reply(&req, &d), 0);
	/* C: "CRC MUST be used if the peer asks" — and when we require it. */
	iw_mpa_req_init(&req, true, 1, 1, NULL, 0);
	iw_mpa_reply_init(&rep, &req, false, 1, 1, NULL, 0);
	CHECK(rep.c);
	iw_mpa_req_init(&req, false, 1, 1, NULL, 0);
	iw_mpa_reply_init(&rep, &req, true, 1, 1, NULL, 0);
	CHECK(rep.c);
	/* A Rev 1 request gets a Rev 1 reply without a block. */
	memset(&req, 0, sizeof(req));
	req.kind = IW_MPA_REQ;
	req.rev = 1;
	iw_mpa_reply_init(&rep, &req, false, 5, 5, NULL, 0);
	CHECK(rep.rev == 1 && !iw_mpa_has_v2(&rep));
	CHECK_EQ(iw_mpa_encode(&rep, buf, sizeof(buf)), 20);
	CHECK_EQ(iw_mpa_check_reply(&req, &rep), 0);

	/* P2P: exactly one RTR type, Write preferred, else Read, else Write. */
	static const struct {
		bool w, r, want_w, want_r;
	} p2p[] = {
	    {true, true, true, false},
	    {true, false, true, false},
	    {false, true, false, true},
	    {false, false, true, false},
	};
	for (size_t i = 0; i < sizeof(p2p) / sizeof(p2p[0]); i++) {
		iw_mpa_req_init(&req, false, 4, 4, NULL, 0);
		req.v2.p2p = true;
		req.v2.rtr_write = p2p[i].w;
		req.v2.rtr_read = p2p[i].r;
		CHECK_EQ(iw_mpa_reply_init(&rep, &req, false, 4, 4, NULL, 0), 0);
		CHECK(rep.v2.p2p);
		CHECK_EQ(rep.v2.rtr_write, p2p[i].want_w);
		CHECK_EQ(rep.v2.rtr_read, p2p[i].want_r);
		CHECK_EQ(iw_mpa_check_reply(&req, &rep), 0);
		/* a reply picking an RTR type that was not offered */
		if (p2p[i].w != p2p[i].r) {
			rep.v2.rtr_write = !p2p[i].w;
			rep.v2.rtr_read = !p2p[i].r;
			CHECK_EQ(iw_mpa_check_reply(&req, &rep), -IW_E_MPA_RTR);
		}
	}

	/* Markers requested: no reply, a reject with R set and M cleared. */
	iw_mpa_req_init(&req, true, 3, 3, NULL, 0);
	req.m = true;
	CHECK_EQ(iw_mpa_reply_init(&rep, &req, false, 1, 1, NULL, 0), -IW_E_MPA_MARKERS);
	iw_mpa_reject_init(&rep, &req, NULL, 0);
	CHECK(rep.r && !rep.m && rep.c && rep.rev == 2 && rep.enhanced);
	CHECK(rep.v2.ird == 0 && rep.v2.ord == 0);
	n = iw_mpa_encode(&rep, buf, sizeof(buf));
	CHECK_EQ(n, 24);
	CHECK_EQ(buf[16], IW_MPA_F_C | IW_MPA_F_R | IW_MPA_F_ENH);
	CHECK_EQ(decode_exact(buf, (size_t)n, IW_MPA_REP, &d), n);
	CHECK_EQ(iw_mpa_check_reply(&req, &d), -ECONNREFUSED);
	/* ULP reject with private data. */
	iw_mpa_req_init(&req, false, 3, 3, NULL, 0);
	iw_mpa_reject_init(&rep, &req, (const uint8_t *)"busy", 4);
	CHECK_EQ(iw_mpa_encode(&rep, buf, sizeof(buf)), 28);
	CHECK_MEM(buf + 24, "busy", 4);

	/* Initiator refusals. */
	iw_mpa_req_init(&req, false, 3, 3, NULL, 0);
	iw_mpa_reply_init(&rep, &req, false, 3, 3, NULL, 0);
	rep.m = true;
	CHECK_EQ(iw_mpa_check_reply(&req, &rep), -IW_E_MPA_MARKERS);
	rep.m = false;
	rep.enhanced = false;
	CHECK_EQ(iw_mpa_check_reply(&req, &rep), -IW_E_MPA_V2);
	rep.enhanced = true;
	rep.rev = 1;
	CHECK_EQ(iw_mpa_check_reply(&req, &rep), -IW_E_MPA_V2);
	rep.rev = 2;
	rep.kind = IW_MPA_REQ;
	CHECK_EQ(iw_mpa_check_reply(&req, &rep), -IW_E_MPA_KEY);
}

int main(void)
{
	test_vectors();
	test_garbage();
	test_encode_errors();
	test_negotiation();
	return check_exit();
}
