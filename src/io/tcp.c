/* The TCP socket backend for iWARP: listen, accept, non-blocking connect, zero-copy-friendly
 * receive into caller memory, gathered sends, counters, and the TCP faults of SOFTRDMA_FAULT
 * (tcp_reset, tcp_chunk, tcp_rx_chunk; semantics in io/fault.h). Contract and threads:
 * io/tcp.h. */
#define _GNU_SOURCE
#include "io/tcp.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/fault.h"
#include "io/forkdrop.h"
#include "util/sys.h"

/* The most entries of an iovec clipped by a fault: beyond them a call hands over (or takes)
 * fewer bytes, which the contract allows (a partial write, a short read). */
#define FAULT_IOV 64

/* Every socket of the process's listeners and connections is held for a fork's child
 * (io/forkdrop.h): at the fork, /dev/null takes the place of each, so that the child's copies
 * do not keep the parent's listener in its SO_REUSEPORT group, or its connections open, after
 * the parent closed them or ended (the peer would wait for a FIN, and connections for the
 * group would land in a socket nobody accepts from). The descriptor numbers stay taken until
 * the child's close; every call on them then fails (ENOTSOCK). */
struct io_tcp_listener {
	int fd;
	struct io_forkdrop_node held;
	uint16_t port;
	struct io_tcp_opts opts; /* applied to every accepted connection */
	_Atomic uint64_t cnt[IO_TCP_NCOUNTERS];
};

struct io_tcp_conn {
	int fd;
	struct io_forkdrop_node held;
	/* tx side (io_tcp_connect_done is a tx-side call) */
	bool connected;
	int conn_err; /* sticky connect failure, negative errno; 0 none */
	/* rx side */
	bool rx_eof;   /* recv saw the FIN: -ESHUTDOWN from now on */
	bool rx_reset; /* recv saw the RST: -ECONNRESET from now on */
	/* Fault injection, copied from the process's configuration at creation; 0 = off. */
	uint64_t f_reset_at;	      /* tcp_reset: reset once tx_sent reaches it */
	uint32_t f_chunk, f_rx_chunk; /* tcp_chunk, tcp_rx_chunk */
	uint64_t tx_sent;	      /* tx side: bytes handed to the kernel */
	atomic_bool f_reset;	      /* the tx side injected the reset: both sides fail */
	_Atomic uint64_t cnt[IO_TCP_NCOUNTERS];
};

/* The tcp_* keys of SOFTRDMA_FAULT, read once per process (fault_load). */
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static uint64_t fault_reset_at;
static uint32_t fault_chunk, fault_rx_chunk;
static _Atomic uint64_t fault_total[IO_TCP_NCOUNTERS]; /* io_tcp_fault_totals */

static const char *const counter_names[] = {
#define X_NAME(name, desc) #name,
    IO_TCP_COUNTERS(X_NAME)
#undef X_NAME
};

static const char *const counter_descs[] = {
#define X_DESC(name, desc) desc,
    IO_TCP_COUNTERS(X_DESC)
#undef X_DESC
};

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
static const uint8_t zero16[16];

/* Each counter has one writer (its side, tcp.h "Threads"): a relaxed load and store, no locked
 * instruction; readers on other threads see whole values. */
