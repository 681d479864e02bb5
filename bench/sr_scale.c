/* sr_scale: many connected RC QPs in one process, on the standard verbs API (it runs on any
 * verbs device). Issue 11's scale figures: what an idle QP costs in memory, how long QPs take
 * to create and connect, and whether idle QPs slow down the one that works.
 *
 *   sr_scale [-d roce_lo|iwarp_lo] [-n qps] [-w wrs] [-r ird] [-s bytes] [-i iters] [-u pairs]
 *
 * Two device contexts, A and B (a server's connections and a client's, in one process); QP k
 * of A is connected to QP k of B, so -n QPs make -n / 2 pairs. In order:
 *   1. latency of pair 0 alone: -i SEND round trips of -s bytes (default 100), one thread
 *      driving both ends, busy-polling;
 *   2. the other pairs: created (RESET), then connected (INIT, RTR, RTS); the process's RSS
 *      and heap (mallinfo2: in use, arenas and mmap'ed blocks) before and after, per QP;
 *   3. one message each way on -u pairs spread over the range (default: all), which must all
 *      arrive (on iWARP this is also where the connections are made);
 *   4. latency of pair 0 again, with every other pair open and idle: the ratio to 1. says what
 *      idle QPs cost the data path;
 *   5. destroy time.
 * Prints one "key=value" line per step. -w sets max_send_wr and max_recv_wr (default 1: the
 * QP's fixed cost, with the smallest rings), -r max_dest_rd_atomic and max_rd_atomic
 * (default 1). iWARP: a TCP connection per pair end, so two descriptors per pair; the soft
 * RLIMIT_NOFILE is raised to the hard one. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/bench.h"

#define CQ_SIZE 4096

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gidx;
	enum ibv_mtu mtu;
	struct ibv_qp **qps;
};

static int nwr = 1, ird = 1;
static long size = 100;

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

static void side_open(struct side *s, struct ibv_device *dev, int nqp)
{
	s->ctx = ibv_open_device(dev);
	if (!s->ctx)
		die("open device");
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, CQ_SIZE, NULL, NULL, 0);
	s->buf = calloc(1, 2 * (size_t)size + 64);
	s->mr = s->pd && s->buf
		    ? ibv_reg_mr(s->pd, s->buf, 2 * (size_t)size + 64, IBV_ACCESS_LOCAL_WRITE)
		    : NULL;
	s->qps = calloc((size_t)nqp, sizeof(*s->qps));
	if (!s->pd || !s->cq || !s->mr || !s->qps)
		die("resources");
	struct ibv_port_attr pa;
	if (ibv_query_port(s->ctx, 1, &pa))
		die("query port");
	s->mtu = pa.active_mtu;
	s->gidx = -1;
	for (int i = 0; i < pa.gid_tbl_len && s->gidx < 0; i++)
		if (!ibv_query_gid(s->ctx, 1, i, &s->gid) && s->gid.raw[10] == 0xff)
			s->gidx = i;
	if (s->gidx < 0)
		die("no IPv4 GID");
}

static void side_close(struct side *s)
{
	ibv_dereg_mr(s->mr);
	ibv_destroy_cq(s->cq);
	ibv_dealloc_pd(s->pd);
	ibv_close_device(s->ctx);
	free(s->buf);
	free(s->qps);
}

static struct ibv_qp *qp_new(struct side *s)
{
	struct ibv_qp_init_attr qia = {.send_cq = s->cq,
				       .recv_cq = s->cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = (uint32_t)nwr,
					       .max_recv_wr = (uint32_t)nwr,
					       .max_send_sge = 1,
					       .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &qia);
	if (!qp)
		die("create QP");
	return qp;
}

static void qp_connect(struct side *s, struct ibv_qp *qp, const struct side *peer, uint32_t dqpn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 0x1234;
	a.max_dest_rd_atomic = (uint8_t)ird;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gidx;
	a.ah_attr.grh.dgid = peer->gid;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x1234;
	a.max_rd_atomic = (uint8_t)ird;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

static void post_recv(struct side *s, struct ibv_qp *qp)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + (uint64_t)size,
			      .length = (uint32_t)size,
			      .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = qp->qp_num, .sg_list = &sge, .num_sge = 1}, *bad;
	if (ibv_post_recv(qp, &wr, &bad))
		die("post_recv");
}

static void post_send(struct side *s, struct ibv_qp *qp)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)s->buf, .length = (uint32_t)size, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = qp->qp_num,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	if (ibv_post_send(qp, &wr, &bad))
		die("post_send");
}

/* Polls s's CQ until the receive of qp arrives (send completions on the way are taken too);
 * gives up after 10 s. */
