/* iWARP error codes, their Terminate codes (RFC 5040 7.1, RFC 5041 7.2, RFC 5044 8,
 * RFC 6581) and the Terminate message builder. The table is IW_ERRORS in iwarp.h. */
#include "wire/iwarp/iwarp.h"

#include <errno.h>
#include <string.h>

struct errrow {
	const char *name;
	struct iw_term_code code;
};

static const struct errrow errtab[IW_E__END - IW_E__FIRST] = {
#define IW_ERR_ROW_(name_, layer_, etype_, ecode_, hdrct_)                                         \
	[IW_E_##name_ - IW_E__FIRST] = {#name_, {layer_, etype_, ecode_, hdrct_}},
    IW_ERRORS(IW_ERR_ROW_)
#undef IW_ERR_ROW_
};

static const struct errrow *row(int err)
{
	if (err < 0)
		err = -err;
	if (err < IW_E__FIRST || err >= IW_E__END)
		return NULL;
	return &errtab[err - IW_E__FIRST];
}

bool iw_is_err(int err)
{
	return row(err) != NULL;
}

const char *iw_err_name(int err)
{
	const struct errrow *r = row(err);

	if (r)
		return r->name;
	if (err < 0)
		err = -err;
	switch (err) {
	case 0:
		return "OK";
	case EAGAIN:
		return "EAGAIN";
	case EINVAL:
		return "EINVAL";
	case ENOSPC:
		return "ENOSPC";
	case EMSGSIZE:
		return "EMSGSIZE";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	default:
		return "?";
	}
}

int iw_err_term(int err, struct iw_term_code *out)
{
	const struct errrow *r = row(err);

	if (!r || !out)
		return -EINVAL;
	*out = r->code;
	return 0;
}

int iw_term_from_err(int err, const uint8_t *raw, size_t raw_len, struct iw_term *out)
{
	struct iw_term_code code;
	int rc;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	rc = iw_err_term(err, &code);
	if (rc < 0)
		return rc;
	out->layer = code.layer;
	out->etype = code.etype;
	out->ecode = code.ecode;
	/* siw_send_terminate: the offending segment's header, from its ULPDU_LENGTH on, with
	 * ULPDU_LENGTH replaced by its payload length (the DDP Segment Length). */
	if ((code.hdrct & IW_TERM_D) && raw && raw_len > IW_FPDU_LEN_SIZE) {
		bool tagged = raw[IW_FPDU_LEN_SIZE] & 0x80;
		size_t dlen = tagged ? IW_DDP_TAGGED_HDR_LEN : IW_DDP_UNTAGGED_HDR_LEN;

		if (raw_len >= IW_FPDU_LEN_SIZE + dlen) {
			uint16_t ulpdu = (uint16_t)(raw[0] << 8 | raw[1]);
			uint8_t op = raw[IW_FPDU_LEN_SIZE + 1] & IW_CTRL_OPCODE;
			const struct iw_opinfo *oi = iw_opinfo(op);
			size_t hl = (oi && oi->tagged == tagged) ? oi->hdr_len : dlen;

			out->m = code.hdrct & IW_TERM_M;
			out->d = true;
			out->ddp_seg_len = (uint16_t)(ulpdu > hl ? ulpdu - hl : 0);
			out->ddp_hdr_len = (uint8_t)dlen;
			memcpy(out->ddp_hdr, raw + IW_FPDU_LEN_SIZE, dlen);
			if ((code.hdrct & IW_TERM_R) && !tagged && op == IW_OP_READ_REQ &&
			    raw_len >= IW_FPDU_LEN_SIZE + IW_RREQ_ULPDU_LEN) {
				out->r = true;
				out->rdmap_hdr_len = IW_RREQ_LEN;
				memcpy(out->rdmap_hdr, raw + IW_FPDU_LEN_SIZE + dlen, IW_RREQ_LEN);
			}
		}
	}
	return 0;
}

int iw_term_build(const struct iw_term *t, uint32_t msn, bool crc_on, uint8_t *out, size_t cap)
{
	struct iw_fpdu f;

	if (!t)
		return -EINVAL;
	memset(&f, 0, sizeof(f));
	iw_hdr_init(&f.hdr, IW_OP_TERMINATE);
	f.hdr.msn = msn;
	f.hdr.term = *t;
	return iw_fpdu_encode(&f, crc_on, out, cap);
}
