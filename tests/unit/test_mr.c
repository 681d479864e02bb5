/* Memory-region table: keys, PD and access checks, bounds including va+len overflow,
 * stale keys after deregistration. */
#include "check.h"
#include "obj/obj.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

int main(void)
{
	struct obj_mr_table t;
	static uint8_t buf[4096];
	REQUIRE(obj_mr_table_init(&t, 16) == 0);
	struct obj_mr mr = {.iova = 0x10000,
			    .addr = buf,
			    .length = sizeof(buf),
			    .access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
			    .pd = 7};
	REQUIRE(obj_mr_add(&t, &mr) == 0);
	CHECK(mr.key >= 256);
	int err;
	/* In bounds, right PD, granted access. */
	CHECK(obj_mr_resolve(&t, 7, mr.key, true, 0x10000, 4096, IBV_ACCESS_REMOTE_READ, &err) ==
	      buf);
	CHECK(obj_mr_resolve(&t, 7, mr.key, true, 0x10ff0, 16, IBV_ACCESS_REMOTE_READ, &err) ==
	      buf + 0xff0);
	CHECK(obj_mr_resolve(&t, 7, mr.key, false, 0x10000, 1, IBV_ACCESS_LOCAL_WRITE, &err) ==
	      buf);
	/* Access not granted. */
	CHECK(!obj_mr_resolve(&t, 7, mr.key, true, 0x10000, 8, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, -EACCES);
	/* Wrong PD, unknown key. */
	CHECK(!obj_mr_resolve(&t, 8, mr.key, true, 0x10000, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK(!obj_mr_resolve(&t, 7, mr.key ^ 1, true, 0x10000, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ENOENT);
	CHECK(!obj_mr_resolve(&t, 7, 0, true, 0x10000, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ENOENT);
	/* Bounds: one byte past the end, before the start, and overflowing va+len. */
	CHECK(!obj_mr_resolve(&t, 7, mr.key, true, 0x10001, 4096, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ERANGE);
	CHECK(!obj_mr_resolve(&t, 7, mr.key, true, 0xffff, 2, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ERANGE);
	CHECK(!obj_mr_resolve(&t, 7, mr.key, true, 0x10010, UINT64_MAX - 8, IBV_ACCESS_REMOTE_READ,
			      &err));
	CHECK_EQ(err, -ERANGE);
	CHECK(
	    !obj_mr_resolve(&t, 7, mr.key, true, UINT64_MAX - 4, 8, IBV_ACCESS_REMOTE_READ, &err));
	CHECK_EQ(err, -ERANGE);
	/* Zero length needs no key. */
	CHECK(!obj_mr_resolve(&t, 7, 0, true, 0, 0, IBV_ACCESS_REMOTE_WRITE, &err));
	CHECK_EQ(err, 0);
	/* A stale key does not reach the region registered next in the same slot. */
	uint32_t old = mr.key;
	obj_mr_remove(&t, &mr);
	CHECK(!obj_mr_lookup(&t, old));
	struct obj_mr mr2 = mr;
	REQUIRE(obj_mr_add(&t, &mr2) == 0);
	CHECK(mr2.key != old);
	CHECK(!obj_mr_resolve(&t, 7, old, true, 0x10000, 8, IBV_ACCESS_REMOTE_READ, &err));
	/* Table full. */
	struct obj_mr many[16];
	int added = 0;
	for (int i = 0; i < 16; i++)
		if (obj_mr_add(&t, &many[i]) == 0)
			added++;
	CHECK_EQ(added, 14); /* 15 usable slots, one taken by mr2 */

	/* Keys are not guessed from the order of registrations (as rxe): the slot is the one
	 * after the last given out, not the lowest free, and the key byte is random and never
	 * the slot's previous one. */
	struct obj_mr_table t2;
	REQUIRE(obj_mr_table_init(&t2, 4) == 0);
	struct obj_mr a = mr, b = mr, c = mr;
	REQUIRE(obj_mr_add(&t2, &a) == 0);
	REQUIRE(obj_mr_add(&t2, &b) == 0);
	obj_mr_remove(&t2, &a);
	REQUIRE(obj_mr_add(&t2, &c) == 0);
	CHECK_EQ(c.key >> 8, (b.key >> 8) + 1); /* not a's freed slot */
	obj_mr_remove(&t2, &b);
	obj_mr_remove(&t2, &c);
	/* 512 registrations of one slot (table of one usable slot): key bytes differ from the
	 * previous each time and are not a counter. */
	struct obj_mr_table t3;
	REQUIRE(obj_mr_table_init(&t3, 2) == 0);
	bool seen[256] = {false};
	int distinct = 0, counting = 0;
	uint32_t prev = 0;
	for (int i = 0; i < 512; i++) {
		struct obj_mr m = mr;
		REQUIRE(obj_mr_add(&t3, &m) == 0);
		CHECK_EQ(m.key >> 8, 1u);
		uint8_t kb = (uint8_t)m.key;
		distinct += !seen[kb];
		seen[kb] = true;
		if (i) {
			CHECK(kb != (uint8_t)prev);
			counting += kb == (uint8_t)(prev + 1);
		}
		prev = m.key;
		obj_mr_remove(&t3, &m);
	}
	CHECK(distinct > 200); /* 512 draws of 256 values: about 221 expected */
	CHECK(counting < 20);  /* about 2 expected; a counter gives 511 */
	obj_mr_table_fini(&t2);
	obj_mr_table_fini(&t3);
	/* Registration access rules. */
	CHECK_EQ(obj_mr_check_access(IBV_ACCESS_REMOTE_WRITE), -EINVAL);
	CHECK_EQ(obj_mr_check_access(IBV_ACCESS_REMOTE_ATOMIC), -EINVAL);
	CHECK_EQ(obj_mr_check_access(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), 0);
	CHECK_EQ(obj_mr_check_access(IBV_ACCESS_REMOTE_READ), 0);
	CHECK_EQ(obj_mr_check_access(1u << 12), -EINVAL);
	/* Regression (pyverbs' MW tests): MW_BIND is a valid registration flag, as on rxe. */
	CHECK_EQ(obj_mr_check_access(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND), 0);
	obj_mr_table_fini(&t);
	return check_exit();
}
