/* io_tcp on loopback (127.0.0.1 and ::1 only): listen / connect / accept with addresses and
 * ports, socket options, readiness through the fd, data both ways with scatter / gather, bulk
 * transfer through a small send buffer (partial writes, EAGAIN), a refused connect, a peer reset
 * (SO_LINGER 0), an orderly close (half-close), the MSS query, argument errors, counters.
 * Every socket is closed at the end: the process's fd count is checked. Bounded by poll
 * timeouts (a few seconds at worst). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nobody.h"
#include "io/tcp.h"
#include "wire/iwarp/iwarp.h"

#define WAIT_MS 3000

static uint64_t seed, rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void addr4(uint8_t *a, const char *s)
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xFF;
	REQUIRE(inet_pton(AF_INET, s, a + 12) == 1);
}

static void addr6(uint8_t *a, const char *s)
{
	REQUIRE(inet_pton(AF_INET6, s, a) == 1);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	REQUIRE(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static bool wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};

	return poll(&p, 1, ms) == 1;
}

static uint64_t cnt(const struct io_tcp_conn *c, enum io_tcp_counter k)
{
	uint64_t v[IO_TCP_NCOUNTERS];

	io_tcp_counters(c, v);
	return v[k];
}

static uint64_t lcnt(const struct io_tcp_listener *l, enum io_tcp_counter k)
{
	uint64_t v[IO_TCP_NCOUNTERS];

	io_tcp_listener_counters(l, v);
	return v[k];
}

/* A connected pair through a listener on addr. Returns false (nothing open) if the address
 * family is not available here (IPv6 disabled). */
static bool make_pair(const uint8_t *addr, const struct io_tcp_opts *lo,
		      const struct io_tcp_opts *co, struct io_tcp_conn **cli,
		      struct io_tcp_conn **srv)
{
	struct io_tcp_listener *l;
	uint8_t peer[16];
	uint16_t pport, lport;
	int r = io_tcp_listen(addr, 0, 0, lo, &l);

	if (r == -EAFNOSUPPORT || r == -EADDRNOTAVAIL)
		return false;
	REQUIRE(r == 0);
	REQUIRE(io_tcp_connect(NULL, 0, addr, io_tcp_listener_port(l), co, cli) == 0);
	REQUIRE(wait_fd(io_tcp_listener_fd(l), POLLIN, WAIT_MS));
	REQUIRE(io_tcp_accept(l, srv, peer, &pport) == 0);
	REQUIRE(wait_fd(io_tcp_fd(*cli), POLLOUT, WAIT_MS));
	CHECK_EQ(io_tcp_connect_done(*cli), 0);
	CHECK_EQ(io_tcp_connect_done(*srv), 0);
	CHECK_MEM(peer, addr, 16);
	REQUIRE(io_tcp_local(*cli, NULL, &lport) == 0);
	CHECK_EQ(pport, lport);
	io_tcp_listener_close(l);
	return true;
}

