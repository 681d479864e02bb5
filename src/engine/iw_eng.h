/* The iWARP QP engine: RDMAP (RFC 5040) over DDP (RFC 5041) over MPA FPDUs (RFC 5044) on a
 * TCP byte stream, behaving like Linux siw (../shared/spec/iwarp.md; siw_qp_rx.c,
 * siw_qp_tx.c, siw_qp.c).
 *
 * Sans I/O, like the RoCE engine (eng.h, DESIGN.md decision 2): the engine never touches a
 * socket or reads a clock. The caller owns the TCP connection (set up, MPA exchange, close:
 * src/engine/iw_conn.c and src/io/tcp.c) and moves stream bytes:
 *   receive: iw_qp_rx_want() says where the next stream bytes must be read to, the caller
 *            recv()s there, iw_qp_rx_done() consumes them. Tagged payload (RDMA Write, Read
 *            Response) is read straight into the validated target inside the MR, untagged
 *            payload (Send) straight into the posted receive buffer: no copy in the engine.
 *            iw_qp_rx_bytes() is the same path for callers that already hold bytes.
 *   transmit: iw_qp_tx_want() gives iovecs of the next bytes (FPDU header and trailer from
 *            a scratch area inside the QP, payload straight out of the MR or the WQE's
 *            inline data); the caller writev()s them and reports with iw_qp_tx_done() how
 *            many TCP took. A small message posted when nothing else is outstanding skips
 *            all that: iw_qp_post_one() frames it whole into one buffer, the caller send()s
 *            it at once and reports with iw_qp_one_sent().
 * Reliability and ordering are TCP's: there are no PSNs, ACKs, timers or retries. Every
 * protocol violation is fatal to the connection: a Terminate (RFC 5040 4.8) goes to the
 * peer, the QP goes to ERR and every WR is completed (flushed) in order.
 *
 * Shared verbs-side objects: the CQs (struct eng_cq), the receive queue / SRQ (struct
 * eng_rq), the memory environment (struct eng_env) and the completion statuses are the RoCE
 * engine's (eng.h), and so is the start of every QP, struct eng_qp_base: env->wake and
 * env->event receive it, and iw_qp_of() turns it back into the iWARP QP.
 *
 * Threads: no function locks. The caller serialises every call that touches one QP and the
 * CQs / SRQ it uses (one lock per device context), and keeps that lock, or otherwise keeps
 * every MR alive, from iw_qp_tx_want() until the bytes have been copied by the kernel
 * (the iovecs point into registered memory) and from iw_qp_rx_want() until iw_qp_rx_done().
 *
 * Errors: functions return 0 (or a count) or a negative errno. Per-WR outcomes go into the
 * CQs as work completion statuses; wire errors go to the peer as Terminate codes (mapped by
 * iw_err_term / iw_term_from_err, wire/iwarp/iwarp.h). The three never mix.
 *
 * Units: lengths in bytes; `now` in nanoseconds of the caller's monotonic clock (unused by
 * the protocol, which has no timers; kept so that every entry point looks like the RoCE
 * engine's). */
#ifndef SOFTRDMA_ENGINE_IW_ENG_H
#define SOFTRDMA_ENGINE_IW_ENG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "engine/eng.h"
#include "wire/iwarp/iwarp.h"

#define IW_MAX_IRD    128 /* siw SIW_MAX_IRD_QP: inbound Read Requests queued per QP */
#define IW_MAX_ORD    128 /* siw SIW_MAX_ORD_QP: outstanding outbound READs per QP */
#define IW_MAX_SGE    ENG_MAX_SGE
#define IW_MAX_SGE_RD 1 /* siw SIW_MAX_SGE_RD: a Read Request names one sink STag/TO */
/* Smallest MULPDU accepted: every FPDU, including the longest Terminate (70 bytes of ULPDU),
 * must fit. */
#define IW_MIN_MULPDU IW_TERM_ULPDU_MAX
/* tx_want needs at most this many iovecs for one FPDU: header, one per SGE, trailer. Fewer
 * work too (the FPDU then comes out over several calls). */
#define IW_TX_MAX_IOV (IW_MAX_SGE + 2)
/* Framing runs ahead of TCP: up to IW_TX_BATCH FPDUs, and no more once IW_TX_BATCH_BYTES are
 * framed, are handed out by one iw_qp_tx_want, so that one sendmsg carries many MSS-sized
 * FPDUs instead of one system call per FPDU (64 KiB at MTU 1500 is 46 FPDUs). */
#define IW_TX_BATCH	  32
#define IW_TX_BATCH_BYTES (512u * 1024u)
/* Iovecs for one tx_want that takes a whole batch of one-SGE FPDUs (header, payload,
 * trailer each). */
#define IW_TX_BATCH_IOV (3 * IW_TX_BATCH)

struct iw_qp;

/* ---- create / destroy ---- */

