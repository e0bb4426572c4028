/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for offload bundles: open whatever bytes arrive (plain,
 * compressed or one or several inside an ELF's .hip_fatbin), walk every
 * entry, select for a few agents in every part, close. Build and run:
 *
 *   clang-14 -fsanitize=fuzzer,address,undefined -Iinclude -I. \
 *     fuzz/fuzz_bundle.c loader/bundle.c loader/target.c util/error.c \
 *     -lelf -lz -lzstd -o /tmp/fb
 *   mkdir -p /tmp/fb-new && /tmp/fb -runs=20000 /tmp/fb-new fuzz/corpus/bundle
 *
 * (libFuzzer adds new inputs to its first directory; keep the seeds clean.)
 */
#include <stdlib.h>
#include <string.h>

#include <aql/bundle.h>

static const char *const agents[] = {
	"gfx90a:sramecc+:xnack-", "gfx906:sramecc-:xnack+", "gfx1100", "gfx942", "gfx1036",
	"gfx803",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* An exact-size copy: reads past size must land in the redzone. */
	uint8_t *p = malloc(size ? size : 1);
	volatile uint8_t sink = 0;
	aql_bundle *b = NULL;

	if (!p)
		return 0;
	memcpy(p, data, size);
	(void)aql_bundle_is_bundle(p, size);
	if (aql_bundle_open(p, size, &b) == AQL_OK) {
		for (uint32_t i = 0; i < aql_bundle_count(b); i++) {
			const aql_bundle_entry *e = aql_bundle_get(b, i);
			char buf[64];

			/* Touch the first and last byte and the whole id. */
			if (e->size)
				sink ^= ((const uint8_t *)e->data)[0] ^
					((const uint8_t *)e->data)[e->size - 1];
			sink ^= (uint8_t)strlen(e->id);
			if (e->is_amdgcn)
				aql_target_format(&e->target, buf, sizeof(buf));
		}
		for (size_t i = 0; i < sizeof(agents) / sizeof(agents[0]); i++) {
			const aql_bundle_entry *e;
			aql_target_id agent;

			if (aql_target_parse(agents[i], &agent) != AQL_OK)
				continue;
			for (uint32_t part = 0; part < aql_bundle_part_count(b); part++)
				if (aql_bundle_select_part(b, part, &agent, &e) == AQL_OK)
					sink ^= (uint8_t)e->size;
		}
		aql_bundle_close(b);
	}
	(void)sink;
	free(p);
	return 0;
}
