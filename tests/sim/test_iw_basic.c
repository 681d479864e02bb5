/* iWARP engine data path (src/engine/iw_eng.h): two engines over an in-memory TCP stream,
 * every opcode at 0, 1, MULPDU-1, MULPDU, MULPDU+1 bytes and 1 MiB (16 MiB once), CRC on
 * and off, the stream cut whole / byte by byte / at random on both the write and the read
 * side; every byte verified, every WR completed exactly once and in order, zero-copy
 * placement proven (received payload bytes are read straight into registered memory, the
 * engine copies none). Also scatter/gather, inline, unsignaled WRs, ORD and fence, SRQ,
 * opcodes iWARP does not have. */
#include "check.h"
#include "iwsim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB	(1u << 20)
#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

enum top { T_SEND, T_SEND_INV, T_SEND_SE, T_WRITE, T_READ, T__COUNT };
static const char *const top_name[T__COUNT] = {"SEND", "SEND_INV", "SEND_SE", "WRITE", "READ"};

static uint64_t seed;
static unsigned notifies;

static void on_notify(struct eng_cq *cq)
{
	(void)cq;
	notifies++;
}

static const uint64_t *cnt(struct iwsim *w, int node)
{
	return iw_qp_counters(w->qp[node]);
}

static int cq_count(struct sim_node *n)
{
	return (int)(n->cq.tail - n->cq.head);
}

/* One message of `op` and `len` bytes from A to B (READ: B's bytes to A), checked end to
 * end. */
static void one(struct iwsim *w, struct sim_mr *amr, struct sim_mr *bmr, enum top op, uint32_t len,
		uint32_t tag)
{
	struct sim_node *A = &w->s.node[SIM_A], *B = &w->s.node[SIM_B];
	struct sim_mr *src = op == T_READ ? bmr : amr, *dst = op == T_READ ? amr : bmr;
	int rcv = op == T_READ ? SIM_A : SIM_B, snd = 1 - rcv;
	uint64_t in_mr0 = w->rx_in_mr[rcv], from_mr0 = w->tx_from_mr[snd];
	uint64_t direct0 = w->direct_taken[SIM_A];
	/* The direct way takes a SEND or WRITE of at most IW_TX_ONE_PAY bytes in one FPDU. */
	bool direct = w->direct && op != T_READ && len <= IW_TX_ONE_PAY &&
		      len + IW_DDP_UNTAGGED_HDR_LEN <= iw_mulpdu(1448);
	struct sim_mr *inv = NULL;
	struct ibv_wc wc;
	unsigned notifies0 = notifies;
	int r = 0;

	sim_fill(src->host, len, tag);
	memset(dst->host, 0, (size_t)len + 64);
	switch (op) {
	case T_SEND:
	case T_SEND_SE:
	case T_SEND_INV:
		REQUIRE(iwsim_post_recv(w, SIM_B, 1000 + tag, bmr, 0, len + (tag & 1 ? 0 : 17)) ==
			0);
		B->cq.notify = on_notify;
		B->cq.armed = 2; /* solicited only: fires for Send with SE, not for Send */
		if (op == T_SEND_INV)
			inv =
			    sim_mr_reg(B, 1, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		r = iwsim_post_send(
		    w, SIM_A, tag, op == T_SEND_INV ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND, amr, 0,
		    len, 0, 0, IBV_SEND_SIGNALED | (op == T_SEND_SE ? IBV_SEND_SOLICITED : 0),
		    inv ? inv->key : 0);
		break;
	case T_WRITE:
		r = iwsim_post_send(w, SIM_A, tag, IBV_WR_RDMA_WRITE, amr, 0, len, sim_va(bmr, 0),
				    bmr->key, IBV_SEND_SIGNALED, 0);
		break;
	case T_READ:
		r = iwsim_post_send(w, SIM_A, tag, IBV_WR_RDMA_READ, amr, 0, len, sim_va(bmr, 0),
				    bmr->key, IBV_SEND_SIGNALED, 0);
		break;
	default:
		break;
	}
	REQUIRE(r == 0);
	iwsim_run(w, UINT64_MAX);

	/* Every byte, and nothing past the end. */
	CHECK_MEM(dst->host, src->host, len);
	CHECK_EQ(dst->host[len], 0);
	/* Exactly one completion on the requester, in order, with its length. */
	CHECK_EQ(cq_count(A), 1);
	IWSIM_EXPECT_WC(w, SIM_A, tag, IBV_WC_SUCCESS,
			op == T_READ	? IBV_WC_RDMA_READ
			: op == T_WRITE ? IBV_WC_RDMA_WRITE
					: IBV_WC_SEND,
			len);
	if (op == T_WRITE || op == T_READ) {
		CHECK_EQ(cq_count(B), 0);
	} else {
		CHECK_EQ(cq_count(B), 1);
		if (sim_poll(B, &wc, 1) == 1) {
			CHECK_EQ(wc.wr_id, 1000 + tag);
			CHECK_EQ(wc.status, IBV_WC_SUCCESS);
			CHECK_EQ(wc.opcode, IBV_WC_RECV);
			CHECK_EQ(wc.byte_len, len);
			CHECK_EQ(wc.qp_num, iw_qp_num(w->qp[SIM_B]));
			if (op == T_SEND_INV) {
				CHECK(wc.wc_flags & IBV_WC_WITH_INV);
				CHECK_EQ(wc.invalidated_rkey, inv->key);
				CHECK(!inv->valid); /* env->mem_invalidate was called */
			} else {
				CHECK(!(wc.wc_flags & IBV_WC_WITH_INV));
			}
		}
		CHECK_EQ(notifies - notifies0, op == T_SEND_SE ? 1 : 0);
		B->cq.armed = 0;
	}
	/* Zero copy: the payload was read straight into registered memory and sent straight
	 * from it; the engines copied nothing. Except a small message posted the direct way:
	 * copied into its FPDU (iw_qp_post_one). */
	CHECK_EQ(w->rx_in_mr[rcv] - in_mr0, len);
	CHECK_EQ(w->tx_from_mr[snd] - from_mr0, direct ? 0 : len);
	CHECK_EQ(w->direct_taken[SIM_A] - direct0, direct ? 1 : 0);
	CHECK_EQ(cnt(w, SIM_A)[IW_CNT_rx_payload_copied], 0);
	CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_payload_copied], 0);
	CHECK_EQ(iw_qp_state(w->qp[SIM_A]), IBV_QPS_RTS);
	CHECK_EQ(iw_qp_state(w->qp[SIM_B]), IBV_QPS_RTS);
}

