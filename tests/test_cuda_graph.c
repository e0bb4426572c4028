/* SPDX-License-Identifier: MIT */
/*
 * Recorded graphs on the CUDA agent (nv/graph.c) against the emulated
 * driver: a run of launches becomes one CUDA graph, replayed with one
 * cuGraphLaunch (one driver call on the replaying thread); a copy between
 * runs stays a packet; changed arguments reach the executable graph with
 * cuGraphExecKernelNodeSetParams, never a replay already submitted; bad
 * input (a replay in flight destroyed, another agent's queue) is refused.
 * Then the emulation's own graph rules, each as the driver has it.
 *
 * Usage: test_cuda_graph HOST_OBJECT PTX (AQL_CUDA_EMU_MODE=nomemops: the
 * host-function path)
 * HOST_OBJECT is saxpy's host build (the emulation runs it), PTX its PTX.
 * Run with the emulation's folder on LD_LIBRARY_PATH and
 * AQL_CUDA_EMU_DEVICES=2. With AQL_HIL=1 (tests/hil/run) it runs on the
 * real driver, without the emulation's counters and rules. Not run on
 * hardware yet.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>
#include <aql/graph.h>

#include "helpers.h"
#include "tests/cuda_emu/aqlemu.h"
#include "nv/nv.h"

#define N 256u
#define RUN 4u		/* launches on each side of the recorded copy */

static aql_agent *gpu, *gpu1;
static const aql_kernel *saxpy, *saxpy1;
static aqlemu_stats_fn emu_stats;	/* NULL on the real driver */
static aqlemu_thread_calls_fn thread_calls;
static int device_path;			/* completions by stream memory operations */

static struct aqlemu_stats stats(void)
{
	struct aqlemu_stats s = { 0 };

	if (emu_stats)
		emu_stats(&s);
	return s;
}

static aql_queue *gpu_queue(aql_agent *agent)
{
	aql_queue_config config = { .size = 256, .type = AQL_QUEUE_MULTI,
				    .full_timeout_ns = TH_TIMEOUT_NS };
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(agent, &config, &q));
	if (!q)
		th_stop("no CUDA queue");
	return q;
}

static aql_buf *floats(enum aql_direction access, float (*f)(uint32_t))
{
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, access, NULL, &b));
	if (!b)
		th_stop("no typed buffer");
	for (uint32_t i = 0; i < N; i++)
		aql_buf_data(b, float)[i] = f(i);
	return b;
}

static float index_of(uint32_t i)
{
	return (float)i;
}

static float zero(uint32_t i)
{
	(void)i;
	return 0.0f;
}

/* How many of y's N floats are not times * x (x[i] = i). */
static uint32_t wrong(aql_buf *y, float times)
{
	uint32_t bad = 0;

	for (uint32_t i = 0; i < N; i++)
		bad += aql_buf_data(y, float)[i] != times * (float)i;
	if (bad)
		fprintf(stderr, "y[1] = %g, expected %g\n", (double)aql_buf_data(y, float)[1],
			(double)times);
	return bad;
}

/*
 * A time step: RUN launches, a copy of device memory, RUN more. Replays
 * run both CUDA graphs and the copy in order; set_arg reaches later
 * replays only.
 */
