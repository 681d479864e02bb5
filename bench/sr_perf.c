/* sr_perf: RC latency, bandwidth and message rate between two processes, on the standard verbs
 * API (it runs on any verbs device). Used by bench/run.sh to state softrdma's figures as ratios
 * to raw sockets measured in the same run.
 *
 *   server: sr_perf [-d roce_lo] [-p 18700]
 *   client: sr_perf -t TEST [-d roce_lo] [-p 18700] [-s bytes] [-n iters] [-D secs] [-q qps]
 *                   [-I idle_qps] [-e] SERVER_IPv4
 *
 * The client sends the test's parameters to the server over the TCP side channel (port -p),
 * so a server needs only its device and port (its own -t, -s, ... are ignored). Tests:
 *
 * lat:  SEND ping-pong of -s bytes (default 100): post, wait for the send's completion and for
 *       the reply; the server answers each request the same way. The client prints
 *       "lat size=100 n=... min=.. p50=.. p99=.. p999=.. avg=.. us" (round trips).
 * wlat: RDMA WRITE ping-pong as ib_write_lat does it: each side writes -s bytes into the
 *       other's buffer and spins on the last byte of its own (the target never calls verbs to
 *       receive: progress is the library's job); the client prints "wlat ..." like lat.
 * rlat: RDMA READ of -s bytes from the server, one at a time, as ib_read_lat does it; the
 *       server never calls verbs while the client reads (it waits on the side channel).
 * bw:   RDMA WRITEs of -s bytes (default 65536), 32 outstanding per QP, round robin over -q QPs
 *       (default 1), for -n messages or -D seconds; prints
 *       "bw size=.. qps=.. n=.. secs=.. gbps=.. msgs_per_sec=.. cpu_cli_s=.. cpu_srv_s=..
 *        cpu_us_per_64k=.." (payload Gbit/s; CPU = user + system time of both processes, all
 *       their threads, over the transfer, per 64 KiB moved).
 * sbw:  SEND message rate: -s bytes (default 8) SENDs, 32 outstanding, the server reposting
 *       its 512 receives as it polls them; prints "sbw ..." like bw. The client never has more
 *       SENDs under way than the server has receives posted: the server tells it how many it
 *       has taken (an RDMA WRITE of a counter every 64) and it stays within 512 of that. iWARP
 *       has no RNR: a SEND that finds no receive breaks the connection (RFC 5040 7.1).
 *
 * -e:   event-driven (lat, rlat): both sides wait for completions in ibv_get_cq_event on a
 *       completion channel (ibv_req_notify_cq, then poll once more to close the race, then
 *       block) instead of busy-polling ibv_poll_cq.
 * -I N: before the measured QP(s), create N more RC QPs on each side and connect them to each
 *       other (RTS), never used: the latency or bandwidth with N idle QPs open.
 * Every test also reports, on the client, the CPU time of both sides over the measured part. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/bench.h"

enum test { T_LAT, T_WLAT, T_RLAT, T_BW, T_SBW };
static const char *const test_names[] = {"lat", "wlat", "rlat", "bw", "sbw"};

#define WINDOW	  32	 /* outstanding WRs per QP in bw and sbw */
#define SBW_RECVS 512	 /* receives the sbw server keeps posted */
#define SBW_LAST  0xee	 /* first byte of the sbw client's last message */
#define MAX_QPS	  64	 /* -q */
#define MAX_IDLE  100000 /* -I */

/* What the client tells the server (host byte order: both ends run on this machine's kind). */
struct params {
	int32_t test, event, nqp, idle;
	int64_t size, iters;
	double secs;
};

/* One QP's connection data, exchanged over the side channel. */
struct info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

struct ctx {
	struct ibv_context *dev;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch; /* -e only */
	struct ibv_cq *cq, *idle_cq;
	struct ibv_qp **qp, **idle;
	uint8_t *buf;
	size_t bytes;
	int gidx, fd, event, armed;
	enum ibv_mtu mtu;
	uint8_t gid[16];
};

/* sbw's credit word: where the server writes how many messages it has taken (the same offset
 * on both sides, in the slack after the buffers). */
