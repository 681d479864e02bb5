/* Multicast group sockets (design: mcast.h). */
#define _GNU_SOURCE
#include "io/mcast.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/forkdrop.h"
#include "io/io_int.h"
#include "util/sys.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

struct group {
	uint8_t gid[16];
	int fd;
};

struct io_mcast {
	int epfd;
	int ifindex;
	uint16_t port;
	int rcvbuf;
	struct group *groups; /* unordered; the data path never searches it */
	int ngroups, capgroups;
	_Atomic uint64_t cnt[IO_MCAST_NCOUNTERS];
	struct io_rx_batch rx;
};

static const char *const counter_names[] = {
#define X_NAME(name, desc) #name,
    IO_MCAST_COUNTERS(X_NAME)
#undef X_NAME
};

static void cnt_add(struct io_mcast *m, enum io_mcast_counter c, uint64_t v)
{
	atomic_store_explicit(&m->cnt[c],
			      atomic_load_explicit(&m->cnt[c], memory_order_relaxed) + v,
			      memory_order_relaxed);
}

static bool is_v4mapped(const uint8_t *a)
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
	return memcmp(a, prefix, sizeof(prefix)) == 0;
}

bool io_mcast_gid_is_mcast(const uint8_t gid[16])
{
	if (gid[0] == 0xFF)
		return true;
	return is_v4mapped(gid) && (gid[12] & 0xF0) == 0xE0;
}

int io_mcast_open(const struct io_mcast_config *cfg, struct io_mcast **out)
{
	if (!cfg || !out || cfg->ifindex < 0)
		return -EINVAL;
	struct io_mcast *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->epfd < 0) {
		int err = -errno;
		free(m);
		return err;
	}
	m->ifindex = cfg->ifindex;
	m->port = cfg->port ? cfg->port : IO_UDP_DEFAULT_PORT;
	m->rcvbuf = cfg->rcvbuf;
	*out = m;
	return 0;
}

/* Out of the epoll set first: epoll forgets a socket only when its last reference goes, and
 * the number may be reused at once. Closing the socket drops its memberships
 * (ip_mc_drop_socket). */
static void group_close(struct io_mcast *m, int fd)
{
	epoll_ctl(m->epfd, EPOLL_CTL_DEL, fd, NULL);
	io_forkdrop_remove(fd);
	close(fd);
}

void io_mcast_close(struct io_mcast *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->ngroups; i++)
		group_close(m, m->groups[i].fd);
	close(m->epfd);
	free(m->groups);
	free(m);
}

static int find(const struct io_mcast *m, const uint8_t gid[16])
{
	for (int i = 0; i < m->ngroups; i++)
		if (!memcmp(m->groups[i].gid, gid, 16))
			return i;
	return -1;
}

static int setopt_int(int fd, int level, int name, int val)
{
	return setsockopt(fd, level, name, &val, sizeof(val)) != 0 ? -errno : 0;
}

/* The socket of one group: bound to group:port, a member on m->ifindex, receiving the addressing
 * io_rx_fill reads. */
static int group_socket(const struct io_mcast *m, const uint8_t gid[16], int *out)
{
	bool v6 = !is_v4mapped(gid);
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err;
	if (fd < 0)
		return -errno;
	/* Every process (and context) on the host that joined the group binds the same address
	 * and port: SO_REUSEADDR lets them, and each gets a copy of every datagram (mcast.h). */
	err = setopt_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	/* Only what arrives on the device's interface: IPv6 delivers a group's datagrams to every
	 * member socket whatever interface they came in on (inet6_mc_check looks at the address
	 * alone), so with two devices in one group each would get the other's copy too. No
	 * privilege needed for a socket not bound to a device yet (Linux 5.7); where it is refused,
	 * IPv4 still filters by interface (IP_MULTICAST_ALL below). */
	if (!err && m->ifindex > 0)
		(void)setopt_int(fd, SOL_SOCKET, SO_BINDTOIFINDEX, m->ifindex);
	if (!err && !v6) {
		struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(m->port)};
		struct ip_mreqn mr = {.imr_ifindex = m->ifindex};
		memcpy(&sin.sin_addr, gid + 12, 4);
		memcpy(&mr.imr_multiaddr, gid + 12, 4);
		err = setopt_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
		if (!err)
			err = setopt_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
		if (!err)
			err = setopt_int(fd, IPPROTO_IP, IP_RECVTTL, 1);
		/* Only what arrives on the interface we joined on (ip_mc_sf_allow). */
		if (!err)
			err = setopt_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);
		if (!err && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
			err = -errno;
		if (!err && setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0)
			err = -errno;
	} else if (!err) {
		struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(m->port)};
		struct ipv6_mreq mr = {.ipv6mr_interface = (unsigned)m->ifindex};
		memcpy(&sin6.sin6_addr, gid, 16);
		memcpy(&mr.ipv6mr_multiaddr, gid, 16);
		/* A link-scope group is bound with its interface (scope id), as the kernel wants.
		 */
		if ((gid[1] & 0x0F) <= 2)
			sin6.sin6_scope_id = (uint32_t)m->ifindex;
		err = setopt_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
		if (!err)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
		if (!err)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
		if (!err)
			err = setopt_int(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
		/* Linux 4.20 and later; without it a socket may also see the group from other
		 * interfaces, which only matters with two devices in one group. */
		if (!err)
			(void)setopt_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, 0);
		if (!err && bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) != 0)
			err = -errno;
		if (!err && setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &mr, sizeof(mr)) != 0)
			err = -errno;
	}
	if (!err && m->rcvbuf > 0 && setopt_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, m->rcvbuf) != 0)
		setopt_int(fd, SOL_SOCKET, SO_RCVBUF, m->rcvbuf);
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

