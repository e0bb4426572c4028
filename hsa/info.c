/* SPDX-License-Identifier: MIT */
/*
 * What the system, its agents, regions, pools and ISAs are: each answer is
 * aql_agent_info (include/aql/agent.h) or the agent table hsa_init built,
 * in HSA's types. An attribute aql knows nothing about (shader engines,
 * BDF, chip id) reads 0, as ROCr reads it for an agent without one; an
 * attribute the headers do not define is HSA_STATUS_ERROR_INVALID_ARGUMENT.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <hsa/hsa_ext_finalize.h>
#include <hsa/hsa_ext_image.h>

#include "hsa_impl.h"

/* ROCr 5.2 reports HSA 1.1 for the system and every agent. */
#define HSA_RT_VERSION_MAJOR 1u
#define HSA_RT_VERSION_MINOR 1u

static hsa_status_t bad_attribute(const char *what, int attribute)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "%s attribute 0x%x is unknown",
			   what, (unsigned)attribute);
}

static hsa_status_t bad_agent(hsa_agent_t agent)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_AGENT, "0x%llx is not an agent",
			   (unsigned long long)agent.handle);
}

static hsa_status_t null_arg(const char *name)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "%s is NULL", name);
}

/* The runtime initialised, the agent behind handle agent, and a required
 * argument named arg given: the checks of an agent's entry points. */
static hsa_status_t agent_arg(hsa_agent_t agent, struct hsa_rt_agent **out, bool given,
			      const char *arg)
{
	hsa_status_t st = hsa_rt_check_init();

	if (st != HSA_STATUS_SUCCESS)
		return st;
	*out = hsa_rt_agent_from(agent);
	if (!*out)
		return bad_agent(agent);
	if (!given)
		return null_arg(arg);
	return HSA_STATUS_SUCCESS;
}

/* A string attribute of a fixed-size char array: padded with NULs. */
static void put_string(void *value, size_t size, const char *s)
{
	size_t n = strnlen(s, size - 1);

	memset(value, 0, size);
	memcpy(value, s, n);
}

