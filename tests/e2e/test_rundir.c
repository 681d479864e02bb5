/* Local names private to one user (io/rundir.h): the run directory's checks (owner, mode,
 * links, length), names per network namespace, a dead process's name taken over and a live
 * one's refused, the sweep, and (as root) another user who can neither take our names nor
 * send to them, and whose own names do not collide with ours (the service-ID endpoints of
 * rdma_cm listeners on one port, iWARP slots). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nobody.h"
#include "core/gsi.h"
#include "io/rundir.h"

static char top[] = "/tmp/softrdma-test-rundir-XXXXXX";
static char mine[128], other[128];

static void cleanup(void)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", top);
}

static int dgram(void)
{
	return socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
}

static bool exists(const char *path)
{
	struct stat sb;
	return lstat(path, &sb) == 0;
}

/* The directory: created 0700, ours; refused when someone else's, writable by others, a link
 * or too long; tightened when only readable by others. */
static void test_directory(void)
{
	char buf[108], path[160];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/new", top);
	setenv(RUNDIR_ENV, path, 1);
	CHECK_EQ(rundir_path(buf, sizeof(buf)), 0);
	CHECK_EQ(strcmp(buf, path), 0);
	REQUIRE(stat(path, &sb) == 0);
	CHECK(S_ISDIR(sb.st_mode));
	CHECK_EQ(sb.st_mode & 0777, 0700);
	CHECK_EQ(sb.st_uid, geteuid());

	snprintf(path, sizeof(path), "%s/open", top);
	REQUIRE(mkdir(path, 0700) == 0 && chmod(path, 0777) == 0);
	setenv(RUNDIR_ENV, path, 1);
	CHECK_EQ(rundir_path(buf, sizeof(buf)), -EPERM);
	REQUIRE(chmod(path, 0755) == 0);
	CHECK_EQ(rundir_path(buf, sizeof(buf)), 0);
	REQUIRE(stat(path, &sb) == 0);
	CHECK_EQ(sb.st_mode & 0777, 0700);

	char link[160];
	snprintf(link, sizeof(link), "%s/link", top);
	REQUIRE(symlink(path, link) == 0);
	setenv(RUNDIR_ENV, link, 1);
	CHECK(rundir_path(buf, sizeof(buf)) < 0);

	char lng[200];
	memset(lng, 'x', sizeof(lng) - 1);
	lng[0] = '/';
	lng[sizeof(lng) - 1] = '\0';
	setenv(RUNDIR_ENV, lng, 1);
	CHECK_EQ(rundir_path(buf, sizeof(buf)), -ENAMETOOLONG);

	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s/theirs", top);
		REQUIRE(mkdir(path, 0700) == 0 && chown(path, NOBODY_UID, NOBODY_UID) == 0);
		setenv(RUNDIR_ENV, path, 1);
		CHECK_EQ(rundir_path(buf, sizeof(buf)), -EPERM);
		int fd = dgram();
		CHECK_EQ(rundir_bind(fd, "softrdma-iw-1"), -EPERM);
		close(fd);
	}

	/* The default: /dev/shm/softrdma-<euid> (or /tmp). */
	unsetenv(RUNDIR_ENV);
	CHECK_EQ(rundir_path(buf, sizeof(buf)), 0);
	char want[64];
	snprintf(want, sizeof(want), "/softrdma-%u", (unsigned)geteuid());
	CHECK(strlen(buf) > strlen(want) && !strcmp(buf + strlen(buf) - strlen(want), want));
	REQUIRE(stat(buf, &sb) == 0);
	CHECK_EQ(sb.st_mode & 0777, 0700);
	CHECK_EQ(sb.st_uid, geteuid());
}

/* A name per network namespace, bound once; a dead process's name is taken over, a live one's
 * refused; close removes it; the sweep removes the dead only. */
