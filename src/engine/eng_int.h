/* Private to src/engine/: the QP object and the interfaces between the three roles, split as
 * rxe splits them (spec roce.md section 5):
 *   req.c   requester: turns send WQEs into request packets (segmentation, PSNs, AckReq,
 *           ORD / fence / window gates);
 *   resp.c  responder: sequence, opcode, length and key checks on inbound requests, placement,
 *           responder resources, and the ordered queue of ACK / NAK / read responses;
 *   comp.c  completer: inbound ACK / NAK / read and atomic responses, the RNR wait, the
 *           timers, and send completions in WQE order;
 * with loss recovery a policy of its own (DESIGN.md decision 3): go-back-N (gbn.c), or
 * selective repeat between two softrdma QPs that agreed to it (sr.c), and congestion control
 * another (cc.h: none, or DCQCN in cc_dcqcn.c);
 *   qp.c    create, attributes, states, posting, and the public entry points;
 *   qp_base.c  what the iWARP QP shares (struct eng_qp_base: receives, flush, ERR, SQD);
 *   cq.c / rq.c  the completion ring and the receive ring (shared by QPs when an SRQ).
 *
 * Threads: none; see eng.h. Every function here is called with the caller's QP lock held. */
#ifndef SOFTRDMA_ENGINE_ENG_INT_H
#define SOFTRDMA_ENGINE_ENG_INT_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "engine/eng.h"
#include "engine/cc.h"
#include "engine/sr.h"
#include "util/psn.h"

/* rxe RXE_MAX_UNACKED_PSNS: the requester stops while req.psn is this far past the oldest
 * unacknowledged PSN (spec 4.4). */
#define ENG_MAX_UNACKED_PSNS 128
/* rxe RXE_MAX_PKT_PER_ACK: AckReq is forced after this many packets without it (spec 5.1). */
#define ENG_MAX_PKT_PER_ACK 64
/* Responder output queue: ACK / NAK / atomic ACK / read response jobs, in PSN order. At most
 * IRD read and atomic jobs and one ACK between consecutive ones are needed with a requester
 * that respects its ORD, so the queue is sized for the IRD (eng_qp_set_attr: 2 * IRD + 2),
 * never below this (IRD 0 to 3: ACKs, which coalesce, and NAKs); a request finding the queue
 * full is dropped (drop_resp_busy) and retried by its sender. The last slot is reserved for a
 * fatal NAK. Power of two. Small, because every QP has one: at 64 it was 3.5 KiB of an idle
 * QP's 6 (issue 11: an idle QP costs at most 4 KiB beside its rings). */
#define ENG_RESPQ_MIN 8
/* retry_cnt / rnr_retry value meaning "for ever" (rxe for retry_cnt, IBA for rnr_retry). */
#define ENG_RETRY_INFINITE 7

#define ENG_INC(qp, name) ((qp)->counters[ENG_CNT_##name]++)

/* The operations a send WQE can carry: one row each in eng_ops[] (qp.c). */
enum eng_op {
	ENG_OP_SEND,
	ENG_OP_SEND_IMM,
	ENG_OP_SEND_INV,
	ENG_OP_WRITE,
	ENG_OP_WRITE_IMM,
	ENG_OP_READ,
	ENG_OP_CMP_SWAP,
	ENG_OP_FETCH_ADD,
	ENG_OP_BIND_MW,	  /* local: no packet (eng.h, eng_qp_post_send) */
	ENG_OP_LOCAL_INV, /* local */
	ENG_OP__COUNT
};

/* QP types a local operation is valid on (eng_op_info.local). */
#define ENG_LOCAL_RC  0x1
#define ENG_LOCAL_UC  0x2
#define ENG_LOCAL_XRC 0x4 /* XRC_SEND: an RC requester */

