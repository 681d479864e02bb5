/* iWARP wire codecs: MPA start-up frames (RFC 5044 section 7.1, RFC 6581), FPDU framing and
 * CRC32c (RFC 5044 sections 4 and 6), DDP tagged/untagged headers (RFC 5041 section 4),
 * RDMAP control, Read Request and Terminate (RFC 5040 sections 4 and 7), the per-opcode
 * table, the error -> Terminate mapping, an MSS-sized FPDU builder and a resumable receive
 * state machine. Byte-compatible with Linux siw (../shared/spec/iwarp.md).
 *
 * Pure functions: no I/O, no clock, no allocation, no global state; every function may be
 * called from any thread on distinct objects (a struct iw_rx / iw_tx belongs to one thread).
 *
 * Byte order: every number in the structs below is a host-order value. On the wire all
 * header fields are big-endian; the one exception is the MPA CRC32c trailer, whose 4 bytes
 * are the CRC value least-significant byte first (as siw sends it and tshark checks it).
 *
 * Errors: functions return a non-negative result or a negative code. Negative codes are
 * either a negative errno (-EINVAL bad argument, -ENOSPC output buffer too small, -EMSGSIZE
 * a length that the protocol cannot carry, -EAGAIN "need more bytes, nothing consumed") or
 * the negation of an enum iw_err value (a specific wire malformation, >= IW_E__FIRST, far
 * above any errno). iw_err_name() names both kinds; iw_err_term() maps an iw_err to the
 * Terminate layer/type/code a peer must be sent (RFC 5040 section 7.1).
 *
 * Parsers read through bounded cursors and never cast packet bytes to structs; decoded
 * pointers point into the caller's buffer and are valid as long as that buffer is. */
#ifndef SOFTRDMA_WIRE_IWARP_H
#define SOFTRDMA_WIRE_IWARP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Sizes (bytes) ---- */
#define IW_MPA_KEY_LEN		16  /* "MPA ID Req Frame" / "MPA ID Rep Frame", no NUL */
#define IW_MPA_HDR_LEN		20  /* key + flags + Rev + PD_Length (RFC 5044 7.1) */
#define IW_MPA_V2_LEN		4   /* RFC 6581 IRD/ORD block at the start of the private data */
#define IW_MPA_PD_MAX		512 /* RFC 5044 7.1: PD_Length limit (includes the v2 block) */
#define IW_MPA_PD_MAX_SIW	256 /* siw MPA_MAX_PRIVDATA: siw refuses a longer PD_Length */
#define IW_MPA_FRAME_MAX	(IW_MPA_HDR_LEN + IW_MPA_PD_MAX)
#define IW_MPA_IRD_ORD_MAX	0x3fff /* 14-bit IRD / ORD fields (RFC 6581) */
#define IW_FPDU_LEN_SIZE	2      /* ULPDU_LENGTH field (RFC 5044 4.1) */
#define IW_FPDU_CRC_SIZE	4      /* CRC field, present even when CRC is not negotiated */
#define IW_DDP_TAGGED_HDR_LEN	14     /* ctrl + STag + TO (RFC 5041 4.2) */
#define IW_DDP_UNTAGGED_HDR_LEN 18     /* ctrl + RsvdULP + QN + MSN + MO (RFC 5041 4.3) */
#define IW_RREQ_LEN		28     /* Read Request header after the DDP header (RFC 5040 4.4) */
#define IW_RREQ_ULPDU_LEN	46     /* the whole Read Request ULPDU: 18 + 28, no payload */
#define IW_TERM_HDR_LEN		22     /* Terminate: untagged DDP header + Terminate Control */
/* Terminate with the optional parts: + DDP Segment Length (2) + terminated untagged DDP header
 * (18) + terminated RDMAP (Read Request) header (28) (RFC 5040 4.8). */
#define IW_TERM_ULPDU_MAX (IW_TERM_HDR_LEN + 2 + IW_DDP_UNTAGGED_HDR_LEN + IW_RREQ_LEN)
#define IW_HDR_MAX	  IW_TERM_ULPDU_MAX /* longest header the receive machine collects */
#define IW_FPDU_HDR_MAX	  (IW_FPDU_LEN_SIZE + IW_HDR_MAX)
#define IW_ULPDU_MAX	  65535 /* ULPDU_LENGTH field width */
/* Largest FPDU: 2 + 65535 + 3 pad + 4. */
#define IW_FPDU_MAX (IW_FPDU_LEN_SIZE + IW_ULPDU_MAX + 3 + IW_FPDU_CRC_SIZE)

#define IW_DDP_VERSION	 1 /* RFC 5041 */
#define IW_RDMAP_VERSION 1 /* RFC 5040 */

/* ---- DDP/RDMAP control word: the 16 bits after ULPDU_LENGTH (RFC 5041 4.1, RFC 5040 4.2) */
#define IW_CTRL_T	   0x8000 /* Tagged flag */
#define IW_CTRL_L	   0x4000 /* Last flag: last DDP segment of a message */
#define IW_CTRL_DDP_RSVD   0x3c00 /* reserved: sent 0, not checked (RFC 5041 4.1) */
#define IW_CTRL_DV	   0x0300 /* DDP version */
#define IW_CTRL_RV	   0x00c0 /* RDMAP version */
#define IW_CTRL_RDMAP_RSVD 0x0030 /* reserved: sent 0, not checked (RFC 5040 4.2) */
#define IW_CTRL_OPCODE	   0x000f /* RDMAP opcode */

