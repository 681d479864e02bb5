/* Multicast through rdma_cm (src/cm/cm_mcast.c, cm.h "Multicast") on roce_lo, through
 * librdmacm's API as programs call it: UD ids (RDMA_PS_UDP) resolved from 127.0.0.1 to the
 * group 230.4.5.6 join it (rdma_join_multicast, rdma_join_multicast_ex), in this process and in
 * a second one (forked before anything is opened):
 *   - RDMA_CM_EVENT_MULTICAST_JOIN as the kernel's rdma_cm reports it on RoCE: param.ud.ah_attr
 *     global with dgid ::ffff:230.4.5.6, the source GID's index, hop limit 64, traffic class 0,
 *     dlid 0, port 1; qp_num 0xFFFFFF, qkey RDMA_UDP_QKEY, private_data the join's context;
 *   - datagrams sent with the event's AH to DestQP 0xFFFFFF reach every full member's QP (every
 *     byte checked), never a send-only member's; a QP created after the join, before its event
 *     is taken, is attached when it is (librdmacm attaches at rdma_get_cm_event);
 *   - rdma_leave_multicast: no more delivery there; an event not yet taken goes with it; twice
 *     or another address: EADDRNOTAVAIL;
 *   - a synchronous id (no channel) joins: the event is in id->event, the QP attached;
 *   - a "group" that is not multicast: the attach fails when the event is taken, which turns it
 *     into MULTICAST_ERROR (status -1), as librdmacm does;
 *   - bad arguments (EINVAL, EOPNOTSUPP for unknown join attributes, ENOENT for a destroyed id,
 *     ENOSYS on iWARP). */
#define _GNU_SOURCE
#include "check.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vutil.h"

#define GROUP  "230.4.5.6"
#define LEN    256
#define SLOT   (40 + LEN)
#define NRECV  16
#define MCQPN  0xFFFFFFu
#define WAITMS 3000

static const uint8_t group_gid[16] = {[10] = 0xff, [11] = 0xff, 230, 4, 5, 6};

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};
	REQUIRE(inet_pton(AF_INET, ip, &s.sin_addr) == 1);
	return s;
}

/* A UD id with its QP, memory, and (after the join) the group's AH. */
struct member {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_ah *ah;
	uint32_t qkey;
	int posted;
};

