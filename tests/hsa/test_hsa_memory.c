/* SPDX-License-Identifier: MIT */
/*
 * Memory through the HSA API on the CPU agent: allocation from every
 * region and pool, copies, access rights, registration, fills, and the
 * error paths (bad handles, sizes, pointers). argv[1]: the library.
 */
#include <stdlib.h>
#include <string.h>

#include "hsa_test.h"

struct regions {
	hsa_region_t list[8];
	unsigned count;
};

static hsa_status_t collect(hsa_region_t region, void *data)
{
	struct regions *r = data;

	if (r->count < 8)
		r->list[r->count++] = region;
	return HSA_STATUS_SUCCESS;
}

static void every_region(hsa_agent_t cpu)
{
	struct regions r = { .count = 0 };
	size_t max;

	CHECK_OK(hsa_agent_iterate_regions(cpu, collect, &r));
	CHECK(r.count >= 2, "%u regions", r.count);
	for (unsigned i = 0; i < r.count; i++) {
		uint8_t *p = NULL;

		CHECK_OK(hsa_memory_allocate(r.list[i], 3 << 20, (void **)&p));
		if (!p)
			continue;
		CHECK((uintptr_t)p % 4096 == 0, "region %u: %p is page aligned", i, (void *)p);
		memset(p, 0xa5, 3 << 20);
		CHECK(p[(3 << 20) - 1] == 0xa5, "region %u: writable", i);
		CHECK_OK(hsa_memory_free(p));

		CHECK_ST(hsa_memory_allocate(r.list[i], 0, (void **)&p),
			 HSA_STATUS_ERROR_INVALID_ARGUMENT);
		CHECK_ST(hsa_memory_allocate(r.list[i], 64, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
		CHECK_OK(hsa_region_get_info(r.list[i], HSA_REGION_INFO_ALLOC_MAX_SIZE, &max));
		CHECK_ST(hsa_memory_allocate(r.list[i], max + 1, (void **)&p),
			 HSA_STATUS_ERROR_INVALID_ALLOCATION);
	}
	CHECK_ST(hsa_memory_allocate((hsa_region_t){ 16 }, 64, (void **)&max),
		 HSA_STATUS_ERROR_INVALID_REGION);
}

static hsa_status_t first_pool(hsa_amd_memory_pool_t pool, void *data)
{
	*(hsa_amd_memory_pool_t *)data = pool;
	return HSA_STATUS_INFO_BREAK;
}

static void pools(hsa_agent_t cpu)
{
	hsa_amd_memory_pool_t pool = { 0 };
	uint32_t *p = NULL;
	bool can = true;

	CHECK(hsa_amd_agent_iterate_memory_pools(cpu, first_pool, &pool) == HSA_STATUS_INFO_BREAK,
	      "a pool");
	CHECK_OK(hsa_amd_memory_pool_allocate(pool, 1000, 0, (void **)&p));
	if (p) {
		CHECK_OK(hsa_amd_memory_fill(p, 0xdeadbeef, 250));
		CHECK(p[0] == 0xdeadbeef && p[249] == 0xdeadbeef, "filled");
		CHECK_ST(hsa_amd_memory_fill((char *)p + 1, 0, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);
		CHECK_OK(hsa_amd_agents_allow_access(1, &cpu, NULL, p));
		CHECK_ST(hsa_amd_agents_allow_access(0, &cpu, NULL, p),
			 HSA_STATUS_ERROR_INVALID_ARGUMENT);
		CHECK_ST(hsa_amd_agents_allow_access(1, &(hsa_agent_t){ 3 }, NULL, p),
			 HSA_STATUS_ERROR_INVALID_AGENT);
		CHECK_OK(hsa_amd_memory_pool_free(p));
	}
	CHECK_ST(hsa_amd_memory_pool_allocate(pool, 1000, 1, (void **)&p),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_memory_pool_allocate((hsa_amd_memory_pool_t){ 24 }, 64, 0, (void **)&p),
		 HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
	CHECK_OK(hsa_amd_memory_pool_can_migrate(pool, pool, &can));
	CHECK(!can, "aql migrates nothing");
}

static void copies_and_rights(hsa_agent_t cpu)
{
	hsa_region_t fine = ht_region(cpu, HSA_REGION_GLOBAL_FLAG_FINE_GRAINED);
	hsa_region_t coarse = ht_region(cpu, HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED);
	char *a = NULL, *b = NULL, host[256], back[256];
	const char *text = NULL;
	int on_stack;

	CHECK_OK(hsa_memory_allocate(fine, sizeof(host), (void **)&a));
	CHECK_OK(hsa_memory_allocate(coarse, sizeof(host), (void **)&b));
	if (!a || !b)
		return;
	for (unsigned i = 0; i < sizeof(host); i++)
		host[i] = (char)(i * 7);
	CHECK_OK(hsa_memory_copy(a, host, sizeof(host)));
	CHECK_OK(hsa_memory_copy(b, a, sizeof(host)));
	CHECK_OK(hsa_memory_copy(back, b, sizeof(host)));
	CHECK(!memcmp(back, host, sizeof(host)), "copied host -> fine -> coarse -> host");
	CHECK_OK(hsa_memory_copy(NULL, NULL, 0));
	CHECK_ST(hsa_memory_copy(NULL, a, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);

	CHECK_OK(hsa_memory_assign_agent(b, cpu, HSA_ACCESS_PERMISSION_RW));
	CHECK_ST(hsa_memory_assign_agent(b, (hsa_agent_t){ 5 }, HSA_ACCESS_PERMISSION_RW),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_memory_assign_agent(&on_stack, cpu, HSA_ACCESS_PERMISSION_RW),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);

	CHECK_OK(hsa_memory_free(a));
	CHECK_OK(hsa_memory_free(b));
	CHECK_OK(hsa_memory_free(NULL));
	/* A block freed twice, and memory HSA did not allocate, are refused. */
	CHECK_ST(hsa_memory_free(a), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_memory_free(&on_stack), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_status_string(HSA_STATUS_ERROR_INVALID_ARGUMENT, &text));
	CHECK(text && strstr(text, "aql: "), "the text gives aql's reason: %s", text ? text : "NULL");
}

static hsa_status_t count_gpus(hsa_agent_t agent, void *data)
{
	hsa_device_type_t type;

	if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
	    type != HSA_DEVICE_TYPE_CPU)
		++*(unsigned *)data;
	return HSA_STATUS_SUCCESS;
}

/*
 * Registering is a no-op where every agent's memory is the host's, as
 * with the CPU agent alone; a GPU of memory of its own makes it fail.
 */
static void registration(void)
{
	char *buf = malloc(4096);
	unsigned gpus = 0;
	hsa_status_t st;

	CHECK_OK(hsa_iterate_agents(count_gpus, &gpus));
	st = hsa_memory_register(buf, 4096);
	if (!gpus)
		CHECK_OK(st);
	else
		CHECK(st == HSA_STATUS_SUCCESS || st == HSA_STATUS_ERROR_OUT_OF_RESOURCES,
		      "register with %u GPUs: 0x%x", gpus, st);
	if (st == HSA_STATUS_SUCCESS)
		CHECK_OK(hsa_memory_deregister(buf, 4096));
	CHECK_ST(hsa_memory_register(buf, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	free(buf);
}

int main(int argc, char **argv)
{
	hsa_agent_t cpu;
	void *p;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_memory_allocate((hsa_region_t){ 1 }, 64, &p), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_memory_free(NULL), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	cpu = ht_cpu_agent();
	every_region(cpu);
	pools(cpu);
	copies_and_rights(cpu);
	registration();
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
