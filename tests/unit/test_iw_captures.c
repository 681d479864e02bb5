/* iWARP codecs against real Linux siw traffic and the reference vectors (tests/data; see
 * ../shared/captures/README.md and ../shared/spec/vectors/README.md section 3).
 *
 * For every TCP connection of every capture, both directions, reassembled by sequence number:
 * - the MPA Request / Reply decodes and re-encodes byte for byte; CRC is on iff the Reply's C;
 * - every FPDU decodes (CRC verified where negotiated) and re-encodes byte for byte; the
 *   stream ends exactly at an FPDU boundary; MSN, MO and TO sequences are consistent; every
 *   Read Response matches the Read Request it answers; siw's segmentation equals
 *   iw_seg_payload / iw_tx at MSS 1448, byte for byte;
 * - in the CRC captures, a bit flipped anywhere in an FPDU makes it fail (after the header:
 *   with exactly IW_E_CRC);
 * - the receive state machine gives identical results with the stream cut at every position
 *   (one cut), fed one byte at a time, and in one piece; every input chunk is an exact-size
 *   heap copy, so ASan catches any read past it. */
#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "tcpstream.h"
#include "util/crc.h"
#include "wire/iwarp/iwarp.h"

#define MSS		1448  /* every siw capture: Ethernet 1500, TCP timestamps */
#define LITERAL_MAX	24000 /* streams up to this size: every cut on the whole stream */
#define LITERAL_SAMPLES 200   /* longer streams: this many random whole-stream cuts ... */
			      /* ... and every cut on a window of 3 FPDUs from a snapshot */

struct capdef {
	const char *file;
	int conns;
	int crc_conns;		    /* connections whose Reply has C set */
	unsigned ops[IW_OP__COUNT]; /* FPDUs by opcode, all connections, both directions */
	unsigned more;		    /* FPDUs with L = 0 */
};

static const struct capdef caps[] = {
    {"siw_rping.pcap", 1, 0, {10, 10, 10, 40, 0, 0, 0, 0}, 0},
    {"siw_rping_crc.pcap", 1, 1, {10, 10, 10, 40, 0, 0, 0, 0}, 0},
    {"siw_send_lat_rdmacm.pcap", 2, 0, {0, 0, 0, 62, 0, 0, 0, 0}, 0},
    {"siw_read_lat_rdmacm.pcap", 2, 0, {0, 20, 20, 22, 0, 0, 0, 0}, 0},
    {"siw_write_lat_rdmacm.pcap", 2, 0, {40, 0, 0, 20, 0, 0, 0, 0}, 0},
    {"siw_write_bw_rdmacm_crc.pcap", 2, 2, {120, 0, 0, 32, 0, 0, 0, 0}, 100},
    {"ns_mpa_probe_vs_siw.pcap", 1, 1, {0}, 0},
    {"iwarp_vectors.pcap", 2, 1, {2, 2, 2, 2, 0, 0, 0, 2}, 0},
};

/* ---- One direction of a connection, parsed ---- */

struct rec {
	size_t off; /* stream offset of the FPDU */
	size_t len;
	struct iw_fpdu f;
};

struct dirp {
	const uint8_t *s; /* the reassembled stream */
	size_t n;
	struct iw_mpa mpa;
	size_t mpa_len;
	struct rec *r;
	size_t nr;
};

static uint64_t total_fpdus, total_crc_ok, total_flips, total_splits, total_tx_msgs;

static void parse_dir(struct dirp *d, const struct tcps_dir *td, uint8_t expect)
{
	uint8_t out[IW_MPA_FRAME_MAX];
	int r;

	memset(d, 0, sizeof(*d));
	d->s = td->data;
	d->n = td->len;
	r = iw_mpa_decode(d->s, d->n, expect, &d->mpa);
	REQUIRE(r > 0);
	d->mpa_len = (size_t)r;
	/* byte for byte */
	CHECK_EQ(iw_mpa_encode(&d->mpa, out, sizeof(out)), r);
	CHECK_MEM(out, d->s, d->mpa_len);
	/* siw: Rev 2, Enhanced, IRD/ORD in the private data, no markers, no P2P */
	CHECK(!d->mpa.m && !d->mpa.r);
}

