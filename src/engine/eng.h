/* The transport engine: RC requester, responder and completer, for RoCEv2 (IBTA Vol. 1
 * ch. 9-10; behaviour modelled on Linux rxe, ../shared/spec/roce.md section 5).
 *
 * Sans I/O (DESIGN.md decision 2): the engine never touches a socket or reads a clock. Callers
 * hand it decoded packets and the current time, and pull out packets to send and the next
 * deadline. Memory is reached only through the eng_env callbacks, which validate every key,
 * bound and access right before a byte moves.
 *
 * Threads: none of these functions locks. The caller serialises all calls that touch one QP
 * and the CQs / SRQ it uses (softrdma holds one lock per device context).
 * Errors: functions return 0 or a negative errno. Completion statuses go into the CQs; wire
 * errors (NAK syndromes) go into packets. The three never mix. */
#ifndef SOFTRDMA_ENGINE_ENG_H
#define SOFTRDMA_ENGINE_ENG_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>

#include "wire/roce/roce.h"

#define ENG_MAX_SGE	  16
#define ENG_MAX_INLINE	  256	     /* bytes; inline data is copied into the WQE at post time */
#define ENG_MAX_RD_ATOMIC 128	     /* ORD and IRD per QP, as rxe's RXE_MAX_QP_RD_ATOM */
#define ENG_MAX_MSG_SIZE  (1u << 31) /* 2 GiB, as rxe */
/* A UD receive buffer starts with the 40-byte GRH (IBA 11.4.1.1); on RoCEv2 it holds the IP
 * header the packet came in (spec 10): IPv4 = 20 zero bytes then the 20-byte header. */
#define ENG_GRH_LEN 40

struct eng_qp;
struct eng_qp_base;

/* ---- completion queue ---- */

/* A ring of work completions. Owned by the caller (obj/); the engine pushes, the application
 * polls. `notify` (may be NULL) is called after a push when the CQ was armed; `armed` is
 * cleared by the engine at that moment (one event per arm, as verbs requires). */
struct eng_cq {
	struct ibv_wc *ring;
	uint32_t mask; /* ring size - 1 (power of two) */
	uint32_t head; /* next to poll (free-running) */
	uint32_t tail; /* next to fill (free-running) */
	uint32_t cqe;  /* capacity the user asked for */
	bool overflow; /* a completion was lost: CQ is in error (IBV_EVENT_CQ_ERR) */
	uint8_t armed; /* 0 no, 1 next completion, 2 solicited only */
	void (*notify)(struct eng_cq *cq);
	void *owner; /* for the notify callback */
};

/* Allocates a ring for at least `cqe` completions. Returns 0, -EINVAL, -ENOMEM. */
int eng_cq_init(struct eng_cq *cq, uint32_t cqe);
void eng_cq_fini(struct eng_cq *cq);
/* Gives the CQ a new ring for at least `cqe` completions, the unpolled ones moved over in
 * order (ibv_resize_cq). Returns 0, -EINVAL (cqe 0 or above 1 << 24, or fewer than the
 * completions waiting: the CQ is left as it was), -ENOMEM. */
int eng_cq_resize(struct eng_cq *cq, uint32_t cqe);
/* Copies up to n completions out, oldest first; returns how many. */
int eng_cq_poll(struct eng_cq *cq, int n, struct ibv_wc *wc);
/* Appends one completion (engine internal, public for tests). solicited: the completion is of
 * a receive whose message had SE set. Returns 0 or -ENOSPC (sets overflow). */
int eng_cq_push(struct eng_cq *cq, const struct ibv_wc *wc, bool solicited);
/* Removes the completions of QP number qpn not yet polled, keeping the others in order (a QP
 * moved to RESET takes back its completions, as mlx4's and mlx5's providers clean the CQ then:
 * a reused QP never hands out completions of work its owner has written off). Returns how
 * many were removed. NULL cq: none. */
uint32_t eng_cq_clean(struct eng_cq *cq, uint32_t qpn);

/* ---- receive queue (one per QP, or shared: SRQ) ---- */

struct eng_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct eng_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t length; /* sum of sge lengths */
	struct eng_sge sge[ENG_MAX_SGE];
};

