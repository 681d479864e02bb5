/* Simulation harness for the transport engine: two nodes (A = 0, B = 1), each with one CQ,
 * a few QPs and a fake memory environment (MR table with keys, PD, access flags and bounds),
 * joined by a link that can drop, duplicate, reorder and delay packets, on a virtual clock.
 *
 * Faults are chosen per packet, either by explicit rules ("drop the 3rd packet B->A") or by
 * a seeded PRNG (reproducible: the seed is printed by the test with check_seed). Packets
 * crossing the link are deep copies (struct and payload), or, with `wire` set, serialised
 * with roce_build and parsed back with roce_parse, so engine and codec are tested together.
 *
 * Single-threaded; everything belongs to the struct sim. */
#ifndef SOFTRDMA_TEST_SIM_H
#define SOFTRDMA_TEST_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/eng.h"
#include "obj/obj.h"

#define SIM_MAX_MR     32
#define SIM_MAX_MW     16
#define SIM_MAX_QP     4
#define SIM_MAX_EVENTS 64
#define SIM_MAX_RULES  64
#define SIM_A	       0
#define SIM_B	       1
#define SIM_AB	       0 /* link direction A -> B */
#define SIM_BA	       1

struct sim;

/* A registered region: [iova, iova + len) maps to host[0 .. len). lkey == rkey == key. The
 * iova is deliberately not the host address, so an engine that dereferences a VA without
 * resolving it crashes. */
struct sim_mr {
	bool valid;
	uint32_t key;
	uint32_t pd;
	uint64_t iova;
	uint8_t *host;
	uint64_t len;
	unsigned access; /* IBV_ACCESS_* */
	/* The region as obj/'s memory windows see it (copied from the fields above when a
	 * window is bound to it): windows are obj/mw.c's own, not a fake. */
	struct obj_mr omr;
};

struct sim_node {
	struct sim *sim;
	int id;
	struct eng_env env;
	struct eng_cq cq; /* send and receive completions of every QP of the node */
	struct eng_qp *qp[SIM_MAX_QP];
	int nqp;
	struct sim_mr mr[SIM_MAX_MR];
	int nmr;
	struct obj_mw_table mws; /* memory windows (sim_mw_alloc) */
	struct obj_mw mw[SIM_MAX_MW];
	int nmw;
	enum ibv_event_type events[SIM_MAX_EVENTS];
	int nevents;
	uint64_t resolve_calls;
};

enum sim_action { SIM_PASS, SIM_DROP, SIM_DUP, SIM_DELAY };

struct sim_rule {
	int dir;
	uint64_t index; /* 0-based count of packets that entered this direction */
	enum sim_action action;
	uint64_t delay_ns; /* SIM_DELAY: extra delay; SIM_DUP: extra delay of the copy */
};

/* Random faults for one direction, in parts per million of packets. */
struct sim_link_cfg {
	uint64_t latency_ns; /* one-way base latency */
	uint32_t drop_ppm;
	uint32_t dup_ppm;
	uint32_t reorder_ppm; /* packet delayed by up to reorder_ns extra */
	uint64_t reorder_ns;
	uint64_t jitter_ns; /* every packet: + uniform [0, jitter_ns) */
};

struct sim_inflight {
	uint64_t at;
	uint64_t seq;
	int dir;
	struct roce_pkt pkt;
	uint8_t *bytes; /* payload copy, or the wire image when sim.wire */
	size_t nbytes;
};

struct sim_stats {
	uint64_t entered[2];
	uint64_t dropped[2];
	uint64_t duplicated[2];
	uint64_t delayed[2];
	uint64_t delivered[2];
	uint64_t no_qp[2];
	uint64_t ref_out; /* packets whose payload the engine left where it lies (ref_min) */
};

struct sim {
	uint64_t now; /* virtual ns */
	struct sim_node node[2];
	struct sim_link_cfg link[2];
	struct sim_rule rules[SIM_MAX_RULES];
	int nrules;
	/* Optional per-packet hook, called after the rules with the action they chose; returns
	 * the action to take (may set *delay_ns). Used to count or inspect packets. */
	enum sim_action (*tap)(struct sim *s, int dir, uint64_t index, const struct roce_pkt *p,
			       enum sim_action chosen, uint64_t *delay_ns, void *arg);
	void *tap_arg;
	bool wire;  /* serialise through roce_build / roce_parse */
	bool trace; /* print every packet (also with $SIM_TRACE set) */
	/* > 0: packets come out through eng_qp_output_ref with this ref_min (payloads may point
	 * into registered memory or inline data; the link copies them at once) */
	uint32_t ref_min;
	uint64_t rng;
	struct sim_stats stats;
	struct sim_inflight *heap;
	size_t nheap, capheap;
	uint64_t seq;
	uint8_t buf[4096 + 128];  /* engine output */
	uint8_t wbuf[4096 + 128]; /* wire image */
};

