/* SPDX-License-Identifier: MIT */
/*
 * Executables as an HSA conformance program builds them, with their
 * error paths: the HSA 1.0 forms (hsa_executable_create,
 * hsa_executable_get_symbol with a module name) beside the 1.1 ones,
 * one code object loaded into several executables at once from several
 * threads, the kernel's symbol in each with its own address, lookups in
 * an unfrozen or destroyed executable, and the HSA 1.0 code objects aql
 * does not provide. argv[1]: the library; argv[2]: saxpy's host build.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hsa_test.h"

#define THREADS 4

static void *image;
static size_t image_size;
static hsa_agent_t cpu;

struct loader {
	uint64_t kernel_object;
	unsigned failed;
};

/* Reader, executable (1.0 form), load, freeze, symbol, destroy: all on this thread. */
static void *load_one(void *arg)
{
	struct loader *l = arg;
	hsa_code_object_reader_t r;
	hsa_executable_t e;
	hsa_executable_symbol_t sym;

	for (int round = 0; round < 10; round++) {
		l->failed += hsa_code_object_reader_create_from_memory(image, image_size, &r) !=
			     HSA_STATUS_SUCCESS;
		l->failed += hsa_executable_create(HSA_PROFILE_FULL, HSA_EXECUTABLE_STATE_UNFROZEN,
						   NULL, &e) != HSA_STATUS_SUCCESS;
		l->failed += hsa_executable_load_agent_code_object(e, cpu, r, NULL, NULL) !=
			     HSA_STATUS_SUCCESS;
		l->failed += hsa_executable_freeze(e, NULL) != HSA_STATUS_SUCCESS;
		/* 1.0 lookup: a module name (ignored for program-less code) and the agent. */
		if (hsa_executable_get_symbol(e, NULL, "saxpy.kd", cpu, 0, &sym) ==
		    HSA_STATUS_SUCCESS)
			l->failed += hsa_executable_symbol_get_info(
				sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &l->kernel_object) !=
				HSA_STATUS_SUCCESS || !l->kernel_object;
		else
			l->failed++;
		l->failed += hsa_executable_destroy(e) != HSA_STATUS_SUCCESS;
		l->failed += hsa_code_object_reader_destroy(r) != HSA_STATUS_SUCCESS;
	}
	return NULL;
}

static void concurrent_loads(void)
{
	struct loader l[THREADS] = { { 0, 0 } };
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, load_one, &l[i]);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK(l[i].failed == 0, "loader %d: %u calls failed", i, l[i].failed);
	}
}

/* Two live executables of one code object: two kernel objects. */
static void two_executables(void)
{
	hsa_code_object_reader_t r;
	hsa_executable_t e[2];
	hsa_executable_symbol_t sym;
	uint64_t ko[2] = { 0, 0 };
	hsa_executable_state_t state;

	CHECK_OK(hsa_code_object_reader_create_from_memory(image, image_size, &r));
	for (int i = 0; i < 2; i++) {
		CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL,
						   HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL,
						   &e[i]));
		CHECK_OK(hsa_executable_load_agent_code_object(e[i], cpu, r, NULL, NULL));
		/* Not frozen: no symbols yet. */
		CHECK(hsa_executable_get_symbol_by_name(e[i], "saxpy.kd", &cpu, &sym) !=
		      HSA_STATUS_SUCCESS, "an unfrozen executable has no symbols");
		CHECK_OK(hsa_executable_get_info(e[i], HSA_EXECUTABLE_INFO_STATE, &state));
		CHECK(state == HSA_EXECUTABLE_STATE_UNFROZEN, "state %d", (int)state);
		CHECK_OK(hsa_executable_freeze(e[i], NULL));
		CHECK_OK(hsa_executable_get_symbol_by_name(e[i], "saxpy.kd", &cpu, &sym));
		CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
							&ko[i]));
	}
	CHECK(ko[0] && ko[1] && ko[0] != ko[1], "kernel objects 0x%llx and 0x%llx",
	      (unsigned long long)ko[0], (unsigned long long)ko[1]);
	CHECK_ST(hsa_executable_get_symbol_by_name(e[0], "no_such_kernel.kd", &cpu, &sym),
		 HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);
	CHECK_ST(hsa_executable_load_agent_code_object(e[0], cpu, r, NULL, NULL),
		 HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
	for (int i = 0; i < 2; i++)
		CHECK_OK(hsa_executable_destroy(e[i]));
	CHECK_ST(hsa_executable_destroy(e[0]), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
	CHECK_ST(hsa_executable_get_symbol(e[0], NULL, "saxpy.kd", cpu, 0, &sym),
		 HSA_STATUS_ERROR_INVALID_EXECUTABLE);
	CHECK_OK(hsa_code_object_reader_destroy(r));
}

/* HSA 1.0 code objects (serialized, with their own symbols) are not provided. */
static void code_objects_1_0(void)
{
	hsa_code_object_t co = { 0 };
	hsa_code_symbol_t sym;
	hsa_executable_t e;
	void *out = NULL;
	size_t out_size = 0;
	uint32_t v;

	CHECK_OK(hsa_executable_create(HSA_PROFILE_FULL, HSA_EXECUTABLE_STATE_UNFROZEN, NULL, &e));
	CHECK(hsa_code_object_deserialize(image, image_size, NULL, &co) != HSA_STATUS_SUCCESS,
	      "no 1.0 code object is made");
	CHECK(hsa_executable_load_code_object(e, cpu, co, NULL) != HSA_STATUS_SUCCESS,
	      "no 1.0 code object is loaded");
	CHECK(hsa_code_object_serialize(co, NULL, (hsa_callback_data_t){ 0 }, NULL, &out, &out_size) !=
	      HSA_STATUS_SUCCESS, "serialize");
	CHECK(hsa_code_object_get_info(co, HSA_CODE_OBJECT_INFO_VERSION, &v) != HSA_STATUS_SUCCESS,
	      "get_info");
	CHECK(hsa_code_object_get_symbol(co, "saxpy", &sym) != HSA_STATUS_SUCCESS, "get_symbol");
	CHECK(hsa_code_object_get_symbol_from_name(co, NULL, "saxpy", &sym) != HSA_STATUS_SUCCESS,
	      "get_symbol_from_name");
	CHECK(hsa_code_symbol_get_info(sym, HSA_CODE_SYMBOL_INFO_TYPE, &v) != HSA_STATUS_SUCCESS,
	      "code symbol info");
	CHECK_OK(hsa_executable_destroy(e));
}

int main(int argc, char **argv)
{
	hsa_executable_t e;

	if (argc < 3)
		return 2;
	ht_require_aql(argv[1]);
	image = ht_read_file(argv[2], &image_size);
	CHECK(image != NULL, "read %s", argv[2]);
	if (!image)
		return ht_finish();
	CHECK_ST(hsa_executable_create(HSA_PROFILE_FULL, HSA_EXECUTABLE_STATE_UNFROZEN, NULL, &e),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	cpu = ht_cpu_agent();
	concurrent_loads();
	two_executables();
	code_objects_1_0();
	CHECK_ST(hsa_executable_create(HSA_PROFILE_FULL, HSA_EXECUTABLE_STATE_UNFROZEN, NULL, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_shut_down());
	free(image);
	return ht_finish();
}
