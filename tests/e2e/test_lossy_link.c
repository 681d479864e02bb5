/* src/tools/lossy_link.c: the user-space lossy link between two network namespaces.
 *   - loss 0: 2000 UDP datagrams from a child in side 1 to a child in side 0, all byte-exact;
 *   - loss 10 %: the drops within 6 sigma of the binomial mean, the counters agree with what
 *     arrived; lossy_link_set_loss() changes the rate between two bursts of one session;
 *   - TCP: 8 MiB at 3 % loss arrive intact (FNV-1a), with drops counted;
 *   - figures (printed, loosely checked): TCP goodput at loss 0 and UDP round trips across the
 *     link against lo;
 *   - softrdma bw over RoCE and iWARP across the link at 0 % and 1 % loss (exit 0, a figure);
 *   - destroy deletes both namespaces; create deletes a stale one named after a dead pid.
 * Needs root, /dev/net/tun and `ip` (exit 77 otherwise). All traffic stays inside namespaces
 * created here. Every child has a deadline and dies with the test (PR_SET_PDEATHSIG); the link is
 * destroyed on every exit. Seeded: SOFTRDMA_SEED=N replays the drop pattern. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "tools/lossy_link.h"

#define NDGRAM	  2000
#define TCP_BYTES (8u << 20)
#define CHILD_S	  30 /* seconds any child may live */

static struct lossy_link *g_link;
static pid_t g_parent;
static pid_t g_kids[32];
static int g_nkids;
static uint64_t g_seed;

/* ---- process plumbing ---- */

static void cleanup(void)
{
	if (getpid() != g_parent)
		return; /* a child must never tear down the parent's link */
	for (int i = 0; i < g_nkids; i++) {
		if (g_kids[i] > 0) {
			kill(g_kids[i], SIGKILL);
			waitpid(g_kids[i], NULL, 0);
		}
	}
	g_nkids = 0;
	lossy_link_destroy(g_link);
	g_link = NULL;
}

/* Not async-signal-safe (destroy runs `ip`), but the alternative is leaving the namespaces to the
 * next run's stale sweep; the test is the only thread running code at that point except the
 * forwarder, which destroy stops first. */
static void on_signal(int sig)
{
	static const char msg[] = "test_lossy_link: stopped by a signal (deadline?), cleaning up\n";
	if (write(2, msg, sizeof(msg) - 1) < 0) {
		/* nothing more to say */
	}
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef int (*child_fn)(void *arg);

/* Forks a child that enters side's namespace and runs fn (its return is the exit status). */
static pid_t spawn(int side, child_fn fn, void *arg)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != g_parent)
			_exit(97); /* the parent died before prctl */
		signal(SIGALRM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		alarm(CHILD_S); /* survives exec: the softrdma children are bounded too */
		if (lossy_link_enter(g_link, side) != 0)
			_exit(98);
		_exit(fn(arg));
	}
	REQUIRE(g_nkids < (int)(sizeof(g_kids) / sizeof(g_kids[0])));
	g_kids[g_nkids++] = pid;
	return pid;
}

/* The child's exit status, 128+signal if killed, or -1 if it outlived timeout_ms (then killed). */
static int reap(pid_t pid, int timeout_ms)
{
	int status = 0;
	double end = now_s() + timeout_ms / 1000.0;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			break;
		if (now_s() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			status = -1;
			break;
		}
		usleep(2000);
	}
	for (int i = 0; i < g_nkids; i++)
		if (g_kids[i] == pid)
			g_kids[i] = 0;
	if (status == -1)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reads exactly len bytes from fd within timeout_ms; 0 or -1. */
static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	size_t got = 0;
	double end = now_s() + timeout_ms / 1000.0;
	while (got < len) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int left = (int)((end - now_s()) * 1000);
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		ssize_t n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static struct sockaddr_in sin_of(const char *addr, uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, addr, &sa.sin_addr);
	return sa;
}

static bool ns_exists(const char *name)
{
	char path[128];
	struct stat sb;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	return stat(path, &sb) == 0;
}

