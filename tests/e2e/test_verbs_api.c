/* Verbs semantics beyond the data path, over real sockets on loopback: device list and
 * queries, completion channels (a blocked application is woken by the progress thread, the
 * fd is pollable, solicited-only arming), SRQs shared by two QPs with the limit event, and
 * asynchronous events (communication established, SRQ limit), flush on ERR, and a QP reset and
 * connected again.
 *
 * The device is roce_lo, or the one $SOFTRDMA_TEST_DEV or --dev NAME names. Everything here
 * exists on iWARP (iwarp_lo: the QPs connect the same way, softrdma making the TCP connection
 * and the MPA exchange, core/iw_progress.h) and runs there too; only the device's identity
 * differs (transport iWARP, node type RNIC, no atomics, GIDs typed as IB as on siw).
 * $SOFTRDMA_IW_PORT (the rendezvous port) is made random per process unless it is set. */
#define _GNU_SOURCE
#include "check.h"
#include "softrdma.h"

#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define BUF		 65536
#define SR_TEST_MAX_GID	 64
#define SR_TEST_HUGE_CQE (1u << 20) /* above every device's max_cqe */

static const char *dev_name = "roce_lo"; /* $SOFTRDMA_TEST_DEV or --dev */
static bool iw;				 /* the device is iWARP */

static struct ibv_device *lo_device(struct ibv_device ***list)
{
	int n;
	*list = ibv_get_device_list(&n);
	REQUIRE(*list && n >= 1);
	REQUIRE((*list)[n] == NULL); /* NULL-terminated */
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name((*list)[i]), dev_name))
			return (*list)[i];
	return NULL;
}

/* Memory that is not mapped, or not with the rights asked, is refused at registration with
 * EFAULT, as rxe (which pins the pages): a peer's access to it would kill the process. */
static void reg_unmapped(struct ibv_pd *pd, bool iwarp)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *m =
	    mmap(NULL, 4 * (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(m != MAP_FAILED);
	REQUIRE(munmap(m + pg, (size_t)pg) == 0);		   /* page 1: a hole */
	REQUIRE(mprotect(m + 2 * pg, (size_t)pg, PROT_READ) == 0); /* page 2: read only */
	REQUIRE(mprotect(m + 3 * pg, (size_t)pg, PROT_NONE) == 0); /* page 3: no access */
	const unsigned rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct {
		size_t off, len;
		unsigned access;
		bool ok;
	} cases[] = {
	    {0, (size_t)pg, rw, true},
	    {0, 2 * (size_t)pg, rw, false},			 /* into the hole */
	    {(size_t)pg - 8, 16, IBV_ACCESS_REMOTE_READ, false}, /* a byte of it */
	    {2 * (size_t)pg, (size_t)pg, IBV_ACCESS_REMOTE_READ, true},
	    {2 * (size_t)pg, (size_t)pg, IBV_ACCESS_LOCAL_WRITE, false},
	    {2 * (size_t)pg, 8, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE, false},
	    {3 * (size_t)pg, (size_t)pg, IBV_ACCESS_REMOTE_READ, false},
	    {2 * (size_t)pg, 2 * (size_t)pg, 0, false},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		errno = 0;
		struct ibv_mr *mr =
		    ibv_reg_mr(pd, m + cases[i].off, cases[i].len, (int)cases[i].access);
		if (cases[i].ok) {
			CHECK(mr != NULL);
		} else {
			CHECK(mr == NULL);
			CHECK_EQ(errno, EFAULT);
		}
		if (mr)
			CHECK_EQ(ibv_dereg_mr(mr), 0);
	}
	if (!iwarp) { /* rereg onto the hole: refused as the kernel's command (siw has no rereg) */
		struct ibv_mr *mr = ibv_reg_mr(pd, m, (size_t)pg, (int)rw);
		REQUIRE(mr);
		errno = 0;
		CHECK_EQ(
		    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, m + pg, (size_t)pg, 0),
		    IBV_REREG_MR_ERR_CMD);
		CHECK_EQ(errno, EFAULT);
		CHECK(mr->addr == m);
		CHECK_EQ(ibv_dereg_mr(mr), 0);
	}
	munmap(m, (size_t)pg);
	munmap(m + 2 * pg, 2 * (size_t)pg);
}

