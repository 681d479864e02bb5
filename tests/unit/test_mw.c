/* Memory-window table (obj/mw.c): keys apart from the regions', the bind rules of both types,
 * invalidation, and the checks of a remote access through a window (key, PD, type 2 QP,
 * rights, the window's and the region's bounds, zero-based windows). */
#include "check.h"
#include "obj/obj.h"

#include <errno.h>
#include <stdint.h>

#define PD  7
#define QPN 0x10011
#define RW  (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE)

static uint8_t buf[4096];
static struct obj_mr_table mrs;
static struct obj_mw_table mws;
static struct obj_mr mr = {.iova = 0x10000,
			   .addr = buf,
			   .length = sizeof(buf),
			   .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND,
			   .pd = PD};

static struct obj_mw_bind bind_of(const struct obj_mw *mw, uint64_t addr, uint64_t len,
				  unsigned access)
{
	struct obj_mw_bind b = {.mw_rkey = mw->key,
				.new_rkey = ibv_inc_rkey(mw->key),
				.addr = addr,
				.length = len,
				.access = access};
	return b;
}

static void *resolve(const struct obj_mw *mw, uint32_t qpn, uint64_t va, uint64_t len,
		     unsigned access, int *err)
{
	return obj_mw_resolve(&mws, PD, qpn, mw->key, va, len, access, err);
}

static void keys(void)
{
	struct obj_mw a = {.type = IBV_MW_TYPE_1, .pd = PD}, bad = {.type = 3, .pd = PD};

	REQUIRE(obj_mw_add(&mws, &a) == 0);
	CHECK(obj_key_is_mw(a.key));
	CHECK(!obj_key_is_mw(mr.key));
	CHECK(obj_mw_lookup(&mws, a.key) == &a);
	CHECK(!obj_mw_lookup(&mws, a.key ^ 1));
	CHECK(!obj_mw_lookup(&mws, mr.key));
	CHECK_EQ(obj_mw_add(&mws, &bad), -EINVAL);
	/* A removed window's key reaches nothing, and the next window in its slot gets another. */
	uint32_t old = a.key;
	obj_mw_remove(&mws, &a);
	CHECK(!obj_mw_lookup(&mws, old));
	REQUIRE(obj_mw_add(&mws, &a) == 0);
	CHECK(a.key != old);
	obj_mw_remove(&mws, &a);
	/* The regions' table stays below the windows' key space. */
	struct obj_mr_table big;
	CHECK_EQ(obj_mr_table_init(&big, OBJ_MW_INDEX_BASE + 1), -EINVAL);
	/* Table full: 3 usable slots in a table of 4. */
	struct obj_mw_table t;
	struct obj_mw w[5];
	int added = 0;
	REQUIRE(obj_mw_table_init(&t, 4) == 0);
	for (int i = 0; i < 5; i++) {
		w[i] = (struct obj_mw){.type = IBV_MW_TYPE_2, .pd = PD};
		added += obj_mw_add(&t, &w[i]) == 0;
	}
	CHECK_EQ(added, 3);
	obj_mw_table_fini(&t);
}

