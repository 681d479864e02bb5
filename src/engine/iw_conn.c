/* MPA connection set-up, both roles: RFC 5044 section 7.1 (Request / Reply / Reject, C, M, R,
 * Rev), RFC 6581 (revision 2: IRD/ORD block, peer-to-peer mode, RTR frames), with siw's rules
 * (siw_cm.c: siw_connect, siw_proc_mpareq, siw_accept, siw_reject, siw_proc_mpareply; siw_qp.c:
 * siw_qp_mpa_rts). Contract: engine/iw_conn.h. Sans-I/O: no sockets, no clock, no allocation. */
#define _GNU_SOURCE
#include "engine/iw_conn.h"

#include <errno.h>
#include <string.h>

/* ---- States ---- */

static const char *const state_names[] = {
#define X_NAME(name, desc) #name,
    IW_CONN_STATES(X_NAME)
#undef X_NAME
};

#define S(x) (1u << IW_CONN_##x)

/* Legal moves: next states allowed from each state. */
static const unsigned next_ok[IW_CONN_NSTATES] = {
    [IW_CONN_AWAIT_REQ] = S(REQ_RCVD) | S(REJECTED) | S(FAILED),
    [IW_CONN_REQ_RCVD] = S(AWAIT_RTR) | S(ESTABLISHED) | S(REJECTED) | S(FAILED),
    [IW_CONN_AWAIT_REP] = S(ESTABLISHED) | S(REJECTED) | S(FAILED),
    [IW_CONN_AWAIT_RTR] = S(ESTABLISHED) | S(FAILED),
    [IW_CONN_ESTABLISHED] = 0,
    [IW_CONN_REJECTED] = 0,
    [IW_CONN_FAILED] = 0,
};

/* The one transition function. Waiting states get their timer here. */
static int set_state(struct iw_conn *c, enum iw_conn_state s, uint64_t now)
{
	if ((unsigned)s >= IW_CONN_NSTATES || !(next_ok[c->state] & (1u << s)))
		return -EINVAL; /* our bug: callers check the state first */
	c->state = (uint8_t)s;
	c->info.state = (uint8_t)s;
	if (s == IW_CONN_AWAIT_REQ || s == IW_CONN_AWAIT_REP || s == IW_CONN_AWAIT_RTR)
		c->deadline = now + c->timeout_ns;
	else
		c->deadline = IW_CONN_NO_DEADLINE;
	return 0;
}

static bool waiting(const struct iw_conn *c)
{
	return c->state == IW_CONN_AWAIT_REQ || c->state == IW_CONN_AWAIT_REP ||
	       c->state == IW_CONN_AWAIT_RTR;
}

static bool ended(const struct iw_conn *c)
{
	return c->state == IW_CONN_REJECTED || c->state == IW_CONN_FAILED;
}

/* Ends the handshake without a connection. Returns err, for "return fail(c, err)". */
static int end(struct iw_conn *c, enum iw_conn_state s, int err)
{
	if (set_state(c, s, 0) == 0) {
		c->err = err;
		c->info.err = err;
	}
	return c->err;
}

static int fail(struct iw_conn *c, int err)
{
	return end(c, IW_CONN_FAILED, err);
}

/* ---- Outbound bytes ---- */

/* Room at the end of the pending bytes (compacting first). */
static uint8_t *tx_tail(struct iw_conn *c, size_t *room)
{
	if (c->tx_head) {
		memmove(c->tx, c->tx + c->tx_head, c->tx_len);
		c->tx_head = 0;
	}
	*room = sizeof(c->tx) - c->tx_len;
	return c->tx + c->tx_len;
}

/* Accounts bytes an encoder wrote at tx_tail(). */
static void tx_commit(struct iw_conn *c, int n)
{
	c->tx_len = (uint16_t)(c->tx_len + n);
	c->info.tx_queued += (uint64_t)n;
}

static int tx_mpa(struct iw_conn *c, const struct iw_mpa *f)
{
	size_t room;
	uint8_t *p = tx_tail(c, &room);
	int n = iw_mpa_encode(f, p, room);

	if (n > 0)
		tx_commit(c, n);
	return n < 0 ? n : 0;
}

