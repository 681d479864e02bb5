/* QP object: creation, attributes, the state machine, posting, flush on ERR, and the public
 * entry points that dispatch to the requester (req.c), responder (resp.c) and completer
 * (comp.c). Behaviour follows IBA ch. 10 and rxe (spec roce.md section 8). */
#include <stdlib.h>

#include "engine/eng_int.h"

const char *const eng_counter_names[ENG_CNT__COUNT] = {
#define ENG_COUNTER_NAME(name, desc) #name,
    ENG_COUNTERS(ENG_COUNTER_NAME)
#undef ENG_COUNTER_NAME
};

#define NOP 0xFF
/* One row per operation (IBA 9.2 opcode table, spec 3): RC opcodes by position, then UC
 * (SEND and WRITE only) and UD (SEND ONLY); the engine never computes opcode numbers. */
#define ROW(nm, wc, kd, rc, pl, rda, rw, uc, ud)                                                   \
	{                                                                                          \
		.name = (nm), .wc_opcode = (wc), .kind = (kd), .opcode = rc, .payload = (pl),      \
		.rd_atomic = (rda), .rwr = (rw), .uc_opcode = uc, .ud_opcode = (ud)                \
	}
#define POS(f, m, l, o)                                                                            \
	{                                                                                          \
		f, m, l, o                                                                         \
	}
#define NONE POS(NOP, NOP, NOP, NOP)
const struct eng_op_info eng_ops[ENG_OP__COUNT] = {
    [ENG_OP_SEND] =
	ROW("SEND", IBV_WC_SEND, ROCE_KIND_SEND,
	    POS(ROCE_RC_SEND_FIRST, ROCE_RC_SEND_MIDDLE, ROCE_RC_SEND_LAST, ROCE_RC_SEND_ONLY),
	    true, false, true,
	    POS(ROCE_UC_SEND_FIRST, ROCE_UC_SEND_MIDDLE, ROCE_UC_SEND_LAST, ROCE_UC_SEND_ONLY),
	    ROCE_UD_SEND_ONLY),
    [ENG_OP_SEND_IMM] = ROW(
	"SEND_IMM", IBV_WC_SEND, ROCE_KIND_SEND,
	POS(ROCE_RC_SEND_FIRST, ROCE_RC_SEND_MIDDLE, ROCE_RC_SEND_LAST_IMM, ROCE_RC_SEND_ONLY_IMM),
	true, false, true,
	POS(ROCE_UC_SEND_FIRST, ROCE_UC_SEND_MIDDLE, ROCE_UC_SEND_LAST_IMM, ROCE_UC_SEND_ONLY_IMM),
	ROCE_UD_SEND_ONLY_IMM),
    [ENG_OP_SEND_INV] = ROW(
	"SEND_INV", IBV_WC_SEND, ROCE_KIND_SEND,
	POS(ROCE_RC_SEND_FIRST, ROCE_RC_SEND_MIDDLE, ROCE_RC_SEND_LAST_INV, ROCE_RC_SEND_ONLY_INV),
	true, false, true, NONE, NOP),
    [ENG_OP_WRITE] =
	ROW("WRITE", IBV_WC_RDMA_WRITE, ROCE_KIND_WRITE,
	    POS(ROCE_RC_WRITE_FIRST, ROCE_RC_WRITE_MIDDLE, ROCE_RC_WRITE_LAST, ROCE_RC_WRITE_ONLY),
	    true, false, false,
	    POS(ROCE_UC_WRITE_FIRST, ROCE_UC_WRITE_MIDDLE, ROCE_UC_WRITE_LAST, ROCE_UC_WRITE_ONLY),
	    NOP),
    [ENG_OP_WRITE_IMM] = ROW("WRITE_IMM", IBV_WC_RDMA_WRITE, ROCE_KIND_WRITE,
			     POS(ROCE_RC_WRITE_FIRST, ROCE_RC_WRITE_MIDDLE, ROCE_RC_WRITE_LAST_IMM,
				 ROCE_RC_WRITE_ONLY_IMM),
			     true, false, true,
			     POS(ROCE_UC_WRITE_FIRST, ROCE_UC_WRITE_MIDDLE, ROCE_UC_WRITE_LAST_IMM,
				 ROCE_UC_WRITE_ONLY_IMM),
			     NOP),
    [ENG_OP_READ] = ROW("READ", IBV_WC_RDMA_READ, ROCE_KIND_READ_REQ,
			POS(NOP, NOP, NOP, ROCE_RC_READ_REQUEST), false, true, false, NONE, NOP),
    [ENG_OP_CMP_SWAP] = ROW("CMP_SWAP", IBV_WC_COMP_SWAP, ROCE_KIND_ATOMIC,
			    POS(NOP, NOP, NOP, ROCE_RC_CMP_SWAP), false, true, false, NONE, NOP),
    [ENG_OP_FETCH_ADD] = ROW("FETCH_ADD", IBV_WC_FETCH_ADD, ROCE_KIND_ATOMIC,
			     POS(NOP, NOP, NOP, ROCE_RC_FETCH_ADD), false, true, false, NONE, NOP),
    /* Local operations: no packet; the QP types as rxe's work request table has them (BIND_MW
     * RC and UC, LOCAL_INV RC), and the RC requester of XRC. */
    [ENG_OP_BIND_MW] = {.name = "BIND_MW",
			.wc_opcode = IBV_WC_BIND_MW,
			.opcode = NONE,
			.uc_opcode = NONE,
			.ud_opcode = NOP,
			.local = ENG_LOCAL_RC | ENG_LOCAL_UC | ENG_LOCAL_XRC},
    [ENG_OP_LOCAL_INV] = {.name = "LOCAL_INV",
			  .wc_opcode = IBV_WC_LOCAL_INV,
			  .opcode = NONE,
			  .uc_opcode = NONE,
			  .ud_opcode = NOP,
			  .local = ENG_LOCAL_RC | ENG_LOCAL_XRC},
};
#undef ROW
#undef POS
#undef NONE

