/* Responder: inbound requests (rxe_resp.c's role), in three steps per packet (STYLE.md 4):
 * classify by PSN (in sequence / duplicate / gap), validate everything (opcode sequence,
 * operation enabled, resources, lengths, keys and bounds through env->mem_resolve), then
 * apply (placement, receive completions, responder resources, responses). A packet refused
 * before "apply" leaves the QP unchanged, except that a fatal error (class C, spec 5.4) moves
 * it to ERR with a NAK.
 *
 * Responses leave in PSN order through a fixed queue of jobs (ACK / NAK / atomic ACK / read
 * response range), so an ACK for a later request never overtakes the responses to an earlier
 * READ (which the requester would take as an implicit NAK). Consecutive ACKs coalesce. */
#include "engine/eng_int.h"

#define SYND_ACK (ROCE_AETH_ACK | ROCE_AETH_CREDITS_UNLIMITED)

void eng_resp_reset(struct eng_qp *qp)
{
	uint32_t nres = qp->resp.nres;

	memset(&qp->resp, 0, sizeof(qp->resp));
	qp->resp.nres = nres;
	if (qp->res_cap)
		memset(qp->res, 0, qp->res_cap * sizeof(*qp->res));
	if (qp->sr)
		eng_sr_resp_reset(qp->sr);
}

bool eng_resp_pending(const struct eng_qp *qp)
{
	return qp->resp.q_head != qp->resp.q_tail;
}

void eng_resp_drop_data(struct eng_qp *qp)
{
	uint32_t out = qp->resp.q_head;

	if (qp->resp.keep_queue)
		return;

	for (uint32_t i = qp->resp.q_head; i != qp->resp.q_tail; i++) {
		struct eng_job *j = &qp->respq[i & qp->respq_mask];

		if (j->type != ENG_JOB_READ)
			qp->respq[out++ & qp->respq_mask] = *j;
	}
	qp->resp.q_tail = out;
}

/* Where the receive side of a request is: the QP's receive queue (or SRQ), receive CQ and PD;
 * on an XRC target QP, the XRC SRQ its XRCETH names and that SRQ's CQ and PD (IBA 9.8.x). */
struct rside {
	struct eng_rq *rq;
	struct eng_cq *cq;
	uint32_t pd;
};

static bool is_xrc_tgt(const struct eng_qp *qp)
{
	return qp->base.init.type == IBV_QPT_XRC_RECV;
}

/* Fills *rs for a request naming XRC SRQ `srqn` (ignored but on XRC target QPs). Returns false
 * if the QP is an XRC target and `srqn` is no XRC SRQ of its domain (an SRQ of another domain
 * is refused like one that does not exist). */
static bool rside_of(const struct eng_qp *qp, uint32_t srqn, struct rside *rs)
{
	struct eng_rq *rq;

	if (!is_xrc_tgt(qp)) {
		rs->rq = qp->base.rq;
		rs->cq = qp->base.init.recv_cq;
		rs->pd = qp->base.init.pd;
		return true;
	}
	rq = qp->base.env.xsrq_lookup ? qp->base.env.xsrq_lookup(qp->base.env.ctx, srqn) : NULL;
	if (!rq || !rq->xrcd || rq->xrcd != qp->base.init.xrcd || !rq->cq)
		return false;
	rs->rq = rq;
	rs->cq = rq->cq;
	rs->pd = rq->pd;
	return true;
}

/* The response opcode: RC's, or XRC's on an XRC target QP (IBA 9.2). */
static uint8_t resp_op(const struct eng_qp *qp, uint8_t rc_opcode)
{
	return is_xrc_tgt(qp) ? (uint8_t)(rc_opcode | ROCE_OP_XRC) : rc_opcode;
}

void eng_resp_flush_held(struct eng_qp *qp, enum ibv_wc_status status)
{
	struct ibv_wc wc = {0};
	struct rside rs;

	if (!qp->resp.have_wqe)
		return;
	qp->resp.have_wqe = false;
	/* XRC: the CQ of the SRQ the WQE came from, unless that SRQ is gone. */
	if (!rside_of(qp, qp->resp.msg_srqn, &rs))
		return;
	wc.wr_id = qp->resp.wqe.wr_id;
	wc.status = status;
	wc.opcode = IBV_WC_RECV;
	wc.src_qp = qp->attr.dest_qpn;
	eng_base_complete(&qp->base, rs.cq, &wc, false);
}

/* ---- the output queue ---- */

static uint32_t q_len(const struct eng_qp *qp)
{
	return qp->resp.q_tail - qp->resp.q_head;
}

static struct eng_job *q_tail_job(struct eng_qp *qp)
{
	if (q_len(qp) == 0)
		return NULL;
	return &qp->respq[(qp->resp.q_tail - 1) & qp->respq_mask];
}

static bool ack_coalesces(struct eng_qp *qp)
{
	const struct eng_job *t = q_tail_job(qp);

	return t && t->type == ENG_JOB_ACK && t->syndrome == SYND_ACK;
}

/* The last slot is kept for a fatal NAK, which must never be lost. */
static bool q_room(struct eng_qp *qp)
{
	return q_len(qp) < qp->respq_mask;
}

static struct eng_job *q_push(struct eng_qp *qp)
{
	struct eng_job *j = &qp->respq[qp->resp.q_tail & qp->respq_mask];

	memset(j, 0, sizeof(*j));
	qp->resp.q_tail++;
	j->msn = qp->resp.msn;
	return j;
}

/* Queues an ACK or NAK. A plain ACK replaces a plain ACK still waiting at the tail (an ACK
 * for PSN n covers every earlier PSN, spec 5.1); NAKs are never merged. The caller checked
 * room (q_room, or ack_coalesces for a plain ACK). */
static void enqueue_ack(struct eng_qp *qp, uint8_t syndrome, uint32_t psn)
{
	struct eng_job *j;

	if (syndrome == SYND_ACK && ack_coalesces(qp)) {
		j = q_tail_job(qp);
		if (psn_cmp(psn, j->psn) >= 0) {
			j->psn = psn;
			j->msn = qp->resp.msn;
		}
		return;
	}
	j = q_push(qp);
	j->type = ENG_JOB_ACK;
	j->syndrome = syndrome;
	j->psn = psn;
}

bool eng_resp_nak(struct eng_qp *qp, uint8_t syndrome, uint32_t psn)
{
	if (!q_room(qp))
		return false;
	enqueue_ack(qp, syndrome, psn);
	return true;
}

