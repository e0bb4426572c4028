/* SPDX-License-Identifier: MIT */
/*
 * Recorded graphs (include/aql/graph.h). Recording keeps what each typed
 * launch, copy and raw packet was, checked; instantiation turns that into
 * template packets and one kernarg block; a replay copies the kernarg
 * block into the queue's kernarg ring (so that changes between replays
 * never reach one in flight, and replays on several queues share
 * nothing), moves stale buffers, and writes every packet with one
 * reservation and one doorbell.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <aql/graph.h>

#include "aql/agent_impl.h"
#include "aql/queue_impl.h"
#include "aql/timeline.h"
#include "graph/graph_impl.h"
#include "loader/kernarg_impl.h"
#include "typed/buffer_impl.h"
#include "typed/launch_impl.h"
#include "util/error.h"

/* Queues one recording may span. */
#define GRAPH_MAX_QUEUES 16u

enum node_kind { NODE_LAUNCH, NODE_COPY, NODE_PACKET };

struct node {
	enum node_kind kind;
	aql_packet packet;	/* launch: geometry and LDS; packet: as given */
	const aql_kernel *kernel;
	aql_arg *args;		/* by-value bytes point into bytes */
	unsigned char *bytes;
	uint32_t nargs;
	int has_hidden;
	aql_kernarg_hidden hidden;
	void *dst;		/* copy */
	const void *src;
	size_t size;
};

/*
 * The hooks of a recording (aql_graph_record_hook()), shared by it and
 * the executable graphs made from it, and released with the last of them.
 */
struct hook_set {
	uint32_t refs;		/* atomic */
	uint32_t n, cap;
	struct hook_entry {
		aql_graph_hook hook;
		void *user;
	} *h;
};

struct aql_graph {
	aql_agent *agent;
	struct hook_set *hooks;	/* NULL: none */
	uint64_t id;
	struct aql_queue_impl *queues[GRAPH_MAX_QUEUES];
	uint32_t nqueues;
	int ended;
	uint64_t lost_queue;	/* a queue destroyed while recording, + 1 */
	struct node *nodes;
	uint32_t nnodes, cap;
};

/* One typed launch of an executable graph. */
struct exec_launch {
	const aql_kernel *kernel;
	uint32_t packet;	/* its dispatch in tmpl */
	size_t kernarg_off;
	uint32_t nargs;
	aql_buf **bufs;		/* per argument; NULL: not a buffer */
	unsigned char *writes, *copy_in;
	int has_hidden;
	aql_kernarg_hidden hidden;	/* queue_ptr: the queue of the template */
};

/* A buffer the graph uses, once however often it is named. */
struct exec_use {
	aql_buf *buf;
	int writes;
	int copy_in;		/* its first use reads what the host holds */
	void *agent_ptr;
	uint32_t filled;	/* copy packets of this replay */
	uint64_t fill_bytes;
};

struct replay {
	aql_completion done;
	uint64_t number;
	uint64_t queue_id;
};

struct aql_graph_exec {
	aql_agent *agent;
	uint64_t graph_id;
	pthread_mutex_t lock;
	aql_packet *tmpl;	/* barrier bit set; completion 0: the replay's */
	uint32_t npackets;
	/* The last packet's barrier bit orders it after all the others:
	 * only it carries the replay's completion (see replay()). */
	int sign_last;
	uint32_t *reloc;	/* packets whose kernarg lies in kernarg */
	uint32_t nreloc;
	unsigned char *kernarg;
	size_t kernarg_size;
	struct exec_launch *launches;
	uint32_t nlaunches;
	struct exec_use *uses;
	uint32_t nuses, uses_cap;
	aql_packet *scratch;	/* copies in, then tmpl */
	void *agent_graph;	/* ops->graph_build's */
	struct hook_set *hooks;	/* the recording's, or NULL */
	struct replay *replays;	/* the last of each queue replayed on */
	uint32_t nreplays, replays_cap;
	uint64_t nreplay;
};

aql_signal *aql_graph_marker;
static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t graph_ids;

static uint64_t queue_id(const struct aql_queue_impl *q)
{
	return q->pub.amd->hsa.id;
}