/* Runs `ip args...` in the test's namespace; its exit status or -1. */
static int ip(const char *a1, const char *a2, const char *a3)
{
	pid_t pid = fork();
	if (pid == 0) {
		execlp("ip", "ip", a1, a2, a3, (char *)NULL);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- counters ---- */

static struct lossy_link_stats stats(void)
{
	struct lossy_link_stats st;
	lossy_link_get_stats(g_link, &st);
	return st;
}

/* Waits until direction dir has disposed of `want` more packets than in base (forwarded, dropped
 * or failed): the forwarder runs behind the sender. */
static struct lossy_link_stats settle(const struct lossy_link_stats *base, int dir, uint64_t want)
{
	struct lossy_link_stats st;
	double end = now_s() + 5;
	do {
		st = stats();
		if (st.fwd[dir] + st.dropped[dir] + st.errors[dir] + st.queue_dropped[dir] -
			(base->fwd[dir] + base->dropped[dir] + base->errors[dir] +
			 base->queue_dropped[dir]) >=
		    want)
			break;
		usleep(1000);
	} while (now_s() < end);
	return st;
}

static void print_stats(const char *what)
{
	struct lossy_link_stats st = stats();
	printf("  link %s: a->b fwd %" PRIu64 " drop %" PRIu64 " err %" PRIu64 " qdrop %" PRIu64
	       " | b->a fwd %" PRIu64 " drop %" PRIu64 " err %" PRIu64 " qdrop %" PRIu64 "\n",
	       what, st.fwd[0], st.dropped[0], st.errors[0], st.queue_dropped[0], st.fwd[1],
	       st.dropped[1], st.errors[1], st.queue_dropped[1]);
}

/* ---- UDP: datagrams whose length and bytes follow from their sequence number ---- */

#define UDP_PORT 5000

static size_t dgram_len(uint32_t seq)
{
	return 8 + (seq * 37u + (uint32_t)g_seed) % 1400u;
}

static uint8_t dgram_byte(uint32_t seq, size_t i)
{
	return (uint8_t)(seq * 31u + i * 7u + (g_seed >> 8));
}

struct udp_rx {
	int ready_w, stop_r, result_w;
	uint32_t split; /* result.below counts the datagrams with seq < split */
};

struct udp_result {
	uint32_t got, bad, dup, below;
};

static int udp_receiver(void *p)
{
	const struct udp_rx *a = p;
	struct udp_result r = {0};
	static uint8_t seen[65536], buf[2048];
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int big = 16 << 20;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(UDP_PORT)};
	/* Large enough for a whole burst: a socket overflow would look like link loss. */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return 2;
	if (write(a->ready_w, "r", 1) != 1)
		return 3;
	for (;;) {
		struct pollfd pf[2] = {{.fd = fd, .events = POLLIN},
				       {.fd = a->stop_r, .events = POLLIN}};
		if (poll(pf, 2, 10000) <= 0)
			return 4;
		bool stop = pf[1].revents != 0;
		for (;;) { /* drain: after a stop only what is already queued */
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n < 0)
				break;
			uint32_t seq;
			memcpy(&seq, buf, 4);
			bool ok = n >= 8 && seq < sizeof(seen) && (size_t)n == dgram_len(seq);
			for (size_t i = 8; ok && i < (size_t)n; i++)
				ok = buf[i] == dgram_byte(seq, i);
			if (!ok) {
				r.bad++;
				continue;
			}
			if (seen[seq]++) {
				r.dup++;
				continue;
			}
			r.got++;
			r.below += seq < a->split;
		}
		if (stop)
			break;
	}
	return write_full(a->result_w, &r, sizeof(r)) == 0 ? 0 : 5;
}

struct udp_tx {
	uint32_t first, count;
};

