/* Selective repeat (sr.h): the responder's kept requests, the requester's scoreboard and the
 * round-trip estimate behind the RTO. */
#include "engine/sr.h"

#include <stdlib.h>

#include "engine/eng_int.h"

/* One kept request: the decoded packet, its payload copied to `data`. */
struct sr_slot {
	bool used;
	uint32_t psn;
	struct roce_pkt pkt;
	uint8_t *data;
};

#define AGAIN 0x80000000u /* beside a 24-bit PSN in again[] */

struct eng_sr {
	/* Responder: ENG_SR_WINDOW slots by PSN modulo the window, and their payload room
	 * (cap bytes each), allocated at the first request kept. */
	struct sr_slot *slot;
	uint8_t *room;
	uint32_t cap;
	uint32_t held;

	/* Requester: the newest SACK's cumulative PSN and bitmap; sack_high is one past the
	 * highest PSN it says arrived (the scoreboard is empty when sack_on is false). */
	bool sack_on;
	uint32_t sack_base;
	uint32_t sack_high;
	uint8_t sack[ENG_SR_SACK_BYTES];
	/* Holes before rtx were sent again in this episode; a timeout starts over. A hole sent
	 * again that is still open when requests sent after it arrived was lost again (RACK,
	 * RFC 8985, by send time): `again` marks it to go once more without waiting for the
	 * RTO. sent_at: when each PSN of the window (modulo ENG_SR_WINDOW) last left. */
	uint32_t rtx;
	uint32_t again[ENG_SR_WINDOW]; /* AGAIN | psn at psn modulo the window */
	/* again[] may hold a mark: eng_sr_hole, asked several times per packet, scans it only
	 * then (set by lost_again, cleared by a scan that finds none). */
	bool again_any;
	uint64_t sent_at[ENG_SR_WINDOW];
	bool rtx_timeout; /* the last expiry resent holes: the next one goes back N */
	/* An expiry with nothing on the scoreboard sends the newest request again as a probe
	 * (a tail loss leaves nothing behind it to show the gap): it fills the hole, or the
	 * peer keeps it and answers with a SACK that shows the others. */
	bool probe_on;
	uint32_t probe_psn, probe_idx;

	/* READ responses placed ahead of a lost one (eng_sr_read_ahead): the READ's WQE, a bit
	 * per PSN placed (psn modulo the window; within the window after the first missing
	 * one), whether the missing run before them is to be asked for again (rd_ask), and the
	 * PSNs last asked for ([rd_asked, rd_asked_end): each missing PSN once; the timer does the
	 * rest). */
	bool rd_on, rd_ask, rd_asked_on;
	uint32_t rd_idx, rd_asked, rd_asked_end;
	uint8_t rd_bits[ENG_SR_SACK_BYTES];

	/* Round trip: one timed request at a time (Karn: never a resent one). */
	bool timing;
	uint32_t t_psn;
	uint64_t t_sent;
	uint64_t srtt, rttvar; /* ns; srtt 0: no sample yet */
	uint32_t backoff;      /* expiries in a row */
	/* The retry budget: since quiet_since (the timer armed, or progress) `counted` expiries
	 * were charged to retry_cnt, one per IB timeout elapsed (eng_sr_expiry_counts). */
	uint64_t quiet_since;
	uint32_t counted;
};

int eng_sr_create(struct eng_sr **out)
{
	struct eng_sr *sr = calloc(1, sizeof(*sr));

	if (!sr)
		return -ENOMEM;
	*out = sr;
	return 0;
}

void eng_sr_destroy(struct eng_sr *sr)
{
	if (!sr)
		return;
	free(sr->slot);
	free(sr->room);
	free(sr);
}

void eng_sr_resp_reset(struct eng_sr *sr)
{
	if (sr->slot)
		for (uint32_t i = 0; i < ENG_SR_WINDOW; i++)
			sr->slot[i].used = false;
	sr->held = 0;
}

void eng_sr_req_reset(struct eng_sr *sr)
{
	sr->rd_on = sr->rd_ask = sr->rd_asked_on = false;
	memset(sr->again, 0, sizeof(sr->again));
	sr->again_any = false;
	memset(sr->sent_at, 0, sizeof(sr->sent_at));
	sr->sack_on = false;
	sr->rtx_timeout = false;
	sr->probe_on = false;
	sr->timing = false;
	sr->srtt = sr->rttvar = 0;
	sr->backoff = 0;
}

