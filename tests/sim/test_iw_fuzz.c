/* Hostile streams into an iWARP QP in RTS (src/engine/iw_eng.h): random bytes, well-formed
 * FPDUs with random header fields, and well-formed FPDUs with bits flipped, cut at random
 * places, with CRC on and off. Nothing may crash or touch memory outside the registered
 * regions (run under ASan), the QP must end either unchanged (RTS, every input accepted) or
 * in ERR with a Terminate as the last thing it sends (unless the peer's Terminate put it
 * there), every output must parse, and every receive must complete exactly once. */
#include "check.h"
#include "iwsim.h"

#include <stdlib.h>
#include <string.h>

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define ITER	30000

static struct iwsim W;

static uint32_t rnd(uint32_t n)
{
	return n ? (uint32_t)(sim_rand(&W.s) % n) : 0;
}

/* A plausible FPDU: header fields near the valid ones, mostly. */
static size_t gen_fpdu(uint8_t *out, size_t cap, bool crc, const struct sim_mr *mr, uint32_t msn[3])
{
	static uint8_t pay[4096];
	struct iw_fpdu f = {0};
	uint8_t op = (uint8_t)rnd(IW_OP__COUNT);
	uint32_t len = rnd(5) == 0 ? rnd(3000) : rnd(64);
	int n;

	iw_hdr_init(&f.hdr, op);
	f.hdr.last = rnd(4) != 0 || op == IW_OP_READ_REQ || op == IW_OP_TERMINATE;
	f.hdr.stag = rnd(4) ? mr->key : (uint32_t)sim_rand(&W.s);
	f.hdr.to = rnd(4) ? sim_va(mr, rnd((uint32_t)mr->len)) : sim_rand(&W.s);
	f.hdr.qn = rnd(8) ? f.hdr.qn : rnd(4);
	f.hdr.msn = rnd(4) ? msn[f.hdr.qn % 3] : (uint32_t)sim_rand(&W.s);
	f.hdr.mo = rnd(4) ? 0 : rnd(8192);
	f.hdr.rsvdulp = rnd(2) ? mr->key : 0;
	f.hdr.rreq.sink_stag = (uint32_t)sim_rand(&W.s);
	f.hdr.rreq.size = rnd(5000);
	f.hdr.rreq.src_stag = rnd(4) ? mr->key : (uint32_t)sim_rand(&W.s);
	f.hdr.rreq.src_to = sim_va(mr, rnd((uint32_t)mr->len));
	f.hdr.term.layer = (uint8_t)rnd(3);
	f.hdr.term.etype = (uint8_t)rnd(3);
	if (!iw_opinfo(op)->payload)
		len = 0;
	for (uint32_t i = 0; i < len; i++)
		pay[i] = (uint8_t)sim_rand(&W.s);
	f.payload = pay;
	f.payload_len = len;
	n = iw_fpdu_encode(&f, crc, out, cap);
	if (n <= 0)
		return 0;
	if (f.hdr.qn < 3 && f.hdr.msn == msn[f.hdr.qn] && f.hdr.last)
		msn[f.hdr.qn]++;
	return (size_t)n;
}

/* Drains the QP's output: every FPDU must parse. Returns the last opcode sent, or -1. */
static int check_output(struct iw_qp *qp, bool crc)
{
	static uint8_t buf[1 << 20];
	size_t len = iwsim_drain_tx(qp, buf, sizeof(buf)), pos = 0;
	struct iw_fpdu f = {0};
	int last_op = -1;

	while (pos < len) {
		int n = iw_fpdu_decode(buf + pos, len - pos, crc, 0, &f);

		CHECK(n > 0);
		if (n <= 0)
			return -1;
		pos += (size_t)n;
		last_op = f.hdr.opcode;
	}
	return last_op;
}

