/* SPDX-License-Identifier: MIT */
/* A kernel and a global variable of its code object, exported so that
 * hsa_executable_get_symbol_by_name() finds it (test_hsa_executable). */
#include <aql/kernel.h>

__attribute__((visibility("default"))) uint32_t answer = 42;

AQL_KERNEL_NO_BARRIER(read_answer, (aql_global uint32_t *, out))
{
	out[aql_global_id(0)] = answer;
}
