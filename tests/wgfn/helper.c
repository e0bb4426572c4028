/* SPDX-License-Identifier: MIT */
/*
 * A kernel of test_wgfn that asks for its ids in a helper function, outside
 * the kernel body: the work-group function keeps the work-item current.
 */
#include <aql/kernel.h>

#include "ids.h"

static uint32_t helper_id(int q, unsigned d)
{
	switch (q) {
	case 0: return aql_local_id(d);
	case 1: return aql_group_id(d);
	case 2: return aql_local_size(d);
	case 3: return aql_enqueued_local_size(d);
	case 4: return aql_global_size(d);
	case 5: return aql_global_id(d);
	default: return aql_num_groups(d);
	}
}

#define Q_local_id 0
#define Q_group_id 1
#define Q_local_size 2
#define Q_enqueued_local_size 3
#define Q_global_size 4
#define Q_global_id 5
#define Q_num_groups 6
#define HELPER_ID(q, d) helper_id(Q_##q, (d))

AQL_KERNEL_NO_BARRIER(ids_helper, (aql_global uint32_t *, rec))
{
	WGFN_RECORD(rec, HELPER_ID);
}
