/* SPDX-License-Identifier: MIT */
/* The agent-neutral entry points: each forwards to the agent's ops. */
#include <pthread.h>
#include <stdio.h>

#include "aql/agent_impl.h"
#include "aql/error.h"

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static aql_agent *default_agent;
static aql_status default_status;
static char default_reason[256];

static void create_default(void)
{
	default_status = aql_host_agent_create(NULL, &default_agent);
	if (default_status == AQL_OK)
		default_agent->is_default = 1;
	else
		snprintf(default_reason, sizeof(default_reason), "%s", aql_error_message());
}

aql_status aql_agent_default(aql_agent **out)
{
	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_agent_default: out is NULL");
	pthread_once(&default_once, create_default);
	if (default_status != AQL_OK)
		return aql_fail(default_status, "default CPU agent: %s", default_reason);
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
