/* SPDX-License-Identifier: MIT */
/*
 * Memory pools. Each pool owns one reserved range, cut into 64 KiB chunks
 * and committed from the bottom up. Chunks below `top` are slabs (cut into
 * slots of one size class), parts of large blocks, or free runs. Bookkeeping
 * lives outside the pool's memory, so a device or a stray write past a
 * block cannot corrupt it, and is indexed by offset from the pool's base:
 *
 *	map[chunk]	what the chunk is (below); read without a lock
 *	run_len[chunk]	chunks in the large block starting here, or in the
 *			free run starting or ending here
 *	next, prev	links of a free run's head in its size bin
 *	link[unit]	per 64-byte unit: the free slot after this one + 1,
 *			or LINK_IN_USE while the slot is handed out
 *
 * A size class's free slots form a Treiber stack whose head is one 64-bit
 * word: a 32-bit tag bumped by every change (so a pop that read a stale
 * `next` fails its CAS: no ABA) and the top slot's unit + 1 (0: empty).
 * Slabs stay with their class once cut. Free runs are coalesced with their
 * neighbours and kept in power-of-two bins under the pool's lock; a run
 * that reaches `top` lowers it instead.
 *
 * Pool structures live in a static table and are never freed, and each
 * slot's address range is one word, so aql_mem_free() can look a pointer
 * up while pools are created and destroyed elsewhere.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/mem.h>
#include "util/error.h"
#include "mem/pages.h"
#include "mem/pool.h"

#define CHUNK_SHIFT 16
#define UNIT_SHIFT 6
#define UNITS_PER_CHUNK (1u << (CHUNK_SHIFT - UNIT_SHIFT))
#define NCLASS 10		/* 64 B .. 32 KiB */
#define NBINS 32

_Static_assert(AQL_MEM_CHUNK_SIZE == 1u << CHUNK_SHIFT, "chunk size");
_Static_assert(AQL_MEM_MIN_CLASS_SIZE << (NCLASS - 1) == AQL_MEM_MAX_CLASS_SIZE, "classes");
/* Units must fit the 32-bit halves of a stack head and of the use word. */
_Static_assert((AQL_MEM_MAX_POOL_SIZE >> UNIT_SHIFT) <= (1ull << 31), "units fit 31 bits");

/* map entries: type in the top two bits, a class or head chunk below. */
#define MAP_NONE 0u			/* above top, never cut */
#define MAP_SLAB (1u << 30)		/* | class */
#define MAP_LARGE (2u << 30)		/* | index of the block's first chunk */
#define MAP_FREE (3u << 30)		/* in a free run (or once was, above top) */
#define MAP_TYPE(e) ((e) & (3u << 30))
#define MAP_VALUE(e) ((e) & ((1u << 30) - 1))

#define LINK_IN_USE UINT32_MAX
#define NIL UINT32_MAX

/* Range words: base and size in 2 MiB units, base in the low 40 bits. */
#define RANGE_SHIFT 21
#define RANGE_BASE_BITS 40

/* The use word: live blocks in the high half, their 64-byte units in the low. */
#define USE_ONE (1ull << 32)
#define USE_UNITS(w) ((w) & 0xffffffffull)
#define USE_COUNT(w) ((w) >> 32)

#define COMMIT_STEP ((size_t)256 << 10)

struct class_head {
	uint64_t head;
} __attribute__((aligned(64)));

struct aql_mem_pool {
	/* Set while the pool is created; read-only afterwards. */
	char *base;
	size_t reserve;
	uint32_t nchunks;
	uint32_t index;			/* in the pool table, for messages */
	uint32_t *map, *run_len, *next, *prev, *link;
	void *meta;
	size_t meta_size;
	size_t commit_step;
	enum aql_mem_kind kind;
	uint32_t flags;			/* effective */
	int32_t numa_node;
	int is_default;
	aql_agent **agents;
	uint32_t agent_count;
	struct aql_mem_commit_hook hook;
	int live;			/* atomic */

	/* Counters every allocation touches. */
	uint64_t use __attribute__((aligned(64)));
	uint64_t peak_units, peak_count;

	struct class_head cls[NCLASS];

