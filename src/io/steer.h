/* Private to io/: multi-process steering of one reuseport group (the design is described in
 * io.h, "Multi-process steering"). udp.c owns the sockets; this module owns the shared registry,
 * the probes and the cBPF program. Threads: as the rx side of io_udp (io.h); io_steer_join and
 * io_steer_leave run inside io_udp_open / io_udp_close. */
#ifndef SOFTRDMA_IO_STEER_H
#define SOFTRDMA_IO_STEER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "io/io.h"

#define IO_STEER_PROBE_LEN 32

struct io_steer;

struct io_steer_cfg {
	int family;
	uint8_t addr[16]; /* IPv4-mapped for IPv4 */
	uint16_t port;
	uint8_t slot; /* the slot to take, 0 = the lowest free one */
	uint32_t check_ms;
	const char *dir;
	/* io_udp's counters (IO_UDP_NCOUNTERS); this module writes only rx-side ones. */
	_Atomic uint64_t *counters;
};

/* Single-writer counter update: a relaxed load and store, no locked instruction (the writer is
 * the only thread on its side; readers on other threads see whole values). */
static inline void io_cnt_add(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* Joins: under the registry lock, garbage-collects dead members, takes a slot, binds `sock`
 * (already SO_REUSEPORT, non-blocking) to sa, and learns its index (io.h "join"). On success
 * *out owns nothing of sock (udp.c keeps it, and passes it back to io_steer_leave). Errors:
 * bind's negative errno (-EADDRINUSE, ...), -ENOSPC, -EPERM, -ENOMEM, ...; sock is then
 * unbound or bound, and the caller closes it. */
int io_steer_join(const struct io_steer_cfg *cfg, int sock, const struct sockaddr *sa,
		  socklen_t salen, struct io_steer **out);

/* Leaves the group and CLOSES sock at the right moment (io.h "leave"); frees st. */
void io_steer_leave(struct io_steer *st, int sock);

/* In a fork's child (udp.c's atfork handler): drops the child's references to the registry
 * (its descriptor becomes /dev/null, its mapping goes), which would keep the parent's
 * liveness lock held after the parent left. */
void io_steer_forked(struct io_steer *st);
/* Frees st and closes sock without leaving the group: the membership is the parent's. */
void io_steer_abandon(struct io_steer *st, int sock);

uint8_t io_steer_slot(const struct io_steer *st);

enum io_steer_verdict {
	IO_STEER_DELIVER,      /* ours (or default traffic while we are the default member) */
	IO_STEER_MISDELIVERED, /* another live member's: drop (counted here) */
	IO_STEER_CONSUMED,     /* a probe (or a bad one), counted here */
};

/* Classifies one received payload of len >= 12 bytes (a BTH fits). No system call. */
enum io_steer_verdict io_steer_rx(struct io_steer *st, const uint8_t *p, size_t len);

/* After a receive batch: does the steering work the batch made necessary (claims, checks after
 * misdeliveries), trying the lock only. */
void io_steer_rx_done(struct io_steer *st);

/* io_udp_service. */
int io_steer_service(struct io_steer *st);
uint64_t io_steer_next_ns(const struct io_steer *st);
void io_steer_info(const struct io_steer *st, struct io_udp_info *info);

#endif
