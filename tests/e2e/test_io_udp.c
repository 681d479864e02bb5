/* io_udp on loopback: receive with addressing and TOS/TTL, send with per-packet TOS/TTL and
 * source ports, fallbacks, truncation and runt counting, -EADDRINUSE, in-process steering of
 * three members on one port, IPv6. Traffic stays on 127.0.0.1 / ::1. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nobody.h"
#include "io/fault.h"
#include "io/io.h"

static char regdir[] = "/tmp/softrdma-test-io-udp-XXXXXX";

static void mapped(uint8_t *a, const char *v4)
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xFF;
	inet_pton(AF_INET, v4, a + 12);
}

static struct io_udp_config cfg4(uint16_t port)
{
	struct io_udp_config c = {.family = AF_INET, .port = port, .registry_dir = regdir};
	mapped(c.addr, "127.0.0.1");
	return c;
}

/* A plain UDP socket on 127.0.0.1 (port 0: any), with TOS/TTL reporting. */
static int plain4(uint16_t port, uint16_t *bound)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t sl = sizeof(sa);
	int one = 1;
	REQUIRE(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -errno;
	}
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	if (bound)
		*bound = ntohs(sa.sin_port);
	return fd;
}

static uint16_t free_port(void)
{
	uint16_t p;
	int fd = plain4(0, &p);
	close(fd);
	return p;
}

static void fake_bth(uint8_t *b, size_t len, uint32_t dqpn, uint32_t tag)
{
	memset(b, 0, len);
	b[0] = 0x04; /* RC SEND ONLY */
	b[2] = b[3] = 0xFF;
	b[5] = (uint8_t)(dqpn >> 16);
	b[6] = (uint8_t)(dqpn >> 8);
	b[7] = (uint8_t)dqpn;
	if (len >= 16)
		memcpy(b + 12, &tag, 4);
}

static void send_plain(int fd, uint16_t port, const void *b, size_t len, int tos)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
	REQUIRE(sendto(fd, b, len, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)len);
}

/* Receives into pkts, waiting up to ms for the first; returns the count. */
static int recv_wait(struct io_udp *io, struct io_pkt *pkts, int n, int ms)
{
	struct pollfd pfd = {.fd = io_udp_fd(io), .events = POLLIN};
	int got = 0;
	for (int i = 0; i < ms && got == 0; i++) {
		poll(&pfd, 1, 1);
		got = io_udp_recv(io, pkts, n);
		io_udp_service(io);
	}
	return got;
}

/* Receives one datagram on fd into b, its sender into from, and the IPv4 TOS and TTL (or IPv6
 * traffic class and hop limit) it came with into *tos and *ttl (-1: not reported). Returns
 * recvmsg's result. */
static ssize_t recv_tos_ttl(int fd, void *b, size_t len, void *from, socklen_t fromlen, int *tos,
			    int *ttl)
{
	char cbuf[256];
	struct iovec iov = {.iov_base = b, .iov_len = len};
	struct msghdr mh = {.msg_name = from,
			    .msg_namelen = fromlen,
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	ssize_t r = recvmsg(fd, &mh, 0);

	*tos = *ttl = -1;
	for (struct cmsghdr *cm = r >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; cm;
	     cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS)
			*tos = *(uint8_t *)CMSG_DATA(cm); /* one byte (ip_cmsg_recv_tos) */
		else if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TTL)
			memcpy(ttl, CMSG_DATA(cm), sizeof(int));
		else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS)
			memcpy(tos, CMSG_DATA(cm), sizeof(int));
		else if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_HOPLIMIT)
			memcpy(ttl, CMSG_DATA(cm), sizeof(int));
	}
	return r;
}

static uint64_t counter(struct io_udp *io, enum io_udp_counter c)
{
	uint64_t v[IO_UDP_NCOUNTERS];
	io_udp_counters(io, v);
	return v[c];
}

