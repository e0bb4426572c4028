/* SPDX-License-Identifier: MIT */
/*
 * hsa_init / hsa_shut_down: a process-wide reference count. The first
 * hsa_init() builds the agent table from libaql's agents (the CPU agent,
 * then every NVIDIA and AMD agent libaql finds); the last hsa_shut_down()
 * releases what the program left (hsa_impl.h) and closes the agents it
 * opened. The CPU agent is libaql's default agent,
 * which lives until exit, so a later hsa_init() finds the same one.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <aql/copy.h>

#include "hsa_impl.h"

struct hsa_rt hsa_rt;

/* Serialises the 0 <-> 1 transitions of the count with the table build. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t host_memory_size(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static void add_region(struct hsa_rt_agent *a, enum hsa_rt_region_kind kind,
		       uint32_t global_flags, uint64_t size)
{
	struct hsa_rt_region *r = &a->regions[a->region_count++];

	r->owner = a;
	r->kind = kind;
	r->global_flags = global_flags;
	r->size = size;
	/* Host memory comes from aql's data pools, each a reserve of
	 * AQL_MEM_DEFAULT_MAX_SIZE bytes. */
	r->alloc_max = kind == HSA_RT_REGION_AGENT || size < AQL_MEM_DEFAULT_MAX_SIZE
		       ? size : AQL_MEM_DEFAULT_MAX_SIZE;
}

/*
 * Every agent sees host memory as a fine-grained region that also holds
 * kernargs; the CPU agent has a coarse-grained one besides, and an agent
 * with memory of its own offers that as a coarse-grained region.
 */
static void add_agent(aql_agent *agent, const aql_agent_info *info, int owned)
{
	struct hsa_rt_agent *a;
	uint64_t host = host_memory_size();

	if (hsa_rt.agent_count == HSA_RT_MAX_AGENTS) {
		fprintf(stderr, "libhsa-runtime64 (aql): more than %u agents; %s left out\n",
			HSA_RT_MAX_AGENTS, info->name);
		if (owned)
			aql_agent_destroy(agent);
		return;
	}
	a = &hsa_rt.agents[hsa_rt.agent_count++];
	memset(a, 0, sizeof(*a));
	a->agent = agent;
	a->info = *info;
	a->owned = (uint8_t)owned;
	a->device_type = info->kind == AQL_AGENT_CPU ? HSA_DEVICE_TYPE_CPU : HSA_DEVICE_TYPE_GPU;
	if (!info->unified_memory && info->memory_size)
		add_region(a, HSA_RT_REGION_AGENT, HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED,
			   info->memory_size);
	add_region(a, HSA_RT_REGION_SYSTEM_FINE,
		   HSA_REGION_GLOBAL_FLAG_KERNARG | HSA_REGION_GLOBAL_FLAG_FINE_GRAINED, host);
	if (info->kind == AQL_AGENT_CPU)
		add_region(a, HSA_RT_REGION_SYSTEM_COARSE,
			   HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED, host);
	a->isa.owner = a;
	switch (info->kind) {
	case AQL_AGENT_AMD:
		snprintf(a->isa.name, sizeof(a->isa.name), "amdgcn-amd-amdhsa--%s", info->isa);
		break;
	case AQL_AGENT_NVIDIA:
		snprintf(a->isa.name, sizeof(a->isa.name), "nvptx64-nvidia-cuda--%s", info->isa);
		break;
	default:
		snprintf(a->isa.name, sizeof(a->isa.name), "%s-unknown-linux-gnu--%s",
			 info->isa, info->isa);
		break;
	}
}

/* GPUs of kind, each opened; a kind the machine lacks adds nothing. */
static void add_agents_of(enum aql_agent_kind kind)
{
	uint32_t count = 0;

	if (aql_agent_count(kind, &count) != AQL_OK)
		return;
	for (uint32_t i = 0; i < count; i++) {
		aql_agent *agent;
		aql_agent_info info;

		if (aql_agent_open(kind, i, &agent) != AQL_OK)
			continue;
		if (aql_agent_get_info(agent, &info) != AQL_OK) {
			aql_agent_destroy(agent);
			continue;
		}
		add_agent(agent, &info, 1);
	}
}