/* Drop a reference; the last one releases every hook. NULL is accepted. */
static void hooks_put(struct hook_set *hs)
{
	if (!hs || __atomic_sub_fetch(&hs->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (uint32_t i = 0; i < hs->n; i++)
		if (hs->h[i].hook.release)
			hs->h[i].hook.release(hs->h[i].user);
	free(hs->h);
	free(hs);
}

static size_t align64(size_t n)
{
	return (n + AQL_KERNARG_ALIGN - 1) & ~(size_t)(AQL_KERNARG_ALIGN - 1);
}

aql_status aql_graph_begin(aql_queue *queue, aql_graph **out)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_graph *g = NULL;
	aql_signal *marker;
	aql_status st = AQL_OK;

	if (!queue || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_begin: queue and out are required");
	if (__atomic_load_n(&queue->error, __ATOMIC_ACQUIRE))
		return aql_queue_report_error(queue);
	g = calloc(1, sizeof(*g));
	if (!g)
		return aql_fail(AQL_ERR_NOMEM, "aql_graph_begin: out of memory");
	pthread_mutex_lock(&rec_lock);
	if (!aql_graph_marker) {
		st = aql_signal_create(-1, &marker);
		if (st == AQL_OK)
			__atomic_store_n(&aql_graph_marker, marker, __ATOMIC_RELEASE);
	}
	if (st == AQL_OK && q->graph)
		st = aql_fail(AQL_ERR_BUSY,
			      "queue %llu records graph %llu already (aql_graph_begin without aql_graph_end): end it before beginning another",
			      (unsigned long long)queue_id(q), (unsigned long long)q->graph->id);
	if (st == AQL_OK) {
		g->agent = q->agent;
		g->id = ++graph_ids;
		g->queues[g->nqueues++] = q;
		__atomic_store_n(&q->graph, g, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&rec_lock);
	if (st != AQL_OK) {
		free(g);
		return st;
	}
	*out = g;
	return AQL_OK;
}

/*
 * Under rec_lock: the graph that work on queue after[0..n) records into,
 * joining queue to it where after names its recorded work.
 */
static aql_status recording_graph(aql_queue *queue, const aql_completion *after, uint32_t n,
				  struct aql_graph **out)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_graph *g = q->graph, *og;

	for (uint32_t i = 0; i < n; i++) {
		if (!after[i].signal || after[i].signal != aql_graph_marker)
			continue;
		og = after[i].queue ? aql_queue_impl(after[i].queue)->graph : NULL;
		if (!og)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"queue %llu: after[%u] is recorded work whose recording has ended; wait for a replay's completion instead",
					(unsigned long long)queue_id(q), i);
		if (g && og != g)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"queue %llu records graph %llu, but after[%u] is recorded work of graph %llu",
					(unsigned long long)queue_id(q), (unsigned long long)g->id, i,
					(unsigned long long)og->id);
		g = og;
	}
	if (!g)
		return aql_fail(AQL_ERR_INVALID_ARG, "queue %llu records no graph (any more)",
				(unsigned long long)queue_id(q));
	for (uint32_t i = 0; i < n; i++)
		if (after[i].signal && after[i].signal != aql_graph_marker)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"graph %llu, recording on queue %llu: after[%u] is work outside the graph; recorded work may wait only for work recorded in its graph (the replay runs after the queue's earlier work)",
					(unsigned long long)g->id, (unsigned long long)queue_id(q), i);
	if (__atomic_load_n(&queue->error, __ATOMIC_ACQUIRE))
		return aql_queue_report_error(queue);
	if (!q->graph) {
		if (q->agent != g->agent)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"queue %llu cannot join graph %llu: the graph records on another agent's queues",
					(unsigned long long)queue_id(q), (unsigned long long)g->id);
		if (g->nqueues == GRAPH_MAX_QUEUES)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"queue %llu cannot join graph %llu: it records on %u queues already",
					(unsigned long long)queue_id(q), (unsigned long long)g->id,
					GRAPH_MAX_QUEUES);
		g->queues[g->nqueues++] = q;
		__atomic_store_n(&q->graph, g, __ATOMIC_RELAXED);
	}
	*out = g;
	return AQL_OK;
}

/* Under rec_lock: a new node, zeroed. */
static aql_status add_node(struct aql_graph *g, struct node **out)
{
	struct node *grown;

	if (g->nnodes == g->cap) {
		grown = realloc(g->nodes, (g->cap ? 2 * g->cap : 16) * sizeof(*grown));
		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "graph %llu: node %u: out of memory",
					(unsigned long long)g->id, g->nnodes);
		g->nodes = grown;
		g->cap = g->cap ? 2 * g->cap : 16;
	}
	*out = memset(&g->nodes[g->nnodes], 0, sizeof(**out));
	return AQL_OK;
}

static void recorded(struct aql_graph *g, aql_queue *queue, aql_completion *done)
{
	g->nnodes++;
	if (done)
		*done = (aql_completion){ aql_graph_marker, (int64_t)g->nnodes, queue };
}

aql_status aql_graph_record_launch(aql_queue *queue, const aql_kernel *kernel,
				   const aql_launch_config *config, const aql_arg *args, uint32_t n,
				   const aql_dispatch_packet *geometry,
				   const struct aql_kernarg_hidden *hidden, aql_completion *done)
{
	struct aql_graph *g = NULL;
	struct node *node = NULL;
	size_t nbytes = 0, off = 0;
	aql_status st;

	for (uint32_t i = 0; i < n; i++)
		if (args[i].tag == AQL_ARGV_BYTES)
			nbytes += args[i].size;
	pthread_mutex_lock(&rec_lock);
	st = recording_graph(queue, config->after, config->after_count, &g);
	if (st == AQL_OK)
		st = add_node(g, &node);
	if (st != AQL_OK)
		goto out;
	node->args = malloc(n * sizeof(*args) + nbytes + 1);
	if (!node->args) {
		st = aql_fail(AQL_ERR_NOMEM, "graph %llu: launch of '%s': out of memory",
			      (unsigned long long)g->id, kernel->name);
		goto out;
	}
	node->bytes = (unsigned char *)(node->args + n);
	memcpy(node->args, args, n * sizeof(*args));
	for (uint32_t i = 0; i < n; i++) {
		if (args[i].tag != AQL_ARGV_BYTES)
			continue;
		memcpy(node->bytes + off, args[i].bytes, args[i].size);
		node->args[i].bytes = node->bytes + off;
		off += args[i].size;
	}
	node->kind = NODE_LAUNCH;
	node->kernel = kernel;
	node->nargs = n;
	node->packet.dispatch = *geometry;
	if (hidden) {
		node->has_hidden = 1;
		node->hidden = *hidden;
	}
	recorded(g, queue, done);
out:
	pthread_mutex_unlock(&rec_lock);
	return st;
}

