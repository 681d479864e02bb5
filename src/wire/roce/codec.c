/* BTH and extended transport header codec (spec sections 2-4; IBTA 9.2-9.3). Reads go through
 * a bounded cursor whose getters fail on short input; nothing is ever cast to a struct.
 * Which headers a packet carries is asked of the opcode table (opcode.c), never switched on. */
#include "wire/roce/roce.h"

#include <string.h>

/* ---- bounded read cursor ---- */

struct rcur {
	const uint8_t *p;
	size_t left;
};

static int get_u8(struct rcur *c, uint8_t *v)
{
	if (c->left < 1)
		return -1;
	*v = c->p[0];
	c->p++;
	c->left--;
	return 0;
}

static int get_bytes(struct rcur *c, void *out, size_t n)
{
	if (c->left < n)
		return -1;
	memcpy(out, c->p, n);
	c->p += n;
	c->left -= n;
	return 0;
}

static int skip(struct rcur *c, size_t n)
{
	if (c->left < n)
		return -1;
	c->p += n;
	c->left -= n;
	return 0;
}

static int get_be(struct rcur *c, unsigned nbytes, uint64_t *v)
{
	uint64_t x = 0;

	if (c->left < nbytes)
		return -1;
	for (unsigned i = 0; i < nbytes; i++)
		x = x << 8 | c->p[i];
	c->p += nbytes;
	c->left -= nbytes;
	*v = x;
	return 0;
}

static int get_be16(struct rcur *c, uint16_t *v)
{
	uint64_t x;

	if (get_be(c, 2, &x))
		return -1;
	*v = (uint16_t)x;
	return 0;
}

