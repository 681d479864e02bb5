/* The MPA connection state machine (src/engine/iw_conn.h): two iw_conn instances wired back to
 * back in memory, every scenario under three segmentations of both streams (whole, one byte at
 * a time, seeded random splits with random partial "socket writes"), plus the real siw MPA
 * frames from the captures fed to each role, and the virtual-clock timeouts.
 *
 * After the handshake each side "sends" a few QP bytes right behind its last handshake byte;
 * every test checks that the peer's machine consumed exactly the handshake and that those bytes
 * reached the peer's QP stream intact (RTR response included where negotiated). */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "engine/iw_conn.h"
#include "tcpstream.h"

#define NS    1000000000ull
#define T0    (1000 * NS) /* virtual start time */
#define BUFSZ 8192

enum seg { SEG_WHOLE, SEG_BYTE, SEG_RANDOM, SEG__COUNT };
static const char *const seg_names[] = {"whole", "byte", "random"};
#define RANDOM_RUNS 8

static uint64_t seed, rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* What the responder's application does in REQ_RCVD. */
struct app {
	bool reject;
	uint16_t ird, ord;
	const uint8_t *pd;
	uint16_t pd_len;
};

struct scen {
	struct iw_conn_cfg i, r;
	struct app app;
};

/* The QP bytes each side sends as soon as iw_conn_tx_ready(). */
static const uint8_t qp_i[] = "first FPDU bytes from the initiator";
static const uint8_t qp_r[] = "first FPDU bytes from the responder";

struct pair {
	struct iw_conn i, r;
	uint8_t i2r[BUFSZ], r2i[BUFSZ]; /* in flight */
	size_t i2r_len, r2i_len;
	uint8_t iqp[BUFSZ], rqp[BUFSZ]; /* received after the handshake (the QP's stream) */
	size_t iqp_len, rqp_len;
	bool i_sent, r_sent;
	int accept_rc;
	bool app_done;
	int mode;
};

static void append(uint8_t *dst, size_t *len, const uint8_t *src, size_t n)
{
	REQUIRE(*len + n <= BUFSZ);
	memcpy(dst + *len, src, n);
	*len += n;
}

/* The socket takes all (or, in random mode, a random part) of the handshake bytes; the QP's
 * own bytes follow once the machine allows. */
static bool flush(struct pair *p, struct iw_conn *c, uint8_t *pipe, size_t *pipe_len, bool *sent,
		  const uint8_t *qp, size_t qp_len)
{
	const uint8_t *d;
	size_t n = iw_conn_tx_peek(c, &d);
	bool moved = false;

	if (n) {
		if (p->mode == SEG_RANDOM)
			n = 1 + rnd() % n;
		append(pipe, pipe_len, d, n);
		iw_conn_tx_advance(c, n);
		moved = true;
	}
	if (!*sent && iw_conn_tx_ready(c)) {
		append(pipe, pipe_len, qp, qp_len);
		*sent = true;
		moved = true;
	}
	return moved;
}

/* Delivers everything in flight to c, in chunks per the segmentation mode. */
static bool deliver(struct pair *p, struct iw_conn *c, uint8_t *pipe, size_t *pipe_len, uint8_t *qp,
		    size_t *qp_len)
{
	size_t off = 0;

	while (off < *pipe_len) {
		size_t chunk = *pipe_len - off, used = 0;

		if (p->mode == SEG_BYTE)
			chunk = 1;
		else if (p->mode == SEG_RANDOM)
			chunk = 1 + rnd() % chunk;
		if (!iw_conn_rx_done(c)) {
			/* an exact-size heap copy: ASan sees any read past the chunk */
			uint8_t *copy = malloc(chunk);

			REQUIRE(copy);
			memcpy(copy, pipe + off, chunk);
			iw_conn_input(c, copy, chunk, T0, &used);
			CHECK(used <= chunk);
			if (iw_conn_rx_done(c))
				append(qp, qp_len, copy + used, chunk - used);
			free(copy);
		} else {
			append(qp, qp_len, pipe + off, chunk);
		}
		off += chunk;
	}
	*pipe_len = 0;
	return off > 0;
}

static void run(struct pair *p, const struct scen *s, int mode)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode;
	REQUIRE(iw_conn_init(&p->i, &s->i, T0) == 0);
	REQUIRE(iw_conn_init(&p->r, &s->r, T0) == 0);
	for (int iter = 0; iter < 100000; iter++) {
		bool moved = false;

		moved |= flush(p, &p->i, p->i2r, &p->i2r_len, &p->i_sent, qp_i, sizeof(qp_i));
		moved |= flush(p, &p->r, p->r2i, &p->r2i_len, &p->r_sent, qp_r, sizeof(qp_r));
		moved |= deliver(p, &p->r, p->i2r, &p->i2r_len, p->rqp, &p->rqp_len);
		moved |= deliver(p, &p->i, p->r2i, &p->r2i_len, p->iqp, &p->iqp_len);
		if (iw_conn_state(&p->r) == IW_CONN_REQ_RCVD && !p->app_done) {
			p->app_done = true;
			if (s->app.reject)
				p->accept_rc = iw_conn_reject(&p->r, s->app.pd, s->app.pd_len);
			else
				p->accept_rc = iw_conn_accept(&p->r, s->app.ird, s->app.ord,
							      s->app.pd, s->app.pd_len, T0);
			moved = true;
		}
		if (!moved)
			return;
	}
	REQUIRE(!"handshake did not settle");
}

/* Both sides established, and each QP stream holds exactly the peer's QP bytes (after the
 * zero-length Read Response at a READ-RTR initiator). */
static void check_established(const struct pair *p)
{
	struct iw_conn_info ii, ri;

	iw_conn_info(&p->i, &ii);
	iw_conn_info(&p->r, &ri);
	CHECK_EQ(iw_conn_state(&p->i), IW_CONN_ESTABLISHED);
	CHECK_EQ(iw_conn_state(&p->r), IW_CONN_ESTABLISHED);
	CHECK_EQ(p->accept_rc, 0);
	CHECK_EQ(iw_conn_error(&p->i), 0);
	CHECK_EQ(iw_conn_error(&p->r), 0);
	CHECK(iw_conn_tx_ready(&p->i) && iw_conn_tx_ready(&p->r));
	CHECK_EQ(iw_conn_deadline(&p->i), IW_CONN_NO_DEADLINE);
	CHECK_EQ(iw_conn_deadline(&p->r), IW_CONN_NO_DEADLINE);
	/* the same outcome on both sides */
	CHECK_EQ(ii.rev, ri.rev);
	CHECK_EQ(ii.crc, ri.crc);
	CHECK_EQ(ii.enhanced, ri.enhanced);
	CHECK_EQ(ii.p2p, ri.p2p);
	CHECK_EQ(ii.rtr, ri.rtr);
	/* stream accounting: what one side queued, the other consumed */
	CHECK_EQ(ii.tx_queued, ri.rx_consumed);
	/* ... except the zero-length Read Response answering a Read RTR: the initiator's QP
	 * receives it */
	CHECK_EQ(ri.tx_queued, ii.rx_consumed + (ii.rtr == IW_CONN_RTR_READ ? 20 : 0));
	CHECK_EQ(p->rqp_len, sizeof(qp_i));
	CHECK_MEM(p->rqp, qp_i, sizeof(qp_i));
	if (ii.rtr == IW_CONN_RTR_READ) {
		struct iw_fpdu f;
		int n = iw_fpdu_decode(p->iqp, p->iqp_len, ii.crc, 0, &f);

		CHECK_EQ(n, 20);
		CHECK_EQ(f.hdr.opcode, IW_OP_READ_RESP);
		CHECK(f.hdr.tagged && f.hdr.last);
		CHECK_EQ(f.hdr.stag, 0);
		CHECK_EQ(f.hdr.to, 0);
		CHECK_EQ(f.payload_len, 0);
		CHECK_EQ(p->iqp_len, 20 + sizeof(qp_r));
		if (n == 20)
			CHECK_MEM(p->iqp + 20, qp_r, sizeof(qp_r));
	} else {
		CHECK_EQ(p->iqp_len, sizeof(qp_r));
		CHECK_MEM(p->iqp, qp_r, sizeof(qp_r));
	}
}

