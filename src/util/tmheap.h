/* A timer heap: the earliest of many deadlines in O(1), a deadline set or moved in O(log n).
 *
 * The core keeps one entry per QP whose engine has a deadline (eng_qp_deadline), so that a
 * progress pass looks at the earliest one only, instead of asking every QP (1,000 idle QPs must
 * not slow down the one that works: issue 11). A binary min-heap of pointers to nodes the caller
 * embeds in its own objects; each node knows its position, so that moving or removing it needs
 * no search. Room is reserved ahead (tmheap_reserve, at QP creation): setting a deadline never
 * allocates (DESIGN.md decision 7).
 *
 * Ownership: the heap holds pointers to the caller's nodes and never frees them; a node must be
 * removed (tmheap_set to TMHEAP_NEVER, or tmheap_remove) before its memory goes. Not
 * thread-safe: the caller serialises (the core's lock). */
#ifndef SOFTRDMA_UTIL_TMHEAP_H
#define SOFTRDMA_UTIL_TMHEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TMHEAP_NEVER UINT64_MAX

/* Embedded in the caller's object; zero-initialised means "not in the heap". */
struct tmheap_node {
	uint64_t key; /* the deadline while in the heap */
	uint32_t pos; /* 1-based position in the heap, 0: not in it */
};

struct tmheap {
	struct tmheap_node **v; /* v[1..n]; v[0] unused */
	uint32_t n;		/* nodes in the heap */
	uint32_t cap;		/* nodes it has room for without allocating */
};

/* Empty heap, no memory yet. */
void tmheap_init(struct tmheap *h);
void tmheap_fini(struct tmheap *h);
/* Makes room for `n` nodes in all. Returns 0 or -ENOMEM (the heap is unchanged). */
int tmheap_reserve(struct tmheap *h, uint32_t n);
/* Puts `t` in the heap at `key`, moves it there if it is in already, or takes it out for
 * TMHEAP_NEVER. Needs room (tmheap_reserve) for a node not yet in. */
void tmheap_set(struct tmheap *h, struct tmheap_node *t, uint64_t key);
void tmheap_remove(struct tmheap *h, struct tmheap_node *t);
/* The node with the earliest key, or NULL if the heap is empty. */
static inline struct tmheap_node *tmheap_top(const struct tmheap *h)
{
	return h->n ? h->v[1] : NULL;
}
/* Its key, TMHEAP_NEVER if the heap is empty. */
static inline uint64_t tmheap_next(const struct tmheap *h)
{
	return h->n ? h->v[1]->key : TMHEAP_NEVER;
}
static inline bool tmheap_has(const struct tmheap_node *t)
{
	return t->pos != 0;
}

#endif