static void queries(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(ctx, &da), 0);
	CHECK_EQ(da.phys_port_cnt, 1);
	CHECK(da.max_qp_wr >= 1024);
	CHECK_EQ(da.atomic_cap, iw ? IBV_ATOMIC_NONE : IBV_ATOMIC_HCA); /* RDMAP has none */
	/* rxe and siw both allow 128 outstanding READs / atomics each way; perftest sets a QP's
	 * max_rd_atomic to what the peer device advertises. */
	CHECK_EQ(da.max_qp_rd_atom, 128);
	CHECK_EQ(da.max_qp_init_rd_atom, 128);
	struct ibv_device_attr_ex dax;
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &dax), 0);
	CHECK_EQ(dax.orig_attr.max_qp_wr, da.max_qp_wr);
	struct ibv_port_attr pa;
	CHECK_EQ(ibv_query_port(ctx, 1, &pa), 0);
	CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
	CHECK_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	CHECK_EQ(pa.active_mtu, IBV_MTU_4096); /* lo: MTU 65536 -> 4096, as rxe */
	CHECK(pa.gid_tbl_len >= 1);
	CHECK(ibv_query_port(ctx, 2, &pa) != 0);
	union ibv_gid gid;
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	static const uint8_t lo_v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
	CHECK_MEM(gid.raw, lo_v4, 16);
	struct ibv_gid_entry ge;
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &ge, 0), 0);
	/* iWARP GIDs are plain IP addresses: siw reports them as IB type. */
	CHECK_EQ(ge.gid_type, iw ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2);
	CHECK_MEM(ge.gid.raw, lo_v4, 16);
	CHECK(ibv_query_gid_ex(ctx, 1, 200, &ge, 0) != 0);
	CHECK(ibv_query_gid(ctx, 1, 200, &gid) != 0);
	/* The whole table, or EINVAL when it does not fit (regression: a too-small buffer gave a
	 * count, as if the table were that short; rdma-core and the kernel fail instead). */
	struct ibv_gid_entry tbl[SR_TEST_MAX_GID];
	ssize_t ng = ibv_query_gid_table(ctx, tbl, SR_TEST_MAX_GID, 0);
	CHECK(ng >= 1 && ng <= pa.gid_tbl_len);
	CHECK_MEM(tbl[0].gid.raw, lo_v4, 16);
	CHECK_EQ(tbl[0].gid_index, 0);
	CHECK_EQ(tbl[0].port_num, 1);
	CHECK_EQ(ibv_query_gid_table(ctx, tbl, (size_t)ng, 0), ng);
	CHECK_EQ(ibv_query_gid_table(ctx, tbl, (size_t)ng - 1, 0), -EINVAL);
	CHECK_EQ(ibv_query_gid_table(ctx, NULL, 0, 0), -EINVAL);
	/* cmd_fd is a real descriptor (regression: -1, which pyverbs' shared-PD test dups);
	 * importing a device through it is not offered: EOPNOTSUPP. */
	int fd = dup(ctx->cmd_fd);
	CHECK(fd >= 0);
	errno = 0;
	CHECK(ibv_import_device(fd) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	if (fd >= 0)
		close(fd);
	__be16 pkey;
	CHECK_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	CHECK_EQ(be16toh(pkey), 0xFFFF);
}

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void connect_qp(struct ibv_qp *qp, uint32_t dest, int gid_index, union ibv_gid dgid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 100;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.dgid = dgid;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

static void end_open(struct end *e, struct ibv_device *dev, bool with_srq)
{
	memset(e, 0, sizeof(*e));
	e->ctx = ibv_open_device(dev);
	REQUIRE(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->ch = ibv_create_comp_channel(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 64, (void *)0x1234, e->ch, 0);
	e->buf = calloc(1, BUF);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(e->pd && e->ch && e->cq && e->buf && e->mr);
	if (with_srq) {
		struct ibv_srq_init_attr sa = {.attr = {.max_wr = 16, .max_sge = 1}};
		e->srq = ibv_create_srq(e->pd, &sa);
		REQUIRE(e->srq);
	}
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr qia = {.send_cq = e->cq,
					       .recv_cq = e->cq,
					       .srq = e->srq,
					       .qp_type = IBV_QPT_RC,
					       .cap = {.max_send_wr = 16,
						       .max_recv_wr = 16,
						       .max_send_sge = 1,
						       .max_recv_sge = 1}};
		e->qp[i] = ibv_create_qp(e->pd, &qia);
		REQUIRE(e->qp[i]);
		/* A new QP is in RESET; on iWARP in INIT, as on siw (whose RESET and INIT are
		 * one state, IDLE, reported as INIT). Regression: iWARP reported RESET. The
		 * ibv_qp's copy is libibverbs': RESET at create, then what a query found. */
		CHECK_EQ(e->qp[i]->state, IBV_QPS_RESET);
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qi;
		CHECK_EQ(ibv_query_qp(e->qp[i], &qa, IBV_QP_STATE, &qi), 0);
		CHECK_EQ(qa.qp_state, iw ? IBV_QPS_INIT : IBV_QPS_RESET);
		CHECK_EQ(e->qp[i]->state, qa.qp_state);
	}
}

static void end_close(struct end *e)
{
	for (int i = 0; i < 2; i++)
		if (e->qp[i])
			CHECK_EQ(ibv_destroy_qp(e->qp[i]), 0);
	if (e->srq)
		CHECK_EQ(ibv_destroy_srq(e->srq), 0);
	CHECK_EQ(ibv_dereg_mr(e->mr), 0);
	CHECK_EQ(ibv_destroy_cq(e->cq), 0);
	CHECK_EQ(ibv_destroy_comp_channel(e->ch), 0);
	CHECK_EQ(ibv_dealloc_pd(e->pd), 0);
	CHECK_EQ(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

static void send_msg(struct end *e, int q, uint32_t len, unsigned flags, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)e->buf, .length = len, .lkey = e->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED | flags},
			   *bad;
	CHECK_EQ(ibv_post_send(e->qp[q], &wr, &bad), 0);
}

/* Blocks in ibv_get_cq_event (the progress thread must deliver), with a watchdog via poll. */
static int wait_event(struct end *e)
{
	struct pollfd pfd = {.fd = e->ch->fd, .events = POLLIN};
	if (poll(&pfd, 1, 5000) != 1)
		return -1;
	struct ibv_cq *cq;
	void *cq_ctx;
	if (ibv_get_cq_event(e->ch, &cq, &cq_ctx))
		return -1;
	CHECK(cq == e->cq);
	CHECK(cq_ctx == (void *)0x1234);
	ibv_ack_cq_events(cq, 1);
	return 0;
}

static int drain(struct ibv_cq *cq, struct ibv_wc *wc, int want)
{
	int got = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < want) {
		got += ibv_poll_cq(cq, want - got, wc + got);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 5)
			break;
	}
	return got;
}

static void post_srq(struct end *e, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)e->buf + 1024 * (unsigned)(i % 32),
				      .length = 1024,
				      .lkey = e->mr->lkey};
		struct ibv_recv_wr wr = {.wr_id = 1000 + (uint64_t)i,
					 .sg_list = &sge,
					 .num_sge = 1},
				   *bad;
		CHECK_EQ(ibv_post_srq_recv(e->srq, &wr, &bad), 0);
	}
}

/* A QP pair reset and connected again works like a new one (same QPNs), and carries a SEND
 * each way. Pair 0: a.qp[0] was moved to ERR and is back in INIT (ERR -> RESET -> INIT); its
 * peer b.qp[0] is in RTS (on iWARP too: a's QP left the stream in order, and an auto-connected
 * QP whose peer went away stays as it is, as on RoCE). b's is reset first, then a's. Pair 1: both
 * in RTS with a live connection; a's is reset first, so that on iWARP the reset of the connection
 * races with b's own move to RESET (which must win: the old stream is gone for good). */
