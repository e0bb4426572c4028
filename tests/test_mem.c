/* SPDX-License-Identifier: MIT */
/* Memory pools: classes, large blocks, lookup, placement, pinning, stress. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/mempolicy.h>

#include <aql/mem.h>
#include "helpers.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static aql_mem_pool *new_pool(enum aql_mem_kind kind, uint32_t flags, int32_t node,
			      size_t max_size)
{
	aql_mem_pool_config c = { .kind = kind, .flags = flags, .numa_node = node,
				  .max_size = max_size };
	aql_mem_pool *pool = NULL;

	if (aql_mem_pool_create(&c, &pool) != AQL_OK) {
		fprintf(stderr, "pool: %s\n", aql_error_message());
		exit(1);
	}
	return pool;
}

static void *must_alloc(aql_mem_pool *pool, size_t size, size_t align)
{
	void *p = NULL;

	CHECK_OK(aql_mem_alloc(pool, size, align, &p));
	return p;
}

static aql_mem_pool_stats stats_of(aql_mem_pool *pool)
{
	aql_mem_pool_stats s = { 0 };

	CHECK_OK(aql_mem_pool_get_stats(pool, &s));
	return s;
}

/* Block start and usable size of ptr, per aql_mem_query; 0 size on error. */
static size_t block_of(const void *ptr, void **base)
{
	aql_mem_info info;

	if (aql_mem_query(ptr, &info) != AQL_OK) {
		*base = NULL;
		return 0;
	}
	*base = info.base;
	return info.size;
}

static void test_size_classes(void)
{
	aql_mem_pool *pool = new_pool(AQL_MEM_FINE_GRAINED, AQL_MEM_PINNED, AQL_NUMA_ANY, 64 * MiB);
	void *blocks[3 * 10], *base;
	unsigned n = 0;

	for (size_t s = AQL_MEM_MIN_CLASS_SIZE; s <= AQL_MEM_MAX_CLASS_SIZE; s <<= 1) {
		/* The smallest and largest request of each class, and one in between. */
		size_t sizes[3] = { s == 64 ? 1 : s / 2 + 1, s - s / 4, s };

		for (unsigned i = 0; i < 3; i++) {
			char *p = must_alloc(pool, sizes[i], 0);

			if (!p)
				continue;
			blocks[n++] = p;
			CHECK((uintptr_t)p % s == 0, "%zu-byte request at %p not aligned to its class %zu",
			      sizes[i], (void *)p, s);
			CHECK(block_of(p, &base) == s && base == p, "%zu bytes: usable %zu, base %p",
			      sizes[i], block_of(p, &base), base);
			/* Every byte is usable and no neighbour's bookkeeping lives in it. */
			memset(p, 0xa5, s);
			CHECK(block_of(p + s - 1, &base) == s && base == p,
			      "last byte of the %zu-byte block %p maps to %p", s, (void *)p, base);
		}
	}
	aql_mem_pool_stats st = stats_of(pool);
	CHECK(st.allocations_in_use == n, "%llu allocations in use, %u made",
	      (unsigned long long)st.allocations_in_use, n);
	CHECK(st.slab_bytes == 11 * AQL_MEM_CHUNK_SIZE && st.large_bytes == 0,
	      "one slab per class (two of 32 KiB) expected: slab %zu, large %zu", st.slab_bytes, st.large_bytes);
	CHECK(st.pinned == st.committed && st.committed > 0, "pinned %zu of %zu committed",
	      st.pinned, st.committed);
	for (unsigned i = 0; i < n; i++)
		CHECK_OK(aql_mem_free_checked(blocks[i]));
	st = stats_of(pool);
	CHECK(st.allocations_in_use == 0 && st.bytes_in_use == 0, "%llu blocks, %zu bytes left",
	      (unsigned long long)st.allocations_in_use, st.bytes_in_use);
	CHECK(st.allocations_in_use_peak == n, "peak %llu, expected %u",
	      (unsigned long long)st.allocations_in_use_peak, n);
	CHECK_OK(aql_mem_pool_destroy(pool));
}

