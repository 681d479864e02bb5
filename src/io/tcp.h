/* The TCP socket backend for iWARP (../shared/spec/iwarp.md section 1): non-blocking TCP sockets
 * over IPv4 and IPv6 that move the bytes of an MPA/FPDU stream between the kernel and memory the
 * caller chooses, so the iWARP engine can place payload straight into registered memory.
 *
 * Only core/ (the progress loop) calls this API (DESIGN.md "Layers"). The MPA handshake that runs
 * over these sockets is src/engine/iw_conn.h; this file knows nothing about MPA.
 *
 * Addresses are 16 bytes in network order, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), like
 * io.h. An IPv4-mapped address gives an AF_INET socket, anything else an AF_INET6 socket with
 * IPV6_V6ONLY (so "::" listens on IPv6 only; listen on ::ffff:0.0.0.0 for IPv4 "any").
 *
 * Socket options, as siw sets them (siw_cm.c) unless struct io_tcp_opts says otherwise:
 * TCP_NODELAY on (FPDUs are latency-bound and already MSS-sized), SO_KEEPALIVE off (RDMA has
 * its own liveness: the ULP's timeouts; siw does not enable keepalive either), SO_REUSEADDR on
 * listening sockets and on bound active sockets (a restarted server can rebind at once).
 * Buffer sizes are set before listen/connect so that TCP window scaling sees them; accepted
 * sockets inherit the listener's.
 *
 * Threads. Nothing here takes a lock. The calls on one connection fall into two sides:
 *   rx side: io_tcp_recv, io_tcp_recvv;
 *   tx side: io_tcp_send, io_tcp_sendv, io_tcp_shutdown, io_tcp_connect_done.
 * At most one thread at a time may be on each side of one connection (the caller serialises);
 * one rx-side and one tx-side call may run concurrently. io_tcp_fd, io_tcp_mss, io_tcp_bufsizes,
 * io_tcp_local, io_tcp_peer and the counter calls may be called from any thread between create
 * and close. Create (connect, accept) and close/abort are exclusive with everything on that
 * connection. A listener is used by one thread at a time.
 *
 * Errors: 0 or a count on success, a negative errno otherwise. Transfer calls never block and
 * never raise SIGPIPE. Every call and failure is counted (io_tcp_counters).
 *
 * Allocation: io_tcp_listen, io_tcp_accept and io_tcp_connect allocate their object (connection
 * setup, never the data path); recv, send and the queries never allocate. */
#ifndef SOFTRDMA_IO_TCP_H
#define SOFTRDMA_IO_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#define IO_TCP_DEFAULT_BACKLOG 128

/* Counters, one list (STYLE habit 10). X(name, description). A listener counts the accept_*
 * rows; a connection counts the others. */
#define IO_TCP_COUNTERS(X)                                                                         \
	X(accepts, "connections accepted")                                                         \
	X(accept_eagain, "io_tcp_accept calls that found no pending connection")                   \
	X(accept_errors, "accept failures other than EAGAIN (aborted, EMFILE, ...)")               \
	X(connects, "active connections started")                                                  \
	X(connect_refused, "active connections refused (ECONNREFUSED)")                            \
	X(connect_errors, "active connections failed otherwise (unreachable, timeout, ...)")       \
	X(rx_calls, "recv calls")                                                                  \
	X(rx_bytes, "bytes received")                                                              \
	X(rx_eagain, "recv calls that found nothing to read")                                      \
	X(rx_eof, "orderly close by the peer seen (FIN)")                                          \
	X(rx_resets, "connection reset seen by recv (RST)")                                        \
	X(rx_errors, "recv failures other than EAGAIN and reset")                                  \
	X(tx_calls, "send calls")                                                                  \
	X(tx_bytes, "bytes handed to the kernel")                                                  \
	X(tx_partial, "send calls that took only part of the bytes offered")                       \
	X(tx_eagain, "send calls that took nothing: socket buffer full")                           \
	X(tx_resets, "send failed with ECONNRESET or EPIPE")                                       \
	X(tx_errors, "send failures other than EAGAIN and reset")                                  \
	X(fault_resets, "connections reset by the tcp_reset fault (SOFTRDMA_FAULT)")               \
	X(fault_tx_chunks, "send calls held to tcp_chunk bytes (SOFTRDMA_FAULT)")                  \
	X(fault_rx_chunks, "recv calls held to tcp_rx_chunk bytes (SOFTRDMA_FAULT)")