static void cnt_add(_Atomic uint64_t *cnt, enum io_tcp_counter c, uint64_t v)
{
	atomic_store_explicit(&cnt[c], atomic_load_explicit(&cnt[c], memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* A fault counter: the connection's (one writer) and the process's total (several). */
static void fault_count(struct io_tcp_conn *c, enum io_tcp_counter k)
{
	cnt_add(c->cnt, k, 1);
	atomic_fetch_add_explicit(&fault_total[k], 1, memory_order_relaxed);
}

static void fault_load(void)
{
	const char *spec = getenv(IO_FAULT_ENV);
	struct io_fault_cfg cfg;
	char err[160];

	if (!spec || !*spec)
		return;
	if (io_fault_parse(spec, &cfg, err, sizeof(err)) < 0) {
		/* No error channel here; the UDP side refuses to open the device instead. */
		fprintf(stderr, "softrdma: %s: %s (no TCP faults injected)\n", IO_FAULT_ENV, err);
		return;
	}
	fault_reset_at = cfg.tcp_reset;
	fault_chunk = cfg.tcp_chunk;
	fault_rx_chunk = cfg.tcp_rx_chunk;
}

/* Copies the first `limit` bytes of iov[0..n) (at most FAULT_IOV non-empty entries) into tmp.
 * Returns the entries used (>= 1 when limit >= 1 and the iovec holds bytes). */
static int clip_iov(const struct iovec *iov, int n, size_t limit, struct iovec *tmp)
{
	int k = 0;

	for (int i = 0; i < n && k < FAULT_IOV && limit > 0; i++) {
		if (iov[i].iov_len == 0)
			continue;
		tmp[k] = iov[i];
		if (tmp[k].iov_len > limit)
			tmp[k].iov_len = limit;
		limit -= tmp[k].iov_len;
		k++;
	}
	return k;
}

/* tcp_reset: an abortive close (RFC 793 ABORT: an RST, unsent bytes discarded) that keeps the
 * fd. The owner may have it in an epoll set and will close it itself (a close here could let
 * another thread's new fd take its number), so no close(): connect() to AF_UNSPEC is Linux's
 * tcp_disconnect(), which sends the RST from ESTABLISHED / CLOSE_WAIT and leaves an unconnected
 * socket (it polls EPOLLHUP, so a waiting progress thread wakes up). Tx side. */
static void fault_reset(struct io_tcp_conn *c)
{
	struct sockaddr sa = {.sa_family = AF_UNSPEC};
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)); /* the later close: no FIN */
	if (connect(c->fd, &sa, sizeof(sa)) != 0) {
		/* Already closed or reset by the peer: nothing left to abort. */
	}
	atomic_store_explicit(&c->f_reset, true, memory_order_release);
	fault_count(c, IO_TCP_C_fault_resets);
}

static bool is_v4mapped(const uint8_t *a)
{
	return memcmp(a, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0;
}

/* A sockaddr for addr:port, AF_INET for an IPv4-mapped address, AF_INET6 otherwise. */
static socklen_t make_sockaddr(const uint8_t *addr, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (is_v4mapped(addr)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;

		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, addr + 12, 4);
		return sizeof(*sin);
	}
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons(port);
	memcpy(&sin6->sin6_addr, addr, 16);
	return sizeof(*sin6);
}

/* The 16-byte form of a sockaddr (IPv4-mapped for AF_INET). -EAFNOSUPPORT for other families. */
static int from_sockaddr(const struct sockaddr_storage *ss, uint8_t *addr, uint16_t *port)
{
	uint8_t a[16];
	uint16_t p;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;

		memcpy(a, v4mapped_prefix, 12);
		memcpy(a + 12, &sin->sin_addr, 4);
		p = ntohs(sin->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

		memcpy(a, &sin6->sin6_addr, 16);
		p = ntohs(sin6->sin6_port);
	} else {
		return -EAFNOSUPPORT;
	}
	if (addr)
		memcpy(addr, a, 16);
	if (port)
		*port = p;
	return 0;
}

static int setopt_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val)) != 0 ? -errno : 0;
}

/* Buffer sizes: before listen/connect, so the window scale offered in the SYN fits them. The
 * kernel clamps them and never fails for a positive value. */
static int set_bufs(int fd, const struct io_tcp_opts *o)
{
	int err = 0;

	if (o->rcvbuf > 0)
		err = setopt_int(fd, SOL_SOCKET, SO_RCVBUF, o->rcvbuf);
	if (!err && o->sndbuf > 0)
		err = setopt_int(fd, SOL_SOCKET, SO_SNDBUF, o->sndbuf);
	return err;
}

/* The marks of opts (io_tcp_opts.tos, .priority): the priority after the TOS, which sets one of
 * its own (ip(7) IP_TOS). */
static int set_marks(int fd, const struct io_tcp_opts *o)
{
	int family = 0;
	socklen_t fl = sizeof(family);
	int err;

	if (!o->tos && !o->priority)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &family, &fl) != 0)
		return -errno;
	if (family == AF_INET6)
		err = setopt_int(fd, IPPROTO_IPV6, IPV6_TCLASS, o->tos);
	else
		err = setopt_int(fd, IPPROTO_IP, IP_TOS, o->tos);
	if (!err)
		err = setopt_int(fd, SOL_SOCKET, SO_PRIORITY, o->priority);
	return err;
}

