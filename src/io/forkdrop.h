/* Descriptors a fork's child must not keep.
 *
 * A socket lives as long as any process holds it. A child forked without exec holds copies of
 * all the parent's sockets, so a socket the parent closes (or leaves by exiting) would stay
 * bound and reachable while the child lives: a unix name that still answers, so other
 * processes keep handing it TCP connections nobody takes; a multicast membership nobody reads.
 * Descriptors registered here are replaced by /dev/null in the child at the fork (the numbers
 * stay taken, so the child's later close of them closes nothing of the parent's). UDP and TCP
 * sockets have their own handling (udp.c, tcp.c). */
#ifndef SOFTRDMA_IO_FORKDROP_H
#define SOFTRDMA_IO_FORKDROP_H

/* Registers fd: a fork's child gets /dev/null in its place. 0 or -ENOMEM. */
int io_forkdrop_add(int fd);
/* Unregisters fd; call before closing it. */
void io_forkdrop_remove(int fd);

#endif