static void wait_recv(struct side *s, struct ibv_qp *qp)
{
	double t0 = now_us();
	for (long spins = 0;; spins++) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			die("poll_cq");
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				fprintf(stderr, "sr_scale: QP 0x%x: %s\n", wc.qp_num,
					ibv_wc_status_str(wc.status));
				exit(1);
			}
			if (wc.opcode == IBV_WC_RECV) {
				if (wc.qp_num != qp->qp_num || wc.byte_len != (uint32_t)size) {
					fprintf(stderr,
						"sr_scale: receive on QP 0x%x (%u B), "
						"expected QP 0x%x\n",
						wc.qp_num, wc.byte_len, qp->qp_num);
					exit(1);
				}
				return;
			}
		}
		if ((spins & 1023) == 0 && now_us() - t0 > 10e6) {
			fprintf(stderr, "sr_scale: no message on QP 0x%x in 10 s\n", qp->qp_num);
			exit(1);
		}
	}
}

/* Send completions left on a CQ (one per message sent). */
static void drain(struct side *s)
{
	struct ibv_wc wc[64];
	while (ibv_poll_cq(s->cq, 64, wc) > 0) {
	}
}

/* One message each way between a's and b's QP k; with t != NULL, the round trip in us. */
static void round_trip(struct side *a, struct side *b, int k, double *t)
{
	double t0 = now_us();
	post_recv(b, b->qps[k]);
	post_send(a, a->qps[k]);
	wait_recv(b, b->qps[k]);
	post_recv(a, a->qps[k]);
	post_send(b, b->qps[k]);
	wait_recv(a, a->qps[k]);
	if (t)
		*t = now_us() - t0;
}

static int cmp_double(const void *x, const void *y)
{
	double u = *(const double *)x, v = *(const double *)y;
	return u < v ? -1 : u > v;
}

/* p50 of iters round trips on pair 0 (after a tenth as many to warm up). */
static double latency(struct side *a, struct side *b, long iters, const char *label, int pairs)
{
	double *rtt = calloc((size_t)iters, sizeof(*rtt));
	if (!rtt)
		die("memory");
	for (long i = 0; i < iters / 10; i++) {
		round_trip(a, b, 0, NULL);
		if ((i & 31) == 31) {
			drain(a);
			drain(b);
		}
	}
	for (long i = 0; i < iters; i++) {
		round_trip(a, b, 0, &rtt[i]);
		if ((i & 31) == 31) {
			drain(a);
			drain(b);
		}
	}
	drain(a);
	drain(b);
	qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_double);
	double p50 = rtt[iters / 2];
	printf("lat %s pairs=%d size=%ld n=%ld p50=%.2f p99=%.2f us\n", label, pairs, size, iters,
	       p50, rtt[iters * 99 / 100]);
	free(rtt);
	return p50;
}

/* The two latency runs as functions of their own: under callgrind their inclusive costs are
 * the application thread's instructions for each (divide by 1.1 x -i round trips). */
__attribute__((noinline)) static double lat_alone(struct side *a, struct side *b, long iters)
{
	return latency(a, b, iters, "alone", 1);
}

__attribute__((noinline)) static double lat_among(struct side *a, struct side *b, long iters,
						  int pairs)
{
	return latency(a, b, iters, "among", pairs);
}

