/* The IB CM's MADs as rdma_cm sends them over RoCE (IBTA Vol. 1 ch. 12 and 13.4; Annex A11 for
 * rdma_cm's IP private-data header; ../shared/spec/roce.md section 11). Pure codec: no I/O, no
 * clock, no allocation, bounded cursors, no casts of wire bytes to structs.
 *
 * A CM MAD is the 256-byte payload of a UD SEND ONLY to QP1 (Q_Key 0x80010000): the 24-byte
 * MAD common header, then the 232-byte CM message of its AttributeID. Every field below is a
 * host-order number; GIDs and private data are bytes as on the wire. */
#ifndef SOFTRDMA_WIRE_CM_MAD_H
#define SOFTRDMA_WIRE_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CM_MAD_LEN	     256
#define CM_MAD_HDR_LEN	     24
#define CM_MAD_BASE_VERSION  1
#define CM_MAD_CLASS	     0x07 /* Communication Management */
#define CM_MAD_CLASS_VERSION 2
#define CM_MAD_METHOD_SEND   0x03

/* AttributeIDs (IBA 12.6). */
enum cm_attr {
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
	CM_ATTR_SIDR_REQ = 0x0017,
	CM_ATTR_SIDR_REP = 0x0018,
};

/* Private-data sizes per message (IBA tables; what rdma_cm exposes for REP / REJ / SIDR_REP;
 * REQ and SIDR_REQ carry rdma_cm's 36-byte header in front of the user's bytes). */
#define CM_MAD_REQ_PD	   92
#define CM_MAD_REP_PD	   196
#define CM_MAD_REJ_PD	   148
#define CM_MAD_RTU_PD	   224
#define CM_MAD_DREQ_PD	   220
#define CM_MAD_DREP_PD	   224
#define CM_MAD_MRA_PD	   222
#define CM_MAD_SIDR_REQ_PD 216
#define CM_MAD_SIDR_REP_PD 136
#define CM_MAD_PD_MAX	   224
#define CM_MAD_ARI_MAX	   72

/* Transport service types in the REQ (43[2:1]). */
#define CM_MAD_TS_RC	  0
#define CM_MAD_TS_UC	  1
#define CM_MAD_TS_XRC_EXT 3 /* with the extended transport type 51[2:0] = 1 */

/* REJ's "message rejected" (8[7:6]) and MRA's "message MRAed". */
#define CM_MAD_MSG_REQ	 0
#define CM_MAD_MSG_REP	 1
#define CM_MAD_MSG_OTHER 2

/* One decoded CM MAD. Fields a type does not carry are 0 after parse and ignored by build. */
struct cm_mad {
	uint16_t attr;	 /* enum cm_attr */
	uint16_t status; /* MAD header status (0 for CM) */
	uint64_t tid;	 /* TransactionID */
	/* AttributeModifier. REQ / REP: the ECE options (Linux ib_cm, cm_format_mad_ece_hdr:
	 * the REQ's and the REP's header carry ib_cm_req_param / _rep_param .ece.attr_mod). */
	uint32_t attr_mod;
	uint32_t local_id;  /* Local Comm ID; SIDR_REQ / SIDR_REP: Request ID */
	uint32_t remote_id; /* Remote Comm ID (REP, RTU, REJ, DREQ, DREP, MRA) */

	/* REQ */
	uint64_t service_id; /* also SIDR_REQ, SIDR_REP */
	uint64_t ca_guid;    /* Local CA GUID (REQ, REP) */
	uint32_t qkey;	     /* Local Q_Key (REQ, REP); SIDR_REP Q_Key */
	uint32_t qpn;	     /* Local QPN (REQ, REP); DREQ Remote QPN; SIDR_REP QPN (24 bits) */
	uint8_t resp_res;    /* Responder Resources (REQ, REP) */
	uint8_t init_depth;  /* Initiator Depth (REQ, REP) */
	uint8_t remote_cm_timeout; /* 5 bits */
	uint8_t transport;	   /* CM_MAD_TS_* (2 bits) */
	bool e2e_fc;		   /* End-to-End Flow Control (REQ, REP) */
	/* Starting PSN (REQ, REP; 24 bits). In Linux (cm.c; the captures agree) the REQ's is the
	 * PSN the passive side sends with, the REP's the one the active side sends with. */
	uint32_t psn;
	uint8_t local_cm_timeout; /* 5 bits */
	uint8_t retry_count;	  /* 3 bits */
	uint16_t pkey;		  /* REQ, SIDR_REQ */
	uint8_t mtu;		  /* Path Packet Payload MTU, 4 bits (enum ibv_mtu) */
	bool rdc_exists;
	uint8_t rnr_retry;	    /* RNR Retry Count, 3 bits (REQ, REP) */
	uint8_t max_cm_retries;	    /* 4 bits */
	bool srq;		    /* REQ, REP */
	uint8_t ext_transport;	    /* 3 bits */
	uint16_t slid, dlid;	    /* primary local / remote port LID */
	uint8_t sgid[16], dgid[16]; /* primary local / remote port GID */
	uint32_t flow_label;	    /* 20 bits */
	uint8_t packet_rate;	    /* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl; /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout; /* 5 bits */
	/* (the alternate path is always zero: built as zeros, not decoded) */
	/* ECE vendor ID (REQ, REP; 24 bits), with the options in attr_mod: where Linux's ib_cm
	 * puts them in space the IBA reserves (include/rdma/ibta_vol1_c12.h: CM_REQ_VENDOR_ID,
	 * body bytes 5-7; CM_REP_VENDOR_ID_H / _M / _L, body bytes 15, 19, 23). 0: no ECE, as
	 * every peer without it (rxe) sends. */
	uint32_t vendor_id;

