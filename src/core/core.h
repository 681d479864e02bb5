/* The progress loop: the only place that moves packets between the engine and the I/O
 * backend (DESIGN.md decision 2 and 4).
 *
 * One core_ctx per opened device. It owns the UDP socket (io/), the QP number table, the run
 * list of QPs with packets to send, and a progress thread for passive traffic and timers.
 * Application threads that post or poll run the same loop themselves when they can take the
 * lock, so the latency path has no cross-thread hand-off; the progress thread backs off while
 * an application thread is polling, so the two do not spin against each other on two cores.
 *
 * Locking: one mutex per context (core_lock). Every engine call and every object the engine
 * touches (QPs, CQs, SRQs, MR table) is used only under it. */
#ifndef SOFTRDMA_CORE_H
#define SOFTRDMA_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/dcqcn.h"
#include "engine/eng.h"

struct core_ctx;

struct core_config {
	uint8_t local_addr[16];	 /* IPv4-mapped IPv4 address the device's socket binds */
	uint8_t local_addr6[16]; /* IPv6 address for QPs whose GIDs are IPv6 (if has_v6) */
	bool has_v6;
	uint16_t port;		/* UDP port, 0 = 4791 */
	const char *fault_spec; /* io/fault.h syntax, or NULL (then $SOFTRDMA_FAULT is read) */
	bool no_thread;		/* tests: no progress thread, the caller drives core_progress */
	int ifindex;		/* the device's interface (multicast joins and sends), 0: none */
	/* Marking (core_tos): the DSCP of traffic whose traffic class asks for none (the
	 * device's default: 26, as RoCE deployments mark it; SOFTRDMA_DSCP), and whether RoCEv2
	 * packets say they are ECN-capable (ECT(0); SOFTRDMA_ECN). */
	uint8_t dscp;
	bool ecn;
	/* With ecn, DCQCN's reaction point on every connected QP with these parameters
	 * (engine/dcqcn.h: the NICs' defaults for the interface's speed, SOFTRDMA_DCQCN's
	 * changes applied). */
	struct dcqcn_params cc;
};

/* A QP's line rate under congestion control when the interface tells none: 25 Gbit/s. */
#define CC_DEFAULT_LINE_RATE 25000000000ull

/* The IP TOS / IPv6 traffic class byte of traffic with traffic class tclass (a GRH's, a
 * connection's TOS): its DSCP, or the device's default when its DSCP is 0, and ECT(0) when the
 * device has ECN on (else tclass's own ECN bits, as rxe sends them). A TCP connection (iWARP)
 * takes the DSCP part: the kernel's TCP sets the ECN bits itself. */
uint8_t core_tos(const struct core_ctx *c, uint8_t tclass);
/* The skb priority of the device's sockets: the DSCP's class selector (DSCP 26 -> 3, the
 * priority a lossless RoCE class usually has), at most 6 (7 needs CAP_NET_ADMIN). A VLAN
 * interface's egress map turns it into the 802.1Q PCP. */
uint8_t core_priority(const struct core_ctx *c);

/* Where a connected QP's packets go (from its address vector). */
struct core_path {
	bool ipv6;	 /* the GIDs are IPv6 addresses (else IPv4-mapped) */
	uint8_t src[16]; /* local GID */
	uint8_t dst[16]; /* peer GID */
	uint16_t sport;	 /* UDP source port (rxe's per-QP entropy) */
	uint8_t tos;	 /* GRH traffic class: DSCP << 2 | ECN */
	uint8_t ttl;	 /* GRH hop limit */
};

/* Creates the context, without touching the network: opening a device only to query it
 * binds nothing. Returns 0 or -ENOMEM. cfg is copied (fault_spec must stay valid). */
int core_ctx_create(const struct core_config *cfg, struct core_ctx **out);
/* Opens the socket and starts the progress thread, once (at the first QP). Call under the
 * lock. Returns 0, or a negative errno with a message in err (e.g. -EADDRINUSE: another
 * program holds UDP port 4791 on that address). */
