/* SPDX-License-Identifier: MIT */
/*
 * Init and system queries as an HSA conformance program makes them, with
 * their error paths: every entry point refuses with NOT_INITIALIZED
 * before hsa_init (hsa_status_string too), the reference count, system
 * attributes that agree with each other, and the extension queries and
 * function tables (images and finalizer tables hold the library's own
 * functions; the AMD extensions have none). argv[1]: the library.
 */
#include <string.h>
#include <hsa/hsa_ext_finalize.h>
#include <hsa/hsa_ext_image.h>

#include "hsa_test.h"

static hsa_status_t count_agent(hsa_agent_t agent, void *data)
{
	(void)agent;
	++*(unsigned *)data;
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
	const char *s = NULL;
	uint16_t major = 0;
	unsigned n = 0;
	bool b;

	CHECK_ST(hsa_status_string(HSA_STATUS_SUCCESS, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_status_string(HSA_STATUS_ERROR, NULL), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_iterate_agents(count_agent, &n), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK(n == 0, "no agent is visited before hsa_init");
	CHECK_ST(hsa_system_extension_supported(HSA_EXTENSION_IMAGES, 1, 0, &b),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_extension_get_name(HSA_EXTENSION_IMAGES, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
}

static void system_info(void)
{
	uint16_t major = 0, minor = 0;
	uint64_t t0 = 0, t1 = 0, freq = 0, max_wait = 0;
	hsa_endianness_t endian;
	hsa_machine_model_t model;
	uint8_t ext[128];
	unsigned n = 0, first = 0;

	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MINOR, &minor));
	CHECK(major == 1 && minor >= 1, "HSA version %u.%u", major, minor);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t0));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t1));
	CHECK(freq >= 1000000 && t1 >= t0, "timestamps %llu then %llu at %llu Hz",
	      (unsigned long long)t0, (unsigned long long)t1, (unsigned long long)freq);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT, &max_wait));
	CHECK(max_wait > 0, "signal max wait %llu", (unsigned long long)max_wait);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_ENDIANNESS, &endian));
	CHECK(endian == HSA_ENDIANNESS_LITTLE, "endianness %d", (int)endian);
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_MACHINE_MODEL, &model));
	CHECK(model == HSA_MACHINE_MODEL_LARGE, "machine model %d", (int)model);
	memset(ext, 0xff, sizeof(ext));
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_EXTENSIONS, ext));
	/* Each extension the mask claims, hsa_system_extension_supported confirms. */
	for (uint16_t e = 0; e <= HSA_EXTENSION_STD_LAST; e++) {
		bool claimed = ext[e / 8] >> (e % 8) & 1, supported = true;

		CHECK_OK(hsa_system_extension_supported(e, 1, 0, &supported));
		CHECK(claimed == supported, "extension %u: mask %d, supported %d", e, claimed,
		      supported);
	}
	CHECK_ST(hsa_system_get_info((hsa_system_info_t)0x7777, &major),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_iterate_agents(count_agent, &n));
	CHECK(n >= 1, "%u agents", n);
	CHECK_ST(hsa_iterate_agents(stop_at_first, &first), HSA_STATUS_INFO_BREAK);
	CHECK(first == 1, "iteration stopped after %u agents", first);
	CHECK_ST(hsa_iterate_agents(NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static void extension_tables(void)
{
	hsa_ext_images_1_pfn_t images;
	hsa_ext_images_1_00_pfn_t images_100;
	hsa_ext_finalizer_1_00_pfn_t fin;
	hsa_ext_image_t image = { 0 };
	hsa_ext_program_t program = { 0 };
	const char *name = NULL;
	char loader[256];
	bool result = true;
	uint16_t minor = 0;

	memset(&images, 0, sizeof(images));
	CHECK_OK(hsa_system_get_major_extension_table(HSA_EXTENSION_IMAGES, 1, sizeof(images),
						      &images));
	CHECK(images.hsa_ext_image_create == hsa_ext_image_create &&
	      images.hsa_ext_image_create_with_layout == hsa_ext_image_create_with_layout &&
	      images.hsa_ext_sampler_destroy == hsa_ext_sampler_destroy,
	      "the images table holds the library's functions");
	/* A call through the table gets what a direct call gets. */
	if (images.hsa_ext_image_create)
		CHECK(images.hsa_ext_image_create(ht_cpu_agent(), NULL, NULL,
						  HSA_ACCESS_PERMISSION_RW, &image) ==
		      hsa_ext_image_create(ht_cpu_agent(), NULL, NULL, HSA_ACCESS_PERMISSION_RW,
					   &image), "same status through the table");
	/* The 1.0 form copies the 1.00 table only. */
	memset(&images, 0x5a, sizeof(images));
	CHECK_OK(hsa_system_get_extension_table(HSA_EXTENSION_IMAGES, 1, 0, &images));
	CHECK(images.hsa_ext_image_clear == hsa_ext_image_clear, "1.00 entries filled");
	memset(&images_100, 0, sizeof(images_100));
	memcpy(&images_100, &images, sizeof(images_100));
	CHECK(images_100.hsa_ext_sampler_destroy == hsa_ext_sampler_destroy, "last 1.00 entry");
	{
		const unsigned char *rest = (const unsigned char *)&images + sizeof(images_100);
		int untouched = 1;

		for (size_t i = 0; i < sizeof(images) - sizeof(images_100); i++)
			untouched &= rest[i] == 0x5a;
		CHECK(untouched, "nothing written past the 1.00 table");
	}
	/* table_length bounds the copy. */
	memset(&images, 0, sizeof(images));
	CHECK_OK(hsa_system_get_major_extension_table(HSA_EXTENSION_IMAGES, 1, sizeof(void *),
						      &images));
	CHECK(images.hsa_ext_image_get_capability && !images.hsa_ext_image_data_get_info,
	      "one entry copied for one pointer's length");
	CHECK_OK(hsa_system_get_extension_table(HSA_EXTENSION_FINALIZER, 1, 0, &fin));
	CHECK(fin.hsa_ext_program_create == hsa_ext_program_create &&
	      fin.hsa_ext_program_finalize == hsa_ext_program_finalize,
	      "the finalizer table holds the library's functions");
	CHECK(fin.hsa_ext_program_create(HSA_MACHINE_MODEL_LARGE, HSA_PROFILE_FULL,
					 HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL, &program) !=
	      HSA_STATUS_SUCCESS, "no finalizer behind the table");
	/* Error paths. */
	CHECK_ST(hsa_system_get_major_extension_table(HSA_EXTENSION_IMAGES, 2, sizeof(images),
						      &images), HSA_STATUS_ERROR);
	CHECK_ST(hsa_system_get_major_extension_table(HSA_EXTENSION_IMAGES, 1, 0, &images),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_system_get_major_extension_table(HSA_EXTENSION_IMAGES, 1, sizeof(images),
						      NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_system_get_extension_table(0x1ff, 1, 0, &images),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_system_get_extension_table(HSA_EXTENSION_AMD_LOADER, 1, 0, loader),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_extension_get_name(HSA_EXTENSION_FINALIZER, &name));
	CHECK(name && !strcmp(name, "HSA_EXTENSION_FINALIZER"), "%s", name ? name : "NULL");
	CHECK_ST(hsa_extension_get_name(HSA_EXTENSION_FINALIZER, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_system_major_extension_supported(HSA_EXTENSION_FINALIZER, 1, &minor, &result));
	CHECK(!result, "aql claims no finalizer");
	CHECK_ST(hsa_system_major_extension_supported(HSA_EXTENSION_FINALIZER, 1, NULL, &result),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static hsa_status_t on_event(const hsa_amd_event_t *event, void *data)
{
	(void)event, (void)data;
	return HSA_STATUS_SUCCESS;
}

/* The CPU agent's ticks are the system's nanoseconds. */
static void clocks_and_events(void)
{
	uint64_t now = 0, sys = 0;

	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &now));
	CHECK_OK(hsa_amd_profiling_convert_tick_to_system_domain(ht_cpu_agent(), now, &sys));
	CHECK(sys == now, "tick %llu became %llu", (unsigned long long)now,
	      (unsigned long long)sys);
	CHECK_ST(hsa_amd_profiling_convert_tick_to_system_domain(ht_cpu_agent(), now, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_amd_profiling_convert_tick_to_system_domain((hsa_agent_t){ 0 }, now, &sys),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_UNPROVIDED(hsa_amd_register_system_event_handler(on_event, NULL), HSA_STATUS_ERROR);
}

int main(int argc, char **argv)
{
	const char *s = NULL;

	if (argc < 2)
		return 2;
	ht_require_aql(argv[1]);
	before_init();
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_status_string(HSA_STATUS_INFO_BREAK, &s));
	CHECK(s && !strncmp(s, "HSA_STATUS_INFO_BREAK", 21), "%s", s ? s : "NULL");
	CHECK_ST(hsa_status_string((hsa_status_t)0x7777, &s), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	system_info();
	extension_tables();
	clocks_and_events();
	/* Nested: the runtime stays up until the last shut_down. */
	CHECK_OK(hsa_init());
	CHECK_OK(hsa_shut_down());
	CHECK_OK(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &(uint16_t){ 0 }));
	CHECK_OK(hsa_shut_down());
	CHECK_ST(hsa_status_string(HSA_STATUS_SUCCESS, &s), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
	return ht_finish();
}
