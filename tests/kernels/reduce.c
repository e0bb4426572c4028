/* SPDX-License-Identifier: MIT */
/*
 * Work-group sums: a tree reduction in static LDS with barriers, for
 * work-groups of up to REDUCE_MAX_WG work-items in dimension 0, partial
 * ones included. Each group writes its sum and adds it to a 64-bit total.
 */
#include <aql/kernel.h>

#define REDUCE_MAX_WG 256

struct reduce_lds {
	uint64_t part[REDUCE_MAX_WG];
};

AQL_KERNEL_LDS(reduce, struct reduce_lds, (aql_global const uint32_t *, in),
	       (uint32_t, n), (aql_global uint64_t *, sums), (aql_global uint64_t *, total))
{
	uint32_t l = aql_local_id(0), size = aql_local_size(0), i = aql_global_id(0);

	lds->part[l] = i < n ? in[i] : 0;
	aql_barrier();
	/* After each step the live partial sums are [0, min(size, s)). */
	for (uint32_t s = REDUCE_MAX_WG / 2; s > 0; s /= 2) {
		if (l < s && l + s < size)
			lds->part[l] += lds->part[l + s];
		aql_barrier();
	}
	if (l == 0) {
		sums[aql_group_id(0)] = lds->part[0];
		aql_atomic_add_u64(total, lds->part[0], AQL_RELAXED);
	}
}
