/* TCP reassembly for tests (see tcpstream.h). IPv4 (RFC 791) and IPv6 (RFC 8200) headers are
 * read through bounds checks against the captured length; TCP (RFC 9293) segments are placed
 * by sequence number, modulo 2^32. */
#include "tcpstream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pcap.h"

#define ETH_P_IP_    0x0800
#define ETH_P_IPV6_  0x86DD
#define IPPROTO_TCP_ 6
#define TCP_FIN	     0x01
#define TCP_SYN	     0x02
#define TCP_ACK	     0x10

struct seg {
	bool ipv6;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
	uint32_t seq;
	uint8_t flags;
	const uint8_t *payload;
	size_t len;
};

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* 1 and *s filled for a TCP segment, 0 for anything else, -EINVAL if malformed. */
static int parse_frame(const struct pcap_frame *fr, struct seg *s)
{
	size_t l3, ip_len, ihl, thl;
	const uint8_t *ip, *tcp;
	int et = pcap_ethertype(fr, &l3);

	memset(s, 0, sizeof(*s));
	if (et != ETH_P_IP_ && et != ETH_P_IPV6_)
		return 0;
	if (l3 > fr->caplen)
		return -EINVAL;
	ip = fr->data + l3;
	if (et == ETH_P_IP_) {
		if (fr->caplen - l3 < 20 || (ip[0] >> 4) != 4)
			return -EINVAL;
		ihl = (size_t)(ip[0] & 0xf) * 4;
		ip_len = rd16(ip + 2);
		if (ihl < 20 || ip_len < ihl || ip_len > fr->caplen - l3)
			return -EINVAL;
		if (ip[9] != IPPROTO_TCP_ || (rd16(ip + 6) & 0x3fff) != 0)
			return 0; /* not TCP, or a fragment */
		memcpy(s->src, ip + 12, 4);
		memcpy(s->dst, ip + 16, 4);
	} else {
		if (fr->caplen - l3 < 40 || (ip[0] >> 4) != 6)
			return -EINVAL;
		ihl = 40;
		ip_len = 40 + (size_t)rd16(ip + 4);
		if (ip_len > fr->caplen - l3)
			return -EINVAL;
		if (ip[6] != IPPROTO_TCP_)
			return 0;
		s->ipv6 = true;
		memcpy(s->src, ip + 8, 16);
		memcpy(s->dst, ip + 24, 16);
	}
	if (ip_len - ihl < 20)
		return -EINVAL;
	tcp = ip + ihl;
	thl = (size_t)(tcp[12] >> 4) * 4;
	if (thl < 20 || thl > ip_len - ihl)
		return -EINVAL;
	s->sport = rd16(tcp);
	s->dport = rd16(tcp + 2);
	s->seq = rd32(tcp + 4);
	s->flags = tcp[13];
	s->payload = tcp + thl;
	s->len = ip_len - ihl - thl;
	return 1;
}

/* The connection and direction of a segment, creating the connection if needed. */
static int find_conn(struct tcps *t, const struct seg *s, struct tcps_conn **cp, int *dirp)
{
	size_t alen = s->ipv6 ? 16 : 4;

	for (int i = 0; i < t->n; i++) {
		struct tcps_conn *c = &t->conn[i];

		if (c->ipv6 != s->ipv6)
			continue;
		for (int d = 0; d < 2; d++) {
			if (c->port[d] == s->sport && c->port[!d] == s->dport &&
			    !memcmp(c->addr[d], s->src, alen) &&
			    !memcmp(c->addr[!d], s->dst, alen)) {
				*cp = c;
				*dirp = d;
				return 0;
			}
		}
	}
	if (t->n == TCPS_MAX_CONN)
		return -ENOBUFS;
	struct tcps_conn *c = &t->conn[t->n++];
	memset(c, 0, sizeof(*c));
	c->ipv6 = s->ipv6;
	memcpy(c->addr[0], s->src, alen);
	memcpy(c->addr[1], s->dst, alen);
	c->port[0] = s->sport;
	c->port[1] = s->dport;
	*cp = c;
	*dirp = 0;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 64;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

static int add_segment(struct tcps_dir *d, const struct seg *s, uint32_t frame)
{
	uint32_t seq = s->seq;
	const uint8_t *p = s->payload;
	size_t len = s->len, frame_cap = d->seg_cap;
	int32_t ahead;

	if (s->flags & TCP_SYN) {
		d->started = true;
		d->next = seq + 1;
		seq++;
	}
	if (!d->started) { /* capture started mid-connection: take this byte as the start */
		d->started = true;
		d->next = seq;
	}
	if (len == 0)
		goto flags;
	ahead = (int32_t)(seq - d->next);
	if (ahead > 0)
		return -EPROTO; /* a hole: bytes we never saw */
	if (ahead < 0) {	/* retransmission or overlap: drop what we have */
		size_t old = (size_t)(-(int64_t)ahead);
		size_t overlap = old < len ? old : len;

		if (old > d->len)
			return -EPROTO;
		if (memcmp(d->data + d->len - old, p, overlap) != 0)
			d->conflict_bytes += overlap;
		d->dup_bytes += overlap;
		p += overlap;
		len -= overlap;
		if (len == 0)
			goto flags;
	}
	/* seg and seg_frame grow in step: both from the same capacity. */
	if (grow((void **)&d->data, &d->cap, d->len + len, 1) ||
	    grow((void **)&d->seg_frame, &frame_cap, d->nseg + 1, sizeof(*d->seg_frame)) ||
	    grow((void **)&d->seg, &d->seg_cap, d->nseg + 1, sizeof(*d->seg)))
		return -ENOMEM;
	d->seg[d->nseg] = d->len;
	d->seg_frame[d->nseg] = frame;
	d->nseg++;
	memcpy(d->data + d->len, p, len);
	d->len += len;
	d->next += (uint32_t)len;
flags:
	if (s->flags & TCP_FIN)
		d->fin = true;
	return 0;
}

int tcps_load(struct tcps *t, const char *path)
{
	struct pcap_file f;
	struct pcap_frame fr;
	int r;

	memset(t, 0, sizeof(*t));
	r = pcap_open(&f, path);
	if (r < 0)
		return r;
	while ((r = pcap_next(&f, &fr)) == 1) {
		struct seg s;
		struct tcps_conn *c;
		int dir;

		t->frames++;
		r = parse_frame(&fr, &s);
		if (r < 0)
			goto fail;
		if (r == 0) {
			t->skipped++;
			continue;
		}
		r = find_conn(t, &s, &c, &dir);
		if (r < 0)
			goto fail;
		r = add_segment(&c->dir[dir], &s, fr.index);
		if (r < 0)
			goto fail;
	}
	if (r < 0)
		goto fail;
	pcap_close(&f);
	return 0;
fail:
	pcap_close(&f);
	tcps_free(t);
	return r;
}

void tcps_free(struct tcps *t)
{
	for (int i = 0; i < t->n; i++) {
		for (int d = 0; d < 2; d++) {
			struct tcps_dir *dd = &t->conn[i].dir[d];

			free(dd->data);
			free(dd->seg);
			free(dd->seg_frame);
			memset(dd, 0, sizeof(*dd));
		}
	}
	t->n = 0;
}