static void parse_fpdus(struct dirp *d, bool crc)
{
	static uint8_t out[IW_FPDU_MAX];
	size_t pos = d->mpa_len, cap = 64;

	d->r = malloc(cap * sizeof(*d->r));
	REQUIRE(d->r);
	while (pos < d->n) {
		struct iw_fpdu f;
		int r = iw_fpdu_decode(d->s + pos, d->n - pos, crc, 0, &f);

		CHECK(r > 0);
		if (r <= 0) {
			fprintf(stderr, "  FPDU at stream offset %zu: %s\n", pos, iw_err_name(r));
			break;
		}
		if (d->nr == cap) {
			cap *= 2;
			d->r = realloc(d->r, cap * sizeof(*d->r));
			REQUIRE(d->r);
		}
		d->r[d->nr++] = (struct rec){pos, (size_t)r, f};
		/* re-encode byte for byte (pad bytes as received: siw leaks non-zero ones) */
		CHECK_EQ(iw_fpdu_encode(&f, crc, out, sizeof(out)), r);
		CHECK_MEM(out, d->s + pos, (size_t)r);
		if (!crc)
			CHECK_EQ(f.crc, 0); /* field present, zero (iwarp.md 4.1) */
		else
			total_crc_ok++;
		total_fpdus++;
		pos += (size_t)r;
	}
	CHECK_EQ(pos, d->n); /* ends on an FPDU boundary */
}

/* MSN per queue from 1, +1 per message; MO = bytes of the message so far; TO continuity. */
static void check_sequences(const struct dirp *d)
{
	uint32_t msn[IW_QN__COUNT] = {1, 1, 1}, mo = 0;
	bool tagged_open = false;
	uint32_t t_stag = 0;
	uint64_t t_next = 0;

	for (size_t i = 0; i < d->nr; i++) {
		const struct iw_hdr *h = &d->r[i].f.hdr;

		if (h->tagged) {
			if (tagged_open) {
				CHECK_EQ(h->stag, t_stag);
				CHECK_EQ(h->to, t_next);
			}
			t_stag = h->stag;
			t_next = h->to + d->r[i].f.payload_len;
			tagged_open = !h->last;
			continue;
		}
		REQUIRE(h->qn < IW_QN__COUNT);
		CHECK_EQ(h->msn, msn[h->qn]);
		if (h->qn == IW_QN_SEND) {
			CHECK_EQ(h->mo, mo);
			mo = h->last ? 0 : mo + d->r[i].f.payload_len;
		}
		if (h->last)
			msn[h->qn]++;
	}
	CHECK(!tagged_open);
}

/* The i-th Read Response message in `resp` answers the i-th Read Request in `req`. */
static void check_reads(const struct dirp *req, const struct dirp *resp)
{
	size_t ri = 0, nreq = 0, nresp = 0;
	uint32_t got = 0;

	for (size_t i = 0; i < req->nr; i++)
		nreq += req->r[i].f.hdr.opcode == IW_OP_READ_REQ;
	for (size_t i = 0; i < resp->nr; i++) {
		const struct iw_fpdu *f = &resp->r[i].f;
		const struct iw_rreq *rq = NULL;

		if (f->hdr.opcode != IW_OP_READ_RESP)
			continue;
		for (size_t k = 0, seen = 0; k < req->nr; k++) {
			if (req->r[k].f.hdr.opcode != IW_OP_READ_REQ)
				continue;
			if (seen++ == ri) {
				rq = &req->r[k].f.hdr.rreq;
				break;
			}
		}
		REQUIRE(rq);
		CHECK_EQ(f->hdr.stag, rq->sink_stag);
		CHECK_EQ(f->hdr.to, rq->sink_to + got);
		got += f->payload_len;
		if (f->hdr.last) {
			CHECK_EQ(got, rq->size);
			got = 0;
			ri++;
			nresp++;
		}
	}
	CHECK_EQ(nresp, nreq);
}

