/* The MPA handshake over real TCP sockets on 127.0.0.1 (and ::1 when available): io_tcp for
 * both ends, iw_conn for both roles, driven by a small poll loop shaped like the progress loop
 * (flush handshake bytes, then QP bytes; feed received bytes to iw_conn until rx_done, the rest
 * to the QP stream; tick at the deadline; transport errors to iw_conn_llp_error).
 *
 * Checks: the handshake completes (siw default shape, and P2P with a Read RTR and CRC); the
 * first QP bytes after the handshake arrive intact, also when the responder writes its Reply
 * and its first FPDU with one sendmsg (the initiator must stop exactly at the Reply's end); an
 * application reject reaches the initiator with its private data before the close; a refused
 * connect, a silent peer (timed out after the configured timeout in real time), a reset and an
 * orderly close in the middle of the Request all end with a clean error. Every socket is
 * closed (fd count checked); every wait is bounded. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "engine/iw_conn.h"
#include "io/tcp.h"

#define MS	      1000000ull
#define LOOP_MAX_MS   5000 /* no scenario may take longer */
#define SHORT_TIMEOUT (300 * MS)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	REQUIRE(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void addr4(uint8_t *a, const char *s)
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xFF;
	REQUIRE(inet_pton(AF_INET, s, a + 12) == 1);
}

/* One end: a socket, its handshake, and what the QP would see. */
struct ep {
	const char *name;
	struct io_tcp_conn *tcp;
	struct iw_conn iw;
	bool connecting;
	/* responder's application */
	bool reject;
	const uint8_t *answer_pd;
	uint16_t answer_pd_len;
	/* the QP: bytes to send right after the handshake, bytes received after it */
	const uint8_t *qp_out;
	size_t qp_out_len, qp_sent;
	uint8_t qp_in[4096];
	size_t qp_in_len;
	int llp_err; /* transport error seen (negative) */
	bool shut;   /* ended: our last bytes flushed and SHUT_WR done */
};

static bool iw_ended(const struct iw_conn *c)
{
	enum iw_conn_state s = iw_conn_state(c);

	return s == IW_CONN_REJECTED || s == IW_CONN_FAILED;
}

/* One round of the progress loop for e. */
static void step(struct ep *e)
{
	uint64_t now = now_ns();
	uint8_t buf[2048];

	if (e->connecting) {
		int r = io_tcp_connect_done(e->tcp);

		if (r == -EINPROGRESS)
			return;
		e->connecting = false;
		if (r < 0) {
			e->llp_err = r;
			iw_conn_llp_error(&e->iw, r);
			return;
		}
	}
	if (e->llp_err)
		return;
	/* Send: the handshake bytes, and in the same sendmsg the QP's first bytes as soon as
	 * the handshake allows (so the peer gets e.g. Reply + FPDU in one segment). */
	for (;;) {
		const uint8_t *hs;
		size_t hn = iw_conn_tx_peek(&e->iw, &hs);
		bool qp_ok = iw_conn_state(&e->iw) == IW_CONN_ESTABLISHED;
		struct iovec iov[2];
		int n = 0;
		ssize_t r;

		if (hn)
			iov[n++] = (struct iovec){(void *)hs, hn};
		if (qp_ok && e->qp_sent < e->qp_out_len)
			iov[n++] = (struct iovec){(void *)(e->qp_out + e->qp_sent),
						  e->qp_out_len - e->qp_sent};
		if (!n)
			break;
		r = io_tcp_sendv(e->tcp, iov, n);
		if (r == -EAGAIN)
			break;
		if (r < 0) {
			e->llp_err = (int)r;
			iw_conn_llp_error(&e->iw, (int)r);
			return;
		}
		size_t take = (size_t)r < hn ? (size_t)r : hn;

		iw_conn_tx_advance(&e->iw, take);
		e->qp_sent += (size_t)r - take;
	}
	/* The handshake ended without a connection and our last bytes are out: shut down. */
	if (iw_ended(&e->iw) && !iw_conn_tx_peek(&e->iw, NULL) && !e->shut) {
		io_tcp_shutdown(e->tcp);
		e->shut = true;
	}
	/* Receive */
	for (;;) {
		ssize_t r = io_tcp_recv(e->tcp, buf, sizeof(buf));
		size_t used = 0;

		if (r == -EAGAIN)
			break;
		if (r < 0) {
			e->llp_err = (int)r;
			iw_conn_llp_error(&e->iw, (int)r);
			break;
		}
		if (!iw_conn_rx_done(&e->iw))
			iw_conn_input(&e->iw, buf, (size_t)r, now, &used);
		if (iw_conn_rx_done(&e->iw)) {
			REQUIRE(e->qp_in_len + (size_t)r - used <= sizeof(e->qp_in));
			memcpy(e->qp_in + e->qp_in_len, buf + used, (size_t)r - used);
			e->qp_in_len += (size_t)r - used;
		}
	}
	/* The responder's application */
	if (iw_conn_state(&e->iw) == IW_CONN_REQ_RCVD) {
		if (e->reject)
			CHECK_EQ(iw_conn_reject(&e->iw, e->answer_pd, e->answer_pd_len), 0);
		else
			CHECK_EQ(iw_conn_accept(&e->iw, 8, 8, e->answer_pd, e->answer_pd_len, now),
				 0);
	}
	iw_conn_tick(&e->iw, now_ns());
}

