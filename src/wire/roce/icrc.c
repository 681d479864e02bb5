/* RoCEv2 ICRC (spec section 6; IBTA Annex A17, rxe_icrc.c), UDP source port entropy (spec
 * 1.3) and the RNR / ACK timer encodings (spec 5.3, 5.5).
 *
 * The ICRC is CRC-32 over: 8 bytes 0xFF, the IP header with its variant fields set to ones,
 * the UDP header with checksum 0xFFFF, the BTH with byte 4 set to 0xFF, then the rest of the
 * packet up to the ICRC. The masked pseudo-header is assembled in a small stack buffer and the
 * CRC then continues over the caller's packet in place (crc32_ieee_raw2: one pass over both):
 * the payload is never copied, except the few bytes after the BTH of a short packet. */
#include "wire/roce/roce.h"

#include <errno.h>
#include <string.h>

#include "util/crc.h"

#define IP4_HDR_LEN    20
#define IP6_HDR_LEN    40
#define UDP_HDR_LEN    8
#define IPPROTO_UDP_   17
#define GRH_NXTHDR_BTH 0x1B /* RoCEv1 GRH next header: IBA BTH (spec 1.2) */
/* Offset of the identification field within the IPv4 header. */
#define IP4_ID_OFF 4

/* Raw CRC register after 0xFFFFFFFF has taken the 8 0xFF bytes that stand in for the masked
 * LRH (spec 6.1; rxe starts from this constant). test_roce_icrc checks the value. */
#define ICRC_SEED 0xDEBB20E3u

/* Longest pseudo-header: 40 (IPv6) + 8 (UDP) + 12 (BTH). */
#define PSEUDO_MAX (IP6_HDR_LEN + UDP_HDR_LEN + ROCE_BTH_LEN)
/* Packets with fewer bytes than this after the BTH (ACKs: an AETH) are copied behind the
 * pseudo-header and take one CRC call: under 16 bytes the CRC's folding paths have no block to
 * load, and a second call would cost more than the copy. */
#define SHORT_REST 16

static void put16(uint8_t *p, uint16_t v)
{
	const uint8_t be[2] = {(uint8_t)(v >> 8), (uint8_t)v};

	memcpy(p, be, 2); /* one 16-bit store (a byte swap) on little-endian machines */
}

/* Appends BTH bytes with byte 4 (FECN, BECN, Resv6a) masked (spec 6.2); n <= ROCE_BTH_LEN. */
static uint8_t *put_bth(uint8_t *w, const uint8_t *bth, size_t n)
{
	if (n == ROCE_BTH_LEN) {
		memcpy(w, bth, ROCE_BTH_LEN); /* the usual case, as fixed-size moves */
	} else {
		memcpy(w, bth, n);
		if (n <= 4)
			return w + n;
	}
	w[4] = 0xFF;
	return w + n;
}

/* Masked IP + UDP header from an envelope, as the kernel would send the packet (spec 1.1):
 * IPv4 without options, DF as given, protocol UDP; IPv6 flow label 0 (masked anyway).
 * `tlen` counts BTH .. ICRC inclusive. Every field at a fixed offset, so the compiler can
 * merge the stores. Returns the bytes written (28 or 48). */
static size_t pseudo_env(const struct roce_envelope *env, size_t tlen, uint8_t out[PSEUDO_MAX])
{
	uint16_t udp_len = (uint16_t)(UDP_HDR_LEN + tlen);
	uint8_t *udp;

	if (env->ipv6) {
		out[0] = 0x6F; /* version 6, traffic class high nibble masked */
		out[1] = 0xFF; /* traffic class low nibble, flow label */
		out[2] = 0xFF;
		out[3] = 0xFF;
		put16(out + 4, udp_len); /* payload length */
		out[6] = IPPROTO_UDP_;	 /* next header */
		out[7] = 0xFF;		 /* hop limit, masked */
		memcpy(out + 8, env->src, 16);
		memcpy(out + 24, env->dst, 16);
		udp = out + IP6_HDR_LEN;
	} else {
		out[0] = 0x45; /* version 4, IHL 5 */
		out[1] = 0xFF; /* TOS, masked */
		put16(out + 2, (uint16_t)(IP4_HDR_LEN + udp_len));
		put16(out + 4, env->ip_id);
		put16(out + 6, env->df ? 0x4000 : 0); /* flags, fragment offset 0 */
		out[8] = 0xFF;			      /* TTL, masked */
		out[9] = IPPROTO_UDP_;
		out[10] = 0xFF; /* header checksum, masked */
		out[11] = 0xFF;
		memcpy(out + 12, env->src + 12, 4); /* ::ffff:a.b.c.d */
		memcpy(out + 16, env->dst + 12, 4);
		udp = out + IP4_HDR_LEN;
	}
	put16(udp, env->sport);
	put16(udp + 2, env->dport);
	put16(udp + 4, udp_len);
	udp[6] = 0xFF; /* UDP checksum, masked */
	udp[7] = 0xFF;
	return (size_t)(udp + UDP_HDR_LEN - out);
}

