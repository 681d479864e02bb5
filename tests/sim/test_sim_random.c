/* Seeded random faults over thousands of mixed messages, in both directions of one
 * connection at once: drop, duplication, reordering, jitter, late receives (RNR). After each
 * batch every destination byte, every completion (exactly once, in order, right opcode,
 * byte_len, wr_id, imm) and every atomic result is checked against a model. Every scenario
 * runs with go-back-N and again with selective repeat on both QPs (engine/sr.h). Replay a
 * failure with SOFTRDMA_SEED=<seed>. */
#include "check.h"
#include "sim.h"

#define BATCH 32
#define SLOT  16384
#define MEM   (BATCH * SLOT)

enum kind { K_SEND, K_SEND_IMM, K_WRITE, K_WRITE_IMM, K_READ, K_FADD, K_CSWAP, K__COUNT };

struct op {
	enum kind kind;
	uint32_t len;
	uint64_t wr_id;
	bool signaled;
	bool consumes_recv;
	uint32_t imm;
	uint64_t orig; /* atomics: the value the model says it returns */
};

struct side {
	int id;
	struct sim_node *node;
	struct eng_qp *qp;
	struct side *peer;
	struct sim_mr *src, *dst, *rcv, *rdst, *atom, *res;
	uint64_t model; /* value of this side's counter (the target of the peer's atomics) */
	struct op ops[BATCH];
	int nops;
	int next_sig;		      /* next op index whose send completion is due */
	int recvs_posted, recvs_done; /* receives this side posted for the peer's ops */
	int recv_ops[BATCH];	      /* peer op index for each posted receive, in order */
	uint64_t sent;
};

static struct sim s;
static struct side side[2];
static uint64_t batch_no;
static bool sr; /* selective repeat on both QPs */

static enum ibv_wr_opcode wr_opcode(enum kind k)
{
	static const enum ibv_wr_opcode map[K__COUNT] = {IBV_WR_SEND,
							 IBV_WR_SEND_WITH_IMM,
							 IBV_WR_RDMA_WRITE,
							 IBV_WR_RDMA_WRITE_WITH_IMM,
							 IBV_WR_RDMA_READ,
							 IBV_WR_ATOMIC_FETCH_AND_ADD,
							 IBV_WR_ATOMIC_CMP_AND_SWP};

	return map[k];
}

static enum ibv_wc_opcode wc_opcode(enum kind k)
{
	static const enum ibv_wc_opcode map[K__COUNT] = {
	    IBV_WC_SEND,      IBV_WC_SEND,	IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
	    IBV_WC_RDMA_READ, IBV_WC_FETCH_ADD, IBV_WC_COMP_SWAP};

	return map[k];
}

static uint32_t rand_len(uint32_t pmtu)
{
	switch (sim_rand(&s) % 8) {
	case 0:
		return 0;
	case 1:
		return 1 + (uint32_t)(sim_rand(&s) % 3);
	case 2:
		return pmtu;
	case 3:
		return pmtu + 1;
	case 4:
		return (uint32_t)(sim_rand(&s) % SLOT);
	default:
		return (uint32_t)(sim_rand(&s) % (3 * pmtu));
	}
}

static void post_recv_for(struct side *x, int i)
{
	struct side *y = x->peer;

	CHECK_EQ(sim_post_recv(y->qp, 1000000 + batch_no * BATCH + (uint64_t)i, y->rcv,
			       (uint64_t)i * SLOT, SLOT),
		 0);
	y->recv_ops[y->recvs_posted++] = i;
}

/* Posts one batch of random operations from x to its peer. Receives are posted first, or
 * (late) after some virtual time, which makes the peer answer RNR NAKs. */
