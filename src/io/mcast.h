/* Multicast receive sockets for RoCEv2 UD multicast (IBTA A17.5.6; Linux rxe joins the group on
 * its netdev and delivers what reaches its UDP tunnel socket, rxe_rcv_mcast_pkt). One `struct
 * io_mcast` per device context: a UDP socket per joined group, each bound to group:port and a
 * member of the group on the device's interface, behind one epoll fd.
 *
 * ---- Why a socket per group, and several processes on one host ----
 * The receive sockets of io.h are bound to the device's unicast address: the kernel never
 * delivers a datagram to 224.1.2.3 (or ff0e::1) there, whatever the socket joined. A socket
 * bound to the group address gets exactly that group's datagrams. Linux hands a multicast or
 * broadcast UDP datagram to EVERY socket bound to the matching address and port
 * (__udp4_lib_mcast_deliver, __udp6_lib_mcast_deliver clone the skb for each one; no reuseport
 * selection is made, unlike unicast), so each process, and each context of a process, that
 * joined the group gets its own copy, with SO_REUSEADDR to share the address and port (any user,
 * no registry: unlike unicast steering (io.h) nothing has to be chosen). Checked on Linux 6.18
 * with three sockets of one group: with SO_REUSEADDR, SO_REUSEPORT or both, each received every
 * datagram (tests/e2e/test_verbs_mcast.c checks it across processes). IP_MULTICAST_ALL /
 * IPV6_MULTICAST_ALL is off, so a socket takes only what arrives on the interface it joined
 * on: the same group joined by roce_lo and roce_eth0 gives each device its own interface's
 * traffic.
 *
 * ---- Our own sends ----
 * A host that joined a group receives the group's datagrams that it sends itself: on lo always
 * (lo's transmit is a receive), on other interfaces because sending sockets keep
 * IP_MULTICAST_LOOP / IPV6_MULTICAST_LOOP on (the default), as rxe's packets loop back through
 * ip_mc_output. So a QP attached on the sending host, the sender's own QP included, gets the
 * message, as with rxe, whose rxe_rcv_mcast_pkt delivers to every attached QP.
 *
 * Threads and errors as io.h: the caller serialises (the context's lock); 0 or a count on
 * success, a negative errno otherwise; dropped datagrams are counted, never errors. Only
 * io_mcast_open and io_mcast_join allocate. */
#ifndef SOFTRDMA_IO_MCAST_H
#define SOFTRDMA_IO_MCAST_H

#include <stdbool.h>
#include <stdint.h>

#include "io/io.h"

/* X(name, description) */
#define IO_MCAST_COUNTERS(X)                                                                       \
	X(rx_packets, "datagrams received on group sockets")                                       \
	X(rx_truncated, "dropped: datagram larger than the caller's buffer (MSG_TRUNC)")           \
	X(rx_runt, "dropped: payload shorter than a BTH (12 bytes)")                               \
	X(rx_errors, "recvmmsg / epoll_wait failures other than EAGAIN")                           \
	X(joins, "groups joined (a socket opened)")                                                \
	X(leaves, "groups left (a socket closed)")                                                 \
	X(join_errors, "joins refused by the system (socket, bind, IP_ADD_MEMBERSHIP)")

/* clang-format off */
enum io_mcast_counter {
#define IO_MCAST_X_ENUM(name, desc) IO_MCAST_C_##name,
	IO_MCAST_COUNTERS(IO_MCAST_X_ENUM)
#undef IO_MCAST_X_ENUM
	IO_MCAST_NCOUNTERS
};
/* clang-format on */

struct io_mcast_config {
	int ifindex;   /* the device's interface: groups are joined there (0: the kernel picks) */
	uint16_t port; /* UDP port; 0 means IO_UDP_DEFAULT_PORT (4791) */
	int rcvbuf;    /* receive buffer of each group socket in bytes; 0 keeps the default */
};

struct io_mcast;

/* True for a multicast GID: an IPv6 multicast address (ff00::/8) or an IPv4-mapped one
 * (::ffff:224.0.0.0/4), as the kernel's rdma_is_multicast_addr. */
bool io_mcast_gid_is_mcast(const uint8_t gid[16]);

/* Creates the set (an epoll fd, no socket yet). 0 and *out (the caller's until io_mcast_close),
 * or -EINVAL, -ENOMEM, -EMFILE. */
int io_mcast_open(const struct io_mcast_config *cfg, struct io_mcast **out);
/* Closes every group socket (leaving the groups) and frees m. NULL is allowed. */
void io_mcast_close(struct io_mcast *m);

/* Joins group (a multicast GID: IPv4-mapped or IPv6): a socket bound to group:port with
 * SO_REUSEADDR, IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP on cfg.ifindex. Returns 0, -EEXIST (joined
 * already), -EINVAL (not a multicast GID), or the system's error (-EMFILE, -ENOBUFS: the host's
 * membership limit, -EADDRINUSE: a socket outside our reuse rules holds the port, e.g. the
 * kernel's rxe, ...), nothing left behind. */
int io_mcast_join(struct io_mcast *m, const uint8_t group[16]);
/* Leaves group and closes its socket; unknown groups are ignored. Datagrams still queued on it
 * are discarded. */
void io_mcast_leave(struct io_mcast *m, const uint8_t group[16]);
/* Groups joined. */
int io_mcast_count(const struct io_mcast *m);

/* An fd that is readable (EPOLLIN) when a group socket holds datagrams: call io_mcast_recv.
 * Owned by m. */
int io_mcast_fd(const struct io_mcast *m);

/* Receives up to n (at most IO_UDP_BATCH) datagrams from the group sockets without blocking,
 * as io_udp_recv does (same io_pkt contract, entries possibly permuted, buffers the caller's):
 * pkts[i].dst is the group address (IPv4-mapped for IPv4), .ipv6 its family. Returns the number
 * of packets, 0 when none wait, or a negative errno (counted in rx_errors). */
int io_mcast_recv(struct io_mcast *m, struct io_pkt *pkts, int n);

/* Copies the counters (indexed by enum io_mcast_counter) into out[IO_MCAST_NCOUNTERS]. */
void io_mcast_counters(const struct io_mcast *m, uint64_t out[IO_MCAST_NCOUNTERS]);
/* The name of counter c, or NULL when out of range. */
const char *io_mcast_counter_name(enum io_mcast_counter c);

#endif
