/* Which transport an active id speaks, where its source address has a RoCEv2 and an iWARP
 * device and nothing in this process chose one (cm.h "Which transport"): rdma_resolve_addr asks
 * the peer, and ADDR_RESOLVED comes with the device of the answer, so that id->verbs, and the
 * QP the application then makes on it, are of the transport the peer speaks. The question
 * leaves no trace with the peer's application: a SIDR_REQ for the service ID of the id's port
 * space and destination port, from QP1 of the RoCE device, with rdma_cm's IP header, through
 * this process's comm-ID endpoint (core/gsi.h), as a UD id's. The peer's IB CM answers it by
 * itself: SIDR_REP status 1 (IB_SIDR_UNSUPPORTED) when nobody listens on that service ID,
 * status 2 (IB_SIDR_REJECT) from an RC listener, whose rdma_cm refuses a SIDR request (kernel
 * cma_ib_req_handler: cma_ib_check_req_qp_type fails, cm_destroy_id rejects it); softrdma's
 * listeners answer the same (cm_roce.c request_in). A host with no RoCE CM on that address (a
 * siw-only peer) drops it.
 * The rule: RoCE when its CM knows a listener (so a peer that takes both gets RoCE); "nobody"
 * or no answer within CM_PROBE_ROCE_WAIT_NS: asked again every CM_REFUSED_STEP_NS for
 * CM_REFUSED_RETRY_NS (a server about to listen: perftest -R), then iWARP (rdma_connect,
 * refused, tries again as long); no decision by the deadline (the resolve's timeout, at most
 * CM_PROBE_MAX_NS): RoCE, the default. TCP is not asked (see ask()). Counted: probes,
 * probe_roce, probe_iwarp, probe_default. */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define CM_PROBE_ROCE_WAIT_NS 100000000ull  /* RoCE's answer to one question */
#define CM_PROBE_RESEND_NS    50000000ull   /* the SIDR_REQ again (doubling) */
#define CM_PROBE_MAX_NS	      3000000000ull /* the longest a resolve asks */

struct cm_probe {
	struct cm_dev *roce, *iwarp;
	uint32_t req_id;   /* of the question outstanding */
	int sidr;	   /* the SIDR_REP's status, or -1: none yet */
	uint64_t asked_at; /* when the question outstanding was asked */
	uint64_t resend_at, resend_step, retry_at, refused_until, deadline;
	struct cm_mad m; /* the SIDR_REQ: local_id (the Request ID) and TID change per question */
	uint8_t mad[CM_MAD_LEN];
};

static bool mapped(const uint8_t a[16])
{
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(a, pre, 12);
}

static int send_sidr(struct cm_id *id)
{
	struct gsi_frame f = {.ipv6 = !mapped(id->raddr), .tos = id->tos};
	memcpy(f.src, id->laddr, 16);
	memcpy(f.dst, id->raddr, 16);
	memcpy(f.mad, id->probe->mad, CM_MAD_LEN);
	int r = sr_cm_gsi_send(id->probe->roce->ctx, &f);
	if (r < 0)
		cm_count(CM_C_mad_send_errors);
	return r;
}

/* The RoCE question (again), under a new Request ID: an answer to an earlier one matches
 * nothing any more (cm_probe_sidr_rep). 0 or a negative errno. */
static int ask_roce(struct cm_id *id, uint64_t now)
{
	struct cm_probe *p = id->probe;
	int r = cm_new_comm_id(&p->req_id); /* the reply is routed to us by it */
	if (r < 0)
		return r;
	uint32_t hi = 0;
	if (getrandom(&hi, sizeof(hi), GRND_NONBLOCK) != (ssize_t)sizeof(hi))
		hi = cm_random_psn();
	p->m.tid = (uint64_t)hi << 32 | p->req_id;
	p->m.local_id = p->req_id;
	if (cm_mad_build(&p->m, p->mad) != CM_MAD_LEN)
		return -EINVAL;
	p->sidr = -1;
	p->resend_step = CM_PROBE_RESEND_NS;
	p->resend_at = now + p->resend_step;
	send_sidr(id);
	return 0;
}

/* The question (again). iWARP is not asked: a TCP connection accepted and closed before any
 * byte hung Linux 6.1's siw (the lab's guest stopped answering after one; its listener
 * refused the real connection before that), so RoCE's answer alone decides. */
static void ask(struct cm_id *id, uint64_t now)
{
	id->probe->asked_at = now;
	ask_roce(id, now);
}

