/* UD and UC queue pairs and address handles over real sockets on roce_lo, through the verbs
 * API: two processes (a forked echo server that answers with ibv_create_ah_from_wc), then
 * several device contexts in one process (each its own socket, steering slot and progress
 * thread).
 *
 * UD: one QP sends to QPs of two other contexts per WR, over IPv4 and IPv6 (::1) in one chain;
 * every payload byte, every completion field (byte_len = 40 + payload, src_qp, IBV_WC_GRH,
 * immediate) and the GRH area (20 zero bytes and the IPv4 header the datagram came in: TOS,
 * TTL, length, ID, DF, checksum, addresses; or the IPv6 header) are checked, and the reply
 * address comes from ibv_init_ah_from_wc. Address-handle argument checks, device limits, a
 * controlled Q_Key, and the drops, each counted by its reason: wrong Q_Key, no receive posted,
 * receive too small (the WQE stays), a send longer than the MTU (completes, nothing sent), an
 * unknown QPN, a stale address handle (never misdirected), and hostile datagrams from a raw UDP
 * socket (forged source address and QPN, truncated DETH, wrong transport, bad ICRC, bad pad,
 * oversized, garbage).
 * UC: SEND and WRITE (+ immediate) across packets, READ refused at post, a message with no
 * receive posted dropped and counted; the attribute masks of the UC state machine. */
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "softrdma.h"
#include "wire/roce/roce.h"

#define BUF_SIZE  (64u * 1024)
#define QKEY	  0x11111111u
#define GRH	  40
#define HOP_LIMIT 9
#define TCLASS	  0x28

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gid4, gid6; /* GID indices of 127.0.0.1 and ::1 (-1 if none) */
	union ibv_gid g4, g6;
};

static struct ibv_device *dev;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345;
		p[i] = (uint8_t)(x >> 16);
	}
}