static bool settled(const struct ep *e)
{
	if (iw_ended(&e->iw))
		return e->shut || e->llp_err;
	return iw_conn_tx_ready(&e->iw) && e->qp_sent == e->qp_out_len;
}

/* Runs the loop on n ends until done(ctx) or LOOP_MAX_MS; polls with the earliest deadline. */
static void loop(struct ep **e, int n, bool (*done)(struct ep **, int))
{
	uint64_t stop = now_ns() + LOOP_MAX_MS * MS;

	while (!done(e, n)) {
		struct pollfd p[4];
		uint64_t now = now_ns(), dl = stop;
		int ms;

		REQUIRE(now < stop);
		for (int k = 0; k < n; k++) {
			uint64_t d = iw_conn_deadline(&e[k]->iw);

			if (d < dl)
				dl = d;
			p[k].fd = io_tcp_fd(e[k]->tcp);
			p[k].events =
			    (short)(POLLIN |
				    (e[k]->connecting || iw_conn_tx_peek(&e[k]->iw, NULL) ? POLLOUT
											  : 0));
		}
		ms = dl > now ? (int)((dl - now + MS - 1) / MS) : 0;
		if (ms > 50)
			ms = 50;
		poll(p, (nfds_t)n, ms);
		for (int k = 0; k < n; k++)
			step(e[k]);
	}
}

static bool both_settled(struct ep **e, int n)
{
	for (int k = 0; k < n; k++)
		if (!settled(e[k]))
			return false;
	/* and the QP bytes have arrived */
	return e[0]->qp_in_len >= e[1]->qp_out_len && e[1]->qp_in_len >= e[0]->qp_out_len;
}

static bool one_ended(struct ep **e, int n)
{
	(void)n;
	return iw_ended(&e[0]->iw);
}

/* Listener + initiator connect + accept; both ends get their iw_conn. */
static void setup(const uint8_t *addr, struct io_tcp_listener **l, struct ep *ini, struct ep *rsp,
		  const struct iw_conn_cfg *icfg, const struct iw_conn_cfg *rcfg)
{
	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, l) == 0);
	REQUIRE(io_tcp_connect(NULL, 0, addr, io_tcp_listener_port(*l), NULL, &ini->tcp) == 0);
	ini->connecting = true;
	REQUIRE(iw_conn_init(&ini->iw, icfg, now_ns()) == 0);
	for (int k = 0; k < 100; k++) {
		struct pollfd p = {.fd = io_tcp_listener_fd(*l), .events = POLLIN};

		poll(&p, 1, 50);
		if (io_tcp_accept(*l, &rsp->tcp, NULL, NULL) == 0)
			break;
	}
	REQUIRE(rsp->tcp);
	REQUIRE(iw_conn_init(&rsp->iw, rcfg, now_ns()) == 0);
}

