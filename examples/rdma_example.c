/* A small verbs program: SEND, RDMA WRITE, RDMA READ, compare-and-swap and fetch-and-add
 * between two processes, every byte verified (atomics only where the device has them: not on
 * iWARP). It uses only the standard verbs API, the way
 * ibv_rc_pingpong does (a TCP connection exchanges QPN, PSN, GID, rkey and address).
 *
 *   server:  rdma_example [-d roce_lo] [-p 18600] [-s 65536]
 *   client:  rdma_example [-d roce_lo] [-p 18600] [-s 65536] 127.0.0.1
 *
 * Exit status 0 only if every check passed on this side. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct peer_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint32_t size;
	uint64_t addr;
	uint8_t gid[16];
};

/* Buffer layout (regions of `size` bytes, each starting on a 64-byte boundary so the atomic
 * target is 8-byte aligned, as atomics require): 0 receive / SEND source, 1 WRITE target,
 * 2 READ source, 3 atomics (8 bytes). */
enum { R_SEND, R_WRITE, R_READ, R_ATOMIC, R_COUNT };

static const char *role = "?";
static uint32_t size = 65536;

static size_t region(int which)
{
	return (size_t)which * ((size + 63) & ~63u);
}

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "rdma_example %s: ", role);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static uint8_t pattern(int which, size_t i)
{
	return (uint8_t)(which * 37 + i * 7 + (i >> 8));
}

static void fill(uint8_t *p, size_t n, int which)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(which, i);
}

static int verify(const uint8_t *p, size_t n, int which, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != pattern(which, i)) {
			fprintf(stderr,
				"rdma_example %s: %s: byte %zu is 0x%02x, expected 0x%02x\n", role,
				what, i, p[i], pattern(which, i));
			return 1;
		}
	}
	printf("%s: %s: %zu bytes verified\n", role, what, n);
	return 0;
}

static int tcp_connect(const char *host, int port)
{
	char service[16];
	snprintf(service, sizeof(service), "%d", port);
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	if (getaddrinfo(host, service, &hints, &res))
		die("cannot resolve %s", host);
	int fd = -1;
	for (int tries = 0; tries < 50 && fd < 0; tries++) {
		fd = socket(res->ai_family, res->ai_socktype, 0);
		if (connect(fd, res->ai_addr, res->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
		usleep(100000); /* the server may not be listening yet */
	}
	freeaddrinfo(res);
	if (fd < 0)
		die("cannot connect to %s:%d", host, port);
	return fd;
}

static int tcp_accept(int port)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	if (bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1))
		die("cannot listen on port %d: %s", port, strerror(errno));
	int fd = accept(ls, NULL, NULL);
	close(ls);
	if (fd < 0)
		die("accept: %s", strerror(errno));
	return fd;
}

static void xfer(int fd, void *out, const void *in, size_t n)
{
	if (in && write(fd, in, n) != (ssize_t)n)
		die("side channel write failed");
	if (out) {
		size_t got = 0;
		while (got < n) {
			ssize_t r = read(fd, (char *)out + got, n - got);
			if (r <= 0)
				die("side channel closed");
			got += (size_t)r;
		}
	}
}

static void sync_point(int fd)
{
	char c = 's', d;
	xfer(fd, &d, &c, 1);
}

static struct ibv_wc wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("poll_cq failed");
		if (n == 1)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			die("no completion within 20 s");
	}
	if (wc.status != IBV_WC_SUCCESS)
		die("work request %llu failed: %s", (unsigned long long)wc.wr_id,
		    ibv_wc_status_str(wc.status));
	return wc;
}

static void post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(qp, wr, &bad);
	if (ret)
		die("post_send: %s", strerror(ret));
}

