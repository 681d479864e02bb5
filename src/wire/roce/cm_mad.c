/* IB CM MAD codec (IBTA Vol. 1 12.6 tables 106-120, 13.4 MAD header; Annex A11 for rdma_cm's
 * IP header; ../shared/spec/roce.md section 11). Offsets and bit positions were checked
 * against the Linux kernel's include/rdma/ibta_vol1_c12.h and against real rdma_cm traffic
 * (tests/data/rxe_rdmacm_*.pcap).
 *
 * One const table describes every field of every message: where it sits in the 232-byte
 * body, how wide it is, and which struct member holds it. Parse, build and the width checks
 * all walk that table, so the three cannot disagree. Wire bytes are read through a bounded
 * view whose getters fail on short input; nothing is cast to a struct. */
#include "wire/roce/cm_mad.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define BODY_LEN (CM_MAD_LEN - CM_MAD_HDR_LEN) /* 232 */

/* ---- per-message facts ---- */

struct attr_info {
	uint16_t attr;
	const char *name;
	uint8_t pd_off; /* private data offset in the body; pd_off + pd_len == BODY_LEN */
	uint8_t pd_len;
};

static const struct attr_info attrs[] = {
    {CM_ATTR_REQ, "REQ", 140, CM_MAD_REQ_PD},		    /* table 106 */
    {CM_ATTR_MRA, "MRA", 10, CM_MAD_MRA_PD},		    /* table 107 */
    {CM_ATTR_REJ, "REJ", 84, CM_MAD_REJ_PD},		    /* table 108 */
    {CM_ATTR_REP, "REP", 36, CM_MAD_REP_PD},		    /* table 110 */
    {CM_ATTR_RTU, "RTU", 8, CM_MAD_RTU_PD},		    /* table 111 */
    {CM_ATTR_DREQ, "DREQ", 12, CM_MAD_DREQ_PD},		    /* table 112 */
    {CM_ATTR_DREP, "DREP", 8, CM_MAD_DREP_PD},		    /* table 113 */
    {CM_ATTR_SIDR_REQ, "SIDR_REQ", 16, CM_MAD_SIDR_REQ_PD}, /* table 119 */
    {CM_ATTR_SIDR_REP, "SIDR_REP", 96, CM_MAD_SIDR_REP_PD}, /* table 120 */
};

static const struct attr_info *attr_find(uint16_t attr)
{
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (attrs[i].attr == attr)
			return &attrs[i];
	return NULL;
}

size_t cm_mad_pd_size(uint16_t attr)
{
	const struct attr_info *ai = attr_find(attr);

	return ai ? ai->pd_len : 0;
}

const char *cm_mad_name(uint16_t attr)
{
	const struct attr_info *ai = attr_find(attr);

	return ai ? ai->name : "?";
}

/* ---- the field table ---- */

/* A number field: the `bits`-bit value whose least significant bit is bit `shift` of the
 * big-endian container of `len` bytes at body offset `off`. A byte string (bits == 0): `len`
 * bytes at `off`, copied as they are. `max` (if non-zero) is the largest legal value.
 * A member split over several places (the REP's vendor ID: three bytes apart) has one entry
 * per part: the part holds the member's bits [vshift, vshift + bits); `low` marks the parts
 * below the most significant one, whose bits are taken as they are (the top part alone
 * checks the member's width). */
struct field {
	uint16_t attr;
	uint8_t off;
	uint8_t len;
	uint8_t shift;
	uint8_t bits;
	uint8_t max;
	uint8_t vshift;
	bool low;
	uint8_t msize;	 /* sizeof the member */
	uint16_t member; /* offsetof(struct cm_mad, member) */
};

/* The member must be able to hold the field: a table mistake fails to compile. */
#define MSIZE(mem, bits_)                                                                          \
	(sizeof(((struct cm_mad *)0)->mem) +                                                       \
	 0 * sizeof(char[(bits_) <= 8 * sizeof(((struct cm_mad *)0)->mem) ? 1 : -1]))