static bool ack_room(struct eng_qp *qp)
{
	return ack_coalesces(qp) || q_room(qp);
}

/* ---- errors ---- */

/* Class C errors (spec 5.4): the receive WQE in use, if any, completes with `recv_status`;
 * the QP goes to ERR (flushing the rest) and the only response still sent is the NAK. */
static void fatal(struct eng_qp *qp, enum eng_err err, uint32_t psn, enum ibv_wc_status recv_status)
{
	enum ibv_event_type ev = IBV_EVENT_QP_FATAL;

	if (recv_status != IBV_WC_SUCCESS)
		eng_resp_flush_held(qp, recv_status);
	if (err == ENG_ERR_INVALID_REQ)
		ev = IBV_EVENT_QP_REQ_ERR;
	else if (err == ENG_ERR_REMOTE_ACCESS)
		ev = IBV_EVENT_QP_ACCESS_ERR;
	ENG_INC(qp, naks_sent);
	/* Responses to earlier requests still go out first (rxe sends them before it even looks
	 * at the next request); then the NAK. */
	qp->resp.keep_queue = true;
	eng_qp_to_err(qp, ev, true);
	if (ack_coalesces(qp)) /* the NAK covers an ACK waiting at the tail */
		qp->resp.q_tail--;
	enqueue_ack(qp, eng_nak_syndrome(err), psn);
}

/* Takes the oldest receive WQE of `rq` into resp.wqe (an SRQ slot is free again at once);
 * srqn: the XRC SRQ it is (0 if none). */
static void take_wqe_from(struct eng_qp *qp, struct eng_rq *rq, uint32_t srqn)
{
	qp->resp.wqe = *eng_rq_peek(rq);
	eng_rq_pop(rq);
	qp->resp.have_wqe = true;
	qp->resp.offset = 0;
	qp->resp.msg_srqn = srqn;
}

static void take_wqe(struct eng_qp *qp)
{
	take_wqe_from(qp, qp->base.rq, 0);
}

/* ---- duplicates (spec 5.6, IBA 9.7.5.1.3) ---- */

static struct eng_res *find_res(struct eng_qp *qp, uint8_t type, uint32_t psn)
{
	for (uint32_t i = 0; i < qp->resp.nres; i++) {
		struct eng_res *r = &qp->res[i];

		if (r->type == type && psn_cmp(psn, r->first_psn) >= 0 &&
		    psn_cmp(psn, r->last_psn) <= 0)
			return r;
	}
	return NULL;
}

static void duplicate(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	struct eng_res *r;
	struct eng_job *j;

	ENG_INC(qp, dup_requests);
	switch (oi->kind) {
	case ROCE_KIND_SEND:
	case ROCE_KIND_WRITE:
		/* Not executed again; re-acknowledge up to the last PSN accepted, whatever the
		 * AckReq bit (IBA C9-105). */
		if (!ack_room(qp)) {
			ENG_INC(qp, drop_resp_busy);
			return;
		}
		enqueue_ack(qp, SYND_ACK, psn_add(qp->resp.psn, PSN_MASK));
		break;
	case ROCE_KIND_READ_REQ: {
		uint64_t va = pkt->reth.va, len = pkt->reth.dma_len;
		int err = 0;

		/* Re-executed if it asks for the remembered region or a part of it, with the same
		 * key; the key is checked again, as memory may have been deregistered. */
		r = find_res(qp, ENG_RES_READ, psn);
		if (!r || pkt->reth.rkey != r->rkey || va < r->va || va > UINT64_MAX - len ||
		    va + len > r->va + r->length ||
		    (len &&
		     !qp->base.env.mem_resolve(qp->base.env.ctx, r->pd, qp->base.init.qpn, r->rkey,
					       true, va, len, IBV_ACCESS_REMOTE_READ, &err))) {
			ENG_INC(qp, drop_dup_unmatched);
			return;
		}
		if (!q_room(qp)) {
			ENG_INC(qp, drop_resp_busy);
			return;
		}
		j = q_push(qp);
		j->type = ENG_JOB_READ;
		j->psn = psn;
		j->va = va;
		j->rkey = r->rkey;
		j->pd = r->pd;
		j->length = (uint32_t)len;
		j->from_first = psn == r->first_psn;
		ENG_INC(qp, dup_reads_replayed);
		break;
	}
	case ROCE_KIND_ATOMIC:
		/* Never executed twice: the saved original value is sent again. */
		r = find_res(qp, ENG_RES_ATOMIC, psn);
		if (!r) {
			ENG_INC(qp, drop_dup_unmatched);
			return;
		}
		if (!q_room(qp)) {
			ENG_INC(qp, drop_resp_busy);
			return;
		}
		j = q_push(qp);
		j->type = ENG_JOB_ATOMIC_ACK;
		j->psn = psn;
		j->orig = r->orig;
		ENG_INC(qp, dup_atomics_replayed);
		break;
	default:
		return;
	}
	ENG_INC(qp, rx_packets);
}

/* ---- in-sequence requests ---- */

