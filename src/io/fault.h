/* Fault injection between the progress loop and io_udp_send: loss, duplication, reordering,
 * corruption and delay with jitter, for testing the reliability machinery on real sockets
 * (DESIGN.md: "io/ ... fault injection"). The progress loop reads the configuration from the
 * environment variable SOFTRDMA_FAULT (IO_FAULT_ENV) with io_fault_parse.
 *
 * Semantics, per packet offered to io_fault_send, in this order (one random draw each, only for
 * faults whose probability is non-zero, so a configuration and a seed give one fixed sequence):
 *   loss     the packet is dropped;
 *   corrupt  the packet that goes out is a copy with one random bit flipped (the caller's buffer
 *            is never modified);
 *   dup      a second, identical copy goes out right after it;
 *   reorder  the packet is held back and goes out right after the next packet that goes out
 *            (that is, it swaps places with its successor; if none comes, it leaves by itself at
 *            its deadline: now + delay + jitter + 1 ms);
 *   ce       an ECN-capable packet (ECT(0) or ECT(1) in its TOS) leaves marked Congestion
 *            Experienced, as a congested switch's queue would mark it (RFC 3168); other
 *            packets are left as they are (the draw is made all the same);
 *   delay    when delay_us or jitter_us is non-zero, every packet is held for
 *            delay_us + uniform[0, jitter_us] microseconds. Jitter larger than the gap between
 *            packets reorders them too, as with netem.
 * Held packets are copied into a pool preallocated by io_fault_create; when the pool is full (or a
 * packet is larger than max_pkt_size) a packet that needs holding or copying is dropped and
 * counted (drop_pool_full, drop_too_big). With an all-zero configuration every packet goes
 * straight through, unchanged, in order, without a copy.
 * Deterministic: the same seed and the same sequence of calls (packets and now_ns values) give
 * the same output.
 *
 * Threads: none; one io_fault is used by one thread at a time (the tx side of its io_udp).
 * Allocation: only in io_fault_create.
 *
 * TCP (iWARP). TCP cannot lose, duplicate or reorder bytes, so the UDP faults above do not apply
 * to it; io/tcp.c reads the same variable once per process (at its first connection) and applies
 * these keys to every connection (connected, accepted or adopted), which the UDP side ignores
 * (just as io/tcp.c ignores the UDP keys):
 *   tcp_reset=N     a connection is reset right after the send call that brings the bytes it
 *                   has handed to the kernel to exactly N (the MPA handshake included; a send
 *                   that would cross N is cut at N). Exact, not random: the seed plays no part,
 *                   and every connection of the process gets the same N. The reset is abortive
 *                   (an RST; whatever is still in our socket buffer is discarded, so the peer
 *                   receives at most N bytes, then sees ECONNRESET); from then on every send and
 *                   recv on our side returns -ECONNRESET.
 *   tcp_chunk=N     each send call hands at most N bytes to the kernel (a partial write when
 *                   more is offered): odd segmentation and the sender's resumption.
 *   tcp_rx_chunk=N  each recv call returns at most N bytes: the receiver's state machine sees
 *                   every split.
 * N is a byte count, at least 1, with an optional suffix K or KiB (1024) or M or MiB
 * (1048576): "tcp_reset=8M,tcp_chunk=7,tcp_rx_chunk=3". Each injected fault is counted by
 * io/tcp.h's fault_* counters. */
#ifndef SOFTRDMA_IO_FAULT_H
#define SOFTRDMA_IO_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include "io/io.h"

#define IO_FAULT_ENV "SOFTRDMA_FAULT"

struct io_fault_cfg {
	double loss, dup, reorder, corrupt; /* probabilities, 0..1 */
	double ce; /* probability, 0..1: an ECN-capable packet leaves marked CE (see above) */
	uint32_t delay_us, jitter_us; /* microseconds */
	uint64_t seed;		      /* PRNG seed */
	/* TCP only (see above); 0 = off */
	uint64_t tcp_reset;		  /* reset after this many bytes sent per connection */
	uint32_t tcp_chunk, tcp_rx_chunk; /* at most this many bytes per send / recv call */
};

#define IO_FAULT_COUNTERS(X)                                                                       \
	X(in, "packets offered to io_fault_send")                                                  \
	X(out, "packets passed on to the sink or io_udp_send")                                     \
	X(lost, "packets dropped by the loss fault")                                               \
	X(duplicated, "extra copies sent by the dup fault")                                        \
	X(corrupted, "packets sent with one bit flipped")                                          \
	X(ce_marked, "ECN-capable packets sent marked Congestion Experienced")                     \
	X(reordered, "packets held back behind their successor")                                   \
	X(delayed, "packets held for delay / jitter")                                              \
	X(drop_pool_full, "dropped: the hold pool was full")                                       \
	X(drop_too_big, "dropped: longer than max_pkt_size and needed a copy")                     \
	X(sink_drops, "packets the sink did not send (its return value was short or an error)")