struct eng_rq {
	struct eng_rwqe *ring;
	uint32_t mask, head, tail; /* free-running indices */
	uint32_t max_wr, max_sge;
	bool is_srq;
	/* An XRC SRQ (IBV_SRQT_XRC; IBA 9.8.x): its XRC domain (0: not an XRC SRQ), and the PD
	 * and completion queue that requests naming it in their XRCETH use, whichever XRC target
	 * QP of the domain they arrive at. */
	uint32_t xrcd;
	uint32_t pd;
	struct eng_cq *cq;
	uint32_t limit; /* SRQ limit (0 = not armed); on dropping below: limit_event */
	void (*limit_event)(struct eng_rq *rq);
	void *owner;
};

int eng_rq_init(struct eng_rq *rq, uint32_t max_wr, uint32_t max_sge, bool is_srq);
void eng_rq_fini(struct eng_rq *rq);
/* Posts a chain of receive WRs. Returns 0, or -EINVAL (too many SGEs) / -ENOMEM (full) with
 * *bad set to the first WR not posted. */
int eng_rq_post(struct eng_rq *rq, const struct ibv_recv_wr *wr, const struct ibv_recv_wr **bad);
uint32_t eng_rq_count(const struct eng_rq *rq);

/* ---- environment: how the engine reaches memory and its owner ---- */

/* IBV_ACCESS_* bits asked of a key; ENG_ACCESS_LOCAL_READ means a plain local read. */
#define ENG_ACCESS_LOCAL_READ 0

/* A BIND_MW work request as the engine hands it to eng_env.mw_bind (IBA 10.6.7.2.1;
 * ibv_post_send(3) wr.bind_mw), copied at post time. */
struct eng_mw_bind {
	uint32_t mw_rkey;  /* the window's R_Key when the request was posted (ibv_mw.rkey) */
	uint32_t new_rkey; /* wr.bind_mw.rkey: its low byte is the window's next key byte */
	uint32_t mr_lkey;  /* the region's L_Key (0 if the request named none) */
	uint64_t addr;	   /* window start, in the region's address space */
	uint64_t length;   /* 0: unbind (type 1) */
	unsigned access;   /* IBV_ACCESS_REMOTE_*, IBV_ACCESS_ZERO_BASED */
};

struct eng_env {
	void *ctx;
	/* Validates [va, va+len) under `key` (an lkey if !remote, an rkey if remote) for
	 * `access` in protection domain `pd`, for QP number `qpn` (a type 2 memory window is
	 * reached only through the QP it is bound to), including address+length overflow, and
	 * returns the host address of va. On failure returns NULL and sets *err: -ENOENT (no
	 * such key, wrong PD or QP, window not bound), -EACCES (access not granted), -ERANGE
	 * (out of bounds). len 0 is always valid and may return NULL with *err = 0. */
	void *(*mem_resolve)(void *ctx, uint32_t pd, uint32_t qpn, uint32_t key, bool remote,
			     uint64_t va, uint64_t len, unsigned access, int *err);
	/* Invalidates `rkey` in `pd`: remotely (SEND with Invalidate arriving at QP `qpn`) or
	 * locally (LOCAL_INV posted on QP `qpn`). Returns 0 or -EINVAL. May be NULL (nothing can
	 * be invalidated). */
	int (*mem_invalidate)(void *ctx, uint32_t pd, uint32_t qpn, uint32_t rkey, bool remote);
	/* BIND_MW posted on QP `qpn` of PD `pd` (binds or unbinds a memory window). Returns 0
	 * or -EINVAL (the request completes with IBV_WC_MW_BIND_ERR). May be NULL (no windows). */
	int (*mw_bind)(void *ctx, uint32_t pd, uint32_t qpn, const struct eng_mw_bind *b);
	/* The QP has packets to send, or (without a deadline callback) its deadline moved
	 * earlier: the caller should call eng_qp_output / eng_qp_deadline for it. May be called
	 * from any engine entry point; it must not call back into the engine (queue the QP and
	 * return). */
	void (*wake)(void *ctx, struct eng_qp_base *qp);
	/* The QP's deadline (eng_qp_deadline) changed, earlier or later: the caller re-files its
	 * timer. Called from any engine entry point, eng_qp_output included, once its work is
	 * done; it may call eng_qp_deadline and nothing else of the engine. May be NULL: then
	 * wake is called when the deadline moves earlier (and a later one is found out by asking,
	 * as a caller that asks every QP at every pass does). */
	void (*deadline)(void *ctx, struct eng_qp_base *qp);
	/* Asynchronous event for the QP (IBV_EVENT_QP_FATAL, _QP_REQ_ERR, _QP_ACCESS_ERR,
	 * _COMM_EST, _SQ_DRAINED, _QP_LAST_WQE_REACHED). May be NULL. */
	void (*event)(void *ctx, struct eng_qp_base *qp, enum ibv_event_type ev);
	/* XRC target QPs: the XRC SRQ of number `srqn` (an XRCETH's), or NULL if there is none.
	 * The engine itself checks that it is of the QP's XRC domain. May be NULL (no XRC). */
	struct eng_rq *(*xsrq_lookup)(void *ctx, uint32_t srqn);
};

