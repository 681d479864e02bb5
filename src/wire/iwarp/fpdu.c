/* DDP/RDMAP header codec, FPDU framing and the resumable receive state machine.
 * RFC 5041 section 4 (DDP headers), RFC 5040 sections 4.2-4.8 (RDMAP), RFC 5044 sections 4
 * and 6 (FPDU, CRC). Layout summary: ../shared/spec/iwarp.md sections 4-6. */
#include "wire/iwarp/iwarp.h"

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "util/crc.h"

/* ---- Bounded cursors: every wire read and write goes through these ---- */

struct cur {
	const uint8_t *p;
	size_t len;
	size_t off;
	bool bad; /* a read went past len: the values read are 0 */
};

static size_t cur_left(const struct cur *c)
{
	return c->len - c->off;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	uint32_t x;
	memcpy(&x, p, 4);
	return be32toh(x);
}

static uint64_t be64(const uint8_t *p)
{
	uint64_t x;
	memcpy(&x, p, 8);
	return be64toh(x);
}

static uint64_t get_be(struct cur *c, unsigned n)
{
	if (cur_left(c) < n) {
		c->bad = true;
		c->off = c->len;
		return 0;
	}
	/* n is 2, 4 or 8, a constant at every call: one load and a byte swap. */
	const uint8_t *p = c->p + c->off;
	c->off += n;
	return n == 2 ? be16(p) : n == 4 ? be32(p) : be64(p); /* 8: the only other width */
}

static void get_bytes(struct cur *c, uint8_t *dst, size_t n)
{
	if (cur_left(c) < n) {
		c->bad = true;
		c->off = c->len;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, c->p + c->off, n);
	c->off += n;
}

struct put {
	uint8_t *p;
	size_t cap;
	size_t off;
	bool bad; /* a write did not fit: nothing past cap was touched */
};

static void put_be(struct put *w, uint64_t v, unsigned n)
{
	if (w->cap - w->off < n) {
		w->bad = true;
		return;
	}
	uint8_t *p = w->p + w->off;
	w->off += n;
	switch (n) { /* as get_be */
	case 2: {
		uint16_t x = htobe16((uint16_t)v);
		memcpy(p, &x, 2);
		return;
	}
	case 4: {
		uint32_t x = htobe32((uint32_t)v);
		memcpy(p, &x, 4);
		return;
	}
	default: { /* 8 */
		uint64_t x = htobe64(v);
		memcpy(p, &x, 8);
	}
	}
}

