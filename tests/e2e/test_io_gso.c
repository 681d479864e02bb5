/* io_udp's GSO trains and prepared receive batch on loopback: a train leaves as the datagrams
 * it holds, byte for byte; a train that breaks the rules, or one sent with SOFTRDMA_GSO=0,
 * leaves packet by packet; a receive after the caller changed its buffers (or broke one) uses
 * the new ones; a coalesced receive (GRO) is cut back into its datagrams, copied in order or
 * (io_udp_recv_view) left in place. Traffic stays on 127.0.0.1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "io/fault.h"
#include "io/io.h"

static char regdir[] = "/tmp/softrdma-test-io-gso-XXXXXX";

static struct io_udp_config cfg4(uint16_t port)
{
	struct io_udp_config c = {.family = AF_INET, .port = port, .registry_dir = regdir};
	c.addr[10] = c.addr[11] = 0xFF;
	inet_pton(AF_INET, "127.0.0.1", c.addr + 12);
	return c;
}

/* A plain UDP socket on 127.0.0.1, any port (*port). */
static int plain4(uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	REQUIRE(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

static uint16_t free_port(void)
{
	uint16_t p;
	close(plain4(&p));
	return p;
}

static uint64_t counter(struct io_udp *io, enum io_udp_counter c)
{
	uint64_t v[IO_UDP_NCOUNTERS];
	io_udp_counters(io, v);
	return v[c];
}

/* Receives one datagram from fd within 1 s; its length, or -1. */
static ssize_t recv1(int fd, uint8_t *buf, size_t cap)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, 1000) != 1)
		return -1;
	return recv(fd, buf, cap, MSG_DONTWAIT);
}

/* Packets of the given lengths with distinct bytes, to 127.0.0.1:dport from io's port. */
static void make_pkts(struct io_udp *io, uint16_t dport, struct io_pkt *p, uint8_t (*buf)[512],
		      const size_t *lens, int n)
{
	for (int i = 0; i < n; i++) {
		for (size_t j = 0; j < lens[i]; j++)
			buf[i][j] = (uint8_t)(i * 37 + j);
		p[i] = (struct io_pkt){.buf = buf[i],
				       .len = lens[i],
				       .sport = io_udp_port(io),
				       .dport = dport,
				       .ttl = 64}; /* every control message a train can carry */
		p[i].dst[10] = p[i].dst[11] = 0xFF;
		inet_pton(AF_INET, "127.0.0.1", p[i].dst + 12);
	}
}

/* Sends n packets (p[0].train set by the caller) and checks that fd gets each one alone. */
static void send_and_expect(struct io_udp *io, int fd, struct io_pkt *p, int n)
{
	uint8_t got[2048];
	CHECK_EQ(io_udp_send(io, p, n), n);
	for (int i = 0; i < n; i++) {
		ssize_t r = recv1(fd, got, sizeof(got));
		CHECK_EQ(r, (ssize_t)p[i].len);
		if (r == (ssize_t)p[i].len)
			CHECK_MEM(got, p[i].buf, p[i].len);
	}
	CHECK_EQ(recv(fd, got, sizeof(got), MSG_DONTWAIT), -1);
}

