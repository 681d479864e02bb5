/* `softrdma run`'s device view: softrdma's devices in a kernel-like /sys/class/infiniband,
 * /sys/class/infiniband_verbs and /dev/infiniband, private to the program (view.h). */
#define _GNU_SOURCE
#include "tools/view.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* The source name of the view's tmpfs mounts: a nested `softrdma run` finds it in
 * /proc/self/mountinfo and keeps the view it is in. */
#define VIEW_SOURCE "softrdma-view"
#define SYS_CLASS   "/sys/class"
#define DEV	    "/dev"
/* The helper child opens every device to query it: seconds at worst, unless something hangs. */
#define BUILD_TIMEOUT_MS 10000

/* The host's own entries that the view replaces: under `softrdma run` the program's libibverbs
 * knows softrdma's devices only, so the host's RDMA devices (if any) would be names without a
 * device behind them. */
static const char *const sys_hidden[] = {"infiniband", "infiniband_verbs", "infiniband_mad",
					 "infiniband_cm", NULL};
static const char *const dev_hidden[] = {"infiniband", NULL};

struct build {
	char *why; /* the reason of the first failure, for the user */
	size_t len;
};

__attribute__((format(printf, 3, 4))) static int fail(struct build *b, int err, const char *fmt,
						      ...)
{
	char what[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(b->why, b->len, "%s: %s", what, strerror(err));
	return -err;
}

/* out (PATH_MAX bytes) = the formatted path; fails rather than truncating it. */
__attribute__((format(printf, 3, 4))) static int pathf(struct build *b, char *out, const char *fmt,
						       ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
	return n >= 0 && n < PATH_MAX ? 0 : fail(b, ENAMETOOLONG, "a path under %s", out);
}

/* A read-only file with the given text, as sysfs's attribute files (0444). */
__attribute__((format(printf, 3, 4))) static int put(struct build *b, const char *path,
						     const char *fmt, ...)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return fail(b, errno, "cannot create %s", path);
	va_list ap;
	va_start(ap, fmt);
	int n = vdprintf(fd, fmt, ap);
	va_end(ap);
	int err = n < 0 ? EIO : 0;
	if (close(fd) != 0 && !err)
		err = errno;
	return err ? fail(b, err, "cannot write %s", path) : 0;
}

/* mkdir -p, 0755. */
static int dirs(struct build *b, const char *path)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = 0;
		if (mkdir(p, 0755) != 0 && errno != EEXIST)
			return fail(b, errno, "cannot create %s", p);
		*s = c;
		if (!c)
			return 0;
	}
}

static int link_to(struct build *b, const char *target, const char *path)
{
	return symlink(target, path) == 0 ? 0 : fail(b, errno, "cannot create %s", path);
}

/* A file at path that is the character device at dev (a bind mount: an unprivileged user
 * namespace may not mknod). */
static int bind_file(struct build *b, const char *dev, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(b, errno, "cannot create %s", path);
	close(fd);
	if (mount(dev, path, NULL, MS_BIND, NULL) != 0)
		return fail(b, errno, "cannot bind %s onto %s", dev, path);
	return 0;
}

static int write_proc(struct build *b, const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(b, errno, "cannot open %s", path);
	ssize_t n = write(fd, text, strlen(text));
	int err = n == (ssize_t)strlen(text) ? 0 : n < 0 ? errno : EIO;
	close(fd);
	return err ? fail(b, err, "cannot write '%s' to %s", text, path) : 0;
}

static bool listed(const char *name, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(name, *list))
			return true;
	return false;
}

/* Recreates the entry `name` of the hidden directory (open at old) in the tmpfs now at dir:
 * a symbolic link as a copy, anything else as a recursive bind mount of the original. */
static int keep_entry(struct build *b, int old, const char *dir, const char *name)
{
	struct stat st;
	char src[64 + NAME_MAX], dst[PATH_MAX];
	if (fstatat(old, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : fail(b, errno, "cannot stat %s/%s", dir, name);
	/* The original through the descriptor: its path is under our tmpfs now. */
	snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", old, name);
	if (pathf(b, dst, "%s/%s", dir, name))
		return -ENAMETOOLONG;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(old, name, target, sizeof(target) - 1);
		if (n < 0)
			return fail(b, errno, "cannot read the link %s", dst);
		target[n] = 0;
		return link_to(b, target, dst);
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(dst, 0755) != 0)
			return fail(b, errno, "cannot create %s", dst);
	} else {
		int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0)
			return fail(b, errno, "cannot create %s", dst);
		close(fd);
	}
	/* MS_REC: with the mounts below it (/dev/pts, /dev/shm), which a user namespace may not
	 * leave out anyway (they are locked to their parent). */
	if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0)
		return fail(b, errno, "cannot bind %s/%s", dir, name);
	return 0;
}

