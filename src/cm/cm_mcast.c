/* Multicast through rdma_cm on RoCE UD ids (cm.h "Multicast"): rdma_join_multicast,
 * rdma_join_multicast_ex, rdma_leave_multicast, with the kernel's rdma_cm for RoCE
 * (cma_iboe_join_multicast, cma_make_mc_event) and librdmacm's user-space half
 * (rdma_join_multicast2, ucma_process_join, rdma_leave_multicast). There is no SA on RoCE: the
 * MGID is the group's IP address, the join is this host's own (the QP's ibv_attach_mcast joins
 * the IP group on the device's interface, io/mcast.h), and the event is queued at once. */
#include "cm/cm.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#define MC_QPN	      0xFFFFFFu /* param.ud.qp_num of a join: multicast packets' DestQP */
#define MC_HOP_LIMIT  64	/* cma_iboe_join_multicast: IPV6_DEFAULT_HOPLIMIT on RoCEv2 */
#define MC_ADDR_BYTES 128	/* a sockaddr_storage */

/* One join of an id: librdmacm's struct cma_multicast. */
struct cm_mc {
	struct cm_id *id;
	uint8_t addr[MC_ADDR_BYTES]; /* the application's sockaddr, as given (leave compares it) */
	size_t addrlen;
	void *context; /* the join's: param.ud.private_data of its events */
	uint16_t join_flags;
	/* from the JOIN event when taken (ucma_process_join): what the QP was attached to */
	union ibv_gid mgid;
	uint16_t mlid;
	uint32_t reported, acked; /* its events taken / acknowledged */
	struct cm_mc *next;
};

static int fail(int err)
{
	errno = err;
	return -1;
}

/* librdmacm ucma_addrlen: the bytes of a sockaddr of a family rdma_cm takes here; 0 for others
 * (AF_IB: no native IB addresses on RoCE). */
static size_t addr_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;
}

/* The group's 16-byte address (IPv4-mapped for IPv4), and whether it is IPv6. */
static void group_of(const struct sockaddr *sa, uint8_t g[16], bool *v6)
{
	memset(g, 0, 16);
	if (sa->sa_family == AF_INET) {
		g[10] = g[11] = 0xff;
		memcpy(g + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		*v6 = false;
	} else {
		static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};
		memcpy(g, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		*v6 = memcmp(g, mapped, 12) != 0; /* ::ffff:a.b.c.d is IPv4, as rdma_cm reads it */
	}
}

static bool zero_addr(const uint8_t g[16])
{
	static const uint8_t zero[16];
	static const uint8_t mapped0[16] = {[10] = 0xff, [11] = 0xff};
	return !memcmp(g, zero, 16) || !memcmp(g, mapped0, 16);
}

static int join(struct rdma_cm_id *rid, const struct sockaddr *addr, uint16_t flags, void *context)
{
	size_t alen = addr_len(addr);
	/* librdmacm: a known address family; the kernel's ucma: one of the two join states. */
	if (!rid || !alen)
		return fail(EINVAL);
	if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return fail(EINVAL);
	uint8_t g[16];
	bool v6;
	group_of(addr, g, &v6);
	cm_lock();
	struct cm_id *id = cm_id_live(rid); /* cm.h "The application's handles" */
	int err = 0;
	/* rdma_join_multicast: a device, an address bound or resolved, a UD id; then the
	 * transport: iWARP has no multicast (neither RoCE nor IB multicast: -ENOSYS). */
	if (!id)
		err = ENOENT;
	else if (!id->dev || (id->state != CM_BOUND && id->state != CM_ADDR_RESOLVED) ||
		 !cm_is_ud(id))
		err = EINVAL;
	else if (id->tr != CM_TR_ROCE)
		err = ENOSYS;
	else if (zero_addr(g) || v6 != id->v6)
		err = EINVAL; /* cma_zero_addr; a group of the other family has no source here */
	int gi = err ? -1 : cm_gid_index(id->dev, id->laddr);
	if (!err && gi < 0)
		err = EADDRNOTAVAIL;
	struct cm_mc *mc = err ? NULL : calloc(1, sizeof(*mc));
	if (!err && !mc)
		err = ENOMEM;
	if (err) {
		cm_unlock();
		return fail(err);
	}
	mc->id = id;
	memcpy(mc->addr, addr, alen);
	mc->addrlen = alen;
	mc->context = context;
	mc->join_flags = flags;
	mc->next = id->mcs;
	id->mcs = mc;
	/* cma_make_mc_event from the record cma_iboe_join_multicast builds:
	 * ib_init_ah_from_mcmember gives a RoCE AH (no DLID), the port's GID of the id's source
	 * address. */
	struct rdma_ud_param ud = {.qp_num = MC_QPN, .qkey = RDMA_UDP_QKEY};
	ud.ah_attr.is_global = 1;
	ud.ah_attr.port_num = 1;
	memcpy(ud.ah_attr.grh.dgid.raw, g, 16);
	ud.ah_attr.grh.sgid_index = (uint8_t)gi;
	ud.ah_attr.grh.hop_limit = MC_HOP_LIMIT;
	struct cm_event *e =
	    cm_event_post_ud(id, NULL, RDMA_CM_EVENT_MULTICAST_JOIN, 0, &ud, NULL, 0);
	if (e) {
		e->mc = mc;
		e->ev.param.ud.private_data = context; /* librdmacm: the join's context */
	}
	cm_unlock();
	return cm_sync_complete(id);
}

int sr_rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}
CM_ALIAS(join_multicast);

