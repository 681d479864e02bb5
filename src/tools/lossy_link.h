/* A lossy IPv4 link in user space, for measuring transports under packet loss where netem is not
 * available (the kernel has no sch_netem, but /dev/net/tun and `ip netns` work).
 *
 * Two network namespaces, each with one TUN device (IFF_TUN | IFF_NO_PI, an IPv4 /24, MTU
 * cfg->mtu), are joined by a forwarder in the calling process: one thread per direction reads IP
 * packets from one TUN fd and writes them to the other, dropping each with probability `loss`
 * (seeded PRNG, independent per direction). Everything crossing the link is real kernel UDP and
 * TCP, so TCP's own loss recovery (and iWARP's, which rides on it) is exercised as much as
 * softrdma's RoCE go-back-N.
 *
 *   namespace srlink<pid>a                                   namespace srlink<pid>b
 *   srl<pid>a 10.213.N.1/24  <-- tun fd -- forwarder -- tun fd -->  srl<pid>b 10.213.N.2/24
 *
 * N is pid % 250 (the next free value if that /24 is on a local interface); a second link in the
 * same process gets "-<seq>" in its names. Names carry the creating PID so that a later
 * lossy_link_create() can delete namespaces left behind by a process that died (SIGKILL, crash):
 * any /run/netns/srlink<pid>... whose pid no longer exists is deleted. The TUN devices need no
 * sweeping: the kernel deletes a non-persistent TUN when its fd closes.
 *
 * Processes use a side by entering its namespace: a forked child calls lossy_link_enter() before
 * exec (or the parent runs `ip netns exec NAME ...`). Nothing crossing the link can reach the
 * host's own interfaces; the forwarder itself runs in the caller's namespace and needs none.
 *
 * Measured on the development VM (2 vCPUs shared by both sides' programs and the forwarder,
 * kernel 6.18, RelWithDebInfo; tests/e2e/test_lossy_link.c prints these figures on every run):
 *   - cost: ~3 us of forwarder CPU per packet (one read() and one write() per packet: TUN has no
 *     batched I/O, and the write runs the receiving side's IP/UDP/TCP input in the forwarder's
 *     thread), i.e. ~300 kpps per direction per core. No GSO/GRO offloads are enabled, so every
 *     packet is wire-sized and each drop loses exactly one MTU-sized packet.
 *   - bandwidth at loss 0, MTU 1500: one TCP stream 2.2-3.0 Gb/s (280-375 MB/s); softrdma bw
 *     (64 KiB SEND) over RoCE 100-165 MiB/s (RoCE MTU 1024: ~130-165 kpps) and over iWARP
 *     165-250 MiB/s; at MTU 9000 RoCE (MTU 4096) reached ~430-500 MiB/s. On lo the same RoCE
 *     run gives ~950 MiB/s: the link caps bandwidth (CPU-bound, the runs vary by +-30 %), so
 *     results across it compare with each other, not with loopback figures.
 *   - latency: a 64 B UDP ping-pong round trip takes 20-40 us across the link against 8-22 us
 *     on lo in the same namespace: +12-19 us per round trip (two thread wake-ups and two TUN
 *     read/write pairs).
 * IFF_NAPI (GRO on the receiving TUN) was tried: no better for TCP, worse for RoCE; not used.
 *
 * Other losses. Each TUN device queues at most txqueuelen packets for the forwarder (set to
 * LOSSY_LINK_TXQUEUELEN at create, against 500 by default, so that a RoCE burst of 128 x 64 KiB
 * messages fits); beyond that the kernel drops the packet before the forwarder sees it. Those
 * drops are counted apart (lossy_link_stats.queue_dropped), so a run at loss 0 can check it lost
 * nothing.
 *
 * ---- Note for softrdma's device discovery ----
 * softrdma creates roce_<ifname> and iwarp_<ifname> for every interface that is up and has an IPv4
 * address, and the TUN devices qualify (no MAC: the node GUID comes from the interface name, so the
 * two sides' names differ on purpose). `ip netns exec NAME softrdma devices` lists roce_srl<pid>a
 * and iwarp_srl<pid>a; `softrdma bw` over RoCE and over iWARP completes across the link at 0 % and
 * at 1 % loss (tests/e2e/test_lossy_link.c). The RoCE path MTU follows the netdev MTU: 1500 gives
 * active_mtu 1024 (2048 + headers does not fit), 9000 gives 4096 as on lo; choose cfg->mtu with
 * that in mind when comparing with TCP, whose segments fill the whole MTU. Each side is its own
 * namespace, so softrdma's UDP port 4791, its steering registry (keyed by namespace) and the
 * side-band TCP ports never meet other tests on the host.
 *
 * Requirements: root (CAP_NET_ADMIN and CAP_SYS_ADMIN: TUN, namespaces, the /run/netns mounts),
 * /dev/net/tun, and the iproute2 `ip` command (run with posix_spawn, argv only, no shell).
 * lossy_link_available() checks them without side effects.
 *
 * Threads: create and destroy from one thread; set_loss, get_stats and the name/address getters
 * from any thread between them. Children: create and destroy run `ip` and reap it by pid; a
 * caller that reaps any child (waitpid(-1), SIGCHLD = SIG_IGN) can steal that status, and then
 * the command is reported as failed.
 *
 * Errors: 0 or a negative errno; the calls with an err buffer also write a human reason there.
 */
