/* Go-back-N: RC's loss recovery as IBA has it (spec 5.5; rxe check_psn and req_retry). It is
 * the policy of every RC QP that did not agree to selective repeat (sr.c), and the one that
 * selective repeat falls back into (sr.h says when). One part per role:
 *   responder  a request past the expected PSN is dropped, and the gap answered once with a
 *              NAK PSN sequence error that carries the expected PSN (eng_gbn_gap);
 *   completer  that NAK, an implicit NAK (an acknowledgement that passes an unanswered READ
 *              or ATOMIC) or the ACK timer starts a retry, counted against retry_cnt
 *              (eng_gbn_retry);
 *   requester  the pass goes back to the oldest unacknowledged PSN, mid-message where packets
 *              of it were acknowledged (eng_gbn_rewind): a WQE sent again gets exactly its
 *              original PSNs, since every PSN follows from its place in the pass.
 * The duplicates a retry causes are the responder's under any policy (resp.c). */
#include "engine/eng_int.h"

void eng_gbn_gap(struct eng_qp *qp)
{
	ENG_INC(qp, drop_psn_gap);
	if (qp->resp.nak_sent || !eng_resp_nak(qp, eng_nak_syndrome(ENG_ERR_PSN_SEQ), qp->resp.psn))
		return;
	qp->resp.nak_sent = true;
	ENG_INC(qp, seq_naks_sent);
}

bool eng_gbn_retry(struct eng_qp *qp, uint64_t now, bool timeout)
{
	/* A retry under way and not yet moving is restarted by the timer only, not by more
	 * NAKs (spec 5.5). */
	if (!timeout && qp->comp.retrying)
		return false;
	if (qp->comp.rnr_deadline != UINT64_MAX)
		return false; /* the RNR wait ends in a go-back-N anyway */
	if (qp->attr.retry_cnt != ENG_RETRY_INFINITE &&
	    !(timeout && qp->sr && !eng_sr_expiry_counts(qp, now))) {
		if (qp->comp.retry_left == 0) {
			eng_comp_fail_head(qp, IBV_WC_RETRY_EXC_ERR);
			return false;
		}
		qp->comp.retry_left--;
	}
	qp->comp.retrying = true;
	qp->comp.ack_deadline = UINT64_MAX; /* restarted by the first resent packet */
	/* Selective repeat sends its holes again instead, where it has any (sr.h). */
	if (timeout && qp->sr && eng_sr_timeout(qp))
		return true;
	eng_gbn_rewind(qp);
	return true;
}

void eng_gbn_rewind(struct eng_qp *qp)
{
	struct eng_swqe *w;

	if (qp->sr)
		eng_sr_rewound(qp);

	qp->req.idx = qp->base.sq_head;
	qp->req.psn = qp->comp.psn;
	qp->req.offset = 0;
	qp->req.rd_out = 0;
	qp->req.noack = 0;
	if (qp->req.idx == qp->base.sq_tail)
		return;
	w = eng_swqe_at(qp, qp->req.idx);
	if (w->state != ENG_SWQE_ACTIVE)
		return;
	if (w->op == ENG_OP_READ) {
		qp->req.psn = psn_add(w->first_psn, w->read_done / qp->attr.pmtu);
	} else if (eng_ops[w->op].payload) {
		/* Resume after the acknowledged packets, mid-message (rxe req_retry). */
		int32_t acked = psn_cmp(qp->comp.psn, w->first_psn);

		if (acked > 0 && (uint64_t)acked * qp->attr.pmtu < w->length) {
			qp->req.offset = (uint32_t)acked * qp->attr.pmtu;
		} else {
			qp->req.psn = w->first_psn;
		}
	} else {
		qp->req.psn = w->first_psn;
	}
}
