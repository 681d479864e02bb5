/* The switch model: host links, egress queues, RED marking, PFC, drop-tail, random loss
 * (switch_model.h).
 *
 * Every packet the model keeps is one allocation (struct pkt), linked into exactly one FIFO:
 * its host's transmit queue (port, priority) until it has crossed the host's link, then its
 * egress queue (port, priority). Each direction of a port's wire carries one packet at a
 * time (struct wire): `cur` names the priority whose head is on it and `finish` when its last
 * bit is across. swm_output takes the wire that finishes first, arrivals before departures
 * at the same time, so a caller that comes late still sees arrivals, departures, pauses and
 * resumes in the order they happened. */
#include "tools/switch_model.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/draw.h"
#include "tools/say.h"

#define IPV4_HDR_MIN 20
#define NO_CUR	     0xFF
/* Priorities from this one up are served first (CNPs at 6, network control at 7); those
 * below share the port by deficit round robin, a quantum of bytes each per round. */
#define STRICT_PRIO 6
#define DRR_QUANTUM 9216

struct pkt {
	struct pkt *next;
	uint32_t len;
	uint8_t in, out, prio;
	uint8_t data[];
};

struct fifo {
	struct pkt *head, *tail;
	uint32_t bytes, count;
};

/* One direction of a port's wire. */
struct wire {
	uint8_t cur;	  /* priority whose head is being sent, NO_CUR when idle */
	uint64_t finish;  /* when that head is across */
	uint64_t free_at; /* when the wire last became free */
	uint64_t rem;	  /* remainder of the transmission-time division (exact rate) */
};

struct port {
	struct fifo q[SWM_PRIOS]; /* egress queues */
	uint32_t qbytes;	  /* all of them */
	struct wire out;	  /* switch -> host, at rate_bps */
	uint8_t drr;		  /* the round robin's current priority, < STRICT_PRIO */
	bool drr_fresh;		  /* it has not had its quantum of this round yet */
	uint32_t deficit[STRICT_PRIO];
	struct fifo host[SWM_PRIOS]; /* the host's transmit queues, in arrival order */
	uint32_t host_count;	     /* packets in them */
	struct wire in;		     /* host -> switch, at host_rate_bps */
	uint32_t pfc_bytes;	     /* PFC: bytes of pfc_prio from this ingress in the queues */
	bool paused;
	uint64_t paused_since;
	struct swm_port_stats st;
};

struct swm {
	struct swm_cfg cfg;
	uint64_t loss_thr; /* drop when a draw is below it; UINT64_MAX for loss 1 */
	uint64_t rng_loss, rng_mark;
	struct pkt *last; /* returned by swm_output, freed at the next call */
	struct port port[];
};

void swm_cfg_default(struct swm_cfg *cfg, unsigned ports)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ports = ports;
	cfg->buffer = 1u << 20;
	/* DCQCN (Zhu et al., SIGCOMM 2015) section 5: Kmin 5 KB, Kmax 200 KB, Pmax 1 %. */
	cfg->kmin = 5000;
	cfg->kmax = 200000;
	cfg->pmax = 0.01;
	cfg->pfc_prio = 3;
	cfg->xoff = 96 * 1024;
	cfg->xon = 64 * 1024;
	cfg->hold_max = 8192;
	cfg->seed = 1;
}

