/* sr_perf: RC latency and bandwidth between two processes, on the standard verbs API (it runs
 * on any verbs device). Used by bench/run.sh to state softrdma's figures as ratios to raw
 * sockets measured in the same run.
 *
 *   server: sr_perf -t lat|bw [-d roce_lo] [-p 18700] [-s bytes] [-n iters]
 *   client: same options plus the server's IPv4 address
 *
 * lat: SEND ping-pong of -s bytes (default 100), both sides busy-polling; the client prints
 *      "lat size=100 n=... p50=.. p99=.. p999=.. min=.. avg=.. us" (round trip).
 * wlat: RDMA WRITE ping-pong as ib_write_lat does it: each side writes -s bytes into the
 *      other's buffer and spins on the last byte of its own (the target never calls verbs
 *      to receive: progress is the library's job); the client prints "wlat ..." like lat.
 * bw:  the client RDMA WRITEs -s bytes (default 65536) with 32 outstanding for -n messages;
 *      prints "bw size=65536 n=... secs=... gbps=... msgs_per_sec=...". */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static void die(const char *what)
{
	fprintf(stderr, "sr_perf: %s (%s)\n", what, strerror(errno));
	exit(1);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int side_channel(const char *host, int port)
{
	int fd, one = 1;
	if (host) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
		inet_pton(AF_INET, host, &a.sin_addr);
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
	if (write(fd, out, n) != (ssize_t)n)
		die("side channel");
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)in + got, n - got);
		if (r <= 0)
			die("side channel");
		got += (size_t)r;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
	}
	if (n < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "sr_perf: completion error %s\n", ibv_wc_status_str(wc.status));
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *dev_name = "roce_lo", *test = "lat";
	int port = 18700, c;
	long size = -1, iters = -1;
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
	while ((c = getopt_long(argc, argv, "t:d:p:s:n:h", longopts, NULL)) != -1) {
		switch (c) {
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
			size = atol(optarg);
			break;
		case 'n':
			iters = atol(optarg);
			break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: sr_perf -t lat|wlat|bw [-d dev] [-p port] [-s bytes] [-n "
				"iters] "
				"[server_ip]\n"
				"  -t  lat: SEND ping-pong; wlat: RDMA WRITE ping-pong (target "
				"spins on "
				"memory); bw: 64 KiB RDMA WRITEs\n"
				"  -d  device (default roce_lo; iwarp_lo for iWARP)\n"
				"  without server_ip: act as the server\n");
			return c == 'h' ? 0 : 2;
		}
	}
	int lat = !strcmp(test, "lat"), wlat = !strcmp(test, "wlat");
	if (!lat && !wlat && strcmp(test, "bw")) {
		fprintf(stderr, "sr_perf: -t must be lat, wlat or bw\n");
		return 2;
	}
	if (size < 0)
		size = lat || wlat ? 100 : 65536;
	if (iters < 0)
		iters = 20000;
	const char *host = optind < argc ? argv[optind] : NULL;

	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			dev = list[i];
	if (!dev)
		die("no such device");
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("open device");
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	size_t bytes = (size_t)size * 2 + 64;
	uint8_t *buf = calloc(1, bytes);
	struct ibv_mr *mr =
	    ibv_reg_mr(pd, buf, bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_cq *cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	struct ibv_qp_init_attr qia = {.send_cq = cq,
				       .recv_cq = cq,
				       .qp_type = IBV_QPT_RC,
				       .cap = {.max_send_wr = 64,
					       .max_recv_wr = 64,
					       .max_send_sge = 1,
					       .max_recv_sge = 1,
					       .max_inline_data = 128}};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	if (!pd || !mr || !cq || !qp)
		die("resources");
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	struct ibv_port_attr pa;
	union ibv_gid gid;
	int gidx = -1;
	ibv_query_port(ctx, 1, &pa);
	for (int i = 0; i < pa.gid_tbl_len && gidx < 0; i++)
		if (!ibv_query_gid(ctx, 1, i, &gid) && gid.raw[10] == 0xff)
			gidx = i;
	struct info me = {.qpn = qp->qp_num,
			  .psn = 0x1234,
			  .rkey = mr->rkey,
			  .addr = (uintptr_t)buf},
		    peer;
	memcpy(me.gid, gid.raw, 16);
	int fd = side_channel(host, port);
	exchange(fd, &me, &peer, sizeof(me));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = pa.active_mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)gidx;
	memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me.psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");

	struct ibv_sge ssge = {.addr = (uintptr_t)buf, .length = (uint32_t)size, .lkey = mr->lkey};
	struct ibv_sge rsge = {
	    .addr = (uintptr_t)buf + size, .length = (uint32_t)size, .lkey = mr->lkey};
	struct ibv_recv_wr rwr = {.sg_list = &rsge, .num_sge = 1}, *rbad;
	struct ibv_send_wr swr = {.sg_list = &ssge, .num_sge = 1, .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	char go = 'g', ack;
	if (wlat) {
		/* The last byte of each message carries the iteration number (never 0). */
		volatile uint8_t *mine = buf + size - 1;
		uint8_t *src = buf + size; /* staging: the second half of the buffer */
		swr.opcode = IBV_WR_RDMA_WRITE;
		swr.wr.rdma.remote_addr = peer.addr;
		swr.wr.rdma.rkey = peer.rkey;
		ssge.addr = (uintptr_t)src;
		if (size <= 128)
			swr.send_flags |= IBV_SEND_INLINE;
		exchange(fd, &go, &ack, 1);
		long warm = iters / 10;
		double *rtt = calloc((size_t)iters, sizeof(double));
		for (long i = 0; i < iters + warm; i++) {
			uint8_t tag = (uint8_t)(i % 255 + 1);
			double t0 = now_us();
			if (!host)
				while (*mine != tag) {
				}
			src[size - 1] = tag;
			ibv_post_send(qp, &swr, &sbad);
			poll_one(cq);
			if (host)
				while (*mine != tag) {
				}
			if (host && i >= warm)
				rtt[i - warm] = now_us() - t0;
		}
		if (host) {
			double sum = 0;
			for (long i = 0; i < iters; i++)
				sum += rtt[i];
			qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
			printf("wlat size=%ld n=%ld min=%.2f p50=%.2f p99=%.2f p999=%.2f avg=%.2f "
			       "us\n",
			       size, iters, rtt[0], rtt[iters / 2], rtt[iters * 99 / 100],
			       rtt[iters * 999 / 1000], sum / iters);
		}
		free(rtt);
		exchange(fd, &go, &ack, 1);
	} else if (lat) {
		for (int i = 0; i < 64; i++)
			ibv_post_recv(qp, &rwr, &rbad);
		swr.opcode = IBV_WR_SEND;
		if (size <= 128)
			swr.send_flags |= IBV_SEND_INLINE;
		exchange(fd, &go, &ack, 1);
		long warm = iters / 10;
		double *rtt = calloc((size_t)iters, sizeof(double));
		for (long i = 0; i < iters + warm; i++) {
			double t0 = now_us();
			if (host) {
				ibv_post_send(qp, &swr, &sbad);
				poll_one(cq); /* send completion */
				poll_one(cq); /* the reply */
			} else {
				poll_one(cq); /* the request */
				ibv_post_send(qp, &swr, &sbad);
				poll_one(cq);
			}
			ibv_post_recv(qp, &rwr, &rbad);
			if (host && i >= warm)
				rtt[i - warm] = now_us() - t0;
		}
		if (host) {
			double sum = 0;
			for (long i = 0; i < iters; i++)
				sum += rtt[i];
			qsort(rtt, (size_t)iters, sizeof(double), cmp_double);
			printf(
			    "lat size=%ld n=%ld min=%.2f p50=%.2f p99=%.2f p999=%.2f avg=%.2f us\n",
			    size, iters, rtt[0], rtt[iters / 2], rtt[iters * 99 / 100],
			    rtt[iters * 999 / 1000], sum / iters);
		}
		free(rtt);
	} else {
		exchange(fd, &go, &ack, 1);
		if (host) {
			swr.opcode = IBV_WR_RDMA_WRITE;
			swr.wr.rdma.remote_addr = peer.addr + (uint64_t)size;
			swr.wr.rdma.rkey = peer.rkey;
			long posted = 0, done = 0;
			double t0 = now_us();
			while (done < iters) {
				while (posted < iters && posted - done < 32) {
					if (ibv_post_send(qp, &swr, &sbad))
						die("post_send");
					posted++;
				}
				struct ibv_wc wc[32];
				int n = ibv_poll_cq(cq, 32, wc);
				for (int i = 0; i < n; i++)
					if (wc[i].status != IBV_WC_SUCCESS)
						die("write failed");
				done += n;
			}
			double secs = (now_us() - t0) / 1e6;
			printf("bw size=%ld n=%ld secs=%.3f gbps=%.3f msgs_per_sec=%.0f\n", size,
			       iters, secs, (double)size * iters * 8 / secs / 1e9, iters / secs);
		}
		exchange(fd, &go, &ack, 1); /* the server stays until the client is done */
	}
	close(fd);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	return 0;
}
