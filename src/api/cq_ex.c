/* Extended CQs (ibv_create_cq_ex(3)): the same CQ as ibv_create_cq's, polled one completion
 * at a time through ibv_start_poll / ibv_next_poll / ibv_end_poll and read field by field
 * with the ibv_wc_read_* calls. The fields offered are rxe's (IBV_WC_STANDARD_FLAGS: byte
 * length, immediate, QP number, source QP, SLID, SL, DLID path bits), all of which an ibv_wc
 * already carries; no timestamps, no CQ flags (rxe refuses them too: EOPNOTSUPP), no parent
 * domain. Both transports: polling goes through the context's poll_cq, so iWARP contexts move
 * their bytes as in ibv_poll_cq. */
#define _GNU_SOURCE
#include "api/api.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

_Static_assert(offsetof(struct ibv_cq, async_events_completed) ==
		   offsetof(struct ibv_cq_ex, async_events_completed),
	       "ibv_cq_ex starts as ibv_cq");

static struct sr_cq *cq_of(struct ibv_cq_ex *ex)
{
	return (struct sr_cq *)(void *)ex;
}

/* One completion into cq->cur: 0, ENOENT (none), or EINVAL (the CQ overflowed: poll_cq's
 * -1). */
static int poll_one(struct sr_cq *cq)
{
	int n = cq->ibcq.context->ops.poll_cq(&cq->ibcq, 1, &cq->cur);
	if (n < 0)
		return EINVAL;
	if (n == 0)
		return ENOENT;
	cq->ibcq_ex.status = cq->cur.status;
	cq->ibcq_ex.wr_id = cq->cur.wr_id;
	return 0;
}

static int start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
	struct sr_cq *cq = cq_of(ex);
	if (attr && attr->comp_mask)
		return EINVAL;
	if (pthread_mutex_lock(&cq->poll_lock) != 0)
		return EINVAL; /* this thread is between start_poll and end_poll already */
	int ret = poll_one(cq);
	/* ibv_start_poll(3): on failure there is no end_poll, so nothing stays held. */
	if (ret)
		pthread_mutex_unlock(&cq->poll_lock);
	return ret;
}

static int next_poll(struct ibv_cq_ex *ex)
{
	return poll_one(cq_of(ex));
}

static void end_poll(struct ibv_cq_ex *ex)
{
	/* An end_poll after a failed start_poll (pyverbs' poll_cq_ex does it) finds the lock not
	 * held by this thread: an error-checking mutex refuses that, and so nothing happens. */
	pthread_mutex_unlock(&cq_of(ex)->poll_lock);
}

static enum ibv_wc_opcode read_opcode(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.opcode;
}

static uint32_t read_vendor_err(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.vendor_err;
}

static uint32_t read_byte_len(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.byte_len;
}

static __be32 read_imm_data(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.imm_data;
}

static uint32_t read_qp_num(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.qp_num;
}

static uint32_t read_src_qp(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.src_qp;
}

static unsigned int read_wc_flags(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.wc_flags;
}

static uint32_t read_slid(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.slid;
}

static uint8_t read_sl(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.sl;
}

static uint8_t read_dlid_path_bits(struct ibv_cq_ex *ex)
{
	return cq_of(ex)->cur.dlid_path_bits;
}

struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
	if (!context || !attr ||
	    (attr->comp_mask &
	     ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))) {
		errno = EINVAL;
		return NULL;
	}
	/* What softrdma does not have is EOPNOTSUPP, as from rxe: fields beyond the standard
	 * ones, CQ creation flags, parent domains. */
	if ((attr->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && attr->flags) ||
	    (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT32_MAX || attr->comp_vector > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	struct sr_cq *cq = sr_cq_new(context, (int)attr->cqe, attr->cq_context, attr->channel,
				     (int)attr->comp_vector);
	if (!cq)
		return NULL;
	struct ibv_cq_ex *ex = &cq->ibcq_ex;
	cq->ex = true;
	ex->start_poll = start_poll;
	ex->next_poll = next_poll;
	ex->end_poll = end_poll;
	ex->read_opcode = read_opcode;
	ex->read_vendor_err = read_vendor_err;
	ex->read_wc_flags = read_wc_flags;
	/* The others only for the fields asked for, as providers do. */
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		ex->read_byte_len = read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		ex->read_imm_data = read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		ex->read_qp_num = read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		ex->read_src_qp = read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		ex->read_slid = read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		ex->read_sl = read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		ex->read_dlid_path_bits = read_dlid_path_bits;
	return ex;
}
