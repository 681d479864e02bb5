/* softrdma's RoCE rdma_cm against a kernel rdma_cm peer, played with the kernel's own MADs: the
 * REQ, REP, RTU and DREQ of rxe's rping (tests/data/rxe_rdmacm_rping.pcap), their comm IDs,
 * ports and addresses rewritten for loopback, sent as real RoCEv2 packets to QP1 at
 * 127.0.0.1:4791 (so through the kernel's steering and softrdma's GSI router, core/gsi.h); the
 * answers come back to this test's own comm-ID endpoint (a tag of its own, as a second CM on the
 * host). Checked:
 *   passive (softrdma listens, the "kernel" connects): CONNECT_REQUEST with the REQ's values;
 *     the REP: IDs, TID, QPN, responder resources / initiator depth, target ACK delay, RNR
 *     retry, node GUID; the QP at RTS with the kernel's PSN rule (sq_psn = the REQ's Starting
 *     PSN, rq_psn = the REP's), dest QPN and MTU from the REQ; RTU -> ESTABLISHED; DREQ -> DREP
 *     (TID echoed, IDs swapped) and DISCONNECTED; the DREQ again -> the DREP again; before
 *     it, DREQs naming another peer comm ID or another QP are dropped (the kernel CM's checks);
 *   active (softrdma connects to a "kernel" listener): the REQ as rxe's rdma_cm sends it
 *     (timeouts 20, max retries 15, RC, no E2E flow control, P_Key, LIDs 0xFFFF, GIDs, hop
 *     limit 64, local ACK timeout 19, the flow label from the ports, rdma_cm's IP header with
 *     the id's source port); the kernel's REP -> the QP at RTS with the same PSN rule, the RTU;
 *     an XRC initiator's REQ says XRC (transport 3, extended type 1);
 *   which transport (cm_probe.c): softrdma's resolve, where 127.0.0.1 has both devices, asks
 *     with a SIDR_REQ for the listener's service ID (rdma_cm's IP header, P_Key) and takes
 *     the kernel's answer for an RC listener (SIDR_REP status 2) as RoCE;
 *   nobody listens: the kernel's REQ gets REJ 8 for it (remote ID = its local ID, REQ
 *     rejected); a DREQ for an unknown comm ID gets a DREP. */
#define _GNU_SOURCE
#include "check.h"
#include "pcap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm/cm.h"
#include "core/gsi.h"
#include "wire/roce/cm_mad.h"
#include "wire/roce/roce.h"

#define WAIT_MS 5000

static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
static int udp_fd;
static uint16_t udp_port;
static uint32_t psn;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The first MAD of type attr in the capture. */
static void capture_mad(uint16_t attr, struct cm_mad *out)
{
	struct pcap_file f;
	REQUIRE(pcap_open(&f, SOFTRDMA_TEST_DATA "/rxe_rdmacm_rping.pcap") == 0);
	struct pcap_frame fr;
	bool found = false;
	while (!found && pcap_next(&f, &fr) == 1) {
		struct pcap_roce r;
		struct roce_pkt p;
		if (!pcap_roce(&fr, 0, &r) || roce_parse(r.payload, r.payload_len, &p) != 0 ||
		    p.bth.dqpn != 1 || p.payload_len != CM_MAD_LEN)
			continue;
		found = cm_mad_parse(p.payload, CM_MAD_LEN, out) == 0 && out->attr == attr;
	}
	pcap_close(&f);
	REQUIRE(found);
}

