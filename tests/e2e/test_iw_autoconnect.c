/* iWARP auto-connect (core/iw_progress.h): QPs on iwarp_lo connected the way socket-exchange
 * programs connect RoCE QPs - ibv_modify_qp to RTR with the peer's GID and QPN, then RTS -
 * with softrdma making the TCP connection and the MPA exchange in the background.
 *   - a SEND posted in RTS before the peer QP exists waits for the connection and arrives;
 *     the QP shows RTS meanwhile;
 *   - SEND, RDMA WRITE and RDMA READ both ways at 0 B, 1 B, 64 KiB and 4 MiB, every byte
 *     checked; both the connecting and the accepting side initiate;
 *   - 6 QP pairs between two contexts at once, with CRC32c required on both sides;
 *   - a QP's peer never comes: after SOFTRDMA_IW_CONNECT_TIMEOUT the QP is in ERR, the
 *     async event is QP_FATAL, posted WRs are flushed (passive and active side);
 *   - a QP pointed at itself is refused (EINVAL); atomics are refused at post;
 *   - a SOFTRDMA_IW_PORT that is not a TCP port fails QP creation (EINVAL);
 *   - garbage on the rendezvous port (not MPA, a foreign MPA Request, a Request for a QPN
 *     slot no process owns or a QP not in RTR) is closed and counted, and QPs keep
 *     connecting;
 *   - forged Requests (right address and QPNs, wrong PSNs) are closed whether they come
 *     while the QP is in RTR (those it cannot check yet wait, 16 per source address, no
 *     more) or in RTS, and the real peer connects; a QP that stays in RTR (receive only)
 *     connects to one in RTS, either side connecting; the Request carries the initiator's
 *     PSNs, and a Reply with the wrong ones is refused by the initiator;
 *   - between processes: two passive processes listen on the rendezvous port (SO_REUSEPORT);
 *     16 connections from a third are spread over them by the kernel, so some land in the
 *     wrong process and are passed to the owner (counted): every message arrives.
 * The rendezvous port is random per run (SOFTRDMA_IW_PORT), so parallel runs do not meet.
 * Every wait is bounded. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "nobody.h"
#include "io/tcp.h"
#include "vutil.h"
#include "softrdma.h"

#define MiB	 (1u << 20)
#define BUF_SIZE (8 * MiB + 4096)
#define WAIT_MS	 15000
#define NPAIR	 6
#define NFWD	 8 /* QPs per passive child in the multi-process case */

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	uint8_t gid[16];
};

