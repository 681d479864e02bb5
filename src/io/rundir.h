/* Local names private to one user.
 *
 * softrdma's processes on one host find each other by name: the steering registry of a UDP
 * port, the unix socket a process's iWARP slot receives connections on, the unix sockets of
 * rdma_cm listeners (service IDs) and connections (tags). All of them live in one directory
 * per user, which nobody else may enter:
 *
 *   $SOFTRDMA_RUN_DIR, or /dev/shm/softrdma-<euid> (/tmp/softrdma-<euid> without /dev/shm)
 *
 * created with mode 0700 and used only if it is a directory (not a link) that the effective
 * user owns and that grants nothing to group or others. So another user can neither take a
 * name before us (denial of service) nor receive what is meant for one of our processes (a
 * TCP connection, a CM MAD), and a name we send to was bound by a process of our own user.
 * Someone else's directory under the default path is refused with a message naming its
 * owner and the way out (SOFTRDMA_RUN_DIR).
 *
 * Unix socket names are files, which outlive a process that dies: a name whose socket no
 * longer answers is stale and taken over (under the directory's lock, so two processes never
 * both take it). Files are not scoped by network namespace as abstract names and ports are,
 * so socket names carry the namespace's inode. */
#ifndef SOFTRDMA_IO_RUNDIR_H
#define SOFTRDMA_IO_RUNDIR_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define RUNDIR_ENV "SOFTRDMA_RUN_DIR"

/* The directory's path into buf (created if missing, checked every call). 0 or a negative
 * errno; on failure a message says why, once per process. */
int rundir_path(char *buf, size_t n);

/* The inode of this thread's network namespace (0 if /proc cannot tell): what names and
 * registries are scoped by. */
unsigned long long rundir_netns(void);

/* The address of local socket `name` of this network namespace; 0 or a negative errno. */
int rundir_sockaddr(const char *name, struct sockaddr_un *sa, socklen_t *len);

/* Binds fd (an AF_UNIX socket) to `name`, taking the name over from a dead process.
 * 0, -EADDRINUSE when a live socket has it, or another negative errno. */
int rundir_bind(int fd, const char *name);

/* Removes the name fd is bound to, then closes fd. For the process that bound it: a fork's
 * child that drops its copy of the socket only closes it, leaving the parent's name. */
void rundir_close(int fd);

/* Removes up to a few hundred stale socket names (of processes that died without closing
 * theirs, in any network namespace); cheap enough to call when a process opens its endpoints. */
void rundir_sweep(void);

#endif