static void type1(void)
{
	struct obj_mw mw = {.type = IBV_MW_TYPE_1, .pd = PD};
	struct obj_mw_bind b;
	int err;

	REQUIRE(obj_mw_add(&mws, &mw) == 0);
	/* Unbound: the key reaches nothing. */
	CHECK(!resolve(&mw, QPN, 0x10000, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	/* Bound to [0x10100, +256) for remote write: any QP of the PD, inside the window. */
	b = bind_of(&mw, 0x10100, 256, RW);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), 0);
	CHECK_EQ(mw.key, b.new_rkey);
	CHECK_EQ(mr.nmw, 1);
	CHECK(resolve(&mw, QPN, 0x10100, 256, IBV_ACCESS_REMOTE_WRITE, &err) == buf + 0x100);
	CHECK(resolve(&mw, QPN + 1, 0x101ff, 1, IBV_ACCESS_REMOTE_WRITE, &err) == buf + 0x1ff);
	/* Rights of the window, not of the region; its bounds, not the region's. */
	CHECK(!resolve(&mw, QPN, 0x10100, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -EACCES);
	CHECK(!resolve(&mw, QPN, 0x100ff, 2, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ERANGE);
	CHECK(!resolve(&mw, QPN, 0x101ff, 2, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ERANGE);
	CHECK(!resolve(&mw, QPN, 0x10100, UINT64_MAX, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ERANGE);
	/* Another PD, a stale key; zero length needs nothing. */
	CHECK(
	    !obj_mw_resolve(&mws, PD + 1, QPN, mw.key, 0x10100, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK(
	    !obj_mw_resolve(&mws, PD, QPN, mw.key - 1, 0x10100, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK(!resolve(&mw, QPN, 0, 0, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, 0);
	/* A type 1 window is rebound in place (a new key), never invalidated. */
	uint32_t k1 = mw.key;
	b = bind_of(&mw, 0x10000, 4096, IBV_ACCESS_REMOTE_READ);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), 0);
	CHECK(mw.key != k1);
	CHECK_EQ(mr.nmw, 1);
	CHECK(!obj_mw_resolve(&mws, PD, QPN, k1, 0x10000, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK(resolve(&mw, QPN, 0x10000, 4096, IBV_ACCESS_REMOTE_READ, &err) == buf);
	CHECK_EQ(obj_mw_invalidate(&mws, PD, 0, mw.key), -EINVAL); /* o10-37.2.26 */
	/* Refused binds change nothing: a stale key, zero-based, a region without MW_BIND or in
	 * another PD, write without local write, out of the region, unknown rights. */
	uint32_t k2 = mw.key;
	struct obj_mr plain = mr, other = mr, ro = mr;
	plain.access = IBV_ACCESS_LOCAL_WRITE;
	other.pd = PD + 1;
	ro.access = IBV_ACCESS_MW_BIND;
	plain.nmw = other.nmw = ro.nmw = 0;
	b = bind_of(&mw, 0x10000, 8, RW);
	b.mw_rkey = k1;
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), -EINVAL);
	b = bind_of(&mw, 0x10000, 8, RW | IBV_ACCESS_ZERO_BASED);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), -EINVAL);
	b = bind_of(&mw, 0x10000, 8, RW);
	CHECK_EQ(obj_mw_bind(&mws, &plain, PD, QPN, &b), -EINVAL); /* C10-73 */
	CHECK_EQ(obj_mw_bind(&mws, &other, PD, QPN, &b), -EINVAL);
	CHECK_EQ(obj_mw_bind(&mws, &ro, PD, QPN, &b), -EINVAL); /* C10-74 */
	b = bind_of(&mw, 0x10000, 8, IBV_ACCESS_REMOTE_READ);
	CHECK_EQ(obj_mw_bind(&mws, &ro, PD, QPN, &b), 0); /* read needs no local write */
	CHECK_EQ(mr.nmw, 0);
	CHECK_EQ(ro.nmw, 1);
	k2 = mw.key;
	b = bind_of(&mw, 0x10ff8, 9, RW); /* C10-75 */
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), -EINVAL);
	b = bind_of(&mw, 0x10000, 8, RW | IBV_ACCESS_MW_BIND);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), -EINVAL);
	CHECK_EQ(mw.key, k2);
	CHECK_EQ(ro.nmw, 1);
	/* Length 0 unbinds (the region named is ignored) and the key changes again. */
	b = bind_of(&mw, 0, 0, 0);
	CHECK_EQ(obj_mw_bind(&mws, NULL, PD, QPN, &b), 0);
	CHECK(mw.key != k2);
	CHECK_EQ(ro.nmw, 0);
	CHECK(!resolve(&mw, QPN, 0x10000, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ENOENT);
	/* Removing a bound window frees its region. */
	b = bind_of(&mw, 0x10000, 8, RW);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), 0);
	CHECK_EQ(mr.nmw, 1);
	obj_mw_remove(&mws, &mw);
	CHECK_EQ(mr.nmw, 0);
}

