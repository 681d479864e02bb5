/* The UDP socket backend for RoCEv2 (../shared/spec/roce.md section 1): one `struct io_udp` per
 * device context and local IP address. It moves UDP payloads (BTH .. ICRC) between the kernel and
 * caller-owned buffers in batches, and steers incoming packets between the processes that share
 * one address and port, so that several softrdma processes on one host receive RoCEv2 traffic on
 * 127.0.0.1:4791 (or any local address) at once, with no configuration, as with Linux rxe.
 *
 * Only core/ (the progress loop) calls this API (DESIGN.md "Layers").
 *
 * Threads. Nothing here takes a thread lock. The calls fall into two sides:
 *   rx side: io_udp_recv, io_udp_service, io_udp_next_service_ns, io_udp_info;
 *   tx side: io_udp_send, io_udp_sport_get, io_udp_sport_put.
 * At most one thread at a time may be on each side of one io_udp (the caller serialises, e.g. with
 * the context's progress lock); one rx-side and one tx-side call may run concurrently. open and
 * close are exclusive with everything. io_udp_fd, io_udp_slot, io_udp_port, io_udp_counters and
 * io_udp_counter_name may be called from any thread at any time between open and close.
 *
 * Errors: 0 (or a count) on success, a negative errno otherwise. Packets that cannot be delivered
 * or sent are never errors: they are dropped and counted by reason (io_udp_counters).
 *
 * Allocation: only io_udp_open and io_udp_sport_get allocate; the data path (recv, send, service)
 * never does.
 *
 * ---- IPv4 Identification and the ICRC (spec section 6.3) ----
 * The ICRC covers the IPv4 Identification field, and a UDP socket cannot choose it. Linux gives a
 * DF packet sent from an UNCONNECTED UDP socket the ID 0 (ip_select_ident_segs: the per-socket
 * counter is used only when the socket has a connected destination). Every socket this backend
 * sends from is therefore unconnected and has IP_MTU_DISCOVER = IP_PMTUDISC_DO (DF set, never
 * fragmented locally: an oversize packet is dropped and counted as tx_drop_msgsize), so the wire
 * layer must compute the IPv4 ICRC with Identification 0x0000 and flags DF (0x4000).
 * tests/e2e/test_io_ipid.c captures io_udp_send's packets on lo with AF_PACKET (root) and checks
 * ID 0 and DF on the running kernel (verified on 6.18: ID 0 and DF from the main and the
 * source-port sockets, while a connected socket numbers its packets). IPv6 has no covered field
 * the kernel chooses (flow label: automatic labels are switched off, 0 as in rxe, and masked
 * anyway). The UDP checksum the kernel writes is masked in the ICRC.
 *
 * ---- Multi-process steering ----
 * QPNs carry the owner's steering slot: QPN = (slot << 16) | n, slot 1..255 (allocated by the
 * verbs layer from io_udp_slot()). Note that slot 255 with n = 0xFFFF is the multicast QPN
 * 0xFFFFFF, which the verbs layer must not hand out.
 *
 * Every process binds its receive socket to local:port with SO_REUSEPORT; all of them (same
 * effective UID, same network namespace) form one kernel reuseport group. The kernel chooses the
 * receiving socket by running a classic BPF program attached with SO_ATTACH_REUSEPORT_CBPF (no
 * privilege needed); for UDP the program sees the UDP payload at offset 0, i.e. the BTH. It reads
 * DestQP (BTH bytes 5..7) and returns a socket index from a table slot -> index. Socket indices are
 * the order of joining, and when a socket leaves the kernel moves the LAST socket into the freed
 * index, so the members keep the mapping in a shared registry:
 *   <run dir>/softrdma-io-<euid>-<netns inode>-<address hex>-<port>   (mode 0600, mmap'ed)
 * in the user's private run directory (io/rundir.h: /dev/shm/softrdma-<euid>, mode 0700),
 * guarded by flock(). It records each member's slot, pid and current index. A member is alive
 * while it holds an OFD byte-range lock on byte (1 MiB + slot) of that file; the kernel releases
 * the lock when the process exits or crashes (or closes the file), so liveness needs no pid
 * polling and survives pid reuse and pid namespaces.
 *
 * Indices are learned by probing: a probe is a packet to local:port with DestQP 0 (which RoCE never
 * uses; rxe drops it) and the target index k in the PSN; the program steers it to index k; the
 * member that receives it records "my index is k" for the current registry epoch. Every membership
 * change increments the epoch. When every live member has claimed a distinct index in the
 * current epoch, the member that completed the set attaches the new program. Probes carry a random
 * token from the registry, so no foreign packet can move the steering.
 *   - join (io_udp_open): if the registry was consistent, the newcomer is the last index; it checks
 *     this with a probe to itself (no help from the others) and attaches the new program
 *     before io_udp_open returns. Otherwise it starts a probe round and returns; steering becomes
 *     complete when the others answer (they do so from io_udp_recv / io_udp_service).
 *   - leave (io_udp_close): the leaver knows the kernel will move the last member into its index,
 *     attaches the corresponding program, then closes its socket (packets steered to it in the few
 *     microseconds between are lost; RC retransmits).
 *   - crash: the survivors notice the released lock in io_udp_service (at least every
 *     cfg.check_interval_ms) or at once when a misdelivered packet arrives, remove the dead member,
 *     and start a probe round; the others answer when they next receive. Until the new program is
 *     attached, packets for the moved member may reach another member: they are dropped and counted
 *     (rx_misdelivered) and RC retransmission recovers them.
 *   Measured on loopback (2 vCPUs): io_udp_open ~0.3 ms, io_udp_close ~0.2 ms, with the others
 *   idle; after a SIGKILL, steering is complete again 1-20 ms later (20 ms = the default
 *   check interval, when no traffic reveals the crash earlier); tests/e2e/test_io_steer.c.
 * DestQP with slot 0 (QP1 / GSI, and any QPN not of this scheme) and slots that no live member owns
 * go to the "default member", the live member with the lowest slot (io_udp_info().is_default).
 * Demultiplexing QP1 MADs between processes (rdma_cm) is left to a layer above.
 * Limitations: a foreign socket (not softrdma) that joins the same reuseport group takes an index
 * this scheme does not know; steering then stays incomplete (counted in steer_incomplete).
 * A process that forks without exec would share its sockets and registry file with the child
 * (all are O_CLOEXEC), keeping the member alive in the kernel's group after the parent closed
 * it or ended: the child drops its copies at the fork (udp.c, fork_child: /dev/null in their
 * place, the registry unmapped), and its io_udp_close frees the rest without leaving the
 * parent's group; the child cannot use the io_udp. When every member crashes, the registry file
 * stays behind; the next member to join reuses it, and the last one to close removes it.
 *
 * io_udp_recv handles probes internally (they never reach the caller) and does the steering
 * bookkeeping a probe or a misdelivered packet requires, without ever blocking: the registry lock
 * is only tried (LOCK_NB); when it is busy the work is deferred to io_udp_service. */