	/* Chunk-level state, under lock. */
	pthread_mutex_t lock __attribute__((aligned(64)));
	uint32_t top;			/* chunks below were cut at some time */
	uint32_t committed;		/* chunks readable and writable */
	uint32_t bins[NBINS];		/* free-run heads by floor(log2(length)) */
	size_t pinned, slab_bytes, large_bytes;
	uint64_t grow_count;
};

static struct aql_mem_pool pools[AQL_MEM_MAX_POOLS];
static uint64_t ranges[AQL_MEM_MAX_POOLS];	/* 0 for a free slot */
static uint32_t pool_limit;			/* slots ever used */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static aql_mem_pool *defaults[2][2];	/* [kind][pinned] */

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

static inline uint32_t map_get(const struct aql_mem_pool *p, uint32_t chunk)
{
	return __atomic_load_n(&p->map[chunk], __ATOMIC_ACQUIRE);
}

static inline void map_set(struct aql_mem_pool *p, uint32_t chunk, uint32_t e)
{
	__atomic_store_n(&p->map[chunk], e, __ATOMIC_RELEASE);
}

static inline uint32_t len_get(const struct aql_mem_pool *p, uint32_t chunk)
{
	return __atomic_load_n(&p->run_len[chunk], __ATOMIC_RELAXED);
}

static inline void len_set(struct aql_mem_pool *p, uint32_t chunk, uint32_t n)
{
	__atomic_store_n(&p->run_len[chunk], n, __ATOMIC_RELAXED);
}

static inline uint32_t link_get(const struct aql_mem_pool *p, uint32_t unit)
{
	return __atomic_load_n(&p->link[unit], __ATOMIC_RELAXED);
}

static inline void link_set(struct aql_mem_pool *p, uint32_t unit, uint32_t v)
{
	__atomic_store_n(&p->link[unit], v, __ATOMIC_RELAXED);
}

static inline unsigned class_of(size_t need)
{
	return need <= AQL_MEM_MIN_CLASS_SIZE ? 0 : 26u - (unsigned)__builtin_clz((unsigned)(need - 1));
}

static inline size_t class_size(unsigned c)
{
	return (size_t)AQL_MEM_MIN_CLASS_SIZE << c;
}

/* Whether p is a pool handle at all (live or not). */
static int is_pool(const aql_mem_pool *p)
{
	uintptr_t off = (uintptr_t)p - (uintptr_t)pools;

	return off < sizeof(pools) && off % sizeof(pools[0]) == 0;
}

/* Pool owning address ptr, or NULL. */
static inline struct aql_mem_pool *pool_of(const void *ptr)
{
	uintptr_t a = (uintptr_t)ptr;
	uint32_t n = __atomic_load_n(&pool_limit, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t r = __atomic_load_n(&ranges[i], __ATOMIC_ACQUIRE);
		uintptr_t base = (uintptr_t)(r & ((1ull << RANGE_BASE_BITS) - 1)) << RANGE_SHIFT;
		uintptr_t size = (uintptr_t)(r >> RANGE_BASE_BITS) << RANGE_SHIFT;

		if (a - base < size)
			return &pools[i];
	}
	return NULL;
}

/* Pop a slot of class c; returns its unit + 1, or 0 if the class is empty. */
static inline uint32_t pop(struct aql_mem_pool *p, unsigned c)
{
	uint64_t old = __atomic_load_n(&p->cls[c].head, __ATOMIC_ACQUIRE), new;

	do {
		uint32_t top = (uint32_t)old;

		if (!top)
			return 0;
		/* Stale if another thread popped top meanwhile; the tag then fails the CAS. */
		new = (((old >> 32) + 1) << 32) | link_get(p, top - 1);
	} while (!__atomic_compare_exchange_n(&p->cls[c].head, &old, new, 1, __ATOMIC_ACQUIRE,
					      __ATOMIC_ACQUIRE));
	link_set(p, (uint32_t)old - 1, LINK_IN_USE);
	return (uint32_t)old;
}

/* Push the chain first..last (units + 1, linked already) onto class c. */
static inline void push(struct aql_mem_pool *p, unsigned c, uint32_t first, uint32_t last)
{
	uint64_t old = __atomic_load_n(&p->cls[c].head, __ATOMIC_RELAXED), new;

	do {
		link_set(p, last - 1, (uint32_t)old);
		new = (((old >> 32) + 1) << 32) | first;
	} while (!__atomic_compare_exchange_n(&p->cls[c].head, &old, new, 1, __ATOMIC_RELEASE,
					      __ATOMIC_RELAXED));
}

