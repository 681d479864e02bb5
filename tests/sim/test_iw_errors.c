/* iWARP engine error paths (src/engine/iw_eng.h): every violation gives the right Terminate
 * on the wire (decoded with the wire layer and checked: layer, type, code, attached headers),
 * places no byte, moves the QP to ERR, and completes the WRs concerned with the right status
 * on both sides, everything else flushed, exactly once. Hostile FPDUs are built with the wire
 * layer and fed to one engine (cut at random places); the two-engine cases run over the
 * iwsim stream. */
#include "check.h"
#include "iwsim.h"

#include <stdlib.h>
#include <string.h>

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

static uint64_t seed;

struct env {
	struct iwsim *w;
	struct sim_mr *a, *b; /* 64 KiB each, all access */
	bool crc;
};

static void setup(struct env *e, bool crc, const struct iwsim_cfg *cfg_in)
{
	struct iwsim_cfg cfg = {0};

	if (cfg_in)
		cfg = *cfg_in;
	cfg.attr.crc = crc;
	e->crc = crc;
	e->w = calloc(1, sizeof(*e->w));
	REQUIRE(e->w);
	iwsim_init(e->w, seed++, &cfg);
	e->a = sim_mr_reg(&e->w->s.node[SIM_A], 1, 65536, ACC_ALL);
	e->b = sim_mr_reg(&e->w->s.node[SIM_B], 1, 65536, ACC_ALL);
}

static void teardown(struct env *e)
{
	iwsim_fini(e->w);
	free(e->w);
}

/* Encodes one FPDU (as a hostile or hand-made peer would send it). */
static size_t fpdu(const struct env *e, const struct iw_hdr *h, const uint8_t *pay, uint32_t len,
		   uint8_t *out, size_t cap)
{
	struct iw_fpdu f = {0};
	int n;

	f.hdr = *h;
	f.payload = pay;
	f.payload_len = len;
	n = iw_fpdu_encode(&f, e->crc, out, cap);
	REQUIRE(n > 0);
	return (size_t)n;
}

/* Feeds bytes to node `nd` in random pieces. Returns the first error. */
static int inject(struct env *e, int nd, const uint8_t *buf, size_t len)
{
	size_t pos = 0;

	while (pos < len) {
		size_t n = 1 + (size_t)(sim_rand(&e->w->s) % 40), used = 0;
		int err;

		if (n > len - pos)
			n = len - pos;
		err = iw_qp_rx_bytes(e->w->qp[nd], buf + pos, n, &used, 0);
		pos += used;
		if (err)
			return err;
	}
	return 0;
}

/* Drains node nd's transmit side: the last FPDU must be a Terminate with these codes; the
 * QP must be done sending. Returns the decoded Terminate in *t. */
static void expect_term_at(const char *file, int line, struct env *e, int nd, int layer, int etype,
			   int ecode, int hdrct, struct iw_term *t)
{
	static uint8_t buf[1 << 20];
	size_t len = iwsim_drain_tx(e->w->qp[nd], buf, sizeof(buf)), pos = 0;
	struct iw_fpdu f = {0};
	bool found = false;

	while (pos < len) {
		int n = iw_fpdu_decode(buf + pos, len - pos, e->crc, 0, &f);

		if (n <= 0) {
			fprintf(stderr, "%s:%d: undecodable output at %zu: %s\n", file, line, pos,
				iw_err_name(n));
			check_failures++;
			return;
		}
		pos += (size_t)n;
		found = f.hdr.opcode == IW_OP_TERMINATE;
	}
	check_count++;
	if (!found || f.hdr.term.layer != layer || f.hdr.term.etype != etype ||
	    f.hdr.term.ecode != ecode ||
	    (f.hdr.term.m ? 4 : 0) + (f.hdr.term.d ? 2 : 0) + (f.hdr.term.rdmap_hdr_len ? 1 : 0) !=
		hdrct) {
		check_failures++;
		fprintf(
		    stderr,
		    "%s:%d: expected Terminate %d/%d/%d hdrct %d, got %s %d/%d/%d m%d d%d r%d\n",
		    file, line, layer, etype, ecode, hdrct, found ? "Terminate" : "none",
		    f.hdr.term.layer, f.hdr.term.etype, f.hdr.term.ecode, f.hdr.term.m,
		    f.hdr.term.d, f.hdr.term.rdmap_hdr_len);
	}
	/* siw: QN 2, MSN 1, MO 0, L set. */
	CHECK_EQ(f.hdr.qn, IW_QN_TERMINATE);
	CHECK_EQ(f.hdr.msn, 1);
	CHECK_EQ(f.hdr.mo, 0);
	CHECK(f.hdr.last);
	CHECK(iw_qp_tx_finished(e->w->qp[nd]));
	CHECK_EQ(iw_qp_state(e->w->qp[nd]), IBV_QPS_ERR);
	if (t)
		*t = f.hdr.term;
}
#define EXPECT_TERM(e, nd, l, et, ec, h, t)                                                        \
	expect_term_at(__FILE__, __LINE__, e, nd, l, et, ec, h, t)