static void test_alignment_and_large(void)
{
	aql_mem_pool *pool = new_pool(AQL_MEM_COARSE_GRAINED, 0, AQL_NUMA_ANY, 64 * MiB);
	static const struct { size_t size, align, usable; } cases[] = {
		{ 100, 4096, 4096 },			/* alignment picks the class */
		{ 4096, 0, 4096 },			/* page-sized blocks are page aligned */
		{ 10, 128 * KiB, 64 * KiB },		/* beyond a chunk: an aligned run */
		{ 64 * KiB + 1, 0, 128 * KiB },
		{ 5 * MiB + 3, 0, 5 * MiB + 64 * KiB },
		{ 3 * MiB, 2 * MiB, 3 * MiB },
		{ 40 * KiB, 0, 64 * KiB },
	};
	void *blocks[sizeof(cases) / sizeof(cases[0])], *base;

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t align = cases[i].align ? cases[i].align : 64;
		char *p = blocks[i] = must_alloc(pool, cases[i].size, cases[i].align);

		if (!p)
			continue;
		CHECK((uintptr_t)p % align == 0, "case %u: %p not aligned to %zu", i, (void *)p, align);
		if (cases[i].usable >= 4096)
			CHECK((uintptr_t)p % 4096 == 0, "case %u: %p not page aligned", i, (void *)p);
		CHECK(block_of(p, &base) == cases[i].usable, "case %u: usable %zu, expected %zu", i,
		      block_of(p, &base), cases[i].usable);
		p[0] = 1;
		p[cases[i].size - 1] = 2;
		/* An interior pointer of a large block maps to its start. */
		CHECK(block_of(p + cases[i].size - 1, &base) == cases[i].usable && base == p,
		      "case %u: interior pointer maps to %p, block %p", i, base, (void *)p);
	}
	aql_mem_pool_stats st = stats_of(pool);
	CHECK(st.large_bytes == (64 + 128 + 5 * 1024 + 64 + 3 * 1024 + 64) * KiB,
	      "large bytes %zu", st.large_bytes);
	CHECK(st.pinned == 0 && st.committed >= st.large_bytes,
	      "unpinned pool: pinned %zu, committed %zu", st.pinned, st.committed);
	for (unsigned i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
		aql_mem_free(blocks[i]);
	st = stats_of(pool);
	CHECK(st.large_bytes == 0 && st.bytes_in_use == 0, "after free: large %zu, in use %zu",
	      st.large_bytes, st.bytes_in_use);
	CHECK_OK(aql_mem_pool_destroy(pool));
}

/* A pattern of small and large blocks, freed in a shuffled order. */
static void alloc_pattern(aql_mem_pool *pool, void **blocks, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		blocks[i] = must_alloc(pool, i % 50 == 7 ? 200 * KiB + i : 64 + (i * 37) % 4000, 0);
}

static void free_pattern(void **blocks, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		CHECK_OK(aql_mem_free_checked(blocks[(i * 7919u) % n]));
}

static void test_reuse(void)
{
	enum { N = 2000 };
	aql_mem_pool *pool = new_pool(AQL_MEM_FINE_GRAINED, 0, AQL_NUMA_ANY, 256 * MiB);
	static void *first[N], *again[N];
	aql_mem_pool_stats a, b;

	alloc_pattern(pool, first, N);
	free_pattern(first, N);
	a = stats_of(pool);
	for (unsigned round = 0; round < 5; round++) {
		alloc_pattern(pool, again, N);
		free_pattern(again, N);
	}
	b = stats_of(pool);
	CHECK(a.committed == b.committed && a.grow_count == b.grow_count && a.slab_bytes == b.slab_bytes,
	      "reuse grew the pool: committed %zu -> %zu, grows %llu -> %llu, slabs %zu -> %zu",
	      a.committed, b.committed, (unsigned long long)a.grow_count,
	      (unsigned long long)b.grow_count, a.slab_bytes, b.slab_bytes);
	CHECK(b.allocations_in_use == 0 && b.allocations_in_use_peak == N,
	      "in use %llu, peak %llu", (unsigned long long)b.allocations_in_use,
	      (unsigned long long)b.allocations_in_use_peak);
	/* A hot small block comes back without growing, a million times over. */
	for (unsigned i = 0; i < 1000000; i++) {
		void *p = NULL;

		if (aql_mem_alloc(pool, 256, 0, &p) != AQL_OK)
			break;
		aql_mem_free(p);
	}
	a = stats_of(pool);
	CHECK(a.grow_count == b.grow_count && a.allocations_in_use == 0,
	      "hot loop grew the pool (%llu -> %llu grows) or leaked (%llu)",
	      (unsigned long long)b.grow_count, (unsigned long long)a.grow_count,
	      (unsigned long long)a.allocations_in_use);
	CHECK_OK(aql_mem_pool_destroy(pool));
}