static const uint8_t fpdu_i[] = "initiator's first FPDU (any bytes: the QP's business)";
static const uint8_t fpdu_r[] = "responder's first FPDU, written with its Reply";

static void test_handshake(const uint8_t *addr, const char *name, bool p2p_read_crc)
{
	static const uint8_t hello[] = "hello from the client";
	struct iw_conn_cfg icfg = {
	    .role = IW_CONN_INITIATOR, .ird = 8, .ord = 8, .pd = hello, .pd_len = sizeof(hello)};
	struct iw_conn_cfg rcfg = {.role = IW_CONN_RESPONDER};
	struct ep ini = {.name = "initiator", .qp_out = fpdu_i, .qp_out_len = sizeof(fpdu_i)};
	struct ep rsp = {.name = "responder", .qp_out = fpdu_r, .qp_out_len = sizeof(fpdu_r)};
	struct ep *e[2] = {&ini, &rsp};
	struct io_tcp_listener *l;
	struct iw_conn_info ii, ri;
	size_t skip = 0;

	if (p2p_read_crc) {
		icfg.p2p = true;
		icfg.rtr_types = IW_CONN_RTR_READ;
		icfg.crc = IW_CONN_CRC_REQUIRED;
	}
	setup(addr, &l, &ini, &rsp, &icfg, &rcfg);
	loop(e, 2, both_settled);
	CHECK_EQ(iw_conn_state(&ini.iw), IW_CONN_ESTABLISHED);
	CHECK_EQ(iw_conn_state(&rsp.iw), IW_CONN_ESTABLISHED);
	iw_conn_info(&ini.iw, &ii);
	iw_conn_info(&rsp.iw, &ri);
	CHECK_EQ(ii.rev, 2);
	CHECK_EQ(ii.crc, p2p_read_crc);
	CHECK_EQ(ri.crc, p2p_read_crc);
	CHECK_EQ(ii.rtr, p2p_read_crc ? IW_CONN_RTR_READ : IW_CONN_RTR_NONE);
	CHECK_EQ(ri.peer_pd_len, sizeof(hello));
	if (ri.peer_pd)
		CHECK_MEM(ri.peer_pd, hello, sizeof(hello));
	CHECK_EQ(ii.rx_consumed, 24); /* the Reply exactly, never the FPDU glued to it */
	if (p2p_read_crc) {
		/* the zero-length Read Response to the RTR is the first FPDU the QP gets */
		struct iw_fpdu f;

		CHECK_EQ(iw_fpdu_decode(ini.qp_in, ini.qp_in_len, true, 0, &f), 20);
		CHECK_EQ(f.hdr.opcode, IW_OP_READ_RESP);
		skip = 20;
	}
	CHECK_EQ(ini.qp_in_len, skip + sizeof(fpdu_r));
	CHECK_MEM(ini.qp_in + skip, fpdu_r, sizeof(fpdu_r));
	CHECK_EQ(rsp.qp_in_len, sizeof(fpdu_i));
	CHECK_MEM(rsp.qp_in, fpdu_i, sizeof(fpdu_i));
	fprintf(stderr, "%s%s: established, rev %u, crc %d, rtr %u, ird/ord %u/%u\n", name,
		p2p_read_crc ? " (P2P Read RTR, CRC)" : "", ii.rev, ii.crc, ii.rtr, ii.ird, ii.ord);
	io_tcp_close(ini.tcp);
	io_tcp_close(rsp.tcp);
	io_tcp_listener_close(l);
}

