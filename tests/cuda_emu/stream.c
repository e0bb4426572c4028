/* SPDX-License-Identifier: MIT */
/*
 * The emulated CUDA driver's streams: one worker thread per stream runs
 * its operations in order (ref §6.2). Kernels run as AQL dispatches of
 * their host builds on the emulation's private CPU agent. Also events,
 * host functions, stream memory operations, launches, capture and graphs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

#define NV_DECLARE_(name, ret, params) ret name params;
NV_DRIVER_FUNCS(NV_DECLARE_)
#undef NV_DECLARE_

enum op_kind { OP_KERNEL, OP_COPY, OP_HOSTFN, OP_WAIT, OP_WRITE, OP_EVENT_RECORD, OP_EVENT_WAIT };

struct kernel_op {
	CUfunction fn;
	struct emu_fn_launch fl;
	uint32_t grid[3];
	uint16_t block[3];
	uint32_t shared;
	void *kernarg;			/* 64-byte aligned copy of the parameters */
	size_t kernarg_size;
};

struct op {
	struct op *next;
	enum op_kind kind;
	union {
		struct kernel_op k;
		struct { void *dst; const void *src; size_t n; } copy;
		struct { CUhostFn fn; void *user; } host;
		struct { uintptr_t addr; uint64_t value; unsigned flags; int bits; } mem;
		struct { struct CUevent_st *ev; uint64_t gen; } ev;
	};
};

/* A node of a graph made with cuGraphCreate: launch index of its graph. */
struct CUgraphNode_st {
	struct CUgraph_st *graph;
	size_t index;
};

/*
 * Launches in an order that respects every dependency: captured ones in
 * capture order, explicit nodes in the order they were added (a node's
 * dependencies exist before it, so that order is topological). The
 * emulation runs a graph's launches one after another.
 */
struct CUgraph_st {
	struct kernel_op *launches;
	size_t n, cap;
	int explicit_nodes;		/* from cuGraphCreate */
	struct CUgraphNode_st **nodes;	/* explicit: nodes[i] is launch i */
	struct CUgraph_st *next;	/* live graphs */
};

struct CUgraphExec_st {
	struct kernel_op *launches;
	size_t n;
	struct CUgraphNode_st **nodes;	/* the graph's at instantiation (compared, never read) */
	struct CUgraphExec_st *next;
};

struct CUstream_st {
	struct CUctx_st *ctx;
	unsigned flags;
	int priority;			/* cuStreamCreateWithPriority's, clamped */
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* new work; work done */
	struct op *head, *tail;		/* head runs; removed when done */
	uint64_t submitted, completed;
	int closing;
	struct CUgraph_st *capture;	/* while capturing */
	aql_queue *queue;		/* the worker's, created on first launch */
	aql_signal *signal;
	struct CUstream_st *next;	/* live streams */
};

struct CUevent_st {
	struct CUctx_st *ctx;
	unsigned flags;
	_Atomic uint64_t recorded;	/* records asked for */
	_Atomic uint64_t done;		/* the latest record that ran */
	_Atomic uint64_t time_ns;
	_Atomic int refs;		/* the handle, and each queued use */
	struct CUevent_st *next;	/* live events */
};

/* Live handles, under emu.lock. */
static struct CUstream_st *streams;
static struct CUevent_st *events;
static struct CUgraph_st *graphs;
static struct CUgraphExec_st *execs;

static void event_put(struct CUevent_st *ev)
{
	if (atomic_fetch_sub(&ev->refs, 1) == 1)
		free(ev);
}

static void launches_free(struct kernel_op *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].kernarg);
	free(v);
}

/* *dst is src with a copy of its parameters; 0 when out of memory. */
static int launch_copy(struct kernel_op *dst, const struct kernel_op *src)
{
	*dst = *src;
	dst->kernarg = aligned_alloc(64, src->kernarg_size);
	if (dst->kernarg)
		memcpy(dst->kernarg, src->kernarg, src->kernarg_size);
	return dst->kernarg != NULL;
}

/* Room for one more launch (and node, for an explicit graph) in g. */
static CUresult graph_reserve(struct CUgraph_st *g)
{
	size_t cap = g->cap ? g->cap * 2 : 16;
	struct kernel_op *v;
	struct CUgraphNode_st **nv;

	if (g->n < g->cap)
		return CUDA_SUCCESS;
	v = realloc(g->launches, cap * sizeof(*v));
	if (!v)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->launches = v;
	if (g->explicit_nodes) {
		nv = realloc(g->nodes, cap * sizeof(*nv));
		if (!nv)
			return CUDA_ERROR_OUT_OF_MEMORY;
		g->nodes = nv;
	}
	g->cap = cap;
	return CUDA_SUCCESS;
}

/* ---- Running operations ------------------------------------------------- */

static int wait_met(uint64_t v, uint64_t value, unsigned flags, int bits)
{
	if (bits == 32) {
		v = (uint32_t)v;
		value = (uint32_t)value;
	}
	/* cuda.h, CUstreamWaitValue_flags: GEQ is cyclic, (int)(*addr -
	 * value) >= 0; AND is (*addr & value) != 0; NOR is ~(*addr | value)
	 * != 0. */
	switch (flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) {
	case CU_STREAM_WAIT_VALUE_GEQ:
		return bits == 32 ? (int32_t)(uint32_t)(v - value) >= 0 : (int64_t)(v - value) >= 0;
	case CU_STREAM_WAIT_VALUE_EQ:
		return v == value;
	case CU_STREAM_WAIT_VALUE_AND:
		return (v & value) != 0;
	default:
		return (bits == 32 ? (uint32_t)~(v | value) : ~(v | value)) != 0;
	}
}

