/* SPDX-License-Identifier: MIT */
/*
 * Internal: what the core adds to a memory pool. A pool knows agents only
 * as opaque pointers (who may access); how its memory becomes reachable by
 * them is a hook the core passes in (aql/pool_agents.c).
 */
#ifndef AQL_INTERNAL_POOL_H
#define AQL_INTERNAL_POOL_H

#include <aql/mem.h>

struct aql_mem_commit_hook {
	/*
	 * Called under the pool's lock for each range the pool commits,
	 * before any of it is handed out; an error fails that allocation.
	 */
	aql_status (*commit)(void *ctx, void *addr, size_t size);
	/* Called once at destroy: undo what commit did, free ctx. */
	void (*release)(void *ctx);
	void *ctx;
};

/*
 * aql_mem_pool_create() with near_agent already resolved to near_node
 * (AQL_NUMA_ANY: none) and an optional hook. config must not be NULL.
 * Errors as aql_mem_pool_create().
 */
aql_status aql_mem_pool_create_hooked(const aql_mem_pool_config *config, int32_t near_node,
				      const struct aql_mem_commit_hook *hook,
				      aql_mem_pool **out);

/* Whether pool is a process-wide one, which lives until exit: memory an
 * agent registers lazily stays valid (nv/agent.c). Thread safe. */
int aql_mem_pool_is_default(const aql_mem_pool *pool);

#endif
