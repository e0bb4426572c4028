/* SPDX-License-Identifier: MIT */
/*
 * Histogram of data[i] % HIST_BINS: each work-group counts into LDS bins
 * with LDS atomics, then adds them to the global bins with global atomics.
 */
#include <aql/kernel.h>

#define HIST_BINS 64

struct hist_lds {
	uint32_t bins[HIST_BINS];
};

AQL_KERNEL_LDS(histogram, struct hist_lds, (aql_global const uint32_t *, data),
	       (uint32_t, n), (aql_global uint32_t *, bins))
{
	uint32_t l = aql_local_linear_id(), size = aql_local_size(0), i = aql_global_id(0);

	for (uint32_t b = l; b < HIST_BINS; b += size)
		lds->bins[b] = 0;
	aql_barrier();
	if (i < n)
		aql_atomic_add_u32(&lds->bins[data[i] % HIST_BINS], 1, AQL_RELAXED);
	aql_barrier();
	for (uint32_t b = l; b < HIST_BINS; b += size)
		if (lds->bins[b])
			aql_atomic_add_u32(&bins[b], lds->bins[b], AQL_RELAXED);
}
