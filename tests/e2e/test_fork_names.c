/* A fork's child without exec drops the parent's local and multicast sockets (issue 12): before,
 * it kept copies of them, so
 *  - an iWARP slot's name (softrdma-iw-<slot>, core/iw_rdv.c) of a process that ended without
 *    closing its device kept answering while the child lived: the slot counted as taken (the
 *    next process got another) and the other processes kept passing it connections for that
 *    slot's QPs, which nobody took;
 *  - a multicast group socket the parent left stayed joined (and in the parent's epoll set).
 * Now the child holds /dev/null under those numbers (io/forkdrop.h). Runs in a run directory
 * of its own (SOFTRDMA_RUN_DIR), on iwarp_lo and on 127.0.0.1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
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
#include "io/mcast.h"
#include "io/rundir.h"
#include "vutil.h"

static char dir[] = "/tmp/softrdma-test-fork-names-XXXXXX";

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/* An iWARP RC QP on iwarp_lo (its creation takes the process's slot); returns its slot. */
static int make_qp(struct ibv_context **ctxp)
{
	struct ibv_context *ctx = ibv_open_device(vt_find_dev("iwarp_lo"));
	if (!ctx)
		return -1;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr qia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &qia) : NULL;
	if (!qp)
		return -1;
	*ctxp = ctx;
	return (int)(qp->qp_num >> 16 & 0xFF);
}

static bool name_answers(int slot)
{
	char name[32];
	struct sockaddr_un sa;
	socklen_t len;
	snprintf(name, sizeof(name), "softrdma-iw-%d", slot);
	REQUIRE(rundir_sockaddr(name, &sa, &len) == 0);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	REQUIRE(fd >= 0);
	bool ok = connect(fd, (struct sockaddr *)&sa, len) == 0;
	close(fd);
	return ok;
}

/* A process takes a slot, forks a child that stays, and ends without closing anything. */
static void test_iw_slot(void)
{
	int pfd[2], cfd[2]; /* the helper's slot; its child's pid, once past the fork */
	REQUIRE(pipe(pfd) == 0 && pipe(cfd) == 0);
	pid_t helper = fork();
	REQUIRE(helper >= 0);
	if (helper == 0) {
		struct ibv_context *ctx;
		int slot = make_qp(&ctx);
		pid_t stay = slot < 0 ? -1 : fork();
		if (stay == 0) { /* the child: says it runs, then only waits */
			int me = (int)getpid();
			if (write(cfd[1], &me, sizeof(me)) != (ssize_t)sizeof(me))
				_exit(3);
			for (;;)
				pause();
		}
		if (write(pfd[1], &slot, sizeof(slot)) != (ssize_t)sizeof(slot))
			_exit(3);
		_exit(0); /* no ibv_close_device: as a crash */
	}
	int msg[2] = {-1, -1};
	REQUIRE(read(pfd[0], &msg[0], sizeof(int)) == (ssize_t)sizeof(int));
	REQUIRE(msg[0] > 0 && read(cfd[0], &msg[1], sizeof(int)) == (ssize_t)sizeof(int));
	waitpid(helper, NULL, 0);
	REQUIRE(msg[1] > 0);
	int slot = msg[0];
	pid_t stay = msg[1];
	/* The child lives on; the slot's name must not answer. */
	CHECK(!name_answers(slot));
	/* and the slot is free again: the next process gets the lowest free one, this one */
	struct ibv_context *ctx = NULL;
	CHECK_EQ(make_qp(&ctx), slot);
	CHECK(name_answers(slot));
	kill(stay, SIGKILL);
	waitpid(stay, NULL, 0);
	close(pfd[0]);
	close(pfd[1]);
	close(cfd[0]);
	close(cfd[1]);
}

static bool is_socket(int fd)
{
	struct stat sb;
	return fstat(fd, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

/* The socket descriptors of this process, as a bitmap of the first 1024. */
static void sockets(uint8_t map[128])
{
	memset(map, 0, 128);
	DIR *d = opendir("/proc/self/fd");
	REQUIRE(d);
	for (struct dirent *e; (e = readdir(d));) {
		int fd = atoi(e->d_name);
		if (e->d_name[0] != '.' && fd < 1024 && fd != dirfd(d) && is_socket(fd))
			map[fd / 8] |= (uint8_t)(1u << (fd % 8));
	}
	closedir(d);
}

/* A group joined, then a fork: the child's copy of the group socket is gone. */
static void test_mcast(void)
{
	struct io_mcast_config cfg = {.ifindex = 1, .port = 47911};
	struct io_mcast *m = NULL;
	uint8_t before[128], after[128], group[16] = {0};
	group[10] = group[11] = 0xFF;
	inet_pton(AF_INET, "239.77.1.2", group + 12);
	REQUIRE(io_mcast_open(&cfg, &m) == 0);
	sockets(before);
	int err = io_mcast_join(m, group);
	if (err) {
		fprintf(stderr, "no multicast on lo here (%s): not tried\n", strerror(-err));
		io_mcast_close(m);
		return;
	}
	sockets(after);
	int gfd = -1;
	for (int fd = 0; fd < 1024; fd++)
		if ((after[fd / 8] & ~before[fd / 8]) & (1u << (fd % 8)))
			gfd = fd;
	REQUIRE(gfd >= 0);
	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0)
		_exit(is_socket(gfd) ? 1 : 0);
	int st = 0;
	waitpid(child, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the child holds no group socket */
	CHECK(is_socket(gfd));			      /* the parent still does */
	io_mcast_leave(m, group);
	CHECK(!is_socket(gfd));
	io_mcast_close(m);
}

int main(void)
{
	REQUIRE(mkdtemp(dir) != NULL);
	atexit(cleanup);
	setenv(RUNDIR_ENV, dir, 1);
	test_iw_slot();
	test_mcast();
	return check_exit();
}
