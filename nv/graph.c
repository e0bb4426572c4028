/* SPDX-License-Identifier: MIT */
/*
 * Recorded graphs on the CUDA agent (the graph ops of aql/agent_impl.h).
 * The recorded packets become segments, in order:
 *
 *   a run of kernel dispatches   one CUDA graph, a kernel node per packet
 *                                (checked and sized as the queue sizes a
 *                                launch), each depending on the one before
 *                                (every recorded packet has its barrier
 *                                bit), instantiated once;
 *   any other packet             kept, and translated at each replay as
 *                                the queue translates it (a copy, a wait).
 *
 * A replay is one agent dispatch packet (NV_FN_GRAPH) in the queue's ring,
 * carrying the replay's completion signal: the queue translates it in ring
 * order, so the segments go on its stream after all its earlier work, a
 * CUDA graph as one cuGraphLaunch, and the completion is the store the
 * queue owes after them, as for a typed launch (nv/queue.c). Changed
 * arguments reach the executable graph through
 * cuGraphExecKernelNodeSetParams; a kept packet is replaced. A raw kernel
 * dispatch recorded with aql_graph_record_packet() is a node too: its
 * kernarg bytes are read at instantiation. A raw packet with a completion
 * signal of its own is refused.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nv/nv.h"
#include "aql/timeline.h"
#include "util/clock.h"
#include "util/error.h"

/* How long a replay waits for the packets ahead of it to be written. */
#define AHEAD_NS (60ull * 1000000000ull)

/* A kernel node's parameters from a dispatch packet; d must outlive them. */
static aql_status node_params(struct nv_agent *a, const aql_packet *p, uint32_t index,
			      struct nv_dispatch *d, CUDA_KERNEL_NODE_PARAMS *out)
{
	char why[200];
	aql_status st = nv_dispatch_args(a, &p->dispatch, d, why, sizeof(why));

	if (st != AQL_OK)
		return aql_fail(st, "NVIDIA agent %u: graph packet %u: %s", a->info.device_index,
				index, why);
	*out = (CUDA_KERNEL_NODE_PARAMS){
		.func = d->k->fn,
		.gridDimX = d->blocks[0], .gridDimY = d->blocks[1], .gridDimZ = d->blocks[2],
		.blockDimX = d->wg[0], .blockDimY = d->wg[1], .blockDimZ = d->wg[2],
		.sharedMemBytes = d->dyn,
		.extra = d->size ? d->extra : NULL,
	};
	return AQL_OK;
}

/* packets[first..first + count): kernel dispatches, as one CUDA graph. */
static aql_status build_kernels(struct nv_agent *a, const aql_packet *packets, uint32_t first,
				struct nv_graph_seg *seg)
{
	const struct nv_driver *cu = a->cu;
	CUDA_KERNEL_NODE_PARAMS params;
	struct nv_dispatch d;
	aql_status st;
	CUresult r;

	seg->nodes = calloc(seg->count, sizeof(*seg->nodes));
	if (!seg->nodes)
		return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent %u: a graph of %u launches: no memory",
				a->info.device_index, seg->count);
	r = cu->cuGraphCreate(&seg->graph, 0);
	if (r != CUDA_SUCCESS) {
		seg->graph = NULL;
		return nv_fail(r, "cuGraphCreate", "NVIDIA agent %u: a graph of %u launches",
			       a->info.device_index, seg->count);
	}
	for (uint32_t i = 0; i < seg->count; i++) {
		st = node_params(a, &packets[first + i], first + i, &d, &params);
		if (st != AQL_OK)
			return st;
		r = cu->cuGraphAddKernelNode(&seg->nodes[i], seg->graph, i ? &seg->nodes[i - 1] : NULL,
					     i ? 1 : 0, &params);
		if (r != CUDA_SUCCESS)
			return nv_fail(r, "cuGraphAddKernelNode", "NVIDIA agent %u: graph packet %u, kernel %s",
				       a->info.device_index, first + i, d.k->name);
	}
	r = cu->cuGraphInstantiateWithFlags(&seg->exec, seg->graph, 0);
	if (r != CUDA_SUCCESS) {
		seg->exec = NULL;
		return nv_fail(r, "cuGraphInstantiateWithFlags",
			       "NVIDIA agent %u: a graph of %u launches (graph packets %u to %u)",
			       a->info.device_index, seg->count, first, first + seg->count - 1);
	}
	return AQL_OK;
}

static int is_kernel(const aql_packet *p)
{
	return aql_header_type(p->header) == AQL_PACKET_KERNEL_DISPATCH;
}

void nv_graph_destroy(aql_agent *agent, void *graph)
{
	struct nv_agent *a = nv_agent_of(agent);
	struct nv_graph *g = graph;
	int entered = nv_enter(a) == AQL_OK;

	for (uint32_t i = 0; i < g->nsegs; i++) {
		struct nv_graph_seg *seg = &g->segs[i];

		/* Without the context, the driver's objects are left to it. */
		if (entered && seg->exec)
			a->cu->cuGraphExecDestroy(seg->exec);
		if (entered && seg->graph)
			a->cu->cuGraphDestroy(seg->graph);
		free(seg->nodes);
	}
	free(g);
}

