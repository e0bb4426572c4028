/* SPDX-License-Identifier: MIT */
/*
 * Internal: where the launch path meets recorded graphs. A queue that
 * records has queue->graph set; typed launches and copies made on it, or
 * naming a recorded completion in after, go to the graph instead of the
 * ring. A recorded completion is one on aql_graph_marker, a signal that
 * holds -1 for ever (so it reads as ended, never blocks, and a wait on it
 * fails, which aql_completion_wait() words for it), with below the
 * recorded node's number plus one and queue the recording queue.
 */
#ifndef AQL_INTERNAL_GRAPH_IMPL_H
#define AQL_INTERNAL_GRAPH_IMPL_H

#include <aql/graph.h>
#include <aql/kernarg.h>

#include "aql/queue_impl.h"

extern aql_signal *aql_graph_marker;

/* Nonzero when work on queue with after[0..n) must be recorded. */
static inline int aql_graph_recording(aql_queue *queue, const aql_completion *after, uint32_t n)
{
	aql_signal *marker;

	if (__atomic_load_n(&aql_queue_impl(queue)->graph, __ATOMIC_RELAXED))
		return 1;
	marker = __atomic_load_n(&aql_graph_marker, __ATOMIC_RELAXED);
	for (uint32_t i = 0; marker && i < n; i++)
		if (after[i].signal == marker)
			return 1;
	return 0;
}

/*
 * Record a typed launch whose arguments aql_launch() checked: geometry is
 * its dispatch packet's geometry and LDS, hidden its hidden arguments
 * (NULL: none). Errors: those of aql_graph_begin() for the queue, a
 * dependency outside the graph (AQL_ERR_INVALID_ARG), AQL_ERR_NOMEM.
 */
aql_status aql_graph_record_launch(aql_queue *queue, const aql_kernel *kernel,
				   const aql_launch_config *config, const aql_arg *args, uint32_t n,
				   const aql_dispatch_packet *geometry,
				   const struct aql_kernarg_hidden *hidden, aql_completion *done);

/* Record aql_queue_copy(); errors as aql_graph_record_launch(). */
aql_status aql_graph_record_copy(aql_queue *queue, void *dst, const void *src, size_t size,
				 const aql_completion *after, uint32_t n, aql_completion *done);

/* aql_queue_destroy() of a queue that records: it leaves the recording. */
void aql_graph_queue_gone(struct aql_queue_impl *queue);

#endif
