/* The MPA connection set-up of one iWARP connection (RFC 5044 section 7.1 "MPA Request and Reply
 * Frame Format" and the start-up rules around it, RFC 6581 enhanced connection establishment),
 * both roles, byte-compatible with Linux siw (siw_cm.c; ../shared/spec/iwarp.md section 2).
 *
 * Sans-I/O: no sockets, no clock, no allocation. The caller (the progress loop) feeds the bytes
 * the peer sent (iw_conn_input) and the time, sends the bytes iw_conn_tx_peek shows, and calls
 * iw_conn_tick at iw_conn_deadline(). Frames are decoded resumably: any split of the stream,
 * one byte at a time included, gives the same result. All frames are built and parsed by the
 * wire layer (wire/iwarp/iwarp.h: iw_mpa_*, iw_fpdu_*, iw_term_build).
 *
 * ---- Life cycle ----
 * Initiator (active side, after the TCP connect completed):
 *   iw_conn_init -> the MPA Request is queued -> AWAIT_REP -> the Reply arrives ->
 *   ESTABLISHED (the RTR frame, if negotiated, is queued behind the Request), or REJECTED (the
 *   peer sent a Reply with R), or FAILED.
 * Responder (passive side, after accept):
 *   iw_conn_init -> AWAIT_REQ -> the Request arrives -> REQ_RCVD (the application decides:
 *   iw_conn_info shows the peer's private data, IRD/ORD, CRC and P2P wishes) ->
 *   iw_conn_accept (Reply queued) -> ESTABLISHED, or AWAIT_RTR (P2P: the initiator's RTR frame
 *   is awaited, then ESTABLISHED), or iw_conn_reject (Reject queued) -> REJECTED.
 *   A Request the responder cannot accept is rejected by the machine itself (REJECTED).
 *
 * ---- Who does what with the stream ----
 * Inbound: iw_conn_input consumes exactly the handshake's bytes (the MPA frame; at a P2P
 * responder also the RTR FPDU) and nothing after them; every later byte belongs to the QP's
 * FPDU receiver (iw_rx). So: pass bytes to iw_conn_input while iw_conn_rx_done() is false, then
 * give the rest of that buffer (from *used on) and everything after to the QP. FPDUs may follow
 * the Reply in the same TCP segment (siw's responder sends right after its Reply).
 * Outbound: send iw_conn_tx_peek's bytes first (partial writes: iw_conn_tx_advance by what the
 * socket took). The QP may send its own FPDUs only when iw_conn_tx_ready() is true.
 * On REJECTED or FAILED: send what iw_conn_tx_peek still shows (a Reject or a Terminate; best
 * effort), then shut the socket down for writing and close it (io_tcp_shutdown, io_tcp_close),
 * so that the peer reads those bytes before the close.
 *
 * ---- Revisions (RFC 5044 7.1 Rev field, RFC 6581) ----
 * The initiator sends Rev 2 with the Enhanced flag and the IRD/ORD block (siw's Request shape)
 * or, configured so, Rev 1. A Rev 1 Reply to a Rev 2 Request is accepted as revision 1 (no
 * IRD/ORD exchange, no P2P) unless cfg.no_rev1_fallback is set; siw itself fails such a
 * connection. The responder answers in the Request's revision (siw: the Reply echoes the
 * Request's flags and Rev); a responder configured for revision 1 answers a Rev 2 Request in
 * revision 1 without the IRD/ORD block (the lower of the two revisions).
 *
 * ---- CRC (RFC 5044 7.1 C flag: "CRC MUST be used if either side asks for it") ----
 * The connection uses CRC32c iff the Reply has C. Policies, enum iw_conn_crc:
 *   PEER      (siw default) initiator: C = 0 in the Request; responder: echo the Request's C.
 *   REQUIRED  initiator: C = 1, and a Reply without C fails (-ENOPROTOOPT; siw
 *             mpa_crc_required); responder: C = 1 in every Reply (turns CRC on).
 *   REQUIRED_STRICT  as REQUIRED, but the responder rejects a Request without C instead of
 *             turning CRC on (for peers that must offer it).
 *   OFF_STRICT  refuse CRC (siw mpa_crc_strict): the responder rejects a Request with C; the
 *             initiator fails on a Reply with C (-ENOPROTOOPT).
 * Markers are never used: a Request with M is rejected, a Reply with M fails the connection.
 *
 * ---- Rejects sent by the responder (a Reply with R set, then close) ----
 *   Request with M (markers)        Reject echoing flags/Rev, M cleared; reason -IW_E_MPA_MARKERS
 *   Rev not 1 or 2                  Reject with Rev 1, no IRD/ORD block (every MPA peer parses
 *                                   Rev 1); the whole Request is read first; -IW_E_MPA_REV
 *   Rev 2 + Enhanced, PD_Length < 4 Reject, Enhanced cleared (siw: reject); -IW_E_MPA_V2
 *   CRC policy conflict (above)     Reject echoing the Request; -ENOPROTOOPT
 *   iw_conn_reject (application)    Reject with the application's private data; -ECONNREFUSED
 * Protocol rejects carry no private data (as siw). Not rejected, the connection just fails
 * (no Reply, as siw): a key that is not "MPA ID Req Frame" (-IW_E_MPA_KEY, at the first wrong
 * byte), PD_Length > 512 (-IW_E_MPA_PD_LEN), bytes after the Request before the Reply was sent
 * (-EPROTO: RFC 5044 says the initiator waits for the Reply; siw refuses such extra data).
 *
 * ---- IRD/ORD (RFC 6581; siw relaxed_ird_negotiation) ----
 * Responder: the Request's ORD caps our IRD need and its IRD caps our ORD. iw_conn_accept's
 * ird/ord are adjusted: ord lowered to min(peer IRD, max_ord); ird raised to min(peer ORD,
 * max_ird). With cfg.strict_ird the adjustments fail the accept instead (-EINVAL for ORD,
 * -ENOMEM for IRD). The Reply carries the final values.
 * Initiator: IRD becomes the responder's ORD and ORD min(the responder's IRD, max_ord). The
 * Reply is refused ("insufficient IRD": Terminate LLP/MPA/6, -IW_E_MPA_IRD) when the responder's
 * ORD exceeds our IRD and max_ird (strict: exceeds our IRD), or (strict) our ORD exceeds the
 * responder's IRD.
 *
 * ---- Peer-to-peer mode and the RTR frame (RFC 6581) ----
 * In P2P mode (cfg.p2p at the initiator, revision 2 only) the responder must not send FPDUs
 * until it has received a "ready to receive" (RTR) frame from the initiator. The initiator
 * offers RTR types (cfg.rtr_types; siw: Write | Read); the responder selects exactly one of
 * those it accepts, preferring Write, then Read, then Send (siw never selects Send); when none
 * matches it selects Write as siw does, and the initiator then fails with "no matching RTR"
 * (Terminate LLP/MPA/7, -IW_E_MPA_RTR). ORD is forced to at least 1 in a P2P Request (siw).
 * The RTR frame is the first FPDU the initiator sends, built by this machine (wire layer) with
 * the negotiated CRC and queued right after the Request:
 *   WRITE  zero-length RDMA Write: tagged, L = 1, STag 1, TO 0 (siw_qp_mpa_rts).
 *   READ   zero-length RDMA Read Request: QN 1, MSN 1, sink STag 0 / TO 0, size 0, source
 *          STag 1 / TO 0. The responder answers with a zero-length Read Response (STag 0,
 *          TO 0, L = 1), which this machine builds and queues after the Reply.
 *   SEND   zero-length Send: QN 0, MSN 1, MO 0, L = 1 (IRD-word bit 0x4000 of the RFC 6581
 *          block; siw does not support it; a real peer consumes a receive for it).
 * The responder's machine consumes the RTR FPDU itself (checking its CRC when on) and only then
 * becomes ESTABLISHED; any other first FPDU fails it (Terminate LLP/MPA/7, -IW_E_MPA_RTR); a
 * Terminate from the peer fails it with -ECONNABORTED (the code is in iw_conn_info.peer_term).
 * What the QP engine must do about it (iw_conn_info says which case applies):
 *   - MSNs: the handshake used MSN 1 on a queue for READ (QN 1) and SEND (QN 0) RTRs.
 *     tx_msn_used[qn] / rx_msn_used[qn] count them: the QP's first MSN on that queue in that
 *     direction is 1 + used (initiator sends, responder receives).
 *   - orq_rtr (initiator, READ): the responder will send one zero-length Read Response for the
 *     RTR, normally as the first FPDU of its stream. The QP must put one silent entry
 *     {sink STag 0, sink TO 0, size 0} at the head of its ORQ before receiving, which that
 *     Read Response completes without a work completion. It occupies one ORD slot until then
 *     (siw does the same: siw_qp_mpa_rts puts the RTR Read into the ORQ).
 *   - Nothing else: the responder's machine answered the Read itself (no IRQ entry, no STag
 *     check) and absorbed Write/Send RTRs (no receive consumed, no completion).
 * Without P2P (siw's default) there is no RTR: the initiator may send FPDUs as soon as the
 * Reply is processed and the Request flushed, and (as siw, unlike RFC 5044's "the responder
 * waits for the first FPDU") the responder as soon as its Reply is queued.
 *
 * ---- Timeouts ----
 * The responder waits cfg.timeout_ns (default 5 s, siw MPAREP_TIMEOUT) for the whole Request
 * from iw_conn_init, and again for the RTR from iw_conn_accept; the initiator waits (default
 * 10 s, siw MPAREQ_TIMEOUT) for the whole Reply from iw_conn_init. The limit is for the whole
 * frame, so a peer that is silent or stops in the middle of a frame (or dribbles bytes) fails
 * with -ETIMEDOUT at the deadline. REQ_RCVD has no timer: it waits for the application.
 *
 * ---- Errors ----
 * Functions return 0 (or a count) or a negative code: a negative errno or -IW_E_* (an enum
 * iw_err value from the wire layer naming a wire malformation); iw_conn_err_name names both.
 * A connection that ends without being established records its reason in iw_conn_error():
 *   REJECTED: -ECONNREFUSED (the peer, or our application, rejected), or the reason of a
 *             protocol reject we sent (table above);
 *   FAILED:   -ETIMEDOUT, -IW_E_MPA_KEY (garbage), -IW_E_MPA_REV, -IW_E_MPA_PD_LEN,
 *             -IW_E_MPA_MARKERS (Reply wants markers), -IW_E_MPA_V2 (enhanced Request answered
 *             otherwise, fallback off), -IW_E_MPA_IRD, -IW_E_MPA_RTR, -IW_E_CRC and other FPDU
 *             errors (bad RTR frame), -ENOPROTOOPT (CRC policy), -EPROTO (extra bytes),
 *             -ECONNABORTED (Terminate received), or the transport error passed to
 *             iw_conn_llp_error (-ECONNRESET, -ESHUTDOWN, ...).
 * On failures found in a Reply siw answers with a Terminate, and so does this machine: invalid
 * Reply key (LLP/MPA/4), insufficient IRD (6), no matching RTR (7); a responder failing on a bad
 * RTR frame sends the Terminate iw_err_term gives.
 *
 * ---- Ownership and threads ----
 * struct iw_conn is plain data owned by the caller (e.g. embedded in the QP); no pointers, so
 * it may be copied. It borrows nothing: private data is copied at init/accept/reject; the
 * pointers iw_conn_tx_peek and iw_conn_info hand out point into the struct and stay valid until
 * the next call that changes it. One thread at a time per iw_conn. */
