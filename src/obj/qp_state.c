/* The QP state machine (IBTA 10.3.1; the attribute-mask table of Linux ib_modify_qp_is_ok,
 * ../shared/spec/roce.md section 8): which transitions exist, and which attributes each one
 * requires and allows, per QP type. */
#include "obj/obj.h"

#include <errno.h>

/* XRC_INI = IBV_QPT_XRC_SEND, XRC_TGT = IBV_QPT_XRC_RECV (the kernel's names). */
enum { T_RC, T_UC, T_UD, T_XI, T_XT, T__COUNT };

struct qp_transition {
	bool valid;
	int req[T__COUNT];
	int opt[T__COUNT];
};

#define RTS_OPT_RC                                                                                 \
	(IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |        \
	 IBV_QP_MIN_RNR_TIMER)
#define RTS_OPT_UC                                                                                 \
	(IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)
#define UD_OPT	   (IBV_QP_CUR_STATE | IBV_QP_QKEY)
#define RTS_OPT_XT (RTS_OPT_UC | IBV_QP_MIN_RNR_TIMER)
#define INIT_REQ   (IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RTR_OPT	   (IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX)

static const struct qp_transition transitions[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] =
    {
	[IBV_QPS_RESET] =
	    {
		[IBV_QPS_RESET] = {.valid = true},
		[IBV_QPS_INIT] = {.valid = true,
				  .req = {[T_RC] =
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
					  [T_UC] =
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
					  [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
					  [T_XI] = INIT_REQ,
					  [T_XT] = INIT_REQ}},
	    },
	[IBV_QPS_INIT] =
	    {
		[IBV_QPS_INIT] = {.valid = true,
				  .opt = {[T_RC] =
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
					  [T_UC] =
					      IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
					  [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
					  [T_XI] = INIT_REQ,
					  [T_XT] = INIT_REQ}},
		[IBV_QPS_RTR] =
		    {.valid = true,
		     .req =
			 {[T_RC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
			  [T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
			  /* The initiator has no responder: no IRD, no RNR timer. */
			  [T_XI] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
			  [T_XT] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER},
		     .opt = {[T_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
			     [T_UC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX,
			     [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
			     [T_XI] = RTR_OPT,
			     [T_XT] = RTR_OPT}},
	    },
	[IBV_QPS_RTR] =
	    {
		[IBV_QPS_RTS] = {.valid = true,
				 .req = {[T_RC] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						  IBV_QP_RNR_RETRY |
						  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
					 [T_UC] = IBV_QP_SQ_PSN,
					 [T_UD] = IBV_QP_SQ_PSN,
					 [T_XI] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
						  IBV_QP_RNR_RETRY |
						  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
					 /* The target has no requester: no retries, no ORD. */
					 [T_XT] = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN},
				 .opt =
				     {[T_RC] = RTS_OPT_RC,
				      [T_UC] = RTS_OPT_UC,
				      [T_UD] = UD_OPT,
				      [T_XI] = RTS_OPT_UC,
				      [T_XT] = RTS_OPT_XT}},
	    },
	[IBV_QPS_RTS] =
	    {
		[IBV_QPS_RTS] = {.valid = true,
				 .opt =
				     {[T_RC] = RTS_OPT_RC,
				      [T_UC] = RTS_OPT_UC,
				      [T_UD] = UD_OPT,
				      [T_XI] = RTS_OPT_UC,
				      [T_XT] = RTS_OPT_XT}},
		[IBV_QPS_SQD] = {.valid = true,
				 .opt = {[T_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
					 [T_UC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
					 [T_UD] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
					 [T_XI] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
					 [T_XT] = IBV_QP_EN_SQD_ASYNC_NOTIFY}},
	    },
	[IBV_QPS_SQD] =
	    {
		[IBV_QPS_RTS] = {.valid = true,
				 .opt =
				     {[T_RC] = RTS_OPT_RC,
				      [T_UC] = RTS_OPT_UC,
				      [T_UD] = UD_OPT,
				      [T_XI] = RTS_OPT_UC,
				      [T_XT] = RTS_OPT_XT}},
		[IBV_QPS_SQD] = {.valid = true,
				 .opt = {[T_RC] =
					     IBV_QP_PKEY_INDEX | IBV_QP_ALT_PATH |
					     IBV_QP_ACCESS_FLAGS |
					     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE |
					     IBV_QP_AV | IBV_QP_PORT,
					 [T_UC] =
					     IBV_QP_PKEY_INDEX | IBV_QP_ALT_PATH |
					     IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE |
					     IBV_QP_AV | IBV_QP_PORT,
					 [T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY}},
	    },
	[IBV_QPS_SQE] =
	    {
		[IBV_QPS_RTS] =
		    {.valid = true,
		     .opt = {[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS, [T_UD] = UD_OPT}},
	    },
};

static const char *const state_names[] = {
    [IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT", [IBV_QPS_RTR] = "RTR",
    [IBV_QPS_RTS] = "RTS",     [IBV_QPS_SQD] = "SQD",	[IBV_QPS_SQE] = "SQE",
    [IBV_QPS_ERR] = "ERR",
};

const char *obj_qp_state_name(enum ibv_qp_state s)
{
	if ((unsigned)s <= IBV_QPS_ERR)
		return state_names[s];
	return "UNKNOWN";
}

int obj_qp_check_modify(enum ibv_qp_type type, enum ibv_qp_state cur, enum ibv_qp_state next,
			int mask)
{
	int t;

	switch (type) {
	case IBV_QPT_RC:
		t = T_RC;
		break;
	case IBV_QPT_UC:
		t = T_UC;
		break;
	case IBV_QPT_UD:
		t = T_UD;
		break;
	case IBV_QPT_XRC_SEND:
		t = T_XI;
		break;
	case IBV_QPT_XRC_RECV:
		t = T_XT;
		break;
	default:
		return -EINVAL;
	}
	if ((unsigned)cur > IBV_QPS_ERR || (unsigned)next > IBV_QPS_ERR)
		return -EINVAL;
	if (!(mask & IBV_QP_STATE))
		next = cur; /* attribute change without a state change */
	/* Any state may go to RESET or ERR, with no other attributes (IBTA 10.3.1). */
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return (mask & ~(IBV_QP_STATE | IBV_QP_CUR_STATE)) ? -EINVAL : 0;
	const struct qp_transition *tr = &transitions[cur][next];
	if (!tr->valid)
		return -EINVAL;
	int allowed = tr->req[t] | tr->opt[t] | IBV_QP_STATE;
	if ((mask & tr->req[t]) != tr->req[t])
		return -EINVAL;
	if (mask & ~allowed)
		return -EINVAL;
	return 0;
}