static int tx_fpdu(struct iw_conn *c, const struct iw_fpdu *f, bool crc)
{
	size_t room;
	uint8_t *p = tx_tail(c, &room);
	int n = iw_fpdu_encode(f, crc, p, room);

	if (n > 0)
		tx_commit(c, n);
	return n < 0 ? n : 0;
}

/* Best effort Terminate for an iw_err (RFC 5040 4.8; the code from the wire layer's table),
 * MSN 1 as siw. raw: the offending FPDU's header, or NULL. */
static void tx_term(struct iw_conn *c, int err, bool crc, const uint8_t *raw, size_t raw_len)
{
	struct iw_term t;
	size_t room;
	uint8_t *p;
	int n;

	if (iw_term_from_err(err, raw, raw_len, &t) != 0)
		return;
	p = tx_tail(c, &room);
	n = iw_term_build(&t, 1, crc, p, room);
	if (n > 0)
		tx_commit(c, n);
}

size_t iw_conn_tx_peek(const struct iw_conn *c, const uint8_t **data)
{
	if (data)
		*data = c->tx_len ? c->tx + c->tx_head : NULL;
	return c->tx_len;
}

void iw_conn_tx_advance(struct iw_conn *c, size_t n)
{
	if (n > c->tx_len)
		n = c->tx_len;
	c->tx_head = (uint16_t)(c->tx_head + n);
	c->tx_len = (uint16_t)(c->tx_len - n);
	if (!c->tx_len)
		c->tx_head = 0;
}

/* ---- Policies ---- */

static bool crc_wanted(uint8_t policy)
{
	return policy == IW_CONN_CRC_REQUIRED || policy == IW_CONN_CRC_REQUIRED_STRICT;
}

static uint16_t min16(uint16_t a, uint16_t b)
{
	return a < b ? a : b;
}

static uint8_t rtr_bits(const struct iw_mpa_v2 *v)
{
	return (uint8_t)((v->rtr_write ? IW_CONN_RTR_WRITE : 0) |
			 (v->rtr_read ? IW_CONN_RTR_READ : 0) |
			 (v->rtr_send ? IW_CONN_RTR_SEND : 0));
}

/* The preferred RTR type in a bit set: Write, then Read, then Send (siw prefers Write; Send
 * needs a posted receive at the peer). */
static uint8_t rtr_pick(uint8_t set)
{
	if (set & IW_CONN_RTR_WRITE)
		return IW_CONN_RTR_WRITE;
	if (set & IW_CONN_RTR_READ)
		return IW_CONN_RTR_READ;
	if (set & IW_CONN_RTR_SEND)
		return IW_CONN_RTR_SEND;
	return IW_CONN_RTR_NONE;
}

static void set_rtr_bits(struct iw_mpa_v2 *v, uint8_t set)
{
	v->rtr_write = set & IW_CONN_RTR_WRITE;
	v->rtr_read = set & IW_CONN_RTR_READ;
	v->rtr_send = set & IW_CONN_RTR_SEND;
}

static size_t pd_max(const struct iw_mpa *f)
{
	return iw_mpa_has_v2(f) ? IW_CONN_PD_MAX_V2 : IW_CONN_PD_MAX_V1;
}

/* ---- Start ---- */