#ifndef SOFTRDMA_ENGINE_IW_CONN_H
#define SOFTRDMA_ENGINE_IW_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/iwarp/iwarp.h"

#define IW_CONN_NS_PER_S	    1000000000ull
#define IW_CONN_REQ_TIMEOUT_NS	    (5 * IW_CONN_NS_PER_S)  /* responder: siw MPAREP_TIMEOUT */
#define IW_CONN_REP_TIMEOUT_NS	    (10 * IW_CONN_NS_PER_S) /* initiator: siw MPAREQ_TIMEOUT */
#define IW_CONN_IRD_ORD_DEFAULT_MAX 128 /* siw SIW_MAX_IRD_QP / SIW_MAX_ORD_QP */
#define IW_CONN_NO_DEADLINE	    UINT64_MAX
/* ULP private data limits: PD_Length <= 512 (RFC 5044 7.1) includes the 4-byte IRD/ORD block
 * of a revision 2 frame. siw accepts at most 256 (IW_MPA_PD_MAX_SIW) in total. */
#define IW_CONN_PD_MAX_V1 IW_MPA_PD_MAX
#define IW_CONN_PD_MAX_V2 (IW_MPA_PD_MAX - IW_MPA_V2_LEN)

enum iw_conn_role { IW_CONN_INITIATOR = 1, IW_CONN_RESPONDER = 2 };

