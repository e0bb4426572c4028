/* SPDX-License-Identifier: MIT */
#include <string.h>
#include <aql/host_kernel.h>

#include "empty.h"

struct empty_kernarg {
	uint64_t pad;
};

static void empty_kernel(const void *kernarg)
{
	(void)kernarg;
}

static const aql_host_kernel_descriptor empty_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(empty_kernel, struct empty_kernarg,
				   AQL_HOST_KD_NO_BARRIER);

static _Alignas(16) struct empty_kernarg empty_args;

aql_packet empty_dispatch(int barrier, aql_signal *completion)
{
	aql_packet p;
	aql_dispatch_packet *d = &p.dispatch;

	memset(&p, 0, sizeof(p));
	d->header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, barrier,
				      AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	d->setup = 1;
	d->workgroup_size_x = 1;
	d->workgroup_size_y = 1;
	d->workgroup_size_z = 1;
	d->grid_size_x = 1;
	d->grid_size_y = 1;
	d->grid_size_z = 1;
	d->kernel_object = (uint64_t)(uintptr_t)&empty_kd;
	d->kernarg_address = (uint64_t)(uintptr_t)&empty_args;
	d->completion_signal = completion ? aql_signal_handle(completion) : 0;
	return p;
}

aql_status submit_batch(aql_queue *q, const aql_packet *body, const aql_packet *last,
			uint32_t n)
{
	aql_status st;

	for (uint32_t i = 1; i < n; i++) {
		st = aql_queue_submit(q, body);
		if (st != AQL_OK)
			return st;
	}
	return aql_queue_submit(q, last);
}