int iw_conn_init(struct iw_conn *c, const struct iw_conn_cfg *cfg, uint64_t now)
{
	uint16_t max_ird, max_ord, ord;
	uint8_t rev, rtr_types;
	struct iw_mpa req;

	/* Validate everything before touching *c. */
	if (!c || !cfg || (!cfg->pd && cfg->pd_len))
		return -EINVAL;
	if (cfg->role != IW_CONN_INITIATOR && cfg->role != IW_CONN_RESPONDER)
		return -EINVAL;
	if (cfg->crc > IW_CONN_CRC_OFF_STRICT || cfg->rev > 2 ||
	    (cfg->rtr_types & ~IW_CONN_RTR_ALL))
		return -EINVAL;
	rev = cfg->rev ? cfg->rev : 2;
	max_ird = cfg->max_ird ? cfg->max_ird : IW_CONN_IRD_ORD_DEFAULT_MAX;
	max_ord = cfg->max_ord ? cfg->max_ord : IW_CONN_IRD_ORD_DEFAULT_MAX;
	if (max_ird > IW_MPA_IRD_ORD_MAX || max_ord > IW_MPA_IRD_ORD_MAX)
		return -EINVAL;
	rtr_types = cfg->rtr_types ? cfg->rtr_types : IW_CONN_RTR_WRITE | IW_CONN_RTR_READ;
	memset(&req, 0, sizeof(req));
	ord = cfg->ord;
	if (cfg->role == IW_CONN_INITIATOR) {
		if (cfg->ird > max_ird || cfg->ord > max_ord || (cfg->p2p && rev != 2))
			return -EINVAL;
		if (rev == 2) {
			/* siw_connect: Rev 2, Enhanced, C per policy, IRD/ORD block */
			if (cfg->p2p && ord == 0)
				ord = 1; /* siw: P2P needs an ORD for a Read RTR */
			iw_mpa_req_init(&req, crc_wanted(cfg->crc), cfg->ird, ord, cfg->pd,
					cfg->pd_len);
			if (cfg->p2p) { /* RFC 6581: offer the RTR types */
				req.v2.p2p = true;
				set_rtr_bits(&req.v2, rtr_types);
			}
		} else {
			req.kind = IW_MPA_REQ;
			req.rev = 1;
			req.c = crc_wanted(cfg->crc);
			req.pd = cfg->pd;
			req.pd_len = cfg->pd_len;
		}
		if (cfg->pd_len > pd_max(&req))
			return -EMSGSIZE;
	}

	memset(c, 0, sizeof(*c));
	c->role = cfg->role;
	c->crc_policy = cfg->crc;
	c->max_rev = rev;
	c->rtr_types = rtr_types;
	c->fallback_ok = !cfg->no_rev1_fallback;
	c->strict_ird = cfg->strict_ird;
	c->max_ird = max_ird;
	c->max_ord = max_ord;
	c->info.role = cfg->role;
	c->deadline = IW_CONN_NO_DEADLINE;
	if (cfg->role == IW_CONN_RESPONDER) {
		c->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : IW_CONN_REQ_TIMEOUT_NS;
		c->state = IW_CONN_AWAIT_REQ;
		c->info.state = IW_CONN_AWAIT_REQ;
		c->deadline = now + c->timeout_ns;
		return 0;
	}
	c->timeout_ns = cfg->timeout_ns ? cfg->timeout_ns : IW_CONN_REP_TIMEOUT_NS;
	c->state = IW_CONN_AWAIT_REP;
	c->info.state = IW_CONN_AWAIT_REP;
	c->deadline = now + c->timeout_ns;
	c->info.ird = cfg->ird;
	c->info.ord = ord;
	if (tx_mpa(c, &req) != 0) { /* validated above: cannot fail */
		memset(c, 0, sizeof(*c));
		return -EINVAL;
	}
	req.pd = NULL; /* sent; keep only the flags, Rev and IRD/ORD for checking the Reply */
	req.pd_len = 0;
	c->req = req;
	return 0;
}

/* ---- Responder: the Request ---- */

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* Queues a protocol Reject (siw_proc_mpareq reject_conn: flags and Rev echoed, R set, M
 * cleared, no private data) and ends in REJECTED with `reason`. */
static int proto_reject(struct iw_conn *c, const struct iw_mpa *req, int reason)
{
	struct iw_mpa rej;

	iw_mpa_reject_init(&rej, req, NULL, 0);
	if (tx_mpa(c, &rej) != 0)
		return fail(c, reason);
	return end(c, IW_CONN_REJECTED, reason);
}

/* A Request whose Rev we do not speak: once the whole frame is in (so that closing does not
 * reset the connection under the peer's unread Reject), reject it with Rev 1, the base
 * revision every MPA implementation parses (RFC 5044 7.1: "MUST close the connection or
 * return an MPA Reply with Rej set"). */
