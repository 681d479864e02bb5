/* The rest of libibverbs' public interface (rdma-core 44's IBVERBS_1.x nodes, see
 * ../shared/spec/verbs-abi.md), so that softrdma can stand in for libibverbs.so.1: small
 * helpers done properly (rates, fork, GID table), kernel-interface helpers that have no
 * meaning without a kernel (no-ops), and features softrdma does not have yet, which fail with
 * the errno rdma-core gives for an unsupported operation (EOPNOTSUPP). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "api/api.h"
#include "wire/roce/ece.h"

/* ---- rates (IBTA static rate encoding) ---- */

static const struct {
	enum ibv_rate rate;
	int mult; /* multiple of 2.5 Gbit/s, 0: not a multiple */
	int mbps;
} rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},   {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 0, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == rate && rates[i].mult)
			return rates[i].mult;
	return -1;
}

enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mult && rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* ---- fork: softrdma's memory is ordinary memory, nothing to protect ---- */

int ibv_fork_init(void)
{
	return 0;
}

int ibv_dofork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

int ibv_dontfork_range(void *base, size_t size);
int ibv_dontfork_range(void *base, size_t size)
{
	(void)base;
	(void)size;
	return 0;
}

enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* ---- the kernel interface: there is none ---- */

const char *ibv_get_sysfs_path(void);
const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/* No sysfs files describe softrdma's devices (ibv_devinfo then omits board_id). */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	(void)dir;
	(void)file;
	(void)buf;
	(void)size;
	return -1;
}

/* Conversions from kernel command structures, used by the kernel-backed librdmacm only. */
void ibv_copy_path_rec_from_kern(void *dst, const void *src);
void ibv_copy_path_rec_from_kern(void *dst, const void *src)
{
	(void)dst;
	(void)src;
}

void ibv_copy_path_rec_to_kern(void *dst, const void *src);
void ibv_copy_path_rec_to_kern(void *dst, const void *src)
{
	(void)dst;
	(void)src;
}

void ibv_copy_qp_attr_from_kern(void *dst, const void *src);
void ibv_copy_qp_attr_from_kern(void *dst, const void *src)
{
	(void)dst;
	(void)src;
}

void ibv_copy_ah_attr_from_kern(void *dst, const void *src);
void ibv_copy_ah_attr_from_kern(void *dst, const void *src)
{
	(void)dst;
	(void)src;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	(void)cmd_fd;
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	(void)context;
	(void)pd_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	(void)pd;
	(void)mr_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	(void)context;
	(void)dm_handle;
	errno = EOPNOTSUPP;
	return NULL;
}

void ibv_unimport_pd(struct ibv_pd *pd)
{
	(void)pd;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	(void)mr;
}

void ibv_unimport_dm(struct ibv_dm *dm)
{
	(void)dm;
}

/* ---- devices and GIDs ---- */

int ibv_get_device_index(struct ibv_device *device)
{
	int n, i = 0;
	for (struct sr_device *d = sr_device_list(&n); d; d = d->next, i++)
		if (&d->ibdev == device)
			return i;
	return -1;
}

/* driver.h's enum ibv_gid_type_sysfs: IB / RoCE v1 = 0, RoCE v2 = 1 (ibv_devinfo). */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       int *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type)
{
	struct ibv_gid_entry e;
	int r = _ibv_query_gid_ex(context, port_num, index, &e, 0, sizeof(e));
	if (r) {
		errno = r;
		return -1;
	}
	*type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
	return 0;
}

/* Every valid entry, or -EINVAL if they do not all fit: the kernel's query (and rdma-core's
 * sysfs fallback) fails rather than return part of the table, so a caller never mistakes a
 * prefix for the whole. */
ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags, size_t entry_size)
{
	if (!context || (max_entries && !entries) || flags || entry_size < sizeof(*entries))
		return -EINVAL;
	size_t n = 0;
	for (uint32_t i = 0;; i++) {
		struct ibv_gid_entry e;
		int r = _ibv_query_gid_ex(context, 1, i, &e, 0, sizeof(e));
		if (r == ENODATA)
			break;
		if (r)
			return -r;
		if (n == max_entries)
			return -EINVAL;
		char *dst = (char *)entries + n * entry_size;
		memset(dst, 0, entry_size);
		memcpy(dst, &e, sizeof(e));
		n++;
	}
	return (ssize_t)n;
}

