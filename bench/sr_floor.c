/* sr_floor: the raw-socket streams softrdma's bandwidth, message rate and CPU figures are
 * stated against (bench/run.sh), reported the way sr_perf reports them.
 *
 *   server: sr_floor [-p 18800]                       (receives; one test, then exits)
 *   client: sr_floor -P udp|tcp [-p 18800] [-m bytes] [-g segment] [-D secs] SERVER_IPv4
 *
 * The client sends for -D seconds (default 2) and the server receives; a TCP side channel on
 * port -p carries the parameters to the server and its results back. The client prints
 *   "floor proto=.. size=.. gso=.. secs=.. gbps=.. msgs_per_sec=.. cpu_cli_s=.. cpu_srv_s=..
 *    cpu_us_per_64k=.. sent_mb=.. recv_mb=.."
 * gbps and msgs_per_sec are what the server received (payload bytes, messages of -m bytes),
 * from its first byte to its last; CPU is user + system time of each process over the test,
 * both sides together per 64 KiB received.
 *
 * udp: one send() of -m bytes per message (at most 65507), the server receiving with recv();
 *      with -g SEG the sends carry UDP_SEGMENT=SEG (GSO: the kernel cuts each send into
 *      datagrams of SEG bytes) and the server turns UDP_GRO on (the kernel hands it trains of
 *      datagrams in one recv). UDP drops what the receiver cannot take: received counts.
 * tcp: a TCP stream (TCP_NODELAY) of write()s of -m bytes (default 65536); the server reads
 *      up to 1 MiB at a time.
 *
 * -t wlat: the floor of sr_perf -t wlat (an RDMA WRITE ping-pong whose target never calls the
 *      library: each side's packets are taken by a thread of its own, woken by the kernel,
 *      while the application spins on memory on the same core). Each side runs a thread
 *      blocked in recv() on the UDP or TCP socket, with the short time slice softrdma gives
 *      its progress thread (Linux 6.12 and later), which receives each -m byte message (default
 *      100) straight into the application's buffer and publishes it; the main thread spins until
 *      the message is there and then sends the next one itself (the client's clock runs from its
 *      send to the reply's arrival). -n round trips (default 20000) after a tenth as many
 *      unmeasured; the client prints "floor proto=.. test=wlat size=.. n=.. min=.. p50=.. p99=..
 *      p999=.. avg=.. us". What softrdma adds to this is its own work: the thread wake-ups,
 *      and the core shared with a spinning thread, are the machine's.
 * -t rc: the floor of an RC SEND ping-pong over UDP (sr_perf -t lat on RoCEv2): reliable
 *      connected service needs every message acknowledged, so each side sends, in one
 *      sendmmsg(), the ACK of the peer's last message (RC_ACK bytes: a RoCEv2 ACK's UDP
 *      payload) and its own message of -m bytes plus RC_HDR (BTH and ICRC), and busy-polls
 *      recvmmsg() until both of the peer's have arrived: twice the datagrams of a plain UDP
 *      ping-pong, in the same number of system calls. Reported like wlat ("test=rc"). The
 *      kernel's share of a RoCEv2 round trip; what softrdma adds to it is its own. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/mover.h"
#include "lib/bench.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define RX_BUF (1 << 20)

struct params {
	int32_t tcp, gso;
	int64_t size;
	int32_t wlat, iters;
	int32_t rc;
};

/* What the server measured. */
struct result {
	double bytes, secs, cpu;
};

