/* Requester: builds request packets from send WQEs (rxe_req.c's role).
 *
 * One pass over the send queue at a time: req.idx is the WQE being sent, req.offset the bytes
 * of it already in packets, req.psn the next PSN. Go-back-N (eng_gbn_rewind, gbn.c) moves the pass
 * back to the oldest unacknowledged PSN; because every WQE's PSNs follow from its position in
 * the pass, a resent WQE gets exactly its original PSNs (spec 5.5). Nothing here allocates:
 * the packet's payload is gathered straight into the caller's buffer. */
#include "engine/eng_int.h"

void eng_req_reset(struct eng_qp *qp)
{
	uint8_t ord = qp->req.ord;

	memset(&qp->req, 0, sizeof(qp->req));
	qp->req.ord = ord;
	qp->req.idx = qp->base.sq_head;
}

static bool is_imm_op(uint8_t op)
{
	return op == ENG_OP_SEND_IMM || op == ENG_OP_WRITE_IMM;
}

/* The gates a WQE passes before its first packet of a pass (spec 4.4, 5.7; IBA 10.8.3.3):
 * the PSN window, SQD, fence, and ORD. */
static bool may_send(struct eng_qp *qp, const struct eng_swqe *w)
{
	const struct eng_op_info *info = &eng_ops[w->op];

	if (info->local) {
		/* No PSN to wait for. Fenced: every earlier WQE completed first (rxe's fence,
		 * which a local operation gets as IBA 10.8.3.3 asks of Local Invalidate). */
		if (qp->base.state == IBV_QPS_SQD && w->state == ENG_SWQE_POSTED)
			return false;
		return !(w->fence && w->state == ENG_SWQE_POSTED &&
			 qp->base.sq_head != qp->req.idx);
	}
	/* UC and UD have no acknowledgements to wait for. */
	if (eng_qp_reliable(qp) &&
	    psn_cmp(qp->req.psn, psn_add(qp->comp.psn, ENG_MAX_UNACKED_PSNS)) >= 0)
		return false;
	if (qp->req.offset != 0 && !info->rd_atomic)
		return true; /* mid-message: always finish what was started */
	if (qp->base.state == IBV_QPS_SQD && w->state == ENG_SWQE_POSTED)
		return false;
	/* IBV_SEND_FENCE: wait for every earlier READ / ATOMIC to complete. */
	if (w->fence && qp->req.rd_out > 0)
		return false;
	if (info->rd_atomic && qp->req.ord && qp->req.rd_out >= qp->req.ord)
		return false;
	return true;
}

/* Selective repeat (sr.h) has a hole to send again. Out of line: go-back-N QPs never ask. */
__attribute__((noinline)) static bool sr_hole(struct eng_qp *qp)
{
	uint32_t idx, psn;

	return eng_sr_hole(qp, &idx, &psn);
}

/* The pass has a packet to send now. */
static bool pass_ready(struct eng_qp *qp)
{
	const struct eng_swqe *w;

	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		return false;
	if (qp->comp.rnr_deadline != UINT64_MAX || qp->req.idx == qp->base.sq_tail)
		return false;
	w = eng_swqe_at(qp, qp->req.idx);
	if (w->state == ENG_SWQE_ERROR)
		return false;
	return may_send(qp, w);
}

bool eng_req_ready(struct eng_qp *qp)
{
	if (qp->sr && (qp->base.state == IBV_QPS_RTS || qp->base.state == IBV_QPS_SQD) &&
	    qp->comp.rnr_deadline == UINT64_MAX && sr_hole(qp))
		return true;
	return pass_ready(qp);
}

/* A local failure (bad lkey, ORD 0): the WQE completes in order with `status` and the QP goes
 * to ERR when the completer reaches it (rxe wqe_state_error). Nothing after it is sent. */
static void fail_wqe(struct eng_qp *qp, struct eng_swqe *w, enum ibv_wc_status status)
{
	w->state = ENG_SWQE_ERROR;
	w->status = status;
	eng_comp_retire(qp);
}