/* Random mode runs RANDOM_RUNS times, each from its own seed derived from the test's seed. */
static bool reseed(int mode, int r)
{
	rng = (seed * 2654435761u + (uint64_t)mode * 1000 + (uint64_t)r) | 1;
	return true;
}

#define FOR_MODES(mode, r)                                                                         \
	for (int mode = 0; mode < SEG__COUNT; mode++)                                              \
		for (int r = 0; r < (mode == SEG_RANDOM ? RANDOM_RUNS : 1) && reseed(mode, r); r++)

static struct scen dflt_scen(void)
{
	struct scen s;

	memset(&s, 0, sizeof(s));
	s.i.role = IW_CONN_INITIATOR;
	s.i.ird = 16;
	s.i.ord = 16;
	s.r.role = IW_CONN_RESPONDER;
	s.app.ird = 16;
	s.app.ord = 16;
	return s;
}

/* ---- Scenarios ---- */

static void test_rev2_default(void)
{
	static const uint8_t cli[] = "client!!";
	struct scen s = dflt_scen();
	struct pair p;
	/* iwarp.md 2.5: Rev 2 (siw default shape), CRC off, IRD 16 / ORD 16, PD "client!!" */
	static const uint8_t want_req[] = {
	    'M',  'P',	'A',  ' ',  'I',  'D',	' ',  'R',  'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',
	    0x10, 0x02, 0x00, 0x0c, 0x00, 0x10, 0x00, 0x10, 'c', 'l', 'i', 'e', 'n', 't', '!', '!'};
	struct iw_conn c;
	const uint8_t *d;

	s.i.pd = cli;
	s.i.pd_len = 8;
	REQUIRE(iw_conn_init(&c, &s.i, T0) == 0);
	CHECK_EQ(iw_conn_tx_peek(&c, &d), sizeof(want_req));
	CHECK_MEM(d, want_req, sizeof(want_req));
	CHECK_EQ(iw_conn_state(&c), IW_CONN_AWAIT_REP);
	CHECK(!iw_conn_tx_ready(&c) && !iw_conn_rx_done(&c));

	FOR_MODES(mode, r)
	{
		struct iw_conn_info ii, ri;

		run(&p, &s, mode);
		check_established(&p);
		iw_conn_info(&p.i, &ii);
		iw_conn_info(&p.r, &ri);
		CHECK_EQ(ii.rev, 2);
		CHECK(ii.enhanced && !ii.crc && !ii.p2p);
		CHECK_EQ(ii.rtr, IW_CONN_RTR_NONE);
		CHECK_EQ(ii.rx_consumed, 24); /* the Reply: 20 + IRD/ORD */
		CHECK_EQ(ri.rx_consumed, sizeof(want_req));
		CHECK_EQ(ri.peer_pd_len, 8);
		CHECK(ri.peer_pd && memcmp(ri.peer_pd, cli, 8) == 0);
		CHECK_EQ(ii.peer_pd_len, 0);
		CHECK(ri.peer_ird_ord && ii.peer_ird_ord);
		CHECK_EQ(ri.peer_ird, 16);
		CHECK_EQ(ii.peer_ord, 16);
		CHECK_EQ(ii.ird, 16);
		CHECK_EQ(ii.ord, 16);
		CHECK_EQ(ri.ird, 16);
		CHECK_EQ(ri.ord, 16);
		for (int q = 0; q < IW_QN__COUNT; q++)
			CHECK(!ii.tx_msn_used[q] && !ri.rx_msn_used[q]);
		CHECK(!ii.orq_rtr);
	}
}

static void test_fallback(void)
{
	struct scen s = dflt_scen();
	struct pair p;

	s.r.rev = 1; /* a revision 1 responder */
	FOR_MODES(mode, r)
	{
		struct iw_conn_info ii, ri;

		run(&p, &s, mode);
		check_established(&p);
		iw_conn_info(&p.i, &ii);
		iw_conn_info(&p.r, &ri);
		CHECK_EQ(ii.rev, 1);
		CHECK(!ii.enhanced && !ii.peer_ird_ord);
		CHECK_EQ(ii.rx_consumed, 20); /* a Rev 1 Reply: no IRD/ORD block */
		CHECK_EQ(ii.ird, 16);	      /* nothing negotiated: the requested values */
		CHECK_EQ(ii.ord, 16);
	}
	/* like siw: no fallback */
	s.i.no_rev1_fallback = true;
	FOR_MODES(mode, r)
	{
		run(&p, &s, mode);
		CHECK_EQ(iw_conn_state(&p.i), IW_CONN_FAILED);
		CHECK_EQ(iw_conn_error(&p.i), -IW_E_MPA_V2);
	}
	/* a Rev 1 initiator gets a Rev 1 Reply from a Rev 2 responder */
	s = dflt_scen();
	s.i.rev = 1;
	FOR_MODES(mode, r)
	{
		struct iw_conn_info ii;

		run(&p, &s, mode);
		check_established(&p);
		iw_conn_info(&p.i, &ii);
		CHECK_EQ(ii.rev, 1);
		CHECK_EQ(ii.rx_consumed, 20);
	}
}

