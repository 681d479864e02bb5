/* The verbs API layer: the objects the application holds, each embedding the rdma-core
 * struct it is handed as (ibv_context inside verbs_context, ibv_qp, ibv_cq, ...), plus the
 * internal state behind it. Every object the application gets carries a valid `context`
 * pointer at offset 0, because verbs.h's inline post/poll calls dispatch through it. */
#ifndef SOFTRDMA_API_H
#define SOFTRDMA_API_H

#include <infiniband/verbs.h>
#include <net/if.h>
#include <pthread.h>
#include <sys/types.h>

#include "core/core.h"
#include "core/iw_progress.h"
#include "engine/eng.h"
#include "obj/obj.h"

#define SR_MAX_GID   16
#define SR_MAX_QP_WR 16384
/* max_cqe + 1. libfabric's ofi_rxm sizes its MSG CQ (128 + 128) * FI_UNIVERSE_SIZE (1024 by
 * default): 262144 entries (it was 65536: FI_UNIVERSE_SIZE=255 at most). The ring is allocated
 * at create, but calloc's untouched pages cost no memory until completions reach them. */
#define SR_MAX_CQE    (1 << 20)
#define SR_MAX_MR     65536
#define SR_MAX_MW     4097 /* window slots: 4096 windows per context, as rxe's RXE_MAX_MW */
#define SR_ASYNC_RING 64
#define SR_MAX_XSRQ   1024 /* XRC SRQs per context; their numbers are 1 .. SR_MAX_XSRQ - 1 */

struct sr_device {
	struct ibv_device ibdev;
	char ifname[IF_NAMESIZE];
	unsigned netdev_mtu;
	enum ibv_mtu max_mtu; /* rxe rule: netdev MTU minus 80 bytes of headers */
	__be64 guid;
	uint8_t gid[SR_MAX_GID][16];
	int ngid;
	int first_v4; /* index of the first IPv4-mapped GID, -1 if none */
	bool iwarp;   /* iwarp_<ifname>: RDMAP/DDP/MPA over TCP (iw_verbs.c) */
	/* Contexts of it the application opened itself (not rdma_cm's own, sr_cm_open_device):
	 * rdma_cm follows that choice of transport (cm.h "Which transport"). Atomic. */
	int app_opens;
	struct sr_device *next;
};

struct sr_srq;
struct sr_xrcd;

struct sr_context {
	struct verbs_context vctx; /* the application sees &vctx.context */
	struct sr_device *dev;
	struct core_ctx *core;
	struct obj_mr_table mrs;
	struct obj_mw_table mws; /* memory windows (RoCE devices; verbs.c) */
	struct eng_env env;
	uint32_t next_handle;
	/* The QPs by n (QPN = core_qpn_base | n; NULL: n is free), under the core lock: a table
	 * grown as QPs are created (sr_alloc_qpn), up to CORE_MAX_QP; qpn_next is where the
	 * search for a free n starts (next fit: a number comes back only after the others). */
	struct sr_qp **qp_tab;
	uint32_t qp_tab_len;
	uint32_t qp_count;
	uint32_t qpn_next;
	/* asynchronous events: a ring under the core lock, one byte per event in a pipe */
	struct ibv_async_event async[SR_ASYNC_RING];
	uint32_t async_head, async_tail;
	int async_wfd;
	struct iwp *iwp; /* iWARP devices: the TCP connections and their progress */
	/* XRC (xrc.c), under the core lock: the XRC SRQs by number (the XRCETH's), and the open
	 * XRC domains. */
	struct sr_srq *xsrq[SR_MAX_XSRQ];
	struct sr_xrcd *xrcds;
	bool app; /* opened by the application (counted in dev->app_opens) */
	/* SOFTRDMA_SR=0: the RoCE RC QPs do not offer selective repeat in their ECE (compat.c),
	 * so they keep go-back-N with every peer. */
	bool no_sr;
};

/* Set by rdma_cm around its own ibv_open_device (cm_glue.c): not the application's open. */
extern __thread bool sr_cm_opening;

/* An XRC domain (xrc.c). Domains are per device context: opening the same file (fd) again in
 * the same context gives the same domain (reference counted), other contexts and processes get
 * their own (an XRC SRQ is reached from the wire through a target QP of its own context). */
struct sr_xrcd {
	struct ibv_xrcd ibxrcd;
	struct sr_context *ctx;
	uint32_t handle; /* the engine's domain id (eng_rq.xrcd, eng_qp_init.xrcd), never 0 */
	bool has_inode;	 /* opened with a file: (dev, ino) name it */
	dev_t st_dev;
	ino_t st_ino;
	int opens; /* ibv_open_xrcd calls not yet closed */
	int users; /* XRC SRQs and XRC_RECV QPs in it */
	struct sr_xrcd *next;
};