static inline void note_peak(uint64_t *peak, uint64_t v)
{
	uint64_t old = __atomic_load_n(peak, __ATOMIC_RELAXED);

	while (v > old && !__atomic_compare_exchange_n(peak, &old, v, 1, __ATOMIC_RELAXED,
						       __ATOMIC_RELAXED))
		;
}

static inline void account_alloc(struct aql_mem_pool *p, uint64_t units)
{
	uint64_t w = __atomic_add_fetch(&p->use, USE_ONE | units, __ATOMIC_RELAXED);

	note_peak(&p->peak_units, USE_UNITS(w));
	note_peak(&p->peak_count, USE_COUNT(w));
}

static inline void account_free(struct aql_mem_pool *p, uint64_t units)
{
	__atomic_sub_fetch(&p->use, USE_ONE | units, __ATOMIC_RELAXED);
}

/* ---- chunk runs, under p->lock ---- */

static unsigned bin_of(uint32_t len)
{
	return 31u - (unsigned)__builtin_clz(len);
}

static void bin_insert(struct aql_mem_pool *p, uint32_t head)
{
	unsigned b = bin_of(len_get(p, head));

	p->prev[head] = NIL;
	p->next[head] = p->bins[b];
	if (p->bins[b] != NIL)
		p->prev[p->bins[b]] = head;
	p->bins[b] = head;
}

static void bin_remove(struct aql_mem_pool *p, uint32_t head)
{
	unsigned b = bin_of(len_get(p, head));

	if (p->prev[head] != NIL)
		p->next[p->prev[head]] = p->next[head];
	else
		p->bins[b] = p->next[head];
	if (p->next[head] != NIL)
		p->prev[p->next[head]] = p->prev[head];
}

/* Return chunks [h, h + n) to the free runs, merging with free neighbours. */
static void free_run(struct aql_mem_pool *p, uint32_t h, uint32_t n)
{
	for (uint32_t i = h; i < h + n; i++)
		map_set(p, i, MAP_FREE);
	if (h > 0 && MAP_TYPE(map_get(p, h - 1)) == MAP_FREE) {
		uint32_t left = len_get(p, h - 1);

		bin_remove(p, h - left);
		h -= left;
		n += left;
	}
	if (h + n < p->top && MAP_TYPE(map_get(p, h + n)) == MAP_FREE) {
		uint32_t right = len_get(p, h + n);

		bin_remove(p, h + n);
		n += right;
	}
	if (h + n == p->top) {
		/* Chunks above top keep MAP_FREE: "no block" all the same. */
		p->top = h;
		return;
	}
	len_set(p, h, n);
	len_set(p, h + n - 1, n);
	bin_insert(p, h);
}

/* Make chunks below `need` usable, committing in steps. */
static aql_status grow(struct aql_mem_pool *p, uint32_t need)
{
	size_t from = (size_t)p->committed << CHUNK_SHIFT;
	size_t to = ((size_t)need << CHUNK_SHIFT) + p->commit_step - 1;
	aql_status st;
	char prefix[32];

	to -= to % p->commit_step;
	if (to > p->reserve)
		to = p->reserve;
	st = aql_pages_commit(p->base + from, to - from, !!(p->flags & AQL_MEM_PINNED));
	/* Unreached memory is not handed out: a failed hook leaves committed
	 * where it was, and the next grow tries the range again. */
	if (st == AQL_OK && p->hook.commit)
		st = p->hook.commit(p->hook.ctx, p->base + from, to - from);
	if (st != AQL_OK) {
		snprintf(prefix, sizeof(prefix), "memory pool %u", p->index);
		return aql_fail_prefix(st, prefix);
	}
	if (p->flags & AQL_MEM_PINNED)
		p->pinned += to - from;
	p->committed = (uint32_t)(to >> CHUNK_SHIFT);
	p->grow_count++;
	return AQL_OK;
}

/*
 * Take n chunks starting at a multiple of align (chunks), first fit, and
 * mark them as a slab of class cls (cls >= 0) or as a large block.
 */
