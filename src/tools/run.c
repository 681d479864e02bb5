/* `softrdma run`: starts an unmodified RDMA program on softrdma, by putting softrdma's
 * libibverbs.so.1 and librdmacm.so.1 (the drop-in libraries, abi/) first on the program's
 * library path. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tools.h"
#include "tools/view.h"

static const char *const run_usage =
    "usage: softrdma run [--transport roce|iwarp|auto] [--libdir DIR] [--no-view] [-v] -- "
    "PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM (ibv_rc_pingpong, ib_send_lat, rping, ucx_perftest, mpirun, your own verbs\n"
    "program...) unmodified on softrdma: its libibverbs.so.1 and librdmacm.so.1 are softrdma's,\n"
    "and it sees softrdma's devices in /sys/class/infiniband, /sys/class/infiniband_verbs and\n"
    "/dev/infiniband as the kernel shows RDMA devices (a private view: a mount namespace, and a\n"
    "user namespace without root; where that is not allowed, PROGRAM runs without it).\n"
    "  --transport T   roce or iwarp: the device rdma_cm uses where an address has both\n"
    "                  (SOFTRDMA_TRANSPORT); auto (default): the transport of the device the\n"
    "                  program opened (-d iwarp_lo), else what the peer answers (RoCE if both)\n"
    "  --libdir DIR    where softrdma's libibverbs.so.1 is (default: next to this program,\n"
    "                  in lib/ or ../lib/softrdma/)\n"
    "  --no-view       no device view in /sys and /dev (also: SOFTRDMA_VIEW=0)\n"
    "  -v, --verbose   print the environment given to PROGRAM\n"
    "  -h, --help      this text\n"
    "\n"
    "Example (two terminals, or & for the first):\n"
    "  softrdma run -- ibv_rc_pingpong -d roce_lo -g 0\n"
    "  softrdma run -- ibv_rc_pingpong -d roce_lo -g 0 127.0.0.1\n";

static int has_lib(const char *dir)
{
	char p[PATH_MAX + 32];
	snprintf(p, sizeof(p), "%s/libibverbs.so.1", dir);
	return access(p, R_OK) == 0;
}

/* The directory of our drop-in libraries, or NULL. */
static const char *find_libdir(char *buf, size_t len)
{
	char exe[PATH_MAX - 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = 0;
#ifndef SOFTRDMA_BIN_TO_LIBDIR
#define SOFTRDMA_BIN_TO_LIBDIR "../lib/softrdma"
#endif
	/* The build tree (<build>/lib), then the installed layout (CMakeLists.txt: relative to
	 * the installed CLI, e.g. ../lib/softrdma, or ../lib/<multiarch>/softrdma under /usr). */
	static const char *const rel[] = {"lib", SOFTRDMA_BIN_TO_LIBDIR, "../lib/softrdma"};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%s/%s", exe, rel[i]);
		if (!has_lib(dir))
			continue;
		/* Canonical (no bin/..): it is shown by -v and inherited by the program. */
		if (len >= PATH_MAX && realpath(dir, buf))
			return buf;
		snprintf(buf, len, "%s", dir);
		return buf;
	}
	return NULL;
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {{"transport", required_argument, NULL, 't'},
					     {"libdir", required_argument, NULL, 'L'},
					     {"verbose", no_argument, NULL, 'v'},
					     {"no-view", no_argument, NULL, 'N'},
					     {"help", no_argument, NULL, 'h'},
					     {0}};
	const char *transport = NULL, *libdir = NULL;
	const char *view_env = getenv("SOFTRDMA_VIEW");
	int verbose = 0, view = !(view_env && !strcmp(view_env, "0")), c;
	/* "+": stop at the first non-option, the program. */
	while ((c = getopt_long(argc, argv, "+t:L:vh", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			transport = optarg;
			break;
		case 'L':
			libdir = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'N':
			view = 0;
			break;
		case 'h':
			fputs(run_usage, stdout);
			return 0;
		default:
			fputs(run_usage, stderr);
			return 2;
		}
	}
	if (transport && strcmp(transport, "roce") && strcmp(transport, "iwarp") &&
	    strcmp(transport, "auto")) {
		fprintf(stderr, "softrdma run: --transport must be roce, iwarp or auto, not '%s'\n",
			transport);
		return 2;
	}
	if (optind >= argc) {
		fprintf(stderr, "softrdma run: no program given\n\n%s", run_usage);
		return 2;
	}
	char found[PATH_MAX];
	if (!libdir)
		libdir = find_libdir(found, sizeof(found));
	if (!libdir || !has_lib(libdir)) {
		fprintf(stderr,
			"softrdma run: softrdma's libibverbs.so.1 not found%s%s (build it: cmake "
			"--build build; or give --libdir)\n",
			libdir ? " in " : "", libdir ? libdir : "");
		return 1;
	}
	char path[PATH_MAX * 2];
	const char *old = getenv("LD_LIBRARY_PATH");
	snprintf(path, sizeof(path), "%s%s%s", libdir, old && *old ? ":" : "", old ? old : "");
	/* --transport auto: whatever the environment says goes too. */
	bool auto_tr = transport && !strcmp(transport, "auto");
	if (setenv("LD_LIBRARY_PATH", path, 1) ||
	    (transport && !auto_tr && setenv("SOFTRDMA_TRANSPORT", transport, 1)) ||
	    (auto_tr && unsetenv("SOFTRDMA_TRANSPORT"))) {
		perror("softrdma run: setenv");
		return 1;
	}
	if (view) {
		char why[320];
		int r = view_enter(why, sizeof(why));
		if (r == 0 && verbose)
			fprintf(stderr, "softrdma run: device view in /sys/class and /dev\n");
		else if (r == -EEXIST && verbose)
			fprintf(stderr, "softrdma run: in a device view already\n");
		else if (r < 0 && r != -EEXIST)
			fprintf(
			    stderr,
			    "softrdma run: warning: no device view in /sys/class/infiniband (%s); "
			    "%s runs without it (--no-view: do not try)\n",
			    why, argv[optind]);
	}
	const char *tr = getenv("SOFTRDMA_TRANSPORT");
	if (verbose)
		fprintf(stderr, "softrdma run: LD_LIBRARY_PATH=%s SOFTRDMA_TRANSPORT=%s %s\n", path,
			tr ? tr : "(auto)", argv[optind]);
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "softrdma run: cannot run %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
