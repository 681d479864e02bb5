/* softrdma compare: RoCEv2 against iWARP against the raw UDP / TCP floors, measured in one run
 * on the same path, with a terminal table, a JSON result (schema: report.h) and an HTML report.
 *
 * Every measurement is a server process and a client process, both this same executable
 * (/proc/self/exe): `softrdma lat` / `softrdma bw` for the RDMA transports, `softrdma compare
 * --floor` for raw sockets and `softrdma compare --setup` for connection set-up (floor.c). The
 * client writes a JSON file; this process reads it back (json.c) and gathers the figures. The
 * goodput-under-loss runs put the two processes in two network namespaces joined by a lossy
 * user-space link (lossy_link.c), so RoCE's go-back-N and kernel TCP's recovery see the same
 * random drops; without root that link is not there and only RoCE is measured, with softrdma's
 * own loss injection (SOFTRDMA_FAULT).
 *
 * Latency is reported as the round trip everywhere (softrdma lat's SEND figure is half of it,
 * as perftest's: doubled here). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/compare.h"
#include "tools/floor.h"
#include "tools/json.h"
#include "tools/leaders.h"
#include "tools/lossy_link.h"
#include "tools/report.h"
#include "tools/tools.h"
#include "tools/util.h"

enum tr { TR_ROCE, TR_IWARP, TR_UDP, TR_TCP, TR_COUNT };

static const struct {
	const char *id, *label, *kind, *dev_prefix;
} trs[TR_COUNT] = {
    [TR_ROCE] = {"roce", "RoCEv2", "rdma", "roce_"},
    [TR_IWARP] = {"iwarp", "iWARP", "rdma", "iwarp_"},
    [TR_UDP] = {"udp", "UDP (floor)", "floor", NULL},
    [TR_TCP] = {"tcp", "TCP (floor)", "floor", NULL},
};

#define LAT_SIZE   100
#define LOSS_SIZE  65536
#define CPU_BW_SZ  65536
#define MAX_SIZES  16
#define MAX_CDF	   128
#define N_LOSS	   4
#define ERR_LEN	   400
#define MAX_ERRORS 64

static const double loss_pcts[N_LOSS] = {0, 0.01, 0.1, 1};

struct lat_res {
	bool done, ok;
	char err[ERR_LEN];
	uint64_t samples;
	double min, p50, p90, p99, p999, max, mean, stdev, jitter; /* us, round trip */
	double cdf[MAX_CDF][2];
	int ncdf;
	double cpu_c, cpu_s; /* us per round trip */
};

struct bw_pt {
	bool done, ok;
	char err[ERR_LEN];
	double gbps, mpps, cpu_c, cpu_s;
};

struct setup_res {
	bool done, ok;
	char err[ERR_LEN];
	double samples, p50, p90, max;
};

struct loss_pt {
	bool done, ok;
	char err[ERR_LEN];
	double gbps;
};

struct opts {
	bool quick, quiet, no_loss, server;
	const char *host;   /* two hosts: the server's address */
	const char *listen; /* --server: the address it listens on */
	const char *token;  /* two hosts: what the client shows the server (NULL: none given) */
	double idle_s;	    /* --server: how long an idle client keeps it (0: not given) */
	const char *json_path, *html_path;
	int port;
	uint64_t lat_iters;
	double bw_seconds, loss_seconds;
	int setup_n;
	double timeout_s;
};

struct cmp {
	struct opts o;
	char self[PATH_MAX];
	char tmp[64];
	char started[32];
	uint64_t t0_ns;
	const char *addr; /* the server's address: 127.0.0.1, or the --server host */
	bool remote;	  /* two hosts: the server side runs on `compare --server` at addr */
	int ctl;	  /* remote: the control connection */
	char dev[2][64];  /* this side's RoCE and iWARP devices */
	char sdev[2][64]; /* the server side's */
	uint64_t sizes[MAX_SIZES];
	size_t nsizes;
	struct lat_res lat[TR_COUNT];
	struct bw_pt bw[TR_COUNT][MAX_SIZES];
	struct setup_res setup[TR_COUNT];
	struct loss_pt loss[TR_COUNT][N_LOSS];
	bool loss_tr[TR_COUNT]; /* measured under loss */
	char loss_link[256], loss_skip[256];
	struct lossy_link *link;
	char *errors[MAX_ERRORS];
	int nerrors;
	char *retried[MAX_ERRORS]; /* measurements whose server was not there: why, retried */
	int nretried;
	/* progress */
	int step, steps;
	bool tty;
	int port_next;
	int files;
};

static volatile sig_atomic_t stop_signal;
static pid_t live_pids[2];

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void add_to(char **list, int *n, const char *fmt, va_list ap)
{
	char *s = NULL;
	if (*n < MAX_ERRORS && vasprintf(&s, fmt, ap) >= 0)
		list[(*n)++] = s;
}

static void add_error(struct cmp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_error(struct cmp *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add_to(c->errors, &c->nerrors, fmt, ap);
	va_end(ap);
}

static void add_retried(struct cmp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_retried(struct cmp *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	add_to(c->retried, &c->nretried, fmt, ap);
	va_end(ap);
}

/* ---- progress ---- */

static void progress(struct cmp *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(struct cmp *c, const char *fmt, ...)
{
	if (c->o.quiet)
		return;
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	double el = (double)(tool_now_ns() - c->t0_ns) / 1e9;
	if (c->tty)
		fprintf(stderr, "\r\033[K[%3d/%d %5.0f s] %s", c->step + 1, c->steps, el, what);
	else
		fprintf(stderr, "[%3d/%d %5.0f s] %s\n", c->step + 1, c->steps, el, what);
	fflush(stderr);
}

static void progress_done(struct cmp *c)
{
	if (!c->o.quiet && c->tty)
		fputs("\r\033[K", stderr);
}

/* ---- child processes ---- */

struct child {
	pid_t pid;
	char log[PATH_MAX];
};

/* Environment and placement of one process of a pair. */
struct place {
	const char *transport; /* SOFTRDMA_TRANSPORT, or NULL */
	const char *fault;     /* SOFTRDMA_FAULT, or NULL */
	int side;	       /* the lossy link's namespace (0 or 1), or -1: this one */
};

/* The environment of a child: ours without SOFTRDMA_TRANSPORT / SOFTRDMA_FAULT, plus those of
 * pl. Built before fork: the lossy link's forwarder threads run in this process, so between
 * fork and exec the child does only async-signal-safe things (no malloc, no stdio). */
static char **child_env(const struct place *pl, char *tr, size_t trlen, char *fa, size_t falen)
{
	extern char **environ;
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 3, sizeof(*env));
	if (!env)
		return NULL;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "SOFTRDMA_TRANSPORT=", 19) &&
		    strncmp(environ[i], "SOFTRDMA_FAULT=", 15))
			env[k++] = environ[i];
	if (pl->transport) {
		snprintf(tr, trlen, "SOFTRDMA_TRANSPORT=%s", pl->transport);
		env[k++] = tr;
	}
	if (pl->fault) {
		snprintf(fa, falen, "SOFTRDMA_FAULT=%s", pl->fault);
		env[k++] = fa;
	}
	env[k] = NULL;
	return env;
}

static void say_safe(const char *a, const char *b)
{
	ssize_t r = write(2, a, strlen(a));
	r = write(2, b, strlen(b));
	r = write(2, "\n", 1);
	(void)r;
}

static int spawn(struct cmp *c, struct child *ch, const char *role, char **argv,
		 const struct place *pl)
{
	snprintf(ch->log, sizeof(ch->log), "%s/%d-%s.log", c->tmp, c->files++, role);
	char tr[64], fa[160];
	char **env = child_env(pl, tr, sizeof(tr), fa, sizeof(fa));
	if (!env)
		return -ENOMEM;
	int fd = open(ch->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;
		free(env);
		return -e;
	}
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old); /* no handler of ours runs in the child */
	pid_t pid = fork();
	if (pid == 0) {
		struct sigaction dfl = {.sa_handler = SIG_DFL};
		sigaction(SIGINT, &dfl, NULL);
		sigaction(SIGTERM, &dfl, NULL);
		sigprocmask(SIG_SETMASK, &old, NULL);
		int in = open("/dev/null", O_RDONLY);
		if (in < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || dup2(in, 0) < 0)
			_exit(126);
		if (pl->side >= 0 && lossy_link_enter(c->link, pl->side) < 0) {
			say_safe("error: cannot enter the link's network namespace", "");
			_exit(126);
		}
		execve(c->self, argv, env);
		say_safe("error: cannot run ", c->self);
		_exit(127);
	}
	int e = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	close(fd);
	free(env);
	if (pid < 0)
		return -e;
	ch->pid = pid;
	return 0;
}

/* Waits for ch until deadline (ns, now_ns clock). 0 with *status, -ETIMEDOUT, or -EINTR
 * (SIGINT / SIGTERM to this process). */
static int wait_child(struct child *ch, uint64_t deadline, int *status)
{
	for (;;) {
		pid_t r = waitpid(ch->pid, status, WNOHANG);
		if (r == ch->pid) {
			ch->pid = 0;
			return 0;
		}
		if (r < 0 && errno != EINTR) {
			ch->pid = 0;
			*status = 0;
			return -ECHILD;
		}
		if (stop_signal)
			return -EINTR;
		if (tool_now_ns() >= deadline)
			return -ETIMEDOUT;
		usleep(5000);
	}
}

static void kill_child(struct child *ch)
{
	if (ch->pid <= 0)
		return;
	kill(ch->pid, SIGTERM);
	int st;
	struct child tmp = *ch;
	if (wait_child(&tmp, tool_now_ns() + 2000000000ull, &st) != 0) {
		kill(ch->pid, SIGKILL);
		waitpid(ch->pid, &st, 0);
	}
	ch->pid = 0;
}

/* The most telling line of a child's output: the last one that says error/fail/cannot,
 * else the last line. */
static void log_reason(const char *path, char *out, size_t len)
{
	snprintf(out, len, "no output");
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char line[512], last[512] = "", tell[512] = "";
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!line[0])
			continue;
		snprintf(last, sizeof(last), "%s", line);
		if (strcasestr(line, "error") || strcasestr(line, "fail") ||
		    strcasestr(line, "cannot") || strcasestr(line, "timed out") ||
		    strcasestr(line, "vanished") || strcasestr(line, "no answer"))
			snprintf(tell, sizeof(tell), "%s", line);
	}
	fclose(f);
	const char *s = tell[0] ? tell : last;
	if (*s) {
		while (*s == ' ' || *s == '\t')
			s++;
		snprintf(out, len, "%s", s);
	}
}

static const char *status_str(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d", WTERMSIG(st));
	else
		snprintf(buf, len, "status %d", st);
	return buf;
}

