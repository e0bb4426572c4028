/* SPDX-License-Identifier: MIT */
/*
 * System, agent, region, pool and ISA information through the HSA API, and
 * the extension queries: values that agree with each other and with what
 * the layer does (a region's allocation, a queue of the maximum size), and
 * every error path (before init, foreign handles, unknown attributes).
 */
#include <string.h>

#include "hsa_test.h"

struct agents {
	hsa_agent_t list[32];
	unsigned count;
};

static hsa_status_t collect(hsa_agent_t agent, void *data)
{
	struct agents *a = data;

	if (a->count < 32)
		a->list[a->count++] = agent;
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t stop_at_first(hsa_agent_t agent, void *data)
{
	(void)agent;
	++*(unsigned *)data;
	return HSA_STATUS_INFO_BREAK;
}

static void before_init(void)
{
	hsa_agent_t none = { 0 };
	uint16_t major;
	unsigned n = 0;

	CHECK_ST(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_iterate_agents(collect, &n), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_agent_get_info(none, HSA_AGENT_INFO_NAME, &major),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
}

static void system_info(void)
{
	uint16_t major = 0, minor = 0;
	uint64_t freq = 0, t0 = 0, t1 = 0, max_wait = 0;
	hsa_endianness_t endian;
	hsa_machine_model_t model;
	uint8_t ext[128];
	bool svm = true;
	const char *build = NULL;

	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MINOR, &minor));
	CHECK(major == 1, "HSA version %u.%u", major, minor);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq));
	CHECK(freq >= 1000000 && freq <= 4000000000ull, "timestamp frequency %llu",
	      (unsigned long long)freq);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t0));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t1));
	CHECK(t0 > 0 && t1 >= t0, "timestamps %llu then %llu", (unsigned long long)t0,
	      (unsigned long long)t1);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT, &max_wait));
	CHECK(max_wait > 0, "max wait %llu", (unsigned long long)max_wait);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_ENDIANNESS, &endian));
	CHECK(endian == HSA_ENDIANNESS_LITTLE, "endianness %d", (int)endian);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_MACHINE_MODEL, &model));
	CHECK(model == HSA_MACHINE_MODEL_LARGE, "machine model %d", (int)model);
	memset(ext, 0xff, sizeof(ext));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_EXTENSIONS, ext));
	CHECK(ext[0] == 0 && ext[127] == 0, "no extension is claimed");
	CHECK_OK(hsa_system_get_info((hsa_system_info_t)HSA_AMD_SYSTEM_INFO_BUILD_VERSION, &build));
	CHECK(build && *build, "a build version");
	CHECK_OK(hsa_system_get_info((hsa_system_info_t)HSA_AMD_SYSTEM_INFO_SVM_SUPPORTED, &svm));
	CHECK(!svm, "no SVM");
	CHECK_ST(hsa_system_get_info((hsa_system_info_t)0x7777, &freq),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static hsa_status_t count_region(hsa_region_t region, void *data)
{
	bool allowed = false;
	uint32_t flags = 0;
	size_t size = 0, granule = 0, max = 0;
	void *p = NULL;

	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_GLOBAL_FLAGS, &flags));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_SIZE, &size));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_ALLOC_MAX_SIZE, &max));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_RUNTIME_ALLOC_ALLOWED, &allowed));
	CHECK_OK(hsa_region_get_info(region, HSA_REGION_INFO_RUNTIME_ALLOC_GRANULE, &granule));
	CHECK(size > 0 && max > 0 && max <= size, "region size %zu, alloc max %zu", size, max);
	CHECK(granule && !(granule & (granule - 1)), "granule %zu", granule);
	CHECK(allowed, "the runtime allocates from every region");
	/* What a region says it allows, it does. */
	CHECK_OK(hsa_memory_allocate(region, granule, &p));
	CHECK(p && (uintptr_t)p % granule == 0, "an allocation aligned to the granule: %p", p);
	if (p)
		CHECK_OK(hsa_memory_free(p));
	if (flags & HSA_REGION_GLOBAL_FLAG_KERNARG)
		++*(unsigned *)data;
	CHECK_ST(hsa_region_get_info(region, (hsa_region_info_t)0x7777, &size),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	return HSA_STATUS_SUCCESS;
}

