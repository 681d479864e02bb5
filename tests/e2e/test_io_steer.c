/* Multi-process steering on 127.0.0.1, for real: four processes open io_udp on one port and
 * exchange packets addressed by slot (fake BTH, DestQP = slot << 16 | n); each must receive
 * exactly its own. Then member 0 exits cleanly (member 3 moves into its index) and member 1 is
 * killed with SIGKILL (member 2 moves into its index); the survivors keep exchanging and must get
 * their packets again within a bounded time, which is measured and printed. Finally a new process
 * joins and all three check exact delivery again. Every child is reaped; the registry directory
 * must be empty at the end. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "io/io.h"

#define NPROC 5	 /* four at the start, a fifth joins at the end */
#define K     25 /* packets per (sender, receiver) pair in an exact round */
#define PLEN  48
#define MS    1000000ull

enum phase {
	PH_JOIN,
	PH_EXACT1,
	PH_LEAVE0,  /* member 0 closes and exits */
	PH_SURVIVE, /* after the SIGKILL of member 1: members 2 and 3 exchange */
	PH_JOIN4,   /* member 4 joins */
	PH_EXACT2,  /* members 2, 3, 4 */
	PH_END,
};

struct child_state {
	_Atomic int joined;
	_Atomic int done; /* last phase completed */
	pid_t pid;
	uint8_t slot;
	int index_after_join;
	int got_exact[PH_END][NPROC]; /* packets received per phase and sender in exact rounds */
	uint64_t first_ok_ns[NPROC];  /* survive: first packet from sender, after the kill */
	uint64_t complete_ns;	      /* survive: registry complete with 2 members */
	int max_gap_tail;	      /* survive: largest seq gap in the last 100 ms */
	uint64_t misdelivered;
};

struct shared {
	_Atomic int phase;
	uint16_t port;
	uint64_t kill_ns;
	char regdir[64];
	struct child_state c[NPROC];
};

static struct shared *sh;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void mapped_lo(uint8_t *a)
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xFF;
	inet_pton(AF_INET, "127.0.0.1", a + 12);
}

struct msg {
	uint32_t sender, phase, seq;
	uint64_t sent_ns;
};

static void make_pkt(uint8_t *b, uint8_t slot, uint32_t n, const struct msg *m)
{
	memset(b, 0, PLEN);
	b[0] = 0x04;
	b[2] = b[3] = 0xFF;
	b[5] = slot;
	b[6] = (uint8_t)(n >> 8);
	b[7] = (uint8_t)n;
	memcpy(b + 12, m, sizeof(*m));
}

static void send_to(struct io_udp *io, uint8_t slot, const struct msg *m)
{
	uint8_t b[PLEN];
	struct io_pkt p = {.buf = b, .len = PLEN, .sport = sh->port, .dport = sh->port};
	mapped_lo(p.dst);
	make_pkt(b, slot, m->seq & 0xFFFF, m);
	CHECK_EQ(io_udp_send(io, &p, 1), 1);
}

/* Receives what waits (up to 1 ms of waiting); calls fn for each packet. Checks that every
 * delivered packet is for our slot. */
static void pump(struct io_udp *io, int me, void (*fn)(int me, const struct msg *m))
{
	static uint8_t bufs[32][256];
	struct io_pkt pkts[32];
	struct pollfd pfd = {.fd = io_udp_fd(io), .events = POLLIN};
	poll(&pfd, 1, 1);
	for (;;) {
		for (int i = 0; i < 32; i++)
			pkts[i] = (struct io_pkt){.buf = bufs[i], .cap = sizeof(bufs[i])};
		int got = io_udp_recv(io, pkts, 32);
		CHECK(got >= 0);
		for (int i = 0; i < got; i++) {
			struct msg m;
			CHECK_EQ(pkts[i].buf[5], sh->c[me].slot); /* never another's packet */
			memcpy(&m, pkts[i].buf + 12, sizeof(m));
			if (fn && pkts[i].buf[5] == sh->c[me].slot && m.sender < NPROC)
				fn(me, &m);
		}
		if (got < 32)
			break;
	}
	io_udp_service(io);
	/* after the SIGKILL: when does this member see steering complete for two members? */
	struct child_state *c = &sh->c[me];
	if (__atomic_load_n(&sh->kill_ns, __ATOMIC_RELAXED) && !c->complete_ns) {
		struct io_udp_info info;
		io_udp_info(io, &info);
		if (info.complete && info.members == 2)
			c->complete_ns = now_ns();
	}
}

