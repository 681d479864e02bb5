/* softrdma as MPA initiator against a responder that behaves like Linux siw's (siw_accept in
 * Linux 6.1): it sends its MPA Reply, and stream bytes that arrive before it has handed the
 * socket to its QP stay unread until further bytes arrive (its socket callback ignores data in
 * that state). Live against siw, rping's client (which sends one SEND and waits for the
 * server's READ) hung about one run in three this way.
 *
 * The blind peer here: a thread that answers the Request with iw_conn (responder), then stays
 * blind for BLIND_MS, then takes the bytes already queued as "not noticed" and waits until new
 * bytes arrive before it reads anything. The initiator is softrdma through rdma_cm over
 * iwarp_lo: it connects, sends a SEND at once and waits. Checks:
 *   - with nudges (the default): new bytes arrive after the blind window (a zero-length RDMA
 *     Write), so the peer reads the stream and finds the SEND's payload; the initiator's QP
 *     counts the nudges it sent;
 *   - control, SOFTRDMA_IW_NUDGE=0 in a second context: no new byte arrives within a second (the
 *     blind peer would wait for ever: the test can tell the two apart).
 * The control runs in a child process (the variable is read when rdma_cm opens the device).
 * Every wait is bounded. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "vutil.h"
#include "engine/iw_conn.h"

#define BLIND_MS 100
#define MS	 1000000ull

static const char payload[] = "first SEND, right after the MPA Reply";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct blind {
	int lfd;
	uint16_t port;
	uint64_t wait_ms; /* how long to wait for new bytes after the blind window */
	/* results */
	bool handshake_ok;
	bool woke;	  /* new bytes arrived after the blind window */
	bool payload_ok;  /* the SEND's payload was in the stream */
	size_t unnoticed; /* bytes queued during the blind window */
};

