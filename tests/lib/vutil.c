/* Verbs plumbing shared by the end-to-end tests (vutil.h). */
#define _GNU_SOURCE
#include "vutil.h"

#include <poll.h>
#include <string.h>
#include <time.h>

#include "check.h"

uint64_t vt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void vt_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

void vt_fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

struct ibv_device *vt_find_dev(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	REQUIRE(l);
	struct ibv_device *d = NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			d = l[i];
	/* softrdma's devices outlive the list. */
	ibv_free_device_list(l);
	REQUIRE(d);
	return d;
}

enum ibv_qp_state vt_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	REQUIRE(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0);
	return a.qp_state;
}

struct ibv_wc vt_wait_wc(struct ibv_cq *cq, int timeout_ms)
{
	struct ibv_wc wc;
	uint64_t stop = vt_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		REQUIRE(n >= 0);
		if (n == 1)
			return wc;
		REQUIRE(vt_now_ms() < stop);
	}
}

void vt_post_recv(struct ibv_qp *qp, struct ibv_mr *mr, void *addr, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
	REQUIRE(ibv_post_recv(qp, &wr, &bad) == 0);
}

int vt_post_send(struct ibv_qp *qp, struct ibv_mr *mr, enum ibv_wr_opcode op, void *addr,
		 uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad = NULL;
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	int r = ibv_post_send(qp, &wr, &bad);
	if (r)
		CHECK(bad == &wr);
	return r;
}

struct rdma_cm_event *vt_cm_event(struct rdma_event_channel *ch, int timeout_ms)
{
	struct pollfd p = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, timeout_ms) != 1 || rdma_get_cm_event(ch, &ev) != 0)
		return NULL;
	return ev;
}
