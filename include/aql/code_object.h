/* SPDX-License-Identifier: MIT */
/*
 * Code objects: AMDGPU ELF files (code object V4, V5, V6) and host code
 * objects for the CPU agent, read with libelf and loaded without ROCr,
 * comgr or dlopen. Loading puts every PT_LOAD segment into one zero-filled
 * allocation of agent memory, applies the dynamic relocations and yields
 * kernels: the kernel_object to put in a dispatch packet, the decoded
 * kernel descriptor and the metadata.
 */
#ifndef AQL_CODE_OBJECT_H
#define AQL_CODE_OBJECT_H

#include <stddef.h>
#include <stdint.h>
#include <aql/agent.h>
#include <aql/metadata.h>
#include <aql/status.h>
#include <aql/target.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_code_object aql_code_object;

enum aql_code_object_kind {
	AQL_CODE_OBJECT_AMDGPU = 0,	/* EM_AMDGPU, OS ABI AMDGPU_HSA */
	AQL_CODE_OBJECT_HOST,		/* a shared object for the CPU agent */
	AQL_CODE_OBJECT_PTX,		/* PTX text for an NVIDIA agent */
	AQL_CODE_OBJECT_CUBIN,		/* an NVIDIA cubin (ELF, EM_CUDA) or fatbin */
};

/*
 * The 64-byte kernel descriptor, as stored and decoded. For a host code
 * object only the segment sizes, kernarg_size and the entry are meaningful.
 */
typedef struct aql_kernel_descriptor_info {
	uint32_t group_segment_fixed_size;
	uint32_t private_segment_fixed_size;
	uint32_t kernarg_size;
	int64_t kernel_code_entry_byte_offset;
	uint32_t compute_pgm_rsrc1;
	uint32_t compute_pgm_rsrc2;
	uint32_t compute_pgm_rsrc3;
	uint16_t kernel_code_properties;
	uint16_t kernarg_preload;
	/* Decoded from the words above. */
	uint32_t vgpr_granules;		/* rsrc1 GRANULATED_WORKITEM_VGPR_COUNT */
	uint32_t sgpr_granules;		/* rsrc1 GRANULATED_WAVEFRONT_SGPR_COUNT */
	uint32_t user_sgpr_count;	/* rsrc2 USER_SGPR_COUNT */
	uint32_t workitem_id_dims;	/* rsrc2 ENABLE_VGPR_WORKITEM_ID + 1 */
	uint8_t wave32;			/* properties ENABLE_WAVEFRONT_SIZE32 */
	uint8_t uses_dynamic_stack;	/* properties USES_DYNAMIC_STACK */
	uint8_t kernarg_preload_length;	/* dwords preloaded into SGPRs */
	uint16_t kernarg_preload_offset;	/* dwords */
} aql_kernel_descriptor_info;

/* A named bit field of a kernel descriptor word, for tools that list them. */
enum aql_kd_word {
	AQL_KD_RSRC1 = 0,
	AQL_KD_RSRC2,
	AQL_KD_RSRC3,
	AQL_KD_PROPERTIES,
	AQL_KD_PRELOAD,
};

typedef struct aql_kd_field {
	const char *name;		/* "ENABLE_SGPR_WORKGROUP_ID_X" */
	enum aql_kd_word word;
	uint8_t shift;
	uint8_t width;
} aql_kd_field;

/*
 * The fields of the descriptor words that apply to target (gfx9, gfx90a
 * and gfx940 lay out rsrc3 differently from gfx10 and later), with *count
 * set to their number. Thread safe.
 */
const aql_kd_field *aql_kd_fields(const aql_target_id *target, uint32_t *count);

/* Value of field f in descriptor kd. Never fails; thread safe. */
uint32_t aql_kd_field_value(const aql_kernel_descriptor_info *kd,
			    const aql_kd_field *f);

typedef struct aql_kernel {
	const char *name;
	const aql_kernel_metadata *metadata;	/* never NULL */
	aql_kernel_descriptor_info descriptor;
	uint64_t kernel_object;		/* for the dispatch packet; 0 unless loaded */
	uint32_t kernarg_size;		/* bytes to allocate for the kernarg segment */
	uint32_t kernarg_align;		/* at least 16 */
	uint32_t group_segment_size;	/* static LDS bytes */
	uint32_t private_segment_size;	/* bytes per work-item */
	uint32_t explicit_arg_count;	/* leading metadata args the caller supplies */
} aql_kernel;

