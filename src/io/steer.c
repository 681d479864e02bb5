/* Multi-process steering of a UDP reuseport group by DestQP slot (design: io.h). */
#define _GNU_SOURCE
#include "io/steer.h"
#include "io/rundir.h"
#include "util/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

#define REG_MAGIC	   0x53524547u /* "SREG", written last when a registry is initialised */
#define REG_VERSION	   1u
#define REG_NSLOTS	   256	     /* slot 0 is never a member's: it is the GSI / default slot */
#define REG_LOCK_BASE	   (1 << 20) /* liveness lock of slot s: byte REG_LOCK_BASE + s (past EOF) */
#define PROBE_MAGIC	   0x53525350u /* "SRSP" */
#define PROBE_OPCODE	   0xFF	       /* IBTA 9.2: 0xC0-0xFF are manufacturer-specific opcodes */
#define MS		   1000000ull
#define RESEND_MIN_NS	   (2 * MS)
#define RESEND_MAX_NS	   (200 * MS)
#define FORCED_CHECK_NS	   (1 * MS)
#define SELF_PROBE_WAIT_MS 100
#define ROUND_WAIT_MS	   20
#define INCOMPLETE_NS	   (100 * MS)

/* One member, indexed by slot. Written only under the registry flock. */
struct reg_member {
	int32_t pid;   /* 0: free (informational otherwise: liveness is the OFD lock) */
	int32_t index; /* reuseport index, valid when index_epoch == reg.epoch */
	uint32_t index_epoch;
	uint32_t reserved;
};

/* The shared registry file, mmap'ed by every member. Written only under flock; the fields other
 * processes peek at without it (epoch, attached_epoch, nmembers, a member's index) are accessed
 * with atomic builtins. */
struct reg {
	uint32_t magic;
	uint32_t version;
	uint64_t token;		 /* random, proves a probe comes from a member */
	uint32_t epoch;		 /* incremented by every membership change */
	uint32_t attached_epoch; /* the attached program reflects this epoch */
	uint64_t epoch_ns;	 /* CLOCK_MONOTONIC when epoch began */
	uint64_t round_ns;	 /* last probe burst */
	uint32_t resends;	 /* bursts in this epoch after the first (for back-off) */
	int32_t nmembers;
	int32_t attached_default;  /* index that receives slot 0 / unowned slots */
	uint8_t table[REG_NSLOTS]; /* attached slot -> index, 0xFF none (for inspection) */
	struct reg_member m[REG_NSLOTS];
};

#define RD(x)	 __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WR(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

