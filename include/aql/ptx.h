/* SPDX-License-Identifier: MIT */
/*
 * PTX kernel entries: what a PTX module's `.entry` definitions say about
 * their parameters, read from the text without the CUDA driver. The CUDA
 * path lays out a launch's parameter buffer from it, and tests check that
 * a single-source kernel has the same explicit argument layout on NVPTX as
 * on the other targets.
 *
 * Parameters are packed in order, each at its alignment: the .align given,
 * else the natural alignment of its type. Everything the parser returns
 * lives in one allocation, freed by aql_ptx_free().
 */
#ifndef AQL_PTX_H
#define AQL_PTX_H

#include <stddef.h>
#include <stdint.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_ptx_linkage {
	AQL_PTX_LINKAGE_NONE = 0,	/* visible in this module only */
	AQL_PTX_LINKAGE_VISIBLE,	/* .visible */
	AQL_PTX_LINKAGE_WEAK,		/* .weak */
};

/* The state space a .ptr parameter points into. */
enum aql_ptx_space {
	AQL_PTX_SPACE_GENERIC = 0,	/* .ptr with no space, or not a pointer */
	AQL_PTX_SPACE_GLOBAL,
	AQL_PTX_SPACE_CONST,
	AQL_PTX_SPACE_SHARED,
	AQL_PTX_SPACE_LOCAL,
};

typedef struct aql_ptx_param {
	const char *name;
	const char *type;		/* ".u64", ".f32", ".b8", ... */
	uint32_t offset;		/* in the packed parameter buffer */
	uint32_t size;			/* element size times element count */
	uint32_t align;			/* .align, or the element size */
	uint32_t count;			/* array elements; 1 for a scalar */
	uint32_t line;			/* 1-based line of its .param */
	uint8_t is_pointer;		/* .ptr was given */
	uint8_t space;			/* enum aql_ptx_space of the .ptr */
	uint16_t pointee_align;		/* .ptr ... .align N, or 0 */
} aql_ptx_param;

typedef struct aql_ptx_entry {
	const char *name;
	enum aql_ptx_linkage linkage;
	uint32_t line;			/* line of the .entry directive */
	uint32_t param_count;
	const aql_ptx_param *params;
	uint32_t param_size;		/* bytes up to the end of the last */
	uint32_t param_align;		/* the largest parameter alignment, >= 1 */
	uint32_t maxntid[3];		/* .maxntid, zeros when absent */
	uint32_t reqntid[3];		/* .reqntid, zeros when absent */
} aql_ptx_entry;

typedef struct aql_ptx_module {
	uint32_t version[2];		/* .version major, minor; zeros if absent */
	const char *target;		/* first .target operand ("sm_70"), or NULL */
	uint32_t address_size;		/* .address_size, or 0 if absent */
	uint32_t entry_count;
	const aql_ptx_entry *entries;	/* definitions, in text order */
} aql_ptx_module;

/*
 * Parse the PTX text [text, text + size) (a NUL byte ends it early) and
 * list the kernel entries it defines (.entry with a body; declarations
 * ending in ';' are skipped) with their parameters. Function bodies and
 * everything other than .version, .target, .address_size and .entry
 * headers are skipped, so instructions are not validated. Errors:
 * AQL_ERR_INVALID_CODE_OBJECT with aql_error_message() naming the line and
 * what is wrong (an unknown parameter type, a malformed .align or array
 * size, unbalanced braces, an unterminated comment or string, a byte that
 * is not PTX text, a duplicate entry, a parameter buffer over 4 GiB);
 * AQL_ERR_INVALID_ARG for a NULL pointer; AQL_ERR_NOMEM. Never reads
 * outside the text; memory used is bounded by a multiple of size. Thread
 * safe.
 */
aql_status aql_ptx_parse(const char *text, size_t size, aql_ptx_module **out);

/* Free what aql_ptx_parse() returned. NULL is accepted. */
void aql_ptx_free(aql_ptx_module *module);

/*
 * The entry named name. Errors: AQL_ERR_NOT_FOUND naming it,
 * AQL_ERR_INVALID_ARG for NULL pointers. Thread safe.
 */
aql_status aql_ptx_entry_find(const aql_ptx_module *module, const char *name,
			      const aql_ptx_entry **out);

#ifdef __cplusplus
}
#endif

#endif
