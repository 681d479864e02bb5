/* RoCE transport codec: the opcode table against spec section 3, parse/build against every
 * RoCEv2 packet of every capture in tests/data (real rxe traffic and the reference vectors),
 * the field values of roce_vectors.pcap (shared/spec/vectors/README.md section 2), random
 * round trips of every opcode, and malformed input (every truncation of every captured packet,
 * unknown opcodes, TVer, PadCnt, payload where none belongs, builds that cannot fit). */
#include "check.h"
#include "pcap.h"

#include <stdlib.h>

#include "wire/roce/roce.h"

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545F4914F6CDD1Dull;
}

/* ---- opcode table ---- */

/* Spec section 3, written out independently of opcode.c: opcode, header bytes after the BTH,
 * payload, position. */
struct op_expect {
	uint8_t op;
	uint8_t ext_len;
	bool payload;
	uint8_t pos;
	uint8_t kind;
};

#define F_ ROCE_POS_FIRST
#define M_ ROCE_POS_MIDDLE
#define L_ ROCE_POS_LAST
#define O_ ROCE_POS_ONLY
static const struct op_expect rc_expect[] = {
    {0x00, 0, true, F_, ROCE_KIND_SEND},	 {0x01, 0, true, M_, ROCE_KIND_SEND},
    {0x02, 0, true, L_, ROCE_KIND_SEND},	 {0x03, 4, true, L_, ROCE_KIND_SEND},
    {0x04, 0, true, O_, ROCE_KIND_SEND},	 {0x05, 4, true, O_, ROCE_KIND_SEND},
    {0x06, 16, true, F_, ROCE_KIND_WRITE},	 {0x07, 0, true, M_, ROCE_KIND_WRITE},
    {0x08, 0, true, L_, ROCE_KIND_WRITE},	 {0x09, 4, true, L_, ROCE_KIND_WRITE},
    {0x0A, 16, true, O_, ROCE_KIND_WRITE},	 {0x0B, 20, true, O_, ROCE_KIND_WRITE},
    {0x0C, 16, false, O_, ROCE_KIND_READ_REQ},	 {0x0D, 4, true, F_, ROCE_KIND_READ_RESP},
    {0x0E, 0, true, M_, ROCE_KIND_READ_RESP},	 {0x0F, 4, true, L_, ROCE_KIND_READ_RESP},
    {0x10, 4, true, O_, ROCE_KIND_READ_RESP},	 {0x11, 4, false, O_, ROCE_KIND_ACK},
    {0x12, 12, false, O_, ROCE_KIND_ATOMIC_ACK}, {0x13, 28, false, O_, ROCE_KIND_ATOMIC},
    {0x14, 28, false, O_, ROCE_KIND_ATOMIC},	 {0x16, 4, true, L_, ROCE_KIND_SEND},
    {0x17, 4, true, O_, ROCE_KIND_SEND},
};

