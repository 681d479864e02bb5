/* End to end between two processes over loopback, through the verbs API. The parent is the
 * active side; a forked child owns the passive QP and obeys commands over a socketpair (post
 * a receive, wait for a completion, report its QP state, issue a request). The child's buffer
 * is shared memory, so the parent fills and checks it directly.
 *
 * Covers: every opcode at 0 B, 1 B, MTU-1, MTU, MTU+1 and 1 MiB (in both directions for
 * WRITE and READ), remote access violations (both QPs end in ERR), RNR exhaustion, and a peer
 * process that is killed (the requester ends with IBV_WC_RETRY_EXC_ERR). With
 * --data-only it runs the data part alone (used with $SOFTRDMA_FAULT).
 *
 * The device is roce_lo, or the one $SOFTRDMA_TEST_DEV or --dev NAME names. On an iWARP device
 * (iwarp_lo) the QPs connect the same way (softrdma makes the TCP connection and the MPA
 * exchange: core/iw_progress.h) and everything runs, with what iWARP does differently
 * asserted instead (each printed as a note):
 *   - immediate data and atomics do not exist in RDMAP: refused at post (EINVAL);
 *   - an RDMA WRITE completes when TCP has its bytes: the target's memory is checked after a
 *     READ behind it on the same QP has come back;
 *   - a WRITE the child refuses has completed already: the READ posted with it gets the
 *     Terminate's REM_ACCESS_ERR, both QPs go to ERR;
 *   - no RNR retry: a SEND with no receive posted is fatal (Terminate, both QPs in ERR);
 *   - no retry count: the child is SIGKILLed in the middle of 32 MiB of WRITEs; its kernel
 *     resets the TCP connection and every WR completes in bounded time, in order, successes
 *     (handed to TCP before) then errors;
 *   - messages around the parent's FPDU size (MULPDU) are added.
 * $SOFTRDMA_IW_PORT (the rendezvous port) is made random per run unless it is set; the parent
 * sets it before forking, so both processes meet. */
#include "check.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "wire/iwarp/iwarp.h"

#define BUF_SIZE ((2u << 20) + 4096)
#define ALL_ACCESS                                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |               \
	 IBV_ACCESS_REMOTE_ATOMIC)

static const char *dev_name = "roce_lo"; /* $SOFTRDMA_TEST_DEV or --dev */
static bool iw;				 /* the device is iWARP */

struct endpoint {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

struct params {
	unsigned mr_access;
	uint8_t rnr_retry, timeout, retry_cnt;
};

enum cmd_op { CMD_POST_RECV, CMD_WAIT_WC, CMD_QP_STATE, CMD_REQUEST, CMD_EXIT };

struct cmd {
	enum cmd_op op;
	enum ibv_wr_opcode opcode;
	uint64_t off;
	uint32_t len;
	uint64_t wr_id;
	uint64_t raddr;
	uint32_t rkey;
};

struct reply {
	int ret;
	struct ibv_wc wc;
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	int gid_index;
	union ibv_gid gid;
	enum ibv_mtu mtu;
};

static pid_t child_pid; /* in the parent, the child of the running start() */

/* How the child ended, when the parent finds it gone. */
static void report_child(void)
{
	int status;
	if (child_pid <= 0 || waitpid(child_pid, &status, 0) != child_pid)
		return;
	if (WIFSIGNALED(status))
		fprintf(stderr, "child %d was killed by signal %d\n", (int)child_pid,
			WTERMSIG(status));
	else if (WIFEXITED(status))
		fprintf(stderr, "child %d exited with status %d\n", (int)child_pid,
			WEXITSTATUS(status));
}

static void xfer(int fd, const void *out, size_t outlen, void *in, size_t inlen)
{
	if (out && write(fd, out, outlen) != (ssize_t)outlen) {
		fprintf(stderr, "pid %d: the other process is gone (write: %s)\n", (int)getpid(),
			strerror(errno));
		report_child();
		_exit(90);
	}
	for (size_t got = 0; in && got < inlen;) {
		ssize_t r = read(fd, (char *)in + got, inlen - got);
		if (r <= 0) {
			fprintf(stderr, "pid %d: the other process is gone (read: %s)\n",
				(int)getpid(), r ? strerror(errno) : "end of file");
			report_child();
			_exit(91);
		}
		got += (size_t)r;
	}
}

/* Opens the device and makes a QP; exits the process on failure (child) or fails REQUIRE. */
static int side_open(struct side *s, uint8_t *buf, unsigned access)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	memset(s, 0, sizeof(*s));
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev_name))
			s->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!s->ctx)
		return -1;
	s->buf = buf;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 256, NULL, NULL, 0);
	s->mr = ibv_reg_mr(s->pd, buf, BUF_SIZE, (int)access);
	struct ibv_qp_init_attr qia = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 1, .max_recv_sge = 1}};
	s->qp = s->pd && s->cq && s->mr ? ibv_create_qp(s->pd, &qia) : NULL;
	if (!s->qp)
		return -1;
	struct ibv_port_attr pa;
	if (ibv_query_port(s->ctx, 1, &pa))
		return -1;
	s->mtu = pa.active_mtu;
	s->gid_index = -1;
	for (int i = 0; i < pa.gid_tbl_len && s->gid_index < 0; i++)
		if (!ibv_query_gid(s->ctx, 1, i, &s->gid) && s->gid.raw[10] == 0xff)
			s->gid_index = i;
	return s->gid_index >= 0 ? 0 : -1;
}