static void test_crc(void)
{
	static const struct {
		uint8_t i, r;
		bool ok, crc;
		uint8_t r_state;
		int r_err, i_err;
	} rows[] = {
	    {IW_CONN_CRC_PEER, IW_CONN_CRC_PEER, true, false, 0, 0, 0},
	    {IW_CONN_CRC_PEER, IW_CONN_CRC_REQUIRED, true, true, 0, 0, 0},
	    {IW_CONN_CRC_REQUIRED, IW_CONN_CRC_PEER, true, true, 0, 0, 0},
	    {IW_CONN_CRC_REQUIRED, IW_CONN_CRC_REQUIRED, true, true, 0, 0, 0},
	    {IW_CONN_CRC_REQUIRED_STRICT, IW_CONN_CRC_REQUIRED_STRICT, true, true, 0, 0, 0},
	    {IW_CONN_CRC_OFF_STRICT, IW_CONN_CRC_PEER, true, false, 0, 0, 0},
	    /* required vs a peer that refuses CRC: the responder rejects */
	    {IW_CONN_CRC_REQUIRED, IW_CONN_CRC_OFF_STRICT, false, false, IW_CONN_REJECTED,
	     -ENOPROTOOPT, -ECONNREFUSED},
	    /* the responder requires CRC offered, the initiator does not offer it */
	    {IW_CONN_CRC_PEER, IW_CONN_CRC_REQUIRED_STRICT, false, false, IW_CONN_REJECTED,
	     -ENOPROTOOPT, -ECONNREFUSED},
	    /* the responder turns CRC on, the initiator refuses it */
	    {IW_CONN_CRC_OFF_STRICT, IW_CONN_CRC_REQUIRED, false, false, IW_CONN_ESTABLISHED, 0,
	     -ENOPROTOOPT},
	};
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct scen s = dflt_scen();
		struct pair p;

		s.i.crc = rows[k].i;
		s.r.crc = rows[k].r;
		FOR_MODES(mode, r)
		{
			struct iw_conn_info ii;

			run(&p, &s, mode);
			iw_conn_info(&p.i, &ii);
			if (rows[k].ok) {
				check_established(&p);
				CHECK_EQ(ii.crc, rows[k].crc);
				continue;
			}
			CHECK_EQ(iw_conn_state(&p.r), rows[k].r_state);
			CHECK_EQ(iw_conn_error(&p.r), rows[k].r_err);
			CHECK_EQ(iw_conn_error(&p.i), rows[k].i_err);
			CHECK_EQ(iw_conn_state(&p.i), rows[k].i_err == -ECONNREFUSED
							  ? IW_CONN_REJECTED
							  : IW_CONN_FAILED);
			CHECK(!p.i_sent);
			CHECK_EQ(p.rqp_len, 0);
		}
	}
}

/* Frames handcrafted with the wire encoder. */
static size_t make_frame(uint8_t *out, uint8_t kind, uint8_t rev, bool m, bool c, bool r,
			 const struct iw_mpa_v2 *v2, const uint8_t *pd, uint16_t pd_len)
{
	struct iw_mpa f;
	int n;

	memset(&f, 0, sizeof(f));
	f.kind = kind;
	f.rev = rev;
	f.m = m;
	f.c = c;
	f.r = r;
	if (v2) {
		f.enhanced = true;
		f.v2 = *v2;
	}
	f.pd = pd;
	f.pd_len = pd_len;
	n = iw_mpa_encode(&f, out, IW_MPA_FRAME_MAX);
	REQUIRE(n > 0);
	return (size_t)n;
}

/* Feeds buf to c per the mode; returns the last input result and the bytes consumed. */
static int feed(struct iw_conn *c, const uint8_t *buf, size_t len, int mode, uint64_t now,
		size_t *consumed)
{
	size_t off = 0, total = 0;
	int rc = 0;

	while (off < len) {
		size_t chunk = len - off, used;

		if (mode == SEG_BYTE)
			chunk = 1;
		else if (mode == SEG_RANDOM)
			chunk = 1 + rnd() % chunk;
		rc = iw_conn_input(c, buf + off, chunk, now, &used);
		total += used;
		off += chunk;
		if (rc < 0 || iw_conn_rx_done(c) || iw_conn_state(c) == IW_CONN_REQ_RCVD)
			break;
	}
	if (consumed)
		*consumed = total;
	return rc;
}

static struct iw_conn_cfg resp_cfg(void)
{
	struct iw_conn_cfg r = {.role = IW_CONN_RESPONDER};
	return r;
}

static void test_markers(void)
{
	static const uint8_t want_rej[] = {'M',	 'P',  'A',  ' ',  'I',	 'D',  ' ',  'R',
					   'e',	 'p',  ' ',  'F',  'r',	 'a',  'm',  'e',
					   0x30, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00};
	struct iw_mpa_v2 v2 = {.ird = 4, .ord = 4};
	struct iw_conn_cfg rc = resp_cfg();
	uint8_t frame[IW_MPA_FRAME_MAX];
	size_t n = make_frame(frame, IW_MPA_REQ, 2, true, false, false, &v2, NULL, 0);

	FOR_MODES(mode, r)
	{
		struct iw_conn c;
		const uint8_t *d;
		size_t used;

		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		CHECK_EQ(feed(&c, frame, n, mode, T0, &used), -IW_E_MPA_MARKERS);
		CHECK_EQ(used, n);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_REJECTED);
		CHECK_EQ(iw_conn_error(&c), -IW_E_MPA_MARKERS);
		/* siw: Reply with R, M cleared, Enhanced and Rev echoed, IRD/ORD 0 */
		CHECK_EQ(iw_conn_tx_peek(&c, &d), sizeof(want_rej));
		if (d)
			CHECK_MEM(d, want_rej, sizeof(want_rej));
		CHECK_EQ(iw_conn_deadline(&c), IW_CONN_NO_DEADLINE);
		/* ended: nothing more is consumed */
		CHECK_EQ(iw_conn_input(&c, frame, 4, T0, &used), -IW_E_MPA_MARKERS);
		CHECK_EQ(used, 0);
	}
	/* siw's Reject of a malformed Request keeps Enhanced without the IRD/ORD block: still a
	 * Reject for the initiator */
	{
		static const uint8_t siw_rej[] = {'M', 'P', 'A',  ' ',	'I', 'D', ' ',
						  'R', 'e', 'p',  ' ',	'F', 'r', 'a',
						  'm', 'e', 0x30, 0x02, 0,   0};
		struct iw_conn_cfg ic = {.role = IW_CONN_INITIATOR};
		struct iw_conn c;
		size_t used;

		REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
		CHECK_EQ(iw_conn_input(&c, siw_rej, sizeof(siw_rej), T0, &used), -ECONNREFUSED);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_REJECTED);
		CHECK_EQ(used, sizeof(siw_rej));
	}
	/* a Reply asking for markers fails the initiator (siw: refused) */
	n = make_frame(frame, IW_MPA_REP, 2, true, false, false, &v2, NULL, 0);
	FOR_MODES(mode, r)
	{
		struct iw_conn_cfg ic = {.role = IW_CONN_INITIATOR, .ird = 4, .ord = 4};
		struct iw_conn c;

		REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
		CHECK_EQ(feed(&c, frame, n, mode, T0, NULL), -IW_E_MPA_MARKERS);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_FAILED);
	}
}

