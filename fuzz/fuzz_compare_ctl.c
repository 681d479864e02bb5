// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc -Iinclude src/tools/compare_remote.c src/tools/util.c fuzz/fuzz_compare_ctl.c -o fuzz_compare_ctl
// clang-format on

/* libFuzzer target for the control protocol of `softrdma compare --server` (compare.h): what
 * any host that reaches its port can send. The input is the byte stream of one session; it is
 * written into a socket pair and read back with line_read, as the server reads it, and each
 * START line goes through srv_spec_parse and srv_argv, which build the argument vector of the
 * process the server would start. Oracles (abort()):
 * - line_read returns lines of at most CMP_LINE_MAX - 1 bytes, without a newline or control
 *   bytes, and ends (bad line, end of stream) without reading past the input;
 * - a spec srv_spec_parse accepts has a kind, a port of 1024..65535 and a time-out of 1..600 s,
 *   srv_argv accepts it, and its argument vector starts with "softrdma" and names only the
 *   subcommands lat, bw or compare, NULL-terminated within its bounds;
 * - srv_spec_format of an accepted spec parses back to the same spec (the mode field counts
 *   for floors only: the other kinds send "-"). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "tools/compare.h"

/* compare_remote.c looks devices up; a session's parse does not need them. */
struct ibv_device **ibv_get_device_list(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	return NULL;
}

void ibv_free_device_list(struct ibv_device **list)
{
	(void)list;
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	(void)device;
	return "";
}

static void must(int cond)
{
	if (!cond)
		abort();
}

static void check_spec(const char *text)
{
	struct srv_spec sp, back;
	memset(&sp, 0, sizeof(sp));
	if (srv_spec_parse(text, &sp) != 0)
		return;
	must((unsigned)sp.kind <= SRV_SETUP && sp.port >= 1024 && sp.port <= 65535);
	must(sp.timeout_s >= 1 && sp.timeout_s <= 600);
	struct argv_b a;
	const char *transport = NULL;
	must(srv_argv(&sp, "roce_x", "iwarp_x", &a, &transport) == 0);
	must(a.n >= 2 && a.n < 40 && a.v[a.n] == NULL && !strcmp(a.v[0], "softrdma"));
	must(!strcmp(a.v[1], "lat") || !strcmp(a.v[1], "bw") || !strcmp(a.v[1], "compare"));
	char line[CMP_LINE_MAX];
	srv_spec_format(&sp, line, sizeof(line));
	memset(&back, 0, sizeof(back));
	must(srv_spec_parse(line, &back) == 0);
	must(back.kind == sp.kind && back.iwarp == sp.iwarp && back.tcp == sp.tcp &&
	     back.port == sp.port && back.n == sp.n && back.timeout_s == sp.timeout_s);
	must(sp.kind != SRV_FLOOR || !strcmp(back.mode, sp.mode)); /* the others carry none */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 16384)
		return 0; /* the socket pair must hold it all without a reader */
	int sv[2];
	must(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	int buf = 256 * 1024;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	for (size_t off = 0; off < size;) {
		ssize_t w = write(sv[0], data + off, size - off);
		must(w > 0);
		off += (size_t)w;
	}
	shutdown(sv[0], SHUT_WR);
	char line[CMP_LINE_MAX];
	size_t lines = 0;
	for (;;) {
		int r = line_read(sv[1], line, sizeof(line), 1.0, NULL);
		if (r != 0) {
			must(r == -ECONNRESET || r == -EPROTO);
			break;
		}
		size_t n = strlen(line);
		must(n < CMP_LINE_MAX); /* at most CMP_LINE_MAX bytes with the newline */
		for (size_t i = 0; i < n; i++)
			must((unsigned char)line[i] >= 0x20);
		must(++lines <= size);
		if (!strncmp(line, "START ", 6))
			check_spec(line + 6);
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}