/* The list expands to "a, b, c," (clang-format cannot see that). */
/* clang-format off */
enum io_tcp_counter {
#define IO_TCP_X_ENUM(name, desc) IO_TCP_C_##name,
	IO_TCP_COUNTERS(IO_TCP_X_ENUM)
#undef IO_TCP_X_ENUM
	IO_TCP_NCOUNTERS
};
/* clang-format on */

/* Options for io_tcp_listen / io_tcp_connect. NULL or a zeroed struct gives the defaults. */
struct io_tcp_opts {
	/* SO_RCVBUF / SO_SNDBUF in bytes; 0 keeps the kernel's (auto-tuned) default. The kernel
	 * doubles the value and clamps it to net.core.[rw]mem_max; io_tcp_bufsizes tells the
	 * result. Small values are for tests (partial writes). */
	int rcvbuf, sndbuf;
	/* true: leave Nagle's algorithm on (TCP_NODELAY off). Default false, as siw. */
	bool nagle;
	/* Listeners: SO_REUSEPORT as well, so that every process of one user can listen on one
	 * port (the kernel spreads connections over them; softrdma's auto-connect rendezvous). */
	bool reuseport;
	/* Marking, when either is nonzero: IP_TOS / IPV6_TCLASS (the DSCP << 2; TCP sets the ECN
	 * bits itself) and then SO_PRIORITY (the skb priority, which a VLAN interface's egress map
	 * turns into the 802.1Q PCP), on the socket before it connects or listens (its SYN or
	 * SYN-ACK is marked too) and on every connection accepted. */
	uint8_t tos;
	uint8_t priority;
};

struct io_tcp_listener;
struct io_tcp_conn;

/* Opens a listening socket on addr:port (port 0: an ephemeral port, see io_tcp_listener_port)
 * with SO_REUSEADDR, non-blocking, close-on-exec, the options of opts (NULL: defaults) for
 * every accepted connection. backlog <= 0 means IO_TCP_DEFAULT_BACKLOG.
 * Returns 0 and *out (owned by the caller until io_tcp_listener_close), or -EINVAL (NULL
 * arguments), -EADDRINUSE (port taken), -EADDRNOTAVAIL (address not local), -EAFNOSUPPORT
 * (IPv6 disabled), -EACCES (privileged port), -ENOMEM / -EMFILE. Nothing is left on failure. */
int io_tcp_listen(const uint8_t addr[16], uint16_t port, int backlog,
		  const struct io_tcp_opts *opts, struct io_tcp_listener **out);

/* Sets o's marks (tos, priority; io_tcp_opts) on an open connection: its later segments carry
 * them. 0 or -errno. */
int io_tcp_mark(struct io_tcp_conn *c, const struct io_tcp_opts *o);

/* Closes the listening socket and frees l. Connections already accepted are not affected;
 * those still in the kernel's queue are reset. NULL is allowed. */
void io_tcp_listener_close(struct io_tcp_listener *l);

/* The bound port (the ephemeral one when 0 was asked for). */
uint16_t io_tcp_listener_port(const struct io_tcp_listener *l);

/* An fd that is readable (EPOLLIN) when a connection waits: call io_tcp_accept. Owned by l: do
 * not read, close or change it. */
int io_tcp_listener_fd(const struct io_tcp_listener *l);

/* Accepts one pending connection without blocking, with the listener's options applied.
 * Returns 0 with *out (owned by the caller until io_tcp_close/io_tcp_abort) and, when not NULL,
 * the peer's address and port; -EAGAIN when none is pending; -EINVAL for NULL l/out; or the
 * error of accept4: -ECONNABORTED (the peer gave up while queued: just call again), -EMFILE,
 * -ENFILE, -ENOBUFS, -ENOMEM (resources: the connection stays queued). */
