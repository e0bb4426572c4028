/* SPDX-License-Identifier: MIT */
/*
 * Clang offload bundles: the "__CLANG_OFFLOAD_BUNDLE__" container that
 * clang-offload-bundler writes, alone in a file or as the .hip_fatbin
 * section of a HIP program. A bundle holds one code object per target;
 * the runtime lists them and picks the one an agent can run.
 *
 * A bundle borrows the bytes it was opened on: they must outlive it.
 */
#ifndef AQL_BUNDLE_H
#define AQL_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <aql/status.h>
#include <aql/target.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_bundle aql_bundle;

typedef struct aql_bundle_entry {
	const char *id;			/* "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-" */
	const void *data;		/* the code object, inside the bundle */
	size_t size;
	bool is_amdgcn;			/* an amdgcn-amd-amdhsa entry */
	aql_target_id target;		/* parsed from id when is_amdgcn */
} aql_bundle_entry;

/* Whether data starts with the bundle magic or the compressed "CCOB" one. */
bool aql_bundle_is_bundle(const void *data, size_t size);

/*
 * Open the bundle in data. If data is an ELF file with a .hip_fatbin
 * section, the first bundle in that section is opened. Errors:
 * AQL_ERR_INVALID_CODE_OBJECT naming the fault (bad magic, an entry past the end,
 * overlapping entries, a bad id), AQL_ERR_NOT_FOUND for an ELF file
 * without a .hip_fatbin section, AQL_ERR_UNSUPPORTED for a compressed
 * (CCOB) bundle whose method or version this build cannot decode,
 * AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_bundle_open(const void *data, size_t size, aql_bundle **out);

/* Free a bundle. NULL is accepted. */
void aql_bundle_close(aql_bundle *bundle);

/* Number of entries of an open bundle. Never fails; thread safe. */
uint32_t aql_bundle_count(const aql_bundle *bundle);

/* Entry i, valid until aql_bundle_close(); NULL if i >= count. Thread safe. */
const aql_bundle_entry *aql_bundle_get(const aql_bundle *bundle, uint32_t i);

/*
 * The best entry for an agent with target agent: among compatible amdgcn
 * entries (aql_target_compatible), prefer an exact processor over a
 * generic one, then features set on/off over "any". Errors:
 * AQL_ERR_NOT_FOUND when none is compatible, with aql_error_message()
 * listing what the bundle holds. Thread safe.
 */
aql_status aql_bundle_select(const aql_bundle *bundle,
			     const aql_target_id *agent,
			     const aql_bundle_entry **out);

#ifdef __cplusplus
}
#endif

#endif