static int cur_phase(void)
{
	return atomic_load(&sh->phase);
}

/* Counts exact-round packets whenever they come (a member may still be waiting for the phase
 * to start when a faster one already sends). */
static void on_exact(int me, const struct msg *m)
{
	if (m->phase == PH_EXACT1 || m->phase == PH_EXACT2)
		sh->c[me].got_exact[m->phase][m->sender]++;
}

/* Every member in `who` sends K packets to every member in `who`, then receives until it has
 * all of them (bounded by 3 s). */
static void exact_round(struct io_udp *io, int me, const int *who, int nwho, int phase)
{
	for (int k = 0; k < K; k++) {
		for (int j = 0; j < nwho; j++) {
			struct msg m = {
			    .sender = (uint32_t)me, .phase = (uint32_t)phase, .seq = (uint32_t)k};
			send_to(io, sh->c[who[j]].slot, &m);
		}
		pump(io, me, on_exact);
	}
	uint64_t end = now_ns() + 3000 * MS;
	for (;;) {
		int total = 0;
		for (int j = 0; j < nwho; j++)
			total += sh->c[me].got_exact[phase][who[j]];
		if (total >= K * nwho || now_ns() > end)
			break;
		pump(io, me, on_exact);
	}
	/* linger a little so that a misdelivered straggler would be caught */
	for (uint64_t t = now_ns() + 30 * MS; now_ns() < t;)
		pump(io, me, on_exact);
}

/* Survive phase: members 2 and 3 send to each other (and themselves) every 200 us. */
static uint32_t last_seq[NPROC];
static uint64_t tail_from;
static int tail_gap;

static void on_survive(int me, const struct msg *m)
{
	struct child_state *c = &sh->c[me];
	uint64_t t = now_ns();
	if (m->phase != PH_SURVIVE)
		return;
	if (!c->first_ok_ns[m->sender])
		c->first_ok_ns[m->sender] = t;
	if (t >= tail_from && m->seq > last_seq[m->sender] + 1 && last_seq[m->sender]) {
		int gap = (int)(m->seq - last_seq[m->sender] - 1);
		tail_gap = gap > tail_gap ? gap : tail_gap;
	}
	last_seq[m->sender] = m->seq;
}

static void survive(struct io_udp *io, int me)
{
	struct child_state *c = &sh->c[me];
	const int peers[2] = {2, 3};
	uint64_t start = now_ns(), next = start;
	uint32_t seq = 1;
	tail_from = start + 900 * MS;
	while (now_ns() < start + 1000 * MS) {
		if (now_ns() >= next) {
			for (int j = 0; j < 2; j++) {
				struct msg m = {.sender = (uint32_t)me,
						.phase = PH_SURVIVE,
						.seq = seq,
						.sent_ns = now_ns()};
				send_to(io, sh->c[peers[j]].slot, &m);
			}
			seq++;
			next += 200000;
		}
		pump(io, me, on_survive);
	}
	c->max_gap_tail = tail_gap;
}

static void wait_phase(struct io_udp *io, int me, int ph)
{
	uint64_t end = now_ns() + 20000 * MS;
	while (cur_phase() < ph && now_ns() < end) {
		if (io)
			pump(io, me, on_exact);
		else
			usleep(1000);
	}
	REQUIRE(cur_phase() >= ph);
}

