/* RoCEv2 wire codecs: InfiniBand transport headers (BTH and the extended transport headers),
 * the per-opcode table, and the ICRC. Pure functions: no I/O, no clock, no allocation.
 * Layouts: ../shared/spec/roce.md sections 2-6 (IBTA Vol. 1 ch. 9, Annex A17).
 *
 * Byte order: every field in the structs below is a host-order number, except `imm`, which is
 * kept exactly as the 4 wire bytes (verbs treats imm_data as __be32 end to end).
 * Parsers read through bounded cursors and never cast packet bytes to structs. */
#ifndef SOFTRDMA_WIRE_ROCE_H
#define SOFTRDMA_WIRE_ROCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROCE_UDP_PORT	      4791
#define ROCE_BTH_LEN	      12
#define ROCE_RETH_LEN	      16
#define ROCE_AETH_LEN	      4
#define ROCE_ATOMICETH_LEN    28
#define ROCE_ATOMICACKETH_LEN 8
#define ROCE_IMMDT_LEN	      4
#define ROCE_IETH_LEN	      4
#define ROCE_DETH_LEN	      8
#define ROCE_XRCETH_LEN	      4
#define ROCE_ICRC_LEN	      4
#define ROCE_MAX_HDR_LEN      80 /* rxe RXE_MAX_HDR_LENGTH: worst case BTH..ext headers */
#define ROCE_DEFAULT_PKEY     0xFFFF
#define ROCE_GSI_QKEY	      0x80010000u
#define ROCE_MCAST_QPN	      0xFFFFFFu /* DestQP of multicast packets (spec 1.1) */

/* BTH opcodes (IBTA 9.2, table "OpCode field"; values from ib_pack.h). UC = RC + 0x20 for
 * SEND and WRITE, UD SEND ONLY = 0x64/0x65, CNP = 0x81. XRC (IBA 9.2, transport bits 101) =
 * every RC opcode + 0xA0 (ROCE_OP_XRC): 0xA0..0xB4, 0xB6, 0xB7. */
enum roce_opcode {
	ROCE_RC_SEND_FIRST = 0x00,
	ROCE_RC_SEND_MIDDLE = 0x01,
	ROCE_RC_SEND_LAST = 0x02,
	ROCE_RC_SEND_LAST_IMM = 0x03,
	ROCE_RC_SEND_ONLY = 0x04,
	ROCE_RC_SEND_ONLY_IMM = 0x05,
	ROCE_RC_WRITE_FIRST = 0x06,
	ROCE_RC_WRITE_MIDDLE = 0x07,
	ROCE_RC_WRITE_LAST = 0x08,
	ROCE_RC_WRITE_LAST_IMM = 0x09,
	ROCE_RC_WRITE_ONLY = 0x0A,
	ROCE_RC_WRITE_ONLY_IMM = 0x0B,
	ROCE_RC_READ_REQUEST = 0x0C,
	ROCE_RC_READ_RESPONSE_FIRST = 0x0D,
	ROCE_RC_READ_RESPONSE_MIDDLE = 0x0E,
	ROCE_RC_READ_RESPONSE_LAST = 0x0F,
	ROCE_RC_READ_RESPONSE_ONLY = 0x10,
	ROCE_RC_ACK = 0x11,
	ROCE_RC_ATOMIC_ACK = 0x12,
	ROCE_RC_CMP_SWAP = 0x13,
	ROCE_RC_FETCH_ADD = 0x14,
	ROCE_RC_SEND_LAST_INV = 0x16,
	ROCE_RC_SEND_ONLY_INV = 0x17,
	ROCE_UC_SEND_FIRST = 0x20,
	ROCE_UC_SEND_MIDDLE = 0x21,
	ROCE_UC_SEND_LAST = 0x22,
	ROCE_UC_SEND_LAST_IMM = 0x23,
	ROCE_UC_SEND_ONLY = 0x24,
	ROCE_UC_SEND_ONLY_IMM = 0x25,
	ROCE_UC_WRITE_FIRST = 0x26,
	ROCE_UC_WRITE_MIDDLE = 0x27,
	ROCE_UC_WRITE_LAST = 0x28,
	ROCE_UC_WRITE_LAST_IMM = 0x29,
	ROCE_UC_WRITE_ONLY = 0x2A,
	ROCE_UC_WRITE_ONLY_IMM = 0x2B,
	ROCE_UD_SEND_ONLY = 0x64,
	ROCE_UD_SEND_ONLY_IMM = 0x65,
	ROCE_CNP = 0x81,
	/* softrdma's SACK for selective repeat (engine/sr.h): from the manufacturer-specific
	 * range (IBA 9.2: 0xC0..0xFF), only ever sent to a softrdma QP that agreed to it. */
	ROCE_SR_SACK = 0xC0,
	ROCE_OP_XRC = 0xA0, /* XRC opcode = RC opcode | ROCE_OP_XRC */
	ROCE_XRC_SEND_ONLY = 0xA4,
	ROCE_XRC_ACK = 0xB1,
};
/* The operation bits of an opcode (the same in RC, UC and XRC: IBA 9.2). */
#define ROCE_OP_MASK 0x1F

