/* Completer: inbound ACKs, NAKs, read responses and atomic ACKs (rxe_comp.c's role), the RNR
 * wait, the two timers, and send completions strictly in WQE order. What a loss starts is the
 * loss recovery policy's: go-back-N (gbn.c), or selective repeat (sr.c).
 *
 * comp.psn is the oldest PSN not yet acknowledged or answered. Every response carries a PSN
 * in [comp.psn, req.psn_hi); an ACK for n, and any response for n, acknowledge all SEND /
 * WRITE packets before it (coalescing, spec 5.1). A READ / ATOMIC is complete only with its
 * own response, so an acknowledgement that passes one means that response was lost: an
 * implicit NAK, answered with go-back-N (spec 5.5). */
#include "engine/eng_int.h"

void eng_comp_reset(struct eng_qp *qp)
{
	memset(&qp->comp, 0, sizeof(qp->comp));
	qp->comp.ack_deadline = UINT64_MAX;
	qp->comp.rnr_deadline = UINT64_MAX;
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.rnr_left = qp->attr.rnr_retry;
	if (qp->sr)
		eng_sr_req_reset(qp->sr);
}

void eng_comp_arm(struct eng_qp *qp, uint64_t now)
{
	uint64_t t;

	if (qp->comp.ack_deadline != UINT64_MAX || qp->comp.rnr_deadline != UINT64_MAX ||
	    qp->attr.timeout == 0 || psn_cmp(qp->comp.psn, qp->req.psn_hi) >= 0)
		return;
	if (!qp->sr) {
		t = roce_ack_timeout_ns(qp->attr.timeout);
	} else {
		t = eng_sr_rto(qp);
		if (!qp->comp.retrying)
			eng_sr_armed(qp, now);
	}
	if (t)
		qp->comp.ack_deadline = now + t;
}

static void complete_send(struct eng_qp *qp, const struct eng_swqe *w)
{
	struct ibv_wc wc = {0};

	/* Unsignaled WRs complete silently when they succeed (IBA 10.8.3.1). */
	if (w->status == IBV_WC_SUCCESS && !w->signaled)
		return;
	wc.wr_id = w->wr_id;
	wc.status = w->status;
	wc.opcode = eng_ops[w->op].wc_opcode;
	wc.byte_len = w->status == IBV_WC_SUCCESS ? w->length : 0;
	eng_base_complete(&qp->base, qp->base.init.send_cq, &wc, false);
}

void eng_comp_retire(struct eng_qp *qp)
{
	while (qp->base.sq_head != qp->base.sq_tail) {
		struct eng_swqe *w = eng_swqe_at(qp, qp->base.sq_head);

		if (w->state != ENG_SWQE_DONE && w->state != ENG_SWQE_ERROR)
			return;
		if (eng_idx_before(qp->base.sq_head, qp->req.idx)) {
			if (eng_ops[w->op].rd_atomic && w->state == ENG_SWQE_DONE)
				qp->req.rd_out--;
		} else {
			/* The requester was resending this WQE (go-back-N): skip it. */
			qp->req.idx = qp->base.sq_head + 1;
			qp->req.offset = 0;
		}
		complete_send(qp, w);
		qp->base.sq_head++;
		if (w->state == ENG_SWQE_ERROR) {
			eng_qp_to_err(qp, 0, false);
			return;
		}
	}
}

/* The oldest WQE fails with `status`; the QP goes to ERR and the rest is flushed. */
void eng_comp_fail_head(struct eng_qp *qp, enum ibv_wc_status status)
{
	struct eng_swqe *w;

	if (qp->base.sq_head == qp->base.sq_tail) {
		eng_qp_to_err(qp, 0, false);
		return;
	}
	w = eng_swqe_at(qp, qp->base.sq_head);
	w->state = ENG_SWQE_ERROR;
	w->status = status;
	eng_comp_retire(qp);
}

