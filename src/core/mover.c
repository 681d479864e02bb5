/* Who moves the packets (mover.h). */
#include "core/mover.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

const char *const mover_counter_names[MOVER_NCOUNTERS] = {
#define MOVER_COUNTER_NAME(name, desc) #name,
    MOVER_COUNTERS(MOVER_COUNTER_NAME)
#undef MOVER_COUNTER_NAME
};

static bool in_poll(const struct mover *m)
{
	return (atomic_load_explicit(&m->inside, memory_order_relaxed) & 0xffffu) != 0;
}

static bool app_active(const struct mover *m, uint64_t now)
{
	if (atomic_load_explicit(&m->inside, memory_order_relaxed))
		return true;
	uint64_t last = atomic_load_explicit(&m->last_app, memory_order_relaxed);
	/* The application may have stored a time later than our now. */
	return last != 0 && (int64_t)(now - last) < (int64_t)MOVER_GRACE_NS;
}

/* Sets the deadman to fire at `at` (absolute, core_now_ns), or disarms it (0). */
static void arm(const struct mover *m, uint64_t at)
{
	if (m->deadman_fd < 0)
		return;
	struct itimerspec its = {.it_value = {.tv_sec = (time_t)(at / 1000000000ull),
					      .tv_nsec = (long)(at % 1000000000ull)}};
	timerfd_settime(m->deadman_fd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void set_who(struct mover *m, enum mover_who who)
{
	atomic_store_explicit(&m->who, who, memory_order_relaxed);
	m->n[who == MOVER_THREAD ? MOVER_CNT_to_thread : MOVER_CNT_to_app]++;
	m->nap = MOVER_GRACE_NS;
	m->idle = 0;
	if (who == MOVER_THREAD) {
		/* No looks in THREAD. An application call that still saw APP may arm it again:
		 * the thread then ignores the wake-up (mover_deadman_fired). */
		atomic_store_explicit(&m->look_at, 0, memory_order_relaxed);
		arm(m, 0);
	}
}

void mover_deadman_open(struct mover *m)
{
	m->deadman_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

void mover_deadman_close(struct mover *m)
{
	if (m->deadman_fd >= 0)
		close(m->deadman_fd);
	m->deadman_fd = -1;
}

void mover_deadman_fired(struct mover *m)
{
	uint64_t n;
	if (m->deadman_fd >= 0 && read(m->deadman_fd, &n, sizeof(n)) < 0) {
		/* not expired (an application re-armed it meanwhile): nothing to clear */
	}
	if (mover_who(m) == MOVER_APP)
		m->fired = true;
}

void mover_push_look(struct mover *m, uint64_t now)
{
	uint64_t old = atomic_load_explicit(&m->look_at, memory_order_relaxed);
	uint64_t at = now + mover_look_ahead(m);
	if (old + mover_look_rearm(m) >= at ||
	    !atomic_compare_exchange_strong_explicit(&m->look_at, &old, at, memory_order_relaxed,
						     memory_order_relaxed))
		return; /* another of its threads has just pushed it */
	arm(m, at);
}

void mover_init(struct mover *m)
{
	memset(m, 0, sizeof(*m));
	m->deadman_fd = -1;
	/* Nobody polls yet (connections are being set up): the thread moves the packets. */
	atomic_store_explicit(&m->who, MOVER_THREAD, memory_order_relaxed);
	m->nap = MOVER_GRACE_NS;
	m->idle_max = MOVER_IDLE_MAX;
}

/* struct sched_attr of sched_setattr(2), which glibc 2.36 does not declare. */
struct sched_attr_v1 {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
	uint32_t sched_util_min;
	uint32_t sched_util_max;
};

void mover_thread_setup(void)
{
	prctl(PR_SET_TIMERSLACK, 1000ul); /* 1 us; a failure leaves the default */
	/* A short time slice (Linux 6.12 and later: sched_runtime of a SCHED_OTHER thread;
	 * older kernels refuse or ignore it). The thread's wake-ups then preempt a thread that
	 * spins on the same core (an RDMA WRITE target waiting on memory) at once instead of
	 * at the end of that one's slice, milliseconds later. */
	struct sched_attr_v1 a = {.size = sizeof(a),
				  .sched_policy = 0 /* SCHED_OTHER */,
				  .sched_runtime = MOVER_SLICE_NS};
	syscall(SYS_sched_setattr, 0, &a, 0);
	/* A higher weight (setpriority of this thread only; sched_setattr above set nice 0).
	 * The short slice is not enough: the kernel's scheduler (EEVDF) lets a woken thread
	 * preempt one that spins on the same core only if it is owed CPU time, and a thread that
	 * ran as much as the spinner waits for the next tick (4 ms here). The WRITE target's
	 * p99 came to that tick (sr_perf -t wlat, RoCEv2, pinned: 3.8 ms; at nice -10, 140-214 us;
	 * iWARP's p999 4.0 -> 1.0-1.2 ms; SEND, event-driven and bandwidth figures unchanged).
	 * The thread moves packets and sleeps; it never spins, so its weight takes from the
	 * application only the time the packets cost. Lowering nice needs CAP_SYS_NICE or an
	 * RLIMIT_NICE that allows it (ulimit -e; 30 allows -10): without, the thread keeps
	 * nice 0 and the tail. */
	int nice = mover_thread_nice();
	if (nice != 0)
		setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

int mover_thread_nice(void)
{
	const char *e = getenv(MOVER_NICE_ENV);
	if (!e || !*e)
		return MOVER_THREAD_NICE;
	char *end;
	errno = 0;
	long v = strtol(e, &end, 10);
	if (errno || *end || v < -20 || v > 19) {
		static _Atomic int said;
		if (!atomic_exchange(&said, 1))
			fprintf(stderr, "softrdma: %s=%s is not a nice value (-20..19); using %d\n",
				MOVER_NICE_ENV, e, MOVER_THREAD_NICE);
		return MOVER_THREAD_NICE;
	}
	return (int)v;
}

bool mover_app_blocks(struct mover *m)
{
	atomic_store_explicit(&m->last_app, 0, memory_order_relaxed);
	return mover_who(m) == MOVER_APP;
}

struct mover_wait mover_plan(struct mover *m, uint64_t now, uint64_t deadline, uint64_t max_sleep)
{
	if (mover_who(m) == MOVER_APP && !app_active(m, now))
		set_who(m, MOVER_THREAD);
	if (mover_who(m) == MOVER_APP) {
		/* The next look: a nap from now if the last one is over (or none was armed);
		 * the deadman is set again after it fired, also when the application pushed the
		 * look meanwhile (its timerfd_settime and ours may have crossed). */
		uint64_t look = atomic_load_explicit(&m->look_at, memory_order_relaxed);
		if (look <= now) {
			uint64_t at = now + m->nap;
			if (atomic_compare_exchange_strong_explicit(
				&m->look_at, &look, at, memory_order_relaxed, memory_order_relaxed))
				look = at;
			m->fired = true;
		}
		if (m->fired)
			arm(m, look);
		m->fired = false;
		/* A timer the application leaves overdue for a nap is the thread's (mover_woke). */
		uint64_t until = now + max_sleep;
		if (deadline != UINT64_MAX && deadline + m->nap < until)
			until = deadline + m->nap + 1;
		if (m->deadman_fd < 0 && look < until)
			until = look;
		return (struct mover_wait){.on_io = false, .until = until};
	}
	/* While the application polls, check back after MOVER_GRACE_NS: a wake-up for a
	 * packet it read first never reaches the thread (epoll finds the socket empty and
	 * sleeps on), so only the time tells that the thread is not needed. */
	uint64_t until = now + (app_active(m, now) ? MOVER_GRACE_NS : max_sleep);
	if (deadline < until)
		until = deadline;
	return (struct mover_wait){.on_io = true, .until = until};
}

static bool app_polling(const struct mover *m)
{
	uint64_t last = m->app_at_wake;
	if (m->polling_at_wake)
		return true;
	return last != 0 && (int64_t)(m->woke_at - last) < (int64_t)MOVER_POLL_GAP_NS;
}

static void app_served(struct mover *m)
{
	if (++m->idle >= m->idle_max)
		set_who(m, MOVER_APP);
}

bool mover_woke(struct mover *m, uint64_t now, bool on_io, uint64_t deadline)
{
	if (mover_who(m) == MOVER_THREAD) {
		m->woke_at = now;
		m->app_at_wake = atomic_load_explicit(&m->last_app, memory_order_relaxed);
		m->polling_at_wake = in_poll(m);
		if (on_io || deadline <= now)
			return true;
		/* The time ran out, no packet for the thread meanwhile: if the application is
		 * polling, it moves them; if it is inside a post (a sender's long writes), it
		 * is there and nothing waits for the thread either. */
		if (app_polling(m) || atomic_load_explicit(&m->inside, memory_order_relaxed))
			app_served(m);
		return false;
	}
	/* A look (the deadman, or the time): is the application still there? */
	if (!app_active(m, now)) {
		set_who(m, MOVER_THREAD);
		m->took_over = true;
		return true;
	}
	/* It polls, and runs the timers in its polls; one it has left overdue for a whole nap
	 * (it only posts, say) is run here. */
	bool overdue = deadline != UINT64_MAX && deadline + m->nap < now;
	m->nap = m->nap * 2 > MOVER_NAP_MAX_NS ? MOVER_NAP_MAX_NS : m->nap * 2;
	return overdue;
}

bool mover_lock_busy(struct mover *m)
{
	m->n[MOVER_CNT_busy]++;
	/* THREAD: wait for it (the packet stays readable: retrying would spin, and on a core
	 * shared with the application keep it from running). A look in APP: skip. */
	return mover_who(m) == MOVER_THREAD;
}

void mover_passed(struct mover *m, bool on_io, bool waited, bool did)
{
	m->n[MOVER_CNT_passes]++;
	if (did)
		m->n[MOVER_CNT_work]++;
	if (m->took_over) {
		/* Did the application leave packets waiting when it stopped calling? Then it
		 * waits for them elsewhere (on memory): its next looks come sooner (mover.h). */
		m->took_over = false;
		atomic_store_explicit(&m->left_waiting, did, memory_order_relaxed);
		/* And the next hand-back waits for longer evidence, or for shorter again. */
		if (did)
			m->idle_max = m->idle_max * 2 > MOVER_IDLE_MAX_MAX ? MOVER_IDLE_MAX_MAX
									   : m->idle_max * 2;
		else if (m->idle_max / 2 >= MOVER_IDLE_MAX)
			m->idle_max /= 2;
	}
	if (mover_who(m) == MOVER_APP || (!on_io && !waited))
		return; /* a timer: says nothing about who reads the sockets */
	/* Had the application polled just before the packets came, or did it hold the lock?
	 * Then it was polling for them: the thread's wake-up was not needed (even if it got
	 * there first: on a core shared with the application it always does). Otherwise it
	 * polls for something else or not at all (an RDMA WRITE target spinning on memory):
	 * the thread is needed. */
	if (waited || app_polling(m))
		app_served(m);
	else
		m->idle = 0;
}