#ifndef SOFTRDMA_IO_IO_H
#define SOFTRDMA_IO_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IO_UDP_DEFAULT_PORT	4791
#define IO_UDP_BATCH		64 /* most packets one recv or send system call moves */
#define IO_UDP_MAX_SLOT		255
#define IO_UDP_DEFAULT_CHECK_MS 20
#define IO_UDP_TRAIN_MAX	64 /* most packets in one GSO train (the kernel's UDP_MAX_SEGMENTS) */
#define IO_UDP_TRAIN_BYTES	65507 /* most payload bytes in one train (IPv4 UDP length) */
#define IO_UDP_GSO_ENV		"SOFTRDMA_GSO"

/* Drop, error and event counters, one list (STYLE habit 10). X(name, description). */
#define IO_UDP_COUNTERS(X)                                                                         \
	X(rx_packets, "packets delivered by io_udp_recv")                                          \
	X(rx_bytes, "payload bytes delivered by io_udp_recv")                                      \
	X(rx_truncated, "dropped: datagram larger than the caller's buffer (MSG_TRUNC)")           \
	X(rx_gro, "received datagrams that coalesced several (UDP_GRO), cut back into them")       \
	X(rx_runt, "dropped: payload shorter than a BTH (12 bytes)")                               \
	X(rx_misdelivered, "dropped: steering delivered another member's packet here")             \
	X(rx_no_pktinfo, "no destination address from the kernel: the bound address was used")     \
	X(rx_errors, "recvmmsg failures other than EAGAIN")                                        \
	X(rx_probes, "steering probes received and consumed")                                      \
	X(rx_bad_probes, "dropped: DestQP 0 packet that is not a valid probe of this registry")    \
	X(rx_open_drops, "dropped: data packets received while joining")                           \
	X(tx_packets, "packets handed to the kernel by io_udp_send")                               \
	X(tx_bytes, "payload bytes handed to the kernel")                                          \
	X(tx_drop_again, "dropped: socket buffer full (EAGAIN)")                                   \
	X(tx_drop_nobufs, "dropped: ENOBUFS")                                                      \
	X(tx_drop_msgsize, "dropped: larger than the path MTU with DF (EMSGSIZE)")                 \
	X(tx_drop_unreach, "dropped: no route, unreachable or refused by a firewall")              \
	X(tx_drop_badaddr, "dropped: destination of the wrong address family")                     \
	X(tx_drop_other, "dropped: any other send error")                                          \
	X(tx_sport_unbound, "sent from the main socket: no io_udp_sport_get for pkts.sport")       \
	X(tx_gso_trains, "GSO super-packets handed to the kernel (trains of 2 or more packets)")   \
	X(tx_gso_packets, "packets that left in a GSO super-packet")                               \
	X(tx_drop_gso, "dropped: train packets after the first, when the kernel refused GSO")      \
	X(sport_fallback, "io_udp_sport_get could not bind the port; main socket used instead")    \
	X(steer_epochs, "membership changes this member started (join, leave, crash seen)")        \
	X(steer_gc, "dead members removed from the registry")                                      \
	X(steer_probes_sent, "probes sent")                                                        \
	X(steer_claims, "indices claimed from probes")                                             \
	X(steer_conflicts, "a probe claimed a second index in one epoch (round restarted)")        \
	X(steer_attach, "steering programs attached")                                              \
	X(steer_lock_busy, "steering work deferred because the registry lock was busy")            \
	X(steer_incomplete, "services that found steering still incomplete after 100 ms")          \
	X(steer_errors, "steering system call failures")

