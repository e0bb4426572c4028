/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --agent cuda: the CUDA agent on NVIDIA agent 0, each metric
 * next to a raw driver-API peer measured in the same run. The peers call
 * the very driver libaql loaded (nv_driver_get()) on the agent's primary
 * context, with the same empty kernel (cuda_kernels.c, PTX) on a stream
 * of their own. Latencies are CLOCK_MONOTONIC per sample, spinning.
 *
 * cuda_rtt_typed		AQL_LAUNCH of one work-item, spin on
 *				aql_completion_done().
 * cuda_rtt_raw_packet		a prepared dispatch packet written into the
 *				ring + doorbell (aql_queue_submit), spin on its
 *				completion signal: the queue's processor thread
 *				translates it.
 * cuda_rtt_raw_sync		peer: cuLaunchKernel + cuStreamSynchronize.
 * cuda_rtt_raw_event		peer: cuLaunchKernel + cuEventRecord +
 *				cuEventSynchronize.
 * cuda_rtt_graph_per_launch	peer: a graph captured from GRAPH_LAUNCHES
 *				launches, cuGraphLaunch + cuStreamSynchronize,
 *				divided by GRAPH_LAUNCHES.
 * cuda_graph_replay_per_launch	the same GRAPH_LAUNCHES typed launches
 *				recorded (aql_graph_begin), instantiated once,
 *				replayed (a CUDA graph) and awaited, divided
 *				by GRAPH_LAUNCHES; its peer is the row above.
 * cuda_launch_throughput	BATCH typed launches back to back, the last
 *				awaited; launches/s per round.
 * cuda_launch_throughput_raw	peer: BATCH cuLaunchKernel + one
 *				cuStreamSynchronize.
 * cuda_submit_raw_ns		per launch, host time of BATCH cuLaunchKernel
 *				calls (the stream drained before each batch).
 * cuda_submit_typed_ns		the same for AQL_LAUNCH calls.
 * cuda_typed_overhead_ns	per round, typed minus raw: what a typed
 *				launch adds on the submitting thread.
 * cuda_chain_signals		CPU agent -> GPU -> CPU agent, each launch
 *				ordered after the previous one's completion
 *				(aql_launch_config.after), only the last
 *				awaited: no host thread between the steps.
 * cuda_chain_host_sync		the same chain, the host waiting for each
 *				completion before submitting the next step.
 * cuda_chain_graph		peer: a graph of host node, kernel, host node
 *				(stream capture of cuLaunchHostFunc,
 *				cuLaunchKernel, cuLaunchHostFunc), replayed.
 * cuda_resident_rtt		a prepared dispatch packet into the ring of a
 *				resident queue (AQL_QUEUE_RESIDENT, 2 blocks):
 *				published to its completion signal seen, with
 *				no driver call; peer cuda_rtt_raw_sync.
 * cuda_resident_throughput	RESIDENT_BATCH dispatch packets back to back
 *				on the resident queue (1,000 with --quick),
 *				only the last with a completion signal,
 *				awaited; peers cuda_launch_throughput_raw and
 *				cuda_rtt_graph_per_launch (a graph's launches
 *				per second are 1e9 over it).
 * cuda_resident_chain		cuda_chain_signals with the GPU step on the
 *				resident queue; peer cuda_chain_host_sync.
 * cuda_copy_{h2d,d2h}_{pinned,pageable}
 *				aql_queue_copy between agent memory and host
 *				memory of aql's data pool (registered by the
 *				agent) or malloc (staged by the agent), GB/s.
 * cuda_copy_{h2d,d2h}_{pinned,pageable}_raw
 *				peers: cuMemcpyHtoD / cuMemcpyDtoH from
 *				cuMemHostAlloc'ed or malloc'ed memory.
 *
 * A peer the driver refuses (graphs on a driver without them) is reported
 * as skipped with the driver's error, not as a failed run.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/graph.h>

#include "bench.h"
#include "nv/nv.h"

#define BATCH		256u
#define GRAPH_LAUNCHES	32u
#define QUEUE_SIZE	4096u
#define RESIDENT_BATCH	10000u
#define RESIDENT_BLOCKS	2u

extern const unsigned char aql_bench_cuda_host[];
extern const size_t aql_bench_cuda_host_size;
#ifdef AQL_BENCH_CUDA_PTX
extern const unsigned char aql_bench_cuda_ptx[];
extern const size_t aql_bench_cuda_ptx_size;
#endif

