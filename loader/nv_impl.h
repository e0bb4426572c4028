/* SPDX-License-Identifier: MIT */
/*
 * Internal: the readers behind loader/nv_object.c for NVIDIA binaries,
 * cubins (loader/cubin.c) and fatbins (loader/fatbin.c). Their formats are
 * NVIDIA's and undocumented; each field read is described where it is
 * read, and was checked against the output of CUDA 13.0's ptxas, nvcc and
 * fatbinary. Everything is bounds-checked: images come from anywhere.
 * Used by the CUDA agent (nv/agent.c) and the emulated driver
 * (tests/cuda_emu) too.
 */
#ifndef AQL_LOADER_NV_IMPL_H
#define AQL_LOADER_NV_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <aql/ptx.h>
#include <aql/status.h>

#define AQL_FATBIN_MAGIC 0xba55ed50u

/*
 * An argument description __aql_md_<kernel> (aql/kernel.h) found in an
 * image: PTX text (line: its line) or a cubin (line: its symbol index).
 */
struct aql_nv_desc {
	const char *kernel;		/* kernel_len bytes, not terminated */
	size_t kernel_len;
	uint32_t line;
	uint8_t *bytes;			/* owned */
	uint32_t size;
	int used;
};

struct aql_nv_descs {
	struct aql_nv_desc *v;
	uint32_t n, cap;
};

/*
 * Append a description of the kernel named [kernel, kernel + len) whose
 * size bytes are copied from bytes (NULL: left for the caller to fill);
 * *out points to it. Errors: AQL_ERR_NOMEM. Not thread safe on one ds.
 */
aql_status aql_nv_descs_add(struct aql_nv_descs *ds, const char *kernel, size_t len,
			    uint32_t line, const uint8_t *bytes, uint32_t size,
			    struct aql_nv_desc **out);

void aql_nv_descs_free(struct aql_nv_descs *ds);

/*
 * The SM a cubin was built for (80 for sm_80), from its ELF header alone.
 * Errors: as aql_cubin_read(). Thread safe.
 */
aql_status aql_cubin_sm(const uint8_t *image, size_t size, uint32_t *sm);

/*
 * Read the cubin [image, image + size): its SM (80 for sm_80) and its
 * kernels as PTX entries would list them, so that PTX and cubins are
 * described alike. Each parameter has the offset and size the cubin
 * records, the generic name "<kernel>_param_<i>", type "" and align 0
 * (a cubin records neither); param_size is the recorded parameter block
 * size; maxntid and reqntid are the recorded ones; line is the kernel's
 * symbol index. descs (may be NULL) gets every __aql_md_<kernel> object,
 * its kernel name pointing into the image. Free *out with aql_ptx_free().
 * Errors:
 * AQL_ERR_INVALID_CODE_OBJECT naming the section, symbol or record that is
 * malformed; AQL_ERR_UNSUPPORTED for a 32-bit cubin or an ELF ABI version
 * this reader does not know; AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_cubin_read(const uint8_t *image, size_t size, uint32_t *sm,
			  aql_ptx_module **out, struct aql_nv_descs *descs);

enum aql_fatbin_kind {
	AQL_FATBIN_PTX = 1,
	AQL_FATBIN_CUBIN = 2,
};

enum aql_fatbin_compression {
	AQL_FATBIN_RAW = 0,
	AQL_FATBIN_ZSTD,
	AQL_FATBIN_LZ4,
};

/* One entry of a fatbin, as its header describes it. */
struct aql_fatbin_entry {
	uint16_t kind;			/* enum aql_fatbin_kind, or another value */
	uint32_t sm;			/* 80 for sm_80 */
	uint8_t compression;		/* enum aql_fatbin_compression */
	const uint8_t *payload;		/* in the image */
	uint64_t payload_size;		/* stored bytes (padded) */
	uint64_t raw_size;		/* uncompressed bytes; payload_size if not compressed */
};

/* Most entries a fatbin may have here. */
#define AQL_FATBIN_MAX_ENTRIES 256u

/*
 * The entries of the fatbin [image, image + size), at most max of them
 * into entries, their number into *count. The header's size may be less
 * than size (a fatbin inside a larger image); *used gets the bytes the
 * fatbin spans. Errors: AQL_ERR_INVALID_CODE_OBJECT naming the entry that
 * lies outside the image or has a bad header. Thread safe.
 */
aql_status aql_fatbin_entries(const uint8_t *image, size_t size,
			      struct aql_fatbin_entry *entries, uint32_t max,
			      uint32_t *count, size_t *used);

/*
 * The bytes of entry e: its payload in place (*owned NULL) or, when
 * compressed with zstd, decompressed into a malloc'd *owned buffer.
 * Errors: AQL_ERR_UNSUPPORTED for LZ4 (saying how to build without
 * compression), AQL_ERR_INVALID_CODE_OBJECT for a corrupt stream or one
 * whose size disagrees with the header, AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_fatbin_payload(const struct aql_fatbin_entry *e, const uint8_t **bytes,
			      size_t *size, uint8_t **owned);

/*
 * Write what an NVIDIA binary holds into buf (always terminated): "a cubin
 * for sm_80", or "a fatbin of cubin sm_80, PTX sm_75 (zstd)". Never fails;
 * an unreadable image is said to be one. It may overwrite
 * aql_error_message(): call it before aql_fail(). Thread safe.
 */
void aql_nv_object_summary(const uint8_t *image, size_t size, char *buf, size_t n);

#endif