struct io_steer {
	int sock;  /* main socket (udp.c's), member of the group */
	int regfd; /* holds the flock (transiently) and our liveness OFD lock */
	struct reg *reg;
	char path[256];
	struct sockaddr_storage self; /* local addr:port, where probes go */
	socklen_t selflen;
	int family;
	uint8_t slot;
	uint64_t check_ns;
	_Atomic uint64_t *cnt;
	/* local view of the registry, used by steer_rx without a lock */
	uint32_t view_epoch;
	uint64_t owned[REG_NSLOTS / 64]; /* slots of other live members */
	bool is_default;
	/* work deferred from steer_rx */
	bool claim_pending;
	bool claim_conflict;
	uint32_t claim_epoch;
	int claim_index;
	bool check_pending;
	uint64_t next_check_ns;
	uint64_t last_forced_ns;
	bool incomplete_counted;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void cnt(struct io_steer *st, enum io_udp_counter c)
{
	io_cnt_add(&st->cnt[c], 1);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- locks ---- */

static int reg_lock(struct io_steer *st, bool wait)
{
	while (flock(st->regfd, LOCK_EX | (wait ? 0 : LOCK_NB)) != 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static void reg_unlock(struct io_steer *st)
{
	flock(st->regfd, LOCK_UN);
}

static int ofd_set(int fd, int slot, short type)
{
	struct flock fl = {
	    .l_type = type, .l_whence = SEEK_SET, .l_start = REG_LOCK_BASE + slot, .l_len = 1};
	return fcntl(fd, F_OFD_SETLK, &fl) != 0 ? -errno : 0;
}

/* A member is alive while its process keeps the registry file open with its slot byte locked;
 * the kernel drops the lock on exit or crash. */
static bool member_alive(struct io_steer *st, int slot)
{
	struct flock fl = {
	    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = REG_LOCK_BASE + slot, .l_len = 1};
	if (fcntl(st->regfd, F_OFD_GETLK, &fl) != 0) {
		cnt(st, IO_UDP_C_steer_errors);
		return true; /* cannot tell: keep it */
	}
	return fl.l_type != F_UNLCK;
}

/* ---- registry helpers (all under the flock) ---- */

static int count_members(const struct reg *r)
{
	int n = 0;
	for (int s = 1; s < REG_NSLOTS; s++)
		n += r->m[s].pid != 0;
	return n;
}

/* Removes dead members; returns how many. */
static int gc(struct io_steer *st)
{
	struct reg *r = st->reg;
	int removed = 0;
	for (int s = 1; s < REG_NSLOTS; s++) {
		if (s == st->slot || r->m[s].pid == 0)
			continue;
		if (member_alive(st, s))
			continue;
		memset(&r->m[s], 0, sizeof(r->m[s]));
		removed++;
		cnt(st, IO_UDP_C_steer_gc);
	}
	if (removed)
		WR(r->nmembers, count_members(r));
	return removed;
}

/* True when every member has an index in epoch e and together they are exactly 0..n-1 (the
 * kernel's indices always are). */
static bool all_claimed(const struct reg *r, uint32_t e)
{
	bool seen[REG_NSLOTS] = {false};
	int n = 0;
	for (int s = 1; s < REG_NSLOTS; s++) {
		const struct reg_member *m = &r->m[s];
		if (m->pid == 0)
			continue;
		n++;
		if (m->index_epoch != e || m->index < 0 || m->index >= REG_NSLOTS || seen[m->index])
			return false;
		seen[m->index] = true;
	}
	for (int i = 0; i < n; i++) {
		if (!seen[i])
			return false;
	}
	return true;
}

static bool index_claimed(const struct reg *r, uint32_t e, int k)
{
	for (int s = 1; s < REG_NSLOTS; s++) {
		const struct reg_member *m = &r->m[s];
		if (m->pid != 0 && m->index_epoch == e && m->index == k)
			return true;
	}
	return false;
}

/* ---- the cBPF program ---- */

/* For a UDP reuseport group the program runs with the UDP header pulled: offset 0 is the BTH
 * (reuseport_select_sock is called with hdr_len = sizeof(struct udphdr)). It returns a socket
 * index; an index >= the group size makes the kernel fall back to its flow hash. A load past the
 * end of a short packet ends the program with 0 (index 0). */
static int attach(struct io_steer *st)
{
	struct reg *r = st->reg;
	struct sock_filter prog[7 + 2 * REG_NSLOTS + 1];
	int n = 0, dflt = -1;

	/* A = DestQP (BTH bytes 5..7); DestQP 0 is a probe: return its PSN (bytes 9..11). */
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4);
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x00FFFFFF);
	prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3);
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 8);
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0x00FFFFFF);
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_A, 0);
	/* A = slot (DestQP >> 16 = BTH byte 5); a compare-and-return pair per member keeps every
	 * jump offset at most 1, whatever the table size. */
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 5);
	memset(r->table, 0xFF, sizeof(r->table));
	for (int s = 1; s < REG_NSLOTS; s++) {
		const struct reg_member *m = &r->m[s];
		if (m->pid == 0)
			continue;
		if (dflt < 0)
			dflt = m->index; /* lowest slot: the default member */
		prog[n++] =
		    (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)s, 0, 1);
		prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (uint32_t)m->index);
		r->table[s] = (uint8_t)m->index;
	}
	if (dflt < 0)
		dflt = 0;
	prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, (uint32_t)dflt);

	struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
	if (setsockopt(st->sock, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fprog, sizeof(fprog)) !=
	    0) {
		cnt(st, IO_UDP_C_steer_errors);
		return -errno;
	}
	WR(r->attached_default, dflt);
	WR(r->attached_epoch, RD(r->epoch));
	cnt(st, IO_UDP_C_steer_attach);
	return 0;
}