static int udp_sender(void *p)
{
	const struct udp_tx *a = p;
	uint8_t buf[2048];
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = sin_of(lossy_link_addr(g_link, 0), UDP_PORT);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return 2;
	for (uint32_t seq = a->first; seq < a->first + a->count; seq++) {
		size_t len = dgram_len(seq);
		memcpy(buf, &seq, 4);
		memset(buf + 4, 0, 4);
		for (size_t i = 8; i < len; i++)
			buf[i] = dgram_byte(seq, i);
		if (send(fd, buf, len, 0) != (ssize_t)len)
			return 3;
		if (seq % 64 == 63)
			usleep(200); /* a little pacing: the test is about drops, not queueing */
	}
	return 0;
}

/* One receiver session in side 0; for each burst b, the loss is set to loss[b], then a child in
 * side 1 sends count[b] datagrams, and the packets the link dropped in that burst go to
 * dropped[b]. Returns what the receiver saw. */
static struct udp_result udp_session(int nburst, const double *loss, const uint32_t *count,
				     uint64_t *dropped, uint64_t *forwarded)
{
	int ready[2], stop[2], res[2];
	struct udp_result r = {0};
	REQUIRE(pipe2(ready, O_CLOEXEC) == 0 && pipe2(stop, O_CLOEXEC) == 0 &&
		pipe2(res, O_CLOEXEC) == 0);
	struct udp_rx rx = {
	    .ready_w = ready[1], .stop_r = stop[0], .result_w = res[1], .split = count[0]};
	pid_t rpid = spawn(0, udp_receiver, &rx);
	char c;
	REQUIRE(read_full(ready[0], &c, 1, 5000) == 0);
	uint32_t first = 0;
	*forwarded = 0;
	for (int b = 0; b < nburst; b++) {
		CHECK_EQ(lossy_link_set_loss(g_link, loss[b]), 0);
		struct lossy_link_stats base = stats();
		struct udp_tx tx = {.first = first, .count = count[b]};
		CHECK_EQ(reap(spawn(1, udp_sender, &tx), 20000), 0);
		struct lossy_link_stats st = settle(&base, 1, count[b]);
		dropped[b] = st.dropped[1] - base.dropped[1];
		*forwarded += st.fwd[1] - base.fwd[1];
		CHECK_EQ(st.errors[1] - base.errors[1], 0);
		CHECK_EQ(st.queue_dropped[1] - base.queue_dropped[1], 0);
		CHECK_EQ(st.fwd[1] - base.fwd[1] + dropped[b], count[b]);
		first += count[b];
	}
	REQUIRE(write(stop[1], "s", 1) == 1);
	CHECK_EQ(read_full(res[0], &r, sizeof(r), 5000), 0);
	CHECK_EQ(reap(rpid, 5000), 0);
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(stop[i]);
		close(res[i]);
	}
	return r;
}

/* |x - n p| within 6 binomial standard deviations. */
static bool binomial_ok(uint64_t x, uint64_t n, double p)
{
	double mean = (double)n * p, sd = __builtin_sqrt((double)n * p * (1 - p));
	double d = (double)x - mean;
	return (d < 0 ? -d : d) <= 6 * sd + 1;
}

static void test_udp_exact(void)
{
	double loss[] = {0};
	uint32_t count[] = {NDGRAM};
	uint64_t dropped[1], fwd;
	struct udp_result r = udp_session(1, loss, count, dropped, &fwd);
	printf("udp loss 0: sent %u, arrived %u (bad %u dup %u), dropped %" PRIu64 "\n", NDGRAM,
	       r.got, r.bad, r.dup, dropped[0]);
	CHECK_EQ(r.got, NDGRAM);
	CHECK_EQ(r.bad, 0);
	CHECK_EQ(r.dup, 0);
	CHECK_EQ(dropped[0], 0);
	CHECK_EQ(fwd, NDGRAM);
}

static void test_udp_loss(void)
{
	double loss[] = {0.10};
	uint32_t count[] = {NDGRAM};
	uint64_t dropped[1], fwd;
	struct udp_result r = udp_session(1, loss, count, dropped, &fwd);
	printf("udp loss 10%%: sent %u, arrived %u, dropped %" PRIu64 " (expected %u +- %.0f)\n",
	       NDGRAM, r.got, dropped[0], NDGRAM / 10, 6 * __builtin_sqrt(NDGRAM * 0.09));
	CHECK(binomial_ok(dropped[0], NDGRAM, 0.10));
	CHECK_EQ(r.got, fwd); /* what arrived is what the link says it forwarded */
	CHECK_EQ(r.got + dropped[0], NDGRAM);
	CHECK_EQ(r.bad, 0);
}

