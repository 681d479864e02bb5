// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc src/util/crc.c src/wire/iwarp/*.c src/engine/iw_conn.c fuzz/fuzz_iw_conn.c -o fuzz_iw_conn -pthread
// Long run: mkdir -p corpus_iw_conn && ./fuzz_iw_conn -max_total_time=3600 -max_len=2048 -timeout=10 -rss_limit_mb=2560 corpus_iw_conn
//   (or every target: FUZZ_SECONDS=3600 bash tests/lint/test_fuzz_smoke.sh)
// clang-format on

/* libFuzzer target for the MPA handshake state machine (engine/iw_conn.h), both roles.
 *
 * Input layout (missing bytes read as 0):
 *   byte 0      bit 0: pair mode (else single mode); bit 1: raw configuration (single mode:
 *               values outside the documented ranges, so iw_conn_init may refuse them);
 *               bit 2: single mode role (0 initiator, 1 responder)
 *   13 bytes    configuration (pair mode: the initiator's, then 13 more for the responder):
 *     +0   bits 0-1 Rev (0/1/2; 3 is 2 unless raw), bits 2-3 CRC policy, bit 4 p2p,
 *          bit 5 strict_ird, bit 6 no_rev1_fallback, bit 7 (raw) which invalid role
 *     +1   bits 0-2 rtr_types (raw: bits 0-3), bit 4 the responder's application rejects,
 *          bit 5 (raw) pd NULL, bit 6 (raw) invalid role, bit 7 (raw) CRC policy + 4
 *     +2,3 IRD, ORD (0..247, 248..255 -> 0x3ff8..0x3fff; clamped to the maxima unless raw)
 *     +4,5 max_ird, max_ord (0 = default 128, same map; raw: 255 -> 0x4000)
 *     +6,7 initiator's private data length (big-endian, reduced to the revision's limit
 *          unless raw); its bytes are a pattern
 *     +8,9 the responder's application: IRD, ORD for iw_conn_accept (same map)
 *     +10,11 its private data length (big-endian, mod 530; pattern bytes)
 *     +12  timeout: 0 default, else n ms
 *   single mode:
 *     1 byte    time step per chunk in the timed run, in 1/64 of the timeout
 *     1 byte    k (low 4 bits), then k chunk sizes (1..256, used cyclically; k = 0: 256)
 *     the rest  the peer's byte stream
 *   pair mode:
 *     4 bytes   corruption: bit 0 direction (0 initiator -> responder), bit 1 on; stream
 *               offset (big-endian 16 bits, mod 1024); xor mask (0 -> 0x01)
 *     1 byte    k, then k chunk sizes, as above (delivery and partial-send sizes)
 *
 * Single mode: one machine (iw_conn_init at time T0) reads the peer's stream; a responder's
 * application accepts or rejects in REQ_RCVD (falling back to a reject, and to one without
 * private data, when the call is refused). The stream is cut after the first complete
 * Request as iw_mpa_decode sees it, because the application acts between two iw_conn_input
 * calls (a Request with more bytes in the same call fails with -EPROTO: checked separately).
 * Runs: the stream whole, in the input's chunks (with partial iw_conn_tx_advance), one byte at
 * a time, a timed run (the clock advances per chunk; lockstep with an untimed shadow), and the
 * whole stream in one call without the cut.
 * Pair mode: an initiator and a responder talk through an in-memory pipe in the input's chunks
 * (partial sends too), optionally with one byte corrupted in flight; uncorrupted, again with
 * whole deliveries.
 *
 * Oracles (abort() on violation; the failing line is printed):
 * - no crash or sanitizer report (every chunk is an exact-size heap copy); every call returns a
 *   documented value (init/accept/reject: one of the errors whose condition holds, 0 iff none;
 *   input/tick: 0 or iw_conn_error(); errors in the documented set for the role and state);
 *   refused calls change nothing (byte-compared); states move only along the life cycle;
 * - input consumes exactly the handshake: *used < len only when ESTABLISHED, REJECTED or
 *   FAILED; once ESTABLISHED, REJECTED or FAILED an input consumes nothing and changes
 *   nothing; info.rx_consumed = the sum of *used; info.tx_queued = every byte emitted;
 * - split invariance: whole, chunked and byte-at-a-time runs end in the same state, error,
 *   iw_conn_info, private data, emitted bytes and *used total (exception below);
 * - the final state agrees with the frames the machine consumed, decoded independently with
 *   iw_mpa_decode / iw_fpdu_decode (the documented rules: revisions and fallback, the CRC
 *   policies, IRD/ORD negotiation and its limits, RTR choice, private data, which frame is
 *   rejected and why); ESTABLISHED: IRD/ORD within the maxima, CRC consistent with the policy
 *   and the peer's C, P2P only in revision 2 with one offered RTR type, MSN / ORQ hints;
 * - every byte emitted decodes with the wire decoders as exactly: the Request (fields as
 *   configured) then the RTR FPDU (siw's exact frame) or the documented Terminate; or a Reply
 *   matching iw_conn_info / a Reject (fields as documented per reason), then the zero-length
 *   Read Response to a READ RTR or the Terminate for a bad RTR frame; nothing else;
 * - time: deadline() is set exactly while waiting (init/accept time + timeout); tick before
 *   it changes nothing, at it fails the handshake with -ETIMEDOUT; an input at or past the
 *   deadline with the frame incomplete too; the timed run equals its shadow until it times
 *   out, and it times out only while waiting and at or past the deadline; llp_error fails
 *   only a handshake in progress;
 * - pair mode, uncorrupted: both ESTABLISHED with mirrored values (rev, CRC, P2P, RTR, IRD =
 *   peer's ORD, announced values, private data, byte accounting, the QP bytes after the
 *   handshake), or the documented outcome of incompatible settings (CRC strict conflicts:
 *   both REJECTED; rev-1 fallback refused, CRC refused by an OFF_STRICT initiator, strict IRD,
 *   no matching RTR: the initiator FAILED, the responder established or aborted by the
 *   Terminate, or waiting for an RTR that never comes); the same with whole deliveries.
 *   Corrupted: every per-machine oracle above, and the exchange settles.
 * Exception to split invariance: a failed frame's *used total may differ with the split when
 * the failure is -IW_E_MPA_KEY (the key is checked per byte arriving, so one byte at a time
 * stops at the first wrong byte, a whole buffer at the 20-byte header) or -IW_E_MPA_REV at the
 * initiator (Rev is byte 17). Both are FAILED, with the same bytes emitted. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/iw_conn.h"
#include "wire/iwarp/iwarp.h"

#define T0	   (1000 * IW_CONN_NS_PER_S) /* virtual start time */
#define INPUT_MAX  2048
#define LOG_MAX	   (2 * INPUT_MAX)
#define APP_PD_MOD 530 /* application private data lengths 0..529: around both limits */

#define must(cond) ((cond) ? (void)0 : die(__LINE__, #cond))

static void die(int line, const char *what)
{
	fprintf(stderr, "fuzz_iw_conn.c:%d: oracle failed: %s\n", line, what);
	abort();
}

/* ---- Input reader ---- */

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct rd *r)
{
	uint8_t v = 0;

	if (r->n) {
		v = *r->p++;
		r->n--;
	}
	return v;
}

static uint16_t u16(struct rd *r)
{
	uint16_t hi = u8(r);

	return (uint16_t)(hi << 8 | u8(r));
}

/* ---- Protocol facts, from the header's documentation ---- */

#define S(x) (1u << IW_CONN_##x)

static bool is_waiting(unsigned st)
{
	return st == IW_CONN_AWAIT_REQ || st == IW_CONN_AWAIT_REP || st == IW_CONN_AWAIT_RTR;
}

static bool is_ended(unsigned st)
{
	return st == IW_CONN_REJECTED || st == IW_CONN_FAILED;
}

static bool crc_wanted(uint8_t policy)
{
	return policy == IW_CONN_CRC_REQUIRED || policy == IW_CONN_CRC_REQUIRED_STRICT;
}

static uint16_t min16(uint16_t a, uint16_t b)
{
	return a < b ? a : b;
}