static void matrix(void)
{
	static const enum iwsim_seg segs[] = {IWSIM_WHOLE, IWSIM_ONE, IWSIM_RANDOM};
	static const char *const seg_name[] = {"whole", "one byte", "random"};

	for (int crc = 0; crc < 2; crc++) {
		for (unsigned s = 0; s < 3; s++) {
			struct iwsim *w = calloc(1, sizeof(*w));
			struct iwsim_cfg cfg = {0};
			struct sim_mr *amr, *bmr;
			uint16_t mulpdu;
			uint32_t tag = 0;
			int failures0 = check_failures;

			REQUIRE(w);
			cfg.attr.crc = crc;
			cfg.tx_seg = segs[s];
			cfg.rx_seg = segs[s];
			iwsim_init(w, seed + (uint64_t)crc * 3 + s, &cfg);
			mulpdu = iw_mulpdu(1448);
			amr = sim_mr_reg(&w->s.node[SIM_A], 1, MIB + 64, ACC_ALL);
			bmr = sim_mr_reg(&w->s.node[SIM_B], 1, MIB + 64, ACC_ALL);
			for (int op = 0; op < T__COUNT; op++) {
				const uint32_t sizes[] = {0,	  1,	       mulpdu - 1u,
							  mulpdu, mulpdu + 1u, MIB};

				for (unsigned z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
					/* Byte-by-byte 1 MiB only for WRITE and READ (time). */
					if (segs[s] == IWSIM_ONE && sizes[z] == MIB &&
					    op != T_WRITE && op != T_READ)
						continue;
					one(w, amr, bmr, (enum top)op, sizes[z], ++tag);
					if (check_failures != failures0) {
						fprintf(stderr, "  in %s %u B, crc %d, %s\n",
							top_name[op], sizes[z], crc, seg_name[s]);
						failures0 = check_failures;
					}
				}
			}
			/* FPDUs are MULPDU-sized: a 1 MiB Write is ceil(1 MiB / (mulpdu - 14))
			 * FPDUs, counted on the receiver. */
			CHECK(cnt(w, SIM_B)[IW_CNT_rx_writes] > 0);
			fprintf(stderr,
				"crc %d, %s: %" PRIu64 " / %" PRIu64 " receive calls, %" PRIu64
				" / %" PRIu64 " transmit calls, %" PRIu64 " stream bytes A->B\n",
				crc, seg_name[s], w->rx_calls[0], w->rx_calls[1], w->tx_calls[0],
				w->tx_calls[1], w->pipe[0].total);
			iwsim_fini(w);
			free(w);
		}
	}
}

/* 16 MiB, once: a Write, CRC on, random cuts. */
static void big(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr, *bmr;
	uint32_t len = 16 * MIB;
	uint32_t room = iw_mulpdu(1448) - IW_DDP_TAGGED_HDR_LEN;

	REQUIRE(w);
	cfg.attr.crc = true;
	cfg.tx_seg = IWSIM_RANDOM;
	cfg.rx_seg = IWSIM_RANDOM;
	iwsim_init(w, seed + 100, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, len + 64, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, len + 64, ACC_ALL);
	one(w, amr, bmr, T_WRITE, len, 7);
	/* siw segmentation: every FPDU but the last carries mulpdu - 14 payload bytes. */
	CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_fpdus], (len + room - 1) / room);
	iwsim_fini(w);
	free(w);
}

/* Many WRs of every kind in one batch, some unsignaled: completions exactly once, in post
 * order, every byte in place. */
static void batch(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr, *bmr, *brecv, *aread;
	enum { N = 60, SLOT = 8192 };
	uint32_t len[N];
	int op[N];
	bool sig[N];
	int nrecv = 0;

	REQUIRE(w);
	cfg.tx_seg = IWSIM_RANDOM;
	cfg.rx_seg = IWSIM_RANDOM;
	cfg.attr.ord = 4;
	cfg.attr.ird = 4;
	iwsim_init(w, seed + 200, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, N * SLOT, ACC_ALL);
	aread = sim_mr_reg(&w->s.node[SIM_A], 1, N * SLOT, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, N * SLOT, ACC_ALL);
	brecv = sim_mr_reg(&w->s.node[SIM_B], 1, N * SLOT, ACC_ALL);
	sim_fill(amr->host, N * SLOT, 1);
	sim_fill(bmr->host, N * SLOT, 2);
	for (int i = 0; i < N; i++) {
		op[i] = (int)(sim_rand(&w->s) % 3); /* SEND, WRITE, READ */
		len[i] = (uint32_t)(sim_rand(&w->s) % SLOT);
		sig[i] = sim_rand(&w->s) & 1 || i == N - 1;
		if (op[i] == 0)
			REQUIRE(iwsim_post_recv(w, SIM_B, 5000 + (uint64_t)nrecv++, brecv,
						(uint64_t)i * SLOT, SLOT) == 0);
		REQUIRE(iwsim_post_send(w, SIM_A, (uint64_t)i,
					op[i] == 0   ? IBV_WR_SEND
					: op[i] == 1 ? IBV_WR_RDMA_WRITE
						     : IBV_WR_RDMA_READ,
					op[i] == 2 ? aread : amr, (uint64_t)i * SLOT, len[i],
					sim_va(bmr, (uint64_t)i * SLOT) + (op[i] == 1 ? 0 : 0),
					bmr->key, sig[i] ? IBV_SEND_SIGNALED : 0, 0) == 0);
	}
	/* WRITEs land in bmr over the bytes that READs fetch: give them their own slots by
	 * using the WR index, so no two WRs share bytes. */
	iwsim_run(w, UINT64_MAX);
	for (int i = 0; i < N; i++) {
		size_t o = (size_t)i * SLOT;

		if (sig[i])
			IWSIM_EXPECT_WC(w, SIM_A, (uint64_t)i, IBV_WC_SUCCESS,
					op[i] == 0   ? IBV_WC_SEND
					: op[i] == 1 ? IBV_WC_RDMA_WRITE
						     : IBV_WC_RDMA_READ,
					len[i]);
		if (op[i] == 0)
			CHECK_MEM(brecv->host + o, amr->host + o, len[i]);
		else if (op[i] == 1)
			CHECK_MEM(bmr->host + o, amr->host + o, len[i]);
		else
			CHECK_MEM(aread->host + o, bmr->host + o, len[i]);
	}
	CHECK_EQ(cq_count(&w->s.node[SIM_A]), 0);
	for (int i = 0, k = 0; i < N; i++) {
		if (op[i] == 0) {
			IWSIM_EXPECT_WC(w, SIM_B, 5000 + (uint64_t)k, IBV_WC_SUCCESS, IBV_WC_RECV,
					len[i]);
			k++;
		}
	}
	CHECK_EQ(cq_count(&w->s.node[SIM_B]), 0);
	CHECK_EQ(cnt(w, SIM_A)[IW_CNT_rx_payload_copied], 0);
	CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_payload_copied], 0);
	iwsim_fini(w);
	free(w);
}

