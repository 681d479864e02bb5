/* iWARP receive side (siw_qp_rx.c): the wire layer's stream parser (iw_rx_step) cuts the
 * stream into FPDUs; here every header is checked against the QP's state (RFC 5041 5 and 7:
 * tagged / untagged buffer models and their errors; RFC 5040 5 and 7: RDMAP messages and
 * their errors) before its payload is read, and the payload is read straight to its
 * destination: iw_qp_rx_want hands out the validated address, the caller recv()s there, and
 * the parser's DATA chunks then already lie where they belong. Completions wait for the
 * FPDU's CRC (RFC 5044 6: placement happens before the CRC is known). */
#define IW_ENG_PRIVATE
#include "engine/iw_eng.h"

#include <errno.h>
#include <string.h>

#include "engine/eng_int.h"

void iw_rx_reset(struct iw_qp *qp)
{
	memset(&qp->rx, 0, sizeof(qp->rx));
	iw_rx_init(&qp->rx.p, qp->attr.crc, qp->attr.max_rx_ulpdu);
}

static bool takes_bytes(const struct iw_qp *qp)
{
	return qp->base.state == IBV_QPS_RTS || qp->base.state == IBV_QPS_SQD;
}

/* ---- error mappings for memory checks (siw_tagged_error and the RREQ source checks) ---- */

static int tagged_err(int e)
{
	/* RFC 5041 has no access-rights code: siw reports invalid STag. */
	return e == -ERANGE ? -IW_E_T_BOUNDS : -IW_E_T_STAG;
}

static int rreq_err(int e)
{
	switch (e) {
	case -ERANGE:
		return -IW_E_RP_BOUNDS;
	case -EACCES:
		return -IW_E_RP_ACCESS;
	default:
		return -IW_E_RP_STAG;
	}
}

/* TO + len beyond 2^64 (RFC 5041 7.2 "TO wrap"). */
static bool to_wraps(uint64_t to, uint64_t len)
{
	return len && to > UINT64_MAX - (len - 1);
}

/* The READ whose response is expected now (oldest in the ORQ), or NULL. */
static struct eng_swqe *orq_head(struct iw_qp *qp)
{
	if (qp->orq_head == qp->orq_tail)
		return NULL;
	return iw_swqe_at(qp, qp->orq[qp->orq_head & (qp->orq_cap - 1)]);
}

/* ---- header checks (validate, then apply: nothing placed before all pass) ---- */

static int hdr_write(struct iw_qp *qp, const struct iw_hdr *h, uint32_t len)
{
	struct iw_rxs *r = &qp->rx;
	int err = 0;

	if (r->t_active) {
		/* RFC 5041 5.1; siw_write_check_ntoh: a continuation carries the same STag and
		 * the next TO; another tagged message may not interleave. */
		if (r->t_op != IW_OP_WRITE)
			return -IW_LE_DDP_CATASTROPHIC;
		if (h->stag != r->t_stag)
			return -IW_E_T_STAG;
		if (h->to != r->t_to)
			return -IW_E_T_BOUNDS;
	}
	r->tdst = NULL;
	if (len) { /* a zero-length Write is not checked at all (siw; RTR frames) */
		if (!(qp->attr.access & IBV_ACCESS_REMOTE_WRITE))
			return -IW_E_T_STAG;
		if (to_wraps(h->to, len))
			return -IW_E_T_TO_WRAP;
		r->tdst = qp->base.env.mem_resolve(qp->base.env.ctx, qp->base.init.pd,
						   qp->base.init.qpn, h->stag, true, h->to, len,
						   IBV_ACCESS_REMOTE_WRITE, &err);
		if (!r->tdst)
			return tagged_err(err);
	}
	r->t_active = !h->last;
	r->t_op = IW_OP_WRITE;
	r->t_stag = h->stag;
	r->t_to = h->to + len;
	return 0;
}