#define NUM(a, off_, len_, shift_, bits_, mem)                                                     \
	{                                                                                          \
		(a), (off_), (len_), (shift_), (bits_), 0, 0, false, MSIZE(mem, bits_),            \
		    offsetof(struct cm_mad, mem)                                                   \
	}
#define NUMMAX(a, off_, len_, shift_, bits_, max_, mem)                                            \
	{                                                                                          \
		(a), (off_), (len_), (shift_), (bits_), (max_), 0, false, MSIZE(mem, bits_),       \
		    offsetof(struct cm_mad, mem)                                                   \
	}
/* One byte holding bits [vshift_, vshift_ + 8) of a split member (low_: not the top part). */
#define PART8(a, off_, vshift_, low_, mem)                                                         \
	{                                                                                          \
		(a), (off_), 1, 0, 8, 0, (vshift_), (low_), MSIZE(mem, (vshift_) + 8),             \
		    offsetof(struct cm_mad, mem)                                                   \
	}
#define STR(a, off_, len_, mem)                                                                    \
	{                                                                                          \
		(a), (off_), (len_), 0, 0, 0, 0, false, sizeof(((struct cm_mad *)0)->mem),         \
		    offsetof(struct cm_mad, mem)                                                   \
	}

/* Reserved bits and bytes are absent from the table: ignored on receive, sent as zero. Not
 * decoded either (sent as zero): the EE context numbers (RD only), the REQ's alternate path
 * and its SAP Supported bit, and the SIDR_REP's ECE vendor ID (6-7/11). The REQ's and the
 * REP's ECE vendor ID are where Linux's ib_cm puts them in reserved space (ibta_vol1_c12.h
 * CM_REQ_VENDOR_ID: a 24-bit field at byte 5, that is bytes 5-7; CM_REP_VENDOR_ID_H / _M / _L:
 * bytes 15, 19, 23; cm_format_req / cm_format_rep write them, cm_format_req_event /
 * cm_format_rep_event read them); 0 from rxe, which has no ECE. */