static void test_trains(void)
{
	static uint8_t buf[8][512];
	struct io_pkt p[8];
	struct io_udp *io = NULL;
	uint16_t dport;
	int fd = plain4(&dport);

	setenv(IO_UDP_GSO_ENV, "1", 1);
	struct io_udp_config c = cfg4(free_port());
	REQUIRE(io_udp_open(&c, &io) == 0);
	unsetenv(IO_UDP_GSO_ENV);
	if (!io_udp_gso(io)) {
		printf("note: the kernel refused UDP_SEGMENT; trains are sent packet by packet\n");
	} else {
		/* A reply and its ACK; then a bulk train of equal packets. */
		const size_t l1[] = {200, 60};
		make_pkts(io, dport, p, buf, l1, 2);
		p[0].train = 2;
		send_and_expect(io, fd, p, 2);
		CHECK_EQ(counter(io, IO_UDP_C_tx_gso_trains), 1);
		CHECK_EQ(counter(io, IO_UDP_C_tx_gso_packets), 2);
		const size_t l2[] = {300, 300, 300, 300, 300};
		make_pkts(io, dport, p, buf, l2, 5);
		p[0].train = 5;
		send_and_expect(io, fd, p, 5);
		CHECK_EQ(counter(io, IO_UDP_C_tx_gso_trains), 2);
		CHECK_EQ(counter(io, IO_UDP_C_tx_gso_packets), 7);
	}
	/* Rules broken (a shorter packet in the middle; a longer last one; another port; a
	 * train longer than what was passed): packet by packet. */
	const size_t l3[] = {300, 100, 300};
	make_pkts(io, dport, p, buf, l3, 3);
	p[0].train = 3;
	send_and_expect(io, fd, p, 3);
	const size_t l4[] = {100, 300};
	make_pkts(io, dport, p, buf, l4, 2);
	p[0].train = 2;
	send_and_expect(io, fd, p, 2);
	const size_t l5[] = {300, 300};
	make_pkts(io, dport, p, buf, l5, 2);
	p[1].dport = dport; /* same, but another TOS */
	p[1].tos = 4;
	p[0].train = 2;
	send_and_expect(io, fd, p, 2);
	make_pkts(io, dport, p, buf, l5, 2);
	p[1].train = 5;
	send_and_expect(io, fd, p, 2);
	CHECK_EQ(counter(io, IO_UDP_C_tx_gso_trains), io_udp_gso(io) ? 2 : 0);
	CHECK_EQ(counter(io, IO_UDP_C_tx_drop_gso), 0);
	io_udp_close(io);

	/* With SOFTRDMA_GSO=0: no trains. */
	setenv(IO_UDP_GSO_ENV, "0", 1);
	c = cfg4(free_port());
	REQUIRE(io_udp_open(&c, &io) == 0);
	unsetenv(IO_UDP_GSO_ENV);
	CHECK(!io_udp_gso(io));
	const size_t l6[] = {200, 60};
	make_pkts(io, dport, p, buf, l6, 2);
	p[0].train = 2;
	send_and_expect(io, fd, p, 2);
	CHECK_EQ(counter(io, IO_UDP_C_tx_gso_trains), 0);
	io_udp_close(io);
	close(fd);
}

/* A part sent from where it lies (io_pkt.ext): each datagram is head | ext | tail, alone and in
 * a train; pieces that do not add up are refused and counted, not sent. */
static void test_ext(void)
{
	static uint8_t head[4][512], mem[4][512];
	struct io_pkt p[4];
	struct io_udp *io = NULL;
	uint16_t dport;
	int fd = plain4(&dport);
	struct io_udp_config c = cfg4(free_port());
	REQUIRE(io_udp_open(&c, &io) == 0);
	const size_t l[] = {40, 40, 40, 40};
	make_pkts(io, dport, p, head, l, 4);
	for (int i = 0; i < 4; i++) {
		for (size_t j = 0; j < sizeof(mem[i]); j++)
			mem[i][j] = (uint8_t)(200 + i + j * 3);
		/* 12 bytes of header, 300 from mem, then 28 (the last without a tail) */
		p[i].ext = mem[i] + 7;
		p[i].ext_len = 300;
		p[i].ext_at = 12;
		p[i].len = i == 3 ? 312 : 340;
	}
	p[0].train = 4; /* a train where GSO is on; alone otherwise */
	CHECK_EQ(io_udp_send(io, p, 4), 4);
	CHECK_EQ(counter(io, IO_UDP_C_tx_gso_trains), io_udp_gso(io) ? 1 : 0);
	CHECK_EQ(counter(io, IO_UDP_C_tx_bytes), 3 * 340 + 312);
	for (int i = 0; i < 4; i++) {
		uint8_t got[1024], want[1024];
		memcpy(want, head[i], 12);
		memcpy(want + 12, mem[i] + 7, 300);
		memcpy(want + 312, head[i] + 12, p[i].len - 312);
		ssize_t r = recv1(fd, got, sizeof(got));
		CHECK_EQ(r, (ssize_t)p[i].len);
		if (r == (ssize_t)p[i].len)
			CHECK_MEM(got, want, p[i].len);
	}
	/* ext_at past what buf holds, and ext longer than the datagram: refused. */
	uint64_t refused = counter(io, IO_UDP_C_tx_drop_badaddr);
	p[0].train = 0;
	p[0].ext_at = 41;
	p[1].ext_len = 400;
	CHECK_EQ(io_udp_send(io, p, 2), 0);
	CHECK_EQ(counter(io, IO_UDP_C_tx_drop_badaddr), refused + 2);
	uint8_t got[1024];
	CHECK_EQ(recv(fd, got, sizeof(got), MSG_DONTWAIT), -1);
	/* The fault stage holds packets: it takes none with an ext part. */
	struct io_fault_cfg fc = {0};
	struct io_fault *f = NULL;
	REQUIRE(io_fault_create(&fc, 1, 2048, &f) == 0);
	make_pkts(io, dport, p, head, l, 1);
	p[0].ext = mem[0];
	p[0].ext_len = 8;
	p[0].len = 48;
	CHECK_EQ(io_fault_send(f, io, p, 1, 0), -EINVAL);
	io_fault_destroy(f);
	io_udp_close(io);
	close(fd);
}