/* ---- responder ---- */

static int room_fit(struct eng_sr *sr, uint32_t pmtu)
{
	if (sr->slot && sr->cap >= pmtu)
		return 0;
	if (sr->held)
		return -EBUSY; /* the MTU grew while requests are kept: not now */
	struct sr_slot *slot = calloc(ENG_SR_WINDOW, sizeof(*slot));
	uint8_t *room = malloc((size_t)ENG_SR_WINDOW * pmtu);
	if (!slot || !room) {
		free(slot);
		free(room);
		return -ENOMEM;
	}
	free(sr->slot);
	free(sr->room);
	sr->slot = slot;
	sr->room = room;
	sr->cap = pmtu;
	for (uint32_t i = 0; i < ENG_SR_WINDOW; i++)
		slot[i].data = room + (size_t)i * pmtu;
	return 0;
}

bool eng_sr_hold(struct eng_qp *qp, const struct roce_pkt *pkt, uint32_t ahead)
{
	struct eng_sr *sr = qp->sr;

	if (ahead == 0 || ahead >= ENG_SR_WINDOW || pkt->payload_len > qp->attr.pmtu ||
	    room_fit(sr, qp->attr.pmtu) < 0)
		return false;
	struct sr_slot *s = &sr->slot[pkt->bth.psn % ENG_SR_WINDOW];
	if (s->used && s->psn == pkt->bth.psn)
		return true; /* a copy of one kept: the first stays */
	if (!s->used)
		sr->held++;
	s->used = true;
	s->psn = pkt->bth.psn;
	s->pkt = *pkt;
	if (pkt->payload_len)
		memcpy(s->data, pkt->payload, pkt->payload_len);
	s->pkt.payload = s->data;
	return true;
}

const struct roce_pkt *eng_sr_held(struct eng_qp *qp, uint32_t psn)
{
	struct eng_sr *sr = qp->sr;

	if (!sr->held)
		return NULL;
	struct sr_slot *s = &sr->slot[psn % ENG_SR_WINDOW];
	return s->used && s->psn == psn ? &s->pkt : NULL;
}

void eng_sr_release_below(struct eng_qp *qp, uint32_t psn)
{
	struct eng_sr *sr = qp->sr;

	for (uint32_t i = 0; sr->held && i < ENG_SR_WINDOW; i++) {
		struct sr_slot *s = &sr->slot[i];
		if (s->used && psn_cmp(s->psn, psn) < 0) {
			s->used = false;
			sr->held--;
		}
	}
}

bool eng_sr_holding(const struct eng_qp *qp)
{
	return qp->sr->held != 0;
}

void eng_sr_sack_bits(const struct eng_qp *qp, uint32_t base, uint8_t bits[ENG_SR_SACK_BYTES])
{
	const struct eng_sr *sr = qp->sr;

	memset(bits, 0, ENG_SR_SACK_BYTES);
	for (uint32_t i = 0; i < ENG_SR_WINDOW; i++) {
		uint32_t psn = psn_add(base, i);
		bool got = psn_cmp(psn, qp->resp.psn) < 0;
		if (!got && sr->held) {
			const struct sr_slot *s = &sr->slot[psn % ENG_SR_WINDOW];
			got = s->used && s->psn == psn;
		}
		if (got)
			bits[i / 8] |= (uint8_t)(1u << (i % 8));
	}
}

/* ---- requester ---- */

static bool sacked(const struct eng_sr *sr, uint32_t psn)
{
	int32_t d = psn_cmp(psn, sr->sack_base);

	if (d < 0)
		return true; /* below the cumulative PSN: arrived */
	if (d >= ENG_SR_WINDOW)
		return false;
	return sr->sack[d / 8] & (1u << (d % 8));
}

/* The holes already sent again (below rtx) that requests sent later than them overtook
 * (RACK): marked in `again`. A quarter of the smoothed RTT is left for reordering. */
