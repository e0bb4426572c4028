/* SPDX-License-Identifier: MIT */
/*
 * The kernel of heat.c: one explicit time step of the 1-D heat equation,
 * one point per work-item. The two end points hold their values (fixed
 * boundary temperatures).
 */
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(heat_step, (aql_global const float *, u), (aql_global float *, next),
		      (float, r), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i == 0 || i == n - 1)
		next[i] = u[i];
	else if (i < n)
		next[i] = u[i] + r * (u[i - 1] - 2.0f * u[i] + u[i + 1]);
}