/* The server side of a measurement: a child of ours, or one of the remote `compare --server`. */
struct server_side {
	struct child ch;
	bool remote;
};

static int server_start(struct cmp *c, struct server_side *ss, const struct srv_spec *spec,
			const char *roce_dev, const char *iwarp_dev, const struct place *sp,
			char *err, size_t errlen)
{
	ss->remote = c->remote;
	if (c->remote) {
		char text[CMP_LINE_MAX], reply[CMP_LINE_MAX];
		srv_spec_format(spec, text, sizeof(text));
		int r = line_write(c->ctl, "START %s", text);
		if (r == 0)
			r = line_read(c->ctl, reply, sizeof(reply), 15, &stop_signal);
		if (r == -EINTR)
			return r;
		if (r < 0) {
			snprintf(err, errlen, "the server %s: %s", c->addr,
				 r == -ETIMEDOUT ? "no answer" : "connection lost");
			return -1;
		}
		if (strcmp(reply, "STARTED")) {
			snprintf(err, errlen, "the server %s: %.150s", c->addr, reply);
			return -1;
		}
		return 0;
	}
	struct argv_b a;
	struct place pl = *sp;
	if (srv_argv(spec, roce_dev, iwarp_dev, &a, &pl.transport) < 0) {
		snprintf(err, errlen, "internal error: a bad server spec");
		return -1;
	}
	int r = spawn(c, &ss->ch, "server", a.v, &pl);
	if (r < 0) {
		snprintf(err, errlen, "cannot start the server: %s", strerror(-r));
		return -1;
	}
	live_pids[0] = ss->ch.pid;
	return 0;
}

/* Waits for the server side to end (it should be ending: its client has). 0 with *ok and
 * why (when not ok), or -EINTR. */
static int server_wait(struct cmp *c, struct server_side *ss, double timeout_s, bool *ok, char *why,
		       size_t len)
{
	*ok = false;
	if (ss->remote) {
		char reply[CMP_LINE_MAX];
		int r = line_write(c->ctl, "WAIT %.0f", timeout_s);
		if (r == 0)
			r = line_read(c->ctl, reply, sizeof(reply), timeout_s + 15, &stop_signal);
		if (r == -EINTR)
			return r;
		int status = -1, used = 0;
		if (r < 0 || sscanf(reply, "EXIT %d %n", &status, &used) < 1) {
			snprintf(why, len, "the server %s: %s", c->addr,
				 r < 0 ? "connection lost" : "a bad answer");
			return 0;
		}
		*ok = status == 0;
		snprintf(why, len, "exit %d: %.150s", status, reply + used);
		return 0;
	}
	int st = 0;
	int r = wait_child(&ss->ch, tool_now_ns() + (uint64_t)(timeout_s * 1e9), &st);
	if (r == -EINTR)
		return r;
	char a[40];
	*ok = r == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	if (!*ok) {
		char tell[300];
		log_reason(ss->ch.log, tell, sizeof(tell));
		snprintf(why, len, "%s: %.160s",
			 r == 0 ? status_str(st, a, sizeof(a)) : "did not end", tell);
	}
	return 0;
}

static void server_end(struct server_side *ss)
{
	if (ss->remote)
		return; /* WAIT killed it if it had to */
	kill_child(&ss->ch);
	live_pids[0] = 0;
	if (ss->ch.log[0])
		unlink(ss->ch.log);
}

/* Runs one measurement: the server side (spec, with the server's devices), then the client;
 * both must end well within timeout_s. Returns 0, -EINTR (stopped by a signal) or -1 with err
 * set. */
static int run_pair(struct cmp *c, const struct srv_spec *spec, const char *roce_dev,
		    const char *iwarp_dev, const struct place *sp, char **cargv,
		    const struct place *cp, double timeout_s, char *err, size_t errlen)
{
	struct server_side ss = {0};
	struct child k = {0};
	int r = server_start(c, &ss, spec, roce_dev, iwarp_dev, sp, err, errlen);
	if (r < 0)
		return r;
	usleep(30000); /* the client retries anyway; this saves its first 100 ms back-off */
	r = spawn(c, &k, "client", cargv, cp);
	if (r < 0) {
		snprintf(err, errlen, "cannot start the client: %s", strerror(-r));
		bool ok;
		char why[200];
		server_wait(c, &ss, 1, &ok, why, sizeof(why));
		server_end(&ss);
		return -1;
	}
	live_pids[1] = k.pid;
	int cst = 0;
	uint64_t deadline = tool_now_ns() + (uint64_t)(timeout_s * 1e9);
	int rc = wait_child(&k, deadline, &cst);
	bool sok = false;
	char swhy[300] = "";
	int rs =
	    rc == -EINTR ? -EINTR : server_wait(c, &ss, rc == 0 ? 5 : 1, &sok, swhy, sizeof(swhy));
	int ret = 0;
	char why[300], a[40];
	if (rc == -EINTR || rs == -EINTR) {
		ret = -EINTR;
	} else if (rc == -ETIMEDOUT) {
		log_reason(k.log, why, sizeof(why));
		snprintf(err, errlen, "no result within %.0f s (client: %.150s)", timeout_s, why);
		ret = -1;
	} else if (rc != 0 || !WIFEXITED(cst) || WEXITSTATUS(cst) != 0) {
		log_reason(k.log, why, sizeof(why));
		if (sok || !swhy[0])
			snprintf(err, errlen, "client %s: %.140s", status_str(cst, a, sizeof(a)),
				 why);
		else /* the server's reason is often the cause of the client's */
			snprintf(err, errlen, "client %s: %.150s; server %.150s",
				 status_str(cst, a, sizeof(a)), why, swhy);
		ret = -1;
	} else if (!sok) {
		snprintf(err, errlen, "server %.180s", swhy);
		ret = -1;
	}
	kill_child(&k);
	live_pids[1] = 0;
	server_end(&ss);
	unlink(k.log);
	return ret;
}

/* ---- reading the clients' JSON ---- */

static struct json *load_json(const char *path, char *err, size_t errlen)
{
	struct json *doc = NULL;
	struct json_error je;
	int r = json_parse_file(path, &doc, &je);
	if (r < 0) {
		snprintf(err, errlen, "unreadable result %s: %s (line %d, column %d)", path, je.msg,
			 je.line, je.column);
		return NULL;
	}
	const char *e = json_str(json_get(doc, "error"));
	if (e) {
		snprintf(err, errlen, "%s", e);
		json_free(doc);
		return NULL;
	}
	return doc;
}

static const struct json *first_row(const struct json *doc)
{
	return json_at(json_get(doc, "results"), 0);
}

/* A lat / floor-lat row into r; scale 2 for a half-round-trip figure. */
static int read_lat(const struct json *doc, struct lat_res *r, char *err, size_t errlen)
{
	const struct json *row = first_row(doc);
	if (!row) {
		snprintf(err, errlen, "no result row");
		return -1;
	}
	const char *what = json_str(json_get(doc, "latency"));
	double k = what && !strcmp(what, "half round trip") ? 2.0 : 1.0;
	r->samples = (uint64_t)json_num(json_get(row, "n_iterations"), 0);
	r->min = k * json_num(json_get(row, "t_min"), -1);
	r->max = k * json_num(json_get(row, "t_max"), -1);
	r->p50 = k * json_num(json_get(row, "t_typical"), -1);
	r->mean = k * json_num(json_get(row, "t_avg"), -1);
	r->stdev = k * json_num(json_get(row, "t_stdev"), -1);
	r->p99 = k * json_num(json_get(row, "percentile_99"), -1);
	r->p999 = k * json_num(json_get(row, "percentile_99.9"), -1);
	r->jitter = r->p99 - r->p50;
	r->cpu_c = json_num(json_get(row, "cpu_client_us"), -1);
	r->cpu_s = json_num(json_get(row, "cpu_server_us"), -1);
	const struct json *cdf = json_get(row, "cdf");
	r->ncdf = 0;
	r->p90 = -1;
	for (size_t i = 0; i < json_len(cdf) && r->ncdf < MAX_CDF; i++) {
		const struct json *pt = json_at(cdf, i);
		double v = json_num(json_at(pt, 0), -1), f = json_num(json_at(pt, 1), -1);
		if (v < 0 || f < 0 || f > 1)
			continue;
		r->cdf[r->ncdf][0] = k * v;
		r->cdf[r->ncdf][1] = f;
		r->ncdf++;
		if (f > 0.8999 && f < 0.9001)
			r->p90 = k * v;
	}
	if (r->samples == 0 || r->p50 <= 0 || r->min <= 0) {
		snprintf(err, errlen, "implausible figures in the result");
		return -1;
	}
	return 0;
}

static int read_bw(const struct json *doc, struct bw_pt *p, uint64_t size, char *err, size_t errlen)
{
	const struct json *row = first_row(doc);
	if (!row) {
		snprintf(err, errlen, "no result row");
		return -1;
	}
	double gbps = json_num(json_get(row, "gbps"), -1);
	if (gbps < 0) { /* softrdma bw: MiB/s (or Gbit/s with --report_gbits) */
		double v = json_num(json_get(row, "BW_average"), -1);
		const char *unit = json_str(json_get(row, "unit"));
		if (v >= 0)
			gbps = unit && strstr(unit, "Gb") ? v : v * 1048576.0 * 8 / 1e9;
	}
	p->gbps = gbps;
	p->mpps = json_num(json_get(row, "MsgRate"), -1);
	if (p->mpps < 0 && gbps > 0)
		p->mpps = gbps * 1e9 / 8 / (double)size / 1e6;
	p->cpu_c = json_num(json_get(row, "cpu_client_us"), -1);
	p->cpu_s = json_num(json_get(row, "cpu_server_us"), -1);
	if (!(gbps > 0)) {
		snprintf(err, errlen, "no bandwidth in the result");
		return -1;
	}
	return 0;
}

/* ---- argument vectors ---- */

static int next_port(struct cmp *c)
{
	/* o.port itself is the control port of `compare --server` */
	int p = c->o.port + 1 + c->port_next;
	c->port_next = (c->port_next + 1) % 499;
	return p;
}

/* The device of transport t on the interface named ifname (lo on loopback). */
static void dev_name(enum tr t, const char *ifname, char *out, size_t len)
{
	snprintf(out, len, "%s%s", trs[t].dev_prefix, ifname);
}

/* ---- the measurements ---- */

/* One latency or bandwidth run of transport t ("lat" or "bw"): on the lossy link when on_link
 * (server on side 0, client on side 1), else between this host and the server (loopback, or
 * the remote `compare --server`). */