/* RDMAP opcodes (RFC 5040 4.3). 8..11 are RFC 7306 extensions that siw does not implement;
 * softrdma refuses them like siw (IW_E_OPCODE). */
enum iw_opcode {
	IW_OP_WRITE = 0x0,
	IW_OP_READ_REQ = 0x1,
	IW_OP_READ_RESP = 0x2,
	IW_OP_SEND = 0x3,
	IW_OP_SEND_INV = 0x4,
	IW_OP_SEND_SE = 0x5,
	IW_OP_SEND_SE_INV = 0x6,
	IW_OP_TERMINATE = 0x7,
	IW_OP__COUNT = 8
};

/* Untagged queue numbers (RFC 5040 5.x "DDP queue" use; siw enum rdmap_untagged_qn). */
enum iw_qn {
	IW_QN_SEND = 0,	     /* Send family */
	IW_QN_READ_REQ = 1,  /* RDMA Read Request */
	IW_QN_TERMINATE = 2, /* Terminate */
	IW_QN__COUNT = 3
};

/* One row of the opcode table: protocol facts about an RDMAP opcode. */
struct iw_opinfo {
	const char *name; /* as tshark shows it: "Write", "Read Request", ... */
	uint8_t opcode;	  /* enum iw_opcode */
	bool tagged;	  /* DDP tagged buffer model (T = 1) */
	uint8_t qn;	  /* untagged: the queue (enum iw_qn) it must use; tagged: 0 */
	uint8_t hdr_len;  /* DDP + RDMAP header bytes in the ULPDU (not counting ULPDU_LENGTH);
			     Terminate: the fixed part (22) */
	bool payload;	  /* may carry payload bytes after the header */
	bool single;	  /* always exactly one DDP segment: L = 1 and MO = 0 */
	bool inval;	  /* RsvdULP carries the STag to invalidate (Send with Invalidate) */
	bool solicited;	  /* Solicited Event */
};

/* The table row for `opcode`, or NULL for an opcode outside 0..7. */
const struct iw_opinfo *iw_opinfo(uint8_t opcode);

/* ---- Terminate (RFC 5040 4.8 header, 7.1 error codes; siw iwarp.h) ---- */
enum iw_term_layer { IW_LAYER_RDMAP = 0, IW_LAYER_DDP = 1, IW_LAYER_LLP = 2 };
/* RDMAP error types */
enum { IW_ETYPE_RDMAP_CATASTROPHIC = 0, IW_ETYPE_RDMAP_PROTECTION = 1, IW_ETYPE_RDMAP_OP = 2 };
/* DDP error types */
enum { IW_ETYPE_DDP_CATASTROPHIC = 0, IW_ETYPE_DDP_TAGGED = 1, IW_ETYPE_DDP_UNTAGGED = 2 };
/* LLP error type */
enum { IW_ETYPE_LLP_MPA = 0 };
/* Header control bits of the Terminate Control word, as a 3-bit set. */
#define IW_TERM_M 0x4 /* DDP Segment Length valid */
#define IW_TERM_D 0x2 /* terminated DDP header included */
#define IW_TERM_R 0x1 /* terminated RDMAP header included */

/* The variable part of a Terminate message. */
struct iw_term {
	uint8_t layer; /* enum iw_term_layer (4 bits) */
	uint8_t etype; /* error type (4 bits) */
	uint8_t ecode; /* error code (8 bits) */
	bool m;	       /* M: ddp_seg_len is valid */
	bool d;	       /* D: ddp_seg_len and ddp_hdr are present */
	bool r;	       /* R: RDMAP header flagged as included (see rdmap_hdr_len) */
	uint16_t rsvd; /* the 13 reserved bits, as received; send 0 */
	/* Present iff d. The length of the terminated segment's payload (siw: its ULPDU_LENGTH
	 * minus its DDP/RDMAP header length). */
	uint16_t ddp_seg_len;
	uint8_t ddp_hdr_len; /* 0 (no d), 14 (tagged) or 18 (untagged): by the T bit of ddp_hdr */
	uint8_t ddp_hdr[IW_DDP_UNTAGGED_HDR_LEN]; /* terminated DDP header, wire bytes */
	/* 0 or 28. siw sets R on a Send-with-Invalidate failure without attaching anything,
	 * so R with rdmap_hdr_len 0 decodes fine; softrdma only sets R when it attaches. */
	uint8_t rdmap_hdr_len;
	uint8_t rdmap_hdr[IW_RREQ_LEN]; /* terminated Read Request header, wire bytes */
};

/* ---- DDP + RDMAP header of one FPDU ---- */

/* RDMA Read Request fields (RFC 5040 4.4). */
struct iw_rreq {
	uint32_t sink_stag; /* requester's buffer: where the Read Responses are placed */
	uint64_t sink_to;   /* tagged offset of the first byte there */
	uint32_t size;	    /* RDMA Read Message Size, bytes (0 allowed) */
	uint32_t src_stag;  /* responder's buffer (the WR's rkey) */
	uint64_t src_to;    /* tagged offset there (the WR's remote_addr) */
};