static int cq_count(struct sim_node *n)
{
	return (int)(n->cq.tail - n->cq.head);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static const uint64_t *cnt(struct env *e, int nd)
{
	return iw_qp_counters(e->w->qp[nd]);
}

/* ---- tagged (RDMA Write) checks ---- */

static void write_errors(void)
{
	static uint8_t pay[3000], out[4096];
	struct {
		const char *what;
		int stag_delta; /* added to the MR's key */
		uint64_t to;	/* 0: the MR's start + 100 */
		bool to_abs;
		unsigned mr_access;
		int ecode;
		int cnt;
	} cases[] = {
	    {"unknown STag", 0x55, 0, false, ACC_ALL, 0x00, IW_CNT_term_sent_T_STAG},
	    {"beyond the MR", 0, 65536 - 100, false, ACC_ALL, 0x01, IW_CNT_term_sent_T_BOUNDS},
	    {"before the MR", 0, (uint64_t)-200, false, ACC_ALL, 0x01, IW_CNT_term_sent_T_BOUNDS},
	    {"TO + len wraps", 0, UINT64_MAX - 10, true, ACC_ALL, 0x03, IW_CNT_term_sent_T_TO_WRAP},
	    {"no remote write", 0, 0, false, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 0x00,
	     IW_CNT_term_sent_T_STAG},
	};

	sim_fill(pay, sizeof(pay), 1);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct env e;
		struct iw_hdr h;
		struct iw_term t;
		size_t n;
		int err, fail0 = check_failures;

		setup(&e, i & 1, NULL);
		e.b->access = cases[i].mr_access;
		iw_hdr_init(&h, IW_OP_WRITE);
		h.stag = e.b->key + (uint32_t)cases[i].stag_delta;
		h.to = cases[i].to_abs ? cases[i].to : sim_va(e.b, 100) + cases[i].to;
		n = fpdu(&e, &h, pay, 1000, out, sizeof(out));
		err = inject(&e, SIM_B, out, n);
		CHECK_EQ(err, -EPROTO);
		EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, cases[i].ecode, 6, &t);
		/* The terminated header is the Write's: seg len = payload, DDP hdr bytes. */
		CHECK_EQ(t.ddp_seg_len, 1000);
		CHECK_EQ(t.ddp_hdr_len, IW_DDP_TAGGED_HDR_LEN);
		CHECK_MEM(t.ddp_hdr, out + 2, IW_DDP_TAGGED_HDR_LEN);
		CHECK(all_zero(e.b->host, 65536)); /* not a byte placed */
		CHECK(sim_has_event(&e.w->s.node[SIM_B], IBV_EVENT_QP_ACCESS_ERR));
		CHECK_EQ(cnt(&e, SIM_B)[cases[i].cnt], 1);
		CHECK_EQ(iw_qp_rx_bytes(e.w->qp[SIM_B], out, 4, &n, 0), -EPIPE);
		if (check_failures != fail0)
			fprintf(stderr, "  case: %s\n", cases[i].what);
		teardown(&e);
	}
}

/* A continuation segment that does not continue the Write: STag / TO (siw). */
static void write_continuation(void)
{
	static uint8_t pay[100], out[512];
	for (int k = 0; k < 2; k++) {
		struct env e;
		struct iw_hdr h;
		size_t n;

		setup(&e, true, NULL);
		iw_hdr_init(&h, IW_OP_WRITE);
		h.stag = e.b->key;
		h.to = sim_va(e.b, 0);
		h.last = false;
		n = fpdu(&e, &h, pay, 100, out, sizeof(out));
		CHECK_EQ(inject(&e, SIM_B, out, n), 0);
		h.last = true;
		h.to = sim_va(e.b, 100 + (k ? 4 : 0));
		h.stag = k ? e.b->key : e.b->key + 1;
		n = fpdu(&e, &h, pay, 100, out, sizeof(out));
		CHECK_EQ(inject(&e, SIM_B, out, n), -EPROTO);
		EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_TAGGED, k ? 0x01 : 0x00, 6, NULL);
		teardown(&e);
	}
}

/* ---- untagged (Send) checks ---- */

