/* Simulation harness (sim.h): virtual clock, two engine nodes, a faulty link. */
#include "sim.h"

#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- PRNG: splitmix64, so a seed replays exactly ---- */

uint64_t sim_rand(struct sim *s)
{
	uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void sim_fill(void *p, size_t len, uint32_t seed)
{
	uint8_t *b = p;
	uint32_t x = seed * 2654435761u + 12345;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345;
		b[i] = (uint8_t)((x >> 16) | 1);
	}
}

/* ---- fake memory environment ---- */

static void *mem_resolve(void *ctx, uint32_t pd, uint32_t qpn, uint32_t key, bool remote,
			 uint64_t va, uint64_t len, unsigned access, int *err)
{
	struct sim_node *n = ctx;

	n->resolve_calls++;
	*err = 0;
	if (len == 0)
		return NULL;
	if (remote && obj_key_is_mw(key))
		return obj_mw_resolve(&n->mws, pd, qpn, key, va, len, access, err);
	for (int i = 0; i < n->nmr; i++) {
		struct sim_mr *mr = &n->mr[i];

		if (!mr->valid || mr->key != key)
			continue;
		if (mr->pd != pd) {
			*err = -ENOENT;
			return NULL;
		}
		if (remote ? (mr->access & access) != access
			   : (access & IBV_ACCESS_LOCAL_WRITE) &&
				 !(mr->access & IBV_ACCESS_LOCAL_WRITE)) {
			*err = -EACCES;
			return NULL;
		}
		/* Bounds, with the overflow of va + len caught before it wraps. */
		if (va < mr->iova || len > mr->len || va - mr->iova > mr->len - len) {
			*err = -ERANGE;
			return NULL;
		}
		return mr->host + (va - mr->iova);
	}
	*err = -ENOENT;
	return NULL;
}

static int mem_invalidate(void *ctx, uint32_t pd, uint32_t qpn, uint32_t rkey, bool remote)
{
	struct sim_node *n = ctx;

	if (obj_key_is_mw(rkey))
		return obj_mw_invalidate(&n->mws, pd, remote ? qpn : 0, rkey);
	if (!remote)
		return -EINVAL; /* as softrdma: registered regions are not invalidated locally */
	for (int i = 0; i < n->nmr; i++) {
		if (n->mr[i].valid && n->mr[i].key == rkey && n->mr[i].pd == pd) {
			n->mr[i].valid = false;
			return 0;
		}
	}
	return -EINVAL;
}

static int mw_bind(void *ctx, uint32_t pd, uint32_t qpn, const struct eng_mw_bind *b)
{
	struct sim_node *n = ctx;
	struct obj_mw_bind ob = {.mw_rkey = b->mw_rkey,
				 .new_rkey = b->new_rkey,
				 .addr = b->addr,
				 .length = b->length,
				 .access = b->access};
	struct obj_mr *omr = NULL;

	for (int i = 0; i < n->nmr && b->length; i++) {
		struct sim_mr *mr = &n->mr[i];

		if (!mr->valid || mr->key != b->mr_lkey)
			continue;
		mr->omr.iova = mr->iova;
		mr->omr.addr = mr->host;
		mr->omr.length = mr->len;
		mr->omr.access = mr->access;
		mr->omr.pd = mr->pd;
		mr->omr.key = mr->key;
		omr = &mr->omr;
	}
	if (b->length && !omr)
		return -EINVAL;
	return obj_mw_bind(&n->mws, omr, pd, qpn, &ob);
}

struct obj_mw *sim_mw_alloc(struct sim_node *n, uint32_t pd, enum ibv_mw_type type)
{
	struct obj_mw *mw;

	if (n->nmw >= SIM_MAX_MW) {
		fprintf(stderr, "sim: too many MWs\n");
		abort();
	}
	mw = &n->mw[n->nmw++];
	mw->type = (uint8_t)type;
	mw->pd = pd;
	if (obj_mw_add(&n->mws, mw) != 0)
		abort();
	return mw;
}