/* Attaches the program if the current epoch is fully claimed. */
static int try_complete(struct io_steer *st)
{
	struct reg *r = st->reg;
	if (r->attached_epoch == r->epoch || !all_claimed(r, r->epoch))
		return 0;
	return attach(st);
}

/* ---- probes ---- */

static void build_probe(const struct io_steer *st, uint8_t *p, uint32_t epoch, int k)
{
	memset(p, 0, IO_STEER_PROBE_LEN);
	p[0] = PROBE_OPCODE;
	p[2] = 0xFF; /* P_Key 0xFFFF */
	p[3] = 0xFF;
	/* bytes 5..7: DestQP 0; bytes 9..11: PSN = target index */
	put_be32(p + 8, (uint32_t)k & 0x00FFFFFF);
	put_be32(p + 12, PROBE_MAGIC);
	put_be32(p + 16, epoch);
	memcpy(p + 20, &st->reg->token, 8);
	put_be32(p + 28, (uint32_t)getpid());
}

static void send_probe(struct io_steer *st, int fd, uint32_t epoch, int k)
{
	uint8_t p[IO_STEER_PROBE_LEN];
	build_probe(st, p, epoch, k);
	if (sys_sendto(fd, p, sizeof(p), MSG_DONTWAIT, (const struct sockaddr *)&st->self,
		       st->selflen) != (ssize_t)sizeof(p)) {
		cnt(st, IO_UDP_C_steer_errors);
		return;
	}
	cnt(st, IO_UDP_C_steer_probes_sent);
}

/* Probes every index of the current epoch that no member has claimed yet. */
static void send_round(struct io_steer *st, int fd)
{
	struct reg *r = st->reg;
	int n = r->nmembers;
	for (int k = 0; k < n; k++) {
		if (!index_claimed(r, r->epoch, k))
			send_probe(st, fd, r->epoch, k);
	}
	WR(r->round_ns, now_ns());
}

/* Membership changed in a way we cannot compute (a crash, a conflict): every member must learn
 * its index again. */
static void start_round(struct io_steer *st)
{
	struct reg *r = st->reg;
	gc(st);
	WR(r->epoch, r->epoch + 1);
	r->epoch_ns = now_ns();
	WR(r->resends, 0);
	cnt(st, IO_UDP_C_steer_epochs);
	if (r->nmembers > 0)
		send_round(st, st->sock);
}

/* Valid probe of this registry? Fills epoch and index. */
static bool parse_probe(const struct io_steer *st, const uint8_t *p, size_t len, uint32_t *epoch,
			int *k)
{
	if (len != IO_STEER_PROBE_LEN || p[0] != PROBE_OPCODE || get_be32(p + 12) != PROBE_MAGIC ||
	    memcmp(p + 20, &st->reg->token, 8) != 0)
		return false;
	*k = (int)(get_be32(p + 8) & 0x00FFFFFF);
	*epoch = get_be32(p + 16);
	return *k < REG_NSLOTS;
}

/* A probe for index k in epoch e reached us: we are at index k (under the flock). */
static void claim(struct io_steer *st, uint32_t e, int k, bool conflict)
{
	struct reg *r = st->reg;
	struct reg_member *me = &r->m[st->slot];
	if (e != r->epoch)
		return; /* a stale round */
	/* Two indices in one epoch: one probe went past the group's end and the kernel hashed it
	 * to us; the registry counts a member whose socket is gone or not yet there. Start over. */
	if (conflict || (me->index_epoch == e && me->index != k)) {
		cnt(st, IO_UDP_C_steer_conflicts);
		start_round(st);
		return;
	}
	WR(me->index, k);
	WR(me->index_epoch, e);
	cnt(st, IO_UDP_C_steer_claims);
	try_complete(st);
}

