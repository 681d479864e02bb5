/* UD multicast through the verbs API (src/api/mcast.c, core.h "multicast", io/mcast.h), on
 * roce_lo with real sockets: ibv_attach_mcast / ibv_detach_mcast, sends to the group
 * (::ffff:230.1.2.3, DestQP 0xFFFFFF), received by every attached QP of two contexts of this
 * process and of a second process (forked before any device is opened), with every payload byte,
 * the completion fields and the GRH area (the IPv4 header, destination the group) checked.
 *   - the sender's own QP, once attached, gets its messages back (as rxe's do);
 *   - an attached QP with another Q_Key gets nothing (drop_qkey);
 *   - to the group with a unicast DestQP: nobody (rx_mcast_bad_qpn); DestQP 0xFFFFFF to a unicast
 *     address: nobody (rx_mcast_unicast);
 *   - after ibv_detach_mcast (and in the other process), no more delivery; a QP destroyed while
 *     attached leaves its group; the last QP of a context closes the group's socket;
 *   - bad arguments: an RC QP, a unicast GID, a detach of a QP not attached (EINVAL), attaching
 *     twice (0), the per-group limit (56 QPs: ENOMEM), device limits; iWARP: EOPNOTSUPP, 0 caps.
 * As root, then, in a network namespace of its own (veth pair va / vb, fd00::1 and fd00::2,
 * 10.9.0.1 and 10.9.0.2): an IPv6 group (ff0e::1:2) and an IPv4 one from roce_va to QPs on
 * roce_va (the host's own copy, IP_MULTICAST_LOOP) and roce_vb (across the link): IPv6
 * multicast does not loop back through lo, a real interface is needed. */
#define _GNU_SOURCE
#include "check.h"

#include <endian.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "softrdma.h"
#include "vutil.h"

#define LEN   600 /* payload bytes per message */
#define GRH   40
#define SLOT  (GRH + LEN)
#define NRECV 64
#define MSGS  8
#define QKEY  0x0BADCAFEu
#define QKEY2 0x0BADCAFFu
#define MCQPN 0xFFFFFFu

static const uint8_t group4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 230, 1, 2, 3};
static const uint8_t lo4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};

/* A UD QP with its CQ and NRECV receive slots (or a sender: send slots in the same buffer). */
struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq, *scq; /* receive, send */
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_qp *qp;
	int posted; /* receives posted, not yet completed */
};

static void ep_open(struct ep *e, struct ibv_context *ctx, uint32_t qkey)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ctx;
	e->pd = ibv_alloc_pd(ctx);
	e->cq = ibv_create_cq(ctx, 4 * NRECV, NULL, NULL, 0);
	e->scq = ibv_create_cq(ctx, 4 * NRECV, NULL, NULL, 0);
	e->buf = calloc(2 * NRECV, SLOT);
	REQUIRE(e->pd && e->cq && e->scq && e->buf);
	e->mr = ibv_reg_mr(e->pd, e->buf, 2 * NRECV * SLOT, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(e->mr);
	struct ibv_qp_init_attr qia = {
	    .send_cq = e->scq,
	    .recv_cq = e->cq,
	    .qp_type = IBV_QPT_UD,
	    .cap = {.max_send_wr = 64, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1}};
	e->qp = ibv_create_qp(e->pd, &qia);
	REQUIRE(e->qp);
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
	REQUIRE(ibv_modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY) == 0);
	a.qp_state = IBV_QPS_RTR;
	REQUIRE(ibv_modify_qp(e->qp, &a, IBV_QP_STATE) == 0);
	a.qp_state = IBV_QPS_RTS;
	REQUIRE(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == 0);
}

static void ep_post_recvs(struct ep *e)
{
	while (e->posted < NRECV) {
		int slot = e->posted;
		vt_post_recv(e->qp, e->mr, e->buf + (size_t)slot * SLOT, SLOT, (uint64_t)slot);
		e->posted++;
	}
}

