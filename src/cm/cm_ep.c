/* rdma_getaddrinfo and the endpoint calls built on the rest (librdmacm semantics):
 * rdma_create_ep / rdma_destroy_ep / rdma_get_request, with synchronous ids (no channel: every
 * call waits for its event). */
#define _GNU_SOURCE
#include "cm/cm.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int fail(int err)
{
	errno = err;
	return -1;
}

/* rdma_getaddrinfo, as librdmacm's (addrinfo.c): node and service through getaddrinfo(3) (names
 * too: /etc/hosts, DNS; libfabric's verbs provider asks for "localhost"), with hints made from
 * the rdma hints (RAI_PASSIVE -> AI_PASSIVE, RAI_NUMERICHOST -> AI_NUMERICHOST, the family,
 * the socket type of the QP type, the protocol of the port space); the first address comes
 * back as the source (RAI_PASSIVE) or the destination, the QP type and port space from the
 * hints or else from the address's socket type / protocol. Without node and service, the
 * hints' addresses and types are taken as they are. The hints' source address goes with the
 * result when it has none. Errors: librdmacm's -1 with errno EINVAL (no node, service or
 * hints) or ENOMEM, or getaddrinfo's EAI_ code; for the latter errno is set too, to the
 * nearest errno (EAI_SYSTEM: getaddrinfo's own), as librdmacm's callers read it (libfabric:
 * `if (errno) ret = -errno`) and librdmacm leaves whatever getaddrinfo left there. No AF_IB
 * (no InfiniBand addressing here): EAI_FAMILY. */

static const struct rdma_addrinfo no_hints;

static void to_ai_hints(const struct rdma_addrinfo *h, struct addrinfo *ai)
{
	memset(ai, 0, sizeof(*ai));
	if (h->ai_flags & RAI_PASSIVE)
		ai->ai_flags |= AI_PASSIVE;
	if (h->ai_flags & RAI_NUMERICHOST)
		ai->ai_flags |= AI_NUMERICHOST;
	ai->ai_family = h->ai_family;
	switch (h->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		ai->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		ai->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (h->ai_port_space) {
	case RDMA_PS_TCP:
		ai->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		ai->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		ai->ai_protocol = ai->ai_socktype == SOCK_STREAM  ? IPPROTO_TCP
				  : ai->ai_socktype == SOCK_DGRAM ? IPPROTO_UDP
								  : 0;
		break;
	default:
		break;
	}
}

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
		     socklen_t len)
{
	*dst = malloc(len);
	if (!*dst)
		return fail(ENOMEM);
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

/* A getaddrinfo error, with errno set to the nearest errno. */
static int eai(int code)
{
	switch (code) {
	case EAI_SYSTEM:
		break; /* errno is getaddrinfo's */
	case EAI_MEMORY:
		errno = ENOMEM;
		break;
	case EAI_AGAIN:
		errno = EAGAIN;
		break;
	case EAI_FAMILY:
	case EAI_ADDRFAMILY:
		errno = EAFNOSUPPORT;
		break;
	case EAI_SERVICE:
	case EAI_BADFLAGS:
	case EAI_SOCKTYPE:
		errno = EINVAL;
		break;
	default: /* EAI_NONAME, EAI_NODATA, EAI_FAIL: no such host */
		errno = ENOENT;
		break;
	}
	return code;
}

int sr_rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints,
			struct rdma_addrinfo **res)
{
	if (!res || (!node && !service && !hints))
		return fail(EINVAL);
	if (!hints)
		hints = &no_hints;
	if (hints->ai_family == AF_IB)
		return eai(EAI_FAMILY);
	struct rdma_addrinfo *rai = calloc(1, sizeof(*rai));
	if (!rai)
		return fail(ENOMEM);
	int ret = 0;
	if (node || service) {
		struct addrinfo ah, *ai;
		to_ai_hints(hints, &ah);
		int r = getaddrinfo(node, service, hints == &no_hints ? NULL : &ah, &ai);
		if (r) {
			free(rai);
			return eai(r);
		}
		bool passive = hints->ai_flags & RAI_PASSIVE;
		rai->ai_flags = passive ? RAI_PASSIVE : 0;
		rai->ai_family = ai->ai_family;
		rai->ai_qp_type = hints->ai_qp_type		  ? hints->ai_qp_type
				  : ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD
								  : IBV_QPT_RC;
		rai->ai_port_space = hints->ai_port_space	      ? hints->ai_port_space
				     : ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP
								      : RDMA_PS_TCP;
		if (passive)
			ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr,
					ai->ai_addrlen);
		else
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr,
					ai->ai_addrlen);
		if (!ret && ai->ai_canonname) {
			char **cn = passive ? &rai->ai_src_canonname : &rai->ai_dst_canonname;
			*cn = strdup(ai->ai_canonname);
		}
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len && hints->ai_dst_addr)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr,
					hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len && hints->ai_src_addr)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (ret) {
		sr_rdma_freeaddrinfo(rai);
		return ret;
	}
	*res = rai;
	return 0;
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