int cm_probe_start(struct cm_id *id, struct cm_dev *roce, struct cm_dev *iwarp, uint64_t now,
		   int timeout_ms)
{
	if (!roce || !iwarp)
		return -ENODEV;
	struct cm_probe *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	int r;
	p->roce = roce;
	p->iwarp = iwarp;
	struct cm_mad *m = &p->m;
	m->attr = CM_ATTR_SIDR_REQ;
	m->pkey = 0xFFFF;
	m->service_id = (uint64_t)id->id.ps << 16 | id->rport; /* cma_get_service_id */
	struct cm_cma_hdr h = {.ipv6 = !mapped(id->laddr), .sport = id->lport};
	memcpy(h.src, id->laddr, 16);
	memcpy(h.dst, id->raddr, 16);
	if (cm_cma_hdr_build(&h, m->pd) < 0) {
		free(p);
		return -EINVAL;
	}
	uint64_t max = timeout_ms > 0 ? (uint64_t)timeout_ms * 1000000ull : CM_PROBE_MAX_NS;
	p->deadline = now + (max < CM_PROBE_MAX_NS ? max : CM_PROBE_MAX_NS);
	p->refused_until = now + CM_REFUSED_RETRY_NS;
	id->probe = p;
	id->state = CM_RESOLVING;
	cm_count(CM_C_probes);
	ask(id, now);
	r = cm_kick();
	if (r < 0) {
		cm_probe_free(id);
		id->state = id->bound_app ? CM_BOUND : CM_IDLE;
	}
	return r;
}

void cm_probe_free(struct cm_id *id)
{
	free(id->probe);
	id->probe = NULL;
}

static void decide(struct cm_id *id, enum cm_counter why, struct cm_dev *d)
{
	cm_count(why);
	if (getenv(CM_DEBUG_ENV))
		fprintf(stderr, "softrdma: rdma_cm: id %p: the peer speaks %s (%s)\n", (void *)id,
			d->iwarp ? "iWARP" : "RoCE", cm_counter_names[why]);
	cm_probe_free(id);
	cm_addr_resolved(id, d);
}

void cm_probe_run(struct cm_id *id, uint64_t now, uint64_t *wake)
{
	struct cm_probe *p = id->probe;
	if (!p)
		return;
	if (p->retry_at) {
		/* Nobody listened: asked again. */
		if (now < p->retry_at) {
			if (p->retry_at < *wake)
				*wake = p->retry_at;
			return;
		}
		p->retry_at = 0;
		cm_count(CM_C_refused_retries);
		ask(id, now);
	}
	if (p->sidr >= 0 && p->sidr != CM_SIDR_UNSUPPORTED)
		return decide(id, CM_C_probe_roce, p->roce);
	if (now >= p->deadline)
		return decide(id, CM_C_probe_default, p->roce);
	/* "Nobody", or no RoCE CM on that address (silence: a siw-only host): an iWARP listener,
	 * or none yet; asked again until refused_until, then iWARP (rdma_connect, refused,
	 * tries again as long). */
	bool silent = p->sidr < 0 && now >= p->asked_at + CM_PROBE_ROCE_WAIT_NS;
	if (p->sidr == CM_SIDR_UNSUPPORTED || silent) {
		if (now >= p->refused_until)
			return decide(id, CM_C_probe_iwarp, p->iwarp);
		p->retry_at = now + CM_REFUSED_STEP_NS;
		if (p->retry_at < *wake)
			*wake = p->retry_at;
		return;
	}
	if (now >= p->resend_at) {
		cm_count(CM_C_mad_resends);
		send_sidr(id);
		p->resend_step *= 2;
		p->resend_at = now + p->resend_step;
	}
	uint64_t next = p->deadline;
	if (p->resend_at < next)
		next = p->resend_at;
	if (p->asked_at + CM_PROBE_ROCE_WAIT_NS < next)
		next = p->asked_at + CM_PROBE_ROCE_WAIT_NS;
	if (next < *wake)
		*wake = next;
}

struct probe_key {
	uint32_t req_id;
	const uint8_t *src;
};

static bool is_probe(const struct cm_id *c, const void *arg)
{
	const struct probe_key *k = arg;
	return c->state == CM_RESOLVING && c->probe && c->probe->req_id == k->req_id &&
	       !memcmp(c->raddr, k->src, 16);
}

bool cm_probe_sidr_rep(uint32_t req_id, const uint8_t src[16], uint8_t status, uint64_t now)
{
	struct probe_key k = {.req_id = req_id, .src = src};
	struct cm_id *id = cm_find(is_probe, &k);
	if (!id)
		return false;
	if (id->probe->sidr < 0)
		id->probe->sidr = status;
	else
		cm_count(CM_C_mad_dups);
	uint64_t wake = now + 1000000000ull;
	cm_probe_run(id, now, &wake);
	return true;
}
