/* SPDX-License-Identifier: MIT */
/*
 * Code object readers and executables through the HSA API: readers from
 * a file and from memory, loading, freezing, symbol lookup and every
 * symbol attribute of a kernel, iteration, and the error paths (bad
 * files, handles and code objects, an unfrozen executable, loading into a
 * frozen one), and a global variable's symbol. argv[1]: the library;
 * argv[2]: saxpy's host build; argv[3]: variable_kernel.c's.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hsa_test.h"

static void readers(const char *path, const void *image, size_t size)
{
	hsa_code_object_reader_t r;
	int fd = open(path, O_RDONLY);

	CHECK_OK(hsa_code_object_reader_create_from_file(fd, &r));
	CHECK_OK(hsa_code_object_reader_destroy(r));
	CHECK_ST(hsa_code_object_reader_destroy(r), HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
	CHECK_ST(hsa_code_object_reader_create_from_file(fd, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	close(fd);
	CHECK_ST(hsa_code_object_reader_create_from_file(-1, &r), HSA_STATUS_ERROR_INVALID_FILE);
	CHECK_ST(hsa_code_object_reader_create_from_file(fd, &r), HSA_STATUS_ERROR_INVALID_FILE);
	CHECK_ST(hsa_code_object_reader_create_from_memory(NULL, size, &r),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_code_object_reader_create_from_memory(image, 0, &r),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

struct seen {
	unsigned count, saxpy;
	hsa_agent_t agent;
};

static hsa_status_t on_symbol(hsa_executable_t exec, hsa_executable_symbol_t symbol, void *data)
{
	struct seen *s = data;
	char name[64] = { 0 };
	uint32_t len = 0;

	(void)exec;
	s->count++;
	if (hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME_LENGTH, &len) ==
		    HSA_STATUS_SUCCESS && len < sizeof(name) &&
	    hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_NAME, name) ==
		    HSA_STATUS_SUCCESS && !strcmp(name, "saxpy.kd"))
		s->saxpy++;
	return HSA_STATUS_SUCCESS;
}

static hsa_status_t on_agent_symbol(hsa_executable_t exec, hsa_agent_t agent,
				    hsa_executable_symbol_t symbol, void *data)
{
	struct seen *s = data;

	CHECK(agent.handle == s->agent.handle, "the symbol's agent");
	return on_symbol(exec, symbol, data);
}

static hsa_status_t stop_at_first(hsa_executable_t exec, hsa_executable_symbol_t symbol, void *data)
{
	(void)exec, (void)symbol;
	++*(unsigned *)data;
	return HSA_STATUS_INFO_BREAK;
}

static void symbol_info(hsa_executable_symbol_t sym, hsa_agent_t cpu)
{
	hsa_symbol_kind_t kind = HSA_SYMBOL_KIND_VARIABLE;
	hsa_agent_t agent = { 0 };
	uint64_t object = 0;
	uint32_t kernarg = 0, align = 0, group = 1, priv = 1;
	bool dynamic = true, definition = false;

	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind));
	CHECK(kind == HSA_SYMBOL_KIND_KERNEL, "kind %d", kind);
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_AGENT, &agent));
	CHECK(agent.handle == cpu.handle, "agent");
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &object));
	CHECK(object != 0, "kernel object");
	CHECK_OK(hsa_executable_symbol_get_info(sym,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &kernarg));
	/* float, two pointers, uint32_t: 28 bytes at least. */
	CHECK(kernarg >= 28, "kernarg size %u", kernarg);
	CHECK_OK(hsa_executable_symbol_get_info(sym,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT, &align));
	CHECK(align >= 16 && !(align & (align - 1)), "kernarg alignment %u", align);
	CHECK_OK(hsa_executable_symbol_get_info(sym,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &group));
	CHECK(group == 0, "saxpy uses no LDS: %u", group);
	CHECK_OK(hsa_executable_symbol_get_info(sym,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &priv));
	CHECK_OK(hsa_executable_symbol_get_info(sym,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK, &dynamic));
	CHECK(!dynamic, "no dynamic call stack");
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_IS_DEFINITION,
						&definition));
	CHECK(definition, "a definition");
	CHECK_ST(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
						&object), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
}