struct pools {
	hsa_agent_t agent;
	unsigned count, accessible;
};

static hsa_status_t check_pool(hsa_amd_memory_pool_t pool, void *data)
{
	struct pools *p = data;
	hsa_amd_segment_t segment;
	hsa_amd_memory_pool_access_t access;
	uint32_t hops = 1;
	size_t size = 0, align = 0;
	bool all = false;

	p->count++;
	CHECK_OK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment));
	CHECK(segment == HSA_AMD_SEGMENT_GLOBAL, "segment %d", (int)segment);
	CHECK_OK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size));
	CHECK_OK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT,
					      &align));
	CHECK(size > 0 && align > 0, "pool size %zu, alignment %zu", size, align);
	CHECK_OK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL, &all));
	CHECK_OK(hsa_amd_agent_memory_pool_get_info(p->agent, pool,
						    HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access));
	/* The agent's own pools are open to it. */
	CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT, "access %d", (int)access);
	CHECK_OK(hsa_amd_agent_memory_pool_get_info(p->agent, pool,
						    HSA_AMD_AGENT_MEMORY_POOL_INFO_NUM_LINK_HOPS, &hops));
	CHECK(hops == 0, "%u link hops", hops);
	CHECK_ST(hsa_amd_memory_pool_get_info(pool, (hsa_amd_memory_pool_info_t)0x7777, &size),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	p->accessible += all;
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t check_isa(hsa_isa_t isa, void *data)
{
	uint32_t len = 0, wg = 0, count = 0, wave = 0;
	char name[128] = "";
	bool models[2] = { false, false };
	hsa_isa_t found = { 0 };

	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME_LENGTH, &len));
	CHECK(len > 1 && len <= sizeof(name), "name length %u", len);
	if (len > sizeof(name))
		return HSA_STATUS_SUCCESS;
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name));
	CHECK(strlen(name) + 1 == len, "NAME_LENGTH %u counts the NUL of \"%s\"", len, name);
	CHECK_OK(hsa_isa_from_name(name, &found));
	CHECK(found.handle == isa.handle, "hsa_isa_from_name(\"%s\") finds the ISA", name);
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_MACHINE_MODELS, models));
	CHECK(models[HSA_MACHINE_MODEL_LARGE], "the large model");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_WORKGROUP_MAX_SIZE, &wg));
	CHECK(wg == *(uint32_t *)data, "ISA and agent agree on the work-group maximum: %u", wg);
	CHECK_ST(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_CALL_CONVENTION_COUNT, &count),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_COUNT, 0, &count));
	CHECK(count == 1, "%u call conventions", count);
	CHECK_OK(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONT_SIZE, 0, &wave));
	CHECK(wave > 0, "wavefront size %u", wave);
	CHECK_ST(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONT_SIZE, 1, &wave),
		 HSA_STATUS_ERROR_INVALID_INDEX);
	return HSA_STATUS_SUCCESS;
}