static void test_opcode_table(void)
{
	int known = 0;

	for (unsigned op = 0; op < 256; op++) {
		const struct roce_opinfo *oi = roce_opinfo((uint8_t)op);
		const struct op_expect *e = NULL;
		struct op_expect xrc;
		uint8_t tr = 0xFF;

		for (size_t i = 0; i < sizeof(rc_expect) / sizeof(rc_expect[0]); i++) {
			if (rc_expect[i].op == op) {
				e = &rc_expect[i];
				tr = ROCE_TR_RC;
			}
			/* UC = RC + 0x20 for SEND and WRITE only (spec 3). */
			if (rc_expect[i].op <= 0x0B && rc_expect[i].op + 0x20u == op) {
				e = &rc_expect[i];
				tr = ROCE_TR_UC;
			}
			/* XRC = RC + 0xA0; requests carry the 4-byte XRCETH (IBA 9.2). */
			if (rc_expect[i].op + 0xA0u == op) {
				xrc = rc_expect[i];
				xrc.op = (uint8_t)op;
				if (xrc.kind == ROCE_KIND_SEND || xrc.kind == ROCE_KIND_WRITE ||
				    xrc.kind == ROCE_KIND_READ_REQ || xrc.kind == ROCE_KIND_ATOMIC)
					xrc.ext_len += ROCE_XRCETH_LEN;
				e = &xrc;
				tr = ROCE_TR_XRC;
			}
		}
		static const struct op_expect ud0 = {0x64, 8, true, O_, ROCE_KIND_SEND};
		static const struct op_expect ud1 = {0x65, 12, true, O_, ROCE_KIND_SEND};
		static const struct op_expect cnp = {0x81, 16, false, O_, ROCE_KIND_CNP};
		if (op == 0x64)
			e = &ud0, tr = ROCE_TR_UD;
		if (op == 0x65)
			e = &ud1, tr = ROCE_TR_UD;
		if (op == 0x81)
			e = &cnp, tr = ROCE_TR_CNP;

		if (op == ROCE_SR_SACK) {
			/* softrdma's SACK (engine/sr.h): an RC NAK with a bitmap as payload, from
			 * the manufacturer-specific range, so its bits name no transport. */
			REQUIRE(oi != NULL);
			CHECK_EQ(oi->transport, ROCE_TR_RC);
			CHECK_EQ(oi->kind, ROCE_KIND_SACK);
			CHECK_EQ(oi->hdrs, ROCE_HDR_AETH);
			CHECK_EQ(oi->hdr_len, ROCE_BTH_LEN + ROCE_AETH_LEN);
			CHECK(oi->payload);
			known++;
			continue;
		}
		if (!e) {
			CHECK(oi == NULL);
			CHECK_EQ(roce_hdr_len((uint8_t)op), 0);
			continue;
		}
		known++;
		REQUIRE(oi != NULL);
		CHECK_EQ(oi->opcode, op);
		CHECK_EQ(oi->transport, tr);
		CHECK_EQ(oi->transport, op >> 5); /* BTH opcode bits 7..5 */
		CHECK_EQ(oi->hdr_len, ROCE_BTH_LEN + e->ext_len);
		CHECK_EQ(roce_hdr_len((uint8_t)op), ROCE_BTH_LEN + e->ext_len);
		CHECK(oi->hdr_len <= ROCE_MAX_HDR_LEN);
		CHECK_EQ(oi->payload, e->payload);
		CHECK_EQ(oi->pos, e->pos);
		CHECK_EQ(oi->kind, e->kind);
		CHECK_EQ(oi->imm, (oi->hdrs & ROCE_HDR_IMMDT) != 0);
		CHECK_EQ(oi->inv, (oi->hdrs & ROCE_HDR_IETH) != 0);
		CHECK(oi->name != NULL && strncmp(oi->name,
						  tr == ROCE_TR_RC    ? "RC "
						  : tr == ROCE_TR_UC  ? "UC "
						  : tr == ROCE_TR_UD  ? "UD "
						  : tr == ROCE_TR_XRC ? "XRC"
								      : "CNP",
						  3) == 0);
		/* The XRCETH exactly on XRC requests. */
		CHECK_EQ((oi->hdrs & ROCE_HDR_XRCETH) != 0,
			 tr == ROCE_TR_XRC && e->ext_len >= ROCE_XRCETH_LEN &&
			     oi->kind != ROCE_KIND_READ_RESP && oi->kind != ROCE_KIND_ACK &&
			     oi->kind != ROCE_KIND_ATOMIC_ACK);
	}
	/* 23 RC + 12 UC + 2 UD + CNP + 23 XRC + SACK. */
	CHECK_EQ(known, 62);
	/* Spot checks of header sets (spec 2.8). */
	CHECK_EQ(roce_opinfo(ROCE_RC_WRITE_ONLY_IMM)->hdrs, ROCE_HDR_RETH | ROCE_HDR_IMMDT);
	CHECK_EQ(roce_opinfo(ROCE_RC_ATOMIC_ACK)->hdrs, ROCE_HDR_AETH | ROCE_HDR_ATOMICACKETH);
	CHECK_EQ(roce_opinfo(ROCE_UD_SEND_ONLY_IMM)->hdrs, ROCE_HDR_DETH | ROCE_HDR_IMMDT);
	CHECK_EQ(roce_opinfo(ROCE_RC_SEND_ONLY_INV)->hdrs, ROCE_HDR_IETH);
	CHECK_EQ(roce_opinfo(ROCE_RC_CMP_SWAP)->hdrs, ROCE_HDR_ATOMICETH);
	CHECK_EQ(roce_opinfo(ROCE_UC_WRITE_ONLY_IMM)->hdrs, ROCE_HDR_RETH | ROCE_HDR_IMMDT);
	CHECK(strcmp(roce_opinfo(ROCE_RC_SEND_ONLY)->name, "RC Send Only") == 0);
	CHECK(strcmp(roce_opinfo(ROCE_UD_SEND_ONLY_IMM)->name, "UD Send Only Immediate") == 0);
	CHECK_EQ(roce_opinfo(0xAB)->hdrs, ROCE_HDR_XRCETH | ROCE_HDR_RETH | ROCE_HDR_IMMDT);
	CHECK_EQ(roce_opinfo(ROCE_XRC_ACK)->hdrs, ROCE_HDR_AETH);
	CHECK(strcmp(roce_opinfo(ROCE_XRC_SEND_ONLY)->name, "XRC Send Only") == 0);

	/* The XRCETH's bytes (IBA 9.3: 8 reserved bits, then the 24-bit XRC SRQ number), right
	 * after the BTH and before the RETH, in an XRC RDMA WRITE ONLY. */
	{
		static const uint8_t data[4] = {1, 2, 3, 4};
		uint8_t buf[128];
		struct roce_pkt p = {0}, q;
		size_t n;

		p.bth.opcode = ROCE_OP_XRC | ROCE_RC_WRITE_ONLY;
		p.bth.dqpn = 0x010203;
		p.xrc_srqn = 0xABCDEF;
		p.reth.va = 0x1122334455667788ull;
		p.reth.rkey = 0x99AABBCC;
		p.reth.dma_len = 4;
		p.payload = data;
		p.payload_len = 4;
		n = roce_build(&p, buf, sizeof(buf));
		CHECK_EQ(n, 12 + 4 + 16 + 4 + ROCE_ICRC_LEN);
		CHECK_EQ(buf[0], 0xAA);
		static const uint8_t xrceth_reth[8] = {0x00, 0xAB, 0xCD, 0xEF,
						       0x11, 0x22, 0x33, 0x44};
		CHECK_MEM(buf + 12, xrceth_reth, 8);
		buf[12] = 0xFF; /* reserved: ignored on receive */
		REQUIRE(roce_parse(buf, n, &q) == ROCE_ERR_NONE);
		CHECK_EQ(q.xrc_srqn, 0xABCDEF);
		CHECK_EQ(q.reth.rkey, 0x99AABBCC);
		CHECK_EQ(q.payload_len, 4);
		CHECK_MEM(q.payload, data, 4);
		/* Cut inside the XRCETH: truncated. */
		CHECK_EQ(roce_parse(buf, 14 + ROCE_ICRC_LEN, &q), ROCE_ERR_TRUNCATED);
	}
}

