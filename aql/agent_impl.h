/* SPDX-License-Identifier: MIT */
/*
 * Internal: the interface every agent implements. Queues, signals and
 * packets are agent-neutral memory; an agent only attaches a processor to
 * a queue's ring and detaches it again.
 */
#ifndef AQL_INTERNAL_AGENT_IMPL_H
#define AQL_INTERNAL_AGENT_IMPL_H

#include <stddef.h>
#include <aql/agent.h>
#include <aql/code_object.h>
#include <aql/kernarg.h>
#include <aql/packet.h>
#include <aql/queue.h>

struct aql_queue_impl;

/*
 * A code object that the agent's driver loads itself (PTX, cubin): the
 * loader fills the inputs, module_load the outputs.
 */
struct aql_module_load {
	const void *image;		/* in: the whole image */
	size_t size;
	uint32_t kernel_count;		/* in: the code object's kernels */
	const char *const *kernel_names;
	const uint32_t *kernarg_sizes;	/* in: explicit argument bytes */
	/* out, one per kernel: what a dispatch packet's kernel_object holds,
	 * the static LDS bytes and the largest work-group the code allows. */
	uint64_t *kernel_objects;
	uint32_t *group_segment_sizes;
	uint32_t *max_workgroup_sizes;
	/* out: agent memory holding every kernel_object, so that a packet in
	 * flight can be matched to the module; given back to module_unload. */
	void *base;
	size_t base_size;
};

