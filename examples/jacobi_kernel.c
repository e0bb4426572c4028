/* SPDX-License-Identifier: MIT */
/*
 * The kernel of jacobi_mpi.c: one Jacobi step of the 2-D heat equation
 * over a block of rows (jacobi.h), one point per work-item; the block's
 * first row is row `first` of the h-row grid.
 * Work-item 0 reports the step over the channel (struct progress: group
 * is the step, first the block's row count).
 */
#include <aql/kernel.h>
#include "jacobi.h"
#include "progress.h"

AQL_KERNEL_NO_BARRIER(jacobi_step, (aql_global aql_channel_dev *, log),
		      (aql_global const float *, u), (aql_global float *, next), (float, r),
		      (uint32_t, w), (uint32_t, rows), (uint32_t, first), (uint32_t, h),
		      (uint32_t, step))
{
	uint32_t id = aql_global_id(0);

	if (id >= rows * w)
		return;
	jacobi_point(u, next, r, w, first, h, id / w + 1, id % w);
	if (id == 0) {
		struct progress msg = { step, rows };

		AQL_CHANNEL_SEND(log, msg);
	}
}