hsa_status_t hsa_system_get_info(hsa_system_info_t attribute, void *value)
{
	struct timespec ts;

	HSA_RT_CHECK_INIT();
	if (!value)
		return null_arg("value");
	switch ((int)attribute) {
	case HSA_SYSTEM_INFO_VERSION_MAJOR:
		*(uint16_t *)value = HSA_RT_VERSION_MAJOR;
		break;
	case HSA_SYSTEM_INFO_VERSION_MINOR:
		*(uint16_t *)value = HSA_RT_VERSION_MINOR;
		break;
	case HSA_SYSTEM_INFO_TIMESTAMP:
		clock_gettime(CLOCK_MONOTONIC, &ts);
		*(uint64_t *)value = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		break;
	case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
		*(uint64_t *)value = HSA_RT_TIMESTAMP_FREQUENCY;
		break;
	case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
		*(uint64_t *)value = UINT64_MAX;
		break;
	case HSA_SYSTEM_INFO_ENDIANNESS:
		*(hsa_endianness_t *)value = HSA_ENDIANNESS_LITTLE;
		break;
	case HSA_SYSTEM_INFO_MACHINE_MODEL:
		*(hsa_machine_model_t *)value = HSA_MACHINE_MODEL_LARGE;
		break;
	case HSA_SYSTEM_INFO_EXTENSIONS:
		/* No extension table is provided (hsa_system_get_extension_table). */
		memset(value, 0, 128);
		break;
	case HSA_AMD_SYSTEM_INFO_BUILD_VERSION:
		*(const char **)value = "aql";
		break;
	case HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED:
	case HSA_AMD_SYSTEM_INFO_SVM_ACCESSIBLE_BY_DEFAULT:
		*(bool *)value = false;	/* no hsa_amd_svm_* */
		break;
	default:
		return bad_attribute("system", attribute);
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_iterate_agents(hsa_status_t (*callback)(hsa_agent_t agent, void *data), void *data)
{
	HSA_RT_CHECK_INIT();
	if (!callback)
		return null_arg("callback");
	for (uint32_t i = 0; i < hsa_rt.agent_count; i++) {
		hsa_status_t st = callback(hsa_rt_agent_handle(&hsa_rt.agents[i]), data);

		if (st != HSA_STATUS_SUCCESS)
			return st;
	}
	return HSA_STATUS_SUCCESS;
}

static const char *vendor_name(enum aql_agent_kind kind)
{
	switch (kind) {
	case AQL_AGENT_AMD:
		return "AMD";
	case AQL_AGENT_NVIDIA:
		return "NVIDIA";
	default:
		return "CPU";
	}
}

/* Memory the agent shares with the host is HSA's full profile. */
static hsa_profile_t profile_of(const struct hsa_rt_agent *a)
{
	return a->info.unified_memory ? HSA_PROFILE_FULL : HSA_PROFILE_BASE;
}

static uint32_t grid_max_size(const aql_agent_info *info)
{
	uint64_t n = (uint64_t)info->max_grid_dim[0] * info->max_grid_dim[1];

	if (info->max_grid_dim[1] && n / info->max_grid_dim[1] != info->max_grid_dim[0])
		return UINT32_MAX;
	n = n > UINT32_MAX ? UINT32_MAX : n;
	n *= info->max_grid_dim[2];
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* A compute unit holds one work-group of the largest size. */
static uint32_t waves_per_cu(const aql_agent_info *info)
{
	uint32_t w = info->wavefront_size ? info->max_workgroup_size / info->wavefront_size : 0;

	return w ? w : 1;
}

/* The CPU's caches as glibc reports them; aql describes no GPU's. */
static void cache_sizes(const struct hsa_rt_agent *a, uint32_t sizes[4])
{
	static const int names[4] = { _SC_LEVEL1_DCACHE_SIZE, _SC_LEVEL2_CACHE_SIZE,
				      _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL4_CACHE_SIZE };

	for (int i = 0; i < 4; i++) {
		long v = a->info.kind == AQL_AGENT_CPU ? sysconf(names[i]) : 0;

		sizes[i] = v > 0 && v <= (long)UINT32_MAX ? (uint32_t)v : 0;
	}
}

static uint32_t cacheline_size(const struct hsa_rt_agent *a)
{
	long v = a->info.kind == AQL_AGENT_CPU ? sysconf(_SC_LEVEL1_DCACHE_LINESIZE) : 0;

	return v > 0 ? (uint32_t)v : 64;
}

/* The CPU's highest clock in MHz from cpufreq; 0 where it is not known. */
static uint32_t max_clock_mhz(const struct hsa_rt_agent *a)
{
	unsigned long khz = 0;
	FILE *f;

	if (a->info.kind != AQL_AGENT_CPU)
		return 0;
	f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "re");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &khz) != 1)
		khz = 0;
	fclose(f);
	return (uint32_t)(khz / 1000);
}

static uint32_t node_of(const struct hsa_rt_agent *a)
{
	return (uint32_t)(a - hsa_rt.agents);
}