static uint64_t *credit_word(struct ctx *c)
{
	return (uint64_t *)(c->buf + ((c->bytes - 64 + 7) & ~(size_t)7));
}

static int side_channel(const char *host, int port)
{
	int fd, one = 1;
	if (host) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
			fprintf(stderr, "sr_perf: %s is not an IPv4 address\n", host);
			exit(2);
		}
		for (int i = 0; i < 100; i++) {
			fd = socket(AF_INET, SOCK_STREAM, 0);
			if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
				return fd;
			close(fd);
			usleep(50000);
		}
		die("cannot reach the server");
	}
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1))
		die("listen");
	fd = accept(ls, NULL, NULL);
	close(ls);
	return fd;
}

static void exchange(int fd, const void *out, void *in, size_t n)
{
	send_all(fd, out, n);
	recv_all(fd, in, n);
}

static void sync_peer(struct ctx *c)
{
	char go = 'g', ack;
	exchange(c->fd, &go, &ack, 1);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void check_wc(const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_SUCCESS) {
		fprintf(stderr, "sr_perf: completion error %s\n", ibv_wc_status_str(wc->status));
		exit(1);
	}
}

/* Reaps up to max completions into wc; with want > 0 it waits until it has at least want
 * (busy-polling, or with -e blocking in the completion channel), else it returns what there is.
 * Returns how many it reaped. */
static int reap(struct ctx *c, struct ibv_wc *wc, int want, int max)
{
	int have = 0;
	for (;;) {
		int n = ibv_poll_cq(c->cq, max - have, wc + have);
		if (n < 0)
			die("poll_cq");
		for (int i = 0; i < n; i++)
			check_wc(&wc[have + i]);
		have += n;
		if (have >= want || have == max)
			return have;
		if (!c->event)
			continue;
		if (!c->armed) {
			/* Arm, then poll once more: a completion that arrived before the arming
			 * would raise no event. */
			if (ibv_req_notify_cq(c->cq, 0))
				die("req_notify_cq");
			c->armed = 1;
			continue;
		}
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		if (ibv_get_cq_event(c->ch, &ev_cq, &ev_ctx))
			die("get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
		c->armed = 0;
	}
}

static void wait_one(struct ctx *c)
{
	struct ibv_wc wc;
	reap(c, &wc, 1, 1);
}

static struct ibv_qp *create_qp(struct ctx *c, struct ibv_cq *cq, uint32_t depth)
{
	struct ibv_qp_init_attr qia = {.send_cq = cq,
				       .recv_cq = cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = depth,
					       .max_recv_wr = depth,
					       .max_send_sge = 1,
					       .max_recv_sge = 1,
					       .max_inline_data = 128}};
	struct ibv_qp *qp = ibv_create_qp(c->pd, &qia);
	if (!qp)
		die("create_qp");
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	return qp;
}

static void connect_qp(struct ctx *c, struct ibv_qp *qp, const struct info *peer)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = c->mtu,
				.dest_qp_num = peer->qpn,
				.rq_psn = peer->psn,
				.max_dest_rd_atomic = 1,
				.min_rnr_timer = 12,
				.ah_attr = {.is_global = 1, .port_num = 1}};
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)c->gidx;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x1234;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

/* Exchanges n QPs' connection data with the peer and moves the QPs to RTS; peer_out (if not
 * NULL) gets the peer's data of the first one. */
static void connect_all(struct ctx *c, struct ibv_qp **qps, int n, struct info *peer_out)
{
	struct info *me = calloc((size_t)n, sizeof(*me)), *peer = calloc((size_t)n, sizeof(*peer));
	if (!me || !peer)
		die("memory");
	for (int i = 0; i < n; i++) {
		me[i] = (struct info){.qpn = qps[i]->qp_num,
				      .psn = 0x1234,
				      .rkey = c->mr->rkey,
				      .addr = (uintptr_t)c->buf};
		memcpy(me[i].gid, c->gid, 16);
	}
	exchange(c->fd, me, peer, (size_t)n * sizeof(*me));
	for (int i = 0; i < n; i++)
		connect_qp(c, qps[i], &peer[i]);
	if (peer_out)
		*peer_out = peer[0];
	free(me);
	free(peer);
}