static int reject_rev(struct iw_conn *c)
{
	struct iw_mpa req;
	uint16_t pdl;

	if (c->rx_have < IW_MPA_HDR_LEN)
		return 0;
	pdl = rd16(c->rx + IW_MPA_KEY_LEN + 2);
	if (pdl <= IW_MPA_PD_MAX && c->rx_have < IW_MPA_HDR_LEN + pdl)
		return 0;
	memset(&req, 0, sizeof(req));
	req.kind = IW_MPA_REQ;
	req.rev = 1;
	return proto_reject(c, &req, -IW_E_MPA_REV);
}

/* A complete, decoded Request (dr = iw_mpa_decode's result). */
static int on_request(struct iw_conn *c, int dr, const struct iw_mpa *got)
{
	struct iw_mpa req;

	if (dr == -IW_E_MPA_REV)
		return reject_rev(c);
	if (dr == -IW_E_MPA_MARKERS) /* RFC 5044 7.1: we cannot do markers */
		return proto_reject(c, got, -IW_E_MPA_MARKERS);
	if (dr == -IW_E_MPA_V2) { /* siw: Enhanced without room for the block: reject */
		req = *got;
		req.enhanced = false;
		return proto_reject(c, &req, -IW_E_MPA_V2);
	}
	if (dr < 0) /* wrong key, PD_Length > 512: not an MPA peer we can answer (siw: EPROTO) */
		return fail(c, dr);

	req = *got;
	c->info.peer_crc = got->c;
	if (got->rev > c->max_rev) { /* answer in the lower revision (we speak only Rev 1) */
		req.rev = c->max_rev;
		req.enhanced = false;
	}
	/* RFC 5044 7.1: CRC must be used if the peer asks; the strict policies refuse. */
	if ((got->c && c->crc_policy == IW_CONN_CRC_OFF_STRICT) ||
	    (!got->c && c->crc_policy == IW_CONN_CRC_REQUIRED_STRICT))
		return proto_reject(c, &req, -ENOPROTOOPT);
	if (iw_mpa_has_v2(&req)) {
		/* RFC 6581: the peer's ORD is what our IRD must hold, its IRD bounds our ORD. */
		c->info.peer_ird_ord = true;
		c->info.peer_ird = got->v2.ird;
		c->info.peer_ord = got->v2.ord;
		c->cep_ird = min16(got->v2.ord, c->max_ird);
		c->cep_ord = min16(got->v2.ird, c->max_ord);
		c->info.ird = c->cep_ird;
		c->info.ord = c->cep_ord;
		if (got->v2.p2p) {
			uint8_t offer = rtr_bits(&got->v2);

			c->info.rtr_offer = offer;
			/* siw: "propose zero length Write if none ... is indicated" */
			c->rtr_choice = rtr_pick(offer & c->rtr_types);
			if (!c->rtr_choice)
				c->rtr_choice = IW_CONN_RTR_WRITE;
		}
	} else {
		req.enhanced = false;
		memset(&req.v2, 0, sizeof(req.v2));
	}
	c->info.rev = req.rev;
	c->info.enhanced = iw_mpa_has_v2(&req);
	c->info.crc = got->c || crc_wanted(c->crc_policy);
	c->peer_pd_off = (uint16_t)(got->pd - c->rx);
	c->info.peer_pd_len = got->pd_len;
	req.pd = NULL;
	req.pd_len = 0;
	c->req = req;
	return set_state(c, IW_CONN_REQ_RCVD, 0);
}