static void reconnect(struct end *a, struct end *b, int q)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct ibv_qp_attr rst = {.qp_state = IBV_QPS_RESET};
	if (q == 0) {
		if (iw) {
			/* b's QP sees the end of a's stream in its own time (up to 10 s) and,
			 * auto-connected, stays in RTS as a RoCE QP would (nothing flushed). */
			struct timespec t0, t, ms = {0, 1000000};
			clock_gettime(CLOCK_MONOTONIC, &t0);
			while (softrdma_counter(b->ctx, NULL, "iw_peer_closed") < 1) {
				clock_gettime(CLOCK_MONOTONIC, &t);
				if (t.tv_sec - t0.tv_sec >= 10)
					break;
				nanosleep(&ms, NULL);
			}
			CHECK_EQ(softrdma_counter(b->ctx, NULL, "iw_peer_closed"), 1);
			CHECK_EQ(ibv_query_qp(b->qp[0], &qa, IBV_QP_STATE, &qi), 0);
			CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
		}
		CHECK_EQ(ibv_modify_qp(b->qp[0], &rst, IBV_QP_STATE), 0);
		CHECK_EQ(ibv_modify_qp(a->qp[0], &rst, IBV_QP_STATE), 0);
	} else {
		CHECK_EQ(ibv_query_qp(b->qp[q], &qa, IBV_QP_STATE, &qi), 0);
		CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
		CHECK_EQ(ibv_modify_qp(a->qp[q], &rst, IBV_QP_STATE), 0);
		CHECK_EQ(ibv_modify_qp(b->qp[q], &rst, IBV_QP_STATE), 0);
	}
	/* iWARP: RESET empties the QP and leaves it idle, shown as INIT (siw). */
	CHECK_EQ(ibv_query_qp(a->qp[q], &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, iw ? IBV_QPS_INIT : IBV_QPS_RESET);
	CHECK_EQ(ibv_query_qp(b->qp[q], &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, iw ? IBV_QPS_INIT : IBV_QPS_RESET);
	union ibv_gid ga, gb;
	ibv_query_gid(a->ctx, 1, 0, &ga);
	ibv_query_gid(b->ctx, 1, 0, &gb);
	connect_qp(a->qp[q], b->qp[q]->qp_num, 0, gb);
	connect_qp(b->qp[q], a->qp[q]->qp_num, 0, ga);
	/* a -> b: b's receive comes from its SRQ (3 of the 8 are left for pair 0, 2 for 1). */
	struct ibv_wc wc[2];
	for (int i = 0; i < 100; i++)
		a->buf[i] = (uint8_t)(i * 3 + 1 + q);
	send_msg(a, q, 100, 0, 20);
	CHECK_EQ(drain(a->cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 20);
	CHECK_EQ(drain(b->cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].byte_len, 100);
	CHECK_EQ(wc[0].qp_num, b->qp[q]->qp_num);
	CHECK(wc[0].wr_id >= 1000 && wc[0].wr_id < 1008);
	CHECK_MEM(b->buf + 1024 * (wc[0].wr_id - 1000), a->buf, 100);
	/* b -> a: a's own receive. */
	struct ibv_sge sge = {.addr = (uintptr_t)a->buf + 4096, .length = 64, .lkey = a->mr->lkey};
	struct ibv_recv_wr r = {.wr_id = 21, .sg_list = &sge, .num_sge = 1}, *bad;
	CHECK_EQ(ibv_post_recv(a->qp[q], &r, &bad), 0);
	for (int i = 0; i < 64; i++)
		b->buf[i] = (uint8_t)(i * 5 + 2 + q);
	send_msg(b, q, 64, 0, 22);
	CHECK_EQ(drain(b->cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 22);
	CHECK_EQ(drain(a->cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 21);
	CHECK_EQ(wc[0].qp_num, a->qp[q]->qp_num);
	CHECK_EQ(wc[0].byte_len, 64);
	CHECK_MEM(a->buf + 4096, b->buf, 64);
}

static void post_recv_at(struct end *e, int q, uint8_t *addr, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = e->mr->lkey};
	struct ibv_recv_wr r = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	CHECK_EQ(ibv_post_recv(e->qp[q], &r, &bad), 0);
}

/* Memory-region calls beyond reg / dereg (regressions from rdma-core's pyverbs suite):
 * IBV_ACCESS_MW_BIND is a valid registration flag (rxe accepts it); ibv_rereg_mr changes
 * access, range and PD in place on RoCE, fails with EOPNOTSUPP on iWARP as on siw, and sets
 * errno on every failure (it returned IBV_REREG_MR_ERR_INPUT with errno untouched); a QP moved
 * to RESET takes back its unpolled completions (its flushes here), so a reused QP does not
 * hand them out later. */
static void mr_calls(struct ibv_device *dev)
{
	struct end a, b;
	end_open(&a, dev, false);
	end_open(&b, dev, false);
	struct ibv_mr *mw =
	    ibv_reg_mr(a.pd, a.buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	CHECK(mw != NULL);
	if (mw)
		CHECK_EQ(ibv_dereg_mr(mw), 0);

	/* What libibverbs itself rejects: IBV_REREG_MR_ERR_INPUT, EINVAL. */
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(b.mr, 1 << 5, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0),
		 IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, IBV_ACCESS_LOCAL_WRITE),
		 IBV_REREG_MR_ERR_INPUT);
	CHECK_EQ(errno, EINVAL);
	int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	if (iw) {
		errno = 0;
		CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, rw),
			 IBV_REREG_MR_ERR_INPUT);
		CHECK_EQ(errno, EOPNOTSUPP);
		end_close(&a);
		end_close(&b);
		return;
	}
	/* What the kernel would reject: IBV_REREG_MR_ERR_CMD, EINVAL. */
	errno = 0;
	CHECK_EQ(
	    ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
	    IBV_REREG_MR_ERR_CMD);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, a.pd, NULL, 0, 0),
		 IBV_REREG_MR_ERR_CMD);
	CHECK_EQ(errno, EINVAL);

	union ibv_gid ga, gb;
	ibv_query_gid(a.ctx, 1, 0, &ga);
	ibv_query_gid(b.ctx, 1, 0, &gb);
	connect_qp(a.qp[0], b.qp[0]->qp_num, 0, gb);
	connect_qp(b.qp[0], a.qp[0]->qp_num, 0, ga);
	struct ibv_qp_attr acc = {.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	CHECK_EQ(ibv_modify_qp(b.qp[0], &acc, IBV_QP_ACCESS_FLAGS), 0);
	struct ibv_wc wc[4];

	/* Access: b's region (local write only) takes remote writes once reregistered. */
	uint32_t key = b.mr->rkey;
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, rw), 0);
	CHECK_EQ(b.mr->rkey, key);
	memset(a.buf, 0x5a, 256);
	struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 256, .lkey = a.mr->lkey};
	struct ibv_send_wr w = {.wr_id = 30,
				.sg_list = &sge,
				.num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = {.remote_addr = (uintptr_t)b.buf + 512, .rkey = key}},
			   *bad;
	CHECK_EQ(ibv_post_send(a.qp[0], &w, &bad), 0);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_MEM(b.buf + 512, a.buf, 256);

	/* Range: b's region becomes its buffer's second half; a receive there gets the SEND. */
	uint8_t *half = b.buf + BUF / 2;
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, half, BUF / 2, 0), 0);
	CHECK(b.mr->addr == half);
	CHECK_EQ(b.mr->length, BUF / 2);
	post_recv_at(&b, 0, half + 100, 100, 31);
	memset(a.buf, 0x6b, 100);
	send_msg(&a, 0, 100, 0, 32);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 31);
	CHECK_MEM(half + 100, a.buf, 100);
	/* ... and a receive in the first half, outside the region now, fails: the sender is
	 * told Remote Operational Error (the responder's NAK), both QPs end in ERR. */
	post_recv_at(&b, 0, b.buf, 100, 33);
	post_recv_at(&b, 0, half, 100, 34);  /* flushed */
	post_recv_at(&a, 0, a.buf, 100, 35); /* flushed */
	send_msg(&a, 0, 100, 0, 36);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].wr_id, 36);
	CHECK_EQ(wc[0].status, IBV_WC_REM_OP_ERR);
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK_EQ(wc[0].wr_id, 33);
	CHECK(wc[0].status != IBV_WC_SUCCESS);

	/* RESET takes back the flushes not yet polled (34 on b, 35 on a): the reused pair starts
	 * with empty CQs. */
	struct ibv_qp_attr rst = {.qp_state = IBV_QPS_RESET};
	struct timespec ms = {0, 20000000};
	nanosleep(&ms, NULL); /* let the flushes land */
	CHECK_EQ(ibv_modify_qp(a.qp[0], &rst, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_modify_qp(b.qp[0], &rst, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_poll_cq(a.cq, 4, wc), 0);
	CHECK_EQ(ibv_poll_cq(b.cq, 4, wc), 0);

	/* PD: b's region moved to another PD is out of reach of b's QP, and back in reach when
	 * moved back. */
	struct ibv_pd *pd2 = ibv_alloc_pd(b.ctx);
	REQUIRE(pd2);
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	CHECK(b.mr->pd == pd2);
	connect_qp(a.qp[0], b.qp[0]->qp_num, 0, gb);
	connect_qp(b.qp[0], a.qp[0]->qp_num, 0, ga);
	post_recv_at(&b, 0, half, 100, 37);
	send_msg(&a, 0, 100, 0, 38);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_REM_OP_ERR);
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK(wc[0].status != IBV_WC_SUCCESS);
	CHECK_EQ(ibv_modify_qp(a.qp[0], &rst, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_modify_qp(b.qp[0], &rst, IBV_QP_STATE), 0);
	CHECK_EQ(ibv_rereg_mr(b.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0), 0);
	connect_qp(a.qp[0], b.qp[0]->qp_num, 0, gb);
	connect_qp(b.qp[0], a.qp[0]->qp_num, 0, ga);
	post_recv_at(&b, 0, half, 100, 39);
	send_msg(&a, 0, 100, 0, 40);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 39);
	end_close(&a);
	end_close(&b);
	CHECK_EQ(ibv_dealloc_pd(pd2), 0);
}