/* Index into eng_op_info.opcode[] by packet position. */
enum eng_pos_idx { ENG_PI_FIRST, ENG_PI_MIDDLE, ENG_PI_LAST, ENG_PI_ONLY, ENG_PI__COUNT };

/* Protocol facts about one send operation (IBA 9.2 opcode table; spec 3). opcode[] is the RC
 * BTH opcode per position, uc_opcode[] the UC one, ud_opcode the UD SEND ONLY one; 0xFF where
 * the transport has no such packet (the operation is refused at post for it). */
struct eng_op_info {
	const char *name;
	enum ibv_wc_opcode wc_opcode;
	uint8_t kind; /* enum roce_kind of the request packets */
	uint8_t opcode[ENG_PI__COUNT];
	bool payload;	/* SEND / WRITE: the WQE's data travels in request packets */
	bool rd_atomic; /* READ / ATOMIC: counts against ORD, answered by a response */
	bool rwr;	/* consumes a receive WQE at the responder */
	uint8_t uc_opcode[ENG_PI__COUNT];
	uint8_t ud_opcode;
	uint8_t local; /* a local operation (no packet): ENG_LOCAL_* of the QP types it is for */
};
/* The BTH opcode of `info` at position `pi` for a QP of `type` (0xFF: none). */
uint8_t eng_op_opcode(const struct eng_op_info *info, enum ibv_qp_type type, enum eng_pos_idx pi);
/* True if a QP of `type` has the operation (a packet for it, or a local operation for it). */
bool eng_op_valid(const struct eng_op_info *info, enum ibv_qp_type type);
extern const struct eng_op_info eng_ops[ENG_OP__COUNT];

/* Send WQE life: POSTED (not started) -> ACTIVE (first packet built; PSNs assigned) -> DONE
 * (acknowledged / response received, waiting to be retired in order) or ERROR (local
 * failure, `status` says which). Retiring removes it from the ring. A local operation goes
 * from POSTED to DONE or ERROR when the requester runs it; it has no PSNs, and a go-back-N
 * pass steps over it once DONE. */
enum eng_swqe_state { ENG_SWQE_POSTED, ENG_SWQE_ACTIVE, ENG_SWQE_DONE, ENG_SWQE_ERROR };

struct eng_swqe {
	uint64_t wr_id;
	uint8_t op;    /* enum eng_op */
	uint8_t state; /* enum eng_swqe_state */
	bool signaled;
	bool fence;
	bool solicited;
	bool inl; /* data is in inline_data, not behind sge[] */
	uint32_t num_sge;
	uint32_t length; /* message length in bytes */
	struct eng_sge sge[ENG_MAX_SGE];
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add; /* CMP_SWAP compare / FETCH_ADD addend */
	uint64_t swap;
	uint8_t imm[4]; /* wire bytes */
	uint32_t inv_rkey;
	uint32_t first_psn; /* valid from ACTIVE */
	uint32_t last_psn;
	uint32_t read_done; /* READ: response bytes already placed (completer) */
	uint32_t ah;	    /* UD: the address handle's handle, resolved by the caller */
	uint32_t ud_qpn;    /* UD: destination QP */
	uint32_t ud_qkey;   /* UD: DETH Q_Key (a controlled key already replaced) */
	uint32_t xrc_srqn;  /* XRC_SEND: the XRC SRQ the message is for (XRCETH) */
	/* BIND_MW: the bind it asks for. inv_rkey: SEND_INV's and LOCAL_INV's key. */
	struct eng_mw_bind bind;
	enum ibv_wc_status status;
	uint8_t inline_data[ENG_MAX_INLINE];
};

/* Responder resource (IBA 9.7.5.1.4, rxe resp_res): what a duplicate READ or ATOMIC needs. */
enum eng_res_type { ENG_RES_FREE, ENG_RES_READ, ENG_RES_ATOMIC };
struct eng_res {
	uint8_t type;
	uint32_t first_psn, last_psn;
	uint64_t va;
	uint32_t rkey;
	uint32_t length;
	uint64_t orig; /* ATOMIC: the value before execution, replayed to duplicates */
	uint32_t pd;   /* READ: the PD its R_Key is checked in again (XRC: the SRQ's) */
};

