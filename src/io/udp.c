/* The RoCEv2 UDP socket backend: batched receive and send, source-port sockets, counters.
 * Steering between processes lives in steer.c. Contract and threads: io.h. */
#define _GNU_SOURCE
#include "io/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <netinet/in.h>
#include <pthread.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/io_int.h"
#include "io/mcast.h"
#include "io/steer.h"
#include "util/sys.h"

#define SPORT_RCVBUF 4096 /* source-port sockets never receive RoCE traffic */

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103 /* linux/udp.h, Linux 4.18 */
#endif
#ifndef UDP_GRO
#define UDP_GRO 104 /* linux/udp.h, Linux 5.0 */
#endif

/* A coalesced datagram (UDP_GRO) is at most 64 KiB. */
#define GRO_ROOM 65536u

/* TOS / TCLASS, TTL / HOPLIMIT (ints) and UDP_SEGMENT (a u16). */
#define TX_CTL_LEN (2 * CMSG_SPACE(sizeof(int)) + CMSG_SPACE(sizeof(uint16_t)))

union ctl_tx {
	struct cmsghdr align;
	char buf[TX_CTL_LEN];
};

struct sport_ent {
	uint16_t port;
	uint32_t refs;
	int fd; /* -1: the bind was refused, packets leave from the main socket */
};

struct io_udp {
	int fd; /* main socket: receives, sends sport == port and fallbacks */
	int family;
	uint16_t port;
	uint8_t addr[16];
	int rcvbuf, sndbuf;
	int ifindex;
	uint8_t tos, priority; /* the sockets' own (io_udp_config) */
	struct io_steer *steer;
	_Atomic uint64_t cnt[IO_UDP_NCOUNTERS];

	/* tx side: source-port sockets, sorted by port (binary search on the data path) */
	struct sport_ent *sports;
	uint32_t nsports, capsports;
	atomic_bool gso; /* trains accepted (io_udp_gso) */
	struct mmsghdr tx_msg[IO_UDP_BATCH];
	/* message m's packets, each in one piece or three (io_pkt.ext): its msg_iov */
	struct iovec tx_iov[3 * IO_UDP_BATCH];
	uint8_t tx_npk[IO_UDP_BATCH];
	uint8_t tx_niov1[IO_UDP_BATCH];		   /* iovecs of message m's first packet */
	struct sockaddr_in6 tx_name[IO_UDP_BATCH]; /* or sockaddr_in */
	union ctl_tx tx_ctl[IO_UDP_BATCH];

	struct io_rx_batch rx;
	/* GRO (io.h): UDP_GRO on the main socket. Datagrams land in rooms of GRO_ROOM bytes
	 * (gro_pkts[i].buf, in gro_mem) and are cut into the datagrams they coalesce, each
	 * copied into a caller's buffer; what did not fit waits for the next io_udp_recv:
	 * message gro_msg of the gro_got of the last receive, from byte gro_off. */
	bool gro;
	uint8_t *gro_mem;
	struct io_pkt gro_pkts[IO_UDP_BATCH];
	int gro_got, gro_msg;
	size_t gro_off;
	atomic_bool gro_held; /* gro_msg < gro_got, for io_udp_pending without the rx side */

	/* The process's io_udps (live, under live_lock), for a fork's child: its copies of the
	 * sockets and registry are dropped at the fork (fork_child), and io_udp_close of an
	 * orphan frees what is left without touching the parent's membership. */
	struct io_udp *live_next, **live_prev;
	bool orphan;
};

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct io_udp *live;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_mutex_lock(&live_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&live_lock);
}

/* In a fork's child: /dev/null takes the place of each socket of the parent's io_udps (the
 * descriptor numbers stay taken, so nothing else gets them before io_udp_close), and the
 * registry's file and mapping go. Otherwise the child's references keep the parent's socket
 * in the reuseport group, and its liveness lock in the registry, after the parent closed it
 * or ended: the kernel then steers packets to a socket nobody reads (io.h). */
static void fork_child(void)
{
	int nul = live ? open("/dev/null", O_RDWR | O_CLOEXEC) : -1;
	for (struct io_udp *io = live; io && nul >= 0; io = io->live_next) {
		dup3(nul, io->fd, O_CLOEXEC);
		for (uint32_t i = 0; i < io->nsports; i++)
			if (io->sports[i].fd >= 0)
				dup3(nul, io->sports[i].fd, O_CLOEXEC);
		io_steer_forked(io->steer);
		io->orphan = true;
	}
	if (nul >= 0)
		close(nul);
	pthread_mutex_unlock(&live_lock);
}