static int hdr_rresp(struct iw_qp *qp, const struct iw_hdr *h, uint32_t len)
{
	struct iw_rxs *r = &qp->rx;
	struct eng_swqe *w = orq_head(qp);
	uint32_t sink_stag;
	uint64_t sink_to;
	int err = 0;

	if (qp->rtr_read) {
		/* The answer to the MPA RTR Read: zero bytes to STag 0, TO 0 (RFC 6581). */
		if (h->stag != 0)
			return -IW_E_T_STAG;
		if (h->to != 0 || len || !h->last)
			return -IW_E_T_BOUNDS;
		r->rtr_resp = true;
		return 0;
	}
	if ((r->t_active && r->t_op != IW_OP_READ_RESP) || !w)
		return -IW_LE_DDP_CATASTROPHIC; /* siw: no READ outstanding */
	sink_stag = w->num_sge ? w->sge[0].lkey : 0;
	sink_to = w->num_sge ? w->sge[0].addr : 0;
	/* siw_rresp_check_ntoh: it must continue exactly the oldest outstanding READ. */
	if (h->stag != sink_stag)
		return -IW_E_T_STAG;
	if (h->to != sink_to + w->read_done || (uint64_t)w->read_done + len > w->length ||
	    (h->last && w->read_done + len != w->length))
		return -IW_E_T_BOUNDS;
	r->tdst = NULL;
	if (len) {
		r->tdst = qp->base.env.mem_resolve(qp->base.env.ctx, qp->base.init.pd,
						   qp->base.init.qpn, sink_stag, false, h->to, len,
						   IBV_ACCESS_LOCAL_WRITE, &err);
		if (!r->tdst) {
			w->state = ENG_SWQE_ERROR;
			w->status = IBV_WC_LOC_PROT_ERR;
			return tagged_err(err);
		}
	}
	r->t_active = !h->last;
	r->t_op = IW_OP_READ_RESP;
	return 0;
}

static int hdr_send(struct iw_qp *qp, const struct iw_hdr *h, uint32_t len)
{
	struct iw_rxs *r = &qp->rx;
	const struct eng_rwqe *rw;
	int n;

	if (r->u_active && h->opcode != r->u_op)
		return -IW_LE_DDP_CATASTROPHIC;
	/* siw_send_check_ntoh: MSN of the message (RFC 5041 5.2), then MO. */
	if (h->msn != (r->u_active ? r->u_msn : qp->rx_msn[IW_QN_SEND]))
		return -IW_E_U_MSN_RANGE;
	if (h->mo != (r->u_active ? r->u_mo : 0))
		return -IW_E_MO;
	if (!r->u_active) {
		/* No RNR in iWARP: a Send without a receive kills the stream (siw). */
		rw = eng_rq_peek(qp->base.rq);
		if (!rw)
			return -IW_E_U_NO_BUF;
		/* Copied out (an SRQ slot is free again at once): the SGEs it has, not all 16. */
		r->rwqe.wr_id = rw->wr_id;
		r->rwqe.num_sge = rw->num_sge;
		r->rwqe.length = rw->length;
		if (rw->num_sge == 1)
			r->rwqe.sge[0] = rw->sge[0]; /* the common case, without a memcpy call */
		else
			memcpy(r->rwqe.sge, rw->sge, rw->num_sge * sizeof(rw->sge[0]));
		eng_rq_pop(qp->base.rq);
		r->u_active = true;
		r->u_op = h->opcode;
		r->u_msn = h->msn;
		r->u_mo = 0;
	}
	if ((uint64_t)h->mo + len > r->rwqe.length) {
		/* siw: receive space short -> untagged "no buffer", LOC_LEN_ERR. */
		iw_recv_complete(qp, IBV_WC_LOC_LEN_ERR, 0, false, 0, false);
		return -IW_E_U_NO_BUF;
	}
	n = eng_sge_resolve_env(&qp->base.env, qp->base.init.pd, r->rwqe.sge, r->rwqe.num_sge,
				h->mo, len, IBV_ACCESS_LOCAL_WRITE, r->piece);
	if (n < 0) {
		iw_recv_complete(qp, IBV_WC_LOC_PROT_ERR, 0, false, 0, false);
		return -IW_LE_DDP_CATASTROPHIC; /* siw: a bad receive SGE */
	}
	r->npiece = (uint32_t)n;
	return 0;
}

/* The inbound Read Request ring's first size (at the first request). */
#define IRQ_FIRST 4u

