/* SPDX-License-Identifier: MIT */
/*
 * Single-source kernels. One C file that includes this header compiles for
 * three targets with tools/aql-kcc:
 *
 *   amdgcn   OpenCL C 2.0 through clang, linked by ld.lld into a .hsaco;
 *   nvptx64  OpenCL C 2.0 through clang, emitted as PTX;
 *   host     C through cc, linked into a host code object: a shared object
 *            that aql_code_object_load() loads for the CPU agent.
 *
 * A kernel is declared with AQL_KERNEL() and its arguments as (type, name)
 * pairs; the body follows like a function body:
 *
 *   AQL_KERNEL(saxpy, (float, a), (aql_global const float *, x),
 *              (aql_global float *, y), (uint32_t, n))
 *   {
 *           uint32_t i = aql_global_id(0);
 *           if (i < n)
 *                   y[i] = a * x[i] + y[i];
 *   }
 *
 * The kernarg layout is the same on every target: the explicit arguments in
 * order, each at its natural alignment (on AMDGPU the hidden arguments
 * follow). Arguments are scalars (integers, float, double) or pointers to
 * global memory, written aql_global T *. On the host the argument block is
 * a C struct, and the exported symbol "<name>.kd" is an
 * aql_host_kernel_descriptor describing the arguments, the static LDS size
 * and the entry; on the GPU targets the kernel is an OpenCL __kernel with
 * the same name.
 *
 * Ids and sizes take a dimension 0..2 (a constant); out of range, ids are
 * 0 and sizes 1. Only what this header offers behaves the same on every
 * target: OpenCL builtins do not exist on the host, and libc does not exist
 * on the GPU.
 *
 * For code of its own per target, AQL_KERNEL_TARGET_AMDGCN,
 * AQL_KERNEL_TARGET_NVPTX or AQL_KERNEL_TARGET_HOST is defined to 1.
 *
 * Host code objects cannot use thread-local storage: the kernel body reads
 * its ids from the work-item loop that calls it (see AQL_KERNEL_NO_BARRIER),
 * and code outside a body reaches the calling work-item through
 * aql_host_workitem_current(), which the loader binds to libaql.
 */
#ifndef AQL_KERNEL_H
#define AQL_KERNEL_H

#if defined(__OPENCL_C_VERSION__) && defined(__AMDGCN__)
#define AQL_KERNEL_TARGET_AMDGCN 1
#elif defined(__OPENCL_C_VERSION__) && defined(__NVPTX__)
#define AQL_KERNEL_TARGET_NVPTX 1
#elif defined(__OPENCL_C_VERSION__)
#error "aql/kernel.h: OpenCL builds must target amdgcn or nvptx64"
#else
#define AQL_KERNEL_TARGET_HOST 1
#endif

#ifdef __OPENCL_C_VERSION__
#if __OPENCL_C_VERSION__ < 200
#error "aql/kernel.h needs OpenCL C 2.0 (-cl-std=CL2.0) for the generic address space"
#endif
/* Freestanding fixed-width types; OpenCL has no <stdint.h>. */
typedef __INT8_TYPE__ int8_t;
typedef __UINT8_TYPE__ uint8_t;
typedef __INT16_TYPE__ int16_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT64_TYPE__ int64_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INTPTR_TYPE__ intptr_t;
typedef __UINTPTR_TYPE__ uintptr_t;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;
#ifndef INT32_MAX
#define INT32_MIN (-2147483647 - 1)
#define INT32_MAX 2147483647
#define UINT32_MAX 0xffffffffu
#define INT64_MAX 0x7fffffffffffffffl
#define UINT64_MAX 0xfffffffffffffffful
#endif
#ifndef NULL
#define NULL ((void *)0)
#endif

/* Pointers to global memory and to LDS (the group segment). */
#define aql_global __global
#define aql_local __local
#define AQL_INLINE static inline __attribute__((always_inline))

/* The ids of a work-item run in a kernel's device-function form (see
 * aql_wg_ids below): the host's struct aql_host_ids_, field for field. */
struct aql_gpu_ids_ {
	uint32_t item[3];		/* "local" is an address space in OpenCL */
	uint32_t group[3];
	uint32_t size[3];
	uint32_t wg[3];
	uint32_t grid[3];
};
typedef struct aql_gpu_ids_ aql_wg_ids;
#else
#include <stddef.h>
#include <stdint.h>
#include <aql/host_kernel.h>
#include <aql/metadata.h>

#define aql_global
#define aql_local
#define AQL_INLINE static inline __attribute__((always_inline))

/*
 * The work-item cannot change while its kernel body runs (a barrier
 * resumes the same fiber), so calls may be merged.
 */
const aql_host_workitem *aql_host_workitem_current(void) __attribute__((const));
#endif

/* Memory orders for the atomics below. */
#define AQL_RELAXED __ATOMIC_RELAXED
#define AQL_SEQ_CST __ATOMIC_SEQ_CST

/* ---------------------------------------------------------------------- */
/* Work-item ids and sizes                                                 */

/*
 * name(c, dim), the query of one id where a caller may pass the ids: dflt
 * for dim out of range, c->field[dim] when c is not null, else what the
 * statements in otherwise return (the hardware's, or libaql's).
 */
#define AQL_ID_QUERY_(name, ids, field, dflt, otherwise)                       \
	AQL_INLINE uint32_t name(const ids *c, unsigned dim)                   \
	{                                                                      \
		if (dim > 2)                                                   \
			return (dflt);                                         \
		if (c)                                                         \
			return c->field[dim];                                  \
		otherwise                                                      \
	}

#if defined(AQL_KERNEL_TARGET_AMDGCN)

/* The dispatch packet: work-group sizes at byte 4, grid sizes at 12,
 * group_segment_size at 28. */
AQL_INLINE __constant uint8_t *aql_amdgcn_packet_(void)
{
	return (__constant uint8_t *)__builtin_amdgcn_dispatch_ptr();
}

AQL_INLINE uint32_t aql_local_id(unsigned dim)
{
	return dim == 0 ? __builtin_amdgcn_workitem_id_x()
	     : dim == 1 ? __builtin_amdgcn_workitem_id_y()
	     : dim == 2 ? __builtin_amdgcn_workitem_id_z() : 0;
}

AQL_INLINE uint32_t aql_group_id(unsigned dim)
{
	return dim == 0 ? __builtin_amdgcn_workgroup_id_x()
	     : dim == 1 ? __builtin_amdgcn_workgroup_id_y()
	     : dim == 2 ? __builtin_amdgcn_workgroup_id_z() : 0;
}