int io_mcast_join(struct io_mcast *m, const uint8_t group[16])
{
	int fd = -1, err;
	if (!m || !group || !io_mcast_gid_is_mcast(group))
		return -EINVAL;
	if (find(m, group) >= 0)
		return -EEXIST;
	if (m->ngroups == m->capgroups) {
		int cap = m->capgroups ? 2 * m->capgroups : 8;
		struct group *g = realloc(m->groups, (size_t)cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		m->groups = g;
		m->capgroups = cap;
	}
	err = group_socket(m, group, &fd);
	if (err)
		goto fail;
	/* Level-triggered: a socket left with datagrams after a full batch stays ready. */
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)!is_v4mapped(group)
									  << 32};
	if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		err = -errno;
		close(fd);
		goto fail;
	}
	/* A fork's child must not keep the membership (and the socket in our epoll set) after
	 * we leave the group. */
	if ((err = io_forkdrop_add(fd)) != 0) {
		close(fd);
		goto fail;
	}
	memcpy(m->groups[m->ngroups].gid, group, 16);
	m->groups[m->ngroups].fd = fd;
	m->ngroups++;
	cnt_add(m, IO_MCAST_C_joins, 1);
	return 0;
fail:
	cnt_add(m, IO_MCAST_C_join_errors, 1);
	return err;
}

void io_mcast_leave(struct io_mcast *m, const uint8_t group[16])
{
	int i;
	if (!m || !group || (i = find(m, group)) < 0)
		return;
	group_close(m, m->groups[i].fd);
	m->groups[i] = m->groups[--m->ngroups];
	cnt_add(m, IO_MCAST_C_leaves, 1);
}

int io_mcast_count(const struct io_mcast *m)
{
	return m ? m->ngroups : 0;
}

int io_mcast_fd(const struct io_mcast *m)
{
	return m->epfd;
}

/* Receives into pkts[0..n) from one socket; returns how many were kept (compacted to the front,
 * entries swapped as io_udp_recv does) or a negative errno. */
static int recv_from(struct io_mcast *m, int fd, bool v6, struct io_pkt *pkts, int n)
{
	int out = 0;
	int got = io_rx_batch_recv(&m->rx, fd, pkts, n, false);
	if (got < 0) {
		cnt_add(m, IO_MCAST_C_rx_errors, 1);
		return got;
	}
	for (int i = 0; i < got; i++) {
		const struct msghdr *mh = &m->rx.msg[i].msg_hdr;
		size_t len = m->rx.msg[i].msg_len;
		if (mh->msg_flags & MSG_TRUNC) {
			cnt_add(m, IO_MCAST_C_rx_truncated, 1);
			continue;
		}
		if (len < IO_BTH_LEN) {
			cnt_add(m, IO_MCAST_C_rx_runt, 1);
			continue;
		}
		pkts[i].len = len;
		/* Without PKTINFO (never seen: every socket asks for it) the bound address, the
		 * group, is where it went. */
		if (!io_rx_fill(v6 ? AF_INET6 : AF_INET, m->port, &pkts[i], mh)) {
			for (int g = 0; g < m->ngroups; g++)
				if (m->groups[g].fd == fd)
					memcpy(pkts[i].dst, m->groups[g].gid, 16);
		}
		io_rx_keep(&m->rx, pkts, i, &out);
	}
	cnt_add(m, IO_MCAST_C_rx_packets, (uint64_t)out);
	return out;
}

int io_mcast_recv(struct io_mcast *m, struct io_pkt *pkts, int n)
{
	struct epoll_event evs[IO_UDP_BATCH];
	int ready, total = 0;

	if (!m || !pkts || n < 0)
		return -EINVAL;
	if (n > IO_UDP_BATCH)
		n = IO_UDP_BATCH;
	if (n == 0 || m->ngroups == 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (!pkts[i].buf || pkts[i].cap == 0)
			return -EINVAL;
	ready = sys_epoll_peek(m->epfd, evs, n);
	if (ready < 0) {
		if (errno == EINTR)
			return 0;
		cnt_add(m, IO_MCAST_C_rx_errors, 1);
		return -errno;
	}
	for (int k = 0; k < ready && total < n; k++) {
		int fd = (int)(uint32_t)evs[k].data.u64;
		bool v6 = evs[k].data.u64 >> 32;
		int r = recv_from(m, fd, v6, pkts + total, n - total);
		if (r > 0)
			total += r;
	}
	return total;
}

void io_mcast_counters(const struct io_mcast *m, uint64_t out[IO_MCAST_NCOUNTERS])
{
	for (int i = 0; i < IO_MCAST_NCOUNTERS; i++)
		out[i] = atomic_load_explicit(&m->cnt[i], memory_order_relaxed);
}

const char *io_mcast_counter_name(enum io_mcast_counter c)
{
	return (unsigned)c < IO_MCAST_NCOUNTERS ? counter_names[c] : NULL;
}