/* Scatter/gather on both sides, inline data, and a transmit side with one iovec per call. */
static void sgl(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *a[3], *b[4], *bw;
	struct ibv_sge s[3];
	struct ibv_recv_wr rw = {0};
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;
	const struct ibv_recv_wr *rbad;
	struct ibv_sge rs[4];
	const uint32_t alen[3] = {1000, 3, 2500}, blen[4] = {7, 1500, 1, 3000};
	uint8_t expect[3503], inl[200], inl_copy[200];
	uint32_t off = 0;

	REQUIRE(w);
	cfg.max_iov = 1;
	cfg.rx_seg = IWSIM_RANDOM;
	cfg.tx_seg = IWSIM_RANDOM;
	iwsim_init(w, seed + 300, &cfg);
	for (int i = 0; i < 3; i++) {
		a[i] = sim_mr_reg(&w->s.node[SIM_A], 1, alen[i], ACC_ALL);
		sim_fill(a[i]->host, alen[i], 10 + (uint32_t)i);
		s[i].addr = sim_va(a[i], 0);
		s[i].length = alen[i];
		s[i].lkey = a[i]->key;
		memcpy(expect + off, a[i]->host, alen[i]);
		off += alen[i];
	}
	for (int i = 0; i < 4; i++) {
		b[i] = sim_mr_reg(&w->s.node[SIM_B], 1, blen[i], ACC_ALL);
		rs[i].addr = sim_va(b[i], 0);
		rs[i].length = blen[i];
		rs[i].lkey = b[i]->key;
	}
	bw = sim_mr_reg(&w->s.node[SIM_B], 1, 8192, ACC_ALL);
	rw.wr_id = 77;
	rw.sg_list = rs;
	rw.num_sge = 4;
	REQUIRE(eng_base_post_recv(iw_qp_base(w->qp[SIM_B]), &rw, &rbad) == 0);
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = s;
	wr.num_sge = 3;
	wr.send_flags = IBV_SEND_SIGNALED;
	REQUIRE(iw_qp_post_send(w->qp[SIM_A], &wr, &bad, 0) == 0);
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = sim_va(bw, 100);
	wr.wr.rdma.rkey = bw->key;
	REQUIRE(iw_qp_post_send(w->qp[SIM_A], &wr, &bad, 0) == 0);
	/* Inline: the bytes are taken at post time, from a plain (unregistered) buffer. */
	sim_fill(inl, sizeof(inl), 99);
	memcpy(inl_copy, inl, sizeof(inl));
	s[0].addr = (uint64_t)(uintptr_t)inl;
	s[0].length = sizeof(inl);
	s[0].lkey = 0;
	wr.wr_id = 3;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = sim_va(bw, 5000);
	REQUIRE(iw_qp_post_send(w->qp[SIM_A], &wr, &bad, 0) == 0);
	memset(inl, 0, sizeof(inl));
	iwsim_run(w, UINT64_MAX);
	IWSIM_EXPECT_WC(w, SIM_A, 1, IBV_WC_SUCCESS, IBV_WC_SEND, off);
	IWSIM_EXPECT_WC(w, SIM_A, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, off);
	IWSIM_EXPECT_WC(w, SIM_A, 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, sizeof(inl));
	IWSIM_EXPECT_WC(w, SIM_B, 77, IBV_WC_SUCCESS, IBV_WC_RECV, off);
	off = 0;
	for (int i = 0; i < 4; i++) {
		uint32_t n =
		    blen[i] < sizeof(expect) - off ? blen[i] : (uint32_t)sizeof(expect) - off;

		CHECK_MEM(b[i]->host, expect + off, n);
		off += n;
	}
	CHECK_MEM(bw->host + 100, expect, sizeof(expect));
	CHECK_MEM(bw->host + 5000, inl_copy, sizeof(inl));
	CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_payload_copied], 0);
	iwsim_fini(w);
	free(w);
}

