/* QP state machine: legal transitions with their exact required attribute masks pass; a
 * missing required bit, an extra bit, or an illegal transition fails. */
#include "check.h"
#include "obj/obj.h"

#define INIT_MASK (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)
#define RTR_MASK                                                                                   \
	(IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |            \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)
#define RTS_MASK                                                                                   \
	(IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |     \
	 IBV_QP_MAX_QP_RD_ATOMIC)

static void required_bits_each_missing(enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
	for (int bit = 1; bit < (1 << 26); bit <<= 1) {
		if (!(mask & bit) || bit == IBV_QP_STATE)
			continue;
		CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, from, to, mask & ~bit), -EINVAL);
	}
}

int main(void)
{
	/* The rc_pingpong / perftest sequence. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, INIT_MASK), 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, RTR_MASK), 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, RTS_MASK), 0);
	required_bits_each_missing(IBV_QPS_RESET, IBV_QPS_INIT, INIT_MASK);
	required_bits_each_missing(IBV_QPS_INIT, IBV_QPS_RTR, RTR_MASK);
	required_bits_each_missing(IBV_QPS_RTR, IBV_QPS_RTS, RTS_MASK);
	/* Optional attributes are accepted, unrelated ones refused. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR,
				     RTR_MASK | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX),
		 0);
	CHECK_EQ(
	    obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, RTR_MASK | IBV_QP_SQ_PSN),
	    -EINVAL);
	/* librdmacm re-applies INIT attributes INIT->INIT. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_INIT,
				     IBV_QP_STATE | IBV_QP_ACCESS_FLAGS),
		 0);
	/* Skipping states is illegal. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_RTR, RTR_MASK), -EINVAL);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTS, RTS_MASK), -EINVAL);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_ERR, IBV_QPS_RTS, RTS_MASK), -EINVAL);
	/* SQE -> RTS exists for UC/UD only; RC never enters SQE. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_UD, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE), 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQE, IBV_QPS_RTS, IBV_QP_STATE), 0);
	/* Any state to RESET or ERR, with only the state bit. */
	for (int s = IBV_QPS_RESET; s <= IBV_QPS_ERR; s++) {
		CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, s, IBV_QPS_ERR, IBV_QP_STATE), 0);
		CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, s, IBV_QPS_RESET, IBV_QP_STATE), 0);
		CHECK_EQ(
		    obj_qp_check_modify(IBV_QPT_RC, s, IBV_QPS_ERR, IBV_QP_STATE | IBV_QP_SQ_PSN),
		    -EINVAL);
	}
	/* RTS <-> SQD, and RTS->RTS attribute changes. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QP_STATE), 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_SQD, IBV_QPS_RTS, IBV_QP_STATE), 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_MIN_RNR_TIMER),
		 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, IBV_QPS_RTS, IBV_QPS_RTS, IBV_QP_PATH_MTU),
		 -EINVAL);
	/* UD needs a Q_Key at INIT, and no AV at RTR. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT,
				     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
		 0);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_UD, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QP_STATE), 0);
	/* Unknown QP types and states. */
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RAW_PACKET, IBV_QPS_RESET, IBV_QPS_INIT, INIT_MASK),
		 -EINVAL);
	CHECK_EQ(obj_qp_check_modify(IBV_QPT_RC, (enum ibv_qp_state)42, IBV_QPS_INIT, INIT_MASK),
		 -EINVAL);
	CHECK(strcmp(obj_qp_state_name(IBV_QPS_RTS), "RTS") == 0);
	return check_exit();
}