AQL_INLINE uint32_t aql_enqueued_local_size(unsigned dim)
{
	return dim < 3 ? ((__constant uint16_t *)(aql_amdgcn_packet_() + 4))[dim] : 1;
}

AQL_INLINE uint32_t aql_global_size(unsigned dim)
{
	return dim < 3 ? ((__constant uint32_t *)(aql_amdgcn_packet_() + 12))[dim] : 1;
}

AQL_INLINE uint32_t aql_local_size(unsigned dim)
{
	uint32_t wg = aql_enqueued_local_size(dim);
	uint32_t left = aql_global_size(dim) - aql_group_id(dim) * wg;

	return left < wg ? left : wg;
}

#elif defined(AQL_KERNEL_TARGET_NVPTX)

/*
 * A kernel body reads its ids from the special registers, or, in the
 * device-function form that NVIDIA's resident processor calls
 * (nv/README.md), from the aql_wg_ids the processor passes: the body's
 * parameter aql_ids_ hides the file-scope null below, as on the host.
 */
static const __generic struct aql_gpu_ids_ *__constant aql_ids_ __attribute__((unused)) = 0;

/* v from the processor's ids when c is not null, else the register's. */
#define AQL_NV_ID_(field, dflt, x, y, z)                                       \
	AQL_ID_QUERY_(aql_nv_##field##_, struct aql_gpu_ids_, field, dflt,     \
		      return dim == 0 ? (x) : dim == 1 ? (y) : (z);)
AQL_NV_ID_(item, 0, __nvvm_read_ptx_sreg_tid_x(), __nvvm_read_ptx_sreg_tid_y(),
	   __nvvm_read_ptx_sreg_tid_z())
AQL_NV_ID_(group, 0, __nvvm_read_ptx_sreg_ctaid_x(), __nvvm_read_ptx_sreg_ctaid_y(),
	   __nvvm_read_ptx_sreg_ctaid_z())
/* CUDA grids are whole blocks: no partial work-groups. */
AQL_NV_ID_(wg, 1, __nvvm_read_ptx_sreg_ntid_x(), __nvvm_read_ptx_sreg_ntid_y(),
	   __nvvm_read_ptx_sreg_ntid_z())
AQL_NV_ID_(grid, 1, __nvvm_read_ptx_sreg_nctaid_x() * __nvvm_read_ptx_sreg_ntid_x(),
	   __nvvm_read_ptx_sreg_nctaid_y() * __nvvm_read_ptx_sreg_ntid_y(),
	   __nvvm_read_ptx_sreg_nctaid_z() * __nvvm_read_ptx_sreg_ntid_z())

#define aql_local_id(dim) aql_nv_item_(aql_ids_, (dim))
#define aql_group_id(dim) aql_nv_group_(aql_ids_, (dim))
#define aql_local_size(dim) aql_nv_wg_(aql_ids_, (dim))
#define aql_enqueued_local_size(dim) aql_nv_wg_(aql_ids_, (dim))
#define aql_global_size(dim) aql_nv_grid_(aql_ids_, (dim))

#else /* host */

/*
 * The ids of the running work-item. The work-group function of a kernel
 * (AQL_KERNEL_NO_BARRIER) fills one on its stack, local ids being its loop
 * variables, and hands it to the inlined body as the parameter aql_ids_,
 * which hides the file-scope null below: there every query is a load the
 * compiler sees through. Code outside a kernel body (a helper function)
 * sees the null, and asks libaql for the work-item instead, which the
 * work-group function then keeps current (see AQL_IDS_OUTSIDE_MARK_).
 */
struct aql_host_ids_ {
	uint32_t local[3];
	uint32_t group[3];
	uint32_t size[3];	/* this group's; the last may be partial */
	uint32_t wg[3];		/* the dispatch's work-group size */
	uint32_t grid[3];
};

static const struct aql_host_ids_ *const aql_ids_ __attribute__((unused)) = NULL;

/*
 * aql_wg_ids: what a caller of a kernel's device-function form passes for
 * each work-item (ids within the group, the group's ids, the group's size,
 * the dispatch's work-group and grid sizes). Every kernel declared with
 * AQL_KERNEL or AQL_KERNEL_NO_BARRIER also defines, beside its entry,
 *
 *   void <name>_aql_dev(const void *kernarg, const aql_wg_ids *ids);
 *   void <name>_aql_dev_nb(...)   (the same, for AQL_KERNEL_NO_BARRIER)
 *
 * an exported function (a .visible .func in PTX) that runs one work-item
 * of the body with the kernarg block and the ids given rather than the
 * hardware's: NVIDIA's resident processor (nv/README.md) links and calls
 * it. The _nb name says that the body never calls aql_barrier(), so that
 * work-items may run in a group smaller than the caller's block. Kernels
 * with static LDS (AQL_KERNEL_LDS) have none.
 */
typedef struct aql_host_ids_ aql_wg_ids;

AQL_INLINE struct aql_host_ids_ aql_host_ids_of_(const aql_host_workitem *wi)
{
	const aql_dispatch_packet *p = wi->packet;

	return (struct aql_host_ids_){
		.local = { wi->local_id[0], wi->local_id[1], wi->local_id[2] },
		.group = { wi->group_id[0], wi->group_id[1], wi->group_id[2] },
		.size = { wi->group_size[0], wi->group_size[1], wi->group_size[2] },
		.wg = { p->workgroup_size_x, p->workgroup_size_y, p->workgroup_size_z },
		.grid = { p->grid_size_x, p->grid_size_y, p->grid_size_z },
	};
}

/*
 * An id query outside a kernel body puts a byte in the section
 * aql_ids_outside; where the code object has one, the linker defines
 * __start_aql_ids_outside and the work-group functions keep the work-item
 * current for such queries (a store per id that would stop vectorising).
 */
extern const char __start_aql_ids_outside[] __attribute__((weak, visibility("hidden")));
#define AQL_IDS_OUTSIDE_MARK_()                                                \
	__asm__ volatile(".pushsection aql_ids_outside,\"a\"\n.byte 1\n.popsection")

/* aql_host_<field>_(ids, dim): dflt for dim out of range. */
#define AQL_HOST_ID_(field, dflt, outside)                                     \
	AQL_ID_QUERY_(aql_host_##field##_, struct aql_host_ids_, field, dflt,  \
		      AQL_IDS_OUTSIDE_MARK_(); return (outside);)
