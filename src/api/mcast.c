/* UD multicast through the verbs API, as rxe and the kernel's verbs layer give it
 * (ib_attach_mcast / ib_detach_mcast, rxe_mcast.c): ibv_attach_mcast puts a UD QP of a RoCE
 * device in a multicast group, named by its GID: on RoCEv2 the group's IP address,
 * IPv4-mapped (::ffff:224.0.0.0/4) or IPv6 (ff00::/8). The context's socket for the group joins
 * it on the device's interface (io/mcast.h), and each datagram sent to the group with DestQP
 * 0xFFFFFF reaches every attached QP of every process on the host that joined, the sender's
 * own included (core.h "multicast"). The LID is ignored, as on every RoCE device (no LIDs on
 * Ethernet). Sending needs no attach: a UD work request whose address handle's dgid is the group
 * and remote_qpn 0xFFFFFF goes there.
 *
 * Errors (positive errno, as libibverbs returns them): EINVAL for a QP that is not UD, a GID that
 * is not multicast, a detach of a QP that is not attached; ENOMEM past rxe's limits
 * (ibv_query_device: max_mcast_grp 8192, max_mcast_qp_attach 56, max_total_mcast_qp_attach
 * 0x70000) or when the system refuses the group's socket (EMFILE, ENOBUFS, ... as they come);
 * EOPNOTSUPP on iWARP devices (siw has no multicast: no attach_mcast, max_mcast_grp 0).
 * Attaching an attached QP again succeeds and changes nothing. */
#include "api/api.h"

#include <errno.h>

/* Both calls: the checks of ib_attach_mcast / ib_detach_mcast (a UD QP of a RoCE device;
 * core_mcast_* checks the GID), then the change under the context's lock. */
static int mcast_change(struct ibv_qp *ibqp, const union ibv_gid *gid, bool attach)
{
	if (!ibqp || !gid)
		return EINVAL;
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct sr_context *ctx = qp->ctx;
	if (ctx->dev->iwarp)
		return EOPNOTSUPP;
	if (ibqp->qp_type != IBV_QPT_UD)
		return EINVAL;
	core_lock(ctx->core);
	int r = attach ? core_mcast_attach(ctx->core, ibqp->qp_num, gid->raw)
		       : core_mcast_detach(ctx->core, ibqp->qp_num, gid->raw);
	core_unlock(ctx->core);
	return -r;
}

int ibv_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast_change(ibqp, gid, true);
}

int ibv_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid)
{
	(void)lid;
	return mcast_change(ibqp, gid, false);
}