static uint64_t mem_load(uintptr_t addr, int bits)
{
	if (bits == 32)
		return __atomic_load_n((uint32_t *)addr, __ATOMIC_ACQUIRE);
	return __atomic_load_n((uint64_t *)addr, __ATOMIC_ACQUIRE);
}

static void run_kernel(struct CUstream_st *s, struct kernel_op *k)
{
	struct CUctx_st *c = s->ctx;
	const aql_kernel *kern = k->fl.kernel;
	aql_dispatch_packet p;
	aql_packet raw;
	int64_t v = 1;

	/* AQL_CUDA_EMU_FAIL_AFTER=N: the launch after N good ones faults; the
	 * context keeps the error, as after a real illegal access. */
	if (emu.fail_after >= 0 && atomic_load(&emu.launches_ok) >= emu.fail_after) {
		long expected = emu.fail_after;

		if (atomic_compare_exchange_strong(&emu.launches_ok, &expected, expected + 1)) {
			atomic_fetch_add(&emu.stats.launch_faults, 1);
			atomic_store(&c->sticky, CUDA_ERROR_ILLEGAL_ADDRESS);
			return;
		}
	}
	if (!s->queue) {
		aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };

		if (aql_queue_create(emu.agent, &qc, &s->queue) != AQL_OK ||
		    aql_signal_create(1, &s->signal) != AQL_OK) {
			fprintf(stderr, "aql cuda emulation: stream queue: %s\n",
				aql_error_message());
			aql_queue_destroy(s->queue);
			s->queue = NULL;
			atomic_store(&c->sticky, CUDA_ERROR_LAUNCH_FAILED);
			return;
		}
	}
	memset(&p, 0, sizeof(p));
	p.setup = 3;
	p.workgroup_size_x = k->block[0];
	p.workgroup_size_y = k->block[1];
	p.workgroup_size_z = k->block[2];
	p.grid_size_x = k->grid[0] * k->block[0];
	p.grid_size_y = k->grid[1] * k->block[1];
	p.grid_size_z = k->grid[2] * k->block[2];
	p.group_segment_size = k->fl.static_lds + k->shared;
	p.private_segment_size = kern->private_segment_size;
	p.kernel_object = kern->kernel_object;
	p.kernarg_address = (uint64_t)(uintptr_t)k->kernarg;
	p.completion_signal = aql_signal_handle(s->signal);
	p.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
				     AQL_FENCE_SYSTEM);
	aql_signal_store(s->signal, 1, AQL_RELAXED);
	memcpy(&raw, &p, sizeof(p));
	if (aql_queue_submit(s->queue, &raw) != AQL_OK ||
	    aql_signal_wait(s->signal, AQL_COND_LT, 1, AQL_TIMEOUT_INFINITE,
			    AQL_WAIT_SPIN_BLOCK, &v) != AQL_OK || v < 0) {
		fprintf(stderr, "aql cuda emulation: kernel %s failed on the CPU agent: %s\n",
			kern->name, aql_error_message());
		atomic_store(&c->sticky, CUDA_ERROR_LAUNCH_FAILED);
		return;
	}
	atomic_fetch_add(&emu.launches_ok, 1);
	atomic_fetch_add(&emu.stats.launches, 1);
}

static void run(struct CUstream_st *s, struct op *op)
{
	struct CUctx_st *c = s->ctx;
	/* After a fault pending work is dropped, and host functions are not
	 * called (ref §3.4). */
	int failed = atomic_load(&c->sticky) != CUDA_SUCCESS;
	unsigned spins = 0;

	switch (op->kind) {
	case OP_KERNEL:
		if (!failed)
			run_kernel(s, &op->k);
		free(op->k.kernarg);
		atomic_fetch_sub(op->k.fl.pending, 1);
		break;
	case OP_COPY:
		if (!failed)
			memmove(op->copy.dst, op->copy.src, op->copy.n);
		break;
	case OP_HOSTFN:
		if (failed) {
			atomic_fetch_add(&emu.stats.host_funcs_skipped, 1);
			break;
		}
		emu_in_host_fn = 1;
		op->host.fn(op->host.user);
		emu_in_host_fn = 0;
		atomic_fetch_add(&emu.stats.host_funcs_run, 1);
		break;
	case OP_WAIT:
		/* Poll the word, so stores from any thread or stream count. */
		while (!failed && !wait_met(mem_load(op->mem.addr, op->mem.bits), op->mem.value,
					    op->mem.flags, op->mem.bits)) {
			emu_pause(&spins);
			failed = atomic_load(&c->sticky) != CUDA_SUCCESS;
		}
		if (!failed)
			atomic_fetch_add(&emu.stats.mem_op_waits, 1);
		break;
	case OP_WRITE:
		if (failed)
			break;
		if (op->mem.bits == 32)
			__atomic_store_n((uint32_t *)op->mem.addr, (uint32_t)op->mem.value,
					 __ATOMIC_SEQ_CST);
		else
			__atomic_store_n((uint64_t *)op->mem.addr, op->mem.value, __ATOMIC_SEQ_CST);
		atomic_fetch_add(&emu.stats.mem_op_writes, 1);
		break;
	case OP_EVENT_RECORD: {
		uint64_t d = atomic_load(&op->ev.ev->done);

		atomic_store(&op->ev.ev->time_ns, emu_now_ns());
		while (d < op->ev.gen && !atomic_compare_exchange_weak(&op->ev.ev->done, &d,
									   op->ev.gen))
			;
		event_put(op->ev.ev);
		break;
	}
	case OP_EVENT_WAIT:
		while (!failed && atomic_load(&op->ev.ev->done) < op->ev.gen) {
			emu_pause(&spins);
			failed = atomic_load(&c->sticky) != CUDA_SUCCESS;
		}
		event_put(op->ev.ev);
		break;
	}
}