static int hdr_rreq(struct iw_qp *qp, const struct iw_hdr *h, const uint8_t *raw, size_t raw_len)
{
	struct iw_rxs *r = &qp->rx;
	const struct iw_rreq *q = &h->rreq;
	int err = 0;

	if (h->msn != qp->rx_msn[IW_QN_READ_REQ])
		return -IW_E_U_MSN_RANGE;
	/* A zero-length Read (an MPA RTR frame) touches no memory: no access needed. */
	if (q->size && !(qp->attr.access & IBV_ACCESS_REMOTE_READ))
		return -IW_E_RP_ACCESS;
	/* IRD: siw answers an IRQ overflow with RDMAP catastrophic (stream). */
	if (qp->irq_tail - qp->irq_head >= qp->attr.ird)
		return -IW_E_RO_STREAM;
	if (qp->irq_tail - qp->irq_head == qp->irq_cap &&
	    iw_ring_grow((void **)&qp->irq, &qp->irq_cap, IRQ_FIRST, sizeof(*qp->irq), qp->irq_head,
			 qp->irq_tail) < 0)
		return -IW_E_RO_STREAM; /* no memory for a request within the IRD: as siw's */
	if (q->size) {
		if (to_wraps(q->src_to, q->size))
			return -IW_E_RP_TO_WRAP;
		if (!qp->base.env.mem_resolve(qp->base.env.ctx, qp->base.init.pd, qp->base.init.qpn,
					      q->src_stag, true, q->src_to, q->size,
					      IBV_ACCESS_REMOTE_READ, &err))
			return rreq_err(err);
	}
	r->rreq.rreq = *q;
	memset(r->rreq.raw, 0, sizeof(r->rreq.raw));
	memcpy(r->rreq.raw, raw, raw_len < sizeof(r->rreq.raw) ? raw_len : sizeof(r->rreq.raw));
	r->pend_rreq = true;
	return 0;
}

/* The HDR event: every check for the segment, before any of its payload is read. */
static int on_hdr(struct iw_qp *qp, const struct iw_rx_ev *ev)
{
	struct iw_rxs *r = &qp->rx;
	const struct iw_hdr *h = ev->hdr;

	r->have_hdr = true;
	r->rtr_resp = false;
	r->op = h->opcode;
	r->last = h->last;
	r->hdr_end = ev->raw_len;
	r->pay_len = ev->payload_len;
	r->fpdu_len = (uint32_t)iw_fpdu_len(ev->ulpdu_len);
	r->placed = 0;
	r->npiece = 0;
	r->tdst = NULL;
	switch (h->opcode) {
	case IW_OP_WRITE:
		return hdr_write(qp, h, ev->payload_len);
	case IW_OP_READ_RESP:
		return hdr_rresp(qp, h, ev->payload_len);
	case IW_OP_SEND:
	case IW_OP_SEND_INV:
	case IW_OP_SEND_SE:
	case IW_OP_SEND_SE_INV:
		return hdr_send(qp, h, ev->payload_len);
	case IW_OP_READ_REQ:
		return hdr_rreq(qp, h, ev->raw, ev->raw_len);
	case IW_OP_TERMINATE:
		r->term = h->term;
		r->term_msn = h->msn;
		r->pend_term = true;
		return 0;
	default:
		return -IW_E_OPCODE; /* not reached: the parser refuses other opcodes */
	}
}

/* ---- payload ---- */

/* The destination of payload byte `off` of the current FPDU and the contiguous room there. */
static uint8_t *dst_at(struct iw_qp *qp, uint32_t off, size_t *room)
{
	struct iw_rxs *r = &qp->rx;

	if (r->op == IW_OP_WRITE || r->op == IW_OP_READ_RESP) {
		*room = r->pay_len - off;
		return r->tdst ? r->tdst + off : NULL;
	}
	for (uint32_t i = 0; i < r->npiece; i++) {
		if (off < r->piece[i].len) {
			*room = r->piece[i].len - off;
			return r->piece[i].ptr + off;
		}
		off -= r->piece[i].len;
	}
	*room = 0;
	return NULL;
}

static void on_data(struct iw_qp *qp, const struct iw_rx_ev *ev)
{
	struct iw_rxs *r = &qp->rx;
	uint32_t off = ev->off, done = 0;

	/* In place when the caller read into the address rx_want gave; else copied. */
	while (done < ev->len) {
		size_t room;
		uint8_t *d = dst_at(qp, off + done, &room);
		size_t n = ev->len - done;

		if (!d)
			break; /* not reached: the header check resolved the whole payload */
		if (n > room)
			n = room;
		if (d == ev->data + done) {
			IW_ADD(qp, rx_payload_placed, n);
		} else {
			memcpy(d, ev->data + done, n);
			IW_ADD(qp, rx_payload_copied, n);
		}
		done += (uint32_t)n;
	}
	r->placed += ev->len;
	if (r->op == IW_OP_READ_RESP)
		orq_head(qp)->read_done += ev->len;
	else if (r->op != IW_OP_WRITE)
		r->u_mo += ev->len;
}