/* Which extended headers an opcode carries (bit set), in wire order after the BTH:
 * DETH, XRCETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH (spec 2.8; IBA 9.2: the
 * XRCETH follows the BTH (and RDETH / DETH, which XRC never has) in every XRC request). */
enum roce_hdr_bits {
	ROCE_HDR_DETH = 1u << 0,
	ROCE_HDR_RETH = 1u << 1,
	ROCE_HDR_ATOMICETH = 1u << 2,
	ROCE_HDR_AETH = 1u << 3,
	ROCE_HDR_ATOMICACKETH = 1u << 4,
	ROCE_HDR_IMMDT = 1u << 5,
	ROCE_HDR_IETH = 1u << 6,
	ROCE_HDR_XRCETH = 1u << 7,
};

/* Position of a packet within its message. ONLY = FIRST | LAST. */
enum roce_pos {
	ROCE_POS_FIRST = 1u << 0,
	ROCE_POS_MIDDLE = 1u << 1,
	ROCE_POS_LAST = 1u << 2,
	ROCE_POS_ONLY = ROCE_POS_FIRST | ROCE_POS_LAST,
};

/* What an opcode does (the engine dispatches on this, never on raw opcode numbers). */
enum roce_kind {
	ROCE_KIND_SEND,
	ROCE_KIND_WRITE,
	ROCE_KIND_READ_REQ,
	ROCE_KIND_READ_RESP,
	ROCE_KIND_ACK,
	ROCE_KIND_ATOMIC,
	ROCE_KIND_ATOMIC_ACK,
	ROCE_KIND_CNP,
	ROCE_KIND_SACK, /* ROCE_SR_SACK */
};

/* QP transport the opcode belongs to (BTH opcode bits 7..5). */
enum roce_transport {
	ROCE_TR_RC = 0,
	ROCE_TR_UC = 1,
	ROCE_TR_RD = 2,
	ROCE_TR_UD = 3,
	ROCE_TR_CNP = 4,
	ROCE_TR_XRC = 5, /* opcode bits 7..5 = 101 */
};

/* One row of the opcode table: protocol facts about one BTH opcode. */
struct roce_opinfo {
	const char *name; /* "RC SEND FIRST", as tshark shows it */
	uint8_t opcode;
	uint8_t transport; /* enum roce_transport */
	uint8_t kind;	   /* enum roce_kind */
	uint8_t pos;	   /* enum roce_pos bits */
	uint16_t hdrs;	   /* enum roce_hdr_bits */
	uint8_t hdr_len;   /* bytes of BTH + extended headers */
	bool payload;	   /* may carry payload bytes */
	bool imm;	   /* carries ImmDt (shortcut of hdrs & ROCE_HDR_IMMDT) */
	bool inv;	   /* carries IETH */
};

/* The table row for an opcode, or NULL for an opcode softrdma does not know (drop it). */
const struct roce_opinfo *roce_opinfo(uint8_t opcode);

