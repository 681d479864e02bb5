/* Who moves the packets: the application's thread or the progress thread.
 *
 * DESIGN.md decision 4: the application moves packets itself while it polls (no hand-off on
 * the latency path), and a progress thread moves them while it does not (an RDMA WRITE target
 * spinning on memory, a thread blocked on a completion channel, an application computing).
 * Both cost something when they guess wrong: a thread woken for a datagram the application
 * reads anyway costs a context switch (on a core shared with the application, the
 * application's time, and if it is preempted holding the lock, everybody's), and a thread
 * that sleeps while the application spins on memory leaves the packet waiting.
 *
 * The policy, per context (one for RoCE's UDP sockets, one for iWARP's TCP connections):
 * - APP: the application moves the packets. The thread is not on the sockets (a datagram
 *   wakes nobody); it looks once per nap, the nap doubling from MOVER_GRACE_NS to
 *   MOVER_NAP_MAX_NS. The look is a timer (the deadman, a timerfd) that the application's
 *   calls push back: while it keeps calling, the look stays between MOVER_DEADMAN_NS -
 *   MOVER_REARM_NS and MOVER_DEADMAN_NS ahead (one timerfd_settime per MOVER_REARM_NS of its
 *   calls), so the thread never wakes on its core, where each look was a context switch in the
 *   middle of a round trip (sr_perf -t lat, 20,000 round trips of 12-18 us, pinned: a look
 *   every millisecond on each side came to one round trip in 30 and set the p99). The look
 *   stays beyond the kernel's next scheduler tick (4 ms at HZ=250): a timer set to expire
 *   before it makes the kernel reprogram the CPU's timer, which in this project's virtual
 *   machines costs 10-20 us per timerfd_settime (0.7 us beyond the tick), and at one per
 *   500 us of calls that again set the p99. So an application that stops calling is taken
 *   over 4-5 ms later (its packets and deferred posts wait that long once), where it was 1
 *   ms with looks every nap. Unless it is an application that leaves packets waiting when it
 *   stops calling (the take-over's first pass moved some: an RDMA WRITE target that polled
 *   for its completion and now spins on memory for the peer's WRITE): for it the look is
 *   kept MOVER_DEADMAN_SHORT_NS ahead, at the reprogramming's price, until a take-over
 *   finds nothing waiting. It takes over (THREAD) when the
 *   application is inside no poll or post and has done neither for MOVER_GRACE_NS (it
 *   computes, or spins on memory as an RDMA WRITE target does: the packets it waits for
 *   wait for the thread's next look, at most a nap) or when it blocks for a completion
 *   event (mover_app_blocks, which asks for a kick). Inside a call counts however long ago
 *   it began: on a core shared with the thread the application may wait there for the lock
 *   or the CPU, and a send on loopback runs the peer's receive (with a wake-up across
 *   cores, which in a virtual machine can outlast MOVER_GRACE_NS); the time of its last
 *   call alone would tell the thread it had gone, and its wake-ups would slow every round
 *   trip (sr_perf -t lat on 2 vCPUs: p50 22-55 us, bimodal, against 19 us).
 * - THREAD: the thread waits on the sockets and moves the packets. When it finds the lock
 *   held, it waits for it: never a timed retry, which would spin against the holder. A
 *   wake-up for packets that came while the application was polling (it was inside a poll,
 *   or had polled within MOVER_POLL_GAP_NS) was not needed, whoever got to them first;
 *   MOVER_IDLE_MAX of those in a row and the application has the packets back (APP). One
 *   that came while it was not (it spins on memory after its send completion:
 *   ib_write_lat; a post reads nothing) starts the count again. But an RDMA WRITE target
 *   over RoCE polls for each WRITE's ACK, and when the peer's WRITE comes right behind that
 *   ACK its poll reads both: runs of such round trips handed the packets back, and the next
 *   round trip waited for a look (1 ms) with its WRITE in the socket (sr_perf -t wlat, 5,500
 *   round trips: 120-280 hand-backs per side). So a take-over that finds packets the
 *   application left waiting doubles the count the next hand-back needs, up to
 *   MOVER_IDLE_MAX_MAX, and one that finds none halves it again (4-8 hand-backs per side;
 *   the mean round trip 237-248 against 289-293 us, alternated runs).
 *   A wake-up for a packet the application read first does not even reach the thread
 *   (epoll finds the socket empty and sleeps on): while the application polls, the thread
 *   also checks back every MOVER_GRACE_NS, and finding it polling counts the same.
 *
 * Sans-I/O: the thread asks how to wait (mover_plan), whether to make a pass (mover_woke,
 * mover_lock_busy), and tells what the pass found (mover_passed); the time is passed in. */