static aql_status take_run(struct aql_mem_pool *p, uint32_t n, uint32_t align, int cls,
			   uint32_t *out)
{
	uint32_t s, h = NIL, end, gap;
	aql_status st;

	for (unsigned b = bin_of(n); b < NBINS && h == NIL; b++) {
		for (h = p->bins[b]; h != NIL; h = p->next[h]) {
			s = (h + align - 1) & ~(align - 1);
			if ((uint64_t)s + n <= (uint64_t)h + len_get(p, h))
				break;
		}
	}
	if (h != NIL) {
		end = h + len_get(p, h);
		bin_remove(p, h);
	} else {
		s = (p->top + align - 1) & ~(align - 1);
		if ((uint64_t)s + n > p->nchunks)
			return aql_fail(AQL_ERR_NOMEM,
					"memory pool %u: no room for %zu more bytes: %zu of its %zu reserved bytes are in use or free in pieces too small (raise aql_mem_pool_config.max_size)",
					p->index, (size_t)n << CHUNK_SHIFT,
					(size_t)p->top << CHUNK_SHIFT, p->reserve);
		if (s + n > p->committed && (st = grow(p, s + n)) != AQL_OK)
			return st;
		h = p->top;
		end = p->top = s + n;
	}
	/* Mark the run first: free_run() must not merge the pieces into it. */
	if (cls >= 0) {
		map_set(p, s, MAP_SLAB | (uint32_t)cls);
	} else {
		len_set(p, s, n);
		for (uint32_t i = s; i < s + n; i++)
			map_set(p, i, MAP_LARGE | s);
	}
	gap = s - h;
	if (gap)
		free_run(p, h, gap);
	if (s + n < end)
		free_run(p, s + n, end - s - n);
	*out = s;
	return AQL_OK;
}

/* ---- allocation ---- */

static __attribute__((noinline)) aql_status refill(struct aql_mem_pool *p, unsigned c,
						    uint32_t *out)
{
	uint32_t chunk = 0, first, step = 1u << c, n = UNITS_PER_CHUNK >> c;
	aql_status st;

	pthread_mutex_lock(&p->lock);
	/* Another thread may have cut a slab while this one waited. */
	*out = pop(p, c);
	if (*out) {
		pthread_mutex_unlock(&p->lock);
		return AQL_OK;
	}
	st = take_run(p, 1, 1, (int)c, &chunk);
	if (st == AQL_OK)
		p->slab_bytes += AQL_MEM_CHUNK_SIZE;
	pthread_mutex_unlock(&p->lock);
	if (st != AQL_OK)
		return st;
	/* Keep the first slot; chain the rest and publish them in one push. */
	first = chunk * UNITS_PER_CHUNK + 1;
	link_set(p, first - 1, LINK_IN_USE);
	for (uint32_t i = 1; i + 1 < n; i++)
		link_set(p, first + i * step - 1, first + (i + 1) * step);
	if (n > 1)
		push(p, c, first + step, first + (n - 1) * step);
	*out = first;
	return AQL_OK;
}

static __attribute__((noinline)) aql_status alloc_large(struct aql_mem_pool *p, size_t size,
							 size_t align, void **out)
{
	uint32_t n, head = 0;
	aql_status st;

	if (size > p->reserve)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_alloc: %zu bytes exceed memory pool %u's reserve of %zu bytes (aql_mem_pool_config.max_size)",
				size, p->index, p->reserve);
	n = (uint32_t)((size + AQL_MEM_CHUNK_SIZE - 1) >> CHUNK_SHIFT);
	pthread_mutex_lock(&p->lock);
	st = take_run(p, n, align > AQL_MEM_CHUNK_SIZE ? (uint32_t)(align >> CHUNK_SHIFT) : 1,
		      -1, &head);
	if (st == AQL_OK)
		p->large_bytes += (size_t)n << CHUNK_SHIFT;
	pthread_mutex_unlock(&p->lock);
	if (st != AQL_OK)
		return st;
	account_alloc(p, (uint64_t)n << (CHUNK_SHIFT - UNIT_SHIFT));
	*out = p->base + ((size_t)head << CHUNK_SHIFT);
	return AQL_OK;
}

