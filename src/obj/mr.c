/* The key tables (regions and windows share obj_keys) and the memory-region one: O(1) lookup
 * by key, validation of every access (DESIGN.md decision 6: a peer can never make softrdma
 * touch memory outside a registered region). */
#include "obj/obj.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

/* IBV_ACCESS_MW_BIND: windows may be bound to the region (mw.c). */
#define MR_KNOWN_ACCESS                                                                            \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING |             \
	 IBV_ACCESS_OPTIONAL_RANGE)

int obj_keys_init(struct obj_keys *t, uint32_t cap, uint32_t base)
{
	if (cap < 2 || cap > (1u << 24) - base)
		return -EINVAL;
	t->slots = calloc(cap, sizeof(*t->slots));
	t->gen = calloc(cap, 1);
	if (!t->slots || !t->gen) {
		free(t->slots);
		free(t->gen);
		return -ENOMEM;
	}
	t->cap = cap;
	t->used = 0;
	t->base = base;
	t->last = 0;
	return 0;
}

void obj_keys_fini(struct obj_keys *t)
{
	free(t->slots);
	free(t->gen);
	t->slots = NULL;
	t->gen = NULL;
	t->cap = 0;
}

/* A random key byte other than prev. */
static uint8_t key_byte(uint8_t prev)
{
	uint8_t b;
	if (getrandom(&b, 1, GRND_NONBLOCK) != 1)
		b = (uint8_t)(prev * 167u + 89u); /* no entropy yet: at least not prev + 1 */
	return b == prev ? (uint8_t)(b + 1) : b;
}

int obj_keys_add(struct obj_keys *t, void *obj, uint32_t *key)
{
	if (t->used >= t->cap - 1)
		return -ENOMEM;
	uint32_t i = t->last;
	do {
		i = i + 1 < t->cap ? i + 1 : 1;
	} while (t->slots[i]);
	t->last = i;
	t->gen[i] = key_byte(t->gen[i]);
	t->slots[i] = obj;
	*key = (t->base + i) << 8 | t->gen[i];
	t->used++;
	return 0;
}

/* The slot of key, or 0 (never used) for a key outside the table. */
static uint32_t key_slot(const struct obj_keys *t, uint32_t key)
{
	uint32_t i = (key >> 8) - t->base; /* wraps for keys below the base */
	return i < t->cap ? i : 0;
}

void obj_keys_remove(struct obj_keys *t, uint32_t key, const void *obj)
{
	uint32_t i = key_slot(t, key);
	if (i && t->slots[i] == obj) {
		t->slots[i] = NULL;
		t->used--;
	}
}

void *obj_keys_slot(const struct obj_keys *t, uint32_t key)
{
	return t->slots ? t->slots[key_slot(t, key)] : NULL; /* slot 0 is always NULL */
}

int obj_mr_table_init(struct obj_mr_table *t, uint32_t cap)
{
	/* Region keys stay below the windows' (OBJ_MW_INDEX_BASE): a key names one table. */
	if (cap > OBJ_MW_INDEX_BASE)
		return -EINVAL;
	return obj_keys_init(&t->k, cap, 0);
}

void obj_mr_table_fini(struct obj_mr_table *t)
{
	obj_keys_fini(&t->k);
}

int obj_mr_add(struct obj_mr_table *t, struct obj_mr *mr)
{
	return obj_keys_add(&t->k, mr, &mr->key);
}

void obj_mr_remove(struct obj_mr_table *t, struct obj_mr *mr)
{
	obj_keys_remove(&t->k, mr->key, mr);
}

struct obj_mr *obj_mr_lookup(const struct obj_mr_table *t, uint32_t key)
{
	struct obj_mr *mr = obj_keys_slot(&t->k, key);
	return (mr && mr->key == key) ? mr : NULL;
}

void *obj_mr_resolve(const struct obj_mr_table *t, uint32_t pd, uint32_t key, bool remote,
		     uint64_t va, uint64_t len, unsigned access, int *err)
{
	*err = 0;
	if (len == 0)
		return NULL; /* a zero-length access touches nothing and needs no valid key */
	struct obj_mr *mr = obj_mr_lookup(t, key);
	if (!mr || mr->pd != pd) {
		*err = -ENOENT;
		return NULL;
	}
	unsigned need = access;
	if (!remote)
		need &= IBV_ACCESS_LOCAL_WRITE;
	if ((mr->access & need) != need) {
		*err = -EACCES;
		return NULL;
	}
	/* Bounds: va >= iova and va + len <= iova + length, written so nothing overflows. */
	if (va < mr->iova || va - mr->iova > mr->length || len > mr->length - (va - mr->iova)) {
		*err = -ERANGE;
		return NULL;
	}
	return mr->addr + (va - mr->iova);
}

int obj_mr_check_access(unsigned access)
{
	if (access & ~MR_KNOWN_ACCESS)
		return -EINVAL;
	/* Remote write and atomic need local write (ibv_reg_mr(3)). */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	return 0;
}
