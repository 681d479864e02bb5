/* iWARP header codec, FPDU framing, Terminate, error table and the MSS-sized FPDU builder
 * (src/wire/iwarp). Byte layouts are checked against the validated examples of
 * ../shared/spec/iwarp.md (sections 4.2, 4.4, 6.5) and siw's segmentation rules. */
#include <errno.h>

#include "check.h"
#include "util/crc.h"
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
	REQUIRE(hi < 0);
	return n;
}

/* iwarp.md 6.5 (validated with tshark: "Good CRC32"). */
static const char *vec_write = "001b c140 00001234 00007f0000001000 48656c6c6f2c20695741525021"
			       " 000000 c49234ca";
static const char *vec_send = "0022 4143 00000000 00000000 00000001 00000000"
			      " 73656e642d7061796c6f61642d313621 448d5700";
static const char *vec_term = "002a 4147 00000000 00000002 00000001 00000000 1201c000"
			      " 0010 4143 00000000 00000005 00000007 00000000 e63f5369";

static void test_opcode_table(void)
{
	static const struct {
		uint8_t op;
		bool tagged;
		uint8_t qn, hdr_len;
		bool payload, single;
		const char *name;
	} want[] = {
	    {IW_OP_WRITE, true, 0, 14, true, false, "Write"},
	    {IW_OP_READ_REQ, false, 1, 46, false, true, "Read Request"},
	    {IW_OP_READ_RESP, true, 0, 14, true, false, "Read Response"},
	    {IW_OP_SEND, false, 0, 18, true, false, "Send"},
	    {IW_OP_SEND_INV, false, 0, 18, true, false, "Send with Invalidate"},
	    {IW_OP_SEND_SE, false, 0, 18, true, false, "Send with SE"},
	    {IW_OP_SEND_SE_INV, false, 0, 18, true, false, "Send with SE and Invalidate"},
	    {IW_OP_TERMINATE, false, 2, 22, false, true, "Terminate"},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct iw_opinfo *oi = iw_opinfo(want[i].op);

		REQUIRE(oi);
		CHECK_EQ(oi->opcode, want[i].op);
		CHECK_EQ(oi->tagged, want[i].tagged);
		CHECK_EQ(oi->qn, want[i].qn);
		CHECK_EQ(oi->hdr_len, want[i].hdr_len);
		CHECK_EQ(oi->payload, want[i].payload);
		CHECK_EQ(oi->single, want[i].single);
		CHECK(strcmp(oi->name, want[i].name) == 0);
		CHECK_EQ(oi->inval,
			 want[i].op == IW_OP_SEND_INV || want[i].op == IW_OP_SEND_SE_INV);
		CHECK_EQ(oi->solicited,
			 want[i].op == IW_OP_SEND_SE || want[i].op == IW_OP_SEND_SE_INV);
	}
	for (int op = 8; op < 256; op++)
		CHECK(iw_opinfo((uint8_t)op) == NULL);
	/* siw's iwarp_pktinfo[].hdr_len counts ULPDU_LENGTH: 16 / 48 / 20 / 24. */
	CHECK_EQ(iw_opinfo(IW_OP_WRITE)->hdr_len + 2, 16);
	CHECK_EQ(iw_opinfo(IW_OP_READ_REQ)->hdr_len + 2, 48);
	CHECK_EQ(iw_opinfo(IW_OP_SEND)->hdr_len + 2, 20);
	CHECK_EQ(iw_opinfo(IW_OP_TERMINATE)->hdr_len + 2, 24);
}

static void test_framing(void)
{
	/* iwarp.md 4.1: pad = (-(ULPDU_LENGTH + 2)) & 3; FPDU = 2 + L + pad + 4. */
	CHECK_EQ(iw_fpdu_pad(27), 3);
	CHECK_EQ(iw_fpdu_pad(34), 0);
	CHECK_EQ(iw_fpdu_pad(20), 2);
	CHECK_EQ(iw_fpdu_pad(46), 0);
	CHECK_EQ(iw_fpdu_pad(1442), 0);
	CHECK_EQ(iw_fpdu_len(46), 52);
	CHECK_EQ(iw_fpdu_len(27), 36);
	CHECK_EQ(iw_fpdu_len(65535), 65544);
	CHECK_EQ(iw_fpdu_len(65535), IW_FPDU_MAX);
	for (uint32_t l = 0; l < 64; l++)
		CHECK_EQ(iw_fpdu_len(l) % 4, 0);

	/* Trailer: pad then CRC LSB first; CRC off -> zeros. */
	uint8_t t[8], body[2] = {0, 1};
	uint32_t c = crc32c(0, body, 2);
	CHECK_EQ(iw_fpdu_trailer(t, 1, c, true, NULL), 5);
	CHECK_EQ(t[0], 0);
	uint8_t z = 0;
	uint32_t full = crc32c(c, &z, 1);
	CHECK_EQ(t[1], full & 0xff);
	CHECK_EQ(t[4], full >> 24);
	memset(t, 0xee, sizeof(t));
	CHECK_EQ(iw_fpdu_trailer(t, 2, c, false, NULL), 4);
	CHECK(t[0] == 0 && t[1] == 0 && t[2] == 0 && t[3] == 0 && t[4] == 0xee);
	/* CRC32c check value (iwarp.md 4.2). */
	CHECK_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
}

