/* Completion queue ring (eng.h). The engine is the only producer; the caller polls under the
 * same lock, so plain free-running indices suffice. */
#include <stdlib.h>

#include "engine/eng_int.h"

int eng_cq_init(struct eng_cq *cq, uint32_t cqe)
{
	uint32_t size;

	if (cqe == 0 || cqe > (1u << 24))
		return -EINVAL;
	size = eng_pow2_at_least(cqe);
	memset(cq, 0, sizeof(*cq));
	cq->ring = calloc(size, sizeof(*cq->ring));
	if (!cq->ring)
		return -ENOMEM;
	cq->mask = size - 1;
	cq->cqe = cqe;
	return 0;
}

void eng_cq_fini(struct eng_cq *cq)
{
	free(cq->ring);
	cq->ring = NULL;
}

int eng_cq_resize(struct eng_cq *cq, uint32_t cqe)
{
	uint32_t used = cq->tail - cq->head;
	if (cqe == 0 || cqe > (1u << 24) || cqe < used)
		return -EINVAL;
	uint32_t size = eng_pow2_at_least(cqe);
	struct ibv_wc *ring = calloc(size, sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	for (uint32_t i = 0; i < used; i++)
		ring[i] = cq->ring[(cq->head + i) & cq->mask];
	free(cq->ring);
	cq->ring = ring;
	cq->mask = size - 1;
	cq->head = 0;
	cq->tail = used;
	cq->cqe = cqe;
	return 0;
}

int eng_cq_poll(struct eng_cq *cq, int n, struct ibv_wc *wc)
{
	int i = 0;

	while (i < n && cq->head != cq->tail) {
		wc[i++] = cq->ring[cq->head & cq->mask];
		cq->head++;
	}
	return i;
}

/* The ring holds mask + 1 >= cqe entries: "at least cqe", as verbs allows. Error completions
 * also fire a solicited-only arm (IBA 11.4.2.2: unsuccessful completions are reported to
 * solicited-only requests). */
int eng_cq_push(struct eng_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	if (cq->tail - cq->head > cq->mask) {
		cq->overflow = true;
		return -ENOSPC;
	}
	cq->ring[cq->tail & cq->mask] = *wc;
	cq->tail++;
	if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq->armed = 0;
		if (cq->notify)
			cq->notify(cq);
	}
	return 0;
}

uint32_t eng_cq_clean(struct eng_cq *cq, uint32_t qpn)
{
	if (!cq)
		return 0;
	/* Compacts towards the tail: the kept completions keep their order and the head moves up
	 * by the number removed. */
	uint32_t dst = cq->tail;
	for (uint32_t src = cq->tail; src != cq->head;) {
		src--;
		const struct ibv_wc *wc = &cq->ring[src & cq->mask];
		if (wc->qp_num == qpn)
			continue;
		dst--;
		if (dst != src)
			cq->ring[dst & cq->mask] = *wc;
	}
	uint32_t removed = dst - cq->head;
	cq->head = dst;
	return removed;
}