static int measure(struct cmp *c, enum tr t, const char *kind, uint64_t size, double seconds,
		   bool on_link, const char *fault, struct json **out, char *err, size_t errlen)
{
	struct argv_b k = {.n = 0};
	char json[PATH_MAX], sdev[2][64], cdev[2][64];
	snprintf(json, sizeof(json), "%s/%d-result.json", c->tmp, c->files++);
	unlink(json);
	bool lat = !strcmp(kind, "lat");
	struct srv_spec spec = {.port = next_port(c), .timeout_s = (int)c->o.timeout_s};
	const char *addr = on_link ? lossy_link_addr(c->link, 0) : c->addr;
	struct place sp = {.side = on_link ? 0 : -1, .fault = fault};
	struct place cp = {.side = on_link ? 1 : -1, .fault = fault};
	for (int i = 0; i < 2; i++) {
		enum tr r = i ? TR_IWARP : TR_ROCE;
		if (on_link) {
			dev_name(r, lossy_link_ifname(c->link, 0), sdev[i], sizeof(sdev[i]));
			dev_name(r, lossy_link_ifname(c->link, 1), cdev[i], sizeof(cdev[i]));
		} else {
			snprintf(sdev[i], sizeof(sdev[i]), "%s", c->sdev[i]);
			snprintf(cdev[i], sizeof(cdev[i]), "%s", c->dev[i]);
		}
	}
	av_add(&k, "softrdma");
	if (trs[t].dev_prefix) {
		spec.kind = lat ? SRV_LAT : SRV_BW;
		spec.iwarp = t == TR_IWARP;
		av_add(&k, "%s", kind);
		av_add(&k, "-d");
		av_add(&k, "%s", cdev[spec.iwarp]);
		if (lat) {
			av_add(&k, "--cdf");
		} else {
			av_add(&k, "-V");
			av_add(&k, "write");
		}
	} else {
		spec.kind = SRV_FLOOR;
		snprintf(spec.mode, sizeof(spec.mode), "%s-%s", t == TR_UDP ? "udp" : "tcp", kind);
		av_add(&k, "compare");
		av_add(&k, "--floor");
		av_add(&k, "%s", spec.mode);
		if (lat)
			av_add(&k, "--cdf");
	}
	av_add(&k, "-p");
	int port_arg = k.n;
	av_add(&k, "%d", spec.port);
	av_add(&k, "--timeout");
	av_add(&k, "%d", spec.timeout_s);
	av_add(&k, "-s");
	av_add(&k, "%llu", (unsigned long long)size);
	if (lat) {
		av_add(&k, "-n");
		av_add(&k, "%llu", (unsigned long long)c->o.lat_iters);
	} else {
		av_add(&k, "-D");
		av_add(&k, "%g", seconds);
	}
	av_add(&k, "--json");
	av_add(&k, "%s", json);
	av_add(&k, "%s", addr);
	double limit = (lat ? (double)c->o.lat_iters * 0.002 : seconds) + 2 * c->o.timeout_s + 10;
	int r = run_pair(c, &spec, sdev[0], sdev[1], &sp, k.v, &cp, limit, err, errlen);
	if (r == -1 && strstr(err, TOOL_NO_SERVER)) {
		/* Its server never listened (its port taken on the server's host, say): once more,
		 * on the next port; said in the result. */
		add_retried(c, "%s %s %llu B, port %d: %s", trs[t].label,
			    lat ? "latency" : "bandwidth", (unsigned long long)size, spec.port,
			    err);
		spec.port = next_port(c);
		snprintf(k.buf[port_arg], sizeof(k.buf[0]), "%d", spec.port);
		r = run_pair(c, &spec, sdev[0], sdev[1], &sp, k.v, &cp, limit, err, errlen);
	}
	if (r == 0) {
		*out = load_json(json, err, errlen);
		r = *out ? 0 : -1;
	}
	unlink(json);
	return r;
}

static int step_latency(struct cmp *c, enum tr t)
{
	struct lat_res *r = &c->lat[t];
	progress(c, "latency: %s, %d B round trips", trs[t].label, LAT_SIZE);
	struct json *doc = NULL;
	int ret = measure(c, t, "lat", LAT_SIZE, 0, false, NULL, &doc, r->err, sizeof(r->err));
	if (ret == -EINTR)
		return ret;
	r->done = true;
	r->ok = ret == 0 && read_lat(doc, r, r->err, sizeof(r->err)) == 0;
	if (!r->ok)
		add_error(c, "%s latency: %s", trs[t].label, r->err);
	json_free(doc);
	c->step++;
	return 0;
}

static void fmt_size(uint64_t s, char *out, size_t len)
{
	leaders_fmt_size(s, out, len);
}

static int step_bandwidth(struct cmp *c, enum tr t, size_t i)
{
	struct bw_pt *p = &c->bw[t][i];
	char sz[32];
	fmt_size(c->sizes[i], sz, sizeof(sz));
	progress(c, "bandwidth: %s, %s messages", trs[t].label, sz);
	struct json *doc = NULL;
	int ret = measure(c, t, "bw", c->sizes[i], c->o.bw_seconds, false, NULL, &doc, p->err,
			  sizeof(p->err));
	if (ret == -EINTR)
		return ret;
	p->done = true;
	p->ok = ret == 0 && read_bw(doc, p, c->sizes[i], p->err, sizeof(p->err)) == 0;
	if (!p->ok)
		add_error(c, "%s bandwidth %s: %s", trs[t].label, sz, p->err);
	json_free(doc);
	c->step++;
	return 0;
}

static int step_setup(struct cmp *c, enum tr t)
{
	struct setup_res *r = &c->setup[t];
	progress(c, "connection set-up: %s, %d connections", trs[t].label, c->o.setup_n);
	struct argv_b k = {.n = 0};
	char json[PATH_MAX];
	snprintf(json, sizeof(json), "%s/%d-setup.json", c->tmp, c->files++);
	struct srv_spec spec = {.kind = SRV_SETUP,
				.iwarp = t == TR_IWARP,
				.tcp = t == TR_TCP,
				.port = next_port(c),
				.n = c->o.setup_n,
				.timeout_s = (int)c->o.timeout_s};
	av_add(&k, "softrdma");
	av_add(&k, "compare");
	av_add(&k, "--setup");
	if (spec.tcp)
		av_add(&k, "--tcp");
	av_add(&k, "-p");
	av_add(&k, "%d", spec.port);
	av_add(&k, "-n");
	av_add(&k, "%d", spec.n);
	av_add(&k, "--timeout");
	av_add(&k, "%d", spec.timeout_s);
	av_add(&k, "--json");
	av_add(&k, "%s", json);
	av_add(&k, "%s", c->addr);
	struct place sp = {.side = -1};
	struct place cp = {.side = -1, .transport = spec.tcp ? NULL : trs[t].id};
	int ret = run_pair(c, &spec, c->sdev[0], c->sdev[1], &sp, k.v, &cp,
			   2 * c->o.timeout_s + c->o.setup_n * 0.5 + 10, r->err, sizeof(r->err));
	if (ret == -EINTR)
		return ret;
	r->done = true;
	struct json *doc = ret == 0 ? load_json(json, r->err, sizeof(r->err)) : NULL;
	if (doc) {
		r->samples = json_num(json_get(doc, "samples"), 0);
		r->p50 = json_num(json_get(doc, "p50_ms"), -1);
		r->p90 = json_num(json_get(doc, "p90_ms"), -1);
		r->max = json_num(json_get(doc, "max_ms"), -1);
		r->ok = r->samples > 0 && r->p50 > 0;
		if (!r->ok)
			snprintf(r->err, sizeof(r->err), "implausible figures in the result");
	}
	if (!r->ok)
		add_error(c, "%s set-up: %s", trs[t].label, r->err);
	json_free(doc);
	unlink(json);
	c->step++;
	return 0;
}

static int step_loss(struct cmp *c, enum tr t, int li)
{
	struct loss_pt *p = &c->loss[t][li];
	progress(c, "goodput under loss: %s, %g %% of packets dropped", trs[t].label,
		 loss_pcts[li]);
	char fault[64] = "";
	if (c->link) {
		lossy_link_set_loss(c->link, loss_pcts[li] / 100.0);
	} else if (loss_pcts[li] > 0) {
		snprintf(fault, sizeof(fault), "loss=%g%%,seed=%d", loss_pcts[li], 7 + li);
	}
	struct json *doc = NULL;
	int ret = measure(c, t, "bw", LOSS_SIZE, c->o.loss_seconds, c->link != NULL,
			  fault[0] ? fault : NULL, &doc, p->err, sizeof(p->err));
	if (ret == -EINTR)
		return ret;
	p->done = true;
	struct bw_pt b = {0};
	p->ok = ret == 0 && read_bw(doc, &b, LOSS_SIZE, p->err, sizeof(p->err)) == 0;
	p->gbps = b.gbps;
	if (!p->ok)
		add_error(c, "%s at %g %% loss: %s", trs[t].label, loss_pcts[li], p->err);
	json_free(doc);
	c->step++;
	return 0;
}

/* ---- the result as JSON ---- */

/* A number: JSON has no NaN or infinity; a missing figure (< 0) is null. */
static void sb_num(struct strbuf *s, const char *key, double v, const char *fmt)
{
	sb_add(s, "\"%s\": ", key);
	if (!(v >= 0) || v > 1e300)
		sb_add(s, "null");
	else
		sb_add(s, fmt, v);
}

static void host_facts(struct strbuf *s)
{
	struct utsname u;
	char host[256] = "", model[256] = "";
	gethostname(host, sizeof(host) - 1);
	uname(&u);
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		char line[512];
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "model name", 10)) {
				char *v = strchr(line, ':');
				if (v) {
					v += 1 + strspn(v + 1, " \t");
					v[strcspn(v, "\n")] = 0;
					snprintf(model, sizeof(model), "%s", v);
				}
				break;
			}
		fclose(f);
	}
	sb_add(s, "  \"host\": {\"name\": ");
	sb_json_str(s, host);
	sb_add(s, ", \"kernel\": ");
	sb_json_str(s, u.release);
	sb_add(s, ", \"cpus\": %ld, \"cpu_model\": ", sysconf(_SC_NPROCESSORS_ONLN));
	sb_json_str(s, model);
	sb_add(s, "},\n");
}

static bool any_ok_lat(const struct cmp *c)
{
	for (int t = 0; t < TR_COUNT; t++)
		if (c->lat[t].ok)
			return true;
	return false;
}

static void summary_sentences(const struct cmp *c, char out[][400], int *n);

