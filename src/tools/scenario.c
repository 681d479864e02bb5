/* softrdma compare --scenario incast|victim|loss.
 *
 * incast: N senders write to one receiver through one congested
 * switch port (switch_net.h), while a 100 B ping-pong crosses the same port; once per fabric
 * configuration: RoCEv2 on a lossy fabric (drop-tail, go-back-N), with PFC, with DCQCN (ECN
 * marking, CNPs, rate control), with both, and iWARP on the kernel's TCP (ECN on). Each row is
 * a fresh switch; the programs are this executable's `softrdma bw` and `softrdma lat`, each
 * forked into its host's namespace, writing a JSON result that is read back here.
 *
 * What a row reports: the throughput of every sender through the congested port and their
 * sum (IP bytes the switch delivered from each sender, in the middle of the run, when all
 * of them send: the same yardstick for both protocols, where the programs' own figures are
 * not - an iWARP SEND completes once TCP has taken it, a RoCE one once it is acknowledged;
 * those figures go to the JSON too), Jain's fairness index of the senders' shares, the probe's
 * round trip (p50, p99), the switch's drops (egress drop-tail and the hosts' own queues), ECN marks
 * at the congested port, CNPs crossing the switch (priority 6 packets), the senders' pause time
 * (PFC), and the RoCE senders' retransmitted packets (from the library's counters,
 * SOFTRDMA_STATS=1).
 *
 * DCQCN's defaults are ConnectX's, made for 25-100 Gbit/s links where a round trip takes a few
 * microseconds; this switch runs at a few hundred Mbit/s (a user-space forwarder on a shared
 * CPU). The rows with DCQCN therefore scale its timers and byte counter to the link
 * (SOFTRDMA_DCQCN: every time x 25 Gbit/s / rate, bytes and rate steps / the same factor), and
 * say so; --dcqcn-defaults runs the NIC defaults unscaled.
 *
 * victim: the same incast without the probe, and the first sender also writes to a host of
 * its own whose port is idle. That flow shares only its sender's link with the congested
 * traffic; PFC, pausing the sender for the congested port, stops it too (head-of-line
 * blocking). The row reports its throughput (at its receiver's port) in place of the probe.
 *
 * loss: the incast's flows (one sender by default, so nothing is congested) through a switch
 * that drops packets at random (--loss), once with RoCEv2's go-back-N, once with its selective
 * repeat (engine/sr.h, which two softrdma ends agree on through ECE), and once with iWARP. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/json.h"
#include "tools/switch_net.h"
#include "tools/tools.h"
#include "tools/util.h"

#define MAX_SENDERS 4
#define PROBE_SIZE  100
#define MSG_SIZE    65536
#define CNP_PRIO    6		  /* DSCP 48 >> 3 */
#define REF_RATE    25000000000.0 /* the line rate DCQCN's defaults are made for */

enum row_id {
	ROW_ROCE,
	ROW_ROCE_PFC,
	ROW_ROCE_DCQCN,
	ROW_ROCE_BOTH,
	ROW_ROCE_SR,
	ROW_IWARP,
	ROW_COUNT
};

/* sr: RoCEv2 with selective repeat (SOFTRDMA_SR=1), else go-back-N (SOFTRDMA_SR=0). */
static const struct row_def {
	const char *id, *label;
	bool iwarp, pfc, ecn, sr;
} row_defs[ROW_COUNT] = {
    [ROW_ROCE] = {"roce", "RoCEv2, lossy, go-back-N", false, false, false, false},
    [ROW_ROCE_PFC] = {"roce_pfc", "RoCEv2, PFC", false, true, false, false},
    [ROW_ROCE_DCQCN] = {"roce_dcqcn", "RoCEv2, DCQCN", false, false, true, false},
    [ROW_ROCE_BOTH] = {"roce_pfc_dcqcn", "RoCEv2, PFC + DCQCN", false, true, true, false},
    [ROW_ROCE_SR] = {"roce_sr", "RoCEv2, selective repeat", false, false, false, true},
    [ROW_IWARP] = {"iwarp", "iWARP, TCP (ECN)", true, false, true, false}, /* row_label */
};

/* The rows of each scenario, in the order they run and print. */
static const enum row_id congestion_rows[] = {ROW_ROCE, ROW_ROCE_PFC, ROW_ROCE_DCQCN, ROW_ROCE_BOTH,
					      ROW_IWARP};
static const enum row_id loss_rows[] = {ROW_ROCE, ROW_ROCE_SR, ROW_IWARP};

struct row_res {
	bool ok;
	char why[300];
	double gbps[MAX_SENDERS];     /* each sender's throughput at the port, Gbit/s */
	double app_gbps[MAX_SENDERS]; /* what each sender's bw measured, Gbit/s */
	double total, jain;
	double victim, victim_app; /* victim: the flow that shares a paused link, Gbit/s */
	double p50, p99;	   /* probe round trip, us */
	uint64_t drops, marks, cnps, pauses, resent;
	uint64_t lost;	/* random loss (--scenario loss), by the switch */
	double goodput; /* the senders' own figures summed (bytes their peers took), Gbit/s */
	uint64_t sr_resent, sacks; /* RoCE senders: holes resent, SACKs taken (selective repeat) */
	double pause_ms;	   /* summed over the senders */
	double queue_max_kib;
};

struct sc {
	unsigned senders;
	uint64_t rate;
	double seconds;
	const char *json_path;
	bool dcqcn_defaults;
	bool victim; /* --scenario victim */
	bool loss;   /* --scenario loss */
	double loss_rate;
	time_t started; /* when the first row began, for the JSON */
	char self[PATH_MAX];
	char tmp[64];
	int files;
	struct row_res res[ROW_COUNT];
	/* The iWARP rows' TCP congestion control (pick_tcp_cc): "dctcp" where the kernel has it,
	 * written into each iWARP host's namespace, else NULL (the kernel's default); and their
	 * label, which names it. */
	const char *ns_cc;
	char iwarp_label[48];
};

/* How a row is called in tables and JSON. */
static const char *row_label(const struct sc *s, enum row_id id)
{
	return id == ROW_IWARP ? s->iwarp_label : row_defs[id].label;
}