static int side_connect(struct side *s, const struct endpoint *peer, const struct params *p)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
				.port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						   IBV_ACCESS_REMOTE_READ |
						   IBV_ACCESS_REMOTE_ATOMIC};
	int r = ibv_modify_qp(s->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r) {
		fprintf(stderr, "pid %d: modify_qp to INIT: %s\n", (int)getpid(), strerror(r));
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = 0x800000;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)s->gid_index;
	a.ah_attr.grh.dgid = peer->gid;
	r = ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (r) {
		fprintf(stderr, "pid %d: modify_qp to RTR: %s\n", (int)getpid(), strerror(r));
		return -1;
	}
	a.qp_state = IBV_QPS_RTS;
	a.timeout = p->timeout;
	a.retry_cnt = p->retry_cnt;
	a.rnr_retry = p->rnr_retry;
	a.sq_psn = 0x800000;
	a.max_rd_atomic = 4;
	r = ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (r) {
		fprintf(stderr, "pid %d: modify_qp to RTS: %s\n", (int)getpid(), strerror(r));
		return -1;
	}
	return 0;
}

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (ibv_poll_cq(cq, 1, wc) == 1)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= 10)
			return -ETIMEDOUT;
	}
}

/* The work request for c, with sge as its one SGE. */
static void make_wr(struct side *s, const struct cmd *c, struct ibv_sge *sge,
		    struct ibv_send_wr *wr)
{
	*sge = (struct ibv_sge){
	    .addr = (uintptr_t)s->buf + c->off, .length = c->len, .lkey = s->mr->lkey};
	*wr = (struct ibv_send_wr){.wr_id = c->wr_id,
				   .sg_list = sge,
				   .num_sge = 1,
				   .opcode = c->opcode,
				   .send_flags = IBV_SEND_SIGNALED};
	if (c->opcode == IBV_WR_SEND_WITH_IMM || c->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wr->imm_data = htobe32(0xfeedf00d);
	if (c->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || c->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = c->raddr;
		wr->wr.atomic.rkey = c->rkey;
		wr->wr.atomic.compare_add = 7;
		wr->wr.atomic.swap = 9;
	} else {
		wr->wr.rdma.remote_addr = c->raddr;
		wr->wr.rdma.rkey = c->rkey;
	}
}

static int post_send(struct side *s, const struct cmd *c)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	make_wr(s, c, &sge, &wr);
	int r = ibv_post_send(s->qp, &wr, &bad);
	if (r && bad != &wr)
		return -1;
	return r;
}

/* iWARP: c1 and c2 in one call, handed to TCP together (c2 is outstanding when the answer to
 * c1 comes back; with two calls, a Terminate arriving in between would flush c2 at post). */
static int post_two(struct side *s, const struct cmd *c1, const struct cmd *c2)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr[2], *bad = NULL;
	make_wr(s, c1, &sge[0], &wr[0]);
	make_wr(s, c2, &sge[1], &wr[1]);
	wr[0].next = &wr[1];
	return ibv_post_send(s->qp, wr, &bad);
}

static int post_recv(struct side *s, uint64_t off, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf + off, .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(s->qp, &wr, &bad);
}

/* ---- the child: the passive side ---- */

