/* A fork without exec does not keep the parent's UDP socket in the steering group (issue 12,
 * item 7). Member A opens io_udp on a port and forks a child that only waits; A then closes.
 * Before the fix the child's copy kept A's socket alive in the kernel's reuseport group (and
 * its liveness lock in the registry), so the members that joined next were steered around a
 * socket nobody read: packets for them went missing until the child ended. Now B and D join
 * the same port while the child still lives, and every packet B sends to D's slot reaches D.
 * Also: the child closing the io_udp it inherited leaves the parent's membership alone.
 * The same for TCP (iWARP): a listener the parent closed while a fork's child lives takes no
 * more connections from its SO_REUSEPORT group (all go to the parent's new listener), and a
 * connection the parent closed ends for the peer (EOF), child or not. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "io/io.h"
#include "io/tcp.h"

#define N    200
#define PLEN 48

static char regdir[64];
static uint16_t port;

static struct io_udp *open_member(void)
{
	struct io_udp_config cfg = {.family = AF_INET, .port = port, .registry_dir = regdir};
	cfg.addr[10] = cfg.addr[11] = 0xFF;
	inet_pton(AF_INET, "127.0.0.1", cfg.addr + 12);
	struct io_udp *io = NULL;
	int err = io_udp_open(&cfg, &io);
	if (err)
		fprintf(stderr, "io_udp_open: %s\n", strerror(-err));
	REQUIRE(err == 0);
	return io;
}

static void send_to(struct io_udp *io, uint8_t slot, uint32_t n)
{
	uint8_t b[PLEN] = {0x04, 0, 0xFF, 0xFF};
	b[5] = slot;
	b[6] = (uint8_t)(n >> 8);
	b[7] = (uint8_t)n;
	memcpy(b + 12, &n, sizeof(n));
	struct io_pkt p = {.buf = b, .len = PLEN, .sport = port, .dport = port};
	p.dst[10] = p.dst[11] = 0xFF;
	inet_pton(AF_INET, "127.0.0.1", p.dst + 12);
	CHECK_EQ(io_udp_send(io, &p, 1), 1);
}

/* Receives on io for up to ms; returns how many packets for slot arrived. */
static int receive(struct io_udp *io, uint8_t slot, int ms)
{
	static uint8_t bufs[32][256];
	struct io_pkt pkts[32];
	int got_slot = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = {.fd = io_udp_fd(io), .events = POLLIN};
		poll(&pfd, 1, 5);
		for (int i = 0; i < 32; i++)
			pkts[i] = (struct io_pkt){.buf = bufs[i], .cap = sizeof(bufs[i])};
		int got = io_udp_recv(io, pkts, 32);
		CHECK(got >= 0);
		for (int i = 0; i < got; i++)
			got_slot += pkts[i].buf[5] == slot;
		io_udp_service(io);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return got_slot;
	}
}

/* The child: until the parent writes to fd (or ends). */
static void wait_parent(int fd)
{
	char c;
	if (read(fd, &c, 1) < 0) {
		/* the parent ended */
	}
}

/* Forks; the child (0 returned) has run the fork handlers and holds pipefd[0], which tells
 * it when to end; the parent returns once the child is that far (the handlers run in the
 * child after fork returns there: until then its copies are the parent's). */
static pid_t fork_child_ready(int pipefd[2])
{
	int ready[2];
	REQUIRE(pipe(ready) == 0);
	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(30);
		close(pipefd[1]);
		close(ready[0]);
		if (write(ready[1], "r", 1) != 1)
			_exit(3);
		close(ready[1]);
		return 0;
	}
	close(ready[1]);
	char c;
	REQUIRE(read(ready[0], &c, 1) == 1);
	close(ready[0]);
	return child;
}

static const uint8_t lo4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1};