int iw_conn_accept(struct iw_conn *c, uint16_t ird, uint16_t ord, const uint8_t *pd,
		   uint16_t pd_len, uint64_t now)
{
	bool v2, p2p;
	struct iw_mpa rep;
	int rc;

	if (!c || (!pd && pd_len) || c->state != IW_CONN_REQ_RCVD)
		return -EINVAL;
	if (ird > c->max_ird || ord > c->max_ord)
		return -EINVAL;
	v2 = iw_mpa_has_v2(&c->req);
	if (pd_len > pd_max(&c->req))
		return -EMSGSIZE;
	if (v2) { /* siw_accept, relaxed_ird_negotiation */
		if (ord > c->cep_ord) {
			if (c->strict_ird)
				return -EINVAL;
			ord = c->cep_ord;
		}
		if (ird < c->cep_ird) {
			if (c->strict_ird)
				return -ENOMEM;
			ird = c->cep_ird;
		}
	}
	p2p = v2 && c->req.v2.p2p;
	/* siw_proc_mpareq + siw_accept: flags and Rev echoed, C if asked or required */
	rc = iw_mpa_reply_init(&rep, &c->req, crc_wanted(c->crc_policy), ird, ord, pd, pd_len);
	if (rc != 0) /* markers: rejected in on_request, cannot happen */
		return -EINVAL;
	/* RFC 6581: exactly one RTR type in the Reply */
	if (p2p)
		set_rtr_bits(&rep.v2, c->rtr_choice);
	rc = tx_mpa(c, &rep);
	if (rc != 0)
		return rc;
	c->info.rev = rep.rev;
	c->info.enhanced = v2;
	c->info.crc = rep.c;
	c->info.ird = ird;
	c->info.ord = ord;
	c->info.p2p = p2p;
	c->info.rtr = p2p ? c->rtr_choice : IW_CONN_RTR_NONE;
	return set_state(c, p2p ? IW_CONN_AWAIT_RTR : IW_CONN_ESTABLISHED, now);
}

int iw_conn_reject(struct iw_conn *c, const uint8_t *pd, uint16_t pd_len)
{
	struct iw_mpa rej;
	int rc;

	if (!c || (!pd && pd_len) || c->state != IW_CONN_REQ_RCVD)
		return -EINVAL;
	if (pd_len > pd_max(&c->req))
		return -EMSGSIZE;
	iw_mpa_reject_init(&rej, &c->req, pd, pd_len); /* siw_reject */
	rc = tx_mpa(c, &rej);
	if (rc != 0)
		return rc;
	end(c, IW_CONN_REJECTED, -ECONNREFUSED);
	return 0;
}

/* ---- Initiator: the Reply ---- */

/* The RTR frame (RFC 6581; siw_qp_mpa_rts), queued behind the Request. */
static int tx_rtr(struct iw_conn *c, uint8_t rtr, bool crc)
{
	struct iw_fpdu f;

	memset(&f, 0, sizeof(f));
	switch (rtr) {
	case IW_CONN_RTR_WRITE:
		iw_hdr_init(&f.hdr, IW_OP_WRITE);
		f.hdr.stag = 1; /* siw: some hardware treats STag 0 specially */
		break;
	case IW_CONN_RTR_READ:
		iw_hdr_init(&f.hdr, IW_OP_READ_REQ);
		f.hdr.msn = 1;
		f.hdr.rreq.src_stag = 1;
		c->info.tx_msn_used[IW_QN_READ_REQ] = 1;
		c->info.orq_rtr = true;
		break;
	case IW_CONN_RTR_SEND:
		iw_hdr_init(&f.hdr, IW_OP_SEND);
		f.hdr.msn = 1;
		c->info.tx_msn_used[IW_QN_SEND] = 1;
		break;
	default:
		return 0;
	}
	return tx_fpdu(c, &f, crc);
}

static int reply_fail(struct iw_conn *c, int err, bool crc)
{
	tx_term(c, err, crc, NULL, 0);
	return fail(c, err);
}