int io_tcp_mark(struct io_tcp_conn *c, const struct io_tcp_opts *o)
{
	if (!c || !o)
		return -EINVAL;
	return set_marks(c->fd, o);
}

/* Per-connection options (siw_cm.c: TCP_NODELAY unless siw_tcp_nagle; no keepalive). */
static int set_conn_opts(int fd, const struct io_tcp_opts *o)
{
	int err = setopt_int(fd, IPPROTO_TCP, TCP_NODELAY, o->nagle ? 0 : 1);

	if (!err)
		err = setopt_int(fd, SOL_SOCKET, SO_KEEPALIVE, 0);
	if (!err)
		err = set_marks(fd, o);
	return err;
}

static struct io_tcp_conn *conn_new(int fd, bool connected)
{
	struct io_tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fd = fd;
	c->connected = connected;
	io_forkdrop_hold(&c->held, &c->fd);
	pthread_once(&fault_once, fault_load);
	c->f_reset_at = fault_reset_at;
	c->f_chunk = fault_chunk;
	c->f_rx_chunk = fault_rx_chunk;
	return c;
}

int io_tcp_listen(const uint8_t addr[16], uint16_t port, int backlog,
		  const struct io_tcp_opts *opts, struct io_tcp_listener **out)
{
	static const struct io_tcp_opts dflt;
	struct io_tcp_listener *l;
	struct sockaddr_storage ss;
	socklen_t sl;
	int fd, err;

	if (!addr || !out)
		return -EINVAL;
	if (!opts)
		opts = &dflt;
	sl = make_sockaddr(addr, port, &ss);
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->opts = *opts;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		goto fail_free;
	}
	err = setopt_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (!err && opts->reuseport)
		err = setopt_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	if (!err && ss.ss_family == AF_INET6)
		err = setopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	if (!err)
		err = set_bufs(fd, opts); /* inherited by accepted sockets */
	if (!err)
		err = set_marks(fd, opts); /* the SYN-ACKs */
	if (err)
		goto fail_close;
	if (bind(fd, (struct sockaddr *)&ss, sl) != 0 ||
	    listen(fd, backlog > 0 ? backlog : IO_TCP_DEFAULT_BACKLOG) != 0) {
		err = -errno;
		goto fail_close;
	}
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
		err = -errno;
		goto fail_close;
	}
	from_sockaddr(&ss, NULL, &l->port);
	l->fd = fd;
	io_forkdrop_hold(&l->held, &l->fd);
	*out = l;
	return 0;

fail_close:
	close(fd);
fail_free:
	free(l);
	return err;
}

void io_tcp_listener_close(struct io_tcp_listener *l)
{
	if (!l)
		return;
	io_forkdrop_release(&l->held);
	close(l->fd);
	free(l);
}

uint16_t io_tcp_listener_port(const struct io_tcp_listener *l)
{
	return l->port;
}

int io_tcp_listener_fd(const struct io_tcp_listener *l)
{
	return l->fd;
}

int io_tcp_accept(struct io_tcp_listener *l, struct io_tcp_conn **out, uint8_t peer_addr[16],
		  uint16_t *peer_port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct io_tcp_conn *c;
	int fd, err;

	if (!l || !out)
		return -EINVAL;
	do {
		fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0) {
		err = errno == EWOULDBLOCK ? -EAGAIN : -errno;
		cnt_add(l->cnt, err == -EAGAIN ? IO_TCP_C_accept_eagain : IO_TCP_C_accept_errors,
			1);
		return err;
	}
	err = set_conn_opts(fd, &l->opts);
	if (err)
		goto fail_close;
	c = conn_new(fd, true);
	if (!c) {
		err = -ENOMEM;
		goto fail_close;
	}
	if (peer_addr || peer_port)
		from_sockaddr(&ss, peer_addr, peer_port);
	cnt_add(l->cnt, IO_TCP_C_accepts, 1);
	*out = c;
	return 0;

fail_close:
	/* The peer sees a reset: we accepted and could not keep the connection. */
	close(fd);
	cnt_add(l->cnt, IO_TCP_C_accept_errors, 1);
	return err;
}