/* Flush completions for n receives posted on e->qp[0] (moved to INIT, then ERR): wr_id
 * 600 + i, in order. */
static void flushes(struct end *e, int n)
{
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	CHECK_EQ(
	    ibv_modify_qp(e->qp[0], &init,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	for (int i = 0; i < n; i++)
		post_recv_at(e, 0, e->buf, 8, 600 + (uint64_t)i);
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	CHECK_EQ(ibv_modify_qp(e->qp[0], &err, IBV_QP_STATE), 0);
}

/* An extended CQ of e's context with rxe's fields, and a QP on it, in e->qp[1]'s place. */
static struct ibv_cq_ex *ex_qp(struct end *e)
{
	struct ibv_cq_init_attr_ex ca = {.cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS};
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(e->ctx, &ca);
	REQUIRE(cqx);
	CHECK_EQ(ibv_destroy_qp(e->qp[1]), 0);
	struct ibv_qp_init_attr qia = {
	    .send_cq = ibv_cq_ex_to_cq(cqx),
	    .recv_cq = ibv_cq_ex_to_cq(cqx),
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	e->qp[1] = ibv_create_qp(e->pd, &qia);
	REQUIRE(e->qp[1]);
	return cqx;
}

/* Polls one completion of cqx (start_poll, or next_poll when `next`), up to 5 s. */
static int poll_ex(struct ibv_cq_ex *cqx, bool next)
{
	struct ibv_poll_cq_attr pa = {0};
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int r = next ? ibv_next_poll(cqx) : ibv_start_poll(cqx, &pa);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (r != ENOENT || t.tv_sec - t0.tv_sec > 5)
			return r;
	}
}

/* CQ calls beyond create / poll (from rdma-core's pyverbs suite, as rxe has them):
 * ibv_resize_cq keeps the completions waiting, refuses sizes below them or above the device's
 * max_cqe; extended CQs (ibv_create_cq_ex with rxe's fields, start / next / end_poll and the
 * ibv_wc_read_* calls) on a connected pair and on flushes, and what they refuse. */
static void cq_calls(struct ibv_device *dev)
{
	struct end a;
	end_open(&a, dev, false);

	/* Extended CQs: arguments. */
	struct ibv_cq_init_attr_ex ca = {.cqe = 8, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP};
	errno = 0;
	CHECK(ibv_create_cq_ex(a.ctx, &ca) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	ca = (struct ibv_cq_init_attr_ex){.cqe = 8,
					  .comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
					  .flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED};
	CHECK(ibv_create_cq_ex(a.ctx, &ca) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	ca = (struct ibv_cq_init_attr_ex){.cqe = 8, .comp_mask = 1u << 7};
	CHECK(ibv_create_cq_ex(a.ctx, &ca) == NULL);
	CHECK_EQ(errno, EINVAL);
	ca = (struct ibv_cq_init_attr_ex){.cqe = SR_TEST_HUGE_CQE};
	CHECK(ibv_create_cq_ex(a.ctx, &ca) == NULL);
	CHECK_EQ(errno, EINVAL);
	ca = (struct ibv_cq_init_attr_ex){.cqe = 8, .comp_vector = 1000};
	CHECK(ibv_create_cq_ex(a.ctx, &ca) == NULL);
	CHECK_EQ(errno, EINVAL);

	/* A SEND into a QP on an extended CQ: the receive and its fields. */
	struct end b;
	end_open(&b, dev, false);
	struct ibv_cq_ex *cqx = ex_qp(&b);
	struct ibv_poll_cq_attr pa = {0};
	CHECK_EQ(ibv_start_poll(cqx, &pa), ENOENT);
	ibv_end_poll(cqx); /* after a failed start_poll: harmless (pyverbs does it) */
	union ibv_gid ga, gb;
	ibv_query_gid(a.ctx, 1, 0, &ga);
	ibv_query_gid(b.ctx, 1, 0, &gb);
	connect_qp(a.qp[1], b.qp[1]->qp_num, 0, gb);
	connect_qp(b.qp[1], a.qp[1]->qp_num, 0, ga);
	post_recv_at(&b, 1, b.buf, 256, 41);
	post_recv_at(&b, 1, b.buf + 256, 256, 42);
	send_msg(&a, 1, 100, 0, 43);
	send_msg(&a, 1, 200, 0, 44);
	struct ibv_wc wc[4];
	CHECK_EQ(drain(a.cq, wc, 2), 2);
	CHECK_EQ(poll_ex(cqx, false), 0);
	CHECK_EQ(cqx->status, IBV_WC_SUCCESS);
	CHECK_EQ(cqx->wr_id, 41);
	CHECK_EQ(ibv_wc_read_opcode(cqx), IBV_WC_RECV);
	CHECK_EQ(ibv_wc_read_byte_len(cqx), 100);
	CHECK_EQ(ibv_wc_read_qp_num(cqx), b.qp[1]->qp_num);
	CHECK_EQ(ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM, 0);
	CHECK_EQ(poll_ex(cqx, true), 0);
	CHECK_EQ(cqx->wr_id, 42);
	CHECK_EQ(ibv_wc_read_byte_len(cqx), 200);
	CHECK_EQ(ibv_next_poll(cqx), ENOENT);
	ibv_end_poll(cqx);
	/* The same CQ through ibv_poll_cq, and its flushes. */
	for (int i = 0; i < 3; i++)
		post_recv_at(&b, 1, b.buf, 8, 700 + (uint64_t)i);
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	CHECK_EQ(ibv_modify_qp(b.qp[1], &err, IBV_QP_STATE), 0);
	CHECK_EQ(drain(ibv_cq_ex_to_cq(cqx), wc, 1), 1);
	CHECK_EQ(wc[0].wr_id, 700);
	CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(poll_ex(cqx, false), 0);
	CHECK_EQ(cqx->wr_id, 701);
	CHECK_EQ(cqx->status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(ibv_wc_read_qp_num(cqx), b.qp[1]->qp_num);
	CHECK_EQ(poll_ex(cqx, true), 0);
	CHECK_EQ(cqx->wr_id, 702);
	ibv_end_poll(cqx);
	CHECK_EQ(ibv_destroy_qp(b.qp[1]), 0);
	b.qp[1] = NULL;
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	end_close(&b);

	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(a.ctx, &da), 0);
	CHECK_EQ(ibv_resize_cq(a.cq, 1), 0);
	CHECK(a.cq->cqe >= 1);
	CHECK_EQ(ibv_resize_cq(a.cq, da.max_cqe + 1), EINVAL);
	CHECK_EQ(ibv_resize_cq(a.cq, 0), EINVAL);
	CHECK_EQ(ibv_resize_cq(a.cq, 8), 0);
	flushes(&a, 3);

	struct timespec ms = {0, 20000000};
	nanosleep(&ms, NULL); /* let the flushes land */
	CHECK_EQ(ibv_resize_cq(a.cq, 2), EINVAL);
	CHECK_EQ(ibv_resize_cq(a.cq, 100), 0);
	CHECK(a.cq->cqe >= 100);
	CHECK_EQ(drain(a.cq, wc, 3), 3);
	CHECK_EQ(ibv_poll_cq(a.cq, 1, wc + 3), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(wc[i].wr_id, 600 + i);
		CHECK_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}
	end_close(&a);
}

/* QPs with the ibv_wr_* interface (from rdma-core's pyverbs suite, as rxe has them): on RoCE,
 * a batch of a SEND (SGE) and an RDMA WRITE (inline data, copied at the call) posted by
 * ibv_wr_complete, an aborted batch, misuse failing the batch with nothing posted, and the
 * operations a QP type lacks refused at create (EOPNOTSUPP); iWARP refuses the interface, as
 * siw. */
static void qp_ex_calls(struct ibv_device *dev)
{
	struct end a, b;
	end_open(&a, dev, false);
	end_open(&b, dev, false);
	CHECK(ibv_qp_to_qp_ex(a.qp[0]) == NULL);
	struct ibv_qp_init_attr_ex xa = {
	    .send_cq = a.cq,
	    .recv_cq = a.cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 2, .max_recv_sge = 1},
	    .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	    .pd = a.pd,
	    .send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE};
	errno = 0;
	struct ibv_qp *qp = ibv_create_qp_ex(a.ctx, &xa);
	if (iw) {
		CHECK(qp == NULL);
		CHECK_EQ(errno, EOPNOTSUPP);
		end_close(&a);
		end_close(&b);
		return;
	}
	REQUIRE(qp);
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	REQUIRE(qx);
	CHECK(qx->wr_rdma_read == NULL); /* not asked for */
	/* What softrdma does not have, or the type does not: EOPNOTSUPP. */
	struct ibv_qp_init_attr_ex bad = xa;
	bad.send_ops_flags = IBV_QP_EX_WITH_TSO;
	CHECK(ibv_create_qp_ex(a.ctx, &bad) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);
	bad.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
	bad.qp_type = IBV_QPT_UD;
	CHECK(ibv_create_qp_ex(a.ctx, &bad) == NULL);
	CHECK_EQ(errno, EOPNOTSUPP);

	CHECK_EQ(ibv_destroy_qp(a.qp[0]), 0);
	a.qp[0] = qp;
	union ibv_gid ga, gb;
	ibv_query_gid(a.ctx, 1, 0, &ga);
	ibv_query_gid(b.ctx, 1, 0, &gb);
	connect_qp(a.qp[0], b.qp[0]->qp_num, 0, gb);
	connect_qp(b.qp[0], a.qp[0]->qp_num, 0, ga);
	struct ibv_qp_attr acc = {.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	CHECK_EQ(ibv_modify_qp(b.qp[0], &acc, IBV_QP_ACCESS_FLAGS), 0);
	struct ibv_mr *bmr = ibv_reg_mr(b.pd, b.buf + BUF / 2, BUF / 2,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(bmr);

	/* A batch: SEND from an SGE, then an RDMA WRITE of inline data whose buffer is
	 * overwritten before ibv_wr_complete (it was copied). */
	post_recv_at(&b, 0, b.buf, 256, 50);
	for (int i = 0; i < 100; i++)
		a.buf[i] = (uint8_t)(i + 7);
	char inl[32] = "inline data, copied at the call";
	ibv_wr_start(qx);
	qx->wr_id = 51;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 100);
	qx->wr_id = 52;
	ibv_wr_rdma_write(qx, bmr->rkey, (uintptr_t)b.buf + BUF / 2);
	ibv_wr_set_inline_data(qx, inl, sizeof(inl));
	memset(inl, 0, sizeof(inl));
	CHECK_EQ(ibv_wr_complete(qx), 0);
	struct ibv_wc wc[2];
	CHECK_EQ(drain(a.cq, wc, 2), 2);
	CHECK_EQ(wc[0].wr_id, 51);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[1].wr_id, 52);
	CHECK_EQ(wc[1].status, IBV_WC_SUCCESS);
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK_EQ(wc[0].wr_id, 50);
	CHECK_EQ(wc[0].byte_len, 100);
	CHECK_MEM(b.buf, a.buf, 100);
	CHECK(!memcmp(b.buf + BUF / 2, "inline data, copied at the call", 32));

	/* Aborted, misused and over-long batches post nothing. */
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 10);
	ibv_wr_abort(qx);
	ibv_wr_start(qx);
	ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 10); /* no request to complete */
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	ibv_wr_send(qx);
	struct ibv_sge three[3] = {{0}};
	ibv_wr_set_sge_list(qx, 3, three); /* max_send_sge 2 */
	CHECK_EQ(ibv_wr_complete(qx), EINVAL);
	ibv_wr_start(qx);
	for (int i = 0; i < 5; i++) { /* max_send_wr 4 */
		ibv_wr_send(qx);
		ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 10);
	}
	CHECK_EQ(ibv_wr_complete(qx), ENOMEM);
	struct timespec ms = {0, 20000000};
	nanosleep(&ms, NULL);
	CHECK_EQ(ibv_poll_cq(a.cq, 2, wc), 0);
	CHECK_EQ(ibv_poll_cq(b.cq, 2, wc), 0);
	CHECK_EQ(ibv_dereg_mr(bmr), 0);
	end_close(&a);
	end_close(&b);
}

