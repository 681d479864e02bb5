/* iWARP engine pair over an in-memory TCP byte stream (iwsim.h). */
#include "iwsim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static void wake(void *ctx, struct eng_qp_base *qp)
{
	struct sim_node *n = ctx;
	struct iwsim *w = (struct iwsim *)(void *)n->sim; /* s is the first member */

	(void)qp;
	w->wakes[n->id]++;
}

static struct iw_qp *make_qp(struct iwsim *w, int id, const struct iwsim_cfg *c,
			     const struct iw_qp_attr *attr)
{
	struct sim_node *n = &w->s.node[id];
	struct eng_qp_init init = {0};
	struct iw_qp *qp = NULL;

	init.type = IBV_QPT_RC;
	init.qpn = 0x20u * (uint32_t)(id + 1) + 1;
	init.pd = 1;
	init.max_send_wr = c->max_send_wr ? c->max_send_wr : 256;
	init.max_send_sge = IW_MAX_SGE;
	init.max_inline = c->max_inline ? c->max_inline : ENG_MAX_INLINE;
	init.max_recv_wr = c->max_recv_wr ? c->max_recv_wr : 256;
	init.max_recv_sge = IW_MAX_SGE;
	init.srq = id == SIM_B ? c->srq_b : NULL;
	init.send_cq = &n->cq;
	init.recv_cq = &n->cq;
	init.sq_sig_all = c->sq_sig_all;
	n->env.wake = wake;
	REQUIRE(iw_qp_create(&init, &n->env, &qp) == 0);
	REQUIRE(iw_qp_set_attr(qp, attr) == 0);
	iw_qp_set_state(qp, IBV_QPS_INIT, 0);
	iw_qp_set_state(qp, IBV_QPS_RTR, 0);
	iw_qp_set_state(qp, IBV_QPS_RTS, 0);
	return qp;
}

bool iwsim_direct;

void iwsim_init(struct iwsim *w, uint64_t seed, const struct iwsim_cfg *cfg)
{
	struct iwsim_cfg c = {0};
	struct iw_qp_attr a;
	size_t cap = 1;

	if (cfg)
		c = *cfg;
	memset(w, 0, sizeof(*w));
	sim_init(&w->s, seed);
	a = c.attr;
	if (!a.ird)
		a.ird = 16;
	if (!a.ord)
		a.ord = 16;
	if (!a.mulpdu)
		a.mulpdu = iw_mulpdu(1448);
	if (!a.access)
		a.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	w->direct = iwsim_direct;
	w->tx_seg = c.tx_seg;
	w->rx_seg = c.rx_seg;
	w->max_iov = c.max_iov ? c.max_iov : IW_TX_MAX_IOV;
	while (cap < (c.pipe_cap ? c.pipe_cap : 256 * 1024))
		cap <<= 1;
	for (int d = 0; d < 2; d++) {
		w->pipe[d].buf = malloc(cap);
		REQUIRE(w->pipe[d].buf != NULL);
		w->pipe[d].cap = cap;
	}
	for (int i = 0; i < 2; i++)
		w->qp[i] = make_qp(w, i, &c, &a);
}

void iwsim_fini(struct iwsim *w)
{
	for (int i = 0; i < 2; i++) {
		iw_qp_destroy(w->qp[i]);
		free(w->pipe[i].buf);
		free(w->pipe[i].record);
	}
	sim_fini(&w->s);
}

static bool in_mr(const struct sim_node *n, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (int i = 0; i < n->nmr; i++) {
		const struct sim_mr *mr = &n->mr[i];

		if (b >= mr->host && len <= mr->len && (uint64_t)(b - mr->host) <= mr->len - len)
			return true;
	}
	return false;
}

static size_t pick(struct iwsim *w, enum iwsim_seg seg, size_t max)
{
	if (max == 0)
		return 0;
	switch (seg) {
	case IWSIM_ONE:
		return 1;
	case IWSIM_RANDOM: {
		/* Mostly small and medium pieces, sometimes everything. */
		uint64_t r = sim_rand(&w->s);
		size_t lim = (r & 3) == 0 ? max : (r & 3) == 1 ? 7 : (r & 3) == 2 ? 100 : 3000;

		if (lim > max)
			lim = max;
		return 1 + (size_t)((r >> 8) % lim);
	}
	default:
		return max;
	}
}

static void pipe_put(struct iwsim_pipe *p, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t at = p->tail & (p->cap - 1), k = p->cap - at;

		if (k > n - i)
			k = n - i;
		memcpy(p->buf + at, src + i, k);
		p->tail += k;
		i += k;
	}
	p->total += n;
	if (p->record) {
		if (p->record_len + n > p->record_cap)
			n = p->record_cap - p->record_len;
		memcpy(p->record + p->record_len, src, n);
		p->record_len += n;
	}
}

static void pipe_get(struct iwsim_pipe *p, uint8_t *dst, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t at = p->head & (p->cap - 1), k = p->cap - at;

		if (k > n - i)
			k = n - i;
		memcpy(dst + i, p->buf + at, k);
		p->head += k;
		i += k;
	}
}

