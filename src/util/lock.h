/* The context lock: a mutex that costs one atomic instruction to take and one to give back
 * while nobody waits, and a futex wait / wake when somebody does ("Futexes Are Tricky",
 * U. Drepper, mutex 3). Every verb and every progress pass takes a context's lock, four times
 * per iWARP round trip: glibc's pthread_mutex_lock and unlock took about 55 instructions per
 * pair here (the mutex kind, the owner, the user count, the calls), this about 10.
 *
 * The word is 0 (free), 1 (taken, nobody waits) or 2 (taken, somebody may wait). Not
 * recursive, no owner, no condition variables: the context lock needs none (core/progress.c).
 * Private to the process (a futex of one address space); after fork() it is in whatever state
 * the parent's was, as a pthread mutex would be. */
#ifndef SOFTRDMA_UTIL_LOCK_H
#define SOFTRDMA_UTIL_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>

struct sr_lock {
	atomic_int v;
};

/* The slow paths (lock.c): wait until the lock is ours; let a waiter go. */
void sr_lock_wait(struct sr_lock *l);
void sr_lock_wake(struct sr_lock *l);

static inline void sr_lock_init(struct sr_lock *l)
{
	atomic_init(&l->v, 0);
}

/* Takes the lock if it is free; true if it did. */
static inline bool sr_lock_try(struct sr_lock *l)
{
	int free = 0;
	return atomic_compare_exchange_strong_explicit(&l->v, &free, 1, memory_order_acquire,
						       memory_order_relaxed);
}

static inline void sr_lock_take(struct sr_lock *l)
{
	if (!sr_lock_try(l))
		sr_lock_wait(l);
}

static inline void sr_lock_give(struct sr_lock *l)
{
	if (atomic_fetch_sub_explicit(&l->v, 1, memory_order_release) != 1)
		sr_lock_wake(l); /* it was 2: somebody may wait */
}

#endif
