/* Devices, contexts and queries: one RoCEv2 device per network interface that has an IPv4
 * address (lo included), named roce_<interface>, and next to each an iWARP device,
 * iwarp_<interface>, with the same GID table (iWARP addresses peers by IP). GID table: the
 * interface's IPv4 addresses as IPv4-mapped IPv6, then its IPv6 addresses, all RoCEv2 GIDs
 * (DESIGN.md "Devices and addressing"). */
#define _GNU_SOURCE
#include "api/api.h"
#include "core/mgroup.h"
#include "util/mark.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#undef ibv_query_port
#undef ibv_reg_mr

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
/* Devices are never freed: an opened context may outlive ibv_free_device_list(). */
static struct sr_device *devices;

bool sr_gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(gid, prefix, 12) == 0;
}

/* rxe eth_mtu_int_to_enum: the largest IB MTU that fits the netdev MTU minus 80 bytes. */
static enum ibv_mtu mtu_from_netdev(unsigned mtu)
{
	unsigned room = mtu > 80 ? mtu - 80 : 0;
	if (room >= 4096)
		return IBV_MTU_4096;
	if (room >= 2048)
		return IBV_MTU_2048;
	if (room >= 1024)
		return IBV_MTU_1024;
	if (room >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
}

static struct sr_device *find_device(const char *ifname)
{
	for (struct sr_device *d = devices; d; d = d->next)
		if (!d->iwarp && strcmp(d->ifname, ifname) == 0)
			return d;
	return NULL;
}

/* The device's sysfs and /dev names (ibv_device's dev_name, dev_path, ibdev_path). Under
 * `softrdma run`'s device view (src/tools/view.c) it has kernel-like entries:
 * /sys/class/infiniband/<name>, and /sys/class/infiniband_verbs/uverbsN, whose ibdev file
 * names it, with the character device /dev/infiniband/uverbsN; programs that look there
 * (UCX's device access check and GID types, pyverbs' tests) find it as they find the kernel's
 * devices. Without the view the paths lead nowhere and dev_name stays softrdma_<...>. */
static void set_paths(struct sr_device *d)
{
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path), "/nonexistent/softrdma/%s",
		 d->ibdev.name);
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "/nonexistent/softrdma/%s",
		 d->ibdev.name);
	DIR *dir = opendir("/sys/class/infiniband_verbs");
	if (!dir)
		return;
	struct dirent *e;
	while ((e = readdir(dir))) {
		char path[512], ibdev[IBV_SYSFS_NAME_MAX + 2];
		if (strncmp(e->d_name, "uverbs", 6) != 0 ||
		    strlen(e->d_name) >= sizeof(d->ibdev.dev_name))
			continue;
		snprintf(path, sizeof(path), "/sys/class/infiniband_verbs/%s/ibdev", e->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		bool match = fgets(ibdev, sizeof(ibdev), f) &&
			     strcspn(ibdev, "\n") == strlen(d->ibdev.name) &&
			     strncmp(ibdev, d->ibdev.name, strlen(d->ibdev.name)) == 0;
		fclose(f);
		if (!match)
			continue;
		snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "%s", e->d_name);
		snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
			 "/sys/class/infiniband_verbs/%s", e->d_name);
		snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
			 "/sys/class/infiniband/%s", d->ibdev.name);
		break;
	}
	closedir(dir);
}

/* Gives every RoCE device an iWARP twin right after it (created once, refreshed at every
 * scan: the twin's addresses are the RoCE device's, so the two never disagree). */
static void add_iwarp_twins(void)
{
	for (struct sr_device *d = devices; d; d = d->next) {
		if (d->iwarp)
			continue;
		struct sr_device *t = d->next;
		if (!t || !t->iwarp || strcmp(t->ifname, d->ifname) != 0) {
			t = calloc(1, sizeof(*t));
			if (!t)
				return;
			snprintf(t->ifname, sizeof(t->ifname), "%s", d->ifname);
			t->iwarp = true;
			t->ibdev.node_type = IBV_NODE_RNIC;
			t->ibdev.transport_type = IBV_TRANSPORT_IWARP;
			snprintf(t->ibdev.name, sizeof(t->ibdev.name), "iwarp_%s", d->ifname);
			snprintf(t->ibdev.dev_name, sizeof(t->ibdev.dev_name), "softrdma_iw_%s",
				 d->ifname);
			set_paths(t);
			t->next = d->next;
			d->next = t;
		}
		t->netdev_mtu = d->netdev_mtu;
		t->max_mtu = d->max_mtu;
		/* A distinct GUID: tools key devices by it. */
		t->guid = d->guid ^ htobe64(1ull << 57);
		memcpy(t->gid, d->gid, sizeof(t->gid));
		t->ngid = d->ngid;
		t->first_v4 = d->first_v4;
		d = t;
	}
}