static void lost_again(struct eng_qp *qp)
{
	struct eng_sr *sr = qp->sr;
	uint64_t newest = 0;

	for (uint32_t p = qp->comp.psn; psn_cmp(p, sr->sack_high) < 0; p = psn_add(p, 1))
		if (sacked(sr, p) && sr->sent_at[p % ENG_SR_WINDOW] > newest)
			newest = sr->sent_at[p % ENG_SR_WINDOW];
	uint64_t reo = sr->srtt / 4;
	for (uint32_t p = qp->comp.psn; psn_cmp(p, sr->rtx) < 0 && psn_cmp(p, sr->sack_high) < 0;
	     p = psn_add(p, 1)) {
		uint64_t at = sr->sent_at[p % ENG_SR_WINDOW];
		if (!sacked(sr, p) && at && at + reo < newest) {
			sr->again[p % ENG_SR_WINDOW] = AGAIN | p;
			sr->again_any = true;
		}
	}
}

void eng_sr_sacked(struct eng_qp *qp, uint32_t base, const uint8_t bits[ENG_SR_SACK_BYTES])
{
	struct eng_sr *sr = qp->sr;
	int32_t d = sr->sack_on ? psn_cmp(base, sr->sack_base) : 1;
	int top = -1;

	if (d < 0)
		return; /* older than the one we have */
	for (int i = 0; i < ENG_SR_SACK_BYTES; i++)
		sr->sack[i] = d == 0 ? (uint8_t)(sr->sack[i] | bits[i]) : bits[i];
	sr->sack_base = base;
	for (int i = ENG_SR_WINDOW - 1; i >= 0; i--)
		if (sr->sack[i / 8] & (1u << (i % 8))) {
			top = i;
			break;
		}
	/* Only PSNs this side sent can be holes. */
	sr->sack_high = psn_add(base, (uint32_t)(top + 1));
	if (psn_cmp(sr->sack_high, qp->req.psn_hi) > 0)
		sr->sack_high = qp->req.psn_hi;
	sr->sack_on = top >= 0;
	if (sr->sack_on && psn_cmp(sr->rtx, qp->comp.psn) < 0)
		sr->rtx = qp->comp.psn;
	if (sr->sack_on)
		lost_again(qp);
}

/* The started WQE that sends a request packet with PSN psn: its index. */
static bool request_of(struct eng_qp *qp, uint32_t psn, uint32_t *idx)
{
	for (uint32_t i = qp->base.sq_head; i != qp->base.sq_tail; i++) {
		const struct eng_swqe *w = eng_swqe_at(qp, i);

		if (eng_ops[w->op].local && w->state == ENG_SWQE_DONE)
			continue;
		if (w->state != ENG_SWQE_ACTIVE || psn_cmp(psn, w->first_psn) < 0)
			return false;
		uint32_t last = eng_ops[w->op].rd_atomic ? w->first_psn : w->last_psn;
		if (psn_cmp(psn, last) <= 0) {
			*idx = i;
			return true;
		}
	}
	return false;
}

/* A hole sent again and lost again (lost_again), still unanswered and not sacked. */
static bool again_hole(struct eng_qp *qp, uint32_t *idx, uint32_t *psn)
{
	struct eng_sr *sr = qp->sr;

	for (uint32_t p = qp->comp.psn; psn_cmp(p, sr->rtx) < 0; p = psn_add(p, 1)) {
		uint32_t *a = &sr->again[p % ENG_SR_WINDOW];
		if (*a != (AGAIN | p))
			continue;
		if (!sacked(sr, p) && request_of(qp, p, idx)) {
			*psn = p;
			return true;
		}
		*a = 0;
	}
	sr->again_any = false;
	return false;
}

/* ---- READ responses ---- */

static bool rd_bit(const struct eng_sr *sr, uint32_t psn)
{
	uint32_t b = psn % ENG_SR_WINDOW;
	return sr->rd_bits[b / 8] >> (b % 8) & 1;
}

static void rd_set(struct eng_sr *sr, uint32_t psn, bool on)
{
	uint32_t b = psn % ENG_SR_WINDOW;
	if (on)
		sr->rd_bits[b / 8] |= (uint8_t)(1u << (b % 8));
	else
		sr->rd_bits[b / 8] &= (uint8_t) ~(1u << (b % 8));
}

