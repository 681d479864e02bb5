/* Who moves the packets (core/mover.h), on a virtual clock: the thread starts in charge; an
 * application that polls for its packets gets them back after MOVER_IDLE_MAX wake-ups and the
 * thread leaves the sockets; one that stops polling (computes, spins on memory) is taken over
 * at the thread's next look, within a nap; packets that come while the application polls for
 * something else (ib_write_lat's target) keep the thread in charge; an application about to
 * block asks for a kick only while it moves the packets itself; a lock held by the application
 * is waited for in THREAD and skipped in a look; while the application polls, timeouts with
 * nothing for the thread count as its doing; a timer the polling application leaves
 * overdue is run by a look; the nap doubles up to MOVER_NAP_MAX_NS. With a deadman timer the
 * looks are the timer's: the application's calls push it back (one re-arm per MOVER_REARM_NS)
 * and the thread's waits cover only timers. */
#include "check.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "core/mover.h"

#define US 1000ull

/* One wake-up of a thread in THREAD for packets that came at t, the application having last
 * polled at app (0: never). */
static void io_wake(struct mover *m, uint64_t t, uint64_t app)
{
	if (app)
		mover_note_app(m, app);
	struct mover_wait w = mover_plan(m, t, UINT64_MAX, 20000 * US);
	CHECK(w.on_io);
	CHECK(mover_woke(m, t, true, UINT64_MAX));
	mover_passed(m, true, false, true);
}

/* The wake-ups a hand-back needs now (MOVER_IDLE_MAX at first), 10 us apart, from t on, each
 * for packets the application (which polled 1 us before) was polling for: the application has
 * the packets back. Returns the time after the last. */
static uint64_t served_until_app(struct mover *m, uint64_t t)
{
	for (unsigned i = 0, n = m->idle_max; i < n; i++, t += 10 * US)
		io_wake(m, t, t - 1 * US);
	CHECK_EQ(mover_who(m), MOVER_APP);
	return t;
}

static void starts_with_thread(void)
{
	struct mover m;
	mover_init(&m);
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	struct mover_wait w = mover_plan(&m, 1000 * US, 1500 * US, 20000 * US);
	CHECK(w.on_io);
	CHECK_EQ(w.until, 1500 * US); /* the timer first */
	w = mover_plan(&m, 1000 * US, UINT64_MAX, 20000 * US);
	CHECK_EQ(w.until, 21000 * US);
}

static void polling_app_takes_back(void)
{
	struct mover m;
	mover_init(&m);
	uint64_t t = 1000 * US;
	for (unsigned i = 0; i + 1 < MOVER_IDLE_MAX; i++, t += 10 * US)
		io_wake(&m, t, t - 1 * US);
	CHECK_EQ(mover_who(&m), MOVER_THREAD); /* not yet */
	io_wake(&m, t, t - 1 * US);
	CHECK_EQ(mover_who(&m), MOVER_APP);
	CHECK_EQ(m.n[MOVER_CNT_to_app], 1);
	/* APP: off the sockets, looks after a nap that doubles while the application polls. */
	uint64_t nap = MOVER_GRACE_NS;
	for (int i = 0; i < 12; i++) {
		mover_note_app(&m, t);
		struct mover_wait w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
		CHECK(!w.on_io);
		CHECK_EQ(w.until - t, nap);
		t = w.until;
		mover_note_app(&m, t - 1 * US);
		CHECK(!mover_woke(&m, t, false, UINT64_MAX));
		nap = nap * 2 > MOVER_NAP_MAX_NS ? MOVER_NAP_MAX_NS : nap * 2;
	}
	CHECK_EQ(nap, MOVER_NAP_MAX_NS);
	CHECK_EQ(mover_who(&m), MOVER_APP);
}

