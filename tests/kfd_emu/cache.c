/* SPDX-License-Identifier: MIT */
/*
 * The GPU's code caches, as the emulated CP sees code: the instruction
 * cache (I$), the scalar cache (K$) that reads kernel descriptors, and L2
 * behind them. A write through the host mapping does not reach them: the
 * runtime invalidates them after writing code (ROCR-Runtime
 * amd_loader_context.cpp RegionMemory::Freeze, then amd_gpu_agent.cpp
 * GpuAgent::InvalidateCodeCaches: a PM4 ACQUIRE_MEM with SH_ICACHE,
 * SH_KCACHE and TC actions, cp.c).
 *
 * The emulation is as strict as the hardware may be: the caches hold what
 * every EXECUTABLE BO of the GPU held at the last invalidation, and a
 * dispatch takes its descriptor, its code and the names and metadata that
 * say which host build runs from there (kernels.c). So code changed since
 * runs stale, the host build of the old kernel; code written where the
 * caches held none faults. A ranged invalidation refreshes the BOs it
 * covers whole and forgets those it covers in part (conservative: a line
 * the emulation cannot vouch for is not there).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

struct line {
	uint64_t va, size;
	unsigned char *bytes;
};

/* By GPU node: what the caches hold. */
static struct held {
	struct line *lines;
	uint32_t count;
} held[EMU_MAX_GPUS];
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static void drop(struct held *h)
{
	for (uint32_t i = 0; i < h->count; i++)
		free(h->lines[i].bytes);
	free(h->lines);
	h->lines = NULL;
	h->count = 0;
}

void emu_cache_reset(void)
{
	pthread_mutex_lock(&cache_lock);
	for (int g = 0; g < EMU_MAX_GPUS; g++)
		drop(&held[g]);
	pthread_mutex_unlock(&cache_lock);
}

struct fill {
	struct held fresh;
	uint64_t lo, hi;
	int failed;
};

static void take(const struct kfdemu_bo *bo, const void *bytes, void *user)
{
	struct fill *f = user;
	struct line *grown;

	if (f->failed || bo->va < f->lo || bo->size > f->hi - bo->va)
		return;
	grown = realloc(f->fresh.lines, (f->fresh.count + 1) * sizeof(*grown));
	if (!grown) {
		f->failed = 1;
		return;
	}
	f->fresh.lines = grown;
	grown[f->fresh.count].bytes = malloc(bo->size ? bo->size : 1);
	if (!grown[f->fresh.count].bytes) {
		f->failed = 1;
		return;
	}
	memcpy(grown[f->fresh.count].bytes, bytes, bo->size);
	grown[f->fresh.count].va = bo->va;
	grown[f->fresh.count].size = bo->size;
	f->fresh.count++;
}

int emu_cache_invalidate(const struct emu_gpu *gpu, uint64_t base, uint64_t size)
{
	struct fill f = { .lo = base, .hi = size > UINT64_MAX - base ? UINT64_MAX : base + size };
	struct held *h = &held[gpu->node - 1];
	struct line *all;

	/* the BOs first, outside the cache's lock: a dispatch of another
	 * queue reads BOs while it holds the lock */
	emu_memory_each_code(gpu, f.lo, f.hi, take, &f);
	pthread_mutex_lock(&cache_lock);
	all = f.failed ? NULL : realloc(f.fresh.lines, (f.fresh.count + h->count + 1) *
						       sizeof(*all));
	if (!all) {
		pthread_mutex_unlock(&cache_lock);
		drop(&f.fresh);
		return -ENOMEM;
	}
	f.fresh.lines = all;
	/* lines outside the range stay; those it meets go */
	for (uint32_t i = 0; i < h->count; i++) {
		struct line *l = &h->lines[i];

		if (l->va >= f.hi || l->va + l->size <= f.lo)
			all[f.fresh.count++] = *l;
		else
			free(l->bytes);
	}
	free(h->lines);
	*h = f.fresh;
	pthread_mutex_unlock(&cache_lock);
	return 0;
}

unsigned char *emu_cache_code(const struct emu_gpu *gpu, uint64_t addr, uint64_t *va,
			      uint64_t *size)
{
	const struct held *h = &held[gpu->node - 1];
	unsigned char *copy = NULL;

	pthread_mutex_lock(&cache_lock);
	for (uint32_t i = 0; i < h->count && !copy; i++) {
		const struct line *l = &h->lines[i];

		if (addr < l->va || addr - l->va >= l->size)
			continue;
		copy = malloc(l->size);
		if (copy) {
			memcpy(copy, l->bytes, l->size);
			*va = l->va;
			*size = l->size;
		}
	}
	pthread_mutex_unlock(&cache_lock);
	return copy;
}
