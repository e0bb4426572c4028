/* SPDX-License-Identifier: MIT */
/*
 * Memory: regions and pools (one object, hsa_impl.h) allocate from aql.
 * Host memory comes from aql's unpinned data pools, so large buffers are
 * not bounded by RLIMIT_MEMLOCK; every aql agent may access those pools.
 * An agent's own memory comes from aql_agent_mem_alloc(), and those
 * blocks are remembered here, since only its agent can free or copy them.
 */
#include <stdlib.h>
#include <string.h>
#include <aql/copy.h>

#include "hsa_impl.h"

struct agent_block {
	char *base;
	size_t size;
	struct hsa_rt_agent *owner;
};

static struct hsa_rt_set agent_blocks = HSA_RT_SET_INIT;

struct range {
	const char *p;
	size_t size;
};

static int holds(const void *item, const void *key)
{
	const struct agent_block *b = item;
	const struct range *r = key;

	return r->p >= b->base && r->p < b->base + b->size &&
	       r->size <= (size_t)(b->base + b->size - r->p);
}

/* The agent-memory block holding [ptr, ptr + size), or NULL. */
static struct agent_block *find_block(const void *ptr, size_t size)
{
	struct range r = { ptr, size };

	return hsa_rt_set_find(&agent_blocks, holds, &r);
}

hsa_status_t hsa_rt_allocate(struct hsa_rt_region *r, size_t size, void **ptr)
{
	struct agent_block *b;
	aql_mem_pool *pool;
	aql_status st;

	if (!ptr || !size)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "ptr is NULL or size is 0");
	if (size > r->alloc_max)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ALLOCATION,
				   "%zu bytes is over the %llu this region allocates at once",
				   size, (unsigned long long)r->alloc_max);
	if (r->kind != HSA_RT_REGION_AGENT) {
		st = aql_mem_pool_data(r->kind == HSA_RT_REGION_SYSTEM_FINE ? AQL_MEM_FINE_GRAINED
									    : AQL_MEM_COARSE_GRAINED,
				       &pool);
		if (st == AQL_OK)
			st = aql_mem_alloc(pool, size, HSA_RT_ALLOC_GRANULE, ptr);
		return st == AQL_OK ? HSA_STATUS_SUCCESS
				    : hsa_rt_from_aql(st, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
	}
	b = malloc(sizeof(*b));
	if (!b)
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory to track the block");
	st = aql_agent_mem_alloc(r->owner->agent, size, (void **)&b->base);
	if (st != AQL_OK) {
		free(b);
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
	}
	b->size = size;
	b->owner = r->owner;
	if (hsa_rt_set_add(&agent_blocks, b)) {
		aql_agent_mem_free(r->owner->agent, b->base);
		free(b);
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES, "no memory to track the block");
	}
	*ptr = b->base;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_rt_free(void *ptr)
{
	struct agent_block *b;
	aql_status st;

	if (!ptr)
		return HSA_STATUS_SUCCESS;
	b = find_block(ptr, 1);
	if (b && b->base == ptr && hsa_rt_set_remove(&agent_blocks, b)) {
		aql_agent_mem_free(b->owner->agent, b->base);
		free(b);
		return HSA_STATUS_SUCCESS;
	}
	st = aql_mem_free_checked(ptr);
	return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

void hsa_rt_release_memory(void)
{
	struct agent_block *b;

	while ((b = hsa_rt_set_pop(&agent_blocks))) {
		aql_agent_mem_free(b->owner->agent, b->base);
		free(b);
	}
}

hsa_status_t hsa_memory_allocate(hsa_region_t region, size_t size, void **ptr)
{
	struct hsa_rt_region *r;

	HSA_RT_CHECK_INIT();
	r = hsa_rt_region_from(region.handle);
	if (!r)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_REGION, "0x%llx is not a region",
				   (unsigned long long)region.handle);
	return hsa_rt_allocate(r, size, ptr);
}

hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool, size_t size,
					  uint32_t flags, void **ptr)
{
	struct hsa_rt_region *r;

	HSA_RT_CHECK_INIT();
	r = hsa_rt_region_from(memory_pool.handle);
	if (!r)
		return hsa_rt_fail((hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL,
				   "0x%llx is not a memory pool",
				   (unsigned long long)memory_pool.handle);
	if (flags)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "flags 0x%x is not 0", flags);
	return hsa_rt_allocate(r, size, ptr);
}

hsa_status_t hsa_memory_free(void *ptr)
{
	HSA_RT_CHECK_INIT();
	return hsa_rt_free(ptr);
}

hsa_status_t hsa_amd_memory_pool_free(void *ptr)
{
	HSA_RT_CHECK_INIT();
	return hsa_rt_free(ptr);
}

/* Copy through the host when the two ends are memory of different agents. */
static hsa_status_t copy_between(struct agent_block *d, void *dst, struct agent_block *s,
				 const void *src, size_t size)
{
	void *bounce = malloc(size);
	aql_status st;

	if (!bounce)
		return hsa_rt_fail(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
				   "no memory to copy %zu bytes between agents", size);
	st = aql_agent_copy(s->owner->agent, bounce, src, size);
	if (st == AQL_OK)
		st = aql_agent_copy(d->owner->agent, dst, bounce, size);
	free(bounce);
	return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR);
}