aql_status nv_graph_build(aql_agent *agent, const aql_packet *packets, uint32_t count,
			  void **out)
{
	struct nv_agent *a = nv_agent_of(agent);
	struct nv_graph *g;
	uint32_t nsegs = 0;
	aql_status st;

	for (uint32_t i = 0; i < count; i++) {
		enum aql_packet_type type = aql_header_type(packets[i].header);

		if (type != AQL_PACKET_KERNEL_DISPATCH && type != AQL_PACKET_AGENT_DISPATCH &&
		    type != AQL_PACKET_BARRIER_AND && type != AQL_PACKET_BARRIER_OR &&
		    type != AQL_PACKET_VENDOR_SPECIFIC)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"NVIDIA agent %u: graph packet %u: packet type %u cannot be replayed",
					a->info.device_index, i, (unsigned)type);
		/* Its completion would need a store of its own inside the
		 * replay, which the queue's completion table does not track. */
		if (packets[i].dispatch.completion_signal)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"NVIDIA agent %u: graph packet %u is a raw packet with a completion signal of its own; the CUDA agent replays only packets without one (record it with completion_signal 0, or wait for the replay's completion)",
					a->info.device_index, i);
		nsegs += !is_kernel(&packets[i]) || !i || !is_kernel(&packets[i - 1]);
	}
	st = nv_enter(a);
	if (st != AQL_OK)
		return st;
	g = calloc(1, sizeof(*g) + nsegs * sizeof(g->segs[0]));
	if (!g)
		return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent %u: a graph of %u packets: no memory",
				a->info.device_index, count);
	g->a = a;
	for (uint32_t i = 0; i < count; g->nsegs++) {
		struct nv_graph_seg *seg = &g->segs[g->nsegs];

		seg->first = i;
		seg->count = 1;
		if (!is_kernel(&packets[i])) {
			seg->packet = packets[i];
			i++;
			continue;
		}
		while (i + seg->count < count && is_kernel(&packets[i + seg->count]))
			seg->count++;
		st = build_kernels(a, packets, i, seg);
		i += seg->count;
		if (st != AQL_OK) {
			g->nsegs++;
			nv_graph_destroy(agent, g);
			return st;
		}
	}
	*out = g;
	return AQL_OK;
}

aql_status nv_graph_update(aql_agent *agent, void *graph, uint32_t index,
			   const aql_packet *packet)
{
	struct nv_agent *a = nv_agent_of(agent);
	struct nv_graph *g = graph;
	struct nv_graph_seg *seg = NULL;
	CUDA_KERNEL_NODE_PARAMS params;
	struct nv_dispatch d;
	aql_status st;
	CUresult r;

	for (uint32_t i = 0; i < g->nsegs && !seg; i++)
		if (index >= g->segs[i].first && index - g->segs[i].first < g->segs[i].count)
			seg = &g->segs[i];
	if (!seg)
		return aql_fail(AQL_ERR_INVALID_ARG, "NVIDIA agent %u: graph packet %u does not exist",
				a->info.device_index, index);
	if (!seg->exec) {
		seg->packet = *packet;
		return AQL_OK;
	}
	st = nv_enter(a);
	if (st == AQL_OK)
		st = node_params(a, packet, index, &d, &params);
	if (st != AQL_OK)
		return st;
	r = a->cu->cuGraphExecKernelNodeSetParams(seg->exec, seg->nodes[index - seg->first],
						  &params);
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuGraphExecKernelNodeSetParams",
			       "NVIDIA agent %u: graph packet %u, kernel %s", a->info.device_index,
			       index, d.k->name);
	return AQL_OK;
}

aql_status nv_graph_launch(aql_agent *agent, struct aql_queue_impl *q, void *graph,
			   aql_signal *completion, int64_t below)
{
	aql_queue *queue = &q->pub;
	aql_packet p = { 0 };
	uint64_t id = 0, deadline;
	uint16_t rest;
	aql_status st;

	/* The packet's decrement is the one below counts: the core reserved
	 * it on the timeline. */
	(void)below;
	p.agent.type = NV_FN_GRAPH;
	p.agent.arg[0] = (uint64_t)(uintptr_t)graph;
	p.agent.completion_signal = aql_signal_handle(completion);
	st = aql_queue_reserve(queue, 1, &id);
	if (st != AQL_OK)
		return st;
	memcpy(aql_queue_slot(queue, id)->bytes + 4, p.bytes + 4, sizeof(p) - 4);
	memcpy(&rest, p.bytes + 2, sizeof(rest));
	aql_packet_publish(aql_queue_slot(queue, id), aql_timeline_header(AQL_PACKET_AGENT_DISPATCH),
			   rest);
	nv_queue_flush(agent, q, id);
	/*
	 * Translated before this returns, so that a later graph_update never
	 * reaches a replay already submitted: only a slot ahead that another
	 * producer reserved and has not written yet holds translation up (the
	 * queue's thread translates once it is written; a failed queue
	 * retires its slots too). The replay is submitted either way: past
	 * the bound (a producer that never writes its slot) it is not waited
	 * for any longer.
	 */
	deadline = aql_deadline(AHEAD_NS);
	while (__atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_ACQUIRE) <= id &&
	       aql_now_ns() < deadline)
		sched_yield();
	return AQL_OK;
}