/* ORD holds further READs (and what follows them), FENCE waits for earlier READs. */
static void ord_fence(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr, *bmr;

	REQUIRE(w);
	cfg.attr.ord = 2;
	iwsim_init(w, seed + 400, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 65536, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 65536, ACC_ALL);
	sim_fill(bmr->host, 65536, 5);
	for (int i = 0; i < 5; i++)
		REQUIRE(iwsim_post_send(w, SIM_A, (uint64_t)i, IBV_WR_RDMA_READ, amr,
					(uint64_t)i * 4096, 4096, sim_va(bmr, (uint64_t)i * 4096),
					bmr->key, IBV_SEND_SIGNALED, 0) == 0);
	REQUIRE(iwsim_post_send(w, SIM_A, 9, IBV_WR_RDMA_WRITE, amr, 0, 100, sim_va(bmr, 60000),
				bmr->key, IBV_SEND_SIGNALED | IBV_SEND_FENCE, 0) == 0);
	w->rx_hold[SIM_B] = true;
	iwsim_run(w, UINT64_MAX);
	/* Only ORD Read Requests went out; nothing behind them. */
	CHECK_EQ(cnt(w, SIM_A)[IW_CNT_tx_fpdus], 2);
	CHECK(w->wakes[SIM_A] > 0); /* env->wake announced the work */
	w->rx_hold[SIM_B] = false;
	iwsim_run(w, UINT64_MAX);
	for (int i = 0; i < 5; i++)
		IWSIM_EXPECT_WC(w, SIM_A, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 4096);
	IWSIM_EXPECT_WC(w, SIM_A, 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	CHECK_MEM(amr->host, bmr->host, 5 * 4096);
	CHECK_MEM(bmr->host + 60000, amr->host, 100);
	iwsim_fini(w);
	free(w);
}

/* The inbound Read Request ring grows as requests queue (4, 8 ... up to the IRD), from the
 * start or after many requests went through (its entries then wrap around it), and keeps
 * growing while responses go out: 200 READs with up to 100 outstanding, B's transmit held
 * while 80 of them arrive (after none, or after 60 answered one by one); every READ completes
 * in order with its own bytes. */
static void irq_growth(void)
{
	enum { N = 200, LEN = 256, HELD = 80 };

	for (int first = 0; first <= 60; first += 60) {
		struct iwsim *w = calloc(1, sizeof(*w));
		struct iwsim_cfg cfg = {0};
		struct sim_mr *amr, *bmr;

		REQUIRE(w);
		cfg.attr.ird = 100;
		cfg.attr.ord = 100;
		iwsim_init(w, seed + 450 + (uint64_t)first, &cfg);
		amr = sim_mr_reg(&w->s.node[SIM_A], 1, 65536, ACC_ALL);
		bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 65536, ACC_ALL);
		sim_fill(bmr->host, 65536, 7);
		for (int i = 0; i < N; i++) {
			/* B's source in a scrambled order: a response from the wrong entry shows */
			uint64_t src = (uint64_t)((i * 37) % N) * LEN;
			if (i == first)
				w->tx_hold[SIM_B] = true; /* B answers nothing: requests queue */
			REQUIRE(iwsim_post_send(w, SIM_A, (uint64_t)i, IBV_WR_RDMA_READ, amr,
						(uint64_t)i * LEN, LEN, sim_va(bmr, src), bmr->key,
						IBV_SEND_SIGNALED, 0) == 0);
			if (i < first) {
				iwsim_run(w, UINT64_MAX); /* one at a time */
			} else if (i == first + HELD - 1) {
				iwsim_run(w, UINT64_MAX);
				CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_read_reqs], first + HELD);
				w->tx_hold[SIM_B] = false;
			} else if (i >= first + HELD && i % 7 == 0) {
				iwsim_step(w); /* requests arrive while responses go out */
			}
		}
		iwsim_run(w, UINT64_MAX);
		for (int i = 0; i < N; i++)
			IWSIM_EXPECT_WC(w, SIM_A, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RDMA_READ,
					LEN);
		for (int i = 0; i < N; i++)
			CHECK_MEM(amr->host + (size_t)i * LEN,
				  bmr->host + (size_t)((i * 37) % N) * LEN, LEN);
		CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_read_reqs], N);
		CHECK_EQ(cnt(w, SIM_B)[IW_CNT_term_sent_RO_STREAM], 0);
		iwsim_fini(w);
		free(w);
	}
}

/* The outbound READ queue is sized by the send ring (3 WRs: 4 entries, whatever the ORD):
 * rounds of READs that fill the ring wrap it many times, each response placed in its own
 * READ's sink. */
static void orq_small_ring(void)
{
	enum { SQ = 3, ROUNDS = 7, LEN = 64 };
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr, *bmr;
	uint64_t id = 0;

	REQUIRE(w);
	cfg.max_send_wr = SQ;
	cfg.attr.ird = 100;
	cfg.attr.ord = 100;
	iwsim_init(w, seed + 470, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 4096, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 4096, ACC_ALL);
	sim_fill(bmr->host, 4096, 8);
	for (int r = 0; r < ROUNDS; r++) {
		w->tx_hold[SIM_B] = true; /* every READ of the round is out before any answer */
		for (int i = 0; i < SQ; i++, id++)
			REQUIRE(iwsim_post_send(w, SIM_A, id, IBV_WR_RDMA_READ, amr, id * LEN, LEN,
						sim_va(bmr, (id * 29) % 60 * LEN), bmr->key,
						IBV_SEND_SIGNALED, 0) == 0);
		CHECK_EQ(iwsim_post_send(w, SIM_A, id, IBV_WR_RDMA_READ, amr, 0, LEN,
					 sim_va(bmr, 0), bmr->key, IBV_SEND_SIGNALED, 0),
			 -ENOMEM); /* the send ring is full */
		iwsim_run(w, UINT64_MAX);
		CHECK_EQ(cnt(w, SIM_B)[IW_CNT_rx_read_reqs], id);
		w->tx_hold[SIM_B] = false;
		iwsim_run(w, UINT64_MAX);
		for (uint64_t j = id - SQ; j < id; j++)
			IWSIM_EXPECT_WC(w, SIM_A, j, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, LEN);
	}
	for (uint64_t j = 0; j < id; j++)
		CHECK_MEM(amr->host + j * LEN, bmr->host + (j * 29) % 60 * LEN, LEN);
	iwsim_fini(w);
	free(w);
}