static void open_device(struct ctx *c, const char *name, const struct params *p)
{
	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "sr_perf: no device %s\n", name);
		exit(1);
	}
	c->dev = ibv_open_device(dev);
	ibv_free_device_list(list);
	if (!c->dev)
		die("open device");
	c->pd = ibv_alloc_pd(c->dev);
	/* Source and target halves, a spare for sbw's last message, and sbw's receive slots. */
	c->bytes = (size_t)p->size * (p->test == T_SBW ? 2 + SBW_RECVS : 2) + 64;
	c->buf = calloc(1, c->bytes);
	if (!c->pd || !c->buf)
		die("resources");
	c->mr =
	    ibv_reg_mr(c->pd, c->buf, c->bytes,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	c->event = p->event;
	if (c->event && !(c->ch = ibv_create_comp_channel(c->dev)))
		die("create_comp_channel");
	int cqe = p->nqp * WINDOW * 2 + SBW_RECVS + 64;
	c->cq = ibv_create_cq(c->dev, cqe, NULL, c->ch, 0);
	if (!c->mr || !c->cq)
		die("resources");
	struct ibv_port_attr pa;
	union ibv_gid gid;
	c->gidx = -1;
	if (ibv_query_port(c->dev, 1, &pa))
		die("query_port");
	c->mtu = pa.active_mtu;
	for (int i = 0; i < pa.gid_tbl_len && c->gidx < 0; i++)
		if (!ibv_query_gid(c->dev, 1, i, &gid) && gid.raw[10] == 0xff) {
			c->gidx = i;
			memcpy(c->gid, gid.raw, 16);
		}
	if (c->gidx < 0) {
		fprintf(stderr, "sr_perf: %s has no IPv4 GID\n", name);
		exit(1);
	}
}

/* -I: idle QPs first, on a CQ of their own, connected and then never used. */
static void open_idle(struct ctx *c, int n)
{
	if (!n)
		return;
	/* Every iWARP QP is a TCP connection: make room for the file descriptors. */
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	c->idle_cq = ibv_create_cq(c->dev, 16, NULL, NULL, 0);
	c->idle = calloc((size_t)n, sizeof(*c->idle));
	if (!c->idle_cq || !c->idle)
		die("idle QPs");
	double t0 = now_us();
	for (int i = 0; i < n; i++)
		c->idle[i] = create_qp(c, c->idle_cq, 1);
	connect_all(c, c->idle, n, NULL);
	fprintf(stderr, "sr_perf: %d idle QPs connected in %.0f ms\n", n, (now_us() - t0) / 1e3);
}

static void print_lat(const char *name, const struct params *p, double *rtt)
{
	double sum = 0;
	long n = (long)p->iters;
	for (long i = 0; i < n; i++)
		sum += rtt[i];
	qsort(rtt, (size_t)n, sizeof(double), cmp_double);
	printf("%s size=%lld n=%ld min=%.2f p50=%.2f p99=%.2f p999=%.2f avg=%.2f", name,
	       (long long)p->size, n, rtt[0], rtt[n / 2], rtt[n * 99 / 100], rtt[n * 999 / 1000],
	       sum / n);
}

/* Runs the client's or the server's part of one test; the client fills rtt (latency tests)
 * or returns the messages moved and *secs (bw, sbw). */
