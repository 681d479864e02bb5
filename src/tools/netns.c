/* Hosts in network namespaces behind TUN devices (netns.h). */
#define _GNU_SOURCE
#include "tools/netns.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/say.h"

extern char **environ;

#define NETNS_DIR   "/run/netns"
#define NS_PREFIX   "srlink"
#define IF_PREFIX   "srl"
#define SUBNET_A    10
#define SUBNET_B    213
#define IP_TIMEOUT  10000 /* ms an `ip` command may take before we kill it */
#define CAP_NET_ADM 12	  /* linux/capability.h: CAP_NET_ADMIN, CAP_SYS_ADMIN */
#define CAP_SYS_ADM 21

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
		tool_say(err, errlen, "the `ip` command (iproute2) is not installed");
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
		tool_say(err, errlen, "cannot run %s: %s", ip, strerror(rc));
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
	tool_say(err, errlen, "`%s` failed: %s", cmd, outlen ? out : "(no message)");
	return -EIO;
}

/* ---- stale namespaces ---- */

/* The pid in a name NS_PREFIX<pid>[-<seq>]<letter>, or 0 if the name is not ours. */
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
	if (*end < 'a' || *end >= 'a' + NETNS_MAX_HOSTS || end[1] != '\0' || pid <= 0 ||
	    pid > 0x3fffffff)
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
void netns_sweep_stale(void)
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

int netns_pick_subnet(unsigned start, unsigned *out)
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
		tool_say(err, errlen, "open /dev/net/tun: %s", strerror(e));
		return -e;
	}
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
		int e = errno;
		tool_say(err, errlen, "TUNSETIFF %s: %s", name, strerror(e));
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
		tool_say(err, errlen, "TUN %s unusable after the move: %s", name, strerror(e));
		return -e;
	}
	if (strcmp(ifr.ifr_name, name) != 0) {
		tool_say(err, errlen, "TUN %s is now called %s", name, ifr.ifr_name);
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

/* ---- capabilities ---- */

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

int netns_available(char *why, size_t len)
{
	tool_say(why, len, "ok");
	if (geteuid() != 0) {
		tool_say(why, len, "not root (TUN devices and network namespaces need root)");
		return -EPERM;
	}
	if (!has_cap(CAP_NET_ADM) || !has_cap(CAP_SYS_ADM)) {
		tool_say(why, len,
			 "root without CAP_NET_ADMIN and CAP_SYS_ADMIN (a restricted container?)");
		return -EPERM;
	}
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		tool_say(why, len, "cannot open /dev/net/tun: %s", strerror(e));
		return -e;
	}
	close(fd);
	if (!ip_path()) {
		tool_say(why, len, "the `ip` command (iproute2) is not installed");
		return -ENOENT;
	}
	return 0;
}

static _Atomic unsigned seq_next;

unsigned netns_seq(void)
{
	return atomic_fetch_add(&seq_next, 1);
}

void netns_host_name(struct netns_host *h, unsigned seq, unsigned idx, unsigned subnet)
{
	char tag[16] = "";
	int pid = (int)getpid();

	memset(h, 0, sizeof(*h));
	h->tun = h->nsfd = h->procfd = -1;
	if (seq)
		snprintf(tag, sizeof(tag), "-%u", seq % 100);
	snprintf(h->ns, sizeof(h->ns), NS_PREFIX "%d%s%c", pid, tag, 'a' + (int)idx);
	snprintf(h->ifname, sizeof(h->ifname), IF_PREFIX "%d%s%c", pid, tag, 'a' + (int)idx);
	snprintf(h->addr, sizeof(h->addr), "%d.%d.%u.%u", SUBNET_A, SUBNET_B, subnet, idx + 1);
}

int netns_host_create(struct netns_host *h, unsigned mtu, char *err, size_t errlen)
{
	char mtus[16], qlen[16], cidr[32], path[64];
	const char *ns = h->ns, *dev = h->ifname;
	int rc;

	rc = open_tun(dev, err, errlen);
	if (rc < 0)
		return rc;
	h->tun = rc;
	const char *add[] = {"netns", "add", ns, NULL};
	rc = run_ip(err, errlen, add);
	if (rc)
		return rc;
	h->ns_made = true;
	snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
	h->nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (h->nsfd < 0) {
		rc = -errno;
		tool_say(err, errlen, "open %s: %s", path, strerror(-rc));
		return rc;
	}
	snprintf(mtus, sizeof(mtus), "%u", mtu);
	snprintf(qlen, sizeof(qlen), "%u", NETNS_TXQUEUELEN);
	snprintf(cidr, sizeof(cidr), "%s/24", h->addr);
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
		rc = run_ip(err, errlen, cmds[i]);
		if (rc)
			return rc;
	}
	rc = check_tun(h->tun, dev, err, errlen);
	if (rc)
		return rc;
	h->procfd = open_procnet(h->nsfd); /* the counters are optional */
	return 0;
}

void netns_host_destroy(struct netns_host *h)
{
	if (h->procfd >= 0)
		close(h->procfd);
	if (h->tun >= 0)
		close(h->tun); /* the kernel deletes the device */
	if (h->nsfd >= 0)
		close(h->nsfd);
	if (h->ns_made) {
		const char *args[] = {"netns", "delete", h->ns, NULL};
		run_ip(NULL, 0, args);
	}
	h->procfd = h->tun = h->nsfd = -1;
	h->ns_made = false;
}

uint64_t netns_host_queue_dropped(const struct netns_host *h)
{
	return tx_dropped(h->procfd, h->ifname);
}