static void executables(hsa_agent_t cpu, const void *image, size_t size)
{
	static const char junk[256] = "\177ELF but nothing else";
	hsa_code_object_reader_t r, bad;
	hsa_executable_t e;
	hsa_executable_symbol_t sym;
	hsa_executable_state_t state;
	hsa_loaded_code_object_t loaded = { 0 };
	struct seen seen = { 0, 0, cpu };
	unsigned calls = 0;
	uint32_t result = 1;

	CHECK_OK(hsa_code_object_reader_create_from_memory(image, size, &r));
	CHECK_OK(hsa_code_object_reader_create_from_memory(junk, sizeof(junk), &bad));
	CHECK_ST(hsa_executable_create_alt(7, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT, NULL, &e),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					   NULL, &e));
	CHECK_ST(hsa_executable_load_agent_code_object(e, cpu, bad, NULL, NULL),
		 HSA_STATUS_ERROR_INVALID_CODE_OBJECT);
	CHECK_ST(hsa_executable_load_agent_code_object(e, (hsa_agent_t){ 2 }, r, NULL, NULL),
		 HSA_STATUS_ERROR_INVALID_AGENT);
	CHECK_ST(hsa_executable_load_agent_code_object(e, cpu, (hsa_code_object_reader_t){ 2 },
						       NULL, NULL),
		 HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER);
	CHECK_OK(hsa_executable_load_agent_code_object(e, cpu, r, NULL, &loaded));
	CHECK(loaded.handle != 0, "loaded code object");

	/* Unfrozen: no symbols yet. */
	CHECK_OK(hsa_executable_get_info(e, HSA_EXECUTABLE_INFO_STATE, &state));
	CHECK(state == HSA_EXECUTABLE_STATE_UNFROZEN, "unfrozen");
	CHECK_ST(hsa_executable_get_symbol_by_name(e, "saxpy.kd", &cpu, &sym),
		 HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);

	CHECK_OK(hsa_executable_freeze(e, NULL));
	CHECK_ST(hsa_executable_freeze(e, NULL), HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
	CHECK_ST(hsa_executable_load_agent_code_object(e, cpu, r, NULL, NULL),
		 HSA_STATUS_ERROR_FROZEN_EXECUTABLE);
	CHECK_OK(hsa_executable_get_info(e, HSA_EXECUTABLE_INFO_STATE, &state));
	CHECK(state == HSA_EXECUTABLE_STATE_FROZEN, "frozen");
	CHECK_OK(hsa_executable_validate_alt(e, NULL, &result));
	CHECK(result == 0, "valid");

	CHECK_OK(hsa_executable_get_symbol_by_name(e, "saxpy.kd", &cpu, &sym));
	symbol_info(sym, cpu);
	CHECK_OK(hsa_executable_get_symbol_by_name(e, "saxpy.kd", NULL, &sym));
	CHECK_ST(hsa_executable_get_symbol_by_name(e, "nosuch.kd", &cpu, &sym),
		 HSA_STATUS_ERROR_INVALID_SYMBOL_NAME);
	CHECK_ST(hsa_executable_get_symbol_by_name(e, NULL, &cpu, &sym),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);

	CHECK_OK(hsa_executable_iterate_symbols(e, on_symbol, &seen));
	CHECK(seen.count >= 1 && seen.saxpy == 1, "%u symbols, saxpy.kd %u times", seen.count,
	      seen.saxpy);
	seen.count = seen.saxpy = 0;
	CHECK_OK(hsa_executable_iterate_agent_symbols(e, cpu, on_agent_symbol, &seen));
	CHECK(seen.saxpy == 1, "saxpy.kd for the CPU agent");
	CHECK(hsa_executable_iterate_symbols(e, stop_at_first, &calls) == HSA_STATUS_INFO_BREAK &&
	      calls == 1, "iteration stops at the callback's status");
	calls = 0;
	CHECK_OK(hsa_executable_iterate_program_symbols(e, stop_at_first, &calls));
	CHECK(calls == 0, "no program symbols");

	CHECK_OK(hsa_executable_destroy(e));
	CHECK_ST(hsa_executable_destroy(e), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
	CHECK_ST(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &state),
		 HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL);
	CHECK_ST(hsa_executable_freeze(e, NULL), HSA_STATUS_ERROR_INVALID_EXECUTABLE);
	CHECK_OK(hsa_code_object_reader_destroy(r));
	CHECK_OK(hsa_code_object_reader_destroy(bad));
}

/* "answer", a uint32_t of 42, found by name but not listed. */
static void variables(hsa_agent_t cpu, const void *image, size_t size)
{
	hsa_code_object_reader_t r;
	hsa_executable_t e;
	hsa_executable_symbol_t sym;
	hsa_symbol_kind_t kind = HSA_SYMBOL_KIND_KERNEL;
	hsa_variable_segment_t segment = HSA_VARIABLE_SEGMENT_READONLY;
	uint64_t address = 0, object;
	uint32_t var_size = 0;
	struct seen seen = { 0, 0, cpu };

	CHECK_OK(hsa_code_object_reader_create_from_memory(image, size, &r));
	CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					   NULL, &e));
	CHECK_OK(hsa_executable_load_agent_code_object(e, cpu, r, NULL, NULL));
	CHECK_OK(hsa_executable_freeze(e, NULL));
	CHECK_OK(hsa_executable_get_symbol_by_name(e, "answer", &cpu, &sym));
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_TYPE, &kind));
	CHECK(kind == HSA_SYMBOL_KIND_VARIABLE, "kind %d", kind);
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
						&address));
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE,
						&var_size));
	CHECK(address && var_size == 4 && *(const uint32_t *)(uintptr_t)address == 42,
	      "answer at 0x%llx, %u bytes", (unsigned long long)address, var_size);
	CHECK_OK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SEGMENT,
						&segment));
	CHECK(segment == HSA_VARIABLE_SEGMENT_GLOBAL, "segment %d", segment);
	CHECK_ST(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
						&object), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	/* libaql names a code object's kernels only, so only they are listed. */
	CHECK_OK(hsa_executable_iterate_symbols(e, on_symbol, &seen));
	CHECK(seen.count == 1, "%u symbols listed", seen.count);
	CHECK_OK(hsa_executable_destroy(e));
	CHECK_OK(hsa_code_object_reader_destroy(r));
}

int main(int argc, char **argv)
{
	hsa_executable_t e;
	size_t size = 0, var_size = 0;
	void *image, *var_image;

	if (argc < 4) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1 saxpy.host.so variable.host.so\n",
			argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	image = ht_read_file(argv[2], &size);
	var_image = ht_read_file(argv[3], &var_size);
	CHECK(image && var_image, "read %s and %s", argv[2], argv[3]);
	CHECK_ST(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					   NULL, &e), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	if (image) {
		readers(argv[2], image, size);
		executables(ht_cpu_agent(), image, size);
	}
	if (var_image)
		variables(ht_cpu_agent(), var_image, var_size);
	CHECK_OK(hsa_shut_down());
	free(image);
	free(var_image);
	return ht_finish();
}