int sim_post_bind(struct sim_node *n, struct eng_qp *qp, uint64_t wr_id, const struct obj_mw *mw,
		  const struct sim_mr *mr, uint64_t off, uint64_t len, unsigned access,
		  unsigned flags, uint32_t *new_rkey)
{
	struct ibv_mw ibmw = {.rkey = mw->key, .type = mw->type};
	struct ibv_mr ibmr = {.lkey = mr ? mr->key : 0};
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;

	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = (int)flags;
	wr.bind_mw.mw = &ibmw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->key);
	wr.bind_mw.bind_info.mr = mr ? &ibmr : NULL;
	wr.bind_mw.bind_info.addr = mr ? sim_va(mr, off) : 0;
	wr.bind_mw.bind_info.length = len;
	wr.bind_mw.bind_info.mw_access_flags = (int)access;
	if (new_rkey)
		*new_rkey = wr.bind_mw.rkey;
	return eng_qp_post_send(qp, &wr, &bad, n->sim->now);
}

static void wake(void *ctx, struct eng_qp_base *qp)
{
	(void)ctx;
	(void)qp;
}

static void event(void *ctx, struct eng_qp_base *qp, enum ibv_event_type ev)
{
	struct sim_node *n = ctx;

	(void)qp;
	if (n->nevents < SIM_MAX_EVENTS)
		n->events[n->nevents++] = ev;
}

bool sim_has_event(const struct sim_node *n, enum ibv_event_type ev)
{
	for (int i = 0; i < n->nevents; i++)
		if (n->events[i] == ev)
			return true;
	return false;
}

struct sim_mr *sim_mr_reg(struct sim_node *n, uint32_t pd, uint64_t len, unsigned access)
{
	struct sim_mr *mr;

	if (n->nmr >= SIM_MAX_MR) {
		fprintf(stderr, "sim: too many MRs\n");
		abort();
	}
	mr = &n->mr[n->nmr];
	mr->host = aligned_alloc(64, (len + 64) & ~(uint64_t)63);
	if (!mr->host)
		abort();
	memset(mr->host, 0, len);
	mr->valid = true;
	mr->key = 0x1000u * (uint32_t)(n->id + 1) + (uint32_t)n->nmr + 7;
	mr->pd = pd;
	/* A fake IOVA, 8-byte aligned like the host memory, unrelated to the host address. */
	mr->iova = 0x100000000ull * (uint64_t)(n->nmr + 1) + 0x40000000ull * (uint64_t)n->id;
	mr->len = len;
	mr->access = access;
	n->nmr++;
	return mr;
}

/* ---- setup ---- */

void sim_init(struct sim *s, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->rng = seed;
	s->trace = getenv("SIM_TRACE") != NULL;
	for (int d = 0; d < 2; d++)
		s->link[d].latency_ns = 1000;
	for (int i = 0; i < 2; i++) {
		struct sim_node *n = &s->node[i];

		n->sim = s;
		n->id = i;
		n->env.ctx = n;
		n->env.mem_resolve = mem_resolve;
		n->env.mem_invalidate = mem_invalidate;
		n->env.mw_bind = mw_bind;
		n->env.wake = wake;
		n->env.event = event;
		if (eng_cq_init(&n->cq, 4096) || obj_mw_table_init(&n->mws, SIM_MAX_MW + 1))
			abort();
	}
}

void sim_fini(struct sim *s)
{
	for (int i = 0; i < 2; i++) {
		struct sim_node *n = &s->node[i];

		for (int q = 0; q < n->nqp; q++)
			eng_qp_destroy(n->qp[q]);
		for (int m = 0; m < n->nmr; m++)
			free(n->mr[m].host);
		obj_mw_table_fini(&n->mws);
		eng_cq_fini(&n->cq);
	}
	for (size_t i = 0; i < s->nheap; i++)
		free(s->heap[i].bytes);
	free(s->heap);
}