#ifndef SOFTRDMA_CORE_MOVER_H
#define SOFTRDMA_CORE_MOVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* The application counts as moving packets this long after its last poll or post. */
#define MOVER_GRACE_NS 20000ull
/* The longest look-out nap while the application moves the packets. */
#define MOVER_NAP_MAX_NS 1000000ull
/* The thread's time slice, where the kernel lets it be set (mover_thread_setup). */
#define MOVER_SLICE_NS 100000ull
/* The application pushes the thread's next look back to MOVER_DEADMAN_NS ahead when it is
 * nearer than MOVER_DEADMAN_NS - MOVER_REARM_NS: at most one timerfd_settime per
 * MOVER_REARM_NS, each beyond a 250 Hz tick. */
#define MOVER_DEADMAN_NS 5000000ull
#define MOVER_REARM_NS	 1000000ull
/* The same for an application that left packets waiting at its last take-over. */
#define MOVER_DEADMAN_SHORT_NS 1000000ull
#define MOVER_REARM_SHORT_NS   500000ull
/* An application that polls does so at least this often (an empty poll is a system call). */
#define MOVER_POLL_GAP_NS 3000ull
/* Wake-ups in a row for packets the application was polling for: APP. Each take-over that
 * finds packets the application left waiting doubles the count, up to MOVER_IDLE_MAX_MAX;
 * each that finds none halves it again (mover_passed). */
#define MOVER_IDLE_MAX	   16u
#define MOVER_IDLE_MAX_MAX 1024u

enum mover_who { MOVER_APP, MOVER_THREAD };

/* The thread's decisions, counted (reported with the context's counters as mover_<name>). */
#define MOVER_COUNTERS(X)                                                                          \
	X(to_thread, "the thread took over the packets")                                           \
	X(to_app, "the application took the packets back")                                         \
	X(passes, "passes of the thread")                                                          \
	X(work, "passes of the thread that moved something")                                       \
	X(busy, "wake-ups that found the lock held")
enum mover_counter {
#define MOVER_COUNTER_ENUM(name, desc) MOVER_CNT_##name,
	MOVER_COUNTERS(MOVER_COUNTER_ENUM)
#undef MOVER_COUNTER_ENUM
	    MOVER_NCOUNTERS
};
extern const char *const mover_counter_names[MOVER_NCOUNTERS];

struct mover {
	_Atomic uint64_t last_app;   /* the application's last poll or post, 0: blocked */
	_Atomic unsigned inside;     /* application threads inside a poll (low 16 bits) or a
				      * post (high 16 bits) now */
	_Atomic int who;	     /* enum mover_who; the application reads it */
	uint64_t nap;		     /* thread only: the next look-out nap in APP */
	_Atomic uint64_t look_at;    /* APP: when the deadman fires (the next look), 0: unarmed */
	int deadman_fd;		     /* the timerfd behind look_at, -1: none (looks by time-out) */
	bool fired;		     /* thread only: the deadman fired since the last plan */
	bool took_over;		     /* thread only: a look has just taken over (mover_passed) */
	_Atomic bool left_waiting;   /* the last take-over found packets waiting: short looks */
	unsigned idle;		     /* thread only: wake-ups in a row the application served */
	unsigned idle_max;	     /* thread only: how many make APP (MOVER_IDLE_MAX..) */
	uint64_t woke_at;	     /* thread only: the last wake-up in THREAD */
	uint64_t app_at_wake;	     /* thread only: last_app then */
	bool polling_at_wake;	     /* thread only: it was inside a poll then */
	uint64_t n[MOVER_NCOUNTERS]; /* thread only (read racily for reports) */
};

/* How the thread waits next. */
struct mover_wait {
	bool on_io;	/* on the sockets, not only on its kick and the time */
	uint64_t until; /* absolute, ns (core_now_ns) */
};

void mover_init(struct mover *m);

/* Called by the thread itself when it starts: Linux lets a thread's timed waits end up to
 * its timer slack late (50 us by default), longer than the short naps above; its time slice
 * (MOVER_SLICE_NS) and its nice value (mover_thread_nice), so that its wake-ups preempt an
 * application spinning on the same core. */
void mover_thread_setup(void);

/* The progress thread's nice value: MOVER_THREAD_NICE, or SOFTRDMA_THREAD_NICE (-20..19; 0
 * leaves the thread as the application's threads). Where the process may not lower it, the
 * thread stays at nice 0. */
#define MOVER_THREAD_NICE -10
#define MOVER_NICE_ENV	  "SOFTRDMA_THREAD_NICE"
int mover_thread_nice(void);