static void end_open(struct end *e, enum ibv_qp_type type, uint32_t qkey)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ibv_open_device(dev);
	REQUIRE(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 512, NULL, NULL, 0);
	e->buf = calloc(1, BUF_SIZE);
	e->mr =
	    ibv_reg_mr(e->pd, e->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(e->pd && e->cq && e->buf && e->mr);
	struct ibv_qp_init_attr qia = {
	    .send_cq = e->cq,
	    .recv_cq = e->cq,
	    .qp_type = type,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 128, .max_send_sge = 2, .max_recv_sge = 2}};
	e->qp = ibv_create_qp(e->pd, &qia);
	REQUIRE(e->qp);
	e->gid4 = e->gid6 = -1;
	struct ibv_port_attr pa;
	REQUIRE(ibv_query_port(e->ctx, 1, &pa) == 0);
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(e->ctx, 1, i, &g))
			continue;
		static const uint8_t v4[16] = {0, 0, 0,	   0,	 0,   0, 0, 0,
					       0, 0, 0xff, 0xff, 127, 0, 0, 1};
		static const uint8_t v6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
		if (!memcmp(g.raw, v4, 16)) {
			e->gid4 = i;
			e->g4 = g;
		} else if (!memcmp(g.raw, v6, 16)) {
			e->gid6 = i;
			e->g6 = g;
		}
	}
	REQUIRE(e->gid4 >= 0);
	if (type != IBV_QPT_UD)
		return;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
	REQUIRE(ibv_modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	REQUIRE(ibv_modify_qp(e->qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x4242;
	REQUIRE(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

static void end_close(struct end *e)
{
	CHECK_EQ(ibv_destroy_qp(e->qp), 0);
	CHECK_EQ(ibv_dereg_mr(e->mr), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(e->pd), 0);
	CHECK_EQ(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

static struct ibv_ah *make_ah(struct end *e, bool v6)
{
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};
	a.grh.dgid = v6 ? e->g6 : e->g4;
	a.grh.sgid_index = (uint8_t)(v6 ? e->gid6 : e->gid4);
	a.grh.hop_limit = HOP_LIMIT;
	a.grh.traffic_class = TCLASS;
	struct ibv_ah *ah = ibv_create_ah(e->pd, &a);
	REQUIRE(ah);
	return ah;
}

static void post_recv(struct end *e, uint64_t id, uint32_t off, uint32_t len)
{
	struct ibv_sge s = {.addr = (uintptr_t)e->buf + off, .length = len, .lkey = e->mr->lkey};
	struct ibv_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1}, *bad;
	CHECK_EQ(ibv_post_recv(e->qp, &w, &bad), 0);
}

static int post_ud(struct end *e, uint64_t id, uint32_t off, uint32_t len, struct ibv_ah *ah,
		   uint32_t qpn, uint32_t qkey, bool imm)
{
	struct ibv_sge s = {.addr = (uintptr_t)e->buf + off, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr w = {.wr_id = id,
				.sg_list = &s,
				.num_sge = 1,
				.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
				.imm_data = htonl(0x1000u + (uint32_t)id)},
			   *bad;
	w.wr.ud.ah = ah;
	w.wr.ud.remote_qpn = qpn;
	w.wr.ud.remote_qkey = qkey;
	return ibv_post_send(e->qp, &w, &bad);
}

/* One completion within 5 s, or REQUIRE fails. */
static struct ibv_wc poll1(struct end *e)
{
	struct ibv_wc wc;
	uint64_t stop = now_ms() + 5000;
	int n;
	while ((n = ibv_poll_cq(e->cq, 1, &wc)) == 0 && now_ms() < stop)
		;
	if (n != 1)
		fprintf(stderr, "no completion on QP %#x\n", e->qp->qp_num);
	REQUIRE(n == 1);
	return wc;
}

/* Nothing arrives for ms milliseconds. */
static bool quiet(struct end *e, long ms)
{
	struct ibv_wc wc;
	uint64_t stop = now_ms() + (uint64_t)ms;
	while (now_ms() < stop)
		if (ibv_poll_cq(e->cq, 1, &wc))
			return false;
	return true;
}

static uint64_t qctr(struct end *e, const char *name)
{
	return softrdma_counter(e->ctx, e->qp, name);
}

/* Waits (bounded) until the QP (or context, qp false) counter reaches want. */
static uint64_t wait_ctr(struct end *e, bool qp, const char *name, uint64_t want)
{
	uint64_t v = 0;
	for (int i = 0; i < 2000; i++) {
		v = softrdma_counter(e->ctx, qp ? e->qp : NULL, name);
		if (v >= want && v != UINT64_MAX)
			break;
		sleep_ms(1);
	}
	return v;
}

/* Waits (5 s at most) until p equals q, byte by byte: memcmp is no use on memory another
 * thread is writing (it may report equality from a byte it re-reads). Bytes only go from 0 to
 * their final value, so once each has been seen equal, all are. */
static void wait_equal(const uint8_t *p, const uint8_t *q, size_t n)
{
	const volatile uint8_t *v = p;
	uint64_t stop = now_ms() + 5000;
	for (size_t i = 0; i < n && now_ms() < stop;)
		if (v[i] == q[i])
			i++;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* The GRH area of a UD receive that came over IPv4 from 127.0.0.x:
 * 20 zero bytes, then the IPv4 header the packet came in. */
static void check_grh4(const uint8_t *g, uint32_t udp_payload, uint8_t tos, uint8_t ttl,
		       uint8_t src_last)
{
	static const uint8_t zero[20];
	const uint8_t *h = g + 20;
	CHECK_MEM(g, zero, 20);
	CHECK_EQ(h[0], 0x45);
	CHECK_EQ(h[1], tos);
	CHECK_EQ(be16(h + 2), 20 + 8 + udp_payload);
	CHECK_EQ(be16(h + 4), 0); /* IPv4 ID: softrdma and Linux send 0 (DF, unconnected) */
	CHECK_EQ(be16(h + 6), 0x4000);
	CHECK_EQ(h[8], ttl);
	CHECK_EQ(h[9], 17);
	uint32_t sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += be16(h + i);
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	CHECK_EQ(sum, 0xFFFF); /* the header checksum verifies */
	CHECK_MEM(h + 12, ((uint8_t[]){127, 0, 0, src_last}), 4);
	CHECK_MEM(h + 16, ((uint8_t[]){127, 0, 0, 1}), 4);
}

/* UDP payload of a UD SEND: BTH + DETH (+ ImmDt) + payload + pad + ICRC. */
static uint32_t ud_wire_len(uint32_t len, bool imm)
{
	return 12 + 8 + (imm ? 4 : 0) + len + ((4 - (len & 3)) & 3) + 4;
}

/* ---- two processes: a forked echo server ---- */

#define ECHO_N 40

static int echo_child(int wfd)
{
	struct end c;
	end_open(&c, IBV_QPT_UD, QKEY);
	for (int i = 0; i < 64; i++)
		post_recv(&c, (uint64_t)i, (uint32_t)i * 1024, 1024);
	uint32_t qpn = c.qp->qp_num;
	if (write(wfd, &qpn, sizeof(qpn)) != sizeof(qpn))
		return 2;
	struct ibv_ah *ah = NULL;
	int bad = 0;
	for (int n = 0; n < ECHO_N; n++) {
		struct ibv_wc wc = poll1(&c);
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
		    !(wc.wc_flags & IBV_WC_GRH) || wc.byte_len < GRH)
			return 3;
		uint8_t *msg = c.buf + wc.wr_id * 1024;
		if (!ah) {
			/* The reply address from the datagram itself. */
			ah = ibv_create_ah_from_wc(c.pd, &wc, (struct ibv_grh *)msg, 1);
			if (!ah)
				return 4;
		}
		/* Echo the payload (after the GRH) to whoever sent it. */
		if (post_ud(&c, 1000 + (uint64_t)n, (uint32_t)wc.wr_id * 1024 + GRH,
			    wc.byte_len - GRH, ah, wc.src_qp, QKEY, false))
			return 5;
		struct ibv_wc sc = poll1(&c);
		if (sc.status != IBV_WC_SUCCESS || sc.wr_id != 1000 + (uint64_t)n)
			bad++;
		post_recv(&c, wc.wr_id, (uint32_t)wc.wr_id * 1024, 1024);
	}
	ibv_destroy_ah(ah);
	end_close(&c);
	return bad ? 6 : check_failures ? 7 : 0;
}

static void two_processes(void)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(echo_child(fds[1]));
	}
	close(fds[1]);
	uint32_t child_qpn = 0;
	REQUIRE(read(fds[0], &child_qpn, sizeof(child_qpn)) == sizeof(child_qpn));
	close(fds[0]);
	struct end p;
	end_open(&p, IBV_QPT_UD, QKEY);
	CHECK(child_qpn >> 16 != p.qp->qp_num >> 16); /* another process, another slot */
	struct ibv_ah *ah = make_ah(&p, false);
	for (int n = 0; n < ECHO_N; n++) {
		uint32_t len = (uint32_t)(n * 23) % 985; /* 0 .. 984: fits the child's 1024 - 40 */
		post_recv(&p, 1, 8192, 2048);
		fill(p.buf, len, (uint32_t)n + 100);
		CHECK_EQ(post_ud(&p, 2, 0, len, ah, child_qpn, QKEY, false), 0);
		struct ibv_wc w1 = poll1(&p), w2 = poll1(&p);
		struct ibv_wc *r = w1.wr_id == 1 ? &w1 : &w2, *s = w1.wr_id == 1 ? &w2 : &w1;
		CHECK_EQ(s->status, IBV_WC_SUCCESS);
		CHECK_EQ(s->opcode, IBV_WC_SEND);
		CHECK_EQ(r->status, IBV_WC_SUCCESS);
		CHECK_EQ(r->opcode, IBV_WC_RECV);
		CHECK_EQ(r->byte_len, GRH + len);
		CHECK_EQ(r->src_qp, child_qpn);
		CHECK_EQ(r->qp_num, p.qp->qp_num);
		CHECK(r->wc_flags & IBV_WC_GRH);
		CHECK_MEM(p.buf + 8192 + GRH, p.buf, len);
		/* The child's reply AH came from our datagram: TTL and TOS as we sent them. */
		check_grh4(p.buf + 8192, ud_wire_len(len, false), TCLASS, HOP_LIMIT, 1);
	}
	int status = -1;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		fprintf(stderr, "echo child status %#x\n", status);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	end_close(&p);
}

/* ---- address handles: arguments, limits; QP attributes ---- */

static void ah_and_limits(void)
{
	struct end e;
	end_open(&e, IBV_QPT_UD, QKEY);
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(e.ctx, &da), 0);
	CHECK(da.max_ah >= 4096);
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1};
	a.grh.dgid = e.g4;
	a.grh.sgid_index = (uint8_t)e.gid4;
	struct ibv_ah *ah = ibv_create_ah(e.pd, &a);
	CHECK(ah != NULL);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	a.is_global = 0; /* RoCE: the GRH carries the addresses */
	errno = 0;
	CHECK(ibv_create_ah(e.pd, &a) == NULL);
	CHECK_EQ(errno, EINVAL);
	a.is_global = 1;
	a.grh.sgid_index = 200;
	errno = 0;
	CHECK(ibv_create_ah(e.pd, &a) == NULL);
	CHECK_EQ(errno, EINVAL);
	a.grh.sgid_index = (uint8_t)e.gid4;
	a.port_num = 2;
	CHECK(ibv_create_ah(e.pd, &a) == NULL);
	a.port_num = 1;
	if (e.gid6 >= 0) {
		a.grh.dgid = e.g6; /* IPv6 destination from an IPv4 source */
		errno = 0;
		CHECK(ibv_create_ah(e.pd, &a) == NULL);
		CHECK_EQ(errno, EINVAL);
	}
	CHECK(ibv_create_ah(NULL, &a) == NULL);
	CHECK_EQ(ibv_destroy_ah(NULL), EINVAL);

	/* The UD QP as verbs reports it. */
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(e.qp, &qa, IBV_QP_STATE | IBV_QP_QKEY | IBV_QP_CAP, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(qa.qkey, QKEY);
	CHECK_EQ(qa.sq_psn, 0x4242);
	CHECK_EQ(qi.qp_type, IBV_QPT_UD);
	CHECK(qi.cap.max_inline_data >= 64);
	/* UD takes no path: an AV at INIT -> RTR is refused by the state machine. */
	struct ibv_qp_init_attr qia = {.send_cq = e.cq,
				       .recv_cq = e.cq,
				       .qp_type = IBV_QPT_UD,
				       .cap = {.max_send_wr = 4,
					       .max_recv_wr = 4,
					       .max_send_sge = 1,
					       .max_recv_sge = 1,
					       .max_inline_data = 100000}};
	errno = 0;
	CHECK(ibv_create_qp(e.pd, &qia) == NULL);
	CHECK_EQ(errno, EINVAL);
	qia.cap.max_inline_data = 0;
	struct ibv_qp *q = ibv_create_qp(e.pd, &qia);
	REQUIRE(q);
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 5};
	CHECK_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
	CHECK_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
		 0);
	m.qp_state = IBV_QPS_RTR;
	m.ah_attr = a;
	CHECK_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE | IBV_QP_AV), EINVAL);
	CHECK_EQ(ibv_modify_qp(q, &m, IBV_QP_STATE), 0);
	/* Not in RTS yet: nothing can be posted. */
	ah = make_ah(&e, false);
	CHECK_EQ(post_ud(&e, 1, 0, 8, ah, e.qp->qp_num, QKEY, false), 0); /* e.qp is in RTS */
	CHECK_EQ(poll1(&e).status, IBV_WC_SUCCESS);
	struct ibv_sge s = {.addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey};
	struct ibv_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND}, *bad;
	w.wr.ud.ah = ah;
	CHECK_EQ(ibv_post_send(q, &w, &bad), EINVAL);
	CHECK_EQ(ibv_destroy_qp(q), 0);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	end_close(&e);

	/* iWARP has no datagrams (siw: RC only). */
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), "iwarp_lo"))
			continue;
		struct ibv_context *ic = ibv_open_device(list[i]);
		REQUIRE(ic);
		struct ibv_pd *pd = ibv_alloc_pd(ic);
		struct ibv_cq *cq = ibv_create_cq(ic, 4, NULL, NULL, 0);
		struct ibv_qp_init_attr ia = {
		    .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD, .cap = {1, 1, 1, 1, 0}};
		errno = 0;
		CHECK(ibv_create_qp(pd, &ia) == NULL);
		CHECK_EQ(errno, EOPNOTSUPP);
		ia.qp_type = IBV_QPT_UC;
		errno = 0;
		CHECK(ibv_create_qp(pd, &ia) == NULL);
		CHECK_EQ(errno, EOPNOTSUPP);
		struct ibv_ah_attr ia_ah = {.is_global = 1, .port_num = 1};
		errno = 0;
		CHECK(ibv_create_ah(pd, &ia_ah) == NULL);
		CHECK_EQ(errno, EOPNOTSUPP);
		struct ibv_device_attr ida;
		CHECK_EQ(ibv_query_device(ic, &ida), 0);
		CHECK_EQ(ida.max_ah, 0);
		ibv_destroy_cq(cq);
		ibv_dealloc_pd(pd);
		ibv_close_device(ic);
	}
	ibv_free_device_list(list);
}