static void fork_register(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void live_add(struct io_udp *io)
{
	pthread_once(&fork_once, fork_register);
	pthread_mutex_lock(&live_lock);
	io->live_next = live;
	io->live_prev = &live;
	if (live)
		live->live_prev = &io->live_next;
	live = io;
	pthread_mutex_unlock(&live_lock);
}

static void live_remove(struct io_udp *io)
{
	pthread_mutex_lock(&live_lock);
	*io->live_prev = io->live_next;
	if (io->live_next)
		io->live_next->live_prev = io->live_prev;
	pthread_mutex_unlock(&live_lock);
}

static const char *const counter_names[] = {
#define X_NAME(name, desc) #name,
    IO_UDP_COUNTERS(X_NAME)
#undef X_NAME
};

static const char *const counter_descs[] = {
#define X_DESC(name, desc) desc,
    IO_UDP_COUNTERS(X_DESC)
#undef X_DESC
};

static void cnt_add(struct io_udp *io, enum io_udp_counter c, uint64_t v)
{
	io_cnt_add(&io->cnt[c], v);
}

static const uint8_t v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

static bool is_v4mapped(const uint8_t *a)
{
	return memcmp(a, v4mapped_prefix, sizeof(v4mapped_prefix)) == 0;
}

/* Fills a sockaddr for addr (IPv4-mapped when family is AF_INET) and port. Returns its length,
 * or 0 when addr does not belong to the family. */
static socklen_t make_sockaddr(int family, const uint8_t *addr, uint16_t port,
			       struct sockaddr_in6 *out)
{
	if (family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)out;
		if (!is_v4mapped(addr))
			return 0;
		memset(sin, 0, sizeof(*sin));
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		memcpy(&sin->sin_addr, addr + 12, 4);
		return sizeof(*sin);
	}
	if (is_v4mapped(addr))
		return 0;
	memset(out, 0, sizeof(*out));
	out->sin6_family = AF_INET6;
	out->sin6_port = htons(port);
	memcpy(&out->sin6_addr, addr, 16);
	return sizeof(*out);
}

static int setopt_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val)) != 0 ? -errno : 0;
}

/* A non-blocking, unconnected UDP socket with DF on every packet and never locally fragmented:
 * with these, Linux sends IPv4 ID 0 (io.h). `main` adds the receive-side options. */
static int make_socket(const struct io_udp *io, bool main, int *out)
{
	int fd = socket(io->family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0;

	if (fd < 0)
		return -errno;
	if (!main)
		err = setopt_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	/* Main socket: SO_REUSEPORT only. With SO_REUSEADDR too, UDP would let us share a port
	 * with a foreign SO_REUSEADDR socket outside the reuseport group. */
	if (!err)
		err = setopt_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	/* The traffic class and TTL a packet gets without ancillary data (build_tx). */
	if (!err && io->family == AF_INET) {
		err = setopt_int(fd, IPPROTO_IP, IP_TOS, io->tos);
		if (!err)
			err = setopt_int(fd, IPPROTO_IP, IP_TTL, IO_UDP_SOCK_TTL);
	} else if (!err) {
		err = setopt_int(fd, IPPROTO_IPV6, IPV6_TCLASS, io->tos);
		if (!err)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, IO_UDP_SOCK_TTL);
	}
	/* After the TOS, which sets a priority of its own. Priorities 0-6 need no privilege. */
	if (!err)
		err = setopt_int(fd, SOL_SOCKET, SO_PRIORITY, io->priority);
	if (!err && io->family == AF_INET) {
		err = setopt_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
		if (!err && main)
			err = setopt_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
		if (!err && main)
			err = setopt_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
		if (!err && main)
			err = setopt_int(fd, IPPROTO_IP, IP_RECVTTL, 1);
	} else if (!err) {
		err = setopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
		if (!err)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
		/* rxe sends flow label 0 (prepare_ipv6_hdr); the ICRC masks it, but matching rxe
		 * keeps captures comparable. Best effort: old kernels lack the option. */
		if (!err)
			setopt_int(fd, IPPROTO_IPV6, IPV6_AUTOFLOWLABEL, 0);
		if (!err && main)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
		if (!err && main)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
		if (!err && main)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
	}
	/* Multicast to a group (UD, io/mcast.h) leaves through the device's interface, and a copy
	 * comes back to the host's members (IP_MULTICAST_LOOP stays on, as rxe's packets loop
	 * back). Best effort: unicast does not need it. */
	if (!err && io->ifindex > 0) {
		if (io->family == AF_INET) {
			struct ip_mreqn mr = {.imr_ifindex = io->ifindex};
			(void)setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr));
		} else {
			(void)setopt_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, io->ifindex);
		}
	}
	/* Buffer sizes are hints: the kernel clamps them to its limits, never fails them. The
	 * receive buffer bounds what a burst can deliver before the progress loop runs; past it
	 * the kernel drops and RC has to retransmit, so ask beyond net.core.rmem_max when we
	 * may (SO_RCVBUFFORCE needs CAP_NET_ADMIN). */
	if (!err && main && io->rcvbuf > 0 &&
	    setopt_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, io->rcvbuf) != 0)
		setopt_int(fd, SOL_SOCKET, SO_RCVBUF, io->rcvbuf);
	if (!err && !main)
		setopt_int(fd, SOL_SOCKET, SO_RCVBUF, SPORT_RCVBUF);
	if (!err && io->sndbuf > 0 && setopt_int(fd, SOL_SOCKET, SO_SNDBUFFORCE, io->sndbuf) != 0)
		setopt_int(fd, SOL_SOCKET, SO_SNDBUF, io->sndbuf);
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/* Rooms for coalesced datagrams, then UDP_GRO; without either, datagrams come one by one. The
 * rooms are address space until a large datagram touches them. */