static struct eng_qp *make_qp(struct sim_node *n, const struct sim_qp_cfg *c, struct eng_rq *srq)
{
	struct eng_qp_init init = {0};
	struct eng_qp *qp;

	init.type = IBV_QPT_RC;
	init.qpn = 0x10u * (uint32_t)(n->id + 1) + (uint32_t)n->nqp + 1;
	init.pd = c->pd;
	init.max_send_wr = c->max_send_wr;
	init.max_send_sge = ENG_MAX_SGE;
	init.max_inline = c->max_inline;
	init.max_recv_wr = c->max_recv_wr;
	init.max_recv_sge = ENG_MAX_SGE;
	init.srq = srq;
	init.send_cq = &n->cq;
	init.recv_cq = &n->cq;
	init.sq_sig_all = c->sq_sig_all;
	if (eng_qp_create(&init, &n->env, &qp) != 0 || n->nqp >= SIM_MAX_QP) {
		fprintf(stderr, "sim: eng_qp_create failed\n");
		abort();
	}
	n->qp[n->nqp++] = qp;
	return qp;
}

void sim_connect(struct sim *s, const struct sim_qp_cfg *cfg, struct eng_qp **a, struct eng_qp **b)
{
	struct sim_qp_cfg c = cfg ? *cfg : (struct sim_qp_cfg){0};
	struct eng_qp *q[2];
	struct eng_qp_attr at[2];

	if (!c.pmtu)
		c.pmtu = 1024;
	if (!c.psn_a)
		c.psn_a = 0x100;
	if (!c.psn_b)
		c.psn_b = 0x200;
	if (!c.timeout)
		c.timeout = 10;
	if (!c.retry_cnt)
		c.retry_cnt = 7;
	if (!c.rnr_retry)
		c.rnr_retry = 7;
	if (!c.min_rnr_timer)
		c.min_rnr_timer = 1;
	if (!c.no_defaults_rd_atomic) {
		if (!c.max_rd_atomic)
			c.max_rd_atomic = 16;
		if (!c.max_dest_rd_atomic)
			c.max_dest_rd_atomic = 16;
	}
	if (!c.access && !c.no_access)
		c.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
	if (!c.max_send_wr)
		c.max_send_wr = 512;
	if (!c.max_recv_wr)
		c.max_recv_wr = 512;
	if (!c.max_inline)
		c.max_inline = ENG_MAX_INLINE;
	if (!c.pd)
		c.pd = 1;
	q[0] = make_qp(&s->node[0], &c, NULL);
	q[1] = make_qp(&s->node[1], &c, c.srq_b);
	for (int i = 0; i < 2; i++) {
		memset(&at[i], 0, sizeof(at[i]));
		at[i].dest_qpn = eng_qp_num(q[1 - i]);
		at[i].sq_psn = i == 0 ? c.psn_a : c.psn_b;
		at[i].rq_psn = i == 0 ? c.psn_b : c.psn_a;
		at[i].pmtu = c.pmtu;
		at[i].access = c.access;
		at[i].timeout = c.timeout;
		at[i].retry_cnt = c.retry_cnt;
		at[i].rnr_retry = c.rnr_retry;
		at[i].min_rnr_timer = c.min_rnr_timer;
		at[i].max_rd_atomic = c.max_rd_atomic;
		at[i].max_dest_rd_atomic = c.max_dest_rd_atomic;
		at[i].pkey = 0xFFFF;
		eng_qp_set_state(q[i], IBV_QPS_INIT, s->now);
		eng_qp_set_attr(q[i], &at[i]);
		eng_qp_set_state(q[i], IBV_QPS_RTR, s->now);
		eng_qp_set_state(q[i], IBV_QPS_RTS, s->now);
	}
	*a = q[0];
	*b = q[1];
}

void sim_rule(struct sim *s, int dir, uint64_t index, enum sim_action action, uint64_t delay_ns)
{
	if (s->nrules >= SIM_MAX_RULES)
		abort();
	s->rules[s->nrules++] = (struct sim_rule){dir, index, action, delay_ns};
}

