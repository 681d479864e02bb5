/* The BTH opcode table (spec section 3; IBTA 9.2 "OpCode field", rxe_opcode.c for which
 * headers each opcode carries). One const row per opcode, indexed by the opcode byte itself:
 * the engine and the codec ask the table, they never switch on opcode numbers. */
#include "wire/roce/roce.h"

/* Header lengths are derived from the header bits so the two can never disagree. */
#define HLEN(h)                                                                                    \
	(ROCE_BTH_LEN + (((h)&ROCE_HDR_DETH) ? ROCE_DETH_LEN : 0) +                                \
	 (((h)&ROCE_HDR_XRCETH) ? ROCE_XRCETH_LEN : 0) +                                           \
	 (((h)&ROCE_HDR_RETH) ? ROCE_RETH_LEN : 0) +                                               \
	 (((h)&ROCE_HDR_ATOMICETH) ? ROCE_ATOMICETH_LEN : 0) +                                     \
	 (((h)&ROCE_HDR_AETH) ? ROCE_AETH_LEN : 0) +                                               \
	 (((h)&ROCE_HDR_ATOMICACKETH) ? ROCE_ATOMICACKETH_LEN : 0) +                               \
	 (((h)&ROCE_HDR_IMMDT) ? ROCE_IMMDT_LEN : 0) + (((h)&ROCE_HDR_IETH) ? ROCE_IETH_LEN : 0))

#define OP(op, nm, tr, kd, ps, h, pl)                                                              \
	[op] = {.name = (nm),                                                                      \
		.opcode = (op),                                                                    \
		.transport = (tr),                                                                 \
		.kind = (kd),                                                                      \
		.pos = (ps),                                                                       \
		.hdrs = (h),                                                                       \
		.hdr_len = HLEN(h),                                                                \
		.payload = (pl),                                                                   \
		.imm = ((h)&ROCE_HDR_IMMDT) != 0,                                                  \
		.inv = ((h)&ROCE_HDR_IETH) != 0}

/* Short names for the table only. */
#define F  ROCE_POS_FIRST
#define M  ROCE_POS_MIDDLE
#define L  ROCE_POS_LAST
#define O  ROCE_POS_ONLY
#define IM ROCE_HDR_IMMDT
#define RE ROCE_HDR_RETH
#define AE ROCE_HDR_AETH
#define DE ROCE_HDR_DETH
#define IE ROCE_HDR_IETH
#define XE ROCE_HDR_XRCETH

/* UC uses the RC SEND and RDMA WRITE rows + 0x20 (spec 3: no READ, ATOMIC, ACK or
 * Invalidate on UC, as in rxe's table). UD has only SEND ONLY (+ immediate), with DETH. */
#define SEND_WRITE_ROWS(base, tr, pfx, x)                                                          \
	OP((base) + 0x00, pfx " Send First", tr, ROCE_KIND_SEND, F, x, true),                      \
	    OP((base) + 0x01, pfx " Send Middle", tr, ROCE_KIND_SEND, M, x, true),                 \
	    OP((base) + 0x02, pfx " Send Last", tr, ROCE_KIND_SEND, L, x, true),                   \
	    OP((base) + 0x03, pfx " Send Last Immediate", tr, ROCE_KIND_SEND, L, (x) | IM, true),  \
	    OP((base) + 0x04, pfx " Send Only", tr, ROCE_KIND_SEND, O, x, true),                   \
	    OP((base) + 0x05, pfx " Send Only Immediate", tr, ROCE_KIND_SEND, O, (x) | IM, true),  \
	    OP((base) + 0x06, pfx " RDMA Write First", tr, ROCE_KIND_WRITE, F, (x) | RE, true),    \
	    OP((base) + 0x07, pfx " RDMA Write Middle", tr, ROCE_KIND_WRITE, M, x, true),          \
	    OP((base) + 0x08, pfx " RDMA Write Last", tr, ROCE_KIND_WRITE, L, x, true),            \
	    OP((base) + 0x09, pfx " RDMA Write Last Immediate", tr, ROCE_KIND_WRITE, L, (x) | IM,  \
	       true),                                                                              \
	    OP((base) + 0x0A, pfx " RDMA Write Only", tr, ROCE_KIND_WRITE, O, (x) | RE, true),     \
	    OP((base) + 0x0B, pfx " RDMA Write Only Immediate", tr, ROCE_KIND_WRITE, O,            \
	       (x) | RE | IM, true)

