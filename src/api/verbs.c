/* Verbs objects and calls: PD, MR, completion channels, CQ, SRQ, QP, post/poll, async events
 * (semantics of the ibv_* man pages; errors as verbs returns them: positive errno, or NULL
 * with errno set, and *bad_wr at the first work request not posted). */
#define _GNU_SOURCE
#include "api/api.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/psn.h"
#include "wire/roce/roce.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

static uint32_t new_handle(struct sr_context *ctx)
{
	return ++ctx->next_handle;
}

/* ---- protection domains ---- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct sr_context *ctx = sr_ctx(context);
	struct sr_pd *pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibpd.context = context;
	core_lock(ctx->core);
	pd->ibpd.handle = new_handle(ctx);
	core_unlock(ctx->core);
	return &pd->ibpd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

/* ---- memory regions ---- */

/* Whether [addr, addr + length) is mapped, readable, and writable if `access` lets anyone
 * write it: rxe pins the pages at registration and fails so (EFAULT); a region that is not
 * would let a peer's access kill the process with SIGSEGV. From /proc/self/maps (mincore,
 * which sees mappings but not their rights, where /proc is not mounted). 0 or -EFAULT. */
static int check_mapped(const void *addr, size_t length, unsigned access)
{
	if (!length)
		return 0;
	uintptr_t a = (uintptr_t)addr, end = a + length;
	if (end < a)
		return -EFAULT;
	bool write =
	    access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f) {
		long pg = sysconf(_SC_PAGESIZE);
		uintptr_t lo = a & ~(uintptr_t)(pg - 1);
		unsigned char vec[256];
		for (uintptr_t p = lo; p < end; p += (uintptr_t)pg * sizeof(vec)) {
			size_t n = end - p < (uintptr_t)pg * sizeof(vec) ? end - p
									 : (size_t)pg * sizeof(vec);
			if (mincore((void *)p, n, vec) != 0)
				return -EFAULT;
		}
		return 0;
	}
	/* The mappings are listed in address order: walk them until [a, end) is covered. */
	char line[512];
	int ret = -EFAULT;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perm[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) != 3)
			continue;
		if (hi <= a)
			continue;
		if (lo > a || perm[0] != 'r' || (write && perm[1] != 'w'))
			break; /* a hole, or a mapping without the rights */
		if (hi >= end) {
			ret = 0;
			break;
		}
		a = hi;
	}
	fclose(f);
	return ret;
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	if (!pd || (!addr && length)) {
		errno = EINVAL;
		return NULL;
	}
	if (obj_mr_check_access(access) < 0 || length > UINT64_MAX - iova) {
		errno = EINVAL;
		return NULL;
	}
	if (check_mapped(addr, length, access) < 0) {
		errno = EFAULT;
		return NULL;
	}
	struct sr_context *ctx = sr_ctx(pd->context);
	struct sr_mr *mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->omr.iova = iova;
	mr->omr.addr = addr;
	mr->omr.length = length;
	mr->omr.access = access;
	mr->omr.pd = pd->handle;
	core_lock(ctx->core);
	int ret = obj_mr_add(&ctx->mrs, &mr->omr);
	core_unlock(ctx->core);
	if (ret < 0) {
		free(mr);
		errno = -ret;
		return NULL;
	}
	mr->ibmr.context = pd->context;
	mr->ibmr.pd = pd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr->ibmr.handle = mr->omr.key;
	mr->ibmr.lkey = mr->omr.key;
	mr->ibmr.rkey = mr->omr.key;
	return &mr->ibmr;
}

struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			       int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sr_mr *mr = (struct sr_mr *)ibmr;
	struct sr_context *ctx = sr_ctx(ibmr->context);
	core_lock(ctx->core);
	if (mr->omr.nmw) {
		/* Memory windows are bound to it (IBA 10.6.7.2.6; rxe refuses so too). */
		core_unlock(ctx->core);
		return EINVAL;
	}
	/* iWARP frames ahead of TCP: what is framed from this memory is copied first, so that
	 * nothing is read from it once this returns (rxe holds the pages until then). */
	if (ctx->iwp && iwp_forget_memory(ctx->iwp, mr->omr.addr, mr->omr.length) < 0) {
		core_unlock(ctx->core);
		return ENOMEM;
	}
	obj_mr_remove(&ctx->mrs, &mr->omr);
	core_unlock(ctx->core);
	free(mr);
	return 0;
}

/* ibv_rereg_mr(3): a new PD, access or range for a registered region, in place. The keys stay
 * (the caller reads them back from the MR either way). The change is made under the core
 * lock, so every access the engine checks after it sees the new region, none a mixture.
 * Errors as rdma-core: IBV_REREG_MR_ERR_INPUT for what libibverbs itself rejects,
 * IBV_REREG_MR_ERR_CMD for what the kernel would, errno set for both. iWARP devices refuse it
 * with EOPNOTSUPP, as siw (and rdma-core's default for a provider without rereg): callers fall
 * back to dereg + reg there. */