/* Raw register (not yet complemented) over pseudo-header + the packet after its BTH. */
static uint32_t icrc_state(const struct roce_envelope *env, const uint8_t *pkt, size_t len)
{
	uint8_t hdr[PSEUDO_MAX + SHORT_REST];
	size_t n_bth = len < ROCE_BTH_LEN ? len : ROCE_BTH_LEN;
	size_t rest = len - n_bth;
	size_t n = pseudo_env(env, len + ROCE_ICRC_LEN, hdr);

	n = (size_t)(put_bth(hdr + n, pkt, n_bth) - hdr);
	if (rest < SHORT_REST) {
		memcpy(hdr + n, pkt + n_bth, rest);
		return crc32_ieee_raw(ICRC_SEED, hdr, n + rest);
	}
	return crc32_ieee_raw2(ICRC_SEED, hdr, n, pkt + n_bth, rest);
}

uint32_t roce_icrc(const struct roce_envelope *env, const uint8_t *pkt, size_t len)
{
	return ~icrc_state(env, pkt, len);
}

uint32_t roce_icrc3(const struct roce_envelope *env, const uint8_t *hdr, size_t hlen,
		    const uint8_t *payload, size_t plen, const uint8_t *tail, size_t tlen)
{
	/* Pseudo-header, BTH and the extended headers assembled on the stack, then the payload
	 * in place: one pass (crc32_ieee_raw2), as icrc_state. */
	uint8_t pre[PSEUDO_MAX + ROCE_MAX_HDR_LEN];
	size_t n_bth = hlen < ROCE_BTH_LEN ? hlen : ROCE_BTH_LEN;
	size_t ext = hlen - n_bth;
	if (ext > ROCE_MAX_HDR_LEN)
		ext = ROCE_MAX_HDR_LEN; /* never for a header roce_build_hdrs wrote */
	size_t n = pseudo_env(env, hlen + plen + tlen + ROCE_ICRC_LEN, pre);
	n = (size_t)(put_bth(pre + n, hdr, n_bth) - pre);
	memcpy(pre + n, hdr + n_bth, ext);
	uint32_t s = crc32_ieee_raw2(ICRC_SEED, pre, n + ext, payload, plen);
	return ~crc32_ieee_raw(s, tail, tlen);
}

/* ICRC over real header bytes: `ihl` bytes of IPv4/IPv6/GRH header, then (if `udp`) the UDP
 * header, then BTH .. pad; the last 4 of `frame_len` bytes are the ICRC itself. The caller
 * has checked the header type and that frame_len covers headers + BTH + ICRC. */
static uint32_t icrc_from_headers(const uint8_t *l3, size_t frame_len, size_t ihl, bool udp)
{
	uint8_t hdr[PSEUDO_MAX];
	uint8_t *w = hdr;
	size_t done;

	/* Variant fields to ones (spec 6.2). */
	memcpy(w, l3, ihl);
	if (ihl == IP4_HDR_LEN) {
		w[1] = 0xFF;	      /* TOS */
		w[8] = 0xFF;	      /* TTL */
		w[10] = w[11] = 0xFF; /* header checksum */
	} else {
		w[0] |= 0x0F;		   /* traffic class (high nibble) */
		w[1] = w[2] = w[3] = 0xFF; /* traffic class (low nibble), flow label */
		w[7] = 0xFF;		   /* hop limit */
	}
	w += ihl;
	done = ihl;
	if (udp) {
		memcpy(w, l3 + done, UDP_HDR_LEN);
		w[6] = w[7] = 0xFF; /* UDP checksum */
		w += UDP_HDR_LEN;
		done += UDP_HDR_LEN;
	}
	w = put_bth(w, l3 + done, ROCE_BTH_LEN);
	done += ROCE_BTH_LEN;

	return ~crc32_ieee_raw2(ICRC_SEED, hdr, (size_t)(w - hdr), l3 + done,
				frame_len - ROCE_ICRC_LEN - done);
}

