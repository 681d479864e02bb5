// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc src/wire/roce/cm_mad.c fuzz/fuzz_cm_mad.c -o fuzz_cm_mad
// clang-format on

/* libFuzzer target for the IB CM MAD codec (cm_mad_parse / cm_mad_build) and rdma_cm's IP
 * private-data header. The input is a MAD (any length). Oracles (abort()):
 * - the input is parsed from an exact-size heap copy (ASan sees overreads); shorter than
 *   CM_MAD_LEN must be -EMSGSIZE; any error leaves the struct all zero;
 * - an accepted MAD is always buildable (parse yields only in-range values), and its build
 *   parses back to the same struct, field by field; building that again gives the same bytes;
 *   the bytes after CM_MAD_LEN never matter;
 * - the rebuilt MAD differs from the input only where the input had bits the struct does not
 *   carry (reserved, alternate path), never in the header's checked bytes or the private data;
 * - cm_cma_hdr_parse on the private data; when it succeeds, cm_cma_hdr_build reproduces those
 *   36 bytes (the reserved low nibble of the IP version byte cleared) and parses the same. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce/cm_mad.h"

static void must(int cond)
{
	if (!cond)
		abort();
}

#define SAME(f) (a->f == b->f)
static int same(const struct cm_mad *a, const struct cm_mad *b)
{
	return SAME(attr) && SAME(status) && SAME(tid) && SAME(attr_mod) && SAME(local_id) &&
	       SAME(remote_id) && SAME(service_id) && SAME(ca_guid) && SAME(qkey) && SAME(qpn) &&
	       SAME(resp_res) && SAME(init_depth) && SAME(remote_cm_timeout) && SAME(transport) &&
	       SAME(e2e_fc) && SAME(psn) && SAME(local_cm_timeout) && SAME(retry_count) &&
	       SAME(pkey) && SAME(mtu) && SAME(rdc_exists) && SAME(rnr_retry) &&
	       SAME(max_cm_retries) && SAME(srq) && SAME(ext_transport) && SAME(slid) &&
	       SAME(dlid) && !memcmp(a->sgid, b->sgid, 16) && !memcmp(a->dgid, b->dgid, 16) &&
	       SAME(flow_label) && SAME(packet_rate) && SAME(traffic_class) && SAME(hop_limit) &&
	       SAME(sl) && SAME(subnet_local) && SAME(local_ack_timeout) &&
	       SAME(target_ack_delay) && SAME(failover) && SAME(msg_rejected) && SAME(ari_len) &&
	       SAME(reason) && !memcmp(a->ari, b->ari, CM_MAD_ARI_MAX) && SAME(msg_mraed) &&
	       SAME(service_timeout) && SAME(sidr_status) && !memcmp(a->pd, b->pd, CM_MAD_PD_MAX);
}

static int all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

static void check_cma_hdr(const uint8_t *pd)
{
	struct cm_cma_hdr h, g;
	uint8_t out[CM_MAD_CMA_HDR_LEN];

	if (cm_cma_hdr_parse(pd, &h) != 0) {
		must(all_zero(&h, sizeof(h)));
		return;
	}
	must(cm_cma_hdr_build(&h, out) == CM_MAD_CMA_HDR_LEN);
	must(out[0] == pd[0] && out[1] == (pd[1] & 0xF0));
	must(memcmp(out + 2, pd + 2, CM_MAD_CMA_HDR_LEN - 2) == 0);
	must(cm_cma_hdr_parse(out, &g) == 0);
	must(g.ipv6 == h.ipv6 && g.sport == h.sport && !memcmp(g.src, h.src, 16) &&
	     !memcmp(g.dst, h.dst, 16));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[CM_MAD_LEN], again[CM_MAD_LEN];
	struct cm_mad m, p;
	uint8_t *copy;
	size_t pd;
	int r;

	if (size > 4096)
		return 0;
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	r = cm_mad_parse(copy, size, &m);
	if (size < CM_MAD_LEN)
		must(r == -EMSGSIZE);
	if (r != 0) {
		must(r == -EMSGSIZE || r == -EPROTO || r == -EPROTONOSUPPORT || r == -EBADMSG);
		must(all_zero(&m, sizeof(m)));
		free(copy);
		return 0;
	}

	pd = cm_mad_pd_size(m.attr);
	must(pd > 0 && pd <= CM_MAD_PD_MAX && all_zero(m.pd + pd, CM_MAD_PD_MAX - pd));
	must(m.ari_len <= CM_MAD_ARI_MAX);

	must(cm_mad_build(&m, out) == CM_MAD_LEN);
	must(cm_mad_parse(out, sizeof(out), &p) == 0);
	must(same(&m, &p));
	must(cm_mad_build(&p, again) == CM_MAD_LEN);
	must(memcmp(out, again, CM_MAD_LEN) == 0);

	/* What the struct carries comes back as it was: the checked header bytes, status, TID,
	 * attribute, modifier, and the private data at the end of the body. */
	must(memcmp(out, copy, 6) == 0 && memcmp(out + 8, copy + 8, 10) == 0 &&
	     memcmp(out + 20, copy + 20, 4) == 0);
	must(memcmp(out + CM_MAD_LEN - pd, copy + CM_MAD_LEN - pd, pd) == 0);
	/* Reserved header bytes go out as zero. */
	must(out[6] == 0 && out[7] == 0 && out[18] == 0 && out[19] == 0);

	/* Bytes after the MAD do not matter. */
	if (size > CM_MAD_LEN) {
		must(cm_mad_parse(copy, CM_MAD_LEN, &p) == 0);
		must(same(&m, &p));
	}

	check_cma_hdr(m.pd);
	free(copy);
	return 0;
}
