/* librdmacm.so.1 for unmodified programs, until softrdma's rdma_cm exists (issue 4): every
 * call fails with ENOSYS after one clear message, so that programs linked against librdmacm
 * (perftest, which uses it only with -R) load and run their socket-exchange modes. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static void say(void)
{
	static int said;
	if (!said && !getenv("SOFTRDMA_QUIET")) {
		said = 1;
		fprintf(stderr, "softrdma: rdma_cm is not implemented yet; use the program's "
				"socket-exchange mode (e.g. perftest without -R)\n");
	}
}

#define INT_STUB(name)                                                                             \
	int name(void);                                                                            \
	int name(void)                                                                             \
	{                                                                                          \
		say();                                                                             \
		errno = ENOSYS;                                                                    \
		return -1;                                                                         \
	}
#define PTR_STUB(name)                                                                             \
	void *name(void);                                                                          \
	void *name(void)                                                                           \
	{                                                                                          \
		say();                                                                             \
		errno = ENOSYS;                                                                    \
		return NULL;                                                                       \
	}
#define VOID_STUB(name)                                                                            \
	void name(void);                                                                           \
	void name(void)                                                                            \
	{                                                                                          \
	}

/* rdma_event_str names events for messages even without a CM. */
const char *rdma_event_str(int event);
const char *rdma_event_str(int event)
{
	static const char *const names[] = {
	    "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
	    "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
	    "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	    "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
	    "RDMA_CM_EVENT_REJECTED",	     "RDMA_CM_EVENT_ESTABLISHED",
	    "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
	    "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
	    "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
	if (event < 0 || event >= (int)(sizeof(names) / sizeof(names[0])))
		return "UNKNOWN EVENT";
	return names[event];
}

/* clang-format off */
INT_STUB(rdma_create_event_channel)
INT_STUB(rdma_destroy_event_channel)
INT_STUB(rdma_create_id)
INT_STUB(rdma_create_ep)
VOID_STUB(rdma_destroy_ep)
INT_STUB(rdma_destroy_id)
INT_STUB(rdma_bind_addr)
INT_STUB(rdma_resolve_addr)
INT_STUB(rdma_resolve_route)
INT_STUB(rdma_create_qp)
INT_STUB(rdma_create_qp_ex)
VOID_STUB(rdma_destroy_qp)
INT_STUB(rdma_create_srq)
INT_STUB(rdma_create_srq_ex)
VOID_STUB(rdma_destroy_srq)
INT_STUB(rdma_connect)
INT_STUB(rdma_listen)
INT_STUB(rdma_get_request)
INT_STUB(rdma_accept)
INT_STUB(rdma_reject)
INT_STUB(rdma_notify)
INT_STUB(rdma_disconnect)
INT_STUB(rdma_join_multicast)
INT_STUB(rdma_leave_multicast)
INT_STUB(rdma_get_cm_event)
INT_STUB(rdma_ack_cm_event)
INT_STUB(rdma_set_option)
INT_STUB(rdma_migrate_id)
PTR_STUB(rdma_get_devices)
VOID_STUB(rdma_free_devices)
INT_STUB(rdma_get_src_port)
INT_STUB(rdma_get_dst_port)
INT_STUB(rdma_getaddrinfo)
VOID_STUB(rdma_freeaddrinfo)
INT_STUB(rsocket)
INT_STUB(rbind)
INT_STUB(rlisten)
INT_STUB(raccept)
INT_STUB(rconnect)
INT_STUB(rshutdown)
INT_STUB(rclose)
INT_STUB(rrecv)
INT_STUB(rrecvfrom)
INT_STUB(rrecvmsg)
INT_STUB(rsend)
INT_STUB(rsendto)
INT_STUB(rsendmsg)
INT_STUB(rread)
INT_STUB(rreadv)
INT_STUB(rwrite)
INT_STUB(rwritev)
INT_STUB(rpoll)
INT_STUB(rselect)
INT_STUB(rgetpeername)
INT_STUB(rgetsockname)
INT_STUB(rsetsockopt)
INT_STUB(rgetsockopt)
INT_STUB(rfcntl)
PTR_STUB(riomap)
INT_STUB(riounmap)
INT_STUB(riowrite)
INT_STUB(rdma_join_multicast_ex)
INT_STUB(rdma_establish)
INT_STUB(rdma_init_qp_attr)
INT_STUB(rdma_get_remote_ece)
INT_STUB(rdma_reject_ece)
INT_STUB(rdma_set_local_ece)
/* clang-format on */
