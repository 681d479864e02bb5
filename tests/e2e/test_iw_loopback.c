/* iWARP through the verbs API on iwarp_lo: two contexts in one process, connected with the
 * internal listen / accept / connect calls (softrdma.h), then:
 *   - the device looks like an RNIC (transport, node type, no atomics, ORD limits); only RC
 *     QPs; RTR without the path attributes is refused (auto-connect: test_iw_autoconnect);
 *   - set-up failures (accept timeout, connection refused, bad address) leave the QPs in INIT;
 *   - idle connections cost no CPU (the progress threads sleep in epoll);
 *   - SEND, RDMA WRITE and RDMA READ at 0, 1, MULPDU-1, MULPDU, MULPDU+1 bytes, 1 MiB and
 *     16 MiB, every byte checked, every completion's status, opcode and length checked. The
 *     server never polls during a READ: its progress thread answers (passive target);
 *   - SEND with immediate is refused at post (iWARP has no immediate data);
 *   - a READ with a bad rkey completes with the Terminate's status (remote access error), the
 *     WR after it is flushed, and both QPs end in ERR;
 *   - on a second connection, closing the server's context completes the client's posted
 *     receives with flush errors (no hang).
 * Every wait is bounded. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

#include "api/api.h"
#include "check.h"
#include "vutil.h"
#include "io/tcp.h"
#include "softrdma.h"
#include "engine/iw_eng.h"

#define MiB	   (1u << 20)
#define BUF_SIZE   (16 * MiB + 4096)
#define WAIT_MS	   10000
#define CONNECT_MS 5000

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static struct ibv_qp *make_qp(struct side *s)
{
	struct ibv_qp_init_attr qia = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &qia);
	REQUIRE(qp);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ};
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	return qp;
}

static void side_open(struct side *s, struct ibv_device *dev)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ibv_open_device(dev);
	REQUIRE(s->ctx);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 512, NULL, NULL, 0);
	s->buf = calloc(1, BUF_SIZE);
	REQUIRE(s->pd && s->cq && s->buf);
	s->mr =
	    ibv_reg_mr(s->pd, s->buf, BUF_SIZE,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(s->mr);
	s->qp = make_qp(s);
}

static void side_close(struct side *s)
{
	if (s->qp)
		CHECK_EQ(ibv_destroy_qp(s->qp), 0);
	CHECK_EQ(ibv_dereg_mr(s->mr), 0);
	CHECK_EQ(ibv_destroy_cq(s->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(s->pd), 0);
	CHECK_EQ(ibv_close_device(s->ctx), 0);
	free(s->buf);
}

/* Idle connections cost no CPU: the progress threads sleep in epoll (no spinning on a
 * readable socket nobody reads). Returns the process's CPU ms over `ms` of idling. */
static long idle_cpu_ms(int ms)
{
	struct rusage a, b;
	getrusage(RUSAGE_SELF, &a);
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	getrusage(RUSAGE_SELF, &b);
	long us = (b.ru_utime.tv_sec - a.ru_utime.tv_sec) * 1000000L +
		  (b.ru_utime.tv_usec - a.ru_utime.tv_usec) +
		  (b.ru_stime.tv_sec - a.ru_stime.tv_sec) * 1000000L +
		  (b.ru_stime.tv_usec - a.ru_stime.tv_usec);
	return us / 1000;
}

struct accept_job {
	struct ibv_qp *qp;
	int ret;
};

static void *accept_main(void *arg)
{
	struct accept_job *j = arg;
	j->ret = softrdma_iw_accept(j->qp, CONNECT_MS);
	return NULL;
}

/* Connects client qp c to server qp s through the server context's listener. */
static void connect_pair(struct ibv_qp *s, struct ibv_qp *c, int port)
{
	struct accept_job j = {.qp = s, .ret = -2};
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, accept_main, &j) == 0);
	int r = softrdma_iw_connect(c, "127.0.0.1", (uint16_t)port, CONNECT_MS);
	pthread_join(t, NULL);
	REQUIRE(r == 0);
	REQUIRE(j.ret == 0);
	CHECK_EQ(vt_qp_state(s), IBV_QPS_RTS);
	CHECK_EQ(vt_qp_state(c), IBV_QPS_RTS);
	CHECK_EQ(s->state, IBV_QPS_RTS);
}

