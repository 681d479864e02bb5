/* softrdma extras: what the verbs API lacks. Everything else is the standard
 * <infiniband/verbs.h> API, which softrdma implements. */
#ifndef SOFTRDMA_H
#define SOFTRDMA_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One counter: every drop, retry and fault softrdma sees is counted by reason. */
struct softrdma_counter {
	char name[64];	/* e.g. "rx_bad_icrc", "udp_rx_misdelivered", "retransmits" */
	uint64_t value; /* events since the context (or QP) was created */
};

/* Copies up to `max` context-wide counters (packets dropped before they reach a QP, the UDP
 * backend's, the fault injector's) into out. Returns how many exist (may exceed max), or -1
 * with errno = EINVAL. Thread-safe. */
int softrdma_query_counters(struct ibv_context *ctx, struct softrdma_counter *out, int max);

/* The same for one QP (the transport engine's counters: retransmits, NAKs, duplicates, ...). */
int softrdma_query_qp_counters(struct ibv_qp *qp, struct softrdma_counter *out, int max);

/* Convenience: the value of the named counter of a context (or QP if qp != NULL), or
 * UINT64_MAX if there is no such counter. */
uint64_t softrdma_counter(struct ibv_context *ctx, struct ibv_qp *qp, const char *name);

#ifdef __cplusplus
}
#endif
#endif
