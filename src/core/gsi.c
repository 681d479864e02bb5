/* GSI (QP1): CM MADs between the wire and the softrdma processes of this host (gsi.h). */
#define _GNU_SOURCE
#include "core/gsi.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/core.h"
#include "io/rundir.h"
#include "util/sys.h"

#define FRAME_MAGIC   "SGSI"
#define FRAME_VERSION 1
#define FRAME_HDR     44
#define TAG_ATTEMPTS  64
#define SOCK_RCVBUF   (256 * 1024)

static void name_sid(char *buf, size_t n, uint64_t sid)
{
	snprintf(buf, n, "softrdma-cm-sid-%016llx", (unsigned long long)sid);
}

static void name_tag(char *buf, size_t n, uint16_t tag)
{
	snprintf(buf, n, "softrdma-cm-tag-%04x", tag);
}

static int ep_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int one = 1, rcv = SOCK_RCVBUF;
	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	return fd;
}

static int ep_bind(const char *name)
{
	int fd = ep_socket();
	if (fd < 0)
		return fd;
	int err = rundir_bind(fd, name);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int gsi_ep_open_tag(uint16_t *tag)
{
	rundir_sweep(); /* names of processes that died without closing theirs */
	for (int i = 0; i < TAG_ATTEMPTS; i++) {
		uint16_t t = 0;
		if (getrandom(&t, sizeof(t), GRND_NONBLOCK) != (ssize_t)sizeof(t))
			t = (uint16_t)(getpid() * 7919u + (unsigned)i * 104729u);
		if (t == 0 || t == 0xFFFF)
			continue;
		char name[64];
		name_tag(name, sizeof(name), t);
		int fd = ep_bind(name);
		if (fd == -EADDRINUSE)
			continue;
		if (fd >= 0)
			*tag = t;
		return fd;
	}
	return -EADDRINUSE;
}

int gsi_ep_open_sid(uint64_t sid)
{
	char name[64];
	name_sid(name, sizeof(name), sid);
	return ep_bind(name);
}

void gsi_ep_close(int fd)
{
	rundir_close(fd);
}

bool gsi_tag_alive(uint16_t tag)
{
	char name[64];
	struct sockaddr_un sa;
	socklen_t len;
	name_tag(name, sizeof(name), tag);
	if (rundir_sockaddr(name, &sa, &len) != 0)
		return true;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true;
	int r = connect(fd, (struct sockaddr *)&sa, len);
	int e = errno;
	close(fd);
	return r == 0 || (e != ECONNREFUSED && e != ENOENT);
}

int gsi_ep_recv(int fd, struct gsi_frame *f)
{
	uint8_t buf[GSI_FRAME_LEN + 1];
	union {
		struct cmsghdr h;
		uint8_t b[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.b,
			    .msg_controllen = sizeof(ctl.b)};
	ssize_t n = sys_recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	bool trusted = false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
		    c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
			struct ucred cr;
			memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			trusted = cr.uid == 0 || cr.uid == geteuid();
		}
	}
	if (!trusted || (mh.msg_flags & MSG_TRUNC) || n != GSI_FRAME_LEN ||
	    memcmp(buf, FRAME_MAGIC, 4) != 0 || buf[4] != FRAME_VERSION || (buf[5] & ~1u))
		return -EBADMSG;
	f->ipv6 = buf[5] & 1;
	f->sport = (uint16_t)(buf[6] << 8 | buf[7]);
	memcpy(f->src, buf + 8, 16);
	memcpy(f->dst, buf + 24, 16);
	f->tos = buf[40];
	memcpy(f->mad, buf + FRAME_HDR, CM_MAD_LEN);
	return 1;
}

/* ---- routing (progress thread) ---- */

static pthread_once_t fwd_once = PTHREAD_ONCE_INIT;
static int fwd_fd = -1;