/* Two ends whose first QPs are connected, b's open to a's RDMA WRITEs. */
static void write_pair(struct end *a, struct end *b, struct ibv_device *dev)
{
	end_open(a, dev, false);
	end_open(b, dev, false);
	union ibv_gid ga, gb;
	ibv_query_gid(a->ctx, 1, 0, &ga);
	ibv_query_gid(b->ctx, 1, 0, &gb);
	connect_qp(a->qp[0], b->qp[0]->qp_num, 0, gb);
	connect_qp(b->qp[0], a->qp[0]->qp_num, 0, ga);
	struct ibv_qp_attr acc = {.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	CHECK_EQ(ibv_modify_qp(b->qp[0], &acc, IBV_QP_ACCESS_FLAGS), 0);
}

/* A thread with a cancellation pending posts and polls: the verbs are no cancellation points
 * (as on a hardware provider, whose post and poll make no system call). The library's socket
 * calls happen under the context's lock; had they been glibc's send / recv, the thread would
 * have ended inside one, holding the lock, and every later call on that context would hang.
 * Regression: it ended in iWARP's send() (iwarp_lo) and in RoCE's sendmmsg / recvmmsg. */
struct cancel_job {
	struct end *e;
	atomic_int cancelled, reached;
	int got;
};

static void *cancel_body(void *arg)
{
	struct cancel_job *j = arg;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (!atomic_load(&j->cancelled))
		sched_yield();
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); /* deferred: pending from here on */
	send_msg(j->e, 0, 64, 0, 41);
	struct ibv_wc wc;
	for (int i = 0; i < 2000000 && j->got == 0; i++)
		j->got = ibv_poll_cq(j->e->cq, 1, &wc);
	for (int i = 0; i < 1000; i++) /* polls that find nothing read the sockets too */
		(void)ibv_poll_cq(j->e->cq, 1, &wc);
	atomic_store(&j->reached, 1);
	/* Ends normally, the cancellation still pending (a cancelled thread's unwinding leaves
	 * AddressSanitizer's stack marks behind: a false report at the thread's exit). */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	return j;
}

