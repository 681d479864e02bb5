/* iWARP transmit side (siw_qp_tx.c): picks the next message (Terminate, then Read Responses,
 * then send WQEs), frames it into MULPDU-sized FPDUs with the wire layer's builder
 * (iw_tx_next_hdr: header only; the payload is handed out where it lies) and tracks how much
 * of the current FPDU TCP has taken. RFC 5040 5 (data transfer), RFC 5041 5 (segmentation),
 * RFC 5044 4 and 6 (FPDU, CRC). */
#define IW_ENG_PRIVATE
#include "engine/iw_eng.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/eng_int.h"
#include "util/crc.h"

int iw_tx_rings_init(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;

	if (iw_ring_grow((void **)&t->f, &t->f_cap, IW_TX_F_FIRST, sizeof(*t->f), 0, 0) < 0 ||
	    iw_ring_grow((void **)&t->pay, &t->pay_cap, IW_TX_PAY_FIRST, sizeof(*t->pay), 0, 0) <
		0) {
		iw_tx_rings_fini(qp);
		return -ENOMEM;
	}
	return 0;
}

void iw_tx_rings_fini(struct iw_qp *qp)
{
	free(qp->tx.f);
	free(qp->tx.pay);
	free(qp->tx.one);
	qp->tx.f = NULL;
	qp->tx.pay = NULL;
	qp->tx.one = NULL;
	qp->tx.f_cap = qp->tx.pay_cap = 0;
}

void iw_tx_reset(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;
	struct iw_txf *f = t->f;
	struct eng_iov *pay = t->pay;
	uint8_t *one = t->one;
	uint32_t f_cap = t->f_cap, pay_cap = t->pay_cap;

	free(t->copy);
	memset(t, 0, sizeof(*t));
	t->f = f;
	t->pay = pay;
	t->one = one;
	t->f_cap = f_cap;
	t->pay_cap = pay_cap;
}

_Static_assert((IW_TX_BATCH & (IW_TX_BATCH - 1)) == 0 && (IW_TX_PAY & (IW_TX_PAY - 1)) == 0 &&
		   (IW_TX_F_FIRST & (IW_TX_F_FIRST - 1)) == 0 &&
		   (IW_TX_PAY_FIRST & (IW_TX_PAY_FIRST - 1)) == 0 && IW_TX_F_FIRST <= IW_TX_BATCH &&
		   IW_TX_PAY_FIRST >= ENG_MAX_SGE && IW_TX_PAY_FIRST <= IW_TX_PAY,
	       "transmit rings: powers of two, first sizes within the limits");

#define txf_at(t, i)   (&(t)->f[(i) & ((t)->f_cap - 1)])
#define piece_at(t, i) (&(t)->pay[(i) & ((t)->pay_cap - 1)])

static struct iw_txf *txf_head(struct iw_qp *qp)
{
	return txf_at(&qp->tx, qp->tx.head);
}

static struct eng_iov *txf_piece(struct iw_qp *qp, const struct iw_txf *f, uint32_t i)
{
	return piece_at(&qp->tx, f->pay + i);
}

bool iw_tx_busy(const struct iw_qp *qp)
{
	return qp->tx.active || qp->tx.head != qp->tx.tail;
}

/* Drops the framed FPDUs from index `from` on (they never reach TCP). */
static void drop_from(struct iw_qp *qp, uint32_t from)
{
	struct iw_txs *t = &qp->tx;

	while (t->tail != from) {
		struct iw_txf *f = txf_at(t, --t->tail);

		t->pay_tail -= f->npay;
		t->queued -= f->len;
	}
	if (from == t->head)
		t->sent = 0;
}

void iw_tx_abort(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;

	if (t->head != t->tail && t->sent > 0)
		IW_ADD(qp, drop_tx_aborted, txf_head(qp)->len - t->sent);
	drop_from(qp, t->head);
	t->active = false;
	t->offered = 0;
}

bool iw_tx_keep_half(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;

	t->active = false; /* the rest of the message being framed never goes */
	t->offered = 0;
	if (t->head == t->tail || t->sent == 0 || txf_head(qp)->src == IW_TX_TERM) {
		drop_from(qp, t->head);
		return false;
	}
	drop_from(qp, t->head + 1);
	return true;
}

