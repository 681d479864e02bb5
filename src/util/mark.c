/* Marking's settings (mark.h). */
#include "util/mark.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* An environment variable holding a whole number in [0, max] (absent or empty: dflt), or -1
 * with a message: a mistyped setting fails rather than being ignored. */
static int env_uint(const char *name, unsigned long max, unsigned long dflt)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return (int)dflt;
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (!isdigit((unsigned char)v[0]) || errno || *end || x > max) {
		fprintf(stderr, "softrdma: %s=%s is not a whole number from 0 to %lu\n", name, v,
			max);
		return -1;
	}
	return (int)x;
}

int mark_config(uint8_t *dscp, bool *ecn)
{
	int d = env_uint("SOFTRDMA_DSCP", 63, MARK_DSCP_DEFAULT);
	int e = env_uint("SOFTRDMA_ECN", 1, 0);
	*dscp = (uint8_t)(d < 0 ? MARK_DSCP_DEFAULT : d);
	*ecn = e == 1;
	return d < 0 || e < 0 ? -EINVAL : 0;
}