static char *result_json(struct cmp *c, double duration_s)
{
	struct strbuf s = {0};
	sb_add(&s, "{\n  \"tool\": \"softrdma compare\",\n  \"schema\": 1,\n  \"started\": ");
	sb_json_str(&s, c->started);
	sb_add(&s, ",\n  \"duration_s\": %.1f,\n", duration_s);
	host_facts(&s);
	sb_add(&s, "  \"mode\": \"%s\",\n  \"quick\": %s,\n  \"server\": ",
	       c->remote ? "two hosts" : "loopback", c->o.quick ? "true" : "false");
	sb_json_str(&s, c->addr);
	sb_add(&s, ",\n  \"transports\": [\n");
	for (int t = 0; t < TR_COUNT; t++) {
		sb_add(&s, "    {\"id\": \"%s\", \"label\": \"%s\", \"kind\": \"%s\"", trs[t].id,
		       trs[t].label, trs[t].kind);
		if (trs[t].dev_prefix) {
			sb_add(&s, ", \"device\": ");
			sb_json_str(&s, c->dev[t == TR_IWARP]);
			if (c->remote) {
				sb_add(&s, ", \"server_device\": ");
				sb_json_str(&s, c->sdev[t == TR_IWARP]);
			}
		}
		sb_add(&s, "}%s\n", t + 1 < TR_COUNT ? "," : "");
	}
	sb_add(&s, "  ],\n");

	/* latency */
	sb_add(&s,
	       "  \"latency\": {\n    \"size\": %d,\n    \"what\": \"round trip of %d B: RC "
	       "SEND ping-pong (floors: datagram / write echo), both sides busy-polling, "
	       "%llu round trips\",\n    \"series\": [\n",
	       LAT_SIZE, LAT_SIZE, (unsigned long long)c->o.lat_iters);
	bool first = true;
	for (int t = 0; t < TR_COUNT; t++) {
		const struct lat_res *r = &c->lat[t];
		if (!r->done)
			continue;
		sb_add(&s, "%s      {\"transport\": \"%s\"", first ? "" : ",\n", trs[t].id);
		first = false;
		if (!r->ok) {
			sb_add(&s, ", \"error\": ");
			sb_json_str(&s, r->err);
			sb_add(&s, "}");
			continue;
		}
		sb_add(&s, ", \"samples\": %llu", (unsigned long long)r->samples);
		const struct {
			const char *k;
			double v;
		} f[] = {{"min_us", r->min},   {"p50_us", r->p50},     {"p90_us", r->p90},
			 {"p99_us", r->p99},   {"p999_us", r->p999},   {"max_us", r->max},
			 {"mean_us", r->mean}, {"stdev_us", r->stdev}, {"jitter_us", r->jitter}};
		for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
			sb_add(&s, ", ");
			sb_num(&s, f[i].k, f[i].v, "%.3f");
		}
		sb_add(&s, ",\n       \"cdf\": [");
		for (int i = 0; i < r->ncdf; i++)
			sb_add(&s, "%s[%.3f, %.4f]", i ? ", " : "", r->cdf[i][0], r->cdf[i][1]);
		sb_add(&s, "]}");
	}
	sb_add(&s, "\n    ]\n  },\n");

	/* bandwidth */
	sb_add(&s,
	       "  \"bandwidth\": {\n    \"what\": \"one direction, for %g s per size: RDMA "
	       "WRITE (128 in flight); floors: a TCP stream of writes, UDP datagrams of up to "
	       "4096 B (what arrives)\",\n    \"series\": [\n",
	       c->o.bw_seconds);
	first = true;
	for (int t = 0; t < TR_COUNT; t++) {
		bool any = false;
		for (size_t i = 0; i < c->nsizes; i++)
			any |= c->bw[t][i].done;
		if (!any)
			continue;
		sb_add(&s, "%s      {\"transport\": \"%s\", \"points\": [", first ? "" : ",\n",
		       trs[t].id);
		first = false;
		bool f2 = true;
		for (size_t i = 0; i < c->nsizes; i++) {
			const struct bw_pt *p = &c->bw[t][i];
			if (!p->done)
				continue;
			sb_add(&s, "%s\n        {\"size\": %llu, ", f2 ? "" : ",",
			       (unsigned long long)c->sizes[i]);
			f2 = false;
			if (!p->ok) {
				sb_add(&s, "\"error\": ");
				sb_json_str(&s, p->err);
			} else {
				sb_num(&s, "gbps", p->gbps, "%.4f");
				sb_add(&s, ", ");
				sb_num(&s, "mpps", p->mpps, "%.5f");
			}
			sb_add(&s, "}");
		}
		sb_add(&s, "]}");
	}
	sb_add(&s, "\n    ]\n  },\n");

	/* cpu */
	sb_add(&s, "  \"cpu\": {\n    \"what\": \"CPU time (user + system, all threads) per "
		   "message during the measurement; busy-polling sides spend their whole wait "
		   "here\",\n    \"series\": [\n");
	first = true;
	size_t bi = 0;
	for (size_t i = 0; i < c->nsizes; i++)
		if (c->sizes[i] == CPU_BW_SZ)
			bi = i + 1;
	for (int t = 0; t < TR_COUNT; t++) {
		if (c->lat[t].ok && c->lat[t].cpu_c >= 0) {
			sb_add(&s, "%s      {\"transport\": \"%s\", \"test\": \"latency %d B\", ",
			       first ? "" : ",\n", trs[t].id, LAT_SIZE);
			sb_num(&s, "client_us_per_msg", c->lat[t].cpu_c, "%.3f");
			sb_add(&s, ", ");
			sb_num(&s, "server_us_per_msg", c->lat[t].cpu_s, "%.3f");
			sb_add(&s, "}");
			first = false;
		}
		if (bi && c->bw[t][bi - 1].ok && c->bw[t][bi - 1].cpu_c >= 0) {
			sb_add(&s,
			       "%s      {\"transport\": \"%s\", \"test\": \"bandwidth 64 KiB\", ",
			       first ? "" : ",\n", trs[t].id);
			sb_num(&s, "client_us_per_msg", c->bw[t][bi - 1].cpu_c, "%.3f");
			sb_add(&s, ", ");
			sb_num(&s, "server_us_per_msg", c->bw[t][bi - 1].cpu_s, "%.3f");
			sb_add(&s, "}");
			first = false;
		}
	}
	sb_add(&s, "\n    ]\n  },\n");

	/* setup */
	sb_add(&s,
	       "  \"setup\": {\n    \"what\": \"connection set-up, %d connections: rdma_cm "
	       "resolve address + route + connect until ESTABLISHED, with a new RC QP; TCP: "
	       "connect() until the handshake is done\",\n    \"series\": [\n",
	       c->o.setup_n);
	first = true;
	for (int t = 0; t < TR_COUNT; t++) {
		const struct setup_res *r = &c->setup[t];
		if (!r->done)
			continue;
		sb_add(&s, "%s      {\"transport\": \"%s\", ", first ? "" : ",\n", trs[t].id);
		first = false;
		if (!r->ok) {
			sb_add(&s, "\"error\": ");
			sb_json_str(&s, r->err);
		} else {
			sb_add(&s, "\"samples\": %.0f, ", r->samples);
			sb_num(&s, "p50_ms", r->p50, "%.4f");
			sb_add(&s, ", ");
			sb_num(&s, "p90_ms", r->p90, "%.4f");
			sb_add(&s, ", ");
			sb_num(&s, "max_ms", r->max, "%.4f");
		}
		sb_add(&s, "}");
	}
	sb_add(&s, "\n    ]\n  },\n");

	/* loss */
	if (c->loss_skip[0] && !c->loss_tr[TR_ROCE]) {
		sb_add(&s, "  \"loss\": {\"skipped\": ");
		sb_json_str(&s, c->loss_skip);
		sb_add(&s, "},\n");
	} else {
		sb_add(&s, "  \"loss\": {\n    \"link\": ");
		sb_json_str(&s, c->loss_link);
		sb_add(&s,
		       ",\n    \"size\": %d,\n    \"what\": \"goodput of 64 KiB RDMA WRITEs "
		       "(floor: a TCP stream of 64 KiB writes; UDP does not retransmit and is "
		       "left out), %g s per point",
		       LOSS_SIZE, c->o.loss_seconds);
		if (c->loss_skip[0]) {
			sb_add(&s, "; ");
			for (const char *p = c->loss_skip; *p; p++)
				if (*p != '"' && *p != '\\')
					sb_add(&s, "%c", *p);
		}
		sb_add(&s, "\",\n    \"series\": [\n");
		first = true;
		for (int t = 0; t < TR_COUNT; t++) {
			if (!c->loss_tr[t])
				continue;
			sb_add(&s, "%s      {\"transport\": \"%s\", \"points\": [",
			       first ? "" : ",\n", trs[t].id);
			first = false;
			bool f2 = true;
			for (int li = 0; li < N_LOSS; li++) {
				const struct loss_pt *p = &c->loss[t][li];
				if (!p->done)
					continue;
				sb_add(&s, "%s{\"loss_pct\": %g, ", f2 ? "" : ", ", loss_pcts[li]);
				f2 = false;
				if (p->ok) {
					sb_num(&s, "gbps", p->gbps, "%.4f");
				} else {
					sb_add(&s, "\"error\": ");
					sb_json_str(&s, p->err);
				}
				sb_add(&s, "}");
			}
			sb_add(&s, "]}");
		}
		sb_add(&s, "\n    ]\n  },\n");
	}

	/* summary, errors */
	char sum[16][400];
	int ns = 0;
	summary_sentences(c, sum, &ns);
	sb_add(&s, "  \"summary\": [");
	for (int i = 0; i < ns; i++) {
		sb_add(&s, "%s\n    ", i ? "," : "");
		sb_json_str(&s, sum[i]);
	}
	sb_add(&s, "\n  ],\n  \"errors\": [");
	for (int i = 0; i < c->nerrors; i++) {
		sb_add(&s, "%s\n    ", i ? "," : "");
		sb_json_str(&s, c->errors[i]);
	}
	sb_add(&s, "%s],\n  \"retried\": [", c->nerrors ? "\n  " : "");
	for (int i = 0; i < c->nretried; i++) {
		sb_add(&s, "%s\n    ", i ? "," : "");
		sb_json_str(&s, c->retried[i]);
	}
	sb_add(&s, "%s]\n}\n", c->nretried ? "\n  " : "");
	if (s.oom) {
		free(s.p);
		return NULL;
	}
	return s.p;
}

/* ---- the summary: sentences from the figures ---- */

static double ratio(double a, double b)
{
	return a > 0 && b > 0 ? a / b : 0;
}

/* "1.4x" or "the same" for a / b (a >= b expected). */
static const char *times(double r, char *buf, size_t len)
{
	if (r < 1.05)
		snprintf(buf, len, "about the same as");
	else
		snprintf(buf, len, "%.1fx", r);
	return buf;
}