/* Creates a QP in RESET from the same init block as the RoCE engine (type must be
 * IBV_QPT_RC; max_send_sge / max_recv_sge <= IW_MAX_SGE; max_inline <= ENG_MAX_INLINE). The
 * QP keeps copies of *init and *env; init->send_cq / recv_cq / srq are borrowed and must
 * outlive the QP. Returns 0 and *out, or -EINVAL / -ENOMEM. The send and receive rings, the
 * header scratch areas and the transmit rings at their first size are allocated here; what
 * only some QPs need grows later, and a QP that cannot get it carries on with what it has or
 * fails the one request, cleanly: the transmit rings (framing runs less far ahead of TCP),
 * the outbound READ queue (at the first READ posted: that post fails with -ENOMEM) and the
 * inbound one (a Read Request beyond it: a Terminate, as siw on an IRQ overflow). */
int iw_qp_create(const struct eng_qp_init *init, const struct eng_env *env, struct iw_qp **out);
/* Frees the QP (no completions are produced; NULL is ignored). */
void iw_qp_destroy(struct iw_qp *qp);
uint32_t iw_qp_num(const struct iw_qp *qp);
/* init->user, as given at create. */
void *iw_qp_user(const struct iw_qp *qp);
/* The transport's own pointer for this QP (its connection; NULL at create), for the caller's
 * env->wake to find what to move without a search. */
void iw_qp_set_link(struct iw_qp *qp, void *link);
void *iw_qp_link(const struct iw_qp *qp);

/* The iWARP QP that begins with b (env->wake / env->event receive it), NULL if b begins a
 * RoCE QP. */
static inline struct iw_qp *iw_qp_of(struct eng_qp_base *b)
{
	return b->iwarp ? (struct iw_qp *)(void *)b : NULL; /* base is its first member */
}

/* An iWARP QP's base. */
static inline struct eng_qp_base *iw_qp_base(struct iw_qp *qp)
{
	return (struct eng_qp_base *)(void *)qp;
}

/* ---- attributes and states ---- */

struct iw_qp_attr {
	uint32_t ird;	 /* inbound RDMA Read queue depth (responder resources), <= IW_MAX_IRD:
			    a Read Request beyond it is a fatal error (siw: RDMAP catastrophic) */
	uint32_t ord;	 /* outbound RDMA Reads outstanding at once, 1..IW_MAX_ORD; further READs
			    wait (and so does everything posted after them: the SQ is in order) */
	unsigned access; /* IBV_ACCESS_REMOTE_WRITE / IBV_ACCESS_REMOTE_READ: inbound RDMA Writes
			    / Read Requests are allowed on this QP (each MR is checked too) */
	uint16_t mulpdu; /* largest ULPDU we send: iw_mulpdu(TCP MSS); >= IW_MIN_MULPDU. May be
			    changed at any time (MSS change); applies from the next message */
	uint16_t max_rx_ulpdu; /* largest ULPDU_LENGTH accepted from the peer; 0 = 65535 */
	bool crc; /* CRC32c negotiated in MPA (both directions); change only before RTS */
};

/* Replaces the attribute set. Returns 0, or -EINVAL (ird > IW_MAX_IRD, ord 0 or >
 * IW_MAX_ORD, mulpdu < IW_MIN_MULPDU, crc changed in RTS / SQD) leaving the QP as it was.
 * crc and max_rx_ulpdu take effect when the stream starts (the move to RTS). */
int iw_qp_set_attr(struct iw_qp *qp, const struct iw_qp_attr *attr);
void iw_qp_get_attr(const struct iw_qp *qp, struct iw_qp_attr *attr);

/* Moves the QP to `state` (the caller, obj/, has checked that the verbs transition is legal).
 *   RESET  empties both queues without completions and forgets all stream state.
 *   INIT / RTR  receives may be posted; no stream bytes move yet.
 *   RTS    the connection is established (after MPA, with attr.crc / mulpdu / ird / ord set):
 *          the stream starts at an FPDU boundary in both directions, MSNs at 1.
 *   SQD    new send WQEs are no longer started (those in flight finish).
 *   ERR    flushes every outstanding WR with IBV_WC_WR_FLUSH_ERR, send queue and receive queue
 *          each in order, and stops the stream at once (no Terminate, no further bytes).
 *          Call it when TCP resets or closes, or to abort. Posting in ERR completes at once
 *          with IBV_WC_WR_FLUSH_ERR.
 * The engine also enters ERR on its own on a protocol error or a received Terminate (with an
 * async event through env->event); see "errors" below. */
void iw_qp_set_state(struct iw_qp *qp, enum ibv_qp_state state, uint64_t now);
enum ibv_qp_state iw_qp_state(const struct iw_qp *qp);
/* Whether qp's send CQ holds completions the application has not polled yet (of this QP or
 * another on the CQ): one that posts with such completions waiting is pipelining. */
bool iw_qp_send_cq_waiting(const struct iw_qp *qp);

/* Auto-connect (core/iw_rdv.c): while the connection is being made the QP stays in INIT or
 * RTR; with early_send true, send WRs are accepted there and queued (they start when the
 * connection moves the QP to RTS), as the consumer already sees the QP in RTS. */