int core_start(struct core_ctx *c, char *err, size_t errlen);
bool core_started(const struct core_ctx *c);
/* SOFTRDMA_PROGRESS_THREAD=0 (core_config.no_thread): no progress thread, for the iWARP
 * connections either. */
bool core_no_thread(const struct core_ctx *c);
void core_ctx_destroy(struct core_ctx *c);

void core_lock(struct core_ctx *c);
void core_unlock(struct core_ctx *c);
/* Takes the lock if it is free (progress threads never make the application wait). */
bool core_trylock(struct core_ctx *c);

/* QPNs of this context are (slot << 16) | n, so the kernel steers their packets to this
 * process (io/io.h). */
uint32_t core_qpn_base(const struct core_ctx *c);
/* Contexts without the UDP backend (iWARP) take their slot elsewhere (core/iw_rdv.c). Under
 * the lock, before the first QPN is handed out. */
void core_set_qpn_base(struct core_ctx *c, uint32_t base);
/* One more than the highest n in a QPN this context hands out: n is 16 bits, and n = 0xFFFF is
 * left out because slot 255 would make it the multicast QPN 0xFFFFFF (io/io.h). */
#define CORE_MAX_QP 0xFFFF

/* Enters / removes a QP in the QPN table (under the lock). qpn must be core_qpn_base + n,
 * 1 <= n < CORE_MAX_QP. Returns 0, -EINVAL, -EEXIST or -ENOMEM. What the context keeps per QP
 * is allocated here and freed by the detach. */
int core_qp_attach(struct core_ctx *c, struct eng_qp *qp, uint32_t qpn);
void core_qp_detach(struct core_ctx *c, uint32_t qpn);
/* The eng_env.deadline callback target: the QP's engine deadline changed; the context files
 * it in its timer heap (a progress pass then looks at the earliest deadline only, whatever the
 * number of QPs) and wakes the progress thread if it is earlier than its sleep. Under the
 * lock. */
void core_qp_deadline(struct core_ctx *c, struct eng_qp *qp);
/* Sets the path of a QP (at INIT->RTR). Returns 0 or a negative errno. */
int core_qp_set_path(struct core_ctx *c, uint32_t qpn, const struct core_path *path);
/* Makes an attached QP a UD QP (at creation, under the lock): it has no path of its own. Each
 * packet it sends goes where the address handle of its WR says (eng_qp_output_dest hands the
 * handle out with the packet; the core resolves it per packet, core_ah_*), from the QP's own UDP
 * source port, 0xC000 | hash(QPN) as rxe picks it at creation (spec 1.3), in either address
 * family. It receives from anyone: no peer check; the engine gets the 40-byte GRH built from
 * the packet's IP header (eng_qp_input_net). Returns 0 or a negative errno (source-port
 * socket: io_udp_sport_get). */
int core_qp_set_ud(struct core_ctx *c, uint32_t qpn);

/* ---- address handles (UD destinations) ----
 * An address handle is a core_path without the source port (ignored here: it is the sending
 * QP's). Handles are (generation << 16) | index, never 0, so a handle kept in a send WQE after
 * its AH was destroyed (or reused) resolves to nothing: the packet is dropped and counted
 * (tx_bad_ah), never sent to another destination. Calls under the lock. */
#define CORE_MAX_AH 65535
/* Returns 0 and *handle, or -ENOMEM (table full), or a negative errno from opening the IPv6
 * socket (an IPv6 destination, once the context has started). */
int core_ah_create(struct core_ctx *c, const struct core_path *path, uint32_t *handle);
/* Frees a handle; unknown handles are ignored. */
void core_ah_destroy(struct core_ctx *c, uint32_t handle);