/* siw's FPDU sizing is iw_seg_payload at MSS 1448, and iw_tx rebuilds its bytes. */
static void check_segmentation(const struct dirp *d, bool crc)
{
	static uint8_t msg[1 << 17], out[IW_FPDU_MAX];
	uint16_t mulpdu = iw_mulpdu(MSS);

	for (size_t i = 0; i < d->nr;) {
		size_t j = i, len = 0;
		bool zero_pad = true;

		/* a message: segments i..j (same opcode, L on j); tagged and untagged do not
		 * interleave in these captures */
		while (j < d->nr && !d->r[j].f.hdr.last)
			j++;
		REQUIRE(j < d->nr);
		for (size_t k = i; k <= j; k++) {
			const struct iw_fpdu *f = &d->r[k].f;

			CHECK_EQ(f->hdr.opcode, d->r[i].f.hdr.opcode);
			REQUIRE(len + f->payload_len <= sizeof(msg));
			memcpy(msg + len, f->payload, f->payload_len);
			len += f->payload_len;
			zero_pad &= !f->pad[0] && !f->pad[1] && !f->pad[2];
			if (!f->hdr.last) /* fills the segment: no pad */
				CHECK_EQ(d->r[k].len, (size_t)(MSS & ~7));
		}
		size_t rest = len;
		for (size_t k = i; k <= j; k++) {
			bool last;
			uint32_t n =
			    iw_seg_payload(mulpdu, d->r[k].f.hdr.opcode, (uint32_t)rest, &last);

			CHECK_EQ(n, d->r[k].f.payload_len);
			CHECK_EQ(last, d->r[k].f.hdr.last);
			rest -= n;
		}
		/* rebuild the message with the transmit builder */
		if (zero_pad) {
			struct iw_tx tx;
			size_t k = i;
			int n;

			REQUIRE(iw_tx_init(&tx, &d->r[i].f.hdr, (uint32_t)len, mulpdu, crc) == 0);
			while ((n = iw_tx_next(&tx, msg, out, sizeof(out))) > 0) {
				REQUIRE(k <= j);
				CHECK_EQ((size_t)n, d->r[k].len);
				CHECK_MEM(out, d->s + d->r[k].off, d->r[k].len);
				k++;
			}
			CHECK_EQ(k, j + 1);
			total_tx_msgs++;
		}
		i = j + 1;
	}
}

/* A bit flipped in every byte of every FPDU (bit = offset % 8). */
static void check_flips(const struct dirp *d)
{
	for (size_t i = 0; i < d->nr; i++) {
		size_t len = d->r[i].len, hdr = 2 + (d->r[i].f.ulpdu_len - d->r[i].f.payload_len);
		uint8_t *b = malloc(len);

		REQUIRE(b);
		for (size_t k = 0; k < len; k++) {
			struct iw_fpdu f;
			int r;

			memcpy(b, d->s + d->r[i].off, len);
			b[k] ^= (uint8_t)(1u << (k % 8));
			r = iw_fpdu_decode(b, len, true, 0, &f);
			if (k >= hdr)
				CHECK_EQ(r, -IW_E_CRC);
			else
				CHECK(r < 0); /* an error, or a longer FPDU that is not all there */
			total_flips++;
		}
		free(b);
	}
}

/* ---- The receive state machine under every segmentation ---- */

struct ent {
	uint16_t raw_len;
	uint8_t raw[IW_FPDU_HDR_MAX];
	uint32_t payload_len, payload_crc;
	uint8_t pad[3], pad_len;
	uint32_t crc;
};

struct log {
	struct ent *e;
	size_t n, cap;
	int err;
	/* state of the FPDU in progress */
	bool open;
	size_t pay_start;
	uint32_t seen, pcrc;
	struct ent cur;
};

