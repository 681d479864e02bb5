/* MPA Request / Reply / Reject frames: RFC 5044 section 7.1 (layout, key, flags, Rev,
 * PD_Length), RFC 6581 sections 5-7 (revision 2, the IRD/ORD block, P2P and RTR), and siw's
 * negotiation rules (siw_cm.c: siw_proc_mpareq, siw_proc_mpareply, siw_send_mpareqrep). */
#include "wire/iwarp/iwarp.h"

#include <errno.h>
#include <string.h>

static const uint8_t key_req[IW_MPA_KEY_LEN] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
						'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
static const uint8_t key_rep[IW_MPA_KEY_LEN] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
						'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};

#define V2_P2P	     0x8000 /* IRD word */
#define V2_RTR_SEND  0x4000 /* IRD word */
#define V2_RTR_WRITE 0x8000 /* ORD word */
#define V2_RTR_READ  0x4000 /* ORD word */

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

size_t iw_mpa_len(const struct iw_mpa *f)
{
	return IW_MPA_HDR_LEN + (iw_mpa_has_v2(f) ? IW_MPA_V2_LEN : 0) + f->pd_len;
}

int iw_mpa_encode(const struct iw_mpa *f, uint8_t *out, size_t cap)
{
	size_t pdl, total;
	uint8_t *p;

	if (!f || (!out && cap))
		return -EINVAL;
	if ((f->kind != IW_MPA_REQ && f->kind != IW_MPA_REP) || (f->r && f->kind == IW_MPA_REQ))
		return -EINVAL;
	if (f->rev != 1 && f->rev != 2)
		return -EINVAL;
	if (f->pd_len && !f->pd)
		return -EINVAL;
	if (iw_mpa_has_v2(f) && (f->v2.ird > IW_MPA_IRD_ORD_MAX || f->v2.ord > IW_MPA_IRD_ORD_MAX))
		return -EINVAL;
	pdl = iw_mpa_len(f) - IW_MPA_HDR_LEN;
	if (pdl > IW_MPA_PD_MAX) /* RFC 5044 7.1 */
		return -EMSGSIZE;
	total = IW_MPA_HDR_LEN + pdl;
	if (cap < total)
		return -ENOSPC;
	p = out;
	memcpy(p, f->kind == IW_MPA_REQ ? key_req : key_rep, IW_MPA_KEY_LEN);
	p += IW_MPA_KEY_LEN;
	*p++ = (uint8_t)((f->m ? IW_MPA_F_M : 0) | (f->c ? IW_MPA_F_C : 0) |
			 (f->r ? IW_MPA_F_R : 0) | (f->enhanced ? IW_MPA_F_ENH : 0) |
			 (f->gso ? IW_MPA_F_GSO : 0) | (f->rsvd & IW_MPA_F_RSVD));
	*p++ = f->rev;
	put16(p, (uint16_t)pdl);
	p += 2;
	if (iw_mpa_has_v2(f)) { /* RFC 6581 */
		put16(p, (uint16_t)((f->v2.p2p ? V2_P2P : 0) | (f->v2.rtr_send ? V2_RTR_SEND : 0) |
				    f->v2.ird));
		put16(p + 2, (uint16_t)((f->v2.rtr_write ? V2_RTR_WRITE : 0) |
					(f->v2.rtr_read ? V2_RTR_READ : 0) | f->v2.ord));
		p += IW_MPA_V2_LEN;
	}
	if (f->pd_len)
		memcpy(p, f->pd, f->pd_len);
	return (int)total;
}