static void test_bad_rev(void)
{
	static const uint8_t pd[8] = "abcdefgh";
	static const uint8_t want_rej[] = {'M', 'P', 'A', ' ', 'I', 'D', ' ',  'R',  'e',  'p',
					   ' ', 'F', 'r', 'a', 'm', 'e', 0x20, 0x01, 0x00, 0x00};
	struct iw_conn_cfg rc = resp_cfg();
	uint8_t frame[IW_MPA_FRAME_MAX];
	size_t n = make_frame(frame, IW_MPA_REQ, 1, false, false, false, NULL, pd, 8);

	frame[17] = 3; /* a revision nobody defined */
	FOR_MODES(mode, r)
	{
		struct iw_conn c;
		const uint8_t *d;
		size_t used;

		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		/* the whole frame is read before the Reject */
		CHECK_EQ(iw_conn_input(&c, frame, n - 1, T0, &used), 0);
		CHECK_EQ(used, n - 1);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_AWAIT_REQ);
		CHECK_EQ(iw_conn_tx_peek(&c, &d), 0);
		CHECK_EQ(feed(&c, frame + n - 1, 1, mode, T0, &used), -IW_E_MPA_REV);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_REJECTED);
		CHECK_EQ(iw_conn_tx_peek(&c, &d), sizeof(want_rej));
		if (d)
			CHECK_MEM(d, want_rej, sizeof(want_rej));
	}
	/* byte at a time from the start: the same */
	FOR_MODES(mode, r)
	{
		struct iw_conn c;

		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		CHECK_EQ(feed(&c, frame, n, mode, T0, NULL), -IW_E_MPA_REV);
		CHECK_EQ(iw_conn_error(&c), -IW_E_MPA_REV);
	}
	/* Enhanced without room for the IRD/ORD block: rejected (siw), Enhanced cleared */
	{
		static const uint8_t bad_v2[] = {'M',  'P',  'A',  ' ',	 'I',  'D', ' ', 'R',
						 'e',  'q',  ' ',  'F',	 'r',  'a', 'm', 'e',
						 0x10, 0x02, 0x00, 0x02, 0xab, 0xcd};
		struct iw_conn c;
		const uint8_t *d;

		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		CHECK_EQ(feed(&c, bad_v2, sizeof(bad_v2), SEG_WHOLE, T0, NULL), -IW_E_MPA_V2);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_REJECTED);
		CHECK_EQ(iw_conn_tx_peek(&c, &d), 20);
		if (d)
			CHECK(d[16] == 0x20 && d[17] == 2 && d[18] == 0 && d[19] == 0);
	}
}

static void test_private_data(void)
{
	static uint8_t big[IW_MPA_PD_MAX + 8];
	static const struct {
		uint8_t rev;
		uint16_t len;
	} ok[] = {{2, 0}, {2, 1}, {2, IW_CONN_PD_MAX_V2}, {1, 0}, {1, 1}, {1, IW_CONN_PD_MAX_V1}};

	for (size_t k = 0; k < sizeof(big); k++)
		big[k] = (uint8_t)(k * 7 + 1);
	for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
		struct scen s = dflt_scen();
		struct pair p;

		s.i.rev = ok[k].rev;
		s.i.pd = big;
		s.i.pd_len = ok[k].len;
		s.app.pd = big + 3;
		s.app.pd_len = ok[k].len;
		FOR_MODES(mode, r)
		{
			struct iw_conn_info ii, ri;

			run(&p, &s, mode);
			check_established(&p);
			iw_conn_info(&p.i, &ii);
			iw_conn_info(&p.r, &ri);
			CHECK_EQ(ri.peer_pd_len, ok[k].len);
			CHECK_EQ(ii.peer_pd_len, ok[k].len);
			if (ok[k].len && ri.peer_pd && ii.peer_pd) {
				CHECK_MEM(ri.peer_pd, big, ok[k].len);
				CHECK_MEM(ii.peer_pd, big + 3, ok[k].len);
			}
		}
	}
	/* one byte over the limit: refused locally, nothing sent */
	{
		struct iw_conn_cfg ic = {.role = IW_CONN_INITIATOR, .pd = big};
		struct iw_conn c;

		ic.pd_len = IW_CONN_PD_MAX_V2 + 1;
		CHECK_EQ(iw_conn_init(&c, &ic, T0), -EMSGSIZE);
		ic.rev = 1;
		ic.pd_len = IW_MPA_PD_MAX + 1; /* 513 */
		CHECK_EQ(iw_conn_init(&c, &ic, T0), -EMSGSIZE);
		ic.pd_len = IW_MPA_PD_MAX;
		CHECK_EQ(iw_conn_init(&c, &ic, T0), 0);
	}
	/* ... and at accept / reject: the state is unchanged, a smaller answer works */
	{
		struct scen s = dflt_scen();
		struct iw_conn i, r;
		const uint8_t *d;
		size_t n, used;

		REQUIRE(iw_conn_init(&i, &s.i, T0) == 0);
		REQUIRE(iw_conn_init(&r, &s.r, T0) == 0);
		n = iw_conn_tx_peek(&i, &d);
		CHECK_EQ(iw_conn_input(&r, d, n, T0, &used), 0);
		CHECK_EQ(iw_conn_state(&r), IW_CONN_REQ_RCVD);
		CHECK_EQ(iw_conn_accept(&r, 1, 1, big, IW_CONN_PD_MAX_V2 + 1, T0), -EMSGSIZE);
		CHECK_EQ(iw_conn_reject(&r, big, IW_CONN_PD_MAX_V2 + 1), -EMSGSIZE);
		CHECK_EQ(iw_conn_accept(&r, 1, 1, NULL, 5, T0), -EINVAL);
		CHECK_EQ(iw_conn_state(&r), IW_CONN_REQ_RCVD);
		CHECK_EQ(iw_conn_tx_peek(&r, &d), 0);
		CHECK_EQ(iw_conn_accept(&r, 1, 1, big, IW_CONN_PD_MAX_V2, T0), 0);
		CHECK_EQ(iw_conn_state(&r), IW_CONN_ESTABLISHED);
		CHECK_EQ(iw_conn_accept(&r, 1, 1, NULL, 0, T0), -EINVAL); /* twice */
		CHECK_EQ(iw_conn_reject(&r, NULL, 0), -EINVAL);
		CHECK_EQ(iw_conn_accept(&i, 1, 1, NULL, 0, T0), -EINVAL); /* wrong role */
	}
}

static void test_app_reject(void)
{
	static const uint8_t why[] = "go away: no such service";
	struct scen s = dflt_scen();
	struct pair p;

	s.app.reject = true;
	s.app.pd = why;
	s.app.pd_len = sizeof(why);
	for (int rev = 1; rev <= 2; rev++) {
		s.i.rev = (uint8_t)rev;
		FOR_MODES(mode, r)
		{
			struct iw_conn_info ii;

			run(&p, &s, mode);
			CHECK_EQ(p.accept_rc, 0);
			CHECK_EQ(iw_conn_state(&p.r), IW_CONN_REJECTED);
			CHECK_EQ(iw_conn_error(&p.r), -ECONNREFUSED);
			CHECK_EQ(iw_conn_state(&p.i), IW_CONN_REJECTED);
			CHECK_EQ(iw_conn_error(&p.i), -ECONNREFUSED);
			iw_conn_info(&p.i, &ii);
			CHECK_EQ(ii.peer_pd_len, sizeof(why));
			if (ii.peer_pd)
				CHECK_MEM(ii.peer_pd, why, sizeof(why));
			CHECK(!p.i_sent && !p.r_sent);
		}
	}
}