static void put_bytes(struct put *w, const uint8_t *src, size_t n)
{
	if (w->cap - w->off < n) {
		w->bad = true;
		return;
	}
	if (n)
		memcpy(w->p + w->off, src, n);
	w->off += n;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- The opcode table (RFC 5040 4.3 and 5; siw iwarp_pktinfo[]) ---- */

static const struct iw_opinfo optab[IW_OP__COUNT] = {
    [IW_OP_WRITE] = {"Write", IW_OP_WRITE, true, 0, IW_DDP_TAGGED_HDR_LEN, true, false, false,
		     false},
    [IW_OP_READ_REQ] = {"Read Request", IW_OP_READ_REQ, false, IW_QN_READ_REQ, IW_RREQ_ULPDU_LEN,
			false, true, false, false},
    [IW_OP_READ_RESP] = {"Read Response", IW_OP_READ_RESP, true, 0, IW_DDP_TAGGED_HDR_LEN, true,
			 false, false, false},
    [IW_OP_SEND] = {"Send", IW_OP_SEND, false, IW_QN_SEND, IW_DDP_UNTAGGED_HDR_LEN, true, false,
		    false, false},
    [IW_OP_SEND_INV] = {"Send with Invalidate", IW_OP_SEND_INV, false, IW_QN_SEND,
			IW_DDP_UNTAGGED_HDR_LEN, true, false, true, false},
    [IW_OP_SEND_SE] = {"Send with SE", IW_OP_SEND_SE, false, IW_QN_SEND, IW_DDP_UNTAGGED_HDR_LEN,
		       true, false, false, true},
    [IW_OP_SEND_SE_INV] = {"Send with SE and Invalidate", IW_OP_SEND_SE_INV, false, IW_QN_SEND,
			   IW_DDP_UNTAGGED_HDR_LEN, true, false, true, true},
    [IW_OP_TERMINATE] = {"Terminate", IW_OP_TERMINATE, false, IW_QN_TERMINATE, IW_TERM_HDR_LEN,
			 false, true, false, false},
};

const struct iw_opinfo *iw_opinfo(uint8_t opcode)
{
	return opcode < IW_OP__COUNT ? &optab[opcode] : NULL;
}

int iw_hdr_init(struct iw_hdr *h, uint8_t opcode)
{
	const struct iw_opinfo *oi = iw_opinfo(opcode);

	if (!h || !oi)
		return -EINVAL;
	memset(h, 0, sizeof(*h));
	h->opcode = opcode;
	h->tagged = oi->tagged;
	h->last = true;
	h->dv = IW_DDP_VERSION;
	h->rv = IW_RDMAP_VERSION;
	h->qn = oi->qn;
	return 0;
}

/* ---- Terminate body (RFC 5040 4.8) ---- */

#define TERM_LAYER_SHIFT 28
#define TERM_ETYPE_SHIFT 24
#define TERM_ECODE_SHIFT 16
#define TERM_BIT_M	 0x8000u
#define TERM_BIT_D	 0x4000u
#define TERM_BIT_R	 0x2000u
#define TERM_RSVD	 0x1fffu

/* Length of the optional parts, or 0 if they are inconsistent (not encodable). */
static size_t term_opt_len(const struct iw_term *t)
{
	size_t n = 0;

	if (t->d) {
		unsigned want =
		    (t->ddp_hdr[0] & 0x80) ? IW_DDP_TAGGED_HDR_LEN : IW_DDP_UNTAGGED_HDR_LEN;
		if (t->ddp_hdr_len != want)
			return 0;
		n += 2 + want;
	} else if (t->ddp_hdr_len != 0) {
		return 0;
	}
	if (t->rdmap_hdr_len == IW_RREQ_LEN) {
		if (!t->r)
			return 0;
		n += IW_RREQ_LEN;
	} else if (t->rdmap_hdr_len != 0) {
		return 0;
	}
	return n + 1; /* + 1 so that "no optional part" is not 0 */
}

/* Decodes the Terminate Control word and optional parts; c covers exactly the rest of the
 * ULPDU. The optional parts' presence follows the D and R bits (RFC 5040 4.8); the
 * terminated DDP header's length follows its own T bit. */
static int term_parse(struct cur *c, struct iw_term *t)
{
	uint32_t w = (uint32_t)get_be(c, 4);

	t->layer = (uint8_t)(w >> TERM_LAYER_SHIFT);
	t->etype = (uint8_t)((w >> TERM_ETYPE_SHIFT) & 0xf);
	t->ecode = (uint8_t)(w >> TERM_ECODE_SHIFT);
	t->m = w & TERM_BIT_M;
	t->d = w & TERM_BIT_D;
	t->r = w & TERM_BIT_R;
	t->rsvd = (uint16_t)(w & TERM_RSVD);
	if (c->bad)
		return -IW_E_TERM_FMT;
	if (t->d) {
		if (cur_left(c) < 3)
			return -IW_E_TERM_FMT;
		t->ddp_seg_len = (uint16_t)get_be(c, 2);
		t->ddp_hdr_len =
		    (c->p[c->off] & 0x80) ? IW_DDP_TAGGED_HDR_LEN : IW_DDP_UNTAGGED_HDR_LEN;
		if (cur_left(c) < t->ddp_hdr_len)
			return -IW_E_TERM_FMT;
		get_bytes(c, t->ddp_hdr, t->ddp_hdr_len);
	}
	/* siw sets R for a failed Send with Invalidate without attaching a header. */
	if (t->r && cur_left(c) >= IW_RREQ_LEN) {
		t->rdmap_hdr_len = IW_RREQ_LEN;
		get_bytes(c, t->rdmap_hdr, IW_RREQ_LEN);
	}
	if (cur_left(c) != 0 || c->bad)
		return -IW_E_TERM_FMT;
	return 0;
}

static void term_write(struct put *w, const struct iw_term *t)
{
	uint32_t word = (uint32_t)(t->layer & 0xf) << TERM_LAYER_SHIFT |
			(uint32_t)(t->etype & 0xf) << TERM_ETYPE_SHIFT |
			(uint32_t)t->ecode << TERM_ECODE_SHIFT | (t->m ? TERM_BIT_M : 0) |
			(t->d ? TERM_BIT_D : 0) | (t->r ? TERM_BIT_R : 0) | (t->rsvd & TERM_RSVD);

	put_be(w, word, 4);
	if (t->d) {
		put_be(w, t->ddp_seg_len, 2);
		put_bytes(w, t->ddp_hdr, t->ddp_hdr_len);
	}
	put_bytes(w, t->rdmap_hdr, t->rdmap_hdr_len);
}

/* ---- DDP / RDMAP header ---- */

size_t iw_hdr_len(const struct iw_hdr *h)
{
	const struct iw_opinfo *oi = h ? iw_opinfo(h->opcode) : NULL;

	if (!oi || h->tagged != oi->tagged)
		return 0;
	if (h->opcode == IW_OP_TERMINATE) {
		size_t opt = term_opt_len(&h->term);
		return opt ? IW_TERM_HDR_LEN + opt - 1 : 0;
	}
	return oi->hdr_len;
}

/* Checks ULPDU_LENGTH and the control word, in the order siw does (siw_get_hdr: DV, RV,
 * opcode), then the buffer model and the opcode's size rules. Returns the header length to
 * collect (Terminate: the whole ULPDU) or -IW_E_*. */
static int ctrl_check(uint16_t ctrl, uint16_t ulpdu_len)
{
	bool tagged = ctrl & IW_CTRL_T;
	unsigned dv = (ctrl & IW_CTRL_DV) >> 8, rv = (ctrl & IW_CTRL_RV) >> 6;
	const struct iw_opinfo *oi = iw_opinfo(ctrl & IW_CTRL_OPCODE);

	if (dv != IW_DDP_VERSION) /* RFC 5041 7.2 */
		return tagged ? -IW_E_DDP_VERSION_T : -IW_E_DDP_VERSION_U;
	if (rv != IW_RDMAP_VERSION) /* RFC 5040 7.1 */
		return -IW_E_RDMAP_VERSION;
	if (!oi)
		return -IW_E_OPCODE;
	if (tagged != oi->tagged || (oi->single && !(ctrl & IW_CTRL_L)))
		return -IW_E_DDP_FLAGS;
	if (oi->opcode == IW_OP_TERMINATE) {
		if (ulpdu_len < IW_TERM_HDR_LEN || ulpdu_len > IW_TERM_ULPDU_MAX)
			return -IW_E_ULPDU_LEN;
		return ulpdu_len;
	}
	if (ulpdu_len < oi->hdr_len || (!oi->payload && ulpdu_len != oi->hdr_len))
		return -IW_E_ULPDU_LEN; /* e.g. a Read Request with payload (siw: EPROTO) */
	return oi->hdr_len;
}

/* Decodes a complete header: p holds hdr_len bytes from the control word on, a control word
 * that ctrl_check has passed (with the FPDU's ULPDU_LENGTH), returning hdr_len. */
static int hdr_parse(const uint8_t *p, size_t hdr_len, struct iw_hdr *h)
{
	struct cur c = {p, hdr_len, 0, false};
	uint16_t ctrl;
	const struct iw_opinfo *oi;
	int r;

	if (hdr_len < 2)
		return -IW_E_ULPDU_LEN;
	ctrl = be16(p);
	oi = iw_opinfo(ctrl & IW_CTRL_OPCODE);
	/* The Terminate part (large) is zeroed only when it was or will be used: it stays zero
	 * for every other header. */
	if (h->opcode == IW_OP_TERMINATE || oi->opcode == IW_OP_TERMINATE)
		memset(&h->term, 0, sizeof(h->term));
	memset(h, 0, offsetof(struct iw_hdr, term));
	h->opcode = oi->opcode;
	h->tagged = ctrl & IW_CTRL_T;
	h->last = ctrl & IW_CTRL_L;
	h->ddp_rsvd = (uint8_t)((ctrl & IW_CTRL_DDP_RSVD) >> 10);
	h->dv = (uint8_t)((ctrl & IW_CTRL_DV) >> 8);
	h->rv = (uint8_t)((ctrl & IW_CTRL_RV) >> 6);
	h->rdmap_rsvd = (uint8_t)((ctrl & IW_CTRL_RDMAP_RSVD) >> 4);
	/* The fixed parts, read in place once their length is known to be there. */
	if (h->tagged) { /* RFC 5041 4.2 */
		if (hdr_len < IW_DDP_TAGGED_HDR_LEN)
			return -IW_E_ULPDU_LEN;
		h->stag = be32(p + 2);
		h->to = be64(p + 6);
		return 0;
	}
	if (hdr_len < IW_DDP_UNTAGGED_HDR_LEN)
		return -IW_E_ULPDU_LEN;
	h->rsvdulp = be32(p + 2); /* RFC 5041 4.3 */
	h->qn = be32(p + 6);
	h->msn = be32(p + 10);
	h->mo = be32(p + 14);
	c.off = IW_DDP_UNTAGGED_HDR_LEN;
	if (h->qn != oi->qn) /* RFC 5041 7.2: invalid QN */
		return -IW_E_QN;
	if (oi->single && h->mo != 0)
		return -IW_E_MO;
	if (h->opcode == IW_OP_READ_REQ) { /* RFC 5040 4.4 */
		h->rreq.sink_stag = (uint32_t)get_be(&c, 4);
		h->rreq.sink_to = get_be(&c, 8);
		h->rreq.size = (uint32_t)get_be(&c, 4);
		h->rreq.src_stag = (uint32_t)get_be(&c, 4);
		h->rreq.src_to = get_be(&c, 8);
	} else if (h->opcode == IW_OP_TERMINATE) {
		r = term_parse(&c, &h->term);
		if (r < 0)
			return r;
	}
	return c.bad ? -IW_E_ULPDU_LEN : 0;
}

int iw_hdr_encode(const struct iw_hdr *h, uint32_t payload_len, uint8_t *out, size_t cap)
{
	size_t hl = iw_hdr_len(h);
	struct put w = {out, cap, 0, false};
	uint16_t ctrl;

	if (!hl || (!out && cap))
		return -EINVAL;
	if (payload_len && !iw_opinfo(h->opcode)->payload)
		return -EINVAL;
	if (hl + payload_len > IW_ULPDU_MAX || payload_len > IW_ULPDU_MAX)
		return -EMSGSIZE;
	if (cap < IW_FPDU_LEN_SIZE + hl)
		return -ENOSPC;
	ctrl = (uint16_t)((h->tagged ? IW_CTRL_T : 0) | (h->last ? IW_CTRL_L : 0) |
			  (h->ddp_rsvd & 0xf) << 10 | (h->dv & 3) << 8 | (h->rv & 3) << 6 |
			  (h->rdmap_rsvd & 3) << 4 | (h->opcode & IW_CTRL_OPCODE));
	put_be(&w, hl + payload_len, 2);
	put_be(&w, ctrl, 2);
	if (h->tagged) {
		put_be(&w, h->stag, 4);
		put_be(&w, h->to, 8);
	} else {
		put_be(&w, h->rsvdulp, 4);
		put_be(&w, h->qn, 4);
		put_be(&w, h->msn, 4);
		put_be(&w, h->mo, 4);
		if (h->opcode == IW_OP_READ_REQ) {
			put_be(&w, h->rreq.sink_stag, 4);
			put_be(&w, h->rreq.sink_to, 8);
			put_be(&w, h->rreq.size, 4);
			put_be(&w, h->rreq.src_stag, 4);
			put_be(&w, h->rreq.src_to, 8);
		} else if (h->opcode == IW_OP_TERMINATE) {
			term_write(&w, &h->term);
		}
	}
	if (w.bad || w.off != IW_FPDU_LEN_SIZE + hl)
		return -ENOSPC; /* not reached: cap was checked against hl */
	return (int)w.off;
}

/* The control word of a whole message's only FPDU: L, DDP and RDMAP version 1. */
static uint16_t ctrl_one(uint8_t opcode, bool tagged)
{
	return (uint16_t)((tagged ? IW_CTRL_T : 0) | IW_CTRL_L | IW_DDP_VERSION << 8 |
			  IW_RDMAP_VERSION << 6 | (opcode & IW_CTRL_OPCODE));
}

size_t iw_hdr_put_send(uint8_t *out, size_t cap, uint8_t opcode, uint32_t rsvdulp, uint32_t msn,
		       uint32_t payload_len)
{
	struct put w = {out, cap, 0, false};

	if ((opcode != IW_OP_SEND && opcode != IW_OP_SEND_INV && opcode != IW_OP_SEND_SE &&
	     opcode != IW_OP_SEND_SE_INV) ||
	    payload_len > IW_ULPDU_MAX - IW_DDP_UNTAGGED_HDR_LEN ||
	    cap < IW_FPDU_LEN_SIZE + IW_DDP_UNTAGGED_HDR_LEN)
		return 0;
	put_be(&w, IW_DDP_UNTAGGED_HDR_LEN + payload_len, 2);
	put_be(&w, ctrl_one(opcode, false), 2);
	put_be(&w, rsvdulp, 4);
	put_be(&w, IW_QN_SEND, 4);
	put_be(&w, msn, 4);
	put_be(&w, 0, 4); /* MO */
	return w.off;
}

size_t iw_hdr_put_write(uint8_t *out, size_t cap, uint32_t stag, uint64_t to, uint32_t payload_len)
{
	struct put w = {out, cap, 0, false};

	if (payload_len > IW_ULPDU_MAX - IW_DDP_TAGGED_HDR_LEN ||
	    cap < IW_FPDU_LEN_SIZE + IW_DDP_TAGGED_HDR_LEN)
		return 0;
	put_be(&w, IW_DDP_TAGGED_HDR_LEN + payload_len, 2);
	put_be(&w, ctrl_one(IW_OP_WRITE, true), 2);
	put_be(&w, stag, 4);
	put_be(&w, to, 8);
	return w.off;
}

/* ---- FPDU framing ---- */

size_t iw_fpdu_trailer(uint8_t *out, uint32_t ulpdu_len, uint32_t crc, bool crc_on,
		       const uint8_t *pad)
{
	static const uint8_t zero[3];
	unsigned n = iw_fpdu_pad(ulpdu_len);
	const uint8_t *pb = pad ? pad : zero;

	for (unsigned i = 0; i < n; i++) /* at most 3 bytes: no memcpy call */
		out[i] = pb[i];
	if (crc_on) {
		/* RFC 5044 6: the CRC covers the pad; siw sends the value LSB first. */
		crc = crc32c(crc, pb, n);
		out[n] = (uint8_t)crc;
		out[n + 1] = (uint8_t)(crc >> 8);
		out[n + 2] = (uint8_t)(crc >> 16);
		out[n + 3] = (uint8_t)(crc >> 24);
	} else {
		memset(out + n, 0, IW_FPDU_CRC_SIZE); /* RFC 5044 4.1: field present, zero */
	}
	return n + IW_FPDU_CRC_SIZE;
}

int iw_fpdu_encode(const struct iw_fpdu *f, bool crc_on, uint8_t *out, size_t cap)
{
	int hl;
	size_t ulpdu, total;
	uint32_t crc = 0;

	if (!f || (f->payload_len && !f->payload))
		return -EINVAL;
	hl = iw_hdr_encode(&f->hdr, f->payload_len, out, cap);
	if (hl < 0)
		return hl;
	ulpdu = (size_t)hl - IW_FPDU_LEN_SIZE + f->payload_len;
	total = iw_fpdu_len((uint32_t)ulpdu);
	if (cap < total)
		return -ENOSPC;
	if (f->payload_len)
		memcpy(out + hl, f->payload, f->payload_len);
	if (crc_on)
		crc = crc32c(0, out, (size_t)hl + f->payload_len);
	iw_fpdu_trailer(out + hl + f->payload_len, (uint32_t)ulpdu, crc, crc_on, f->pad);
	return (int)total;
}

int iw_fpdu_decode(const uint8_t *buf, size_t len, bool crc_on, uint16_t max_ulpdu,
		   struct iw_fpdu *out)
{
	struct iw_rx rx;
	struct iw_rx_ev ev;
	struct iw_fpdu f;
	size_t pos = 0, used;

	if ((!buf && len) || !out)
		return -EINVAL;
	memset(&f, 0, sizeof(f));
	iw_rx_init(&rx, crc_on, max_ulpdu);
	for (;;) {
		int r = iw_rx_step(&rx, buf + pos, len - pos, &used, &ev);

		pos += used;
		if (r < 0)
			return r;
		switch (r) {
		case IW_RX_NEED_MORE:
			return -EAGAIN;
		case IW_RX_HDR:
			f.hdr = *ev.hdr;
			f.ulpdu_len = ev.ulpdu_len;
			f.payload = buf + pos;
			f.payload_len = ev.payload_len;
			break;
		case IW_RX_DATA:
			break; /* contiguous: the first chunk starts at f.payload */
		case IW_RX_END:
			memcpy(f.pad, ev.pad, sizeof(f.pad));
			f.pad_len = ev.pad_len;
			f.crc = ev.crc;
			*out = f;
			return (int)pos;
		}
	}
}

/* ---- The receive state machine (RFC 5044 4, 6; siw siw_tcp_rx_data) ----
 * HDR: collect ULPDU_LENGTH (2 bytes: check it), then the control word (2: check versions,
 * opcode, flags, sizes), then the rest of the header into raw[] (bounded by IW_HDR_MAX),
 * decode it -> HDR event. DATA: hand out payload chunks in place -> DATA events. TRAILER:
 * collect pad + CRC, check -> END event, back to HDR. Errors park the machine in ERROR. */

enum rx_state { RXS_HDR, RXS_DATA, RXS_TRAILER, RXS_ERROR, RXS__COUNT };

static const char *const rx_state_names[RXS__COUNT] = {"HDR", "DATA", "TRAILER", "ERROR"};

void iw_rx_init(struct iw_rx *rx, bool crc, uint16_t max_ulpdu)
{
	memset(rx, 0, sizeof(*rx));
	rx->crc = crc;
	rx->max_ulpdu = max_ulpdu ? max_ulpdu : IW_ULPDU_MAX;
	rx->state = RXS_HDR;
	rx->need = IW_FPDU_LEN_SIZE;
}

static int rx_fail(struct iw_rx *rx, int err)
{
	rx->err = err;
	rx->state = RXS_ERROR;
	return err;
}

static void rx_event(const struct iw_rx *rx, struct iw_rx_ev *ev)
{
	ev->hdr = &rx->hdr;
	ev->raw = rx->raw;
	ev->raw_len = rx->have;
	ev->ulpdu_len = rx->ulpdu_len;
	ev->payload_len = (uint32_t)(rx->ulpdu_len - rx->hdr_len);
}

/* The whole header is in raw[]: decode it -> HDR event. */
static int hdr_complete(struct iw_rx *rx, struct iw_rx_ev *ev)
{
	int r = hdr_parse(rx->raw + 2, rx->hdr_len, &rx->hdr); /* ctrl_check gave hdr_len */

	if (r < 0)
		return rx_fail(rx, r);
	if (rx->crc) /* RFC 5044 6: from ULPDU_LENGTH on */
		rx->crc_acc = crc32c(0, rx->raw, rx->have);
	rx->pay_done = 0;
	rx->trl_have = 0;
	rx->state = rx->ulpdu_len > rx->hdr_len ? RXS_DATA : RXS_TRAILER;
	rx_event(rx, ev);
	return IW_RX_HDR;
}

/* ULPDU_LENGTH within what this receiver takes and at least the smallest header: 0 or -IW_E_*. */
static int ulpdu_check(const struct iw_rx *rx, uint16_t ulpdu_len)
{
	if (ulpdu_len > rx->max_ulpdu)
		return -IW_E_ULPDU_TOO_BIG;
	if (ulpdu_len < IW_DDP_TAGGED_HDR_LEN)
		return -IW_E_ULPDU_LEN;
	return 0;
}

int iw_rx_step(struct iw_rx *rx, const uint8_t *buf, size_t len, size_t *used, struct iw_rx_ev *ev)
{
	size_t pos = 0;
	int r;

	*used = 0;
	memset(ev, 0, sizeof(*ev));
	if (rx->state == RXS_ERROR)
		return rx->err;
	if (!buf && len)
		return -EINVAL;

	/* The common case: a whole header at the start of buf, valid. Taken in one copy instead
	 * of the three rounds below (length, control word, the rest), with the same checks in
	 * the same order; anything else (a header cut short, a bad one) takes the rounds, which
	 * then fail as they always have. */
	if (rx->state == RXS_HDR && rx->have == 0 && len >= IW_FPDU_LEN_SIZE + 2) {
		uint16_t ulpdu = be16(buf);
		r = ulpdu_check(rx, ulpdu);
		if (r == 0)
			r = ctrl_check(be16(buf + IW_FPDU_LEN_SIZE), ulpdu);
		if (r >= 0 && len >= IW_FPDU_LEN_SIZE + (size_t)r) {
			rx->ulpdu_len = ulpdu;
			rx->hdr_len = (uint16_t)r;
			rx->need = rx->have = (uint16_t)(IW_FPDU_LEN_SIZE + r);
			memcpy(rx->raw, buf, rx->have);
			*used = rx->have;
			return hdr_complete(rx, ev);
		}
	}
	while (pos < len) {
		switch (rx->state) {
		case RXS_HDR: {
			size_t n = rx->need - rx->have;

			if (n > len - pos)
				n = len - pos;
			memcpy(rx->raw + rx->have, buf + pos, n);
			rx->have = (uint16_t)(rx->have + n);
			pos += n;
			*used = pos;
			if (rx->have < rx->need)
				break;
			if (rx->have == IW_FPDU_LEN_SIZE) {
				rx->ulpdu_len = be16(rx->raw);
				r = ulpdu_check(rx, rx->ulpdu_len);
				if (r < 0)
					return rx_fail(rx, r);
				rx->need = IW_FPDU_LEN_SIZE + 2;
				break;
			}
			if (rx->have == IW_FPDU_LEN_SIZE + 2) {
				r = ctrl_check(be16(rx->raw + 2), rx->ulpdu_len);
				if (r < 0)
					return rx_fail(rx, r);
				rx->hdr_len = (uint16_t)r;
				rx->need = (uint16_t)(IW_FPDU_LEN_SIZE + r); /* r >= 14 */
				break;
			}
			return hdr_complete(rx, ev);
		}
		case RXS_DATA: {
			uint32_t pay_len = (uint32_t)(rx->ulpdu_len - rx->hdr_len);
			size_t n = pay_len - rx->pay_done;

			if (n > len - pos)
				n = len - pos;
			rx_event(rx, ev);
			ev->data = buf + pos;
			ev->len = (uint32_t)n;
			ev->off = rx->pay_done;
			if (rx->crc)
				rx->crc_acc = crc32c(rx->crc_acc, buf + pos, n);
			rx->pay_done += (uint32_t)n;
			pos += n;
			*used = pos;
			if (rx->pay_done == pay_len)
				rx->state = RXS_TRAILER;
			return IW_RX_DATA;
		}
		case RXS_TRAILER: {
			unsigned pad = iw_fpdu_pad(rx->ulpdu_len);
			size_t n = pad + IW_FPDU_CRC_SIZE - rx->trl_have;
			uint32_t crc_rx;

			if (n > len - pos)
				n = len - pos;
			memcpy(rx->trl + rx->trl_have, buf + pos, n);
			rx->trl_have = (uint8_t)(rx->trl_have + n);
			pos += n;
			*used = pos;
			if (rx->trl_have < pad + IW_FPDU_CRC_SIZE)
				break;
			crc_rx = le32(rx->trl + pad);
			/* The pad is covered by the CRC but its value is ignored (RFC 5044 4.1). */
			if (rx->crc && crc32c(rx->crc_acc, rx->trl, pad) != crc_rx)
				return rx_fail(rx, -IW_E_CRC);
			rx_event(rx, ev);
			memcpy(ev->pad, rx->trl, pad);
			ev->pad_len = (uint8_t)pad;
			ev->crc = crc_rx;
			rx->fpdus++;
			rx->state = RXS_HDR;
			rx->have = 0;
			rx->need = IW_FPDU_LEN_SIZE;
			return IW_RX_END;
		}
		default:
			return rx->err;
		}
	}
	*used = pos;
	return IW_RX_NEED_MORE;
}

int iw_rx_fpdu(struct iw_rx *rx, const uint8_t *buf, size_t len, size_t *used, struct iw_rx_ev *ev)
{
	uint16_t ulpdu;
	size_t whole;
	unsigned pad;
	int hl;

	*used = 0;
	if (rx->state != RXS_HDR || rx->have != 0 || !buf || len < IW_FPDU_LEN_SIZE + 2)
		return 0;
	ulpdu = be16(buf);
	whole = iw_fpdu_len(ulpdu);
	if (len < whole || ulpdu_check(rx, ulpdu) < 0)
		return 0;
	hl = ctrl_check(be16(buf + IW_FPDU_LEN_SIZE), ulpdu);
	if (hl < 0 || hdr_parse(buf + IW_FPDU_LEN_SIZE, (size_t)hl, &rx->hdr) < 0)
		return 0;
	pad = iw_fpdu_pad(ulpdu);
	/* RFC 5044 6: from ULPDU_LENGTH through the pad. */
	if (rx->crc && crc32c(0, buf, IW_FPDU_LEN_SIZE + (size_t)ulpdu + pad) !=
			   le32(buf + IW_FPDU_LEN_SIZE + ulpdu + pad))
		return 0;
	rx->ulpdu_len = ulpdu;
	rx->hdr_len = (uint16_t)hl;
	rx->have = (uint16_t)(IW_FPDU_LEN_SIZE + hl);
	rx_event(rx, ev);
	ev->raw = buf; /* where it lies: not copied into rx->raw */
	ev->data = ev->payload_len ? buf + rx->have : NULL;
	ev->len = ev->payload_len;
	ev->off = 0;
	memset(ev->pad, 0, sizeof(ev->pad));
	for (unsigned i = 0; i < pad; i++) /* at most 3 bytes: no memcpy call */
		ev->pad[i] = buf[IW_FPDU_LEN_SIZE + ulpdu + i];
	ev->pad_len = (uint8_t)pad;
	ev->crc = le32(buf + IW_FPDU_LEN_SIZE + ulpdu + pad);
	rx->fpdus++;
	rx->have = 0; /* at the next FPDU's start, as after an END */
	rx->need = IW_FPDU_LEN_SIZE;
	*used = whole;
	return 1;
}

const uint8_t *iw_rx_raw(const struct iw_rx *rx, size_t *len)
{
	*len = rx->have;
	return rx->raw;
}

bool iw_rx_idle(const struct iw_rx *rx)
{
	return rx->state == RXS_HDR && rx->have == 0;
}

const char *iw_rx_state_name(const struct iw_rx *rx)
{
	return rx->state < RXS__COUNT ? rx_state_names[rx->state] : "?";
}
