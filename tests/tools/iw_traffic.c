/* iw_traffic: generates a known iWARP conversation on iwarp_lo for capture tools (tshark).
 * One process, two contexts, one TCP connection on 127.0.0.1:<port> set up with the internal
 * listen / accept / connect calls (softrdma.h), then, every byte and completion checked:
 *   SEND 100 B, SEND <size> B (several FPDUs when size > MULPDU), SEND with Solicited Event
 *   (the receiver's CQ, armed for solicited events only, must fire for it and not for a
 *   plain SEND), SEND with Invalidate (an MR of the receiver), RDMA WRITE <size> B followed by
 *   a 0-byte SEND that proves it is placed, RDMA READ <size> B (Read Request + Response).
 * Every wait is bounded; any failure prints what went wrong and exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "softrdma.h"

#define WAIT_MS	   10000
#define CONNECT_MS 5000
#define SMALL	   100u
#define MAX_SIZE   (64u << 20)

struct side {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static const char *step = "setup";

__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "iw_traffic: %s: ", step);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void side_open(struct side *s, struct ibv_device *dev, size_t len, bool channel)
{
	memset(s, 0, sizeof(*s));
	if (!(s->ctx = ibv_open_device(dev)))
		fail("ibv_open_device(iwarp_lo): %s", strerror(errno));
	if (channel && !(s->ch = ibv_create_comp_channel(s->ctx)))
		fail("ibv_create_comp_channel: %s", strerror(errno));
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 64, NULL, s->ch, 0);
	s->buf = calloc(1, len);
	if (!s->pd || !s->cq || !s->buf)
		fail("PD / CQ / buffer: %s", strerror(errno));
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (!(s->mr = ibv_reg_mr(s->pd, s->buf, len, acc)))
		fail("ibv_reg_mr: %s", strerror(errno));
	struct ibv_qp_init_attr qia = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!(s->qp = ibv_create_qp(s->pd, &qia)))
		fail("ibv_create_qp: %s", strerror(errno));
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = acc};
	int r = ibv_modify_qp(s->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (r)
		fail("ibv_modify_qp(INIT): %s", strerror(r));
}

static void side_close(struct side *s)
{
	if (ibv_destroy_qp(s->qp) || ibv_dereg_mr(s->mr) || ibv_destroy_cq(s->cq) ||
	    (s->ch && ibv_destroy_comp_channel(s->ch)) || ibv_dealloc_pd(s->pd) ||
	    ibv_close_device(s->ctx))
		fail("teardown failed");
	free(s->buf);
}

struct accept_job {
	struct ibv_qp *qp;
	int ret, err;
};

static void *accept_main(void *arg)
{
	struct accept_job *j = arg;
	j->ret = softrdma_iw_accept(j->qp, CONNECT_MS);
	j->err = errno;
	return NULL;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (uint8_t)(x >> 16);
	}
}

/* One completion from cq, checked, or exit (a hang is a failure). */
static struct ibv_wc wait_wc(struct side *s, uint64_t id, enum ibv_wc_opcode op, uint32_t len)
{
	struct ibv_wc wc;
	uint64_t stop = now_ms() + WAIT_MS;
	int n;
	while ((n = ibv_poll_cq(s->cq, 1, &wc)) == 0)
		if (now_ms() > stop)
			fail("no completion for wr_id %llu within %d ms", (unsigned long long)id,
			     WAIT_MS);
	if (n < 0)
		fail("ibv_poll_cq failed");
	if (wc.status != IBV_WC_SUCCESS)
		fail("wr_id %llu completed with '%s'", (unsigned long long)wc.wr_id,
		     ibv_wc_status_str(wc.status));
	if (wc.wr_id != id || wc.opcode != op)
		fail("expected wr_id %llu opcode %d, got wr_id %llu opcode %d",
		     (unsigned long long)id, op, (unsigned long long)wc.wr_id, wc.opcode);
	if (op != IBV_WC_SEND && op != IBV_WC_RDMA_WRITE && wc.byte_len != len)
		fail("byte_len %u, expected %u", wc.byte_len, len);
	return wc;
}