/* ---- multicast (UD; core/mgroup.h, io/mcast.h) ----
 * Attaches the UD QP qpn to the group mgid (IPv4-mapped 224.0.0.0/4 or IPv6 ff00::/8): the
 * context's socket for the group joins it on the device's interface at the first QP, and every
 * datagram to the group with DestQP 0xFFFFFF is then handed to each attached QP. Sends need
 * nothing: a UD WR whose address handle names the group goes there (and comes back to the
 * host's members, the sender's own QPs included, as with rxe). Under the lock, after core_start.
 * Returns 0 (also when attached already), -EINVAL (no such UD QP, not a multicast GID),
 * -ENOMEM (the limits of mgroup.h), or the system's error from joining (io_mcast_join). */
int core_mcast_attach(struct core_ctx *c, uint32_t qpn, const uint8_t mgid[16]);
/* Detaches it; the last QP of the group closes its socket (leaving the group). 0, or -EINVAL
 * when qpn is not attached to mgid. core_qp_detach detaches a QP from all its groups. */
int core_mcast_detach(struct core_ctx *c, uint32_t qpn, const uint8_t mgid[16]);

/* The eng_env.wake callback target: queues the QP for output. */
void core_qp_wake(struct core_ctx *c, struct eng_qp *qp);

/* One pass of the loop, under the lock: receive a batch, run timers, send what is due.
 * Returns true if it did anything. */
bool core_progress(struct core_ctx *c);
/* Sends what is due now and nothing else (ibv_post_send: the new request leaves at once,
 * without a receive system call in front of it). Under the lock. */
void core_flush(struct core_ctx *c);
/* After ibv_post_send queued requests on qp, under the lock: sends what is due (core_flush),
 * or leaves it for the application's next call when the requests join a pipeline (doorbell
 * batching): the QP awaits responses to earlier requests, so the application will poll for
 * them, and it polls (the progress thread is not on the sockets, core/mover.h). Back-to-back
 * posts then leave in one system call, as one GSO train, and the peer acknowledges them with
 * one ACK. At most MOVER_DEFER_POSTS posts wait (mover_post_waits); the next poll (core_poll_cq) or
 * post sends them, and if the application calls neither, the progress thread's next look does (at
 * most MOVER_DEADMAN_NS after its last call, core/mover.h). Without a progress thread
 * (SOFTRDMA_PROGRESS_THREAD=0) nothing waits. A QP awaiting nothing (a ping-pong, the first
 * post of a burst) sends at once: no wait on the latency path. */
void core_posted(struct core_ctx *c, struct eng_qp *qp);
/* ibv_poll_cq's progress, under the lock: returns completions from cq (up to n into wc),
 * moving packets first when it is empty. When input produces completions they are returned
 * before the output that input caused (ACKs) is sent; that output goes at the next call
 * (or by the progress thread if the application does not come back; without one, at once),
 * which takes the ACK's system call off the application's reply path. */
int core_poll_cq(struct core_ctx *c, struct eng_cq *cq, int n, struct ibv_wc *wc);
/* Around the application's polls (poll: true) and posts, before the lock and after the
 * unlock: the application moves the packets while it polls, and the progress thread backs
 * off (core/mover.h). */
void core_app_enter(struct core_ctx *c, bool poll);
void core_app_leave(struct core_ctx *c, bool poll);
/* The application is about to block for a completion event: the progress thread takes over
 * the packets now (core/mover.h). */
void core_app_blocks(struct core_ctx *c);

uint64_t core_now_ns(void);
/* epoll_pwait2 with a timeout in ns (epoll_wait, whole milliseconds, where the kernel or
 * valgrind lacks it); for the progress threads. */
struct epoll_event;
int core_epoll_nap(int epfd, struct epoll_event *evs, int max, uint64_t ns);

/* Calls fn for every context-wide counter: the context's own (core_counter_names), then the
 * UDP backend's ("udp_" + name) and the fault stage's ("fault_" + name). Under the lock. */
