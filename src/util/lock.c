/* The context lock's slow paths (lock.h). */
#include "util/lock.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

static void futex(atomic_int *addr, int op, int val)
{
	/* EAGAIN (the word changed before we slept) and EINTR: the caller looks again. */
	(void)syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

void sr_lock_wait(struct sr_lock *l)
{
	/* Mark the lock as waited for (2) whenever we take or find it taken: the holder's give
	 * then wakes one of us. Taken with 2 even when nobody else waits: one wake too many, at
	 * most, never one too few. */
	int c = atomic_load_explicit(&l->v, memory_order_relaxed);
	if (c != 2)
		c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	while (c != 0) {
		futex(&l->v, FUTEX_WAIT_PRIVATE, 2);
		c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
	}
}

void sr_lock_wake(struct sr_lock *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
	futex(&l->v, FUTEX_WAKE_PRIVATE, 1);
}