aql_status aql_graph_record_copy(aql_queue *queue, void *dst, const void *src, size_t size,
				 const aql_completion *after, uint32_t n, aql_completion *done)
{
	struct aql_graph *g = NULL;
	struct node *node = NULL;
	aql_status st;

	pthread_mutex_lock(&rec_lock);
	st = recording_graph(queue, after, n, &g);
	if (st == AQL_OK)
		st = add_node(g, &node);
	if (st == AQL_OK) {
		node->kind = NODE_COPY;
		node->dst = dst;
		node->src = src;
		node->size = size;
		recorded(g, queue, done);
	}
	pthread_mutex_unlock(&rec_lock);
	return st;
}

aql_status aql_graph_record_packet(aql_queue *queue, const aql_packet *packet)
{
	struct aql_graph *g = NULL;
	struct node *node = NULL;
	aql_status st;

	if (!queue || !packet)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_record_packet: queue and packet are required");
	if ((packet->header & 0xff) == AQL_PACKET_INVALID)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_graph_record_packet: queue %llu: an INVALID packet records nothing",
				(unsigned long long)queue_id(aql_queue_impl(queue)));
	pthread_mutex_lock(&rec_lock);
	st = recording_graph(queue, NULL, 0, &g);
	if (st == AQL_OK)
		st = add_node(g, &node);
	if (st == AQL_OK) {
		node->kind = NODE_PACKET;
		node->packet = *packet;
		recorded(g, queue, NULL);
	}
	pthread_mutex_unlock(&rec_lock);
	return st;
}

aql_status aql_graph_record_hook(aql_queue *queue, const aql_graph_hook *hook, void *user)
{
	struct aql_graph *g = NULL;
	struct hook_set *hs;
	struct hook_entry *grown;
	aql_status st;

	if (!queue || !hook)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_record_hook: queue and hook are required");
	pthread_mutex_lock(&rec_lock);
	st = recording_graph(queue, NULL, 0, &g);
	if (st == AQL_OK && !g->hooks) {
		g->hooks = calloc(1, sizeof(*g->hooks));
		if (g->hooks)
			g->hooks->refs = 1;
		else
			st = aql_fail(AQL_ERR_NOMEM, "graph %llu: a hook: out of memory",
				      (unsigned long long)g->id);
	}
	if (st == AQL_OK && g->hooks->n == g->hooks->cap) {
		hs = g->hooks;
		grown = realloc(hs->h, (hs->cap ? 2 * hs->cap : 4) * sizeof(*grown));
		if (grown) {
			hs->h = grown;
			hs->cap = hs->cap ? 2 * hs->cap : 4;
		} else {
			st = aql_fail(AQL_ERR_NOMEM, "graph %llu: a hook: out of memory",
				      (unsigned long long)g->id);
		}
	}
	if (st == AQL_OK)
		g->hooks->h[g->hooks->n++] = (struct hook_entry){ *hook, user };
	pthread_mutex_unlock(&rec_lock);
	return st;
}

int aql_graph_is_recording(aql_queue *queue)
{
	return queue && __atomic_load_n(&aql_queue_impl(queue)->graph, __ATOMIC_RELAXED);
}

/* Under rec_lock. */
static void end_recording(struct aql_graph *g)
{
	for (uint32_t i = 0; i < g->nqueues; i++)
		__atomic_store_n(&g->queues[i]->graph, NULL, __ATOMIC_RELAXED);
	g->nqueues = 0;
	g->ended = 1;
}

aql_status aql_graph_end(aql_graph *graph)
{
	aql_status st = AQL_OK;

	if (!graph)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_end: graph is NULL");
	pthread_mutex_lock(&rec_lock);
	if (graph->ended)
		st = aql_fail(AQL_ERR_INVALID_ARG, "graph %llu: its recording has ended already",
			      (unsigned long long)graph->id);
	else
		end_recording(graph);
	if (st == AQL_OK && graph->lost_queue)
		st = aql_fail(AQL_ERR_INVALID_ARG,
			      "graph %llu: queue %llu was destroyed while it recorded; the recording is incomplete",
			      (unsigned long long)graph->id,
			      (unsigned long long)graph->lost_queue - 1);
	pthread_mutex_unlock(&rec_lock);
	return st;
}