static void test_basic(const uint8_t *addr, const char *name)
{
	struct io_tcp_listener *l;
	struct io_tcp_conn *c, *s, *none = NULL;
	uint8_t got[16], buf[64];
	uint16_t port, gport;
	int one = -1, ka = -1, mss;
	socklen_t sl = sizeof(int);
	int r = io_tcp_listen(addr, 0, 0, NULL, &l);

	if (r == -EAFNOSUPPORT || r == -EADDRNOTAVAIL) {
		fprintf(stderr, "%s: not available here (%d), skipped\n", name, r);
		return;
	}
	REQUIRE(r == 0);
	port = io_tcp_listener_port(l);
	CHECK(port != 0); /* the ephemeral port is reported */
	/* nothing pending yet */
	CHECK_EQ(io_tcp_accept(l, &none, NULL, NULL), -EAGAIN);
	CHECK(none == NULL);
	CHECK_EQ(lcnt(l, IO_TCP_C_accept_eagain), 1);
	CHECK(!wait_fd(io_tcp_listener_fd(l), POLLIN, 0));
	/* the same port again: taken (SO_REUSEADDR does not share a listening port) */
	{
		struct io_tcp_listener *l2;

		CHECK_EQ(io_tcp_listen(addr, port, 0, NULL, &l2), -EADDRINUSE);
		/* who holds it, for the error message: this user */
		CHECK_EQ(io_tcp_port_holder(addr, port), (long)geteuid());
	}
	REQUIRE(io_tcp_connect(NULL, 0, addr, port, NULL, &c) == 0);
	CHECK_EQ(cnt(c, IO_TCP_C_connects), 1);
	REQUIRE(wait_fd(io_tcp_listener_fd(l), POLLIN, WAIT_MS));
	REQUIRE(io_tcp_accept(l, &s, got, &gport) == 0);
	CHECK_EQ(lcnt(l, IO_TCP_C_accepts), 1);
	CHECK_MEM(got, addr, 16);
	REQUIRE(wait_fd(io_tcp_fd(c), POLLOUT, WAIT_MS));
	CHECK_EQ(io_tcp_connect_done(c), 0);
	{
		uint8_t la[16], pa[16];
		uint16_t lp, pp;

		CHECK_EQ(io_tcp_local(c, la, &lp), 0);
		CHECK_EQ(io_tcp_peer(c, pa, &pp), 0);
		CHECK_MEM(la, addr, 16);
		CHECK_MEM(pa, addr, 16);
		CHECK_EQ(pp, port);
		CHECK_EQ(lp, gport);
		CHECK_EQ(io_tcp_local(s, la, &lp), 0);
		CHECK_EQ(lp, port);
	}
	/* options: TCP_NODELAY on, keepalive off, on both ends */
	CHECK_EQ(getsockopt(io_tcp_fd(c), IPPROTO_TCP, TCP_NODELAY, &one, &sl), 0);
	CHECK_EQ(one, 1);
	CHECK_EQ(getsockopt(io_tcp_fd(s), IPPROTO_TCP, TCP_NODELAY, &one, &sl), 0);
	CHECK_EQ(one, 1);
	CHECK_EQ(getsockopt(io_tcp_fd(s), SOL_SOCKET, SO_KEEPALIVE, &ka, &sl), 0);
	CHECK_EQ(ka, 0);
	/* MSS, for FPDU sizing */
	mss = io_tcp_mss(c);
	CHECK(mss >= 536 && mss <= 65535);
	CHECK(iw_mulpdu((uint32_t)mss) > 0);
	CHECK(io_tcp_mss(s) > 0);
	fprintf(stderr, "%s: port %u, MSS %d, MULPDU %u\n", name, port, mss,
		iw_mulpdu((uint32_t)mss));
	{
		int rb = 0, sb = 0;

		CHECK_EQ(io_tcp_bufsizes(c, &rb, &sb), 0);
		CHECK(rb > 0 && sb > 0);
	}

	/* readiness through the fd, data both ways */
	CHECK(!wait_fd(io_tcp_fd(s), POLLIN, 0));
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(io_tcp_send(c, "hello", 5), 5);
	REQUIRE(wait_fd(io_tcp_fd(s), POLLIN, WAIT_MS));
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), 5);
	CHECK_MEM(buf, "hello", 5);
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), -EAGAIN);
	{
		struct iovec out[3] = {{(void *)"abc", 3}, {(void *)"", 0}, {(void *)"defgh", 5}};
		uint8_t a[2], b[10];
		struct iovec in[2] = {{a, sizeof(a)}, {b, sizeof(b)}};

		CHECK_EQ(io_tcp_sendv(s, out, 3), 8);
		REQUIRE(wait_fd(io_tcp_fd(c), POLLIN, WAIT_MS));
		CHECK_EQ(io_tcp_recvv(c, in, 2), 8);
		CHECK_MEM(a, "ab", 2);
		CHECK_MEM(b, "cdefgh", 6);
	}
	CHECK_EQ(cnt(c, IO_TCP_C_tx_bytes), 5);
	CHECK_EQ(cnt(c, IO_TCP_C_rx_bytes), 8);
	CHECK_EQ(cnt(s, IO_TCP_C_rx_eagain), 2);

	/* orderly close of one direction: the peer reads everything, then -ESHUTDOWN, and can
	 * still send (half-close) */
	CHECK_EQ(io_tcp_send(c, "last", 4), 4);
	CHECK_EQ(io_tcp_shutdown(c), 0);
	CHECK_EQ(io_tcp_send(c, "x", 1), -EPIPE);
	REQUIRE(wait_fd(io_tcp_fd(s), POLLIN, WAIT_MS));
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), 4);
	CHECK_MEM(buf, "last", 4);
	REQUIRE(wait_fd(io_tcp_fd(s), POLLIN, WAIT_MS));
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), -ESHUTDOWN);
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), -ESHUTDOWN); /* sticky */
	CHECK_EQ(cnt(s, IO_TCP_C_rx_eof), 1);
	CHECK_EQ(io_tcp_send(s, "bye", 3), 3);
	REQUIRE(wait_fd(io_tcp_fd(c), POLLIN, WAIT_MS));
	CHECK_EQ(io_tcp_recv(c, buf, sizeof(buf)), 3);
	io_tcp_close(s);
	REQUIRE(wait_fd(io_tcp_fd(c), POLLIN, WAIT_MS));
	CHECK_EQ(io_tcp_recv(c, buf, sizeof(buf)), -ESHUTDOWN);
	io_tcp_close(c);
	io_tcp_listener_close(l);
}