static void child(int me)
{
	struct io_udp_config cfg = {
	    .family = AF_INET, .port = sh->port, .registry_dir = sh->regdir};
	struct io_udp *io;
	uint64_t cnt[IO_UDP_NCOUNTERS];

	prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
	alarm(40);
	mapped_lo(cfg.addr);
	/* join in order, so that member i has reuseport index i */
	if (me > 0 && me < 4) {
		while (!atomic_load(&sh->c[me - 1].joined))
			usleep(1000);
	}
	if (me == 4)
		wait_phase(NULL, me, PH_JOIN4);
	int err = io_udp_open(&cfg, &io);
	if (err) {
		fprintf(stderr, "child %d: io_udp_open: %s\n", me, strerror(-err));
		_exit(2);
	}
	struct io_udp_info info;
	io_udp_info(io, &info);
	sh->c[me].slot = io_udp_slot(io);
	sh->c[me].index_after_join = info.index;
	atomic_store(&sh->c[me].joined, 1);

	if (me < 4) {
		static const int all4[4] = {0, 1, 2, 3};
		wait_phase(io, me, PH_EXACT1);
		exact_round(io, me, all4, 4, PH_EXACT1);
		atomic_store(&sh->c[me].done, PH_EXACT1);
		if (me == 0) {
			wait_phase(io, me, PH_LEAVE0);
			io_udp_close(io);
			_exit(check_failures ? 1 : 0);
		}
		if (me == 1) {
			for (;;) /* until SIGKILL */
				pump(io, me, on_exact);
		}
		wait_phase(io, me, PH_SURVIVE);
		survive(io, me);
		atomic_store(&sh->c[me].done, PH_SURVIVE);
	}
	static const int last3[3] = {2, 3, 4};
	wait_phase(io, me, PH_EXACT2);
	exact_round(io, me, last3, 3, PH_EXACT2);
	io_udp_counters(io, cnt);
	sh->c[me].misdelivered = cnt[IO_UDP_C_rx_misdelivered];
	atomic_store(&sh->c[me].done, PH_EXACT2);
	wait_phase(io, me, PH_END);
	io_udp_close(io);
	_exit(check_failures ? 1 : 0);
}

static pid_t pids[NPROC];

static void kill_all(void)
{
	for (int i = 0; i < NPROC; i++) {
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			pids[i] = 0;
		}
	}
}

/* Waits until every child in `who` reports `ph` done (bounded). */
static bool wait_done(const int *who, int n, int ph, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * MS;
	for (;;) {
		int ok = 0;
		for (int i = 0; i < n; i++)
			ok += atomic_load(&sh->c[who[i]].done) >= ph;
		if (ok == n)
			return true;
		if (now_ns() > end)
			return false;
		usleep(1000);
	}
}

static int reap(int i, int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * MS;
	int status;
	while (now_ns() < end) {
		pid_t r = waitpid(pids[i], &status, WNOHANG);
		if (r == pids[i]) {
			pids[i] = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		usleep(1000);
	}
	return -1;
}

/* Runs on every exit of the parent, REQUIRE failures included: no child or file survives. */
static pid_t parent;

static void cleanup(void)
{
	if (getpid() != parent)
		return; /* a child's exit() must not touch its siblings */
	kill_all();
	DIR *d = opendir(sh->regdir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char path[512];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", sh->regdir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(sh->regdir);
}

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void check_exact(const int *who, int n, int phase)
{
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++) {
			int got = sh->c[who[i]].got_exact[phase][who[j]];
			if (got != K)
				fprintf(stderr, "member %d got %d of %d packets from member %d\n",
					who[i], got, K, who[j]);
			CHECK_EQ(got, K);
		}
	}
}