/* The "Common" (HSA core) attributes. 1 if attribute was one. */
static int core_agent_info(const struct hsa_rt_agent *a, int attribute, void *value)
{
	const aql_agent_info *info = &a->info;

	switch (attribute) {
	case HSA_AGENT_INFO_NAME:
		put_string(value, 64, info->name);
		break;
	case HSA_AGENT_INFO_VENDOR_NAME:
		put_string(value, 64, vendor_name(info->kind));
		break;
	case HSA_AGENT_INFO_FEATURE:
		*(hsa_agent_feature_t *)value = (hsa_agent_feature_t)(info->queue_features &
			(HSA_AGENT_FEATURE_KERNEL_DISPATCH | HSA_AGENT_FEATURE_AGENT_DISPATCH));
		break;
	case HSA_AGENT_INFO_MACHINE_MODEL:
		*(hsa_machine_model_t *)value = HSA_MACHINE_MODEL_LARGE;
		break;
	case HSA_AGENT_INFO_PROFILE:
		*(hsa_profile_t *)value = profile_of(a);
		break;
	case HSA_AGENT_INFO_DEFAULT_FLOAT_ROUNDING_MODE:
	case HSA_AGENT_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES:
		*(hsa_default_float_rounding_mode_t *)value = HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR;
		break;
	case HSA_AGENT_INFO_FAST_F16_OPERATION:
		*(bool *)value = info->kind != AQL_AGENT_CPU;
		break;
	case HSA_AGENT_INFO_WAVEFRONT_SIZE:
		*(uint32_t *)value = info->wavefront_size;
		break;
	case HSA_AGENT_INFO_WORKGROUP_MAX_DIM:
		memcpy(value, info->max_workgroup_dim, 3 * sizeof(uint16_t));
		break;
	case HSA_AGENT_INFO_WORKGROUP_MAX_SIZE:
		*(uint32_t *)value = info->max_workgroup_size;
		break;
	case HSA_AGENT_INFO_GRID_MAX_DIM:
		*(hsa_dim3_t *)value = (hsa_dim3_t){ info->max_grid_dim[0], info->max_grid_dim[1],
						     info->max_grid_dim[2] };
		break;
	case HSA_AGENT_INFO_GRID_MAX_SIZE:
		*(uint32_t *)value = grid_max_size(info);
		break;
	case HSA_AGENT_INFO_FBARRIER_MAX_SIZE:
		*(uint32_t *)value = 0;	/* aql has no fbarriers */
		break;
	case HSA_AGENT_INFO_QUEUES_MAX:
		*(uint32_t *)value = info->queue_features ? HSA_RT_QUEUES_MAX : 0;
		break;
	case HSA_AGENT_INFO_QUEUE_MIN_SIZE:
		*(uint32_t *)value = info->queue_features ? hsa_rt_queue_min_size(a) : 0;
		break;
	case HSA_AGENT_INFO_QUEUE_MAX_SIZE:
		*(uint32_t *)value = info->queue_features ? info->max_queue_size : 0;
		break;
	case HSA_AGENT_INFO_QUEUE_TYPE:
		*(hsa_queue_type32_t *)value = HSA_QUEUE_TYPE_MULTI;
		break;
	case HSA_AGENT_INFO_NODE:
		*(uint32_t *)value = node_of(a);
		break;
	case HSA_AGENT_INFO_DEVICE:
		*(hsa_device_type_t *)value = a->device_type;
		break;
	case HSA_AGENT_INFO_CACHE_SIZE:
		cache_sizes(a, value);
		break;
	case HSA_AGENT_INFO_ISA:
		*(hsa_isa_t *)value = hsa_rt_isa_handle(&a->isa);
		break;
	case HSA_AGENT_INFO_EXTENSIONS:
		memset(value, 0, 128);
		break;
	case HSA_AGENT_INFO_VERSION_MAJOR:
		*(uint16_t *)value = HSA_RT_VERSION_MAJOR;
		break;
	case HSA_AGENT_INFO_VERSION_MINOR:
		*(uint16_t *)value = HSA_RT_VERSION_MINOR;
		break;
	default:
		return 0;
	}
	return 1;
}

/*
 * A uint32_t attribute, stored bytewise: rocminfo 5.2 passes a uint16_t
 * field, not 4-byte aligned, for HSA_AMD_AGENT_INFO_BDFID, whose type is
 * uint32_t (ROCr writes all four bytes there too).
 */
static void put_u32(void *value, uint32_t v)
{
	memcpy(value, &v, sizeof(v));
}

/* AMD's attributes (hsa_ext_amd.h). 1 if attribute was one. */
static int amd_agent_info(const struct hsa_rt_agent *a, int attribute, void *value)
{
	const aql_agent_info *info = &a->info;

	switch (attribute) {
	case HSA_AMD_AGENT_INFO_CHIP_ID:
	case HSA_AMD_AGENT_INFO_MAX_ADDRESS_WATCH_POINTS:
	case HSA_AMD_AGENT_INFO_BDFID:
	case HSA_AMD_AGENT_INFO_MEMORY_WIDTH:
	case HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY:
	case HSA_AMD_AGENT_INFO_NUM_SIMDS_PER_CU:
	case HSA_AMD_AGENT_INFO_NUM_SHADER_ENGINES:
	case HSA_AMD_AGENT_INFO_NUM_SHADER_ARRAYS_PER_SE:
	case HSA_AMD_AGENT_INFO_DOMAIN:
	case HSA_AMD_AGENT_INFO_ASIC_REVISION:
	case HSA_AMD_AGENT_INFO_COOPERATIVE_COMPUTE_UNIT_COUNT:
		put_u32(value, 0);	/* not described by aql_agent_info */
		break;
	case HSA_AMD_AGENT_INFO_CACHELINE_SIZE:
		put_u32(value, cacheline_size(a));
		break;
	case HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT:
		put_u32(value, info->compute_units);
		break;
	case HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY:
		put_u32(value, max_clock_mhz(a));
		break;
	case HSA_AMD_AGENT_INFO_DRIVER_NODE_ID:
		put_u32(value, node_of(a));
		break;
	case HSA_AMD_AGENT_INFO_PRODUCT_NAME:
		put_string(value, 64, info->name);
		break;
	case HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU:
		put_u32(value, waves_per_cu(info));
		break;
	case HSA_AMD_AGENT_INFO_HDP_FLUSH:
		*(hsa_amd_hdp_flush_t *)value = (hsa_amd_hdp_flush_t){ NULL, NULL };
		break;
	case HSA_AMD_AGENT_INFO_COOPERATIVE_QUEUES:
		*(bool *)value = false;
		break;
	case HSA_AMD_AGENT_INFO_UUID:
		/* The header's form for an agent without a UUID. */
		put_string(value, 21, a->device_type == HSA_DEVICE_TYPE_CPU ? "CPU-XX" : "GPU-XX");
		break;
	case HSA_AMD_AGENT_INFO_SVM_DIRECT_HOST_ACCESS:
		*(bool *)value = info->unified_memory;
		break;
	default:
		return 0;
	}
	return 1;
}