static void post_recv(struct side *s, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
	int r = ibv_post_recv(s->qp, &wr, &bad);
	if (r)
		fail("ibv_post_recv: %s", strerror(r));
}

static void post_send(struct side *s, struct ibv_send_wr *wr, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr *bad;
	wr->wr_id = id;
	wr->sg_list = &sge;
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_SIGNALED;
	int r = ibv_post_send(s->qp, wr, &bad);
	if (r)
		fail("ibv_post_send: %s", strerror(r));
}

/* Is the receiver's completion channel readable within ms? */
static bool cq_event(struct side *s, int ms)
{
	struct pollfd p = {.fd = s->ch->fd, .events = POLLIN};
	int r = poll(&p, 1, ms);
	if (r < 0)
		fail("poll: %s", strerror(errno));
	return r == 1;
}

/* A Send variant from C to S of len bytes: flags / opcode from wr, checked on arrival. */
static struct ibv_wc send_msg(struct side *S, struct side *C, struct ibv_send_wr *wr, uint32_t len,
			      uint64_t id)
{
	memset(S->buf, 0, len + 1);
	fill(C->buf, len, (uint32_t)id);
	post_recv(S, len, id);
	post_send(C, wr, len, id + 1);
	wait_wc(C, id + 1, IBV_WC_SEND, len);
	struct ibv_wc wc = wait_wc(S, id, IBV_WC_RECV, len);
	if (memcmp(S->buf, C->buf, len) || S->buf[len])
		fail("received bytes differ from the sent ones");
	return wc;
}