int io_tcp_adopt(int fd, const struct io_tcp_opts *opts, struct io_tcp_conn **out)
{
	static const struct io_tcp_opts dflt;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int type = 0, proto = 0;
	socklen_t tl = sizeof(type), pl = sizeof(proto);

	if (fd < 0 || !out)
		return -EINVAL;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) != 0)
		return -ENOTSOCK;
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &pl) != 0 || type != SOCK_STREAM ||
	    proto != IPPROTO_TCP)
		return -EPROTOTYPE;
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return -ENOTCONN;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return -EPROTOTYPE;
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
		return -errno;
	int err = set_conn_opts(fd, opts ? opts : &dflt);
	if (err)
		return err;
	struct io_tcp_conn *c = conn_new(fd, true);
	if (!c)
		return -ENOMEM;
	*out = c;
	return 0;
}

int io_tcp_connect(const uint8_t local_addr[16], uint16_t local_port, const uint8_t peer_addr[16],
		   uint16_t peer_port, const struct io_tcp_opts *opts, struct io_tcp_conn **out)
{
	static const struct io_tcp_opts dflt;
	struct sockaddr_storage peer, local;
	socklen_t peer_len, local_len = 0;
	struct io_tcp_conn *c;
	bool bind_local;
	int fd, err, rc;

	if (!peer_addr || !out || peer_port == 0)
		return -EINVAL;
	if (!opts)
		opts = &dflt;
	peer_len = make_sockaddr(peer_addr, peer_port, &peer);
	bind_local = local_port != 0 || (local_addr && memcmp(local_addr, zero16, 16) != 0);
	if (bind_local) {
		/* "Any" of the peer's family when only a port is given. */
		uint8_t any[16] = {0};

		if (is_v4mapped(peer_addr))
			memcpy(any, v4mapped_prefix, 12);
		if (local_addr && memcmp(local_addr, zero16, 16) != 0)
			memcpy(any, local_addr, 16);
		local_len = make_sockaddr(any, local_port, &local);
		if (local.ss_family != peer.ss_family)
			return -EINVAL;
	}
	fd = socket(peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	err = set_bufs(fd, opts);
	if (!err)
		err = set_conn_opts(fd, opts);
	if (!err && peer.ss_family == AF_INET6)
		err = setopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	if (!err && bind_local) {
		/* siw kernel_bindconnect: SO_REUSEADDR, bind to the rdma_cm address, connect */
		err = setopt_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
		/* An address without a port: the port is chosen by connect, from the free 4-tuples,
		 * instead of by bind, which checks the new port against every socket bound to the
		 * address (10,000 connections from 127.0.0.1 made each bind take milliseconds:
		 * perf showed inet_bhash2_conflict). Best effort: without it bind picks the port.
		 */
		if (!err && local_port == 0)
			(void)setopt_int(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1);
		if (!err && bind(fd, (struct sockaddr *)&local, local_len) != 0)
			err = -errno;
	}
	if (err)
		goto fail_close;
	do {
		rc = connect(fd, (struct sockaddr *)&peer, peer_len);
	} while (rc != 0 && errno == EINTR);
	if (rc != 0 && errno != EINPROGRESS) {
		err = -errno;
		goto fail_close;
	}
	c = conn_new(fd, rc == 0);
	if (!c) {
		err = -ENOMEM;
		goto fail_close;
	}
	cnt_add(c->cnt, IO_TCP_C_connects, 1);
	*out = c;
	return 0;

fail_close:
	close(fd);
	return err;
}

int io_tcp_connect_done(struct io_tcp_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(int);
	int soerr = 0;

	if (!c)
		return -EINVAL;
	if (c->conn_err)
		return c->conn_err;
	if (c->connected)
		return 0;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
		soerr = errno;
	if (soerr) {
		c->conn_err = -soerr;
		cnt_add(c->cnt,
			soerr == ECONNREFUSED ? IO_TCP_C_connect_refused : IO_TCP_C_connect_errors,
			1);
		return c->conn_err;
	}
	/* No error and a peer name: the three-way handshake is complete. */
	sl = sizeof(ss);
	if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) == 0) {
		c->connected = true;
		return 0;
	}
	return errno == ENOTCONN ? -EINPROGRESS : -errno;
}

