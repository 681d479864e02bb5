/* Hosts in network namespaces, each reached through a TUN device whose fd the creating process
 * keeps: what lossy_link.c (two hosts, a dropping wire) and switch_net.c (N hosts around a
 * switch) are built from.
 *
 * A host is a namespace "srlink<pid>[-<seq>]<letter>" holding one TUN device
 * "srl<pid>[-<seq>]<letter>" (IFF_TUN | IFF_NO_PI, IPv4 /24, no IPv6), letter 'a' for the first
 * host, 'b' for the second and so on. The creating PID in the name lets a later process delete
 * namespaces left behind by one that died (netns_sweep_stale); the TUN devices need no sweeping,
 * the kernel deletes a non-persistent TUN when its fd closes. Packets the host sends come out of
 * the fd (read()), packets written to the fd enter the host.
 *
 * Requirements: root (CAP_NET_ADMIN and CAP_SYS_ADMIN), /dev/net/tun and iproute2's `ip`
 * (run with posix_spawn, argv only, no shell). Children: the `ip` commands are reaped by pid;
 * a caller that reaps any child (waitpid(-1), SIGCHLD = SIG_IGN) can steal that status, and
 * then the command is reported as failed.
 *
 * Errors: 0 or a negative errno, with a human reason in err (errlen bytes, always terminated;
 * err may be NULL). */
#ifndef SOFTRDMA_TOOLS_NETNS_H
#define SOFTRDMA_TOOLS_NETNS_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Hosts one process may create per link or switch: letters 'a'.. */
#define NETNS_MAX_HOSTS 16
/* A TUN device's transmit queue length in packets (the kernel default is 500): a RoCE burst
 * of 128 x 64 KiB messages fits. */
#define NETNS_TXQUEUELEN 8192

struct netns_host {
	char ns[32];
	char ifname[IFNAMSIZ];
	char addr[INET_ADDRSTRLEN]; /* dotted IPv4 */
	int tun;		    /* the TUN fd, non-blocking, or -1 */
	int nsfd;		    /* the namespace, for setns(), or -1 */
	int procfd;		    /* the namespace's /proc/net/dev, or -1 (optional) */
	bool ns_made;
};

/* 0 if hosts can be made here, else -EPERM (not root, or without CAP_NET_ADMIN /
 * CAP_SYS_ADMIN), -ENOENT (no /dev/net/tun or no `ip`) or the errno of opening /dev/net/tun. */
int netns_available(char *why, size_t len);

/* Deletes every namespace named as above whose creating process is gone (or a zombie). */
void netns_sweep_stale(void);

/* A third byte N (1..250) such that no interface here has an address in 10.213.N.0/24,
 * trying start first. 0, or -EADDRINUSE. */
int netns_pick_subnet(unsigned start, unsigned *out);

/* A number for the next link or switch this process makes (0, 1, ...): part of its names. */
unsigned netns_seq(void);

/* Fills the names of host `idx` of the link or switch `seq` of this process, with the address
 * 10.213.<subnet>.<idx + 1>. Makes nothing. */
void netns_host_name(struct netns_host *h, unsigned seq, unsigned idx, unsigned subnet);

/* Creates the host named in h: the TUN device, the namespace, the device moved into it with
 * `mtu`, NETNS_TXQUEUELEN and the address /24, lo and the device up. On failure what was made
 * is recorded in h for netns_host_destroy. */
int netns_host_create(struct netns_host *h, unsigned mtu, char *err, size_t errlen);

/* Closes the TUN (the kernel deletes the device) and deletes the namespace; processes still
 * inside keep it, without connectivity, until they exit. Safe on a half-made host. */
void netns_host_destroy(struct netns_host *h);

/* The packets the kernel dropped because the host's TUN queue was full (its tx_dropped). */
uint64_t netns_host_queue_dropped(const struct netns_host *h);

#endif