struct roce_bth {
	uint8_t opcode;
	bool se;	/* solicited event */
	bool mig;	/* MigReq; rxe sends 0 */
	uint8_t padcnt; /* 0..3 */
	uint8_t tver;	/* must be 0 */
	uint16_t pkey;
	bool fecn;
	bool becn;
	uint32_t dqpn; /* 24 bits */
	bool ackreq;
	uint32_t psn; /* 24 bits */
};

struct roce_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len; /* length of the whole message */
};

/* AETH syndrome (IBTA 9.7.5.1; spec 5.3). */
#define ROCE_AETH_TYPE_MASK	    0x60
#define ROCE_AETH_ACK		    0x00
#define ROCE_AETH_RNR_NAK	    0x20
#define ROCE_AETH_NAK		    0x60
#define ROCE_AETH_VALUE_MASK	    0x1F
#define ROCE_AETH_CREDITS_UNLIMITED 0x1F
enum roce_nak_code {
	ROCE_NAK_PSN_SEQ = 0,
	ROCE_NAK_INVALID_REQ = 1,
	ROCE_NAK_REMOTE_ACCESS = 2,
	ROCE_NAK_REMOTE_OP = 3,
	ROCE_NAK_INVALID_RD_REQ = 4,
};

struct roce_aeth {
	uint8_t syndrome;
	uint32_t msn; /* 24 bits */
};

struct roce_atomiceth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;
	uint64_t compare;
};

struct roce_deth {
	uint32_t qkey;
	uint32_t src_qpn; /* 24 bits */
};

/* A decoded transport packet: BTH, the extended headers its opcode carries (the others are
 * left zero), and the payload. `payload` points into the caller's buffer (parse) or at bytes
 * the caller keeps alive until the packet is serialised (build). Pad bytes are not payload. */
struct roce_pkt {
	struct roce_bth bth;
	struct roce_reth reth;
	struct roce_aeth aeth;
	struct roce_atomiceth atomic;
	uint64_t atomic_orig; /* AtomicAckETH */
	uint8_t imm[4];	      /* ImmDt, wire bytes */
	uint32_t ieth;	      /* R_Key to invalidate */
	struct roce_deth deth;
	uint32_t xrc_srqn; /* XRCETH: the XRC SRQ the request is for (24 bits; IBA 9.3.x) */
	const uint8_t *payload;
	uint32_t payload_len;
};

/* Why a packet was refused: each has a counter name (roce_err_name). */
enum roce_parse_err {
	ROCE_ERR_NONE = 0,
	ROCE_ERR_TRUNCATED, /* shorter than its opcode's headers + ICRC */
	ROCE_ERR_UNKNOWN_OPCODE,
	ROCE_ERR_BAD_TVER,
	ROCE_ERR_BAD_PAD,	     /* PadCnt larger than the bytes after the headers */
	ROCE_ERR_UNEXPECTED_PAYLOAD, /* payload on an opcode that carries none */
	ROCE_ERR__COUNT
};
const char *roce_err_name(enum roce_parse_err err);

/* Decode one transport packet: `buf` holds BTH .. ICRC inclusive (the UDP payload), `len` its
 * length. Fills *out (payload points into buf; ICRC not checked here). Returns ROCE_ERR_NONE
 * or the reason for refusing it; *out is unspecified on error. */
enum roce_parse_err roce_parse(const uint8_t *buf, size_t len, struct roce_pkt *out);

/* Bytes of BTH + extended headers for an opcode; 0 for unknown. */
size_t roce_hdr_len(uint8_t opcode);

/* Encode BTH + the extended headers of p->bth.opcode into buf (cap bytes). BTH.PadCnt is
 * taken from p->payload_len ((-len) & 3), not from p->bth.padcnt. Returns the header length,
 * or 0 if cap is too small or the opcode unknown. Payload, pad and ICRC are not written. */
size_t roce_build_hdrs(const struct roce_pkt *p, uint8_t *buf, size_t cap);

/* Serialise a whole transport packet (headers, payload, zero pad, and 4 spare bytes for the
 * ICRC, left zero) into buf. Returns the total length including the ICRC, or 0 if it does
 * not fit. Use roce_icrc_* to fill the last 4 bytes. */