static const struct field fields[] = {
    /* REQ, table 106 */
    NUM(CM_ATTR_REQ, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_REQ, 5, 3, 0, 24, vendor_id),
    NUM(CM_ATTR_REQ, 8, 8, 0, 64, service_id),
    NUM(CM_ATTR_REQ, 16, 8, 0, 64, ca_guid),
    NUM(CM_ATTR_REQ, 28, 4, 0, 32, qkey),
    NUM(CM_ATTR_REQ, 32, 3, 0, 24, qpn),
    NUM(CM_ATTR_REQ, 35, 1, 0, 8, resp_res),
    NUM(CM_ATTR_REQ, 39, 1, 0, 8, init_depth),
    NUM(CM_ATTR_REQ, 43, 1, 3, 5, remote_cm_timeout),
    NUM(CM_ATTR_REQ, 43, 1, 1, 2, transport),
    NUM(CM_ATTR_REQ, 43, 1, 0, 1, e2e_fc),
    NUM(CM_ATTR_REQ, 44, 3, 0, 24, psn),
    NUM(CM_ATTR_REQ, 47, 1, 3, 5, local_cm_timeout),
    NUM(CM_ATTR_REQ, 47, 1, 0, 3, retry_count),
    NUM(CM_ATTR_REQ, 48, 2, 0, 16, pkey),
    NUM(CM_ATTR_REQ, 50, 1, 4, 4, mtu),
    NUM(CM_ATTR_REQ, 50, 1, 3, 1, rdc_exists),
    NUM(CM_ATTR_REQ, 50, 1, 0, 3, rnr_retry),
    NUM(CM_ATTR_REQ, 51, 1, 4, 4, max_cm_retries),
    NUM(CM_ATTR_REQ, 51, 1, 3, 1, srq),
    NUM(CM_ATTR_REQ, 51, 1, 0, 3, ext_transport),
    NUM(CM_ATTR_REQ, 52, 2, 0, 16, slid),
    NUM(CM_ATTR_REQ, 54, 2, 0, 16, dlid),
    STR(CM_ATTR_REQ, 56, 16, sgid),
    STR(CM_ATTR_REQ, 72, 16, dgid),
    NUM(CM_ATTR_REQ, 88, 4, 12, 20, flow_label), /* 88-91: label [31:12], rsvd [11:6] */
    NUM(CM_ATTR_REQ, 91, 1, 0, 6, packet_rate),
    NUM(CM_ATTR_REQ, 92, 1, 0, 8, traffic_class),
    NUM(CM_ATTR_REQ, 93, 1, 0, 8, hop_limit),
    NUM(CM_ATTR_REQ, 94, 1, 4, 4, sl),
    NUM(CM_ATTR_REQ, 94, 1, 3, 1, subnet_local),
    NUM(CM_ATTR_REQ, 95, 1, 3, 5, local_ack_timeout),

    /* MRA, table 107 */
    NUM(CM_ATTR_MRA, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_MRA, 4, 4, 0, 32, remote_id),
    NUM(CM_ATTR_MRA, 8, 1, 6, 2, msg_mraed),
    NUM(CM_ATTR_MRA, 9, 1, 3, 5, service_timeout),

    /* REJ, table 108 */
    NUM(CM_ATTR_REJ, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_REJ, 4, 4, 0, 32, remote_id),
    NUM(CM_ATTR_REJ, 8, 1, 6, 2, msg_rejected),
    NUMMAX(CM_ATTR_REJ, 9, 1, 1, 7, CM_MAD_ARI_MAX, ari_len),
    NUM(CM_ATTR_REJ, 10, 2, 0, 16, reason),
    STR(CM_ATTR_REJ, 12, CM_MAD_ARI_MAX, ari),

    /* REP, table 110 */
    NUM(CM_ATTR_REP, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_REP, 4, 4, 0, 32, remote_id),
    NUM(CM_ATTR_REP, 8, 4, 0, 32, qkey),
    NUM(CM_ATTR_REP, 12, 3, 0, 24, qpn),
    PART8(CM_ATTR_REP, 15, 16, false, vendor_id), /* VendorID[23:16] */
    PART8(CM_ATTR_REP, 19, 8, true, vendor_id),	  /* VendorID[15:8] */
    NUM(CM_ATTR_REP, 20, 3, 0, 24, psn),
    PART8(CM_ATTR_REP, 23, 0, true, vendor_id), /* VendorID[7:0] */
    NUM(CM_ATTR_REP, 24, 1, 0, 8, resp_res),
    NUM(CM_ATTR_REP, 25, 1, 0, 8, init_depth),
    NUM(CM_ATTR_REP, 26, 1, 3, 5, target_ack_delay),
    NUM(CM_ATTR_REP, 26, 1, 1, 2, failover),
    NUM(CM_ATTR_REP, 26, 1, 0, 1, e2e_fc),
    NUM(CM_ATTR_REP, 27, 1, 5, 3, rnr_retry),
    NUM(CM_ATTR_REP, 27, 1, 4, 1, srq),
    NUM(CM_ATTR_REP, 28, 8, 0, 64, ca_guid),

    /* RTU, table 111 */
    NUM(CM_ATTR_RTU, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_RTU, 4, 4, 0, 32, remote_id),

    /* DREQ, table 112 */
    NUM(CM_ATTR_DREQ, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_DREQ, 4, 4, 0, 32, remote_id),
    NUM(CM_ATTR_DREQ, 8, 3, 0, 24, qpn),

    /* DREP, table 113 */
    NUM(CM_ATTR_DREP, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_DREP, 4, 4, 0, 32, remote_id),

    /* SIDR_REQ, table 119 */
    NUM(CM_ATTR_SIDR_REQ, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_SIDR_REQ, 4, 2, 0, 16, pkey),
    NUM(CM_ATTR_SIDR_REQ, 8, 8, 0, 64, service_id),

    /* SIDR_REP, table 120: the Additional Information (a ClassPortInfo when the status is
     * "redirect") lives in ari / ari_len. */
    NUM(CM_ATTR_SIDR_REP, 0, 4, 0, 32, local_id),
    NUM(CM_ATTR_SIDR_REP, 4, 1, 0, 8, sidr_status),
    NUMMAX(CM_ATTR_SIDR_REP, 5, 1, 0, 8, CM_MAD_ARI_MAX, ari_len),
    NUM(CM_ATTR_SIDR_REP, 8, 3, 0, 24, qpn),
    NUM(CM_ATTR_SIDR_REP, 12, 8, 0, 64, service_id),
    NUM(CM_ATTR_SIDR_REP, 20, 4, 0, 32, qkey),
    STR(CM_ATTR_SIDR_REP, 24, CM_MAD_ARI_MAX, ari),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* ---- struct members by table entry ---- */

static uint64_t member_get(const struct cm_mad *m, const struct field *f)
{
	const unsigned char *p = (const unsigned char *)m + f->member;
	uint8_t v8;
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	switch (f->msize) {
	case 1: /* uint8_t or bool: read as a byte, never loaded as a possibly invalid bool */
		memcpy(&v8, p, 1);
		return v8;
	case 2:
		memcpy(&v16, p, 2);
		return v16;
	case 4:
		memcpy(&v32, p, 4);
		return v32;
	default:
		memcpy(&v64, p, 8);
		return v64;
	}
}

/* v fits the member (the table guarantees bits <= 8 * msize); a bool gets 0 or 1 (bits 1). */
static void member_set(struct cm_mad *m, const struct field *f, uint64_t v)
{
	unsigned char *p = (unsigned char *)m + f->member;
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	switch (f->msize) {
	case 1:
		memcpy(p, &v8, 1);
		break;
	case 2:
		memcpy(p, &v16, 2);
		break;
	case 4:
		memcpy(p, &v32, 4);
		break;
	default:
		memcpy(p, &v, 8);
		break;
	}
}

static uint64_t mask_of(unsigned bits)
{
	return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

/* ---- bounded read view ---- */

/* Getters return 0 and set `bad` instead of reading outside [p, p + len). */
struct rview {
	const uint8_t *p;
	size_t len;
	bool bad;
};

static bool in_bounds(struct rview *v, size_t off, size_t n)
{
	if (off > v->len || n > v->len - off) {
		v->bad = true;
		return false;
	}
	return true;
}

static uint64_t rd_be(struct rview *v, size_t off, size_t n)
{
	uint64_t x = 0;

	if (n > 8 || !in_bounds(v, off, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		x = x << 8 | v->p[off + i];
	return x;
}

static void rd_mem(struct rview *v, size_t off, void *out, size_t n)
{
	if (in_bounds(v, off, n))
		memcpy(out, v->p + off, n);
	else
		memset(out, 0, n);
}

/* ---- write helpers (out is exactly CM_MAD_LEN bytes; offsets come from the tables) ---- */

static void wr_be(uint8_t *p, size_t n, uint64_t v)
{
	for (size_t i = n; i-- > 0;) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

/* ORs a field into its container (the buffer was zeroed first, so sibling fields that share
 * the container survive). */
static void or_be(uint8_t *p, size_t n, uint64_t v)
{
	for (size_t i = n; i-- > 0;) {
		p[i] |= (uint8_t)v;
		v >>= 8;
	}
}

/* ---- parse ---- */

int cm_mad_parse(const uint8_t *buf, size_t len, struct cm_mad *out)
{
	struct rview h, b;
	const struct attr_info *ai;
	uint16_t attr;

	memset(out, 0, sizeof(*out));
	if (!buf || len < CM_MAD_LEN)
		return -EMSGSIZE;
	h = (struct rview){buf, CM_MAD_HDR_LEN, false};
	b = (struct rview){buf + CM_MAD_HDR_LEN, BODY_LEN, false};

	/* MAD common header (IBTA 13.4.2). Byte 3 is R | Method: CM only ever sends
	 * Send (0x03) with R clear, so the whole byte is compared. */
	if (rd_be(&h, 0, 1) != CM_MAD_BASE_VERSION || rd_be(&h, 1, 1) != CM_MAD_CLASS ||
	    rd_be(&h, 3, 1) != CM_MAD_METHOD_SEND)
		return -EPROTO;
	if (rd_be(&h, 2, 1) != CM_MAD_CLASS_VERSION)
		return -EPROTONOSUPPORT;
	attr = (uint16_t)rd_be(&h, 16, 2);
	ai = attr_find(attr);
	if (!ai)
		return -EBADMSG;

	/* Validate before filling: a refused MAD leaves *out zeroed. */
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];
		uint64_t v;

		if (f->attr != attr || !f->bits || !f->max)
			continue;
		v = rd_be(&b, f->off, f->len) >> f->shift & mask_of(f->bits);
		if (v > f->max)
			return -EBADMSG;
	}

	out->attr = attr;
	out->status = (uint16_t)rd_be(&h, 4, 2);
	/* 6-7 ClassSpecific and 18-19 are reserved for the CM class: ignored. */
	out->tid = rd_be(&h, 8, 8);
	out->attr_mod = (uint32_t)rd_be(&h, 20, 4);
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];

		if (f->attr != attr)
			continue;
		if (f->bits)
			/* |: the parts of a split member add up (out starts zeroed). */
			member_set(out, f,
				   member_get(out, f) |
				       (rd_be(&b, f->off, f->len) >> f->shift & mask_of(f->bits))
					   << f->vshift);
		else
			rd_mem(&b, f->off, (unsigned char *)out + f->member, f->len);
	}
	rd_mem(&b, ai->pd_off, out->pd, ai->pd_len);

	/* Unreachable after the length check; kept so a table error cannot become an
	 * over-read that goes unnoticed. */
	if (h.bad || b.bad) {
		memset(out, 0, sizeof(*out));
		return -EMSGSIZE;
	}
	return 0;
}

/* ---- build ---- */

int cm_mad_build(const struct cm_mad *m, uint8_t out[CM_MAD_LEN])
{
	const struct attr_info *ai = attr_find(m->attr);
	uint8_t *body = out + CM_MAD_HDR_LEN;

	if (!ai)
		return -EINVAL;
	/* Every check before the first byte is written: a refused build leaves out as it was. */
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];
		uint64_t v;

		if (f->attr != m->attr || !f->bits || f->low)
			continue;
		v = member_get(m, f) >> f->vshift;
		if (v & ~mask_of(f->bits) || (f->max && v > f->max))
			return -EINVAL;
	}

	memset(out, 0, CM_MAD_LEN);
	out[0] = CM_MAD_BASE_VERSION;
	out[1] = CM_MAD_CLASS;
	out[2] = CM_MAD_CLASS_VERSION;
	out[3] = CM_MAD_METHOD_SEND;
	wr_be(out + 4, 2, m->status);
	wr_be(out + 8, 8, m->tid);
	wr_be(out + 16, 2, m->attr);
	wr_be(out + 20, 4, m->attr_mod);
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];

		if (f->attr != m->attr)
			continue;
		if (f->bits)
			or_be(body + f->off, f->len,
			      (member_get(m, f) >> f->vshift & mask_of(f->bits)) << f->shift);
		else
			memcpy(body + f->off, (const unsigned char *)m + f->member, f->len);
	}
	memcpy(body + ai->pd_off, m->pd, ai->pd_len);
	return CM_MAD_LEN;
}

