/* ECE and selective repeat (wire/roce/ece.h, api/compat.c, cm.h "ECE", cm_roce.c), end to end
 * on roce_lo through the public API; whether a QP uses selective repeat is read back through
 * ibv_query_ece, whose SR bit after an agreement is the engine's (eng_qp_sr):
 *   - rdma_cm between two softrdma ids: the REQ carries the SR ECE (the passive side's
 *     rdma_get_remote_ece), both QPs end with SR on, data flows;
 *   - rdma_set_local_ece(0x15b3, 0) on the active id, or on the passive id: SR off on both;
 *   - rdma_reject_ece: the active side's REJECTED status is 35 (rdma_reject: 28);
 *   - self-managed QPs (conn_param->qp_num), as pyverbs' external-QP tests: each side passes
 *     rdma_get_remote_ece to ibv_set_ece itself; SR on for both;
 *   - a fake passive CM (core/gsi.h endpoints) that checks the REQ's raw ECE bytes and answers
 *     REPs with chosen and seeded random vendor IDs / options: SR on only for exactly
 *     softrdma's SR ECE, and only if the REQ offered it;
 *   - ibv_query_ece / ibv_set_ece on RC QPs outside rdma_cm: the offer, agreement, refusal of
 *     foreign and garbled values, errors (comp_mask EINVAL, vendor 0 / UD / UC / iWARP
 *     EOPNOTSUPP). */
#define _GNU_SOURCE
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm/cm.h"
#include "wire/roce/cm_mad.h"
#include "wire/roce/ece.h"

#define WAIT_MS	   5000
#define BUF_SIZE   65536
#define MLX_VENDOR 0x15b3

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
				    const char *what)
{
	struct pollfd pf = {.fd = ch->fd, .events = POLLIN};
	struct rdma_cm_event *e = NULL;
	if (poll(&pf, 1, WAIT_MS) != 1 || rdma_get_cm_event(ch, &e) != 0) {
		fprintf(stderr, "%s: no event (wanted %s)\n", what, rdma_event_str(type));
		REQUIRE(!"event");
	}
	if (e->event != type)
		fprintf(stderr, "%s: got %s status %d, wanted %s\n", what, rdma_event_str(e->event),
			e->status, rdma_event_str(type));
	REQUIRE(e->event == type);
	return e;
}

