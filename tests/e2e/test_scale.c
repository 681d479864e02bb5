/* Many QPs (issue 11's scale work): 2,000 RC QPs on roce_lo in two device contexts of one
 * process, connected in pairs; a few pairs spread over the range carry SENDs and RDMA WRITEs
 * whose bytes are checked; QPs of pairs whose peer is gone retry and fail with
 * IBV_WC_RETRY_EXC_ERR each (their ACK timers run among 2,000 idle QPs: core/progress.c's timer
 * heap); QP numbers are distinct, and a context holds more than 4,095 QPs (the old table's
 * limit), numbers not handed out again at once. Then the same on iwarp_lo with 400 QPs (a TCP
 * connection per QP), where a progress pass visits only the connections with something to
 * do: connections visited per pass (the context's counters) stay few among the 199 idle ones.
 * Correctness only: nothing here is timed. */
#include "check.h"
#include "softrdma.h"
#include "vutil.h"

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define BUF_SIZE (64 * 1024)
#define WAIT_MS	 10000

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

static void side_open(struct side *s, struct ibv_device *dev, int nqp)
{
	memset(s, 0, sizeof(*s));
	s->ctx = ibv_open_device(dev);
	REQUIRE(s->ctx);
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 1024, NULL, NULL, 0);
	s->buf = calloc(1, BUF_SIZE);
	s->qps = calloc((size_t)nqp, sizeof(*s->qps));
	REQUIRE(s->pd && s->cq && s->buf && s->qps);
	s->mr =
	    ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	REQUIRE(s->mr);
	struct ibv_port_attr pa;
	REQUIRE(ibv_query_port(s->ctx, 1, &pa) == 0);
	s->mtu = pa.active_mtu;
	s->gidx = -1;
	for (int i = 0; i < pa.gid_tbl_len && s->gidx < 0; i++)
		if (!ibv_query_gid(s->ctx, 1, i, &s->gid) && s->gid.raw[10] == 0xff)
			s->gidx = i;
	REQUIRE(s->gidx >= 0);
}

static void side_close(struct side *s, int nqp)
{
	for (int k = 0; k < nqp; k++)
		if (s->qps[k])
			CHECK_EQ(ibv_destroy_qp(s->qps[k]), 0);
	CHECK_EQ(ibv_dereg_mr(s->mr), 0);
	CHECK_EQ(ibv_destroy_cq(s->cq), 0);
	CHECK_EQ(ibv_dealloc_pd(s->pd), 0);
	CHECK_EQ(ibv_close_device(s->ctx), 0);
	free(s->buf);
	free(s->qps);
}

static struct ibv_qp *qp_new(struct side *s)
{
	struct ibv_qp_init_attr qia = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &qia);
	REQUIRE(qp);
	return qp;
}