static void post_batch(struct side *x, uint32_t pmtu, bool late_recvs)
{
	struct side *y = x->peer;

	x->nops = 0;
	x->next_sig = 0;
	y->recvs_posted = y->recvs_done = 0;
	memset(y->dst->host, 0, MEM);
	memset(y->rcv->host, 0, MEM);
	memset(x->rdst->host, 0, MEM);
	memset(x->res->host, 0, MEM);
	for (int i = 0; i < BATCH; i++) {
		struct op *o = &x->ops[i];
		struct ibv_sge sge = {0};
		struct ibv_send_wr wr = {0};
		const struct ibv_send_wr *bad;
		uint64_t off = (uint64_t)i * SLOT;

		o->kind = (enum kind)(sim_rand(&s) % K__COUNT);
		o->len = rand_len(pmtu);
		o->wr_id = batch_no * BATCH + (uint64_t)i;
		o->signaled = i == BATCH - 1 || sim_rand(&s) % 4 != 0;
		o->consumes_recv =
		    o->kind == K_SEND || o->kind == K_SEND_IMM || o->kind == K_WRITE_IMM;
		o->imm = (uint32_t)sim_rand(&s);
		wr.wr_id = o->wr_id;
		wr.opcode = wr_opcode(o->kind);
		wr.send_flags = o->signaled ? IBV_SEND_SIGNALED : 0;
		if (sim_rand(&s) % 16 == 0)
			wr.send_flags |= IBV_SEND_FENCE;
		if (sim_rand(&s) % 8 == 0)
			wr.send_flags |= IBV_SEND_SOLICITED;
		wr.imm_data = o->imm;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		sge.length = o->len;
		switch (o->kind) {
		case K_SEND:
		case K_SEND_IMM:
			sge.addr = sim_va(x->src, off);
			sge.lkey = x->src->key;
			if (o->len <= ENG_MAX_INLINE && sim_rand(&s) % 4 == 0) {
				wr.send_flags |= IBV_SEND_INLINE;
				sge.addr = (uint64_t)(uintptr_t)(x->src->host + off);
			}
			break;
		case K_WRITE:
		case K_WRITE_IMM:
			sge.addr = sim_va(x->src, off);
			sge.lkey = x->src->key;
			wr.wr.rdma.remote_addr = sim_va(y->dst, off);
			wr.wr.rdma.rkey = y->dst->key;
			break;
		case K_READ:
			sge.addr = sim_va(x->rdst, off);
			sge.lkey = x->rdst->key;
			wr.wr.rdma.remote_addr = sim_va(y->src, off);
			wr.wr.rdma.rkey = y->src->key;
			break;
		case K_FADD:
		case K_CSWAP:
			o->len = sge.length = 8;
			sge.addr = sim_va(x->res, off);
			sge.lkey = x->res->key;
			wr.wr.atomic.remote_addr = sim_va(y->atom, 0);
			wr.wr.atomic.rkey = y->atom->key;
			wr.wr.atomic.compare_add = sim_rand(&s) % 1000;
			wr.wr.atomic.swap = sim_rand(&s);
			o->orig = y->model;
			if (o->kind == K_FADD) {
				y->model += wr.wr.atomic.compare_add;
			} else {
				if (sim_rand(&s) % 2)
					wr.wr.atomic.compare_add = y->model;
				if (y->model == wr.wr.atomic.compare_add)
					y->model = wr.wr.atomic.swap;
			}
			break;
		default:
			break;
		}
		if (o->consumes_recv && !late_recvs)
			post_recv_for(x, i);
		CHECK_EQ(eng_qp_post_send(x->qp, &wr, &bad, s.now), 0);
		x->nops++;
		x->sent++;
	}
}

static void post_late_recvs(struct side *x)
{
	for (int i = 0; i < x->nops; i++)
		if (x->ops[i].consumes_recv)
			post_recv_for(x, i);
}