static void log_reset(struct log *lg)
{
	lg->n = 0;
	lg->err = 0;
	lg->open = false;
}

/* Feeds s[from, to) as one chunk from an exact-size heap copy; checks every event. */
static int feed(struct iw_rx *rx, const uint8_t *s, size_t from, size_t to, struct log *lg)
{
	size_t len = to - from, pos = 0, used;
	uint8_t *c = malloc(len ? len : 1);
	struct iw_rx_ev ev;
	int r = 0;

	REQUIRE(c);
	memcpy(c, s + from, len);
	while (pos < len) {
		r = iw_rx_step(rx, c + pos, len - pos, &used, &ev);
		if (used > len - pos) {
			CHECK(used <= len - pos);
			break;
		}
		if (r < 0) {
			lg->err = r;
			break;
		}
		if (r == IW_RX_NEED_MORE) {
			CHECK_EQ(used, len - pos);
			pos += used;
			break;
		}
		if (used == 0) {
			CHECK(used > 0);
			break;
		}
		if (r == IW_RX_HDR) {
			CHECK(!lg->open);
			lg->open = true;
			lg->pay_start = from + pos + used;
			lg->seen = 0;
			lg->pcrc = 0;
			memset(&lg->cur, 0, sizeof(lg->cur));
			lg->cur.raw_len = ev.raw_len;
			memcpy(lg->cur.raw, ev.raw, ev.raw_len);
			lg->cur.payload_len = ev.payload_len;
		} else if (r == IW_RX_DATA) {
			CHECK(lg->open);
			CHECK(ev.len > 0 && ev.data >= c + pos &&
			      ev.data + ev.len <= c + pos + used);
			CHECK_EQ(ev.off, lg->seen);
			/* zero copy: the chunk is where this payload byte sits in the stream */
			CHECK_EQ(from + (size_t)(ev.data - c), lg->pay_start + ev.off);
			lg->pcrc = crc32c(lg->pcrc, ev.data, ev.len);
			lg->seen += ev.len;
		} else {
			CHECK(lg->open);
			CHECK_EQ(lg->seen, ev.payload_len);
			lg->cur.payload_crc = lg->pcrc;
			memcpy(lg->cur.pad, ev.pad, 3);
			lg->cur.pad_len = ev.pad_len;
			lg->cur.crc = ev.crc;
			if (lg->n == lg->cap) {
				lg->cap = lg->cap ? 2 * lg->cap : 64;
				lg->e = realloc(lg->e, lg->cap * sizeof(*lg->e));
				REQUIRE(lg->e);
			}
			lg->e[lg->n++] = lg->cur;
			lg->open = false;
		}
		pos += used;
	}
	free(c);
	return r;
}

static bool ent_eq(const struct ent *a, const struct ent *b)
{
	return a->raw_len == b->raw_len && !memcmp(a->raw, b->raw, a->raw_len) &&
	       a->payload_len == b->payload_len && a->payload_crc == b->payload_crc &&
	       a->pad_len == b->pad_len && !memcmp(a->pad, b->pad, 3) && a->crc == b->crc;
}

static bool log_eq(const struct log *a, size_t a0, const struct log *b, size_t b0, size_t n)
{
	if (a->err || b->err || a0 + n > a->n || b0 + n > b->n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!ent_eq(&a->e[a0 + i], &b->e[b0 + i]))
			return false;
	return true;
}