static void post_recv(struct side *s, uint8_t *addr, uint32_t len, uint64_t id)
{
	vt_post_recv(s->qp, s->mr, addr, len, id);
}

static int post_send(struct side *s, enum ibv_wr_opcode op, uint8_t *addr, uint32_t len,
		     uint64_t raddr, uint32_t rkey, uint64_t id)
{
	return vt_post_send(s->qp, s->mr, op, addr, len, raddr, rkey, id);
}

static void check_wc(const struct ibv_wc *wc, uint64_t id, enum ibv_wc_opcode op,
		     enum ibv_wc_status st)
{
	CHECK_EQ(wc->wr_id, id);
	CHECK_EQ(wc->status, st);
	if (st == IBV_WC_SUCCESS)
		CHECK_EQ(wc->opcode, op);
}

/* The MULPDU a connected QP uses (white box: no verb reports it). It follows the MSS the
 * kernel reports once the MPA exchange is over, so a fresh socket's MSS would be off. */
static uint32_t qp_mulpdu(struct ibv_qp *ibqp)
{
	struct sr_qp *q = (struct sr_qp *)ibqp;
	struct iw_qp_attr at;
	core_lock(q->ctx->core);
	iw_qp_get_attr(q->iqp, &at);
	core_unlock(q->ctx->core);
	return at.mulpdu;
}

/* A loopback port nobody listens on (bound, then closed again). */
static uint16_t closed_port(void)
{
	uint8_t lo[16] = {0};
	lo[10] = lo[11] = 0xff;
	lo[12] = 127;
	lo[15] = 1;
	struct io_tcp_listener *l;
	REQUIRE(io_tcp_listen(lo, 0, 0, NULL, &l) == 0);
	uint16_t port = io_tcp_listener_port(l);
	io_tcp_listener_close(l);
	return port;
}

/* Failed set-ups leave the QPs in INIT, ready for the next try. */
static void connect_errors(struct side *S, struct side *C, int port)
{
	errno = 0;
	CHECK_EQ(softrdma_iw_accept(S->qp, 100), -1); /* nobody connects */
	CHECK_EQ(errno, ETIMEDOUT);
	errno = 0;
	CHECK_EQ(softrdma_iw_connect(C->qp, "127.0.0.1", closed_port(), 2000), -1);
	CHECK_EQ(errno, ECONNREFUSED);
	errno = 0;
	CHECK_EQ(softrdma_iw_connect(C->qp, "localhost", (uint16_t)port, 100), -1);
	CHECK_EQ(errno, EINVAL); /* an address, not a name */
	CHECK_EQ(vt_qp_state(S->qp), IBV_QPS_INIT);
	CHECK_EQ(vt_qp_state(C->qp), IBV_QPS_INIT);
}

static void check_device(struct ibv_device *dev, struct side *s)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	CHECK_EQ(dev->transport_type, IBV_TRANSPORT_IWARP);
	CHECK_EQ(dev->node_type, IBV_NODE_RNIC);
	REQUIRE(ibv_query_device(s->ctx, &da) == 0);
	CHECK_EQ(da.atomic_cap, IBV_ATOMIC_NONE);
	CHECK_EQ(da.max_qp_rd_atom, IW_MAX_ORD);
	REQUIRE(ibv_query_port(s->ctx, 1, &pa) == 0);
	CHECK_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	union ibv_gid gid;
	REQUIRE(ibv_query_gid(s->ctx, 1, 0, &gid) == 0);
	CHECK_EQ(gid.raw[15], 1); /* ::ffff:127.0.0.1 */
	/* Other QP types are not iWARP's. */
	struct ibv_qp_init_attr qia = {
	    .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_UD, .cap = {1, 1, 1, 1, 0}};
	errno = 0;
	CHECK(ibv_create_qp(s->pd, &qia) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	/* RTR without the address vector, peer QPN, ...: nothing to connect to. */
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR};
	CHECK_EQ(ibv_modify_qp(s->qp, &a, IBV_QP_STATE), EINVAL);
}

