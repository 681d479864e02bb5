/* Work-request helpers shared by the RoCE engine (qp.c, req.c, resp.c, comp.c) and the iWARP
 * engine (iw_*.c): checking and copying an ibv_send_wr into a send WQE, and resolving a
 * scatter/gather list through env->mem_resolve. Nothing here knows a wire protocol. */

#include "engine/eng_int.h"

int eng_wr_op(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return ENG_OP_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return ENG_OP_SEND_IMM;
	case IBV_WR_SEND_WITH_INV:
		return ENG_OP_SEND_INV;
	case IBV_WR_RDMA_WRITE:
		return ENG_OP_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return ENG_OP_WRITE_IMM;
	case IBV_WR_RDMA_READ:
		return ENG_OP_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return ENG_OP_CMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return ENG_OP_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return ENG_OP_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return ENG_OP_LOCAL_INV;
	default:
		return -EINVAL;
	}
}

int eng_swqe_check(const struct ibv_send_wr *wr, uint32_t max_sge, uint32_t max_inline,
		   uint64_t *len)
{
	int op = eng_wr_op(wr->opcode);
	uint64_t total = 0;

	if (op < 0 || wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
		return -EINVAL;
	if (op == ENG_OP_BIND_MW) {
		/* A window and no data (rxe validate_send_wr: no SGE, no immediate). */
		if (!wr->bind_mw.mw || wr->num_sge || wr->imm_data)
			return -EINVAL;
		*len = 0;
		return op;
	}
	if (op == ENG_OP_LOCAL_INV) {
		*len = 0; /* moves no data: SGEs are ignored */
		return op;
	}
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > ENG_MAX_MSG_SIZE)
		return -EINVAL;
	if ((wr->send_flags & IBV_SEND_INLINE) && eng_ops[op].payload && total > max_inline)
		return -EINVAL;
	/* Atomics move exactly 8 bytes into one local buffer (IBA 9.4.5). The remote VA's
	 * alignment is the responder's check (it NAKs Invalid Request). */
	if ((op == ENG_OP_CMP_SWAP || op == ENG_OP_FETCH_ADD) && total != 8)
		return -EINVAL;
	*len = total;
	return op;
}

void eng_swqe_fill(struct eng_swqe *w, const struct ibv_send_wr *wr, int op, uint32_t len,
		   bool sig_all)
{
	w->wr_id = wr->wr_id;
	w->op = (uint8_t)op;
	w->state = ENG_SWQE_POSTED;
	w->signaled = sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->fence = wr->send_flags & IBV_SEND_FENCE;
	w->solicited = wr->send_flags & IBV_SEND_SOLICITED;
	w->inl = (wr->send_flags & IBV_SEND_INLINE) && eng_ops[op].payload;
	w->length = len;
	w->read_done = 0;
	w->status = IBV_WC_SUCCESS;
	w->num_sge = eng_ops[op].local ? 0 : (uint32_t)wr->num_sge;
	for (uint32_t i = 0; i < w->num_sge; i++) {
		w->sge[i].addr = wr->sg_list[i].addr;
		w->sge[i].length = wr->sg_list[i].length;
		w->sge[i].lkey = wr->sg_list[i].lkey;
	}
	if (w->inl) {
		/* Inline: the bytes are read now, from the caller's addresses, without a key
		 * (ibv_post_send(3)); the WR's buffers are free again on return. */
		uint32_t off = 0;

		for (int i = 0; i < wr->num_sge; i++) {
			/* An empty entry may have no address at all (UCX posts {0, 0}): never
			 * handed to memcpy. */
			if (!wr->sg_list[i].length)
				continue;
			memcpy(w->inline_data + off, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			off += wr->sg_list[i].length;
		}
	}
	switch (op) {
	case ENG_OP_CMP_SWAP:
	case ENG_OP_FETCH_ADD:
		w->remote_addr = wr->wr.atomic.remote_addr;
		w->rkey = wr->wr.atomic.rkey;
		w->compare_add = wr->wr.atomic.compare_add;
		w->swap = wr->wr.atomic.swap;
		break;
	default:
		w->remote_addr = wr->wr.rdma.remote_addr;
		w->rkey = wr->wr.rdma.rkey;
		break;
	}
	if (op == ENG_OP_SEND_INV || op == ENG_OP_LOCAL_INV)
		w->inv_rkey = wr->invalidate_rkey;
	else
		memcpy(w->imm, &wr->imm_data, 4);
	if (op == ENG_OP_BIND_MW) {
		/* The keys as they are now (rxe's provider copies them at post the same way): a
		 * later ibv_bind_mw or rebind does not change what this request binds. */
		const struct ibv_mw_bind_info *bi = &wr->bind_mw.bind_info;

		w->bind.mw_rkey = wr->bind_mw.mw->rkey;
		w->bind.new_rkey = wr->bind_mw.rkey;
		w->bind.mr_lkey = bi->mr ? bi->mr->lkey : 0;
		w->bind.addr = bi->addr;
		w->bind.length = bi->length;
		w->bind.access = (unsigned)bi->mw_access_flags;
	}
}

int eng_sge_resolve_env(const struct eng_env *env, uint32_t pd, const struct eng_sge *sge,
			uint32_t num_sge, uint32_t offset, uint32_t len, unsigned access,
			struct eng_iov *iov)
{
	uint32_t i = 0;
	int n = 0;

	/* The common case, one entry that holds the whole range: one lookup, no walk. */
	if (num_sge == 1 && len > 0 && offset < sge[0].length && len <= sge[0].length - offset) {
		int err = 0;
		void *p = env->mem_resolve(env->ctx, pd, 0, sge[0].lkey, false,
					   sge[0].addr + offset, len, access, &err);
		if (!p)
			return err ? err : -EFAULT;
		iov[0].ptr = p;
		iov[0].len = len;
		return 1;
	}
	while (i < num_sge && offset >= sge[i].length) {
		offset -= sge[i].length;
		i++;
	}
	while (len > 0) {
		uint32_t piece;
		void *p;
		int err = 0;

		if (i >= num_sge)
			return -EMSGSIZE;
		piece = sge[i].length - offset;
		if (piece > len)
			piece = len;
		if (piece == 0) {
			i++;
			continue;
		}
		/* Local keys: a window has no L_Key, so no QP binding to check (qpn 0). */
		p = env->mem_resolve(env->ctx, pd, 0, sge[i].lkey, false, sge[i].addr + offset,
				     piece, access, &err);
		if (!p)
			return err ? err : -EFAULT;
		iov[n].ptr = p;
		iov[n].len = piece;
		n++;
		len -= piece;
		offset = 0;
		i++;
	}
	return n;
}

int eng_sge_resolve(struct eng_qp *qp, const struct eng_sge *sge, uint32_t num_sge, uint32_t offset,
		    uint32_t len, unsigned access, struct eng_iov *iov)
{
	return eng_sge_resolve_env(&qp->base.env, qp->base.init.pd, sge, num_sge, offset, len,
				   access, iov);
}