static void app_going_away_is_taken_over(void)
{
	struct mover m;
	mover_init(&m);
	uint64_t t = 1000 * US;
	t = served_until_app(&m, t);
	/* The application's last poll was at t; it computes from then on. */
	mover_note_app(&m, t);
	struct mover_wait w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
	CHECK(!w.on_io);
	CHECK(mover_woke(&m, w.until + MOVER_GRACE_NS, false, UINT64_MAX)); /* a look: gone */
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	CHECK_EQ(m.n[MOVER_CNT_to_thread], 1);
	/* And the plan itself notices, if the thread was woken for something else. */
	mover_init(&m);
	t = served_until_app(&m, t);
	w = mover_plan(&m, t + MOVER_GRACE_NS, UINT64_MAX, 20000 * US);
	CHECK(w.on_io);
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
}

/* ib_write_lat's target: it polls for its send completion (the ACK comes while it polls) and
 * then spins on memory for the peer's WRITE (which comes while it does not). */
static void write_target_keeps_thread(void)
{
	struct mover m;
	mover_init(&m);
	uint64_t t = 1000 * US;
	for (int rt = 0; rt < 10 * (int)MOVER_IDLE_MAX; rt++) {
		io_wake(&m, t, t - 1 * US); /* the ACK, polled for */
		t += 12 * US;
		io_wake(&m, t, 0); /* the WRITE: last poll 12 us ago */
		t += 12 * US;
	}
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	CHECK_EQ(m.n[MOVER_CNT_to_app], 0);
}

/* A wake-up for a packet the application read first never reaches the thread: while the
 * application polls, the thread checks back every MOVER_GRACE_NS and finding it polling, with
 * nothing for the thread, counts as the application's doing. */
/* Handing the packets back and then finding them left waiting at the next take-over (an RDMA
 * WRITE target that polls for its completion and then spins on memory: each such round trip
 * waits for a look) doubles the wake-ups the next hand-back needs, up to MOVER_IDLE_MAX_MAX;
 * a take-over that finds nothing waiting (the application computes) halves them again. */
static void hand_back_needs_more_after_waiting(void)
{
	struct mover m;
	mover_init(&m);
	uint64_t t = 1000 * US;
	unsigned need = MOVER_IDLE_MAX;
	for (int round = 0; round < 16; round++) {
		bool waiting = round < 8;
		for (unsigned i = 0; i + 1 < need; i++, t += 10 * US)
			io_wake(&m, t, t - 1 * US);
		CHECK_EQ(mover_who(&m), MOVER_THREAD); /* one short */
		io_wake(&m, t, t - 1 * US);
		CHECK_EQ(mover_who(&m), MOVER_APP);
		/* It stops calling; the look takes over. */
		mover_note_app(&m, t);
		t += MOVER_GRACE_NS + 1;
		CHECK(mover_woke(&m, t, false, UINT64_MAX));
		CHECK_EQ(mover_who(&m), MOVER_THREAD);
		mover_passed(&m, false, false, waiting);
		if (waiting)
			need = need * 2 > MOVER_IDLE_MAX_MAX ? MOVER_IDLE_MAX_MAX : need * 2;
		else if (need / 2 >= MOVER_IDLE_MAX)
			need /= 2;
		CHECK_EQ(m.idle_max, need);
		if (round == 7)
			CHECK_EQ(need, MOVER_IDLE_MAX_MAX);
		t += 1000 * US;
	}
	CHECK_EQ(need, MOVER_IDLE_MAX);
	CHECK_EQ(m.n[MOVER_CNT_to_app], 16);
}

static void timeouts_while_app_polls(void)
{
	struct mover m;
	mover_init(&m);
	uint64_t t = 1000 * US;
	for (unsigned i = 0; i < MOVER_IDLE_MAX; i++) {
		mover_note_app(&m, t);
		struct mover_wait w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
		CHECK(w.on_io);
		CHECK_EQ(w.until - t, MOVER_GRACE_NS);
		t = w.until;
		mover_note_app(&m, t - 1 * US);
		CHECK(!mover_woke(&m, t, false, UINT64_MAX));
	}
	CHECK_EQ(mover_who(&m), MOVER_APP);
	/* An application that is not polling: the thread sleeps on, and times out say
	 * nothing. */
	mover_init(&m);
	struct mover_wait w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
	CHECK_EQ(w.until - t, 20000 * US);
	for (int i = 0; i < 40; i++)
		CHECK(!mover_woke(&m, t + (uint64_t)i * 20000 * US, false, UINT64_MAX));
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
}

