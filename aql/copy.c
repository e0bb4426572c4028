/* SPDX-License-Identifier: MIT */
/* Agent memory and copies, forwarded to the agent's ops. */
#include <stdlib.h>

#include <aql/copy.h>

#include "aql/agent_impl.h"
#include "util/error.h"
#include "aql/queue_impl.h"
#include "aql/timeline.h"
#include "graph/graph_impl.h"

aql_status aql_agent_mem_alloc(aql_agent *agent, size_t size, void **out)
{
	if (!agent || !out || !size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_agent_mem_alloc: agent, out and a non-zero size are required");
	return agent->ops->mem_alloc(agent, size, out);
}

void aql_agent_mem_free(aql_agent *agent, void *ptr)
{
	if (agent && ptr)
		agent->ops->mem_free(agent, ptr);
}

aql_status aql_agent_copy(aql_agent *agent, void *dst, const void *src, size_t size)
{
	if (!agent || (size && (!dst || !src)))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_agent_copy: agent, dst and src are required");
	if (!size)
		return AQL_OK;
	return agent->ops->copy(agent, dst, src, size);
}

aql_status aql_copy_plan_add(struct aql_copy_plan *plan, void *dst, const void *src,
			     size_t size)
{
	aql_agent *agent = plan->agent;
	aql_status st;

	st = agent->ops->encode_copy(agent, &plan->out[plan->n], dst, src, size,
				     agent->copy_args ? plan->args : NULL);
	if (st != AQL_OK)
		return st;
	plan->args += agent->copy_args;
	plan->n++;
	plan->bytes += size;
	return AQL_OK;
}

aql_status aql_queue_copy(aql_queue *queue, void *dst, const void *src, size_t size,
			  const aql_completion *after, uint32_t n, aql_completion *done)
{
	if (!queue || (size && (!dst || !src)) || (n && !after) || n > AQL_TIMELINE_MAX_AFTER)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_queue_copy: queue, dst and src are required, and at most %u dependencies",
				AQL_TIMELINE_MAX_AFTER);
	if (aql_graph_recording(queue, after, n))
		return aql_graph_record_copy(queue, dst, src, size, after, n, done);
	return aql_timeline_copy(queue, dst, src, size, after, n, done);
}

aql_status aql_timeline_copy(aql_queue *queue, void *dst, const void *src, size_t size,
			     const aql_completion *after, uint32_t n, aql_completion *done)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	aql_packet packets[AQL_TIMELINE_MAX_AFTER + 1];
	struct aql_copy_plan plan = { 0 };
	struct aql_timeline *t;
	void *args = NULL;
	aql_status st;

	st = aql_timeline_get(queue, &t);
	if (st != AQL_OK)
		return st;
	aql_lock_take(&t->lock);
	if (q->agent->copy_args)
		st = aql_timeline_kernarg(t, queue, q->agent->copy_args, &args);
	if (st == AQL_OK) {
		plan = (struct aql_copy_plan){ .agent = q->agent, .out = packets, .args = args };
		plan.n = aql_timeline_deps(t, after, n, packets);
		st = aql_copy_plan_add(&plan, dst, src, size);
	}
	if (st == AQL_OK) {
		aql_timeline_sign(t, packets, plan.n);
		st = aql_timeline_emit(t, queue, packets, plan.n, done);
	}
	if (args && st == AQL_OK)
		aql_timeline_kernarg_commit(t, t->packets);
	else if (args)
		aql_timeline_kernarg_cancel(t);
	aql_lock_release(&t->lock);
	return st;
}
