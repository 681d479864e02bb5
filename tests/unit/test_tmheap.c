/* The timer heap (util/tmheap.h): the earliest key on top after every insert, move (earlier,
 * later, same), removal and pop, in random order against a plain array of keys (the seed is
 * printed); heap order and the nodes' positions checked after each step; room reserved ahead
 * is never exceeded. */
#include "check.h"

#include <stdbool.h>
#include <stdlib.h>

#include "util/tmheap.h"

#define N 300

static uint64_t rng;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Heap order holds and every node in the heap knows where it is. */
static bool valid(const struct tmheap *h)
{
	for (uint32_t i = 1; i <= h->n; i++) {
		if (h->v[i]->pos != i)
			return false;
		if (i > 1 && h->v[i / 2]->key > h->v[i]->key)
			return false;
	}
	return h->n <= h->cap;
}

/* The earliest key of the model (TMHEAP_NEVER: none). */
static uint64_t model_min(const uint64_t *keys)
{
	uint64_t m = TMHEAP_NEVER;
	for (int i = 0; i < N; i++)
		if (keys[i] < m)
			m = keys[i];
	return m;
}

static void basics(void)
{
	struct tmheap h;
	struct tmheap_node a = {0}, b = {0}, c = {0};
	tmheap_init(&h);
	CHECK(tmheap_top(&h) == NULL);
	CHECK_EQ(tmheap_next(&h), TMHEAP_NEVER);
	REQUIRE(tmheap_reserve(&h, 3) == 0);
	tmheap_set(&h, &a, 30);
	tmheap_set(&h, &b, 10);
	tmheap_set(&h, &c, 20);
	CHECK(tmheap_top(&h) == &b);
	tmheap_set(&h, &b, 40); /* later: c comes up */
	CHECK(tmheap_top(&h) == &c);
	tmheap_set(&h, &a, 5); /* earlier */
	CHECK(tmheap_top(&h) == &a);
	tmheap_set(&h, &a, TMHEAP_NEVER); /* out */
	CHECK(!tmheap_has(&a));
	CHECK_EQ(h.n, 2);
	tmheap_remove(&h, &a); /* not in: nothing */
	CHECK_EQ(h.n, 2);
	CHECK(tmheap_top(&h) == &c);
	tmheap_fini(&h);
	CHECK(!tmheap_has(&b) && !tmheap_has(&c));
}

static void random_ops(void)
{
	struct tmheap h;
	static struct tmheap_node nodes[N];
	static uint64_t keys[N];
	tmheap_init(&h);
	REQUIRE(tmheap_reserve(&h, N) == 0);
	uint32_t cap = h.cap;
	for (int i = 0; i < N; i++)
		keys[i] = TMHEAP_NEVER;
	bool ok = true;
	for (int step = 0; step < 200000 && ok; step++) {
		int i = (int)(next_rand() % N);
		uint64_t r = next_rand();
		/* Few distinct keys, so that equal keys are common. */
		uint64_t key = r % 8 == 0 ? TMHEAP_NEVER : (r >> 8) % 1000;
		if (r % 16 == 1) {
			tmheap_remove(&h, &nodes[i]);
			keys[i] = TMHEAP_NEVER;
		} else if (r % 16 == 2 && tmheap_top(&h)) {
			/* Pop the top, as a timer pass does. */
			struct tmheap_node *t = tmheap_top(&h);
			ok &= t->key == model_min(keys);
			tmheap_remove(&h, t);
			keys[t - nodes] = TMHEAP_NEVER;
		} else {
			tmheap_set(&h, &nodes[i], key);
			keys[i] = key;
		}
		ok &= valid(&h);
		ok &= tmheap_next(&h) == model_min(keys);
		ok &= tmheap_has(&nodes[i]) == (keys[i] != TMHEAP_NEVER);
	}
	CHECK(ok);
	CHECK_EQ(h.cap, cap); /* never grew */
	tmheap_fini(&h);
}

int main(void)
{
	rng = check_seed(0x9e3779b97f4a7c15ull) | 1;
	basics();
	random_ops();
	return check_exit();
}