uint8_t eng_op_opcode(const struct eng_op_info *info, enum ibv_qp_type type, enum eng_pos_idx pi)
{
	switch (type) {
	case IBV_QPT_UC:
		return info->uc_opcode[pi];
	case IBV_QPT_UD:
		return pi == ENG_PI_ONLY ? info->ud_opcode : NOP;
	case IBV_QPT_XRC_SEND:
		/* IBA 9.2: XRC has every RC operation, at the RC opcode + 0xA0. */
		return info->opcode[pi] == NOP ? NOP : (uint8_t)(info->opcode[pi] | ROCE_OP_XRC);
	case IBV_QPT_XRC_RECV:
		return NOP; /* no send queue */
	default:
		return info->opcode[pi];
	}
}

bool eng_op_valid(const struct eng_op_info *info, enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return info->local ? info->local & ENG_LOCAL_RC : info->opcode[ENG_PI_ONLY] != NOP;
	case IBV_QPT_UC:
		return info->local ? info->local & ENG_LOCAL_UC
				   : info->uc_opcode[ENG_PI_ONLY] != NOP;
	case IBV_QPT_XRC_SEND:
		return info->local ? info->local & ENG_LOCAL_XRC : info->opcode[ENG_PI_ONLY] != NOP;
	case IBV_QPT_UD:
		return !info->local && info->ud_opcode != NOP;
	default:
		return false;
	}
}