static void refresh_view(struct io_steer *st)
{
	const struct reg *r = st->reg;
	int lowest = 0;
	memset(st->owned, 0, sizeof(st->owned));
	for (int s = 1; s < REG_NSLOTS; s++) {
		if (r->m[s].pid == 0)
			continue;
		if (lowest == 0)
			lowest = s;
		if (s != st->slot)
			st->owned[s / 64] |= 1ull << (s % 64);
	}
	st->is_default = lowest == st->slot;
	st->view_epoch = r->epoch;
}

/* Probe bursts of one epoch back off from 2 ms to 200 ms: a round that cannot complete (a
 * foreign socket in the group, a stopped member) must not keep every member busy. */
static uint64_t resend_wait(const struct reg *r)
{
	uint32_t k = RD(r->resends);
	uint64_t wait = RESEND_MIN_NS << (k < 7 ? k : 7);
	return wait < RESEND_MAX_NS ? wait : RESEND_MAX_NS;
}

/* Everything that needs the registry lock, which is only tried: never blocks the caller. */
static int locked_work(struct io_steer *st, uint64_t now, bool force_check)
{
	struct reg *r = st->reg;
	int err = reg_lock(st, false);
	if (err) {
		if (err == -EWOULDBLOCK) {
			cnt(st, IO_UDP_C_steer_lock_busy);
			return 0;
		}
		cnt(st, IO_UDP_C_steer_errors);
		return err;
	}
	if (force_check || now >= st->next_check_ns) {
		if (gc(st) > 0)
			start_round(st);
		st->next_check_ns = now + st->check_ns;
		st->last_forced_ns = now;
		st->check_pending = false;
	}
	if (st->claim_pending) {
		st->claim_pending = false;
		claim(st, st->claim_epoch, st->claim_index, st->claim_conflict);
		st->claim_conflict = false;
	}
	if (r->epoch != r->attached_epoch) {
		if (now - r->round_ns >= resend_wait(r)) {
			WR(r->resends, r->resends + 1);
			send_round(st, st->sock);
		}
		try_complete(st);
	}
	refresh_view(st);
	reg_unlock(st);
	return 0;
}

/* ---- data path ---- */

enum io_steer_verdict io_steer_rx(struct io_steer *st, const uint8_t *p, size_t len)
{
	uint32_t e;
	int k;

	if ((p[5] | p[6] | p[7]) == 0) {
		if (!parse_probe(st, p, len, &e, &k)) {
			cnt(st, IO_UDP_C_rx_bad_probes);
			return IO_STEER_CONSUMED;
		}
		cnt(st, IO_UDP_C_rx_probes);
		if (st->claim_pending) {
			int32_t newer = (int32_t)(e - st->claim_epoch);
			if (newer < 0)
				return IO_STEER_CONSUMED; /* an older round's probe: moot */
			if (newer == 0) {
				if (k != st->claim_index)
					st->claim_conflict = true;
				return IO_STEER_CONSUMED;
			}
		}
		st->claim_pending = true;
		st->claim_conflict = false;
		st->claim_epoch = e;
		st->claim_index = k;
		return IO_STEER_CONSUMED;
	}
	uint8_t slot = p[5];
	if (slot == st->slot)
		return IO_STEER_DELIVER;
	if (!(st->owned[slot / 64] & (1ull << (slot % 64))) && st->is_default)
		return IO_STEER_DELIVER;
	/* Steering is stale: a member left or crashed and the program has not caught up. */
	cnt(st, IO_UDP_C_rx_misdelivered);
	st->check_pending = true;
	return IO_STEER_MISDELIVERED;
}

void io_steer_rx_done(struct io_steer *st)
{
	bool epoch_moved = RD(st->reg->epoch) != st->view_epoch;
	if (!st->claim_pending && !st->check_pending && !epoch_moved)
		return;
	uint64_t now = now_ns();
	/* Misdeliveries come in bursts; one liveness check per millisecond is enough. */
	bool force = st->check_pending && now - st->last_forced_ns >= FORCED_CHECK_NS;
	if (!st->claim_pending && !force && !epoch_moved)
		return;
	locked_work(st, now, force);
}