AQL_HOST_ID_(local, 0, aql_host_workitem_current()->local_id[dim])
AQL_HOST_ID_(group, 0, aql_host_workitem_current()->group_id[dim])
AQL_HOST_ID_(size, 1, aql_host_workitem_current()->group_size[dim])
AQL_HOST_ID_(wg, 1, (&aql_host_workitem_current()->packet->workgroup_size_x)[dim])
AQL_HOST_ID_(grid, 1, (&aql_host_workitem_current()->packet->grid_size_x)[dim])

#define aql_local_id(dim) aql_host_local_(aql_ids_, (dim))
#define aql_group_id(dim) aql_host_group_(aql_ids_, (dim))
#define aql_local_size(dim) aql_host_size_(aql_ids_, (dim))
#define aql_enqueued_local_size(dim) aql_host_wg_(aql_ids_, (dim))
#define aql_global_size(dim) aql_host_grid_(aql_ids_, (dim))

#endif

/*
 * aql_local_id(dim): id within the work-group.
 * aql_group_id(dim): id of the work-group.
 * aql_local_size(dim): size of this work-group; the last one of a grid
 *   that is not a multiple of the work-group size is smaller (not on NVPTX,
 *   where grids are whole work-groups).
 * aql_enqueued_local_size(dim): the work-group size of the dispatch.
 * aql_global_size(dim): the grid size (on NVPTX, the number of groups
 *   times the work-group size).
 * aql_num_groups(dim), aql_global_id(dim), aql_local_linear_id(): derived.
 */
#if defined(AQL_KERNEL_TARGET_HOST) || defined(AQL_KERNEL_TARGET_NVPTX)
/* Macros, so that they too read the ids in scope. */
#define aql_num_groups(dim)                                                    \
	(aql_global_size(dim) / aql_enqueued_local_size(dim) +                 \
	 (aql_global_size(dim) % aql_enqueued_local_size(dim) != 0))
#define aql_global_id(dim)                                                     \
	(aql_group_id(dim) * aql_enqueued_local_size(dim) + aql_local_id(dim))
#define aql_local_linear_id()                                                  \
	((aql_local_id(2) * aql_local_size(1) + aql_local_id(1)) *             \
		 aql_local_size(0) + aql_local_id(0))
#else
AQL_INLINE uint32_t aql_num_groups(unsigned dim)
{
	uint32_t grid = aql_global_size(dim), wg = aql_enqueued_local_size(dim);

	return grid / wg + (grid % wg != 0);
}

AQL_INLINE uint32_t aql_global_id(unsigned dim)
{
	return aql_group_id(dim) * aql_enqueued_local_size(dim) + aql_local_id(dim);
}

AQL_INLINE uint32_t aql_local_linear_id(void)
{
	return (aql_local_id(2) * aql_local_size(1) + aql_local_id(1)) *
		       aql_local_size(0) + aql_local_id(0);
}
#endif

/* ---------------------------------------------------------------------- */
/* Barrier and LDS                                                         */

/*
 * Work-group barrier: returns once every work-item of the group has called
 * it, with their earlier global and LDS writes visible to the group. Call it
 * from every work-item of the group or from none, and never in a kernel
 * declared with AQL_KERNEL_NO_BARRIER (the CPU agent fails that dispatch).
 */
AQL_INLINE void aql_barrier(void)
{
#if defined(AQL_KERNEL_TARGET_AMDGCN)
	__builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
	__builtin_amdgcn_s_barrier();
	__builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#elif defined(AQL_KERNEL_TARGET_NVPTX)
	__nvvm_bar_sync(0);
#else
	aql_host_barrier();
#endif
}

/* Dynamic LDS starts at the static LDS size rounded up to this. */
#define AQL_DYNAMIC_LDS_ALIGN 16u

#if defined(AQL_KERNEL_TARGET_NVPTX)
/* CUDA places every extern .shared array right after the static ones. */
__asm__(".extern .shared .align 16 .b8 aql_dynamic_lds_[];");
#endif

/*
 * Dynamic LDS: the group segment bytes after the kernel's static LDS,
 * 16-byte aligned. The dispatch sets the packet's group_segment_size to
 * the static size rounded up to 16 plus the dynamic bytes (on CUDA: the
 * launch's dynamic shared memory size). Call it from the kernel body or
 * from functions inlined into it: on AMDGPU the static size is known only
 * inside the kernel.
 */
AQL_INLINE aql_local void *aql_dynamic_lds(void)
{
#if defined(AQL_KERNEL_TARGET_AMDGCN)
	uint32_t off = (__builtin_amdgcn_groupstaticsize() + AQL_DYNAMIC_LDS_ALIGN - 1) &
		       ~(AQL_DYNAMIC_LDS_ALIGN - 1);

	return (aql_local void *)(uintptr_t)off;
#elif defined(AQL_KERNEL_TARGET_NVPTX)
	uint64_t addr;

	__asm__("mov.u64 %0, aql_dynamic_lds_;" : "=l"(addr));
	return (aql_local void *)(uintptr_t)addr;
#else
	const aql_host_workitem *wi = aql_host_workitem_current();
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)wi->packet->kernel_object;
	uint32_t off = (kd->group_segment_fixed_size + AQL_DYNAMIC_LDS_ALIGN - 1) &
		       ~(AQL_DYNAMIC_LDS_ALIGN - 1);

	return (char *)wi->group_segment + off;
#endif
}

/* Bytes of dynamic LDS aql_dynamic_lds() points to. */
AQL_INLINE uint32_t aql_dynamic_lds_size(void)
{
#if defined(AQL_KERNEL_TARGET_AMDGCN)
	uint32_t total = *(__constant uint32_t *)(aql_amdgcn_packet_() + 28);
	uint32_t off = (__builtin_amdgcn_groupstaticsize() + AQL_DYNAMIC_LDS_ALIGN - 1) &
		       ~(AQL_DYNAMIC_LDS_ALIGN - 1);
#elif defined(AQL_KERNEL_TARGET_NVPTX)
	uint32_t total, off = 0;

	__asm__("mov.u32 %0, %%dynamic_smem_size;" : "=r"(total));
#else
	const aql_host_workitem *wi = aql_host_workitem_current();
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)wi->packet->kernel_object;
	uint32_t total = wi->packet->group_segment_size;
	uint32_t off = (kd->group_segment_fixed_size + AQL_DYNAMIC_LDS_ALIGN - 1) &
		       ~(AQL_DYNAMIC_LDS_ALIGN - 1);
