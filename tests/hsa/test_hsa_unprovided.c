/* SPDX-License-Identifier: MIT */
/*
 * Functions aql does not provide: each refuses before hsa_init like the
 * rest, then returns the specification's code for its case with a text
 * that says what is not provided, and never success. Also the wavefront
 * and ISA-compatibility calls, which are provided. argv[1]: the library.
 */
#include <string.h>
#include <hsa/hsa_ext_finalize.h>
#include <hsa/hsa_ext_image.h>

#include "hsa_test.h"

/* st is want, and hsa_status_string says "not provided". */
static void unprovided(hsa_status_t st, hsa_status_t want, const char *name)
{
	const char *text = NULL;

	CHECK(st == want, "%s: 0x%x, want 0x%x", name, (unsigned)st, (unsigned)want);
	CHECK(hsa_status_string(st, &text) == HSA_STATUS_SUCCESS && text &&
	      strstr(text, name) && strstr(text, "not provided"),
	      "%s: %s", name, text ? text : "NULL");
}

static hsa_status_t first_wavefront(hsa_wavefront_t wavefront, void *data)
{
	*(hsa_wavefront_t *)data = wavefront;
	return HSA_STATUS_SUCCESS;
}

/* One wavefront per ISA, of the agent's wavefront size. */
static void wavefronts(hsa_agent_t cpu)
{
	hsa_isa_t isa = { 0 };
	hsa_wavefront_t wf = { 0 };
	uint32_t agent_size = 0, size = 0;
	bool compatible = false;

	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_ISA, &isa));
	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_WAVEFRONT_SIZE, &agent_size));
	CHECK_OK(hsa_isa_iterate_wavefronts(isa, first_wavefront, &wf));
	CHECK_OK(hsa_wavefront_get_info(wf, HSA_WAVEFRONT_INFO_SIZE, &size));
	CHECK(size == agent_size && size != 0, "wavefront size %u, agent's %u", size, agent_size);
	CHECK_ST(hsa_wavefront_get_info((hsa_wavefront_t){ 12 }, HSA_WAVEFRONT_INFO_SIZE, &size),
		 HSA_STATUS_ERROR_INVALID_WAVEFRONT);
	CHECK_ST(hsa_isa_iterate_wavefronts(isa, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_isa_iterate_wavefronts((hsa_isa_t){ 12 }, first_wavefront, &wf),
		 HSA_STATUS_ERROR_INVALID_ISA);
	CHECK_OK(hsa_isa_compatible(isa, isa, &compatible));
	CHECK(compatible, "an ISA is compatible with itself");
	CHECK_ST(hsa_isa_compatible(isa, (hsa_isa_t){ 12 }, &compatible),
		 HSA_STATUS_ERROR_INVALID_ISA);
}

int main(int argc, char **argv)
{
	hsa_agent_t cpu;
	hsa_ext_image_t image;
	hsa_ext_image_descriptor_t desc = { 0 };
	hsa_code_object_t co = { 1 };
	hsa_cache_t cache = { 1 };
	hsa_code_object_reader_t reader = { 1 };
	hsa_executable_t exec;
	hsa_ext_program_t program = { 1 };
	size_t size;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_code_object_destroy(co), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_amd_memory_async_copy(&size, (hsa_agent_t){ 1 }, &size, (hsa_agent_t){ 1 },
					   sizeof(size), 0, NULL, (hsa_signal_t){ 0 }),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	cpu = ht_cpu_agent();

	unprovided(hsa_ext_image_create(cpu, &desc, &size, HSA_ACCESS_PERMISSION_RW, &image),
		   HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_create");
	unprovided(hsa_code_object_destroy(co), HSA_STATUS_ERROR_INVALID_CODE_OBJECT,
		   "hsa_code_object_destroy");
	unprovided(hsa_cache_get_info(cache, HSA_CACHE_INFO_SIZE, &size),
		   HSA_STATUS_ERROR_INVALID_CACHE, "hsa_cache_get_info");
	unprovided(hsa_ext_program_destroy(program),
		   (hsa_status_t)HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "hsa_ext_program_destroy");
	unprovided(hsa_amd_memory_async_copy(&size, cpu, &image, cpu, sizeof(size), 0, NULL,
					     (hsa_signal_t){ 0 }),
		   HSA_STATUS_ERROR, "hsa_amd_memory_async_copy");
	CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					   NULL, &exec));
	unprovided(hsa_executable_load_program_code_object(exec, reader, NULL, NULL),
		   HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, "hsa_executable_load_program_code_object");
	CHECK_OK(hsa_executable_destroy(exec));

	wavefronts(cpu);
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