/* ---- routing and answers (core/gsi.h) ---- */

/* The table's entry for a member of an attribute's message, or NULL. */
static const struct field *field_of(uint16_t attr, size_t member)
{
	for (size_t i = 0; i < NFIELDS; i++)
		if (fields[i].attr == attr && fields[i].member == member)
			return &fields[i];
	return NULL;
}

void cm_mad_route_key(const uint8_t mad[CM_MAD_LEN], uint16_t *attr, uint64_t *sid, uint32_t *id)
{
	struct rview b = {mad + CM_MAD_HDR_LEN, BODY_LEN, false};
	const struct field *f;

	*attr = (uint16_t)(mad[16] << 8 | mad[17]);
	*sid = 0;
	*id = 0;
	if (*attr == CM_ATTR_REQ || *attr == CM_ATTR_SIDR_REQ) {
		f = field_of(*attr, offsetof(struct cm_mad, service_id));
		*sid = rd_be(&b, f->off, f->len);
		return;
	}
	f = field_of(*attr, *attr == CM_ATTR_SIDR_REP ? offsetof(struct cm_mad, local_id)
						      : offsetof(struct cm_mad, remote_id));
	*id = (uint32_t)(f ? rd_be(&b, f->off, f->len) : rd_be(&b, 4, 4));
}