void aql_graph_queue_gone(struct aql_queue_impl *queue)
{
	struct aql_graph *g = NULL;

	pthread_mutex_lock(&rec_lock);
	g = queue->graph;
	if (g) {
		for (uint32_t i = 0; i < g->nqueues; i++)
			if (g->queues[i] == queue)
				g->queues[i] = g->queues[--g->nqueues];
		if (!g->lost_queue)
			g->lost_queue = queue_id(queue) + 1;
		queue->graph = NULL;
	}
	pthread_mutex_unlock(&rec_lock);
}

void aql_graph_destroy(aql_graph *graph)
{
	if (!graph)
		return;
	pthread_mutex_lock(&rec_lock);
	if (!graph->ended)
		end_recording(graph);
	pthread_mutex_unlock(&rec_lock);
	for (uint32_t i = 0; i < graph->nnodes; i++)
		free(graph->nodes[i].args);
	free(graph->nodes);
	hooks_put(graph->hooks);
	free(graph);
}

static void exec_free(struct aql_graph_exec *e)
{
	if (e->agent_graph)
		e->agent->ops->graph_destroy(e->agent, e->agent_graph);
	for (uint32_t i = 0; i < e->nlaunches; i++)
		free(e->launches[i].bufs);
	free(e->launches);
	free(e->uses);
	free(e->tmpl);
	free(e->scratch);
	free(e->reloc);
	free(e->replays);
	free(e->kernarg);
	hooks_put(e->hooks);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/*
 * Under the buffer lock: the distinct buffers of the launches, each bound
 * to the agent; copy_in from the first launch that names it. Room for
 * every buffer argument was made at instantiation.
 */
static aql_status collect_uses(struct aql_graph_exec *e)
{
	aql_status st;

	e->nuses = 0;
	for (uint32_t l = 0; l < e->nlaunches; l++) {
		struct exec_launch *el = &e->launches[l];
		uint32_t first = e->nuses;

		for (uint32_t i = 0; i < el->nargs; i++) {
			uint32_t u;

			if (!el->bufs[i])
				continue;
			for (u = 0; u < e->nuses && e->uses[u].buf != el->bufs[i]; u++)
				;
			if (u == e->nuses) {
				e->uses[e->nuses++] = (struct exec_use){ .buf = el->bufs[i] };
				st = aql_buf_bind(el->bufs[i], e->agent, &e->uses[u].agent_ptr);
				if (st != AQL_OK)
					return st;
			}
			e->uses[u].writes |= el->writes[i];
			if (u >= first)
				e->uses[u].copy_in |= el->copy_in[i];
		}
	}
	return AQL_OK;
}

/* A buffer argument's kernarg bytes: its agent pointer now. */
static void write_pointers(struct aql_graph_exec *e, const aql_buf *b, void *ptr)
{
	for (uint32_t l = 0; l < e->nlaunches; l++) {
		struct exec_launch *el = &e->launches[l];

		for (uint32_t i = 0; i < el->nargs; i++)
			if (el->bufs[i] == b)
				aql_kernarg_copy(e->kernarg + el->kernarg_off +
							 el->kernel->metadata->args[i].offset,
						 &ptr, sizeof(ptr));
	}
}

static aql_status fill_launch(struct aql_graph_exec *e, const struct node *n,
			      struct exec_launch *el)
{
	const aql_kernel *k = n->kernel;
	aql_dispatch_packet *d = &e->tmpl[el->packet].dispatch;
	unsigned char *ka = e->kernarg + el->kernarg_off;
	int writes, copy_in;
	aql_status st;

	*d = n->packet.dispatch;
	d->header = aql_timeline_header(AQL_PACKET_KERNEL_DISPATCH);
	d->kernel_object = k->kernel_object;
	d->kernarg_address = (uint64_t)(uintptr_t)ka;
	d->completion_signal = 0;
	for (uint32_t i = 0; i < n->nargs; i++) {
		const aql_kernel_arg *a = &k->metadata->args[i];
		const aql_arg *v = &n->args[i];

		if (v->tag == AQL_ARGV_BUFFER) {
			st = aql_launch_check_arg(k, i, v, e->agent, &writes, &copy_in);
			if (st != AQL_OK)
				return st;
			el->bufs[i] = v->buf;
			el->writes[i] = (unsigned char)writes;
			el->copy_in[i] = (unsigned char)copy_in;
			continue;
		}
		aql_kernarg_copy(ka + a->offset, v->tag == AQL_ARGV_BYTES ? v->bytes : v->v.raw,
				 a->size);
	}
	if (n->has_hidden) {
		el->has_hidden = 1;
		el->hidden = n->hidden;
		aql_kernarg_fill_hidden(k, d, &el->hidden, ka);
	}
	return AQL_OK;
}

aql_status aql_graph_instantiate(aql_graph *graph, aql_graph_exec **out)
{
	struct aql_graph_exec *e;
	uint32_t np, nbufargs = 0, nl = 0;
	size_t off = 0;
	aql_agent *agent;
	aql_status st = AQL_OK;

	if (!graph || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_instantiate: graph and out are required");
	pthread_mutex_lock(&rec_lock);
	if (!graph->ended)
		st = aql_fail(AQL_ERR_INVALID_ARG,
			      "graph %llu is still recording: aql_graph_end() it first",
			      (unsigned long long)graph->id);
	else if (graph->lost_queue)
		st = aql_fail(AQL_ERR_INVALID_ARG,
			      "graph %llu: queue %llu was destroyed while it recorded; the recording is incomplete",
			      (unsigned long long)graph->id,
			      (unsigned long long)graph->lost_queue - 1);
	else if (!graph->nnodes)
		st = aql_fail(AQL_ERR_INVALID_ARG, "graph %llu recorded nothing",
			      (unsigned long long)graph->id);
	pthread_mutex_unlock(&rec_lock);
	if (st != AQL_OK)
		return st;
	agent = graph->agent;
	e = calloc(1, sizeof(*e));
	if (!e)
		return aql_fail(AQL_ERR_NOMEM, "graph %llu: out of memory", (unsigned long long)graph->id);
	pthread_mutex_init(&e->lock, NULL);
	e->agent = agent;
	e->graph_id = graph->id;
	for (uint32_t i = 0; i < graph->nnodes; i++) {
		const struct node *n = &graph->nodes[i];

		if (n->kind == NODE_LAUNCH) {
			e->kernarg_size += align64(n->kernel->kernarg_size ? n->kernel->kernarg_size : 1);
			nl++;
			for (uint32_t a = 0; a < n->nargs; a++)
				nbufargs += n->args[a].tag == AQL_ARGV_BUFFER;
		} else if (n->kind == NODE_COPY) {
			e->kernarg_size += agent->copy_args;
		}
	}
	/* A last packet with a signal of its own gets a barrier after it
	 * that carries the replay's. */
	np = graph->nnodes + (graph->nodes[graph->nnodes - 1].kind == NODE_PACKET &&
			      graph->nodes[graph->nnodes - 1].packet.dispatch.completion_signal);
	e->npackets = np;
	e->tmpl = calloc(np, sizeof(*e->tmpl));
	e->reloc = calloc(np, sizeof(*e->reloc));
	e->launches = calloc(nl ? nl : 1, sizeof(*e->launches));
	e->uses_cap = nbufargs;
	e->uses = calloc(nbufargs ? nbufargs : 1, sizeof(*e->uses));
	e->scratch = calloc(np + (size_t)nbufargs * AQL_BUF_MAX_PIECES, sizeof(*e->scratch));
	e->kernarg = e->kernarg_size ? aligned_alloc(AQL_KERNARG_ALIGN, e->kernarg_size) : NULL;
	if (!e->tmpl || !e->reloc || !e->launches || !e->uses || !e->scratch ||
	    (e->kernarg_size && !e->kernarg)) {
		exec_free(e);
		return aql_fail(AQL_ERR_NOMEM, "graph %llu: %u packets: out of memory",
				(unsigned long long)graph->id, np);
	}
	if (e->kernarg)
		memset(e->kernarg, 0, e->kernarg_size);
	for (uint32_t i = 0; st == AQL_OK && i < graph->nnodes; i++) {
		const struct node *n = &graph->nodes[i];
		struct exec_launch *el;
		struct aql_copy_plan plan;

		switch (n->kind) {
		case NODE_LAUNCH:
			el = &e->launches[e->nlaunches++];
			el->kernel = n->kernel;
			el->packet = i;
			el->kernarg_off = off;
			el->nargs = n->nargs;
			el->bufs = calloc(n->nargs ? n->nargs : 1, sizeof(*el->bufs) + 2);
			if (!el->bufs) {
				st = aql_fail(AQL_ERR_NOMEM, "graph %llu: out of memory",
					      (unsigned long long)graph->id);
				break;
			}
			el->writes = (unsigned char *)(el->bufs + (n->nargs ? n->nargs : 1));
			el->copy_in = el->writes + n->nargs;
			off += align64(n->kernel->kernarg_size ? n->kernel->kernarg_size : 1);
			st = fill_launch(e, n, el);
			e->reloc[e->nreloc++] = i;
			break;
		case NODE_COPY:
			plan = (struct aql_copy_plan){ .agent = agent, .out = &e->tmpl[i],
						       .args = e->kernarg + off };
			st = aql_copy_plan_add(&plan, n->dst, n->src, n->size);
			e->tmpl[i].dispatch.completion_signal = 0;
			if (agent->copy_args)
				e->reloc[e->nreloc++] = i;
			off += agent->copy_args;
			break;
		case NODE_PACKET:
			e->tmpl[i] = n->packet;
			break;
		}
	}
	if (np > graph->nnodes)
		e->tmpl[np - 1].barrier.header = aql_timeline_header(AQL_PACKET_BARRIER_AND);
	e->sign_last = aql_header_barrier(e->tmpl[np - 1].header);
	if (st == AQL_OK && nbufargs) {
		aql_buf_lock();
		st = collect_uses(e);
		for (uint32_t u = 0; st == AQL_OK && u < e->nuses; u++)
			write_pointers(e, e->uses[u].buf, e->uses[u].agent_ptr);
		aql_buf_unlock();
	}
	if (st == AQL_OK && agent->ops->graph_build)
		st = agent->ops->graph_build(agent, e->tmpl, e->npackets, &e->agent_graph);
	if (st != AQL_OK) {
		exec_free(e);
		return st;
	}
	/* Ended: no hook is added any more. */
	e->hooks = graph->hooks;
	if (e->hooks)
		__atomic_add_fetch(&e->hooks->refs, 1, __ATOMIC_RELAXED);
	*out = e;
	return AQL_OK;
}

uint32_t aql_graph_exec_launches(const aql_graph_exec *exec)
{
	return exec ? exec->nlaunches : 0;
}

uint32_t aql_graph_exec_packets(const aql_graph_exec *exec)
{
	return exec ? exec->npackets : 0;
}

aql_status aql_graph_exec_set_arg(aql_graph_exec *exec, uint32_t launch, uint32_t arg,
				  aql_arg value)
{
	struct exec_launch *el;
	const aql_kernel_arg *a;
	aql_buf *old;
	int writes, copy_in;
	aql_status st;

	if (!exec)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_exec_set_arg: exec is NULL");
	if (launch >= exec->nlaunches)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"graph %llu: launch %u does not exist; the graph has %u typed launches",
				(unsigned long long)exec->graph_id, launch, exec->nlaunches);
	el = &exec->launches[launch];
	if (arg >= el->nargs)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"graph %llu launch %u: kernel '%s' takes %u argument(s); argument %u does not exist",
				(unsigned long long)exec->graph_id, launch, el->kernel->name,
				el->nargs, arg);
	a = &el->kernel->metadata->args[arg];
	if (value.tag == AQL_ARGV_PRINTF)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"graph %llu launch %u: kernel '%s' argument %u: AQL_ARG_PRINTF() names the launching queue's channel, which a graph records; pass a channel of your own",
				(unsigned long long)exec->graph_id, launch, el->kernel->name, arg);
	st = aql_launch_check_arg(el->kernel, arg, &value, exec->agent, &writes, &copy_in);
	if (st != AQL_OK)
		return st;
	if (!!el->bufs[arg] != (value.tag == AQL_ARGV_BUFFER))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"graph %llu launch %u: kernel '%s' argument %u was recorded as %s: a change keeps its kind",
				(unsigned long long)exec->graph_id, launch, el->kernel->name, arg,
				el->bufs[arg] ? "a buffer" : "a channel");
	pthread_mutex_lock(&exec->lock);
	if (value.tag != AQL_ARGV_BUFFER) {
		aql_kernarg_copy(exec->kernarg + el->kernarg_off + a->offset,
				 value.tag == AQL_ARGV_BYTES ? value.bytes : value.v.raw, a->size);
		goto update;
	}
	old = el->bufs[arg];
	if (value.buf->count != old->count) {
		st = aql_fail(AQL_ERR_INVALID_ARG,
			      "graph %llu launch %u: kernel '%s' argument %u '%s': buffer '%s' has %llu elements, the recorded buffer '%s' %llu; a rebind keeps the size",
			      (unsigned long long)exec->graph_id, launch, el->kernel->name, arg,
			      a->name ? a->name : "(unnamed)", value.buf->name,
			      (unsigned long long)value.buf->count, old->name,
			      (unsigned long long)old->count);
		goto out;
	}
	el->bufs[arg] = value.buf;
	el->writes[arg] = (unsigned char)writes;
	el->copy_in[arg] = (unsigned char)copy_in;
	aql_buf_lock();
	st = collect_uses(exec);
	for (uint32_t u = 0; st == AQL_OK && u < exec->nuses; u++)
		write_pointers(exec, exec->uses[u].buf, exec->uses[u].agent_ptr);
	if (st != AQL_OK) {
		el->bufs[arg] = old;
		collect_uses(exec);
	}
	aql_buf_unlock();
	if (st != AQL_OK)
		goto out;