int io_tcp_accept(struct io_tcp_listener *l, struct io_tcp_conn **out, uint8_t peer_addr[16],
		  uint16_t *peer_port);

/* Starts a non-blocking connection to peer_addr:peer_port. local_addr NULL (or all zero)
 * means any local address; with local_addr or local_port given, the socket is first bound to
 * them with SO_REUSEADDR (as siw binds to the rdma_cm address and port). Both addresses must be
 * of one family (-EINVAL otherwise).
 * Returns 0 with *out (owned by the caller until io_tcp_close/io_tcp_abort) while the
 * connection is in progress or already established: wait for the fd to become writable
 * (EPOLLOUT), then io_tcp_connect_done tells the outcome. An error the kernel reports at once
 * is returned directly and nothing is created: -ECONNREFUSED, -ENETUNREACH, -EADDRINUSE
 * (local port taken), -EADDRNOTAVAIL, -EAFNOSUPPORT, -ENOMEM / -EMFILE, -EINVAL (arguments). */
int io_tcp_connect(const uint8_t local_addr[16], uint16_t local_port, const uint8_t peer_addr[16],
		   uint16_t peer_port, const struct io_tcp_opts *opts, struct io_tcp_conn **out);

/* Takes over fd, a connected TCP socket (e.g. received from another process with
 * SCM_RIGHTS): checks that it is one (SO_TYPE stream, AF_INET / AF_INET6, a peer), makes it
 * non-blocking and close-on-exec and applies opts (NULL: defaults). Returns 0 with *out
 * (which owns fd from then on), or -ENOTSOCK / -EPROTOTYPE / -ENOTCONN / -ENOMEM, with fd
 * left to the caller. */
int io_tcp_adopt(int fd, const struct io_tcp_opts *opts, struct io_tcp_conn **out);

/* The outcome of io_tcp_connect: 0 once connected (also for accepted connections),
 * -EINPROGRESS while the handshake runs, or the failure: -ECONNREFUSED (nobody listens: the
 * peer answered RST), -ETIMEDOUT, -EHOSTUNREACH, -ENETUNREACH, ... The failure is sticky: every
 * later call returns it again (the kernel's SO_ERROR is read once and remembered). */
int io_tcp_connect_done(struct io_tcp_conn *c);

/* The socket, for epoll: EPOLLIN = bytes (or EOF/reset) to read, EPOLLOUT = room to send (and
 * the end of a connect). Owned by c: do not read, write, close or change its options. */
int io_tcp_fd(const struct io_tcp_conn *c);

/* Reads up to len (> 0) bytes into dst, which stays the caller's (e.g. registered memory),
 * without blocking. Returns the count read (> 0; 0 is never returned), or:
 *   -EAGAIN      nothing to read now (wait for EPOLLIN);
 *   -ESHUTDOWN   orderly close: the peer sent FIN and every byte before it has been read
 *                (sticky: later calls return it again; sending may still work);
 *   -ECONNRESET  the peer reset the connection (RST; e.g. SO_LINGER 0 close or crash); bytes
 *                not yet read are lost;
 *   -ETIMEDOUT, -EHOSTUNREACH, ...  other connection failures reported by the kernel;
 *   -EINVAL      NULL c/dst or len 0. */
ssize_t io_tcp_recv(struct io_tcp_conn *c, void *dst, size_t len);

#define IO_TCP_GATHER_MAX 512

/* Scatter form of io_tcp_recv: fills iov[0..n) in order (n <= IOV_MAX), same returns. */
ssize_t io_tcp_recvv(struct io_tcp_conn *c, const struct iovec *iov, int n);