typedef void (*core_counter_fn)(void *arg, const char *name, uint64_t value);
void core_each_counter(struct core_ctx *c, core_counter_fn fn, void *arg);
/* Prints every non-zero counter (context, UDP backend, fault stage) / of one QP, one line
 * each, to f. Used when $SOFTRDMA_STATS is set (verbs.c, device.c). Under the lock. */
void core_dump_counters(struct core_ctx *c, FILE *f);
void core_dump_qp_counters(struct core_ctx *c, struct eng_qp *qp, FILE *f);

/* Context-wide counters (drops before a packet reaches a QP), X(name, description). */
#define CORE_COUNTERS(X)                                                                           \
	X(rx_packets, "UDP datagrams received")                                                    \
	X(tx_packets, "UDP datagrams sent")                                                        \
	X(rx_truncated, "packets dropped: shorter than their headers and ICRC")                    \
	X(rx_unknown_opcode, "packets dropped: unknown BTH opcode")                                \
	X(rx_bad_tver, "packets dropped: BTH transport version is not 0")                          \
	X(rx_bad_pad, "packets dropped: PadCnt larger than the payload")                           \
	X(rx_unexpected_payload, "packets dropped: payload on an opcode that has none")            \
	X(rx_bad_pkey, "packets dropped: P_Key not of the default partition (0xFFFF)")             \
	X(rx_bad_icrc, "packets dropped: ICRC mismatch")                                           \
	X(rx_unknown_qp, "packets dropped: no such destination QP")                                \
	X(rx_no_path, "packets dropped: QP has no address vector yet")                             \
	X(rx_wrong_peer, "packets dropped: source address is not the QP's peer")                   \
	X(rx_wrong_port, "packets dropped: not from the UDP port the QP's peer sends from")        \
	X(rx_ecn_ce, "packets received with ECN Congestion Experienced (CE) in their IP header")   \
	X(cnp_tx, "CNPs sent: CE-marked packets of a QP's peer, at most one per interval per QP")  \
	X(cnp_rx, "CNPs received (with SOFTRDMA_ECN=1 their QP slows down: DCQCN)")                \
	X(rx_mcast, "datagrams received on multicast group sockets")                               \
	X(rx_mcast_bad_qpn, "multicast datagrams dropped: DestQP is not 0xFFFFFF")                 \
	X(rx_mcast_no_group, "multicast datagrams dropped: no QP of the context in the group")     \
	X(rx_mcast_unicast, "packets dropped: DestQP 0xFFFFFF to a unicast address")               \
	X(mcast_deliveries, "multicast datagrams handed to attached QPs (one per QP)")             \
	X(tx_errors, "packets not sent: socket error")                                             \
	X(tx_deferred, "posts left for the application's next poll (core_posted)")                 \
	X(tx_bad_ah, "UD packets not sent: address handle destroyed, or no socket for its family") \
	X(gsi_routed, "CM MADs to QP1 passed to the process they are for (core/gsi.h)")            \
	X(gsi_local, "CM MADs sent to a process on our address straight to its endpoint")          \
	X(gsi_no_target, "CM MADs to QP1 for no listener / no process: answered as the kernel CM") \
	X(gsi_answered, "REJ / DREP / SIDR_REP sent for a MAD nobody takes")                       \
	X(gsi_rx_dropped, "packets to QP1 dropped: not a CM MAD (opcode, Q_Key, length, class)")   \
	X(gsi_fwd_errors, "CM MADs to QP1 dropped: the receiving process's queue was full")        \
	X(gsi_tx, "CM MADs sent from QP1")

enum core_counter {
#define CORE_COUNTER_ENUM(name, desc) CORE_CNT_##name,
	CORE_COUNTERS(CORE_COUNTER_ENUM)
#undef CORE_COUNTER_ENUM
	    CORE_CNT__COUNT
};
extern const char *const core_counter_names[CORE_CNT__COUNT];
const uint64_t *core_counters(const struct core_ctx *c);

#endif