hsa_status_t hsa_agent_get_info(hsa_agent_t agent, hsa_agent_info_t attribute, void *value)
{
	struct hsa_rt_agent *a;
	hsa_status_t st = agent_arg(agent, &a, value, "value");

	if (st != HSA_STATUS_SUCCESS)
		return st;
	if (core_agent_info(a, (int)attribute, value) || amd_agent_info(a, (int)attribute, value))
		return HSA_STATUS_SUCCESS;
	return bad_attribute("agent", attribute);
}

hsa_status_t hsa_agent_get_exception_policies(hsa_agent_t agent, hsa_profile_t profile,
					      uint16_t *mask)
{
	struct hsa_rt_agent *a;
	hsa_status_t st = agent_arg(agent, &a, mask, "mask");

	if (st != HSA_STATUS_SUCCESS)
		return st;
	if (profile != HSA_PROFILE_BASE && profile != HSA_PROFILE_FULL)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "profile %d is unknown",
				   (int)profile);
	/* aql's agents neither break on nor detect floating-point exceptions. */
	*mask = 0;
	return HSA_STATUS_SUCCESS;
}

/* Regions and pools: one object each (hsa_impl.h). */

static hsa_status_t iterate_regions(struct hsa_rt_agent *a,
				    hsa_status_t (*fn)(struct hsa_rt_region *r, void *cb, void *data),
				    void *cb, void *data)
{
	for (uint32_t i = 0; i < a->region_count; i++) {
		hsa_status_t st = fn(&a->regions[i], cb, data);

		if (st != HSA_STATUS_SUCCESS)
			return st;
	}
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t call_region_cb(struct hsa_rt_region *r, void *cb, void *data)
{
	hsa_status_t (*callback)(hsa_region_t, void *) = (hsa_status_t (*)(hsa_region_t, void *))cb;

	return callback(hsa_rt_region_handle(r), data);
}

static hsa_status_t call_pool_cb(struct hsa_rt_region *r, void *cb, void *data)
{
	hsa_status_t (*callback)(hsa_amd_memory_pool_t, void *) =
		(hsa_status_t (*)(hsa_amd_memory_pool_t, void *))cb;

	return callback(hsa_rt_pool_handle(r), data);
}

hsa_status_t hsa_agent_iterate_regions(hsa_agent_t agent,
				       hsa_status_t (*callback)(hsa_region_t region, void *data),
				       void *data)
{
	struct hsa_rt_agent *a;
	hsa_status_t st = agent_arg(agent, &a, callback, "callback");

	if (st != HSA_STATUS_SUCCESS)
		return st;
	return iterate_regions(a, call_region_cb, (void *)callback, data);
}

hsa_status_t hsa_amd_agent_iterate_memory_pools(hsa_agent_t agent,
						hsa_status_t (*callback)(hsa_amd_memory_pool_t memory_pool,
									 void *data),
						void *data)
{
	struct hsa_rt_agent *a;
	hsa_status_t st = agent_arg(agent, &a, callback, "callback");

	if (st != HSA_STATUS_SUCCESS)
		return st;
	return iterate_regions(a, call_pool_cb, (void *)callback, data);
}

/* Host memory, which every agent may access (hsa/memory.c). */
static bool is_host_memory(const struct hsa_rt_region *r)
{
	return r->kind != HSA_RT_REGION_AGENT || r->owner->info.unified_memory;
}

/* Attributes regions and pools share; their values are the same. 1 if one. */
static int common_region_info(const struct hsa_rt_region *r, int attribute, void *value)
{
	switch (attribute) {
	case HSA_REGION_INFO_SEGMENT:
		/* hsa_region_segment_t and hsa_amd_segment_t agree on GLOBAL. */
		*(uint32_t *)value = HSA_REGION_SEGMENT_GLOBAL;
		break;
	case HSA_REGION_INFO_GLOBAL_FLAGS:
		/* HSA's region flags and AMD's pool flags have the same bits. */
		*(uint32_t *)value = r->global_flags;
		break;
	case HSA_REGION_INFO_SIZE:
		*(size_t *)value = r->size;
		break;
	case HSA_REGION_INFO_ALLOC_MAX_SIZE:
		*(size_t *)value = r->alloc_max;
		break;
	case HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED:
		*(bool *)value = true;
		break;
	case HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE:
	case HSA_REGION_INFO_RUNTIME_ALLOC_ALIGNMENT:
		*(size_t *)value = HSA_RT_ALLOC_GRANULE;
		break;
	default:
		return 0;
	}
	return 1;
}

hsa_status_t hsa_region_get_info(hsa_region_t region, hsa_region_info_t attribute, void *value)
{
	struct hsa_rt_region *r;

	HSA_RT_CHECK_INIT();
	r = hsa_rt_region_from(region.handle);
	if (!r)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_REGION, "0x%llx is not a region",
				   (unsigned long long)region.handle);
	if (!value)
		return null_arg("value");
	if (common_region_info(r, (int)attribute, value))
		return HSA_STATUS_SUCCESS;
	switch ((int)attribute) {
	case HSA_AMD_REGION_INFO_HOST_ACCESSIBLE:
		*(bool *)value = is_host_memory(r);
		break;
	case HSA_AMD_REGION_INFO_BASE:
		/* Allocations are not carved from one range. */
		*(void **)value = NULL;
		break;
	case HSA_AMD_REGION_INFO_BUS_WIDTH:
	case HSA_AMD_REGION_INFO_MAX_CLOCK_FREQUENCY:
		*(uint32_t *)value = 0;
		break;
	case HSA_REGION_INFO_ALLOC_MAX_PRIVATE_WORKGROUP_SIZE:
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "ALLOC_MAX_PRIVATE_WORKGROUP_SIZE is for private regions; this one is global");
	default:
		return bad_attribute("region", attribute);
	}
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t bad_pool(hsa_amd_memory_pool_t pool)
{
	return hsa_rt_fail((hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL,
			   "0x%llx is not a memory pool",
			   (unsigned long long)pool.handle);
}

hsa_status_t hsa_amd_memory_pool_get_info(hsa_amd_memory_pool_t memory_pool,
					  hsa_amd_memory_pool_info_t attribute, void *value)
{
	struct hsa_rt_region *r;

	HSA_RT_CHECK_INIT();
	r = hsa_rt_region_from(memory_pool.handle);
	if (!r)
		return bad_pool(memory_pool);
	if (!value)
		return null_arg("value");
	if (common_region_info(r, (int)attribute, value))
		return HSA_STATUS_SUCCESS;
	if (attribute != HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL)
		return bad_attribute("memory pool", attribute);
	*(bool *)value = is_host_memory(r);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_amd_agent_memory_pool_get_info(hsa_agent_t agent,
						hsa_amd_memory_pool_t memory_pool,
						hsa_amd_agent_memory_pool_info_t attribute,
						void *value)
{
	struct hsa_rt_agent *a;
	struct hsa_rt_region *r;

	HSA_RT_CHECK_INIT();
	a = hsa_rt_agent_from(agent);
	if (!a)
		return bad_agent(agent);
	r = hsa_rt_region_from(memory_pool.handle);
	if (!r)
		return bad_pool(memory_pool);
	if (!value)
		return null_arg("value");
	switch ((int)attribute) {
	case HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS:
		*(hsa_amd_memory_pool_access_t *)value = r->owner == a || is_host_memory(r)
			? HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT
			: HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
		break;
	case HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS:
		/* aql knows no topology between agents. */
		*(uint32_t *)value = 0;
		break;
	case HSA_AMD_AGENT_MEMORY_POOL_INFO_LINK_INFO:
		break;	/* an array of NUM_LINK_HOPS (0) entries */
	default:
		return bad_attribute("agent memory pool", attribute);
	}
	return HSA_STATUS_SUCCESS;
}

/* ISAs: one per agent, named as ROCr names them (hsa_impl.h). */

hsa_status_t hsa_agent_iterate_isas(hsa_agent_t agent,
				    hsa_status_t (*callback)(hsa_isa_t isa, void *data), void *data)
{
	struct hsa_rt_agent *a;
	hsa_status_t st = agent_arg(agent, &a, callback, "callback");

	if (st != HSA_STATUS_SUCCESS)
		return st;
	return callback(hsa_rt_isa_handle(&a->isa), data);
}

static hsa_status_t bad_isa(hsa_isa_t isa)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ISA, "0x%llx is not an ISA",
			   (unsigned long long)isa.handle);
}