struct cuda_bench {
	aql_agent *gpu;
	struct nv_agent *nv;
	const struct nv_driver *cu;
	aql_agent_info info;
	int emulated;
	aql_code_object *co_gpu, *co_cpu;
	const aql_kernel *k_gpu, *k_cpu;
	aql_queue *q, *q_raw, *q_cpu;
	aql_signal *sig;
	void *kernarg;
	aql_packet packet;
	/* The resident queue, or NULL with why it could not be made. */
	aql_queue *q_res;
	aql_signal *res_sig;
	char res_why[200];
	uint32_t res_batch;
	CUstream s;
	CUevent ev;
	CUfunction fn;
	uint32_t arg;
	void *params[1];
	/* Samples and rounds for this run (--quick: fewer). */
	uint32_t warmup, samples, rounds, chain_samples;
	size_t copy_size;
	/* The three submit metrics come from one run. */
	struct latency sub[3];	/* submit costs: raw, typed, overhead */
};

static struct cuda_bench B;
static const aql_launch_config one_item = { .grid = { 1 }, .workgroup = { 1 } };

static int cu_fail(const char *call, CUresult r)
{
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: %s (%s)\n", call, nv_result_name(r),
		nv_result_string(r));
	return -1;
}

#define CU(call, args) __extension__({				\
	CUresult r_ = B.cu->call args;				\
	r_ == CUDA_SUCCESS ? 0 : cu_fail(#call, r_); })

/* A driver peer that cannot run is skipped with the driver's reason. */
static int cu_skip(struct result *res, const char *call, CUresult r)
{
	static char why[8][160];
	static unsigned n;
	char *w = why[n++ % ARRAY_SIZE(why)];

	snprintf(w, sizeof(why[0]), "skipped: %s: %s", call, nv_result_name(r));
	res->kind = RESULT_SKIPPED;
	res->skipped = w;
	return 0;
}

/* A completion that did not come within WAIT_TIMEOUT_NS: its signal and
 * queue as they stand. */
static int timed_out(const char *what, const aql_signal *sig, int64_t below, aql_queue *q)
{
	char msg[300];
	int n = snprintf(msg, sizeof(msg), "no completion within %llu s: its signal is %lld, done below %lld",
			 (unsigned long long)(WAIT_TIMEOUT_NS / 1000000000u),
			 (long long)aql_signal_load(sig, AQL_ACQUIRE), (long long)below);

	if (q)
		snprintf(msg + n, sizeof(msg) - (size_t)n,
			 "; queue %llu: %llu packet(s) written, %llu read, doorbell %lld",
			 (unsigned long long)q->amd->hsa.id,
			 (unsigned long long)__atomic_load_n(&q->amd->write_dispatch_id,
							     __ATOMIC_ACQUIRE),
			 (unsigned long long)__atomic_load_n(&q->amd->read_dispatch_id,
							     __ATOMIC_ACQUIRE),
			 (long long)aql_signal_load(q->doorbell, AQL_ACQUIRE));
	return fail_msg(what, AQL_ERR_TIMEOUT, msg);
}

static int spin_done(aql_completion c)
{
	uint64_t deadline = now_ns() + WAIT_TIMEOUT_NS;
	aql_status st;

	while (!aql_completion_done(c)) {
		if (now_ns() > deadline)
			return timed_out("waiting for a completion", c.signal, c.below, c.queue);
		cpu_relax();
	}
	/* Done also covers failed: a negative value, which this names. */
	st = aql_completion_wait(c, 0);
	return st == AQL_OK ? 0 : fail("aql_completion_wait", st);
}

/* One item of k on q, after the completion after when not NULL. */
static int launch_one(aql_queue *q, const aql_kernel *k, const char *call,
		      aql_completion *done, const aql_completion *after)
{
	aql_launch_config c = one_item;
	aql_status st;

	c.after = after;
	c.after_count = after ? 1 : 0;
	st = AQL_LAUNCH(q, k, &c, done, AQL_ARG(0u));
	return st == AQL_OK ? 0 : fail(call, st);
}

static int launch_gpu(aql_completion *done, const aql_completion *after)
{
	return launch_one(B.q, B.k_gpu, "aql_launch (GPU)", done, after);
}

static int launch_cpu(aql_completion *done, const aql_completion *after)
{
	return launch_one(B.q_cpu, B.k_cpu, "aql_launch (CPU agent)", done, after);
}

static int raw_launch(void)
{
	return CU(cuLaunchKernel, (B.fn, 1, 1, 1, 1, 1, 1, 0, B.s, B.params, NULL));
}

/* Round-trip samples of one, after warm-up; fills res as a latency. */
static int sample_rtt(struct result *res, uint32_t n, uint32_t per, int (*one)(void))
{
	uint64_t *v = alloc_samples(n);
	uint64_t t0;
	int rc = -1;

	if (!v)
		return fail_errno("malloc", ENOMEM);
	if (nv_enter(B.nv) != AQL_OK) {
		rc = fail("nv_enter", AQL_ERR_DEVICE);
		goto out;
	}
	for (uint32_t i = 0; i < B.warmup; i++)
		if (one())
			goto out;
	for (uint32_t i = 0; i < n; i++) {
		t0 = now_ns();
		if (one())
			goto out;
		v[i] = (now_ns() - t0) / per;
	}
	latency_stats(v, n, &res->lat);
	res->kind = RESULT_LATENCY;
	rc = 0;
out:
	free(v);
	return rc;
}

static int one_typed(void)
{
	aql_completion done;

	return launch_gpu(&done, NULL) || spin_done(done) ? -1 : 0;
}

/* p into q and its completion signal sig spun on, with no driver call on
 * this side; what names the queue in the reason of a failure. */
static int submit_spin(aql_queue *q, const aql_packet *p, aql_signal *sig, const char *what)
{
	uint64_t deadline = now_ns() + WAIT_TIMEOUT_NS;
	aql_status st;
	int64_t v;

	aql_signal_store(sig, 1, AQL_RELAXED);
	st = aql_queue_submit(q, p);
	if (st != AQL_OK)
		return fail(what, st);
	while ((v = aql_signal_load(sig, AQL_ACQUIRE)) >= 1) {
		if (now_ns() > deadline)
			return timed_out(what, sig, 1, q);
		cpu_relax();
	}
	return v < 0 ? fail_msg(what, AQL_ERR_QUEUE_ERROR,
				"the completion signal went negative") : 0;
}

static int one_packet(void)
{
	return submit_spin(B.q_raw, &B.packet, B.sig, "aql_queue_submit");
}

/* A packet into the resident queue: no driver call on either side. */
static int one_resident(void)
{
	aql_packet p = B.packet;

	p.dispatch.completion_signal = aql_signal_handle(B.res_sig);
	return submit_spin(B.q_res, &p, B.res_sig, "aql_queue_submit (resident)");
}

/* A resident row without a resident queue: skipped, saying why. */
static int resident_skipped(struct result *res)
{
	if (B.q_res)
		return 0;
	res->kind = RESULT_SKIPPED;
	res->skipped = B.res_why;
	return 1;
}

static int bench_resident_rtt(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return resident_skipped(res) ? 0 : sample_rtt(res, B.samples, 1, one_resident);
}

/* One round of res_batch packets, only the last with a signal, awaited. */
static int resident_batch(void *user)
{
	aql_packet p = B.packet;
	aql_status st = AQL_OK;

	(void)user;
	p.dispatch.completion_signal = 0;
	for (uint32_t i = 0; i + 1 < B.res_batch && st == AQL_OK; i++)
		st = aql_queue_submit(B.q_res, &p);
	if (st != AQL_OK)
		return fail("aql_queue_submit (resident)", st);
	return one_resident();
}

/* Dispatches/s over rounds of res_batch packets. */
static int bench_resident_throughput(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	if (resident_skipped(res))
		return 0;
	return rate_rounds(B.rounds, B.res_batch, "dispatches/s", resident_batch, NULL, res);
}

static int one_chain_resident(void)
{
	aql_completion a, g, c;

	if (launch_cpu(&a, NULL) ||
	    launch_one(B.q_res, B.k_gpu, "aql_launch (resident)", &g, &a) ||
	    launch_cpu(&c, &g))
		return -1;
	return spin_done(c);
}

static int bench_resident_chain(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return resident_skipped(res) ? 0 : sample_rtt(res, B.chain_samples, 1,
						      one_chain_resident);
}

static int one_sync(void)
{
	return raw_launch() || CU(cuStreamSynchronize, (B.s)) ? -1 : 0;
}

static int one_event(void)
{
	return raw_launch() || CU(cuEventRecord, (B.ev, B.s)) ||
	       CU(cuEventSynchronize, (B.ev)) ? -1 : 0;
}

static CUgraphExec graph;

static int one_graph(void)
{
	return CU(cuGraphLaunch, (graph, B.s)) || CU(cuStreamSynchronize, (B.s)) ? -1 : 0;
}

/* A benchmark that times fn, one sample a call, over samples calls. */
#define RTT_BENCH(name, samples, fn)                                    \
	static int name(struct ctx *ctx, struct result *res)            \
	{                                                               \
		(void)ctx;                                              \
		return sample_rtt(res, samples, 1, fn);                 \
	}

RTT_BENCH(bench_rtt_typed, B.samples, one_typed)
RTT_BENCH(bench_rtt_packet, B.samples, one_packet)
RTT_BENCH(bench_rtt_sync, B.samples, one_sync)
RTT_BENCH(bench_rtt_event, B.samples, one_event)

static void host_noop(void *user)
{
	(void)user;
}

/*
 * Capture what fill() puts on the stream into the global graph, or leave
 * res skipped with the driver's refusal. Returns -1 only on a failure
 * after which the stream is unusable.
 */
static int capture(struct result *res, void (*fill)(CUresult *r, const char **call))
{
	const char *call = "cuStreamBeginCapture";
	CUgraph g = NULL;
	CUresult r, r2;

	graph = NULL;
	r = B.cu->cuStreamBeginCapture(B.s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
	if (r == CUDA_SUCCESS) {
		fill(&r, &call);
		/* End the capture even after a refusal, so the stream works on. */
		r2 = B.cu->cuStreamEndCapture(B.s, &g);
		if (r == CUDA_SUCCESS && r2 != CUDA_SUCCESS) {
			r = r2;
			call = "cuStreamEndCapture";
		}
	}
	if (r == CUDA_SUCCESS) {
		r = B.cu->cuGraphInstantiateWithFlags(&graph, g, 0);
		call = "cuGraphInstantiateWithFlags";
	}
	if (g)
		B.cu->cuGraphDestroy(g);
	if (r != CUDA_SUCCESS) {
		graph = NULL;
		return cu_skip(res, call, r);
	}
	return 0;
}

static void fill_launches(CUresult *r, const char **call)
{
	*call = "cuLaunchKernel";
	for (uint32_t i = 0; i < GRAPH_LAUNCHES && *r == CUDA_SUCCESS; i++)
		*r = B.cu->cuLaunchKernel(B.fn, 1, 1, 1, 1, 1, 1, 0, B.s, B.params, NULL);
}

static void fill_chain(CUresult *r, const char **call)
{
	*call = "cuLaunchHostFunc";
	*r = B.cu->cuLaunchHostFunc(B.s, host_noop, NULL);
	if (*r == CUDA_SUCCESS) {
		*call = "cuLaunchKernel";
		*r = B.cu->cuLaunchKernel(B.fn, 1, 1, 1, 1, 1, 1, 0, B.s, B.params, NULL);
	}
	if (*r == CUDA_SUCCESS) {
		*call = "cuLaunchHostFunc";
		*r = B.cu->cuLaunchHostFunc(B.s, host_noop, NULL);
	}
}

static int graph_bench(struct result *res, void (*fill)(CUresult *, const char **),
		       uint32_t n, uint32_t per)
{
	int rc;

	if (nv_enter(B.nv) != AQL_OK)
		return fail("nv_enter", AQL_ERR_DEVICE);
	if (capture(res, fill) || !graph)
		return 0;
	rc = sample_rtt(res, n, per, one_graph);
	B.cu->cuGraphExecDestroy(graph);
	graph = NULL;
	return rc;
}

static int bench_rtt_graph(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return graph_bench(res, fill_launches, B.samples, GRAPH_LAUNCHES);
}

static aql_graph_exec *recorded;

static int one_replay(void)
{
	aql_completion done;
	aql_status st = aql_graph_exec_replay(recorded, B.q, &done);

	if (st != AQL_OK)
		return fail("aql_graph_exec_replay", st);
	return spin_done(done);
}

static int bench_graph_replay(struct ctx *ctx, struct result *res)
{
	aql_completion rec;
	aql_graph *g = NULL;
	aql_status st;
	int rc;

	(void)ctx;
	st = aql_graph_begin(B.q, &g);
	for (uint32_t i = 0; st == AQL_OK && i < GRAPH_LAUNCHES; i++)
		st = launch_gpu(&rec, NULL) ? AQL_ERR_DEVICE : AQL_OK;
	if (g && st == AQL_OK)
		st = aql_graph_end(g);
	if (st == AQL_OK)
		st = aql_graph_instantiate(g, &recorded);
	aql_graph_destroy(g);
	if (st != AQL_OK)
		return fail("recording the graph", st);
	rc = sample_rtt(res, B.samples, GRAPH_LAUNCHES, one_replay);
	st = aql_graph_exec_destroy(recorded);
	recorded = NULL;
	return rc ? rc : st != AQL_OK ? fail("aql_graph_exec_destroy", st) : 0;
}

/* BATCH typed launches, the last awaited. */
static int typed_batch(void *user)
{
	aql_completion done = { 0 };

	(void)user;
	for (uint32_t i = 0; i < BATCH; i++)
		if (launch_gpu(&done, NULL))
			return -1;
	return spin_done(done);
}

/* Launches/s over rounds of BATCH. */
static int bench_throughput(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return rate_rounds(B.rounds, BATCH, "launches/s", typed_batch, NULL, res);
}

/* BATCH cuLaunchKernel, then one cuStreamSynchronize. */
static int raw_batch(void *user)
{
	(void)user;
	for (uint32_t i = 0; i < BATCH; i++)
		if (raw_launch())
			return -1;
	return CU(cuStreamSynchronize, (B.s)) ? -1 : 0;
}

static int bench_throughput_raw(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	if (nv_enter(B.nv) != AQL_OK)
		return fail("nv_enter", AQL_ERR_DEVICE);
	return rate_rounds(B.rounds, BATCH, "launches/s", raw_batch, NULL, res);
}

/* Host ns per launch of one batch of each kind, the GPU idle before each. */
static int submit_round(void *user, double *raw, double *typed)
{
	aql_completion done = { 0 };
	uint64_t t0, t;

	(void)user;
	if (CU(cuStreamSynchronize, (B.s)))
		return -1;
	t0 = now_ns();
	for (uint32_t i = 0; i < BATCH; i++)
		if (raw_launch())
			return -1;
	t = now_ns() - t0;
	*raw = (double)t / BATCH;
	if (CU(cuStreamSynchronize, (B.s)))
		return -1;
	t0 = now_ns();
	for (uint32_t i = 0; i < BATCH; i++)
		if (launch_gpu(&done, NULL))
			return -1;
	t = now_ns() - t0;
	*typed = (double)t / BATCH;
	return spin_done(done);
}

static int bench_submit_raw(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	if (nv_enter(B.nv) != AQL_OK)
		return fail("nv_enter", AQL_ERR_DEVICE);
	if (pair_rounds(B.rounds * 20, 2, submit_round, NULL, B.sub))
		return -1;
	res->kind = RESULT_LATENCY;
	res->lat = B.sub[0];
	return 0;
}

LATENCY_ROW(bench_submit_typed, B.sub[1])
LATENCY_ROW(bench_typed_overhead, B.sub[2])

static int one_chain_signals(void)
{
	aql_completion a, g, c;

	if (launch_cpu(&a, NULL) || launch_gpu(&g, &a) || launch_cpu(&c, &g))
		return -1;
	return spin_done(c);
}

static int one_chain_host(void)
{
	aql_completion a, g, c;

	return launch_cpu(&a, NULL) || spin_done(a) || launch_gpu(&g, NULL) ||
	       spin_done(g) || launch_cpu(&c, NULL) || spin_done(c) ? -1 : 0;
}

RTT_BENCH(bench_chain_signals, B.chain_samples, one_chain_signals)
RTT_BENCH(bench_chain_host, B.chain_samples, one_chain_host)

static int bench_chain_graph(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return graph_bench(res, fill_chain, B.chain_samples, 1);
}

/* Copies: one direction, one kind of host memory, aql or raw. */
enum { H2D = 1, PAGEABLE = 2, RAW = 4 };

struct copy_job {
	unsigned how;
	void *host, *dev;
};

static int copy_once(void *user)
{
	const struct copy_job *j = user;
	unsigned how = j->how;
	void *host = j->host, *dev = j->dev;
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dev;
	aql_completion done;
	aql_status st;

	if (how & RAW)
		return how & H2D ? CU(cuMemcpyHtoD, (d, host, B.copy_size))
				 : CU(cuMemcpyDtoH, (host, d, B.copy_size));
	st = how & H2D ? aql_queue_copy(B.q, dev, host, B.copy_size, NULL, 0, &done)
		       : aql_queue_copy(B.q, host, dev, B.copy_size, NULL, 0, &done);
	if (st != AQL_OK)
		return fail("aql_queue_copy", st);
	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	return st == AQL_OK ? 0 : fail("aql_completion_wait (copy)", st);
}

static int copy_bench(struct result *res, unsigned how)
{
	void *host = NULL, *dev = NULL;
	aql_mem_pool *pool;
	aql_status st = AQL_OK;
	CUresult r = CUDA_SUCCESS;
	int rc = -1;

	if (nv_enter(B.nv) != AQL_OK) {
		rc = fail("nv_enter", AQL_ERR_DEVICE);
		goto out;
	}
	if (how & PAGEABLE)
		host = malloc(B.copy_size);
	else if (how & RAW)
		r = B.cu->cuMemHostAlloc(&host, B.copy_size, 0);
	else if ((st = aql_mem_pool_data(AQL_MEM_COARSE_GRAINED, &pool)) == AQL_OK)
		st = aql_mem_alloc(pool, B.copy_size, 4096, &host);
	if (r != CUDA_SUCCESS) {
		rc = cu_fail("cuMemHostAlloc", r);
		goto out;
	}
	if (st != AQL_OK || !host) {
		rc = st != AQL_OK ? fail("aql_mem_alloc", st) : fail_errno("malloc", ENOMEM);
		goto out;
	}
	memset(host, 0x5a, B.copy_size);
	st = aql_agent_mem_alloc(B.gpu, B.copy_size, &dev);
	if (st != AQL_OK) {
		rc = fail("aql_agent_mem_alloc", st);
		goto out;
	}
	/* Round 0 warms up: registration and staging buffers happen there. */
	rc = transfer_rounds(B.rounds, B.copy_size, copy_once,
			     &(struct copy_job){ how, host, dev }, res);
out:
	aql_agent_mem_free(B.gpu, dev);
	if (how & PAGEABLE)
		free(host);
	else if (how & RAW) {
		if (host)
			B.cu->cuMemFreeHost(host);
	} else {
		aql_mem_free(host);
	}
	return rc;
}

BENCH_OF(bench_h2d_pinned, copy_bench, H2D)
BENCH_OF(bench_d2h_pinned, copy_bench, 0)
BENCH_OF(bench_h2d_pageable, copy_bench, H2D | PAGEABLE)
BENCH_OF(bench_d2h_pageable, copy_bench, PAGEABLE)
BENCH_OF(bench_h2d_pinned_raw, copy_bench, H2D | RAW)
BENCH_OF(bench_d2h_pinned_raw, copy_bench, RAW)
BENCH_OF(bench_h2d_pageable_raw, copy_bench, H2D | PAGEABLE | RAW)
BENCH_OF(bench_d2h_pageable_raw, copy_bench, PAGEABLE | RAW)

static int load_kernels(struct ctx *ctx)
{
	aql_status st;

#ifdef AQL_BENCH_CUDA_PTX
	st = aql_code_object_load(B.gpu, aql_bench_cuda_ptx, aql_bench_cuda_ptx_size, NULL,
				  &B.co_gpu);
	if (st == AQL_OK)
		st = aql_code_object_kernel(B.co_gpu, "empty", &B.k_gpu);
	if (st != AQL_OK)
		return fail("loading the PTX of the empty kernel", st);
#endif
	st = aql_code_object_load(ctx->agent, aql_bench_cuda_host, aql_bench_cuda_host_size,
				  NULL, &B.co_cpu);
	if (st == AQL_OK)
		st = aql_code_object_kernel(B.co_cpu, "empty", &B.k_cpu);
	return st == AQL_OK ? 0 : fail("loading the host build of the empty kernel", st);
}

static int make_queues(struct ctx *ctx)
{
	aql_queue_config qc = { .size = QUEUE_SIZE, .type = AQL_QUEUE_SINGLE };
	aql_kernarg_value v = { &B.arg, sizeof(B.arg) };
	aql_mem_pool *pool;
	aql_status st;

	if (B.info.max_queue_size && B.info.max_queue_size < qc.size)
		qc.size = B.info.max_queue_size;
	st = aql_queue_create(B.gpu, &qc, &B.q);
	if (st == AQL_OK)
		st = aql_queue_create(B.gpu, &qc, &B.q_raw);
	qc.size = ctx->queue_size;
	if (st == AQL_OK)
		st = aql_queue_create(ctx->agent, &qc, &B.q_cpu);
	if (st == AQL_OK)
		st = aql_signal_create(0, &B.sig);
	if (st == AQL_OK)
		st = aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &pool);
	if (st == AQL_OK)
		st = aql_mem_alloc(pool, 256, 64, &B.kernarg);
	if (st != AQL_OK)
		return fail("queue set-up", st);
	memset(&B.packet, 0, sizeof(B.packet));
	B.packet.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1,
						     AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	B.packet.dispatch.setup = 1;
	B.packet.dispatch.workgroup_size_x = 1;
	B.packet.dispatch.workgroup_size_y = B.packet.dispatch.workgroup_size_z = 1;
	B.packet.dispatch.grid_size_x = 1;
	B.packet.dispatch.grid_size_y = B.packet.dispatch.grid_size_z = 1;
	B.packet.dispatch.kernel_object = B.k_gpu->kernel_object;
	B.packet.dispatch.kernarg_address = (uint64_t)(uintptr_t)B.kernarg;
	B.packet.dispatch.completion_signal = aql_signal_handle(B.sig);
	st = aql_kernarg_build(B.k_gpu, &B.packet.dispatch, &v, 1, NULL, B.kernarg, 256);
	if (st != AQL_OK)
		return fail("aql_kernarg_build", st);
	/* After the kernels are loaded: the processor links their forms. */
	qc.size = QUEUE_SIZE;
	if (B.info.max_queue_size && B.info.max_queue_size < qc.size)
		qc.size = B.info.max_queue_size;
	qc.flags = AQL_QUEUE_RESIDENT | AQL_QUEUE_RESIDENT_BLOCKS(RESIDENT_BLOCKS);
	st = aql_signal_create(0, &B.res_sig);
	if (st != AQL_OK)
		return fail("aql_signal_create", st);
	if (aql_queue_create(B.gpu, &qc, &B.q_res) != AQL_OK)
		snprintf(B.res_why, sizeof(B.res_why), "skipped: no resident queue: %s",
			 aql_error_message());
	return 0;
}

static int cuda_setup(struct ctx *ctx)
{
	aql_status st;

	memset(&B, 0, sizeof(B));
	st = aql_agent_open(AQL_AGENT_NVIDIA, 0, &B.gpu);
	if (st != AQL_OK) {
		printf("aql-bench --agent cuda: %s\n", aql_error_message());
		return BENCH_SKIP;
	}
#ifndef AQL_BENCH_CUDA_PTX
	printf("aql-bench --agent cuda: built without the PTX of its kernel "
	       "(no clang here targeted nvptx64)\n");
	return BENCH_SKIP;
#endif
	if ((st = aql_agent_get_info(B.gpu, &B.info)) != AQL_OK)
		return fail("aql_agent_get_info", st);
	if ((st = nv_driver_get(&B.cu)) != AQL_OK)
		return fail("nv_driver_get", st);
	B.nv = nv_agent_of(B.gpu);
	B.emulated = strcasestr(B.info.name, "emulat") != NULL;
	if (B.emulated && ctx->opts->json)
		fprintf(stderr, "aql-bench: %s is the test emulation of the driver; no figure "
			"below is a result\n", B.info.name);
	B.warmup = ctx->opts->quick ? 20 : 1000;
	B.samples = ctx->opts->quick ? 200 : 20000;
	B.chain_samples = ctx->opts->quick ? 100 : 5000;
	B.rounds = ctx->opts->quick ? 3 : 9;
	B.res_batch = ctx->opts->quick ? 1000 : RESIDENT_BATCH;
	B.copy_size = ctx->opts->quick ? (size_t)4 << 20 : (size_t)256 << 20;
	if (load_kernels(ctx) || make_queues(ctx))
		return -1;
	if ((st = nv_enter(B.nv)) != AQL_OK)
		return fail("nv_enter", st);
	B.fn = ((const struct nv_kernel *)(uintptr_t)B.k_gpu->kernel_object)->fn;
	B.params[0] = &B.arg;
	if (CU(cuStreamCreate, (&B.s, CU_STREAM_NON_BLOCKING)) ||
	    CU(cuEventCreate, (&B.ev, CU_EVENT_DISABLE_TIMING)))
		return -1;
	return 0;
}

static void cuda_cleanup(struct ctx *ctx)
{
	(void)ctx;
	if (B.gpu && B.cu && nv_enter(B.nv) == AQL_OK) {
		if (B.ev)
			B.cu->cuEventDestroy(B.ev);
		if (B.s)
			B.cu->cuStreamDestroy(B.s);
	}
	aql_queue_destroy(B.q_res);
	aql_signal_destroy(B.res_sig);
	aql_queue_destroy(B.q);
	aql_queue_destroy(B.q_raw);
	aql_queue_destroy(B.q_cpu);
	aql_signal_destroy(B.sig);
	aql_mem_free(B.kernarg);
	aql_code_object_destroy(B.co_gpu);
	aql_code_object_destroy(B.co_cpu);
	aql_agent_destroy(B.gpu);
}

static int cuda_banner(const struct ctx *ctx)
{
	static const char *const paths[] = { "host", "device (stream memory operations)",
					     "host callback (cuLaunchHostFunc)" };
	const aql_agent_info *in = &B.info;

	printf("aql-bench --agent cuda: NVIDIA agent 0: %s (%s), %" PRIu32 " SMs, driver %"
	       PRIu32 ".%" PRIu32 ", signals: %s\n", in->name, in->isa, in->compute_units,
	       in->driver_version / 1000, in->driver_version % 1000 / 10,
	       in->signal_path < ARRAY_SIZE(paths) ? paths[in->signal_path] : "unknown");
	printf("peers: the same driver, context and PTX through cuLaunchKernel on a stream "
	       "of their own; %s run\n", ctx->opts->quick ? "quick" : "full");
	if (B.emulated)
		printf("EMULATION: this device is the test emulation of the driver; no figure "
		       "below is a result\n");
	putchar('\n');
	return 0;
}

static const struct bench cuda_benches[] = {
	{ "cuda_rtt_typed", bench_rtt_typed },
	{ "cuda_rtt_raw_packet", bench_rtt_packet },
	{ "cuda_rtt_raw_sync", bench_rtt_sync },
	{ "cuda_rtt_raw_event", bench_rtt_event },
	{ "cuda_rtt_graph_per_launch", bench_rtt_graph },
	{ "cuda_graph_replay_per_launch", bench_graph_replay },
	{ "cuda_launch_throughput", bench_throughput },
	{ "cuda_launch_throughput_raw", bench_throughput_raw },
	{ "cuda_submit_raw_ns", bench_submit_raw },
	{ "cuda_submit_typed_ns", bench_submit_typed },
	{ "cuda_typed_overhead_ns", bench_typed_overhead },
	{ "cuda_chain_signals", bench_chain_signals },
	{ "cuda_chain_host_sync", bench_chain_host },
	{ "cuda_chain_graph", bench_chain_graph },
	{ "cuda_resident_rtt", bench_resident_rtt },
	{ "cuda_resident_throughput", bench_resident_throughput },
	{ "cuda_resident_chain", bench_resident_chain },
	{ "cuda_copy_h2d_pinned", bench_h2d_pinned },
	{ "cuda_copy_h2d_pinned_raw", bench_h2d_pinned_raw },
	{ "cuda_copy_d2h_pinned", bench_d2h_pinned },
	{ "cuda_copy_d2h_pinned_raw", bench_d2h_pinned_raw },
	{ "cuda_copy_h2d_pageable", bench_h2d_pageable },
	{ "cuda_copy_h2d_pageable_raw", bench_h2d_pageable_raw },
	{ "cuda_copy_d2h_pageable", bench_d2h_pageable },
	{ "cuda_copy_d2h_pageable_raw", bench_d2h_pageable_raw },
};

static const struct goal cuda_goals[] = {
	{ "cuda_typed_overhead_goal_ns", "typed launch overhead (ns per launch)",
	  "cuda_typed_overhead_ns", NULL, false, 300, "ns" },
	{ "cuda_typed_overhead_goal_ratio", "typed / raw cuLaunchKernel submit (<= +5 %)",
	  "cuda_submit_typed_ns", "cuda_submit_raw_ns", false, 1.05, NULL },
	{ "cuda_rtt_typed_goal", "round trip typed / cuLaunchKernel+StreamSync",
	  "cuda_rtt_typed", "cuda_rtt_raw_sync", false, 1.10, NULL },
	{ "cuda_rtt_raw_packet_goal", "round trip raw packet / cuLaunchKernel+StreamSync",
	  "cuda_rtt_raw_packet", "cuda_rtt_raw_sync", false, 1.10, NULL },
	{ "cuda_graph_replay_goal", "graph replay / CUDA graph, per launch",
	  "cuda_graph_replay_per_launch", "cuda_rtt_graph_per_launch", false, 1.10, NULL },
	{ "cuda_chain_goal", "chain via aql signals / via host sync",
	  "cuda_chain_signals", "cuda_chain_host_sync", false, 1.0, NULL },
	{ "cuda_resident_rtt_goal_ns", "resident round trip (ns)",
	  "cuda_resident_rtt", NULL, false, 2500, "ns" },
	{ "cuda_resident_rtt_goal", "resident round trip / cuLaunchKernel+StreamSync (<= 1/3)",
	  "cuda_resident_rtt", "cuda_rtt_raw_sync", false, 1.0 / 3.0, NULL },
	{ "cuda_resident_throughput_goal", "resident dispatches/s / raw launches/s (>= 2)",
	  "cuda_resident_throughput", "cuda_launch_throughput_raw", true, 2.0, NULL },
	{ "cuda_resident_throughput_graph_goal", "resident dispatches/s / graph launches/s (>= 1)",
	  "cuda_resident_throughput", "cuda_rtt_graph_per_launch", true, 1.0, NULL },
	{ "cuda_resident_chain_goal", "resident chain / chain via host sync (<= 1/2)",
	  "cuda_resident_chain", "cuda_chain_host_sync", false, 0.5, NULL },
};

static const struct peer cuda_peers[] = {
	{ "cuda_graph_replay_per_launch", "cuda_rtt_graph_per_launch" },
	{ "cuda_rtt_raw_event", "cuda_rtt_raw_sync" },
	{ "cuda_launch_throughput", "cuda_launch_throughput_raw" },
	{ "cuda_resident_rtt", "cuda_rtt_raw_sync" },
	{ "cuda_resident_throughput", "cuda_launch_throughput_raw" },
	{ "cuda_resident_chain", "cuda_chain_host_sync" },
};

const struct mode bench_mode_cuda = {
	.name = "cuda",
	.benches = cuda_benches,
	.nbenches = ARRAY_SIZE(cuda_benches),
	.goals = cuda_goals,
	.ngoals = ARRAY_SIZE(cuda_goals),
	.peers = cuda_peers,
	.npeers = ARRAY_SIZE(cuda_peers),
	.setup = cuda_setup,
	.cleanup = cuda_cleanup,
	.banner = cuda_banner,
};