/* One entry of the responder's output queue. */
/* ENG_JOB_SACK: selective repeat's NAK (sr.h), its bitmap taken when it leaves. */
enum eng_job_type { ENG_JOB_ACK, ENG_JOB_ATOMIC_ACK, ENG_JOB_READ, ENG_JOB_SACK };
struct eng_job {
	uint8_t type;
	uint8_t syndrome; /* ACK: AETH syndrome (ACK, RNR NAK or NAK) */
	uint32_t psn;	  /* ACK / atomic ACK: its PSN; READ: PSN of the next response packet */
	uint32_t msn;
	uint64_t orig; /* atomic ACK */
	/* READ: the range still to send. */
	uint64_t va;
	uint32_t rkey;
	uint32_t pd;	 /* READ: the PD of its R_Key (XRC: the SRQ's) */
	uint32_t length; /* bytes of this job in total */
	uint32_t offset; /* bytes already sent */
	bool from_first; /* job starts at the resource's first PSN: FIRST / ONLY opcodes */
};

/* A host memory piece resolved through env->mem_resolve. */
struct eng_iov {
	uint8_t *ptr;
	uint32_t len;
};

struct eng_qp {
	struct eng_qp_base base; /* first (eng_qp_of) */
	struct eng_qp_attr attr;
	uint64_t counters[ENG_CNT__COUNT];
	/* During eng_qp_output_ref: a payload at least this long may stay where it lies (eng.h);
	 * 0: copied. */
	uint32_t tx_ref;
	/* Congestion control (eng_qp_set_cc): the QP's policy (cc.h), NULL for none. */
	struct eng_cc *cc;
	/* Selective repeat (eng_qp_set_sr, sr.h), NULL for go-back-N. */
	struct eng_sr *sr;

	/* Requester (req.c). */
	struct {
		uint32_t idx;	 /* WQE being sent */
		uint32_t offset; /* SEND / WRITE: bytes of it already put in packets this pass */
		uint32_t psn;	 /* next PSN to send */
		uint32_t psn_hi; /* one past the highest PSN ever sent: responses must be below */
		uint32_t noack;	 /* packets since the last AckReq */
		uint32_t rd_out; /* READ / ATOMIC WQEs in [sq_head, idx): ORD in use */
		uint8_t ord;	 /* max_rd_atomic rounded up to a power of two */
	} req;

	/* Completer (comp.c). */
	struct {
		uint32_t psn;	    /* oldest PSN not yet acknowledged / answered */
		uint8_t retry_left; /* retries left in this loss episode */
		uint8_t rnr_left;
		bool retrying;	       /* a go-back-N was started and has not made progress yet */
		uint64_t ack_deadline; /* local ACK timeout, UINT64_MAX when off */
		uint64_t rnr_deadline; /* RNR wait, UINT64_MAX when not waiting */
	} comp;