static void child_main(int fd, uint8_t *buf, const struct params *p)
{
	struct side s;
	if (side_open(&s, buf, p->mr_access) < 0) {
		fprintf(stderr, "child: opening the device and QP failed: %s\n", strerror(errno));
		_exit(80);
	}
	struct endpoint me = {.qpn = s.qp->qp_num,
			      .rkey = s.mr->rkey,
			      .addr = (uintptr_t)buf,
			      .gid = s.gid},
			peer;
	xfer(fd, &me, sizeof(me), &peer, sizeof(peer));
	if (side_connect(&s, &peer, p) < 0) {
		fprintf(stderr, "child: connecting the QP failed\n");
		_exit(81);
	}
	/* In RTS: the parent sends nothing before it hears so. A request that reached our QP
	 * while it was in RTR (iWARP's passive side has its connection then) could move it to
	 * ERR (a refused WRITE, a SEND with no receive), and our move to RTS would then fail. */
	struct reply ready = {0};
	xfer(fd, &ready, sizeof(ready), NULL, 0);
	for (;;) {
		struct cmd c;
		struct reply r = {0};
		xfer(fd, NULL, 0, &c, sizeof(c));
		switch (c.op) {
		case CMD_POST_RECV:
			r.ret = post_recv(&s, c.off, c.len, c.wr_id);
			break;
		case CMD_WAIT_WC:
			r.ret = wait_wc(s.cq, &r.wc);
			break;
		case CMD_QP_STATE: {
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qi;
			r.ret = ibv_query_qp(s.qp, &qa, IBV_QP_STATE, &qi) ? -1 : (int)qa.qp_state;
			break;
		}
		case CMD_REQUEST:
			r.ret = post_send(&s, &c);
			if (!r.ret)
				r.ret = wait_wc(s.cq, &r.wc);
			break;
		case CMD_EXIT:
			ibv_destroy_qp(s.qp);
			ibv_dereg_mr(s.mr);
			ibv_destroy_cq(s.cq);
			ibv_dealloc_pd(s.pd);
			ibv_close_device(s.ctx);
			xfer(fd, &r, sizeof(r), NULL, 0);
			_exit(0);
		}
		xfer(fd, &r, sizeof(r), NULL, 0);
	}
}

/* ---- the parent ---- */

struct peer {
	pid_t pid;
	int fd;
	uint8_t *buf; /* shared with the child */
	struct endpoint ep;
};

static struct reply ask(struct peer *pe, struct cmd c)
{
	struct reply r;
	xfer(pe->fd, &c, sizeof(c), &r, sizeof(r));
	return r;
}

static void start(struct side *a, struct peer *pe, uint8_t *abuf, uint8_t *shared,
		  const struct params *child_p, const struct params *my_p)
{
	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	pe->buf = shared;
	pe->pid = fork();
	REQUIRE(pe->pid >= 0);
	if (pe->pid == 0) {
		child_pid = 0;
		close(sv[0]);
		child_main(sv[1], shared, child_p);
	}
	close(sv[1]);
	child_pid = pe->pid;
	pe->fd = sv[0];
	REQUIRE(side_open(a, abuf, ALL_ACCESS) == 0);
	struct endpoint me = {.qpn = a->qp->qp_num, .gid = a->gid};
	xfer(pe->fd, &me, sizeof(me), &pe->ep, sizeof(pe->ep));
	REQUIRE(side_connect(a, &pe->ep, my_p) == 0);
	struct reply ready;
	xfer(pe->fd, NULL, 0, &ready, sizeof(ready)); /* the child is in RTS */
}

static void stop(struct side *a, struct peer *pe, bool kill_it)
{
	if (kill_it) {
		kill(pe->pid, SIGKILL);
	} else {
		struct cmd c = {.op = CMD_EXIT};
		ask(pe, c);
	}
	int status;
	CHECK(waitpid(pe->pid, &status, 0) == pe->pid);
	if (!kill_it)
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pe->fd);
	CHECK_EQ(ibv_destroy_qp(a->qp), 0);
	ibv_dereg_mr(a->mr);
	ibv_destroy_cq(a->cq);
	ibv_dealloc_pd(a->pd);
	ibv_close_device(a->ctx);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 151 + i * 13 + (i >> 10));
}

/* iWARP: a READ of len bytes at the child's `off` into our `to`, on the same QP as the
 * WRITE before it: once it is back, that WRITE has been placed (the child handles its stream
 * in order; a WRITE completes when TCP has its bytes: shared/spec/iwarp.md 6.4). */
