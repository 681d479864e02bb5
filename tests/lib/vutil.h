/* Verbs plumbing shared by the end-to-end tests: clocks, patterns, bounded waits (completions,
 * rdma_cm events), one-SGE posts. Failures stop the test (REQUIRE): a hang or a refused post is a
 * failure. */
#ifndef SOFTRDMA_TEST_VUTIL_H
#define SOFTRDMA_TEST_VUTIL_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>

uint64_t vt_now_ms(void);
void vt_sleep_ms(int ms);
/* A pseudo-random pattern that depends on seed (the same seed: the same bytes). */
void vt_fill(uint8_t *p, size_t n, uint32_t seed);
/* The device of that name (the test stops if there is none). */
struct ibv_device *vt_find_dev(const char *name);
/* The QP's state as ibv_query_qp reports it. */
enum ibv_qp_state vt_qp_state(struct ibv_qp *qp);
/* One completion from cq within timeout_ms, or the test stops. */
struct ibv_wc vt_wait_wc(struct ibv_cq *cq, int timeout_ms);
/* One receive of [addr, addr+len) under mr (the test stops if it is refused). */
void vt_post_recv(struct ibv_qp *qp, struct ibv_mr *mr, void *addr, uint32_t len, uint64_t id);
/* One signaled send WR with one SGE; raddr / rkey for RDMA and atomic opcodes. Returns what
 * ibv_post_send returns (and checks that *bad is the WR on failure). */
int vt_post_send(struct ibv_qp *qp, struct ibv_mr *mr, enum ibv_wr_opcode op, void *addr,
		 uint32_t len, uint64_t raddr, uint32_t rkey, uint64_t id);
/* The next rdma_cm event of ch within timeout_ms (the caller acks it), or NULL. */
struct rdma_cm_event *vt_cm_event(struct rdma_event_channel *ch, int timeout_ms);

#endif