int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *pd, void *addr, size_t length,
		 int access)
{
	struct sr_mr *mr = (struct sr_mr *)ibmr;
	bool new_pd = flags & IBV_REREG_MR_CHANGE_PD;
	bool new_range = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	bool new_access = flags & IBV_REREG_MR_CHANGE_ACCESS;
	if (!ibmr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) || (new_range && (!addr || !length)) ||
	    (access && !new_access)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (sr_ctx(ibmr->context)->dev->iwarp) {
		errno = EOPNOTSUPP; /* libibverbs' answer for a provider without rereg_mr */
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((new_pd && (!pd || pd->context != ibmr->context)) ||
	    (new_access && obj_mr_check_access((unsigned)access) < 0)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	if ((new_range || new_access) &&
	    check_mapped(new_range ? addr : mr->omr.addr, new_range ? length : mr->omr.length,
			 new_access ? (unsigned)access : mr->omr.access) < 0) {
		errno = EFAULT; /* rxe: the pages cannot be pinned */
		return IBV_REREG_MR_ERR_CMD;
	}
	struct sr_context *ctx = sr_ctx(ibmr->context);
	core_lock(ctx->core);
	if (mr->omr.nmw) {
		/* Windows are bound to it: it may not change under them (IBA 10.6.7.2.6). */
		core_unlock(ctx->core);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (new_pd)
		mr->omr.pd = pd->handle;
	if (new_access)
		mr->omr.access = (unsigned)access;
	if (new_range) {
		mr->omr.addr = addr;
		mr->omr.length = length;
		mr->omr.iova = (uintptr_t)addr;
	}
	core_unlock(ctx->core);
	if (new_pd)
		ibmr->pd = pd;
	if (new_range) {
		ibmr->addr = addr;
		ibmr->length = length;
	}
	return 0;
}

/* ---- memory windows (RoCE devices; the rules are obj/mw.c's) ----
 *
 * As rxe: ibv_alloc_mw makes an unbound window of type 1 or 2; a type 1 window is bound by
 * ibv_bind_mw, which posts a BIND_MW work request on the QP (as rdma-core's providers do) with
 * the next key byte and, once posted, gives the window that key (a failed bind completes with
 * IBV_WC_MW_BIND_ERR, and the consumer restores it, ibv_bind_mw(3)); a type 2 window is bound
 * by a BIND_MW work request (ibv_post_send or ibv_wr_bind_mw) with the consumer's new key, and
 * unbound by LOCAL_INV or a remote SEND with Invalidate. iWARP contexts have none of these
 * (their ops stay NULL: ibv_alloc_mw fails with EOPNOTSUPP, as on siw). */

static struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct sr_context *ctx = sr_ctx(pd->context);
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL; /* as the kernel's alloc_mw command */
		return NULL;
	}
	struct sr_mw *mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	mw->omw.type = (uint8_t)type;
	mw->omw.pd = pd->handle;
	core_lock(ctx->core);
	int ret = obj_mw_add(&ctx->mws, &mw->omw);
	core_unlock(ctx->core);
	if (ret < 0) {
		free(mw);
		errno = -ret;
		return NULL;
	}
	mw->ibmw.context = pd->context;
	mw->ibmw.pd = pd;
	mw->ibmw.rkey = mw->omw.key;
	mw->ibmw.handle = mw->omw.key;
	mw->ibmw.type = type;
	return &mw->ibmw;
}

static int sr_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sr_mw *mw = (struct sr_mw *)ibmw;
	struct sr_context *ctx = sr_ctx(ibmw->context);
	/* Bound or not: its key stops working now, its region is free of it. */
	core_lock(ctx->core);
	obj_mw_remove(&ctx->mws, &mw->omw);
	core_unlock(ctx->core);
	free(mw);
	return 0;
}

/* ibv_bind_mw has checked the window's type (1), that a length comes with a region, and the
 * PDs. */
static int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	if (qp->context != mw->context ||
	    (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED))
		return EINVAL; /* type 1 windows are never zero-based (o10-36.2.2) */
	struct ibv_send_wr wr = {0}, *bad;
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	int ret = qp->context->ops.post_send(qp, &wr, &bad);
	if (ret)
		return ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

/* ---- completion channels and CQs ---- */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct sr_channel *ch = calloc(1, sizeof(*ch));
	int fds[2];
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(fds, O_CLOEXEC) != 0) {
		free(ch);
		return NULL;
	}
	ch->ch.context = context;
	ch->ch.fd = fds[0];
	ch->wfd = fds[1];
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sr_channel *ch = (struct sr_channel *)channel;
	if (channel->refcnt)
		return EBUSY;
	close(ch->ch.fd);
	close(ch->wfd);
	free(ch);
	return 0;
}

/* eng_cq.notify: one pointer-sized write per event; pipe writes that small are atomic. */
static void cq_notify(struct eng_cq *ecq)
{
	struct sr_cq *cq = ecq->owner;
	if (!cq->ibcq.channel)
		return;
	struct sr_channel *ch = (struct sr_channel *)cq->ibcq.channel;
	if (write(ch->wfd, &cq, sizeof(cq)) == sizeof(cq))
		cq->events_sent++;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct sr_cq *cq = sr_cq_new(context, cqe, cq_context, channel, comp_vector);
	return cq ? &cq->ibcq : NULL;
}

struct sr_cq *sr_cq_new(struct ibv_context *context, int cqe, void *cq_context,
			struct ibv_comp_channel *channel, int comp_vector)
{
	if (cqe < 1 || cqe >= SR_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors || (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_context *ctx = sr_ctx(context);
	struct sr_cq *cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	int ret = eng_cq_init(&cq->ecq, (uint32_t)cqe);
	if (ret < 0) {
		free(cq);
		errno = -ret;
		return NULL;
	}
	cq->ecq.notify = cq_notify;
	cq->ecq.owner = cq;
	cq->ctx = ctx;
	cq->ibcq.context = context;
	cq->ibcq.channel = channel;
	cq->ibcq.cq_context = cq_context;
	cq->ibcq.cqe = cqe;
	pthread_mutex_init(&cq->ibcq.mutex, NULL);
	pthread_cond_init(&cq->ibcq.cond, NULL);
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&cq->poll_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (channel)
		channel->refcnt++;
	core_lock(ctx->core);
	cq->ibcq.handle = new_handle(ctx);
	core_unlock(ctx->core);
	return cq;
}

/* ibv_resize_cq(3): a new ring under the core lock, the completions waiting moved over in
 * order; EINVAL for a size out of range or below the completions waiting (as rxe). */
int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	if (!ibcq || cqe < 1 || cqe >= SR_MAX_CQE)
		return EINVAL;
	core_lock(cq->ctx->core);
	int ret = eng_cq_resize(&cq->ecq, (uint32_t)cqe);
	if (ret == 0)
		ibcq->cqe = cqe;
	core_unlock(cq->ctx->core);
	return -ret;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	if (ibcq->channel)
		ibcq->channel->refcnt--;
	eng_cq_fini(&cq->ecq);
	pthread_mutex_destroy(&ibcq->mutex);
	pthread_cond_destroy(&ibcq->cond);
	pthread_mutex_destroy(&cq->poll_lock);
	free(cq);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct sr_cq *scq;
	ssize_t n = read(channel->fd, &scq, sizeof(scq));
	if (n != sizeof(scq))
		return -1; /* errno from read: EAGAIN on a non-blocking channel */
	*cq = &scq->ibcq;
	*cq_context = scq->ibcq.cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}

static int sr_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	struct core_ctx *core = cq->ctx->core;
	if (num_entries < 0)
		return -1;
	core_app_enter(core, true);
	core_lock(core);
	/* Moves packets on this thread rather than waiting for the progress thread (DESIGN.md
	 * decision 4). */
	int n = core_poll_cq(core, &cq->ecq, num_entries, wc);
	core_unlock(core);
	core_app_leave(core, true);
	return n;
}

