/* SPDX-License-Identifier: MIT */
/* libaql: AQL packets, queues, signals and agents. Include this one header. */
#ifndef AQL_AQL_H
#define AQL_AQL_H

#include <aql/status.h>
#include <aql/packet.h>
#include <aql/signal.h>
#include <aql/queue.h>
#include <aql/agent.h>
#include <aql/host_kernel.h>

#endif