static void resolve(struct member *m, const char *group)
{
	memset(m, 0, sizeof(*m));
	m->ch = rdma_create_event_channel();
	REQUIRE(m->ch);
	REQUIRE(rdma_create_id(m->ch, &m->id, m, RDMA_PS_UDP) == 0);
	struct sockaddr_in src = sin_of("127.0.0.1", 0), dst = sin_of(group, 0);
	REQUIRE(rdma_resolve_addr(m->id, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000) ==
		0);
	struct rdma_cm_event *e = vt_cm_event(m->ch, WAITMS);
	REQUIRE(e && e->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(e);
}

static void make_qp(struct member *m)
{
	struct ibv_qp_init_attr qia = {
	    .qp_type = IBV_QPT_UD,
	    .cap = {.max_send_wr = 16, .max_recv_wr = NRECV, .max_send_sge = 1, .max_recv_sge = 1}};
	REQUIRE(rdma_create_qp(m->id, NULL, &qia) == 0);
	m->buf = calloc(2 * NRECV, SLOT);
	REQUIRE(m->buf);
	m->mr = ibv_reg_mr(m->id->pd, m->buf, 2 * NRECV * SLOT, IBV_ACCESS_LOCAL_WRITE);
	REQUIRE(m->mr);
	while (m->posted < NRECV) {
		vt_post_recv(m->id->qp, m->mr, m->buf + (size_t)m->posted * SLOT, SLOT,
			     (uint64_t)m->posted);
		m->posted++;
	}
}

/* Checks a MULTICAST_JOIN event as the kernel's rdma_cm makes it on RoCE, makes the AH. */
static void check_join(struct member *m, struct rdma_cm_event *e, void *context)
{
	REQUIRE(e);
	CHECK_EQ(e->event, RDMA_CM_EVENT_MULTICAST_JOIN);
	CHECK_EQ(e->status, 0);
	CHECK(e->id == m->id);
	const struct rdma_ud_param *ud = &e->param.ud;
	CHECK(ud->private_data == context);
	CHECK_EQ(ud->private_data_len, 0);
	CHECK_EQ(ud->qp_num, MCQPN);
	CHECK_EQ(ud->qkey, RDMA_UDP_QKEY);
	CHECK_EQ(ud->ah_attr.is_global, 1);
	CHECK_MEM(ud->ah_attr.grh.dgid.raw, group_gid, 16);
	CHECK_EQ(ud->ah_attr.grh.hop_limit, 64);
	CHECK_EQ(ud->ah_attr.grh.traffic_class, 0);
	CHECK_EQ(ud->ah_attr.grh.flow_label, 0);
	CHECK_EQ(ud->ah_attr.dlid, 0);
	CHECK_EQ(ud->ah_attr.port_num, 1);
	union ibv_gid sg;
	REQUIRE(ibv_query_gid(m->id->verbs, 1, ud->ah_attr.grh.sgid_index, &sg) == 0);
	static const uint8_t lo[16] = {[10] = 0xff, [11] = 0xff, 127, 0, 0, 1};
	CHECK_MEM(sg.raw, lo, 16);
	m->qkey = ud->qkey;
	if (m->id->pd && !m->ah) {
		m->ah = ibv_create_ah(m->id->pd, (struct ibv_ah_attr *)&ud->ah_attr);
		CHECK(m->ah != NULL);
	}
}

static void join_plain(struct member *m, void *context)
{
	struct sockaddr_in g = sin_of(GROUP, 0);
	REQUIRE(rdma_join_multicast(m->id, (struct sockaddr *)&g, context) == 0);
	struct rdma_cm_event *e = vt_cm_event(m->ch, WAITMS);
	check_join(m, e, context);
	rdma_ack_cm_event(e);
}

static void join_ex(struct member *m, int flags, void *context)
{
	struct sockaddr_in g = sin_of(GROUP, 0);
	struct rdma_cm_join_mc_attr_ex a = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
							 RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
					    .join_flags = (uint32_t)flags,
					    .addr = (struct sockaddr *)&g};
	REQUIRE(rdma_join_multicast_ex(m->id, &a, context) == 0);
	struct rdma_cm_event *e = vt_cm_event(m->ch, WAITMS);
	check_join(m, e, context);
	rdma_ack_cm_event(e);
}

static int leave(struct member *m)
{
	struct sockaddr_in g = sin_of(GROUP, 0);
	return rdma_leave_multicast(m->id, (struct sockaddr *)&g);
}

static void member_free(struct member *m)
{
	if (m->ah)
		CHECK_EQ(ibv_destroy_ah(m->ah), 0);
	if (m->id->qp)
		rdma_destroy_qp(m->id);
	if (m->mr)
		CHECK_EQ(ibv_dereg_mr(m->mr), 0);
	free(m->buf);
	CHECK_EQ(rdma_destroy_id(m->id), 0);
	if (m->ch)
		rdma_destroy_event_channel(m->ch);
}

static void send_msgs(struct member *s, int tag, int n)
{
	for (int i = 0; i < n; i++) {
		uint32_t t = (uint32_t)(tag * 100 + i);
		uint8_t *p = s->buf + (size_t)(NRECV + i) * SLOT;
		vt_fill(p, LEN, t);
		struct ibv_sge sge = {.addr = (uintptr_t)p, .length = LEN, .lkey = s->mr->lkey};
		struct ibv_send_wr wr = {.wr_id = t,
					 .sg_list = &sge,
					 .num_sge = 1,
					 .opcode = IBV_WR_SEND_WITH_IMM,
					 .send_flags = IBV_SEND_SIGNALED,
					 .imm_data = htonl(t)},
				   *bad;
		wr.wr.ud.ah = s->ah;
		wr.wr.ud.remote_qpn = MCQPN;
		wr.wr.ud.remote_qkey = s->qkey;
		REQUIRE(ibv_post_send(s->id->qp, &wr, &bad) == 0);
	}
	for (int i = 0; i < n; i++) {
		struct ibv_wc wc = vt_wait_wc(s->id->send_cq, WAITMS);
		CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	}
}