update:
	if (exec->agent_graph)
		st = exec->agent->ops->graph_update(exec->agent, exec->agent_graph, el->packet,
						    &exec->tmpl[el->packet]);
out:
	pthread_mutex_unlock(&exec->lock);
	return st;
}

/* Under exec->lock: the replay's completion, for aql_graph_exec_destroy(). */
static void note_replay(struct aql_graph_exec *e, aql_queue *queue, aql_completion done)
{
	uint64_t id = queue_id(aql_queue_impl(queue));
	struct replay *grown;
	uint32_t i;

	e->nreplay++;
	for (i = 0; i < e->nreplays && e->replays[i].queue_id != id; i++)
		;
	if (i == e->nreplays) {
		/* Drop the ones that are done before growing. */
		for (i = 0; i < e->nreplays;)
			if (aql_completion_done(e->replays[i].done))
				e->replays[i] = e->replays[--e->nreplays];
			else
				i++;
		if (e->nreplays == e->replays_cap) {
			grown = realloc(e->replays, (e->replays_cap ? 2 * e->replays_cap : 4) *
							    sizeof(*grown));
			/* Out of memory: destroy then waits for nothing it
			 * cannot name; keep the oldest record instead. */
			if (!grown)
				return;
			e->replays = grown;
			e->replays_cap = e->replays_cap ? 2 * e->replays_cap : 4;
		}
		i = e->nreplays++;
	}
	e->replays[i] = (struct replay){ done, e->nreplay, id };
}