static void dev_open(struct dev *d, size_t bufsize)
{
	memset(d, 0, sizeof(*d));
	d->ctx = ibv_open_device(vt_find_dev("iwarp_lo"));
	REQUIRE(d->ctx);
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = ibv_create_cq(d->ctx, 1024, NULL, NULL, 0);
	d->buf = calloc(1, bufsize);
	REQUIRE(d->pd && d->cq && d->buf);
	d->mr =
	    ibv_reg_mr(d->pd, d->buf, bufsize,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	REQUIRE(d->mr);
	union ibv_gid g;
	REQUIRE(ibv_query_gid(d->ctx, 1, 0, &g) == 0);
	memcpy(d->gid, g.raw, 16);
}

static void dev_close(struct dev *d)
{
	CHECK_EQ(ibv_dereg_mr(d->mr), 0);
	CHECK_EQ(ibv_destroy_cq(d->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(d->pd), 0);
	CHECK_EQ(ibv_close_device(d->ctx), 0);
	free(d->buf);
}

static struct ibv_qp *qp_new(struct dev *d)
{
	struct ibv_qp_init_attr qia = {
	    .send_cq = d->cq,
	    .recv_cq = d->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(d->pd, &qia);
	REQUIRE(qp);
	/* As perftest: REMOTE_ATOMIC is accepted on iWARP (and means nothing). */
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags =
				    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC};
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	return qp;
}

/* The PSN each QP announces (what ibv_rc_pingpong draws at random and sends its peer). */
static uint32_t psn_of(uint32_t qpn)
{
	return (qpn * 2654435761u) & 0xFFFFFF;
}

/* INIT -> RTR, expecting the peer's SQ PSN rq_psn. */
static int qp_rtr(struct ibv_qp *qp, const uint8_t peer_gid[16], uint32_t peer_qpn, uint32_t rq_psn)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR,
				.path_mtu = IBV_MTU_1024,
				.dest_qp_num = peer_qpn,
				.rq_psn = rq_psn,
				.max_dest_rd_atomic = 1,
				.min_rnr_timer = 12,
				.ah_attr = {.is_global = 1, .port_num = 1}};
	memcpy(a.ah_attr.grh.dgid.raw, peer_gid, 16);
	a.ah_attr.grh.hop_limit = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static void qp_rts(struct ibv_qp *qp, uint32_t sq_psn)
{
	struct ibv_qp_attr b = {.qp_state = IBV_QPS_RTS,
				.timeout = 14,
				.retry_cnt = 7,
				.rnr_retry = 7,
				.sq_psn = sq_psn,
				.max_rd_atomic = 1};
	REQUIRE(ibv_modify_qp(qp, &b,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

/* INIT -> RTR -> RTS as ibv_rc_pingpong does it, with the PSNs psn_of gives both QPs.
 * Returns ibv_modify_qp's result for RTR. */
static int qp_connect(struct ibv_qp *qp, const uint8_t peer_gid[16], uint32_t peer_qpn)
{
	int r = qp_rtr(qp, peer_gid, peer_qpn, psn_of(peer_qpn));
	if (r)
		return r;
	qp_rts(qp, psn_of(qp->qp_num));
	return 0;
}

/* Buffer regions: 0 send source / recv target, 1 write / read area. */
#define R_MSG  0
#define R_RDMA (4 * MiB + 1024)

/* One SEND, WRITE and READ from `from` to `to` at len bytes, every byte checked. */
static void transfers(struct dev *df, struct ibv_qp *from, struct dev *dt, struct ibv_qp *to,
		      uint32_t len, uint32_t seed)
{
	uint8_t *src = df->buf + R_MSG, *dst = dt->buf + R_MSG;
	vt_fill(src, len, seed);
	memset(dst, 0, len + 1);
	vt_post_recv(to, dt->mr, dst, len + 1, 100);
	REQUIRE(vt_post_send(from, df->mr, IBV_WR_SEND, src, len, 0, 0, 1) == 0);
	struct ibv_wc w = vt_wait_wc(df->cq, WAIT_MS);
	CHECK_EQ(w.status, IBV_WC_SUCCESS);
	CHECK_EQ(w.wr_id, 1);
	w = vt_wait_wc(dt->cq, WAIT_MS);
	CHECK_EQ(w.status, IBV_WC_SUCCESS);
	CHECK_EQ(w.opcode, IBV_WC_RECV);
	CHECK_EQ(w.byte_len, len);
	CHECK_MEM(dst, src, len);

	/* WRITE src -> to's RDMA area, then READ it back into from's RDMA area. */
	uint8_t *rsrc = df->buf + R_MSG, *tgt = dt->buf + R_RDMA, *back = df->buf + R_RDMA;
	vt_fill(rsrc, len, seed + 1);
	memset(tgt, 0, len + 8);
	REQUIRE(vt_post_send(from, df->mr, IBV_WR_RDMA_WRITE, rsrc, len, (uintptr_t)tgt,
			     dt->mr->rkey, 2) == 0);
	w = vt_wait_wc(df->cq, WAIT_MS);
	CHECK_EQ(w.status, IBV_WC_SUCCESS);
	CHECK_EQ(w.opcode, IBV_WC_RDMA_WRITE);
	/* A WRITE completes when its bytes are handed to TCP (iWARP, as siw): it is known to
	 * be placed once the READ behind it on the same stream has come back. */
	memset(back, 0xEE, len);
	REQUIRE(vt_post_send(from, df->mr, IBV_WR_RDMA_READ, back, len, (uintptr_t)tgt,
			     dt->mr->rkey, 3) == 0);
	w = vt_wait_wc(df->cq, WAIT_MS);
	CHECK_EQ(w.status, IBV_WC_SUCCESS);
	CHECK_EQ(w.opcode, IBV_WC_RDMA_READ);
	CHECK_EQ(w.byte_len, len);
	CHECK_MEM(back, rsrc, len);
	CHECK_MEM(tgt, rsrc, len);
	CHECK_EQ(tgt[len], 0); /* nothing past the end */
}

static uint64_t counter(struct ibv_context *ctx, const char *name)
{
	uint64_t v = softrdma_counter(ctx, NULL, name);
	REQUIRE(v != UINT64_MAX);
	return v;
}

/* Sends bytes to the rendezvous port from a plain socket (on 127.0.0.1); returns it. */
static int forge(const void *bytes, size_t n)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(fd >= 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)atoi(getenv("SOFTRDMA_IW_PORT")))};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(write(fd, bytes, n) == (ssize_t)n);
	return fd;
}

/* Whether the listener closed fd (EOF or reset) without an answer within ms. */
static bool closed_within(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, ms) != 1)
		return false;
	char buf[64];
	return read(fd, buf, sizeof(buf)) <= 0;
}

/* Sends bytes, then waits (bounded) for the listener to close the connection. */
static void hostile(const void *bytes, size_t n)
{
	int fd = forge(bytes, n);
	CHECK(closed_within(fd, 5000));
	close(fd);
}

static uint32_t get_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void put_be32(uint8_t *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (24 - 8 * i));
}

#define HAS_SQ 0x01 /* the block's flags: the sender is in RTS, its SQ PSN is there */

/* An MPA revision 2 Request with the auto-connect block: QPNs, flags, the initiator's SQ and
 * RQ PSNs, version. */