/* What aql_mem_free() prints for ptr. */
static void free_stderr(void *ptr, char *buf, size_t cap)
{
	int fds[2], saved;
	ssize_t n;

	buf[0] = 0;
	if (pipe(fds) != 0)
		return;
	fflush(stderr);
	saved = dup(2);
	dup2(fds[1], 2);
	aql_mem_free(ptr);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	n = read(fds[0], buf, cap - 1);
	buf[n > 0 ? n : 0] = 0;
	close(fds[0]);
}

static void test_lookup(void)
{
	aql_mem_pool *pool = new_pool(AQL_MEM_FINE_GRAINED, 0, AQL_NUMA_ANY, 64 * MiB);
	char *small = must_alloc(pool, 256, 0), *large = must_alloc(pool, 300 * KiB, 0);
	void *heap = malloc(64);
	int local = 0;
	aql_mem_info info;
	char msg[512];

	if (!small || !large || !heap)
		exit(1);
	CHECK(aql_mem_query(&local, &info) == AQL_ERR_NOT_FOUND && th_error_has("no memory pool"),
	      "stack pointer");
	CHECK(aql_mem_query(heap, &info) == AQL_ERR_NOT_FOUND, "heap pointer");
	CHECK(aql_mem_query(NULL, &info) == AQL_ERR_NOT_FOUND, "NULL");
	CHECK(aql_mem_query(small, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
	CHECK_OK(aql_mem_query(small + 200, &info));
	CHECK(info.base == small && info.offset == 200 && info.size == 256 && info.pool == pool,
	      "interior small: base %p offset %zu size %zu", info.base, info.offset, info.size);
	CHECK_OK(aql_mem_query(large + 299 * KiB, &info));
	CHECK(info.base == large && info.offset == 299 * KiB && info.size == 320 * KiB,
	      "interior large: base %p offset %zu size %zu", info.base, info.offset, info.size);
	/* The slot after small is in the pool but not handed out. */
	CHECK(aql_mem_query(small + 256, &info) == AQL_ERR_NOT_FOUND && th_error_has("no live block"),
	      "free slot");

	/* Bad frees: refused, reported, and without effect. */
	CHECK(aql_mem_free_checked(heap) == AQL_ERR_INVALID_ARG && th_error_has("no memory pool"),
	      "foreign free");
	free_stderr(&local, msg, sizeof(msg));
	CHECK(strstr(msg, "belongs to no memory pool") && strstr(msg, "ignored"),
	      "aql_mem_free of a stack pointer printed \"%s\"", msg);
	CHECK(aql_mem_free_checked(small + 64) == AQL_ERR_INVALID_ARG && th_error_has("64 bytes into"),
	      "interior small free");
	CHECK(aql_mem_free_checked(large + 64 * KiB) == AQL_ERR_INVALID_ARG &&
	      th_error_has("65536 bytes into"), "interior large free");
	CHECK(aql_mem_query(small, &info) == AQL_OK && aql_mem_query(large, &info) == AQL_OK,
	      "blocks survive bad frees");
	CHECK(stats_of(pool).allocations_in_use == 2, "bad frees changed the count");

	/* Double frees. */
	CHECK_OK(aql_mem_free_checked(small));
	CHECK(aql_mem_free_checked(small) == AQL_ERR_INVALID_ARG && th_error_has("double free"),
	      "small double free");
	free_stderr(small, msg, sizeof(msg));
	CHECK(strstr(msg, "double free"), "aql_mem_free double free printed \"%s\"", msg);
	CHECK_OK(aql_mem_free_checked(large));
	CHECK(aql_mem_free_checked(large) == AQL_ERR_INVALID_ARG && th_error_has("double free"),
	      "large double free");
	CHECK(aql_mem_query(large, &info) == AQL_ERR_NOT_FOUND, "freed large block still found");
	aql_mem_pool_stats st = stats_of(pool);
	CHECK(st.allocations_in_use == 0 && st.bytes_in_use == 0, "double frees changed counts");
	CHECK_OK(aql_mem_free_checked(NULL));
	aql_mem_free(NULL);
	free(heap);
	CHECK_OK(aql_mem_pool_destroy(pool));
	/* A destroyed pool's addresses belong to no pool. */
	CHECK(aql_mem_query(small, &info) == AQL_ERR_NOT_FOUND && th_error_has("no memory pool"),
	      "address of a destroyed pool");
}

static void test_kinds_and_agents(void)
{
	aql_host_agent_config ac = { .workers = 1 };
	aql_agent *a = th_agent(), *b = NULL;
	aql_mem_pool *fine, *fine2, *coarse, *mine;
	aql_mem_info info;

	CHECK_OK(aql_host_agent_create(&ac, &b));
	CHECK_OK(aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &fine));
	CHECK_OK(aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &fine2));
	CHECK_OK(aql_mem_pool_default(AQL_MEM_COARSE_GRAINED, &coarse));
	CHECK(fine == fine2 && fine != coarse, "default pools: %p %p %p", (void *)fine,
	      (void *)fine2, (void *)coarse);
	CHECK(aql_mem_pool_destroy(fine) == AQL_ERR_INVALID_ARG && th_error_has("default"),
	      "default pool destroyed");

	aql_mem_pool_config c = { .kind = AQL_MEM_COARSE_GRAINED, .numa_node = AQL_NUMA_ANY,
				  .agents = &a, .agent_count = 1, .max_size = 8 * MiB };
	CHECK_OK(aql_mem_pool_create(&c, &mine));
	void *p = must_alloc(mine, 1000, 0), *q = must_alloc(fine, 1000, 0),
	     *r = must_alloc(coarse, 100 * KiB, 0);

	CHECK_OK(aql_mem_query(p, &info));
	CHECK(info.kind == AQL_MEM_COARSE_GRAINED && info.agent_count == 1 && info.agents[0] == a &&
	      info.flags == 0, "restricted block: kind %d, %u agents, flags 0x%x", (int)info.kind,
	      info.agent_count, info.flags);
	CHECK(aql_mem_agent_may_access(p, a) == 1 && aql_mem_agent_may_access(p, b) == 0,
	      "restricted block: agent a %d, agent b %d", aql_mem_agent_may_access(p, a),
	      aql_mem_agent_may_access(p, b));
	CHECK_OK(aql_mem_query(q, &info));
	CHECK(info.kind == AQL_MEM_FINE_GRAINED && info.agent_count == 0 &&
	      info.flags == AQL_MEM_PINNED && info.numa_node == AQL_NUMA_ANY,
	      "default fine block: kind %d, %u agents, flags 0x%x", (int)info.kind,
	      info.agent_count, info.flags);
	CHECK(aql_mem_agent_may_access(q, a) == 1 && aql_mem_agent_may_access(q, b) == 1,
	      "open block refused an agent");
	CHECK_OK(aql_mem_query(r, &info));
	CHECK(info.kind == AQL_MEM_COARSE_GRAINED && info.pool == coarse, "default coarse block");
	CHECK(aql_mem_agent_may_access(p, NULL) == 0 && aql_mem_agent_may_access(&info, a) == 0,
	      "NULL agent or foreign pointer allowed");
	aql_mem_free(p);
	CHECK(aql_mem_agent_may_access(p, a) == 0, "freed block still accessible");
	aql_mem_free(q);
	aql_mem_free(r);
	CHECK_OK(aql_mem_pool_destroy(mine));
	CHECK_OK(aql_agent_destroy(b));
}

