/* SPDX-License-Identifier: MIT */
/*
 * Wavefronts and ISA compatibility. Each agent has one ISA and each ISA
 * one wavefront size (aql_agent_info.wavefront_size), so an ISA's
 * wavefront handle is the ISA's own.
 */
#include <string.h>

#include "hsa_impl.h"

static hsa_status_t bad_isa(uint64_t handle)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ISA, "0x%llx is not an ISA",
			   (unsigned long long)handle);
}

hsa_status_t hsa_isa_iterate_wavefronts(hsa_isa_t isa,
					hsa_status_t (*callback)(hsa_wavefront_t wavefront, void *data),
					void *data)
{
	HSA_RT_CHECK_INIT();
	if (!hsa_rt_isa_from(isa))
		return bad_isa(isa.handle);
	if (!callback)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "callback is NULL");
	return callback((hsa_wavefront_t){ isa.handle }, data);
}

hsa_status_t hsa_wavefront_get_info(hsa_wavefront_t wavefront, hsa_wavefront_info_t attribute,
				    void *value)
{
	struct hsa_rt_isa *isa;

	HSA_RT_CHECK_INIT();
	isa = hsa_rt_isa_from((hsa_isa_t){ wavefront.handle });
	if (!isa)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_WAVEFRONT, "0x%llx is not a wavefront",
				   (unsigned long long)wavefront.handle);
	if (!value)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "value is NULL");
	if (attribute != HSA_WAVEFRONT_INFO_SIZE)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "wavefront attribute %d is unknown", (int)attribute);
	*(uint32_t *)value = isa->owner->info.wavefront_size;
	return HSA_STATUS_SUCCESS;
}

/* Code for one ISA runs on an agent of the same ISA (same name). */
hsa_status_t hsa_isa_compatible(hsa_isa_t code_object_isa, hsa_isa_t agent_isa, bool *result)
{
	struct hsa_rt_isa *code, *agent;

	HSA_RT_CHECK_INIT();
	code = hsa_rt_isa_from(code_object_isa);
	agent = hsa_rt_isa_from(agent_isa);
	if (!code)
		return bad_isa(code_object_isa.handle);
	if (!agent)
		return bad_isa(agent_isa.handle);
	if (!result)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "result is NULL");
	*result = !strcmp(code->name, agent->name);
	return HSA_STATUS_SUCCESS;
}
