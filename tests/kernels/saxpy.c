/* SPDX-License-Identifier: MIT */
/* y = a * x + y: the smallest single-source kernel. */
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(saxpy, (float, a), (aql_global const float *, x),
		      (aql_global float *, y), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		y[i] = a * x[i] + y[i];
}