static void test_time_step(void)
{
	aql_queue *q = gpu_queue(gpu);
	aql_buf *x = floats(AQL_IN, index_of), *y = floats(AQL_INOUT, zero);
	aql_launch_config cfg = { .grid = { N } };
	uint64_t *dev = NULL, seven = 7, back = 0;
	struct aqlemu_stats before, after;
	aql_completion rec, done, first;
	aql_graph_exec *e = NULL;
	aql_graph *g = NULL;
	aql_signal *gate;

	CHECK_OK(aql_agent_mem_alloc(gpu, 2 * sizeof(uint64_t), (void **)&dev));
	CHECK_OK(aql_agent_copy(gpu, dev, &seven, sizeof(seven)));
	CHECK_OK(aql_graph_begin(q, &g));
	for (uint32_t i = 0; i < 2 * RUN; i++) {
		CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &rec, AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
				    AQL_ARG(N)));
		if (i == RUN - 1)
			CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(seven), NULL, 0, &rec));
	}
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	if (!e)
		th_stop("no executable graph");
	CHECK(wrong(y, 0.0f) == 0, "recording ran launches");

	before = stats();
	CHECK_OK(aql_graph_exec_replay(e, q, &first));
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	after = stats();
	CHECK(aql_completion_done(first), "the first replay is not done after the second");
	CHECK(wrong(y, 4.0f * RUN) == 0, "two replays of %u launches", 2 * RUN);
	CHECK(!emu_stats || after.graph_launches - before.graph_launches == 4,
	      "two replays made %llu cuGraphLaunch calls: one per run of launches",
	      (unsigned long long)(after.graph_launches - before.graph_launches));
	CHECK(!emu_stats || after.launches - before.launches == 4 * RUN, "%llu kernels ran, not %u",
	      (unsigned long long)(after.launches - before.launches), 4 * RUN);
	CHECK_OK(aql_agent_copy(gpu, &back, dev + 1, sizeof(back)));
	CHECK(back == seven, "the recorded copy ran: %llu", (unsigned long long)back);

	/* Launch RUN + 1 adds 3x from now on; the replay held behind the gate,
	 * submitted before the change, keeps what it was given. */
	gate = th_gate_close(q);
	CHECK_OK(aql_graph_exec_replay(e, q, &first));
	CHECK_OK(aql_graph_exec_set_arg(e, RUN + 1, 0, AQL_ARG(3.0f)));
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_signal_destroy(gate));
	CHECK(wrong(y, 8.0f * RUN + 2.0f) == 0,
	      "set_arg between two replays: the first kept a = 1, the second used 3");

	/* A raw packet with a completion signal of its own is refused. */
	{
		aql_signal *own = th_signal(1);
		aql_graph *raw = NULL;
		aql_graph_exec *none = NULL;
		aql_packet p = { 0 };

		p.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
						     AQL_FENCE_SYSTEM);
		p.barrier.completion_signal = aql_signal_handle(own);
		CHECK_OK(aql_graph_begin(q, &raw));
		CHECK_OK(aql_graph_record_packet(q, &p));
		CHECK_OK(aql_graph_end(raw));
		CHECK(aql_graph_instantiate(raw, &none) == AQL_ERR_UNSUPPORTED &&
		      th_error_has("completion signal of its own") && !none,
		      "a raw packet with its own signal: %s", aql_error_message());
		aql_graph_destroy(raw);
		CHECK_OK(aql_signal_destroy(own));
	}

	/* Destroying it with a replay in flight is refused, naming it. */
	gate = th_gate_close(q);
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK(aql_graph_exec_destroy(e) == AQL_ERR_BUSY && th_error_has("in flight"),
	      "destroy during a replay: %s", aql_error_message());
	th_gate_open(gate);
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_signal_destroy(gate));
	CHECK_OK(aql_graph_exec_destroy(e));
	aql_agent_mem_free(gpu, dev);
	CHECK_OK(aql_buf_destroy(x));
	CHECK_OK(aql_buf_destroy(y));
	CHECK_OK(aql_queue_destroy(q));
}

/*
 * A replay of launches only costs one driver call on its thread (the
 * cuGraphLaunch; its completion store is owed, as a typed launch's), and
 * its completion is seen however it is observed.
 */