static int dir_entries(void)
{
	DIR *d = opendir(regdir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Runs on every exit, REQUIRE failures included: no registry file survives the test. */
static void cleanup(void)
{
	DIR *d = opendir(regdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[512];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", regdir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(regdir);
}

static void test_config_errors(void)
{
	struct io_udp *io = NULL;
	struct io_udp_config c = cfg4(free_port());
	c.family = AF_INET6; /* mapped address with AF_INET6 */
	CHECK_EQ(io_udp_open(&c, &io), -EINVAL);
	c = cfg4(free_port());
	mapped(c.addr, "0.0.0.0");
	CHECK_EQ(io_udp_open(&c, &io), -EINVAL);
	c.family = 12345;
	CHECK_EQ(io_udp_open(&c, &io), -EINVAL);
	CHECK_EQ(io_udp_open(NULL, &io), -EINVAL);
	c = cfg4(free_port());
	mapped(c.addr, "203.0.113.77"); /* TEST-NET-3: not a local address (bind only) */
	CHECK_EQ(io_udp_open(&c, &io), -EADDRNOTAVAIL);
	CHECK_EQ(dir_entries(), 0);
}

static void test_addrinuse(void)
{
	uint16_t port;
	int fd = plain4(0, &port); /* a plain socket: no SO_REUSEPORT */
	struct io_udp_config c = cfg4(port);
	struct io_udp *io = NULL;
	CHECK_EQ(io_udp_open(&c, &io), -EADDRINUSE);
	CHECK(io == NULL);
	CHECK_EQ(dir_entries(), 0); /* nothing left behind */
	/* Who holds it, for the error message: this user. */
	CHECK_EQ(io_udp_port_holder(c.addr, port), (long)geteuid());
	close(fd);
	CHECK_EQ(io_udp_port_holder(c.addr, port), -ENOENT);
	/* Another user's socket (a child as nobody binds one; needs root): named by its uid,
	 * and the port refused. */
	if (!nobody_can("the other user's port"))
		return;
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid_t child = nobody_fork();
	if (child == 0) {
		uint16_t p2 = 0;
		int f2 = plain4(0, &p2);
		if (f2 < 0 || write(pfd[1], &p2, sizeof(p2)) != (ssize_t)sizeof(p2))
			_exit(3);
		pause();
		_exit(0);
	}
	uint16_t p2 = 0;
	REQUIRE(read(pfd[0], &p2, sizeof(p2)) == (ssize_t)sizeof(p2));
	struct io_udp_config c2 = cfg4(p2);
	CHECK_EQ(io_udp_port_holder(c2.addr, p2), 65534);
	CHECK_EQ(io_udp_open(&c2, &io), -EADDRINUSE);
	nobody_end(child);
	close(pfd[0]);
	close(pfd[1]);
}

static void test_rx_tx(void)
{
	struct io_udp_config c = cfg4(free_port());
	struct io_udp *io;
	uint16_t pport;
	int pfd = plain4(0, &pport);
	uint8_t bufs[8][256], b[2100];
	struct io_pkt pkts[8];

	REQUIRE(io_udp_open(&c, &io) == 0);
	uint8_t slot = io_udp_slot(io);
	CHECK(slot >= 1);
	CHECK_EQ(io_udp_port(io), c.port);
	struct io_udp_info info;
	io_udp_info(io, &info);
	CHECK_EQ(info.members, 1);
	CHECK_EQ(info.index, 0);
	CHECK(info.complete);
	CHECK(info.is_default);
	CHECK_EQ(dir_entries(), 1);

	/* receive: addressing, TOS, TTL */
	fake_bth(b, 100, (uint32_t)slot << 16 | 7, 0xA1);
	send_plain(pfd, c.port, b, 100, 0x8A);
	for (int i = 0; i < 8; i++)
		pkts[i] = (struct io_pkt){.buf = bufs[i], .cap = sizeof(bufs[i])};
	int got = recv_wait(io, pkts, 8, 1000);
	CHECK_EQ(got, 1);
	CHECK_EQ(pkts[0].len, 100);
	CHECK_MEM(pkts[0].buf, b, 100);
	uint8_t lo[16];
	mapped(lo, "127.0.0.1");
	CHECK_MEM(pkts[0].src, lo, 16);
	CHECK_MEM(pkts[0].dst, lo, 16);
	CHECK_EQ(pkts[0].sport, pport);
	CHECK_EQ(pkts[0].dport, c.port);
	CHECK_EQ(pkts[0].tos, 0x8A);
	CHECK_EQ(pkts[0].ttl, 64);
	CHECK(!pkts[0].ipv6);
	CHECK_EQ(io_udp_recv(io, pkts, 8), 0);

	/* truncated and runt datagrams are dropped and counted; the good ones keep their order */
	fake_bth(b, sizeof(b), (uint32_t)slot << 16 | 1, 1);
	send_plain(pfd, c.port, b, 2000, 0); /* > 256-byte buffers */
	send_plain(pfd, c.port, b, 5, 0);
	for (uint32_t t = 10; t < 13; t++) {
		fake_bth(b, 64, (uint32_t)slot << 16 | 1, t);
		send_plain(pfd, c.port, b, 64, 0);
		send_plain(pfd, c.port, b, 3, 0);
	}
	usleep(20000);
	for (int i = 0; i < 8; i++)
		pkts[i] = (struct io_pkt){.buf = bufs[i], .cap = sizeof(bufs[i])};
	got = io_udp_recv(io, pkts, 8);
	CHECK_EQ(got, 3);
	for (int i = 0; i < got; i++) {
		uint32_t t;
		memcpy(&t, pkts[i].buf + 12, 4);
		CHECK_EQ(t, 10 + i);
		CHECK_EQ(pkts[i].len, 64);
		bool ours = false;
		for (int j = 0; j < 8; j++)
			ours |= pkts[i].buf == bufs[j];
		CHECK(ours);
	}
	CHECK_EQ(counter(io, IO_UDP_C_rx_truncated), 1);
	CHECK_EQ(counter(io, IO_UDP_C_rx_runt), 4);
	CHECK_EQ(counter(io, IO_UDP_C_rx_packets), 4);

	/* send from the main socket with TOS / TTL */
	uint8_t payload[48];
	fake_bth(payload, sizeof(payload), 0x11, 0x55);
	struct io_pkt tx = {.buf = payload,
			    .len = sizeof(payload),
			    .sport = c.port,
			    .dport = pport,
			    .tos = 0x48,
			    .ttl = 33};
	mapped(tx.dst, "127.0.0.1");
	/* Each with the TOS and TTL asked for, whether that takes ancillary data (a value other
	 * than the socket's own) or not: {tos, ttl asked, ttl expected}, 0 being the default. */
	static const int tos_ttl[][3] = {{0x48, 33, 33}, {0, 64, 64}, {0, 0, 64},
					 {0x48, 64, 64}, {0, 33, 33}, {0x03, 0, 64}};
	struct sockaddr_in from;
	ssize_t r;
	for (size_t k = 0; k < sizeof(tos_ttl) / sizeof(tos_ttl[0]); k++) {
		tx.tos = (uint8_t)tos_ttl[k][0];
		tx.ttl = (uint8_t)tos_ttl[k][1];
		CHECK_EQ(io_udp_send(io, &tx, 1), 1);
		int tos, ttl;
		r = recv_tos_ttl(pfd, b, sizeof(b), &from, sizeof(from), &tos, &ttl);
		CHECK_EQ(r, sizeof(payload));
		CHECK_MEM(b, payload, sizeof(payload));
		CHECK_EQ(ntohs(from.sin_port), c.port);
		CHECK_EQ(tos, tos_ttl[k][0]);
		CHECK_EQ(ttl, tos_ttl[k][2]);
	}
	tx.tos = 0x48;
	tx.ttl = 33;

	/* a source-port socket, and a batch over two source ports */
	uint16_t sp = free_port();
	CHECK_EQ(io_udp_sport_get(io, sp), 0);
	CHECK_EQ(io_udp_sport_get(io, sp), 0); /* second reference */
	struct io_pkt batch[5];
	for (int i = 0; i < 5; i++) {
		batch[i] = tx;
		batch[i].sport = i < 3 ? sp : c.port;
		batch[i].ttl = 0; /* the socket's own */
	}
	CHECK_EQ(io_udp_send(io, batch, 5), 5);
	for (int i = 0; i < 5; i++) {
		socklen_t fl = sizeof(from);
		r = recvfrom(pfd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		CHECK_EQ(r, sizeof(payload));
		CHECK_EQ(ntohs(from.sin_port), i < 3 ? sp : c.port);
	}
	io_udp_sport_put(io, sp);
	CHECK_EQ(io_udp_send(io, batch, 1), 1); /* one reference left: still bound */
	socklen_t fl = sizeof(from);
	recvfrom(pfd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	CHECK_EQ(ntohs(from.sin_port), sp);
	io_udp_sport_put(io, sp);
	CHECK_EQ(io_udp_send(io, batch, 1), 1); /* no reference: main socket, counted */
	fl = sizeof(from);
	recvfrom(pfd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	CHECK_EQ(ntohs(from.sin_port), c.port);
	CHECK_EQ(counter(io, IO_UDP_C_tx_sport_unbound), 1);

	/* a port held by a plain socket: fallback to the main socket, counted */
	uint16_t held;
	int hfd = plain4(0, &held);
	CHECK_EQ(io_udp_sport_get(io, held), 1);
	batch[0].sport = held;
	CHECK_EQ(io_udp_send(io, batch, 1), 1);
	fl = sizeof(from);
	recvfrom(pfd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	CHECK_EQ(ntohs(from.sin_port), c.port);
	CHECK_EQ(counter(io, IO_UDP_C_sport_fallback), 1);
	io_udp_sport_put(io, held);
	close(hfd);

	/* bad destinations: IPv6 address on an IPv4 socket; too big for DF on lo */
	struct io_pkt bad = tx;
	memset(bad.dst, 0, 16);
	bad.dst[15] = 1;
	CHECK_EQ(io_udp_send(io, &bad, 1), 0);
	CHECK_EQ(counter(io, IO_UDP_C_tx_drop_badaddr), 1);
	static uint8_t huge[70000];
	bad = tx;
	bad.buf = huge;
	bad.len = 65508; /* the UDP maximum over IPv4 */
	bad.len += 1;
	CHECK_EQ(io_udp_send(io, &bad, 1), 0);
	CHECK_EQ(counter(io, IO_UDP_C_tx_drop_msgsize), 1);
	CHECK_EQ(io_udp_send(io, NULL, 0), 0);
	CHECK_EQ(io_udp_send(io, NULL, 1), -EINVAL);

	/* all-zero fault stage on the real socket: straight through */
	struct io_fault *f;
	struct io_fault_cfg fc = {0};
	REQUIRE(io_fault_create(&fc, 16, 2048, &f) == 0);
	CHECK_EQ(io_fault_send(f, io, &tx, 1, 1000), 1);
	r = recv(pfd, b, sizeof(b), 0);
	CHECK_EQ(r, sizeof(payload));
	io_fault_destroy(f);

	io_udp_close(io);
	close(pfd);
	CHECK_EQ(dir_entries(), 0); /* the last member removes the registry */
}

/* Three members in one process on one port: each gets exactly its slot's packets, slot 0 goes
 * to the default member; closing the first (index 0) moves the last into its index. */
static void test_steer_inproc(void)
{
	struct io_udp_config c = cfg4(free_port());
	struct io_udp *io[3];
	uint8_t bufs[16][128], b[64];
	struct io_pkt pkts[16];
	uint16_t pport;
	int pfd = plain4(0, &pport);

	for (int i = 0; i < 3; i++) {
		REQUIRE(io_udp_open(&c, &io[i]) == 0);
		CHECK_EQ(io_udp_slot(io[i]), io_udp_slot(io[0]) + i);
	}
	for (int i = 0; i < 3; i++) {
		struct io_udp_info info;
		io_udp_info(io[i], &info);
		CHECK_EQ(info.index, i);
		CHECK_EQ(info.members, 3);
		CHECK(info.complete);
		CHECK_EQ(info.is_default, i == 0);
	}
	for (int round = 0; round < 2; round++) {
		int first = round == 0 ? 0 : 1;
		for (int i = first; i < 3; i++) {
			for (uint32_t k = 0; k < 4; k++) {
				fake_bth(b, sizeof(b), (uint32_t)io_udp_slot(io[i]) << 16 | k,
					 100 * i);
				send_plain(pfd, c.port, b, sizeof(b), 0);
			}
		}
		fake_bth(b, sizeof(b), 1, 999); /* QP1: slot 0 */
		send_plain(pfd, c.port, b, sizeof(b), 0);
		usleep(20000);
		for (int i = first; i < 3; i++) {
			for (int j = 0; j < 16; j++)
				pkts[j] = (struct io_pkt){.buf = bufs[j], .cap = sizeof(bufs[j])};
			int got = io_udp_recv(io[i], pkts, 16);
			struct io_udp_info info;
			io_udp_info(io[i], &info);
			CHECK_EQ(got, info.is_default ? 5 : 4);
			for (int j = 0; j < got; j++) {
				uint32_t t;
				memcpy(&t, pkts[j].buf + 12, 4);
				CHECK(pkts[j].buf[5] == io_udp_slot(io[i]) ||
				      (pkts[j].buf[5] == 0 && info.is_default));
				CHECK(t == 100u * (unsigned)i || t == 999);
			}
			CHECK_EQ(counter(io[i], IO_UDP_C_rx_misdelivered), 0);
		}
		if (round == 0) {
			io_udp_close(io[0]); /* index 0 leaves: io[2] moves to index 0 */
			struct io_udp_info info;
			io_udp_info(io[2], &info);
			CHECK_EQ(info.index, 0);
			CHECK(info.complete);
			io_udp_info(io[1], &info);
			CHECK_EQ(info.members, 2);
			io_udp_service(io[1]);
			io_udp_info(io[1], &info);
			CHECK(info.is_default); /* now the lowest slot */
		}
	}
	/* two members share a source port (SO_REUSEPORT, same user), as two processes' QPs may */
	uint16_t sp = free_port();
	CHECK_EQ(io_udp_sport_get(io[1], sp), 0);
	CHECK_EQ(io_udp_sport_get(io[2], sp), 0);
	io_udp_sport_put(io[1], sp);
	io_udp_sport_put(io[2], sp);
	/* after a service, the next one is due within the check interval */
	CHECK_EQ(io_udp_service(io[1]), 0);
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	uint64_t next = io_udp_next_service_ns(io[1]);
	CHECK(next <= now + IO_UDP_DEFAULT_CHECK_MS * 1000000ull);
	CHECK(next + IO_UDP_DEFAULT_CHECK_MS * 1000000ull > now);
	/* a new member takes the freed lowest slot */
	REQUIRE(io_udp_open(&c, &io[0]) == 0);
	CHECK_EQ(io_udp_slot(io[0]), io_udp_slot(io[1]) - 1);
	for (int i = 0; i < 3; i++)
		io_udp_close(io[i]);
	close(pfd);
	CHECK_EQ(dir_entries(), 0);
}

static void test_ipv6(void)
{
	struct io_udp_config c = {.family = AF_INET6, .registry_dir = regdir};
	struct io_udp *io;
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	socklen_t sl = sizeof(sa);
	int one = 1;

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "SKIP ipv6: no ::1 (%s)\n", strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, &one, sizeof(one));
	memcpy(c.addr, &in6addr_loopback, 16);
	c.port = free_port();
	int err = io_udp_open(&c, &io);
	if (err == -EADDRINUSE) { /* the v4 free port is taken on v6: try once more */
		c.port = free_port();
		err = io_udp_open(&c, &io);
	}
	REQUIRE(err == 0);

	uint8_t payload[40], b[128];
	fake_bth(payload, sizeof(payload), (uint32_t)io_udp_slot(io) << 16 | 3, 6);
	struct io_pkt tx = {.buf = payload,
			    .len = sizeof(payload),
			    .sport = c.port,
			    .dport = ntohs(sa.sin6_port),
			    .tos = 0x2C,
			    .ttl = 7};
	memcpy(tx.dst, &in6addr_loopback, 16);
	CHECK_EQ(io_udp_send(io, &tx, 1), 1);
	struct sockaddr_in6 from;
	int tc, hl;
	CHECK_EQ(recv_tos_ttl(fd, b, sizeof(b), &from, sizeof(from), &tc, &hl), sizeof(payload));
	CHECK_EQ(tc, 0x2C);
	CHECK_EQ(hl, 7);
	CHECK_EQ(ntohs(from.sin6_port), c.port);

	/* and back: the plain v6 socket sends to io */
	int tclass = 0x10;
	setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tclass, sizeof(tclass));
	struct sockaddr_in6 to = {.sin6_family = AF_INET6,
				  .sin6_port = htons(c.port),
				  .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	CHECK_EQ(sendto(fd, payload, sizeof(payload), 0, (struct sockaddr *)&to, sizeof(to)),
		 sizeof(payload));
	struct io_pkt rx = {.buf = b, .cap = sizeof(b)};
	CHECK_EQ(recv_wait(io, &rx, 1, 1000), 1);
	CHECK(rx.ipv6);
	CHECK_MEM(rx.src, &in6addr_loopback, 16);
	CHECK_MEM(rx.dst, &in6addr_loopback, 16);
	CHECK_EQ(rx.sport, ntohs(sa.sin6_port));
	CHECK_EQ(rx.tos, 0x10);
	CHECK_EQ(rx.ttl, 64);
	io_udp_close(io);
	close(fd);
}

static void test_counter_names(void)
{
	for (int i = 0; i < IO_UDP_NCOUNTERS; i++) {
		CHECK(io_udp_counter_name(i) != NULL);
		CHECK(io_udp_counter_desc(i) != NULL);
		for (int j = 0; j < i; j++)
			CHECK(strcmp(io_udp_counter_name(i), io_udp_counter_name(j)) != 0);
	}
	CHECK(io_udp_counter_name(IO_UDP_NCOUNTERS) == NULL);
	CHECK_EQ(strcmp(io_udp_counter_name(IO_UDP_C_rx_truncated), "rx_truncated"), 0);
}

int main(void)
{
	REQUIRE(mkdtemp(regdir) != NULL);
	atexit(cleanup);
	test_counter_names();
	test_config_errors();
	test_addrinuse();
	test_rx_tx();
	test_steer_inproc();
	test_ipv6();
	CHECK_EQ(dir_entries(), 0);
	return check_exit(); /* cleanup() removes the directory */
}