	/* REP */
	uint8_t target_ack_delay; /* 5 bits */
	uint8_t failover;	  /* 2 bits */

	/* REJ */
	uint8_t msg_rejected; /* CM_MAD_MSG_* (2 bits) */
	/* REJ ARI, or SIDR_REP Additional Information: all 72 wire bytes are carried, ari_len
	 * of them meaningful. ari_len is the REJ's Reject Info Length (7 bits) or the SIDR_REP's
	 * Additional Information Length (8 bits); <= CM_MAD_ARI_MAX in both. */
	uint8_t ari_len;
	uint16_t reason;
	uint8_t ari[CM_MAD_ARI_MAX];

	/* MRA */
	uint8_t msg_mraed;	 /* CM_MAD_MSG_* */
	uint8_t service_timeout; /* 5 bits */

	/* SIDR_REP */
	uint8_t sidr_status;

	uint8_t pd[CM_MAD_PD_MAX]; /* private data: cm_mad_pd_size(attr) bytes are meaningful */
};

/* Private-data size of a message type, 0 for an unknown one. */
size_t cm_mad_pd_size(uint16_t attr);
/* "REQ", "REP", ... or "?". */
const char *cm_mad_name(uint16_t attr);

/* Encodes m into out[CM_MAD_LEN] (every reserved bit and the alternate path zero; header:
 * base version 1, class 7, class version 2, method Send, status, TID, attribute, modifier as
 * in m). Returns CM_MAD_LEN, or -EINVAL for an unknown attr, a field wider than its bits or
 * an ari_len above CM_MAD_ARI_MAX; out is untouched on error. */
int cm_mad_build(const struct cm_mad *m, uint8_t out[CM_MAD_LEN]);

/* Decodes a MAD. Returns 0, or:
 *   -EMSGSIZE         len < CM_MAD_LEN (more bytes after 256 are ignored: RoCE pads nothing);
 *   -EPROTO           not a CM MAD: base version != 1, class != 7, or method != Send;
 *   -EPROTONOSUPPORT  class version != 2;
 *   -EBADMSG          unknown AttributeID, or a REJ / SIDR_REP whose ARI / Additional
 *                     Information length exceeds 72.
 * Reserved bits are ignored. On error *out is all zero. */
int cm_mad_parse(const uint8_t *buf, size_t len, struct cm_mad *out);

/* Where a MAD is to be delivered (core/gsi.h), read from the AttributeID and one field, with
 * no other check (the receiver parses the whole MAD): *attr; for REQ / SIDR_REQ *sid, the
 * Service ID; for the others *id, the comm ID that names the receiver (the Remote Comm ID,
 * which every connected-mode message carries at body bytes 4-7; SIDR_REP: the Request ID). */
void cm_mad_route_key(const uint8_t mad[CM_MAD_LEN], uint16_t *attr, uint64_t *sid, uint32_t *id);

/* The kernel CM's answer to a MAD for a listener or connection that does not exist
 * (cm_issue_rej / cm_issue_drep and the SIDR "unsupported" reply): REQ -> REJ reason 8
 * (invalid service ID), REP -> REJ reason 6 (invalid comm ID), SIDR_REQ -> SIDR_REP status 1,
 * DREQ -> DREP; the IDs swapped, the TID echoed. Returns 0 with *out, or -ENOENT when the
 * kernel answers nothing (any other message). */
int cm_mad_answer_nobody(const struct cm_mad *in, struct cm_mad *out);

/* ---- rdma_cm's IP private-data header (kernel struct cma_hdr, 36 bytes; spec 11.8) ---- */
#define CM_MAD_CMA_HDR_LEN 36

struct cm_cma_hdr {
	bool ipv6;	/* IP version nibble 6 (else 4) */
	uint16_t sport; /* the active side's rdma_cm port */
	/* IPv4: IPv4-mapped (::ffff:a.b.c.d) here, 12 zeros + 4 bytes on the wire */
	uint8_t src[16];
	uint8_t dst[16];
};

/* Writes the header (version byte 0x00, IP version 0x40 / 0x60). For IPv4, src / dst must be
 * IPv4-mapped; returns CM_MAD_CMA_HDR_LEN or -EINVAL. */
int cm_cma_hdr_build(const struct cm_cma_hdr *h, uint8_t out[CM_MAD_CMA_HDR_LEN]);
/* Reads it: 0, or -EBADMSG for a version byte other than 0 or an IP version other than 4 / 6,
 * or (IPv4) non-zero bytes in the 12 bytes before an address. */
int cm_cma_hdr_parse(const uint8_t in[CM_MAD_CMA_HDR_LEN], struct cm_cma_hdr *h);

#endif