static int on_reply(struct iw_conn *c, int dr, const struct iw_mpa *rep)
{
	const struct iw_mpa *req = &c->req;
	bool fallback = false, v2;
	uint16_t ird = c->info.ird, ord = c->info.ord;
	uint8_t rtr = IW_CONN_RTR_NONE;
	struct iw_mpa chk;
	int rc;

	/* A Reject is a Reject, whatever its M, and even with Enhanced but no IRD/ORD block
	 * (siw's reject of a Request it found malformed): the decoder filled the flags. */
	if ((dr == -IW_E_MPA_MARKERS || dr == -IW_E_MPA_V2) && rep->r)
		dr = 0;
	if (dr == -IW_E_MPA_KEY) /* siw: Terminate "invalid Request/Reply" */
		return reply_fail(c, dr, false);
	if (dr < 0) /* Rev, PD_Length, V2 malformations, markers wanted (siw: refused) */
		return fail(c, dr);

	c->info.peer_crc = rep->c;
	c->peer_pd_off = (uint16_t)(rep->pd - c->rx);
	c->info.peer_pd_len = rep->pd_len;
	if (iw_mpa_has_v2(rep)) {
		c->info.peer_ird_ord = true;
		c->info.peer_ird = rep->v2.ird;
		c->info.peer_ord = rep->v2.ord;
	}
	if (rep->r) /* RFC 5044 7.1: the responder rejected; its private data says why */
		return end(c, IW_CONN_REJECTED, -ECONNREFUSED);
	/* RFC 6581: a Rev 1 Reply to an enhanced Request is a peer that speaks only Rev 1. */
	if (iw_mpa_has_v2(req) && rep->rev == 1) {
		if (!c->fallback_ok)
			return fail(c, -IW_E_MPA_V2);
		fallback = true;
	}
	chk = *req;
	chk.v2.p2p = false; /* RTR types are checked below (Send included) */
	if (fallback) {
		chk.rev = 1;
		chk.enhanced = false;
	}
	rc = iw_mpa_check_reply(&chk, rep);
	if (rc < 0)
		return fail(c, rc);
	/* RFC 5044 7.1 C; siw_proc_mpareply: required but not granted, or strict off. */
	if ((crc_wanted(c->crc_policy) && !rep->c) ||
	    (c->crc_policy == IW_CONN_CRC_OFF_STRICT && rep->c))
		return fail(c, -ENOPROTOOPT);
	v2 = iw_mpa_has_v2(req) && !fallback;
	if (v2) {
		/* RFC 6581 IRD/ORD; siw relaxed negotiation: our IRD must hold the peer's ORD. */
		bool short_ird =
		    (c->info.ird < rep->v2.ord && (c->strict_ird || rep->v2.ord > c->max_ird)) ||
		    (c->strict_ird && c->info.ord > rep->v2.ird);

		ird = rep->v2.ord;
		ord = min16(rep->v2.ird, c->max_ord);
		if (short_ird)
			return reply_fail(c, -IW_E_MPA_IRD, rep->c);
		if (req->v2.p2p) {
			rtr = rtr_pick(rtr_bits(&req->v2) & rtr_bits(&rep->v2));
			if (!rtr) /* we asked for RTR modes, the peer picked none of them */
				return reply_fail(c, -IW_E_MPA_RTR, rep->c);
			if (rtr == IW_CONN_RTR_READ &&
			    ord == 0) /* the RTR Read needs an ORQ slot */
				return reply_fail(c, -IW_E_MPA_IRD, rep->c);
		}
	}
	/* Apply: the connection goes to RTS; the RTR frame is its first FPDU. */
	c->info.rev = fallback ? 1 : rep->rev < req->rev ? rep->rev : req->rev;
	c->info.enhanced = v2;
	c->info.crc = rep->c;
	c->info.ird = ird;
	c->info.ord = ord;
	c->info.p2p = rtr != IW_CONN_RTR_NONE;
	c->info.rtr = rtr;
	rc = tx_rtr(c, rtr, rep->c);
	if (rc != 0)
		return fail(c, rc);
	return set_state(c, IW_CONN_ESTABLISHED, 0);
}

/* ---- MPA frame reception, both roles ---- */

/* Bytes still missing from the frame as far as its header tells. */
static size_t frame_want(const struct iw_conn *c)
{
	uint16_t pdl;

	if (c->rx_have < IW_MPA_HDR_LEN)
		return IW_MPA_HDR_LEN - c->rx_have;
	pdl = rd16(c->rx + IW_MPA_KEY_LEN + 2);
	if (pdl > IW_MPA_PD_MAX)
		return 0;
	return (size_t)IW_MPA_HDR_LEN + pdl - c->rx_have;
}