void iw_qp_set_early_send(struct iw_qp *qp, bool on);
/* True when the receive side is between messages: no FPDU, Send, Write or Read Response
 * half-received and no READ of ours waiting for its response. An orderly end of the stream
 * here loses nothing the QP was promised. */
bool iw_qp_rx_quiescent(const struct iw_qp *qp);
/* The connection could not be made (or was lost before RTS): ERR, flushing both queues, and
 * IBV_EVENT_QP_FATAL. */
void iw_qp_conn_failed(struct iw_qp *qp, uint64_t now);

/* What the MPA exchange (engine/iw_conn.h, RFC 6581 peer-to-peer RTR frames) already used of
 * the stream, applied right after the move to RTS and before any stream byte moves:
 * tx_msn_used[qn] / rx_msn_used[qn] messages were sent / received on untagged queue qn (the
 * first MSN becomes 1 + used); orq_rtr: we sent a zero-length RTR Read Request, so one silent
 * READ {sink STag 0, TO 0, size 0} heads the ORQ (it holds one ORD slot) and the peer's
 * zero-length Read Response completes it without a work completion (siw_qp_mpa_rts). NULL
 * arrays mean none used. Returns 0, or -EINVAL if the QP is not in RTS or bytes have moved. */
int iw_qp_set_rtr(struct iw_qp *qp, const uint32_t tx_msn_used[IW_QN__COUNT],
		  const uint32_t rx_msn_used[IW_QN__COUNT], bool orq_rtr);

/* ---- posting (verbs semantics: ibv_post_send(3), ibv_post_recv(3)) ---- */

/* Posts a chain of send WRs. Opcodes: IBV_WR_SEND, IBV_WR_SEND_WITH_INV (invalidate_rkey is
 * sent in the RsvdULP field), IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ (at most IW_MAX_SGE_RD
 * sink SGE). IBV_SEND_SOLICITED turns a Send into Send with SE (Send with SE and
 * Invalidate); IBV_SEND_INLINE copies the data now (<= init.max_inline); IBV_SEND_SIGNALED
 * (or init.sq_sig_all) asks for a success completion; IBV_SEND_FENCE holds the WR until every
 * earlier READ has completed. iWARP has no immediate data and siw no atomics (RFC 7306): a
 * WRITE_WITH_IMM, SEND_WITH_IMM or atomic WR fails with -EINVAL. Returns 0, or -EINVAL (bad
 * opcode, too many SGEs, inline too long, QP in RESET/INIT/RTR) / -ENOMEM (send queue full)
 * with *bad set to the first WR not posted (earlier ones are posted). A SEND / WRITE
 * completes when its last byte has been handed to TCP (iw_qp_tx_done), a READ when its last
 * Read Response byte is placed and the FPDU's CRC checked; completions are in post order. */
int iw_qp_post_send(struct iw_qp *qp, const struct ibv_send_wr *wr, const struct ibv_send_wr **bad,
		    uint64_t now);
/* The direct way of one small message (iw_tx.c): a single SEND (SE, with Invalidate) or RDMA
 * WRITE whose payload fits one FPDU of at most IW_TX_ONE_PAY bytes, posted to an RTS QP that
 * has nothing else outstanding (no WR in its send queue, nothing framed or due), is framed whole
 * into the QP's own buffer - header, payload read from its SGEs (keys checked) or inline, pad
 * and CRC - and handed to the caller as one FPDU of *len bytes, without a send queue entry, the
 * transmit rings or a pass. The caller gives it to TCP at once and then must call
 * iw_qp_one_sent with the same wr and the bytes TCP took (0 on EAGAIN or an error). Returns
 * the FPDU or NULL: the WR takes the ordinary way (iw_qp_post_send), which also refuses a bad
 * one with its error. */
#define IW_TX_ONE_PAY 512u
/* The longest such FPDU. */
#define IW_TX_ONE                                                                                  \
	(IW_FPDU_LEN_SIZE + IW_DDP_UNTAGGED_HDR_LEN + IW_TX_ONE_PAY + 3 + IW_FPDU_CRC_SIZE)
const uint8_t *iw_qp_post_one(struct iw_qp *qp, const struct ibv_send_wr *wr, size_t *len);
/* sent bytes of the FPDU of the last iw_qp_post_one went to TCP. All of them: the message
 * completes here (a completion if signaled), as a SEND / WRITE does once its last byte is
 * with TCP. Fewer: the WR becomes an ordinary send queue entry with that FPDU framed and
 * partly sent; iw_qp_tx_want offers the rest. */
void iw_qp_one_sent(struct iw_qp *qp, const struct ibv_send_wr *wr, size_t sent);
/* Receives are posted with eng_base_post_recv (eng.h) on iw_qp_base(qp). Every Send consumes
 * one receive, zero-length ones included; there is no RNR in iWARP: a Send finding no
 * receive is a fatal error (as siw). */

