/* GSI (QP1): the IB CM's MADs into and out of a RoCE context, and between the softrdma
 * processes of one host (network namespace).
 *
 * ---- Why a router ----
 * A kernel RoCE stack has one CM per host behind QP1. softrdma has one per process, and every
 * process of a device shares UDP port 4791 through the reuseport group (io/io.h): the kernel
 * steers a packet by its DestQP slot, and DestQP 1 (slot 0) goes to the group's default member,
 * whichever softrdma process that is. So that member's progress thread routes each CM MAD to
 * the process it is for, over unix datagram sockets in the user's private run directory
 * (io/rundir.h: no other user can take or reach them), named per network namespace like the
 * addresses they serve:
 *   REQ, SIDR_REQ  -> the listener of the MAD's service ID     "n<netns>-softrdma-cm-sid-<16 hex>"
 *   every other    -> the process that owns the comm ID / request ID the MAD names as ours
 *                     (Remote Comm ID; SIDR_REP: Request ID), whose top 16 bits are the
 *                     process's tag                              "n<netns>-softrdma-cm-tag-<4 hex>"
 * A local delivery goes the same way. Where the target does not exist the router answers as a
 * kernel CM answers a MAD for nobody: REQ -> REJ reason 8 (invalid service ID), SIDR_REQ ->
 * SIDR_REP status 1 (unsupported), REP -> REJ reason 6 (invalid comm ID), DREQ -> DREP (the
 * connection is gone); anything else is dropped. Every case is counted (core.h gsi_*).
 *
 * ---- The frames between processes ----
 * One datagram per MAD, big-endian: "SGSI" 4, version 1, flags 1 (bit 0: IPv6), the peer's UDP
 * source port 2, the peer's address 16, our address 16 (IPv4-mapped for IPv4), traffic class 1,
 * reserved 3, the MAD 256. A receiver takes frames only from its own user or root
 * (SCM_CREDENTIALS) and checks magic, version and length; anything else is dropped.
 *
 * Threads: gsi_route runs on a context's progress thread (under its core lock); the endpoint
 * calls are the CM thread's. Nothing here blocks. */
#ifndef SOFTRDMA_CORE_GSI_H
#define SOFTRDMA_CORE_GSI_H

#include <stdbool.h>
#include <stdint.h>

#include "io/io.h"
#include "wire/roce/cm_mad.h"
#include "wire/roce/roce.h"

struct core_ctx;

#define GSI_FRAME_LEN (44 + CM_MAD_LEN)

/* A MAD with the addresses it came with / goes to. src: the peer's address (received) or ours
 * (to send); dst: ours (received) or the peer's (to send). */
struct gsi_frame {
	bool ipv6;
	uint16_t sport;
	uint8_t src[16];
	uint8_t dst[16];
	uint8_t tos;
	uint8_t mad[CM_MAD_LEN];
};

/* The endpoint of this process's comm IDs: a non-blocking datagram socket bound to a free tag
 * name. Returns the fd and *tag, or a negative errno. */
int gsi_ep_open_tag(uint16_t *tag);
/* A listener's endpoint for a service ID. Returns the fd, -EADDRINUSE (another process
 * listens on it), or another negative errno. */
int gsi_ep_open_sid(uint64_t sid);
/* Closes an endpoint of this process and removes its name (a fork's child only closes). */
void gsi_ep_close(int fd);
/* False when no process holds the endpoint of that tag any more (its process is gone); true
 * when one does, or when that cannot be told. */
bool gsi_tag_alive(uint16_t tag);
/* Takes one frame from an endpoint. Returns 1 with *f, 0 when none waits, -EBADMSG for a
 * frame dropped (bad sender, magic, version, length: take the next one), or another negative
 * errno. */
int gsi_ep_recv(int fd, struct gsi_frame *f);

/* Passes f to the endpoint its MAD is for, as the router does (tests use it to play a peer).
 * 0, -ECONNREFUSED (no such endpoint), -EINVAL (the MAD names no comm ID of ours), or another
 * negative errno. */
int gsi_deliver(const struct gsi_frame *f);

/* Progress thread, under the core lock: a packet to DestQP 1 whose ICRC is good. */
void gsi_route(struct core_ctx *c, const struct io_pkt *p, const struct roce_pkt *pkt);

/* Sends f->mad from QP1 at f->src to QP1 at f->dst (a UD SEND ONLY, Q_Key 0x80010000, P_Key
 * 0xFFFF, traffic class f->tos), starting the context (joining the port's group) if needed.
 * Under the core lock. 0 or a negative errno. (core/progress.c) */
int core_gsi_send(struct core_ctx *c, const struct gsi_frame *f);

/* Bumps one of the context's gsi_* counters (core/progress.c). */
void core_gsi_count(struct core_ctx *c, int counter);

#endif