static uint16_t max16(uint16_t a, uint16_t b)
{
	return a > b ? a : b;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint8_t rtr_bits(const struct iw_mpa_v2 *v)
{
	return (uint8_t)((v->rtr_write ? IW_CONN_RTR_WRITE : 0) |
			 (v->rtr_read ? IW_CONN_RTR_READ : 0) |
			 (v->rtr_send ? IW_CONN_RTR_SEND : 0));
}

/* Write, then Read, then Send. */
static uint8_t rtr_pick(uint8_t set)
{
	if (set & IW_CONN_RTR_WRITE)
		return IW_CONN_RTR_WRITE;
	if (set & IW_CONN_RTR_READ)
		return IW_CONN_RTR_READ;
	if (set & IW_CONN_RTR_SEND)
		return IW_CONN_RTR_SEND;
	return IW_CONN_RTR_NONE;
}

static bool one_rtr(uint8_t r)
{
	return r == IW_CONN_RTR_WRITE || r == IW_CONN_RTR_READ || r == IW_CONN_RTR_SEND;
}

/* Errors iw_conn_init / accept / reject may return, as a bit set. */
enum { E_INVAL = 1, E_MSGSIZE = 2, E_NOMEM = 4 };

static unsigned errbit(int rc)
{
	switch (rc) {
	case -EINVAL:
		return E_INVAL;
	case -EMSGSIZE:
		return E_MSGSIZE;
	case -ENOMEM:
		return E_NOMEM;
	default:
		return 0;
	}
}

/* rc is one of the errors whose condition holds, and 0 iff none does. */
static void must_rc(int rc, unsigned possible)
{
	if (rc == 0)
		must(possible == 0);
	else
		must((errbit(rc) & possible) != 0);
}

/* The documented iw_conn_error() values per role and end state. */
static bool err_documented(uint8_t role, unsigned st, int err)
{
	if (st == IW_CONN_REJECTED) {
		if (err == -ECONNREFUSED)
			return true;
		return role == IW_CONN_RESPONDER &&
		       (err == -IW_E_MPA_MARKERS || err == -IW_E_MPA_REV || err == -IW_E_MPA_V2 ||
			err == -ENOPROTOOPT);
	}
	if (st != IW_CONN_FAILED)
		return err == 0;
	if (err == -ETIMEDOUT || err == -IW_E_MPA_KEY || err == -IW_E_MPA_PD_LEN)
		return true;
	if (role == IW_CONN_INITIATOR)
		return err == -IW_E_MPA_REV || err == -IW_E_MPA_MARKERS || err == -IW_E_MPA_V2 ||
		       err == -IW_E_MPA_IRD || err == -IW_E_MPA_RTR || err == -ENOPROTOOPT;
	/* responder: extra bytes, a Terminate instead of the RTR, or a bad RTR frame */
	return err == -EPROTO || err == -ECONNABORTED || err == -IW_E_MPA_RTR ||
	       (iw_is_err(err) && err > -IW_E_MPA_KEY);
}

/* ---- Configuration ---- */

struct kcfg {
	struct iw_conn_cfg cfg;
	uint8_t pd[1024];
	/* the responder's application in REQ_RCVD */
	bool app_reject;
	uint16_t app_ird, app_ord, app_pd_len;
	uint8_t app_pd[1024];
	/* effective values (defaults resolved) */
	uint8_t rev;
	uint16_t max_ird, max_ord;
	uint16_t ord_sent; /* the Request's ORD: P2P forces at least 1 */
	uint8_t rtr_types;
	uint64_t timeout;
};

static uint16_t map_cnt(uint8_t v)
{
	return v < 248 ? v : (uint16_t)(IW_MPA_IRD_ORD_MAX - (255 - v));
}

static uint16_t map_max(uint8_t v, bool raw)
{
	return raw && v == 255 ? IW_MPA_IRD_ORD_MAX + 1 : map_cnt(v);
}

static void read_cfg(struct rd *r, struct kcfg *k, uint8_t role, bool raw)
{
	uint8_t b0 = u8(r), b1 = u8(r), ird = u8(r), ord = u8(r), mi = u8(r), mo = u8(r);
	uint16_t pdl = u16(r);
	uint8_t aird = u8(r), aord = u8(r);
	uint16_t apdl = u16(r);
	uint8_t tmo = u8(r);
	struct iw_conn_cfg *c = &k->cfg;

	memset(c, 0, sizeof(*c));
	c->role = role;
	if (raw && (b1 & 0x40))
		c->role = (b0 & 0x80) ? 0 : 3;
	c->rev = b0 & 3;
	if (!raw && c->rev == 3)
		c->rev = 2;
	c->crc = (b0 >> 2) & 3;
	if (raw && (b1 & 0x80))
		c->crc |= 4;
	c->p2p = b0 & 0x10;
	c->strict_ird = b0 & 0x20;
	c->no_rev1_fallback = b0 & 0x40;
	c->rtr_types = b1 & (raw ? 0x0f : 0x07);
	c->max_ird = map_max(mi, raw);
	c->max_ord = map_max(mo, raw);
	k->rev = c->rev ? c->rev : 2;
	k->max_ird = c->max_ird ? c->max_ird : IW_CONN_IRD_ORD_DEFAULT_MAX;
	k->max_ord = c->max_ord ? c->max_ord : IW_CONN_IRD_ORD_DEFAULT_MAX;
	c->ird = map_cnt(ird);
	c->ord = map_cnt(ord);
	if (!raw) {
		c->ird = min16(c->ird, k->max_ird);
		c->ord = min16(c->ord, k->max_ord);
		if (k->rev != 2)
			c->p2p = false;
	}
	k->ord_sent = c->p2p && c->ord == 0 ? 1 : c->ord;
	k->rtr_types = c->rtr_types ? c->rtr_types : IW_CONN_RTR_WRITE | IW_CONN_RTR_READ;
	for (size_t i = 0; i < sizeof(k->pd); i++)
		k->pd[i] = (uint8_t)(i * 31 + b1);
	if (raw)
		c->pd_len = pdl & 0x3ff;
	else if (role == IW_CONN_INITIATOR)
		c->pd_len = pdl % ((k->rev == 2 ? IW_CONN_PD_MAX_V2 : IW_CONN_PD_MAX_V1) + 1);
	c->pd = raw && (b1 & 0x20) ? NULL : k->pd;
	c->timeout_ns = tmo ? tmo * 1000000ull : 0;
	k->timeout = c->timeout_ns		    ? c->timeout_ns
		     : c->role == IW_CONN_RESPONDER ? IW_CONN_REQ_TIMEOUT_NS
						    : IW_CONN_REP_TIMEOUT_NS;
	k->app_reject = b1 & 0x10;
	k->app_ird = map_cnt(aird);
	k->app_ord = map_cnt(aord);
	k->app_pd_len = apdl % APP_PD_MOD;
	for (size_t i = 0; i < sizeof(k->app_pd); i++)
		k->app_pd[i] = (uint8_t)(i * 7 + aird);
}

/* iw_conn_init's documented refusals for cfg. */
static unsigned init_errors(const struct iw_conn_cfg *c)
{
	uint8_t rev = c->rev ? c->rev : 2;
	uint16_t mi = c->max_ird ? c->max_ird : IW_CONN_IRD_ORD_DEFAULT_MAX;
	uint16_t mo = c->max_ord ? c->max_ord : IW_CONN_IRD_ORD_DEFAULT_MAX;
	unsigned e = 0;

	if ((!c->pd && c->pd_len) || (c->role != IW_CONN_INITIATOR && c->role != IW_CONN_RESPONDER))
		e |= E_INVAL;
	if (c->crc > IW_CONN_CRC_OFF_STRICT || c->rev > 2 || (c->rtr_types & ~IW_CONN_RTR_ALL))
		e |= E_INVAL;
	if (mi > IW_MPA_IRD_ORD_MAX || mo > IW_MPA_IRD_ORD_MAX)
		e |= E_INVAL;
	if (c->role == IW_CONN_INITIATOR) {
		if (c->ird > mi || c->ord > mo || (c->p2p && rev != 2))
			e |= E_INVAL;
		if (c->pd_len > (rev == 2 ? IW_CONN_PD_MAX_V2 : IW_CONN_PD_MAX_V1))
			e |= E_MSGSIZE;
	}
	return e;
}

/* ---- One machine and everything it saw ---- */

struct side {
	struct iw_conn c;
	const struct kcfg *k;
	uint8_t rx[LOG_MAX]; /* the bytes the machine consumed (the handshake) */
	size_t rx_len;
	uint8_t qp[LOG_MAX]; /* bytes after the handshake: the QP's stream */
	size_t qp_len;
	uint8_t tx[LOG_MAX]; /* every byte the machine emitted, in order */
	size_t tx_len;
	uint64_t used; /* sum of *used */
	bool app_done, app_rejected;
	const uint8_t *rep_pd; /* the private data our application's Reply / Reject carries */
	uint16_t rep_pd_len;
};

static struct iw_conn snap; /* a byte copy for "nothing changed" checks */

static void take_snap(const struct iw_conn *c)
{
	memcpy(&snap, c, sizeof(snap));
}

static bool unchanged(const struct iw_conn *c)
{
	return memcmp(&snap, c, sizeof(snap)) == 0;
}

static void append(uint8_t *log, size_t *len, const uint8_t *p, size_t n)
{
	must(*len + n <= LOG_MAX);
	if (n)
		memcpy(log + *len, p, n);
	*len += n;
}

static void check_role_state(const struct side *s)
{
	unsigned st = iw_conn_state(&s->c);

	must(st < IW_CONN_NSTATES);
	if (s->k->cfg.role == IW_CONN_INITIATOR)
		must(((S(AWAIT_REP) | S(ESTABLISHED) | S(REJECTED) | S(FAILED)) >> st) & 1);
	else
		must(st != IW_CONN_AWAIT_REP);
	must(err_documented(s->k->cfg.role, st, iw_conn_error(&s->c)));
}

static bool side_init(struct side *s, const struct kcfg *k, uint64_t now)
{
	unsigned possible = init_errors(&k->cfg);
	struct iw_conn_info in;
	const uint8_t *d;
	size_t used = 7;
	int rc;

	s->k = k;
	s->rx_len = s->qp_len = s->tx_len = 0;
	s->used = 0;
	s->app_done = s->app_rejected = false;
	s->rep_pd = NULL;
	s->rep_pd_len = 0;
	memset(&s->c, 0xa5, sizeof(s->c));
	take_snap(&s->c);
	rc = iw_conn_init(&s->c, &k->cfg, now);
	must_rc(rc, possible);
	if (rc) {
		must(unchanged(&s->c)); /* touches *c only on success */
		return false;
	}
	check_role_state(s);
	must(iw_conn_state(&s->c) ==
	     (k->cfg.role == IW_CONN_INITIATOR ? IW_CONN_AWAIT_REP : IW_CONN_AWAIT_REQ));
	must(iw_conn_error(&s->c) == 0);
	must(iw_conn_deadline(&s->c) == now + k->timeout);
	must(!iw_conn_rx_done(&s->c) && !iw_conn_tx_ready(&s->c));
	iw_conn_info(&s->c, &in);
	must(in.state == iw_conn_state(&s->c) && in.role == k->cfg.role && in.err == 0);
	must(in.rx_consumed == 0 && in.tx_queued == iw_conn_tx_peek(&s->c, &d));
	must((k->cfg.role == IW_CONN_INITIATOR) == (in.tx_queued > 0));
	/* misuse is refused and changes nothing */
	take_snap(&s->c);
	must(iw_conn_input(&s->c, NULL, 1, now, &used) == -EINVAL && unchanged(&s->c));
	must(iw_conn_input(&s->c, k->pd, 0, now, NULL) == -EINVAL && unchanged(&s->c));
	must(iw_conn_input(NULL, k->pd, 0, now, &used) == -EINVAL);
	return true;
}

/* The life cycle, across one iw_conn_input call. */
static const unsigned call_next[IW_CONN_NSTATES] = {
    [IW_CONN_AWAIT_REQ] = S(AWAIT_REQ) | S(REQ_RCVD) | S(REJECTED) | S(FAILED),
    [IW_CONN_REQ_RCVD] = S(REQ_RCVD) | S(FAILED),
    [IW_CONN_AWAIT_REP] = S(AWAIT_REP) | S(ESTABLISHED) | S(REJECTED) | S(FAILED),
    [IW_CONN_AWAIT_RTR] = S(AWAIT_RTR) | S(ESTABLISHED) | S(FAILED),
    [IW_CONN_ESTABLISHED] = S(ESTABLISHED),
    [IW_CONN_REJECTED] = S(REJECTED),
    [IW_CONN_FAILED] = S(FAILED),
};

/* One iw_conn_input call on an exact-size heap copy of buf[0..len). */
static int side_input(struct side *s, const uint8_t *buf, size_t len, uint64_t now)
{
	unsigned st0 = iw_conn_state(&s->c), st;
	uint8_t *copy = malloc(len ? len : 1);
	size_t used = (size_t)-1;
	struct iw_conn_info in;
	uint64_t consumed0;
	int rc;

	must(copy != NULL);
	iw_conn_info(&s->c, &in);
	consumed0 = in.rx_consumed;
	if (len)
		memcpy(copy, buf, len);
	take_snap(&s->c);
	rc = iw_conn_input(&s->c, len ? copy : NULL, len, now, &used);
	st = iw_conn_state(&s->c);
	must(used <= len);
	check_role_state(s);
	must((call_next[st0] >> st) & 1);
	if (is_ended(st0) || st0 == IW_CONN_ESTABLISHED) { /* consumes nothing, changes nothing */
		must(used == 0 && unchanged(&s->c));
		must(rc == iw_conn_error(&s->c));
	}
	if (rc == 0)
		must(!is_ended(st));
	else
		must(rc < 0 && is_ended(st) && rc == iw_conn_error(&s->c));
	/* *used stops exactly at the end of the handshake: anything left is the QP's, or the
	 * call failed */
	if (used < len)
		must(st == IW_CONN_ESTABLISHED || is_ended(st));
	iw_conn_info(&s->c, &in);
	must(in.rx_consumed == consumed0 + used);
	append(s->rx, &s->rx_len, copy, used);
	s->used += used;
	if (st == IW_CONN_ESTABLISHED)
		append(s->qp, &s->qp_len, copy + used, len - used);
	free(copy);
	return rc;
}

/* Sends up to n pending bytes (iw_conn_tx_advance by n: clamped); returns how many. */
static size_t side_flush(struct side *s, size_t n)
{
	const uint8_t *d = NULL;
	size_t have = iw_conn_tx_peek(&s->c, &d), take = n < have ? n : have, left;

	must((have == 0) == (d == NULL));
	append(s->tx, &s->tx_len, d, take);
	iw_conn_tx_advance(&s->c, n);
	left = iw_conn_tx_peek(&s->c, &d);
	must(left == have - take);
	must(iw_conn_tx_ready(&s->c) == (iw_conn_state(&s->c) == IW_CONN_ESTABLISHED && !left));
	return take;
}

static int side_tick(struct side *s, uint64_t now)
{
	unsigned st0 = iw_conn_state(&s->c);
	uint64_t d = iw_conn_deadline(&s->c);
	int rc;

	take_snap(&s->c);
	rc = iw_conn_tick(&s->c, now);
	if (is_waiting(st0) && now >= d) {
		must(rc == -ETIMEDOUT && iw_conn_state(&s->c) == IW_CONN_FAILED);
		must(iw_conn_error(&s->c) == -ETIMEDOUT);
		must(iw_conn_deadline(&s->c) == IW_CONN_NO_DEADLINE);
	} else {
		must(unchanged(&s->c));
		must(rc == iw_conn_error(&s->c));
	}
	return rc;
}

/* The documented REQ_RCVD view of the Request just received. */
static void check_req_rcvd(const struct side *s)
{
	const struct kcfg *k = s->k;
	struct iw_conn_info in;
	struct iw_mpa pf;
	const uint8_t *d;
	int dr = iw_mpa_decode(s->rx, s->rx_len, IW_MPA_REQ, &pf);
	uint8_t rev;
	bool v2;

	must(dr > 0 && (size_t)dr == s->rx_len);
	iw_conn_info(&s->c, &in);
	rev = pf.rev < k->rev ? pf.rev : k->rev;
	v2 = rev == 2 && pf.enhanced;
	must(in.state == IW_CONN_REQ_RCVD && in.err == 0);
	must(iw_conn_deadline(&s->c) == IW_CONN_NO_DEADLINE); /* REQ_RCVD has no timer */
	must(!iw_conn_rx_done(&s->c) && !iw_conn_tx_ready(&s->c));
	must(iw_conn_tx_peek(&s->c, &d) == 0);
	must(in.peer_crc == pf.c && in.crc == (pf.c || crc_wanted(k->cfg.crc)));
	must(in.rev == rev && in.enhanced == v2);
	must(in.peer_ird_ord == v2);
	if (v2) {
		must(in.peer_ird == pf.v2.ird && in.peer_ord == pf.v2.ord);
		must(in.ird == min16(pf.v2.ord, k->max_ird));
		must(in.ord == min16(pf.v2.ird, k->max_ord));
		must(in.rtr_offer == (pf.v2.p2p ? rtr_bits(&pf.v2) : 0));
	}
	must(in.peer_pd_len == pf.pd_len);
	must(!pf.pd_len || memcmp(in.peer_pd, pf.pd, pf.pd_len) == 0);
}

/* The responder's application in REQ_RCVD: accept, or reject (also when accept is refused). */
static void side_app(struct side *s, uint64_t now)
{
	const struct kcfg *k = s->k;
	struct iw_conn_info in;
	int rc;

	if (iw_conn_state(&s->c) != IW_CONN_REQ_RCVD || s->app_done)
		return;
	s->app_done = true;
	check_req_rcvd(s);
	iw_conn_info(&s->c, &in);
	take_snap(&s->c);
	must(iw_conn_accept(&s->c, 0, 0, NULL, 1, now) == -EINVAL && unchanged(&s->c));
	must(iw_conn_reject(&s->c, NULL, 1) == -EINVAL && unchanged(&s->c));
	if (!k->app_reject) {
		size_t lim = in.enhanced ? IW_CONN_PD_MAX_V2 : IW_CONN_PD_MAX_V1;
		unsigned possible = 0;

		if (k->app_ird > k->max_ird || k->app_ord > k->max_ord)
			possible |= E_INVAL;
		if (k->app_pd_len > lim)
			possible |= E_MSGSIZE;
		if (in.enhanced && k->cfg.strict_ird) { /* in.ird/ord: what the Request asks */
			if (k->app_ord > in.ord)
				possible |= E_INVAL;
			if (k->app_ird < in.ird)
				possible |= E_NOMEM;
		}
		rc = iw_conn_accept(&s->c, k->app_ird, k->app_ord, k->app_pd, k->app_pd_len, now);
		must_rc(rc, possible);
		if (rc == 0) {
			unsigned st = iw_conn_state(&s->c);

			s->rep_pd = k->app_pd;
			s->rep_pd_len = k->app_pd_len;
			must(st == IW_CONN_ESTABLISHED || st == IW_CONN_AWAIT_RTR);
			must(iw_conn_deadline(&s->c) ==
			     (st == IW_CONN_AWAIT_RTR ? now + k->timeout : IW_CONN_NO_DEADLINE));
			return;
		}
		must(unchanged(&s->c)); /* the caller may still reject */
	}
	rc = iw_conn_reject(&s->c, k->app_pd, k->app_pd_len);
	must_rc(rc, k->app_pd_len > (in.enhanced ? IW_CONN_PD_MAX_V2 : IW_CONN_PD_MAX_V1)
			? E_MSGSIZE
			: 0);
	if (rc == 0) {
		s->rep_pd = k->app_pd;
		s->rep_pd_len = k->app_pd_len;
	} else {
		must(unchanged(&s->c));
		must(iw_conn_reject(&s->c, NULL, 0) == 0);
	}
	s->app_rejected = true;
	must(iw_conn_state(&s->c) == IW_CONN_REJECTED && iw_conn_error(&s->c) == -ECONNREFUSED);
}

/* ---- Emitted bytes ---- */

static const struct iw_fpdu *fpdu_at(const uint8_t *p, size_t n, bool crc, size_t *flen)
{
	static struct iw_fpdu f;
	int r = iw_fpdu_decode(p, n, crc, 0, &f);

	must(r > 0 && (size_t)r <= n);
	*flen = (size_t)r;
	return &f;
}

/* A Terminate reporting err, as iw_err_term says. */
static size_t check_term(const uint8_t *p, size_t n, bool crc, int err)
{
	struct iw_term_code tc;
	size_t flen;
	const struct iw_fpdu *f = fpdu_at(p, n, crc, &flen);

	must(iw_err_term(err, &tc) == 0);
	must(f->hdr.opcode == IW_OP_TERMINATE && f->hdr.qn == IW_QN_TERMINATE);
	must(f->hdr.term.layer == tc.layer && f->hdr.term.etype == tc.etype &&
	     f->hdr.term.ecode == tc.ecode);
	return flen;
}

/* Exactly the RTR frame siw sends (RFC 6581; siw_qp_mpa_rts), as the header documents it. */
static bool rtr_exact(uint8_t rtr, const struct iw_fpdu *f)
{
	const struct iw_hdr *h = &f->hdr;

	if (f->payload_len || !h->last || h->ddp_rsvd || h->rdmap_rsvd)
		return false;
	switch (rtr) {
	case IW_CONN_RTR_WRITE:
		return h->opcode == IW_OP_WRITE && h->tagged && h->stag == 1 && h->to == 0;
	case IW_CONN_RTR_READ:
		return h->opcode == IW_OP_READ_REQ && h->qn == IW_QN_READ_REQ && h->msn == 1 &&
		       h->mo == 0 && h->rreq.sink_stag == 0 && h->rreq.sink_to == 0 &&
		       h->rreq.size == 0 && h->rreq.src_stag == 1 && h->rreq.src_to == 0;
	case IW_CONN_RTR_SEND:
		return h->opcode == IW_OP_SEND && h->qn == IW_QN_SEND && h->msn == 1 &&
		       h->mo == 0 && h->rsvdulp == 0;
	default:
		return false;
	}
}

/* A zero-length frame of the RTR's kind (what a responder may accept). */
static bool rtr_kind(uint8_t rtr, const struct iw_fpdu *f)
{
	switch (rtr) {
	case IW_CONN_RTR_WRITE:
		return f->hdr.opcode == IW_OP_WRITE && f->payload_len == 0;
	case IW_CONN_RTR_READ:
		return f->hdr.opcode == IW_OP_READ_REQ && f->hdr.rreq.size == 0;
	case IW_CONN_RTR_SEND:
		return f->hdr.opcode == IW_OP_SEND && f->payload_len == 0;
	default:
		return false;
	}
}

static bool same_pd(const uint8_t *a, uint16_t alen, const uint8_t *b, uint16_t blen)
{
	return alen == blen && (!alen || memcmp(a, b, alen) == 0);
}

/* Initiator: the Request as configured, then the RTR frame or a Terminate, nothing else. */
static void check_tx_initiator(const struct side *s, const struct iw_conn_info *in)
{
	const struct kcfg *k = s->k;
	const struct iw_conn_cfg *c = &k->cfg;
	struct iw_mpa f;
	int n = iw_mpa_decode(s->tx, s->tx_len, IW_MPA_REQ, &f);
	size_t off, flen;
	int err = in->err;

	must(n > 0);
	must(f.kind == IW_MPA_REQ && !f.m && !f.r && !f.gso && !f.rsvd);
	must(f.rev == k->rev && f.c == crc_wanted(c->crc) && f.enhanced == (k->rev == 2));
	if (k->rev == 2) {
		must(f.v2.ird == c->ird && f.v2.ord == k->ord_sent && f.v2.p2p == c->p2p);
		must(rtr_bits(&f.v2) == (c->p2p ? k->rtr_types : 0));
	}
	must(same_pd(f.pd, f.pd_len, c->pd, c->pd_len));
	off = (size_t)n;
	if (in->state == IW_CONN_ESTABLISHED && in->rtr != IW_CONN_RTR_NONE) {
		const struct iw_fpdu *r = fpdu_at(s->tx + off, s->tx_len - off, in->crc, &flen);

		must(rtr_exact(in->rtr, r));
		off += flen;
	} else if (in->state == IW_CONN_FAILED &&
		   (err == -IW_E_MPA_KEY || err == -IW_E_MPA_IRD || err == -IW_E_MPA_RTR)) {
		/* siw answers a bad Reply with a Terminate; CRC as the Reply said */
		off += check_term(s->tx + off, s->tx_len - off,
				  err != -IW_E_MPA_KEY && in->peer_crc, err);
	}
	must(off == s->tx_len);
}

/* Responder: nothing, a Reply matching iw_conn_info (then the Read Response to a READ RTR, or
 * the Terminate for a bad RTR frame) or a Reject as documented per reason; nothing else. */
static void check_tx_responder(const struct side *s, const struct iw_conn_info *in,
			       const struct iw_mpa *req, int dreq)
{
	struct iw_mpa f;
	int n, err = in->err;
	size_t off;

	if (s->tx_len == 0) {
		must(in->state == IW_CONN_AWAIT_REQ || in->state == IW_CONN_REQ_RCVD ||
		     (in->state == IW_CONN_FAILED &&
		      (err == -IW_E_MPA_KEY || err == -IW_E_MPA_PD_LEN || err == -EPROTO ||
		       err == -ETIMEDOUT) &&
		      !s->app_done));
		return;
	}
	n = iw_mpa_decode(s->tx, s->tx_len, IW_MPA_REP, &f);
	must(n > 0 && f.kind == IW_MPA_REP && !f.m);
	off = (size_t)n;
	if (iw_mpa_has_v2(&f) && f.r)
		must(!f.v2.p2p && !f.v2.ird && !f.v2.ord && !rtr_bits(&f.v2));
	if (f.r) {
		must(in->state == IW_CONN_REJECTED);
		if (err == -ECONNREFUSED) {
			must(s->app_rejected && f.rev == in->rev && f.enhanced == in->enhanced);
			must(same_pd(f.pd, f.pd_len, s->rep_pd, s->rep_pd_len));
		} else {
			must(f.pd_len == 0); /* protocol rejects carry no private data */
		}
		if (err == -IW_E_MPA_REV)
			must(f.rev == 1 && !f.c && !f.enhanced);
		if (err == -IW_E_MPA_MARKERS || err == -IW_E_MPA_V2)
			must(f.rev == req->rev && f.c == req->c);
		if (err == -IW_E_MPA_MARKERS)
			must(f.enhanced == req->enhanced);
		if (err == -IW_E_MPA_V2)
			must(!f.enhanced);
		if (err == -ENOPROTOOPT)
			must(f.c == req->c);
	} else {
		must(dreq > 0 && s->app_done && !s->app_rejected);
		must(in->state == IW_CONN_ESTABLISHED || in->state == IW_CONN_AWAIT_RTR ||
		     in->state == IW_CONN_FAILED);
		must(f.c == in->crc && f.rev == in->rev && iw_mpa_has_v2(&f) == in->enhanced);
		if (in->enhanced) {
			must(f.v2.ird == in->ird && f.v2.ord == in->ord && f.v2.p2p == in->p2p);
			must(rtr_bits(&f.v2) == (in->p2p ? in->rtr : 0));
		}
		must(same_pd(f.pd, f.pd_len, s->rep_pd, s->rep_pd_len));
		if (in->state == IW_CONN_ESTABLISHED && in->rtr == IW_CONN_RTR_READ) {
			/* the zero-length Read Response to the RTR's sink STag / TO */
			size_t flen, rlen;
			const struct iw_fpdu *rr =
			    fpdu_at(s->rx + dreq, s->rx_len - (size_t)dreq, in->crc, &rlen);
			uint32_t stag = rr->hdr.rreq.sink_stag;
			uint64_t to = rr->hdr.rreq.sink_to;
			const struct iw_fpdu *p =
			    fpdu_at(s->tx + off, s->tx_len - off, in->crc, &flen);

			must(p->hdr.opcode == IW_OP_READ_RESP && p->hdr.tagged && p->hdr.last);
			must(p->hdr.stag == stag && p->hdr.to == to && p->payload_len == 0);
			must(flen == 20);
			off += flen;
		} else if (in->state == IW_CONN_FAILED && err != -ECONNABORTED &&
			   err != -ETIMEDOUT) {
			off += check_term(s->tx + off, s->tx_len - off, in->crc, err);
		}
	}
	must(off == s->tx_len);
}

/* ---- The final state against the frames consumed (decoded independently) ---- */

static void check_initiator(const struct side *s, const struct iw_conn_info *in)
{
	const struct kcfg *k = s->k;
	const struct iw_conn_cfg *c = &k->cfg;
	struct iw_mpa pf;
	int dr = iw_mpa_decode(s->rx, s->rx_len, IW_MPA_REP, &pf);
	unsigned st = in->state;
	int err = in->err;
	unsigned fails = 0; /* bit set of the documented reasons that apply */
	enum { F_V2 = 1, F_CRC = 2, F_IRD = 4, F_RTR = 8 };
	bool fallback, v2;
	uint16_t ird, ord;
	uint8_t rtr = IW_CONN_RTR_NONE;

	must(!in->orq_rtr || st == IW_CONN_ESTABLISHED);
	if (dr == -EAGAIN) { /* the Reply is incomplete */
		must(st == IW_CONN_AWAIT_REP || (st == IW_CONN_FAILED && err == -ETIMEDOUT));
		must(in->ird == c->ird && in->ord == k->ord_sent && in->peer_pd_len == 0);
		return;
	}
	if ((dr == -IW_E_MPA_MARKERS || dr == -IW_E_MPA_V2) && pf.r)
		dr = (int)(IW_MPA_HDR_LEN + be16(s->rx + IW_MPA_KEY_LEN + 2)); /* a Reject */
	if (dr < 0) {
		must(st == IW_CONN_FAILED && err == dr);
		if (dr == -IW_E_MPA_PD_LEN)
			must(s->rx_len == IW_MPA_HDR_LEN);
		return;
	}
	must((size_t)dr == s->rx_len); /* consumed exactly the Reply */
	must(in->peer_crc == pf.c && in->peer_ird_ord == iw_mpa_has_v2(&pf));
	if (in->peer_ird_ord)
		must(in->peer_ird == pf.v2.ird && in->peer_ord == pf.v2.ord);
	must(same_pd(in->peer_pd, in->peer_pd_len, pf.pd, pf.pd_len));
	if (pf.r) {
		must(st == IW_CONN_REJECTED && err == -ECONNREFUSED);
		return;
	}
	fallback = k->rev == 2 && pf.rev == 1;
	if (fallback && c->no_rev1_fallback)
		fails |= F_V2;
	if (k->rev == 2 && !fallback && !iw_mpa_has_v2(&pf))
		fails |= F_V2; /* an enhanced Request answered otherwise */
	if ((crc_wanted(c->crc) && !pf.c) || (c->crc == IW_CONN_CRC_OFF_STRICT && pf.c))
		fails |= F_CRC;
	v2 = k->rev == 2 && !fallback && iw_mpa_has_v2(&pf);
	ird = c->ird;
	ord = k->ord_sent;
	if (v2) {
		/* our IRD must hold the peer's ORD (relaxed: up to max_ird); strict: our ORD
		 * within the peer's IRD */
		if ((pf.v2.ord > c->ird && (c->strict_ird || pf.v2.ord > k->max_ird)) ||
		    (c->strict_ird && k->ord_sent > pf.v2.ird))
			fails |= F_IRD;
		ird = pf.v2.ord;
		ord = min16(pf.v2.ird, k->max_ord);
		if (c->p2p) {
			rtr = rtr_pick(k->rtr_types & rtr_bits(&pf.v2));
			if (!rtr)
				fails |= F_RTR;
			if (rtr == IW_CONN_RTR_READ && ord == 0)
				fails |= F_IRD; /* the RTR Read needs an ORQ slot */
		}
	}
	if (fails) {
		must(st == IW_CONN_FAILED);
		must((err == -IW_E_MPA_V2 && (fails & F_V2)) ||
		     (err == -ENOPROTOOPT && (fails & F_CRC)) ||
		     (err == -IW_E_MPA_IRD && (fails & F_IRD)) ||
		     (err == -IW_E_MPA_RTR && (fails & F_RTR)));
		return;
	}
	must(st == IW_CONN_ESTABLISHED && err == 0);
	must(in->rev == (fallback ? 1 : pf.rev < k->rev ? pf.rev : k->rev));
	must(in->enhanced == v2 && (!v2 || in->rev == 2));
	must(in->crc == pf.c);
	if (crc_wanted(c->crc))
		must(in->crc);
	if (c->crc == IW_CONN_CRC_OFF_STRICT)
		must(!in->crc);
	must(in->ird == ird && in->ord == ord);
	must(in->ird <= k->max_ird && in->ord <= k->max_ord);
	if (v2 && c->strict_ird)
		must(pf.v2.ord <= c->ird && k->ord_sent <= pf.v2.ird);
	must(in->p2p == (rtr != IW_CONN_RTR_NONE) && in->rtr == rtr);
	must(!in->p2p || (v2 && c->p2p && one_rtr(in->rtr) && (k->rtr_types & in->rtr)));
	must(in->orq_rtr == (rtr == IW_CONN_RTR_READ));
	must(in->tx_msn_used[IW_QN_READ_REQ] == (rtr == IW_CONN_RTR_READ));
	must(in->tx_msn_used[IW_QN_SEND] == (rtr == IW_CONN_RTR_SEND));
	must(!in->tx_msn_used[IW_QN_TERMINATE]);
	must(!in->rx_msn_used[0] && !in->rx_msn_used[1] && !in->rx_msn_used[2]);
	must(!in->peer_term_valid);
}

static void check_responder(const struct side *s, const struct iw_conn_info *in, struct iw_mpa *pf,
			    int *dreq)
{
	const struct kcfg *k = s->k;
	const struct iw_conn_cfg *c = &k->cfg;
	int dr = iw_mpa_decode(s->rx, s->rx_len, IW_MPA_REQ, pf);
	unsigned st = in->state;
	int err = in->err;
	bool v2, p2p, conflict;
	uint8_t rev, rtr;
	uint16_t ird, ord;
	size_t m;

	*dreq = dr;
	must(!in->orq_rtr && !in->tx_msn_used[0] && !in->tx_msn_used[1] && !in->tx_msn_used[2]);
	if (dr == -EAGAIN || dr == -IW_E_MPA_REV) {
		/* an unknown Rev is rejected once the whole frame is in (or PD_Length > 512) */
		bool whole = false;

		if (dr == -IW_E_MPA_REV && s->rx_len >= IW_MPA_HDR_LEN) {
			uint16_t pdl = be16(s->rx + IW_MPA_KEY_LEN + 2);

			must(pdl > IW_MPA_PD_MAX ? s->rx_len == IW_MPA_HDR_LEN
						 : s->rx_len <= IW_MPA_HDR_LEN + (size_t)pdl);
			whole = pdl > IW_MPA_PD_MAX || s->rx_len == IW_MPA_HDR_LEN + (size_t)pdl;
		}
		if (whole)
			must(st == IW_CONN_REJECTED && err == -IW_E_MPA_REV);
		else
			must(st == IW_CONN_AWAIT_REQ ||
			     (st == IW_CONN_FAILED && err == -ETIMEDOUT));
		return;
	}
	if (dr == -IW_E_MPA_MARKERS || dr == -IW_E_MPA_V2) {
		must(st == IW_CONN_REJECTED && err == dr);
		must(s->rx_len == IW_MPA_HDR_LEN + (size_t)be16(s->rx + IW_MPA_KEY_LEN + 2));
		return;
	}
	if (dr < 0) { /* not an MPA peer we can answer */
		must(st == IW_CONN_FAILED && err == dr);
		if (dr == -IW_E_MPA_PD_LEN)
			must(s->rx_len == IW_MPA_HDR_LEN);
		return;
	}
	must(s->rx_len >= (size_t)dr && in->peer_crc == pf->c);
	conflict = (pf->c && c->crc == IW_CONN_CRC_OFF_STRICT) ||
		   (!pf->c && c->crc == IW_CONN_CRC_REQUIRED_STRICT);
	if (conflict) {
		must(st == IW_CONN_REJECTED && err == -ENOPROTOOPT && s->rx_len == (size_t)dr);
		return;
	}
	must(same_pd(in->peer_pd, in->peer_pd_len, pf->pd, pf->pd_len));
	if (!s->app_done) { /* the application has not been asked: REQ_RCVD, or extra bytes */
		must(st == IW_CONN_REQ_RCVD || (st == IW_CONN_FAILED && err == -EPROTO));
		must(s->rx_len == (size_t)dr);
		return;
	}
	if (s->app_rejected) {
		must(st == IW_CONN_REJECTED && err == -ECONNREFUSED && s->rx_len == (size_t)dr);
		return;
	}
	/* accepted: the Reply's values */
	rev = pf->rev < k->rev ? pf->rev : k->rev;
	v2 = rev == 2 && pf->enhanced;
	p2p = v2 && pf->v2.p2p;
	rtr = IW_CONN_RTR_NONE;
	if (p2p) {
		rtr = rtr_pick(rtr_bits(&pf->v2) & k->rtr_types);
		if (!rtr)
			rtr = IW_CONN_RTR_WRITE; /* siw: Write when nothing matches */
	}
	ird = k->app_ird;
	ord = k->app_ord;
	if (v2 && !c->strict_ird) {
		ird = max16(ird, min16(pf->v2.ord, k->max_ird));
		ord = min16(ord, min16(pf->v2.ird, k->max_ord));
	}
	must(in->rev == rev && in->enhanced == v2 && in->p2p == p2p && in->rtr == rtr);
	must(in->crc == (pf->c || crc_wanted(c->crc)));
	if (c->crc == IW_CONN_CRC_OFF_STRICT)
		must(!in->crc);
	must(in->ird == ird && in->ord == ord);
	must(in->ird <= k->max_ird && in->ord <= k->max_ord);
	if (v2) { /* the peer's ORD fits our IRD as far as max_ird allows; ORD within its IRD */
		must(in->ird >= min16(pf->v2.ord, k->max_ird) && in->ord <= pf->v2.ird);
		must(in->peer_ird_ord && in->peer_ird == pf->v2.ird && in->peer_ord == pf->v2.ord);
	}
	must(in->rtr_offer == (p2p ? rtr_bits(&pf->v2) : 0));
	/* the RTR phase */
	m = s->rx_len - (size_t)dr;
	if (!p2p) {
		must(m == 0 && st == IW_CONN_ESTABLISHED && err == 0);
	} else if (m < IW_FPDU_LEN_SIZE) {
		must(st == IW_CONN_AWAIT_RTR || (st == IW_CONN_FAILED && err == -ETIMEDOUT));
	} else if (be16(s->rx + dr) > IW_TERM_ULPDU_MAX) { /* longer than any RTR or Terminate */
		must(m == IW_FPDU_LEN_SIZE && st == IW_CONN_FAILED && err == -IW_E_MPA_RTR);
	} else if (m < iw_fpdu_len(be16(s->rx + dr))) {
		must(st == IW_CONN_AWAIT_RTR || (st == IW_CONN_FAILED && err == -ETIMEDOUT));
	} else {
		struct iw_fpdu f;
		int fd = iw_fpdu_decode(s->rx + dr, m, in->crc, 0, &f);

		must(m == iw_fpdu_len(be16(s->rx + dr)));
		if (fd < 0) {
			must(st == IW_CONN_FAILED && err == fd);
		} else if (f.hdr.opcode == IW_OP_TERMINATE) {
			must(st == IW_CONN_FAILED && err == -ECONNABORTED && in->peer_term_valid);
			must(in->peer_term.layer == f.hdr.term.layer &&
			     in->peer_term.etype == f.hdr.term.etype &&
			     in->peer_term.ecode == f.hdr.term.ecode);
		} else if (st == IW_CONN_ESTABLISHED) {
			must(rtr_kind(rtr, &f));
		} else {
			must(st == IW_CONN_FAILED && err == -IW_E_MPA_RTR && !rtr_exact(rtr, &f));
		}
	}
	if (st == IW_CONN_ESTABLISHED) {
		must(in->rx_msn_used[IW_QN_READ_REQ] == (rtr == IW_CONN_RTR_READ));
		must(in->rx_msn_used[IW_QN_SEND] == (rtr == IW_CONN_RTR_SEND));
		must(!in->rx_msn_used[IW_QN_TERMINATE] && !in->peer_term_valid);
	}
}

/* The clock, the transport error and misplaced calls, on copies. */
static void check_clock(const struct side *s)
{
	static struct iw_conn t;
	unsigned st = iw_conn_state(&s->c);
	uint64_t d = iw_conn_deadline(&s->c);
	size_t used = 7;
	int err = iw_conn_error(&s->c);

	take_snap(&s->c);
	memcpy(&t, &s->c, sizeof(t));
	if (!is_waiting(st)) {
		must(d == IW_CONN_NO_DEADLINE);
		must(iw_conn_tick(&t, UINT64_MAX - 1) == err && unchanged(&t));
	} else {
		must(d != IW_CONN_NO_DEADLINE && d > T0);
		must(iw_conn_tick(&t, d - 1) == 0 && unchanged(&t));
		must(iw_conn_tick(&t, d) == -ETIMEDOUT && iw_conn_state(&t) == IW_CONN_FAILED);
		must(iw_conn_error(&t) == -ETIMEDOUT &&
		     iw_conn_deadline(&t) == IW_CONN_NO_DEADLINE);
		must(iw_conn_tick(&t, d + 1) == -ETIMEDOUT);
		must(iw_conn_input(&t, s->k->pd, 1, d, &used) == -ETIMEDOUT && used == 0);
		/* an input at the deadline with the frame still incomplete fails too */
		memcpy(&t, &s->c, sizeof(t));
		must(iw_conn_input(&t, NULL, 0, d, &used) == -ETIMEDOUT && used == 0);
		must(iw_conn_state(&t) == IW_CONN_FAILED);
	}
	memcpy(&t, &s->c, sizeof(t));
	iw_conn_llp_error(&t, -ESHUTDOWN);
	if (st == IW_CONN_ESTABLISHED || is_ended(st)) {
		must(unchanged(&t));
	} else {
		must(iw_conn_state(&t) == IW_CONN_FAILED && iw_conn_error(&t) == -ESHUTDOWN);
		memcpy(&t, &s->c, sizeof(t));
		iw_conn_llp_error(&t, 0);
		must(iw_conn_state(&t) == IW_CONN_FAILED && iw_conn_error(&t) == -ECONNRESET);
	}
	if (st != IW_CONN_REQ_RCVD) {
		memcpy(&t, &s->c, sizeof(t));
		must(iw_conn_accept(&t, 0, 0, NULL, 0, T0) == -EINVAL && unchanged(&t));
		must(iw_conn_reject(&t, NULL, 0) == -EINVAL && unchanged(&t));
	}
}

/* Everything about a machine at the end of a run (all its bytes sent first). */
static void check_final(struct side *s)
{
	struct iw_conn_info in;
	unsigned st;
	struct iw_mpa req;
	int dreq = 0;

	memset(&req, 0, sizeof(req));
	side_flush(s, SIZE_MAX);
	check_role_state(s);
	st = iw_conn_state(&s->c);
	iw_conn_info(&s->c, &in);
	must(in.state == st && in.err == iw_conn_error(&s->c) && in.role == s->k->cfg.role);
	must(in.rx_consumed == s->rx_len && s->used == s->rx_len);
	must(in.tx_queued == s->tx_len);
	must((in.peer_pd_len == 0) == (in.peer_pd == NULL));
	must(iw_conn_rx_done(&s->c) == (st == IW_CONN_ESTABLISHED));
	must(iw_conn_tx_ready(&s->c) == (st == IW_CONN_ESTABLISHED));
	must(strcmp(iw_conn_state_name((enum iw_conn_state)st), "?") != 0);
	must(strcmp(iw_conn_state_name(IW_CONN_NSTATES), "?") == 0);
	must(iw_conn_err_name(in.err) != NULL && strcmp(iw_conn_err_name(in.err), "?") != 0);
	if (st == IW_CONN_ESTABLISHED) {
		must(in.rev == 1 || in.rev == 2);
		must(!in.enhanced || in.rev == 2);
		must(!in.p2p || (in.enhanced && one_rtr(in.rtr)));
		must(in.p2p || in.rtr == IW_CONN_RTR_NONE);
	}
	if (s->k->cfg.role == IW_CONN_INITIATOR) {
		check_initiator(s, &in);
		check_tx_initiator(s, &in);
	} else {
		check_responder(s, &in, &req, &dreq);
		check_tx_responder(s, &in, &req, dreq);
	}
	check_clock(s);
}

/* Same outcome; cmp_used: also the same bytes consumed (and so the same QP stream). */
static void same_outcome(const struct side *a, const struct side *b, bool cmp_used)
{
	struct iw_conn_info x, y;

	iw_conn_info(&a->c, &x);
	iw_conn_info(&b->c, &y);
	must(x.state == y.state && x.err == y.err && x.role == y.role);
	must(x.rev == y.rev && x.enhanced == y.enhanced && x.crc == y.crc);
	must(x.peer_crc == y.peer_crc && x.p2p == y.p2p && x.rtr == y.rtr);
	must(x.rtr_offer == y.rtr_offer && x.ird == y.ird && x.ord == y.ord);
	must(x.peer_ird_ord == y.peer_ird_ord && x.peer_ird == y.peer_ird);
	must(x.peer_ord == y.peer_ord);
	must(same_pd(x.peer_pd, x.peer_pd_len, y.peer_pd, y.peer_pd_len));
	must(x.tx_queued == y.tx_queued && x.orq_rtr == y.orq_rtr);
	must(memcmp(x.tx_msn_used, y.tx_msn_used, sizeof(x.tx_msn_used)) == 0);
	must(memcmp(x.rx_msn_used, y.rx_msn_used, sizeof(x.rx_msn_used)) == 0);
	must(x.peer_term_valid == y.peer_term_valid);
	if (x.peer_term_valid)
		must(x.peer_term.layer == y.peer_term.layer &&
		     x.peer_term.etype == y.peer_term.etype &&
		     x.peer_term.ecode == y.peer_term.ecode &&
		     x.peer_term.hdrct == y.peer_term.hdrct);
	must(a->tx_len == b->tx_len && memcmp(a->tx, b->tx, a->tx_len) == 0);
	if (cmp_used) {
		must(x.rx_consumed == y.rx_consumed && a->used == b->used);
		must(a->qp_len == b->qp_len && memcmp(a->qp, b->qp, a->qp_len) == 0);
	}
}

/* ---- Single mode ---- */

enum split { SPLIT_WHOLE, SPLIT_CHUNKS, SPLIT_BYTES };

struct chunks {
	uint8_t len[16];
	size_t n, i;
};

static size_t next_chunk(struct chunks *ch)
{
	size_t v = ch->len[ch->i % ch->n] + (size_t)1;

	ch->i++;
	return v;
}

/* Feeds buf[0..len) in pieces. Once the handshake is over, a couple more calls (they must
 * consume nothing), then the rest goes to the QP directly. */
static void feed(struct side *s, const uint8_t *buf, size_t len, enum split sp, struct chunks *ch)
{
	size_t off = 0;
	int after = 0;

	while (off < len) {
		size_t n = sp == SPLIT_WHOLE ? len - off : sp == SPLIT_BYTES ? 1 : next_chunk(ch);
		unsigned st = iw_conn_state(&s->c);

		if (n > len - off)
			n = len - off;
		if ((st == IW_CONN_ESTABLISHED || is_ended(st)) && ++after > 2) {
			if (st == IW_CONN_ESTABLISHED)
				append(s->qp, &s->qp_len, buf + off, len - off);
			return;
		}
		side_input(s, buf + off, n, T0);
		side_flush(s, sp == SPLIT_CHUNKS ? next_chunk(ch) : SIZE_MAX);
		off += n;
	}
}

static bool run_split(struct side *s, const struct kcfg *k, const uint8_t *st, size_t n, size_t cut,
		      enum split sp, const struct chunks *ch0)
{
	struct chunks ch = *ch0;

	if (!side_init(s, k, T0))
		return false;
	if (sp == SPLIT_WHOLE) { /* an empty input changes nothing before the deadline */
		take_snap(&s->c);
		must(side_input(s, NULL, 0, T0) == 0 && unchanged(&s->c));
	}
	feed(s, st, cut, sp, &ch);
	if (k->cfg.role == IW_CONN_RESPONDER) /* the application acts between two inputs */
		must(s->rx_len == cut || iw_conn_state(&s->c) != IW_CONN_REQ_RCVD);
	side_app(s, T0);
	feed(s, st + cut, n - cut, sp, &ch);
	check_final(s);
	return true;
}

/* The clock advances by step before each chunk (tick, then input); a shadow machine gets the
 * same calls at T0. Until the timed machine times out they must agree; it times out only
 * while waiting and at or past its deadline. */
static void run_timed(struct side *s, struct side *sh, const struct kcfg *k, const uint8_t *st,
		      size_t n, size_t cut, const struct chunks *ch0, uint64_t step)
{
	struct chunks ch = *ch0;
	uint64_t now = T0;
	size_t off = 0;
	bool timed_out = false;

	if (!side_init(s, k, T0) || !side_init(sh, k, T0))
		return;
	while (off < n) {
		size_t end = off < cut ? cut : n, len = next_chunk(&ch);
		unsigned st0 = iw_conn_state(&s->c);
		uint64_t d0 = iw_conn_deadline(&s->c);

		if (len > end - off)
			len = end - off;
		now += step;
		side_tick(s, now);
		side_input(s, st + off, len, now);
		if (!timed_out) {
			side_input(sh, st + off, len, T0);
			if (iw_conn_error(&s->c) == -ETIMEDOUT &&
			    iw_conn_error(&sh->c) != -ETIMEDOUT) {
				must(iw_conn_state(&s->c) == IW_CONN_FAILED);
				must(iw_conn_error(&s->c) == -ETIMEDOUT);
				must(is_waiting(st0) && now >= d0);
				/* the shadow is still waiting: either where the clock caught the
				 * machine, or it got further with the same bytes */
				timed_out = true;
			} else {
				must(iw_conn_error(&s->c) == iw_conn_error(&sh->c));
				same_outcome(s, sh, true);
				if (is_waiting(iw_conn_state(&s->c)))
					must(now < iw_conn_deadline(&s->c));
			}
		}
		off += len;
		if (off == cut && !timed_out) {
			side_app(s, now);
			side_app(sh, T0);
			must(iw_conn_state(&s->c) == iw_conn_state(&sh->c));
		}
		side_flush(s, SIZE_MAX);
		side_flush(sh, SIZE_MAX);
	}
	if (cut == n && !timed_out) { /* a Request with nothing after it */
		side_app(s, now);
		side_app(sh, T0);
	}
	check_final(s);
	if (!timed_out) {
		check_final(sh);
		same_outcome(s, sh, true);
	}
}

static struct side sides[6];
static struct kcfg kc[2];

/* Whether two runs' consumption may differ with the split (see the header comment). */
static bool used_split_dependent(const struct side *s)
{
	int err = iw_conn_error(&s->c);

	return iw_conn_state(&s->c) == IW_CONN_FAILED &&
	       (err == -IW_E_MPA_KEY ||
		(err == -IW_E_MPA_REV && s->k->cfg.role == IW_CONN_INITIATOR));
}

static void single(struct rd *r, uint8_t flags)
{
	bool raw = flags & 2;
	uint8_t role = flags & 4 ? IW_CONN_RESPONDER : IW_CONN_INITIATOR;
	struct kcfg *k = &kc[0];
	struct chunks ch;
	uint64_t step;
	size_t cut;
	struct iw_mpa f;
	bool strict_used;
	int dr;

	read_cfg(r, k, role, raw);
	step = k->timeout / 64 * u8(r);
	memset(&ch, 0, sizeof(ch));
	ch.n = u8(r) & 15;
	for (size_t i = 0; i < ch.n; i++)
		ch.len[i] = u8(r);
	if (!ch.n) {
		ch.n = 1;
		ch.len[0] = 255;
	}
	/* the application acts after the Request: cut the stream there */
	cut = r->n;
	if (role == IW_CONN_RESPONDER) {
		dr = iw_mpa_decode(r->p, r->n, IW_MPA_REQ, &f);
		if (dr > 0)
			cut = (size_t)dr;
	}

	if (!run_split(&sides[0], k, r->p, r->n, cut, SPLIT_WHOLE, &ch))
		return; /* init refused the configuration (checked) */
	run_split(&sides[1], k, r->p, r->n, cut, SPLIT_CHUNKS, &ch);
	run_split(&sides[2], k, r->p, r->n, cut, SPLIT_BYTES, &ch);
	strict_used = !used_split_dependent(&sides[0]);
	same_outcome(&sides[0], &sides[1], strict_used);
	same_outcome(&sides[0], &sides[2], strict_used);
	run_timed(&sides[3], &sides[4], k, r->p, r->n, cut, &ch, step);

	/* the Request and more bytes in one call: the application had no say, -EPROTO */
	if (role == IW_CONN_RESPONDER && cut < r->n && sides[0].app_done) {
		struct side *s = &sides[5];

		side_init(s, k, T0);
		must(side_input(s, r->p, r->n, T0) == -EPROTO);
		must(s->used == cut && iw_conn_state(&s->c) == IW_CONN_FAILED);
		check_final(s);
	}
}

/* ---- Pair mode ---- */

struct pipe {
	uint8_t buf[LOG_MAX];
	size_t len, off; /* bytes in flight: [off, len) */
	size_t corrupt_at;
	uint8_t mask;
	bool corrupted;
};

/* The sender's socket takes n bytes; the byte at the corruption offset is flipped in flight. */
static bool send_some(struct side *s, struct pipe *p, size_t n)
{
	size_t from = s->tx_len, took = side_flush(s, n);

	for (size_t i = 0; i < took; i++) {
		uint8_t b = s->tx[from + i];

		if (p->mask && p->len == p->corrupt_at) {
			b ^= p->mask;
			p->corrupted = true;
		}
		must(p->len < LOG_MAX);
		p->buf[p->len++] = b;
	}
	return took > 0;
}

static bool deliver(struct side *s, struct pipe *p, size_t n)
{
	if (p->off == p->len)
		return false;
	if (n > p->len - p->off)
		n = p->len - p->off;
	if (iw_conn_state(&s->c) == IW_CONN_ESTABLISHED) /* the QP's bytes */
		append(s->qp, &s->qp_len, p->buf + p->off, n);
	else
		side_input(s, p->buf + p->off, n, T0);
	p->off += n;
	return true;
}

static void run_pair(struct side *si, struct side *sr, const struct kcfg *ki, const struct kcfg *kr,
		     struct pipe *i2r, struct pipe *r2i, const struct chunks *ch0, bool whole)
{
	struct chunks ch = *ch0;
	int iter;

	must(side_init(si, ki, T0) && side_init(sr, kr, T0));
	for (iter = 0; iter < 20000; iter++) {
		bool moved = false;

		moved |= send_some(si, i2r, whole ? SIZE_MAX : next_chunk(&ch));
		moved |= send_some(sr, r2i, whole ? SIZE_MAX : next_chunk(&ch));
		moved |= deliver(sr, i2r, whole ? SIZE_MAX : next_chunk(&ch));
		moved |= deliver(si, r2i, whole ? SIZE_MAX : next_chunk(&ch));
		if (iw_conn_state(&sr->c) == IW_CONN_REQ_RCVD && !sr->app_done) {
			side_app(sr, T0);
			moved = true;
		}
		if (!moved)
			break;
	}
	must(iter < 20000); /* the exchange settles */
	check_final(si);
	check_final(sr);
}

/* The documented outcome of two uncorrupted machines. */
static void check_pair(const struct side *si, const struct side *sr)
{
	const struct kcfg *ki = si->k, *kr = sr->k;
	struct iw_conn_info ii, ri;
	struct iw_term_code tc;
	unsigned sti, str;
	bool crc_req = crc_wanted(ki->cfg.crc), v2, p2p;
	uint8_t choice;

	iw_conn_info(&si->c, &ii);
	iw_conn_info(&sr->c, &ri);
	sti = ii.state;
	str = ri.state;
	if ((crc_req && kr->cfg.crc == IW_CONN_CRC_OFF_STRICT) ||
	    (!crc_req && kr->cfg.crc == IW_CONN_CRC_REQUIRED_STRICT)) {
		must(str == IW_CONN_REJECTED && ri.err == -ENOPROTOOPT);
		must(sti == IW_CONN_REJECTED && ii.err == -ECONNREFUSED && ii.peer_pd_len == 0);
		return;
	}
	if (sr->app_rejected) {
		must(str == IW_CONN_REJECTED && ri.err == -ECONNREFUSED);
		must(sti == IW_CONN_REJECTED && ii.err == -ECONNREFUSED);
		must(same_pd(ii.peer_pd, ii.peer_pd_len, sr->rep_pd, sr->rep_pd_len));
		return;
	}
	must(sr->app_done);
	/* the Request as sent is what the responder saw */
	must(same_pd(ri.peer_pd, ri.peer_pd_len, ki->cfg.pd, ki->cfg.pd_len));
	v2 = ki->rev == 2 && kr->rev == 2;
	p2p = v2 && ki->cfg.p2p;
	choice = rtr_pick(ki->rtr_types & kr->rtr_types);
	if (!choice)
		choice = IW_CONN_RTR_WRITE;
	/* the initiator fails only for the documented incompatibilities */
	if (sti == IW_CONN_FAILED) {
		switch (ii.err) {
		case -IW_E_MPA_V2: /* a revision-1 responder, fallback refused */
			must(ki->rev == 2 && kr->rev == 1 && ki->cfg.no_rev1_fallback);
			break;
		case -ENOPROTOOPT: /* CRC turned on by the responder, refused */
			must(ki->cfg.crc == IW_CONN_CRC_OFF_STRICT && crc_wanted(kr->cfg.crc));
			break;
		case -IW_E_MPA_IRD: /* strict: our ORD above the responder's IRD */
			must(v2 && ki->cfg.strict_ird && ki->ord_sent > ri.ird);
			break;
		case -IW_E_MPA_RTR: /* the responder fell back to Write, which we did not offer */
			must(p2p && !(ki->rtr_types & choice));
			break;
		default:
			must(0);
		}
		if (ii.err == -IW_E_MPA_IRD || ii.err == -IW_E_MPA_RTR) {
			/* the Terminate reaches the responder: in FPDU mode it is the QP's */
			if (p2p) {
				must(iw_err_term(ii.err, &tc) == 0);
				must(str == IW_CONN_FAILED && ri.err == -ECONNABORTED);
				must(ri.peer_term_valid && ri.peer_term.layer == tc.layer &&
				     ri.peer_term.etype == tc.etype &&
				     ri.peer_term.ecode == tc.ecode);
			} else {
				must(str == IW_CONN_ESTABLISHED);
				must(sr->qp_len == ii.tx_queued - ri.rx_consumed);
			}
		} else { /* no Terminate: a P2P responder waits for the RTR until its timeout */
			must(str == (p2p ? IW_CONN_AWAIT_RTR : IW_CONN_ESTABLISHED));
		}
		return;
	}
	must(!(ki->rev == 2 && kr->rev == 1 && ki->cfg.no_rev1_fallback));
	must(!(ki->cfg.crc == IW_CONN_CRC_OFF_STRICT && crc_wanted(kr->cfg.crc)));
	must(!(v2 && ki->cfg.strict_ird && ki->ord_sent > ri.ird));
	must(!(p2p && !(ki->rtr_types & choice)));
	must(sti == IW_CONN_ESTABLISHED && str == IW_CONN_ESTABLISHED);
	/* mirrored */
	must(ii.rev == ri.rev && ii.rev == (v2 ? 2 : 1));
	must(ii.crc == ri.crc && ii.crc == (crc_req || crc_wanted(kr->cfg.crc)));
	must(ii.enhanced == ri.enhanced && ii.enhanced == v2);
	must(ii.p2p == ri.p2p && ii.p2p == p2p);
	must(ii.rtr == ri.rtr && ii.rtr == (p2p ? choice : IW_CONN_RTR_NONE));
	must(ri.peer_crc == crc_req && ii.peer_crc == ri.crc);
	if (v2) {
		must(ii.ird == ri.ord && ii.ord == min16(ri.ird, ki->max_ord));
		must(ii.peer_ird == ri.ird && ii.peer_ord == ri.ord);
		must(ri.peer_ird == ki->cfg.ird && ri.peer_ord == ki->ord_sent);
	}
	must(same_pd(ii.peer_pd, ii.peer_pd_len, sr->rep_pd, sr->rep_pd_len));
	must(memcmp(ii.tx_msn_used, ri.rx_msn_used, sizeof(ii.tx_msn_used)) == 0);
	/* what one side queued, the other consumed; the rest is the QP's (the Read Response) */
	must(ii.tx_queued == ri.rx_consumed && sr->qp_len == 0);
	must(ri.tx_queued == ii.rx_consumed + si->qp_len);
	must(si->qp_len == (ii.rtr == IW_CONN_RTR_READ ? 20u : 0u));
}

static void pair(struct rd *r)
{
	static struct pipe i2r, r2i;
	struct chunks ch;
	uint8_t ctl, mask;
	size_t at;
	bool corrupt;

	read_cfg(r, &kc[0], IW_CONN_INITIATOR, false);
	read_cfg(r, &kc[1], IW_CONN_RESPONDER, false);
	ctl = u8(r);
	at = u16(r) % 1024;
	mask = u8(r);
	corrupt = ctl & 2;
	memset(&ch, 0, sizeof(ch));
	ch.n = u8(r) & 15;
	for (size_t i = 0; i < ch.n; i++)
		ch.len[i] = u8(r);
	if (!ch.n) {
		ch.n = 1;
		ch.len[0] = 255;
	}
	memset(&i2r, 0, sizeof(i2r));
	memset(&r2i, 0, sizeof(r2i));
	if (corrupt) {
		struct pipe *p = ctl & 1 ? &r2i : &i2r;

		p->corrupt_at = at;
		p->mask = mask ? mask : 1;
	}
	run_pair(&sides[0], &sides[1], &kc[0], &kc[1], &i2r, &r2i, &ch, false);
	if (i2r.corrupted || r2i.corrupted)
		return; /* the per-machine oracles only */
	check_pair(&sides[0], &sides[1]);
	/* the same with whole deliveries and sends */
	memset(&i2r, 0, sizeof(i2r));
	memset(&r2i, 0, sizeof(r2i));
	run_pair(&sides[2], &sides[3], &kc[0], &kc[1], &i2r, &r2i, &ch, true);
	check_pair(&sides[2], &sides[3]);
	same_outcome(&sides[0], &sides[2], true);
	same_outcome(&sides[1], &sides[3], true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rd r = {data, size};
	uint8_t flags;

	if (size < 1 || size > INPUT_MAX)
		return 0;
	flags = u8(&r);
	if (flags & 1)
		pair(&r);
	else
		single(&r, flags);
	return 0;
}