static void agent_info(hsa_agent_t agent)
{
	char name[64], vendor[64], product[64], uuid[21];
	hsa_agent_feature_t feature;
	hsa_device_type_t type;
	uint32_t wave = 0, wg = 0, qmax = 0, qmin = 0, cus = 0, node = 99, waves = 0;
	uint16_t dim[3] = { 0, 0, 0 };
	hsa_dim3_t grid;
	hsa_isa_t isa;
	struct pools pools = { agent, 0, 0 };
	unsigned kernarg = 0;
	uint16_t mask = 1;

	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, name));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_VENDOR_NAME, vendor));
	CHECK_OK(hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_PRODUCT_NAME,
				    product));
	CHECK_OK(hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_UUID, uuid));
	CHECK(name[0] && vendor[0] && memchr(name, 0, 64), "name \"%.64s\", vendor \"%.64s\"",
	      name, vendor);
	CHECK(!strncmp(uuid, "CPU-", 4) || !strncmp(uuid, "GPU-", 4), "uuid %.21s", uuid);
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_FEATURE, &feature));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_WAVEFRONT_SIZE, &wave));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, &wg));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_WORKGROUP_MAX_DIM, dim));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_GRID_MAX_DIM, &grid));
	CHECK(wave > 0 && wg >= wave && dim[0] > 0 && dim[0] <= wg && grid.x >= dim[0],
	      "wavefront %u, work-group %u (x %u), grid x %u", wave, wg, dim[0], grid.x);
	CHECK_OK(hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT,
				    &cus));
	CHECK(cus > 0, "%u compute units", cus);
	CHECK_OK(hsa_agent_get_info(agent, (hsa_agent_info_t)HSA_AMD_AGENT_INFO_MAX_WAVES_PER_CU,
				    &waves));
	CHECK(waves > 0, "%u waves per compute unit", waves);
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_NODE, &node));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_ISA, &isa));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &qmin));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &qmax));
	if (feature & HSA_AGENT_FEATURE_KERNEL_DISPATCH) {
		hsa_queue_t *q = NULL;

		/* The limits are the queue create's: max works, twice max not. */
		CHECK(qmin >= 1 && qmax >= qmin && !(qmax & (qmax - 1)), "queue sizes %u..%u",
		      qmin, qmax);
		CHECK_OK(hsa_queue_create(agent, qmax, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
					  UINT32_MAX, &q));
		if (q)
			CHECK_OK(hsa_queue_destroy(q));
		if (qmax <= UINT32_MAX / 2)
			CHECK_ST(hsa_queue_create(agent, qmax * 2, HSA_QUEUE_TYPE_MULTI, NULL, NULL,
						  UINT32_MAX, UINT32_MAX, &q),
				 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	}
	CHECK_ST(hsa_agent_get_info(agent, (hsa_agent_info_t)0x7777, &wave),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);

	CHECK_OK(hsa_agent_iterate_regions(agent, count_region, &kernarg));
	CHECK(kernarg >= 1, "%s has a kernarg region", name);
	CHECK_OK(hsa_amd_agent_iterate_memory_pools(agent, check_pool, &pools));
	CHECK(pools.count >= 1 && pools.accessible >= 1, "%s: %u pools, %u open to all", name,
	      pools.count, pools.accessible);
	CHECK_OK(hsa_agent_iterate_isas(agent, check_isa, &wg));

	CHECK_OK(hsa_agent_get_exception_policies(agent, HSA_PROFILE_BASE, &mask));
	CHECK(mask == 0, "exception policies 0x%x", mask);
	CHECK_ST(hsa_agent_get_exception_policies(agent, (hsa_profile_t)7, &mask),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	printf("%s: %s %u CUs, wavefront %u, queues up to %u\n", name,
	       type == HSA_DEVICE_TYPE_CPU ? "CPU" : "GPU", cus, wave, qmax);
}

static void foreign_handles(hsa_agent_t agent)
{
	hsa_agent_t bad_agent = { agent.handle + 1 };
	hsa_region_t bad_region = { 0x1000 };
	hsa_amd_memory_pool_t bad_pool = { 0x1000 };
	hsa_isa_t bad_isa = { agent.handle + 8 }, isa;
	uint32_t v;

	CHECK_ST(hsa_agent_get_info(bad_agent, HSA_AGENT_INFO_NAME, &v),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_agent_get_info((hsa_agent_t){ 0 }, HSA_AGENT_INFO_NAME, &v),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_agent_iterate_regions(bad_agent, count_region, &v),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_amd_agent_iterate_memory_pools(bad_agent, check_pool, &v),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_agent_iterate_isas(bad_agent, check_isa, &v), HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_region_get_info(bad_region, HSA_REGION_INFO_SIZE, &v),
		 HSA_STATUS_ERROR_INVALID_REGION);
	CHECK_ST(hsa_amd_memory_pool_get_info(bad_pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &v),
		 HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
	CHECK_ST(hsa_amd_agent_memory_pool_get_info(agent, bad_pool,
						    HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &v),
		 HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
	CHECK_ST(hsa_isa_get_info_alt(bad_isa, HSA_ISA_INFO_NAME_LENGTH, &v),
		 HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_ST(hsa_isa_from_name("no-such-isa", &isa), HSA_STATUS_ERROR_INVALID_ISA_NAME);
	CHECK_ST(hsa_isa_from_name(NULL, &isa), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_iterate_agents(NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static void extensions(hsa_agent_t agent)
{
	const char *name = NULL;
	bool result = true;
	uint16_t minor = 0;
	char table[256];

	CHECK_OK(hsa_extension_get_name(HSA_EXTENSION_IMAGES, &name));
	CHECK(name && !strcmp(name, "HSA_EXTENSION_IMAGES"), "name %s", name ? name : "NULL");
	CHECK_OK(hsa_extension_get_name(HSA_EXTENSION_AMD_LOADER, &name));
	CHECK(name && !strcmp(name, "HSA_EXTENSION_AMD_LOADER"), "name %s", name ? name : "NULL");
	CHECK_ST(hsa_extension_get_name(0x100, &name), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_system_extension_supported(HSA_EXTENSION_FINALIZER, 1, 0, &result));
	CHECK(!result, "no finalizer");
	result = true;
	CHECK_OK(hsa_system_major_extension_supported(HSA_EXTENSION_IMAGES, 1, &minor, &result));
	CHECK(!result, "no images");
	result = true;
	CHECK_OK(hsa_agent_extension_supported(HSA_EXTENSION_AMD_PROFILER, agent, 1, 0, &result));
	CHECK(!result, "no AMD profiler extension");
	result = true;
	CHECK_OK(hsa_agent_major_extension_supported(HSA_EXTENSION_IMAGES, agent, 1, &minor,
						     &result));
	CHECK(!result, "no images on the agent");
	CHECK_ST(hsa_system_extension_supported(0x1ff, 1, 0, &result),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_agent_extension_supported(HSA_EXTENSION_IMAGES, (hsa_agent_t){ 0 }, 1, 0,
					       &result),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	/* No AMD loader table; the finalizer's is aql's functions (test hsa_conf_system). */
	CHECK_ST(hsa_system_get_extension_table(HSA_EXTENSION_AMD_LOADER, 1, 0, table),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_system_get_major_extension_table(HSA_EXTENSION_FINALIZER, 1, sizeof(table),
						      table));
}

int main(int argc, char **argv)
{
	struct agents agents = { .count = 0 };
	unsigned visited = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s LIBHSA\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	before_init();
	CHECK_OK(hsa_init());
	system_info();
	CHECK_OK(hsa_iterate_agents(collect, &agents));
	CHECK(agents.count >= 1, "%u agents", agents.count);
	/* A callback's status other than success ends the iteration and is returned. */
	CHECK_ST(hsa_iterate_agents(stop_at_first, &visited), HSA_STATUS_INFO_BREAK);
	CHECK(visited == 1, "iteration stops after %u agents", visited);
	for (unsigned i = 0; i < agents.count; i++)
		agent_info(agents.list[i]);
	if (agents.count) {
		uint32_t type;

		CHECK_OK(hsa_agent_get_info(agents.list[0], HSA_AGENT_INFO_DEVICE, &type));
		CHECK(type == HSA_DEVICE_TYPE_CPU, "the CPU agent comes first");
		foreign_handles(agents.list[0]);
		extensions(agents.list[0]);
	}
	CHECK_OK(hsa_shut_down());
	before_init();
	return ht_finish();
}
