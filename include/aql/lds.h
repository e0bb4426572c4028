/* SPDX-License-Identifier: MIT */
/*
 * LDS (the group segment) of a dispatch. A kernel's LDS is its static part
 * (aql_kernel.group_segment_size), then, from the static size rounded up
 * to AQL_LDS_DYNAMIC_ALIGN, the dynamic part the dispatch asks for: where
 * aql_dynamic_lds() points in the kernel (aql/kernel.h) on the CPU agent,
 * AMDGPU and CUDA alike.
 *
 * A layout places several typed arrays in the dynamic part, each at its
 * own alignment, and gives the packet's group_segment_size and each
 * array's byte offset from aql_dynamic_lds(). The kernel takes the offsets
 * as uint32_t arguments and reaches the arrays with AQL_LDS_ARRAY():
 *
 *   host                                     kernel
 *   aql_lds_layout l;                        AQL_KERNEL(k, ..., (uint32_t, keys_off),
 *   uint32_t keys, vals;                                (uint32_t, vals_off))
 *                                            {
 *   aql_lds_layout_init(&l, kernel);                 AQL_LDS_ARRAY(uint16_t, keys, keys_off);
 *   AQL_LDS_ADD(&l, uint16_t, wg, &keys);            AQL_LDS_ARRAY(double, vals, vals_off);
 *   AQL_LDS_ADD(&l, double, wg, &vals);              ...
 *   st = aql_lds_layout_check_agent(&l, agent);
 *   packet.group_segment_size = aql_lds_layout_group_size(&l);
 *
 * A failed add leaves the layout as it was but marks it failed: the checks
 * then fail too and the group size is UINT32_MAX, which every agent
 * refuses, so the adds may be checked one by one or once at the end.
 *
 * A layout is a plain value owned by the caller: the calls that change it
 * must not run concurrently with any other call on the same layout; the
 * ones taking it const may run concurrently with each other.
 */
#ifndef AQL_LDS_H
#define AQL_LDS_H

#include <stddef.h>
#include <stdint.h>
#include <aql/agent.h>
#include <aql/code_object.h>
#include <aql/status.h>
#include <aql/target.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Where dynamic LDS starts: the static size rounded up to this. It is all
 * the alignment aql_dynamic_lds() promises on every target (the same value
 * as AQL_DYNAMIC_LDS_ALIGN of aql/kernel.h), so it is also the largest
 * element alignment a layout accepts.
 */
#define AQL_LDS_DYNAMIC_ALIGN 16u

/* Arrays one layout holds. */
#define AQL_LDS_MAX_ARRAYS 16u

typedef struct aql_lds_array {
	const char *name;	/* element type from AQL_LDS_ADD(), or NULL */
	uint32_t offset;	/* bytes from aql_dynamic_lds(); a multiple of align */
	uint32_t count;		/* elements */
	uint32_t size;		/* bytes */
	uint32_t align;		/* bytes, a power of two */
} aql_lds_array;

typedef struct aql_lds_layout {
	const char *kernel_name;	/* for messages; not copied */
	uint32_t static_size;		/* the kernel's static LDS */
	uint32_t dynamic_base;		/* static_size rounded up to AQL_LDS_DYNAMIC_ALIGN */
	uint32_t dynamic_size;		/* dynamic_base to the end of the last array */
	uint32_t count;			/* arrays placed */
	aql_status error;		/* the first failed add; AQL_OK if none */
	aql_lds_array arrays[AQL_LDS_MAX_ARRAYS];	/* in the order added */
} aql_lds_layout;

/*
 * The group_segment_size of a dispatch of kernel with dynamic_bytes of
 * dynamic LDS in one block at aql_dynamic_lds(): the static size rounded up
 * to AQL_LDS_DYNAMIC_ALIGN plus dynamic_bytes, in *out. Errors:
 * AQL_ERR_INVALID_ARG (a NULL pointer; a sum over UINT32_MAX, naming the
 * kernel). Checks no limit: see aql_lds_layout_check_agent(). Thread safe.
 */
aql_status aql_lds_group_size(const aql_kernel *kernel, uint64_t dynamic_bytes,
			      uint32_t *out);

/*
 * Start an empty layout for a dispatch of kernel: its static LDS
 * (kernel->group_segment_size) first, no dynamic arrays. kernel->name must
 * outlive the layout. Errors: AQL_ERR_INVALID_ARG (NULL l or kernel).
 * Not thread safe for l.
 */
aql_status aql_lds_layout_init(aql_lds_layout *l, const aql_kernel *kernel);

