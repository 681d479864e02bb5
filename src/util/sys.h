/* The socket calls of the data path, made with syscall() instead of glibc's wrappers.
 *
 * glibc's send, recv, sendmmsg, recvmmsg and epoll_wait are cancellation points (POSIX): in a
 * thread with a cancellation pending they act on it, and the thread ends inside the call. The
 * library makes these calls while it holds a context's lock (a post_send sends at once, a
 * poll_cq reads), so an application thread cancelled in ibv_post_send or ibv_poll_cq would end
 * holding it, and every other thread of that context would then wait for ever. Through
 * syscall() they are plain system calls, as a hardware provider's post and poll make none:
 * the cancellation is acted on at the application's next cancellation point instead.
 *
 * They are also cheaper: each glibc wrapper switches the thread to asynchronous cancellation
 * and back around the call, about 60 instructions of a wrapper's 70 (callgrind, 2 calls per
 * iWARP round trip, 2 to 4 per RoCE one).
 *
 * Also the control path's calls made in a pass under that lock: the GSI router's (connection
 * management datagrams) and the steering probes.
 *
 * Same results as the wrappers: the count, or -1 with errno set. */
#ifndef SOFTRDMA_UTIL_SYS_H
#define SOFTRDMA_UTIL_SYS_H

#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline ssize_t sys_send(int fd, const void *buf, size_t len, int flags)
{
	return (ssize_t)syscall(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static inline ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{
	return (ssize_t)syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static inline ssize_t sys_sendto(int fd, const void *buf, size_t len, int flags,
				 const struct sockaddr *to, socklen_t tolen)
{
	return (ssize_t)syscall(SYS_sendto, fd, buf, len, flags, to, tolen);
}

static inline ssize_t sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return (ssize_t)syscall(SYS_sendmsg, fd, msg, flags);
}

static inline ssize_t sys_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return (ssize_t)syscall(SYS_recvmsg, fd, msg, flags);
}

static inline int sys_sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	return (int)syscall(SYS_sendmmsg, fd, v, n, flags);
}

/* An eventfd's kick (8 bytes). */
static inline ssize_t sys_write(int fd, const void *buf, size_t len)
{
	return (ssize_t)syscall(SYS_write, fd, buf, len);
}

/* No timeout (NULL): the data path's reads never wait. */
static inline int sys_recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	return (int)syscall(SYS_recvmmsg, fd, v, n, flags, NULL);
}

/* With a timeout of 0 only (a look, not a wait): waits stay glibc's, outside the lock. */
static inline int sys_epoll_peek(int epfd, struct epoll_event *evs, int max)
{
	return (int)syscall(SYS_epoll_pwait, epfd, evs, max, 0, NULL, (size_t)8);
}

#endif