int main(int argc, char **argv)
{
	const char *dev_name = "roce_lo";
	long nqp = 2000, iters = 2000, use = -1;
	int c;
	while ((c = getopt(argc, argv, "d:n:w:r:s:i:u:h")) != -1) {
		switch (c) {
		case 'd':
			dev_name = optarg;
			break;
		case 'n':
			nqp = atol(optarg);
			break;
		case 'w':
			nwr = atoi(optarg);
			break;
		case 'r':
			ird = atoi(optarg);
			break;
		case 's':
			size = atol(optarg);
			break;
		case 'i':
			iters = atol(optarg);
			break;
		case 'u':
			use = atol(optarg);
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: sr_scale [-d dev] [-n qps] [-w wrs] [-r ird] [-s bytes] "
				"[-i iters] [-u pairs]\n");
			return c == 'h' ? 0 : 2;
		}
	}
	int pairs = (int)(nqp / 2);
	if (pairs < 1 || nwr < 1 || ird < 0 || ird > 255 || size < 1 || iters < 10) {
		fprintf(stderr, "sr_scale: bad arguments\n");
		return 2;
	}
	if (use < 0 || use > pairs)
		use = pairs;
	/* iWARP: a descriptor per QP (its TCP connection). */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)nqp + 64)
		fprintf(stderr, "sr_scale: RLIMIT_NOFILE %llu: iWARP needs a descriptor per QP\n",
			(unsigned long long)rl.rlim_cur);
	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev)
		die("no such device");
	struct side a, b;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	side_open(&a, dev, pairs);
	side_open(&b, dev, pairs);

	/* 1. One pair. */
	a.qps[0] = qp_new(&a);
	b.qps[0] = qp_new(&b);
	qp_connect(&a, a.qps[0], &b, b.qps[0]->qp_num);
	qp_connect(&b, b.qps[0], &a, a.qps[0]->qp_num);
	round_trip(&a, &b, 0, NULL); /* iWARP: the connection is made here */
	double lat1 = lat_alone(&a, &b, iters);

	/* 2. The others. */
	long rss0 = rss_kib();
	size_t heap0 = heap_bytes();
	double t0 = now_us();
	for (int k = 1; k < pairs; k++) {
		a.qps[k] = qp_new(&a);
		b.qps[k] = qp_new(&b);
	}
	double t1 = now_us();
	for (int k = 1; k < pairs; k++) {
		qp_connect(&a, a.qps[k], &b, b.qps[k]->qp_num);
		qp_connect(&b, b.qps[k], &a, a.qps[k]->qp_num);
	}
	double t2 = now_us();
	long rss1 = rss_kib();
	size_t heap1 = heap_bytes();
	long n = 2L * (pairs - 1);
	if (n > 0)
		printf("qps=%ld wr=%d ird=%d create_us_per_qp=%.1f connect_us_per_qp=%.1f "
		       "rss_kib_per_qp=%.2f heap_kib_per_qp=%.2f\n",
		       n, nwr, ird, (t1 - t0) / n, (t2 - t1) / n, (double)(rss1 - rss0) / n,
		       (double)(heap1 - heap0) / 1024.0 / n);

	/* 3. Every pair (or -u of them) carries a message each way. */
	double t3 = now_us();
	for (long u = 0; u < use; u++) {
		int k = (int)(use > 1 ? u * (pairs - 1) / (use - 1) : 0);
		round_trip(&a, &b, k, NULL);
		if ((u & 31) == 31) {
			drain(&a);
			drain(&b);
		}
	}
	drain(&a);
	drain(&b);
	printf("used pairs=%ld us_per_pair=%.1f\n", use, (now_us() - t3) / (double)use);

	/* 4. Pair 0 among them. */
	double latn = lat_among(&a, &b, iters, pairs);
	printf("lat_ratio=%.3f (pairs=%d against 1)\n", latn / lat1, pairs);

	/* 5. Gone. */
	double t4 = now_us();
	for (int k = 0; k < pairs; k++) {
		ibv_destroy_qp(a.qps[k]);
		ibv_destroy_qp(b.qps[k]);
	}
	printf("destroy_us_per_qp=%.1f\n", (now_us() - t4) / (2.0 * pairs));
	side_close(&a);
	side_close(&b);
	ibv_free_device_list(list);
	return 0;
}