static void test_ird_ord(void)
{
	struct scen s = dflt_scen();
	struct pair p;

	/* relaxed (siw): the responder's ORD is lowered to the initiator's IRD and its IRD
	 * raised to the initiator's ORD; the initiator takes the Reply's values */
	s.i.ird = 4;
	s.i.ord = 2;
	s.app.ird = 1;
	s.app.ord = 8;
	FOR_MODES(mode, r)
	{
		struct iw_conn_info ii, ri;

		run(&p, &s, mode);
		check_established(&p);
		iw_conn_info(&p.i, &ii);
		iw_conn_info(&p.r, &ri);
		CHECK_EQ(ri.ird, 2);
		CHECK_EQ(ri.ord, 4);
		CHECK_EQ(ii.ird, 4);
		CHECK_EQ(ii.ord, 2);
		CHECK_EQ(ii.peer_ird, 2);
		CHECK_EQ(ii.peer_ord, 4);
	}
	/* strict: the responder's accept fails, state unchanged; values in range work */
	{
		struct iw_conn i, r;
		const uint8_t *d;
		size_t n, used;

		s.r.strict_ird = true;
		REQUIRE(iw_conn_init(&i, &s.i, T0) == 0);
		REQUIRE(iw_conn_init(&r, &s.r, T0) == 0);
		n = iw_conn_tx_peek(&i, &d);
		CHECK_EQ(iw_conn_input(&r, d, n, T0, &used), 0);
		CHECK_EQ(iw_conn_accept(&r, 1, 2, NULL, 0, T0), -ENOMEM);
		CHECK_EQ(iw_conn_accept(&r, 2, 8, NULL, 0, T0), -EINVAL);
		CHECK_EQ(iw_conn_accept(&r, 200, 2, NULL, 0, T0), -EINVAL); /* above max_ird */
		CHECK_EQ(iw_conn_state(&r), IW_CONN_REQ_RCVD);
		CHECK_EQ(iw_conn_accept(&r, 2, 4, NULL, 0, T0), 0);
	}
	/* the initiator refuses a Reply whose ORD its IRD cannot hold: Terminate LLP/MPA/6 */
	for (int strict = 0; strict <= 1; strict++) {
		struct iw_conn_cfg ic = {.role = IW_CONN_INITIATOR,
					 .ird = 1,
					 .ord = 1,
					 .max_ird = 2,
					 .strict_ird = strict};
		struct iw_mpa_v2 v2 = {.ird = 1, .ord = strict ? 2 : 3};
		uint8_t frame[IW_MPA_FRAME_MAX];
		size_t n = make_frame(frame, IW_MPA_REP, 2, false, false, false, &v2, NULL, 0);

		FOR_MODES(mode, r)
		{
			struct iw_conn c;
			const uint8_t *d;
			struct iw_fpdu f;
			size_t tn;

			REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
			tn = iw_conn_tx_peek(&c, &d);
			iw_conn_tx_advance(&c, tn);
			CHECK_EQ(feed(&c, frame, n, mode, T0, NULL), -IW_E_MPA_IRD);
			tn = iw_conn_tx_peek(&c, &d);
			REQUIRE(tn > 0);
			CHECK_EQ(iw_fpdu_decode(d, tn, false, 0, &f), (int)tn);
			CHECK_EQ(f.hdr.opcode, IW_OP_TERMINATE);
			CHECK_EQ(f.hdr.term.layer, IW_LAYER_LLP);
			CHECK_EQ(f.hdr.term.ecode, 6);
		}
		/* relaxed: an ORD up to max_ird is taken (IRD grows to it) */
		if (!strict) {
			struct iw_conn c;
			struct iw_conn_info ii;

			v2.ord = 2;
			n = make_frame(frame, IW_MPA_REP, 2, false, false, false, &v2, NULL, 0);
			REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
			CHECK_EQ(feed(&c, frame, n, SEG_WHOLE, T0, NULL), 0);
			iw_conn_info(&c, &ii);
			CHECK_EQ(iw_conn_state(&c), IW_CONN_ESTABLISHED);
			CHECK_EQ(ii.ird, 2);
		}
	}
}

static void test_p2p(void)
{
	static const struct {
		uint8_t offer, allow, rtr;
		bool crc;
	} rows[] = {
	    {0, 0, IW_CONN_RTR_WRITE, false}, /* siw defaults: Write | Read -> Write */
	    {IW_CONN_RTR_READ, 0, IW_CONN_RTR_READ, false},
	    {IW_CONN_RTR_READ, 0, IW_CONN_RTR_READ, true},
	    {IW_CONN_RTR_WRITE | IW_CONN_RTR_READ, IW_CONN_RTR_READ, IW_CONN_RTR_READ, false},
	    {IW_CONN_RTR_SEND, IW_CONN_RTR_SEND, IW_CONN_RTR_SEND, false},
	    {IW_CONN_RTR_ALL, IW_CONN_RTR_SEND, IW_CONN_RTR_SEND, true},
	    {IW_CONN_RTR_WRITE, 0, IW_CONN_RTR_WRITE, true},
	};
	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct scen s = dflt_scen();
		struct pair p;

		s.i.p2p = true;
		s.i.rtr_types = rows[k].offer;
		s.r.rtr_types = rows[k].allow;
		s.i.crc = rows[k].crc ? IW_CONN_CRC_REQUIRED : IW_CONN_CRC_PEER;
		FOR_MODES(mode, r)
		{
			struct iw_conn_info ii, ri;
			uint8_t rtr = rows[k].rtr;

			run(&p, &s, mode);
			check_established(&p);
			iw_conn_info(&p.i, &ii);
			iw_conn_info(&p.r, &ri);
			CHECK(ii.p2p && ri.p2p);
			CHECK_EQ(ii.rtr, rtr);
			CHECK_EQ(ii.crc, rows[k].crc);
			CHECK_EQ(ri.rtr_offer, rows[k].offer ? rows[k].offer : 3);
			CHECK_EQ(ii.tx_msn_used[IW_QN_READ_REQ], rtr == IW_CONN_RTR_READ);
			CHECK_EQ(ri.rx_msn_used[IW_QN_READ_REQ], rtr == IW_CONN_RTR_READ);
			CHECK_EQ(ii.tx_msn_used[IW_QN_SEND], rtr == IW_CONN_RTR_SEND);
			CHECK_EQ(ri.rx_msn_used[IW_QN_SEND], rtr == IW_CONN_RTR_SEND);
			CHECK_EQ(ii.orq_rtr, rtr == IW_CONN_RTR_READ);
			/* the RTR's size on the wire (iwarp.md 2.4; no pad: all multiples of 4) */
			CHECK_EQ(ri.rx_consumed - 24, rtr == IW_CONN_RTR_WRITE	? 20
						      : rtr == IW_CONN_RTR_READ ? 52
										: 24);
			CHECK(ii.ord >= 1);
		}
	}
	/* the RTR frame bytes: zero-length Write, STag 1, TO 0 (siw_qp_mpa_rts) */
	{
		static const uint8_t want[] = {0x00, 0x0e, 0xc1, 0x40, 0, 0, 0, 1, 0, 0,
					       0,    0,	   0,	 0,    0, 0, 0, 0, 0, 0};
		struct scen s = dflt_scen();
		struct pair p;

		s.i.p2p = true;
		run(&p, &s, SEG_WHOLE);
		check_established(&p);
		/* replay: what the initiator queued after its Request */
		struct iw_conn c;
		const uint8_t *d;
		uint8_t rep[64];
		struct iw_mpa_v2 v2 = {.p2p = true, .ird = 16, .ord = 16, .rtr_write = true};
		size_t n = make_frame(rep, IW_MPA_REP, 2, false, false, false, &v2, NULL, 0), tn;

		REQUIRE(iw_conn_init(&c, &s.i, T0) == 0);
		tn = iw_conn_tx_peek(&c, &d);
		iw_conn_tx_advance(&c, tn);
		CHECK_EQ(feed(&c, rep, n, SEG_WHOLE, T0, NULL), 0);
		CHECK_EQ(iw_conn_tx_peek(&c, &d), sizeof(want));
		if (d)
			CHECK_MEM(d, want, sizeof(want));
	}
	/* no matching RTR: the initiator offers only Send, the responder (siw-like) picks
	 * Write; the initiator terminates (LLP/MPA/7), the responder sees the Terminate */
	{
		struct scen s = dflt_scen();
		struct pair p;

		s.i.p2p = true;
		s.i.rtr_types = IW_CONN_RTR_SEND;
		FOR_MODES(mode, r)
		{
			struct iw_conn_info ri;

			run(&p, &s, mode);
			CHECK_EQ(iw_conn_state(&p.i), IW_CONN_FAILED);
			CHECK_EQ(iw_conn_error(&p.i), -IW_E_MPA_RTR);
			CHECK_EQ(iw_conn_state(&p.r), IW_CONN_FAILED);
			CHECK_EQ(iw_conn_error(&p.r), -ECONNABORTED);
			iw_conn_info(&p.r, &ri);
			CHECK(ri.peer_term_valid);
			CHECK_EQ(ri.peer_term.layer, IW_LAYER_LLP);
			CHECK_EQ(ri.peer_term.etype, IW_ETYPE_LLP_MPA);
			CHECK_EQ(ri.peer_term.ecode, 7);
			CHECK(!p.i_sent && !p.r_sent);
		}
	}
}