static int get_be24(struct rcur *c, uint32_t *v)
{
	uint64_t x;

	if (get_be(c, 3, &x))
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int get_be32(struct rcur *c, uint32_t *v)
{
	uint64_t x;

	if (get_be(c, 4, &x))
		return -1;
	*v = (uint32_t)x;
	return 0;
}

static int get_be64(struct rcur *c, uint64_t *v)
{
	return get_be(c, 8, v);
}

/* ---- write cursor (the caller has checked the capacity) ---- */

static uint8_t *put_be(uint8_t *p, unsigned nbytes, uint64_t v)
{
	for (unsigned i = nbytes; i-- > 0;) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
	return p + nbytes;
}

/* ---- parse ---- */

/* Decodes the extended headers `hdrs` in wire order (spec 2.8). The caller has checked that
 * the cursor holds them all; the getters check again, so a table error cannot over-read. */
static int parse_ext(struct rcur *c, uint16_t hdrs, struct roce_pkt *out)
{
	uint8_t rsvd;
	int err = 0;

	if (hdrs & ROCE_HDR_DETH) {
		err |= get_be32(c, &out->deth.qkey);
		err |= get_u8(c, &rsvd);
		err |= get_be24(c, &out->deth.src_qpn);
	}
	if (hdrs & ROCE_HDR_XRCETH) {
		/* 8 reserved bits, then the 24-bit XRC SRQ number. */
		err |= get_u8(c, &rsvd);
		err |= get_be24(c, &out->xrc_srqn);
	}
	if (hdrs & ROCE_HDR_RETH) {
		err |= get_be64(c, &out->reth.va);
		err |= get_be32(c, &out->reth.rkey);
		err |= get_be32(c, &out->reth.dma_len);
	}
	if (hdrs & ROCE_HDR_ATOMICETH) {
		err |= get_be64(c, &out->atomic.va);
		err |= get_be32(c, &out->atomic.rkey);
		err |= get_be64(c, &out->atomic.swap_add);
		err |= get_be64(c, &out->atomic.compare);
	}
	if (hdrs & ROCE_HDR_AETH) {
		err |= get_u8(c, &out->aeth.syndrome);
		err |= get_be24(c, &out->aeth.msn);
	}
	if (hdrs & ROCE_HDR_ATOMICACKETH)
		err |= get_be64(c, &out->atomic_orig);
	if (hdrs & ROCE_HDR_IMMDT)
		err |= get_bytes(c, out->imm, sizeof(out->imm));
	if (hdrs & ROCE_HDR_IETH)
		err |= get_be32(c, &out->ieth);
	return err ? -1 : 0;
}

enum roce_parse_err roce_parse(const uint8_t *buf, size_t len, struct roce_pkt *out)
{
	struct rcur c = {buf, len};
	const struct roce_opinfo *oi;
	uint8_t b1, b4, b8;
	size_t after;

	memset(out, 0, sizeof(*out));
	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return ROCE_ERR_TRUNCATED;
	oi = roce_opinfo(buf[0]);
	if (!oi)
		return ROCE_ERR_UNKNOWN_OPCODE;
	/* Spec 1.1 / 2.1: TVer must be 0; rxe_recv.c drops anything else. */
	if ((buf[1] & 0x0F) != 0)
		return ROCE_ERR_BAD_TVER;
	if (len < (size_t)oi->hdr_len + ROCE_ICRC_LEN)
		return ROCE_ERR_TRUNCATED;

	/* Everything from here on is in bounds: the cursor stops at the ICRC. */
	c.left = len - ROCE_ICRC_LEN;
	after = c.left - oi->hdr_len;

	/* BTH (spec 2.1). */
	if (get_u8(&c, &out->bth.opcode) || get_u8(&c, &b1) || get_be16(&c, &out->bth.pkey) ||
	    get_u8(&c, &b4) || get_be24(&c, &out->bth.dqpn) || get_u8(&c, &b8) ||
	    get_be24(&c, &out->bth.psn))
		return ROCE_ERR_TRUNCATED;
	out->bth.se = b1 & 0x80;
	out->bth.mig = b1 & 0x40;
	out->bth.padcnt = (b1 >> 4) & 3;
	out->bth.tver = b1 & 0x0F;
	out->bth.fecn = b4 & 0x80;
	out->bth.becn = b4 & 0x40;
	out->bth.ackreq = b8 & 0x80;

	if (parse_ext(&c, oi->hdrs, out))
		return ROCE_ERR_TRUNCATED;
	/* Header bytes the table counts beyond the known headers are reserved (the 16 bytes
	 * after a CNP's BTH, spec 9.1): ignored on receive. */
	if (skip(&c, oi->hdr_len - (size_t)(c.p - buf)))
		return ROCE_ERR_TRUNCATED;

	/* Pad bytes sit between payload and ICRC (spec 4.3); PadCnt cannot exceed them. */
	if (out->bth.padcnt > after)
		return ROCE_ERR_BAD_PAD;
	if (!oi->payload && after != 0)
		return ROCE_ERR_UNEXPECTED_PAYLOAD;
	/* A UDP datagram is < 64 KiB; a larger length can only be a caller's bug, and it must
	 * not be truncated silently into payload_len. */
	if (after - out->bth.padcnt > UINT32_MAX)
		return ROCE_ERR_UNEXPECTED_PAYLOAD;
	out->payload = c.p;
	out->payload_len = (uint32_t)(after - out->bth.padcnt);
	return ROCE_ERR_NONE;
}

size_t roce_hdr_len(uint8_t opcode)
{
	const struct roce_opinfo *oi = roce_opinfo(opcode);

	return oi ? oi->hdr_len : 0;
}

/* ---- build ---- */

size_t roce_build_hdrs(const struct roce_pkt *p, uint8_t *buf, size_t cap)
{
	const struct roce_opinfo *oi = roce_opinfo(p->bth.opcode);
	uint8_t *w = buf;

	if (!oi || cap < oi->hdr_len)
		return 0;

	/* BTH (spec 2.1). PadCnt always follows the payload length (spec 4.3). */
	*w++ = oi->opcode;
	*w++ = (uint8_t)((p->bth.se ? 0x80 : 0) | (p->bth.mig ? 0x40 : 0) |
			 ((-p->payload_len) & 3) << 4 | (p->bth.tver & 0x0F));
	w = put_be(w, 2, p->bth.pkey);
	*w++ = (uint8_t)((p->bth.fecn ? 0x80 : 0) | (p->bth.becn ? 0x40 : 0));
	w = put_be(w, 3, p->bth.dqpn & 0xFFFFFF);
	*w++ = p->bth.ackreq ? 0x80 : 0;
	w = put_be(w, 3, p->bth.psn & 0xFFFFFF);

	/* Extended headers in wire order (spec 2.8). */
	if (oi->hdrs & ROCE_HDR_DETH) {
		w = put_be(w, 4, p->deth.qkey);
		*w++ = 0;
		w = put_be(w, 3, p->deth.src_qpn & 0xFFFFFF);
	}
	if (oi->hdrs & ROCE_HDR_XRCETH) {
		*w++ = 0;
		w = put_be(w, 3, p->xrc_srqn & 0xFFFFFF);
	}
	if (oi->hdrs & ROCE_HDR_RETH) {
		w = put_be(w, 8, p->reth.va);
		w = put_be(w, 4, p->reth.rkey);
		w = put_be(w, 4, p->reth.dma_len);
	}
	if (oi->hdrs & ROCE_HDR_ATOMICETH) {
		w = put_be(w, 8, p->atomic.va);
		w = put_be(w, 4, p->atomic.rkey);
		w = put_be(w, 8, p->atomic.swap_add);
		w = put_be(w, 8, p->atomic.compare);
	}
	if (oi->hdrs & ROCE_HDR_AETH) {
		*w++ = p->aeth.syndrome;
		w = put_be(w, 3, p->aeth.msn & 0xFFFFFF);
	}
	if (oi->hdrs & ROCE_HDR_ATOMICACKETH)
		w = put_be(w, 8, p->atomic_orig);
	if (oi->hdrs & ROCE_HDR_IMMDT) {
		memcpy(w, p->imm, sizeof(p->imm));
		w += sizeof(p->imm);
	}
	if (oi->hdrs & ROCE_HDR_IETH)
		w = put_be(w, 4, p->ieth);
	/* Reserved header bytes (CNP, spec 9.1) are sent as zero. */
	memset(w, 0, oi->hdr_len - (size_t)(w - buf));
	return oi->hdr_len;
}

size_t roce_build(const struct roce_pkt *p, uint8_t *buf, size_t cap)
{
	const struct roce_opinfo *oi = roce_opinfo(p->bth.opcode);
	size_t hlen, pad, total;

	if (!oi)
		return 0;
	/* An opcode without payload never carries any: refuse rather than send garbage. */
	if (!oi->payload && p->payload_len)
		return 0;
	pad = (-p->payload_len) & 3;
	total = (size_t)oi->hdr_len + p->payload_len + pad + ROCE_ICRC_LEN;
	if (total > cap)
		return 0;
	hlen = roce_build_hdrs(p, buf, cap);
	if (hlen != oi->hdr_len)
		return 0;
	/* memmove: the caller may have placed the payload in buf already (zero-copy build). */
	if (p->payload_len && p->payload != buf + hlen)
		memmove(buf + hlen, p->payload, p->payload_len);
	memset(buf + hlen + p->payload_len, 0, pad + ROCE_ICRC_LEN);
	return total;
}

const char *roce_err_name(enum roce_parse_err err)
{
	static const char *const names[ROCE_ERR__COUNT] = {
	    [ROCE_ERR_NONE] = "none",
	    [ROCE_ERR_TRUNCATED] = "truncated",
	    [ROCE_ERR_UNKNOWN_OPCODE] = "unknown_opcode",
	    [ROCE_ERR_BAD_TVER] = "bad_tver",
	    [ROCE_ERR_BAD_PAD] = "bad_pad",
	    [ROCE_ERR_UNEXPECTED_PAYLOAD] = "unexpected_payload",
	};

	if ((unsigned)err >= ROCE_ERR__COUNT || !names[err])
		return "unknown";
	return names[err];
}