/* Bulk both ways at once through 4 KiB socket buffers: writes are partial and hit EAGAIN;
 * the receiver reads into randomly sized destinations; every byte arrives in order. */
/* Small sends are gathered into one buffer (up to IO_TCP_GATHER_MAX bytes), larger ones go
 * by sendmsg: either way the bytes arrive whole and in order, pieces of every size. */
static void test_gather(const uint8_t *addr)
{
	struct io_tcp_conn *c, *s;

	REQUIRE(make_pair(addr, NULL, NULL, &c, &s));
	for (size_t total = IO_TCP_GATHER_MAX - 1; total <= IO_TCP_GATHER_MAX + 1; total++) {
		uint8_t out[IO_TCP_GATHER_MAX + 1], in[IO_TCP_GATHER_MAX + 8];
		struct iovec iov[40];
		int n = 0;

		for (size_t i = 0; i < total; i++)
			out[i] = (uint8_t)(i * 7 + total);
		/* pieces of 1, 2, ... bytes, the last one what is left */
		for (size_t at = 0, len = 1; at < total; at += len, len++) {
			if (len > total - at)
				len = total - at;
			iov[n++] = (struct iovec){out + at, len};
		}
		REQUIRE(n <= 40);
		CHECK_EQ(io_tcp_sendv(c, iov, n), (ssize_t)total);
		size_t got = 0;
		while (got < total) {
			REQUIRE(wait_fd(io_tcp_fd(s), POLLIN, WAIT_MS));
			ssize_t r = io_tcp_recv(s, in + got, sizeof(in) - got);
			REQUIRE(r > 0);
			got += (size_t)r;
		}
		CHECK_EQ(got, total);
		CHECK_MEM(in, out, total);
	}
	CHECK_EQ(cnt(c, IO_TCP_C_tx_bytes), 3 * IO_TCP_GATHER_MAX);
	io_tcp_close(c);
	io_tcp_close(s);
}