struct sr_pd {
	struct ibv_pd ibpd;
};

struct sr_mr {
	struct ibv_mr ibmr;
	struct obj_mr omr;
};

/* A memory window (RoCE devices): ibmw is what the application holds; ibmw.rkey is the
 * window's R_Key as verbs keeps it (a type 1 bind updates it; a type 2 window's new key is
 * the one its BIND_MW work request carried), omw the window the engine's accesses check. */
struct sr_mw {
	struct ibv_mw ibmw;
	struct obj_mw omw;
};

struct sr_channel {
	struct ibv_comp_channel ch; /* ch.fd: read end of a pipe carrying struct sr_cq * */
	int wfd;
};

struct sr_cq {
	/* What the application holds: an ibv_cq, or (ibv_create_cq_ex, cq_ex.c) an ibv_cq_ex,
	 * whose leading fields are ibv_cq's (ibv_cq_ex_to_cq is a cast). */
	union {
		struct ibv_cq ibcq;
		struct ibv_cq_ex ibcq_ex;
	};
	struct eng_cq ecq;
	struct sr_context *ctx;
	uint32_t events_sent;
	/* Extended CQs: the completion between start_poll / next_poll and the next call, which
	 * the read_* calls read, and the lock held from a successful start_poll to end_poll (one
	 * poller at a time, as providers lock the CQ; error-checking, so that an end_poll without
	 * a start_poll is harmless). */
	struct ibv_wc cur;
	pthread_mutex_t poll_lock;
	bool ex;
};

struct sr_srq {
	struct ibv_srq ibsrq;
	struct eng_rq erq;
	struct sr_context *ctx;
	uint32_t max_wr, max_sge;
	struct sr_xrcd *xrcd; /* IBV_SRQT_XRC: its domain; NULL for a basic SRQ */
	uint32_t srqn;	      /* IBV_SRQT_XRC: its number (ibv_get_srq_num) */
};

/* An address handle (UD): the destination lives in the core's AH table; ibah.handle is its
 * core handle, which the engine copies into each send WQE (core.h "address handles"). */
struct sr_ah {
	struct ibv_ah ibah;
	struct sr_context *ctx;
};

struct sr_wr_batch;

struct sr_qp {
	/* What the application holds: an ibv_qp, which is also the start of an ibv_qp_ex
	 * (ibv_qp_to_qp_ex) for QPs created with the ibv_wr_* interface (qp_ex.c). */
	union {
		struct ibv_qp ibqp;
		struct ibv_qp_ex ibqp_ex;
	};
	struct sr_wr_batch *batch; /* the ibv_wr_* batch (qp_ex.c); NULL: no such interface */
	struct eng_qp *eqp;
	struct sr_context *ctx;
	struct ibv_qp_attr attr; /* every attribute set so far */
	struct ibv_qp_cap cap;
	bool sq_sig_all;
	struct iw_qp *iqp;    /* iWARP devices: the QP engine (eqp is NULL then) */
	struct sr_xrcd *xrcd; /* IBV_QPT_XRC_RECV: its domain */
	bool cm_owned;	      /* iWARP: rdma_cm connects it (a self-managed QP: conn qp_num) */
	/* ECE (compat.c), under the core lock: set by ibv_set_ece (the application's, or rdma_cm's
	 * for its QPs), with the options agreed (wire/roce/ece.h; the SR bit is the engine's,
	 * eng_qp_sr). Until then ibv_query_ece reports what the QP offers. */
	bool ece_set;
	uint32_t ece_options;
};

/* Either engine's QP as what both share (eng.h). */
static inline struct eng_qp_base *sr_qp_base(const struct sr_qp *qp)
{
	return qp->iqp ? iw_qp_base(qp->iqp) : eng_qp_base(qp->eqp);
}

static inline struct sr_context *sr_ctx(struct ibv_context *c)
{
	return (struct sr_context *)((char *)c - offsetof(struct sr_context, vctx.context));
}

/* device.c */
struct sr_device *sr_device_list(int *n);
int sr_device_query_gid(const struct sr_device *dev, int index, uint8_t gid[16]);
bool sr_gid_is_v4(const uint8_t gid[16]);

/* iw_verbs.c: the iWARP side of the verbs calls (contexts of devices with dev->iwarp). */
int sr_iw_open(struct sr_context *ctx);
void sr_iw_close(struct sr_context *ctx);
struct ibv_qp *sr_iw_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init);
int sr_iw_destroy_qp(struct sr_qp *qp);
int sr_iw_modify_qp(struct sr_qp *qp, struct ibv_qp_attr *attr, int mask);
/* The state the consumer sees (under the lock): while auto-connect makes the connection,
 * the RTR / RTS it asked for; otherwise the engine's. */
