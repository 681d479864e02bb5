/* The multicast group table (core/mgroup.h): attach / detach with rxe's rules (an attached QP
 * again: nothing changes; a detach of a QP not attached: EINVAL; the group goes with its last
 * QP), the limits (56 QPs per group, 8192 groups, 0x70000 attachments: ENOMEM, the table
 * unchanged), lookups by MGID while groups come and go in random order (checked against a
 * simple model; the seed is printed), and the QP's groups for its destroy. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/mgroup.h"

static void mgid_of(uint32_t k, uint8_t out[16])
{
	memset(out, 0, 16);
	out[10] = out[11] = 0xff;
	out[12] = (uint8_t)(224 + (k >> 24) % 16);
	out[13] = (uint8_t)(k >> 16);
	out[14] = (uint8_t)(k >> 8);
	out[15] = (uint8_t)k;
}

static bool sorted(const struct core_mgroups *t)
{
	for (uint32_t i = 1; i < t->n; i++)
		if (memcmp(t->g[i - 1].mgid, t->g[i].mgid, 16) >= 0)
			return false;
	return true;
}

static void rules(void)
{
	struct core_mgroups t = {0};
	uint8_t a[16], b[16], got[16];
	mgid_of(1, a);
	mgid_of(2, b);
	CHECK_EQ(core_mg_detach(&t, a, 7), -EINVAL);
	CHECK(core_mg_find(&t, a) == NULL);
	CHECK_EQ(core_mg_attach(&t, a, 7), 1); /* a new group */
	CHECK_EQ(core_mg_attach(&t, a, 7), 0); /* again: nothing changes */
	CHECK_EQ(core_mg_attach(&t, a, 8), 0);
	CHECK_EQ(core_mg_attach(&t, b, 8), 1);
	CHECK_EQ(t.total, 3);
	const struct core_mgroup *g = core_mg_find(&t, a);
	REQUIRE(g);
	CHECK_EQ(g->nqp, 2);
	CHECK_EQ(g->qpn[0], 7); /* attach order */
	CHECK_EQ(g->qpn[1], 8);
	CHECK_EQ(core_mg_detach(&t, b, 7), -EINVAL); /* 7 is not in b */
	CHECK_EQ(core_mg_first_of(&t, 8, got), 0);
	CHECK_MEM(got, a, 16);
	CHECK_EQ(core_mg_detach(&t, a, 7), 0);
	CHECK_EQ(core_mg_detach(&t, a, 7), -EINVAL);
	CHECK_EQ(core_mg_detach(&t, a, 8), 1); /* the last QP: the group goes */
	CHECK(core_mg_find(&t, a) == NULL);
	CHECK_EQ(core_mg_first_of(&t, 7, got), -ENOENT);
	CHECK_EQ(core_mg_first_of(&t, 8, got), 0);
	CHECK_MEM(got, b, 16);
	CHECK_EQ(core_mg_detach(&t, b, 8), 1);
	CHECK_EQ(t.n, 0);
	CHECK_EQ(t.total, 0);
	core_mg_free(&t);
}

static void limits(void)
{
	struct core_mgroups t = {0};
	uint8_t m[16];
	mgid_of(5, m);
	for (uint32_t q = 0; q < CORE_MAX_MCAST_QP_ATTACH; q++)
		CHECK_EQ(core_mg_attach(&t, m, 100 + q), q == 0 ? 1 : 0);
	CHECK_EQ(core_mg_attach(&t, m, 99), -ENOMEM);
	CHECK_EQ(core_mg_find(&t, m)->nqp, CORE_MAX_MCAST_QP_ATTACH);
	CHECK_EQ(core_mg_detach(&t, m, 99), -EINVAL);
	core_mg_free(&t);

	/* 8192 groups of 56: every limit at once (8192 * 56 = 0x70000). */
	int bad = 0;
	for (uint32_t k = 0; k < CORE_MAX_MCAST_GRP; k++) {
		mgid_of(k * 7919u, m);
		for (uint32_t q = 0; q < CORE_MAX_MCAST_QP_ATTACH; q++)
			bad += core_mg_attach(&t, m, q) != (q == 0 ? 1 : 0);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(t.n, CORE_MAX_MCAST_GRP);
	CHECK_EQ(t.total, CORE_MAX_TOTAL_MCAST_QP_ATTACH);
	CHECK(sorted(&t));
	mgid_of(3, m);
	CHECK_EQ(core_mg_attach(&t, m, 1), -ENOMEM); /* group 8193 */
	CHECK(core_mg_find(&t, m) == NULL);
	mgid_of(0, m);
	CHECK_EQ(core_mg_detach(&t, m, 0), 0);
	CHECK_EQ(core_mg_attach(&t, m, 1000), 0); /* room in that group again */
	core_mg_free(&t);
}

/* Random attach / detach against a model: present[k][q]. */
#define K 40
#define Q 12
static void random_ops(void)
{
	uint64_t seed = check_seed(12345);
	srandom((unsigned)seed);
	struct core_mgroups t = {0};
	static bool present[K][Q];
	memset(present, 0, sizeof(present));
	uint8_t m[16];
	int mismatches = 0;
	for (int step = 0; step < 20000; step++) {
		uint32_t k = (uint32_t)random() % K, q = (uint32_t)random() % Q;
		mgid_of(k * 104729u, m);
		int members = 0;
		for (int i = 0; i < Q; i++)
			members += present[k][i];
		if (random() % 2) {
			int want = present[k][q] ? 0 : members == 0 ? 1 : 0;
			mismatches += core_mg_attach(&t, m, q) != want;
			present[k][q] = true;
		} else {
			int want = !present[k][q] ? -EINVAL : members == 1 ? 1 : 0;
			mismatches += core_mg_detach(&t, m, q) != want;
			present[k][q] = false;
		}
		const struct core_mgroup *g = core_mg_find(&t, m);
		members = 0;
		for (int i = 0; i < Q; i++)
			members += present[k][i];
		mismatches += (g ? (int)g->nqp : 0) != members;
		for (uint32_t i = 0; g && i < g->nqp; i++)
			mismatches += !present[k][g->qpn[i]];
	}
	CHECK_EQ(mismatches, 0);
	CHECK(sorted(&t));
	/* A QP's groups, one by one, as core_qp_detach takes them. */
	for (uint32_t q = 0; q < Q; q++) {
		int n = 0;
		while (core_mg_first_of(&t, q, m) == 0 && n <= K) {
			CHECK(core_mg_detach(&t, m, q) >= 0);
			n++;
		}
		int want = 0;
		for (int k = 0; k < K; k++)
			want += present[k][q];
		CHECK_EQ(n, want);
	}
	CHECK_EQ(t.n, 0);
	CHECK_EQ(t.total, 0);
	core_mg_free(&t);
}

int main(void)
{
	rules();
	limits();
	random_ops();
	return check_exit();
}