static void read_back(struct side *a, struct peer *pe, uint64_t off, uint64_t to, uint32_t len)
{
	struct ibv_wc wc;
	memset(a->buf + to, 0xEE, len + 1);
	struct cmd c = {.opcode = IBV_WR_RDMA_READ,
			.off = to,
			.len = len,
			.wr_id = 40,
			.raddr = pe->ep.addr + off,
			.rkey = pe->ep.rkey};
	CHECK_EQ(post_send(a, &c), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 40);
	CHECK_EQ(a->buf[to + len], 0xEE);
}

static void data_ops(struct side *a, struct peer *pe, uint32_t len, unsigned seed)
{
	struct ibv_wc wc;
	const uint64_t lo = 0, hi = 1u << 20;
	struct cmd c = {0};
	/* SEND, SEND with immediate: parent -> child */
	for (int imm = 0; imm < 2; imm++) {
		if (imm && iw) {
			/* RDMAP has no immediate data: refused at post, nothing sent. */
			c = (struct cmd){.opcode = IBV_WR_SEND_WITH_IMM, .off = lo, .len = len};
			CHECK_EQ(post_send(a, &c), EINVAL);
			continue;
		}
		fill(a->buf + lo, len, seed + (unsigned)imm);
		memset(pe->buf + hi, 0xEE, len + 1);
		c = (struct cmd){.op = CMD_POST_RECV, .off = hi, .len = len, .wr_id = 50};
		CHECK_EQ(ask(pe, c).ret, 0);
		c = (struct cmd){.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				 .off = lo,
				 .len = len,
				 .wr_id = 1};
		CHECK_EQ(post_send(a, &c), 0);
		REQUIRE(wait_wc(a->cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_SEND);
		struct reply r = ask(pe, (struct cmd){.op = CMD_WAIT_WC});
		REQUIRE(r.ret == 0);
		CHECK_EQ(r.wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(r.wc.opcode, IBV_WC_RECV);
		CHECK_EQ(r.wc.byte_len, len);
		CHECK_EQ(r.wc.wr_id, 50);
		CHECK_EQ(!!(r.wc.wc_flags & IBV_WC_WITH_IMM), imm);
		CHECK_MEM(pe->buf + hi, a->buf + lo, len);
		CHECK_EQ(pe->buf[hi + len], 0xEE);
	}
	/* WRITE and WRITE with immediate: parent -> child */
	fill(a->buf + lo, len, seed + 2);
	memset(pe->buf + hi, 0xEE, len + 1);
	c = (struct cmd){.opcode = IBV_WR_RDMA_WRITE,
			 .off = lo,
			 .len = len,
			 .wr_id = 2,
			 .raddr = pe->ep.addr + hi,
			 .rkey = pe->ep.rkey};
	CHECK_EQ(post_send(a, &c), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	if (iw) {
		/* Placed once a READ behind it has come back: read it into our own hi area. */
		read_back(a, pe, hi, hi, len);
		CHECK_MEM(a->buf + hi, a->buf + lo, len);
	}
	CHECK_MEM(pe->buf + hi, a->buf + lo, len);
	CHECK_EQ(pe->buf[hi + len], 0xEE);
	fill(a->buf + lo, len, seed + 3);
	if (iw) {
		/* RDMAP has no immediate data: refused at post. */
		c.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		CHECK_EQ(post_send(a, &c), EINVAL);
	} else {
		CHECK_EQ(
		    ask(pe, (struct cmd){.op = CMD_POST_RECV, .off = 0, .len = 0, .wr_id = 51}).ret,
		    0);
		c.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		CHECK_EQ(post_send(a, &c), 0);
		REQUIRE(wait_wc(a->cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
		struct reply r = ask(pe, (struct cmd){.op = CMD_WAIT_WC});
		REQUIRE(r.ret == 0);
		CHECK_EQ(r.wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
		CHECK_EQ(r.wc.byte_len, len);
		CHECK_EQ(be32toh(r.wc.imm_data), 0xfeedf00d);
		CHECK_MEM(pe->buf + hi, a->buf + lo, len);
	}
	/* READ: parent <- child */
	fill(pe->buf + hi, len, seed + 4);
	memset(a->buf + lo, 0xEE, len + 1);
	c = (struct cmd){.opcode = IBV_WR_RDMA_READ,
			 .off = lo,
			 .len = len,
			 .wr_id = 3,
			 .raddr = pe->ep.addr + hi,
			 .rkey = pe->ep.rkey};
	CHECK_EQ(post_send(a, &c), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ);
	CHECK_MEM(a->buf + lo, pe->buf + hi, len);
	CHECK_EQ(a->buf[lo + len], 0xEE);
}

/* The child as requester: WRITE into the parent and READ back from it. */
static void child_requests(struct side *a, struct peer *pe, uint32_t len)
{
	fill(pe->buf, len, 77);
	memset(a->buf + (1u << 20), 0, len);
	struct cmd c = {.op = CMD_REQUEST,
			.opcode = IBV_WR_RDMA_WRITE,
			.off = 0,
			.len = len,
			.raddr = (uintptr_t)a->buf + (1u << 20),
			.rkey = a->mr->rkey,
			.wr_id = 9};
	struct reply r = ask(pe, c);
	REQUIRE(r.ret == 0);
	CHECK_EQ(r.wc.status, IBV_WC_SUCCESS);
	if (iw) {
		/* The child's WRITE is placed once its READ behind it has come back. */
		memset(pe->buf + (1u << 20), 0xEE, len);
		struct cmd rd = c;
		rd.opcode = IBV_WR_RDMA_READ;
		rd.off = 1u << 20;
		rd.wr_id = 10;
		r = ask(pe, rd);
		REQUIRE(r.ret == 0);
		CHECK_EQ(r.wc.status, IBV_WC_SUCCESS);
		CHECK_EQ(r.wc.wr_id, 10);
		CHECK_MEM(pe->buf + (1u << 20), pe->buf, len);
	}
	CHECK_MEM(a->buf + (1u << 20), pe->buf, len);
	fill(a->buf, len, 78);
	c.opcode = IBV_WR_RDMA_READ;
	c.off = 1u << 20;
	c.raddr = (uintptr_t)a->buf;
	r = ask(pe, c);
	REQUIRE(r.ret == 0);
	CHECK_EQ(r.wc.status, IBV_WC_SUCCESS);
	CHECK_MEM(pe->buf + (1u << 20), a->buf, len);
}

/* iWARP: RDMAP has no atomics (RFC 7306 is not implemented, as on siw): the device says so
 * and both are refused at post; the target stays as it was. */
static void atomics_refused(struct side *a, struct peer *pe)
{
	struct ibv_device_attr da;
	CHECK_EQ(ibv_query_device(a->ctx, &da), 0);
	CHECK_EQ(da.atomic_cap, IBV_ATOMIC_NONE);
	uint64_t *target = (uint64_t *)(pe->buf + 8192);
	*target = 7;
	struct cmd c = {.opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
			.off = 0,
			.len = 8,
			.wr_id = 4,
			.raddr = pe->ep.addr + 8192,
			.rkey = pe->ep.rkey};
	CHECK_EQ(post_send(a, &c), EINVAL);
	c.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK_EQ(post_send(a, &c), EINVAL);
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(a->cq, 1, &wc), 0);
	read_back(a, pe, 8192, 8192, 8); /* the QP still works */
	CHECK_EQ(*(uint64_t *)(a->buf + 8192), 7);
	CHECK_EQ(*target, 7);
}

static void atomics(struct side *a, struct peer *pe)
{
	uint64_t *target = (uint64_t *)(pe->buf + 8192);
	*target = 7;
	struct cmd c = {.opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
			.off = 0,
			.len = 8,
			.wr_id = 4,
			.raddr = pe->ep.addr + 8192,
			.rkey = pe->ep.rkey};
	struct ibv_wc wc;
	CHECK_EQ(post_send(a, &c), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(*(uint64_t *)a->buf, 7);
	CHECK_EQ(*target, 9);
	c.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	CHECK_EQ(post_send(a, &c), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(*(uint64_t *)a->buf, 9);
	CHECK_EQ(*target, 16);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A case the device's protocol does not have (or has differently): said, never silent. */
static void note(const char *what, const char *why)
{
	fprintf(stderr, "NOTE (%s): %s: %s\n", dev_name, what, why);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	REQUIRE(ibv_query_qp(qp, &qa, IBV_QP_STATE, &qi) == 0);
	return qa.qp_state;
}

/* iWARP: a Terminate or a reset reaches each side in its own time. Waits up to 10 s for our
 * QP (pe NULL) or the child's to reach state; true if it did. */
static bool wait_state(struct side *a, struct peer *pe, enum ibv_qp_state state)
{
	uint64_t stop_at = now_ms() + 10000;
	for (;;) {
		int st = pe ? ask(pe, (struct cmd){.op = CMD_QP_STATE}).ret : (int)qp_state(a->qp);
		if (st == (int)state)
			return true;
		if (now_ms() >= stop_at)
			return false;
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
}

/* iWARP, white box: the MULPDU of our QP's connection (the largest DDP segment it sends; it
 * follows the MSS once the MPA exchange is over, so no verb reports it). */
static uint32_t qp_mulpdu(struct ibv_qp *ibqp)
{
	struct sr_qp *q = (struct sr_qp *)ibqp;
	struct iw_qp_attr at;
	core_lock(q->ctx->core);
	iw_qp_get_attr(q->iqp, &at);
	core_unlock(q->ctx->core);
	return at.mulpdu;
}

/* iWARP: a request the child refuses (c: wr_id 5 or 6), posted with a good READ behind it
 * (wr_id 15). c completed when TCP took it; the child sends a Terminate and goes to ERR; the
 * READ, outstanding when the Terminate arrives, gets its status; we go to ERR too. */
static void iw_refused(struct side *a, struct peer *pe, const struct cmd *c,
		       enum ibv_wc_status read_status)
{
	struct ibv_wc wc;
	struct cmd rd = {.opcode = IBV_WR_RDMA_READ,
			 .off = 4096,
			 .len = 64,
			 .wr_id = 15,
			 .raddr = pe->ep.addr,
			 .rkey = pe->ep.rkey};
	CHECK_EQ(post_two(a, c, &rd), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.wr_id, c->wr_id);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.wr_id, 15);
	CHECK_EQ(wc.status, read_status);
	CHECK(wait_state(a, NULL, IBV_QPS_ERR));
	CHECK(wait_state(a, pe, IBV_QPS_ERR));
	/* Later work requests are flushed. */
	struct cmd s = {.opcode = IBV_WR_SEND, .off = 0, .len = 8, .wr_id = 16};
	CHECK_EQ(post_send(a, &s), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.wr_id, 16);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

/* iWARP: the child is SIGKILLed while NKILL MiB of WRITEs to it are under way (the first
 * bytes have arrived). Its kernel resets the TCP connection (there is no retry count to
 * exhaust): every WR completes in bounded time and in order - those TCP took before the reset
 * with success, then errors only - and the QP ends in ERR. */
#define NKILL 32
static void iw_kill_mid_transfer(struct side *a, struct peer *pe)
{
	struct ibv_wc wc;
	read_back(a, pe, 0, 4096, 1); /* the connection is up */
	memset(pe->buf, 0, 1u << 20);
	memset(a->buf, 0xA5, 1u << 20);
	for (uint64_t i = 0; i < NKILL; i++) {
		struct cmd c = {.opcode = IBV_WR_RDMA_WRITE,
				.off = 0,
				.len = 1u << 20,
				.wr_id = 100 + i,
				.raddr = pe->ep.addr,
				.rkey = pe->ep.rkey};
		CHECK_EQ(post_send(a, &c), 0);
	}
	struct cmd rd = {.opcode = IBV_WR_RDMA_READ,
			 .off = 1u << 20,
			 .len = 64,
			 .wr_id = 100 + NKILL,
			 .raddr = pe->ep.addr,
			 .rkey = pe->ep.rkey};
	CHECK_EQ(post_send(a, &rd), 0);
	uint64_t stop_at = now_ms() + 10000;
	while (*(volatile uint8_t *)pe->buf == 0 && now_ms() < stop_at)
		;
	CHECK_EQ(pe->buf[0], 0xA5); /* mid-transfer: the first bytes are there */
	kill(pe->pid, SIGKILL);
	waitpid(pe->pid, NULL, 0);
	uint64_t t0 = now_ms();
	int ok = 0, failed = 0;
	for (uint64_t i = 0; i <= NKILL; i++) {
		REQUIRE(wait_wc(a->cq, &wc) == 0);
		CHECK_EQ(wc.wr_id, 100 + i); /* in order */
		if (wc.status == IBV_WC_SUCCESS) {
			CHECK_EQ(failed, 0); /* no success after an error */
			ok++;
		} else {
			if (failed)
				CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
			else
				fprintf(stderr, "kill: first failed WR %llu: %s\n",
					(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			failed++;
		}
	}
	uint64_t took = now_ms() - t0;
	fprintf(stderr, "kill: %d WRs succeeded, %d failed, %llu ms after the kill\n", ok, failed,
		(unsigned long long)took);
	CHECK(took < 5000);
	/* The READ, last, cannot have come back from a killed process - unless all of it was
	 * done before the kill landed (then it was no test of a kill mid-transfer). */
	if (!failed) { /* a loaded machine can deschedule us between the first byte and the kill */
		fprintf(stderr, "KILL TOO LATE: the child had answered everything before SIGKILL; "
				"only the end of the connection is checked\n");
		usleep(300000); /* time to see the end of the stream (a send before it is lost) */
	} else {
		CHECK(wait_state(a, NULL, IBV_QPS_ERR));
	}
	/* Either way the peer is gone: the next send fails (flushed), as on RoCE. */
	struct cmd s = {.opcode = IBV_WR_SEND, .off = 0, .len = 8, .wr_id = 7};
	CHECK_EQ(post_send(a, &s), 0);
	REQUIRE(wait_wc(a->cq, &wc) == 0);
	CHECK_EQ(wc.wr_id, 7);
	CHECK_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
}

int main(int argc, char **argv)
{
	int data_only = 0;
	if (getenv("SOFTRDMA_TEST_DEV") && *getenv("SOFTRDMA_TEST_DEV"))
		dev_name = getenv("SOFTRDMA_TEST_DEV");
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--data-only"))
			data_only = 1;
		else if (!strcmp(argv[i], "--dev") && i + 1 < argc)
			dev_name = argv[++i];
	}
	/* iWARP's rendezvous port, random per run, set before the fork so that the child uses
	 * the same one. */
	if (!getenv("SOFTRDMA_IW_PORT")) {
		char port[16];
		snprintf(port, sizeof(port), "%d", 10000 + (int)(getpid() % 10000));
		setenv("SOFTRDMA_IW_PORT", port, 1);
	}
	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	bool found = false;
	for (int i = 0; list && i < ndev; i++) {
		if (!strcmp(ibv_get_device_name(list[i]), dev_name)) {
			found = true;
			iw = list[i]->transport_type == IBV_TRANSPORT_IWARP;
			CHECK_EQ(iw, list[i]->node_type == IBV_NODE_RNIC);
		}
	}
	ibv_free_device_list(list);
	REQUIRE(found);
	fprintf(stderr, "device %s (%s)\n", dev_name, iw ? "iWARP" : "RoCE");
	if (iw) {
		note("SEND / RDMA WRITE with immediate", "RDMAP has no immediate data; checked "
							 "to be refused at post (EINVAL)");
		note("RDMA WRITE", "completes when TCP has the bytes; the target is checked after "
				   "a READ behind it");
	}
	uint8_t *shared =
	    mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint8_t *abuf = calloc(1, BUF_SIZE);
	REQUIRE(shared != MAP_FAILED && abuf);
	struct params normal = {
	    .mr_access = ALL_ACCESS, .rnr_retry = 7, .timeout = 14, .retry_cnt = 7};
	struct side a;
	struct peer pe;

	start(&a, &pe, abuf, shared, &normal, &normal);
	uint32_t mtu = 128u << a.mtu;
	uint32_t sizes[16];
	unsigned nsizes = 0;
	const uint32_t common[] = {0, 1, mtu - 1, mtu, mtu + 1};
	for (unsigned i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		sizes[nsizes++] = common[i];
	if (iw) {
		/* Around our FPDU (the child's is sized alike): once the connection is up (a
		 * READ has come back), a message that fills one exactly (MULPDU minus the
		 * untagged, then the tagged header), one byte more, and MULPDU +-1. */
		read_back(&a, &pe, 0, 4096, 1);
		uint32_t m = qp_mulpdu(a.qp);
		uint32_t su = m - iw_opinfo(IW_OP_SEND)->hdr_len;
		uint32_t st = m - iw_opinfo(IW_OP_WRITE)->hdr_len;
		const uint32_t more[] = {su, su + 1, st, st + 1, m - 1, m, m + 1};
		fprintf(stderr, "MULPDU %u\n", m);
		for (unsigned i = 0; i < sizeof(more) / sizeof(more[0]); i++)
			sizes[nsizes++] = more[i];
	}
	sizes[nsizes++] = 1u << 20;
	for (unsigned i = 0; i < nsizes; i++) {
		fprintf(stderr, "two processes: every opcode at %u bytes\n", sizes[i]);
		data_ops(&a, &pe, sizes[i], i);
		child_requests(&a, &pe, sizes[i]);
	}
	if (iw) {
		note("atomics", "RDMAP has none (atomic_cap NONE); checked to be refused at post");
		atomics_refused(&a, &pe);
	} else {
		atomics(&a, &pe);
	}
	stop(&a, &pe, false);
	if (data_only) {
		munmap(shared, BUF_SIZE);
		free(abuf);
		return check_exit();
	}

	/* Remote access violation: the child's region grants no remote write. */
	struct params no_write = normal;
	no_write.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
	start(&a, &pe, abuf, shared, &no_write, &normal);
	struct cmd c = {.opcode = IBV_WR_RDMA_WRITE,
			.off = 0,
			.len = 100,
			.wr_id = 5,
			.raddr = pe.ep.addr,
			.rkey = pe.ep.rkey};
	struct ibv_wc wc;
	memset(shared, 0x5A, 100);
	if (iw) {
		note("WRITE the target refuses", "completes locally; the READ behind it gets the "
						 "Terminate's REM_ACCESS_ERR");
		iw_refused(&a, &pe, &c, IBV_WC_REM_ACCESS_ERR);
	} else {
		CHECK_EQ(post_send(&a, &c), 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
	}
	CHECK_EQ(shared[0], 0x5A); /* not a byte moved */
	CHECK_EQ(shared[99], 0x5A);
	CHECK_EQ(ask(&pe, (struct cmd){.op = CMD_QP_STATE}).ret, IBV_QPS_ERR);
	stop(&a, &pe, false);

	/* RNR exhaustion: no receive posted, rnr_retry 2. */
	struct params rnr = normal;
	rnr.rnr_retry = 2;
	start(&a, &pe, abuf, shared, &normal, &rnr);
	c = (struct cmd){.opcode = IBV_WR_SEND, .off = 0, .len = 64, .wr_id = 6};
	if (iw) {
		/* No RNR NAK in iWARP: a SEND that finds no receive is fatal at the target (DDP
		 * untagged buffer error, "no buffer"): Terminate, both QPs in ERR. */
		note("SEND with no receive posted", "no RNR retry in iWARP: fatal, both QPs in "
						    "ERR (asserted instead of RNR_RETRY_EXC_ERR)");
		iw_refused(&a, &pe, &c, IBV_WC_REM_INV_REQ_ERR);
	} else {
		CHECK_EQ(post_send(&a, &c), 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_RNR_RETRY_EXC_ERR);
	}
	stop(&a, &pe, false);

	/* The peer process dies: the requester exhausts its retries (timeout 10 = ~4 ms,
	 * retry_cnt 3) and the WR completes with RETRY_EXC_ERR. */
	struct params quick = normal;
	quick.timeout = 10;
	quick.retry_cnt = 3;
	start(&a, &pe, abuf, shared, &normal, &quick);
	if (iw) {
		note("peer process killed",
		     "no retry count in iWARP: killed mid-transfer, the TCP "
		     "reset ends the QP (asserted instead of RETRY_EXC_ERR)");
		iw_kill_mid_transfer(&a, &pe);
	} else {
		kill(pe.pid, SIGKILL);
		waitpid(pe.pid, NULL, 0);
		c = (struct cmd){.opcode = IBV_WR_RDMA_WRITE,
				 .off = 0,
				 .len = 64,
				 .wr_id = 7,
				 .raddr = pe.ep.addr,
				 .rkey = pe.ep.rkey};
		CHECK_EQ(post_send(&a, &c), 0);
		REQUIRE(wait_wc(a.cq, &wc) == 0);
		CHECK_EQ(wc.status, IBV_WC_RETRY_EXC_ERR);
		CHECK_EQ(wc.wr_id, 7);
	}
	close(pe.fd);
	ibv_destroy_qp(a.qp);
	ibv_dereg_mr(a.mr);
	ibv_destroy_cq(a.cq);
	ibv_dealloc_pd(a.pd);
	ibv_close_device(a.ctx);

	munmap(shared, BUF_SIZE);
	free(abuf);
	return check_exit();
}