static void blocking_app_kicks_only_in_app(void)
{
	struct mover m;
	mover_init(&m);
	CHECK(!mover_app_blocks(&m)); /* THREAD: the thread is on the sockets already */
	uint64_t t = 1000 * US;
	t = served_until_app(&m, t);
	mover_note_app(&m, t);
	CHECK(mover_app_blocks(&m)); /* kick */
	/* Woken by the kick right away: the application counts as gone at once. */
	struct mover_wait w = mover_plan(&m, t + 1 * US, UINT64_MAX, 20000 * US);
	CHECK(w.on_io);
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
}

static void lock_and_timers(void)
{
	struct mover m;
	mover_init(&m);
	CHECK(mover_lock_busy(&m)); /* THREAD waits for the lock */
	uint64_t t = 1000 * US;
	t = served_until_app(&m, t);
	CHECK(!mover_lock_busy(&m)); /* a look skips */
	CHECK_EQ(m.n[MOVER_CNT_busy], 2);
	/* A look while the application polls: nothing to do, unless a timer is overdue by
	 * more than a nap (the application only posts, say). */
	mover_note_app(&m, t);
	CHECK(!mover_woke(&m, t + 1 * US, false, t + 100 * US));
	mover_note_app(&m, t + 200 * US);
	CHECK(mover_woke(&m, t + 201 * US, false, t));
	mover_passed(&m, false, false, true);
	CHECK_EQ(mover_who(&m), MOVER_APP);
	/* Passes for a due timer in THREAD say nothing about who reads: the count stays. */
	mover_init(&m);
	for (unsigned i = 0; i + 1 < MOVER_IDLE_MAX; i++, t += 10 * US)
		io_wake(&m, t, t - 1 * US);
	for (int i = 0; i < 5; i++) {
		mover_note_app(&m, t);
		CHECK(mover_woke(&m, t, false, t));
		mover_passed(&m, false, false, true);
	}
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	io_wake(&m, t, t - 1 * US);
	CHECK_EQ(mover_who(&m), MOVER_APP);
	/* Waiting for the lock the polling application held counts as its doing. */
	mover_init(&m);
	for (unsigned i = 0; i < MOVER_IDLE_MAX; i++, t += 10 * US) {
		mover_note_app(&m, t - 1 * US);
		CHECK(mover_woke(&m, t, true, UINT64_MAX));
		mover_passed(&m, false, true, false);
	}
	CHECK_EQ(mover_who(&m), MOVER_APP);
}

/* An application preempted inside a poll (on a core it shares with the thread it may wait
 * for the CPU or the lock far longer than MOVER_GRACE_NS) is still polling: the thread does
 * not take over, and a wake-up then counts as one it did not need. */