/* S: server (passive), C: client. */
static void transfers(struct side *S, struct side *C, uint32_t mulpdu)
{
	const uint32_t sizes[] = {0, 1, mulpdu - 1, mulpdu, mulpdu + 1, MiB, 16 * MiB};
	uint64_t id = 1;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		struct ibv_wc wc;
		/* SEND C -> S */
		memset(S->buf, 0, n + 1);
		vt_fill(C->buf, n, (uint32_t)i);
		post_recv(S, S->buf, n, id);
		CHECK_EQ(post_send(C, IBV_WR_SEND, C->buf, n, 0, 0, id + 1), 0);
		wc = vt_wait_wc(C->cq, WAIT_MS);
		check_wc(&wc, id + 1, IBV_WC_SEND, IBV_WC_SUCCESS);
		wc = vt_wait_wc(S->cq, WAIT_MS);
		check_wc(&wc, id, IBV_WC_RECV, IBV_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, n);
		CHECK_MEM(S->buf, C->buf, n);
		CHECK_EQ(S->buf[n], 0);
		id += 2;

		/* WRITE C -> S, then a zero-byte SEND behind it: its arrival means the WRITE
		 * is placed (one stream, in order). */
		memset(S->buf, 0, n + 1);
		vt_fill(C->buf, n, (uint32_t)i + 100);
		post_recv(S, S->buf + BUF_SIZE - 16, 0, id);
		CHECK_EQ(post_send(C, IBV_WR_RDMA_WRITE, C->buf, n, (uintptr_t)S->buf, S->mr->rkey,
				   id + 1),
			 0);
		CHECK_EQ(post_send(C, IBV_WR_SEND, C->buf, 0, 0, 0, id + 2), 0);
		wc = vt_wait_wc(C->cq, WAIT_MS);
		check_wc(&wc, id + 1, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS);
		wc = vt_wait_wc(C->cq, WAIT_MS);
		check_wc(&wc, id + 2, IBV_WC_SEND, IBV_WC_SUCCESS);
		wc = vt_wait_wc(S->cq, WAIT_MS);
		check_wc(&wc, id, IBV_WC_RECV, IBV_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, 0);
		CHECK_MEM(S->buf, C->buf, n);
		CHECK_EQ(S->buf[n], 0);
		id += 3;

		/* READ S -> C: the server's progress thread answers (it never polls here). */
		vt_fill(S->buf, n, (uint32_t)i + 200);
		memset(C->buf, 0, n + 1);
		CHECK_EQ(
		    post_send(C, IBV_WR_RDMA_READ, C->buf, n, (uintptr_t)S->buf, S->mr->rkey, id),
		    0);
		wc = vt_wait_wc(C->cq, WAIT_MS);
		check_wc(&wc, id, IBV_WC_RDMA_READ, IBV_WC_SUCCESS);
		CHECK_EQ(wc.byte_len, n);
		CHECK_MEM(C->buf, S->buf, n);
		CHECK_EQ(C->buf[n], 0);
		id++;
	}
	/* iWARP has no immediate data: refused at post, nothing sent. */
	CHECK_EQ(post_send(C, IBV_WR_SEND_WITH_IMM, C->buf, 4, 0, 0, 999), EINVAL);
	CHECK_EQ(post_send(C, IBV_WR_ATOMIC_FETCH_AND_ADD, C->buf, 8, (uintptr_t)S->buf,
			   S->mr->rkey, 998),
		 EINVAL);
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(C->cq, 1, &wc), 0);
	CHECK_EQ(ibv_poll_cq(S->cq, 1, &wc), 0);
	/* The iWARP engine's counters, per QP: 7 READs answered, 7 + 7 + 7 Sends received. */
	CHECK_EQ(softrdma_counter(NULL, C->qp, "rx_read_resps"), 7);
	CHECK_EQ(softrdma_counter(NULL, S->qp, "rx_read_reqs"), 7);
	CHECK_EQ(softrdma_counter(NULL, S->qp, "rx_sends"), 14);
	/* The zero-length WRITE is counted apart, with the nudges (zero-length Writes too) the
	 * client may have sent as MPA initiator. */
	CHECK_EQ(softrdma_counter(NULL, S->qp, "rx_writes"), 6);
	CHECK_EQ(softrdma_counter(NULL, S->qp, "rx_zero_writes"),
		 1 + softrdma_counter(NULL, C->qp, "tx_nudges"));
	/* The 0 and 1 B SENDs, posted with nothing else outstanding, went the direct way
	 * (iwp_post_send); the 0 and 1 B WRITEs and the zero-byte SENDs behind the WRITEs may
	 * have (when the WRITE before was all out and its completion does not make the post
	 * wait for the next poll). Reads never do. */
	uint64_t direct = softrdma_counter(NULL, C->qp, "tx_direct");
	printf("messages sent the direct way: %llu\n", (unsigned long long)direct);
	CHECK(direct >= 2 && direct <= 4 + 7);
}