enum { PICK_NONE = -1, PICK_TIE = -2 };

static void summary_sentences(const struct cmp *c, char out[][400], int *n)
{
	*n = 0;
	const struct lat_res *ro = &c->lat[TR_ROCE], *iw = &c->lat[TR_IWARP];
	const struct lat_res *ud = &c->lat[TR_UDP], *tc = &c->lat[TR_TCP];
	char b1[32], b2[32];
	int pick_lat = PICK_NONE, pick_bw = PICK_NONE, pick_loss = PICK_NONE;
	if (ro->ok && iw->ok) {
		bool r_wins = ro->p50 <= iw->p50;
		const struct lat_res *w = r_wins ? ro : iw, *l = r_wins ? iw : ro;
		pick_lat = ratio(l->p50, w->p50) < 1.05 ? PICK_TIE : r_wins ? TR_ROCE : TR_IWARP;
		snprintf(out[(*n)++], 400,
			 "Latency (%d B round trip): %s is faster at the median, %.1f us against "
			 "%s's %.1f us (%.2fx); its jitter (p99 - p50) is %.1f us against %.1f us.",
			 LAT_SIZE, trs[r_wins ? TR_ROCE : TR_IWARP].label, w->p50,
			 trs[r_wins ? TR_IWARP : TR_ROCE].label, l->p50, ratio(l->p50, w->p50),
			 w->jitter, l->jitter);
		if (ud->ok && tc->ok)
			snprintf(
			    out[(*n)++], 400,
			    "Against the raw sockets on the same path: RoCEv2 costs %s the UDP "
			    "floor (%.1f us) and iWARP %s the TCP floor (%.1f us) at the median.",
			    times(ratio(ro->p50, ud->p50), b1, sizeof(b1)), ud->p50,
			    times(ratio(iw->p50, tc->p50), b2, sizeof(b2)), tc->p50);
	}
	/* bandwidth: small and large messages */
	if (c->nsizes) {
		size_t small = 0, large = c->nsizes - 1;
		const struct bw_pt *rs = &c->bw[TR_ROCE][small], *is = &c->bw[TR_IWARP][small];
		const struct bw_pt *rl = &c->bw[TR_ROCE][large], *il = &c->bw[TR_IWARP][large];
		char s1[32], s2[32];
		fmt_size(c->sizes[small], s1, sizeof(s1));
		fmt_size(c->sizes[large], s2, sizeof(s2));
		if (rs->ok && is->ok && rl->ok && il->ok) {
			bool r_small = rs->mpps >= is->mpps, r_large = rl->gbps >= il->gbps;
			pick_bw = r_large ? TR_ROCE : TR_IWARP;
			if (ratio(r_large ? rl->gbps : il->gbps, r_large ? il->gbps : rl->gbps) <
			    1.05)
				pick_bw = PICK_TIE;
			/* Who leads at which sizes: every change of leader, not only the first. */
			struct lead_pt pts[MAX_SIZES];
			size_t np = 0;
			for (size_t i = 0; i < c->nsizes && np < MAX_SIZES; i++, np++) {
				const struct bw_pt *a = &c->bw[TR_ROCE][i],
						   *b = &c->bw[TR_IWARP][i];
				pts[np] = (struct lead_pt){.size = c->sizes[i],
							   .ok = a->ok && b->ok,
							   .a = a->gbps,
							   .b = b->gbps};
			}
			char runs[200], cross[220] = "";
			if (leaders_text(pts, np, trs[TR_ROCE].label, trs[TR_IWARP].label, 0.05,
					 runs, sizeof(runs)) > 1)
				snprintf(cross, sizeof(cross), "; by size, %s", runs);
			double lr =
			    ratio(r_large ? rl->gbps : il->gbps, r_large ? il->gbps : rl->gbps);
			char lead[40];
			if (lr < 1.05)
				snprintf(lead, sizeof(lead), "within 5 %%: a tie");
			else
				snprintf(lead, sizeof(lead), "%.1fx", lr);
			snprintf(
			    out[(*n)++], 400,
			    "Bandwidth: with %s messages %s moves more (%.3f against %.3f million "
			    "messages/s)%s; with %s messages %s reaches %.2f Gbit/s against "
			    "%.2f Gbit/s (%s).",
			    s1, trs[r_small ? TR_ROCE : TR_IWARP].label,
			    r_small ? rs->mpps : is->mpps, r_small ? is->mpps : rs->mpps, cross, s2,
			    trs[r_large ? TR_ROCE : TR_IWARP].label, r_large ? rl->gbps : il->gbps,
			    r_large ? il->gbps : rl->gbps, lead);
		}
	}
	/* CPU */
	if (ro->ok && iw->ok && ro->cpu_c >= 0 && iw->cpu_c >= 0) {
		size_t bi = 0;
		for (size_t i = 0; i < c->nsizes; i++)
			if (c->sizes[i] == CPU_BW_SZ)
				bi = i + 1;
		const struct bw_pt *rb = bi ? &c->bw[TR_ROCE][bi - 1] : NULL;
		const struct bw_pt *ib = bi ? &c->bw[TR_IWARP][bi - 1] : NULL;
		if (rb && ib && rb->ok && ib->ok && rb->cpu_c >= 0 && ib->cpu_c >= 0) {
			double r = rb->cpu_c + rb->cpu_s, i = ib->cpu_c + ib->cpu_s;
			snprintf(
			    out[(*n)++], 400,
			    "CPU: moving 64 KiB costs %s %.1f us of CPU per message (both sides) "
			    "against %s's %.1f us; in the latency test both spin while they wait, "
			    "so there CPU follows the round trip.",
			    trs[r <= i ? TR_ROCE : TR_IWARP].label, r <= i ? r : i,
			    trs[r <= i ? TR_IWARP : TR_ROCE].label, r <= i ? i : r);
		}
	}
	/* setup */
	const struct setup_res *sr = &c->setup[TR_ROCE], *si = &c->setup[TR_IWARP];
	if (sr->ok && si->ok) {
		bool r = sr->p50 <= si->p50;
		snprintf(out[(*n)++], 400,
			 "Connection set-up through rdma_cm: %s connects in %.2f ms at the median, "
			 "%s in %.2f ms%s.",
			 trs[r ? TR_ROCE : TR_IWARP].label, r ? sr->p50 : si->p50,
			 trs[r ? TR_IWARP : TR_ROCE].label, r ? si->p50 : sr->p50,
			 c->setup[TR_TCP].ok ? " (a bare TCP connect: " : "");
		if (c->setup[TR_TCP].ok) {
			size_t l = strlen(out[*n - 1]);
			snprintf(out[*n - 1] + l - 1, 400 - l + 1, "%.2f ms).",
				 c->setup[TR_TCP].p50);
		}
	}
	/* loss: what is kept at the highest loss rate both measured */
	if (c->loss_tr[TR_ROCE] && c->loss_tr[TR_IWARP]) {
		const struct loss_pt *r0 = &c->loss[TR_ROCE][0], *i0 = &c->loss[TR_IWARP][0];
		for (int li = N_LOSS - 1; li > 0; li--) {
			const struct loss_pt *r = &c->loss[TR_ROCE][li],
					     *i = &c->loss[TR_IWARP][li];
			if (!r->done || !i->done || !r0->ok || !i0->ok)
				continue;
			double kr = r->ok ? r->gbps / r0->gbps : 0,
			       ki = i->ok ? i->gbps / i0->gbps : 0;
			pick_loss = kr >= ki ? TR_ROCE : TR_IWARP;
			if (r->ok && i->ok && ratio(kr > ki ? kr : ki, kr > ki ? ki : kr) < 1.05)
				pick_loss = PICK_TIE;
			char rt[120], it[120];
			if (r->ok)
				snprintf(rt, sizeof(rt),
					 "RoCEv2 keeps %.0f %% of its loss-free goodput "
					 "(%.2f Gbit/s)",
					 100 * kr, r->gbps);
			else
				snprintf(rt, sizeof(rt), "RoCEv2 fails (%.80s)", r->err);
			if (i->ok)
				snprintf(it, sizeof(it), "iWARP keeps %.0f %% (%.2f Gbit/s)",
					 100 * ki, i->gbps);
			else
				snprintf(it, sizeof(it), "iWARP fails (%.80s)", i->err);
			snprintf(
			    out[(*n)++], 400, "Under loss: at %g %% of packets dropped %s, %s%s",
			    loss_pcts[li], rt, it,
			    kr < ki ? " (go-back-N resends everything after a lost packet; TCP "
				      "resends the lost segment)."
				    : ".");
			break;
		}
	}
	/* which to choose */
	if (pick_lat != PICK_NONE || pick_bw != PICK_NONE || pick_loss != PICK_NONE) {
		char w[400] = "Which to choose on this path:";
		size_t l = strlen(w);
		const char *what[3] = {"small-message latency", "bulk transfers",
				       "where packets get lost"};
		int pick[3] = {pick_lat, pick_bw, pick_loss};
		/* One transport ahead on every count measured: say so once. */
		int same = PICK_NONE, counts = 0;
		bool one = true;
		for (int k = 0; k < 3; k++) {
			if (pick[k] == PICK_NONE)
				continue;
			counts++;
			if (pick[k] < 0 || (same >= 0 && pick[k] != same))
				one = false;
			same = pick[k];
		}
		if (one && counts > 1) {
			char list[120] = "";
			for (int k = 0, m = 0; k < 3; k++) {
				if (pick[k] == PICK_NONE)
					continue;
				size_t ll = strlen(list);
				bool last = k == 2 || (k == 1 && pick[2] == PICK_NONE);
				snprintf(list + ll, sizeof(list) - ll, "%s%s",
					 m++ ? (last ? " and " : ", ") : "", what[k]);
			}
			snprintf(
			    out[(*n)++], 400,
			    "Which to choose on this path: %s, on every count measured here (%s).",
			    trs[same].label, list);
			return;
		}
		for (int k = 0; k < 3 && l < sizeof(w); k++) {
			if (pick[k] == PICK_NONE)
				continue;
			l += (size_t)snprintf(w + l, sizeof(w) - l, " %s %s%s;",
					      pick[k] == PICK_TIE ? "either" : trs[pick[k]].label,
					      k == 2 ? "" : "for ", what[k]);
			if (pick[k] == PICK_TIE && l < sizeof(w) - 1)
				l += (size_t)snprintf(w + l - 1, sizeof(w) - l + 1,
						      " (within 5 %%);") -
				     1;
		}
		if (l < sizeof(w) && w[l - 1] == ';')
			w[l - 1] = '.';
		snprintf(out[(*n)++], 400, "%s", w);
	}
	if (*n == 0)
		snprintf(out[(*n)++], 400,
			 "Too little was measured for a comparison: see the errors.");
}

