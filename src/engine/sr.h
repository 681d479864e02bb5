/* Selective repeat: loss recovery for RC between two softrdma QPs that agreed to it
 * (eng_qp_set_sr; issue 13 step 3), after IRN (Mittal et al., "Revisiting Network Support for
 * RDMA", SIGCOMM 2018). Go-back-N stays the policy of every other QP, and of these too
 * whenever selective repeat cannot help (a READ response further ahead than the window, a
 * re-request lost, a retransmission lost twice): the two recover into each other.
 *
 * Responder: a request ahead of the expected PSN is kept (a copy, at most ENG_SR_WINDOW PSNs
 * ahead) instead of dropped, and answered with a SACK: the expected PSN as a NAK PSN
 * sequence error would carry it, and a bitmap of the PSNs from there on that arrived. When
 * the missing request arrives, the kept ones are taken in PSN order, each exactly as if it
 * had just arrived in sequence (every check of resp.c runs on it then), so placement and
 * completions stay in order.
 *
 * Requester: the SACKs build a scoreboard; the requests below the highest PSN the peer
 * holds that it does not hold (holes) are sent again, each once, before new requests. A
 * hole sent again that is still open when requests sent after it have arrived was lost
 * again (RACK, RFC 8985: by send time, a quarter RTT left for reordering) and goes once
 * more, without waiting for the timer.
 * Nothing is completed on a SACK beyond its cumulative PSN: the peer may still drop what it
 * holds (it never does but for an error, which ends the connection), so only ACKs retire.
 *
 * RNR: a request the peer had no receive WQE for is NAKed (RNR) while what follows it stays
 * kept there; after the wait only the NAKed request goes again.
 *
 * Timeout: the local ACK timer runs on an RTO from the measured round trip (RFC 6298: a
 * smoothed RTT plus four deviations, Karn's rule, doubling on every expiry without
 * progress) within [ENG_SR_RTO_MIN, IB's 4.096 us * 2^timeout], instead of IB's fixed
 * timeout. An expiry with holes on the scoreboard sends the holes again; one with an empty
 * scoreboard sends the newest request again as a probe (after a tail loss nothing follows
 * to show the gap; the probe fills it, or is kept and answered with a SACK showing the
 * rest); a second expiry in a row is a go-back-N. Expiries count against the retry count
 * once per IB timeout without progress, so a silent peer fails the QP after as long as with
 * go-back-N.
 *
 * The SACK: BTH opcode ROCE_SR_SACK (0xC0, from the manufacturer-specific range a standard
 * peer drops as unknown: it is never sent to one), PSN = the expected PSN, AETH NAK PSN
 * sequence error with the MSN, then ENG_SR_SACK_BYTES of bitmap: bit i (byte i / 8, bit
 * i % 8, least significant first) says PSN + i arrived. */
#ifndef SOFTRDMA_ENGINE_SR_H
#define SOFTRDMA_ENGINE_SR_H

#include <stdbool.h>
#include <stdint.h>

struct eng_qp;
struct roce_pkt;

/* PSNs a responder keeps ahead of the expected one: the requester never sends further
 * ahead of what it has had acknowledged (ENG_MAX_UNACKED_PSNS). */
#define ENG_SR_WINDOW	  128
#define ENG_SR_SACK_BYTES (ENG_SR_WINDOW / 8)
/* The shortest RTO. A user-space peer can be descheduled for milliseconds (two cores, a
 * busy-polling application); a shorter one resends what was only late. IB's usual timeout
 * (14: 67 ms) is the longest. */
#define ENG_SR_RTO_MIN_NS 4000000ull

struct eng_sr;

int eng_sr_create(struct eng_sr **out);
void eng_sr_destroy(struct eng_sr *sr);
/* Forget the responder's kept requests (eng_resp_reset), the requester's scoreboard and
 * round trip (eng_comp_reset). */
void eng_sr_resp_reset(struct eng_sr *sr);
void eng_sr_req_reset(struct eng_sr *sr);

/* ---- responder (resp.c) ---- */
/* Keeps a copy of a request `ahead` PSNs past the expected one (1 .. ENG_SR_WINDOW - 1).
 * false if it cannot (too far ahead, too long, no memory): drop it. */