/* ---- one QP, destinations per WR, IPv4 and IPv6, GRH, replies from the wc ---- */

static void per_wr_destinations(void)
{
	struct end a, b1, b2;
	end_open(&a, IBV_QPT_UD, QKEY);
	end_open(&b1, IBV_QPT_UD, QKEY);
	end_open(&b2, IBV_QPT_UD, QKEY);
	bool v6 = a.gid6 >= 0;
	if (!v6)
		fprintf(stderr, "NOTE: no ::1 GID on roce_lo: IPv6 part skipped\n");
	struct ibv_ah *ah4 = make_ah(&a, false), *ah6 = v6 ? make_ah(&a, true) : ah4;
	const uint32_t sizes[] = {0, 1, 3, 100, 1000, 4095, 4096};
	const int nsz = (int)(sizeof(sizes) / sizeof(sizes[0]));
	fill(a.buf, BUF_SIZE, 1);
	/* One chain: to b1 over IPv4 and b2 over IPv6, alternating: one QP, a destination and a
	 * family per packet. */
	struct ibv_send_wr w[2 * 7];
	struct ibv_sge sg[2 * 7];
	for (int i = 0; i < 2 * nsz; i++) {
		struct end *to = i & 1 ? &b2 : &b1;
		uint32_t len = sizes[i / 2];
		post_recv(to, (uint64_t)i, (uint32_t)(i / 2) * 8192, GRH + len);
		memset(to->buf + (i / 2) * 8192 + GRH + len, 0xEE, 16);
		sg[i] = (struct ibv_sge){(uintptr_t)a.buf + 100u * (uint32_t)i, len, a.mr->lkey};
		w[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i,
					    .next = i + 1 < 2 * nsz ? &w[i + 1] : NULL,
					    .sg_list = &sg[i],
					    .num_sge = 1,
					    .opcode = i & 1 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
					    .send_flags = IBV_SEND_SIGNALED,
					    .imm_data = htonl(0xABC00000u + (uint32_t)i)};
		w[i].wr.ud.ah = i & 1 ? ah6 : ah4;
		w[i].wr.ud.remote_qpn = to->qp->qp_num;
		w[i].wr.ud.remote_qkey = QKEY;
	}
	struct ibv_send_wr *bad;
	CHECK_EQ(ibv_post_send(a.qp, w, &bad), 0);
	for (int i = 0; i < 2 * nsz; i++) {
		struct ibv_wc wc = poll1(&a);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, (uint64_t)i); /* in order */
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
	}
	for (int i = 0; i < 2 * nsz; i++) {
		struct end *to = i & 1 ? &b2 : &b1;
		uint32_t len = sizes[i / 2];
		struct ibv_wc wc = poll1(to);
		uint8_t *m = to->buf + (i / 2) * 8192;
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, (uint64_t)i);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, GRH + len);
		CHECK_EQ(wc.src_qp, a.qp->qp_num);
		CHECK_EQ(wc.qp_num, to->qp->qp_num);
		CHECK_EQ(wc.pkey_index, 0);
		CHECK_EQ(wc.wc_flags, IBV_WC_GRH | (i & 1 ? IBV_WC_WITH_IMM : 0));
		/* The L3 type in sl, as ConnectX: UDP (8) | IPv6 (1) or IPv4 (2); UCX's UD
		 * transport drops datagrams without it. */
		CHECK_EQ(wc.sl, (i & 1) && v6 ? 0x9 : 0xA);
		if (i & 1)
			CHECK_EQ(ntohl(wc.imm_data), 0xABC00000u + (uint32_t)i);
		CHECK_MEM(m + GRH, a.buf + 100u * (uint32_t)i, len);
		CHECK_MEM(m + GRH + len, "\xee\xee\xee\xee\xee\xee\xee\xee", 8);
		if (!(i & 1) || !v6) {
			check_grh4(m, ud_wire_len(len, i & 1), TCLASS, HOP_LIMIT, 1);
		} else {
			/* IPv6: the header itself (flow label 0, as rxe). */
			CHECK_EQ(m[0], 0x60 | TCLASS >> 4);
			CHECK_EQ(m[1], (uint8_t)(TCLASS << 4));
			CHECK_EQ(m[2] | m[3], 0);
			CHECK_EQ(be16(m + 4), 8 + ud_wire_len(len, true));
			CHECK_EQ(m[6], 17);
			CHECK_EQ(m[7], HOP_LIMIT);
			CHECK_MEM(m + 8, a.g6.raw, 16);
			CHECK_MEM(m + 24, a.g6.raw, 16);
		}
		/* The reply address from the datagram: back where it came from. */
		struct ibv_ah_attr ra;
		CHECK_EQ(ibv_init_ah_from_wc(to->ctx, 1, &wc, (struct ibv_grh *)m, &ra), 0);
		CHECK_EQ(ra.is_global, 1);
		CHECK_EQ(ra.port_num, 1);
		CHECK_EQ(ra.grh.hop_limit, HOP_LIMIT);
		CHECK_EQ(ra.grh.traffic_class, TCLASS);
		CHECK_EQ(ra.grh.flow_label, 0);
		CHECK_EQ(ra.grh.sgid_index, (i & 1) && v6 ? to->gid6 : to->gid4);
		CHECK_MEM(ra.grh.dgid.raw, (i & 1) && v6 ? a.g6.raw : a.g4.raw, 16);
	}
	CHECK(quiet(&b1, 20) && quiet(&b2, 0));
	/* Replies from both, by ibv_create_ah_from_wc, to the sender's QP. */
	for (int k = 0; k < 2; k++) {
		struct end *from = k ? &b2 : &b1;
		post_recv(&a, 77, 32768, 4096);
		post_recv(from, 5, 0, GRH + 64);
		fill(a.buf + 200, 64, 9);
		CHECK_EQ(
		    post_ud(&a, 6, 200, 64, k && v6 ? ah6 : ah4, from->qp->qp_num, QKEY, false), 0);
		CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
		struct ibv_wc wc = poll1(from);
		REQUIRE(wc.status == IBV_WC_SUCCESS);
		struct ibv_ah *back =
		    ibv_create_ah_from_wc(from->pd, &wc, (struct ibv_grh *)from->buf, 1);
		REQUIRE(back);
		fill(from->buf + 4096, 33, 10 + (uint32_t)k);
		CHECK_EQ(post_ud(from, 7, 4096, 33, back, wc.src_qp, QKEY, true), 0);
		CHECK_EQ(poll1(from).status, IBV_WC_SUCCESS);
		struct ibv_wc r = poll1(&a);
		CHECK_EQ(r.status, IBV_WC_SUCCESS);
		CHECK_EQ(r.wr_id, 77);
		CHECK_EQ(r.src_qp, from->qp->qp_num);
		CHECK_EQ(r.byte_len, GRH + 33);
		CHECK_EQ(ntohl(r.imm_data), 0x1007);
		CHECK_MEM(a.buf + 32768 + GRH, from->buf + 4096, 33);
		CHECK_EQ(ibv_destroy_ah(back), 0);
	}
	/* No GRH: an AH without one (not usable on RoCE); an unknown header: refused. */
	{
		struct ibv_wc wc = {.wc_flags = 0, .slid = 0};
		struct ibv_ah_attr ra;
		uint8_t junk[GRH];
		memset(junk, 0xFF, sizeof(junk));
		CHECK_EQ(ibv_init_ah_from_wc(a.ctx, 1, &wc, (struct ibv_grh *)junk, &ra), 0);
		CHECK_EQ(ra.is_global, 0);
		wc.wc_flags = IBV_WC_GRH;
		CHECK(ibv_init_ah_from_wc(a.ctx, 1, &wc, (struct ibv_grh *)junk, &ra) != 0);
		CHECK(ibv_create_ah_from_wc(a.pd, &wc, (struct ibv_grh *)junk, 1) == NULL);
	}
	CHECK_EQ(qctr(&b1, "drop_qkey") + qctr(&b1, "drop_no_recv") + qctr(&b2, "drop_qkey"), 0);
	if (v6)
		CHECK_EQ(ibv_destroy_ah(ah6), 0);
	CHECK_EQ(ibv_destroy_ah(ah4), 0);
	end_close(&a);
	end_close(&b1);
	end_close(&b2);
}