static void ep_close(struct ep *e)
{
	if (e->qp)
		CHECK_EQ(ibv_destroy_qp(e->qp), 0);
	CHECK_EQ(ibv_dereg_mr(e->mr), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_destroy_cq(e->scq), 0);
	CHECK_EQ(ibv_dealloc_pd(e->pd), 0);
	free(e->buf);
}

static int gid_index(struct ibv_context *ctx, const uint8_t want[16])
{
	struct ibv_port_attr pa;
	REQUIRE(ibv_query_port(ctx, 1, &pa) == 0);
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		union ibv_gid g;
		if (ibv_query_gid(ctx, 1, i, &g) == 0 && !memcmp(g.raw, want, 16))
			return i;
	}
	return -1;
}

static struct ibv_ah *group_ah(struct ep *e, const uint8_t grp[16], const uint8_t src[16])
{
	struct ibv_ah_attr a = {.is_global = 1, .port_num = 1, .dlid = 0xFFFF};
	memcpy(a.grh.dgid.raw, grp, 16);
	int gi = gid_index(e->ctx, src);
	REQUIRE(gi >= 0);
	a.grh.sgid_index = (uint8_t)gi;
	a.grh.hop_limit = 64;
	struct ibv_ah *ah = ibv_create_ah(e->pd, &a);
	REQUIRE(ah);
	return ah;
}

/* Sends n messages, tags tag*100 + i, to ah / qpn; waits for their send completions. */
static void send_msgs(struct ep *s, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, int tag, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t t = (uint32_t)(tag * 100 + i);
		uint8_t *p = s->buf + (size_t)(NRECV + i) * SLOT;
		vt_fill(p, LEN, t);
		struct ibv_sge sge = {.addr = (uintptr_t)p, .length = LEN, .lkey = s->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = 1000 + t,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND_WITH_IMM,
					 .send_flags = IBV_SEND_SIGNALED,
					 .imm_data = htobe32(t)},
				   *bad;
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = qpn;
		wr.wr.ud.remote_qkey = qkey;
		REQUIRE(ibv_post_send(s->qp, &wr, &bad) == 0);
	}
	for (int got = 0; got < n; got++) {
		struct ibv_wc wc = vt_wait_wc(s->scq, 3000);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
	}
}

/* Waits for n receives with tags tag*100 + 0..n-1, in order, from src_qpn, and checks them
 * (payload, completion, GRH area: IPv4 header with the group as destination, or the IPv6
 * header). Returns how many were good. */
static int expect_msgs(struct ep *e, int tag, int n, uint32_t src_qpn, const uint8_t grp[16],
		       const uint8_t src[16])
{
	bool v6 = memcmp(grp, group4, 12) != 0;
	int good = 0;
	uint8_t want[LEN];
	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;
		uint64_t stop = vt_now_ms() + 3000;
		int r;
		while ((r = ibv_poll_cq(e->cq, 1, &wc)) == 0 && vt_now_ms() < stop)
			;
		if (r != 1) {
			fprintf(stderr, "QP 0x%06x: message %d of %d missing\n", e->qp->qp_num, i,
				n);
			CHECK(0 && "message missing");
			return good;
		}
		e->posted--;
		uint32_t t = (uint32_t)(tag * 100 + i);
		const uint8_t *p = e->buf + wc.wr_id * SLOT;
		vt_fill(want, LEN, t);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_RECV);
		CHECK_EQ(wc.byte_len, GRH + LEN);
		CHECK_EQ(wc.src_qp, src_qpn);
		CHECK(wc.wc_flags & IBV_WC_GRH);
		CHECK(wc.wc_flags & IBV_WC_WITH_IMM);
		CHECK_EQ(be32toh(wc.imm_data), t);
		CHECK_MEM(p + GRH, want, LEN);
		if (v6) {
			CHECK_EQ(p[0] >> 4, 6);
			CHECK_MEM(p + 8, src, 16);
			CHECK_MEM(p + 24, grp, 16);
		} else {
			CHECK_EQ(p[20], 0x45);
			CHECK_MEM(p + 20 + 12, src + 12, 4);
			CHECK_MEM(p + 20 + 16, grp + 12, 4);
		}
		if (wc.status == IBV_WC_SUCCESS && be32toh(wc.imm_data) == t &&
		    !memcmp(p + GRH, want, LEN))
			good++;
	}
	ep_post_recvs(e);
	return good;
}