/* DCTCP (RFC 8257) where the kernel has it, as data centres run TCP beside RoCE: it reacts to
 * the share of ECN-marked packets, as DCQCN does. Asking for it on a socket loads the module if
 * the kernel ships one (root). Without it the iWARP rows run the kernel's default, named in their
 * label. */
static void pick_tcp_cc(struct sc *s)
{
	char cc[16] = "default";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool dctcp = fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "dctcp", 5) == 0;
	if (fd >= 0)
		close(fd);
	s->ns_cc = dctcp ? "dctcp" : NULL;
	if (!dctcp) {
		/* A namespace starts with the initial namespace's default (Linux 4.15 on). */
		FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
		if (f) {
			if (fgets(cc, sizeof(cc), f))
				cc[strcspn(cc, "\n")] = 0;
			fclose(f);
		}
	}
	snprintf(s->iwarp_label, sizeof(s->iwarp_label), "iWARP, TCP (%s, ECN)",
		 dctcp ? "dctcp" : cc);
}

static const enum row_id *rows_of(const struct sc *s, int *n)
{
	if (s->loss) {
		*n = (int)(sizeof(loss_rows) / sizeof(loss_rows[0]));
		return loss_rows;
	}
	*n = (int)(sizeof(congestion_rows) / sizeof(congestion_rows[0]));
	return congestion_rows;
}

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	fputs(
	    "usage: softrdma compare --scenario incast|victim|loss [options]\n"
	    "\n"
	    "incast:\n"
	    "N senders write 64 KiB messages to one receiver through one switch port (softrdma\n"
	    "switch: hosts in network namespaces) while a 100 B ping-pong crosses the same port,\n"
	    "once per fabric: RoCEv2 lossy (drop-tail, go-back-N), RoCEv2 with PFC, with DCQCN\n"
	    "(ECN marks, CNPs, rate cuts), with both, and iWARP on the kernel's TCP (ECN on;\n"
	    "DCTCP where the kernel has it, else its default congestion control).\n"
	    "victim: the same without the probe; the first sender also writes to a host whose\n"
	    "port is idle (the victim flow): PFC, pausing that sender, stops it too.\n"
	    "loss: the incast's flows (one sender by default) through a switch that drops\n"
	    "packets at random: RoCEv2 with go-back-N, RoCEv2 with selective repeat, iWARP.\n"
	    "Needs root (namespaces, TUN devices).\n"
	    "\n"
	    "  -n, --senders N      senders, 1..4 (default 2, loss 1; victim: at least 2)\n"
	    "  -r, --rate R         the switch's port rate in bit/s (default 200M)\n"
	    "  -t, --seconds S      how long each row's traffic runs (default 3)\n"
	    "  -l, --loss P         loss: the share of packets dropped, as 1% or 0.01\n"
	    "                       (default 1%; up to 50%)\n"
	    "      --json FILE      the results as JSON\n"
	    "      --dcqcn-defaults DCQCN with ConnectX's defaults as they are (by default its\n"
	    "                       timers are scaled from 25 Gbit/s to --rate)\n"
	    "  -h, --help           this text\n"
	    "\n"
	    "Columns: through is what the switch delivered from the senders (IP bytes, while\n"
	    "all of them send), summed; Jain is the senders' fairness\n"
	    "(1: equal shares); probe is the 100 B round trip through the congested port; drops\n"
	    "count the switch's and the hosts' queues; marks are ECN marks at the congested port;\n"
	    "CNPs are the priority-6 packets the switch carried; paused is the senders' total PFC\n"
	    "pause time; resent the RoCE senders' retransmitted packets.\n",
	    f);
}

/* ---- children ---- */

struct enter_arg {
	const struct switch_net *net;
	unsigned host;
	bool tcp_ecn;
	const char
	    *tcp_cc; /* with tcp_ecn: the namespace's congestion control, NULL: its default */
};

/* In the child, before exec: async-signal-safe only. */
static void child_enter(const struct enter_arg *a)
{
	if (switch_net_enter(a->net, a->host) < 0) {
		static const char m[] = "error: cannot enter the host's network namespace\n";
		ssize_t r = write(2, m, sizeof(m) - 1);
		(void)r;
		_exit(126);
	}
	if (a->tcp_ecn) { /* per namespace: ask for ECN on the connections made here */
		int fd = open("/proc/sys/net/ipv4/tcp_ecn", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t r = write(fd, "1", 1);
			(void)r;
			close(fd);
		}
	}
	if (a->tcp_ecn && a->tcp_cc) { /* and DCTCP (pick_tcp_cc) for them */
		int fd = open("/proc/sys/net/ipv4/tcp_congestion_control", O_WRONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t r = write(fd, a->tcp_cc, strlen(a->tcp_cc));
			(void)r;
			close(fd);
		}
	}
}