/* Whether READ idx is the one being recovered. */
static bool rd_open(const struct eng_sr *sr, uint32_t idx)
{
	return sr->rd_on && sr->rd_idx == idx;
}

/* The READ being recovered and its first missing response's PSN, if it is still outstanding
 * (its index between sq_head and sq_tail, free-running counters) and partly placed. */
static bool read_hole(struct eng_qp *qp, uint32_t *idx, uint32_t *psn)
{
	struct eng_sr *sr = qp->sr;
	if (sr->rd_idx - qp->base.sq_head < qp->base.sq_tail - qp->base.sq_head) {
		const struct eng_swqe *w = eng_swqe_at(qp, sr->rd_idx);
		if (w->op == ENG_OP_READ && w->state == ENG_SWQE_ACTIVE) {
			*idx = sr->rd_idx;
			*psn = psn_add(w->first_psn, w->read_done / qp->attr.pmtu);
			return true;
		}
	}
	sr->rd_on = sr->rd_ask = false;
	return false;
}

/* Whether the missing response at psn was asked for again already (and is on its way). */
static bool asked(const struct eng_sr *sr, uint32_t psn)
{
	return sr->rd_asked_on && psn_cmp(psn, sr->rd_asked) >= 0 &&
	       psn_cmp(psn, sr->rd_asked_end) < 0;
}

enum eng_sr_rd eng_sr_read_ahead(struct eng_qp *qp, uint32_t idx, uint32_t want, uint32_t psn)
{
	struct eng_sr *sr = qp->sr;
	uint32_t ahead = (uint32_t)psn_cmp(psn, want);

	if (ahead >= ENG_SR_WINDOW)
		return ENG_SR_RD_FAR;
	if (!rd_open(sr, idx)) {
		memset(sr->rd_bits, 0, sizeof(sr->rd_bits));
		sr->rd_on = true;
		sr->rd_ask = sr->rd_asked_on = false;
		sr->rd_idx = idx;
	}
	if (rd_bit(sr, psn))
		return ENG_SR_RD_DROP;
	rd_set(sr, psn, true);
	/* The run missing before it: asked for again once (a response after it shows it lost:
	 * responses come in PSN order). */
	if (!asked(sr, want))
		sr->rd_ask = true;
	return ENG_SR_RD_KEPT;
}

uint32_t eng_sr_read_span(struct eng_qp *qp, uint32_t idx, uint32_t psn)
{
	struct eng_sr *sr = qp->sr;
	const struct eng_swqe *w = eng_swqe_at(qp, idx);
	uint32_t n = 1;

	if (!rd_open(sr, idx))
		return 0;
	while (n < ENG_SR_WINDOW && psn_cmp(psn_add(psn, n), w->last_psn) <= 0 &&
	       !rd_bit(sr, psn_add(psn, n)))
		n++;
	if (n == ENG_SR_WINDOW || psn_cmp(psn_add(psn, n), w->last_psn) > 0)
		return 0; /* nothing placed after it: the rest */
	return n;
}

void eng_sr_read_asked(struct eng_qp *qp, uint32_t psn, uint32_t npsn)
{
	struct eng_sr *sr = qp->sr;
	sr->rd_ask = false;
	sr->rd_asked_on = true;
	sr->rd_asked = psn;
	sr->rd_asked_end = psn_add(psn, npsn);
	sr->timing = false;
	sr->probe_on = false; /* a probe of the READ's request went as this */
}

uint32_t eng_sr_read_filled(struct eng_qp *qp, uint32_t idx, uint32_t psn, uint32_t last_psn)
{
	struct eng_sr *sr = qp->sr;
	uint32_t n = 0, p = psn_add(psn, 1);

	if (!rd_open(sr, idx))
		return 0;
	while (psn_cmp(p, last_psn) <= 0 && rd_bit(sr, p)) {
		rd_set(sr, p, false);
		n++;
		p = psn_add(p, 1);
	}
	/* p is missing now: lost if a response after it was placed (ask for it), else on its
	 * way (or the READ is whole). */
	for (uint32_t k = 1; k < ENG_SR_WINDOW && psn_cmp(psn_add(p, k), last_psn) <= 0; k++) {
		if (rd_bit(sr, psn_add(p, k))) {
			if (!asked(sr, p))
				sr->rd_ask = true;
			return n;
		}
	}
	sr->rd_on = sr->rd_ask = false;
	return n;
}

