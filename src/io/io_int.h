/* Private to io/: helpers the UDP backend (udp.c) shares with the multicast sockets (mcast.c). */
#ifndef SOFTRDMA_IO_INT_H
#define SOFTRDMA_IO_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "io/io.h"

/* Fills pkt's addressing (ipv6, src, sport, dst, dport = port, tos, ttl) from a received
 * datagram's sender name and control messages (IP_PKTINFO / IPV6_PKTINFO, TOS / TCLASS, TTL /
 * HOPLIMIT) on a socket of that family. Returns false when no PKTINFO gave the destination
 * (pkt->dst is then left as it was). */
bool io_rx_fill(int family, uint16_t port, struct io_pkt *pkt, const struct msghdr *mh);

#endif