static void gro_setup(struct io_udp *io)
{
	void *m = mmap(NULL, (size_t)IO_UDP_BATCH * GRO_ROOM, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return;
	if (setopt_int(io->fd, IPPROTO_UDP, UDP_GRO, 1) != 0) {
		munmap(m, (size_t)IO_UDP_BATCH * GRO_ROOM);
		return;
	}
	io->gro_mem = m;
	for (int i = 0; i < IO_UDP_BATCH; i++) {
		io->gro_pkts[i].buf = io->gro_mem + (size_t)i * GRO_ROOM;
		io->gro_pkts[i].cap = GRO_ROOM;
	}
	io->gro = true;
}

int io_udp_open(const struct io_udp_config *cfg, struct io_udp **out)
{
	static const uint8_t zero[16];
	struct sockaddr_in6 sa;
	socklen_t salen;
	struct io_udp *io;
	int err;

	if (!cfg || !out || (cfg->family != AF_INET && cfg->family != AF_INET6))
		return -EINVAL;
	if (memcmp(cfg->addr, zero, 16) == 0 ||
	    (is_v4mapped(cfg->addr) && memcmp(cfg->addr + 12, zero, 4) == 0))
		return -EINVAL;
	io = calloc(1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	io->family = cfg->family;
	io->port = cfg->port ? cfg->port : IO_UDP_DEFAULT_PORT;
	memcpy(io->addr, cfg->addr, 16);
	io->rcvbuf = cfg->rcvbuf;
	io->sndbuf = cfg->sndbuf;
	io->ifindex = cfg->ifindex > 0 ? cfg->ifindex : 0;
	io->tos = cfg->tos;
	io->priority = cfg->priority;
	salen = make_sockaddr(io->family, io->addr, io->port, &sa);
	if (!salen) {
		err = -EINVAL;
		goto fail_free;
	}
	err = make_socket(io, true, &io->fd);
	if (err)
		goto fail_free;

	struct io_steer_cfg scfg = {
	    .family = io->family,
	    .port = io->port,
	    .slot = cfg->slot,
	    .check_ms = cfg->check_interval_ms ? cfg->check_interval_ms : IO_UDP_DEFAULT_CHECK_MS,
	    .dir = cfg->registry_dir,
	    .counters = io->cnt,
	};
	memcpy(scfg.addr, io->addr, 16);
	/* GSO trains and GRO (io.h): not refused (SOFTRDMA_GSO=0), and known to the kernel. */
	const char *gso = getenv(IO_UDP_GSO_ENV);
	bool gso_on = !(gso && strcmp(gso, "0") == 0);
	if (gso_on && setopt_int(io->fd, IPPROTO_UDP, UDP_SEGMENT, 0) == 0)
		atomic_store_explicit(&io->gso, true, memory_order_relaxed);
	if (gso_on)
		gro_setup(io);
	err = io_steer_join(&scfg, io->fd, (const struct sockaddr *)&sa, salen, &io->steer);
	if (err)
		goto fail_close;
	live_add(io);
	*out = io;
	return 0;

fail_close:
	close(io->fd);
fail_free:
	free(io);
	return err;
}

void io_udp_close(struct io_udp *io)
{
	if (!io)
		return;
	live_remove(io);
	for (uint32_t i = 0; i < io->nsports; i++) {
		if (io->sports[i].fd >= 0)
			close(io->sports[i].fd);
	}
	free(io->sports);
	if (io->orphan)
		io_steer_abandon(io->steer, io->fd); /* a fork's copy: the parent's group */
	else
		io_steer_leave(io->steer, io->fd); /* closes io->fd at the right moment */
	if (io->gro_mem)
		munmap(io->gro_mem, (size_t)IO_UDP_BATCH * GRO_ROOM);
	free(io);
}

uint8_t io_udp_slot(const struct io_udp *io)
{
	return io_steer_slot(io->steer);
}

uint16_t io_udp_port(const struct io_udp *io)
{
	return io->port;
}

int io_udp_fd(const struct io_udp *io)
{
	return io->fd;
}

/* ---- receive ---- */

static void to_mapped(uint8_t *dst, const void *v4)
{
	memcpy(dst, v4mapped_prefix, 12);
	memcpy(dst + 12, v4, 4);
}

/* Fills the addressing of pkt from the sender's name and the control messages (io_int.h). */
bool io_rx_fill(int family, uint16_t port, struct io_pkt *pkt, const struct msghdr *mh)
{
	bool have_dst = false;

	pkt->ipv6 = family == AF_INET6;
	pkt->dport = port;
	pkt->tos = 0;
	pkt->ttl = 0;
	pkt->train = 0; /* alone; recv_gro numbers a coalesced datagram's packets */
	if (family == AF_INET) {
		const struct sockaddr_in *sin = mh->msg_name;
		to_mapped(pkt->src, &sin->sin_addr);
		pkt->sport = ntohs(sin->sin_port);
	} else {
		const struct sockaddr_in6 *sin6 = mh->msg_name;
		memcpy(pkt->src, &sin6->sin6_addr, 16);
		pkt->sport = ntohs(sin6->sin6_port);
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR((struct msghdr *)mh, c)) {
		const unsigned char *d = CMSG_DATA(c);
		int v;
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
			struct in_pktinfo pi;
			memcpy(&pi, d, sizeof(pi));
			to_mapped(pkt->dst, &pi.ipi_addr); /* the header's destination */
			have_dst = true;
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
			pkt->tos = d[0]; /* one byte (ip_cmsg_recv_tos) */
		} else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
			memcpy(&v, d, sizeof(v));
			pkt->ttl = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
			struct in6_pktinfo pi;
			memcpy(&pi, d, sizeof(pi));
			memcpy(pkt->dst, &pi.ipi6_addr, 16);
			have_dst = true;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
			memcpy(&v, d, sizeof(v));
			pkt->tos = (uint8_t)v;
		} else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
			memcpy(&v, d, sizeof(v));
			pkt->ttl = (uint8_t)v;
		}
	}
	return have_dst;
}