/* Mounts a tmpfs over dir (sysfs has no mkdir; /dev is the host's) holding everything dir held
 * but the hidden names. */
static int overlay(struct build *b, const char *dir, const char *const *hidden, unsigned long flags)
{
	int old = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (old < 0)
		return fail(b, errno, "cannot open %s", dir);
	int r = 0;
	int fd = dup(old);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		r = fail(b, errno, "cannot read %s", dir);
		if (fd >= 0)
			close(fd);
		goto close_old;
	}
	if (mount(VIEW_SOURCE, dir, "tmpfs", flags, "mode=0755") != 0) {
		r = fail(b, errno, "cannot mount a tmpfs on %s", dir);
		goto close_dir;
	}
	struct dirent *e;
	while (!r && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && !listed(e->d_name, hidden))
			r = keep_entry(b, old, dir, e->d_name);
close_dir:
	closedir(d);
close_old:
	close(old);
	return r;
}

/* ---- the files, in the formats of Linux's drivers/infiniband/core/sysfs.c ---- */

static const char *node_type_name(enum ibv_node_type t)
{
	switch (t) {
	case IBV_NODE_CA:
		return "CA";
	case IBV_NODE_SWITCH:
		return "switch";
	case IBV_NODE_ROUTER:
		return "router";
	case IBV_NODE_RNIC:
		return "RNIC";
	case IBV_NODE_USNIC:
		return "usNIC";
	case IBV_NODE_USNIC_UDP:
		return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED:
		return "unspecified";
	default:
		return "<unknown>";
	}
}

static const char *port_state_name(enum ibv_port_state s)
{
	static const char *const names[] = {"NOP",   "DOWN",   "INIT",
					    "ARMED", "ACTIVE", "ACTIVE_DEFER"};
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
}

static const char *phys_state_name(uint8_t s)
{
	static const char *const names[] = {NULL,
					    "Sleep",
					    "Polling",
					    "Disabled",
					    "PortConfigurationTraining",
					    "LinkUp",
					    "LinkErrorRecovery",
					    "Phy Test"};
	return s && s < sizeof(names) / sizeof(names[0]) ? names[s] : "<unknown>";
}

/* ports/N/rate: "10 Gb/sec (4X)", "2.5 Gb/sec (1X)", "100 Gb/sec (4X EDR)". */
static void rate_text(const struct ibv_port_attr *pa, char *out, size_t len)
{
	static const struct {
		uint8_t speed;
		int deci; /* per lane, in 0.1 Gb/s */
		const char *name;
	} speeds[] = {{1, 25, ""},	 {2, 50, " DDR"},   {4, 100, " QDR"},  {8, 100, " FDR10"},
		      {16, 140, " FDR"}, {32, 250, " EDR"}, {64, 500, " HDR"}, {128, 1000, " NDR"}};
	static const struct {
		uint8_t width;
		int lanes;
	} widths[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12}, {16, 2}};
	int deci = 25, lanes = 1; /* the kernel's default: SDR */
	const char *name = "";
	for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++)
		if (speeds[i].speed == pa->active_speed) {
			deci = speeds[i].deci;
			name = speeds[i].name;
		}
	for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++)
		if (widths[i].width == pa->active_width)
			lanes = widths[i].lanes;
	int rate = deci * lanes;
	snprintf(out, len, "%d%s Gb/sec (%dX%s)\n", rate / 10, rate % 10 ? ".5" : "", lanes, name);
}

static void guid_text(__be64 be, char *out, size_t len)
{
	uint64_t g = be64toh(be);
	snprintf(out, len, "%04x:%04x:%04x:%04x\n", (unsigned)(g >> 48) & 0xffff,
		 (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
}

/* gids/N: all eight groups, zeros included (the kernel's %pI6). */
static void gid_text(const uint8_t *raw, char *out, size_t len)
{
	snprintf(out, len,
		 "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
		 raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9],
		 raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]);
}