static void inside_a_poll_counts_as_polling(void)
{
	struct mover m;
	mover_init(&m);
	uint64_t t = 1000 * US;
	t = served_until_app(&m, t);
	mover_enter(&m, MOVER_IN_POLL);
	struct mover_wait w = mover_plan(&m, t + 500 * US, UINT64_MAX, 20000 * US);
	CHECK(!w.on_io);
	CHECK_EQ(mover_who(&m), MOVER_APP);
	CHECK(!mover_woke(&m, t + 600 * US, false, UINT64_MAX));
	CHECK_EQ(mover_who(&m), MOVER_APP);
	/* It leaves the poll: seen then, gone a grace period later. */
	mover_leave(&m, MOVER_IN_POLL, t + 700 * US);
	w = mover_plan(&m, t + 710 * US, UINT64_MAX, 20000 * US);
	CHECK_EQ(mover_who(&m), MOVER_APP);
	w = mover_plan(&m, t + 700 * US + MOVER_GRACE_NS + 1, UINT64_MAX, 20000 * US);
	CHECK(w.on_io);
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	/* THREAD: a wake-up while it is inside a poll (whose start is long past) was not
	 * needed; MOVER_IDLE_MAX of them and it has the packets back. */
	mover_enter(&m, MOVER_IN_POLL);
	mover_enter(&m, MOVER_IN_POST); /* another of its threads posts meanwhile */
	t += 10000 * US;
	for (unsigned i = 0; i < MOVER_IDLE_MAX; i++, t += 10 * US) {
		CHECK_EQ(mover_who(&m), MOVER_THREAD);
		CHECK(mover_woke(&m, t, true, UINT64_MAX));
		mover_passed(&m, true, false, true);
	}
	CHECK_EQ(mover_who(&m), MOVER_APP);
	mover_leave(&m, MOVER_IN_POLL, t);
	/* Inside a post only: active (no take-over), but a wake-up then was needed (a post
	 * reads nothing). */
	w = mover_plan(&m, t + 1000 * US, UINT64_MAX, 20000 * US);
	CHECK(!w.on_io);
	CHECK_EQ(mover_who(&m), MOVER_APP);
	mover_leave(&m, MOVER_IN_POST, t + 1001 * US);
	w = mover_plan(&m, t + 2000 * US, UINT64_MAX, 20000 * US);
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	mover_enter(&m, MOVER_IN_POST);
	CHECK(mover_woke(&m, t + 3000 * US, true, UINT64_MAX));
	mover_passed(&m, true, false, true);
	CHECK_EQ(m.idle, 0u);
	mover_leave(&m, MOVER_IN_POST, t + 3001 * US);
	/* A sender inside its long posts, no packet for the thread: its check-backs time out
	 * and count as served (the thread would otherwise wake every MOVER_GRACE_NS on the
	 * sender's core for nothing). */
	t += 10000 * US;
	mover_enter(&m, MOVER_IN_POST);
	for (unsigned i = 0; i < MOVER_IDLE_MAX; i++) {
		CHECK_EQ(mover_who(&m), MOVER_THREAD);
		w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
		CHECK(w.on_io);
		CHECK_EQ(w.until, t + MOVER_GRACE_NS);
		t = w.until;
		CHECK(!mover_woke(&m, t, false, UINT64_MAX));
	}
	CHECK_EQ(mover_who(&m), MOVER_APP);
	mover_leave(&m, MOVER_IN_POST, t);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* When the deadman fires (absolute, CLOCK_MONOTONIC), 0 when disarmed. */
static uint64_t armed_at(const struct mover *m)
{
	struct itimerspec its;
	REQUIRE(timerfd_gettime(m->deadman_fd, &its) == 0);
	uint64_t left =
	    (uint64_t)its.it_value.tv_sec * 1000000000ull + (uint64_t)its.it_value.tv_nsec;
	return left ? mono_ns() + left : 0;
}

/* a and b within 1 ms (the test's own time between reading the clock and the timer). */
static bool near(uint64_t a, uint64_t b)
{
	return (a > b ? a - b : b - a) < 1000 * US;
}

/* The deadman: in APP the thread arms the next look on the timer and sleeps past it; the
 * application's calls push it back, at most once per MOVER_REARM_NS; a look after it fired
 * finds the application gone; THREAD disarms it. The virtual clock runs 10 s ahead of the real
 * one so that the timer's absolute times are in the future. */
static void deadman(void)
{
	struct mover m;
	mover_init(&m);
	mover_deadman_open(&m);
	REQUIRE(m.deadman_fd >= 0);
	uint64_t t = mono_ns() + 10000000000ull;
	t = served_until_app(&m, t);
	mover_note_app(&m, t);
	struct mover_wait w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
	CHECK(!w.on_io);
	CHECK_EQ(w.until, t + 20000 * US); /* the look is the timer's, not the wait's */
	uint64_t look = atomic_load(&m.look_at);
	CHECK_EQ(look, t + MOVER_GRACE_NS);
	uint64_t at = armed_at(&m);
	CHECK(near(at, look));
	/* The application leaves a poll: the look goes to a whole MOVER_DEADMAN_NS ahead ... */
	mover_enter(&m, MOVER_IN_POLL);
	mover_leave(&m, MOVER_IN_POLL, t + 10 * US);
	CHECK_EQ(atomic_load(&m.look_at), t + 10 * US + MOVER_DEADMAN_NS);
	at = armed_at(&m);
	CHECK(near(at, t + 10 * US + MOVER_DEADMAN_NS));
	/* ... and stays while it is more than MOVER_DEADMAN_NS - MOVER_REARM_NS ahead. */
	mover_enter(&m, MOVER_IN_POLL);
	mover_leave(&m, MOVER_IN_POLL, t + 10 * US + MOVER_REARM_NS - 1 * US);
	CHECK_EQ(atomic_load(&m.look_at), t + 10 * US + MOVER_DEADMAN_NS);
	mover_enter(&m, MOVER_IN_POLL);
	mover_leave(&m, MOVER_IN_POLL, t + 20 * US + MOVER_REARM_NS);
	CHECK_EQ(atomic_load(&m.look_at), t + 20 * US + MOVER_REARM_NS + MOVER_DEADMAN_NS);
	/* It fired (the application stopped calling): a look finds it gone. */
	t += 20 * US + MOVER_REARM_NS + MOVER_DEADMAN_NS;
	mover_deadman_fired(&m);
	CHECK(mover_woke(&m, t, false, UINT64_MAX));
	CHECK_EQ(mover_who(&m), MOVER_THREAD);
	CHECK_EQ(atomic_load(&m.look_at), 0);
	CHECK_EQ(armed_at(&m), 0);
	/* The take-over's pass found packets waiting (a WRITE target spinning on memory): from
	 * now on the application keeps the look MOVER_DEADMAN_SHORT_NS ahead. */
	mover_passed(&m, false, false, true);
	/* A call that still saw APP pushes nothing in THREAD. */
	mover_enter(&m, MOVER_IN_POLL);
	mover_leave(&m, MOVER_IN_POLL, t + 1 * US);
	CHECK_EQ(atomic_load(&m.look_at), 0);
	{
		uint64_t u = served_until_app(&m, t + 1000 * US);
		mover_enter(&m, MOVER_IN_POLL);
		mover_leave(&m, MOVER_IN_POLL, u);
		CHECK_EQ(atomic_load(&m.look_at), u + MOVER_DEADMAN_SHORT_NS);
		mover_enter(&m, MOVER_IN_POLL);
		mover_leave(&m, MOVER_IN_POLL, u + MOVER_REARM_SHORT_NS - 1 * US);
		CHECK_EQ(atomic_load(&m.look_at), u + MOVER_DEADMAN_SHORT_NS);
		mover_enter(&m, MOVER_IN_POLL);
		mover_leave(&m, MOVER_IN_POLL, u + MOVER_REARM_SHORT_NS + 1 * US);
		u += MOVER_REARM_SHORT_NS + 1 * US;
		CHECK_EQ(atomic_load(&m.look_at), u + MOVER_DEADMAN_SHORT_NS);
		/* A take-over with nothing waiting (it computes): the long horizon again. */
		u += MOVER_DEADMAN_SHORT_NS;
		mover_deadman_fired(&m);
		CHECK(mover_woke(&m, u, false, UINT64_MAX));
		mover_passed(&m, false, false, false);
		t = served_until_app(&m, u + 1000 * US);
		mover_enter(&m, MOVER_IN_POLL);
		mover_leave(&m, MOVER_IN_POLL, t);
		CHECK_EQ(atomic_load(&m.look_at), t + MOVER_DEADMAN_NS);
		mover_deadman_fired(&m);
		CHECK(mover_woke(&m, t + MOVER_DEADMAN_NS, false, UINT64_MAX));
		mover_passed(&m, false, false, false); /* the take-over's pass: nothing waiting */
		t += MOVER_DEADMAN_NS;
	}
	/* Back in APP: a look that finds it still calling (inside a long poll) arms the next
	 * nap from then, and a fired deadman whose look the application pushed meanwhile is set
	 * again to the pushed time. */
	t = served_until_app(&m, t + 1000 * US);
	mover_note_app(&m, t);
	w = mover_plan(&m, t, UINT64_MAX, 20000 * US);
	mover_enter(&m, MOVER_IN_POLL);
	CHECK(!mover_woke(&m, t + MOVER_GRACE_NS, false, UINT64_MAX));
	w = mover_plan(&m, t + MOVER_GRACE_NS, UINT64_MAX, 20000 * US);
	CHECK_EQ(atomic_load(&m.look_at), t + MOVER_GRACE_NS + 2 * MOVER_GRACE_NS);
	atomic_store(&m.look_at, t + 5000 * US); /* pushed; its timerfd_settime lost the race */
	mover_deadman_fired(&m);
	w = mover_plan(&m, t + 50 * US, UINT64_MAX, 20000 * US);
	at = armed_at(&m);
	CHECK(near(at, t + 5000 * US));
	mover_leave(&m, MOVER_IN_POLL, t + 60 * US);
	/* A QP timer the application leaves overdue: the thread's wait ends a nap after it. */
	mover_note_app(&m, t + 100 * US);
	w = mover_plan(&m, t + 100 * US, t + 300 * US, 20000 * US);
	CHECK(w.until > t + 300 * US && w.until <= t + 300 * US + MOVER_NAP_MAX_NS + 1);
	mover_deadman_close(&m);
	CHECK_EQ(m.deadman_fd, -1);
}

/* The progress thread's nice value: the default, SOFTRDMA_THREAD_NICE, bad values. */
static void nice_values(void)
{
	unsetenv(MOVER_NICE_ENV);
	CHECK_EQ(mover_thread_nice(), MOVER_THREAD_NICE);
	const struct {
		const char *v;
		int want;
	} cases[] = {{"0", 0},
		     {"-5", -5},
		     {"19", 19},
		     {"-20", -20},
		     {"", MOVER_THREAD_NICE},
		     {"abc", MOVER_THREAD_NICE},
		     {"-21", MOVER_THREAD_NICE},
		     {"20", MOVER_THREAD_NICE},
		     {"5x", MOVER_THREAD_NICE}};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		setenv(MOVER_NICE_ENV, cases[i].v, 1);
		CHECK_EQ(mover_thread_nice(), cases[i].want);
	}
	unsetenv(MOVER_NICE_ENV);
}

static void *setup_thread(void *arg)
{
	mover_thread_setup();
	errno = 0;
	*(int *)arg = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	return NULL;
}

/* mover_thread_setup lowers the calling thread's nice value (where the process may: root in
 * CI) and nobody else's. */
static void setup_sets_nice(void)
{
	errno = 0;
	int mine = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	setenv(MOVER_NICE_ENV, "-3", 1);
	int got = 100;
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, setup_thread, &got) == 0);
	pthread_join(t, NULL);
	unsetenv(MOVER_NICE_ENV);
	if (geteuid() == 0)
		CHECK_EQ(got, -3);
	else
		CHECK(got == -3 || got == mine); /* not allowed: left as it was */
	CHECK_EQ(getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)), mine);
}

int main(void)
{
	nice_values();
	setup_sets_nice();
	inside_a_poll_counts_as_polling();
	starts_with_thread();
	polling_app_takes_back();
	app_going_away_is_taken_over();
	write_target_keeps_thread();
	timeouts_while_app_polls();
	hand_back_needs_more_after_waiting();
	blocking_app_kicks_only_in_app();
	lock_and_timers();
	deadman();
	return check_exit();
}