static void test_set_loss(void)
{
	double loss[] = {0, 0.5};
	uint32_t count[] = {1000, 1000};
	uint64_t dropped[2], fwd;
	struct udp_result r = udp_session(2, loss, count, dropped, &fwd);
	printf("set_loss mid-run: burst 1 at 0 %% dropped %" PRIu64 ", burst 2 at 50 %% dropped "
	       "%" PRIu64 "; arrived %u (%u of burst 1)\n",
	       dropped[0], dropped[1], r.got, r.below);
	CHECK_EQ(dropped[0], 0);
	CHECK_EQ(r.below, 1000);
	CHECK(binomial_ok(dropped[1], 1000, 0.5));
	CHECK_EQ(r.got, fwd);
	CHECK_EQ(lossy_link_set_loss(g_link, 1.5), -EINVAL);
	CHECK_EQ(lossy_link_set_loss(g_link, -0.1), -EINVAL);
	CHECK_EQ(lossy_link_set_loss(g_link, 0), 0);
}

/* ---- TCP ---- */

#define TCP_PORT 5001

static uint8_t *g_pattern; /* TCP_BYTES of seeded bytes, shared with the children by fork */

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

struct tcp_arg {
	int ready_w, result_w;
	unsigned reps; /* the sender sends the pattern this many times */
};

struct tcp_result {
	uint64_t bytes, hash;
};

static int tcp_receiver(void *p)
{
	const struct tcp_arg *a = p;
	struct tcp_result r = {.hash = 0xcbf29ce484222325ull};
	static uint8_t buf[1 << 16];
	int one = 1, ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(TCP_PORT)};
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(ls, 1) != 0)
		return 2;
	if (write(a->ready_w, "r", 1) != 1)
		return 3;
	int fd = accept(ls, NULL, NULL); /* bounded by the child's alarm */
	if (fd < 0)
		return 4;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 5;
		if (n == 0)
			break;
		r.hash = fnv1a(r.hash, buf, (size_t)n);
		r.bytes += (uint64_t)n;
	}
	return write_full(a->result_w, &r, sizeof(r)) == 0 ? 0 : 6;
}

static int tcp_sender(void *p)
{
	const struct tcp_arg *a = p;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = sin_of(lossy_link_addr(g_link, 0), TCP_PORT);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return 2;
	for (unsigned i = 0; i < a->reps; i++)
		if (write_full(fd, g_pattern, TCP_BYTES) != 0)
			return 3;
	return close(fd) == 0 ? 0 : 4;
}

/* Sends reps x the pattern from side 1 to side 0 at `loss`; checks it arrived intact and returns
 * the seconds it took, or -1. */
static double tcp_transfer(double loss, unsigned reps, uint64_t *drops)
{
	int ready[2], res[2];
	struct tcp_result r = {0};
	REQUIRE(pipe2(ready, O_CLOEXEC) == 0 && pipe2(res, O_CLOEXEC) == 0);
	struct tcp_arg a = {.ready_w = ready[1], .result_w = res[1], .reps = reps};
	CHECK_EQ(lossy_link_set_loss(g_link, loss), 0);
	struct lossy_link_stats base = stats();
	pid_t rpid = spawn(0, tcp_receiver, &a);
	char c;
	REQUIRE(read_full(ready[0], &c, 1, 5000) == 0);
	double t0 = now_s();
	pid_t spid = spawn(1, tcp_sender, &a);
	int got = read_full(res[0], &r, sizeof(r), 25000);
	double t = now_s() - t0;
	CHECK_EQ(got, 0);
	CHECK_EQ(reap(spid, 5000), 0);
	CHECK_EQ(reap(rpid, 5000), 0);
	uint64_t want = 0xcbf29ce484222325ull;
	for (unsigned i = 0; i < reps; i++)
		want = fnv1a(want, g_pattern, TCP_BYTES);
	CHECK_EQ(r.bytes, (uint64_t)TCP_BYTES * reps);
	CHECK(r.hash == want);
	struct lossy_link_stats st = stats();
	*drops = st.dropped[0] + st.dropped[1] - base.dropped[0] - base.dropped[1];
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(res[i]);
	}
	CHECK_EQ(lossy_link_set_loss(g_link, 0), 0);
	return got == 0 ? t : -1;
}