/* The deadman timer (a timerfd on CLOCK_MONOTONIC, core_now_ns's clock): the thread opens it
 * before it starts (-1 if the kernel refuses: then each look is a time-out of the thread's
 * wait), waits on its fd along with the rest, and calls mover_deadman_fired after reading
 * it; closed by mover_deadman_close once the thread has stopped. */
void mover_deadman_open(struct mover *m);
void mover_deadman_close(struct mover *m);
void mover_deadman_fired(struct mover *m);

/* How far ahead the application pushes the next look, and how near it lets it come before it
 * pushes again: MOVER_DEADMAN_NS and MOVER_REARM_NS, or their SHORT versions (left_waiting). */
static inline uint64_t mover_look_ahead(const struct mover *m)
{
	return atomic_load_explicit(&m->left_waiting, memory_order_relaxed) ? MOVER_DEADMAN_SHORT_NS
									    : MOVER_DEADMAN_NS;
}

static inline uint64_t mover_look_rearm(const struct mover *m)
{
	return atomic_load_explicit(&m->left_waiting, memory_order_relaxed) ? MOVER_REARM_SHORT_NS
									    : MOVER_REARM_NS;
}

/* Application: pushes the next look back to now + mover_look_ahead (mover_leave). */
void mover_push_look(struct mover *m, uint64_t now);

/* The application polled or posted at now. */
static inline void mover_note_app(struct mover *m, uint64_t now)
{
	atomic_store_explicit(&m->last_app, now, memory_order_relaxed);
}

/* An application thread enters a poll (which moves the packets) or a post (which sends),
 * and leaves it at now (before the lock, after the unlock). Inside one, the application is
 * active however long ago it entered (above). */
#define MOVER_IN_POLL 1u
#define MOVER_IN_POST 0x10000u
static inline void mover_enter(struct mover *m, unsigned what)
{
	atomic_fetch_add_explicit(&m->inside, what, memory_order_relaxed);
}

static inline void mover_leave(struct mover *m, unsigned what, uint64_t now)
{
	mover_note_app(m, now);
	atomic_fetch_sub_explicit(&m->inside, what, memory_order_release);
	if (atomic_load_explicit(&m->who, memory_order_relaxed) == MOVER_APP &&
	    atomic_load_explicit(&m->look_at, memory_order_relaxed) + mover_look_rearm(m) <
		now + mover_look_ahead(m))
		mover_push_look(m, now);
}

/* The application is about to block for a completion event: true when the thread must be
 * kicked to take over now. */
bool mover_app_blocks(struct mover *m);

/* Thread: how to wait from now; deadline is the earliest timer (UINT64_MAX: none), max_sleep
 * the longest wait without looking at the time. In APP it arms the deadman for the next look
 * (until then covers only timers and max_sleep, or without a deadman the look too). */
struct mover_wait mover_plan(struct mover *m, uint64_t now, uint64_t deadline, uint64_t max_sleep);

/* Thread: after a wait (on_io: the sockets have something), whether to make a pass now;
 * deadline is the earliest timer. */
bool mover_woke(struct mover *m, uint64_t now, bool on_io, uint64_t deadline);

/* Thread: the lock is held by someone else; true when the thread should wait for it. */
bool mover_lock_busy(struct mover *m);

/* Thread: a pass was made (on_io: the sockets had woken the thread; waited: it had waited for
 * the lock; did: it moved packets or ran timers). */
void mover_passed(struct mover *m, bool on_io, bool waited, bool did);

static inline enum mover_who mover_who(const struct mover *m)
{
	return (enum mover_who)atomic_load_explicit(&m->who, memory_order_relaxed);
}

/* Doorbell batching (RoCE's core_posted, iWARP's iwp_posted): whether a post may leave its
 * bytes for the application's next poll instead of a system call of its own. Only when it
 * joins a pipeline (pipeline: the application has earlier requests outstanding, so it will
 * poll), while the application moves the packets (APP) and a progress thread would take
 * over if it stopped calling (has_thread), and while fewer than MOVER_DEFER_POSTS posts wait
 * (*deferred counts them, under the context's lock; the pass that sends them zeroes it).
 * Back-to-back posts then leave in one system call. */
#define MOVER_DEFER_POSTS 16
/* The conditions of mover_post_waits but the count: whether a post may be left at all. */
static inline bool mover_post_may_wait(const struct mover *m, bool has_thread, bool pipeline)
{
	return has_thread && pipeline && mover_who(m) == MOVER_APP;
}

static inline bool mover_post_waits(const struct mover *m, bool has_thread, bool pipeline,
				    uint32_t *deferred)
{
	return mover_post_may_wait(m, has_thread, pipeline) && ++*deferred < MOVER_DEFER_POSTS;
}

#endif