static void expect_ack(struct rdma_event_channel *ch, enum rdma_cm_event_type type,
		       const char *what)
{
	rdma_ack_cm_event(expect(ch, type, what));
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

static struct sockaddr_in lo(uint16_t port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	return a;
}

/* The QP's ECE (ibv_query_ece must succeed). */
static struct ibv_ece query(struct ibv_qp *qp)
{
	struct ibv_ece e;
	memset(&e, 0xA5, sizeof(e));
	REQUIRE(ibv_query_ece(qp, &e) == 0);
	CHECK_EQ(e.comp_mask, 0);
	return e;
}

/* Selective repeat on: the QP reports softrdma's SR ECE (the SR bit is the engine's). */
static bool sr_on(struct ibv_qp *qp)
{
	struct ibv_ece e = query(qp);
	return sr_ece_is_sr(e.vendor_id, e.options);
}

/* ---- rdma_cm ids: one side's verbs resources ---- */

struct side {
	struct rdma_cm_id *id;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp; /* id->qp, or the self-managed one */
	uint8_t *buf;
};

static void side_res(struct side *s, struct rdma_cm_id *id)
{
	s->id = id;
	REQUIRE(id->verbs && id->pd);
	CHECK(!strcmp(ibv_get_device_name(id->verbs->device), "roce_lo"));
	s->cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
	s->buf = calloc(1, BUF_SIZE);
	REQUIRE(s->cq && s->buf);
	s->mr = ibv_reg_mr(id->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(s->mr);
}

static struct ibv_qp_init_attr rc_attr(struct side *s)
{
	struct ibv_qp_init_attr qa = {
	    .send_cq = s->cq,
	    .recv_cq = s->cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	return qa;
}

/* Resources and a QP from rdma_create_qp. */
static void side_setup(struct side *s, struct rdma_cm_id *id)
{
	side_res(s, id);
	struct ibv_qp_init_attr qa = rc_attr(s);
	REQUIRE(rdma_create_qp(id, NULL, &qa) == 0);
	s->qp = id->qp;
}

/* Resources and a self-managed QP (ibv_create_qp; conn_param->qp_num). */
static void side_setup_ext(struct side *s, struct rdma_cm_id *id)
{
	side_res(s, id);
	struct ibv_qp_init_attr qa = rc_attr(s);
	s->qp = ibv_create_qp(id->pd, &qa);
	REQUIRE(s->qp);
}

/* A self-managed QP to RTS with rdma_cm's attributes (pyverbs modify_ext_qp_to_rts). */
static void ext_to_rts(struct side *s)
{
	static const enum ibv_qp_state st[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS};
	for (size_t i = 0; i < 3; i++) {
		struct ibv_qp_attr a = {.qp_state = st[i]};
		int mask = 0;
		REQUIRE(rdma_init_qp_attr(s->id, &a, &mask) == 0);
		REQUIRE(ibv_modify_qp(s->qp, &a, mask) == 0);
	}
}

static void side_free(struct side *s)
{
	if (s->id && s->id->qp)
		rdma_destroy_qp(s->id);
	else if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	free(s->buf);
	memset(s, 0, sizeof(*s));
}

static void post_recv(struct side *s)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf, .length = 4096, .lkey = s->mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 1, .sg_list = &sge, .num_sge = 1}, *bad;
	REQUIRE(ibv_post_recv(s->qp, &wr, &bad) == 0);
}

static struct ibv_wc wait_wc(struct side *s)
{
	struct ibv_wc wc;
	memset(&wc, 0, sizeof(wc));
	uint64_t until = now_ms() + WAIT_MS;
	while (now_ms() < until) {
		int n = ibv_poll_cq(s->cq, 1, &wc);
		REQUIRE(n >= 0);
		if (n == 1)
			return wc;
	}
	REQUIRE(!"completion within WAIT_MS");
	return wc;
}

/* a SENDs 3000 bytes to b (which posted a receive): both complete, the bytes arrive. */
static void send_to(struct side *a, struct side *b)
{
	for (int i = 0; i < 3000; i++)
		a->buf[8192 + i] = (uint8_t)(i * 7 + 1);
	struct ibv_sge sge = {
	    .addr = (uintptr_t)(a->buf + 8192), .length = 3000, .lkey = a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 2,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	REQUIRE(ibv_post_send(a->qp, &wr, &bad) == 0);
	CHECK_EQ(wait_wc(a).status, IBV_WC_SUCCESS);
	struct ibv_wc wc = wait_wc(b);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	CHECK_EQ(wc.byte_len, 3000);
	CHECK_MEM(b->buf, a->buf + 8192, 3000);
}

struct listener {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	uint16_t port;
};

static void listen_lo(struct listener *l)
{
	l->ch = rdma_create_event_channel();
	REQUIRE(l->ch);
	REQUIRE(rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP) == 0);
	struct sockaddr_in a = lo(0);
	REQUIRE(rdma_bind_addr(l->id, (struct sockaddr *)&a) == 0);
	REQUIRE(rdma_listen(l->id, 4) == 0);
	l->port = ntohs(rdma_get_src_port(l->id));
}

static void listener_free(struct listener *l)
{
	CHECK_EQ(rdma_destroy_id(l->id), 0);
	rdma_destroy_event_channel(l->ch);
}

/* The end of a connection case, once its sides are freed: both ids, the client's channel,
 * the listener. */
static void conn_free(struct rdma_cm_id *child, struct rdma_cm_id *cid,
		      struct rdma_event_channel *cch, struct listener *l)
{
	CHECK_EQ(rdma_destroy_id(child), 0);
	CHECK_EQ(rdma_destroy_id(cid), 0);
	rdma_destroy_event_channel(cch);
	listener_free(l);
}

static struct rdma_cm_id *resolved(struct rdma_event_channel **ch, uint16_t port)
{
	struct rdma_cm_id *id;
	*ch = rdma_create_event_channel();
	REQUIRE(*ch);
	REQUIRE(rdma_create_id(*ch, &id, NULL, RDMA_PS_TCP) == 0);
	struct sockaddr_in a = lo(port);
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&a, 2000) == 0);
	expect_ack(*ch, RDMA_CM_EVENT_ADDR_RESOLVED, "resolve_addr");
	REQUIRE(rdma_resolve_route(id, 2000) == 0);
	expect_ack(*ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolve_route");
	return id;
}