/* Starts `self argv...` on host a->host with env, its output in log. 0 and *pid, or -errno. */
static int spawn(const struct sc *s, char *const argv[], char *const env[], const char *log,
		 const struct enter_arg *a, pid_t *pid)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* no handler of ours runs in the child */
	pid_t p = fork();
	if (p == 0) {
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigaction(SIGINT, &dfl, NULL);
		sigaction(SIGTERM, &dfl, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		int in = open("/dev/null", O_RDONLY);
		if (in < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || dup2(in, 0) < 0)
			_exit(126);
		child_enter(a);
		execve(s->self, argv, env);
		_exit(127);
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(fd);
	if (p < 0)
		return -e;
	*pid = p;
	return 0;
}

/* Waits for pid until deadline (tool_now_ns); kills it (TERM, then KILL) if it is still
 * there. Returns its exit status as waitpid gives it, or -1 if it had to be killed. */
static int reap(pid_t pid, uint64_t deadline)
{
	int st;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0 && errno != EINTR)
			return -1;
		if (stop_signal || tool_now_ns() >= deadline)
			break;
		usleep(10000);
	}
	kill(pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return -1;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* The environment of a row's programs: ours, with the row's SOFTRDMA_ECN / SOFTRDMA_DCQCN and
 * SOFTRDMA_STATS=1 instead of any the caller had. SOFTRDMA_DCQCN's string lives in buf. */
static char **row_env(const struct sc *s, const struct row_def *d, char buf[256])
{
	extern char **environ;
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 5, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "SOFTRDMA_ECN=", 13) &&
		    strncmp(environ[i], "SOFTRDMA_DCQCN=", 15) &&
		    strncmp(environ[i], "SOFTRDMA_STATS=", 15) &&
		    strncmp(environ[i], "SOFTRDMA_FAULT=", 15) &&
		    strncmp(environ[i], "SOFTRDMA_SR=", 12))
			env[k++] = environ[i];
	env[k++] = "SOFTRDMA_STATS=1";
	if (!d->iwarp)
		env[k++] = d->sr ? "SOFTRDMA_SR=1" : "SOFTRDMA_SR=0";
	if (d->ecn && !d->iwarp) {
		env[k++] = "SOFTRDMA_ECN=1";
		double f = REF_RATE / (double)s->rate; /* how much slower this link is */
		if (s->dcqcn_defaults || f <= 1)
			snprintf(buf, 256, "SOFTRDMA_DCQCN=line_rate=%llu",
				 (unsigned long long)s->rate);
		else /* ConnectX's defaults (dcqcn.c), every time and rate step scaled by f */
			snprintf(buf, 256,
				 "SOFTRDMA_DCQCN=line_rate=%llu,min_rate=%llu,ai_rate=%llu,"
				 "hai_rate=%llu,time_reset=%lluns,byte_reset=%llu,"
				 "alpha_period=%lluns,decrease_period=%lluns",
				 (unsigned long long)s->rate, (unsigned long long)(1e6 / f) + 1,
				 (unsigned long long)(5e6 / f) + 1,
				 (unsigned long long)(50e6 / f) + 1,
				 (unsigned long long)(300e3 * f),
				 (unsigned long long)(32767.0 * 64 / f) + 1,
				 (unsigned long long)(1e3 * f), (unsigned long long)(4e3 * f));
		env[k++] = buf;
	}
	env[k] = NULL;
	return env;
}

/* ---- results ---- */

static const struct json *result_row(const char *path, struct json **doc, char *why, size_t len)
{
	struct json_error je;
	if (json_parse_file(path, doc, &je) < 0) {
		snprintf(why, len, "no result in %.200s (%.60s)", path, je.msg);
		return NULL;
	}
	const char *e = json_str(json_get(*doc, "error"));
	if (e) {
		snprintf(why, len, "%s", e);
		return NULL;
	}
	const struct json *row = json_at(json_get(*doc, "results"), 0);
	if (!row)
		snprintf(why, len, "no result row in %.200s", path);
	return row;
}

/* A bw client's goodput in Gbit/s, or -1 with why. */
static double read_gbps(const char *path, char *why, size_t len)
{
	struct json *doc = NULL;
	const struct json *row = result_row(path, &doc, why, len);
	double v = -1;
	if (row) {
		double bw = json_num(json_get(row, "BW_average"), -1);
		const char *unit = json_str(json_get(row, "unit"));
		if (bw >= 0)
			v = unit && strstr(unit, "Gb") ? bw : bw * 1048576.0 * 8 / 1e9;
		else
			snprintf(why, len, "no bandwidth in %.200s", path);
	}
	json_free(doc);
	return v;
}

/* A lat client's round trip p50 and p99 in us; false with why. */
static bool read_rtt(const char *path, double *p50, double *p99, char *why, size_t len)
{
	struct json *doc = NULL;
	const struct json *row = result_row(path, &doc, why, len);
	bool ok = false;
	if (row) {
		const char *what = json_str(json_get(doc, "latency"));
		double k = what && !strcmp(what, "half round trip") ? 2.0 : 1.0;
		*p50 = k * json_num(json_get(row, "t_typical"), -1);
		*p99 = k * json_num(json_get(row, "percentile_99"), -1);
		ok = *p50 > 0 && *p99 > 0;
		if (!ok)
			snprintf(why, len, "no latency in %.200s", path);
	}
	json_free(doc);
	return ok;
}

/* The sum of NAME=N over the lines of a log that name a QP (SOFTRDMA_STATS=1). */
static uint64_t log_qp_sum(const char *path, const char *name)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	uint64_t sum = 0;
	size_t nl = strlen(name);
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "QP 0x"))
			continue;
		for (char *p = strstr(line, name); p; p = strstr(p + 1, name))
			if ((p == line || p[-1] == ' ') && p[nl] == '=')
				sum += strtoull(p + nl + 1, NULL, 10);
	}
	fclose(f);
	return sum;
}

/* The reason a child failed: the last line of its log that says "error", or its status. */
static void child_why(const char *log, int st, char *why, size_t len)
{
	FILE *f = fopen(log, "re");
	char line[512], last[512] = "";
	if (f) {
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "error") || strstr(line, "cannot"))
				snprintf(last, sizeof(last), "%s", line);
		fclose(f);
	}
	last[strcspn(last, "\n")] = 0;
	if (last[0])
		snprintf(why, len, "%s", last);
	else if (st == -1)
		snprintf(why, len, "did not finish in time");
	else
		snprintf(why, len, "exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : 128);
}

/* ---- one row ---- */

enum flow_kind { F_BULK, F_PROBE, F_VICTIM };
#define MAX_FLOWS (MAX_SENDERS + 2)

struct flow {
	unsigned from, to; /* hosts */
	enum flow_kind kind;
};

/* The hosts and flows of the scenario: *hosts, and the number of flows in f.
 *   incast: receiver 0, senders 1..N, the prober N + 1.
 *   victim: the congested receiver 0, the victim's receiver 1, senders 2..N + 1 to host 0,
 *           and sender 2 also to host 1: its flow to 1 crosses no congested port, only
 *           sender 2's link, which PFC pauses for the traffic to host 0. */
static unsigned plan(const struct sc *s, struct flow *f, unsigned *hosts)
{
	unsigned n = 0;
	*hosts = s->senders + 2;
	if (s->victim) {
		f[n++] = (struct flow){2, 1, F_VICTIM};
		for (unsigned k = 0; k < s->senders; k++)
			f[n++] = (struct flow){2 + k, 0, F_BULK};
		return n;
	}
	for (unsigned k = 0; k < s->senders; k++)
		f[n++] = (struct flow){1 + k, 0, F_BULK};
	f[n++] = (struct flow){s->senders + 1, 0, F_PROBE};
	return n;
}

/* Bytes of flow k in a stats snapshot: at its receiver's port when no other flow goes
 * there, else at its sender's when no other flow comes from there, else what its sender
 * delivered minus its other flows (measured first, by one of the two other rules). */