#endif
	return total > off ? total - off : 0;
}

/* ---------------------------------------------------------------------- */
/* Dynamic LDS arrays placed by the host (aql_lds_layout, aql/lds.h)       */

/*
 * AQL_LDS_ARRAY(T, name, offset) declares `aql_local T *const name`: the
 * array the host's layout placed offset bytes after aql_dynamic_lds(),
 * offset being the uint32_t that AQL_LDS_ADD() gave the host and the
 * kernel received as an argument. Declare it where aql_dynamic_lds() may
 * be called (the kernel body). The host aligned the offset for T, and
 * refuses alignments above AQL_DYNAMIC_LDS_ALIGN, so that is the limit.
 *
 * AQL_LDS_ARRAY_FITS(T, offset, count): whether count elements of T at
 * offset are aligned for T and lie within the dispatch's dynamic LDS, for
 * a kernel that checks its arguments.
 */
#define AQL_LDS_ARRAY(T, name, offset)                                         \
	aql_local T *const name = (aql_local T *)aql_lds_at_(offset)
#define AQL_LDS_ARRAY_FITS(T, offset, count)                                   \
	((offset) % __alignof__(T) == 0 &&                                     \
	 aql_lds_fits_((offset), (uint64_t)sizeof(T) * (uint64_t)(count)))

AQL_INLINE aql_local void *aql_lds_at_(uint32_t offset)
{
	return (aql_local char *)aql_dynamic_lds() + offset;
}

AQL_INLINE int aql_lds_fits_(uint32_t offset, uint64_t bytes)
{
	return (uint64_t)offset + bytes <= aql_dynamic_lds_size();
}

/* ---------------------------------------------------------------------- */
/* Atomics on global memory and LDS                                        */

/*
 * Each returns the value *p held before. p points to global memory or LDS
 * (a generic pointer on the GPU targets); order is AQL_RELAXED or
 * AQL_SEQ_CST. The scope is the whole device (the agent).
 *
 *   uint32_t aql_atomic_add_u32(uint32_t *p, uint32_t v, int order);
 *   uint64_t aql_atomic_add_u64(uint64_t *p, uint64_t v, int order);
 *   uint32_t aql_atomic_sub_u32(uint32_t *p, uint32_t v, int order);
 *   uint32_t aql_atomic_xchg_u32(uint32_t *p, uint32_t v, int order);
 *   uint32_t aql_atomic_min_u32(uint32_t *p, uint32_t v, int order);
 *   uint32_t aql_atomic_max_u32(uint32_t *p, uint32_t v, int order);
 *   int32_t aql_atomic_min_i32(int32_t *p, int32_t v, int order);
 *   int32_t aql_atomic_max_i32(int32_t *p, int32_t v, int order);
 *
 *   uint32_t aql_atomic_cas_u32(uint32_t *p, uint32_t expected,
 *                               uint32_t desired, int order);
 *   uint64_t aql_atomic_cas_u64(uint64_t *p, uint64_t expected,
 *                               uint64_t desired, int order);
 *     Store desired if *p == expected; return the old value either way.
 *
 *   uint32_t aql_atomic_load_u32(uint32_t *p, int order);
 *   void aql_atomic_store_u32(uint32_t *p, uint32_t v, int order);
 *     Plain atomic load and store, for flags and counters.
 *
 * All but sub, load and store are one line each at the end of this
 * section, made by the generators below, so that how a target does an
 * atomic is written once.
 */

/*
 * The bodies, per target, of functions with parameters p, v (or expected
 * and desired) and order:
 *   AQL_RMW_BODY_(T, hip, nv, NT, host): read-modify-write with the AMDGPU
 *     builtin __hip_atomic_<hip>, the NVVM builtin __nvvm_atom_<nv> (which
 *     takes NT), or on the host the statements host;
 *   AQL_CAS_BODY_(T, nv, NT): compare-exchange, nv and NT as above.
 */
#if defined(AQL_KERNEL_TARGET_AMDGCN)
/* The __hip_atomic builtins take a scope; clang's __atomic ones do not. */
#define AQL_AGENT_SCOPE_ 4	/* __HIP_MEMORY_SCOPE_AGENT */
#define AQL_RMW_BODY_(T, hip, nv, NT, host)                                    \
	return __hip_atomic_##hip(p, v, order, AQL_AGENT_SCOPE_)
#define AQL_CAS_BODY_(T, nv, NT)                                               \
	__hip_atomic_compare_exchange_strong(p, &expected, desired, order,     \
					     order, AQL_AGENT_SCOPE_);         \
	return expected
#elif defined(AQL_KERNEL_TARGET_NVPTX)
/*
 * clang's generic atomics become library calls on nvptx64 in OpenCL mode;
 * the NVVM builtins are PTX atom (relaxed, .gpu scope). seq_cst adds
 * fence.sc on either side.
 */
AQL_INLINE void aql_nv_fence_(int order)
{
	if (order != AQL_RELAXED)
		__nvvm_membar_gl();
}

/* Returns the expression call as T, between the fences order needs. */
#define AQL_NV_FENCED_(T, call)                                                \
	T r_;                                                                  \
                                                                               \
	aql_nv_fence_(order);                                                  \
	r_ = (T)(call);                                                        \
	aql_nv_fence_(order);                                                  \
	return r_
