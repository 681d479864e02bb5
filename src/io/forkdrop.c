/* Descriptors a fork's child must not keep (forkdrop.h). */
#define _GNU_SOURCE
#include "io/forkdrop.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int *fds;
static size_t nfds, cap;
static struct io_forkdrop_node *nodes;

static void prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void parent(void)
{
	pthread_mutex_unlock(&lock);
}

static void child(void)
{
	int nul = nfds || nodes ? open("/dev/null", O_RDWR | O_CLOEXEC) : -1;
	for (size_t i = 0; i < nfds && nul >= 0; i++)
		dup3(nul, fds[i], O_CLOEXEC);
	for (struct io_forkdrop_node *n = nodes; n && nul >= 0; n = n->next)
		dup3(nul, *n->fd, O_CLOEXEC);
	if (nul >= 0)
		close(nul);
	/* The child's array numbers are /dev/null now: nothing to drop at its forks. Its nodes
	 * stay listed (their objects release them when the child closes them). */
	nfds = 0;
	pthread_mutex_unlock(&lock);
}

static void reg(void)
{
	pthread_atfork(prepare, parent, child);
}

int io_forkdrop_add(int fd)
{
	int err = 0;
	pthread_once(&once, reg);
	pthread_mutex_lock(&lock);
	if (nfds == cap) {
		size_t ncap = cap ? 2 * cap : 16;
		int *n = realloc(fds, ncap * sizeof(*n));
		if (n) {
			fds = n;
			cap = ncap;
		} else {
			err = -ENOMEM;
		}
	}
	if (!err)
		fds[nfds++] = fd;
	pthread_mutex_unlock(&lock);
	return err;
}

void io_forkdrop_remove(int fd)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nfds; i++) {
		if (fds[i] == fd) {
			fds[i] = fds[--nfds];
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

void io_forkdrop_hold(struct io_forkdrop_node *n, int *fd)
{
	pthread_once(&once, reg);
	n->fd = fd;
	pthread_mutex_lock(&lock);
	n->next = nodes;
	n->prev = &nodes;
	if (nodes)
		nodes->prev = &n->next;
	nodes = n;
	pthread_mutex_unlock(&lock);
}

void io_forkdrop_release(struct io_forkdrop_node *n)
{
	pthread_mutex_lock(&lock);
	*n->prev = n->next;
	if (n->next)
		n->next->prev = n->prev;
	pthread_mutex_unlock(&lock);
}
