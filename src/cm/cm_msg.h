/* The messages of softrdma's interim RoCE connection manager (cm.h, "RoCE"): the IB CM exchange
 * (IBTA 12.6; ../shared/spec/roce.md section 11) carried over a TCP connection between two
 * softrdma processes instead of MADs on QP1. Pure codec: no I/O, no state.
 *
 * Every message, big-endian:
 *   0  magic    4  "sRCM"
 *   4  version  1  CM_MSG_VERSION (a peer with another version is refused: closed, counted)
 *   5  type     1  enum cm_msg_type
 *   6  length   2  total bytes, header included; exactly cm_msg_len(type)
 *   8  body        per type:
 *   REQ  qpn 4, start PSN 4, GID 16, responder resources 1, initiator depth 1, retry count 1,
 *        RNR retry count 1, path MTU 1 (enum ibv_mtu), SRQ 1, reserved 2, private data 56
 *   REP  qpn 4, start PSN 4, GID 16, responder resources 1, initiator depth 1, RNR retry 1,
 *        path MTU 1, SRQ 1, reserved 3, private data 196
 *   RTU, DREQ, DREP  no body
 *   REJ  reason 2 (IB CM reject reason, ib_cm.h), reserved 2, private data 148
 *   SIDR_REQ  request ID 4, P_Key 2, reserved 2, service ID 8, private data 180
 *   SIDR_REP  request ID 4, status 1, reserved 3, QPN 4, Q_Key 4, private data 136
 * The private data sizes are those of the IB CM messages as rdma_cm exposes them (REQ 92 minus
 * the 36-byte rdma_cm IP header, REP 196, REJ 148, SIDR_REQ 216 minus the header, SIDR_REP
 * 136), zero padded: events report exactly these lengths, as on a kernel RoCE device. QPNs and
 * PSNs are 24-bit (the top byte must be 0).
 *
 * SIDR (IBTA 12.11, Service ID Resolution) is what rdma_cm runs for UD ids (RDMA_PS_UDP,
 * RDMA_PS_IPOIB): one request, one reply, then no connection state. The fields kept are those
 * IBTA 12.11.1 / 12.11.2 define (the SIDR_REP's ClassPortInfo for redirection is left out: no
 * redirection here). The service ID is rdma_cm's: port space << 16 | port (cma_get_service_id),
 * the P_Key the default 0xFFFF. */
#ifndef SOFTRDMA_CM_MSG_H
#define SOFTRDMA_CM_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CM_MSG_MAGIC   "sRCM"
#define CM_MSG_VERSION 1
#define CM_MSG_HDR     8
#define CM_REQ_PD      56
#define CM_REP_PD      196
#define CM_REJ_PD      148
#define CM_SIDR_REQ_PD 180 /* IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE 216 minus rdma_cm's 36 */
#define CM_SIDR_REP_PD 136 /* IB_CM_SIDR_REP_PRIVATE_DATA_SIZE */
#define CM_MSG_MAX     (CM_MSG_HDR + 32 + CM_REP_PD) /* the largest message: REP, 236 */

/* IB CM reject reasons rdma_cm reports as the REJECTED event's status (ib_cm.h). */
#define CM_REJ_INVALID_SERVICE_ID 8  /* nobody listens on that port */
#define CM_REJ_CONSUMER_DEFINED	  28 /* rdma_reject */
#define CM_REJ_INVALID_QP	  1  /* (IB_CM_REJ_NO_QP) the REP could not be applied */

/* SIDR_REP status (IBTA 12.11.2, table 126; ib_cm.h enum ib_cm_sidr_status). rdma_cm reports
 * a non-zero one as the UNREACHABLE event's status. */
#define CM_SIDR_SUCCESS		    0
#define CM_SIDR_UNSUPPORTED	    1 /* nobody serves that service ID (no listener) */
#define CM_SIDR_REJECT		    2 /* rdma_reject */
#define CM_SIDR_NO_QP		    3
#define CM_SIDR_REDIRECT	    4
#define CM_SIDR_UNSUPPORTED_VERSION 5

enum cm_msg_type {
	CM_MSG_REQ = 1,
	CM_MSG_REP = 2,
	CM_MSG_RTU = 3,
	CM_MSG_REJ = 4,
	CM_MSG_DREQ = 5,
	CM_MSG_DREP = 6,
	CM_MSG_SIDR_REQ = 7,
	CM_MSG_SIDR_REP = 8,
	CM_MSG__END
};

/* A decoded message. Fields not in a type's body are 0. */
struct cm_msg {
	uint8_t type;
	uint32_t qpn, psn;  /* REQ, REP; qpn: SIDR_REP too */
	uint8_t gid[16];    /* REQ, REP: the sender's GID (its IP address, IPv4-mapped) */
	uint8_t rr, depth;  /* REQ, REP: responder resources, initiator depth */
	uint8_t retry, rnr; /* REQ: retry count; REQ, REP: RNR retry count (0..7) */
	uint8_t mtu;	    /* REQ, REP: enum ibv_mtu, 1..5 */
	bool srq;	    /* REQ, REP */
	uint16_t reason;    /* REJ */
	uint32_t req_id;    /* SIDR_REQ, SIDR_REP: the requester's; the reply echoes it */
	uint16_t pkey;	    /* SIDR_REQ */
	uint64_t sid;	    /* SIDR_REQ: service ID */
	uint8_t status;	    /* SIDR_REP: CM_SIDR_*, 0..5 */
	uint32_t qkey;	    /* SIDR_REP */
	uint8_t pd[CM_REP_PD];
	uint8_t pd_len; /* the type's fixed private-data size (0, 56, 196, 148, 180 or 136) */
};

/* Total length of a message of that type, or 0 for an unknown type. */
size_t cm_msg_len(uint8_t type);
/* Private-data size of that type (0 if it carries none or is unknown). */
size_t cm_msg_pd_size(uint8_t type);
/* "REQ", ... or "?". */
const char *cm_msg_name(uint8_t type);

/* Encodes m (m->pd: cm_msg_pd_size(type) bytes are taken, whatever pd_len says) into buf.
 * Returns the length, or -EINVAL (unknown type, a field out of range) / -ENOSPC. */
int cm_msg_build(const struct cm_msg *m, uint8_t *buf, size_t cap);

/* Decodes the message at the start of buf[0..len). *need gets the number of bytes the message
 * needs (the header while fewer than CM_MSG_HDR are there, then the whole message).
 * Returns 0 with *out filled when buf holds the whole message (extra bytes are not looked at),
 * -EAGAIN when more bytes are needed, or, without reading further than needed to decide:
 *   -EPROTO           not "sRCM" (checked byte by byte: garbage is refused at once);
 *   -EPROTONOSUPPORT  another version;
 *   -EBADMSG          unknown type, wrong length for the type, or a field out of range. */
int cm_msg_parse(const uint8_t *buf, size_t len, struct cm_msg *out, size_t *need);

#endif