/* A decoded (or to-be-encoded) DDP/RDMAP header. Fields not used by the opcode's buffer model
 * are ignored on encode and left zero on decode. iw_hdr_init() gives valid defaults. */
struct iw_hdr {
	uint8_t opcode;	    /* enum iw_opcode */
	bool tagged;	    /* T; must equal iw_opinfo(opcode)->tagged */
	bool last;	    /* L */
	uint8_t dv;	    /* DDP version, 2 bits; 1 is the only valid value */
	uint8_t rv;	    /* RDMAP version, 2 bits; 1 is the only valid value */
	uint8_t ddp_rsvd;   /* the 4 reserved DDP control bits, as received; send 0 */
	uint8_t rdmap_rsvd; /* the 2 reserved RDMAP control bits, as received; send 0 */
	/* tagged (Write, Read Response) */
	uint32_t stag; /* data sink STag */
	uint64_t to;   /* tagged offset of this segment's first payload byte */
	/* untagged (everything else) */
	uint32_t rsvdulp;    /* DDP RsvdULP word: the STag to invalidate for Send with Invalidate
				variants, otherwise 0 (sent as given) */
	uint32_t qn;	     /* queue number (enum iw_qn) */
	uint32_t msn;	     /* message sequence number: per queue, first message 1, wraps */
	uint32_t mo;	     /* message offset of this segment's first payload byte */
	struct iw_rreq rreq; /* opcode IW_OP_READ_REQ */
	struct iw_term term; /* opcode IW_OP_TERMINATE */
};

/* Zeroes *h and sets the defaults of a valid header for `opcode`: T from the table, L = 1,
 * DV = RV = 1, QN = the opcode's queue. Returns 0, or -EINVAL for an opcode outside 0..7. */
int iw_hdr_init(struct iw_hdr *h, uint8_t opcode);

/* DDP + RDMAP header length in the ULPDU for h (Terminate: including its optional parts),
 * or 0 if h is not encodable (unknown opcode, T inconsistent with the opcode, bad Terminate
 * part lengths). */
size_t iw_hdr_len(const struct iw_hdr *h);

/* Writes ULPDU_LENGTH (= header length + payload_len) and the header into out (cap bytes).
 * DV, RV and the reserved bits are written as given (masked to their widths), so malformed
 * headers can be produced on purpose. Returns the bytes written (2 + iw_hdr_len(h)),
 * -EINVAL if h is not encodable or carries payload although its opcode cannot (Read
 * Request, Terminate), -EMSGSIZE if the ULPDU would exceed 65535 bytes, -ENOSPC if cap is
 * too small (nothing written). */
int iw_hdr_encode(const struct iw_hdr *h, uint32_t payload_len, uint8_t *out, size_t cap);

/* The header of a whole message in one FPDU (L set, MO or TO its first byte) with its
 * ULPDU_LENGTH, written straight from the fields, as iw_hdr_encode writes it from an
 * iw_hdr_init header with the same fields: the common small message costs no iw_hdr.
 * iw_hdr_put_send: a Send (opcode IW_OP_SEND, _INV, _SE or _SE_INV; rsvdulp the STag to
 * invalidate or 0); iw_hdr_put_write: an RDMA Write to stag / to. Return the bytes written
 * (2 + the header), or 0 (nothing written) if cap is short, the opcode is not a Send or the
 * ULPDU would exceed 65535 bytes. */
size_t iw_hdr_put_send(uint8_t *out, size_t cap, uint8_t opcode, uint32_t rsvdulp, uint32_t msn,
		       uint32_t payload_len);
size_t iw_hdr_put_write(uint8_t *out, size_t cap, uint32_t stag, uint64_t to, uint32_t payload_len);

/* ---- FPDU framing (RFC 5044 4.1, 6: no markers) ---- */

/* PAD bytes after a ULPDU: (2 + ulpdu_len + pad) is a multiple of 4. */
static inline unsigned iw_fpdu_pad(uint32_t ulpdu_len)
{
	return (unsigned)(-(ulpdu_len + IW_FPDU_LEN_SIZE)) & 3u;
}

/* Total FPDU bytes for a ULPDU: 2 + ulpdu_len + pad + 4 (always a multiple of 4). */
static inline size_t iw_fpdu_len(uint32_t ulpdu_len)
{
	return IW_FPDU_LEN_SIZE + (size_t)ulpdu_len + iw_fpdu_pad(ulpdu_len) + IW_FPDU_CRC_SIZE;
}

/* Writes an FPDU's trailer: the pad, then the CRC field. `crc` is the running crc32c()
 * (src/util/crc.h convention: start from 0) over every byte from ULPDU_LENGTH to the last
 * payload byte; the pad bytes are folded in here. `pad` gives the pad bytes to send (NULL:
 * zeros, as RFC 5044 4.1 requires; non-NULL reproduces a captured FPDU's pad). With
 * crc_on false the CRC field is 4 zero bytes. out needs iw_fpdu_pad(ulpdu_len) + 4 bytes.
 * Returns the bytes written. Never fails. */
