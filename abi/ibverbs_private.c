/* libibverbs' provider interface (IBVERBS_PRIVATE_34), as stubs. Debian's perftest links
 * libmlx5.so.1 and libefa.so.1, which import these from libibverbs.so.1 (BIND_NOW: every one
 * must resolve) and register themselves from their constructors. softrdma never loads
 * providers: registration is a no-op and every command fails with EOPNOTSUPP, which nothing
 * reaches (perftest calls mlx5dv / efadv only on Mellanox / EFA devices).
 * ibv_query_gid_type, also in this node, is real: src/api/compat.c. */
#include <errno.h>
#include <stddef.h>

#define VOID_STUB(name)                                                                            \
	void name(void);                                                                           \
	void name(void)                                                                            \
	{                                                                                          \
	}
#define PTR_STUB(name)                                                                             \
	void *name(void);                                                                          \
	void *name(void)                                                                           \
	{                                                                                          \
		errno = EOPNOTSUPP;                                                                \
		return NULL;                                                                       \
	}
#define INT_STUB(name)                                                                             \
	int name(void);                                                                            \
	int name(void)                                                                             \
	{                                                                                          \
		errno = EOPNOTSUPP;                                                                \
		return EOPNOTSUPP;                                                                 \
	}

/* clang-format off */
VOID_STUB(__verbs_log)
PTR_STUB(_verbs_init_and_alloc_context)
INT_STUB(execute_ioctl)
INT_STUB(ibv_cmd_advise_mr)
INT_STUB(ibv_cmd_alloc_dm)
INT_STUB(ibv_cmd_alloc_mw)
INT_STUB(ibv_cmd_alloc_pd)
INT_STUB(ibv_cmd_attach_mcast)
INT_STUB(ibv_cmd_close_xrcd)
INT_STUB(ibv_cmd_create_ah)
INT_STUB(ibv_cmd_create_counters)
INT_STUB(ibv_cmd_create_cq_ex)
INT_STUB(ibv_cmd_create_flow)
INT_STUB(ibv_cmd_create_flow_action_esp)
INT_STUB(ibv_cmd_create_qp_ex)
INT_STUB(ibv_cmd_create_qp_ex2)
INT_STUB(ibv_cmd_create_rwq_ind_table)
INT_STUB(ibv_cmd_create_srq)
INT_STUB(ibv_cmd_create_srq_ex)
INT_STUB(ibv_cmd_create_wq)
INT_STUB(ibv_cmd_dealloc_mw)
INT_STUB(ibv_cmd_dealloc_pd)
INT_STUB(ibv_cmd_dereg_mr)
INT_STUB(ibv_cmd_destroy_ah)
INT_STUB(ibv_cmd_destroy_counters)
INT_STUB(ibv_cmd_destroy_cq)
INT_STUB(ibv_cmd_destroy_flow)
INT_STUB(ibv_cmd_destroy_flow_action)
INT_STUB(ibv_cmd_destroy_qp)
INT_STUB(ibv_cmd_destroy_rwq_ind_table)
INT_STUB(ibv_cmd_destroy_srq)
INT_STUB(ibv_cmd_destroy_wq)
INT_STUB(ibv_cmd_detach_mcast)
INT_STUB(ibv_cmd_free_dm)
INT_STUB(ibv_cmd_get_context)
INT_STUB(ibv_cmd_modify_cq)
INT_STUB(ibv_cmd_modify_flow_action_esp)
INT_STUB(ibv_cmd_modify_qp)
INT_STUB(ibv_cmd_modify_qp_ex)
INT_STUB(ibv_cmd_modify_srq)
INT_STUB(ibv_cmd_modify_wq)
INT_STUB(ibv_cmd_open_qp)
INT_STUB(ibv_cmd_open_xrcd)
INT_STUB(ibv_cmd_query_context)
INT_STUB(ibv_cmd_query_device_any)
INT_STUB(ibv_cmd_query_mr)
INT_STUB(ibv_cmd_query_port)
INT_STUB(ibv_cmd_query_qp)
INT_STUB(ibv_cmd_query_srq)
INT_STUB(ibv_cmd_read_counters)
INT_STUB(ibv_cmd_reg_dm_mr)
INT_STUB(ibv_cmd_reg_dmabuf_mr)
INT_STUB(ibv_cmd_reg_mr)
INT_STUB(ibv_cmd_rereg_mr)
INT_STUB(ibv_cmd_resize_cq)
VOID_STUB(verbs_allow_disassociate_destroy)
VOID_STUB(verbs_init_cq)
INT_STUB(verbs_open_device)
VOID_STUB(verbs_register_driver_34)
VOID_STUB(verbs_set_ops)
VOID_STUB(verbs_uninit_context)
/* clang-format on */
