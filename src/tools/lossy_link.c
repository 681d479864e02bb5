/* A lossy IPv4 link in user space: two namespaces, two TUN devices, a forwarder that drops
 * (lossy_link.h). */
#define _GNU_SOURCE
#include "tools/lossy_link.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define NETNS_DIR   "/run/netns"
#define NS_PREFIX   "srlink"
#define IF_PREFIX   "srl"
#define SUBNET_A    10
#define SUBNET_B    213
#define IP_TIMEOUT  10000 /* ms an `ip` command may take before we kill it */
#define PKT_BUF	    65536 /* a TUN read never returns more than this */
#define BURST	    256	  /* packets per direction before polling again (to see the stop) */
#define CAP_NET_ADM 12	  /* linux/capability.h: CAP_NET_ADMIN, CAP_SYS_ADMIN */
#define CAP_SYS_ADM 21

struct direction {
	struct lossy_link *link;
	int in, out; /* TUN fds: read from in, write to out */
	uint64_t rng;
	_Atomic uint64_t fwd, dropped, bytes, errors;
	uint8_t *buf; /* PKT_BUF bytes, allocated at create: no allocation per packet */
	pthread_t thread;
	bool started;
};

struct lossy_link {
	char ns[2][32];
	char ifname[2][IFNAMSIZ];
	char addr[2][INET_ADDRSTRLEN];
	int tun[2];
	int nsfd[2];   /* the namespaces, for setns() */
	int procfd[2]; /* /proc/net/dev of each namespace, for the TUN queue drops */
	bool ns_made[2];
	int stopfd; /* eventfd: readable once destroy starts */
	/* Drop when a 64-bit random draw is below this; UINT64_MAX for loss 1. */
	_Atomic uint64_t threshold;
	struct direction dir[2];
};

static _Atomic unsigned link_seq;