int io_tcp_fd(const struct io_tcp_conn *c)
{
	return c->fd;
}

/* Common end of recv / recvmsg. */
static ssize_t rx_result(struct io_tcp_conn *c, ssize_t r)
{
	if (r > 0) {
		cnt_add(c->cnt, IO_TCP_C_rx_bytes, (uint64_t)r);
		return r;
	}
	if (r == 0) {
		/* RFC 793 FIN: orderly close. After a reset Linux also returns 0: keep saying
		 * "reset" then. */
		if (c->rx_reset)
			return -ECONNRESET;
		if (!c->rx_eof)
			cnt_add(c->cnt, IO_TCP_C_rx_eof, 1);
		c->rx_eof = true;
		return -ESHUTDOWN;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		cnt_add(c->cnt, IO_TCP_C_rx_eagain, 1);
		return -EAGAIN;
	}
	if (errno == ECONNRESET) {
		c->rx_reset = true;
		cnt_add(c->cnt, IO_TCP_C_rx_resets, 1);
		return -ECONNRESET;
	}
	cnt_add(c->cnt, IO_TCP_C_rx_errors, 1);
	return -errno;
}

/* Rx side: true once the tx side has injected a reset (then -ECONNRESET, as after an RST). */
static bool rx_fault_reset(struct io_tcp_conn *c)
{
	if (c->rx_reset)
		return true;
	if (!atomic_load_explicit(&c->f_reset, memory_order_acquire))
		return false;
	c->rx_reset = true;
	cnt_add(c->cnt, IO_TCP_C_rx_resets, 1);
	return true;
}

/* One buffer's recv (after the call's checks and counting): recv, which skips recvmsg's
 * copying in of the header and an array (about 50 ns a call here). */
