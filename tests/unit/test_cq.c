/* The completion ring (src/engine/cq.c): capacity, order, overflow, arming, and
 * eng_cq_clean (a QP moved to RESET takes back its unpolled completions, the others keep
 * their order) and eng_cq_resize, also across the wrap of the free-running indices. */
#include "check.h"

#include <errno.h>

#include "engine/eng.h"

static int notified;

static void on_notify(struct eng_cq *cq)
{
	(void)cq;
	notified++;
}

static void push(struct eng_cq *cq, uint32_t qpn, uint64_t wr_id)
{
	struct ibv_wc wc = {.wr_id = wr_id, .qp_num = qpn};
	CHECK_EQ(eng_cq_push(cq, &wc, false), 0);
}

int main(void)
{
	struct eng_cq cq;
	struct ibv_wc wc[16];

	CHECK_EQ(eng_cq_init(&cq, 0), -EINVAL);
	CHECK_EQ(eng_cq_init(&cq, 5), 0); /* ring of 8 */
	cq.notify = on_notify;

	/* Order and overflow: 8 fit, the 9th is refused and marks the CQ. */
	for (uint64_t i = 0; i < 8; i++)
		push(&cq, 1, i);
	struct ibv_wc extra = {.wr_id = 99};
	CHECK_EQ(eng_cq_push(&cq, &extra, false), -ENOSPC);
	CHECK(cq.overflow);
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 8);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(wc[i].wr_id, i);
	cq.overflow = false;

	/* Arming: one notification per arm; solicited-only fires for errors too. */
	cq.armed = 1;
	push(&cq, 1, 0);
	push(&cq, 1, 0);
	CHECK_EQ(notified, 1);
	cq.armed = 2;
	push(&cq, 1, 0);
	CHECK_EQ(notified, 1);
	struct ibv_wc bad = {.status = IBV_WC_WR_FLUSH_ERR, .qp_num = 1};
	CHECK_EQ(eng_cq_push(&cq, &bad, false), 0);
	CHECK_EQ(notified, 2);
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 4);

	/* Cleaning: the indices are now 12 (ring position 4); the next 6 wrap around the ring.
	 * QPs 7 and 9 interleave; cleaning 7 leaves 9's in order. */
	static const uint32_t qpns[] = {7, 9, 7, 7, 9, 9};
	for (int i = 0; i < 6; i++)
		push(&cq, qpns[i], 100 + (uint64_t)i);
	CHECK_EQ(eng_cq_clean(&cq, 7), 3);
	CHECK_EQ(eng_cq_clean(&cq, 7), 0);
	CHECK_EQ(eng_cq_clean(NULL, 7), 0);
	/* The freed room is usable: 3 more fit before the ring is full again. */
	for (int i = 0; i < 5; i++)
		push(&cq, 9, 200 + (uint64_t)i);
	CHECK_EQ(eng_cq_push(&cq, &extra, false), -ENOSPC);
	cq.overflow = false;
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 8);
	static const uint64_t want[] = {101, 104, 105, 200, 201, 202, 203, 204};
	for (int i = 0; i < 8; i++) {
		CHECK_EQ(wc[i].wr_id, want[i]);
		CHECK_EQ(wc[i].qp_num, 9);
	}
	/* Resizing keeps the waiting completions in order, across the wrap; never below them. */
	for (int i = 0; i < 6; i++)
		push(&cq, 5, 300 + (uint64_t)i);
	CHECK_EQ(eng_cq_resize(&cq, 5), -EINVAL);
	CHECK_EQ(eng_cq_resize(&cq, 0), -EINVAL);
	CHECK_EQ(eng_cq_resize(&cq, 20), 0); /* ring of 32 */
	CHECK_EQ(cq.cqe, 20);
	for (int i = 6; i < 32; i++)
		push(&cq, 5, 300 + (uint64_t)i);
	CHECK_EQ(eng_cq_push(&cq, &extra, false), -ENOSPC);
	cq.overflow = false;
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 16);
	CHECK_EQ(eng_cq_resize(&cq, 16), 0);
	CHECK_EQ(eng_cq_poll(&cq, 16, wc + 0), 16);
	CHECK_EQ(wc[15].wr_id, 331);
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 0);
	CHECK_EQ(eng_cq_resize(&cq, 1), 0); /* empty: any size */
	push(&cq, 5, 1);
	CHECK_EQ(eng_cq_push(&cq, &extra, false), -ENOSPC);
	cq.overflow = false;
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 1);
	CHECK_EQ(eng_cq_resize(&cq, 8), 0);
	/* Cleaning everything, and an empty ring. */
	push(&cq, 3, 1);
	push(&cq, 3, 2);
	CHECK_EQ(eng_cq_clean(&cq, 3), 2);
	CHECK_EQ(eng_cq_poll(&cq, 16, wc), 0);
	CHECK_EQ(eng_cq_clean(&cq, 3), 0);
	eng_cq_fini(&cq);
	return check_exit();
}