/* The runtime initialised, the ISA behind handle isa, and a value to
 * answer in. */
static hsa_status_t isa_arg(hsa_isa_t isa, struct hsa_rt_isa **out, const void *value)
{
	hsa_status_t st = hsa_rt_check_init();

	if (st != HSA_STATUS_SUCCESS)
		return st;
	*out = hsa_rt_isa_from(isa);
	if (!*out)
		return bad_isa(isa);
	if (!value)
		return null_arg("value");
	return HSA_STATUS_SUCCESS;
}

/* ISA attributes answered as the owning agent's attribute of that name. */
static const struct {
	int isa, agent;
} isa_as_agent[] = {
	{ HSA_ISA_INFO_FAST_F16_OPERATION, HSA_AGENT_INFO_FAST_F16_OPERATION },
	{ HSA_ISA_INFO_WORKGROUP_MAX_DIM, HSA_AGENT_INFO_WORKGROUP_MAX_DIM },
	{ HSA_ISA_INFO_WORKGROUP_MAX_SIZE, HSA_AGENT_INFO_WORKGROUP_MAX_SIZE },
	{ HSA_ISA_INFO_GRID_MAX_DIM, HSA_AGENT_INFO_GRID_MAX_DIM },
	{ HSA_ISA_INFO_GRID_MAX_SIZE, HSA_AGENT_INFO_GRID_MAX_SIZE },
	{ HSA_ISA_INFO_FBARRIER_MAX_SIZE, HSA_AGENT_INFO_FBARRIER_MAX_SIZE },
};

