/* SPDX-License-Identifier: MIT */
/*
 * aql-bench, default mode, the memory pool sub-allocator (aql/mem.h).
 *
 * alloc_free_ns
 *	One alloc+free pair on the default fine-grained pool (pinned), from
 *	one thread. The sizes follow a fixed table of 256 entries spread
 *	evenly over the seven size classes from 64 B to 4096 B, each entry
 *	a size from the upper half of its class. Eight blocks are live at
 *	a time, in a FIFO: each step frees the oldest and allocates the
 *	next size, so blocks are not simply handed back and forth. A sample
 *	is a batch of 256 steps timed as a whole (two clock_gettime() calls,
 *	about 20 ns each here, so the clock adds under 0.2 ns per pair) and
 *	divided by 256, rounded to whole ns. Percentiles over the batches;
 *	100 warm-up batches are not recorded.
 *
 * baseline_malloc_free_ns
 *	The same steps with the C library's malloc() and free(). The two
 *	take turns batch by batch, so that a noisy spell hits both alike.
 */
#include <errno.h>
#include <stdlib.h>

#include <aql/mem.h>

#include "bench.h"

#define BATCH 256u
#define LIVE 8u
#define WARMUP 100u

struct mem_bench {
	aql_mem_pool *pool;
	size_t sizes[BATCH];
	void *pool_live[LIVE], *heap_live[LIVE];
	uint32_t next;		/* index into sizes and the FIFOs */
};

static void make_sizes(size_t *sizes)
{
	uint64_t r = 0x2545f4914f6cdd1dull;

	for (uint32_t i = 0; i < BATCH; i++) {
		size_t top = (size_t)AQL_MEM_MIN_CLASS_SIZE << (i % 7);

		r = r * 6364136223846793005ull + 1442695040888963407ull;
		sizes[i] = top == AQL_MEM_MIN_CLASS_SIZE ? top : top - (size_t)(r >> 33) % (top / 2);
	}
}

/* Keep the compiler from pairing up and dropping malloc() and free(). */
static inline void *escape(void *p)
{
	__asm__ __volatile__("" : "+r"(p) : : "memory");
	return p;
}

static int pool_batch(struct mem_bench *b, double *ns)
{
	uint32_t i = b->next;
	uint64_t t0, t;
	aql_status st = AQL_OK;

	t0 = now_ns();
	for (uint32_t k = 0; k < BATCH; k++, i++) {
		void **slot = &b->pool_live[i % LIVE];

		aql_mem_free(*slot);
		st = aql_mem_alloc(b->pool, b->sizes[i % BATCH], 0, slot);
		if (st != AQL_OK)
			break;
	}
	t = now_ns() - t0;
	if (st != AQL_OK)
		return fail("aql_mem_alloc", st);
	*ns = (double)t / BATCH;
	return 0;
}

static int heap_batch(struct mem_bench *b, double *ns)
{
	uint32_t i = b->next;
	uint64_t t0, t;
	int ok = 1;

	t0 = now_ns();
	for (uint32_t k = 0; k < BATCH; k++, i++) {
		void **slot = &b->heap_live[i % LIVE];

		free(escape(*slot));
		*slot = escape(malloc(b->sizes[i % BATCH]));
		if (!*slot) {
			ok = 0;
			break;
		}
	}
	t = now_ns() - t0;
	if (!ok)
		return fail_errno("malloc", ENOMEM);
	*ns = (double)t / BATCH;
	return 0;
}

/* Both metrics come from one run; whichever bench comes first in a run of
 * the mode (ctx: --contention's busy run is another) runs it. */
static struct latency lat_pool, lat_heap;
static const struct ctx *measured;

static int measure(struct ctx *ctx)
{
	uint32_t rounds = ctx->opts->quick ? 1000 : 10000;
	uint64_t *pool = alloc_samples(rounds), *heap = alloc_samples(rounds);
	struct mem_bench *b = calloc(1, sizeof(*b));
	double p = 0, h = 0;
	aql_status st;
	int rc = -1;

	if (!pool || !heap || !b) {
		rc = fail_errno("malloc", ENOMEM);
		goto out;
	}
	st = aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &b->pool);
	if (st != AQL_OK) {
		rc = fail("aql_mem_pool_default", st);
		goto out;
	}
	make_sizes(b->sizes);
	for (uint32_t r = 0; r < rounds + WARMUP; r++) {
		if (pool_batch(b, &p) || heap_batch(b, &h))
			goto out;
		b->next += BATCH;
		if (r < WARMUP)
			continue;
		pool[r - WARMUP] = (uint64_t)(p + 0.5);
		heap[r - WARMUP] = (uint64_t)(h + 0.5);
	}
	latency_stats(pool, rounds, &lat_pool);
	latency_stats(heap, rounds, &lat_heap);
	measured = ctx;
	rc = 0;
out:
	if (b) {
		for (uint32_t i = 0; i < LIVE; i++) {
			aql_mem_free(b->pool_live[i]);
			free(b->heap_live[i]);
		}
	}
	free(b);
	free(pool);
	free(heap);
	return rc;
}

int bench_alloc_free(struct ctx *ctx, struct result *res)
{
	if (measured != ctx && measure(ctx))
		return -1;
	res->kind = RESULT_LATENCY;
	res->lat = lat_pool;
	return 0;
}

int bench_baseline_malloc_free(struct ctx *ctx, struct result *res)
{
	if (measured != ctx && measure(ctx))
		return -1;
	res->kind = RESULT_LATENCY;
	res->lat = lat_heap;
	return 0;
}
