/* Verbs objects that do not depend on I/O: the key tables of memory regions and windows and
 * the QP state machine rules. Not thread-safe: callers hold their device context's lock. */
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

/* ---- keys: the slot table under regions' and windows' keys ----
 * key = (base + slot) << 8 | key byte. Slot 0 is never used, so no key below (base + 1) << 8
 * is valid. As rxe: slots are given out cyclically (the one after the last given, not the
 * lowest free) and the key byte is random, never the one the slot had before, so a stale key
 * does not reach the next object in that slot and a key is not guessed from the order of
 * registrations (the first region's key is not 0x101). */
struct obj_keys {
	void **slots;
	uint8_t *gen; /* key byte last given out per slot */
	uint32_t cap; /* slots */
	uint32_t used;
	uint32_t base;
	uint32_t last; /* the slot given out last */
};

/* cap slots (at least 2; (base + cap) << 8 must fit 32 bits). 0, -EINVAL or -ENOMEM. */
int obj_keys_init(struct obj_keys *t, uint32_t cap, uint32_t base);
void obj_keys_fini(struct obj_keys *t);
/* Puts obj (not NULL; the caller's) in a free slot and gives its key. 0, or -ENOMEM (full). */
int obj_keys_add(struct obj_keys *t, void *obj, uint32_t *key);
/* Empties the slot of key if it holds obj. */
void obj_keys_remove(struct obj_keys *t, uint32_t key, const void *obj);
/* What the slot of key holds, whatever its key byte (NULL: none, or not a key of this table):
 * the caller compares the object's own key where the byte matters. */
void *obj_keys_slot(const struct obj_keys *t, uint32_t key);

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
	uint32_t nmw; /* memory windows bound to it: it may not go or change while any is */
};

struct obj_mr_table {
	struct obj_keys k; /* base 0: region keys stay below the windows' */
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

/* ---- memory windows (IBA 10.6.7; behaviour of Linux rxe, rxe_mw.c) ----
 *
 * A window grants remote access to a range of a region, with its own rights and its own
 * R_Key, and is bound and unbound without registering anything. Type 1 windows are bound by
 * ibv_bind_mw and reachable from every QP of their PD; type 2 (2B) windows are bound by a
 * BIND_MW work request, are reachable only through the QP that bound them, and are unbound by
 * LOCAL_INV or a remote SEND with Invalidate. Keys: (OBJ_MW_INDEX_BASE + slot) << 8 | key
 * byte, above every region's, so a key says which table it belongs to (rxe separates MR and
 * MW indices the same way). The key byte is chosen again at every bind: by the binder
 * (ibv_inc_rkey), as verbs has it. */
#define OBJ_MW_INDEX_BASE 0x10000u

struct obj_mw {
	uint32_t key;	   /* current R_Key */
	uint8_t type;	   /* IBV_MW_TYPE_1 or IBV_MW_TYPE_2 */
	uint32_t pd;	   /* protection domain handle */
	struct obj_mr *mr; /* the region it is bound to; NULL: not bound */
	uint64_t addr;	   /* first byte of the window, in the region's iova space */
	uint64_t length;
	unsigned access; /* IBV_ACCESS_REMOTE_* and IBV_ACCESS_ZERO_BASED */
	uint32_t qpn;	 /* type 2: the QP it was bound through (0: that QP is gone) */
};

struct obj_mw_table {
	struct obj_keys k; /* base OBJ_MW_INDEX_BASE */
};

/* What a bind asks (one BIND_MW work request, IBA 10.6.7.2.1). */
struct obj_mw_bind {
	uint32_t mw_rkey;  /* names the window: type 1, its current R_Key; type 2, its index */
	uint32_t new_rkey; /* its low byte becomes the window's key byte */
	uint64_t addr;	   /* window start in the region's iova space */
	uint64_t length;   /* 0: unbind (type 1 only) */
	unsigned access;
};

int obj_mw_table_init(struct obj_mw_table *t, uint32_t cap);
void obj_mw_table_fini(struct obj_mw_table *t);
/* Enters mw (caller-owned, fields type and pd set; must outlive its entry), unbound, and
 * assigns mw->key. Returns 0, -EINVAL (type neither 1 nor 2) or -ENOMEM (table full). */
int obj_mw_add(struct obj_mw_table *t, struct obj_mw *mw);
/* Takes mw out of the table, unbound (its key stops working at once). */
void obj_mw_remove(struct obj_mw_table *t, struct obj_mw *mw);
/* The window whose current key is `key`, or NULL. */
struct obj_mw *obj_mw_lookup(const struct obj_mw_table *t, uint32_t key);
/* True if `key` is in the windows' key space (whether or not such a window exists). */
bool obj_key_is_mw(uint32_t key);
/* Binds (or, type 1 with length 0, unbinds) the window named by b->mw_rkey to `mr` (the
 * region of the work request's L_Key, NULL if there is none), for a request posted on QP
 * `qpn` of PD `qp_pd`. Every check comes first, nothing changes on failure: the window
 * exists (type 1: with that key, so a stale ibv_bind_mw is refused; type 2: with that index,
 * because no type 2 bind updates ibv_mw.rkey, the key a BIND_MW names the window by: rxe
 * compares the whole key there too, and so refuses a type 2 window's second bind unless the
 * consumer rewrote ibv_mw.rkey); type 1: not zero-based; type 2: not bound already
 * (o10-37.2.30), of the QP's PD (C10-72), a region and a length (o10-37.2.40); the region of
 * the window's PD, with IBV_ACCESS_MW_BIND (C10-73), with local write if the window grants
 * remote write or atomics (C10-74), the range inside it (C10-75); known access bits.
 * Returns 0 or -EINVAL. */
int obj_mw_bind(struct obj_mw_table *t, struct obj_mr *mr, uint32_t qp_pd, uint32_t qpn,
		const struct obj_mw_bind *b);
/* Invalidates (unbinds) the type 2 window of key `rkey`: locally (LOCAL_INV, qpn 0: any QP
 * of the window's PD) or remotely (SEND with Invalidate arriving at QP `qpn`, which must be
 * the window's). Returns 0, or -EINVAL: no such window, type 1 (o10-37.2.26), not bound, or
 * another PD or QP. */
int obj_mw_invalidate(struct obj_mw_table *t, uint32_t pd, uint32_t qpn, uint32_t rkey);
/* The eng_env.mem_resolve contract for a remote access through a window by QP `qpn` of PD
 * `pd`: the key is a bound window's, of that PD, type 2: bound through that QP; the window
 * grants `access`; [va, va + len) lies inside the window (zero-based: va counts from the
 * window's start) and its region. Returns the host address, or NULL with *err -ENOENT,
 * -EACCES or -ERANGE. len 0: NULL, *err 0. */
void *obj_mw_resolve(const struct obj_mw_table *t, uint32_t pd, uint32_t qpn, uint32_t key,
		     uint64_t va, uint64_t len, unsigned access, int *err);
/* QP `qpn` is gone: the type 2 windows bound through it stay bound (they still hold their
 * region, until invalidated or freed) but no QP reaches them any more (a new QP may get the
 * same number). */
void obj_mw_qp_gone(struct obj_mw_table *t, uint32_t qpn);

#endif