int iw_mpa_decode(const uint8_t *buf, size_t len, uint8_t expect, struct iw_mpa *out)
{
	size_t k = len < IW_MPA_KEY_LEN ? len : IW_MPA_KEY_LEN;
	bool is_req, is_rep;
	uint8_t flags, rev;
	uint16_t pdl;

	if ((!buf && len) || !out || expect > IW_MPA_REP)
		return -EINVAL;
	/* The key, byte by byte: a peer that is not speaking MPA is refused at once. */
	is_req = expect != IW_MPA_REP && (k == 0 || memcmp(buf, key_req, k) == 0);
	is_rep = expect != IW_MPA_REQ && (k == 0 || memcmp(buf, key_rep, k) == 0);
	if (!is_req && !is_rep)
		return -IW_E_MPA_KEY;
	if (len < IW_MPA_KEY_LEN + 2)
		return -EAGAIN;
	rev = buf[IW_MPA_KEY_LEN + 1];
	if (rev != 1 && rev != 2) /* RFC 5044 7.1 Rev 1, RFC 6581 Rev 2 */
		return -IW_E_MPA_REV;
	if (len < IW_MPA_HDR_LEN)
		return -EAGAIN;
	pdl = be16(buf + IW_MPA_KEY_LEN + 2);
	if (pdl > IW_MPA_PD_MAX)
		return -IW_E_MPA_PD_LEN;
	if (len < (size_t)IW_MPA_HDR_LEN + pdl)
		return -EAGAIN;

	memset(out, 0, sizeof(*out));
	flags = buf[IW_MPA_KEY_LEN];
	out->kind = is_req ? IW_MPA_REQ : IW_MPA_REP; /* the full keys differ: only one matches */
	out->m = flags & IW_MPA_F_M;
	out->c = flags & IW_MPA_F_C;
	out->r = flags & IW_MPA_F_R;
	out->enhanced = flags & IW_MPA_F_ENH;
	out->gso = flags & IW_MPA_F_GSO;
	out->rsvd = flags & IW_MPA_F_RSVD;
	out->rev = rev;
	out->pd = buf + IW_MPA_HDR_LEN;
	out->pd_len = pdl;
	if (iw_mpa_has_v2(out)) {
		const uint8_t *v = buf + IW_MPA_HDR_LEN;
		uint16_t ird, ord;

		if (pdl < IW_MPA_V2_LEN) /* siw: reject */
			return -IW_E_MPA_V2;
		ird = be16(v);
		ord = be16(v + 2);
		out->v2.p2p = ird & V2_P2P;
		out->v2.rtr_send = ird & V2_RTR_SEND;
		out->v2.ird = ird & IW_MPA_IRD_ORD_MAX;
		out->v2.rtr_write = ord & V2_RTR_WRITE;
		out->v2.rtr_read = ord & V2_RTR_READ;
		out->v2.ord = ord & IW_MPA_IRD_ORD_MAX;
		out->pd = v + IW_MPA_V2_LEN;
		out->pd_len = (uint16_t)(pdl - IW_MPA_V2_LEN);
	}
	if (out->m) /* RFC 5044 7.1: a responder that cannot do markers rejects */
		return -IW_E_MPA_MARKERS;
	return IW_MPA_HDR_LEN + pdl;
}

void iw_mpa_req_init(struct iw_mpa *req, bool crc, uint16_t ird, uint16_t ord, const uint8_t *pd,
		     uint16_t pd_len)
{
	memset(req, 0, sizeof(*req));
	req->kind = IW_MPA_REQ;
	req->c = crc;
	req->enhanced = true;
	req->rev = 2;
	req->v2.ird = ird & IW_MPA_IRD_ORD_MAX;
	req->v2.ord = ord & IW_MPA_IRD_ORD_MAX;
	req->pd = pd;
	req->pd_len = pd_len;
}

int iw_mpa_reply_init(struct iw_mpa *rep, const struct iw_mpa *req, bool crc_required, uint16_t ird,
		      uint16_t ord, const uint8_t *pd, uint16_t pd_len)
{
	*rep = *req;
	rep->kind = IW_MPA_REP;
	rep->m = false;
	rep->r = false;
	rep->c = req->c || crc_required; /* RFC 5044 7.1: CRC MUST be used if asked for */
	rep->pd = pd;
	rep->pd_len = pd_len;
	memset(&rep->v2, 0, sizeof(rep->v2));
	if (iw_mpa_has_v2(req)) {
		rep->v2.ird = ird & IW_MPA_IRD_ORD_MAX;
		rep->v2.ord = ord & IW_MPA_IRD_ORD_MAX;
		if (req->v2.p2p) { /* RFC 6581 7: exactly one RTR type; siw prefers Write */
			rep->v2.p2p = true;
			rep->v2.rtr_write = req->v2.rtr_write || !req->v2.rtr_read;
			rep->v2.rtr_read = !rep->v2.rtr_write;
		}
	}
	return req->m ? -IW_E_MPA_MARKERS : 0;
}

void iw_mpa_reject_init(struct iw_mpa *rej, const struct iw_mpa *req, const uint8_t *pd,
			uint16_t pd_len)
{
	*rej = *req;
	rej->kind = IW_MPA_REP;
	rej->m = false;
	rej->r = true;
	memset(&rej->v2, 0, sizeof(rej->v2));
	rej->pd = pd;
	rej->pd_len = pd_len;
}

int iw_mpa_check_reply(const struct iw_mpa *req, const struct iw_mpa *rep)
{
	if (rep->kind != IW_MPA_REP)
		return -IW_E_MPA_KEY;
	if (rep->r)
		return -ECONNREFUSED;
	if (rep->m)
		return -IW_E_MPA_MARKERS;
	if (iw_mpa_has_v2(req)) {
		bool w = req->v2.p2p && req->v2.rtr_write, rd = req->v2.p2p && req->v2.rtr_read;

		/* RFC 6581: the responder MUST answer an enhanced request in kind. */
		if (!iw_mpa_has_v2(rep))
			return -IW_E_MPA_V2;
		if ((w || rd) && !((w && rep->v2.rtr_write) || (rd && rep->v2.rtr_read)))
			return -IW_E_MPA_RTR;
	}
	return 0;
}
