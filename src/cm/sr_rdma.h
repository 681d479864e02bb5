/* softrdma's rdma_cm, the functions behind librdmacm's API: sr_rdma_<name> has exactly the
 * signature and semantics of librdmacm's rdma_<name> (rdma-core 44, <rdma/rdma_cma.h>,
 * <rdma/rdma_verbs.h>; ../shared/spec/verbs-abi.md sections 4.5, 5, 6.4, 6.5): 0 or -1 with
 * errno, NULL with errno, as librdmacm.
 *
 * Who exports what:
 *   - the drop-in libibverbs.so.1 exports sr_rdma_* (version node SOFTRDMA_PRIVATE_1.0,
 *     abi/libibverbs.map) and nothing else of rdma_cm;
 *   - the drop-in librdmacm.so.1 (abi/rdmacm.c) is a shim: each rdma_* of librdmacm.map calls
 *     its sr_rdma_* twin in libibverbs.so.1, so one process has one copy of softrdma;
 *   - libsoftrdma (shared and static) also defines the plain rdma_* names, as aliases of these
 *     (src/cm/cm.h CM_ALIAS), so that programs linked with libsoftrdma call the standard API.
 *
 * This header only needs rdma-core's headers: the shim includes it. */
#ifndef SOFTRDMA_CM_SR_RDMA_H
#define SOFTRDMA_CM_SR_RDMA_H

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

struct rdma_event_channel *sr_rdma_create_event_channel(void);
void sr_rdma_destroy_event_channel(struct rdma_event_channel *channel);
int sr_rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		      enum rdma_port_space ps);
int sr_rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		      struct ibv_qp_init_attr *qp_init_attr);
void sr_rdma_destroy_ep(struct rdma_cm_id *id);
int sr_rdma_destroy_id(struct rdma_cm_id *id);
int sr_rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
int sr_rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
			 struct sockaddr *dst_addr, int timeout_ms);
int sr_rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms);
int sr_rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		      struct ibv_qp_init_attr *qp_init_attr);
int sr_rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr);
void sr_rdma_destroy_qp(struct rdma_cm_id *id);
int sr_rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
int sr_rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr);
void sr_rdma_destroy_srq(struct rdma_cm_id *id);
int sr_rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);
int sr_rdma_establish(struct rdma_cm_id *id);
int sr_rdma_listen(struct rdma_cm_id *id, int backlog);
int sr_rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id);
int sr_rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param);
int sr_rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len);
int sr_rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len);
int sr_rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event);
int sr_rdma_disconnect(struct rdma_cm_id *id);
int sr_rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event);
int sr_rdma_ack_cm_event(struct rdma_cm_event *event);
const char *sr_rdma_event_str(enum rdma_cm_event_type event);
int sr_rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen);
int sr_rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel);
struct ibv_context **sr_rdma_get_devices(int *num_devices);
void sr_rdma_free_devices(struct ibv_context **list);
__be16 sr_rdma_get_src_port(struct rdma_cm_id *id);
__be16 sr_rdma_get_dst_port(struct rdma_cm_id *id);
int sr_rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			struct rdma_addrinfo **res);
void sr_rdma_freeaddrinfo(struct rdma_addrinfo *res);
int sr_rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask);
/* cm_mcast.c: multicast (RoCE UD ids). */
int sr_rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context);
int sr_rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
			      void *context);
int sr_rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr);
/* cm_ece.c: ECE as librdmacm keeps it; on RoCE the REQ / REP carry it (cm.h "ECE"). */
int sr_rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece);
int sr_rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece);

#endif