static int sr_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	core_lock(cq->ctx->core);
	cq->ecq.armed = solicited_only ? 2 : 1;
	core_unlock(cq->ctx->core);
	/* The application will wait for the event rather than poll: the progress thread moves
	 * the packets from now on (core/mover.h). */
	if (cq->ctx->iwp)
		iwp_app_blocks(cq->ctx->iwp);
	else
		core_app_blocks(cq->ctx->core);
	return 0;
}

/* ---- shared receive queues ---- */

static void srq_limit_event(struct eng_rq *rq)
{
	struct sr_srq *srq = rq->owner;
	struct ibv_async_event ev = {.element.srq = &srq->ibsrq,
				     .event_type = IBV_EVENT_SRQ_LIMIT_REACHED};
	sr_async_push(srq->ctx, &ev);
}

struct sr_srq *sr_srq_new(struct ibv_context *context, struct ibv_pd *pd,
			  const struct ibv_srq_attr *attr, void *srq_context)
{
	if (!context || !pd || pd->context != context || !attr || attr->max_wr == 0 ||
	    attr->max_wr > SR_MAX_QP_WR || attr->max_sge == 0 || attr->max_sge > ENG_MAX_SGE ||
	    attr->srq_limit > attr->max_wr) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_context *ctx = sr_ctx(context);
	struct sr_srq *srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}
	int ret = eng_rq_init(&srq->erq, attr->max_wr, attr->max_sge, true);
	if (ret < 0) {
		free(srq);
		errno = -ret;
		return NULL;
	}
	srq->erq.limit_event = srq_limit_event;
	srq->erq.owner = srq;
	srq->erq.limit = attr->srq_limit;
	srq->ctx = ctx;
	srq->max_wr = attr->max_wr;
	srq->max_sge = attr->max_sge;
	srq->ibsrq.context = context;
	srq->ibsrq.srq_context = srq_context;
	srq->ibsrq.pd = pd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	core_lock(ctx->core);
	srq->ibsrq.handle = new_handle(ctx);
	core_unlock(ctx->core);
	return srq;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	if (!pd || !init) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_srq *srq = sr_srq_new(pd->context, pd, &init->attr, init->srq_context);
	return srq ? &srq->ibsrq : NULL;
}

int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	if (mask & IBV_SRQ_MAX_WR)
		return EOPNOTSUPP; /* resizing: not yet */
	if (attr->srq_limit > srq->max_wr)
		return EINVAL;
	core_lock(srq->ctx->core);
	srq->erq.limit = attr->srq_limit;
	core_unlock(srq->ctx->core);
	return 0;
}

int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;
	core_lock(srq->ctx->core);
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->erq.limit;
	core_unlock(srq->ctx->core);
	return 0;
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;
	if (srq->xrcd) {
		/* No XRCETH reaches it any more (requests naming it are refused). */
		core_lock(srq->ctx->core);
		sr_xrc_srq_release(srq);
		core_unlock(srq->ctx->core);
	}
	eng_rq_fini(&srq->erq);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	free(srq);
	return 0;
}

static int sr_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;
	core_lock(srq->ctx->core);
	int ret = eng_rq_post(&srq->erq, wr, (const struct ibv_recv_wr **)bad);
	core_unlock(srq->ctx->core);
	return -ret;
}

/* ---- queue pairs ---- */

static struct eng_qp_attr to_eng_attr(const struct sr_qp *qp, const struct ibv_qp_attr *a);

int sr_alloc_qpn(struct sr_context *ctx, struct sr_qp *qp, uint32_t *qpn)
{
	if (ctx->qp_count >= CORE_MAX_QP - 1)
		return -ENOMEM;
	if (ctx->qp_count + 1 >= ctx->qp_tab_len && ctx->qp_tab_len < CORE_MAX_QP) {
		/* Full (numbers 1 .. len - 1 are in use): twice the room. */
		uint32_t len = ctx->qp_tab_len ? 2 * ctx->qp_tab_len : 64;
		if (len > CORE_MAX_QP)
			len = CORE_MAX_QP;
		struct sr_qp **t = realloc(ctx->qp_tab, len * sizeof(*t));
		if (!t)
			return -ENOMEM;
		memset(t + ctx->qp_tab_len, 0, (len - ctx->qp_tab_len) * sizeof(*t));
		ctx->qpn_next = ctx->qp_tab_len; /* the new room first */
		ctx->qp_tab = t;
		ctx->qp_tab_len = len;
	}
	/* Next fit: a free number is found within the table (qp_count < len - 1). */
	uint32_t n = ctx->qpn_next;
	while (n == 0 || n >= ctx->qp_tab_len || ctx->qp_tab[n])
		n = n + 1 >= ctx->qp_tab_len ? 1 : n + 1;
	ctx->qp_tab[n] = qp;
	ctx->qp_count++;
	ctx->qpn_next = n + 1;
	*qpn = core_qpn_base(ctx->core) | n;
	return 0;
}

