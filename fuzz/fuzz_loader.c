/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: open arbitrary bytes as a code object and load them
 * on the CPU agent, walking everything the loader reports each time. Any
 * crash, leak or out-of-bounds read is a loader bug. Opening reaches the
 * readers of images the CPU agent does not run (PTX, cubins, fatbins).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <aql/aql.h>
#include <aql/code_object.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const aql_code_object *co)
{
	const aql_code_object_info *info = aql_code_object_get_info(co);
	volatile size_t sink = 0;

	for (uint32_t i = 0; i < info->kernel_count; i++) {
		const aql_kernel *k = &info->kernels[i];
		const aql_kernel_metadata *md = k->metadata;

		sink += strlen(k->name) + strlen(md->symbol);
		for (uint32_t a = 0; a < md->arg_count; a++)
			sink += (md->args[a].name ? strlen(md->args[a].name) : 0) +
				(md->args[a].type_name ? strlen(md->args[a].type_name) : 0);
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const aql_symbol_binding syms[] = { { "ext_sym", 0x1000 },
						   { "ext_sym2", 0x2000 } };
	const aql_load_options opts = { syms, 2 };
	aql_code_object *co;
	aql_agent *agent;

	if (aql_code_object_open(data, size, &co) == AQL_OK) {
		walk(co);
		aql_code_object_destroy(co);
	}
	if (aql_agent_default(&agent) != AQL_OK)
		return 0;
	if (aql_code_object_load(agent, data, size, &opts, &co) != AQL_OK)
		return 0;
	walk(co);
	aql_code_object_destroy(co);
	return 0;
}