/* ---- receive: the stream from the peer ---- */

/* Where the next stream bytes must be read to: *dst, at most *len bytes (> 0). While headers
 * or trailers are being read that is a scratch area inside the QP (never more than the bytes
 * that are certainly not payload, so payload never lands there); while payload is being read
 * it is the validated target: the host address inside the MR (RDMA Write, Read Response) or
 * inside the current receive SGE (Send), never more than the rest of the current FPDU's
 * payload or of the current SGE. Every check (STag, PD, access, bounds, TO + length
 * overflow, MSN, MO, receive buffer size, IRD) has passed before the address is given out.
 * The pointer stays valid until the next iw_qp_rx_done / state change. Returns 0, or -EPIPE
 * if the QP does not take stream bytes (not RTS / SQD: the caller should stop reading). */
int iw_qp_rx_want(struct iw_qp *qp, void **dst, size_t *len);

/* Consumes n bytes (n <= the *len of the last iw_qp_rx_want) that the caller has written at
 * the *dst it returned. CRC32c is computed over the placed bytes where they lie. Returns 0;
 * -EPROTO if these bytes broke the protocol (the QP is now in ERR, a Terminate is queued for
 * the peer: keep calling iw_qp_tx_want until iw_qp_tx_finished, then close TCP);
 * -ECONNRESET if they held a Terminate from the peer (the QP is now in ERR: close TCP);
 * -EPIPE if the QP does not take bytes; -EINVAL if n is larger than allowed or no want
 * preceded (nothing consumed). */
int iw_qp_rx_done(struct iw_qp *qp, size_t n, uint64_t now);

/* Payload bytes of the FPDU being received, or of the last one between FPDUs (0 before the
 * first): how large the peer's FPDUs run, for a caller choosing how far to read ahead. */
uint32_t iw_qp_rx_fpdu_payload(const struct iw_qp *qp);

/* The same path for bytes the caller already holds (tests, fuzzing, a recv() into a staging
 * buffer): parses buf in one pass and copies each payload piece to the place iw_qp_rx_want
 * would have named, after the same checks (counted as rx_payload_copied). *used gets the bytes
 * consumed: all len on 0, on an error the bytes up to and including the step in which it was
 * found. Returns as iw_qp_rx_done (and -ECONNRESET likewise). buf stays the caller's. */
int iw_qp_rx_bytes(struct iw_qp *qp, const uint8_t *buf, size_t len, size_t *used, uint64_t now);

/* ---- transmit: the stream to the peer ---- */

/* Fills iov[0 .. k) with the next bytes to write to the TCP stream and returns k (0: nothing
 * to send now; the engine calls env->wake when that changes). FPDUs are sized by attr.mulpdu as
 * siw does (a message's non-last FPDUs fill the MULPDU exactly) and framed ahead of TCP: one
 * call covers up to IW_TX_BATCH FPDUs (about IW_TX_BATCH_BYTES at most), of one or several
 * messages, as far as max_iov allows (an FPDU takes 2 or 3 iovecs, one more per extra SGE;
 * IW_TX_BATCH_IOV hold a whole batch of one-SGE FPDUs; with fewer, even below IW_TX_MAX_IOV,
 * the rest comes in later calls). Priority at each message boundary, as siw: a Terminate
 * first, then Read Responses (at most 4 in a row while send WQEs wait), then new send WQEs;
 * the choice is made when a message's first FPDU is framed. The iovecs point into the QP's
 * scratch area, the WQE's inline data or registered memory (read-only for the caller) and
 * are valid until the next call on this QP (another iw_qp_tx_want included: the rings they
 * point into may grow). Returns -EINVAL if max_iov < 1. */
int iw_qp_tx_want(struct iw_qp *qp, uint64_t now, struct iovec *iov, int max_iov);

/* True when iw_qp_tx_want may offer bytes (or has work to frame): a cheap check for a caller
 * that polls; false means a want would return 0. */
bool iw_qp_tx_pending(const struct iw_qp *qp);
/* Nothing to frame or send and the QP in RTS: iw_qp_tx_want would offer nothing and change
 * nothing (most passes after a receive). */
bool iw_qp_tx_idle(const struct iw_qp *qp);

/* n bytes of the last iw_qp_tx_want's iovecs (in order) were handed to TCP; the next want
 * continues after them (TCP may take fewer than offered). A SEND / WRITE completes here when
 * its last byte goes. Returns 0, or -EINVAL if n exceeds what was offered (nothing done). */
int iw_qp_tx_done(struct iw_qp *qp, size_t n);

/* The memory [addr, addr + len) is about to go away (its region is deregistered): payload of
 * FPDUs framed and not yet handed to TCP that lies there is copied into the QP, so that what
 * goes out is what the memory held now, never what it holds later. The message's FPDUs not
 * framed yet find the region gone (a local protection error, as any access after the
 * deregistration). Returns 0, or -ENOMEM (nothing changed). */
int iw_qp_tx_forget(struct iw_qp *qp, const void *addr, size_t len);