/* The attributes of hsa_isa_get_info_alt; 1 if attribute was one. */
static int isa_info(const struct hsa_rt_isa *isa, int attribute, void *value)
{
	const struct hsa_rt_agent *a = isa->owner;
	bool *flags = value;

	switch (attribute) {
	case HSA_ISA_INFO_NAME_LENGTH:
		*(uint32_t *)value = (uint32_t)strlen(isa->name) + 1;	/* with the NUL */
		break;
	case HSA_ISA_INFO_NAME:
		memcpy(value, isa->name, strlen(isa->name) + 1);
		break;
	case HSA_ISA_INFO_MACHINE_MODELS:
		flags[HSA_MACHINE_MODEL_SMALL] = false;
		flags[HSA_MACHINE_MODEL_LARGE] = true;
		break;
	case HSA_ISA_INFO_PROFILES:
		flags[HSA_PROFILE_BASE] = profile_of(a) == HSA_PROFILE_BASE;
		flags[HSA_PROFILE_FULL] = profile_of(a) == HSA_PROFILE_FULL;
		break;
	case HSA_ISA_INFO_DEFAULT_FLOAT_ROUNDING_MODES:
	case HSA_ISA_INFO_BASE_PROFILE_DEFAULT_FLOAT_ROUNDING_MODES:
		flags[HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT] = false;
		flags[HSA_DEFAULT_FLOAT_ROUNDING_MODE_ZERO] = false;
		flags[HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR] = true;
		break;
	default:
		for (size_t k = 0; k < sizeof(isa_as_agent) / sizeof(isa_as_agent[0]); k++) {
			if (isa_as_agent[k].isa == attribute) {
				core_agent_info(a, isa_as_agent[k].agent, value);
				return 1;
			}
		}
		return 0;
	}
	return 1;
}

hsa_status_t hsa_isa_get_info_alt(hsa_isa_t isa, hsa_isa_info_t attribute, void *value)
{
	struct hsa_rt_isa *i;
	hsa_status_t st = isa_arg(isa, &i, value);

	if (st != HSA_STATUS_SUCCESS)
		return st;
	if (isa_info(i, (int)attribute, value))
		return HSA_STATUS_SUCCESS;
	return bad_attribute("ISA", attribute);
}