static void fill_bth(struct eng_qp *qp, const struct eng_swqe *w, struct roce_pkt *out,
		     uint8_t opcode, bool last)
{
	out->bth.opcode = opcode;
	out->bth.pkey = qp->attr.pkey;
	out->bth.dqpn = qp->base.init.type == IBV_QPT_UD ? w->ud_qpn : qp->attr.dest_qpn;
	out->bth.psn = qp->req.psn;
	/* XRC: the target's SRQ, in every request packet (IBA 9.2, XRCETH). */
	out->xrc_srqn = w->xrc_srqn;
	/* UC and UD are never acknowledged: AckReq stays 0 (rxe, and its captures). */
	if (!eng_qp_reliable(qp))
		return;
	/* Spec 5.1 (rxe init_req_packet): AckReq on the last packet of every message, and on
	 * the 66th packet in a row without it. */
	if (last || qp->req.noack++ > ENG_MAX_PKT_PER_ACK) {
		out->bth.ackreq = true;
		qp->req.noack = 0;
	}
}

/* Accounts a built packet of `npsn` PSNs; `end` if it was the last of its WQE. */
static void advance(struct eng_qp *qp, struct eng_swqe *w, uint32_t npsn, uint32_t nbytes, bool end,
		    uint64_t now)
{
	if (psn_cmp(qp->req.psn, qp->req.psn_hi) < 0)
		ENG_INC(qp, retransmits);
	qp->req.psn = psn_add(qp->req.psn, npsn);
	if (psn_cmp(qp->req.psn, qp->req.psn_hi) > 0)
		qp->req.psn_hi = qp->req.psn;
	if (qp->cc)
		eng_cc_sent(qp, nbytes, now);
	if (end) {
		qp->req.idx++;
		qp->req.offset = 0;
		if (eng_ops[w->op].rd_atomic)
			qp->req.rd_out++;
	} else {
		qp->req.offset += nbytes;
	}
	if (!eng_qp_reliable(qp)) {
		/* UC / UD: nothing is outstanding once it is out; a WQE completes when its last
		 * packet is handed over (rxe completes unacknowledged QPs the same way). */
		qp->comp.psn = qp->req.psn;
		if (end) {
			w->state = ENG_SWQE_DONE;
			eng_comp_retire(qp);
		}
		return;
	}
	eng_comp_arm(qp, now);
}

static int build_data(struct eng_qp *qp, struct eng_swqe *w, struct roce_pkt *out, uint8_t *buf,
		      uint64_t now)
{
	const struct eng_op_info *info = &eng_ops[w->op];
	uint32_t pmtu = qp->attr.pmtu;
	uint32_t off = qp->req.offset;
	uint32_t rem = w->length - off;
	uint32_t n = rem < pmtu ? rem : pmtu;
	bool last = rem <= pmtu;
	enum eng_pos_idx pi;

	if (off == 0)
		pi = last ? ENG_PI_ONLY : ENG_PI_FIRST;
	else
		pi = last ? ENG_PI_LAST : ENG_PI_MIDDLE;

	/* Validate and gather the payload before any state changes. Where the caller lets it
	 * (eng_qp_output_ref), a payload in one piece stays where it is. */
	const uint8_t *payload = buf;
	bool ref = qp->tx_ref && n >= qp->tx_ref;
	if (w->inl) {
		if (ref)
			payload = w->inline_data + off;
		else
			memcpy(buf, w->inline_data + off, n);
	} else if (n) {
		struct eng_iov iov[ENG_MAX_SGE];
		int k = eng_sge_resolve(qp, w->sge, w->num_sge, off, n, ENG_ACCESS_LOCAL_READ, iov);
		uint32_t pos = 0;

		if (k < 0) {
			fail_wqe(qp, w, IBV_WC_LOC_PROT_ERR);
			return 0;
		}
		if (k == 1 && ref)
			payload = iov[0].ptr;
		else
			for (int i = 0; i < k; i++) {
				memcpy(buf + pos, iov[i].ptr, iov[i].len);
				pos += iov[i].len;
			}
	}

	if (off == 0) {
		w->first_psn = qp->req.psn;
		w->last_psn = psn_add(qp->req.psn, eng_npkts(w->length, pmtu) - 1);
		w->state = ENG_SWQE_ACTIVE;
	}
	fill_bth(qp, w, out, eng_op_opcode(info, qp->base.init.type, pi), last);
	if (qp->base.init.type == IBV_QPT_UD) {
		/* DETH (spec 2.7): the Q_Key chosen at post, and our QPN as the source. */
		out->deth.qkey = w->ud_qkey;
		out->deth.src_qpn = qp->base.init.qpn;
	}
	/* Spec 3: SE only on the last packet of a SEND or WRITE with immediate. */
	if (last && w->solicited && info->rwr)
		out->bth.se = true;
	if (info->kind == ROCE_KIND_WRITE && off == 0) {
		/* RETH only on FIRST / ONLY: the whole message (spec 4.2). */
		out->reth.va = w->remote_addr;
		out->reth.rkey = w->rkey;
		out->reth.dma_len = w->length;
	}
	if (last && is_imm_op(w->op))
		memcpy(out->imm, w->imm, 4);
	if (last && w->op == ENG_OP_SEND_INV)
		out->ieth = w->inv_rkey;
	out->payload = payload;
	out->payload_len = n;
	advance(qp, w, 1, n, last, now);
	return 1;
}

