/* Marking: the IP TOS / IPv6 traffic class and the skb priority of softrdma's traffic.
 *
 * RoCE deployments give their lossless class a DSCP (26, AF31, is the common choice) and a
 * switch priority (3) that PFC pauses; hosts put the priority in the 802.1Q PCP through their
 * VLAN interface's egress map (skb priority -> PCP). So: every packet carries a DSCP - its
 * traffic class's (a GRH traffic_class, rdma_cm's RDMA_OPTION_ID_TOS), or the device's default
 * when that asks for none (DSCP 0) - and every socket the priority of the device's default DSCP,
 * its class selector (DSCP >> 3: 26 -> 3). RoCEv2 packets say they are ECN-capable (ECT(0))
 * when the device has ECN on; a TCP connection's ECN bits are the kernel's. */
#ifndef SOFTRDMA_UTIL_MARK_H
#define SOFTRDMA_UTIL_MARK_H

#include <stdbool.h>
#include <stdint.h>

#define MARK_DSCP_DEFAULT 26
#define MARK_ECT0	  2 /* ECN field: ECN-capable transport (0), RFC 3168 */
#define MARK_CE		  3 /* ECN field: congestion experienced */
/* The DSCP of a CNP (RoCE NICs' cnp_dscp default): a class of its own, so that the notification
 * does not queue behind the congestion it reports. */
#define MARK_CNP_DSCP 48

/* The TOS byte for traffic class tclass: its DSCP, or dscp when that is 0; ECT(0) when ecn,
 * else tclass's own ECN bits (rxe sends the traffic class as given). */
static inline uint8_t mark_tos(uint8_t dscp, bool ecn, uint8_t tclass)
{
	uint8_t d = tclass >> 2 ? (uint8_t)(tclass >> 2) : dscp;
	return (uint8_t)(d << 2 | (ecn ? MARK_ECT0 : tclass & 3));
}

/* The skb priority for a TOS byte: its DSCP's class selector, at most 6 (7 needs
 * CAP_NET_ADMIN). */
static inline uint8_t mark_priority(uint8_t tos)
{
	uint8_t p = (uint8_t)(tos >> 5);
	return p < 6 ? p : 6;
}

/* The device default from the environment: SOFTRDMA_DSCP (0-63, default 26) and SOFTRDMA_ECN
 * (0 or 1, default 0). Returns 0, or -EINVAL with a message on stderr (the values are then the
 * defaults). */
int mark_config(uint8_t *dscp, bool *ecn);

#endif