/* ---- rdma_cm with rdma_create_qp: the ECE the ids offer decides ---- */

/* Connects an active id (rdma_set_local_ece(cli_ece) first, if given) to a passive one
 * (likewise srv_ece), checks what the passive side saw in the REQ, and that both QPs end with
 * selective repeat exactly when want_sr; data both ways. */
static void cm_case(const char *what, const struct ibv_ece *cli_ece, const struct ibv_ece *srv_ece,
		    bool want_sr)
{
	printf("  rdma_cm: %s: SR %s\n", what, want_sr ? "on" : "off");
	struct listener l;
	listen_lo(&l);
	struct rdma_event_channel *cch;
	struct side c = {0}, s = {0};
	struct rdma_cm_id *cid = resolved(&cch, l.port);
	if (cli_ece) {
		struct ibv_ece e = *cli_ece;
		REQUIRE(rdma_set_local_ece(cid, &e) == 0);
	}
	side_setup(&c, cid);
	/* Before any agreement the QP offers softrdma's SR ECE; SR is off until agreed. */
	struct ibv_ece e = query(c.qp);
	CHECK_EQ(e.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(e.options, SR_ECE_OPTIONS);
	/* librdmacm: ECE calls on an id with a QP fail with EINVAL. */
	CHECK_EQ(rdma_get_remote_ece(cid, &e), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(rdma_set_local_ece(cid, &e), -1);
	CHECK_EQ(errno, EINVAL);
	post_recv(&c);
	REQUIRE(rdma_connect(cid, NULL) == 0);

	struct rdma_cm_event *ev = expect(l.ch, RDMA_CM_EVENT_CONNECT_REQUEST, "server");
	struct rdma_cm_id *child = ev->id;
	rdma_ack_cm_event(ev);
	/* What the REQ carried: the client's local ECE, else its QP's offer. */
	struct ibv_ece r;
	memset(&r, 0xA5, sizeof(r));
	REQUIRE(rdma_get_remote_ece(child, &r) == 0);
	CHECK_EQ(r.vendor_id, cli_ece ? cli_ece->vendor_id & 0xFFFFFF : SR_ECE_VENDOR_ID);
	CHECK_EQ(r.options, cli_ece ? cli_ece->options : SR_ECE_OPTIONS);
	CHECK_EQ(r.comp_mask, 0);
	if (srv_ece) {
		struct ibv_ece se = *srv_ece;
		REQUIRE(rdma_set_local_ece(child, &se) == 0);
	}
	side_setup(&s, child);
	post_recv(&s);
	REQUIRE(rdma_accept(child, NULL) == 0);
	expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, "client");
	expect_ack(l.ch, RDMA_CM_EVENT_ESTABLISHED, "server");

	CHECK_EQ(sr_on(c.qp), want_sr);
	CHECK_EQ(sr_on(s.qp), want_sr);
	e = query(c.qp);
	CHECK_EQ(e.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(e.options, want_sr ? SR_ECE_OPTIONS : 0);
	e = query(s.qp);
	CHECK_EQ(e.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(e.options, want_sr ? SR_ECE_OPTIONS : 0);
	send_to(&c, &s);
	send_to(&s, &c);

	REQUIRE(rdma_disconnect(cid) == 0);
	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED, "client");
	expect_ack(l.ch, RDMA_CM_EVENT_DISCONNECTED, "server");
	side_free(&c);
	side_free(&s);
	conn_free(child, cid, cch, &l);
}

static void test_cm(void)
{
	const struct ibv_ece mlx = {.vendor_id = MLX_VENDOR, .options = 0};
	const struct ibv_ece ours = {.vendor_id = SR_ECE_VENDOR_ID, .options = SR_ECE_OPTIONS};
	cm_case("two softrdma ids", NULL, NULL, true);
	cm_case("active rdma_set_local_ece(0x15b3, 0)", &mlx, NULL, false);
	cm_case("passive rdma_set_local_ece(0x15b3, 0)", NULL, &mlx, false);
	cm_case("both set softrdma's SR ECE", &ours, &ours, true);
	const struct ibv_ece no_bit = {.vendor_id = SR_ECE_VENDOR_ID, .options = SR_ECE_MAGIC};
	cm_case("active offers the magic without the SR bit", &no_bit, NULL, false);
}

/* ---- rejects: rdma_reject_ece reports reason 35, rdma_reject 28 ---- */

/* The passive side rejects the REQ with rdma_reject_ece (ece) or rdma_reject: the active side
 * gets REJECTED with librdmacm's status (the IB CM reason) and the private data. */
static void reject_case(bool ece)
{
	printf("  rdma_cm: %s: REJECTED status %d\n", ece ? "rdma_reject_ece" : "rdma_reject",
	       ece ? 35 : 28);
	struct listener l;
	listen_lo(&l);
	struct rdma_event_channel *cch;
	struct rdma_cm_id *cid = resolved(&cch, l.port);
	struct side c = {0};
	side_setup(&c, cid);
	REQUIRE(rdma_connect(cid, NULL) == 0);
	struct rdma_cm_event *ev = expect(l.ch, RDMA_CM_EVENT_CONNECT_REQUEST, "server");
	struct rdma_cm_id *child = ev->id;
	rdma_ack_cm_event(ev);
	const char why[] = "no SR here";
	REQUIRE((ece ? rdma_reject_ece(child, why, sizeof(why))
		     : rdma_reject(child, why, sizeof(why))) == 0);
	/* Once only: the request is answered. */
	CHECK_EQ(rdma_reject_ece(child, NULL, 0), -1);
	CHECK_EQ(errno, EINVAL);
	ev = expect(cch, RDMA_CM_EVENT_REJECTED, "client");
	CHECK_EQ(ev->status, ece ? 35 : 28);
	CHECK(ev->param.conn.private_data_len >= sizeof(why));
	CHECK(ev->param.conn.private_data != NULL);
	if (ev->param.conn.private_data)
		CHECK_MEM(ev->param.conn.private_data, why, sizeof(why));
	rdma_ack_cm_event(ev);
	side_free(&c);
	conn_free(child, cid, cch, &l);
}

static void test_reject(void)
{
	reject_case(true);
	reject_case(false);
}

/* ---- self-managed QPs: the application applies the ECE (pyverbs' external-QP tests) ---- */

static void test_cm_self_managed(void)
{
	printf("  rdma_cm, self-managed QPs: rdma_get_remote_ece -> ibv_set_ece on both sides\n");
	struct listener l;
	listen_lo(&l);
	struct rdma_event_channel *cch;
	struct side c = {0}, s = {0};
	struct rdma_cm_id *cid = resolved(&cch, l.port);
	side_setup_ext(&c, cid);
	/* pyverbs set_cmid_ece: the id offers the QP's ECE. */
	struct ibv_ece e = query(c.qp);
	REQUIRE(rdma_set_local_ece(cid, &e) == 0);
	struct rdma_conn_param cp = {.qp_num = c.qp->qp_num, .rnr_retry_count = 7};
	REQUIRE(rdma_connect(cid, &cp) == 0);

	struct rdma_cm_event *ev = expect(l.ch, RDMA_CM_EVENT_CONNECT_REQUEST, "server");
	struct rdma_cm_id *child = ev->id;
	rdma_ack_cm_event(ev);
	side_setup_ext(&s, child);
	/* pyverbs set_cmids_qp_ece, then set_cmid_ece after the QP is at RTS. */
	struct ibv_ece r;
	REQUIRE(rdma_get_remote_ece(child, &r) == 0);
	CHECK(sr_ece_is_sr(r.vendor_id, r.options));
	REQUIRE(ibv_set_ece(s.qp, &r) == 0);
	CHECK_EQ(r.options, SR_ECE_OPTIONS); /* IN/OUT: the options agreed */
	ext_to_rts(&s);
	post_recv(&s);
	e = query(s.qp);
	REQUIRE(rdma_set_local_ece(child, &e) == 0);
	struct rdma_conn_param sp = {.qp_num = s.qp->qp_num, .rnr_retry_count = 7};
	REQUIRE(rdma_accept(child, &sp) == 0);

	ev = expect(cch, RDMA_CM_EVENT_CONNECT_RESPONSE, "client");
	rdma_ack_cm_event(ev);
	memset(&r, 0, sizeof(r));
	REQUIRE(rdma_get_remote_ece(cid, &r) == 0); /* no QP on the id: the REP's */
	CHECK_EQ(r.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(r.options, SR_ECE_OPTIONS);
	REQUIRE(ibv_set_ece(c.qp, &r) == 0);
	ext_to_rts(&c);
	post_recv(&c);
	REQUIRE(rdma_establish(cid) == 0);
	expect_ack(l.ch, RDMA_CM_EVENT_ESTABLISHED, "server");
	CHECK(sr_on(c.qp));
	CHECK(sr_on(s.qp));
	send_to(&c, &s);
	send_to(&s, &c);

	REQUIRE(rdma_disconnect(cid) == 0);
	expect_ack(cch, RDMA_CM_EVENT_DISCONNECTED, "client");
	expect_ack(l.ch, RDMA_CM_EVENT_DISCONNECTED, "server");
	CHECK_EQ(rdma_destroy_id(child), 0);
	CHECK_EQ(rdma_destroy_id(cid), 0);
	side_free(&c);
	side_free(&s);
	rdma_destroy_event_channel(cch);
	listener_free(&l);
}

/* ---- a fake passive CM: the REQ's bytes, and REPs with chosen ECE values ---- */

static bool fake_recv(int fd, struct gsi_frame *f, struct cm_mad *m, int ms)
{
	uint64_t until = now_ms() + (uint64_t)ms;
	while (now_ms() < until) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 50) != 1)
			continue;
		if (gsi_ep_recv(fd, f) == 1 && cm_mad_parse(f->mad, CM_MAD_LEN, m) == 0)
			return true;
	}
	return false;
}

