/* An output-queued Ethernet switch as a state machine, sans I/O: the congested hop that RoCE's
 * lossless-fabric assumptions and DCQCN are about (issue 13 step 4).
 *
 * N ports, one host behind each, IPv4 packets only (the TUN devices of switch_net.c carry
 * no Ethernet header). What a data-centre switch does to them is modelled, nothing else:
 *   - the hosts' links: a host's packets wait in its transmit queue (one FIFO per priority,
 *     strict priority, at most hold_max packets in all, more are dropped) and cross its link
 *     into the switch at host_rate_bps, one at a time, so that a host's burst reaches the
 *     switch spread out as a real NIC spreads it. With host_rate_bps 0 the hosts are
 *     infinitely fast: a packet enters the switch the moment it is given to the model;
 *   - routing: a packet leaves on the port whose host has its destination address;
 *   - classification: priority = DSCP >> 3 (the "trust DSCP" map of RoCE deployments:
 *     DSCP 26 -> priority 3 for RoCE data, DSCP 48 -> priority 6 for CNPs, 0 -> 0);
 *   - egress queues: one FIFO per port and priority. Priorities 7 and 6 (network control,
 *     CNPs) go first, in strict priority; 0..5 share what is left equally, by deficit round
 *     robin with a 9 KiB quantum (ETS with equal weights), so that the RoCE class cannot
 *     starve TCP at priority 0 or the other way round. Each port drains at rate_bps: a
 *     packet of L bytes occupies its port for L * 8 / rate_bps ns and leaves when that time
 *     has passed (store and forward; propagation 0). When a port falls idle, the next
 *     packet is chosen and starts; a packet that has started is not overtaken. A packet
 *     counts in its queue until it has left;
 *   - drop-tail: a packet that would take its egress queue beyond `buffer` bytes is dropped;
 *   - ECN marking, RED-style on the instantaneous queue as DCQCN's switches do: a packet
 *     that finds q bytes in its egress queue is marked with probability 0 for q <= kmin,
 *     pmax * (q - kmin) / (kmax - kmin) between, 1 for q >= kmax (and q > kmin: with kmin
 *     = kmax the step is at kmin, and a queue of exactly kmin is not marked). Marking sets CE in an
 *     ECN-capable packet (ECT(0) or ECT(1)) and fixes the IPv4 header checksum; a packet
 *     that is not ECN-capable is never marked (drop-tail still applies to it);
 *   - PFC (IEEE 802.1Qbb) on priority pfc_prio: the switch counts, per ingress port, the
 *     bytes of that priority it holds. Reaching xoff, it pauses the ingress: the host stops
 *     sending that priority, whatever the destination (head-of-line blocking included), and
 *     resumes when the count falls to xon or below. The paused packets wait in the host's
 *     transmit queue (hold_max above); a packet already on the host's link when the pause
 *     comes still arrives, as the headroom of a real PFC buffer takes it. Size buffer >=
 *     ports * (xoff + 2 MTU) to make the priority lossless;
 *   - random loss: each arriving packet is dropped with probability `loss` (seeded), before
 *     anything else, as lossy_link.c does.
 *
 * Time is the caller's: every call takes `now` in ns of one monotonic clock (virtual in the
 * tests). The caller feeds packets with swm_input, takes those that are due with swm_output
 * and sleeps until swm_deadline. Arrivals and departures are processed in the order they
 * happen (arrivals first at the same ns), however late swm_output is called; take every due
 * packet out before an swm_input at a later time, or the input sees queues that should
 * already have drained.
 *
 * Memory: swm_input copies the packet; the model allocates one buffer per packet it keeps
 * and frees it when the packet leaves or is dropped. Threads: none; the caller serialises.
 * Errors: 0 or a negative errno. */
#ifndef SOFTRDMA_TOOLS_SWITCH_MODEL_H
#define SOFTRDMA_TOOLS_SWITCH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SWM_MAX_PORTS 16
#define SWM_PRIOS     8

struct swm_cfg {
	unsigned ports;		      /* 2..SWM_MAX_PORTS */
	uint32_t addr[SWM_MAX_PORTS]; /* IPv4 address of each port's host, host byte order */
	uint64_t rate_bps;	      /* every egress port's rate in bit/s (IP bytes); 0: none */
	uint64_t host_rate_bps;	      /* every host's link into the switch, bit/s; 0: none */
	uint32_t buffer;	      /* bytes per egress queue (port, priority), >= 65535 */
	bool ecn;		      /* RED marking on */
	uint32_t kmin, kmax;	      /* bytes, kmin <= kmax */
	double pmax;		      /* 0..1 */
	bool pfc;		      /* PFC on pfc_prio */
	uint8_t pfc_prio;	      /* 0..7 */
	uint32_t xoff, xon;	      /* bytes held per ingress port, 0 < xon < xoff */
	uint32_t hold_max;	      /* packets a host keeps (queued or on its link), >= 1 */
	double loss;		      /* 0..1 */
	uint64_t seed;		      /* random loss and marking draws */
};