static uint64_t do_atomic(void *host, uint8_t opcode, uint64_t swap_add, uint64_t compare)
{
	bool cmp_swap = (opcode & ROCE_OP_MASK) == ROCE_RC_CMP_SWAP; /* RC or XRC */
	uint64_t orig;

	if (((uintptr_t)host & 7) == 0) {
		/* Host-aligned: atomic against other CPUs touching the same memory. */
		uint64_t *p = host;

		if (cmp_swap) {
			orig = compare;
			__atomic_compare_exchange_n(p, &orig, swap_add, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
			return orig;
		}
		return __atomic_fetch_add(p, swap_add, __ATOMIC_SEQ_CST);
	}
	memcpy(&orig, host, 8);
	if (cmp_swap) {
		if (orig == compare)
			memcpy(host, &swap_add, 8);
	} else {
		uint64_t v = orig + swap_add;

		memcpy(host, &v, 8);
	}
	return orig;
}

static struct eng_res *res_next(struct eng_qp *qp)
{
	struct eng_res *r = &qp->res[qp->resp.res_next];

	qp->resp.res_next = (qp->resp.res_next + 1) % qp->resp.nres;
	memset(r, 0, sizeof(*r));
	return r;
}

/* Opcode sequence (rxe check_op_seq; spec 3): inside a SEND only SEND MIDDLE / LAST*, inside
 * a WRITE only WRITE MIDDLE / LAST*, between messages only FIRST / ONLY opcodes. */
static bool opseq_ok(const struct eng_qp *qp, const struct roce_opinfo *oi)
{
	if (qp->resp.in_send)
		return oi->kind == ROCE_KIND_SEND && !(oi->pos & ROCE_POS_FIRST);
	if (qp->resp.in_write)
		return oi->kind == ROCE_KIND_WRITE && !(oi->pos & ROCE_POS_FIRST);
	return oi->pos & ROCE_POS_FIRST;
}

/* The QP's access flags enable the operation (rxe check_op_valid); READ / ATOMIC also need
 * responder resources. */
static bool op_enabled(const struct eng_qp *qp, const struct roce_opinfo *oi)
{
	switch (oi->kind) {
	case ROCE_KIND_WRITE:
		return qp->attr.access & IBV_ACCESS_REMOTE_WRITE;
	case ROCE_KIND_READ_REQ:
		return (qp->attr.access & IBV_ACCESS_REMOTE_READ) && qp->resp.nres;
	case ROCE_KIND_ATOMIC:
		return (qp->attr.access & IBV_ACCESS_REMOTE_ATOMIC) && qp->resp.nres;
	default:
		return true;
	}
}

/* Payload size by position (rxe check_length; spec 3). */
static bool payload_len_ok(const struct eng_qp *qp, const struct roce_opinfo *oi, uint32_t len)
{
	uint32_t pmtu = qp->attr.pmtu;

	if (!oi->payload)
		return len == 0;
	switch (oi->pos) {
	case ROCE_POS_FIRST:
	case ROCE_POS_MIDDLE:
		return len == pmtu;
	case ROCE_POS_LAST:
		return len >= 1 && len <= pmtu;
	default:
		return len <= pmtu;
	}
}

/* ---- a request in sequence: the checks, then the effects (rxe's responder steps) ---- */

/* What the checks of a request in sequence find, for its effects to use. */
struct req_in {
	const struct roce_opinfo *oi;
	const struct roce_pkt *pkt;
	uint32_t psn, len;
	bool first, last;
	bool wants_ack; /* SEND / WRITE with AckReq: acknowledged once applied */
	uint32_t srqn;	/* XRC: the SRQ of the message (its first packet's) */
	struct rside rs;
	const struct eng_rwqe
	    *rw;       /* the receive WQE a first SEND or a WRITE with immediate takes */
	uint8_t *host; /* WRITE, ATOMIC: the target's host address */
	uint64_t va;   /* WRITE: where this packet's payload goes, under rkey */
	uint32_t rkey;
	int niov; /* SEND: where its payload goes */
	struct eng_iov iov[ENG_MAX_SGE];
};

/* Each check answers a request that fails it (a fatal NAK, an RNR NAK, or a drop, counted) and
 * returns false; a request that passes them all is applied. */

/* The opcode fits the message in progress and the QP allows it (rxe check_op_seq,
 * check_op_valid). */
static bool check_op(struct eng_qp *qp, const struct req_in *r)
{
	if (opseq_ok(qp, r->oi) && op_enabled(qp, r->oi))
		return true;
	ENG_INC(qp, drop_bad_opcode);
	fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_REM_INV_REQ_ERR);
	return false;
}

/* XRC: every request names an XRC SRQ of the target QP's domain; one that does not is a remote
 * access error (class C: NAK, the QP goes to ERR), as the XRC rxe patches and hardware answer
 * it. Other QPs: their own receive side. */
static bool check_rside(struct eng_qp *qp, struct req_in *r)
{
	if (rside_of(qp, r->pkt->xrc_srqn, &r->rs) && rside_of(qp, r->srqn, &r->rs))
		return true;
	ENG_INC(qp, drop_xrc_srq);
	fatal(qp, ENG_ERR_REMOTE_ACCESS, r->psn, IBV_WC_SUCCESS);
	return false;
}

/* Room for the response it needs (else dropped: the requester sends it again), and the receive
 * WQE it consumes (else an RNR NAK, spec 5.4; rxe check_resource). */
static bool check_resources(struct eng_qp *qp, struct req_in *r)
{
	uint8_t kind = r->oi->kind;

	if ((r->wants_ack && !ack_room(qp)) ||
	    ((kind == ROCE_KIND_READ_REQ || kind == ROCE_KIND_ATOMIC) && !q_room(qp))) {
		ENG_INC(qp, drop_resp_busy);
		return false;
	}
	if (!((kind == ROCE_KIND_SEND && r->first) ||
	      (kind == ROCE_KIND_WRITE && r->oi->imm && r->last)))
		return true;
	r->rw = eng_rq_peek(r->rs.rq);
	if (r->rw)
		return true;
	/* No receive WQE: RNR NAK, packet dropped, QP unchanged (spec 5.4). */
	if (eng_resp_nak(qp, ROCE_AETH_RNR_NAK | qp->attr.min_rnr_timer, r->psn))
		ENG_INC(qp, rnr_naks_sent);
	else
		ENG_INC(qp, drop_resp_busy);
	return false;
}

/* The payload's length fits its place in the message (rxe check_length). */
static bool check_length(struct eng_qp *qp, const struct req_in *r)
{
	if (payload_len_ok(qp, r->oi, r->len))
		return true;
	ENG_INC(qp, drop_bad_length);
	fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_REM_INV_REQ_ERR);
	return false;
}

/* SEND: the receive WQE's buffer holds the payload at its offset, and its keys resolve. */
static bool check_send_target(struct eng_qp *qp, struct req_in *r)
{
	const struct eng_rwqe *w = r->first ? r->rw : &qp->resp.wqe;
	uint32_t off = r->first ? 0 : qp->resp.offset;

	if ((uint64_t)off + r->len > w->length) {
		/* Receive buffer too small: Invalid Request, LOC_LEN_ERR (spec 5.4). */
		ENG_INC(qp, drop_bad_length);
		if (r->first)
			take_wqe_from(qp, r->rs.rq, r->srqn);
		fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_LOC_LEN_ERR);
		return false;
	}
	r->niov = eng_sge_resolve_env(&qp->base.env, r->rs.pd, w->sge, w->num_sge, off, r->len,
				      IBV_ACCESS_LOCAL_WRITE, r->iov);
	if (r->niov >= 0)
		return true;
	if (r->first)
		take_wqe_from(qp, r->rs.rq, r->srqn);
	fatal(qp, ENG_ERR_REMOTE_OP, r->psn, IBV_WC_LOC_PROT_ERR);
	return false;
}

/* WRITE: the length agrees with the RETH's (or what is left of it), the whole range is
 * writable under the R_Key before the first byte lands, and this packet's part resolves. */
