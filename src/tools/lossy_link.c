/* A lossy IPv4 link in user space: two namespaces, two TUN devices, a forwarder that drops
 * (lossy_link.h). */
#define _GNU_SOURCE
#include "tools/lossy_link.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tools/netns.h"
#include "tools/draw.h"
#include "tools/say.h"

#define PKT_BUF 65536 /* a TUN read never returns more than this */
#define BURST	256   /* packets per direction before polling again (to see the stop) */

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
	struct netns_host side[2];
	int stopfd; /* eventfd: readable once destroy starts */
	/* Drop when a 64-bit random draw is below this; UINT64_MAX for loss 1. */
	_Atomic uint64_t threshold;
	struct direction dir[2];
};

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
			if (thr && draw_next(&d->rng) < thr) {
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

int lossy_link_available(char *why, size_t len)
{
	return netns_available(why, len);
}

int lossy_link_create(struct lossy_link **out, const struct lossy_link_cfg *cfg, char *err,
		      size_t errlen)
{
	struct lossy_link *l;
	unsigned mtu, subnet = 0;
	int rc;

	tool_say(err, errlen, "ok");
	if (!out || !cfg || !draw_valid(cfg->loss) ||
	    (cfg->mtu && (cfg->mtu < 68 || cfg->mtu > 65535))) {
		tool_say(err, errlen, "bad configuration (loss must be 0..1, mtu 68..65535 or 0)");
		return -EINVAL;
	}
	mtu = cfg->mtu ? cfg->mtu : 1500;
	netns_sweep_stale();

	l = calloc(1, sizeof(*l));
	if (!l) {
		tool_say(err, errlen, "out of memory");
		return -ENOMEM;
	}
	l->stopfd = -1;
	atomic_init(&l->threshold, draw_threshold(cfg->loss));

	unsigned seq = netns_seq();
	rc = netns_pick_subnet((unsigned)getpid() % 250 + seq, &subnet);
	for (int s = 0; s < 2; s++)
		netns_host_name(&l->side[s], seq, (unsigned)s, subnet);
	if (rc) {
		tool_say(err, errlen, "no free 10.213.N.0/24 on this host's interfaces");
		goto fail;
	}
	for (int s = 0; s < 2; s++) {
		rc = netns_host_create(&l->side[s], mtu, err, errlen);
		if (rc)
			goto fail;
	}

	l->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->stopfd < 0) {
		rc = -errno;
		tool_say(err, errlen, "eventfd: %s", strerror(-rc));
		goto fail;
	}
	for (int s = 0; s < 2; s++) {
		struct direction *d = &l->dir[s];
		d->link = l;
		d->in = l->side[s].tun;
		d->out = l->side[1 - s].tun;
		d->rng = cfg->seed ^ (s ? 0x5851f42d4c957f2dull : 0);
		d->buf = malloc(PKT_BUF);
		if (!d->buf) {
			rc = -ENOMEM;
			tool_say(err, errlen, "out of memory");
			goto fail;
		}
		rc = -pthread_create(&d->thread, NULL, forward, d);
		if (rc) {
			tool_say(err, errlen, "pthread_create: %s", strerror(-rc));
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
	return l && (side == 0 || side == 1) ? l->side[side].ns : NULL;
}

const char *lossy_link_addr(const struct lossy_link *l, int side)
{
	return l && (side == 0 || side == 1) ? l->side[side].addr : NULL;
}

const char *lossy_link_ifname(const struct lossy_link *l, int side)
{
	return l && (side == 0 || side == 1) ? l->side[side].ifname : NULL;
}

int lossy_link_set_loss(struct lossy_link *l, double loss)
{
	if (!l || !draw_valid(loss))
		return -EINVAL;
	atomic_store_explicit(&l->threshold, draw_threshold(loss), memory_order_relaxed);
	return 0;
}

int lossy_link_enter(const struct lossy_link *l, int side)
{
	if (!l || (side != 0 && side != 1))
		return -EINVAL;
	return setns(l->side[side].nsfd, CLONE_NEWNET) == 0 ? 0 : -errno;
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
		st->queue_dropped[s] = netns_host_queue_dropped(&l->side[s]);
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
	for (int s = 0; s < 2; s++)
		netns_host_destroy(&l->side[s]);
	free(l);
}
