/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the NT_AMDGPU_METADATA parser: parse whatever bytes
 * arrive, check what a successful parse promises, deep-copy it, free both.
 * Build and run:
 *
 *   clang-14 -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *     fuzz/fuzz_metadata.c loader/msgpack.c loader/metadata.c loader/type.c \
 *     util/error.c -o /tmp/fm
 *   mkdir -p /tmp/fm-new && /tmp/fm -runs=20000 /tmp/fm-new fuzz/corpus/metadata
 *
 * The seeds are notes of the code objects tests/co builds, written by
 * `test_metadata --dump-notes DIR ...`.
 */
#include <stdlib.h>
#include <string.h>

#include <aql/metadata.h>

/* The copy round trip needs the internal header (the source root on -I). */
#if defined(__has_include)
#if __has_include("loader/metadata_impl.h")
#include "loader/metadata_impl.h"
#define FUZZ_COPY 1
#endif
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t touch(const char *s)
{
	return s ? strlen(s) : 0;
}

/* What aql_metadata_parse() promises about a result; abort() if broken. */
static size_t walk(const aql_metadata *md)
{
	size_t sum = touch(md->target);

	for (uint32_t i = 0; i < md->printf_count; i++)
		sum += touch(md->printf_formats[i]);
	for (uint32_t i = 0; i < md->kernel_count; i++) {
		const aql_kernel_metadata *k = &md->kernels[i];

		if (!k->name || !k->symbol || (k->arg_count && !k->args))
			abort();
		if (k->kernarg_segment_align & (k->kernarg_segment_align - 1))
			abort();
		sum += touch(k->name) + touch(k->symbol) + touch(k->language);
		for (uint32_t j = 0; j < k->arg_count; j++) {
			const aql_kernel_arg *a = &k->args[j];

			if ((uint64_t)a->offset + a->size > k->kernarg_segment_size)
				abort();
			sum += touch(a->name) + touch(a->type_name);
			sum += touch(aql_arg_kind_name(a->kind)) +
			       touch(aql_address_space_name(a->address_space)) +
			       touch(aql_access_name(a->access)) +
			       touch(aql_access_name(a->actual_access));
		}
	}
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: reads past size must land in the redzone. */
	uint8_t *p = malloc(size ? size : 1);
	aql_metadata *md = NULL, *copy = NULL;

	if (!p)
		return 0;
	memcpy(p, data, size);
	if (aql_metadata_parse(p, size, &md) == AQL_OK) {
		size_t sum = walk(md);

#ifdef FUZZ_COPY
		if (aql_metadata_copy(md, &copy) == AQL_OK) {
			if (walk(copy) != sum || copy->kernel_count != md->kernel_count)
				abort();
			aql_metadata_free(copy);
		}
#endif
		(void)sum;
		(void)copy;
		aql_metadata_free(md);
	} else if (md) {
		abort();	/* a failure leaves *out NULL */
	}
	free(p);
	return 0;
}