/* Opcodes without an iWARP message, READ with more than one sink SGE, states. */
static void posting(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct sim_mr *amr;
	static const enum ibv_wr_opcode bad_ops[] = {
	    IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_SEND_WITH_IMM, IBV_WR_ATOMIC_CMP_AND_SWP,
	    IBV_WR_ATOMIC_FETCH_AND_ADD};
	struct ibv_sge s[2];
	struct ibv_send_wr wr = {0}, wr2 = {0};
	const struct ibv_send_wr *bad = NULL;

	REQUIRE(w);
	iwsim_init(w, seed + 500, NULL);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 4096, ACC_ALL);
	for (unsigned i = 0; i < sizeof(bad_ops) / sizeof(bad_ops[0]); i++) {
		CHECK_EQ(iwsim_post_send(w, SIM_A, 1, bad_ops[i], amr, 0, 8, 0, 1, 0, 0), -EINVAL);
	}
	for (int i = 0; i < 2; i++) {
		s[i].addr = sim_va(amr, (uint64_t)i * 100);
		s[i].length = 10;
		s[i].lkey = amr->key;
	}
	/* A chain: the first is posted, the second (READ with 2 SGEs) is refused. */
	wr.wr_id = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = s;
	wr.num_sge = 1;
	wr.next = &wr2;
	wr2 = wr;
	wr2.wr_id = 2;
	wr2.opcode = IBV_WR_RDMA_READ;
	wr2.num_sge = 2;
	wr2.next = NULL;
	CHECK_EQ(iw_qp_post_send(w->qp[SIM_A], &wr, &bad, 0), -EINVAL);
	CHECK(bad == &wr2);
	/* Nothing has been sent: the posted WRITE goes to ERR with a flush. */
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_ERR, 0);
	IWSIM_EXPECT_WC(w, SIM_A, 1, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE, -1);
	CHECK(iw_qp_tx_finished(w->qp[SIM_A]));
	/* Posting in ERR flushes at once. */
	CHECK_EQ(iwsim_post_send(w, SIM_A, 3, IBV_WR_SEND, amr, 0, 8, 0, 0, 0, 0), 0);
	IWSIM_EXPECT_WC(w, SIM_A, 3, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, -1);
	CHECK_EQ(iwsim_post_recv(w, SIM_A, 4, amr, 0, 8), 0);
	IWSIM_EXPECT_WC(w, SIM_A, 4, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, -1);
	/* RESET -> RTS starts a new stream. */
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_RESET, 0);
	CHECK_EQ(iwsim_post_send(w, SIM_A, 5, IBV_WR_SEND, amr, 0, 8, 0, 0, 0, 0), -EINVAL);
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_INIT, 0);
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_RTR, 0);
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_RTS, 0);
	CHECK(!iw_qp_tx_finished(w->qp[SIM_A]));
	CHECK_EQ(iw_qp_state(w->qp[SIM_A]), IBV_QPS_RTS);
	iwsim_fini(w);
	free(w);
}

/* B receives through an SRQ. */
static void srq(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct eng_rq rq;
	struct sim_mr *amr, *bmr;

	REQUIRE(w);
	REQUIRE(eng_rq_init(&rq, 16, 4, true) == 0);
	cfg.srq_b = &rq;
	iwsim_init(w, seed + 600, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 8192, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 8192, ACC_ALL);
	sim_fill(amr->host, 8192, 3);
	for (int i = 0; i < 3; i++) {
		struct ibv_sge s = {sim_va(bmr, (uint64_t)i * 2048), 2048, bmr->key};
		struct ibv_recv_wr rw = {0};
		const struct ibv_recv_wr *rbad;

		rw.wr_id = 40 + (uint64_t)i;
		rw.sg_list = &s;
		rw.num_sge = 1;
		REQUIRE(eng_rq_post(&rq, &rw, &rbad) == 0);
		REQUIRE(iwsim_post_send(w, SIM_A, (uint64_t)i, IBV_WR_SEND, amr, (uint64_t)i * 2048,
					2000, 0, 0, IBV_SEND_SIGNALED, 0) == 0);
	}
	CHECK_EQ(iwsim_post_recv(w, SIM_B, 1, bmr, 0, 8), -EINVAL);
	iwsim_run(w, UINT64_MAX);
	for (int i = 0; i < 3; i++) {
		IWSIM_EXPECT_WC(w, SIM_A, (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_SEND, 2000);
		IWSIM_EXPECT_WC(w, SIM_B, 40 + (uint64_t)i, IBV_WC_SUCCESS, IBV_WC_RECV, 2000);
	}
	for (int i = 0; i < 3; i++)
		CHECK_MEM(bmr->host + i * 2048, amr->host + i * 2048, 2000);
	CHECK_EQ(eng_rq_count(&rq), 0);
	iwsim_fini(w);
	eng_rq_fini(&rq);
	free(w);
}

/* The MPA exchange's RTR Read (iw_conn.h, RFC 6581): MSNs continue after it, its silent ORQ
 * entry holds an ORD slot until the zero-length Read Response, which completes nothing. */
static void rtr(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr, *bmr;
	const uint32_t used[IW_QN__COUNT] = {0, 1, 0};
	struct iw_fpdu f = {0};
	uint8_t out[64], tmp[256];
	size_t used_bytes = 0;
	int n;

	REQUIRE(w);
	cfg.attr.ord = 1;
	iwsim_init(w, seed + 700, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 4096, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 4096, ACC_ALL);
	sim_fill(bmr->host, 4096, 8);
	CHECK_EQ(iw_qp_set_rtr(w->qp[SIM_A], used, NULL, true), 0);
	CHECK_EQ(iw_qp_set_rtr(w->qp[SIM_B], NULL, used, false), 0);
	REQUIRE(iwsim_post_send(w, SIM_A, 1, IBV_WR_RDMA_READ, amr, 0, 3000, sim_va(bmr, 0),
				bmr->key, IBV_SEND_SIGNALED, 0) == 0);
	CHECK_EQ(iwsim_drain_tx(w->qp[SIM_A], tmp, sizeof(tmp)), 0); /* ORD 1 is taken */
	iw_hdr_init(&f.hdr, IW_OP_READ_RESP);
	n = iw_fpdu_encode(&f, false, out, sizeof(out));
	REQUIRE(n > 0);
	CHECK_EQ(iw_qp_rx_bytes(w->qp[SIM_A], out, (size_t)n, &used_bytes, 0), 0);
	CHECK_EQ(cq_count(&w->s.node[SIM_A]), 0);
	CHECK_EQ(iw_qp_set_rtr(w->qp[SIM_A], NULL, NULL, false), -EINVAL); /* too late */
	iwsim_run(w, UINT64_MAX);
	IWSIM_EXPECT_WC(w, SIM_A, 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 3000);
	CHECK_MEM(amr->host, bmr->host, 3000);
	CHECK_EQ(iw_qp_state(w->qp[SIM_B]), IBV_QPS_RTS);
	iwsim_fini(w);
	free(w);
}

/* iw_qp_nudge: a zero-length RDMA Write (STag 1, TO 0, L) when nothing else goes; refused
 * while a message is due or outside RTS; the receiver places and completes nothing. */
static void nudge(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr;
	struct iw_fpdu f;
	uint8_t buf[256];
	size_t n, used = 0;

	REQUIRE(w);
	iwsim_init(w, seed + 800, &cfg);
	w->direct = false; /* a message that waits in the queue is what is checked */
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 4096, ACC_ALL);
	CHECK_EQ(iw_qp_nudge(w->qp[SIM_A]), 0);
	n = iwsim_drain_tx(w->qp[SIM_A], buf, sizeof(buf));
	REQUIRE(n > 0);
	REQUIRE(iw_fpdu_decode(buf, n, false, 0, &f) == (int)n);
	CHECK_EQ(f.hdr.opcode, IW_OP_WRITE);
	CHECK(f.hdr.tagged);
	CHECK(f.hdr.last);
	CHECK_EQ(f.hdr.stag, 1);
	CHECK_EQ(f.hdr.to, 0);
	CHECK_EQ(f.payload_len, 0);
	CHECK_EQ(iw_qp_counters(w->qp[SIM_A])[IW_CNT_tx_nudges], 1);
	CHECK_EQ(iw_qp_counters(w->qp[SIM_A])[IW_CNT_tx_fpdus], 1);
	/* B takes it: nothing placed, no completion, still RTS. */
	CHECK_EQ(iw_qp_rx_bytes(w->qp[SIM_B], buf, n, &used, 0), 0);
	CHECK_EQ(used, n);
	CHECK_EQ(iw_qp_counters(w->qp[SIM_B])[IW_CNT_rx_zero_writes], 1);
	CHECK_EQ(iw_qp_counters(w->qp[SIM_B])[IW_CNT_rx_writes], 0);
	CHECK_EQ(cq_count(&w->s.node[SIM_B]), 0);
	CHECK_EQ(iw_qp_state(w->qp[SIM_B]), IBV_QPS_RTS);
	/* A message due: its bytes do the job, no nudge is queued. */
	REQUIRE(iwsim_post_send(w, SIM_A, 1, IBV_WR_RDMA_WRITE, amr, 0, 100, 0, 0, 0, 0) == 0);
	CHECK_EQ(iw_qp_nudge(w->qp[SIM_A]), -EBUSY);
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_ERR, 0);
	CHECK_EQ(iw_qp_nudge(w->qp[SIM_A]), -EINVAL);
	CHECK_EQ(iw_qp_counters(w->qp[SIM_A])[IW_CNT_tx_nudges], 1);
	iwsim_fini(w);
	free(w);
}