static void test_bulk(const uint8_t *addr)
{
	enum { LEN = 2 << 20 };
	struct io_tcp_opts small = {.rcvbuf = 4096, .sndbuf = 4096};
	struct io_tcp_conn *end[2];
	static uint8_t out[2][LEN], in[2][LEN];
	size_t sent[2] = {0, 0}, got[2] = {0, 0};
	struct timespec t0, t1;

	if (!make_pair(addr, &small, &small, &end[0], &end[1]))
		return;
	for (int d = 0; d < 2; d++)
		for (size_t k = 0; k < LEN; k++)
			out[d][k] = (uint8_t)(rnd() >> 24);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got[0] < LEN || got[1] < LEN) {
		struct pollfd p[2];

		for (int d = 0; d < 2; d++) {
			p[d].fd = io_tcp_fd(end[d]);
			p[d].events = (short)(POLLIN | (sent[d] < LEN ? POLLOUT : 0));
		}
		REQUIRE(poll(p, 2, WAIT_MS) > 0);
		for (int d = 0; d < 2; d++) {
			if (sent[d] < LEN) { /* offer 64 KiB in two pieces */
				size_t n = LEN - sent[d] < 65536 ? LEN - sent[d] : 65536;
				struct iovec iov[2] = {{out[d] + sent[d], n / 2},
						       {out[d] + sent[d] + n / 2, n - n / 2}};
				ssize_t r = io_tcp_sendv(end[d], iov, 2);

				REQUIRE(r > 0 || r == -EAGAIN);
				if (r > 0)
					sent[d] += (size_t)r;
			}
			/* end[d] receives what end[!d] sent */
			size_t want = 1 + rnd() % 20000;
			int o = !d;

			if (want > LEN - got[o])
				want = LEN - got[o];
			if (want) {
				ssize_t r = io_tcp_recv(end[d], in[o] + got[o], want);

				REQUIRE(r > 0 || r == -EAGAIN);
				if (r > 0)
					got[o] += (size_t)r;
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_MEM(in[0], out[0], LEN);
	CHECK_MEM(in[1], out[1], LEN);
	for (int d = 0; d < 2; d++) {
		CHECK_EQ(cnt(end[d], IO_TCP_C_tx_bytes), LEN);
		CHECK_EQ(cnt(end[d], IO_TCP_C_rx_bytes), LEN);
		CHECK(cnt(end[d], IO_TCP_C_tx_partial) + cnt(end[d], IO_TCP_C_tx_eagain) > 0);
		fprintf(stderr, "bulk end %d: %llu send calls, %llu partial, %llu EAGAIN\n", d,
			(unsigned long long)cnt(end[d], IO_TCP_C_tx_calls),
			(unsigned long long)cnt(end[d], IO_TCP_C_tx_partial),
			(unsigned long long)cnt(end[d], IO_TCP_C_tx_eagain));
	}
	fprintf(stderr, "bulk: 2 x %d bytes in %.0f ms\n", LEN,
		(double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	io_tcp_close(end[0]);
	io_tcp_close(end[1]);
}

static void test_refused(const uint8_t *addr)
{
	struct io_tcp_listener *l;
	struct io_tcp_conn *c;
	uint16_t port;
	int r;

	/* a port nobody listens on: take an ephemeral one and give it back */
	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, &l) == 0);
	port = io_tcp_listener_port(l);
	io_tcp_listener_close(l);
	r = io_tcp_connect(NULL, 0, addr, port, NULL, &c);
	if (r == -ECONNREFUSED) { /* reported at once: nothing was created */
		CHECK(1);
		return;
	}
	REQUIRE(r == 0);
	REQUIRE(wait_fd(io_tcp_fd(c), POLLOUT, WAIT_MS));
	CHECK_EQ(io_tcp_connect_done(c), -ECONNREFUSED);
	CHECK_EQ(io_tcp_connect_done(c), -ECONNREFUSED); /* sticky */
	CHECK_EQ(cnt(c, IO_TCP_C_connect_refused), 1);
	CHECK(io_tcp_send(c, "x", 1) < 0);
	io_tcp_close(c);
}

static void test_reset(const uint8_t *addr)
{
	struct io_tcp_conn *c, *s;
	uint8_t buf[16];
	ssize_t r;

	if (!make_pair(addr, NULL, NULL, &c, &s))
		return;
	io_tcp_abort(c); /* SO_LINGER 0: RST */
	REQUIRE(wait_fd(io_tcp_fd(s), POLLIN, WAIT_MS));
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), -ECONNRESET);
	CHECK_EQ(io_tcp_recv(s, buf, sizeof(buf)), -ECONNRESET); /* sticky, not "EOF" */
	CHECK_EQ(cnt(s, IO_TCP_C_rx_resets), 1);
	r = io_tcp_send(s, "x", 1);
	CHECK(r == -EPIPE || r == -ECONNRESET);
	CHECK_EQ(cnt(s, IO_TCP_C_tx_resets), 1);
	io_tcp_close(s);
}

static void test_bind_local(const uint8_t *addr)
{
	struct io_tcp_listener *l, *tmp;
	struct io_tcp_conn *c, *s;
	uint16_t lport, got;

	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, &l) == 0);
	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, &tmp) == 0);
	lport = io_tcp_listener_port(tmp);
	io_tcp_listener_close(tmp);
	/* bound to the rdma_cm-style local address and port before connecting */
	REQUIRE(io_tcp_connect(addr, lport, addr, io_tcp_listener_port(l), NULL, &c) == 0);
	REQUIRE(wait_fd(io_tcp_listener_fd(l), POLLIN, WAIT_MS));
	REQUIRE(io_tcp_accept(l, &s, NULL, &got) == 0);
	CHECK_EQ(got, lport);
	REQUIRE(wait_fd(io_tcp_fd(c), POLLOUT, WAIT_MS));
	CHECK_EQ(io_tcp_connect_done(c), 0);
	io_tcp_close(c);
	io_tcp_close(s);
	io_tcp_listener_close(l);
}