void sr_free_qpn(struct sr_context *ctx, uint32_t qpn)
{
	uint32_t n = qpn & 0xFFFF;
	if (n < ctx->qp_tab_len && ctx->qp_tab[n]) {
		ctx->qp_tab[n] = NULL;
		ctx->qp_count--;
	}
}

struct sr_qp *sr_qp_by_num(struct sr_context *ctx, uint32_t qpn)
{
	uint32_t n = qpn & 0xFFFF;
	if ((qpn & ~0xFFFFu) != core_qpn_base(ctx->core) || n >= ctx->qp_tab_len)
		return NULL;
	return ctx->qp_tab[n];
}

int sr_qp_check_init(struct ibv_pd *pd, struct ibv_qp_init_attr *init, uint32_t max_sge)
{
	/* RoCE: RC, UC and UD, as rxe, and the XRC initiator (XRC_SEND; the target, XRC_RECV, is
	 * checked by sr_create_qp). iWARP is connected only (siw: RC only). */
	bool xrc = init->qp_type == IBV_QPT_XRC_SEND;
	if (init->qp_type != IBV_QPT_RC &&
	    (sr_ctx(pd->context)->dev->iwarp ||
	     (init->qp_type != IBV_QPT_UC && init->qp_type != IBV_QPT_UD && !xrc)))
		return EOPNOTSUPP;
	struct ibv_qp_cap *cap = &init->cap;
	if (cap->max_send_wr > SR_MAX_QP_WR || cap->max_send_sge > max_sge ||
	    cap->max_inline_data > ENG_MAX_INLINE ||
	    (!init->srq && !xrc &&
	     (cap->max_recv_wr > SR_MAX_QP_WR || cap->max_recv_sge > max_sge)))
		return EINVAL;
	/* XRC_SEND has no receive side: recv_cq and srq are ignored (as by the kernel). */
	if (init->send_cq->context != pd->context ||
	    (!xrc && init->recv_cq->context != pd->context) ||
	    (!xrc && init->srq && init->srq->context != pd->context))
		return EINVAL;
	/* Report what the QP really has (verbs: at least what was asked). */
	cap->max_send_wr = cap->max_send_wr ? cap->max_send_wr : 1;
	cap->max_send_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	cap->max_inline_data = ENG_MAX_INLINE;
	if (init->srq || xrc) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	} else {
		cap->max_recv_wr = cap->max_recv_wr ? cap->max_recv_wr : 1;
		cap->max_recv_sge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	}
	return 0;
}

struct eng_qp_init sr_qp_eng_init(struct ibv_pd *pd, const struct ibv_qp_init_attr *init,
				  uint32_t qpn, struct sr_qp *qp)
{
	bool xrc_send = init->qp_type == IBV_QPT_XRC_SEND;
	struct eng_qp_init ei = {
	    .type = init->qp_type,
	    .qpn = qpn,
	    .pd = pd ? pd->handle : 0,
	    .max_send_wr = init->cap.max_send_wr,
	    .max_send_sge = init->cap.max_send_sge,
	    .max_inline = init->cap.max_inline_data,
	    .max_recv_wr = init->cap.max_recv_wr,
	    .max_recv_sge = init->cap.max_recv_sge,
	    .srq = init->srq && !xrc_send ? &((struct sr_srq *)init->srq)->erq : NULL,
	    .send_cq = init->send_cq ? &((struct sr_cq *)init->send_cq)->ecq : NULL,
	    .recv_cq = init->recv_cq && !xrc_send ? &((struct sr_cq *)init->recv_cq)->ecq : NULL,
	    .sq_sig_all = init->sq_sig_all != 0,
	    .user = qp,
	};
	return ei;
}

void sr_qp_publish(struct sr_qp *qp, struct sr_context *ctx, struct ibv_pd *pd,
		   const struct ibv_qp_init_attr *init, uint32_t qpn, enum ibv_mtu mtu)
{
	qp->ctx = ctx;
	qp->cap = init->cap;
	qp->sq_sig_all = init->sq_sig_all != 0;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = mtu;
	qp->attr.cap = init->cap;
	qp->ibqp.context = &ctx->vctx.context;
	qp->ibqp.qp_context = init->qp_context;
	qp->ibqp.pd = pd;
	qp->ibqp.send_cq = init->send_cq;
	qp->ibqp.recv_cq = init->recv_cq;
	qp->ibqp.srq = init->srq;
	qp->ibqp.handle = qpn;
	qp->ibqp.qp_num = qpn;
	qp->ibqp.state = IBV_QPS_RESET;
	qp->ibqp.qp_type = init->qp_type;
	pthread_mutex_init(&qp->ibqp.mutex, NULL);
	pthread_cond_init(&qp->ibqp.cond, NULL);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	if (!pd || !init) {
		errno = EINVAL;
		return NULL;
	}
	return sr_create_qp(pd->context, pd, init, NULL);
}

struct ibv_qp *sr_create_qp(struct ibv_context *context, struct ibv_pd *pd,
			    struct ibv_qp_init_attr *init, struct sr_xrcd *xrcd)
{
	int ret = EINVAL;
	struct sr_context *ctx = sr_ctx(context);
	bool xrc_send = init->qp_type == IBV_QPT_XRC_SEND;
	bool xrc_recv = init->qp_type == IBV_QPT_XRC_RECV;
	if ((xrc_send || xrc_recv) && ctx->dev->iwarp) {
		ret = EOPNOTSUPP; /* no XRC on iWARP (siw has none) */
		goto fail;
	}
	if (xrc_recv) {
		/* The target half: no PD, CQs, SRQ or queues of its own (ibv_create_qp_ex(3)). */
		if (!xrcd || xrcd->ctx != ctx)
			goto fail;
		pd = NULL;
		memset(&init->cap, 0, sizeof(init->cap));
	} else {
		if (!pd || pd->context != context || !init->send_cq ||
		    (!xrc_send && !init->recv_cq))
			goto fail;
		if (ctx->dev->iwarp)
			return sr_iw_create_qp(pd, init);
		ret = sr_qp_check_init(pd, init, ENG_MAX_SGE);
		if (ret)
			goto fail;
	}
	struct sr_qp *qp = calloc(1, sizeof(*qp));
	if (!qp) {
		ret = ENOMEM;
		goto fail;
	}