size_t iw_fpdu_trailer(uint8_t *out, uint32_t ulpdu_len, uint32_t crc, bool crc_on,
		       const uint8_t *pad);

/* A whole FPDU, decoded from (or to be encoded into) one contiguous buffer. */
struct iw_fpdu {
	struct iw_hdr hdr;
	uint16_t ulpdu_len;	/* ULPDU_LENGTH */
	const uint8_t *payload; /* decode: points into the input buffer; encode: caller's bytes
				   (may be NULL when payload_len is 0) */
	uint32_t payload_len;
	uint8_t pad[3];	 /* pad bytes (decode: as received, siw sometimes sends non-zero
			    bytes here; encode: sent as given, zero them for RFC 5044) */
	uint8_t pad_len; /* decode: iw_fpdu_pad(ulpdu_len); ignored on encode */
	uint32_t crc;	 /* decode: the CRC field's value (wire bytes read little-endian), whether
			    or not CRC is negotiated; ignored on encode */
};

/* Decodes the FPDU at the start of buf. With crc_on the CRC32c is verified. max_ulpdu: the
 * largest ULPDU_LENGTH accepted (0 = 65535). Returns the FPDU's length in bytes (> 0),
 * -EAGAIN if buf holds less than a whole FPDU and no error is visible yet, or -IW_E_* (see
 * iw_rx_step for the checks). *out is filled on success only. */
int iw_fpdu_decode(const uint8_t *buf, size_t len, bool crc_on, uint16_t max_ulpdu,
		   struct iw_fpdu *out);

/* Encodes f->hdr, f->payload, f->pad and the CRC (computed with crc_on, zero otherwise) into
 * out. Returns the FPDU length, or the errors of iw_hdr_encode. */
int iw_fpdu_encode(const struct iw_fpdu *f, bool crc_on, uint8_t *out, size_t cap);

/* ---- FPDU sizing and the transmit builder (RFC 5044 6.2 MULPDU; siw siw_qp_tx.c) ---- */

/* The largest ULPDU_LENGTH siw puts in one TCP segment for an MSS: the segment length is the
 * MSS rounded down to a multiple of 8 (at most 65536), minus ULPDU_LENGTH and CRC (6). Such
 * an FPDU needs no pad and fills the segment exactly. MSS 1448 -> 1442, 1460 -> 1450.
 * Returns 0 if the segment could not hold the longest header (a 70-byte Terminate). */
uint16_t iw_mulpdu(uint32_t mss);

/* Payload bytes siw puts in the next FPDU of a message of `opcode` with `remaining` payload
 * bytes left, at MULPDU `mulpdu`: all of them (and *last = true) if they fit, else
 * mulpdu - header length (*last = false). Returns 0 with *last = true for an empty rest, and
 * 0 with *last = false if mulpdu cannot hold the header (or the opcode is unknown). */
uint32_t iw_seg_payload(uint16_t mulpdu, uint8_t opcode, uint32_t remaining, bool *last);

/* Builds the FPDUs of one message. The caller owns the struct; it holds no pointers. */
struct iw_tx {
	struct iw_hdr hdr; /* the message's header; from the first FPDU framed on, that FPDU's
			      (its TO or MO, its L): encoded from here, not from a copy */
	uint64_t to0;	   /* TO and MO of the message's first segment */
	uint32_t mo0;
	uint32_t len;	  /* message payload bytes */
	uint32_t sent;	  /* payload bytes already framed */
	uint16_t mulpdu;  /* from iw_mulpdu() */
	uint16_t hdr_len; /* iw_hdr_len(&hdr) */
	bool crc;	  /* CRC32c negotiated */
	bool done;	  /* the last FPDU has been framed */
};

/* Prepares a message. h may be &tx->hdr itself (a header built in place is not copied).
 * Returns 0, or -EINVAL (header not encodable, payload on a Read Request or Terminate, or
 * mulpdu too small for the header). */
int iw_tx_init(struct iw_tx *tx, const struct iw_hdr *h, uint32_t len, uint16_t mulpdu, bool crc);

/* Frames the next FPDU into out: header, payload bytes [sent, sent + n) of `payload` (the
 * whole message, tx->len bytes; NULL allowed if len is 0), zero pad, CRC. Segments carry
 * TO = hdr.to + offset (tagged) or MO = hdr.mo + offset (untagged), L only on the last.
 * A zero-length message gives exactly one FPDU. Returns the FPDU length, 0 once the message
 * is done, or -ENOSPC if out is too small (nothing framed: a call with more room frames the
 * same FPDU). */
int iw_tx_next(struct iw_tx *tx, const uint8_t *payload, uint8_t *out, size_t cap);

/* Zero-copy form of iw_tx_next: writes only ULPDU_LENGTH + header into hdr_out and reports the
 * payload slice [*off, *off + *n) to send after it; the caller sends the slice from its own
 * memory and then the trailer from iw_fpdu_trailer() (CRC over header, slice). Returns the
 * header length, 0 once done, -ENOSPC if cap is too small. */
int iw_tx_next_hdr(struct iw_tx *tx, uint8_t *hdr_out, size_t cap, uint32_t *off, uint32_t *n);