/* io_udp_recv keeps its message headers between calls: the buffers the caller passes next
 * time are the ones used, whatever the last call did with the entries. Without GRO a dropped
 * datagram's entry goes behind (no copy); with GRO each datagram is copied into the next
 * entry, in order. */
static void test_rx_buffers(bool gro)
{
	static uint8_t a[4][256], b[4][256];
	struct io_pkt pk[4];
	struct io_udp *io = NULL;
	uint16_t port = free_port(), sport;
	int fd = plain4(&sport);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
	uint8_t dg[64];

	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	struct io_udp_config c = cfg4(port);
	if (!gro)
		setenv(IO_UDP_GSO_ENV, "0", 1);
	REQUIRE(io_udp_open(&c, &io) == 0);
	unsetenv(IO_UDP_GSO_ENV);
	if (gro && !io_udp_gro(io)) {
		printf("note: the kernel refused UDP_GRO; its receive path is not tested\n");
		io_udp_close(io);
		close(fd);
		return;
	}
	CHECK_EQ(io_udp_gro(io), gro);
	for (int i = 0; i < 4; i++)
		pk[i] = (struct io_pkt){.buf = a[i], .cap = sizeof(a[i])};
	/* A runt first (dropped, so the kept datagram changes entries), then a packet. */
	memset(dg, 0, sizeof(dg));
	dg[7] = 9; /* DestQP 9: not a probe */
	REQUIRE(sendto(fd, dg, 8, 0, (struct sockaddr *)&to, sizeof(to)) == 8);
	dg[12] = 0xA1;
	REQUIRE(sendto(fd, dg, 40, 0, (struct sockaddr *)&to, sizeof(to)) == 40);
	usleep(20000);
	int got = io_udp_recv(io, pk, 4);
	CHECK_EQ(got, 1);
	CHECK_EQ(pk[0].len, 40);
	CHECK(pk[0].buf == (gro ? a[0] : a[1])); /* without GRO the runt's entry went behind */
	CHECK_EQ(pk[0].buf[12], 0xA1);
	/* New buffers for every entry, and a smaller capacity for one. */
	for (int i = 0; i < 4; i++)
		pk[i] = (struct io_pkt){.buf = b[i], .cap = i == 0 ? 20 : sizeof(b[i])};
	dg[12] = 0xB2;
	REQUIRE(sendto(fd, dg, 40, 0, (struct sockaddr *)&to, sizeof(to)) == 40);
	REQUIRE(sendto(fd, dg, 16, 0, (struct sockaddr *)&to, sizeof(to)) == 16);
	usleep(20000);
	got = io_udp_recv(io, pk, 4);
	if (!gro) {
		CHECK_EQ(got, 1); /* the 40-byte one was truncated in the 20-byte buffer */
		CHECK_EQ(counter(io, IO_UDP_C_rx_truncated), 1);
		CHECK(pk[0].buf == b[1]);
		CHECK_EQ(pk[0].len, 16);
		CHECK_EQ(b[1][12], 0xB2);
	} else {
		/* The 40-byte one takes the next entry with room, the 20-byte one goes behind and
		 * holds the 16-byte one. */
		CHECK_EQ(got, 2);
		CHECK_EQ(counter(io, IO_UDP_C_rx_truncated), 0);
		CHECK(pk[0].buf == b[1]);
		CHECK_EQ(pk[0].len, 40);
		CHECK_EQ(b[1][12], 0xB2);
		CHECK(pk[1].buf == b[0]);
		CHECK_EQ(pk[1].len, 16);
	}
	/* A bad buffer is refused, and nothing is received. */
	pk[2].buf = NULL;
	REQUIRE(sendto(fd, dg, 40, 0, (struct sockaddr *)&to, sizeof(to)) == 40);
	usleep(20000);
	CHECK_EQ(io_udp_recv(io, pk, 4), -EINVAL);
	CHECK_EQ(counter(io, IO_UDP_C_rx_errors), 0);
	pk[2].buf = b[2];
	pk[2].cap = sizeof(b[2]);
	CHECK_EQ(io_udp_recv(io, pk, 4), 1);
	io_udp_close(io);
	close(fd);
}