static void test_args(void)
{
	uint8_t a[16], a6[16];
	struct io_tcp_listener *l;
	struct io_tcp_conn *c;
	uint8_t buf[4];

	addr4(a, "127.0.0.1");
	addr6(a6, "::1");
	CHECK_EQ(io_tcp_listen(NULL, 0, 0, NULL, &l), -EINVAL);
	CHECK_EQ(io_tcp_listen(a, 0, 0, NULL, NULL), -EINVAL);
	CHECK_EQ(io_tcp_connect(NULL, 0, a, 0, NULL, &c), -EINVAL); /* port 0 */
	CHECK_EQ(io_tcp_connect(a6, 0, a, 1, NULL, &c), -EINVAL);   /* mixed families */
	CHECK_EQ(io_tcp_connect(NULL, 0, NULL, 1, NULL, &c), -EINVAL);
	CHECK_EQ(io_tcp_accept(NULL, &c, NULL, NULL), -EINVAL);
	CHECK_EQ(io_tcp_recv(NULL, buf, 1), -EINVAL);
	CHECK_EQ(io_tcp_sendv(NULL, NULL, 0), -EINVAL);
	CHECK_EQ(io_tcp_connect_done(NULL), -EINVAL);
	io_tcp_close(NULL);
	io_tcp_abort(NULL);
	io_tcp_listener_close(NULL);
	CHECK(strcmp(io_tcp_counter_name(IO_TCP_C_tx_partial), "tx_partial") == 0);
	CHECK(io_tcp_counter_desc(IO_TCP_C_rx_eof) != NULL);
	CHECK(io_tcp_counter_name(IO_TCP_NCOUNTERS) == NULL);
	/* on a live connection */
	{
		struct io_tcp_conn *s;

		REQUIRE(make_pair(a, NULL, NULL, &c, &s));
		CHECK_EQ(io_tcp_recv(c, buf, 0), -EINVAL);
		CHECK_EQ(io_tcp_recv(c, NULL, 1), -EINVAL);
		CHECK_EQ(io_tcp_sendv(c, NULL, 0), 0);
		CHECK_EQ(io_tcp_sendv(c, NULL, 1), -EINVAL);
		CHECK_EQ(io_tcp_send(c, buf, 0), 0);
		io_tcp_close(c);
		io_tcp_close(s);
	}
}

/* Another user's listener (a child as nobody; needs root): named by its uid, and a listen of
 * ours on that port (SO_REUSEPORT, as the iWARP rendezvous) refused. No listener: -ENOENT,
 * connections that ended (TIME_WAIT) or not. */
static void test_holder(const uint8_t *addr)
{
	struct io_tcp_listener *l, *l2;
	struct io_tcp_conn *c, *s;
	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, &l) == 0);
	uint16_t port = io_tcp_listener_port(l);
	REQUIRE(io_tcp_connect(NULL, 0, addr, port, NULL, &c) == 0);
	REQUIRE(wait_fd(io_tcp_listener_fd(l), POLLIN, WAIT_MS));
	REQUIRE(io_tcp_accept(l, &s, NULL, NULL) == 0);
	io_tcp_listener_close(l);
	io_tcp_close(s); /* the side that closes first keeps a TIME_WAIT entry */
	io_tcp_close(c);
	CHECK_EQ(io_tcp_port_holder(addr, port), -ENOENT);
	if (!nobody_can("the other user's port"))
		return;
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid_t child = nobody_fork();
	if (child == 0) {
		struct io_tcp_opts o = {.reuseport = true};
		uint16_t p = 0;
		if (io_tcp_listen(addr, 0, 0, &o, &l) == 0)
			p = io_tcp_listener_port(l);
		if (write(pfd[1], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(3);
		pause();
		_exit(0);
	}
	uint16_t p = 0;
	REQUIRE(read(pfd[0], &p, sizeof(p)) == (ssize_t)sizeof(p) && p != 0);
	CHECK_EQ(io_tcp_port_holder(addr, p), 65534);
	struct io_tcp_opts o = {.reuseport = true};
	CHECK_EQ(io_tcp_listen(addr, p, 0, &o, &l2), -EADDRINUSE);
	nobody_end(child);
	close(pfd[0]);
	close(pfd[1]);
}

int main(void)
{
	uint8_t v4[16], v6[16];
	int fds = count_fds();

	seed = check_seed(7);
	rng = seed | 1;
	addr4(v4, "127.0.0.1");
	addr6(v6, "::1");
	test_args();
	test_basic(v4, "127.0.0.1");
	test_basic(v6, "::1");
	test_gather(v4);
	test_bulk(v4);
	test_bulk(v6);
	test_refused(v4);
	test_reset(v4);
	test_reset(v6);
	test_bind_local(v4);
	test_holder(v4);
	test_holder(v6);
	CHECK_EQ(count_fds(), fds); /* every socket closed */
	return check_exit();
}