/* Receives during ms; returns how many arrived (0 expected). */
static int quiet(struct ep *e, int ms)
{
	int n = 0;
	uint64_t stop = vt_now_ms() + (uint64_t)ms;
	while (vt_now_ms() < stop) {
		struct ibv_wc wc;
		int r = ibv_poll_cq(e->cq, 1, &wc);
		REQUIRE(r >= 0);
		if (r == 1) {
			n++;
			e->posted--;
		}
	}
	ep_post_recvs(e);
	return n;
}

static uint64_t ctr(struct ibv_context *ctx, struct ibv_qp *qp, const char *name)
{
	uint64_t v = softrdma_counter(ctx, qp, name);
	return v == UINT64_MAX ? 0 : v;
}

/* ---- the second process: commands over a socketpair ---- */

enum { CMD_ATTACH, CMD_EXPECT, CMD_QUIET, CMD_DETACH, CMD_COUNTER, CMD_EXIT };
struct cmd {
	int op;
	int tag, n;
	uint32_t src_qpn;
};

static void child_main(int fd)
{
	check_failures = check_count = 0; /* the parent's, copied by fork */
	struct ibv_context *ctx = ibv_open_device(vt_find_dev("roce_lo"));
	REQUIRE(ctx);
	struct ep e;
	ep_open(&e, ctx, QKEY);
	ep_post_recvs(&e);
	union ibv_gid g;
	memcpy(g.raw, group4, 16);
	for (;;) {
		struct cmd c;
		long long reply = 0;
		if (read(fd, &c, sizeof(c)) != (ssize_t)sizeof(c))
			break;
		switch (c.op) {
		case CMD_ATTACH:
			reply = ibv_attach_mcast(e.qp, &g, 0);
			break;
		case CMD_EXPECT:
			reply = expect_msgs(&e, c.tag, c.n, c.src_qpn, group4, lo4);
			break;
		case CMD_QUIET:
			reply = quiet(&e, c.n);
			break;
		case CMD_DETACH:
			reply = ibv_detach_mcast(e.qp, &g, 0);
			break;
		case CMD_COUNTER:
			reply = (long long)ctr(ctx, NULL, "rx_mcast_unicast");
			break;
		}
		if (c.op == CMD_EXIT)
			break;
		reply = reply * 1000 + (check_failures > 999 ? 999 : check_failures);
		if (write(fd, &reply, sizeof(reply)) != (ssize_t)sizeof(reply))
			break;
	}
	ep_close(&e);
	ibv_close_device(ctx);
	_exit(check_failures ? 1 : 0);
}

static long long child_cmd(int fd, int op, int tag, int n, uint32_t src_qpn)
{
	struct cmd c = {.op = op, .tag = tag, .n = n, .src_qpn = src_qpn};
	long long reply = -1;
	REQUIRE(write(fd, &c, sizeof(c)) == (ssize_t)sizeof(c));
	if (op == CMD_EXIT)
		return 0;
	REQUIRE(read(fd, &reply, sizeof(reply)) == (ssize_t)sizeof(reply));
	CHECK_EQ(reply % 1000, 0); /* the child's own check failures so far */
	return reply / 1000;
}

/* ---- parts ---- */