typedef struct aql_code_object_info {
	enum aql_code_object_kind kind;
	uint32_t version;		/* code object version 4, 5, 6; host: 0 */
	aql_target_id target;		/* AMDGPU only */
	uint16_t machine;		/* ELF e_machine */
	void *base;			/* load address; NULL if only opened */
	size_t size;			/* bytes of agent memory it occupies */
	const aql_metadata *metadata;	/* never NULL */
	uint32_t kernel_count;
	const aql_kernel *kernels;	/* in metadata order */
} aql_code_object_info;

/* A definition for an undefined symbol of the code object. */
typedef struct aql_symbol_binding {
	const char *name;
	uint64_t address;
} aql_symbol_binding;

typedef struct aql_load_options {
	const aql_symbol_binding *symbols;	/* searched for undefined symbols */
	uint32_t symbol_count;
} aql_load_options;

/*
 * Read a code object without loading it: ELF headers, target ID, metadata,
 * kernel descriptors and the descriptor/metadata cross-check. image is
 * read in place, never written and not kept: it need not outlive the
 * call. Errors: AQL_ERR_INVALID_CODE_OBJECT naming what is malformed or
 * inconsistent, AQL_ERR_UNSUPPORTED (a code object version or machine
 * this loader does not read), AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_code_object_open(const void *image, size_t size,
				aql_code_object **out);

/*
 * Open image and load it into agent memory: one zero-filled allocation
 * (256-byte aligned; page aligned and executable for host code objects)
 * with every PT_LOAD segment at its p_vaddr offset, dynamic relocations
 * applied, undefined symbols taken from opts (may be NULL) and, for host
 * code objects, from libaql's kernel-side functions. Errors: as
 * aql_code_object_open(), plus AQL_ERR_INVALID_CODE_OBJECT for a
 * relocation type the loader does not apply (named) or one outside its
 * segment, AQL_ERR_NOT_FOUND for an undefined symbol nobody defines,
 * AQL_ERR_UNSUPPORTED when the agent cannot run this kind of code object.
 * Thread safe.
 */
aql_status aql_code_object_load(aql_agent *agent, const void *image,
				size_t size, const aql_load_options *opts,
				aql_code_object **out);

/*
 * aql_code_object_load() on the contents of a file. Errors: as that, plus
 * AQL_ERR_NOT_FOUND (no such file) and AQL_ERR_SYSTEM naming the path.
 */
aql_status aql_code_object_load_file(aql_agent *agent, const char *path,
				     const aql_load_options *opts,
				     aql_code_object **out);

/*
 * Unload: free the agent memory and everything the object owns. NULL is
 * accepted. Errors: AQL_ERR_BUSY while a packet that dispatches one of its
 * kernels is in flight in any queue (submitted and not finished), naming
 * the kernel, the packet and the queue; the object is then left as it
 * was. A dispatch submitted while destroy runs may be missed: the caller
 * must not submit kernels of an object it is destroying.
 */
aql_status aql_code_object_destroy(aql_code_object *co);

/*
 * Description of co (not NULL), valid until aql_code_object_destroy().
 * Never fails; thread safe, as co is not changed after loading.
 */
const aql_code_object_info *aql_code_object_get_info(const aql_code_object *co);

/*
 * Kernel by name ("saxpy" or its symbol "saxpy.kd"). Errors:
 * AQL_ERR_NOT_FOUND naming the kernel. Thread safe.
 */
aql_status aql_code_object_kernel(const aql_code_object *co, const char *name,
				  const aql_kernel **out);

/*
 * Address and size of a defined symbol (a device global variable, or any
 * other), in agent memory as loaded. Errors: AQL_ERR_NOT_FOUND,
 * AQL_ERR_INVALID_ARG (the object was only opened). Thread safe.
 */
aql_status aql_code_object_symbol(const aql_code_object *co, const char *name,
				  void **address, size_t *size);

#ifdef __cplusplus
}
#endif

#endif
