/* SPDX-License-Identifier: MIT */
/*
 * Internal: runs one work-group of a host kernel on the calling thread.
 * Work-items are fibers switched at aql_host_barrier(); kernels marked
 * AQL_HOST_KD_NO_BARRIER, and groups of one work-item, run as a plain loop;
 * a work-group function (AQL_HOST_KD_WORKGROUP) is called once per group.
 */
#ifndef AQL_INTERNAL_WORKGROUP_H
#define AQL_INTERNAL_WORKGROUP_H

#include <aql/host_kernel.h>
#include <aql/status.h>

struct aql_wg_exec;

/* Per-thread executor able to run work-groups up to max_workitems. */
aql_status aql_wg_exec_create(uint32_t max_workitems, struct aql_wg_exec **out);
void aql_wg_exec_destroy(struct aql_wg_exec *exec);

/*
 * Run work-group group_index (linear, x fastest) of the dispatch. Returns 0,
 * or -1 if a kernel marked AQL_HOST_KD_NO_BARRIER called the barrier in a
 * group of several work-items (those work-items then ran without it).
 */
int aql_wg_run(struct aql_wg_exec *exec, const aql_dispatch_packet *packet,
	       const aql_host_kernel_descriptor *kd, uint64_t group_index,
	       uint64_t dispatch_id);

/* Work-groups in each dimension of a validated dispatch. */
static inline uint32_t aql_wg_count(uint32_t grid, uint16_t wg)
{
	return grid / wg + (grid % wg != 0);
}

#endif