/* n receives of tags tag*100 + 0..n-1, in order, every byte; returns how many were good. */
static int expect_msgs(struct member *m, int tag, int n)
{
	int good = 0;
	uint8_t want[LEN];
	for (int i = 0; i < n; i++) {
		struct ibv_wc wc;
		uint64_t stop = vt_now_ms() + WAITMS;
		int r;
		while ((r = ibv_poll_cq(m->id->recv_cq, 1, &wc)) == 0 && vt_now_ms() < stop)
			;
		if (r != 1)
			return good;
		uint32_t t = (uint32_t)(tag * 100 + i);
		vt_fill(want, LEN, t);
		const uint8_t *p = m->buf + wc.wr_id * SLOT;
		bool ok =
		    wc.status == IBV_WC_SUCCESS && wc.byte_len == 40 + LEN &&
		    ntohl(wc.imm_data) == t && !memcmp(p + 40, want, LEN) &&
		    !memcmp(p + 20 + 16, group_gid + 12, 4); /* the IPv4 header's destination */
		CHECK(ok);
		good += ok;
		vt_post_recv(m->id->qp, m->mr, m->buf + wc.wr_id * SLOT, SLOT, wc.wr_id);
	}
	return good;
}

static int quiet(struct member *m, int ms)
{
	int n = 0;
	uint64_t stop = vt_now_ms() + (uint64_t)ms;
	while (vt_now_ms() < stop) {
		struct ibv_wc wc;
		int r = ibv_poll_cq(m->id->recv_cq, 1, &wc);
		REQUIRE(r >= 0);
		if (r) {
			n++;
			vt_post_recv(m->id->qp, m->mr, m->buf + wc.wr_id * SLOT, SLOT, wc.wr_id);
		}
	}
	return n;
}

/* ---- the second process ---- */

enum { CMD_JOIN, CMD_EXPECT, CMD_QUIET, CMD_LEAVE, CMD_EXIT };

static void child_main(int fd)
{
	struct member m;
	resolve(&m, GROUP);
	make_qp(&m);
	for (;;) {
		int c[2];
		int reply = 0;
		if (read(fd, c, sizeof(c)) != (ssize_t)sizeof(c) || c[0] == CMD_EXIT)
			break;
		if (c[0] == CMD_JOIN)
			join_plain(&m, &m);
		else if (c[0] == CMD_EXPECT)
			reply = expect_msgs(&m, c[1], 4);
		else if (c[0] == CMD_QUIET)
			reply = quiet(&m, c[1]);
		else if (c[0] == CMD_LEAVE)
			reply = leave(&m);
		reply = reply * 1000 + (check_failures > 999 ? 999 : check_failures);
		if (write(fd, &reply, sizeof(reply)) != (ssize_t)sizeof(reply))
			break;
	}
	member_free(&m);
	_exit(check_failures ? 1 : 0);
}

static int child_cmd(int fd, int op, int arg)
{
	int c[2] = {op, arg}, reply = -1;
	REQUIRE(write(fd, c, sizeof(c)) == (ssize_t)sizeof(c));
	if (op == CMD_EXIT)
		return 0;
	REQUIRE(read(fd, &reply, sizeof(reply)) == (ssize_t)sizeof(reply));
	CHECK_EQ(reply % 1000, 0);
	return reply / 1000;
}

/* ---- parts ---- */