/* CRC policy; see "CRC" above. */
enum iw_conn_crc {
	IW_CONN_CRC_PEER = 0,
	IW_CONN_CRC_REQUIRED = 1,
	IW_CONN_CRC_REQUIRED_STRICT = 2,
	IW_CONN_CRC_OFF_STRICT = 3,
};

/* RTR frame types (RFC 6581), also used as a bit set for offers. */
enum iw_conn_rtr {
	IW_CONN_RTR_NONE = 0,
	IW_CONN_RTR_WRITE = 1, /* ORD-word bit 0x8000 */
	IW_CONN_RTR_READ = 2,  /* ORD-word bit 0x4000 */
	IW_CONN_RTR_SEND = 4,  /* IRD-word bit 0x4000 */
	IW_CONN_RTR_ALL = 7,
};

/* The states: X(name, description). */
#define IW_CONN_STATES(X)                                                                          \
	X(AWAIT_REQ, "responder: waiting for the MPA Request")                                     \
	X(REQ_RCVD, "responder: Request received, waiting for accept or reject")                   \
	X(AWAIT_REP, "initiator: Request queued, waiting for the MPA Reply")                       \
	X(AWAIT_RTR, "responder: Reply queued, waiting for the P2P RTR frame")                     \
	X(ESTABLISHED, "handshake done: FPDU mode")                                                \
	X(REJECTED, "a Reject was sent or received")                                               \
	X(FAILED, "the handshake failed")