static void cancel_pending(struct ibv_device *dev)
{
	struct end a, b;
	write_pair(&a, &b, dev);
	post_recv_at(&b, 0, b.buf, 1024, 42);
	struct cancel_job j = {.e = &a};
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, cancel_body, &j) == 0);
	CHECK_EQ(pthread_cancel(t), 0);
	atomic_store(&j.cancelled, 1);
	void *ret = NULL;
	CHECK_EQ(pthread_join(t, &ret), 0);
	if (!atomic_load(&j.reached) || ret != &j) {
		/* a's lock is held by a thread that is gone: closing would hang */
		fprintf(stderr, "FAIL: the thread ended inside a verb (a cancellation point)\n");
		_exit(1);
	}
	CHECK_EQ(j.got, 1);
	struct ibv_wc wc;
	CHECK_EQ(drain(b.cq, &wc, 1), 1);
	CHECK_EQ(wc.wr_id, 42);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_poll_cq(a.cq, 1, &wc), 0); /* a's lock is free */
	end_close(&a);
	end_close(&b);
}

/* An RDMA WRITE's bytes are in the target's memory when the writer's completion is polled,
 * with both ends in this process and the target not polling: on RoCE because the target
 * acknowledged them; on iWARP, which acknowledges nothing, because the writer's pass gives the
 * other contexts of the process a receive pass (as siw places before the writer's send()
 * returns on loopback). pyverbs' rdma_traffic reads the target right after the completion.
 * Regression: on iWARP the target placed when its progress thread woke, after the check in
 * most rounds. A round whose check fails is counted; the bytes must come within 5 s. */
static void write_visible(struct ibv_device *dev)
{
	struct end a, b;
	write_pair(&a, &b, dev);
	struct ibv_mr *bmr = ibv_reg_mr(b.pd, b.buf + BUF / 2, BUF / 2,
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(bmr);
	int rounds = 200, late = 0;
	for (int r = 0; r < rounds; r++) {
		memset(a.buf, r + 1, 1024);
		struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 1024, .lkey = a.mr->lkey};
		struct ibv_send_wr w = {.wr_id = (uint64_t)r,
					.sg_list = &sge,
					.num_sge = 1,
					.opcode = IBV_WR_RDMA_WRITE,
					.send_flags = IBV_SEND_SIGNALED,
					.wr.rdma = {.remote_addr = (uintptr_t)b.buf + BUF / 2,
						    .rkey = bmr->rkey}},
				   *bad;
		CHECK_EQ(ibv_post_send(a.qp[0], &w, &bad), 0);
		struct ibv_wc wc;
		CHECK_EQ(drain(a.cq, &wc, 1), 1);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		volatile uint8_t *t = b.buf + BUF / 2;
		if (t[0] == (uint8_t)(r + 1) && t[1023] == (uint8_t)(r + 1))
			continue;
		late++;
		struct timespec t0, now, us = {0, 100000};
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			nanosleep(&us, NULL);
			clock_gettime(CLOCK_MONOTONIC, &now);
		} while (t[1023] != (uint8_t)(r + 1) && now.tv_sec - t0.tv_sec < 5);
		CHECK_EQ(t[1023], (uint8_t)(r + 1));
	}
	fprintf(stderr, "WRITE visible at the writer's completion: %d of %d rounds\n",
		rounds - late, rounds);
	/* RoCE: always. iWARP: unless the target's thread held its lock at that moment. */
	CHECK(late <= (iw ? rounds / 20 : 0));
	CHECK_EQ(ibv_dereg_mr(bmr), 0);
	end_close(&a);
	end_close(&b);
}