/* True once the QP is in ERR and will never produce another byte (its Terminate, if any,
 * and the FPDU that was half-written when the error struck have been handed to TCP): the
 * caller should close the TCP connection now. */
bool iw_qp_tx_finished(const struct iw_qp *qp);

/* Queues a zero-length RDMA Write (STag 1, TO 0, L set: the frame siw uses as an RFC 6581
 * RTR) to go out when the transmit side has nothing else to send: it places nothing and
 * completes nothing at the peer (RFC 5040 allows zero-length RDMA Writes; siw and iw_rx.c
 * check nothing for them), but it is new bytes on the stream. Why: Linux siw as MPA
 * responder hands the socket to its QP only after sending the MPA Reply, and stream bytes that
 * arrive in between stay unread until more bytes arrive (its socket callback ignores data in
 * that state; siw_accept in Linux 6.1). An initiator that sends its first FPDU at once and
 * then waits for an answer (rping) would wait for ever; core/ nudges such connections
 * (iw_progress.c). Returns 0; -EBUSY if a message is in progress or due (its bytes do the
 * same; nothing queued); -EINVAL if the QP is not in RTS / SQD. */
int iw_qp_nudge(struct iw_qp *qp);

/* ---- errors ----
 * Every violation found on the receive side (in this order: the stream parser's checks,
 * then per message: interleaving, MSN, MO, receive buffer, STag, PD, access, TO wrap,
 * bounds, IRD) makes the engine, before any byte of the offending segment is placed:
 *  - queue a Terminate (layer / etype / ecode from iw_err_term, with the offending DDP (and
 *    Read Request) header attached as siw does) ahead of everything else;
 *  - complete the WR the error is about with its status (receive buffer too small:
 *    IBV_WC_LOC_LEN_ERR; bad receive SGE or Read Response sink: IBV_WC_LOC_PROT_ERR; Send
 *    with Invalidate of an STag that cannot be invalidated: IBV_WC_REM_INV_REQ_ERR; a CRC
 *    error inside a Send or Read Response: IBV_WC_GENERAL_ERR, never success), move to ERR,
 *    flush everything else in order, raise IBV_EVENT_QP_ACCESS_ERR (STag / bounds / access
 *    errors) or IBV_EVENT_QP_FATAL (anything else).
 * A received Terminate moves the QP to ERR: the oldest started send WQE completes with a
 * status mapped from the Terminate's layer / etype (DDP tagged and RDMAP protection:
 * IBV_WC_REM_ACCESS_ERR; DDP untagged: IBV_WC_REM_INV_REQ_ERR; anything else:
 * IBV_WC_REM_OP_ERR), everything else is flushed, IBV_EVENT_QP_FATAL is raised, and nothing
 * more is sent. On an SRQ QP, ERR also raises IBV_EVENT_QP_LAST_WQE_REACHED. */

/* The last Terminate received (decoded) / sent. Returns 0 and fills *out, or -ENOENT. */
int iw_qp_term_rcvd(const struct iw_qp *qp, struct iw_term *out);
int iw_qp_term_sent(const struct iw_qp *qp, struct iw_term *out);

/* ---- counters (DESIGN.md decision 8) ---- */

/* X(name, description): traffic, drops and Terminates received by layer / error type. */
#define IW_COUNTERS(X)                                                                             \
	X(tx_fpdus, "FPDUs handed to TCP")                                                         \
	X(tx_bytes, "stream bytes handed to TCP")                                                  \
	X(tx_payload_bytes, "payload bytes sent from registered memory or inline data")            \
	X(rx_fpdus, "FPDUs received and checked")                                                  \
	X(rx_bytes, "stream bytes consumed")                                                       \
	X(rx_payload_placed, "payload bytes received in place (no copy)")                          \
	X(rx_payload_copied, "payload bytes copied by the engine (not read in place)")             \
	X(rx_sends, "Send messages completed")                                                     \
	X(rx_writes, "RDMA Write messages placed")                                                 \
	X(rx_zero_writes, "zero-length RDMA Writes received (nudges, RTR frames): nothing placed") \
	X(rx_read_reqs, "RDMA Read Requests accepted")                                             \
	X(rx_read_resps, "RDMA Read Responses completed")                                          \
	X(drop_bad_state, "stream bytes refused: QP not in RTS / SQD")                             \
	X(tx_nudges, "zero-length RDMA Writes sent as nudges (iw_qp_nudge)")                       \
	X(tx_direct, "messages framed whole and sent at their post (iw_qp_post_one)")              \
	X(drop_tx_aborted, "bytes of a half-sent FPDU abandoned on ERR")                           \
	X(term_rcvd_rdmap_catastrophic, "Terminates received: RDMAP local catastrophic")           \
	X(term_rcvd_rdmap_protection, "Terminates received: RDMAP remote protection")              \
	X(term_rcvd_rdmap_op, "Terminates received: RDMAP remote operation")                       \
	X(term_rcvd_ddp_catastrophic, "Terminates received: DDP local catastrophic")               \
	X(term_rcvd_ddp_tagged, "Terminates received: DDP tagged buffer error")                    \
	X(term_rcvd_ddp_untagged, "Terminates received: DDP untagged buffer error")                \
	X(term_rcvd_llp, "Terminates received: LLP (MPA / TCP) error")                             \
	X(term_rcvd_other, "Terminates received: unknown layer / error type")                      \
	X(term_rcvd_bogus, "Terminates received with a wrong MSN (siw: bogus, reset anyway)")

