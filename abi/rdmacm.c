/* librdmacm.so.1 for unmodified programs: a shim over softrdma's rdma_cm, which lives in the
 * drop-in libibverbs.so.1 (src/cm, exported there as sr_rdma_* in SOFTRDMA_PRIVATE_1.0), so
 * that a process has one copy of softrdma and one set of its state. Every function of
 * librdmacm.map (rdma-core 44; abi/librdmacm.map) is here with librdmacm's signature:
 *   - the rdma_cm calls forward to their sr_rdma_* twin;
 *   - rsockets (r*) are not implemented: they fail with ENOSYS
 *     after a one-time message naming the function (rpoll is imported by rping and udaddy,
 *     which never call it). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "cm/sr_rdma.h"

static void unsupported(const char *name, int *said)
{
	if (!*said && !getenv("SOFTRDMA_QUIET")) {
		*said = 1;
		fprintf(stderr, "softrdma: %s is not implemented (ENOSYS)\n", name);
	}
	errno = ENOSYS;
}

#define NOSYS(name)                                                                                \
	do {                                                                                       \
		static int said_;                                                                  \
		unsupported(name, &said_);                                                         \
	} while (0)

/* ---- rdma_cm: forwarded ---- */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	return sr_rdma_create_event_channel();
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	sr_rdma_destroy_event_channel(channel);
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		   enum rdma_port_space ps)
{
	return sr_rdma_create_id(channel, id, context, ps);
}

int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	return sr_rdma_create_ep(id, res, pd, qp_init_attr);
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
	sr_rdma_destroy_ep(id);
}

int rdma_destroy_id(struct rdma_cm_id *id)
{
	return sr_rdma_destroy_id(id);
}

int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return sr_rdma_bind_addr(id, addr);
}

int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
		      int timeout_ms)
{
	return sr_rdma_resolve_addr(id, src_addr, dst_addr, timeout_ms);
}

int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	return sr_rdma_resolve_route(id, timeout_ms);
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	return sr_rdma_create_qp(id, pd, attr);
}

int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	return sr_rdma_create_qp_ex(id, attr);
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	sr_rdma_destroy_qp(id);
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	return sr_rdma_create_srq(id, pd, attr);
}

int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	return sr_rdma_create_srq_ex(id, attr);
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
	sr_rdma_destroy_srq(id);
}

int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return sr_rdma_connect(id, conn_param);
}

int rdma_establish(struct rdma_cm_id *id)
{
	return sr_rdma_establish(id);
}

int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	return sr_rdma_listen(id, backlog);
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	return sr_rdma_get_request(listen, id);
}

int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return sr_rdma_accept(id, conn_param);
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return sr_rdma_reject(id, private_data, private_data_len);
}

/* A reject for an ECE the passive side does not take (cm.c: reason 35 on RoCE). */
int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	return sr_rdma_reject_ece(id, private_data, private_data_len);
}

int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	return sr_rdma_notify(id, event);
}

int rdma_disconnect(struct rdma_cm_id *id)
{
	return sr_rdma_disconnect(id);
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	return sr_rdma_get_cm_event(channel, event);
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	return sr_rdma_ack_cm_event(event);
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	return sr_rdma_event_str(event);
}

int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval, size_t optlen)
{
	return sr_rdma_set_option(id, level, optname, optval, optlen);
}

int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	return sr_rdma_migrate_id(id, channel);
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	return sr_rdma_get_devices(num_devices);
}

void rdma_free_devices(struct ibv_context **list)
{
	sr_rdma_free_devices(list);
}

__be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return sr_rdma_get_src_port(id);
}

__be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return sr_rdma_get_dst_port(id);
}

int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
		     struct rdma_addrinfo **res)
{
	return sr_rdma_getaddrinfo(node, service, hints, res);
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	sr_rdma_freeaddrinfo(res);
}

int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	return sr_rdma_init_qp_attr(id, qp_attr, qp_attr_mask);
}