static void add_gid(struct sr_device *d, const uint8_t gid[16])
{
	for (int i = 0; i < d->ngid; i++)
		if (memcmp(d->gid[i], gid, 16) == 0)
			return;
	if (d->ngid < SR_MAX_GID)
		memcpy(d->gid[d->ngid++], gid, 16);
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

static void fill_link_info(struct sr_device *d)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	uint64_t guid = 0;
	d->netdev_mtu = 1500;
	if (fd >= 0) {
		memset(&ifr, 0, sizeof(ifr));
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", d->ifname);
		if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
			d->netdev_mtu = (unsigned)ifr.ifr_mtu;
		if (ioctl(fd, SIOCGIFHWADDR, &ifr) == 0) {
			const uint8_t *m = (const uint8_t *)ifr.ifr_hwaddr.sa_data;
			/* EUI-64 from the MAC, as rxe derives its node GUID. */
			uint8_t e[8] = {m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]};
			if (m[0] | m[1] | m[2] | m[3] | m[4] | m[5])
				for (int i = 0; i < 8; i++)
					guid = guid << 8 | e[i];
		}
		close(fd);
	}
	if (!guid) /* no MAC (lo): a stable value from the name */
		guid = fnv1a(d->ifname) | 1;
	d->guid = htobe64(guid);
	d->max_mtu = mtu_from_netdev(d->netdev_mtu);
}

static void scan_interfaces(void)
{
	struct ifaddrs *ifa_list;
	if (getifaddrs(&ifa_list) != 0)
		return;
	/* Pass 1: IPv4 (a device exists per interface with an IPv4 address), pass 2: IPv6. */
	for (int pass = 0; pass < 2; pass++) {
		for (struct ifaddrs *ifa = ifa_list; ifa; ifa = ifa->ifa_next) {
			if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
				continue;
			uint8_t gid[16] = {0};
			if (pass == 0 && ifa->ifa_addr->sa_family == AF_INET) {
				gid[10] = gid[11] = 0xff;
				memcpy(gid + 12, &((struct sockaddr_in *)ifa->ifa_addr)->sin_addr,
				       4);
			} else if (pass == 1 && ifa->ifa_addr->sa_family == AF_INET6) {
				memcpy(gid, &((struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr, 16);
			} else {
				continue;
			}
			struct sr_device *d = find_device(ifa->ifa_name);
			if (!d) {
				if (pass == 1)
					continue; /* data path is IPv4 for now */
				d = calloc(1, sizeof(*d));
				if (!d)
					continue;
				snprintf(d->ifname, sizeof(d->ifname), "%s", ifa->ifa_name);
				d->ibdev.node_type = IBV_NODE_CA;
				d->ibdev.transport_type = IBV_TRANSPORT_IB;
				snprintf(d->ibdev.name, sizeof(d->ibdev.name), "roce_%s",
					 ifa->ifa_name);
				snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name),
					 "softrdma_%s", ifa->ifa_name);
				set_paths(d);
				d->first_v4 = -1;
				fill_link_info(d);
				struct sr_device **tail = &devices;
				while (*tail)
					tail = &(*tail)->next;
				*tail = d;
			}
			if (pass == 0 && d->first_v4 < 0)
				d->first_v4 = d->ngid;
			add_gid(d, gid);
		}
	}
	freeifaddrs(ifa_list);
}