int io_rx_batch_recv(struct io_rx_batch *b, int fd, const struct io_pkt *pkts, int n, bool fixed)
{
	for (int i = b->ready; i < n; i++) {
		b->msg[i].msg_hdr = (struct msghdr){
		    .msg_name = &b->name[i],
		    .msg_namelen = sizeof(b->name[i]),
		    .msg_iov = &b->iov[i],
		    .msg_iovlen = 1,
		    .msg_control = b->ctl[i].buf,
		    .msg_controllen = sizeof(b->ctl[i].buf),
		};
		b->iov[i] = (struct iovec){0};
	}
	if (n > b->ready)
		b->ready = n;
	/* recvmmsg wrote back the name and control lengths of what it delivered; the rest of a
	 * header is only read by the kernel. */
	for (int i = 0; i < b->used; i++) {
		b->msg[i].msg_hdr.msg_namelen = sizeof(b->name[i]);
		b->msg[i].msg_hdr.msg_controllen = sizeof(b->ctl[i].buf);
	}
	b->used = 0;
	/* The caller's buffers: usually the ones of the last call (a receiver reuses its array,
	 * and io_rx_keep's permutations are mirrored in iov), so one pass without branches finds
	 * them unchanged. */
	if (!fixed || pkts != b->fixed_src || n > b->fixed_n) {
		b->fixed_src = NULL; /* until iov is known to match a fixed array again */
		uintptr_t diff = 0;
		for (int i = 0; i < n; i++)
			diff |= ((uintptr_t)b->iov[i].iov_base ^ (uintptr_t)pkts[i].buf) |
				(b->iov[i].iov_len ^ pkts[i].cap);
		for (int i = 0; diff && i < n; i++) {
			if (!pkts[i].buf || pkts[i].cap == 0)
				return -EINVAL;
			b->iov[i].iov_base = pkts[i].buf;
			b->iov[i].iov_len = pkts[i].cap;
		}
		if (fixed) {
			b->fixed_src = pkts;
			b->fixed_n = n;
		}
	}
	int got = sys_recvmmsg(fd, b->msg, (unsigned)n, MSG_DONTWAIT);
	if (got < 0) {
		int err = errno;
		return err == EAGAIN || err == EWOULDBLOCK || err == EINTR ? 0 : -err;
	}
	b->used = got;
	return got;
}

static void fill_rx(struct io_udp *io, struct io_pkt *pkt, const struct msghdr *mh)
{
	if (!io_rx_fill(io->family, io->port, pkt, mh)) {
		/* The socket is bound to one address, so that is where the packet went. */
		memcpy(pkt->dst, io->addr, 16);
		cnt_add(io, IO_UDP_C_rx_no_pktinfo, 1);
	}
}

/* The segment size of a coalesced datagram (its UDP_GRO control message), or 0. */
static size_t gro_size(const struct msghdr *mh)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR((struct msghdr *)mh, c))
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof(v));
			return v > 0 ? (size_t)v : 0;
		}
	return 0;
}

static void copy_addressing(struct io_pkt *to, const struct io_pkt *from)
{
	to->ipv6 = from->ipv6;
	memcpy(to->src, from->src, 16);
	memcpy(to->dst, from->dst, 16);
	to->sport = from->sport;
	to->dport = from->dport;
	to->tos = from->tos;
	to->ttl = from->ttl;
}

/* Whether a received datagram of len bytes at d goes to the caller: not a runt, and steering
 * delivers it here (io_steer_rx handles probes and other members' packets). */
static bool rx_take(struct io_udp *io, const uint8_t *d, size_t len)
{
	if (len < IO_BTH_LEN) {
		cnt_add(io, IO_UDP_C_rx_runt, 1);
		return false;
	}
	return io_steer_rx(io->steer, d, len) == IO_STEER_DELIVER;
}