/* ---- captures ---- */

/* Packets per opcode in each capture, from shared/captures/README.md ("RoCEv2 packets by BTH
 * opcode"; CM MADs are UD SEND ONLY to QP1) and vectors/README.md section 2. */
struct cap_expect {
	const char *file;
	int total;
	struct {
		uint8_t op;
		int n;
	} ops[6];
};

static const struct cap_expect cap_expect[] = {
    {"rxe_rc_pingpong.pcap", 80, {{0x04, 40}, {0x11, 40}}},
    {"rxe_rc_pingpong_8k.pcap", 90, {{0x00, 10}, {0x01, 60}, {0x02, 10}, {0x11, 10}}},
    {"rxe_rc_pingpong_ipv6.pcap", 40, {{0x04, 20}, {0x11, 20}}},
    {"rxe_ud_pingpong.pcap", 40, {{0x64, 40}}},
    {"rxe_write_lat.pcap", 80, {{0x0A, 40}, {0x11, 40}}},
    {"rxe_atomic_lat.pcap", 40, {{0x14, 20}, {0x12, 20}}},
    {"rxe_write_bw_8k.pcap", 180, {{0x06, 20}, {0x07, 120}, {0x08, 20}, {0x11, 20}}},
    {"rxe_read_lat_8k.pcap", 90, {{0x0C, 10}, {0x0D, 10}, {0x0E, 60}, {0x0F, 10}}},
    {"ns_rc_pingpong_vs_rxe_4k.pcap", 50, {{0x00, 10}, {0x01, 20}, {0x02, 10}, {0x11, 10}}},
    /* Frame 16 is RoCEv1 (EtherType 0x8915), not RoCEv2. */
    {"roce_vectors.pcap", 16, {{0x0A, 3}, {0x11, 3}, {0x0E, 2}, {0x05, 1}, {0x81, 1}, {0x64, 1}}},
};

#define MAX_FILES 64

static const struct cap_expect *expect_for(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (size_t i = 0; i < sizeof(cap_expect) / sizeof(cap_expect[0]); i++)
		if (strcmp(cap_expect[i].file, base) == 0)
			return &cap_expect[i];
	return NULL;
}

/* Every truncation of a captured packet, in an exactly sized heap copy so that ASan catches
 * any read past the end. The parser alone cannot refuse every truncation (a shortened SEND is
 * a well-formed shorter SEND whose "ICRC" is payload), so a parse that succeeds must be
 * followed by an ICRC mismatch under the packet's real envelope. Returns how many
 * truncations were refused. */
static int truncations(const uint8_t *pkt, size_t len, const struct roce_envelope *env,
		       int *by_parser)
{
	const struct roce_opinfo *oi = roce_opinfo(pkt[0]);
	int refused = 0;

	for (size_t n = 0; n < len; n++) {
		uint8_t *copy = malloc(n ? n : 1);
		struct roce_pkt p;
		enum roce_parse_err err;

		REQUIRE(copy != NULL);
		memcpy(copy, pkt, n);
		err = roce_parse(copy, n, &p);
		if (n < (size_t)oi->hdr_len + ROCE_ICRC_LEN) {
			if (err != ROCE_ERR_TRUNCATED)
				CHECK_EQ(err, ROCE_ERR_TRUNCATED);
		}
		if (err != ROCE_ERR_NONE) {
			refused++;
			(*by_parser)++;
		} else if (n >= ROCE_BTH_LEN + ROCE_ICRC_LEN &&
			   roce_icrc(env, copy, n - ROCE_ICRC_LEN) !=
			       roce_icrc_get(copy + n - ROCE_ICRC_LEN)) {
			refused++;
			/* The payload pointer must stay inside the copy. */
			CHECK(p.payload >= copy && p.payload + p.payload_len <= copy + n);
		}
		free(copy);
	}
	return refused;
}

static void envelope_of(const struct pcap_roce *r, struct roce_envelope *env)
{
	memset(env, 0, sizeof(*env));
	env->ipv6 = r->ipv6;
	if (r->ipv6) {
		memcpy(env->src, r->ip + 8, 16);
		memcpy(env->dst, r->ip + 24, 16);
	} else {
		env->src[10] = env->src[11] = env->dst[10] = env->dst[11] = 0xFF;
		memcpy(env->src + 12, r->ip + 12, 4);
		memcpy(env->dst + 12, r->ip + 16, 4);
		env->ip_id = (uint16_t)(r->ip[4] << 8 | r->ip[5]);
		env->df = r->ip[6] & 0x40;
	}
	env->sport = r->sport;
	env->dport = r->dport;
}