/* The RC opcodes that are not SEND / WRITE (READ, responses, atomics, invalidate), at
 * base + the RC value; requests carry `x` (XRCETH on XRC), responses never do. */
#define OTHER_RC_ROWS(base, tr, pfx, x)                                                            \
	OP((base) + 0x0C, pfx " RDMA Read Request", tr, ROCE_KIND_READ_REQ, O, (x) | RE, false),   \
	    OP((base) + 0x0D, pfx " RDMA Read Response First", tr, ROCE_KIND_READ_RESP, F, AE,     \
	       true),                                                                              \
	    OP((base) + 0x0E, pfx " RDMA Read Response Middle", tr, ROCE_KIND_READ_RESP, M, 0,     \
	       true),                                                                              \
	    OP((base) + 0x0F, pfx " RDMA Read Response Last", tr, ROCE_KIND_READ_RESP, L, AE,      \
	       true),                                                                              \
	    OP((base) + 0x10, pfx " RDMA Read Response Only", tr, ROCE_KIND_READ_RESP, O, AE,      \
	       true),                                                                              \
	    OP((base) + 0x11, pfx " Acknowledge", tr, ROCE_KIND_ACK, O, AE, false),                \
	    OP((base) + 0x12, pfx " Atomic Acknowledge", tr, ROCE_KIND_ATOMIC_ACK, O,              \
	       AE | ROCE_HDR_ATOMICACKETH, false),                                                 \
	    OP((base) + 0x13, pfx " Compare Swap", tr, ROCE_KIND_ATOMIC, O,                        \
	       (x) | ROCE_HDR_ATOMICETH, false),                                                   \
	    OP((base) + 0x14, pfx " Fetch Add", tr, ROCE_KIND_ATOMIC, O, (x) | ROCE_HDR_ATOMICETH, \
	       false),                                                                             \
	    OP((base) + 0x16, pfx " Send Last Invalidate", tr, ROCE_KIND_SEND, L, (x) | IE, true), \
	    OP((base) + 0x17, pfx " Send Only Invalidate", tr, ROCE_KIND_SEND, O, (x) | IE, true)

/* Names are Wireshark's (packet-infiniband.c), so logs and tshark output read alike. */
static const struct roce_opinfo optab[256] = {
    SEND_WRITE_ROWS(0x00, ROCE_TR_RC, "RC", 0),
    OTHER_RC_ROWS(0x00, ROCE_TR_RC, "RC", 0),
    SEND_WRITE_ROWS(0x20, ROCE_TR_UC, "UC", 0),
    /* XRC (IBA 9.2, 9.8): the RC operations + 0xA0; every request carries the XRCETH. */
    SEND_WRITE_ROWS(ROCE_OP_XRC, ROCE_TR_XRC, "XRC", XE),
    OTHER_RC_ROWS(ROCE_OP_XRC, ROCE_TR_XRC, "XRC", XE),
    OP(0x64, "UD Send Only", ROCE_TR_UD, ROCE_KIND_SEND, O, DE, true),
    OP(0x65, "UD Send Only Immediate", ROCE_TR_UD, ROCE_KIND_SEND, O, DE | IM, true),
    /* CNP (spec 9.1, IBA A17): BTH + 16 reserved bytes, no extended-header bits. The
     * reserved bytes count as header so that a CNP has no payload. */
    [ROCE_CNP] = {.name = "CNP",
		  .opcode = ROCE_CNP,
		  .transport = ROCE_TR_CNP,
		  .kind = ROCE_KIND_CNP,
		  .pos = O,
		  .hdrs = 0,
		  .hdr_len = ROCE_BTH_LEN + 16,
		  .payload = false},
    /* softrdma's SACK (engine/sr.h): an RC NAK PSN sequence error (AETH) whose payload is
     * the bitmap of the PSNs the responder holds. It belongs to RC QPs, whatever its opcode
     * bits say (they name no transport in the manufacturer-specific range). */
    OP(ROCE_SR_SACK, "softrdma RC SACK", ROCE_TR_RC, ROCE_KIND_SACK, O, AE, true),
};

const struct roce_opinfo *roce_opinfo(uint8_t opcode)
{
	const struct roce_opinfo *oi = &optab[opcode];

	return oi->name ? oi : NULL;
}