static int put_port(struct build *b, struct ibv_context *ctx, const char *ib,
		    const struct ibv_port_attr *pa)
{
	char p[PATH_MAX], text[64];
	int r;
	static const char *const subdirs[] = {"gid_attrs/types", "gid_attrs/ndevs", "gids",
					      "pkeys"};
	for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++)
		if ((r = pathf(b, p, "%s/ports/1/%s", ib, subdirs[i])) || (r = dirs(b, p)))
			return r;
#define PORT_FILE(file, ...)                                                                       \
	do {                                                                                       \
		if ((r = pathf(b, p, "%s/ports/1/%s", ib, file)))                                  \
			return r;                                                                  \
		if ((r = put(b, p, __VA_ARGS__)))                                                  \
			return r;                                                                  \
	} while (0)
	PORT_FILE("state", "%d: %s\n", pa->state, port_state_name(pa->state));
	PORT_FILE("phys_state", "%u: %s\n", pa->phys_state, phys_state_name(pa->phys_state));
	PORT_FILE("link_layer", "%s\n",
		  pa->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
	rate_text(pa, text, sizeof(text));
	PORT_FILE("rate", "%s", text);
	PORT_FILE("lid", "0x%x\n", pa->lid);
	PORT_FILE("lid_mask_count", "%u\n", pa->lmc);
	PORT_FILE("sm_lid", "0x%x\n", pa->sm_lid);
	PORT_FILE("sm_sl", "%u\n", pa->sm_sl);
	PORT_FILE("cap_mask", "0x%08x\n", pa->port_cap_flags);
#undef PORT_FILE
	for (int i = 0; i < pa->pkey_tbl_len; i++) {
		__be16 pkey;
		if (ibv_query_pkey(ctx, 1, i, &pkey))
			continue;
		if ((r = pathf(b, p, "%s/ports/1/pkeys/%d", ib, i)))
			return r;
		if ((r = put(b, p, "0x%04x\n", be16toh(pkey))))
			return r;
	}
	/* The GID table: the address, its type and its network device, per index. */
	for (int i = 0; i < pa->gid_tbl_len; i++) {
		struct ibv_gid_entry g;
		char ndev[IF_NAMESIZE];
		if (ibv_query_gid_ex(ctx, 1, (uint32_t)i, &g, 0))
			continue;
		gid_text(g.gid.raw, text, sizeof(text));
		if ((r = pathf(b, p, "%s/ports/1/gids/%d", ib, i)))
			return r;
		if ((r = put(b, p, "%s", text)))
			return r;
		if ((r = pathf(b, p, "%s/ports/1/gid_attrs/types/%d", ib, i)))
			return r;
		if ((r = put(b, p, "%s\n",
			     g.gid_type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1")))
			return r;
		if (!g.ndev_ifindex || !if_indextoname(g.ndev_ifindex, ndev))
			continue;
		if ((r = pathf(b, p, "%s/ports/1/gid_attrs/ndevs/%d", ib, i)))
			return r;
		if ((r = put(b, p, "%s\n", ndev)))
			return r;
		/* device/net/<netdev>: the network device of the RDMA device (pyverbs' tests take
		 * its IP address from there), linked to the host's own entry. */
		char target[64];
		if ((r = pathf(b, p, "%s/device/net/%s", ib, ndev)))
			return r;
		if ((r = pathf(b, target, SYS_CLASS "/net/%s", ndev)))
			return r;
		if (symlink(target, p) != 0 && errno != EEXIST)
			return fail(b, errno, "cannot create %s", p);
	}
	return 0;
}

/* The n-th device of the list: /sys/class/infiniband/<name>, uverbs<n>, /dev/infiniband. */
static int put_device(struct build *b, int n, struct ibv_device *dev, dev_t null_rdev)
{
	const char *name = ibv_get_device_name(dev);
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		return fail(b, errno, "cannot open %s", name);
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	char ib[PATH_MAX], uv[PATH_MAX], p[PATH_MAX], text[64];
	int r;
	if (ibv_query_device(ctx, &da) || ibv_query_port(ctx, 1, &pa)) {
		r = fail(b, EIO, "cannot query %s", name);
		goto close;
	}
	if ((r = pathf(b, ib, SYS_CLASS "/infiniband/%s", name)))
		goto close;
	if ((r = pathf(b, p, "%s/device/net", ib)))
		goto close;
	if ((r = dirs(b, p)))
		goto close;
#define DEV_FILE(dir, file, ...)                                                                   \
	do {                                                                                       \
		if ((r = pathf(b, p, "%s/%s", dir, file)))                                         \
			goto close;                                                                \
		if ((r = put(b, p, __VA_ARGS__)))                                                  \
			goto close;                                                                \
	} while (0)
	DEV_FILE(ib, "node_type", "%d: %s\n", dev->node_type, node_type_name(dev->node_type));
	guid_text(da.node_guid, text, sizeof(text));
	DEV_FILE(ib, "node_guid", "%s", text);
	guid_text(da.sys_image_guid, text, sizeof(text));
	DEV_FILE(ib, "sys_image_guid", "%s", text);
	DEV_FILE(ib, "node_desc", "softrdma %s\n", name);
	DEV_FILE(ib, "fw_ver", "%s\n", da.fw_ver);
	if ((r = put_port(b, ctx, ib, &pa)))
		goto close;

	if ((r = pathf(b, uv, SYS_CLASS "/infiniband_verbs/uverbs%d", n)))
		goto close;
	if ((r = dirs(b, uv)))
		goto close;
	DEV_FILE(uv, "ibdev", "%s\n", name);
	DEV_FILE(uv, "abi_version", "1\n");
	/* The numbers of the character device that stands in for it (/dev/null's). */
	DEV_FILE(uv, "dev", "%u:%u\n", major(null_rdev), minor(null_rdev));
#undef DEV_FILE
	if ((r = pathf(b, p, "%s/device", uv)))
		goto close;
	char target[PATH_MAX];
	if ((r = pathf(b, target, "../../infiniband/%s/device", name)))
		goto close;
	if ((r = link_to(b, target, p)))
		goto close;
	if ((r = pathf(b, p, DEV "/infiniband/uverbs%d", n)))
		goto close;
	r = bind_file(b, DEV "/null", p);
close:
	ibv_close_device(ctx);
	return r;
}

static int put_devices(struct build *b)
{
	struct stat null_st;
	if (stat(DEV "/null", &null_st) != 0 || !S_ISCHR(null_st.st_mode))
		return fail(b, ENODEV, DEV "/null is not a character device");
	int r;
	if ((r = dirs(b, SYS_CLASS "/infiniband")) ||
	    (r = dirs(b, SYS_CLASS "/infiniband_verbs")) || (r = dirs(b, DEV "/infiniband")))
		return r;
	/* The uverbs ABI of rdma-core 44 (what our drop-in libibverbs implements). */
	if ((r = put(b, SYS_CLASS "/infiniband_verbs/abi_version", "6\n")))
		return r;
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		return fail(b, errno, "cannot list softrdma's devices");
	for (int i = 0; i < n && !r; i++)
		r = put_device(b, i, list[i], null_st.st_rdev);
	ibv_free_device_list(list);
	return r;
}

/* In the helper child: the namespaces, the view in them. */
static int build(struct build *b, bool userns)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	int r;
	if (unshare(CLONE_NEWNS | (userns ? CLONE_NEWUSER : 0)) != 0)
		return fail(b, errno,
			    userns ? "cannot create a user namespace (disabled here? see "
				     "/proc/sys/user/max_user_namespaces, "
				     "kernel.unprivileged_userns_clone)"
				   : "cannot create a mount namespace");
	if (userns) {
		/* Our own ids, mapped to themselves: the program sees its uid and gid. Writing a
		 * gid map unprivileged requires giving up setgroups first. */
		char map[64];
		r = write_proc(b, "/proc/self/setgroups", "deny");
		if (r && r != -ENOENT)
			return r;
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)uid, (unsigned)uid);
		if ((r = write_proc(b, "/proc/self/uid_map", map)))
			return r;
		snprintf(map, sizeof(map), "%u %u 1", (unsigned)gid, (unsigned)gid);
		if ((r = write_proc(b, "/proc/self/gid_map", map)))
			return r;
	}
	/* Nothing of ours may propagate back to the host's mounts (/ is often shared). */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
		return fail(b, errno, "cannot make / a slave mount");
	if ((r = overlay(b, SYS_CLASS, sys_hidden, MS_NOSUID | MS_NODEV | MS_NOEXEC)) ||
	    (r = overlay(b, DEV, dev_hidden, MS_NOSUID)) || (r = put_devices(b)))
		return r;
	/* Read-only like sysfs, for root too. */
	if (mount(NULL, SYS_CLASS, NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return fail(b, errno, "cannot make " SYS_CLASS " read-only");
	return 0;
}

/* What the helper child tells: 0 (the view is ready, join it) or a negative errno and why. */
struct report {
	int err;
	char why[300];
};

/* The view that a nested `softrdma run` already sees (mountinfo: "... /sys/class ... - tmpfs
 * softrdma-view ..."). */
static bool in_view(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[4096];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found =
		    strstr(line, " " SYS_CLASS " ") && strstr(line, " - tmpfs " VIEW_SOURCE " ");
	fclose(f);
	return found;
}

static int try_enter(bool userns, char *why, size_t len)
{
	int ready[2], go[2], r;
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		cwd[0] = 0;
	if (pipe2(ready, O_CLOEXEC) != 0) {
		snprintf(why, len, "pipe: %s", strerror(errno));
		return -errno;
	}
	if (pipe2(go, O_CLOEXEC) != 0) {
		r = -errno;
		snprintf(why, len, "pipe: %s", strerror(errno));
		goto close_ready;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		r = -errno;
		snprintf(why, len, "fork: %s", strerror(errno));
		goto close_go;
	}
	if (pid == 0) {
		struct report rep = {0};
		struct build b = {rep.why, sizeof(rep.why)};
		close(ready[0]);
		close(go[1]);
		rep.err = build(&b, userns);
		if (write(ready[1], &rep, sizeof(rep)) == (ssize_t)sizeof(rep) && rep.err == 0) {
			/* Keep the namespaces alive until the parent has them open. */
			char c;
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
		}
		_exit(0);
	}
	close(ready[1]);
	ready[1] = -1;
	close(go[0]);
	go[0] = -1;
	struct report rep = {.err = -ETIMEDOUT};
	struct pollfd pfd = {.fd = ready[0], .events = POLLIN};
	int pr;
	while ((pr = poll(&pfd, 1, BUILD_TIMEOUT_MS)) < 0 && errno == EINTR)
		;
	if (pr <= 0) {
		snprintf(rep.why, sizeof(rep.why), "building the view took over %d s",
			 BUILD_TIMEOUT_MS / 1000);
		kill(pid, SIGKILL);
	} else if (read(ready[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) {
		rep.err = -EIO;
		snprintf(rep.why, sizeof(rep.why), "the helper process died");
	}
	int user_fd = -1, mnt_fd = -1;
	if (rep.err == 0) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)pid);
		mnt_fd = open(p, O_RDONLY | O_CLOEXEC);
		snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)pid);
		if (userns)
			user_fd = open(p, O_RDONLY | O_CLOEXEC);
		if (mnt_fd < 0 || (userns && user_fd < 0)) {
			rep.err = -errno;
			snprintf(rep.why, sizeof(rep.why), "cannot open %s: %s", p,
				 strerror(errno));
		}
	}
	close(go[1]);
	go[1] = -1;
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	/* Joining: the user namespace first (it owns the mount namespace), then the mounts. */
	if (rep.err == 0 && userns && setns(user_fd, CLONE_NEWUSER) != 0) {
		rep.err = -errno;
		snprintf(rep.why, sizeof(rep.why), "cannot join the user namespace: %s",
			 strerror(errno));
	}
	if (rep.err == 0 && setns(mnt_fd, CLONE_NEWNS) != 0) {
		rep.err = -errno;
		snprintf(rep.why, sizeof(rep.why), "cannot join the mount namespace: %s",
			 strerror(errno));
	}
	/* setns of a mount namespace moves the root and working directory to its root. */
	if (rep.err == 0 && cwd[0] && chdir(cwd) != 0)
		fprintf(stderr, "softrdma run: cannot return to %s in the device view: %s\n", cwd,
			strerror(errno));
	if (user_fd >= 0)
		close(user_fd);
	if (mnt_fd >= 0)
		close(mnt_fd);
	snprintf(why, len, "%s", rep.why);
	r = rep.err;
close_go:
	if (go[0] >= 0)
		close(go[0]);
	if (go[1] >= 0)
		close(go[1]);
close_ready:
	if (ready[0] >= 0)
		close(ready[0]);
	if (ready[1] >= 0)
		close(ready[1]);
	return r;
}

int view_enter(char *why, size_t len)
{
	if (in_view())
		return -EEXIST;
	/* Root needs a mount namespace only; without CAP_SYS_ADMIN (a container's root) a user
	 * namespace may still give one. */
	bool root = geteuid() == 0;
	int r = try_enter(!root, why, len);
	if (root && r == -EPERM)
		r = try_enter(true, why, len);
	return r;
}
