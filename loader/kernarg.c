/* SPDX-License-Identifier: MIT */
/*
 * Kernarg segments. Every argument, explicit or hidden, is placed at the
 * offset its metadata gives: that covers the V4 hidden layout (global
 * offsets first) and the 256-byte V5/V6 block alike, and a kernel that
 * uses only some hidden arguments gets exactly those. Bytes nobody names
 * are zero, as the ABI asks of the reserved ones.
 */
#include <string.h>

#include "util/error.h"
#include "loader/kernarg_impl.h"

static void put(uint8_t *out, const aql_kernel_arg *a, uint64_t v)
{
	uint32_t n = a->size < 8 ? a->size : 8;

	/* Little endian: the low n bytes of v. */
	memcpy(out + a->offset, &v, n);
}

static uint64_t hidden_value(const aql_kernel_arg *a, const aql_dispatch_packet *p,
			     const aql_kernarg_hidden *h, uint32_t dynamic_lds)
{
	const uint32_t grid[3] = { p->grid_size_x, p->grid_size_y, p->grid_size_z };
	const uint16_t wg[3] = { p->workgroup_size_x, p->workgroup_size_y,
				 p->workgroup_size_z };
	static const aql_kernarg_hidden none;
	unsigned d;

	if (!h)
		h = &none;
	switch (a->kind) {
	case AQL_ARG_HIDDEN_GLOBAL_OFFSET_X:
	case AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y:
	case AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z:
		return h->global_offset[a->kind - AQL_ARG_HIDDEN_GLOBAL_OFFSET_X];
	case AQL_ARG_HIDDEN_BLOCK_COUNT_X:
	case AQL_ARG_HIDDEN_BLOCK_COUNT_Y:
	case AQL_ARG_HIDDEN_BLOCK_COUNT_Z:
		/* Whole work-groups; a partial one shows in the remainder. */
		d = a->kind - AQL_ARG_HIDDEN_BLOCK_COUNT_X;
		return grid[d] / wg[d];
	case AQL_ARG_HIDDEN_GROUP_SIZE_X:
	case AQL_ARG_HIDDEN_GROUP_SIZE_Y:
	case AQL_ARG_HIDDEN_GROUP_SIZE_Z:
		return wg[a->kind - AQL_ARG_HIDDEN_GROUP_SIZE_X];
	case AQL_ARG_HIDDEN_REMAINDER_X:
	case AQL_ARG_HIDDEN_REMAINDER_Y:
	case AQL_ARG_HIDDEN_REMAINDER_Z:
		d = a->kind - AQL_ARG_HIDDEN_REMAINDER_X;
		return grid[d] % wg[d];
	case AQL_ARG_HIDDEN_GRID_DIMS:
		return p->setup & AQL_DISPATCH_DIMS_MASK;
	case AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE:
		return dynamic_lds;
	case AQL_ARG_HIDDEN_PRINTF_BUFFER: return h->printf_buffer;
	case AQL_ARG_HIDDEN_HOSTCALL_BUFFER: return h->hostcall_buffer;
	case AQL_ARG_HIDDEN_HEAP_V1: return h->heap_v1;
	case AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG: return h->multigrid_sync_arg;
	case AQL_ARG_HIDDEN_DEFAULT_QUEUE: return h->default_queue;
	case AQL_ARG_HIDDEN_COMPLETION_ACTION: return h->completion_action;
	case AQL_ARG_HIDDEN_QUEUE_PTR: return h->queue_ptr;
	default:
		/* hidden_none, the gfx8 apertures, the tool correlation id. */
		return 0;
	}
}

void aql_kernarg_fill_hidden(const aql_kernel *kernel, const aql_dispatch_packet *packet,
			     const aql_kernarg_hidden *hidden, void *out)
{
	const aql_kernel_metadata *md = kernel->metadata;
	uint32_t dynamic_lds = packet->group_segment_size - kernel->group_segment_size;

	for (uint32_t i = kernel->explicit_arg_count; i < md->arg_count; i++)
		put(out, &md->args[i], hidden_value(&md->args[i], packet, hidden, dynamic_lds));
}

aql_status aql_kernarg_build(const aql_kernel *kernel, const aql_dispatch_packet *packet,
			     const aql_kernarg_value *args, uint32_t arg_count,
			     const aql_kernarg_hidden *hidden, void *out, size_t out_size)
{
	const aql_kernel_metadata *md;
	uint8_t *bytes = out;

	if (!kernel || !packet || !out || (arg_count && !args))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_kernarg_build: NULL argument");
	md = kernel->metadata;
	if (arg_count != kernel->explicit_arg_count)
		return aql_fail(AQL_ERR_INVALID_ARG, "kernel %s takes %u arguments, %u given",
				kernel->name, kernel->explicit_arg_count, arg_count);
	if (out_size < kernel->kernarg_size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel %s: kernarg buffer of %zu bytes is smaller than its %u-byte segment",
				kernel->name, out_size, kernel->kernarg_size);
	if ((packet->setup & AQL_DISPATCH_DIMS_MASK) == 0)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel %s: the packet's setup gives no grid dimensions", kernel->name);
	if (!packet->workgroup_size_x || !packet->workgroup_size_y || !packet->workgroup_size_z)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel %s: the packet's work-group size has a zero dimension",
				kernel->name);
	if (packet->group_segment_size < kernel->group_segment_size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel %s: packet group_segment_size %u is below its %u bytes of static LDS",
				kernel->name, packet->group_segment_size, kernel->group_segment_size);
	for (uint32_t i = 0; i < md->arg_count; i++) {
		const aql_kernel_arg *a = &md->args[i];

		if (a->offset > kernel->kernarg_size || a->size > kernel->kernarg_size - a->offset)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"kernel %s: argument %u lies outside its kernarg segment",
					kernel->name, i);
		if (i < arg_count && (args[i].size != a->size || (a->size && !args[i].data)))
			return aql_fail(AQL_ERR_INVALID_ARG,
					"kernel %s: argument %u (%s%s%s) is %u bytes, %zu given",
					kernel->name, i, a->name ? a->name : "unnamed",
					a->type_name ? " " : "", a->type_name ? a->type_name : "",
					a->size, args[i].size);
	}
	memset(bytes, 0, kernel->kernarg_size);
	for (uint32_t i = 0; i < arg_count; i++)
		aql_kernarg_copy(bytes + md->args[i].offset, args[i].data, md->args[i].size);
	aql_kernarg_fill_hidden(kernel, packet, hidden, bytes);
	return AQL_OK;
}