static void test_vectors(void)
{
	uint8_t want[128], got[128];
	size_t n;
	struct iw_fpdu f;
	int r;

	/* RDMA Write of "Hello, iWARP!" to STag 0x1234 / TO 0x7F0000001000, CRC on. */
	n = unhex(vec_write, want, sizeof(want));
	memset(&f, 0, sizeof(f));
	REQUIRE(iw_hdr_init(&f.hdr, IW_OP_WRITE) == 0);
	f.hdr.stag = 0x1234;
	f.hdr.to = 0x7F0000001000ull;
	f.payload = (const uint8_t *)"Hello, iWARP!";
	f.payload_len = 13;
	r = iw_fpdu_encode(&f, true, got, sizeof(got));
	CHECK_EQ(r, (int)n);
	CHECK_MEM(got, want, n);
	CHECK_EQ(got[n - 4], 0xc4); /* 0xCA3492C4, little-endian */

	struct iw_fpdu d;
	r = iw_fpdu_decode(want, n, true, 0, &d);
	CHECK_EQ(r, (int)n);
	CHECK_EQ(d.hdr.opcode, IW_OP_WRITE);
	CHECK(d.hdr.tagged && d.hdr.last);
	CHECK_EQ(d.hdr.stag, 0x1234);
	CHECK_EQ(d.hdr.to, 0x7F0000001000ull);
	CHECK_EQ(d.ulpdu_len, 27);
	CHECK_EQ(d.payload_len, 13);
	CHECK(d.payload == want + 16);
	CHECK_EQ(d.pad_len, 3);
	CHECK_EQ(d.crc, 0xCA3492C4u);

	/* Send, 16 bytes, MSN 1. */
	n = unhex(vec_send, want, sizeof(want));
	memset(&f, 0, sizeof(f));
	iw_hdr_init(&f.hdr, IW_OP_SEND);
	f.hdr.msn = 1;
	f.payload = (const uint8_t *)"send-payload-16!";
	f.payload_len = 16;
	r = iw_fpdu_encode(&f, true, got, sizeof(got));
	CHECK_EQ(r, (int)n);
	CHECK_MEM(got, want, n);
	r = iw_fpdu_decode(want, n, true, 0, &d);
	CHECK_EQ(r, (int)n);
	CHECK_EQ(d.hdr.qn, 0);
	CHECK_EQ(d.hdr.msn, 1);
	CHECK_EQ(d.hdr.mo, 0);
	CHECK_EQ(d.crc, 0x00578D44u);

	/* Terminate: DDP / untagged / invalid QN, M+D, offending Send to QN 5 MSN 7, 16 bytes. */
	n = unhex(vec_term, want, sizeof(want));
	struct iw_term t;
	memset(&t, 0, sizeof(t));
	t.layer = IW_LAYER_DDP;
	t.etype = IW_ETYPE_DDP_UNTAGGED;
	t.ecode = 1;
	t.m = t.d = true;
	t.ddp_seg_len = 16;
	t.ddp_hdr_len = 18;
	unhex("4143 00000000 00000005 00000007 00000000", t.ddp_hdr, sizeof(t.ddp_hdr));
	r = iw_term_build(&t, 1, true, got, sizeof(got));
	CHECK_EQ(r, (int)n);
	CHECK_MEM(got, want, n);
	r = iw_fpdu_decode(want, n, true, 0, &d);
	CHECK_EQ(r, (int)n);
	CHECK_EQ(d.hdr.opcode, IW_OP_TERMINATE);
	CHECK_EQ(d.hdr.qn, 2);
	CHECK_EQ(d.hdr.msn, 1);
	CHECK_EQ(d.hdr.term.layer, 1);
	CHECK_EQ(d.hdr.term.etype, 2);
	CHECK_EQ(d.hdr.term.ecode, 1);
	CHECK(d.hdr.term.m && d.hdr.term.d && !d.hdr.term.r);
	CHECK_EQ(d.hdr.term.ddp_seg_len, 16);
	CHECK_EQ(d.hdr.term.ddp_hdr_len, 18);
	CHECK_MEM(d.hdr.term.ddp_hdr, t.ddp_hdr, 18);
	CHECK_EQ(d.payload_len, 0);
	/* The terminated header decodes as the offending Send. */
	uint8_t ulpdu[2 + 18];
	ulpdu[0] = 0;
	ulpdu[1] = 18;
	memcpy(ulpdu + 2, d.hdr.term.ddp_hdr, 18);
	struct iw_rx rx;
	struct iw_rx_ev ev;
	size_t used;
	iw_rx_init(&rx, false, 0);
	CHECK_EQ(iw_rx_step(&rx, ulpdu, sizeof(ulpdu), &used, &ev), -IW_E_QN);

	/* Same FPDUs without CRC: identical except the CRC field is zero. */
	memset(&f, 0, sizeof(f));
	iw_hdr_init(&f.hdr, IW_OP_WRITE);
	f.hdr.stag = 0x1234;
	f.hdr.to = 0x7F0000001000ull;
	f.payload = (const uint8_t *)"Hello, iWARP!";
	f.payload_len = 13;
	n = unhex(vec_write, want, sizeof(want));
	memset(want + n - 4, 0, 4);
	r = iw_fpdu_encode(&f, false, got, sizeof(got));
	CHECK_EQ(r, (int)n);
	CHECK_MEM(got, want, n);
}