static __attribute__((noinline)) aql_status alloc_bad(aql_mem_pool *pool, size_t size,
						       size_t align, void **out)
{
	if (!pool || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_alloc: pool or out is NULL");
	if (!is_pool(pool) || !__atomic_load_n(&pool->live, __ATOMIC_ACQUIRE))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_alloc: the pool was destroyed");
	if (size == 0)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_alloc: size 0 (memory pool %u)",
				pool->index);
	if (align & (align - 1))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_alloc: alignment %zu is not a power of two", align);
	return aql_fail(AQL_ERR_INVALID_ARG,
			"aql_mem_alloc: alignment %zu exceeds AQL_MEM_MAX_ALIGN (%zu)", align,
			AQL_MEM_MAX_ALIGN);
}

aql_status aql_mem_alloc(aql_mem_pool *pool, size_t size, size_t align, void **out)
{
	size_t need;
	uint32_t unit;
	unsigned c;
	aql_status st;

	if (unlikely(!pool || !out || size == 0 || (align & (align - 1)) ||
		     align > AQL_MEM_MAX_ALIGN || !__atomic_load_n(&pool->live, __ATOMIC_RELAXED)))
		return alloc_bad(pool, size, align, out);
	need = size > align ? size : align;
	if (unlikely(need > AQL_MEM_MAX_CLASS_SIZE))
		return alloc_large(pool, size, align, out);
	c = class_of(need);
	unit = pop(pool, c);
	if (unlikely(!unit) && (st = refill(pool, c, &unit)) != AQL_OK)
		return st;
	account_alloc(pool, 1ull << c);
	*out = pool->base + ((size_t)(unit - 1) << UNIT_SHIFT);
	return AQL_OK;
}

/* ---- free and query ---- */

static __attribute__((noinline)) aql_status free_large(struct aql_mem_pool *p, const void *ptr,
							uint32_t chunk, size_t off)
{
	uint32_t e, n;

	pthread_mutex_lock(&p->lock);
	e = map_get(p, chunk);
	if (MAP_TYPE(e) != MAP_LARGE) {
		pthread_mutex_unlock(&p->lock);
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_free: %p in memory pool %u is not allocated (double free?)",
				ptr, p->index);
	}
	if (MAP_VALUE(e) != chunk || (off & (AQL_MEM_CHUNK_SIZE - 1))) {
		pthread_mutex_unlock(&p->lock);
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_free: %p is %zu bytes into the block at %p of memory pool %u; pass the block's start",
				ptr, off - ((size_t)MAP_VALUE(e) << CHUNK_SHIFT),
				(void *)(p->base + ((size_t)MAP_VALUE(e) << CHUNK_SHIFT)), p->index);
	}
	n = len_get(p, chunk);
	p->large_bytes -= (size_t)n << CHUNK_SHIFT;
	account_free(p, (uint64_t)n << (CHUNK_SHIFT - UNIT_SHIFT));
	free_run(p, chunk, n);
	pthread_mutex_unlock(&p->lock);
	return AQL_OK;
}

aql_status aql_mem_free_checked(void *ptr)
{
	struct aql_mem_pool *p;
	size_t off, mask;
	uint32_t chunk, e, unit;
	unsigned c;

	if (!ptr)
		return AQL_OK;
	p = pool_of(ptr);
	if (unlikely(!p))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_free: %p belongs to no memory pool",
				ptr);
	off = (size_t)((char *)ptr - p->base);
	chunk = (uint32_t)(off >> CHUNK_SHIFT);
	e = map_get(p, chunk);
	if (unlikely(MAP_TYPE(e) != MAP_SLAB))
		return free_large(p, ptr, chunk, off);
	c = MAP_VALUE(e);
	mask = class_size(c) - 1;
	unit = (uint32_t)(off >> UNIT_SHIFT);
	if (unlikely(off & mask))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_free: %p is %zu bytes into a %zu-byte block of memory pool %u; pass the block's start",
				ptr, off & mask, mask + 1, p->index);
	if (unlikely(link_get(p, unit) != LINK_IN_USE))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_free: %p (a %zu-byte block of memory pool %u) is not allocated (double free?)",
				ptr, mask + 1, p->index);
	account_free(p, 1ull << c);
	push(p, c, unit + 1, unit + 1);
	return AQL_OK;
}

void aql_mem_free(void *ptr)
{
	if (unlikely(aql_mem_free_checked(ptr) != AQL_OK))
		fprintf(stderr, "libaql: %s; ignored\n", aql_error_message());
}