/* A READ asks for the rest of its data from read_done on, or (span > 0: selective repeat's
 * re-request) for span packets of it. */
static int build_rd_atomic(struct eng_qp *qp, struct eng_swqe *w, struct roce_pkt *out,
			   uint32_t span, uint64_t now)
{
	const struct eng_op_info *info = &eng_ops[w->op];
	uint32_t pmtu = qp->attr.pmtu;
	uint32_t npsn = 1;

	if (w->read_done == 0) {
		/* Check now that the data can be placed, rather than ask the peer for bytes we
		 * must then drop (placement checks again, comp.c). */
		struct eng_iov iov[ENG_MAX_SGE];

		if (eng_sge_resolve(qp, w->sge, w->num_sge, 0, w->op == ENG_OP_READ ? w->length : 8,
				    IBV_ACCESS_LOCAL_WRITE, iov) < 0) {
			fail_wqe(qp, w, IBV_WC_LOC_PROT_ERR);
			return 0;
		}
		w->first_psn = qp->req.psn;
		w->last_psn = psn_add(qp->req.psn, eng_npkts(w->length, pmtu) - 1);
		if (w->op != ENG_OP_READ)
			w->last_psn = w->first_psn;
		w->state = ENG_SWQE_ACTIVE;
	}
	fill_bth(qp, w, out, eng_op_opcode(info, qp->base.init.type, ENG_PI_ONLY), true);
	if (w->op == ENG_OP_READ) {
		/* A partly answered READ asks again for the rest only, from the PSN of the first
		 * missing response (spec 5.5, 5.6). */
		uint32_t rem = w->length - w->read_done;

		if (span && (uint64_t)span * pmtu < rem)
			rem = span * pmtu;
		out->reth.va = w->remote_addr + w->read_done;
		out->reth.rkey = w->rkey;
		out->reth.dma_len = rem;
		npsn = eng_npkts(rem, pmtu);
	} else {
		out->atomic.va = w->remote_addr;
		out->atomic.rkey = w->rkey;
		out->atomic.swap_add = w->op == ENG_OP_CMP_SWAP ? w->swap : w->compare_add;
		out->atomic.compare = w->op == ENG_OP_CMP_SWAP ? w->compare_add : 0;
	}
	advance(qp, w, npsn, 0, true, now);
	return 1;
}

/* Runs a local operation (rxe_do_local_ops): BIND_MW through env->mw_bind, LOCAL_INV through
 * env->mem_invalidate; it is DONE, or fails in order with its status (the QP then goes to ERR
 * when it is retired, as after any local failure). No PSN, no packet. */
static void run_local(struct eng_qp *qp, struct eng_swqe *w)
{
	int err;

	ENG_INC(qp, local_ops);
	if (w->op == ENG_OP_BIND_MW)
		err = qp->base.env.mw_bind
			  ? qp->base.env.mw_bind(qp->base.env.ctx, qp->base.init.pd,
						 qp->base.init.qpn, &w->bind)
			  : -EINVAL;
	else
		err = qp->base.env.mem_invalidate
			  ? qp->base.env.mem_invalidate(qp->base.env.ctx, qp->base.init.pd,
							qp->base.init.qpn, w->inv_rkey, false)
			  : -EINVAL;
	if (err) {
		ENG_INC(qp, local_op_errors);
		fail_wqe(qp, w,
			 w->op == ENG_OP_BIND_MW ? IBV_WC_MW_BIND_ERR : IBV_WC_LOC_QP_OP_ERR);
		return;
	}
	w->state = ENG_SWQE_DONE;
	qp->req.idx++;
	eng_comp_retire(qp);
}

/* IBA C10-93.1.1 (rxe does the same): a UD message longer than the port MTU is not sent and
 * not an error; it completes successfully, consuming one PSN. */
static void skip_ud_too_long(struct eng_qp *qp, struct eng_swqe *w)
{
	ENG_INC(qp, tx_ud_too_long);
	w->first_psn = w->last_psn = qp->req.psn;
	w->state = ENG_SWQE_ACTIVE;
	advance(qp, w, 1, 0, true, 0);
}