/* The list expands to "a, b, c," (clang-format cannot see that). */
/* clang-format off */
enum io_udp_counter {
#define IO_UDP_X_ENUM(name, desc) IO_UDP_C_##name,
	IO_UDP_COUNTERS(IO_UDP_X_ENUM)
#undef IO_UDP_X_ENUM
	IO_UDP_NCOUNTERS
};
/* clang-format on */

struct io_udp_config {
	/* AF_INET or AF_INET6. */
	int family;
	/* Local address, network order; IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d). The unspecified
	 * address is refused (-EINVAL): the ICRC covers the source address, so it must be known. */
	uint8_t addr[16];
	/* UDP port to receive on; 0 means IO_UDP_DEFAULT_PORT (4791). */
	uint16_t port;
	/* The steering slot to take (1..255), or 0 for the lowest free one. A context that
	 * receives on an IPv4 and an IPv6 address needs the same slot on both, since its QPNs
	 * carry it: io_udp_open fails with -EBUSY when the asked slot is taken. */
	uint8_t slot;
	/* Period of the others' liveness check in ms; 0 means IO_UDP_DEFAULT_CHECK_MS. */
	uint32_t check_interval_ms;
	/* Directory of the steering registry; NULL: the user's run directory (io/rundir.h). */
	const char *registry_dir;
	/* Receive / send socket buffer sizes in bytes; 0 keeps the kernel default. */
	int rcvbuf, sndbuf;
	/* The device's interface: multicast leaves through it (IP_MULTICAST_IF /
	 * IPV6_MULTICAST_IF on every sending socket; io/mcast.h). 0: the kernel picks by route
	 * (IPv4: the interface of the bound address). */
	int ifindex;
	/* Marking: the IP TOS / IPv6 traffic class the sockets send with unless a packet asks
	 * otherwise (io_pkt.tos), and their SO_PRIORITY: the skb priority, which a VLAN
	 * interface's egress map turns into the 802.1Q PCP. Set after the TOS, which would
	 * otherwise derive a priority of its own (ip(7) IP_TOS). */
	uint8_t tos;
	uint8_t priority;
};

/* The TTL the sockets send with unless a packet asks otherwise (io_pkt ttl; only a different
 * value, or TOS, costs the kernel ancillary data to parse). */
#define IO_UDP_SOCK_TTL 64

