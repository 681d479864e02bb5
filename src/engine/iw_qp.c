/* iWARP QP: creation, attributes, the state machine, posting, errors (Terminate, ERR, flush)
 * and completions. The receive side is iw_rx.c, the transmit side iw_tx.c (iw_eng.h).
 * Behaviour follows RFC 5040 / 5041 / 5044 as Linux siw implements them (siw_qp.c,
 * siw_verbs.c; ../shared/spec/iwarp.md). */
#define IW_ENG_PRIVATE
#include "engine/iw_eng.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine/eng_int.h"

const char *const iw_counter_names[IW_CNT__COUNT] = {
#define IW_COUNTER_NAME_(name, desc) #name,
    IW_COUNTERS(IW_COUNTER_NAME_)
#undef IW_COUNTER_NAME_
#define IW_COUNTER_TERM_NAME_(name, layer, etype, ecode, hdrct) "term_sent_" #name,
	IW_ERRORS(IW_COUNTER_TERM_NAME_) IW_LOCAL_ERRORS(IW_COUNTER_TERM_NAME_)
#undef IW_COUNTER_TERM_NAME_
};

/* The Terminate codes of the engine's own errors (IW_LOCAL_ERRORS). */
static const struct iw_term_code local_codes[IW_LE__END - IW_LE__BEFORE - 1] = {
#define IW_LOCAL_ROW_(name, layer, etype, ecode, hdrct)                                            \
	[IW_LE_##name - IW_LE__BEFORE - 1] = {layer, etype, ecode, hdrct},
    IW_LOCAL_ERRORS(IW_LOCAL_ROW_)
#undef IW_LOCAL_ROW_
};

/* Which send opcodes iWARP carries (RFC 5040 4.3; no RFC 7306 immediate data or atomics in
 * siw). */
static bool op_supported(int op)
{
	return op == ENG_OP_SEND || op == ENG_OP_SEND_INV || op == ENG_OP_WRITE ||
	       op == ENG_OP_READ;
}

/* ---- completions ---- */

void iw_send_complete(struct iw_qp *qp, uint64_t wr_id, uint8_t op, uint32_t len,
		      enum ibv_wc_status status)
{
	struct ibv_wc wc = {0};

	wc.wr_id = wr_id;
	wc.status = status;
	wc.opcode = eng_ops[op].wc_opcode;
	wc.byte_len = status == IBV_WC_SUCCESS ? len : 0;
	eng_base_complete(&qp->base, qp->base.init.send_cq, &wc, false);
}

static void send_complete(struct iw_qp *qp, const struct eng_swqe *w, enum ibv_wc_status status)
{
	iw_send_complete(qp, w->wr_id, w->op, w->length, status);
}

void iw_recv_complete(struct iw_qp *qp, enum ibv_wc_status status, uint32_t byte_len,
		      bool solicited, uint32_t inv_stag, bool inv)
{
	struct ibv_wc wc = {0};

	wc.wr_id = qp->rx.rwqe.wr_id;
	wc.status = status;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = byte_len;
	if (inv && status == IBV_WC_SUCCESS) {
		wc.wc_flags |= IBV_WC_WITH_INV;
		wc.invalidated_rkey = inv_stag;
	}
	qp->rx.u_active = false;
	eng_base_complete(&qp->base, qp->base.init.recv_cq, &wc, solicited);
}

void iw_sq_retire(struct iw_qp *qp)
{
	while (qp->base.sq_head != qp->sq_next) {
		struct eng_swqe *w = iw_swqe_at(qp, qp->base.sq_head);

		if (w->state != ENG_SWQE_DONE)
			break;
		if (w->signaled)
			send_complete(qp, w, IBV_WC_SUCCESS);
		qp->base.sq_head++;
	}
}

/* Verbs: in ERR every outstanding send WR completes, in order; one that failed carries its
 * own status, the others IBV_WC_WR_FLUSH_ERR (reported whether signaled or not). */
void iw_sq_flush(struct iw_qp *qp)
{
	eng_base_flush_sq(&qp->base, true);
	qp->sq_next = qp->base.sq_tail;
	qp->orq_head = qp->orq_tail = 0;
	qp->sq_flush_pending = false;
}

/* ---- events, wake-up ---- */

void iw_kick(struct iw_qp *qp)
{
	if (qp->base.env.wake && iw_tx_ready(qp))
		qp->base.env.wake(qp->base.env.ctx, &qp->base);
}

void iw_check_drained(struct iw_qp *qp)
{
	/* IBA 10.3.1 SQD: drained once nothing started is unfinished. */
	if (!eng_base_draining(&qp->base) || iw_tx_busy(qp) || qp->base.sq_head != qp->sq_next)
		return;
	eng_base_drained(&qp->base);
}

/* ---- errors ---- */

void iw_to_err(struct iw_qp *qp, bool abort, enum ibv_event_type ev, bool raise)
{
	if (qp->base.state == IBV_QPS_ERR) {
		if (abort && !qp->tx.finished) {
			/* The caller gives up the connection: nothing more goes out. */
			iw_tx_abort(qp);
			qp->tx.term_pending = false;
			if (qp->sq_flush_pending)
				iw_sq_flush(qp);
			qp->tx.finished = true;
		}
		return;
	}
	qp->base.state = IBV_QPS_ERR;
	qp->rx.pend_rreq = false;
	qp->rx.pend_term = false;
	qp->rx.want_valid = false;
	qp->irq_head = qp->irq_tail = qp->tx.irq_next = 0; /* no more Read Responses (siw) */
	if (!abort && iw_tx_keep_half(qp)) {
		/* Half an FPDU is on the wire: finish it so that the peer can parse the
		 * Terminate after it (the FPDUs framed after it are dropped); its payload lives
		 * in WQE / MR memory, so the send queue is flushed only once it is out
		 * (iw_qp_tx_done). */
		qp->sq_flush_pending = true;
	} else {
		iw_tx_abort(qp);
		iw_sq_flush(qp);
	}
	/* After the send queue, as the RoCE engine (eng_qp_to_err): the receive in progress, then
	 * the receive queue (eng_base_err_flush, below). */
	if (qp->rx.u_active)
		iw_recv_complete(qp, IBV_WC_WR_FLUSH_ERR, 0, false, 0, false);
	if (abort) {
		qp->tx.term_pending = false;
		qp->tx.finished = true;
	} else if (!qp->tx.term_pending && !qp->sq_flush_pending) {
		qp->tx.finished = true;
	}
	eng_base_err_flush(&qp->base, ev, raise);
}

/* The Terminate for an engine error: the wire's table for enum iw_err, ours for the rest. */
static int term_for(int err, const uint8_t *raw, size_t raw_len, struct iw_term *t)
{
	int e = err < 0 ? -err : err;

	if (iw_is_err(e))
		return iw_term_from_err(e, raw, raw_len, t);
	if (e <= IW_LE__BEFORE || e >= IW_LE__END)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	t->layer = local_codes[e - IW_LE__BEFORE - 1].layer;
	t->etype = local_codes[e - IW_LE__BEFORE - 1].etype;
	t->ecode = local_codes[e - IW_LE__BEFORE - 1].ecode;
	return 0;
}

/* The term_sent_* counters close enum iw_counter: the wire rows, then the local rows. */
#define TERM_SENT_WIRE	(IW_E__END - IW_E__FIRST)
#define TERM_SENT_LOCAL (IW_LE__END - IW_LE__BEFORE - 1)
#define TERM_SENT_BASE	(IW_CNT__COUNT - TERM_SENT_WIRE - TERM_SENT_LOCAL)
_Static_assert(TERM_SENT_BASE > IW_CNT_term_rcvd_bogus, "term_sent_* counters out of place");

static unsigned term_counter(int err)
{
	int e = err < 0 ? -err : err;

	if (iw_is_err(e))
		return (unsigned)(TERM_SENT_BASE + e - IW_E__FIRST);
	return (unsigned)(TERM_SENT_BASE + TERM_SENT_WIRE + e - IW_LE__BEFORE - 1);
}

int iw_fatal(struct iw_qp *qp, int err, const uint8_t *raw, size_t raw_len)
{
	struct iw_term t;
	enum ibv_event_type ev = IBV_EVENT_QP_FATAL;
	int n;

	if (qp->base.state == IBV_QPS_ERR)
		return -EPROTO;
	if (term_for(err, raw, raw_len, &t) == 0) {
		/* RFC 5040 7.1: remote protection / DDP tagged buffer errors are access errors. */
		if ((t.layer == IW_LAYER_DDP && t.etype == IW_ETYPE_DDP_TAGGED) ||
		    (t.layer == IW_LAYER_RDMAP && t.etype == IW_ETYPE_RDMAP_PROTECTION))
			ev = IBV_EVENT_QP_ACCESS_ERR;
		/* siw sends MSN 1 (the first and only message on queue 2). */
		n = iw_term_build(&t, ++qp->tx_msn[IW_QN_TERMINATE], qp->attr.crc, qp->tx.term,
				  sizeof(qp->tx.term));
		if (n > 0) {
			qp->tx.term_len = (uint16_t)n;
			qp->tx.term_pending = true;
			qp->term_sent = t;
			qp->have_term_sent = true;
			qp->counters[term_counter(err)]++;
		}
	}
	iw_to_err(qp, false, ev, true);
	return -EPROTO;
}

/* ---- create / destroy / attributes ---- */

int iw_qp_create(const struct eng_qp_init *init, const struct eng_env *env, struct iw_qp **out)
{
	struct iw_qp *qp;
	int err;

	if (!init || !env || !out || !env->mem_resolve)
		return -EINVAL;
	if (init->type != IBV_QPT_RC || !init->send_cq || !init->recv_cq ||
	    init->max_send_wr == 0 || init->max_send_wr > (1u << 20) ||
	    init->max_send_sge > IW_MAX_SGE || init->max_inline > ENG_MAX_INLINE)
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	err = eng_base_init(&qp->base, init, env, true);
	if (err)
		goto free_qp;
	/* Until the caller sets them: siw's defaults without MPA negotiation. */
	qp->attr.ird = 16;
	qp->attr.ord = 16;
	qp->attr.mulpdu = iw_mulpdu(1448);
	qp->base.state = IBV_QPS_RESET;
	iw_rx_reset(qp);
	err = iw_tx_rings_init(qp);
	if (err)
		goto free_queues;
	*out = qp;
	return 0;

free_queues:
	eng_base_fini(&qp->base);
free_qp:
	free(qp);
	return err;
}

void iw_qp_destroy(struct iw_qp *qp)
{
	if (!qp)
		return;
	eng_base_fini(&qp->base);
	free(qp->tx.copy);
	iw_tx_rings_fini(qp);
	free(qp->irq);
	free(qp->orq);
	free(qp);
}

uint32_t iw_qp_num(const struct iw_qp *qp)
{
	return qp->base.init.qpn;
}

void *iw_qp_user(const struct iw_qp *qp)
{
	return qp->base.init.user;
}

void iw_qp_set_link(struct iw_qp *qp, void *link)
{
	qp->link = link;
}

void *iw_qp_link(const struct iw_qp *qp)
{
	return qp->link;
}

enum ibv_qp_state iw_qp_state(const struct iw_qp *qp)
{
	return qp->base.state;
}

bool iw_qp_send_cq_waiting(const struct iw_qp *qp)
{
	const struct eng_cq *cq = qp->base.init.send_cq;
	return cq->tail != cq->head;
}

const uint64_t *iw_qp_counters(const struct iw_qp *qp)
{
	return qp->counters;
}

int iw_qp_set_attr(struct iw_qp *qp, const struct iw_qp_attr *attr)
{
	if (!attr || attr->ird > IW_MAX_IRD || attr->ord == 0 || attr->ord > IW_MAX_ORD ||
	    attr->mulpdu < IW_MIN_MULPDU)
		return -EINVAL;
	/* CRC use is fixed for the connection by MPA (RFC 5044 7.1). */
	if ((qp->base.state == IBV_QPS_RTS || qp->base.state == IBV_QPS_SQD) &&
	    attr->crc != qp->attr.crc)
		return -EINVAL;
	qp->attr = *attr;
	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		iw_rx_reset(qp); /* crc / max_rx_ulpdu take effect at the stream start */
	iw_kick(qp);
	return 0;
}

void iw_qp_get_attr(const struct iw_qp *qp, struct iw_qp_attr *attr)
{
	*attr = qp->attr;
}

int iw_qp_term_rcvd(const struct iw_qp *qp, struct iw_term *out)
{
	if (!qp->have_term_rcvd)
		return -ENOENT;
	*out = qp->term_rcvd;
	return 0;
}

int iw_qp_term_sent(const struct iw_qp *qp, struct iw_term *out)
{
	if (!qp->have_term_sent)
		return -ENOENT;
	*out = qp->term_sent;
	return 0;
}

/* ---- state machine ---- */

/* Forgets the stream: both directions restart at an FPDU boundary with MSN 1. */
static void stream_reset(struct iw_qp *qp)
{
	iw_rx_reset(qp);
	iw_tx_reset(qp);
	memset(qp->tx_msn, 0, sizeof(qp->tx_msn)); /* pre-incremented: the first is 1 */
	for (int i = 0; i < IW_QN__COUNT; i++)
		qp->rx_msn[i] = 1;
	qp->orq_head = qp->orq_tail = 0;
	qp->rtr_read = false;
	qp->irq_head = qp->irq_tail = 0;
	qp->sq_flush_pending = false;
	qp->have_term_sent = qp->have_term_rcvd = false;
}

void iw_qp_set_state(struct iw_qp *qp, enum ibv_qp_state state, uint64_t now)
{
	enum ibv_qp_state from = qp->base.state;

	(void)now;
	switch (state) {
	case IBV_QPS_RESET:
		eng_base_reset(&qp->base);
		qp->early_send = false;
		qp->sq_next = 0;
		stream_reset(qp);
		break;
	case IBV_QPS_INIT:
	case IBV_QPS_RTR:
		qp->base.state = state;
		break;
	case IBV_QPS_RTS:
		/* Connection established (after MPA): FPDU mode starts in both directions. */
		if (from == IBV_QPS_RESET || from == IBV_QPS_INIT || from == IBV_QPS_RTR)
			stream_reset(qp);
		qp->base.state = IBV_QPS_RTS;
		break;
	case IBV_QPS_SQD:
		qp->base.state = IBV_QPS_SQD;
		qp->base.drained = false;
		iw_check_drained(qp);
		break;
	case IBV_QPS_SQE:
		qp->base.state = IBV_QPS_SQE;
		break;
	case IBV_QPS_ERR:
		iw_to_err(qp, true, IBV_EVENT_QP_FATAL, false);
		break;
	default:
		break;
	}
	iw_kick(qp);
}

void iw_qp_set_early_send(struct iw_qp *qp, bool on)
{
	qp->early_send = on;
}

bool iw_qp_rx_quiescent(const struct iw_qp *qp)
{
	return iw_rx_idle(&qp->rx.p) && qp->rx.off == 0 && !qp->rx.t_active && !qp->rx.u_active &&
	       qp->orq_head == qp->orq_tail;
}

void iw_qp_conn_failed(struct iw_qp *qp, uint64_t now)
{
	(void)now;
	qp->early_send = false;
	iw_to_err(qp, true, IBV_EVENT_QP_FATAL, true);
	iw_kick(qp);
}

int iw_qp_set_rtr(struct iw_qp *qp, const uint32_t tx_msn_used[IW_QN__COUNT],
		  const uint32_t rx_msn_used[IW_QN__COUNT], bool orq_rtr)
{
	if (qp->base.state != IBV_QPS_RTS || !iw_rx_idle(&qp->rx.p) || qp->rx.p.fpdus ||
	    qp->counters[IW_CNT_tx_bytes] || iw_tx_busy(qp))
		return -EINVAL;
	for (int i = 0; i < IW_QN__COUNT; i++) {
		if (tx_msn_used)
			qp->tx_msn[i] += tx_msn_used[i];
		if (rx_msn_used)
			qp->rx_msn[i] += rx_msn_used[i];
	}
	qp->rtr_read = orq_rtr;
	return 0;
}

int iw_ring_grow(void **ring, uint32_t *cap, uint32_t first, size_t esz, uint32_t head,
		 uint32_t tail)
{
	uint32_t ncap = *cap ? 2 * *cap : first;
	uint8_t *n = malloc((size_t)ncap * esz);
	const uint8_t *o = *ring;

	if (!n)
		return -ENOMEM;
	for (uint32_t i = head; i != tail; i++)
		memcpy(n + (size_t)(i & (ncap - 1)) * esz, o + (size_t)(i & (*cap - 1)) * esz, esz);
	free(*ring);
	*ring = n;
	*cap = ncap;
	return 0;
}

/* ---- posting ---- */

/* The outbound READ queue, at the first READ posted: no more READs can be out than the send
 * ring holds or IW_MAX_ORD allows. */
static int orq_alloc(struct iw_qp *qp)
{
	uint32_t cap =
	    eng_pow2_at_least(qp->base.sq_max < IW_MAX_ORD ? qp->base.sq_max : IW_MAX_ORD);

	qp->orq = malloc(cap * sizeof(*qp->orq));
	if (!qp->orq)
		return -ENOMEM;
	qp->orq_cap = cap;
	return 0;
}

int iw_qp_post_send(struct iw_qp *qp, const struct ibv_send_wr *wr, const struct ibv_send_wr **bad,
		    uint64_t now)
{
	int err = 0;

	(void)now;
	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD &&
	    qp->base.state != IBV_QPS_ERR &&
	    !(qp->early_send &&
	      (qp->base.state == IBV_QPS_INIT || qp->base.state == IBV_QPS_RTR))) {
		*bad = wr;
		return -EINVAL;
	}
	for (; wr; wr = wr->next) {
		uint64_t len = 0;
		int op =
		    eng_swqe_check(wr, qp->base.init.max_send_sge, qp->base.init.max_inline, &len);

		if (op < 0 || !op_supported(op) ||
		    (op == ENG_OP_READ && wr->num_sge > IW_MAX_SGE_RD)) {
			err = -EINVAL;
			break;
		}
		if (qp->base.sq_tail - qp->base.sq_head >= qp->base.sq_max ||
		    (op == ENG_OP_READ && !qp->orq && orq_alloc(qp) < 0)) {
			err = -ENOMEM;
			break;
		}
		if (qp->base.state == IBV_QPS_ERR && !qp->sq_flush_pending) {
			/* WRs posted in ERR complete at once with WR_FLUSH_ERR. */
			eng_base_flush_wr(&qp->base, wr->wr_id, op);
			continue;
		}
		eng_swqe_fill(iw_swqe_at(qp, qp->base.sq_tail), wr, op, (uint32_t)len,
			      qp->base.init.sq_sig_all);
		qp->base.sq_tail++;
	}
	if (err)
		*bad = wr;
	iw_kick(qp);
	return err;
}
