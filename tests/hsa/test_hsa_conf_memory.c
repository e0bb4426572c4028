/* SPDX-License-Identifier: MIT */
/*
 * Memory regions and AMD memory pools as an HSA conformance program uses
 * them, with their error paths: every region of every agent describes
 * itself consistently, allocations honour the granule and alignment it
 * reports and hold data, hsa_memory_copy and hsa_amd_memory_fill move
 * it, allocations from several threads at once stay distinct, and bad
 * regions, sizes and pointers are refused. argv[1]: the library.
 */
#include <pthread.h>
#include <string.h>

#include "hsa_test.h"

#define THREADS 4
#define BLOCKS 64

static hsa_region_t kernarg_region;

static hsa_status_t check_region(hsa_region_t region, void *data)
{
	hsa_region_segment_t segment;
	uint32_t flags = 0;
	size_t size = 0, alloc_max = 0, granule = 0, align = 0;
	bool allowed = false;
	void *p = NULL;

	++*(unsigned *)data;
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_SEGMENT, &segment));
	if (segment != HSA_REGION_SEGMENT_GLOBAL)
		return HSA_STATUS_SUCCESS;
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_GLOBAL_FLAGS, &flags));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_SIZE, &size));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_ALLOC_MAX_SIZE, &alloc_max));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED, &allowed));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE, &granule));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT, &align));
	CHECK(flags & (HSA_REGION_GLOBAL_FLAG_FINE_GRAINED | HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED),
	      "flags 0x%x name a granularity", flags);
	CHECK(alloc_max >= 1 && alloc_max <= size, "alloc max %zu of %zu", alloc_max, size);
	if (flags & HSA_REGION_GLOBAL_FLAG_KERNARG)
		kernarg_region = region;
	if (!allowed)
		return HSA_STATUS_SUCCESS;
	CHECK(granule >= 1 && !(granule & (granule - 1)) && align >= 1 && !(align & (align - 1)),
	      "granule %zu, alignment %zu", granule, align);
	CHECK_OK(hsa_memory_allocate(region, 1, &p));
	CHECK(p && (uintptr_t)p % align == 0, "%p aligned to %zu", p, align);
	if (p)
		CHECK_OK(hsa_memory_free(p));
	CHECK_ST(hsa_memory_allocate(region, alloc_max + 1, &p), HSA_STATUS_ERROR_INVALID_ALLOCATION);
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t check_agent(hsa_agent_t agent, void *data)
{
	unsigned regions = 0;

	(void)data;
	CHECK_OK(hsa_agent_iterate_regions(agent, check_region, &regions));
	CHECK(regions >= 1, "%u regions", regions);
	return HSA_STATUS_SUCCESS;
}

struct churn {
	unsigned bad;
};

/* Allocate, stamp, check and free blocks; distinct blocks keep their stamps. */
static void *churn(void *arg)
{
	struct churn *c = arg;
	uint64_t *p[BLOCKS];

	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < BLOCKS; i++) {
			if (hsa_memory_allocate(kernarg_region, 256, (void **)&p[i]) !=
			    HSA_STATUS_SUCCESS) {
				c->bad++;
				p[i] = NULL;
				continue;
			}
			for (int j = 0; j < 32; j++)
				p[i][j] = (uintptr_t)c + (uint64_t)i;
		}
		for (int i = 0; i < BLOCKS; i++) {
			if (!p[i])
				continue;
			for (int j = 0; j < 32; j++)
				c->bad += p[i][j] != (uintptr_t)c + (uint64_t)i;
			c->bad += hsa_memory_free(p[i]) != HSA_STATUS_SUCCESS;
		}
	}
	return NULL;
}

static void concurrent_allocations(void)
{
	struct churn c[THREADS] = { { 0 } };
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, churn, &c[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK(c[i].bad == 0, "thread %d: %u failures or overwritten words", i, c[i].bad);
	}
}

static void copy_and_fill(void)
{
	uint32_t *a = NULL, *b = NULL;

	CHECK_OK(hsa_memory_allocate(kernarg_region, 4096, (void **)&a));
	CHECK_OK(hsa_memory_allocate(kernarg_region, 4096, (void **)&b));
	if (!a || !b)
		return;
	CHECK_OK(hsa_amd_memory_fill(a, 0xdeadbeef, 1024));
	CHECK(a[0] == 0xdeadbeef && a[1023] == 0xdeadbeef, "fill");
	CHECK_OK(hsa_memory_copy(b, a, 4096));
	CHECK(!memcmp(a, b, 4096), "copy");
	CHECK_OK(hsa_memory_copy(b, a, 0));
	CHECK_ST(hsa_memory_copy(NULL, a, 4), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_memory_fill((char *)a + 1, 0, 4), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_memory_assign_agent(a, ht_cpu_agent(), HSA_ACCESS_PERMISSION_RW));
	CHECK_ST(hsa_memory_assign_agent(NULL, ht_cpu_agent(), HSA_ACCESS_PERMISSION_RW),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_memory_free(a));
	CHECK_OK(hsa_memory_free(b));
}