enum ibv_qp_state sr_iw_qp_state(const struct sr_qp *qp);
/* Checks attribute values for ibv_modify_qp (the state machine checks which are present);
 * 0 or a positive errno. verbs.c. */
int sr_check_qp_attr(struct sr_qp *qp, const struct ibv_qp_attr *a, int mask);

/* QP creation steps shared by the RoCE and iWARP paths (verbs.c). sr_qp_check_init checks
 * the QP type (RC, UC, UD on RoCE; RC only on iWARP: EOPNOTSUPP otherwise) and the init attributes
 * against the device limits and raises zero capacities to 1 (verbs: a QP has at least what was
 * asked); returns 0 or a positive errno. sr_alloc_qpn takes a free QPN for qp under the core lock
 * (0, or -ENOMEM: all CORE_MAX_QP - 1 taken, or no memory).
 * sr_qp_publish fills the ibv_qp the application sees. */
int sr_qp_check_init(struct ibv_pd *pd, struct ibv_qp_init_attr *init, uint32_t max_sge);
int sr_alloc_qpn(struct sr_context *ctx, struct sr_qp *qp, uint32_t *qpn);
/* Gives a QPN back (under the core lock). */
void sr_free_qpn(struct sr_context *ctx, uint32_t qpn);
/* The QP of that number in ctx, or NULL (under the core lock). */
struct sr_qp *sr_qp_by_num(struct sr_context *ctx, uint32_t qpn);
struct eng_qp_init sr_qp_eng_init(struct ibv_pd *pd, const struct ibv_qp_init_attr *init,
				  uint32_t qpn, struct sr_qp *qp);
void sr_qp_publish(struct sr_qp *qp, struct sr_context *ctx, struct ibv_pd *pd,
		   const struct ibv_qp_init_attr *init, uint32_t qpn, enum ibv_mtu mtu);

/* CQ creation shared with cq_ex.c (verbs.c): checks the arguments as ibv_create_cq(3)
 * (EINVAL), NULL with errno set on failure. cq_ex.c: the verbs_context's create_cq_ex. */
struct sr_cq *sr_cq_new(struct ibv_context *context, int cqe, void *cq_context,
			struct ibv_comp_channel *channel, int comp_vector);
struct ibv_cq_ex *sr_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

/* SRQ and QP creation shared with xrc.c (verbs.c). sr_srq_new creates an SRQ object of
 * `context` for `attr` (checked here: EINVAL) in `pd`; NULL with errno set on failure.
 * sr_create_qp creates a RoCE QP of any type softrdma has (RC, UC, UD, XRC_SEND with `pd`;
 * XRC_RECV with `xrcd` and no pd); NULL with errno set. */
struct sr_srq *sr_srq_new(struct ibv_context *context, struct ibv_pd *pd,
			  const struct ibv_srq_attr *attr, void *srq_context);
struct ibv_qp *sr_create_qp(struct ibv_context *context, struct ibv_pd *pd,
			    struct ibv_qp_init_attr *init, struct sr_xrcd *xrcd);

/* xrc.c: the extended verbs_context ops (open_xrcd, close_xrcd, create_srq_ex, get_srq_num,
 * create_qp_ex), set at open; the eng_env.xsrq_lookup callback; and the XRC parts of
 * ibv_destroy_srq / ibv_destroy_qp (under the core lock). */
void sr_xrc_fill_ops(struct sr_context *ctx);
struct eng_rq *sr_xsrq_lookup(void *ctx, uint32_t srqn);
void sr_xrc_srq_release(struct sr_srq *srq);
void sr_xrc_qp_release(struct sr_qp *qp);

/* qp_ex.c: the ibv_wr_* interface. sr_qp_ex_check says whether a QP of `type` on `context`
 * can have the operations `ops` (IBV_QP_EX_WITH_*): 0 or EOPNOTSUPP. sr_qp_ex_init gives a
 * created QP the interface (0 or ENOMEM); sr_qp_ex_fini frees it (at destroy). */
int sr_qp_ex_check(struct ibv_context *context, enum ibv_qp_type type, uint64_t ops);
int sr_qp_ex_init(struct sr_qp *qp, uint64_t ops);
void sr_qp_ex_fini(struct sr_qp *qp);

/* async events (verbs.c): queue one, under the core lock. */
void sr_async_push(struct sr_context *ctx, const struct ibv_async_event *ev);

#endif