	/* Responder (resp.c). */
	struct {
		uint32_t psn;	 /* next PSN expected */
		uint32_t msn;	 /* messages completed (IBA 9.7.5.1.1; spec 5.1) */
		uint8_t opcode;	 /* last accepted opcode of a message in progress */
		bool in_send;	 /* SEND FIRST / MIDDLE accepted, LAST pending */
		bool in_write;	 /* WRITE FIRST / MIDDLE accepted, LAST pending */
		bool nak_sent;	 /* NAK PSN sequence error sent for the current gap */
		bool comm_est;	 /* COMM_EST reported */
		bool have_wqe;	 /* wqe holds the receive WQE of the SEND in progress */
		bool keep_queue; /* ERR by a fatal request: responses queued before it go out */
		bool drop_msg;	 /* UC: dropping the rest of a message until a FIRST / ONLY */
		bool wqe_spare;	 /* UC: wqe came back from a dropped message; the next takes it */
		struct eng_rwqe wqe;
		uint32_t msg_srqn; /* XRC: the SRQ of the message in progress (CQ, PD) */
		uint32_t offset;   /* SEND: bytes placed into wqe */
		uint64_t va;	   /* WRITE: address of the next byte */
		uint32_t rkey;
		uint32_t length; /* WRITE: RETH DMA length */
		uint32_t resid;	 /* WRITE: bytes still expected */
		uint32_t
		    nres; /* responder resources in use: IRD rounded up, <= ENG_MAX_RD_ATOMIC */
		uint32_t res_next;	 /* round robin */
		uint32_t q_head, q_tail; /* free-running indices into respq */
	} resp;

	/* The responder's memory, sized for the IRD when it is set (eng_qp_set_attr: it only
	 * grows, as rxe sizes its resources at modify) and kept across resets: the resources
	 * (res[0..nres) in use) and the output queue (respq_mask + 1 jobs). */
	struct eng_res *res;
	uint32_t res_cap;
	struct eng_job *respq;
	uint32_t respq_mask;
};

/* ---- qp.c ---- */
/* The internal error -> wire and -> completion mappings (STYLE.md habit 2): every NAK
 * syndrome the responder sends comes from eng_nak_syndrome, every error status the completer
 * reports for a received NAK from eng_nak_status. */
enum eng_err {
	ENG_ERR_NONE,
	ENG_ERR_PSN_SEQ,       /* gap in request PSNs */
	ENG_ERR_INVALID_REQ,   /* opcode sequence, length, disabled operation, misaligned atomic */
	ENG_ERR_REMOTE_ACCESS, /* R_Key, PD, bounds, access rights */
	ENG_ERR_REMOTE_OP,     /* the receive WQE could not be used (bad local key) */
};
uint8_t eng_nak_syndrome(enum eng_err err);
enum ibv_wc_status eng_nak_status(uint8_t syndrome);

/* Reliable connected service: RC and the two halves of XRC (acknowledged, PSN windows, NAKs). */
static inline bool eng_qp_reliable(const struct eng_qp *qp)
{
	return qp->base.init.type == IBV_QPT_RC || qp->base.init.type == IBV_QPT_XRC_SEND ||
	       qp->base.init.type == IBV_QPT_XRC_RECV;
}

static inline struct eng_swqe *eng_swqe_at(struct eng_qp *qp, uint32_t idx)
{
	return &qp->base.sq[idx & qp->base.sq_mask];
}