/* Appends the bytes of iov[0..k) to out[0..cap) after its first `total`; returns the new
 * total. */
static size_t gather(uint8_t *out, size_t cap, size_t total, const struct iovec *iov, int k)
{
	for (int i = 0; i < k; i++) {
		REQUIRE(total + iov[i].iov_len <= cap);
		memcpy(out + total, iov[i].iov_base, iov[i].iov_len);
		total += iov[i].iov_len;
	}
	return total;
}

/* Framing runs ahead of TCP (IW_TX_BATCH): one tx_want hands out the FPDUs of several
 * messages, and a WR completes when TCP has taken its last byte, not when it was framed; a
 * partial write resumes inside the FPDU where it stopped. */
static void tx_ahead(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct sim_mr *amr, *bmr;
	struct iovec iov[IW_TX_BATCH_IOV];
	static uint8_t out[16384];
	size_t total = 0, first, used = 0, pos = 0;
	uint32_t room = iw_mulpdu(1448) - IW_DDP_TAGGED_HDR_LEN;
	struct iw_qp *qp;
	int k;

	REQUIRE(w);
	iwsim_init(w, seed + 800, NULL);
	w->direct = false; /* framing ahead of TCP is what is checked */
	qp = w->qp[SIM_A];
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 8192, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 8192, ACC_ALL);
	sim_fill(amr->host, 8192, 5);
	for (int i = 0; i < 3; i++)
		REQUIRE(iwsim_post_send(w, SIM_A, (uint64_t)i, IBV_WR_RDMA_WRITE, amr,
					(uint64_t)i * 100, 100, sim_va(bmr, (uint64_t)i * 100),
					bmr->key, IBV_SEND_SIGNALED, 0) == 0);
	REQUIRE(iwsim_post_send(w, SIM_A, 3, IBV_WR_RDMA_WRITE, amr, 1000, 5000, sim_va(bmr, 1000),
				bmr->key, IBV_SEND_SIGNALED, 0) == 0);
	k = iw_qp_tx_want(qp, 0, iov, IW_TX_BATCH_IOV);
	REQUIRE(k > 0);
	total = gather(out, sizeof(out), total, iov, k);
	/* Every message in one batch: three one-FPDU Writes, then the 5000-byte one. */
	first = iw_fpdu_len((uint32_t)(out[0] << 8 | out[1]));
	CHECK_EQ(total, 3 * first + iw_fpdu_len(IW_DDP_TAGGED_HDR_LEN + 5000 % room) +
			    (5000 / room) * iw_fpdu_len(IW_DDP_TAGGED_HDR_LEN + room));
	CHECK_EQ(cq_count(&w->s.node[SIM_A]), 0); /* framed is not sent */
	REQUIRE(iw_qp_tx_done(qp, first + 3) == 0);
	IWSIM_EXPECT_WC(w, SIM_A, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 100);
	CHECK_EQ(cq_count(&w->s.node[SIM_A]), 0);
	/* The next want starts 3 bytes into the second FPDU and offers the rest. */
	k = iw_qp_tx_want(qp, 0, iov, IW_TX_BATCH_IOV);
	REQUIRE(k > 0);
	pos = first + 3;
	for (int i = 0; i < k; i++) {
		CHECK_MEM(iov[i].iov_base, out + pos, iov[i].iov_len);
		pos += iov[i].iov_len;
	}
	CHECK_EQ(pos, total);
	REQUIRE(iw_qp_tx_done(qp, total - first - 3) == 0);
	for (uint64_t i = 1; i < 4; i++)
		IWSIM_EXPECT_WC(w, SIM_A, i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, i < 3 ? 100 : 5000);
	CHECK_EQ(iw_qp_tx_want(qp, 0, iov, IW_TX_BATCH_IOV), 0);
	CHECK_EQ(cnt(w, SIM_A)[IW_CNT_tx_bytes], total);
	/* The peer places all of it. */
	CHECK_EQ(iw_qp_rx_bytes(w->qp[SIM_B], out, total, &used, 0), 0);
	CHECK_EQ(used, total);
	CHECK_MEM(bmr->host, amr->host, 300);
	CHECK_MEM(bmr->host + 1000, amr->host + 1000, 5000);
	iwsim_fini(w);
	free(w);
}

