/* SPDX-License-Identifier: MIT */
/*
 * Agent memory and copies. Agent memory is local to an agent (VRAM on a
 * discrete GPU). On the CPU agent it is host memory, but code that moves
 * data with the calls below is correct on every agent, because they are
 * the only way in or out.
 *
 * An agent reports in aql_agent_info.unified_memory whether its memory is
 * the host's (the CPU agent by default): typed buffers then share one
 * allocation between host and agent and copy nothing. A CPU agent created
 * with aql_host_agent_config.separate_memory behaves as a discrete device,
 * so that tests see every copy a GPU would need.
 */
#ifndef AQL_COPY_H
#define AQL_COPY_H

#include <stddef.h>
#include <aql/agent.h>
#include <aql/completion.h>
#include <aql/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * size bytes of zeroed agent memory, aligned to at least 256 bytes.
 * Errors: AQL_ERR_INVALID_ARG (size 0), AQL_ERR_NOMEM naming the size and
 * the agent. Thread safe.
 */
aql_status aql_agent_mem_alloc(aql_agent *agent, size_t size, void **out);

/*
 * Free agent memory from aql_agent_mem_alloc(); work using it must have
 * completed. NULL is accepted. Thread safe.
 */
void aql_agent_mem_free(aql_agent *agent, void *ptr);

/*
 * Copy size bytes between host memory and agent memory of agent (either
 * way, or within one), returning when the bytes have arrived. Errors:
 * AQL_ERR_INVALID_ARG (NULL pointers with a non-zero size), and those of
 * the agent's copy engine. Thread safe.
 */
aql_status aql_agent_copy(aql_agent *agent, void *dst, const void *src,
			  size_t size);

/*
 * Queue a copy of size bytes on queue, after everything submitted to it
 * before and after the n completions in after (which may be on other
 * queues). *done (if not NULL) gets its completion. Errors:
 * AQL_ERR_INVALID_ARG, AQL_ERR_QUEUE_FULL, AQL_ERR_QUEUE_ERROR. Thread
 * safe, as typed launches are.
 */
aql_status aql_queue_copy(aql_queue *queue, void *dst, const void *src,
			  size_t size, const aql_completion *after, uint32_t n,
			  aql_completion *done);

#ifdef __cplusplus
}
#endif

#endif