/*
 * Whether a stream that just ran a kernel keeps device memory open to host
 * code (emu_device_enter) for op, the next one: an mprotect pair per
 * kernel would cost more than the kernel, so the window stays open while
 * another kernel is queued behind copies, writes and event records. It
 * closes before host code (a host function), before a wait that may
 * block, and before the write or record that tells the host the stream's
 * last kernel is done: the host then finds device memory closed.
 */
static int keeps_window(const struct op *op)
{
	for (int i = 0; op && i < 16; op = op->next, i++) {
		if (op->kind == OP_KERNEL)
			return 1;
		if (op->kind != OP_COPY && op->kind != OP_WRITE && op->kind != OP_EVENT_RECORD)
			return 0;
	}
	return 0;
}

static void *worker(void *arg)
{
	struct CUstream_st *s = arg;
	int window = 0;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct op *op;

		while (!s->head && !s->closing)
			pthread_cond_wait(&s->cv, &s->mu);
		if (!s->head)
			break;
		op = s->head;
		pthread_mutex_unlock(&s->mu);
		if (op->kind == OP_KERNEL && !window) {
			emu_device_enter();
			window = 1;
		}
		run(s, op);
		pthread_mutex_lock(&s->mu);
		s->head = op->next;
		if (!s->head)
			s->tail = NULL;
		s->completed++;
		atomic_fetch_sub(&s->ctx->pending, 1);
		if (window && !keeps_window(s->head)) {
			pthread_mutex_unlock(&s->mu);
			emu_device_leave();
			window = 0;
			pthread_mutex_lock(&s->mu);
		}
		pthread_cond_broadcast(&s->cv);
		free(op);
	}
	pthread_mutex_unlock(&s->mu);
	/* Destroyed, and its work done (cuStreamDestroy reference: resources
	 * are released once the device has completed the stream's work). */
	aql_queue_destroy(s->queue);
	aql_signal_destroy(s->signal);
	if (s->capture) {
		launches_free(s->capture->launches, s->capture->n);
		free(s->capture);
	}
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return NULL;
}

static struct CUstream_st *stream_new(struct CUctx_st *c, unsigned flags)
{
	struct CUstream_st *s = calloc(1, sizeof(*s));
	pthread_attr_t attr;
	pthread_t t;

	if (!s)
		return NULL;
	s->ctx = c;
	s->flags = flags;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, worker, s) != 0) {
		pthread_attr_destroy(&attr);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return NULL;
	}
	pthread_attr_destroy(&attr);
	return s;
}

/* ---- Stream helpers ----------------------------------------------------- */

/*
 * The stream h of context c: NULL, CU_STREAM_LEGACY (1) and
 * CU_STREAM_PER_THREAD (2) all name the context's default stream here
 * (the emulation does not model the legacy stream's implicit
 * synchronisation with blocking streams); anything else must be a live
 * stream of c (else CUDA_ERROR_INVALID_HANDLE).
 */
CUresult emu_stream_get(struct CUctx_st *c, CUstream h, struct CUstream_st **out)
{
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	struct CUstream_st *s;

	pthread_mutex_lock(&emu.lock);
	if ((uintptr_t)h <= 2) {
		if (!c->null_stream)
			c->null_stream = stream_new(c, 0);
		*out = c->null_stream;
		r = *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		EMU_LIST_FIND(streams, h, s);
		if (s && s->ctx == c) {
			*out = s;
			r = CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&emu.lock);
	return r;
}

/* The current context and its stream h (emu_stream_get). */
static CUresult ctx_stream(CUstream h, struct CUctx_st **c, struct CUstream_st **s)
{
	CUresult r = emu_ctx(c);

	return r == CUDA_SUCCESS ? emu_stream_get(*c, h, s) : r;
}

/* Queue op on s; a capturing stream records kernels only (the emulation
 * captures nothing else). Takes op in every case. */
static CUresult submit(struct CUstream_st *s, struct op *op)
{
	pthread_mutex_lock(&s->mu);
	if (s->capture) {
		struct CUgraph_st *g = s->capture;
		CUresult r;

		r = op->kind == OP_KERNEL ? graph_reserve(g) : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		if (r == CUDA_SUCCESS)
			g->launches[g->n++] = op->k;
		else if (op->kind == OP_KERNEL)
			free(op->k.kernarg);
		pthread_mutex_unlock(&s->mu);
		if (r != CUDA_SUCCESS && op->kind == OP_EVENT_RECORD) {
			/* Not recorded after all. */
			uint64_t gen = op->ev.gen;

			atomic_compare_exchange_strong(&op->ev.ev->recorded, &gen, gen - 1);
		}
		if (r != CUDA_SUCCESS && op->kind >= OP_EVENT_RECORD)
			event_put(op->ev.ev);
		free(op);
		return r;
	}
	if (op->kind == OP_KERNEL)
		atomic_fetch_add(op->k.fl.pending, 1);
	atomic_fetch_add(&s->ctx->pending, 1);
	op->next = NULL;
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	s->submitted++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return CUDA_SUCCESS;
}

static struct op *op_new(enum op_kind kind)
{
	struct op *op = calloc(1, sizeof(*op));

	if (op)
		op->kind = kind;
	return op;
}

CUresult emu_stream_sync(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->mu);
	/* Synchronizing a capturing stream is illegal (cuStreamSynchronize
	 * reference, stream capture). */
	if (s->capture) {
		pthread_mutex_unlock(&s->mu);
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	}
	uint64_t target = s->submitted;
	while (s->completed < target)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	return atomic_load(&s->ctx->sticky);
}