/* A complete Terminate FPDU (QN 2, MO 0, L 1, DV = RV = 1) carrying *t, with MSN `msn`
 * (siw always sends 1). Returns its length, or the errors of iw_fpdu_encode. */
int iw_term_build(const struct iw_term *t, uint32_t msn, bool crc_on, uint8_t *out, size_t cap);

/* ---- Errors and their Terminate codes ---- */

/* X(name, layer, etype, ecode, hdrct) — one row per error: the Terminate that reports it
 * (RFC 5040 7.1 / RFC 5041 7.2 / RFC 5044 8 / RFC 6581 values, as in siw iwarp.h) and which
 * headers siw attaches (hdrct: IW_TERM_M/D/R; siw_send_terminate). */
#define IW_ERRORS(X)                                                                               \
	/* Stream / FPDU malformations, found by the decoders in this file. */                     \
	X(ULPDU_LEN, IW_LAYER_DDP, IW_ETYPE_DDP_CATASTROPHIC, 0x00, 0)                             \
	X(ULPDU_TOO_BIG, IW_LAYER_DDP, IW_ETYPE_DDP_CATASTROPHIC, 0x00, 0)                         \
	X(CRC, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x02, 0)                                            \
	X(DDP_VERSION_T, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, 0x04, 0)                               \
	X(DDP_VERSION_U, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x06, 0)                             \
	X(RDMAP_VERSION, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x05, 0)                               \
	X(OPCODE, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x06, 0)                                      \
	X(DDP_FLAGS, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x06, 0)                                   \
	X(QN, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x01, IW_TERM_M | IW_TERM_D)                    \
	X(MO, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x04, IW_TERM_M | IW_TERM_D)                    \
	X(TERM_FMT, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_CATASTROPHIC, 0xff, 0)                          \
	/* MPA start-up frames (RFC 5044 7.1, RFC 6581). */                                        \
	X(MPA_KEY, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x04, 0)                                        \
	X(MPA_REV, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x04, 0)                                        \
	X(MPA_MARKERS, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x04, 0)                                    \
	X(MPA_PD_LEN, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x04, 0)                                     \
	X(MPA_V2, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x04, 0)                                         \
	X(MPA_IRD, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x06, 0)                                        \
	X(MPA_RTR, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x07, 0)                                        \
	/* Stateful checks the engine makes (placement, sequencing); listed here so that           \
	 * every Terminate code comes from this one table. */                                      \
	X(T_STAG, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, 0x00, IW_TERM_M | IW_TERM_D)                  \
	X(T_BOUNDS, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, 0x01, IW_TERM_M | IW_TERM_D)                \
	X(T_NOT_ASSOC, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, 0x02, IW_TERM_M | IW_TERM_D)             \
	X(T_TO_WRAP, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, 0x03, IW_TERM_M | IW_TERM_D)               \
	X(U_NO_BUF, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x02, IW_TERM_M | IW_TERM_D)              \
	X(U_MSN_RANGE, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x03, IW_TERM_M | IW_TERM_D)           \
	X(U_TOO_LONG, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x05, IW_TERM_M | IW_TERM_D)            \
	X(RP_STAG, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x00,                                \
	  IW_TERM_M | IW_TERM_D | IW_TERM_R)                                                       \
	X(RP_BOUNDS, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x01,                              \
	  IW_TERM_M | IW_TERM_D | IW_TERM_R)                                                       \
	X(RP_ACCESS, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x02,                              \
	  IW_TERM_M | IW_TERM_D | IW_TERM_R)                                                       \
	X(RP_NOT_ASSOC, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x03,                           \
	  IW_TERM_M | IW_TERM_D | IW_TERM_R)                                                       \
	X(RP_TO_WRAP, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x04,                             \
	  IW_TERM_M | IW_TERM_D | IW_TERM_R)                                                       \
	X(RP_INVALIDATE, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x09,                          \
	  IW_TERM_M | IW_TERM_D | IW_TERM_R)                                                       \
	X(RO_INVALIDATE, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x09, IW_TERM_M | IW_TERM_D)           \
	X(RO_STREAM, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x07, IW_TERM_M | IW_TERM_D)               \
	X(RO_GLOBAL, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x08, IW_TERM_M | IW_TERM_D)               \
	X(LOCAL, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_CATASTROPHIC, 0xff, 0)

/* Error codes, returned negated. What each means:
 * ULPDU_LEN      ULPDU_LENGTH below the smallest header (14), below the opcode's header, or
 *                not the fixed size of a Read Request (46) / Terminate (22..70)
 * ULPDU_TOO_BIG  ULPDU_LENGTH above the receiver's negotiated maximum
 * CRC            CRC32c mismatch (only when CRC is negotiated)
 * DDP_VERSION_T/_U  DV != 1 in a tagged / untagged segment
 * RDMAP_VERSION  RV != 1
 * OPCODE         RDMAP opcode > 7 (unknown, or RFC 7306 which siw does not speak)
 * DDP_FLAGS      T inconsistent with the opcode, or L = 0 on a single-segment message
 * QN             queue number not the opcode's queue (includes QN > 2)
 * MO             message offset invalid (stateless: MO != 0 on Read Request / Terminate)
 * TERM_FMT       a Terminate whose optional parts do not match its D/R bits and length
 * MPA_KEY        not "MPA ID Req Frame" / "MPA ID Rep Frame" (or not the one expected)
 * MPA_REV        Rev not 1 or 2
 * MPA_MARKERS    M set: markers requested (siw and softrdma never use markers)
 * MPA_PD_LEN     PD_Length above the limit (512)
 * MPA_V2         Rev 2 + Enhanced without room for the IRD/ORD block, or an enhanced
 *                request answered without it
 * MPA_IRD        insufficient IRD (RFC 6581), MPA_RTR no matching RTR option
 * T_*, U_*, RP_*, RO_*, LOCAL  engine-level checks (RFC 5041 7.2 tagged/untagged buffer
 *                errors, RFC 5040 7.1 remote protection/operation, local catastrophic). */