static void send_errors(void)
{
	static uint8_t pay[200], out[512];
	enum { MSN, MO, QN, NO_RECV, TOO_SMALL, INVAL, NCASES };

	for (int c = 0; c < NCASES; c++) {
		struct env e;
		struct iw_hdr h;
		size_t n;
		struct ibv_wc wc;
		uint8_t raw[IW_DDP_UNTAGGED_HDR_LEN];
		int fail0 = check_failures;

		setup(&e, c & 1, NULL);
		if (c != NO_RECV)
			REQUIRE(iwsim_post_recv(e.w, SIM_B, 11, e.b, 0,
						c == TOO_SMALL ? 50 : 1000) == 0);
		if (c != NO_RECV)
			REQUIRE(iwsim_post_recv(e.w, SIM_B, 12, e.b, 2000, 1000) == 0);
		iw_hdr_init(&h, c == INVAL ? IW_OP_SEND_INV : IW_OP_SEND);
		h.msn = c == MSN ? 5 : 1;
		h.mo = c == MO ? 10 : 0;
		h.qn = c == QN ? 1 : 0;
		h.rsvdulp = 0xdead00; /* INVAL: not an STag of B */
		n = fpdu(&e, &h, pay, 100, out, sizeof(out));
		memcpy(raw, out + 2, sizeof(raw));
		CHECK_EQ(inject(&e, SIM_B, out, n), -EPROTO);
		switch (c) {
		case MSN:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x03, 6, NULL);
			break;
		case MO:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x04, 6, NULL);
			break;
		case QN:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x01, 6, NULL);
			break;
		case NO_RECV:
			/* No RNR in iWARP (siw): no buffer. */
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x02, 6, NULL);
			break;
		case TOO_SMALL:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x02, 6, NULL);
			break;
		case INVAL:
			/* sim's mem_invalidate fails with -EINVAL: remote operation (siw). */
			EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x09, 6, NULL);
			break;
		}
		/* Receives: the one concerned carries its status, the rest is flushed. */
		if (c == TOO_SMALL) {
			IWSIM_EXPECT_WC(e.w, SIM_B, 11, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, -1);
			CHECK(all_zero(e.b->host, 65536));
		} else if (c == INVAL) {
			IWSIM_EXPECT_WC(e.w, SIM_B, 11, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, -1);
		} else if (c != NO_RECV) {
			IWSIM_EXPECT_WC(e.w, SIM_B, 11, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
			CHECK(all_zero(e.b->host, 65536));
		}
		if (c != NO_RECV)
			IWSIM_EXPECT_WC(e.w, SIM_B, 12, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
		CHECK_EQ(cq_count(&e.w->s.node[SIM_B]), 0);
		(void)wc;
		CHECK(sim_has_event(&e.w->s.node[SIM_B], IBV_EVENT_QP_FATAL));
		if (check_failures != fail0)
			fprintf(stderr, "  send case %d\n", c);
		teardown(&e);
	}
}

/* ---- Read Requests ---- */

static void rreq_errors(void)
{
	static uint8_t out[512];
	enum { BAD_STAG, NO_READ, BOUNDS, WRAP, MSN, PAYLOAD, NCASES };

	for (int c = 0; c < NCASES; c++) {
		struct env e;
		struct iw_hdr h;
		struct iw_term t;
		size_t n;
		int fail0 = check_failures;

		setup(&e, c & 1, NULL);
		if (c == NO_READ)
			e.b->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
		iw_hdr_init(&h, IW_OP_READ_REQ);
		h.msn = c == MSN ? 2 : 1;
		h.rreq.sink_stag = 0x1234;
		h.rreq.sink_to = 0x5000;
		h.rreq.size = 4096;
		h.rreq.src_stag = e.b->key + (c == BAD_STAG ? 9 : 0);
		h.rreq.src_to = c == WRAP ? UINT64_MAX - 100 : sim_va(e.b, c == BOUNDS ? 65000 : 0);
		if (c == PAYLOAD) {
			/* A Read Request carrying payload: ULPDU_LENGTH is not 46 (siw: EPROTO). */
			n = fpdu(&e, &h, NULL, 0, out, sizeof(out));
			out[1] += 4;
			memmove(out + 2 + 46 + 4, out + 2 + 46, 4);
		} else {
			n = fpdu(&e, &h, NULL, 0, out, sizeof(out));
		}
		CHECK_EQ(inject(&e, SIM_B, out, n), -EPROTO);
		switch (c) {
		case BAD_STAG:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x00, 7,
				    &t);
			CHECK_EQ(t.rdmap_hdr_len, IW_RREQ_LEN);
			CHECK_MEM(t.rdmap_hdr, out + 2 + IW_DDP_UNTAGGED_HDR_LEN, IW_RREQ_LEN);
			CHECK_EQ(t.ddp_seg_len, 0);
			break;
		case NO_READ:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x02, 7,
				    NULL);
			break;
		case BOUNDS:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x01, 7,
				    NULL);
			break;
		case WRAP:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_PROTECTION, 0x04, 7,
				    NULL);
			break;
		case MSN:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_UNTAGGED, 0x03, 6, NULL);
			break;
		case PAYLOAD:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_CATASTROPHIC, 0x00, 0,
				    NULL);
			break;
		}
		CHECK_EQ(cnt(&e, SIM_B)[IW_CNT_tx_payload_bytes], 0); /* no data left */
		if (check_failures != fail0)
			fprintf(stderr, "  rreq case %d\n", c);
		teardown(&e);
	}
}