static void test_captures(void)
{
	static char paths[MAX_FILES][PCAP_PATH_MAX];
	int nfiles = pcap_glob(SOFTRDMA_TEST_DATA, paths, MAX_FILES);
	int total_pkts = 0, total_trunc = 0, total_refused = 0, by_parser = 0;

	REQUIRE(nfiles > 0 && nfiles <= MAX_FILES);
	for (int fi = 0; fi < nfiles; fi++) {
		struct pcap_file f;
		struct pcap_frame fr;
		int counts[256] = {0}, n = 0, rc, parsed = 0, rebuilt = 0;

		REQUIRE(pcap_open(&f, paths[fi]) == 0);
		while ((rc = pcap_next(&f, &fr)) == 1) {
			struct pcap_roce r;
			struct roce_pkt p;
			struct roce_envelope env;
			uint8_t out[9000];
			enum roce_parse_err err;

			if (!pcap_roce(&fr, 0, &r))
				continue;
			n++;
			err = roce_parse(r.payload, r.payload_len, &p);
			if (err != ROCE_ERR_NONE) {
				fprintf(stderr, "%s frame %u: %s\n", paths[fi], fr.index,
					roce_err_name(err));
				CHECK_EQ(err, ROCE_ERR_NONE);
				continue;
			}
			parsed++;
			counts[p.bth.opcode]++;
			CHECK_EQ(p.bth.tver, 0);
			CHECK(p.payload >= r.payload &&
			      p.payload + p.payload_len + p.bth.padcnt + ROCE_ICRC_LEN ==
				  r.payload + r.payload_len);
			/* Build reproduces BTH .. pad exactly (the ICRC is left zero). */
			size_t blen = roce_build(&p, out, sizeof(out));
			if (blen == r.payload_len &&
			    memcmp(out, r.payload, blen - ROCE_ICRC_LEN) == 0 &&
			    roce_icrc_get(out + blen - ROCE_ICRC_LEN) == 0)
				rebuilt++;
			else
				fprintf(stderr, "%s frame %u: rebuild differs\n", paths[fi],
					fr.index);
			CHECK_EQ(roce_build_hdrs(&p, out, sizeof(out)), roce_hdr_len(p.bth.opcode));

			envelope_of(&r, &env);
			total_refused += truncations(r.payload, r.payload_len, &env, &by_parser);
			total_trunc += (int)r.payload_len;
		}
		CHECK_EQ(rc, 0);
		pcap_close(&f);
		CHECK_EQ(parsed, n);
		CHECK_EQ(rebuilt, n);
		total_pkts += n;

		const struct cap_expect *e = expect_for(paths[fi]);
		fprintf(stderr, "%s: %d RoCEv2 packets, %d parsed, %d rebuilt byte-exact%s\n",
			paths[fi], n, parsed, rebuilt, e ? "" : " (no expected counts)");
		if (!e)
			continue;
		CHECK_EQ(n, e->total);
		int listed = 0;
		for (int i = 0; i < 6 && e->ops[i].n; i++) {
			if (counts[e->ops[i].op] != e->ops[i].n)
				fprintf(stderr, "  opcode 0x%02x: %d, expected %d\n", e->ops[i].op,
					counts[e->ops[i].op], e->ops[i].n);
			CHECK_EQ(counts[e->ops[i].op], e->ops[i].n);
			listed += e->ops[i].n;
		}
		/* roce_vectors: the singletons not in the list. */
		if (strcmp(e->file, "roce_vectors.pcap") == 0) {
			static const uint8_t singles[] = {0x0C, 0x0D, 0x0F, 0x13, 0x12};
			for (size_t i = 0; i < sizeof(singles); i++) {
				CHECK_EQ(counts[singles[i]], 1);
				listed++;
			}
		}
		CHECK_EQ(listed, n);
	}
	fprintf(stderr,
		"captures: %d files, %d RoCEv2 packets; %d truncations, %d refused (%d by the "
		"parser, the rest by the exact ICRC)\n",
		nfiles, total_pkts, total_trunc, total_refused, by_parser);
	CHECK(total_pkts >= 706);
	CHECK_EQ(total_refused, total_trunc);
}

/* ---- roce_vectors.pcap field values (vectors/README.md section 2) ---- */

static int vector_frame(struct pcap_file *f, uint32_t index, struct pcap_roce *r,
			struct roce_pkt *p)
{
	struct pcap_frame fr;

	pcap_rewind(f);
	while (pcap_next(f, &fr) == 1) {
		if (fr.index != index)
			continue;
		if (!pcap_roce(&fr, 0, r))
			return -1;
		return roce_parse(r->payload, r->payload_len, p) == ROCE_ERR_NONE ? 0 : -1;
	}
	return -1;
}

