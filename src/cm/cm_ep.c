/* rdma_getaddrinfo and the endpoint calls built on the rest (librdmacm semantics):
 * rdma_create_ep / rdma_destroy_ep / rdma_get_request, with synchronous ids (no channel: every
 * call waits for its event). */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

static int fail(int err)
{
	errno = err;
	return -1;
}

/* Numeric addresses only (no name service: nothing leaves the host to resolve a name). */
static int parse_node(const char *node, int family, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	if (family != AF_INET6 && inet_pton(AF_INET, node, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		*len = sizeof(*s4);
		return 0;
	}
	if (family != AF_INET && inet_pton(AF_INET6, node, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		*len = sizeof(*s6);
		return 0;
	}
	return EAI_NONAME;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static struct sockaddr *dup_addr(const struct sockaddr_storage *ss, socklen_t len)
{
	struct sockaddr *a = malloc(len);
	if (a)
		memcpy(a, ss, len);
	return a;
}

int sr_rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			struct rdma_addrinfo **res)
{
	if (!res || (!node && !service && !(hints && (hints->ai_src_addr || hints->ai_dst_addr))))
		return EAI_NONAME;
	int flags = hints ? hints->ai_flags : 0;
	int family = hints ? hints->ai_family : AF_UNSPEC;
	if (family != AF_UNSPEC && family != AF_INET && family != AF_INET6)
		return EAI_FAMILY; /* AF_IB: no InfiniBand addressing here */
	uint16_t port = 0;
	if (service && *service) {
		char *end;
		unsigned long v = strtoul(service, &end, 10);
		if (*end || v > 65535)
			return EAI_SERVICE;
		port = (uint16_t)v;
	}
	struct rdma_addrinfo *ai = calloc(1, sizeof(*ai));
	if (!ai)
		return EAI_MEMORY;
	ai->ai_flags = flags;
	ai->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	ai->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type
			 : ai->ai_port_space == RDMA_PS_UDP || ai->ai_port_space == RDMA_PS_IPOIB
			     ? IBV_QPT_UD
			     : IBV_QPT_RC;
	struct sockaddr_storage ss;
	socklen_t len = 0;
	int err = 0;
	if (node) {
		err = parse_node(node, family, &ss, &len);
	} else if (flags & RAI_PASSIVE) {
		/* Every address: IPv4's unless IPv6 is asked for (getaddrinfo's first). */
		memset(&ss, 0, sizeof(ss));
		ss.ss_family = family == AF_INET6 ? AF_INET6 : AF_INET;
		len = family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	} else if (hints && hints->ai_dst_addr) {
		len = hints->ai_dst_len;
		if (len > sizeof(ss))
			err = EAI_FAMILY;
		else
			memcpy(&ss, hints->ai_dst_addr, len);
	} else {
		/* getaddrinfo's non-passive default: the loopback address. */
		err = parse_node(family == AF_INET6 ? "::1" : "127.0.0.1", family, &ss, &len);
	}
	if (err) {
		free(ai);
		return err;
	}
	if (node || (flags & RAI_PASSIVE) || !hints || !hints->ai_dst_addr)
		set_port(&ss, port);
	ai->ai_family = ss.ss_family;
	if (flags & RAI_PASSIVE) {
		ai->ai_src_addr = dup_addr(&ss, len);
		ai->ai_src_len = len;
		if (!ai->ai_src_addr)
			goto nomem;
	} else {
		ai->ai_dst_addr = dup_addr(&ss, len);
		ai->ai_dst_len = len;
		if (!ai->ai_dst_addr)
			goto nomem;
		if (hints && hints->ai_src_addr && hints->ai_src_len) {
			ai->ai_src_addr = malloc(hints->ai_src_len);
			if (!ai->ai_src_addr)
				goto nomem;
			memcpy(ai->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
			ai->ai_src_len = hints->ai_src_len;
		}
	}
	*res = ai;
	return 0;
nomem:
	sr_rdma_freeaddrinfo(ai);
	return EAI_MEMORY;
}
CM_ALIAS(getaddrinfo);

void sr_rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}
CM_ALIAS(freeaddrinfo);

int sr_rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd,
		      struct ibv_qp_init_attr *qp_init_attr)
{
	if (!out || !res)
		return fail(EINVAL);
	if (res->ai_port_space != RDMA_PS_TCP && res->ai_port_space != RDMA_PS_IB &&
	    res->ai_port_space != RDMA_PS_UDP && res->ai_port_space != RDMA_PS_IPOIB)
		return fail(EINVAL);
	struct cm_id *id = cm_id_new_sync(NULL, (enum rdma_port_space)res->ai_port_space);
	if (!id)
		return fail(ENOMEM);
	struct rdma_cm_id *rid = &id->id;
	/* librdmacm rdma_create_id2: the id takes the address's QP type (XRC). */
	if (res->ai_qp_type == IBV_QPT_XRC_SEND || res->ai_qp_type == IBV_QPT_XRC_RECV)
		rid->qp_type = (enum ibv_qp_type)res->ai_qp_type;
	int ret;
	if (res->ai_flags & RAI_PASSIVE) {
		ret = sr_rdma_bind_addr(rid, res->ai_src_addr);
		if (ret)
			goto err;
		if (pd)
			rid->pd = pd;
		if (qp_init_attr) {
			id->ep_attr = malloc(sizeof(*id->ep_attr));
			if (!id->ep_attr) {
				ret = fail(ENOMEM);
				goto err;
			}
			*id->ep_attr = *qp_init_attr;
			id->ep_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		}
		*out = rid;
		return 0;
	}
	ret = sr_rdma_resolve_addr(rid, res->ai_src_addr, res->ai_dst_addr, 2000);
	if (!ret)
		ret = sr_rdma_resolve_route(rid, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = sr_rdma_create_qp(rid, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (res->ai_connect_len && res->ai_connect) {
		size_t n = res->ai_connect_len < CM_PD_MAX ? res->ai_connect_len : CM_PD_MAX;
		id->connect_pd = malloc(n);
		if (!id->connect_pd) {
			ret = fail(ENOMEM);
			goto err;
		}
		memcpy(id->connect_pd, res->ai_connect, n);
		id->connect_len = (uint8_t)n;
	}
	*out = rid;
	return 0;
err:;
	int e = errno;
	sr_rdma_destroy_ep(rid);
	errno = e;
	return ret;
}
CM_ALIAS(create_ep);

void sr_rdma_destroy_ep(struct rdma_cm_id *rid)
{
	if (cm_id_check(rid) < 0)
		return;
	if (rid->qp)
		sr_rdma_destroy_qp(rid);
	if (rid->srq)
		sr_rdma_destroy_srq(rid);
	sr_rdma_destroy_id(rid);
}
CM_ALIAS(destroy_ep);

int sr_rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct cm_id *lis = (struct cm_id *)listen;
	int e = cm_id_check(listen);
	if (e < 0)
		return fail(-e);
	if (!out || !lis->sync)
		return fail(EINVAL);
	if (listen->event) {
		sr_rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	struct rdma_cm_event *event;
	int ret = sr_rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->status) {
		ret = fail(event->status < 0 ? -event->status : event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = fail(EINVAL);
		goto err;
	}
	if (lis->ep_attr) {
		struct ibv_qp_init_attr attr = *lis->ep_attr;
		if (attr.qp_type == IBV_QPT_XRC_RECV)
			event->id->qp_type = attr.qp_type;
		/* The listener's PD, as librdmacm; but a listener that takes both transports
		 * (cm.h "Which transport") has RoCE's default PD: an iWARP request gets its own
		 * device's. */
		struct ibv_pd *pd = listen->pd;
		if (pd && pd->context != event->id->verbs && lis->dev && pd == lis->dev->pd)
			pd = NULL;
		ret = sr_rdma_create_qp(event->id, pd, &attr);
		if (ret)
			goto err;
	}
	*out = event->id;
	(*out)->event = event;
	return 0;
err:
	listen->event = event;
	return ret;
}
CM_ALIAS(get_request);