static void check_splits(const struct dirp *d, bool crc, uint64_t *rng)
{
	const uint8_t *s = d->s + d->mpa_len;
	size_t n = d->n - d->mpa_len, nf = d->nr;
	struct log ref = {0}, lg = {0};
	struct iw_rx rx, *snap;
	size_t *bound;

	if (n == 0)
		return;
	/* reference: one piece, with a snapshot of the machine at every FPDU boundary */
	snap = malloc((nf + 1) * sizeof(*snap));
	bound = malloc((nf + 1) * sizeof(*bound));
	REQUIRE(snap && bound);
	iw_rx_init(&rx, crc, 0);
	for (size_t i = 0; i < nf; i++) {
		bound[i] = d->r[i].off - d->mpa_len;
		snap[i] = rx;
		CHECK(iw_rx_idle(&rx));
		CHECK_EQ(feed(&rx, s, bound[i], bound[i] + d->r[i].len, &ref), IW_RX_END);
	}
	bound[nf] = n;
	snap[nf] = rx;
	CHECK_EQ(ref.n, nf);
	CHECK(iw_rx_idle(&rx) && ref.err == 0);
	/* the snapshots are what one piece gives */
	log_reset(&lg);
	iw_rx_init(&rx, crc, 0);
	feed(&rx, s, 0, n, &lg);
	CHECK(log_eq(&lg, 0, &ref, 0, nf) && lg.n == nf);

	/* one byte at a time */
	log_reset(&lg);
	iw_rx_init(&rx, crc, 0);
	for (size_t k = 0; k < n; k++)
		feed(&rx, s, k, k + 1, &lg);
	CHECK(log_eq(&lg, 0, &ref, 0, nf) && lg.n == nf && iw_rx_idle(&rx));

	if (n <= LITERAL_MAX) {
		/* every cut, the whole stream each time */
		for (size_t k = 1; k < n; k++) {
			log_reset(&lg);
			iw_rx_init(&rx, crc, 0);
			feed(&rx, s, 0, k, &lg);
			feed(&rx, s, k, n, &lg);
			if (!(log_eq(&lg, 0, &ref, 0, nf) && lg.n == nf && iw_rx_idle(&rx))) {
				CHECK(!"split changed the result");
				fprintf(stderr, "  cut at %zu of %zu\n", k, n);
				break;
			}
			total_splits++;
		}
	} else {
		/* random cuts on the whole stream */
		for (int t = 0; t < LITERAL_SAMPLES; t++) {
			*rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
			size_t k = 1 + (size_t)((*rng >> 33) % (n - 1));

			log_reset(&lg);
			iw_rx_init(&rx, crc, 0);
			feed(&rx, s, 0, k, &lg);
			feed(&rx, s, k, n, &lg);
			CHECK(log_eq(&lg, 0, &ref, 0, nf) && lg.n == nf && iw_rx_idle(&rx));
			total_splits++;
		}
		/* every cut: restart from the snapshot one FPDU before the cut's FPDU and run to
		 * the end of the FPDU after it, so the cut, the boundary before it and the
		 * resumption after it are all exercised */
		size_t fi = 0;
		for (size_t k = 1; k < n; k++) {
			while (bound[fi + 1] <= k)
				fi++;
			size_t a = fi ? fi - 1 : 0, b = fi + 2 < nf ? fi + 2 : nf;

			log_reset(&lg);
			rx = snap[a];
			feed(&rx, s, bound[a], k, &lg);
			feed(&rx, s, k, bound[b], &lg);
			if (!(log_eq(&lg, 0, &ref, a, b - a) && lg.n == b - a && iw_rx_idle(&rx) &&
			      rx.fpdus == snap[b].fpdus)) {
				CHECK(!"split changed the result");
				fprintf(stderr, "  cut at %zu of %zu (window %zu..%zu)\n", k, n, a,
					b);
				break;
			}
			total_splits++;
		}
	}
	free(ref.e);
	free(lg.e);
	free(snap);
	free(bound);
}

/* ---- iwarp_vectors.pcap: the fields and CRCs of ../shared/spec/vectors/README.md 3 ---- */