/* ---- end of an FPDU: its CRC is good ---- */

/* Requester-side status for a Terminate received (RFC 5040 7.1 / RFC 5041 7.2 classes). */
static enum ibv_wc_status term_status(const struct iw_term *t)
{
	if ((t->layer == IW_LAYER_DDP && t->etype == IW_ETYPE_DDP_TAGGED) ||
	    (t->layer == IW_LAYER_RDMAP && t->etype == IW_ETYPE_RDMAP_PROTECTION))
		return IBV_WC_REM_ACCESS_ERR;
	if (t->layer == IW_LAYER_DDP && t->etype == IW_ETYPE_DDP_UNTAGGED)
		return IBV_WC_REM_INV_REQ_ERR;
	return IBV_WC_REM_OP_ERR;
}

static void count_term_rcvd(struct iw_qp *qp, const struct iw_term *t)
{
	static const uint8_t cnt[3][3] = {
	    [IW_LAYER_RDMAP] = {IW_CNT_term_rcvd_rdmap_catastrophic,
				IW_CNT_term_rcvd_rdmap_protection, IW_CNT_term_rcvd_rdmap_op},
	    [IW_LAYER_DDP] = {IW_CNT_term_rcvd_ddp_catastrophic, IW_CNT_term_rcvd_ddp_tagged,
			      IW_CNT_term_rcvd_ddp_untagged},
	    [IW_LAYER_LLP] = {IW_CNT_term_rcvd_llp, IW_CNT_term_rcvd_llp, IW_CNT_term_rcvd_llp},
	};

	if (t->layer < 3 && t->etype < 3)
		qp->counters[cnt[t->layer][t->etype]]++;
	else
		IW_INC(qp, term_rcvd_other);
}

static int on_term(struct iw_qp *qp)
{
	struct iw_rxs *r = &qp->rx;

	r->pend_term = false;
	/* siw_proc_terminate: a Terminate not on MSN 1 (of queue 2) is bogus; the stream is
	 * reset either way. */
	if (r->term_msn != qp->rx_msn[IW_QN_TERMINATE])
		IW_INC(qp, term_rcvd_bogus);
	qp->rx_msn[IW_QN_TERMINATE]++;
	count_term_rcvd(qp, &r->term);
	qp->term_rcvd = r->term;
	qp->have_term_rcvd = true;
	/* The peer stopped at the message it names: the oldest started WR is the closest to
	 * it and cannot succeed any more; the rest is flushed. */
	if (qp->base.sq_head != qp->sq_next) {
		struct eng_swqe *w = iw_swqe_at(qp, qp->base.sq_head);

		if (w->state == ENG_SWQE_ACTIVE) {
			w->state = ENG_SWQE_ERROR;
			w->status = term_status(&r->term);
		}
	}
	iw_to_err(qp, true, IBV_EVENT_QP_FATAL, true);
	return -ECONNRESET;
}

/* The last FPDU of a Send (of opcode op) ended: the receive completes. */
static int send_end(struct iw_qp *qp, uint8_t op, const struct iw_rx_ev *ev)
{
	struct iw_rxs *r = &qp->rx;
	const struct iw_opinfo *oi = iw_opinfo(op);
	uint32_t inv = ev->hdr->rsvdulp;

	qp->rx_msn[IW_QN_SEND]++;
	IW_INC(qp, rx_sends);
	if (oi->inval) {
		/* RFC 5040 5.3 Send with Invalidate: before the receive completes. */
		int e = qp->base.env.mem_invalidate
			    ? qp->base.env.mem_invalidate(qp->base.env.ctx, qp->base.init.pd,
							  qp->base.init.qpn, inv, true)
			    : -EINVAL;
		if (e) {
			iw_recv_complete(qp, IBV_WC_REM_INV_REQ_ERR, r->u_mo, false, 0, false);
			return iw_fatal(qp,
					e == -EACCES ? -IW_E_RP_INVALIDATE : -IW_E_RO_INVALIDATE,
					ev->raw, ev->raw_len);
		}
	}
	iw_recv_complete(qp, IBV_WC_SUCCESS, r->u_mo, oi->solicited, inv, oi->inval);
	return 0;
}