static bool check_write_target(struct eng_qp *qp, struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;
	int err = 0;

	if (r->first) {
		r->va = pkt->reth.va;
		r->rkey = pkt->reth.rkey;
		if (pkt->reth.dma_len > ENG_MAX_MSG_SIZE || r->len > pkt->reth.dma_len ||
		    (r->last && r->len != pkt->reth.dma_len)) {
			ENG_INC(qp, drop_bad_length);
			fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_LOC_LEN_ERR);
			return false;
		}
		/* A zero-length WRITE need not carry a valid key (spec 3). */
		if (pkt->reth.dma_len &&
		    !qp->base.env.mem_resolve(qp->base.env.ctx, r->rs.pd, qp->base.init.qpn,
					      r->rkey, true, r->va, pkt->reth.dma_len,
					      IBV_ACCESS_REMOTE_WRITE, &err)) {
			fatal(qp, ENG_ERR_REMOTE_ACCESS, r->psn, IBV_WC_SUCCESS);
			return false;
		}
	} else {
		r->va = qp->resp.va;
		r->rkey = qp->resp.rkey;
		if (r->len > qp->resp.resid || (r->last && r->len != qp->resp.resid)) {
			ENG_INC(qp, drop_bad_length);
			fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_LOC_LEN_ERR);
			return false;
		}
	}
	if (!r->len)
		return true;
	r->host = qp->base.env.mem_resolve(qp->base.env.ctx, r->rs.pd, qp->base.init.qpn, r->rkey,
					   true, r->va, r->len, IBV_ACCESS_REMOTE_WRITE, &err);
	if (r->host)
		return true;
	fatal(qp, ENG_ERR_REMOTE_ACCESS, r->psn, IBV_WC_SUCCESS);
	return false;
}

/* READ: a length within the largest message, and the range readable under the R_Key. */
static bool check_read_target(struct eng_qp *qp, const struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;
	int err = 0;

	if (pkt->reth.dma_len > ENG_MAX_MSG_SIZE) {
		ENG_INC(qp, drop_bad_length);
		fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_SUCCESS);
		return false;
	}
	if (!pkt->reth.dma_len ||
	    qp->base.env.mem_resolve(qp->base.env.ctx, r->rs.pd, qp->base.init.qpn, pkt->reth.rkey,
				     true, pkt->reth.va, pkt->reth.dma_len, IBV_ACCESS_REMOTE_READ,
				     &err))
		return true;
	fatal(qp, ENG_ERR_REMOTE_ACCESS, r->psn, IBV_WC_SUCCESS);
	return false;
}

/* ATOMIC: an 8-byte aligned target (IBA 9.4.5) that the R_Key allows. */
static bool check_atomic_target(struct eng_qp *qp, struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;
	int err = 0;

	if (pkt->atomic.va & 7) {
		fatal(qp, ENG_ERR_INVALID_REQ, r->psn, IBV_WC_SUCCESS);
		return false;
	}
	r->host = qp->base.env.mem_resolve(qp->base.env.ctx, r->rs.pd, qp->base.init.qpn,
					   pkt->atomic.rkey, true, pkt->atomic.va, 8,
					   IBV_ACCESS_REMOTE_ATOMIC, &err);
	if (r->host)
		return true;
	fatal(qp, ENG_ERR_REMOTE_ACCESS, r->psn, IBV_WC_SUCCESS);
	return false;
}

/* The memory the request reaches (rxe check_rkey and the receive WQE's buffer). */
static bool check_target(struct eng_qp *qp, struct req_in *r)
{
	switch (r->oi->kind) {
	case ROCE_KIND_SEND:
		return check_send_target(qp, r);
	case ROCE_KIND_WRITE:
		return check_write_target(qp, r);
	case ROCE_KIND_READ_REQ:
		return check_read_target(qp, r);
	case ROCE_KIND_ATOMIC:
		return check_atomic_target(qp, r);
	default:
		return false;
	}
}

/* SEND: the payload placed; the last packet completes the receive. Returns false if that
 * failed the QP (a SEND with Invalidate whose key cannot be invalidated). */