/* Sends a MAD as the kernel's QP1 would: a UD SEND ONLY to QP1 at 127.0.0.1:4791. */
static void wire_send(const struct cm_mad *m)
{
	uint8_t mad[CM_MAD_LEN], pkt[ROCE_BTH_LEN + ROCE_DETH_LEN + CM_MAD_LEN + ROCE_ICRC_LEN];
	REQUIRE(cm_mad_build(m, mad) == CM_MAD_LEN);
	struct roce_pkt p;
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_UD_SEND_ONLY;
	p.bth.pkey = 0xFFFF;
	p.bth.dqpn = 1;
	p.bth.psn = psn++;
	p.deth.qkey = ROCE_GSI_QKEY;
	p.deth.src_qpn = 1;
	p.payload = mad;
	p.payload_len = CM_MAD_LEN;
	size_t len = roce_build(&p, pkt, sizeof(pkt));
	REQUIRE(len == sizeof(pkt));
	struct roce_envelope env = {.df = true, .sport = udp_port, .dport = ROCE_UDP_PORT};
	memcpy(env.src, lo, 16);
	memcpy(env.dst, lo, 16);
	roce_icrc_put(pkt + len - 4, roce_icrc(&env, pkt, len - 4));
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons(ROCE_UDP_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	REQUIRE(sendto(udp_fd, pkt, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len);
}

/* The next MAD on an endpoint (our tag's or a service ID's). */
static bool ep_next(int fd, struct cm_mad *m, int ms)
{
	uint64_t until = now_ms() + (uint64_t)ms;
	while (now_ms() < until) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 20) != 1)
			continue;
		struct gsi_frame f;
		if (gsi_ep_recv(fd, &f) == 1) {
			CHECK_MEM(f.src, lo, 16);
			CHECK_MEM(f.dst, lo, 16);
			return cm_mad_parse(f.mad, CM_MAD_LEN, m) == 0;
		}
	}
	return false;
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
	if (poll(&pf, 1, ms) != 1)
		return NULL;
	struct rdma_cm_event *e;
	return rdma_get_cm_event(ch, &e) == 0 ? e : NULL;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *e = next_event(ch, WAIT_MS);
	REQUIRE(e);
	if (e->event != t)
		fprintf(stderr, "got %s, want %s\n", rdma_event_str(e->event), rdma_event_str(t));
	REQUIRE(e->event == t);
	return e;
}

static struct ibv_qp *make_qp(struct rdma_cm_id *id, struct ibv_cq **cq)
{
	*cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	REQUIRE(*cq);
	struct ibv_qp_init_attr qa = {
	    .send_cq = *cq,
	    .recv_cq = *cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	REQUIRE(rdma_create_qp(id, NULL, &qa) == 0);
	return id->qp;
}

static void qp_check(struct ibv_qp *qp, uint32_t sq_psn, uint32_t rq_psn, uint32_t dqpn)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	REQUIRE(ibv_query_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN |
				 IBV_QP_PATH_MTU,
			     &ia) == 0);
	CHECK_EQ(a.qp_state, IBV_QPS_RTS);
	CHECK_EQ(a.sq_psn, sq_psn);
	CHECK_EQ(a.rq_psn, rq_psn);
	CHECK_EQ(a.dest_qp_num, dqpn);
	CHECK(a.path_mtu >= IBV_MTU_256 && a.path_mtu <= IBV_MTU_4096);
}

static uint16_t free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

/* The kernel's REQ, made ours: our comm ID, the port, loopback everywhere. */
static struct cm_mad kernel_req(uint32_t local_id, uint16_t port)
{
	struct cm_mad m;
	capture_mad(CM_ATTR_REQ, &m);
	m.local_id = local_id;
	m.service_id = (uint64_t)RDMA_PS_TCP << 16 | port;
	memcpy(m.sgid, lo, 16);
	memcpy(m.dgid, lo, 16);
	struct cm_cma_hdr h;
	REQUIRE(cm_cma_hdr_parse(m.pd, &h) == 0);
	memcpy(h.src, lo, 16);
	memcpy(h.dst, lo, 16);
	REQUIRE(cm_cma_hdr_build(&h, m.pd) == CM_MAD_CMA_HDR_LEN);
	return m;
}