#define AQL_RMW_BODY_(T, hip, nv, NT, host)                                    \
	AQL_NV_FENCED_(T, __nvvm_atom_##nv((volatile NT *)p, (NT)v))
#define AQL_CAS_BODY_(T, nv, NT)                                               \
	AQL_NV_FENCED_(T, __nvvm_atom_##nv((volatile NT *)p, (NT)expected, (NT)desired))
#else
#define AQL_RMW_BODY_(T, hip, nv, NT, host) host
#define AQL_CAS_BODY_(T, nv, NT)                                               \
	__atomic_compare_exchange_n(p, &expected, desired, 0, order,           \
				    order == AQL_RELAXED ? AQL_RELAXED : AQL_SEQ_CST); \
	return expected
/* gcc has no __atomic_fetch_min/max: a CAS loop while v cmp *p holds. */
#define AQL_HOST_MINMAX_(T, p, v, order, cmp)                                  \
	T old_ = __atomic_load_n((p), __ATOMIC_RELAXED);                       \
	while (((v) cmp old_) &&                                               \
	       !__atomic_compare_exchange_n((p), &old_, (v), 1, (order),       \
					    __ATOMIC_RELAXED))                 \
		;                                                              \
	if (order != AQL_RELAXED)                                              \
		__atomic_thread_fence(order);                                  \
	return old_
#endif

/* The read-modify-write atomics share their signature and GPU bodies. */
#define AQL_ATOMIC_RMW_FN_(name, T, hip, nv, NT, host)                         \
	AQL_INLINE T aql_atomic_##name(T *p, T v, int order)                   \
	{                                                                      \
		AQL_RMW_BODY_(T, hip, nv, NT, host);                           \
	}
/* Ones the host has a builtin for, __atomic_<host>(p, v, order). */
#define AQL_ATOMIC_FETCH_OP_(name, T, hip, nv, NT, host)                       \
	AQL_ATOMIC_RMW_FN_(name, T, hip, nv, NT, return __atomic_##host(p, v, order))
/* Min and max, cmp < or >: a CAS loop on the host. */
#define AQL_ATOMIC_MINMAX_(name, T, hip, nv, NT, cmp)                          \
	AQL_ATOMIC_RMW_FN_(name, T, hip, nv, NT, AQL_HOST_MINMAX_(T, p, v, order, cmp))
/* Compare-exchange takes two values. */
#define AQL_ATOMIC_CAS_(name, T, nv, NT)                                       \
	AQL_INLINE T aql_atomic_##name(T *p, T expected, T desired, int order) \
	{                                                                      \
		AQL_CAS_BODY_(T, nv, NT);                                      \
	}

/*
 * The atomics listed above. Columns: aql_atomic_<name>, the type, the
 * AMDGPU builtin __hip_atomic_<op>, the NVVM builtin __nvvm_atom_<op> and
 * the type it takes, then the host builtin __atomic_<op> or, for min and
 * max, the comparison of the host's CAS loop.
 */
AQL_ATOMIC_FETCH_OP_(add_u32,  uint32_t, fetch_add, add_gen_i,  int,      fetch_add)
AQL_ATOMIC_FETCH_OP_(add_u64,  uint64_t, fetch_add, add_gen_l,  long,     fetch_add)
AQL_ATOMIC_FETCH_OP_(xchg_u32, uint32_t, exchange,  xchg_gen_i, int,      exchange_n)
AQL_ATOMIC_MINMAX_(min_u32,    uint32_t, fetch_min, min_gen_ui, unsigned, <)
AQL_ATOMIC_MINMAX_(max_u32,    uint32_t, fetch_max, max_gen_ui, unsigned, >)
AQL_ATOMIC_MINMAX_(min_i32,    int32_t,  fetch_min, min_gen_i,  int,      <)
AQL_ATOMIC_MINMAX_(max_i32,    int32_t,  fetch_max, max_gen_i,  int,      >)
AQL_ATOMIC_CAS_(cas_u32,       uint32_t,            cas_gen_i,  int)
AQL_ATOMIC_CAS_(cas_u64,       uint64_t,            cas_gen_l,  long)

AQL_INLINE uint32_t aql_atomic_sub_u32(uint32_t *p, uint32_t v, int order)
{
	return aql_atomic_add_u32(p, 0u - v, order);
}

AQL_INLINE uint32_t aql_atomic_load_u32(uint32_t *p, int order)
{
#if defined(AQL_KERNEL_TARGET_AMDGCN)
	return __hip_atomic_load(p, order, AQL_AGENT_SCOPE_);
#elif defined(AQL_KERNEL_TARGET_NVPTX)
	AQL_NV_FENCED_(uint32_t, *(volatile uint32_t *)p);
#else
	return __atomic_load_n(p, order);
#endif
}

AQL_INLINE void aql_atomic_store_u32(uint32_t *p, uint32_t v, int order)
{
#if defined(AQL_KERNEL_TARGET_AMDGCN)
	__hip_atomic_store(p, v, order, AQL_AGENT_SCOPE_);
#elif defined(AQL_KERNEL_TARGET_NVPTX)
	aql_nv_fence_(order);
	*(volatile uint32_t *)p = v;
	aql_nv_fence_(order);
#else
	__atomic_store_n(p, v, order);
#endif
}

/* ---------------------------------------------------------------------- */
/* Kernel declarations                                                     */

/*
 * The largest work-group a kernel accepts: 1024 unless defined before this
 * header is included. It becomes the AMDGPU kernel's
 * max_flat_workgroup_size (OpenCL's default would be 256) and the host
 * descriptor's; CUDA applies its own limit.
 */
#ifndef AQL_KERNEL_MAX_WORKGROUP_SIZE
#define AQL_KERNEL_MAX_WORKGROUP_SIZE 1024
#endif

/*
 * AQL_KERNEL(name, (type, arg)...): a kernel that may call aql_barrier().
 * AQL_KERNEL_NO_BARRIER(name, (type, arg)...): one that never does. Its
 *   host build is a work-group function: the loop over the group's
 *   work-items compiled with the body inlined, the ids being the loop's
 *   variables, so that the compiler can vectorise across work-items (as
 *   PoCL's work-group functions and ISPC do). AQL_KERNEL's host build runs
 *   each work-item as a fiber, to switch at barriers.
 * AQL_KERNEL_LDS(name, lds_type, (type, arg)...): one with static LDS of
 *   lds_type (a struct, say), which the body reaches through the pointer
 *   `lds` (aql_local lds_type *). The work-items of a group share it.
 *
 * From 1 to 16 arguments. The body follows the macro in braces.
 */
#define AQL_KERNEL(kn, ...) AQL_KERNEL_PLAIN_(kn, 0, __VA_ARGS__)
#define AQL_KERNEL_NO_BARRIER(kn, ...) AQL_KERNEL_NB_(kn, __VA_ARGS__)
#define AQL_KERNEL_LDS(kn, lds_type, ...)                                      \
	AQL_KERNEL_WITH_LDS_(kn, 0, lds_type, __VA_ARGS__)

/* Preprocessor plumbing: apply M(ctx, type, name) to each pair. */
#define AQL_PP_CAT_(a, b) a##b
#define AQL_PP_CAT(a, b) AQL_PP_CAT_(a, b)
#define AQL_PP_STRIP_(...) __VA_ARGS__
#define AQL_PP_CALL_(M, ...) M(__VA_ARGS__)
#define AQL_PP_APPLY_(M, ctx, pair) AQL_PP_CALL_(M, ctx, AQL_PP_STRIP_ pair)
/* Over 16 arguments: an error naming AQL_PP_..._TOO_MANY_ARGUMENTS. */
#define AQL_PP_NARG(...)                                                       \
	AQL_PP_NARG_(__VA_ARGS__, AQL_PP_OVER_16_, AQL_PP_OVER_16_,            \
		     AQL_PP_OVER_16_, AQL_PP_OVER_16_, AQL_PP_OVER_16_,        \
		     AQL_PP_OVER_16_, AQL_PP_OVER_16_, AQL_PP_OVER_16_, 16, 15, \
		     14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define AQL_PP_NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13,   \
		     _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, n, \
		     ...) n
#define AQL_PP_OVER_16_ TOO_MANY_ARGUMENTS

/* AQL_PP_LIST: comma separated; AQL_PP_SEQ: juxtaposed. */
#define AQL_PP_LIST(M, ctx, ...)                                               \
	AQL_PP_CAT(AQL_PP_LIST_, AQL_PP_NARG(__VA_ARGS__))(M, ctx, __VA_ARGS__)
#define AQL_PP_SEQ(M, ctx, ...)                                                \
	AQL_PP_CAT(AQL_PP_SEQ_, AQL_PP_NARG(__VA_ARGS__))(M, ctx, __VA_ARGS__)

#define AQL_PP_LIST_1(M, c, a) AQL_PP_APPLY_(M, c, a)
#define AQL_PP_LIST_2(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_1(M, c, __VA_ARGS__)
#define AQL_PP_LIST_3(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_2(M, c, __VA_ARGS__)
#define AQL_PP_LIST_4(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_3(M, c, __VA_ARGS__)
#define AQL_PP_LIST_5(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_4(M, c, __VA_ARGS__)
#define AQL_PP_LIST_6(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_5(M, c, __VA_ARGS__)
#define AQL_PP_LIST_7(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_6(M, c, __VA_ARGS__)
#define AQL_PP_LIST_8(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_7(M, c, __VA_ARGS__)
#define AQL_PP_LIST_9(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_8(M, c, __VA_ARGS__)
#define AQL_PP_LIST_10(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_9(M, c, __VA_ARGS__)
#define AQL_PP_LIST_11(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_10(M, c, __VA_ARGS__)
#define AQL_PP_LIST_12(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_11(M, c, __VA_ARGS__)
#define AQL_PP_LIST_13(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_12(M, c, __VA_ARGS__)
#define AQL_PP_LIST_14(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_13(M, c, __VA_ARGS__)
#define AQL_PP_LIST_15(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_14(M, c, __VA_ARGS__)
#define AQL_PP_LIST_16(M, c, a, ...) AQL_PP_APPLY_(M, c, a), AQL_PP_LIST_15(M, c, __VA_ARGS__)

#define AQL_PP_SEQ_1(M, c, a) AQL_PP_APPLY_(M, c, a)
#define AQL_PP_SEQ_2(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_1(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_3(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_2(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_4(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_3(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_5(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_4(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_6(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_5(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_7(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_6(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_8(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_7(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_9(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_8(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_10(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_9(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_11(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_10(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_12(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_11(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_13(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_12(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_14(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_13(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_15(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_14(M, c, __VA_ARGS__)
#define AQL_PP_SEQ_16(M, c, a, ...) AQL_PP_APPLY_(M, c, a) AQL_PP_SEQ_15(M, c, __VA_ARGS__)

/* One pair as a parameter, as an argument, as a struct member, ... */
#define AQL_PARAM_(ctx, T, n) T n
#define AQL_BODY_PARAM_(ctx, T, n) T n AQL_UNUSED_	/* ABI, maybe unused */
#define AQL_NAME_(ctx, T, n) n
#define AQL_MEMBER_(ctx, T, n) T n;
#define AQL_UNPACK_(a, T, n) a->n
#define AQL_UNUSED_ __attribute__((unused))

/*
 * How the host and NVPTX builds classify an argument type T. (T)0 if T is
 * a pointer, else a null void pointer: then `1 ? x : (void *)1` has type
 * "pointer to qualified void" and tells whether T points to const (c) or
 * volatile (v).
 */
#define AQL_PTR_OR_VOID_(T)                                                    \
	_Generic((T)0, _Bool: (void *)0, char: (void *)0,                      \
		 signed char: (void *)0, unsigned char: (void *)0,             \
		 short: (void *)0, unsigned short: (void *)0, int: (void *)0,  \
		 unsigned: (void *)0, long: (void *)0, unsigned long: (void *)0, \
		 long long: (void *)0, unsigned long long: (void *)0,          \
		 float: (void *)0, double: (void *)0, long double: (void *)0,  \
		 default: (T)0)
#define AQL_ARG_QUALS_(T, c, v)                                                \
	_Generic(1 ? AQL_PTR_OR_VOID_(T) : (void *)1,                          \
		 const void *: (c), volatile void *: (v),                      \
		 const volatile void *: (c) | (v), default: 0)
/* GCC and clang: 5 is pointer_type_class. */
#define AQL_IS_POINTER_(T) (__builtin_classify_type((T)0) == 5)

#ifndef AQL_KERNEL_TARGET_HOST

#define AQL_KD_NO_BARRIER_ 1	/* only the CPU agent reads this flag */
#define AQL_KERNEL_PLAIN_(kn, kf, ...) AQL_KERNEL_GPU_(kn, kf, _aql_dev, __VA_ARGS__)
#define AQL_KERNEL_NB_(kn, ...)                                                \
	AQL_KERNEL_GPU_(kn, AQL_KD_NO_BARRIER_, _aql_dev_nb, __VA_ARGS__)

#if defined(AQL_KERNEL_TARGET_AMDGCN)
#define AQL_KERNEL_ATTRS_                                                      \
	__attribute__((amdgpu_flat_work_group_size(1, AQL_KERNEL_MAX_WORKGROUP_SIZE)))
/* AMDGPU metadata describes the arguments (-cl-kernel-arg-info). */
#define AQL_KERNEL_DESCRIPTION_(kn, ...)
#else
#define AQL_KERNEL_ATTRS_

/*
 * PTX names parameters "<kernel>_param_N" and gives only their PTX types,
 * so the module also defines, per kernel, the constant byte array
 * __aql_md_<kernel> describing the arguments as the host build's table
 * does (loader/nv_object.c reads it from the PTX initialiser):
 *
 *   "AQLM", version (1), argument count; then per argument
 *   flags (AQL_NV_MD_*), size (2 bytes, little endian), alignment,
 *   the type as written (NUL-terminated), the name (NUL-terminated).
 *
 * A program-scope __constant variable is externally visible, so clang
 * emits it whether or not the kernel reads it.
 */
#define AQL_NV_MD_VERSION 1
#define AQL_NV_MD_POINTER 1u	/* a pointer to global memory */
#define AQL_NV_MD_CONST 2u	/* ... to const */
#define AQL_NV_MD_VOLATILE 4u	/* ... to volatile */
#define AQL_NV_MD_MEMBER_(ctx, T, n)                                           \
	uint8_t n##_aql_md[4];                                                 \
	char n##_aql_md_type[sizeof(#T)];                                      \
	char n##_aql_md_name[sizeof(#n)];
#define AQL_NV_MD_INIT_(ctx, T, n)                                             \
	{ AQL_IS_POINTER_(T) ? AQL_NV_MD_POINTER |                             \
		  AQL_ARG_QUALS_(T, AQL_NV_MD_CONST, AQL_NV_MD_VOLATILE) : 0,  \
	  sizeof(T) & 0xff, sizeof(T) >> 8, _Alignof(T) }, #T, #n,
#define AQL_KERNEL_DESCRIPTION_(kn, ...)                                       \
	__constant struct {                                                    \
		uint8_t head[6];                                               \
		AQL_PP_SEQ(AQL_NV_MD_MEMBER_, , __VA_ARGS__)                   \
	} __aql_md_##kn = {                                                    \
		{ 'A', 'Q', 'L', 'M', AQL_NV_MD_VERSION, AQL_PP_NARG(__VA_ARGS__) }, \
		AQL_PP_SEQ(AQL_NV_MD_INIT_, , __VA_ARGS__)                     \
	};
#endif

/* The device-function form (see aql_wg_ids): PTX only. */
#if defined(AQL_KERNEL_TARGET_NVPTX)
#define AQL_KERNEL_DEV_(kn, dev, ...)                                          \
	struct kn##_aql_args {                                                 \
		AQL_PP_SEQ(AQL_MEMBER_, , __VA_ARGS__)                         \
	};                                                                     \
	__attribute__((noinline)) void kn##dev(const void *kernarg,            \
					       const aql_wg_ids *ids)          \
	{                                                                      \
		const struct kn##_aql_args *a_ = kernarg;                      \
		kn##_aql_body(ids, AQL_PP_LIST(AQL_UNPACK_, a_, __VA_ARGS__));  \
	}
