/* The softrdma.h extras: counters. */
#include "softrdma.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "api/api.h"

struct collect {
	struct softrdma_counter *out;
	int max;
	int n;
};

static void collect_one(void *arg, const char *name, uint64_t value)
{
	struct collect *c = arg;
	if (c->n < c->max) {
		snprintf(c->out[c->n].name, sizeof(c->out[c->n].name), "%s", name);
		c->out[c->n].value = value;
	}
	c->n++;
}

int softrdma_query_counters(struct ibv_context *context, struct softrdma_counter *out, int max)
{
	if (!context || max < 0 || (max && !out)) {
		errno = EINVAL;
		return -1;
	}
	struct sr_context *ctx = sr_ctx(context);
	struct collect c = {.out = out, .max = max};
	core_lock(ctx->core);
	core_each_counter(ctx->core, collect_one, &c);
	if (ctx->iwp)
		iwp_each_counter(ctx->iwp, collect_one, &c);
	core_unlock(ctx->core);
	return c.n;
}

int softrdma_query_qp_counters(struct ibv_qp *ibqp, struct softrdma_counter *out, int max)
{
	if (!ibqp || max < 0 || (max && !out)) {
		errno = EINVAL;
		return -1;
	}
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct collect c = {.out = out, .max = max};
	core_lock(qp->ctx->core);
	if (qp->iqp) { /* iWARP: the iWARP engine's own counters */
		const uint64_t *v = iw_qp_counters(qp->iqp);
		for (int i = 0; i < IW_CNT__COUNT; i++)
			collect_one(&c, iw_counter_names[i], v[i]);
	} else {
		const uint64_t *v = eng_qp_counters(qp->eqp);
		for (int i = 0; i < ENG_CNT__COUNT; i++)
			collect_one(&c, eng_counter_names[i], v[i]);
		uint64_t rate = eng_qp_cc_rate(qp->eqp);
		if (rate) /* a gauge: congestion control's current rate */
			collect_one(&c, "cc_rate_kbps", rate / 1000);
	}
	core_unlock(qp->ctx->core);
	return c.n;
}

uint64_t softrdma_counter(struct ibv_context *ctx, struct ibv_qp *qp, const char *name)
{
	struct softrdma_counter all[160];
	int n =
	    qp ? softrdma_query_qp_counters(qp, all, 160) : softrdma_query_counters(ctx, all, 160);
	for (int i = 0; i < n && i < 160; i++)
		if (!strcmp(all[i].name, name))
			return all[i].value;
	return UINT64_MAX;
}
