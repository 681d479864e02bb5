/* TCP stream reassembly for tests: reads a classic pcap (tests/lib/pcap.h), finds the TCP
 * connections (IPv4 or IPv6 without extension headers, over Ethernet) and rebuilds the byte
 * stream of each direction from the sequence numbers, so that protocols running over TCP
 * (iWARP: MPA frames and FPDUs) can be parsed independently of how TCP segmented them.
 *
 * A connection starts with a SYN (its sender is the client, side 0) or, if the capture
 * starts mid-connection, with the first segment seen (its sender becomes side 0).
 * Retransmitted and overlapping bytes are dropped (and counted; overlaps whose bytes differ
 * are counted separately); a hole in the sequence space makes tcps_load fail with -EPROTO,
 * since the stream after it could not be parsed.
 *
 * Ownership: tcps_load allocates every stream buffer (malloc); tcps_free releases them.
 * Tests only: this allocates, and it is not thread-safe per struct tcps. */
#ifndef SOFTRDMA_TEST_TCPSTREAM_H
#define SOFTRDMA_TEST_TCPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TCPS_MAX_CONN 16

/* One direction of a connection. */
struct tcps_dir {
	uint8_t *data; /* reassembled payload bytes, owned */
	size_t len;
	size_t cap;
	bool started;	     /* initial sequence number known */
	uint32_t next;	     /* sequence number of the next expected byte */
	size_t *seg;	     /* stream offset at which each captured data segment started, owned */
	uint32_t *seg_frame; /* pcap frame number (1-based) of each of those segments, owned */
	size_t nseg;
	size_t seg_cap;
	uint64_t dup_bytes;	 /* retransmitted / overlapping bytes dropped */
	uint64_t conflict_bytes; /* ... of which differed from the bytes kept */
	bool fin;		 /* a FIN was seen */
};

struct tcps_conn {
	bool ipv6;
	uint8_t addr[2][16]; /* side 0 = client (SYN sender); IPv4 in the first 4 bytes */
	uint16_t port[2];
	struct tcps_dir dir[2]; /* dir[0]: client -> server, dir[1]: server -> client */
};

struct tcps {
	struct tcps_conn conn[TCPS_MAX_CONN];
	int n;		  /* connections found, in order of their first packet */
	uint32_t frames;  /* frames read */
	uint32_t skipped; /* frames that were not TCP (ARP, UDP, fragments, ...) */
};

/* Loads `path`. Returns 0, or a negative errno (-EINVAL not a pcap / malformed frame,
 * -EPROTO sequence hole, -ENOBUFS more than TCPS_MAX_CONN connections, -ENOMEM). On failure
 * everything allocated so far is freed. */
int tcps_load(struct tcps *t, const char *path);

/* Frees every buffer; safe on a zeroed or already freed struct. */
void tcps_free(struct tcps *t);

#endif