size_t roce_build(const struct roce_pkt *p, uint8_t *buf, size_t cap);

/* ---- ICRC (spec section 6) ---- */

/* The IP/UDP envelope a transport packet travels in, as far as the ICRC covers it.
 * Addresses are 16 bytes: IPv4 as ::ffff:a.b.c.d. Masked fields (TOS, TTL, IPv6 traffic
 * class, flow label, hop limit, UDP checksum) are not inputs: they do not change the ICRC. */
struct roce_envelope {
	bool ipv6;
	uint8_t src[16];
	uint8_t dst[16];
	uint16_t ip_id; /* IPv4 identification as on the wire */
	bool df;	/* IPv4 don't-fragment flag; rxe and softrdma set it */
	uint16_t sport; /* UDP source port */
	uint16_t dport; /* UDP destination port, normally 4791 */
};

/* ICRC of a transport packet `pkt` (BTH .. pad, `len` bytes, ICRC excluded) sent in `env`.
 * Returns the 32-bit value; it goes on the wire least significant byte first
 * (roce_icrc_put). */
uint32_t roce_icrc(const struct roce_envelope *env, const uint8_t *pkt, size_t len);

/* roce_icrc of a packet in three pieces, hlen + plen + tlen bytes in all: its headers (hdr, at
 * least the BTH), then its payload and then the rest (pad), each where it lies. */
uint32_t roce_icrc3(const struct roce_envelope *env, const uint8_t *hdr, size_t hlen,
		    const uint8_t *payload, size_t plen, const uint8_t *tail, size_t tlen);

/* ICRC from the real IP header bytes of a captured frame (IPv4 without options, or IPv6),
 * starting at the IP header; `frame_len` counts from there to the end of the ICRC. Returns
 * 0 and *icrc_out on success, -EINVAL if the frame is not IP/UDP or too short. */
int roce_icrc_frame(const uint8_t *ip, size_t frame_len, uint32_t *icrc_out);

/* RoCEv1 (spec 1.2, IBA Annex A16): ICRC of a frame that starts at the GRH (40 bytes, IPVer 6,
 * NxtHdr 0x1B) and ends with the ICRC; `frame_len` counts from the GRH. The GRH's traffic
 * class, flow label and hop limit are masked like IPv6's (spec 6.2); there is no UDP header.
 * Returns 0 and *icrc_out, or -EINVAL if it is not such a GRH or too short. */
int roce_icrc_grh(const uint8_t *grh, size_t frame_len, uint32_t *icrc_out);

void roce_icrc_put(uint8_t out[4], uint32_t icrc);
uint32_t roce_icrc_get(const uint8_t in[4]);

/* Receive-side check on a plain UDP socket, which does not show the IPv4 identification.
 * IPv6: exact check. IPv4: the ICRC is affine in the 16 ID bits, so this accepts the packet
 * iff some ID value makes the ICRC match (solved in O(log len), not by search), and reports
 * it in *id_out (may be NULL). A corrupted packet passes with probability 2^-16 instead of
 * 2^-32. `pkt`/`len` cover BTH .. ICRC inclusive. env->ip_id is the ID expected (a hint): when
 * it is right the check is one CRC pass, else the solve runs (which takes about as long).
 * Returns 0 if the ICRC checks, -EBADMSG if not, -EINVAL if len < BTH + ICRC. */
int roce_icrc_check(const struct roce_envelope *env, const uint8_t *pkt, size_t len,
		    uint16_t *id_out);

/* rxe's UDP source port for a connected QP pair (spec 1.3): symmetric in the two QPNs. */
uint16_t roce_udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn);
/* rxe's source port at QP creation: 0xC000 + hash_32(qpn, 14). */
uint16_t roce_udp_sport_initial(uint32_t qpn);

/* RNR NAK timer code (5 bits) <-> microseconds (IBTA table "Encoding for RNR NAK Timer"). */
uint32_t roce_rnr_timer_us(uint8_t code);
/* Local ACK timeout: 4.096 us * 2^exp (exp 0 = infinite: returns 0). In nanoseconds. */
uint64_t roce_ack_timeout_ns(uint8_t exp);

#endif
