/* The IB CM's numbers rdma_cm exposes (../shared/spec/roce.md section 11): the private-data
 * sizes events report on RoCE (REQ 92 minus rdma_cm's 36-byte IP header, REP 196, REJ 148,
 * SIDR_REQ 216 minus the header, SIDR_REP 136; zero padded, as on a kernel RoCE device), reject
 * reasons and SIDR statuses. The MADs themselves: wire/roce/cm_mad.h. */
#ifndef SOFTRDMA_CM_MSG_H
#define SOFTRDMA_CM_MSG_H

#define CM_REQ_PD      56
#define CM_REP_PD      196
#define CM_REJ_PD      148
#define CM_SIDR_REQ_PD 180 /* IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE 216 minus rdma_cm's 36 */
#define CM_SIDR_REP_PD 136 /* IB_CM_SIDR_REP_PRIVATE_DATA_SIZE */

/* IB CM reject reasons rdma_cm reports as the REJECTED event's status (ib_cm.h). */
#define CM_REJ_INVALID_SERVICE_ID 8  /* nobody listens on that port */
#define CM_REJ_CONSUMER_DEFINED	  28 /* rdma_reject */
#define CM_REJ_VENDOR_OPTION                                                                       \
	35 /* rdma_reject_ece: the ECE is not taken (IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED) */
#define CM_REJ_INVALID_QP 1 /* (IB_CM_REJ_NO_QP) the REP could not be applied */

/* SIDR_REP status (IBTA 12.11.2, table 126; ib_cm.h enum ib_cm_sidr_status). rdma_cm reports
 * a non-zero one as the UNREACHABLE event's status. */
#define CM_SIDR_SUCCESS		    0
#define CM_SIDR_UNSUPPORTED	    1 /* nobody serves that service ID (no listener) */
#define CM_SIDR_REJECT		    2 /* rdma_reject */
#define CM_SIDR_NO_QP		    3
#define CM_SIDR_REDIRECT	    4
#define CM_SIDR_UNSUPPORTED_VERSION 5

#endif
