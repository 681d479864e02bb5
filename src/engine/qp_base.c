/* What the RoCE and the iWARP QP share (struct eng_qp_base, eng.h), written once: the queues
 * made and freed, receives posted, completions pushed and flushed, events raised, and the
 * part of entering ERR that does not depend on the wire. Each engine keeps what does: the
 * RoCE requester's rewind and held receive (qp.c), the iWARP QP's half-sent FPDU and
 * Terminate (iw_qp.c). */
#include <stdlib.h>

#include "engine/eng_int.h"

int eng_base_init(struct eng_qp_base *b, const struct eng_qp_init *init, const struct eng_env *env,
		  bool iwarp)
{
	uint32_t size = eng_pow2_at_least(init->max_send_wr);

	b->init = *init;
	b->env = *env;
	b->iwarp = iwarp;
	b->state = IBV_QPS_RESET;
	b->sq = calloc(size, sizeof(*b->sq));
	if (!b->sq)
		return -ENOMEM;
	b->sq_mask = size - 1;
	b->sq_max = init->max_send_wr;
	if (init->srq) {
		b->rq = init->srq;
		return 0;
	}
	if (init->type == IBV_QPT_XRC_SEND || init->type == IBV_QPT_XRC_RECV) {
		b->rq = NULL; /* XRC: no receive queue of its own (the SRQ comes per request) */
		return 0;
	}
	int err = eng_rq_init(&b->own_rq, init->max_recv_wr ? init->max_recv_wr : 1,
			      init->max_recv_sge, false);
	if (err) {
		free(b->sq);
		b->sq = NULL;
		return err;
	}
	b->rq = &b->own_rq;
	return 0;
}

void eng_base_fini(struct eng_qp_base *b)
{
	if (b->rq == &b->own_rq)
		eng_rq_fini(&b->own_rq);
	free(b->sq);
	b->sq = NULL;
}

void eng_base_reset(struct eng_qp_base *b)
{
	b->state = IBV_QPS_RESET;
	b->sq_head = b->sq_tail = 0;
	if (b->rq == &b->own_rq)
		eng_rq_clear(b->rq);
	eng_cq_clean(b->init.send_cq, b->init.qpn);
	if (b->init.recv_cq != b->init.send_cq)
		eng_cq_clean(b->init.recv_cq, b->init.qpn);
}

void eng_base_complete(struct eng_qp_base *b, struct eng_cq *cq, struct ibv_wc *wc, bool solicited)
{
	wc->qp_num = b->init.qpn;
	(void)eng_cq_push(cq, wc, solicited);
}

void eng_base_event(struct eng_qp_base *b, enum ibv_event_type ev)
{
	if (b->env.event)
		b->env.event(b->env.ctx, b, ev);
}

static void flush_recv(struct eng_qp_base *b, uint64_t wr_id)
{
	struct ibv_wc wc = {0};

	wc.wr_id = wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = IBV_WC_RECV;
	eng_base_complete(b, b->init.recv_cq, &wc, false);
}

int eng_base_post_recv(struct eng_qp_base *b, const struct ibv_recv_wr *wr,
		       const struct ibv_recv_wr **bad)
{
	if (b->init.srq || !b->rq || b->state == IBV_QPS_RESET) {
		*bad = wr;
		return -EINVAL; /* SRQ, or XRC: no receive queue of its own */
	}
	if (b->state == IBV_QPS_ERR) {
		for (; wr; wr = wr->next) {
			if (wr->num_sge < 0 || (uint32_t)wr->num_sge > b->rq->max_sge) {
				*bad = wr;
				return -EINVAL;
			}
			flush_recv(b, wr->wr_id);
		}
		return 0;
	}
	return eng_rq_post(b->rq, wr, bad);
}

/* An error completion of a send WR, reported whether or not it was signaled (IBA 10.8.3). */
static void flush_send(struct eng_qp_base *b, uint64_t wr_id, uint8_t op, enum ibv_wc_status status)
{
	struct ibv_wc wc = {0};

	wc.wr_id = wr_id;
	wc.status = status;
	wc.opcode = eng_ops[op].wc_opcode;
	eng_base_complete(b, b->init.send_cq, &wc, false);
}

void eng_base_flush_wr(struct eng_qp_base *b, uint64_t wr_id, int op)
{
	flush_send(b, wr_id, (uint8_t)op, IBV_WC_WR_FLUSH_ERR);
}

void eng_base_flush_sq(struct eng_qp_base *b, bool own_status)
{
	for (uint32_t i = b->sq_head; i != b->sq_tail; i++) {
		const struct eng_swqe *w = &b->sq[i & b->sq_mask];
		bool own = own_status && w->state == ENG_SWQE_ERROR;

		flush_send(b, w->wr_id, w->op, own ? w->status : IBV_WC_WR_FLUSH_ERR);
	}
	b->sq_head = b->sq_tail;
}

void eng_base_err_flush(struct eng_qp_base *b, enum ibv_event_type ev, bool raise)
{
	if (b->rq == &b->own_rq) {
		const struct eng_rwqe *r;

		while ((r = eng_rq_peek(b->rq)) != NULL) {
			flush_recv(b, r->wr_id);
			eng_rq_pop(b->rq);
		}
	}
	if (raise)
		eng_base_event(b, ev);
	/* IBA 11.6.3.1: an SRQ-attached QP in ERR reports its last WQE. */
	if (b->init.srq)
		eng_base_event(b, IBV_EVENT_QP_LAST_WQE_REACHED);
}

void eng_base_drained(struct eng_qp_base *b)
{
	b->drained = true;
	eng_base_event(b, IBV_EVENT_SQ_DRAINED);
}