struct aql_agent_ops {
	void (*get_info)(aql_agent *agent, aql_agent_info *info);
	/* Start processing the queue's ring; the queue is fully initialised. */
	aql_status (*queue_attach)(aql_agent *agent, struct aql_queue_impl *queue);
	/*
	 * Stop processing; returns once nothing of the agent touches the queue.
	 * Never called from the queue's error callback, which runs on the
	 * agent's own threads (aql_queue_inactivate() there leaves it to
	 * aql_queue_destroy()).
	 */
	void (*queue_detach)(aql_agent *agent, struct aql_queue_impl *queue);
	aql_status (*register_function)(aql_agent *agent, uint16_t id,
					aql_agent_fn fn, void *user);
	void (*destroy)(aql_agent *agent);
	/*
	 * Agent memory for a code object of the given kind: zeroed, page
	 * aligned and writable by the host until code_protect(). Errors:
	 * AQL_ERR_UNSUPPORTED (the agent takes no such code), AQL_ERR_NOMEM.
	 */
	aql_status (*code_alloc)(aql_agent *agent, enum aql_code_object_kind kind,
				 size_t size, void **out);
	/* Give whole pages their final PROT_* protection once loaded. */
	aql_status (*code_protect)(aql_agent *agent, void *addr, size_t size,
				   int prot);
	void (*code_free)(aql_agent *agent, void *base, size_t size);
	/*
	 * The loader wrote and relocated co in the memory of code_alloc
	 * (after code_protect): make the agent's processors see it, whatever
	 * their caches held there before (a GPU: invalidate its code caches),
	 * before the load returns. co stays valid until code_free of its
	 * memory. Errors: the agent's, naming it and why; the load then
	 * fails and frees its memory. NULL: nothing to do.
	 */
	aql_status (*code_loaded)(aql_agent *agent, const aql_code_object *co);
	/* Agent memory (aql_agent_mem_alloc()): zeroed, 256-byte aligned. */
	aql_status (*mem_alloc)(aql_agent *agent, size_t size, void **out);
	void (*mem_free)(aql_agent *agent, void *ptr);
	/* Copy now; returns when the bytes have arrived. */
	aql_status (*copy)(aql_agent *agent, void *dst, const void *src, size_t size);
	/*
	 * Fill packet, all but its completion signal, with a copy that this
	 * agent's queues run in packet order; its header is
	 * aql_timeline_header() of the packet's type. args: agent->copy_args
	 * bytes of kernarg memory (64-byte aligned) that live as long as the
	 * packet, NULL where copy_args is 0. src is NULL only where the
	 * agent asked for it itself (aql_timeline_copy()). Errors:
	 * AQL_ERR_INVALID_ARG (memory the agent cannot reach), AQL_ERR_UNSUPPORTED (the agent
	 * cannot copy), each named.
	 */
	aql_status (*encode_copy)(aql_agent *agent, aql_packet *packet, void *dst,
				  const void *src, size_t size, void *args);
	/*
	 * Make host memory [ptr, ptr + size) reachable by the agent's kernels
	 * (CUDA: cuMemHostRegister; KFD: a USERPTR mapping), and undo it.
	 * Pools, channels and signals call these through
	 * aql_agent_mem_register(), never knowing the agent; NULL: the agent
	 * reaches all host memory already (the CPU agent).
	 */
	aql_status (*mem_register)(aql_agent *agent, void *ptr, size_t size);
	void (*mem_unregister)(aql_agent *agent, void *ptr, size_t size);
	/*
	 * Symbols the agent lends to code objects of the given kind that it
	 * loads (the CPU agent: barriers and channel waits for host code
	 * objects); *count 0 for none. NULL: none at all.
	 */
	const aql_symbol_binding *(*builtins)(aql_agent *agent,
					      enum aql_code_object_kind kind,
					      uint32_t *count);
	/*
	 * Load a code object the driver takes as a whole (kinds PTX and
	 * CUBIN); NULL: the agent takes none. Errors: AQL_ERR_UNSUPPORTED,
	 * AQL_ERR_INVALID_CODE_OBJECT (with the driver's JIT log),
	 * AQL_ERR_NOT_FOUND (a kernel the driver does not find), AQL_ERR_NOMEM,
	 * AQL_ERR_DEVICE.
	 */
	aql_status (*module_load)(aql_agent *agent, enum aql_code_object_kind kind,
				  struct aql_module_load *load);
	void (*module_unload)(aql_agent *agent, void *base);
	/*
	 * Packets aql_timeline_emit() has just published on the queue, the
	 * last with id last: start them now on the calling thread (CUDA: the
	 * driver calls), with no hand-off to the queue's processor. The core
	 * does not ring the doorbell for them: the agent rings it (with last)
	 * when its processor must wake. NULL: the core rings the doorbell.
	 */
	void (*queue_flush)(aql_agent *agent, struct aql_queue_impl *queue, uint64_t last);
	/*
	 * Packets the agent took from the queue's ring but has not finished
	 * (a GPU agent retires ring slots once the driver has them): like
	 * aql_queue_find_pending(), 1 and the first match copied to *found
	 * with its packet id, else 0. NULL: the ring holds every packet in
	 * flight.
	 */
	int (*queue_find_pending)(aql_agent *agent, struct aql_queue_impl *queue,
				  int (*match)(const aql_packet *packet, void *user), void *user,
				  aql_packet *found, uint64_t *packet_id);
	/*
	 * Someone waits for work of the queue: completion stores the agent
	 * still owes (CUDA: collected, not yet on the stream) go out now.
	 * Cheap when nothing is owed. Any thread; the queue may be detached
	 * meanwhile (then a no-op). NULL: the agent owes nothing.
	 */
	void (*queue_request)(aql_agent *agent, struct aql_queue_impl *queue);
	/*
	 * A producer has waited waited_ns so far for room in the queue's
	 * full ring, and waits until deadline_ns: where the agent's
	 * processor is not running (the CPU agent: parked, or woken and
	 * waiting for a CPU), run packets from the head on the calling
	 * thread, as the processor would, up to id until. 1 if it ran any;
	 * 0 if it runs none; -1 if it may once the wait has gone on longer
	 * (the producer then sleeps at most 50 us before it asks again). Any
	 * producer thread; the agent refuses its own threads (0). NULL: only
	 * the agent runs packets.
	 */
	int (*queue_make_room)(aql_agent *agent, struct aql_queue_impl *queue, uint64_t until,
			       uint64_t waited_ns, uint64_t deadline_ns);
	/*
	 * Packets a resident queue (AQL_QUEUE_RESIDENT, attached to agent)
	 * handed to its translating path so far. NULL: the agent has no
	 * resident processor and refuses the flag.
	 */
	uint64_t (*queue_fallbacks)(aql_agent *agent, struct aql_queue_impl *queue);
	/*
	 * Give an attached queue the priority (aql_queue_set_priority()); the
	 * core holds queue->priority_lock, and queue->priority is still the
	 * old one. queue_attach starts a queue at queue->priority itself.
	 * NULL: the agent's queues have no priorities, and the core refuses
	 * any but NORMAL with AQL_ERR_UNSUPPORTED naming the agent.
	 */
	aql_status (*queue_set_priority)(aql_agent *agent, struct aql_queue_impl *queue,
					 enum aql_queue_priority priority);
	/*
	 * The hidden arguments of kernel that the agent supplies
	 * (aql_queue_hidden_args()): heap_v1 and hostcall_buffer where its
	 * metadata names them, made at their first need; the rest of *out
	 * is left as it is. Errors: what making them met, naming the
	 * kernel. NULL: the agent supplies none.
	 */
	aql_status (*kernel_hidden)(aql_agent *agent, const aql_kernel *kernel,
				    struct aql_kernarg_hidden *out);
	/*
	 * One of the agent's profiling stamps (a completion signal's start_ts
	 * or end_ts, as its processor wrote it) as aql_now_ns() nanoseconds
	 * (aql_agent_ticks_to_ns()). Errors: the agent's, named. Thread
	 * safe. NULL: the agent stamps in those nanoseconds already (the
	 * CPU agent).
	 */
	aql_status (*ticks_to_ns)(aql_agent *agent, uint64_t tick, uint64_t *ns);
	/*
	 * Recorded graphs (graph/, include/aql/graph.h), for an agent that
	 * replays them its own way (CUDA: a CUDA graph). All four or none;
	 * NULL: the core writes the recorded packets into the queue's ring
	 * at each replay, with one fetch-add and one doorbell (CPU, AMD).
	 *
	 * graph_build: at aql_graph_instantiate(), packets[0..count) as
	 * recorded and in replay order: kernel dispatches and copies with the
	 * barrier bit set and no completion signal (0), raw packets
	 * (aql_graph_record_packet()) as the program wrote them, their own
	 * signals included; kernel dispatches (kernarg_address points
	 * into memory the executable graph owns until graph_destroy, host
	 * memory the agent need not reach: copy it), copies as encode_copy
	 * made them, BARRIER_AND/OR and BARRIER_VALUE packets (waits on
	 * signals outside the graph). *out is the agent's graph. Errors: the
	 * agent's (AQL_ERR_UNSUPPORTED for a packet it cannot put in a graph,
	 * AQL_ERR_NOMEM, AQL_ERR_DEVICE), named; the instantiation fails.
	 *
	 * graph_update: packet index changed between replays
	 * (aql_graph_exec_set_arg(), a buffer whose agent copy moved, a
	 * replay on another queue rewriting hidden_queue_ptr): its kernarg
	 * bytes, at the same address, are new. Never while graph_launch runs
	 * for the same graph (the core holds the executable graph's lock
	 * around both). Errors: the agent's, named; set_arg returns them
	 * (its kernarg bytes are changed all the same).
	 *
	 * graph_launch: replay on queue (attached to agent, not in error)
	 * after all the queue's earlier work, and make completion's value
	 * drop below below once all of it has run (below is a threshold on
	 * the queue's timeline signal, which completion is: the agent
	 * decrements it by one, once for the whole replay, after the graph).
	 * Copies of stale buffers that the replay needs went onto the queue
	 * before the call, as packets (through queue_flush). Called under the
	 * queue's launch lock and the buffer lock. Errors: those of queue
	 * submission (AQL_ERR_QUEUE_ERROR, AQL_ERR_DEVICE), named; the graph
	 * did not run then (the copies may have).
	 *
	 * graph_destroy: no replay of it is in flight (the core checks).
	 */
	aql_status (*graph_build)(aql_agent *agent, const aql_packet *packets, uint32_t count,
				  void **out);
	aql_status (*graph_update)(aql_agent *agent, void *graph, uint32_t index,
				   const aql_packet *packet);
	aql_status (*graph_launch)(aql_agent *agent, struct aql_queue_impl *queue, void *graph,
				   aql_signal *completion, int64_t below);
	void (*graph_destroy)(aql_agent *agent, void *graph);
};