enum iw_err {
	IW_E__BEFORE = 4095, /* keeps the codes clear of errno values */
#define IW_ERR_ENUM_(name, layer, etype, ecode, hdrct) IW_E_##name,
	IW_ERRORS(IW_ERR_ENUM_)
#undef IW_ERR_ENUM_
	    IW_E__END
};
#define IW_E__FIRST (IW_E__BEFORE + 1)

/* Name of an error code, negative or positive: "ULPDU_LEN", ... for iw errors, "EAGAIN",
 * "EINVAL", "ENOSPC", "EMSGSIZE" for those errnos, "OK" for 0, "?" otherwise. Static string. */
const char *iw_err_name(int err);

/* True if err (negative or positive) is an enum iw_err value. */
bool iw_is_err(int err);

/* The Terminate that reports an error. */
struct iw_term_code {
	uint8_t layer; /* enum iw_term_layer */
	uint8_t etype;
	uint8_t ecode;
	uint8_t hdrct; /* IW_TERM_M | IW_TERM_D | IW_TERM_R: what siw attaches */
};

/* Maps an error (negative or positive iw_err) to its Terminate. Returns 0, or -EINVAL if err
 * is not an iw_err (an errno is a local problem, not something to tell the peer). */
int iw_err_term(int err, struct iw_term_code *out);

/* Fills a Terminate for `err` the way siw does (siw_send_terminate): layer/etype/ecode from
 * iw_err_term; if the table says D and `raw` holds the offending FPDU's ULPDU_LENGTH and at
 * least its DDP header (as iw_rx exposes it), M and D are set, ddp_seg_len is that FPDU's
 * payload length and ddp_hdr a copy of its DDP header; if it says R and the offending
 * message is a Read Request whose 28-byte header is in raw, R is set and it is attached.
 * raw may be NULL. Returns 0, or -EINVAL if err is not an iw_err. Zeroes *out first. */
int iw_term_from_err(int err, const uint8_t *raw, size_t raw_len, struct iw_term *out);

/* ---- MPA Request / Reply (RFC 5044 7.1; RFC 6581 enhanced mode; siw siw_cm.c) ---- */

enum iw_mpa_kind { IW_MPA_ANY = 0, IW_MPA_REQ = 1, IW_MPA_REP = 2 };

/* MPA flags octet (byte 16). */
#define IW_MPA_F_M    0x80 /* Markers: the sender of this frame wants markers */
#define IW_MPA_F_C    0x40 /* CRC */
#define IW_MPA_F_R    0x20 /* Reject (Reply only) */
#define IW_MPA_F_ENH  0x10 /* RFC 6581 enhanced mode: IRD/ORD block present (Rev 2) */
#define IW_MPA_F_GSO  0x08 /* siw-private "GSO experimental" */
#define IW_MPA_F_RSVD 0x07 /* reserved */

/* The RFC 6581 IRD/ORD block (first 4 bytes of the private data when Rev = 2 and Enhanced
 * is set): two big-endian 16-bit words, each a 14-bit count under two control bits. */
struct iw_mpa_v2 {
	bool p2p;	/* IRD word 0x8000: peer-to-peer mode, an RTR frame follows */
	bool rtr_send;	/* IRD word 0x4000: zero-length Send RTR (cxgb4 ZERO_LEN_FPDU_RTR);
			   siw never sets it and ignores it; send false */
	uint16_t ird;	/* inbound RDMA Read depth of the frame's sender, 0..0x3fff */
	bool rtr_write; /* ORD word 0x8000: zero-length RDMA Write as RTR (siw: preferred) */
	bool rtr_read;	/* ORD word 0x4000: zero-length RDMA Read as RTR */
	uint16_t ord;	/* outbound RDMA Read depth of the frame's sender, 0..0x3fff */
};

/* An MPA Request, Reply or Reject (a Reply with R set). */
struct iw_mpa {
	uint8_t kind;	     /* IW_MPA_REQ or IW_MPA_REP: selects the key */
	bool m;		     /* markers requested */
	bool c;		     /* CRC requested (Request) / in use (Reply) */
	bool r;		     /* reject (Reply only) */
	bool enhanced;	     /* Enhanced flag (0x10) */
	bool gso;	     /* siw-private GSO flag (0x08) */
	uint8_t rsvd;	     /* the 3 reserved flag bits, as received; send 0 */
	uint8_t rev;	     /* 1 (RFC 5044) or 2 (RFC 6581) */
	struct iw_mpa_v2 v2; /* valid iff iw_mpa_has_v2() */
	const uint8_t *pd;   /* ULP private data after the v2 block (decode: into the input) */
	uint16_t pd_len;     /* its length; PD_Length on the wire adds 4 with the v2 block */
};