CUresult emu_stream_copy(struct CUstream_st *s, void *dst, const void *src, size_t n, int sync)
{
	struct op *op;
	CUresult r;

	if (sync) {
		r = emu_stream_sync(s);
		if (r != CUDA_SUCCESS)
			return r;
		memmove(dst, src, n);
		return CUDA_SUCCESS;
	}
	op = op_new(OP_COPY);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->copy.dst = dst;
	op->copy.src = src;
	op->copy.n = n;
	return submit(s, op);
}

void emu_ctx_drain(struct CUctx_st *c)
{
	unsigned spins = 0;

	while (atomic_load(&c->pending) != 0)
		emu_pause(&spins);
}

/* ---- Streams ------------------------------------------------------------ */

/*
 * cuCtxGetStreamPriorityRange: the range recent drivers report for
 * devices with priorities, least 0 (the default) to greatest -5; lower
 * numbers run first.
 */
#define PRIORITY_LEAST 0
#define PRIORITY_GREATEST (-5)

CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* Either may be NULL: "if the value is not desired". */
	if (least)
		*least = PRIORITY_LEAST;
	if (greatest)
		*greatest = PRIORITY_GREATEST;
	return CUDA_SUCCESS;
}

CUresult cuStreamCreateWithPriority(CUstream *stream, unsigned int flags, int priority)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* CU_STREAM_DEFAULT or CU_STREAM_NON_BLOCKING (cuStreamCreate). */
	if (!stream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	s = stream_new(c, flags);
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Outside the range: "clamped to the lowest or the highest number
	 * in the range". The emulated streams run at one speed whatever it is. */
	s->priority = priority > PRIORITY_LEAST ? PRIORITY_LEAST :
		      priority < PRIORITY_GREATEST ? PRIORITY_GREATEST : priority;
	EMU_LIST_PUSH(streams, s);
	*stream = s;
	return CUDA_SUCCESS;
}

/* Counted once, by cuStreamCreateWithPriority. */
CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	return cuStreamCreateWithPriority(stream, flags, 0);
}

/* Not used by aql: tests read a queue's stream priority with it, from
 * any thread (the stream knows its context). */
CUresult cuStreamGetPriority(CUstream stream, int *priority)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUstream_st *s;

	if (r != CUDA_SUCCESS)
		return r;
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(streams, stream, s);
	if (s)
		*priority = s->priority;
	pthread_mutex_unlock(&emu.lock);
	return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuStreamDestroy(CUstream stream)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUstream_st *s;

	if (r != CUDA_SUCCESS)
		return r;
	if (!emu_current)
		return CUDA_ERROR_INVALID_CONTEXT;
	EMU_LIST_TAKE(streams, stream, s);
	if (!s)
		return CUDA_ERROR_INVALID_HANDLE;
	/* Work still queued completes first; the call does not wait for it
	 * (cuStreamDestroy reference). */
	pthread_mutex_lock(&s->mu);
	s->closing = 1;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return atomic_load(&emu_current->sticky);
}

CUresult cuStreamQuery(CUstream stream)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&s->mu);
	r = s->capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
	    : s->completed == s->submitted ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
	pthread_mutex_unlock(&s->mu);
	if (r == CUDA_SUCCESS)
		r = atomic_load(&c->sticky);
	return r;
}

CUresult cuStreamSynchronize(CUstream stream)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	return emu_stream_sync(s);
}

CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *user)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct op *op;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (!fn)
		return CUDA_ERROR_INVALID_VALUE;
	op = op_new(OP_HOSTFN);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	op->host.fn = fn;
	op->host.user = user;
	return submit(s, op);
}

/* ---- Stream memory operations ------------------------------------------- */

/*
 * A stream memory operation's word must be device memory, or host memory
 * registered or allocated with the driver (mapped for the device), and
 * aligned to its size (cuStreamWaitValue64 reference); else
 * CUDA_ERROR_INVALID_VALUE. Devices without 64-bit stream memory
 * operations refuse them with CUDA_ERROR_NOT_SUPPORTED. A wait's flags
 * are one CUstreamWaitValue_flags comparison, optionally with FLUSH; a
 * write's, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER at most.
 */