static void flow_bytes(const struct flow *f, unsigned nf, const uint64_t *tx, const uint64_t *fwd,
		       uint64_t *out)
{
	bool done[MAX_FLOWS] = {false};
	for (int pass = 0; pass < 2; pass++)
		for (unsigned k = 0; k < nf; k++) {
			unsigned to_n = 0, from_n = 0;
			uint64_t others = 0;
			if (done[k])
				continue;
			for (unsigned j = 0; j < nf; j++) {
				to_n += f[j].to == f[k].to;
				from_n += f[j].from == f[k].from;
				if (j != k && f[j].from == f[k].from)
					others += done[j] ? out[j] : 0;
			}
			if (to_n == 1)
				out[k] = tx[f[k].to];
			else if (from_n == 1)
				out[k] = fwd[f[k].from];
			else if (pass == 1)
				out[k] = fwd[f[k].from] > others ? fwd[f[k].from] - others : 0;
			else
				continue;
			done[k] = true;
		}
}

/* Every host's delivered (fwd) and received (tx) bytes now. */
static void snapshot(const struct switch_net *net, unsigned hosts, uint64_t *tx, uint64_t *fwd)
{
	for (unsigned h = 0; h < hosts; h++) {
		struct switch_net_stats st;
		switch_net_stats(net, h, &st);
		tx[h] = st.port.tx_bytes;
		fwd[h] = st.port.fwd_bytes;
	}
}

static int run_row(struct sc *s, enum row_id id)
{
	const struct row_def *d = &row_defs[id];
	struct row_res *r = &s->res[id];
	struct flow fl[MAX_FLOWS];
	unsigned hosts, nf = plan(s, fl, &hosts);
	struct switch_net_cfg cfg = {.mtu = 9000};
	struct switch_net *net;
	char err[512];

	memset(r, 0, sizeof(*r));
	swm_cfg_default(&cfg.sw, hosts);
	cfg.sw.rate_bps = cfg.sw.host_rate_bps = s->rate;
	cfg.sw.buffer = 512 * 1024; /* >= hosts x (xoff + 2 MTU): lossless with PFC */
	cfg.sw.pfc = d->pfc;
	cfg.sw.ecn = d->ecn;
	cfg.sw.kmin = 5000;
	cfg.sw.kmax = 64 * 1024;
	cfg.sw.pmax = 0.2;
	if (s->loss)
		cfg.sw.loss = s->loss_rate;
	if (switch_net_create(&net, &cfg, err, sizeof(err)) < 0) {
		snprintf(r->why, sizeof(r->why), "no switch: %.250s", err);
		return -1;
	}

	char dcqcn_env[256];
	char **env = row_env(s, d, dcqcn_env);
	if (!env) {
		switch_net_destroy(net);
		snprintf(r->why, sizeof(r->why), "out of memory");
		return -1;
	}
	const char *prefix = d->iwarp ? "iwarp_" : "roce_";
	int base = 20000 + (int)(getpid() % 5000) * 2 + id * 10;
	char secs[32], size[32], dev[MAX_FLOWS][64], port[MAX_FLOWS][16];
	char slog[MAX_FLOWS][PATH_MAX], clog[MAX_FLOWS][PATH_MAX], cjson[MAX_FLOWS][PATH_MAX];
	pid_t spid[MAX_FLOWS] = {0}, cpid[MAX_FLOWS] = {0};
	snprintf(secs, sizeof(secs), "%g", s->seconds);
	snprintf(size, sizeof(size), "%d", PROBE_SIZE);
	for (unsigned h = 0; h < hosts; h++)
		snprintf(dev[h], sizeof(dev[h]), "%s%s", prefix, switch_net_ifname(net, h));
	int rc = 0;

	/* A server for every flow on its receiver, then every client at once. */
	for (unsigned k = 0; k < nf && rc == 0; k++) {
		struct enter_arg a = {net, fl[k].to, d->iwarp, s->ns_cc};
		snprintf(port[k], sizeof(port[k]), "%d", base + (int)k);
		snprintf(slog[k], sizeof(slog[k]), "%s/%d-server.log", s->tmp, s->files++);
		char *argv[] = {"softrdma",  fl[k].kind == F_PROBE ? "lat" : "bw",
				"-d",	     dev[fl[k].to],
				"-p",	     port[k],
				"--timeout", "20",
				NULL};
		rc = spawn(s, argv, env, slog[k], &a, &spid[k]);
	}
	usleep(500000); /* the servers listen */
	for (unsigned k = 0; k < nf && rc == 0; k++) {
		struct enter_arg a = {net, fl[k].from, d->iwarp, s->ns_cc};
		char *to = (char *)switch_net_addr(net, fl[k].to);
		snprintf(clog[k], sizeof(clog[k]), "%s/%d-client.log", s->tmp, s->files++);
		snprintf(cjson[k], sizeof(cjson[k]), "%s/%d-client.json", s->tmp, s->files++);
		char *bw[] = {"softrdma", "bw",	    "-d",     dev[fl[k].from], "-p", port[k], "-D",
			      secs,	  "--json", cjson[k], "--timeout",     "20", to,      NULL};
		char *lat[] = {
		    "softrdma", "lat", "-d",	 dev[fl[k].from], "-p",	       port[k], "-D", secs,
		    "-s",	size,  "--json", cjson[k],	  "--timeout", "20",	to,   NULL};
		rc = spawn(s, fl[k].kind == F_PROBE ? lat : bw, env, clog[k], &a, &cpid[k]);
	}
	if (rc)
		snprintf(r->why, sizeof(r->why), "cannot start the programs: %s", strerror(-rc));

	/* The throughput window: from when every sender should be under way to the end of
	 * their -D. */
	uint64_t t0 = tool_now_ns();
	double lead = s->seconds * 0.4 < 1.0 ? s->seconds * 0.4 : 1.0;
	uint64_t w0 = t0 + (uint64_t)(lead * 1e9), w1 = t0 + (uint64_t)(s->seconds * 1e9);
	uint64_t tx[2][MAX_FLOWS] = {{0}}, fwd[2][MAX_FLOWS] = {{0}};
	for (int phase = 0; phase < 2 && rc == 0; phase++) {
		uint64_t until = phase ? w1 : w0;
		while (!stop_signal && tool_now_ns() < until)
			usleep(5000);
		snapshot(net, hosts, tx[phase], fwd[phase]);
	}
	double window = (double)(w1 - w0) / 1e9;

	uint64_t deadline = tool_now_ns() + (uint64_t)((s->seconds + 40) * 1e9);
	int cst[MAX_FLOWS], sst[MAX_FLOWS];
	for (unsigned k = 0; k < nf; k++) {
		cst[k] = cpid[k] ? reap(cpid[k], deadline) : -1;
		sst[k] = spid[k] ? reap(spid[k], tool_now_ns() + 5000000000ull) : -1;
	}

	/* The switch's view. */
	struct switch_net_stats st;
	switch_net_stats(net, 0, &st);
	r->marks = st.port.marked;
	r->queue_max_kib = st.port.queue_max / 1024.0;
	for (unsigned h = 0; h < hosts; h++) {
		bool sender = false;
		for (unsigned k = 0; k < nf; k++)
			sender |= fl[k].from == h && fl[k].kind != F_PROBE;
		switch_net_stats(net, h, &st);
		r->drops += st.port.drop_tail + st.port.drop_hold + st.queue_dropped;
		r->lost += st.port.drop_loss;
		r->cnps += st.port.tx_prio[CNP_PRIO];
		if (sender) {
			r->pauses += st.port.pauses;
			r->pause_ms += st.port.pause_ns / 1e6;
		}
	}
	switch_net_destroy(net);
	free(env);

	/* The programs' view. */
	uint64_t b0[MAX_FLOWS] = {0}, b1[MAX_FLOWS] = {0};
	flow_bytes(fl, nf, tx[0], fwd[0], b0);
	flow_bytes(fl, nf, tx[1], fwd[1], b1);
	double sum = 0, sq = 0;
	unsigned nb = 0;
	r->ok = rc == 0;
	for (unsigned k = 0; k < nf && r->ok; k++) {
		char why[300];
		const char *what = fl[k].kind == F_PROBE ? "probe" : "sender";
		if (cst[k] != 0 || sst[k] != 0) {
			child_why(cst[k] != 0 ? clog[k] : slog[k], cst[k] != 0 ? cst[k] : sst[k],
				  why, sizeof(why));
			snprintf(r->why, sizeof(r->why), "%s %u: %.200s", what, fl[k].from, why);
			r->ok = false;
			break;
		}
		if (fl[k].kind == F_PROBE) {
			if (!read_rtt(cjson[k], &r->p50, &r->p99, why, sizeof(why))) {
				snprintf(r->why, sizeof(r->why), "probe: %.200s", why);
				r->ok = false;
			}
			continue;
		}
		double g = (double)(b1[k] - b0[k]) * 8 / window / 1e9;
		double app = read_gbps(cjson[k], why, sizeof(why));
		if (app < 0) {
			snprintf(r->why, sizeof(r->why), "sender %u: %.200s", fl[k].from, why);
			r->ok = false;
			break;
		}
		if (!d->iwarp) {
			r->resent += log_qp_sum(clog[k], "retransmits");
			r->sr_resent += log_qp_sum(clog[k], "sr_resent");
			r->sacks += log_qp_sum(clog[k], "sr_sacks_rcvd");
		}
		if (fl[k].kind == F_VICTIM) {
			r->victim = g;
			r->victim_app = app;
			continue;
		}
		r->gbps[nb] = g;
		r->app_gbps[nb++] = app;
		r->goodput += app;
		sum += g;
		sq += g * g;
	}
	if (r->ok) {
		r->total = sum;
		r->jain = sq > 0 ? sum * sum / (nb * sq) : 0; /* Jain et al., 1984 */
	}
	return r->ok ? 0 : -1;
}