static void check_vectors(struct dirp (*dp)[2], const struct tcps *t)
{
	static const uint8_t crc_a[5][4] = {{0xc4, 0x92, 0x34, 0xca},
					    {0x44, 0x8d, 0x57, 0x00},
					    {0xe9, 0x61, 0x61, 0xce},
					    {0xe5, 0x36, 0xcb, 0xf1},
					    {0xe6, 0x3f, 0x53, 0x69}};

	REQUIRE(t->n == 2);
	for (int c = 0; c < 2; c++) {
		struct dirp *cl = &dp[c][0], *sv = &dp[c][1];
		bool a = t->conn[c].port[0] == 40001;

		CHECK_EQ(t->conn[c].port[0], a ? 40001 : 40002);
		CHECK_EQ(t->conn[c].port[1], 7174);
		CHECK_EQ(cl->mpa.rev, a ? 1 : 2);
		CHECK_EQ(sv->mpa.rev, a ? 1 : 2);
		CHECK(cl->mpa.c == a && sv->mpa.c == a);
		CHECK(cl->mpa.enhanced == !a && sv->mpa.enhanced == !a);
		if (!a) {
			CHECK(cl->mpa.v2.ird == 16 && cl->mpa.v2.ord == 16);
			CHECK(sv->mpa.v2.ird == 16 && sv->mpa.v2.ord == 16);
		}
		CHECK(cl->mpa.pd_len == 8 && !memcmp(cl->mpa.pd, "client!!", 8));
		CHECK(sv->mpa.pd_len == 8 && !memcmp(sv->mpa.pd, "server!!", 8));
		REQUIRE(cl->nr == 3 && sv->nr == 2);

		const struct iw_fpdu *w = &cl->r[0].f, *snd = &cl->r[1].f, *rr = &cl->r[2].f;
		const struct iw_fpdu *rs = &sv->r[0].f, *tm = &sv->r[1].f;
		CHECK(w->hdr.opcode == IW_OP_WRITE && w->hdr.tagged && w->hdr.last);
		CHECK_EQ(w->hdr.stag, 0x1234);
		CHECK_EQ(w->hdr.to, 0x7F0000001000ull);
		CHECK(w->payload_len == 13 && !memcmp(w->payload, "Hello, iWARP!", 13));
		CHECK_EQ(w->pad_len, 3);
		CHECK(snd->hdr.opcode == IW_OP_SEND && snd->hdr.qn == 0 && snd->hdr.msn == 1);
		CHECK(snd->hdr.mo == 0 && snd->payload_len == 16);
		CHECK(rr->hdr.opcode == IW_OP_READ_REQ && rr->hdr.qn == 1 && rr->hdr.msn == 1);
		CHECK_EQ(rr->hdr.rreq.sink_stag, 0x5678);
		CHECK_EQ(rr->hdr.rreq.sink_to, 0x7F0000002000ull);
		CHECK_EQ(rr->hdr.rreq.size, 64);
		CHECK_EQ(rr->hdr.rreq.src_stag, 0x1234);
		CHECK_EQ(rr->hdr.rreq.src_to, 0x7F0000001000ull);
		CHECK(rs->hdr.opcode == IW_OP_READ_RESP && rs->hdr.last && rs->payload_len == 64);
		CHECK(rs->hdr.stag == 0x5678 && rs->hdr.to == 0x7F0000002000ull);
		CHECK(tm->hdr.opcode == IW_OP_TERMINATE && tm->hdr.qn == 2 && tm->hdr.msn == 1);
		CHECK_EQ(tm->hdr.mo, 0);
		CHECK(tm->hdr.term.layer == IW_LAYER_DDP && tm->hdr.term.etype == 2);
		CHECK(tm->hdr.term.ecode == 1 && tm->hdr.term.m && tm->hdr.term.d);
		CHECK(!tm->hdr.term.r && tm->hdr.term.ddp_seg_len == 16);
		/* the terminated header: untagged Send to QN 5, MSN 7 */
		CHECK_EQ(tm->hdr.term.ddp_hdr_len, 18);
		CHECK(tm->hdr.term.ddp_hdr[0] == 0x41 && tm->hdr.term.ddp_hdr[1] == 0x43);
		CHECK_EQ(tm->hdr.term.ddp_hdr[9], 5);
		CHECK_EQ(tm->hdr.term.ddp_hdr[13], 7);
		/* CRC trailers: the README's bytes on connection A, zero on B */
		const struct rec *all[5] = {&cl->r[0], &cl->r[1], &cl->r[2], &sv->r[0], &sv->r[1]};
		const struct dirp *own[5] = {cl, cl, cl, sv, sv};
		for (int i = 0; i < 5; i++) {
			const uint8_t *trl = own[i]->s + all[i]->off + all[i]->len - 4;
			static const uint8_t zero[4];
			CHECK_MEM(trl, a ? crc_a[i] : zero, 4);
		}
	}
}

