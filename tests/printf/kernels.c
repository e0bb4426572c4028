/* SPDX-License-Identifier: MIT */
/*
 * printf kernels for test_printf: run on the CPU agent, and built for the
 * GPU targets as a compile check of aql/kernel_printf.h.
 */
#include <aql/kernel.h>

#include "senders.h"

/* Each work-item prints count numbered records. */
AQL_KERNEL_NO_BARRIER(printf_seq, (aql_global aql_channel_dev *, ch), (uint32_t, count),
		      (aql_global uint32_t *, failed))
{
	uint32_t id = aql_global_id(0);

	failed[id] = pf_send_seq(ch, id, count);
}

/* One work-item: a record of every kind (senders.h). */
AQL_KERNEL_NO_BARRIER(printf_types, (aql_global aql_channel_dev *, ch), (int32_t, i),
		      (uint32_t, u), (int64_t, l), (uint64_t, ul), (float, f), (double, d),
		      (aql_global int32_t *, out))
{
	out[0] = pf_send_types(ch, i, u, l, ul, f, d, out);
}

/*
 * Inline formats: for a queue's own printf channel (AQL_ARG_PRINTF()),
 * which has no format table. Each work-item prints count lines in order.
 */
AQL_KERNEL_NO_BARRIER(printf_inline, (aql_global aql_channel_dev *, ch), (uint32_t, count),
		      (float, x))
{
	uint32_t id = aql_global_id(0);

	for (uint32_t k = 0; k < count; k++)
		AQL_PRINTF(ch, "item %u line %u x=%.2f\n", id, k, x);
	if (id == 0)
		AQL_PRINTF(ch, "no values, 100%%\n");
}
