/* SPDX-License-Identifier: MIT */
/*
 * The kernel of saxpy.c and saxpy_cuda.c: y = a * x + y, one element per
 * work-item. tools/aql-kcc builds it for the CPU agent (--target host),
 * as PTX (--target sm_75) and for AMD GPUs (--target gfx942).
 */
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(saxpy, (float, a), (aql_global const float *, x),
		      (aql_global float *, y), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		y[i] = a * x[i] + y[i];
}