/* One packet: a UDP payload (BTH .. ICRC) and its addressing. The buffer is always the caller's. */
struct io_pkt {
	uint8_t *buf;	 /* payload bytes (caller-owned) */
	size_t cap;	 /* recv: capacity of buf in bytes; send: ignored */
	size_t len;	 /* payload length in bytes (recv: filled; send: to send) */
	bool ipv6;	 /* recv: filled (false for IPv4); send: ignored (the socket's family) */
	uint8_t src[16]; /* recv: sender address; send: ignored (the bound address is used) */
	uint8_t dst[16]; /* recv: the IP destination of the packet; send: where to send */
	uint16_t sport;	 /* recv: sender's UDP port; send: source port (see io_udp_sport_get) */
	uint16_t dport;	 /* recv: our port; send: destination UDP port (normally 4791) */
	uint8_t tos;	 /* IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN); recv: as received */
	uint8_t ttl;	 /* IPv4 TTL / IPv6 hop limit; send: 0 means IO_UDP_SOCK_TTL */
	uint8_t train;	 /* send: 0 or 1, alone; k > 1, the first of a GSO train of k packets
			  * (see "GSO trains" below); recv: the packet's place in the datagram
			  * GRO coalesced it into (0: the first, or alone), which is its place
			  * in the sender's GSO train when the sender made one (a train's
			  * packets carry IPv4 IDs ID0 + place) */
	/* send: a part of the datagram sent from where it lies rather than from buf (a payload
	 * in the application's registered memory): the len bytes are buf[0 .. ext_at), then
	 * ext[0 .. ext_len), then buf[ext_at .. len - ext_len). NULL: buf holds all len bytes.
	 * recv: unused. io_fault_send takes no packet with one. */
	const uint8_t *ext;
	uint32_t ext_len;
	uint32_t ext_at;
};

struct io_udp;

/* Opens the receive socket on cfg->addr : cfg->port, joins the steering group and registry,
 * takes the lowest free slot and attaches the steering program (see above).
 * Returns 0 and *out (owned by the caller until io_udp_close), or:
 *   -EINVAL        bad config (family, unspecified address, mismatch of family and address);
 *   -EADDRINUSE    the port is held by a socket that is not in a softrdma reuseport group:
 *                  a plain socket, another user's softrdma, or the kernel's rxe (its UDP tunnel
 *                  socket holds *:4791);
 *   -EADDRNOTAVAIL the address is not local;
 *   -EAFNOSUPPORT  IPv6 disabled;
 *   -ENOSPC        all 255 slots are taken;
 *   -EPERM         the registry file exists but belongs to another user;
 *   -ENOMEM, -EMFILE, ... resource errors from the system.
 * Blocks for at most ~0.3 s (registry lock held by another member's open or close; self probe).
 * Nothing is left behind on failure. */
int io_udp_open(const struct io_udp_config *cfg, struct io_udp **out);

/* Who holds UDP port `port` on addr (IPv4-mapped or IPv6), for io_udp_open's -EADDRINUSE: the
 * uid of a socket bound to that address or to the wildcard, as /proc/net/udp and udp6 show it
 * (the kernel's own sockets, rxe's among them, show as uid 0). Returns the uid, or -ENOENT when
 * no such socket is listed (or /proc cannot be read). */
long io_udp_port_holder(const uint8_t addr[16], uint16_t port);

/* Leaves the steering group (see "leave" above), closes every socket (including the source-port
 * sockets still referenced), removes the registry file when it was the last member, and frees
 * io. NULL is allowed. May block briefly on the registry lock. */
void io_udp_close(struct io_udp *io);

/* The steering slot of this socket, 1..255, fixed for the life of io. */
uint8_t io_udp_slot(const struct io_udp *io);

/* The UDP port io receives on (cfg.port or 4791). */
uint16_t io_udp_port(const struct io_udp *io);

/* An fd that is readable (EPOLLIN) when packets (or steering probes) wait: call io_udp_recv.
 * Owned by io: do not read, close or change it. */
int io_udp_fd(const struct io_udp *io);

/* Receives up to n (at most IO_UDP_BATCH) packets without blocking, with one recvmmsg.
 * pkts[i].buf / .cap must point to caller buffers (cap > 0; a RoCE packet needs up to
 * PMTU + 80 + 4 bytes). On return pkts[0..ret) hold the received packets in arrival order with
 * every field filled. Dropped datagrams (truncated, runts, misdelivered, probes) are not returned;
 * to skip them without copying, the ENTRIES of pkts[] may be permuted: a returned entry carries
 * one of the buf/cap pairs the caller passed in, not necessarily its original one (with GRO,
 * below, the datagrams are copied into the entries in order instead). All buffers stay the
 * caller's.
 * Returns the number of packets (0 when none wait, or when all that waited were dropped) or
 * -EINVAL (bad arguments), or another negative errno from recvmmsg (counted in rx_errors). */