/* The responder in AWAIT_RTR, after a P2P Request offering `offer`. */
static void p2p_responder(struct iw_conn *r, uint8_t offer, uint8_t crc)
{
	struct iw_conn_cfg ic = {.role = IW_CONN_INITIATOR,
				 .ird = 2,
				 .ord = 2,
				 .p2p = true,
				 .rtr_types = offer,
				 .crc = crc};
	struct iw_conn_cfg rc = {.role = IW_CONN_RESPONDER, .rtr_types = IW_CONN_RTR_ALL};
	struct iw_conn i;
	const uint8_t *d;
	size_t n, used;

	REQUIRE(iw_conn_init(&i, &ic, T0) == 0);
	REQUIRE(iw_conn_init(r, &rc, T0) == 0);
	n = iw_conn_tx_peek(&i, &d);
	REQUIRE(iw_conn_input(r, d, n, T0, &used) == 0);
	REQUIRE(iw_conn_accept(r, 2, 2, NULL, 0, T0 + NS) == 0);
	REQUIRE(iw_conn_state(r) == IW_CONN_AWAIT_RTR);
	iw_conn_tx_advance(r, iw_conn_tx_peek(r, &d));
}

static void test_bad_rtr(void)
{
	uint8_t buf[128];
	struct iw_fpdu f;
	int n;

	/* a Send where a Write RTR is expected */
	FOR_MODES(mode, r)
	{
		struct iw_conn c;
		const uint8_t *d;

		p2p_responder(&c, IW_CONN_RTR_WRITE, IW_CONN_CRC_PEER);
		memset(&f, 0, sizeof(f));
		iw_hdr_init(&f.hdr, IW_OP_SEND);
		f.hdr.msn = 1;
		n = iw_fpdu_encode(&f, false, buf, sizeof(buf));
		REQUIRE(n > 0);
		CHECK_EQ(feed(&c, buf, (size_t)n, mode, T0, NULL), -IW_E_MPA_RTR);
		CHECK(iw_conn_tx_peek(&c, &d) > 0); /* a Terminate */
	}
	/* a data-carrying FPDU longer than any RTR: refused on its length */
	{
		static uint8_t payload[200];
		struct iw_conn c;
		size_t used;

		p2p_responder(&c, IW_CONN_RTR_WRITE, IW_CONN_CRC_PEER);
		memset(&f, 0, sizeof(f));
		iw_hdr_init(&f.hdr, IW_OP_WRITE);
		f.payload = payload;
		f.payload_len = sizeof(payload);
		uint8_t big[512];
		n = iw_fpdu_encode(&f, false, big, sizeof(big));
		REQUIRE(n > 0);
		CHECK_EQ(iw_conn_input(&c, big, 2, T0, &used), -IW_E_MPA_RTR);
		CHECK_EQ(used, 2);
	}
	/* a CRC error in the RTR (CRC negotiated) */
	FOR_MODES(mode, r)
	{
		struct iw_conn c;

		p2p_responder(&c, IW_CONN_RTR_WRITE, IW_CONN_CRC_REQUIRED);
		memset(&f, 0, sizeof(f));
		iw_hdr_init(&f.hdr, IW_OP_WRITE);
		f.hdr.stag = 1;
		n = iw_fpdu_encode(&f, true, buf, sizeof(buf));
		REQUIRE(n == 20);
		buf[18] ^= 0x01;
		CHECK_EQ(feed(&c, buf, (size_t)n, mode, T0, NULL), -IW_E_CRC);
		buf[18] ^= 0x01;
		p2p_responder(&c, IW_CONN_RTR_WRITE, IW_CONN_CRC_REQUIRED);
		CHECK_EQ(feed(&c, buf, (size_t)n, mode, T0, NULL), 0);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_ESTABLISHED);
	}
	/* a nonzero Read RTR */
	{
		struct iw_conn c;

		p2p_responder(&c, IW_CONN_RTR_READ, IW_CONN_CRC_PEER);
		memset(&f, 0, sizeof(f));
		iw_hdr_init(&f.hdr, IW_OP_READ_REQ);
		f.hdr.msn = 1;
		f.hdr.rreq.size = 4096;
		n = iw_fpdu_encode(&f, false, buf, sizeof(buf));
		REQUIRE(n > 0);
		CHECK_EQ(feed(&c, buf, (size_t)n, SEG_WHOLE, T0, NULL), -IW_E_MPA_RTR);
	}
	/* no RTR at all: timeout counted from the accept */
	{
		struct iw_conn c;

		p2p_responder(&c, IW_CONN_RTR_WRITE, IW_CONN_CRC_PEER);
		CHECK_EQ(iw_conn_deadline(&c), T0 + NS + IW_CONN_REQ_TIMEOUT_NS);
		CHECK_EQ(iw_conn_tick(&c, T0 + NS + IW_CONN_REQ_TIMEOUT_NS - 1), 0);
		CHECK_EQ(iw_conn_tick(&c, T0 + NS + IW_CONN_REQ_TIMEOUT_NS), -ETIMEDOUT);
	}
}