static void big_buffers(int fd)
{
	int sz = 32 << 20;
	/* FORCE (root) passes net.core.[rw]mem_max; without root the plain ones apply. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

/* Receives until the client's end: EOF (tcp) or a zero-length datagram (udp). */
static struct result receive(int fd)
{
	char *buf = malloc(RX_BUF);
	if (!buf)
		die("memory");
	struct result res = {0};
	double first = 0, last = 0, cpu0 = cpu_s();
	for (;;) {
		ssize_t r = recv(fd, buf, RX_BUF, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("recv");
		if (r == 0)
			break;
		last = now_s();
		if (first == 0)
			first = last; /* the clock starts at the first byte; these do not count */
		else
			res.bytes += (double)r;
	}
	res.secs = last - first;
	res.cpu = cpu_s() - cpu0;
	free(buf);
	return res;
}

/* ---- -t wlat ---- */

struct wl {
	int fd;
	bool tcp;
	size_t size;
	long total;
	uint8_t *mem;	   /* the application's buffer: messages are received into it */
	atomic_long seen;  /* messages received, published to the spinning thread */
	atomic_bool broke; /* the receiver stopped early (peer gone, error) */
};

static bool recv_msg(const struct wl *w)
{
	size_t got = 0;
	while (got < w->size) {
		ssize_t r = recv(w->fd, w->mem + got, w->size - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
		if (!w->tcp)
			return got == w->size; /* one datagram is one message */
	}
	return true;
}

static void *wl_receiver(void *arg)
{
	struct wl *w = arg;
	/* As softrdma sets up its progress thread: its short time slice (its wake-ups preempt
	 * the spinning thread where the kernel allows), its timer slack. */
	mover_thread_setup();
	for (long i = 0; i < w->total; i++) {
		if (!recv_msg(w)) {
			atomic_store(&w->broke, true);
			break;
		}
		atomic_store_explicit(&w->seen, i + 1, memory_order_release);
	}
	return NULL;
}

static void wl_send(const struct wl *w, const uint8_t *buf)
{
	for (size_t off = 0; off < w->size;) {
		ssize_t r = send(w->fd, buf + off, w->size - off, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("send");
		off += (size_t)r;
	}
}

/* Spins until message i has arrived (false if the receiver gave up). */
static bool wl_wait(struct wl *w, long i)
{
	while (atomic_load_explicit(&w->seen, memory_order_acquire) <= i)
		if (atomic_load_explicit(&w->broke, memory_order_relaxed))
			return false;
	return true;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Both sides: iters round trips after a tenth as many unmeasured; the client (rtt != NULL)
 * records each. */
static void wlat_run(int fd, const struct params *p, double *rtt)
{
	long warm = p->iters / 10;
	struct wl w = {.fd = fd, .tcp = p->tcp, .size = (size_t)p->size, .total = p->iters + warm};
	uint8_t *out = calloc(1, w.size);
	w.mem = calloc(1, w.size);
	pthread_t th;
	if (!out || !w.mem)
		die("memory");
	if (pthread_create(&th, NULL, wl_receiver, &w) != 0)
		die("pthread_create");
	for (long i = 0; i < w.total; i++) {
		double t0 = now_us();
		if (!rtt && !wl_wait(&w, i))
			die("the peer stopped");
		out[w.size - 1] = (uint8_t)(i % 255 + 1);
		wl_send(&w, out);
		if (rtt && !wl_wait(&w, i))
			die("the peer stopped");
		if (rtt && i >= warm)
			rtt[i - warm] = now_us() - t0;
	}
	pthread_join(th, NULL);
	free(out);
	free(w.mem);
}

static void print_rtt(const struct params *p, double *rtt)
{
	long n = p->iters;
	double sum = 0;
	for (long i = 0; i < n; i++)
		sum += rtt[i];
	qsort(rtt, (size_t)n, sizeof(*rtt), cmp_double);
	printf("floor proto=%s test=%s size=%lld n=%ld min=%.2f p50=%.2f p99=%.2f p999=%.2f "
	       "avg=%.2f us\n",
	       p->tcp ? "tcp" : "udp", p->rc ? "rc" : "wlat", (long long)p->size, n, rtt[0],
	       rtt[n / 2], rtt[n * 99 / 100], rtt[n * 999 / 1000], sum / (double)n);
}

/* ---- -t rc ---- */

#define RC_HDR	   16	      /* a SEND's BTH (12) and ICRC (4) */
#define RC_ACK	   20	      /* an ACK: BTH, AETH (4), ICRC */
#define RC_DGRAM   65536      /* receive buffer per datagram */
#define RC_SILENCE 10000000.0 /* us: the peer has gone quiet */

/* Busy-polls until the peer's two datagrams of this round (its ACK, its message) are in. */
static void rc_wait(int fd, struct mmsghdr *m)
{
	unsigned got = 0;
	double since = 0;
	for (unsigned spins = 0; got < 2; spins++) {
		int r = recvmmsg(fd, m + got, 2 - got, MSG_DONTWAIT, NULL);
		if (r > 0) {
			got += (unsigned)r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			die("recvmmsg");
		if ((spins & 4095) == 0) {
			double t = now_us();
			if (since == 0)
				since = t;
			else if (t - since > RC_SILENCE)
				die("the peer went quiet (a datagram lost?)");
		}
	}
}

/* Both sides: iters round trips after a tenth as many unmeasured; the client (rtt != NULL)
 * sends first and records each. */
static void rc_run(int fd, const struct params *p, double *rtt)
{
	long warm = p->iters / 10, total = p->iters + warm;
	size_t msg = (size_t)p->size + RC_HDR;
	uint8_t *out = calloc(1, msg + RC_ACK), *in = malloc(2 * RC_DGRAM);
	if (!out || !in)
		die("memory");
	struct iovec oi[2] = {{out + msg, RC_ACK}, {out, msg}};
	struct iovec ii[2] = {{in, RC_DGRAM}, {in + RC_DGRAM, RC_DGRAM}};
	struct mmsghdr om[2], im[2];
	memset(om, 0, sizeof(om));
	memset(im, 0, sizeof(im));
	for (int i = 0; i < 2; i++) {
		om[i].msg_hdr.msg_iov = &oi[i];
		om[i].msg_hdr.msg_iovlen = 1;
		im[i].msg_hdr.msg_iov = &ii[i];
		im[i].msg_hdr.msg_iovlen = 1;
	}
	for (long i = 0; i < total; i++) {
		double t0 = now_us();
		if (!rtt)
			rc_wait(fd, im);
		if (sendmmsg(fd, om, 2, 0) != 2)
			die("sendmmsg");
		if (rtt) {
			rc_wait(fd, im);
			if (i >= warm)
				rtt[i - warm] = now_us() - t0;
		}
	}
	free(out);
	free(in);
}

static int listen_on(int port, int type)
{
	int one = 1, fd = socket(AF_INET, type, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
		die("bind");
	if (type == SOCK_STREAM && listen(fd, 2))
		die("listen");
	return fd;
}

static int server(int port)
{
	alarm(300); /* a guard: one test, then exit */
	int ls = listen_on(port, SOCK_STREAM), us = listen_on(port, SOCK_DGRAM), one = 1;
	int side = accept(ls, NULL, NULL);
	struct params p;
	if (side < 0)
		die("accept");
	recv_all(side, &p, sizeof(p));
	int data = us;
	big_buffers(us);
	if (p.tcp) {
		char ok = 'k';
		send_all(side, &ok, 1);
		if ((data = accept(ls, NULL, NULL)) < 0)
			die("accept");
		big_buffers(data);
		if (p.wlat)
			setsockopt(data, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	} else if (p.gso && setsockopt(us, IPPROTO_UDP, UDP_GRO, &one, sizeof(one))) {
		die("UDP_GRO");
	} else if (p.wlat || p.rc) {
		/* The client's hello names its address: the replies go there. */
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		char hello;
		if (recvfrom(us, &hello, 1, 0, (struct sockaddr *)&from, &fl) < 0 ||
		    connect(us, (struct sockaddr *)&from, fl) != 0)
			die("udp hello");
	}
	char ok = 'k';
	send_all(side, &ok, 1);
	if (p.wlat) {
		wlat_run(data, &p, NULL);
	} else if (p.rc) {
		rc_run(data, &p, NULL);
	} else {
		struct result res = receive(data);
		send_all(side, &res, sizeof(res));
	}
	close(side);
	close(ls);
	close(us);
	if (data != us)
		close(data);
	return 0;
}

static int connect_to(const struct sockaddr_in *a, int type)
{
	for (int i = 0; i < 100; i++) {
		int fd = socket(AF_INET, type, 0);
		if (fd >= 0 && connect(fd, (const struct sockaddr *)a, sizeof(*a)) == 0)
			return fd;
		close(fd);
		usleep(50000);
	}
	die("cannot reach the server");
	return -1;
}

static int client(const char *host, int port, const struct params *p, double secs)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "sr_floor: %s is not an IPv4 address\n", host);
		return 2;
	}
	int side = connect_to(&a, SOCK_STREAM), one = 1, data;
	char ok;
	send_all(side, p, sizeof(*p));
	if (p->tcp) {
		recv_all(side, &ok, 1);
		data = connect_to(&a, SOCK_STREAM);
		setsockopt(data, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	} else {
		data = connect_to(&a, SOCK_DGRAM);
		int seg = p->gso;
		if (seg && setsockopt(data, IPPROTO_UDP, UDP_SEGMENT, &seg, sizeof(seg)))
			die("UDP_SEGMENT");
	}
	big_buffers(data);
	if (p->wlat || p->rc) {
		if (p->tcp)
			setsockopt(data, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		else if (send(data, "h", 1, 0) != 1)
			die("udp hello");
		recv_all(side, &ok, 1);
		double *rtt = calloc((size_t)p->iters, sizeof(double));
		if (!rtt)
			die("memory");
		if (p->rc)
			rc_run(data, p, rtt);
		else
			wlat_run(data, p, rtt);
		print_rtt(p, rtt);
		free(rtt);
		close(data);
		close(side);
		return 0;
	}
	recv_all(side, &ok, 1);
	char *buf = malloc((size_t)p->size);
	if (!buf)
		die("memory");
	memset(buf, 0x5a, (size_t)p->size);
	double sent = 0, cpu0 = cpu_s(), t0 = now_s();
	while (now_s() - t0 < secs) {
		for (int i = 0; i < 16; i++) {
			ssize_t r = send(data, buf, (size_t)p->size, 0);
			if (r < 0 && (errno == ENOBUFS || errno == EAGAIN || errno == EINTR ||
				      errno == ECONNREFUSED))
				continue; /* udp: the kernel dropped it; counted as not received */
			if (r < 0)
				die("send");
			sent += (double)r;
		}
	}
	double cpu = cpu_s() - cpu0;
	struct result res;
	if (p->tcp) {
		shutdown(data, SHUT_WR);
		recv_all(side, &res, sizeof(res));
	} else {
		/* The end: zero-length datagrams until the server answers (one may be dropped). */
		struct pollfd pf = {.fd = side, .events = POLLIN};
		do {
			if (send(data, buf, 0, 0) < 0 && errno != ENOBUFS && errno != EAGAIN &&
			    errno != ECONNREFUSED)
				die("send");
		} while (poll(&pf, 1, 20) == 0);
		recv_all(side, &res, sizeof(res));
	}
	double msgs = res.bytes / (double)p->size;
	printf("floor proto=%s size=%lld gso=%d secs=%.3f gbps=%.3f msgs_per_sec=%.0f "
	       "cpu_cli_s=%.3f cpu_srv_s=%.3f cpu_us_per_64k=%.2f sent_mb=%.1f recv_mb=%.1f\n",
	       p->tcp ? "tcp" : "udp", (long long)p->size, p->gso, res.secs,
	       res.secs > 0 ? res.bytes * 8 / res.secs / 1e9 : 0,
	       res.secs > 0 ? msgs / res.secs : 0, cpu, res.cpu,
	       res.bytes > 0 ? (cpu + res.cpu) * 1e6 / (res.bytes / 65536) : 0, sent / 1e6,
	       res.bytes / 1e6);
	free(buf);
	close(data);
	close(side);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sr_floor [-p port]                                          (server)\n"
		"       sr_floor -P udp|tcp [-p port] [-m bytes] [-g segment] [-D secs] SERVER\n"
		"       sr_floor -t wlat -P udp|tcp [-p port] [-m bytes] [-n round trips] SERVER\n"
		"       sr_floor -t rc [-p port] [-m bytes] [-n round trips] SERVER\n"
		"  -P  udp: one send() per message; tcp: a stream of write()s (TCP_NODELAY)\n"
		"  -m  bytes per send (default 65536; udp at most 65507)\n"
		"  -g  udp: UDP_SEGMENT (GSO) with datagrams of this many bytes; the server\n"
		"      receives with UDP_GRO\n"
		"  -D  seconds to send (default 2)\n"
		"  -t  wlat: instead of a stream, the floor of sr_perf -t wlat: a ping-pong of\n"
		"      -m bytes (default 100) where each side's messages are received by a thread\n"
		"      blocked in recv() while the main thread spins on memory\n"
		"  -t  rc: the floor of an RC SEND ping-pong over UDP (RoCEv2): each side sends\n"
		"      the ACK of the peer's last message and its own -m byte message (default\n"
		"      100) in one sendmmsg() and busy-polls until both of the peer's are in\n"
		"  -n  wlat, rc: round trips (default 20000)\n"
		"  -p  port: TCP side channel, and the UDP or TCP data (default 18800)\n");
}

int main(int argc, char **argv)
{
	struct params p = {.size = 0, .iters = 20000};
	int port = 18800, ch;
	double secs = 2;
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
	while ((ch = getopt_long(argc, argv, "P:p:m:g:D:t:n:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			p.wlat = !strcmp(optarg, "wlat");
			p.rc = !strcmp(optarg, "rc");
			if (!p.wlat && !p.rc) {
				fprintf(stderr, "sr_floor: -t wlat or rc (streams: no -t)\n");
				return 2;
			}
			break;
		case 'n':
			p.iters = atoi(optarg);
			break;
		case 'P':
			p.tcp = !strcmp(optarg, "tcp");
			if (!p.tcp && strcmp(optarg, "udp")) {
				fprintf(stderr, "sr_floor: -P udp or tcp\n");
				return 2;
			}
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'm':
			p.size = atol(optarg);
			break;
		case 'g':
			p.gso = atoi(optarg);
			break;
		case 'D':
			secs = atof(optarg);
			break;
		default:
			usage(ch == 'h' ? stdout : stderr);
			return ch == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc)
		return server(port); /* the client's parameters apply */
	if (p.size == 0)
		p.size = p.wlat || p.rc ? 100 : 65536;
	if (p.size < 1 || p.size > (1L << 30) || (!p.tcp && p.size > 65507) || p.gso < 0 ||
	    (p.tcp && p.gso) || secs <= 0 || p.iters < 10 || p.iters > 10000000 ||
	    (p.wlat && p.gso) || (p.rc && (p.tcp || p.gso || p.size > 65507 - RC_HDR))) {
		fprintf(stderr, "sr_floor: bad arguments (see --help)\n");
		return 2;
	}
	return client(argv[optind], port, &p, secs);
}
