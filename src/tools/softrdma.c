/* The softrdma command line: `softrdma devices [-v] [-d NAME]` lists the RDMA devices
 * softrdma offers on this machine, in the style of ibv_devinfo (written on the standard verbs
 * API only); `softrdma run -- PROGRAM` runs an unmodified RDMA program on softrdma (run.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "softrdma_version.h" /* generated: cmake/version.cmake */
#include "tools/tools.h"

static const char *const usage_text =
    "usage: softrdma <command> [options]\n"
    "\n"
    "commands:\n"
    "  devices [-v] [-d NAME]   list the RDMA devices softrdma offers (like ibv_devinfo)\n"
    "  run [--transport T] -- PROGRAM [ARGS]\n"
    "                           run an unmodified RDMA program on softrdma\n"
    "  lat [options] [SERVER]   latency test like perftest's ib_*_lat (SEND, WRITE, READ,\n"
    "                           atomics); without SERVER: act as the server\n"
    "  bw [options] [SERVER]    bandwidth test like perftest's ib_*_bw (the same verbs)\n"
    "  compare [options]        RoCEv2 against iWARP against raw UDP/TCP, measured in one\n"
    "                           run: a table, a JSON file and an HTML report\n"
    "  report RESULT.json       the HTML report of a compare result\n"
    "  switch [options]         hosts in network namespaces around a switch with a\n"
    "                           bottleneck, ECN marking and PFC (root)\n"
    "  version, --version       the version of softrdma\n"
    "\n"
    "Run 'softrdma <command> --help' for a command's options.\n";

static const char *const devices_usage =
    "usage: softrdma devices [-v] [-d NAME]\n"
    "\n"
    "Lists the devices of each network interface with an IPv4 address (lo included):\n"
    "roce_<if> (RoCEv2) and iwarp_<if> (iWARP over TCP).\n"
    "  -d, --device NAME   show only this device (e.g. roce_lo)\n"
    "  -v, --verbose       device limits and the GID table too\n"
    "  -h, --help          this text\n";

static int mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

static void print_guid(const char *label, __be64 be)
{
	uint64_t g = be64toh(be);
	printf("\t%-24s%04x:%04x:%04x:%04x\n", label, (unsigned)(g >> 48) & 0xffff,
	       (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

static int show_device(struct ibv_device *dev, int verbose)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx) {
		fprintf(stderr, "softrdma: cannot open %s: %s\n", ibv_get_device_name(dev),
			strerror(errno));
		return 1;
	}
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa)) {
		fprintf(stderr, "softrdma: cannot query %s\n", ibv_get_device_name(dev));
		ibv_close_device(ctx);
		return 1;
	}
	printf("hca_id:\t%s\n", ibv_get_device_name(dev));
	printf("\t%-24s%s (%d)\n", "transport:",
	       dev->transport_type == IBV_TRANSPORT_IB ? "InfiniBand (RoCEv2)" : "iWARP",
	       dev->transport_type);
	printf("\t%-24s%s\n", "fw_ver:", da.fw_ver);
	print_guid("node_guid:", da.node_guid);
	print_guid("sys_image_guid:", da.sys_image_guid);
	printf("\t%-24s0x%06x\n", "vendor_id:", da.vendor_id);
	printf("\t%-24s%u\n", "vendor_part_id:", da.vendor_part_id);
	printf("\t%-24s%d\n", "phys_port_cnt:", da.phys_port_cnt);
	if (verbose) {
		printf("\t%-24s%d\n", "max_qp:", da.max_qp);
		printf("\t%-24s%d\n", "max_qp_wr:", da.max_qp_wr);
		printf("\t%-24s%d\n", "max_sge:", da.max_sge);
		printf("\t%-24s%d\n", "max_cq:", da.max_cq);
		printf("\t%-24s%d\n", "max_cqe:", da.max_cqe);
		printf("\t%-24s%d\n", "max_mr:", da.max_mr);
		printf("\t%-24s%d\n", "max_pd:", da.max_pd);
		printf("\t%-24s%d\n", "max_qp_rd_atom:", da.max_qp_rd_atom);
		printf("\t%-24s%d\n", "max_qp_init_rd_atom:", da.max_qp_init_rd_atom);
		printf("\t%-24s%s\n", "atomic_cap:",
		       da.atomic_cap == IBV_ATOMIC_HCA ? "ATOMIC_HCA (1)" : "ATOMIC_NONE (0)");
		printf("\t%-24s%d\n", "max_srq:", da.max_srq);
		printf("\t%-24s%d\n", "max_srq_wr:", da.max_srq_wr);
	}
	printf("\t\tport:\t1\n");
	printf("\t\t\t%-16s%s (%d)\n", "state:", ibv_port_state_str(pa.state), pa.state);
	printf("\t\t\t%-16s%d (%d)\n", "max_mtu:", mtu_bytes(pa.max_mtu), pa.max_mtu);
	printf("\t\t\t%-16s%d (%d)\n", "active_mtu:", mtu_bytes(pa.active_mtu), pa.active_mtu);
	printf("\t\t\t%-16s%d\n", "port_lid:", pa.lid);
	printf("\t\t\t%-16s%s\n",
	       "link_layer:", pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	if (verbose) {
		for (int i = 0; i < pa.gid_tbl_len; i++) {
			union ibv_gid gid;
			struct ibv_gid_entry entry;
			char text[INET6_ADDRSTRLEN];
			if (ibv_query_gid(ctx, 1, i, &gid))
				continue;
			int v2 = ibv_query_gid_ex(ctx, 1, (uint32_t)i, &entry, 0) == 0 &&
				 entry.gid_type == IBV_GID_TYPE_ROCE_V2;
			inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
			printf("\t\t\tGID[%3d]:\t%s, %s\n", i, text, v2 ? "RoCE v2" : "RoCE v1");
		}
	}
	ibv_close_device(ctx);
	return 0;
}