int swm_cfg_check(const struct swm_cfg *cfg, char *why, size_t len)
{
	tool_say(why, len, "ok");
	if (!cfg) {
		tool_say(why, len, "no configuration");
		return -EINVAL;
	}
	if (cfg->ports < 2 || cfg->ports > SWM_MAX_PORTS) {
		tool_say(why, len, "ports must be 2..%d, not %u", SWM_MAX_PORTS, cfg->ports);
		return -EINVAL;
	}
	if (cfg->buffer < 65535) {
		tool_say(why, len, "buffer must hold a 64 KiB packet (>= 65535 bytes), not %u",
			 cfg->buffer);
		return -EINVAL;
	}
	if (cfg->kmin > cfg->kmax || !draw_valid(cfg->pmax)) {
		tool_say(why, len, "ECN needs kmin <= kmax and pmax in 0..1");
		return -EINVAL;
	}
	if (cfg->pfc_prio >= SWM_PRIOS) {
		tool_say(why, len, "the PFC priority must be 0..7, not %u", cfg->pfc_prio);
		return -EINVAL;
	}
	if (cfg->pfc && (cfg->xon == 0 || cfg->xon >= cfg->xoff)) {
		tool_say(why, len, "PFC needs 0 < xon < xoff (bytes), not xon %u xoff %u", cfg->xon,
			 cfg->xoff);
		return -EINVAL;
	}
	if (cfg->hold_max == 0) {
		tool_say(why, len, "hold_max must be at least 1 packet");
		return -EINVAL;
	}
	if (!draw_valid(cfg->loss)) {
		tool_say(why, len, "loss must be 0..1");
		return -EINVAL;
	}
	return 0;
}

int swm_create(const struct swm_cfg *cfg, struct swm **out)
{
	if (swm_cfg_check(cfg, NULL, 0) != 0 || !out)
		return -EINVAL;
	struct swm *s = calloc(1, sizeof(*s) + cfg->ports * sizeof(struct port));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->loss_thr = draw_threshold(cfg->loss);
	s->rng_loss = cfg->seed;
	s->rng_mark = cfg->seed ^ 0x5851f42d4c957f2dull;
	for (unsigned p = 0; p < cfg->ports; p++) {
		s->port[p].out.cur = s->port[p].in.cur = NO_CUR;
		s->port[p].drr_fresh = true;
	}
	*out = s;
	return 0;
}

static void fifo_free(struct fifo *f)
{
	while (f->head) {
		struct pkt *p = f->head;
		f->head = p->next;
		free(p);
	}
	f->tail = NULL;
	f->bytes = f->count = 0;
}

void swm_destroy(struct swm *s)
{
	if (!s)
		return;
	for (unsigned p = 0; p < s->cfg.ports; p++) {
		for (unsigned q = 0; q < SWM_PRIOS; q++) {
			fifo_free(&s->port[p].q[q]);
			fifo_free(&s->port[p].host[q]);
		}
	}
	free(s->last);
	free(s);
}

static void fifo_push(struct fifo *f, struct pkt *p)
{
	p->next = NULL;
	if (f->tail)
		f->tail->next = p;
	else
		f->head = p;
	f->tail = p;
	f->bytes += p->len;
	f->count++;
}

static struct pkt *fifo_pop(struct fifo *f)
{
	struct pkt *p = f->head;
	if (!p)
		return NULL;
	f->head = p->next;
	if (!f->head)
		f->tail = NULL;
	f->bytes -= p->len;
	f->count--;
	p->next = NULL;
	return p;
}

/* ---- IPv4 ---- */

static uint16_t ip_sum(const uint8_t *h, size_t len)
{
	uint32_t sum = 0;
	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	return (uint16_t)~sum;
}

static uint32_t rd32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* A valid IPv4 header within len bytes: the header's length in bytes, or 0. */
static size_t ipv4_header(const uint8_t *pkt, size_t len)
{
	if (len < IPV4_HDR_MIN || pkt[0] >> 4 != 4)
		return 0;
	size_t ihl = (size_t)(pkt[0] & 0xF) * 4;
	size_t tot = (size_t)pkt[2] << 8 | pkt[3];
	if (ihl < IPV4_HDR_MIN || ihl > len || tot < ihl || tot > len)
		return 0;
	if (ip_sum(pkt, ihl) != 0) /* a correct header sums to 0xFFFF, complemented 0 */
		return 0;
	return ihl;
}

/* RFC 3168 5: ECT(1) 01, ECT(0) 10, CE 11; CE is set in place of either ECT. */
static bool ecn_capable(const uint8_t *pkt)
{
	return (pkt[1] & 3) != 0;
}