/* Engine-level errors with no row in the wire's IW_ERRORS table, in the same X(name, layer,
 * etype, ecode, hdrct) shape: a Read Response with no READ outstanding, two messages of one
 * kind interleaved, an unusable receive SGE (siw: DDP local catastrophic). */
#define IW_LOCAL_ERRORS(X) X(DDP_CATASTROPHIC, IW_LAYER_DDP, IW_ETYPE_DDP_CATASTROPHIC, 0x00, 0)

enum iw_counter {
#define IW_COUNTER_ENUM_(name, desc) IW_CNT_##name,
	IW_COUNTERS(IW_COUNTER_ENUM_)
#undef IW_COUNTER_ENUM_
/* term_sent_<NAME>: Terminates sent, one counter per error (wire table, then local). */
#define IW_COUNTER_TERM_(name, layer, etype, ecode, hdrct) IW_CNT_term_sent_##name,
	    IW_ERRORS(IW_COUNTER_TERM_) IW_LOCAL_ERRORS(IW_COUNTER_TERM_)
#undef IW_COUNTER_TERM_
		IW_CNT__COUNT
};
extern const char *const iw_counter_names[IW_CNT__COUNT];
/* The QP's counters, indexed by enum iw_counter; valid as long as the QP. */
const uint64_t *iw_qp_counters(const struct iw_qp *qp);

/* ---- private: the QP object, for src/engine/iw_*.c only ----
 * Split by role as siw splits it: iw_qp.c (create, attributes, states, posting, errors,
 * flush, completions), iw_rx.c (the receive side: siw_qp_rx.c), iw_tx.c (the transmit side:
 * siw_qp_tx.c). */
#ifdef IW_ENG_PRIVATE

#include "engine/eng_int.h"

/* Where the transmit side takes the current message from. */
enum iw_tx_src { IW_TX_NONE, IW_TX_TERM, IW_TX_RRESP, IW_TX_SQ, IW_TX_NUDGE };

/* An inbound Read Request, accepted and waiting to be answered (RFC 5040 4.4; siw IRQ). */
struct iw_irqe {
	struct iw_rreq rreq;
	/* The request as received, from ULPDU_LENGTH on: attached to a Terminate if its source
	 * turns out unreadable while the response is sent (siw re-creates it the same way). */
	uint8_t raw[IW_FPDU_LEN_SIZE + IW_RREQ_ULPDU_LEN];
};

/* Entry i of the inbound Read Request ring (struct iw_qp irq). */
#define iw_irq_at(qp, i) (&(qp)->irq[(i) & ((qp)->irq_cap - 1)])

/* Bytes read into the scratch area at the start of an FPDU: ULPDU_LENGTH + the smallest
 * header (tagged, 14). No FPDU has payload before this point. */
#define IW_RX_HDR_MIN (IW_FPDU_LEN_SIZE + IW_DDP_TAGGED_HDR_LEN)

struct iw_rxs {
	struct iw_rx p; /* the wire layer's stream parser */
	uint8_t scratch[128];
	/* The FPDU being received. */
	uint32_t off;	   /* its bytes consumed so far */
	uint32_t hdr_end;  /* 2 + header length once its control word is in, else 0 */
	uint32_t pay_len;  /* payload bytes (valid with have_hdr) */
	uint32_t fpdu_len; /* whole FPDU with pad and CRC (valid with have_hdr) */
	uint32_t placed;   /* payload bytes placed */
	bool have_hdr;	   /* its header was accepted */
	bool rtr_resp;	   /* it is the Read Response to the RTR Read (no WQE) */
	uint8_t op;	   /* its opcode (valid with have_hdr) */
	bool last;	   /* its L flag */
	uint8_t *tdst;	   /* tagged payload: host address of its first payload byte */
	struct eng_iov piece[ENG_MAX_SGE]; /* untagged payload: resolved receive pieces */
	uint32_t npiece;
	/* What the last iw_qp_rx_want handed out. */
	uint8_t *want_dst;
	size_t want_len;
	bool want_valid;
	/* The tagged message in progress (Write or Read Response, RFC 5041 5.1). */
	bool t_active;
	uint8_t t_op;
	uint32_t t_stag;
	uint64_t t_to; /* TO the next segment must carry */
	/* The untagged Send in progress (RFC 5041 5.2) and the receive WQE it fills. */
	bool u_active;
	uint8_t u_op;
	uint32_t u_msn;
	uint32_t u_mo; /* bytes placed: the MO the next segment must carry */
	struct eng_rwqe rwqe;
	/* Checked at the header, applied once the CRC is good. */
	bool pend_rreq;
	struct iw_irqe rreq;
	bool pend_term;
	uint32_t term_msn;
	struct iw_term term;
};