/* ---- output ---- */

/* The loss scenario's columns: what the programs moved (goodput: acknowledged or, for iWARP,
 * taken by TCP), what crossed the port (resent packets included), the probe, the packets
 * the switch dropped, and RoCE's repairs. */
static void print_loss_table(const struct sc *s, const enum row_id *rows, int nrows)
{
	printf("%-27s %9s %9s %16s %7s %8s %8s %7s\n", "fabric", "goodput", "on wire",
	       "probe p50/p99", "lost", "resent", "holes", "SACKs");
	printf("%-27s %9s %9s %16s %7s %8s %8s %7s\n", "", "[Mbit/s]", "[Mbit/s]", "[us]", "[pkts]",
	       "[pkts]", "[pkts]", "");
	for (int ri = 0; ri < nrows; ri++) {
		int id = rows[ri];
		const struct row_res *r = &s->res[id];
		if (!r->ok) {
			printf("%-27s not measured: %s\n", row_label(s, id), r->why);
			continue;
		}
		char probe[40], resent[24], holes[24], sacks[24];
		snprintf(probe, sizeof(probe), "%.0f / %.0f", r->p50, r->p99);
		snprintf(resent, sizeof(resent), "%llu", (unsigned long long)r->resent);
		snprintf(holes, sizeof(holes), "%llu", (unsigned long long)r->sr_resent);
		snprintf(sacks, sizeof(sacks), "%llu", (unsigned long long)r->sacks);
		if (row_defs[id].iwarp) {
			snprintf(resent, sizeof(resent), "TCP's");
			snprintf(holes, sizeof(holes), "-");
			snprintf(sacks, sizeof(sacks), "TCP's");
		}
		printf("%-27s %9.0f %9.0f %16s %7llu %8s %8s %7s\n", row_label(s, id),
		       r->goodput * 1e3, r->total * 1e3, probe, (unsigned long long)r->lost, resent,
		       holes, sacks);
	}
	printf("\nresent: request packets sent again (go-back-N's and selective repeat's); holes: "
	       "those selective\nrepeat sent for a SACK's hole; goodput: the senders' own figures "
	       "(an iWARP SEND counts once\nTCP took it).\n");
}