/* io_udp_recv with GRO: cuts the received datagrams into the datagrams they coalesce (every
 * gso_size bytes, the last one shorter), each checked and copied into pkts[out] in order, or
 * with `view` left in place, pkts[out].buf pointing at it (io_udp_recv_view). */
static int recv_gro(struct io_udp *io, struct io_pkt *pkts, int n, bool view, size_t max_len)
{
	uint64_t bytes = 0;
	int out = 0;

	for (int i = 0; i < n && !view; i++)
		if (!pkts[i].buf || pkts[i].cap == 0)
			return -EINVAL;
	if (io->gro_msg >= io->gro_got) {
		int got = io_rx_batch_recv(&io->rx, io->fd, io->gro_pkts, n, true);
		if (got < 0) {
			cnt_add(io, IO_UDP_C_rx_errors, 1);
			return got;
		}
		io->gro_got = got;
		io->gro_msg = 0;
		io->gro_off = 0;
	}
	while (out < n && io->gro_msg < io->gro_got) {
		int i = io->gro_msg;
		const struct msghdr *mh = &io->rx.msg[i].msg_hdr;
		size_t len = io->rx.msg[i].msg_len;
		size_t seg = gro_size(mh);
		if (mh->msg_flags & MSG_TRUNC) {
			cnt_add(io, IO_UDP_C_rx_truncated, 1);
			len = 0; /* skip the message */
		}
		if (seg == 0 || seg > len)
			seg = len;
		else if (io->gro_off == 0 && seg < len)
			cnt_add(io, IO_UDP_C_rx_gro, 1);
		struct io_pkt addr = {0};
		if (len)
			fill_rx(io, &addr, mh);
		const uint8_t *base = io->gro_pkts[i].buf;
		while (out < n && io->gro_off < len) {
			const uint8_t *d = base + io->gro_off;
			size_t l = len - io->gro_off < seg ? len - io->gro_off : seg;
			io->gro_off += l;
			if (!rx_take(io, d, l))
				continue;
			if (view && l > max_len) {
				cnt_add(io, IO_UDP_C_rx_truncated, 1);
				continue;
			}
			if (view) {
				/* io's room: read-only for the caller */
				pkts[out].buf = (uint8_t *)d;
				pkts[out].cap = l;
			} else if (l > pkts[out].cap) {
				/* A later entry with room takes it (entries may be permuted,
				 * io.h); with none, it is dropped as too large. */
				int k = out + 1;
				while (k < n && l > pkts[k].cap)
					k++;
				if (k == n) {
					cnt_add(io, IO_UDP_C_rx_truncated, 1);
					continue;
				}
				struct io_pkt tmp = pkts[out];
				pkts[out] = pkts[k];
				pkts[k] = tmp;
			}
			if (!view)
				memcpy(pkts[out].buf, d, l);
			pkts[out].len = l;
			copy_addressing(&pkts[out], &addr);
			size_t place = seg ? (io->gro_off - l) / seg : 0;
			pkts[out].train = (uint8_t)(place < 255 ? place : 255);
			bytes += l;
			out++;
		}
		if (io->gro_off >= len) {
			io->gro_msg++;
			io->gro_off = 0;
		}
	}
	atomic_store_explicit(&io->gro_held, io->gro_msg < io->gro_got, memory_order_relaxed);
	cnt_add(io, IO_UDP_C_rx_packets, (uint64_t)out);
	cnt_add(io, IO_UDP_C_rx_bytes, bytes);
	io_steer_rx_done(io->steer);
	return out;
}

bool io_udp_gro(const struct io_udp *io)
{
	return io && io->gro;
}

bool io_udp_pending(const struct io_udp *io)
{
	return io && atomic_load_explicit(&io->gro_held, memory_order_relaxed);
}

/* io_udp_recv without GRO: the datagrams straight into the caller's buffers. */
static int recv_plain(struct io_udp *io, struct io_pkt *pkts, int n)
{
	uint64_t bytes = 0;
	int out = 0;
	int got = io_rx_batch_recv(&io->rx, io->fd, pkts, n, false);
	if (got < 0) {
		if (got != -EINVAL) /* -EINVAL: a bad buffer, nothing received */
			cnt_add(io, IO_UDP_C_rx_errors, 1);
		return got;
	}
	for (int i = 0; i < got; i++) {
		const struct msghdr *mh = &io->rx.msg[i].msg_hdr;
		size_t len = io->rx.msg[i].msg_len;

		if (mh->msg_flags & MSG_TRUNC) {
			cnt_add(io, IO_UDP_C_rx_truncated, 1);
			continue;
		}
		if (!rx_take(io, pkts[i].buf, len))
			continue;
		pkts[i].len = len;
		fill_rx(io, &pkts[i], mh);
		bytes += len;
		io_rx_keep(&io->rx, pkts, i, &out);
	}
	cnt_add(io, IO_UDP_C_rx_packets, (uint64_t)out);
	cnt_add(io, IO_UDP_C_rx_bytes, bytes);
	io_steer_rx_done(io->steer);
	return out;
}