aql_status aql_mem_query(const void *ptr, aql_mem_info *out)
{
	struct aql_mem_pool *p = pool_of(ptr);
	size_t off, start, size;
	uint32_t chunk, e;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_query: out is NULL");
	if (!p)
		return aql_fail(AQL_ERR_NOT_FOUND, "%p belongs to no memory pool", ptr);
	off = (size_t)((const char *)ptr - p->base);
	chunk = (uint32_t)(off >> CHUNK_SHIFT);
	e = map_get(p, chunk);
	if (MAP_TYPE(e) == MAP_SLAB) {
		size = class_size(MAP_VALUE(e));
		start = off & ~(size - 1);
		if (link_get(p, (uint32_t)(start >> UNIT_SHIFT)) != LINK_IN_USE)
			goto unallocated;
	} else if (MAP_TYPE(e) == MAP_LARGE) {
		start = (size_t)MAP_VALUE(e) << CHUNK_SHIFT;
		size = (size_t)len_get(p, MAP_VALUE(e)) << CHUNK_SHIFT;
	} else {
		goto unallocated;
	}
	*out = (aql_mem_info){
		.pool = p,
		.kind = p->kind,
		.flags = p->flags,
		.numa_node = p->numa_node,
		.base = p->base + start,
		.size = size,
		.offset = off - start,
		.agents = p->agents,
		.agent_count = p->agent_count,
	};
	return AQL_OK;
unallocated:
	return aql_fail(AQL_ERR_NOT_FOUND, "%p lies in memory pool %u but in no live block", ptr,
			p->index);
}

int aql_mem_pool_is_default(const aql_mem_pool *pool)
{
	return pool->is_default;
}

int aql_mem_agent_may_access(const void *ptr, const aql_agent *agent)
{
	aql_mem_info info;

	if (!agent || aql_mem_query(ptr, &info) != AQL_OK)
		return 0;
	if (!info.agent_count)
		return 1;
	for (uint32_t i = 0; i < info.agent_count; i++)
		if (info.agents[i] == agent)
			return 1;
	return 0;
}

/* ---- pools ---- */

static aql_status check_config(const aql_mem_pool_config *c, int32_t near_node, int32_t *node)
{
	if (c->kind != AQL_MEM_FINE_GRAINED && c->kind != AQL_MEM_COARSE_GRAINED)
		return aql_fail(AQL_ERR_INVALID_ARG, "memory pool: kind %d is unknown", (int)c->kind);
	if (c->flags & ~(uint32_t)(AQL_MEM_PINNED | AQL_MEM_HUGE_PAGES))
		return aql_fail(AQL_ERR_INVALID_ARG, "memory pool: flags 0x%x have unknown bits",
				c->flags);
	if (c->agent_count > AQL_MEM_MAX_AGENTS)
		return aql_fail(AQL_ERR_INVALID_ARG, "memory pool: %u agents, at most %u",
				c->agent_count, AQL_MEM_MAX_AGENTS);
	if (c->agent_count && !c->agents)
		return aql_fail(AQL_ERR_INVALID_ARG, "memory pool: agent_count %u but agents is NULL",
				c->agent_count);
	for (uint32_t i = 0; i < c->agent_count; i++)
		if (!c->agents[i])
			return aql_fail(AQL_ERR_INVALID_ARG, "memory pool: agents[%u] is NULL", i);
	if (c->max_size > AQL_MEM_MAX_POOL_SIZE)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"memory pool: max_size %zu exceeds AQL_MEM_MAX_POOL_SIZE (%zu)",
				c->max_size, AQL_MEM_MAX_POOL_SIZE);
	*node = c->numa_node;
	if (*node < AQL_NUMA_ANY)
		return aql_fail(AQL_ERR_INVALID_ARG, "memory pool: NUMA node %d is invalid", *node);
	if (*node == AQL_NUMA_ANY)
		*node = near_node;
	if (*node != AQL_NUMA_ANY)
		return aql_pages_check_node(*node);
	return AQL_OK;
}

static void release_pool(struct aql_mem_pool *p)
{
	aql_pages_unmap(p->base, p->reserve);
	aql_pages_unmap(p->meta, p->meta_size);
	free(p->agents);
}