static const char *const state_names[] = {
    [IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
    [IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",	[IBV_QPS_SQE] = "SQE",
    [IBV_QPS_ERR] = "ERR",
};

const char *eng_qp_state_name(enum ibv_qp_state s)
{
	if ((unsigned)s < sizeof(state_names) / sizeof(state_names[0]) && state_names[s])
		return state_names[s];
	return "?";
}

/* ---- error mappings (the only two) ---- */

uint8_t eng_nak_syndrome(enum eng_err err)
{
	switch (err) {
	case ENG_ERR_PSN_SEQ:
		return ROCE_AETH_NAK | ROCE_NAK_PSN_SEQ;
	case ENG_ERR_INVALID_REQ:
		return ROCE_AETH_NAK | ROCE_NAK_INVALID_REQ;
	case ENG_ERR_REMOTE_ACCESS:
		return ROCE_AETH_NAK | ROCE_NAK_REMOTE_ACCESS;
	case ENG_ERR_REMOTE_OP:
	case ENG_ERR_NONE:
		break;
	}
	return ROCE_AETH_NAK | ROCE_NAK_REMOTE_OP;
}

/* Fatal NAK codes -> requester completion status (spec 5.3, rxe check_ack): reserved codes
 * and Invalid RD Request are reported as remote operational errors. */
enum ibv_wc_status eng_nak_status(uint8_t syndrome)
{
	switch (syndrome & ROCE_AETH_VALUE_MASK) {
	case ROCE_NAK_INVALID_REQ:
		return IBV_WC_REM_INV_REQ_ERR;
	case ROCE_NAK_REMOTE_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	default:
		return IBV_WC_REM_OP_ERR;
	}
}

/* ---- helpers shared by the roles (WQE and SGE helpers: wqe.c) ---- */

void eng_qp_to_err(struct eng_qp *qp, enum ibv_event_type ev, bool raise)
{
	if (qp->base.state == IBV_QPS_ERR)
		return;
	qp->base.state = IBV_QPS_ERR;
	qp->comp.ack_deadline = UINT64_MAX;
	qp->comp.rnr_deadline = UINT64_MAX;
	eng_resp_drop_data(qp);
	/* IBA 10.3.1 / spec 8: every outstanding WR completes with WR_FLUSH_ERR, in order: the
	 * send queue (as rxe, each WQE alike), the receive in progress, the receive queue. */
	eng_base_flush_sq(&qp->base, false);
	qp->req.idx = qp->base.sq_tail;
	qp->req.offset = 0;
	qp->req.rd_out = 0;
	eng_resp_flush_held(qp, IBV_WC_WR_FLUSH_ERR);
	eng_base_err_flush(&qp->base, ev, raise);
}

/* ---- congestion control of the responder's data ---- */

/* The responder's next job is read response data (what congestion control paces: ACKs and
 * atomic responses are small and go at once, as on RoCE NICs, which rate-limit a QP's
 * data). */
static bool resp_data_next(const struct eng_qp *qp)
{
	return eng_resp_pending(qp) &&
	       qp->respq[qp->resp.q_head & qp->respq_mask].type == ENG_JOB_READ;
}

/* Read responses wait for the QP's paced time like its requests (eng_req_output); what is
 * queued behind them waits too, in order. Out of line: only QPs with congestion control. */
__attribute__((noinline)) static bool resp_paced(struct eng_qp *qp, uint64_t now)
{
	if (!resp_data_next(qp) || qp->cc->ops->send_at(qp->cc) <= now)
		return false;
	ENG_INC(qp, cc_held);
	return true;
}

__attribute__((noinline)) void eng_cc_sent(struct eng_qp *qp, uint32_t payload, uint64_t now)
{
	qp->cc->ops->sent(qp->cc, payload + 58, now);
}

/* A response left: read response data counts on the link as requests do. */
static void resp_sent(struct eng_qp *qp, const struct roce_pkt *out, uint64_t now)
{
	const struct roce_opinfo *oi = roce_opinfo(out->bth.opcode);
	if (oi && oi->kind == ROCE_KIND_READ_RESP)
		eng_cc_sent(qp, out->payload_len, now);
}

/* ---- wake-up policy ---- */

static bool output_due(struct eng_qp *qp)
{
	if (qp->base.state == IBV_QPS_RESET || qp->base.state == IBV_QPS_INIT)
		return false;
	return eng_resp_pending(qp) || eng_req_ready(qp);
}

static void kick(struct eng_qp *qp, uint64_t old_deadline)
{
	uint64_t d = eng_qp_deadline(qp);
	bool earlier = d < old_deadline;

	if (qp->base.env.deadline) {
		if (d != old_deadline)
			qp->base.env.deadline(qp->base.env.ctx, &qp->base);
		earlier = false; /* the caller filed the timer: a wake-up is for output only */
	}
	if (qp->base.env.wake && (earlier || output_due(qp)))
		qp->base.env.wake(qp->base.env.ctx, &qp->base);
}

/* ---- create / destroy / attributes ---- */

/* Responder memory for nres resources: the resource ring, and an output queue with room for
 * nres read / atomic jobs, an ACK between each two and the slot kept for a fatal NAK. It only
 * grows; jobs already queued keep their order. 0 or -ENOMEM (nothing changed). */
static int resp_mem_fit(struct eng_qp *qp, uint32_t nres)
{
	uint32_t qsize = eng_pow2_at_least(2 * nres + 2);
	struct eng_res *res = NULL;
	struct eng_job *q = NULL;

	if (qsize < ENG_RESPQ_MIN)
		qsize = ENG_RESPQ_MIN;
	if (nres > qp->res_cap) {
		res = calloc(nres, sizeof(*res));
		if (!res)
			return -ENOMEM;
	}
	if (qsize > qp->respq_mask + 1 || !qp->respq) {
		q = calloc(qsize, sizeof(*q));
		if (!q) {
			free(res);
			return -ENOMEM;
		}
	}
	if (res) {
		if (qp->res_cap)
			memcpy(res, qp->res, qp->res_cap * sizeof(*res));
		free(qp->res);
		qp->res = res;
		qp->res_cap = nres;
	}
	if (q) {
		uint32_t n = 0;

		for (uint32_t i = qp->resp.q_head; i != qp->resp.q_tail; i++)
			q[n++] = qp->respq[i & qp->respq_mask];
		free(qp->respq);
		qp->respq = q;
		qp->respq_mask = qsize - 1;
		qp->resp.q_head = 0;
		qp->resp.q_tail = n;
	}
	return 0;
}

int eng_qp_create(const struct eng_qp_init *init, const struct eng_env *env, struct eng_qp **out)
{
	struct eng_qp *qp;
	int err;

	if (!init || !env || !out || !env->mem_resolve)
		return -EINVAL;
	switch (init->type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		if (!init->send_cq || !init->recv_cq || init->max_send_wr == 0 || init->xrcd)
			return -EINVAL;
		break;
	case IBV_QPT_XRC_SEND:
		/* A send queue only: no receive queue, CQ or SRQ. */
		if (!init->send_cq || init->recv_cq || init->srq || init->max_send_wr == 0 ||
		    init->xrcd)
			return -EINVAL;
		break;
	case IBV_QPT_XRC_RECV:
		/* A responder only: its receives go to the XRC SRQs of its domain. */
		if (init->send_cq || init->recv_cq || init->srq || init->max_send_wr ||
		    !init->xrcd || !env->xsrq_lookup)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	if (init->max_send_wr > (1u << 20) || init->max_send_sge > ENG_MAX_SGE ||
	    init->max_inline > ENG_MAX_INLINE || init->qpn > PSN_MASK)
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	err = eng_base_init(&qp->base, init, env, false);
	if (err)
		goto free_qp;
	err = resp_mem_fit(qp, 0);
	if (err)
		goto free_queues;
	qp->attr.pmtu = 256; /* IBA: a QP starts at the minimum MTU until INIT->RTR */
	qp->attr.pkey = ROCE_DEFAULT_PKEY;
	eng_req_reset(qp);
	eng_comp_reset(qp);
	eng_resp_reset(qp);
	*out = qp;
	return 0;

free_queues:
	eng_base_fini(&qp->base);
free_qp:
	free(qp);
	return err;
}

void eng_qp_destroy(struct eng_qp *qp)
{
	if (!qp)
		return;
	eng_base_fini(&qp->base);
	free(qp->res);
	free(qp->respq);
	if (qp->cc)
		qp->cc->ops->destroy(qp->cc);
	eng_sr_destroy(qp->sr);
	free(qp);
}

int eng_qp_set_cc(struct eng_qp *qp, const struct dcqcn_params *p)
{
	struct eng_cc *cc;
	int r = eng_cc_dcqcn_create(p, &cc);
	if (r < 0)
		return r;
	uint64_t old = eng_qp_deadline(qp);
	if (qp->cc)
		qp->cc->ops->destroy(qp->cc);
	qp->cc = cc;
	kick(qp, old);
	return 0;
}

void eng_qp_cnp(struct eng_qp *qp, uint64_t now_ns)
{
	if (!qp->cc)
		return;
	uint64_t old = eng_qp_deadline(qp);
	uint64_t cuts = qp->cc->ops->cuts(qp->cc);
	ENG_INC(qp, cc_cnps);
	qp->cc->ops->cnp(qp->cc, now_ns);
	qp->counters[ENG_CNT_cc_cuts] += qp->cc->ops->cuts(qp->cc) - cuts;
	kick(qp, old);
}

int eng_qp_set_sr(struct eng_qp *qp, bool on)
{
	if (qp->base.init.type != IBV_QPT_RC)
		return -EINVAL;
	if (on == (qp->sr != NULL))
		return 0;
	uint64_t old = eng_qp_deadline(qp);
	if (on) {
		int r = eng_sr_create(&qp->sr);
		if (r < 0)
			return r;
	} else {
		/* What the responder keeps is dropped: the peer sends it again. */
		eng_sr_destroy(qp->sr);
		qp->sr = NULL;
	}
	kick(qp, old);
	return 0;
}

bool eng_qp_sr(const struct eng_qp *qp)
{
	return qp->sr != NULL;
}

uint64_t eng_qp_cc_rate(const struct eng_qp *qp)
{
	return qp->cc ? qp->cc->ops->rate(qp->cc) : 0;
}

void *eng_qp_user(const struct eng_qp *qp)
{
	return qp->base.init.user;
}

uint32_t eng_qp_num(const struct eng_qp *qp)
{
	return qp->base.init.qpn;
}

uint32_t eng_qp_dest_num(const struct eng_qp *qp)
{
	return qp->attr.dest_qpn;
}

bool eng_qp_awaits_response(const struct eng_qp *qp)
{
	return eng_qp_reliable(qp) && psn_cmp(qp->comp.psn, qp->req.psn_hi) < 0;
}

enum ibv_qp_state eng_qp_state(const struct eng_qp *qp)
{
	return qp->base.state;
}

const uint64_t *eng_qp_counters(const struct eng_qp *qp)
{
	return qp->counters;
}

static uint32_t round_rd_atomic(uint8_t v)
{
	/* rxe rounds ORD and IRD up to a power of two (spec 5.7, 8). */
	uint32_t r = v ? eng_pow2_at_least(v) : 0;

	return r > ENG_MAX_RD_ATOMIC ? ENG_MAX_RD_ATOMIC : r;
}

int eng_qp_set_attr(struct eng_qp *qp, const struct eng_qp_attr *attr)
{
	uint64_t old = eng_qp_deadline(qp);
	uint32_t pmtu = attr->pmtu;
	uint32_t nres = round_rd_atomic(attr->max_dest_rd_atomic);
	int err = resp_mem_fit(qp, nres);

	if (err)
		return err;
	qp->attr = *attr;
	if (pmtu != 256 && pmtu != 512 && pmtu != 1024 && pmtu != 2048 && pmtu != 4096)
		qp->attr.pmtu = 256;
	qp->attr.dest_qpn &= PSN_MASK;
	qp->attr.sq_psn &= PSN_MASK;
	qp->attr.rq_psn &= PSN_MASK;
	qp->attr.retry_cnt &= 7;
	qp->attr.rnr_retry &= 7;
	qp->attr.min_rnr_timer &= ROCE_AETH_VALUE_MASK;
	qp->req.ord = (uint8_t)round_rd_atomic(attr->max_rd_atomic);
	qp->resp.nres = nres;
	if (qp->resp.nres && qp->resp.res_next >= qp->resp.nres)
		qp->resp.res_next = 0;
	kick(qp, old);
	return 0;
}

/* ---- state machine ---- */

static void check_drained(struct eng_qp *qp)
{
	if (!eng_base_draining(&qp->base))
		return;
	/* Drained: nothing started is left unretired (IBA 10.3.1 SQD). */
	if (qp->base.sq_head != qp->req.idx || qp->req.offset != 0)
		return;
	if (qp->req.idx != qp->base.sq_tail &&
	    eng_swqe_at(qp, qp->req.idx)->state != ENG_SWQE_POSTED)
		return;
	eng_base_drained(&qp->base);
}

void eng_qp_set_state(struct eng_qp *qp, enum ibv_qp_state state, uint64_t now_ns)
{
	uint64_t old = eng_qp_deadline(qp);
	enum ibv_qp_state from = qp->base.state;

	(void)now_ns;
	switch (state) {
	case IBV_QPS_RESET:
		eng_base_reset(&qp->base);
		eng_req_reset(qp);
		eng_comp_reset(qp);
		eng_resp_reset(qp);
		break;
	case IBV_QPS_INIT:
		qp->base.state = IBV_QPS_INIT;
		break;
	case IBV_QPS_RTR:
		if (from != IBV_QPS_RTR) {
			eng_resp_reset(qp);
			qp->resp.psn = qp->attr.rq_psn;
		}
		qp->base.state = IBV_QPS_RTR;
		break;
	case IBV_QPS_RTS:
		if (from == IBV_QPS_RTR || from == IBV_QPS_INIT || from == IBV_QPS_RESET) {
			eng_req_reset(qp);
			eng_comp_reset(qp);
			qp->req.psn = qp->attr.sq_psn;
			qp->req.psn_hi = qp->attr.sq_psn;
			qp->comp.psn = qp->attr.sq_psn;
		}
		qp->base.state = IBV_QPS_RTS;
		break;
	case IBV_QPS_SQD:
		qp->base.state = IBV_QPS_SQD;
		qp->base.drained = false;
		check_drained(qp);
		break;
	case IBV_QPS_SQE:
		qp->base.state = IBV_QPS_SQE;
		break;
	case IBV_QPS_ERR:
		eng_qp_to_err(qp, 0, false);
		break;
	default:
		break;
	}
	kick(qp, old);
}

/* ---- posting ---- */

int eng_qp_post_send(struct eng_qp *qp, const struct ibv_send_wr *wr,
		     const struct ibv_send_wr **bad, uint64_t now_ns)
{
	uint64_t old = eng_qp_deadline(qp);
	int err = 0;

	(void)now_ns;
	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD &&
	    qp->base.state != IBV_QPS_ERR) {
		*bad = wr;
		return -EINVAL;
	}
	for (; wr; wr = wr->next) {
		uint64_t len = 0;
		int op =
		    eng_swqe_check(wr, qp->base.init.max_send_sge, qp->base.init.max_inline, &len);

		if (op < 0 || !eng_op_valid(&eng_ops[op], qp->base.init.type) ||
		    (qp->base.init.type == IBV_QPT_UD && !wr->wr.ud.ah)) {
			/* The opcode table says what each transport has (spec 3: UC SEND and
			 * WRITE, UD SEND only); UD needs an address handle. */
			err = -EINVAL;
			break;
		}
		if (qp->base.sq_tail - qp->base.sq_head >= qp->base.sq_max) {
			err = -ENOMEM;
			break;
		}
		if (qp->base.state == IBV_QPS_ERR) {
			/* Spec 8: WRs posted in ERR complete at once with WR_FLUSH_ERR. */
			eng_base_flush_wr(&qp->base, wr->wr_id, op);
			continue;
		}
		struct eng_swqe *w = eng_swqe_at(qp, qp->base.sq_tail);

		eng_swqe_fill(w, wr, op, (uint32_t)len, qp->base.init.sq_sig_all);
		if (qp->base.init.type == IBV_QPT_UD) {
			/* The destination is copied now: the WR's ibv_ah may go after the post. A
			 * controlled Q_Key (bit 31) means the QP's own (IBA ch. 10; rxe sends the
			 * WR's value as it is). */
			w->ah = wr->wr.ud.ah->handle;
			w->ud_qpn = wr->wr.ud.remote_qpn & PSN_MASK;
			w->ud_qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey
									   : wr->wr.ud.remote_qkey;
		} else {
			w->ah = 0;
		}
		/* XRC: the SRQ at the target, per message (ibv_post_send(3)); sent in the XRCETH
		 * of every packet of it, and checked by the target. */
		w->xrc_srqn = qp->base.init.type == IBV_QPT_XRC_SEND
				  ? wr->qp_type.xrc.remote_srqn & PSN_MASK
				  : 0;
		qp->base.sq_tail++;
	}
	if (err)
		*bad = wr;
	kick(qp, old);
	return err;
}

/* ---- packets in and out ---- */

static bool receives_requests(const struct eng_qp *qp)
{
	/* Spec 8: RTR and later receive requests; RESET, INIT and ERR drop them. */
	return qp->base.state == IBV_QPS_RTR || qp->base.state == IBV_QPS_RTS ||
	       qp->base.state == IBV_QPS_SQD || qp->base.state == IBV_QPS_SQE;
}

/* The BTH transport of a QP type's packets (opcode bits 7..5). */
static uint8_t qp_transport(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_UD:
		return ROCE_TR_UD;
	case IBV_QPT_UC:
		return ROCE_TR_UC;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return ROCE_TR_XRC;
	default:
		return ROCE_TR_RC;
	}
}

void eng_qp_input(struct eng_qp *qp, const struct roce_pkt *pkt, uint64_t now_ns)
{
	eng_qp_input_net(qp, pkt, NULL, now_ns);
}

void eng_qp_input_net(struct eng_qp *qp, const struct roce_pkt *pkt, const uint8_t *grh,
		      uint64_t now_ns)
{
	uint64_t old = eng_qp_deadline(qp);
	const struct roce_opinfo *oi = roce_opinfo(pkt->bth.opcode);
	enum ibv_qp_type type = qp->base.init.type;
	uint8_t transport = qp_transport(type);
	bool request;

	/* The opcode's transport must be the QP's (rxe check_type_state). */
	if (!oi || oi->transport != transport) {
		ENG_INC(qp, drop_bad_opcode);
		return;
	}
	/* XRC splits RC in two: an XRC_SEND QP takes only responses, an XRC_RECV QP only
	 * requests (IBA 9.8.x). */
	request = oi->kind == ROCE_KIND_SEND || oi->kind == ROCE_KIND_WRITE ||
		  oi->kind == ROCE_KIND_READ_REQ || oi->kind == ROCE_KIND_ATOMIC;
	if ((type == IBV_QPT_XRC_SEND && request) || (type == IBV_QPT_XRC_RECV && !request)) {
		ENG_INC(qp, drop_bad_opcode);
		return;
	}
	if (transport == ROCE_TR_UC || transport == ROCE_TR_UD) {
		/* UC and UD opcodes are all requests: there are no responses to them. */
		if (!receives_requests(qp)) {
			ENG_INC(qp, drop_bad_state);
			return;
		}
		if (transport == ROCE_TR_UD)
			eng_resp_input_ud(qp, oi, pkt, grh);
		else
			eng_resp_input_uc(qp, oi, pkt);
		kick(qp, old);
		return;
	}
	switch (oi->kind) {
	case ROCE_KIND_SEND:
	case ROCE_KIND_WRITE:
	case ROCE_KIND_READ_REQ:
	case ROCE_KIND_ATOMIC:
		if (!receives_requests(qp)) {
			ENG_INC(qp, drop_bad_state);
			return;
		}
		eng_resp_input(qp, oi, pkt);
		break;
	case ROCE_KIND_READ_RESP:
	case ROCE_KIND_ACK:
	case ROCE_KIND_SACK:
	case ROCE_KIND_ATOMIC_ACK:
		if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD &&
		    qp->base.state != IBV_QPS_SQE) {
			ENG_INC(qp, drop_bad_state);
			return;
		}
		eng_comp_input(qp, oi, pkt, now_ns);
		check_drained(qp);
		break;
	default:
		ENG_INC(qp, drop_bad_opcode);
		return;
	}
	kick(qp, old);
}