/* ---- queue pair ---- */

/* XRC (IBA 9.8.x): an IBV_QPT_XRC_SEND QP is an RC requester without a receive queue (no
 * recv_cq, no SRQ); each send WR names the XRC SRQ it is for (wr.qp_type.xrc.remote_srqn,
 * sent in the XRCETH). An IBV_QPT_XRC_RECV QP is an RC responder without a send queue, PD or
 * CQs of its own (max_send_wr 0, no CQs): each request goes to the XRC SRQ its XRCETH names,
 * which must belong to the QP's XRC domain `xrcd`, and uses that SRQ's PD and CQ. */
struct eng_qp_init {
	enum ibv_qp_type type; /* IBV_QPT_RC, _UC, _UD, _XRC_SEND or _XRC_RECV */
	uint32_t qpn;
	uint32_t pd;   /* PD handle passed back to mem_resolve (XRC_RECV: none, 0) */
	uint32_t xrcd; /* XRC_RECV: its XRC domain (not 0); others 0 */
	uint32_t max_send_wr, max_send_sge, max_inline;
	uint32_t max_recv_wr, max_recv_sge; /* ignored with srq */
	struct eng_rq *srq;		    /* NULL: the QP gets its own receive queue */
	struct eng_cq *send_cq, *recv_cq;
	bool sq_sig_all;
	void *user; /* caller's pointer, returned by eng_qp_user() */
};

/* Attributes the engine acts on. The caller (obj/) validates verbs attribute masks and the
 * state machine, keeps the full attribute set, and passes it whole. */
struct eng_qp_attr {
	uint32_t dest_qpn;     /* RC / UC; UD takes it per WR */
	uint32_t sq_psn;       /* next PSN the requester sends */
	uint32_t rq_psn;       /* next PSN the responder expects (RC / UC) */
	uint32_t pmtu;	       /* bytes: 256..4096; UD: the port's MTU (one packet per message) */
	uint32_t qkey;	       /* UD: inbound DETH.Q_Key must equal it; sent for controlled keys */
	unsigned access;       /* IBV_ACCESS_REMOTE_{WRITE,READ,ATOMIC} for inbound requests */
	uint8_t timeout;       /* local ACK timeout exponent; 0 = none */
	uint8_t retry_cnt;     /* 0..7 */
	uint8_t rnr_retry;     /* 0..7, 7 = infinite */
	uint8_t min_rnr_timer; /* RNR NAK timer code we send */
	uint8_t max_rd_atomic; /* ORD: outstanding READ/ATOMIC we may issue */
	uint8_t max_dest_rd_atomic; /* IRD: responder resources */
	uint16_t pkey;
};

/* What every QP is first, whichever wire it speaks: the RoCE engine's struct eng_qp and the
 * iWARP engine's struct iw_qp (engine/iw_eng.h) both begin with it, as their member `base`. It
 * holds what the two share: the creation parameters, the owner's callbacks, the state, the
 * send queue ring and the receive queue. What only depends on these is written once on it
 * (engine/qp_base.c: posting receives, the completions of a flush, the common part of entering
 * ERR, SQ_DRAINED), and eng_env's callbacks receive it from either engine: `iwarp` says which
 * QP it begins. Read-only outside src/engine/. */
struct eng_qp_base {
	struct eng_qp_init init;
	struct eng_env env;
	enum ibv_qp_state state;
	bool iwarp;   /* begins a struct iw_qp (iw_qp_of), else a struct eng_qp (eng_qp_of) */
	bool drained; /* SQD: IBV_EVENT_SQ_DRAINED reported */
	struct eng_rq own_rq;
	struct eng_rq *rq; /* &own_rq or init.srq; NULL for XRC_SEND (no receive queue) */
	/* Send queue: [sq_head, sq_tail) posted and not retired, free-running indices; entry i is
	 * sq[i & sq_mask]. sq_max: its capacity (init.max_send_wr). */
	struct eng_swqe *sq;
	uint32_t sq_mask, sq_head, sq_tail, sq_max;
};