/* io_udp_recv (view false) and io_udp_recv_view. */
static int recv_any(struct io_udp *io, struct io_pkt *pkts, int n, bool view, size_t max_len)
{
	if (!io || !pkts || n < 0)
		return -EINVAL;
	if (n > IO_UDP_BATCH)
		n = IO_UDP_BATCH;
	if (n == 0)
		return 0;
	if (!io->gro)
		return recv_plain(io, pkts, n);
	return recv_gro(io, pkts, n, view, max_len);
}

int io_udp_recv(struct io_udp *io, struct io_pkt *pkts, int n)
{
	return recv_any(io, pkts, n, false, 0);
}

int io_udp_recv_view(struct io_udp *io, struct io_pkt *pkts, int n, size_t max_len)
{
	return recv_any(io, pkts, n, true, max_len);
}

/* ---- send ---- */

static int sport_find(const struct io_udp *io, uint16_t port)
{
	uint32_t lo = 0, hi = io->nsports;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (io->sports[mid].port < port)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < io->nsports && io->sports[lo].port == port ? (int)lo : -1 - (int)lo;
}

/* The socket a packet with source port `port` leaves from; *unbound when none was taken. */
static int sport_fd(const struct io_udp *io, uint16_t port, bool *unbound)
{
	*unbound = false;
	if (port == io->port)
		return io->fd;
	int i = sport_find(io, port);
	if (i < 0) {
		*unbound = true;
		return io->fd;
	}
	return io->sports[i].fd >= 0 ? io->sports[i].fd : io->fd;
}

/* Puts packet p's pieces (io.h: one, or around its ext part three) in tx_iov from *iv on.
 * Returns how many, 0 when its ext part does not fit its length. */
static int pkt_iov(struct io_udp *io, int *iv, const struct io_pkt *p)
{
	struct iovec *v = &io->tx_iov[*iv];
	if (!p->ext) {
		v[0] = (struct iovec){.iov_base = p->buf, .iov_len = p->len};
		(*iv)++;
		return 1;
	}
	if (p->ext_len > p->len || p->ext_at > p->len - p->ext_len)
		return 0;
	size_t after = p->len - p->ext_len - p->ext_at;
	v[0] = (struct iovec){.iov_base = p->buf, .iov_len = p->ext_at};
	v[1] = (struct iovec){.iov_base = (void *)p->ext, .iov_len = p->ext_len};
	v[2] = (struct iovec){.iov_base = p->buf + p->ext_at, .iov_len = after};
	int n = after ? 3 : 2;
	*iv += n;
	return n;
}

/* Prepares message m for pkts[0 .. k) (k > 1: a train, io.h), its pieces in tx_iov from *iv on;
 * false when the destination is unusable or a packet's pieces do not add up. */
static bool build_tx(struct io_udp *io, int m, int *iv, const struct io_pkt *pkts, int k)
{
	const struct io_pkt *pkt = &pkts[0];
	socklen_t nl = make_sockaddr(io->family, pkt->dst, pkt->dport, &io->tx_name[m]);
	struct msghdr *mh = &io->tx_msg[m].msg_hdr;
	struct cmsghdr *c = NULL;
	int tos = pkt->tos, ttl = pkt->ttl;
	int lvl = io->family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6;
	/* Per-packet TOS/TTL as ancillary data (ip_cmsg_send / ip6_datagram_send_ctl): the AH of
	 * each QP may ask for a different traffic class and hop limit. Only where they differ
	 * from the socket's own (make_socket): parsing them cost about 0.1 us per datagram here
	 * (a UDP ping-pong of 148 B with both against one with none). Multicast leaves with the
	 * socket's multicast TTL (1) unless told. */
	bool mcast = io_mcast_gid_is_mcast(pkt->dst);
	bool want_tos = tos != io->tos;
	bool want_ttl = ttl && (ttl != IO_UDP_SOCK_TTL || mcast);
	size_t ctl = 0;

	if (!nl)
		return false;
	int first = *iv;
	for (int j = 0; j < k; j++) {
		int n = pkt_iov(io, iv, &pkts[j]);
		if (!n) {
			*iv = first;
			return false;
		}
		if (j == 0)
			io->tx_niov1[m] = (uint8_t)n;
	}
	io->tx_npk[m] = (uint8_t)k;
	if (want_tos)
		ctl += CMSG_SPACE(sizeof(int));
	if (want_ttl)
		ctl += CMSG_SPACE(sizeof(int));
	if (k > 1)
		ctl += CMSG_SPACE(sizeof(uint16_t));
	*mh = (struct msghdr){
	    .msg_name = &io->tx_name[m],
	    .msg_namelen = nl,
	    .msg_iov = &io->tx_iov[first],
	    .msg_iovlen = (size_t)(*iv - first),
	    .msg_control = ctl ? io->tx_ctl[m].buf : NULL,
	    .msg_controllen = ctl,
	};
	if (want_tos) {
		c = CMSG_FIRSTHDR(mh);
		c->cmsg_level = lvl;
		c->cmsg_type = io->family == AF_INET ? IP_TOS : IPV6_TCLASS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &tos, sizeof(int));
	}
	if (want_ttl) {
		c = c ? CMSG_NXTHDR(mh, c) : CMSG_FIRSTHDR(mh);
		c->cmsg_level = lvl;
		c->cmsg_type = io->family == AF_INET ? IP_TTL : IPV6_HOPLIMIT;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &ttl, sizeof(int));
	}
	if (k > 1) {
		/* Last, so that a refused train can drop it (gso_refused). */
		uint16_t seg = (uint16_t)pkt->len;
		c = c ? CMSG_NXTHDR(mh, c) : CMSG_FIRSTHDR(mh);
		c->cmsg_level = IPPROTO_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
		memcpy(CMSG_DATA(c), &seg, sizeof(seg));
	}
	return true;
}