/* May the send WQE at sq_next start now? (siw_activate_tx: ORD and fence gates.) */
static bool sq_startable(const struct iw_qp *qp)
{
	const struct eng_swqe *w;
	uint32_t orq_n = qp->orq_tail - qp->orq_head + (qp->rtr_read ? 1 : 0);

	if (qp->base.state != IBV_QPS_RTS || qp->sq_next == qp->base.sq_tail)
		return false;
	w = &qp->base.sq[qp->sq_next & qp->base.sq_mask];
	/* IBV_SEND_FENCE: wait for every earlier READ (verbs fence semantics, siw). */
	if (w->fence && orq_n)
		return false;
	/* ORD reached: the SQ waits, in order. (The ORQ holds as many READs as the send ring
	 * can have out: the second test only keeps that so.) */
	if (w->op == ENG_OP_READ &&
	    (orq_n >= qp->attr.ord || qp->orq_tail - qp->orq_head >= qp->orq_cap))
		return false;
	return true;
}

/* A message could start (start_message would pick one). */
static bool message_due(const struct iw_qp *qp)
{
	return qp->tx.irq_next != qp->irq_tail || sq_startable(qp) || qp->tx.nudge_pending;
}

/* Nothing to frame or hand out, in RTS: no FPDU framed, no message being framed or waiting
 * (prepare would find none). Most passes find this (a small message went the direct way), so
 * it is asked first. */
static bool tx_idle(const struct iw_qp *qp)
{
	const struct iw_txs *t = &qp->tx;

	return t->head == t->tail && !t->active && qp->sq_next == qp->base.sq_tail &&
	       t->irq_next == qp->irq_tail && !t->nudge_pending && qp->base.state == IBV_QPS_RTS;
}

bool iw_qp_tx_idle(const struct iw_qp *qp)
{
	return tx_idle(qp);
}

bool iw_tx_ready(const struct iw_qp *qp)
{
	if (tx_idle(qp))
		return false;
	if (qp->tx.finished)
		return false;
	if (qp->tx.head != qp->tx.tail)
		return true;
	if (qp->base.state == IBV_QPS_ERR)
		return qp->tx.term_pending || qp->sq_flush_pending;
	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		return false;
	return qp->tx.active || message_due(qp);
}

bool iw_qp_tx_pending(const struct iw_qp *qp)
{
	return iw_tx_ready(qp);
}

/* ---- starting a message ---- */

static int start_rresp(struct iw_qp *qp)
{
	const struct iw_irqe *e = iw_irq_at(qp, qp->tx.irq_next);
	struct iw_hdr *h = &qp->tx.b.hdr; /* built in place (no message is active) */

	/* RFC 5040 4.5: a Read Response is tagged, to the request's sink STag / TO. */
	iw_hdr_init(h, IW_OP_READ_RESP);
	h->stag = e->rreq.sink_stag;
	h->to = e->rreq.sink_to;
	if (iw_tx_init(&qp->tx.b, h, e->rreq.size, qp->attr.mulpdu, qp->attr.crc) < 0)
		return -EINVAL; /* not reached: mulpdu >= IW_MIN_MULPDU */
	qp->tx.src = IW_TX_RRESP;
	qp->tx.msg = qp->tx.irq_next++;
	qp->tx.active = true;
	return 0;
}

/* The Send variant on the wire (RFC 5040 4.3 / 5.3): with Invalidate, SE from
 * IBV_SEND_SOLICITED. */
static uint8_t send_opcode(bool inv, bool se)
{
	return inv ? (se ? IW_OP_SEND_SE_INV : IW_OP_SEND_INV) : (se ? IW_OP_SEND_SE : IW_OP_SEND);
}