/* The RoCE QP that begins with b, NULL if b begins an iWARP QP. */
static inline struct eng_qp *eng_qp_of(struct eng_qp_base *b)
{
	return b->iwarp ? NULL : (struct eng_qp *)(void *)b; /* base is its first member */
}

/* A RoCE QP's base. */
static inline struct eng_qp_base *eng_qp_base(struct eng_qp *qp)
{
	return (struct eng_qp_base *)(void *)qp;
}

/* Posts receives to the QP's own receive queue (either engine): verbs semantics
 * (ibv_post_recv(3)); in ERR each is completed at once with IBV_WC_WR_FLUSH_ERR. Returns 0,
 * or -EINVAL (an SRQ or XRC QP, RESET, too many SGEs) / -ENOMEM (full) with *bad set to the
 * first WR not posted. */
int eng_base_post_recv(struct eng_qp_base *b, const struct ibv_recv_wr *wr,
		       const struct ibv_recv_wr **bad);

/* Creates a QP in RESET. Returns 0 and *out, or -EINVAL / -ENOMEM. Allocates everything the
 * QP will ever need (rings, responder resources); nothing is allocated afterwards. */
int eng_qp_create(const struct eng_qp_init *init, const struct eng_env *env, struct eng_qp **out);
void eng_qp_destroy(struct eng_qp *qp);
void *eng_qp_user(const struct eng_qp *qp);
uint32_t eng_qp_num(const struct eng_qp *qp);
struct dcqcn_params;
/* Turns congestion control on for the QP (RC, UC, UD, XRC requesters): DCQCN with p
 * (engine/dcqcn.h); its requests then leave at the rate CNPs (eng_qp_cnp) leave it (UD: one
 * rate for every destination, as mlx5 has it). Again: the state starts over. 0, -EINVAL (p
 * refused) or -ENOMEM. */
int eng_qp_set_cc(struct eng_qp *qp, const struct dcqcn_params *p);
/* A CNP for this QP arrived (ignored without congestion control). */
void eng_qp_cnp(struct eng_qp *qp, uint64_t now_ns);
/* The QP's current rate in bit/s (its line rate when nothing slowed it), 0 without congestion
 * control. */
uint64_t eng_qp_cc_rate(const struct eng_qp *qp);
/* Loss recovery by selective repeat instead of go-back-N (issue 13 step 3): only between two
 * softrdma QPs that agreed to it (ECE, through rdma_cm or ibv_query_ece / ibv_set_ece), since
 * it sends SACKs a standard peer does not know. RC only; any state, takes effect at once.
 * on = false: go-back-N, as IBA. 0, -EINVAL (not RC) or -ENOMEM. */
int eng_qp_set_sr(struct eng_qp *qp, bool on);
bool eng_qp_sr(const struct eng_qp *qp);
/* The peer's QP number (RC, UC, XRC; 0 until RTR). */
uint32_t eng_qp_dest_num(const struct eng_qp *qp);

/* Replaces the attribute set (any state). PSN fields take effect on the next transition into
 * RTR (rq_psn) / RTS (sq_psn). The responder's resources and output queue grow here to what
 * max_dest_rd_atomic needs: 0, or -ENOMEM with the QP unchanged. */
int eng_qp_set_attr(struct eng_qp *qp, const struct eng_qp_attr *attr);

/* Moves the QP to `state` (the caller has checked the transition is legal). Entering ERR
 * flushes every outstanding and later-posted WR with IBV_WC_WR_FLUSH_ERR; RESET empties the
 * queues and forgets sequence state; RTR starts the responder at attr.rq_psn; RTS starts
 * the requester at attr.sq_psn; SQD stops taking new send WRs once in flight ones finish
 * (IBV_EVENT_SQ_DRAINED). */
void eng_qp_set_state(struct eng_qp *qp, enum ibv_qp_state state, uint64_t now_ns);
enum ibv_qp_state eng_qp_state(const struct eng_qp *qp);
/* "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" (for logs); "?" for other values. */
const char *eng_qp_state_name(enum ibv_qp_state state);

