/* SPDX-License-Identifier: MIT */
/*
 * AMDGPU target IDs: "gfx90a:sramecc+:xnack-" and friends, decoded from an
 * ELF header's e_flags or parsed from a string, and the rule that says
 * whether a code object can run on an agent.
 */
#ifndef AQL_TARGET_H
#define AQL_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* State of a target feature (xnack, sramecc) in a target ID. */
enum aql_feature_state {
	AQL_FEATURE_UNSUPPORTED = 0,	/* the processor has no such mode */
	AQL_FEATURE_ANY,		/* code runs in either mode */
	AQL_FEATURE_OFF,
	AQL_FEATURE_ON,
};

typedef struct aql_target_id {
	char processor[24];		/* "gfx90a", "gfx9-4-generic", "" if unknown */
	uint32_t mach;			/* EF_AMDGPU_MACH value, 0 if unknown */
	enum aql_feature_state xnack;
	enum aql_feature_state sramecc;
	uint32_t generic_version;	/* V6 EF_AMDGPU_GENERIC_VERSION, else 0 */
} aql_target_id;

/*
 * Decode e_flags of an AMDGPU ELF whose EI_ABIVERSION is abi_version
 * (2 = V4, 3 = V5, 4 = V6; 1 = V3 is accepted too). Every amdgcn processor
 * LLVM defines decodes, gfx600 to gfx12 and the generic targets, including
 * those aql does not dispatch (see aql_target_dispatchable). Errors:
 * AQL_ERR_INVALID_CODE_OBJECT (unknown machine, feature bits a processor cannot
 * have, a generic version outside V6), AQL_ERR_UNSUPPORTED (ABI version, an
 * r600-family machine). Thread safe.
 */
aql_status aql_target_from_elf(uint32_t e_flags, uint8_t abi_version,
			       aql_target_id *out);

/*
 * Parse a target ID: "gfx90a", "gfx90a:xnack+", "gfx942:sramecc-:xnack+",
 * or the same after a triple ("amdgcn-amd-amdhsa--gfx90a:xnack-").
 * Errors: AQL_ERR_INVALID_ARG naming the part at fault. Thread safe.
 */
aql_status aql_target_parse(const char *str, aql_target_id *out);

/*
 * Write the canonical form ("gfx90a:sramecc+:xnack-", features in
 * alphabetical order, "any" omitted) to buf. Returns the length it needs,
 * as snprintf does; buf may be NULL when size is 0. Thread safe.
 */
size_t aql_target_format(const aql_target_id *id, char *buf, size_t size);

/*
 * Whether code built for code can run on an agent whose target is agent:
 * the same processor (or a generic target covering it), and for each
 * feature, "any" in the code matches either mode while on/off must equal
 * the agent's mode. Thread safe.
 */
bool aql_target_compatible(const aql_target_id *code,
			   const aql_target_id *agent);

/*
 * Whether aql loads code built for id for dispatch: gfx9 and later and
 * their generic targets. Code for older processors (gfx6-gfx8) can still be
 * opened and inspected. False for NULL or an unknown target. Thread safe.
 */
bool aql_target_dispatchable(const aql_target_id *id);

#ifdef __cplusplus
}
#endif

#endif
