/* A program that looks for its RDMA devices the way the kernel exposes them, to run under
 * `softrdma run` (tests/e2e/test_run_view.sh compiles it against rdma-core's libibverbs, so
 * that softrdma's drop-in replaces it): for every device of ibv_get_device_list() it checks
 *  - dev_name, dev_path and ibdev_path: uverbs<n>, /sys/class/infiniband_verbs/uverbs<n>,
 *    /sys/class/infiniband/<name>, and uverbs<n>/ibdev naming the device;
 *  - /dev/infiniband/<dev_name>: a character device, readable and writable (UCX's test);
 *  - the sysfs files against what verbs reports: node_type, node_guid, port state, link layer,
 *    every GID (gids/<i>), its type (gid_attrs/types/<i>: "RoCE v2" or "IB/RoCE v1") and its
 *    network device (gid_attrs/ndevs/<i>), and device/net/<netdev> (pyverbs' tests).
 * Prints "view_probe: <name> OK" per device, or each mismatch; exit 0 if all were right and at
 * least one device exists, 1 otherwise. */
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int bad;

static void mismatch(const char *dev, const char *what, const char *got, const char *want)
{
	printf("view_probe: %s: %s is '%s', not '%s'\n", dev, what, got, want);
	bad++;
}

/* The first line of dir/file, without its newline ("" when missing). */
static const char *line(const char *dir, const char *file, char *buf, size_t len)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	buf[0] = 0;
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	return buf;
}

static void expect(const char *dev, const char *dir, const char *file, const char *want)
{
	char got[256];
	if (strcmp(line(dir, file, got, sizeof(got)), want))
		mismatch(dev, file, got, want);
}

static void check_device(struct ibv_device *d, int n)
{
	const char *name = ibv_get_device_name(d);
	char want[512], got[256];
	int before = bad;
	snprintf(want, sizeof(want), "uverbs%d", n);
	if (strcmp(d->dev_name, want))
		mismatch(name, "dev_name", d->dev_name, want);
	snprintf(want, sizeof(want), "/sys/class/infiniband_verbs/%s", d->dev_name);
	if (strcmp(d->dev_path, want))
		mismatch(name, "dev_path", d->dev_path, want);
	snprintf(want, sizeof(want), "/sys/class/infiniband/%s", name);
	if (strcmp(d->ibdev_path, want))
		mismatch(name, "ibdev_path", d->ibdev_path, want);
	expect(name, d->dev_path, "ibdev", name);

	struct stat st;
	snprintf(want, sizeof(want), "/dev/infiniband/%s", d->dev_name);
	if (stat(want, &st) || !S_ISCHR(st.st_mode) || access(want, R_OK | W_OK))
		mismatch(name, want, "missing or not an accessible character device", "accessible");

	struct ibv_context *ctx = ibv_open_device(d);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	if (!ctx || ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa)) {
		mismatch(name, "ibv_open_device / query", "failed", "ok");
		if (ctx)
			ibv_close_device(ctx);
		return;
	}
	const char *ib = d->ibdev_path;
	snprintf(want, sizeof(want), "%d: %s", d->node_type,
		 d->node_type == IBV_NODE_CA	 ? "CA"
		 : d->node_type == IBV_NODE_RNIC ? "RNIC"
						 : "?");
	expect(name, ib, "node_type", want);
	uint64_t g = be64toh(da.node_guid);
	snprintf(want, sizeof(want), "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
	expect(name, ib, "node_guid", want);
	snprintf(want, sizeof(want), "%d: %s", pa.state,
		 pa.state == IBV_PORT_ACTIVE ? "ACTIVE" : "?");
	expect(name, ib, "ports/1/state", want);
	expect(name, ib, "ports/1/link_layer",
	       pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		char file[64], ndev[IF_NAMESIZE] = "";
		if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0))
			continue;
		const uint8_t *r = e.gid.raw;
		char *p = want;
		for (int k = 0; k < 16; k += 2)
			p += sprintf(p, "%s%02x%02x", k ? ":" : "", r[k], r[k + 1]);
		snprintf(file, sizeof(file), "ports/1/gids/%d", i);
		expect(name, ib, file, want);
		snprintf(file, sizeof(file), "ports/1/gid_attrs/types/%d", i);
		expect(name, ib, file,
		       e.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
		if (!if_indextoname(e.ndev_ifindex, ndev))
			continue;
		snprintf(file, sizeof(file), "ports/1/gid_attrs/ndevs/%d", i);
		expect(name, ib, file, ndev);
		/* device/net/<netdev> leads to the host's network device (its address files). */
		snprintf(file, sizeof(file), "device/net/%s/address", ndev);
		if (!line(ib, file, got, sizeof(got))[0])
			mismatch(name, file, "missing", "the netdev's MAC address");
	}
	ibv_close_device(ctx);
	if (bad == before)
		printf("view_probe: %s OK (%s, %s)\n", name, d->dev_name, d->ibdev_path);
}

int main(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		printf("view_probe: no devices\n");
		return 1;
	}
	for (int i = 0; i < n; i++)
		check_device(list[i], i);
	ibv_free_device_list(list);
	return bad ? 1 : 0;
}
