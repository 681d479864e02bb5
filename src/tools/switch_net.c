/* N hosts in namespaces around the switch model, forwarded by one thread (switch_net.h). */
#define _GNU_SOURCE
#include "tools/switch_net.h"

#include <arpa/inet.h>
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
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "tools/netns.h"
#include "tools/say.h"

#define PKT_BUF 65536 /* a TUN read never returns more than this */
#define BURST	64    /* packets read from one host before the next host's turn */

struct switch_net {
	unsigned hosts;
	struct netns_host host[SWM_MAX_PORTS];
	pthread_mutex_t lock; /* the model and the counters below */
	struct swm *sw;
	uint64_t write_errors[SWM_MAX_PORTS];
	uint8_t *buf; /* PKT_BUF bytes: one read at a time */
	int stopfd;   /* eventfd: written once destroy starts */
	atomic_bool stop;
	pthread_t thread;
	bool started, lock_made;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Writes every packet the switch has sent by `now` into its host. Called with the lock. */
static void release(struct switch_net *n, uint64_t now)
{
	const uint8_t *p;
	unsigned port;
	size_t len;
	while ((p = swm_output(n->sw, now, &port, &len))) {
		/* A TUN write hands the packet to the host's receive path: it does not block,
		 * and fails only for a malformed packet or a missing device. */
		if (write(n->host[port].tun, p, len) != (ssize_t)len)
			n->write_errors[port]++;
	}
}

/* Reads what each host has sent, BURST packets at a time per host in turn, until every TUN
 * is empty or a round brought nothing. Called with the lock. */
static void take_input(struct switch_net *n, uint64_t now)
{
	for (unsigned h = 0; h < n->hosts; h++) {
		for (int i = 0; i < BURST; i++) {
			ssize_t r = read(n->host[h].tun, n->buf, PKT_BUF);
			if (r <= 0)
				break; /* EAGAIN: empty; EINTR: the next turn */
			swm_input(n->sw, h, n->buf, (size_t)r, now);
		}
	}
}

static void *forward(void *arg)
{
	struct switch_net *n = arg;
	struct pollfd pfd[SWM_MAX_PORTS + 1];

	/* ppoll's timeout is otherwise rounded up by 50 us of slack: longer than a packet. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	for (unsigned h = 0; h < n->hosts; h++)
		pfd[h] = (struct pollfd){.fd = n->host[h].tun, .events = POLLIN};
	pfd[n->hosts] = (struct pollfd){.fd = n->stopfd, .events = POLLIN};

	while (!atomic_load_explicit(&n->stop, memory_order_relaxed)) {
		uint64_t now = now_ns();
		pthread_mutex_lock(&n->lock);
		release(n, now); /* departures first: the inputs must see the queues as they are */
		take_input(n, now);
		release(n, now); /* without a rate limit they are due at once */
		uint64_t due = swm_deadline(n->sw);
		pthread_mutex_unlock(&n->lock);

		struct timespec ts, *tsp = NULL;
		if (due != UINT64_MAX) {
			uint64_t t = now_ns();
			uint64_t wait = due > t ? due - t : 0;
			ts.tv_sec = (time_t)(wait / 1000000000u);
			ts.tv_nsec = (long)(wait % 1000000000u);
			tsp = &ts;
		}
		if (ppoll(pfd, n->hosts + 1, tsp, NULL) < 0 && errno != EINTR)
			break; /* cannot happen with valid fds; leave rather than spin */
	}
	return NULL;
}

int switch_net_available(char *why, size_t len)
{
	return netns_available(why, len);
}