/* clang-format off */
enum iw_conn_state {
#define IW_CONN_X_ENUM(name, desc) IW_CONN_##name,
	IW_CONN_STATES(IW_CONN_X_ENUM)
#undef IW_CONN_X_ENUM
	IW_CONN_NSTATES
};
/* clang-format on */

struct iw_conn_cfg {
	uint8_t role; /* enum iw_conn_role */
	/* Initiator: the revision to send, 2 (0 means 2) or 1. Responder: the highest revision
	 * spoken, 2 (0 means 2) or 1. */
	uint8_t rev;
	/* Initiator, revision 2: fail (-IW_E_MPA_V2, as siw) on a revision 1 Reply instead of
	 * falling back to revision 1. */
	bool no_rev1_fallback;
	uint8_t crc; /* enum iw_conn_crc */
	/* Initiator: the IRD and ORD to announce (RFC 6581 block). Responder: unused
	 * (iw_conn_accept takes them). Each at most max_ird / max_ord. */
	uint16_t ird, ord;
	/* The device's limits (the QP's IRQ / ORQ capacity) for negotiation; 0 means 128. At
	 * most 0x3fff. */
	uint16_t max_ird, max_ord;
	bool strict_ird; /* refuse instead of adjusting IRD/ORD (siw relaxed_ird_negotiation = 0) */
	bool p2p;	 /* initiator: request peer-to-peer mode with an RTR frame (revision 2) */
	/* Initiator: the RTR types offered with p2p. Responder: those it accepts. Bit set of enum
	 * iw_conn_rtr; 0 means WRITE | READ (siw rtr_type). */
	uint8_t rtr_types;
	/* Initiator: ULP private data of the Request, copied by iw_conn_init; at most
	 * IW_CONN_PD_MAX_V2 (revision 2) or IW_CONN_PD_MAX_V1 (revision 1) bytes. */
	const uint8_t *pd;
	uint16_t pd_len;
	/* How long to wait for each frame the peer owes us, ns; 0: the defaults above. */
	uint64_t timeout_ns;
};