/*
 * Under the locks: write packets[0..n) with one reservation: bodies, then
 * headers from the last to the first, so that the processor finds the
 * whole replay at once; one doorbell.
 */
static aql_status emit(struct aql_queue_impl *q, const aql_packet *packets, uint32_t n)
{
	aql_queue *queue = &q->pub;
	uint64_t first = 0;
	uint16_t rest;
	aql_status st = aql_queue_reserve(queue, n, &first);

	if (st != AQL_OK)
		return st;
	for (uint32_t i = 0; i < n; i++)
		memcpy(aql_queue_slot(queue, first + i)->bytes + 4, packets[i].bytes + 4,
		       sizeof(aql_packet) - 4);
	for (uint32_t i = n; i-- > 0;) {
		memcpy(&rest, packets[i].bytes + 2, sizeof(rest));
		aql_packet_publish(aql_queue_slot(queue, first + i), packets[i].header, rest);
	}
	if (q->agent->ops->queue_flush)
		q->agent->ops->queue_flush(q->agent, q, first + n - 1);
	else
		aql_queue_ring_doorbell(queue, first + n - 1);
	return AQL_OK;
}

/* Under every lock: check, bind and plan the copies of the buffers. */
static aql_status plan_buffers(struct aql_graph_exec *e, aql_queue *queue,
			       struct aql_copy_plan *in)
{
	aql_status st;
	void *ptr;

