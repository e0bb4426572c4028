/* SPDX-License-Identifier: MIT */
/*
 * A KFD system table of ABI 1, as an emulation built before the table
 * gained gpu_query exports it: the AMD agent must refuse it by its ABI
 * (kfd_agent_abi1), never call past the table's end.
 */
#include <stdint.h>

const struct {
	uint32_t abi;
	const char *name;
} aql_kfd_sys_v1 = { 1, "abi-1" };
