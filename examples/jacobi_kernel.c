/* SPDX-License-Identifier: MIT */
/*
 * The kernel of jacobi_mpi.c: one Jacobi step of the 2-D heat equation
 * over a block of rows, one point per work-item. The block is rows rows
 * of w points, stored with a halo row above and below (rows + 2 rows in
 * all); its first row is row `first` of the h-row grid. The grid's edges
 * hold their values. Each point is computed with the same expression
 * whatever the block, so a split grid gives the bits of a whole one.
 * Work-item 0 reports the step over the channel (struct progress: group
 * is the step, first the block's row count).
 */
#include <aql/kernel.h>
#include "progress.h"

AQL_KERNEL_NO_BARRIER(jacobi_step, (aql_global aql_channel_dev *, log),
		      (aql_global const float *, u), (aql_global float *, next), (float, r),
		      (uint32_t, w), (uint32_t, rows), (uint32_t, first), (uint32_t, h),
		      (uint32_t, step))
{
	uint32_t id = aql_global_id(0);
	uint32_t i = id / w + 1, j = id % w;	/* i: the row in the block, past the halo */
	uint32_t g = first + i - 1;		/* the row in the grid */
	uint32_t p = i * w + j;

	if (id >= rows * w)
		return;
	if (g == 0 || g == h - 1 || j == 0 || j == w - 1)
		next[p] = u[p];
	else
		next[p] = u[p] + r * ((u[p - w] + u[p + w]) + (u[p - 1] + u[p + 1]) - 4.0f * u[p]);
	if (id == 0) {
		struct progress msg = { step, rows };

		AQL_CHANNEL_SEND(log, msg);
	}
}
