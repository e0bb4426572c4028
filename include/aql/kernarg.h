/* SPDX-License-Identifier: MIT */
/*
 * Kernarg segments: the bytes a kernel reads its arguments from. Explicit
 * arguments go at their metadata offsets; for AMDGPU code objects the
 * hidden arguments (block counts, group sizes, remainders, grid dims,
 * dynamic LDS size, global offsets, and the buffers the runtime supplies)
 * go at theirs, for V4 and for the V5/V6 layouts alike; every other byte
 * is zero.
 */
#ifndef AQL_KERNARG_H
#define AQL_KERNARG_H

#include <stddef.h>
#include <stdint.h>
#include <aql/code_object.h>
#include <aql/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Values only the runtime knows. Zero means "not supplied". */
typedef struct aql_kernarg_hidden {
	uint64_t global_offset[3];
	uint64_t printf_buffer;
	uint64_t hostcall_buffer;
	uint64_t heap_v1;
	uint64_t multigrid_sync_arg;
	uint64_t default_queue;
	uint64_t completion_action;
	uint64_t queue_ptr;
} aql_kernarg_hidden;

/* One explicit argument's bytes. */
typedef struct aql_kernarg_value {
	const void *data;
	size_t size;
} aql_kernarg_value;

/*
 * Fill out (out_size bytes, at least kernel->kernarg_size) with the
 * kernarg segment for dispatching kernel with packet: args[i] is explicit
 * argument i, and its size must equal the metadata's. hidden may be NULL.
 * The packet's grid, work-group sizes, dimensions and group_segment_size
 * must be set. Errors: AQL_ERR_INVALID_ARG naming the argument at fault
 * (wrong count, wrong size, out too small, a group segment smaller than
 * the kernel's static LDS). Thread safe.
 */
aql_status aql_kernarg_build(const aql_kernel *kernel,
			     const aql_dispatch_packet *packet,
			     const aql_kernarg_value *args, uint32_t arg_count,
			     const aql_kernarg_hidden *hidden,
			     void *out, size_t out_size);

typedef struct aql_queue aql_queue;

/*
 * The hidden values the runtime supplies for dispatching kernel on queue,
 * for callers that write their own packets (aql_launch() fills them
 * itself): *out is zeroed, queue_ptr set to the queue's amd_queue_t, and,
 * on an AMD agent, heap_v1 (device malloc's heap) and hostcall_buffer
 * (the hostcall service) where the kernel's metadata names
 * hidden_heap_v1 or hidden_hostcall_buffer. Those two are per agent,
 * made at the first call that needs them and kept until the agent is
 * destroyed: the first call may allocate VRAM and start a thread, later
 * ones only read. Errors: AQL_ERR_INVALID_ARG (a NULL argument), and,
 * naming the kernel, AQL_ERR_NOMEM (VRAM or host memory exhausted),
 * AQL_ERR_DEVICE, AQL_ERR_SYSTEM from making them; *out then holds only
 * queue_ptr. Thread safe.
 */
aql_status aql_queue_hidden_args(aql_queue *queue, const aql_kernel *kernel,
				 aql_kernarg_hidden *out);

#ifdef __cplusplus
}
#endif

#endif