int ibv_resolve_eth_l2_from_gid(struct ibv_context *context, struct ibv_ah_attr *attr,
				uint8_t eth_mac[6], uint16_t *vid)
{
	/* softrdma sends through the kernel's IP stack: it never needs the peer's MAC. */
	(void)context;
	(void)attr;
	(void)eth_mac;
	(void)vid;
	return EOPNOTSUPP;
}

/* ---- ECE: selective repeat between softrdma QPs (wire/roce/ece.h) ----
 * RoCE RC QPs only: selective repeat is a RoCE RC engine's (eng_qp_set_sr); iWARP QPs (TCP
 * recovers their losses) and the other types answer EOPNOTSUPP, as rxe and siw for every QP.
 * rdma-core's semantics (ibv_query_ece(3), ibv_set_ece(3); libibverbs verbs.c, mlx5 qp.c):
 * query returns the QP's current ECE, which before any ibv_set_ece is what it offers (vendor
 * 0xFFFFFF, the magic and the SR bit); ibv_set_ece takes the peer's ECE and keeps what both
 * support, written back to ece->options (IN/OUT), and query then returns that. Programs that
 * exchange ECE themselves (pyverbs' rdma_cm tests) pass the peer's value to ibv_set_ece as
 * they got it, so any vendor and options are taken: mlx5 masks the options it does not
 * support; a foreign vendor ID, which mlx5 refuses with EINVAL (librdmacm never passes one:
 * it sends its own vendor ID with options 0 then), here means "not softrdma" and the QP keeps
 * go-back-N (options 0), so that no program fails its connection for it. Errors are returned
 * and set in errno, as libibverbs and mlx5 do. */

/* The softrdma RoCE RC QP behind ibqp, or NULL. */
static struct sr_qp *ece_qp(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	return qp->iqp || !qp->eqp || ibqp->qp_type != IBV_QPT_RC ? NULL : qp;
}

int ibv_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	if (!ibqp || !ece)
		return errno = EINVAL;
	struct sr_qp *qp = ece_qp(ibqp);
	if (!qp)
		return errno = EOPNOTSUPP;
	core_lock(qp->ctx->core);
	uint32_t options = qp->ctx->no_sr ? SR_ECE_MAGIC : SR_ECE_OPTIONS;
	if (qp->ece_set)
		options =
		    (qp->ece_options & ~SR_ECE_OPT_SR) | (eng_qp_sr(qp->eqp) ? SR_ECE_OPT_SR : 0);
	core_unlock(qp->ctx->core);
	ece->vendor_id = SR_ECE_VENDOR_ID;
	ece->options = options;
	ece->comp_mask = 0;
	return 0;
}

int ibv_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	if (!ibqp || !ece)
		return errno = EINVAL;
	/* libibverbs' ibv_set_ece, before the provider: no vendor, no ECE. */
	if (!ece->vendor_id)
		return errno = EOPNOTSUPP;
	struct sr_qp *qp = ece_qp(ibqp);
	if (!qp)
		return errno = EOPNOTSUPP;
	if (ece->comp_mask) /* no optional fields are defined */
		return errno = EINVAL;
	/* What both sides support: the SR bit only when the peer is softrdma and offers it;
	 * the magic when the peer is softrdma; nothing from another vendor. */
	bool ours = ece->vendor_id == SR_ECE_VENDOR_ID &&
		    ece->options >> SR_ECE_MAGIC_SHIFT == SR_ECE_MAGIC >> SR_ECE_MAGIC_SHIFT;
	bool sr = sr_ece_is_sr(ece->vendor_id, ece->options) && !qp->ctx->no_sr;
	uint32_t options = ours ? SR_ECE_MAGIC | (sr ? SR_ECE_OPT_SR : 0) : 0;
	core_lock(qp->ctx->core);
	int r = eng_qp_set_sr(qp->eqp, sr);
	if (r == 0) {
		qp->ece_set = true;
		qp->ece_options = options;
	}
	core_unlock(qp->ctx->core);
	if (r < 0)
		return errno = -r;
	ece->options = options;
	return 0;
}

/* ---- not (yet) supported ---- */

struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova,
				 int fd, int access)
{
	(void)pd;
	(void)offset;
	(void)length;
	(void)iova;
	(void)fd;
	(void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	/* RoCE places in PSN order and iWARP in stream order, but neither promises that a
	 * polled receive implies every earlier byte is in memory in order: say no, as rxe. */
	return 0;
}