/* Whether pkts[0 .. k) keep the rules of a train (io.h): one addressing, the first's length
 * for all but the last, the last no longer, the total within a UDP datagram. */
static bool train_ok(const struct io_pkt *pkts, int k)
{
	const struct io_pkt *p = &pkts[0];
	size_t total = p->len;

	if (k > IO_UDP_TRAIN_MAX || p->len == 0 || p->len > UINT16_MAX)
		return false;
	for (int j = 1; j < k; j++) {
		const struct io_pkt *q = &pkts[j];
		if (q->sport != p->sport || q->dport != p->dport || q->tos != p->tos ||
		    q->ttl != p->ttl || memcmp(q->dst, p->dst, 16) != 0 || q->len == 0 ||
		    q->len > p->len || (q->len < p->len && j != k - 1))
			return false;
		total += q->len;
	}
	return total <= IO_UDP_TRAIN_BYTES;
}

static enum io_udp_counter tx_reason(int err)
{
	switch (err) {
	case EAGAIN:
		return IO_UDP_C_tx_drop_again;
	case ENOBUFS:
		return IO_UDP_C_tx_drop_nobufs;
	case EMSGSIZE:
		return IO_UDP_C_tx_drop_msgsize;
	case ENETUNREACH:
	case EHOSTUNREACH:
	case ENETDOWN:
	case EHOSTDOWN:
	case EADDRNOTAVAIL:
	case ECONNREFUSED:
	case EPERM:
	case EACCES:
		return IO_UDP_C_tx_drop_unreach;
	default:
		return IO_UDP_C_tx_drop_other;
	}
}

/* The kernel refused message m, a train, with err: when err says "no GSO here" (io.h), GSO
 * goes off for io and m shrinks to the train's first packet. Returns whether m is to be sent
 * again. */
static bool gso_refused(struct io_udp *io, int m, int err)
{
	struct msghdr *mh = &io->tx_msg[m].msg_hdr;

	if (io->tx_npk[m] < 2 ||
	    (err != EIO && err != EINVAL && err != ENOPROTOOPT && err != EOPNOTSUPP))
		return false;
	atomic_store_explicit(&io->gso, false, memory_order_relaxed);
	cnt_add(io, IO_UDP_C_tx_drop_gso, (uint64_t)io->tx_npk[m] - 1);
	io->tx_npk[m] = 1;
	mh->msg_iovlen = io->tx_niov1[m];
	mh->msg_controllen -= CMSG_SPACE(sizeof(uint16_t)); /* UDP_SEGMENT, the last */
	return true;
}

/* Counts message m as sent. */
static void count_sent(struct io_udp *io, int m)
{
	const struct msghdr *mh = &io->tx_msg[m].msg_hdr;
	uint64_t bytes = 0;

	for (size_t j = 0; j < mh->msg_iovlen; j++)
		bytes += mh->msg_iov[j].iov_len;
	cnt_add(io, IO_UDP_C_tx_bytes, bytes);
	if (io->tx_npk[m] > 1) {
		cnt_add(io, IO_UDP_C_tx_gso_trains, 1);
		cnt_add(io, IO_UDP_C_tx_gso_packets, io->tx_npk[m]);
	}
}

/* Sends messages [0, m) on fd; returns how many packets the kernel took. */
static int send_run(struct io_udp *io, int fd, int m)
{
	int off = 0, sent = 0;
	while (off < m) {
		int r = sys_sendmmsg(fd, io->tx_msg + off, (unsigned)(m - off), MSG_DONTWAIT);
		if (r > 0) {
			for (int j = off; j < off + r; j++) {
				count_sent(io, j);
				sent += io->tx_npk[j];
			}
			off += r;
			continue;
		}
		int err = r < 0 ? errno : EAGAIN;
		if (err == EINTR)
			continue;
		if (err == EWOULDBLOCK)
			err = EAGAIN;
		if (err == EAGAIN || err == ENOBUFS) {
			/* The queue is full: the rest would fail too. Never block (io.h). */
			for (int j = off; j < m; j++)
				cnt_add(io, tx_reason(err), io->tx_npk[j]);
			break;
		}
		if (gso_refused(io, off, err))
			continue;
		/* A per-packet error stops sendmmsg at that message: count it, go on after it. */
		cnt_add(io, tx_reason(err), io->tx_npk[off]);
		off++;
	}
	cnt_add(io, IO_UDP_C_tx_packets, (uint64_t)sent);
	return sent;
}