static void test_reject(const uint8_t *addr)
{
	static const uint8_t why[] = "no service here";
	struct iw_conn_cfg icfg = {.role = IW_CONN_INITIATOR};
	struct iw_conn_cfg rcfg = {.role = IW_CONN_RESPONDER};
	struct ep ini = {.name = "initiator"};
	struct ep rsp = {
	    .name = "responder", .reject = true, .answer_pd = why, .answer_pd_len = sizeof(why)};
	struct ep *e[2] = {&ini, &rsp};
	struct io_tcp_listener *l;
	struct iw_conn_info ii;

	setup(addr, &l, &ini, &rsp, &icfg, &rcfg);
	loop(e, 2, one_ended);
	/* the responder closes right after its Reject (shutdown, then close) */
	for (int k = 0; k < 20 && !rsp.shut; k++)
		step(&rsp);
	CHECK(rsp.shut);
	io_tcp_close(rsp.tcp);
	CHECK_EQ(iw_conn_state(&ini.iw), IW_CONN_REJECTED);
	CHECK_EQ(iw_conn_error(&ini.iw), -ECONNREFUSED);
	iw_conn_info(&ini.iw, &ii);
	CHECK_EQ(ii.peer_pd_len, sizeof(why));
	if (ii.peer_pd)
		CHECK_MEM(ii.peer_pd, why, sizeof(why));
	io_tcp_close(ini.tcp);
	io_tcp_listener_close(l);
}

static void test_refused(const uint8_t *addr)
{
	struct iw_conn_cfg icfg = {.role = IW_CONN_INITIATOR};
	struct io_tcp_listener *l;
	struct ep ini = {.name = "initiator"};
	struct ep *e[1] = {&ini};
	uint16_t port;
	int r;

	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, &l) == 0);
	port = io_tcp_listener_port(l);
	io_tcp_listener_close(l); /* nobody listens there now */
	REQUIRE(iw_conn_init(&ini.iw, &icfg, now_ns()) == 0);
	r = io_tcp_connect(NULL, 0, addr, port, NULL, &ini.tcp);
	if (r == 0) {
		ini.connecting = true;
		loop(e, 1, one_ended);
		io_tcp_close(ini.tcp);
	} else {
		iw_conn_llp_error(&ini.iw, r);
	}
	CHECK_EQ(iw_conn_state(&ini.iw), IW_CONN_FAILED);
	CHECK_EQ(iw_conn_error(&ini.iw), -ECONNREFUSED);
}

