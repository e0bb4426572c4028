/* SPDX-License-Identifier: MIT */
/*
 * Kernels of test_wgfn whose ids are asked for only in their bodies: the
 * work-group function of ids_wg keeps no work-item current.
 */
#include <aql/kernel.h>

#include "ids.h"

#define BODY_ID(q, d) aql_##q(d)

/* Every id and size, from the work-group function's loop. */
AQL_KERNEL_NO_BARRIER(ids_wg, (aql_global uint32_t *, rec))
{
	WGFN_RECORD(rec, BODY_ID);
}

/* The same as fibers, one work-item per call (AQL_KERNEL). */
AQL_KERNEL(ids_fiber, (aql_global uint32_t *, rec))
{
	WGFN_RECORD(rec, BODY_ID);
}

/* out[i] = the global id x of the work-item mirrored in its group, passed
 * through LDS across a barrier. */
struct mirror_lds {
	uint32_t v[1024];
};

AQL_KERNEL_LDS(mirror, struct mirror_lds, (aql_global uint32_t *, out), (uint32_t, n))
{
	uint32_t lid = aql_local_id(0), size = aql_local_size(0), i = aql_global_id(0);

	lds->v[lid] = i;
	aql_barrier();
	if (i < n)
		out[i] = lds->v[size - 1 - lid];
}

/*
 * Work-item 0 of each group counts the group in *arrived and waits (up to
 * 100000 pauses, 5 s or more) until want groups have: so want groups must run at
 * once, on as many workers. who[i] is the work-item record the running
 * worker's executor handed over, one address per worker.
 */
AQL_KERNEL_NO_BARRIER(meet, (aql_global uint32_t *, arrived), (aql_global uint64_t *, who),
		      (uint32_t, want))
{
	if (aql_local_id(0) == 0) {
		aql_atomic_add_u32(arrived, 1, AQL_SEQ_CST);
		for (uint32_t r = 0; aql_atomic_load_u32(arrived, AQL_SEQ_CST) < want &&
				     r < 100000; r++)
			aql_channel_host_pause(r < 256 ? r : 256);
	}
	who[aql_global_id(0)] = (uint64_t)(uintptr_t)aql_host_workitem_current();
}