static long run(struct ctx *c, const struct params *p, const struct info *peer, int client,
		double *rtt, double *secs)
{
	struct ibv_qp *qp = c->qp[0];
	size_t size = (size_t)p->size;
	struct ibv_sge ssge = {
	    .addr = (uintptr_t)c->buf, .length = (uint32_t)size, .lkey = c->mr->lkey};
	struct ibv_sge rsge = {
	    .addr = (uintptr_t)c->buf + size, .length = (uint32_t)size, .lkey = c->mr->lkey};
	struct ibv_recv_wr rwr = {.sg_list = &rsge, .num_sge = 1}, *rbad;
	struct ibv_send_wr swr = {.sg_list = &ssge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	long warm = p->iters / 10, total = p->iters + warm;
	struct ibv_wc wc[WINDOW];
	if (size <= 128 && p->test != T_RLAT)
		swr.send_flags |= IBV_SEND_INLINE;

	switch (p->test) {
	case T_WLAT: {
		/* The last byte of each message carries the iteration number (never 0). */
		volatile uint8_t *mine = c->buf + size - 1;
		uint8_t *src = c->buf + size; /* staging: the second half of the buffer */
		swr.opcode = IBV_WR_RDMA_WRITE;
		swr.wr.rdma.remote_addr = peer->addr;
		swr.wr.rdma.rkey = peer->rkey;
		ssge.addr = (uintptr_t)src;
		sync_peer(c);
		for (long i = 0; i < total; i++) {
			uint8_t tag = (uint8_t)(i % 255 + 1);
			double t0 = now_us();
			if (!client)
				while (*mine != tag) {
				}
			src[size - 1] = tag;
			if (ibv_post_send(qp, &swr, &sbad))
				die("post_send");
			wait_one(c);
			if (client)
				while (*mine != tag) {
				}
			if (client && i >= warm)
				rtt[i - warm] = now_us() - t0;
		}
		return 0;
	}
	case T_RLAT:
		sync_peer(c);
		if (client) {
			swr.opcode = IBV_WR_RDMA_READ;
			swr.wr.rdma.remote_addr = peer->addr;
			swr.wr.rdma.rkey = peer->rkey;
			ssge.addr = (uintptr_t)c->buf + size;
			for (long i = 0; i < total; i++) {
				double t0 = now_us();
				if (ibv_post_send(qp, &swr, &sbad))
					die("post_send");
				wait_one(c);
				if (i >= warm)
					rtt[i - warm] = now_us() - t0;
			}
		}
		return 0;
	case T_LAT:
		for (int i = 0; i < 64; i++)
			if (ibv_post_recv(qp, &rwr, &rbad))
				die("post_recv");
		swr.opcode = IBV_WR_SEND;
		sync_peer(c);
		for (long i = 0; i < total; i++) {
			double t0 = now_us();
			if (client) {
				if (ibv_post_send(qp, &swr, &sbad))
					die("post_send");
				reap(c, wc, 2, 2); /* the send's completion and the reply */
			} else {
				wait_one(c); /* the request */
				if (ibv_post_send(qp, &swr, &sbad))
					die("post_send");
				wait_one(c);
			}
			if (ibv_post_recv(qp, &rwr, &rbad))
				die("post_recv");
			if (client && i >= warm)
				rtt[i - warm] = now_us() - t0;
		}
		return 0;
	case T_BW:
	case T_SBW:
		break;
	}

	/* bw and sbw: the client keeps WINDOW WRs outstanding on each QP (wr_id: the QP's index).
	 */
	int sbw = p->test == T_SBW;
	if (sbw && !client) {
		/* Receive slots after the first two halves; wr_id: the slot. */
		uint8_t *slots = c->buf + 2 * size;
		for (int i = 0; i < SBW_RECVS; i++) {
			rsge.addr = (uintptr_t)(slots + (size_t)i * size);
			rwr.wr_id = (uint64_t)i;
			if (ibv_post_recv(qp, &rwr, &rbad))
				die("post_recv");
		}
		uint64_t *credit = credit_word(c);
		struct ibv_sge csge = {
		    .addr = (uintptr_t)credit, .length = sizeof(*credit), .lkey = c->mr->lkey};
		struct ibv_send_wr cwr = {.sg_list = &csge,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
		cwr.wr.rdma.remote_addr = peer->addr + ((uintptr_t)credit - (uintptr_t)c->buf);
		cwr.wr.rdma.rkey = peer->rkey;
		sync_peer(c);
		long got = 0, told = 0;
		for (int done = 0; !done;) {
			int n = reap(c, wc, 1, WINDOW);
			for (int i = 0; i < n; i++) {
				if (wc[i].opcode != IBV_WC_RECV)
					continue; /* a credit write's completion */
				got++;
				uint8_t *slot = slots + wc[i].wr_id * size;
				done |= slot[0] == SBW_LAST;
				rsge.addr = (uintptr_t)slot;
				rwr.wr_id = wc[i].wr_id;
				if (ibv_post_recv(qp, &rwr, &rbad))
					die("post_recv");
			}
			if (!done && got - told >= 64) {
				*credit = (uint64_t)got; /* inline: copied at the post */
				if (ibv_post_send(qp, &cwr, &sbad))
					die("post_send");
				told = got;
			}
		}
		return got;
	}
	sync_peer(c);
	if (!client)
		return 0;
	swr.opcode = sbw ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
	swr.wr.rdma.remote_addr = peer->addr + size;
	swr.wr.rdma.rkey = peer->rkey;
	long posted = 0, done = 0, limit = p->secs > 0 ? -1 : (long)p->iters;
	int out[MAX_QPS] = {0}, more = 1;
	volatile uint64_t *credit = credit_word(c); /* sbw: messages the server has taken */
	double t0 = now_us(), stop = t0 + p->secs * 1e6;
	while (more || done < posted) {
		more = limit < 0 ? now_us() < stop : posted < limit;
		for (int q = 0; more && q < p->nqp; q++)
			while (out[q] < WINDOW && (limit < 0 || posted < limit) &&
			       (!sbw || posted - (long)*credit < SBW_RECVS)) {
				swr.wr_id = (uint64_t)q;
				if (ibv_post_send(c->qp[q], &swr, &sbad))
					die("post_send");
				out[q]++;
				posted++;
			}
		int n = reap(c, wc, 0, WINDOW);
		for (int i = 0; i < n; i++)
			out[wc[i].wr_id]--;
		done += n;
	}
	*secs = (now_us() - t0) / 1e6;
	if (sbw) {
		/* The last message, marked, from the second half (unused by the client): the
		 * server stops when it has it. */
		uint8_t *last = c->buf + size;
		last[0] = SBW_LAST;
		while (posted - (long)*credit >= SBW_RECVS)
			reap(c, wc, 0, WINDOW); /* polls drive the library's progress */
		ssge.addr = (uintptr_t)last;
		swr.wr_id = 0;
		if (ibv_post_send(qp, &swr, &sbad))
			die("post_send");
		wait_one(c);
	}
	return done;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: sr_perf [-d dev] [-p port]                                   (server)\n"
	    "       sr_perf -t TEST [-d dev] [-p port] [-s bytes] [-n iters] [-D secs]\n"
	    "               [-q qps] [-I idle_qps] [-e] SERVER_IPv4             (client)\n"
	    "  -t  lat: SEND ping-pong (default); wlat: RDMA WRITE ping-pong, each side spinning\n"
	    "      on its memory; rlat: RDMA READs one at a time; bw: RDMA WRITE bandwidth;\n"
	    "      sbw: SEND message rate\n"
	    "  -d  device (default roce_lo; iwarp_lo for iWARP)\n"
	    "  -p  TCP side-channel port (default 18700)\n"
	    "  -s  message size in bytes (default 100 for lat/wlat/rlat, 65536 for bw, 8 for sbw)\n"
	    "  -n  round trips (default 20000) or messages (bw, sbw; default 20000)\n"
	    "  -D  bw, sbw: run for this many seconds instead of -n messages\n"
	    "  -q  bw: WRITE round robin over this many QPs, 32 outstanding on each (default 1)\n"
	    "  -I  open and connect this many more RC QPs on each side first, never used\n"
	    "  -e  lat, rlat: wait for completions in a completion channel, no busy polling\n"
	    "The server takes the test's parameters from the client.\n");
}

int main(int argc, char **argv)
{
	const char *dev_name = "roce_lo", *test = "lat";
	int port = 18700, ch;
	struct params p = {.size = -1, .iters = 20000, .nqp = 1};
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
	while ((ch = getopt_long(argc, argv, "t:d:p:s:n:D:q:I:eh", longopts, NULL)) != -1) {
		switch (ch) {
		case 't':
			test = optarg;
			break;
		case 'd':
			dev_name = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			p.size = atol(optarg);
			break;
		case 'n':
			p.iters = atol(optarg);
			break;
		case 'D':
			p.secs = atof(optarg);
			break;
		case 'q':
			p.nqp = atoi(optarg);
			break;
		case 'I':
			p.idle = atoi(optarg);
			break;
		case 'e':
			p.event = 1;
			break;
		default:
			usage(ch == 'h' ? stdout : stderr);
			return ch == 'h' ? 0 : 2;
		}
	}
	const char *host = optind < argc ? argv[optind] : NULL;
	p.test = -1;
	for (int i = 0; i < (int)(sizeof(test_names) / sizeof(test_names[0])); i++)
		if (!strcmp(test, test_names[i]))
			p.test = i;
	if (p.test < 0) {
		fprintf(stderr, "sr_perf: -t must be lat, wlat, rlat, bw or sbw\n");
		return 2;
	}
	if (p.size < 0)
		p.size = p.test == T_BW ? 65536 : p.test == T_SBW ? 8 : 100;
	if (p.size < 1 || p.size > (1L << 30) || p.iters < 10 || p.nqp < 1 || p.nqp > MAX_QPS ||
	    p.idle < 0 || p.idle > MAX_IDLE || (p.nqp > 1 && p.test != T_BW) ||
	    (p.event && p.test != T_LAT && p.test != T_RLAT)) {
		fprintf(stderr, "sr_perf: bad arguments (see --help): -s 1..2^30, -n >= 10, -q "
				"1..64 (bw only), -I 0..100000, -e with lat or rlat only\n");
		return 2;
	}

	struct ctx c = {0};
	c.fd = side_channel(host, port);
	if (host)
		send_all(c.fd, &p, sizeof(p));
	else
		recv_all(c.fd, &p, sizeof(p));
	open_device(&c, dev_name, &p);
	open_idle(&c, p.idle);
	c.qp = calloc((size_t)p.nqp, sizeof(*c.qp));
	if (!c.qp)
		die("memory");
	uint32_t depth = p.test == T_SBW ? SBW_RECVS : 64;
	for (int q = 0; q < p.nqp; q++)
		c.qp[q] = create_qp(&c, c.cq, depth);
	struct info peer;
	connect_all(&c, c.qp, p.nqp, &peer);

	double *rtt = NULL, secs = 0;
	if (host && p.test <= T_RLAT && !(rtt = calloc((size_t)p.iters, sizeof(double))))
		die("memory");
	double cpu0 = cpu_s();
	long msgs = run(&c, &p, &peer, host != NULL, rtt, &secs);
	sync_peer(&c); /* a passive server waits here for the client to finish */
	/* Both sides' CPU time over the test; the client reports it. */
	double cpu = cpu_s() - cpu0, peer_cpu;
	exchange(c.fd, &cpu, &peer_cpu, sizeof(cpu));
	if (host) {
		if (rtt) {
			print_lat(test, &p, rtt);
			printf(" event=%d idle=%d cpu_cli_s=%.3f cpu_srv_s=%.3f us\n", p.event,
			       p.idle, cpu, peer_cpu);
		} else {
			double bytes = (double)p.size * (double)msgs;
			printf("%s size=%lld qps=%d idle=%d n=%ld secs=%.3f gbps=%.3f "
			       "msgs_per_sec=%.0f cpu_cli_s=%.3f cpu_srv_s=%.3f "
			       "cpu_us_per_64k=%.2f\n",
			       test, (long long)p.size, p.nqp, p.idle, msgs, secs,
			       bytes * 8 / secs / 1e9, msgs / secs, cpu, peer_cpu,
			       (cpu + peer_cpu) * 1e6 / (bytes / 65536));
		}
	}
	free(rtt);
	close(c.fd);
	for (int q = 0; q < p.nqp; q++)
		ibv_destroy_qp(c.qp[q]);
	for (int i = 0; i < p.idle; i++)
		ibv_destroy_qp(c.idle[i]);
	free(c.qp);
	free(c.idle);
	if (c.idle_cq)
		ibv_destroy_cq(c.idle_cq);
	ibv_destroy_cq(c.cq);
	if (c.ch)
		ibv_destroy_comp_channel(c.ch);
	ibv_dereg_mr(c.mr);
	ibv_dealloc_pd(c.pd);
	ibv_close_device(c.dev);
	free(c.buf);
	return 0;
}
