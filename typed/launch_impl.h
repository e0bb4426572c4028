/* SPDX-License-Identifier: MIT */
/* Internal: typed launches' argument checks, for recorded graphs. */
#ifndef AQL_INTERNAL_LAUNCH_IMPL_H
#define AQL_INTERNAL_LAUNCH_IMPL_H

#include <aql/launch.h>

/*
 * Check args[i] against kernel's argument i as aql_launch() does, with
 * its messages. For a buffer, *writes: the kernel may write it; *copy_in:
 * the agent needs the host's data first. Errors: as aql_launch().
 */
aql_status aql_launch_check_arg(const aql_kernel *kernel, uint32_t i, const aql_arg *arg,
				aql_agent *agent, int *writes, int *copy_in);

#endif