/* Sends iov[0..n) (n <= IOV_MAX) with one system call (MSG_NOSIGNAL | MSG_DONTWAIT): up to
 * IO_TCP_GATHER_MAX bytes are gathered into one buffer for send, more go by sendmsg. The bytes
 * are copied into the kernel: the caller keeps its buffers and may reuse them on return.
 * Returns the number of bytes taken, from the start of iov: a partial write (fewer than
 * offered) is normal when the socket buffer fills; offer the rest later (EPOLLOUT). Or:
 *   -EAGAIN      nothing taken, the socket buffer is full;
 *   -ECONNRESET  the peer reset the connection;
 *   -EPIPE       the connection can no longer send: we shut it down (io_tcp_shutdown), or a
 *                reset or failure was already reported;
 *   -ENOTCONN    the connect has not completed;
 *   -EINVAL      NULL c, NULL iov with n > 0, n < 0 or n > IOV_MAX.
 * Zero bytes offered returns 0. */
ssize_t io_tcp_sendv(struct io_tcp_conn *c, const struct iovec *iov, int n);

/* io_tcp_sendv of one buffer. */
ssize_t io_tcp_send(struct io_tcp_conn *c, const void *buf, size_t len);

/* Graceful close of the sending side (shutdown SHUT_WR): the peer reads every byte already
 * sent, then sees an orderly close. Use it after the last bytes (e.g. an MPA Reject or a
 * Terminate), before io_tcp_close, so that the bytes are not lost to a reset. Receiving still
 * works. Returns 0 or -ENOTCONN / -EINVAL. */
int io_tcp_shutdown(struct io_tcp_conn *c);

/* Closes the socket (FIN after any unsent bytes; the kernel sends RST instead if unread bytes
 * are pending in our receive buffer) and frees c. NULL is allowed. */
void io_tcp_close(struct io_tcp_conn *c);

/* Closes with SO_LINGER 0: the peer gets a reset at once, unsent bytes are dropped. For fatal
 * errors and tests. Frees c. NULL is allowed. */
void io_tcp_abort(struct io_tcp_conn *c);

/* The connection's current MSS (TCP_MAXSEG) in bytes, for FPDU sizing with iw_mulpdu(); call it
 * once connected (it may change with the path). Returns > 0, or a negative errno. */
int io_tcp_mss(const struct io_tcp_conn *c);

/* The effective SO_RCVBUF / SO_SNDBUF in bytes (either pointer may be NULL). 0 or -errno. */
int io_tcp_bufsizes(const struct io_tcp_conn *c, int *rcvbuf, int *sndbuf);

/* Local / peer address and port of the connection. 0 or -errno (-ENOTCONN for the peer before
 * the connect completes). */
int io_tcp_local(const struct io_tcp_conn *c, uint8_t addr[16], uint16_t *port);
int io_tcp_peer(const struct io_tcp_conn *c, uint8_t addr[16], uint16_t *port);

/* Copies the counters (indexed by enum io_tcp_counter) into out[IO_TCP_NCOUNTERS]. Any thread;
 * each value is read atomically, the set is not a snapshot. */
void io_tcp_counters(const struct io_tcp_conn *c, uint64_t out[IO_TCP_NCOUNTERS]);
void io_tcp_listener_counters(const struct io_tcp_listener *l, uint64_t out[IO_TCP_NCOUNTERS]);

/* The faults injected so far (SOFTRDMA_FAULT's tcp_* keys, io/fault.h) summed over every
 * connection this process has had, closed ones included: out[IO_TCP_C_fault_*]; the other
 * entries are 0. Reads the configuration first if no connection has yet. Any thread. */
void io_tcp_fault_totals(uint64_t out[IO_TCP_NCOUNTERS]);

/* The name of counter c ("tx_partial", ...) / its one-line description, or NULL out of range. */
const char *io_tcp_counter_name(enum io_tcp_counter c);
const char *io_tcp_counter_desc(enum io_tcp_counter c);

/* Who holds TCP port `port` on addr (IPv4-mapped or IPv6), for a listen's -EADDRINUSE: the uid
 * of a socket on that address or the wildcard as /proc/net/tcp and tcp6 list it, or -ENOENT
 * (io_udp_port_holder's twin, holder.c). */
long io_tcp_port_holder(const uint8_t addr[16], uint16_t port);

#endif