static void test_replay_calls(void)
{
	aql_queue *q = gpu_queue(gpu), *cpu = th_queue(64, AQL_QUEUE_MULTI, 0);
	aql_buf *x = floats(AQL_IN, index_of), *y = floats(AQL_INOUT, zero);
	aql_launch_config cfg = { .grid = { N } };
	aql_completion rec, done;
	aql_graph_exec *e = NULL;
	aql_graph *g = NULL;
	uint64_t calls;
	int64_t v = 0;

	CHECK_OK(aql_graph_begin(q, &g));
	for (uint32_t i = 0; i < RUN; i++)
		CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &rec, AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
				    AQL_ARG(N)));
	CHECK_OK(aql_graph_end(g));
	CHECK_OK(aql_graph_instantiate(g, &e));
	aql_graph_destroy(g);
	if (!e)
		th_stop("no executable graph");
	/* The first replay moves the buffers in; then they stay. */
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	calls = thread_calls ? thread_calls() : 0;
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	calls = thread_calls ? thread_calls() - calls : 1;
	/* On the host path the completion is a host function: one more. */
	CHECK(calls == 2u - (unsigned)device_path,
	      "a replay of %u launches made %llu driver calls on its thread",
	      RUN, (unsigned long long)calls);
	/* Nobody asks: the queue's bound delivers the store. */
	CHECK_DONE(aql_signal_wait(done.signal, AQL_COND_LT, done.below, TH_TIMEOUT_NS,
				   AQL_WAIT_BLOCKED, &v));
	CHECK(wrong(y, 2.0f * RUN) == 0, "two replays of %u launches", RUN);

	/* x changed on the host: the next replay moves it in first. */
	for (uint32_t i = 0; i < N; i++)
		aql_buf_data(x, float)[i] = 2.0f * (float)i;
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK(wrong(y, 4.0f * RUN) == 0, "a replay after x changed on the host used the new x");

	/* Another agent's queue is refused, and nothing runs. */
	CHECK(aql_graph_exec_replay(e, cpu, &done) == AQL_ERR_INVALID_ARG &&
	      th_error_has("another agent"), "a replay on the CPU agent: %s", aql_error_message());
	CHECK_OK(aql_graph_exec_replay(e, q, &done));
	CHECK_OK(aql_queue_destroy(q));
	CHECK(aql_completion_done(done), "a replay owed at destroy completed");
	CHECK(wrong(y, 6.0f * RUN) == 0, "the replay owed at destroy ran");
	CHECK_OK(aql_graph_exec_destroy(e));
	CHECK_OK(aql_buf_destroy(x));
	CHECK_OK(aql_buf_destroy(y));
	CHECK_OK(aql_queue_destroy(cpu));
}

/* saxpy's node: one block of N, its four parameters. */
static CUDA_KERNEL_NODE_PARAMS node(const aql_kernel *k, void **params)
{
	return (CUDA_KERNEL_NODE_PARAMS){
		.func = ((const struct nv_kernel *)(uintptr_t)k->kernel_object)->fn,
		.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
		.blockDimX = N, .blockDimY = 1, .blockDimZ = 1,
		.kernelParams = params,
	};
}