/*
 * One kind of agent that libaql is built with: an entry of
 * aql_agent_drivers[] (aql/agent_table.c), the only place where the core
 * meets the agents' rooms. aql_agent_default() takes the first entry whose
 * open_default succeeds.
 */
struct aql_agent_driver {
	const char *name;
	enum aql_agent_kind kind;
	/* Open the kind's default agent; on failure aql_error_message() says why. */
	aql_status (*open_default)(aql_agent **out);
	/* aql_agent_count() and aql_agent_open() for this kind. */
	aql_status (*count)(uint32_t *count);
	aql_status (*open)(uint32_t index, aql_agent **out);
};

extern const struct aql_agent_driver *const aql_agent_drivers[];

/*
 * Register host memory with an agent (ops->mem_register) and undo it.
 * Errors: the agent's (AQL_ERR_NOMEM, AQL_ERR_SYSTEM), named. Thread safe.
 */
aql_status aql_agent_mem_register(aql_agent *agent, void *ptr, size_t size);
void aql_agent_mem_unregister(aql_agent *agent, void *ptr, size_t size);

struct aql_agent {
	const struct aql_agent_ops *ops;
	uint32_t queues;	/* attached queues, for aql_agent_destroy() */
	uint32_t buffers;	/* typed buffers with storage on it, likewise */
	/* Kernarg bytes each copy packet takes (ops->encode_copy), a multiple
	 * of 64; 0: none (the copy is an agent dispatch). Set at open. */
	uint32_t copy_args;
	int is_default;
};

#endif
