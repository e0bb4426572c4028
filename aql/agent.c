/* SPDX-License-Identifier: MIT */
/* The agent-neutral entry points: each forwards to the agent's ops. */
#include <pthread.h>
#include <stdio.h>

#include <aql/queue.h>

#include "aql/agent_impl.h"
#include "util/error.h"

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static aql_agent *default_agent;
static aql_status default_status;
static char default_reason[256];

/* The first kind of agent that opens is the default; the reason kept is the
 * last one's, since the CPU agent comes first and fails only for want of
 * memory or threads. */
static void create_default(void)
{
	default_status = AQL_ERR_NOT_FOUND;
	snprintf(default_reason, sizeof(default_reason), "libaql was built with no agent");
	for (const struct aql_agent_driver *const *d = aql_agent_drivers; *d; d++) {
		default_status = (*d)->open_default(&default_agent);
		if (default_status == AQL_OK) {
			default_agent->is_default = 1;
			return;
		}
		snprintf(default_reason, sizeof(default_reason), "%s agent: %s", (*d)->name,
			 aql_error_message());
	}
}

aql_status aql_agent_default(aql_agent **out)
{
	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_default: out is NULL");
	pthread_once(&default_once, create_default);
	if (default_status != AQL_OK)
		return aql_fail(default_status, "no default agent: %s", default_reason);
	*out = default_agent;
	return AQL_OK;
}

aql_status aql_agent_destroy(aql_agent *agent)
{
	uint32_t queues, buffers;

	if (!agent)
		return AQL_OK;
	if (agent->is_default)
		return aql_fail(AQL_ERR_INVALID_ARG, "the default agent lives until exit");
	queues = __atomic_load_n(&agent->queues, __ATOMIC_ACQUIRE);
	if (queues)
		return aql_fail(AQL_ERR_INVALID_ARG, "agent still has %u queue(s); destroy them first",
				queues);
	buffers = __atomic_load_n(&agent->buffers, __ATOMIC_ACQUIRE);
	if (buffers)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"agent still holds storage of %u typed buffer(s); destroy them first",
				buffers);
	agent->ops->destroy(agent);
	return AQL_OK;
}

aql_status aql_agent_get_info(aql_agent *agent, aql_agent_info *info)
{
	if (!agent || !info)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_get_info: agent or info is NULL");
	agent->ops->get_info(agent, info);
	return AQL_OK;
}

aql_status aql_agent_ticks_to_ns(aql_agent *agent, uint64_t tick, uint64_t *ns)
{
	if (!agent || !ns)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_ticks_to_ns: agent or ns is NULL");
	if (!agent->ops->ticks_to_ns) {
		*ns = tick;
		return AQL_OK;
	}
	return agent->ops->ticks_to_ns(agent, tick, ns);
}

/* A stamp of 0 was never written: it stays 0 rather than becoming a time. */
static aql_status stamp_ns(aql_agent *agent, uint64_t tick, uint64_t *ns)
{
	if (!tick) {
		*ns = 0;
		return AQL_OK;
	}
	return aql_agent_ticks_to_ns(agent, tick, ns);
}

aql_status aql_signal_dispatch_time(aql_agent *agent, const aql_signal *signal,
				    uint64_t *start_ns, uint64_t *end_ns)
{
	aql_status st;

	if (!agent || !signal || !start_ns || !end_ns)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_signal_dispatch_time: agent, signal, start_ns and end_ns are "
				"required");
	/* the end first (ROCr's order): a clock sample the end takes serves
	 * the start too, so both are on one line */
	st = stamp_ns(agent, __atomic_load_n(&signal->end_ts, __ATOMIC_ACQUIRE), end_ns);
	if (st == AQL_OK)
		st = stamp_ns(agent, __atomic_load_n(&signal->start_ts, __ATOMIC_ACQUIRE),
			      start_ns);
	return st;
}

aql_status aql_agent_register_function(aql_agent *agent, uint16_t id, aql_agent_fn fn,
				       void *user)
{
	if (!agent)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_register_function: agent is NULL");
	if (id >= AQL_AGENT_FN_RESERVED)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"agent dispatch type %u is reserved for libaql (0x%x and up)", id,
				AQL_AGENT_FN_RESERVED);
	if (!agent->ops->register_function)
		return aql_fail(AQL_ERR_UNSUPPORTED, "this agent runs no agent dispatch packets");
	return agent->ops->register_function(agent, id, fn, user);
}

aql_status aql_agent_mem_register(aql_agent *agent, void *ptr, size_t size)
{
	if (!agent->ops->mem_register || !size)
		return AQL_OK;
	return agent->ops->mem_register(agent, ptr, size);
}

void aql_agent_mem_unregister(aql_agent *agent, void *ptr, size_t size)
{
	if (agent->ops->mem_unregister && size)
		agent->ops->mem_unregister(agent, ptr, size);
}

const char *aql_agent_kind_name(enum aql_agent_kind kind)
{
	switch (kind) {
	case AQL_AGENT_CPU: return "cpu";
	case AQL_AGENT_NVIDIA: return "nvidia";
	case AQL_AGENT_AMD: return "amd";
	default: return "unknown";
	}
}

static aql_status driver_of(enum aql_agent_kind kind, const struct aql_agent_driver **out)
{
	if ((unsigned)kind >= AQL_AGENT_KIND_COUNT)
		return aql_fail(AQL_ERR_INVALID_ARG, "agent kind %d does not exist", (int)kind);
	for (const struct aql_agent_driver *const *d = aql_agent_drivers; *d; d++) {
		if ((*d)->kind == kind) {
			*out = *d;
			return AQL_OK;
		}
	}
	return aql_fail(AQL_ERR_UNSUPPORTED, "libaql was built without an %s agent",
			aql_agent_kind_name(kind));
}

aql_status aql_agent_count(enum aql_agent_kind kind, uint32_t *count)
{
	const struct aql_agent_driver *d = NULL;
	aql_status st;

	if (!count)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_count: count is NULL");
	st = driver_of(kind, &d);
	return st == AQL_OK ? d->count(count) : st;
}

aql_status aql_agent_open(enum aql_agent_kind kind, uint32_t index, aql_agent **out)
{
	const struct aql_agent_driver *d = NULL;
	uint32_t n;
	aql_status st;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_open: out is NULL");
	if ((st = driver_of(kind, &d)) != AQL_OK || (st = d->count(&n)) != AQL_OK)
		return st;
	if (index >= n)
		return aql_fail(AQL_ERR_INVALID_ARG, "%s agent %u does not exist: there are %u",
				aql_agent_kind_name(kind), index, n);
	return d->open(index, out);
}