static int on_end(struct iw_qp *qp, const struct iw_rx_ev *ev)
{
	struct iw_rxs *r = &qp->rx;
	uint8_t op = r->op;

	IW_INC(qp, rx_fpdus);
	r->have_hdr = false;
	r->hdr_end = 0;
	r->off = 0;
	switch (op) {
	case IW_OP_WRITE:
		/* A zero-length Write (a nudge, an RTR frame) places nothing: counted apart. */
		if (r->last && r->pay_len == 0)
			IW_INC(qp, rx_zero_writes);
		else if (r->last)
			IW_INC(qp, rx_writes);
		return 0;
	case IW_OP_READ_RESP:
		if (r->rtr_resp) {
			r->rtr_resp = false;
			qp->rtr_read = false; /* the ORD slot is free, no completion */
			return 0;
		}
		if (r->last) {
			/* RFC 5040 5.2: the READ completes with its last response byte. */
			orq_head(qp)->state = ENG_SWQE_DONE;
			qp->orq_head++;
			IW_INC(qp, rx_read_resps);
			iw_sq_retire(qp);
			iw_check_drained(qp);
		}
		return 0;
	case IW_OP_READ_REQ:
		r->pend_rreq = false;
		*iw_irq_at(qp, qp->irq_tail) = r->rreq;
		qp->irq_tail++;
		qp->rx_msn[IW_QN_READ_REQ]++;
		IW_INC(qp, rx_read_reqs);
		return 0;
	case IW_OP_TERMINATE:
		return on_term(qp);
	default:
		break;
	}
	/* The Send family. */
	return r->last ? send_end(qp, op, ev) : 0;
}

/* A stream error from the parser: the message its FPDU belongs to must not succeed. */
static int parse_error(struct iw_qp *qp, int err)
{
	struct iw_rxs *r = &qp->rx;
	size_t raw_len;
	const uint8_t *raw = iw_rx_raw(&r->p, &raw_len);

	if (err == -IW_E_CRC && r->have_hdr) {
		/* RFC 5044 8: the bytes already placed are not reported as success. */
		if (r->op == IW_OP_READ_RESP && orq_head(qp)) {
			orq_head(qp)->state = ENG_SWQE_ERROR;
			orq_head(qp)->status = IBV_WC_GENERAL_ERR;
		} else if (r->op != IW_OP_WRITE && r->u_active) {
			iw_recv_complete(qp, IBV_WC_GENERAL_ERR, 0, false, 0, false);
		}
	}
	return iw_fatal(qp, err, raw, raw_len);
}

static bool is_send(uint8_t op)
{
	return op == IW_OP_SEND || op == IW_OP_SEND_INV || op == IW_OP_SEND_SE ||
	       op == IW_OP_SEND_SE_INV;
}

/* The last (mostly the only) FPDU of a Send, whole in the caller's buffer: on_hdr, on_data
 * and on_end in one, with the same checks (hdr_send) and without the per-FPDU state that
 * only an FPDU read in parts needs. */
static int whole_send(struct iw_qp *qp, const struct iw_rx_ev *ev)
{
	struct iw_rxs *r = &qp->rx;
	const uint8_t *src = ev->data;
	int err = hdr_send(qp, ev->hdr, ev->payload_len);

	if (err)
		return iw_fatal(qp, err, ev->raw, ev->raw_len);
	r->pay_len = ev->payload_len; /* iw_qp_rx_fpdu_payload */
	for (uint32_t i = 0; i < r->npiece; i++) {
		memcpy(r->piece[i].ptr, src, r->piece[i].len);
		src += r->piece[i].len;
	}
	IW_ADD(qp, rx_payload_copied, ev->payload_len);
	r->u_mo += ev->payload_len;
	IW_INC(qp, rx_fpdus);
	return send_end(qp, ev->hdr->opcode, ev);
}

/* Feeds n stream bytes at buf to the parser and acts on its events; *fed gets the bytes
 * consumed (all n on 0; on an error up to and including the step that found it). Payload
 * that does not already lie at its destination (buf is not where rx_want pointed) is copied
 * there by on_data, once its header has passed every check. */
