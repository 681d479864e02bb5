/* softrdma compare's internals shared by compare.c and compare_remote.c: what the server side of
 * one measurement runs (struct srv_spec, the same for a local child and for a remote `softrdma
 * compare --server`), the argument vectors, the control protocol of the two-host mode and the
 * lookup of a host's devices.
 *
 * The control protocol (TCP, the port of `compare --server`, default 18600, on the one address
 * it was told to listen on, loopback by default): lines of text, at most CMP_LINE_MAX bytes with
 * the newline, client first.
 *   HELLO 2 <token>               -> OK 2 <roce device> <iwarp device>   (the server's devices on
 *                                    the interface the connection came in on), or ERR <why> and
 *                                    the end of the session when the token is not the server's
 *   START <srv_spec as text>      -> STARTED | ERR <why>    (the server side of one measurement,
 *                                    on a port in PORT+1 .. PORT+499, listening on the address
 *                                    the client reached the server on)
 *   WAIT <seconds>                -> EXIT <status> <why>    (status: the exit status, -1 if it
 *                                    did not end within the seconds: then it is killed)
 *   BYE                           -> (the server closes; a child still running is killed)
 * Anything else, a client that does not say HELLO within 10 s, or one silent for --idle
 * seconds while nothing it started runs, ends the session. The server runs only its own
 * executable, with arguments it builds itself from a validated srv_spec. */
#ifndef SOFTRDMA_TOOLS_COMPARE_H
#define SOFTRDMA_TOOLS_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <sys/socket.h>

#define CMP_LINE_MAX 256

enum srv_kind { SRV_LAT, SRV_BW, SRV_FLOOR, SRV_SETUP };

/* The server side of one measurement. */
struct srv_spec {
	enum srv_kind kind;
	char mode[16]; /* SRV_FLOOR: udp-lat, tcp-lat, udp-bw or tcp-bw */
	int iwarp;     /* SRV_LAT / SRV_BW: the iWARP device (else RoCE); SRV_SETUP: over iWARP */
	bool tcp;      /* SRV_SETUP: the TCP floor instead of rdma_cm */
	int port;      /* TCP port of the measurement, 1024..65535 */
	int n;	       /* SRV_SETUP: connections, 1..100000 */
	int timeout_s; /* the tools' --timeout, 1..600 */
};

/* An argument vector built in place (no allocation): v[] points into buf[]. */
struct argv_b {
	char *v[40];
	char buf[40][64];
	int n;
};

void av_add(struct argv_b *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The server's argv for sp (argv[0] "softrdma"), with this host's devices; *transport is the
 * SOFTRDMA_TRANSPORT it needs, or NULL. 0, or -EINVAL for a spec that does not validate. */
int srv_argv(const struct srv_spec *sp, const char *roce_dev, const char *iwarp_dev,
	     struct argv_b *out, const char **transport);

/* sp as one line of text without the newline (START's argument). */
void srv_spec_format(const struct srv_spec *sp, char *out, size_t len);

/* Parses and validates what srv_spec_format wrote (from an untrusted peer). 0 or -EINVAL. */
int srv_spec_parse(const char *text, struct srv_spec *sp);

/* Whether the verbs device list has a device of that name. */
bool device_exists(const char *name);

/* a's address as numeric text, an IPv4-mapped IPv6 address as IPv4 ("?" if it has none). */
void addr_text(const struct sockaddr *a, char *out, size_t len);

/* The softrdma devices of the interface that holds the address a (IPv4 or IPv6): roce_<if>,
 * iwarp_<if>. 0, or a negative errno with why filled. */
int local_devices(const struct sockaddr *a, char *roce, char *iwarp, size_t len, char *why,
		  size_t whylen);

/* Line I/O on a blocking TCP socket with a deadline: reads one line (without the newline) of at
 * most len - 1 bytes. 0, -ETIMEDOUT, -ECONNRESET (the peer closed), -EPROTO (too long), or
 * -EINTR when *stop became non-zero. */
int line_read(int fd, char *out, size_t len, double timeout_s, volatile sig_atomic_t *stop);
int line_write(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Connects a TCP socket to host:port within timeout_s (retrying while refused). The fd, or a
 * negative errno with err filled. */
int tcp_dial(const char *host, int port, double timeout_s, volatile sig_atomic_t *stop, char *err,
	     size_t errlen);

#endif