static int cmd_devices(int argc, char **argv)
{
	static const struct option opts[] = {{"device", required_argument, NULL, 'd'},
					     {"verbose", no_argument, NULL, 'v'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	const char *want = NULL;
	int verbose = 0, c;
	while ((c = getopt_long(argc, argv, "d:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			want = optarg;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			fputs(devices_usage, stdout);
			return 0;
		default:
			fputs(devices_usage, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "softrdma devices: unexpected argument '%s'\n%s", argv[optind],
			devices_usage);
		return 2;
	}
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "softrdma: cannot list devices: %s\n", strerror(errno));
		return 1;
	}
	int ret = 0, shown = 0;
	for (int i = 0; i < n; i++) {
		if (want && strcmp(want, ibv_get_device_name(list[i])) != 0)
			continue;
		ret |= show_device(list[i], verbose);
		shown++;
	}
	if (want && !shown) {
		fprintf(stderr, "softrdma: no device named '%s' (", want);
		for (int i = 0; i < n; i++)
			fprintf(stderr, "%s%s", i ? ", " : "", ibv_get_device_name(list[i]));
		fprintf(stderr, "%s)\n", n ? "" : "none");
		ret = 1;
	} else if (!n) {
		fprintf(stderr, "softrdma: no network interface with an IPv4 address\n");
		ret = 1;
	}
	ibv_free_device_list(list);
	return ret;
}

static int cmd_version(void)
{
	/* The release, then where in the history it was built from, if it was a checkout. */
	if (SOFTRDMA_GIT_DESCRIBE[0])
		printf("softrdma %s (git %s)\n", SOFTRDMA_VERSION, SOFTRDMA_GIT_DESCRIBE);
	else
		printf("softrdma %s\n", SOFTRDMA_VERSION);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_text, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version"))
		return cmd_version();
	if (!strcmp(argv[1], "devices"))
		return cmd_devices(argc - 1, argv + 1);
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "lat"))
		return cmd_lat(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bw"))
		return cmd_bw(argc - 1, argv + 1);
	if (!strcmp(argv[1], "compare"))
		return cmd_compare(argc - 1, argv + 1);
	if (!strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	if (!strcmp(argv[1], "switch"))
		return cmd_switch(argc - 1, argv + 1);
	fprintf(stderr, "softrdma: unknown command '%s'\n\n%s", argv[1], usage_text);
	return 2;
}