static bool term_eq(const struct iw_term *a, const struct iw_term *b)
{
	return a->layer == b->layer && a->etype == b->etype && a->ecode == b->ecode &&
	       a->m == b->m && a->d == b->d && a->r == b->r && a->rsvd == b->rsvd &&
	       a->ddp_seg_len == b->ddp_seg_len && a->ddp_hdr_len == b->ddp_hdr_len &&
	       !memcmp(a->ddp_hdr, b->ddp_hdr, a->ddp_hdr_len) &&
	       a->rdmap_hdr_len == b->rdmap_hdr_len &&
	       !memcmp(a->rdmap_hdr, b->rdmap_hdr, a->rdmap_hdr_len);
}

static bool hdr_eq(const struct iw_hdr *a, const struct iw_hdr *b)
{
	return a->opcode == b->opcode && a->tagged == b->tagged && a->last == b->last &&
	       a->dv == b->dv && a->rv == b->rv && a->ddp_rsvd == b->ddp_rsvd &&
	       a->rdmap_rsvd == b->rdmap_rsvd && a->stag == b->stag && a->to == b->to &&
	       a->rsvdulp == b->rsvdulp && a->qn == b->qn && a->msn == b->msn && a->mo == b->mo &&
	       a->rreq.sink_stag == b->rreq.sink_stag && a->rreq.sink_to == b->rreq.sink_to &&
	       a->rreq.size == b->rreq.size && a->rreq.src_stag == b->rreq.src_stag &&
	       a->rreq.src_to == b->rreq.src_to && term_eq(&a->term, &b->term);
}

