/* A fork without exec does not keep the parent's UDP socket in the steering group (issue 12,
 * item 7). Member A opens io_udp on a port and forks a child that only waits; A then closes.
 * Before the fix the child's copy kept A's socket alive in the kernel's reuseport group (and
 * its liveness lock in the registry), so the members that joined next were steered around a
 * socket nobody read: packets for them went missing until the child ended. Now B and D join
 * the same port while the child still lives, and every packet B sends to D's slot reaches D.
 * Also: the child closing the io_udp it inherited leaves the parent's membership alone. */
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

int main(void)
{
	snprintf(regdir, sizeof(regdir), "/tmp/softrdma-test-fork-%d", (int)getpid());
	REQUIRE(mkdir(regdir, 0700) == 0);
	port = (uint16_t)(40000 + getpid() % 20000);

	struct io_udp *a = open_member();
	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	pid_t child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(30);
		close(pipefd[1]);
		char c;
		if (read(pipefd[0], &c, 1) < 0) {
			/* the parent ended */
		}
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
	return check_exit();
}
