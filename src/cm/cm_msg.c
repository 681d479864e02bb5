/* The interim RoCE CM messages (cm_msg.h): one table of facts per type, bounded cursors. */
#include "cm/cm_msg.h"

#include <errno.h>
#include <string.h>

#define BODY_ADDR 32 /* REQ and REP: qpn, psn, gid, the byte fields, reserved */
#define BODY_REJ  4  /* reason, reserved */
#define BODY_SREQ 16 /* request ID, P_Key, reserved, service ID */
#define BODY_SREP 16 /* request ID, status, reserved, QPN, Q_Key */

static const struct {
	const char *name;
	uint16_t len; /* total */
	uint8_t pd;   /* private data size */
} types[CM_MSG__END] = {
    [CM_MSG_REQ] = {"REQ", CM_MSG_HDR + BODY_ADDR + CM_REQ_PD, CM_REQ_PD},
    [CM_MSG_REP] = {"REP", CM_MSG_HDR + BODY_ADDR + CM_REP_PD, CM_REP_PD},
    [CM_MSG_RTU] = {"RTU", CM_MSG_HDR, 0},
    [CM_MSG_REJ] = {"REJ", CM_MSG_HDR + BODY_REJ + CM_REJ_PD, CM_REJ_PD},
    [CM_MSG_DREQ] = {"DREQ", CM_MSG_HDR, 0},
    [CM_MSG_DREP] = {"DREP", CM_MSG_HDR, 0},
    [CM_MSG_SIDR_REQ] = {"SIDR_REQ", CM_MSG_HDR + BODY_SREQ + CM_SIDR_REQ_PD, CM_SIDR_REQ_PD},
    [CM_MSG_SIDR_REP] = {"SIDR_REP", CM_MSG_HDR + BODY_SREP + CM_SIDR_REP_PD, CM_SIDR_REP_PD},
};

static bool known(uint8_t type)
{
	return type > 0 && type < CM_MSG__END;
}

size_t cm_msg_len(uint8_t type)
{
	return known(type) ? types[type].len : 0;
}

size_t cm_msg_pd_size(uint8_t type)
{
	return known(type) ? types[type].pd : 0;
}

const char *cm_msg_name(uint8_t type)
{
	return known(type) ? types[type].name : "?";
}

/* ---- cursors ---- */

struct wcur {
	uint8_t *p;
	size_t left;
};

static void put8(struct wcur *w, uint8_t v)
{
	*w->p++ = v;
	w->left--;
}

static void put16(struct wcur *w, uint16_t v)
{
	put8(w, (uint8_t)(v >> 8));
	put8(w, (uint8_t)v);
}

static void put32(struct wcur *w, uint32_t v)
{
	put16(w, (uint16_t)(v >> 16));
	put16(w, (uint16_t)v);
}

static void put_bytes(struct wcur *w, const uint8_t *b, size_t n)
{
	memcpy(w->p, b, n);
	w->p += n;
	w->left -= n;
}

struct rcur {
	const uint8_t *p;
	size_t left;
};

/* The caller checked the length first (the table), so reads cannot run short; the cursor
 * still refuses to (returns 0) rather than read past the end. */
static uint8_t get8(struct rcur *r)
{
	if (!r->left)
		return 0;
	r->left--;
	return *r->p++;
}

static uint16_t get16(struct rcur *r)
{
	uint16_t hi = get8(r);
	return (uint16_t)(hi << 8 | get8(r));
}

static uint32_t get32(struct rcur *r)
{
	uint32_t hi = get16(r);
	return hi << 16 | get16(r);
}

static void get_bytes(struct rcur *r, uint8_t *b, size_t n)
{
	size_t k = n < r->left ? n : r->left;
	memcpy(b, r->p, k);
	memset(b + k, 0, n - k);
	r->p += k;
	r->left -= k;
}

/* ---- build ---- */

static bool fields_ok(const struct cm_msg *m)
{
	if (m->type == CM_MSG_SIDR_REP)
		return m->qpn <= 0xFFFFFF && m->status <= CM_SIDR_UNSUPPORTED_VERSION;
	if (m->type != CM_MSG_REQ && m->type != CM_MSG_REP)
		return true;
	return m->qpn <= 0xFFFFFF && m->psn <= 0xFFFFFF && m->retry <= 7 && m->rnr <= 7 &&
	       m->mtu >= 1 && m->mtu <= 5;
}

