/* SPDX-License-Identifier: MIT */
/*
 * The kernels of the loop-speed rows (speed.c), one point per work-item.
 * The heat step writes the inner points: the ends are fixed (Dirichlet)
 * and equal in both buffers.
 */
#include <aql/kernel.h>

#include "speed_math.h"

AQL_KERNEL_NO_BARRIER(speed_heat_step, (aql_global const float *, in),
		      (aql_global float *, out), (uint32_t, n), (float, k))
{
	int i = (int)aql_global_id(0);

	if (i > 0 && i < (int)n - 1)
		out[i] = speed_heat(in, i, k);
}

AQL_KERNEL_NO_BARRIER(speed_mandel_grid, (aql_global float *, out), (uint32_t, width),
		      (uint32_t, height), (uint32_t, iters), (float, step))
{
	uint32_t x = aql_global_id(0), y = aql_global_id(1);

	if (x < width && y < height)
		out[(size_t)y * width + x] = speed_mandel(SPEED_X0 + step * (float)x,
							  SPEED_Y0 + step * (float)y, iters);
}
