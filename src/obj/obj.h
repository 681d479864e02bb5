/* Verbs objects that do not depend on I/O: the memory-region key table and the QP state
 * machine rules. Not thread-safe: callers hold their device context's lock. */
#ifndef SOFTRDMA_OBJ_H
#define SOFTRDMA_OBJ_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- QP state machine ---- */

/* Checks that modifying a QP of `type` from `cur` with attribute `mask` is legal (IBTA 10.3.1:
 * the transition exists, every required attribute is present and no other is). When `mask`
 * lacks IBV_QP_STATE the state stays `cur` and `next` is ignored. Returns 0 or -EINVAL. */
int obj_qp_check_modify(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			int mask);
const char *obj_qp_state_name(enum ibv_qp_state s);

/* ---- memory regions ---- */

/* One registered region. lkey == rkey == key: (table index << 8) | key byte; the key byte
 * changes with every registration in a slot, so a stale key does not reach a new region. */
struct obj_mr {
	uint64_t iova; /* address the peer and the SGEs use for the first byte */
	uint8_t *addr; /* host address of the first byte */
	uint64_t length;
	unsigned access; /* IBV_ACCESS_* */
	uint32_t pd;	 /* protection domain handle */
	uint32_t key;
};

struct obj_mr_table {
	struct obj_mr **slots;
	uint8_t *gen; /* key byte last used per slot */
	uint32_t cap;
	uint32_t used;
};

int obj_mr_table_init(struct obj_mr_table *t, uint32_t cap);
void obj_mr_table_fini(struct obj_mr_table *t);
/* Enters mr (caller-owned, must outlive its entry) and assigns mr->key.
 * Returns 0 or -ENOMEM when the table is full. */
int obj_mr_add(struct obj_mr_table *t, struct obj_mr *mr);
void obj_mr_remove(struct obj_mr_table *t, struct obj_mr *mr);
struct obj_mr *obj_mr_lookup(const struct obj_mr_table *t, uint32_t key);
/* The eng_env.mem_resolve contract (engine/eng.h): validates key, PD, access and bounds
 * (with overflow of va+len) and returns the host address. Local reads need no access bit;
 * local writes need IBV_ACCESS_LOCAL_WRITE; remote operations need their IBV_ACCESS_REMOTE_*
 * bit. */
void *obj_mr_resolve(const struct obj_mr_table *t, uint32_t pd, uint32_t key, bool remote,
		     uint64_t va, uint64_t len, unsigned access, int *err);
/* Checks the access flags of a registration (verbs: remote write or atomic need local
 * write). Returns 0 or -EINVAL. */
int obj_mr_check_access(unsigned access);

#endif