static hsa_status_t first_pool(hsa_amd_memory_pool_t pool, void *data)
{
	*(hsa_amd_memory_pool_t *)data = pool;
	return HSA_STATUS_INFO_BREAK;
}

static void pools(void)
{
	hsa_amd_memory_pool_t pool = { 0 };
	hsa_agent_t cpu = ht_cpu_agent();
	hsa_amd_memory_pool_access_t access;
	bool alloc_allowed = false;
	void *p = NULL;

	CHECK_ST(hsa_amd_agent_iterate_memory_pools(cpu, first_pool, &pool), HSA_STATUS_INFO_BREAK);
	CHECK(pool.handle != 0, "the CPU agent has a pool");
	CHECK_OK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
					      &alloc_allowed));
	CHECK_OK(hsa_amd_agent_memory_pool_get_info(cpu, pool,
						    HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
	CHECK(access != HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED, "the CPU reaches its own pool");
	if (alloc_allowed) {
		CHECK_OK(hsa_amd_memory_pool_allocate(pool, 4096, 0, &p));
		CHECK_OK(hsa_amd_agents_allow_access(1, &cpu, NULL, p));
		CHECK_OK(hsa_amd_memory_pool_free(p));
	}
	CHECK_ST(hsa_amd_memory_pool_allocate(pool, 4096, 1, &p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_memory_pool_allocate((hsa_amd_memory_pool_t){ 8 }, 4096, 0, &p),
		 (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
	CHECK_ST(hsa_amd_agents_allow_access(0, &cpu, NULL, p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static void error_paths(void)
{
	void *p = NULL;
	int local;

	CHECK_ST(hsa_memory_allocate((hsa_region_t){ 8 }, 64, &p), HSA_STATUS_ERROR_INVALID_REGION);
	CHECK_ST(hsa_memory_allocate(kernarg_region, 0, &p), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_memory_allocate(kernarg_region, 64, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_region_get_info((hsa_region_t){ 8 }, HSA_REGION_INFO_SIZE, &p),
		 HSA_STATUS_ERROR_INVALID_REGION);
	CHECK_ST(hsa_region_get_info(kernarg_region, (hsa_region_info_t)0x7777, &p),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_agent_iterate_regions(ht_cpu_agent(), NULL, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	/* Freeing what the runtime did not allocate is refused; NULL is fine. */
	CHECK(hsa_memory_free(&local) != HSA_STATUS_SUCCESS, "a stack address is not freed");
	CHECK_OK(hsa_memory_free(NULL));
	CHECK_OK(hsa_memory_register(&local, sizeof(local)));
	CHECK_OK(hsa_memory_deregister(&local, sizeof(local)));
}

static void dealloc_cb(void *ptr, void *data)
{
	(void)ptr, (void)data;
}

/* What aql does not provide fails with the code docs/hsa.md gives, saying so. */
static void not_provided(void)
{
	hsa_agent_t cpu = ht_cpu_agent();
	hsa_amd_memory_pool_t pool = { 0 };
	hsa_amd_pointer_info_t info = { .size = sizeof(info) };
	hsa_amd_ipc_memory_t ipc;
	hsa_amd_svm_attribute_pair_t attr = { HSA_AMD_SVM_ATTRIB_GLOBAL_FLAG, 0 };
	char buf[64];
	void *p = NULL;

	hsa_amd_agent_iterate_memory_pools(cpu, first_pool, &pool);
	CHECK_UNPROVIDED(hsa_amd_memory_lock(buf, sizeof(buf), &cpu, 1, &p), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_memory_lock_to_pool(buf, sizeof(buf), &cpu, 1, pool, 0, &p),
			 HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_memory_unlock(buf), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_pointer_info(buf, &info, NULL, NULL, NULL), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_pointer_info_set_userdata(buf, NULL), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_register_deallocation_callback(buf, dealloc_cb, NULL),
			 HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_deregister_deallocation_callback(buf, dealloc_cb),
			 HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_memory_migrate(buf, pool, 0), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_ipc_memory_create(buf, sizeof(buf), &ipc), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_ipc_memory_attach(&ipc, sizeof(buf), 1, &cpu, &p),
			 HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_ipc_memory_detach(buf), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_svm_attributes_get(buf, sizeof(buf), &attr, 1), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_svm_attributes_set(buf, sizeof(buf), &attr, 1), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_svm_prefetch_async(buf, sizeof(buf), cpu, 0, NULL,
						    (hsa_signal_t){ 0 }), HSA_STATUS_ERROR);
}

int main(int argc, char **argv)
{
	void *p;

	if (argc < 2)
		return 2;
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_memory_allocate((hsa_region_t){ 8 }, 64, &p), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_iterate_agents(check_agent, NULL));
	CHECK(kernarg_region.handle != 0, "a kernarg region");
	if (kernarg_region.handle) {
		concurrent_allocations();
		copy_and_fill();
		error_paths();
	}
	pools();
	not_provided();
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
