/* The switch model (tools/switch_model.h) on a virtual clock, against closed forms derived from
 * its configuration: the serialisation time L * 8 / rate of every packet and the departure
 * schedule it implies (k packets queued at once leave at k * L * 8 / rate, however late the
 * caller asks), the hosts' links spreading a burst at L * 8 / host_rate, priorities 7 and 6
 * strictly first and 0..5 sharing the rest equally by bytes (within DRR's bound of a quantum
 * and a packet), no preemption, drop-tail exactly at `buffer` (checked against a FIFO computed
 * here), RED marking with probability pmax * (q - kmin) / (kmax - kmin) at a queue held at q
 * bytes (binomial tolerance), PFC's pause and resume at xoff / xon per priority (the pause time
 * of a 2:1 incast follows from the overload; a packet to an idle port waits behind a pause:
 * head-of-line blocking), drop-tail and no pause without PFC, seeded random loss at its rate,
 * and the deadline: never late, and without host links the exact time of the next departure.
 * Every packet the switch emits is checked: valid IPv4 checksum, out once, in order within its
 * class.
 *
 * Packets are built here: a 20-byte IPv4 header (TOS = DSCP << 2 | ECN) whose payload names the
 * sending port and a sequence number per sender. The seed (for the model's draws and the random
 * test) is printed. */
#include "check.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>

#include "tools/switch_model.h"

#define GBPS 1000000000ull

#define HDR 20 /* IPv4 header without options */
#define TAG 28 /* header, then the sender's port and its sequence number */
#define PKT 1500

#define DSCP_DATA 26 /* priority 3: RoCE data */
#define DSCP_CNP  48 /* priority 6: CNPs */

#define ECN_NOT	 0
#define ECN_ECT1 1
#define ECN_ECT0 2
#define ECN_CE	 3

static uint64_t seed;

/* The host behind port p: 10.0.0.(p + 1). */
static uint32_t host(unsigned p)
{
	return 0x0a000001u + p;
}

static void put16(uint8_t *b, uint16_t v)
{
	b[0] = (uint8_t)(v >> 8);
	b[1] = (uint8_t)v;
}