static void test_timeouts(void)
{
	struct iw_conn_cfg rc = resp_cfg(), ic = {.role = IW_CONN_INITIATOR};
	struct iw_mpa_v2 v2 = {.ird = 1, .ord = 1};
	uint8_t frame[IW_MPA_FRAME_MAX];
	size_t n = make_frame(frame, IW_MPA_REQ, 2, false, false, false, &v2, NULL, 0), used;
	struct iw_conn c;

	/* defaults: siw's 5 s (responder) and 10 s (initiator) */
	REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
	CHECK_EQ(iw_conn_deadline(&c), T0 + 5 * NS);
	REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
	CHECK_EQ(iw_conn_deadline(&c), T0 + 10 * NS);

	/* silent peer, both roles, configured 3 s */
	rc.timeout_ns = ic.timeout_ns = 3 * NS;
	for (int role = 0; role < 2; role++) {
		REQUIRE(iw_conn_init(&c, role ? &ic : &rc, T0) == 0);
		CHECK_EQ(iw_conn_deadline(&c), T0 + 3 * NS);
		CHECK_EQ(iw_conn_tick(&c, T0 + 3 * NS - 1), 0);
		CHECK_EQ(iw_conn_state(&c), role ? IW_CONN_AWAIT_REP : IW_CONN_AWAIT_REQ);
		CHECK_EQ(iw_conn_tick(&c, T0 + 3 * NS), -ETIMEDOUT);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_FAILED);
		CHECK_EQ(iw_conn_error(&c), -ETIMEDOUT);
		CHECK_EQ(iw_conn_deadline(&c), IW_CONN_NO_DEADLINE);
		CHECK_EQ(iw_conn_input(&c, frame, n, T0 + 4 * NS, &used), -ETIMEDOUT);
		CHECK_EQ(used, 0);
	}
	/* partial frame, then silence: the deadline does not move with the bytes */
	FOR_MODES(mode, r)
	{
		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		CHECK_EQ(feed(&c, frame, n - 1, mode, T0 + NS, &used), 0);
		CHECK_EQ(used, n - 1);
		CHECK_EQ(iw_conn_deadline(&c), T0 + 3 * NS);
		CHECK_EQ(iw_conn_tick(&c, T0 + 2 * NS), 0);
		CHECK_EQ(iw_conn_tick(&c, T0 + 3 * NS), -ETIMEDOUT);
	}
	/* bytes that arrive late: processed first; a frame still incomplete then fails */
	REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
	CHECK_EQ(iw_conn_input(&c, frame, n, T0 + 3 * NS, &used), 0);
	CHECK_EQ(iw_conn_state(&c), IW_CONN_REQ_RCVD);
	CHECK_EQ(iw_conn_deadline(&c), IW_CONN_NO_DEADLINE); /* the application decides */
	CHECK_EQ(iw_conn_tick(&c, T0 + 100 * NS), 0);
	REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
	CHECK_EQ(iw_conn_input(&c, frame, n - 1, T0 + 3 * NS, &used), -ETIMEDOUT);
	/* the transport dies during the handshake */
	REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
	iw_conn_llp_error(&c, -ECONNRESET);
	CHECK_EQ(iw_conn_state(&c), IW_CONN_FAILED);
	CHECK_EQ(iw_conn_error(&c), -ECONNRESET);
	iw_conn_llp_error(&c, -ESHUTDOWN); /* the first reason stays */
	CHECK_EQ(iw_conn_error(&c), -ECONNRESET);
}

static void test_garbage(void)
{
	static const uint8_t http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	struct iw_conn_cfg rc = resp_cfg(), ic = {.role = IW_CONN_INITIATOR};
	struct iw_conn c;
	const uint8_t *d;
	size_t used;

	/* the first byte already tells */
	REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
	CHECK_EQ(iw_conn_input(&c, http, 1, T0, &used), -IW_E_MPA_KEY);
	CHECK_EQ(iw_conn_state(&c), IW_CONN_FAILED);
	CHECK_EQ(iw_conn_tx_peek(&c, &d), 0); /* no Reply to a non-MPA peer */
	FOR_MODES(mode, r)
	{
		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		CHECK_EQ(feed(&c, http, sizeof(http) - 1, mode, T0, NULL), -IW_E_MPA_KEY);
	}
	/* "MPA ID Re" then garbage: refused at the first wrong byte */
	{
		static const uint8_t almost[] = "MPA ID Rex Frame....";
		size_t k;

		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		for (k = 0; k < sizeof(almost) - 1; k++) {
			if (iw_conn_input(&c, almost + k, 1, T0, &used) != 0)
				break;
		}
		CHECK_EQ(k, 9);
		CHECK_EQ(iw_conn_error(&c), -IW_E_MPA_KEY);
	}
	/* a Request key where the initiator expects a Reply: Terminate LLP/MPA/4 (siw) */
	{
		struct iw_mpa_v2 v2 = {.ird = 1, .ord = 1};
		uint8_t frame[IW_MPA_FRAME_MAX];
		size_t n = make_frame(frame, IW_MPA_REQ, 2, false, false, false, &v2, NULL, 0);
		struct iw_fpdu f;

		REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
		iw_conn_tx_advance(&c, iw_conn_tx_peek(&c, &d));
		CHECK_EQ(iw_conn_input(&c, frame, n, T0, &used), -IW_E_MPA_KEY);
		n = iw_conn_tx_peek(&c, &d);
		REQUIRE(n > 0);
		CHECK_EQ(iw_fpdu_decode(d, n, false, 0, &f), (int)n);
		CHECK_EQ(f.hdr.opcode, IW_OP_TERMINATE);
		CHECK_EQ(f.hdr.msn, 1);
		CHECK_EQ(f.hdr.term.layer, IW_LAYER_LLP);
		CHECK_EQ(f.hdr.term.ecode, 4);
	}
	/* bytes after the Request, before our Reply: the peer broke RFC 5044 (siw: EPROTO) */
	FOR_MODES(mode, r)
	{
		struct iw_conn i;
		uint8_t two[IW_MPA_FRAME_MAX + 8];
		size_t n;

		ic.timeout_ns = 0;
		REQUIRE(iw_conn_init(&i, &ic, T0) == 0);
		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		n = iw_conn_tx_peek(&i, &d);
		memcpy(two, d, n);
		memcpy(two + n, "FPDU", 4);
		size_t off = 0;
		int rc2 = 0;

		while (off < n + 4 && rc2 == 0) {
			size_t chunk = n + 4 - off;

			if (mode == SEG_BYTE)
				chunk = 1;
			else if (mode == SEG_RANDOM)
				chunk = 1 + rnd() % chunk;
			rc2 = iw_conn_input(&c, two + off, chunk, T0, &used);
			off += chunk;
		}
		CHECK_EQ(rc2, -EPROTO);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_FAILED);
	}
}

/* ---- The captured siw handshakes ---- */

static const char *const capfiles[] = {
    "siw_rping.pcap",
    "siw_rping_crc.pcap",
    "ns_mpa_probe_vs_siw.pcap",
    "siw_send_lat_rdmacm.pcap",
    "siw_read_lat_rdmacm.pcap",
    "siw_write_lat_rdmacm.pcap",
    "siw_write_bw_rdmacm_crc.pcap",
    "iwarp_vectors.pcap",
};

static int captured_conns;

