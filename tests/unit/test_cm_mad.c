/* IB CM MAD codec (src/wire/roce/cm_mad.c) against real rdma_cm traffic and the IBA tables.
 *
 * - Captures (rxe_rdmacm_rping, rxe_send_lat_rdmacm, rxe_rdmacm_udaddy; kernel 6.1 rdma_cm on
 *   rxe): every UD SEND ONLY to QP1 is parsed, checked against what the logs and
 *   ../shared/captures/README.md print (QPNs, PSNs, service IDs, GIDs, MTU, the rdma_cm IP
 *   header), paired up (REQ/REP/RTU, DREQ/DREP, SIDR) and rebuilt byte for byte.
 * - Layout: every field of every message, set alone to all ones, must land on exactly the bits
 *   of roce.md section 11 / IBA tables 106-120 (written out here, independently of the codec's
 *   table); random and all-ones structs round-trip field by field.
 * - Errors: every -E code of parse and build, every truncation of a real REQ (ASan build).
 * - rdma_cm's IP private-data header: IPv4 and IPv6 round trips, bytes, errors. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "pcap.h"
#include "wire/roce/cm_mad.h"
#include "wire/roce/roce.h"

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

static const uint16_t all_attrs[] = {
    CM_ATTR_REQ,  CM_ATTR_MRA,	CM_ATTR_REJ,	  CM_ATTR_REP,	    CM_ATTR_RTU,
    CM_ATTR_DREQ, CM_ATTR_DREP, CM_ATTR_SIDR_REQ, CM_ATTR_SIDR_REP,
};
#define NATTRS (sizeof(all_attrs) / sizeof(all_attrs[0]))

/* ---- field-by-field comparison ---- */

#define DIFF_NUM(f)                                                                                \
	do {                                                                                       \
		if (a->f != b->f) {                                                                \
			fprintf(stderr, "  %s: %s differs (0x%llx vs 0x%llx)\n", what, #f,         \
				(unsigned long long)a->f, (unsigned long long)b->f);               \
			n++;                                                                       \
		}                                                                                  \
	} while (0)