int cm_msg_build(const struct cm_msg *m, uint8_t *buf, size_t cap)
{
	if (!m || !buf || !known(m->type) || !fields_ok(m))
		return -EINVAL;
	size_t len = types[m->type].len;
	if (cap < len)
		return -ENOSPC;
	struct wcur w = {buf, cap};
	put_bytes(&w, (const uint8_t *)CM_MSG_MAGIC, 4);
	put8(&w, CM_MSG_VERSION);
	put8(&w, m->type);
	put16(&w, (uint16_t)len);
	switch (m->type) {
	case CM_MSG_REQ:
	case CM_MSG_REP:
		put32(&w, m->qpn);
		put32(&w, m->psn);
		put_bytes(&w, m->gid, 16);
		put8(&w, m->rr);
		put8(&w, m->depth);
		if (m->type == CM_MSG_REQ)
			put8(&w, m->retry);
		put8(&w, m->rnr);
		put8(&w, m->mtu);
		put8(&w, m->srq);
		while (w.p < buf + CM_MSG_HDR + BODY_ADDR)
			put8(&w, 0); /* reserved */
		break;
	case CM_MSG_REJ:
		put16(&w, m->reason);
		put16(&w, 0);
		break;
	case CM_MSG_SIDR_REQ:
		put32(&w, m->req_id);
		put16(&w, m->pkey);
		put16(&w, 0);
		put32(&w, (uint32_t)(m->sid >> 32));
		put32(&w, (uint32_t)m->sid);
		break;
	case CM_MSG_SIDR_REP:
		put32(&w, m->req_id);
		put8(&w, m->status);
		put8(&w, 0);
		put16(&w, 0);
		put32(&w, m->qpn);
		put32(&w, m->qkey);
		break;
	default:
		break;
	}
	put_bytes(&w, m->pd, types[m->type].pd);
	return (int)len;
}

/* ---- parse ---- */

int cm_msg_parse(const uint8_t *buf, size_t len, struct cm_msg *out, size_t *need)
{
	*need = CM_MSG_HDR;
	/* The magic byte by byte: a peer that speaks something else is found out at once. */
	size_t k = len < 4 ? len : 4;
	if (memcmp(buf, CM_MSG_MAGIC, k) != 0)
		return -EPROTO;
	if (len >= 5 && buf[4] != CM_MSG_VERSION)
		return -EPROTONOSUPPORT;
	if (len < CM_MSG_HDR)
		return -EAGAIN;
	uint8_t type = buf[5];
	size_t mlen = (size_t)buf[6] << 8 | buf[7];
	if (!known(type) || mlen != types[type].len)
		return -EBADMSG;
	*need = mlen;
	if (len < mlen)
		return -EAGAIN;
	struct cm_msg m;
	memset(&m, 0, sizeof(m));
	m.type = type;
	struct rcur r = {buf + CM_MSG_HDR, mlen - CM_MSG_HDR};
	switch (type) {
	case CM_MSG_REQ:
	case CM_MSG_REP:
		m.qpn = get32(&r);
		m.psn = get32(&r);
		get_bytes(&r, m.gid, 16);
		m.rr = get8(&r);
		m.depth = get8(&r);
		if (type == CM_MSG_REQ)
			m.retry = get8(&r);
		m.rnr = get8(&r);
		m.mtu = get8(&r);
		m.srq = get8(&r) != 0;
		while (r.p < buf + CM_MSG_HDR + BODY_ADDR)
			get8(&r);
		if (!fields_ok(&m))
			return -EBADMSG;
		break;
	case CM_MSG_REJ:
		m.reason = get16(&r);
		get16(&r);
		break;
	case CM_MSG_SIDR_REQ:
		m.req_id = get32(&r);
		m.pkey = get16(&r);
		get16(&r);
		m.sid = (uint64_t)get32(&r) << 32;
		m.sid |= get32(&r);
		break;
	case CM_MSG_SIDR_REP:
		m.req_id = get32(&r);
		m.status = get8(&r);
		get8(&r);
		get16(&r);
		m.qpn = get32(&r);
		m.qkey = get32(&r);
		if (!fields_ok(&m))
			return -EBADMSG;
		break;
	default:
		break;
	}
	m.pd_len = types[type].pd;
	get_bytes(&r, m.pd, m.pd_len);
	*out = m;
	return 0;
}
