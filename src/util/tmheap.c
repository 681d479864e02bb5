/* Timer heap (tmheap.h): an array-backed binary min-heap, 1-based (parent of i is i / 2). */
#include "util/tmheap.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

void tmheap_init(struct tmheap *h)
{
	h->v = NULL;
	h->n = 0;
	h->cap = 0;
}

void tmheap_fini(struct tmheap *h)
{
	for (uint32_t i = 1; i <= h->n; i++)
		h->v[i]->pos = 0;
	free(h->v);
	tmheap_init(h);
}

int tmheap_reserve(struct tmheap *h, uint32_t n)
{
	if (n <= h->cap)
		return 0;
	uint32_t cap = h->cap ? h->cap : 16;
	while (cap < n)
		cap = cap > UINT32_MAX / 2 ? n : cap * 2;
	struct tmheap_node **v = realloc(h->v, ((size_t)cap + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	h->v = v;
	h->cap = cap;
	return 0;
}

static void place(struct tmheap *h, uint32_t i, struct tmheap_node *t)
{
	h->v[i] = t;
	t->pos = i;
}

static void sift_up(struct tmheap *h, uint32_t i)
{
	struct tmheap_node *t = h->v[i];
	while (i > 1 && h->v[i / 2]->key > t->key) {
		place(h, i, h->v[i / 2]);
		i /= 2;
	}
	place(h, i, t);
}

static void sift_down(struct tmheap *h, uint32_t i)
{
	struct tmheap_node *t = h->v[i];
	for (;;) {
		uint32_t c = 2 * i;
		if (c > h->n)
			break;
		if (c < h->n && h->v[c + 1]->key < h->v[c]->key)
			c++;
		if (h->v[c]->key >= t->key)
			break;
		place(h, i, h->v[c]);
		i = c;
	}
	place(h, i, t);
}

void tmheap_remove(struct tmheap *h, struct tmheap_node *t)
{
	uint32_t i = t->pos;
	if (!i)
		return;
	t->pos = 0;
	struct tmheap_node *last = h->v[h->n--];
	if (last == t)
		return;
	/* The last node fills the hole and moves whichever way its key says. */
	place(h, i, last);
	if (i > 1 && h->v[i / 2]->key > last->key)
		sift_up(h, i);
	else
		sift_down(h, i);
}

void tmheap_set(struct tmheap *h, struct tmheap_node *t, uint64_t key)
{
	if (key == TMHEAP_NEVER) {
		tmheap_remove(h, t);
		return;
	}
	if (!t->pos) {
		/* Room was reserved: never grows here. */
		assert(h->n < h->cap);
		t->key = key;
		place(h, ++h->n, t);
		sift_up(h, h->n);
		return;
	}
	uint64_t old = t->key;
	t->key = key;
	if (key < old)
		sift_up(h, t->pos);
	else if (key > old)
		sift_down(h, t->pos);
}