static void print_table(const struct sc *s)
{
	int nrows;
	const enum row_id *rows = rows_of(s, &nrows);
	if (s->loss) {
		printf("\nloss: %u sender%s -> 1 receiver through one %.0f Mbit/s port that drops "
		       "%.2f %% of all packets at random (either way), MTU 9000, %g s each, a %d B "
		       "ping-pong through the same port\n\n",
		       s->senders, s->senders == 1 ? "" : "s", s->rate / 1e6, s->loss_rate * 100,
		       s->seconds, PROBE_SIZE);
		print_loss_table(s, rows, nrows);
		return;
	}
	if (s->victim)
		printf("\nvictim: %u senders -> 1 receiver through one %.0f Mbit/s port; the first "
		       "sender also sends to an idle host (the victim flow, sharing its sender's "
		       "link with the congested traffic); MTU 9000, 512 KiB of buffer per queue, "
		       "%g s each\n\n",
		       s->senders, s->rate / 1e6, s->seconds);
	else
		printf(
		    "\nincast: %u sender%s -> 1 receiver through one %.0f Mbit/s port (MTU 9000, "
		    "512 KiB of buffer per queue), %g s each, a %d B ping-pong through the same "
		    "port\n\n",
		    s->senders, s->senders == 1 ? "" : "s", s->rate / 1e6, s->seconds, PROBE_SIZE);
	printf("%-27s %9s %-19s %5s %16s %7s %7s %6s %10s %7s\n", "fabric", "through", "shares",
	       "Jain", s->victim ? "victim" : "probe p50/p99", "drops", "marks", "CNPs", "paused",
	       "resent");
	printf("%-27s %9s %-19s %5s %16s %7s %7s %6s %10s %7s\n", "", "[Mbit/s]", "[Mbit/s]", "",
	       s->victim ? "[Mbit/s]" : "[us]", "", "", "", "[ms]", "[pkts]");
	for (int ri = 0; ri < nrows; ri++) {
		int id = rows[ri];
		const struct row_res *r = &s->res[id];
		if (!r->ok) {
			printf("%-27s not measured: %s\n", row_label(s, id), r->why);
			continue;
		}
		char shares[64] = "", probe[40];
		for (unsigned i = 0; i < s->senders; i++) {
			size_t n = strlen(shares);
			snprintf(shares + n, sizeof(shares) - n, "%s%.0f", i ? "/" : "",
				 r->gbps[i] * 1e3);
		}
		if (s->victim)
			snprintf(probe, sizeof(probe), "%.0f", r->victim * 1e3);
		else
			snprintf(probe, sizeof(probe), "%.0f / %.0f", r->p50, r->p99);
		char resent[24];
		if (row_defs[id].iwarp)
			snprintf(resent, sizeof(resent), "TCP's");
		else
			snprintf(resent, sizeof(resent), "%llu", (unsigned long long)r->resent);
		printf("%-27s %9.0f %-19s %5.2f %16s %7llu %7llu %6llu %10.1f %7s\n",
		       row_label(s, id), r->total * 1e3, shares, r->jain, probe,
		       (unsigned long long)r->drops, (unsigned long long)r->marks,
		       (unsigned long long)r->cnps, r->pause_ms, resent);
	}
	if (s->loss)
		return;
	if (!s->dcqcn_defaults && s->rate < REF_RATE)
		printf("\nDCQCN ran with ConnectX's defaults scaled to the link: every time x %.0f "
		       "(25 Gbit/s / %.0f Mbit/s), byte counter and rate steps / %.0f.\n",
		       REF_RATE / (double)s->rate, s->rate / 1e6, REF_RATE / (double)s->rate);
	printf("Marking: RED from 5000 B to 64 KiB of queue, 20 %% at 64 KiB; PFC: pause at 96 "
	       "KiB held per host, resume at 64 KiB.\n");
}

/* What the figures say, in sentences: how much of the port each fabric used, at what cost in
 * loss, pauses and probe latency. Only from rows that were measured. */