static void test_tcp(void)
{
	uint64_t drops;
	double t = tcp_transfer(0.03, 1, &drops);
	printf("tcp 8 MiB at 3 %% loss: intact in %.2f s (%.1f MB/s), %" PRIu64
	       " packets dropped (both directions)\n",
	       t, TCP_BYTES / t / 1e6, drops);
	CHECK(drops > 0);
	print_stats("after tcp 3%");

	/* The forwarder's capacity: goodput of one TCP stream at loss 0. */
	t = tcp_transfer(0, 16, &drops);
	printf("tcp 128 MiB at loss 0: %.2f s, %.0f MB/s (%.2f Gb/s) across the link\n", t,
	       16.0 * TCP_BYTES / t / 1e6, 16.0 * TCP_BYTES * 8 / t / 1e9);
	CHECK_EQ(drops, 0);
}

/* ---- latency: UDP ping-pong across the link and on lo ---- */

#define PING_PORT 5002
#define PINGS	  2000

struct ping_arg {
	int ready_w, result_w;
	const char *peer;
};

static int ping_echo(void *p)
{
	const struct ping_arg *a = p;
	uint8_t buf[64];
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(PING_PORT)}, from;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return 2;
	if (write(a->ready_w, "r", 1) != 1)
		return 3;
	for (int i = 0; i < PINGS + 1; i++) { /* the last one says stop */
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
		if (n <= 0)
			return 4;
		if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, fl) != n)
			return 5;
	}
	return 0;
}

static int ping_client(void *p)
{
	const struct ping_arg *a = p;
	uint8_t buf[64] = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = sin_of(a->peer, PING_PORT);
	struct timeval tv = {.tv_sec = 2};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return 2;
	double t0 = now_s();
	for (int i = 0; i < PINGS + 1; i++) {
		if (i == 1)
			t0 = now_s(); /* the first round trip warms the caches up */
		if (send(fd, buf, sizeof(buf), 0) != sizeof(buf) ||
		    recv(fd, buf, sizeof(buf), 0) <= 0)
			return 3;
	}
	double us = (now_s() - t0) / PINGS * 1e6;
	return write_full(a->result_w, &us, sizeof(us)) == 0 ? 0 : 4;
}

/* The mean round trip in microseconds: echo in side 0, client in client_side towards peer. */
static double ping(int client_side, const char *peer)
{
	int ready[2], res[2];
	double us = -1;
	REQUIRE(pipe2(ready, O_CLOEXEC) == 0 && pipe2(res, O_CLOEXEC) == 0);
	struct ping_arg a = {.ready_w = ready[1], .result_w = res[1], .peer = peer};
	pid_t e = spawn(0, ping_echo, &a);
	char c;
	REQUIRE(read_full(ready[0], &c, 1, 5000) == 0);
	pid_t cl = spawn(client_side, ping_client, &a);
	CHECK_EQ(read_full(res[0], &us, sizeof(us), 15000), 0);
	CHECK_EQ(reap(cl, 5000), 0);
	CHECK_EQ(reap(e, 5000), 0);
	for (int i = 0; i < 2; i++) {
		close(ready[i]);
		close(res[i]);
	}
	return us;
}

static void test_latency(void)
{
	double link = ping(1, lossy_link_addr(g_link, 0));
	double lo = ping(0, "127.0.0.1");
	printf("udp 64 B round trip: %.1f us across the link, %.1f us on lo (+%.1f us)\n", link, lo,
	       link - lo);
	CHECK(link > 0 && lo > 0);
}

/* ---- softrdma bw across the link ---- */