/* ---- the terminal table ---- */

static void cell(double v, const char *fmt)
{
	if (v >= 0)
		printf(fmt, v);
	else
		printf("%12s", "-");
}

static void print_table(const struct cmp *c, double duration_s)
{
	if (c->remote)
		printf("\nsoftrdma compare: this host (%s, %s) against %s (%s, %s), %.0f s%s\n\n",
		       c->dev[0], c->dev[1], c->addr, c->sdev[0], c->sdev[1], duration_s,
		       c->o.quick ? " (--quick)" : "");
	else
		printf("\nsoftrdma compare: loopback %s, %ld CPUs, %.0f s%s\n\n", c->addr,
		       sysconf(_SC_NPROCESSORS_ONLN), duration_s, c->o.quick ? " (--quick)" : "");
	printf("%-34s", "");
	for (int t = 0; t < TR_COUNT; t++)
		printf("%12s", trs[t].label);
	printf("\n");
	if (any_ok_lat(c)) {
		printf("Latency, %d B round trip [us]\n", LAT_SIZE);
		const char *names[] = {"  median", "  p99",
				       "  p99.9",  "  jitter (p99 - p50)",
				       "  stdev",  "  CPU per round trip, both sides"};
		for (int k = 0; k < 6; k++) {
			printf("%-34s", names[k]);
			for (int t = 0; t < TR_COUNT; t++) {
				const struct lat_res *r = &c->lat[t];
				double v = !r->ok   ? -1
					   : k == 0 ? r->p50
					   : k == 1 ? r->p99
					   : k == 2 ? r->p999
					   : k == 3 ? r->jitter
					   : k == 4 ? r->stdev
						    : (r->cpu_c >= 0 ? r->cpu_c + r->cpu_s : -1);
				cell(v, "%12.2f");
			}
			printf("\n");
		}
	}
	if (c->nsizes) {
		printf("Bandwidth, one direction [Gbit/s]\n");
		for (size_t i = 0; i < c->nsizes; i++) {
			char sz[32], lab[48];
			fmt_size(c->sizes[i], sz, sizeof(sz));
			snprintf(lab, sizeof(lab), "  %s", sz);
			printf("%-34s", lab);
			for (int t = 0; t < TR_COUNT; t++)
				cell(c->bw[t][i].ok ? c->bw[t][i].gbps : -1, "%12.3f");
			printf("\n");
		}
		char sz[32], lab[64];
		fmt_size(c->sizes[0], sz, sizeof(sz));
		snprintf(lab, sizeof(lab), "  message rate, %s [M/s]", sz);
		printf("%-34s", lab);
		for (int t = 0; t < TR_COUNT; t++)
			cell(c->bw[t][0].ok ? c->bw[t][0].mpps : -1, "%12.3f");
		printf("\n");
		for (size_t i = 0; i < c->nsizes; i++)
			if (c->sizes[i] == CPU_BW_SZ) {
				printf("%-34s", "  CPU per 64 KiB, both sides [us]");
				for (int t = 0; t < TR_COUNT; t++) {
					const struct bw_pt *p = &c->bw[t][i];
					cell(p->ok && p->cpu_c >= 0 ? p->cpu_c + p->cpu_s : -1,
					     "%12.2f");
				}
				printf("\n");
			}
	}
	bool any = false;
	for (int t = 0; t < TR_COUNT; t++)
		any |= c->setup[t].done;
	if (any) {
		printf("%-34s", "Connection set-up, median [ms]");
		for (int t = 0; t < TR_COUNT; t++)
			cell(c->setup[t].ok ? c->setup[t].p50 : -1, "%12.3f");
		printf("\n");
	}
	any = false;
	for (int t = 0; t < TR_COUNT; t++)
		any |= c->loss_tr[t];
	if (any) {
		printf("Goodput under loss, 64 KiB [Gbit/s]\n");
		for (int li = 0; li < N_LOSS; li++) {
			char lab[48];
			snprintf(lab, sizeof(lab), "  %g %% loss", loss_pcts[li]);
			printf("%-34s", lab);
			for (int t = 0; t < TR_COUNT; t++) {
				const struct loss_pt *p = &c->loss[t][li];
				if (c->loss_tr[t] && p->done && !p->ok)
					printf("%12s", "failed");
				else
					cell(c->loss_tr[t] && p->ok ? p->gbps : -1, "%12.3f");
			}
			printf("\n");
		}
		printf("  (%s)\n", c->loss_link);
	}
	if (c->loss_skip[0])
		printf("Loss: %s\n", c->loss_skip);
	char sum[16][400];
	int ns = 0;
	summary_sentences(c, sum, &ns);
	printf("\nSummary:\n");
	for (int i = 0; i < ns; i++)
		printf("  - %s\n", sum[i]);
	if (c->nerrors) {
		printf("\nErrors (%d):\n", c->nerrors);
		for (int i = 0; i < c->nerrors; i++)
			printf("  - %s\n", c->errors[i]);
	}
	if (c->nretried) {
		printf("\nRetried, their server not there at first (%d):\n", c->nretried);
		for (int i = 0; i < c->nretried; i++)
			printf("  - %s\n", c->retried[i]);
	}
}

/* ---- files ---- */

static int write_outputs(struct cmp *c, double duration_s)
{
	char *text = result_json(c, duration_s);
	if (!text) {
		fprintf(stderr, "softrdma compare: out of memory\n");
		return -1;
	}
	int ret = 0;
	FILE *f = fopen(c->o.json_path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "softrdma compare: cannot write %s: %s\n", c->o.json_path,
			strerror(errno));
		free(text);
		return -1;
	}
	struct json *doc = NULL;
	struct json_error je;
	if (json_parse(text, strlen(text), &doc, &je) < 0) {
		fprintf(stderr,
			"softrdma compare: internal error: the result is not JSON (%s at %d:%d)\n",
			je.msg, je.line, je.column);
		free(text);
		return -1;
	}
	free(text);
	f = fopen(c->o.html_path, "w");
	char err[256] = "";
	if (!f || report_html(doc, f, err, sizeof(err)) < 0) {
		fprintf(stderr, "softrdma compare: cannot write %s: %s\n", c->o.html_path,
			err[0] ? err : strerror(errno));
		ret = -1;
	}
	if (f && fclose(f) != 0 && ret == 0) {
		fprintf(stderr, "softrdma compare: cannot write %s: %s\n", c->o.html_path,
			strerror(errno));
		ret = -1;
	}
	json_free(doc);
	return ret;
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fputs(
	    "usage: softrdma compare [options]            on this host (loopback)\n"
	    "       softrdma compare --server [options]   two hosts: the server side\n"
	    "       softrdma compare [options] SERVER     two hosts: this side, against SERVER\n\n"
	    "Measures RoCEv2 against iWARP against raw UDP and TCP sockets on the same path, in "
	    "one\nrun, each as a server and a client process:\n"
	    "  - latency: 100 B round trips (RC SEND ping-pong; floors: echo), distribution and "
	    "jitter\n"
	    "  - bandwidth and message rate, RDMA WRITE 8 B .. 4 MiB (floors: UDP datagrams, a "
	    "TCP stream)\n"
	    "  - CPU time per message on each side\n"
	    "  - connection set-up time (rdma_cm; floor: TCP connect)\n"
	    "  - goodput under packet loss 0, 0.01, 0.1 and 1 %: go-back-N RoCE against "
	    "TCP-based iWARP\n"
	    "    (root: both through a lossy link between two network namespaces; otherwise "
	    "RoCE only,\n    with softrdma's loss injection; loopback runs only)\n"
	    "then prints a table and writes a JSON result and a self-contained HTML report.\n"
	    "On loopback the devices are roce_lo and iwarp_lo; between two hosts, those of the\n"
	    "interfaces that carry the connection to SERVER on each side.\n\n"
	    "  -Q, --quick             a short run (about half a minute): fewer sizes, shorter "
	    "runs\n"
	    "      --json FILE         the JSON result (default softrdma-compare.json)\n"
	    "      --html FILE         the HTML report (default softrdma-compare.html)\n"
	    "  -n, --iters N           latency round trips per transport (default 20000; "
	    "quick 3000)\n"
	    "  -D, --duration SECONDS  per bandwidth point (default 1; quick 0.3)\n"
	    "      --no-loss           skip the goodput-under-loss runs\n"
	    "      --server            serve the other host's runs (until Ctrl-C)\n"
	    "      --listen ADDR       --server: the address to listen on (default 127.0.0.1;\n"
	    "                          name this host's address on the link to the other)\n"
	    "      --token TOKEN       the secret a client must show --server (default: the\n"
	    "                          server makes one and prints it; or SOFTRDMA_COMPARE_TOKEN)\n"
	    "      --idle SECONDS      --server: a client silent this long is dropped (default "
	    "120)\n"
	    "  -p, --port PORT         the control port of --server (default 18600); the "
	    "measurements\n"
	    "                          use the 499 ports above it (on loopback too)\n"
	    "      --timeout SECONDS   a silent peer fails a step after this long (default 10)\n"
	    "  -q, --quiet             no progress display\n"
	    "      --scenario incast|victim|loss  instead: the fabrics under congestion or\n"
	    "                          random loss (a switch with PFC and ECN, root;\n"
	    "                          'compare --scenario incast --help')\n"
	    "  -h, --help              this text\n\n"
	    "Figures depend on the machine and its load: compare runs everything in one run so "
	    "that\nthe ratios between the columns hold. Exit status: 0 (all measured), 1 (a "
	    "step failed:\nsee the errors; the files are still written), 2 (bad usage), 130/143 "
	    "(SIGINT/SIGTERM).\n",
	    f);
}

/* A token: 8 .. 64 characters of [A-Za-z0-9_-] (one word of a control line). */
static bool token_ok(const char *t)
{
	size_t n = strlen(t);
	if (n < 8 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)t[i]) && t[i] != '-' && t[i] != '_')
			return false;
	return true;
}

static int parse_num(const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi))
		return -1;
	*out = v;
	return 0;
}

enum { O_JSON = 256, O_HTML, O_NOLOSS, O_TIMEOUT, O_SERVER, O_LISTEN, O_TOKEN, O_IDLE };