static long get_mempolicy_(int *mode, unsigned long *mask, unsigned long maxnode,
			   const void *addr, unsigned long flags)
{
	return syscall(SYS_get_mempolicy, mode, mask, maxnode, addr, flags);
}

static void test_numa(void)
{
	aql_mem_pool_config c = { .kind = AQL_MEM_FINE_GRAINED, .flags = AQL_MEM_PINNED,
				  .numa_node = 0, .max_size = 16 * MiB };
	unsigned long mask[16] = { 0 };
	aql_mem_pool *pool, *bad = NULL;
	int node = -1, mode = -1;

	CHECK_OK(aql_mem_pool_create(&c, &pool));
	volatile char *p = must_alloc(pool, 128 * KiB, 0);
	if (!p)
		return;
	p[4096] = 1;
	if (get_mempolicy_(&node, NULL, 0, (const void *)(p + 4096), MPOL_F_NODE | MPOL_F_ADDR) != 0 &&
	    errno == ENOSYS) {
		printf("note: no NUMA in this kernel; placement not checked\n");
	} else {
		CHECK(node == 0, "page on node %d", node);
		CHECK(get_mempolicy_(&mode, mask, 1025, (const void *)p, MPOL_F_ADDR) == 0 &&
		      mode == MPOL_BIND && mask[0] == 1,
		      "policy of the block: mode %d mask 0x%lx (want MPOL_BIND, node 0)", mode, mask[0]);
	}
	CHECK(stats_of(pool).numa_node == 0, "stats node");
	aql_mem_free((void *)p);
	CHECK_OK(aql_mem_pool_destroy(pool));

	c.numa_node = 5;
	CHECK(aql_mem_pool_create(&c, &bad) == AQL_ERR_INVALID_ARG &&
	      th_error_has("NUMA node 5 does not exist") && th_error_has("online: 0"),
	      "node 5 accepted");
	CHECK(bad == NULL, "out written on failure");
	c.numa_node = -2;
	CHECK(aql_mem_pool_create(&c, &bad) == AQL_ERR_INVALID_ARG && th_error_has("node -2"),
	      "node -2 accepted");

	/* Near the CPU agent, which spans every node: no binding. */
	c.numa_node = AQL_NUMA_ANY;
	c.near_agent = th_agent();
	CHECK_OK(aql_mem_pool_create(&c, &pool));
	p = must_alloc(pool, 64, 0);
	p[0] = 1;
	mode = -1;
	CHECK(get_mempolicy_(&mode, mask, 1025, (const void *)p, MPOL_F_ADDR) != 0 ||
	      mode == MPOL_DEFAULT, "unbound pool has policy %d", mode);
	CHECK(stats_of(pool).numa_node == AQL_NUMA_ANY, "near CPU agent bound to a node");
	aql_mem_free((void *)p);
	CHECK_OK(aql_mem_pool_destroy(pool));
}