int io_udp_recv(struct io_udp *io, struct io_pkt *pkts, int n);

/* ---- GRO ----
 * With GSO (SOFTRDMA_GSO not 0) the main socket also takes UDP_GRO (Linux 5.0): the kernel may
 * hand over several datagrams of one flow as one (on loopback a sender's GSO super-packet
 * arrives whole instead of being cut at the socket; a device's GRO coalesces on the way in).
 * io_udp_recv cuts it back into its datagrams, which it checks and copies into the caller's
 * buffers one by one, in order: the caller sees the datagrams the peer sent. Those that did not
 * fit into n wait in io for the next io_udp_recv (before anything new is received): while
 * io_udp_pending is true a caller that would sleep on io_udp_fd must call io_udp_recv first. */
bool io_udp_pending(const struct io_udp *io);

/* io_udp_recv without the copy where GRO allows it: the datagrams of a coalesced receive stay
 * where the kernel put them, in io's own memory, and pkts[i].buf points at each (pkts[i].cap =
 * pkts[i].len), read-only and valid until the next io_udp_recv or io_udp_recv_view on io.
 * The entries need no buffers and their buf / cap are overwritten. A datagram longer than
 * max_len is dropped (rx_truncated), as io_udp_recv drops one longer than every buffer. Without
 * GRO (io_udp_gro false) it is io_udp_recv, and the entries must carry buffers as for it (their
 * capacities, not max_len, then limit the length). Same returns. */
int io_udp_recv_view(struct io_udp *io, struct io_pkt *pkts, int n, size_t max_len);

/* Whether the main socket takes UDP_GRO (fixed at io_udp_open). */
bool io_udp_gro(const struct io_udp *io);

/* Sends pkts[0..n) (any n >= 0; batches of IO_UDP_BATCH), each to dst:dport, the trains among
 * them (pkts[i].train > 1, see "GSO trains") as GSO super-packets, from the socket
 * bound to pkts[i].sport (sendmmsg per run of packets with one source port), with IP TOS /
 * traffic class = tos and TTL / hop limit = ttl. pkts[i].sport must be io_udp_port(io) or a port
 * taken with io_udp_sport_get; otherwise the packet leaves from the main socket (so with source
 * port io_udp_port(io)) and is counted in tx_sport_unbound. Never blocks: packets the kernel
 * refuses (EAGAIN, ENOBUFS, EMSGSIZE, unreachable, ...) are dropped and counted by reason; RC
 * retransmits. The caller keeps its buffers and may reuse them as soon as this returns.
 * Returns the number of packets handed to the kernel (n minus the drops), or -EINVAL when
 * arguments are bad (nothing sent). */
int io_udp_send(struct io_udp *io, const struct io_pkt *pkts, int n);

/* ---- GSO trains ----
 * Packets that go to one destination back to back (a reply and the ACK after it, the packets
 * of a large WRITE) can leave as one UDP GSO super-packet (UDP_SEGMENT, Linux 4.18): one trip
 * through the sending kernel's IP stack, which cuts the super-packet back into datagrams at
 * the device or, on loopback, at the receiving socket. The datagrams are the packets as they
 * would have left alone, with one difference: the kernel numbers the segments' IPv4
 * Identification 0, 1, 2, ... (from the super-packet's ID, 0 on our sockets; observed on 6.18
 * through a veth without UDP segmentation offload), and the RoCEv2 ICRC covers that field
 * (spec 6.3). IPv6 has no such field: there the datagrams are byte for byte the same.
 * A train is pkts[i .. i + k) with pkts[i].train = k (2 .. IO_UDP_TRAIN_MAX) and train 0 in
 * the others, which the caller formed so that:
 *   - all share sport, dst, dport, tos and ttl;
 *   - all but the last have the first's length, the last is no longer (the kernel cuts every
 *     gso_size bytes), and the lengths add up to at most IO_UDP_TRAIN_BYTES;
 *   - for IPv4, packet j of the train (j = 0 .. k - 1) has its ICRC computed for
 *     Identification j.
 * A train that breaks the first two rules leaves packet by packet (the caller's bug; for IPv4
 * the ICRC of all but the first then fits no Identification the kernel gives).
 * Form trains only while io_udp_gso(io) is true. When the kernel refuses a super-packet
 * (EIO: no checksum offload on the route, e.g. IPsec; EINVAL; ENOPROTOOPT; EOPNOTSUPP),
 * GSO is switched off for io: the train's first packet is sent alone and the others are
 * dropped (tx_drop_gso; their ICRC only fits the IDs of a train), and RC retransmits them.
 * Captures on loopback (tcpdump -i lo) see the super-packet, not the datagrams: set
 * SOFTRDMA_GSO=0 when capturing there. Linux 6.1's rxe takes the segments (scripts/interop.sh
 * with trains on: every RoCEv2 case, both roles, no retransmission). */

