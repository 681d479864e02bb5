/* A tiny reader for classic libpcap files (not pcapng), for tests: iterate the frames of an
 * Ethernet capture and find the RoCEv2 ones (IPv4/IPv6 + UDP destination port 4791).
 *
 * Ownership: pcap_open() reads the whole file into one heap buffer owned by the struct
 * pcap_file; pcap_close() frees it. Every pointer handed out (frame data, IP header, UDP
 * payload) points into that buffer and is valid until pcap_close(). Nothing is copied.
 * Not thread-safe per file (the iterator position lives in the struct). */
#ifndef SOFTRDMA_TEST_PCAP_H
#define SOFTRDMA_TEST_PCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PCAP_LINKTYPE_ETHERNET 1

struct pcap_file {
	uint8_t *data; /* whole file, owned */
	size_t len;
	size_t off;   /* next record header */
	bool swapped; /* file written big-endian */
	bool nsec;    /* nanosecond timestamps */
	uint32_t linktype;
	uint32_t index; /* 1-based number of the last frame returned */
};

struct pcap_frame {
	uint32_t index;	     /* 1-based, as tshark numbers frames */
	uint64_t ts_ns;	     /* timestamp, ns since the epoch */
	const uint8_t *data; /* captured bytes, starting at the Ethernet header */
	uint32_t caplen;     /* bytes captured (data holds this many) */
	uint32_t origlen;    /* bytes on the wire */
};

/* A RoCEv2 frame located within a pcap_frame. All pointers into the frame. */
struct pcap_roce {
	bool ipv6;
	const uint8_t *ip;  /* IP header */
	size_t ip_len;	    /* IP header .. end of UDP payload, from the IP length field
			       (Ethernet padding and FCS excluded) */
	const uint8_t *udp; /* UDP header */
	uint16_t sport, dport;
	const uint8_t *payload; /* BTH .. ICRC inclusive */
	size_t payload_len;
};

/* Opens `path`. Returns 0, or a negative errno (-EINVAL: not a pcap file / not Ethernet). On
 * failure nothing needs closing. */
int pcap_open(struct pcap_file *f, const char *path);
/* Frees the buffer; all pointers into it become invalid. Safe on a zeroed struct. */
void pcap_close(struct pcap_file *f);
/* Next frame: 1 and *fr filled, 0 at the end, -EINVAL on a truncated/corrupt record. */
int pcap_next(struct pcap_file *f, struct pcap_frame *fr);
/* Restart the iteration at the first frame. */
void pcap_rewind(struct pcap_file *f);

/* The EtherType of a frame after an optional 802.1Q tag, and where its payload starts
 * (*l3_off). Returns -1 if the frame is too short for an Ethernet header. */
int pcap_ethertype(const struct pcap_frame *fr, size_t *l3_off);

/* If the frame is IPv4 (no fragment) or IPv6 carrying UDP to port 4791 (or `dport` if non-zero),
 * fills *out and returns 1; otherwise returns 0. Lengths are taken from the IP header and
 * checked against what was captured. */
int pcap_roce(const struct pcap_frame *fr, uint16_t dport, struct pcap_roce *out);

/* Full paths of the "*.pcap" files in `dir`, sorted by name, stored in paths[0..max-1]
 * (caller's array). Returns how many there are (only the first `max` are stored), or a
 * negative errno if the directory cannot be read. */
#define PCAP_PATH_MAX 512
int pcap_glob(const char *dir, char (*paths)[PCAP_PATH_MAX], int max);

#endif