/* A READ of a region the rkey does not grant: the server answers with a Terminate. */
static void bad_rkey(struct side *S, struct side *C)
{
	CHECK_EQ(post_send(C, IBV_WR_RDMA_READ, C->buf, 64, (uintptr_t)S->buf, S->mr->rkey ^ 0x5a00,
			   500),
		 0);
	CHECK_EQ(post_send(C, IBV_WR_RDMA_WRITE, C->buf, 64, (uintptr_t)S->buf, S->mr->rkey, 501),
		 0);
	struct ibv_wc wc = vt_wait_wc(C->cq, WAIT_MS);
	check_wc(&wc, 500, IBV_WC_RDMA_READ, IBV_WC_REM_ACCESS_ERR);
	wc = vt_wait_wc(C->cq, WAIT_MS);
	check_wc(&wc, 501, IBV_WC_RDMA_WRITE, IBV_WC_WR_FLUSH_ERR);
	uint64_t stop = vt_now_ms() + WAIT_MS;
	while (vt_qp_state(S->qp) != IBV_QPS_ERR || vt_qp_state(C->qp) != IBV_QPS_ERR) {
		ibv_poll_cq(S->cq, 1, &wc);
		REQUIRE(vt_now_ms() < stop);
	}
	CHECK_EQ(vt_qp_state(S->qp), IBV_QPS_ERR);
	CHECK_EQ(vt_qp_state(C->qp), IBV_QPS_ERR);
	/* Posting in ERR completes at once with a flush. */
	CHECK_EQ(post_send(C, IBV_WR_SEND, C->buf, 1, 0, 0, 502), 0);
	wc = vt_wait_wc(C->cq, WAIT_MS);
	check_wc(&wc, 502, IBV_WC_SEND, IBV_WC_WR_FLUSH_ERR);
}

/* The server's context goes away with the client's receives posted: they are flushed. */
static void peer_close(struct side *S, struct side *C, int port)
{
	CHECK_EQ(ibv_destroy_qp(S->qp), 0);
	CHECK_EQ(ibv_destroy_qp(C->qp), 0);
	S->qp = make_qp(S);
	C->qp = make_qp(C);
	connect_pair(S->qp, C->qp, port);
	for (uint64_t i = 0; i < 4; i++)
		post_recv(C, C->buf + i * 64, 64, 700 + i);
	side_close(S);
	for (uint64_t i = 0; i < 4; i++) {
		struct ibv_wc wc = vt_wait_wc(C->cq, WAIT_MS);
		check_wc(&wc, 700 + i, IBV_WC_RECV, IBV_WC_WR_FLUSH_ERR);
	}
	CHECK_EQ(vt_qp_state(C->qp), IBV_QPS_ERR);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	bool roce = false;
	for (int i = 0; list && i < n; i++) {
		if (!strcmp(ibv_get_device_name(list[i]), "iwarp_lo"))
			dev = list[i];
		if (!strcmp(ibv_get_device_name(list[i]), "roce_lo"))
			roce = true;
	}
	CHECK(roce);
	REQUIRE(dev);

	struct side S, C;
	side_open(&S, dev);
	side_open(&C, dev);
	check_device(dev, &S);
	int port = softrdma_iw_listen(S.ctx, 0);
	REQUIRE(port > 0);
	CHECK_EQ(softrdma_iw_listen(S.ctx, 0), -1); /* once per context */
	CHECK_EQ(errno, EBUSY);
	connect_errors(&S, &C, port);
	connect_pair(S.qp, C.qp, port);
	CHECK(idle_cpu_ms(300) < 60);
	uint32_t mulpdu = qp_mulpdu(S.qp) < qp_mulpdu(C.qp) ? qp_mulpdu(S.qp) : qp_mulpdu(C.qp);
	printf("connected MULPDU %u\n", mulpdu);
	CHECK(mulpdu >= IW_MIN_MULPDU);
	transfers(&S, &C, mulpdu);
	bad_rkey(&S, &C);
	CHECK(idle_cpu_ms(300) < 60);
	peer_close(&S, &C, port);
	side_close(&C);
	ibv_free_device_list(list);
	return check_exit();
}