static int rx_frame(struct iw_conn *c, const uint8_t *buf, size_t len, size_t *used)
{
	size_t take = frame_want(c);
	struct iw_mpa f;
	int dr;

	if (take > len)
		take = len;
	memcpy(c->rx + c->rx_have, buf, take);
	c->rx_have = (uint16_t)(c->rx_have + take);
	*used = take;
	/* The key is checked on every byte: garbage fails at once (RFC 5044 7.1 Key). */
	dr = iw_mpa_decode(c->rx, c->rx_have,
			   c->role == IW_CONN_RESPONDER ? IW_MPA_REQ : IW_MPA_REP, &f);
	if (dr == -EAGAIN)
		return 0;
	if (c->role == IW_CONN_RESPONDER)
		return on_request(c, dr, &f);
	return on_reply(c, dr, &f);
}

/* ---- Responder, P2P: the RTR frame ---- */

static int rtr_fail(struct iw_conn *c, int err)
{
	tx_term(c, err, c->info.crc, c->rtr, c->rtr_have);
	return fail(c, err);
}

static bool rtr_matches(uint8_t rtr, const struct iw_fpdu *f)
{
	const struct iw_hdr *h = &f->hdr;

	switch (rtr) {
	case IW_CONN_RTR_WRITE: /* any STag: zero-length Writes are not checked (siw) */
		return h->opcode == IW_OP_WRITE && h->last && f->payload_len == 0;
	case IW_CONN_RTR_READ:
		return h->opcode == IW_OP_READ_REQ && h->msn == 1 && h->rreq.size == 0;
	case IW_CONN_RTR_SEND:
		return h->opcode == IW_OP_SEND && h->last && h->msn == 1 && h->mo == 0 &&
		       f->payload_len == 0;
	default:
		return false;
	}
}

static int rx_rtr(struct iw_conn *c, const uint8_t *buf, size_t len, size_t *used, uint64_t now)
{
	size_t want, total = 0;
	struct iw_fpdu f;
	uint16_t ulpdu;
	int dr;

	if (c->rtr_have < IW_FPDU_LEN_SIZE) {
		want = IW_FPDU_LEN_SIZE - c->rtr_have;
	} else {
		total = iw_fpdu_len(rd16(c->rtr));
		want = total - c->rtr_have;
	}
	if (want > len)
		want = len;
	memcpy(c->rtr + c->rtr_have, buf, want);
	c->rtr_have = (uint8_t)(c->rtr_have + want);
	*used = want;
	if (c->rtr_have < IW_FPDU_LEN_SIZE)
		return 0;
	ulpdu = rd16(c->rtr);
	/* An RTR is at most a Read Request; room is kept for a Terminate (the peer's answer to a
	 * Reply it refuses). Anything longer is data before the RTR. */
	if (ulpdu > IW_TERM_ULPDU_MAX)
		return rtr_fail(c, -IW_E_MPA_RTR);
	if (c->rtr_have < iw_fpdu_len(ulpdu))
		return 0;
	dr = iw_fpdu_decode(c->rtr, c->rtr_have, c->info.crc, 0, &f);
	if (dr < 0)
		return rtr_fail(c, dr);
	if (f.hdr.opcode == IW_OP_TERMINATE) {
		c->info.peer_term_valid = true;
		c->info.peer_term.layer = f.hdr.term.layer;
		c->info.peer_term.etype = f.hdr.term.etype;
		c->info.peer_term.ecode = f.hdr.term.ecode;
		c->info.peer_term.hdrct =
		    (uint8_t)((f.hdr.term.m ? IW_TERM_M : 0) | (f.hdr.term.d ? IW_TERM_D : 0) |
			      (f.hdr.term.r ? IW_TERM_R : 0));
		return fail(c, -ECONNABORTED);
	}
	if (!rtr_matches(c->info.rtr, &f))
		return rtr_fail(c, -IW_E_MPA_RTR);
	if (c->info.rtr == IW_CONN_RTR_READ) {
		/* RFC 5040 4.4: answered with a zero-length Read Response to the sink STag/TO;
		 * it is the first FPDU of our stream. */
		struct iw_fpdu resp;

		memset(&resp, 0, sizeof(resp));
		iw_hdr_init(&resp.hdr, IW_OP_READ_RESP);
		resp.hdr.stag = f.hdr.rreq.sink_stag;
		resp.hdr.to = f.hdr.rreq.sink_to;
		dr = tx_fpdu(c, &resp, c->info.crc);
		if (dr != 0)
			return fail(c, dr);
		c->info.rx_msn_used[IW_QN_READ_REQ] = 1;
	} else if (c->info.rtr == IW_CONN_RTR_SEND) {
		c->info.rx_msn_used[IW_QN_SEND] = 1;
	}
	return set_state(c, IW_CONN_ESTABLISHED, now);
}