#else
#define AQL_KERNEL_DEV_(kn, dev, ...)
#endif

#define AQL_KERNEL_GPU_(kn, kf, dev, ...)                                      \
	AQL_KERNEL_DESCRIPTION_(kn, __VA_ARGS__)                               \
	AQL_INLINE void kn##_aql_body(const struct aql_gpu_ids_ *aql_ids_ AQL_UNUSED_, \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__)); \
	__kernel AQL_KERNEL_ATTRS_ void kn(AQL_PP_LIST(AQL_PARAM_, , __VA_ARGS__)) \
	{                                                                      \
		kn##_aql_body(0, AQL_PP_LIST(AQL_NAME_, , __VA_ARGS__));       \
	}                                                                      \
	AQL_KERNEL_DEV_(kn, dev, __VA_ARGS__)                                  \
	AQL_INLINE void kn##_aql_body(const struct aql_gpu_ids_ *aql_ids_ AQL_UNUSED_, \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__))

/* OpenCL allows __local variables only in kernel scope. */
#define AQL_KERNEL_WITH_LDS_(kn, kf, lds_type, ...)                            \
	AQL_KERNEL_DESCRIPTION_(kn, __VA_ARGS__)                               \
	AQL_INLINE void kn##_aql_body(__local __typeof__(lds_type) *lds AQL_UNUSED_, \
					AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__)); \
	__kernel AQL_KERNEL_ATTRS_ void kn(AQL_PP_LIST(AQL_PARAM_, , __VA_ARGS__)) \
	{                                                                      \
		__local __typeof__(lds_type) kn##_aql_lds;                     \
		kn##_aql_body(&kn##_aql_lds,                                   \
				AQL_PP_LIST(AQL_NAME_, , __VA_ARGS__));        \
	}                                                                      \
	AQL_INLINE void kn##_aql_body(__local __typeof__(lds_type) *lds AQL_UNUSED_, \
					AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__))