/* Fills cfg with the defaults for `ports` ports (addresses left 0): no rate limits, buffer
 * 1 MiB, ECN off with DCQCN's paper thresholds (kmin 5 KB, kmax 200 KB, pmax 1 %), PFC off
 * on priority 3 with xoff 96 KiB and xon 64 KiB, hold_max 8192, no loss, seed 1. */
void swm_cfg_default(struct swm_cfg *cfg, unsigned ports);
/* 0 if cfg is valid, else -EINVAL with the reason in why (len bytes; why may be NULL). */
int swm_cfg_check(const struct swm_cfg *cfg, char *why, size_t len);

/* What swm_input did with a packet. */
enum swm_verdict {
	SWM_QUEUED,	  /* in its egress queue (marked or not) */
	SWM_HELD,	  /* in its host's transmit queue or on its link (host_rate_bps, or its
			     priority paused by PFC): it enters the switch later, and the
			     counters say what became of it there */
	SWM_DROP_LOSS,	  /* random loss */
	SWM_DROP_TAIL,	  /* its egress queue was full */
	SWM_DROP_HOLD,	  /* its host's transmit queues held hold_max packets */
	SWM_DROP_BAD,	  /* not an IPv4 packet with a valid header and length */
	SWM_DROP_NOROUTE, /* no port has its destination (or it is the ingress port's own host) */
};

/* Per port; "rx" is everything its host sent (what was dropped included), "tx" what the
 * switch sent it. */
struct swm_port_stats {
	uint64_t rx_pkts, rx_bytes;
	uint64_t tx_pkts, tx_bytes;
	uint64_t tx_prio[SWM_PRIOS];  /* tx_pkts by priority (6: CNPs) */
	uint64_t fwd_pkts, fwd_bytes; /* from this port's host, delivered (left on any port) */
	uint64_t drop_loss, drop_tail, drop_hold, drop_bad, drop_noroute; /* by ingress port */
	uint64_t marked;      /* CE set on packets queued at this egress port */
	uint64_t ect;	      /* ECN-capable packets queued at this egress port (ECN on or off) */
	uint32_t queue_bytes; /* now, all priorities of this egress port */
	uint32_t queue_max;   /* the most its queues held at once, bytes */
	uint32_t pfc_bytes;   /* now: bytes of pfc_prio from this ingress in the switch */
	uint32_t held;	      /* now: packets of this port's host waiting or on its link (what
				 hold_max counts) */
	uint64_t pauses;      /* XOFF events of this ingress */
	uint64_t pause_ns;    /* time it spent paused, the current pause included */
	bool paused;	      /* now */
};

struct swm;

/* Creates the model. Returns 0 and *out, -EINVAL (swm_cfg_check) or -ENOMEM. */
int swm_create(const struct swm_cfg *cfg, struct swm **out);
/* Frees it and every packet it holds (NULL is a no-op). */
void swm_destroy(struct swm *s);

/* A packet of len bytes from the host on port `in` arrives at `now` (non-decreasing across
 * calls). pkt stays the caller's. Returns the verdict (>= 0), or -EINVAL for a bad port, or
 * -ENOMEM (the packet is dropped and counted as drop_tail). */
int swm_input(struct swm *s, unsigned in, const uint8_t *pkt, size_t len, uint64_t now);

/* The next packet that has left the switch by `now`, or NULL: its egress port in *port, its
 * length in *len. The bytes stay the model's until the next call into it. Call until NULL. */
const uint8_t *swm_output(struct swm *s, uint64_t now, unsigned *port, size_t *len);

/* The time of the model's next event: a packet leaving the switch, or (with host_rate_bps)
 * one crossing its host's link into it, so swm_output may have nothing then (call it and
 * ask again); UINT64_MAX when no packet is on a wire. Never later than the next packet out. */
uint64_t swm_deadline(const struct swm *s);

/* Counters of port p as of `now` (pause_ns includes a pause in progress). -EINVAL for a bad
 * port. */
int swm_port_stats(const struct swm *s, unsigned p, uint64_t now, struct swm_port_stats *st);

/* Changes the loss probability (0..1) for packets from now on; -EINVAL otherwise. */
int swm_set_loss(struct swm *s, double loss);

#endif