static void say(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	if (!buf || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

/* splitmix64: tiny, seedable from any value, and good enough to drop packets uniformly. */
static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t loss_threshold(double loss)
{
	if (loss >= 1.0)
		return UINT64_MAX;
	/* 2^64 as a double; the product is below it, so the conversion is defined. */
	return (uint64_t)(loss * 18446744073709551616.0);
}

static bool valid_loss(double loss)
{
	return loss >= 0.0 && loss <= 1.0; /* false for NaN too */
}

/* ---- running `ip` ---- */

static const char *ip_path(void)
{
	static const char *const paths[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs `ip args...` (NULL-terminated, no shell) and waits for it, IP_TIMEOUT at most. 0 on exit
 * status 0; otherwise -EIO with the command and its stderr in err. */
static int run_ip(char *err, size_t errlen, const char *const *args)
{
	const char *argv[16];
	const char *ip = ip_path();
	posix_spawn_file_actions_t fa;
	char out[512] = "";
	size_t outlen = 0;
	int pipefd[2], status = 0, rc;
	pid_t pid;
	size_t n = 0;

	if (!ip) {
		say(err, errlen, "the `ip` command (iproute2) is not installed");
		return -ENOENT;
	}
	argv[n++] = "ip";
	for (; args[n - 1] && n < sizeof(argv) / sizeof(argv[0]) - 1; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	rc = posix_spawn(&pid, ip, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		say(err, errlen, "cannot run %s: %s", ip, strerror(rc));
		return -rc;
	}
	/* Collect its output until it closes the pipe (exits), with a deadline. */
	int64_t deadline = now_ms() + IP_TIMEOUT;
	for (;;) {
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		int64_t left = deadline - now_ms();
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			kill(pid, SIGKILL);
			snprintf(out, sizeof(out), "(timed out)");
			break;
		}
		char tmp[256];
		ssize_t r = read(pipefd[0], tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		size_t k =
		    (size_t)r < sizeof(out) - 1 - outlen ? (size_t)r : sizeof(out) - 1 - outlen;
		memcpy(out + outlen, tmp, k);
		outlen += k;
		out[outlen] = '\0';
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = -1; /* someone else reaped it: we cannot know it succeeded */
			break;
		}
	}
	if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	while (outlen && (out[outlen - 1] == '\n' || out[outlen - 1] == ' '))
		out[--outlen] = '\0';
	char cmd[256] = "ip";
	for (size_t i = 1; argv[i]; i++) {
		size_t c = strlen(cmd);
		snprintf(cmd + c, sizeof(cmd) - c, " %s", argv[i]);
	}
	say(err, errlen, "`%s` failed: %s", cmd, outlen ? out : "(no message)");
	return -EIO;
}

/* ---- stale namespaces ---- */

/* The pid in a name NS_PREFIX<pid>[-<seq>](a|b), or 0 if the name is not ours. */
static pid_t name_pid(const char *name)
{
	size_t pl = strlen(NS_PREFIX);
	char *end;
	if (strncmp(name, NS_PREFIX, pl) != 0 || !(name[pl] >= '1' && name[pl] <= '9'))
		return 0;
	long pid = strtol(name + pl, &end, 10);
	if (*end == '-') {
		if (!(end[1] >= '0' && end[1] <= '9'))
			return 0;
		strtol(end + 1, &end, 10);
	}
	if ((*end != 'a' && *end != 'b') || end[1] != '\0' || pid <= 0 || pid > 0x3fffffff)
		return 0;
	return (pid_t)pid;
}

/* Gone, or a zombie: a creator killed while its parent does not reap it (a test run in the
 * background of a shell that exited, under an init that reaps late) has released nothing but
 * still answers kill(pid, 0). */
static bool pid_dead(pid_t pid)
{
	char path[64], buf[256];
	if (kill(pid, 0) != 0)
		return errno == ESRCH;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *st = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
	return st && st[1] == ' ' && (st[2] == 'Z' || st[2] == 'X');
}

/* Deletes every namespace of ours whose creator is gone. A recycled pid keeps its namespace
 * alive until a later sweep: the cost is a leftover, never deleting a live link. */
static void sweep_stale(void)
{
	DIR *d = opendir(NETNS_DIR);
	struct dirent *e;
	if (!d)
		return;
	while ((e = readdir(d))) {
		pid_t pid = name_pid(e->d_name);
		if (pid <= 0 || pid == getpid())
			continue;
		if (!pid_dead(pid))
			continue;
		const char *args[] = {"netns", "delete", e->d_name, NULL};
		run_ip(NULL, 0, args);
	}
	closedir(d);
}

/* ---- setup helpers ---- */

/* Is any address of 10.213.n.0/24 on an interface of the current namespace? */
static bool subnet_in_use(const struct ifaddrs *list, unsigned n)
{
	for (const struct ifaddrs *i = list; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
			continue;
		uint32_t a = ntohl(((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
		if ((a >> 8) == ((uint32_t)SUBNET_A << 16 | SUBNET_B << 8 | n))
			return true;
	}
	return false;
}

static int pick_subnet(unsigned start, unsigned *out)
{
	struct ifaddrs *list;
	if (getifaddrs(&list) != 0)
		return -errno;
	for (unsigned i = 0; i < 250; i++) {
		unsigned n =
		    (start + i) % 250 + 1; /* 1..250: avoid .0 and .255 in the third byte */
		if (!subnet_in_use(list, n)) {
			*out = n;
			freeifaddrs(list);
			return 0;
		}
	}
	freeifaddrs(list);
	return -EADDRINUSE;
}

static int open_tun(const char *name, char *err, size_t errlen)
{
	struct ifreq ifr;
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		say(err, errlen, "open /dev/net/tun: %s", strerror(e));
		return -e;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
		int e = errno;
		say(err, errlen, "TUNSETIFF %s: %s", name, strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

/* The TUN fd is still attached to the named device (it follows the device across namespaces;
 * TUNGETIFF fails with EBADFD once the device is gone). */
static int check_tun(int fd, const char *name, char *err, size_t errlen)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	if (ioctl(fd, TUNGETIFF, &ifr) != 0) {
		int e = errno;
		say(err, errlen, "TUN %s unusable after the move: %s", name, strerror(e));
		return -e;
	}
	if (strcmp(ifr.ifr_name, name) != 0) {
		say(err, errlen, "TUN %s is now called %s", name, ifr.ifr_name);
		return -ENODEV;
	}
	return 0;
}

struct procnet_arg {
	int nsfd;
	int fd; /* out: /proc/thread-self/net/dev opened inside the namespace, or -errno */
};

/* A throwaway thread enters the namespace and opens its /proc/net/dev: the file keeps showing that
 * namespace's counters, and the caller's thread never changes namespace. */
static void *procnet_thread(void *p)
{
	struct procnet_arg *a = p;
	if (setns(a->nsfd, CLONE_NEWNET) != 0) {
		a->fd = -errno;
		return NULL;
	}
	a->fd = open("/proc/thread-self/net/dev", O_RDONLY | O_CLOEXEC);
	if (a->fd < 0)
		a->fd = -errno;
	return NULL;
}

static int open_procnet(int nsfd)
{
	struct procnet_arg a = {.nsfd = nsfd, .fd = -EINVAL};
	pthread_t t;
	int rc = pthread_create(&t, NULL, procnet_thread, &a);
	if (rc != 0)
		return -rc;
	pthread_join(t, NULL);
	return a.fd;
}

/* The tx_dropped counter of ifname in an open /proc/net/dev (0 if unreadable). */
static uint64_t tx_dropped(int fd, const char *ifname)
{
	char buf[4096];
	if (fd < 0)
		return 0;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	size_t il = strlen(ifname);
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		while (*line == ' ')
			line++;
		if (strncmp(line, ifname, il) != 0 || line[il] != ':')
			continue;
		/* rx: bytes packets errs drop fifo frame compressed multicast; tx: bytes packets
		 * errs drop ... -> tx drop is the 12th number. */
		unsigned long long v[12];
		if (sscanf(line + il + 1,
			   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
			   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10],
			   &v[11]) == 12)
			return v[11];
		return 0;
	}
	return 0;
}

/* ---- the forwarder ---- */

static void *forward(void *p)
{
	struct direction *d = p;
	struct pollfd pfd[2] = {{.fd = d->in, .events = POLLIN},
				{.fd = d->link->stopfd, .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break; /* cannot happen with valid fds; leave rather than spin */
		}
		if (pfd[1].revents)
			break;
		/* Drain what is queued (up to BURST) before paying for another poll. */
		for (int i = 0; i < BURST; i++) {
			ssize_t n = read(d->in, d->buf, PKT_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break; /* EAGAIN: queue empty */
			uint64_t thr =
			    atomic_load_explicit(&d->link->threshold, memory_order_relaxed);
			if (thr && next_rand(&d->rng) < thr) {
				atomic_fetch_add_explicit(&d->dropped, 1, memory_order_relaxed);
				continue;
			}
			/* A TUN write hands the packet to the kernel's receive path: it does not
			 * block, and fails only for a malformed packet or a missing device. */
			if (write(d->out, d->buf, (size_t)n) != n) {
				atomic_fetch_add_explicit(&d->errors, 1, memory_order_relaxed);
				continue;
			}
			atomic_fetch_add_explicit(&d->fwd, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&d->bytes, (uint64_t)n, memory_order_relaxed);
		}
	}
	return NULL;
}

/* ---- API ---- */

static bool has_cap(int cap)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long eff = 0;
	bool found = false;
	if (!f)
		return geteuid() == 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = true;
			break;
		}
	fclose(f);
	return found ? (eff >> cap) & 1 : geteuid() == 0;
}

int lossy_link_available(char *why, size_t len)
{
	say(why, len, "ok");
	if (geteuid() != 0) {
		say(why, len, "not root (TUN devices and network namespaces need root)");
		return -EPERM;
	}
	if (!has_cap(CAP_NET_ADM) || !has_cap(CAP_SYS_ADM)) {
		say(why, len,
		    "root without CAP_NET_ADMIN and CAP_SYS_ADMIN (a restricted container?)");
		return -EPERM;
	}
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		say(why, len, "cannot open /dev/net/tun: %s", strerror(e));
		return -e;
	}
	close(fd);
	if (!ip_path()) {
		say(why, len, "the `ip` command (iproute2) is not installed");
		return -ENOENT;
	}
	return 0;
}

/* Runs the commands that set side s up once its TUN is created and its namespace exists. */
static int configure_side(struct lossy_link *l, int s, unsigned mtu, char *err, size_t errlen)
{
	char mtus[16], qlen[16], cidr[32];
	const char *ns = l->ns[s], *dev = l->ifname[s];
	snprintf(mtus, sizeof(mtus), "%u", mtu);
	snprintf(qlen, sizeof(qlen), "%u", LOSSY_LINK_TXQUEUELEN);
	snprintf(cidr, sizeof(cidr), "%s/24", l->addr[s]);
	/* addrgenmode none: no IPv6 link-local, hence no router solicitations or DAD probes
	 * crossing the link and blurring its counters. */
	const char *const cmds[][16] = {
	    {"link", "set", "dev", dev, "netns", ns, NULL},
	    {"-n", ns, "link", "set", "dev", "lo", "up", NULL},
	    {"-n", ns, "link", "set", "dev", dev, "mtu", mtus, "txqueuelen", qlen, "addrgenmode",
	     "none", NULL},
	    {"-n", ns, "addr", "add", cidr, "dev", dev, NULL},
	    {"-n", ns, "link", "set", "dev", dev, "up", NULL},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		int rc = run_ip(err, errlen, cmds[i]);
		if (rc)
			return rc;
	}
	return check_tun(l->tun[s], dev, err, errlen);
}

int lossy_link_create(struct lossy_link **out, const struct lossy_link_cfg *cfg, char *err,
		      size_t errlen)
{
	struct lossy_link *l;
	unsigned mtu, subnet = 0;
	int rc;

	say(err, errlen, "ok");
	if (!out || !cfg || !valid_loss(cfg->loss) ||
	    (cfg->mtu && (cfg->mtu < 68 || cfg->mtu > 65535))) {
		say(err, errlen, "bad configuration (loss must be 0..1, mtu 68..65535 or 0)");
		return -EINVAL;
	}
	mtu = cfg->mtu ? cfg->mtu : 1500;
	sweep_stale();

	l = calloc(1, sizeof(*l));
	if (!l) {
		say(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->tun[0] = l->tun[1] = l->nsfd[0] = l->nsfd[1] = l->procfd[0] = l->procfd[1] = -1;
	l->stopfd = -1;
	atomic_init(&l->threshold, loss_threshold(cfg->loss));

	unsigned seq = atomic_fetch_add(&link_seq, 1);
	pid_t pid = getpid();
	for (int s = 0; s < 2; s++) {
		char tag[16] = "";
		if (seq)
			snprintf(tag, sizeof(tag), "-%u", seq % 100);
		snprintf(l->ns[s], sizeof(l->ns[s]), NS_PREFIX "%d%s%c", (int)pid, tag, 'a' + s);
		snprintf(l->ifname[s], sizeof(l->ifname[s]), IF_PREFIX "%d%s%c", (int)pid, tag,
			 'a' + s);
	}
	rc = pick_subnet((unsigned)pid % 250 + seq, &subnet);
	if (rc) {
		say(err, errlen, "no free 10.213.N.0/24 on this host's interfaces");
		goto fail;
	}
	for (int s = 0; s < 2; s++)
		snprintf(l->addr[s], sizeof(l->addr[s]), "%d.%d.%u.%d", SUBNET_A, SUBNET_B, subnet,
			 s + 1);

	for (int s = 0; s < 2; s++) {
		rc = open_tun(l->ifname[s], err, errlen);
		if (rc < 0)
			goto fail;
		l->tun[s] = rc;
		const char *args[] = {"netns", "add", l->ns[s], NULL};
		rc = run_ip(err, errlen, args);
		if (rc)
			goto fail;
		l->ns_made[s] = true;
		char path[64];
		snprintf(path, sizeof(path), NETNS_DIR "/%s", l->ns[s]);
		l->nsfd[s] = open(path, O_RDONLY | O_CLOEXEC);
		if (l->nsfd[s] < 0) {
			rc = -errno;
			say(err, errlen, "open %s: %s", path, strerror(-rc));
			goto fail;
		}
		rc = configure_side(l, s, mtu, err, errlen);
		if (rc)
			goto fail;
		l->procfd[s] = open_procnet(l->nsfd[s]); /* the counters are optional */
	}

	l->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->stopfd < 0) {
		rc = -errno;
		say(err, errlen, "eventfd: %s", strerror(-rc));
		goto fail;
	}
	for (int s = 0; s < 2; s++) {
		struct direction *d = &l->dir[s];
		d->link = l;
		d->in = l->tun[s];
		d->out = l->tun[1 - s];
		d->rng = cfg->seed ^ (s ? 0x5851f42d4c957f2dull : 0);
		d->buf = malloc(PKT_BUF);
		if (!d->buf) {
			rc = -ENOMEM;
			say(err, errlen, "out of memory");
			goto fail;
		}
		rc = -pthread_create(&d->thread, NULL, forward, d);
		if (rc) {
			say(err, errlen, "pthread_create: %s", strerror(-rc));
			goto fail;
		}
		d->started = true;
	}
	*out = l;
	return 0;

fail:
	lossy_link_destroy(l); /* undoes exactly what was done: every field says if it was */
	return rc;
}

const char *lossy_link_netns(const struct lossy_link *l, int side)
{
	return l && (side == 0 || side == 1) ? l->ns[side] : NULL;
}

const char *lossy_link_addr(const struct lossy_link *l, int side)
{
	return l && (side == 0 || side == 1) ? l->addr[side] : NULL;
}

const char *lossy_link_ifname(const struct lossy_link *l, int side)
{
	return l && (side == 0 || side == 1) ? l->ifname[side] : NULL;
}

int lossy_link_set_loss(struct lossy_link *l, double loss)
{
	if (!l || !valid_loss(loss))
		return -EINVAL;
	atomic_store_explicit(&l->threshold, loss_threshold(loss), memory_order_relaxed);
	return 0;
}

int lossy_link_enter(const struct lossy_link *l, int side)
{
	if (!l || (side != 0 && side != 1))
		return -EINVAL;
	return setns(l->nsfd[side], CLONE_NEWNET) == 0 ? 0 : -errno;
}

void lossy_link_get_stats(const struct lossy_link *l, struct lossy_link_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (!l)
		return;
	for (int s = 0; s < 2; s++) {
		const struct direction *d = &l->dir[s];
		st->fwd[s] = atomic_load_explicit(&d->fwd, memory_order_relaxed);
		st->dropped[s] = atomic_load_explicit(&d->dropped, memory_order_relaxed);
		st->bytes[s] = atomic_load_explicit(&d->bytes, memory_order_relaxed);
		st->errors[s] = atomic_load_explicit(&d->errors, memory_order_relaxed);
		st->queue_dropped[s] = tx_dropped(l->procfd[s], l->ifname[s]);
	}
}

void lossy_link_destroy(struct lossy_link *l)
{
	if (!l)
		return;
	if (l->stopfd >= 0) {
		uint64_t one = 1;
		if (write(l->stopfd, &one, sizeof(one)) != sizeof(one))
			abort(); /* cannot fail on an eventfd far from its limit: our bug */
	}
	for (int s = 0; s < 2; s++) {
		if (l->dir[s].started)
			pthread_join(l->dir[s].thread, NULL);
		free(l->dir[s].buf);
	}
	if (l->stopfd >= 0)
		close(l->stopfd);
	for (int s = 0; s < 2; s++) {
		if (l->procfd[s] >= 0)
			close(l->procfd[s]);
		if (l->tun[s] >= 0)
			close(l->tun[s]); /* the kernel deletes the device */
		if (l->nsfd[s] >= 0)
			close(l->nsfd[s]);
		if (l->ns_made[s]) {
			const char *args[] = {"netns", "delete", l->ns[s], NULL};
			run_ip(NULL, 0, args);
		}
	}
	free(l);
}