int cm_mad_answer_nobody(const struct cm_mad *in, struct cm_mad *out)
{
	memset(out, 0, sizeof(*out));
	out->tid = in->tid;
	switch (in->attr) {
	case CM_ATTR_REQ:
	case CM_ATTR_REP:
		out->attr = CM_ATTR_REJ;
		out->local_id = in->remote_id;
		out->remote_id = in->local_id;
		out->msg_rejected = in->attr == CM_ATTR_REQ ? CM_MAD_MSG_REQ : CM_MAD_MSG_REP;
		out->reason = in->attr == CM_ATTR_REQ ? 8 : 6; /* invalid service ID / comm ID */
		return 0;
	case CM_ATTR_SIDR_REQ:
		out->attr = CM_ATTR_SIDR_REP;
		out->local_id = in->local_id;
		out->service_id = in->service_id;
		out->sidr_status = 1; /* IB_SIDR_UNSUPPORTED */
		return 0;
	case CM_ATTR_DREQ:
		out->attr = CM_ATTR_DREP;
		out->local_id = in->remote_id;
		out->remote_id = in->local_id;
		return 0;
	default:
		return -ENOENT;
	}
}

/* ---- rdma_cm IP private-data header (Annex A11; kernel struct cma_hdr) ---- */

#define CMA_VERSION 0x00

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