static void test_names(void)
{
	struct sockaddr_un sa;
	socklen_t len;
	struct stat sb;
	char want[64];

	setenv(RUNDIR_ENV, mine, 1);
	CHECK_EQ(rundir_sockaddr("t-a", &sa, &len), 0);
	REQUIRE(stat("/proc/self/ns/net", &sb) == 0);
	snprintf(want, sizeof(want), "/n%llu-t-a", (unsigned long long)sb.st_ino);
	CHECK(strncmp(sa.sun_path, mine, strlen(mine)) == 0);
	CHECK(strcmp(sa.sun_path + strlen(mine), want) == 0);

	int a = dgram(), b = dgram();
	CHECK_EQ(rundir_bind(a, "t-a"), 0);
	CHECK_EQ(rundir_bind(b, "t-a"), -EADDRINUSE); /* live */
	CHECK(exists(sa.sun_path));
	rundir_close(a);
	CHECK(!exists(sa.sun_path));
	CHECK_EQ(rundir_bind(b, "t-a"), 0);
	rundir_close(b);

	/* Names left by processes that died: one taken over by bind, the other by the sweep; a
	 * live process's name survives both. */
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid_t dead = fork(), live;
	REQUIRE(dead >= 0);
	if (dead == 0) {
		int x = dgram(), y = dgram();
		_exit(rundir_bind(x, "t-dead1") || rundir_bind(y, "t-dead2") ? 3 : 0);
	}
	int st = 0;
	waitpid(dead, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	live = fork();
	REQUIRE(live >= 0);
	if (live == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int x = dgram();
		char ok = rundir_bind(x, "t-live") == 0 ? 1 : 0;
		if (write(pfd[1], &ok, 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	char ok = 0;
	REQUIRE(read(pfd[0], &ok, 1) == 1 && ok == 1);
	struct sockaddr_un d1, d2, lv;
	REQUIRE(rundir_sockaddr("t-dead1", &d1, &len) == 0 &&
		rundir_sockaddr("t-dead2", &d2, &len) == 0 &&
		rundir_sockaddr("t-live", &lv, &len) == 0);
	CHECK(exists(d1.sun_path) && exists(d2.sun_path) && exists(lv.sun_path));
	a = dgram();
	CHECK_EQ(rundir_bind(a, "t-dead1"), 0);
	CHECK_EQ(rundir_bind(dgram(), "t-live"), -EADDRINUSE);
	rundir_sweep();
	CHECK(exists(d1.sun_path)); /* ours now, alive */
	CHECK(!exists(d2.sun_path));
	CHECK(exists(lv.sun_path));
	rundir_close(a);
	/* a dead name of a namespace that is gone (inode 1 here), and a file that is not a
	 * socket: the first swept, the second left alone */
	struct sockaddr_un gone = {.sun_family = AF_UNIX}, plain;
	snprintf(gone.sun_path, sizeof(gone.sun_path), "%s/n1-softrdma-iw-9", mine);
	plain = gone;
	snprintf(plain.sun_path, sizeof(plain.sun_path), "%s/n1-notes", mine);
	int g = dgram();
	REQUIRE(bind(g, (struct sockaddr *)&gone, sizeof(gone)) == 0);
	close(g);
	FILE *f = fopen(plain.sun_path, "w");
	REQUIRE(f != NULL);
	fclose(f);
	rundir_sweep();
	CHECK(!exists(gone.sun_path));
	CHECK(exists(plain.sun_path));
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	rundir_sweep();
	CHECK(!exists(lv.sun_path));
	close(pfd[0]);
	close(pfd[1]);
}

/* As root: a second user (nobody) with a directory of its own. It cannot bind or send to our
 * names, and its names do not collide with ours. Before, the names were abstract: nobody's
 * bind of "softrdma-iw-1" made ours fail (EADDRINUSE) and what we sent there reached it. */
static void test_other_user(void)
{
	if (!nobody_can("the other user"))
		return;
	REQUIRE(mkdir(other, 0700) == 0 && chown(other, NOBODY_UID, NOBODY_UID) == 0);
	setenv(RUNDIR_ENV, mine, 1);
	int ours = dgram();
	REQUIRE(rundir_bind(ours, "softrdma-iw-1") == 0);
	struct sockaddr_un sa;
	socklen_t len;
	REQUIRE(rundir_sockaddr("softrdma-iw-1", &sa, &len) == 0);

	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid_t child = nobody_fork();
	if (child == 0) {
		char r[5];
		int x = dgram(), y = dgram(), z = dgram();
		/* the old abstract name of the listener we open next: squatted */
		struct sockaddr_un ab = {.sun_family = AF_UNIX};
		const char *old = "softrdma-cm-sid-0000000001064791";
		memcpy(ab.sun_path + 1, old, strlen(old));
		r[4] =
		    bind(z, (struct sockaddr *)&ab,
			 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(old))) ==
		    0;
		/* our name, by its path: no way in */
		r[0] = bind(x, (struct sockaddr *)&sa, len) != 0 && errno == EACCES;
		r[1] = sendto(y, "steal", 5, 0, (struct sockaddr *)&sa, len) < 0 && errno == EACCES;
		/* its own names, the same as ours: its own directory */
		setenv(RUNDIR_ENV, other, 1);
		r[2] = rundir_bind(dgram(), "softrdma-iw-1") == 0;
		r[3] = gsi_ep_open_sid(0x0000000001064791ull) >= 0;
		if (write(pfd[1], r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(3);
		pause();
		_exit(0);
	}
	char r[5] = {0};
	REQUIRE(read(pfd[0], r, sizeof(r)) == (ssize_t)sizeof(r));
	REQUIRE(r[4]);
	/* our listener on that port, while nobody holds the old name and its own */
	int sid = gsi_ep_open_sid(0x0000000001064791ull);
	CHECK(sid >= 0);
	nobody_end(child);
	CHECK(r[0]); /* bind refused */
	CHECK(r[1]); /* send refused */
	CHECK(r[2]); /* its iWARP slot 1 beside ours */
	CHECK(r[3]); /* its listener on the same port beside ours */
	char buf[8];
	CHECK(recv(ours, buf, sizeof(buf), MSG_DONTWAIT) < 0); /* nothing reached us */
	rundir_close(ours);
	gsi_ep_close(sid);
	close(pfd[0]);
	close(pfd[1]);
}

int main(void)
{
	REQUIRE(mkdtemp(top) != NULL);
	atexit(cleanup);
	snprintf(mine, sizeof(mine), "%s/mine", top);
	snprintf(other, sizeof(other), "%s/other", top);
	/* nobody must reach its own directory below ours */
	REQUIRE(chmod(top, 0711) == 0);
	test_directory();
	test_names();
	test_other_user();
	return check_exit();
}
