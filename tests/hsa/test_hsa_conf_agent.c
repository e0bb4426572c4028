/* SPDX-License-Identifier: MIT */
/*
 * Agents and ISAs as an HSA conformance program queries them, with their
 * error paths (HSA 1.2 section 2.3 and 2.8): every kernel agent, the CPU
 * agent included, has at least one ISA with a name and its attributes;
 * hsa_isa_from_name finds it by name; hsa_isa_get_info (the 1.0 form,
 * with a call convention index) and hsa_isa_get_info_alt agree; the
 * agent's queue limits are usable. argv[1]: the library.
 */
#include <stdlib.h>
#include <string.h>

#include "hsa_test.h"

struct isa_list {
	hsa_isa_t isa[8];
	unsigned n;
};

static hsa_status_t collect_isa(hsa_isa_t isa, void *data)
{
	struct isa_list *l = data;

	if (l->n < 8)
		l->isa[l->n] = isa;
	l->n++;
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t stop_isa(hsa_isa_t isa, void *data)
{
	(void)isa;
	++*(unsigned *)data;
	return HSA_STATUS_INFO_BREAK;
}

static hsa_status_t count_wavefront(hsa_wavefront_t w, void *data)
{
	uint32_t size = 0;

	CHECK_OK(hsa_wavefront_get_info(w, HSA_WAVEFRONT_INFO_SIZE, &size));
	CHECK(size >= 1, "wavefront size %u", size);
	++*(unsigned *)data;
	return HSA_STATUS_SUCCESS;
}

/* One ISA of agent, checked both ways against the agent's own attributes. */
static void check_isa(hsa_agent_t agent, hsa_isa_t isa)
{
	uint32_t len = 0, len_old = 0, count = 0, wave = 0, agent_wave = 0, waves_cu = 0;
	uint32_t wg_max = 0, agent_wg_max = 0, grid_max = 0, fbar = 0;
	uint16_t wg_dim[3], agent_wg_dim[3];
	hsa_dim3_t grid_dim;
	bool models[2] = { false, false }, profiles[2] = { false, false }, modes[3], f16;
	hsa_isa_t found = { 0 };
	unsigned wavefronts = 0;
	char *name;

	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME_LENGTH, &len));
	CHECK(len > 1 && len < 256, "name length %u", len);
	name = calloc(1, len + 1);
	if (!name)
		return;
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name));
	CHECK(strlen(name) + 1 == len, "\"%s\" has length %u with its NUL", name, len);
	/* <arch>-<vendor>-<os>-<environment>-<target>, as HSA and ROCr name ISAs. */
	CHECK(strstr(name, "--") && strchr(name, '-') != strstr(name, "--"), "ISA name \"%s\"", name);
	CHECK_OK(hsa_isa_from_name(name, &found));
	CHECK(found.handle == isa.handle, "hsa_isa_from_name(\"%s\")", name);
	/* The 1.0 form ignores the index for attributes other than call conventions. */
	CHECK_OK(hsa_isa_get_info(isa, HSA_ISA_INFO_NAME_LENGTH, 7, &len_old));
	CHECK(len_old == len, "1.0 form: name length %u", len_old);
	CHECK_OK(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_COUNT, 0, &count));
	CHECK(count >= 1, "%u call conventions", count);
	CHECK_OK(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONT_SIZE, 0, &wave));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_WAVEFRONT_SIZE, &agent_wave));
	CHECK(wave == agent_wave, "call convention wavefront %u, agent's %u", wave, agent_wave);
	CHECK_OK(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONTS_PER_COMPUTE_UNIT,
				  0, &waves_cu));
	CHECK(waves_cu >= 1, "%u wavefronts per compute unit", waves_cu);
	CHECK_ST(hsa_isa_get_info(isa, HSA_ISA_INFO_CALL_CONVENTION_INFO_WAVEFRONT_SIZE, count,
				  &wave), HSA_STATUS_ERROR_INVALID_INDEX);
	CHECK_ST(hsa_isa_get_info(isa, HSA_ISA_INFO_NAME_LENGTH, 0, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_isa_get_info(isa, (hsa_isa_info_t)0x7777, 0, &wave),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	/* _alt has no call conventions (HSA 1.1 removed them). */
	CHECK_ST(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_CALL_CONVENTION_COUNT, &count),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_MACHINE_MODELS, models));
	CHECK(models[HSA_MACHINE_MODEL_LARGE], "large machine model");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_PROFILES, profiles));
	CHECK(profiles[HSA_PROFILE_BASE] || profiles[HSA_PROFILE_FULL], "a profile");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_DEFAULT_FLOAT_ROUNDING_MODES, modes));
	CHECK(modes[HSA_DEFAULT_FLOAT_ROUNDING_MODE_NEAR] || modes[HSA_DEFAULT_FLOAT_ROUNDING_MODE_ZERO],
	      "a rounding mode");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_FAST_F16_OPERATION, &f16));
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_WORKGROUP_MAX_DIM, wg_dim));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_WORKGROUP_MAX_DIM, agent_wg_dim));
	CHECK(!memcmp(wg_dim, agent_wg_dim, sizeof(wg_dim)), "work-group dims agree");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_WORKGROUP_MAX_SIZE, &wg_max));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, &agent_wg_max));
	CHECK(wg_max == agent_wg_max && wg_max >= 1, "work-group max %u, agent's %u", wg_max,
	      agent_wg_max);
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_GRID_MAX_DIM, &grid_dim));
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_GRID_MAX_SIZE, &grid_max));
	CHECK(grid_dim.x >= 1 && grid_max >= 1, "grid limits");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_FBARRIER_MAX_SIZE, &fbar));
	CHECK_OK(hsa_isa_iterate_wavefronts(isa, count_wavefront, &wavefronts));
	CHECK(wavefronts >= 1, "%u wavefronts", wavefronts);
	CHECK_ST(hsa_isa_iterate_wavefronts(isa, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	free(name);
}

static hsa_status_t check_agent(hsa_agent_t agent, void *data)
{
	hsa_agent_feature_t feature = 0;
	hsa_device_type_t type;
	uint32_t qmax = 0, qmin = 0, qsize = 0;
	struct isa_list l = { .n = 0 };
	hsa_isa_t agent_isa = { 0 };
	unsigned visited = 0;

	++*(unsigned *)data;
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_FEATURE, &feature));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_QUEUES_MAX, &qmax));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &qmin));
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &qsize));
	if (!(feature & HSA_AGENT_FEATURE_KERNEL_DISPATCH))
		return HSA_STATUS_SUCCESS;
	/* A kernel agent: a finite queue count, usable sizes, an ISA. */
	CHECK(qmax >= 1 && qmax <= 1024, "QUEUES_MAX %u", qmax);
	CHECK(qmin >= 64 && !(qmin & (qmin - 1)) && qsize >= qmin && !(qsize & (qsize - 1)),
	      "queue sizes %u..%u", qmin, qsize);
	CHECK(!(qmax & (qmax - 1)) && qmax >= qmin, "QUEUES_MAX %u works as a queue size", qmax);
	CHECK_OK(hsa_agent_iterate_isas(agent, collect_isa, &l));
	CHECK(l.n >= 1, "device type %d: %u ISAs", (int)type, l.n);
	CHECK_OK(hsa_agent_get_info(agent, HSA_AGENT_INFO_ISA, &agent_isa));
	CHECK(l.n >= 1 && agent_isa.handle == l.isa[0].handle, "HSA_AGENT_INFO_ISA is the first");
	for (unsigned i = 0; i < l.n && i < 8; i++)
		check_isa(agent, l.isa[i]);
	CHECK_ST(hsa_agent_iterate_isas(agent, stop_isa, &visited), HSA_STATUS_INFO_BREAK);
	CHECK(visited == 1, "iteration stops at the callback's status");
	CHECK_ST(hsa_agent_iterate_isas(agent, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	return HSA_STATUS_SUCCESS;
}

static void cpu_agent_isa(void)
{
	hsa_agent_t cpu = ht_cpu_agent();
	hsa_isa_t isa = { 0 };
	char name[128] = "";

	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_ISA, &isa));
	CHECK(isa.handle != 0, "the CPU agent has an ISA");
	CHECK_OK(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name));