/* A train from one io_udp to another with GRO: the receiver gets it as one coalesced datagram
 * (on loopback the kernel does not cut it) and hands out the packets it holds, byte for byte,
 * in order, two per call here; between calls the rest waits in io (io_udp_pending). */
static void test_gro_train(void)
{
	static uint8_t buf[8][512], in[8][512];
	struct io_pkt p[8], r[8];
	struct io_udp *tx = NULL, *rx = NULL;
	struct io_udp_config ct = cfg4(free_port()), cr = cfg4(free_port());
	REQUIRE(io_udp_open(&ct, &tx) == 0);
	REQUIRE(io_udp_open(&cr, &rx) == 0);
	if (!io_udp_gso(tx) || !io_udp_gro(rx)) {
		printf("note: no UDP GSO or GRO from the kernel; coalesced receive not tested\n");
		io_udp_close(rx);
		io_udp_close(tx);
		return;
	}
	const size_t lens[] = {300, 300, 300, 300, 120};
	make_pkts(tx, io_udp_port(rx), p, buf, lens, 5);
	p[0].train = 5;
	CHECK_EQ(io_udp_send(tx, p, 5), 5);
	CHECK_EQ(counter(tx, IO_UDP_C_tx_gso_trains), 1);
	usleep(20000);
	for (int i = 0; i < 8; i++)
		r[i] = (struct io_pkt){.buf = in[i], .cap = sizeof(in[i])};
	int got = 0;
	for (int call = 0; call < 3; call++) {
		int k = io_udp_recv(rx, r, 2);
		CHECK_EQ(k, call < 2 ? 2 : 1);
		for (int i = 0; i < k && got + i < 5; i++) {
			CHECK_EQ(r[i].len, lens[got + i]);
			CHECK(r[i].buf == in[i]);
			if (r[i].len == lens[got + i])
				CHECK_MEM(r[i].buf, buf[got + i], r[i].len);
			CHECK_EQ(r[i].sport, io_udp_port(tx));
			CHECK_EQ(r[i].dport, io_udp_port(rx));
			CHECK_EQ(r[i].train, got + i); /* its place in the train: IPv4 ID */
		}
		got += k > 0 ? k : 0;
		CHECK_EQ(io_udp_pending(rx), call < 2);
	}
	CHECK_EQ(got, 5);
	CHECK_EQ(io_udp_recv(rx, r, 2), 0);
	CHECK_EQ(counter(rx, IO_UDP_C_rx_gro), 1);
	CHECK_EQ(counter(rx, IO_UDP_C_rx_packets), 5);
	/* An entry too small for a packet goes behind, and the packet takes the next one with
	 * room: here the 200-byte entry ends last and holds the 120-byte packet. */
	make_pkts(tx, io_udp_port(rx), p, buf, lens, 5);
	p[0].train = 5;
	CHECK_EQ(io_udp_send(tx, p, 5), 5);
	usleep(20000);
	r[0].cap = 200;
	CHECK_EQ(io_udp_recv(rx, r, 5), 5);
	for (int i = 0; i < 4; i++) {
		CHECK(r[i].buf == in[i + 1]);
		CHECK_EQ(r[i].len, 300);
		CHECK_MEM(r[i].buf, buf[i], 300);
	}
	CHECK(r[4].buf == in[0]);
	CHECK_EQ(r[4].len, 120);
	CHECK_MEM(r[4].buf, buf[4], 120);
	/* A packet no entry has room for is dropped as truncated; the others come. */
	CHECK_EQ(io_udp_send(tx, p, 5), 5);
	usleep(20000);
	for (int i = 0; i < 5; i++)
		r[i] = (struct io_pkt){.buf = in[i], .cap = 250};
	CHECK_EQ(io_udp_recv(rx, r, 5), 1);
	CHECK_EQ(counter(rx, IO_UDP_C_rx_truncated), 4);
	CHECK_EQ(r[0].len, 120);
	CHECK_MEM(r[0].buf, buf[4], 120);
	CHECK_EQ(counter(rx, IO_UDP_C_rx_gro), 3);
	/* io_udp_recv_view: the packets stay in io, the entries point at them (no buffers of
	 * their own), in order, across calls, until the next receive. */
	make_pkts(tx, io_udp_port(rx), p, buf, lens, 5);
	p[0].train = 5;
	CHECK_EQ(io_udp_send(tx, p, 5), 5);
	usleep(20000);
	struct io_pkt v[8];
	memset(v, 0, sizeof(v));
	const uint8_t *prev_end = NULL;
	got = 0;
	for (int call = 0; call < 3; call++) {
		int k = io_udp_recv_view(rx, v, 2, 512);
		CHECK_EQ(k, call < 2 ? 2 : 1);
		for (int i = 0; i < k && got + i < 5; i++) {
			CHECK(v[i].buf != NULL);
			CHECK(v[i].buf < in[0] || v[i].buf >= in[8]); /* not a caller's buffer */
			CHECK_EQ(v[i].len, lens[got + i]);
			CHECK_EQ(v[i].cap, v[i].len);
			if (v[i].buf && v[i].len == lens[got + i])
				CHECK_MEM(v[i].buf, buf[got + i], v[i].len);
			/* One coalesced datagram: each packet right behind the one before. */
			if (prev_end)
				CHECK(v[i].buf == prev_end);
			prev_end = v[i].buf + v[i].len;
			CHECK_EQ(v[i].sport, io_udp_port(tx));
			CHECK_EQ(v[i].train, got + i);
		}
		got += k > 0 ? k : 0;
	}
	CHECK_EQ(got, 5);
	CHECK_EQ(io_udp_recv_view(rx, v, 2, 512), 0);
	CHECK_EQ(counter(rx, IO_UDP_C_rx_gro), 4);
	/* Longer than max_len: dropped as truncated, the shorter last one comes. */
	uint64_t trunc = counter(rx, IO_UDP_C_rx_truncated);
	CHECK_EQ(io_udp_send(tx, p, 5), 5);
	usleep(20000);
	CHECK_EQ(io_udp_recv_view(rx, v, 8, 200), 1);
	CHECK_EQ(v[0].len, 120);
	CHECK_MEM(v[0].buf, buf[4], 120);
	CHECK_EQ(counter(rx, IO_UDP_C_rx_truncated), trunc + 4);
	io_udp_close(rx);
	io_udp_close(tx);
}