int switch_net_create(struct switch_net **out, const struct switch_net_cfg *cfg, char *err,
		      size_t errlen)
{
	struct switch_net *n;
	unsigned subnet = 0, mtu;
	int rc;

	tool_say(err, errlen, "ok");
	if (!out || !cfg) {
		tool_say(err, errlen, "no configuration");
		return -EINVAL;
	}
	rc = swm_cfg_check(&cfg->sw, err, errlen);
	if (rc)
		return rc;
	if (cfg->mtu && (cfg->mtu < 68 || cfg->mtu > 65535)) {
		tool_say(err, errlen, "the MTU must be 68..65535 bytes, not %u", cfg->mtu);
		return -EINVAL;
	}
	mtu = cfg->mtu ? cfg->mtu : 1500;
	netns_sweep_stale();

	n = calloc(1, sizeof(*n));
	if (!n) {
		tool_say(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n->hosts = cfg->sw.ports;
	n->stopfd = -1;
	atomic_init(&n->stop, false);
	for (unsigned h = 0; h < SWM_MAX_PORTS; h++)
		n->host[h].tun = n->host[h].nsfd = n->host[h].procfd = -1;

	unsigned seq = netns_seq();
	rc = netns_pick_subnet((unsigned)getpid() % 250 + seq, &subnet);
	if (rc) {
		tool_say(err, errlen, "no free 10.213.N.0/24 on this host's interfaces");
		goto fail;
	}
	struct swm_cfg sw = cfg->sw;
	for (unsigned h = 0; h < n->hosts; h++) {
		struct in_addr a;
		netns_host_name(&n->host[h], seq, h, subnet);
		rc = netns_host_create(&n->host[h], mtu, err, errlen);
		if (rc)
			goto fail;
		if (inet_pton(AF_INET, n->host[h].addr, &a) != 1) {
			rc = -EINVAL; /* cannot happen: netns_host_name wrote it */
			tool_say(err, errlen, "bad address %s", n->host[h].addr);
			goto fail;
		}
		sw.addr[h] = ntohl(a.s_addr);
	}
	rc = swm_create(&sw, &n->sw);
	if (rc) {
		tool_say(err, errlen, "cannot create the switch: %s", strerror(-rc));
		goto fail;
	}
	n->buf = malloc(PKT_BUF);
	if (!n->buf) {
		rc = -ENOMEM;
		tool_say(err, errlen, "out of memory");
		goto fail;
	}
	rc = -pthread_mutex_init(&n->lock, NULL);
	if (rc) {
		tool_say(err, errlen, "pthread_mutex_init: %s", strerror(-rc));
		goto fail;
	}
	n->lock_made = true;
	n->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->stopfd < 0) {
		rc = -errno;
		tool_say(err, errlen, "eventfd: %s", strerror(-rc));
		goto fail;
	}
	rc = -pthread_create(&n->thread, NULL, forward, n);
	if (rc) {
		tool_say(err, errlen, "pthread_create: %s", strerror(-rc));
		goto fail;
	}
	n->started = true;
	*out = n;
	return 0;

fail:
	switch_net_destroy(n); /* undoes exactly what was done: every field says if it was */
	return rc;
}

unsigned switch_net_hosts(const struct switch_net *n)
{
	return n ? n->hosts : 0;
}

const char *switch_net_netns(const struct switch_net *n, unsigned h)
{
	return n && h < n->hosts ? n->host[h].ns : NULL;
}

const char *switch_net_addr(const struct switch_net *n, unsigned h)
{
	return n && h < n->hosts ? n->host[h].addr : NULL;
}

const char *switch_net_ifname(const struct switch_net *n, unsigned h)
{
	return n && h < n->hosts ? n->host[h].ifname : NULL;
}

int switch_net_enter(const struct switch_net *n, unsigned h)
{
	if (!n || h >= n->hosts)
		return -EINVAL;
	return setns(n->host[h].nsfd, CLONE_NEWNET) == 0 ? 0 : -errno;
}

int switch_net_stats(const struct switch_net *n, unsigned h, struct switch_net_stats *st)
{
	if (!n || h >= n->hosts || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock((pthread_mutex_t *)&n->lock);
	int rc = swm_port_stats(n->sw, h, now_ns(), &st->port);
	st->write_errors = n->write_errors[h];
	pthread_mutex_unlock((pthread_mutex_t *)&n->lock);
	st->queue_dropped = netns_host_queue_dropped(&n->host[h]);
	return rc;
}

int switch_net_set_loss(struct switch_net *n, double loss)
{
	if (!n)
		return -EINVAL;
	pthread_mutex_lock(&n->lock);
	int rc = swm_set_loss(n->sw, loss);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

void switch_net_destroy(struct switch_net *n)
{
	if (!n)
		return;
	if (n->started) {
		uint64_t one = 1;
		atomic_store(&n->stop, true);
		if (write(n->stopfd, &one, sizeof(one)) != sizeof(one))
			abort(); /* cannot fail on an eventfd far from its limit: our bug */
		pthread_join(n->thread, NULL);
	}
	if (n->stopfd >= 0)
		close(n->stopfd);
	if (n->lock_made)
		pthread_mutex_destroy(&n->lock);
	swm_destroy(n->sw);
	free(n->buf);
	for (unsigned h = 0; h < n->hosts; h++)
		netns_host_destroy(&n->host[h]);
	free(n);
}