static CUresult mem_op_check(enum op_kind kind, uintptr_t addr, unsigned flags, int bits)
{
	if (emu.mode == EMU_NOMEMOPS)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!addr || addr % (unsigned)(bits / 8) ||
	    emu_mem_kind(addr, (size_t)bits / 8) == EMU_MEM_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	if (kind == OP_WAIT ? (flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) >
				      CU_STREAM_WAIT_VALUE_NOR
			    : (flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static struct op *mem_op(enum op_kind kind, CUdeviceptr addr, uint64_t value, unsigned flags,
			 int bits)
{
	struct op *op = op_new(kind);

	if (op) {
		op->mem.addr = (uintptr_t)emu_host_view((uintptr_t)addr);
		op->mem.value = value;
		op->mem.flags = flags;
		op->mem.bits = bits;
	}
	return op;
}

/* cuStreamWaitValue64 and cuStreamWriteValue64. */
static CUresult stream_mem_op(CUstream stream, enum op_kind kind, CUdeviceptr addr,
			      uint64_t value, unsigned flags)
{
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct op *op;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r == CUDA_SUCCESS)
		r = mem_op_check(kind, (uintptr_t)addr, flags, 64);
	if (r != CUDA_SUCCESS)
		return r;
	op = mem_op(kind, addr, value, flags, 64);
	return op ? submit(s, op) : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, uint64_t value,
			     unsigned int flags)
{
	EMU_ENTRY();
	return stream_mem_op(stream, OP_WAIT, addr, value, flags);
}

CUresult cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, uint64_t value,
			      unsigned int flags)
{
	EMU_ENTRY();
	return stream_mem_op(stream, OP_WRITE, addr, value, flags);
}

/* A batch entry as d's kind and mem: 1 for a wait or a write, 0 for an
 * operation that only orders (the worker is in order), -1 for none. */
static int batch_op(const CUstreamBatchMemOpParams *o, struct op *d)
{
	const __typeof__(o->waitValue) *v = &o->waitValue;

	switch (o->operation) {
	case CU_STREAM_MEM_OP_WAIT_VALUE_32:
	case CU_STREAM_MEM_OP_WAIT_VALUE_64:
		d->kind = OP_WAIT;
		break;
	case CU_STREAM_MEM_OP_WRITE_VALUE_32:
	case CU_STREAM_MEM_OP_WRITE_VALUE_64:
		d->kind = OP_WRITE;
		v = &o->writeValue;
		break;
	case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
	case CU_STREAM_MEM_OP_BARRIER:
		return 0;
	default:
		return -1;
	}
	d->mem.bits = o->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ||
			      o->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? 32 : 64;
	d->mem.addr = (uintptr_t)v->address;
	d->mem.value = d->mem.bits == 32 ? v->value : v->value64;
	d->mem.flags = v->flags;
	return 1;
}

CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count, CUstreamBatchMemOpParams *ops,
			    unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct op d;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (emu.mode == EMU_NOMEMOPS)
		return CUDA_ERROR_NOT_SUPPORTED;
	/* flags must be 0; at most 256 operations (cuStreamBatchMemOp
	 * reference). Every operation is checked before any is queued. */
	if (!ops || count == 0 || count > 256 || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < count; i++) {
		int k = batch_op(&ops[i], &d);

		if (k < 0)
			return CUDA_ERROR_INVALID_VALUE;
		r = k ? mem_op_check(d.kind, d.mem.addr, d.mem.flags, d.mem.bits) : CUDA_SUCCESS;
		if (r != CUDA_SUCCESS)
			return r;
	}
	for (unsigned i = 0; i < count; i++) {
		struct op *op;

		if (batch_op(&ops[i], &d) <= 0)
			continue;
		op = mem_op(d.kind, d.mem.addr, d.mem.value, d.mem.flags, d.mem.bits);
		r = op ? submit(s, op) : CUDA_ERROR_OUT_OF_MEMORY;
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

/* ---- Events ------------------------------------------------------------- */

static CUresult event_get(struct CUctx_st *c, CUevent h, struct CUevent_st **out)
{
	CUresult r = CUDA_ERROR_INVALID_HANDLE;
	struct CUevent_st *e;

	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(events, h, e);
	if (e && e->ctx == c) {
		*out = e;
		r = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&emu.lock);
	return r;
}

/* The current context and its event h. */
static CUresult ctx_event(CUevent h, struct CUctx_st **c, struct CUevent_st **e)
{
	CUresult r = emu_ctx(c);

	return r == CUDA_SUCCESS ? event_get(*c, h, e) : r;
}

/* An operation on event e's record gen, holding a reference to e. */
static struct op *event_op(enum op_kind kind, struct CUevent_st *e, uint64_t gen)
{
	struct op *op = op_new(kind);

	if (op) {
		atomic_fetch_add(&e->refs, 1);
		op->ev.ev = e;
		op->ev.gen = gen;
	}
	return op;
}

CUresult cuEventCreate(CUevent *event, unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUevent_st *e;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* BLOCKING_SYNC and DISABLE_TIMING; INTERPROCESS (0x4) needs
	 * DISABLE_TIMING (cuEventCreate reference). */
	if (!event || (flags & ~0x7u) || ((flags & 0x4) && !(flags & CU_EVENT_DISABLE_TIMING)))
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->ctx = c;
	e->flags = flags;
	atomic_init(&e->refs, 1);
	EMU_LIST_PUSH(events, e);
	*event = e;
	return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct CUevent_st *e;
	struct op *op;
	CUresult r = ctx_event(event, &c, &e);

	if (r == CUDA_SUCCESS)
		r = emu_stream_get(c, stream, &s);
	if (r != CUDA_SUCCESS)
		return r;
	op = event_op(OP_EVENT_RECORD, e, 0);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Counted only once the operation exists. */
	op->ev.gen = atomic_fetch_add(&e->recorded, 1) + 1;
	return submit(s, op);
}

CUresult cuEventQuery(CUevent event)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUevent_st *e;
	CUresult r = ctx_event(event, &c, &e);

	if (r != CUDA_SUCCESS)
		return r;
	/* Never recorded: done (cuEventQuery reference). */
	return atomic_load(&e->done) >= atomic_load(&e->recorded) ? CUDA_SUCCESS
								   : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent event)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUevent_st *e;
	CUresult r = ctx_event(event, &c, &e);
	unsigned spins = 0;

	if (r != CUDA_SUCCESS)
		return r;
	uint64_t target = atomic_load(&e->recorded);
	while (atomic_load(&e->done) < target && atomic_load(&c->sticky) == CUDA_SUCCESS)
		emu_pause(&spins);
	return atomic_load(&c->sticky);
}