/* A raw peer: connects (or accepts) and then sends `bytes` and/or ends as told. */
static void test_bad_peer(const uint8_t *addr, int how)
{
	enum { SILENT_CLIENT, SILENT_SERVER, RESET_MID, CLOSE_MID };
	struct iw_conn_cfg icfg = {.role = IW_CONN_INITIATOR, .timeout_ns = SHORT_TIMEOUT};
	struct iw_conn_cfg rcfg = {.role = IW_CONN_RESPONDER, .timeout_ns = SHORT_TIMEOUT};
	static const char *const names[] = {"silent client", "silent server", "reset mid-Request",
					    "close mid-Request"};
	struct io_tcp_listener *l;
	struct ep me = {.name = "under test"};
	struct ep *e[1] = {&me};
	struct io_tcp_conn *raw = NULL;
	uint64_t t0;
	double ms;

	REQUIRE(io_tcp_listen(addr, 0, 0, NULL, &l) == 0);
	if (how == SILENT_SERVER) {
		/* the kernel completes the TCP handshake; nobody ever answers the Request */
		REQUIRE(io_tcp_connect(NULL, 0, addr, io_tcp_listener_port(l), NULL, &me.tcp) == 0);
		me.connecting = true;
		t0 = now_ns();
		REQUIRE(iw_conn_init(&me.iw, &icfg, t0) == 0);
	} else {
		REQUIRE(io_tcp_connect(NULL, 0, addr, io_tcp_listener_port(l), NULL, &raw) == 0);
		for (int k = 0; k < 100 && !me.tcp; k++) {
			struct pollfd p = {.fd = io_tcp_listener_fd(l), .events = POLLIN};

			poll(&p, 1, 50);
			io_tcp_accept(l, &me.tcp, NULL, NULL);
		}
		REQUIRE(me.tcp);
		t0 = now_ns();
		REQUIRE(iw_conn_init(&me.iw, &rcfg, t0) == 0);
		if (how == RESET_MID || how == CLOSE_MID) {
			/* half of a siw Request, then the end */
			static const uint8_t part[] = {'M', 'P', 'A', ' ', 'I',	 'D',
						       ' ', 'R', 'e', 'q', ' ',	 'F',
						       'r', 'a', 'm', 'e', 0x10, 0x02};
			struct pollfd p = {.fd = io_tcp_fd(raw), .events = POLLOUT};

			poll(&p, 1, 1000);
			REQUIRE(io_tcp_send(raw, part, sizeof(part)) == (ssize_t)sizeof(part));
			/* let the responder see the partial frame first */
			for (int k = 0; k < 20; k++) {
				struct iw_conn_info mi;
				struct pollfd q = {.fd = io_tcp_fd(me.tcp), .events = POLLIN};

				iw_conn_info(&me.iw, &mi);
				if (mi.rx_consumed == sizeof(part))
					break;
				poll(&q, 1, 50);
				step(&me);
			}
			CHECK_EQ(iw_conn_state(&me.iw), IW_CONN_AWAIT_REQ);
			if (how == RESET_MID) {
				io_tcp_abort(raw);
				raw = NULL;
			} else {
				io_tcp_shutdown(raw);
			}
		}
	}
	loop(e, 1, one_ended);
	ms = (double)(now_ns() - t0) / 1e6;
	CHECK_EQ(iw_conn_state(&me.iw), IW_CONN_FAILED);
	switch (how) {
	case SILENT_CLIENT:
	case SILENT_SERVER:
		CHECK_EQ(iw_conn_error(&me.iw), -ETIMEDOUT);
		/* at the configured time, in real time (poll granularity and a loaded machine) */
		CHECK(ms >= 300.0 && ms < 2000.0);
		break;
	case RESET_MID:
		CHECK_EQ(iw_conn_error(&me.iw), -ECONNRESET);
		CHECK(ms < 300.0);
		break;
	case CLOSE_MID:
		CHECK_EQ(iw_conn_error(&me.iw), -ESHUTDOWN);
		CHECK(ms < 300.0);
		break;
	}
	fprintf(stderr, "%s: %s after %.0f ms\n", names[how],
		iw_conn_err_name(iw_conn_error(&me.iw)), ms);
	io_tcp_close(me.tcp);
	if (raw)
		io_tcp_close(raw);
	io_tcp_listener_close(l);
}

int main(void)
{
	uint8_t v4[16], v6[16];
	int fds = count_fds();
	struct io_tcp_listener *probe;

	check_seed(1);
	addr4(v4, "127.0.0.1");
	REQUIRE(inet_pton(AF_INET6, "::1", v6) == 1);
	test_handshake(v4, "127.0.0.1", false);
	test_handshake(v4, "127.0.0.1", true);
	if (io_tcp_listen(v6, 0, 0, NULL, &probe) == 0) {
		io_tcp_listener_close(probe);
		test_handshake(v6, "::1", false);
	} else {
		fprintf(stderr, "::1 not available, IPv6 handshake skipped\n");
	}
	test_reject(v4);
	test_refused(v4);
	for (int how = 0; how < 4; how++)
		test_bad_peer(v4, how);
	CHECK_EQ(count_fds(), fds); /* every socket closed */
	return check_exit();
}