static size_t mpa_request(uint8_t *b, uint32_t dst, uint32_t src, uint8_t flags, uint32_t sq,
			  uint32_t rq, uint8_t version)
{
	memcpy(b, "MPA ID Req Frame", 16);
	b[16] = 0x10; /* enhanced: the IRD/ORD block follows */
	b[17] = 2;
	b[18] = 0;
	b[19] = 28; /* IRD/ORD block + 24 */
	memset(b + 20, 0, 28);
	b[21] = 1; /* IRD 1, ORD 1, peer-to-peer off */
	b[23] = 1;
	memcpy(b + 24, "sRDV", 4);
	b[28] = version;
	b[29] = flags;
	put_be32(b + 32, dst);
	put_be32(b + 36, src);
	put_be32(b + 40, sq);
	put_be32(b + 44, rq);
	return 48;
}

static void test_hostile(struct dev *listener, struct ibv_qp *qp)
{
	uint64_t not_ours = counter(listener->ctx, "iw_rdv_drop_not_ours");
	uint64_t pass_failed = counter(listener->ctx, "iw_rdv_pass_failed");
	uint64_t unmatched = counter(listener->ctx, "iw_rdv_drop_unmatched");
	static const char http[] = "GET / HTTP/1.0\r\n\r\n";
	hostile(http, sizeof(http) - 1);
	uint8_t req[64];
	size_t n = mpa_request(req, 0x010001, 1, 0, 0, 0, 9); /* a version we do not speak */
	hostile(req, n);
	n = mpa_request(req, 0x010001, 1, 0, 0, 0, 1); /* the version before PSNs */
	hostile(req, n);
	n = mpa_request(req, 0xC80001, 1, 0, 0, 0, 2); /* slot 200: nobody */
	hostile(req, n);
	/* The listener's slot, a QPN none of its QPs has in RTR: refused at once. */
	n = mpa_request(req, (qp->qp_num & 0xFF0000) | 0xFFFF, 1, 0, 0, 0, 2);
	hostile(req, n);
	CHECK_EQ(counter(listener->ctx, "iw_rdv_drop_not_ours"), not_ours + 3);
	CHECK_EQ(counter(listener->ctx, "iw_rdv_pass_failed"), pass_failed + 1);
	CHECK_EQ(counter(listener->ctx, "iw_rdv_drop_unmatched"), unmatched + 1);
}

static void test_pair(void)
{
	struct dev A, B;
	dev_open(&A, BUF_SIZE);
	dev_open(&B, BUF_SIZE);
	struct ibv_qp *qa = qp_new(&A), *qb = qp_new(&B);
	CHECK(qa->qp_num != qb->qp_num);
	CHECK((qa->qp_num >> 16) != (qb->qp_num >> 16)); /* one slot per context */

	/* A goes to RTS and sends before B's QP is even in RTR. */
	REQUIRE(qp_connect(qa, B.gid, qb->qp_num) == 0);
	CHECK_EQ(vt_qp_state(qa), IBV_QPS_RTS);
	CHECK_EQ(qa->state, IBV_QPS_RTS);
	vt_fill(A.buf, 1000, 7);
	REQUIRE(vt_post_send(qa, A.mr, IBV_WR_SEND, A.buf, 1000, 0, 0, 50) == 0);
	struct timespec ts = {0, 50 * 1000000};
	nanosleep(&ts, NULL);
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(A.cq, 1, &wc), 0); /* nothing can have completed */
	vt_post_recv(qb, B.mr, B.buf, 1000, 51);
	REQUIRE(qp_connect(qb, A.gid, qa->qp_num) == 0);
	wc = vt_wait_wc(A.cq, WAIT_MS);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 50);
	wc = vt_wait_wc(B.cq, WAIT_MS);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 1000);
	CHECK_MEM(B.buf, A.buf, 1000);
	CHECK_EQ(vt_qp_state(qb), IBV_QPS_RTS);
	/* A's QPN is the lower: A connected, B accepted. */
	CHECK_EQ(counter(A.ctx, "iw_rdv_established_active"), 1);
	CHECK_EQ(counter(B.ctx, "iw_rdv_established_passive"), 1);
	/* B listens (its QPNs are the higher): hostile peers on its port change nothing. */
	test_hostile(&B, qb);

	static const uint32_t sizes[] = {0, 1, 65536, 4 * MiB};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		transfers(&A, qa, &B, qb, sizes[i], (uint32_t)i * 10);
		transfers(&B, qb, &A, qa, sizes[i], (uint32_t)i * 10 + 5);
	}
	/* Atomics: iWARP has none; refused at post, as on siw. */
	CHECK_EQ(vt_post_send(qa, A.mr, IBV_WR_ATOMIC_FETCH_AND_ADD, A.buf, 8, (uintptr_t)B.buf,
			      B.mr->rkey, 9),
		 EINVAL);
	/* A QP aimed at itself. */
	struct ibv_qp *self = qp_new(&A);
	CHECK_EQ(qp_connect(self, A.gid, self->qp_num), EINVAL);
	CHECK_EQ(vt_qp_state(self), IBV_QPS_INIT);
	CHECK_EQ(ibv_destroy_qp(self), 0);

	/* Several pairs at once, some still connecting while others start. */
	struct ibv_qp *pa[NPAIR], *pb[NPAIR];
	for (int i = 0; i < NPAIR; i++) {
		pa[i] = qp_new(&A);
		pb[i] = qp_new(&B);
	}
	for (int i = 0; i < NPAIR; i++) {
		/* Alternate which side goes first. */
		struct ibv_qp *first = i % 2 ? pb[i] : pa[i], *second = i % 2 ? pa[i] : pb[i];
		const uint8_t *g1 = i % 2 ? A.gid : B.gid, *g2 = i % 2 ? B.gid : A.gid;
		REQUIRE(qp_connect(first, g1, second->qp_num) == 0);
		REQUIRE(qp_connect(second, g2, first->qp_num) == 0);
	}
	for (int i = 0; i < NPAIR; i++) {
		uint8_t *dst = B.buf + 64 * (size_t)i;
		vt_post_recv(pb[i], B.mr, dst, 64, 200 + (uint64_t)i);
		vt_fill(A.buf + 4096 + 64 * (size_t)i, 64, 300 + (uint32_t)i);
		REQUIRE(vt_post_send(pa[i], A.mr, IBV_WR_SEND, A.buf + 4096 + 64 * (size_t)i, 64, 0,
				     0, 400 + (uint64_t)i) == 0);
	}
	int got = 0;
	for (int i = 0; i < 2 * NPAIR; i++) {
		struct ibv_wc w = vt_wait_wc(i < NPAIR ? A.cq : B.cq, WAIT_MS);
		CHECK_EQ(w.status, IBV_WC_SUCCESS);
		got++;
	}
	CHECK_EQ(got, 2 * NPAIR);
	for (int i = 0; i < NPAIR; i++)
		CHECK_MEM(B.buf + 64 * (size_t)i, A.buf + 4096 + 64 * (size_t)i, 64);
	CHECK_EQ(counter(A.ctx, "iw_rdv_timeouts") + counter(B.ctx, "iw_rdv_timeouts"), 0);
	for (int i = 0; i < NPAIR; i++) {
		CHECK_EQ(ibv_destroy_qp(pa[i]), 0);
		CHECK_EQ(ibv_destroy_qp(pb[i]), 0);
	}
	CHECK_EQ(ibv_destroy_qp(qa), 0);
	CHECK_EQ(ibv_destroy_qp(qb), 0);
	dev_close(&A);
	dev_close(&B);
}