#else /* host */

#define AQL_ARG_ENTRY_(args_type, T, n)                                        \
	{                                                                      \
		.name = #n,                                                    \
		.type_name = #T,                                               \
		.offset = __builtin_offsetof(args_type, n),                    \
		.size = sizeof(T),                                             \
		.align = _Alignof(T),                                          \
		.kind = AQL_IS_POINTER_(T) ? AQL_ARG_GLOBAL_BUFFER : AQL_ARG_BY_VALUE, \
		.address_space = AQL_IS_POINTER_(T) ? AQL_AS_GLOBAL : AQL_AS_NONE, \
		.flags = AQL_IS_POINTER_(T) ?                                  \
			 AQL_ARG_QUALS_(T, AQL_ARG_IS_CONST, AQL_ARG_IS_VOLATILE) : 0, \
	},
#define AQL_UNPACK_COPY_(a, T, n) a.n

/*
 * The argument struct, the table, and the exported "<name>.kd", whose
 * entry is kn##_aql_entry: a work-group function (aql_host_workgroup_fn)
 * with AQL_HOST_KD_WORKGROUP in kf, else one work-item's.
 */
#define AQL_HOST_KERNEL_(kn, kf, lds_size, entry_field, entry_params, ...)     \
	struct kn##_aql_args {                                                 \
		AQL_PP_SEQ(AQL_MEMBER_, , __VA_ARGS__)                         \
	};                                                                     \
	static const aql_host_kernel_arg kn##_aql_arg_table[] = {              \
		AQL_PP_SEQ(AQL_ARG_ENTRY_, struct kn##_aql_args, __VA_ARGS__)  \
	};                                                                     \
	static void kn##_aql_entry entry_params;                               \
	__attribute__((visibility("default"), used))                           \
	const aql_host_kernel_descriptor kn##_kd __asm__(#kn ".kd") = {        \
		.group_segment_fixed_size = (lds_size),                        \
		.kernarg_size = sizeof(struct kn##_aql_args),                  \
		.kernarg_align = _Alignof(struct kn##_aql_args) < 16 ? 16      \
				 : _Alignof(struct kn##_aql_args),             \
		.entry_field = kn##_aql_entry,                                 \
		.magic = AQL_HOST_KD_MAGIC,                                    \
		.flags = (kf),                                                 \
		.max_flat_workgroup_size = AQL_KERNEL_MAX_WORKGROUP_SIZE,      \
		.arg_count = AQL_PP_NARG(__VA_ARGS__),                         \
		.args = kn##_aql_arg_table,                                    \
		.name = #kn,                                                   \
	};

/*
 * The device-function form (see aql_wg_ids): the emulated CUDA driver's
 * host build of NVIDIA's resident processor calls it. The body gets a
 * copy of the caller's ids, whose address is never null: an id query that
 * could see a null pointer keeps its path for queries outside a body, and
 * that path's mark (AQL_IDS_OUTSIDE_MARK_) would stop every work-group
 * function of the code object vectorising.
 */
#define AQL_HOST_DEV_(kn, dev, ...)                                            \
	__attribute__((visibility("default"))) void kn##dev(const void *kernarg, \
							    const aql_wg_ids *ids); \
	void kn##dev(const void *kernarg, const aql_wg_ids *ids)               \
	{                                                                      \
		const struct kn##_aql_args *a_ = kernarg;                      \
		const struct aql_host_ids_ ids_ = *ids;                        \
		kn##_aql_body(&ids_, AQL_PP_LIST(AQL_UNPACK_, a_, __VA_ARGS__)); \
	}

/* One work-item per call, as a fiber that may stop at barriers. */
#define AQL_KERNEL_PLAIN_(kn, kf, ...)                                         \
	AQL_HOST_KERNEL_(kn, kf, 0, entry, (const void *kernarg), __VA_ARGS__) \
	AQL_INLINE void kn##_aql_body(const struct aql_host_ids_ *aql_ids_ AQL_UNUSED_, \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__)); \
	static void kn##_aql_entry(const void *kernarg)                        \
	{                                                                      \
		const struct kn##_aql_args *a_ = kernarg;                      \
		struct aql_host_ids_ ids_ = aql_host_ids_of_(aql_host_workitem_current()); \
		kn##_aql_body(&ids_, AQL_PP_LIST(AQL_UNPACK_, a_, __VA_ARGS__)); \
	}                                                                      \
	AQL_HOST_DEV_(kn, _aql_dev, __VA_ARGS__)                               \
	AQL_INLINE void kn##_aql_body(const struct aql_host_ids_ *aql_ids_ AQL_UNUSED_, \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__))

/*
 * The work-group function: the arguments copied to locals (no store of
 * the body can change them), x innermost. Its loop variable is the
 * global id x itself, which ends below the grid size: so the compiler
 * knows that the id the body computes (group * size + local folds back
 * to it) never wraps, and can vectorise the accesses made with it. Where
 * code outside a body asks for ids, a second copy of the loop keeps
 * wi_->local_id current for it.
 */
#define AQL_HOST_WG_LOOP_(kn, publish, ...)                                    \
	for (uint32_t z_ = 0; z_ < ids_.size[2]; z_++)                         \
		for (uint32_t y_ = 0; y_ < ids_.size[1]; y_++)                 \
			for (uint32_t gx_ = x0_; gx_ < x1_; gx_++) {           \
				ids_.local[0] = gx_ - x0_;                     \
				ids_.local[1] = y_;                            \
				ids_.local[2] = z_;                            \
				if (publish) {                                 \
					wi_->local_id[0] = gx_ - x0_;          \
					wi_->local_id[1] = y_;                 \
					wi_->local_id[2] = z_;                 \
				}                                              \
				kn##_aql_body(&ids_, AQL_PP_LIST(AQL_UNPACK_COPY_, \
						a_, __VA_ARGS__));             \
			}