static hsa_status_t build_table(void)
{
	aql_agent *cpu;
	aql_agent_info info;
	aql_status st;

	hsa_rt.agent_count = 0;
	st = aql_agent_default(&cpu);
	if (st == AQL_OK)
		st = aql_agent_get_info(cpu, &info);
	if (st != AQL_OK)
		return hsa_rt_from_aql(st, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
	add_agent(cpu, &info, 0);
	add_agents_of(AQL_AGENT_NVIDIA);
	add_agents_of(AQL_AGENT_AMD);
	return HSA_STATUS_SUCCESS;
}

static void clear_table(void)
{
	hsa_rt_release_async();
	hsa_rt_release_queues();
	hsa_rt_release_executables();
	hsa_rt_release_signals();
	hsa_rt_release_memory();
	for (uint32_t i = 0; i < hsa_rt.agent_count; i++)
		if (hsa_rt.agents[i].owned)
			aql_agent_destroy(hsa_rt.agents[i].agent);
	hsa_rt.agent_count = 0;
}

hsa_status_t hsa_init(void)
{
	hsa_status_t st = HSA_STATUS_SUCCESS;

	pthread_mutex_lock(&init_lock);
	if (hsa_rt.refcount == UINT32_MAX)
		st = hsa_rt_fail(HSA_STATUS_ERROR_REFCOUNT_OVERFLOW,
				 "hsa_init() called %u times without hsa_shut_down()", UINT32_MAX);
	else if (hsa_rt.refcount == 0)
		st = build_table();
	if (st == HSA_STATUS_SUCCESS)
		__atomic_store_n(&hsa_rt.refcount, hsa_rt.refcount + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&init_lock);
	return st;
}

hsa_status_t hsa_shut_down(void)
{
	hsa_status_t st = HSA_STATUS_SUCCESS;

	pthread_mutex_lock(&init_lock);
	if (hsa_rt.refcount == 0) {
		st = hsa_rt_fail(HSA_STATUS_ERROR_NOT_INITIALIZED,
				 "hsa_shut_down() without a matching hsa_init()");
	} else {
		__atomic_store_n(&hsa_rt.refcount, hsa_rt.refcount - 1, __ATOMIC_RELEASE);
		if (hsa_rt.refcount == 0)
			clear_table();
	}
	pthread_mutex_unlock(&init_lock);
	return st;
}

struct hsa_rt_agent *hsa_rt_agent_from(hsa_agent_t agent)
{
	uintptr_t p = (uintptr_t)agent.handle, base = (uintptr_t)hsa_rt.agents;
	uint32_t count = __atomic_load_n(&hsa_rt.refcount, __ATOMIC_ACQUIRE) ? hsa_rt.agent_count : 0;

	if (p < base || p >= base + count * sizeof(hsa_rt.agents[0]) ||
	    (p - base) % sizeof(hsa_rt.agents[0]))
		return NULL;
	return (struct hsa_rt_agent *)p;
}

struct hsa_rt_region *hsa_rt_region_from(uint64_t handle)
{
	uintptr_t p = (uintptr_t)handle, base = (uintptr_t)hsa_rt.agents;
	uint32_t count = __atomic_load_n(&hsa_rt.refcount, __ATOMIC_ACQUIRE) ? hsa_rt.agent_count : 0;
	size_t off, in_agent;
	const struct hsa_rt_agent *a;

	if (p < base || p >= base + count * sizeof(hsa_rt.agents[0]))
		return NULL;
	a = &hsa_rt.agents[(p - base) / sizeof(hsa_rt.agents[0])];
	in_agent = p - (uintptr_t)a;
	off = in_agent - offsetof(struct hsa_rt_agent, regions);
	if (in_agent < offsetof(struct hsa_rt_agent, regions) ||
	    off % sizeof(a->regions[0]) || off / sizeof(a->regions[0]) >= a->region_count)
		return NULL;
	return (struct hsa_rt_region *)p;
}

struct hsa_rt_isa *hsa_rt_isa_from(hsa_isa_t isa)
{
	uintptr_t p = (uintptr_t)isa.handle, base = (uintptr_t)hsa_rt.agents;
	uint32_t count = __atomic_load_n(&hsa_rt.refcount, __ATOMIC_ACQUIRE) ? hsa_rt.agent_count : 0;

	if (p < base || p >= base + count * sizeof(hsa_rt.agents[0]) ||
	    (p - base) % sizeof(hsa_rt.agents[0]) != offsetof(struct hsa_rt_agent, isa))
		return NULL;
	return (struct hsa_rt_isa *)p;
}