	core_lock(ctx->core);
	char err[256];
	int r = core_start(ctx->core, err, sizeof(err));
	if (r < 0) {
		core_unlock(ctx->core);
		fprintf(stderr, "softrdma: %s: %s\n", ctx->dev->ibdev.name, err);
		free(qp);
		ret = -r;
		goto fail;
	}
	uint32_t qpn;
	r = sr_alloc_qpn(ctx, qp, &qpn);
	if (r < 0) {
		core_unlock(ctx->core);
		free(qp);
		ret = -r;
		goto fail;
	}
	struct eng_qp_init ei = sr_qp_eng_init(pd, init, qpn, qp);
	if (xrc_recv) {
		ei.xrcd = xrcd->handle;
		ei.send_cq = ei.recv_cq = NULL;
		ei.srq = NULL;
	}
	r = eng_qp_create(&ei, &ctx->env, &qp->eqp);
	if (r == 0) {
		r = core_qp_attach(ctx->core, qp->eqp, qpn);
		if (r == 0 && init->qp_type == IBV_QPT_UD) {
			/* Its own UDP source port, per packet destinations (core.h). */
			r = core_qp_set_ud(ctx->core, qpn);
			if (r < 0)
				core_qp_detach(ctx->core, qpn);
		}
		if (r < 0)
			eng_qp_destroy(qp->eqp);
	}
	if (r < 0) {
		sr_free_qpn(ctx, qpn);
		core_unlock(ctx->core);
		free(qp);
		ret = -r;
		goto fail;
	}
	core_unlock(ctx->core);
	/* rxe: a QP starts at 256 until INIT -> RTR sets its path MTU. A UD QP has no path: its
	 * messages are limited by the port's MTU, which it reports. */
	sr_qp_publish(qp, ctx, pd, init, qpn,
		      init->qp_type == IBV_QPT_UD ? ctx->dev->max_mtu : IBV_MTU_256);
	if (xrc_send || xrc_recv) {
		/* What the QP really has: XRC_SEND no receive side, XRC_RECV nothing but its
		 * domain. */
		qp->ibqp.recv_cq = NULL;
		qp->ibqp.srq = NULL;
		if (xrc_recv) {
			qp->ibqp.send_cq = NULL;
			qp->xrcd = xrcd;
			core_lock(ctx->core);
			xrcd->users++;
			core_unlock(ctx->core);
		}
	}
	{
		/* The engine's attributes from the start (a UD QP's MTU is the port's). */
		struct eng_qp_attr ea = to_eng_attr(qp, &qp->attr);
		core_lock(ctx->core);
		eng_qp_set_attr(qp->eqp, &ea);
		core_unlock(ctx->core);
	}
	return &qp->ibqp;
fail:
	errno = ret;
	return NULL;
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct sr_context *ctx = qp->ctx;
	if (qp->iqp)
		return sr_iw_destroy_qp(qp);
	core_lock(ctx->core);
	if (getenv("SOFTRDMA_STATS"))
		core_dump_qp_counters(ctx->core, qp->eqp, stderr);
	core_qp_detach(ctx->core, ibqp->qp_num);
	eng_qp_destroy(qp->eqp);
	obj_mw_qp_gone(&ctx->mws, ibqp->qp_num); /* its type 2 windows: no QP reaches them */
	if (qp->xrcd)
		sr_xrc_qp_release(qp);
	sr_free_qpn(ctx, ibqp->qp_num);
	core_unlock(ctx->core);
	sr_qp_ex_fini(qp);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(qp);
	return 0;
}

/* An address vector (QP path or address handle) on RoCE: the GRH carries the addresses, so it
 * is required; the source GID exists; both GIDs are of one family. 0 or a positive errno. */
static int check_av(const struct sr_device *dev, const struct ibv_ah_attr *ah)
{
	if (!ah->is_global || ah->grh.sgid_index >= dev->ngid || ah->port_num > 1)
		return EINVAL;
	/* Both IPv4 or both IPv6. An IPv6 QP sends from the device's first routable IPv6
	 * address (core_config.local_addr6); link-local GIDs need a scope id, which a GID does
	 * not carry: not supported. */
	const uint8_t *sg = dev->gid[ah->grh.sgid_index];
	bool v4 = sr_gid_is_v4(sg);
	if (v4 != sr_gid_is_v4(ah->grh.dgid.raw))
		return EINVAL;
	if (!v4 && sg[0] == 0xfe && (sg[1] & 0xc0) == 0x80)
		return EAFNOSUPPORT;
	return 0;
}

/* The core path of an address vector (checked by check_av); sport is the caller's. */
static struct core_path av_path(const struct sr_device *dev, const struct ibv_ah_attr *ah,
				uint16_t sport)
{
	const struct ibv_global_route *grh = &ah->grh;
	struct core_path path = {
	    .ipv6 = !sr_gid_is_v4(grh->dgid.raw),
	    .sport = sport,
	    .tos = grh->traffic_class,
	    /* TTL 0 would be dropped by the first hop; rxe passes hop_limit through, and every
	     * tool sets it (rc_pingpong 1, perftest 255). */
	    .ttl = grh->hop_limit ? grh->hop_limit : 64,
	};
	memcpy(path.src, dev->gid[grh->sgid_index], 16);
	memcpy(path.dst, grh->dgid.raw, 16);
	return path;
}