/* ---- drops, each counted by its reason ---- */

static void ud_drops(void)
{
	struct end a, b;
	end_open(&a, IBV_QPT_UD, QKEY);
	end_open(&b, IBV_QPT_UD, QKEY);
	struct ibv_ah *ah = make_ah(&a, false);
	uint32_t bq = b.qp->qp_num;
	fill(a.buf, BUF_SIZE, 3);

	/* No receive posted. */
	CHECK_EQ(post_ud(&a, 1, 0, 10, ah, bq, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	CHECK_EQ(wait_ctr(&b, true, "drop_no_recv", 1), 1);
	/* Wrong Q_Key. */
	post_recv(&b, 10, 0, 4096);
	CHECK_EQ(post_ud(&a, 2, 0, 10, ah, bq, QKEY + 1, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	CHECK_EQ(wait_ctr(&b, true, "drop_qkey", 1), 1);
	/* A controlled Q_Key (bit 31) is the sending QP's own: QKEY here. */
	CHECK_EQ(post_ud(&a, 3, 0, 10, ah, bq, 0x80000000u, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	struct ibv_wc wc = poll1(&b);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 10);
	/* Longer than the port MTU (4096 on lo): completes, nothing sent (C10-93.1.1); the next
	 * one arrives, the only one. */
	post_recv(&b, 11, 0, 8192);
	CHECK_EQ(post_ud(&a, 4, 0, 4097, ah, bq, QKEY, false), 0);
	CHECK_EQ(post_ud(&a, 5, 8000, 77, ah, bq, QKEY, false), 0);
	wc = poll1(&a);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 4);
	CHECK_EQ(poll1(&a).wr_id, 5);
	wc = poll1(&b);
	CHECK_EQ(wc.wr_id, 11);
	CHECK_EQ(wc.byte_len, GRH + 77);
	CHECK_MEM(b.buf + GRH, a.buf + 8000, 77);
	CHECK_EQ(qctr(&a, "tx_ud_too_long"), 1);
	/* Receive too small (the GRH counts): dropped, the WQE stays for the next one. */
	post_recv(&b, 12, 0, GRH + 10);
	CHECK_EQ(post_ud(&a, 6, 0, 11, ah, bq, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	CHECK_EQ(wait_ctr(&b, true, "drop_recv_short", 1), 1);
	CHECK_EQ(post_ud(&a, 7, 0, 10, ah, bq, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	wc = poll1(&b);
	CHECK_EQ(wc.wr_id, 12);
	CHECK_EQ(wc.byte_len, GRH + 10);
	/* A QPN nobody has (b's slot): the context drops it. */
	uint64_t unknown = softrdma_counter(b.ctx, NULL, "rx_unknown_qp");
	CHECK_EQ(post_ud(&a, 8, 0, 10, ah, bq + 50, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	CHECK_EQ(wait_ctr(&b, false, "rx_unknown_qp", unknown + 1), unknown + 1);
	/* A stale address handle: once its slot is taken by another AH (next fit: after the
	 * others), a WR that still names the old one is dropped and counted, never sent to the
	 * new destination. */
	struct ibv_ah stale = *ah;
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	struct end c;
	end_open(&c, IBV_QPT_UD, QKEY);
	post_recv(&c, 1, 0, 4096);
	struct ibv_ah_attr to_c = {.is_global = 1, .port_num = 1};
	to_c.grh.dgid = a.g4;
	to_c.grh.sgid_index = (uint8_t)a.gid4;
	static struct ibv_ah *many[70];
	int nmany = 0;
	ah = NULL;
	while (!ah && nmany < 70) {
		many[nmany] = ibv_create_ah(a.pd, &to_c);
		REQUIRE(many[nmany]);
		if ((many[nmany]->handle & 0xFFFF) == (stale.handle & 0xFFFF))
			ah = many[nmany];
		nmany++;
	}
	REQUIRE(ah);
	CHECK(ah->handle != stale.handle); /* same slot, another generation */
	CHECK_EQ(post_ud(&a, 9, 0, 10, &stale, c.qp->qp_num, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS); /* out of the engine; the core drops it */
	CHECK_EQ(softrdma_counter(a.ctx, NULL, "tx_bad_ah"), 1);
	CHECK(quiet(&c, 30));
	CHECK_EQ(post_ud(&a, 10, 0, 10, ah, c.qp->qp_num, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	CHECK_EQ(poll1(&c).status, IBV_WC_SUCCESS);
	/* UD takes SEND only. */
	struct ibv_sge s = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
	struct ibv_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE}, *bad;
	w.wr.ud.ah = ah;
	CHECK_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
	CHECK(bad == &w);
	w.opcode = IBV_WR_SEND;
	w.wr.ud.ah = NULL;
	CHECK_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
	CHECK_EQ(qctr(&b, "drop_qkey"), 1);
	CHECK_EQ(qctr(&b, "drop_no_recv"), 1);
	CHECK_EQ(qctr(&b, "drop_recv_short"), 1);
	for (int i = 0; i < nmany; i++)
		CHECK_EQ(ibv_destroy_ah(many[i]), 0);
	end_close(&c);
	end_close(&a);
	end_close(&b);
}

/* ---- hostile datagrams from a raw UDP socket ---- */

static int udp_socket(const char *ip, uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), pmtu = IP_PMTUDISC_DO, ttl = 33, tos = 0x10;
	REQUIRE(fd >= 0);
	/* DF set and unconnected: the kernel sends IPv4 ID 0, as softrdma does. TTL and TOS
	 * of our choosing, to be found in the receiver's GRH. */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	REQUIRE(setsockopt(fd, IPPROTO_IP, IP_TTL, &ttl, sizeof(ttl)) == 0);
	REQUIRE(setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof(tos)) == 0);
	struct sockaddr_in a = {.sin_family = AF_INET};
	inet_pton(AF_INET, ip, &a.sin_addr);
	REQUIRE(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	socklen_t len = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &len);
	*port = ntohs(a.sin_port);
	return fd;
}

static void send_raw(int fd, const uint8_t *p, size_t len)
{
	struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(ROCE_UDP_PORT)};
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	CHECK_EQ(sendto(fd, p, len, 0, (struct sockaddr *)&to, sizeof(to)), (ssize_t)len);
}

/* A UD packet with a correct ICRC for src_ip:sport -> 127.0.0.1:4791. */
static size_t make_ud(uint8_t *out, size_t cap, uint8_t opcode, uint32_t qpn, uint32_t qkey,
		      uint32_t src_qpn, const uint8_t *payload, uint32_t len, const char *src_ip,
		      uint16_t sport)
{
	struct roce_pkt p = {.bth = {.opcode = opcode, .pkey = 0xFFFF, .dqpn = qpn, .psn = 7},
			     .deth = {.qkey = qkey, .src_qpn = src_qpn},
			     .payload = payload,
			     .payload_len = len};
	size_t n = roce_build(&p, out, cap);
	REQUIRE(n > 0);
	struct roce_envelope env = {.df = true, .sport = sport, .dport = ROCE_UDP_PORT};
	env.src[10] = env.src[11] = env.dst[10] = env.dst[11] = 0xff;
	inet_pton(AF_INET, src_ip, env.src + 12);
	inet_pton(AF_INET, "127.0.0.1", env.dst + 12);
	roce_icrc_put(out + n - 4, roce_icrc(&env, out, n - 4));
	return n;
}

static void hostile(void)
{
	struct end a, b;
	end_open(&a, IBV_QPT_UD, QKEY);
	end_open(&b, IBV_QPT_UD, QKEY);
	uint32_t bq = b.qp->qp_num;
	uint16_t port, port2;
	int fd = udp_socket("127.0.0.1", &port), fd2 = udp_socket("127.0.0.2", &port2);
	static uint8_t pkt[8192];
	static const uint8_t hello[] = "hostile but well formed";
	const uint32_t hl = (uint32_t)sizeof(hello);

	/* Well formed, from a QPN and an address no QP was told about: UD takes it, and says
	 * where it came from. */
	post_recv(&b, 1, 0, 4096);
	post_recv(&b, 2, 4096, 4096);
	size_t n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY, 0x123456, hello, hl,
			   "127.0.0.1", port);
	send_raw(fd, pkt, n);
	struct ibv_wc wc = poll1(&b);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 1);
	CHECK_EQ(wc.src_qp, 0x123456);
	CHECK_EQ(wc.sl, 0xA); /* RoCEv2 over IPv4 */
	CHECK_EQ(wc.byte_len, GRH + hl);
	CHECK_MEM(b.buf + GRH, hello, hl);
	check_grh4(b.buf, (uint32_t)n, 0x10, 33, 1);
	n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY, 0x654321, hello, hl, "127.0.0.2",
		    port2);
	send_raw(fd2, pkt, n);
	wc = poll1(&b);
	CHECK_EQ(wc.wr_id, 2);
	CHECK_EQ(wc.src_qp, 0x654321);
	check_grh4(b.buf + 4096, (uint32_t)n, 0x10, 33, 2); /* the forged source shows */

	post_recv(&b, 3, 0, 4096);
	/* Wrong Q_Key. */
	n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY ^ 1, 5, hello, hl, "127.0.0.1",
		    port);
	send_raw(fd, pkt, n);
	CHECK_EQ(wait_ctr(&b, true, "drop_qkey", 1), 1);
	/* A UC and an RC opcode to the UD QP. */
	n = make_ud(pkt, sizeof(pkt), ROCE_UC_SEND_ONLY, bq, QKEY, 5, hello, hl, "127.0.0.1", port);
	send_raw(fd, pkt, n);
	n = make_ud(pkt, sizeof(pkt), ROCE_RC_SEND_ONLY, bq, QKEY, 5, hello, hl, "127.0.0.1", port);
	send_raw(fd, pkt, n);
	CHECK_EQ(wait_ctr(&b, true, "drop_bad_opcode", 2), 2);
	/* DETH cut short. */
	n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY, 5, NULL, 0, "127.0.0.1", port);
	uint64_t trunc = softrdma_counter(b.ctx, NULL, "rx_truncated");
	send_raw(fd, pkt, 12 + 4 + 4);
	CHECK_EQ(wait_ctr(&b, false, "rx_truncated", trunc + 1), trunc + 1);
	/* Bad ICRC. */
	uint64_t icrc = softrdma_counter(b.ctx, NULL, "rx_bad_icrc");
	n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY, 5, hello, hl, "127.0.0.1", port);
	pkt[25] ^= 0x10;
	send_raw(fd, pkt, n);
	CHECK_EQ(wait_ctr(&b, false, "rx_bad_icrc", icrc + 1), icrc + 1);
	/* A pad count larger than what follows the headers. */
	uint64_t pad = softrdma_counter(b.ctx, NULL, "rx_bad_pad");
	n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY, 5, NULL, 0, "127.0.0.1", port);
	pkt[1] |= 0x30;
	send_raw(fd, pkt, n);
	CHECK_EQ(wait_ctr(&b, false, "rx_bad_pad", pad + 1), pad + 1);
	/* Larger than any packet softrdma takes (MTU 4096 + headers). */
	static uint8_t big[6000];
	uint64_t trunc_udp = softrdma_counter(b.ctx, NULL, "udp_rx_truncated");
	n = make_ud(pkt, sizeof(pkt), ROCE_UD_SEND_ONLY, bq, QKEY, 5, big, 6000, "127.0.0.1", port);
	send_raw(fd, pkt, n);
	CHECK_EQ(wait_ctr(&b, false, "udp_rx_truncated", trunc_udp + 1), trunc_udp + 1);
	/* Garbage aimed at b's process. */
	srand(11);
	for (int i = 0; i < 200; i++) {
		size_t l = 12 + (size_t)(rand() % 300);
		for (size_t k = 0; k < l; k++)
			pkt[k] = (uint8_t)rand();
		pkt[5] = (uint8_t)(bq >> 16);
		send_raw(fd, pkt, l);
	}
	sleep_ms(50);
	/* None of it reached a receive buffer; the QP still works. */
	CHECK(quiet(&b, 0));
	struct ibv_ah *ah = make_ah(&a, false);
	fill(a.buf, 64, 4);
	CHECK_EQ(post_ud(&a, 1, 0, 64, ah, bq, QKEY, false), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	wc = poll1(&b);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 3);
	CHECK_EQ(wc.src_qp, a.qp->qp_num);
	CHECK_MEM(b.buf + GRH, a.buf, 64);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(b.qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	close(fd);
	close(fd2);
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	end_close(&a);
	end_close(&b);
}

/* ---- on the wire: what a plain UDP socket on 127.0.0.3:4791 receives ---- */

struct dgram {
	uint8_t buf[8192];
	size_t len;
	uint16_t sport;
	int ttl, tos;
};

static bool recv_dgram(int fd, struct dgram *d)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	if (poll(&pfd, 1, 3000) != 1)
		return false;
	struct sockaddr_in from;
	char cbuf[256];
	struct iovec iov = {.iov_base = d->buf, .iov_len = sizeof(d->buf)};
	struct msghdr mh = {.msg_name = &from,
			    .msg_namelen = sizeof(from),
			    .msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf)};
	ssize_t n = recvmsg(fd, &mh, 0);
	if (n < 0)
		return false;
	d->len = (size_t)n;
	d->sport = ntohs(from.sin_port);
	d->ttl = d->tos = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL)
			d->ttl = *(int *)CMSG_DATA(c);
		else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS)
			d->tos = *(uint8_t *)CMSG_DATA(c);
	}
	return true;
}