	for (uint32_t u = 0; u < e->nuses; u++) {
		struct exec_use *use = &e->uses[u];

		st = aql_buf_check(use->buf, queue, use->writes, NULL, 0);
		if (st == AQL_OK)
			st = aql_buf_bind(use->buf, e->agent, &ptr);
		if (st == AQL_OK)
			st = aql_buf_reserve(use->buf, 1);
		if (st != AQL_OK)
			return st;
		/* The buffer moved (to another agent and back): later
		 * replays, this one included, use where it is now. */
		if (ptr != use->agent_ptr) {
			use->agent_ptr = ptr;
			write_pointers(e, use->buf, ptr);
			for (uint32_t l = 0; e->agent_graph && l < e->nlaunches; l++)
				e->agent->ops->graph_update(e->agent, e->agent_graph,
							    e->launches[l].packet,
							    &e->tmpl[e->launches[l].packet]);
		}
		use->filled = in->n;
		use->fill_bytes = in->bytes;
		if (use->copy_in && !use->buf->root->unified &&
		    (st = aql_buf_plan_in(use->buf, in)) != AQL_OK)
			return st;
		use->filled = in->n - use->filled;
		use->fill_bytes = in->bytes - use->fill_bytes;
	}
	return AQL_OK;
}

static void mark_buffers(struct aql_graph_exec *e, aql_completion fin)
{
	for (uint32_t u = 0; u < e->nuses; u++) {
		const struct exec_use *use = &e->uses[u];
		struct aql_buf_root *r = use->buf->root;

		if (!r->unified) {
			aql_buf_mark_current(use->buf);
			if (use->writes)
				aql_buf_mark_written(use->buf);
			r->moves_to_agent += use->filled;
			r->bytes_to_agent += use->fill_bytes;
		}
		aql_buf_track(use->buf, use->writes || use->filled, fin, "graph replay");
	}
}

/*
 * Under exec->lock: hidden arguments name the queue that runs the
 * dispatch (hidden_queue_ptr); a replay on another queue than the last
 * one rewrites them in the template, which no replay in flight reads.
 */
static void retarget_hidden(struct aql_graph_exec *e, aql_queue *queue)
{
	uint64_t qp = (uint64_t)(uintptr_t)queue->amd;

	for (uint32_t l = 0; l < e->nlaunches; l++) {
		struct exec_launch *el = &e->launches[l];

		if (!el->has_hidden || el->hidden.queue_ptr == qp)
			continue;
		el->hidden.queue_ptr = qp;
		aql_kernarg_fill_hidden(el->kernel, &e->tmpl[el->packet].dispatch, &el->hidden,
					e->kernarg + el->kernarg_off);
		if (e->agent_graph)
			e->agent->ops->graph_update(e->agent, e->agent_graph, el->packet,
						    &e->tmpl[el->packet]);
	}
}