/* Sends the request packet with PSN `psn` of WQE `idx` again, out of the pass (selective
 * repeat's hole): the pass's position is put back afterwards. It asks for an ACK, so that
 * the peer says at once whether it filled the hole. */
static int resend(struct eng_qp *qp, uint32_t idx, uint32_t psn, struct roce_pkt *out, uint8_t *buf,
		  uint64_t now)
{
	struct eng_swqe *w = eng_swqe_at(qp, idx);
	uint32_t k_idx = qp->req.idx, k_off = qp->req.offset, k_psn = qp->req.psn;
	uint32_t k_noack = qp->req.noack, k_rd = qp->req.rd_out;
	int n;

	qp->req.idx = idx;
	qp->req.psn = psn;
	bool part = false;
	if (eng_ops[w->op].rd_atomic) {
		uint32_t span = 0;
		if (w->op == ENG_OP_READ) {
			/* A READ partly answered asks from its first missing response on (as a
			 * go-back-N retry does), and while it is being recovered for the missing
			 * responses only (sr.h). */
			qp->req.psn = psn_add(w->first_psn, w->read_done / qp->attr.pmtu);
			part = eng_sr_read_open(qp, idx);
			if (part)
				span = eng_sr_read_span(qp, idx, qp->req.psn);
		}
		qp->req.offset = 0;
		n = build_rd_atomic(qp, w, out, span, now);
	} else {
		qp->req.offset = (uint32_t)psn_cmp(psn, w->first_psn) * qp->attr.pmtu;
		n = build_data(qp, w, out, buf, now);
	}
	qp->req.idx = k_idx;
	qp->req.offset = k_off;
	qp->req.psn = k_psn;
	qp->req.noack = k_noack;
	qp->req.rd_out = k_rd;
	if (n > 0) {
		out->bth.ackreq = true;
		ENG_INC(qp, sr_resent);
		eng_sr_resent(qp, psn, now);
		if (part)
			eng_sr_read_asked(qp, out->bth.psn,
					  eng_npkts(out->reth.dma_len, qp->attr.pmtu));
	}
	return n;
}

/* The packets of a pass, as eng_req_output sends them. */
static int req_next(struct eng_qp *qp, uint64_t now, struct roce_pkt *out, uint8_t *buf,
		    uint32_t *ah)
{
	struct eng_swqe *w;

	*ah = 0;
	for (;;) {
		if (!pass_ready(qp))
			return 0;
		w = eng_swqe_at(qp, qp->req.idx);
		if (eng_ops[w->op].local) {
			if (w->state == ENG_SWQE_POSTED)
				run_local(qp, w);
			else
				qp->req.idx++; /* run already: a go-back-N pass steps over it */
			continue;
		}
		if (qp->base.init.type != IBV_QPT_UD || w->length <= qp->attr.pmtu)
			break;
		skip_ud_too_long(qp, w);
	}
	if (qp->base.init.type == IBV_QPT_UD)
		*ah = w->ah;
	if (eng_ops[w->op].rd_atomic) {
		if (qp->req.ord == 0) {
			/* max_rd_atomic 0 forbids READ / ATOMIC (IBA 10.2.4). */
			fail_wqe(qp, w, IBV_WC_LOC_QP_OP_ERR);
			return 0;
		}
		return build_rd_atomic(qp, w, out, 0, now);
	}
	return build_data(qp, w, out, buf, now);
}

int eng_req_output(struct eng_qp *qp, uint64_t now, struct roce_pkt *out, uint8_t *buf,
		   uint32_t *ah)
{
	*ah = 0;
	if (qp->cc && qp->cc->ops->send_at(qp->cc) > now) {
		/* Paced (congestion control): the QP's deadline includes the time it may go. */
		ENG_INC(qp, cc_held);
		return 0;
	}
	if (!qp->sr)
		return req_next(qp, now, out, buf, ah);

	uint32_t idx, psn, hi = qp->req.psn_hi;
	if (qp->comp.rnr_deadline == UINT64_MAX && eng_sr_hole(qp, &idx, &psn))
		return resend(qp, idx, psn, out, buf, now);
	int n = req_next(qp, now, out, buf, ah);
	if (n > 0)
		eng_sr_sent(qp, out->bth.psn, out->bth.ackreq, psn_cmp(out->bth.psn, hi) >= 0, now);
	return n;
}