static void print_summary(const struct sc *s)
{
	const struct row_res *lossy = &s->res[ROW_ROCE], *pfc = &s->res[ROW_ROCE_PFC],
			     *dcqcn = &s->res[ROW_ROCE_DCQCN], *both = &s->res[ROW_ROCE_BOTH],
			     *iw = &s->res[ROW_IWARP];
	double port = (double)s->rate / 1e9;
	printf("\nSummary:\n");
	if (s->loss) {
		const struct row_res *sr = &s->res[ROW_ROCE_SR];
		if (lossy->ok)
			printf(
			    "- RoCEv2 with go-back-N: %.0f Mbit/s of goodput (%.0f %% of the port) "
			    "for %.0f Mbit/s on the wire; every loss sends what followed it again: "
			    "%llu packets resent, the switch lost %llu. The probe's p99: %.0f us "
			    "(IB's ACK timeout).\n",
			    lossy->goodput * 1e3, lossy->goodput / port * 100, lossy->total * 1e3,
			    (unsigned long long)lossy->resent, (unsigned long long)lossy->lost,
			    lossy->p99);
		if (sr->ok)
			printf(
			    "- With selective repeat: %.0f Mbit/s of goodput (%.0f %% of the port) "
			    "for %.0f Mbit/s on the wire; %llu packets resent (%llu for SACKs' "
			    "holes), the switch lost %llu: only the lost ones go again, and the "
			    "ACK timer runs on the measured round trip. The probe's p99: %.0f "
			    "us.\n",
			    sr->goodput * 1e3, sr->goodput / port * 100, sr->total * 1e3,
			    (unsigned long long)sr->resent, (unsigned long long)sr->sr_resent,
			    (unsigned long long)sr->lost, sr->p99);
		if (sr->ok && lossy->ok && lossy->goodput > 0)
			printf(
			    "- Selective repeat gave %.2fx go-back-N's goodput, resending %.2fx as "
			    "many packets.\n",
			    sr->goodput / lossy->goodput,
			    lossy->resent ? (double)sr->resent / (double)lossy->resent : 0);
		if (iw->ok)
			printf(
			    "- iWARP on TCP: %.0f Mbit/s of goodput (%.0f %% of the port), the "
			    "probe's p99 %.0f us; TCP's SACKs and fast retransmit do for it what "
			    "selective repeat does for RoCE.\n",
			    iw->goodput * 1e3, iw->goodput / port * 100, iw->p99);
		return;
	}
	if (s->victim) {
		if (lossy->ok)
			printf(
			    "- Without PFC the victim flow got %.0f Mbit/s: what its sender's link "
			    "had left beside the congested flow, whose losses go-back-N "
			    "repaired.\n",
			    lossy->victim * 1e3);
		if (lossy->ok && pfc->ok)
			printf(
			    "- With PFC it got %.0f Mbit/s (%.2fx): its sender was paused %.0f ms "
			    "for the congested port's sake, and the victim with it (head-of-line "
			    "blocking), though its own path was idle.\n",
			    pfc->victim * 1e3, lossy->victim > 0 ? pfc->victim / lossy->victim : 0,
			    pfc->pause_ms);
		if (pfc->ok && both->ok)
			printf(
			    "- DCQCN on top of PFC: %.0f Mbit/s for the victim, %.0f ms of pauses "
			    "(PFC alone: %.0f).\n",
			    both->victim * 1e3, both->pause_ms, pfc->pause_ms);
		if (iw->ok)
			printf("- iWARP on TCP: the victim flow got %.0f Mbit/s; TCP's congestion "
			       "control is per connection, nothing stops a neighbour.\n",
			       iw->victim * 1e3);
		return;
	}
	if (lossy->ok)
		printf(
		    "- RoCEv2 on a lossy fabric used %.0f %% of the port; the switch dropped %llu "
		    "packets and go-back-N resent %llu (every packet after a loss again).\n",
		    lossy->total / port * 100, (unsigned long long)lossy->drops,
		    (unsigned long long)lossy->resent);
	if (lossy->ok && pfc->ok)
		printf("- PFC made it lossless (%llu drops): %.0f %% of the port, %.2fx the lossy "
		       "goodput, the senders paused %.0f ms in all; the probe's p99 went from %.0f "
		       "to %.0f us.\n",
		       (unsigned long long)pfc->drops, pfc->total / port * 100,
		       lossy->total > 0 ? pfc->total / lossy->total : 0, pfc->pause_ms, lossy->p99,
		       pfc->p99);
	if (lossy->ok && dcqcn->ok)
		printf(
		    "- DCQCN without PFC: %.0f %% of the port with %llu drops (lossy: %llu), %llu "
		    "CNPs; the probe's p99 %.0f us (lossy: %.0f).\n",
		    dcqcn->total / port * 100, (unsigned long long)dcqcn->drops,
		    (unsigned long long)lossy->drops, (unsigned long long)dcqcn->cnps, dcqcn->p99,
		    lossy->p99);
	if (pfc->ok && both->ok)
		printf(
		    "- DCQCN on top of PFC: pauses %.0f ms (PFC alone: %.0f), %.0f %% of the port, "
		    "the probe's p99 %.0f us (PFC alone: %.0f).\n",
		    both->pause_ms, pfc->pause_ms, both->total / port * 100, both->p99, pfc->p99);
	if (iw->ok)
		printf(
		    "- iWARP on TCP needs no lossless fabric: %.0f %% of the port with %llu drops "
		    "recovered by TCP, Jain %.2f, the probe's p99 %.0f us.\n",
		    iw->total / port * 100, (unsigned long long)iw->drops, iw->jain, iw->p99);
}

/* The JSON result: the contract with `softrdma report` (documented in tools/report.h, where
 * the reader checks it; change both together and bump "schema" on an incompatible change). */
static int write_json(const struct sc *s)
{
	struct strbuf b = {0};
	struct tm tm;
	char started[32] = "";
	if (gmtime_r(&s->started, &tm))
		strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", &tm);
	sb_add(&b, "{\"tool\": \"softrdma compare --scenario\", \"schema\": 1, \"started\": ");
	sb_json_str(&b, started);
	sb_add(&b, ", \"duration_s\": %.0f, ", difftime(time(NULL), s->started));
	sb_add(&b,
	       "\"scenario\": \"%s\", \"senders\": %u, \"rate_bps\": %llu, \"seconds\": %g, "
	       "\"message_bytes\": %d, \"probe_bytes\": %d, ",
	       s->loss	   ? "loss"
	       : s->victim ? "victim"
			   : "incast",
	       s->senders, (unsigned long long)s->rate, s->seconds, MSG_SIZE, PROBE_SIZE);
	if (s->loss)
		sb_add(&b, "\"loss\": %g, ", s->loss_rate);
	sb_add(&b, "\"rows\": [");
	int nrows;
	const enum row_id *rows = rows_of(s, &nrows);
	for (int ri = 0; ri < nrows; ri++) {
		int id = rows[ri];
		const struct row_res *r = &s->res[id];
		sb_add(&b, "%s\n  {\"id\": \"%s\", \"label\": ", ri ? "," : "", row_defs[id].id);
		sb_json_str(&b, row_label(s, id));
		sb_add(&b, ", \"ok\": %s", r->ok ? "true" : "false");
		if (!r->ok) {
			sb_add(&b, ", \"error\": ");
			sb_json_str(&b, r->why);
			sb_add(&b, "}");
			continue;
		}
		sb_add(&b, ", \"throughput_gbps\": %.6f, \"shares_gbps\": [", r->total);
		for (unsigned i = 0; i < s->senders; i++)
			sb_add(&b, "%s%.6f", i ? ", " : "", r->gbps[i]);
		sb_add(&b, "], \"app_shares_gbps\": [");
		for (unsigned i = 0; i < s->senders; i++)
			sb_add(&b, "%s%.6f", i ? ", " : "", r->app_gbps[i]);
		sb_add(&b, "], \"jain\": %.4f, \"goodput_gbps\": %.6f, \"lost\": %llu, ", r->jain,
		       r->goodput, (unsigned long long)r->lost);
		if (s->victim)
			sb_add(&b, "\"victim_gbps\": %.6f, \"victim_app_gbps\": %.6f, ", r->victim,
			       r->victim_app);
		else
			sb_add(&b, "\"probe_p50_us\": %.2f, \"probe_p99_us\": %.2f, ", r->p50,
			       r->p99);
		sb_add(&b,
		       "\"drops\": %llu, \"marks\": %llu, \"cnps\": %llu, \"pauses\": %llu, "
		       "\"pause_ms\": %.3f, \"queue_max_kib\": %.1f",
		       (unsigned long long)r->drops, (unsigned long long)r->marks,
		       (unsigned long long)r->cnps, (unsigned long long)r->pauses, r->pause_ms,
		       r->queue_max_kib);
		if (!row_defs[id].iwarp)
			sb_add(&b, ", \"resent\": %llu, \"sr_resent\": %llu, \"sacks\": %llu",
			       (unsigned long long)r->resent, (unsigned long long)r->sr_resent,
			       (unsigned long long)r->sacks);
		sb_add(&b, "}");
	}
	sb_add(&b, "\n]}\n");
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	FILE *f = fopen(s->json_path, "we");
	if (!f) {
		int e = errno;
		free(b.p);
		return -e;
	}
	bool ok = fputs(b.p, f) >= 0;
	ok = fclose(f) == 0 && ok;
	free(b.p);
	return ok ? 0 : -EIO;
}