/* The smaps block of the mapping containing addr, or "" if none. */
static void smaps_of(const void *addr, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	size_t len = 0;

	out[0] = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
			if (in)
				break;
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		}
		if (in && len + strlen(line) < cap) {
			memcpy(out + len, line, strlen(line) + 1);
			len += strlen(line);
		}
	}
	fclose(f);
}

static void test_huge_pages(void)
{
	aql_mem_pool *huge = new_pool(AQL_MEM_FINE_GRAINED, AQL_MEM_HUGE_PAGES | AQL_MEM_PINNED,
				      AQL_NUMA_ANY, 64 * MiB);
	aql_mem_pool *plain = new_pool(AQL_MEM_FINE_GRAINED, AQL_MEM_PINNED, AQL_NUMA_ANY, 64 * MiB);
	char mode[128] = "", smaps[4096];
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
	int thp;

	if (f) {
		if (!fgets(mode, sizeof(mode), f))
			mode[0] = 0;
		fclose(f);
	}
	thp = mode[0] && !strstr(mode, "[never]");
	aql_mem_pool_stats st = stats_of(huge);
	CHECK(!!(st.flags & AQL_MEM_HUGE_PAGES) == thp, "THP \"%.*s\" but pool flags 0x%x",
	      (int)strcspn(mode, "\n"), mode, st.flags);

	char *small = must_alloc(huge, 64, 0), *other = must_alloc(plain, 64, 0);
	char *big = must_alloc(huge, 2 * MiB, 2 * MiB);
	if (!small || !other || !big)
		return;
	CHECK((uintptr_t)big % (2 * MiB) == 0, "huge block %p", (void *)big);
	st = stats_of(huge);
	if (thp) {
		/* THP needs whole 2 MiB-aligned ranges, so the pool commits in such steps. */
		CHECK(st.committed % (2 * MiB) == 0 && st.committed >= 4 * MiB,
		      "huge pool committed %zu", st.committed);
		smaps_of(big, smaps, sizeof(smaps));
		CHECK(strstr(smaps, " hg"), "MADV_HUGEPAGE missing from the mapping:\n%s", smaps);
		char *ahp = strstr(smaps, "AnonHugePages:");
		printf("note: huge pool mapping has %ld kB in huge pages\n",
		       ahp ? strtol(ahp + 14, NULL, 10) : -1L);
	}
	CHECK(stats_of(plain).committed < 2 * MiB, "plain pool committed %zu for 64 bytes",
	      stats_of(plain).committed);
	aql_mem_free(small);
	aql_mem_free(other);
	aql_mem_free(big);
	CHECK_OK(aql_mem_pool_destroy(huge));
	CHECK_OK(aql_mem_pool_destroy(plain));
}

