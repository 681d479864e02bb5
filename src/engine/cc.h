/* Congestion control of a connected QP, as a policy (DESIGN.md decision 3; issue 13 step 0):
 * the requester asks it when the next request packet may leave and tells it what left; CNPs
 * and its own timers move its rate. The QP knows nothing of the algorithm behind it: a new
 * policy is a new file with a struct eng_cc_ops and a create function (cc_dcqcn.c: DCQCN).
 *
 * Sans I/O like the rest of the engine: every call takes `now` in ns of the caller's clock.
 * A QP without congestion control has no policy at all (qp->cc NULL) and pays nothing. */
#ifndef SOFTRDMA_ENGINE_CC_H
#define SOFTRDMA_ENGINE_CC_H

#include <stdint.h>

struct eng_cc;

struct eng_cc_ops {
	/* When the next packet may leave: at or before now means now. */
	uint64_t (*send_at)(const struct eng_cc *cc);
	/* A packet occupying `bytes` on the link left at now. */
	void (*sent)(struct eng_cc *cc, uint32_t bytes, uint64_t now);
	/* A congestion notification (a CNP) arrived at now. */
	void (*cnp)(struct eng_cc *cc, uint64_t now);
	/* Runs what is due at or before now. */
	void (*timer)(struct eng_cc *cc, uint64_t now);
	/* The next time timer() has work, UINT64_MAX for none. */
	uint64_t (*deadline)(const struct eng_cc *cc);
	/* The current rate in bit/s, and the rate cuts made so far (counters). */
	uint64_t (*rate)(const struct eng_cc *cc);
	uint64_t (*cuts)(const struct eng_cc *cc);
	void (*destroy)(struct eng_cc *cc);
};

/* A policy instance; each policy embeds it first in its own state. */
struct eng_cc {
	const struct eng_cc_ops *ops;
};

struct dcqcn_params;
/* DCQCN with p (engine/dcqcn.h): 0 and *out, -EINVAL (p refused) or -ENOMEM. */
int eng_cc_dcqcn_create(const struct dcqcn_params *p, struct eng_cc **out);

#endif
