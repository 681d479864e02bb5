/* ECE (enhanced connection establishment) through rdma_cm: rdma_set_local_ece and
 * rdma_get_remote_ece, as librdmacm 44 does them, which never fails them for a device without
 * ECE: they only keep and hand out the values its REQ / REP carry (vendor ID and options).
 * softrdma's devices have no ECE (ibv_query_ece and ibv_set_ece: EOPNOTSUPP, as rxe and siw)
 * and its CM does not carry the values, as a peer whose device has none: the local ECE is
 * taken and checked, the remote one reads as "none" (all zero), which callers (pyverbs'
 * rdmacm tests, librdmacm's own ucma_process_conn_resp_ece) treat as the peer not supporting
 * ECE. Before, both failed with ENOSYS. */
#include "cm/cm.h"

#include <errno.h>
#include <string.h>

int sr_rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	int e = cm_id_check(id); /* cm.h "The application's handles" */
	if (e < 0) {
		errno = -e;
		return -1;
	}
	/* librdmacm: only before the id has a QP, with a vendor ID and no unknown fields. */
	if (id->qp || !ece || !ece->vendor_id || ece->comp_mask) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}
CM_ALIAS(set_local_ece);

int sr_rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	int e = cm_id_check(id);
	if (e < 0) {
		errno = -e;
		return -1;
	}
	if (id->qp || !ece) {
		errno = EINVAL;
		return -1;
	}
	memset(ece, 0, sizeof(*ece));
	return 0;
}
CM_ALIAS(get_remote_ece);