struct sr_device *sr_device_list(int *n)
{
	pthread_mutex_lock(&devices_lock);
	scan_interfaces();
	add_iwarp_twins();
	int count = 0;
	for (struct sr_device *d = devices; d; d = d->next)
		count++;
	pthread_mutex_unlock(&devices_lock);
	*n = count;
	return devices;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	int n;
	struct sr_device *d = sr_device_list(&n);
	struct ibv_device **list = calloc((size_t)n + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < n && d; i++, d = d->next)
		list[i] = &d->ibdev;
	if (num_devices)
		*num_devices = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

__be64 ibv_get_device_guid(struct ibv_device *device)
{
	return ((struct sr_device *)device)->guid;
}

int sr_device_query_gid(const struct sr_device *dev, int index, uint8_t gid[16])
{
	if (index < 0 || index >= dev->ngid)
		return -EINVAL;
	memcpy(gid, dev->gid[index], 16);
	return 0;
}

/* ---- queries ---- */

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
	struct sr_device *dev = sr_ctx(context)->dev;
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "softrdma 0.1");
	a->node_guid = dev->guid;
	a->sys_image_guid = dev->guid;
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0xFFFFFF; /* as rxe: perftest then takes the portable verbs path */
	a->vendor_part_id = 0;
	a->max_qp = CORE_MAX_QP - 1;
	a->max_qp_wr = SR_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_XRC | /* RoCE: XRC domains, SRQs and QPs (xrc.c) */
			      /* memory windows, type 1 and 2B, as rxe (Linux 6.1) reports them */
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	a->max_sge = ENG_MAX_SGE;
	a->max_sge_rd = ENG_MAX_SGE;
	a->max_cq = 16384;
	a->max_cqe = SR_MAX_CQE - 1;
	a->max_mr = SR_MAX_MR - 1;
	a->max_mw = SR_MAX_MW - 1;
	a->max_pd = 65536;
	a->max_qp_rd_atom = ENG_MAX_RD_ATOMIC;
	a->max_res_rd_atom = (CORE_MAX_QP - 1) * ENG_MAX_RD_ATOMIC;
	a->max_qp_init_rd_atom = ENG_MAX_RD_ATOMIC;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_srq = 16384;
	a->max_srq_wr = SR_MAX_QP_WR;
	a->max_srq_sge = ENG_MAX_SGE;
	a->max_pkeys = 1;
	a->max_ah = CORE_MAX_AH; /* UD address handles (core.h) */
	/* UD multicast, with rxe's limits (core/mgroup.h; mcast.c) */
	a->max_mcast_grp = CORE_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = CORE_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = CORE_MAX_TOTAL_MCAST_QP_ATTACH;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	if (dev->iwarp) {
		/* As siw: no atomics (RFC 7306 is not implemented), ORD/IRD from the engine. */
		a->device_cap_flags = IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_SYS_IMAGE_GUID;
		a->max_sge_rd = IW_MAX_SGE_RD;
		a->max_qp_rd_atom = IW_MAX_ORD;
		a->max_qp_init_rd_atom = IW_MAX_ORD;
		a->max_res_rd_atom = (CORE_MAX_QP - 1) * IW_MAX_IRD;
		a->atomic_cap = IBV_ATOMIC_NONE;
		a->max_ah = 0;	      /* connected only: no UD */
		a->max_mw = 0;	      /* no memory windows (siw has none) */
		a->max_mcast_grp = 0; /* no multicast (siw has none) */
		a->max_mcast_qp_attach = 0;
		a->max_total_mcast_qp_attach = 0;
	}
	return 0;
}

static int query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	if (in && in->comp_mask)
		return EINVAL;
	struct ibv_device_attr_ex full;
	memset(&full, 0, sizeof(full));
	ibv_query_device(context, &full.orig_attr);
	full.phys_port_cnt_ex = 1;
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	return 0;
}

static void fill_port(const struct sr_device *dev, struct ibv_port_attr *p)
{
	memset(p, 0, sizeof(*p));
	p->state = IBV_PORT_ACTIVE;
	p->max_mtu = dev->max_mtu;
	p->active_mtu = dev->max_mtu;
	p->gid_tbl_len = dev->ngid;
	p->port_cap_flags = IBV_PORT_CM_SUP;
	p->max_msg_sz = ENG_MAX_MSG_SIZE;
	p->pkey_tbl_len = 1;
	p->lid = 0;
	p->max_vl_num = 1;
	p->active_width = 2; /* 4X */
	p->active_speed = 1; /* reported like rxe: not a real link rate */
	p->phys_state = 5;   /* LinkUp */
	p->link_layer = IBV_LINK_LAYER_ETHERNET;
}