static int start_sq(struct iw_qp *qp)
{
	struct eng_swqe *w = iw_swqe_at(qp, qp->sq_next);
	struct iw_hdr *h = &qp->tx.b.hdr; /* built in place (no message is active) */
	uint32_t len = w->length;

	switch (w->op) {
	case ENG_OP_SEND:
	case ENG_OP_SEND_INV:
		iw_hdr_init(h, send_opcode(w->op == ENG_OP_SEND_INV, w->solicited));
		if (w->op == ENG_OP_SEND_INV)
			h->rsvdulp = w->inv_rkey;
		h->msn = ++qp->tx_msn[IW_QN_SEND];
		break;
	case ENG_OP_WRITE:
		iw_hdr_init(h, IW_OP_WRITE);
		h->stag = w->rkey;
		h->to = w->remote_addr;
		break;
	case ENG_OP_READ:
		/* RFC 5040 4.4: the sink is our one SGE, the source the WR's rkey / address. */
		iw_hdr_init(h, IW_OP_READ_REQ);
		h->msn = ++qp->tx_msn[IW_QN_READ_REQ];
		h->rreq.sink_stag = w->num_sge ? w->sge[0].lkey : 0;
		h->rreq.sink_to = w->num_sge ? w->sge[0].addr : 0;
		h->rreq.size = w->length;
		h->rreq.src_stag = w->rkey;
		h->rreq.src_to = w->remote_addr;
		len = 0;
		qp->orq[qp->orq_tail & (qp->orq_cap - 1)] = qp->sq_next;
		qp->orq_tail++;
		break;
	default:
		return -EINVAL; /* not reached: post_send refuses other ops */
	}
	if (iw_tx_init(&qp->tx.b, h, len, qp->attr.mulpdu, qp->attr.crc) < 0)
		return -EINVAL;
	w->state = ENG_SWQE_ACTIVE;
	qp->tx.msg = qp->sq_next;
	qp->sq_next++;
	qp->tx.src = IW_TX_SQ;
	qp->tx.active = true;
	return 0;
}

/* The zero-length RDMA Write of iw_qp_nudge: tagged, L set, STag 1, TO 0 (iwarp.md: siw's
 * RTR Write). It is a whole message, so it never interleaves with another tagged one. */
static int start_nudge(struct iw_qp *qp)
{
	struct iw_hdr *h = &qp->tx.b.hdr; /* built in place (no message is active) */

	qp->tx.nudge_pending = false;
	iw_hdr_init(h, IW_OP_WRITE);
	h->stag = 1;
	h->to = 0;
	if (iw_tx_init(&qp->tx.b, h, 0, qp->attr.mulpdu, qp->attr.crc) < 0)
		return -EINVAL;
	qp->tx.src = IW_TX_NUDGE;
	qp->tx.active = true;
	return 0;
}

/* Room to frame one more FPDU: a free slot, and pieces for a WQE with every SGE. Full rings
 * grow, but only when there is something to frame (an idle QP keeps the first size), and while
 * they can; without memory framing just stays closer to TCP. */
static bool frame_room(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;
	bool f_full = t->tail - t->head == t->f_cap;
	bool pay_short = t->pay_cap - (t->pay_tail - t->pay_head) < ENG_MAX_SGE;

	if (!f_full && !pay_short)
		return true;
	if (!t->active && !message_due(qp))
		return false;
	if (f_full &&
	    (t->f_cap == IW_TX_BATCH || iw_ring_grow((void **)&t->f, &t->f_cap, IW_TX_F_FIRST,
						     sizeof(*t->f), t->head, t->tail) < 0))
		return false;
	if (pay_short && (t->pay_cap == IW_TX_PAY ||
			  iw_ring_grow((void **)&t->pay, &t->pay_cap, IW_TX_PAY_FIRST,
				       sizeof(*t->pay), t->pay_head, t->pay_tail) < 0))
		return false;
	return true;
}

/* Picks the next message (siw_activate_tx): Read Responses first, but at most
 * IW_RRESP_BURST in a row while send WQEs wait. Returns true if one was started. */
static bool start_message(struct iw_qp *qp)
{
	bool sq = sq_startable(qp), irq = qp->tx.irq_next != qp->irq_tail;

	if (irq && (!sq || qp->tx.irq_burst < IW_RRESP_BURST)) {
		qp->tx.irq_burst++;
		return start_rresp(qp) == 0;
	}
	if (sq) {
		qp->tx.irq_burst = 0;
		return start_sq(qp) == 0;
	}
	if (qp->tx.nudge_pending)
		return start_nudge(qp) == 0;
	return false;
}

int iw_qp_nudge(struct iw_qp *qp)
{
	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		return -EINVAL;
	if (iw_tx_busy(qp) || qp->tx.irq_next != qp->irq_tail || sq_startable(qp))
		return -EBUSY;
	qp->tx.nudge_pending = true;
	return 0;
}

