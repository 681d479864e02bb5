/* Proves on the running kernel what io.h relies on for the ICRC (spec roce.md 6.3): every IPv4
 * packet io_udp_send emits, from the main socket and from a source-port socket, carries
 * Identification 0 and DF, and the TOS and TTL asked for. Captures on lo with an AF_PACKET socket,
 * which needs CAP_NET_RAW: skipped, with a message, otherwise. Also prints, for information, what
 * a connected socket would have sent (a per-socket counter: why io_udp never connects). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/ip6.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "io/io.h"

static char regdir[] = "/tmp/softrdma-test-io-ipid-XXXXXX";

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ETH_P_ALL: a packet socket bound to one protocol sees only incoming packets (outgoing ones are
 * passed to ptype_all taps only, dev_queue_xmit_nit); the outgoing copy is what we sent. */
static int capture_socket(void)
{
	int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ALL));
	if (fd < 0)
		return -errno;
	struct sockaddr_ll sll = {.sll_family = AF_PACKET,
				  .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = (int)if_nametoindex("lo")};
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)) != 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

static uint16_t bound_udp(int family, int *fdp)
{
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	struct sockaddr_in sa4 = {.sin_family = AF_INET};
	socklen_t sl;
	REQUIRE(fd >= 0);
	inet_pton(AF_INET, "127.0.0.1", &sa4.sin_addr);
	if (family == AF_INET) {
		sl = sizeof(sa4);
		REQUIRE(bind(fd, (struct sockaddr *)&sa4, sl) == 0);
		getsockname(fd, (struct sockaddr *)&sa4, &sl);
		*fdp = fd;
		return ntohs(sa4.sin_port);
	}
	sl = sizeof(sa6);
	if (bind(fd, (struct sockaddr *)&sa6, sl) != 0) {
		close(fd);
		return 0;
	}
	getsockname(fd, (struct sockaddr *)&sa6, &sl);
	*fdp = fd;
	return ntohs(sa6.sin6_port);
}

struct seen4 {
	int n, bad_id, no_df, frag, bad_tos, bad_ttl;
	int from_main, from_sport;
};