/* Every opcode: header built from fields, encoded, decoded back, byte for byte. */
static void test_hdr_roundtrip(void)
{
	uint8_t buf[256], buf2[256], payload[40];

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 1);
	for (uint8_t op = 0; op < IW_OP__COUNT; op++) {
		const struct iw_opinfo *oi = iw_opinfo(op);

		for (uint32_t plen = 0; plen <= (oi->payload ? 9u : 0u); plen++) {
			struct iw_fpdu f, d;
			int n, m;

			memset(&f, 0, sizeof(f));
			CHECK_EQ(iw_hdr_init(&f.hdr, op), 0);
			f.hdr.last = oi->single || (plen & 1);
			f.hdr.stag = 0x11223344u + op;
			f.hdr.to = 0x0102030405060708ull * (op + 1);
			f.hdr.msn = 0xfffffff0u + plen;
			f.hdr.mo = oi->single ? 0 : 1000 * plen;
			if (oi->inval)
				f.hdr.rsvdulp = 0xabcdef01u;
			f.hdr.rreq = (struct iw_rreq){0x5678, 0x7F0000002000ull, 64, 0x1234,
						      0x7F0000001000ull};
			if (op == IW_OP_TERMINATE) {
				f.hdr.term.layer = 0;
				f.hdr.term.etype = 1;
				f.hdr.term.ecode = 2;
			}
			if (!oi->tagged) {
				f.hdr.stag = 0;
				f.hdr.to = 0;
			} else {
				f.hdr.msn = 0;
				f.hdr.mo = 0;
				f.hdr.qn = 0;
			}
			if (op != IW_OP_READ_REQ)
				memset(&f.hdr.rreq, 0, sizeof(f.hdr.rreq));
			f.payload = payload;
			f.payload_len = plen;
			for (bool crc = false;; crc = true) {
				n = iw_fpdu_encode(&f, crc, buf, sizeof(buf));
				CHECK_EQ(n, (int)iw_fpdu_len(oi->hdr_len + plen));
				m = iw_fpdu_decode(buf, (size_t)n, crc, 0, &d);
				CHECK_EQ(m, n);
				CHECK(hdr_eq(&d.hdr, &f.hdr));
				CHECK_EQ(d.payload_len, plen);
				CHECK(plen == 0 || memcmp(d.payload, payload, plen) == 0);
				d.pad[0] = d.pad[1] = d.pad[2] = 0;
				CHECK_EQ(iw_fpdu_encode(&d, crc, buf2, sizeof(buf2)), n);
				CHECK_MEM(buf2, buf, (size_t)n);
				/* Every shorter prefix: need more bytes, never an error. */
				for (int k = 0; k < n; k++)
					CHECK_EQ(iw_fpdu_decode(buf, (size_t)k, crc, 0, &d),
						 -EAGAIN);
				if (crc)
					break;
			}
		}
	}
	/* Encoder refusals. */
	struct iw_hdr h;
	iw_hdr_init(&h, IW_OP_READ_REQ);
	CHECK_EQ(iw_hdr_encode(&h, 1, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(iw_hdr_encode(&h, 0, buf, 47), -ENOSPC);
	CHECK_EQ(iw_hdr_encode(&h, 0, buf, 48), 48);
	iw_hdr_init(&h, IW_OP_SEND);
	CHECK_EQ(iw_hdr_encode(&h, 65535 - 18, buf, sizeof(buf)), 20);
	CHECK_EQ(iw_hdr_encode(&h, 65535 - 17, buf, sizeof(buf)), -EMSGSIZE);
	h.tagged = true;
	CHECK_EQ(iw_hdr_encode(&h, 0, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(iw_hdr_len(&h), 0);
	h.opcode = 8;
	CHECK_EQ(iw_hdr_encode(&h, 0, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(iw_hdr_init(&h, 8), -EINVAL);
	/* Send with Invalidate carries the STag in RsvdULP. */
	iw_hdr_init(&h, IW_OP_SEND_SE_INV);
	h.rsvdulp = 0xdeadbeef;
	CHECK_EQ(iw_hdr_encode(&h, 0, buf, sizeof(buf)), 20);
	CHECK_EQ(buf[3], 0x46); /* RV 1, opcode 6 */
	CHECK(buf[4] == 0xde && buf[7] == 0xef);
}

static void test_terminate(void)
{
	uint8_t buf[128];
	struct iw_fpdu d;
	struct iw_term t;
	int n;

	/* Nothing attached (LLP CRC error): ULPDU 22, siw "0 0 0". */
	memset(&t, 0, sizeof(t));
	t.layer = IW_LAYER_LLP;
	t.ecode = 2;
	n = iw_term_build(&t, 1, false, buf, sizeof(buf));
	CHECK_EQ(n, 2 + 22 + 0 + 4);
	CHECK_EQ(buf[1], 22);
	CHECK_EQ(buf[20], 0x20); /* layer 2, etype 0 */
	CHECK_EQ(buf[21], 0x02);
	CHECK_EQ(iw_fpdu_decode(buf, (size_t)n, false, 0, &d), n);
	CHECK(!d.hdr.term.m && !d.hdr.term.d && !d.hdr.term.r);

	/* M+D with a tagged header (14) and M+D+R with a Read Request (18 + 28). */
	memset(&t, 0, sizeof(t));
	t.layer = IW_LAYER_DDP;
	t.etype = IW_ETYPE_DDP_TAGGED;
	t.m = t.d = true;
	t.ddp_seg_len = 1428;
	t.ddp_hdr_len = 14;
	t.ddp_hdr[0] = 0x81;
	t.ddp_hdr[1] = 0x40;
	n = iw_term_build(&t, 1, true, buf, sizeof(buf));
	CHECK_EQ(n, 2 + 22 + 2 + 14 + 4);
	CHECK_EQ(iw_fpdu_decode(buf, (size_t)n, true, 0, &d), n);
	CHECK_EQ(d.hdr.term.ddp_hdr_len, 14);
	CHECK_EQ(d.hdr.term.ddp_seg_len, 1428);

	memset(&t, 0, sizeof(t));
	t.layer = IW_LAYER_RDMAP;
	t.etype = IW_ETYPE_RDMAP_PROTECTION;
	t.m = t.d = t.r = true;
	t.ddp_hdr_len = 18;
	t.ddp_hdr[0] = 0x41;
	t.ddp_hdr[1] = 0x41;
	t.rdmap_hdr_len = 28;
	for (int i = 0; i < 28; i++)
		t.rdmap_hdr[i] = (uint8_t)i;
	n = iw_term_build(&t, 1, false, buf, sizeof(buf));
	CHECK_EQ(n, 2 + IW_TERM_ULPDU_MAX + 0 + 4);
	CHECK_EQ(iw_fpdu_decode(buf, (size_t)n, false, 0, &d), n);
	CHECK(d.hdr.term.r);
	CHECK_EQ(d.hdr.term.rdmap_hdr_len, 28);
	CHECK_MEM(d.hdr.term.rdmap_hdr, t.rdmap_hdr, 28);

	/* siw quirk: R set for a Send, only the 18-byte DDP header attached. */
	t.rdmap_hdr_len = 0;
	n = iw_term_build(&t, 1, false, buf, sizeof(buf));
	CHECK_EQ(n, 2 + 22 + 20 + 0 + 4);
	CHECK_EQ(iw_fpdu_decode(buf, (size_t)n, false, 0, &d), n);
	CHECK(d.hdr.term.r);
	CHECK_EQ(d.hdr.term.rdmap_hdr_len, 0);

	/* Inconsistent parts are not encodable. */
	t.ddp_hdr_len = 14; /* but T bit clear */
	CHECK_EQ(iw_term_build(&t, 1, false, buf, sizeof(buf)), -EINVAL);
	t.ddp_hdr_len = 18;
	t.r = false;
	t.rdmap_hdr_len = 28;
	CHECK_EQ(iw_term_build(&t, 1, false, buf, sizeof(buf)), -EINVAL);
	t.d = false;
	t.r = true;
	CHECK_EQ(iw_term_build(&t, 1, false, buf, sizeof(buf)), -EINVAL); /* ddp_hdr_len w/o D */

	/* Malformed Terminates on the wire: D with too few bytes, leftovers, short of 22. */
	static const struct {
		uint16_t ulpdu;
		uint8_t ctrl_byte2; /* M/D/R byte of the Terminate Control */
		int err;
	} bad[] = {
	    {22 + 2, 0xc0, -IW_E_TERM_FMT},	  /* D but only the segment length */
	    {22 + 2 + 17, 0xc0, -IW_E_TERM_FMT},  /* untagged header one byte short */
	    {22 + 4, 0x00, -IW_E_TERM_FMT},	  /* bytes without D or R */
	    {22 + 20 + 27, 0xe0, -IW_E_TERM_FMT}, /* R header one byte short */
	    {21, 0x00, -IW_E_ULPDU_LEN},	  {IW_TERM_ULPDU_MAX + 1, 0xe0, -IW_E_ULPDU_LEN},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t fp[128];
		struct iw_hdr h;

		memset(fp, 0, sizeof(fp));
		iw_hdr_init(&h, IW_OP_TERMINATE);
		h.msn = 1;
		REQUIRE(iw_hdr_encode(&h, 0, fp, sizeof(fp)) == 24);
		fp[0] = (uint8_t)(bad[i].ulpdu >> 8);
		fp[1] = (uint8_t)bad[i].ulpdu;
		fp[22] = bad[i].ctrl_byte2;
		fp[24] = 0x41; /* a terminated untagged header, if any */
		CHECK_EQ(iw_fpdu_decode(fp, iw_fpdu_len(bad[i].ulpdu), false, 0, &d), bad[i].err);
	}
}

static void test_errors(void)
{
	struct iw_term_code c;
	int count = 0;

	/* Names are unique and every code maps to a Terminate. */
	for (int e = IW_E__FIRST; e < IW_E__END; e++) {
		CHECK(iw_is_err(e) && iw_is_err(-e));
		CHECK(strcmp(iw_err_name(-e), "?") != 0);
		CHECK_EQ(iw_err_term(-e, &c), 0);
		CHECK(c.layer <= IW_LAYER_LLP);
		for (int f = IW_E__FIRST; f < e; f++)
			CHECK(strcmp(iw_err_name(e), iw_err_name(f)) != 0);
		count++;
	}
	CHECK(count >= 30);
	CHECK(!iw_is_err(-EINVAL) && !iw_is_err(0) && !iw_is_err(IW_E__END));
	CHECK_EQ(iw_err_term(-EINVAL, &c), -EINVAL);
	CHECK(strcmp(iw_err_name(-EAGAIN), "EAGAIN") == 0);
	CHECK(strcmp(iw_err_name(-IW_E_CRC), "CRC") == 0);
	CHECK(strcmp(iw_err_name(0), "OK") == 0);

	/* The siw table (iwarp.md 5, 6.3): layer / etype / ecode / attached headers. */
	static const struct {
		int err;
		uint8_t layer, etype, ecode, hdrct;
	} want[] = {
	    {IW_E_CRC, 2, 0, 2, 0},
	    {IW_E_DDP_VERSION_T, 1, 1, 4, 0},
	    {IW_E_DDP_VERSION_U, 1, 2, 6, 0},
	    {IW_E_RDMAP_VERSION, 0, 2, 5, 0},
	    {IW_E_OPCODE, 0, 2, 6, 0},
	    {IW_E_QN, 1, 2, 1, IW_TERM_M | IW_TERM_D},
	    {IW_E_MO, 1, 2, 4, IW_TERM_M | IW_TERM_D},
	    {IW_E_U_MSN_RANGE, 1, 2, 3, IW_TERM_M | IW_TERM_D},
	    {IW_E_U_NO_BUF, 1, 2, 2, IW_TERM_M | IW_TERM_D},
	    {IW_E_T_STAG, 1, 1, 0, IW_TERM_M | IW_TERM_D},
	    {IW_E_T_BOUNDS, 1, 1, 1, IW_TERM_M | IW_TERM_D},
	    {IW_E_T_NOT_ASSOC, 1, 1, 2, IW_TERM_M | IW_TERM_D},
	    {IW_E_RP_ACCESS, 0, 1, 2, IW_TERM_M | IW_TERM_D | IW_TERM_R},
	    {IW_E_RO_STREAM, 0, 2, 7, IW_TERM_M | IW_TERM_D},
	    {IW_E_MPA_KEY, 2, 0, 4, 0},
	    {IW_E_MPA_IRD, 2, 0, 6, 0},
	    {IW_E_MPA_RTR, 2, 0, 7, 0},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_EQ(iw_err_term(-want[i].err, &c), 0);
		CHECK_EQ(c.layer, want[i].layer);
		CHECK_EQ(c.etype, want[i].etype);
		CHECK_EQ(c.ecode, want[i].ecode);
		CHECK_EQ(c.hdrct, want[i].hdrct);
	}
}

/* iw_term_from_err on the offending headers, as siw builds its Terminate. */
static void test_term_from_err(void)
{
	uint8_t raw[80], fp[128], want[128];
	struct iw_hdr h;
	struct iw_term t;
	size_t n;

	/* The vector: a Send of 16 bytes to QN 5 -> DDP untagged invalid QN, M+D, seg len 16. */
	iw_hdr_init(&h, IW_OP_SEND);
	h.qn = 5;
	h.msn = 7;
	REQUIRE(iw_hdr_encode(&h, 16, raw, sizeof(raw)) == 20);
	CHECK_EQ(iw_term_from_err(-IW_E_QN, raw, 20, &t), 0);
	CHECK(t.m && t.d && !t.r);
	CHECK_EQ(t.ddp_seg_len, 16);
	n = unhex(vec_term, want, sizeof(want));
	CHECK_EQ(iw_term_build(&t, 1, true, fp, sizeof(fp)), (int)n);
	CHECK_MEM(fp, want, n);

	/* Version / opcode errors: nothing attached, even with the header at hand. */
	CHECK_EQ(iw_term_from_err(-IW_E_OPCODE, raw, 20, &t), 0);
	CHECK(!t.m && !t.d && !t.r && t.ddp_hdr_len == 0);
	CHECK_EQ(t.layer, 0);
	CHECK_EQ(t.ecode, 6);

	/* Tagged: 14-byte header, segment length = ULPDU - 14. */
	iw_hdr_init(&h, IW_OP_WRITE);
	h.stag = 0xabc;
	REQUIRE(iw_hdr_encode(&h, 100, raw, sizeof(raw)) == 16);
	CHECK_EQ(iw_term_from_err(-IW_E_T_BOUNDS, raw, 16, &t), 0);
	CHECK(t.d && t.m && t.ddp_hdr_len == 14 && t.ddp_seg_len == 100);
	CHECK_MEM(t.ddp_hdr, raw + 2, 14);

	/* Remote protection on a Read Request: the 28-byte RDMAP header too (siw: MDR). */
	iw_hdr_init(&h, IW_OP_READ_REQ);
	h.msn = 3;
	h.rreq = (struct iw_rreq){1, 2, 3, 4, 5};
	REQUIRE(iw_hdr_encode(&h, 0, raw, sizeof(raw)) == 48);
	CHECK_EQ(iw_term_from_err(-IW_E_RP_STAG, raw, 48, &t), 0);
	CHECK(t.m && t.d && t.r);
	CHECK_EQ(t.ddp_seg_len, 0);
	CHECK_EQ(t.rdmap_hdr_len, 28);
	CHECK_MEM(t.rdmap_hdr, raw + 20, 28);
	int len = iw_term_build(&t, 1, false, fp, sizeof(fp));
	CHECK_EQ(len, 2 + IW_TERM_ULPDU_MAX + 4);
	/* ... but only what is there: a header cut short attaches nothing. */
	CHECK_EQ(iw_term_from_err(-IW_E_RP_STAG, raw, 10, &t), 0);
	CHECK(!t.d && !t.r);
	CHECK_EQ(iw_term_from_err(-IW_E_RP_STAG, NULL, 0, &t), 0);
	CHECK(!t.d);
	CHECK_EQ(iw_term_from_err(-ENOSPC, raw, 48, &t), -EINVAL);
}

/* siw's segmentation (iwarp.md 4.4): tcp_seglen = MSS & ~7, FPDUs fill it exactly. */
static void test_mulpdu(void)
{
	bool last;

	CHECK_EQ(iw_mulpdu(1448), 1442);
	CHECK_EQ(iw_mulpdu(1460), 1450);
	CHECK_EQ(iw_mulpdu(1455), 1442);
	CHECK_EQ(iw_mulpdu(65483), 65474); /* loopback */
	CHECK_EQ(iw_mulpdu(1u << 20), 65530);
	CHECK_EQ(iw_mulpdu(79), 0);
	CHECK_EQ(iw_mulpdu(80), 74);
	for (uint32_t mss = 80; mss < 9000; mss += 13)
		CHECK_EQ(iw_fpdu_len(iw_mulpdu(mss)), mss & ~7u); /* no pad, fills the segment */

	/* Write of 10000 bytes at MSS 1448: 7 x 1428 + 4 (L on the last). */
	uint32_t rest = 10000, segs = 0;
	while (rest) {
		uint32_t n = iw_seg_payload(iw_mulpdu(1448), IW_OP_WRITE, rest, &last);
		CHECK_EQ(n, rest > 1428 ? 1428 : rest);
		CHECK_EQ(last, rest <= 1428);
		rest -= n;
		segs++;
	}
	CHECK_EQ(segs, 8);
	/* Send of 10000: 7 x 1424 + 32. MSS 1460: Write 6 x 1436 + 1384. */
	CHECK_EQ(iw_seg_payload(1442, IW_OP_SEND, 10000 - 7 * 1424, &last), 32);
	CHECK(last);
	CHECK_EQ(iw_seg_payload(1442, IW_OP_SEND, 10000, &last), 1424);
	CHECK(!last);
	CHECK_EQ(iw_seg_payload(iw_mulpdu(1460), IW_OP_WRITE, 10000 - 6 * 1436, &last), 1384);
	CHECK_EQ(iw_seg_payload(iw_mulpdu(1460), IW_OP_WRITE, 10000, &last), 1436);
	CHECK_EQ(iw_seg_payload(1442, IW_OP_WRITE, 0, &last), 0);
	CHECK(last);
	CHECK_EQ(iw_seg_payload(10, IW_OP_WRITE, 5, &last), 0);
	CHECK(!last);
	CHECK_EQ(iw_seg_payload(1442, 9, 5, &last), 0);
	CHECK(!last);
}

/* The builder against siw's capture shape (siw_write_bw_rdmacm_crc: 8192-byte Writes at MSS
 * 1448 = 5 x 1428 + 1052) and against the receiver. */
static void test_tx(void)
{
	static uint8_t msg[20000], out[70000], hdr[IW_FPDU_HDR_MAX], zc[70000];
	struct iw_tx tx, tx2;
	struct iw_hdr h;
	int n;

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(i * 31 + 7);
	for (int crc = 0; crc < 2; crc++) {
		for (uint8_t op = 0; op < IW_OP_TERMINATE; op++) {
			const struct iw_opinfo *oi = iw_opinfo(op);
			uint32_t lens[] = {0, 1, 3, 1428, 1429, 8192, 19999};

			for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
				uint32_t len = oi->payload ? lens[li] : 0, got = 0, fpdus = 0;
				struct iw_rx rx;
				size_t zlen = 0;

				iw_hdr_init(&h, op);
				h.stag = 0x9eeb0100;
				h.to = 0x55b1002b8000ull;
				h.msn = 42;
				h.mo = 0;
				REQUIRE(iw_tx_init(&tx, &h, len, iw_mulpdu(1448), crc) == 0);
				tx2 = tx;
				iw_rx_init(&rx, crc, 0);
				while ((n = iw_tx_next(&tx, msg, out, sizeof(out))) > 0) {
					size_t pos = 0, used;
					struct iw_rx_ev ev;
					uint32_t off, pl;
					int r, hl;

					CHECK(n <= 1448);
					fpdus++;
					/* the zero-copy path gives the same bytes */
					hl = iw_tx_next_hdr(&tx2, hdr, sizeof(hdr), &off, &pl);
					REQUIRE(hl > 0);
					memcpy(zc + zlen, hdr, (size_t)hl);
					memcpy(zc + zlen + hl, msg + off, pl);
					uint32_t c =
					    crc ? crc32c(crc32c(0, hdr, (size_t)hl), msg + off, pl)
						: 0;
					iw_fpdu_trailer(zc + zlen + hl + pl, (uint32_t)hl - 2 + pl,
							c, crc, NULL);
					CHECK_EQ(iw_fpdu_len((uint32_t)hl - 2 + pl), (size_t)n);
					CHECK_MEM(zc + zlen, out, (size_t)n);
					zlen += (size_t)n;
					while (pos < (size_t)n) {
						r = iw_rx_step(&rx, out + pos, (size_t)n - pos,
							       &used, &ev);
						REQUIRE(r >= 0);
						pos += used;
						if (r == IW_RX_HDR) {
							CHECK_EQ(ev.hdr->opcode, op);
							if (oi->tagged)
								CHECK_EQ(ev.hdr->to, h.to + got);
							else
								CHECK_EQ(ev.hdr->mo, got);
							CHECK_EQ(ev.hdr->msn, oi->tagged ? 0 : 42);
							CHECK_EQ(ev.hdr->last,
								 got + ev.payload_len == len);
						} else if (r == IW_RX_DATA) {
							CHECK_MEM(ev.data, msg + got, ev.len);
							got += ev.len;
						} else if (r == IW_RX_END && ev.hdr->last) {
							CHECK_EQ(got, len);
						}
					}
				}
				CHECK_EQ(n, 0);
				CHECK_EQ(got, len);
				CHECK(iw_rx_idle(&rx));
				CHECK_EQ(fpdus, len ? (len + 1427 - (oi->tagged ? 0 : 4)) /
							  (1428 - (oi->tagged ? 0 : 4))
						    : 1);
				CHECK_EQ(iw_tx_next(&tx, msg, out, sizeof(out)), 0);
				CHECK_EQ(iw_tx_next_hdr(&tx2, hdr, sizeof(hdr), &(uint32_t){0},
							&(uint32_t){0}),
					 0);
			}
		}
	}
	/* Refusals, and -ENOSPC leaves the builder where it was. */
	iw_hdr_init(&h, IW_OP_READ_REQ);
	CHECK_EQ(iw_tx_init(&tx, &h, 1, 1442, false), -EINVAL);
	CHECK_EQ(iw_tx_init(&tx, &h, 0, 45, false), -EINVAL);
	CHECK_EQ(iw_tx_init(&tx, &h, 0, 46, false), 0);
	iw_hdr_init(&h, IW_OP_WRITE);
	CHECK_EQ(iw_tx_init(&tx, &h, 1, 14, false), -EINVAL);
	REQUIRE(iw_tx_init(&tx, &h, 100, 1442, false) == 0);
	CHECK_EQ(iw_tx_next(&tx, msg, out, 100), -ENOSPC);
	CHECK_EQ(tx.sent, 0);
	CHECK_EQ(iw_tx_next(&tx, msg, out, 16 + 100 + 4), 16 + 100 + 4);
	CHECK(tx.done);
}

/* The one-FPDU header writers give iw_hdr_encode's bytes for the same fields (every Send
 * opcode, edge values, payload lengths up to the ULPDU limit) and refuse what they cannot
 * write, touching nothing. */
static void test_hdr_put_one(void)
{
	static const uint8_t sends[] = {IW_OP_SEND, IW_OP_SEND_INV, IW_OP_SEND_SE,
					IW_OP_SEND_SE_INV};
	static const uint32_t v32[] = {0, 1, 0x80000000u, 0xffffffffu, 0x12345678u};
	static const uint32_t lens[] = {0, 1, 100, 65535 - IW_DDP_UNTAGGED_HDR_LEN,
					65535 - IW_DDP_TAGGED_HDR_LEN};
	uint8_t a[64], b[64];

	for (unsigned o = 0; o < sizeof(sends); o++)
		for (unsigned i = 0; i < sizeof(v32) / sizeof(v32[0]); i++)
			for (unsigned l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
				struct iw_hdr h;
				uint32_t len = lens[l];
				bool fits = len <= 65535 - IW_DDP_UNTAGGED_HDR_LEN;

				REQUIRE(iw_hdr_init(&h, sends[o]) == 0);
				h.rsvdulp = v32[i];
				h.msn = v32[(i + 1) % 5];
				memset(a, 0xee, sizeof(a));
				memset(b, 0xee, sizeof(b));
				int ra = iw_hdr_encode(&h, len, a, sizeof(a));
				size_t rb =
				    iw_hdr_put_send(b, sizeof(b), sends[o], h.rsvdulp, h.msn, len);
				CHECK_EQ(ra, fits ? 2 + IW_DDP_UNTAGGED_HDR_LEN : -EMSGSIZE);
				CHECK_EQ(rb, fits ? (size_t)ra : 0);
				CHECK_MEM(a, b, sizeof(a));
			}
	for (unsigned i = 0; i < sizeof(v32) / sizeof(v32[0]); i++)
		for (unsigned l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			struct iw_hdr h;
			uint32_t len = lens[l];

			REQUIRE(iw_hdr_init(&h, IW_OP_WRITE) == 0);
			h.stag = v32[i];
			h.to = (uint64_t)v32[(i + 2) % 5] << 32 | v32[(i + 3) % 5];
			memset(a, 0xee, sizeof(a));
			memset(b, 0xee, sizeof(b));
			int ra = iw_hdr_encode(&h, len, a, sizeof(a));
			size_t rb = iw_hdr_put_write(b, sizeof(b), h.stag, h.to, len);
			CHECK_EQ(ra, 2 + IW_DDP_TAGGED_HDR_LEN);
			CHECK_EQ(rb, (size_t)ra);
			CHECK_MEM(a, b, sizeof(a));
		}
	/* Refused, nothing written: not a Send, a short buffer, a ULPDU too long. */
	memset(b, 0xee, sizeof(b));
	memset(a, 0xee, sizeof(a));
	CHECK_EQ(iw_hdr_put_send(b, sizeof(b), IW_OP_WRITE, 0, 1, 10), 0);
	CHECK_EQ(iw_hdr_put_send(b, sizeof(b), IW_OP_READ_REQ, 0, 1, 0), 0);
	CHECK_EQ(iw_hdr_put_send(b, 2 + IW_DDP_UNTAGGED_HDR_LEN - 1, IW_OP_SEND, 0, 1, 10), 0);
	CHECK_EQ(iw_hdr_put_write(b, 2 + IW_DDP_TAGGED_HDR_LEN - 1, 1, 0, 10), 0);
	CHECK_EQ(iw_hdr_put_write(b, sizeof(b), 1, 0, 65535 - IW_DDP_TAGGED_HDR_LEN + 1), 0);
	CHECK_MEM(a, b, sizeof(a));
	/* And what is written parses back as that message's one FPDU. */
	uint8_t f[64] = {0};
	struct iw_fpdu d;
	size_t n = iw_hdr_put_send(f, sizeof(f), IW_OP_SEND_SE_INV, 0xabcd, 7, 3);
	REQUIRE(n == 2 + IW_DDP_UNTAGGED_HDR_LEN);
	n += 3 + iw_fpdu_trailer(f + n, IW_DDP_UNTAGGED_HDR_LEN + 3, 0, false, NULL);
	CHECK_EQ(iw_fpdu_decode(f, n, false, 0, &d), (int)n);
	CHECK_EQ(d.hdr.opcode, IW_OP_SEND_SE_INV);
	CHECK(d.hdr.last);
	CHECK_EQ(d.hdr.rsvdulp, 0xabcd);
	CHECK_EQ(d.hdr.msn, 7);
	CHECK_EQ(d.hdr.mo, 0);
	CHECK_EQ(d.payload_len, 3);
}

int main(void)
{
	test_opcode_table();
	test_framing();
	test_vectors();
	test_hdr_roundtrip();
	test_terminate();
	test_errors();
	test_term_from_err();
	test_mulpdu();
	test_tx();
	test_hdr_put_one();
	return check_exit();
}
