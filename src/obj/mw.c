/* Memory windows (obj.h): the window table, bind and invalidate rules, and the checks of a
 * remote access through a window (DESIGN.md decision 6: every check before a byte moves).
 * The rules are IBA 10.6.7's as Linux rxe applies them (rxe_mw.c), plus the window's own
 * bounds, which an access must also respect (IBA 10.6.7.1: a window grants access to its
 * range only; rxe 6.1 checks the region's bounds alone). */
#include "obj/obj.h"

#include <errno.h>
#include <stdlib.h>

/* Access a window may grant. Local write is accepted and means nothing (no L_Key). */
#define MW_KNOWN_ACCESS                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED)

int obj_mw_table_init(struct obj_mw_table *t, uint32_t cap)
{
	return obj_keys_init(&t->k, cap, OBJ_MW_INDEX_BASE);
}

void obj_mw_table_fini(struct obj_mw_table *t)
{
	obj_keys_fini(&t->k);
}

bool obj_key_is_mw(uint32_t key)
{
	return (key >> 8) >= OBJ_MW_INDEX_BASE;
}

static void unbind(struct obj_mw *mw)
{
	if (mw->mr)
		mw->mr->nmw--;
	mw->mr = NULL;
	mw->addr = 0;
	mw->length = 0;
	mw->access = 0;
	mw->qpn = 0;
}

int obj_mw_add(struct obj_mw_table *t, struct obj_mw *mw)
{
	if (mw->type != IBV_MW_TYPE_1 && mw->type != IBV_MW_TYPE_2)
		return -EINVAL;
	int r = obj_keys_add(&t->k, mw, &mw->key);
	if (r == 0) {
		mw->mr = NULL;
		unbind(mw);
	}
	return r;
}

void obj_mw_remove(struct obj_mw_table *t, struct obj_mw *mw)
{
	unbind(mw);
	obj_keys_remove(&t->k, mw->key, mw);
}

struct obj_mw *obj_mw_lookup(const struct obj_mw_table *t, uint32_t key)
{
	struct obj_mw *mw = obj_keys_slot(&t->k, key);
	return (mw && mw->key == key) ? mw : NULL;
}

/* [addr, addr + len) inside [base, base + size), written so nothing overflows. */
static bool inside(uint64_t addr, uint64_t len, uint64_t base, uint64_t size)
{
	return addr >= base && addr - base <= size && len <= size - (addr - base);
}

int obj_mw_bind(struct obj_mw_table *t, struct obj_mr *mr, uint32_t qp_pd, uint32_t qpn,
		const struct obj_mw_bind *b)
{
	struct obj_mw *mw = obj_keys_slot(&t->k, b->mw_rkey);

	/* -- validate (rxe_check_bind_mw) -- */
	if (!mw || (mw->type == IBV_MW_TYPE_1 && mw->key != b->mw_rkey) ||
	    (b->access & ~MW_KNOWN_ACCESS))
		return -EINVAL;
	if (b->length == 0)
		mr = NULL; /* an unbind names no region (rxe ignores the L_Key then) */
	if (mw->type == IBV_MW_TYPE_1) {
		if (b->access & IBV_ACCESS_ZERO_BASED) /* o10-36.2.2 */
			return -EINVAL;
	} else {
		if (mw->mr || mw->pd != qp_pd || !mr) /* o10-37.2.30, C10-72, o10-37.2.40 */
			return -EINVAL;
	}
	if (mr) {
		if (mr->pd != mw->pd || !(mr->access & IBV_ACCESS_MW_BIND)) /* C10-73 */
			return -EINVAL;
		if ((b->access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
		    !(mr->access & IBV_ACCESS_LOCAL_WRITE)) /* C10-74 */
			return -EINVAL;
		if (!inside(b->addr, b->length, mr->iova, mr->length)) /* C10-75 */
			return -EINVAL;
	}

	/* -- apply (rxe_do_bind_mw): the new key byte, then the binding -- */
	unbind(mw);
	mw->key = (mw->key & ~0xFFu) | (b->new_rkey & 0xFFu);
	if (!mr)
		return 0; /* type 1 unbound: the key exists and reaches nothing */
	mw->mr = mr;
	mr->nmw++;
	mw->addr = b->addr;
	mw->length = b->length;
	mw->access = b->access;
	mw->qpn = mw->type == IBV_MW_TYPE_2 ? qpn : 0;
	return 0;
}

int obj_mw_invalidate(struct obj_mw_table *t, uint32_t pd, uint32_t qpn, uint32_t rkey)
{
	struct obj_mw *mw = obj_mw_lookup(t, rkey);

	/* o10-37.2.26: only type 2 windows are invalidated; a remote invalidate comes through
	 * the window's own QP, as every remote access to it. */
	if (!mw || mw->type != IBV_MW_TYPE_2 || !mw->mr || mw->pd != pd || (qpn && mw->qpn != qpn))
		return -EINVAL;
	unbind(mw);
	return 0;
}

void *obj_mw_resolve(const struct obj_mw_table *t, uint32_t pd, uint32_t qpn, uint32_t key,
		     uint64_t va, uint64_t len, unsigned access, int *err)
{
	const struct obj_mw *mw;
	const struct obj_mr *mr;
	uint64_t at; /* va in the region's iova space */

	*err = 0;
	if (len == 0)
		return NULL;
	mw = obj_mw_lookup(t, key);
	/* rxe_lookup_mw: the key, a binding, the PD, and a type 2 window's QP. */
	if (!mw || !mw->mr || mw->pd != pd || (mw->type == IBV_MW_TYPE_2 && mw->qpn != qpn)) {
		*err = -ENOENT;
		return NULL;
	}
	if ((mw->access & access) != access) {
		*err = -EACCES;
		return NULL;
	}
	/* Zero-based: the window's first byte is va 0 (IBA 10.6.3.4). */
	at = va;
	if (mw->access & IBV_ACCESS_ZERO_BASED) {
		if (va > mw->length) {
			*err = -ERANGE;
			return NULL;
		}
		at = mw->addr + va;
	}
	mr = mw->mr;
	/* The window's range, then the region's (it was inside at bind time; a reregistered
	 * region is checked again rather than trusted). */
	if (!inside(at, len, mw->addr, mw->length) || !inside(at, len, mr->iova, mr->length)) {
		*err = -ERANGE;
		return NULL;
	}
	return mr->addr + (at - mr->iova);
}

void obj_mw_qp_gone(struct obj_mw_table *t, uint32_t qpn)
{
	/* Up to the last window there is (slots are taken first fit, so they are low): every
	 * QP destroy comes here, and a context without windows must not pay for the table's
	 * 4,096 slots each time (issue 11: 10,000 QPs). */
	uint32_t seen = 0;

	for (uint32_t i = 1; i < t->k.cap && seen < t->k.used && qpn; i++) {
		struct obj_mw *mw = t->k.slots[i];

		if (!mw)
			continue;
		seen++;
		if (mw->type == IBV_MW_TYPE_2 && mw->qpn == qpn)
			mw->qpn = 0;
	}
}