/* What the handshake has established (or learnt so far). */
struct iw_conn_info {
	uint8_t state; /* enum iw_conn_state */
	int err;       /* iw_conn_error() */
	uint8_t role;
	uint8_t rev;	   /* negotiated revision: 1 or 2 (0 before it is known) */
	bool enhanced;	   /* both sides exchanged the RFC 6581 IRD/ORD block */
	bool crc;	   /* CRC32c in use on the FPDU stream (the Reply's C) */
	bool peer_crc;	   /* the peer's frame had C set (responder: the Request asked for CRC) */
	bool p2p;	   /* peer-to-peer mode negotiated */
	uint8_t rtr;	   /* enum iw_conn_rtr: the RTR frame of this connection */
	uint8_t rtr_offer; /* responder: RTR types the Request offered (bit set) */
	/* Local IRD / ORD to use on the QP: final after ESTABLISHED (see "IRD/ORD"); before
	 * that, at the responder in REQ_RCVD, what the Request asks for (IRD = min(peer ORD,
	 * max_ird), ORD = min(peer IRD, max_ord)). */
	uint16_t ird, ord;
	/* The peer's announced IRD / ORD, valid iff peer_ird_ord. */
	bool peer_ird_ord;
	uint16_t peer_ird, peer_ord;
	/* The peer's ULP private data (after the IRD/ORD block): the Request's at the responder,
	 * the Reply's (or the Reject's) at the initiator. Points into the iw_conn. */
	const uint8_t *peer_pd;
	uint16_t peer_pd_len;
	/* Stream accounting: bytes of the peer's stream the handshake consumed (the FPDU stream
	 * starts right after), and bytes this side queued for sending (the QP's FPDUs start
	 * after them). */
	uint64_t rx_consumed;
	uint64_t tx_queued;
	/* MSNs used by the RTR frame, per queue (enum iw_qn); see "Peer-to-peer mode". */
	uint8_t tx_msn_used[IW_QN__COUNT];
	uint8_t rx_msn_used[IW_QN__COUNT];
	bool orq_rtr; /* initiator: preload the ORQ with the RTR Read (see above) */
	/* A Terminate received instead of the RTR frame (-ECONNABORTED). */
	bool peer_term_valid;
	struct iw_term_code peer_term;
};

/* One connection's handshake. Plain data, owned by the caller; fields are private. */
struct iw_conn {
	uint8_t state;
	uint8_t role;
	uint8_t crc_policy;
	uint8_t max_rev;
	uint8_t rtr_types;
	bool fallback_ok;
	bool strict_ird;
	int err;
	uint64_t timeout_ns;
	uint64_t deadline;
	uint16_t max_ird, max_ord;
	/* initiator: what the Request said; responder: the Request as it is answered */
	struct iw_mpa req; /* pd is NULL: the private data lives in rx[] or was sent */
	uint16_t cep_ird;  /* responder: IRD / ORD the Request asks for (capped) */
	uint16_t cep_ord;
	uint8_t rtr_choice;   /* responder: the RTR type the Reply selects */
	uint16_t peer_pd_off; /* offset of the peer's private data in rx[] */
	struct iw_conn_info info;
	/* inbound: the MPA frame, then (responder, P2P) the RTR FPDU */
	uint16_t rx_have;
	uint8_t rx[IW_MPA_FRAME_MAX];
	uint8_t rtr_have;
	uint8_t rtr[IW_FPDU_LEN_SIZE + IW_TERM_ULPDU_MAX + 3 + IW_FPDU_CRC_SIZE];
	/* outbound: bytes [tx_head, tx_head + tx_len) of tx[] */
	uint16_t tx_head, tx_len;
	uint8_t tx[IW_MPA_FRAME_MAX + 2 * IW_FPDU_HDR_MAX];
};

/* Starts a handshake at time `now` (ns, any monotonic clock; the same clock for every call):
 * an initiator queues its Request, a responder starts waiting for one. Checks everything first
 * and touches *c only on success.
 * Returns 0, -EINVAL (NULL arguments, unknown role/policy/revision, IRD/ORD above the maxima,
 * max above 0x3fff, RTR types outside the set, p2p with revision 1, pd NULL with pd_len > 0) or
 * -EMSGSIZE (private data above the limit for the revision). */
int iw_conn_init(struct iw_conn *c, const struct iw_conn_cfg *cfg, uint64_t now);