/* The list expands to "a, b, c," (clang-format cannot see that). */
/* clang-format off */
enum io_fault_counter {
#define IO_FAULT_X_ENUM(name, desc) IO_FAULT_C_##name,
	IO_FAULT_COUNTERS(IO_FAULT_X_ENUM)
#undef IO_FAULT_X_ENUM
	IO_FAULT_NCOUNTERS
};
/* clang-format on */

/* Parses a specification such as
 *   "loss=1%,dup=0.1%,reorder=1%,corrupt=0.01%,delay=100us,jitter=20us,seed=7"
 * into *cfg (which is zeroed first; absent keys stay 0). Probabilities are a percentage ("1%")
 * or a fraction ("0.01"), in 0..100% / 0..1. Times take a unit ns, us, ms or s ("1.5ms"); a bare
 * number is microseconds; they are rounded to whole microseconds and must fit in 32 bits. seed
 * is an unsigned integer (decimal, or 0x hex). Sizes (tcp_reset, tcp_chunk, tcp_rx_chunk) are
 * whole decimal byte counts >= 1 with an optional suffix K, KiB, M or MiB (powers of 1024);
 * tcp_reset must fit in 64 bits, the chunks in 32. Spaces around items are allowed; an empty or
 * NULL spec is valid (no faults). Each key may appear once.
 * Returns 0, or -EINVAL with a one-line explanation in err (if err != NULL, errlen > 0;
 * always NUL-terminated, truncated to errlen). *cfg is unspecified after an error. */
int io_fault_parse(const char *spec, struct io_fault_cfg *cfg, char *err, size_t errlen);

/* Formats cfg back as a specification (for logs): every UDP key, then the TCP keys that are
 * non-zero, in bytes. io_fault_parse reads it back. Returns what snprintf returns. */
int io_fault_format(const struct io_fault_cfg *cfg, char *buf, size_t len);

/* Where packets go out. Must not keep pointers to pkts or their buffers after it returns.
 * Returns the number of packets sent (any shortfall is counted as sink_drops) or a negative errno
 * (all n counted as sink_drops). */
typedef int (*io_fault_sink_fn)(void *ctx, const struct io_pkt *pkts, int n);

struct io_fault;

/* Creates a fault stage that can hold pool_packets packets of at most max_pkt_size bytes each
 * (both > 0). Returns 0 and *out (the caller's until io_fault_destroy), -EINVAL (bad cfg:
 * a probability outside 0..1 or NaN, zero sizes) or -ENOMEM. */
int io_fault_create(const struct io_fault_cfg *cfg, uint32_t pool_packets, size_t max_pkt_size,
		    struct io_fault **out);

/* Frees f; held packets are discarded. NULL is allowed. */
void io_fault_destroy(struct io_fault *f);

/* Sends through `fn(ctx, ...)` instead of io_udp_send (unit tests, other backends). fn NULL
 * restores io_udp_send. */
void io_fault_set_sink(struct io_fault *f, io_fault_sink_fn fn, void *ctx);

/* Applies the faults to pkts[0..n) at time now_ns (any monotonic clock in ns, the same one on
 * every call), and sends what is due, held packets first (those due at or before now_ns), to the
 * sink, or to io_udp_send(io) when no sink is set (io may be NULL when a sink is set). Buffers
 * stay the caller's: whatever is held is copied, from buf alone (a packet with an ext part,
 * io.h, is refused: nothing is sent).
 * Returns n (every packet is consumed: sent, held or dropped and counted), or -EINVAL. */
int io_fault_send(struct io_fault *f, struct io_udp *io, const struct io_pkt *pkts, int n,
		  uint64_t now_ns);

/* Sends every held packet due at or before now_ns, in due order. Returns the number released. */
int io_fault_flush(struct io_fault *f, struct io_udp *io, uint64_t now_ns);

/* The earliest due time of a held packet (ns, the caller's clock), or UINT64_MAX when none is
 * held: call io_fault_flush then. */
uint64_t io_fault_deadline(const struct io_fault *f);

/* Number of packets currently held. */
uint32_t io_fault_held(const struct io_fault *f);

/* Copies the counters (indexed by enum io_fault_counter) into out[IO_FAULT_NCOUNTERS]. */
void io_fault_counters(const struct io_fault *f, uint64_t out[IO_FAULT_NCOUNTERS]);

/* The name of counter c ("lost", ...), or NULL when out of range. */
const char *io_fault_counter_name(enum io_fault_counter c);

#endif
