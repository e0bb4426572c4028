/* SPDX-License-Identifier: MIT */
/*
 * Internal: the CUDA agent (nv/). One aql agent per CUDA device, on the
 * device's primary context, over the driver API loaded at run time
 * (nv/driver.c). Files:
 *
 *   driver.c   dlopen("libcuda.so.1"), cuGetProcAddress, the reasons why
 *              there is no CUDA agent, error names;
 *   agent.c    the agent: info, contexts, agent memory, copies, host
 *              memory registration, modules (PTX, cubin), the driver
 *              table entry;
 *   queue.c    queues: a non-blocking stream per queue, AQL packets
 *              translated into launches, copies and stream memory
 *              operations; completions, faults;
 *   resident.c resident queues (AQL_QUEUE_RESIDENT): the processor
 *              kernel (resident_kernel.c) linked, launched and served.
 */
#ifndef AQL_NV_NV_H
#define AQL_NV_NV_H

#include <pthread.h>
#include <stdint.h>

#include <aql/agent.h>
#include <aql/signal.h>

#include "aql/agent_impl.h"
#include "aql/queue_impl.h"
#include "nv/cuda_abi.h"

/* The loaded driver: every entry point of NV_DRIVER_FUNCS, never NULL. */
struct nv_driver {
	void *handle;
	int version;			/* cuDriverGetVersion() */
	int device_count;		/* after CUDA_VISIBLE_DEVICES */
#define NV_DRIVER_MEMBER_(name, ret, params) ret (*name) params;
	NV_DRIVER_FUNCS(NV_DRIVER_MEMBER_)
#undef NV_DRIVER_MEMBER_
};

/*
 * The driver, loaded and initialised once per process (cuInit, at least
 * one device). On failure every later call fails the same way, with the
 * reason: no libcuda.so.1 (AQL_ERR_NOT_FOUND), the toolkit's stub
 * (AQL_ERR_UNSUPPORTED), a driver older than NV_MIN_DRIVER_VERSION or
 * lacking an entry point (AQL_ERR_UNSUPPORTED), no device or every device
 * hidden by CUDA_VISIBLE_DEVICES (AQL_ERR_NOT_FOUND), cuInit failing
 * (AQL_ERR_DEVICE). Thread safe.
 */
aql_status nv_driver_get(const struct nv_driver **out);

/* "CUDA_ERROR_LAUNCH_FAILED" and the driver's sentence for r; never NULL,
 * also for codes the driver does not know. */
const char *nv_result_name(CUresult r);
const char *nv_result_string(CUresult r);

/*
 * aql_fail() for a driver call that returned r: the message is
 * "<what>: <call> failed: <CUDA_ERROR_NAME> (<sentence>)". The status is
 * AQL_ERR_NOMEM for CUDA_ERROR_OUT_OF_MEMORY, AQL_ERR_INVALID_ARG for
 * INVALID_VALUE, AQL_ERR_DEVICE otherwise. Returns it.
 */