/* Drop CAP_IPC_LOCK from the effective set, so RLIMIT_MEMLOCK applies. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) != 0)
		return -1;
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	if (syscall(SYS_capset, &hdr, data) != 0)
		return -1;
	if (syscall(SYS_capget, &hdr, data) != 0)
		return -1;
	return (data[CAP_IPC_LOCK / 32].effective >> (CAP_IPC_LOCK % 32)) & 1 ? -1 : 0;
}

static void memlock_child(void)
{
	struct rlimit rl;
	aql_mem_pool *pinned, *unpinned;
	void *p = NULL, *q = NULL;

	CHECK(drop_ipc_lock() == 0, "cannot drop CAP_IPC_LOCK: %s", strerror(errno));
	CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0, "getrlimit");
	rl.rlim_cur = 1 * MiB;
	CHECK(setrlimit(RLIMIT_MEMLOCK, &rl) == 0, "setrlimit: %s", strerror(errno));

	pinned = new_pool(AQL_MEM_FINE_GRAINED, AQL_MEM_PINNED, AQL_NUMA_ANY, 64 * MiB);
	p = must_alloc(pinned, 64, 0);
	aql_mem_pool_stats before = stats_of(pinned);
	CHECK(before.pinned == 256 * KiB, "pinned %zu after one small block", before.pinned);
	CHECK(aql_mem_alloc(pinned, 4 * MiB, 0, &q) == AQL_ERR_NOMEM, "4 MiB pinned with a 1 MiB limit");
	/* The message names the limit, its value, the request, and the ways out. */
	CHECK(th_error_has("RLIMIT_MEMLOCK") && th_error_has("1048576 bytes") &&
	      th_error_has("pinning 4194304 bytes") && th_error_has("ulimit -l") &&
	      th_error_has("/etc/security/limits.conf") && th_error_has("LimitMEMLOCK") &&
	      th_error_has("without AQL_MEM_PINNED"), "message");
	aql_mem_pool_stats after = stats_of(pinned);
	CHECK(after.pinned == before.pinned && after.committed == before.committed &&
	      after.large_bytes == 0, "failed pin changed the pool: pinned %zu committed %zu",
	      after.pinned, after.committed);
	/* The pool still works within the limit, and an unpinned pool ignores it. */
	q = must_alloc(pinned, 512, 0);
	aql_mem_free(q);
	unpinned = new_pool(AQL_MEM_FINE_GRAINED, 0, AQL_NUMA_ANY, 64 * MiB);
	q = must_alloc(unpinned, 4 * MiB, 0);
	aql_mem_free(q);
	aql_mem_free(p);
	CHECK_OK(aql_mem_pool_destroy(pinned));
	CHECK_OK(aql_mem_pool_destroy(unpinned));
}

