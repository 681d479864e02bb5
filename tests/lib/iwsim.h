/* Simulation harness for the iWARP engine (src/engine/iw_eng.h): two iw_qp engines, A (0)
 * and B (1), joined by an in-memory TCP connection (one bounded byte pipe per direction)
 * that hands bytes over in a chosen segmentation: whole (as much as fits), one byte at a
 * time, or seeded random splits, on both the transmit side (partial writes: TCP takes fewer
 * bytes than offered) and the receive side (recv() returns fewer bytes than asked for).
 *
 * Memory, CQs and async events come from the RoCE harness (sim.h: struct sim nodes with
 * their fake MR table, whose IOVAs are not host addresses). Receives go through
 * iw_qp_rx_want / iw_qp_rx_done, so every received byte is written exactly where the
 * engine asked; the harness records whether that was inside a registered region (zero-copy
 * placement) and where transmitted bytes came from.
 *
 * Single-threaded; tests only (allocates). */
#ifndef SOFTRDMA_TEST_IWSIM_H
#define SOFTRDMA_TEST_IWSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/iw_eng.h"
#include "sim.h"

enum iwsim_seg { IWSIM_WHOLE, IWSIM_ONE, IWSIM_RANDOM };

struct iwsim_pipe {
	uint8_t *buf;
	size_t cap;	 /* bytes (power of two) */
	uint64_t head;	 /* next byte to read (free-running) */
	uint64_t tail;	 /* next byte to write */
	uint64_t total;	 /* bytes ever written */
	bool cut;	 /* the connection was cut: nothing more is delivered */
	uint8_t *record; /* if set: every byte written is also appended here */
	size_t record_len, record_cap;
};

struct iwsim_cfg {
	struct iw_qp_attr attr; /* both QPs; zero fields take: ird 16, ord 16, mulpdu
				   iw_mulpdu(1448), access remote write | read */
	uint32_t max_send_wr;	/* 256 */
	uint32_t max_recv_wr;	/* 256 */
	uint32_t max_inline;	/* ENG_MAX_INLINE */
	bool sq_sig_all;
	struct eng_rq *srq_b;  /* B's QP uses this SRQ */
	enum iwsim_seg tx_seg; /* partial writes */
	enum iwsim_seg rx_seg; /* partial reads */
	int max_iov;	       /* iovecs per tx_want: IW_TX_MAX_IOV */
	size_t pipe_cap;       /* 256 KiB */
};

struct iwsim {
	struct sim s; /* nodes: MRs, CQ, events; s.rng is the PRNG */
	struct iw_qp *qp[2];
	struct iwsim_pipe pipe[2]; /* pipe[d]: bytes sent by node d */
	enum iwsim_seg tx_seg, rx_seg;
	int max_iov;
	bool tx_hold[2]; /* node d does not transmit */
	bool rx_hold[2]; /* node d does not receive */
	int rx_err[2];	 /* the last error iw_qp_rx_done returned to node d */
	/* Bytes node d read into registered memory / elsewhere (scratch), and sent from
	 * registered memory. */
	uint64_t rx_in_mr[2], rx_elsewhere[2], tx_from_mr[2];
	uint64_t wakes[2];
	uint64_t rx_calls[2], tx_calls[2]; /* iw_qp_rx_done / iw_qp_tx_done calls by node */
	/* iwsim_post_send tries the direct way first (iw_qp_post_one, as core/iw_progress.c's
	 * iwp_post_send does), writing its FPDU into the pipe at once in the tx_seg
	 * segmentation; direct_taken counts the WRs it took. Set by iwsim_init from
	 * iwsim_direct. */
	bool direct;
	uint64_t direct_taken[2];
};

/* iwsim_init's choice of w->direct: the tests run once each way. */
extern bool iwsim_direct;

/* Starts both QPs in RTS, connected. */
void iwsim_init(struct iwsim *w, uint64_t seed, const struct iwsim_cfg *cfg);
void iwsim_fini(struct iwsim *w);

/* One round: each node transmits what it can into its pipe, then receives what is in the
 * other pipe. Returns true if any byte moved. */
bool iwsim_step(struct iwsim *w);
/* Steps until nothing moves (or max_rounds); returns the rounds run. */
uint64_t iwsim_run(struct iwsim *w, uint64_t max_rounds);

/* Runs node d's transmit side into buf until it has nothing more (whole writes); returns the
 * bytes produced (the rest is dropped if cap is too small). */
size_t iwsim_drain_tx(struct iw_qp *qp, uint8_t *buf, size_t cap);

/* Posts helpers: one SGE at mr + off (no SGE when len is 0 and mr is NULL). */
int iwsim_post_send(struct iwsim *w, int node, uint64_t wr_id, enum ibv_wr_opcode op,
		    const struct sim_mr *mr, uint64_t off, uint32_t len, uint64_t remote_va,
		    uint32_t rkey, unsigned flags, uint32_t inv_rkey);
int iwsim_post_recv(struct iwsim *w, int node, uint64_t wr_id, const struct sim_mr *mr,
		    uint64_t off, uint32_t len);

/* Polls exactly one completion of node `node` and checks it (CHECKs at the caller's line).
 * byte_len < 0: not checked. Returns false if the CQ was empty. */
#define IWSIM_EXPECT_WC(w, nd, wrid, st, opc, blen)                                                \
	sim_expect_wc_at(__FILE__, __LINE__, &(w)->s.node[(nd)], (wrid), (st), (opc), (blen))

#endif