/* Posts a chain of send WRs (verbs semantics: ibv_post_send(3)). Returns 0, or -EINVAL (bad
 * opcode for the QP type, too many SGEs, inline too long, QP not in RTS/SQD/ERR, UD WR without
 * an address handle, BIND_MW without a window or with SGEs) / -ENOMEM (send queue full) with
 * *bad set to the first WR not posted.
 * Local operations, BIND_MW (RC, UC, XRC_SEND) and LOCAL_INV (RC, XRC_SEND), send no packet:
 * they run (env->mw_bind, env->mem_invalidate) when the requester reaches them in send queue
 * order, after the WQEs before them are sent (with IBV_SEND_FENCE: completed), and complete in
 * order (IBV_WC_BIND_MW, IBV_WC_LOCAL_INV; refused: IBV_WC_MW_BIND_ERR, IBV_WC_LOC_QP_OP_ERR,
 * and the QP goes to ERR), as rxe's requester runs them (rxe_do_local_ops). BIND_MW reads the
 * window's rkey and the region's lkey through wr.bind_mw now.
 * Inline data is copied now. UC takes SEND and RDMA WRITE (+ immediate); UD takes SEND (+
 * immediate) with wr.ud: the engine keeps remote_qpn, remote_qkey (bit 31 set: the QP's Q_Key,
 * the controlled Q_Keys of IBA ch. 10) and wr.ud.ah->handle, an opaque destination the caller
 * resolves per packet (eng_qp_output_dest); the ibv_ah itself is not kept. A UD SEND longer than
 * attr.pmtu completes successfully without a packet (IBA C10-93.1.1, as rxe; counted in
 * tx_ud_too_long). */
int eng_qp_post_send(struct eng_qp *qp, const struct ibv_send_wr *wr,
		     const struct ibv_send_wr **bad, uint64_t now_ns);

/* Hands the engine one packet addressed to this QP. The caller has parsed it (roce_parse),
 * checked its ICRC and that BTH.DestQP is this QP. The payload is copied out before return;
 * the caller keeps ownership of the buffer. A packet the engine refuses is counted and
 * dropped, and leaves the QP as it was (unless the protocol says the QP goes to ERR). */
void eng_qp_input(struct eng_qp *qp, const struct roce_pkt *pkt, uint64_t now_ns);
/* eng_qp_input with the network header the packet arrived in: `grh` (ENG_GRH_LEN bytes, or
 * NULL for zeros) goes into the first 40 bytes of a UD receive buffer (IBV_WC_GRH). Ignored by
 * RC and UC QPs. The caller keeps ownership. */
void eng_qp_input_net(struct eng_qp *qp, const struct roce_pkt *pkt, const uint8_t *grh,
		      uint64_t now_ns);

/* Produces the next packet to send, if any: fills *out and copies its payload into `buf`
 * (at least attr.pmtu bytes; out->payload points there). The payload is written at buf[0]:
 * to build the datagram without another copy, give a buf with ROCE_MAX_HDR_LEN bytes of
 * headroom in front and write the headers there (roce_build_hdrs), as core/ does. Returns 1 if a
 * packet was produced, 0 if nothing is due now. Retransmissions, ACKs/NAKs, read responses and new
 * requests all come out here, responses first. Returns -EINVAL if buf_cap < attr.pmtu. */
int eng_qp_output(struct eng_qp *qp, uint64_t now_ns, struct roce_pkt *out, uint8_t *buf,
		  size_t buf_cap);
/* eng_qp_output that also says where the packet goes: *ah = 0 for the QP's own path (RC, UC),
 * or, for a UD packet, the handle of the WR's address handle (ibv_ah.handle at post time), which
 * the caller resolves to addresses for this packet alone. ah may be NULL. */
int eng_qp_output_dest(struct eng_qp *qp, uint64_t now_ns, struct roce_pkt *out, uint8_t *buf,
		       size_t buf_cap, uint32_t *ah);

/* eng_qp_output_dest that may leave a payload of at least ref_min bytes (> 0) where it lies:
 * when it is one piece of registered memory (a READ response, or a request whose bytes fall in
 * one SGE) or the WR's inline data, out->payload points there and nothing is copied into buf;
 * otherwise it is copied as above (out->payload == buf). The pointer is good until the caller lets
 * go of what serialises it with the application's calls (core/'s context lock): memory
 * registrations, destroyed QPs and the application's own stores may change it afterwards, so
 * the caller sends (or copies) the packet before. */
int eng_qp_output_ref(struct eng_qp *qp, uint64_t now_ns, struct roce_pkt *out, uint8_t *buf,
		      size_t buf_cap, uint32_t *ah, uint32_t ref_min);

/* True when the QP (RC, XRC) has sent requests it still awaits the acknowledgement or the
 * response of: a new request joins a pipeline whose responses will come back. */