CUresult cuEventDestroy(CUevent event)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUevent_st *e;

	if (r != CUDA_SUCCESS)
		return r;
	if (!emu_current)
		return CUDA_ERROR_INVALID_CONTEXT;
	EMU_LIST_TAKE(events, event, e);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	/* A record still queued keeps it until it runs (cuEventDestroy
	 * reference). */
	event_put(e);
	return atomic_load(&emu_current->sticky);
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUevent_st *a, *b;
	CUresult r = ctx_event(start, &c, &a);

	if (r == CUDA_SUCCESS)
		r = event_get(c, end, &b);
	if (r != CUDA_SUCCESS)
		return r;
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	/* Timing disabled or never recorded: CUDA_ERROR_INVALID_HANDLE; not
	 * yet done: CUDA_ERROR_NOT_READY (cuEventElapsedTime reference). */
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	if (atomic_load(&a->recorded) == 0 || atomic_load(&b->recorded) == 0)
		return CUDA_ERROR_INVALID_HANDLE;
	if (atomic_load(&a->done) < atomic_load(&a->recorded) ||
	    atomic_load(&b->done) < atomic_load(&b->recorded))
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)((int64_t)(atomic_load(&b->time_ns) - atomic_load(&a->time_ns))) /
		      1e6);
	return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct CUevent_st *e;
	struct op *op;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r == CUDA_SUCCESS)
		r = event_get(c, event, &e);
	if (r != CUDA_SUCCESS)
		return r;
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	/* Waits for the event's latest record; none: nothing to wait for. */
	uint64_t gen = atomic_load(&e->recorded);
	if (gen == 0)
		return CUDA_SUCCESS;
	op = event_op(OP_EVENT_WAIT, e, gen);
	return op ? submit(s, op) : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- Launches ----------------------------------------------------------- */

/* The packed parameter buffer, from kernelParams (one pointer per .param)
 * or from extra; NULL with *r set when neither form is right. */
static void *param_block(const aql_ptx_entry *entry, const struct emu_fn_launch *fl,
			 void **params, void **extra, size_t *size, CUresult *r)
{
	size_t n = entry->param_size > fl->kernel->kernarg_size ? entry->param_size
								: fl->kernel->kernarg_size;
	const void *buf = NULL;
	const size_t *bufsize = NULL;
	void *k;

	*r = CUDA_ERROR_INVALID_VALUE;
	/* Both forms, or neither with parameters: CUDA_ERROR_INVALID_VALUE
	 * (cuLaunchKernel reference; ref §3.8). */
	if (params && extra)
		return NULL;
	if (!params && !extra && entry->param_size != 0)
		return NULL;
	if (extra) {
		for (unsigned i = 0;; i += 2) {
			if (i >= 64)
				return NULL;
			if (extra[i] == CU_LAUNCH_PARAM_END)
				break;
			if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
				buf = extra[i + 1];
			else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
				bufsize = extra[i + 1];
			else
				return NULL;
		}
		/* The buffer and its size, which must be the parameters' size. */
		if (!buf || !bufsize || *bufsize != entry->param_size)
			return NULL;
	}
	n = (n + 63) & ~(size_t)63;
	if (n == 0)
		n = 64;
	k = aligned_alloc(64, n);
	if (!k) {
		*r = CUDA_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	memset(k, 0, n);
	if (buf) {
		memcpy(k, buf, entry->param_size);
	} else if (params) {
		for (uint32_t i = 0; i < entry->param_count; i++) {
			if (!params[i]) {
				free(k);
				return NULL;
			}
			memcpy((char *)k + entry->params[i].offset, params[i],
			       entry->params[i].size);
		}
	}
	*size = n;
	*r = CUDA_SUCCESS;
	return k;
}

/*
 * A launch's operation, checked at the call, not when the kernel runs (ref
 * §3.8): block and grid dimensions within the device's limits, threads
 * within the function's, dynamic shared memory within what it allows, the
 * parameters in one right form (copied). Shared by cuLaunchKernel and the
 * graph calls.
 */
static CUresult kernel_op_fill(struct kernel_op *k, CUfunction fn, const unsigned int grid[3],
			       const unsigned int block[3], unsigned int shared, void **params,
			       void **extra)
{
	struct emu_fn_launch fl;
	const aql_ptx_entry *entry;
	uint32_t max_threads, dyn_max;
	unsigned int gx = grid[0], gy = grid[1], gz = grid[2];
	unsigned int bx = block[0], by = block[1], bz = block[2];
	CUresult r = emu_fn_get(fn, &fl, &max_threads, &dyn_max, &entry);

	if (r != CUDA_SUCCESS)
		return r;
	if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 ||
	    (uint64_t)bx * by * bz > max_threads)
		return CUDA_ERROR_INVALID_VALUE;
	if (gx == 0 || gy == 0 || gz == 0 || gx > 2147483647u || gy > 65535 || gz > 65535)
		return CUDA_ERROR_INVALID_VALUE;
	if (shared > dyn_max)
		return CUDA_ERROR_INVALID_VALUE;
	/* AQL grids count work-items in 32 bits: a limit of the emulation. */
	if ((uint64_t)gx * bx > UINT32_MAX || (uint64_t)gy * by > UINT32_MAX ||
	    (uint64_t)gz * bz > UINT32_MAX)
		return CUDA_ERROR_NOT_SUPPORTED;
	k->kernarg = param_block(entry, &fl, params, extra, &k->kernarg_size, &r);
	if (!k->kernarg)
		return r;
	k->fn = fn;
	k->fl = fl;
	for (int i = 0; i < 3; i++) {
		k->grid[i] = grid[i];
		k->block[i] = (uint16_t)block[i];
	}
	k->shared = shared;
	return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction fn, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			CUstream stream, void **params, void **extra)
{
	EMU_ENTRY();
	const unsigned int grid[3] = { gx, gy, gz }, block[3] = { bx, by, bz };
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct op *op;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	op = op_new(OP_KERNEL);
	if (!op)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = kernel_op_fill(&op->k, fn, grid, block, shared, params, extra);
	if (r != CUDA_SUCCESS) {
		free(op);
		return r;
	}
	return submit(s, op);
}