/* The HSA 1.0 form: call conventions by index, of which each ISA has one. */
hsa_status_t hsa_isa_get_info(hsa_isa_t isa, hsa_isa_info_t attribute, uint32_t index,
			      void *value)
{
	struct hsa_rt_isa *i;
	hsa_status_t st = isa_arg(isa, &i, value);

	if (st != HSA_STATUS_SUCCESS)
		return st;
	switch ((int)attribute) {
	case HSA_ISA_INFO_CALL_CONVENTION_COUNT:
		*(uint32_t *)value = 1;
		return HSA_STATUS_SUCCESS;
	case HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONT_SIZE:
	case HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONTS_PER_COMPUTE_UNIT:
		if (index != 0)
			return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_INDEX,
					   "call convention %u: the ISA has one (index 0)", index);
		*(uint32_t *)value = attribute == HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONT_SIZE
			? i->owner->info.wavefront_size : waves_per_cu(&i->owner->info);
		return HSA_STATUS_SUCCESS;
	default:
		if (isa_info(i, (int)attribute, value))
			return HSA_STATUS_SUCCESS;
		return bad_attribute("ISA", attribute);
	}
}

hsa_status_t hsa_isa_from_name(const char *name, hsa_isa_t *isa)
{
	HSA_RT_CHECK_INIT();
	if (!name)
		return null_arg("name");
	if (!isa)
		return null_arg("isa");
	for (uint32_t i = 0; i < hsa_rt.agent_count; i++) {
		if (!strcmp(hsa_rt.agents[i].isa.name, name)) {
			*isa = hsa_rt_isa_handle(&hsa_rt.agents[i].isa);
			return HSA_STATUS_SUCCESS;
		}
	}
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ISA_NAME, "no agent has the ISA \"%s\"", name);
}

/*
 * Extensions: aql provides none of the HSA extensions (finalizer, images,
 * performance counters, profiling events) nor AMD's extension tables, so
 * every valid one is unsupported and has no function table.
 */
static bool extension_valid(uint16_t extension)
{
	return extension <= HSA_EXTENSION_STD_LAST ||
	       (extension >= HSA_AMD_FIRST_EXTENSION && extension <= HSA_AMD_LAST_EXTENSION);
}

static hsa_status_t bad_extension(uint16_t extension)
{
	return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "extension 0x%x is unknown",
			   (unsigned)extension);
}