static uint64_t counter_wait(struct ibv_context *ctx, const char *name, uint64_t at_least)
{
	uint64_t v = 0;
	for (int i = 0; i < 500 && (v = counter(ctx, name)) < at_least; i++) {
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
	return v;
}

#define PARK_PER_PEER 16 /* iw_rdv.c */

/* Someone who knows the address and both QPNs (all guessable) but not the PSNs the two
 * applications exchanged gets no connection (so no access to the QP's memory), whether it
 * comes while the QP waits in RTR or once it is in RTS, and it cannot fill the table. */
static void test_forged(void)
{
	struct dev A, B;
	dev_open(&A, BUF_SIZE);
	dev_open(&B, BUF_SIZE);
	struct ibv_qp *qa = qp_new(&A), *qb = qp_new(&B);
	REQUIRE(qa->qp_num < qb->qp_num); /* A connects, B listens */
	uint32_t pa = psn_of(qa->qp_num), pb = psn_of(qb->qp_num);
	uint64_t bad = counter(B.ctx, "iw_rdv_drop_bad_psn");
	uint64_t other = counter(B.ctx, "iw_rdv_drop_other");

	/* B in RTR knows A's SQ PSN: a wrong one is refused at once. */
	REQUIRE(qp_rtr(qb, A.gid, qa->qp_num, pa) == 0);
	uint8_t req[64];
	size_t n = mpa_request(req, qb->qp_num, qa->qp_num, HAS_SQ, pa ^ 0x800, 0, 2);
	hostile(req, n);
	CHECK_EQ(counter(B.ctx, "iw_rdv_drop_bad_psn"), bad + 1);
	/* Requests from an initiator in RTR only (no SQ PSN) wait for B's RTS, at most 16
	 * from one address. */
	n = mpa_request(req, qb->qp_num, qa->qp_num, 0, 0, pb ^ 0x800, 2);
	int fd[PARK_PER_PEER + 1];
	for (int i = 0; i <= PARK_PER_PEER; i++)
		fd[i] = forge(req, n);
	CHECK_EQ(counter_wait(B.ctx, "iw_rdv_drop_other", other + 1), other + 1);
	struct timespec ts = {0, 100 * 1000000};
	nanosleep(&ts, NULL);
	int closed = 0;
	for (int i = 0; i <= PARK_PER_PEER; i++)
		closed += closed_within(fd[i], 0);
	CHECK_EQ(closed, 1); /* one too many */
	/* RTS: B knows its SQ PSN; each waiting Request names another: closed. */
	qp_rts(qb, pb);
	closed = 0;
	for (int i = 0; i <= PARK_PER_PEER; i++) {
		closed += closed_within(fd[i], 5000);
		close(fd[i]);
	}
	CHECK_EQ(closed, PARK_PER_PEER + 1);
	CHECK_EQ(counter(B.ctx, "iw_rdv_drop_bad_psn"), bad + 1 + PARK_PER_PEER);
	/* In RTS, refused at once: SQ PSN 0; the right SQ PSN with a wrong RQ PSN, or without
	 * an SQ PSN; and the right PSNs from the wrong QPN. */
	n = mpa_request(req, qb->qp_num, qa->qp_num, HAS_SQ, 0, pb, 2);
	hostile(req, n);
	n = mpa_request(req, qb->qp_num, qa->qp_num, HAS_SQ, pa, pb + 1, 2);
	hostile(req, n);
	n = mpa_request(req, qb->qp_num, qa->qp_num, 0, 0, 0, 2);
	hostile(req, n);
	CHECK_EQ(counter(B.ctx, "iw_rdv_drop_bad_psn"), bad + 4 + PARK_PER_PEER);
	uint64_t unmatched = counter(B.ctx, "iw_rdv_drop_unmatched");
	n = mpa_request(req, qb->qp_num, qa->qp_num + 1, HAS_SQ, pa, pb, 2);
	hostile(req, n);
	CHECK_EQ(counter(B.ctx, "iw_rdv_drop_unmatched"), unmatched + 1);
	/* The real peer still connects. */
	REQUIRE(qp_connect(qa, B.gid, qb->qp_num) == 0);
	transfers(&A, qa, &B, qb, 1000, 77);
	CHECK_EQ(counter(B.ctx, "iw_rdv_established_passive"), 1);
	CHECK_EQ(ibv_destroy_qp(qa), 0);
	CHECK_EQ(ibv_destroy_qp(qb), 0);
	dev_close(&A);
	dev_close(&B);
}

/* Receive-only QPs (perftest's bandwidth server stays in RTR): the pair connects when the
 * other QP reaches RTS, whichever side connects. */
static void test_rtr_only(void)
{
	struct dev A, B;
	dev_open(&A, BUF_SIZE);
	dev_open(&B, BUF_SIZE);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *qa = qp_new(&A), *qb = qp_new(&B);
		REQUIRE(qa->qp_num < qb->qp_num); /* A connects */
		struct ibv_qp *rx = i ? qb : qa, *tx = i ? qa : qb;
		struct dev *drx = i ? &B : &A, *dtx = i ? &A : &B;
		REQUIRE(qp_rtr(rx, dtx->gid, tx->qp_num, psn_of(tx->qp_num)) == 0);
		REQUIRE(qp_connect(tx, drx->gid, rx->qp_num) == 0);
		vt_post_recv(rx, drx->mr, drx->buf, 64, 1);
		vt_fill(dtx->buf, 64, 5 + (uint32_t)i);
		REQUIRE(vt_post_send(tx, dtx->mr, IBV_WR_SEND, dtx->buf, 64, 0, 0, 2) == 0);
		CHECK_EQ(vt_wait_wc(dtx->cq, WAIT_MS).status, IBV_WC_SUCCESS);
		CHECK_EQ(vt_wait_wc(drx->cq, WAIT_MS).status, IBV_WC_SUCCESS);
		CHECK_MEM(drx->buf, dtx->buf, 64);
		CHECK_EQ(ibv_destroy_qp(qa), 0);
		CHECK_EQ(ibv_destroy_qp(qb), 0);
	}
	dev_close(&A);
	dev_close(&B);
}