/* The direct way (iw_qp_post_one) frames exactly the bytes the send queue would: for every
 * op, length, flag and CRC setting the FPDU equals the one iw_qp_tx_want hands out for the
 * same WR on a twin pair, and MSNs run on; the completions and counters are the same. What
 * does not qualify is left to the queue, untouched. */
static void direct_bytes(void)
{
	static const uint32_t lens[] = {0, 1, 3, 4, 5, 100, 255, 256, 511, IW_TX_ONE_PAY};
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_INV,
						 IBV_WR_RDMA_WRITE};
	static const int wc_op[] = {IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE};
	uint64_t taken = 0;

	for (int crc = 0; crc < 2; crc++) {
		struct iwsim *q = calloc(1, sizeof(*q)), *d = calloc(1, sizeof(*d));
		struct iwsim_cfg cfg = {0};
		struct sim_mr *qm, *dm;
		const struct ibv_send_wr *bad;
		uint64_t id = 0;

		REQUIRE(q && d);
		cfg.attr.crc = crc;
		iwsim_init(q, seed + 900, &cfg);
		iwsim_init(d, seed + 900, &cfg);
		qm = sim_mr_reg(&q->s.node[SIM_A], 1, 4096, ACC_ALL);
		dm = sim_mr_reg(&d->s.node[SIM_A], 1, 4096, ACC_ALL);
		sim_fill(qm->host, 4096, 7);
		sim_fill(dm->host, 4096, 7);
		for (unsigned o = 0; o < 3; o++) {
			for (unsigned l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
				for (unsigned fl = 0; fl < 8; fl++, id++) {
					bool inl = fl & 1, se = fl & 2, sig = !(fl & 4);
					uint32_t len = lens[l];
					struct ibv_sge sq = {inl ? (uintptr_t)(qm->host + 10)
								 : sim_va(qm, 10),
							     len, qm->key};
					struct ibv_sge sd = {inl ? (uintptr_t)(dm->host + 10)
								 : sim_va(dm, 10),
							     len, dm->key};
					struct ibv_send_wr wq = {0}, wd;
					static uint8_t a[2048];
					size_t na, nb = 0;
					const uint8_t *f;

					if (inl && len > ENG_MAX_INLINE)
						continue;
					wq.wr_id = id;
					wq.opcode = ops[o];
					wq.send_flags = (inl ? IBV_SEND_INLINE : 0u) |
							(se ? IBV_SEND_SOLICITED : 0u) |
							(sig ? IBV_SEND_SIGNALED : 0u);
					wq.wr.rdma.remote_addr = 0x123456789abcull + id;
					wq.wr.rdma.rkey = 0x55 + (uint32_t)id;
					wq.invalidate_rkey = 0x77 + (uint32_t)id;
					wd = wq;
					wq.sg_list = &sq;
					wd.sg_list = &sd;
					wq.num_sge = wd.num_sge = len ? 1 : 0;
					REQUIRE(iw_qp_post_send(q->qp[SIM_A], &wq, &bad, 0) == 0);
					na = iwsim_drain_tx(q->qp[SIM_A], a, sizeof(a));
					f = iw_qp_post_one(d->qp[SIM_A], &wd, &nb);
					REQUIRE(f != NULL);
					taken++;
					CHECK_EQ(nb, na);
					CHECK_MEM(f, a, na);
					iw_qp_one_sent(d->qp[SIM_A], &wd, nb);
					if (sig) {
						IWSIM_EXPECT_WC(q, SIM_A, id, IBV_WC_SUCCESS,
								wc_op[o], len);
						IWSIM_EXPECT_WC(d, SIM_A, id, IBV_WC_SUCCESS,
								wc_op[o], len);
					}
					CHECK_EQ(cq_count(&d->s.node[SIM_A]), 0);
				}
			}
		}
		CHECK_EQ(cnt(d, SIM_A)[IW_CNT_tx_fpdus], cnt(q, SIM_A)[IW_CNT_tx_fpdus]);
		CHECK_EQ(cnt(d, SIM_A)[IW_CNT_tx_bytes], cnt(q, SIM_A)[IW_CNT_tx_bytes]);
		CHECK_EQ(cnt(d, SIM_A)[IW_CNT_tx_payload_bytes],
			 cnt(q, SIM_A)[IW_CNT_tx_payload_bytes]);
		iwsim_fini(q);
		iwsim_fini(d);
		free(q);
		free(d);
	}
	CHECK(taken > 400);
}

/* What the direct way leaves to the send queue, untouched (the queue then sends it, or fails
 * it with its error): a message longer than IW_TX_ONE_PAY or than one FPDU, a READ, a chain,
 * a WR behind one in the queue, a bad key, a QP not in RTS. A part TCP does not take is sent
 * by the queue, and the message completes once it has gone. */
static void direct_declines(void)
{
	struct iwsim *w = calloc(1, sizeof(*w));
	struct iwsim_cfg cfg = {0};
	struct sim_mr *amr, *bmr;
	struct ibv_sge sg = {0};
	struct ibv_send_wr wr = {0}, wr2 = {0};
	size_t n = 0;
	static uint8_t out[4096];
	size_t got, used = 0;
	const uint8_t *f;

	REQUIRE(w);
	cfg.attr.mulpdu = 300; /* one FPDU holds 300 - 14 bytes of a WRITE */
	iwsim_init(w, seed + 950, &cfg);
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 4096, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 4096, ACC_ALL);
	sim_fill(amr->host, 4096, 11);
	sg = (struct ibv_sge){sim_va(amr, 0), 286, amr->key};
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = sim_va(bmr, 0);
	wr.wr.rdma.rkey = bmr->key;
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) != NULL); /* exactly one FPDU */
	iw_qp_one_sent(w->qp[SIM_A], &wr, 0);		      /* TCP took nothing */
	sg.length = 287;				      /* two FPDUs */
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL); /* one queued before it */
	got = iwsim_drain_tx(w->qp[SIM_A], out, sizeof(out));
	CHECK_EQ(got, n);
	IWSIM_EXPECT_WC(w, SIM_A, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 286);
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL); /* two FPDUs */
	sg.length = 200;
	wr.opcode = IBV_WR_RDMA_READ;
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL);
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.next = &wr2;
	wr2 = wr;
	wr2.next = NULL;
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL); /* a chain */
	wr.next = NULL;
	sg.lkey = amr->key + 1000;
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL); /* a bad key */
	sg.lkey = amr->key;
	/* A part TCP did not take: the queue sends the rest, then the message completes. */
	f = iw_qp_post_one(w->qp[SIM_A], &wr, &n);
	REQUIRE(f && n > 10);
	memcpy(out + got, f, 7);
	iw_qp_one_sent(w->qp[SIM_A], &wr, 7);
	CHECK_EQ(cq_count(&w->s.node[SIM_A]), 0);
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL); /* its rest waits */
	CHECK_EQ(iwsim_drain_tx(w->qp[SIM_A], out + got + 7, sizeof(out) - got - 7), n - 7);
	IWSIM_EXPECT_WC(w, SIM_A, 0, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 200);
	got += n;
	/* The peer places both Writes. */
	CHECK_EQ(iw_qp_rx_bytes(w->qp[SIM_B], out, got, &used, 0), 0);
	CHECK_EQ(used, got);
	CHECK_MEM(bmr->host, amr->host, 286);
	CHECK_EQ(iw_qp_state(w->qp[SIM_B]), IBV_QPS_RTS);
	iw_qp_set_state(w->qp[SIM_A], IBV_QPS_SQD, 0);
	CHECK(iw_qp_post_one(w->qp[SIM_A], &wr, &n) == NULL); /* not in RTS */
	iwsim_fini(w);
	free(w);
}