static void type2(void)
{
	struct obj_mw mw = {.type = IBV_MW_TYPE_2, .pd = PD};
	struct obj_mw_bind b;
	int err;

	REQUIRE(obj_mw_add(&mws, &mw) == 0);
	uint32_t alloc_key = mw.key;
	/* Needs a region, a length, and a QP of its PD (o10-37.2.40, C10-72). */
	b = bind_of(&mw, 0x10000, 0, RW);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), -EINVAL);
	b = bind_of(&mw, 0x10000, 64, RW);
	CHECK_EQ(obj_mw_bind(&mws, NULL, PD, QPN, &b), -EINVAL);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD + 1, QPN, &b), -EINVAL);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), 0);
	/* Only through the QP that bound it. */
	CHECK(resolve(&mw, QPN, 0x10000, 64, IBV_ACCESS_REMOTE_WRITE, &err) == buf);
	CHECK(!resolve(&mw, QPN + 1, 0x10000, 64, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	/* Bound already: no second bind (o10-37.2.30). */
	uint32_t k = mw.key;
	b = bind_of(&mw, 0x10000, 64, RW);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), -EINVAL);
	CHECK_EQ(mw.key, k);
	/* Invalidation: remotely only through its QP; locally from its PD. */
	CHECK_EQ(obj_mw_invalidate(&mws, PD, QPN + 1, k), -EINVAL);
	CHECK_EQ(obj_mw_invalidate(&mws, PD + 1, 0, k), -EINVAL);
	CHECK_EQ(obj_mw_invalidate(&mws, PD, 0, k ^ 0x80), -EINVAL);
	CHECK_EQ(obj_mw_invalidate(&mws, PD, QPN, k), 0);
	CHECK_EQ(mr.nmw, 0);
	CHECK(!resolve(&mw, QPN, 0x10000, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK_EQ(obj_mw_invalidate(&mws, PD, 0, k), -EINVAL); /* not bound any more */
	/* Bound again after the invalidation, named by its index with the key it had at
	 * allocation (ibv_mw.rkey, which type 2 binds leave alone); the key byte is the new one.
	 * Zero-based: va 0 is the window's first byte; bounds are the window's. */
	b = bind_of(&mw, 0x10800, 128, RW | IBV_ACCESS_ZERO_BASED);
	b.mw_rkey = alloc_key;
	b.new_rkey = ibv_inc_rkey(k);
	CHECK_EQ(obj_mw_bind(&mws, &mr, PD, QPN, &b), 0);
	CHECK_EQ(mw.key, ibv_inc_rkey(k));
	CHECK(resolve(&mw, QPN, 0, 128, IBV_ACCESS_REMOTE_WRITE, &err) == buf + 0x800);
	CHECK(resolve(&mw, QPN, 127, 1, IBV_ACCESS_REMOTE_WRITE, &err) == buf + 0x87f);
	CHECK(!resolve(&mw, QPN, 127, 2, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ERANGE);
	CHECK(!resolve(&mw, QPN, 0x10800, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ERANGE);
	/* Its QP gone: still bound (holds the region), reached by no QP, invalidated locally. */
	obj_mw_qp_gone(&mws, QPN);
	CHECK(!resolve(&mw, QPN, 0, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK_EQ(mr.nmw, 1);
	CHECK_EQ(obj_mw_invalidate(&mws, PD, QPN, mw.key), -EINVAL);
	CHECK_EQ(obj_mw_invalidate(&mws, PD, 0, mw.key), 0);
	CHECK_EQ(mr.nmw, 0);
	obj_mw_remove(&mws, &mw);
}

/* A QP's destroy reaches its type 2 windows wherever they sit in the table: behind a slot
 * freed earlier, and after windows of other QPs (obj_mw_qp_gone stops at the last window). */
static void qp_gone_gaps(void)
{
	struct obj_mw w[4];
	int err;

	for (int i = 0; i < 4; i++) {
		w[i] = (struct obj_mw){.type = IBV_MW_TYPE_2, .pd = PD};
		REQUIRE(obj_mw_add(&mws, &w[i]) == 0);
	}
	obj_mw_remove(&mws, &w[0]); /* a hole in front */
	for (int i = 1; i < 4; i++) {
		struct obj_mw_bind b = bind_of(&w[i], 0x10000, 64, RW);
		REQUIRE(obj_mw_bind(&mws, &mr, PD, i == 3 ? QPN : QPN + 1, &b) == 0);
	}
	obj_mw_qp_gone(&mws, QPN);
	CHECK(!resolve(&w[3], QPN, 0x10000, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK(resolve(&w[2], QPN + 1, 0x10000, 8, IBV_ACCESS_REMOTE_WRITE, &err) == buf);
	for (int i = 1; i < 4; i++) {
		CHECK_EQ(obj_mw_invalidate(&mws, PD, 0, w[i].key), 0);
		obj_mw_remove(&mws, &w[i]);
	}
}

int main(void)
{
	REQUIRE(obj_mr_table_init(&mrs, 16) == 0);
	REQUIRE(obj_mw_table_init(&mws, 16) == 0);
	REQUIRE(obj_mr_add(&mrs, &mr) == 0);
	keys();
	type1();
	type2();
	qp_gone_gaps();
	CHECK_EQ(mws.k.used, 0);
	obj_mw_table_fini(&mws);
	obj_mr_table_fini(&mrs);
	return check_exit();
}