static void bad_arguments(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	REQUIRE(ibv_query_device(ctx, &da) == 0);
	CHECK_EQ(da.max_mcast_grp, 8192);
	CHECK_EQ(da.max_mcast_qp_attach, 56);
	CHECK_EQ(da.max_total_mcast_qp_attach, 0x70000);

	struct ep u;
	ep_open(&u, ctx, QKEY);
	union ibv_gid g;
	/* Not multicast: the device's own address, ::1, ::, 223.255.255.255, fe80::1. */
	const uint8_t *bad[] = {lo4, (const uint8_t[16]){[15] = 1}, (const uint8_t[16]){0},
				(const uint8_t[16]){[10] = 0xff, 0xff, 223, 255, 255, 255},
				(const uint8_t[16]){0xfe, 0x80, [15] = 1}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(g.raw, bad[i], 16);
		CHECK_EQ(ibv_attach_mcast(u.qp, &g, 0), EINVAL);
		CHECK_EQ(ibv_detach_mcast(u.qp, &g, 0), EINVAL);
	}
	memcpy(g.raw, group4, 16);
	CHECK_EQ(ibv_detach_mcast(u.qp, &g, 0), EINVAL); /* never attached */
	CHECK_EQ(ibv_attach_mcast(u.qp, &g, 0), 0);
	CHECK_EQ(ibv_attach_mcast(u.qp, &g, 0xC001), 0); /* again: nothing changes; LID ignored */
	CHECK_EQ(ibv_detach_mcast(u.qp, &g, 0), 0);
	CHECK_EQ(ibv_detach_mcast(u.qp, &g, 0), EINVAL); /* once was enough */
	/* An IPv4 group at the edges of 224.0.0.0/4. */
	uint8_t edge[16];
	memcpy(edge, group4, 16);
	edge[12] = 239, edge[13] = 255, edge[14] = 255, edge[15] = 254;
	memcpy(g.raw, edge, 16);
	CHECK_EQ(ibv_attach_mcast(u.qp, &g, 0), 0);
	CHECK_EQ(ibv_detach_mcast(u.qp, &g, 0), 0);

	/* An RC QP. */
	struct ibv_qp_init_attr rc = {
	    .send_cq = u.cq,
	    .recv_cq = u.cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *rq = ibv_create_qp(u.pd, &rc);
	REQUIRE(rq);
	memcpy(g.raw, group4, 16);
	CHECK_EQ(ibv_attach_mcast(rq, &g, 0), EINVAL);
	CHECK_EQ(ibv_detach_mcast(rq, &g, 0), EINVAL);
	CHECK_EQ(ibv_destroy_qp(rq), 0);

	/* rxe's limit: 56 QPs per group, then ENOMEM; the 56 stay attached. */
	enum { N = 57 };
	struct ibv_qp *qps[N];
	struct ibv_qp_init_attr ud = rc;
	ud.qp_type = IBV_QPT_UD;
	int ok = 0;
	for (int i = 0; i < N; i++) {
		qps[i] = ibv_create_qp(u.pd, &ud);
		REQUIRE(qps[i]);
		int r = ibv_attach_mcast(qps[i], &g, 0);
		if (i < 56)
			ok += r == 0;
		else
			CHECK_EQ(r, ENOMEM);
	}
	CHECK_EQ(ok, 56);
	CHECK_EQ(ibv_detach_mcast(qps[N - 1], &g, 0), EINVAL);
	CHECK_EQ(ibv_detach_mcast(qps[0], &g, 0), 0);
	CHECK_EQ(ibv_attach_mcast(qps[N - 1], &g, 0), 0); /* room again */
	for (int i = 0; i < N; i++)
		CHECK_EQ(ibv_destroy_qp(qps[i]), 0); /* destroyed while attached */
	CHECK_EQ(ctr(ctx, NULL, "mcast_joins"), ctr(ctx, NULL, "mcast_leaves"));
	ep_close(&u);

	/* iWARP: no multicast, as siw. */
	struct ibv_context *iw = ibv_open_device(vt_find_dev("iwarp_lo"));
	REQUIRE(iw);
	REQUIRE(ibv_query_device(iw, &da) == 0);
	CHECK_EQ(da.max_mcast_grp, 0);
	CHECK_EQ(da.max_mcast_qp_attach, 0);
	CHECK_EQ(da.max_total_mcast_qp_attach, 0);
	struct ibv_pd *pd = ibv_alloc_pd(iw);
	struct ibv_cq *cq = ibv_create_cq(iw, 4, NULL, NULL, 0);
	rc.send_cq = rc.recv_cq = cq;
	struct ibv_qp *iq = ibv_create_qp(pd, &rc);
	REQUIRE(pd && cq && iq);
	CHECK_EQ(ibv_attach_mcast(iq, &g, 0), EOPNOTSUPP);
	CHECK_EQ(ibv_detach_mcast(iq, &g, 0), EOPNOTSUPP);
	CHECK_EQ(ibv_destroy_qp(iq), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(iw), 0);
}

static void loopback(int cfd)
{
	struct ibv_device *dev = vt_find_dev("roce_lo");
	struct ibv_context *A = ibv_open_device(dev), *B = ibv_open_device(dev);
	REQUIRE(A && B);
	bad_arguments(A);
	uint64_t joins0 = ctr(A, NULL, "mcast_joins"), leaves0 = ctr(A, NULL, "mcast_leaves");

	union ibv_gid g;
	memcpy(g.raw, group4, 16);
	struct ep a1, a2, a3, b1, s;
	ep_open(&a1, A, QKEY);
	ep_open(&a2, A, QKEY);
	ep_open(&a3, A, QKEY2); /* another Q_Key */
	ep_open(&b1, B, QKEY);
	ep_open(&s, A, QKEY);
	struct ep *rx[] = {&a1, &a2, &a3, &b1};
	for (int i = 0; i < 4; i++) {
		ep_post_recvs(rx[i]);
		CHECK_EQ(ibv_attach_mcast(rx[i]->qp, &g, 0), 0);
	}
	CHECK_EQ(child_cmd(cfd, CMD_ATTACH, 0, 0, 0), 0);
	struct ibv_ah *ah = group_ah(&s, group4, lo4);
	uint32_t sq = s.qp->qp_num;

	/* 1. Every attached QP of both contexts and of the other process gets every message; the
	 * sender, not attached, none. */
	send_msgs(&s, ah, MCQPN, QKEY, 1, MSGS);
	CHECK_EQ(expect_msgs(&a1, 1, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&a2, 1, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&b1, 1, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(child_cmd(cfd, CMD_EXPECT, 1, MSGS, sq), MSGS);
	CHECK_EQ(quiet(&a3, 100), 0);
	CHECK_EQ(ctr(A, a3.qp, "drop_qkey"), MSGS);
	CHECK_EQ(ctr(A, NULL, "rx_mcast"), MSGS);
	CHECK_EQ(ctr(A, NULL, "mcast_deliveries"), 3 * MSGS);
	CHECK_EQ(ctr(B, NULL, "mcast_deliveries"), MSGS);
	CHECK_EQ(ctr(A, NULL, "mcast_joins"), joins0 + 1);

	/* 2. The sender attached: its own messages come back to it too (rxe delivers to every QP
	 * of the group, the sending host's included). */
	ep_post_recvs(&s);
	CHECK_EQ(ibv_attach_mcast(s.qp, &g, 0), 0);
	send_msgs(&s, ah, MCQPN, QKEY, 2, MSGS);
	CHECK_EQ(expect_msgs(&s, 2, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&a1, 2, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(child_cmd(cfd, CMD_EXPECT, 2, MSGS, sq), MSGS);
	CHECK_EQ(expect_msgs(&a2, 2, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&b1, 2, MSGS, sq, group4, lo4), MSGS);

	/* 3. A unicast DestQP to the group's address, and DestQP 0xFFFFFF to a unicast one: no
	 * QP anywhere takes them, each is counted. */
	send_msgs(&s, ah, a1.qp->qp_num, QKEY, 3, 1);
	struct ibv_ah *uah = group_ah(&s, lo4, lo4);
	send_msgs(&s, uah, MCQPN, QKEY, 3, 1);
	CHECK_EQ(quiet(&a1, 200), 0);
	CHECK_EQ(quiet(&b1, 0), 0);
	CHECK_EQ(quiet(&s, 0), 0);
	CHECK_EQ(child_cmd(cfd, CMD_QUIET, 0, 0, 0), 0);
	CHECK_EQ(ctr(A, NULL, "rx_mcast_bad_qpn"), 1);
	CHECK_EQ(ctr(B, NULL, "rx_mcast_bad_qpn"), 1);
	CHECK_EQ(ctr(A, NULL, "rx_mcast_unicast") + ctr(B, NULL, "rx_mcast_unicast") +
		     (uint64_t)child_cmd(cfd, CMD_COUNTER, 0, 0, 0),
		 1);
	CHECK_EQ(ibv_destroy_ah(uah), 0);

	/* 4. Detached (here and in the other process): no more delivery there. B's last QP left:
	 * its socket is closed. */
	CHECK_EQ(ibv_detach_mcast(b1.qp, &g, 0), 0);
	CHECK_EQ(child_cmd(cfd, CMD_DETACH, 0, 0, 0), 0);
	CHECK_EQ(ctr(B, NULL, "mcast_leaves"), 1);
	send_msgs(&s, ah, MCQPN, QKEY, 4, MSGS);
	CHECK_EQ(expect_msgs(&a1, 4, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&a2, 4, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&s, 4, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(quiet(&b1, 200), 0);
	CHECK_EQ(child_cmd(cfd, CMD_QUIET, 0, 100, 0), 0);
	CHECK_EQ(ctr(B, NULL, "rx_mcast"), 2 * MSGS + 1);

	/* 5. A QP destroyed while attached leaves the group; the others stay. */
	CHECK_EQ(ibv_destroy_qp(a1.qp), 0);
	a1.qp = NULL;
	send_msgs(&s, ah, MCQPN, QKEY, 5, MSGS);
	CHECK_EQ(expect_msgs(&a2, 5, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(expect_msgs(&s, 5, MSGS, sq, group4, lo4), MSGS);
	CHECK_EQ(ibv_detach_mcast(s.qp, &g, 0), 0);
	CHECK_EQ(ibv_detach_mcast(a3.qp, &g, 0), 0);
	CHECK_EQ(ctr(A, NULL, "mcast_leaves"), leaves0);
	CHECK_EQ(ibv_detach_mcast(a2.qp, &g, 0), 0); /* the last one: A leaves */
	CHECK_EQ(ctr(A, NULL, "mcast_leaves"), leaves0 + 1);
	CHECK_EQ(ctr(A, NULL, "rx_mcast_no_group") + ctr(A, NULL, "udp_rx_misdelivered"), 0);

	CHECK_EQ(ibv_destroy_ah(ah), 0);
	for (int i = 0; i < 4; i++)
		ep_close(rx[i]);
	ep_close(&s);
	CHECK_EQ(ibv_close_device(A), 0);
	CHECK_EQ(ibv_close_device(B), 0);
}

/* IPv6 (and IPv4) across a veth pair in a namespace of our own (root). Returns after the
 * forked child that runs it has ended; its checks count through its exit status. */
static int netns_part(void)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		check_failures = check_count = 0;
		if (unshare(CLONE_NEWNET) != 0)
			_exit(77);
		if (system("ip link set lo up && ip link add va type veth peer name vb && "
			   "ip link set va up && ip link set vb up && "
			   "ip addr add 10.9.0.1/24 dev va && ip addr add 10.9.0.2/24 dev vb && "
			   "ip addr add fd00::1/64 dev va nodad && ip addr add fd00::2/64 dev vb "
			   "nodad && "
			   /* vb gets datagrams from an address of its own host (one namespace) */
			   "echo 1 > /proc/sys/net/ipv4/conf/vb/accept_local && "
			   "echo 0 > /proc/sys/net/ipv4/conf/all/rp_filter && "
			   "echo 0 > /proc/sys/net/ipv4/conf/vb/rp_filter") != 0)
			_exit(77);
		struct ibv_context *va = ibv_open_device(vt_find_dev("roce_va"));
		struct ibv_context *vb = ibv_open_device(vt_find_dev("roce_vb"));
		REQUIRE(va && vb);
		static const uint8_t g6[16] = {0xff, 0x0e, [13] = 1, [15] = 2};
		static const uint8_t a6[16] = {0xfd, 0x00, [15] = 1};
		static const uint8_t g4[16] = {[10] = 0xff, 0xff, 239, 9, 9, 9};
		static const uint8_t a4[16] = {[10] = 0xff, 0xff, 10, 9, 0, 1};
		struct {
			const uint8_t *grp, *src;
		} cases[] = {{g6, a6}, {g4, a4}};
		for (int k = 0; k < 2; k++) {
			struct ep s, ra, rb;
			ep_open(&s, va, QKEY);
			ep_open(&ra, va, QKEY);
			ep_open(&rb, vb, QKEY);
			union ibv_gid g;
			memcpy(g.raw, cases[k].grp, 16);
			ep_post_recvs(&ra);
			ep_post_recvs(&rb);
			CHECK_EQ(ibv_attach_mcast(ra.qp, &g, 0), 0);
			CHECK_EQ(ibv_attach_mcast(rb.qp, &g, 0), 0);
			struct ibv_ah *ah = group_ah(&s, cases[k].grp, cases[k].src);
			send_msgs(&s, ah, MCQPN, QKEY, 6 + k, MSGS);
			uint32_t sq = s.qp->qp_num;
			CHECK_EQ(expect_msgs(&ra, 6 + k, MSGS, sq, cases[k].grp, cases[k].src),
				 MSGS);
			CHECK_EQ(expect_msgs(&rb, 6 + k, MSGS, sq, cases[k].grp, cases[k].src),
				 MSGS);
			CHECK_EQ(ibv_detach_mcast(rb.qp, &g, 0), 0);
			send_msgs(&s, ah, MCQPN, QKEY, 8 + k, 1);
			CHECK_EQ(expect_msgs(&ra, 8 + k, 1, sq, cases[k].grp, cases[k].src), 1);
			CHECK_EQ(quiet(&rb, 200), 0);
			CHECK_EQ(ibv_destroy_ah(ah), 0);
			ep_close(&s);
			ep_close(&ra);
			ep_close(&rb);
		}
		ibv_close_device(va);
		ibv_close_device(vb);
		printf("netns: IPv6 ff0e::1:2 and IPv4 239.9.9.9 over veth: %d checks, %d failed\n",
		       check_count, check_failures);
		fflush(stdout);
		_exit(check_failures ? 1 : 0);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int main(void)
{
	/* A UDP port of our own (both processes inherit it): the counts of drops that reach the
	 * port's default member are then ours, not another softrdma program's on this host. */
	char port[16];
	snprintf(port, sizeof(port), "%d", 20000 + (int)(getpid() % 20000));
	if (!getenv("SOFTRDMA_UDP_PORT"))
		setenv("SOFTRDMA_UDP_PORT", port, 1);
	/* The namespace part first, in a child that shares nothing of ours yet. */
	if (geteuid() == 0) {
		int r = netns_part();
		if (r == 77)
			printf("netns part skipped (no network namespace or no ip(8))\n");
		else
			CHECK_EQ(r, 0);
	} else {
		printf("netns part skipped: not root\n");
	}
	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		child_main(sv[1]);
	}
	close(sv[1]);
	loopback(sv[0]);
	child_cmd(sv[0], CMD_EXIT, 0, 0, 0);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return check_exit();
}
