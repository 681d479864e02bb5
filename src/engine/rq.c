/* Receive queue ring, private to one QP or shared (SRQ). Posting copies the WR; the responder
 * copies the head WQE out when a message starts using it (resp.c), so an SRQ slot is free
 * again as soon as it is taken. */
#include <stdlib.h>

#include "engine/eng_int.h"

int eng_rq_init(struct eng_rq *rq, uint32_t max_wr, uint32_t max_sge, bool is_srq)
{
	uint32_t size = 1;

	if (max_wr == 0 || max_wr > (1u << 20) || max_sge > ENG_MAX_SGE)
		return -EINVAL;
	while (size < max_wr)
		size <<= 1;
	memset(rq, 0, sizeof(*rq));
	rq->ring = calloc(size, sizeof(*rq->ring));
	if (!rq->ring)
		return -ENOMEM;
	rq->mask = size - 1;
	rq->max_wr = max_wr;
	rq->max_sge = max_sge;
	rq->is_srq = is_srq;
	return 0;
}

void eng_rq_fini(struct eng_rq *rq)
{
	free(rq->ring);
	rq->ring = NULL;
}

uint32_t eng_rq_count(const struct eng_rq *rq)
{
	return rq->tail - rq->head;
}

int eng_rq_post(struct eng_rq *rq, const struct ibv_recv_wr *wr, const struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		struct eng_rwqe *w;
		uint64_t total = 0;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
			*bad = wr;
			return -EINVAL;
		}
		for (int i = 0; i < wr->num_sge; i++)
			total += wr->sg_list[i].length;
		if (total > ENG_MAX_MSG_SIZE) {
			*bad = wr;
			return -EINVAL;
		}
		if (eng_rq_count(rq) >= rq->max_wr) {
			*bad = wr;
			return -ENOMEM;
		}
		w = &rq->ring[rq->tail & rq->mask];
		w->wr_id = wr->wr_id;
		w->num_sge = (uint32_t)wr->num_sge;
		w->length = (uint32_t)total;
		for (int i = 0; i < wr->num_sge; i++) {
			w->sge[i].addr = wr->sg_list[i].addr;
			w->sge[i].length = wr->sg_list[i].length;
			w->sge[i].lkey = wr->sg_list[i].lkey;
		}
		rq->tail++;
	}
	return 0;
}

const struct eng_rwqe *eng_rq_peek(const struct eng_rq *rq)
{
	if (rq->head == rq->tail)
		return NULL;
	return &rq->ring[rq->head & rq->mask];
}

void eng_rq_pop(struct eng_rq *rq)
{
	rq->head++;
	/* IBA 10.2.9.3 / ibv_modify_srq(3): the event fires once when the count falls below the
	 * armed limit, and the limit disarms. */
	if (rq->is_srq && rq->limit && eng_rq_count(rq) < rq->limit) {
		rq->limit = 0;
		if (rq->limit_event)
			rq->limit_event(rq);
	}
}

void eng_rq_clear(struct eng_rq *rq)
{
	rq->head = rq->tail = 0;
}