#if defined(__x86_64__)
	CHECK(!strncmp(name, "x86_64-", 7), "CPU ISA \"%s\" names the host triple", name);
#elif defined(__aarch64__)
	CHECK(!strncmp(name, "aarch64-", 8), "CPU ISA \"%s\" names the host triple", name);
#endif
}

static void error_paths(void)
{
	hsa_isa_t isa = { 0 }, bad = { 8 };
	bool compatible;
	uint32_t v;

	CHECK_ST(hsa_isa_from_name("amdgcn-amd-amdhsa--gfx000", &isa),
		 HSA_STATUS_ERROR_INVALID_ISA_NAME);
	CHECK_ST(hsa_isa_from_name("", &isa), HSA_STATUS_ERROR_INVALID_ISA_NAME);
	CHECK_ST(hsa_isa_from_name(NULL, &isa), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_agent_get_info(ht_cpu_agent(), HSA_AGENT_INFO_ISA, &isa));
	{
		char name[128] = "";

		hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME, name);
		CHECK_ST(hsa_isa_from_name(name, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	}
	CHECK_ST(hsa_isa_get_info_alt(bad, HSA_ISA_INFO_NAME_LENGTH, &v), HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_ST(hsa_isa_get_info_alt((hsa_isa_t){ 0 }, HSA_ISA_INFO_NAME_LENGTH, &v),
		 HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_ST(hsa_isa_get_info(bad, HSA_ISA_INFO_NAME_LENGTH, 0, &v), HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_ST(hsa_isa_get_info_alt(isa, HSA_ISA_INFO_NAME_LENGTH, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_isa_get_info_alt(isa, (hsa_isa_info_t)0x7777, &v),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_agent_iterate_isas((hsa_agent_t){ 0 }, collect_isa, NULL),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_isa_iterate_wavefronts(bad, count_wavefront, &v), HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_ST(hsa_wavefront_get_info((hsa_wavefront_t){ 8 }, HSA_WAVEFRONT_INFO_SIZE, &v),
		 HSA_STATUS_ERROR_INVALID_WAVEFRONT);
	CHECK_OK(hsa_isa_compatible(isa, isa, &compatible));
	CHECK(compatible, "an ISA is compatible with itself");
	CHECK_ST(hsa_isa_compatible(bad, isa, &compatible), HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_ST(hsa_agent_get_info((hsa_agent_t){ 0 }, HSA_AGENT_INFO_ISA, &isa),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_agent_get_info(ht_cpu_agent(), (hsa_agent_info_t)0x7777, &v),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static hsa_status_t no_cache(hsa_cache_t cache, void *data)
{
	(void)cache;
	++*(unsigned *)data;
	return HSA_STATUS_SUCCESS;
}

/* What aql does not provide fails with the code docs/hsa.md gives, saying so. */
static void not_provided(void)
{
	hsa_amd_coherency_type_t type;
	unsigned caches = 0;

	CHECK_UNPROVIDED(hsa_agent_iterate_caches(ht_cpu_agent(), no_cache, &caches),
			 HSA_STATUS_ERROR);
	CHECK(caches == 0, "no cache was reported by a call that failed");
	CHECK_UNPROVIDED(hsa_amd_coherency_get_type(ht_cpu_agent(), &type), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_coherency_set_type(ht_cpu_agent(), HSA_AMD_COHERENCY_TYPE_COHERENT),
			 HSA_STATUS_ERROR);
}

int main(int argc, char **argv)
{
	hsa_isa_t isa;
	unsigned agents = 0;

	if (argc < 2)
		return 2;
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_isa_from_name("x", &isa), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_iterate_agents(check_agent, &agents));
	CHECK(agents >= 1, "%u agents", agents);
	cpu_agent_isa();
	error_paths();
	not_provided();
	CHECK_OK(hsa_shut_down());
	CHECK_ST(hsa_agent_iterate_isas((hsa_agent_t){ 1 }, collect_isa, NULL),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	return ht_finish();
}
