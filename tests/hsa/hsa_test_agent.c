/* SPDX-License-Identifier: MIT */
/*
 * The helpers that find agents and regions, apart from hsa_test.c so
 * that tests that need none link without hsa/info.c's functions.
 */
#include <stdlib.h>

#include "hsa_test.h"

static hsa_status_t find_cpu(hsa_agent_t agent, void *data)
{
	hsa_device_type_t type;

	if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) == HSA_STATUS_SUCCESS &&
	    type == HSA_DEVICE_TYPE_CPU) {
		*(hsa_agent_t *)data = agent;
		return HSA_STATUS_INFO_BREAK;
	}
	return HSA_STATUS_SUCCESS;
}

hsa_agent_t ht_cpu_agent(void)
{
	hsa_agent_t agent = { 0 };

	if (hsa_iterate_agents(find_cpu, &agent) != HSA_STATUS_INFO_BREAK || !agent.handle) {
		fprintf(stderr, "FAIL: no CPU agent\n");
		exit(1);
	}
	return agent;
}

struct region_query {
	uint32_t flags;
	hsa_region_t found;
};

static hsa_status_t find_region(hsa_region_t region, void *data)
{
	struct region_query *q = data;
	hsa_region_segment_t segment;
	uint32_t flags;

	if (hsa_region_get_info(region, HSA_REGION_INFO_SEGMENT, &segment) != HSA_STATUS_SUCCESS ||
	    segment != HSA_REGION_SEGMENT_GLOBAL ||
	    hsa_region_get_info(region, HSA_REGION_INFO_GLOBAL_FLAGS, &flags) != HSA_STATUS_SUCCESS ||
	    (flags & q->flags) != q->flags)
		return HSA_STATUS_SUCCESS;
	q->found = region;
	return HSA_STATUS_INFO_BREAK;
}

hsa_region_t ht_region(hsa_agent_t agent, uint32_t flags)
{
	struct region_query q = { flags, { 0 } };

	if (hsa_agent_iterate_regions(agent, find_region, &q) != HSA_STATUS_INFO_BREAK) {
		fprintf(stderr, "FAIL: no global region with flags 0x%x\n", flags);
		exit(1);
	}
	return q.found;
}
