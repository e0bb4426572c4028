/* SPDX-License-Identifier: MIT */
/*
 * Code object metadata: what the NT_AMDGPU_METADATA note (msgpack, code
 * object V3 and later) says about a code object and its kernels. Host code
 * objects for the CPU agent are described by the same structures, filled
 * from their host kernel descriptors.
 *
 * Strings and arrays point into the one allocation that holds the whole
 * metadata; they live until aql_metadata_free().
 */
#ifndef AQL_METADATA_H
#define AQL_METADATA_H

#include <stddef.h>
#include <stdint.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* .value_kind. The hidden kinds are filled by the runtime, not the caller. */
enum aql_arg_kind {
	AQL_ARG_UNKNOWN = 0,		/* a kind this runtime does not know */
	AQL_ARG_BY_VALUE,
	AQL_ARG_GLOBAL_BUFFER,
	AQL_ARG_DYNAMIC_SHARED_POINTER,
	AQL_ARG_SAMPLER,
	AQL_ARG_IMAGE,
	AQL_ARG_PIPE,
	AQL_ARG_QUEUE,
	AQL_ARG_HIDDEN_GLOBAL_OFFSET_X,
	AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y,
	AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z,
	AQL_ARG_HIDDEN_NONE,
	AQL_ARG_HIDDEN_PRINTF_BUFFER,
	AQL_ARG_HIDDEN_HOSTCALL_BUFFER,
	AQL_ARG_HIDDEN_DEFAULT_QUEUE,
	AQL_ARG_HIDDEN_COMPLETION_ACTION,
	AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG,
	AQL_ARG_HIDDEN_BLOCK_COUNT_X,
	AQL_ARG_HIDDEN_BLOCK_COUNT_Y,
	AQL_ARG_HIDDEN_BLOCK_COUNT_Z,
	AQL_ARG_HIDDEN_GROUP_SIZE_X,
	AQL_ARG_HIDDEN_GROUP_SIZE_Y,
	AQL_ARG_HIDDEN_GROUP_SIZE_Z,
	AQL_ARG_HIDDEN_REMAINDER_X,
	AQL_ARG_HIDDEN_REMAINDER_Y,
	AQL_ARG_HIDDEN_REMAINDER_Z,
	AQL_ARG_HIDDEN_GRID_DIMS,
	AQL_ARG_HIDDEN_HEAP_V1,
	AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE,
	AQL_ARG_HIDDEN_PRIVATE_BASE,
	AQL_ARG_HIDDEN_SHARED_BASE,
	AQL_ARG_HIDDEN_QUEUE_PTR,
	AQL_ARG_HIDDEN_TOOL_CORRELATION_ID,
	AQL_ARG_KIND_COUNT
};

/* .address_space */
enum aql_address_space {
	AQL_AS_NONE = 0,		/* key absent */
	AQL_AS_PRIVATE,
	AQL_AS_GLOBAL,
	AQL_AS_CONSTANT,
	AQL_AS_LOCAL,
	AQL_AS_GENERIC,
	AQL_AS_REGION,
};

/* .access and .actual_access */
enum aql_access {
	AQL_ACCESS_NONE = 0,		/* key absent */
	AQL_ACCESS_READ_ONLY,
	AQL_ACCESS_WRITE_ONLY,
	AQL_ACCESS_READ_WRITE,
};

enum aql_arg_flag {
	AQL_ARG_IS_CONST = 1u << 0,
	AQL_ARG_IS_RESTRICT = 1u << 1,
	AQL_ARG_IS_VOLATILE = 1u << 2,
	AQL_ARG_IS_PIPE = 1u << 3,
	/* An integer whose signedness the code object does not record (PTX
	 * without aql's description: .u32 is also C's int). */
	AQL_ARG_SIGN_UNKNOWN = 1u << 4,
};

struct aql_type;

typedef struct aql_kernel_arg {
	const char *name;		/* .name, or NULL */
	const char *type_name;		/* .type_name, or NULL */
	/* The type .type_name names (for a pointer, the pointee), among the
	 * built-in scalars and the struct types registered when the metadata
	 * was read (aql/buffer.h), or NULL. */
	const struct aql_type *type;
	uint32_t offset;		/* .offset in the kernarg segment */
	uint32_t size;			/* .size in bytes */
	uint32_t pointee_align;		/* .pointee_align, or 0 */
	enum aql_arg_kind kind;		/* .value_kind */
	enum aql_address_space address_space;
	enum aql_access access;
	enum aql_access actual_access;
	uint32_t flags;			/* enum aql_arg_flag */
} aql_kernel_arg;

typedef struct aql_kernel_metadata {
	const char *name;		/* .name */
	const char *symbol;		/* .symbol, "<name>.kd" */
	const char *language;		/* .language, or NULL */
	uint32_t language_version[2];
	uint32_t kernarg_segment_size;	/* explicit and hidden arguments */
	uint32_t kernarg_segment_align;
	uint32_t group_segment_fixed_size;
	uint32_t private_segment_fixed_size;
	uint32_t max_flat_workgroup_size;
	uint32_t wavefront_size;
	uint32_t sgpr_count;
	uint32_t vgpr_count;
	uint32_t agpr_count;
	uint32_t sgpr_spill_count;
	uint32_t vgpr_spill_count;
	uint32_t reqd_workgroup_size[3];	/* zeros when absent */
	uint32_t workgroup_size_hint[3];	/* zeros when absent */
	int8_t uses_dynamic_stack;	/* -1 absent, else 0/1 (V5+) */
	int8_t workgroup_processor_mode;	/* -1 absent, else 0/1 */
	int8_t uniform_work_group_size;	/* -1 absent, else 0/1 */
	uint32_t arg_count;
	const aql_kernel_arg *args;	/* in .args order */
} aql_kernel_metadata;

typedef struct aql_metadata {
	uint32_t version[2];		/* amdhsa.version; [1,2] for V5 and V6 */
	const char *target;		/* amdhsa.target, or NULL (V3) */
	uint32_t printf_count;
	const char *const *printf_formats;	/* amdhsa.printf strings */
	uint32_t kernel_count;
	const aql_kernel_metadata *kernels;
} aql_metadata;

/*
 * Parse one NT_AMDGPU_METADATA note descriptor (a msgpack map). Every key
 * the runtime uses is read; unknown keys are skipped. Errors:
 * AQL_ERR_INVALID_CODE_OBJECT with aql_error_message() naming the key or byte
 * offset at fault (malformed msgpack, nesting deeper than 32, lengths past
 * the end, a required key missing or of the wrong type), AQL_ERR_NOMEM,
 * AQL_ERR_INVALID_ARG for NULL data or out. An unknown .value_kind reads
 * as AQL_ARG_UNKNOWN, an unknown .address_space or .access as AQL_AS_NONE
 * or AQL_ACCESS_NONE. Never reads outside [data, data + size). Thread safe.
 */
aql_status aql_metadata_parse(const void *data, size_t size,
			      aql_metadata **out);

/* Free what aql_metadata_parse() returned. NULL is accepted. */
void aql_metadata_free(aql_metadata *md);

/*
 * The metadata spelling of a kind, address space or access ("by_value",
 * "hidden_block_count_x", "global", "read_only"): static strings, never
 * NULL ("unknown" out of range). Thread safe.
 */
const char *aql_arg_kind_name(enum aql_arg_kind kind);
const char *aql_address_space_name(enum aql_address_space as);
const char *aql_access_name(enum aql_access access);

#ifdef __cplusplus
}
#endif

#endif