static int parse_args(struct opts *o, int argc, char **argv)
{
	static const struct option lo[] = {{"quick", no_argument, NULL, 'Q'},
					   {"json", required_argument, NULL, O_JSON},
					   {"html", required_argument, NULL, O_HTML},
					   {"iters", required_argument, NULL, 'n'},
					   {"duration", required_argument, NULL, 'D'},
					   {"no-loss", no_argument, NULL, O_NOLOSS},
					   {"server", no_argument, NULL, O_SERVER},
					   {"listen", required_argument, NULL, O_LISTEN},
					   {"token", required_argument, NULL, O_TOKEN},
					   {"idle", required_argument, NULL, O_IDLE},
					   {"port", required_argument, NULL, 'p'},
					   {"timeout", required_argument, NULL, O_TIMEOUT},
					   {"quiet", no_argument, NULL, 'q'},
					   {"help", no_argument, NULL, 'h'},
					   {NULL, 0, NULL, 0}};
	double iters = 0, dur = 0, v;
	*o = (struct opts){.json_path = "softrdma-compare.json",
			   .html_path = "softrdma-compare.html",
			   .port = 18600,
			   .timeout_s = 10};
	optind = 1;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, ":Qn:D:p:qh", lo, NULL)) != -1) {
		switch (ch) {
		case 'Q':
			o->quick = true;
			break;
		case O_JSON:
			o->json_path = optarg;
			break;
		case O_HTML:
			o->html_path = optarg;
			break;
		case 'n':
			if (parse_num(optarg, 10, 1e8, &iters)) {
				fprintf(stderr,
					"softrdma compare: -n wants 10 .. 100000000 round "
					"trips, not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'D':
			if (parse_num(optarg, 0.05, 3600, &dur)) {
				fprintf(stderr,
					"softrdma compare: -D wants 0.05 .. 3600 seconds, not "
					"'%s'\n",
					optarg);
				return 2;
			}
			break;
		case O_NOLOSS:
			o->no_loss = true;
			break;
		case O_SERVER:
			o->server = true;
			break;
		case O_LISTEN:
			o->listen = optarg;
			break;
		case O_TOKEN:
			o->token = optarg;
			break;
		case O_IDLE:
			if (parse_num(optarg, 1, 3600, &o->idle_s)) {
				fprintf(stderr,
					"softrdma compare: --idle wants 1 .. 3600 seconds, not "
					"'%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'p':
			if (parse_num(optarg, 1024, 65535 - 500, &v) || v != (int)v) {
				fprintf(stderr,
					"softrdma compare: -p wants a port 1024 .. 65035, not "
					"'%s'\n",
					optarg);
				return 2;
			}
			o->port = (int)v;
			break;
		case O_TIMEOUT:
			if (parse_num(optarg, 1, 600, &o->timeout_s)) {
				fprintf(stderr,
					"softrdma compare: --timeout wants 1 .. 600 seconds, "
					"not '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case ':':
			fprintf(stderr, "softrdma compare: %s needs a value\n", argv[optind - 1]);
			goto hint;
		default:
			fprintf(stderr, "softrdma compare: unknown option '%s'\n",
				argv[optind - 1]);
			goto hint;
		}
	}
	if (optind < argc)
		o->host = argv[optind++];
	if (optind < argc) {
		fprintf(stderr,
			"softrdma compare: one server address at most (got '%s' and '%s')\n",
			o->host, argv[optind]);
		goto hint;
	}
	if (o->server && o->host) {
		fprintf(stderr, "softrdma compare: --server takes no address (the client names the "
				"server; --listen names the address to listen on)\n");
		goto hint;
	}
	if (!o->server && (o->listen || o->idle_s)) {
		fprintf(stderr, "softrdma compare: --listen and --idle are options of --server\n");
		goto hint;
	}
	if (!o->idle_s)
		o->idle_s = 120;
	if (!o->token) {
		const char *t = getenv("SOFTRDMA_COMPARE_TOKEN");
		o->token = t && *t ? t : NULL;
	}
	if (o->token && !token_ok(o->token)) {
		fprintf(stderr,
			"softrdma compare: a token is 8 .. 64 letters, digits, '-' or '_', not "
			"'%s'\n",
			o->token);
		return 2;
	}
	if (o->host && !o->token) {
		fprintf(stderr, "softrdma compare: two hosts need the token that 'softrdma compare "
				"--server' printed (--token TOKEN, or SOFTRDMA_COMPARE_TOKEN)\n");
		return 2;
	}
	o->lat_iters = iters ? (uint64_t)iters : o->quick ? 3000 : 20000;
	o->bw_seconds = dur ? dur : o->quick ? 0.3 : 1;
	o->loss_seconds = o->quick ? 0.5 : 2;
	o->setup_n = o->quick ? 5 : 20;
	return 0;
hint:
	fputs("Run 'softrdma compare --help' for the options.\n", stderr);
	return 2;
}

/* ---- the run ---- */

static void cleanup(struct cmp *c)
{
	for (int i = 0; i < 2; i++)
		if (live_pids[i] > 0) {
			struct child ch = {.pid = live_pids[i]};
			kill_child(&ch);
			live_pids[i] = 0;
		}
	lossy_link_destroy(c->link);
	c->link = NULL;
	if (c->ctl >= 0) {
		line_write(c->ctl, "BYE");
		close(c->ctl);
		c->ctl = -1;
	}
	if (c->tmp[0])
		rmdir(c->tmp); /* the steps remove their own files */
	for (int i = 0; i < c->nerrors; i++)
		free(c->errors[i]);
	for (int i = 0; i < c->nretried; i++)
		free(c->retried[i]);
}

/* The RDMA steps need roce_lo and iwarp_lo: a clear message up front instead of a failure in
 * every step. */
static bool devices_there(char *why, size_t len)
{
	const char *missing = !device_exists("roce_lo")	   ? "roce_lo"
			      : !device_exists("iwarp_lo") ? "iwarp_lo"
							   : NULL;
	if (!missing)
		return true;
	snprintf(why, len,
		 "no %s device: loopback needs an IPv4 address (is lo up with 127.0.0.1? "
		 "'softrdma devices' lists what there is)",
		 missing);
	return false;
}

static int run(struct cmp *c)
{
	static const uint64_t full[] = {8, 64, 512, 4096, 65536, 262144, 1048576, 4194304};
	static const uint64_t quick[] = {8, 4096, 65536, 1048576};
	const uint64_t *sz = c->o.quick ? quick : full;
	c->nsizes = c->o.quick ? sizeof(quick) / sizeof(quick[0]) : sizeof(full) / sizeof(full[0]);
	memcpy(c->sizes, sz, c->nsizes * sizeof(sz[0]));

	char why[256];
	bool link_ok = false;
	if (c->remote) {
		snprintf(c->loss_skip, sizeof(c->loss_skip),
			 "not measured between two hosts (the lossy link is for loopback runs; run "
			 "compare on one host for it)");
	} else if (!c->o.no_loss) {
		if (lossy_link_available(why, sizeof(why)) == 0) {
			struct lossy_link_cfg cfg = {.loss = 0, .seed = 4791, .mtu = 9000};
			char err[256] = "";
			if (lossy_link_create(&c->link, &cfg, err, sizeof(err)) == 0) {
				link_ok = true;
				snprintf(
				    c->loss_link, sizeof(c->loss_link),
				    "two network namespaces joined by TUN devices (MTU 9000: RoCE "
				    "MTU 4096) "
				    "through a user-space forwarder that drops packets at random, "
				    "each direction");
			} else {
				snprintf(why, sizeof(why), "the lossy link failed: %.200s", err);
			}
		}
		if (!link_ok) {
			snprintf(c->loss_link, sizeof(c->loss_link),
				 "loopback with softrdma's own loss injection (SOFTRDMA_FAULT) in "
				 "both processes");
			snprintf(c->loss_skip, sizeof(c->loss_skip),
				 "iWARP and TCP not measured under loss: kernel TCP needs a lossy "
				 "link (%.150s)",
				 why);
		}
		c->loss_tr[TR_ROCE] = true;
		c->loss_tr[TR_IWARP] = c->loss_tr[TR_TCP] = link_ok;
	} else {
		snprintf(c->loss_skip, sizeof(c->loss_skip), "not measured (--no-loss)");
	}
	int nloss = 0;
	for (int t = 0; t < TR_COUNT; t++)
		nloss += c->loss_tr[t] ? N_LOSS : 0;
	c->steps = TR_COUNT + TR_COUNT * (int)c->nsizes + 3 + nloss;

	for (int t = 0; t < TR_COUNT; t++)
		if (step_latency(c, t) == -EINTR)
			return -EINTR;
	for (int t = 0; t < TR_COUNT; t++)
		for (size_t i = 0; i < c->nsizes; i++)
			if (step_bandwidth(c, t, i) == -EINTR)
				return -EINTR;
	for (int t = 0; t < TR_COUNT; t++)
		if (t != TR_UDP && step_setup(c, t) == -EINTR)
			return -EINTR;
	for (int li = 0; li < N_LOSS; li++)
		for (int t = 0; t < TR_COUNT; t++)
			if (c->loss_tr[t] && step_loss(c, t, li) == -EINTR)
				return -EINTR;
	progress_done(c);
	return 0;
}

static bool o_remote_or_server(const struct opts *o)
{
	return o->host || o->server;
}

/* ---- two hosts: the server side ---- */

/* Whether the measurement ch still runs (not reaped: wait_child still gets its status). */
static bool child_running(const struct child *ch)
{
	siginfo_t si = {0};
	return ch->pid > 0 && waitid(P_PID, (id_t)ch->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	       si.si_pid == 0;
}

/* The first line of a session: "HELLO 2 <token>" with the server's token. NULL if it is, else
 * why not. The comparison takes the same time wherever the tokens differ. */
static const char *hello_check(const struct cmp *c, const char *line)
{
	if (!strcmp(line, "HELLO 1"))
		return "this server wants a token: a newer softrdma on the client, with --token";
	if (strncmp(line, "HELLO 2 ", 8))
		return "HELLO with the token first";
	const char *t = line + 8;
	size_t n = strlen(t), m = strlen(c->o.token);
	unsigned diff = n != m;
	for (size_t i = 0; i < m; i++)
		diff |= (unsigned char)c->o.token[i] ^ (unsigned char)(i < n ? t[i] : 0);
	return diff ? "wrong token" : NULL;
}

/* One client's session; returns when it leaves, misbehaves, or on SIGINT / SIGTERM (-EINTR). */
static int serve_session(struct cmp *c, int fd, const char *peer)
{
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	char why[256] = "", line[CMP_LINE_MAX];
	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    local_devices((struct sockaddr *)&me, c->sdev[0], c->sdev[1], sizeof(c->sdev[0]), why,
			  sizeof(why)) < 0) {
		if (!why[0])
			snprintf(why, sizeof(why), "%s", strerror(errno));
		printf("%s: refused: %s\n", peer, why);
		line_write(fd, "ERR %s", why);
		return 0;
	}
	/* What it starts listens where this client reached us (tool_listen_addr). */
	char here[INET6_ADDRSTRLEN];
	addr_text((struct sockaddr *)&me, here, sizeof(here));
	setenv("SOFTRDMA_TOOL_BIND", here, 1);
	struct child ch = {0};
	int ret = 0;
	bool hello = false; /* the client showed the token */
	for (;;) {
		/* Until its HELLO a client has a few seconds; then --idle between commands,
		 * longer only while a measurement it started still runs. */
		double limit = hello ? c->o.idle_s : (c->o.idle_s < 10 ? c->o.idle_s : 10);
		int r = line_read(fd, line, sizeof(line), limit, &stop_signal);
		while (r == -ETIMEDOUT && hello && child_running(&ch))
			r = line_read(fd, line, sizeof(line), limit, &stop_signal);
		if (r == -EINTR) {
			ret = r;
			break;
		}
		if (r < 0) {
			printf("%s: %s\n", peer,
			       r == -ECONNRESET	 ? "left"
			       : r == -ETIMEDOUT ? "silent too long: dropped"
						 : "sent a bad line: dropped");
			break;
		}
		struct srv_spec spec;
		double secs;
		if (!hello) {
			const char *why_not = hello_check(c, line);
			if (why_not) {
				line_write(fd, "ERR %s", why_not);
				printf("%s: refused: %s\n", peer, why_not);
				break;
			}
			hello = true;
			line_write(fd, "OK 2 %s %s", c->sdev[0], c->sdev[1]);
			printf("%s: connected (devices %s, %s)\n", peer, c->sdev[0], c->sdev[1]);
		} else if (!strncmp(line, "START ", 6)) {
			struct argv_b a;
			struct place pl = {.side = -1};
			if (ch.pid > 0) {
				line_write(fd, "ERR a measurement is running already");
				continue;
			}
			if (srv_spec_parse(line + 6, &spec) < 0 ||
			    srv_argv(&spec, c->sdev[0], c->sdev[1], &a, &pl.transport) < 0) {
				line_write(fd, "ERR bad START");
				printf("%s: bad START: dropped\n", peer);
				break;
			}
			if (spec.port <= c->o.port || spec.port > c->o.port + 499) {
				line_write(fd, "ERR port %d is not one of %d..%d", spec.port,
					   c->o.port + 1, c->o.port + 499);
				printf("%s: START on port %d, outside %d..%d: dropped\n", peer,
				       spec.port, c->o.port + 1, c->o.port + 499);
				break;
			}
			r = spawn(c, &ch, "server", a.v, &pl);
			if (r < 0) {
				line_write(fd, "ERR cannot start: %s", strerror(-r));
				continue;
			}
			live_pids[0] = ch.pid;
			if (!c->o.quiet) {
				printf("%s: running", peer);
				for (int i = 0; i < a.n; i++)
					printf(" %s", a.v[i]);
				printf("\n");
			}
			line_write(fd, "STARTED");
		} else if (sscanf(line, "WAIT %lf", &secs) == 1) {
			if (ch.pid <= 0) {
				line_write(fd, "EXIT -1 nothing is running");
				continue;
			}
			if (!(secs >= 0 && secs <= 600))
				secs = 600;
			int st = 0;
			r = wait_child(&ch, tool_now_ns() + (uint64_t)(secs * 1e9), &st);
			if (r == -EINTR) {
				ret = r;
				break;
			}
			char tell[200] = "", a[40];
			int status = r == 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
			if (status != 0) {
				log_reason(ch.log, tell, sizeof(tell));
				if (r == 0 && !WIFEXITED(st))
					snprintf(tell, sizeof(tell), "%s",
						 status_str(st, a, sizeof(a)));
				else if (r != 0)
					snprintf(tell, sizeof(tell), "did not end within %.0f s",
						 secs);
			}
			kill_child(&ch);
			live_pids[0] = 0;
			unlink(ch.log);
			line_write(fd, "EXIT %d %s", status, tell);
		} else if (!strcmp(line, "BYE")) {
			printf("%s: done\n", peer);
			break;
		} else {
			line_write(fd, "ERR unknown command");
			printf("%s: unknown command: dropped\n", peer);
			break;
		}
		fflush(stdout);
	}
	kill_child(&ch);
	live_pids[0] = 0;
	if (ch.log[0])
		unlink(ch.log);
	fflush(stdout);
	return ret;
}

/* `softrdma compare --server`: serves clients one after the other until SIGINT / SIGTERM. */
static int serve(struct cmp *c)
{
	const char *addr = c->o.listen ? c->o.listen : "127.0.0.1";
	struct sockaddr_storage sa;
	socklen_t sl = tool_addr(addr, (uint16_t)c->o.port, &sa);
	if (!sl) {
		fprintf(stderr,
			"softrdma compare --server: --listen wants an IPv4 or IPv6 address of "
			"this host, not '%s'\n",
			addr);
		return 2;
	}
	char made[33];
	if (!c->o.token) {
		uint8_t rnd[16];
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			fprintf(stderr, "softrdma compare --server: no random token: %s\n",
				strerror(errno));
			return 1;
		}
		for (int i = 0; i < 16; i++)
			snprintf(made + 2 * i, 3, "%02x", rnd[i]);
		c->o.token = made;
	}
	int one = 1, zero = 0, fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && sa.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) < 0 || listen(fd, 4) < 0) {
		fprintf(stderr, "softrdma compare --server: cannot listen on %s port %d: %s\n",
			addr, c->o.port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	printf("softrdma compare --server: waiting for clients on %s TCP port %d (measurements "
	       "on ports %d..%d; Ctrl-C to stop)\n",
	       addr, c->o.port, c->o.port + 1, c->o.port + 499);
	if (c->o.token == made)
		printf("softrdma compare --server: clients need this token: --token %s (or "
		       "SOFTRDMA_COMPARE_TOKEN)\n",
		       made);
	fflush(stdout);
	int ret = 0;
	while (!stop_signal) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 200) <= 0)
			continue;
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		int cfd = accept4(fd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);
		if (cfd < 0)
			continue;
		char host[INET6_ADDRSTRLEN + 8] = "?";
		getnameinfo((struct sockaddr *)&peer, pl, host, sizeof(host), NULL, 0,
			    NI_NUMERICHOST);
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ret = serve_session(c, cfd, host);
		close(cfd);
		if (ret == -EINTR)
			break;
	}
	close(fd);
	int sig = stop_signal;
	printf("softrdma compare --server: stopped\n");
	return sig == SIGTERM ? 143 : 130;
}

/* Two hosts, this side: the control connection and both sides' devices. */
static int connect_server(struct cmp *c)
{
	char err[256], line[CMP_LINE_MAX];
	int fd = tcp_dial(c->addr, c->o.port, c->o.timeout_s, &stop_signal, err, sizeof(err));
	if (fd < 0) {
		fprintf(stderr,
			"softrdma compare: %s (is 'softrdma compare --server' running there?)\n",
			err);
		return fd == -EINTR ? fd : -1;
	}
	c->ctl = fd;
	int r = line_write(fd, "HELLO 2 %s", c->o.token);
	if (r == 0)
		r = line_read(fd, line, sizeof(line), c->o.timeout_s, &stop_signal);
	if (r == -EINTR)
		return r;
	char roce[64], iwarp[64];
	if (r < 0 || sscanf(line, "OK 2 %63s %63s", roce, iwarp) != 2) {
		fprintf(stderr, "softrdma compare: the server %s port %d: %s\n", c->addr, c->o.port,
			r < 0 ? "no answer" : line);
		return -1;
	}
	snprintf(c->sdev[0], sizeof(c->sdev[0]), "%s", roce);
	snprintf(c->sdev[1], sizeof(c->sdev[1]), "%s", iwarp);
	struct sockaddr_storage me;
	socklen_t ml = sizeof(me);
	if (getsockname(fd, (struct sockaddr *)&me, &ml) < 0 ||
	    local_devices((struct sockaddr *)&me, c->dev[0], c->dev[1], sizeof(c->dev[0]), err,
			  sizeof(err)) < 0) {
		fprintf(stderr, "softrdma compare: this side: %s\n", err);
		return -1;
	}
	return 0;
}

int cmd_compare(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--floor"))
		return floor_main(argc - 1, argv + 1);
	if (argc > 1 && !strcmp(argv[1], "--setup"))
		return setup_main(argc - 1, argv + 1);
	for (int i = 1; i < argc; i++)
		if (!strncmp(argv[i], "--scenario", 10))
			return scenario_main(argc, argv);
	static struct cmp c; /* large: not on the stack */
	memset(&c, 0, sizeof(c));
	int r = parse_args(&c.o, argc, argv);
	if (r)
		return r == 1 ? 0 : 2;
	char why[256];
	if (!o_remote_or_server(&c.o) && !devices_there(why, sizeof(why))) {
		fprintf(stderr, "softrdma compare: %s\n", why);
		return 1;
	}
	if (tool_self_and_tmpdir("compare", c.self, sizeof(c.self), c.tmp, sizeof(c.tmp),
				 "/tmp/softrdma-compare.XXXXXX"))
		return 1;
	c.addr = c.o.host ? c.o.host : "127.0.0.1";
	c.ctl = -1;
	c.remote = c.o.host != NULL;
	for (int i = 0; i < 2; i++) {
		snprintf(c.dev[i], sizeof(c.dev[i]), "%slo", i ? "iwarp_" : "roce_");
		snprintf(c.sdev[i], sizeof(c.sdev[i]), "%s", c.dev[i]);
	}
	c.tty = isatty(2);
	c.t0_ns = tool_now_ns();
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(c.started, sizeof(c.started), "%Y-%m-%dT%H:%M:%SZ", &tm);
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (c.o.server) {
		r = serve(&c);
		cleanup(&c);
		return r;
	}
	if (c.remote) {
		r = connect_server(&c);
		if (r < 0) {
			cleanup(&c);
			return r == -EINTR ? (stop_signal == SIGTERM ? 143 : 130) : 1;
		}
	}
	r = run(&c);
	double duration = (double)(tool_now_ns() - c.t0_ns) / 1e9;
	if (r == -EINTR) {
		progress_done(&c);
		int sig = stop_signal;
		cleanup(&c);
		fprintf(stderr, "softrdma compare: stopped by %s; nothing written\n",
			sig == SIGINT ? "SIGINT" : "SIGTERM");
		return sig == SIGINT ? 130 : 143;
	}
	lossy_link_destroy(c.link);
	c.link = NULL;
	print_table(&c, duration);
	int w = write_outputs(&c, duration);
	if (w == 0)
		printf("\nWritten: %s (the result), %s (the report)\n", c.o.json_path,
		       c.o.html_path);
	int errors = c.nerrors;
	cleanup(&c);
	return w < 0 || errors ? 1 : 0;
}
