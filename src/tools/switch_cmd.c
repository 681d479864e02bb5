/* softrdma switch: N hosts in network namespaces around a switch with a bottleneck rate, ECN
 * marking, PFC and drop-tail (switch_net.h, switch_model.h), running until interrupted or for
 * --time, with each port's traffic, queue, marks, drops and pause time printed as it goes. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/switch_net.h"
#include "tools/tools.h"
#include "tools/util.h"

static const char *const usage =
    "usage: softrdma switch [options]\n"
    "\n"
    "Makes N hosts, each in its own network namespace (srlink<pid><letter>, address\n"
    "10.213.N.<i+1>), joined by a switch in this process: per-port egress queues drained at\n"
    "--rate, ECN marking (RED: Kmin, Kmax, Pmax), PFC on one priority, drop-tail, random loss.\n"
    "Priorities come from the DSCP (DSCP >> 3: softrdma's default DSCP 26 is priority 3, CNPs\n"
    "at DSCP 48 priority 6), served in strict priority. Run programs on a host with\n"
    "`ip netns exec NAMESPACE ...`. Needs root (namespaces, TUN devices).\n"
    "\n"
    "  -n, --hosts N        hosts (ports), 2..16 (default 3)\n"
    "  -r, --rate R         every port's egress rate in bit/s: 1G, 500M, 10G (default 1G;\n"
    "                       0: no limit)\n"
    "      --host-rate R    every host's link into the switch (default: --rate)\n"
    "  -m, --mtu BYTES      the hosts' MTU (default 9000: RoCE MTU 4096)\n"
    "  -b, --buffer BYTES   egress queue limit per port and priority (default 1MiB)\n"
    "      --ecn            mark ECN-capable packets (off by default)\n"
    "      --kmin BYTES     below it nothing is marked (default 5000)\n"
    "      --kmax BYTES     above it everything is marked (default 200000)\n"
    "      --pmax P         marking probability at kmax, 0..1 (default 0.01)\n"
    "      --pfc            PFC: pause a host's priority instead of dropping (off)\n"
    "      --pfc-prio N     the paused priority, 0..7 (default 3)\n"
    "      --xoff BYTES     pause a host when the switch holds this much of its\n"
    "                       priority (default 96KiB)\n"
    "      --xon BYTES      resume it at this much (default 64KiB)\n"
    "  -l, --loss P         random loss per packet: 0.01 or 1% (default 0)\n"
    "      --seed N         seed of the loss and marking draws (default 1)\n"
    "  -t, --time SECONDS   stop after this long (default: at Ctrl-C)\n"
    "  -i, --interval SECONDS  print the ports' figures this often (default 1; 0: only at\n"
    "                       the end)\n"
    "  -h, --help           this text\n"
    "\n"
    "Columns: in / out are what the port's host sent into the switch and received from it;\n"
    "queue is the port's egress queue now; marked and dropped count packets since the last\n"
    "line; paused is the share of the interval the host was paused (PFC).\n";

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

enum {
	OPT_ECN = 256,
	OPT_KMIN,
	OPT_KMAX,
	OPT_PMAX,
	OPT_PFC,
	OPT_PFC_PRIO,
	OPT_XOFF,
	OPT_XON,
	OPT_SEED,
	OPT_HOST_RATE,
};

static int bad(const char *opt, const char *val, const char *what)
{
	fprintf(stderr, "softrdma switch: bad %s '%s': %s\n", opt, val, what);
	return 2;
}

/* A probability: 0.01 or 1%. */
static int parse_prob(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s)
		return -EINVAL;
	if (*end == '%' && end[1] == '\0')
		v /= 100.0;
	else if (*end)
		return -EINVAL;
	if (!(v >= 0.0 && v <= 1.0))
		return -ERANGE;
	*out = v;
	return 0;
}

