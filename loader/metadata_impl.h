/* SPDX-License-Identifier: MIT */
/*
 * Internal: metadata that does not come from a note (host code objects),
 * built in the same single-allocation layout aql_metadata_parse() returns,
 * so aql_metadata_free() releases either kind.
 */
#ifndef AQL_LOADER_METADATA_IMPL_H
#define AQL_LOADER_METADATA_IMPL_H

#include <stddef.h>
#include <aql/metadata.h>

/*
 * Deep-copy src (its kernels, their args, every string, the printf formats)
 * into one allocation. Errors: AQL_ERR_INVALID_ARG if src or out is NULL or a
 * non-zero count comes with a NULL array; AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_metadata_copy(const aql_metadata *src, aql_metadata **out);

/*
 * As aql_metadata_copy() for count kernels and nothing else: version {0, 0},
 * no target, no printf formats.
 */
aql_status aql_metadata_build(const aql_kernel_metadata *kernels, uint32_t count,
			      aql_metadata **out);

/* The kind spelled s[0..len) in .value_kind, or AQL_ARG_UNKNOWN. */
enum aql_arg_kind aql_arg_kind_from_name(const char *s, size_t len);

#endif