/* ---- framing ---- */

static int rresp_err(int e)
{
	/* siw: source checks of a Read Request are RDMAP remote protection errors. */
	switch (e) {
	case -ERANGE:
		return -IW_E_RP_BOUNDS;
	case -EACCES:
		return -IW_E_RP_ACCESS;
	default:
		return -IW_E_RP_STAG;
	}
}

/* Resolves payload [off, off + n) of the message being framed into pieces. Returns their
 * count, or a fatal error (the QP is in ERR with a Terminate queued). */
static int resolve(struct iw_qp *qp, uint32_t off, uint32_t n, struct eng_iov *pc)
{
	struct iw_txs *t = &qp->tx;

	if (!n)
		return 0;
	if (t->src == IW_TX_SQ) {
		struct eng_swqe *w = iw_swqe_at(qp, t->msg);
		int k;

		if (w->inl) {
			pc[0].ptr = w->inline_data + off;
			pc[0].len = n;
			return 1;
		}
		k = eng_sge_resolve_env(&qp->base.env, qp->base.init.pd, w->sge, w->num_sge, off, n,
					ENG_ACCESS_LOCAL_READ, pc);
		if (k < 0) {
			/* A local key error: the WR fails, the stream is terminated (the peer may
			 * hold part of the message). */
			w->state = ENG_SWQE_ERROR;
			w->status = IBV_WC_LOC_PROT_ERR;
			t->active = false;
			return iw_fatal(qp, -IW_E_LOCAL, NULL, 0);
		}
		return k;
	}
	if (t->src == IW_TX_RRESP) {
		struct iw_irqe *e = iw_irq_at(qp, t->msg);
		int err = 0;
		void *p = qp->base.env.mem_resolve(
		    qp->base.env.ctx, qp->base.init.pd, qp->base.init.qpn, e->rreq.src_stag, true,
		    e->rreq.src_to + off, n, IBV_ACCESS_REMOTE_READ, &err);
		if (!p) {
			/* Checked when the request came in; the MR changed since (siw checks
			 * here only). */
			t->active = false;
			return iw_fatal(qp, rresp_err(err), e->raw, sizeof(e->raw));
		}
		pc[0].ptr = p;
		pc[0].len = n;
		return 1;
	}
	return 0;
}

/* Whether piece pc overlaps [lo, lo + len) (addresses as integers: the piece and the range
 * may be different objects). */
static bool piece_in(const struct eng_iov *pc, const void *lo, size_t len)
{
	uintptr_t p = (uintptr_t)pc->ptr, l = (uintptr_t)lo;
	return len && p < l + len && l < p + pc->len;
}

int iw_qp_tx_forget(struct iw_qp *qp, const void *addr, size_t len)
{
	struct iw_txs *t = &qp->tx;
	size_t need = 0, have = 0;
	bool hit = false;

	/* Every framed piece there, and those copied before: one new copy holds them all. */
	for (uint32_t i = t->pay_head; i != t->pay_tail; i++) {
		const struct eng_iov *pc = piece_at(t, i);
		bool here = piece_in(pc, addr, len);

		hit |= here;
		if (here || piece_in(pc, t->copy, t->copy_len))
			need += pc->len;
	}
	if (!hit)
		return 0;
	uint8_t *copy = malloc(need);
	if (!copy)
		return -ENOMEM;
	for (uint32_t i = t->pay_head; i != t->pay_tail; i++) {
		struct eng_iov *pc = piece_at(t, i);

		if (piece_in(pc, addr, len) || piece_in(pc, t->copy, t->copy_len)) {
			memcpy(copy + have, pc->ptr, pc->len);
			pc->ptr = copy + have;
			have += pc->len;
		}
	}
	free(t->copy);
	t->copy = copy;
	t->copy_len = need;
	return 0;
}

/* Frames the next FPDU of the active message at the ring's tail. Returns 0, or a fatal error
 * (the QP is in ERR with a Terminate queued; nothing was added). */