/* Payload pieces shared by the framed FPDUs (one each unless a WQE has several SGEs): at most
 * IW_TX_PAY, and room for ENG_MAX_SGE more before each FPDU is framed. */
#define IW_TX_PAY 64 /* a power of two */
/* The rings of framed FPDUs and of their pieces start this small (an idle QP, or one that
 * sends a message at a time, needs no more) and double while they fill, up to IW_TX_BATCH
 * and IW_TX_PAY. */
#define IW_TX_F_FIRST	4u
#define IW_TX_PAY_FIRST ENG_MAX_SGE
/* Longest FPDU header framed here (a Read Request); a Terminate lives in iw_txs.term. */
#define IW_TX_HDR_MAX (IW_FPDU_LEN_SIZE + IW_RREQ_ULPDU_LEN)

/* One framed FPDU waiting for TCP. */
struct iw_txf {
	uint8_t hdr[IW_TX_HDR_MAX]; /* ULPDU_LENGTH + header (IW_TX_TERM: unused, see term) */
	uint8_t trl[3 + IW_FPDU_CRC_SIZE]; /* pad + CRC */
	uint8_t hdr_len, trl_len;
	uint8_t src;  /* enum iw_tx_src of its message */
	bool last;    /* it ends its message */
	uint8_t npay; /* payload pieces, from iw_txs.pay[pay & (IW_TX_PAY - 1)] on */
	uint32_t pay; /* free-running index of its first piece */
	uint32_t msg; /* IW_TX_SQ: SQ index; IW_TX_RRESP: IRQ index */
	uint32_t pay_len;
	uint32_t len; /* FPDU bytes */
};

struct iw_txs {
	/* The message being framed (siw's current WQE). */
	uint8_t src;	   /* enum iw_tx_src of the message being framed */
	bool active;	   /* a message is partly framed: b is valid */
	struct iw_tx b;	   /* the wire layer's FPDU builder for it */
	uint32_t msg;	   /* IW_TX_SQ: its SQ index; IW_TX_RRESP: its IRQ index */
	uint32_t irq_next; /* IRQ index of the next Read Response to start, irq_head..irq_tail */
	uint32_t irq_burst;
	bool nudge_pending; /* iw_qp_nudge: a zero-length Write when nothing else goes */
	/* Framed FPDUs, oldest first: [head, tail) free-running, entry i at f[i & (f_cap - 1)];
	 * the head one is partly handed to TCP (sent bytes). Their payload pieces likewise in
	 * pay[]. Both rings are the QP's (iw_tx_reset keeps them) and grow (iw_tx.c). */
	struct iw_txf *f;
	struct eng_iov *pay;
	uint32_t f_cap, pay_cap;
	uint32_t head, tail;
	uint32_t pay_head, pay_tail;
	size_t queued;	/* bytes framed and not yet handed to TCP */
	size_t sent;	/* bytes of the head FPDU handed to TCP */
	size_t offered; /* bytes the last want offered */
	/* The Terminate to send (before anything else, once no FPDU is half-sent). */
	bool term_pending;
	uint8_t term[IW_FPDU_LEN_SIZE + IW_TERM_ULPDU_MAX + 3 + IW_FPDU_CRC_SIZE];
	uint16_t term_len;
	bool finished; /* ERR: nothing more will be produced */
	/* Payload copied out of memory that went away (iw_qp_tx_forget): pieces point here. */
	uint8_t *copy;
	size_t copy_len;
	/* The direct way's FPDU (iw_qp_post_one; IW_TX_ONE bytes, allocated at its first use, so
	 * that an idle QP does not carry it): its length and payload, and its op. Reused only
	 * when the rings are empty again (a part TCP did not take is a ring piece). */
	uint8_t *one;
	uint32_t one_len, one_pay;
	uint8_t one_op;
};

struct iw_qp {
	struct eng_qp_base base; /* first (iw_qp_of); base.iwarp is true */
	void *link;		 /* iw_qp_set_link */
	struct iw_qp_attr attr;
	uint64_t counters[IW_CNT__COUNT];

	/* Of the send queue's [sq_head, sq_tail) (base), [sq_head, sq_next) is started. */
	uint32_t sq_next;

