/* SPDX-License-Identifier: MIT */
/*
 * Dynamic LDS next to static LDS: each work-group reverses its slice of
 * the input through dynamic LDS, while a 260-byte static array (not a
 * multiple of 16) holds a tag per work-item that must survive: dynamic
 * LDS overlapping static LDS breaks one or the other. Work-item 0 also
 * reports what it saw: status[1] the dynamic LDS size, status[2] the
 * distance from the static LDS to the dynamic LDS; status[0] counts
 * errors.
 */
#include <aql/kernel.h>

#define DYNLDS_MAX_WG 64

struct dynlds_static {
	uint32_t tag[DYNLDS_MAX_WG + 1];
};

AQL_KERNEL_LDS(dynlds, struct dynlds_static, (aql_global const uint32_t *, in),
	       (aql_global uint32_t *, out), (uint32_t, n), (aql_global uint32_t *, status))
{
	aql_local uint32_t *dyn = (aql_local uint32_t *)aql_dynamic_lds();
	uint32_t l = aql_local_id(0), size = aql_local_size(0), i = aql_global_id(0);

	if (l == 0 && (aql_dynamic_lds_size() < size * sizeof(uint32_t) ||
		       (uintptr_t)dyn % AQL_DYNAMIC_LDS_ALIGN != 0))
		aql_atomic_add_u32(&status[0], 1, AQL_RELAXED);
	if (i == 0) {
		status[1] = aql_dynamic_lds_size();
		status[2] = (uint32_t)((uintptr_t)dyn - (uintptr_t)lds);
	}
	lds->tag[l] = 0xa5000000u | i;
	dyn[l] = i < n ? in[i] : 0;
	aql_barrier();
	if (i < n)
		out[i] = dyn[size - 1 - l];
	if (lds->tag[l] != (0xa5000000u | i))
		aql_atomic_add_u32(&status[0], 1, AQL_RELAXED);
}
