/* SPDX-License-Identifier: MIT */
/* Internal: what the launch needs to know about a channel. */
#ifndef AQL_INTERNAL_CHANNEL_H
#define AQL_INTERNAL_CHANNEL_H

#include <aql/channel.h>

/* The agent ch was created for; its senders run there. */
aql_agent *aql_channel_agent(const aql_channel *ch);

#endif
