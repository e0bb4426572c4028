/* SPDX-License-Identifier: MIT */
/*
 * libaql: AQL packets, queues, signals, agents, the code object loader,
 * memory, typed buffers and launches.
 * Include this one header. (aql/kernel.h is the device-side header for
 * kernel sources, not part of this.)
 */
#ifndef AQL_AQL_H
#define AQL_AQL_H

#include <aql/status.h>
#include <aql/packet.h>
#include <aql/signal.h>
#include <aql/queue.h>
#include <aql/agent.h>
#include <aql/host_kernel.h>
#include <aql/target.h>
#include <aql/metadata.h>
#include <aql/bundle.h>
#include <aql/code_object.h>
#include <aql/kernarg.h>
#include <aql/ptx.h>
#include <aql/completion.h>
#include <aql/mem.h>
#include <aql/copy.h>
#include <aql/buffer.h>
#include <aql/launch.h>
#include <aql/graph.h>
#include <aql/lds.h>
#include <aql/file.h>
#include <aql/channel.h>
#include <aql/printf.h>

#endif