/* The transmit rings start small and grow while framing runs ahead (IW_TX_F_FIRST,
 * IW_TX_PAY_FIRST): twenty two-SGE Writes posted behind a half-sent one are all offered by
 * one tx_want (the first-size rings would offer 4 FPDUs), and the bytes after the growth
 * continue the half-sent FPDU exactly where it stopped. */
static void tx_rings_grow(void)
{
	enum { N = 20, LA = 30, LB = 41 };
	struct iwsim *w = calloc(1, sizeof(*w));
	struct sim_mr *amr, *bmr;
	struct iovec iov[4 * N + 8];
	static uint8_t out[16384];
	struct ibv_send_wr wr = {0};
	const struct ibv_send_wr *bad;
	struct ibv_sge sg[2];
	size_t total = 0, used = 0;
	struct iw_qp *qp;
	int k;

	REQUIRE(w);
	iwsim_init(w, seed + 850, NULL);
	w->direct = false; /* the rings' layout is what is checked */
	qp = w->qp[SIM_A];
	amr = sim_mr_reg(&w->s.node[SIM_A], 1, 8192, ACC_ALL);
	bmr = sim_mr_reg(&w->s.node[SIM_B], 1, 8192, ACC_ALL);
	sim_fill(amr->host, 8192, 21);
	REQUIRE(iwsim_post_send(w, SIM_A, 0, IBV_WR_RDMA_WRITE, amr, 0, 100, sim_va(bmr, 0),
				bmr->key, IBV_SEND_SIGNALED, 0) == 0);
	k = iw_qp_tx_want(qp, 0, iov, (int)(sizeof(iov) / sizeof(iov[0])));
	REQUIRE(k == 3); /* header, payload, trailer */
	REQUIRE(iov[0].iov_len > 3);
	memcpy(out, iov[0].iov_base, 3);
	total = 3;
	REQUIRE(iw_qp_tx_done(qp, 3) == 0); /* the head FPDU is half-sent */
	for (int i = 1; i <= N; i++) {
		/* Two pieces from places that differ per Write; destinations side by side. */
		sg[0] = (struct ibv_sge){sim_va(amr, (uint64_t)(i * 97) % 4000), LA, amr->key};
		sg[1] =
		    (struct ibv_sge){sim_va(amr, 4096 + (uint64_t)(i * 53) % 3000), LB, amr->key};
		wr.wr_id = (uint64_t)i;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.sg_list = sg;
		wr.num_sge = 2;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = sim_va(bmr, 200 + (uint64_t)i * (LA + LB));
		wr.wr.rdma.rkey = bmr->key;
		REQUIRE(iw_qp_post_send(qp, &wr, &bad, 0) == 0);
	}
	k = iw_qp_tx_want(qp, 0, iov, (int)(sizeof(iov) / sizeof(iov[0])));
	/* The rest of the first FPDU (3 pieces), then 4 per Write: all of them at once. */
	CHECK_EQ(k, 3 + 4 * N);
	total = gather(out, sizeof(out), total, iov, k);
	REQUIRE(iw_qp_tx_done(qp, total - 3) == 0);
	for (uint64_t i = 0; i <= N; i++)
		IWSIM_EXPECT_WC(w, SIM_A, i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, i ? LA + LB : 100);
	CHECK_EQ(iw_qp_tx_want(qp, 0, iov, 8), 0);
	CHECK_EQ(cnt(w, SIM_A)[IW_CNT_tx_fpdus], N + 1);
	/* The peer places every byte where it belongs. */
	CHECK_EQ(iw_qp_rx_bytes(w->qp[SIM_B], out, total, &used, 0), 0);
	CHECK_EQ(used, total);
	CHECK_MEM(bmr->host, amr->host, 100);
	for (int i = 1; i <= N; i++) {
		const uint8_t *dst = bmr->host + 200 + (size_t)i * (LA + LB);

		CHECK_MEM(dst, amr->host + (i * 97) % 4000, LA);
		CHECK_MEM(dst + LA, amr->host + 4096 + (i * 53) % 3000, LB);
	}
	iwsim_fini(w);
	free(w);
}

int main(void)
{
	clock_t t0 = clock();

	seed = check_seed(20241202);
	/* Every test twice: posts through the send queue, then through the direct way
	 * (iw_qp_post_one) wherever a WR qualifies. */
	for (int d = 0; d < 2; d++) {
		iwsim_direct = d;
		fprintf(stderr, "-- posts: %s\n", d ? "direct way first" : "send queue");
		posting();
		sgl();
		ord_fence();
		irq_growth();
		orq_small_ring();
		tx_rings_grow();
		srq();
		rtr();
		nudge();
		batch();
		tx_ahead();
		matrix();
		big();
	}
	direct_bytes();
	direct_declines();
	fprintf(stderr, "%.2f s cpu\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
	return check_exit();
}