/* Node d writes into its pipe. */
static bool tx_side(struct iwsim *w, int d)
{
	struct iwsim_pipe *p = &w->pipe[d];
	bool moved = false;

	while (!w->tx_hold[d] && !p->cut) {
		struct iovec iov[IW_TX_MAX_IOV];
		int k = iw_qp_tx_want(w->qp[d], w->s.now, iov, w->max_iov);
		size_t total = 0, room = p->cap - (size_t)(p->tail - p->head), n, left;

		if (k <= 0)
			break;
		for (int i = 0; i < k; i++)
			total += iov[i].iov_len;
		n = pick(w, w->tx_seg, total);
		if (n > room)
			n = room;
		if (n == 0)
			break;
		left = n;
		for (int i = 0; i < k && left; i++) {
			size_t m = iov[i].iov_len < left ? iov[i].iov_len : left;

			if (in_mr(&w->s.node[d], iov[i].iov_base, m))
				w->tx_from_mr[d] += m;
			pipe_put(p, iov[i].iov_base, m);
			left -= m;
		}
		REQUIRE(iw_qp_tx_done(w->qp[d], n) == 0);
		w->tx_calls[d]++;
		moved = true;
	}
	return moved;
}

/* Node d reads from the other node's pipe. */
static bool rx_side(struct iwsim *w, int d)
{
	struct iwsim_pipe *p = &w->pipe[1 - d];
	bool moved = false;

	while (!w->rx_hold[d] && !p->cut && p->tail != p->head) {
		void *dst;
		size_t room, n, avail = (size_t)(p->tail - p->head);
		int err = iw_qp_rx_want(w->qp[d], &dst, &room);

		if (err) {
			w->rx_err[d] = err;
			break;
		}
		n = pick(w, w->rx_seg, avail < room ? avail : room);
		pipe_get(p, dst, n); /* the recv() */
		if (in_mr(&w->s.node[d], dst, n))
			w->rx_in_mr[d] += n;
		else
			w->rx_elsewhere[d] += n;
		err = iw_qp_rx_done(w->qp[d], n, w->s.now);
		w->rx_calls[d]++;
		moved = true;
		if (err) {
			w->rx_err[d] = err;
			break;
		}
	}
	return moved;
}

bool iwsim_step(struct iwsim *w)
{
	bool moved = false;

	for (int d = 0; d < 2; d++)
		moved |= tx_side(w, d);
	for (int d = 0; d < 2; d++)
		moved |= rx_side(w, d);
	w->s.now += 1000;
	return moved;
}

uint64_t iwsim_run(struct iwsim *w, uint64_t max_rounds)
{
	uint64_t r = 0;

	while (r < max_rounds && iwsim_step(w))
		r++;
	return r;
}

size_t iwsim_drain_tx(struct iw_qp *qp, uint8_t *buf, size_t cap)
{
	size_t len = 0;

	for (;;) {
		struct iovec iov[IW_TX_MAX_IOV];
		int k = iw_qp_tx_want(qp, 0, iov, IW_TX_MAX_IOV);
		size_t total = 0;

		if (k <= 0)
			break;
		for (int i = 0; i < k; i++) {
			size_t m = iov[i].iov_len;

			if (m > cap - len)
				m = cap - len;
			memcpy(buf + len, iov[i].iov_base, m);
			len += m;
			total += iov[i].iov_len;
		}
		REQUIRE(iw_qp_tx_done(qp, total) == 0);
	}
	return len;
}

int iwsim_post_send(struct iwsim *w, int node, uint64_t wr_id, enum ibv_wr_opcode op,
		    const struct sim_mr *mr, uint64_t off, uint32_t len, uint64_t remote_va,
		    uint32_t rkey, unsigned flags, uint32_t inv_rkey)
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
	wr.wr.rdma.remote_addr = remote_va;
	wr.wr.rdma.rkey = rkey;
	wr.invalidate_rkey = inv_rkey;
	if (w->direct) {
		size_t flen = 0;
		const uint8_t *fpdu = iw_qp_post_one(w->qp[node], &wr, &flen);

		if (fpdu) {
			/* The send() right away: what TCP takes of it, the rest queued. */
			struct iwsim_pipe *p = &w->pipe[node];
			size_t room = p->cap - (size_t)(p->tail - p->head);
			size_t n = w->tx_hold[node] || p->cut ? 0 : pick(w, w->tx_seg, flen);

			REQUIRE(flen > 0 && flen <= IW_TX_ONE);
			if (n > room)
				n = room;
			pipe_put(p, fpdu, n);
			iw_qp_one_sent(w->qp[node], &wr, n);
			w->direct_taken[node]++;
			return 0;
		}
	}
	return iw_qp_post_send(w->qp[node], &wr, &bad, w->s.now);
}

int iwsim_post_recv(struct iwsim *w, int node, uint64_t wr_id, const struct sim_mr *mr,
		    uint64_t off, uint32_t len)
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
	return eng_base_post_recv(iw_qp_base(w->qp[node]), &wr, &bad);
}
