/* Marking (util/mark.h): the TOS byte of every traffic class against its rule (the DSCP, or
 * the default for DSCP 0; ECT(0) with ECN on, else the class's own ECN bits), the priority of
 * every TOS byte (the class selector, at most 6), and the settings read from the environment:
 * defaults, good values, and every kind of bad one refused with the defaults kept. */
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "util/mark.h"

static void test_tos(void)
{
	for (int tc = 0; tc < 256; tc++) {
		for (int dscp = 0; dscp < 64; dscp += 13) {
			for (int ecn = 0; ecn < 2; ecn++) {
				uint8_t tos = mark_tos((uint8_t)dscp, ecn, (uint8_t)tc);
				int want_dscp = tc >> 2 ? tc >> 2 : dscp;
				int want_ecn = ecn ? MARK_ECT0 : tc & 3;
				CHECK_EQ(tos >> 2, want_dscp);
				CHECK_EQ(tos & 3, want_ecn);
			}
		}
	}
	/* The common deployment: traffic class 0 on a default device leaves as AF31. */
	CHECK_EQ(mark_tos(MARK_DSCP_DEFAULT, false, 0), 0x68);
	CHECK_EQ(mark_tos(MARK_DSCP_DEFAULT, true, 0), 0x6A);
	CHECK_EQ(mark_tos(MARK_DSCP_DEFAULT, false, 184), 184); /* EF stays EF */
}

static void test_priority(void)
{
	for (int tos = 0; tos < 256; tos++) {
		int p = tos >> 5;
		CHECK_EQ(mark_priority((uint8_t)tos), p < 6 ? p : 6);
	}
	CHECK_EQ(mark_priority(0x68), 3); /* DSCP 26 -> PCP 3 through an identity egress map */
	CHECK_EQ(mark_priority(0xE0), 6); /* CS7 would need CAP_NET_ADMIN */
}

/* mark_config with SOFTRDMA_DSCP / SOFTRDMA_ECN as given (NULL: unset). */
static int config(const char *dscp, const char *ecn, uint8_t *d, bool *e)
{
	if (dscp)
		setenv("SOFTRDMA_DSCP", dscp, 1);
	else
		unsetenv("SOFTRDMA_DSCP");
	if (ecn)
		setenv("SOFTRDMA_ECN", ecn, 1);
	else
		unsetenv("SOFTRDMA_ECN");
	*d = 99;
	*e = true;
	return mark_config(d, e);
}

static void test_config(void)
{
	static const char *const bad_dscp[] = {
	    "64", "-1", "26x", " 26", "0x1a", "99999999999999999999", "+5"};
	static const char *const bad_ecn[] = {"2", "yes", "on", "-0", "1 "};
	uint8_t d;
	bool e;

	CHECK_EQ(config(NULL, NULL, &d, &e), 0);
	CHECK_EQ(d, MARK_DSCP_DEFAULT);
	CHECK(!e);
	CHECK_EQ(config("", "", &d, &e), 0); /* empty: as unset */
	CHECK_EQ(d, MARK_DSCP_DEFAULT);
	CHECK(!e);
	CHECK_EQ(config("0", "1", &d, &e), 0);
	CHECK_EQ(d, 0);
	CHECK(e);
	CHECK_EQ(config("63", "0", &d, &e), 0);
	CHECK_EQ(d, 63);
	CHECK(!e);
	fprintf(stderr, "(the messages below are expected)\n");
	for (size_t i = 0; i < sizeof(bad_dscp) / sizeof(bad_dscp[0]); i++) {
		CHECK_EQ(config(bad_dscp[i], "1", &d, &e), -EINVAL);
		CHECK_EQ(d, MARK_DSCP_DEFAULT);
	}
	for (size_t i = 0; i < sizeof(bad_ecn) / sizeof(bad_ecn[0]); i++) {
		CHECK_EQ(config("10", bad_ecn[i], &d, &e), -EINVAL);
		CHECK_EQ(d, 10);
		CHECK(!e);
	}
	unsetenv("SOFTRDMA_DSCP");
	unsetenv("SOFTRDMA_ECN");
}

int main(void)
{
	test_tos();
	test_priority();
	test_config();
	return check_exit();
}