bool eng_qp_awaits_response(const struct eng_qp *qp);
/* Earliest time the engine needs eng_qp_timer() (retransmit, RNR wait), or UINT64_MAX. */
uint64_t eng_qp_deadline(const struct eng_qp *qp);
/* Runs expired timers; may make output due (wake is called). */
void eng_qp_timer(struct eng_qp *qp, uint64_t now_ns);

/* ---- counters (DESIGN.md decision 8) ---- */

/* Every drop, retry and error the engine sees, per QP. X(name, description). */
#define ENG_COUNTERS(X)                                                                            \
	X(tx_packets, "packets produced")                                                          \
	X(rx_packets, "packets accepted")                                                          \
	X(retransmits, "request packets sent again (go-back-N)")                                   \
	X(ack_timeouts, "local ACK timer expiries")                                                \
	X(seq_naks_sent, "NAK PSN sequence error sent")                                            \
	X(seq_naks_rcvd, "NAK PSN sequence error received")                                        \
	X(rnr_naks_sent, "RNR NAKs sent (no receive WQE)")                                         \
	X(rnr_naks_rcvd, "RNR NAKs received")                                                      \
	X(dup_requests, "duplicate requests received")                                             \
	X(dup_reads_replayed, "duplicate READs re-executed")                                       \
	X(dup_atomics_replayed, "duplicate atomics answered from the saved result")                \
	X(naks_sent, "NAKs sent: invalid request, remote access, remote operational")              \
	X(naks_rcvd, "fatal NAKs received")                                                        \
	X(drop_bad_state, "packets dropped: QP state does not receive")                            \
	X(drop_bad_opcode, "packets dropped: opcode not valid for the QP or sequence")             \
	X(drop_out_of_window, "packets dropped: PSN outside any window")                           \
	X(drop_unexpected_ack, "responses dropped: nothing outstanding matches")                   \
	X(drop_bad_length, "packets dropped: inconsistent lengths")                                \
	X(drop_psn_gap, "requests dropped: PSN gap (RC: ahead of the expected one; UC: not it)")   \
	X(drop_dup_unmatched, "duplicate READ/ATOMIC dropped: no matching resource")               \
	X(drop_resp_busy, "requests dropped: response queue full (peer retries)")                  \
	X(implicit_naks, "retries started by a response passing an unanswered READ/ATOMIC")        \
	X(drop_qkey, "UD packets dropped: DETH Q_Key is not the QP's")                             \
	X(drop_xrc_srq, "XRC requests refused: the XRCETH names no XRC SRQ of the QP's domain")    \
	X(drop_no_recv, "UC/UD messages dropped: no receive WQE posted")                           \
	X(drop_recv_short, "UC/UD messages dropped: receive buffer too small")                     \
	X(drop_access, "UC RDMA WRITEs dropped: not enabled, or R_Key / bounds refused")           \
	X(drop_uc_msg, "UC packets dropped: the rest of a message already dropped")                \
	X(uc_abandoned, "UC messages cut short by loss (PSN gap, missing LAST): no completion")    \
	X(tx_ud_too_long, "UD sends over the port MTU: completed, nothing sent (C10-93.1.1)")      \
	X(local_ops, "BIND_MW / LOCAL_INV work requests run")                                      \
	X(local_op_errors, "BIND_MW / LOCAL_INV refused: completed in error, QP to ERR")           \
	X(cc_cnps, "CNPs received (congestion control on: eng_qp_set_cc)")                         \
	X(cc_cuts, "rate decreases made for CNPs")                                                 \
	X(cc_held, "times a request waited for the paced rate")                                    \
	X(sr_held, "requests kept out of order (selective repeat)")                                \
	X(sr_sacks_sent, "SACKs sent (selective repeat)")                                          \
	X(sr_sacks_rcvd, "SACKs received (selective repeat)")                                      \
	X(sr_resent, "requests sent again for a SACK's hole (selective repeat)")                   \
	X(sr_read_ahead, "READ responses placed ahead of a lost one (selective repeat)")

enum eng_counter {
#define ENG_COUNTER_ENUM(name, desc) ENG_CNT_##name,
	ENG_COUNTERS(ENG_COUNTER_ENUM)
#undef ENG_COUNTER_ENUM
	    ENG_CNT__COUNT
};
extern const char *const eng_counter_names[ENG_CNT__COUNT];
const uint64_t *eng_qp_counters(const struct eng_qp *qp);

#endif