int main(void)
{
	uint64_t rng = check_seed(20240611);
	char path[512];

	for (size_t ci = 0; ci < sizeof(caps) / sizeof(caps[0]); ci++) {
		const struct capdef *cd = &caps[ci];
		struct tcps t;
		struct dirp dp[TCPS_MAX_CONN][2];
		unsigned ops[IW_OP__COUNT] = {0}, more = 0;
		int crc_conns = 0;

		snprintf(path, sizeof(path), "%s/%s", SOFTRDMA_TEST_DATA, cd->file);
		int r = tcps_load(&t, path);
		if (r < 0)
			fprintf(stderr, "%s: %s\n", path, strerror(-r));
		REQUIRE(r == 0);
		CHECK_EQ(t.n, cd->conns);
		for (int c = 0; c < t.n; c++) {
			for (int d = 0; d < 2; d++) {
				CHECK_EQ(t.conn[c].dir[d].conflict_bytes, 0);
				parse_dir(&dp[c][d], &t.conn[c].dir[d],
					  d == 0 ? IW_MPA_REQ : IW_MPA_REP);
			}
			bool crc = dp[c][1].mpa.c; /* CRC on iff the Reply has C (iwarp.md 2.3) */
			crc_conns += crc;
			CHECK_EQ(iw_mpa_check_reply(&dp[c][0].mpa, &dp[c][1].mpa), 0);
			for (int d = 0; d < 2; d++) {
				parse_fpdus(&dp[c][d], crc);
				check_sequences(&dp[c][d]);
				if (strcmp(cd->file, "iwarp_vectors.pcap") != 0)
					check_segmentation(&dp[c][d], crc);
				for (size_t i = 0; i < dp[c][d].nr; i++) {
					ops[dp[c][d].r[i].f.hdr.opcode]++;
					more += !dp[c][d].r[i].f.hdr.last;
				}
				if (crc)
					check_flips(&dp[c][d]);
				check_splits(&dp[c][d], crc, &rng);
			}
			check_reads(&dp[c][0], &dp[c][1]);
			check_reads(&dp[c][1], &dp[c][0]);
		}
		CHECK_EQ(crc_conns, cd->crc_conns);
		CHECK_EQ(more, cd->more);
		for (int op = 0; op < IW_OP__COUNT; op++)
			CHECK_EQ(ops[op], cd->ops[op]);
		if (strcmp(cd->file, "iwarp_vectors.pcap") == 0)
			check_vectors(dp, &t);
		fprintf(stderr, "%s: %d connection(s), %u FPDUs\n", cd->file, t.n,
			ops[0] + ops[1] + ops[2] + ops[3] + ops[4] + ops[5] + ops[6] + ops[7]);
		for (int c = 0; c < t.n; c++)
			for (int d = 0; d < 2; d++)
				free(dp[c][d].r);
		tcps_free(&t);
	}
	fprintf(stderr,
		"%llu FPDUs re-encoded, %llu CRCs verified, %llu bit flips refused, "
		"%llu split runs identical, %llu messages rebuilt by iw_tx\n",
		(unsigned long long)total_fpdus, (unsigned long long)total_crc_ok,
		(unsigned long long)total_flips, (unsigned long long)total_splits,
		(unsigned long long)total_tx_msgs);
	return check_exit();
}