struct bw_arg {
	const char *argv[24];
	int out_w;
};

static int run_bw(void *p)
{
	const struct bw_arg *a = p;
	dup2(a->out_w, 1);
	dup2(a->out_w, 2);
	execv(a->argv[0], (char *const *)a->argv);
	return 127;
}

/* The "BW average" column of softrdma bw's result row, or -1. */
static double bw_figure(const char *out)
{
	const char *h = strstr(out, "BW average");
	double bytes, iters, peak, avg;
	if (!h || !(h = strchr(h, '\n')))
		return -1;
	if (sscanf(h + 1, "%lf %lf %lf %lf", &bytes, &iters, &peak, &avg) != 4)
		return -1;
	return avg;
}

static void test_softrdma_bw(void)
{
	static const char *const kinds[] = {"roce", "iwarp"};
	static const double losses[] = {0, 0.01};
	char bin[512], dev[2][64], port[16];
	const char *env = getenv("SOFTRDMA_CLI");
	snprintf(bin, sizeof(bin), "%s", env ? env : SOFTRDMA_BUILD_DIR "/softrdma");
	if (access(bin, X_OK) != 0) {
		printf("softrdma bw: %s is not built\n", bin);
		CHECK(!"the softrdma CLI is built");
		return;
	}
	for (int k = 0; k < 2; k++) {
		for (int li = 0; li < 2; li++) {
			int po[2][2];
			char out[2][8192];
			REQUIRE(pipe2(po[0], O_CLOEXEC) == 0 && pipe2(po[1], O_CLOEXEC) == 0);
			snprintf(port, sizeof(port), "%d", 18515 + k * 2 + li);
			for (int s = 0; s < 2; s++)
				snprintf(dev[s], sizeof(dev[s]), "%s_%s", kinds[k],
					 lossy_link_ifname(g_link, s));
			CHECK_EQ(lossy_link_set_loss(g_link, losses[li]), 0);
			struct lossy_link_stats base = stats();
			struct bw_arg srv = {.argv = {bin, "bw", "-d", dev[0], "-n", "2000", "-s",
						      "65536", "-p", port, "--timeout", "20", NULL},
					     .out_w = po[0][1]};
			struct bw_arg cli = {.argv = {bin, "bw", "-d", dev[1], "-n", "2000", "-s",
						      "65536", "-p", port, "--timeout", "20",
						      lossy_link_addr(g_link, 0), NULL},
					     .out_w = po[1][1]};
			double t0 = now_s();
			pid_t sp = spawn(0, run_bw, &srv);
			pid_t cp = spawn(1, run_bw, &cli);
			int crc = reap(cp, 28000), src = reap(sp, 5000);
			double t = now_s() - t0;
			for (int s = 0; s < 2; s++) {
				close(po[s][1]);
				ssize_t n = read(po[s][0], out[s], sizeof(out[s]) - 1);
				out[s][n > 0 ? n : 0] = '\0';
				close(po[s][0]);
			}
			struct lossy_link_stats st = stats();
			double mib = bw_figure(out[1]);
			printf("softrdma bw %s at %.0f %% loss: client exit %d, server exit %d, "
			       "%.2f MiB/s (2000 x 64 KiB, %.2f s); link dropped %" PRIu64
			       " + %" PRIu64 ", queue drops %" PRIu64 "\n",
			       kinds[k], losses[li] * 100, crc, src, mib, t,
			       st.dropped[0] - base.dropped[0], st.dropped[1] - base.dropped[1],
			       st.queue_dropped[0] + st.queue_dropped[1] - base.queue_dropped[0] -
				   base.queue_dropped[1]);
			CHECK_EQ(crc, 0);
			CHECK_EQ(src, 0);
			CHECK(mib > 0);
			if (li > 0)
				CHECK(st.dropped[0] + st.dropped[1] >
				      base.dropped[0] + base.dropped[1]);
			if (crc != 0 || src != 0 || mib <= 0)
				printf("---- client:\n%s---- server:\n%s----\n", out[1], out[0]);
		}
	}
	CHECK_EQ(lossy_link_set_loss(g_link, 0), 0);
}