/* An active id (offering cli_ece if given) connects to a fake CM that answers its REQ with a
 * REP carrying (vendor, options). Returns whether the id's QP then uses selective repeat. */
static bool fake_rep(const struct ibv_ece *cli_ece, uint32_t vendor, uint32_t options)
{
	uint16_t port = free_port();
	int sfd = gsi_ep_open_sid((uint64_t)RDMA_PS_TCP << 16 | port);
	REQUIRE(sfd >= 0);
	struct rdma_event_channel *cch;
	struct side c = {0};
	struct rdma_cm_id *cid = resolved(&cch, port);
	if (cli_ece) {
		struct ibv_ece e = *cli_ece;
		REQUIRE(rdma_set_local_ece(cid, &e) == 0);
	}
	side_setup(&c, cid);
	REQUIRE(rdma_connect(cid, NULL) == 0);
	struct gsi_frame f;
	struct cm_mad req;
	REQUIRE(fake_recv(sfd, &f, &req, WAIT_MS));
	REQUIRE(req.attr == CM_ATTR_REQ);
	/* The REQ's ECE where Linux's ib_cm reads it: vendor ID in body bytes 5-7, the options
	 * in the MAD header's AttributeModifier (bytes 20-23). */
	uint32_t want_v = cli_ece ? cli_ece->vendor_id & 0xFFFFFF : SR_ECE_VENDOR_ID;
	uint32_t want_o = cli_ece ? cli_ece->options : SR_ECE_OPTIONS;
	const uint8_t *b = f.mad + CM_MAD_HDR_LEN;
	CHECK_EQ(b[4], 0);
	CHECK_EQ((uint32_t)b[5] << 16 | (uint32_t)b[6] << 8 | b[7], want_v);
	CHECK_EQ((uint32_t)f.mad[20] << 24 | (uint32_t)f.mad[21] << 16 | (uint32_t)f.mad[22] << 8 |
		     f.mad[23],
		 want_o);
	CHECK_EQ(req.vendor_id, want_v);
	CHECK_EQ(req.attr_mod, want_o);

	/* The REP, from a comm ID of this process's tag (so that the connection's peer check,
	 * gsi_tag_alive, finds it alive), vendor ID and options as given. */
	struct cm_mad rep = {.attr = CM_ATTR_REP,
			     .tid = req.tid,
			     .attr_mod = options,
			     .vendor_id = vendor & 0xFFFFFF,
			     .local_id = (req.local_id & 0xFFFF0000u) | 0xFEED,
			     .remote_id = req.local_id,
			     .qpn = 0x123,
			     .psn = 0x4567,
			     .resp_res = req.init_depth,
			     .init_depth = req.resp_res,
			     .rnr_retry = 7,
			     .ca_guid = 1};
	struct gsi_frame a = f;
	memcpy(a.src, f.dst, 16);
	memcpy(a.dst, f.src, 16);
	REQUIRE(cm_mad_build(&rep, a.mad) == CM_MAD_LEN);
	CHECK_EQ(gsi_deliver(&a), 0);
	expect_ack(cch, RDMA_CM_EVENT_ESTABLISHED, "client");
	bool on = sr_on(c.qp);
	struct ibv_ece r;
	CHECK_EQ(rdma_get_remote_ece(cid, &r), -1); /* librdmacm: the id has a QP */
	side_free(&c);
	CHECK_EQ(rdma_destroy_id(cid), 0);
	rdma_destroy_event_channel(cch);
	close(sfd);
	return on;
}