int sr_rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
			      void *context)
{
	/* librdmacm's checks, in its order. */
	if (!attr)
		return fail(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return fail(EOPNOTSUPP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return fail(EINVAL);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return fail(EINVAL);
	return join(id, attr->addr, (uint16_t)attr->join_flags, context);
}
CM_ALIAS(join_multicast_ex);

int sr_rdma_leave_multicast(struct rdma_cm_id *rid, struct sockaddr *addr)
{
	size_t alen = addr_len(addr);
	if (!rid || !alen)
		return fail(EINVAL);
	cm_lock();
	struct cm_id *id = cm_id_live(rid);
	if (!id) {
		cm_unlock();
		return fail(ENOENT);
	}
	struct cm_mc **pp = &id->mcs, *mc;
	while ((mc = *pp) && (mc->addrlen < alen || memcmp(mc->addr, addr, alen)))
		pp = &mc->next;
	if (!mc) {
		cm_unlock();
		return fail(EADDRNOTAVAIL);
	}
	*pp = mc->next;
	/* librdmacm: the QP leaves first (an error, e.g. never attached, is ignored) ... */
	if (id->id.qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		(void)ibv_detach_mcast(id->id.qp, &mc->mgid, mc->mlid);
	/* ... then the kernel drops the group's events not yet taken, and librdmacm waits until
	 * those taken are acknowledged. */
	cm_purge_events(id, mc);
	while (mc->acked < mc->reported)
		cm_wait();
	cm_unlock();
	free(mc);
	return 0;
}
CM_ALIAS(leave_multicast);

void cm_mc_retrieved(struct cm_event *e)
{
	struct cm_mc *mc = e->mc;
	struct cm_id *id = mc->id;
	mc->reported++;
	if (e->ev.event != RDMA_CM_EVENT_MULTICAST_JOIN)
		return;
	/* ucma_process_join */
	mc->mgid = e->ev.param.ud.ah_attr.grh.dgid;
	mc->mlid = e->ev.param.ud.ah_attr.dlid;
	if (!id->id.qp || mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return;
	int r = ibv_attach_mcast(id->id.qp, &mc->mgid, mc->mlid);
	if (r) {
		errno = r; /* rdma_seterrno */
		e->ev.status = -1;
		e->ev.event = RDMA_CM_EVENT_MULTICAST_ERROR;
	}
}

void cm_mc_acked(struct cm_event *e)
{
	e->mc->acked++;
}

void cm_mc_free_all(struct cm_id *id)
{
	while (id->mcs) {
		struct cm_mc *mc = id->mcs;
		id->mcs = mc->next;
		free(mc);
	}
}