static int frame(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;
	struct iw_txf *f = txf_at(t, t->tail);
	struct eng_iov pc[ENG_MAX_SGE];
	uint32_t off = 0, n = 0, crc = 0;
	/* On a failure below the builder has moved on, but the message is abandoned anyway
	 * (the QP is in ERR, t->active false) and the slot is not taken. */
	int hl = iw_tx_next_hdr(&t->b, f->hdr, sizeof(f->hdr), &off, &n);
	int k;

	if (hl <= 0)
		return -EINVAL; /* not reached: a done message is never active */
	k = resolve(qp, off, n, pc);
	if (k < 0)
		return k;
	f->hdr_len = (uint8_t)hl;
	f->npay = (uint8_t)k;
	f->pay = t->pay_tail;
	f->pay_len = n;
	f->src = t->src;
	f->msg = t->msg;
	for (int i = 0; i < k; i++)
		*piece_at(t, t->pay_tail + (uint32_t)i) = pc[i];
	t->pay_tail += (uint32_t)k;
	if (qp->attr.crc) {
		/* RFC 5044 6: from ULPDU_LENGTH through the pad, over the bytes where they lie. */
		crc = crc32c(0, f->hdr, (size_t)hl);
		for (int i = 0; i < k; i++)
			crc = crc32c(crc, pc[i].ptr, pc[i].len);
	}
	f->trl_len = (uint8_t)iw_fpdu_trailer(f->trl, (uint32_t)hl - IW_FPDU_LEN_SIZE + n, crc,
					      qp->attr.crc, NULL);
	f->len = (uint32_t)hl + n + f->trl_len;
	f->last = t->b.done;
	t->tail++;
	t->queued += f->len;
	if (t->b.done)
		t->active = false; /* every FPDU of the message is framed */
	return 0;
}

static void frame_term(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;
	struct iw_txf *f = txf_at(t, t->tail);

	f->hdr_len = 0;
	f->trl_len = 0;
	f->npay = 0;
	f->pay = t->pay_tail;
	f->pay_len = 0;
	f->src = IW_TX_TERM;
	f->last = true;
	f->len = t->term_len;
	t->tail++;
	t->queued += f->len;
}

/* Frames what is due, as far as the ring allows. Returns true if an FPDU waits. */
static bool prepare(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;

	if (t->finished)
		return false;
	if (qp->base.state == IBV_QPS_ERR) {
		/* Only a half-sent FPDU (iw_tx_keep_half) or the Terminate is left. */
		if (t->head != t->tail)
			return true;
		if (t->term_pending) {
			frame_term(qp);
			return true;
		}
		if (qp->sq_flush_pending)
			iw_sq_flush(qp);
		t->finished = true;
		return false;
	}
	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		return t->head != t->tail;
	while (t->queued < IW_TX_BATCH_BYTES && frame_room(qp)) {
		if (!t->active && !start_message(qp))
			break;
		if (frame(qp) < 0)
			return prepare(qp); /* ERR: the Terminate (after a half-sent FPDU) */
	}
	return t->head != t->tail;
}

int iw_qp_tx_want(struct iw_qp *qp, uint64_t now, struct iovec *iov, int max_iov)
{
	struct iw_txs *t = &qp->tx;
	size_t skip, offered = 0;
	int k = 0;

	(void)now;
	if (max_iov < 1)
		return -EINVAL;
	t->offered = 0;
	if (tx_idle(qp) || !prepare(qp))
		return 0;
	skip = t->sent;
	/* Each FPDU's pieces in order: header (its ring slot), payload (MR / inline), trailer. */
	for (uint32_t i = t->head; i != t->tail && k < max_iov; i++) {
		struct iw_txf *f = txf_at(t, i);

		for (uint32_t j = 0; j < (uint32_t)f->npay + 2 && k < max_iov; j++) {
			uint8_t *p;
			size_t len;

			if (j == 0) {
				p = f->src == IW_TX_TERM ? t->term : f->hdr;
				len = f->src == IW_TX_TERM ? t->term_len : f->hdr_len;
			} else if (j <= f->npay) {
				const struct eng_iov *pc = txf_piece(qp, f, j - 1);

				p = pc->ptr;
				len = pc->len;
			} else {
				p = f->trl;
				len = f->trl_len;
			}
			if (skip >= len) {
				skip -= len;
				continue;
			}
			iov[k].iov_base = p + skip;
			iov[k].iov_len = len - skip;
			offered += len - skip;
			skip = 0;
			k++;
		}
	}
	t->offered = offered;
	return k;
}