/* Consumes bytes the peer sent (buf[0..len), the caller's; not kept). *used gets the number of
 * handshake bytes consumed: it stops exactly at the end of the handshake, and the bytes from
 * buf + *used on belong to the QP's FPDU stream when iw_conn_rx_done() is true (otherwise they
 * were a protocol violation and the call failed). Works with any split of the stream.
 * Returns 0 (more bytes awaited, or ESTABLISHED, or REQ_RCVD: see iw_conn_state), or a negative
 * code when the handshake ended without a connection in this or an earlier call (REJECTED or
 * FAILED: the same value as iw_conn_error; an earlier ending consumes nothing). A deadline that
 * has passed by `now` fails the connection after the bytes are processed, if the frame is still
 * incomplete. -EINVAL for NULL c/used or NULL buf with len > 0 (nothing changes). */
int iw_conn_input(struct iw_conn *c, const uint8_t *buf, size_t len, uint64_t now, size_t *used);

/* The bytes waiting to be sent: *data (NULL when none) points into c; returns their count. */
size_t iw_conn_tx_peek(const struct iw_conn *c, const uint8_t **data);

/* Marks the first n bytes shown by iw_conn_tx_peek as sent (n is clamped to what is pending). */
void iw_conn_tx_advance(struct iw_conn *c, size_t n);

/* Responder in REQ_RCVD: accepts, queuing the Reply with the local ird/ord (adjusted, see
 * "IRD/ORD") and the ULP private data pd[0..pd_len) (copied). Moves to ESTABLISHED, or to
 * AWAIT_RTR (P2P) with a deadline of now + timeout.
 * Returns 0; -EINVAL (not a responder in REQ_RCVD, NULL pd with pd_len > 0, ird/ord above the
 * maxima, or strict ORD negotiation failed), -ENOMEM (strict IRD negotiation failed), -EMSGSIZE
 * (private data too long for the revision). On error nothing changes: the caller may reject. */
int iw_conn_accept(struct iw_conn *c, uint16_t ird, uint16_t ord, const uint8_t *pd,
		   uint16_t pd_len, uint64_t now);

/* Responder in REQ_RCVD: rejects (RFC 5044 7.1 R flag), queuing a Reject with the ULP's private
 * data (copied). Moves to REJECTED with error -ECONNREFUSED. Returns 0, -EINVAL (wrong state,
 * NULL pd with pd_len > 0) or -EMSGSIZE (nothing changes on error). */
int iw_conn_reject(struct iw_conn *c, const uint8_t *pd, uint16_t pd_len);

/* Runs the timer: past the deadline, a handshake still waiting for the peer fails with
 * -ETIMEDOUT. Returns 0, or iw_conn_error() once the handshake ended without a connection. */
int iw_conn_tick(struct iw_conn *c, uint64_t now);

/* The time (same clock as `now`) at which iw_conn_tick must be called next, or
 * IW_CONN_NO_DEADLINE when no timer runs (REQ_RCVD and the end states). */
uint64_t iw_conn_deadline(const struct iw_conn *c);

/* The transport failed or the peer closed before the handshake ended: err (negative: e.g.
 * io_tcp_recv's -ECONNRESET or -ESHUTDOWN; 0 or positive is taken as -ECONNRESET) becomes the
 * error of a FAILED connection. No effect once ESTABLISHED, REJECTED or FAILED (after
 * ESTABLISHED transport errors are the QP's business). */
void iw_conn_llp_error(struct iw_conn *c, int err);

enum iw_conn_state iw_conn_state(const struct iw_conn *c);

/* 0, or the reason the handshake ended without a connection (see "Errors"). */
int iw_conn_error(const struct iw_conn *c);

/* True once every inbound handshake byte has been consumed (ESTABLISHED): what follows is the
 * QP's FPDU stream. */
bool iw_conn_rx_done(const struct iw_conn *c);

/* True once ESTABLISHED and every handshake byte has been sent: the QP may send FPDUs. */
bool iw_conn_tx_ready(const struct iw_conn *c);

/* Fills *out (the pointers in it point into c). */
void iw_conn_info(const struct iw_conn *c, struct iw_conn_info *out);

/* "AWAIT_REQ", ... or "?" out of range. Static string. */
const char *iw_conn_state_name(enum iw_conn_state s);

/* Name of a code iw_conn returns: iw_err names ("MPA_KEY", ...) for -IW_E_* and errno names
 * ("ETIMEDOUT", ...) otherwise, "OK" for 0. Static string. */
const char *iw_conn_err_name(int err);

#endif