/* Under exec->lock and t->lock. */
static aql_status replay(struct aql_graph_exec *e, aql_queue *queue, struct aql_timeline *t,
			 aql_completion *fin)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	aql_agent *agent = e->agent;
	size_t copy_room = t->info.unified_memory ? 0 :
			   (size_t)e->nuses * AQL_BUF_MAX_PIECES * agent->copy_args;
	size_t size = e->kernarg_size + copy_room;
	unsigned char *ka = NULL;
	struct aql_copy_plan in = { .agent = agent, .out = e->scratch };
	aql_packet *p;
	uint32_t n, nsign = 0;
	intptr_t delta;
	aql_status st;

	if (size && (st = aql_timeline_kernarg(t, queue, size, (void **)&ka)) != AQL_OK)
		return st;
	retarget_hidden(e, queue);
	in.args = ka + e->kernarg_size;
	if (e->nuses)
		aql_buf_lock();
	st = plan_buffers(e, queue, &in);
	n = in.n + (agent->ops->graph_launch ? 0 : e->npackets);
	if (st == AQL_OK && n > queue->size)
		st = aql_fail(AQL_ERR_INVALID_ARG,
			      "graph %llu: a replay needs %u packets; queue %llu holds %u",
			      (unsigned long long)e->graph_id, n,
			      (unsigned long long)queue_id(q), queue->size);
	if (st != AQL_OK)
		goto fail;
	if (e->kernarg_size)
		memcpy(ka, e->kernarg, e->kernarg_size);
	aql_timeline_sign(t, e->scratch, in.n);
	if (agent->ops->graph_launch) {
		if (in.n && (st = emit(q, e->scratch, in.n)) != AQL_OK)
			goto fail;
		t->packets += in.n;
		st = agent->ops->graph_launch(agent, q, e->agent_graph, t->signal,
					      t->start - (int64_t)t->packets);
		if (st != AQL_OK) {
			/* The copies run: their arguments stay theirs until
			 * they complete; the buffers stay stale on the agent,
			 * so the next replay copies them again. */
			if (size)
				aql_timeline_kernarg_commit(t, t->packets);
			size = 0;
			goto fail;
		}
		nsign = 1;
	} else {
		p = e->scratch + in.n;
		memcpy(p, e->tmpl, e->npackets * sizeof(*p));
		delta = (intptr_t)ka - (intptr_t)e->kernarg;
		for (uint32_t i = 0; i < e->nreloc; i++)
			p[e->reloc[i]].dispatch.kernarg_address += (uint64_t)delta;
		/*
		 * The last packet starts only once every earlier one completed,
		 * so its decrement alone is the replay's completion: the agent
		 * makes one signal update (and wakes a sleeping waiter once)
		 * per replay, not one per packet. A packet that fails stops
		 * the queue, and the agent fails the signals of those behind
		 * it, the last one's included.
		 */
		for (uint32_t i = e->sign_last ? e->npackets - 1 : 0; i < e->npackets; i++)
			if (!p[i].dispatch.completion_signal) {
				p[i].dispatch.completion_signal = aql_signal_handle(t->signal);
				nsign++;
			}
		st = emit(q, e->scratch, n);
		if (st != AQL_OK)
			goto fail;
		nsign += in.n;
	}
	t->packets += nsign;
	t->stats.copies_in += in.n;
	t->stats.bytes_in += in.bytes;
	if (size)
		aql_timeline_kernarg_commit(t, t->packets);
	*fin = aql_timeline_completion(t, queue, t->packets);
	mark_buffers(e, *fin);
	if (e->nuses)
		aql_buf_unlock();
	return AQL_OK;
fail:
	if (e->nuses)
		aql_buf_unlock();
	if (size)
		aql_timeline_kernarg_cancel(t);
	return st;
}

aql_status aql_graph_exec_replay(aql_graph_exec *exec, aql_queue *queue, aql_completion *done)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_timeline *t;
	aql_completion fin;
	aql_status st;

	if (!exec || !queue)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_graph_exec_replay: exec and queue are required");
	if (q->agent != exec->agent)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"graph %llu was recorded on another agent than queue %llu's: instantiate a recording made on this agent",
				(unsigned long long)exec->graph_id, (unsigned long long)queue_id(q));
	st = aql_timeline_get(queue, &t);
	if (st != AQL_OK)
		return st;
	pthread_mutex_lock(&exec->lock);
	aql_lock_take(&t->lock);
	st = replay(exec, queue, t, &fin);
	if (st == AQL_OK)
		t->stats.launches += exec->nlaunches;
	aql_lock_release(&t->lock);
	if (st == AQL_OK) {
		note_replay(exec, queue, fin);
		if (done)
			*done = fin;
	}
	pthread_mutex_unlock(&exec->lock);
	/* Unlocked: a hook may submit, record or replay itself. */
	for (uint32_t i = 0; st == AQL_OK && exec->hooks && i < exec->hooks->n; i++)
		if (exec->hooks->h[i].hook.replayed)
			exec->hooks->h[i].hook.replayed(exec->hooks->h[i].user, queue);
	return st;
}

aql_status aql_graph_exec_destroy(aql_graph_exec *exec)
{
	if (!exec)
		return AQL_OK;
	pthread_mutex_lock(&exec->lock);
	for (uint32_t i = 0; i < exec->nreplays; i++) {
		const struct replay *r = &exec->replays[i];

		if (aql_completion_done(r->done))
			continue;
		pthread_mutex_unlock(&exec->lock);
		return aql_fail(AQL_ERR_BUSY,
				"graph %llu: replay %llu on queue %llu is in flight; wait for its completion before destroying the executable graph",
				(unsigned long long)exec->graph_id, (unsigned long long)r->number,
				(unsigned long long)r->queue_id);
	}
	pthread_mutex_unlock(&exec->lock);
	exec_free(exec);
	return AQL_OK;
}
