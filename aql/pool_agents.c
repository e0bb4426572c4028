/* SPDX-License-Identifier: MIT */
/*
 * What memory pools need of agents: the NUMA node of near_agent, and
 * registration (ops->mem_register) of every range a pool commits with each
 * agent that may access it. The pool itself (mem/pool.c) sits below the
 * core and sees agents only as opaque pointers.
 */
#include <stdio.h>
#include <stdlib.h>

#include "aql/agent_impl.h"
#include "mem/pool.h"
#include "util/error.h"

/* The agents a pool registers with, and the ranges registered so far. */
struct reach {
	uint32_t agent_count;
	aql_agent *agents[AQL_MEM_MAX_AGENTS];
	uint32_t range_count, range_cap;
	struct { void *addr; size_t size; } *ranges;
};

static void unregister_range(struct reach *r, uint32_t agents, void *addr, size_t size)
{
	for (uint32_t i = 0; i < agents; i++)
		aql_agent_mem_unregister(r->agents[i], addr, size);
}

static aql_status reach_commit(void *ctx, void *addr, size_t size)
{
	struct reach *r = ctx;
	aql_status st;

	if (r->range_count == r->range_cap) {
		uint32_t cap = r->range_cap ? 2 * r->range_cap : 16;
		void *grown = realloc(r->ranges, cap * sizeof(*r->ranges));

		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "memory pool: agent registration list");
		r->ranges = grown;
		r->range_cap = cap;
	}
	for (uint32_t i = 0; i < r->agent_count; i++) {
		st = aql_agent_mem_register(r->agents[i], addr, size);
		if (st != AQL_OK) {
			char prefix[64];

			unregister_range(r, i, addr, size);
			snprintf(prefix, sizeof(prefix), "memory pool: registering with agents[%u]", i);
			return aql_fail_prefix(st, prefix);
		}
	}
	r->ranges[r->range_count].addr = addr;
	r->ranges[r->range_count++].size = size;
	return AQL_OK;
}

/* Ranges are undone as they were registered: a GPU driver's unregister
 * takes the base of one registration. */
static void reach_release(void *ctx)
{
	struct reach *r = ctx;

	for (uint32_t k = 0; k < r->range_count; k++)
		unregister_range(r, r->agent_count, r->ranges[k].addr, r->ranges[k].size);
	free(r->ranges);
	free(r);
}

/* The agents of c that register memory; NULL if none does. Entries the
 * pool will refuse (NULL, too many) are left to its checks. */
static struct reach *reach_of(const aql_mem_pool_config *c, aql_status *st)
{
	struct reach *r = NULL;

	*st = AQL_OK;
	if (!c->agents || c->agent_count > AQL_MEM_MAX_AGENTS)
		return NULL;
	for (uint32_t i = 0; i < c->agent_count; i++) {
		if (!c->agents[i] || !c->agents[i]->ops->mem_register)
			continue;
		if (!r && !(r = calloc(1, sizeof(*r)))) {
			*st = aql_fail(AQL_ERR_NOMEM, "memory pool: agent registration");
			return NULL;
		}
		r->agents[r->agent_count++] = c->agents[i];
	}
	return r;
}

aql_status aql_mem_pool_create(const aql_mem_pool_config *config, aql_mem_pool **out)
{
	static const aql_mem_pool_config fallback = {
		.kind = AQL_MEM_FINE_GRAINED, .flags = AQL_MEM_PINNED, .numa_node = AQL_NUMA_ANY,
	};
	const aql_mem_pool_config *c = config ? config : &fallback;
	int32_t near_node = AQL_NUMA_ANY;
	struct aql_mem_commit_hook hook = { reach_commit, reach_release, NULL };
	aql_agent_info info;
	aql_status st;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_mem_pool_create: out is NULL");
	if (c->near_agent && c->numa_node == AQL_NUMA_ANY) {
		st = aql_agent_get_info(c->near_agent, &info);
		if (st != AQL_OK)
			return aql_fail_prefix(st, "memory pool: near_agent");
		if (info.numa_node >= 0)
			near_node = info.numa_node;
	}
	hook.ctx = reach_of(c, &st);
	if (st != AQL_OK)
		return st;
	st = aql_mem_pool_create_hooked(c, near_node, hook.ctx ? &hook : NULL, out);
	if (st != AQL_OK && hook.ctx)
		reach_release(hook.ctx);
	return st;
}
