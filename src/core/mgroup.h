/* The multicast groups of one device context: which UD QPs are attached to which MGID (IBTA
 * 10.2.5 / 11.3: Attach / Detach QP to Multicast Group; on RoCEv2 the MGID is the group's IP
 * address, IPv4-mapped or IPv6, IBTA A17.5.6). The table behind ibv_attach_mcast and the receive
 * path's fan-out, with rxe's rules and limits (rxe_mcast.c): attaching an attached QP again
 * changes nothing, detaching one that is not attached is EINVAL, and beyond the limits below
 * ENOMEM. A pure data structure: no socket, no lock (core/ calls it under the context's lock).
 *
 * Groups are kept sorted by MGID, so the receive path finds a datagram's group by binary search.
 * Allocation: attach may grow the table (control path); find and the QP lists never allocate. */
#ifndef SOFTRDMA_CORE_MGROUP_H
#define SOFTRDMA_CORE_MGROUP_H

#include <stdint.h>

/* rxe's device limits (rxe_param.h), which ibv_query_device reports. */
#define CORE_MAX_MCAST_GRP	       8192
#define CORE_MAX_MCAST_QP_ATTACH       56
#define CORE_MAX_TOTAL_MCAST_QP_ATTACH 0x70000

struct core_mgroup {
	uint8_t mgid[16];
	uint32_t nqp;				/* 1 .. CORE_MAX_MCAST_QP_ATTACH */
	uint32_t qpn[CORE_MAX_MCAST_QP_ATTACH]; /* in attach order */
};

struct core_mgroups {
	struct core_mgroup *g; /* sorted by mgid (memcmp) */
	uint32_t n, cap;
	uint32_t total; /* attachments over all groups */
};

/* Attaches qpn to mgid. Returns 1 when the group is new (the caller joins it on the network),
 * 0 when it existed (or qpn was attached already), -ENOMEM past a limit or without memory (the
 * table is then unchanged). */
int core_mg_attach(struct core_mgroups *t, const uint8_t mgid[16], uint32_t qpn);
/* Detaches qpn from mgid. Returns 1 when that emptied and removed the group (the caller leaves
 * it), 0 otherwise, -EINVAL when qpn was not attached to mgid. */
int core_mg_detach(struct core_mgroups *t, const uint8_t mgid[16], uint32_t qpn);
/* The group of mgid, or NULL. The pointer is valid until the next attach or detach. */
const struct core_mgroup *core_mg_find(const struct core_mgroups *t, const uint8_t mgid[16]);
/* The first group (in MGID order) qpn is attached to, copied into mgid; 0, or -ENOENT. */
int core_mg_first_of(const struct core_mgroups *t, uint32_t qpn, uint8_t mgid[16]);
/* Frees the table (t is empty again). */
void core_mg_free(struct core_mgroups *t);

#endif