int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return sr_rdma_set_local_ece(id, ece);
}

int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	return sr_rdma_get_remote_ece(id, ece);
}

int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	return sr_rdma_join_multicast(id, addr, context);
}

int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *attr,
			   void *context)
{
	return sr_rdma_join_multicast_ex(id, attr, context);
}

int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	return sr_rdma_leave_multicast(id, addr);
}

/* ---- not implemented: ENOSYS ---- */

/* rsockets */

int rsocket(int domain, int type, int protocol)
{
	(void)domain, (void)type, (void)protocol;
	NOSYS("rsocket");
	return -1;
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	NOSYS("rbind");
	return -1;
}

int rlisten(int socket, int backlog)
{
	(void)socket, (void)backlog;
	NOSYS("rlisten");
	return -1;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	NOSYS("raccept");
	return -1;
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	NOSYS("rconnect");
	return -1;
}

int rshutdown(int socket, int how)
{
	(void)socket, (void)how;
	NOSYS("rshutdown");
	return -1;
}

int rclose(int socket)
{
	(void)socket;
	NOSYS("rclose");
	return -1;
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	(void)socket, (void)buf, (void)len, (void)flags;
	NOSYS("rrecv");
	return -1;
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags, struct sockaddr *src_addr,
		  socklen_t *addrlen)
{
	(void)socket, (void)buf, (void)len, (void)flags, (void)src_addr, (void)addrlen;
	NOSYS("rrecvfrom");
	return -1;
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	(void)socket, (void)msg, (void)flags;
	NOSYS("rrecvmsg");
	return -1;
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	(void)socket, (void)buf, (void)len, (void)flags;
	NOSYS("rsend");
	return -1;
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	(void)socket, (void)buf, (void)len, (void)flags, (void)dest_addr, (void)addrlen;
	NOSYS("rsendto");
	return -1;
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	(void)socket, (void)msg, (void)flags;
	NOSYS("rsendmsg");
	return -1;
}

ssize_t rread(int socket, void *buf, size_t count)
{
	(void)socket, (void)buf, (void)count;
	NOSYS("rread");
	return -1;
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	(void)socket, (void)iov, (void)iovcnt;
	NOSYS("rreadv");
	return -1;
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	(void)socket, (void)buf, (void)count;
	NOSYS("rwrite");
	return -1;
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	(void)socket, (void)iov, (void)iovcnt;
	NOSYS("rwritev");
	return -1;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	(void)fds, (void)nfds, (void)timeout;
	NOSYS("rpoll");
	return -1;
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds, struct timeval *timeout)
{
	(void)nfds, (void)readfds, (void)writefds, (void)exceptfds, (void)timeout;
	NOSYS("rselect");
	return -1;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	NOSYS("rgetpeername");
	return -1;
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	(void)socket, (void)addr, (void)addrlen;
	NOSYS("rgetsockname");
	return -1;
}

int rsetsockopt(int socket, int level, int optname, const void *optval, socklen_t optlen)
{
	(void)socket, (void)level, (void)optname, (void)optval, (void)optlen;
	NOSYS("rsetsockopt");
	return -1;
}

int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	(void)socket, (void)level, (void)optname, (void)optval, (void)optlen;
	NOSYS("rgetsockopt");
	return -1;
}

int rfcntl(int socket, int cmd, ...)
{
	(void)socket, (void)cmd;
	NOSYS("rfcntl");
	return -1;
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	(void)socket, (void)buf, (void)len, (void)prot, (void)flags, (void)offset;
	NOSYS("riomap");
	return -1;
}

int riounmap(int socket, void *buf, size_t len)
{
	(void)socket, (void)buf, (void)len;
	NOSYS("riounmap");
	return -1;
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	(void)socket, (void)buf, (void)count, (void)offset, (void)flags;
	NOSYS("riowrite");
	return (size_t)-1;
}