/* ---- lifecycle ---- */

static void test_bad_args(void)
{
	struct lossy_link *l = NULL;
	char err[256];
	struct lossy_link_cfg c = {.loss = 1.5};
	CHECK_EQ(lossy_link_create(&l, &c, err, sizeof(err)), -EINVAL);
	c = (struct lossy_link_cfg){.loss = 0, .mtu = 40};
	CHECK_EQ(lossy_link_create(&l, &c, err, sizeof(err)), -EINVAL);
	CHECK(l == NULL);
	CHECK(lossy_link_netns(NULL, 0) == NULL);
	CHECK_EQ(lossy_link_enter(NULL, 0), -EINVAL);
	lossy_link_destroy(NULL);
}

/* A namespace named as if by a process that died is deleted by the next create. */
static void make_stale(char *name, size_t len)
{
	pid_t dead = fork();
	REQUIRE(dead >= 0);
	if (dead == 0)
		_exit(0);
	waitpid(dead, NULL, 0); /* dead and reaped: kill(dead, 0) says ESRCH (unless recycled) */
	snprintf(name, len, "srlink%da", (int)dead);
	CHECK_EQ(ip("netns", "add", name), 0);
	CHECK(ns_exists(name));
}

int main(void)
{
	char why[256], stale[64];
	setvbuf(stdout, NULL, _IOLBF, 0); /* the figures in order with check's stderr */
	g_parent = getpid();
	g_seed = check_seed(20240531);
	if (lossy_link_available(why, sizeof(why)) != 0) {
		printf("SKIP: lossy link unavailable: %s\n", why);
		return 77;
	}
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGALRM, on_signal);
	alarm(110); /* the whole test; ctest's own timeout is longer */
	double t_start = now_s();

	test_bad_args();
	make_stale(stale, sizeof(stale));

	struct lossy_link_cfg cfg = {.loss = 0, .seed = g_seed, .mtu = 1500};
	char err[512];
	int rc = lossy_link_create(&g_link, &cfg, err, sizeof(err));
	if (rc)
		printf("lossy_link_create: %d %s\n", rc, err);
	REQUIRE(rc == 0);
	printf("link: %s %s %s <-> %s %s %s\n", lossy_link_netns(g_link, 0),
	       lossy_link_ifname(g_link, 0), lossy_link_addr(g_link, 0),
	       lossy_link_netns(g_link, 1), lossy_link_ifname(g_link, 1),
	       lossy_link_addr(g_link, 1));
	CHECK(!ns_exists(stale));
	if (ns_exists(stale))
		ip("netns", "delete", stale);
	CHECK(strlen(lossy_link_ifname(g_link, 0)) <= 15);
	CHECK(ns_exists(lossy_link_netns(g_link, 0)) && ns_exists(lossy_link_netns(g_link, 1)));

	g_pattern = malloc(TCP_BYTES);
	REQUIRE(g_pattern);
	uint64_t x = g_seed | 1;
	for (size_t i = 0; i < TCP_BYTES; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		g_pattern[i] = (uint8_t)x;
	}

	double t = now_s();
	test_udp_exact();
	test_udp_loss();
	test_set_loss();
	printf("  (udp: %.2f s)\n", now_s() - t);
	t = now_s();
	test_tcp();
	printf("  (tcp: %.2f s)\n", now_s() - t);
	test_latency();
	t = now_s();
	test_softrdma_bw();
	printf("  (softrdma bw: %.2f s)\n", now_s() - t);
	print_stats("at the end");

	char ns0[32], ns1[32];
	snprintf(ns0, sizeof(ns0), "%s", lossy_link_netns(g_link, 0));
	snprintf(ns1, sizeof(ns1), "%s", lossy_link_netns(g_link, 1));
	lossy_link_destroy(g_link);
	g_link = NULL;
	CHECK(!ns_exists(ns0));
	CHECK(!ns_exists(ns1));
	free(g_pattern);
	printf("total %.2f s\n", now_s() - t_start);
	return check_exit();
}
