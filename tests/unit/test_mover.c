/* Who moves the packets (core/mover.h), on a virtual clock: the thread starts in charge; an
 * application that polls for its packets gets them back after MOVER_IDLE_MAX wake-ups and the
 * thread leaves the sockets; one that stops polling (computes, spins on memory) is taken over
 * at the thread's next look, within a nap; packets that come while the application polls for
 * something else (ib_write_lat's target) keep the thread in charge; an application about to
 * block asks for a kick only while it moves the packets itself; a lock held by the application
 * is waited for in THREAD and skipped in a look; while the application polls, timeouts with
 * nothing for the thread count as its doing; a timer the polling application leaves
 * overdue is run by a look; the nap doubles up to MOVER_NAP_MAX_NS. */
#include "check.h"

#include <stdint.h>

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

/* MOVER_IDLE_MAX wake-ups 10 us apart, from t on, each for packets the application (which
 * polled 1 us before) was polling for: the application has the packets back. Returns the
 * time after the last. */
static uint64_t served_until_app(struct mover *m, uint64_t t)
{
	for (unsigned i = 0; i < MOVER_IDLE_MAX; i++, t += 10 * US)
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

int main(void)
{
	inside_a_poll_counts_as_polling();
	starts_with_thread();
	polling_app_takes_back();
	app_going_away_is_taken_over();
	write_target_keeps_thread();
	timeouts_while_app_polls();
	blocking_app_kicks_only_in_app();
	lock_and_timers();
	return check_exit();
}