static void traffic(int cfd)
{
	struct member p1, p2, s, late;
	int ctx1, ctx2, ctxs, ctxl;
	resolve(&p1, GROUP);
	make_qp(&p1);
	join_plain(&p1, &ctx1);
	resolve(&p2, GROUP);
	make_qp(&p2);
	join_ex(&p2, RDMA_MC_JOIN_FLAG_FULLMEMBER, &ctx2);
	resolve(&s, GROUP);
	make_qp(&s);
	join_ex(&s, RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER, &ctxs); /* not attached */
	/* Joined before its QP exists; the QP is attached when the event is taken. */
	resolve(&late, GROUP);
	struct sockaddr_in g = sin_of(GROUP, 0);
	REQUIRE(rdma_join_multicast(late.id, (struct sockaddr *)&g, &ctxl) == 0);
	make_qp(&late);
	struct rdma_cm_event *e = vt_cm_event(late.ch, WAITMS);
	check_join(&late, e, &ctxl);
	rdma_ack_cm_event(e);
	CHECK_EQ(child_cmd(cfd, CMD_JOIN, 0), 0);

	send_msgs(&s, 1, 4);
	CHECK_EQ(expect_msgs(&p1, 1, 4), 4);
	CHECK_EQ(expect_msgs(&p2, 1, 4), 4);
	CHECK_EQ(expect_msgs(&late, 1, 4), 4);
	CHECK_EQ(child_cmd(cfd, CMD_EXPECT, 1), 4);
	CHECK_EQ(quiet(&s, 100), 0); /* send-only */

	/* Leave here, then there: no more delivery to either. */
	CHECK_EQ(leave(&p2), 0);
	errno = 0;
	CHECK_EQ(leave(&p2), -1);
	CHECK_EQ(errno, EADDRNOTAVAIL);
	send_msgs(&s, 2, 4);
	CHECK_EQ(expect_msgs(&p1, 2, 4), 4);
	CHECK_EQ(child_cmd(cfd, CMD_EXPECT, 2), 4);
	CHECK_EQ(quiet(&p2, 150), 0);
	CHECK_EQ(child_cmd(cfd, CMD_LEAVE, 0), 0);
	CHECK_EQ(leave(&late), 0);
	send_msgs(&s, 3, 4);
	CHECK_EQ(expect_msgs(&p1, 3, 4), 4);
	CHECK_EQ(child_cmd(cfd, CMD_QUIET, 150), 0);
	CHECK_EQ(quiet(&late, 0), 0);

	/* A synchronous id: rdma_join_multicast returns with the event in id->event. */
	struct rdma_cm_id *sid;
	REQUIRE(rdma_create_id(NULL, &sid, NULL, RDMA_PS_UDP) == 0);
	struct sockaddr_in src = sin_of("127.0.0.1", 0);
	REQUIRE(rdma_resolve_addr(sid, (struct sockaddr *)&src, (struct sockaddr *)&g, 2000) == 0);
	struct member sm = {.id = sid};
	make_qp(&sm);
	REQUIRE(rdma_join_multicast(sid, (struct sockaddr *)&g, &sm) == 0);
	check_join(&sm, sid->event, &sm);
	send_msgs(&s, 4, 4);
	CHECK_EQ(expect_msgs(&sm, 4, 4), 4);
	CHECK_EQ(expect_msgs(&p1, 4, 4), 4);
	member_free(&sm); /* rdma_destroy_id takes id->event */

	/* A join whose event is never taken: the leave drops it. */
	struct member q;
	resolve(&q, GROUP);
	REQUIRE(rdma_join_multicast(q.id, (struct sockaddr *)&g, NULL) == 0);
	CHECK_EQ(leave(&q), 0);
	CHECK(vt_cm_event(q.ch, 100) == NULL);
	member_free(&q);

	/* Not a multicast address: the attach at rdma_get_cm_event fails, MULTICAST_ERROR. */
	struct member u;
	resolve(&u, GROUP);
	make_qp(&u);
	struct sockaddr_in uni = sin_of("127.0.0.9", 0);
	REQUIRE(rdma_join_multicast(u.id, (struct sockaddr *)&uni, &u) == 0);
	e = vt_cm_event(u.ch, WAITMS);
	REQUIRE(e);
	CHECK_EQ(e->event, RDMA_CM_EVENT_MULTICAST_ERROR);
	CHECK_EQ(e->status, -1);
	CHECK(e->param.ud.private_data == &u);
	rdma_ack_cm_event(e);
	CHECK_EQ(rdma_leave_multicast(u.id, (struct sockaddr *)&uni), 0);
	member_free(&u);

	member_free(&p1);
	member_free(&p2);
	member_free(&s);
	member_free(&late);
}