static void run(struct side *S, struct side *C, uint32_t size)
{
	struct ibv_send_wr wr = {.opcode = IBV_WR_SEND};
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	step = "SEND small (CQ armed for solicited events only)";
	if (ibv_req_notify_cq(S->cq, 1))
		fail("ibv_req_notify_cq failed");
	send_msg(S, C, &wr, SMALL, 10);
	if (cq_event(S, 0))
		fail("completion event for an unsolicited SEND");
	step = "SEND multi-FPDU";
	wr = (struct ibv_send_wr){.opcode = IBV_WR_SEND};
	send_msg(S, C, &wr, size, 20);
	step = "SEND with solicited event";
	wr = (struct ibv_send_wr){.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SOLICITED};
	send_msg(S, C, &wr, SMALL, 30);
	if (!cq_event(S, WAIT_MS) || ibv_get_cq_event(S->ch, &ev_cq, &ev_ctx) || ev_cq != S->cq)
		fail("no completion event on the receiver's CQ");
	ibv_ack_cq_events(ev_cq, 1);

	step = "SEND with invalidate";
	static uint8_t inv_buf[4096];
	struct ibv_mr *inv = ibv_reg_mr(S->pd, inv_buf, sizeof(inv_buf),
					IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!inv)
		fail("ibv_reg_mr: %s", strerror(errno));
	wr = (struct ibv_send_wr){.opcode = IBV_WR_SEND_WITH_INV, .invalidate_rkey = inv->rkey};
	struct ibv_wc wc = send_msg(S, C, &wr, SMALL, 40);
	if (!(wc.wc_flags & IBV_WC_WITH_INV) || wc.invalidated_rkey != inv->rkey)
		fail("receive completion lacks the invalidated rkey 0x%x (flags 0x%x, rkey 0x%x)",
		     inv->rkey, wc.wc_flags, wc.invalidated_rkey);
	if (ibv_dereg_mr(inv))
		fail("ibv_dereg_mr failed");

	step = "RDMA WRITE";
	memset(S->buf, 0, size + 1);
	fill(C->buf, size, 50);
	post_recv(S, 0, 50);
	wr = (struct ibv_send_wr){.opcode = IBV_WR_RDMA_WRITE,
				  .wr.rdma = {(uintptr_t)S->buf, S->mr->rkey}};
	post_send(C, &wr, size, 51);
	wr = (struct ibv_send_wr){.opcode = IBV_WR_SEND}; /* in order: lands after the WRITE */
	post_send(C, &wr, 0, 52);
	wait_wc(C, 51, IBV_WC_RDMA_WRITE, size);
	wait_wc(C, 52, IBV_WC_SEND, 0);
	wait_wc(S, 50, IBV_WC_RECV, 0);
	if (memcmp(S->buf, C->buf, size) || S->buf[size])
		fail("written bytes differ");

	step = "RDMA READ";
	fill(S->buf, size, 60);
	memset(C->buf, 0, size + 1);
	wr = (struct ibv_send_wr){.opcode = IBV_WR_RDMA_READ,
				  .wr.rdma = {(uintptr_t)S->buf, S->mr->rkey}};
	post_send(C, &wr, size, 60);
	wait_wc(C, 60, IBV_WC_RDMA_READ, size);
	if (memcmp(C->buf, S->buf, size) || C->buf[size])
		fail("read bytes differ");
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iw_traffic -p PORT [-c peer|on|strict|off] [-s SIZE]\n"
		"Connects two iwarp_lo contexts over 127.0.0.1:PORT and runs SEND (100 B, SIZE),\n"
		"SEND+SE, SEND with Invalidate, RDMA WRITE and RDMA READ (SIZE), every byte\n"
		"verified. -c sets SOFTRDMA_IW_CRC (MPA CRC32c policy) for both ends.\n"
		"SIZE defaults to 200000 (several FPDUs on lo). Exit 0 on success.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'}, {0}};
	long port = 0, size = 200000;
	const char *crc = NULL;
	int o;
	while ((o = getopt_long(argc, argv, "hp:c:s:", longopts, NULL)) != -1) {
		char *end = NULL;
		if (o == 'p')
			port = strtol(optarg, &end, 10);
		else if (o == 's')
			size = strtol(optarg, &end, 10);
		else if (o == 'c')
			crc = optarg;
		else {
			usage(o == 'h' ? stdout : stderr);
			return o == 'h' ? 0 : 2;
		}
		if (end && *end)
			fail("bad number '%s'", optarg);
	}
	if (optind != argc || port < 1 || port > 65535 || size < SMALL || size > MAX_SIZE) {
		usage(stderr);
		return 2;
	}
	if (crc && setenv("SOFTRDMA_IW_CRC", crc, 1))
		fail("setenv: %s", strerror(errno));

	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "iwarp_lo"))
			dev = list[i];
	if (!dev)
		fail("no iwarp_lo device");
	struct side S, C;
	side_open(&S, dev, (size_t)size + 1, true);
	side_open(&C, dev, (size_t)size + 1, false);
	step = "connect";
	if (softrdma_iw_listen(S.ctx, (uint16_t)port) < 0)
		fail("softrdma_iw_listen(%ld): %s", port, strerror(errno));
	struct accept_job j = {.qp = S.qp};
	pthread_t t;
	if (pthread_create(&t, NULL, accept_main, &j))
		fail("pthread_create failed");
	int r = softrdma_iw_connect(C.qp, "127.0.0.1", (uint16_t)port, CONNECT_MS);
	int err = errno;
	pthread_join(t, NULL);
	if (r)
		fail("softrdma_iw_connect(127.0.0.1:%ld): %s", port, strerror(err));
	if (j.ret)
		fail("softrdma_iw_accept: %s", strerror(j.err));

	run(&S, &C, (uint32_t)size);
	step = "teardown";
	side_close(&C);
	side_close(&S);
	ibv_free_device_list(list);
	printf(
	    "iw_traffic: OK (port %ld, crc %s, size %ld): SEND, SEND+SE, SEND+INV, WRITE, READ\n",
	    port, crc ? crc : "default", size);
	return 0;
}