bool eng_sr_read_open(const struct eng_qp *qp, uint32_t idx)
{
	return qp->sr && rd_open(qp->sr, idx);
}

bool eng_sr_hole(struct eng_qp *qp, uint32_t *idx, uint32_t *psn)
{
	struct eng_sr *sr = qp->sr;

	if (sr->probe_on) {
		*idx = sr->probe_idx;
		*psn = sr->probe_psn;
		return true;
	}
	if (sr->rd_ask && read_hole(qp, idx, psn))
		return true;
	if (!sr->sack_on)
		return false;
	if (sr->again_any && psn_cmp(qp->req.psn, sr->rtx) >= 0 && again_hole(qp, idx, psn))
		return true;
	uint32_t from = psn_cmp(sr->rtx, qp->comp.psn) < 0 ? qp->comp.psn : sr->rtx;
	/* Below req.psn only: a go-back-N pass resends the rest itself. */
	uint32_t to = psn_cmp(qp->req.psn, sr->sack_high) < 0 ? qp->req.psn : sr->sack_high;
	if (psn_cmp(from, to) >= 0)
		return false;
	for (uint32_t i = qp->base.sq_head; i != qp->base.sq_tail; i++) {
		const struct eng_swqe *w = eng_swqe_at(qp, i);

		if (eng_ops[w->op].local && w->state == ENG_SWQE_DONE)
			continue;
		if (w->state != ENG_SWQE_ACTIVE || psn_cmp(w->first_psn, to) >= 0)
			break;
		if (psn_cmp(w->last_psn, from) < 0)
			continue;
		/* A READ or ATOMIC is one request packet, at its first PSN. */
		uint32_t last = eng_ops[w->op].rd_atomic ? w->first_psn : w->last_psn;
		uint32_t p = psn_cmp(w->first_psn, from) < 0 ? from : w->first_psn;
		for (; psn_cmp(p, last) <= 0 && psn_cmp(p, to) < 0; p = psn_add(p, 1)) {
			if (!sacked(sr, p)) {
				*idx = i;
				*psn = p;
				return true;
			}
		}
	}
	sr->rtx = to; /* nothing missing up to there */
	return false;
}

void eng_sr_resent(struct eng_qp *qp, uint32_t psn, uint64_t now)
{
	struct eng_sr *sr = qp->sr;

	sr->sent_at[psn % ENG_SR_WINDOW] = now;
	sr->timing = false;
	if (sr->probe_on) {
		sr->probe_on = false;
		return;
	}
	if (sr->again[psn % ENG_SR_WINDOW] == (AGAIN | psn))
		sr->again[psn % ENG_SR_WINDOW] = 0;
	if (psn_cmp(psn_add(psn, 1), sr->rtx) > 0)
		sr->rtx = psn_add(psn, 1);
}

void eng_sr_sent(struct eng_qp *qp, uint32_t psn, bool ackreq, bool fresh, uint64_t now)
{
	struct eng_sr *sr = qp->sr;

	sr->sent_at[psn % ENG_SR_WINDOW] = now;
	if (!fresh) {
		sr->timing = false;
		return;
	}
	if (sr->timing || !ackreq)
		return;
	sr->timing = true;
	sr->t_psn = psn;
	sr->t_sent = now;
}

void eng_sr_progress(struct eng_qp *qp, uint64_t now)
{
	struct eng_sr *sr = qp->sr;

	if (sr->timing && psn_cmp(qp->comp.psn, sr->t_psn) > 0) {
		/* RFC 6298 2.2 and 2.3, in ns. */
		uint64_t r = now > sr->t_sent ? now - sr->t_sent : 1;
		if (!sr->srtt) {
			sr->srtt = r;
			sr->rttvar = r / 2;
		} else {
			uint64_t dev = sr->srtt > r ? sr->srtt - r : r - sr->srtt;
			sr->rttvar = (3 * sr->rttvar + dev) / 4;
			sr->srtt = (7 * sr->srtt + r) / 8;
		}
		sr->timing = false;
	}
	sr->backoff = 0;
	sr->rtx_timeout = false;
	sr->quiet_since = now;
	sr->counted = 0;
	if (sr->sack_on && psn_cmp(qp->comp.psn, sr->sack_high) >= 0)
		sr->sack_on = false;
}