/* ---- Capture and graphs ------------------------------------------------- */

/* x's launches (and nodes) copied from g; 0 when out of memory. */
static int exec_copy(struct CUgraphExec_st *x, const struct CUgraph_st *g)
{
	size_t cap = g->n ? g->n : 1;

	x->launches = calloc(cap, sizeof(*x->launches));
	if (!x->launches)
		return 0;
	if (g->explicit_nodes) {
		x->nodes = calloc(cap, sizeof(*x->nodes));
		if (!x->nodes)
			return 0;
		memcpy(x->nodes, g->nodes, g->n * sizeof(*x->nodes));
	}
	while (x->n < g->n && launch_copy(&x->launches[x->n], &g->launches[x->n]))
		x->n++;
	return x->n == g->n;
}

static void exec_free(struct CUgraphExec_st *x)
{
	launches_free(x->launches, x->n);
	free(x->nodes);
	free(x);
}

CUresult cuStreamBeginCapture(CUstream stream, int mode)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct CUgraph_st *g;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	/* The legacy stream cannot be captured (cuStreamBeginCapture). */
	if ((uintptr_t)stream <= 2)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&s->mu);
	if (s->capture) {
		pthread_mutex_unlock(&s->mu);
		free(g);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	s->capture = g;
	pthread_mutex_unlock(&s->mu);
	return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream stream, CUgraph *graph)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct CUgraph_st *g;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	if (!graph)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&s->mu);
	g = s->capture;
	s->capture = NULL;
	pthread_mutex_unlock(&s->mu);
	/* Not capturing: CUDA_ERROR_ILLEGAL_STATE (cuStreamEndCapture). */
	if (!g)
		return CUDA_ERROR_ILLEGAL_STATE;
	EMU_LIST_PUSH(graphs, g);
	*graph = g;
	return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUgraph_st *g;
	struct CUgraphExec_st *x;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* AUTO_FREE_ON_LAUNCH, UPLOAD, DEVICE_LAUNCH, USE_NODE_PRIORITY. */
	if (!exec || (flags & ~0xfull))
		return CUDA_ERROR_INVALID_VALUE;
	x = calloc(1, sizeof(*x));
	if (!x)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(graphs, graph, g);
	r = !g ? CUDA_ERROR_INVALID_VALUE : exec_copy(x, g) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	if (r == CUDA_SUCCESS) {
		x->next = execs;
		execs = x;
	}
	pthread_mutex_unlock(&emu.lock);
	if (r != CUDA_SUCCESS) {
		exec_free(x);
		return r;
	}
	*exec = x;
	return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	struct CUgraphExec_st *x = NULL;
	CUresult r = ctx_stream(stream, &c, &s);

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(execs, exec, x);
	pthread_mutex_unlock(&emu.lock);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&emu.stats.graph_launches, 1);
	for (size_t i = 0; i < x->n; i++) {
		struct op *op = op_new(OP_KERNEL);
		struct emu_fn_launch fl;
		uint32_t mt, dm;
		const aql_ptx_entry *entry;

		if (!op)
			return CUDA_ERROR_OUT_OF_MEMORY;
		/* The module must still be loaded. */
		r = emu_fn_get(x->launches[i].fn, &fl, &mt, &dm, &entry);
		if (r == CUDA_SUCCESS && !launch_copy(&op->k, &x->launches[i]))
			r = CUDA_ERROR_OUT_OF_MEMORY;
		if (r != CUDA_SUCCESS) {
			free(op);
			return r;
		}
		op->k.fl = fl;
		r = submit(s, op);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUgraphExec_st *x;

	if (r != CUDA_SUCCESS)
		return r;
	EMU_LIST_TAKE(execs, exec, x);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	exec_free(x);
	return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct CUgraph_st *g;

	if (r != CUDA_SUCCESS)
		return r;
	EMU_LIST_TAKE(graphs, graph, g);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	launches_free(g->launches, g->n);
	if (g->nodes)
		for (size_t i = 0; i < g->n; i++)
			free(g->nodes[i]);
	free(g->nodes);
	free(g);
	return CUDA_SUCCESS;
}