/* ---- Input, timer, queries ---- */

int iw_conn_input(struct iw_conn *c, const uint8_t *buf, size_t len, uint64_t now, size_t *used)
{
	size_t off = 0;
	int rc = 0;

	if (!c || !used || (!buf && len))
		return -EINVAL;
	*used = 0;
	if (ended(c))
		return c->err;
	while (off < len && rc == 0 && c->state != IW_CONN_ESTABLISHED) {
		size_t n = 0;

		switch (c->state) {
		case IW_CONN_AWAIT_REQ:
		case IW_CONN_AWAIT_REP:
			rc = rx_frame(c, buf + off, len - off, &n);
			break;
		case IW_CONN_AWAIT_RTR:
			rc = rx_rtr(c, buf + off, len - off, &n, now);
			break;
		case IW_CONN_REQ_RCVD:
		default:
			/* RFC 5044 7.1: the initiator sends nothing between its Request and our
			 * Reply (siw siw_recv_mpa_rr: "peer sent extra data" -> EPROTO). */
			rc = fail(c, -EPROTO);
			break;
		}
		off += n;
	}
	*used = off;
	c->info.rx_consumed += off;
	if (rc == 0 && waiting(c) && now >= c->deadline)
		rc = fail(c, -ETIMEDOUT);
	return rc;
}

int iw_conn_tick(struct iw_conn *c, uint64_t now)
{
	if (waiting(c) && now >= c->deadline)
		fail(c, -ETIMEDOUT);
	return ended(c) ? c->err : 0;
}

uint64_t iw_conn_deadline(const struct iw_conn *c)
{
	return waiting(c) ? c->deadline : IW_CONN_NO_DEADLINE;
}

void iw_conn_llp_error(struct iw_conn *c, int err)
{
	if (!c || ended(c) || c->state == IW_CONN_ESTABLISHED)
		return;
	fail(c, err < 0 ? err : -ECONNRESET);
}

enum iw_conn_state iw_conn_state(const struct iw_conn *c)
{
	return (enum iw_conn_state)c->state;
}

int iw_conn_error(const struct iw_conn *c)
{
	return c->err;
}

bool iw_conn_rx_done(const struct iw_conn *c)
{
	return c->state == IW_CONN_ESTABLISHED;
}

bool iw_conn_tx_ready(const struct iw_conn *c)
{
	return c->state == IW_CONN_ESTABLISHED && c->tx_len == 0;
}

void iw_conn_info(const struct iw_conn *c, struct iw_conn_info *out)
{
	*out = c->info;
	out->peer_pd = out->peer_pd_len ? c->rx + c->peer_pd_off : NULL;
}

const char *iw_conn_state_name(enum iw_conn_state s)
{
	return (unsigned)s < IW_CONN_NSTATES ? state_names[s] : "?";
}

const char *iw_conn_err_name(int err)
{
	const char *n;

	if (err == 0)
		return "OK";
	if (iw_is_err(err))
		return iw_err_name(err);
	n = strerrorname_np(err < 0 ? -err : err);
	return n ? n : "?";
}