/* Starts an empty simulation (latency 1 us each way, no faults) with PRNG `seed`. */
void sim_init(struct sim *s, uint64_t seed);
/* Destroys QPs, CQs, MRs and packets in flight. */
void sim_fini(struct sim *s);

uint64_t sim_rand(struct sim *s);

/* Registers `len` bytes (zeroed, 64-byte aligned host memory) in `pd` with `access`.
 * Returns the MR (owned by the node). */
struct sim_mr *sim_mr_reg(struct sim_node *n, uint32_t pd, uint64_t len, unsigned access);
/* Allocates an unbound memory window of `type` in `pd` (obj/mw.c). Returns it (owned by the
 * node); its key is mw->key. */
struct obj_mw *sim_mw_alloc(struct sim_node *n, uint32_t pd, enum ibv_mw_type type);
/* Posts a BIND_MW of `mw` to [mr + off, + len) with `access` and the next key byte
 * (ibv_inc_rkey); returns what eng_qp_post_send does and *new_rkey the key the window will
 * have. */
int sim_post_bind(struct sim_node *n, struct eng_qp *qp, uint64_t wr_id, const struct obj_mw *mw,
		  const struct sim_mr *mr, uint64_t off, uint64_t len, unsigned access,
		  unsigned flags, uint32_t *new_rkey);
static inline uint64_t sim_va(const struct sim_mr *mr, uint64_t off)
{
	return mr->iova + off;
}

/* Connection parameters for sim_connect; zero fields take the defaults shown. */
struct sim_qp_cfg {
	uint32_t pmtu;		    /* 1024 */
	uint32_t psn_a, psn_b;	    /* A's and B's starting send PSN: 0x100, 0x200 */
	uint8_t timeout;	    /* 10 (4.2 ms) */
	uint8_t retry_cnt;	    /* 7 */
	uint8_t rnr_retry;	    /* 7 */
	uint8_t min_rnr_timer;	    /* 1 (10 us) */
	uint8_t max_rd_atomic;	    /* 16 */
	uint8_t max_dest_rd_atomic; /* 16 */
	bool no_defaults_rd_atomic; /* take 0 for the two above literally */
	unsigned access;	    /* remote write | read | atomic */
	bool no_access;		    /* take access 0 literally */
	uint32_t max_send_wr;	    /* 512 */
	uint32_t max_recv_wr;	    /* 512 */
	uint32_t max_inline;	    /* ENG_MAX_INLINE */
	bool sq_sig_all;
	uint32_t pd;	      /* 1 */
	struct eng_rq *srq_b; /* B's QP uses this SRQ */
};

/* Creates a QP on each node, connects them and moves both to RTS. */
void sim_connect(struct sim *s, const struct sim_qp_cfg *cfg, struct eng_qp **a, struct eng_qp **b);

/* Adds a fault rule. */
void sim_rule(struct sim *s, int dir, uint64_t index, enum sim_action action, uint64_t delay_ns);

/* One round: deliver due packets, run due timers, drain every QP's output onto the link, and
 * advance the clock to the next event. Returns false when nothing is left to happen. */
bool sim_step(struct sim *s);
/* Steps until idle or until the clock passes now + max_ns. Returns true if idle. */
bool sim_run(struct sim *s, uint64_t max_ns);
/* Steps until done(arg) or idle or the time limit. Returns done(arg). */
bool sim_run_until(struct sim *s, bool (*done)(struct sim *s, void *arg), void *arg,
		   uint64_t max_ns);

/* Polls the node's CQ. */
int sim_poll(struct sim_node *n, struct ibv_wc *wc, int max);

/* Posts one send WR with a single SGE (num_sge 0 if len is 0 and mr is NULL). */
int sim_post_send(struct sim_node *n, struct eng_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		  const struct sim_mr *mr, uint64_t off, uint32_t len, uint64_t remote_va,
		  uint32_t rkey, unsigned flags);
/* Posts an atomic with an 8-byte local result buffer at mr + off. */
int sim_post_atomic(struct sim_node *n, struct eng_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op,
		    const struct sim_mr *mr, uint64_t off, uint64_t remote_va, uint32_t rkey,
		    uint64_t compare_add, uint64_t swap, unsigned flags);
int sim_post_recv(struct eng_qp *qp, uint64_t wr_id, const struct sim_mr *mr, uint64_t off,
		  uint32_t len);

/* Polls exactly one completion and checks it (CHECK, reported at the caller's line).
 * byte_len < 0: not checked. Returns false if the CQ was empty. */
#define SIM_EXPECT_WC(n, wrid, st, opc, blen)                                                      \
	sim_expect_wc_at(__FILE__, __LINE__, (n), (wrid), (st), (opc), (blen))
bool sim_expect_wc_at(const char *file, int line, struct sim_node *n, uint64_t wr_id,
		      enum ibv_wc_status status, enum ibv_wc_opcode opcode, long long byte_len);

/* Fills with a position- and seed-dependent pattern (never all zero). */
void sim_fill(void *p, size_t len, uint32_t seed);

bool sim_has_event(const struct sim_node *n, enum ibv_event_type ev);

#endif
