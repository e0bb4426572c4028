/* SPDX-License-Identifier: MIT */
/* out[i] = in[i]: the kernel of the HSA samples' vector_copy. */
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(vector_copy, (aql_global const uint32_t *, in),
		      (aql_global uint32_t *, out))
{
	uint32_t i = aql_global_id(0);

	out[i] = in[i];
}