/* A responder on the rendezvous port that the test plays itself (a plain socket that answers
 * MPA, on port + 20000): *lfd listens, C is opened with a QP that connects to it. */
static struct ibv_qp *fake_listen(struct dev *C, int *lfd)
{
	uint16_t port = (uint16_t)(atoi(getenv("SOFTRDMA_IW_PORT")) + 20000);
	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	REQUIRE(*lfd >= 0);
	int one = 1;
	setsockopt(*lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(bind(*lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(*lfd, 8) == 0);
	char *saved = strdup(getenv("SOFTRDMA_IW_PORT"));
	char pbuf[16];
	snprintf(pbuf, sizeof(pbuf), "%u", port);
	setenv("SOFTRDMA_IW_PORT", pbuf, 1);
	dev_open(C, 1 << 16);
	struct ibv_qp *qp = qp_new(C); /* reads the port */
	setenv("SOFTRDMA_IW_PORT", saved, 1);
	free(saved);
	return qp;
}

/* Accepts the next connection and reads its 48-byte Request into b. Returns the socket, or
 * -1 (closed) when fewer bytes came. */
static int fake_accept(int lfd, uint8_t b[48])
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};
	REQUIRE(poll(&p, 1, 5000) == 1);
	int c = accept(lfd, NULL, NULL);
	REQUIRE(c >= 0);
	struct timeval tv = {5, 0};
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	size_t got = 0;
	while (got < 48) {
		ssize_t r = read(c, b + got, 48 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got == 48)
		return c;
	close(c);
	return -1;
}

/* Answers Request b on fd with a Reply: CRC, enhanced, the IRD/ORD words mirrored, the
 * block of a responder in RTS with SQ PSN sq and RQ PSN rq. Returns send's result. */
static ssize_t fake_reply(int fd, const uint8_t b[48], uint32_t sq, uint32_t rq)
{
	uint8_t rep[40] = "MPA ID Rep Frame";
	rep[16] = 0x40 | 0x10;
	rep[17] = 2;
	rep[19] = 20;
	memcpy(rep + 20, b + 20, 4);
	memcpy(rep + 24, "sRDV", 4);
	rep[28] = 2;
	rep[29] = HAS_SQ;
	put_be32(rep + 32, sq);
	put_be32(rep + 36, rq);
	return send(fd, rep, sizeof(rep), MSG_NOSIGNAL);
}

/* The initiator checks the Reply: a responder whose PSNs are not the ones the application
 * named gets no connection; the Request carries the initiator's PSNs. */
static void test_fake_responder(void)
{
	struct dev C;
	int lfd;
	struct ibv_qp *qp = fake_listen(&C, &lfd);
	const uint32_t peer = 0xFE0001, rq = 0x111111, sq = 0x222222;
	REQUIRE(qp_rtr(qp, C.gid, peer, rq) == 0); /* we connect: our QPN is the lower */
	qp_rts(qp, sq);
	for (int round = 0; round < 2; round++) {
		/* Connections until one whose Request has our SQ PSN (one sent in RTR may come
		 * first and be dropped by C). */
		int fd = -1;
		uint8_t b[48];
		for (int tries = 0; tries < 20 && fd < 0; tries++) {
			int c = fake_accept(lfd, b);
			if (c >= 0 && (b[29] & HAS_SQ))
				fd = c;
			else if (c >= 0)
				close(c);
		}
		REQUIRE(fd >= 0);
		CHECK_MEM(b, "MPA ID Req Frame", 16);
		CHECK_EQ(b[19], 28);
		CHECK_MEM(b + 24, "sRDV", 4);
		CHECK_EQ(get_be32(b + 32), peer);
		CHECK_EQ(get_be32(b + 36), qp->qp_num);
		CHECK_EQ(get_be32(b + 40), sq);
		CHECK_EQ(get_be32(b + 44), rq);
		CHECK(b[16] & 0x10);
		uint64_t bad = counter(C.ctx, "iw_rdv_drop_bad_psn");
		/* The responder's SQ PSN: C's RQ PSN, or not. */
		REQUIRE(fake_reply(fd, b, round ? rq : rq + 1, sq) == 40);
		if (round == 0) {
			CHECK_EQ(counter_wait(C.ctx, "iw_rdv_drop_bad_psn", bad + 1), bad + 1);
			CHECK(closed_within(fd, 5000));
			CHECK_EQ(counter(C.ctx, "iw_rdv_established_active"), 0);
		} else {
			CHECK_EQ(counter_wait(C.ctx, "iw_rdv_established_active", 1), 1);
			CHECK_EQ(counter(C.ctx, "iw_rdv_drop_bad_psn"), bad);
		}
		close(fd);
	}
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dev_close(&C);
	close(lfd);
}

/* The initiator's Request went out in RTR (no SQ PSN), and the application moved the QP to
 * RTS before the Reply came: a responder in RTS may have accepted that Request already (it
 * checked the initiator's RQ PSN), so the initiator must not close it: the Reply still
 * establishes the connection. (Closing it reset the responder's QP: ERR, flushed work.) */
static void test_rts_before_reply(void)
{
	struct dev C;
	int lfd;
	struct ibv_qp *qp = fake_listen(&C, &lfd);
	const uint32_t peer = 0xFE0001, rq = 0x333333, sq = 0x444444;
	REQUIRE(qp_rtr(qp, C.gid, peer, rq) == 0);
	uint8_t b[48];
	int fd = fake_accept(lfd, b);
	REQUIRE(fd >= 0);
	CHECK_EQ(b[29] & HAS_SQ, 0); /* sent in RTR */
	CHECK_EQ(get_be32(b + 44), rq);
	qp_rts(qp, sq);
	CHECK_EQ(fake_reply(fd, b, rq, sq), 40);
	CHECK_EQ(counter_wait(C.ctx, "iw_rdv_established_active", 1), 1);
	CHECK(!closed_within(fd, 200)); /* the connection lives on */
	struct ibv_qp_attr at;
	struct ibv_qp_init_attr ia;
	REQUIRE(ibv_query_qp(qp, &at, IBV_QP_STATE, &ia) == 0);
	CHECK_EQ(at.qp_state, IBV_QPS_RTS);
	close(fd);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dev_close(&C);
	close(lfd);
}

/* The peer never comes: ERR, QP_FATAL, flushed WRs. peer_qpn below ours makes us the
 * accepting side; above (in a slot nobody owns), the connecting side. */
static void test_timeout(uint32_t peer_qpn, bool expect_active)
{
	struct dev A;
	dev_open(&A, 1 << 16);
	struct ibv_qp *qp = qp_new(&A);
	uint64_t t0 = vt_now_ms();
	REQUIRE(qp_connect(qp, A.gid, peer_qpn) == 0);
	vt_post_recv(qp, A.mr, A.buf, 64, 1);
	REQUIRE(vt_post_send(qp, A.mr, IBV_WR_SEND, A.buf + 64, 8, 0, 0, 2) == 0);
	struct ibv_async_event ev;
	REQUIRE(ibv_get_async_event(A.ctx, &ev) == 0); /* blocks until the timeout */
	CHECK_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
	CHECK(ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	uint64_t took = vt_now_ms() - t0;
	CHECK(took >= 250 && took < 5000);
	CHECK_EQ(vt_qp_state(qp), IBV_QPS_ERR);
	int flushed = 0;
	for (int i = 0; i < 2; i++) {
		struct ibv_wc w = vt_wait_wc(A.cq, WAIT_MS);
		CHECK_EQ(w.status, IBV_WC_WR_FLUSH_ERR);
		flushed++;
	}
	CHECK_EQ(flushed, 2);
	CHECK_EQ(counter(A.ctx, "iw_rdv_timeouts"), 1);
	if (expect_active)
		CHECK(counter(A.ctx, "iw_rdv_retries") > 0);
	CHECK_EQ(ibv_destroy_qp(qp), 0);
	dev_close(&A);
}

/* ---- between processes ---- */

struct msg {
	uint32_t qpn[NFWD];
	uint64_t passed_in;
};

static void xwrite(int fd, const void *p, size_t n)
{
	REQUIRE(write(fd, p, n) == (ssize_t)n);
}

static void xread(int fd, void *p, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		REQUIRE(r > 0);
		got += (size_t)r;
	}
}

/* A passive child: NFWD QPs aimed at the parent's, each receives one SEND and checks it. */
static int child(int rd, int wr, const uint32_t parent_qpn[NFWD], int idx)
{
	struct dev D;
	dev_open(&D, 1 << 16);
	struct ibv_qp *qp[NFWD];
	struct msg m = {0};
	for (int i = 0; i < NFWD; i++) {
		qp[i] = qp_new(&D);
		m.qpn[i] = qp[i]->qp_num;
		vt_post_recv(qp[i], D.mr, D.buf + 128 * (size_t)i, 128, (uint64_t)i);
	}
	/* Tell the parent our QPNs (it aims its QPs at them), then go to RTR / RTS. */
	for (int i = 0; i < NFWD; i++)
		REQUIRE(qp_connect(qp[i], D.gid, parent_qpn[idx * NFWD + i]) == 0);
	xwrite(wr, &m, sizeof(m));
	for (int i = 0; i < NFWD; i++) {
		struct ibv_wc w = vt_wait_wc(D.cq, WAIT_MS);
		CHECK_EQ(w.status, IBV_WC_SUCCESS);
		CHECK_EQ(w.byte_len, 100);
		uint8_t want[100];
		vt_fill(want, 100, 1000 + (uint32_t)(idx * NFWD) + (uint32_t)w.wr_id);
		CHECK_MEM(D.buf + 128 * w.wr_id, want, 100);
	}
	m.passed_in = counter(D.ctx, "iw_rdv_passed_in");
	xwrite(wr, &m, sizeof(m));
	char c;
	xread(rd, &c, 1); /* the parent has its completions: tear down */
	for (int i = 0; i < NFWD; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	dev_close(&D);
	return check_exit();
}

static void test_processes(void)
{
	/* The parent's context first: the lowest slot, so its QPs connect (active) and the
	 * children's accept. */
	struct dev P;
	dev_open(&P, 1 << 16);
	struct ibv_qp *qp[2 * NFWD];
	uint32_t qpn[2 * NFWD];
	for (int i = 0; i < 2 * NFWD; i++) {
		qp[i] = qp_new(&P);
		qpn[i] = qp[i]->qp_num;
	}
	int up[2][2], down[2][2];
	pid_t pid[2];
	for (int c = 0; c < 2; c++) {
		REQUIRE(pipe(up[c]) == 0 && pipe(down[c]) == 0);
		pid[c] = fork();
		REQUIRE(pid[c] >= 0);
		if (pid[c] == 0) {
			alarm(60); /* never outlive a hung parent */
			_exit(child(down[c][0], up[c][1], qpn, c));
		}
	}
	struct msg m[2];
	for (int c = 0; c < 2; c++)
		xread(up[c][0], &m[c], sizeof(m[c]));
	/* Both children listen now: connect to all 16 QPs and send. */
	for (int c = 0; c < 2; c++) {
		for (int i = 0; i < NFWD; i++) {
			struct ibv_qp *q = qp[c * NFWD + i];
			REQUIRE(qp_connect(q, P.gid, m[c].qpn[i]) == 0);
			uint8_t *src = P.buf + 128 * (size_t)(c * NFWD + i);
			vt_fill(src, 100, 1000 + (uint32_t)(c * NFWD + i));
			REQUIRE(vt_post_send(q, P.mr, IBV_WR_SEND, src, 100, 0, 0, 0) == 0);
		}
	}
	for (int i = 0; i < 2 * NFWD; i++) {
		struct ibv_wc w = vt_wait_wc(P.cq, WAIT_MS);
		CHECK_EQ(w.status, IBV_WC_SUCCESS);
	}
	uint64_t passed = 0;
	for (int c = 0; c < 2; c++) {
		xread(up[c][0], &m[c], sizeof(m[c]));
		passed += m[c].passed_in;
		xwrite(down[c][1], "x", 1);
	}
	for (int c = 0; c < 2; c++) {
		int st;
		REQUIRE(waitpid(pid[c], &st, 0) == pid[c]);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		close(up[c][0]);
		close(up[c][1]);
		close(down[c][0]);
		close(down[c][1]);
	}
	/* The kernel spreads the 16 connections over both listeners (and ours): some must have
	 * reached the wrong process (probability of none: about 2^-16). */
	printf("multi-process: %llu of %d connections passed between processes\n",
	       (unsigned long long)passed, 2 * NFWD);
	CHECK(passed > 0);
	CHECK_EQ(counter(P.ctx, "iw_rdv_established_active"), 2 * NFWD);
	for (int i = 0; i < 2 * NFWD; i++)
		CHECK_EQ(ibv_destroy_qp(qp[i]), 0);
	dev_close(&P);
}

/* A SOFTRDMA_IW_PORT that is not a port: no QP (EINVAL, and a message), never another
 * port (70000 would wrap to 4464). */
static void test_bad_port(void)
{
	static const char *const bad[] = {"70000", "0", "-1", "12ab", " 4791"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("SOFTRDMA_IW_PORT", bad[i], 1);
		struct dev D;
		dev_open(&D, 4096);
		struct ibv_qp_init_attr qia = {
		    .send_cq = D.cq,
		    .recv_cq = D.cq,
		    .qp_type = IBV_QPT_RC,
		    .cap = {
			.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
		errno = 0;
		struct ibv_qp *qp = ibv_create_qp(D.pd, &qia);
		CHECK(qp == NULL);
		CHECK_EQ(errno, EINVAL);
		if (qp)
			ibv_destroy_qp(qp);
		dev_close(&D);
	}
}

/* The rendezvous port held by another user (a child as nobody listens on it; needs root): the
 * QP that would listen there fails RTR with EADDRINUSE and a message that names the user and
 * the way out (before: EADDRINUSE alone). */
static void test_port_held(void)
{
	if (!nobody_can("the port held by another user"))
		return;
	struct dev D;
	dev_open(&D, 4096);
	int pfd[2], efd[2];
	REQUIRE(pipe(pfd) == 0 && pipe(efd) == 0);
	pid_t child = nobody_fork();
	if (child == 0) {
		struct io_tcp_opts o = {.reuseport = true};
		struct io_tcp_listener *l;
		uint16_t p = 0;
		if (io_tcp_listen(D.gid, 0, 0, &o, &l) == 0)
			p = io_tcp_listener_port(l);
		if (write(pfd[1], &p, sizeof(p)) != (ssize_t)sizeof(p))
			_exit(3);
		for (;;)
			pause();
	}
	uint16_t p = 0;
	REQUIRE(read(pfd[0], &p, sizeof(p)) == (ssize_t)sizeof(p) && p != 0);
	dev_close(&D); /* the port is read when a context's first QP is made */
	char port[16];
	snprintf(port, sizeof(port), "%u", p);
	setenv("SOFTRDMA_IW_PORT", port, 1);
	dev_open(&D, 4096);
	struct ibv_qp *a = qp_new(&D), *b = qp_new(&D);
	struct ibv_qp *hi = a->qp_num > b->qp_num ? a : b, *lo = hi == a ? b : a;
	/* the higher QPN listens (the lower connects): its RTR needs the port */
	fflush(stderr);
	int saved = dup(2);
	REQUIRE(saved >= 0 && dup2(efd[1], 2) == 2);
	int r = qp_rtr(hi, D.gid, lo->qp_num, psn_of(lo->qp_num));
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(efd[1]);
	char msg[1024] = {0};
	ssize_t n = read(efd[0], msg, sizeof(msg) - 1);
	CHECK_EQ(r, EADDRINUSE);
	CHECK(n > 0 && strstr(msg, "held by user nobody (uid 65534)") != NULL);
	CHECK(n > 0 && strstr(msg, "SOFTRDMA_IW_PORT") != NULL);
	if (n > 0)
		fprintf(stderr, "%s", msg);
	CHECK_EQ(ibv_destroy_qp(a), 0);
	CHECK_EQ(ibv_destroy_qp(b), 0);
	dev_close(&D);
	nobody_end(child);
	close(pfd[0]);
	close(pfd[1]);
	close(efd[0]);
}

int main(void)
{
	test_bad_port();
	test_port_held();
	char port[16];
	snprintf(port, sizeof(port), "%d", 20000 + (int)(getpid() % 20000));
	setenv("SOFTRDMA_IW_PORT", port, 1);
	setenv("SOFTRDMA_IW_CRC", "on", 1);
	test_pair();
	test_forged();
	test_rtr_only();
	test_fake_responder();
	test_rts_before_reply();
	setenv("SOFTRDMA_IW_CRC", "peer", 1);
	test_processes();
	setenv("SOFTRDMA_IW_CONNECT_TIMEOUT", "300", 1);
	test_timeout(0x000002, false);
	test_timeout(0xFE0001, true);
	return check_exit();
}