static int feed(struct iw_qp *qp, const uint8_t *buf, size_t n, size_t *fed)
{
	struct iw_rxs *r = &qp->rx;
	size_t pos = 0;

	while (pos < n) {
		struct iw_rx_ev ev;
		size_t used = 0;
		int ret, err = 0;

		/* A whole FPDU at hand (small messages): its header, payload and end at once. */
		if (!r->have_hdr && iw_rx_fpdu(&r->p, buf + pos, n - pos, &used, &ev)) {
			pos += used;
			*fed = pos;
			IW_ADD(qp, rx_bytes, used);
			if (is_send(ev.hdr->opcode) && ev.hdr->last) {
				err = whole_send(qp, &ev);
				if (err)
					return err;
				continue;
			}
			err = on_hdr(qp, &ev);
			if (err)
				return iw_fatal(qp, err, ev.raw, ev.raw_len);
			if (ev.len)
				on_data(qp, &ev);
			err = on_end(qp, &ev);
			if (err)
				return err;
			continue;
		}
		ret = iw_rx_step(&r->p, buf + pos, n - pos, &used, &ev);

		pos += used;
		*fed = pos;
		IW_ADD(qp, rx_bytes, used);
		if (ret < 0)
			return parse_error(qp, ret);
		if (ret == IW_RX_END) {
			err = on_end(qp, &ev);
			if (err)
				return err;
			continue;
		}
		r->off += (uint32_t)used;
		if (ret == IW_RX_HDR) {
			err = on_hdr(qp, &ev);
			if (err)
				return iw_fatal(qp, err, ev.raw, ev.raw_len);
		} else if (ret == IW_RX_DATA) {
			on_data(qp, &ev);
		} else if (!r->have_hdr && !r->hdr_end && r->off >= IW_FPDU_LEN_SIZE + 2) {
			/* The control word is in (and valid): the header's length is known. */
			size_t rl;
			const uint8_t *raw = iw_rx_raw(&r->p, &rl);
			const struct iw_opinfo *oi = iw_opinfo(raw[3] & IW_CTRL_OPCODE);
			uint32_t ulpdu = (uint32_t)(raw[0] << 8 | raw[1]);

			if (oi)
				r->hdr_end = IW_FPDU_LEN_SIZE +
					     (oi->opcode == IW_OP_TERMINATE ? ulpdu : oi->hdr_len);
		}
	}
	return 0;
}

/* ---- the public entry points ---- */

int iw_qp_rx_want(struct iw_qp *qp, void **dst, size_t *len)
{
	struct iw_rxs *r = &qp->rx;
	size_t room = 0;
	uint8_t *d = NULL;

	if (!takes_bytes(qp))
		return -EPIPE;
	if (r->have_hdr && r->placed < r->pay_len) {
		d = dst_at(qp, r->placed, &room);
	} else if (r->have_hdr) {
		/* Pad + CRC, then the smallest header of the next FPDU. */
		room = r->fpdu_len - r->off + IW_RX_HDR_MIN;
	} else if (r->hdr_end) {
		room = r->hdr_end - r->off;
	} else {
		room = r->off < IW_RX_HDR_MIN ? IW_RX_HDR_MIN - r->off : 1;
	}
	if (!d) {
		d = r->scratch;
		if (room > sizeof(r->scratch))
			room = sizeof(r->scratch);
	}
	r->want_dst = d;
	r->want_len = room;
	r->want_valid = true;
	*dst = d;
	*len = room;
	return 0;
}

uint32_t iw_qp_rx_fpdu_payload(const struct iw_qp *qp)
{
	return qp->rx.pay_len;
}

int iw_qp_rx_done(struct iw_qp *qp, size_t n, uint64_t now)
{
	struct iw_rxs *r = &qp->rx;
	size_t fed = 0;
	int err;

	(void)now;
	if (!takes_bytes(qp)) {
		IW_ADD(qp, drop_bad_state, n);
		return -EPIPE;
	}
	if (!r->want_valid || n > r->want_len)
		return -EINVAL;
	r->want_valid = false;
	err = feed(qp, r->want_dst, n, &fed);
	iw_kick(qp);
	return err;
}

int iw_qp_rx_bytes(struct iw_qp *qp, const uint8_t *buf, size_t len, size_t *used, uint64_t now)
{
	int err;

	(void)now;
	*used = 0;
	if (!takes_bytes(qp)) {
		IW_ADD(qp, drop_bad_state, len);
		return -EPIPE;
	}
	/* The parser reads headers and trailers from buf itself; payload is copied out of buf
	 * only after its header's checks (on_data), as a recv() at rx_want's place would have
	 * put it. One pass over the whole buffer, not one want / copy / done per piece. */
	qp->rx.want_valid = false;
	err = feed(qp, buf, len, used);
	if (!err)
		*used = len;
	iw_kick(qp);
	return err;
}