int eng_qp_output(struct eng_qp *qp, uint64_t now_ns, struct roce_pkt *out, uint8_t *buf,
		  size_t buf_cap)
{
	return eng_qp_output_dest(qp, now_ns, out, buf, buf_cap, NULL);
}

int eng_qp_output_dest(struct eng_qp *qp, uint64_t now_ns, struct roce_pkt *out, uint8_t *buf,
		       size_t buf_cap, uint32_t *ah)
{
	uint32_t dest = 0;
	int n = 0;

	if (ah)
		*ah = 0;
	if (qp->base.state == IBV_QPS_RESET || qp->base.state == IBV_QPS_INIT)
		return 0;
	if (buf_cap < qp->attr.pmtu)
		return -EINVAL;
	/* Nothing to send (most calls: the core asks each QP it woke until it has nothing):
	 * the answer without building a packet or looking at the deadline twice. */
	bool req_state = qp->base.state == IBV_QPS_RTS || qp->base.state == IBV_QPS_SQD;
	if (!eng_resp_pending(qp) && !(req_state && eng_req_ready(qp))) {
		check_drained(qp);
		return 0;
	}
	uint64_t old = eng_qp_deadline(qp);
	memset(out, 0, sizeof(*out));
	if (eng_resp_pending(qp) && !(qp->cc && resp_paced(qp, now_ns)))
		n = eng_resp_output(qp, out, buf);
	if (n > 0 && qp->cc)
		resp_sent(qp, out, now_ns);
	if (n == 0 && req_state) {
		memset(out, 0, sizeof(*out));
		n = eng_req_output(qp, now_ns, out, buf, &dest);
		check_drained(qp);
	}
	if (n > 0) {
		ENG_INC(qp, tx_packets);
		if (ah)
			*ah = dest;
	}
	/* A request sent starts the ACK timer; a local operation that failed stops it. */
	if (qp->base.env.deadline && eng_qp_deadline(qp) != old)
		qp->base.env.deadline(qp->base.env.ctx, &qp->base);
	return n > 0 ? 1 : 0;
}