static void put32(uint8_t *b, uint32_t v)
{
	put16(b, (uint16_t)(v >> 16));
	put16(b + 2, (uint16_t)v);
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The one's complement sum of the header's 16-bit words (RFC 1071). */
static uint16_t hdr_sum(const uint8_t *h)
{
	uint32_t sum = 0;
	for (int i = 0; i < HDR; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* A header whose checksum field is right sums to 0xffff, checksum included. */
static bool csum_ok(const uint8_t *pkt, size_t len)
{
	return len >= HDR && hdr_sum(pkt) == 0xffff;
}

static void fix_csum(uint8_t *h)
{
	put16(h + 10, 0);
	put16(h + 10, (uint16_t)~hdr_sum(h));
}

/* A valid IPv4 packet of len (>= TAG) bytes from port `from`'s host to dst. The payload names
 * the sender and seq, then a byte derived from seq (so that a mix-up shows). */
static void build(uint8_t *pkt, size_t len, unsigned from, uint32_t dst, uint8_t dscp, uint8_t ecn,
		  uint32_t seq)
{
	memset(pkt, 0, HDR);
	pkt[0] = 0x45; /* version 4, IHL 5 */
	pkt[1] = (uint8_t)(dscp << 2 | ecn);
	put16(pkt + 2, (uint16_t)len);
	put16(pkt + 4, (uint16_t)seq); /* identification */
	pkt[6] = 0x40;		       /* DF */
	pkt[8] = 64;		       /* TTL */
	pkt[9] = 17;		       /* UDP */
	put32(pkt + 12, host(from));
	put32(pkt + 16, dst);
	fix_csum(pkt);
	put32(pkt + HDR, from);
	put32(pkt + HDR + 4, seq);
	memset(pkt + TAG, (int)(seq * 7 + from + 1) & 0xff, len - TAG);
}

/* One packet the switch emitted, decoded. */
struct out {
	const uint8_t *pkt;
	size_t len;
	unsigned port;
	unsigned from; /* SWM_MAX_PORTS if the payload is too short to say */
	uint32_t seq;
	uint8_t dscp, ecn;
};

/* The next packet out by now; false if none. Whatever leaves carries a valid IPv4 header. */
static bool next_out(struct swm *s, uint64_t now, struct out *o)
{
	o->pkt = swm_output(s, now, &o->port, &o->len);
	if (!o->pkt)
		return false;
	CHECK(o->len >= TAG);
	CHECK(csum_ok(o->pkt, o->len));
	CHECK(o->port < SWM_MAX_PORTS);
	if (o->len < TAG) {
		o->from = SWM_MAX_PORTS;
		o->seq = 0;
		o->dscp = o->ecn = 0;
		return true;
	}
	o->from = get32(o->pkt + HDR);
	o->seq = get32(o->pkt + HDR + 4);
	o->dscp = o->pkt[1] >> 2;
	o->ecn = o->pkt[1] & 3;
	return true;
}

/* A packet out, and when it was taken. */
struct rec {
	uint64_t t;
	unsigned port, from;
	uint32_t seq;
};

/* What came out of a switch. Each sender numbers its packets 0, 1, 2...; where its packets
 * share one FIFO (one class, one egress port), strictly increasing numbers at the output mean
 * in order and none twice. */
struct sink {
	bool any_order;		      /* the senders' packets may overtake each other */
	bool host_link;		      /* host_rate_bps: a deadline may be an arrival */
	uint32_t next[SWM_MAX_PORTS]; /* by sender: the lowest number still allowed */
	uint64_t from[SWM_MAX_PORTS]; /* packets by sender */
	uint64_t to[SWM_MAX_PORTS];   /* packets by egress port */
	struct rec *log;	      /* when not NULL, every packet with its time */
	size_t cap, n;
};

static void sink_add(struct sink *k, const struct out *o, uint64_t now)
{
	CHECK(o->from < SWM_MAX_PORTS);
	if (o->from >= SWM_MAX_PORTS || o->port >= SWM_MAX_PORTS)
		return;
	if (!k->any_order) {
		CHECK(o->seq >= k->next[o->from]);
		k->next[o->from] = o->seq + 1;
	}
	k->from[o->from]++;
	k->to[o->port]++;
	if (k->log && k->n < k->cap)
		k->log[k->n] = (struct rec){now, o->port, o->from, o->seq};
	k->n++;
}

/* Takes everything out by now into k; returns how many. */
static unsigned take(struct swm *s, uint64_t now, struct sink *k)
{
	struct out o;
	unsigned n = 0;
	while (next_out(s, now, &o)) {
		sink_add(k, &o, now);
		n++;
	}
	return n;
}

/* Runs the clock from now to the switch's deadlines, up to `until`: nothing may come out a
 * nanosecond before a deadline (it is never late), and something must at it unless a host
 * link is on (then a deadline may be a packet entering the switch). Returns the last time the
 * clock was at. */
static uint64_t run(struct swm *s, uint64_t now, uint64_t until, struct sink *k)
{
	struct out o;
	take(s, now, k);
	for (;;) {
		uint64_t d = swm_deadline(s);
		if (d == UINT64_MAX || d > until)
			break;
		CHECK(d > now); /* everything due by now was taken */
		if (d <= now)
			break;
		if (next_out(s, d - 1, &o)) {
			CHECK(!"a packet left before the deadline");
			sink_add(k, &o, d - 1);
		}
		unsigned n = take(s, d, k);
		if (!k->host_link)
			CHECK(n > 0);
		now = d;
		if (n == 0 && !k->host_link)
			break;
	}
	return now;
}

/* The same until the switch is empty. */
static uint64_t drain(struct swm *s, uint64_t now, struct sink *k)
{
	uint64_t last = run(s, now, UINT64_MAX, k);
	CHECK_EQ(swm_deadline(s), UINT64_MAX);
	return last;
}

/* Serialisation time of len bytes at rate, when it is a whole number of ns. */
static uint64_t tx_ns(size_t len, uint64_t rate)
{
	REQUIRE(len * 8 * GBPS % rate == 0);
	return len * 8 * GBPS / rate;
}

/* Within 5 standard deviations of the binomial (n, p); exact at p = 0 and p = 1. */
static void check_binomial(uint64_t hits, uint64_t n, double p)
{
	double sigma = sqrt((double)n * p * (1 - p));
	CHECK(fabs((double)hits - (double)n * p) <= 5 * sigma);
	if (fabs((double)hits - (double)n * p) > 5 * sigma)
		fprintf(stderr, "  %" PRIu64 " of %" PRIu64 ", expected p %.4f\n", hits, n, p);
}

static struct swm_port_stats stats(const struct swm *s, unsigned p, uint64_t now)
{
	struct swm_port_stats st;
	memset(&st, 0, sizeof st);
	REQUIRE(swm_port_stats(s, p, now, &st) == 0);
	return st;
}

/* Defaults for `ports` ports with their hosts' addresses. */
static void cfg_base(struct swm_cfg *c, unsigned ports)
{
	swm_cfg_default(c, ports);
	for (unsigned p = 0; p < ports; p++)
		c->addr[p] = host(p);
	c->seed = seed;
}

/* swm_cfg_check and swm_create agree on c: want 0 or -EINVAL, with a reason when refused. */
static void cfg_verdict(const struct swm_cfg *c, int want, const char *what)
{
	char why[128];
	struct swm *s = NULL;
	memset(why, 0, sizeof why);
	int rc = swm_cfg_check(c, why, sizeof why);
	CHECK_EQ(rc, want);
	if (rc != want)
		fprintf(stderr, "  config: %s\n", what);
	if (want)
		CHECK(why[0] != '\0');
	CHECK_EQ(swm_cfg_check(c, NULL, 0), want);
	rc = swm_create(c, &s);
	CHECK_EQ(rc, want);
	if (rc == 0)
		swm_destroy(s);
}

static void test_cfg(void)
{
	struct swm_cfg c, d;
	/* Poison first: the defaults must set every field, the addresses to 0. */
	memset(&c, 0xa5, sizeof c);
	swm_cfg_default(&c, 4);
	CHECK_EQ(c.ports, 4);
	for (unsigned p = 0; p < SWM_MAX_PORTS; p++)
		CHECK_EQ(c.addr[p], 0);
	CHECK_EQ(c.rate_bps, 0);
	CHECK_EQ(c.host_rate_bps, 0);
	CHECK_EQ(c.buffer, 1u << 20);
	CHECK(!c.ecn);
	CHECK_EQ(c.kmin, 5000); /* the header says KB for these and KiB for xoff / xon */
	CHECK_EQ(c.kmax, 200000);
	CHECK(c.pmax == 0.01);
	CHECK(!c.pfc);
	CHECK_EQ(c.pfc_prio, 3);
	CHECK_EQ(c.xoff, 96 * 1024);
	CHECK_EQ(c.xon, 64 * 1024);
	CHECK_EQ(c.hold_max, 8192);
	CHECK(c.loss == 0);
	CHECK_EQ(c.seed, 1);

	cfg_base(&c, 4);
	cfg_verdict(&c, 0, "defaults");
	cfg_base(&d, 2);
	cfg_verdict(&d, 0, "2 ports");
	cfg_base(&d, SWM_MAX_PORTS);
	cfg_verdict(&d, 0, "16 ports");
	d = c;
	d.buffer = 65535;
	cfg_verdict(&d, 0, "buffer 65535");
	d = c;
	d.pmax = 1;
	d.ecn = true;
	cfg_verdict(&d, 0, "pmax 1");
	d.pmax = 0;
	cfg_verdict(&d, 0, "pmax 0");
	d = c;
	d.kmin = d.kmax;
	cfg_verdict(&d, 0, "kmin = kmax");
	d = c;
	d.loss = 1;
	cfg_verdict(&d, 0, "loss 1");
	d = c;
	d.pfc = true;
	d.xon = d.xoff - 1;
	cfg_verdict(&d, 0, "xon = xoff - 1");
	d = c;
	d.pfc = true;
	d.pfc_prio = 7;
	d.hold_max = 1;
	cfg_verdict(&d, 0, "pfc_prio 7, hold_max 1");

	d = c;
	d.ports = 0;
	cfg_verdict(&d, -EINVAL, "0 ports");
	d = c;
	d.ports = 1;
	cfg_verdict(&d, -EINVAL, "1 port");
	d = c;
	d.ports = SWM_MAX_PORTS + 1;
	cfg_verdict(&d, -EINVAL, "17 ports");
	d = c;
	d.kmin = d.kmax + 1;
	cfg_verdict(&d, -EINVAL, "kmin > kmax");
	d = c;
	d.pmax = 1.0001;
	cfg_verdict(&d, -EINVAL, "pmax > 1");
	d.pmax = -0.01;
	cfg_verdict(&d, -EINVAL, "pmax < 0");
	d.pmax = NAN;
	cfg_verdict(&d, -EINVAL, "pmax NaN");
	d = c;
	d.pfc = true;
	d.xon = d.xoff;
	cfg_verdict(&d, -EINVAL, "xon = xoff");
	d.xon = d.xoff + 1;
	cfg_verdict(&d, -EINVAL, "xon > xoff");
	d.xon = 0;
	cfg_verdict(&d, -EINVAL, "xon 0");
	d = c;
	d.hold_max = 0;
	cfg_verdict(&d, -EINVAL, "hold_max 0");
	d = c;
	d.loss = -0.01;
	cfg_verdict(&d, -EINVAL, "loss < 0");
	d.loss = 1.01;
	cfg_verdict(&d, -EINVAL, "loss > 1");
	d.loss = NAN;
	cfg_verdict(&d, -EINVAL, "loss NaN");
	d = c;
	d.buffer = 65534;
	cfg_verdict(&d, -EINVAL, "buffer 65534");
	d = c;
	d.pfc_prio = 8;
	cfg_verdict(&d, -EINVAL, "pfc_prio 8");

	/* The reason fits the buffer it is given, terminated. */
	char small[8];
	memset(small, 'x', sizeof small);
	CHECK_EQ(swm_cfg_check(&d, small, 4), -EINVAL);
	CHECK(memchr(small, '\0', 4) != NULL);
	CHECK(small[4] == 'x' && small[7] == 'x');
	swm_destroy(NULL);
}

/* Routing by destination, copies byte for byte, and everything that is not a routable IPv4
 * packet dropped and counted by its ingress port. */
static void test_routing(void)
{
	struct swm_cfg c;
	struct swm *s;
	struct out o;
	uint8_t pkt[PKT], copy[PKT];
	const uint64_t t = 1000;
	uint64_t rx0 = 0, rxb0 = 0, bad0 = 0;

	cfg_base(&c, 4);
	REQUIRE(swm_create(&c, &s) == 0);
	CHECK_EQ(swm_deadline(s), UINT64_MAX);

	/* To port 2's host: out on port 2 as it came (no rate limit: at once). The model keeps a
	 * copy: the caller's buffer is overwritten before the packet leaves. */
	build(pkt, 100, 0, host(2), 0, ECN_ECT0, 0);
	memcpy(copy, pkt, 100);
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_QUEUED);
	rx0++, rxb0 += 100;
	memset(pkt, 0xee, sizeof pkt);
	CHECK_EQ(swm_deadline(s), t);
	REQUIRE(next_out(s, t, &o));
	CHECK_EQ(o.port, 2);
	CHECK_EQ(o.len, 100);
	if (o.len == 100)
		CHECK_MEM(o.pkt, copy, 100);
	CHECK(!next_out(s, t, &o));
	build(pkt, PKT, 1, host(3), DSCP_DATA, ECN_NOT, 0);
	memcpy(copy, pkt, PKT);
	CHECK_EQ(swm_input(s, 1, pkt, PKT, t), SWM_QUEUED);
	REQUIRE(next_out(s, t, &o));
	CHECK_EQ(o.port, 3);
	CHECK_EQ(o.len, PKT);
	if (o.len == PKT)
		CHECK_MEM(o.pkt, copy, PKT);
	CHECK(!next_out(s, t, &o));

	/* No such host; the ingress port's own host. */
	build(pkt, 100, 0, 0x0a000063, 0, 0, 1);
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_DROP_NOROUTE);
	rx0++, rxb0 += 100;
	build(pkt, 100, 1, host(1), 0, 0, 1);
	CHECK_EQ(swm_input(s, 1, pkt, 100, t), SWM_DROP_NOROUTE);

	/* Not a valid IPv4 packet: too short for a header, version 6, IHL 4, a bad checksum, a
	 * total length beyond the packet or short of the header. */
	build(pkt, 100, 0, host(2), 0, 0, 2);
	CHECK_EQ(swm_input(s, 0, pkt, HDR - 1, t), SWM_DROP_BAD);
	CHECK_EQ(swm_input(s, 0, pkt, 0, t), SWM_DROP_BAD);
	rx0 += 2, rxb0 += HDR - 1, bad0 += 2;
	pkt[0] = 0x65;
	fix_csum(pkt);
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_DROP_BAD);
	pkt[0] = 0x44;
	fix_csum(pkt);
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_DROP_BAD);
	build(pkt, 100, 0, host(2), 0, 0, 2);
	pkt[11] ^= 1;
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_DROP_BAD);
	build(pkt, 100, 0, host(2), 0, 0, 2);
	put16(pkt + 2, 101);
	fix_csum(pkt);
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_DROP_BAD);
	put16(pkt + 2, HDR - 1);
	fix_csum(pkt);
	CHECK_EQ(swm_input(s, 0, pkt, 100, t), SWM_DROP_BAD);
	rx0 += 5, rxb0 += 500, bad0 += 5;
	CHECK_EQ(swm_deadline(s), UINT64_MAX);
	CHECK(!next_out(s, t, &o));

	/* No such port. */
	build(pkt, 100, 0, host(2), 0, 0, 3);
	CHECK_EQ(swm_input(s, 4, pkt, 100, t), -EINVAL);
	CHECK_EQ(swm_input(s, SWM_MAX_PORTS, pkt, 100, t), -EINVAL);
	struct swm_port_stats st;
	CHECK_EQ(swm_port_stats(s, 4, t, &st), -EINVAL);

	st = stats(s, 0, t);
	CHECK_EQ(st.rx_pkts, rx0); /* "what its host sent into the switch": dropped ones too */
	CHECK_EQ(st.rx_bytes, rxb0);
	CHECK_EQ(st.drop_bad, bad0);
	CHECK_EQ(st.drop_noroute, 1);
	CHECK_EQ(st.tx_pkts, 0);
	st = stats(s, 1, t);
	CHECK_EQ(st.rx_pkts, 2);
	CHECK_EQ(st.rx_bytes, PKT + 100);
	CHECK_EQ(st.drop_bad, 0);
	CHECK_EQ(st.drop_noroute, 1);
	st = stats(s, 2, t);
	CHECK_EQ(st.tx_pkts, 1);
	CHECK_EQ(st.tx_bytes, 100);
	CHECK_EQ(st.rx_pkts, 0);
	CHECK_EQ(st.queue_bytes, 0);
	st = stats(s, 3, t);
	CHECK_EQ(st.tx_pkts, 1);
	CHECK_EQ(st.tx_bytes, PKT);
	CHECK_EQ(st.drop_bad + st.drop_noroute + st.drop_tail + st.drop_loss, 0);
	swm_destroy(s);
}

/* The port's rate: a packet of L bytes takes L * 8 / R; packets queued together leave one
 * every L * 8 / R, the k-th at k * L * 8 / R, whenever the caller asks. */