#define DIFF_MEM(f, len)                                                                           \
	do {                                                                                       \
		if (memcmp(a->f, b->f, (len)) != 0) {                                              \
			fprintf(stderr, "  %s: %s differs\n", what, #f);                           \
			n++;                                                                       \
		}                                                                                  \
	} while (0)

/* Number of members that differ (each one named on stderr). pd is compared over the type's
 * private-data size, the rest of it must be zero in both. */
static int mad_diff(const char *what, const struct cm_mad *a, const struct cm_mad *b)
{
	static const uint8_t zeros[CM_MAD_PD_MAX];
	size_t pd = cm_mad_pd_size(a->attr);
	int n = 0;

	DIFF_NUM(attr);
	DIFF_NUM(status);
	DIFF_NUM(tid);
	DIFF_NUM(attr_mod);
	DIFF_NUM(local_id);
	DIFF_NUM(remote_id);
	DIFF_NUM(service_id);
	DIFF_NUM(ca_guid);
	DIFF_NUM(qkey);
	DIFF_NUM(qpn);
	DIFF_NUM(resp_res);
	DIFF_NUM(init_depth);
	DIFF_NUM(remote_cm_timeout);
	DIFF_NUM(transport);
	DIFF_NUM(e2e_fc);
	DIFF_NUM(psn);
	DIFF_NUM(local_cm_timeout);
	DIFF_NUM(retry_count);
	DIFF_NUM(pkey);
	DIFF_NUM(mtu);
	DIFF_NUM(rdc_exists);
	DIFF_NUM(rnr_retry);
	DIFF_NUM(max_cm_retries);
	DIFF_NUM(srq);
	DIFF_NUM(ext_transport);
	DIFF_NUM(slid);
	DIFF_NUM(dlid);
	DIFF_MEM(sgid, 16);
	DIFF_MEM(dgid, 16);
	DIFF_NUM(flow_label);
	DIFF_NUM(packet_rate);
	DIFF_NUM(traffic_class);
	DIFF_NUM(hop_limit);
	DIFF_NUM(sl);
	DIFF_NUM(subnet_local);
	DIFF_NUM(local_ack_timeout);
	DIFF_NUM(vendor_id);
	DIFF_NUM(target_ack_delay);
	DIFF_NUM(failover);
	DIFF_NUM(msg_rejected);
	DIFF_NUM(ari_len);
	DIFF_NUM(reason);
	DIFF_MEM(ari, CM_MAD_ARI_MAX);
	DIFF_NUM(msg_mraed);
	DIFF_NUM(service_timeout);
	DIFF_NUM(sidr_status);
	DIFF_MEM(pd, pd);
	if (memcmp(a->pd + pd, zeros, CM_MAD_PD_MAX - pd) != 0 ||
	    memcmp(b->pd + pd, zeros, CM_MAD_PD_MAX - pd) != 0) {
		fprintf(stderr, "  %s: pd beyond %zu bytes not zero\n", what, pd);
		n++;
	}
	return n;
}

/* ---- the layout, written out from roce.md section 11 / IBA tables 106-120 ---- */

/* One field: the struct member (offset, size), its width, and where the IBA puts it: `nbytes`
 * body bytes from `off` holding the big-endian `mask`. */
struct layout {
	uint16_t attr;
	const char *name;
	size_t member, msize;
	unsigned bits;
	unsigned off, nbytes;
	uint64_t mask;
};

#define L(a, mem, bits_, off_, nbytes_, mask_)                                                     \
	{                                                                                          \
		(a), #mem, offsetof(struct cm_mad, mem), sizeof(((struct cm_mad *)0)->mem),        \
		    (bits_), (off_), (nbytes_), (mask_)                                            \
	}

static const struct layout layout[] = {
    /* REQ (11.3) */
    L(CM_ATTR_REQ, local_id, 32, 0, 4, 0xFFFFFFFF),
    /* ECE vendor ID: Linux's CM_REQ_VENDOR_ID (ibta_vol1_c12.h), 24 bits at byte 5. The
     * REP's, split over bytes 15 / 19 / 23, is checked in test_ece. */
    L(CM_ATTR_REQ, vendor_id, 24, 5, 3, 0xFFFFFF),
    L(CM_ATTR_REQ, service_id, 64, 8, 8, UINT64_MAX),
    L(CM_ATTR_REQ, ca_guid, 64, 16, 8, UINT64_MAX),
    L(CM_ATTR_REQ, qkey, 32, 28, 4, 0xFFFFFFFF),
    L(CM_ATTR_REQ, qpn, 24, 32, 3, 0xFFFFFF),
    L(CM_ATTR_REQ, resp_res, 8, 35, 1, 0xFF),
    L(CM_ATTR_REQ, init_depth, 8, 39, 1, 0xFF),
    L(CM_ATTR_REQ, remote_cm_timeout, 5, 43, 1, 0xF8),
    L(CM_ATTR_REQ, transport, 2, 43, 1, 0x06),
    L(CM_ATTR_REQ, e2e_fc, 1, 43, 1, 0x01),
    L(CM_ATTR_REQ, psn, 24, 44, 3, 0xFFFFFF),
    L(CM_ATTR_REQ, local_cm_timeout, 5, 47, 1, 0xF8),
    L(CM_ATTR_REQ, retry_count, 3, 47, 1, 0x07),
    L(CM_ATTR_REQ, pkey, 16, 48, 2, 0xFFFF),
    L(CM_ATTR_REQ, mtu, 4, 50, 1, 0xF0),
    L(CM_ATTR_REQ, rdc_exists, 1, 50, 1, 0x08),
    L(CM_ATTR_REQ, rnr_retry, 3, 50, 1, 0x07),
    L(CM_ATTR_REQ, max_cm_retries, 4, 51, 1, 0xF0),
    L(CM_ATTR_REQ, srq, 1, 51, 1, 0x08),
    L(CM_ATTR_REQ, ext_transport, 3, 51, 1, 0x07),
    L(CM_ATTR_REQ, slid, 16, 52, 2, 0xFFFF),
    L(CM_ATTR_REQ, dlid, 16, 54, 2, 0xFFFF),
    L(CM_ATTR_REQ, flow_label, 20, 88, 4, 0xFFFFF000),
    L(CM_ATTR_REQ, packet_rate, 6, 88, 4, 0x0000003F),
    L(CM_ATTR_REQ, traffic_class, 8, 92, 1, 0xFF),
    L(CM_ATTR_REQ, hop_limit, 8, 93, 1, 0xFF),
    L(CM_ATTR_REQ, sl, 4, 94, 1, 0xF0),
    L(CM_ATTR_REQ, subnet_local, 1, 94, 1, 0x08),
    L(CM_ATTR_REQ, local_ack_timeout, 5, 95, 1, 0xF8),
    /* MRA (11.5) */
    L(CM_ATTR_MRA, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_MRA, remote_id, 32, 4, 4, 0xFFFFFFFF),
    L(CM_ATTR_MRA, msg_mraed, 2, 8, 1, 0xC0),
    L(CM_ATTR_MRA, service_timeout, 5, 9, 1, 0xF8),
    /* REJ (11.6) */
    L(CM_ATTR_REJ, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_REJ, remote_id, 32, 4, 4, 0xFFFFFFFF),
    L(CM_ATTR_REJ, msg_rejected, 2, 8, 1, 0xC0),
    L(CM_ATTR_REJ, reason, 16, 10, 2, 0xFFFF),
    /* REP (11.4) */
    L(CM_ATTR_REP, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_REP, remote_id, 32, 4, 4, 0xFFFFFFFF),
    L(CM_ATTR_REP, qkey, 32, 8, 4, 0xFFFFFFFF),
    L(CM_ATTR_REP, qpn, 24, 12, 3, 0xFFFFFF),
    L(CM_ATTR_REP, psn, 24, 20, 3, 0xFFFFFF),
    L(CM_ATTR_REP, resp_res, 8, 24, 1, 0xFF),
    L(CM_ATTR_REP, init_depth, 8, 25, 1, 0xFF),
    L(CM_ATTR_REP, target_ack_delay, 5, 26, 1, 0xF8),
    L(CM_ATTR_REP, failover, 2, 26, 1, 0x06),
    L(CM_ATTR_REP, e2e_fc, 1, 26, 1, 0x01),
    L(CM_ATTR_REP, rnr_retry, 3, 27, 1, 0xE0),
    L(CM_ATTR_REP, srq, 1, 27, 1, 0x10),
    L(CM_ATTR_REP, ca_guid, 64, 28, 8, UINT64_MAX),
    /* RTU, DREQ, DREP (11.5) */
    L(CM_ATTR_RTU, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_RTU, remote_id, 32, 4, 4, 0xFFFFFFFF),
    L(CM_ATTR_DREQ, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_DREQ, remote_id, 32, 4, 4, 0xFFFFFFFF),
    L(CM_ATTR_DREQ, qpn, 24, 8, 3, 0xFFFFFF),
    L(CM_ATTR_DREP, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_DREP, remote_id, 32, 4, 4, 0xFFFFFFFF),
    /* SIDR_REQ, SIDR_REP (IBA tables 119, 120; kernel ibta_vol1_c12.h) */
    L(CM_ATTR_SIDR_REQ, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_SIDR_REQ, pkey, 16, 4, 2, 0xFFFF),
    L(CM_ATTR_SIDR_REQ, service_id, 64, 8, 8, UINT64_MAX),
    L(CM_ATTR_SIDR_REP, local_id, 32, 0, 4, 0xFFFFFFFF),
    L(CM_ATTR_SIDR_REP, sidr_status, 8, 4, 1, 0xFF),
    L(CM_ATTR_SIDR_REP, qpn, 24, 8, 3, 0xFFFFFF),
    L(CM_ATTR_SIDR_REP, service_id, 64, 12, 8, UINT64_MAX),
    L(CM_ATTR_SIDR_REP, qkey, 32, 20, 4, 0xFFFFFFFF),
};
#define NLAYOUT (sizeof(layout) / sizeof(layout[0]))

/* Byte strings: GIDs, ARI, private data (offset, length in the body). */
struct strpos {
	uint16_t attr;
	const char *name;
	size_t member;
	unsigned off, len;
};
static const struct strpos strpos[] = {
    {CM_ATTR_REQ, "sgid", offsetof(struct cm_mad, sgid), 56, 16},
    {CM_ATTR_REQ, "dgid", offsetof(struct cm_mad, dgid), 72, 16},
    {CM_ATTR_REQ, "pd", offsetof(struct cm_mad, pd), 140, 92},
    {CM_ATTR_MRA, "pd", offsetof(struct cm_mad, pd), 10, 222},
    {CM_ATTR_REJ, "ari", offsetof(struct cm_mad, ari), 12, 72},
    {CM_ATTR_REJ, "pd", offsetof(struct cm_mad, pd), 84, 148},
    {CM_ATTR_REP, "pd", offsetof(struct cm_mad, pd), 36, 196},
    {CM_ATTR_RTU, "pd", offsetof(struct cm_mad, pd), 8, 224},
    {CM_ATTR_DREQ, "pd", offsetof(struct cm_mad, pd), 12, 220},
    {CM_ATTR_DREP, "pd", offsetof(struct cm_mad, pd), 8, 224},
    {CM_ATTR_SIDR_REQ, "pd", offsetof(struct cm_mad, pd), 16, 216},
    {CM_ATTR_SIDR_REP, "ari", offsetof(struct cm_mad, ari), 24, 72},
    {CM_ATTR_SIDR_REP, "pd", offsetof(struct cm_mad, pd), 96, 136},
};
#define NSTRPOS (sizeof(strpos) / sizeof(strpos[0]))

static void set_member(struct cm_mad *m, size_t member, size_t msize, uint64_t v)
{
	unsigned char *p = (unsigned char *)m + member;
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;

	if (msize == 1)
		memcpy(p, &v8, 1);
	else if (msize == 2)
		memcpy(p, &v16, 2);
	else if (msize == 4)
		memcpy(p, &v32, 4);
	else
		memcpy(p, &v, 8);
}

static uint64_t ones(unsigned bits)
{
	return bits >= 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

static uint64_t body_be(const uint8_t *mad, unsigned off, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | mad[CM_MAD_HDR_LEN + off + i];
	return v;
}

/* Body bytes outside [off, off + n) are all zero. */
static int zero_outside(const uint8_t *mad, unsigned off, unsigned n)
{
	for (unsigned i = 0; i < CM_MAD_LEN - CM_MAD_HDR_LEN; i++)
		if ((i < off || i >= off + n) && mad[CM_MAD_HDR_LEN + i])
			return 0;
	return 1;
}

static void test_tables(void)
{
	static const struct {
		uint16_t attr;
		size_t pd;
		const char *name;
	} t[] = {
	    {CM_ATTR_REQ, 92, "REQ"},
	    {CM_ATTR_MRA, 222, "MRA"},
	    {CM_ATTR_REJ, 148, "REJ"},
	    {CM_ATTR_REP, 196, "REP"},
	    {CM_ATTR_RTU, 224, "RTU"},
	    {CM_ATTR_DREQ, 220, "DREQ"},
	    {CM_ATTR_DREP, 224, "DREP"},
	    {CM_ATTR_SIDR_REQ, 216, "SIDR_REQ"},
	    {CM_ATTR_SIDR_REP, 136, "SIDR_REP"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK_EQ(cm_mad_pd_size(t[i].attr), t[i].pd);
		CHECK(strcmp(cm_mad_name(t[i].attr), t[i].name) == 0);
	}
	static const uint16_t unknown[] = {0x0000, 0x0001, 0x000F, 0x0019, 0x001A, 0xFFFF};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		CHECK_EQ(cm_mad_pd_size(unknown[i]), 0);
		CHECK(strcmp(cm_mad_name(unknown[i]), "?") == 0);
	}
}

/* Every field alone at its maximum lands on exactly its bits and parses back; one past its
 * width is refused by build and leaves the output untouched. */
static void test_layout(void)
{
	uint8_t out[CM_MAD_LEN], before[CM_MAD_LEN];
	struct cm_mad m, p;
	int refused = 0;

	for (size_t i = 0; i < NLAYOUT; i++) {
		const struct layout *l = &layout[i];

		memset(&m, 0, sizeof(m));
		m.attr = l->attr;
		set_member(&m, l->member, l->msize, ones(l->bits));
		REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
		if (body_be(out, l->off, l->nbytes) != l->mask ||
		    !zero_outside(out, l->off, l->nbytes))
			fprintf(stderr, "%s.%s: wrong bits\n", cm_mad_name(l->attr), l->name);
		CHECK_EQ(body_be(out, l->off, l->nbytes), l->mask);
		CHECK(zero_outside(out, l->off, l->nbytes));
		CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
		CHECK_EQ(mad_diff(l->name, &m, &p), 0);

		/* Full-width members cannot be too wide; a bool cannot hold 2. */
		if (l->bits >= 8 * l->msize || l->bits == 1)
			continue;
		memset(out, 0xA5, sizeof(out));
		memcpy(before, out, sizeof(out));
		set_member(&m, l->member, l->msize, ones(l->bits) + 1);
		CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
		CHECK_MEM(out, before, sizeof(out));
		refused++;
		/* A field the type does not carry is ignored however wide. */
		m.attr = l->attr == CM_ATTR_RTU ? CM_ATTR_DREP : CM_ATTR_RTU;
		CHECK_EQ(cm_mad_build(&m, out), CM_MAD_LEN);
	}
	fprintf(stderr, "layout: %zu number fields, %d too-wide values refused\n", NLAYOUT,
		refused);
	CHECK_EQ(refused, 25);

	for (size_t i = 0; i < NSTRPOS; i++) {
		const struct strpos *s = &strpos[i];

		memset(&m, 0, sizeof(m));
		m.attr = s->attr;
		memset((unsigned char *)&m + s->member, 0xFF, s->len);
		if (strcmp(s->name, "ari") == 0)
			m.ari_len = CM_MAD_ARI_MAX;
		REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
		int ok =
		    body_be(out, s->off, 1) == 0xFF && body_be(out, s->off + s->len - 1, 1) == 0xFF;
		for (unsigned j = 0; j < s->len; j++)
			ok &= out[CM_MAD_HDR_LEN + s->off + j] == 0xFF;
		if (strcmp(s->name, "ari") == 0) {
			/* REJ: 9[7:1] = 72; SIDR_REP: 5 = 72. */
			unsigned lo = s->attr == CM_ATTR_REJ ? 9 : 5;
			CHECK_EQ(out[CM_MAD_HDR_LEN + lo], s->attr == CM_ATTR_REJ ? 72 << 1 : 72);
			out[CM_MAD_HDR_LEN + lo] = 0;
		}
		ok &= zero_outside(out, s->off, s->len);
		if (!ok)
			fprintf(stderr, "%s.%s: wrong bytes\n", cm_mad_name(s->attr), s->name);
		CHECK(ok);
		if (strcmp(s->name, "ari") == 0)
			out[CM_MAD_HDR_LEN + (s->attr == CM_ATTR_REJ ? 9 : 5)] =
			    s->attr == CM_ATTR_REJ ? 72 << 1 : 72;
		CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
		CHECK_EQ(mad_diff(s->name, &m, &p), 0);
	}

	/* The header, with an attribute modifier and status (IBA 13.4.2). */
	memset(&m, 0, sizeof(m));
	m.attr = CM_ATTR_RTU;
	m.status = 0xBEEF;
	m.tid = 0x0102030405060708ull;
	m.attr_mod = 0xA1B2C3D4;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	static const uint8_t hdr[CM_MAD_HDR_LEN] = {1,	  7,	2,    3,    0xBE, 0xEF, 0,    0,
						    1,	  2,	3,    4,    5,	  6,	7,    8,
						    0x00, 0x14, 0x00, 0x00, 0xA1, 0xB2, 0xC3, 0xD4};
	CHECK_MEM(out, hdr, CM_MAD_HDR_LEN);
	CHECK(zero_outside(out, 0, 0));
	CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
	CHECK_EQ(mad_diff("header", &m, &p), 0);
}

/* ---- random round trips ---- */

/* Fills the fields `attr` carries: random values (or all ones) within their widths. */
static void fill(struct cm_mad *m, uint16_t attr, int all_ones)
{
	memset(m, 0, sizeof(*m));
	m->attr = attr;
	m->status = (uint16_t)(all_ones ? 0xFFFF : rnd());
	m->tid = all_ones ? UINT64_MAX : rnd();
	m->attr_mod = (uint32_t)(all_ones ? UINT32_MAX : rnd());
	for (size_t i = 0; i < NLAYOUT; i++)
		if (layout[i].attr == attr)
			set_member(m, layout[i].member, layout[i].msize,
				   (all_ones ? UINT64_MAX : rnd()) & ones(layout[i].bits));
	for (size_t i = 0; i < NSTRPOS; i++) {
		if (strpos[i].attr != attr)
			continue;
		unsigned char *p = (unsigned char *)m + strpos[i].member;
		for (unsigned j = 0; j < strpos[i].len; j++)
			p[j] = (uint8_t)(all_ones ? 0xFF : rnd());
	}
	if (attr == CM_ATTR_REJ || attr == CM_ATTR_SIDR_REP)
		m->ari_len = (uint8_t)(all_ones ? CM_MAD_ARI_MAX : rnd() % (CM_MAD_ARI_MAX + 1));
	if (attr == CM_ATTR_REP) /* split over three bytes: not in layout[] */
		m->vendor_id = (uint32_t)(all_ones ? 0xFFFFFF : rnd() & 0xFFFFFF);
}

static void test_round_trip(void)
{
	uint8_t out[CM_MAD_LEN], again[CM_MAD_LEN];
	struct cm_mad m, p;
	int n = 0;

	for (int iter = 0; iter < 2000; iter++) {
		uint16_t attr = all_attrs[iter % NATTRS];

		fill(&m, attr, iter < (int)NATTRS);
		REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
		CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
		if (mad_diff(cm_mad_name(attr), &m, &p) != 0) {
			CHECK(0);
			continue;
		}
		REQUIRE(cm_mad_build(&p, again) == CM_MAD_LEN);
		CHECK_MEM(out, again, CM_MAD_LEN);
		n++;
	}
	fprintf(stderr, "round trips: %d of 2000 identical\n", n);
	CHECK_EQ(n, 2000);
}

/* ---- ECE: the vendor ID and the options (AttributeModifier) of the REQ and the REP ----
 * Where Linux's ib_cm puts them (drivers/infiniband/core/cm.c cm_format_req / cm_format_rep
 * with cm_format_mad_ece_hdr; include/rdma/ibta_vol1_c12.h CM_REQ_VENDOR_ID at byte 5, 24
 * bits; CM_REP_VENDOR_ID_H / _M / _L at bytes 15, 19, 23; offsets after the 24-byte MAD
 * header). The raw bytes are asserted here, independently of the codec's table. */

static void test_ece(void)
{
	uint8_t out[CM_MAD_LEN], before[CM_MAD_LEN];
	struct cm_mad m, p;
	const uint8_t *body = out + CM_MAD_HDR_LEN;

	/* Zeros by default: a REQ and a REP built without ECE carry none (as rxe's). */
	memset(&m, 0, sizeof(m));
	m.attr = CM_ATTR_REQ;
	m.local_id = 0x11223344;
	m.qpn = 0xABCDEF;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	CHECK_EQ(body[4] | body[5] | body[6] | body[7], 0);
	CHECK_EQ(out[20] | out[21] | out[22] | out[23], 0);
	CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
	CHECK_EQ(p.vendor_id, 0);
	CHECK_EQ(p.attr_mod, 0);
	m.attr = CM_ATTR_REP;
	m.psn = 0x123456;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	CHECK_EQ(body[15] | body[19] | body[23], 0);
	CHECK_EQ(out[20] | out[21] | out[22] | out[23], 0);
	CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
	CHECK_EQ(p.vendor_id, 0);
	CHECK_EQ(p.attr_mod, 0);

	/* REQ: vendor ID in body bytes 5-7 (byte 4 stays reserved), options in the header's
	 * AttributeModifier (MAD bytes 20-23), next to every neighbour at its maximum. */
	memset(&m, 0, sizeof(m));
	m.attr = CM_ATTR_REQ;
	m.local_id = 0xFFFFFFFF;
	m.service_id = UINT64_MAX;
	m.vendor_id = 0xABCDEF;
	m.attr_mod = 0x53520001;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	static const uint8_t req_ece[] = {0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0xAB, 0xCD, 0xEF,
					  0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
	CHECK_MEM(body, req_ece, sizeof(req_ece));
	static const uint8_t opts[] = {0x53, 0x52, 0x00, 0x01};
	CHECK_MEM(out + 20, opts, 4);
	CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
	CHECK_EQ(mad_diff("REQ ECE", &m, &p), 0);
	CHECK_EQ(p.vendor_id, 0xABCDEF);
	CHECK_EQ(p.attr_mod, 0x53520001);
	/* softrdma's own values (wire/roce/ece.h) as cm_roce.c sends them. */
	m.vendor_id = 0xFFFFFF;
	m.local_id = 0;
	m.service_id = 0;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	CHECK_EQ(body[4], 0);
	CHECK_EQ(body[5] & body[6] & body[7], 0xFF);
	CHECK(zero_outside(out, 5, 3));

	/* REP: vendor ID bits 23:16 in byte 15, 15:8 in byte 19, 7:0 in byte 23, between the
	 * 24-bit Local QPN (12-14), Local EE Context (16-18) and Starting PSN (20-22). */
	memset(&m, 0, sizeof(m));
	m.attr = CM_ATTR_REP;
	m.qpn = 0x123456;
	m.psn = 0x654321;
	m.vendor_id = 0xABCDEF;
	m.attr_mod = 0x53520001;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	static const uint8_t rep_ece[] = {0x12, 0x34, 0x56, 0xAB, 0x00, 0x00,
					  0x00, 0xCD, 0x65, 0x43, 0x21, 0xEF};
	CHECK_MEM(body + 12, rep_ece, sizeof(rep_ece));
	CHECK_MEM(out + 20, opts, 4);
	CHECK_EQ(cm_mad_parse(out, sizeof(out), &p), 0);
	CHECK_EQ(mad_diff("REP ECE", &m, &p), 0);
	CHECK_EQ(p.vendor_id, 0xABCDEF);
	CHECK_EQ(p.qpn, 0x123456);
	CHECK_EQ(p.psn, 0x654321);
	/* Alone: nothing else in the body. */
	m.qpn = m.psn = 0;
	m.vendor_id = 0xFFFFFF;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	CHECK_EQ(body[15] & body[19] & body[23], 0xFF);
	uint8_t tmp[CM_MAD_LEN];
	memcpy(tmp, out, sizeof(tmp));
	tmp[CM_MAD_HDR_LEN + 15] = tmp[CM_MAD_HDR_LEN + 19] = tmp[CM_MAD_HDR_LEN + 23] = 0;
	CHECK(zero_outside(tmp, 0, 0));
	/* Each byte is its own part of the value. */
	static const struct {
		unsigned off;
		uint32_t v;
	} part[] = {{15, 0x010000}, {19, 0x000100}, {23, 0x000001}};
	for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++) {
		memset(tmp, 0, sizeof(tmp));
		memcpy(tmp, out, CM_MAD_HDR_LEN);
		tmp[CM_MAD_HDR_LEN + part[i].off] = 0x01;
		CHECK_EQ(cm_mad_parse(tmp, sizeof(tmp), &p), 0);
		CHECK_EQ(p.vendor_id, part[i].v);
	}

	/* Wider than 24 bits: refused by build for both, the output untouched. */
	memset(out, 0xA5, sizeof(out));
	memcpy(before, out, sizeof(out));
	memset(&m, 0, sizeof(m));
	m.vendor_id = 0x1000000;
	m.attr = CM_ATTR_REQ;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.attr = CM_ATTR_REP;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.vendor_id = 0xFFFFFFFF;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	CHECK_MEM(out, before, sizeof(out));
	/* Messages without a vendor ID ignore the member. */
	m.attr = CM_ATTR_RTU;
	REQUIRE(cm_mad_build(&m, out) == CM_MAD_LEN);
	CHECK(zero_outside(out, 0, 0));
}

/* ---- errors ---- */

static void test_errors(void)
{
	uint8_t good[CM_MAD_LEN], bad[CM_MAD_LEN + 44];
	struct cm_mad m, p;

	fill(&m, CM_ATTR_REQ, 0);
	REQUIRE(cm_mad_build(&m, good) == CM_MAD_LEN);

#define EXPECT(len, err)                                                                           \
	do {                                                                                       \
		memset(&p, 0x5A, sizeof(p));                                                       \
		CHECK_EQ(cm_mad_parse(bad, (len), &p), (err));                                     \
		if ((err) != 0) {                                                                  \
			static const struct cm_mad zero_;                                          \
			CHECK_EQ(mad_diff("error", &p, &zero_), 0);                                \
		}                                                                                  \
	} while (0)

	memcpy(bad, good, CM_MAD_LEN);
	EXPECT(0, -EMSGSIZE);
	EXPECT(CM_MAD_LEN - 1, -EMSGSIZE);
	EXPECT(CM_MAD_LEN, 0);
	CHECK_EQ(mad_diff("good", &m, &p), 0);
	memset(bad + CM_MAD_LEN, 0xEE, 44); /* bytes after the MAD are ignored */
	EXPECT(sizeof(bad), 0);
	CHECK_EQ(mad_diff("long", &m, &p), 0);
	CHECK_EQ(cm_mad_parse(NULL, 0, &p), -EMSGSIZE);

	/* MAD header (13.4.2). */
	static const struct {
		unsigned off;
		uint8_t v;
		int err;
	} hdr[] = {
	    {0, 0, -EPROTO},
	    {0, 2, -EPROTO},
	    {1, 0x01, -EPROTO},
	    {1, 0x81, -EPROTO},
	    {1, 0x06, -EPROTO},
	    {3, 0x01, -EPROTO},
	    {3, 0x83, -EPROTO}, /* R bit: CM never sends responses */
	    {3, 0x13, -EPROTO},
	    {2, 3, -EPROTONOSUPPORT},
	    {2, 1, -EPROTONOSUPPORT},
	    {2, 0, -EPROTONOSUPPORT},
	    {6, 0xFF, 0},  /* ClassSpecific: reserved, ignored */
	    {18, 0xFF, 0}, /* reserved */
	};
	for (size_t i = 0; i < sizeof(hdr) / sizeof(hdr[0]); i++) {
		memcpy(bad, good, CM_MAD_LEN);
		bad[hdr[i].off] = hdr[i].v;
		EXPECT(CM_MAD_LEN, hdr[i].err);
	}
	/* Both wrong: the class is checked first. */
	memcpy(bad, good, CM_MAD_LEN);
	bad[1] = 0x81;
	bad[2] = 1;
	EXPECT(CM_MAD_LEN, -EPROTO);

	/* AttributeIDs: ClassPortInfo, LAP, APR, anything else. */
	static const uint16_t unknown[] = {0x0001, 0x0019, 0x001A, 0x0000, 0x0110, 0xFFFF};
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		memcpy(bad, good, CM_MAD_LEN);
		bad[16] = (uint8_t)(unknown[i] >> 8);
		bad[17] = (uint8_t)unknown[i];
		EXPECT(CM_MAD_LEN, -EBADMSG);
	}

	/* REJ: Reject Info Length 9[7:1]; 72 is the most. */
	memset(&m, 0, sizeof(m));
	m.attr = CM_ATTR_REJ;
	m.reason = 28;
	m.ari_len = CM_MAD_ARI_MAX;
	REQUIRE(cm_mad_build(&m, bad) == CM_MAD_LEN);
	EXPECT(CM_MAD_LEN, 0);
	CHECK_EQ(p.ari_len, 72);
	bad[CM_MAD_HDR_LEN + 9] = 73 << 1;
	EXPECT(CM_MAD_LEN, -EBADMSG);
	bad[CM_MAD_HDR_LEN + 9] = 127 << 1;
	EXPECT(CM_MAD_LEN, -EBADMSG);
	bad[CM_MAD_HDR_LEN + 9] = 72 << 1 | 1; /* the reserved low bit is ignored */
	EXPECT(CM_MAD_LEN, 0);
	CHECK_EQ(p.ari_len, 72);
	/* SIDR_REP: Additional Information Length, byte 5. */
	memset(&m, 0, sizeof(m));
	m.attr = CM_ATTR_SIDR_REP;
	REQUIRE(cm_mad_build(&m, bad) == CM_MAD_LEN);
	bad[CM_MAD_HDR_LEN + 5] = 73;
	EXPECT(CM_MAD_LEN, -EBADMSG);
	bad[CM_MAD_HDR_LEN + 5] = 255;
	EXPECT(CM_MAD_LEN, -EBADMSG);

	/* build: unknown attribute, ari_len above 72 (the other too-wide fields: test_layout). */
	uint8_t out[CM_MAD_LEN], before[CM_MAD_LEN];
	memset(out, 0xA5, sizeof(out));
	memcpy(before, out, sizeof(out));
	memset(&m, 0, sizeof(m));
	m.attr = 0x0019;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.attr = 0;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.attr = CM_ATTR_REJ;
	m.ari_len = 73;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.ari_len = 127;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.attr = CM_ATTR_SIDR_REP;
	m.ari_len = 73;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	m.ari_len = 255;
	CHECK_EQ(cm_mad_build(&m, out), -EINVAL);
	CHECK_MEM(out, before, sizeof(out));
	m.attr = CM_ATTR_REQ; /* REQ carries no ARI: ignored */
	CHECK_EQ(cm_mad_build(&m, out), CM_MAD_LEN);
#undef EXPECT
}

/* ---- rdma_cm's IP private-data header ---- */

static void test_cma_hdr(void)
{
	struct cm_cma_hdr h, g;
	uint8_t b[CM_MAD_CMA_HDR_LEN], before[CM_MAD_CMA_HDR_LEN];
	static const uint8_t v4[CM_MAD_CMA_HDR_LEN] = {
	    0x00, 0x40, 0x84, 0xDA, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,  10, 77,
	    0,	  11,	0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 77, 0,  12};

	/* IPv4 (bytes of the rping REQ, roce.md 11.8). */
	memset(&h, 0, sizeof(h));
	h.sport = 0x84DA;
	h.src[10] = h.src[11] = h.dst[10] = h.dst[11] = 0xFF;
	memcpy(h.src + 12, (const uint8_t[]){10, 77, 0, 11}, 4);
	memcpy(h.dst + 12, (const uint8_t[]){10, 77, 0, 12}, 4);
	CHECK_EQ(cm_cma_hdr_build(&h, b), CM_MAD_CMA_HDR_LEN);
	CHECK_MEM(b, v4, sizeof(v4));
	CHECK_EQ(cm_cma_hdr_parse(b, &g), 0);
	CHECK(!g.ipv6);
	CHECK_EQ(g.sport, 0x84DA);
	CHECK_MEM(g.src, h.src, 16);
	CHECK_MEM(g.dst, h.dst, 16);

	/* IPv6. */
	memset(&h, 0, sizeof(h));
	h.ipv6 = true;
	h.sport = 0xFFFE;
	for (int i = 0; i < 16; i++) {
		h.src[i] = (uint8_t)(0xFE - i);
		h.dst[i] = (uint8_t)(0x20 + i);
	}
	CHECK_EQ(cm_cma_hdr_build(&h, b), CM_MAD_CMA_HDR_LEN);
	CHECK_EQ(b[0], 0x00);
	CHECK_EQ(b[1], 0x60);
	CHECK_EQ(b[2], 0xFF);
	CHECK_EQ(b[3], 0xFE);
	CHECK_MEM(b + 4, h.src, 16);
	CHECK_MEM(b + 20, h.dst, 16);
	CHECK_EQ(cm_cma_hdr_parse(b, &g), 0);
	CHECK(g.ipv6);
	CHECK_EQ(g.sport, 0xFFFE);
	CHECK_MEM(g.src, h.src, 16);
	CHECK_MEM(g.dst, h.dst, 16);
	/* An IPv4-mapped address over IPv6 stays as it is. */
	memset(h.src, 0, 10);
	h.src[10] = h.src[11] = 0xFF;
	CHECK_EQ(cm_cma_hdr_build(&h, b), CM_MAD_CMA_HDR_LEN);
	CHECK_EQ(cm_cma_hdr_parse(b, &g), 0);
	CHECK(g.ipv6);
	CHECK_MEM(g.src, h.src, 16);

	/* Errors. */
	memcpy(b, v4, sizeof(v4));
	b[1] = 0x4F; /* low nibble reserved */
	CHECK_EQ(cm_cma_hdr_parse(b, &g), 0);
	static const struct {
		unsigned off;
		uint8_t v;
	} bad[] = {{0, 0x01}, {0, 0x10},  {1, 0x00},  {1, 0x50},  {1, 0xF0},  {1, 0x04},
		   {4, 0x01}, {15, 0x01}, {14, 0xFF}, {20, 0x80}, {31, 0x01}, {30, 0xFF}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(b, v4, sizeof(v4));
		b[bad[i].off] = bad[i].v;
		memset(&g, 0x5A, sizeof(g));
		CHECK_EQ(cm_cma_hdr_parse(b, &g), -EBADMSG);
		CHECK(!g.ipv6 && g.sport == 0);
	}
	/* build: IPv4 needs IPv4-mapped addresses. */
	memset(&h, 0, sizeof(h));
	h.src[10] = h.src[11] = h.dst[10] = h.dst[11] = 0xFF;
	memset(b, 0xA5, sizeof(b));
	memcpy(before, b, sizeof(b));
	h.src[11] = 0xFE;
	CHECK_EQ(cm_cma_hdr_build(&h, b), -EINVAL);
	h.src[11] = 0xFF;
	h.dst[0] = 0x20;
	CHECK_EQ(cm_cma_hdr_build(&h, b), -EINVAL);
	h.dst[0] = 0;
	h.dst[10] = 0;
	CHECK_EQ(cm_cma_hdr_build(&h, b), -EINVAL);
	CHECK_MEM(b, before, sizeof(b));
	h.dst[10] = 0xFF;
	CHECK_EQ(cm_cma_hdr_build(&h, b), CM_MAD_CMA_HDR_LEN);
}

/* ---- the captures ---- */

enum { T_REQ, T_REP, T_RTU, T_DREQ, T_DREP, T_SIDR_REQ, T_SIDR_REP, T_MRA, T_REJ, T__N };

static int type_index(uint16_t attr)
{
	switch (attr) {
	case CM_ATTR_REQ:
		return T_REQ;
	case CM_ATTR_REP:
		return T_REP;
	case CM_ATTR_RTU:
		return T_RTU;
	case CM_ATTR_DREQ:
		return T_DREQ;
	case CM_ATTR_DREP:
		return T_DREP;
	case CM_ATTR_SIDR_REQ:
		return T_SIDR_REQ;
	case CM_ATTR_SIDR_REP:
		return T_SIDR_REP;
	case CM_ATTR_MRA:
		return T_MRA;
	default:
		return T_REJ;
	}
}

struct rec {
	struct cm_mad m;
	uint32_t frame;
	uint8_t src[4], dst[4]; /* IPv4 addresses of the frame */
};

#define MAX_RECS 16

struct capture {
	const char *file;
	int counts[T__N];
	struct rec recs[MAX_RECS];
	int nrecs;
	uint8_t raw[MAX_RECS][CM_MAD_LEN]; /* for the truncation test */
};

static const uint8_t ip_active[4] = {10, 77, 0, 11}, ip_passive[4] = {10, 77, 0, 12};
static const uint8_t gid_active[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 11};
static const uint8_t gid_passive[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 77, 0, 12};

/* RDMA_PS_TCP / RDMA_PS_UDP (roce.md 11.8, kernel cma_get_service_id). */
#define SID(ps, port) ((uint64_t)(ps) << 16 | (port))
#define PS_TCP	      0x0106
#define PS_UDP	      0x0111

static void load_capture(struct capture *c)
{
	char path[PCAP_PATH_MAX];
	struct pcap_file f;
	struct pcap_frame fr;
	int rebuilt = 0, rc;

	snprintf(path, sizeof(path), "%s/%s", SOFTRDMA_TEST_DATA, c->file);
	REQUIRE(pcap_open(&f, path) == 0);
	while ((rc = pcap_next(&f, &fr)) == 1) {
		struct pcap_roce r;
		struct roce_pkt pkt;
		uint8_t out[CM_MAD_LEN];

		if (!pcap_roce(&fr, 0, &r))
			continue;
		REQUIRE(roce_parse(r.payload, r.payload_len, &pkt) == ROCE_ERR_NONE);
		if (pkt.bth.opcode != ROCE_UD_SEND_ONLY || pkt.bth.dqpn != 1)
			continue;
		/* roce.md 11.1: GSI Q_Key, default P_Key, from QP1, exactly one MAD. */
		CHECK_EQ(pkt.deth.qkey, ROCE_GSI_QKEY);
		CHECK_EQ(pkt.deth.src_qpn, 1);
		CHECK_EQ(pkt.bth.pkey, 0xFFFF);
		CHECK_EQ(pkt.payload_len, CM_MAD_LEN);
		CHECK(!r.ipv6);
		REQUIRE(c->nrecs < MAX_RECS);

		struct rec *e = &c->recs[c->nrecs];
		int err = cm_mad_parse(pkt.payload, pkt.payload_len, &e->m);
		if (err) {
			fprintf(stderr, "%s frame %u: cm_mad_parse %d\n", c->file, fr.index, err);
			CHECK_EQ(err, 0);
			continue;
		}
		memcpy(c->raw[c->nrecs], pkt.payload, CM_MAD_LEN);
		e->frame = fr.index;
		memcpy(e->src, r.ip + 12, 4);
		memcpy(e->dst, r.ip + 16, 4);
		c->counts[type_index(e->m.attr)]++;
		c->nrecs++;

		/* Re-encoding gives the kernel's bytes back, reserved bits and all. */
		CHECK_EQ(cm_mad_build(&e->m, out), CM_MAD_LEN);
		if (memcmp(out, pkt.payload, CM_MAD_LEN) == 0)
			rebuilt++;
		else
			fprintf(stderr, "%s frame %u: %s rebuilt differently\n", c->file, fr.index,
				cm_mad_name(e->m.attr));

		/* Every CM MAD here: status 0, attribute modifier 0 (no ECE from rxe), TID =
		 * agent hi_tid 2 << 32 | the sender's comm ID as the kernel's little-endian
		 * CPU reads its big-endian bytes (cm.c cm_form_tid; responses echo it). */
		CHECK_EQ(e->m.status, 0);
		CHECK_EQ(e->m.attr_mod, 0);
		CHECK_EQ(e->m.tid >> 32, 2);
	}
	CHECK_EQ(rc, 0);
	pcap_close(&f);
	fprintf(stderr, "%s: %d CM MADs, %d rebuilt byte-exact\n", c->file, c->nrecs, rebuilt);
	CHECK(c->nrecs > 0);
	CHECK_EQ(rebuilt, c->nrecs);
}

static uint32_t bswap32(uint32_t v)
{
	return v >> 24 | (v >> 8 & 0xFF00) | (v << 8 & 0xFF0000) | v << 24;
}

static const struct rec *find(const struct capture *c, uint16_t attr, int nth)
{
	for (int i = 0; i < c->nrecs; i++)
		if (c->recs[i].m.attr == attr && nth-- == 0)
			return &c->recs[i];
	return NULL;
}

static int ip_is(const uint8_t ip[4], const uint8_t want[4])
{
	return memcmp(ip, want, 4) == 0;
}

/* What rdma_cm on rxe (kernel 6.1) puts in every REQ of these captures. */
static void check_req(const struct rec *q, uint32_t qpn, uint32_t psn, uint64_t sid,
		      uint8_t resp_res)
{
	const struct cm_mad *m = &q->m;
	struct cm_cma_hdr h;
	static const uint8_t zeros[CM_MAD_REQ_PD];

	CHECK(ip_is(q->src, ip_active) && ip_is(q->dst, ip_passive));
	CHECK_EQ(m->qpn, qpn);
	if (psn != UINT32_MAX)
		CHECK_EQ(m->psn, psn);
	CHECK_EQ(m->service_id, sid);
	CHECK(m->local_id != 0);
	CHECK_EQ((uint32_t)m->tid, bswap32(m->local_id));
	CHECK_EQ(m->ca_guid, 0x505400FFFE770011ull); /* vm1's node GUID (from its MAC) */
	CHECK_EQ(m->qkey, 0);
	CHECK_EQ(m->resp_res, resp_res);
	CHECK_EQ(m->init_depth, resp_res);
	CHECK_EQ(m->remote_cm_timeout, 20); /* CMA_CM_RESPONSE_TIMEOUT */
	CHECK_EQ(m->local_cm_timeout, 20);
	CHECK_EQ(m->transport, CM_MAD_TS_RC);
	CHECK_EQ(m->e2e_fc, 0);
	CHECK_EQ(m->retry_count, 7);
	CHECK_EQ(m->rnr_retry, 7);
	CHECK_EQ(m->max_cm_retries, 15); /* CMA_MAX_CM_RETRIES */
	CHECK_EQ(m->pkey, 0xFFFF);
	CHECK_EQ(m->mtu, 3); /* IBV_MTU_1024: Ethernet MTU 1500 */
	CHECK_EQ(m->rdc_exists, 0);
	CHECK_EQ(m->srq, 0);
	CHECK_EQ(m->ext_transport, 0);
	CHECK_EQ(m->slid, 0xFFFF);
	CHECK_EQ(m->dlid, 0xFFFF);
	CHECK_MEM(m->sgid, gid_active, 16);
	CHECK_MEM(m->dgid, gid_passive, 16);
	CHECK_EQ(m->packet_rate, 0);
	CHECK_EQ(m->traffic_class, 0);
	CHECK_EQ(m->hop_limit, 64);
	CHECK_EQ(m->sl, 0);
	CHECK_EQ(m->subnet_local, 0);
	/* cm_ack_timeout(): packet life time 18 (CMA_IBOE_PACKET_LIFETIME in 6.1) + 1, as rxe's
	 * CA ACK delay (15) is below it. */
	CHECK_EQ(m->local_ack_timeout, 19);

	/* The private data: rdma_cm's IP header (11.8), then no user bytes. */
	CHECK_EQ(cm_cma_hdr_parse(m->pd, &h), 0);
	CHECK(!h.ipv6);
	CHECK_MEM(h.src, gid_active, 16);
	CHECK_MEM(h.dst, gid_passive, 16);
	CHECK(h.sport != 0);
	CHECK_MEM(m->pd + CM_MAD_CMA_HDR_LEN, zeros, CM_MAD_REQ_PD - CM_MAD_CMA_HDR_LEN);
	/* The flow label is the kernel's hash of the rdma_cm ports for IPv4 (cma.c
	 * cma_get_roce_udp_flow_label: sport * 31 + dport, 20 bits). */
	CHECK_EQ(m->flow_label, ((uint32_t)h.sport * 31 + (uint32_t)(sid & 0xFFFF)) & 0xFFFFF);
}

/* The REP answering `req`, and the RTU answering that REP. */
static void check_rep_rtu(const struct rec *req, const struct rec *rep, const struct rec *rtu,
			  uint32_t qpn)
{
	CHECK(ip_is(rep->src, ip_passive) && ip_is(rep->dst, ip_active));
	CHECK_EQ(rep->m.remote_id, req->m.local_id);
	CHECK(rep->m.local_id != 0 && rep->m.local_id != req->m.local_id);
	CHECK_EQ(rep->m.tid, req->m.tid);
	CHECK_EQ(rep->m.qpn, qpn);
	CHECK_EQ(rep->m.qkey, 0);
	CHECK_EQ(rep->m.ca_guid, 0x505400FFFE770012ull);
	CHECK_EQ(rep->m.resp_res, req->m.resp_res);
	CHECK_EQ(rep->m.init_depth, req->m.init_depth);
	CHECK_EQ(rep->m.target_ack_delay, 15); /* rxe's local CA ACK delay */
	CHECK_EQ(rep->m.failover, 0);
	CHECK_EQ(rep->m.e2e_fc, 0);
	CHECK_EQ(rep->m.rnr_retry, 7);
	CHECK_EQ(rep->m.srq, 0);
	static const uint8_t zeros[CM_MAD_REP_PD];
	CHECK_MEM(rep->m.pd, zeros, CM_MAD_REP_PD);

	CHECK(ip_is(rtu->src, ip_active) && ip_is(rtu->dst, ip_passive));
	CHECK_EQ(rtu->m.local_id, req->m.local_id);
	CHECK_EQ(rtu->m.remote_id, rep->m.local_id);
	CHECK_EQ(rtu->m.tid, req->m.tid);
}

/* A DREQ from `from` (the REQ or REP of its side) and the DREP answering it; `peer_qpn` is
 * the other side's QPN (the DREQ's Remote QPN). */
static void check_dreq_drep(const struct rec *dreq, const struct rec *drep, const struct rec *from,
			    const struct rec *to, uint32_t peer_qpn)
{
	CHECK(ip_is(dreq->src, from->src));
	CHECK(ip_is(drep->src, to->src));
	CHECK_EQ(dreq->m.local_id, from->m.local_id);
	CHECK_EQ(dreq->m.remote_id, to->m.local_id);
	CHECK_EQ(dreq->m.qpn, peer_qpn);
	CHECK_EQ((uint32_t)dreq->m.tid, bswap32(dreq->m.local_id));
	CHECK_EQ(drep->m.local_id, dreq->m.remote_id);
	CHECK_EQ(drep->m.remote_id, dreq->m.local_id);
	CHECK_EQ(drep->m.tid, dreq->m.tid);
}

/* The first PSN of the RC requests sent to `dqpn` (SEND / WRITE / READ request; not ACKs or
 * read responses, which carry the requester's PSNs). */
static uint32_t first_request_psn(const char *file, uint32_t dqpn)
{
	char path[PCAP_PATH_MAX];
	struct pcap_file f;
	struct pcap_frame fr;
	uint32_t psn = UINT32_MAX;

	snprintf(path, sizeof(path), "%s/%s", SOFTRDMA_TEST_DATA, file);
	REQUIRE(pcap_open(&f, path) == 0);
	while (psn == UINT32_MAX && pcap_next(&f, &fr) == 1) {
		struct pcap_roce r;
		struct roce_pkt pkt;
		const struct roce_opinfo *oi;

		if (!pcap_roce(&fr, 0, &r) ||
		    roce_parse(r.payload, r.payload_len, &pkt) != ROCE_ERR_NONE)
			continue;
		oi = roce_opinfo(pkt.bth.opcode);
		if (pkt.bth.dqpn == dqpn && oi->transport == ROCE_TR_RC &&
		    (oi->kind == ROCE_KIND_SEND || oi->kind == ROCE_KIND_WRITE ||
		     oi->kind == ROCE_KIND_READ_REQ || oi->kind == ROCE_KIND_ATOMIC))
			psn = pkt.bth.psn;
	}
	pcap_close(&f);
	return psn;
}

/* Every truncation of a real MAD, each in an exactly sized heap copy (ASan sees any read
 * past it). */
static void truncations(const uint8_t mad[CM_MAD_LEN])
{
	int refused = 0;

	for (size_t n = 0; n < CM_MAD_LEN; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		struct cm_mad p;

		REQUIRE(copy != NULL);
		memcpy(copy, mad, n);
		memset(&p, 0x5A, sizeof(p));
		if (cm_mad_parse(copy, n, &p) == -EMSGSIZE && p.attr == 0 && p.tid == 0)
			refused++;
		free(copy);
	}
	CHECK_EQ(refused, CM_MAD_LEN);
	uint8_t *copy = malloc(CM_MAD_LEN);
	struct cm_mad p;
	REQUIRE(copy != NULL);
	memcpy(copy, mad, CM_MAD_LEN);
	CHECK_EQ(cm_mad_parse(copy, CM_MAD_LEN, &p), 0);
	free(copy);
}

static void test_rping(void)
{
	static struct capture c = {.file = "rxe_rdmacm_rping.pcap"};
	static const int want[T__N] = {
	    [T_REQ] = 1, [T_REP] = 1, [T_RTU] = 1, [T_DREQ] = 1, [T_DREP] = 1};

	load_capture(&c);
	for (int t = 0; t < T__N; t++)
		CHECK_EQ(c.counts[t], want[t]);
	const struct rec *req = find(&c, CM_ATTR_REQ, 0), *rep = find(&c, CM_ATTR_REP, 0),
			 *rtu = find(&c, CM_ATTR_RTU, 0), *dreq = find(&c, CM_ATTR_DREQ, 0),
			 *drep = find(&c, CM_ATTR_DREP, 0);
	REQUIRE(req && rep && rtu && dreq && drep);
	/* README: local QPN 0x000050, starting PSN 0xd3af94, MTU 3, service ID 0x1061c06;
	 * destination QPNs 0x4b and 0x50. */
	CHECK_EQ(req->frame, 3);
	check_req(req, 0x50, 0xD3AF94, SID(PS_TCP, 7174), 1);
	CHECK_EQ(req->m.local_id, 0x748A6A0C);
	CHECK_EQ(req->m.tid, 0x000000020C6A8A74ull);
	CHECK_EQ(req->m.flow_label, 0x0326C);
	struct cm_cma_hdr h;
	REQUIRE(cm_cma_hdr_parse(req->m.pd, &h) == 0);
	CHECK_EQ(h.sport, 0x84DA);
	check_rep_rtu(req, rep, rtu, 0x4B);
	CHECK_EQ(rep->m.psn, 0x517B8E);
	/* rxe has no ECE: kernel 6.1's ib_cm sends vendor ID 0 and options 0 in both. */
	CHECK_EQ(req->m.vendor_id, 0);
	CHECK_EQ(req->m.attr_mod, 0);
	CHECK_EQ(rep->m.vendor_id, 0);
	CHECK_EQ(rep->m.attr_mod, 0);
	CHECK_EQ(rep->m.local_id, 0x9396B1F8);
	/* Disconnect by the client (active side). */
	check_dreq_drep(dreq, drep, req, rep, rep->m.qpn);

	/* Linux semantics of the two Starting PSNs (cm.c: the active side's rq_psn is the REQ's,
	 * the passive side's sq_psn the REQ's): the server's first request (an RDMA READ)
	 * carries the REQ's PSN, the client's first SEND the REP's. */
	CHECK_EQ(first_request_psn(c.file, req->m.qpn), req->m.psn);
	CHECK_EQ(first_request_psn(c.file, rep->m.qpn), rep->m.psn);

	truncations(c.raw[req - c.recs]);
	truncations(c.raw[rep - c.recs]);
}

static void test_send_lat(void)
{
	static struct capture c = {.file = "rxe_send_lat_rdmacm.pcap"};
	static const int want[T__N] = {
	    [T_REQ] = 2, [T_REP] = 2, [T_RTU] = 2, [T_DREQ] = 2, [T_DREP] = 2};

	load_capture(&c);
	for (int t = 0; t < T__N; t++)
		CHECK_EQ(c.counts[t], want[t]);
	for (int i = 0; i < 2; i++) {
		const struct rec *req = find(&c, CM_ATTR_REQ, i), *rep = find(&c, CM_ATTR_REP, i),
				 *rtu = find(&c, CM_ATTR_RTU, i);
		REQUIRE(req && rep && rtu);
		/* First connection: perftest's parameter exchange, README "local QPN
		 * 0x00004c, starting PSN 0x5f7de7, service ID 0x1064853" (port 18515).
		 * Second: the test QP, the client prints local QPN 0x004d, remote 0x0048 (its
		 * printed PSNs 0xd70d0a / 0x52d9da are perftest's own numbers, which rdma_cm
		 * does not use: the wire has 0x0ccd86 / 0xba1b36). */
		check_req(req, i == 0 ? 0x4C : 0x4D, i == 0 ? 0x5F7DE7 : 0x0CCD86,
			  SID(PS_TCP, 18515), 0);
		check_rep_rtu(req, rep, rtu, i == 0 ? 0x47 : 0x48);
		CHECK_EQ(rep->m.psn, i == 0 ? 0xBCCAB6 : 0xBA1B36);
		CHECK_EQ(first_request_psn(c.file, req->m.qpn), req->m.psn);
		CHECK_EQ(first_request_psn(c.file, rep->m.qpn), rep->m.psn);
	}
	const struct rec *req0 = find(&c, CM_ATTR_REQ, 0), *rep0 = find(&c, CM_ATTR_REP, 0),
			 *req1 = find(&c, CM_ATTR_REQ, 1), *rep1 = find(&c, CM_ATTR_REP, 1);
	CHECK_EQ(req0->m.flow_label, 0x20801);
	CHECK_EQ(req1->m.flow_label, 0x609CA);
	/* The test connection is closed by the client (frames 133/134), the parameter exchange
	 * by the server (135/136). */
	const struct rec *dreq0 = find(&c, CM_ATTR_DREQ, 0), *drep0 = find(&c, CM_ATTR_DREP, 0),
			 *dreq1 = find(&c, CM_ATTR_DREQ, 1), *drep1 = find(&c, CM_ATTR_DREP, 1);
	REQUIRE(dreq0 && drep0 && dreq1 && drep1);
	CHECK_EQ(dreq0->frame, 133);
	check_dreq_drep(dreq0, drep0, req1, rep1, rep1->m.qpn);
	CHECK_EQ(dreq1->frame, 135);
	check_dreq_drep(dreq1, drep1, rep0, req0, req0->m.qpn);

	truncations(c.raw[req1 - c.recs]);
}

static void test_udaddy(void)
{
	static struct capture c = {.file = "rxe_rdmacm_udaddy.pcap"};
	static const int want[T__N] = {[T_SIDR_REQ] = 1, [T_SIDR_REP] = 1};
	static const uint8_t zeros[CM_MAD_PD_MAX];
	struct cm_cma_hdr h;

	load_capture(&c);
	for (int t = 0; t < T__N; t++)
		CHECK_EQ(c.counts[t], want[t]);
	const struct rec *q = find(&c, CM_ATTR_SIDR_REQ, 0), *p = find(&c, CM_ATTR_SIDR_REP, 0);
	REQUIRE(q && p);
	CHECK(ip_is(q->src, ip_active) && ip_is(q->dst, ip_passive));
	CHECK(ip_is(p->src, ip_passive) && ip_is(p->dst, ip_active));
	/* SIDR_REQ: Request ID, P_Key, service ID = RDMA_PS_UDP + udaddy's port 7174, and the
	 * same rdma_cm IP header as a REQ. */
	CHECK(q->m.local_id != 0);
	CHECK_EQ((uint32_t)q->m.tid, bswap32(q->m.local_id));
	CHECK_EQ(q->m.pkey, 0xFFFF);
	CHECK_EQ(q->m.service_id, SID(PS_UDP, 7174));
	CHECK_EQ(cm_cma_hdr_parse(q->m.pd, &h), 0);
	CHECK(!h.ipv6);
	CHECK_MEM(h.src, gid_active, 16);
	CHECK_MEM(h.dst, gid_passive, 16);
	CHECK_EQ(h.sport, 0x8A80);
	CHECK_MEM(q->m.pd + CM_MAD_CMA_HDR_LEN, zeros, CM_MAD_SIDR_REQ_PD - CM_MAD_CMA_HDR_LEN);
	/* SIDR_REP: the server's UD QPN (destination of the client's 10 sends, README
	 * "destination QPNs 0x4c, 0x51") and rdma_cm's UD Q_Key RDMA_UDP_QKEY 0x01234567. */
	CHECK_EQ(p->m.local_id, q->m.local_id);
	CHECK_EQ(p->m.tid, q->m.tid);
	CHECK_EQ(p->m.sidr_status, 0);
	CHECK_EQ(p->m.ari_len, 0);
	CHECK_MEM(p->m.ari, zeros, CM_MAD_ARI_MAX);
	CHECK_EQ(p->m.qpn, 0x4C);
	CHECK_EQ(p->m.qkey, 0x01234567);
	CHECK_EQ(p->m.service_id, q->m.service_id);
	CHECK_MEM(p->m.pd, zeros, CM_MAD_SIDR_REP_PD);

	truncations(c.raw[q - c.recs]);
	truncations(c.raw[p - c.recs]);
}

int main(void)
{
	rng = check_seed(0xC3AD0001ull) | 1;
	test_tables();
	test_layout();
	test_round_trip();
	test_ece();
	test_errors();
	test_cma_hdr();
	test_rping();
	test_send_lat();
	test_udaddy();
	return check_exit();
}