static void fwd_init(void)
{
	fwd_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* Sends f to the endpoint called name. 0 or a negative errno (-ECONNREFUSED: nobody there). */
static int forward(const char *name, const struct gsi_frame *f)
{
	pthread_once(&fwd_once, fwd_init);
	if (fwd_fd < 0)
		return -EMFILE;
	uint8_t buf[GSI_FRAME_LEN];
	memset(buf, 0, FRAME_HDR);
	memcpy(buf, FRAME_MAGIC, 4);
	buf[4] = FRAME_VERSION;
	buf[5] = f->ipv6 ? 1 : 0;
	buf[6] = (uint8_t)(f->sport >> 8);
	buf[7] = (uint8_t)f->sport;
	memcpy(buf + 8, f->src, 16);
	memcpy(buf + 24, f->dst, 16);
	buf[40] = f->tos;
	memcpy(buf + FRAME_HDR, f->mad, CM_MAD_LEN);
	struct sockaddr_un sa;
	socklen_t len;
	int err = rundir_sockaddr(name, &sa, &len);
	if (err)
		return err;
	ssize_t n = sys_sendto(fwd_fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL,
			       (struct sockaddr *)&sa, len);
	if (n == (ssize_t)sizeof(buf))
		return 0;
	/* A name no socket has (any more) is "nobody there", as for an abstract name. */
	return n >= 0 ? -EIO : errno == ENOENT ? -ECONNREFUSED : -errno;
}

/* The kernel CM's answer to a MAD for nobody (cm_issue_rej, cm_issue_drep and the SIDR
 * "unsupported" reply), sent back where the MAD came from. */
static void answer_for_nobody(struct core_ctx *c, const struct gsi_frame *f)
{
	struct cm_mad in, out;
	if (cm_mad_parse(f->mad, CM_MAD_LEN, &in) != 0 || cm_mad_answer_nobody(&in, &out) != 0)
		return;
	struct gsi_frame r = {.ipv6 = f->ipv6, .sport = 0, .tos = (uint8_t)(f->tos & 0xFC)};
	memcpy(r.src, f->dst, 16);
	memcpy(r.dst, f->src, 16);
	if (cm_mad_build(&out, r.mad) != CM_MAD_LEN)
		return;
	if (core_gsi_send(c, &r) == 0)
		core_gsi_count(c, CORE_CNT_gsi_answered);
}

void gsi_route(struct core_ctx *c, const struct io_pkt *p, const struct roce_pkt *pkt)
{
	/* QP1 takes CM MADs only: a UD SEND ONLY with the GSI Q_Key and a 256-byte MAD of the
	 * CM class (IBTA 13.5: the GSI drops the rest). */
	const uint8_t *m = pkt->payload;
	if (pkt->bth.opcode != ROCE_UD_SEND_ONLY || pkt->deth.qkey != ROCE_GSI_QKEY ||
	    pkt->payload_len != CM_MAD_LEN || m[0] != CM_MAD_BASE_VERSION || m[1] != CM_MAD_CLASS ||
	    m[3] != CM_MAD_METHOD_SEND) {
		core_gsi_count(c, CORE_CNT_gsi_rx_dropped);
		return;
	}
	struct gsi_frame f = {.ipv6 = p->ipv6, .sport = p->sport, .tos = p->tos};
	memcpy(f.src, p->src, 16);
	memcpy(f.dst, p->dst, 16);
	memcpy(f.mad, m, CM_MAD_LEN);
	int r = gsi_deliver(&f);
	if (r == 0) {
		core_gsi_count(c, CORE_CNT_gsi_routed);
	} else if (r == -ECONNREFUSED || r == -ENOENT) {
		core_gsi_count(c, CORE_CNT_gsi_no_target);
		answer_for_nobody(c, &f);
	} else if (r == -EINVAL) {
		core_gsi_count(c, CORE_CNT_gsi_rx_dropped);
	} else {
		core_gsi_count(c, CORE_CNT_gsi_fwd_errors);
	}
}

int gsi_deliver(const struct gsi_frame *f)
{
	uint16_t attr;
	uint64_t sid;
	uint32_t id;
	cm_mad_route_key(f->mad, &attr, &sid, &id);
	char name[64];
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ) {
		name_sid(name, sizeof(name), sid);
	} else {
		if (id >> 16 == 0)
			return -EINVAL;
		name_tag(name, sizeof(name), (uint16_t)(id >> 16));
	}
	return forward(name, f);
}
