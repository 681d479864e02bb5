/* Who holds a UDP or TCP port (io.h io_udp_port_holder, io_tcp_port_holder): the uid that
 * /proc/net lists for a socket on the address or the wildcard. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "io/io.h"
#include "io/tcp.h"

/* /proc/net/{udp,tcp}{,6} print each 32-bit word of an address as the host's integer, %08X. */
static void proc_hex(const uint8_t *a, int words, char *out)
{
	for (int i = 0; i < words; i++) {
		uint32_t v;
		memcpy(&v, a + 4 * i, 4);
		snprintf(out + 8 * i, 9, "%08X", v);
	}
}

/* TCP lists connections too (TIME_WAIT ones as uid 0): only a listener holds the port. */
#define TCP_LISTEN 0x0A
#define ANY_STATE  (-1)

static long holder_in(const char *path, const char *want, const char *any, uint16_t port, int state)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return -ENOENT;
	char line[512], local[40];
	unsigned lport, st, uid;
	long found = -ENOENT;
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return -ENOENT;
	}
	while (found < 0 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*x %u", local, &lport,
			   &st, &uid) == 4 &&
		    lport == port && (state == ANY_STATE || (int)st == state) &&
		    (!strcmp(local, want) || !strcmp(local, any)))
			found = (long)uid;
	}
	fclose(f);
	return found;
}

/* The uid of a socket on port of addr or the wildcard in /proc/net/<proto> (and <proto>6). */
static long holder(const char *proto, const uint8_t addr[16], uint16_t port, int state)
{
	static const uint8_t zero[16];
	char want6[33], any6[33], want4[9], any4[9], path[32];
	proc_hex(addr, 4, want6);
	proc_hex(zero, 4, any6);
	bool v4 = !memcmp(addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
	if (v4) {
		proc_hex(addr + 12, 1, want4);
		proc_hex(zero, 1, any4);
		snprintf(path, sizeof(path), "/proc/net/%s", proto);
		long uid = holder_in(path, want4, any4, port, state);
		if (uid >= 0)
			return uid;
	}
	/* A dual-stack socket on [::] holds the IPv4 port too. */
	snprintf(path, sizeof(path), "/proc/net/%s6", proto);
	return holder_in(path, want6, any6, port, state);
}

long io_udp_port_holder(const uint8_t addr[16], uint16_t port)
{
	return holder("udp", addr, port, ANY_STATE);
}

long io_tcp_port_holder(const uint8_t addr[16], uint16_t port)
{
	return holder("tcp", addr, port, TCP_LISTEN);
}