aql_status nv_fail(CUresult r, const char *call, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A kernel of a loaded module: what a dispatch packet's kernel_object
 * points to on a CUDA agent. */
struct nv_kernel {
	CUfunction fn;
	uint32_t static_lds;		/* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
	uint32_t max_threads;		/* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
	uint32_t dynamic_lds_allowed;	/* MAX_DYNAMIC_SHARED_SIZE_BYTES set so far */
	uint32_t kernarg_size;		/* bytes of the packed parameter buffer */
	const char *name;
};

/* Host memory registered with the context (cuMemHostRegister). */
struct nv_range {
	uintptr_t start, end;
};

struct nv_agent {
	struct aql_agent base;		/* first */
	const struct nv_driver *cu;
	CUdevice device;
	CUcontext ctx;			/* the primary context, retained */
	aql_agent_info info;
	int mem_ops;			/* 64-bit stream memory operations work */
	/* Registered host ranges, sorted by start, under reg_lock. */
	pthread_mutex_t reg_lock;
	struct nv_range *ranges;
	uint32_t range_count, range_cap;
	/* Modules and their kernels are freed at destroy only if the
	 * caller leaked them; counted for aql_agent_destroy's refusal. */
	uint32_t modules;
};

static inline struct nv_agent *nv_agent_of(aql_agent *agent)
{
	return (struct nv_agent *)agent;
}

/*
 * Make the agent's context current on the calling thread, as every call
 * into the driver needs (a fresh thread has none). Cheap when it already
 * is: one cuCtxGetCurrent. Errors: AQL_ERR_DEVICE, named.
 */
aql_status nv_enter(struct nv_agent *a);

/*
 * nv_enter() without a driver call when the thread's last nv_enter() left
 * a's context current: the hot path of a launch makes one driver call.
 * Code may change the thread's context behind aql's back (the runtime
 * API, cuCtxSetCurrent), so a call made after it that fails is passed to
 * nv_enter_again().
 */
aql_status nv_enter_noted(struct nv_agent *a);

/*
 * After a driver call refused with r: 1 when r says the context was wrong
 * and it was, and a's context is now current (call again); 0 when the
 * error stands. Thread safe.
 */
int nv_enter_again(struct nv_agent *a, CUresult r);

/*
 * Whether [ptr, ptr + size) is host memory the device reaches (registered
 * with the context, or cuMemHostAlloc'ed). A block of a default pool
 * (they live until exit) not yet registered has its chunks registered
 * here first; any other host memory is pageable: 0, also a block of a
 * pool that does not list the agent. Thread safe.
 */
int nv_host_reachable(struct nv_agent *a, const void *ptr, size_t size);

/*
 * Register [ptr, ptr + size) (page-rounded) with the context, mapped for
 * the device, unless a registered range already covers it. Errors:
 * AQL_ERR_NOMEM (the memlock limit, named), AQL_ERR_DEVICE.
 */
aql_status nv_host_register(struct nv_agent *a, void *ptr, size_t size);

/*
 * f(user, text, kernels, count) for each PTX module loaded on a, in load
 * order, under the agent's module lock, until f returns an error
 * (returned). Thread safe.
 */
aql_status nv_modules_each_ptx(struct nv_agent *a,
			       aql_status (*f)(void *user, const char *ptx,
					       struct nv_kernel *kernels, uint32_t count),
			       void *user);

/* A signal the device writes or waits on: its page registered. */
aql_status nv_signal_reach(struct nv_agent *a, aql_signal *signal);

/* The agent dispatch type of a copy (encode_copy): arg[0] dst, arg[1]
 * src, arg[2] size. */
#define NV_FN_COPY 0xffffu

/* The agent dispatch type of a graph replay (nv/graph.c): arg[0] is the
 * struct nv_graph; the queue runs its segments in order. */
#define NV_FN_GRAPH 0xfffeu

/* Recorded packets [first, first + count): a CUDA graph of kernel nodes
 * (exec not NULL), or one other packet, translated at each replay. */
struct nv_graph_seg {
	CUgraph graph;
	CUgraphExec exec;
	CUgraphNode *nodes;		/* nodes[i]: packet first + i */
	uint32_t first, count;
	aql_packet packet;
};

struct nv_graph {
	struct nv_agent *a;
	uint32_t nsegs;
	struct nv_graph_seg segs[];
};

/* nv/graph.c: the graph ops of struct aql_agent_ops (aql/agent_impl.h). */
aql_status nv_graph_build(aql_agent *agent, const aql_packet *packets, uint32_t count,
			  void **out);
aql_status nv_graph_update(aql_agent *agent, void *graph, uint32_t index,
			   const aql_packet *packet);
aql_status nv_graph_launch(aql_agent *agent, struct aql_queue_impl *queue, void *graph,
			   aql_signal *completion, int64_t below);
void nv_graph_destroy(aql_agent *agent, void *graph);

/* A dispatch packet as cuLaunchKernel's (or a kernel node's) arguments. */
struct nv_dispatch {
	struct nv_kernel *k;
	uint32_t blocks[3], wg[3];
	uint32_t dyn;			/* dynamic shared memory */
	size_t size;			/* of the parameter buffer */
	void *extra[5];			/* the buffer: extra[3] points to size */
};

/*
 * Check d as a queue checks a dispatch packet and fill *out (which must
 * not move before its extra is used); the kernel is allowed its dynamic
 * shared memory. AQL_OK, or AQL_ERR_QUEUE_ERROR / AQL_ERR_DEVICE with why
 * in why[len] (not the thread's error message). Thread safe.
 */
aql_status nv_dispatch_args(struct nv_agent *a, const aql_dispatch_packet *d,
			    struct nv_dispatch *out, char *why, size_t len);

/* nv/queue.c: the queue half of struct aql_agent_ops. */
aql_status nv_queue_attach(aql_agent *agent, struct aql_queue_impl *queue);
void nv_queue_detach(aql_agent *agent, struct aql_queue_impl *queue);
void nv_queue_flush(aql_agent *agent, struct aql_queue_impl *queue, uint64_t last);
void nv_queue_request(aql_agent *agent, struct aql_queue_impl *queue);
int nv_queue_find_pending(aql_agent *agent, struct aql_queue_impl *queue,
			  int (*match)(const aql_packet *packet, void *user), void *user,
			  aql_packet *found, uint64_t *packet_id);
/* AQL_ERR_UNSUPPORTED, naming why: a stream's priority is its creation's. */
aql_status nv_queue_set_priority(aql_agent *agent, struct aql_queue_impl *queue,
				 enum aql_queue_priority priority);
uint64_t nv_queue_fallbacks(aql_agent *agent, struct aql_queue_impl *queue);

/*
 * nv/resident.c: the resident processor of an AQL_QUEUE_RESIDENT queue.
 * nv_resident_start links the processor's PTX with the device-function
 * forms of the agent's PTX modules, launches it on a stream of its own
 * and starts the host thread that runs what it hands back, wakes
 * sleeping waiters and watches for faults. nv_resident_stop stops the
 * processor between packets and returns with the ring's read index where
 * it stopped. Errors of start: AQL_ERR_UNSUPPORTED (libaql built without
 * the processor's PTX), AQL_ERR_DEVICE, AQL_ERR_NOMEM, named.
 */
struct nv_resident;
aql_status nv_resident_start(struct nv_agent *a, struct aql_queue_impl *q,
			     struct nv_resident **out);
void nv_resident_stop(struct nv_resident *r);
uint64_t nv_resident_fallbacks(const struct nv_resident *r);

/* nv/queue.c, for the resident processor's host thread: run packet id of
 * q on the translating path and wait until it is finished or *stop is
 * set; 0 when the queue failed (it halted: the packets after it got -1). */
int nv_queue_run_one(struct aql_queue_impl *q, uint64_t id, const int *stop);
/* The processor's stream failed with r: the queue's error state names it;
 * what it had not finished, and the ring, get -1. */
void nv_queue_resident_failed(struct aql_queue_impl *q, CUresult r);

/* The CUDA stream of an attached queue, for tests. */
CUstream nv_queue_stream(const struct aql_queue_impl *queue);

#endif