/* INIT, RTR, RTS towards QP dqpn of peer; timeout and retry_cnt as given. */
static void qp_connect(struct side *s, struct ibv_qp *qp, const struct side *peer, uint32_t dqpn,
		       uint8_t timeout, uint8_t retry_cnt)
{
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->mtu;
	a.dest_qp_num = dqpn;
	a.rq_psn = 77;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gidx;
	a.ah_attr.grh.dgid = peer->gid;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = 77;
	a.max_rd_atomic = 1;
	REQUIRE(ibv_modify_qp(qp, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

/* The next completion of s's CQ: it must be of qp, with that opcode and status. */
static void expect_wc(struct side *s, struct ibv_qp *qp, enum ibv_wc_opcode op,
		      enum ibv_wc_status status, uint32_t len)
{
	struct ibv_wc wc = vt_wait_wc(s->cq, WAIT_MS);
	CHECK_EQ(wc.qp_num, qp->qp_num);
	CHECK_EQ(wc.status, status);
	if (status == IBV_WC_SUCCESS) {
		CHECK_EQ(wc.opcode, op);
		if (op == IBV_WC_RECV)
			CHECK_EQ(wc.byte_len, len);
	}
}

/* A SEND from a's QP k to b's and an RDMA WRITE back, both checked byte for byte. */
static void use_pair(struct side *a, struct side *b, int k, uint32_t seed)
{
	const uint32_t len = 3000; /* several packets at the smallest MTU: most at lo's */
	struct ibv_qp *qa = a->qps[k], *qb = b->qps[k];
	vt_fill(a->buf, len, seed);
	memset(b->buf + BUF_SIZE / 2, 0, len);
	vt_post_recv(qb, b->mr, b->buf + BUF_SIZE / 2, len, 1);
	REQUIRE(vt_post_send(qa, a->mr, IBV_WR_SEND, a->buf, len, 0, 0, 2) == 0);
	expect_wc(a, qa, IBV_WC_SEND, IBV_WC_SUCCESS, 0);
	expect_wc(b, qb, IBV_WC_RECV, IBV_WC_SUCCESS, len);
	CHECK_MEM(b->buf + BUF_SIZE / 2, a->buf, len);

	vt_fill(b->buf, len, seed + 1);
	memset(a->buf + BUF_SIZE / 2, 0, len);
	REQUIRE(vt_post_send(qb, b->mr, IBV_WR_RDMA_WRITE, b->buf, len,
			     (uintptr_t)a->buf + BUF_SIZE / 2, a->mr->rkey, 3) == 0);
	expect_wc(b, qb, IBV_WC_RDMA_WRITE, IBV_WC_SUCCESS, 0);
	/* The WRITE completed at b: its bytes are in a's memory (RoCE: acknowledged; iWARP: a
	 * SEND behind it, which a receives after them, says so). */
	vt_post_recv(qa, a->mr, a->buf + BUF_SIZE / 4, 8, 4);
	REQUIRE(vt_post_send(qb, b->mr, IBV_WR_SEND, b->buf, 8, 0, 0, 5) == 0);
	expect_wc(b, qb, IBV_WC_SEND, IBV_WC_SUCCESS, 0);
	expect_wc(a, qa, IBV_WC_RECV, IBV_WC_SUCCESS, 8);
	uint8_t want[3000];
	vt_fill(want, len, seed + 1);
	CHECK_MEM(a->buf + BUF_SIZE / 2, want, len);
}

/* iWARP: pair k's traffic among the idle connections of both sides visits few of them per
 * progress pass (each pass walked all of them before: 200 per pass here). */
static void visits_few(struct side *a, struct side *b, int k)
{
	uint64_t v0 = softrdma_counter(a->ctx, NULL, "iw_conn_visits") +
		      softrdma_counter(b->ctx, NULL, "iw_conn_visits");
	uint64_t p0 = softrdma_counter(a->ctx, NULL, "iw_passes") +
		      softrdma_counter(b->ctx, NULL, "iw_passes");
	uint64_t h0 = softrdma_counter(a->ctx, NULL, "iw_hot_reads") +
		      softrdma_counter(b->ctx, NULL, "iw_hot_reads");
	for (int i = 0; i < 20; i++)
		use_pair(a, b, k, 300 + (uint32_t)i);
	uint64_t dv = softrdma_counter(a->ctx, NULL, "iw_conn_visits") +
		      softrdma_counter(b->ctx, NULL, "iw_conn_visits") - v0;
	uint64_t dp = softrdma_counter(a->ctx, NULL, "iw_passes") +
		      softrdma_counter(b->ctx, NULL, "iw_passes") - p0;
	uint64_t dh = softrdma_counter(a->ctx, NULL, "iw_hot_reads") +
		      softrdma_counter(b->ctx, NULL, "iw_hot_reads") - h0;
	fprintf(stderr,
		"iwarp: %llu connections visited in %llu passes, %llu served by the last "
		"readable connection alone\n",
		(unsigned long long)dv, (unsigned long long)dp, (unsigned long long)dh);
	CHECK(dp > 0);
	CHECK(dv <= 4 * dp);
	/* The pair's connections take turns: each message is read without an epoll_wait. */
	CHECK(dh > 0);
}

/* QP numbers are distinct within a side. */
static bool distinct(struct ibv_qp **qps, int n)
{
	uint8_t *seen = calloc(1u << 16, 1);
	bool ok = seen != NULL;
	for (int k = 0; ok && k < n; k++) {
		uint32_t lo = qps[k]->qp_num & 0xFFFF;
		ok = lo != 0 && !seen[lo] && (qps[k]->qp_num >> 16) == (qps[0]->qp_num >> 16);
		if (ok)
			seen[lo] = 1;
	}
	free(seen);
	return ok;
}

static void run(const char *dev_name, int nqp, bool iwarp)
{
	int pairs = nqp / 2;
	struct ibv_device *dev = vt_find_dev(dev_name);
	struct side a, b;
	side_open(&a, dev, pairs);
	side_open(&b, dev, pairs);
	for (int k = 0; k < pairs; k++) {
		a.qps[k] = qp_new(&a);
		b.qps[k] = qp_new(&b);
	}
	CHECK(distinct(a.qps, pairs));
	CHECK(distinct(b.qps, pairs));
	/* Pairs 1, 2 and 3 lose their peer below: short ACK timeouts (8: about 1 ms), one retry
	 * (RoCE; iWARP has no timers: TCP retransmits, and a gone peer resets the stream). */
	for (int k = 0; k < pairs; k++) {
		bool dies = k >= 1 && k <= 3;
		qp_connect(&a, a.qps[k], &b, b.qps[k]->qp_num, dies ? (uint8_t)(7 + k) : 14,
			   dies ? 1 : 7);
		qp_connect(&b, b.qps[k], &a, a.qps[k]->qp_num, 14, 7);
	}
	fprintf(stderr, "%s: %d QPs connected\n", dev_name, nqp);
	const int used[] = {0, pairs / 3, pairs / 2, pairs - 2, pairs - 1};
	for (unsigned i = 0; i < sizeof(used) / sizeof(used[0]); i++)
		use_pair(&a, &b, used[i], 100 + i);
	fprintf(stderr, "%s: pairs %d, %d, %d, %d, %d checked\n", dev_name, used[0], used[1],
		used[2], used[3], used[4]);
	if (iwarp)
		visits_few(&a, &b, pairs / 2);
	if (!iwarp) {
		/* Three peers gone: each of the three sends retries at its own timeout and fails;
		 * every other QP stays idle. */
		for (int k = 1; k <= 3; k++) {
			CHECK_EQ(ibv_destroy_qp(b.qps[k]), 0);
			b.qps[k] = NULL;
		}
		for (int k = 1; k <= 3; k++)
			REQUIRE(vt_post_send(a.qps[k], a.mr, IBV_WR_SEND, a.buf, 64, 0, 0, 6) == 0);
		bool failed[4] = {false};
		for (int i = 0; i < 3; i++) {
			struct ibv_wc wc = vt_wait_wc(a.cq, WAIT_MS);
			CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
			for (int k = 1; k <= 3; k++)
				if (wc.qp_num == a.qps[k]->qp_num)
					failed[k] = true;
		}
		CHECK(failed[1] && failed[2] && failed[3]);
		/* Those QPs are in ERR now; the others still work. */
		CHECK_EQ(vt_qp_state(a.qps[2]), IBV_QPS_ERR);
		use_pair(&a, &b, pairs / 2 + 1, 200);
		/* More than the old table's 4,095 QPs in one context. */
		int extra_n = 4200 - pairs;
		struct ibv_qp **extra = calloc((size_t)extra_n, sizeof(*extra));
		REQUIRE(extra);
		for (int k = 0; k < extra_n; k++)
			extra[k] = qp_new(&a);
		struct ibv_qp **all = calloc((size_t)(pairs + extra_n), sizeof(*all));
		REQUIRE(all);
		memcpy(all, a.qps, (size_t)pairs * sizeof(*all));
		memcpy(all + pairs, extra, (size_t)extra_n * sizeof(*all));
		CHECK(distinct(all, pairs + extra_n));
		/* A number given back is not the next one handed out (a late packet for the
		 * old QP must not reach a new one at once). */
		uint32_t gone = extra[0]->qp_num;
		CHECK_EQ(ibv_destroy_qp(extra[0]), 0);
		extra[0] = qp_new(&a);
		CHECK(extra[0]->qp_num != gone);
		for (int k = 0; k < extra_n; k++)
			CHECK_EQ(ibv_destroy_qp(extra[k]), 0);
		free(extra);
		free(all);
		fprintf(stderr, "%s: %d QPs in one context\n", dev_name, pairs + extra_n);
	}
	side_close(&a, pairs);
	side_close(&b, pairs);
}

int main(void)
{
	/* iWARP's rendezvous port, random per process: parallel runs never meet. */
	if (!getenv("SOFTRDMA_IW_PORT")) {
		char port[16];
		snprintf(port, sizeof(port), "%d", 10000 + (int)(getpid() % 10000));
		setenv("SOFTRDMA_IW_PORT", port, 1);
	}
	/* iWARP: a descriptor per QP. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	run("roce_lo", 2000, false);
	run("iwarp_lo", 400, true);
	return check_exit();
}