int roce_icrc_frame(const uint8_t *ip, size_t frame_len, uint32_t *icrc_out)
{
	size_t ihl;

	if (frame_len < 1)
		return -EINVAL;
	if ((ip[0] >> 4) == 4) {
		ihl = IP4_HDR_LEN;
		/* IPv4 options would be covered unmasked, but rxe never sends any: refuse. */
		if (frame_len < IP4_HDR_LEN || ip[0] != 0x45 || ip[9] != IPPROTO_UDP_)
			return -EINVAL;
	} else if ((ip[0] >> 4) == 6) {
		ihl = IP6_HDR_LEN;
		if (frame_len < IP6_HDR_LEN || ip[6] != IPPROTO_UDP_)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	if (frame_len < ihl + UDP_HDR_LEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return -EINVAL;
	*icrc_out = icrc_from_headers(ip, frame_len, ihl, true);
	return 0;
}

int roce_icrc_grh(const uint8_t *grh, size_t frame_len, uint32_t *icrc_out)
{
	/* Spec 1.2: IPVer 6, NxtHdr 0x1B (IBA BTH). */
	if (frame_len < IP6_HDR_LEN + ROCE_BTH_LEN + ROCE_ICRC_LEN || (grh[0] >> 4) != 6 ||
	    grh[6] != GRH_NXTHDR_BTH)
		return -EINVAL;
	*icrc_out = icrc_from_headers(grh, frame_len, IP6_HDR_LEN, false);
	return 0;
}

/* Spec 6.1: transmitted least significant byte first. */
void roce_icrc_put(uint8_t out[4], uint32_t icrc)
{
	out[0] = (uint8_t)icrc;
	out[1] = (uint8_t)(icrc >> 8);
	out[2] = (uint8_t)(icrc >> 16);
	out[3] = (uint8_t)(icrc >> 24);
}

uint32_t roce_icrc_get(const uint8_t in[4])
{
	return (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
	       (uint32_t)in[3] << 24;
}

/* Receive check with the IPv4 identification unknown (spec 6.3).
 *
 * The raw register is affine in the message bits: S(id) = S(0) ^ L(id), where L(id) is the
 * register the two ID bytes leave when fed into a zero register and followed by the k bytes
 * that come after them (the rest of the IPv4 header, UDP, BTH .. pad). With I(x) the 16 ID
 * bits as a polynomial (first wire bit = highest degree), feeding bytes into a zero register
 * computes "message * x^32 mod P", so
 *     L(id) = I(x) * x^(8k + 32) mod P.
 * Given D = ICRC(0) ^ ICRC_received (= L(id) if the packet is intact),
 *     U = D * x^-(8k + 32) mod P
 * is the unique residue of degree < 32; it equals I(x) iff its 16 coefficients of degree
 * 16..31 are zero (probability 2^-16 for a corrupted packet), and then the ID can be read off
 * directly. (This is the same algebra as undoing the two table steps through the CRC table's
 * top-byte permutation, folded into the inverse power: x^-32 undoes the register's x^32.)
 * crc32_ieee_shift multiplies by the precomputed x^(-8 * 2^j) for the bits j of k + 4:
 * O(log len) carry-less products, about 80 ns per packet with PCLMULQDQ. */
int roce_icrc_check(const struct roce_envelope *env, const uint8_t *pkt, size_t len,
		    uint16_t *id_out)
{
	/* The hint: IPv6 has no ID (pseudo_env does not read ip_id there). */
	uint16_t hint = env->ipv6 ? 0 : env->ip_id;
	uint32_t rx, d, u;
	int64_t k;
	uint16_t id;

	if (len < ROCE_BTH_LEN + ROCE_ICRC_LEN)
		return -EINVAL;
	rx = roce_icrc_get(pkt + len - ROCE_ICRC_LEN);
	/* With the hint H in place of the ID, D = L(ID) ^ L(H) = L(ID ^ H) (L is linear): D = 0
	 * is the hint right (ID 0 from a softrdma sender, or ID i for the i-th packet of its GSO
	 * train: core/progress.c), found without the inverse power below; else the solve yields
	 * ID ^ H. The envelope is used where it lies: a copy of it, right after the caller's
	 * stores, cost a stalled load per packet (perf, a RoCEv2 WRITE stream's receiver). */
	d = roce_icrc(env, pkt, len - ROCE_ICRC_LEN) ^ rx;
	if (env->ipv6 || d == 0) {
		if (id_out)
			*id_out = hint;
		return d == 0 ? 0 : -EBADMSG;
	}

	/* Bytes after the ID field: rest of the IPv4 header, UDP header, BTH .. pad. */
	k = (int64_t)(IP4_HDR_LEN - IP4_ID_OFF - 2) + UDP_HDR_LEN + (int64_t)(len - ROCE_ICRC_LEN);
	u = crc32_ieee_shift(d, -(k + 4));
	/* Reflected order: bit 31 - j holds x^j. Degrees 16..31 are bits 0..15. */
	if (u & 0xFFFF)
		return -EBADMSG;
	/* Degrees 15..8 (the first ID byte, LSB = x^15) are bits 16..23; degrees 7..0 (the
	 * second byte) are bits 24..31. */
	id = (uint16_t)(((u >> 16) & 0xFF) << 8 | (u >> 24)); /* ID ^ H */

	/* Verify forward: the two ID bytes fed into a zero register and carried through the k
	 * following bytes must reproduce D exactly. This re-derives the answer through
	 * different code (the table-driven CRC, a forward shift) rather than trusting the
	 * algebra above. */
	uint8_t idb[2] = {(uint8_t)(id >> 8), (uint8_t)id};
	if (crc32_ieee_shift(crc32_ieee_raw(0, idb, 2), k) != d)
		return -EBADMSG;
	if (id_out)
		*id_out = id ^ hint;
	return 0;
}

/* ---- UDP source port (spec 1.3; rdma_get_udp_sport, rdma_calc_flow_label) ---- */

static uint16_t flow_label_to_sport(uint32_t fl)
{
	return (uint16_t)(((fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)) | 0xC000);
}

uint16_t roce_udp_sport(uint32_t flow_label, uint32_t lqpn, uint32_t rqpn)
{
	uint32_t fl = flow_label & 0xFFFFF;

	if (!fl) {
		/* Symmetric in the QPNs so both directions hash to the same port. */
		uint64_t v = (uint64_t)lqpn * rqpn;

		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xFFFFF);
	}
	return flow_label_to_sport(fl);
}

uint16_t roce_udp_sport_initial(uint32_t qpn)
{
	/* hash_32(qpn, 14): golden-ratio multiply, keep the top 14 bits. */
	uint32_t h = (uint32_t)(qpn * 0x61C88647u) >> (32 - 14);

	return (uint16_t)(0xC000 + (h & 0x3FFF));
}

/* ---- timers ---- */

/* IBTA table "Encoding for RNR NAK Timer Field" (spec 5.3), in microseconds. Code 0 is the
 * longest (655.36 ms); code 25 is 61.44 ms (rxe's table has the typo 61.41). */
static const uint32_t rnr_us[32] = {
    655360, 10,	   20,	  30,	 40,	60,	80,	120,	160,	240,	320,
    480,    640,   960,	  1280,	 1920,	2560,	3840,	5120,	7680,	10240,	15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

uint32_t roce_rnr_timer_us(uint8_t code)
{
	/* The timer is the 5-bit value field of the AETH syndrome (spec 5.3). */
	return rnr_us[code & 0x1F];
}

uint64_t roce_ack_timeout_ns(uint8_t exp)
{
	/* IBA 9.7.6.1.3 via spec 5.5: 4.096 us * 2^exp, 5-bit exponent, 0 = no timer. */
	exp &= 0x1F;
	if (exp == 0)
		return 0;
	return (uint64_t)4096 << exp;
}