	/* A zero-length RTR Read sent by the MPA exchange heads the ORQ (iw_qp_set_rtr). */
	bool rtr_read;
	/* The verbs consumer moved the QP to RTS while its connection is still being made
	 * (auto-connect): sends are queued in INIT / RTR and start at the move to RTS. */
	bool early_send;
	/* Outbound READs whose request is out, oldest first: SQ indices (siw ORQ), entry i at
	 * orq[i & (orq_cap - 1)]. Allocated when the first READ is posted, with room for
	 * min(IW_MAX_ORD, sq_max) rounded up to a power of two: no QP can have more READs
	 * out, whatever ORD it is given later. */
	uint32_t *orq;
	uint32_t orq_cap;
	uint32_t orq_head, orq_tail;
	/* Inbound Read Requests to answer, in order (siw IRQ): a ring of irq_cap entries (a power
	 * of two; none until the first request), grown as requests queue up to the IRD, so an
	 * idle QP or one that is never read from does not carry IW_MAX_IRD entries (10 KiB).
	 * Entry i (free-running) is irq[i & (irq_cap - 1)] (iw_irq_at). */
	struct iw_irqe *irq;
	uint32_t irq_cap;
	uint32_t irq_head, irq_tail;

	uint32_t tx_msn[IW_QN__COUNT]; /* last MSN sent per queue (first message: 1) */
	uint32_t rx_msn[IW_QN__COUNT]; /* MSN expected next per queue */

	/* ERR struck while an FPDU was half-sent: it goes out whole (it points into WQE
	 * memory), then the send queue is flushed. */
	bool sq_flush_pending;
	bool have_term_sent, have_term_rcvd;
	struct iw_term term_sent, term_rcvd;

	struct iw_rxs rx;
	struct iw_txs tx;
};

/* Engine error codes beyond the wire's enum iw_err (IW_LOCAL_ERRORS), returned negated. */
enum iw_local_err {
	IW_LE__BEFORE = IW_E__END,
#define IW_LOCAL_ENUM_(name, layer, etype, ecode, hdrct) IW_LE_##name,
	IW_LOCAL_ERRORS(IW_LOCAL_ENUM_)
#undef IW_LOCAL_ENUM_
	    IW_LE__END
};

#define IW_INC(qp, name)    ((qp)->counters[IW_CNT_##name]++)
#define IW_ADD(qp, name, n) ((qp)->counters[IW_CNT_##name] += (n))
#define IW_RRESP_BURST	    4 /* siw SIW_IRQ_MAXBURST_SQ_ACTIVE */

static inline struct eng_swqe *iw_swqe_at(struct iw_qp *qp, uint32_t idx)
{
	return &qp->base.sq[idx & qp->base.sq_mask];
}

/* iw_qp.c */
/* Doubles a ring of *cap entries of esz bytes each (a power of two; 0: none yet, and it gets
 * first entries), keeping each entry of [head, tail) at its free-running index i, which lives
 * at i & (cap - 1). The old ring is freed. 0, or -ENOMEM with the ring unchanged. */
int iw_ring_grow(void **ring, uint32_t *cap, uint32_t first, size_t esz, uint32_t head,
		 uint32_t tail);
/* A protocol error found locally: queues the Terminate for err (negative iw_err or
 * iw_local_err; raw/raw_len: the offending header from ULPDU_LENGTH on, may be NULL), moves
 * to ERR (flushing), raises the event. Returns -EPROTO. */
int iw_fatal(struct iw_qp *qp, int err, const uint8_t *raw, size_t raw_len);
/* Moves to ERR: flushes the receive side now and the send side now or, if an FPDU is
 * half-sent and abort is false, once it is out. Raises ev if raise. */
void iw_to_err(struct iw_qp *qp, bool abort, enum ibv_event_type ev, bool raise);
/* Completes the receive WQE of the Send in progress with `status`. */
void iw_recv_complete(struct iw_qp *qp, enum ibv_wc_status status, uint32_t byte_len,
		      bool solicited, uint32_t inv_stag, bool inv);
void iw_sq_flush(struct iw_qp *qp);
/* Retires finished send WQEs at the head, in order. */
void iw_sq_retire(struct iw_qp *qp);
/* A send WR's completion with this status (its byte count when it succeeded). */
void iw_send_complete(struct iw_qp *qp, uint64_t wr_id, uint8_t op, uint32_t len,
		      enum ibv_wc_status status);
void iw_kick(struct iw_qp *qp);
void iw_check_drained(struct iw_qp *qp);
/* iw_rx.c */
void iw_rx_reset(struct iw_qp *qp);
/* iw_tx.c */
/* Allocates the transmit rings at their first size: 0 or -ENOMEM. */
int iw_tx_rings_init(struct iw_qp *qp);
void iw_tx_rings_fini(struct iw_qp *qp);
/* Forgets everything framed (the rings stay). */
void iw_tx_reset(struct iw_qp *qp);
bool iw_tx_ready(const struct iw_qp *qp);
/* Drops every framed FPDU and the message being framed (ERR); counts half-sent bytes. */
void iw_tx_abort(struct iw_qp *qp);
/* ERR without abort: keeps only an FPDU that is partly handed to TCP (it must go out whole,
 * so that the peer can parse what follows) and drops the rest. Returns true if one was kept. */
bool iw_tx_keep_half(struct iw_qp *qp);
/* Framed FPDUs wait or a message is partly framed. */
bool iw_tx_busy(const struct iw_qp *qp);

#endif /* IW_ENG_PRIVATE */

#endif