int sr_check_qp_attr(struct sr_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct sr_device *dev = qp->ctx->dev;
	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		return EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > dev->max_mtu))
		return EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > ENG_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > ENG_MAX_RD_ATOMIC)
		return EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && (a->dest_qp_num > PSN_MASK || a->dest_qp_num < 2))
		return EINVAL;
	if ((mask & IBV_QP_CAP))
		return EINVAL; /* resizing a QP's queues is not supported */
	if (mask & IBV_QP_AV)
		return check_av(dev, &a->ah_attr);
	return 0;
}

static struct eng_qp_attr to_eng_attr(const struct sr_qp *qp, const struct ibv_qp_attr *a)
{
	/* A UD message is one packet of at most the port's MTU (spec 4.1, 10). */
	enum ibv_mtu mtu = qp->ibqp.qp_type == IBV_QPT_UD ? qp->ctx->dev->max_mtu : a->path_mtu;
	struct eng_qp_attr e = {
	    .dest_qpn = a->dest_qp_num,
	    .sq_psn = a->sq_psn & PSN_MASK,
	    .rq_psn = a->rq_psn & PSN_MASK,
	    .pmtu = 128u << mtu,
	    .qkey = a->qkey,
	    .access = a->qp_access_flags,
	    .timeout = a->timeout,
	    .retry_cnt = a->retry_cnt,
	    .rnr_retry = a->rnr_retry,
	    .min_rnr_timer = a->min_rnr_timer,
	    .max_rd_atomic = a->max_rd_atomic,
	    .max_dest_rd_atomic = a->max_dest_rd_atomic,
	    .pkey = ROCE_DEFAULT_PKEY,
	};
	return e;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct sr_context *ctx = qp->ctx;
	if (!attr)
		return EINVAL;
	if (qp->iqp)
		return sr_iw_modify_qp(qp, attr, mask);
	core_lock(ctx->core);
	enum ibv_qp_state cur = eng_qp_state(qp->eqp);
	enum ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	int ret = 0;
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur)
		ret = EINVAL;
	if (!ret && obj_qp_check_modify(ibqp->qp_type, cur, next, mask) < 0)
		ret = EINVAL;
	if (!ret)
		ret = sr_check_qp_attr(qp, attr, mask);
	if (ret)
		goto unlock;

	/* The new attributes are kept only if the engine takes them. */
	struct ibv_qp_attr na = qp->attr, *s = &na;
	if (mask & IBV_QP_ACCESS_FLAGS)
		s->qp_access_flags = attr->qp_access_flags;
	if (mask & IBV_QP_PORT)
		s->port_num = attr->port_num;
	if (mask & IBV_QP_PATH_MTU)
		s->path_mtu = attr->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		s->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		s->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		s->rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_RQ_PSN)
		s->rq_psn = attr->rq_psn & PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		s->sq_psn = attr->sq_psn & PSN_MASK;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		s->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		s->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_DEST_QPN)
		s->dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		s->en_sqd_async_notify = attr->en_sqd_async_notify;
	if (mask & IBV_QP_QKEY)
		s->qkey = attr->qkey;
	if (mask & IBV_QP_AV) {
		/* RC and UC (the state machine gives UD no AV): rxe's source port for the QP
		 * pair (spec 1.3). */
		s->ah_attr = attr->ah_attr;
		struct core_path path = av_path(
		    ctx->dev, &attr->ah_attr,
		    roce_udp_sport(attr->ah_attr.grh.flow_label, ibqp->qp_num, s->dest_qp_num));
		int r = core_qp_set_path(ctx->core, ibqp->qp_num, &path);
		if (r < 0) {
			ret = -r;
			goto unlock;
		}
	}
	struct eng_qp_attr ea = to_eng_attr(qp, s);
	int r = eng_qp_set_attr(qp->eqp, &ea);
	if (r < 0) {
		ret = -r;
		goto unlock;
	}
	qp->attr = na;
	s = &qp->attr;
	if (next != cur || (mask & IBV_QP_STATE)) {
		eng_qp_set_state(qp->eqp, next, core_now_ns());
		s->qp_state = next;
		ibqp->state = next;
	}
unlock:
	core_unlock(ctx->core);
	return ret;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	/* Everything is cheap to report: the mask only decides the copy below. */
	core_lock(qp->ctx->core);
	*attr = qp->attr;
	attr->qp_state = qp->iqp ? sr_iw_qp_state(qp) : eng_qp_state(qp->eqp);
	attr->cur_qp_state = attr->qp_state;
	attr->cap = qp->cap;
	if (mask & IBV_QP_STATE)
		ibqp->state = attr->qp_state; /* libibverbs' ibv_query_qp keeps its copy so */
	core_unlock(qp->ctx->core);
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ibqp->qp_context;
		init->send_cq = ibqp->send_cq;
		init->recv_cq = ibqp->recv_cq;
		init->srq = ibqp->srq;
		init->cap = qp->cap;
		init->qp_type = ibqp->qp_type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

static int sr_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct core_ctx *core = qp->ctx->core;
	/* An application that posts is active too, and the send itself may take a while (on
	 * loopback it runs the peer's receive). */
	core_app_enter(core, false);
	core_lock(core);
	int ret = eng_qp_post_send(qp->eqp, wr, (const struct ibv_send_wr **)bad, core_now_ns());
	/* Send on the caller's thread: no hand-off on the latency path; right away unless the
	 * post joins a pipeline the next poll sends with (core_posted). */
	core_posted(core, qp->eqp);
	core_unlock(core);
	core_app_leave(core, false);
	return -ret;
}

/* Either engine's QP: receives are posted the same way (qp_base.c). */
static int sr_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct core_ctx *core = qp->ctx->core;
	core_lock(core);
	int ret = eng_base_post_recv(sr_qp_base(qp), wr, (const struct ibv_recv_wr **)bad);
	core_unlock(core);
	return -ret;
}