/* The frame carries the IRD/ORD block: Rev 2 with the Enhanced flag (siw's rule). */
static inline bool iw_mpa_has_v2(const struct iw_mpa *f)
{
	return f->rev == 2 && f->enhanced;
}

/* Bytes iw_mpa_encode writes for f: 20 + (4 if v2) + pd_len. */
size_t iw_mpa_len(const struct iw_mpa *f);

/* Encodes f into out. Returns the frame length, -EINVAL (kind not REQ/REP, R on a Request,
 * Rev not 1/2, IRD/ORD above 0x3fff, pd NULL with pd_len > 0), -EMSGSIZE (PD_Length above
 * 512), -ENOSPC (cap too small; nothing written). M may be encoded (to test peers). */
int iw_mpa_encode(const struct iw_mpa *f, uint8_t *out, size_t cap);

/* Decodes the MPA frame at the start of buf (the first bytes of a TCP stream). `expect`:
 * IW_MPA_REQ (responder), IW_MPA_REP (initiator) or IW_MPA_ANY (traces). Resumable: returns
 * -EAGAIN, consuming nothing, while the frame is incomplete and nothing wrong is visible yet;
 * call again with more bytes (the same buffer start). Checks, in stream order: key (each
 * byte as soon as it arrives: garbage is refused early) -> -IW_E_MPA_KEY; Rev -> -IW_E_MPA_REV;
 * PD_Length > 512 -> -IW_E_MPA_PD_LEN; with the whole frame: Rev 2 + Enhanced with
 * PD_Length < 4 -> -IW_E_MPA_V2; M -> -IW_E_MPA_MARKERS, with *out fully decoded so that a
 * responder can answer with a reject (iw_mpa_reject_init). Returns the frame length (> 0)
 * on success; bytes after it are FPDUs (or, before the reply is sent, a protocol error the
 * caller detects). out->pd points into buf. */
int iw_mpa_decode(const uint8_t *buf, size_t len, uint8_t expect, struct iw_mpa *out);

/* siw's default Request (siw_connect): Rev 2, Enhanced, C = crc, no markers, no P2P, IRD/ORD
 * block {ird, ord}, then the ULP private data (pd is borrowed: keep it alive until encoded). */
void iw_mpa_req_init(struct iw_mpa *req, bool crc, uint16_t ird, uint16_t ord, const uint8_t *pd,
		     uint16_t pd_len);

/* The Reply a siw responder sends to `req` (siw_proc_mpareq + siw_accept): flags and Rev
 * echoed, key "Rep", M cleared, C = req->c || crc_required; with the v2 block (iff the
 * request had it) carrying {ird, ord}; if the request asked for P2P the reply keeps P2P and
 * selects exactly one RTR: Write if offered, else Read if offered, else Write. Returns 0, or
 * -IW_E_MPA_MARKERS if the request wants markers (send iw_mpa_reject_init's frame instead). */
int iw_mpa_reply_init(struct iw_mpa *rep, const struct iw_mpa *req, bool crc_required, uint16_t ird,
		      uint16_t ord, const uint8_t *pd, uint16_t pd_len);

/* The Reject siw sends (siw_proc_mpareq reject path, siw_reject): the request's flags and
 * Rev echoed with R set and M cleared, IRD/ORD block {0, 0} iff the request had one, then
 * `pd` (the ULP's reject data; NULL/0 for a protocol reject). */
void iw_mpa_reject_init(struct iw_mpa *rej, const struct iw_mpa *req, const uint8_t *pd,
			uint16_t pd_len);

/* Initiator-side check of a decoded Reply against the Request it answers (siw_proc_mpareply).
 * Returns 0 if the connection can go to RTS (CRC is used iff rep->c), -ECONNREFUSED if the
 * peer rejected (R), -IW_E_MPA_MARKERS if the reply wants markers, -IW_E_MPA_V2 if an
 * enhanced request got a reply without Rev 2 + Enhanced, -IW_E_MPA_RTR if P2P was requested
 * but the reply selects none of the offered RTR types, -IW_E_MPA_KEY if rep is not a Reply. */
int iw_mpa_check_reply(const struct iw_mpa *req, const struct iw_mpa *rep);

/* ---- The receive state machine ---- */

/* What iw_rx_step reports. */
enum iw_rx_evtype {
	IW_RX_NEED_MORE = 0, /* all input consumed, no event: call again with more bytes */
	IW_RX_HDR = 1,	     /* an FPDU's header is complete and valid: ev.hdr */
	IW_RX_DATA = 2,	     /* a payload chunk: ev.data / ev.len at payload offset ev.off */
	IW_RX_END = 3,	     /* the FPDU's pad and CRC are in, the CRC checked (if on) */
};

/* One event. Pointers stay valid until the next iw_rx_step() or iw_rx_fpdu() call on the same rx
 * (hdr, raw) or as long as the caller's input buffer (data). */
