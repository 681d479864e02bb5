/* ECE (enhanced connection establishment) through rdma_cm: rdma_set_local_ece and
 * rdma_get_remote_ece as librdmacm 44 does them, and the agreement on selective repeat that
 * cm_roce.c makes with them (cm.h "ECE"; the values: wire/roce/ece.h).
 *
 * librdmacm keeps two values per id: the local ECE, which its REQ / REP carry, and the remote
 * one, which the peer's REQ / REP carried. rdma_set_local_ece sets the first, only before the
 * id has a QP (an application that exchanges ECE itself uses a self-managed QP: pyverbs'
 * external-QP tests); rdma_get_remote_ece reads the second, also only without a QP. Both fail
 * with EINVAL otherwise, as librdmacm's. A peer without ECE (rxe, siw, any kernel device but
 * mlx5's) sends zeros, which callers (librdmacm's ucma_process_conn_resp_ece) take as "no
 * ECE". */
#include "cm/cm.h"

#include <errno.h>
#include <string.h>

#include "wire/roce/ece.h"

int sr_rdma_set_local_ece(struct rdma_cm_id *rid, struct ibv_ece *ece)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	/* librdmacm: only before the id has a QP, with a vendor ID and no unknown fields. */
	if (rid->qp || !ece || !ece->vendor_id || ece->comp_mask) {
		cm_unlock();
		errno = EINVAL;
		return -1;
	}
	id->local_ece = (struct ibv_ece){.vendor_id = ece->vendor_id, .options = ece->options};
	id->local_ece_set = true;
	cm_unlock();
	return 0;
}
CM_ALIAS(set_local_ece);

int sr_rdma_get_remote_ece(struct rdma_cm_id *rid, struct ibv_ece *ece)
{
	struct cm_id *id = cm_id_lock(rid);
	if (!id)
		return -1;
	if (rid->qp || !ece) {
		cm_unlock();
		errno = EINVAL;
		return -1;
	}
	ece->vendor_id = id->remote_ece.vendor_id;
	ece->options = id->remote_ece.options;
	ece->comp_mask = 0;
	cm_unlock();
	return 0;
}
CM_ALIAS(get_remote_ece);

void cm_ece_offer(struct cm_id *id)
{
	struct ibv_ece e = {0};
	if (id->local_ece_set)
		e = id->local_ece;
	else if (id->id.qp && ibv_query_ece(id->id.qp, &e) != 0)
		memset(&e, 0, sizeof(e)); /* a QP without ECE (not RC): none, as rxe's */
	e.vendor_id &= 0xFFFFFF;	  /* 24 bits on the wire (the kernel's IBA_SET masks so) */
	e.comp_mask = 0;
	id->local_ece = e;
}

bool cm_ece_sr(const struct cm_id *id)
{
	return sr_ece_is_sr(id->local_ece.vendor_id, id->local_ece.options) &&
	       sr_ece_is_sr(id->remote_ece.vendor_id, id->remote_ece.options);
}

int cm_ece_apply(struct cm_id *id, bool sr)
{
	if (!id->id.qp)
		return 0; /* self-managed: the application's to set (rdma_get_remote_ece) */
	/* Off: softrdma's own vendor with no options (librdmacm's "other vendor / no ECE":
	 * ibv_set_ece with the local vendor ID and options 0). */
	struct ibv_ece e = {.vendor_id = SR_ECE_VENDOR_ID, .options = sr ? SR_ECE_OPTIONS : 0};
	int r = ibv_set_ece(id->id.qp, &e);
	return r == 0 || r == EOPNOTSUPP ? 0 : -r;
}