/* Drains a node's CQ and checks each completion against the model, in order. */
static void poll_side(struct side *me)
{
	struct ibv_wc wc[64];
	int n;

	while ((n = sim_poll(me->node, wc, 64)) > 0) {
		for (int k = 0; k < n; k++) {
			if (wc[k].opcode & IBV_WC_RECV) {
				/* A receive of the peer's SEND / WRITE with imm, in post order. */
				struct side *x = me->peer;
				const struct op *o;

				if (me->recvs_done >= me->recvs_posted) {
					CHECK(!"unexpected receive completion");
					continue;
				}
				o = &x->ops[me->recv_ops[me->recvs_done]];
				CHECK_EQ(wc[k].wr_id, 1000000 + o->wr_id);
				CHECK_EQ(wc[k].status, IBV_WC_SUCCESS);
				CHECK_EQ(wc[k].byte_len, o->len);
				CHECK_EQ(wc[k].opcode, o->kind == K_WRITE_IMM
							   ? IBV_WC_RECV_RDMA_WITH_IMM
							   : IBV_WC_RECV);
				if (o->kind != K_SEND) {
					CHECK(wc[k].wc_flags & IBV_WC_WITH_IMM);
					CHECK_EQ(wc[k].imm_data, o->imm);
				} else {
					CHECK(!(wc[k].wc_flags & IBV_WC_WITH_IMM));
				}
				me->recvs_done++;
				continue;
			}
			/* A send completion: the next signaled op. */
			while (me->next_sig < me->nops && !me->ops[me->next_sig].signaled)
				me->next_sig++;
			if (me->next_sig >= me->nops) {
				CHECK(!"unexpected send completion");
				continue;
			}
			{
				const struct op *o = &me->ops[me->next_sig++];

				CHECK_EQ(wc[k].wr_id, o->wr_id);
				CHECK_EQ(wc[k].status, IBV_WC_SUCCESS);
				CHECK_EQ(wc[k].opcode, wc_opcode(o->kind));
				CHECK_EQ(wc[k].byte_len, o->len);
			}
		}
	}
}

static bool batch_done(struct sim *sim, void *arg)
{
	(void)sim;
	(void)arg;
	for (int i = 0; i < 2; i++) {
		poll_side(&side[i]);
		if (side[i].next_sig < side[i].nops || side[i].recvs_done < side[i].recvs_posted)
			return false;
	}
	return true;
}

static void verify_batch(struct side *x)
{
	struct side *y = x->peer;
	uint64_t v;

	for (int i = 0; i < x->nops; i++) {
		const struct op *o = &x->ops[i];
		uint64_t off = (uint64_t)i * SLOT;
		const uint8_t *got = NULL, *want = x->src->host + off;

		switch (o->kind) {
		case K_SEND:
		case K_SEND_IMM:
			got = y->rcv->host + off;
			break;
		case K_WRITE:
		case K_WRITE_IMM:
			got = y->dst->host + off;
			break;
		case K_READ:
			got = x->rdst->host + off;
			want = y->src->host + off;
			break;
		default:
			memcpy(&v, x->res->host + off, 8);
			CHECK_EQ(v, o->orig);
			continue;
		}
		CHECK_MEM(got, want, o->len);
		if (o->len < SLOT)
			CHECK_EQ(got[o->len], 0);
	}
	memcpy(&v, y->atom->host, 8);
	CHECK_EQ(v, y->model);
}