/* Map the pool's memory and bookkeeping; p is not yet visible. */
static aql_status init_pool(struct aql_mem_pool *p, const aql_mem_pool_config *c, int32_t node)
{
	size_t units, lens;
	aql_status st;

	p->reserve = c->max_size ? c->max_size : AQL_MEM_DEFAULT_MAX_SIZE;
	p->reserve = (p->reserve + AQL_HUGE_PAGE_SIZE - 1) & ~(AQL_HUGE_PAGE_SIZE - 1);
	p->nchunks = (uint32_t)(p->reserve >> CHUNK_SHIFT);
	p->kind = c->kind;
	p->flags = c->flags;
	p->numa_node = node;
	p->agent_count = c->agents ? c->agent_count : 0;
	if (p->agent_count) {
		p->agents = malloc(p->agent_count * sizeof(*p->agents));
		if (!p->agents)
			return aql_fail(AQL_ERR_NOMEM, "memory pool: agent list");
		memcpy(p->agents, c->agents, p->agent_count * sizeof(*p->agents));
	}
	units = p->reserve >> UNIT_SHIFT;
	lens = (size_t)p->nchunks * sizeof(uint32_t);
	p->meta_size = 4 * lens + units * sizeof(uint32_t);
	st = aql_pages_reserve(p->reserve, AQL_HUGE_PAGE_SIZE, (void **)&p->base);
	if (st == AQL_OK)
		st = aql_pages_map_lazy(p->meta_size, &p->meta);
	if (st != AQL_OK)
		return st;
	p->map = p->meta;
	p->run_len = p->map + p->nchunks;
	p->next = p->run_len + p->nchunks;
	p->prev = p->next + p->nchunks;
	p->link = p->prev + p->nchunks;
	p->commit_step = COMMIT_STEP;
	if ((c->flags & AQL_MEM_HUGE_PAGES)) {
		if (aql_pages_advise_huge(p->base, p->reserve))
			p->commit_step = AQL_HUGE_PAGE_SIZE;	/* THP needs whole aligned 2 MiB */
		else
			p->flags &= ~(uint32_t)AQL_MEM_HUGE_PAGES;
	}
	if (node != AQL_NUMA_ANY && (st = aql_pages_bind(p->base, p->reserve, node)) != AQL_OK)
		return st;
	for (unsigned b = 0; b < NBINS; b++)
		p->bins[b] = NIL;
	pthread_mutex_init(&p->lock, NULL);
	return AQL_OK;
}

static aql_status create_pool(const aql_mem_pool_config *c, int32_t near_node,
			      const struct aql_mem_commit_hook *hook, int is_default,
			      aql_mem_pool **out)
{
	struct aql_mem_pool *p = NULL;
	int32_t node = AQL_NUMA_ANY;
	aql_status st;
	uint32_t i;

	st = check_config(c, near_node, &node);
	if (st != AQL_OK)
		return st;
	pthread_mutex_lock(&registry_lock);
	for (i = 0; i < AQL_MEM_MAX_POOLS; i++)
		if (!pools[i].live) {
			p = &pools[i];
			break;
		}
	if (!p) {
		pthread_mutex_unlock(&registry_lock);
		return aql_fail(AQL_ERR_NOMEM, "memory pool: %u pools exist already (AQL_MEM_MAX_POOLS)",
				AQL_MEM_MAX_POOLS);
	}
	memset(p, 0, sizeof(*p));
	p->index = i;
	p->is_default = is_default;
	if (hook)
		p->hook = *hook;
	st = init_pool(p, c, node);
	if (st != AQL_OK) {
		release_pool(p);
		pthread_mutex_unlock(&registry_lock);
		return st;
	}
	__atomic_store_n(&p->live, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&ranges[i],
			 ((uint64_t)((uintptr_t)p->base >> RANGE_SHIFT)) |
				 ((uint64_t)(p->reserve >> RANGE_SHIFT) << RANGE_BASE_BITS),
			 __ATOMIC_RELEASE);
	if (i >= pool_limit)
		__atomic_store_n(&pool_limit, i + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&registry_lock);
	*out = p;
	return AQL_OK;
}

aql_status aql_mem_pool_create_hooked(const aql_mem_pool_config *config, int32_t near_node,
				      const struct aql_mem_commit_hook *hook, aql_mem_pool **out)
{
	return create_pool(config, near_node, hook, 0, out);
}