static void check_capture_conn(const struct tcps_conn *tc)
{
	const struct tcps_dir *up = &tc->dir[0], *down = &tc->dir[1];
	struct iw_mpa req, rep;
	int req_len = iw_mpa_decode(up->data, up->len, IW_MPA_REQ, &req);
	int rep_len = iw_mpa_decode(down->data, down->len, IW_MPA_REP, &rep);

	REQUIRE(req_len > 0 && rep_len > 0);
	captured_conns++;
	/* The captured Request, fed to our responder (every segmentation), and our Reply is the
	 * captured one byte for byte; the FPDUs after it are not consumed. */
	FOR_MODES(mode, r)
	{
		struct iw_conn_cfg rc = {.role = IW_CONN_RESPONDER};
		struct iw_conn_info ri;
		struct iw_conn c;
		const uint8_t *d;
		size_t used;

		REQUIRE(iw_conn_init(&c, &rc, T0) == 0);
		CHECK_EQ(feed(&c, up->data, (size_t)req_len, mode, T0, &used), 0);
		CHECK_EQ(used, (size_t)req_len);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_REQ_RCVD);
		iw_conn_info(&c, &ri);
		CHECK_EQ(ri.peer_crc, req.c);
		CHECK_EQ(ri.peer_pd_len, req.pd_len);
		CHECK_EQ(iw_conn_accept(&c, iw_mpa_has_v2(&rep) ? rep.v2.ird : 0,
					iw_mpa_has_v2(&rep) ? rep.v2.ord : 0, rep.pd, rep.pd_len,
					T0),
			 0);
		CHECK_EQ(iw_conn_tx_peek(&c, &d), (size_t)rep_len);
		if (d)
			CHECK_MEM(d, down->data, (size_t)rep_len);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_ESTABLISHED);
		iw_conn_info(&c, &ri);
		CHECK_EQ(ri.crc, rep.c);
		CHECK_EQ(ri.rev, rep.rev);
		CHECK_EQ(
		    iw_conn_input(&c, up->data + req_len, up->len - (size_t)req_len, T0, &used), 0);
		CHECK_EQ(used, 0);
	}
	/* Our initiator, configured as siw was, sends the captured Request; the captured Reply
	 * (and the FPDUs behind it in the same stream) establishes it, consuming the Reply only. */
	FOR_MODES(mode, r)
	{
		struct iw_conn_cfg ic = {.role = IW_CONN_INITIATOR,
					 .rev = req.rev,
					 .crc = req.c ? IW_CONN_CRC_REQUIRED : IW_CONN_CRC_PEER,
					 .ird = iw_mpa_has_v2(&req) ? req.v2.ird : 0,
					 .ord = iw_mpa_has_v2(&req) ? req.v2.ord : 0,
					 .pd = req.pd,
					 .pd_len = req.pd_len};
		struct iw_conn_info ii;
		struct iw_conn c;
		const uint8_t *d;
		size_t used;

		REQUIRE(iw_conn_init(&c, &ic, T0) == 0);
		CHECK_EQ(iw_conn_tx_peek(&c, &d), (size_t)req_len);
		if (d)
			CHECK_MEM(d, up->data, (size_t)req_len);
		iw_conn_tx_advance(&c, (size_t)req_len);
		CHECK_EQ(feed(&c, down->data, down->len, mode, T0, &used), 0);
		CHECK_EQ(used, (size_t)rep_len);
		CHECK_EQ(iw_conn_state(&c), IW_CONN_ESTABLISHED);
		CHECK(iw_conn_tx_ready(&c));
		iw_conn_info(&c, &ii);
		CHECK_EQ(ii.crc, rep.c);
		CHECK_EQ(ii.rev, rep.rev);
		CHECK_EQ(ii.rx_consumed, (uint64_t)rep_len);
		if (iw_mpa_has_v2(&rep)) {
			CHECK_EQ(ii.ird, rep.v2.ord);
			CHECK_EQ(ii.ord, rep.v2.ird);
		}
	}
}

static void test_captures(void)
{
	for (size_t k = 0; k < sizeof(capfiles) / sizeof(capfiles[0]); k++) {
		char path[512];
		struct tcps t;

		memset(&t, 0, sizeof(t));
		snprintf(path, sizeof(path), "%s/%s", SOFTRDMA_TEST_DATA, capfiles[k]);
		REQUIRE(tcps_load(&t, path) == 0);
		for (int i = 0; i < t.n; i++)
			if (t.conn[i].dir[0].len >= IW_MPA_HDR_LEN && t.conn[i].dir[1].len)
				check_capture_conn(&t.conn[i]);
		tcps_free(&t);
	}
	CHECK(captured_conns >= 12);
	fprintf(stderr, "captured MPA handshakes replayed: %d\n", captured_conns);
}

/* ---- API odds and ends ---- */

static void test_api(void)
{
	struct iw_conn_cfg bad = {.role = 3};
	struct iw_conn c;
	size_t used;

	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.role = IW_CONN_INITIATOR;
	bad.rev = 3;
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.rev = 1;
	bad.p2p = true; /* P2P needs revision 2 */
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.p2p = false;
	bad.ird = 129; /* above the default max */
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.ird = 0;
	bad.pd_len = 1;
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.pd_len = 0;
	bad.crc = 9;
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.crc = 0;
	bad.rtr_types = 8;
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	bad.rtr_types = 0;
	bad.max_ord = 0x4000;
	CHECK_EQ(iw_conn_init(&c, &bad, 0), -EINVAL);
	CHECK_EQ(iw_conn_init(NULL, &bad, 0), -EINVAL);
	bad.max_ord = 0;
	REQUIRE(iw_conn_init(&c, &bad, 0) == 0);
	CHECK_EQ(iw_conn_input(&c, NULL, 1, 0, &used), -EINVAL);
	CHECK_EQ(iw_conn_input(&c, NULL, 0, 0, &used), 0);
	CHECK_EQ(iw_conn_reject(&c, NULL, 0), -EINVAL); /* initiator */
	for (int s = 0; s < IW_CONN_NSTATES; s++)
		CHECK(strcmp(iw_conn_state_name((enum iw_conn_state)s), "?") != 0);
	CHECK(strcmp(iw_conn_state_name(IW_CONN_AWAIT_RTR), "AWAIT_RTR") == 0);
	CHECK(strcmp(iw_conn_state_name(IW_CONN_NSTATES), "?") == 0);
	CHECK(strcmp(iw_conn_err_name(-ETIMEDOUT), "ETIMEDOUT") == 0);
	CHECK(strcmp(iw_conn_err_name(-IW_E_MPA_KEY), "MPA_KEY") == 0);
	CHECK(strcmp(iw_conn_err_name(0), "OK") == 0);
	/* copyable: no pointers inside */
	{
		struct scen s = dflt_scen();
		struct iw_conn i, r, r2;
		struct iw_conn_info ri;
		const uint8_t *d;
		static const uint8_t pd[] = "copy me";

		s.i.pd = pd;
		s.i.pd_len = sizeof(pd);
		REQUIRE(iw_conn_init(&i, &s.i, 0) == 0);
		REQUIRE(iw_conn_init(&r, &s.r, 0) == 0);
		size_t n = iw_conn_tx_peek(&i, &d);
		CHECK_EQ(iw_conn_input(&r, d, n, 0, &used), 0);
		r2 = r;
		memset(&r, 0xee, sizeof(r));
		iw_conn_info(&r2, &ri);
		CHECK_EQ(ri.peer_pd_len, sizeof(pd));
		if (ri.peer_pd)
			CHECK_MEM(ri.peer_pd, pd, sizeof(pd));
	}
}

int main(void)
{
	seed = check_seed(20240607);
	rng = seed | 1;
	test_api();
	test_rev2_default();
	test_fallback();
	test_crc();
	test_markers();
	test_bad_rev();
	test_private_data();
	test_app_reject();
	test_ird_ord();
	test_p2p();
	test_bad_rtr();
	test_timeouts();
	test_garbage();
	test_captures();
	fprintf(stderr, "segmentations: %s, %s, %s x %d\n", seg_names[0], seg_names[1],
		seg_names[2], RANDOM_RUNS);
	return check_exit();
}