/* ---- address handles (UD) ---- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	if (!pd || !attr) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_context *ctx = sr_ctx(pd->context);
	if (ctx->dev->iwarp) {
		errno = EOPNOTSUPP; /* no datagrams on iWARP */
		return NULL;
	}
	/* The same rules as a connected QP's address vector (GRH required on RoCE). */
	int ret = check_av(ctx->dev, attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	struct sr_ah *ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	struct core_path path = av_path(ctx->dev, attr, 0);
	uint32_t handle = 0;
	core_lock(ctx->core);
	int r = core_ah_create(ctx->core, &path, &handle);
	core_unlock(ctx->core);
	if (r < 0) {
		free(ah);
		errno = -r;
		return NULL;
	}
	ah->ctx = ctx;
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	ah->ibah.handle = handle;
	return &ah->ibah;
}

int ibv_destroy_ah(struct ibv_ah *ibah)
{
	if (!ibah)
		return EINVAL;
	struct sr_ah *ah = (struct sr_ah *)ibah;
	/* Sends posted with it and not yet out are dropped (tx_bad_ah), never misdirected. */
	core_lock(ah->ctx->core);
	core_ah_destroy(ah->ctx->core, ibah->handle);
	core_unlock(ah->ctx->core);
	free(ah);
	return 0;
}

static int find_gid(const struct sr_device *dev, const uint8_t gid[16])
{
	for (int i = 0; i < dev->ngid; i++)
		if (!memcmp(dev->gid[i], gid, 16))
			return i;
	return -1;
}

/* The GRH area holds an IPv4 header (RoCEv2 over IPv4) when its last 20 bytes are one with a
 * good checksum, as rdma-core decides (get_grh_header_version); else IPv6 if it says so. */
static int grh_version(const uint8_t *grh)
{
	const uint8_t *h = grh + 20;
	uint32_t sum = 0;
	if (h[0] == 0x45) {
		for (int i = 0; i < 20; i += 2)
			sum += (uint32_t)h[i] << 8 | h[i + 1];
		while (sum >> 16)
			sum = (sum & 0xFFFF) + (sum >> 16);
		if (sum == 0xFFFF)
			return 4;
	}
	return grh[0] >> 4 == 6 ? 6 : 0;
}

int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
			struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	if (!context || !wc || !ah_attr || ((wc->wc_flags & IBV_WC_GRH) && !grh)) {
		errno = EINVAL;
		return -1;
	}
	const struct sr_device *dev = sr_ctx(context)->dev;
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	/* The reply goes back where the datagram came from, from the address it came to. */
	const uint8_t *g = (const uint8_t *)grh;
	uint8_t sgid[16] = {0}, dgid[16] = {0};
	ah_attr->is_global = 1;
	switch (grh_version(g)) {
	case 4:
		sgid[10] = sgid[11] = dgid[10] = dgid[11] = 0xff;
		memcpy(sgid + 12, g + 20 + 16, 4); /* our address: the IP destination */
		memcpy(dgid + 12, g + 20 + 12, 4);
		if ((sgid[12] & 0xF0) == 0xE0) { /* multicast: no GID of ours */
			errno = EINVAL;
			return -1;
		}
		ah_attr->grh.hop_limit = g[20 + 8];
		ah_attr->grh.traffic_class = g[20 + 1];
		break;
	case 6:
		memcpy(sgid, g + 24, 16);
		memcpy(dgid, g + 8, 16);
		if (sgid[0] == 0xFF) {
			errno = EINVAL;
			return -1;
		}
		ah_attr->grh.flow_label =
		    ((uint32_t)(g[1] & 0x0F) << 16) | ((uint32_t)g[2] << 8) | g[3];
		ah_attr->grh.hop_limit = g[7];
		ah_attr->grh.traffic_class = (uint8_t)(g[0] << 4 | g[1] >> 4);
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	int idx = find_gid(dev, sgid);
	if (idx < 0) {
		errno = ENOENT;
		return -1;
	}
	ah_attr->grh.sgid_index = (uint8_t)idx;
	memcpy(ah_attr->grh.dgid.raw, dgid, 16);
	return 0;
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh,
				     uint8_t port_num)
{
	struct ibv_ah_attr attr;
	if (!pd) {
		errno = EINVAL;
		return NULL;
	}
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return ibv_create_ah(pd, &attr);
}

/* ---- asynchronous events ---- */

void sr_async_push(struct sr_context *ctx, const struct ibv_async_event *ev)
{
	if (ctx->async_tail - ctx->async_head >= SR_ASYNC_RING)
		return; /* the application is not reading them: drop the newest */
	ctx->async[ctx->async_tail++ % SR_ASYNC_RING] = *ev;
	char b = 1;
	if (write(ctx->async_wfd, &b, 1) != 1) {
		/* pipe full: the event is still queued and will be read with the next byte */
	}
}

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct sr_context *ctx = sr_ctx(context);
	char b;
	if (read(context->async_fd, &b, 1) != 1)
		return -1;
	core_lock(ctx->core);
	int ret = -1;
	if (ctx->async_head != ctx->async_tail) {
		*event = ctx->async[ctx->async_head++ % SR_ASYNC_RING];
		ret = 0;
	} else {
		errno = EAGAIN;
	}
	core_unlock(ctx->core);
	return ret;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}

/* eng_env callbacks */

static void *env_mem_resolve(void *c, uint32_t pd, uint32_t qpn, uint32_t key, bool remote,
			     uint64_t va, uint64_t len, unsigned access, int *err)
{
	struct sr_context *ctx = c;
	/* An R_Key may name a window (never an L_Key: windows have none). */
	if (remote && obj_key_is_mw(key))
		return obj_mw_resolve(&ctx->mws, pd, qpn, key, va, len, access, err);
	return obj_mr_resolve(&ctx->mrs, pd, key, remote, va, len, access, err);
}