static void bad_arguments(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	REQUIRE(ch);
	struct sockaddr_in g = sin_of(GROUP, 0), lo = sin_of("127.0.0.1", 0);
	struct rdma_cm_id *id;

	/* No device yet (IDLE), a wildcard bind (no device), a TCP id, after the route. */
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	errno = 0;
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	struct sockaddr_in any = sin_of("0.0.0.0", 0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&any) == 0);
	errno = 0;
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(rdma_destroy_id(id), 0);

	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&lo) == 0);
	errno = 0;
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(rdma_destroy_id(id), 0);

	/* A UD id bound to 127.0.0.1: the address and the attributes. */
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&lo) == 0);
	struct sockaddr_un un = {.sun_family = AF_UNIX};
	struct sockaddr_in zero = sin_of("0.0.0.0", 0);
	struct sockaddr_in6 g6 = {.sin6_family = AF_INET6};
	inet_pton(AF_INET6, "ff0e::1", &g6.sin6_addr);
	struct sockaddr *bad[] = {NULL, (struct sockaddr *)&un, (struct sockaddr *)&zero,
				  (struct sockaddr *)&g6};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		CHECK_EQ(rdma_join_multicast(id, bad[i], NULL), -1);
		CHECK_EQ(errno, EINVAL);
	}
	struct rdma_cm_join_mc_attr_ex a = {.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED,
					    .addr = (struct sockaddr *)&g};
	errno = 0;
	CHECK_EQ(rdma_join_multicast_ex(id, &a, NULL), -1);
	CHECK_EQ(errno, EOPNOTSUPP);
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS; /* no address */
	errno = 0;
	CHECK_EQ(rdma_join_multicast_ex(id, &a, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS; /* no flags */
	errno = 0;
	CHECK_EQ(rdma_join_multicast_ex(id, &a, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	a.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	a.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	errno = 0;
	CHECK_EQ(rdma_join_multicast_ex(id, &a, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	errno = 0;
	CHECK_EQ(rdma_leave_multicast(id, (struct sockaddr *)&g), -1); /* never joined */
	CHECK_EQ(errno, EADDRNOTAVAIL);
	errno = 0;
	CHECK_EQ(rdma_leave_multicast(id, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	/* BOUND to a device is enough (the kernel: ADDR_BOUND or ADDR_RESOLVED). */
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), 0);
	struct rdma_cm_event *e = vt_cm_event(ch, WAITMS);
	CHECK(e && e->event == RDMA_CM_EVENT_MULTICAST_JOIN);
	if (e)
		rdma_ack_cm_event(e);
	CHECK_EQ(rdma_leave_multicast(id, (struct sockaddr *)&g), 0);
	CHECK_EQ(rdma_destroy_id(id), 0);

	/* After rdma_resolve_route: no longer (the kernel: EINVAL). */
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	REQUIRE(rdma_resolve_addr(id, (struct sockaddr *)&lo, (struct sockaddr *)&g, 2000) == 0);
	e = vt_cm_event(ch, WAITMS);
	REQUIRE(e && e->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(e);
	REQUIRE(rdma_resolve_route(id, 2000) == 0);
	e = vt_cm_event(ch, WAITMS);
	REQUIRE(e && e->event == RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(e);
	errno = 0;
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), -1);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(rdma_destroy_id(id), 0);

	/* A destroyed id (cm.h "The application's handles"): ENOENT. */
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	CHECK_EQ(rdma_destroy_id(id), 0);
	errno = 0;
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), -1);
	CHECK_EQ(errno, ENOENT);
	errno = 0;
	CHECK_EQ(rdma_leave_multicast(id, (struct sockaddr *)&g), -1);
	CHECK_EQ(errno, ENOENT);

	/* iWARP: no multicast (the kernel's rdma_cm on siw: ENOSYS). */
	setenv("SOFTRDMA_TRANSPORT", "iwarp", 1);
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	REQUIRE(rdma_bind_addr(id, (struct sockaddr *)&lo) == 0);
	unsetenv("SOFTRDMA_TRANSPORT");
	CHECK_EQ(id->verbs->device->transport_type, IBV_TRANSPORT_IWARP);
	errno = 0;
	CHECK_EQ(rdma_join_multicast(id, (struct sockaddr *)&g, NULL), -1);
	CHECK_EQ(errno, ENOSYS);
	CHECK_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

int main(void)
{
	/* A UDP port of our own for both processes (drops at the port's default member are then
	 * ours), and bounded CM waits. */
	char port[16];
	snprintf(port, sizeof(port), "%d", 20000 + (int)(getpid() % 20000));
	if (!getenv("SOFTRDMA_UDP_PORT"))
		setenv("SOFTRDMA_UDP_PORT", port, 1);
	setenv("SOFTRDMA_CM_TIMEOUT", "2000", 0);
	int sv[2];
	REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		child_main(sv[1]);
	}
	close(sv[1]);
	bad_arguments();
	traffic(sv[0]);
	child_cmd(sv[0], CMD_EXIT, 0);
	int st = 0;
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return check_exit();
}