static void tcp_part(void)
{
	uint16_t tport = (uint16_t)(port + 1);
	struct io_tcp_opts o = {.reuseport = true};
	struct io_tcp_listener *l1, *l2;
	REQUIRE(io_tcp_listen(lo4, tport, 0, &o, &l1) == 0);
	/* A connection the parent will close. */
	struct io_tcp_conn *peer, *mine;
	REQUIRE(io_tcp_connect(NULL, 0, lo4, tport, NULL, &peer) == 0);
	struct pollfd pl = {.fd = io_tcp_listener_fd(l1), .events = POLLIN};
	REQUIRE(poll(&pl, 1, 5000) == 1);
	REQUIRE(io_tcp_accept(l1, &mine, NULL, NULL) == 0);

	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	pid_t child = fork_child_ready(pipefd);
	if (child == 0) {
		wait_parent(pipefd[0]);
		io_tcp_close(mine);
		io_tcp_listener_close(l1);
		_exit(0);
	}
	close(pipefd[0]);
	io_tcp_close(mine);
	io_tcp_listener_close(l1);
	/* The peer sees the end of the stream. */
	struct pollfd pp = {.fd = io_tcp_fd(peer), .events = POLLIN};
	CHECK_EQ(poll(&pp, 1, 2000), 1);
	char b[8];
	CHECK_EQ(read(io_tcp_fd(peer), b, sizeof(b)), 0);
	io_tcp_close(peer);
	/* A new listener in the group takes every connection. */
	REQUIRE(io_tcp_listen(lo4, tport, 0, &o, &l2) == 0);
	struct io_tcp_conn *cs[20];
	for (int i = 0; i < 20; i++)
		REQUIRE(io_tcp_connect(NULL, 0, lo4, tport, NULL, &cs[i]) == 0);
	int accepted = 0;
	for (int tries = 0; tries < 200 && accepted < 20; tries++) {
		struct pollfd p2 = {.fd = io_tcp_listener_fd(l2), .events = POLLIN};
		struct io_tcp_conn *a;
		if (poll(&p2, 1, 10) == 1 && io_tcp_accept(l2, &a, NULL, NULL) == 0) {
			accepted++;
			io_tcp_close(a);
		}
	}
	for (int i = 0; i < 20; i++)
		io_tcp_close(cs[i]);
	printf(
	    "%d of 20 TCP connections reached the parent's listener, with a fork's child alive\n",
	    accepted);
	CHECK_EQ(accepted, 20);
	io_tcp_listener_close(l2);
	close(pipefd[1]);
	int st;
	REQUIRE(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void)
{
	snprintf(regdir, sizeof(regdir), "/tmp/softrdma-test-fork-%d", (int)getpid());
	REQUIRE(mkdir(regdir, 0700) == 0);
	port = (uint16_t)(40000 + getpid() % 20000);

	struct io_udp *a = open_member();
	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	pid_t child = fork_child_ready(pipefd);
	if (child == 0) {
		wait_parent(pipefd[0]);
		/* Closing what the fork inherited touches nothing of the parent's. */
		io_udp_close(a);
		_exit(0);
	}
	close(pipefd[0]);
	io_udp_close(a); /* the child still lives */

	struct io_udp *b = open_member(), *d = open_member();
	uint8_t slot_d = io_udp_slot(d);
	receive(d, slot_d, 50); /* settle: probe rounds */
	receive(b, 0, 50);
	for (uint32_t i = 0; i < N; i++)
		send_to(b, slot_d, i);
	int got = receive(d, slot_d, 500);
	printf("%d of %d packets reached the member they were for, with a fork's child alive\n",
	       got, N);
	CHECK_EQ(got, N);

	/* The child closes its inherited copy and ends: B and D keep their membership. */
	close(pipefd[1]);
	int st;
	REQUIRE(waitpid(child, &st, 0) == child);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	for (uint32_t i = 0; i < N; i++)
		send_to(b, slot_d, i);
	got = receive(d, slot_d, 500);
	CHECK_EQ(got, N);
	struct io_udp_info info;
	io_udp_info(d, &info);
	CHECK_EQ(info.members, 2);
	io_udp_close(b);
	io_udp_close(d);
	CHECK_EQ(rmdir(regdir), 0); /* the last member removed the registry */
	tcp_part();
	return check_exit();
}
