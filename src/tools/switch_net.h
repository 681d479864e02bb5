/* A switch to test against (issue 13 step 4): N hosts, each in its own network namespace
 * behind a TUN device, joined by the switch model (switch_model.h) running in a thread of the
 * creating process. Everything the hosts send is real kernel UDP and TCP: softrdma's RoCEv2,
 * its iWARP and the kernel's own TCP meet the same bottleneck, ECN marks and PFC pauses.
 *
 *   srlink<pid>a 10.213.N.1 --tun--+
 *   srlink<pid>b 10.213.N.2 --tun--+-- forwarder thread: swm_input / swm_output
 *   srlink<pid>c 10.213.N.3 --tun--+
 *
 * Names and addresses follow netns.h (host i: letter 'a' + i, address .i+1). Processes use a
 * host by entering its namespace: a forked child calls switch_net_enter() before exec, or a
 * shell runs `ip netns exec NAME ...`.
 *
 * The forwarder reads every TUN (non-blocking, a burst at a time), feeds the model on
 * CLOCK_MONOTONIC, writes what the model releases into the destination host's TUN, and sleeps
 * in ppoll until the next departure or packet (timer slack 1 ns: a 4 KiB packet lasts 33 us at
 * 1 Gbit/s). It wakes late by tens of microseconds at times; the model then releases every
 * packet that is due at once, so the average rate stays exact and only the spacing is
 * bursty. Its CPU cost is lossy_link's (about 3 us per packet, one read and one write), so
 * keep rate * hosts within a few hundred thousand packets per second: at MTU 9000 (RoCE MTU
 * 4096) 1 Gbit/s is about 30 kpps per congested port.
 *
 * What a host's own TUN queue drops (a full NETNS_TXQUEUELEN before the forwarder reads) is
 * counted apart (switch_net_stats.queue_dropped).
 *
 * Requirements: netns.h's (root, /dev/net/tun, `ip`). Threads: create and destroy from one
 * thread; the rest from any thread between them. Errors: 0 or a negative errno, with a human
 * reason in err where there is one. */
#ifndef SOFTRDMA_TOOLS_SWITCH_NET_H
#define SOFTRDMA_TOOLS_SWITCH_NET_H

#include <stddef.h>
#include <stdint.h>

#include "tools/switch_model.h"

struct switch_net;

struct switch_net_cfg {
	/* The switch: ports is the number of hosts (2..SWM_MAX_PORTS); addr[] is filled in by
	 * switch_net_create. */
	struct swm_cfg sw;
	/* MTU of every host's TUN device in bytes, 68..65535; 0 means 1500. */
	unsigned mtu;
};

struct switch_net_stats {
	struct swm_port_stats port;
	uint64_t queue_dropped; /* dropped in the host's TUN queue before the switch saw them */
	uint64_t write_errors;	/* packets the host's TUN refused (malformed, device gone) */
};

/* 0 if switch_net_create() can work here (netns_available). */
int switch_net_available(char *why, size_t len);

/* Creates the hosts and starts the forwarder, first deleting stale namespaces of dead
 * processes. On success *out owns everything; on failure nothing is left behind and err says
 * why. -EINVAL for a bad configuration (the reason in err), -EADDRINUSE if no 10.213.N.0/24
 * is free, else the failing step's errno. */
int switch_net_create(struct switch_net **out, const struct switch_net_cfg *cfg, char *err,
		      size_t errlen);

unsigned switch_net_hosts(const struct switch_net *n);
/* Host h's namespace, dotted IPv4 address and TUN interface name (NULL for a bad h). They
 * live as long as the switch. */
const char *switch_net_netns(const struct switch_net *n, unsigned h);
const char *switch_net_addr(const struct switch_net *n, unsigned h);
const char *switch_net_ifname(const struct switch_net *n, unsigned h);

/* Moves the calling thread into host h's namespace (for a forked child before exec;
 * async-signal-safe). -EINVAL for a bad h, else -errno of setns. */
int switch_net_enter(const struct switch_net *n, unsigned h);

/* Port h's counters now. -EINVAL for a bad h. */
int switch_net_stats(const struct switch_net *n, unsigned h, struct switch_net_stats *st);

/* The random loss of every port from now on (0..1); -EINVAL otherwise. */
int switch_net_set_loss(struct switch_net *n, double loss);

/* Stops the forwarder, frees what the switch holds, closes the TUN devices and deletes the
 * namespaces. NULL is a no-op. */
void switch_net_destroy(struct switch_net *n);

#endif