int main(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(sh != MAP_FAILED);
	strcpy(sh->regdir, "/tmp/softrdma-test-io-steer-XXXXXX");
	REQUIRE(mkdtemp(sh->regdir) != NULL);
	parent = getpid();
	atexit(cleanup);
	{ /* a free port */
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET};
		socklen_t sl = sizeof(sa);
		inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
		REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
		getsockname(fd, (struct sockaddr *)&sa, &sl);
		sh->port = ntohs(sa.sin_port);
		close(fd);
	}
	fprintf(stderr, "port %u, registry in %s\n", sh->port, sh->regdir);
	fflush(stderr);
	for (int i = 0; i < NPROC; i++) {
		pids[i] = fork();
		REQUIRE(pids[i] >= 0);
		if (pids[i] == 0)
			child(i);
		sh->c[i].pid = pids[i];
	}

	/* 1. four members, exact delivery */
	uint64_t end = now_ns() + 5000 * MS;
	while (now_ns() < end && !atomic_load(&sh->c[3].joined))
		usleep(1000);
	if (!atomic_load(&sh->c[3].joined)) {
		fprintf(stderr, "members did not join\n");
		return 1;
	}
	for (int i = 0; i < 4; i++) {
		fprintf(stderr, "member %d: pid %d slot %u index %d\n", i, (int)pids[i],
			sh->c[i].slot, sh->c[i].index_after_join);
		CHECK_EQ(sh->c[i].index_after_join, i);
	}
	static const int all4[4] = {0, 1, 2, 3};
	atomic_store(&sh->phase, PH_EXACT1);
	CHECK(wait_done(all4, 4, PH_EXACT1, 8000));
	check_exact(all4, 4, PH_EXACT1);

	/* 2. member 0 leaves cleanly, member 1 is killed */
	atomic_store(&sh->phase, PH_LEAVE0);
	CHECK_EQ(reap(0, 5000), 0);
	__atomic_store_n(&sh->kill_ns, now_ns(), __ATOMIC_RELAXED);
	kill(pids[1], SIGKILL);
	CHECK_EQ(reap(1, 5000), 128 + SIGKILL);
	atomic_store(&sh->phase, PH_SURVIVE);
	static const int surv[2] = {2, 3};
	CHECK(wait_done(surv, 2, PH_SURVIVE, 8000));
	for (int i = 2; i < 4; i++) {
		struct child_state *c = &sh->c[i];
		for (int j = 2; j < 4; j++) {
			CHECK(c->first_ok_ns[j] != 0);
			CHECK(c->first_ok_ns[j] - sh->kill_ns < 1000 * MS);
			fprintf(
			    stderr,
			    "member %d: first packet from member %d %.3f ms after the SIGKILL\n", i,
			    j, (double)(c->first_ok_ns[j] - sh->kill_ns) / 1e6);
		}
		CHECK(c->complete_ns != 0);
		fprintf(stderr,
			"member %d: steering complete (2 members) %.3f ms after the SIGKILL; "
			"largest loss run in the last 100 ms: %d\n",
			i, c->complete_ns ? (double)(c->complete_ns - sh->kill_ns) / 1e6 : -1.0,
			c->max_gap_tail);
		CHECK_EQ(c->max_gap_tail, 0);
	}

	/* 3. a newcomer after the crash, exact delivery among three */
	atomic_store(&sh->phase, PH_JOIN4);
	end = now_ns() + 5000 * MS;
	while (now_ns() < end && !atomic_load(&sh->c[4].joined))
		usleep(1000);
	CHECK(atomic_load(&sh->c[4].joined));
	fprintf(stderr, "member 4: slot %u index %d\n", sh->c[4].slot, sh->c[4].index_after_join);
	CHECK_EQ(sh->c[4].index_after_join, 2);
	static const int last3[3] = {2, 3, 4};
	atomic_store(&sh->phase, PH_EXACT2);
	CHECK(wait_done(last3, 3, PH_EXACT2, 8000));
	check_exact(last3, 3, PH_EXACT2);
	for (int i = 2; i < 5; i++)
		fprintf(stderr, "member %d: %llu misdelivered packets dropped in all\n", i,
			(unsigned long long)sh->c[i].misdelivered);

	atomic_store(&sh->phase, PH_END);
	for (int i = 2; i < 5; i++)
		CHECK_EQ(reap(i, 5000), 0);
	kill_all();
	CHECK_EQ(dir_entries(sh->regdir), 0);
	return check_exit(); /* cleanup() removes the directory */
}
