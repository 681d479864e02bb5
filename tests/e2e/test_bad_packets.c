/* A hostile sender on loopback: raw UDP datagrams aimed at a live softrdma QP — runts,
 * truncated headers, unknown opcodes, a wrong transport version, another partition's P_Key,
 * a bad ICRC, an unknown QP, a forged source address or port, a PSN far out of the window,
 * garbage.
 * Each is dropped and counted by its reason (softrdma_counter), nothing crashes, and the QP
 * keeps working. */
#include "check.h"
#include "softrdma.h"
#include "wire/roce/roce.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t buf[8192];
};

static void end_open(struct end *e, struct ibv_device *dev)
{
	e->ctx = ibv_open_device(dev);
	REQUIRE(e->ctx);
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_qp_init_attr qia = {
	    .send_cq = e->cq,
	    .recv_cq = e->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	e->qp = ibv_create_qp(e->pd, &qia);
	REQUIRE(e->pd && e->cq && e->mr && e->qp);
}

static void connect_qp(struct end *e, uint32_t dest, uint32_t psn)
{
	union ibv_gid dgid;
	REQUIRE(ibv_query_gid(e->ctx, 1, 0, &dgid) == 0); /* peer is on 127.0.0.1 too */
	struct ibv_qp_attr a = {
	    .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	REQUIRE(ibv_modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS) == 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = psn;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid = dgid;
	REQUIRE(ibv_modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = psn;
	REQUIRE(ibv_modify_qp(e->qp, &a,
			      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

static int udp_socket(const char *ip, uint16_t *port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0), pmtu = IP_PMTUDISC_DO;
	REQUIRE(fd >= 0);
	/* DF set and unconnected: the kernel sends IPv4 ID 0, as softrdma does. */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
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

/* A SEND ONLY to qpn with psn and a correct ICRC for a packet from src_ip:sport. */
static size_t make_send_pkey(uint8_t *out, uint32_t qpn, uint32_t psn, const char *src_ip,
			     uint16_t sport, uint16_t pkey)
{
	static const uint8_t payload[32] = "hostile payload";
	struct roce_pkt p = {.bth = {.opcode = ROCE_RC_SEND_ONLY,
				     .pkey = pkey,
				     .dqpn = qpn,
				     .ackreq = true,
				     .psn = psn},
			     .payload = payload,
			     .payload_len = sizeof(payload)};
	size_t len = roce_build(&p, out, 256);
	struct roce_envelope env = {.df = true, .sport = sport, .dport = ROCE_UDP_PORT};
	env.src[10] = env.src[11] = env.dst[10] = env.dst[11] = 0xff;
	inet_pton(AF_INET, src_ip, env.src + 12);
	inet_pton(AF_INET, "127.0.0.1", env.dst + 12);
	roce_icrc_put(out + len - 4, roce_icrc(&env, out, len - 4));
	return len;
}

static size_t make_send(uint8_t *out, uint32_t qpn, uint32_t psn, const char *src_ip,
			uint16_t sport)
{
	return make_send_pkey(out, qpn, psn, src_ip, sport, 0xFFFF);
}

static uint64_t ctr(struct end *e, const char *name)
{
	uint64_t v = softrdma_counter(e->ctx, NULL, name);
	if (v == UINT64_MAX)
		fprintf(stderr, "no counter %s\n", name);
	return v;
}

/* Waits (bounded) until the named context counter reaches `want`. */
static uint64_t wait_ctr(struct end *e, const char *name, uint64_t want)
{
	uint64_t v = 0;
	for (int i = 0; i < 2000; i++) {
		v = ctr(e, name);
		if (v >= want && v != UINT64_MAX)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return v;
}

/* a SENDs "still alive"; b's receive id (posted already) gets exactly that. */
static void send_expect(struct end *a, struct end *b, uint64_t id)
{
	memcpy(a->buf, "still alive", 12);
	struct ibv_sge ss = {.addr = (uintptr_t)a->buf, .length = 12, .lkey = a->mr->lkey};
	struct ibv_send_wr sw = {.wr_id = id,
				 .sg_list = &ss,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	CHECK_EQ(ibv_post_send(a->qp, &sw, &sbad), 0);
	struct ibv_wc wc;
	int got = 0;
	for (int i = 0; i < 5000000 && !got; i++)
		got = ibv_poll_cq(b->cq, 1, &wc);
	REQUIRE(got == 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, id);
	CHECK_MEM(b->buf, "still alive", 12);
	got = 0;
	for (int i = 0; i < 5000000 && !got; i++)
		got = ibv_poll_cq(a->cq, 1, &wc);
	REQUIRE(got == 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
}

static void round_trip(struct end *a, struct end *b, uint64_t id)
{
	struct ibv_sge rs = {.addr = (uintptr_t)b->buf, .length = 64, .lkey = b->mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = id, .sg_list = &rs, .num_sge = 1}, *rbad;
	CHECK_EQ(ibv_post_recv(b->qp, &rw, &rbad), 0);
	send_expect(a, b, id);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "roce_lo"))
			dev = list[i];
	REQUIRE(dev);
	static struct end a, b;
	end_open(&a, dev);
	end_open(&b, dev);
	connect_qp(&a, b.qp->qp_num, 0x100);
	connect_qp(&b, a.qp->qp_num, 0x100);
	round_trip(&a, &b, 1);
	CHECK(ctr(&b, "rx_bad_icrc") == 0);

	uint16_t port, port2;
	int fd = udp_socket("127.0.0.1", &port);
	int fd2 = udp_socket("127.0.0.2", &port2);
	uint8_t pkt[256];
	uint32_t bq = b.qp->qp_num;

	/* Runt: shorter than a BTH. It has no DestQP, so steering cannot tell whose it is: it
	 * goes to the first member of the port's group (io/io.h), which is a here unless some
	 * other softrdma process on this machine joined first. Whoever gets it drops and counts
	 * it (test_io_udp checks the counting itself). */
	send_raw(fd, (const uint8_t *)"abcde", 5);
	for (int i = 0; i < 2000 && ctr(&a, "udp_rx_runt") + ctr(&b, "udp_rx_runt") == 0; i++) {
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	CHECK(ctr(&a, "udp_rx_runt") + ctr(&b, "udp_rx_runt") <= 1);
	CHECK_EQ(ctr(&b, "udp_rx_runt"), 0); /* never b: it joined after a */
	/* Truncated: a WRITE ONLY header cut inside its RETH. */
	size_t len = make_send(pkt, bq, 0x101, "127.0.0.1", port);
	pkt[0] = ROCE_RC_WRITE_ONLY;
	send_raw(fd, pkt, 20);
	CHECK_EQ(wait_ctr(&b, "rx_truncated", 1), 1);
	/* Unknown opcode. */
	len = make_send(pkt, bq, 0x101, "127.0.0.1", port);
	pkt[0] = 0x1F;
	send_raw(fd, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_unknown_opcode", 1), 1);
	/* Transport version 1. */
	len = make_send(pkt, bq, 0x101, "127.0.0.1", port);
	pkt[1] |= 0x01;
	send_raw(fd, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_bad_tver", 1), 1);
	/* Bad ICRC: one payload bit flipped after the ICRC was computed. */
	len = make_send(pkt, bq, 0x101, "127.0.0.1", port);
	pkt[20] ^= 0x04;
	send_raw(fd, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_bad_icrc", 1), 1);
	/* From the peer, in sequence, its ICRC right, but in another partition (P_Key
	 * 0x1234; rxe drops it). */
	len = make_send_pkey(pkt, bq, 0x101, "127.0.0.1", port, 0x1234);
	send_raw(fd, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_bad_pkey", 1), 1);
	/* A well-formed packet for a QP that does not exist (same steering slot). */
	len = make_send(pkt, bq + 7, 0x101, "127.0.0.1", port);
	send_raw(fd, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_unknown_qp", 1), 1);
	/* A well-formed packet from an address that is not the QP's peer. */
	len = make_send(pkt, bq, 0x101, "127.0.0.2", port2);
	send_raw(fd2, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_wrong_peer", 1), 1);
	/* From the peer's address, in sequence, P_Key and ICRC right - but not from the port
	 * the peer binds and sends from (any local user can send from 127.0.0.1, none can bind
	 * that port): dropped, and the receive waiting for the peer stays for it. Regression:
	 * the SEND was taken (a forged NAK the same way killed a stream). */
	struct ibv_sge fs = {.addr = (uintptr_t)b.buf, .length = 64, .lkey = b.mr->lkey};
	struct ibv_recv_wr fw = {.wr_id = 50, .sg_list = &fs, .num_sge = 1}, *fbad;
	CHECK_EQ(ibv_post_recv(b.qp, &fw, &fbad), 0);
	len = make_send(pkt, bq, 0x101, "127.0.0.1", port);
	send_raw(fd, pkt, len);
	CHECK_EQ(wait_ctr(&b, "rx_wrong_port", 1), 1);
	struct timespec settle = {0, 20 * 1000 * 1000};
	nanosleep(&settle, NULL);
	struct ibv_wc fwc;
	CHECK_EQ(ibv_poll_cq(b.cq, 1, &fwc), 0);
	send_expect(&a, &b, 50);
	/* From the peer's address, with a PSN far outside the window: the responder drops it
	 * (a sequence NAK at most) and the QP stays usable. */
	len = make_send(pkt, bq, 0x700000, "127.0.0.1", port);
	send_raw(fd, pkt, len);
	/* Random garbage with a valid-looking BTH prefix. */
	srand(7);
	for (int i = 0; i < 200; i++) {
		size_t l = 12 + (size_t)(rand() % 200);
		for (size_t k = 0; k < l; k++)
			pkt[k] = (uint8_t)rand();
		pkt[5] = (uint8_t)(bq >> 16); /* aimed at b's process */
		send_raw(fd, pkt, l);
	}
	struct timespec ts = {0, 50 * 1000 * 1000};
	nanosleep(&ts, NULL);
	/* Nothing of that reached a receive buffer, and the connection still works. */
	struct ibv_wc wc;
	CHECK_EQ(ibv_poll_cq(b.cq, 1, &wc), 0);
	round_trip(&a, &b, 2);
	round_trip(&b, &a, 3);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	CHECK_EQ(ibv_query_qp(b.qp, &qa, IBV_QP_STATE, &qi), 0);
	CHECK_EQ(qa.qp_state, IBV_QPS_RTS);
	uint64_t dropped = ctr(&b, "rx_truncated") + ctr(&b, "rx_unknown_opcode") +
			   ctr(&b, "rx_bad_tver") + ctr(&b, "rx_bad_icrc") +
			   ctr(&b, "rx_unknown_qp") + ctr(&b, "rx_bad_pad") +
			   ctr(&b, "rx_bad_pkey") + ctr(&b, "rx_unexpected_payload");
	fprintf(stderr, "dropped and counted: %llu\n", (unsigned long long)dropped);
	CHECK(dropped >= 200); /* the 200 garbage datagrams and the crafted ones */
	struct softrdma_counter qc[64];
	CHECK(softrdma_query_qp_counters(b.qp, qc, 64) > 5);
	CHECK_EQ(softrdma_query_counters(NULL, NULL, 0), -1);

	close(fd);
	close(fd2);
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dealloc_pd(a.pd);
	ibv_dealloc_pd(b.pd);
	ibv_close_device(a.ctx);
	ibv_close_device(b.ctx);
	ibv_free_device_list(list);
	return check_exit();
}