/* Without GRO io_udp_recv_view is io_udp_recv: the datagrams go into the caller's buffers. */
static void test_view_without_gro(void)
{
	static uint8_t in[2][256];
	struct io_udp *io = NULL;
	uint16_t port = free_port(), sport;
	int fd = plain4(&sport);
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
	uint8_t dg[40] = {0};
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	struct io_udp_config c = cfg4(port);
	setenv(IO_UDP_GSO_ENV, "0", 1);
	REQUIRE(io_udp_open(&c, &io) == 0);
	unsetenv(IO_UDP_GSO_ENV);
	CHECK(!io_udp_gro(io));
	struct io_pkt v[2] = {{.buf = in[0], .cap = sizeof(in[0])},
			      {.buf = in[1], .cap = sizeof(in[1])}};
	dg[7] = 9;
	dg[12] = 0xC3;
	REQUIRE(sendto(fd, dg, sizeof(dg), 0, (struct sockaddr *)&to, sizeof(to)) == sizeof(dg));
	usleep(20000);
	CHECK_EQ(io_udp_recv_view(io, v, 2, 8), 1); /* the buffers' capacities count */
	CHECK(v[0].buf == in[0]);
	CHECK_EQ(v[0].len, sizeof(dg));
	CHECK_EQ(in[0][12], 0xC3);
	io_udp_close(io);
	close(fd);
}

int main(void)
{
	REQUIRE(mkdtemp(regdir) != NULL);
	test_trains();
	test_ext();
	test_rx_buffers(false);
	test_rx_buffers(true);
	test_gro_train();
	test_view_without_gro();
	rmdir(regdir);
	return check_exit();
}