static void set_ce(uint8_t *pkt)
{
	size_t ihl = (size_t)(pkt[0] & 0xF) * 4;
	pkt[1] |= 3;
	pkt[10] = pkt[11] = 0;
	uint16_t sum = ip_sum(pkt, ihl);
	pkt[10] = (uint8_t)(sum >> 8);
	pkt[11] = (uint8_t)sum;
}

/* ---- the queues ---- */

/* ns that len bytes occupy a wire of `rate` bit/s (0: none), the division's remainder
 * carried so that the long-run rate is exact whatever the packet sizes. */
static uint64_t tx_time(uint64_t rate, struct wire *w, uint32_t len)
{
	if (!rate)
		return 0;
	uint64_t num = (uint64_t)len * 8u * 1000000000u + w->rem;
	w->rem = num % rate;
	return num / rate;
}

/* Puts the head of queue q on wire w, starting at `at` or when w became free, whichever is
 * later. */
static void wire_start(struct wire *w, uint64_t rate, uint8_t q, uint32_t len, uint64_t at)
{
	uint64_t start = at > w->free_at ? at : w->free_at;
	w->cur = q;
	w->finish = start + tx_time(rate, w, len);
}

/* Deficit round robin over priorities 0..STRICT_PRIO-1 (Shreedhar and Varghese, 1995), as
 * ETS shares a port between traffic classes with equal weights: each non-empty queue, in
 * turn, sends while its head fits in its deficit, which grows by a quantum per round and is
 * forgotten when the queue empties. At least one of the queues must hold a packet. */
static uint8_t drr_pick(struct port *pt)
{
	for (;;) {
		uint8_t q = pt->drr;
		const struct pkt *head = pt->q[q].head;
		if (head && pt->drr_fresh) {
			pt->deficit[q] += DRR_QUANTUM;
			pt->drr_fresh = false;
		}
		if (head && head->len <= pt->deficit[q]) {
			pt->deficit[q] -= head->len;
			return q;
		}
		if (!head)
			pt->deficit[q] = 0;
		pt->drr = (uint8_t)((q + 1) % STRICT_PRIO);
		pt->drr_fresh = true;
	}
}

/* If port pt's egress wire is idle and its queues hold packets, the next one starts: the
 * highest strict priority's head, else the round robin's choice. */
static void start_egress(struct swm *s, struct port *pt, uint64_t at)
{
	if (pt->out.cur != NO_CUR)
		return;
	for (int q = SWM_PRIOS - 1; q >= STRICT_PRIO; q--)
		if (pt->q[q].head) {
			wire_start(&pt->out, s->cfg.rate_bps, (uint8_t)q, pt->q[q].head->len, at);
			return;
		}
	for (int q = 0; q < STRICT_PRIO; q++)
		if (pt->q[q].head) {
			uint8_t pick = drr_pick(pt);
			wire_start(&pt->out, s->cfg.rate_bps, pick, pt->q[pick].head->len, at);
			return;
		}
}

static bool pfc_class(const struct swm *s, const struct pkt *p)
{
	return s->cfg.pfc && p->prio == s->cfg.pfc_prio;
}

/* RED on the instantaneous queue: the probability for a packet finding q bytes, as a draw
 * threshold. */
static bool red_mark(struct swm *s, uint32_t q)
{
	const struct swm_cfg *c = &s->cfg;
	if (q <= c->kmin)
		return false;
	if (q >= c->kmax)
		return true;
	double pr = c->pmax * (double)(q - c->kmin) / (double)(c->kmax - c->kmin);
	return draw_next(&s->rng_mark) < draw_threshold(pr);
}

/* Puts p into its egress queue at time `now` (it arrives, or its paused ingress resumed):
 * drop-tail, marking, the PFC count of its ingress. Takes p. */
static enum swm_verdict enqueue(struct swm *s, struct pkt *p, uint64_t now)
{
	struct port *out = &s->port[p->out], *in = &s->port[p->in];
	struct fifo *q = &out->q[p->prio];

