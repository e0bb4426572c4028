/* SPDX-License-Identifier: MIT */
/*
 * The kernel of progress.c: each work-item squares its element; the first
 * work-item of each work-group reports over the channel, once as a typed
 * message (struct progress) and once as printf.
 */
#include <aql/kernel.h>
#include "progress.h"

AQL_KERNEL_NO_BARRIER(square, (aql_global aql_channel_dev *, log),
		      (aql_global uint32_t *, data), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i >= n)
		return;
	data[i] = i * i;
	if (aql_local_id(0) == 0) {
		struct progress p = { aql_group_id(0), data[i] };

		AQL_CHANNEL_SEND(log, p);
		AQL_PRINTF(log, PROGRESS_FORMAT, aql_group_id(0), i);
	}
}
