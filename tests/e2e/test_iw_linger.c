/* An iWARP QP that leaves its connection right after the peer sent something: softrdma's FIN
 * waits until the stream has been quiet for a moment (iwp_qp_detach). Linux siw completes a
 * send WQE only after its last byte is with TCP, and a FIN arriving in between flushes that
 * WQE with IBV_WC_LOC_QP_OP_ERR although its bytes arrived: perftest's closing handshake
 * against a softrdma server ended in 'Bad wc status 2' at the siw client that way.
 *
 * The peer here is a plain TCP socket driven by iw_conn (MPA initiator) in a thread: it sends
 * one SEND FPDU ("ping"), then reads until the end of the stream. softrdma is the passive side
 * through rdma_cm over iwarp_lo: it receives the ping, answers with a SEND ("pong") and destroys
 * its QP and id at once. Checks: the pong arrives, and the end of the stream comes no earlier
 * than MIN_LINGER_MS after the ping was sent (without the linger it follows the pong within
 * microseconds). Every wait is bounded. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "vutil.h"
#include "engine/iw_conn.h"
#include "wire/iwarp/iwarp.h"

#define MS	      1000000ull
#define MIN_LINGER_MS 15 /* the linger is 20 ms of quiet; some slack for the clock */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct peer {
	uint16_t port;
	bool handshake_ok, pong, eof;
	uint64_t sent_at, eof_at;
};

static bool send_all(int fd, const uint8_t *b, size_t n)
{
	return send(fd, b, n, MSG_NOSIGNAL) == (ssize_t)n;
}

static void *peer_main(void *arg)
{
	struct peer *pe = arg;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(pe->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct iw_conn c;
	struct iw_conn_cfg cfg = {.role = IW_CONN_INITIATOR, .ird = 1, .ord = 1};
	uint8_t buf[4096], stream[8192];
	size_t have = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto out;
	if (iw_conn_init(&c, &cfg, now_ns()) != 0)
		goto out;
	const uint8_t *hs;
	size_t hn = iw_conn_tx_peek(&c, &hs);
	if (!send_all(fd, hs, hn))
		goto out;
	iw_conn_tx_advance(&c, hn);
	for (uint64_t until = now_ns() + 5000 * MS; !iw_conn_rx_done(&c) && now_ns() < until;) {
		struct pollfd q = {.fd = fd, .events = POLLIN};
		if (poll(&q, 1, 100) != 1)
			continue;
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		size_t used = 0;
		if (r <= 0)
			goto out;
		iw_conn_input(&c, buf, (size_t)r, now_ns(), &used);
		memcpy(stream, buf + used, (size_t)r - used);
		have = (size_t)r - used;
	}
	pe->handshake_ok = iw_conn_state(&c) == IW_CONN_ESTABLISHED;
	if (!pe->handshake_ok)
		goto out;
	/* One SEND: QN 0, MSN 1, MO 0, last. */
	struct iw_fpdu f = {0};
	uint8_t fp[128];
	iw_hdr_init(&f.hdr, IW_OP_SEND);
	f.hdr.last = true;
	f.hdr.qn = IW_QN_SEND;
	f.hdr.msn = 1;
	f.payload = (const uint8_t *)"ping";
	f.payload_len = 4;
	int n = iw_fpdu_encode(&f, false, fp, sizeof(fp));
	if (n <= 0)
		goto out;
	pe->sent_at = now_ns();
	if (!send_all(fd, fp, (size_t)n))
		goto out;
	for (uint64_t until = now_ns() + 5000 * MS; now_ns() < until;) {
		struct pollfd q = {.fd = fd, .events = POLLIN};
		if (poll(&q, 1, 100) != 1)
			continue;
		ssize_t r = recv(fd, stream + have, sizeof(stream) - have, 0);
		if (r == 0) {
			pe->eof = true;
			pe->eof_at = now_ns();
			break;
		}
		if (r < 0)
			break;
		have += (size_t)r;
		if (have == sizeof(stream))
			break;
	}
	pe->pong = memmem(stream, have, "pong", 4) != NULL;
out:
	if (fd >= 0)
		close(fd);
	return NULL;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = vt_cm_event(ch, 5000);

	if (ev)
		CHECK_EQ(ev->event, t);
	return ev;
}

int main(void)
{
	setenv("SOFTRDMA_TRANSPORT", "iwarp", 1);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lis;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &lis, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(lis, (struct sockaddr *)&sa) == 0);
	REQUIRE(rdma_listen(lis, 1) == 0);

	struct peer pe = {.port = ntohs(rdma_get_src_port(lis))};
	pthread_t th;
	REQUIRE(pe.port != 0);
	REQUIRE(pthread_create(&th, NULL, peer_main, &pe) == 0);

	struct rdma_cm_event *ev = next_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	REQUIRE(ev);
	struct rdma_cm_id *id = ev->id;
	rdma_ack_cm_event(ev);
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	REQUIRE(pd && cq);
	struct ibv_qp_init_attr qa = {.send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 2,
					      .max_recv_wr = 2,
					      .max_send_sge = 1,
					      .max_recv_sge = 1,
					      .max_inline_data = 64}};
	REQUIRE(rdma_create_qp(id, pd, &qa) == 0);
	static char rbuf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, rbuf, sizeof(rbuf), IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(mr);
	struct ibv_sge rs = {.addr = (uintptr_t)rbuf, .length = sizeof(rbuf), .lkey = mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1}, *rbad;
	REQUIRE(ibv_post_recv(id->qp, &rw, &rbad) == 0);
	struct rdma_conn_param cp = {.initiator_depth = 1, .responder_resources = 1};
	REQUIRE(rdma_accept(id, &cp) == 0);
	ev = next_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	REQUIRE(ev);
	rdma_ack_cm_event(ev);

	/* The ping, the pong, and away at once. */
	struct ibv_wc wc;
	int got = 0;
	for (uint64_t until = now_ns() + 5000 * MS; !got && now_ns() < until;)
		got = ibv_poll_cq(cq, 1, &wc);
	REQUIRE(got == 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 4);
	CHECK_MEM(rbuf, "ping", 4);
	struct ibv_sge ss = {.addr = (uintptr_t) "pong", .length = 4};
	struct ibv_send_wr sw = {.wr_id = 2,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED},
			   *sbad;
	REQUIRE(ibv_post_send(id->qp, &sw, &sbad) == 0);
	got = 0;
	for (uint64_t until = now_ns() + 5000 * MS; !got && now_ns() < until;)
		got = ibv_poll_cq(cq, 1, &wc);
	CHECK_EQ(got, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);

	REQUIRE(pthread_join(th, NULL) == 0);
	CHECK(pe.handshake_ok);
	CHECK(pe.pong);
	CHECK(pe.eof);
	uint64_t linger_ms = (pe.eof_at - pe.sent_at) / MS;
	printf("end of stream %llu ms after the ping\n", (unsigned long long)linger_ms);
	CHECK(linger_ms >= MIN_LINGER_MS);

	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(lis);
	rdma_destroy_event_channel(ch);
	return check_exit();
}