static inline ssize_t recv_one(struct io_tcp_conn *c, void *dst, size_t len)
{
	ssize_t r;
	bool cut = c->f_rx_chunk && len > c->f_rx_chunk; /* tcp_rx_chunk */
	if (cut)
		len = c->f_rx_chunk;
	do {
		r = sys_recv(c->fd, dst, len, MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	if (cut && r == (ssize_t)len)
		fault_count(c, IO_TCP_C_fault_rx_chunks); /* the limit, not the data, ended it */
	return rx_result(c, r);
}

ssize_t io_tcp_recv(struct io_tcp_conn *c, void *dst, size_t len)
{
	if (!c || !dst || len == 0)
		return -EINVAL;
	cnt_add(c->cnt, IO_TCP_C_rx_calls, 1);
	if (rx_fault_reset(c))
		return -ECONNRESET;
	return recv_one(c, dst, len);
}

ssize_t io_tcp_recvv(struct io_tcp_conn *c, const struct iovec *iov, int n)
{
	size_t total = 0;
	ssize_t r;

	if (!c || !iov || n <= 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (total == 0)
		return -EINVAL; /* a 0 from the kernel would be ambiguous with EOF */
	cnt_add(c->cnt, IO_TCP_C_rx_calls, 1);
	if (rx_fault_reset(c))
		return -ECONNRESET;
	/* One buffer: a small message's read, and most polls, which find nothing. */
	if (n == 1)
		return recv_one(c, iov[0].iov_base, iov[0].iov_len);
	struct msghdr msg = {.msg_iov = (struct iovec *)iov, /* recvmsg does not write it */
			     .msg_iovlen = (size_t)n};
	struct iovec clip[FAULT_IOV];
	bool cut = c->f_rx_chunk && total > c->f_rx_chunk; /* tcp_rx_chunk */
	if (cut) {
		msg.msg_iov = clip;
		msg.msg_iovlen = (size_t)clip_iov(iov, n, c->f_rx_chunk, clip);
	}
	/* One buffer left by the clip: recv, as recv_one. */
	do {
		r = msg.msg_iovlen == 1 ? sys_recv(c->fd, msg.msg_iov[0].iov_base,
						   msg.msg_iov[0].iov_len, MSG_DONTWAIT)
					: sys_recvmsg(c->fd, &msg, MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	if (cut && r == (ssize_t)c->f_rx_chunk)
		fault_count(c, IO_TCP_C_fault_rx_chunks);
	return rx_result(c, r);
}

/* What a send of total bytes returned (r, errno), counted; chunk: the tcp_chunk limit that
 * cut it (0: none). */
static ssize_t tx_result(struct io_tcp_conn *c, ssize_t r, size_t total, size_t chunk)
{
	if (r >= 0) {
		cnt_add(c->cnt, IO_TCP_C_tx_bytes, (uint64_t)r);
		if ((size_t)r < total)
			cnt_add(c->cnt, IO_TCP_C_tx_partial, 1);
		if (chunk && (size_t)r == chunk)
			fault_count(c, IO_TCP_C_fault_tx_chunks); /* the limit ended it */
		c->tx_sent += (uint64_t)r;
		if (c->f_reset_at && c->tx_sent >= c->f_reset_at)
			fault_reset(c); /* these bytes were taken; the next call fails */
		return r;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		cnt_add(c->cnt, IO_TCP_C_tx_eagain, 1);
		return -EAGAIN;
	}
	if (errno == ECONNRESET || errno == EPIPE) {
		cnt_add(c->cnt, IO_TCP_C_tx_resets, 1);
		return -errno;
	}
	cnt_add(c->cnt, IO_TCP_C_tx_errors, 1);
	return -errno;
}

ssize_t io_tcp_sendv(struct io_tcp_conn *c, const struct iovec *iov, int n)
{
	struct msghdr msg = {0};
	size_t total = 0;
	ssize_t r;

	if (!c || (!iov && n > 0) || n < 0 || n > IOV_MAX)
		return -EINVAL;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (total == 0)
		return 0;
	cnt_add(c->cnt, IO_TCP_C_tx_calls, 1);
	if (atomic_load_explicit(&c->f_reset, memory_order_relaxed)) {
		cnt_add(c->cnt, IO_TCP_C_tx_resets, 1);
		return -ECONNRESET;
	}
	msg.msg_iov = (struct iovec *)iov; /* sendmsg does not write the array */
	msg.msg_iovlen = (size_t)n;
	/* Fault injection: hand over at most tcp_chunk bytes, and no byte past tcp_reset. */
	struct iovec clip[FAULT_IOV];
	size_t limit = SIZE_MAX, chunk = 0;
	if (c->f_chunk && total > c->f_chunk)
		limit = chunk = c->f_chunk;
	if (c->f_reset_at && c->f_reset_at - c->tx_sent < limit) {
		limit = (size_t)(c->f_reset_at - c->tx_sent); /* >= 1: the reset came at 0 */
		chunk = 0;				      /* tcp_reset's cut, not tcp_chunk's */
	}
	if (limit < total) {
		msg.msg_iov = clip;
		msg.msg_iovlen = (size_t)clip_iov(iov, n, limit, clip);
	}
	/* A small message (a 100 B SEND is a header, the payload and a CRC: three pieces) goes
	 * as one buffer through send: the kernel's gather of an array cost about 75 ns per send
	 * here (TCP ping-pong of 124 B, sendmsg of 3 pieces against send of one). */
	char one[IO_TCP_GATHER_MAX];
	bool gather = msg.msg_iovlen > 1 && total <= sizeof(one) && limit >= total;
	if (gather)
		for (size_t i = 0, at = 0; i < msg.msg_iovlen; at += msg.msg_iov[i].iov_len, i++)
			memcpy(one + at, msg.msg_iov[i].iov_base, msg.msg_iov[i].iov_len);
	do {
		if (gather)
			r = sys_send(c->fd, one, total, MSG_NOSIGNAL | MSG_DONTWAIT);
		else if (msg.msg_iovlen == 1)
			r = sys_send(c->fd, msg.msg_iov[0].iov_base, msg.msg_iov[0].iov_len,
				     MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			r = sys_sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	return tx_result(c, r, total, chunk);
}

ssize_t io_tcp_send(struct io_tcp_conn *c, const void *buf, size_t len)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	ssize_t r;

	if (!buf && len)
		return -EINVAL;
	/* Without tcp_chunk or tcp_reset on c (the usual case) one buffer goes straight to the
	 * kernel: io_tcp_sendv's array, limits and gather are for the rest. */
	if (!c || !len || c->f_chunk || c->f_reset_at)
		return io_tcp_sendv(c, &iov, 1);
	cnt_add(c->cnt, IO_TCP_C_tx_calls, 1);
	if (atomic_load_explicit(&c->f_reset, memory_order_relaxed)) {
		cnt_add(c->cnt, IO_TCP_C_tx_resets, 1);
		return -ECONNRESET;
	}
	do {
		r = sys_send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (r < 0 && errno == EINTR);
	return tx_result(c, r, len, 0);
}

int io_tcp_shutdown(struct io_tcp_conn *c)
{
	if (!c)
		return -EINVAL;
	return shutdown(c->fd, SHUT_WR) != 0 ? -errno : 0;
}

void io_tcp_close(struct io_tcp_conn *c)
{
	if (!c)
		return;
	io_forkdrop_release(&c->held);
	close(c->fd);
	free(c);
}

void io_tcp_abort(struct io_tcp_conn *c)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	if (!c)
		return;
	/* RFC 793 abort: with a zero linger time close() sends RST instead of FIN. */
	setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	io_forkdrop_release(&c->held);
	close(c->fd);
	free(c);
}

int io_tcp_mss(const struct io_tcp_conn *c)
{
	int mss = 0;
	socklen_t sl = sizeof(mss);

	if (!c)
		return -EINVAL;
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &sl) != 0)
		return -errno;
	return mss > 0 ? mss : -ENOTCONN;
}

int io_tcp_bufsizes(const struct io_tcp_conn *c, int *rcvbuf, int *sndbuf)
{
	socklen_t sl = sizeof(int);

	if (!c)
		return -EINVAL;
	if (rcvbuf && getsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, rcvbuf, &sl) != 0)
		return -errno;
	sl = sizeof(int);
	if (sndbuf && getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, sndbuf, &sl) != 0)
		return -errno;
	return 0;
}

int io_tcp_local(const struct io_tcp_conn *c, uint8_t addr[16], uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (!c)
		return -EINVAL;
	if (getsockname(c->fd, (struct sockaddr *)&ss, &sl) != 0)
		return -errno;
	return from_sockaddr(&ss, addr, port);
}

int io_tcp_peer(const struct io_tcp_conn *c, uint8_t addr[16], uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (!c)
		return -EINVAL;
	if (getpeername(c->fd, (struct sockaddr *)&ss, &sl) != 0)
		return -errno;
	return from_sockaddr(&ss, addr, port);
}

void io_tcp_counters(const struct io_tcp_conn *c, uint64_t out[IO_TCP_NCOUNTERS])
{
	for (int i = 0; i < IO_TCP_NCOUNTERS; i++)
		out[i] = atomic_load_explicit(&c->cnt[i], memory_order_relaxed);
}

void io_tcp_listener_counters(const struct io_tcp_listener *l, uint64_t out[IO_TCP_NCOUNTERS])
{
	for (int i = 0; i < IO_TCP_NCOUNTERS; i++)
		out[i] = atomic_load_explicit(&l->cnt[i], memory_order_relaxed);
}

void io_tcp_fault_totals(uint64_t out[IO_TCP_NCOUNTERS])
{
	pthread_once(&fault_once, fault_load);
	for (int i = 0; i < IO_TCP_NCOUNTERS; i++)
		out[i] = atomic_load_explicit(&fault_total[i], memory_order_relaxed);
}

const char *io_tcp_counter_name(enum io_tcp_counter c)
{
	return (unsigned)c < IO_TCP_NCOUNTERS ? counter_names[c] : NULL;
}

const char *io_tcp_counter_desc(enum io_tcp_counter c)
{
	return (unsigned)c < IO_TCP_NCOUNTERS ? counter_descs[c] : NULL;
}
