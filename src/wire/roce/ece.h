/* softrdma's ECE (Enhanced Connection Establishment) values: what its RoCE RC QPs report in
 * ibv_query_ece and what its rdma_cm puts in the vendor ID / options of a REQ / REP
 * (wire/roce/cm_mad.h: the REQ's and the REP's vendor ID field, the AttributeModifier).
 *
 * One option exists: selective repeat (engine/eng.h eng_qp_set_sr), an IRN-style loss
 * recovery whose SACKs a standard RoCE peer would not understand. Two QPs use it only when
 * both said so: the peer's ECE must be exactly softrdma's vendor ID, the magic in the high 16
 * bits of the options and the SR bit. Anything else (rxe and kernel peers send vendor 0 /
 * options 0, a NIC its own vendor ID) leaves go-back-N, as IBA. Pure constants: included by
 * src/api (ibv_query_ece / ibv_set_ece) and src/cm (the handshake). */
#ifndef SOFTRDMA_WIRE_ECE_H
#define SOFTRDMA_WIRE_ECE_H

#include <stdbool.h>
#include <stdint.h>

/* The vendor ID: 24 bits on the wire (IBA 12.6 tables 106 / 110 as Linux uses them).
 * 0xFFFFFF, the vendor_id softrdma's devices report in ibv_query_device (as rxe). */
#define SR_ECE_VENDOR_ID 0xFFFFFFu
/* Options word: the magic "SR" (0x5352) in bits 31:16, feature bits below it. */
#define SR_ECE_MAGIC	   0x53520000u
#define SR_ECE_MAGIC_SHIFT 16
#define SR_ECE_OPT_SR	   0x00000001u /* selective repeat */
/* What a softrdma RoCE RC QP offers (ibv_query_ece before any ibv_set_ece). */
#define SR_ECE_OPTIONS (SR_ECE_MAGIC | SR_ECE_OPT_SR)

/* Whether a peer's ECE (vendor ID, options) says "softrdma with selective repeat". Any other
 * value, including a foreign vendor's options that happen to have bit 0 set, says no. */
static inline bool sr_ece_is_sr(uint32_t vendor_id, uint32_t options)
{
	return vendor_id == SR_ECE_VENDOR_ID &&
	       options >> SR_ECE_MAGIC_SHIFT == SR_ECE_MAGIC >> SR_ECE_MAGIC_SHIFT &&
	       (options & SR_ECE_OPT_SR) != 0;
}

#endif