/* The last FPDU of a message has been handed to TCP. */
static void message_done(struct iw_qp *qp, const struct iw_txf *f)
{
	if (f->src == IW_TX_NUDGE) {
		IW_INC(qp, tx_nudges);
	} else if (f->src == IW_TX_RRESP) {
		qp->irq_head++; /* the IRQ slot is free again (responses go in IRQ order) */
	} else if (f->src == IW_TX_SQ) {
		struct eng_swqe *w = iw_swqe_at(qp, f->msg);

		/* siw: a SEND / WRITE completes once its last byte is with TCP; a READ when its
		 * response has been placed (iw_rx.c). */
		if (w->op != ENG_OP_READ) {
			w->state = ENG_SWQE_DONE;
			iw_sq_retire(qp);
		}
	}
	iw_check_drained(qp);
}

/* The head FPDU is out entirely. */
static void fpdu_done(struct iw_qp *qp)
{
	struct iw_txs *t = &qp->tx;
	struct iw_txf f = *txf_head(qp);

	t->head++;
	t->pay_head += f.npay;
	t->queued -= f.len;
	t->sent = 0;
	IW_INC(qp, tx_fpdus);
	IW_ADD(qp, tx_payload_bytes, f.pay_len);
	if (f.src == IW_TX_TERM) {
		t->term_pending = false;
		if (qp->sq_flush_pending)
			iw_sq_flush(qp);
		t->finished = true;
		return;
	}
	if (qp->base.state == IBV_QPS_ERR) {
		/* The half-sent FPDU is whole now: drop its message, flush, Terminate next. */
		if (qp->sq_flush_pending)
			iw_sq_flush(qp);
		if (!t->term_pending)
			t->finished = true;
		return;
	}
	if (f.last)
		message_done(qp, &f);
}

int iw_qp_tx_done(struct iw_qp *qp, size_t n)
{
	struct iw_txs *t = &qp->tx;

	if (n > t->offered)
		return -EINVAL;
	t->offered = 0;
	IW_ADD(qp, tx_bytes, n);
	while (n > 0 && t->head != t->tail) {
		size_t rest = txf_head(qp)->len - t->sent;

		if (n < rest) {
			t->sent += n;
			break;
		}
		n -= rest;
		t->sent += rest;
		fpdu_done(qp);
	}
	return 0;
}

bool iw_qp_tx_finished(const struct iw_qp *qp)
{
	return qp->tx.finished;
}

/* ---- the direct way of one small message (iw_qp_post_one) ---- */

/* A post that needs nothing of the send queue's machinery: nothing framed, being framed or due
 * to go first (tx_idle: RTS, so no Terminate either), no WR before it to complete first (an
 * empty queue: no READ outstanding, the MPA RTR Read included), one WR, room for one. */
static bool goes_direct(const struct iw_qp *qp, const struct ibv_send_wr *wr)
{
	return tx_idle(qp) && !wr->next && qp->base.sq_head == qp->base.sq_tail && !qp->rtr_read &&
	       qp->base.sq_max > 0;
}