int eng_qp_output_ref(struct eng_qp *qp, uint64_t now_ns, struct roce_pkt *out, uint8_t *buf,
		      size_t buf_cap, uint32_t *ah, uint32_t ref_min)
{
	qp->tx_ref = ref_min ? ref_min : 1;
	int r = eng_qp_output_dest(qp, now_ns, out, buf, buf_cap, ah);
	qp->tx_ref = 0;
	return r;
}

/* d, or earlier: the congestion control's timers, and the paced send of a request waiting for
 * its rate. Out of line: the deadline is asked for several times per packet, with congestion
 * control or not. */
__attribute__((noinline)) static uint64_t cc_deadline(const struct eng_qp *qp, uint64_t d)
{
	uint64_t c = qp->cc->ops->deadline(qp->cc);
	uint64_t at = qp->cc->ops->send_at(qp->cc);
	if (at && at < c && (eng_req_ready((struct eng_qp *)qp) || resp_data_next(qp)))
		c = at;
	return c < d ? c : d;
}

uint64_t eng_qp_deadline(const struct eng_qp *qp)
{
	uint64_t d = qp->comp.ack_deadline;

	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		return UINT64_MAX;
	if (qp->comp.rnr_deadline < d)
		d = qp->comp.rnr_deadline;
	return qp->cc ? cc_deadline(qp, d) : d;
}

void eng_qp_timer(struct eng_qp *qp, uint64_t now_ns)
{
	uint64_t old = eng_qp_deadline(qp);

	if (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_SQD)
		return;
	if (qp->cc) {
		uint64_t cuts = qp->cc->ops->cuts(qp->cc);
		qp->cc->ops->timer(qp->cc, now_ns);
		qp->counters[ENG_CNT_cc_cuts] += qp->cc->ops->cuts(qp->cc) - cuts;
	}
	eng_comp_timer(qp, now_ns);
	check_drained(qp);
	kick(qp, old);
}
