/* SPDX-License-Identifier: MIT */
/* Placeholder until the CUDA agent lands (issue 12, in progress). */
#include "nv/nv.h"
#include "util/error.h"

static aql_status no_agent(void)
{
	return aql_fail(AQL_ERR_UNSUPPORTED, "the CUDA agent is not built yet");
}

static aql_status open_default(aql_agent **out)
{
	(void)out;
	return no_agent();
}

static aql_status count_agents(uint32_t *count)
{
	(void)count;
	return no_agent();
}

static aql_status open_agent(uint32_t index, aql_agent **out)
{
	(void)index;
	(void)out;
	return no_agent();
}

const struct aql_agent_driver aql_nv_agent_driver = {
	.name = "NVIDIA",
	.kind = AQL_AGENT_NVIDIA,
	.open_default = open_default,
	.count = count_agents,
	.open = open_agent,
};