int main(int argc, char **argv)
{
	const char *devname = "roce_lo";
	int port = 18600;
	uint8_t tclass = 0;
	int c;
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
	while ((c = getopt_long(argc, argv, "d:p:s:c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			devname = optarg;
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 's':
			size = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			tclass = (uint8_t)strtoul(optarg, NULL, 0);
			break;
		default:
			printf("usage: %s [-d device] [-p tcp_port] [-s bytes] [-c traffic_class] "
			       "[server_address]\n"
			       "  without server_address: act as the server\n",
			       argv[0]);
			return c == 'h' ? 0 : 2;
		}
	}
	const char *peer_host = optind < argc ? argv[optind] : NULL;
	role = peer_host ? "client" : "server";
	if (size < 8 || size > (64u << 20))
		die("size must be 8 B .. 64 MiB");

	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev), *dev = NULL;
	for (int i = 0; list && i < ndev; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname))
			dev = list[i];
	if (!dev)
		die("no device %s (see 'softrdma devices')", devname);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("cannot open %s: %s", devname, strerror(errno));
	struct ibv_device_attr dattr;
	if (ibv_query_device(ctx, &dattr))
		die("query_device failed");
	bool atomics = dattr.atomic_cap != IBV_ATOMIC_NONE;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	size_t total = region(R_COUNT);
	uint8_t *buf = aligned_alloc(4096, (total + 4095) & ~(size_t)4095);
	memset(buf, 0, total);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, total,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !mr || !cq)
		die("resource allocation failed: %s", strerror(errno));
	struct ibv_qp_init_attr qia = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	    .sq_sig_all = 1};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	if (!qp)
		die("create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT failed");

	/* The server expects one SEND. */
	struct ibv_sge rsge = {.addr = (uintptr_t)buf, .length = size, .lkey = mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 100, .sg_list = &rsge, .num_sge = 1}, *rbad;
	if (!peer_host && ibv_post_recv(qp, &rwr, &rbad))
		die("post_recv failed");
	if (!peer_host) {
		fill(buf + region(R_READ), size, 3); /* what the client will READ */
		uint64_t v = 100;
		memcpy(buf + region(R_ATOMIC), &v, 8);
	}

	struct ibv_port_attr pa;
	if (ibv_query_port(ctx, 1, &pa))
		die("query_port failed");
	int gid_index = -1;
	union ibv_gid gid;
	for (int i = 0; i < pa.gid_tbl_len && gid_index < 0; i++)
		if (!ibv_query_gid(ctx, 1, i, &gid) && gid.raw[10] == 0xff && gid.raw[11] == 0xff)
			gid_index = i;
	if (gid_index < 0)
		die("%s has no IPv4 GID", devname);
	srand48(getpid() * time(NULL));
	struct peer_info me = {.qpn = qp->qp_num,
			       .psn = (uint32_t)lrand48() & 0xffffff,
			       .rkey = mr->rkey,
			       .size = size,
			       .addr = (uintptr_t)buf},
			 peer;
	memcpy(me.gid, gid.raw, 16);
	int fd = peer_host ? tcp_connect(peer_host, port) : tcp_accept(port);
	xfer(fd, &peer, &me, sizeof(me));
	if (peer.size != size)
		die("peer uses size %u, we use %u", peer.size, size);
	printf("%s: local QPN 0x%06x PSN 0x%06x, remote QPN 0x%06x PSN 0x%06x\n", role, me.qpn,
	       me.psn, peer.qpn, peer.psn);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = pa.active_mtu;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.traffic_class = tclass; /* DSCP << 2 | ECN, into the IP header */
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR failed");
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me.psn;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS failed");
	sync_point(fd);

	int failed = 0;
	if (peer_host) {
		/* The active side. */
		uint8_t *send_src = buf + region(R_SEND);
		uint8_t *write_src = buf + region(R_WRITE);
		uint8_t *read_dst = buf + region(R_READ);
		uint64_t *atomic_dst = (uint64_t *)(buf + region(R_ATOMIC));
		fill(send_src, size, 1);
		fill(write_src, size, 2);
		struct ibv_sge sge = {.lkey = mr->lkey};
		struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1};

		sge.addr = (uintptr_t)send_src;
		sge.length = size;
		wr.wr_id = 1;
		wr.opcode = IBV_WR_SEND;
		post(qp, &wr);
		wait_one(cq);

		wr.wr_id = 2;
		wr.opcode = IBV_WR_RDMA_WRITE;
		sge.addr = (uintptr_t)write_src;
		wr.wr.rdma.remote_addr = peer.addr + region(R_WRITE);
		wr.wr.rdma.rkey = peer.rkey;
		post(qp, &wr);
		wait_one(cq);

		wr.wr_id = 3;
		wr.opcode = IBV_WR_RDMA_READ;
		sge.addr = (uintptr_t)read_dst;
		wr.wr.rdma.remote_addr = peer.addr + region(R_READ);
		post(qp, &wr);
		wait_one(cq);
		failed |= verify(read_dst, size, 3, "RDMA READ");
		if (!atomics) {
			printf(
			    "client: %s has no atomics (iWARP): CMP_SWAP and FETCH_ADD skipped\n",
			    devname);
			goto done;
		}

		wr.wr_id = 4;
		wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
		sge.addr = (uintptr_t)atomic_dst;
		sge.length = 8;
		wr.wr.atomic.remote_addr = peer.addr + region(R_ATOMIC);
		wr.wr.atomic.rkey = peer.rkey;
		wr.wr.atomic.compare_add = 100;
		wr.wr.atomic.swap = 200;
		post(qp, &wr);
		wait_one(cq);
		if (*atomic_dst != 100) {
			fprintf(stderr, "client: CMP_SWAP returned %llu, expected 100\n",
				(unsigned long long)*atomic_dst);
			failed = 1;
		} else {
			printf("client: CMP_SWAP 100 -> 200 returned the old value 100\n");
		}
		wr.wr_id = 5;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.compare_add = 5;
		post(qp, &wr);
		wait_one(cq);
		if (*atomic_dst != 200) {
			fprintf(stderr, "client: FETCH_ADD returned %llu, expected 200\n",
				(unsigned long long)*atomic_dst);
			failed = 1;
		} else {
			printf("client: FETCH_ADD +5 returned the old value 200\n");
		}
	done:
		sync_point(fd); /* the passive side checks its memory now */
	} else {
		struct ibv_wc wc = wait_one(cq);
		if (wc.opcode != IBV_WC_RECV || wc.byte_len != size) {
			fprintf(stderr, "server: receive completion opcode %d, %u bytes\n",
				wc.opcode, wc.byte_len);
			failed = 1;
		}
		failed |= verify(buf + region(R_SEND), size, 1, "SEND received");
		sync_point(fd);
		failed |= verify(buf + region(R_WRITE), size, 2, "RDMA WRITE placed");
		uint64_t v;
		memcpy(&v, buf + region(R_ATOMIC), 8);
		if (!atomics) {
			printf("server: %s has no atomics (iWARP): skipped\n", devname);
		} else if (v != 205) {
			fprintf(stderr, "server: atomic target is %llu, expected 205\n",
				(unsigned long long)v);
			failed = 1;
		} else {
			printf("server: atomic target is 205 after CMP_SWAP and FETCH_ADD\n");
		}
	}
	char mine = failed ? 'F' : 'P', theirs;
	xfer(fd, &theirs, &mine, 1);
	close(fd);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	printf("%s: %s\n", role, failed ? "FAILED" : "all checks passed");
	return failed || theirs != 'P';
}