static void test_passive(int tag_fd, uint16_t tag)
{
	printf("softrdma listens, the kernel's REQ / RTU / DREQ\n");
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid;
	REQUIRE(ch && rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) == 0);
	uint16_t port = free_port();
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	REQUIRE(rdma_bind_addr(lid, (struct sockaddr *)&a) == 0 && rdma_listen(lid, 4) == 0);

	struct cm_mad req = kernel_req((uint32_t)tag << 16 | 0x101, port);
	struct cm_cma_hdr h;
	REQUIRE(cm_cma_hdr_parse(req.pd, &h) == 0);
	/* Sent again until answered, as the kernel's CM does (a datagram can be lost: to a
	 * socket of a process that is just going away, under load). */
	struct rdma_cm_event *e = NULL;
	for (int i = 0; i < 5 && !e; i++) {
		wire_send(&req);
		e = next_event(ch, 1000);
	}
	REQUIRE(e && e->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	struct rdma_cm_id *child = e->id;
	CHECK_EQ(e->param.conn.private_data_len, 56);
	CHECK_EQ(e->param.conn.qp_num, req.qpn);
	CHECK_EQ(e->param.conn.responder_resources, req.init_depth);
	CHECK_EQ(e->param.conn.initiator_depth, req.resp_res);
	CHECK_EQ(e->param.conn.retry_count, req.retry_count);
	CHECK_EQ(e->param.conn.rnr_retry_count, req.rnr_retry);
	CHECK_EQ(rdma_get_dst_port(child), htons(h.sport));
	CHECK_EQ(rdma_get_src_port(child), htons(port));
	rdma_ack_cm_event(e);

	struct ibv_cq *cq;
	struct ibv_qp *qp = make_qp(child, &cq);
	struct rdma_conn_param cp = {
	    .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7};
	REQUIRE(rdma_accept(child, &cp) == 0);
	struct cm_mad rep;
	REQUIRE(ep_next(tag_fd, &rep, WAIT_MS));
	CHECK_EQ(rep.attr, CM_ATTR_REP);
	CHECK_EQ(rep.remote_id, req.local_id);
	CHECK(rep.local_id != 0);
	CHECK_EQ(rep.tid, req.tid);
	CHECK_EQ(rep.qpn, qp->qp_num);
	CHECK_EQ(rep.resp_res, 1);
	CHECK_EQ(rep.init_depth, 1);
	CHECK_EQ(rep.target_ack_delay, 15);
	CHECK_EQ(rep.rnr_retry, 7);
	CHECK(rep.ca_guid != 0);
	/* Linux's rule: each side sends from the PSN the other announced. */
	qp_check(qp, req.psn, rep.psn, req.qpn);
	printf("  REP: QPN 0x%06x PSN 0x%06x; QP at RTS, sq_psn = REQ's 0x%06x\n", rep.qpn, rep.psn,
	       req.psn);

	/* The RTU, as the kernel's (its IDs and the handshake's TID). */
	struct cm_mad rtu;
	capture_mad(CM_ATTR_RTU, &rtu);
	rtu.tid = req.tid;
	rtu.local_id = req.local_id;
	rtu.remote_id = rep.local_id;
	wire_send(&rtu);
	e = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK(e->id == child);
	rdma_ack_cm_event(e);

	/* Forged DREQs, from the peer's address and naming our comm ID (the kernel's CM checks
	 * the rest too): another peer comm ID, or another QP. Dropped: no DREP, no event. */
	struct cm_mad dreq;
	capture_mad(CM_ATTR_DREQ, &dreq);
	dreq.tid = 0x0000000212345678ull;
	dreq.remote_id = rep.local_id;
	uint64_t forged = cm_counter("rx_forged");
	for (int k = 0; k < 2; k++) {
		dreq.local_id = k ? req.local_id : req.local_id ^ 0x10;
		dreq.qpn = k ? qp->qp_num ^ 1 : qp->qp_num;
		wire_send(&dreq);
	}
	struct cm_mad none;
	CHECK(!ep_next(tag_fd, &none, 300));
	CHECK(next_event(ch, 100) == NULL);
	CHECK_EQ(cm_counter("rx_forged"), forged + 2);
	/* The kernel disconnects: DREQ -> DREP and DISCONNECTED; the DREQ again: the DREP
	 * again. */
	dreq.local_id = req.local_id;
	dreq.qpn = qp->qp_num;
	for (int k = 0; k < 2; k++) {
		wire_send(&dreq);
		struct cm_mad drep;
		REQUIRE(ep_next(tag_fd, &drep, WAIT_MS));
		CHECK_EQ(drep.attr, CM_ATTR_DREP);
		CHECK_EQ(drep.tid, dreq.tid);
		CHECK_EQ(drep.local_id, rep.local_id);
		CHECK_EQ(drep.remote_id, req.local_id);
		if (k == 0) {
			e = expect(ch, RDMA_CM_EVENT_DISCONNECTED);
			rdma_ack_cm_event(e);
		}
	}
	CHECK(next_event(ch, 100) == NULL);
	rdma_destroy_qp(child);
	ibv_destroy_cq(cq);
	CHECK_EQ(rdma_destroy_id(child), 0);

	/* A REQ for a port nobody listens on: REJ 8 from the router. */
	struct cm_mad req2 = kernel_req((uint32_t)tag << 16 | 0x102, free_port());
	wire_send(&req2);
	struct cm_mad rej;
	REQUIRE(ep_next(tag_fd, &rej, WAIT_MS));
	CHECK_EQ(rej.attr, CM_ATTR_REJ);
	CHECK_EQ(rej.reason, 8);
	CHECK_EQ(rej.msg_rejected, CM_MAD_MSG_REQ);
	CHECK_EQ(rej.remote_id, req2.local_id);
	CHECK_EQ(rej.tid, req2.tid);
	/* A DREQ for a comm ID nobody has: DREP. */
	dreq.remote_id = 0x00FE0001;
	dreq.local_id = (uint32_t)tag << 16 | 0x103;
	wire_send(&dreq);
	struct cm_mad drep;
	REQUIRE(ep_next(tag_fd, &drep, WAIT_MS));
	CHECK_EQ(drep.attr, CM_ATTR_DREP);
	CHECK_EQ(drep.remote_id, dreq.local_id);
	CHECK_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

/* rdma_resolve_addr's question (cm_probe.c): a SIDR_REQ for the service ID, answered as the
 * kernel's IB CM answers it for an RC listener (cma_ib_req_handler refuses SIDR: status 2). */
static void answer_probe(int sid_fd, uint16_t port)
{
	struct cm_mad q;
	REQUIRE(ep_next(sid_fd, &q, WAIT_MS));
	CHECK_EQ(q.attr, CM_ATTR_SIDR_REQ);
	CHECK_EQ(q.service_id, (uint64_t)RDMA_PS_TCP << 16 | port);
	CHECK_EQ(q.pkey, 0xFFFF);
	struct cm_cma_hdr h;
	CHECK_EQ(cm_cma_hdr_parse(q.pd, &h), 0);
	CHECK_MEM(h.src, lo, 16);
	CHECK_MEM(h.dst, lo, 16);
	struct cm_mad rep;
	memset(&rep, 0, sizeof(rep));
	rep.attr = CM_ATTR_SIDR_REP;
	rep.tid = q.tid;
	rep.local_id = q.local_id; /* the Request ID */
	rep.sidr_status = CM_SIDR_REJECT;
	wire_send(&rep);
}

static void test_active(int tag_fd, uint16_t tag)
{
	printf("softrdma connects, the kernel's REP\n");
	uint16_t port = free_port();
	int sid_fd = gsi_ep_open_sid((uint64_t)RDMA_PS_TCP << 16 | port);
	REQUIRE(sid_fd >= 0);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	REQUIRE(ch && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	uint64_t probes = cm_counter("probe_roce");
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 1000) == 0);
	answer_probe(sid_fd, port);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	CHECK_EQ(cm_counter("probe_roce"), probes + 1);
	CHECK(!strcmp(ibv_get_device_name(id->verbs->device), "roce_lo"));
	REQUIRE(rdma_resolve_route(id, 1000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	struct ibv_cq *cq;
	struct ibv_qp *qp = make_qp(id, &cq);
	struct rdma_conn_param cp = {
	    .responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	REQUIRE(rdma_connect(id, &cp) == 0);
	struct cm_mad req, kreq;
	REQUIRE(ep_next(sid_fd, &req, WAIT_MS));
	capture_mad(CM_ATTR_REQ, &kreq);
	CHECK_EQ(req.attr, CM_ATTR_REQ);
	CHECK_EQ(req.service_id, (uint64_t)RDMA_PS_TCP << 16 | port);
	CHECK_EQ(req.qpn, qp->qp_num);
	CHECK_EQ(req.resp_res, 1);
	CHECK_EQ(req.init_depth, 1);
	/* What rxe's rdma_cm puts in every REQ. */
	CHECK_EQ(req.remote_cm_timeout, kreq.remote_cm_timeout);
	CHECK_EQ(req.local_cm_timeout, kreq.local_cm_timeout);
	CHECK_EQ(req.max_cm_retries, kreq.max_cm_retries);
	CHECK_EQ(req.transport, kreq.transport);
	CHECK_EQ(req.e2e_fc, kreq.e2e_fc);
	CHECK_EQ(req.pkey, kreq.pkey);
	CHECK_EQ(req.slid, kreq.slid);
	CHECK_EQ(req.dlid, kreq.dlid);
	CHECK_EQ(req.hop_limit, kreq.hop_limit);
	CHECK_EQ(req.local_ack_timeout, kreq.local_ack_timeout);
	CHECK_EQ(req.packet_rate, kreq.packet_rate);
	CHECK_EQ(req.retry_count, 7);
	CHECK_EQ(req.rnr_retry, 7);
	CHECK_MEM(req.sgid, lo, 16);
	CHECK_MEM(req.dgid, lo, 16);
	struct cm_cma_hdr h;
	REQUIRE(cm_cma_hdr_parse(req.pd, &h) == 0);
	CHECK(!h.ipv6);
	CHECK_EQ(htons(h.sport), rdma_get_src_port(id));
	CHECK_MEM(h.src, lo, 16);
	CHECK_MEM(h.dst, lo, 16);
	CHECK_EQ(req.flow_label, ((uint32_t)h.sport * 31u + port) & 0xFFFFFu);

	/* The kernel accepts: its REP. */
	struct cm_mad rep;
	capture_mad(CM_ATTR_REP, &rep);
	rep.tid = req.tid;
	rep.local_id = (uint32_t)tag << 16 | 0x201;
	rep.remote_id = req.local_id;
	rep.qpn = 0x000123;
	wire_send(&rep);
	struct rdma_cm_event *e = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	CHECK_EQ(e->param.conn.qp_num, 0x123);
	rdma_ack_cm_event(e);
	qp_check(qp, rep.psn, req.psn, 0x123);
	struct cm_mad rtu;
	REQUIRE(ep_next(tag_fd, &rtu, WAIT_MS));
	CHECK_EQ(rtu.attr, CM_ATTR_RTU);
	CHECK_EQ(rtu.local_id, req.local_id);
	CHECK_EQ(rtu.remote_id, rep.local_id);
	CHECK_EQ(rtu.tid, req.tid);
	/* The REP again (our RTU lost): the RTU again. */
	wire_send(&rep);
	REQUIRE(ep_next(tag_fd, &rtu, WAIT_MS));
	CHECK_EQ(rtu.attr, CM_ATTR_RTU);
	printf("  REQ as rxe's; QP at RTS, sq_psn = REP's 0x%06x; RTU (twice)\n", rep.psn);

	/* We disconnect: our DREQ, the kernel's DREP. */
	REQUIRE(rdma_disconnect(id) == 0);
	struct cm_mad dreq;
	REQUIRE(ep_next(tag_fd, &dreq, WAIT_MS));
	CHECK_EQ(dreq.attr, CM_ATTR_DREQ);
	CHECK_EQ(dreq.local_id, req.local_id);
	CHECK_EQ(dreq.remote_id, rep.local_id);
	CHECK_EQ(dreq.qpn, 0x123);
	struct cm_mad drep;
	capture_mad(CM_ATTR_DREP, &drep);
	drep.tid = dreq.tid;
	drep.local_id = rep.local_id;
	drep.remote_id = req.local_id;
	wire_send(&drep);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(id);
	ibv_destroy_cq(cq);
	CHECK_EQ(rdma_destroy_id(id), 0);

	/* An XRC initiator (RDMA_PS_IB, rdma_xclient -c x): the REQ says XRC (transport 3,
	 * extended type 1), as the kernel's cm_format_req. */
	int ib_fd = gsi_ep_open_sid((uint64_t)RDMA_PS_IB << 16 | port);
	REQUIRE(ib_fd >= 0);
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == 0);
	id->qp_type = IBV_QPT_XRC_SEND;
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 1000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	REQUIRE(rdma_resolve_route(id, 1000) == 0);
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr xa = {.send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = IBV_QPT_XRC_SEND,
				      .cap = {.max_send_wr = 4, .max_send_sge = 1}};
	REQUIRE(cq && rdma_create_qp(id, NULL, &xa) == 0);
	CHECK_EQ(id->qp->qp_type, IBV_QPT_XRC_SEND);
	REQUIRE(rdma_connect(id, NULL) == 0);
	REQUIRE(ep_next(ib_fd, &req, WAIT_MS));
	CHECK_EQ(req.attr, CM_ATTR_REQ);
	CHECK_EQ(req.service_id, (uint64_t)RDMA_PS_IB << 16 | port);
	CHECK_EQ(req.transport, CM_MAD_TS_XRC_EXT);
	CHECK_EQ(req.ext_transport, 1);
	CHECK_EQ(req.qpn, id->qp->qp_num);
	rdma_destroy_qp(id);
	ibv_destroy_cq(cq);
	CHECK_EQ(rdma_destroy_id(id), 0);
	close(ib_fd);
	rdma_destroy_event_channel(ch);
	close(sid_fd);
}

int main(void)
{
	setenv("SOFTRDMA_CM_TIMEOUT", "3000", 0);
	setenv("SOFTRDMA_QUIET", "1", 0);
	unsetenv("SOFTRDMA_TRANSPORT");
	/* Every packet alone: on lo the capture would see a GSO train as one datagram. */
	setenv("SOFTRDMA_GSO", "0", 1);
	alarm(60);
	udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t l = sizeof(a);
	REQUIRE(udp_fd >= 0 && bind(udp_fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		getsockname(udp_fd, (struct sockaddr *)&a, &l) == 0);
	udp_port = ntohs(a.sin_port);
	uint16_t tag;
	int tag_fd = gsi_ep_open_tag(&tag);
	REQUIRE(tag_fd >= 0);
	test_passive(tag_fd, tag);
	test_active(tag_fd, tag);
	close(tag_fd);
	close(udp_fd);
	return check_exit();
}
