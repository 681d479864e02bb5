/* The multicast group table of a context (mgroup.h). */
#include "core/mgroup.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Index of mgid, or -(insertion point) - 1. */
static long search(const struct core_mgroups *t, const uint8_t mgid[16])
{
	uint32_t lo = 0, hi = t->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = memcmp(t->g[mid].mgid, mgid, 16);
		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -(long)lo - 1;
}

int core_mg_attach(struct core_mgroups *t, const uint8_t mgid[16], uint32_t qpn)
{
	long i = search(t, mgid);
	if (i >= 0) {
		struct core_mgroup *g = &t->g[i];
		for (uint32_t k = 0; k < g->nqp; k++)
			if (g->qpn[k] == qpn)
				return 0; /* rxe_attach_mcg: already a member */
		if (g->nqp >= CORE_MAX_MCAST_QP_ATTACH ||
		    t->total >= CORE_MAX_TOTAL_MCAST_QP_ATTACH)
			return -ENOMEM;
		g->qpn[g->nqp++] = qpn;
		t->total++;
		return 0;
	}
	if (t->n >= CORE_MAX_MCAST_GRP || t->total >= CORE_MAX_TOTAL_MCAST_QP_ATTACH)
		return -ENOMEM;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 4;
		struct core_mgroup *g = realloc(t->g, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		t->g = g;
		t->cap = cap;
	}
	uint32_t at = (uint32_t)(-i - 1);
	memmove(&t->g[at + 1], &t->g[at], (t->n - at) * sizeof(t->g[0]));
	memcpy(t->g[at].mgid, mgid, 16);
	t->g[at].nqp = 1;
	t->g[at].qpn[0] = qpn;
	t->n++;
	t->total++;
	return 1;
}

int core_mg_detach(struct core_mgroups *t, const uint8_t mgid[16], uint32_t qpn)
{
	long i = search(t, mgid);
	if (i < 0)
		return -EINVAL; /* rxe_detach_mcast: no such group */
	struct core_mgroup *g = &t->g[i];
	for (uint32_t k = 0; k < g->nqp; k++) {
		if (g->qpn[k] != qpn)
			continue;
		/* Keep attach order: the fan-out delivers in it, as rxe walks its list. */
		memmove(&g->qpn[k], &g->qpn[k + 1], (g->nqp - k - 1) * sizeof(g->qpn[0]));
		g->nqp--;
		t->total--;
		if (g->nqp > 0)
			return 0;
		memmove(&t->g[i], &t->g[i + 1], (t->n - (uint32_t)i - 1) * sizeof(t->g[0]));
		t->n--;
		return 1;
	}
	return -EINVAL; /* rxe_detach_mcg: not a member */
}

const struct core_mgroup *core_mg_find(const struct core_mgroups *t, const uint8_t mgid[16])
{
	long i = search(t, mgid);
	return i >= 0 ? &t->g[i] : NULL;
}

int core_mg_first_of(const struct core_mgroups *t, uint32_t qpn, uint8_t mgid[16])
{
	for (uint32_t i = 0; i < t->n; i++)
		for (uint32_t k = 0; k < t->g[i].nqp; k++)
			if (t->g[i].qpn[k] == qpn) {
				memcpy(mgid, t->g[i].mgid, 16);
				return 0;
			}
	return -ENOENT;
}

void core_mg_free(struct core_mgroups *t)
{
	free(t->g);
	memset(t, 0, sizeof(*t));
}
