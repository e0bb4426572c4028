/* SPDX-License-Identifier: MIT */
/*
 * Kernels for the CPU agent. A host kernel is a C function taking the
 * kernarg segment, exactly as an AMDGPU kernel receives it. A dispatch
 * packet's kernel_object points at a 64-byte host kernel descriptor, the
 * counterpart of the AMDGPU kernel descriptor, which names the function.
 *
 * Inside a kernel, aql_host_current() describes the calling work-item.
 * Work-items of one work-group run as cooperative fibers on one thread, so
 * aql_host_barrier() is a real work-group barrier and the group segment is
 * shared by exactly the work-items of that group.
 */
#ifndef AQL_HOST_KERNEL_H
#define AQL_HOST_KERNEL_H

#include <stdint.h>
#include <aql/compat.h>
#include <aql/packet.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*aql_host_kernel_fn)(const void *kernarg);

struct aql_host_workitem;

/*
 * A work-group function (AQL_HOST_KD_WORKGROUP): runs every work-item of
 * the group wi describes, x fastest. wi arrives with local_id 0, 0, 0; the
 * function keeps wi->local_id at the running work-item's, for code that
 * reads it through aql_host_current(). All of the group's work-items share
 * wi->private_segment.
 */
typedef void (*aql_host_workgroup_fn)(const void *kernarg, struct aql_host_workitem *wi);

#define AQL_HOST_KD_MAGIC 0x484c5141u	/* "AQLH" */

enum aql_host_kd_flag {
	/* The kernel never calls aql_host_barrier(): work-items may run one
	 * after another on one stack, with no fiber switch. */
	AQL_HOST_KD_NO_BARRIER = 1u << 0,
	/* entry is an aql_host_workgroup_fn: one call runs a whole work-group
	 * (implies AQL_HOST_KD_NO_BARRIER). Descriptors without it keep the
	 * per-work-item entry. */
	AQL_HOST_KD_WORKGROUP = 1u << 1,
};

/*
 * One explicit kernel argument, as a host code object describes it: the
 * counterpart of an .args entry in AMDGPU metadata. kind, address_space
 * and access take the values of enum aql_arg_kind, aql_address_space and
 * aql_access (aql/metadata.h).
 */
typedef struct aql_host_kernel_arg {
	const char *name;
	const char *type_name;
	uint32_t offset;
	uint32_t size;
	uint32_t align;
	uint8_t kind;
	uint8_t address_space;
	uint8_t access;
	uint8_t flags;			/* enum aql_arg_flag */
} aql_host_kernel_arg;

typedef struct __attribute__((aligned(64))) aql_host_kernel_descriptor {
	uint32_t group_segment_fixed_size;	/* static LDS bytes */
	uint32_t private_segment_fixed_size;	/* bytes per work-item */
	uint32_t kernarg_size;
	uint32_t kernarg_align;
	int64_t kernel_code_entry_byte_offset;	/* AMDGPU field; 0 here */
	union {
		aql_host_kernel_fn entry;
		aql_host_workgroup_fn workgroup_entry;	/* AQL_HOST_KD_WORKGROUP */
		uint64_t entry_address;
	};
	uint32_t magic;				/* AQL_HOST_KD_MAGIC */
	uint32_t flags;				/* enum aql_host_kd_flag */
	uint32_t max_flat_workgroup_size;	/* 0: the agent's limit */
	uint32_t arg_count;			/* entries in args; 0 if unknown */
	union {
		const aql_host_kernel_arg *args;
		uint64_t args_address;
	};
	union {
		const char *name;		/* kernel name, or NULL */
		uint64_t name_address;
	};
} aql_host_kernel_descriptor;

AQL_STATIC_ASSERT(sizeof(aql_host_kernel_descriptor) == 64,
	       "kernel descriptors are 64 bytes");

/* Describe a host kernel fn whose kernarg segment is kernarg_type. */
#define AQL_HOST_KERNEL_DESCRIPTOR(fn, kernarg_type, kd_flags)                \
	{                                                                      \
		.kernarg_size = sizeof(kernarg_type),                          \
		.kernarg_align = AQL_ALIGNOF(kernarg_type) < 16 ? 16              \
				 : AQL_ALIGNOF(kernarg_type),                      \
		.entry = (fn), .magic = AQL_HOST_KD_MAGIC, .flags = (kd_flags), \
	}

typedef struct aql_host_workitem {
	const aql_dispatch_packet *packet;
	uint32_t local_id[3];
	uint32_t group_id[3];
	uint32_t group_size[3];		/* this group's size; the last may be partial */
	void *group_segment;		/* packet->group_segment_size bytes, 16-aligned */
	void *private_segment;		/* packet->private_segment_size bytes */
	uint64_t dispatch_id;
} aql_host_workitem;

/* Set by the CPU agent around every work-item; read through the helpers. */
extern __thread const aql_host_workitem *aql_host_current_workitem;

/*
 * The calling work-item, as a function: what kernels in host code objects
 * call, since the loader does not resolve thread-local relocations.
 */
const aql_host_workitem *aql_host_workitem_current(void);

/* The calling work-item; valid only inside a host kernel. */
static inline const aql_host_workitem *aql_host_current(void)
{
	return aql_host_current_workitem;
}

/* Global id in dimension dim (0..2). */
static inline uint32_t aql_host_global_id(unsigned dim)
{
	const aql_host_workitem *wi = aql_host_current_workitem;
	const uint16_t *wg = &wi->packet->workgroup_size_x;

	return wi->group_id[dim] * wg[dim] + wi->local_id[dim];
}

/* Flattened id within the work-group. */
static inline uint32_t aql_host_local_linear_id(void)
{
	const aql_host_workitem *wi = aql_host_current_workitem;

	return (wi->local_id[2] * wi->group_size[1] + wi->local_id[1]) *
		       wi->group_size[0] + wi->local_id[0];
}

/*
 * Work-group barrier: returns once every work-item of the group has called
 * it, with all their earlier group- and global-memory writes visible. Call
 * it from every work-item of the group or from none.
 */
void aql_host_barrier(void);

#ifdef __cplusplus
}
#endif

#endif