aql_status aql_mem_pool_destroy(aql_mem_pool *pool)
{
	uint64_t use;

	if (!pool)
		return AQL_OK;
	if (!is_pool(pool))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_pool_destroy: %p is not a memory pool",
				(void *)pool);
	pthread_mutex_lock(&registry_lock);
	if (!pool->live) {
		pthread_mutex_unlock(&registry_lock);
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_pool_destroy: the pool was destroyed");
	}
	if (pool->is_default) {
		pthread_mutex_unlock(&registry_lock);
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_pool_destroy: memory pool %u is a default pool", pool->index);
	}
	use = __atomic_load_n(&pool->use, __ATOMIC_ACQUIRE);
	if (use) {
		pthread_mutex_unlock(&registry_lock);
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_pool_destroy: memory pool %u has %llu live allocations (%llu bytes); free them first",
				pool->index, (unsigned long long)USE_COUNT(use),
				(unsigned long long)USE_UNITS(use) << UNIT_SHIFT);
	}
	__atomic_store_n(&ranges[pool->index], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&pool->live, 0, __ATOMIC_RELEASE);
	if (pool->hook.release)
		pool->hook.release(pool->hook.ctx);
	release_pool(pool);
	pthread_mutex_destroy(&pool->lock);
	pthread_mutex_unlock(&registry_lock);
	return AQL_OK;
}

static aql_status default_pool(enum aql_mem_kind kind, int pinned, aql_mem_pool **out)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	aql_mem_pool_config c = {
		.kind = kind, .flags = pinned ? AQL_MEM_PINNED : 0, .numa_node = AQL_NUMA_ANY,
	};
	aql_mem_pool *p;
	aql_status st = AQL_OK;

	if (!out || (kind != AQL_MEM_FINE_GRAINED && kind != AQL_MEM_COARSE_GRAINED))
		return aql_fail(AQL_ERR_INVALID_ARG, "default memory pool: kind %d or out invalid",
				(int)kind);
	p = __atomic_load_n(&defaults[kind][pinned], __ATOMIC_ACQUIRE);
	if (!p) {
		/* Not pthread_once: a failed creation is retried by the next call. */
		pthread_mutex_lock(&lock);
		p = defaults[kind][pinned];
		if (!p && (st = create_pool(&c, AQL_NUMA_ANY, NULL, 1, &p)) == AQL_OK)
			__atomic_store_n(&defaults[kind][pinned], p, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&lock);
		if (st != AQL_OK)
			return st;
	}
	*out = p;
	return AQL_OK;
}

aql_status aql_mem_pool_default(enum aql_mem_kind kind, aql_mem_pool **out)
{
	return default_pool(kind, 1, out);
}

aql_status aql_mem_pool_data(enum aql_mem_kind kind, aql_mem_pool **out)
{
	return default_pool(kind, 0, out);
}

aql_status aql_mem_pool_get_stats(aql_mem_pool *pool, aql_mem_pool_stats *out)
{
	uint64_t use;

	if (!is_pool(pool) || !out || !__atomic_load_n(&pool->live, __ATOMIC_ACQUIRE))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_mem_pool_get_stats: pool or out is NULL, or the pool is not live");
	use = __atomic_load_n(&pool->use, __ATOMIC_RELAXED);
	pthread_mutex_lock(&pool->lock);
	*out = (aql_mem_pool_stats){
		.kind = pool->kind,
		.flags = pool->flags,
		.numa_node = pool->numa_node,
		.reserved = pool->reserve,
		.committed = (size_t)pool->committed << CHUNK_SHIFT,
		.pinned = pool->pinned,
		.slab_bytes = pool->slab_bytes,
		.large_bytes = pool->large_bytes,
		.bytes_in_use = (size_t)USE_UNITS(use) << UNIT_SHIFT,
		.bytes_in_use_peak = (size_t)__atomic_load_n(&pool->peak_units, __ATOMIC_RELAXED)
				     << UNIT_SHIFT,
		.allocations_in_use = USE_COUNT(use),
		.allocations_in_use_peak = __atomic_load_n(&pool->peak_count, __ATOMIC_RELAXED),
		.grow_count = pool->grow_count,
	};
	pthread_mutex_unlock(&pool->lock);
	return AQL_OK;
}