int io_steer_service(struct io_steer *st)
{
	struct reg *r = st->reg;
	uint64_t now = now_ns();
	int err = 0;
	bool busy = RD(r->epoch) != RD(r->attached_epoch);

	if (now >= st->next_check_ns || st->claim_pending || st->check_pending || busy ||
	    RD(r->epoch) != st->view_epoch)
		err = locked_work(st, now, st->check_pending);
	if (err)
		return err;
	busy = RD(r->epoch) != RD(r->attached_epoch);
	if (!busy) {
		st->incomplete_counted = false;
		return 0;
	}
	if (!st->incomplete_counted && now - r->epoch_ns > INCOMPLETE_NS) {
		st->incomplete_counted = true;
		cnt(st, IO_UDP_C_steer_incomplete);
	}
	return 1;
}

uint64_t io_steer_next_ns(const struct io_steer *st)
{
	const struct reg *r = st->reg;
	uint64_t t = st->next_check_ns;
	if (st->claim_pending || st->check_pending) {
		uint64_t soon = now_ns() + MS;
		if (soon < t)
			t = soon;
	} else if (RD(r->epoch) != RD(r->attached_epoch)) {
		/* the next burst; answers to the last one arrive as packets and wake the loop */
		uint64_t burst = RD(r->round_ns) + resend_wait(r);
		if (burst < t)
			t = burst;
	}
	return t;
}

void io_steer_info(const struct io_steer *st, struct io_udp_info *info)
{
	const struct reg *r = st->reg;
	const struct reg_member *me = &r->m[st->slot];
	uint32_t e = RD(r->epoch);
	memset(info, 0, sizeof(*info));
	info->slot = st->slot;
	info->index = RD(me->index_epoch) == e ? RD(me->index) : -1;
	info->members = RD(r->nmembers);
	info->epoch = e;
	info->complete = RD(r->attached_epoch) == e;
	info->is_default = st->is_default;
}

uint8_t io_steer_slot(const struct io_steer *st)
{
	return st->slot;
}

/* ---- join / leave ---- */

static int reg_path(struct io_steer *st, const struct io_steer_cfg *cfg)
{
	char run[sizeof(st->path)];
	const char *dir = cfg->dir;
	unsigned long long netns;
	char hex[33];

	if (!dir) {
		/* The user's private directory: nobody else can create our registry first. */
		int err = rundir_path(run, sizeof(run));
		if (err)
			return err;
		dir = run;
	}
	/* Reuseport groups are per network namespace; so is the registry. */
	netns = rundir_netns();
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", cfg->addr[i]);
	int n = snprintf(st->path, sizeof(st->path), "%s/softrdma-io-%u-%llu-%s-%u", dir,
			 (unsigned)geteuid(), netns, hex, (unsigned)cfg->port);
	return n > 0 && (size_t)n < sizeof(st->path) ? 0 : -ENAMETOOLONG;
}

static void reg_init(struct reg *r)
{
	uint64_t token = 0;
	memset(r, 0, sizeof(*r));
	if (getrandom(&token, sizeof(token), 0) != (ssize_t)sizeof(token))
		token = now_ns() ^ ((uint64_t)getpid() << 32);
	r->version = REG_VERSION;
	r->token = token;
	r->epoch = 1;
	r->attached_epoch = 1; /* nothing to attach for no members: consistent */
	memset(r->table, 0xFF, sizeof(r->table));
	__atomic_store_n(&r->magic, REG_MAGIC, __ATOMIC_RELEASE);
}

