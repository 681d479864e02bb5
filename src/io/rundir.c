/* Local names private to one user (rundir.h). */
#define _GNU_SOURCE
#include "io/rundir.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_bool told;

/* One message per process: every QP creation or listen would repeat it otherwise. */
__attribute__((format(printf, 1, 2))) static void tell(const char *fmt, ...)
{
	if (atomic_exchange(&told, true))
		return;
	va_list ap;
	va_start(ap, fmt);
	fputs("softrdma: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static int dir_name(char *buf, size_t n, bool *from_env)
{
	const char *env = getenv(RUNDIR_ENV);
	int len;
	*from_env = env && *env;
	if (*from_env) {
		len = snprintf(buf, n, "%s", env);
	} else {
		struct stat sb;
		const char *base =
		    stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
		len = snprintf(buf, n, "%s/softrdma-%u", base, (unsigned)geteuid());
	}
	/* Room for a socket's name after it (rundir_sockaddr checks the whole). */
	if (len <= 0 || (size_t)len >= n) {
		tell("%s is too long for a local socket name (at most %zu bytes)",
		     *from_env ? RUNDIR_ENV : "the run directory", n - 1);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Opens the directory (created 0700 if missing) if it is ours and private; else says why. */
static int dir_open(char *buf, size_t n)
{
	bool from_env;
	int err = dir_name(buf, n, &from_env);
	if (err)
		return err;
	if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
		err = -errno;
		tell("cannot create the run directory %s: %s", buf, strerror(errno));
		return err;
	}
	int fd = open(buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		err = -errno;
		tell("cannot open the run directory %s: %s%s", buf, strerror(errno),
		     errno == ELOOP || errno == ENOTDIR ? " (not a directory; remove it)" : "");
		if (fd >= 0)
			close(fd);
		return err;
	}
	if (sb.st_uid != geteuid()) {
		tell("the run directory %s belongs to uid %u, not to you (uid %u): remove it, or "
		     "name "
		     "a directory of your own in %s (the same for every process that should meet)",
		     buf, (unsigned)sb.st_uid, (unsigned)geteuid(), RUNDIR_ENV);
		close(fd);
		return -EPERM;
	}
	if (sb.st_mode & 022) {
		tell("the run directory %s is writable by others (mode %03o): chmod 700 it", buf,
		     (unsigned)(sb.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	/* Ours and not writable by others: nothing in it can be someone else's; close it. */
	if ((sb.st_mode & 077) && fchmod(fd, 0700) != 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int rundir_path(char *buf, size_t n)
{
	int fd = dir_open(buf, n);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

unsigned long long rundir_netns(void)
{
	struct stat sb;
	return stat("/proc/self/ns/net", &sb) == 0 ? (unsigned long long)sb.st_ino : 0;
}

/* The address of file `file` in dir (ns: the file's name is name of namespace ns). */
static int file_addr(const char *dir, unsigned long long ns, const char *file,
		     struct sockaddr_un *sa, socklen_t *len)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int k = ns ? snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/n%llu-%s", dir, ns, file)
		   : snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%s", dir, file);
	if (k <= 0 || (size_t)k >= sizeof(sa->sun_path)) {
		tell("the run directory %s is too long for a local socket name; name a shorter one "
		     "in %s",
		     dir, RUNDIR_ENV);
		return -ENAMETOOLONG;
	}
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)k + 1);
	return 0;
}

static int sockaddr_at(const char *dir, const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	return file_addr(dir, rundir_netns(), name, sa, len);
}

/* The directory a thread last checked for sending, with the user and SOFTRDMA_RUN_DIR it was
 * checked for: a MAD or a connection handed over checks it again only when either changed
 * (checking is four system calls, and a DREP to a peer that is exiting races its exit). A
 * directory once checked stays ours: nobody else may remove or rename it (it is ours, in
 * sticky /dev/shm or /tmp). Per thread: no lock, nothing to repair after a fork. */
static _Thread_local struct {
	bool ok;
	uid_t euid;
	char env[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
} checked;

int rundir_sockaddr(const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	const char *env = getenv(RUNDIR_ENV);
	uid_t euid = geteuid();
	if (!env)
		env = "";
	if (!checked.ok || checked.euid != euid || strcmp(checked.env, env) != 0) {
		checked.ok = false;
		int err = rundir_path(checked.dir, sizeof(checked.dir));
		if (err)
			return err;
		if (strlen(env) < sizeof(checked.env)) {
			strcpy(checked.env, env);
			checked.euid = euid;
			checked.ok = true;
		}
	}
	return sockaddr_at(checked.dir, name, sa, len);
}

/* Whether a socket answers at sa (a datagram connect reaches only a bound socket). Anything
 * but "nobody there" counts as alive: a name is taken over only when surely dead. */
static bool answers(const struct sockaddr_un *sa, socklen_t len)
{
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true;
	bool alive = connect(fd, (const struct sockaddr *)sa, len) == 0 ||
		     (errno != ECONNREFUSED && errno != ENOENT);
	close(fd);
	return alive;
}

int rundir_bind(int fd, const char *name)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct sockaddr_un sa;
	socklen_t len;
	int dfd = dir_open(dir, sizeof(dir));
	if (dfd < 0)
		return dfd;
	int err = sockaddr_at(dir, name, &sa, &len);
	/* Every bind under the directory's lock: between the file's creation and the socket's
	 * binding a connect finds nobody, and a sweep or a takeover that probed then would
	 * remove a live name. Taken already: by a live socket, or left by a process that died,
	 * which is replaced (two processes never both take it over). */
	if (!err && flock(dfd, LOCK_EX) != 0)
		err = -errno;
	if (!err) {
		if (bind(fd, (struct sockaddr *)&sa, len) != 0) {
			err = -errno;
			if (err == -EADDRINUSE && !answers(&sa, len) && unlink(sa.sun_path) == 0)
				err = bind(fd, (struct sockaddr *)&sa, len) == 0 ? 0 : -errno;
		}
		flock(dfd, LOCK_UN);
	}
	close(dfd);
	return err;
}

void rundir_close(int fd)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	if (fd < 0)
		return;
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_family == AF_UNIX &&
	    len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0] == '/') {
		sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
		unlink(sa.sun_path);
	}
	close(fd);
}

void rundir_sweep(void)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int dfd = dir_open(dir, sizeof(dir));
	if (dfd < 0)
		return;
	int dfd2 = dup(dfd);
	DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
	if (!d) {
		if (dfd2 >= 0)
			close(dfd2);
		close(dfd);
		return;
	}
	if (flock(dfd, LOCK_EX) == 0) {
		struct dirent *e;
		for (int seen = 0; seen < 512 && (e = readdir(d)); seen++) {
			struct sockaddr_un sa;
			socklen_t len;
			struct stat sb;
			/* Any namespace's: a file's socket answers from every namespace,
			 * and those of namespaces that are gone are swept only here. */
			if (e->d_name[0] != 'n' ||
			    fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
			    !S_ISSOCK(sb.st_mode) || file_addr(dir, 0, e->d_name, &sa, &len) != 0)
				continue;
			if (!answers(&sa, len))
				unlink(sa.sun_path);
		}
		flock(dfd, LOCK_UN);
	}
	closedir(d);
	close(dfd);
}
