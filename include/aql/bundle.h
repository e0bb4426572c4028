/* SPDX-License-Identifier: MIT */
/*
 * Clang offload bundles: the "__CLANG_OFFLOAD_BUNDLE__" container that
 * clang-offload-bundler writes, plain or compressed ("CCOB", zlib or zstd),
 * alone in a file or in the .hip_fatbin section of a HIP program. A bundle
 * holds one code object per target; the runtime lists them and picks the
 * one an agent can run.
 *
 * A linked HIP program's .hip_fatbin holds one bundle per translation
 * unit: aql_bundle_open() reads them all, as the parts of one aql_bundle,
 * and lists the entries of every part in order.
 *
 * A bundle borrows the bytes it was opened on: they must outlive it.
 * Entries of a compressed bundle point into memory the bundle owns.
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
	uint32_t part;			/* which bundle of a .hip_fatbin; else 0 */
} aql_bundle_entry;

/* Whether data starts with the bundle magic or the compressed "CCOB" one. */
bool aql_bundle_is_bundle(const void *data, size_t size);

/*
 * Open the bundle in data, decompressing it if it is a CCOB (versions 1 to
 * 3, zlib or zstd). If data is an ELF file with a .hip_fatbin section,
 * every bundle in that section is opened, each one part; a lone bundle is
 * part 0. What compressed bundles expand to is limited to 1 GiB in all.
 * Errors: AQL_ERR_INVALID_CODE_OBJECT naming the fault (bad magic, an entry
 * past the end, overlapping entries, a bad id, a CCOB size field or stream
 * that is wrong or past the limit, bytes between bundles that are not zero
 * padding), AQL_ERR_NOT_FOUND for an ELF file without a .hip_fatbin
 * section, AQL_ERR_UNSUPPORTED for a CCOB version or compression method
 * aql does not know, AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_bundle_open(const void *data, size_t size, aql_bundle **out);

/* Free a bundle. NULL is accepted. */
void aql_bundle_close(aql_bundle *bundle);

/* Number of entries of an open bundle, all parts. Never fails; thread safe. */
uint32_t aql_bundle_count(const aql_bundle *bundle);

/* Number of parts (bundles of a .hip_fatbin; 1 otherwise). Thread safe. */
uint32_t aql_bundle_part_count(const aql_bundle *bundle);

/* Entry i, valid until aql_bundle_close(); NULL if i >= count. Thread safe. */
const aql_bundle_entry *aql_bundle_get(const aql_bundle *bundle, uint32_t i);

/*
 * The best entry of part part for an agent with target agent: among
 * compatible amdgcn entries (aql_target_compatible) of targets aql
 * dispatches (aql_target_dispatchable), prefer an exact processor over a
 * generic one, then features set on/off over "any". Errors:
 * AQL_ERR_NOT_FOUND when none is compatible, with aql_error_message()
 * listing what the part holds; AQL_ERR_INVALID_ARG for a part past
 * aql_bundle_part_count(). Thread safe.
 */
aql_status aql_bundle_select_part(const aql_bundle *bundle, uint32_t part,
				  const aql_target_id *agent,
				  const aql_bundle_entry **out);

/* aql_bundle_select_part() of part 0. */
aql_status aql_bundle_select(const aql_bundle *bundle,
			     const aql_target_id *agent,
			     const aql_bundle_entry **out);

#ifdef __cplusplus
}
#endif

#endif