/* The emulation's graph rules, from the driver API reference. */
static void test_emulation_rules(void)
{
	float a = 1.0f;
	uint32_t n = N;
	void *x = NULL, *y = NULL;
	void *params[] = { &a, &x, &y, &n };
	CUDA_KERNEL_NODE_PARAMS p = node(saxpy, params), other = node(saxpy1, params);
	CUgraph g = NULL, h = NULL;
	CUgraphNode n0 = NULL, n1 = NULL, m0 = NULL, twice[2];
	CUgraphExec e = NULL;
	const struct nv_driver *cu = nv_agent_of(gpu)->cu;

	CHECK(cu->cuCtxSetCurrent(nv_agent_of(gpu)->ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
	CHECK(cu->cuGraphCreate(&g, 1) == CUDA_ERROR_INVALID_VALUE,
	      "cuGraphCreate: flags must be 0");
	CHECK(cu->cuGraphCreate(&g, 0) == CUDA_SUCCESS && cu->cuGraphCreate(&h, 0) == CUDA_SUCCESS,
	      "cuGraphCreate");
	CHECK(cu->cuGraphAddKernelNode(&n0, g, NULL, 0, &p) == CUDA_SUCCESS, "a root node");
	CHECK(cu->cuGraphAddKernelNode(&m0, h, NULL, 0, &p) == CUDA_SUCCESS, "another graph's node");
	CHECK(cu->cuGraphAddKernelNode(&n1, g, &m0, 1, &p) == CUDA_ERROR_INVALID_VALUE,
	      "a dependency on another graph's node is refused");
	twice[0] = twice[1] = n0;
	CHECK(cu->cuGraphAddKernelNode(&n1, g, twice, 2, &p) == CUDA_ERROR_INVALID_VALUE,
	      "a dependency named twice is refused");
	CHECK(cu->cuGraphAddKernelNode(&n1, g, NULL, 1, &p) == CUDA_ERROR_INVALID_VALUE,
	      "one dependency and no array is refused");
	p.kernelParams = NULL;
	CHECK(cu->cuGraphAddKernelNode(&n1, g, &n0, 1, &p) == CUDA_ERROR_INVALID_VALUE,
	      "parameters in neither form are refused, as by cuLaunchKernel");
	p.kernelParams = params;
	p.blockDimX = 2048;
	CHECK(cu->cuGraphAddKernelNode(&n1, g, &n0, 1, &p) == CUDA_ERROR_INVALID_VALUE,
	      "a block of 2048 is refused, as by cuLaunchKernel");
	p.blockDimX = N;
	CHECK(cu->cuGraphAddKernelNode(&n1, g, &n0, 1, &p) == CUDA_SUCCESS, "a node after n0");
	CHECK(cu->cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS, "instantiate");
	CHECK(cu->cuGraphExecKernelNodeSetParams(e, n1, &p) == CUDA_SUCCESS, "new parameters for n1");
	CHECK(cu->cuGraphExecKernelNodeSetParams(e, m0, &p) == CUDA_ERROR_INVALID_VALUE,
	      "a node of another graph is unknown to the executable graph");
	CHECK(cu->cuGraphExecKernelNodeSetParams(e, n1, &other) == CUDA_ERROR_INVALID_VALUE,
	      "a function of another context may not replace the node's");
	CHECK(cu->cuGraphExecKernelNodeSetParams(e, n1, NULL) == CUDA_ERROR_INVALID_VALUE,
	      "no parameters");
	CHECK(cu->cuGraphExecDestroy(e) == CUDA_SUCCESS, "cuGraphExecDestroy");
	CHECK(cu->cuGraphExecDestroy(e) == CUDA_ERROR_INVALID_VALUE, "a destroyed executable graph");
	CHECK(cu->cuGraphDestroy(g) == CUDA_SUCCESS && cu->cuGraphDestroy(h) == CUDA_SUCCESS,
	      "cuGraphDestroy");
	CHECK(cu->cuGraphAddKernelNode(&n1, g, NULL, 0, &p) == CUDA_ERROR_INVALID_VALUE,
	      "a node added to a destroyed graph");
}

static const aql_kernel *load(aql_agent *agent, const char *ptx, aql_code_object **co)
{
	const aql_kernel *k = NULL;

	CHECK_OK(aql_code_object_load_file(agent, ptx, NULL, co));
	if (*co)
		CHECK_OK(aql_code_object_kernel(*co, "saxpy", &k));
	if (!k)
		th_stop("no saxpy on the CUDA agent");
	return k;
}

int main(int argc, char **argv)
{
	const char *env = getenv("AQL_HIL");
	int hil = env && !strcmp(env, "1");
	aql_code_object *co = NULL, *co1 = NULL;
	aql_agent_info info;
	void *emu;

	if (argc != 3) {
		fprintf(stderr, "usage: %s HOST_OBJECT PTX\n", argv[0]);
		return 2;
	}
	if (!hil)
		setenv("AQL_CUDA_EMU_KERNELS", argv[1], 1);
	if (aql_agent_open(AQL_AGENT_NVIDIA, 0, &gpu) != AQL_OK ||
	    (!hil && aql_agent_open(AQL_AGENT_NVIDIA, 1, &gpu1) != AQL_OK)) {
		fprintf(stderr, "no two CUDA agents (the emulation on LD_LIBRARY_PATH, AQL_CUDA_EMU_DEVICES=2?): %s\n",
			aql_error_message());
		return 1;
	}
	emu = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
	*(void **)&emu_stats = emu ? dlsym(emu, "aqlemu_stats") : NULL;
	*(void **)&thread_calls = emu ? dlsym(emu, "aqlemu_thread_calls") : NULL;
	if ((!emu_stats || !thread_calls) && !hil) {
		fprintf(stderr, "libcuda.so.1 is not the emulation (no aqlemu_stats); set AQL_HIL=1 for a real driver\n");
		return 1;
	}
	CHECK_OK(aql_agent_get_info(gpu, &info));
	device_path = info.signal_path == AQL_SIGNAL_PATH_DEVICE;
	saxpy = load(gpu, argv[2], &co);
	test_time_step();
	test_replay_calls();
	if (emu_stats) {
		saxpy1 = load(gpu1, argv[2], &co1);
		test_emulation_rules();
		aql_code_object_destroy(co1);
		aql_agent_destroy(gpu1);
	} else {
		printf("note: AQL_HIL=1, the real driver: driver-call counts and the emulation's graph rules are not checked\n");
	}
	aql_code_object_destroy(co);
	if (emu)
		dlclose(emu);
	aql_agent_destroy(gpu);
	return th_finish();
}