static int query_port_op(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr,
			 size_t len)
{
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr full;
	fill_port(sr_ctx(context)->dev, &full);
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

/* Exported for old binaries: the caller's struct may be the 48-byte legacy layout. */
int ibv_query_port(struct ibv_context *context, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	/* The legacy struct is ibv_port_attr up to and including `flags` (verbs-abi.md 3.2). */
	return query_port_op(context, port, (struct ibv_port_attr *)attr,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

int ibv_query_gid(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid)
{
	if (port != 1 || sr_device_query_gid(sr_ctx(context)->dev, index, gid->raw) < 0)
		return -1; /* rdma-core returns -1 here */
	return 0;
}

int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	if (port != 1 || flags || entry_size < sizeof(*entry))
		return EINVAL;
	struct sr_device *dev = sr_ctx(context)->dev;
	if (index >= (uint32_t)dev->ngid)
		return ENODATA;
	memset(entry, 0, entry_size);
	memcpy(entry->gid.raw, dev->gid[index], 16);
	entry->gid_index = index;
	entry->port_num = 1;
	/* iWARP GIDs are plain addresses (siw reports them as IB type). */
	entry->gid_type = dev->iwarp ? IBV_GID_TYPE_IB : IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = if_nametoindex(dev->ifname);
	return 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port, int index, __be16 *pkey)
{
	(void)context;
	if (port != 1 || index != 0)
		return EINVAL;
	*pkey = htobe16(ROCE_DEFAULT_PKEY);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port, __be16 pkey)
{
	(void)context;
	if (port != 1 || be16toh(pkey) != ROCE_DEFAULT_PKEY)
		return -1;
	return 0;
}

/* ---- open / close ---- */

/* Defined in verbs.c: the ibv_context_ops slots. */
void sr_fill_ops(struct sr_context *ctx);

__thread bool sr_cm_opening;

/* The interface's speed in bit/s from /sys/class/net/IF/speed (Mbit/s), 0 when it tells none
 * (lo, or -1 for a link that is down). */
static uint64_t netdev_speed(const char *ifname)
{
	char path[64 + IF_NAMESIZE];
	long mbps = 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%ld", &mbps) != 1 || mbps <= 0 || mbps > 10000000)
		mbps = 0;
	fclose(f);
	return (uint64_t)mbps * 1000000u;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct sr_device *dev = (struct sr_device *)device;
	int ret;
	if (!dev || dev->first_v4 < 0) {
		errno = ENODEV;
		return NULL;
	}
	struct sr_context *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->dev = dev;
	ret = obj_mr_table_init(&ctx->mrs, SR_MAX_MR);
	if (ret < 0)
		goto free_ctx;
	ret = obj_mw_table_init(&ctx->mws, SR_MAX_MW);
	if (ret < 0)
		goto fini_mrs;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		ret = -errno;
		goto fini_mws;
	}
	ctx->async_wfd = fds[1];

	struct core_config cfg = {0};
	memcpy(cfg.local_addr, dev->gid[dev->first_v4], 16);
	/* The first IPv6 GID that is not link-local (those need a scope): IPv6 QPs use it. */
	for (int i = 0; i < dev->ngid; i++) {
		const uint8_t *g = dev->gid[i];
		if (!sr_gid_is_v4(g) && !(g[0] == 0xfe && (g[1] & 0xc0) == 0x80)) {
			memcpy(cfg.local_addr6, g, 16);
			cfg.has_v6 = true;
			break;
		}
	}
	/* SOFTRDMA_PROGRESS_THREAD=0: no progress thread; only calls into the library move
	 * packets (for applications that always poll; passive RDMA targets then stall). */
	const char *pt = getenv("SOFTRDMA_PROGRESS_THREAD");
	cfg.no_thread = pt && !strcmp(pt, "0");
	cfg.ifindex = (int)if_nametoindex(dev->ifname); /* multicast joins and sends */
	const char *port = getenv("SOFTRDMA_UDP_PORT");
	if (port && *port) {
		/* A port, or the open fails: 70000 wrapped to 4464 before, silently. */
		char *end;
		errno = 0;
		unsigned long v = strtoul(port, &end, 10);
		if (!isdigit((unsigned char)port[0]) || errno || *end || v == 0 || v > 65535) {
			fprintf(stderr,
				"softrdma: SOFTRDMA_UDP_PORT=%s is not a UDP port (1..65535)\n",
				port);
			ret = -EINVAL;
			goto close_pipe;
		}
		cfg.port = (uint16_t)v;
	}
	/* SOFTRDMA_SR: 1 (the default) offers selective repeat to softrdma peers, 0 keeps
	 * go-back-N (ibv_query_ece, compat.c). */
	const char *srv = getenv("SOFTRDMA_SR");
	if (srv && strcmp(srv, "0") && strcmp(srv, "1")) {
		fprintf(stderr,
			"softrdma: SOFTRDMA_SR=%s: 1 (selective repeat with softrdma peers, "
			"the default) or 0 (go-back-N)\n",
			srv);
		ret = -EINVAL;
		goto close_pipe;
	}
	ctx->no_sr = srv && !strcmp(srv, "0");
	/* SOFTRDMA_DSCP, SOFTRDMA_ECN (util/mark.h): a mistyped one fails the open. */
	ret = mark_config(&cfg.dscp, &cfg.ecn);
	if (ret < 0)
		goto close_pipe;
	if (cfg.ecn) {
		/* DCQCN for every connected QP: the NICs' defaults at the interface's speed (25
		 * Gbit/s where it tells none, as lo), then SOFTRDMA_DCQCN's changes. */
		uint64_t speed = netdev_speed(dev->ifname);
		const char *spec = getenv("SOFTRDMA_DCQCN");
		char why[160];
		dcqcn_params_default(&cfg.cc, speed ? speed : CC_DEFAULT_LINE_RATE);
		if (dcqcn_params_parse(&cfg.cc, spec, why, sizeof(why)) < 0) {
			fprintf(stderr, "softrdma: SOFTRDMA_DCQCN=%s: %s\n", spec, why);
			ret = -EINVAL;
			goto close_pipe;
		}
	}
	ret = core_ctx_create(&cfg, &ctx->core);
	if (ret < 0)
		goto close_pipe;

	struct ibv_context *ic = &ctx->vctx.context;
	ic->device = device;
	/* No kernel command channel, but a real descriptor: programs dup or poll the context's
	 * cmd_fd (pyverbs' shared-PD test dups it to import the device, which then fails
	 * cleanly with EOPNOTSUPP). */
	ic->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	ic->async_fd = fds[0];
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->abi_compat = (void *)UINTPTR_MAX; /* marks a verbs_context (verbs.h) */
	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.query_port = query_port_op;
	ctx->vctx.query_device_ex = query_device_ex;
	sr_fill_ops(ctx);
	if (dev->iwarp) {
		ret = sr_iw_open(ctx); /* binds nothing either: listen/connect do */
		if (ret < 0) {
			core_ctx_destroy(ctx->core);
			pthread_mutex_destroy(&ic->mutex);
			if (ic->cmd_fd >= 0)
				close(ic->cmd_fd);
			goto close_pipe;
		}
	}
	ctx->app = !sr_cm_opening;
	if (ctx->app)
		__atomic_add_fetch(&dev->app_opens, 1, __ATOMIC_RELAXED);
	return ic;

close_pipe:
	close(fds[0]);
	close(fds[1]);
fini_mws:
	obj_mw_table_fini(&ctx->mws);
fini_mrs:
	obj_mr_table_fini(&ctx->mrs);
free_ctx:
	free(ctx);
	errno = -ret;
	return NULL;
}

static void print_nonzero(void *arg, const char *name, uint64_t v)
{
	if (v)
		fprintf(arg, " %s=%llu", name, (unsigned long long)v);
}

int ibv_close_device(struct ibv_context *context)
{
	struct sr_context *ctx = sr_ctx(context);
	if (getenv("SOFTRDMA_STATS") && core_started(ctx->core)) {
		core_lock(ctx->core);
		core_dump_counters(ctx->core, stderr);
		core_unlock(ctx->core);
	}
	if (getenv("SOFTRDMA_STATS") && ctx->iwp) {
		fprintf(stderr, "softrdma: iWARP context:");
		core_lock(ctx->core);
		iwp_each_counter(ctx->iwp, print_nonzero, stderr);
		core_unlock(ctx->core);
		fprintf(stderr, "\n");
	}
	if (ctx->iwp)
		sr_iw_close(ctx);
	if (ctx->app)
		__atomic_sub_fetch(&ctx->dev->app_opens, 1, __ATOMIC_RELAXED);
	core_ctx_destroy(ctx->core);
	if (context->cmd_fd >= 0)
		close(context->cmd_fd);
	close(context->async_fd);
	close(ctx->async_wfd);
	obj_mw_table_fini(&ctx->mws);
	obj_mr_table_fini(&ctx->mrs);
	free(ctx->qp_tab);
	pthread_mutex_destroy(&context->mutex);
	free(ctx);
	return 0;
}
