/* softrdma compare: the server side's arguments, the two-host control protocol's lines and the
 * lookup of a host's devices (compare.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tools/compare.h"

void av_add(struct argv_b *a, const char *fmt, ...)
{
	if (a->n >= 39)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->buf[a->n], sizeof(a->buf[0]), fmt, ap);
	va_end(ap);
	a->v[a->n] = a->buf[a->n];
	a->v[++a->n] = NULL;
}

static const char *const kinds[] = {"lat", "bw", "floor", "setup"};
static const char *const floor_modes[] = {"udp-lat", "tcp-lat", "udp-bw", "tcp-bw"};

static bool spec_ok(const struct srv_spec *sp)
{
	if ((unsigned)sp->kind > SRV_SETUP || sp->port < 1024 || sp->port > 65535 ||
	    sp->timeout_s < 1 || sp->timeout_s > 600 || (sp->iwarp != 0 && sp->iwarp != 1))
		return false;
	if (sp->kind == SRV_SETUP && (sp->n < 1 || sp->n > 100000))
		return false;
	if (sp->kind == SRV_FLOOR) {
		for (size_t i = 0; i < sizeof(floor_modes) / sizeof(floor_modes[0]); i++)
			if (!strcmp(sp->mode, floor_modes[i]))
				return true;
		return false;
	}
	return true;
}

int srv_argv(const struct srv_spec *sp, const char *roce_dev, const char *iwarp_dev,
	     struct argv_b *out, const char **transport)
{
	if (!spec_ok(sp))
		return -EINVAL;
	out->n = 0;
	*transport = NULL;
	av_add(out, "softrdma");
	switch (sp->kind) {
	case SRV_LAT:
	case SRV_BW:
		av_add(out, "%s", kinds[sp->kind]);
		av_add(out, "-d");
		av_add(out, "%s", sp->iwarp ? iwarp_dev : roce_dev);
		break;
	case SRV_FLOOR:
		av_add(out, "compare");
		av_add(out, "--floor");
		av_add(out, "%s", sp->mode);
		av_add(out, "--server");
		break;
	case SRV_SETUP:
		av_add(out, "compare");
		av_add(out, "--setup");
		av_add(out, "--server");
		if (sp->tcp)
			av_add(out, "--tcp");
		else
			*transport = sp->iwarp ? "iwarp" : "roce";
		av_add(out, "-n");
		av_add(out, "%d", sp->n);
		break;
	}
	av_add(out, "-p");
	av_add(out, "%d", sp->port);
	av_add(out, "--timeout");
	av_add(out, "%d", sp->timeout_s);
	return 0;
}

void srv_spec_format(const struct srv_spec *sp, char *out, size_t len)
{
	snprintf(out, len, "%s %s %d %d %d %d %d", kinds[sp->kind],
		 sp->kind == SRV_FLOOR ? sp->mode : "-", sp->iwarp, sp->tcp ? 1 : 0, sp->port,
		 sp->n, sp->timeout_s);
}

int srv_spec_parse(const char *text, struct srv_spec *sp)
{
	char kind[16], mode[16];
	int iwarp, tcp, port, n, timeout, used = 0;
	if (sscanf(text, "%15s %15s %d %d %d %d %d%n", kind, mode, &iwarp, &tcp, &port, &n,
		   &timeout, &used) != 7 ||
	    text[used] != 0)
		return -EINVAL;
	*sp = (struct srv_spec){
	    .iwarp = iwarp, .tcp = tcp == 1, .port = port, .n = n, .timeout_s = timeout};
	if (tcp != 0 && tcp != 1)
		return -EINVAL;
	size_t k = 0;
	while (k < sizeof(kinds) / sizeof(kinds[0]) && strcmp(kind, kinds[k]))
		k++;
	if (k == sizeof(kinds) / sizeof(kinds[0]))
		return -EINVAL;
	sp->kind = (enum srv_kind)k;
	snprintf(sp->mode, sizeof(sp->mode), "%s", mode);
	return spec_ok(sp) ? 0 : -EINVAL;
}

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (!a || !b || a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
	return false;
}

/* An IPv4-mapped IPv6 address as the IPv4 address it is. */
static struct sockaddr_in unmapped(const struct sockaddr_in6 *a6)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	memcpy(&a.sin_addr, a6->sin6_addr.s6_addr + 12, 4);
	return a;
}

bool device_exists(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	bool found = false;
	for (int i = 0; list && i < n && !found; i++)
		found = !strcmp(ibv_get_device_name(list[i]), name);
	if (list)
		ibv_free_device_list(list);
	return found;
}