/*
 * As aql_lds_layout_init() for a kernel known only by its static LDS size
 * (a host kernel descriptor's group_segment_fixed_size, say). name (may be
 * NULL) is used in messages and must outlive the layout. Errors:
 * AQL_ERR_INVALID_ARG (NULL l). Not thread safe for l.
 */
aql_status aql_lds_layout_init_size(aql_lds_layout *l, const char *name,
				    uint32_t static_size);

/*
 * Place an array of count elements of elem_size bytes, aligned to
 * elem_align, after the arrays placed so far, and store its offset from
 * aql_dynamic_lds() in *offset (offset may be NULL; the offset is also in
 * l->arrays[]). count may be 0 (an empty array still gets an offset).
 * Prefer AQL_LDS_ADD(), which takes the size and alignment from the type.
 *
 * Errors, each naming the kernel and the array (l is unchanged but marked
 * failed): AQL_ERR_INVALID_ARG for a NULL l, elem_size 0, elem_align not a power of two or above
 * AQL_LDS_DYNAMIC_ALIGN, elem_size not a multiple of elem_align, more than
 * AQL_LDS_MAX_ARRAYS arrays, or a group segment over UINT32_MAX bytes; and
 * the error of an earlier failed add, again. Limits are checked later, by
 * aql_lds_layout_check_agent() and aql_lds_layout_check_target(). Not
 * thread safe for l.
 */
aql_status aql_lds_layout_add(aql_lds_layout *l, size_t elem_size, size_t elem_align,
			      uint64_t count, uint32_t *offset);

/* aql_lds_layout_add() recording name (a static string) for messages. */
aql_status aql_lds_layout_add_named(aql_lds_layout *l, const char *name, size_t elem_size,
				    size_t elem_align, uint64_t count, uint32_t *offset);

/*
 * Place count elements of type T: AQL_LDS_ADD(&l, float, n, &off). The
 * count is converted to uint64_t, so a negative count fails as too large.
 */
#define AQL_LDS_ADD(l, T, count, offset)                                       \
	aql_lds_layout_add_named((l), #T, sizeof(T), AQL_LDS_ALIGNOF_(T),      \
				 (uint64_t)(count), (offset))
#ifdef __cplusplus
#define AQL_LDS_ALIGNOF_(T) alignof(T)
#else
#define AQL_LDS_ALIGNOF_(T) _Alignof(T)
#endif

/*
 * The packet's group_segment_size for the layout: dynamic_base plus
 * dynamic_size, the static size alone when no array was added, and
 * UINT32_MAX if an add failed (an agent refuses it). Thread safe for
 * concurrent readers.
 */
uint32_t aql_lds_layout_group_size(const aql_lds_layout *l);

/*
 * Bytes from aql_dynamic_lds() to the end of the last array: what
 * aql_dynamic_lds_size() returns in the kernel. 0 if an add failed.
 * Thread safe for concurrent readers.
 */
uint32_t aql_lds_layout_dynamic_size(const aql_lds_layout *l);

/*
 * Check the layout's group segment against agent's LDS limit per
 * work-group (aql_agent_info.max_group_segment_size). Errors:
 * AQL_ERR_INVALID_ARG naming the kernel, the bytes it asks for (static,
 * alignment padding and each array) and the limit; or an earlier failed
 * add, or NULL arguments; what aql_agent_get_info() returns. Thread safe
 * for concurrent readers of l.
 */
aql_status aql_lds_layout_check_agent(const aql_lds_layout *l, aql_agent *agent);

/*
 * As aql_lds_layout_check_agent(), against the LDS limit of an AMDGPU
 * target (aql_lds_target_limit()). Errors: as that, and those of
 * aql_lds_target_limit().
 */
aql_status aql_lds_layout_check_target(const aql_lds_layout *l, const aql_target_id *target);

/*
 * Bytes of LDS one work-group may allocate on target's processor, in
 * *bytes: 64 KiB on gfx9 (gfx90a and gfx94x included), gfx10, gfx11 and
 * gfx12; 160 KiB on gfx950; 320 KiB on gfx1250. Generic targets
 * (gfx9-4-generic, ...) get the limit of every processor they cover.
 * Errors: AQL_ERR_INVALID_ARG (NULL), AQL_ERR_NOT_FOUND naming a processor
 * this table does not know. Thread safe.
 */
aql_status aql_lds_target_limit(const aql_target_id *target, uint32_t *bytes);

#ifdef __cplusplus
}
#endif

#endif
