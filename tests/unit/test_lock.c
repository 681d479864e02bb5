/* The context lock (util/lock.h): take / try / give on one thread; mutual exclusion and no lost
 * update among threads that also sleep while holding it (so that the others wait in the
 * futex); a waiter marks the word (2) and the give wakes it. Waits are bounded: a lost
 * wake-up fails the test instead of hanging it. */
#define _GNU_SOURCE
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "util/lock.h"

#define THREADS 4
#define ROUNDS	100000

static struct sr_lock lk;
static uint64_t counter;      /* only under lk */
static atomic_int inside;     /* threads between take and give: never more than one */
static atomic_int overlapped; /* times a thread found another inside */

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < ROUNDS; i++) {
		sr_lock_take(&lk);
		if (atomic_fetch_add(&inside, 1) != 0)
			atomic_fetch_add(&overlapped, 1);
		counter++;
		seed = seed * 1103515245u + 12345u;
		if ((seed >> 16) % 512 == 0) /* now and then hold it long: the others sleep */
			nanosleep(&(struct timespec){0, 20000}, NULL);
		atomic_fetch_sub(&inside, 1);
		sr_lock_give(&lk);
	}
	return NULL;
}

static void test_single(void)
{
	sr_lock_init(&lk);
	CHECK(sr_lock_try(&lk));
	CHECK_EQ(atomic_load(&lk.v), 1);
	CHECK(!sr_lock_try(&lk));
	sr_lock_give(&lk);
	CHECK_EQ(atomic_load(&lk.v), 0);
	sr_lock_take(&lk);
	CHECK(!sr_lock_try(&lk));
	sr_lock_give(&lk);
	CHECK(sr_lock_try(&lk));
	sr_lock_give(&lk);
}

static bool join_within(pthread_t t, int seconds)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += seconds;
	return pthread_timedjoin_np(t, NULL, &until) == 0;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	sr_lock_init(&lk);
	counter = 0;
	for (int i = 0; i < THREADS; i++)
		REQUIRE(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1)) == 0);
	for (int i = 0; i < THREADS; i++)
		REQUIRE(join_within(t[i], 120));
	CHECK_EQ(counter, (uint64_t)THREADS * ROUNDS);
	CHECK_EQ(atomic_load(&overlapped), 0);
	CHECK_EQ(atomic_load(&lk.v), 0);
}

static atomic_int got;

static void *waiter(void *arg)
{
	(void)arg;
	sr_lock_take(&lk);
	atomic_store(&got, 1);
	sr_lock_give(&lk);
	return NULL;
}

static void test_wake(void)
{
	pthread_t t;
	sr_lock_init(&lk);
	sr_lock_take(&lk);
	REQUIRE(pthread_create(&t, NULL, waiter, NULL) == 0);
	/* The waiter marks the word before it sleeps. */
	for (int i = 0; i < 5000 && atomic_load(&lk.v) != 2; i++)
		usleep(1000);
	CHECK_EQ(atomic_load(&lk.v), 2);
	CHECK_EQ(atomic_load(&got), 0);
	sr_lock_give(&lk);
	REQUIRE(join_within(t, 10));
	CHECK_EQ(atomic_load(&got), 1);
	CHECK_EQ(atomic_load(&lk.v), 0);
}

int main(void)
{
	test_single();
	test_wake();
	test_threads();
	return check_exit();
}