/* a itself, or the IPv4 address it maps (in *v4). */
static const struct sockaddr *as_v4(const struct sockaddr *a, struct sockaddr_in *v4)
{
	if (a->sa_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)a)->sin6_addr))
		return a;
	*v4 = unmapped((const struct sockaddr_in6 *)a);
	return (const struct sockaddr *)v4;
}

void addr_text(const struct sockaddr *a, char *out, size_t len)
{
	struct sockaddr_in v4;
	a = as_v4(a, &v4);
	snprintf(out, len, "?");
	getnameinfo(
	    a, a->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6),
	    out, (socklen_t)len, NULL, 0, NI_NUMERICHOST);
}

int local_devices(const struct sockaddr *a, char *roce, char *iwarp, size_t len, char *why,
		  size_t whylen)
{
	struct sockaddr_in v4;
	a = as_v4(a, &v4);
	struct ifaddrs *ifs;
	if (getifaddrs(&ifs) != 0) {
		int e = errno;
		snprintf(why, whylen, "cannot list the interfaces: %s", strerror(e));
		return -e;
	}
	char name[IF_NAMESIZE + 1] = "";
	for (struct ifaddrs *i = ifs; i && !name[0]; i = i->ifa_next)
		if (same_addr(i->ifa_addr, a))
			snprintf(name, sizeof(name), "%s", i->ifa_name);
	freeifaddrs(ifs);
	char host[INET6_ADDRSTRLEN];
	addr_text(a, host, sizeof(host));
	if (!name[0]) {
		snprintf(why, whylen, "no interface holds the address %s", host);
		return -EADDRNOTAVAIL;
	}
	snprintf(roce, len, "roce_%s", name);
	snprintf(iwarp, len, "iwarp_%s", name);
	if (!device_exists(roce) || !device_exists(iwarp)) {
		snprintf(why, whylen,
			 "no softrdma devices on %s (%s): 'softrdma devices' lists them", name,
			 host);
		return -ENODEV;
	}
	return 0;
}

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One byte at a time: the lines are short and few, and nothing past the newline may be taken
 * from the socket. */
int line_read(int fd, char *out, size_t len, double timeout_s, volatile sig_atomic_t *stop)
{
	size_t n = 0;
	double end = mono_s() + timeout_s;
	for (;;) {
		if (stop && *stop)
			return -EINTR;
		double left = end - mono_s();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1000) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		char ch;
		ssize_t got = recv(fd, &ch, 1, 0);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got <= 0)
			return -ECONNRESET;
		if (ch == '\n') {
			out[n] = 0;
			return 0;
		}
		if (n + 1 >= len || (unsigned char)ch < 0x20)
			return -EPROTO;
		out[n++] = ch;
	}
}

int line_write(int fd, const char *fmt, ...)
{
	char buf[CMP_LINE_MAX];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(buf) - 1)
		return -EPROTO;
	buf[n++] = '\n';
	for (int off = 0; off < n;) {
		ssize_t w = send(fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -ECONNRESET;
		off += (int)w;
	}
	return 0;
}

int tcp_dial(const char *host, int port, double timeout_s, volatile sig_atomic_t *stop, char *err,
	     size_t errlen)
{
	char service[16];
	snprintf(service, sizeof(service), "%d", port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
	int g = getaddrinfo(host, service, &hints, &res);
	if (g) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(g));
		return -EINVAL;
	}
	double end = mono_s() + timeout_s;
	int last = ECONNREFUSED;
	for (;;) {
		for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
			int fd =
			    socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
				   ai->ai_protocol);
			if (fd < 0) {
				last = errno;
				continue;
			}
			int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
			if (r < 0 && errno == EINPROGRESS) {
				struct pollfd p = {.fd = fd, .events = POLLOUT};
				double left = end - mono_s();
				r = poll(&p, 1, left > 0 ? (int)(left * 1000) + 1 : 1) == 1 ? 0
											    : -1;
				int e = r == 0 ? 0 : ETIMEDOUT;
				socklen_t l = sizeof(e);
				if (r == 0)
					getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
				errno = e;
				r = e ? -1 : 0;
			}
			if (r == 0) {
				int one = 1;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
				freeaddrinfo(res);
				return fd;
			}
			last = errno;
			close(fd);
		}
		if ((stop && *stop) || mono_s() >= end)
			break;
		usleep(100000); /* the server may be starting */
	}
	freeaddrinfo(res);
	snprintf(err, errlen, "cannot connect to %s port %d within %.0f s: %s", host, port,
		 timeout_s, strerror(last));
	return stop && *stop ? -EINTR : -last;
}