#define AQL_KERNEL_NB_(kn, ...)                                                \
	AQL_HOST_KERNEL_(kn, AQL_HOST_KD_NO_BARRIER | AQL_HOST_KD_WORKGROUP, 0, \
			 workgroup_entry, (const void *kernarg, aql_host_workitem *wi_), \
			 __VA_ARGS__)                                          \
	AQL_INLINE void kn##_aql_body(const struct aql_host_ids_ *aql_ids_ AQL_UNUSED_, \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__)); \
	static void kn##_aql_entry(const void *kernarg, aql_host_workitem *wi_) \
	{                                                                      \
		const struct kn##_aql_args a_ = *(const struct kn##_aql_args *)kernarg; \
		struct aql_host_ids_ ids_ = aql_host_ids_of_(wi_);             \
		const uint32_t x0_ = ids_.group[0] * ids_.wg[0];               \
		const uint32_t x1_ = x0_ + ids_.size[0];                       \
		if (__start_aql_ids_outside) {                                 \
			AQL_HOST_WG_LOOP_(kn, 1, __VA_ARGS__)                  \
		} else {                                                       \
			AQL_HOST_WG_LOOP_(kn, 0, __VA_ARGS__)                  \
		}                                                              \
	}                                                                      \
	AQL_HOST_DEV_(kn, _aql_dev_nb, __VA_ARGS__)                            \
	AQL_INLINE void kn##_aql_body(const struct aql_host_ids_ *aql_ids_ AQL_UNUSED_, \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__))

#define AQL_KERNEL_WITH_LDS_(kn, kf, lds_type, ...)                            \
	AQL_HOST_KERNEL_(kn, kf, sizeof(lds_type), entry, (const void *kernarg), \
			 __VA_ARGS__)                                          \
	AQL_INLINE void kn##_aql_body(const struct aql_host_ids_ *aql_ids_ AQL_UNUSED_, \
				      __typeof__(lds_type) *lds AQL_UNUSED_,   \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__)); \
	static void kn##_aql_entry(const void *kernarg)                        \
	{                                                                      \
		const struct kn##_aql_args *a_ = kernarg;                      \
		const aql_host_workitem *wi_ = aql_host_workitem_current();    \
		struct aql_host_ids_ ids_ = aql_host_ids_of_(wi_);             \
		kn##_aql_body(&ids_, wi_->group_segment,                       \
			      AQL_PP_LIST(AQL_UNPACK_, a_, __VA_ARGS__));      \
	}                                                                      \
	AQL_INLINE void kn##_aql_body(const struct aql_host_ids_ *aql_ids_ AQL_UNUSED_, \
				      __typeof__(lds_type) *lds AQL_UNUSED_,   \
				      AQL_PP_LIST(AQL_BODY_PARAM_, , __VA_ARGS__))

#endif /* host */

#include <aql/kernel_channel.h>
#include <aql/kernel_printf.h>

#endif