static int parse_u32_bytes(const char *s, uint32_t *out)
{
	uint64_t v;
	if (parse_bytes(s, &v) || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static void print_line(const struct switch_net *n, unsigned h, double t, double dt,
		       const struct switch_net_stats *now, const struct switch_net_stats *was)
{
	const struct swm_port_stats *a = &now->port, *b = &was->port;
	uint64_t dropped = a->drop_loss + a->drop_tail + a->drop_hold + now->queue_dropped -
			   (b->drop_loss + b->drop_tail + b->drop_hold + was->queue_dropped);
	printf("%7.1f %4u %-12s %11.1f %11.1f %10.1f %9llu %9llu %8.1f\n", t, h,
	       switch_net_addr(n, h), (double)(a->rx_bytes - b->rx_bytes) * 8 / dt / 1e6,
	       (double)(a->tx_bytes - b->tx_bytes) * 8 / dt / 1e6, a->queue_bytes / 1024.0,
	       (unsigned long long)(a->marked - b->marked), (unsigned long long)dropped,
	       dt > 0 ? (double)(a->pause_ns - b->pause_ns) / (dt * 1e9) * 100 : 0.0);
}

static void print_header(void)
{
	printf("%7s %4s %-12s %11s %11s %10s %9s %9s %8s\n", "time[s]", "port", "host",
	       "in[Mbit/s]", "out[Mbit/s]", "queue[KiB]", "marked", "dropped", "paused[%]");
}

static void print_totals(const struct switch_net *n, double t)
{
	printf("\ntotals after %.1f s:\n", t);
	printf("%4s %-12s %10s %10s %10s %10s %8s %8s %8s %8s %10s %8s %11s\n", "port", "host",
	       "in[pkts]", "out[pkts]", "in[MB]", "out[MB]", "ect", "marked", "loss", "tail",
	       "host-queue", "pauses", "paused[ms]");
	for (unsigned h = 0; h < switch_net_hosts(n); h++) {
		struct switch_net_stats st;
		switch_net_stats(n, h, &st);
		const struct swm_port_stats *p = &st.port;
		printf("%4u %-12s %10llu %10llu %10.1f %10.1f %8llu %8llu %8llu %8llu %10llu %8llu "
		       "%11.1f\n",
		       h, switch_net_addr(n, h), (unsigned long long)p->rx_pkts,
		       (unsigned long long)p->tx_pkts, p->rx_bytes / 1e6, p->tx_bytes / 1e6,
		       (unsigned long long)p->ect, (unsigned long long)p->marked,
		       (unsigned long long)p->drop_loss, (unsigned long long)p->drop_tail,
		       (unsigned long long)(p->drop_hold + st.queue_dropped),
		       (unsigned long long)p->pauses, p->pause_ns / 1e6);
	}
	printf("(tail: drop-tail at the egress queue, counted at the sender's port; host-queue: "
	       "dropped at the sender while paused or before the switch read it)\n");
}

int cmd_switch(int argc, char **argv)
{
	static const struct option opts[] = {{"hosts", required_argument, NULL, 'n'},
					     {"rate", required_argument, NULL, 'r'},
					     {"host-rate", required_argument, NULL, OPT_HOST_RATE},
					     {"mtu", required_argument, NULL, 'm'},
					     {"buffer", required_argument, NULL, 'b'},
					     {"ecn", no_argument, NULL, OPT_ECN},
					     {"kmin", required_argument, NULL, OPT_KMIN},
					     {"kmax", required_argument, NULL, OPT_KMAX},
					     {"pmax", required_argument, NULL, OPT_PMAX},
					     {"pfc", no_argument, NULL, OPT_PFC},
					     {"pfc-prio", required_argument, NULL, OPT_PFC_PRIO},
					     {"xoff", required_argument, NULL, OPT_XOFF},
					     {"xon", required_argument, NULL, OPT_XON},
					     {"loss", required_argument, NULL, 'l'},
					     {"seed", required_argument, NULL, OPT_SEED},
					     {"time", required_argument, NULL, 't'},
					     {"interval", required_argument, NULL, 'i'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	struct switch_net_cfg cfg = {.mtu = 9000};
	double duration = 0, interval = 1;
	uint64_t v;
	bool host_rate_set = false;
	int c;

	swm_cfg_default(&cfg.sw, 3);
	cfg.sw.rate_bps = 1000000000ull;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:r:m:b:l:t:i:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_count(optarg, &v) || v < 2 || v > SWM_MAX_PORTS)
				return bad("--hosts", optarg, "2..16");
			cfg.sw.ports = (unsigned)v;
			break;
		case 'r':
			if (parse_count(optarg, &v) || v > 1000000000000ull)
				return bad("--rate", optarg, "bit/s such as 1G, 500M, 0..1T");
			cfg.sw.rate_bps = v;
			break;
		case OPT_HOST_RATE:
			if (parse_count(optarg, &v) || v > 1000000000000ull)
				return bad("--host-rate", optarg, "bit/s such as 1G, 500M, 0..1T");
			cfg.sw.host_rate_bps = v;
			host_rate_set = true;
			break;
		case 'm':
			if (parse_bytes(optarg, &v) || v < 68 || v > 65535)
				return bad("--mtu", optarg, "68..65535 bytes");
			cfg.mtu = (unsigned)v;
			break;
		case 'b':
			if (parse_u32_bytes(optarg, &cfg.sw.buffer))
				return bad("--buffer", optarg, "bytes such as 1MiB");
			break;
		case OPT_ECN:
			cfg.sw.ecn = true;
			break;
		case OPT_KMIN:
			if (parse_u32_bytes(optarg, &cfg.sw.kmin))
				return bad("--kmin", optarg, "bytes");
			break;
		case OPT_KMAX:
			if (parse_u32_bytes(optarg, &cfg.sw.kmax))
				return bad("--kmax", optarg, "bytes");
			break;
		case OPT_PMAX:
			if (parse_prob(optarg, &cfg.sw.pmax))
				return bad("--pmax", optarg, "a probability, 0..1 or 0%..100%");
			break;
		case OPT_PFC:
			cfg.sw.pfc = true;
			break;
		case OPT_PFC_PRIO:
			if (parse_count(optarg, &v) || v > 7)
				return bad("--pfc-prio", optarg, "0..7");
			cfg.sw.pfc_prio = (uint8_t)v;
			break;
		case OPT_XOFF:
			if (parse_u32_bytes(optarg, &cfg.sw.xoff))
				return bad("--xoff", optarg, "bytes");
			break;
		case OPT_XON:
			if (parse_u32_bytes(optarg, &cfg.sw.xon))
				return bad("--xon", optarg, "bytes");
			break;
		case 'l':
			if (parse_prob(optarg, &cfg.sw.loss))
				return bad("--loss", optarg, "a probability, 0..1 or 0%..100%");
			break;
		case OPT_SEED:
			if (parse_count(optarg, &cfg.sw.seed))
				return bad("--seed", optarg, "a number");
			break;
		case 't':
			if (parse_seconds(optarg, &duration) || duration <= 0)
				return bad("--time", optarg, "seconds such as 10, 2.5s, 1min");
			break;
		case 'i':
			if (parse_seconds(optarg, &interval))
				return bad("--interval", optarg, "seconds such as 1, 0.5, 500ms");
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "softrdma switch: unexpected argument '%s'\n\n%s", argv[optind],
			usage);
		return 2;
	}
	if (!host_rate_set)
		cfg.sw.host_rate_bps = cfg.sw.rate_bps;
	char why[256];
	if (swm_cfg_check(&cfg.sw, why, sizeof(why))) {
		fprintf(stderr, "softrdma switch: %s\n", why);
		return 2;
	}
	if (switch_net_available(why, sizeof(why))) {
		fprintf(stderr, "softrdma switch: cannot make hosts here: %s\n", why);
		return 1;
	}

	struct tool_signals sigs;
	struct switch_net *n;
	char err[512];
	tool_signals_catch(&sigs, on_signal);
	int rc = switch_net_create(&n, &cfg, err, sizeof(err));
	if (rc) {
		tool_signals_restore(&sigs);
		fprintf(stderr, "softrdma switch: %s\n", err);
		return 1;
	}

	const struct swm_cfg *s = &cfg.sw;
	printf("softrdma switch: %u hosts, every port %.3g Gbit/s%s (hosts' links %.3g Gbit/s), "
	       "MTU %u, buffer %u KiB per queue\n",
	       s->ports, s->rate_bps / 1e9, s->rate_bps ? "" : " (no limit)",
	       s->host_rate_bps / 1e9, cfg.mtu, s->buffer / 1024);
	if (s->ecn)
		printf("  ECN: mark from %u B to %u B of queue, %.2f %% at %u B, all above\n",
		       s->kmin, s->kmax, s->pmax * 100, s->kmax);
	else
		printf("  ECN: off\n");
	if (s->pfc)
		printf("  PFC: priority %u (DSCP %u..%u), pause at %u B held per host, resume at "
		       "%u B\n",
		       s->pfc_prio, s->pfc_prio * 8, s->pfc_prio * 8 + 7, s->xoff, s->xon);
	else
		printf("  PFC: off (drop-tail)\n");
	if (s->loss > 0)
		printf("  random loss: %.4g %%\n", s->loss * 100);
	for (unsigned h = 0; h < s->ports; h++)
		printf("  host %u: ip netns exec %s ...   (%s, device %s; softrdma: roce_%s, "
		       "iwarp_%s)\n",
		       h, switch_net_netns(n, h), switch_net_addr(n, h), switch_net_ifname(n, h),
		       switch_net_ifname(n, h), switch_net_ifname(n, h));
	printf("  %s\n", duration > 0 ? "running for the time given" : "running until Ctrl-C");
	fflush(stdout);

	struct switch_net_stats last[SWM_MAX_PORTS];
	for (unsigned h = 0; h < s->ports; h++)
		switch_net_stats(n, h, &last[h]);
	uint64_t t0 = tool_now_ns(), tlast = t0;
	if (interval > 0)
		print_header();
	while (!stop_signal) {
		uint64_t now = tool_now_ns();
		double el = (double)(now - t0) / 1e9;
		if (duration > 0 && el >= duration)
			break;
		double nap = interval > 0 ? interval - (double)(now - tlast) / 1e9 : 0.2;
		if (duration > 0 && duration - el < nap)
			nap = duration - el;
		if (nap > 0.2)
			nap = 0.2; /* see a signal soon */
		if (nap > 0) {
			struct timespec ts = {(time_t)nap,
					      (long)((nap - (double)(time_t)nap) * 1e9)};
			nanosleep(&ts, NULL);
		}
		now = tool_now_ns();
		if (interval > 0 && (double)(now - tlast) / 1e9 >= interval) {
			double dt = (double)(now - tlast) / 1e9;
			for (unsigned h = 0; h < s->ports; h++) {
				struct switch_net_stats st;
				switch_net_stats(n, h, &st);
				print_line(n, h, (double)(now - t0) / 1e9, dt, &st, &last[h]);
				last[h] = st;
			}
			fflush(stdout);
			tlast = now;
		}
	}
	print_totals(n, (double)(tool_now_ns() - t0) / 1e9);
	switch_net_destroy(n);
	tool_signals_restore(&sigs);
	if (stop_signal)
		return stop_signal == SIGINT ? 130 : 143;
	return 0;
}
