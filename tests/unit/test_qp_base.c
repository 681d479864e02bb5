/* What both engines' QPs share (src/engine/qp_base.c, struct eng_qp_base): the same calls on
 * a RoCE RC QP and on an iWARP QP must give the same answers. Receives posted in RESET are
 * refused and in INIT queued; RESET empties the receive queue without completions; ERR
 * flushes it in order (WR_FLUSH_ERR, IBV_WC_RECV, the QP's number); in ERR a receive or a send
 * completes at once, a receive with too many SGEs is refused with *bad set; an SRQ-attached
 * QP refuses receives and reports its last WQE on ERR. The env callbacks get the base, which
 * turns back into the QP it begins (eng_qp_of / iw_qp_of). */
#include "check.h"

#include <errno.h>

#include "engine/eng.h"
#include "engine/iw_eng.h"

#define NO_EVENT ((enum ibv_event_type) - 1)

struct rec {
	struct eng_qp_base *base; /* the last event's QP */
	enum ibv_event_type ev;
	int events;
};

static void *mem_resolve(void *ctx, uint32_t pd, uint32_t qpn, uint32_t key, bool remote,
			 uint64_t va, uint64_t len, unsigned access, int *err)
{
	(void)ctx, (void)pd, (void)qpn, (void)key, (void)remote, (void)access;
	*err = len ? -ENOENT : 0;
	return len ? NULL : (void *)(uintptr_t)va;
}

static void on_event(void *ctx, struct eng_qp_base *b, enum ibv_event_type ev)
{
	struct rec *r = ctx;
	r->base = b;
	r->ev = ev;
	r->events++;
}

/* One engine's QP behind the calls the test makes. */
struct tqp {
	bool iwarp;
	struct eng_qp *rq;
	struct iw_qp *iq;
};

static int tqp_create(struct tqp *t, bool iwarp, const struct eng_qp_init *init,
		      const struct eng_env *env)
{
	t->iwarp = iwarp;
	t->rq = NULL;
	t->iq = NULL;
	return iwarp ? iw_qp_create(init, env, &t->iq) : eng_qp_create(init, env, &t->rq);
}

static struct eng_qp_base *tqp_base(const struct tqp *t)
{
	return t->iwarp ? iw_qp_base(t->iq) : eng_qp_base(t->rq);
}

static void tqp_state(struct tqp *t, enum ibv_qp_state s)
{
	if (t->iwarp)
		iw_qp_set_state(t->iq, s, 0);
	else
		eng_qp_set_state(t->rq, s, 0);
}

static int tqp_post_send(struct tqp *t, const struct ibv_send_wr *wr,
			 const struct ibv_send_wr **bad)
{
	return t->iwarp ? iw_qp_post_send(t->iq, wr, bad, 0) : eng_qp_post_send(t->rq, wr, bad, 0);
}

static void tqp_destroy(struct tqp *t)
{
	if (t->iwarp)
		iw_qp_destroy(t->iq);
	else
		eng_qp_destroy(t->rq);
}

static int post_recv(struct eng_qp_base *b, uint64_t wr_id, int num_sge,
		     const struct ibv_recv_wr **bad)
{
	static struct ibv_sge sge[2] = {{.length = 8}, {.length = 8}};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = sge, .num_sge = num_sge};
	*bad = NULL;
	int r = eng_base_post_recv(b, &wr, bad);
	if (r)
		CHECK(*bad == &wr); /* the first WR not posted */
	return r;
}

/* Exactly one completion waits in cq, with these fields. */
static void expect_one(struct eng_cq *cq, uint64_t wr_id, enum ibv_wc_status st,
		       enum ibv_wc_opcode op, uint32_t qpn)
{
	struct ibv_wc wc[4];
	CHECK_EQ(eng_cq_poll(cq, 4, wc), 1);
	CHECK_EQ(wc[0].wr_id, wr_id);
	CHECK_EQ(wc[0].status, st);
	CHECK_EQ(wc[0].opcode, op);
	CHECK_EQ(wc[0].qp_num, qpn);
}