#ifndef SOFTRDMA_TOOLS_LOSSY_LINK_H
#define SOFTRDMA_TOOLS_LOSSY_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "tools/netns.h"

/* The TUN devices' transmit queue length in packets (the kernel default is 500). */
#define LOSSY_LINK_TXQUEUELEN NETNS_TXQUEUELEN

struct lossy_link;

struct lossy_link_cfg {
	/* Probability of dropping each packet, in each direction independently, 0..1. */
	double loss;
	/* Seeds the drop decisions (each direction draws from its own stream): the same seed and
	 * the same packet sequence give the same drops. */
	uint64_t seed;
	/* MTU of both TUN devices in bytes, 68..65535; 0 means 1500. */
	unsigned mtu;
};

/* Per direction: index 0 counts packets from side 0 to side 1, index 1 from side 1 to side 0. */
struct lossy_link_stats {
	uint64_t fwd[2];     /* packets written to the other side */
	uint64_t dropped[2]; /* packets dropped on purpose (the loss probability) */
	uint64_t bytes[2];   /* IP bytes of the forwarded packets (headers included) */
	/* packets lost otherwise: the write to the other TUN failed (errors[]), or the sending
	 * side's TUN queue was full and the kernel dropped them before the forwarder read them
	 * (queue_dropped[]: the device's tx_dropped, read from the namespace's /proc/net/dev). */
	uint64_t errors[2];
	uint64_t queue_dropped[2];
};

/* 0 if lossy_link_create() can work here, else -EPERM (not root, or missing CAP_NET_ADMIN /
 * CAP_SYS_ADMIN), -ENOENT (no /dev/net/tun or no `ip` command) or the errno of opening
 * /dev/net/tun; a human reason goes to why (len bytes, always terminated; why may be NULL). */
int lossy_link_available(char *why, size_t len);

/* Creates the two namespaces, the TUN devices and the forwarder threads, first deleting stale
 * namespaces of dead processes. On success *out owns everything (free with lossy_link_destroy);
 * on failure nothing is left behind, *out is untouched and err holds the reason. -EINVAL for a
 * loss outside 0..1 or a bad MTU, -EADDRINUSE if no 10.213.N.0/24 is free, else the failing
 * step's errno (-EIO when an `ip` command failed: its message is in err). */
int lossy_link_create(struct lossy_link **out, const struct lossy_link_cfg *cfg, char *err,
		      size_t errlen);

/* Names of side 0 or 1 (NULL for another side): the namespace ("srlink<pid>a"), the IPv4 address
 * in dotted form ("10.213.N.1" for side 0, ".2" for side 1) and the TUN interface in that namespace
 * (at most 15 characters). The strings live as long as the link. */
const char *lossy_link_netns(const struct lossy_link *l, int side);
const char *lossy_link_addr(const struct lossy_link *l, int side);
const char *lossy_link_ifname(const struct lossy_link *l, int side);

/* Sets the drop probability (0..1) of both directions for the packets read from now on; -EINVAL
 * outside 0..1. Lock-free: safe while traffic flows. */
int lossy_link_set_loss(struct lossy_link *l, double loss);

/* Moves the calling thread into side's network namespace (setns CLONE_NEWNET): meant for a forked
 * child before exec. Async-signal-safe (one system call on an fd opened at create). -EINVAL for a
 * bad side, else -errno of setns. */
int lossy_link_enter(const struct lossy_link *l, int side);

/* Counters since create (monotonic; queue_dropped is read from the kernel at each call). */
void lossy_link_get_stats(const struct lossy_link *l, struct lossy_link_stats *st);

/* Stops and joins the forwarder, closes the TUN devices (the kernel deletes them) and deletes both
 * namespaces. Processes still inside a namespace keep it alive, without connectivity, until they
 * exit. NULL is a no-op. */
void lossy_link_destroy(struct lossy_link *l);

#endif