bool eng_sr_hold(struct eng_qp *qp, const struct roce_pkt *pkt, uint32_t ahead);
/* The kept request with this PSN, or NULL. */
const struct roce_pkt *eng_sr_held(struct eng_qp *qp, uint32_t psn);
/* Lets go of what is kept below `psn` (taken, or inside a READ's PSNs). */
void eng_sr_release_below(struct eng_qp *qp, uint32_t psn);
/* True while something is kept. */
bool eng_sr_holding(const struct eng_qp *qp);
/* The SACK bitmap for cumulative PSN `base`: what is kept, and what was taken in sequence
 * since (below resp.psn). */
void eng_sr_sack_bits(const struct eng_qp *qp, uint32_t base, uint8_t bits[ENG_SR_SACK_BYTES]);

/* ---- requester and completer (req.c, comp.c) ---- */
/* A SACK for `base` with its bitmap arrived (its cumulative part already applied). */
void eng_sr_sacked(struct eng_qp *qp, uint32_t base, const uint8_t bits[ENG_SR_SACK_BYTES]);
/* The next hole to send again: its send WQE's index and PSN. false: none. */
bool eng_sr_hole(struct eng_qp *qp, uint32_t *idx, uint32_t *psn);
/* The hole at `psn` was sent again at now. */
void eng_sr_resent(struct eng_qp *qp, uint32_t psn, uint64_t now);
/* A request packet left; `fresh` if its PSN was never sent before. */
void eng_sr_sent(struct eng_qp *qp, uint32_t psn, bool ackreq, bool fresh, uint64_t now);
/* comp.psn moved forward at now. */
void eng_sr_progress(struct eng_qp *qp, uint64_t now);
/* The requester went back to comp.psn (go-back-N): the scoreboard is moot. */
void eng_sr_rewound(struct eng_qp *qp);
/* An RNR wait is over: true if only the NAKed request goes again (what followed it is kept
 * by the peer, or shows up as holes), false for a go-back-N. */
bool eng_sr_rnr_over(struct eng_qp *qp);
/* The ACK timer expired: true if the holes are sent again (selective), false for a
 * go-back-N. */
bool eng_sr_timeout(struct eng_qp *qp);
/* The ACK timer was armed at now with nothing outstanding before (not a retry). */
void eng_sr_armed(struct eng_qp *qp, uint64_t now);
/* An expiry at now is charged to retry_cnt only once per IB timeout (4.096 us * 2^timeout)
 * without progress: the RTO fires sooner, but a peer that stopped answering is given up on
 * after as long as IBA would wait. */
bool eng_sr_expiry_counts(struct eng_qp *qp, uint64_t now);
/* READ responses (comp.c, req.c): a response ahead of the one a READ expects is placed where
 * it goes and remembered, and the responses missing before it are asked for again with a
 * READ request for just them (from the first missing PSN, as a go-back-N READ retry asks
 * for all the rest: the responder replays a part of the READ it remembers); when the missing
 * one arrives the READ moves on past everything placed ahead. A response for a READ that
 * does not fit the window, or a lost re-request (the timer), ends in a go-back-N. */
enum eng_sr_rd {
	ENG_SR_RD_KEPT, /* place it; it is remembered */
	ENG_SR_RD_DROP, /* placed before (or refused): drop it */
	ENG_SR_RD_FAR,	/* beyond the window: go back N */
};
/* A response of the READ at send WQE idx, for `psn` past the expected `want`. */
enum eng_sr_rd eng_sr_read_ahead(struct eng_qp *qp, uint32_t idx, uint32_t want, uint32_t psn);
/* How many PSNs from psn the re-request of READ idx asks for (up to the first one placed
 * ahead); 0: all the rest. */
uint32_t eng_sr_read_span(struct eng_qp *qp, uint32_t idx, uint32_t psn);
/* The re-request for the npsn responses from psn went out. */
void eng_sr_read_asked(struct eng_qp *qp, uint32_t psn, uint32_t npsn);
/* The response at psn of READ idx was placed in order: how many PSNs after it were placed
 * already (the READ moves past them). */
uint32_t eng_sr_read_filled(struct eng_qp *qp, uint32_t idx, uint32_t psn, uint32_t last_psn);
/* Responses of READ idx are placed ahead (a re-request may end its reply early: LAST). */
bool eng_sr_read_open(const struct eng_qp *qp, uint32_t idx);

/* The ACK timeout to arm now, in ns (0: none, as IB's timeout 0). */
uint64_t eng_sr_rto(const struct eng_qp *qp);
/* The smoothed round trip measured so far, in ns (0: none yet). */
uint64_t eng_sr_srtt(const struct eng_qp *qp);

#endif
