/* DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015), the
 * rate control of RoCE NICs, as a sans-I/O state machine on the caller's clock (ns).
 *
 * Notification point (the receiver): a packet that arrives with ECN CE asks for a CNP to its
 * sender, at most one per QP per dcqcn_np.interval_ns (dcqcn_np_mark).
 *
 * Reaction point (the sender), with the parameters RoCE NICs expose (mlx5's names in
 * brackets; the defaults are theirs, dcqcn_params_default):
 *   - a CNP sets a flag; a rate-decrease check every decrease_period_ns
 *     [rate_reduce_monitor_period] that finds it cuts the current rate Rc by Rc * alpha / 2
 *     (alpha in 1/1024ths, the cut at most min_dec_pct % [rpg_min_dec_fac]), not below
 *     min_rate [rpg_min_rate], after setting the target rate Rt to Rc (where the NIC clamps
 *     it: clamp_tgt_rate, or an increase already counted);
 *   - alpha, the congestion estimate, is updated every alpha_period_ns [dce_tcp_rtt]:
 *     alpha = alpha * g / 1024, plus (1024 - g) when a CNP came in that period [dce_tcp_g];
 *   - Rc climbs back towards Rt at every increase event: every time_reset_ns without a cut
 *     [rpg_time_reset] and every byte_reset bytes sent [rpg_byte_reset, in 64-byte units
 *     there]. Each event first raises Rt - by nothing while both event counts are below
 *     threshold [rpg_threshold] (fast recovery), by ai_rate [rpg_ai_rate] once one of them
 *     has reached it (additive increase), by hai_rate [rpg_hai_rate] once both are above it
 *     (hyper increase) - and then sets Rc to (Rc + Rt) / 2. Rt never exceeds line_rate.
 *   - pacing: packets leave at Rc (dcqcn_send_at, dcqcn_sent); at line rate there is no
 *     pacing at all, so a QP that never saw a CNP pays nothing.
 * Everything is integer arithmetic, so a test can predict every step. */
#ifndef SOFTRDMA_ENGINE_DCQCN_H
#define SOFTRDMA_ENGINE_DCQCN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dcqcn_params {
	uint64_t line_rate;	     /* bit/s: the ceiling of Rc and Rt, and the start */
	uint64_t min_rate;	     /* bit/s: the floor of a cut */
	uint64_t first_cnp_rate;     /* bit/s: Rc after the first CNP; 0: the first cuts as any */
	uint64_t ai_rate;	     /* bit/s: additive increase of Rt */
	uint64_t hai_rate;	     /* bit/s: hyper increase of Rt */
	uint64_t time_reset_ns;	     /* an increase event after this long without a cut */
	uint64_t byte_reset;	     /* an increase event every this many bytes sent */
	uint64_t alpha_period_ns;    /* alpha's update period */
	uint64_t decrease_period_ns; /* how often a CNP seen may cut */
	uint32_t threshold;	     /* F: fast recovery's increase events */
	uint32_t g;		     /* alpha keeps g / 1024 of itself per period (< 1024) */
	uint32_t initial_alpha;	     /* alpha at the first CNP, in 1/1024ths (<= 1023) */
	uint32_t min_dec_pct;	     /* a cut leaves at least this % of Rc */
	bool clamp_target;	     /* every cut sets Rt = Rc first */
	bool clamp_after_time_inc;   /* ... also once a time increase has been counted */
};

/* The defaults of ConnectX NICs (mlx5) for a line rate (bit/s). */
void dcqcn_params_default(struct dcqcn_params *p, uint64_t line_rate);
/* 0, or -EINVAL when p makes no sense (zero periods or line rate, g >= 1024, ...). */
int dcqcn_params_check(const struct dcqcn_params *p);
/* Applies "key=value,key=value" (SOFTRDMA_DCQCN's syntax) to p: the keys are the fields'
 * names without their unit suffix (line_rate, min_rate, first_cnp_rate, ai_rate, hai_rate,
 * time_reset, byte_reset, alpha_period, decrease_period, threshold, g, initial_alpha,
 * min_dec_pct, clamp_target, clamp_after_time_inc). Rates take bit/s with k, M or G
 * (decimal: 200M), times ns, us or ms (a bare number is ns), byte_reset bytes with K, M
 * (binary), the rest plain integers (0 or 1 for the two flags). Setting line_rate alone
 * keeps the other fields. Returns 0 with p changed and checked, or -EINVAL with p as it was
 * and the reason in why (len bytes; why may be NULL). NULL or "" changes nothing. */
int dcqcn_params_parse(struct dcqcn_params *p, const char *spec, char *why, size_t len);

struct dcqcn {
	struct dcqcn_params p;
	uint64_t rate;	 /* Rc, bit/s */
	uint64_t target; /* Rt, bit/s */
	uint32_t alpha;	 /* 1/1024ths */
	bool active;	 /* a CNP has come: the timers run (before, nothing does) */
	bool cnp_alpha;	 /* a CNP in the current alpha period */
	bool cnp_cut;	 /* a CNP since the last decrease check */
	uint32_t stage_time, stage_bytes; /* increase events since the last cut */
	uint64_t bytes;			  /* sent since the last byte event (or cut) */
	uint64_t next_alpha, next_decrease, next_increase; /* timers, ns */
	uint64_t next_send;				   /* pacing: ns */
	/* counters */
	uint64_t cnps;	    /* CNPs received */
	uint64_t cuts;	    /* rate decreases made */
	uint64_t increases; /* increase events */
};

void dcqcn_init(struct dcqcn *d, const struct dcqcn_params *p);
/* A CNP arrived. */
void dcqcn_cnp(struct dcqcn *d, uint64_t now);
/* Runs every timer due at or before now, in time order. */
void dcqcn_timer(struct dcqcn *d, uint64_t now);
/* The next time dcqcn_timer has work, or UINT64_MAX (no CNP yet, or back at line rate with
 * nothing left to recover). Timers that would do nothing (an alpha of 0, a decrease check
 * without a CNP) are left out: an idle QP is not woken every microsecond. */
uint64_t dcqcn_deadline(const struct dcqcn *d);
/* When the next packet may leave: at or before now means now (0 at line rate). */
uint64_t dcqcn_send_at(const struct dcqcn *d);
/* A packet of `bytes` left at now: the pacing clock and the byte counter move. */
void dcqcn_sent(struct dcqcn *d, uint32_t bytes, uint64_t now);

/* Notification point: CNPs for CE-marked packets, at most one per interval_ns per QP. */
struct dcqcn_np {
	uint64_t interval_ns; /* [min_time_between_cnps] */
	uint64_t last;	      /* when the last CNP was asked for (0: never) */
	bool sent_once;
	uint64_t marked; /* CE-marked packets seen */
	uint64_t cnps;	 /* CNPs asked for */
};

/* A CE-marked packet arrived at now: true when a CNP is to go to its sender. */
bool dcqcn_np_mark(struct dcqcn_np *np, uint64_t now);

#endif
