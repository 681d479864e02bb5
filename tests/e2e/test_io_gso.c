/* io_udp's GSO trains and prepared receive batch on loopback: a train leaves as the datagrams
 * it holds, byte for byte; a train that breaks the rules, or one sent with SOFTRDMA_GSO=0,
 * leaves packet by packet; a receive after the caller changed its buffers (or broke one) uses
 * the new ones. Traffic stays on 127.0.0.1. */
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

/* io_udp_recv keeps its message headers between calls: the buffers the caller passes next
 * time are the ones used, whatever the last call did with the entries. */
static void test_rx_buffers(void)
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
	REQUIRE(io_udp_open(&c, &io) == 0);
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
	CHECK(pk[0].buf == a[1]); /* the runt's entry went behind */
	CHECK_EQ(pk[0].buf[12], 0xA1);
	/* New buffers for every entry, and a smaller capacity for one. */
	for (int i = 0; i < 4; i++)
		pk[i] = (struct io_pkt){.buf = b[i], .cap = i == 0 ? 20 : sizeof(b[i])};
	dg[12] = 0xB2;
	REQUIRE(sendto(fd, dg, 40, 0, (struct sockaddr *)&to, sizeof(to)) == 40);
	REQUIRE(sendto(fd, dg, 16, 0, (struct sockaddr *)&to, sizeof(to)) == 16);
	usleep(20000);
	got = io_udp_recv(io, pk, 4);
	CHECK_EQ(got, 1); /* the 40-byte one was truncated in the 20-byte buffer */
	CHECK_EQ(counter(io, IO_UDP_C_rx_truncated), 1);
	CHECK(pk[0].buf == b[1]);
	CHECK_EQ(pk[0].len, 16);
	CHECK_EQ(b[1][12], 0xB2);
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

int main(void)
{
	REQUIRE(mkdtemp(regdir) != NULL);
	test_trains();
	test_rx_buffers();
	rmdir(regdir);
	return check_exit();
}
