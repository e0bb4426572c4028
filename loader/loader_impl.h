/* SPDX-License-Identifier: MIT */
/*
 * Internal: a code object as the loader files hand it to each other. The
 * image is the caller's bytes, which libelf reads in place (elf_memory)
 * during aql_code_object_open() or _load() and nothing keeps afterwards;
 * every offset taken from it is checked against image_size before use.
 */
#ifndef AQL_LOADER_IMPL_H
#define AQL_LOADER_IMPL_H

#include <gelf.h>
#include <stdint.h>
#include <aql/code_object.h>

/* Bounds that keep hostile input from asking for unbounded work. */
#define AQL_LOADER_MAX_SEGMENTS 64u
#define AQL_LOADER_MAX_SPAN (1ull << 30)	/* bytes of agent memory */
#define AQL_LOADER_MAX_NAME 4096u

struct aql_segment {
	uint64_t vaddr;
	uint64_t memsz;
	uint64_t offset;		/* in the image */
	uint64_t filesz;
	uint32_t flags;			/* PF_R | PF_W | PF_X */
};

/* A hash slot: symbol index + 1 (0: empty) and the name's full hash. */
struct aql_symbol_slot {
	uint32_t index;
	uint32_t hash;
};

struct aql_code_object {
	aql_code_object_info info;
	aql_agent *agent;		/* NULL while only opened */
	const uint8_t *image;		/* NULL once open or load returns */
	size_t image_size;
	Elf *elf;			/* on image; NULL with it */
	struct aql_segment segments[AQL_LOADER_MAX_SEGMENTS];
	uint32_t segment_count;
	uint64_t vaddr_lo;		/* first PT_LOAD's page-truncated p_vaddr */
	uint64_t span;			/* bytes from vaddr_lo to the last segment end */
	size_t alloc_size;		/* span rounded to pages */
	/*
	 * The dynamic symbol table (.dynsym, else .symtab): symbols for libelf
	 * while the image is there; symtab, its raw Elf64_Sym entries, in the
	 * image, then in symbol_copy once a load has kept them for
	 * aql_code_object_symbol(). An object only opened keeps none.
	 */
	Elf_Data *symbols;
	const uint8_t *symtab;
	size_t symbol_count;
	const char *strtab;		/* its string table, NUL-terminated */
	size_t strtab_size;
	void *symbol_copy;		/* owned: symtab and strtab of a loaded object */
	/* Open-addressed hash of the defined symbols by name. */
	struct aql_symbol_slot *symbol_hash;
	uint32_t symbol_hash_mask;
	aql_metadata *metadata;
	aql_kernel *kernels;
	/* 64-bit pointers the relocations set, by file vaddr (host objects). */
	struct aql_reloc_pointer *pointers;
	size_t pointer_count;
};

/* The segment holding [vaddr, vaddr + size), or NULL. */
const struct aql_segment *aql_co_segment(const struct aql_code_object *co,
					 uint64_t vaddr, uint64_t size);

/*
 * Pointer to size bytes at vaddr in the file image, which must lie within
 * one segment's file bytes; NULL otherwise.
 */
const void *aql_co_file_bytes(const struct aql_code_object *co, uint64_t vaddr,
			      uint64_t size);

/* Symbol i's name, or NULL when it is not a terminated string in bounds. */
const char *aql_co_symbol_name(const struct aql_code_object *co, const GElf_Sym *sym);

/* Find a defined global or weak symbol by name; its index, or 0 if none. */
size_t aql_co_find_symbol(const struct aql_code_object *co, const char *name,
			  GElf_Sym *out);

/*
 * Apply every dynamic relocation to the loaded copy at co->info.base,
 * resolving undefined symbols from opts, then from builtins (host code
 * objects). Errors name the relocation.
 */
aql_status aql_co_relocate(struct aql_code_object *co, const aql_load_options *opts);

/*
 * Index the 64-bit pointers that relocations set, so that
 * aql_co_read_pointer() costs one binary search.
 */
aql_status aql_co_index_pointers(struct aql_code_object *co);

/*
 * The value a relocated 64-bit pointer at vaddr would hold, relative to a
 * load at address 0, read from the file and its relocations: how a host
 * descriptor's pointers are followed before (or without) loading. Needs
 * aql_co_index_pointers() first.
 */
aql_status aql_co_read_pointer(const struct aql_code_object *co, uint64_t vaddr,
			       uint64_t *out);

/* Decode the 64-byte AMDGPU kernel descriptor at kd. */
void aql_kd_decode(const uint8_t kd[64], aql_kernel_descriptor_info *out);

/*
 * Check a decoded descriptor at kd_vaddr against its metadata: segment
 * sizes, kernarg size, wavefront size, dynamic stack, entry point.
 */
aql_status aql_kd_check(const struct aql_code_object *co, uint64_t kd_vaddr,
			const aql_kernel_descriptor_info *kd,
			const aql_kernel_metadata *md);

/*
 * Fill co->kernels[] from co->metadata for kinds whose kernels have no
 * descriptor of their own (host, NVIDIA): name, metadata, kernarg size and
 * alignment (at least 16), explicit argument count. Other fields are left
 * to the caller.
 */
void aql_co_kernels_from_metadata(struct aql_code_object *co);

/* Build metadata and kernels of a host code object from its descriptors. */
aql_status aql_host_object_describe(struct aql_code_object *co);

/*
 * Whether [image, image + size) is an NVIDIA code object: PTX text, a
 * cubin or a fatbin (loader/nv_object.c). Reads only the first bytes.
 */
int aql_nv_object_detect(const uint8_t *image, size_t size);

/*
 * For an image aql_nv_object_detect() accepted: set co->info.kind (PTX or
 * CUBIN) and machine, and describe its kernels as the other kinds do:
 * co->metadata (arguments, names, types, const-ness) and co->kernels
 * (kernarg_size and alignment, static LDS where the image states it).
 * Errors: AQL_ERR_INVALID_CODE_OBJECT naming the line or field,
 * AQL_ERR_NOMEM.
 */
aql_status aql_nv_object_describe(struct aql_code_object *co);

#endif
