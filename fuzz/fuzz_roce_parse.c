// clang-format off
// Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -Isrc src/util/crc.c src/wire/roce/*.c fuzz/fuzz_roce_parse.c -o fuzz_roce_parse -pthread
// clang-format on

/* libFuzzer target for the RoCE receive path: roce_parse on arbitrary bytes; for accepted
 * packets, roce_build must reproduce a packet that parses to the same fields (and the same
 * bytes when PadCnt is the canonical one); roce_icrc_check must never read out of bounds and
 * must accept the packet after its ICRC has been recomputed for a known ID, reporting that ID.
 * The first 2 input bytes choose the IPv4 ID and IPv4/IPv6; the rest is the UDP payload. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/roce/roce.h"

static void must(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t out[70000], copy[70000];
	struct roce_envelope env;
	struct roce_pkt p, q;
	uint16_t id, got;

	if (size < 2 || size - 2 > sizeof(copy))
		return 0;
	memset(&env, 0, sizeof(env));
	env.ipv6 = data[0] & 1;
	env.src[10] = env.src[11] = env.dst[10] = env.dst[11] = 0xFF;
	env.src[15] = 1;
	env.dst[15] = 2;
	env.df = true;
	env.sport = 0xC000 | data[1];
	env.dport = ROCE_UDP_PORT;
	id = (uint16_t)(data[0] << 8 | data[1]);
	data += 2;
	size -= 2;

	/* The check on untouched input: any verdict, no crash. */
	(void)roce_icrc_check(&env, data, size, &got);

	if (roce_parse(data, size, &p) != ROCE_ERR_NONE)
		return 0;
	must(p.payload >= data && p.payload + p.payload_len <= data + size);
	must(p.bth.padcnt <= 3 && p.bth.tver == 0);

	size_t n = roce_build(&p, out, sizeof(out));
	must(n == roce_hdr_len(p.bth.opcode) + p.payload_len + ((-p.payload_len) & 3) + 4);
	must(roce_parse(out, n, &q) == ROCE_ERR_NONE);
	must(q.bth.opcode == p.bth.opcode && q.bth.psn == p.bth.psn && q.bth.dqpn == p.bth.dqpn &&
	     q.bth.pkey == p.bth.pkey && q.payload_len == p.payload_len && q.reth.va == p.reth.va &&
	     q.aeth.msn == p.aeth.msn && q.deth.src_qpn == p.deth.src_qpn &&
	     q.atomic.compare == p.atomic.compare && memcmp(q.imm, p.imm, 4) == 0 &&
	     memcmp(q.payload, p.payload, p.payload_len) == 0);
	if (p.bth.padcnt == ((-p.payload_len) & 3))
		must(n == size);

	/* With a correct ICRC for ID `id`, the check passes and finds `id`. */
	memcpy(copy, data, size);
	env.ip_id = id;
	roce_icrc_put(copy + size - 4, roce_icrc(&env, copy, size - 4));
	env.ip_id = 0;
	must(roce_icrc_check(&env, copy, size, &got) == 0);
	if (!env.ipv6)
		must(got == id);
	return 0;
}