static void own_rq(bool iwarp)
{
	struct eng_cq scq, rcq;
	struct rec rec = {.ev = NO_EVENT};
	struct eng_env env = {.ctx = &rec, .mem_resolve = mem_resolve, .event = on_event};
	struct ibv_wc wc[8];
	const struct ibv_recv_wr *bad;
	struct tqp t;

	CHECK_EQ(eng_cq_init(&scq, 8), 0);
	CHECK_EQ(eng_cq_init(&rcq, 8), 0);
	struct eng_qp_init init = {.type = IBV_QPT_RC,
				   .qpn = 0x123,
				   .max_send_wr = 4,
				   .max_send_sge = 1,
				   .max_recv_wr = 4,
				   .max_recv_sge = 1,
				   .send_cq = &scq,
				   .recv_cq = &rcq};
	CHECK_EQ(tqp_create(&t, iwarp, &init, &env), 0);
	struct eng_qp_base *b = tqp_base(&t);

	/* The base says which QP it begins. */
	CHECK_EQ(b->iwarp, iwarp);
	CHECK(iwarp ? iw_qp_of(b) == t.iq && !eng_qp_of(b) : eng_qp_of(b) == t.rq && !iw_qp_of(b));
	CHECK_EQ(b->state, IBV_QPS_RESET);
	CHECK(b->rq == &b->own_rq);

	/* RESET refuses receives; INIT queues them; RESET empties the queue silently. */
	CHECK_EQ(post_recv(b, 1, 1, &bad), -EINVAL);
	tqp_state(&t, IBV_QPS_INIT);
	CHECK_EQ(post_recv(b, 1, 1, &bad), 0);
	CHECK_EQ(post_recv(b, 2, 1, &bad), 0);
	CHECK_EQ(eng_rq_count(b->rq), 2);
	CHECK_EQ(post_recv(b, 9, 2, &bad), -EINVAL); /* more SGEs than max_recv_sge */
	tqp_state(&t, IBV_QPS_RESET);
	CHECK_EQ(eng_rq_count(b->rq), 0);
	CHECK_EQ(eng_cq_poll(&rcq, 8, wc), 0);

	/* ERR flushes what is queued, in order, and raises nothing by itself. */
	tqp_state(&t, IBV_QPS_INIT);
	CHECK_EQ(post_recv(b, 3, 1, &bad), 0);
	CHECK_EQ(post_recv(b, 4, 0, &bad), 0);
	tqp_state(&t, IBV_QPS_ERR);
	CHECK_EQ(b->state, IBV_QPS_ERR);
	CHECK_EQ(eng_cq_poll(&rcq, 8, wc), 2);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(wc[i].wr_id, 3 + i);
		CHECK_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		CHECK_EQ(wc[i].opcode, IBV_WC_RECV);
		CHECK_EQ(wc[i].qp_num, 0x123);
	}
	CHECK_EQ(eng_cq_poll(&scq, 8, wc), 0);
	CHECK_EQ(rec.events, 0);

	/* In ERR a receive completes at once; one with too many SGEs is refused. */
	CHECK_EQ(post_recv(b, 5, 1, &bad), 0);
	expect_one(&rcq, 5, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0x123);
	CHECK_EQ(post_recv(b, 6, 2, &bad), -EINVAL);
	CHECK_EQ(eng_cq_poll(&rcq, 8, wc), 0);

	/* So does a send, signaled or not, with its operation's opcode. */
	struct ibv_send_wr swr = {.wr_id = 7, .opcode = IBV_WR_SEND};
	const struct ibv_send_wr *sbad = NULL;
	CHECK_EQ(tqp_post_send(&t, &swr, &sbad), 0);
	expect_one(&scq, 7, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, 0x123);

	/* RESET takes back the QP's completions not yet polled. */
	CHECK_EQ(post_recv(b, 8, 1, &bad), 0);
	tqp_state(&t, IBV_QPS_RESET);
	CHECK_EQ(eng_cq_poll(&rcq, 8, wc), 0);

	tqp_destroy(&t);
	eng_cq_fini(&scq);
	eng_cq_fini(&rcq);
}

static void with_srq(bool iwarp)
{
	struct eng_cq cq;
	struct eng_rq srq;
	struct rec rec = {.ev = NO_EVENT};
	struct eng_env env = {.ctx = &rec, .mem_resolve = mem_resolve, .event = on_event};
	const struct ibv_recv_wr *bad;
	struct ibv_wc wc[4];
	struct tqp t;

	CHECK_EQ(eng_cq_init(&cq, 8), 0);
	CHECK_EQ(eng_rq_init(&srq, 4, 1, true), 0);
	struct eng_qp_init init = {.type = IBV_QPT_RC,
				   .qpn = 0x456,
				   .max_send_wr = 4,
				   .max_send_sge = 1,
				   .srq = &srq,
				   .send_cq = &cq,
				   .recv_cq = &cq};
	CHECK_EQ(tqp_create(&t, iwarp, &init, &env), 0);
	struct eng_qp_base *b = tqp_base(&t);
	CHECK(b->rq == &srq);

	/* Receives go to the SRQ, not through the QP; ERR leaves the SRQ's WQEs alone (they are
	 * the other QPs' too) and reports the QP's last WQE, for this QP. */
	tqp_state(&t, IBV_QPS_INIT);
	CHECK_EQ(post_recv(b, 1, 1, &bad), -EINVAL);
	struct ibv_recv_wr wr = {.wr_id = 2, .num_sge = 1};
	struct ibv_sge sge = {.length = 8};
	wr.sg_list = &sge;
	CHECK_EQ(eng_rq_post(&srq, &wr, &bad), 0);
	tqp_state(&t, IBV_QPS_ERR);
	CHECK_EQ(eng_rq_count(&srq), 1);
	CHECK_EQ(eng_cq_poll(&cq, 4, wc), 0);
	CHECK_EQ(rec.events, 1);
	CHECK_EQ(rec.ev, IBV_EVENT_QP_LAST_WQE_REACHED);
	CHECK(rec.base == b);

	tqp_destroy(&t);
	eng_rq_fini(&srq);
	eng_cq_fini(&cq);
}

int main(void)
{
	for (int iwarp = 0; iwarp < 2; iwarp++) {
		own_rq(iwarp);
		with_srq(iwarp);
	}
	return check_exit();
}