	if ((uint64_t)q->bytes + p->len > s->cfg.buffer) {
		in->st.drop_tail++;
		free(p);
		return SWM_DROP_TAIL;
	}
	if (ecn_capable(p->data)) {
		out->st.ect++;
		if (s->cfg.ecn && red_mark(s, q->bytes)) {
			set_ce(p->data);
			out->st.marked++;
		}
	}
	fifo_push(q, p);
	out->qbytes += p->len;
	if (out->qbytes > out->st.queue_max)
		out->st.queue_max = out->qbytes;
	if (pfc_class(s, p)) {
		in->pfc_bytes += p->len;
		/* 802.1Qbb: XOFF once the ingress's share of the buffer reaches the threshold. */
		if (!in->paused && in->pfc_bytes >= s->cfg.xoff) {
			in->paused = true;
			in->paused_since = now;
			in->st.pauses++;
		}
	}
	start_egress(s, out, now);
	return SWM_QUEUED;
}

/* The host's highest priority that has a packet and may send, or -1. */
static int host_next(const struct swm *s, const struct port *pt)
{
	for (int q = SWM_PRIOS - 1; q >= 0; q--) {
		if (!pt->host[q].head)
			continue;
		if (pt->paused && s->cfg.pfc && q == s->cfg.pfc_prio)
			continue; /* 802.1Qbb: a paused priority waits; the others go on */
		return q;
	}
	return -1;
}

static struct pkt *host_pop(struct port *pt, uint8_t q)
{
	pt->host_count--;
	return fifo_pop(&pt->host[q]);
}

/* If port pt's host link is idle, the host's next packet starts across it; with no host rate
 * it arrives at once, and so do the ones behind it, until the host is empty or paused. */
static void start_ingress(struct swm *s, struct port *pt, uint64_t at)
{
	int q;
	while (pt->in.cur == NO_CUR && (q = host_next(s, pt)) >= 0) {
		if (s->cfg.host_rate_bps) {
			wire_start(&pt->in, s->cfg.host_rate_bps, (uint8_t)q, pt->host[q].head->len,
				   at);
			return;
		}
		enqueue(s, host_pop(pt, (uint8_t)q), at);
	}
}

/* Ingress `in` fell to XON at `now`: its host resumes the paused priority. */
static void resume(struct swm *s, struct port *in, uint64_t now)
{
	in->paused = false;
	in->st.pause_ns += now - in->paused_since;
	start_ingress(s, in, now);
}

int swm_input(struct swm *s, unsigned in, const uint8_t *pkt, size_t len, uint64_t now)
{
	if (!s || in >= s->cfg.ports || (!pkt && len))
		return -EINVAL;
	struct port *ip = &s->port[in];
	free(s->last);
	s->last = NULL;
	ip->st.rx_pkts++;
	ip->st.rx_bytes += len;

	if (s->loss_thr && draw_next(&s->rng_loss) < s->loss_thr) {
		ip->st.drop_loss++;
		return SWM_DROP_LOSS;
	}
	if (!ipv4_header(pkt, len) || len > UINT32_MAX) {
		ip->st.drop_bad++;
		return SWM_DROP_BAD;
	}
	uint32_t dst = rd32(pkt + 16);
	unsigned out = s->cfg.ports;
	for (unsigned p = 0; p < s->cfg.ports; p++)
		if (s->cfg.addr[p] == dst) {
			out = p;
			break;
		}
	if (out == s->cfg.ports || out == in) {
		ip->st.drop_noroute++;
		return SWM_DROP_NOROUTE;
	}

	struct pkt *p = malloc(sizeof(*p) + len);
	if (!p) {
		ip->st.drop_tail++;
		return -ENOMEM;
	}
	p->len = (uint32_t)len;
	p->in = (uint8_t)in;
	p->out = (uint8_t)out;
	p->prio = pkt[1] >> 5; /* DSCP >> 3: the class selector */
	memcpy(p->data, pkt, len);

	/* Straight into the switch when the host has no link to cross and nothing waits ahead
	 * of the packet; otherwise into the host's queue, in order. */
	if (!s->cfg.host_rate_bps && !ip->host[p->prio].head && !(pfc_class(s, p) && ip->paused))
		return (int)enqueue(s, p, now);
	if (ip->host_count >= s->cfg.hold_max) {
		ip->st.drop_hold++;
		free(p);
		return SWM_DROP_HOLD;
	}
	fifo_push(&ip->host[p->prio], p);
	ip->host_count++;
	start_ingress(s, ip, now);
	return SWM_HELD;
}