/* Whether io_udp_send accepts trains: SOFTRDMA_GSO was not 0 in the environment at io_udp_open
 * (on by default; SOFTRDMA_GSO=0 sends every packet alone, e.g. to capture on loopback), the
 * kernel took the UDP_SEGMENT option, and no super-packet has been refused since. Any
 * thread. */
bool io_udp_gso(const struct io_udp *io);

/* Takes a reference on a sending socket bound to local:sport (rxe uses 0xC000 | hash per QP, spec
 * section 1.3). Call at QP setup, never on the data path: the first reference creates and binds
 * an unconnected socket with SO_REUSEADDR + SO_REUSEPORT (several processes may use one port)
 * and IP_PMTUDISC_DO; it never receives RoCE traffic. sport == io_udp_port(io) is the main socket
 * and needs no reference (returns 0).
 * Returns 0 when packets with this sport will leave from it; 1 when the port is held by someone
 * else (bind refused): packets with this sport will leave from the main socket, WITH SOURCE PORT
 * io_udp_port(io), so the caller must use that port for the QP (the ICRC covers the UDP source
 * port); counted in sport_fallback. The reference must be put either way.
 * Errors: -EINVAL (sport 0), -ENOMEM, -EMFILE, other socket errors (no reference taken). */
int io_udp_sport_get(struct io_udp *io, uint16_t sport);

/* Drops a reference taken by io_udp_sport_get; the last one closes the socket. Unknown ports are
 * ignored. */
void io_udp_sport_put(struct io_udp *io, uint16_t sport);

/* Keeps steering correct: checks the other members' liveness (every
 * cfg.check_interval_ms, or at once after a misdelivery), removes dead members and starts a probe
 * round, answers probes whose processing recv deferred, resends the probes of an incomplete round
 * (after 2 ms, backing off to 200 ms), refreshes the local view of the registry. Never blocks (the
 * registry lock is only tried). Call it when io_udp_next_service_ns() has passed; calling it more
 * often (e.g. after every io_udp_recv) is cheap: a clock read when there is nothing to do. Returns
 * 0 when steering is complete, 1 while a round is in progress (io_udp_next_service_ns tells when to
 * call again), or a negative errno from the system (counted in steer_errors; steering keeps working
 * with the last attached program). */
int io_udp_service(struct io_udp *io);

/* The CLOCK_MONOTONIC time, in ns, by which io_udp_service wants to be called next (for the
 * progress loop's epoll timeout). */
uint64_t io_udp_next_service_ns(const struct io_udp *io);

/* A snapshot of the steering state, for stats and tests. */
struct io_udp_info {
	uint8_t slot;	 /* this member's slot */
	int index;	 /* this member's reuseport index in the current epoch, -1 if unknown */
	int members;	 /* live members in the registry (including this one) */
	uint32_t epoch;	 /* registry epoch */
	bool complete;	 /* the program attached matches the current epoch */
	bool is_default; /* this member receives slot-0 and unowned-slot traffic */
};

/* Fills *info (reads the shared registry without its lock: a consistent-enough snapshot).
 * rx side (io.h "Threads"). */
void io_udp_info(const struct io_udp *io, struct io_udp_info *info);

/* Copies the counters (indexed by enum io_udp_counter) into out[IO_UDP_NCOUNTERS]. Any thread; each
 * value is read atomically, the set is not a snapshot. */
void io_udp_counters(const struct io_udp *io, uint64_t out[IO_UDP_NCOUNTERS]);

/* The name of counter c ("rx_truncated", ...), or NULL when c is out of range. */
const char *io_udp_counter_name(enum io_udp_counter c);

/* Its one-line description, or NULL when c is out of range. */
const char *io_udp_counter_desc(enum io_udp_counter c);

#endif