/* Parses d and checks its ICRC as sent from 127.0.0.1 to 127.0.0.3: IPv4 ID 0 for a packet
 * that left alone, k for the k-th of a GSO train (src/io/io.h; back-to-back sends to one
 * address form one). */
static bool parse_dgram(const struct dgram *d, struct roce_pkt *p)
{
	struct roce_envelope env = {.df = true, .sport = d->sport, .dport = ROCE_UDP_PORT};
	env.src[10] = env.src[11] = env.dst[10] = env.dst[11] = 0xff;
	env.src[12] = env.dst[12] = 127;
	env.src[15] = 1;
	env.dst[15] = 3;
	uint16_t id = 0xFFFF;
	CHECK_EQ(roce_icrc_check(&env, d->buf, d->len, &id), 0);
	CHECK(id < IO_UDP_TRAIN_MAX);
	return roce_parse(d->buf, d->len, p) == ROCE_ERR_NONE;
}

static void on_the_wire(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
	REQUIRE(fd >= 0);
	setsockopt(fd, IPPROTO_IP, IP_RECVTTL, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(ROCE_UDP_PORT)};
	inet_pton(AF_INET, "127.0.0.3", &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "NOTE: cannot bind 127.0.0.3:4791 (%s): wire checks skipped\n",
			strerror(errno));
		close(fd);
		return;
	}
	static struct dgram d;
	struct roce_pkt p;

	/* UD: BTH + DETH, AckReq 0, one PSN each, the QP's own source port (rxe: hashed from
	 * the QPN at creation), TTL / TOS from the address handle. */
	struct end a;
	end_open(&a, IBV_QPT_UD, QKEY);
	struct ibv_ah_attr at = {.is_global = 1, .port_num = 1};
	at.grh.dgid = a.g4;
	at.grh.dgid.raw[15] = 3;
	at.grh.sgid_index = (uint8_t)a.gid4;
	at.grh.hop_limit = HOP_LIMIT;
	at.grh.traffic_class = TCLASS;
	struct ibv_ah *ah = ibv_create_ah(a.pd, &at);
	REQUIRE(ah);
	fill(a.buf, 8192, 21);
	const uint32_t lens[3] = {0, 5, 4096};
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(post_ud(&a, (uint64_t)i, 10, lens[i], ah, 0x0ABCDE, 0x80000000u, i == 1),
			 0);
		CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	}
	for (int i = 0; i < 3; i++) {
		REQUIRE(recv_dgram(fd, &d));
		REQUIRE(parse_dgram(&d, &p));
		CHECK_EQ(d.sport, roce_udp_sport_initial(a.qp->qp_num));
		CHECK_EQ(d.ttl, HOP_LIMIT);
		CHECK_EQ(d.tos, TCLASS);
		CHECK_EQ(p.bth.opcode, i == 1 ? ROCE_UD_SEND_ONLY_IMM : ROCE_UD_SEND_ONLY);
		CHECK(!p.bth.ackreq);
		CHECK(!p.bth.se);
		CHECK_EQ(p.bth.pkey, 0xFFFF);
		CHECK_EQ(p.bth.dqpn, 0x0ABCDE);
		CHECK_EQ(p.bth.psn, 0x4242 + (uint32_t)i);
		CHECK_EQ(p.deth.qkey, QKEY); /* controlled: the QP's */
		CHECK_EQ(p.deth.src_qpn, a.qp->qp_num);
		CHECK_EQ(p.payload_len, lens[i]);
		CHECK_MEM(p.payload, a.buf + 10, lens[i]);
		if (i == 1)
			CHECK_MEM(p.imm, "\x00\x00\x10\x01", 4);
	}
	CHECK_EQ(ibv_destroy_ah(ah), 0);
	end_close(&a);

	/* UC: FIRST / MIDDLE / LAST without AckReq, consecutive PSNs, rxe's source port for the
	 * QP pair; RETH on the WRITE's only packet. */
	struct end u;
	end_open(&u, IBV_QPT_UC, 0);
	struct end fake = u; /* the peer: 127.0.0.3, QPN 0x0ABCDE */
	fake.g4.raw[15] = 3;
	struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	REQUIRE(ibv_modify_qp(u.qp, &qa,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = IBV_MTU_1024;
	qa.dest_qp_num = 0x0ABCDE;
	qa.rq_psn = 0x10;
	qa.ah_attr.is_global = 1;
	qa.ah_attr.port_num = 1;
	qa.ah_attr.grh.hop_limit = HOP_LIMIT;
	qa.ah_attr.grh.dgid = fake.g4;
	qa.ah_attr.grh.sgid_index = (uint8_t)u.gid4;
	REQUIRE(ibv_modify_qp(u.qp, &qa,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN) == 0);
	qa.qp_state = IBV_QPS_RTS;
	qa.sq_psn = 0xFFFFFE; /* wraps inside the message */
	REQUIRE(ibv_modify_qp(u.qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
	fill(u.buf, 8192, 22);
	struct ibv_sge sg = {.addr = (uintptr_t)u.buf, .length = 2500, .lkey = u.mr->lkey};
	struct ibv_send_wr w = {.wr_id = 1,
				.sg_list = &sg,
				.num_sge = 1,
				.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED},
			   *bad;
	CHECK_EQ(ibv_post_send(u.qp, &w, &bad), 0);
	CHECK_EQ(poll1(&u).status, IBV_WC_SUCCESS);
	w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	w.imm_data = htonl(0xFEED);
	sg.length = 100;
	w.wr.rdma.remote_addr = 0x1122334455667788ull;
	w.wr.rdma.rkey = 0x99AA;
	CHECK_EQ(ibv_post_send(u.qp, &w, &bad), 0);
	CHECK_EQ(poll1(&u).status, IBV_WC_SUCCESS);
	const uint8_t ops[4] = {ROCE_UC_SEND_FIRST, ROCE_UC_SEND_MIDDLE, ROCE_UC_SEND_LAST,
				ROCE_UC_WRITE_ONLY_IMM};
	for (int i = 0; i < 4; i++) {
		REQUIRE(recv_dgram(fd, &d));
		REQUIRE(parse_dgram(&d, &p));
		CHECK_EQ(d.sport, roce_udp_sport(0, u.qp->qp_num, 0x0ABCDE));
		CHECK_EQ(d.ttl, HOP_LIMIT);
		CHECK_EQ(p.bth.opcode, ops[i]);
		CHECK(!p.bth.ackreq);
		/* Solicited: on the last packet of the SEND, and of the WRITE with immediate. */
		CHECK_EQ(p.bth.se, i >= 2);
		CHECK_EQ(p.bth.dqpn, 0x0ABCDE);
		CHECK_EQ(p.bth.psn, (0xFFFFFEu + (uint32_t)i) & 0xFFFFFF);
		CHECK_EQ(p.payload_len, i < 2 ? 1024u : i == 2 ? 452u : 100u);
		CHECK_MEM(p.payload, u.buf + (i < 3 ? 1024u * (uint32_t)i : 0u), p.payload_len);
		if (i == 3) {
			CHECK_EQ(p.reth.va, 0x1122334455667788ull);
			CHECK_EQ(p.reth.rkey, 0x99AA);
			CHECK_EQ(p.reth.dma_len, 100);
			CHECK_MEM(p.imm, "\x00\x00\xfe\xed", 4);
		}
	}
	end_close(&u);
	close(fd);
}

/* ---- UC ---- */

static void uc_connect(struct end *e, const struct end *peer, uint32_t psn)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	/* UC's masks (IBA 10.3.1): no RNR timer, no timeouts, no RD atomics. */
	CHECK_EQ(ibv_modify_qp(e->qp, &a,
			       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				   IBV_QP_ACCESS_FLAGS | IBV_QP_QKEY),
		 EINVAL);
	REQUIRE(ibv_modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp->qp_num;
	a.rq_psn = psn;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.dgid = peer->g4;
	a.ah_attr.grh.sgid_index = (uint8_t)e->gid4;
	int base = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN;
	CHECK_EQ(ibv_modify_qp(e->qp, &a, base), EINVAL); /* RQ_PSN missing */
	CHECK_EQ(ibv_modify_qp(e->qp, &a, base | IBV_QP_RQ_PSN | IBV_QP_MIN_RNR_TIMER), EINVAL);
	REQUIRE(ibv_modify_qp(e->qp, &a, base | IBV_QP_RQ_PSN) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = psn;
	CHECK_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT), EINVAL);
	REQUIRE(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

static void uc(void)
{
	struct end a, b;
	end_open(&a, IBV_QPT_UC, 0);
	end_open(&b, IBV_QPT_UC, 0);
	uc_connect(&a, &b, 0x777);
	uc_connect(&b, &a, 0x777);
	fill(a.buf, BUF_SIZE, 5);
	const struct {
		enum ibv_wr_opcode op;
		uint32_t len;
	} ops[] = {{IBV_WR_SEND, 3 * 1024 + 5}, {IBV_WR_SEND_WITH_IMM, 0},
		   {IBV_WR_RDMA_WRITE, 5000},	{IBV_WR_RDMA_WRITE_WITH_IMM, 2000},
		   {IBV_WR_SEND, 1024},		{IBV_WR_RDMA_WRITE_WITH_IMM, 1}};
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		bool send = ops[i].op == IBV_WR_SEND || ops[i].op == IBV_WR_SEND_WITH_IMM;
		bool recv = ops[i].op != IBV_WR_RDMA_WRITE;
		uint32_t len = ops[i].len, off = 1000u * (uint32_t)i;
		memset(b.buf, 0, BUF_SIZE);
		if (recv)
			post_recv(&b, 50 + i, 16, send ? 8192 : 0);
		struct ibv_sge s = {
		    .addr = (uintptr_t)a.buf + off, .length = len, .lkey = a.mr->lkey};
		struct ibv_send_wr w = {.wr_id = i,
					.sg_list = &s,
					.num_sge = 1,
					.opcode = ops[i].op,
					.send_flags = IBV_SEND_SIGNALED,
					.imm_data = htonl(0x5150u + (uint32_t)i)},
				   *bad;
		w.wr.rdma.remote_addr = (uintptr_t)b.buf + 16;
		w.wr.rdma.rkey = b.mr->rkey;
		CHECK_EQ(ibv_post_send(a.qp, &w, &bad), 0);
		struct ibv_wc wc = poll1(&a);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, i);
		CHECK_EQ(wc.opcode, send ? IBV_WC_SEND : IBV_WC_RDMA_WRITE);
		if (recv) {
			wc = poll1(&b);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.wr_id, 50 + i);
			CHECK_EQ(wc.opcode, send ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM);
			CHECK_EQ(wc.byte_len, len);
			CHECK_EQ(wc.src_qp, a.qp->qp_num);
			CHECK_EQ(wc.qp_num, b.qp->qp_num);
			bool imm = ops[i].op != IBV_WR_SEND;
			CHECK_EQ(wc.wc_flags, imm ? IBV_WC_WITH_IMM : 0);
			if (imm)
				CHECK_EQ(ntohl(wc.imm_data), 0x5150u + (uint32_t)i);
		} else {
			/* A plain WRITE completes nothing at the target: wait for its bytes. */
			wait_equal(b.buf + 16, a.buf + off, len);
		}
		CHECK_MEM(b.buf + 16, a.buf + off, len);
		static const uint8_t zero[16];
		CHECK_MEM(b.buf, zero, 16);
		CHECK_MEM(b.buf + 16 + len, zero, 16);
	}
	/* No READ or atomics on UC. */
	struct ibv_sge s = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
	struct ibv_send_wr w = {.sg_list = &s, .num_sge = 1, .opcode = IBV_WR_RDMA_READ}, *bad;
	w.wr.rdma.remote_addr = (uintptr_t)b.buf;
	w.wr.rdma.rkey = b.mr->rkey;
	CHECK_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
	w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	w.wr.atomic.remote_addr = (uintptr_t)b.buf;
	w.wr.atomic.rkey = b.mr->rkey;
	CHECK_EQ(ibv_post_send(a.qp, &w, &bad), EINVAL);
	/* A SEND with no receive posted: dropped at b, counted; a has no idea. */
	w.opcode = IBV_WR_SEND;
	w.send_flags = IBV_SEND_SIGNALED;
	w.wr_id = 99;
	CHECK_EQ(ibv_post_send(a.qp, &w, &bad), 0);
	CHECK_EQ(poll1(&a).status, IBV_WC_SUCCESS);
	CHECK_EQ(wait_ctr(&b, true, "drop_no_recv", 1), 1);
	CHECK(quiet(&b, 10));
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(b.qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(qi.qp_type, IBV_QPT_UC);
	CHECK_EQ(qa.path_mtu, IBV_MTU_1024);
	CHECK_EQ(qctr(&a, "retransmits") + qctr(&b, "retransmits"), 0);
	end_close(&a);
	end_close(&b);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "roce_lo"))
			dev = list[i];
	REQUIRE(dev);
	uint64_t t0 = now_ms();
	two_processes(); /* first: the fork happens before this process opens a device */
	ah_and_limits();
	per_wr_destinations();
	ud_drops();
	hostile();
	on_the_wire();
	uc();
	fprintf(stderr, "test_verbs_ud: %llu ms\n", (unsigned long long)(now_ms() - t0));
	ibv_free_device_list(list);
	return check_exit();
}