static void test_rate(void)
{
	struct swm_cfg c;
	struct swm *s;
	struct out o;
	uint8_t pkt[PKT], want[PKT];
	const size_t len = 1000;
	const unsigned n = 20;
	uint32_t seq = 0;

	cfg_base(&c, 3);
	c.rate_bps = 1 * GBPS;
	const uint64_t tx = tx_ns(len, c.rate_bps); /* 8 us */
	REQUIRE(swm_create(&c, &s) == 0);

	/* n at time 0, taken one by one at the deadlines. */
	for (unsigned i = 0; i < n; i++) {
		build(pkt, len, 0, host(1), 0, 0, seq++);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	for (unsigned k = 1; k <= n; k++) {
		uint64_t d = swm_deadline(s);
		CHECK_EQ(d, k * tx);
		if (d != k * tx)
			break;
		CHECK(!next_out(s, d - 1, &o));
		REQUIRE(next_out(s, d, &o));
		CHECK_EQ(o.port, 1);
		CHECK_EQ(o.seq, k - 1);
		build(want, len, 0, host(1), 0, 0, k - 1);
		CHECK_EQ(o.len, len);
		if (o.len == len)
			CHECK_MEM(o.pkt, want, len);
		CHECK(!next_out(s, d, &o));
	}
	CHECK_EQ(swm_deadline(s), UINT64_MAX);

	/* A late caller: all that left by then comes out at once, and the schedule does not
	 * move (the next is still due at t0 + 6 tx, not a whole tx after the late call). */
	const uint64_t t0 = 1000 * tx;
	for (unsigned i = 0; i < n; i++) {
		build(pkt, len, 0, host(1), 0, 0, seq++);
		CHECK_EQ(swm_input(s, 0, pkt, len, t0), SWM_QUEUED);
	}
	CHECK_EQ(swm_deadline(s), t0 + tx); /* an idle port starts at once */
	struct sink k = {0};
	k.next[0] = n;
	CHECK_EQ(take(s, t0 + 5 * tx + tx / 2, &k), 5);
	CHECK_EQ(swm_deadline(s), t0 + 6 * tx);
	CHECK_EQ(take(s, t0 + 12 * tx + tx / 4, &k), 7);
	CHECK_EQ(swm_deadline(s), t0 + 13 * tx);
	CHECK_EQ(take(s, t0 + 100 * tx, &k), n - 12);
	CHECK_EQ(k.from[0], n);
	CHECK_EQ(swm_deadline(s), UINT64_MAX);

	/* The long run, asked at irregular late times: by t, exactly floor((t - t1) / tx) have
	 * left. */
	const unsigned m = 1000;
	const uint64_t t1 = t0 + 200 * tx;
	for (unsigned i = 0; i < m; i++) {
		build(pkt, len, 0, host(1), 0, 0, seq++);
		CHECK_EQ(swm_input(s, 0, pkt, len, t1), SWM_QUEUED);
	}
	uint64_t got = 0;
	for (uint64_t t = t1; got < m && t < t1 + 2 * m * tx; t += 7 * tx + 1234) {
		got += take(s, t, &k);
		uint64_t due = (t - t1) / tx;
		CHECK_EQ(got, due < m ? due : m);
	}
	CHECK_EQ(got, m);
	struct swm_port_stats st = stats(s, 1, t1 + 2 * m * tx);
	CHECK_EQ(st.tx_pkts, 2 * n + m);
	CHECK_EQ(st.tx_bytes, (2 * n + m) * len);
	CHECK_EQ(st.queue_bytes, 0);
	swm_destroy(s);

	/* A time that is not a whole number of ns: 1001 bytes at 3 Gbit/s, 2669.33 ns. Each
	 * departure may be rounded, by at most a ns per packet in all. */
	cfg_base(&c, 3);
	c.rate_bps = 3 * GBPS;
	const size_t len3 = 1001;
	const double exact = (double)len3 * 8e9 / (double)c.rate_bps;
	REQUIRE(swm_create(&c, &s) == 0);
	struct sink k3 = {0};
	k3.next[0] = 150;
	for (unsigned i = 0; i < 300; i++) {
		build(pkt, len3, 0, host(1), 0, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len3, 0), SWM_QUEUED);
	}
	uint64_t prev = 0;
	for (unsigned j = 1; j <= 150; j++) {
		uint64_t d = swm_deadline(s);
		CHECK(fabs((double)d - j * exact) <= j);
		CHECK(d - prev >= (uint64_t)floor(exact) && d - prev <= (uint64_t)ceil(exact));
		CHECK(!next_out(s, d - 1, &o));
		CHECK(next_out(s, d, &o) && o.seq == j - 1);
		CHECK(!next_out(s, d, &o));
		prev = d;
	}
	/* and late: by t, between t / (exact + 1) and t / (exact - 1) packets */
	got = 150;
	for (uint64_t t = prev + 12345; got < 300; t += 9999) {
		got += take(s, t, &k3);
		CHECK(got >= (uint64_t)((double)t / (exact + 1)) || got == 300);
		CHECK(got <= (uint64_t)((double)t / (exact - 1)));
	}
	swm_destroy(s);

	/* No rate limit: everything leaves when it arrives, in order on each port (the order
	 * between ports is not specified). */
	cfg_base(&c, 3);
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < 6; i++) {
		build(pkt, 200, 0, host(1 + i % 2), 0, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, 200, 12345), SWM_QUEUED);
	}
	CHECK_EQ(swm_deadline(s), 12345);
	CHECK(!next_out(s, 12344, &o));
	uint32_t next[3] = {0, 0, 1};
	for (uint32_t i = 0; i < 6; i++) {
		REQUIRE(next_out(s, 12345, &o));
		REQUIRE(o.port == 1 || o.port == 2);
		CHECK_EQ(o.seq, next[o.port]);
		next[o.port] += 2;
	}
	CHECK(!next_out(s, 12345, &o));
	CHECK_EQ(swm_deadline(s), UINT64_MAX);
	swm_destroy(s);
}

/* Priorities 7 and 6 strictly first (7 before 6), FIFO within a priority, no preemption of
 * the packet on the wire. */
