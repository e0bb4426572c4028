/* SPDX-License-Identifier: MIT */
/*
 * The Jacobi step of aql-bench --mpi (mpi.c) in the two parts a step
 * overlapping its halo exchange needs: the block's rows whose inputs are
 * all its own, and its first and last rows, which read the halos. Each
 * point is examples/jacobi_mpi.c's (jacobi_point(), examples/jacobi.h).
 */
#include <aql/kernel.h>
#include "jacobi.h"

/* Rows lo .. lo + n - 1 of a block of rows rows (1-based past the halo). */
AQL_KERNEL_NO_BARRIER(jacobi_rows, (aql_global const float *, u), (aql_global float *, next),
		      (float, r), (uint32_t, w), (uint32_t, first), (uint32_t, h),
		      (uint32_t, lo), (uint32_t, n))
{
	uint32_t id = aql_global_id(0);

	if (id < n * w)
		jacobi_point(u, next, r, w, first, h, lo + id / w, id % w);
}

/* Rows 1 and rows of the block: those next to its halo rows. */
AQL_KERNEL_NO_BARRIER(jacobi_edges, (aql_global const float *, u), (aql_global float *, next),
		      (float, r), (uint32_t, w), (uint32_t, first), (uint32_t, h),
		      (uint32_t, rows))
{
	uint32_t id = aql_global_id(0);

	if (id < 2 * w)
		jacobi_point(u, next, r, w, first, h, id < w ? 1 : rows, id % w);
}