static bool apply_send(struct eng_qp *qp, const struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;
	const uint8_t *src = pkt->payload;
	struct ibv_wc wc = {0};

	if (r->first)
		take_wqe_from(qp, r->rs.rq, r->srqn);
	for (int i = 0; i < r->niov; i++) {
		memcpy(r->iov[i].ptr, src, r->iov[i].len);
		src += r->iov[i].len;
	}
	qp->resp.offset += r->len;
	qp->resp.psn = psn_add(r->psn, 1);
	qp->resp.in_send = !r->last;
	if (!r->last)
		return true;
	qp->resp.msn = psn_add(qp->resp.msn, 1);
	qp->resp.have_wqe = false;
	wc.wr_id = qp->resp.wqe.wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = qp->resp.offset;
	wc.src_qp = qp->attr.dest_qpn;
	if (r->oi->imm) {
		memcpy(&wc.imm_data, pkt->imm, 4);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	if (r->oi->inv) {
		/* SEND with Invalidate (IBA 10.6.6.2): an R_Key that cannot be invalidated fails
		 * the receive, without a NAK (spec 5.4 class J). */
		int e = qp->base.env.mem_invalidate
			    ? qp->base.env.mem_invalidate(qp->base.env.ctx, r->rs.pd,
							  qp->base.init.qpn, pkt->ieth, true)
			    : -EINVAL;
		if (e) {
			wc.status = IBV_WC_REM_INV_REQ_ERR;
			eng_base_complete(&qp->base, r->rs.cq, &wc, true);
			eng_qp_to_err(qp, IBV_EVENT_QP_REQ_ERR, true);
			return false;
		}
		wc.invalidated_rkey = pkt->ieth;
		wc.wc_flags |= IBV_WC_WITH_INV;
	}
	eng_base_complete(&qp->base, r->rs.cq, &wc, pkt->bth.se);
	return true;
}

/* WRITE: the payload placed; the last packet of one with immediate data completes a receive
 * WQE. */
static void apply_write(struct eng_qp *qp, const struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;

	if (r->first) {
		qp->resp.msg_srqn = r->srqn;
		qp->resp.rkey = r->rkey;
		qp->resp.length = pkt->reth.dma_len;
		qp->resp.resid = pkt->reth.dma_len;
	}
	if (r->len)
		memcpy(r->host, pkt->payload, r->len);
	qp->resp.va = r->va + r->len;
	qp->resp.resid -= r->len;
	qp->resp.psn = psn_add(r->psn, 1);
	qp->resp.in_write = !r->last;
	if (!r->last)
		return;
	qp->resp.msn = psn_add(qp->resp.msn, 1);
	if (r->oi->imm) {
		/* WRITE with immediate consumes a receive WQE; byte_len is the RDMA length (rxe
		 * do_complete). */
		struct ibv_wc wc = {0};

		wc.wr_id = r->rw->wr_id;
		wc.status = IBV_WC_SUCCESS;
		wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
		wc.byte_len = qp->resp.length;
		wc.src_qp = qp->attr.dest_qpn;
		wc.wc_flags = IBV_WC_WITH_IMM;
		memcpy(&wc.imm_data, pkt->imm, 4);
		eng_rq_pop(r->rs.rq);
		eng_base_complete(&qp->base, r->rs.cq, &wc, pkt->bth.se);
	}
}

/* READ: a responder resource remembers it (for a duplicate) and a job sends the responses. */
static void apply_read(struct eng_qp *qp, const struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;
	struct eng_res *res = res_next(qp);
	uint32_t n = eng_npkts(pkt->reth.dma_len, qp->attr.pmtu);
	struct eng_job *j;

	res->type = ENG_RES_READ;
	res->first_psn = r->psn;
	res->last_psn = psn_add(r->psn, n - 1);
	res->va = pkt->reth.va;
	res->rkey = pkt->reth.rkey;
	res->pd = r->rs.pd;
	res->length = pkt->reth.dma_len;
	/* MSN counts a READ when it is accepted (IBA C9-148). */
	qp->resp.msn = psn_add(qp->resp.msn, 1);
	j = q_push(qp);
	j->type = ENG_JOB_READ;
	j->psn = r->psn;
	j->va = res->va;
	j->rkey = res->rkey;
	j->pd = res->pd;
	j->length = res->length;
	j->from_first = true;
	qp->resp.psn = psn_add(r->psn, n);
}

/* ATOMIC: executed once; a responder resource keeps the original value for a duplicate. */
static void apply_atomic(struct eng_qp *qp, const struct req_in *r)
{
	const struct roce_pkt *pkt = r->pkt;
	struct eng_res *res = res_next(qp);
	struct eng_job *j;

	res->type = ENG_RES_ATOMIC;
	res->first_psn = res->last_psn = r->psn;
	res->va = pkt->atomic.va;
	res->rkey = pkt->atomic.rkey;
	res->pd = r->rs.pd;
	res->length = 8;
	res->orig = do_atomic(r->host, pkt->bth.opcode, pkt->atomic.swap_add, pkt->atomic.compare);
	qp->resp.msn = psn_add(qp->resp.msn, 1);
	j = q_push(qp);
	j->type = ENG_JOB_ATOMIC_ACK;
	j->psn = r->psn;
	j->orig = res->orig;
	qp->resp.psn = psn_add(r->psn, 1);
}

/* The request with the expected PSN: checked, then applied and acknowledged. */
static void in_sequence(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt)
{
	struct req_in r;

	r.oi = oi;
	r.pkt = pkt;
	r.psn = pkt->bth.psn;
	r.len = pkt->payload_len;
	r.first = oi->pos & ROCE_POS_FIRST;
	r.last = oi->pos & ROCE_POS_LAST;
	r.wants_ack =
	    pkt->bth.ackreq && (oi->kind == ROCE_KIND_SEND || oi->kind == ROCE_KIND_WRITE);
	/* XRC: a message continues with the SRQ of its first packet. */
	r.srqn = qp->resp.in_send || qp->resp.in_write ? qp->resp.msg_srqn : pkt->xrc_srqn;
	r.rw = NULL;
	r.host = NULL;
	r.va = 0;
	r.rkey = 0;
	r.niov = 0;
	if (!check_op(qp, &r) || !check_rside(qp, &r) || !check_resources(qp, &r) ||
	    !check_length(qp, &r) || !check_target(qp, &r))
		return;

	qp->resp.nak_sent = false;
	ENG_INC(qp, rx_packets);
	switch (oi->kind) {
	case ROCE_KIND_SEND:
		if (!apply_send(qp, &r))
			return;
		break;
	case ROCE_KIND_WRITE:
		apply_write(qp, &r);
		break;
	case ROCE_KIND_READ_REQ:
		apply_read(qp, &r);
		break;
	default: /* ROCE_KIND_ATOMIC (check_target passed no other) */
		apply_atomic(qp, &r);
		break;
	}
	if (r.wants_ack)
		enqueue_ack(qp, SYND_ACK, r.psn);
}

/* ---- selective repeat (sr.h) ---- */

/* A request `diff` PSNs ahead of the expected one: kept, and a SACK queued (one waiting for
 * the same PSN covers it: its bitmap is taken when it leaves). */
static void ahead(struct eng_qp *qp, const struct roce_pkt *pkt, uint32_t diff)
{
	const struct eng_job *t = q_tail_job(qp);

	if (eng_sr_hold(qp, pkt, diff))
		ENG_INC(qp, sr_held);
	else
		ENG_INC(qp, drop_psn_gap);
	if (t && t->type == ENG_JOB_SACK && t->psn == qp->resp.psn)
		return;
	if (!q_room(qp))
		return;
	struct eng_job *j = q_push(qp);
	j->type = ENG_JOB_SACK;
	j->syndrome = eng_nak_syndrome(ENG_ERR_PSN_SEQ);
	j->psn = qp->resp.psn;
}

/* The expected request arrived: the kept ones that follow it are taken in PSN order, each
 * through every check as if it arrived now. One that is not taken (no receive WQE, a full
 * response queue, an error) stops it and stays kept: the peer sends it again. The last
 * SEND / WRITE taken is acknowledged, since the requester waits for it. */
static void take_held(struct eng_qp *qp)
{
	const struct roce_pkt *p;
	uint32_t ack_psn = 0;
	bool ack = false;

	while (qp->base.state != IBV_QPS_ERR && (p = eng_sr_held(qp, qp->resp.psn))) {
		const struct roce_opinfo *oi = roce_opinfo(p->bth.opcode);
		uint32_t psn = qp->resp.psn;

		in_sequence(qp, oi, p);
		if (qp->resp.psn == psn)
			break;
		ack = oi->kind == ROCE_KIND_SEND || oi->kind == ROCE_KIND_WRITE;
		ack_psn = psn;
	}
	eng_sr_release_below(qp, qp->resp.psn);
	if (ack && qp->base.state != IBV_QPS_ERR && ack_room(qp))
		enqueue_ack(qp, SYND_ACK, ack_psn);
}

void eng_resp_input(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt)
{
	int32_t diff;

	if (qp->base.state == IBV_QPS_RTR && !qp->resp.comm_est) {
		/* IBA 11.6.3.1: first packet received in RTR. */
		qp->resp.comm_est = true;
		eng_base_event(&qp->base, IBV_EVENT_COMM_EST);
	}
	diff = psn_cmp(pkt->bth.psn, qp->resp.psn);
	if (diff < 0) {
		duplicate(qp, oi, pkt);
		return;
	}
	if (diff > 0) {
		if (qp->sr) {
			ahead(qp, pkt, (uint32_t)diff);
			return;
		}
		eng_gbn_gap(qp);
		return;
	}
	in_sequence(qp, oi, pkt);
	if (qp->sr && eng_sr_holding(qp))
		take_held(qp);
}

/* ---- output ---- */

static int read_packet(struct eng_qp *qp, struct eng_job *j, struct roce_pkt *out, uint8_t *buf)
{
	static const uint8_t opcodes[ENG_PI__COUNT] = {
	    ROCE_RC_READ_RESPONSE_FIRST, ROCE_RC_READ_RESPONSE_MIDDLE, ROCE_RC_READ_RESPONSE_LAST,
	    ROCE_RC_READ_RESPONSE_ONLY};
	uint32_t pmtu = qp->attr.pmtu;
	uint32_t rem = j->length - j->offset;
	uint32_t n = rem < pmtu ? rem : pmtu;
	bool last = rem <= pmtu;
	bool first = j->offset == 0 && j->from_first;
	enum eng_pos_idx pi;
	const uint8_t *payload = buf;

	if (first)
		pi = last ? ENG_PI_ONLY : ENG_PI_FIRST;
	else
		pi = last ? ENG_PI_LAST : ENG_PI_MIDDLE;
	if (n) {
		int err = 0;
		const void *src = qp->base.env.mem_resolve(
		    qp->base.env.ctx, j->pd, qp->base.init.qpn, j->rkey, true, j->va + j->offset, n,
		    IBV_ACCESS_REMOTE_READ, &err);

		if (!src) {
			/* The region went away while the response was being sent: nothing
			 * queued after this READ can be answered any more. */
			qp->resp.q_tail = qp->resp.q_head;
			fatal(qp, ENG_ERR_REMOTE_ACCESS, j->psn, IBV_WC_SUCCESS);
			return eng_resp_output(qp, out, buf);
		}
		if (qp->tx_ref && n >= qp->tx_ref)
			payload = src; /* eng_qp_output_ref: sent from where it lies */
		else
			memcpy(buf, src, n);
	}
	out->bth.opcode = resp_op(qp, opcodes[pi]);
	out->bth.psn = j->psn;
	if (pi != ENG_PI_MIDDLE) {
		out->aeth.syndrome = SYND_ACK;
		out->aeth.msn = j->msn;
	}
	out->payload = payload;
	out->payload_len = n;
	j->psn = psn_add(j->psn, 1);
	j->offset += n;
	if (last)
		qp->resp.q_head++;
	return 1;
}

int eng_resp_output(struct eng_qp *qp, struct roce_pkt *out, uint8_t *buf)
{
	while (eng_resp_pending(qp)) {
		struct eng_job *j = &qp->respq[qp->resp.q_head & qp->respq_mask];

		out->bth.pkey = qp->attr.pkey;
		out->bth.dqpn = qp->attr.dest_qpn;
		switch (j->type) {
		case ENG_JOB_ACK:
			out->bth.opcode = resp_op(qp, ROCE_RC_ACK);
			out->bth.psn = j->psn;
			out->aeth.syndrome = j->syndrome;
			out->aeth.msn = j->msn;
			qp->resp.q_head++;
			return 1;
		case ENG_JOB_SACK:
			out->bth.opcode = ROCE_SR_SACK;
			out->bth.psn = j->psn;
			out->aeth.syndrome = j->syndrome;
			out->aeth.msn = j->msn;
			if (qp->sr)
				eng_sr_sack_bits(qp, j->psn, buf);
			else
				memset(buf, 0, ENG_SR_SACK_BYTES);
			out->payload = buf;
			out->payload_len = ENG_SR_SACK_BYTES;
			ENG_INC(qp, sr_sacks_sent);
			qp->resp.q_head++;
			return 1;
		case ENG_JOB_ATOMIC_ACK:
			out->bth.opcode = resp_op(qp, ROCE_RC_ATOMIC_ACK);
			out->bth.psn = j->psn;
			out->aeth.syndrome = SYND_ACK;
			out->aeth.msn = j->msn;
			out->atomic_orig = j->orig;
			qp->resp.q_head++;
			return 1;
		case ENG_JOB_READ:
			if (qp->base.state == IBV_QPS_ERR && !qp->resp.keep_queue) {
				qp->resp.q_head++;
				continue;
			}
			return read_packet(qp, j, out, buf);
		default:
			qp->resp.q_head++;
			break;
		}
	}
	return 0;
}

/* ---- UC and UD (IBA ch. 9, the unreliable services; rxe_resp.c's UC and UD paths) ----
 *
 * Neither is acknowledged, so no response ever goes out: a request that cannot be taken is
 * dropped and counted, and the QP stays as it was (rxe classes D and E), except for a receive
 * WQE whose buffers fail the local key check, which is fatal as on RC (class A). */

/* The receive WQE the next message takes: the one a dropped UC message gave back (class D1:
 * it is used again, in its place at the head of the queue), else the oldest posted. */
static const struct eng_rwqe *next_rwqe(const struct eng_qp *qp)
{
	if (qp->resp.have_wqe && qp->resp.wqe_spare)
		return &qp->resp.wqe;
	return eng_rq_peek(qp->base.rq);
}

/* Takes next_rwqe() into resp.wqe. */
static void take_next_rwqe(struct eng_qp *qp)
{
	if (qp->resp.have_wqe && qp->resp.wqe_spare) {
		qp->resp.wqe_spare = false;
		qp->resp.offset = 0;
		return;
	}
	take_wqe(qp);
}

/* A receive WQE whose local buffers fail their key check (class A, rxe "malformed WQE"): it
 * completes with a protection error and the QP goes to ERR. */
static void recv_wqe_fatal(struct eng_qp *qp)
{
	eng_resp_flush_held(qp, IBV_WC_LOC_PROT_ERR);
	eng_qp_to_err(qp, IBV_EVENT_QP_FATAL, true);
}

/* Gives up the UC message in progress, if any: its SEND's receive WQE is used again by the next
 * message (class D1), or, taken from an SRQ, completes with an error (class E, rxe). A WRITE
 * leaves the bytes it placed. Nothing completes successfully. */
static void uc_abandon(struct eng_qp *qp)
{
	if (qp->resp.in_send && qp->resp.have_wqe && !qp->resp.wqe_spare) {
		if (qp->base.init.srq) {
			eng_resp_flush_held(qp, IBV_WC_REM_INV_REQ_ERR);
		} else {
			qp->resp.wqe_spare = true;
			qp->resp.offset = 0;
		}
	}
	qp->resp.in_send = false;
	qp->resp.in_write = false;
}

/* Drops the message the packet belongs to: its later packets are dropped until a FIRST / ONLY
 * (rxe drop_msg). */
static void uc_drop_msg(struct eng_qp *qp)
{
	uc_abandon(qp);
	qp->resp.drop_msg = true;
}

static void copy_to_iov(const struct eng_iov *iov, int niov, const uint8_t *src)
{
	for (int i = 0; i < niov; i++) {
		memcpy(iov[i].ptr, src, iov[i].len);
		src += iov[i].len;
	}
}

void eng_resp_input_uc(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt)
{
	uint32_t psn = pkt->bth.psn;
	uint32_t len = pkt->payload_len;
	bool first = oi->pos & ROCE_POS_FIRST;
	bool last = oi->pos & ROCE_POS_LAST;
	struct eng_iov iov[ENG_MAX_SGE];
	const struct eng_rwqe *rw = NULL;
	uint8_t *host = NULL;
	uint64_t va = 0;
	uint32_t rkey = 0;
	int niov = 0, err = 0;

	if (qp->base.state == IBV_QPS_RTR && !qp->resp.comm_est) {
		/* IBA 11.6.3.1: first packet received in RTR. */
		qp->resp.comm_est = true;
		eng_base_event(&qp->base, IBV_EVENT_COMM_EST);
	}
	/* -- sequence (rxe check_psn for UC): a packet that does not follow, or belongs to a
	 * message being dropped, is dropped; a FIRST / ONLY starts afresh whatever its PSN. -- */
	if (qp->resp.drop_msg || psn != qp->resp.psn) {
		if (!first) {
			if (qp->resp.drop_msg) {
				ENG_INC(qp, drop_uc_msg);
			} else {
				ENG_INC(qp, drop_psn_gap);
				if (qp->resp.in_send || qp->resp.in_write)
					ENG_INC(qp, uc_abandoned);
				uc_drop_msg(qp);
			}
			return;
		}
		qp->resp.drop_msg = false;
	}
	/* -- opcode sequence (rxe check_op_seq): a FIRST / ONLY inside a message means its LAST
	 * was lost: that message is given up and this one starts; a MIDDLE / LAST that does not
	 * continue the message in progress is dropped with the rest of its message. -- */
	if (qp->resp.in_send || qp->resp.in_write) {
		bool cont = qp->resp.in_send ? oi->kind == ROCE_KIND_SEND && !first
					     : oi->kind == ROCE_KIND_WRITE && !first;

		if (!cont) {
			ENG_INC(qp, uc_abandoned);
			uc_abandon(qp);
			if (!first) {
				ENG_INC(qp, drop_bad_opcode);
				qp->resp.drop_msg = true;
				return;
			}
		}
	} else if (!first) {
		ENG_INC(qp, drop_bad_opcode);
		qp->resp.drop_msg = true;
		return;
	}

	/* -- validate (nothing changes before all checks pass) -- */
	if (oi->kind == ROCE_KIND_WRITE && !(qp->attr.access & IBV_ACCESS_REMOTE_WRITE)) {
		ENG_INC(qp, drop_access);
		uc_drop_msg(qp);
		return;
	}
	if (!payload_len_ok(qp, oi, len)) {
		ENG_INC(qp, drop_bad_length);
		uc_drop_msg(qp);
		return;
	}
	if ((oi->kind == ROCE_KIND_SEND && first) || (oi->kind == ROCE_KIND_WRITE && oi->imm)) {
		rw = next_rwqe(qp);
		if (!rw) {
			ENG_INC(qp, drop_no_recv);
			uc_drop_msg(qp);
			return;
		}
	}
	if (oi->kind == ROCE_KIND_SEND) {
		const struct eng_rwqe *w = first ? rw : &qp->resp.wqe;
		uint32_t off = first ? 0 : qp->resp.offset;

		if ((uint64_t)off + len > w->length) {
			ENG_INC(qp, drop_recv_short);
			if (first) {
				take_next_rwqe(qp);
				qp->resp.in_send = true;
			}
			uc_drop_msg(qp);
			return;
		}
		niov =
		    eng_sge_resolve(qp, w->sge, w->num_sge, off, len, IBV_ACCESS_LOCAL_WRITE, iov);
		if (niov < 0) {
			if (first)
				take_next_rwqe(qp);
			recv_wqe_fatal(qp);
			return;
		}
	} else {
		if (first) {
			va = pkt->reth.va;
			rkey = pkt->reth.rkey;
			if (pkt->reth.dma_len > ENG_MAX_MSG_SIZE || len > pkt->reth.dma_len ||
			    (last && len != pkt->reth.dma_len)) {
				ENG_INC(qp, drop_bad_length);
				uc_drop_msg(qp);
				return;
			}
			if (pkt->reth.dma_len &&
			    !qp->base.env.mem_resolve(
				qp->base.env.ctx, qp->base.init.pd, qp->base.init.qpn, rkey, true,
				va, pkt->reth.dma_len, IBV_ACCESS_REMOTE_WRITE, &err)) {
				ENG_INC(qp, drop_access);
				uc_drop_msg(qp);
				return;
			}
		} else {
			va = qp->resp.va;
			rkey = qp->resp.rkey;
			if (len > qp->resp.resid || (last && len != qp->resp.resid)) {
				ENG_INC(qp, drop_bad_length);
				uc_drop_msg(qp);
				return;
			}
		}
		if (len) {
			host = qp->base.env.mem_resolve(qp->base.env.ctx, qp->base.init.pd,
							qp->base.init.qpn, rkey, true, va, len,
							IBV_ACCESS_REMOTE_WRITE, &err);
			if (!host) {
				/* The region went away in the middle of the message. */
				ENG_INC(qp, drop_access);
				uc_drop_msg(qp);
				return;
			}
		}
	}

	/* -- apply -- */
	ENG_INC(qp, rx_packets);
	qp->resp.psn = psn_add(psn, 1);
	if (oi->kind == ROCE_KIND_SEND) {
		if (first)
			take_next_rwqe(qp);
		copy_to_iov(iov, niov, pkt->payload);
		qp->resp.offset += len;
		qp->resp.in_send = !last;
		if (!last)
			return;
	} else {
		if (first) {
			qp->resp.rkey = rkey;
			qp->resp.length = pkt->reth.dma_len;
			qp->resp.resid = pkt->reth.dma_len;
		}
		if (len)
			memcpy(host, pkt->payload, len);
		qp->resp.va = va + len;
		qp->resp.resid -= len;
		qp->resp.in_write = !last;
		if (!last || !oi->imm)
			return;
		take_next_rwqe(qp);
	}
	{
		/* The message is complete: its receive WQE (SEND, WRITE with immediate). */
		struct ibv_wc wc = {0};

		qp->resp.msn = psn_add(qp->resp.msn, 1);
		qp->resp.have_wqe = false;
		wc.wr_id = qp->resp.wqe.wr_id;
		wc.status = IBV_WC_SUCCESS;
		wc.src_qp = qp->attr.dest_qpn;
		if (oi->kind == ROCE_KIND_SEND) {
			wc.opcode = IBV_WC_RECV;
			wc.byte_len = qp->resp.offset;
		} else {
			/* byte_len is the RDMA length (rxe do_complete). */
			wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			wc.byte_len = qp->resp.length;
		}
		if (oi->imm) {
			memcpy(&wc.imm_data, pkt->imm, 4);
			wc.wc_flags |= IBV_WC_WITH_IMM;
		}
		eng_base_complete(&qp->base, qp->base.init.recv_cq, &wc, pkt->bth.se);
	}
}

/* wc.sl of a UD receive: on RoCE there is no SL (no LRH); ConnectX reports the packet's
 * network header type there instead, and consumers rely on it: UCX's UD transport reads the L3
 * type from it to compare 4 (IPv4) or 16 bytes of the GRH area's destination with its GID, and
 * silently drops the datagram when they differ (rxe reports 0, read as IPv6: IPv4 datagrams are
 * lost). The convention (the mlx5 PRM, as UCX's ud_iface.h quotes it): bits 2:0 the L3 header
 * type (0 GRH, 1 IPv6, 2 IPv4), bit 3 set when the frame has a UDP header, as every RoCEv2 frame
 * has. The header is the one core/ built for the GRH area (IPv6 header, or 20 zero bytes and the
 * IPv4 header); none (grh NULL): 0. */
static uint8_t ud_wc_sl(const uint8_t *grh)
{
	enum { UDP = 0x8, L3_IPV6 = 0x1, L3_IPV4 = 0x2 };
	if (!grh)
		return 0;
	if (grh[0] >> 4 == 6)
		return UDP | L3_IPV6;
	if (grh[20] >> 4 == 4)
		return UDP | L3_IPV4;
	return 0;
}

void eng_resp_input_ud(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt,
		       const uint8_t *grh)
{
	static const uint8_t zero_grh[ENG_GRH_LEN];
	uint32_t len = pkt->payload_len;
	struct eng_iov iov[ENG_MAX_SGE];
	const struct eng_rwqe *rw;
	struct ibv_wc wc = {0};
	int niov;

	/* -- validate: Q_Key (rxe check_keys: a mismatch is a silent drop), one
	 * packet of at most the port MTU (rxe check_length), a receive WQE with room for the
	 * GRH and the payload. PSNs are not checked on UD (spec 10). -- */
	if (oi->kind != ROCE_KIND_SEND || oi->pos != ROCE_POS_ONLY) {
		ENG_INC(qp, drop_bad_opcode);
		return;
	}
	if (pkt->deth.qkey != qp->attr.qkey) {
		ENG_INC(qp, drop_qkey);
		return;
	}
	if (len > qp->attr.pmtu) {
		ENG_INC(qp, drop_bad_length);
		return;
	}
	rw = next_rwqe(qp);
	if (!rw) {
		ENG_INC(qp, drop_no_recv);
		return;
	}
	if ((uint64_t)ENG_GRH_LEN + len > rw->length) {
		/* rxe: the WQE stays posted (class D); an SRQ's, already taken, completes with
		 * an error (class E). */
		ENG_INC(qp, drop_recv_short);
		if (qp->base.init.srq) {
			take_next_rwqe(qp);
			eng_resp_flush_held(qp, IBV_WC_REM_INV_REQ_ERR);
		}
		return;
	}
	niov = eng_sge_resolve(qp, rw->sge, rw->num_sge, 0, ENG_GRH_LEN + len,
			       IBV_ACCESS_LOCAL_WRITE, iov);
	if (niov < 0) {
		take_next_rwqe(qp);
		recv_wqe_fatal(qp);
		return;
	}

	/* -- apply: the 40 GRH bytes, then the payload, across the buffers -- */
	{
		const uint8_t *src = grh ? grh : zero_grh;
		uint32_t left = ENG_GRH_LEN; /* bytes left in src before the payload */

		for (int i = 0; i < niov; i++) {
			uint8_t *dst = iov[i].ptr;
			uint32_t n = iov[i].len;

			while (n) {
				uint32_t k = n < left ? n : left;

				if (k == 0)
					break; /* cannot happen: the pieces add up to 40 + len */
				memcpy(dst, src, k);
				dst += k;
				n -= k;
				src += k;
				left -= k;
				if (left == 0) {
					src = pkt->payload;
					left = len;
				}
			}
		}
	}
	take_next_rwqe(qp);
	qp->resp.have_wqe = false;
	ENG_INC(qp, rx_packets);
	wc.wr_id = qp->resp.wqe.wr_id;
	wc.status = IBV_WC_SUCCESS;
	wc.opcode = IBV_WC_RECV;
	wc.byte_len = ENG_GRH_LEN + len;
	wc.src_qp = pkt->deth.src_qpn;
	wc.pkey_index = 0;
	wc.sl = ud_wc_sl(grh);
	wc.wc_flags = IBV_WC_GRH;
	if (oi->imm) {
		memcpy(&wc.imm_data, pkt->imm, 4);
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	eng_base_complete(&qp->base, qp->base.init.recv_cq, &wc, pkt->bth.se);
}