/* A valid acknowledgement moved comp.psn: reset the retry budgets (spec 5.5), restart the
 * ACK timer, and pull a requester that was resending acknowledged packets forward. */
static void progress(struct eng_qp *qp, uint64_t now)
{
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.rnr_left = qp->attr.rnr_retry;
	qp->comp.retrying = false;
	qp->comp.ack_deadline = UINT64_MAX;
	if (qp->sr)
		eng_sr_progress(qp, now);
	if (psn_cmp(qp->req.psn, qp->comp.psn) < 0)
		eng_gbn_rewind(qp);
	eng_comp_arm(qp, now);
}

/* Everything before PSN `upto` was received by the peer: complete the SEND / WRITE WQEs it
 * covers, in order, and move comp.psn (never past an unanswered READ / ATOMIC). Returns true
 * if a READ / ATOMIC lies entirely before `upto` without its response (implicit NAK). */
static bool ack_upto(struct eng_qp *qp, uint32_t upto, uint64_t now)
{
	uint32_t target = upto;
	bool lost = false;

	for (uint32_t i = qp->base.sq_head; i != qp->base.sq_tail; i++) {
		struct eng_swqe *w = eng_swqe_at(qp, i);

		if (eng_ops[w->op].local && w->state == ENG_SWQE_DONE)
			continue; /* run, not yet retired: no PSN of its own */
		if (w->state != ENG_SWQE_ACTIVE)
			break;
		if (!eng_ops[w->op].rd_atomic) {
			if (psn_cmp(w->last_psn, upto) < 0) {
				w->state = ENG_SWQE_DONE;
				continue;
			}
			break;
		}
		{
			uint32_t resume = psn_add(w->first_psn, w->read_done / qp->attr.pmtu);

			if (psn_cmp(resume, target) < 0)
				target = resume;
			if (psn_cmp(w->last_psn, upto) < 0)
				lost = true;
		}
		break;
	}
	eng_comp_retire(qp);
	if (qp->base.state == IBV_QPS_ERR)
		return false;
	if (psn_cmp(target, qp->comp.psn) > 0) {
		qp->comp.psn = target;
		progress(qp, now);
	}
	return lost;
}

static void implicit_nak(struct eng_qp *qp, uint64_t now)
{
	if (eng_gbn_retry(qp, now, false))
		ENG_INC(qp, implicit_naks);
}

