/* Private to io/: helpers the UDP backend (udp.c) shares with the multicast sockets (mcast.c). */
#ifndef SOFTRDMA_IO_INT_H
#define SOFTRDMA_IO_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "io/io.h"

/* The smallest datagram either takes: a BTH (anything shorter is counted as a runt). */
#define IO_BTH_LEN 12

/* Room for IP_PKTINFO / IPV6_PKTINFO + TOS / TCLASS + TTL / HOPLIMIT + UDP_GRO, with margin. */
union io_ctl_rx {
	struct cmsghdr align;
	char buf[160];
};

/* One receive batch's message headers: msg[i] describes pkts[i] of the last io_rx_batch_recv
 * (its msg_len, msg_flags, sender name and control messages). The headers stay prepared between
 * calls: a call restores only what the kernel wrote at the previous one (the name and control
 * lengths of the datagrams it delivered) and the buffers that differ from the caller's, so an
 * empty poll costs a comparison per entry rather than a rebuild. Zeroed memory is a valid
 * empty batch. */
struct io_rx_batch {
	struct mmsghdr msg[IO_UDP_BATCH];
	struct iovec iov[IO_UDP_BATCH];
	struct sockaddr_in6 name[IO_UDP_BATCH]; /* or sockaddr_in */
	union io_ctl_rx ctl[IO_UDP_BATCH];
	int ready; /* msg[0..ready) point at their name, iov and control buffers */
	int used;  /* msg[0..used) were written by the kernel at the last call */
	/* iov[0..fixed_n) hold the buffers of fixed_src, an array its owner never changes (the
	 * call said `fixed`): the next call with it skips comparing them. NULL: unknown. */
	const struct io_pkt *fixed_src;
	int fixed_n;
};

/* One recvmmsg of up to n (<= IO_UDP_BATCH) datagrams from fd, without blocking, into
 * pkts[i].buf (pkts[i].cap bytes each; nothing else of pkts is touched). Returns how many came
 * (0 when none is waiting, or interrupted), -EINVAL when a buffer is missing or has no room
 * (nothing received), or another negative errno from recvmmsg. fixed: pkts is an array whose
 * entries never change (the UDP backend's own GRO buffers): after the first call with it, the
 * next ones skip checking that b still points at them (an empty poll's largest cost in user
 * space, one compare per entry). */
int io_rx_batch_recv(struct io_rx_batch *b, int fd, const struct io_pkt *pkts, int n, bool fixed);

/* Keeps pkts[i] (a datagram of batch b that passed its checks) as the next of those kept
 * (*out): entries are swapped whole, each keeping its buffer, so no packet byte is copied
 * (io.h); b's buffer list follows, so that it still matches pkts at the next call. */
static inline void io_rx_keep(struct io_rx_batch *b, struct io_pkt *pkts, int i, int *out)
{
	if (i != *out) {
		struct io_pkt tmp = pkts[*out];
		pkts[*out] = pkts[i];
		pkts[i] = tmp;
		struct iovec v = b->iov[*out];
		b->iov[*out] = b->iov[i];
		b->iov[i] = v;
		b->fixed_src = NULL;
	}
	(*out)++;
}

/* Fills pkt's addressing (ipv6, src, sport, dst, dport = port, tos, ttl) from a received
 * datagram's sender name and control messages (IP_PKTINFO / IPV6_PKTINFO, TOS / TCLASS, TTL /
 * HOPLIMIT) on a socket of that family. Returns false when no PKTINFO gave the destination
 * (pkt->dst is then left as it was). */
bool io_rx_fill(int family, uint16_t port, struct io_pkt *pkt, const struct msghdr *mh);

#endif
