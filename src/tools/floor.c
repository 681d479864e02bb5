/* The floors of `softrdma compare` (floor.h): raw UDP and TCP sockets doing what `softrdma lat`
 * and `softrdma bw` do over RDMA, on the same path, and the connection set-up time of rdma_cm
 * against a TCP handshake.
 *
 * Both sides busy-poll non-blocking sockets, as the RDMA tools spin on their completion queues,
 * so that the comparison is between transports and not between wake-up paths. Every wait is
 * bounded: --timeout seconds of silence from the peer end the run with a message naming who
 * went quiet. The peer is not trusted: every received length and figure is checked before use.
 *
 * ---- Wire (floor modes; all integers big-endian) ----
 * UDP datagrams start with a type byte:
 *   'D' + sequence (up to 8 bytes, as many as fit) + padding: a udp-lat message, echoed as is;
 *   'H': udp-bw hello, answered 'H' (the client learns the server is up before it blasts);
 *   'B' + padding: a udp-bw datagram (at most UDP_CHUNK bytes: softrdma's RoCE MTU on lo);
 *   'Q': stop; answered with the figures 'R' (below) until the client stops asking;
 *   'X' + mode name: "I am a server of another mode" (the client reports the mismatch).
 * TCP starts with a hello: "SRFL", the mode byte, 3 zero bytes, the message size (u64); the
 * server answers 'A' or 'E' + a reason and closes. Then tcp-lat echoes size-byte messages and
 * tcp-bw streams them; the client's shutdown(SHUT_WR) is the stop, answered with the figures.
 * Figures: 'R', then cpu_ns, bytes, count (datagrams or rounds), elapsed_ns: 33 bytes.
 *
 * ---- Set-up ----
 * rdma_cm: the client resolves, creates a QP, connects and disconnects COUNT times; each
 * connect's private data carries its index and COUNT, so a server also stops after the last
 * one the client announces. TCP: connect(), one marker byte ('L' on the last), close. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/floor.h"
#include "tools/util.h"
#include "util/stats.h"

#define DEFAULT_PORT	 18700
#define DEFAULT_TIMEOUT	 10.0
#define NS_PER_S	 1000000000ull
#define UDP_CHUNK	 4096	      /* softrdma's RoCE MTU on lo: the same work per packet */
#define UDP_MAX		 65507	      /* largest IPv4 UDP payload */
#define MAX_SIZE	 (64u << 20)  /* tcp and bw messages */
#define MAX_LAT_ITERS	 100000000ull /* 800 MB of samples */
#define SOCK_BUF	 (4 << 20)
#define TCP_RX_BUF	 (1 << 20)
#define RESEND_NS	 NS_PER_S	/* udp-lat: resend a round not answered within this */
#define WARMUP_RESEND_NS 100000000ull	/* the first round: the server may still be starting */
#define STOP_REPEAT_NS	 100000000ull	/* 'Q' every 100 ms ... */
#define STOP_LIMIT_NS	 (2 * NS_PER_S) /* ... for up to 2 s */
#define LINGER_NS	 300000000ull	/* the server answers repeated 'Q's this long */
#define FIGS_LEN	 33
#define FIG_MAX		 (UINT64_C(1) << 62) /* no honest figure comes near */
#define UDP_BATCH	 64
#define SETUP_MAGIC	 0x53524655u /* "SRFU": set-up private data */
#define HELLO_LEN	 16

static const char dashes[] = "---------------------------------------------------------------"
			     "------------------------";

enum mode { M_UDP_LAT, M_TCP_LAT, M_UDP_BW, M_TCP_BW, M_COUNT };

static const char *const mode_names[M_COUNT] = {"udp-lat", "tcp-lat", "udp-bw", "tcp-bw"};

static bool mode_udp(enum mode m)
{
	return m == M_UDP_LAT || m == M_UDP_BW;
}

static bool mode_lat(enum mode m)
{
	return m == M_UDP_LAT || m == M_TCP_LAT;
}

/* What a server reports when the client stops it. */
struct figs {
	uint64_t cpu_ns;     /* CPU time over the server's measured part */
	uint64_t bytes;	     /* payload bytes received */
	uint64_t count;	     /* datagrams (udp-bw), rounds echoed (lat), messages (tcp-bw) */
	uint64_t elapsed_ns; /* first to last datagram (udp-bw), first to last byte (tcp-bw) */
};