/* ---- the link: a min-heap of packets in flight by (delivery time, sequence) ---- */

static bool earlier(const struct sim_inflight *a, const struct sim_inflight *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void heap_push(struct sim *s, struct sim_inflight *p)
{
	size_t i;

	if (s->nheap == s->capheap) {
		s->capheap = s->capheap ? s->capheap * 2 : 256;
		s->heap = realloc(s->heap, s->capheap * sizeof(*s->heap));
		if (!s->heap)
			abort();
	}
	i = s->nheap++;
	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!earlier(p, &s->heap[parent]))
			break;
		s->heap[i] = s->heap[parent];
		i = parent;
	}
	s->heap[i] = *p;
}

static struct sim_inflight heap_pop(struct sim *s)
{
	struct sim_inflight top = s->heap[0], last = s->heap[--s->nheap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= s->nheap)
			break;
		if (c + 1 < s->nheap && earlier(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!earlier(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	if (s->nheap)
		s->heap[i] = last;
	return top;
}

static void trace_pkt(struct sim *s, const char *what, int dir, const struct roce_pkt *p)
{
	const struct roce_opinfo *oi = roce_opinfo(p->bth.opcode);

	if (!s->trace)
		return;
	fprintf(stderr, "t=%10" PRIu64 " %s %s %-30s psn=%06x%s len=%u", s->now, what,
		dir == SIM_AB ? "A->B" : "B->A", oi ? oi->name : "?", p->bth.psn,
		p->bth.ackreq ? " A" : "", p->payload_len);
	if (oi && (oi->hdrs & ROCE_HDR_AETH))
		fprintf(stderr, " syn=%02x msn=%u", p->aeth.syndrome, p->aeth.msn);
	fprintf(stderr, "\n");
}

static void enqueue_copy(struct sim *s, int dir, const struct roce_pkt *p, uint64_t at)
{
	struct sim_inflight f = {0};

	f.at = at;
	f.seq = s->seq++;
	f.dir = dir;
	if (s->wire) {
		size_t n = roce_build(p, s->wbuf, sizeof(s->wbuf));

		if (n == 0) {
			fprintf(stderr, "sim: roce_build failed for opcode %#x\n", p->bth.opcode);
			abort();
		}
		f.bytes = malloc(n);
		memcpy(f.bytes, s->wbuf, n);
		f.nbytes = n;
	} else {
		f.pkt = *p;
		f.bytes = malloc(p->payload_len ? p->payload_len : 1);
		if (!f.bytes)
			abort();
		if (p->payload_len)
			memcpy(f.bytes, p->payload, p->payload_len);
		f.pkt.payload = f.bytes;
		f.nbytes = p->payload_len;
	}
	heap_push(s, &f);
}

static void link_send(struct sim *s, int dir, const struct roce_pkt *p)
{
	struct sim_link_cfg *l = &s->link[dir];
	uint64_t index = s->stats.entered[dir]++;
	enum sim_action act = SIM_PASS;
	uint64_t delay = 0;
	uint64_t at;

	for (int i = 0; i < s->nrules; i++) {
		if (s->rules[i].dir == dir && s->rules[i].index == index) {
			act = s->rules[i].action;
			delay = s->rules[i].delay_ns;
		}
	}
	if (act == SIM_PASS) {
		if (l->drop_ppm && sim_rand(s) % 1000000 < l->drop_ppm)
			act = SIM_DROP;
		else if (l->dup_ppm && sim_rand(s) % 1000000 < l->dup_ppm)
			act = SIM_DUP, delay = l->reorder_ns ? sim_rand(s) % l->reorder_ns : 0;
		else if (l->reorder_ppm && l->reorder_ns && sim_rand(s) % 1000000 < l->reorder_ppm)
			act = SIM_DELAY, delay = sim_rand(s) % l->reorder_ns;
	}
	if (s->tap)
		act = s->tap(s, dir, index, p, act, &delay, s->tap_arg);
	at = s->now + l->latency_ns + (l->jitter_ns ? sim_rand(s) % l->jitter_ns : 0);
	switch (act) {
	case SIM_DROP:
		s->stats.dropped[dir]++;
		trace_pkt(s, "drop", dir, p);
		return;
	case SIM_DUP:
		s->stats.duplicated[dir]++;
		trace_pkt(s, "dup ", dir, p);
		enqueue_copy(s, dir, p, at);
		enqueue_copy(s, dir, p, at + delay);
		return;
	case SIM_DELAY:
		s->stats.delayed[dir]++;
		trace_pkt(s, "dly ", dir, p);
		enqueue_copy(s, dir, p, at + delay);
		return;
	default:
		trace_pkt(s, "send", dir, p);
		enqueue_copy(s, dir, p, at);
		return;
	}
}

static void deliver(struct sim *s, struct sim_inflight *f)
{
	struct sim_node *n = &s->node[f->dir == SIM_AB ? SIM_B : SIM_A];
	struct roce_pkt pkt;

	if (s->wire) {
		enum roce_parse_err e = roce_parse(f->bytes, f->nbytes, &pkt);

		if (e != ROCE_ERR_NONE) {
			fprintf(stderr, "sim: roce_parse: %s\n", roce_err_name(e));
			abort();
		}
	} else {
		pkt = f->pkt;
	}
	trace_pkt(s, "recv", f->dir, &pkt);
	for (int i = 0; i < n->nqp; i++) {
		if (eng_qp_num(n->qp[i]) == pkt.bth.dqpn) {
			s->stats.delivered[f->dir]++;
			eng_qp_input(n->qp[i], &pkt, s->now);
			return;
		}
	}
	s->stats.no_qp[f->dir]++;
}

/* ---- stepping ---- */

bool sim_step(struct sim *s)
{
	uint64_t next = UINT64_MAX;
	struct roce_pkt out;

	while (s->nheap && s->heap[0].at <= s->now) {
		struct sim_inflight f = heap_pop(s);

		deliver(s, &f);
		free(f.bytes);
	}
	for (int i = 0; i < 2; i++) {
		struct sim_node *n = &s->node[i];

		for (int q = 0; q < n->nqp; q++)
			if (eng_qp_deadline(n->qp[q]) <= s->now) {
				if (s->trace)
					fprintf(stderr, "t=%10" PRIu64 " timer %c qp %#x\n", s->now,
						'A' + i, eng_qp_num(n->qp[q]));
				eng_qp_timer(n->qp[q], s->now);
			}
	}
	for (int i = 0; i < 2; i++) {
		struct sim_node *n = &s->node[i];

		for (int q = 0; q < n->nqp; q++) {
			int r;

			while ((r = s->ref_min ? eng_qp_output_ref(n->qp[q], s->now, &out, s->buf,
								   4096, NULL, s->ref_min)
					       : eng_qp_output(n->qp[q], s->now, &out, s->buf,
							       4096)) == 1) {
				if (out.payload_len && out.payload != s->buf)
					s->stats.ref_out++;
				link_send(s, i == SIM_A ? SIM_AB : SIM_BA, &out);
			}
			if (r < 0)
				abort();
		}
	}
	if (s->nheap)
		next = s->heap[0].at;
	for (int i = 0; i < 2; i++) {
		struct sim_node *n = &s->node[i];

		for (int q = 0; q < n->nqp; q++) {
			uint64_t d = eng_qp_deadline(n->qp[q]);

			if (d < next)
				next = d;
		}
	}
	if (next == UINT64_MAX)
		return false;
	if (next > s->now)
		s->now = next;
	return true;
}

bool sim_run(struct sim *s, uint64_t max_ns)
{
	uint64_t end = s->now + max_ns;

	while (s->now <= end)
		if (!sim_step(s))
			return true;
	return false;
}

bool sim_run_until(struct sim *s, bool (*done)(struct sim *s, void *arg), void *arg,
		   uint64_t max_ns)
{
	uint64_t end = s->now + max_ns;

	while (!done(s, arg) && s->now <= end)
		if (!sim_step(s))
			break;
	return done(s, arg);
}

int sim_poll(struct sim_node *n, struct ibv_wc *wc, int max)
{
	return eng_cq_poll(&n->cq, max, wc);
}

int sim_post_send(struct sim_node *n, struct eng_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		  const struct sim_mr *mr, uint64_t off, uint32_t len, uint64_t remote_va,
		  uint32_t rkey, unsigned flags)
{
	struct ibv_sge sge = {0};
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad = NULL;

	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	if (mr) {
		sge.addr = (flags & IBV_SEND_INLINE) ? (uint64_t)(uintptr_t)(mr->host + off)
						     : sim_va(mr, off);
		sge.length = len;
		sge.lkey = mr->key;
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = remote_va;
		wr.wr.atomic.rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = remote_va;
		wr.wr.rdma.rkey = rkey;
	}
	return eng_qp_post_send(qp, &wr, &bad, n->sim->now);
}

int sim_post_recv(struct eng_qp *qp, uint64_t wr_id, const struct sim_mr *mr, uint64_t off,
		  uint32_t len)
{
	struct ibv_sge sge = {0};
	struct ibv_recv_wr wr = {0};
	const struct ibv_recv_wr *bad = NULL;

	wr.wr_id = wr_id;
	if (mr) {
		sge.addr = sim_va(mr, off);
		sge.length = len;
		sge.lkey = mr->key;
		wr.sg_list = &sge;
		wr.num_sge = 1;
	}
	return eng_base_post_recv(eng_qp_base(qp), &wr, &bad);
}

static const char *status_name(enum ibv_wc_status st)
{
	static const char *const names[] = {
	    "SUCCESS",	      "LOC_LEN_ERR",	   "LOC_QP_OP_ERR",  "LOC_EEC_OP_ERR",
	    "LOC_PROT_ERR",   "WR_FLUSH_ERR",	   "MW_BIND_ERR",    "BAD_RESP_ERR",
	    "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",   "REM_ACCESS_ERR", "REM_OP_ERR",
	    "RETRY_EXC_ERR",  "RNR_RETRY_EXC_ERR",
	};

	return (unsigned)st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

int sim_post_atomic(struct sim_node *n, struct eng_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		    const struct sim_mr *mr, uint64_t off, uint64_t remote_va, uint32_t rkey,
		    uint64_t compare_add, uint64_t swap, unsigned flags)
{
	struct ibv_sge sge = {0};
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad = NULL;

	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.send_flags = flags;
	sge.addr = sim_va(mr, off);
	sge.length = 8;
	sge.lkey = mr->key;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.atomic.remote_addr = remote_va;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	return eng_qp_post_send(qp, &wr, &bad, n->sim->now);
}

bool sim_expect_wc_at(const char *file, int line, struct sim_node *n, uint64_t wr_id,
		      enum ibv_wc_status status, enum ibv_wc_opcode opcode, long long byte_len)
{
	struct ibv_wc wc;

	check_count++;
	if (sim_poll(n, &wc, 1) != 1) {
		check_failures++;
		fprintf(stderr,
			"%s:%d: node %c: expected a completion for wr_id %" PRIu64 ", CQ empty\n",
			file, line, 'A' + n->id, wr_id);
		return false;
	}
	if (wc.wr_id != wr_id || wc.status != status ||
	    (status == IBV_WC_SUCCESS && wc.opcode != opcode) ||
	    (byte_len >= 0 && wc.byte_len != (uint32_t)byte_len)) {
		check_failures++;
		fprintf(stderr,
			"%s:%d: node %c: completion wr_id %" PRIu64 " status %s opcode %d "
			"byte_len %u; expected wr_id %" PRIu64
			" status %s opcode %d byte_len %lld\n",
			file, line, 'A' + n->id, wc.wr_id, status_name(wc.status), wc.opcode,
			wc.byte_len, wr_id, status_name(status), opcode, byte_len);
	}
	return true;
}