static void test_vectors(void)
{
	struct pcap_file f;
	struct pcap_roce r;
	struct roce_pkt p;

	REQUIRE(pcap_open(&f, SOFTRDMA_TEST_DATA "/roce_vectors.pcap") == 0);

	/* Common: P_Key 0xFFFF, UDP 0xC132 -> 4791, IPv4 ID 0x1234 with DF. Frame 17 (the CM
	 * REQ to QP1) is sent from QP1's own port instead (spec 1.3 item 4). */
	for (uint32_t i = 1; i <= 17; i++) {
		if (i == 16)
			continue; /* RoCEv1: see test_roce_icrc */
		REQUIRE(vector_frame(&f, i, &r, &p) == 0);
		CHECK_EQ(p.bth.pkey, 0xFFFF);
		if (i != 17)
			CHECK_EQ(r.sport, 0xC132);
		else
			CHECK(r.sport >= 0xC000);
		CHECK_EQ(r.dport, ROCE_UDP_PORT);
		CHECK_EQ(p.bth.tver, 0);
		CHECK_EQ(p.bth.mig, 0);
		if (!r.ipv6) {
			CHECK_EQ(r.ip[4] << 8 | r.ip[5], 0x1234);
			CHECK_EQ(r.ip[6] & 0x40, 0x40);
		}
	}

	/* 1: RC RDMA WRITE ONLY "Hello, RDMA!!" */
	REQUIRE(vector_frame(&f, 1, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_WRITE_ONLY);
	CHECK_EQ(p.bth.dqpn, 0x12);
	CHECK_EQ(p.bth.psn, 0x100);
	CHECK_EQ(p.bth.ackreq, 1);
	CHECK_EQ(p.bth.padcnt, 3);
	CHECK_EQ(p.reth.va, 0x7F0000001000ull);
	CHECK_EQ(p.reth.rkey, 0x1234);
	CHECK_EQ(p.reth.dma_len, 13);
	CHECK_EQ(p.payload_len, 13);
	CHECK_MEM(p.payload, "Hello, RDMA!!", 13);
	CHECK_MEM(p.payload + 13, "\0\0\0", 3); /* zero pad */

	/* 2: ACK, credits 31, MSN 1 */
	REQUIRE(vector_frame(&f, 2, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_ACK);
	CHECK_EQ(p.bth.dqpn, 0x11);
	CHECK_EQ(p.bth.psn, 0x100);
	CHECK_EQ(p.aeth.syndrome, 0x1F);
	CHECK_EQ(p.aeth.syndrome & ROCE_AETH_TYPE_MASK, ROCE_AETH_ACK);
	CHECK_EQ(p.aeth.syndrome & ROCE_AETH_VALUE_MASK, ROCE_AETH_CREDITS_UNLIMITED);
	CHECK_EQ(p.aeth.msn, 1);
	CHECK_EQ(p.payload_len, 0);

	/* 3: SEND ONLY WITH IMMEDIATE, 16 B, SE, imm CAFEBABE */
	REQUIRE(vector_frame(&f, 3, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_SEND_ONLY_IMM);
	CHECK_EQ(p.bth.se, 1);
	CHECK_EQ(p.bth.psn, 0x101);
	CHECK_MEM(p.imm, "\xCA\xFE\xBA\xBE", 4);
	CHECK_EQ(p.payload_len, 16);
	CHECK_EQ(p.bth.padcnt, 0);

	/* 4: READ REQUEST, 4000 bytes */
	REQUIRE(vector_frame(&f, 4, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_READ_REQUEST);
	CHECK_EQ(p.bth.psn, 0x102);
	CHECK_EQ(p.reth.dma_len, 4000);
	CHECK_EQ(p.payload_len, 0);

	/* 5-8: READ RESPONSE FIRST / MIDDLE / MIDDLE / LAST */
	static const uint8_t rr_op[4] = {0x0D, 0x0E, 0x0E, 0x0F};
	static const uint32_t rr_len[4] = {1024, 1024, 1024, 928};
	for (int i = 0; i < 4; i++) {
		REQUIRE(vector_frame(&f, 5 + (uint32_t)i, &r, &p) == 0);
		CHECK_EQ(p.bth.opcode, rr_op[i]);
		CHECK_EQ(p.bth.psn, 0x102 + (uint32_t)i);
		CHECK_EQ(p.bth.dqpn, 0x11);
		CHECK_EQ(p.payload_len, rr_len[i]);
		if (i == 0 || i == 3) {
			CHECK_EQ(p.aeth.syndrome, 0x1F);
			CHECK_EQ(p.aeth.msn, 3);
		}
	}

	/* 9: NAK PSN sequence error */
	REQUIRE(vector_frame(&f, 9, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_ACK);
	CHECK_EQ(p.aeth.syndrome, 0x60);
	CHECK_EQ(p.aeth.syndrome & ROCE_AETH_TYPE_MASK, ROCE_AETH_NAK);
	CHECK_EQ(p.aeth.syndrome & ROCE_AETH_VALUE_MASK, ROCE_NAK_PSN_SEQ);
	CHECK_EQ(p.aeth.msn, 3);
	CHECK_EQ(p.bth.psn, 0x106);

	/* 10: RNR NAK, timer 12 = 0.64 ms */
	REQUIRE(vector_frame(&f, 10, &r, &p) == 0);
	CHECK_EQ(p.aeth.syndrome, 0x2C);
	CHECK_EQ(p.aeth.syndrome & ROCE_AETH_TYPE_MASK, ROCE_AETH_RNR_NAK);
	CHECK_EQ(roce_rnr_timer_us(p.aeth.syndrome & ROCE_AETH_VALUE_MASK), 640);

	/* 11: COMPARE SWAP */
	REQUIRE(vector_frame(&f, 11, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_CMP_SWAP);
	CHECK_EQ(p.atomic.rkey, 0x1234);
	CHECK_EQ(p.atomic.swap_add, 0x1111);
	CHECK_EQ(p.atomic.compare, 0x2222);
	CHECK_EQ(p.atomic.va & 7, 0);

	/* 12: ATOMIC ACK */
	REQUIRE(vector_frame(&f, 12, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_RC_ATOMIC_ACK);
	CHECK_EQ(p.aeth.syndrome, 0x1F);
	CHECK_EQ(p.aeth.msn, 4);
	CHECK_EQ(p.atomic_orig, 0x2222);

	/* 13: CNP, BECN, DSCP 48 */
	REQUIRE(vector_frame(&f, 13, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_CNP);
	CHECK_EQ(p.bth.dqpn, 0x11);
	CHECK_EQ(p.bth.becn, 1);
	CHECK_EQ(p.bth.fecn, 0);
	CHECK_EQ(p.bth.psn, 0);
	CHECK_EQ(p.payload_len, 0);
	CHECK_EQ(r.payload_len, ROCE_BTH_LEN + 16 + ROCE_ICRC_LEN);
	CHECK_EQ(r.ip[1], 0xC0);

	/* 14, 15: IPv6 WRITE ONLY, PSN 0x107 */
	for (uint32_t i = 14; i <= 15; i++) {
		REQUIRE(vector_frame(&f, i, &r, &p) == 0);
		CHECK(r.ipv6);
		CHECK_EQ(p.bth.opcode, ROCE_RC_WRITE_ONLY);
		CHECK_EQ(p.bth.psn, 0x107);
		CHECK_EQ(p.payload_len, 13);
		CHECK_EQ((r.ip[1] & 0x0F) << 16 | r.ip[2] << 8 | r.ip[3], 0x12345);
		CHECK_EQ((r.ip[0] & 0x0F) << 4 | r.ip[1] >> 4, 0x02); /* traffic class */
		/* 14: UDP checksum 0 as rxe sends it; 15: a valid non-zero checksum. */
		CHECK_EQ((r.udp[6] << 8 | r.udp[7]) != 0, i == 15);
	}

	/* 17: UD SEND ONLY to QP1 carrying a CM REQ MAD */
	REQUIRE(vector_frame(&f, 17, &r, &p) == 0);
	CHECK_EQ(p.bth.opcode, ROCE_UD_SEND_ONLY);
	CHECK_EQ(p.bth.dqpn, 1);
	CHECK_EQ(p.deth.qkey, ROCE_GSI_QKEY);
	CHECK_EQ(p.deth.src_qpn, 1);
	CHECK_EQ(p.payload_len, 256);
	CHECK_EQ(p.payload[1], 0x07);			      /* MgmtClass: CM */
	CHECK_EQ(p.payload[16] << 8 | p.payload[17], 0x0010); /* AttrID: REQ */

	pcap_close(&f);
}

/* ---- random round trips of every opcode ---- */

static void random_pkt(uint8_t op, struct roce_pkt *p, uint8_t *payload)
{
	const struct roce_opinfo *oi = roce_opinfo(op);

	memset(p, 0, sizeof(*p));
	p->bth.opcode = op;
	p->bth.se = rnd() & 1;
	p->bth.mig = rnd() & 1;
	p->bth.pkey = (uint16_t)rnd();
	p->bth.fecn = rnd() & 1;
	p->bth.becn = rnd() & 1;
	p->bth.dqpn = (uint32_t)rnd() & 0xFFFFFF;
	p->bth.ackreq = rnd() & 1;
	p->bth.psn = (uint32_t)rnd() & 0xFFFFFF;
	if (oi->hdrs & ROCE_HDR_RETH) {
		p->reth.va = rnd();
		p->reth.rkey = (uint32_t)rnd();
		p->reth.dma_len = (uint32_t)rnd();
	}
	if (oi->hdrs & ROCE_HDR_AETH) {
		p->aeth.syndrome = (uint8_t)rnd();
		p->aeth.msn = (uint32_t)rnd() & 0xFFFFFF;
	}
	if (oi->hdrs & ROCE_HDR_ATOMICETH) {
		p->atomic.va = rnd();
		p->atomic.rkey = (uint32_t)rnd();
		p->atomic.swap_add = rnd();
		p->atomic.compare = rnd();
	}
	if (oi->hdrs & ROCE_HDR_ATOMICACKETH)
		p->atomic_orig = rnd();
	if (oi->hdrs & ROCE_HDR_IMMDT)
		for (int i = 0; i < 4; i++)
			p->imm[i] = (uint8_t)rnd();
	if (oi->hdrs & ROCE_HDR_IETH)
		p->ieth = (uint32_t)rnd();
	if (oi->hdrs & ROCE_HDR_DETH) {
		p->deth.qkey = (uint32_t)rnd();
		p->deth.src_qpn = (uint32_t)rnd() & 0xFFFFFF;
	}
	if (oi->hdrs & ROCE_HDR_XRCETH)
		p->xrc_srqn = (uint32_t)rnd() & 0xFFFFFF;
	if (oi->payload) {
		p->payload_len = (uint32_t)(rnd() % 4097);
		for (uint32_t i = 0; i < p->payload_len; i++)
			payload[i] = (uint8_t)rnd();
		p->payload = payload;
	}
	p->bth.padcnt = (uint8_t)((-p->payload_len) & 3);
}

/* Field by field: struct padding is not part of the contract. */
static bool same_pkt(const struct roce_pkt *a, const struct roce_pkt *b)
{
	const struct roce_bth *x = &a->bth, *y = &b->bth;

	return x->opcode == y->opcode && x->se == y->se && x->mig == y->mig &&
	       x->padcnt == y->padcnt && x->tver == y->tver && x->pkey == y->pkey &&
	       x->fecn == y->fecn && x->becn == y->becn && x->dqpn == y->dqpn &&
	       x->ackreq == y->ackreq && x->psn == y->psn && a->reth.va == b->reth.va &&
	       a->reth.rkey == b->reth.rkey && a->reth.dma_len == b->reth.dma_len &&
	       a->aeth.syndrome == b->aeth.syndrome && a->aeth.msn == b->aeth.msn &&
	       a->atomic.va == b->atomic.va && a->atomic.rkey == b->atomic.rkey &&
	       a->atomic.swap_add == b->atomic.swap_add && a->atomic.compare == b->atomic.compare &&
	       a->atomic_orig == b->atomic_orig && memcmp(a->imm, b->imm, 4) == 0 &&
	       a->ieth == b->ieth && a->deth.qkey == b->deth.qkey &&
	       a->deth.src_qpn == b->deth.src_qpn && a->xrc_srqn == b->xrc_srqn &&
	       a->payload_len == b->payload_len &&
	       (a->payload_len == 0 || memcmp(a->payload, b->payload, a->payload_len) == 0);
}

static void test_round_trip(void)
{
	static uint8_t payload[4096], buf[4096 + ROCE_MAX_HDR_LEN + 8], buf2[sizeof(buf)];
	int trips = 0, bad = 0;

	for (unsigned op = 0; op < 256; op++) {
		if (!roce_opinfo((uint8_t)op))
			continue;
		for (int k = 0; k < 20; k++) {
			struct roce_pkt p, q;
			size_t n, n2;

			random_pkt((uint8_t)op, &p, payload);
			n = roce_build(&p, buf, sizeof(buf));
			if (n != roce_hdr_len((uint8_t)op) + p.payload_len + p.bth.padcnt +
				     ROCE_ICRC_LEN ||
			    roce_parse(buf, n, &q) != ROCE_ERR_NONE || !same_pkt(&p, &q)) {
				bad++;
				continue;
			}
			n2 = roce_build(&q, buf2, sizeof(buf2));
			if (n2 != n || memcmp(buf, buf2, n) != 0)
				bad++;
			trips++;
		}
	}
	fprintf(stderr, "round trips: %d, bad %d\n", trips, bad);
	CHECK_EQ(bad, 0);
	CHECK_EQ(trips, 62 * 20); /* RC 23, UC 12, UD 2, CNP 1, XRC 23 (RC + 0xA0), SACK 1 */
}

/* ---- malformed input and build limits ---- */

static void test_malformed(void)
{
	uint8_t buf[256];
	struct roce_pkt p, q;
	int unknown = 0;

	/* Unknown opcodes are refused whatever follows. */
	for (unsigned op = 0; op < 256; op++) {
		if (roce_opinfo((uint8_t)op))
			continue;
		memset(buf, 0, sizeof(buf));
		buf[0] = (uint8_t)op;
		CHECK_EQ(roce_parse(buf, 100, &q), ROCE_ERR_UNKNOWN_OPCODE);
		unknown++;
	}
	CHECK_EQ(unknown, 256 - 62);
	CHECK_EQ(roce_parse(buf, 0, &q), ROCE_ERR_TRUNCATED);

	/* TVer 1..15 */
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_SEND_ONLY;
	p.payload = (const uint8_t *)"abcdefgh";
	p.payload_len = 8;
	size_t n = roce_build(&p, buf, sizeof(buf));
	REQUIRE(n == 12 + 8 + 4);
	CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_NONE);
	for (int tv = 1; tv < 16; tv++) {
		buf[1] = (uint8_t)((buf[1] & 0xF0) | tv);
		CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_BAD_TVER);
	}
	buf[1] &= 0xF0;

	/* PadCnt larger than the bytes after the headers. */
	p.payload_len = 2; /* 2 bytes + 2 pad */
	n = roce_build(&p, buf, sizeof(buf));
	REQUIRE(n == 12 + 4 + 4);
	CHECK_EQ((buf[1] >> 4) & 3, 2);
	CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_NONE);
	CHECK_EQ(q.payload_len, 2);
	buf[1] = (uint8_t)((buf[1] & ~0x30) | 3 << 4); /* 4 bytes after headers, pad 3: ok */
	CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_NONE);
	CHECK_EQ(q.payload_len, 1);
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_SEND_ONLY; /* empty SEND: nothing after the BTH */
	n = roce_build(&p, buf, sizeof(buf));
	REQUIRE(n == 16);
	for (int pc = 1; pc <= 3; pc++) {
		buf[1] = (uint8_t)((buf[1] & ~0x30) | pc << 4);
		CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_BAD_PAD);
	}

	/* Payload (or pad) on opcodes that carry none. */
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_ACK;
	n = roce_build(&p, buf, sizeof(buf));
	REQUIRE(n == 16 + 4);
	CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_NONE);
	memset(buf + n, 0, 8);
	CHECK_EQ(roce_parse(buf, n + 4, &q), ROCE_ERR_UNEXPECTED_PAYLOAD);
	buf[1] |= 1 << 4; /* one pad byte and one byte to hold it: still not allowed */
	CHECK_EQ(roce_parse(buf, n + 1, &q), ROCE_ERR_UNEXPECTED_PAYLOAD);
	CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_BAD_PAD);
	static const uint8_t nopayload[] = {0x0C, 0x11, 0x12, 0x13, 0x14, 0x81};
	for (size_t i = 0; i < sizeof(nopayload); i++) {
		memset(&p, 0, sizeof(p));
		p.bth.opcode = nopayload[i];
		n = roce_build(&p, buf, sizeof(buf));
		REQUIRE(n == roce_hdr_len(nopayload[i]) + 4);
		CHECK_EQ(roce_parse(buf, n, &q), ROCE_ERR_NONE);
		CHECK_EQ(roce_parse(buf, n + 1, &q), ROCE_ERR_UNEXPECTED_PAYLOAD);
		/* Build refuses a payload there too. */
		p.payload = buf;
		p.payload_len = 1;
		CHECK_EQ(roce_build(&p, buf, sizeof(buf)), 0);
	}

	/* Build: every capacity short of the total fails and writes nothing past cap. */
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_WRITE_ONLY_IMM;
	p.payload = (const uint8_t *)"0123456789";
	p.payload_len = 10;
	size_t total = 32 + 10 + 2 + 4;
	for (size_t cap = 0; cap < total; cap++) {
		memset(buf, 0xAA, sizeof(buf));
		CHECK_EQ(roce_build(&p, buf, cap), 0);
		CHECK_EQ(buf[cap], 0xAA);
	}
	CHECK_EQ(roce_build(&p, buf, total), total);
	for (size_t cap = 0; cap < 32; cap++)
		CHECK_EQ(roce_build_hdrs(&p, buf, cap), 0);
	/* PadCnt comes from payload_len, not from bth.padcnt. */
	p.bth.padcnt = 1;
	CHECK_EQ(roce_build_hdrs(&p, buf, 32), 32);
	CHECK_EQ((buf[1] >> 4) & 3, 2);
	p.bth.opcode = 0x15;
	CHECK_EQ(roce_build(&p, buf, sizeof(buf)), 0);
	CHECK_EQ(roce_build_hdrs(&p, buf, sizeof(buf)), 0);

	/* Zero-copy build: payload already in place. */
	memset(&p, 0, sizeof(p));
	p.bth.opcode = ROCE_RC_SEND_ONLY;
	memcpy(buf + 12, "xyz", 3);
	p.payload = buf + 12;
	p.payload_len = 3;
	CHECK_EQ(roce_build(&p, buf, sizeof(buf)), 12 + 3 + 1 + 4);
	CHECK_MEM(buf + 12, "xyz\0", 4);

	/* Error names: distinct, and a fallback for anything else. */
	for (int e = 0; e < ROCE_ERR__COUNT; e++) {
		CHECK(roce_err_name((enum roce_parse_err)e) != NULL);
		for (int e2 = 0; e2 < e; e2++)
			CHECK(strcmp(roce_err_name((enum roce_parse_err)e),
				     roce_err_name((enum roce_parse_err)e2)) != 0);
	}
	CHECK(strcmp(roce_err_name(ROCE_ERR_BAD_PAD), "bad_pad") == 0);
	CHECK(strcmp(roce_err_name(ROCE_ERR__COUNT), "unknown") == 0);
}

/* Random bytes never make the parser misbehave, and what it accepts rebuilds identically. */
static void test_random_bytes(void)
{
	uint8_t buf[128], out[256];
	int accepted = 0, rebuilt = 0, bad = 0;

	for (int i = 0; i < 200000; i++) {
		size_t n = (size_t)(rnd() % sizeof(buf));
		struct roce_pkt p;

		for (size_t j = 0; j < n; j++)
			buf[j] = (uint8_t)rnd();
		/* Bias towards known opcodes and TVer 0 so the deeper checks run. */
		if (n > 1 && (rnd() & 1)) {
			static const uint8_t ops[] = {0x00, 0x04, 0x0A, 0x0B, 0x11,
						      0x12, 0x13, 0x64, 0x65, 0x81};
			buf[0] = ops[rnd() % sizeof(ops)];
			buf[1] &= 0xF0;
		}
		if (roce_parse(buf, n, &p) != ROCE_ERR_NONE)
			continue;
		accepted++;
		/* Rebuilding gives the same length and the same decode when the PadCnt is the
		 * canonical one (build derives it from the payload length); reserved bits (BTH
		 * Resv6a/Resv7, DETH byte 4, CNP bytes) and pad contents are not kept. */
		if (p.bth.padcnt != ((-p.payload_len) & 3))
			continue;
		struct roce_pkt q;
		size_t m = roce_build(&p, out, sizeof(out));
		if (m != n || roce_parse(out, m, &q) != ROCE_ERR_NONE || !same_pkt(&p, &q))
			bad++;
		else
			rebuilt++;
	}
	CHECK_EQ(bad, 0);
	CHECK(rebuilt > 0);
	fprintf(stderr, "random bytes: %d accepted of 200000, %d rebuilt, %d bad\n", accepted,
		rebuilt, bad);
	CHECK(accepted > 0);
}

int main(void)
{
	rng = check_seed(0xC0DEC0DEull) | 1;
	test_opcode_table();
	test_captures();
	test_vectors();
	test_round_trip();
	test_malformed();
	test_random_bytes();
	return check_exit();
}