/* Opens, locks and maps the registry. On success the flock is held. */
static int reg_open(struct io_steer *st)
{
	for (int tries = 0; tries < 16; tries++) {
		struct stat sb;
		int err;
		int fd = open(st->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -errno;
		st->regfd = fd;
		err = reg_lock(st, true);
		if (err)
			goto fail_close;
		if (fstat(fd, &sb) != 0) {
			err = -errno;
			goto fail_close;
		}
		if (sb.st_nlink == 0) {
			/* the last member unlinked it while we waited: open the new one */
			close(fd);
			continue;
		}
		if (sb.st_uid != geteuid()) {
			err = -EPERM;
			goto fail_close;
		}
		if ((size_t)sb.st_size < sizeof(struct reg) &&
		    ftruncate(fd, sizeof(struct reg)) != 0) {
			err = -errno;
			goto fail_close;
		}
		void *map =
		    mmap(NULL, sizeof(struct reg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			err = -errno;
			goto fail_close;
		}
		st->reg = map;
		if (st->reg->magic != REG_MAGIC) {
			reg_init(st->reg);
		} else if (st->reg->version != REG_VERSION) {
			err = -EPROTONOSUPPORT;
			goto fail_unmap;
		}
		return 0;
	fail_unmap:
		munmap(st->reg, sizeof(struct reg));
		st->reg = NULL;
	fail_close:
		close(fd); /* drops the flock */
		st->regfd = -1;
		return err;
	}
	return -EAGAIN;
}

/* Waits up to ms for a probe of epoch e on our socket; returns the index or -1. Data packets
 * that arrive meanwhile are dropped: we are not in the steering table yet. */
static int wait_probe(struct io_steer *st, uint32_t e, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * MS;
	uint8_t buf[2048];

	for (;;) {
		ssize_t len = recv(st->sock, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (len >= 0) {
			uint32_t pe;
			int k;
			if (len >= 8 && (size_t)len <= sizeof(buf) &&
			    (buf[5] | buf[6] | buf[7]) == 0 &&
			    parse_probe(st, buf, (size_t)len, &pe, &k)) {
				cnt(st, IO_UDP_C_rx_probes);
				if (pe == e)
					return k;
			} else {
				cnt(st, IO_UDP_C_rx_open_drops);
			}
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		uint64_t now = now_ns();
		if (now >= end)
			return -1;
		struct pollfd pfd = {.fd = st->sock, .events = POLLIN};
		poll(&pfd, 1, (int)((end - now + MS - 1) / MS));
	}
}

int io_steer_join(const struct io_steer_cfg *cfg, int sock, const struct sockaddr *sa,
		  socklen_t salen, struct io_steer **out)
{
	struct io_steer *st = calloc(1, sizeof(*st));
	struct reg *r;
	int err, slot = 0, n;
	bool consistent;

	if (!st)
		return -ENOMEM;
	st->sock = sock;
	st->regfd = -1;
	st->family = cfg->family;
	st->cnt = cfg->counters;
	st->check_ns = (uint64_t)cfg->check_ms * MS;
	memcpy(&st->self, sa, salen);
	st->selflen = salen;
	err = reg_path(st, cfg);
	if (err)
		goto fail_free;
	err = reg_open(st);
	if (err)
		goto fail_free;
	r = st->reg;

	gc(st);
	for (int s = cfg->slot ? cfg->slot : 1; s < REG_NSLOTS && !slot; s++) {
		if (r->m[s].pid == 0 && ofd_set(st->regfd, s, F_WRLCK) == 0)
			slot = s;
		if (cfg->slot)
			break; /* that slot or none */
	}
	if (!slot) {
		err = cfg->slot ? -EBUSY : -ENOSPC;
		goto fail_unlock;
	}
	if (bind(sock, sa, salen) != 0) {
		err = -errno;
		goto fail_slot;
	}
	st->slot = (uint8_t)slot;

	/* Were the others' indices known and attached? Then the kernel appended us at the end. */
	consistent = r->attached_epoch == r->epoch && all_claimed(r, r->epoch);
	r->m[slot].pid = getpid();
	r->m[slot].index = -1;
	r->m[slot].index_epoch = 0;
	n = count_members(r);
	WR(r->nmembers, n);
	WR(r->epoch, r->epoch + 1);
	r->epoch_ns = now_ns();
	WR(r->resends, 0);
	cnt(st, IO_UDP_C_steer_epochs);

	int k = -1;
	if (consistent) {
		for (int s = 1; s < REG_NSLOTS; s++) {
			if (s != slot && r->m[s].pid != 0)
				WR(r->m[s].index_epoch, r->epoch);
		}
		send_probe(st, sock, r->epoch, n - 1);
		WR(r->round_ns, now_ns());
		k = wait_probe(st, r->epoch, SELF_PROBE_WAIT_MS);
		if (k != n - 1) {
			/* Someone else holds index n-1 (a dying member, a foreign socket): ask all.
			 */
			for (int s = 1; s < REG_NSLOTS; s++)
				WR(r->m[s].index_epoch, 0);
			WR(r->epoch, r->epoch + 1);
			k = -1;
		}
	}
	if (k < 0) {
		send_round(st, sock);
		k = wait_probe(st, r->epoch, ROUND_WAIT_MS);
	}
	if (k >= 0)
		claim(st, r->epoch, k, false);
	refresh_view(st);
	st->next_check_ns = now_ns() + st->check_ns;
	reg_unlock(st);
	*out = st;
	return 0;

fail_slot:
	ofd_set(st->regfd, slot, F_UNLCK);
fail_unlock:
	if (count_members(r) == 0)
		unlink(st->path); /* under the flock: no one else is about to use it */
	munmap(st->reg, sizeof(struct reg));
	close(st->regfd);
fail_free:
	free(st);
	return err;
}

void io_steer_forked(struct io_steer *st)
{
	if (!st)
		return;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		dup3(nul, st->regfd, O_CLOEXEC);
		close(nul);
	}
	/* The mapping holds the file too, and with it the lock: a private zeroed one takes its
	 * place (a child that still calls in reads an empty registry, and touches nothing). */
	void *m = mmap(st->reg, sizeof(struct reg), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED)
		munmap(st->reg, sizeof(struct reg));
}

void io_steer_abandon(struct io_steer *st, int sock)
{
	close(sock);
	if (!st)
		return;
	munmap(st->reg, sizeof(struct reg));
	close(st->regfd);
	free(st);
}

void io_steer_leave(struct io_steer *st, int sock)
{
	struct reg *r;
	bool consistent;
	int my, n;

	if (!st) {
		close(sock);
		return;
	}
	r = st->reg;
	if (reg_lock(st, true) != 0) {
		/* cannot happen with a valid fd; the others will notice our lock going */
		close(sock);
		goto out;
	}
	consistent = gc(st) == 0 && r->attached_epoch == r->epoch && all_claimed(r, r->epoch);
	my = r->m[st->slot].index;
	n = count_members(r);
	memset(&r->m[st->slot], 0, sizeof(r->m[st->slot]));
	WR(r->nmembers, n - 1);
	if (n - 1 > 0) {
		WR(r->epoch, r->epoch + 1);
		r->epoch_ns = now_ns();
		WR(r->resends, 0);
		cnt(st, IO_UDP_C_steer_epochs);
		if (consistent) {
			/* The kernel will move the last socket into our index
			 * (reuseport_detach_sock): say so before our socket goes, while we can
			 * still attach a program. */
			for (int s = 1; s < REG_NSLOTS; s++) {
				struct reg_member *m = &r->m[s];
				if (m->pid == 0)
					continue;
				if (m->index == n - 1)
					WR(m->index, my);
				WR(m->index_epoch, r->epoch);
			}
			if (attach(st) != 0)
				consistent = false;
		}
	}
	close(sock);
	if (n - 1 > 0 && !consistent) {
		/* Our socket is gone: probe from a temporary one. */
		int tmp = socket(st->family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (tmp >= 0) {
			send_round(st, tmp);
			close(tmp);
		}
	}
	if (n - 1 == 0)
		unlink(st->path);
	/* closing the file below drops the flock and our liveness lock together */
out:
	munmap(st->reg, sizeof(struct reg));
	close(st->regfd);
	free(st);
}