/* A region deregistered while a WRITE from it is on its way: once ibv_dereg_mr has returned,
 * nothing more is read from that memory (rxe holds the pages until then; a user-space stack
 * must stop reading). Here the memory is swapped at once for pages full of 0xBB, as if freed
 * and reused; the target must never see a 0xBB byte. The WRITE completes (if it was all out)
 * or fails (the rest found the region gone). Regression: iWARP sent the FPDUs it had framed
 * ahead of TCP from the new pages. */
static void dereg_in_flight(struct ibv_device *dev)
{
	const size_t len = 32u << 20;
	struct end a, b;
	write_pair(&a, &b, dev);
	uint8_t *tgt = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = memfd_create("reused", 0);
	REQUIRE(tgt != MAP_FAILED && src != MAP_FAILED && fd >= 0 &&
		ftruncate(fd, (off_t)len) == 0);
	uint8_t *reused = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	REQUIRE(reused != MAP_FAILED);
	memset(reused, 0xBB, len);
	munmap(reused, len);
	memset(src, 0xAA, len);
	struct ibv_mr *smr = ibv_reg_mr(a.pd, src, len, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *tmr =
	    ibv_reg_mr(b.pd, tgt, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(smr && tmr);
	struct ibv_sge sge = {.addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = smr->lkey};
	struct ibv_send_wr w = {.wr_id = 77,
				.sg_list = &sge,
				.num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
				.wr.rdma = {.remote_addr = (uintptr_t)tgt, .rkey = tmr->rkey}},
			   *bad;
	CHECK_EQ(ibv_post_send(a.qp[0], &w, &bad), 0);
	CHECK_EQ(ibv_dereg_mr(smr), 0);
	/* The same addresses now hold other bytes. */
	REQUIRE(mmap(src, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == src);
	struct ibv_wc wc;
	CHECK_EQ(drain(a.cq, &wc, 1), 1);
	CHECK_EQ(wc.wr_id, 77);
	CHECK(wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_LOC_PROT_ERR);
	/* Whatever arrives arrives within a moment of the completion (or the error). */
	struct timespec pause = {0, 200 * 1000000};
	nanosleep(&pause, NULL);
	size_t aa = 0, bb = 0;
	for (size_t i = 0; i < len; i++) {
		aa += tgt[i] == 0xAA;
		bb += tgt[i] == 0xBB;
	}
	fprintf(stderr, "WRITE from a region deregistered in flight: %s, %zu of %zu bytes placed\n",
		ibv_wc_status_str(wc.status), aa, len);
	CHECK_EQ(bb, 0);
	CHECK_EQ(ibv_dereg_mr(tmr), 0);
	end_close(&a);
	end_close(&b);
	munmap(src, len);
	munmap(tgt, len);
	close(fd);
}

int main(int argc, char **argv)
{
	if (getenv("SOFTRDMA_TEST_DEV") && *getenv("SOFTRDMA_TEST_DEV"))
		dev_name = getenv("SOFTRDMA_TEST_DEV");
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--dev") && i + 1 < argc)
			dev_name = argv[++i];
	/* iWARP's rendezvous port, random per process: parallel runs never meet. */
	if (!getenv("SOFTRDMA_IW_PORT")) {
		char port[16];
		snprintf(port, sizeof(port), "%d", 10000 + (int)(getpid() % 10000));
		setenv("SOFTRDMA_IW_PORT", port, 1);
	}
	struct ibv_device **list;
	struct ibv_device *dev = lo_device(&list);
	REQUIRE(dev);
	/* A SOFTRDMA_UDP_PORT that is not a port fails the open (EINVAL, and a message), never
	 * wraps to another port (70000 was 4464); the variable set here is gone again after. */
	const char *bad_ports[] = {"70000", "0", "-1", "12ab", " 4791", "99999999999999999999"};
	char *saved = getenv("SOFTRDMA_UDP_PORT") ? strdup(getenv("SOFTRDMA_UDP_PORT")) : NULL;
	for (size_t i = 0; i < sizeof(bad_ports) / sizeof(bad_ports[0]); i++) {
		setenv("SOFTRDMA_UDP_PORT", bad_ports[i], 1);
		errno = 0;
		struct ibv_context *bad = ibv_open_device(dev);
		CHECK(bad == NULL);
		CHECK_EQ(errno, EINVAL);
		if (bad)
			ibv_close_device(bad);
	}
	if (saved)
		setenv("SOFTRDMA_UDP_PORT", saved, 1);
	else
		unsetenv("SOFTRDMA_UDP_PORT");
	free(saved);
	iw = dev->transport_type == IBV_TRANSPORT_IWARP;
	fprintf(stderr, "device %s (%s)\n", dev_name, iw ? "iWARP" : "RoCE");
	CHECK_EQ(dev->transport_type, iw ? IBV_TRANSPORT_IWARP : IBV_TRANSPORT_IB);
	CHECK_EQ(dev->node_type, iw ? IBV_NODE_RNIC : IBV_NODE_CA);
	CHECK(ibv_get_device_guid(dev) != 0);

	struct end a, b;
	end_open(&a, dev, false);
	end_open(&b, dev, true);
	queries(a.ctx);
	reg_unmapped(a.pd, iw);
	for (int i = 0; i < 2; i++) {
		union ibv_gid ga, gb;
		ibv_query_gid(a.ctx, 1, 0, &ga);
		ibv_query_gid(b.ctx, 1, 0, &gb);
		connect_qp(a.qp[i], b.qp[i]->qp_num, 0, gb);
		connect_qp(b.qp[i], a.qp[i]->qp_num, 0, ga);
	}
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(a.qp[0], &qa, IBV_QP_STATE | IBV_QP_CAP, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	CHECK_EQ(qa.path_mtu, IBV_MTU_1024);
	CHECK_EQ(qa.dest_qp_num, b.qp[0]->qp_num);
	CHECK(qi.cap.max_inline_data >= 64);

	/* SRQ: arm the limit at 4, post 8; both of b's QPs draw from it. */
	struct ibv_srq_attr sattr = {.srq_limit = 4};
	CHECK_EQ(ibv_modify_srq(b.srq, &sattr, IBV_SRQ_LIMIT), 0);
	post_srq(&b, 8);
	CHECK_EQ(ibv_query_srq(b.srq, &sattr), 0);
	CHECK_EQ(sattr.srq_limit, 4);
	/* A QP using an SRQ refuses its own receives. */
	struct ibv_recv_wr rwr = {.wr_id = 1}, *rbad;
	CHECK(ibv_post_recv(b.qp[0], &rwr, &rbad) != 0);

	/* Completion channel, blocked application: b arms its CQ and sleeps in poll(); the
	 * progress thread receives a's SEND and wakes it. */
	CHECK_EQ(ibv_req_notify_cq(b.cq, 0), 0);
	send_msg(&a, 0, 200, 0, 1);
	CHECK_EQ(wait_event(&b), 0);
	struct ibv_wc wc[8];
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].byte_len, 200);
	CHECK_EQ(wc[0].qp_num, b.qp[0]->qp_num);
	CHECK(wc[0].wr_id >= 1000 && wc[0].wr_id < 1008);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);

	/* Solicited-only arming: an unsolicited SEND does not fire it, a solicited one does. */
	CHECK_EQ(ibv_req_notify_cq(b.cq, 1), 0);
	send_msg(&a, 1, 10, 0, 2);
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	struct pollfd pfd = {.fd = b.ch->fd, .events = POLLIN};
	CHECK_EQ(poll(&pfd, 1, 100), 0); /* no event */
	send_msg(&a, 1, 10, IBV_SEND_SOLICITED, 3);
	CHECK_EQ(wait_event(&b), 0);
	CHECK_EQ(drain(b.cq, wc, 2), 2);
	CHECK_EQ(wc[0].qp_num, b.qp[1]->qp_num);
	CHECK_EQ(drain(a.cq, wc, 1), 1);

	/* The SRQ now holds 5; two more receives take it below the limit of 4: async event. */
	send_msg(&a, 0, 10, 0, 4);
	send_msg(&a, 0, 10, 0, 5);
	CHECK_EQ(drain(b.cq, wc, 2), 2);
	CHECK_EQ(drain(a.cq, wc, 2), 2);
	int fl = fcntl(b.ctx->async_fd, F_GETFL);
	fcntl(b.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	bool limit_seen = false, comm_est_seen = false;
	struct ibv_async_event ev;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (ibv_get_async_event(b.ctx, &ev) == 0) {
			if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
				CHECK(ev.element.srq == b.srq);
				limit_seen = true;
			}
			if (ev.event_type == IBV_EVENT_COMM_EST)
				comm_est_seen = true;
			ibv_ack_async_event(&ev);
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (!limit_seen && t.tv_sec - t0.tv_sec < 3);
	CHECK(limit_seen);
	(void)comm_est_seen; /* optional: rxe raises it only for packets received in RTR */
	/* The limit disarms itself after firing (verbs: one event per arm). */
	CHECK_EQ(ibv_query_srq(b.srq, &sattr), 0);
	CHECK_EQ(sattr.srq_limit, 0);

	/* Moving a QP to ERR flushes its posted work with IBV_WC_WR_FLUSH_ERR, in order. */
	for (int i = 0; i < 3; i++) {
		struct ibv_sge sge = {.addr = (uintptr_t)a.buf, .length = 8, .lkey = a.mr->lkey};
		struct ibv_recv_wr r = {.wr_id = 500 + (uint64_t)i, .sg_list = &sge, .num_sge = 1};
		CHECK_EQ(ibv_post_recv(a.qp[0], &r, &rbad), 0);
	}
	struct ibv_qp_attr err = {.qp_state = IBV_QPS_ERR};
	CHECK_EQ(ibv_modify_qp(a.qp[0], &err, IBV_QP_STATE), 0);
	CHECK_EQ(drain(a.cq, wc, 3), 3);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc[i].wr_id, 500 + i);
	}
	/* ERR -> RESET -> INIT is legal again. */
	struct ibv_qp_attr rst = {.qp_state = IBV_QPS_RESET};
	CHECK_EQ(ibv_modify_qp(a.qp[0], &rst, IBV_QP_STATE), 0);
	struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = 1};
	CHECK_EQ(
	    ibv_modify_qp(a.qp[0], &init,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	reconnect(&a, &b, 0);
	reconnect(&a, &b, 1);

	end_close(&a);
	end_close(&b);

	/* Regression: a poll that returns a receive completion defers the ACK it owes
	 * (core_poll_cq); a QP destroyed right after must still send it, or the sender retries
	 * for ever (retry_cnt 7). */
	end_open(&a, dev, false);
	end_open(&b, dev, false);
	for (int i = 0; i < 2; i++) {
		union ibv_gid ga, gb;
		ibv_query_gid(a.ctx, 1, 0, &ga);
		ibv_query_gid(b.ctx, 1, 0, &gb);
		connect_qp(a.qp[i], b.qp[i]->qp_num, 0, gb);
		connect_qp(b.qp[i], a.qp[i]->qp_num, 0, ga);
	}
	struct ibv_sge rs = {.addr = (uintptr_t)b.buf, .length = 64, .lkey = b.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 9, .sg_list = &rs, .num_sge = 1};
	CHECK_EQ(ibv_post_recv(b.qp[0], &rw, &rbad), 0);
	/* b polls before the SEND arrives, so its own thread (not the progress thread) takes
	 * the packet, and defers the ACK. */
	for (int i = 0; i < 1000; i++)
		CHECK_EQ(ibv_poll_cq(b.cq, 1, wc), 0);
	send_msg(&a, 0, 64, 0, 10);
	CHECK_EQ(drain(b.cq, wc, 1), 1);
	CHECK_EQ(ibv_destroy_qp(b.qp[0]), 0);
	b.qp[0] = b.qp[1]; /* end_close destroys both slots: keep the remaining one twice */
	b.qp[1] = NULL;
	CHECK_EQ(drain(a.cq, wc, 1), 1);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].wr_id, 10);
	end_close(&a);
	end_close(&b);
	mr_calls(dev);
	cq_calls(dev);
	qp_ex_calls(dev);
	write_visible(dev);
	dereg_in_flight(dev);
	cancel_pending(dev);
	ibv_free_device_list(list);
	return check_exit();
}