static void test_priority(void)
{
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1000;
	struct rec log[64];
	struct sink k = {.any_order = true, .log = log, .cap = 64};

	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	const uint64_t tx = tx_ns(len, c.rate_bps);
	REQUIRE(swm_create(&c, &s) == 0);

	/* Ten priority-3 packets at 0; at 2.5 tx two have left and the third is on the wire. A
	 * CNP (priority 6) arriving then starts when the wire is free (3 tx) and leaves at 4 tx,
	 * ahead of the 4th: the 3rd is not preempted, the rest are overtaken. */
	for (uint32_t i = 0; i < 10; i++) {
		build(pkt, len, 0, host(2), DSCP_DATA, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	uint64_t t = 2 * tx + tx / 2;
	CHECK_EQ(take(s, t, &k), 2);
	build(pkt, len, 1, host(2), DSCP_CNP, 0, 0);
	CHECK_EQ(swm_input(s, 1, pkt, len, t), SWM_QUEUED);
	CHECK_EQ(swm_deadline(s), 3 * tx);
	drain(s, t, &k);
	REQUIRE(k.n == 11);
	static const unsigned from[] = {0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
	static const uint32_t seq[] = {0, 1, 2, 0, 3, 4, 5, 6, 7, 8, 9};
	for (unsigned i = 0; i < 11; i++) {
		CHECK_EQ(log[i].from, from[i]);
		CHECK_EQ(log[i].seq, seq[i]);
		if (i >= 2)
			CHECK_EQ(log[i].t, (i + 1) * tx);
	}

	/* Priority is DSCP >> 3: DSCP 7 is priority 0, 30 is 3, 48 is 6, 56 is 7. A (priority 0)
	 * is on the wire; B (0), C (3), F (6), D (7) and E (3) wait: D, then F, then B, C and E
	 * in an order the round robin of 0..5 chooses, C before E. The port never idles. */
	const uint64_t t0 = 100 * tx;
	k.n = 0;
	build(pkt, len, 0, host(3), 0, 0, 100); /* A */
	CHECK_EQ(swm_input(s, 0, pkt, len, t0), SWM_QUEUED);
	build(pkt, len, 0, host(3), 7, 0, 101); /* B */
	CHECK_EQ(swm_input(s, 0, pkt, len, t0 + 1), SWM_QUEUED);
	build(pkt, len, 1, host(3), DSCP_DATA, 0, 1); /* C */
	CHECK_EQ(swm_input(s, 1, pkt, len, t0 + 1), SWM_QUEUED);
	build(pkt, len, 1, host(3), DSCP_CNP, 0, 2); /* F */
	CHECK_EQ(swm_input(s, 1, pkt, len, t0 + 1), SWM_QUEUED);
	build(pkt, len, 0, host(3), 56, 0, 102); /* D */
	CHECK_EQ(swm_input(s, 0, pkt, len, t0 + 1), SWM_QUEUED);
	build(pkt, len, 1, host(3), 30, 0, 3); /* E */
	CHECK_EQ(swm_input(s, 1, pkt, len, t0 + 1), SWM_QUEUED);
	drain(s, t0 + 1, &k);
	REQUIRE(k.n == 6);
	CHECK_EQ(log[0].seq, 100);
	CHECK(log[1].from == 0 && log[1].seq == 102);
	CHECK(log[2].from == 1 && log[2].seq == 2);
	int at_b = -1, at_c = -1, at_e = -1;
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(log[i].t, t0 + (uint64_t)(i + 1) * tx);
		CHECK_EQ(log[i].port, 3);
		if (log[i].from == 0 && log[i].seq == 101)
			at_b = i;
		if (log[i].from == 1 && log[i].seq == 1)
			at_c = i;
		if (log[i].from == 1 && log[i].seq == 3)
			at_e = i;
	}
	CHECK(at_b >= 3 && at_c >= 3 && at_e > at_c);
	swm_destroy(s);
}

/* Priorities 0..5 share the port equally by bytes (deficit round robin, 9 KiB quantum): three
 * classes with 150 KB each queued at once, in packets of 1500, 500 and 1000 bytes. While all
 * three are backlogged, the bytes each has sent differ by at most a quantum and a packet
 * (each round gives each class a quantum, give or take a packet's worth of deficit; within a
 * round, one class may be a quantum ahead); twice that is asserted. Packet counts are far
 * from equal: the share is not per packet. Then a priority-0 stream is not starved by a
 * priority-3 backlog either. */
static void test_ets(void)
{
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const uint32_t quantum = 9 * 1024, total = 150000;
	static const uint8_t dscp[3] = {0, DSCP_DATA, 40}; /* priorities 0, 3, 5 */
	static const size_t size[3] = {1500, 500, 1000};
	uint64_t left[3], sent[3] = {0, 0, 0};

	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	REQUIRE(swm_create(&c, &s) == 0);
	for (unsigned j = 0; j < 3; j++) {
		left[j] = total;
		for (uint32_t i = 0; i < total / size[j]; i++) {
			build(pkt, size[j], j, host(3), dscp[j], 0, i);
			CHECK_EQ(swm_input(s, j, pkt, size[j], 0), SWM_QUEUED);
		}
	}
	struct out o;
	uint64_t now = 0, worst = 0, n = 0;
	uint32_t next[3] = {0, 0, 0};
	for (;;) {
		uint64_t d = swm_deadline(s);
		if (d == UINT64_MAX)
			break;
		CHECK(d > now);
		if (d <= now)
			break;
		now = d;
		while (next_out(s, now, &o)) {
			n++;
			if (o.from >= 3) {
				CHECK(!"foreign packet");
				continue;
			}
			CHECK_EQ(o.seq, next[o.from]++);
			CHECK_EQ(o.len, size[o.from]);
			sent[o.from] += o.len;
			left[o.from] -= o.len;
			if (left[0] && left[1] && left[2]) {
				uint64_t hi = sent[0], lo = sent[0];
				for (unsigned j = 1; j < 3; j++) {
					hi = sent[j] > hi ? sent[j] : hi;
					lo = sent[j] < lo ? sent[j] : lo;
				}
				worst = hi - lo > worst ? hi - lo : worst;
			}
		}
	}
	CHECK(worst <= 2 * (quantum + PKT));
	if (worst > 2 * (quantum + PKT))
		fprintf(stderr, "  ETS: %" PRIu64 " bytes apart\n", worst);
	CHECK_EQ(n, total / 1500 + total / 500 + total / 1000);
	swm_destroy(s);

	/* A priority-3 backlog of 300 packets, and a priority-0 packet every 4 tx: each leaves
	 * within a round (two quanta) of arriving, long before the backlog is gone. */
	const size_t len = 1000;
	const uint64_t tx = tx_ns(len, c.rate_bps);
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < 300; i++) {
		build(pkt, len, 0, host(3), DSCP_DATA, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	uint64_t arrived[20];
	unsigned in = 0, got = 0;
	for (now = 0; in < 20 || got < 20; now += tx / 4) {
		while (next_out(s, now, &o))
			if (o.from == 1 && o.seq < 20) {
				CHECK_EQ(o.seq, got);
				got++;
				CHECK(now - arrived[o.seq] <=
				      2 * (quantum + len) * 8 * GBPS / c.rate_bps);
			}
		if (in < 20 && now % (4 * tx) == 0) {
			build(pkt, len, 1, host(3), 0, 0, in);
			CHECK_EQ(swm_input(s, 1, pkt, len, now), SWM_QUEUED);
			arrived[in++] = now;
		}
		if (now > 300 * tx)
			break;
	}
	CHECK_EQ(got, 20);
	CHECK(stats(s, 3, now).queue_bytes > 0); /* the backlog is still there */
	struct sink k = {.any_order = true};
	drain(s, now, &k);
	swm_destroy(s);
}

/* Drop-tail against a FIFO computed here: packet j leaves at max(arrival, previous departure)
 * + tx, and a packet is dropped exactly when the bytes still queued at its arrival (the one on
 * the wire included: it counts until it has left) plus its own exceed the buffer. The caller
 * takes what is due before each input, as the header asks; the queue reported must be the
 * computed one. */
static void test_droptail(void)
{
	enum { N = 400 };
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1500;
	static uint64_t dep[N]; /* by sequence number; 0: dropped */
	static struct rec log[N];
	struct sink k = {.log = log, .cap = N};
	uint64_t queued = 0, drops = 0, qmax = 0, prev_t = 0, t = 0;

	cfg_base(&c, 3);
	c.rate_bps = 1 * GBPS;
	c.buffer = 100000; /* 66 packets of 1500 */
	const uint64_t tx = tx_ns(len, c.rate_bps);
	REQUIRE(swm_create(&c, &s) == 0);
	uint64_t last_dep = 0;
	/* Two arrivals per tx, never at a departure time (odd multiples of tx / 4). */
	for (uint32_t i = 0; i < N; i++) {
		t = i ? i * (tx / 2) + tx / 4 : 0;
		uint64_t q = 0;
		for (uint32_t j = 0; j < i; j++)
			if (dep[j] > t)
				q += len;
		int want = q + len > c.buffer ? SWM_DROP_TAIL : SWM_QUEUED;
		/* What comes out now left since the last arrival. */
		size_t first = k.n;
		take(s, t, &k);
		for (size_t j = first; j < k.n && j < N; j++) {
			uint32_t sq = log[j].seq;
			CHECK(sq < N && dep[sq] > prev_t && dep[sq] <= t);
		}
		CHECK_EQ(stats(s, 1, t).queue_bytes, q);
		build(pkt, len, 0, host(1), 0, 0, i);
		int v = swm_input(s, 0, pkt, len, t);
		CHECK_EQ(v, want);
		if (want == SWM_QUEUED) {
			last_dep = (t > last_dep ? t : last_dep) + tx;
			dep[i] = last_dep;
			queued++;
			q += len;
		} else {
			drops++;
		}
		if (q > qmax)
			qmax = q;
		CHECK_EQ(stats(s, 1, t).queue_bytes, q);
		CHECK(stats(s, 1, t).queue_bytes <= c.buffer);
		prev_t = t;
	}
	CHECK(drops > 0); /* arrivals at twice the rate overflow the buffer */
	CHECK(qmax <= c.buffer && qmax + len > c.buffer);
	struct swm_port_stats st = stats(s, 1, t);
	CHECK_EQ(st.queue_max, qmax);
	CHECK_EQ(stats(s, 0, t).drop_tail, drops);
	size_t before = k.n;
	drain(s, t, &k);
	/* What left by t came out at t; the rest at its computed departure time. */
	for (size_t j = before; j < k.n && j < N; j++) {
		uint32_t sq = log[j].seq;
		REQUIRE(sq < N);
		CHECK_EQ(log[j].t, dep[sq] > t ? dep[sq] : t);
	}
	CHECK_EQ(k.from[0], queued);
	CHECK_EQ(k.to[1], queued);
	st = stats(s, 1, last_dep);
	CHECK_EQ(st.tx_pkts, queued);
	CHECK_EQ(st.tx_bytes, queued * len);
	CHECK_EQ(st.queue_bytes, 0);
	CHECK_EQ(st.queue_max, qmax);
	swm_destroy(s);

	/* A packet that fills the buffer exactly is not beyond it: 44 of 1500 fit in 66000, the
	 * 45th does not. The buffer is per (port, priority): with priority 0 full, a CNP still
	 * gets in; port queue_bytes counts both. */
	cfg_base(&c, 3);
	c.rate_bps = 1 * GBPS;
	c.buffer = 44 * len;
	REQUIRE(swm_create(&c, &s) == 0);
	const uint32_t fit = c.buffer / len;
	for (uint32_t i = 0; i < fit; i++) {
		build(pkt, len, 0, host(1), 0, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	build(pkt, len, 0, host(1), 0, 0, fit);
	CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_DROP_TAIL);
	build(pkt, len, 2, host(1), DSCP_CNP, 0, 0);
	CHECK_EQ(swm_input(s, 2, pkt, len, 0), SWM_QUEUED);
	CHECK_EQ(stats(s, 1, 0).queue_bytes, (fit + 1) * len);
	struct sink k2 = {.any_order = true};
	drain(s, 0, &k2);
	CHECK_EQ(k2.to[1], fit + 1);
	swm_destroy(s);
}

/* The RED probability of a packet that finds q bytes. */
static double red(const struct swm_cfg *c, double q)
{
	if (q <= c->kmin)
		return 0;
	if (q >= c->kmax)
		return 1;
	return c->pmax * (q - c->kmin) / (c->kmax - c->kmin);
}

#define ECN_LEN 1000

/* Probes through port 2 at a constant queue: n + 1 packets that cannot be marked (not ECT)
 * at 0, then each time one leaves (every tx) a probe from port 1 with ECN bits `ecn`, which
 * finds the n left: q = n * ECN_LEN bytes. Returns how many probes came out with CE. The
 * probes are otherwise unchanged (DSCP included) and carry a valid checksum; the marked and
 * ect counters agree. */
static uint64_t ecn_run(const struct swm_cfg *c, unsigned n, uint8_t ecn, unsigned probes,
			uint8_t *pattern)
{
	struct swm *s;
	struct out o;
	uint8_t pkt[PKT], want[PKT];
	const size_t len = ECN_LEN;
	const uint64_t tx = tx_ns(len, c->rate_bps);
	uint64_t marked = 0;
	uint32_t fills = 0, seen = 0;

	REQUIRE(swm_create(c, &s) == 0);
	for (uint32_t i = 0; i <= n; i++) {
		build(pkt, len, 0, host(2), DSCP_DATA, ECN_NOT, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	for (uint32_t step = 1; step <= probes + n + 1; step++) {
		uint64_t t = step * tx;
		unsigned got = 0;
		while (next_out(s, t, &o)) {
			got++;
			CHECK_EQ(o.port, 2);
			if (o.len != len || o.from > 1) {
				CHECK(!"foreign packet");
				continue;
			}
			if (o.from == 0) {
				CHECK_EQ(o.seq, fills);
				build(want, len, 0, host(2), DSCP_DATA, ECN_NOT, fills++);
				CHECK_MEM(o.pkt, want, len);
				continue;
			}
			CHECK_EQ(o.seq, seen);
			build(want, len, 1, host(2), DSCP_DATA, ecn, seen++);
			CHECK_EQ(o.dscp, DSCP_DATA);
			CHECK_MEM(o.pkt, want, 1); /* all but TOS and checksum */
			CHECK_MEM(o.pkt + 2, want + 2, 8);
			CHECK_MEM(o.pkt + 12, want + 12, len - 12);
			if (pattern)
				pattern[seen - 1] = o.ecn == ECN_CE;
			if (o.ecn == ECN_CE)
				marked++;
			else
				CHECK_MEM(o.pkt, want, len);
			if (ecn == ECN_NOT)
				CHECK_EQ(o.ecn, ECN_NOT);
			else
				CHECK(o.ecn == ecn || o.ecn == ECN_CE);
		}
		CHECK_EQ(got, 1);
		if (step <= probes) {
			build(pkt, len, 1, host(2), DSCP_DATA, ecn, step - 1);
			CHECK_EQ(swm_input(s, 1, pkt, len, t), SWM_QUEUED);
		}
	}
	CHECK_EQ(fills, n + 1);
	CHECK_EQ(seen, probes);
	CHECK_EQ(swm_deadline(s), UINT64_MAX);
	struct swm_port_stats st = stats(s, 2, (probes + n + 1) * tx);
	if (!c->ecn) {
		CHECK_EQ(st.marked, 0);
	} else if (ecn == ECN_ECT0 || ecn == ECN_ECT1) {
		CHECK_EQ(st.ect, probes);
		CHECK_EQ(st.marked, marked);
	} else if (ecn == ECN_NOT) {
		CHECK_EQ(st.ect, 0);
		CHECK_EQ(st.marked, 0);
	}
	swm_destroy(s);
	return marked;
}

static void test_ecn(void)
{
	struct swm_cfg c;
	const unsigned many = 20000, few = 2000;
	cfg_base(&c, 3);
	c.rate_bps = 1 * GBPS;
	c.ecn = true;
	c.kmin = 10000;
	c.kmax = 50000;
	c.pmax = 0.2;
	const unsigned lo = c.kmin / ECN_LEN, hi = c.kmax / ECN_LEN, mid = (lo + hi) / 2;

	/* ECT(0) at queues below, at and just above kmin, in the middle, just below, at and above
	 * kmax: probabilities 0, 0, pmax / 40, pmax / 2, pmax * 39 / 40, 1, 1. */
	const unsigned levels[] = {lo - 3, lo, lo + 1, mid, hi - 1, hi, hi + 10};
	for (unsigned i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		double p = red(&c, (double)levels[i] * ECN_LEN);
		unsigned probes = p > 0 && p < 1 ? many : few;
		uint64_t m = ecn_run(&c, levels[i], ECN_ECT0, probes, NULL);
		check_binomial(m, probes, p);
	}
	/* ECT(1) is marked alike. */
	check_binomial(ecn_run(&c, mid, ECN_ECT1, many, NULL), many, red(&c, mid * ECN_LEN));
	CHECK_EQ(ecn_run(&c, hi, ECN_ECT1, few, NULL), few);
	/* CE stays CE, whatever the queue. */
	CHECK_EQ(ecn_run(&c, 0, ECN_CE, few, NULL), few);
	CHECK_EQ(ecn_run(&c, hi + 10, ECN_CE, few, NULL), few);
	/* Not ECN-capable: never marked, even above kmax. */
	CHECK_EQ(ecn_run(&c, hi + 10, ECN_NOT, few, NULL), 0);
	/* pmax is what scales the ramp. */
	struct swm_cfg d = c;
	d.pmax = 1;
	check_binomial(ecn_run(&d, mid, ECN_ECT0, many, NULL), many, red(&d, mid * ECN_LEN));
	/* The draws follow the seed: the same seed marks the same probes, another others. */
	uint8_t *p1 = malloc(few), *p2 = malloc(few), *p3 = malloc(few);
	REQUIRE(p1 && p2 && p3);
	ecn_run(&c, mid, ECN_ECT0, few, p1);
	ecn_run(&c, mid, ECN_ECT0, few, p2);
	d = c;
	d.seed = c.seed + 1;
	ecn_run(&d, mid, ECN_ECT0, few, p3);
	CHECK(memcmp(p1, p2, few) == 0);
	CHECK(memcmp(p1, p3, few) != 0);
	free(p1);
	free(p2);
	free(p3);
	/* ECN off: nothing is marked. */
	d = c;
	d.ecn = false;
	CHECK_EQ(ecn_run(&d, hi + 10, ECN_ECT0, few, NULL), 0);
}

/* The PFC invariants of ingress i at now: the count in the switch stays under xoff + one
 * packet (two with a host link: the one on the link when the pause comes still arrives), a
 * paused ingress has more than xon in (it resumes at xon or below), a running one less than
 * xoff (it pauses on reaching it), and a host keeps at most hold_max. */
static void pfc_invariants(const struct swm *s, const struct swm_cfg *c, unsigned i, size_t len,
			   uint64_t now)
{
	struct swm_port_stats st = stats(s, i, now);
	if (!c->pfc) {
		CHECK(!st.paused);
		CHECK_EQ(st.held, 0);
		CHECK_EQ(st.pauses, 0);
		CHECK_EQ(st.pause_ns, 0);
		return;
	}
	CHECK(st.pfc_bytes <= c->xoff + (c->host_rate_bps ? 2 : 1) * len);
	CHECK(st.held <= c->hold_max);
	if (st.paused)
		CHECK(st.pfc_bytes > c->xon);
	else
		CHECK(st.pfc_bytes < c->xoff);
}

struct incast {
	uint64_t sent[2];
	uint64_t verdict[2][SWM_DROP_NOROUTE + 1];
	uint64_t pause_ns[2], pauses[2]; /* at the end of the sending */
	struct swm_port_stats end[2];	 /* the senders' ingress ports once drained */
	struct swm_port_stats egress;	 /* port 2 once drained */
	uint64_t out[2];		 /* packets out by sender */
};

/* Two senders (ports 0 and 1) send len-byte priority-3 packets to port 2, each at the port
 * rate (one per tx; sender 1 half a slot after sender 0) for `slots` slots, then stop and the
 * switch drains. With obey, a sender skips the slots in which its ingress is paused (a host
 * that obeys PFC and always has data); without, it offers every slot and the model keeps in
 * the host's transmit queue what the host cannot send yet. Each packet leaves once and in its
 * sender's order. */
static void incast(const struct swm_cfg *c, size_t len, unsigned slots, bool obey, struct incast *r)
{
	struct swm *s;
	struct sink k = {.host_link = c->host_rate_bps != 0};
	uint8_t pkt[PKT];
	const uint64_t tx = tx_ns(len, c->rate_bps);
	uint64_t pause_prev[2] = {0, 0};

	memset(r, 0, sizeof *r);
	REQUIRE(swm_create(c, &s) == 0);
	for (unsigned slot = 0; slot < slots; slot++) {
		for (unsigned i = 0; i < 2; i++) {
			uint64_t t = slot * tx + i * (tx / 2);
			take(s, t, &k);
			pfc_invariants(s, c, 0, len, t);
			pfc_invariants(s, c, 1, len, t);
			struct swm_port_stats st = stats(s, i, t);
			CHECK(st.pause_ns >= pause_prev[i]);
			pause_prev[i] = st.pause_ns;
			if (obey && st.paused)
				continue;
			build(pkt, len, i, host(2), DSCP_DATA, ECN_NOT, (uint32_t)r->sent[i]++);
			int v = swm_input(s, i, pkt, len, t);
			REQUIRE(v >= 0 && v <= SWM_DROP_NOROUTE);
			r->verdict[i][v]++;
			/* Held exactly when its host would wait: a link to cross, a pause, or
			 * older packets waiting. */
			if (c->host_rate_bps)
				CHECK_EQ(v, SWM_HELD);
			else if (c->pfc)
				CHECK_EQ(v, st.paused || st.held ? SWM_HELD : SWM_QUEUED);
			else
				CHECK(v == SWM_QUEUED || v == SWM_DROP_TAIL);
			pfc_invariants(s, c, i, len, t); /* sampled after every input */
		}
	}
	const uint64_t end = slots * tx;
	take(s, end, &k);
	for (unsigned i = 0; i < 2; i++) {
		struct swm_port_stats st = stats(s, i, end);
		r->pause_ns[i] = st.pause_ns;
		r->pauses[i] = st.pauses;
	}
	uint64_t last = drain(s, end, &k);
	for (unsigned i = 0; i < 2; i++) {
		r->end[i] = stats(s, i, last);
		r->out[i] = k.from[i];
	}
	r->egress = stats(s, 2, last);
	CHECK_EQ(k.to[2], k.n);
	swm_destroy(s);
}

/* PFC under a 2:1 incast. Port 2 drains at R and the two senders offer R each, so together
 * they get R through: each sends about half the time, i.e. is paused about half the time.
 * Exactly: over D = slots * tx the port is never idle after the first packet, so about D / tx
 * packets left, plus at most xoff + L per sender still inside at D; a sender sends one packet
 * per slot while running, give or take one slot per running interval (at most pauses + 1 of
 * them). So the two running times add up to D, within (2 (xoff + L) / L + pauses + 2) tx, and
 * the two pause times too: paused_0 + paused_1 = 2 D - running = D within that. */
static void test_pfc(void)
{
	struct swm_cfg c;
	struct incast r;
	const size_t len = 1000;
	const unsigned slots = 2500;
	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	c.pfc = true;
	c.pfc_prio = 3;
	c.xoff = 30000;
	c.xon = 20000; /* buffer 1 MiB: far above 4 * (xoff + 2 MTU), lossless */
	const uint64_t tx = tx_ns(len, c.rate_bps);
	const double dur = (double)slots * (double)tx;

	/* Hosts that obey the pause. */
	incast(&c, len, slots, true, &r);
	double slack = (double)(2 * (c.xoff + len) / len + r.pauses[0] + r.pauses[1] + 2) * tx;
	for (unsigned i = 0; i < 2; i++) {
		CHECK_EQ(r.verdict[i][SWM_QUEUED], r.sent[i]);
		CHECK_EQ(r.out[i], r.sent[i]);
		CHECK_EQ(r.end[i].drop_tail, 0);
		CHECK_EQ(r.end[i].drop_hold, 0);
		CHECK(r.pauses[i] > 0);
		CHECK(!r.end[i].paused);
		CHECK_EQ(r.end[i].pfc_bytes, 0);
		CHECK_EQ(r.end[i].held, 0);
		CHECK(r.pause_ns[i] >= 0.3 * dur && r.pause_ns[i] <= 0.7 * dur);
	}
	double paused = (double)(r.pause_ns[0] + r.pause_ns[1]);
	CHECK(fabs(paused - dur) <= slack);
	if (fabs(paused - dur) > slack)
		fprintf(stderr, "  paused %.0f + %.0f ns in %.0f (slack %.0f)\n",
			(double)r.pause_ns[0], (double)r.pause_ns[1], dur, slack);
	CHECK_EQ(r.egress.tx_pkts, r.sent[0] + r.sent[1]);

	/* Hosts that keep offering, with no link to cross: the model holds their packets while
	 * paused, in order, and nothing is lost. On resume the held packets enter at once (an
	 * infinitely fast host) and soon pause it again, so the balance above no longer holds;
	 * but a sender still admits at least one packet per slot while running, so the running
	 * times add up to at most D + slack: paused_0 + paused_1 >= D - slack. */
	incast(&c, len, slots, false, &r);
	slack = (double)(2 * (c.xoff + len) / len + r.pauses[0] + r.pauses[1] + 2) * tx;
	for (unsigned i = 0; i < 2; i++) {
		CHECK(r.verdict[i][SWM_HELD] > 0);
		CHECK_EQ(r.verdict[i][SWM_QUEUED] + r.verdict[i][SWM_HELD], r.sent[i]);
		CHECK_EQ(r.out[i], r.sent[i]);
		CHECK_EQ(r.end[i].drop_tail, 0);
		CHECK_EQ(r.end[i].drop_hold, 0);
		CHECK(r.pauses[i] > 0);
		CHECK(r.pause_ns[i] <= dur);
		CHECK(!r.end[i].paused);
		CHECK_EQ(r.end[i].pfc_bytes, 0);
		CHECK_EQ(r.end[i].held, 0);
	}
	CHECK((double)(r.pause_ns[0] + r.pause_ns[1]) >= dur - slack);

	/* Hosts that keep offering behind a link at the port rate: the model spreads what they
	 * send at R while running, so the obeying hosts' balance holds again: each about half
	 * the time paused, the sum D within the slack, counting a packet more per pause (the one
	 * on the link when it comes) and a slot more for the link's delay. */
	c.host_rate_bps = c.rate_bps;
	incast(&c, len, slots, false, &r);
	slack = (double)(2 * (c.xoff + 2 * len) / len + 2 * (r.pauses[0] + r.pauses[1]) + 4) * tx;
	for (unsigned i = 0; i < 2; i++) {
		CHECK_EQ(r.verdict[i][SWM_HELD], r.sent[i]);
		CHECK_EQ(r.out[i], r.sent[i]);
		CHECK_EQ(r.end[i].drop_tail, 0);
		CHECK_EQ(r.end[i].drop_hold, 0);
		CHECK(r.pauses[i] > 0);
		CHECK(r.pause_ns[i] >= 0.3 * dur && r.pause_ns[i] <= 0.7 * dur);
		CHECK(!r.end[i].paused);
		CHECK_EQ(r.end[i].pfc_bytes, 0);
		CHECK_EQ(r.end[i].held, 0);
	}
	paused = (double)(r.pause_ns[0] + r.pause_ns[1]);
	CHECK(fabs(paused - dur) <= slack);
	if (fabs(paused - dur) > slack)
		fprintf(stderr, "  paused %.0f + %.0f ns in %.0f (slack %.0f)\n",
			(double)r.pause_ns[0], (double)r.pause_ns[1], dur, slack);
}

/* The hosts' links: a burst given to the model at once crosses the link one packet per
 * L * 8 / host_rate, and each packet leaves the switch when both it has arrived and the port
 * is free: d_k = max((k + 1) tx_host, d_(k-1)) + tx. */
static void host_link_run(uint64_t host_rate)
{
	enum { N = 12 };
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1000;
	struct rec log[N];
	struct sink k = {.host_link = true, .log = log, .cap = N};

	cfg_base(&c, 3);
	c.rate_bps = 1 * GBPS;
	c.host_rate_bps = host_rate;
	const uint64_t tx = tx_ns(len, c.rate_bps), txh = tx_ns(len, host_rate);
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < N; i++) {
		build(pkt, len, 0, host(1), 0, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_HELD);
	}
	uint32_t held = stats(s, 0, 0).held; /* the one on the link may count or not */
	CHECK(held == N || held == N - 1);
	CHECK_EQ(stats(s, 1, 0).queue_bytes, 0);
	CHECK(swm_deadline(s) <= txh + tx); /* never later than the first departure */
	drain(s, 0, &k);
	REQUIRE(k.n == N);
	uint64_t d = 0, dep[N];
	for (uint32_t i = 0; i < N; i++) {
		uint64_t arrive = (i + 1) * txh;
		d = (arrive > d ? arrive : d) + tx;
		dep[i] = d;
		CHECK_EQ(log[i].seq, i);
		CHECK_EQ(log[i].t, d);
	}
	struct swm_port_stats st = stats(s, 0, d);
	CHECK_EQ(st.held, 0);
	CHECK_EQ(st.rx_pkts, N);
	CHECK_EQ(stats(s, 1, d).tx_pkts, N);
	swm_destroy(s);

	/* The same burst, asked at irregular late times: by t, exactly the packets with d_k <= t
	 * have left (the crossings too happened at their own times). */
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < N; i++) {
		build(pkt, len, 0, host(1), 0, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_HELD);
	}
	struct sink k2 = {.host_link = true};
	uint64_t got = 0;
	for (uint64_t t = tx / 3; got < N && t <= dep[N - 1] + tx; t += 2 * tx + tx / 3) {
		got += take(s, t, &k2);
		uint64_t due = 0;
		while (due < N && dep[due] <= t)
			due++;
		CHECK_EQ(got, due);
	}
	drain(s, dep[N - 1] + tx, &k2);
	CHECK_EQ(k2.from[0], N);
	swm_destroy(s);
}

static void test_host_link(void)
{
	host_link_run(2 * GBPS); /* faster than the port: the queue builds at the switch */
	host_link_run(GBPS / 2); /* slower: each packet leaves tx after it arrives */

	/* hold_max bounds the host's queue: of hold_max + 2 packets given at once, the last is
	 * dropped (whether the one on the link counts is left open), and the others leave. */
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1000;
	cfg_base(&c, 3);
	c.rate_bps = 1 * GBPS;
	c.host_rate_bps = 1 * GBPS;
	c.hold_max = 4;
	REQUIRE(swm_create(&c, &s) == 0);
	uint64_t held = 0;
	for (uint32_t i = 0; i < c.hold_max + 2; i++) {
		build(pkt, len, 0, host(1), 0, 0, i);
		int v = swm_input(s, 0, pkt, len, 0);
		if (i < c.hold_max)
			CHECK_EQ(v, SWM_HELD);
		else if (i == c.hold_max)
			CHECK(v == SWM_HELD || v == SWM_DROP_HOLD);
		else
			CHECK_EQ(v, SWM_DROP_HOLD);
		held += v == SWM_HELD;
	}
	CHECK_EQ(stats(s, 0, 0).drop_hold, c.hold_max + 2 - held);
	struct sink k = {.host_link = true};
	drain(s, 0, &k);
	CHECK_EQ(k.from[0], held);
	swm_destroy(s);
}

/* PFC behind a host link is per priority too: with port 0's priority 3 paused, its priority-0
 * packet crosses the link and leaves while its priority-3 packet waits for the resume. The
 * link (10 Gbit/s) delivers xoff / L packets before port 2 (1 Gbit/s) sends its first, so
 * the pause comes at n * txh; port 2 sends one per tx from txh + tx, the count is at xon
 * after (xoff - xon) / L of them, and the waiting packet then crosses and queues behind the
 * rest. */
static void test_pfc_link(void)
{
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1000;
	struct rec log[32];
	struct sink k = {.any_order = true, .host_link = true, .log = log, .cap = 32};

	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	c.host_rate_bps = 10 * GBPS;
	c.pfc = true;
	c.xoff = 10000;
	c.xon = 5000;
	const uint64_t tx = tx_ns(len, c.rate_bps), txh = tx_ns(len, c.host_rate_bps);
	const uint32_t n = c.xoff / len;
	REQUIRE(n * txh < txh + tx);
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < n; i++) {
		build(pkt, len, 0, host(2), DSCP_DATA, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_HELD);
	}
	const uint64_t pause = n * txh;
	run(s, 0, pause - 1, &k);
	CHECK(!stats(s, 0, pause - 1).paused);
	run(s, pause - 1, pause, &k);
	struct swm_port_stats st = stats(s, 0, pause);
	CHECK(st.paused);
	CHECK_EQ(st.pfc_bytes, c.xoff);
	CHECK_EQ(k.n, 0);
	build(pkt, len, 0, host(2), DSCP_DATA, 0, n);
	CHECK_EQ(swm_input(s, 0, pkt, len, pause), SWM_HELD);
	build(pkt, len, 0, host(3), 0, 0, 100);
	CHECK_EQ(swm_input(s, 0, pkt, len, pause), SWM_HELD);
	uint64_t last = drain(s, pause, &k);
	const uint64_t resume = txh + (c.xoff - c.xon) / len * tx;
	uint64_t at3 = 0, atn = 0;
	for (size_t j = 0; j < k.n && j < 32; j++) {
		if (log[j].port == 3)
			at3 = log[j].t;
		else if (log[j].seq == n)
			atn = log[j].t;
	}
	CHECK_EQ(k.n, n + 2);
	CHECK_EQ(at3, pause + txh + tx);
	CHECK_EQ(atn, txh + (n + 1) * tx);
	st = stats(s, 0, last);
	CHECK_EQ(st.pauses, 1);
	CHECK_EQ(st.pause_ns, resume - pause);
	CHECK(!st.paused);
	swm_destroy(s);
}

/* PFC is per priority, holds in order, and a paused host keeps at most hold_max packets. */
static void test_pfc_hold(void)
{
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1000;
	struct rec log[32];
	struct sink k = {.any_order = true, .log = log, .cap = 32};

	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	c.pfc = true;
	c.xoff = 10000;
	c.xon = 5000;
	c.hold_max = 4;
	const uint64_t tx = tx_ns(len, c.rate_bps);
	const uint32_t fill = c.xoff / len; /* the packet that reaches xoff pauses */
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < fill; i++) {
		CHECK(!stats(s, 0, 0).paused);
		build(pkt, len, 0, host(2), DSCP_DATA, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	struct swm_port_stats st = stats(s, 0, 0);
	CHECK(st.paused);
	CHECK_EQ(st.pauses, 1);
	CHECK_EQ(st.pfc_bytes, fill * len);
	for (uint32_t i = 0; i < c.hold_max; i++) {
		build(pkt, len, 0, host(2), DSCP_DATA, 0, fill + i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_HELD);
		CHECK_EQ(stats(s, 0, 0).held, i + 1);
	}
	build(pkt, len, 0, host(2), DSCP_DATA, 0, 999);
	CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_DROP_HOLD);
	st = stats(s, 0, 0);
	CHECK_EQ(st.held, c.hold_max);
	CHECK_EQ(st.drop_hold, 1);
	CHECK_EQ(st.pfc_bytes, fill * len); /* held packets are not in the switch yet */
	/* Other priorities from the paused port pass; so does priority 3 from another port. */
	build(pkt, len, 0, host(3), 0, 0, 500);
	CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	build(pkt, len, 0, host(3), DSCP_CNP, 0, 501);
	CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	build(pkt, len, 1, host(3), DSCP_DATA, 0, 0);
	CHECK_EQ(swm_input(s, 1, pkt, len, 0), SWM_QUEUED);
	CHECK(!stats(s, 1, 0).paused);
	CHECK_EQ(stats(s, 0, 0).pfc_bytes, fill * len);

	/* Port 2 drains one per tx: the count is at xon after (xoff - xon) / L departures; then
	 * the held packets enter (4000 bytes: 9000 < xoff, no new pause). */
	const uint64_t resume = (c.xoff - c.xon) / len * tx;
	run(s, 0, resume - 1, &k);
	st = stats(s, 0, resume - 1);
	CHECK(st.paused);
	CHECK_EQ(st.held, c.hold_max);
	CHECK_EQ(st.pause_ns, resume - 1);
	run(s, resume - 1, resume, &k);
	st = stats(s, 0, resume);
	CHECK(!st.paused);
	CHECK_EQ(st.held, 0);
	CHECK_EQ(st.pfc_bytes, c.xon + c.hold_max * len);
	CHECK_EQ(st.pause_ns, resume);
	uint64_t last = drain(s, resume, &k);
	/* Port 2: 0..fill-1 then the held ones, one per tx, the dropped one never. */
	uint32_t want = 0;
	unsigned others = 0;
	for (size_t j = 0; j < k.n && j < 32; j++) {
		if (log[j].port != 2) {
			others++;
			continue;
		}
		CHECK_EQ(log[j].from, 0);
		CHECK_EQ(log[j].seq, want);
		want++;
		CHECK_EQ(log[j].t, want * tx);
	}
	CHECK_EQ(want, fill + c.hold_max);
	CHECK_EQ(others, 3);
	st = stats(s, 0, last);
	CHECK(!st.paused);
	CHECK_EQ(st.pfc_bytes, 0);
	CHECK_EQ(st.pauses, 1);
	CHECK_EQ(st.pause_ns, resume);
	swm_destroy(s);
}

/* Head-of-line blocking: port 0 is paused by its traffic to port 2; its packet to idle port 3
 * waits for the resume, (xoff - xon) / L departures of port 2, and leaves one tx later. Without
 * PFC it leaves one tx after it arrives. */
static uint64_t victim_run(bool pfc)
{
	struct swm_cfg c;
	struct swm *s;
	uint8_t pkt[PKT];
	const size_t len = 1000;
	struct rec log[32];
	struct sink k = {.any_order = true, .log = log, .cap = 32};

	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	c.pfc = pfc;
	c.xoff = 10000;
	c.xon = 5000;
	const uint64_t tx = tx_ns(len, c.rate_bps);
	REQUIRE(swm_create(&c, &s) == 0);
	for (uint32_t i = 0; i < c.xoff / len; i++) {
		build(pkt, len, 0, host(2), DSCP_DATA, 0, i);
		CHECK_EQ(swm_input(s, 0, pkt, len, 0), SWM_QUEUED);
	}
	CHECK_EQ(stats(s, 0, 0).paused, pfc);
	build(pkt, len, 0, host(3), DSCP_DATA, 0, 100);
	CHECK_EQ(swm_input(s, 0, pkt, len, tx / 2), pfc ? SWM_HELD : SWM_QUEUED);
	drain(s, tx / 2, &k);
	uint64_t at = UINT64_MAX;
	for (size_t j = 0; j < k.n && j < 32; j++)
		if (log[j].port == 3) {
			CHECK_EQ(log[j].seq, 100);
			CHECK_EQ(at, UINT64_MAX);
			at = log[j].t;
		}
	CHECK_EQ(k.n, c.xoff / len + 1);
	if (pfc)
		CHECK_EQ(at, (c.xoff - c.xon) / len * tx + tx);
	else
		CHECK_EQ(at, tx / 2 + tx);
	swm_destroy(s);
	return at;
}

static void test_pfc_victim(void)
{
	uint64_t with = victim_run(true), without = victim_run(false);
	CHECK(with > without);
}

/* Without PFC the same incast overflows a small buffer: drops, no pause, nothing held. */
static void test_pfc_off(void)
{
	struct swm_cfg c;
	struct incast r;
	const size_t len = 1000;
	cfg_base(&c, 4);
	c.rate_bps = 1 * GBPS;
	c.buffer = 65536;
	incast(&c, len, 625, false, &r);
	uint64_t dropped = 0;
	for (unsigned i = 0; i < 2; i++) {
		CHECK_EQ(r.verdict[i][SWM_HELD], 0);
		CHECK_EQ(r.end[i].drop_tail, r.verdict[i][SWM_DROP_TAIL]);
		CHECK_EQ(r.out[i], r.verdict[i][SWM_QUEUED]);
		CHECK_EQ(r.pauses[i], 0);
		CHECK_EQ(r.pause_ns[i], 0);
		dropped += r.end[i].drop_tail;
	}
	CHECK(dropped > 0);
	CHECK(r.egress.queue_max <= c.buffer);
	CHECK_EQ(r.egress.tx_pkts, r.out[0] + r.out[1]);
}

/* Feeds n packets from port 0 to port 1 (no rate limit: each leaves at once) and records each
 * verdict (1: lost). Returns the number lost. */
static uint64_t loss_run(struct swm *s, uint64_t *now, uint32_t n, uint8_t *lost)
{
	uint8_t pkt[PKT];
	struct out o;
	uint64_t drops = 0;
	for (uint32_t i = 0; i < n; i++) {
		build(pkt, TAG, 0, host(1), 0, 0, i);
		int v = swm_input(s, 0, pkt, TAG, ++*now);
		CHECK(v == SWM_QUEUED || v == SWM_DROP_LOSS);
		if (lost)
			lost[i] = v == SWM_DROP_LOSS;
		drops += v == SWM_DROP_LOSS;
		unsigned got = 0;
		while (next_out(s, *now, &o))
			got++;
		CHECK_EQ(got, v == SWM_QUEUED);
	}
	return drops;
}

static void test_loss(void)
{
	enum { N = 100000 };
	struct swm_cfg c;
	struct swm *a, *b, *other;
	uint8_t *va = malloc(N), *vb = malloc(N), *vo = malloc(N);
	uint64_t ta = 0, tb = 0, to = 0;
	REQUIRE(va && vb && vo);
	cfg_base(&c, 3);
	c.loss = 0.1;
	REQUIRE(swm_create(&c, &a) == 0);
	REQUIRE(swm_create(&c, &b) == 0);
	c.seed = seed + 1;
	REQUIRE(swm_create(&c, &other) == 0);

	uint64_t drops = loss_run(a, &ta, N, va);
	check_binomial(drops, N, 0.1);
	CHECK_EQ(stats(a, 0, ta).drop_loss, drops);
	CHECK_EQ(stats(a, 0, ta).rx_pkts, N);
	CHECK_EQ(stats(a, 1, ta).tx_pkts, N - drops);
	/* The same seed and inputs: the same drops; another seed: others. */
	CHECK_EQ(loss_run(b, &tb, N, vb), drops);
	CHECK(memcmp(va, vb, N) == 0);
	loss_run(other, &to, N, vo);
	CHECK(memcmp(va, vo, N) != 0);

	/* Changed on the fly; refused outside 0..1, keeping the last good value. */
	CHECK_EQ(swm_set_loss(a, 0.5), 0);
	check_binomial(loss_run(a, &ta, 20000, NULL), 20000, 0.5);
	CHECK_EQ(swm_set_loss(a, -0.01), -EINVAL);
	CHECK_EQ(swm_set_loss(a, 1.01), -EINVAL);
	CHECK_EQ(swm_set_loss(a, NAN), -EINVAL);
	check_binomial(loss_run(a, &ta, 20000, NULL), 20000, 0.5);
	CHECK_EQ(swm_set_loss(a, 1), 0);
	CHECK_EQ(loss_run(a, &ta, 1000, NULL), 1000);
	/* Loss comes before anything else: even a bad packet is lost first. */
	uint8_t pkt[PKT];
	build(pkt, TAG, 0, host(1), 0, 0, 0);
	pkt[11] ^= 1;
	CHECK_EQ(swm_input(a, 0, pkt, TAG, ++ta), SWM_DROP_LOSS);
	CHECK_EQ(swm_set_loss(a, 0), 0);
	CHECK_EQ(loss_run(a, &ta, 1000, NULL), 0);

	swm_destroy(a);
	swm_destroy(b);
	swm_destroy(other);
	free(va);
	free(vb);
	free(vo);
}

static uint64_t rng;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Random traffic (sizes, ports, classes, ECN bits, arrival gaps; bursts that overflow a port,
 * then quiet), RED on. The deadline is UINT64_MAX when empty and never late: nothing comes out
 * a ns before it; without host links it is exact: something comes out at it. Every packet
 * leaves at most once, on its destination's port, unchanged but for a CE mark, FIFO within
 * (ingress, egress, priority). Without host links or PFC, drop-tail on a small buffer and the
 * verdict says it all: each queued packet leaves. With host links at 10 Gbit/s and PFC on
 * priority 3 and a buffer of ports * (xoff + 2 MTU), priority 3 is lossless: each of its
 * packets leaves; the others may still be dropped on entering, which the counters tell. */
static void random_run(bool links)
{
	enum { N = 3000, PORTS = 6 };
	static const uint8_t dscps[] = {0, 8, DSCP_DATA, DSCP_CNP, 56};
	struct swm_cfg c;
	struct swm *s;
	struct out o;
	uint8_t *sent = malloc((size_t)N * PKT);
	size_t *lens = calloc(N, sizeof *lens);
	uint8_t *state = calloc(N, 1); /* 1: accepted (queued or held), 2: out */
	uint32_t last[PORTS][PORTS][SWM_PRIOS];
	REQUIRE(sent && lens && state);
	memset(last, 0xff, sizeof last);
	rng = (seed + links) * 0x9e3779b97f4a7c15ull | 1;

	cfg_base(&c, PORTS);
	c.rate_bps = 1 * GBPS;
	c.buffer = 65535;
	c.ecn = true;
	c.kmin = 5000;
	c.kmax = 30000;
	c.pmax = 0.5;
	if (links) {
		c.host_rate_bps = 10 * GBPS;
		c.pfc = true;
		c.xoff = 20000;
		c.xon = 10000;
		c.buffer = PORTS * (c.xoff + 2 * PKT);
	}
	REQUIRE(swm_create(&c, &s) == 0);
	CHECK_EQ(swm_deadline(s), UINT64_MAX);

	uint64_t now = 0, t = 0, accepted = 0, tail = 0, out = 0;
	/* What came out, as the per-priority and per-sender counters must say it. */
	uint64_t by_prio[PORTS][SWM_PRIOS] = {{0}}, fwd_pkts[PORTS] = {0}, fwd_bytes[PORTS] = {0};
	for (uint32_t i = 0; i <= N; i++) {
		/* Bursts of 500 packets 300 ns apart on average, mostly priority 3 to port 5 (about
		 * 8 Gbit/s into a 1 Gbit/s port), then 500 spaced 10 us apart (it drains). */
		bool burst = (i / 500) % 2 == 0;
		t += next_rand() % (burst ? 600 : 20000);
		if (i == N)
			t = UINT64_MAX - 1;
		/* Everything up to t, deadline by deadline. */
		for (;;) {
			uint64_t d = swm_deadline(s);
			if (d > t)
				break;
			CHECK(d > now);
			if (d <= now)
				break;
			CHECK(!next_out(s, d - 1, &o));
			unsigned got = 0;
			while (next_out(s, d, &o)) {
				got++;
				out++;
				if (o.seq >= N || o.from >= PORTS || state[o.seq] != 1) {
					CHECK(!"unknown or repeated packet");
					continue;
				}
				state[o.seq] = 2;
				const uint8_t *in = sent + (size_t)o.seq * PKT;
				unsigned dst = get32(in + 16) - host(0);
				unsigned prio = in[1] >> 5;
				CHECK_EQ(o.port, dst);
				CHECK_EQ(o.len, lens[o.seq]);
				if (o.port < PORTS) {
					by_prio[o.port][prio]++;
					fwd_pkts[o.from]++;
					fwd_bytes[o.from] += o.len;
				}
				if (o.len != lens[o.seq])
					continue;
				CHECK(last[o.from][dst][prio] == UINT32_MAX ||
				      o.seq > last[o.from][dst][prio]);
				last[o.from][dst][prio] = o.seq;
				if (o.pkt[1] != in[1]) {
					CHECK((in[1] & 3) != ECN_NOT);
					CHECK_EQ(o.pkt[1], in[1] | ECN_CE);
				}
				CHECK_MEM(o.pkt, in, 1);
				CHECK_MEM(o.pkt + 2, in + 2, 8);
				CHECK_MEM(o.pkt + 12, in + 12, o.len - 12);
			}
			if (!links)
				CHECK(got > 0);
			now = d;
			if (got == 0 && !links)
				break;
		}
		if (i == N)
			break;
		unsigned from = (unsigned)(next_rand() % PORTS);
		unsigned to = (unsigned)((from + 1 + next_rand() % (PORTS - 1)) % PORTS);
		if (burst && from != PORTS - 1 && next_rand() % 4)
			to = PORTS - 1;
		uint8_t dscp = dscps[next_rand() % 5];
		if (burst && next_rand() % 5)
			dscp = DSCP_DATA;
		size_t len = TAG + (size_t)(next_rand() % (PKT - TAG + 1));
		uint8_t *p = sent + (size_t)i * PKT;
		build(p, len, from, host(to), dscp, (uint8_t)(next_rand() % 4), i);
		lens[i] = len;
		int v = swm_input(s, from, p, len, t);
		if (links)
			CHECK_EQ(v, SWM_HELD);
		else
			CHECK(v == SWM_QUEUED || v == SWM_DROP_TAIL);
		if (v == SWM_QUEUED || v == SWM_HELD) {
			state[i] = 1;
			accepted++;
		}
		tail += v == SWM_DROP_TAIL;
		now = t;
		CHECK(swm_deadline(s) > now || swm_deadline(s) == UINT64_MAX);
		pfc_invariants(s, &c, from, PKT, now);
	}
	CHECK_EQ(swm_deadline(s), UINT64_MAX);
	uint64_t tx = 0, drops = 0, ect = 0, marked = 0, pauses = 0;
	for (unsigned p = 0; p < PORTS; p++) {
		struct swm_port_stats st = stats(s, p, now);
		tx += st.tx_pkts;
		drops += st.drop_tail;
		ect += st.ect;
		marked += st.marked;
		pauses += st.pauses;
		CHECK_EQ(st.queue_bytes, 0);
		CHECK_EQ(st.held, 0);
		CHECK_EQ(st.pfc_bytes, 0);
		CHECK(!st.paused);
		CHECK(st.queue_max <= 5 * c.buffer); /* five classes, each within the buffer */
		for (unsigned q = 0; q < SWM_PRIOS; q++)
			CHECK_EQ(st.tx_prio[q], by_prio[p][q]);
		CHECK_EQ(st.fwd_pkts, fwd_pkts[p]);
		CHECK_EQ(st.fwd_bytes, fwd_bytes[p]);
	}
	CHECK_EQ(tx, out);
	CHECK_EQ(out, accepted - (drops - tail)); /* what was dropped on entering after a hold */
	CHECK(marked > 0 && marked <= ect);
	if (links) {
		CHECK(pauses > 0);
		CHECK_EQ(tail, 0);
		for (uint32_t i = 0; i < N; i++)
			if (state[i] == 1 && sent[(size_t)i * PKT + 1] >> 5 == 3)
				CHECK(!"a priority-3 packet was lost");
	} else {
		CHECK(tail > 0 && accepted > 0); /* both outcomes happened */
		CHECK_EQ(drops, tail);
		CHECK_EQ(out, accepted);
	}
	swm_destroy(s);
	free(sent);
	free(lens);
	free(state);
}

static void test_random(void)
{
	random_run(false);
	random_run(true);
}

int main(void)
{
	seed = check_seed(1);
	test_cfg();
	test_routing();
	test_rate();
	test_priority();
	test_ets();
	test_droptail();
	test_ecn();
	test_host_link();
	test_pfc();
	test_pfc_hold();
	test_pfc_link();
	test_pfc_victim();
	test_pfc_off();
	test_loss();
	test_random();
	return check_exit();
}