/* ---- the command ---- */

static int parse(struct sc *s, int argc, char **argv)
{
	enum { O_SCENARIO = 256, O_JSON, O_DEFAULTS };
	static const struct option opts[] = {{"scenario", required_argument, NULL, O_SCENARIO},
					     {"senders", required_argument, NULL, 'n'},
					     {"rate", required_argument, NULL, 'r'},
					     {"seconds", required_argument, NULL, 't'},
					     {"json", required_argument, NULL, O_JSON},
					     {"dcqcn-defaults", no_argument, NULL, O_DEFAULTS},
					     {"loss", required_argument, NULL, 'l'},
					     {"help", no_argument, NULL, 'h'},
					     {NULL, 0, NULL, 0}};
	uint64_t v;
	int c;
	bool senders_set = false;
	s->senders = 2;
	s->rate = 200000000;
	s->seconds = 3;
	s->loss_rate = 0.01;
	optind = 1;
	while ((c = getopt_long(argc, argv, "n:r:t:l:h", opts, NULL)) != -1) {
		switch (c) {
		case O_SCENARIO:
			if (strcmp(optarg, "incast") && strcmp(optarg, "victim") &&
			    strcmp(optarg, "loss")) {
				fprintf(stderr,
					"softrdma compare: unknown scenario '%s' (there are: "
					"incast, victim, loss)\n",
					optarg);
				return 2;
			}
			s->victim = !strcmp(optarg, "victim");
			s->loss = !strcmp(optarg, "loss");
			break;
		case 'l': {
			char *end;
			errno = 0;
			double p = strtod(optarg, &end);
			if (end != optarg && *end == '%') {
				p /= 100;
				end++;
			}
			if (errno || end == optarg || *end || !(p >= 0 && p <= 0.5)) {
				fprintf(
				    stderr,
				    "softrdma compare: bad --loss '%s' (a share of packets: 1%% "
				    "or 0.01, at most 50%%)\n",
				    optarg);
				return 2;
			}
			s->loss_rate = p;
			break;
		}
		case 'n':
			if (parse_count(optarg, &v) || v < 1 || v > MAX_SENDERS) {
				fprintf(stderr, "softrdma compare: bad --senders '%s' (1..%d)\n",
					optarg, MAX_SENDERS);
				return 2;
			}
			s->senders = (unsigned)v;
			senders_set = true;
			break;
		case 'r':
			if (parse_count(optarg, &v) || v < 1000000 || v > 100000000000ull) {
				fprintf(stderr,
					"softrdma compare: bad --rate '%s' (bit/s, 1M..100G)\n",
					optarg);
				return 2;
			}
			s->rate = v;
			break;
		case 't':
			if (parse_seconds(optarg, &s->seconds) || s->seconds < 0.2 ||
			    s->seconds > 600) {
				fprintf(stderr,
					"softrdma compare: bad --seconds '%s' (0.2 to 600)\n",
					optarg);
				return 2;
			}
			break;
		case O_JSON:
			s->json_path = optarg;
			break;
		case O_DEFAULTS:
			s->dcqcn_defaults = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "softrdma compare: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (s->loss && !senders_set)
		s->senders = 1;
	if (s->victim && s->senders < 2) {
		fprintf(stderr, "softrdma compare: the victim scenario needs --senders 2 or more "
				"(one sender congests nothing)\n");
		return 2;
	}
	return 0;
}

int scenario_main(int argc, char **argv)
{
	static struct sc s; /* large: not on the stack */
	memset(&s, 0, sizeof(s));
	int r = parse(&s, argc, argv);
	if (r)
		return r == 1 ? 0 : 2;
	char why[256];
	if (switch_net_available(why, sizeof(why))) {
		fprintf(stderr, "softrdma compare: the %s scenario needs a switch: %s\n",
			s.loss	   ? "loss"
			: s.victim ? "victim"
				   : "incast",
			why);
		return 1;
	}
	if (tool_self_and_tmpdir("compare", s.self, sizeof(s.self), s.tmp, sizeof(s.tmp),
				 "/tmp/softrdma-scenario.XXXXXX"))
		return 1;
	struct tool_signals sigs;
	tool_signals_catch(&sigs, on_signal);
	pick_tcp_cc(&s);
	s.started = time(NULL);
	int measured = 0, nrows;
	const enum row_id *rows = rows_of(&s, &nrows);
	for (int i = 0; i < nrows && !stop_signal; i++) {
		fprintf(stderr, "[%d/%d] %s, %g s...\n", i + 1, nrows, row_label(&s, rows[i]),
			s.seconds);
		if (run_row(&s, rows[i]) == 0)
			measured++;
	}
	tool_signals_restore(&sigs);
	if (!getenv("SOFTRDMA_KEEP")) {
		char cmd[128];
		for (int i = 0; i < s.files; i++) { /* only the files this run made */
			snprintf(cmd, sizeof(cmd), "%s/%d-server.log", s.tmp, i);
			unlink(cmd);
			snprintf(cmd, sizeof(cmd), "%s/%d-client.log", s.tmp, i);
			unlink(cmd);
			snprintf(cmd, sizeof(cmd), "%s/%d-client.json", s.tmp, i);
			unlink(cmd);
		}
		rmdir(s.tmp);
	} else {
		fprintf(stderr, "logs kept in %s\n", s.tmp);
	}
	if (stop_signal)
		return stop_signal == SIGINT ? 130 : 143;
	print_table(&s);
	print_summary(&s);
	if (s.json_path) {
		int e = write_json(&s);
		if (e) {
			fprintf(stderr, "softrdma compare: cannot write %s: %s\n", s.json_path,
				strerror(-e));
			return 1;
		}
	}
	return measured == nrows ? 0 : 1;
}