static void test_memlock_limit(void)
{
	unsigned counts[2] = { 0, 0 };
	int fds[2], status = 0;
	pid_t pid;

	if (pipe(fds) != 0) {
		CHECK(0, "pipe: %s", strerror(errno));
		return;
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		th_passed = th_failed = 0;
		memlock_child();
		counts[0] = th_passed;
		counts[1] = th_failed;
		if (write(fds[1], counts, sizeof(counts)) != sizeof(counts))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	CHECK(pid > 0 && read(fds[0], counts, sizeof(counts)) == sizeof(counts),
	      "child reported nothing");
	close(fds[0]);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child status 0x%x", status);
	th_passed += counts[0];
	th_failed += counts[1];
	CHECK(counts[0] >= 10, "child ran %u checks", counts[0]);
}

static void test_bad_args(void)
{
	aql_mem_pool *pool = new_pool(AQL_MEM_FINE_GRAINED, 0, AQL_NUMA_ANY, 2 * MiB), *x = NULL;
	aql_agent *agents[2] = { th_agent(), NULL };
	aql_mem_pool_config c = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY };
	aql_mem_pool_stats st;
	void *p = NULL, *q = NULL;

	CHECK(aql_mem_alloc(pool, 0, 0, &p) == AQL_ERR_INVALID_ARG && th_error_has("size 0"), "size 0");
	CHECK(aql_mem_alloc(pool, 64, 3, &p) == AQL_ERR_INVALID_ARG &&
	      th_error_has("not a power of two"), "alignment 3");
	CHECK(aql_mem_alloc(pool, 64, 4 * MiB, &p) == AQL_ERR_INVALID_ARG &&
	      th_error_has("AQL_MEM_MAX_ALIGN"), "alignment 4 MiB");
	CHECK(aql_mem_alloc(pool, 3 * MiB, 0, &p) == AQL_ERR_INVALID_ARG &&
	      th_error_has("exceed") && th_error_has("2097152"), "size beyond the reserve");
	CHECK(aql_mem_alloc(pool, SIZE_MAX, 0, &p) == AQL_ERR_INVALID_ARG, "SIZE_MAX");
	CHECK(aql_mem_alloc(NULL, 64, 0, &p) == AQL_ERR_INVALID_ARG, "NULL pool");
	CHECK(aql_mem_alloc(pool, 64, 0, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
	CHECK(p == NULL, "out written on failure");

	/* Exhaustion of a 2 MiB reserve. */
	p = must_alloc(pool, 1 * MiB, 0);
	CHECK(aql_mem_alloc(pool, 1536 * KiB, 0, &q) == AQL_ERR_NOMEM && th_error_has("no room"),
	      "reserve exhausted");
	CHECK(aql_mem_pool_destroy(pool) == AQL_ERR_INVALID_ARG &&
	      th_error_has("1 live allocations") && th_error_has("1048576 bytes"),
	      "destroy with a live block");
	aql_mem_free(p);
	CHECK_OK(aql_mem_pool_destroy(pool));
	CHECK(aql_mem_alloc(pool, 64, 0, &p) == AQL_ERR_INVALID_ARG && th_error_has("destroyed"),
	      "alloc from a destroyed pool");
	CHECK(aql_mem_pool_destroy(pool) == AQL_ERR_INVALID_ARG, "destroyed twice");
	CHECK(aql_mem_pool_get_stats(pool, &st) == AQL_ERR_INVALID_ARG, "stats of a destroyed pool");
	CHECK(aql_mem_pool_destroy((aql_mem_pool *)&c) == AQL_ERR_INVALID_ARG &&
	      th_error_has("not a memory pool"), "destroy of a non-pool");
	CHECK_OK(aql_mem_pool_destroy(NULL));

	c.kind = 7;
	CHECK(aql_mem_pool_create(&c, &x) == AQL_ERR_INVALID_ARG && th_error_has("kind 7"), "kind");
	c.kind = AQL_MEM_FINE_GRAINED;
	c.flags = 0x80;
	CHECK(aql_mem_pool_create(&c, &x) == AQL_ERR_INVALID_ARG && th_error_has("0x80"), "flags");
	c.flags = 0;
	c.agent_count = 2;
	CHECK(aql_mem_pool_create(&c, &x) == AQL_ERR_INVALID_ARG && th_error_has("agents is NULL"),
	      "agent_count without agents");
	c.agents = agents;
	CHECK(aql_mem_pool_create(&c, &x) == AQL_ERR_INVALID_ARG && th_error_has("agents[1]"),
	      "NULL agent");
	c.agent_count = AQL_MEM_MAX_AGENTS + 1;
	CHECK(aql_mem_pool_create(&c, &x) == AQL_ERR_INVALID_ARG, "too many agents");
	c.agents = NULL;
	c.agent_count = 0;
	c.max_size = AQL_MEM_MAX_POOL_SIZE + 1;
	CHECK(aql_mem_pool_create(&c, &x) == AQL_ERR_INVALID_ARG &&
	      th_error_has("AQL_MEM_MAX_POOL_SIZE"), "max_size");
	CHECK(x == NULL, "out written on failure");
	c.max_size = 0;
	CHECK(aql_mem_pool_create(&c, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
	CHECK(aql_mem_pool_default(5, &x) == AQL_ERR_INVALID_ARG, "default kind 5");
	CHECK(aql_mem_pool_get_stats(NULL, &st) == AQL_ERR_INVALID_ARG, "stats of NULL");

	/* The pool table fills up, says so, and frees its slots again. */
	static aql_mem_pool *many[AQL_MEM_MAX_POOLS + 1];
	unsigned n = 0;
	aql_status s = AQL_OK;

	c.max_size = 2 * MiB;
	while (n <= AQL_MEM_MAX_POOLS && (s = aql_mem_pool_create(&c, &many[n])) == AQL_OK)
		n++;
	CHECK(s == AQL_ERR_NOMEM && th_error_has("AQL_MEM_MAX_POOLS") && n < AQL_MEM_MAX_POOLS,
	      "pool table: %u pools, %s", n, aql_status_str(s));
	while (n)
		CHECK_OK(aql_mem_pool_destroy(many[--n]));
	CHECK_OK(aql_mem_pool_create(&c, &x));
	CHECK_OK(aql_mem_pool_destroy(x));
}

/*
 * Threads allocate, fill, check and free blocks, and swap blocks through
 * shared mailboxes so that frees cross threads. Each block holds a key at
 * both ends and its middle; a block handed out twice gets overwritten by
 * its second owner and fails the first owner's check.
 */
enum { STRESS_THREADS = 4, STRESS_OPS = 200000, STRESS_SLOTS = 128, MAILBOXES = 16 };

struct block {
	char *p;
	size_t size;
	uint64_t key;
};

struct stress {
	aql_mem_pool *pool;
	struct block mail[MAILBOXES];
	int mail_busy[MAILBOXES];	/* spin locks guarding mail[] */
	unsigned long bad, failed;
};

static struct stress shared;

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void fill(struct block *b)
{
	memset(b->p, (int)(b->key % 251) + 1, b->size);
	memcpy(b->p, &b->key, 8);
	memcpy(b->p + b->size / 2, &b->key, 8);
	memcpy(b->p + b->size - 8, &b->key, 8);
}

static int intact(const struct block *b)
{
	uint64_t k[3];

	memcpy(&k[0], b->p, 8);
	memcpy(&k[1], b->p + b->size / 2, 8);
	memcpy(&k[2], b->p + b->size - 8, 8);
	return k[0] == b->key && k[1] == b->key && k[2] == b->key &&
	       b->p[8] == (char)((b->key % 251) + 1);
}

static void *stress_thread(void *arg)
{
	struct block mine[STRESS_SLOTS] = { { 0 } };
	uint64_t seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
	unsigned long bad = 0, failed = 0;

	for (unsigned op = 0; op < STRESS_OPS; op++) {
		uint64_t r = rng(&seed);
		struct block *b = &mine[r % STRESS_SLOTS];

		if (b->p) {
			if (!intact(b))
				bad++;
			if ((r >> 20) % 8 == 0) {
				/* Swap with a mailbox: the block is freed by another thread. */
				unsigned m = (unsigned)(r >> 32) % MAILBOXES;
				struct block tmp;

				while (__atomic_exchange_n(&shared.mail_busy[m], 1, __ATOMIC_ACQUIRE))
					;
				tmp = shared.mail[m];
				shared.mail[m] = *b;
				__atomic_store_n(&shared.mail_busy[m], 0, __ATOMIC_RELEASE);
				*b = tmp;
				if (b->p && !intact(b))
					bad++;
				continue;
			}
			if (aql_mem_free_checked(b->p) != AQL_OK)
				failed++;
			b->p = NULL;
			continue;
		}
		b->size = (r >> 8) % 64 == 0 ? 64 * KiB + (r >> 16) % (200 * KiB)
					     : 32 + (r >> 16) % 4065;
		if (aql_mem_alloc(shared.pool, b->size, 0, (void **)&b->p) != AQL_OK) {
			failed++;
			b->p = NULL;
			continue;
		}
		b->key = r | 1;
		fill(b);
	}
	for (unsigned i = 0; i < STRESS_SLOTS; i++) {
		if (mine[i].p && !intact(&mine[i]))
			bad++;
		if (mine[i].p && aql_mem_free_checked(mine[i].p) != AQL_OK)
			failed++;
	}
	__atomic_fetch_add(&shared.bad, bad, __ATOMIC_RELAXED);
	__atomic_fetch_add(&shared.failed, failed, __ATOMIC_RELAXED);
	return NULL;
}

static void test_stress(void)
{
	pthread_t t[STRESS_THREADS];
	aql_mem_pool_stats st;

	shared.pool = new_pool(AQL_MEM_FINE_GRAINED, 0, AQL_NUMA_ANY, 1024 * MiB);
	for (uintptr_t i = 0; i < STRESS_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, stress_thread, (void *)i) == 0, "thread %u",
		      (unsigned)i);
	for (unsigned i = 0; i < STRESS_THREADS; i++)
		pthread_join(t[i], NULL);
	for (unsigned m = 0; m < MAILBOXES; m++) {
		if (shared.mail[m].p && !intact(&shared.mail[m]))
			shared.bad++;
		aql_mem_free(shared.mail[m].p);
	}
	CHECK(shared.bad == 0, "%lu blocks were overwritten: handed out twice?", shared.bad);
	CHECK(shared.failed == 0, "%lu allocations or frees failed", shared.failed);
	st = stats_of(shared.pool);
	CHECK(st.allocations_in_use == 0 && st.bytes_in_use == 0, "%llu blocks, %zu bytes left",
	      (unsigned long long)st.allocations_in_use, st.bytes_in_use);
	CHECK(st.large_bytes == 0, "large bytes left %zu", st.large_bytes);
	CHECK(st.allocations_in_use_peak > STRESS_THREADS * STRESS_SLOTS / 4 &&
	      st.allocations_in_use_peak <= STRESS_THREADS * STRESS_SLOTS + MAILBOXES,
	      "peak %llu", (unsigned long long)st.allocations_in_use_peak);
	CHECK_OK(aql_mem_pool_destroy(shared.pool));
}

int main(void)
{
	/* First, while no agent threads exist to make fork() awkward. */
	test_memlock_limit();
	test_size_classes();
	test_alignment_and_large();
	test_reuse();
	test_lookup();
	test_kinds_and_agents();
	test_numa();
	test_huge_pages();
	test_bad_args();
	test_stress();
	return th_finish();
}