int io_udp_send(struct io_udp *io, const struct io_pkt *pkts, int n)
{
	int sent = 0, i = 0;

	if (!io || n < 0 || (n > 0 && !pkts))
		return -EINVAL;
	bool gso = atomic_load_explicit(&io->gso, memory_order_relaxed);
	while (i < n) {
		uint16_t sport = pkts[i].sport;
		bool unbound;
		int fd = sport_fd(io, sport, &unbound);
		int m = 0, v = 0, iv = 0, taken = 0;
		while (i + taken < n && m < IO_UDP_BATCH && pkts[i + taken].sport == sport) {
			const struct io_pkt *p = &pkts[i + taken];
			int k = 1;
			if (p->train > 1 && gso && p->train <= n - i - taken &&
			    train_ok(p, p->train))
				k = p->train;
			if (v + k > IO_UDP_BATCH)
				break; /* the train goes in the next run */
			if (build_tx(io, m, &iv, p, k)) {
				m++;
				v += k;
			} else {
				cnt_add(io, IO_UDP_C_tx_drop_badaddr, (uint64_t)k);
			}
			taken += k;
		}
		if (unbound)
			cnt_add(io, IO_UDP_C_tx_sport_unbound, (uint64_t)taken);
		if (m)
			sent += send_run(io, fd, m);
		i += taken;
	}
	return sent;
}

bool io_udp_gso(const struct io_udp *io)
{
	return atomic_load_explicit(&io->gso, memory_order_relaxed);
}

int io_udp_sport_get(struct io_udp *io, uint16_t sport)
{
	struct sport_ent ent = {.port = sport, .refs = 1, .fd = -1};
	struct sockaddr_in6 sa;
	socklen_t salen;
	int i, err;

	if (!io || sport == 0)
		return -EINVAL;
	if (sport == io->port)
		return 0;
	i = sport_find(io, sport);
	if (i >= 0) {
		io->sports[i].refs++;
		return io->sports[i].fd >= 0 ? 0 : 1;
	}
	i = -1 - i;
	if (io->nsports == io->capsports) {
		uint32_t cap = io->capsports ? 2 * io->capsports : 16;
		struct sport_ent *s = realloc(io->sports, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		io->sports = s;
		io->capsports = cap;
	}
	err = make_socket(io, false, &ent.fd);
	if (err)
		return err;
	salen = make_sockaddr(io->family, io->addr, sport, &sa);
	if (bind(ent.fd, (const struct sockaddr *)&sa, salen) != 0) {
		err = -errno;
		close(ent.fd);
		ent.fd = -1;
		if (err != -EADDRINUSE && err != -EACCES)
			return err;
		/* Someone outside our reuse rules holds the port (io.h): use the main socket. */
		cnt_add(io, IO_UDP_C_sport_fallback, 1);
	}
	memmove(&io->sports[i + 1], &io->sports[i], (io->nsports - (uint32_t)i) * sizeof(ent));
	io->sports[i] = ent;
	io->nsports++;
	return ent.fd >= 0 ? 0 : 1;
}

void io_udp_sport_put(struct io_udp *io, uint16_t sport)
{
	int i;
	if (!io || sport == io->port)
		return;
	i = sport_find(io, sport);
	if (i < 0 || --io->sports[i].refs > 0)
		return;
	if (io->sports[i].fd >= 0)
		close(io->sports[i].fd);
	memmove(&io->sports[i], &io->sports[i + 1],
		(io->nsports - (uint32_t)i - 1) * sizeof(io->sports[0]));
	io->nsports--;
}

/* ---- steering, counters ---- */

int io_udp_service(struct io_udp *io)
{
	if (!io)
		return -EINVAL;
	return io_steer_service(io->steer);
}

uint64_t io_udp_next_service_ns(const struct io_udp *io)
{
	return io_steer_next_ns(io->steer);
}

void io_udp_info(const struct io_udp *io, struct io_udp_info *info)
{
	io_steer_info(io->steer, info);
}

void io_udp_counters(const struct io_udp *io, uint64_t out[IO_UDP_NCOUNTERS])
{
	for (int i = 0; i < IO_UDP_NCOUNTERS; i++)
		out[i] = atomic_load_explicit(&io->cnt[i], memory_order_relaxed);
}

const char *io_udp_counter_name(enum io_udp_counter c)
{
	return (unsigned)c < IO_UDP_NCOUNTERS ? counter_names[c] : NULL;
}

const char *io_udp_counter_desc(enum io_udp_counter c)
{
	return (unsigned)c < IO_UDP_NCOUNTERS ? counter_descs[c] : NULL;
}