hsa_status_t hsa_memory_copy(void *dst, const void *src, size_t size)
{
	struct agent_block *d, *s;
	aql_status st;

	HSA_RT_CHECK_INIT();
	if (!size)
		return HSA_STATUS_SUCCESS;
	if (!dst || !src)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "dst or src is NULL");
	d = find_block(dst, size);
	s = find_block(src, size);
	if (d && s && d->owner != s->owner)
		return copy_between(d, dst, s, src, size);
	if (d || s) {
		st = aql_agent_copy((d ? d : s)->owner->agent, dst, src, size);
		return st == AQL_OK ? HSA_STATUS_SUCCESS : hsa_rt_from_aql(st, HSA_STATUS_ERROR);
	}
	memmove(dst, src, size);
	return HSA_STATUS_SUCCESS;
}

/*
 * Whether a may access ptr: host memory of aql's pools is open to every
 * agent, an agent's own memory to that agent only.
 */
static hsa_status_t check_access(struct hsa_rt_agent *a, const void *ptr)
{
	struct agent_block *b = find_block(ptr, 1);
	aql_mem_info info;
	aql_status st;

	if (b) {
		if (b->owner == a)
			return HSA_STATUS_SUCCESS;
		return hsa_rt_unprovided(HSA_STATUS_ERROR_INVALID_ARGUMENT,
					 "access by one agent to another agent's memory");
	}
	st = aql_mem_query(ptr, &info);
	if (st != AQL_OK)
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_INVALID_ARGUMENT);
	if (!aql_mem_agent_may_access(ptr, a->agent))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "%s may not access the pool of %p", a->info.name, ptr);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_memory_assign_agent(void *ptr, hsa_agent_t agent, hsa_access_permission_t access)
{
	struct hsa_rt_agent *a;

	HSA_RT_CHECK_INIT();
	a = hsa_rt_agent_from(agent);
	if (!a)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
				   (unsigned long long)agent.handle);
	if (!ptr)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "ptr is NULL");
	if (access < HSA_ACCESS_PERMISSION_RO || access > HSA_ACCESS_PERMISSION_RW)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "access %d is not an hsa_access_permission_t", (int)access);
	return check_access(a, ptr);
}

hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t *agents,
					 const uint32_t *flags, const void *ptr)
{
	HSA_RT_CHECK_INIT();
	if (!num_agents || !agents || !ptr)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "num_agents is 0, or agents or ptr is NULL");
	if (flags)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "flags is not NULL");
	for (uint32_t i = 0; i < num_agents; i++) {
		struct hsa_rt_agent *a = hsa_rt_agent_from(agents[i]);
		hsa_status_t st;

		if (!a)
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "agents[%u] is not an agent", i);
		st = check_access(a, ptr);
		if (st != HSA_STATUS_SUCCESS)
			return st;
	}
	return HSA_STATUS_SUCCESS;
}

/*
 * Registering host memory makes it usable by agents; agents whose memory
 * is the host's can use it already. Others would need it mapped, which
 * this layer does not do.
 */
static hsa_status_t check_registrable(void)
{
	for (uint32_t i = 0; i < hsa_rt.agent_count; i++)
		if (!hsa_rt.agents[i].info.unified_memory)
			return hsa_rt_unprovided(HSA_STATUS_ERROR_OUT_OF_RESOURCES,
						 "registering host memory with an agent of its own memory");
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_memory_register(void *ptr, size_t size)
{
	HSA_RT_CHECK_INIT();
	if (!size && ptr)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "size is 0 but ptr is not NULL");
	return check_registrable();
}

hsa_status_t hsa_memory_deregister(void *ptr, size_t size)
{
	(void)size;
	HSA_RT_CHECK_INIT();
	if (!ptr)
		return HSA_STATUS_SUCCESS;
	return check_registrable();
}

/* The 32-bit pattern into count words of host memory. */
hsa_status_t hsa_amd_memory_fill(void *ptr, uint32_t value, size_t count)
{
	uint32_t *p = ptr;

	HSA_RT_CHECK_INIT();
	if (!ptr || (uintptr_t)ptr % 4 || count > SIZE_MAX / sizeof(uint32_t))
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "ptr %p is NULL or not 4-byte aligned, or count %zu is too large",
				   ptr, count);
	if (count && find_block(ptr, count * sizeof(uint32_t)))
		return hsa_rt_unprovided(HSA_STATUS_ERROR_INVALID_ARGUMENT,
					 "hsa_amd_memory_fill of an agent's own memory");
	for (size_t i = 0; i < count; i++)
		p[i] = value;
	return HSA_STATUS_SUCCESS;
}

/* aql does not migrate memory between pools, so no pair of pools can. */
hsa_status_t hsa_amd_memory_pool_can_migrate(hsa_amd_memory_pool_t src_memory_pool,
					     hsa_amd_memory_pool_t dst_memory_pool, bool *result)
{
	HSA_RT_CHECK_INIT();
	if (!hsa_rt_region_from(src_memory_pool.handle) || !hsa_rt_region_from(dst_memory_pool.handle))
		return hsa_rt_fail((hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL,
				   "a memory pool handle is not a pool");
	if (!result)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "result is NULL");
	*result = false;
	return HSA_STATUS_SUCCESS;
}
