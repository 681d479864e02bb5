/* A process that ends with connected rdma_cm ids says goodbye as the kernel does for it (ucma
 * closes the ids: a DREQ for each connected RoCE id). perftest's ib_atomic_lat server returns
 * from main with its ids connected; against rxe the client then waited more than a minute in
 * rdma_disconnect for a DREP that nobody would send.
 *
 * The parent listens on 127.0.0.1 (RoCEv2: the IB CM's MADs on QP1); a child (this program
 * re-executed with --child PORT) connects and returns from main without destroying anything.
 * Checks: the parent's id gets DISCONNECTED, through a DREQ (counter disconnects) and not
 * through the watch on local peer processes (counter peer_gone, the fallback for a peer killed
 * outright, which also ends in DISCONNECTED). And a fork of a process with a connected id,
 * exiting, does not disconnect its parent's connection. Every wait is bounded. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "vutil.h"
#include "cm/cm.h"
#include "softrdma.h"

static bool expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t, int timeout_ms,
		   struct rdma_cm_id **id)
{
	struct rdma_cm_event *ev = vt_cm_event(ch, timeout_ms);

	if (!ev) {
		fprintf(stderr, "no %s within %d ms\n", rdma_event_str(t), timeout_ms);
		return false;
	}
	bool ok = ev->event == t;
	if (!ok)
		fprintf(stderr, "got %s, wanted %s\n", rdma_event_str(ev->event),
			rdma_event_str(t));
	if (id)
		*id = ev->id;
	rdma_ack_cm_event(ev);
	return ok;
}

static struct ibv_qp_init_attr qp_attr(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .qp_type = IBV_QPT_RC,
	    .cap = {.max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1, .max_recv_sge = 1}};
	return a;
}

/* --child PORT: connects to 127.0.0.1:PORT and leaves main with the id connected.
 * --hold PORT: connects, writes 'C' to stdout, then waits 1.5 s for a CM event and writes
 * 'D' if it was DISCONNECTED, else 'K'; then leaves main, the id still connected. */
static int child(uint16_t port, bool hold)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000) ||
	    !expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 3000, NULL) || rdma_resolve_route(id, 2000) ||
	    !expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 3000, NULL))
		return 2;
	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr qa = qp_attr(cq);
	struct rdma_conn_param cp = {.initiator_depth = 1, .responder_resources = 1};
	if (!pd || !cq || rdma_create_qp(id, pd, &qa) || rdma_connect(id, &cp) ||
	    !expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL))
		return 3;
	if (hold) {
		struct rdma_cm_event *ev;
		char verdict = 'K';
		if (write(1, "C", 1) != 1)
			return 4;
		ev = vt_cm_event(ch, 1500);
		if (ev) {
			verdict = ev->event == RDMA_CM_EVENT_DISCONNECTED ? 'D' : '?';
			rdma_ack_cm_event(ev);
		}
		if (write(1, &verdict, 1) != 1)
			return 4;
	}
	return 0; /* the ids stay connected: the exit must say goodbye */
}

/* Starts this program as `mode` PORT (its stdout: *out, if out) and accepts its connection;
 * returns its PID and the connected id. */
static pid_t accept_child(struct rdma_event_channel *ch, uint16_t port, const char *mode, int *out,
			  struct rdma_cm_id **conn, struct ibv_pd **pd, struct ibv_cq **cq)
{
	char ps[16];
	int fds[2];
	pid_t pid;

	snprintf(ps, sizeof(ps), "%u", port);
	REQUIRE(pipe(fds) == 0);
	fflush(NULL);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/proc/self/exe", "test_cm_exit", mode, ps, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (out)
		*out = fds[0];
	else
		close(fds[0]);
	struct rdma_cm_id *req = NULL;
	REQUIRE(expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &req));
	*pd = ibv_alloc_pd(req->verbs);
	*cq = ibv_create_cq(req->verbs, 4, NULL, NULL, 0);
	REQUIRE(*pd && *cq);
	struct ibv_qp_init_attr qa = qp_attr(*cq);
	REQUIRE(rdma_create_qp(req, *pd, &qa) == 0);
	struct rdma_conn_param cp = {.initiator_depth = 1, .responder_resources = 1};
	REQUIRE(rdma_accept(req, &cp) == 0);
	REQUIRE(expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL));
	*conn = req;
	return pid;
}

static char read_char(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char c = 0;

	if (poll(&p, 1, 5000) != 1 || read(fd, &c, 1) != 1)
		return 0;
	return c;
}

static void close_conn(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *cq)
{
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
}

int main(int argc, char **argv)
{
	setenv("SOFTRDMA_TRANSPORT", "roce", 1);
	setenv("SOFTRDMA_CM_TIMEOUT", "2000", 0);
	if (argc > 2 && !strcmp(argv[1], "--child"))
		return child((uint16_t)atoi(argv[2]), false);
	if (argc > 2 && !strcmp(argv[1], "--hold"))
		return child((uint16_t)atoi(argv[2]), true);

	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lis;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &lis, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_bind_addr(lis, (struct sockaddr *)&sa) == 0);
	REQUIRE(rdma_listen(lis, 4) == 0);
	uint16_t port = ntohs(rdma_get_src_port(lis));
	REQUIRE(port != 0);

	/* A process that ends with its id connected. */
	struct rdma_cm_id *conn;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint64_t disc = cm_counter("disconnects"), gone = cm_counter("peer_gone");
	pid_t pid = accept_child(ch, port, "--child", NULL, &conn, &pd, &cq);
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, NULL));
	CHECK_EQ(cm_counter("disconnects"), disc + 1);
	CHECK_EQ(cm_counter("peer_gone"), gone); /* the DREQ came, not the watch */
	/* Our REP went straight to the peer's endpoint, not through whichever process routes
	 * QP1 for the host (core_gsi_send). Our DREP does too while the child lives, but the
	 * child does not wait for it (as a process that returns from main): on a loaded machine
	 * it is gone first and the DREP takes UDP, which is as good; so it is not counted on. */
	CHECK(softrdma_counter(conn->verbs, NULL, "gsi_local") >= 1);
	close_conn(conn, pd, cq);

	/* A fork of this process (which holds a connected id) exits: the id is its parent's, the
	 * peer hears nothing. */
	int out = -1;
	pid = accept_child(ch, port, "--hold", &out, &conn, &pd, &cq);
	CHECK_EQ(read_char(out), 'C');
	fflush(NULL);
	pid_t f = fork();
	REQUIRE(f >= 0);
	if (f == 0)
		exit(0); /* destructors run here */
	REQUIRE(waitpid(f, &st, 0) == f);
	CHECK_EQ(read_char(out), 'K'); /* not disconnected by the fork's exit */
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(out);
	CHECK(expect(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, NULL)); /* the holder's own exit */
	close_conn(conn, pd, cq);

	rdma_destroy_id(lis);
	rdma_destroy_event_channel(ch);
	return check_exit();
}