/* IRD: a Read Request beyond the inbound queue is RDMAP catastrophic (siw). */
static void ird(void)
{
	static uint8_t out[512];
	struct env e;
	struct iwsim_cfg cfg = {0};
	size_t n;

	cfg.attr.ird = 2;
	setup(&e, true, &cfg);
	for (uint32_t i = 1; i <= 3; i++) {
		struct iw_hdr h;

		iw_hdr_init(&h, IW_OP_READ_REQ);
		h.msn = i;
		h.rreq.sink_stag = 0x77;
		h.rreq.size = 100;
		h.rreq.src_stag = e.b->key;
		h.rreq.src_to = sim_va(e.b, 0);
		n = fpdu(&e, &h, NULL, 0, out, sizeof(out));
		CHECK_EQ(inject(&e, SIM_B, out, n), i < 3 ? 0 : -EPROTO);
	}
	/* The queued responses are dropped: only the Terminate goes out. */
	EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x07, 6, NULL);
	CHECK_EQ(cnt(&e, SIM_B)[IW_CNT_tx_fpdus], 1);
	CHECK_EQ(cnt(&e, SIM_B)[IW_CNT_term_sent_RO_STREAM], 1);
	teardown(&e);
}

/* Stream-level: oversized ULPDU, unknown opcode, bad CRC, Read Response with no READ. */
static void stream_errors(void)
{
	static uint8_t pay[2000], out[4096];
	enum { TOO_BIG, OPCODE, CRC, RRESP, NCASES };

	for (int c = 0; c < NCASES; c++) {
		struct env e;
		struct iwsim_cfg cfg = {0};
		struct iw_hdr h;
		size_t n;
		int fail0 = check_failures;

		cfg.attr.max_rx_ulpdu = c == TOO_BIG ? 1000 : 0;
		setup(&e, c == CRC, &cfg);
		REQUIRE(iwsim_post_recv(e.w, SIM_B, 21, e.b, 0, 4096) == 0);
		iw_hdr_init(&h, c == RRESP ? IW_OP_READ_RESP : IW_OP_SEND);
		h.msn = 1;
		if (c == RRESP) {
			h.stag = e.b->key;
			h.to = sim_va(e.b, 0);
		}
		n = fpdu(&e, &h, pay, c == TOO_BIG ? 1500 : 300, out, sizeof(out));
		if (c == OPCODE)
			out[3] = (uint8_t)((out[3] & 0xf0) | 0x0a); /* RFC 7306 Atomic Request */
		if (c == CRC)
			out[40] ^= 0x40; /* a payload bit: caught only by the CRC */
		CHECK_EQ(inject(&e, SIM_B, out, n), -EPROTO);
		switch (c) {
		case TOO_BIG:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_CATASTROPHIC, 0, 0, NULL);
			IWSIM_EXPECT_WC(e.w, SIM_B, 21, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
			break;
		case OPCODE:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_RDMAP, IW_ETYPE_RDMAP_OP, 0x06, 0, NULL);
			IWSIM_EXPECT_WC(e.w, SIM_B, 21, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
			break;
		case CRC:
			/* The Send's bytes were placed before the CRC was known: the receive must
			 * not succeed. */
			EXPECT_TERM(&e, SIM_B, IW_LAYER_LLP, IW_ETYPE_LLP_MPA, 0x02, 0, NULL);
			IWSIM_EXPECT_WC(e.w, SIM_B, 21, IBV_WC_GENERAL_ERR, IBV_WC_RECV, -1);
			break;
		case RRESP:
			EXPECT_TERM(&e, SIM_B, IW_LAYER_DDP, IW_ETYPE_DDP_CATASTROPHIC, 0, 0, NULL);
			CHECK(all_zero(e.b->host, 65536));
			IWSIM_EXPECT_WC(e.w, SIM_B, 21, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
			break;
		}
		CHECK_EQ(cq_count(&e.w->s.node[SIM_B]), 0);
		if (check_failures != fail0)
			fprintf(stderr, "  stream case %d\n", c);
		teardown(&e);
	}
}

/* ---- two engines: the requester's side of a Terminate ---- */

/* A bad rkey on a WRITE and on a READ: the responder terminates, the requester maps it. */
static void remote_access(void)
{
	for (int c = 0; c < 2; c++) {
		struct env e;
		struct iw_term t;
		int fail0 = check_failures;

		setup(&e, c, NULL);
		if (c == 0) {
			/* WRITE (bad rkey) then READ: the WRITE has completed (handed to TCP,
			 * siw), the READ is the oldest started WR when the Terminate comes. */
			REQUIRE(iwsim_post_send(e.w, SIM_A, 1, IBV_WR_RDMA_WRITE, e.a, 0, 500,
						sim_va(e.b, 0), e.b->key ^ 0x100, IBV_SEND_SIGNALED,
						0) == 0);
			REQUIRE(iwsim_post_send(e.w, SIM_A, 2, IBV_WR_RDMA_READ, e.a, 1000, 500,
						sim_va(e.b, 0), e.b->key, IBV_SEND_SIGNALED,
						0) == 0);
		} else {
			REQUIRE(iwsim_post_send(e.w, SIM_A, 2, IBV_WR_RDMA_READ, e.a, 1000, 500,
						sim_va(e.b, 0), e.b->key ^ 0x100, IBV_SEND_SIGNALED,
						0) == 0);
		}
		REQUIRE(iwsim_post_send(e.w, SIM_A, 3, IBV_WR_SEND, e.a, 0, 10, 0, 0, 0, 0) == 0);
		REQUIRE(iwsim_post_recv(e.w, SIM_A, 4, e.a, 5000, 100) == 0);
		iwsim_run(e.w, UINT64_MAX);
		CHECK_EQ(iw_qp_state(e.w->qp[SIM_A]), IBV_QPS_ERR);
		CHECK_EQ(iw_qp_state(e.w->qp[SIM_B]), IBV_QPS_ERR);
		CHECK(iw_qp_tx_finished(e.w->qp[SIM_A]));
		CHECK(iw_qp_tx_finished(e.w->qp[SIM_B]));
		CHECK_EQ(e.w->rx_err[SIM_A], -ECONNRESET);
		REQUIRE(iw_qp_term_rcvd(e.w->qp[SIM_A], &t) == 0);
		if (c == 0) {
			CHECK_EQ(t.layer, IW_LAYER_DDP);
			CHECK_EQ(t.etype, IW_ETYPE_DDP_TAGGED);
			CHECK_EQ(t.ecode, 0);
			CHECK_EQ(iw_qp_counters(e.w->qp[SIM_A])[IW_CNT_term_rcvd_ddp_tagged], 1);
			IWSIM_EXPECT_WC(e.w, SIM_A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 500);
		} else {
			CHECK_EQ(t.layer, IW_LAYER_RDMAP);
			CHECK_EQ(t.etype, IW_ETYPE_RDMAP_PROTECTION);
			CHECK_EQ(t.ecode, 0);
			CHECK(t.r && t.rdmap_hdr_len == IW_RREQ_LEN);
			CHECK_EQ(iw_qp_counters(e.w->qp[SIM_A])[IW_CNT_term_rcvd_rdmap_protection],
				 1);
		}
		IWSIM_EXPECT_WC(e.w, SIM_A, 2, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, -1);
		IWSIM_EXPECT_WC(e.w, SIM_A, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, -1);
		IWSIM_EXPECT_WC(e.w, SIM_A, 4, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
		CHECK_EQ(cq_count(&e.w->s.node[SIM_A]), 0);
		CHECK(sim_has_event(&e.w->s.node[SIM_A], IBV_EVENT_QP_FATAL));
		CHECK(sim_has_event(&e.w->s.node[SIM_B], IBV_EVENT_QP_ACCESS_ERR));
		if (check_failures != fail0)
			fprintf(stderr, "  remote access case %d\n", c);
		teardown(&e);
	}
}

/* The receiver's buffer is too small: B LOC_LEN_ERR, A gets DDP untagged and its next
 * started WR REM_INV_REQ_ERR. */
static void remote_too_small(void)
{
	struct env e;
	struct iw_term t;

	setup(&e, false, NULL);
	REQUIRE(iwsim_post_recv(e.w, SIM_B, 10, e.b, 0, 64) == 0);
	REQUIRE(iwsim_post_send(e.w, SIM_A, 1, IBV_WR_SEND, e.a, 0, 5000, 0, 0, IBV_SEND_SIGNALED,
				0) == 0);
	e.w->tx_seg = IWSIM_RANDOM; /* the SEND is still being written when B terminates */
	e.w->s.node[SIM_A].cq.armed = 0;
	iwsim_run(e.w, UINT64_MAX);
	IWSIM_EXPECT_WC(e.w, SIM_B, 10, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, -1);
	REQUIRE(iw_qp_term_rcvd(e.w->qp[SIM_A], &t) == 0);
	CHECK_EQ(t.layer, IW_LAYER_DDP);
	CHECK_EQ(t.etype, IW_ETYPE_DDP_UNTAGGED);
	CHECK_EQ(t.ecode, 0x02);
	/* The 5000-byte SEND spans several FPDUs; whether its last byte reached TCP before the
	 * Terminate came decides success or the mapped error. Either way: exactly once. */
	CHECK_EQ(cq_count(&e.w->s.node[SIM_A]), 1);
	CHECK(all_zero(e.b->host, 65536));
	teardown(&e);
}

/* A CRC error in a Read Response: the READ never reports success; the requester terminates
 * the responder with LLP / CRC. */
static void rresp_crc(void)
{
	struct env e;
	struct iw_term t;
	struct iwsim_pipe *p;

	setup(&e, true, NULL);
	sim_fill(e.b->host, 65536, 4);
	REQUIRE(iwsim_post_send(e.w, SIM_A, 1, IBV_WR_RDMA_READ, e.a, 0, 3000, sim_va(e.b, 0),
				e.b->key, IBV_SEND_SIGNALED, 0) == 0);
	e.w->rx_hold[SIM_A] = true;
	iwsim_run(e.w, UINT64_MAX);
	p = &e.w->pipe[SIM_B];
	REQUIRE(p->tail - p->head > 2000);
	p->buf[(p->head + 2000) & (p->cap - 1)] ^= 1; /* in the second FPDU's payload */
	e.w->rx_hold[SIM_A] = false;
	iwsim_run(e.w, UINT64_MAX);
	IWSIM_EXPECT_WC(e.w, SIM_A, 1, IBV_WC_GENERAL_ERR, IBV_WC_RDMA_READ, -1);
	REQUIRE(iw_qp_term_rcvd(e.w->qp[SIM_B], &t) == 0);
	CHECK_EQ(t.layer, IW_LAYER_LLP);
	CHECK_EQ(t.ecode, 0x02);
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_A])[IW_CNT_term_sent_CRC], 1);
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_B])[IW_CNT_term_rcvd_llp], 1);
	teardown(&e);
}

