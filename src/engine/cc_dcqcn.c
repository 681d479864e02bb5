/* DCQCN as a congestion-control policy of the engine (cc.h): the reaction point of dcqcn.h
 * behind the policy interface. */
#include <errno.h>
#include <stdlib.h>

#include "engine/cc.h"
#include "engine/dcqcn.h"

struct cc_dcqcn {
	struct eng_cc base;
	struct dcqcn d;
};

static struct dcqcn *of(struct eng_cc *cc)
{
	return &((struct cc_dcqcn *)cc)->d;
}

static const struct dcqcn *of_c(const struct eng_cc *cc)
{
	return &((const struct cc_dcqcn *)cc)->d;
}

static uint64_t send_at(const struct eng_cc *cc)
{
	return dcqcn_send_at(of_c(cc));
}

static void sent(struct eng_cc *cc, uint32_t bytes, uint64_t now)
{
	dcqcn_sent(of(cc), bytes, now);
}

static void cnp(struct eng_cc *cc, uint64_t now)
{
	dcqcn_cnp(of(cc), now);
}

static void timer(struct eng_cc *cc, uint64_t now)
{
	dcqcn_timer(of(cc), now);
}

static uint64_t deadline(const struct eng_cc *cc)
{
	return dcqcn_deadline(of_c(cc));
}

static uint64_t rate(const struct eng_cc *cc)
{
	return of_c(cc)->rate;
}

static uint64_t cuts(const struct eng_cc *cc)
{
	return of_c(cc)->cuts;
}

static void destroy(struct eng_cc *cc)
{
	free(cc);
}

static const struct eng_cc_ops dcqcn_ops = {
    .send_at = send_at,
    .sent = sent,
    .cnp = cnp,
    .timer = timer,
    .deadline = deadline,
    .rate = rate,
    .cuts = cuts,
    .destroy = destroy,
};

int eng_cc_dcqcn_create(const struct dcqcn_params *p, struct eng_cc **out)
{
	if (dcqcn_params_check(p) < 0)
		return -EINVAL;
	struct cc_dcqcn *c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->base.ops = &dcqcn_ops;
	dcqcn_init(&c->d, p);
	*out = &c->base;
	return 0;
}