const uint8_t *iw_qp_post_one(struct iw_qp *qp, const struct ibv_send_wr *wr, size_t *len)
{
	struct iw_txs *t = &qp->tx;
	struct eng_sge sge[ENG_MAX_SGE];
	struct eng_iov pc[ENG_MAX_SGE];
	uint64_t total = 0;
	uint32_t crc = 0;
	int op, k = 0;
	size_t hl;
	bool inl;
	uint8_t *p;

	if (!goes_direct(qp, wr))
		return NULL;
	op = eng_swqe_check(wr, qp->base.init.max_send_sge, qp->base.init.max_inline, &total);
	if (op != ENG_OP_SEND && op != ENG_OP_SEND_INV && op != ENG_OP_WRITE)
		return NULL;
	/* One FPDU (RFC 5041 5: the header and the payload within the MULPDU). */
	if (total > IW_TX_ONE_PAY ||
	    total + (op == ENG_OP_WRITE ? IW_DDP_TAGGED_HDR_LEN : IW_DDP_UNTAGGED_HDR_LEN) >
		qp->attr.mulpdu)
		return NULL;
	inl = wr->send_flags & IBV_SEND_INLINE;
	if (!inl && total) {
		/* The keys are checked now, as framing checks them; a bad one goes the ordinary
		 * way, which fails the WR and terminates the stream. */
		for (int i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
		k = eng_sge_resolve_env(&qp->base.env, qp->base.init.pd, sge, (uint32_t)wr->num_sge,
					0, (uint32_t)total, ENG_ACCESS_LOCAL_READ, pc);
		if (k < 0)
			return NULL;
	}
	if (!t->one && !(t->one = malloc(IW_TX_ONE)))
		return NULL; /* without memory the ordinary way still works */
	/* The header start_sq would build, in one FPDU: L set, MO / TO of the first byte. */
	if (op == ENG_OP_WRITE) {
		hl = iw_hdr_put_write(t->one, IW_TX_ONE, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr,
				      (uint32_t)total);
	} else {
		bool inv = op == ENG_OP_SEND_INV;

		hl = iw_hdr_put_send(
		    t->one, IW_TX_ONE, send_opcode(inv, wr->send_flags & IBV_SEND_SOLICITED),
		    inv ? wr->invalidate_rkey : 0, qp->tx_msn[IW_QN_SEND] + 1, (uint32_t)total);
	}
	if (!hl)
		return NULL; /* not reached: the header and payload fit by construction */
	p = t->one + hl;
	if (inl) {
		/* Read now from the caller's addresses, without a key (eng_swqe_fill); an empty
		 * entry may have no address at all. */
		for (int i = 0; i < wr->num_sge; i++) {
			if (!wr->sg_list[i].length)
				continue;
			memcpy(p, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			p += wr->sg_list[i].length;
		}
	} else {
		for (int i = 0; i < k; i++) {
			memcpy(p, pc[i].ptr, pc[i].len);
			p += pc[i].len;
		}
	}
	if (qp->attr.crc)
		crc = crc32c(0, t->one, hl + total); /* RFC 5044 6, the pad follows */
	p += iw_fpdu_trailer(p, (uint32_t)(hl - IW_FPDU_LEN_SIZE + total), crc, qp->attr.crc, NULL);
	if (op != ENG_OP_WRITE)
		qp->tx_msn[IW_QN_SEND]++;
	t->one_len = (uint32_t)(p - t->one);
	t->one_pay = (uint32_t)total;
	t->one_op = (uint8_t)op;
	*len = t->one_len;
	return t->one;
}

void iw_qp_one_sent(struct iw_qp *qp, const struct ibv_send_wr *wr, size_t sent)
{
	struct iw_txs *t = &qp->tx;
	uint32_t idx = qp->base.sq_tail;
	struct eng_swqe *w;
	struct iw_txf *f;

	IW_INC(qp, tx_direct);
	IW_ADD(qp, tx_bytes, sent);
	if (sent >= t->one_len) {
		IW_INC(qp, tx_fpdus);
		IW_ADD(qp, tx_payload_bytes, t->one_pay);
		if (qp->base.init.sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED))
			iw_send_complete(qp, wr->wr_id, t->one_op, t->one_pay, IBV_WC_SUCCESS);
		return;
	}
	/* The rest goes the ordinary way: a started send queue entry whose one FPDU, framed and
	 * partly sent, is the buffer (the rings were empty: there is room). */
	w = iw_swqe_at(qp, idx);
	eng_swqe_fill(w, wr, t->one_op, t->one_pay, qp->base.init.sq_sig_all);
	w->state = ENG_SWQE_ACTIVE;
	qp->base.sq_tail++;
	qp->sq_next = qp->base.sq_tail;
	f = txf_at(t, t->tail);
	f->hdr_len = 0;
	f->trl_len = 0;
	f->npay = 1;
	f->pay = t->pay_tail;
	f->pay_len = t->one_pay;
	f->src = IW_TX_SQ;
	f->msg = idx;
	f->last = true;
	f->len = t->one_len;
	*piece_at(t, t->pay_tail) = (struct eng_iov){.ptr = t->one, .len = t->one_len};
	t->pay_tail++;
	t->tail++;
	t->queued += t->one_len;
	t->sent = sent;
}