static int queued(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

static void *blind_peer(void *arg)
{
	struct blind *b = arg;
	struct pollfd p = {.fd = b->lfd, .events = POLLIN};
	uint8_t buf[4096], stream[8192];
	size_t have = 0;
	struct iw_conn c;
	struct iw_conn_cfg cfg = {.role = IW_CONN_RESPONDER};
	int fd = -1;

	if (poll(&p, 1, 5000) != 1)
		return NULL;
	fd = accept(b->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	if (iw_conn_init(&c, &cfg, now_ns()) != 0)
		goto out;
	/* The Request (blocking reads), then the Reply. */
	uint64_t until = now_ns() + 5000 * MS;
	while (iw_conn_state(&c) != IW_CONN_REQ_RCVD && now_ns() < until) {
		struct pollfd q = {.fd = fd, .events = POLLIN};
		if (poll(&q, 1, 100) != 1)
			continue;
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		size_t used = 0;
		if (r <= 0)
			goto out;
		iw_conn_input(&c, buf, (size_t)r, now_ns(), &used);
		/* Anything after the Request is the QP's: not noticed either. */
		memcpy(stream + have, buf + used, (size_t)r - used);
		have += (size_t)r - used;
	}
	if (iw_conn_state(&c) != IW_CONN_REQ_RCVD ||
	    iw_conn_accept(&c, 8, 8, NULL, 0, now_ns()) != 0)
		goto out;
	const uint8_t *hs;
	size_t hn = iw_conn_tx_peek(&c, &hs);
	if (send(fd, hs, hn, MSG_NOSIGNAL) != (ssize_t)hn)
		goto out;
	iw_conn_tx_advance(&c, hn);
	b->handshake_ok = iw_conn_state(&c) == IW_CONN_ESTABLISHED;
	/* Blind: what arrives now is not noticed. */
	usleep(BLIND_MS * 1000);
	int n0 = queued(fd);
	if (n0 < 0)
		goto out;
	b->unnoticed = have + (size_t)n0;
	until = now_ns() + b->wait_ms * MS;
	while (now_ns() < until) {
		int n = queued(fd);
		if (n < 0)
			goto out;
		if (n > n0) {
			b->woke = true;
			break;
		}
		usleep(1000);
	}
	if (!b->woke)
		goto out;
	/* Awake: read what is there (a little later: the rest of a segment train). */
	usleep(20 * 1000);
	for (;;) {
		ssize_t r = recv(fd, stream + have, sizeof(stream) - have, MSG_DONTWAIT);
		if (r <= 0)
			break;
		have += (size_t)r;
		if (have == sizeof(stream))
			break;
	}
	b->payload_ok = memmem(stream, have, payload, sizeof(payload)) != NULL;
out:
	if (fd >= 0)
		close(fd);
	return NULL;
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = vt_cm_event(ch, 5000);

	if (!ev) {
		CHECK(!"no CM event within 5 s");
		return NULL;
	}
	CHECK_EQ(ev->event, t);
	if (ev->event != t) {
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

/* Connects to the blind peer through rdma_cm over iWARP and sends one SEND at once. Returns
 * the nudges the QP sent (from the blind peer's point of view: *b filled). */
static void run(struct blind *b, uint64_t wait_ms)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	pthread_t th;

	memset(b, 0, sizeof(*b));
	b->wait_ms = wait_ms;
	b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(b->lfd >= 0);
	REQUIRE(bind(b->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(listen(b->lfd, 4) == 0);
	REQUIRE(getsockname(b->lfd, (struct sockaddr *)&sa, &sl) == 0);
	REQUIRE(pthread_create(&th, NULL, blind_peer, b) == 0);

	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id = NULL;
	REQUIRE(ch);
	REQUIRE(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	REQUIRE(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000) == 0);
	struct rdma_cm_event *ev = expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	REQUIRE(rdma_resolve_route(id, 2000) == 0);
	ev = expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	REQUIRE(ev);
	rdma_ack_cm_event(ev);
	CHECK_EQ(id->verbs->device->transport_type, IBV_TRANSPORT_IWARP);

	struct ibv_pd *pd = ibv_alloc_pd(id->verbs);
	struct ibv_cq *cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	REQUIRE(pd && cq);
	struct ibv_qp_init_attr qa = {.send_cq = cq,
				      .recv_cq = cq,
				      .qp_type = IBV_QPT_RC,
				      .cap = {.max_send_wr = 4,
					      .max_recv_wr = 4,
					      .max_send_sge = 1,
					      .max_recv_sge = 1,
					      .max_inline_data = 64}};
	REQUIRE(rdma_create_qp(id, pd, &qa) == 0);
	struct rdma_conn_param cp = {.initiator_depth = 1, .responder_resources = 1};
	REQUIRE(rdma_connect(id, &cp) == 0);
	ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	REQUIRE(ev);
	rdma_ack_cm_event(ev);

	struct ibv_sge sge = {.addr = (uintptr_t)payload, .length = sizeof(payload)};
	struct ibv_send_wr wr = {.wr_id = 1,
				 .sg_list = &sge,
				 .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED};
	struct ibv_send_wr *bad;
	REQUIRE(ibv_post_send(id->qp, &wr, &bad) == 0);
	struct ibv_wc wc;
	int got = 0;
	for (uint64_t until = now_ns() + 2000 * MS; !got && now_ns() < until;)
		got = ibv_poll_cq(cq, 1, &wc);
	CHECK_EQ(got, 1);
	CHECK_EQ(wc.status, IBV_WC_SUCCESS);
	/* The application waits without polling (as rping's client): the progress thread has
	 * to nudge. */
	REQUIRE(pthread_join(th, NULL) == 0);
	close(b->lfd);
	rdma_disconnect(id);
	rdma_destroy_qp(id);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* The control runs in a process of its own (rdma_cm keeps a device's context open, and the
 * variable is read when the context is made): exit 0 if the blind peer stayed stuck. */
static int control(void)
{
	struct blind b;

	run(&b, 1000);
	CHECK(b.handshake_ok);
	CHECK(b.unnoticed >= sizeof(payload));
	CHECK(!b.woke);
	printf("nudges off: %zu bytes unnoticed, woke %d\n", b.unnoticed, b.woke);
	return check_exit();
}

int main(int argc, char **argv)
{
	struct blind b;

	setenv("SOFTRDMA_TRANSPORT", "iwarp", 1);
	setenv("SOFTRDMA_CM_TIMEOUT", "3000", 0);
	if (argc > 1 && !strcmp(argv[1], "--control"))
		return control();

	unsetenv("SOFTRDMA_IW_NUDGE");
	run(&b, 3000);
	CHECK(b.handshake_ok);
	CHECK(b.unnoticed >= sizeof(payload)); /* the SEND did land in the blind window */
	CHECK(b.woke);
	CHECK(b.payload_ok);
	printf("nudges on: %zu bytes unnoticed, woke %d, payload found %d\n", b.unnoticed, b.woke,
	       b.payload_ok);

	fflush(stdout);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("SOFTRDMA_IW_NUDGE", "0", 1);
		execl("/proc/self/exe", argv[0], "--control", (char *)NULL);
		_exit(127);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	return check_exit();
}