/* true if index a is before b (free-running ring indices). */
static inline bool eng_idx_before(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

/* Packets a message of `len` bytes takes at `pmtu` (at least one). */
static inline uint32_t eng_npkts(uint32_t len, uint32_t pmtu)
{
	return len ? (uint32_t)(((uint64_t)len + pmtu - 1) / pmtu) : 1;
}

/* ---- wqe.c: work-request helpers shared with the iWARP engine (iw_*.c) ---- */

/* The enum eng_op for a verbs send opcode, or -EINVAL. */
/* Smallest power of two >= n (ring sizes). */
static inline uint32_t eng_pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* ---- qp_base.c: what both engines' QPs share (struct eng_qp_base, eng.h) ---- */
/* Fills in the base of a new QP (state RESET) with the work queues every QP has: the send
 * ring sized for init->max_send_wr, and the receive queue: init->srq, none for XRC, or own_rq
 * set up for max_recv_wr. 0, or -ENOMEM with nothing allocated; eng_base_fini undoes it. */
int eng_base_init(struct eng_qp_base *b, const struct eng_qp_init *init, const struct eng_env *env,
		  bool iwarp);
void eng_base_fini(struct eng_qp_base *b);
/* Pushes a completion to `cq` for this QP (qp_num filled in). */
void eng_base_complete(struct eng_qp_base *b, struct eng_cq *cq, struct ibv_wc *wc, bool solicited);
/* RESET (IBA 10.3.1): the queues emptied without completions, and the CQs give back the
 * QP's completions not yet polled (eng_cq_clean). */
void eng_base_reset(struct eng_qp_base *b);
/* Raises an asynchronous event for the QP (env->event). */
void eng_base_event(struct eng_qp_base *b, enum ibv_event_type ev);
/* ERR: completes every send WQE of [sq_head, sq_tail) in order, as IBV_WC_WR_FLUSH_ERR, or
 * with own_status one that failed (ENG_SWQE_ERROR) with its status (siw reports it so; rxe
 * flushes every WQE alike), and empties the ring. */
void eng_base_flush_sq(struct eng_qp_base *b, bool own_status);
/* A send WR of operation op (enum eng_op) posted in ERR: completed at once, WR_FLUSH_ERR. */
void eng_base_flush_wr(struct eng_qp_base *b, uint64_t wr_id, int op);
/* The end of entering ERR, after the engine has dealt with its send queue and the receive in
 * progress: the QP's own receive queue is flushed (IBA 10.3.1), ev raised if raise, and an
 * SRQ-attached QP reports its last WQE (IBA 11.6.3.1). */
void eng_base_err_flush(struct eng_qp_base *b, enum ibv_event_type ev, bool raise);
/* SQD not yet reported drained (the engine then checks that nothing started is unfinished). */
static inline bool eng_base_draining(const struct eng_qp_base *b)
{
	return b->state == IBV_QPS_SQD && !b->drained;
}
/* Reports IBV_EVENT_SQ_DRAINED, once per entry into SQD (IBA 10.3.1). */
void eng_base_drained(struct eng_qp_base *b);

int eng_wr_op(enum ibv_wr_opcode op);
/* Checks one send WR against the limits (SGE count, 2 GiB message, inline size, 8-byte
 * atomics; rxe validate_send_wr). Returns the enum eng_op and the message length in *len,
 * or -EINVAL. Opcode support for a transport is the caller's check. */
int eng_swqe_check(const struct ibv_send_wr *wr, uint32_t max_sge, uint32_t max_inline,
		   uint64_t *len);
/* Copies a checked WR into w (state POSTED, status SUCCESS); inline data is copied now from
 * the WR's addresses. */
void eng_swqe_fill(struct eng_swqe *w, const struct ibv_send_wr *wr, int op, uint32_t len,
		   bool sig_all);
/* Resolves [offset, offset + len) of a scatter/gather list into at most ENG_MAX_SGE host
 * pieces, checking every piece through env->mem_resolve in `pd` with `access` (local keys).
 * Nothing is copied. Returns the number of pieces, or -ENOENT / -EACCES / -ERANGE (from
 * mem_resolve), or -EMSGSIZE if the list is shorter than offset + len. */
int eng_sge_resolve_env(const struct eng_env *env, uint32_t pd, const struct eng_sge *sge,
			uint32_t num_sge, uint32_t offset, uint32_t len, unsigned access,
			struct eng_iov *iov);
/* eng_sge_resolve_env with the QP's env and PD. */
int eng_sge_resolve(struct eng_qp *qp, const struct eng_sge *sge, uint32_t num_sge, uint32_t offset,
		    uint32_t len, unsigned access, struct eng_iov *iov);

/* Moves the QP to ERR from inside the engine (flushes; raises `ev` if not 0). */
void eng_qp_to_err(struct eng_qp *qp, enum ibv_event_type ev, bool raise);

/* Congestion control (qp->cc set) counts a packet with `payload` bytes that left at now as
 * what it occupies on an Ethernet link: the payload and 58 bytes of Ethernet .. ICRC. Out of
 * line, off the path of QPs without it. */
void eng_cc_sent(struct eng_qp *qp, uint32_t payload, uint64_t now);

/* ---- rq.c ---- */
/* The oldest posted receive WQE, or NULL if the queue is empty. */
const struct eng_rwqe *eng_rq_peek(const struct eng_rq *rq);
/* Removes the oldest WQE; raises the SRQ limit event when the count drops below the armed
 * limit (the limit disarms, as verbs requires). */
void eng_rq_pop(struct eng_rq *rq);
void eng_rq_clear(struct eng_rq *rq);

/* ---- req.c ---- */
/* Builds the next request packet; *ah gets the UD destination handle (0 for RC / UC). */
int eng_req_output(struct eng_qp *qp, uint64_t now, struct roce_pkt *out, uint8_t *buf,
		   uint32_t *ah);
/* true if eng_req_output would produce a packet now. */
bool eng_req_ready(struct eng_qp *qp);
void eng_req_reset(struct eng_qp *qp);

/* ---- resp.c ---- */
void eng_resp_input(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt);
/* Queues a NAK (syndrome) for psn; false when the response queue has no room for it. */
bool eng_resp_nak(struct eng_qp *qp, uint8_t syndrome, uint32_t psn);
/* UC requests: no ACKs, a message with a PSN gap or an error is dropped, FIRST / ONLY resyncs
 * (rxe check_psn, class D / E errors). */
void eng_resp_input_uc(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt);
/* UD SENDs: Q_Key check, the GRH (`grh`, ENG_GRH_LEN bytes or NULL) then the payload into the
 * next receive WQE. */
void eng_resp_input_ud(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt,
		       const uint8_t *grh);
int eng_resp_output(struct eng_qp *qp, struct roce_pkt *out, uint8_t *buf);
bool eng_resp_pending(const struct eng_qp *qp);
void eng_resp_reset(struct eng_qp *qp);
/* Entering ERR: drops queued read responses (no data leaves any more), unless the responder
 * itself failed a later request, whose NAK must follow the earlier responses. */
void eng_resp_drop_data(struct eng_qp *qp);
/* Completes the receive WQE held by a SEND in progress with `status` (flush on ERR). */
void eng_resp_flush_held(struct eng_qp *qp, enum ibv_wc_status status);

/* ---- gbn.c: go-back-N, RC's loss recovery (spec 5.5) ---- */
/* Responder: a request past the expected PSN is dropped; the first of a gap is answered with a
 * NAK PSN sequence error. */
void eng_gbn_gap(struct eng_qp *qp);
/* Completer: a NAK PSN sequence error, an implicit NAK or (timeout) the ACK timer. Returns true
 * if a retry started (counted against retry_cnt; out of retries the head WQE fails with
 * RETRY_EXC_ERR), false if one under way or an RNR wait stands for it. */
bool eng_gbn_retry(struct eng_qp *qp, uint64_t now, bool timeout);
/* Requester: back to comp.psn, the oldest unretired WQE, mid-message if part of it was
 * acknowledged. Counts no retry; the caller does. */
void eng_gbn_rewind(struct eng_qp *qp);

/* ---- comp.c ---- */
void eng_comp_input(struct eng_qp *qp, const struct roce_opinfo *oi, const struct roce_pkt *pkt,
		    uint64_t now);
void eng_comp_timer(struct eng_qp *qp, uint64_t now);
/* Retires DONE / ERROR WQEs at the head of the send queue, in order. */
void eng_comp_retire(struct eng_qp *qp);
/* Starts the local ACK timer if it is off and PSNs are outstanding. */
void eng_comp_arm(struct eng_qp *qp, uint64_t now);
void eng_comp_reset(struct eng_qp *qp);
/* The oldest WQE fails with `status` (completed in order); the QP goes to ERR and the rest is
 * flushed. */
void eng_comp_fail_head(struct eng_qp *qp, enum ibv_wc_status status);

#endif