static void scenario(const char *name, uint64_t seed, uint32_t pmtu, uint32_t drop_ppm,
		     uint32_t dup_ppm, uint32_t reorder_ppm, uint64_t jitter_ns, int batches)
{
	struct sim_qp_cfg cfg = {0};
	unsigned acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	int fails = check_failures;
	struct eng_qp *q[2];

	sim_init(&s, seed);
	s.wire = seed & 1;
	cfg.pmtu = pmtu;
	cfg.timeout = 10;
	cfg.psn_a = 0xFFFF00;
	cfg.psn_b = 0xFFFFF0;
	cfg.max_rd_atomic = 4;
	cfg.max_dest_rd_atomic = 4;
	cfg.max_send_wr = BATCH;
	cfg.max_recv_wr = BATCH;
	sim_connect(&s, &cfg, &q[0], &q[1]);
	if (sr) {
		REQUIRE(eng_qp_set_sr(q[0], true) == 0);
		REQUIRE(eng_qp_set_sr(q[1], true) == 0);
	}
	for (int d = 0; d < 2; d++) {
		s.link[d].drop_ppm = drop_ppm;
		s.link[d].dup_ppm = dup_ppm;
		s.link[d].reorder_ppm = reorder_ppm;
		s.link[d].reorder_ns = 20000;
		s.link[d].jitter_ns = jitter_ns;
	}
	for (int i = 0; i < 2; i++) {
		struct side *x = &side[i];
		uint64_t init = 1000u * (uint64_t)(i + 1);

		memset(x, 0, sizeof(*x));
		x->id = i;
		x->node = &s.node[i];
		x->qp = q[i];
		x->peer = &side[1 - i];
		x->src = sim_mr_reg(x->node, 1, MEM, acc);
		x->dst = sim_mr_reg(x->node, 1, MEM, acc);
		x->rcv = sim_mr_reg(x->node, 1, MEM, acc);
		x->rdst = sim_mr_reg(x->node, 1, MEM, acc);
		x->atom = sim_mr_reg(x->node, 1, 8, acc);
		x->res = sim_mr_reg(x->node, 1, MEM, acc);
		sim_fill(x->src->host, MEM, (uint32_t)seed + (uint32_t)i);
		memcpy(x->atom->host, &init, 8);
		x->model = init;
	}
	for (int b = 0; b < batches; b++) {
		bool late = sim_rand(&s) % 8 == 0;

		batch_no++;
		post_batch(&side[0], pmtu, late);
		post_batch(&side[1], pmtu, late);
		if (late) {
			sim_run(&s, 200000); /* let RNR NAKs happen */
			post_late_recvs(&side[0]);
			post_late_recvs(&side[1]);
		}
		if (!sim_run_until(&s, batch_done, NULL, 600ull * 1000 * 1000 * 1000)) {
			CHECK(!"batch did not complete");
			break;
		}
		verify_batch(&side[0]);
		verify_batch(&side[1]);
		CHECK_EQ(eng_qp_state(q[0]), IBV_QPS_RTS);
		CHECK_EQ(eng_qp_state(q[1]), IBV_QPS_RTS);
		if (check_failures != fails) {
			fprintf(stderr, "%s%s: FAILED in batch %d with seed %" PRIu64 "\n", name,
				sr ? " (selective repeat)" : "", b, seed);
			break;
		}
	}
	fprintf(stderr,
		"%s%s: seed %" PRIu64 ", %" PRIu64 " messages, %" PRIu64 "/%" PRIu64
		" packets, dropped %" PRIu64 "/%" PRIu64 ", retransmits %" PRIu64 "/%" PRIu64
		", timeouts %" PRIu64 "/%" PRIu64 ", rnr %" PRIu64 "/%" PRIu64 ", virtual %.3f s\n",
		name, sr ? " (selective repeat)" : "", seed, side[0].sent + side[1].sent,
		s.stats.entered[0], s.stats.entered[1], s.stats.dropped[0], s.stats.dropped[1],
		eng_qp_counters(q[0])[ENG_CNT_retransmits],
		eng_qp_counters(q[1])[ENG_CNT_retransmits],
		eng_qp_counters(q[0])[ENG_CNT_ack_timeouts],
		eng_qp_counters(q[1])[ENG_CNT_ack_timeouts],
		eng_qp_counters(q[0])[ENG_CNT_rnr_naks_rcvd],
		eng_qp_counters(q[1])[ENG_CNT_rnr_naks_rcvd], (double)s.now / 1e9);
	sim_fini(&s);
}

int main(void)
{
	uint64_t seed = check_seed(20261202);

	if (getenv("SIM_ONLY_JITTER")) {
		scenario("clean+jitter", seed + 2, 4096, 0, 0, 0, 3000, 16);
		return check_exit();
	}
	for (int pass = 0; pass < 2; pass++) {
		sr = pass == 1;
		scenario("loss 1%", seed, 1024, 10000, 5000, 10000, 0, 128);
		scenario("loss 10%", seed + 1, 512, 100000, 20000, 50000, 300, 128);
		scenario("clean+jitter", seed + 2, 4096, 0, 0, 0, 3000, 16);
	}
	return check_exit();
}