/* The wire that finishes first: *port and *ingress (arrivals before departures at the same
 * time); false if every wire is idle. */
static bool first_event(const struct swm *s, unsigned *port, bool *ingress, uint64_t *t)
{
	bool found = false;
	for (unsigned p = 0; p < s->cfg.ports; p++) {
		const struct port *pt = &s->port[p];
		if (pt->in.cur != NO_CUR &&
		    (!found || pt->in.finish < *t || (pt->in.finish == *t && !*ingress))) {
			found = true;
			*port = p;
			*ingress = true;
			*t = pt->in.finish;
		}
		if (pt->out.cur != NO_CUR && (!found || pt->out.finish < *t)) {
			found = true;
			*port = p;
			*ingress = false;
			*t = pt->out.finish;
		}
	}
	return found;
}

/* A packet has crossed port pt's host link at t: it enters the switch. */
static void arrive(struct swm *s, struct port *pt, uint64_t t)
{
	struct pkt *p = host_pop(pt, pt->in.cur);
	pt->in.cur = NO_CUR;
	pt->in.free_at = t;
	enqueue(s, p, t);
	start_ingress(s, pt, t);
}

/* The packet on port pt's egress wire has left at t; returns it. */
static struct pkt *depart(struct swm *s, struct port *pt, uint64_t t)
{
	struct pkt *p = fifo_pop(&pt->q[pt->out.cur]);
	pt->qbytes -= p->len;
	pt->out.cur = NO_CUR;
	pt->out.free_at = t;
	pt->st.tx_pkts++;
	pt->st.tx_bytes += p->len;
	pt->st.tx_prio[p->prio]++;
	s->port[p->in].st.fwd_pkts++;
	s->port[p->in].st.fwd_bytes += p->len;
	if (pfc_class(s, p)) {
		struct port *in = &s->port[p->in];
		in->pfc_bytes -= p->len;
		if (in->paused && in->pfc_bytes <= s->cfg.xon)
			resume(s, in, t);
	}
	start_egress(s, pt, t);
	return p;
}

const uint8_t *swm_output(struct swm *s, uint64_t now, unsigned *port, size_t *len)
{
	unsigned b;
	bool ingress;
	uint64_t t;

	free(s->last);
	s->last = NULL;
	while (first_event(s, &b, &ingress, &t) && t <= now) {
		if (ingress) {
			arrive(s, &s->port[b], t);
			continue;
		}
		struct pkt *p = depart(s, &s->port[b], t);
		s->last = p;
		*port = p->out;
		*len = p->len;
		return p->data;
	}
	return NULL;
}

uint64_t swm_deadline(const struct swm *s)
{
	unsigned b;
	bool ingress;
	uint64_t t;
	return first_event(s, &b, &ingress, &t) ? t : UINT64_MAX;
}

int swm_port_stats(const struct swm *s, unsigned p, uint64_t now, struct swm_port_stats *st)
{
	if (!s || p >= s->cfg.ports || !st)
		return -EINVAL;
	const struct port *pt = &s->port[p];
	*st = pt->st;
	st->queue_bytes = pt->qbytes;
	st->pfc_bytes = pt->pfc_bytes;
	st->held = pt->host_count;
	st->paused = pt->paused;
	if (pt->paused && now > pt->paused_since)
		st->pause_ns += now - pt->paused_since;
	return 0;
}

int swm_set_loss(struct swm *s, double loss)
{
	if (!s || !draw_valid(loss))
		return -EINVAL;
	s->cfg.loss = loss;
	s->loss_thr = draw_threshold(loss);
	return 0;
}