int cm_cma_hdr_build(const struct cm_cma_hdr *h, uint8_t out[CM_MAD_CMA_HDR_LEN])
{
	if (!h->ipv6 &&
	    (memcmp(h->src, v4mapped_prefix, 12) != 0 || memcmp(h->dst, v4mapped_prefix, 12) != 0))
		return -EINVAL;
	memset(out, 0, CM_MAD_CMA_HDR_LEN);
	out[0] = CMA_VERSION;
	out[1] = h->ipv6 ? 0x60 : 0x40; /* IP version in the high nibble, low nibble reserved */
	wr_be(out + 2, 2, h->sport);
	if (h->ipv6) {
		memcpy(out + 4, h->src, 16);
		memcpy(out + 20, h->dst, 16);
	} else {
		/* IPv4: 12 zero bytes, then the address (not ::ffff-mapped on the wire). */
		memcpy(out + 4 + 12, h->src + 12, 4);
		memcpy(out + 20 + 12, h->dst + 12, 4);
	}
	return CM_MAD_CMA_HDR_LEN;
}

int cm_cma_hdr_parse(const uint8_t in[CM_MAD_CMA_HDR_LEN], struct cm_cma_hdr *h)
{
	static const uint8_t zeros[12];
	struct rview v = {in, CM_MAD_CMA_HDR_LEN, false};
	uint8_t ipver = (uint8_t)(rd_be(&v, 1, 1) >> 4);

	memset(h, 0, sizeof(*h));
	if (rd_be(&v, 0, 1) != CMA_VERSION || (ipver != 4 && ipver != 6))
		return -EBADMSG;
	if (ipver == 4 && (memcmp(in + 4, zeros, 12) != 0 || memcmp(in + 20, zeros, 12) != 0))
		return -EBADMSG;
	h->ipv6 = ipver == 6;
	h->sport = (uint16_t)rd_be(&v, 2, 2);
	if (h->ipv6) {
		rd_mem(&v, 4, h->src, 16);
		rd_mem(&v, 20, h->dst, 16);
	} else {
		memcpy(h->src, v4mapped_prefix, 12);
		memcpy(h->dst, v4mapped_prefix, 12);
		rd_mem(&v, 16, h->src + 12, 4);
		rd_mem(&v, 32, h->dst + 12, 4);
	}
	return 0;
}
