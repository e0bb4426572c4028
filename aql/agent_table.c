/* SPDX-License-Identifier: MIT */
/*
 * The kinds of agent libaql is built with, in the order aql_agent_default()
 * tries them. A new agent is a room of its own (aql/host/, nv/, aql/kfd/)
 * plus one line here; nothing else in the core names it.
 */
#include "aql/agent_impl.h"

extern const struct aql_agent_driver aql_host_agent_driver;
extern const struct aql_agent_driver aql_nv_agent_driver;
extern const struct aql_agent_driver aql_kfd_agent_driver;

const struct aql_agent_driver *const aql_agent_drivers[] = {
	&aql_host_agent_driver,
	&aql_nv_agent_driver,
	&aql_kfd_agent_driver,
	NULL,
};