static void on_ack(struct eng_qp *qp, const struct roce_pkt *pkt, uint64_t now)
{
	uint32_t psn = pkt->bth.psn;
	uint8_t syn = pkt->aeth.syndrome;
	bool lost;

	switch (syn & ROCE_AETH_TYPE_MASK) {
	case ROCE_AETH_ACK:
		ENG_INC(qp, rx_packets);
		if (ack_upto(qp, psn_add(psn, 1), now))
			implicit_nak(qp, now);
		return;
	case ROCE_AETH_RNR_NAK:
		ENG_INC(qp, rnr_naks_rcvd);
		ENG_INC(qp, rx_packets);
		ack_upto(qp, psn, now);
		if (qp->base.state == IBV_QPS_ERR || qp->comp.rnr_deadline != UINT64_MAX)
			return;
		if (qp->attr.rnr_retry != ENG_RETRY_INFINITE) {
			if (qp->comp.rnr_left == 0) {
				eng_comp_fail_head(qp, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			qp->comp.rnr_left--;
		}
		/* Wait the time the responder asked for, then go back to the NAKed PSN. */
		qp->comp.rnr_deadline =
		    now + (uint64_t)roce_rnr_timer_us(syn & ROCE_AETH_VALUE_MASK) * 1000u;
		qp->comp.ack_deadline = UINT64_MAX;
		return;
	case ROCE_AETH_NAK:
		ENG_INC(qp, rx_packets);
		if ((syn & ROCE_AETH_VALUE_MASK) == ROCE_NAK_PSN_SEQ) {
			/* Everything before the NAK's PSN arrived (spec 5.5). */
			ENG_INC(qp, seq_naks_rcvd);
			ack_upto(qp, psn, now);
			if (qp->base.state != IBV_QPS_ERR)
				eng_gbn_retry(qp, now, false);
			return;
		}
		ENG_INC(qp, naks_rcvd);
		lost = ack_upto(qp, psn, now);
		(void)lost;
		if (qp->base.state != IBV_QPS_ERR)
			eng_comp_fail_head(qp, eng_nak_status(syn));
		return;
	default:
		ENG_INC(qp, drop_unexpected_ack);
		return;
	}
}

/* Selective repeat's NAK (sr.h): everything before its PSN arrived, and the bitmap says
 * what arrived after. A QP without selective repeat takes it as the NAK PSN sequence error
 * it is (go-back-N). */
static void on_sack(struct eng_qp *qp, const struct roce_pkt *pkt, uint64_t now)
{
	bool lost;

	if (pkt->payload_len != ENG_SR_SACK_BYTES ||
	    pkt->aeth.syndrome != eng_nak_syndrome(ENG_ERR_PSN_SEQ)) {
		ENG_INC(qp, drop_bad_length);
		return;
	}
	ENG_INC(qp, rx_packets);
	ENG_INC(qp, sr_sacks_rcvd);
	lost = ack_upto(qp, pkt->bth.psn, now);
	if (qp->base.state == IBV_QPS_ERR)
		return;
	if (lost) {
		implicit_nak(qp, now);
		return;
	}
	if (!qp->sr) {
		eng_gbn_retry(qp, now, false);
		return;
	}
	eng_sr_sacked(qp, pkt->bth.psn, pkt->payload);
}

/* Scatters `len` bytes into a WQE's local buffers at `offset`, all pieces checked first. */
static int place(struct eng_qp *qp, const struct eng_swqe *w, uint32_t offset, const void *src,
		 uint32_t len)
{
	struct eng_iov iov[ENG_MAX_SGE];
	const uint8_t *p = src;
	int n = eng_sge_resolve(qp, w->sge, w->num_sge, offset, len, IBV_ACCESS_LOCAL_WRITE, iov);

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		memcpy(iov[i].ptr, p, iov[i].len);
		p += iov[i].len;
	}
	return 0;
}

/* The started WQE whose PSN range holds `psn`, walking from the oldest; NULL if none.
 * *lost is set if an unanswered READ / ATOMIC lies entirely before `psn`. */
static struct eng_swqe *wqe_for_psn(struct eng_qp *qp, uint32_t psn, bool *lost, uint32_t *idx)
{
	*lost = false;
	for (uint32_t i = qp->base.sq_head; i != qp->base.sq_tail; i++) {
		struct eng_swqe *w = eng_swqe_at(qp, i);

		if (eng_ops[w->op].local && w->state == ENG_SWQE_DONE)
			continue;
		if (w->state != ENG_SWQE_ACTIVE)
			return NULL;
		if (psn_cmp(psn, w->last_psn) <= 0) {
			*idx = i;
			return psn_cmp(psn, w->first_psn) >= 0 ? w : NULL;
		}
		if (eng_ops[w->op].rd_atomic)
			*lost = true;
	}
	return NULL;
}

/* A response that answers nothing outstanding: if it passed an unanswered READ / ATOMIC,
 * that one's response was lost (implicit NAK); otherwise it is stale and dropped. */
static void unmatched_response(struct eng_qp *qp, uint32_t psn, bool lost, uint64_t now)
{
	if (!lost) {
		ENG_INC(qp, drop_unexpected_ack);
		return;
	}
	ENG_INC(qp, rx_packets);
	ack_upto(qp, psn, now);
	if (qp->base.state != IBV_QPS_ERR)
		implicit_nak(qp, now);
}

static void on_atomic_ack(struct eng_qp *qp, const struct roce_pkt *pkt, uint64_t now)
{
	uint32_t psn = pkt->bth.psn, idx;
	bool lost;
	struct eng_swqe *w = wqe_for_psn(qp, psn, &lost, &idx);

	if (!w || (w->op != ENG_OP_CMP_SWAP && w->op != ENG_OP_FETCH_ADD) || lost) {
		unmatched_response(qp, psn, lost, now);
		return;
	}
	/* Valid: everything before it was received, then the atomic itself. */
	ENG_INC(qp, rx_packets);
	ack_upto(qp, psn, now);
	if (qp->base.state == IBV_QPS_ERR)
		return;
	if (place(qp, w, 0, &pkt->atomic_orig, 8) < 0) {
		eng_comp_fail_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->state = ENG_SWQE_DONE;
	qp->comp.psn = psn_add(psn, 1);
	eng_comp_retire(qp);
	progress(qp, now);
}

/* A response of READ w (send queue index idx) ahead of the expected PSN, with selective
 * repeat: checked for its place in the READ (the length and position a response at that PSN
 * has), then placed there. */
static enum eng_sr_rd read_ahead(struct eng_qp *qp, struct eng_swqe *w, uint32_t idx,
				 const struct roce_opinfo *oi, const struct roce_pkt *pkt,
				 uint32_t expected, uint64_t now)
{
	uint32_t psn = pkt->bth.psn, pmtu = qp->attr.pmtu;
	uint64_t off = (uint64_t)(uint32_t)psn_cmp(psn, w->first_psn) * pmtu;
	if (off >= w->length)
		return ENG_SR_RD_FAR;
	uint32_t n = w->length - off < pmtu ? (uint32_t)(w->length - off) : pmtu;
	bool final = off + n == w->length;
	/* Never the first; the last only at the READ's end, but a re-request's reply ends
	 * anywhere. */
	bool ok = final ? oi->pos == ROCE_POS_LAST
			: oi->pos == ROCE_POS_MIDDLE || oi->pos == ROCE_POS_LAST;
	if (!ok || pkt->payload_len != n) {
		ENG_INC(qp, drop_bad_length);
		return ENG_SR_RD_DROP;
	}
	enum eng_sr_rd r = eng_sr_read_ahead(qp, idx, expected, psn);
	if (r != ENG_SR_RD_KEPT) {
		if (r == ENG_SR_RD_DROP)
			ENG_INC(qp, drop_unexpected_ack); /* placed before */
		return r;
	}
	ENG_INC(qp, rx_packets);
	ENG_INC(qp, sr_read_ahead);
	ack_upto(qp, psn, now);
	if (qp->base.state == IBV_QPS_ERR)
		return ENG_SR_RD_DROP;
	if (n && place(qp, w, (uint32_t)off, pkt->payload, n) < 0)
		eng_comp_fail_head(qp, IBV_WC_LOC_PROT_ERR);
	return ENG_SR_RD_KEPT;
}

static void on_read_resp(struct eng_qp *qp, const struct roce_opinfo *oi,
			 const struct roce_pkt *pkt, uint64_t now)
{
	uint32_t psn = pkt->bth.psn, idx;
	uint32_t pmtu = qp->attr.pmtu;
	bool lost;
	struct eng_swqe *w = wqe_for_psn(qp, psn, &lost, &idx);
	uint32_t rem, n;
	uint8_t want;
	int32_t d;

	if (!w || w->op != ENG_OP_READ || lost) {
		unmatched_response(qp, psn, lost, now);
		return;
	}
	uint32_t expected = psn_add(w->first_psn, w->read_done / pmtu);
	d = psn_cmp(psn, expected);
	if (d > 0 && qp->sr) {
		/* Selective repeat: placed where it goes, and the missing ones asked for again
		 * alone (sr.h). */
		switch (read_ahead(qp, w, idx, oi, pkt, expected, now)) {
		case ENG_SR_RD_KEPT:
		case ENG_SR_RD_DROP:
			return;
		case ENG_SR_RD_FAR:
			break;
		}
	}
	if (d != 0) {
		/* Responses come in PSN order: ahead means one is missing, so ask again from it
		 * (the earlier WQEs are acknowledged by this one all the same). */
		ENG_INC(qp, drop_unexpected_ack);
		if (d > 0) {
			ack_upto(qp, psn, now);
			if (qp->base.state != IBV_QPS_ERR)
				implicit_nak(qp, now);
		}
		return;
	}
	rem = w->length - w->read_done;
	n = rem < pmtu ? rem : pmtu;
	if (w->read_done == 0)
		want = rem <= pmtu ? ROCE_POS_ONLY : ROCE_POS_FIRST;
	else
		want = rem <= pmtu ? ROCE_POS_LAST : ROCE_POS_MIDDLE;
	/* The reply to a re-request for a part (selective repeat) ends before the READ does,
	 * also one that arrives after a go-back-N took over. */
	if (qp->sr && rem > pmtu &&
	    oi->pos == (want == ROCE_POS_FIRST ? ROCE_POS_ONLY : ROCE_POS_LAST))
		want = oi->pos;
	bool part = eng_sr_read_open(qp, idx);
	if (oi->pos != want || pkt->payload_len != n) {
		ENG_INC(qp, drop_bad_length);
		return;
	}
	ENG_INC(qp, rx_packets);
	ack_upto(qp, psn, now);
	if (qp->base.state == IBV_QPS_ERR)
		return;
	if (n && place(qp, w, w->read_done, pkt->payload, n) < 0) {
		eng_comp_fail_head(qp, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->read_done += n;
	qp->comp.psn = psn_add(psn, 1);
	if (part) {
		/* Past what was placed ahead of it. */
		uint32_t more = eng_sr_read_filled(qp, idx, psn, w->last_psn);
		uint64_t done = (uint64_t)w->read_done + (uint64_t)more * pmtu;
		w->read_done = done < w->length ? (uint32_t)done : w->length;
		qp->comp.psn = psn_add(psn, 1 + more);
	}
	if (w->read_done == w->length) {
		w->state = ENG_SWQE_DONE;
		eng_comp_retire(qp);
	}
	progress(qp, now);
}

void eng_comp_input(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt,
		    uint64_t now)
{
	uint32_t psn = pkt->bth.psn;

	/* Only PSNs sent and not yet answered can match (IBA 9.7.5.2.1); anything else is a
	 * stale duplicate or garbage. */
	if (qp->base.sq_head == qp->base.sq_tail || psn_cmp(psn, qp->comp.psn) < 0 ||
	    psn_cmp(psn, qp->req.psn_hi) >= 0) {
		ENG_INC(qp, drop_unexpected_ack);
		return;
	}
	switch (oi->kind) {
	case ROCE_KIND_ACK:
		on_ack(qp, pkt, now);
		break;
	case ROCE_KIND_SACK:
		on_sack(qp, pkt, now);
		break;
	case ROCE_KIND_ATOMIC_ACK:
		on_atomic_ack(qp, pkt, now);
		break;
	case ROCE_KIND_READ_RESP:
		on_read_resp(qp, oi, pkt, now);
		break;
	default:
		ENG_INC(qp, drop_bad_opcode);
		break;
	}
}

void eng_comp_timer(struct eng_qp *qp, uint64_t now)
{
	if (qp->comp.rnr_deadline <= now) {
		/* RNR wait over: resend from the NAKed PSN (spec 5.5). */
		qp->comp.rnr_deadline = UINT64_MAX;
		qp->comp.retrying = true;
		if (!(qp->sr && eng_sr_rnr_over(qp)))
			eng_gbn_rewind(qp);
	}
	if (qp->comp.ack_deadline <= now) {
		qp->comp.ack_deadline = UINT64_MAX;
		if (psn_cmp(qp->comp.psn, qp->req.psn_hi) >= 0)
			return;
		ENG_INC(qp, ack_timeouts);
		eng_gbn_retry(qp, now, true);
	}
}