void eng_sr_rewound(struct eng_qp *qp)
{
	qp->sr->rd_on = qp->sr->rd_ask = qp->sr->rd_asked_on = false;
	memset(qp->sr->again, 0, sizeof(qp->sr->again));
	qp->sr->again_any = false;
	qp->sr->sack_on = false;
	qp->sr->probe_on = false;
	qp->sr->timing = false;
}

/* Arms the probe: the newest request packet sent, if it is still unanswered and can be
 * sent alone (not a READ partly answered: go-back-N asks for its rest). */
static bool probe(struct eng_qp *qp)
{
	struct eng_sr *sr = qp->sr;
	uint32_t last = psn_add(qp->req.psn_hi, PSN_MASK); /* psn_hi - 1 */

	if (psn_cmp(qp->req.psn, qp->req.psn_hi) != 0)
		return false; /* a go-back-N pass is under way */
	for (uint32_t i = qp->base.sq_head; i != qp->base.sq_tail; i++) {
		const struct eng_swqe *w = eng_swqe_at(qp, i);

		if (eng_ops[w->op].local && w->state == ENG_SWQE_DONE)
			continue;
		if (w->state != ENG_SWQE_ACTIVE)
			return false;
		if (psn_cmp(last, w->first_psn) < 0 || psn_cmp(last, w->last_psn) > 0)
			continue;
		uint32_t p = eng_ops[w->op].rd_atomic ? w->first_psn : last;
		if (psn_cmp(p, qp->comp.psn) < 0 || w->read_done)
			return false;
		sr->probe_on = true;
		sr->probe_idx = i;
		sr->probe_psn = p;
		sr->rtx_timeout = true;
		return true;
	}
	return false;
}

bool eng_sr_rnr_over(struct eng_qp *qp)
{
	struct eng_sr *sr = qp->sr;
	uint32_t idx;

	if (psn_cmp(qp->req.psn, qp->req.psn_hi) != 0 || !request_of(qp, qp->comp.psn, &idx))
		return false;
	sr->probe_on = true;
	sr->probe_idx = idx;
	sr->probe_psn = qp->comp.psn;
	return true;
}

bool eng_sr_timeout(struct eng_qp *qp)
{
	struct eng_sr *sr = qp->sr;
	uint32_t idx, psn;

	sr->timing = false;
	if (sr->backoff < 16)
		sr->backoff++;
	if (sr->rtx_timeout) {
		sr->rtx_timeout = false;
		return false;
	}
	if (!sr->sack_on)
		return probe(qp);
	sr->rtx = qp->comp.psn;
	if (!eng_sr_hole(qp, &idx, &psn))
		return false;
	sr->rtx_timeout = true;
	return true;
}

void eng_sr_armed(struct eng_qp *qp, uint64_t now)
{
	qp->sr->quiet_since = now;
	qp->sr->counted = 0;
}

bool eng_sr_expiry_counts(struct eng_qp *qp, uint64_t now)
{
	struct eng_sr *sr = qp->sr;
	uint64_t ib = roce_ack_timeout_ns(qp->attr.timeout);

	if (now - sr->quiet_since < ib * (sr->counted + 1ull))
		return false;
	sr->counted++;
	return true;
}

uint64_t eng_sr_rto(const struct eng_qp *qp)
{
	const struct eng_sr *sr = qp->sr;
	uint64_t ib = roce_ack_timeout_ns(qp->attr.timeout);

	if (!ib || !sr->srtt)
		return ib;
	uint64_t var = 4 * sr->rttvar;
	uint64_t rto = sr->srtt + (var > 1000 ? var : 1000);
	if (rto < ENG_SR_RTO_MIN_NS)
		rto = ENG_SR_RTO_MIN_NS;
	for (uint32_t i = 0; i < sr->backoff && rto < ib; i++)
		rto *= 2;
	return rto < ib ? rto : ib;
}

uint64_t eng_sr_srtt(const struct eng_qp *qp)
{
	return qp->sr ? qp->sr->srtt : 0;
}