static void test_fake_rep(void)
{
	printf("  REPs with chosen ECE values from a fake CM (seed in the header)\n");
	static const struct {
		uint32_t vendor, options;
		bool sr;
		const char *what;
	} t[] = {
	    {SR_ECE_VENDOR_ID, SR_ECE_OPTIONS, true, "softrdma's SR ECE"},
	    {SR_ECE_VENDOR_ID, SR_ECE_OPTIONS | 0xFFFE, true, "SR ECE with unknown feature bits"},
	    {0, 0, false, "none (rxe, kernel ULPs)"},
	    {SR_ECE_VENDOR_ID, 0, false, "softrdma's vendor, options 0 (librdmacm on rxe)"},
	    {SR_ECE_VENDOR_ID, SR_ECE_MAGIC, false, "magic without the SR bit"},
	    {SR_ECE_VENDOR_ID, SR_ECE_OPT_SR, false, "SR bit without the magic"},
	    {SR_ECE_VENDOR_ID, 0x53530001, false, "another magic"},
	    {SR_ECE_VENDOR_ID, 0xFFFFFFFF, false, "all ones"},
	    {0xFFFFFE, SR_ECE_OPTIONS, false, "another vendor ID with our options"},
	    {MLX_VENDOR, SR_ECE_OPTIONS, false, "Mellanox's vendor ID with our options"},
	    {MLX_VENDOR, 1, false, "Mellanox's vendor ID, option 1"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		bool on = fake_rep(NULL, t[i].vendor, t[i].options);
		if (on != t[i].sr)
			fprintf(stderr, "REP %s (0x%06x, 0x%08x): SR %d\n", t[i].what, t[i].vendor,
				t[i].options, on);
		CHECK_EQ(on, t[i].sr);
	}
	/* We did not offer it: a REP that claims SR anyway leaves it off. */
	const struct ibv_ece mlx = {.vendor_id = MLX_VENDOR, .options = 0};
	CHECK(!fake_rep(&mlx, SR_ECE_VENDOR_ID, SR_ECE_OPTIONS));
	/* Random values: on only if exactly softrdma's SR ECE (24-bit vendor on the wire). */
	int on_count = 0;
	for (int i = 0; i < 24; i++) {
		uint64_t x = rnd();
		uint32_t vendor = (uint32_t)x & 0xFFFFFF, options = (uint32_t)(x >> 32);
		if (i % 4 == 0)
			vendor = SR_ECE_VENDOR_ID; /* ours with random options */
		if (i % 8 == 0)
			options = SR_ECE_MAGIC | (options & 0xFFFF); /* and the magic */
		bool want = sr_ece_is_sr(vendor, options);
		bool on = fake_rep(NULL, vendor, options);
		if (on != want)
			fprintf(stderr, "random REP (0x%06x, 0x%08x): SR %d, wanted %d\n", vendor,
				options, on, want);
		CHECK_EQ(on, want);
		on_count += on;
	}
	printf("    %zu chosen + 24 random REPs (%d of them SR)\n", sizeof(t) / sizeof(t[0]),
	       on_count);
}

/* ---- ibv_query_ece / ibv_set_ece outside rdma_cm ---- */

static struct ibv_context *open_dev(const char *name)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	REQUIRE(list);
	struct ibv_context *ctx = NULL;
	for (int i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

static void test_verbs(void)
{
	printf("  ibv_query_ece / ibv_set_ece on QPs of roce_lo and iwarp_lo\n");
	struct ibv_context *ctx = open_dev("roce_lo");
	REQUIRE(ctx);
	struct ibv_device_attr da;
	REQUIRE(ibv_query_device(ctx, &da) == 0);
	CHECK_EQ(da.vendor_id, SR_ECE_VENDOR_ID); /* the ECE vendor ID is the device's */
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	REQUIRE(pd && cq);
	struct ibv_qp_init_attr qa = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *a = ibv_create_qp(pd, &qa), *b = ibv_create_qp(pd, &qa);
	REQUIRE(a && b);

	/* The offer; then b takes a's: SR on, what it agreed written back. */
	struct ibv_ece ea = query(a);
	CHECK_EQ(ea.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(ea.options, SR_ECE_OPTIONS);
	struct ibv_ece e = ea;
	REQUIRE(ibv_set_ece(b, &e) == 0);
	CHECK_EQ(e.options, SR_ECE_OPTIONS);
	CHECK(sr_on(b));
	e = query(b);
	CHECK_EQ(e.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(e.options, SR_ECE_OPTIONS);
	/* And a b's: both on. */
	e = query(b);
	REQUIRE(ibv_set_ece(a, &e) == 0);
	CHECK(sr_on(a));

	/* Mellanox's vendor ID with option 1: accepted (0), nothing agreed, SR off. */
	e = (struct ibv_ece){.vendor_id = MLX_VENDOR, .options = 1};
	CHECK_EQ(ibv_set_ece(a, &e), 0);
	CHECK_EQ(e.options, 0);
	CHECK(!sr_on(a));
	e = query(a);
	CHECK_EQ(e.vendor_id, SR_ECE_VENDOR_ID);
	CHECK_EQ(e.options, 0);
	/* Garbled values of ours: off; the magic alone is kept (no feature). */
	static const uint32_t garbled[] = {SR_ECE_OPT_SR, SR_ECE_MAGIC, 0x53530001, 0xFFFFFFFF};
	for (size_t i = 0; i < sizeof(garbled) / sizeof(garbled[0]); i++) {
		e = (struct ibv_ece){.vendor_id = SR_ECE_VENDOR_ID, .options = garbled[i]};
		CHECK_EQ(ibv_set_ece(b, &e), 0);
		CHECK(!sr_on(b));
		CHECK_EQ(query(b).options, garbled[i] == SR_ECE_MAGIC ? SR_ECE_MAGIC : 0);
	}
	e = (struct ibv_ece){.vendor_id = 0x1FFFFFF, .options = SR_ECE_OPTIONS};
	CHECK_EQ(ibv_set_ece(b, &e), 0); /* 32 bits through the verbs: not ours */
	CHECK(!sr_on(b));
	/* Back on, and errors leave it as it was. */
	e = ea;
	REQUIRE(ibv_set_ece(b, &e) == 0);
	CHECK(sr_on(b));
	e = (struct ibv_ece){.vendor_id = SR_ECE_VENDOR_ID, .options = 0, .comp_mask = 1};
	errno = 0;
	CHECK_EQ(ibv_set_ece(b, &e), EINVAL);
	CHECK_EQ(errno, EINVAL);
	e = (struct ibv_ece){.vendor_id = 0, .options = 0};
	CHECK_EQ(ibv_set_ece(b, &e), EOPNOTSUPP); /* libibverbs: no vendor, no ECE */
	CHECK(sr_on(b));

	/* Other QP types: EOPNOTSUPP for both calls. */
	qa.qp_type = IBV_QPT_UD;
	struct ibv_qp *ud = ibv_create_qp(pd, &qa);
	qa.qp_type = IBV_QPT_UC;
	struct ibv_qp *uc = ibv_create_qp(pd, &qa);
	REQUIRE(ud && uc);
	struct ibv_qp *others[] = {ud, uc};
	for (size_t i = 0; i < 2; i++) {
		e = ea;
		CHECK_EQ(ibv_query_ece(others[i], &e), EOPNOTSUPP);
		CHECK_EQ(ibv_set_ece(others[i], &e), EOPNOTSUPP);
	}
	CHECK_EQ(ibv_destroy_qp(ud), 0);
	CHECK_EQ(ibv_destroy_qp(uc), 0);
	CHECK_EQ(ibv_destroy_qp(a), 0);
	CHECK_EQ(ibv_destroy_qp(b), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);

	/* iWARP RC: TCP recovers losses; no ECE, as siw. */
	ctx = open_dev("iwarp_lo");
	if (!ctx) {
		printf("    (no iwarp_lo: iWARP not checked)\n");
		return;
	}
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	REQUIRE(pd && cq);
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = cq;
	struct ibv_qp *iw = ibv_create_qp(pd, &qa);
	REQUIRE(iw);
	e = ea;
	CHECK_EQ(ibv_query_ece(iw, &e), EOPNOTSUPP);
	CHECK_EQ(ibv_set_ece(iw, &e), EOPNOTSUPP);
	CHECK_EQ(ibv_destroy_qp(iw), 0);
	CHECK_EQ(ibv_destroy_cq(cq), 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0);
	CHECK_EQ(ibv_close_device(ctx), 0);
}

int main(void)
{
	setenv("SOFTRDMA_CM_TIMEOUT", "2000", 0);
	setenv("SOFTRDMA_QUIET", "1", 0);
	setenv("SOFTRDMA_TRANSPORT", "roce", 1);
	if (!getenv("SOFTRDMA_IW_PORT")) { /* iWARP's rendezvous port: parallel runs never meet */
		char port[16];
		snprintf(port, sizeof(port), "%d", 10000 + (int)(getpid() % 10000));
		setenv("SOFTRDMA_IW_PORT", port, 1);
	}
	rng = check_seed(0xECE0001ull) | 1;
	alarm(120); /* a hang is a failure */
	test_verbs();
	test_cm();
	test_cm_self_managed();
	test_reject();
	test_fake_rep();
	return check_exit();
}