CUresult cuGraphCreate(CUgraph *graph, unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUgraph_st *g;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* "flags - Graph creation flags, must be 0" (cuGraphCreate). */
	if (!graph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	g = calloc(1, sizeof(*g));
	if (!g)
		return CUDA_ERROR_OUT_OF_MEMORY;
	g->explicit_nodes = 1;
	EMU_LIST_PUSH(graphs, g);
	*graph = g;
	return CUDA_SUCCESS;
}

/* A kernel node's launch, checked as cuLaunchKernel checks one. */
static CUresult node_op(struct kernel_op *k, const CUDA_KERNEL_NODE_PARAMS *p)
{
	const unsigned int grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
	const unsigned int block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };

	/* func NULL names a CUkernel (kern, ctx): context-independent
	 * loading, which the emulation does not model. */
	if (!p->func)
		return CUDA_ERROR_NOT_SUPPORTED;
	return kernel_op_fill(k, p->func, grid, block, p->sharedMemBytes, p->kernelParams,
			      p->extra);
}

CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph graph, const CUgraphNode *deps,
			      size_t ndeps, const CUDA_KERNEL_NODE_PARAMS *params)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUgraph_st *g;
	struct CUgraphNode_st *n;
	struct kernel_op k;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!node || !params || (ndeps && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	/* The parameters are copied during the call (cuGraphAddKernelNode). */
	r = node_op(&k, params);
	if (r != CUDA_SUCCESS)
		return r;
	n = calloc(1, sizeof(*n));
	if (!n) {
		free(k.kernarg);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(graphs, graph, g);
	r = g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	/* Nodes are added to graphs from cuGraphCreate only: a limit of the
	 * emulation (captured graphs keep no node handles). */
	if (g && !g->explicit_nodes)
		r = CUDA_ERROR_NOT_SUPPORTED;
	/* Every dependency a node of this graph, none twice: "numDependencies
	 * ... may not have any duplicate entries" (cuGraphAddKernelNode);
	 * CUDA_ERROR_INVALID_VALUE otherwise. */
	for (size_t i = 0; r == CUDA_SUCCESS && i < ndeps; i++) {
		int mine = 0;

		for (size_t j = 0; j < g->n && !mine; j++)
			mine = g->nodes[j] == deps[i];
		for (size_t j = 0; j < i && mine; j++)
			mine = deps[j] != deps[i];
		if (!mine)
			r = CUDA_ERROR_INVALID_VALUE;
	}
	if (r == CUDA_SUCCESS)
		r = graph_reserve(g);
	if (r == CUDA_SUCCESS) {
		n->graph = g;
		n->index = g->n;
		g->launches[g->n] = k;
		g->nodes[g->n++] = n;
	}
	pthread_mutex_unlock(&emu.lock);
	if (r != CUDA_SUCCESS) {
		free(k.kernarg);
		free(n);
		return r;
	}
	*node = n;
	return CUDA_SUCCESS;
}

CUresult cuGraphExecKernelNodeSetParams(CUgraphExec exec, CUgraphNode node,
					const CUDA_KERNEL_NODE_PARAMS *params)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUgraphExec_st *x;
	struct kernel_op k, old;
	size_t i = 0;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!params)
		return CUDA_ERROR_INVALID_VALUE;
	r = node_op(&k, params);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&emu.lock);
	EMU_LIST_FIND(execs, exec, x);
	/* hNode: "kernel node from the graph from which graphExec was
	 * instantiated" (cuGraphExecKernelNodeSetParams): any other node,
	 * or an executable graph not instantiated from nodes, is refused. */
	r = x && x->nodes ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	while (r == CUDA_SUCCESS && i < x->n && x->nodes[i] != node)
		i++;
	if (r == CUDA_SUCCESS && i == x->n)
		r = CUDA_ERROR_INVALID_VALUE;
	/* "The owning context of the function cannot change" (same). */
	if (r == CUDA_SUCCESS && k.fl.ctx != x->launches[i].fl.ctx)
		r = CUDA_ERROR_INVALID_VALUE;
	/* Only later launches see it; cuGraphLaunch copied what it queued. */
	if (r == CUDA_SUCCESS) {
		old = x->launches[i];
		x->launches[i] = k;
	}
	pthread_mutex_unlock(&emu.lock);
	if (r != CUDA_SUCCESS) {
		free(k.kernarg);
		return r;
	}
	free(old.kernarg);
	return CUDA_SUCCESS;
}
