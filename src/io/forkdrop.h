/* Descriptors a fork's child must not keep.
 *
 * A socket lives as long as any process holds it. A child forked without exec holds copies of
 * all the parent's sockets, so a socket the parent closes (or leaves by exiting) would stay
 * bound and reachable while the child lives: a unix name that still answers, so other
 * processes keep handing it TCP connections nobody takes; a multicast membership nobody reads.
 * Descriptors registered here are replaced by /dev/null in the child at the fork (the numbers
 * stay taken, so the child's later close of them closes nothing of the parent's). UDP sockets
 * have their own handling (udp.c: the steering registry goes with them). */
#ifndef SOFTRDMA_IO_FORKDROP_H
#define SOFTRDMA_IO_FORKDROP_H

/* Registers fd: a fork's child gets /dev/null in its place. 0 or -ENOMEM. */
int io_forkdrop_add(int fd);
/* Unregisters fd; call before closing it. */
void io_forkdrop_remove(int fd);

/* The same for descriptors kept in objects of their own (many of them, come and go often: TCP
 * listeners and connections): the node lives in the object, *fd is read at the fork, and both
 * calls take constant time. Release before the descriptor is closed (a number closed while
 * held would be clobbered at the next fork). */
struct io_forkdrop_node {
	int *fd;
	struct io_forkdrop_node *next, **prev;
};
void io_forkdrop_hold(struct io_forkdrop_node *n, int *fd);
void io_forkdrop_release(struct io_forkdrop_node *n);

#endif