/* The peer's Terminate, fed by hand while a READ is outstanding. */
static void peer_terminate(void)
{
	static uint8_t out[256];
	struct env e;
	struct iw_term t = {0}, got;
	int n;

	setup(&e, true, NULL);
	REQUIRE(iwsim_post_send(e.w, SIM_B, 1, IBV_WR_RDMA_READ, e.b, 0, 100, sim_va(e.a, 0),
				e.a->key, IBV_SEND_SIGNALED, 0) == 0);
	REQUIRE(iwsim_post_send(e.w, SIM_B, 2, IBV_WR_RDMA_WRITE, e.b, 0, 100, sim_va(e.a, 0),
				e.a->key, 0, 0) == 0);
	REQUIRE(iwsim_post_recv(e.w, SIM_B, 3, e.b, 0, 100) == 0);
	(void)iwsim_drain_tx(e.w->qp[SIM_B], out, sizeof(out)); /* the requests go out */
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_B])[IW_CNT_tx_fpdus], 2);
	t.layer = IW_LAYER_RDMAP;
	t.etype = IW_ETYPE_RDMAP_PROTECTION;
	t.ecode = 0x02;
	n = iw_term_build(&t, 1, true, out, sizeof(out));
	REQUIRE(n > 0);
	CHECK_EQ(inject(&e, SIM_B, out, (size_t)n), -ECONNRESET);
	CHECK_EQ(iw_qp_state(e.w->qp[SIM_B]), IBV_QPS_ERR);
	CHECK(iw_qp_tx_finished(e.w->qp[SIM_B]));
	CHECK_EQ(iwsim_drain_tx(e.w->qp[SIM_B], out, sizeof(out)), 0); /* nothing answers it */
	REQUIRE(iw_qp_term_rcvd(e.w->qp[SIM_B], &got) == 0);
	CHECK_EQ(got.ecode, 0x02);
	IWSIM_EXPECT_WC(e.w, SIM_B, 1, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, -1);
	IWSIM_EXPECT_WC(e.w, SIM_B, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, -1);
	IWSIM_EXPECT_WC(e.w, SIM_B, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
	CHECK_EQ(cq_count(&e.w->s.node[SIM_B]), 0);
	CHECK(sim_has_event(&e.w->s.node[SIM_B], IBV_EVENT_QP_FATAL));
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_B])[IW_CNT_term_rcvd_rdmap_protection], 1);
	teardown(&e);
}