static int env_mem_invalidate(void *c, uint32_t pd, uint32_t qpn, uint32_t rkey, bool remote)
{
	struct sr_context *ctx = c;
	if (obj_key_is_mw(rkey))
		return obj_mw_invalidate(&ctx->mws, pd, remote ? qpn : 0, rkey);
	/* A region: rxe invalidates only fast-registration regions, which softrdma does not
	 * have; LOCAL_INV of a registered one fails so (IBV_WC_LOC_QP_OP_ERR), and on RoCE so
	 * does a SEND with Invalidate naming one (the receive fails, IBV_WC_REM_INV_REQ_ERR):
	 * one peer does not take remote access away from every QP that uses the region. siw
	 * invalidates any region of the QP's PD; iWARP contexts do as siw. */
	struct obj_mr *mr = obj_mr_lookup(&ctx->mrs, rkey);
	if (!remote || !ctx->dev->iwarp || !mr || mr->pd != pd || mr->nmw)
		return -EINVAL;
	/* A SEND with Invalidate of a region's key: the key stops granting remote access. */
	mr->access &= ~(unsigned)(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				  IBV_ACCESS_REMOTE_ATOMIC);
	return 0;
}

static int env_mw_bind(void *c, uint32_t pd, uint32_t qpn, const struct eng_mw_bind *b)
{
	struct sr_context *ctx = c;
	struct obj_mw_bind ob = {.mw_rkey = b->mw_rkey,
				 .new_rkey = b->new_rkey,
				 .addr = b->addr,
				 .length = b->length,
				 .access = b->access};
	struct obj_mr *mr = b->length ? obj_mr_lookup(&ctx->mrs, b->mr_lkey) : NULL;
	if (b->length && !mr)
		return -EINVAL;
	return obj_mw_bind(&ctx->mws, mr, pd, qpn, &ob);
}

static void env_wake(void *c, struct eng_qp_base *qp)
{
	struct sr_context *ctx = c;
	core_qp_wake(ctx->core, eng_qp_of(qp));
}

static void env_deadline(void *c, struct eng_qp_base *qp)
{
	struct sr_context *ctx = c;
	core_qp_deadline(ctx->core, eng_qp_of(qp));
}

/* Either engine's QP. */
static void env_event(void *c, struct eng_qp_base *b, enum ibv_event_type type)
{
	struct sr_context *ctx = c;
	struct sr_qp *qp = b->init.user;
	struct ibv_async_event ev = {.element.qp = &qp->ibqp, .event_type = type};
	sr_async_push(ctx, &ev);
}

void sr_fill_ops(struct sr_context *ctx)
{
	struct ibv_context_ops *ops = &ctx->vctx.context.ops;
	ops->poll_cq = sr_poll_cq;
	ops->req_notify_cq = sr_req_notify_cq;
	ops->post_send = sr_post_send;
	ops->post_recv = sr_post_recv;
	ops->post_srq_recv = sr_post_srq_recv;
	if (!ctx->dev->iwarp) {
		ops->alloc_mw = sr_alloc_mw;
		ops->bind_mw = sr_bind_mw;
		ops->dealloc_mw = sr_dealloc_mw;
	}
	ctx->env.ctx = ctx;
	ctx->env.mem_resolve = env_mem_resolve;
	ctx->env.mem_invalidate = env_mem_invalidate;
	ctx->env.mw_bind = env_mw_bind;
	ctx->env.wake = env_wake;
	ctx->env.deadline = env_deadline;
	ctx->env.event = env_event;
	ctx->env.xsrq_lookup = sr_xsrq_lookup;
	ctx->vctx.create_cq_ex = sr_create_cq_ex;
	sr_xrc_fill_ops(ctx);
}

/* ---- strings ---- */

const char *ibv_wc_status_str(enum ibv_wc_status status)
{
	static const char *const names[] = {
	    [IBV_WC_SUCCESS] = "success",
	    [IBV_WC_LOC_LEN_ERR] = "local length error",
	    [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
	    [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
	    [IBV_WC_LOC_PROT_ERR] = "local protection error",
	    [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
	    [IBV_WC_MW_BIND_ERR] = "memory management operation error",
	    [IBV_WC_BAD_RESP_ERR] = "bad response error",
	    [IBV_WC_LOC_ACCESS_ERR] = "local access error",
	    [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
	    [IBV_WC_REM_ACCESS_ERR] = "remote access error",
	    [IBV_WC_REM_OP_ERR] = "remote operation error",
	    [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
	    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	    [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
	    [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
	    [IBV_WC_REM_ABORT_ERR] = "aborted error",
	    [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
	    [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
	    [IBV_WC_FATAL_ERR] = "fatal error",
	    [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
	    [IBV_WC_GENERAL_ERR] = "general error",
	};
	if ((unsigned)status < sizeof(names) / sizeof(names[0]) && names[status])
		return names[status];
	return "unknown";
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const names[] = {
	    [IBV_EVENT_CQ_ERR] = "CQ error",
	    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
	    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
	    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
	    [IBV_EVENT_COMM_EST] = "communication established",
	    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
	    [IBV_EVENT_PATH_MIG] = "path migrated",
	    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
	    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
	    [IBV_EVENT_PORT_ACTIVE] = "port active",
	    [IBV_EVENT_PORT_ERR] = "port error",
	    [IBV_EVENT_LID_CHANGE] = "LID change",
	    [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
	    [IBV_EVENT_SM_CHANGE] = "SM change",
	    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
	    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
	    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
	    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
	    [IBV_EVENT_GID_CHANGE] = "GID table change",
	    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	if ((unsigned)event < sizeof(names) / sizeof(names[0]) && names[event])
		return names[event];
	return "unknown";
}

const char *ibv_port_state_str(enum ibv_port_state state)
{
	static const char *const names[] = {"PORT_NOP",	  "PORT_DOWN",	 "PORT_INIT",
					    "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
	if ((unsigned)state < sizeof(names) / sizeof(names[0]))
		return names[state];
	return "invalid state";
}

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	switch (node_type) {
	case IBV_NODE_CA:
		return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH:
		return "InfiniBand switch";
	case IBV_NODE_ROUTER:
		return "InfiniBand router";
	case IBV_NODE_RNIC:
		return "iWARP NIC";
	default:
		return "unknown";
	}
}
