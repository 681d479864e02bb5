/* FPDU sizing and the transmit builder: RFC 5044 6.2 (MULPDU from the effective MSS, FPDU
 * alignment) as siw does it (siw_update_tcpseg, siw_prepare_fpdu in siw_qp_tx.c): the TCP
 * segment length is the MSS rounded down to 8; a segment that does not finish the message
 * fills it exactly (no pad, L = 0); the last one carries the rest (L = 1, pad as needed). */
#include "wire/iwarp/iwarp.h"

#include <errno.h>
#include <string.h>

#include "util/crc.h"

#define SEG_MAX 65536u /* a ULPDU_LENGTH of at most 65535 bounds the useful segment length */

uint16_t iw_mulpdu(uint32_t mss)
{
	uint32_t seg = (mss > SEG_MAX ? SEG_MAX : mss) & ~7u;

	if (seg < IW_FPDU_LEN_SIZE + IW_HDR_MAX + IW_FPDU_CRC_SIZE)
		return 0;
	return (uint16_t)(seg - IW_FPDU_LEN_SIZE - IW_FPDU_CRC_SIZE);
}

uint32_t iw_seg_payload(uint16_t mulpdu, uint8_t opcode, uint32_t remaining, bool *last)
{
	const struct iw_opinfo *oi = iw_opinfo(opcode);
	uint32_t room;

	*last = false;
	if (!oi || mulpdu < oi->hdr_len)
		return 0;
	room = (uint32_t)(mulpdu - oi->hdr_len);
	if (remaining <= room) {
		*last = true;
		return remaining;
	}
	return room;
}

int iw_tx_init(struct iw_tx *tx, const struct iw_hdr *h, uint32_t len, uint16_t mulpdu, bool crc)
{
	size_t hl = iw_hdr_len(h);

	if (!tx || !hl)
		return -EINVAL;
	if (len && !iw_opinfo(h->opcode)->payload)
		return -EINVAL;
	if (mulpdu < hl + (len ? 1 : 0)) /* every FPDU must make progress */
		return -EINVAL;
	if (h != &tx->hdr)
		tx->hdr = *h;
	tx->to0 = h->to;
	tx->mo0 = h->mo;
	tx->len = len;
	tx->sent = 0;
	tx->mulpdu = mulpdu;
	tx->hdr_len = (uint16_t)hl;
	tx->crc = crc;
	tx->done = false;
	return 0;
}

/* Sets tx->hdr to the next FPDU's header and *n to its payload size. */
static void plan(struct iw_tx *tx, uint32_t *n)
{
	uint32_t room = (uint32_t)(tx->mulpdu - tx->hdr_len), rest = tx->len - tx->sent;

	tx->hdr.last = rest <= room;
	*n = tx->hdr.last ? rest : room;
	if (tx->hdr.tagged)
		tx->hdr.to = tx->to0 + tx->sent; /* RFC 5041 4.2: TO of this segment's first byte */
	else
		tx->hdr.mo = tx->mo0 + tx->sent; /* RFC 5041 4.3: MO likewise */
}

int iw_tx_next_hdr(struct iw_tx *tx, uint8_t *hdr_out, size_t cap, uint32_t *off, uint32_t *n)
{
	int r;

	if (tx->done)
		return 0;
	plan(tx, n);
	r = iw_hdr_encode(&tx->hdr, *n, hdr_out, cap);
	if (r < 0)
		return r;
	*off = tx->sent;
	tx->sent += *n;
	tx->done = tx->hdr.last;
	return r;
}

int iw_tx_next(struct iw_tx *tx, const uint8_t *payload, uint8_t *out, size_t cap)
{
	uint32_t n, crc = 0;
	size_t total;
	int hl;

	if (tx->done)
		return 0;
	plan(tx, &n);
	if (n && !payload)
		return -EINVAL;
	hl = iw_hdr_encode(&tx->hdr, n, out, cap);
	if (hl < 0)
		return hl;
	total = iw_fpdu_len((uint32_t)hl - IW_FPDU_LEN_SIZE + n);
	if (cap < total)
		return -ENOSPC;
	if (n)
		memcpy(out + hl, payload + tx->sent, n);
	if (tx->crc)
		crc = crc32c(0, out, (size_t)hl + n);
	iw_fpdu_trailer(out + hl + n, (uint32_t)hl - IW_FPDU_LEN_SIZE + n, crc, tx->crc, NULL);
	tx->sent += n;
	tx->done = tx->hdr.last;
	return (int)total;
}