hsa_status_t hsa_extension_get_name(uint16_t extension, const char **name)
{
	static const char *const std_names[] = {
		"HSA_EXTENSION_FINALIZER", "HSA_EXTENSION_IMAGES",
		"HSA_EXTENSION_PERFORMANCE_COUNTERS", "HSA_EXTENSION_PROFILING_EVENTS",
	};
	static const char *const amd_names[] = {
		"HSA_EXTENSION_AMD_PROFILER", "HSA_EXTENSION_AMD_LOADER",
		"HSA_EXTENSION_AMD_AQLPROFILE",
	};

	HSA_RT_CHECK_INIT();
	if (!extension_valid(extension))
		return bad_extension(extension);
	if (!name)
		return null_arg("name");
	*name = extension <= HSA_EXTENSION_STD_LAST ? std_names[extension]
						    : amd_names[extension - HSA_AMD_FIRST_EXTENSION];
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_system_extension_supported(uint16_t extension, uint16_t version_major,
					    uint16_t version_minor, bool *result)
{
	HSA_RT_CHECK_INIT();
	(void)version_major, (void)version_minor;
	if (!extension_valid(extension))
		return bad_extension(extension);
	if (!result)
		return null_arg("result");
	*result = false;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_system_major_extension_supported(uint16_t extension, uint16_t version_major,
						  uint16_t *version_minor, bool *result)
{
	HSA_RT_CHECK_INIT();
	(void)version_major;
	if (!extension_valid(extension))
		return bad_extension(extension);
	if (!version_minor || !result)
		return null_arg(!result ? "result" : "version_minor");
	*result = false;
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_agent_extension_supported(uint16_t extension, hsa_agent_t agent,
					   uint16_t version_major, uint16_t version_minor,
					   bool *result)
{
	HSA_RT_CHECK_INIT();
	if (!hsa_rt_agent_from(agent))
		return bad_agent(agent);
	return hsa_system_extension_supported(extension, version_major, version_minor, result);
}

hsa_status_t hsa_agent_major_extension_supported(uint16_t extension, hsa_agent_t agent,
						 uint16_t version_major, uint16_t *version_minor,
						 bool *result)
{
	HSA_RT_CHECK_INIT();
	if (!hsa_rt_agent_from(agent))
		return bad_agent(agent);
	return hsa_system_major_extension_supported(extension, version_major, version_minor,
						    result);
}

/*
 * Function tables: the images and finalizer extensions' functions are
 * aql's own (each returns the specification's error for a feature no aql
 * agent has), so their tables are handed out as ROCr hands them out,
 * supported or not (hsa.cpp hsa_system_get_major_extension_table): a
 * program that builds its calls from the table meets the same errors as
 * one that calls the functions. The AMD extensions (profiler, loader,
 * aqlprofile) have no functions here, hence no table.
 */
static const hsa_ext_images_1_pfn_t images_table = {
	.hsa_ext_image_get_capability = hsa_ext_image_get_capability,
	.hsa_ext_image_data_get_info = hsa_ext_image_data_get_info,
	.hsa_ext_image_create = hsa_ext_image_create,
	.hsa_ext_image_import = hsa_ext_image_import,
	.hsa_ext_image_export = hsa_ext_image_export,
	.hsa_ext_image_copy = hsa_ext_image_copy,
	.hsa_ext_image_clear = hsa_ext_image_clear,
	.hsa_ext_image_destroy = hsa_ext_image_destroy,
	.hsa_ext_sampler_create = hsa_ext_sampler_create,
	.hsa_ext_sampler_destroy = hsa_ext_sampler_destroy,
	.hsa_ext_image_get_capability_with_layout = hsa_ext_image_get_capability_with_layout,
	.hsa_ext_image_data_get_info_with_layout = hsa_ext_image_data_get_info_with_layout,
	.hsa_ext_image_create_with_layout = hsa_ext_image_create_with_layout,
};

static const hsa_ext_finalizer_1_00_pfn_t finalizer_table = {
	.hsa_ext_program_create = hsa_ext_program_create,
	.hsa_ext_program_destroy = hsa_ext_program_destroy,
	.hsa_ext_program_add_module = hsa_ext_program_add_module,
	.hsa_ext_program_iterate_modules = hsa_ext_program_iterate_modules,
	.hsa_ext_program_get_info = hsa_ext_program_get_info,
	.hsa_ext_program_finalize = hsa_ext_program_finalize,
};

/* Copy up to length bytes of extension's table (major version 1). */
static hsa_status_t get_table(uint16_t extension, uint16_t version_major, size_t length,
			      void *table)
{
	const void *src;
	size_t size;

	HSA_RT_CHECK_INIT();
	if (!extension_valid(extension))
		return bad_extension(extension);
	if (!table || !length)
		return null_arg(!table ? "table" : "table_length (0)");
	if (extension == HSA_EXTENSION_IMAGES) {
		src = &images_table;
		size = sizeof(images_table);
	} else if (extension == HSA_EXTENSION_FINALIZER) {
		src = &finalizer_table;
		size = sizeof(finalizer_table);
	} else {
		const char *name = NULL;

		hsa_extension_get_name(extension, &name);
		return hsa_rt_unprovided(HSA_STATUS_ERROR_INVALID_ARGUMENT, name);
	}
	if (version_major != 1)
		return hsa_rt_fail(HSA_STATUS_ERROR, "extension 0x%x has version 1, not %u",
				   (unsigned)extension, (unsigned)version_major);
	memcpy(table, src, length < size ? length : size);
	return HSA_STATUS_SUCCESS;
}

hsa_status_t hsa_system_get_extension_table(uint16_t extension, uint16_t version_major,
					    uint16_t version_minor, void *table)
{
	/* The 1.00 table of each (images without the *_with_layout functions). */
	size_t length = extension == HSA_EXTENSION_IMAGES ? sizeof(hsa_ext_images_1_00_pfn_t)
							  : sizeof(hsa_ext_finalizer_1_00_pfn_t);

	(void)version_minor;
	return get_table(extension, version_major, length, table);
}

hsa_status_t hsa_system_get_major_extension_table(uint16_t extension, uint16_t version_major,
						  size_t table_length, void *table)
{
	return get_table(extension, version_major, table_length, table);
}