int main(void)
{
	static uint8_t stream[16384];
	uint64_t seed = check_seed(99);
	struct iwsim_cfg cfg = {0};
	struct sim_mr *mr;
	struct iw_qp *qp;
	uint64_t recvs = 0, recv_wcs = 0, errs = 0, accepted = 0;

	iwsim_init(&W, seed, &cfg);
	mr = sim_mr_reg(&W.s.node[SIM_B], 1, 8192, ACC_ALL);
	qp = W.qp[SIM_B];
	for (int it = 0; it < ITER; it++) {
		struct iw_qp_attr a;
		uint32_t msn[3] = {1, 1, 1};
		size_t len = 0, pos = 0;
		int kind = (int)rnd(3), err = 0, last_op = -1, out;
		bool crc = rnd(2);
		struct ibv_wc wc[64];
		int n;

		/* A fresh stream on the same QP. */
		iw_qp_set_state(qp, IBV_QPS_RESET, 0);
		iw_qp_get_attr(qp, &a);
		a.crc = crc;
		a.ird = 1 + rnd(4);
		a.max_rx_ulpdu = rnd(4) ? 0 : (uint16_t)(100 + rnd(3000));
		REQUIRE(iw_qp_set_attr(qp, &a) == 0);
		iw_qp_set_state(qp, IBV_QPS_INIT, 0);
		for (int r = (int)rnd(4); r > 0; r--, recvs++)
			REQUIRE(iwsim_post_recv(&W, SIM_B, recvs, mr, rnd(4096), rnd(4096)) == 0);
		iw_qp_set_state(qp, IBV_QPS_RTR, 0);
		iw_qp_set_state(qp, IBV_QPS_RTS, 0);

		while (len < sizeof(stream) - 5000 && rnd(6)) {
			size_t k;

			if (kind == 0) { /* garbage */
				k = rnd(200);
				for (size_t i = 0; i < k; i++)
					stream[len + i] = (uint8_t)sim_rand(&W.s);
			} else {
				k = gen_fpdu(stream + len, sizeof(stream) - len, crc, mr, msn);
				if (kind == 2 && k && rnd(2))
					stream[len + rnd((uint32_t)k)] ^= (uint8_t)(1u << rnd(8));
			}
			len += k;
		}
		while (pos < len && !err) {
			size_t piece = 1 + rnd(rnd(2) ? 8 : 600), used = 0;

			if (piece > len - pos)
				piece = len - pos;
			err = iw_qp_rx_bytes(qp, stream + pos, piece, &used, 0);
			CHECK(used <= piece);
			pos += used;
			if (err)
				break;
			/* Let responses go out now and then (Read Requests). */
			if (rnd(4) == 0)
				last_op = check_output(qp, crc);
		}
		out = check_output(qp, crc);
		if (out >= 0)
			last_op = out;
		if (err == 0 && iw_qp_state(qp) == IBV_QPS_RTS) {
			accepted++;
		} else {
			struct iw_term t;

			errs++;
			/* -EPIPE: our transmit side had already terminated the stream. */
			CHECK(err == 0 || err == -EPROTO || err == -ECONNRESET || err == -EPIPE);
			CHECK_EQ(iw_qp_state(qp), IBV_QPS_ERR);
			CHECK(iw_qp_tx_finished(qp));
			/* We terminated (a receive check, or a Read Response whose source an
			 * earlier Send with Invalidate took away): our last FPDU says why. */
			if (err != -ECONNRESET) {
				CHECK_EQ(iw_qp_term_sent(qp, &t), 0);
				CHECK_EQ(last_op, IW_OP_TERMINATE);
			}
		}
		/* Receives complete exactly once: in ERR all of them (flush). */
		iw_qp_set_state(qp, IBV_QPS_ERR, 0);
		while ((n = sim_poll(&W.s.node[SIM_B], wc, 64)) > 0)
			for (int i = 0; i < n; i++)
				if (wc[i].opcode == IBV_WC_RECV || wc[i].status != IBV_WC_SUCCESS)
					recv_wcs += wc[i].opcode == IBV_WC_RECV;
		CHECK(!W.s.node[SIM_B].cq.overflow);
		W.s.node[SIM_B].nevents = 0;
		mr->valid = true; /* a Send with Invalidate may have hit it */
	}
	CHECK_EQ(recv_wcs, recvs);
	fprintf(stderr, "%d streams: %" PRIu64 " accepted, %" PRIu64 " terminated\n", ITER,
		accepted, errs);
	CHECK(errs > 0 && accepted > 0);
	iwsim_fini(&W);
	return check_exit();
}