struct iw_rx_ev {
	const struct iw_hdr *hdr; /* HDR, DATA, END: the current FPDU's header */
	const uint8_t *raw;	  /* HDR, DATA, END: its ULPDU_LENGTH + header bytes as received */
	uint16_t raw_len;
	uint16_t ulpdu_len;   /* ULPDU_LENGTH of the current FPDU */
	uint32_t payload_len; /* its payload bytes (ULPDU_LENGTH - header length) */
	/* DATA: a chunk of the payload inside the caller's buffer, never empty. Place it at
	 * hdr->to + off (tagged) or at message offset hdr->mo + off (untagged). */
	const uint8_t *data;
	uint32_t len;
	uint32_t off; /* offset of data[0] within this FPDU's payload */
	/* END */
	uint8_t pad[3];	 /* the pad bytes as received (RFC: zero; siw may send others) */
	uint8_t pad_len; /* 0..3 */
	uint32_t crc;	 /* the CRC field's value, read little-endian */
};

/* Receiver of one direction of a TCP stream in FPDU mode (after the MPA exchange). The caller
 * owns it; plain data (may be copied to snapshot the parse state); no pointers. Fields are
 * private except the two configuration fields and `fpdus`. */
struct iw_rx {
	bool crc;	    /* CRC32c negotiated: verify every FPDU */
	uint16_t max_ulpdu; /* larger ULPDU_LENGTH -> IW_E_ULPDU_TOO_BIG */
	uint64_t fpdus;	    /* FPDUs completed so far */
	/* private */
	uint8_t state;
	uint16_t have; /* bytes of raw[] collected */
	uint16_t need; /* bytes of raw[] needed for the next decision */
	uint16_t ulpdu_len;
	uint16_t hdr_len; /* DDP/RDMAP header bytes (Terminate: the whole ULPDU) */
	uint32_t pay_done;
	uint8_t trl_have;
	uint8_t trl[3 + IW_FPDU_CRC_SIZE];
	uint32_t crc_acc;
	int err;
	struct iw_hdr hdr;
	uint8_t raw[IW_FPDU_HDR_MAX];
};

/* Starts a receiver at an FPDU boundary. max_ulpdu 0 means 65535. */
void iw_rx_init(struct iw_rx *rx, bool crc, uint16_t max_ulpdu);

/* Consumes stream bytes from buf (len may be anything, 1 byte at a time works) up to the next
 * event, sets *used to the bytes consumed and returns the event type (>= 0) with *ev filled:
 * IW_RX_NEED_MORE when all len bytes were consumed without completing an event ("need more
 * bytes" is never an error: header bytes are kept inside rx). Payload is never copied: DATA
 * chunks point into buf, so the caller can place them directly into registered memory.
 * Payload is handed out before the CRC at the FPDU's end is checked; a CRC error means the
 * whole message is bad (RFC 5044 8: the connection is terminated).
 * Errors (negated iw_err, in the order checked): ULPDU_TOO_BIG, ULPDU_LEN (< 14) after the
 * length; then DDP_VERSION_T/U, RDMAP_VERSION, OPCODE, DDP_FLAGS, ULPDU_LEN (opcode's size)
 * after the control word; QN, MO, TERM_FMT with the whole header; CRC after the trailer.
 * *used then counts the bytes consumed up to and including those that revealed the error;
 * the error is sticky: later calls return it again and consume nothing. iw_rx_raw() shows
 * the offending header for iw_term_from_err(). rx, used and ev must not be NULL; buf may be
 * NULL only when len is 0 (else -EINVAL). */
int iw_rx_step(struct iw_rx *rx, const uint8_t *buf, size_t len, size_t *used, struct iw_rx_ev *ev);

/* The small-message shortcut: when rx sits at an FPDU boundary and buf starts with a whole
 * FPDU whose header is valid and whose CRC (if on) is good, consumes it (*used) and returns 1
 * with *ev holding what iw_rx_step's HDR, DATA and END events would have held together: hdr,
 * raw, ulpdu_len and payload_len; the payload (data, len = payload_len, off 0; data NULL when
 * empty); pad and crc (hdr valid until the next call on rx, of either function; raw points
 * into buf).
 * Otherwise returns 0 and consumes nothing, rx still at the same boundary (only its private
 * decoded header may have been overwritten): iw_rx_step then takes the bytes, and reports a
 * bad header or CRC where it always has. */
int iw_rx_fpdu(struct iw_rx *rx, const uint8_t *buf, size_t len, size_t *used, struct iw_rx_ev *ev);

/* The current FPDU's header bytes received so far (ULPDU_LENGTH first); *len gets their
 * count. Valid until the next iw_rx_step. */
const uint8_t *iw_rx_raw(const struct iw_rx *rx, size_t *len);

/* True if rx sits at an FPDU boundary (no partial FPDU pending, no error). */
bool iw_rx_idle(const struct iw_rx *rx);

/* The machine's state for logs: "HDR" (collecting a header), "DATA", "TRAILER" (pad + CRC)
 * or "ERROR". Static string. */
const char *iw_rx_state_name(const struct iw_rx *rx);

#endif