/* The stream is cut mid-FPDU; the caller reports the reset: both sides flush, nothing
 * hangs, later posts flush at once. */
static void cut(void)
{
	struct env e;
	struct sim_mr *big_a, *big_b;
	struct iwsim_cfg cfg = {0};
	int na, nb;

	cfg.pipe_cap = 16384;
	setup(&e, true, &cfg);
	big_a = sim_mr_reg(&e.w->s.node[SIM_A], 1, 1 << 20, ACC_ALL);
	big_b = sim_mr_reg(&e.w->s.node[SIM_B], 1, 1 << 20, ACC_ALL);
	REQUIRE(iwsim_post_recv(e.w, SIM_B, 50, e.b, 0, 100) == 0);
	REQUIRE(iwsim_post_send(e.w, SIM_A, 1, IBV_WR_RDMA_WRITE, big_a, 0, 1 << 20,
				sim_va(big_b, 0), big_b->key, IBV_SEND_SIGNALED, 0) == 0);
	REQUIRE(iwsim_post_send(e.w, SIM_A, 2, IBV_WR_SEND, e.a, 0, 100, 0, 0, IBV_SEND_SIGNALED,
				0) == 0);
	REQUIRE(iwsim_post_send(e.w, SIM_B, 3, IBV_WR_RDMA_READ, e.b, 0, 60000, sim_va(e.a, 0),
				e.a->key, IBV_SEND_SIGNALED, 0) == 0);
	e.w->tx_seg = IWSIM_RANDOM;
	for (int i = 0; i < 3; i++)
		iwsim_step(e.w);
	e.w->pipe[SIM_A].cut = e.w->pipe[SIM_B].cut = true;
	iwsim_run(e.w, 1000);
	iw_qp_set_state(e.w->qp[SIM_A], IBV_QPS_ERR, 0);
	iw_qp_set_state(e.w->qp[SIM_B], IBV_QPS_ERR, 0);
	CHECK(iw_qp_tx_finished(e.w->qp[SIM_A]));
	CHECK(iw_qp_tx_finished(e.w->qp[SIM_B]));
	IWSIM_EXPECT_WC(e.w, SIM_A, 1, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, -1);
	IWSIM_EXPECT_WC(e.w, SIM_A, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, -1);
	na = cq_count(&e.w->s.node[SIM_A]);
	CHECK_EQ(na, 0);
	IWSIM_EXPECT_WC(e.w, SIM_B, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_READ, -1);
	IWSIM_EXPECT_WC(e.w, SIM_B, 50, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
	nb = cq_count(&e.w->s.node[SIM_B]);
	CHECK_EQ(nb, 0);
	CHECK_EQ(iwsim_post_send(e.w, SIM_A, 4, IBV_WR_SEND, e.a, 0, 1, 0, 0, 0, 0), 0);
	IWSIM_EXPECT_WC(e.w, SIM_A, 4, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, -1);
	teardown(&e);
}

/* ERR while an FPDU is half written: the FPDU is finished, the Terminate follows it, and
 * the peer parses both (then the WRs are flushed). The FPDUs framed after it in the same batch
 * (the Write is three FPDUs, handed out together) never go. */
static void half_fpdu(void)
{
	static uint8_t out[8192];
	struct env e;
	struct iovec iov[IW_TX_MAX_IOV];
	int k;
	size_t total = 0, len, pos = 0;
	struct iw_hdr h;
	uint8_t bad[64];
	int nfpdu = 0;

	setup(&e, true, NULL);
	REQUIRE(iwsim_post_send(e.w, SIM_B, 1, IBV_WR_RDMA_WRITE, e.b, 0, 3000, sim_va(e.a, 0),
				e.a->key, IBV_SEND_SIGNALED, 0) == 0);
	k = iw_qp_tx_want(e.w->qp[SIM_B], 0, iov, IW_TX_MAX_IOV);
	REQUIRE(k > 0);
	for (int i = 0; i < k; i++)
		total += iov[i].iov_len;
	REQUIRE(iov[0].iov_len >= IW_FPDU_LEN_SIZE);
	{
		const uint8_t *p = iov[0].iov_base;
		size_t first = iw_fpdu_len((uint32_t)(p[0] << 8 | p[1]));

		CHECK(total > first); /* the batch holds more than the first FPDU */
		total = first;
	}
	memcpy(out, iov[0].iov_base, 10);
	REQUIRE(iw_qp_tx_done(e.w->qp[SIM_B], 10) == 0); /* 10 bytes of the first FPDU */
	/* A bad Write arrives now. */
	iw_hdr_init(&h, IW_OP_WRITE);
	h.stag = 0x99;
	{
		size_t n = fpdu(&e, &h, bad, sizeof(bad), out + 4096, 512);

		CHECK_EQ(inject(&e, SIM_B, out + 4096, n), -EPROTO);
	}
	len = 10 + iwsim_drain_tx(e.w->qp[SIM_B], out + 10, sizeof(out) - 10);
	/* The FPDU, then a Terminate: 2 + (22 + 2 + 14) + 0 pad + 4 CRC. */
	CHECK_EQ(len, total + 44);
	while (pos < len) {
		struct iw_fpdu f;
		int n = iw_fpdu_decode(out + pos, len - pos, true, 0, &f);

		REQUIRE(n > 0);
		pos += (size_t)n;
		nfpdu++;
		if (nfpdu == 1)
			CHECK_EQ(f.hdr.opcode, IW_OP_WRITE);
		else
			CHECK_EQ(f.hdr.opcode, IW_OP_TERMINATE);
	}
	CHECK_EQ(nfpdu, 2);
	IWSIM_EXPECT_WC(e.w, SIM_B, 1, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, -1);
	teardown(&e);
}

/* Transmit-side failures: a SEND with a bad lkey (LOC_PROT_ERR, Terminate RDMAP local
 * catastrophic) and a Read Request whose source MR went away before the response was sent
 * (RDMAP remote protection with the request attached, as siw re-creates it). */
static void tx_errors(void)
{
	struct env e;
	struct iw_term t;
	struct ibv_sge sge;
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;
	int fail0 = check_failures;

	setup(&e, true, NULL);
	sge.addr = sim_va(e.a, 0);
	sge.length = 100;
	sge.lkey = e.a->key + 3;
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	REQUIRE(iw_qp_post_send(e.w->qp[SIM_A], &wr, &bad, 0) == 0);
	REQUIRE(iwsim_post_recv(e.w, SIM_B, 2, e.b, 0, 100) == 0);
	iwsim_run(e.w, UINT64_MAX);
	IWSIM_EXPECT_WC(e.w, SIM_A, 1, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, -1);
	IWSIM_EXPECT_WC(e.w, SIM_B, 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
	REQUIRE(iw_qp_term_rcvd(e.w->qp[SIM_B], &t) == 0);
	CHECK_EQ(t.layer, IW_LAYER_RDMAP);
	CHECK_EQ(t.etype, IW_ETYPE_RDMAP_CATASTROPHIC);
	CHECK_EQ(t.ecode, 0xff);
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_A])[IW_CNT_term_sent_LOCAL], 1);
	teardown(&e);

	setup(&e, false, NULL);
	REQUIRE(iwsim_post_send(e.w, SIM_A, 5, IBV_WR_RDMA_READ, e.a, 0, 100, sim_va(e.b, 0),
				e.b->key, IBV_SEND_SIGNALED, 0) == 0);
	e.w->tx_hold[SIM_B] = true;
	iwsim_run(e.w, UINT64_MAX);
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_B])[IW_CNT_rx_read_reqs], 1);
	e.b->valid = false; /* deregistered before the response goes out */
	e.w->tx_hold[SIM_B] = false;
	iwsim_run(e.w, UINT64_MAX);
	REQUIRE(iw_qp_term_rcvd(e.w->qp[SIM_A], &t) == 0);
	CHECK_EQ(t.layer, IW_LAYER_RDMAP);
	CHECK_EQ(t.etype, IW_ETYPE_RDMAP_PROTECTION);
	CHECK_EQ(t.ecode, 0x00);
	CHECK_EQ(t.rdmap_hdr_len, IW_RREQ_LEN);
	IWSIM_EXPECT_WC(e.w, SIM_A, 5, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_READ, -1);
	CHECK_EQ(iw_qp_counters(e.w->qp[SIM_B])[IW_CNT_tx_payload_bytes], 0);
	if (check_failures != fail0)
		fprintf(stderr, "  tx errors\n");
	teardown(&e);
}

int main(void)
{
	seed = check_seed(7);
	/* Every test twice: posts through the send queue, then through the direct way
	 * (iw_qp_post_one) wherever a WR qualifies. */
	for (int d = 0; d < 2; d++) {
		iwsim_direct = d;
		fprintf(stderr, "-- posts: %s\n", d ? "direct way first" : "send queue");
		write_errors();
		write_continuation();
		send_errors();
		rreq_errors();
		ird();
		stream_errors();
		remote_access();
		remote_too_small();
		rresp_crc();
		peer_terminate();
		cut();
		half_fpdu();
		tx_errors();
	}
	return check_exit();
}