/* Reads captured IPv4 packets to `dport` for up to 500 ms. */
static void collect4(int cap, uint16_t dport, uint16_t main_port, uint16_t sport, int want,
		     struct seen4 *s)
{
	uint8_t b[2048];
	uint64_t end = now_ms() + 500;
	while (s->n < want && now_ms() < end) {
		struct pollfd pfd = {.fd = cap, .events = POLLIN};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t len = recvfrom(cap, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		/* lo shows each packet twice (out and in): count the outgoing copy only */
		if (len < 28 || from.sll_pkttype != PACKET_OUTGOING ||
		    from.sll_protocol != htons(ETH_P_IP))
			continue;
		struct iphdr ip;
		struct udphdr udp;
		memcpy(&ip, b, sizeof(ip));
		if (ip.version != 4 || ip.protocol != IPPROTO_UDP)
			continue;
		memcpy(&udp, b + ip.ihl * 4, sizeof(udp));
		if (ntohs(udp.dest) != dport)
			continue;
		s->n++;
		uint16_t fo = ntohs(ip.frag_off);
		s->bad_id += ip.id != 0;
		s->no_df += !(fo & IP_DF);
		s->frag += (fo & (IP_MF | IP_OFFMASK)) != 0;
		s->bad_tos += ip.tos != 0x62;
		s->bad_ttl += ip.ttl != 17;
		s->from_main += ntohs(udp.source) == main_port;
		s->from_sport += ntohs(udp.source) == sport;
		if (ip.id != 0 || !(fo & IP_DF))
			fprintf(stderr, "  packet from port %u: id 0x%04x frag_off 0x%04x\n",
				ntohs(udp.source), ntohs(ip.id), fo);
	}
}

static void test_ipv4(int cap)
{
	struct io_udp_config cfg = {.family = AF_INET, .registry_dir = regdir};
	struct io_udp *io;
	int rfd, tmp;
	uint16_t rport = bound_udp(AF_INET, &rfd);
	uint16_t sport = bound_udp(AF_INET, &tmp);
	close(tmp);
	cfg.addr[10] = cfg.addr[11] = 0xFF;
	inet_pton(AF_INET, "127.0.0.1", cfg.addr + 12);
	cfg.port = bound_udp(AF_INET, &tmp);
	close(tmp);
	REQUIRE(io_udp_open(&cfg, &io) == 0);
	CHECK_EQ(io_udp_sport_get(io, sport), 0);

	uint8_t payload[10][100];
	struct io_pkt pkts[10];
	for (int i = 0; i < 10; i++) {
		memset(payload[i], i, sizeof(payload[i]));
		pkts[i] = (struct io_pkt){.buf = payload[i],
					  .len = 60 + (size_t)i * 4,
					  .sport = i < 5 ? cfg.port : sport,
					  .dport = rport,
					  .tos = 0x62, /* DSCP 24, ECT(0) */
					  .ttl = 17};
		memcpy(pkts[i].dst, cfg.addr, 16);
	}
	/* one at a time and in a batch: both paths */
	CHECK_EQ(io_udp_send(io, pkts, 1), 1);
	CHECK_EQ(io_udp_send(io, pkts + 1, 9), 9);
	struct seen4 s = {0};
	collect4(cap, rport, cfg.port, sport, 10, &s);
	fprintf(stderr,
		"IPv4: %d packets captured (%d from the main socket, %d from the source-port "
		"socket): %d with ID != 0, %d without DF\n",
		s.n, s.from_main, s.from_sport, s.bad_id, s.no_df);
	CHECK_EQ(s.n, 10);
	CHECK_EQ(s.from_main, 5);
	CHECK_EQ(s.from_sport, 5);
	CHECK_EQ(s.bad_id, 0);
	CHECK_EQ(s.no_df, 0);
	CHECK_EQ(s.frag, 0);
	CHECK_EQ(s.bad_tos, 0);
	CHECK_EQ(s.bad_ttl, 0);
	io_udp_sport_put(io, sport);
	io_udp_close(io);

	/* For information: a connected DF socket numbers its packets. */
	int c = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int pmtu = IP_PMTUDISC_DO;
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(rport)};
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	setsockopt(c, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	if (connect(c, (struct sockaddr *)&to, sizeof(to)) == 0) {
		for (int i = 0; i < 3; i++)
			send(c, payload[0], 20, 0);
		uint8_t b[256];
		uint64_t end = now_ms() + 300;
		int shown = 0;
		fprintf(stderr, "for comparison, a CONNECTED socket sent IDs:");
		while (shown < 3 && now_ms() < end) {
			struct sockaddr_ll from;
			socklen_t fl = sizeof(from);
			struct pollfd pfd = {.fd = cap, .events = POLLIN};
			if (poll(&pfd, 1, 50) <= 0)
				continue;
			ssize_t len = recvfrom(cap, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
			struct iphdr ip;
			if (len < 28 || from.sll_pkttype != PACKET_OUTGOING ||
			    from.sll_protocol != htons(ETH_P_IP))
				continue;
			memcpy(&ip, b, sizeof(ip));
			if (ip.protocol != IPPROTO_UDP)
				continue;
			fprintf(stderr, " 0x%04x", ntohs(ip.id));
			shown++;
		}
		fprintf(stderr, " (not used by softrdma)\n");
	}
	close(c);
	close(rfd);
}

static void test_ipv6(int cap)
{
	struct io_udp_config cfg = {.family = AF_INET6, .registry_dir = regdir};
	struct io_udp *io;
	int rfd, tmp;
	uint16_t rport = bound_udp(AF_INET6, &rfd);
	if (!rport) {
		fprintf(stderr, "SKIP IPv6: no ::1\n");
		return;
	}
	memcpy(cfg.addr, &in6addr_loopback, 16);
	cfg.port = bound_udp(AF_INET6, &tmp);
	close(tmp);
	REQUIRE(io_udp_open(&cfg, &io) == 0);
	uint8_t payload[64] = {0};
	struct io_pkt p = {.buf = payload,
			   .len = sizeof(payload),
			   .sport = cfg.port,
			   .dport = rport,
			   .tos = 0x62,
			   .ttl = 9};
	memcpy(p.dst, &in6addr_loopback, 16);
	CHECK_EQ(io_udp_send(io, &p, 1), 1);
	uint8_t b[2048];
	int found = 0;
	uint64_t end = now_ms() + 500;
	while (!found && now_ms() < end) {
		struct pollfd pfd = {.fd = cap, .events = POLLIN};
		if (poll(&pfd, 1, 50) <= 0)
			continue;
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t len = recvfrom(cap, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		struct ip6_hdr ip6;
		struct udphdr udp;
		if (len < 48 || from.sll_pkttype != PACKET_OUTGOING ||
		    from.sll_protocol != htons(ETH_P_IPV6))
			continue;
		memcpy(&ip6, b, sizeof(ip6));
		memcpy(&udp, b + 40, sizeof(udp));
		if (ip6.ip6_nxt != IPPROTO_UDP || ntohs(udp.dest) != rport)
			continue;
		found = 1;
		uint32_t flow = ntohl(ip6.ip6_flow);
		fprintf(stderr, "IPv6: traffic class 0x%02x, hop limit %u, flow label 0x%05x\n",
			(flow >> 20) & 0xFF, ip6.ip6_hlim, flow & 0xFFFFF);
		CHECK_EQ((flow >> 20) & 0xFF, 0x62);
		CHECK_EQ(ip6.ip6_hlim, 9);
		CHECK_EQ(flow & 0xFFFFF, 0); /* as rxe: no automatic flow label */
	}
	CHECK(found);
	io_udp_close(io);
	close(rfd);
}

/* io_udp_close removes its registry file; after a REQUIRE failure, this does. */
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

int main(void)
{
	int cap = capture_socket();
	if (cap < 0) {
		fprintf(stderr,
			"SKIP: capturing on lo needs CAP_NET_RAW (AF_PACKET: %s); run as root to "
			"check the IPv4 ID of io_udp_send's packets\n",
			strerror(-cap));
		CHECK(true);
		return check_exit();
	}
	REQUIRE(mkdtemp(regdir) != NULL);
	atexit(cleanup);
	test_ipv4(cap);
	test_ipv6(cap);
	close(cap);
	return check_exit(); /* cleanup() removes the directory */
}