/* One floor or set-up run: options, sockets, results. */
struct fl {
	const char *cmd; /* "compare --floor" or "compare --setup", for messages */
	/* options */
	enum mode mode;
	bool client;
	bool tcp; /* --setup --tcp */
	int port;
	uint64_t size, iters;
	uint64_t duration_ns; /* 0: run -n */
	double timeout_s;
	uint64_t timeout_ns;
	bool cdf;
	const char *json_path;
	const char *server;
	/* sockets */
	int fd, lfd;
	struct sockaddr_in peer; /* UDP server: the client, learnt from its first datagram */
	bool have_peer;
	/* buffers */
	uint8_t *buf, *rbuf;
	size_t rbuf_len;
	double *samples;
	size_t samples_cap;
	/* results */
	uint64_t cpu_ns, resends;
	struct figs peer_figs;
	const char *device; /* --setup: the RDMA device used */
	FILE *out;
	FILE *json;
	struct strbuf row; /* the JSON fields of the result (client) or of the server's figures */
	char error[512];
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

__attribute__((format(printf, 2, 3))) static int fail(struct fl *f, const char *fmt, ...)
{
	char msg[sizeof(f->error)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fflush(stdout);
	fprintf(stderr, "softrdma %s: %s\n", f->cmd, msg);
	if (!f->error[0])
		memcpy(f->error, msg, sizeof(msg));
	return -1;
}

__attribute__((format(printf, 2, 3))) static void say(struct fl *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f->out, fmt, ap);
	va_end(ap);
	fflush(f->out);
}

/* A signal ends the run: the caller unwinds and floor_main returns 128 + signal. */
static int stopped(void)
{
	return stop_signal ? -EINTR : 0;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- sockets ---- */

static int resolve_v4(struct fl *f, struct sockaddr_in *out)
{
	struct addrinfo hints = {.ai_family = AF_INET}, *ai = NULL;
	int r = getaddrinfo(f->server, NULL, &hints, &ai);
	if (r || !ai)
		return fail(f, "cannot resolve server '%s' (IPv4): %s", f->server,
			    r ? gai_strerror(r) : "no address");
	memcpy(out, ai->ai_addr, sizeof(*out));
	out->sin_port = htons((uint16_t)f->port);
	freeaddrinfo(ai);
	return 0;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}

/* 4 MiB socket buffers: the FORCE variants pass net.core.*mem_max when we may (root); else as
 * much as the system allows. */
static void big_buffers(int fd)
{
	int v = SOCK_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

/* A socket of type bound to the server's port (tool_listen_addr: where it listens). */
static int bind_server(struct fl *f, int type)
{
	struct sockaddr_storage a;
	char why[160];
	socklen_t al = tool_listen_addr(AF_INET, (uint16_t)f->port, &a, why, sizeof(why));
	if (!al)
		return fail(f, "%s", why);
	int fd = socket(a.ss_family, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail(f, "socket: %s", strerror(errno));
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, al) || (type == SOCK_STREAM && listen(fd, 16))) {
		int e = errno;
		close(fd);
		return fail(f, "cannot bind %s port %d: %s", type == SOCK_STREAM ? "TCP" : "UDP",
			    f->port, strerror(e));
	}
	return fd;
}

/* Waits for fd to become ready for `events`, for at most ms (< 0: forever), waking every
 * 100 ms to notice a signal. 1 ready, 0 timed out, -EINTR on a signal. */
static int wait_fd(int fd, short events, int64_t ms)
{
	uint64_t until = ms < 0 ? UINT64_MAX : tool_now_ns() + (uint64_t)ms * 1000000u;
	for (;;) {
		if (stopped())
			return -EINTR;
		uint64_t t = tool_now_ns();
		if (t >= until)
			return 0;
		uint64_t left = (until - t) / 1000000u;
		struct pollfd p = {.fd = fd, .events = events};
		int r = poll(&p, 1, left > 100 ? 100 : (int)left + 1);
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int64_t timeout_ms(const struct fl *f)
{
	return f->timeout_ns ? (int64_t)(f->timeout_ns / 1000000u) : -1;
}

/* Accepts one connection on f->lfd within the timeout. */
static int tcp_accept(struct fl *f, const char *what)
{
	int r = wait_fd(f->lfd, POLLIN, timeout_ms(f));
	if (r < 0)
		return r == -EINTR ? r : fail(f, "poll: %s", strerror(-r));
	if (r == 0)
		return fail(f, "no %s connected to TCP port %d within %.1f s", what, f->port,
			    f->timeout_s);
	int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return fail(f, "accept: %s", strerror(errno));
	return fd;
}

/* Connects to the server, trying again while it refuses (it may still be starting), for up to
 * the timeout. Returns a non-blocking socket with TCP_NODELAY. */
static int tcp_connect(struct fl *f)
{
	struct sockaddr_in a;
	if (resolve_v4(f, &a))
		return -1;
	uint64_t until = f->timeout_ns ? tool_now_ns() + f->timeout_ns : UINT64_MAX;
	int err = 0, refused = 0;
	for (;;) {
		if (stopped())
			return -EINTR;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return fail(f, "socket: %s", strerror(errno));
		int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
		err = r ? errno : 0;
		if (err == EINPROGRESS) {
			uint64_t t = tool_now_ns();
			int64_t ms = until == UINT64_MAX ? -1 : (int64_t)((until - t) / 1000000u);
			int w = wait_fd(fd, POLLOUT, t >= until ? 0 : ms);
			socklen_t l = sizeof(err);
			if (w < 0) {
				close(fd);
				return w;
			}
			err = refused ? refused : ETIMEDOUT; /* the deadline: say why we retried */
			if (w > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l))
				err = errno;
		}
		if (!err) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			return fd;
		}
		close(fd);
		if (err != ECONNREFUSED || tool_now_ns() >= until)
			break;
		refused = err;
		usleep(20000);
	}
	return fail(f, TOOL_NO_SERVER " %s port %d within %.1f s: %s", f->server, f->port,
		    f->timeout_s, strerror(err));
}

/* Writes n bytes to a non-blocking TCP socket, spinning (spin) or polling while it is full.
 * `who` names the peer in the message when it stops taking data for the timeout. */
static int tcp_write_all(struct fl *f, const void *p, size_t n, bool spin, const char *who)
{
	const uint8_t *b = p;
	uint64_t last = 0;
	while (n) {
		ssize_t r = send(f->fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r > 0) {
			b += r;
			n -= (size_t)r;
			last = 0;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return fail(f, "send to the %s: %s", who, strerror(errno));
		if (stopped())
			return -EINTR;
		uint64_t t = tool_now_ns();
		if (!last)
			last = t;
		else if (f->timeout_ns && t - last > f->timeout_ns)
			return fail(f, "the %s took no data for %.1f s", who, f->timeout_s);
		if (!spin && wait_fd(f->fd, POLLOUT, 100) < 0)
			return -EINTR;
	}
	return 0;
}

/* Reads exactly n bytes, spinning on a non-blocking socket (or polling unless spin). Returns 0,
 * 1 for an end of stream before the first byte (the peer's stop), -1 on an error. */
static int tcp_read_exact(struct fl *f, void *p, size_t n, bool spin, const char *who)
{
	uint8_t *b = p;
	size_t got = 0;
	uint64_t last = 0;
	while (got < n) {
		ssize_t r = recv(f->fd, b + got, n - got, MSG_DONTWAIT);
		if (r > 0) {
			got += (size_t)r;
			last = 0;
			continue;
		}
		if (r == 0) {
			if (!got)
				return 1;
			return fail(f, "the %s closed the connection in the middle of a message",
				    who);
		}
		if (errno != EAGAIN && errno != EINTR)
			return fail(f, "receive from the %s: %s", who, strerror(errno));
		if (stopped())
			return -EINTR;
		uint64_t t = tool_now_ns();
		if (!last)
			last = t;
		else if (f->timeout_ns && t - last > f->timeout_ns)
			return fail(f, "%s for %.1f s",
				    strcmp(who, "client") ? "no answer from the server"
							  : "the client vanished: nothing",
				    f->timeout_s);
		if (!spin && wait_fd(f->fd, POLLIN, 100) < 0)
			return -EINTR;
	}
	return 0;
}

static void figs_write(const struct figs *g, uint8_t *p)
{
	p[0] = 'R';
	put64(p + 1, g->cpu_ns);
	put64(p + 9, g->bytes);
	put64(p + 17, g->count);
	put64(p + 25, g->elapsed_ns);
}

/* Decodes the server's figures; false unless it is exactly a figures message with plausible
 * values (the caller checks them against what it sent). */
static bool figs_read(const uint8_t *p, size_t n, struct figs *g)
{
	if (n != FIGS_LEN || p[0] != 'R')
		return false;
	struct figs x = {get64(p + 1), get64(p + 9), get64(p + 17), get64(p + 25)};
	if (x.cpu_ns >= FIG_MAX || x.bytes >= FIG_MAX || x.count >= FIG_MAX ||
	    x.elapsed_ns >= FIG_MAX)
		return false;
	*g = x;
	return true;
}

/* ---- UDP ---- */

static int udp_client_socket(struct fl *f)
{
	struct sockaddr_in a;
	if (resolve_v4(f, &a))
		return -1;
	f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->fd < 0)
		return fail(f, "socket: %s", strerror(errno));
	big_buffers(f->fd);
	if (connect(f->fd, (struct sockaddr *)&a, sizeof(a)))
		return fail(f, "connect UDP to %s port %d: %s", f->server, f->port,
			    strerror(errno));
	return 0;
}

static bool same_addr(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

/* The client's 'X' check: a server of another mode says so; report it. */
static int mode_mismatch(struct fl *f, const uint8_t *p, size_t n)
{
	char name[16];
	size_t k = 0;
	for (size_t i = 1; i < n && k + 1 < sizeof(name); i++)
		if (isprint(p[i]))
			name[k++] = (char)p[i];
	name[k] = 0;
	return fail(f, "the server runs %s, not %s", name, mode_names[f->mode]);
}

/* Server: a datagram of the other UDP mode gets 'X' + our mode. */
static void send_mismatch(struct fl *f, const struct sockaddr_in *to)
{
	char x[16];
	int n = snprintf(x, sizeof(x), "X%s", mode_names[f->mode]);
	sendto(f->fd, x, (size_t)n, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to));
}

/* Client: sends 'Q' every STOP_REPEAT_NS until the server's figures come, for STOP_LIMIT_NS. */
static int udp_stop(struct fl *f)
{
	uint64_t start = tool_now_ns(), sent = 0;
	for (;;) {
		if (stopped())
			return -EINTR;
		uint64_t t = tool_now_ns();
		if (t - start > STOP_LIMIT_NS)
			return fail(f,
				    "no answer from the server to the stop request within %.1f s",
				    (double)STOP_LIMIT_NS / 1e9);
		if (!sent || t - sent >= STOP_REPEAT_NS) {
			send(f->fd, "Q", 1, MSG_DONTWAIT);
			sent = t;
		}
		ssize_t n = recv(f->fd, f->rbuf, f->rbuf_len, MSG_DONTWAIT);
		if (n <= 0)
			continue;
		if (f->rbuf[0] == 'X')
			return mode_mismatch(f, f->rbuf, (size_t)n);
		if (figs_read(f->rbuf, (size_t)n, &f->peer_figs))
			return 0;
		/* anything else: a late echo or hello answer */
	}
}

/* Server: answers the stop with the figures, then lingers answering repeated 'Q's (the reply
 * may be lost) until LINGER_NS passes without one. */
static void udp_linger(struct fl *f, const struct figs *g)
{
	uint8_t r[FIGS_LEN];
	figs_write(g, r);
	socklen_t l = sizeof(f->peer);
	sendto(f->fd, r, sizeof(r), MSG_DONTWAIT, (struct sockaddr *)&f->peer, l);
	uint64_t last = tool_now_ns();
	while (!stopped() && tool_now_ns() - last < LINGER_NS) {
		struct sockaddr_in from;
		socklen_t alen = sizeof(from);
		ssize_t n = recvfrom(f->fd, f->rbuf, f->rbuf_len, MSG_DONTWAIT,
				     (struct sockaddr *)&from, &alen);
		if (n == 1 && f->rbuf[0] == 'Q' && same_addr(&from, &f->peer)) {
			sendto(f->fd, r, sizeof(r), MSG_DONTWAIT, (struct sockaddr *)&f->peer, l);
			last = tool_now_ns();
		} else if (n < 0) {
			usleep(1000); /* nothing measured any more: no need to spin */
		}
	}
}

/* Server, both UDP modes: the client is whoever sends the first datagram of a known type. */
static int udp_serve(struct fl *f)
{
	f->fd = bind_server(f, SOCK_DGRAM);
	if (f->fd < 0)
		return -1;
	big_buffers(f->fd);
	if (set_nonblock(f->fd))
		return fail(f, "fcntl: %s", strerror(errno));
	say(f, " Server: %s on UDP port %d, waiting for a client (%.1f s)\n", mode_names[f->mode],
	    f->port, f->timeout_s);
	bool lat = f->mode == M_UDP_LAT;
	struct figs g = {0};
	uint64_t cpu0 = 0, first = 0, last_data = 0, heard = tool_now_ns();
	bool started = false;
	struct mmsghdr mm[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	struct sockaddr_in from[UDP_BATCH];
	size_t slot = lat ? f->rbuf_len : f->rbuf_len / UDP_BATCH;
	char other = lat ? 'B' : 'D'; /* a type of the other UDP mode */
	for (;;) {
		for (int i = 0; i < UDP_BATCH; i++) {
			iov[i] = (struct iovec){f->rbuf + (size_t)i * slot, slot};
			mm[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
							.msg_namelen = sizeof(from[i]),
							.msg_iov = &iov[i],
							.msg_iovlen = 1};
		}
		/* latency: one at a time, the echo goes out at once */
		int got = recvmmsg(f->fd, mm, lat ? 1 : UDP_BATCH, MSG_DONTWAIT, NULL);
		uint64_t t = tool_now_ns();
		if (got <= 0) {
			if (got < 0 && errno != EAGAIN && errno != EINTR)
				return fail(f, "recvmmsg: %s", strerror(errno));
			if (stopped())
				return -EINTR;
			if (f->timeout_ns && t - heard > f->timeout_ns)
				return fail(f,
					    f->have_peer ? "the client vanished: nothing for %.1f s"
							 : "no client came within %.1f s",
					    f->timeout_s);
			continue;
		}
		for (int i = 0; i < got; i++) {
			const uint8_t *p = iov[i].iov_base;
			size_t n = mm[i].msg_len;
			if (!n || (mm[i].msg_hdr.msg_flags & MSG_TRUNC))
				continue; /* not ours: ours fit the slot */
			if (p[0] == other || (lat && p[0] == 'H')) {
				send_mismatch(f, &from[i]);
				continue;
			}
			if (!f->have_peer) {
				if (p[0] != (lat ? 'D' : 'H'))
					continue;
				f->peer = from[i];
				f->have_peer = true;
			} else if (!same_addr(&from[i], &f->peer)) {
				continue;
			}
			heard = t;
			socklen_t l = sizeof(f->peer);
			struct sockaddr *to = (struct sockaddr *)&f->peer;
			if (lat && p[0] == 'D') {
				if (!started) {
					cpu0 = tool_cpu_ns();
					started = true;
				}
				/* The echo; a full send buffer just loses it (the client resends).
				 */
				sendto(f->fd, p, n, MSG_DONTWAIT, to, l);
				g.count++;
				g.bytes += n;
			} else if (!lat && p[0] == 'B') {
				if (!started) {
					cpu0 = tool_cpu_ns();
					first = t;
					started = true;
				}
				last_data = t;
				g.count++;
				g.bytes += n;
			} else if (!lat && p[0] == 'H' && n == 1) {
				sendto(f->fd, "H", 1, MSG_DONTWAIT, to, l);
			} else if (p[0] == 'Q' && n == 1) {
				g.cpu_ns = started ? tool_cpu_ns() - cpu0 : 0;
				g.elapsed_ns = last_data - first;
				f->cpu_ns = g.cpu_ns;
				f->peer_figs = g;
				udp_linger(f, &g);
				return 0;
			}
		}
	}
}

/* udp-lat client: one round of sequence seq. The first round (seq 0) is the warm-up, resent
 * every WARMUP_RESEND_NS while the server may be starting. *ns: send to matching echo,
 * resends included. */
static int udp_round(struct fl *f, uint64_t seq, uint64_t *ns)
{
	size_t s = (size_t)f->size, k = s - 1 < 8 ? s - 1 : 8;
	uint8_t sb[8];
	put64(sb, seq);
	f->buf[0] = 'D';
	memcpy(f->buf + 1, sb + 8 - k, k); /* the low bytes of seq: a stale echo never matches */
	uint64_t resend = seq ? RESEND_NS : WARMUP_RESEND_NS;
	uint64_t t0 = tool_now_ns(), sent = t0;
	if (send(f->fd, f->buf, s, MSG_DONTWAIT) < 0 && errno != EAGAIN && errno != ECONNREFUSED)
		return fail(f, "send: %s", strerror(errno));
	for (;;) {
		ssize_t n = recv(f->fd, f->rbuf, f->rbuf_len, MSG_DONTWAIT);
		uint64_t t = tool_now_ns();
		if (n == (ssize_t)s && !memcmp(f->rbuf, f->buf, 1 + k)) {
			*ns = t - t0;
			return 0;
		}
		if (n > 0 && f->rbuf[0] == 'X')
			return mode_mismatch(f, f->rbuf, (size_t)n);
		/* ECONNREFUSED: an ICMP port unreachable, the server is not up (yet): keep
		 * trying until the timeout. */
		if (n < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED)
			return fail(f, "receive: %s", strerror(errno));
		if (stopped())
			return -EINTR;
		if (f->timeout_ns && t - t0 > f->timeout_ns)
			return fail(f, "no answer from the server %s port %d for %.1f s", f->server,
				    f->port, f->timeout_s);
		if (t - sent >= resend) {
			if (seq)
				f->resends++;
			send(f->fd, f->buf, s, MSG_DONTWAIT);
			sent = t;
		}
	}
}

/* udp-bw client: hello until the server answers (it may still be starting). */
static int udp_hello(struct fl *f)
{
	uint64_t t0 = tool_now_ns(), sent = 0;
	for (;;) {
		uint64_t t = tool_now_ns();
		if (!sent || t - sent >= WARMUP_RESEND_NS) {
			send(f->fd, "H", 1, MSG_DONTWAIT);
			sent = t;
		}
		ssize_t n = recv(f->fd, f->rbuf, f->rbuf_len, MSG_DONTWAIT);
		if (n == 1 && f->rbuf[0] == 'H')
			return 0;
		if (n > 0 && f->rbuf[0] == 'X')
			return mode_mismatch(f, f->rbuf, (size_t)n);
		if (stopped())
			return -EINTR;
		if (f->timeout_ns && t - t0 > f->timeout_ns)
			return fail(f, "no answer from the server %s port %d for %.1f s", f->server,
				    f->port, f->timeout_s);
		if (n <= 0)
			usleep(100); /* not measured yet: no need to spin hard */
	}
}

/* udp-bw client: sends whole messages (ceil(S / UDP_CHUNK) datagrams each) in batches of
 * up to UDP_BATCH datagrams. *msgs: messages sent; *ns: time from the first to the last. */
static int udp_blast(struct fl *f, uint64_t *msgs, uint64_t *ns)
{
	size_t s = (size_t)f->size, dpm = (s + UDP_CHUNK - 1) / UDP_CHUNK;
	size_t mpb = dpm >= UDP_BATCH ? 1 : UDP_BATCH / dpm, cap = mpb * dpm;
	struct mmsghdr *mm = calloc(cap, sizeof(*mm));
	struct iovec *iov = calloc(cap, sizeof(*iov));
	int rc = 0;
	if (!mm || !iov) {
		rc = fail(f, "out of memory");
		goto out_free;
	}
	memset(f->buf, 'B', s); /* every datagram starts with its type */
	for (size_t m = 0; m < mpb; m++) {
		for (size_t d = 0; d < dpm; d++) {
			size_t i = m * dpm + d, off = d * UDP_CHUNK;
			iov[i] =
			    (struct iovec){f->buf + off, s - off < UDP_CHUNK ? s - off : UDP_CHUNK};
			mm[i].msg_hdr.msg_iov = &iov[i];
			mm[i].msg_hdr.msg_iovlen = 1;
		}
	}
	uint64_t t0 = tool_now_ns(), deadline = f->duration_ns ? t0 + f->duration_ns : 0, sent = 0;
	uint64_t stall = 0;
	while (deadline ? tool_now_ns() < deadline : sent < f->iters) {
		uint64_t want = mpb;
		if (!deadline && f->iters - sent < mpb)
			want = f->iters - sent;
		size_t vlen = (size_t)want * dpm, done = 0;
		while (done < vlen) {
			int r = sendmmsg(f->fd, mm + done, (unsigned)(vlen - done), MSG_DONTWAIT);
			if (r > 0) {
				done += (size_t)r;
				stall = 0;
				continue;
			}
			/* ECONNREFUSED: an earlier datagram met a closed port; the stop
			 * exchange tells whether the server is still there. */
			if (r < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNREFUSED &&
			    errno != ENOBUFS) {
				rc = fail(f, "sendmmsg: %s", strerror(errno));
				goto out_free;
			}
			if (stopped()) {
				rc = -EINTR;
				goto out_free;
			}
			uint64_t t = tool_now_ns();
			if (!stall)
				stall = t;
			else if (f->timeout_ns && t - stall > f->timeout_ns) {
				rc = fail(f, "the socket took no data for %.1f s", f->timeout_s);
				goto out_free;
			}
		}
		sent += want;
	}
	*msgs = sent;
	*ns = tool_now_ns() - t0;
out_free:
	free(iov);
	free(mm);
	return rc;
}

/* ---- TCP ---- */

static void hello_write(const struct fl *f, uint8_t *p)
{
	memcpy(p, "SRFL", 4);
	p[4] = (uint8_t)f->mode;
	p[5] = p[6] = p[7] = 0;
	put64(p + 8, f->size);
}

static int tcp_client_hello(struct fl *f)
{
	uint8_t h[HELLO_LEN], a;
	hello_write(f, h);
	int r = tcp_write_all(f, h, sizeof(h), false, "server");
	if (r)
		return r;
	r = tcp_read_exact(f, &a, 1, false, "server");
	if (r)
		return r < 0 ? r : fail(f, "the server closed the connection at the hello");
	if (a == 'A')
		return 0;
	char why[128] = "";
	if (a == 'E') {
		/* The reason, up to the close or a short wait; printable characters only. */
		size_t k = 0;
		while (k + 1 < sizeof(why) && wait_fd(f->fd, POLLIN, 1000) > 0) {
			char c;
			if (recv(f->fd, &c, 1, MSG_DONTWAIT) != 1)
				break;
			if (isprint((unsigned char)c))
				why[k++] = c;
		}
		why[k] = 0;
	}
	return fail(f, "the server refused the test: %s", why[0] ? why : "(no reason)");
}

/* Server: reads and checks the client's hello; the size is the client's. */
static int tcp_server_hello(struct fl *f)
{
	uint8_t h[HELLO_LEN];
	int r = tcp_read_exact(f, h, sizeof(h), false, "client");
	if (r)
		return r < 0 ? r : fail(f, "the client closed the connection before its hello");
	char why[96] = "";
	uint64_t size = get64(h + 8);
	if (memcmp(h, "SRFL", 4) || h[5] || h[6] || h[7])
		snprintf(why, sizeof(why), "not a softrdma floor client");
	else if (h[4] != f->mode)
		snprintf(why, sizeof(why), "the server runs %s, not %s", mode_names[f->mode],
			 h[4] < M_COUNT ? mode_names[h[4]] : "an unknown mode");
	else if (size < 1 || size > MAX_SIZE)
		snprintf(why, sizeof(why), "message size %llu out of range",
			 (unsigned long long)size);
	if (why[0]) {
		char e[sizeof(why) + 1];
		int n = snprintf(e, sizeof(e), "E%s", why);
		tcp_write_all(f, e, (size_t)n, false, "client");
		return fail(f, "refused the client: %s", why);
	}
	f->size = size;
	return tcp_write_all(f, "A", 1, false, "client");
}

static int tcp_serve(struct fl *f)
{
	f->lfd = bind_server(f, SOCK_STREAM);
	if (f->lfd < 0)
		return -1;
	say(f, " Server: %s on TCP port %d, waiting for a client (%.1f s)\n", mode_names[f->mode],
	    f->port, f->timeout_s);
	f->fd = tcp_accept(f, "client");
	if (f->fd < 0)
		return f->fd;
	int one = 1;
	setsockopt(f->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (set_nonblock(f->fd))
		return fail(f, "fcntl: %s", strerror(errno));
	int r = tcp_server_hello(f);
	if (r)
		return r;
	struct figs g = {0};
	uint64_t cpu0 = 0, first = 0, last = 0;
	if (f->mode == M_TCP_LAT) {
		size_t s = (size_t)f->size;
		free(f->buf);
		if (!(f->buf = malloc(s)))
			return fail(f, "out of memory");
		for (;;) {
			r = tcp_read_exact(f, f->buf, s, true, "client");
			if (r < 0)
				return r;
			if (r == 1)
				break;
			if (!g.count)
				cpu0 = tool_cpu_ns();
			if ((r = tcp_write_all(f, f->buf, s, true, "client")))
				return r;
			g.count++;
			g.bytes += s;
		}
	} else {
		uint64_t quiet = 0;
		for (;;) {
			ssize_t n = recv(f->fd, f->rbuf, f->rbuf_len, MSG_DONTWAIT);
			if (n > 0) {
				last = tool_now_ns();
				if (!g.bytes) {
					cpu0 = tool_cpu_ns();
					first = last;
				}
				g.bytes += (uint64_t)n;
				quiet = 0;
				continue;
			}
			if (n == 0)
				break;
			if (errno != EAGAIN && errno != EINTR)
				return fail(f, "receive from the client: %s", strerror(errno));
			if (stopped())
				return -EINTR;
			uint64_t t = tool_now_ns();
			if (!quiet)
				quiet = t;
			else if (f->timeout_ns && t - quiet > f->timeout_ns)
				return fail(f, "the client vanished: nothing for %.1f s",
					    f->timeout_s);
		}
		g.count = g.bytes / f->size;
		g.elapsed_ns = last - first;
	}
	g.cpu_ns = g.bytes ? tool_cpu_ns() - cpu0 : 0;
	f->cpu_ns = g.cpu_ns;
	f->peer_figs = g;
	uint8_t rep[FIGS_LEN];
	figs_write(&g, rep);
	return tcp_write_all(f, rep, sizeof(rep), false, "client");
}

/* Client: after shutdown(SHUT_WR), the server's figures, then its close. */
static int tcp_figures(struct fl *f)
{
	uint8_t rep[FIGS_LEN];
	if (shutdown(f->fd, SHUT_WR))
		return fail(f, "shutdown: %s", strerror(errno));
	int r = tcp_read_exact(f, rep, sizeof(rep), false, "server");
	if (r)
		return r < 0 ? r : fail(f, "the server closed the connection without its figures");
	if (!figs_read(rep, sizeof(rep), &f->peer_figs))
		return fail(f, "bad figures from the server");
	return 0;
}

/* tcp-bw client: S-byte messages for -D or -n; *ns from the first write to the figures. */
static int tcp_blast(struct fl *f, uint64_t *msgs, uint64_t *ns)
{
	size_t s = (size_t)f->size;
	memset(f->buf, 'T', s);
	uint64_t t0 = tool_now_ns(), deadline = f->duration_ns ? t0 + f->duration_ns : 0, sent = 0;
	while (deadline ? tool_now_ns() < deadline : sent < f->iters) {
		int r = tcp_write_all(f, f->buf, s, false, "server");
		if (r)
			return r;
		sent++;
	}
	int r = tcp_figures(f);
	if (r)
		return r;
	*ns = tool_now_ns() - t0;
	*msgs = sent;
	return 0;
}

/* tcp-lat client: one round; the echo must be what we sent. */
static int tcp_round(struct fl *f, uint64_t seq, uint64_t *ns)
{
	size_t s = (size_t)f->size, k = s < 8 ? s : 8;
	uint8_t sb[8];
	put64(sb, seq);
	memcpy(f->buf, sb + 8 - k, k);
	uint64_t t0 = tool_now_ns();
	int r = tcp_write_all(f, f->buf, s, true, "server");
	if (r)
		return r;
	r = tcp_read_exact(f, f->rbuf, s, true, "server");
	if (r)
		return r < 0 ? r : fail(f, "the server closed the connection");
	*ns = tool_now_ns() - t0;
	if (memcmp(f->rbuf, f->buf, s))
		return fail(f, "the echo of round %llu differs from what was sent",
			    (unsigned long long)seq);
	return 0;
}

/* ---- reports ---- */

static int add_sample(struct fl *f, struct stats *st, double ns)
{
	if (st->n == st->cap) {
		size_t cap = f->samples_cap ? f->samples_cap * 2 : 1u << 16;
		double *p = realloc(f->samples, cap * sizeof(*p));
		if (!p)
			return fail(f, "out of memory for %zu samples", cap);
		f->samples = p;
		f->samples_cap = cap;
		st->buf = p; /* the samples so far move with the buffer */
		st->cap = cap;
	}
	return stats_add(st, ns) ? fail(f, "bad sample %.0f ns", ns) : 0;
}

static void lat_banner(struct fl *f)
{
	say(f, "%s\n                    %s round-trip latency floor (softrdma)\n", dashes,
	    f->mode == M_UDP_LAT ? "UDP" : "TCP");
	say(f, " Server          : %s port %d\n", f->server, f->port);
	if (f->duration_ns)
		say(f, " Duration        : %.3f s\n", (double)f->duration_ns / 1e9);
	say(f, " Method          : %s; both sides busy-poll\n",
	    f->mode == M_UDP_LAT ? "a datagram each way, resent after 1 s"
				 : "one TCP connection, TCP_NODELAY");
	say(f,
	    " Statistics      : every sample; t_typical = median; stdev n-1; jitter = p99 - "
	    "p50\n%s\n",
	    dashes);
}

static int lat_report(struct fl *f, struct stats *st, uint64_t measured)
{
	struct stats_lat_report rep;
	char line[512], h[512], js[1024];
	double jitter = 0, v;
	if (stats_finalize(st) || stats_lat_report(st, f->size, measured, &rep))
		return fail(f, "no samples");
	stats_jitter(st, &jitter);
	int n = stats_format_lat_header(h, sizeof(h));
	if (n > 0)
		snprintf(h + n, sizeof(h) - (size_t)n, "  jitter[usec]");
	n = stats_format_lat_line(&rep, line, sizeof(line));
	if (n < 0)
		return fail(f, "cannot format the report");
	snprintf(line + n, sizeof(line) - (size_t)n, "\t\t%-7.2f", jitter / 1000.0);
	n = stats_format_lat_json(&rep, js, sizeof(js));
	if (n < 2)
		return fail(f, "cannot format the JSON report");
	say(f, "%s\n%s\n%s\n", h, line, dashes);
	double cc = (double)f->cpu_ns / 1e3 / (double)measured;
	double cs = (double)f->peer_figs.cpu_ns / 1e3 / (double)measured;
	say(f, " resends: %llu   CPU per round trip: client %.3f us, server %.3f us\n",
	    (unsigned long long)f->resends, cc, cs);
	struct strbuf *j = &f->row;
	sb_add(j, "%.*s, \"jitter\": %.2f, \"resends\": %llu", n - 1, js, jitter / 1000.0,
	       (unsigned long long)f->resends);
	sb_add(j, ", \"cpu_client_us\": %.3f, \"cpu_server_us\": %.3f", cc, cs);
	if (f->cdf) {
		/* [usec, fraction of samples <= usec]: every percent, the tail, the max. */
		static const double tail[] = {99.2, 99.4, 99.6, 99.8, 99.9, 99.95, 99.99};
		sb_add(j, ", \"cdf\": [");
		for (int k = 0; k <= 99; k++) {
			stats_percentile(st, k, &v);
			sb_add(j, "%s[%.3f, %.4f]", k ? ", " : "", v / 1000.0, k / 100.0);
		}
		for (size_t k = 0; k < sizeof(tail) / sizeof(tail[0]); k++) {
			stats_percentile(st, tail[k], &v);
			sb_add(j, ", [%.3f, %.4f]", v / 1000.0, tail[k] / 100.0);
		}
		sb_add(j, ", [%.3f, 1.0]]", stats_max(st) / 1000.0);
	}
	sb_add(j, "}");
	return 0;
}

static int lat_client(struct fl *f)
{
	int r = f->mode == M_UDP_LAT ? udp_client_socket(f) : 0;
	if (r)
		return r;
	if (f->mode == M_TCP_LAT) {
		f->fd = tcp_connect(f);
		if (f->fd < 0)
			return f->fd;
		if ((r = tcp_client_hello(f)))
			return r;
	}
	lat_banner(f);
	struct stats st;
	stats_init(&st, f->samples, f->samples_cap);
	uint64_t deadline = 0, i, cpu0 = 0;
	for (i = 0;; i++) {
		uint64_t ns = 0;
		if (i == 1) {
			cpu0 = tool_cpu_ns();
			if (f->duration_ns)
				deadline = tool_now_ns() + f->duration_ns;
		}
		if (i > 0 && (deadline ? tool_now_ns() >= deadline : i > f->iters))
			break;
		r = f->mode == M_UDP_LAT ? udp_round(f, i, &ns) : tcp_round(f, i, &ns);
		if (r)
			return r;
		if (i > 0 && (r = add_sample(f, &st, (double)ns)))
			return r; /* i == 0: the unmeasured warm-up round */
	}
	f->cpu_ns = tool_cpu_ns() - cpu0;
	uint64_t measured = i - 1;
	r = f->mode == M_UDP_LAT ? udp_stop(f) : tcp_figures(f);
	if (r)
		return r;
	/* The server echoed every measured round at least once (the warm-up too). */
	if (f->peer_figs.count < measured + 1)
		return fail(f, "the server reports %llu echoes for %llu round trips",
			    (unsigned long long)f->peer_figs.count,
			    (unsigned long long)measured + 1);
	return lat_report(f, &st, measured);
}

static int bw_client(struct fl *f)
{
	uint64_t msgs = 0, ns = 0;
	int r;
	bool udp = f->mode == M_UDP_BW;
	if (udp) {
		if ((r = udp_client_socket(f)) || (r = udp_hello(f)))
			return r;
	} else {
		f->fd = tcp_connect(f);
		if (f->fd < 0)
			return f->fd;
		if ((r = tcp_client_hello(f)))
			return r;
	}
	say(f, "%s\n                    %s bandwidth floor (softrdma)\n", dashes,
	    udp ? "UDP" : "TCP");
	say(f, " Server          : %s port %d\n", f->server, f->port);
	if (udp)
		say(f,
		    " Method          : %llu datagram(s) of <= %d B per message; goodput = "
		    "received\n",
		    (unsigned long long)((f->size + UDP_CHUNK - 1) / UDP_CHUNK), UDP_CHUNK);
	else
		say(f,
		    " Method          : one TCP connection; first write to the server's count\n");
	say(f, "%s\n", dashes);
	uint64_t cpu0 = tool_cpu_ns();
	r = udp ? udp_blast(f, &msgs, &ns) : tcp_blast(f, &msgs, &ns);
	f->cpu_ns = tool_cpu_ns() - cpu0;
	if (r || (udp && (r = udp_stop(f))))
		return r;
	const struct figs *g = &f->peer_figs;
	uint64_t dpm = (f->size + UDP_CHUNK - 1) / UDP_CHUNK, recv_msgs, elapsed;
	double loss = 0;
	if (udp) {
		/* Never more than we sent, never longer datagrams than we send. */
		if (g->count > msgs * dpm || g->bytes > g->count * UDP_CHUNK ||
		    g->bytes > msgs * f->size)
			return fail(f,
				    "implausible figures from the server (%llu datagrams, %llu "
				    "bytes for %llu sent)",
				    (unsigned long long)g->count, (unsigned long long)g->bytes,
				    (unsigned long long)(msgs * dpm));
		recv_msgs = g->bytes / f->size;
		loss = 1.0 - (double)g->count / (double)(msgs * dpm);
		elapsed = g->elapsed_ns ? g->elapsed_ns : ns; /* one datagram: no span */
	} else {
		if (g->bytes != msgs * f->size)
			return fail(f, "the server received %llu bytes of %llu sent",
				    (unsigned long long)g->bytes,
				    (unsigned long long)(msgs * f->size));
		recv_msgs = msgs;
		elapsed = ns;
	}
	if (!recv_msgs)
		return fail(f, "the server received no whole message (%llu datagrams of %llu)",
			    (unsigned long long)g->count, (unsigned long long)(msgs * dpm));
	struct stats_bw_report rep;
	char h[256], line[256];
	if (stats_bw_report(f->size, recv_msgs, (double)(elapsed ? elapsed : 1), 0, false, &rep) ||
	    stats_format_bw_header(false, h, sizeof(h)) < 0 ||
	    stats_format_bw_line(&rep, line, sizeof(line)) < 0)
		return fail(f, "cannot compute the bandwidth");
	double gbps = (double)(recv_msgs * f->size) * 8.0 / (double)(elapsed ? elapsed : 1);
	double cc = (double)f->cpu_ns / 1e3 / (double)recv_msgs;
	double cs = (double)g->cpu_ns / 1e3 / (double)recv_msgs;
	say(f, "%s\n%s\n%s\n", h, line, dashes);
	say(f, " %.3f Gbit/s of payload", gbps);
	if (udp)
		say(f, "   loss %.4f (%llu of %llu datagrams received)", loss,
		    (unsigned long long)g->count, (unsigned long long)(msgs * dpm));
	say(f, "\n CPU per message: client %.3f us, server %.3f us\n", cc, cs);
	sb_add(&f->row,
	       "{\"MsgSize\": %llu, \"n_iterations\": %llu, \"BW_average\": %.2f, \"gbps\": %.3f, "
	       "\"MsgRate\": %.6f",
	       (unsigned long long)f->size, (unsigned long long)recv_msgs, rep.bw_avg, gbps,
	       rep.msg_rate);
	if (udp)
		sb_add(&f->row, ", \"loss_ratio\": %.6f, \"datagrams_sent\": %llu", loss,
		       (unsigned long long)(msgs * dpm));
	sb_add(&f->row, ", \"cpu_client_us\": %.3f, \"cpu_server_us\": %.3f}", cc, cs);
	return 0;
}

static int floor_run(struct fl *f)
{
	size_t s = (size_t)f->size;
	f->rbuf_len = f->mode == M_TCP_BW ? TCP_RX_BUF : (s > UDP_MAX ? s : UDP_MAX) + 1;
	if (!f->client && f->mode == M_UDP_BW)
		f->rbuf_len = (size_t)UDP_BATCH * (UDP_CHUNK + 64);
	f->buf = malloc(s);
	f->rbuf = malloc(f->rbuf_len);
	if (!f->buf || !f->rbuf)
		return fail(f, "out of memory");
	if (!f->client) {
		int r = mode_udp(f->mode) ? udp_serve(f) : tcp_serve(f);
		if (r)
			return r;
		const struct figs *g = &f->peer_figs;
		say(f, " Server: %llu %s, %llu bytes, CPU %.3f ms\n", (unsigned long long)g->count,
		    mode_lat(f->mode) ? "rounds" : (f->mode == M_UDP_BW ? "datagrams" : "messages"),
		    (unsigned long long)g->bytes, (double)g->cpu_ns / 1e6);
		sb_add(&f->row,
		       "{\"received_bytes\": %llu, \"count\": %llu, \"elapsed_ns\": %llu, "
		       "\"cpu_ns\": %llu}",
		       (unsigned long long)g->bytes, (unsigned long long)g->count,
		       (unsigned long long)g->elapsed_ns, (unsigned long long)g->cpu_ns);
		return 0;
	}
	return mode_lat(f->mode) ? lat_client(f) : bw_client(f);
}

/* ---- JSON file ---- */

static void write_json(struct fl *f, bool ok, bool setup)
{
	if (!f->json)
		return;
	struct strbuf s = {0};
	if (setup) {
		sb_add(&s, "{\n  \"tool\": \"softrdma setup\",\n  \"transport\": \"%s\",\n",
		       f->tcp ? "tcp" : "rdma_cm");
		sb_add(&s, "  \"role\": \"%s\",\n", f->client ? "client" : "server");
		if (f->device) {
			sb_add(&s, "  \"device\": ");
			sb_json_str(&s, f->device);
			sb_add(&s, ",\n");
		}
		sb_add(&s, "  \"unit\": \"ms\"%s%s", f->row.len ? ",\n  " : "",
		       f->row.len ? f->row.p : "");
	} else {
		sb_add(&s, "{\n  \"tool\": \"softrdma floor\",\n  \"mode\": \"%s\",\n",
		       mode_names[f->mode]);
		sb_add(&s, "  \"role\": \"%s\",\n", f->client ? "client" : "server");
		if (mode_lat(f->mode))
			sb_add(&s, "  \"latency\": \"round trip\",\n  \"unit\": \"usec\",\n");
		if (f->client)
			sb_add(&s, "  \"results\": [%s%s%s]", ok ? "\n    " : "",
			       ok && f->row.p ? f->row.p : "", ok ? "\n  " : "");
		else
			sb_add(&s, "  \"server\": %s", ok && f->row.p ? f->row.p : "null");
	}
	if (!ok) {
		sb_add(&s, ",\n  \"error\": ");
		sb_json_str(&s, f->error[0] ? f->error : "interrupted");
	}
	sb_add(&s, "\n}\n");
	if (s.p && !s.oom && !f->row.oom)
		fputs(s.p, f->json);
	else
		fputs("{\"error\": \"out of memory\"}\n", f->json);
	fflush(f->json);
	free(s.p);
}

/* ---- command lines ---- */

static void floor_usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: softrdma compare --floor MODE [options]           the server\n"
	    "       softrdma compare --floor MODE [options] SERVER    the client\n\n"
	    "The raw-socket floor RDMA is compared against: the same job over plain UDP or "
	    "TCP\nsockets on the same path, both sides busy-polling.\n\n"
	    "MODE:\n"
	    "  udp-lat   round trips of one datagram (echoed), resent after 1 s\n"
	    "  tcp-lat   round trips of one message over one TCP connection (TCP_NODELAY)\n"
	    "  udp-bw    messages as datagrams of <= %d B (softrdma's RoCE MTU on lo), sendmmsg;\n"
	    "            goodput and loss as the server received them\n"
	    "  tcp-bw    messages streamed over one TCP connection\n\n"
	    "  --server             act as the server (the default without SERVER)\n"
	    "  -p, --port PORT      UDP / TCP port (default %d)\n"
	    "  -s, --size BYTES     message size (lat default 100, udp-lat at most %d; bw "
	    "default\n"
	    "                       65536)\n"
	    "  -n, --iters N        round trips (lat, default 10000) or messages (bw)\n"
	    "  -D, --duration SEC   run this long instead of -n (bw default 1 s)\n"
	    "      --cdf            lat: the JSON row gets the distribution [usec, fraction]\n"
	    "      --json FILE      the results as JSON (with \"error\" on failure)\n"
	    "      --timeout SEC    limit for the peer's silence and for connecting (default "
	    "10;\n"
	    "                       0: none)\n"
	    "  -h, --help           this text\n\n"
	    "Exit status: 0 success, 1 error, 2 bad usage, 130/143 stopped by "
	    "SIGINT/SIGTERM.\n",
	    UDP_CHUNK, DEFAULT_PORT, UDP_MAX);
}

static void setup_usage(FILE *o)
{
	fprintf(o,
		"usage: softrdma compare --setup [options]           the server\n"
		"       softrdma compare --setup [options] SERVER    the client\n\n"
		"Connection set-up time: through rdma_cm (resolve address and route, create a QP,\n"
		"connect: the sample ends at ESTABLISHED; SOFTRDMA_TRANSPORT=roce|iwarp picks the\n"
		"device where both exist), or with --tcp a plain TCP connect() (socket() to\n"
		"connect() returning). Each connection is then torn down.\n\n"
		"  --server             act as the server (the default without SERVER)\n"
		"  --tcp                measure TCP connect() instead of rdma_cm\n"
		"  -p, --port PORT      port (default %d)\n"
		"  -n, --iters N        connections (default 20); the server also stops after the\n"
		"                       client's last\n"
		"      --json FILE      the results as JSON (with \"error\" on failure)\n"
		"      --timeout SEC    limit for every wait (default 10; 0: none)\n"
		"  -h, --help           this text\n\n"
		"Exit status: 0 success, 1 error, 2 bad usage, 130/143 stopped by "
		"SIGINT/SIGTERM.\n",
		DEFAULT_PORT);
}

enum { O_SERVER = 256, O_JSON, O_TIMEOUT, O_CDF, O_TCP };

/* 0: run; 1: help shown; 2: usage error (shown). */
static int parse_args(struct fl *f, bool setup, int argc, char **argv)
{
	static const struct option opts[] = {{"server", no_argument, NULL, O_SERVER},
					     {"port", required_argument, NULL, 'p'},
					     {"size", required_argument, NULL, 's'},
					     {"iters", required_argument, NULL, 'n'},
					     {"duration", required_argument, NULL, 'D'},
					     {"json", required_argument, NULL, O_JSON},
					     {"timeout", required_argument, NULL, O_TIMEOUT},
					     {"cdf", no_argument, NULL, O_CDF},
					     {"tcp", no_argument, NULL, O_TCP},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	bool server = false, set_size = false, set_iters = false, set_dur = false;
	double d;
	uint64_t v;
	int c;
	f->port = DEFAULT_PORT;
	f->timeout_s = DEFAULT_TIMEOUT;
	opterr = 0;
	optind = 0; /* a full reset of getopt: the caller may have used it */
	while ((c = getopt_long(argc, argv, setup ? ":p:n:h" : ":p:s:n:D:h", opts, NULL)) != -1) {
		const char *arg = optarg;
		switch (c) {
		case O_SERVER:
			server = true;
			break;
		case 'p':
			if (parse_count(arg, &v) || v < 1 || v > 65535)
				goto bad_value;
			f->port = (int)v;
			break;
		case 's':
			if (setup)
				goto not_here;
			if (parse_bytes(arg, &v) || v < 1 || v > MAX_SIZE)
				goto bad_value;
			f->size = v;
			set_size = true;
			break;
		case 'n':
			if (parse_count(arg, &v) || v < 1 || v > MAX_LAT_ITERS)
				goto bad_value;
			f->iters = v;
			set_iters = true;
			break;
		case 'D':
			if (setup)
				goto not_here;
			if (parse_seconds(arg, &d) || d <= 0)
				goto bad_value;
			f->duration_ns = (uint64_t)(d * 1e9);
			if (!f->duration_ns)
				f->duration_ns = 1;
			set_dur = true;
			break;
		case O_JSON:
			if (!*arg)
				goto bad_value;
			f->json_path = arg;
			break;
		case O_TIMEOUT:
			if (parse_seconds(arg, &d))
				goto bad_value;
			f->timeout_s = d;
			break;
		case O_CDF:
			if (setup)
				goto not_here;
			f->cdf = true;
			break;
		case O_TCP:
			if (!setup)
				goto not_here;
			f->tcp = true;
			break;
		case 'h':
			setup ? setup_usage(stdout) : floor_usage(stdout);
			return 1;
		case ':':
			fprintf(stderr, "softrdma %s: option '%s' needs a value\n", f->cmd,
				argv[optind - 1]);
			goto usage_hint;
		default:
			if (optopt)
				fprintf(stderr, "softrdma %s: unknown option '-%c'\n", f->cmd,
					optopt);
			else
				fprintf(stderr, "softrdma %s: unknown option '%s'\n", f->cmd,
					argv[optind - 1]);
			goto usage_hint;
		}
		continue;
	not_here:
		fprintf(stderr, "softrdma %s: option '%s' does not apply here\n", f->cmd,
			argv[optind - 1]);
		goto usage_hint;
	bad_value:
		fprintf(stderr, "softrdma %s: bad value '%s' for option '%s'\n", f->cmd, arg,
			argv[optind - 1] == arg ? argv[optind - 2] : argv[optind - 1]);
		goto usage_hint;
	}
	int pos = optind;
	if (!setup) {
		if (pos >= argc) {
			fprintf(stderr,
				"softrdma %s: which MODE? (udp-lat, tcp-lat, udp-bw or "
				"tcp-bw)\n",
				f->cmd);
			goto usage_hint;
		}
		int m;
		for (m = 0; m < M_COUNT; m++)
			if (!strcmp(argv[pos], mode_names[m]))
				break;
		if (m == M_COUNT) {
			fprintf(stderr,
				"softrdma %s: unknown MODE '%s' (udp-lat, tcp-lat, udp-bw "
				"or tcp-bw)\n",
				f->cmd, argv[pos]);
			goto usage_hint;
		}
		f->mode = (enum mode)m;
		pos++;
	}
	if (argc - pos > 1) {
		fprintf(stderr, "softrdma %s: one server address at most (got '%s' and '%s')\n",
			f->cmd, argv[pos], argv[pos + 1]);
		goto usage_hint;
	}
	f->server = pos < argc ? argv[pos] : NULL;
	if (server && f->server) {
		fprintf(stderr, "softrdma %s: --server and a SERVER address exclude each other\n",
			f->cmd);
		goto usage_hint;
	}
	f->client = f->server != NULL;
	if (set_iters && set_dur) {
		fprintf(stderr, "softrdma %s: -n and -D exclude each other\n", f->cmd);
		goto usage_hint;
	}
	if (setup) {
		if (!set_iters)
			f->iters = 20;
	} else {
		bool lat = mode_lat(f->mode);
		if (!set_size)
			f->size = lat ? 100 : 65536;
		if (!set_iters)
			f->iters = 10000;
		if (!lat && !set_iters && !set_dur)
			f->duration_ns = NS_PER_S;
		if (f->mode == M_UDP_LAT && f->size > UDP_MAX) {
			fprintf(stderr, "softrdma %s: udp-lat sends one datagram: -s %d at most\n",
				f->cmd, UDP_MAX);
			goto usage_hint;
		}
		if (f->cdf && !lat) {
			fprintf(stderr, "softrdma %s: --cdf is for the latency modes\n", f->cmd);
			goto usage_hint;
		}
	}
	f->timeout_ns = (uint64_t)(f->timeout_s * 1e9);
	return 0;
usage_hint:
	fprintf(stderr, "Run 'softrdma %s --help' for the options.\n", f->cmd);
	return 2;
}

/* ---- the shared frame: options, JSON file, signals, clean-up ---- */

static int run_main(bool setup, int argc, char **argv, int (*run)(struct fl *))
{
	struct fl f;
	memset(&f, 0, sizeof(f));
	f.cmd = setup ? "compare --setup" : "compare --floor";
	f.fd = f.lfd = -1;
	f.out = stdout;
	int pr = parse_args(&f, setup, argc, argv);
	if (pr)
		return pr == 1 ? 0 : 2;
	if (f.json_path && !(f.json = fopen(f.json_path, "w"))) {
		fprintf(stderr, "softrdma %s: cannot write %s: %s\n", f.cmd, f.json_path,
			strerror(errno));
		return 1;
	}
	struct tool_signals sigs;
	stop_signal = 0;
	tool_signals_catch(&sigs, on_signal);

	int rc = run(&f);
	int sig = stop_signal;
	if (sig) {
		fflush(stdout);
		fprintf(stderr, "softrdma %s: interrupted by %s\n", f.cmd,
			sig == SIGINT ? "SIGINT" : "SIGTERM");
		if (!f.error[0])
			snprintf(f.error, sizeof(f.error), "interrupted by %s",
				 sig == SIGINT ? "SIGINT" : "SIGTERM");
	}
	write_json(&f, rc == 0 && !sig, setup);
	if (f.json)
		fclose(f.json);
	if (f.fd >= 0)
		close(f.fd);
	if (f.lfd >= 0)
		close(f.lfd);
	free(f.buf);
	free(f.rbuf);
	free(f.samples);
	free(f.row.p);
	tool_signals_restore(&sigs);
	if (sig)
		return 128 + sig;
	return rc ? 1 : 0;
}

int floor_main(int argc, char **argv)
{
	return run_main(false, argc, argv, floor_run);
}

/* ---- connection set-up ---- */

/* The rdma_cm private data of a connect: magic, which connection, of how many. */
static void setup_pd_write(uint8_t *p, uint32_t index, uint32_t count)
{
	uint32_t w[3] = {htonl(SETUP_MAGIC), htonl(index), htonl(count)};
	memcpy(p, w, sizeof(w));
}

/* From a CONNECT_REQUEST: true for a valid "last connection" mark. RoCE pads the private
 * data, so at least our 12 bytes. */
static bool setup_pd_last(const void *p, size_t n)
{
	uint32_t w[3];
	if (!p || n < sizeof(w))
		return false;
	memcpy(w, p, sizeof(w));
	uint32_t idx = ntohl(w[1]), cnt = ntohl(w[2]);
	return ntohl(w[0]) == SETUP_MAGIC && cnt && idx == cnt - 1;
}

/* The next event on ch within the timeout, copied and acknowledged at once, so that
 * destroying its id never waits. *pd_last: a CONNECT_REQUEST's "last" mark. */
static int next_event(struct fl *f, struct rdma_event_channel *ch, struct rdma_cm_event *out,
		      bool *pd_last, const char *silence)
{
	/* Defined on every path: callers look at it only on success, which gcc -O3 cannot see
	 * through fail() (-Wmaybe-uninitialized). */
	memset(out, 0, sizeof(*out));
	int r = wait_fd(ch->fd, POLLIN, timeout_ms(f));
	if (r < 0)
		return r == -EINTR ? r : fail(f, "poll: %s", strerror(-r));
	if (r == 0)
		return fail(f, "%s within %.1f s", silence, f->timeout_s);
	struct rdma_cm_event *e;
	if (rdma_get_cm_event(ch, &e))
		return fail(f, "rdma_get_cm_event: %s", strerror(errno));
	*out = *e;
	if (pd_last)
		*pd_last =
		    e->event == RDMA_CM_EVENT_CONNECT_REQUEST &&
		    setup_pd_last(e->param.conn.private_data, e->param.conn.private_data_len);
	out->param.conn.private_data = NULL; /* freed with the event */
	rdma_ack_cm_event(e);
	return 0;
}

/* Client: the next event must be `want` for id; anything else is reported by name, except
 * REJECTED when refused_ok (returns 1, nothing reported: the server may be starting). */
static int expect_event(struct fl *f, struct rdma_event_channel *ch, struct rdma_cm_id *id,
			enum rdma_cm_event_type want, bool refused_ok)
{
	struct rdma_cm_event e;
	char what[96];
	snprintf(what, sizeof(what), "no %s from rdma_cm", rdma_event_str(want));
	int r = next_event(f, ch, &e, NULL, what);
	if (r)
		return r;
	if (e.event == want && e.id == id)
		return 0;
	if (refused_ok && e.event == RDMA_CM_EVENT_REJECTED)
		return 1;
	/* rdma_cm statuses are negative errnos (iWARP) or IB reject reasons (RoCE). */
	return fail(f, "%s (status %d%s%s) while waiting for %s", rdma_event_str(e.event), e.status,
		    e.status < 0 ? ": " : "", e.status < 0 ? strerror(-e.status) : "",
		    rdma_event_str(want));
}

struct conn {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
};

static void conn_free(struct conn *c, bool destroy_id)
{
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (destroy_id && c->id)
		rdma_destroy_id(c->id);
	memset(c, 0, sizeof(*c));
}

/* A CQ and a small RC QP on the id (its default PD). */
static int conn_qp(struct fl *f, struct conn *c)
{
	if (!c->id->verbs)
		return fail(f, "rdma_cm gave the id no device");
	c->cq = ibv_create_cq(c->id->verbs, 8, NULL, NULL, 0);
	if (!c->cq)
		return fail(f, "ibv_create_cq: %s", strerror(errno));
	struct ibv_qp_init_attr qa = {
	    .send_cq = c->cq,
	    .recv_cq = c->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	if (rdma_create_qp(c->id, NULL, &qa))
		return fail(f, "rdma_create_qp: %s", strerror(errno));
	f->device = ibv_get_device_name(c->id->verbs->device);
	return 0;
}

/* One rdma_cm connection, measured from rdma_resolve_addr to ESTABLISHED, then torn down.
 * Returns 0, -1 (failed, reported), or 1 when the server refused (the caller may retry while
 * the server starts; nothing reported). */
static int rdma_once(struct fl *f, struct rdma_event_channel *ch, const struct sockaddr_in *dst,
		     uint32_t index, bool may_retry, uint64_t *ns)
{
	struct conn c = {0};
	int r;
	if (rdma_create_id(ch, &c.id, NULL, RDMA_PS_TCP))
		return fail(f, "rdma_create_id: %s", strerror(errno));
	uint64_t t0 = tool_now_ns();
	if (rdma_resolve_addr(c.id, NULL, (struct sockaddr *)dst, 2000)) {
		r = fail(f, "rdma_resolve_addr: %s", strerror(errno));
		goto out;
	}
	if ((r = expect_event(f, ch, c.id, RDMA_CM_EVENT_ADDR_RESOLVED, false)))
		goto out;
	if (rdma_resolve_route(c.id, 2000)) {
		r = fail(f, "rdma_resolve_route: %s", strerror(errno));
		goto out;
	}
	if ((r = expect_event(f, ch, c.id, RDMA_CM_EVENT_ROUTE_RESOLVED, false)))
		goto out;
	if ((r = conn_qp(f, &c)))
		goto out;
	uint8_t pd[12];
	setup_pd_write(pd, index, (uint32_t)f->iters);
	struct rdma_conn_param cp = {.private_data = pd,
				     .private_data_len = sizeof(pd),
				     .responder_resources = 1,
				     .initiator_depth = 1,
				     .retry_count = 7,
				     .rnr_retry_count = 7};
	if (rdma_connect(c.id, &cp)) {
		r = fail(f, "rdma_connect: %s", strerror(errno));
		goto out;
	}
	if ((r = expect_event(f, ch, c.id, RDMA_CM_EVENT_ESTABLISHED, may_retry)))
		goto out; /* 1: nobody listens yet */
	*ns = tool_now_ns() - t0;
	if (rdma_disconnect(c.id)) {
		r = fail(f, "rdma_disconnect: %s", strerror(errno));
		goto out;
	}
	r = expect_event(f, ch, c.id, RDMA_CM_EVENT_DISCONNECTED, false);
out:
	conn_free(&c, true);
	return r;
}

static int rdma_client(struct fl *f, struct stats *st)
{
	struct sockaddr_in dst;
	if (resolve_v4(f, &dst))
		return -1;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (!ch)
		return fail(f, "rdma_create_event_channel: %s", strerror(errno));
	int r = 0;
	uint64_t until = f->timeout_ns ? tool_now_ns() + f->timeout_ns : UINT64_MAX;
	for (uint32_t i = 0; i < f->iters && !r;) {
		uint64_t ns = 0;
		r = rdma_once(f, ch, &dst, i, i == 0, &ns);
		if (r == 1) { /* refused: the server is not listening yet */
			if (tool_now_ns() >= until) {
				r = fail(f,
					 "the server %s port %d refused the connection for %.1f s",
					 f->server, f->port, f->timeout_s);
				break;
			}
			r = stopped();
			usleep(50000);
			continue;
		}
		if (!r)
			r = add_sample(f, st, (double)ns);
		i++;
	}
	rdma_destroy_event_channel(ch);
	return r;
}

#define MAX_CONNS 16

static struct conn *conn_find(struct conn *cs, struct rdma_cm_id *id)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (cs[i].id == id)
			return &cs[i];
	return NULL;
}

static int rdma_server(struct fl *f)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid = NULL;
	struct conn cs[MAX_CONNS];
	memset(cs, 0, sizeof(cs));
	int r = 0;
	if (!ch)
		return fail(f, "rdma_create_event_channel: %s", strerror(errno));
	struct sockaddr_storage a;
	char why[160];
	if (!tool_listen_addr(AF_INET, (uint16_t)f->port, &a, why, sizeof(why))) {
		r = fail(f, "%s", why);
		goto out_channel;
	}
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP)) {
		r = fail(f, "rdma_create_id: %s", strerror(errno));
		goto out_channel;
	}
	if (rdma_bind_addr(lid, (struct sockaddr *)&a) || rdma_listen(lid, 16)) {
		r = fail(f, "cannot listen with rdma_cm on port %d: %s", f->port, strerror(errno));
		goto out_listener;
	}
	say(f, " Server: rdma_cm set-up on port %d, %llu connection(s) (%.1f s)\n", f->port,
	    (unsigned long long)f->iters, f->timeout_s);
	uint64_t done = 0;
	bool last_seen = false;
	while (done < f->iters) {
		struct rdma_cm_event e;
		bool pd_last = false;
		r = next_event(f, ch, &e, &pd_last,
			       done ? "the client vanished: no rdma_cm event"
				    : "no client connected");
		if (r)
			break;
		struct conn *c = conn_find(cs, e.id);
		switch (e.event) {
		case RDMA_CM_EVENT_CONNECT_REQUEST: {
			c = conn_find(cs, NULL);
			if (!c) {
				rdma_reject(e.id, NULL, 0);
				rdma_destroy_id(e.id);
				break;
			}
			c->id = e.id;
			struct rdma_conn_param cp = {
			    .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
			if ((r = conn_qp(f, c)))
				break;
			if (rdma_accept(c->id, &cp)) {
				r = fail(f, "rdma_accept: %s", strerror(errno));
				break;
			}
			last_seen |= pd_last;
			break;
		}
		case RDMA_CM_EVENT_ESTABLISHED:
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			if (!c)
				break;
			rdma_disconnect(c->id); /* our side too; already down is fine */
			conn_free(c, true);
			done++;
			break;
		default:
			r = fail(f, "%s (status %d) on a connection", rdma_event_str(e.event),
				 e.status);
			break;
		}
		if (r)
			break;
		/* Stop after the client's announced last connection is gone. */
		bool any = false;
		for (int i = 0; i < MAX_CONNS; i++)
			any |= cs[i].id != NULL;
		if (last_seen && !any)
			break;
	}
	for (int i = 0; i < MAX_CONNS; i++)
		conn_free(&cs[i], true);
	if (!r)
		say(f, " Server: %llu connection(s) set up and torn down\n",
		    (unsigned long long)done);
out_listener:
	rdma_destroy_id(lid);
out_channel:
	rdma_destroy_event_channel(ch);
	return r;
}

static int tcp_setup_client(struct fl *f, struct stats *st)
{
	struct sockaddr_in a;
	if (resolve_v4(f, &a))
		return -1;
	uint64_t until = f->timeout_ns ? tool_now_ns() + f->timeout_ns : UINT64_MAX;
	struct timeval tv = {
	    .tv_sec = (time_t)f->timeout_s,
	    .tv_usec = (suseconds_t)((f->timeout_s - (double)(time_t)f->timeout_s) * 1e6)};
	for (uint64_t i = 0; i < f->iters;) {
		if (stopped())
			return -EINTR;
		uint64_t t0 = tool_now_ns();
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return fail(f, "socket: %s", strerror(errno));
		/* connect() honours the send timeout: the wait stays bounded. */
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
		uint64_t t1 = tool_now_ns();
		int e = errno;
		if (r) {
			close(fd);
			if (e == ECONNREFUSED && i == 0 && t1 < until) {
				usleep(20000); /* the server is starting */
				continue;
			}
			if (e == EINTR && stopped())
				return -EINTR;
			return fail(f, TOOL_NO_SERVER " %s port %d: %s", f->server, f->port,
				    strerror(e == EINPROGRESS ? ETIMEDOUT : e));
		}
		char mark = i + 1 == f->iters ? 'L' : 'C';
		send(fd, &mark, 1, MSG_NOSIGNAL);
		close(fd);
		if ((r = add_sample(f, st, (double)(t1 - t0))))
			return r;
		i++;
	}
	return 0;
}

static int tcp_setup_server(struct fl *f)
{
	f->lfd = bind_server(f, SOCK_STREAM);
	if (f->lfd < 0)
		return -1;
	say(f, " Server: TCP set-up on port %d, %llu connection(s) (%.1f s)\n", f->port,
	    (unsigned long long)f->iters, f->timeout_s);
	uint64_t done;
	for (done = 0; done < f->iters; done++) {
		int fd = tcp_accept(f, done ? "further client" : "client");
		if (fd < 0)
			return fd;
		/* The client's mark, then its close: 'L' ends the run early. */
		char b[16];
		ssize_t n = 0;
		if (wait_fd(fd, POLLIN, timeout_ms(f)) > 0)
			n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		close(fd);
		if (n > 0 && memchr(b, 'L', (size_t)n)) {
			done++;
			break;
		}
	}
	say(f, " Server: %llu connection(s) accepted\n", (unsigned long long)done);
	return 0;
}

static int setup_run(struct fl *f)
{
	if (!f->client)
		return f->tcp ? tcp_setup_server(f) : rdma_server(f);
	struct stats st;
	stats_init(&st, NULL, 0);
	int r = f->tcp ? tcp_setup_client(f, &st) : rdma_client(f, &st);
	if (r)
		return r;
	double p50, p90;
	if (stats_finalize(&st) || stats_median(&st, &p50) || stats_percentile(&st, 90, &p90))
		return fail(f, "no samples");
	say(f, "%s\n                    Connection set-up: %s (softrdma)\n", dashes,
	    f->tcp ? "TCP connect()" : "rdma_cm");
	say(f, " Server          : %s port %d\n", f->server, f->port);
	if (f->device)
		say(f, " Device          : %s\n", f->device);
	say(f, " Sample          : %s\n%s\n",
	    f->tcp ? "socket() to connect() returning"
		   : "rdma_resolve_addr to ESTABLISHED (route, CQ, QP, connect)",
	    dashes);
	say(f, " #connections   min[ms]    p50[ms]    p90[ms]    max[ms]   mean[ms]\n");
	say(f, " %-12zu %9.3f  %9.3f  %9.3f  %9.3f  %9.3f\n%s\n", stats_count(&st),
	    stats_min(&st) / 1e6, p50 / 1e6, p90 / 1e6, stats_max(&st) / 1e6, stats_mean(&st) / 1e6,
	    dashes);
	sb_add(&f->row,
	       "\"samples\": %zu,\n  \"min_ms\": %.4f,\n  \"p50_ms\": %.4f,\n  \"p90_ms\": %.4f,\n"
	       "  \"max_ms\": %.4f,\n  \"mean_ms\": %.4f",
	       stats_count(&st), stats_min(&st) / 1e6, p50 / 1e6, p90 / 1e6, stats_max(&st) / 1e6,
	       stats_mean(&st) / 1e6);
	return 0;
}

int setup_main(int argc, char **argv)
{
	return run_main(true, argc, argv, setup_run);
}
