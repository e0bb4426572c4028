/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --agent amd: the AMD agent (aql/kfd/) on AMD agent 0, with the
 * empty kernel of cuda_kernels.c built for the agent's processor (gfx90a,
 * gfx942, each where a clang here knows it) and dispatched with a prepared
 * packet: one work-item, its kernarg block in fine-grained memory open to
 * the GPU. One SINGLE queue carries every packet. Latencies are
 * CLOCK_MONOTONIC per sample, from before the packet is written (the
 * doorbell rung by aql_queue_submit) until the waiter sees the completion
 * signal below 1.
 *
 * amd_rtt_spin		round trip, AQL_WAIT_ACTIVE (polling the signal).
 * amd_rtt_block		round trip, AQL_WAIT_BLOCKED (the waiter sleeps
 *				in AMDKFD_IOC_WAIT_EVENTS until the CP's event).
 * amd_barrier_and_rtt		round trip of a BARRIER_AND packet with no
 *				dependencies, spinning: the CP's cost without a
 *				dispatch.
 * amd_dispatch_throughput	BATCH dispatches back to back, only the last
 *				signalling (with the barrier bit), awaited with
 *				AQL_WAIT_SPIN_BLOCK; dispatches/s per round.
 * amd_submit_raw_ns		host ns per packet of SUBMIT_BATCH prepared
 *				packets (aql_queue_submit), the queue idle first;
 * amd_submit_typed_ns		the same for aql_launch() of the same kernel
 *				and argument (checks, kernarg, timeline);
 * amd_typed_overhead_ns	typed minus raw, per pair of batches.
 * amd_graph_replay_host_ns_per_launch, amd_graph_individual_host_ns_per_launch,
 * amd_graph_chain_ns, amd_graph_chain_individual_ns
 *				the default mode's graph rows (graph.c) on
 *				this queue: GRAPH_CHAIN typed launches of the
 *				empty kernel, recorded once and replayed,
 *				against the same launches one by one.
 * amd_copy_{h2d,d2h,d2d}	aql_queue_copy() of copy_size bytes between a
 *				pool open to the GPU and VRAM, or VRAM and
 *				VRAM (the copy kernel, aql/kfd/copy.c), awaited
 *				with AQL_WAIT_SPIN_BLOCK; GB/s per copy.
 *
 * Not measured, with its reason: HIP's hipLaunchKernel +
 * hipStreamSynchronize (the peer of the goal; aql-bench has no HIP peer).
 *
 * On the KFD emulation (AQL_KFD_SYS) the CP is a thread running the host
 * build: the bench runs and prints, and no figure is a result.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "aql/kfd/kfd.h"

#define QUEUE_SIZE	4096u
#define KERNARG_BYTES	512u
#define SUBMIT_BATCH	256u

#ifdef AQL_BENCH_AMD_GFX90A
extern const unsigned char aql_bench_amd_gfx90a[];
extern const size_t aql_bench_amd_gfx90a_size;
#endif
#ifdef AQL_BENCH_AMD_GFX942
extern const unsigned char aql_bench_amd_gfx942[];
extern const size_t aql_bench_amd_gfx942_size;
#endif

struct amd_bench {
	aql_agent *gpu;
	const struct kfd_node *node;
	const struct kfd_process *kfd;
	aql_agent_info info;
	aql_mem_pool *pool;
	aql_code_object *co;
	const aql_kernel *k;
	aql_queue *q;
	aql_signal *sig;
	void *kernarg;
	aql_packet dispatch, barrier;
	uint32_t warmup, samples, rounds, batch;
	size_t copy_size;
	struct latency sub[3];	/* submit costs: raw, typed, overhead */
};

static struct amd_bench B;

/* One packet, its signal reset to 1 first, awaited with hint. */
static int round_trip(const aql_packet *p, enum aql_wait_hint hint)
{
	aql_status st;

	aql_signal_store(B.sig, 1, AQL_RELAXED);
	st = aql_queue_submit(B.q, p);
	if (st != AQL_OK)
		return fail("aql_queue_submit", st);
	return await_done(B.q, B.sig, hint);
}

static int sample_rtt(struct result *res, const aql_packet *p, enum aql_wait_hint hint)
{
	uint64_t *v = alloc_samples(B.samples);
	uint64_t t0;
	int rc = -1;

	if (!v)
		return fail_errno("malloc", ENOMEM);
	for (uint32_t i = 0; i < B.warmup; i++)
		if (round_trip(p, hint))
			goto out;
	for (uint32_t i = 0; i < B.samples; i++) {
		t0 = now_ns();
		if (round_trip(p, hint))
			goto out;
		v[i] = now_ns() - t0;
	}
	latency_stats(v, B.samples, &res->lat);
	res->kind = RESULT_LATENCY;
	rc = 0;
out:
	free(v);
	return rc;
}

static int bench_rtt_spin(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return sample_rtt(res, &B.dispatch, AQL_WAIT_ACTIVE);
}

static int bench_rtt_block(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return sample_rtt(res, &B.dispatch, AQL_WAIT_BLOCKED);
}

static int bench_barrier_rtt(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return sample_rtt(res, &B.barrier, AQL_WAIT_ACTIVE);
}

static int bench_throughput(struct ctx *ctx, struct result *res)
{
	double *rate = calloc(B.rounds, sizeof(*rate));
	aql_packet body = B.dispatch;
	aql_status st;
	uint64_t t0;
	int rc = -1;

	(void)ctx;
	if (!rate)
		return fail_errno("malloc", ENOMEM);
	body.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 0,
						 AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	body.dispatch.completion_signal = 0;
	for (uint32_t r = 0; r <= B.rounds; r++) {
		aql_signal_store(B.sig, 1, AQL_RELAXED);
		t0 = now_ns();
		st = submit_batch(B.q, &body, &B.dispatch, B.batch);
		if (st != AQL_OK) {
			rc = fail("aql_queue_submit", st);
			goto out;
		}
		if (await_done(B.q, B.sig, AQL_WAIT_SPIN_BLOCK))
			goto out;
		if (r)	/* round 0 warms up */
			rate[r - 1] = rate_of(B.batch, now_ns() - t0);
	}
	rate_stats(rate, B.rounds, 1, &res->rate);
	res->kind = RESULT_RATE;
	rc = 0;
out:
	free(rate);
	return rc;
}

static int not_measured(struct result *res, const char *why)
{
	res->kind = RESULT_SKIPPED;
	res->skipped = why;
	return 0;
}

BENCH_OF(bench_rtt_hip, not_measured,
	 "not measured: aql-bench has no HIP peer, and HIP is not available where it was written")

/* Host ns per launch of one batch of each kind, the queue idle before
 * each. */
static int submit_round(void *user, double *raw, double *typed)
{
	aql_launch_config c = { .grid = { 1 }, .workgroup = { 1 } };
	aql_arg arg = AQL_ARG(0u);
	aql_packet body = B.dispatch;
	aql_completion done = { 0 };
	aql_status st;
	uint64_t t0, t;

	(void)user;
	body.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 0,
						 AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	body.dispatch.completion_signal = 0;
	aql_signal_store(B.sig, 1, AQL_RELAXED);
	t0 = now_ns();
	st = submit_batch(B.q, &body, &B.dispatch, SUBMIT_BATCH);
	t = now_ns() - t0;
	if (st != AQL_OK)
		return fail("aql_queue_submit", st);
	if (await_done(B.q, B.sig, AQL_WAIT_SPIN_BLOCK))
		return -1;
	*raw = (double)t / SUBMIT_BATCH;
	t0 = now_ns();
	for (uint32_t i = 0; i < SUBMIT_BATCH; i++)
		if ((st = aql_launch(B.q, B.k, &c, &arg, 1, &done)) != AQL_OK)
			return fail("aql_launch", st);
	t = now_ns() - t0;
	*typed = (double)t / SUBMIT_BATCH;
	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	return st == AQL_OK ? 0 : fail("aql_completion_wait (typed launches)", st);
}

static int bench_submit_raw(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	if (pair_rounds(B.rounds * 20, 2, submit_round, NULL, B.sub))
		return -1;
	res->kind = RESULT_LATENCY;
	res->lat = B.sub[0];
	return 0;
}

LATENCY_ROW(bench_submit_typed, B.sub[1])
LATENCY_ROW(bench_typed_overhead, B.sub[2])

/* Recorded graphs: graph.c's rows on the GPU's queue. */
#define GRAPH_CHAIN 32u

static struct latency graph_host[3], graph_whole[3];

static aql_status launch_empty(void *user, aql_queue *q, aql_completion *done)
{
	aql_launch_config c = { .grid = { 1 }, .workgroup = { 1 } };
	aql_arg arg = AQL_ARG(0u);
	aql_status st = AQL_OK;

	(void)user;
	for (uint32_t i = 0; i < GRAPH_CHAIN && st == AQL_OK; i++)
		st = aql_launch(q, B.k, &c, &arg, 1, done);
	return st;
}

static int amd_graph_host(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	if (graph_measure(B.q, launch_empty, NULL, GRAPH_CHAIN, B.rounds * 20, graph_host,
			  graph_whole))
		return -1;
	res->kind = RESULT_LATENCY;
	res->lat = graph_host[0];
	return 0;
}

LATENCY_ROW(amd_graph_individual_host, graph_host[1])
LATENCY_ROW(amd_graph_chain, graph_whole[0])
LATENCY_ROW(amd_graph_chain_individual, graph_whole[1])

/* Copies: from, to and within VRAM. */
enum { H2D, D2H, D2D };

struct copy_job {
	int how;
	void *host, *dev, *dev2;
};

static int copy_once(void *user)
{
	const struct copy_job *j = user;
	void *dst = j->how == H2D ? j->dev : j->how == D2H ? j->host : j->dev2;
	void *src = j->how == H2D ? j->host : j->dev;
	aql_completion done;
	aql_status st = aql_queue_copy(B.q, dst, src, B.copy_size, NULL, 0, &done);

	if (st == AQL_OK)
		st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	return st == AQL_OK ? 0 : fail("aql_queue_copy", st);
}

static int copy_bench(struct result *res, int how)
{
	struct copy_job j = { .how = how };
	aql_status st;
	int rc = -1;

	st = aql_mem_alloc(B.pool, B.copy_size, 4096, &j.host);
	if (st == AQL_OK)
		st = aql_agent_mem_alloc(B.gpu, B.copy_size, &j.dev);
	if (st == AQL_OK)
		st = aql_agent_mem_alloc(B.gpu, B.copy_size, &j.dev2);
	if (st != AQL_OK) {
		rc = fail("memory for the copies", st);
	} else {
		memset(j.host, 0x5a, B.copy_size);
		rc = transfer_rounds(B.rounds, B.copy_size, copy_once, &j, res);
	}
	aql_agent_mem_free(B.gpu, j.dev);
	aql_agent_mem_free(B.gpu, j.dev2);
	aql_mem_free(j.host);
	return rc;
}

BENCH_OF(bench_copy_h2d, copy_bench, H2D)
BENCH_OF(bench_copy_d2h, copy_bench, D2H)
BENCH_OF(bench_copy_d2d, copy_bench, D2D)

#ifdef AQL_BENCH_AMD_GFX90A
static const char built_90a[] = " gfx90a";
#else
static const char built_90a[] = "";
#endif
#ifdef AQL_BENCH_AMD_GFX942
static const char built_942[] = " gfx942";
#else
static const char built_942[] = "";
#endif

/* The empty kernel's build for this GPU's processor, or NULL. */
static const unsigned char *kernel_image(size_t *size)
{
#ifdef AQL_BENCH_AMD_GFX90A
	if (!strcmp(B.node->gfx, "gfx90a")) {
		*size = aql_bench_amd_gfx90a_size;
		return aql_bench_amd_gfx90a;
	}
#endif
#ifdef AQL_BENCH_AMD_GFX942
	if (!strcmp(B.node->gfx, "gfx942")) {
		*size = aql_bench_amd_gfx942_size;
		return aql_bench_amd_gfx942;
	}
#endif
	return NULL;
}

static int make_packets(void)
{
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agents = &B.gpu, .agent_count = 1 };
	aql_queue_config qc = { .size = QUEUE_SIZE, .type = AQL_QUEUE_SINGLE };
	aql_kernarg_hidden hidden;
	uint32_t arg = 0;
	aql_kernarg_value v = { &arg, sizeof(arg) };
	aql_dispatch_packet *d = &B.dispatch.dispatch;
	aql_status st;

	if (B.info.max_queue_size && B.info.max_queue_size < qc.size)
		qc.size = B.info.max_queue_size;
	st = aql_queue_create(B.gpu, &qc, &B.q);
	if (st == AQL_OK)
		st = aql_signal_create(0, &B.sig);
	if (st == AQL_OK)
		st = aql_mem_pool_create(&pc, &B.pool);
	if (st == AQL_OK)
		st = aql_mem_alloc(B.pool, KERNARG_BYTES, 64, &B.kernarg);
	if (st != AQL_OK)
		return fail("queue set-up", st);
	if (B.k->kernarg_size > KERNARG_BYTES)
		return fail_msg("the empty kernel", AQL_ERR_INVALID_ARG,
				"its kernarg segment is larger than the bench's block");
	d->header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
				      AQL_FENCE_SYSTEM);
	d->setup = 1;
	d->workgroup_size_x = d->workgroup_size_y = d->workgroup_size_z = 1;
	d->grid_size_x = d->grid_size_y = d->grid_size_z = 1;
	d->group_segment_size = B.k->group_segment_size;
	d->private_segment_size = B.k->private_segment_size;
	d->kernel_object = B.k->kernel_object;
	d->kernarg_address = (uint64_t)(uintptr_t)B.kernarg;
	d->completion_signal = aql_signal_handle(B.sig);
	/* Code object V5 (gfx942) reads the queue from its hidden block. */
	st = aql_queue_hidden_args(B.q, B.k, &hidden);
	if (st != AQL_OK)
		return fail("aql_queue_hidden_args", st);
	st = aql_kernarg_build(B.k, d, &v, 1, &hidden, B.kernarg, KERNARG_BYTES);
	if (st != AQL_OK)
		return fail("aql_kernarg_build", st);
	B.barrier.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1,
						     AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	B.barrier.barrier.completion_signal = aql_signal_handle(B.sig);
	return 0;
}

static int amd_setup(struct ctx *ctx)
{
	const unsigned char *image;
	size_t size = 0;
	aql_status st;

	memset(&B, 0, sizeof(B));
	st = aql_agent_open(AQL_AGENT_AMD, 0, &B.gpu);
	if (st != AQL_OK) {
		printf("aql-bench --agent amd: %s\n", aql_error_message());
		return BENCH_SKIP;
	}
	if ((st = aql_agent_get_info(B.gpu, &B.info)) != AQL_OK)
		return fail("aql_agent_get_info", st);
	if ((st = kfd_process_get(&B.kfd)) != AQL_OK)
		return fail("kfd_process_get", st);
	B.node = kfd_agent_node(B.kfd, 0);
	if (!B.node)
		return fail_msg("kfd_agent_node", AQL_ERR_NOT_FOUND, "no node for AMD agent 0");
	image = kernel_image(&size);
	if (!image) {
		printf("aql-bench --agent amd: AMD agent 0 is a %s, and this aql-bench has no "
		       "empty kernel for it (built for:%s%s; aql-kcc --probe says which a "
		       "clang here knows)\n", B.node->gfx, built_90a, built_942);
		return BENCH_SKIP;
	}
	/* "linux" is the kernel's KFD; any other table is an emulation. */
	if (strcmp(B.kfd->sys->name, "linux")) {
		ctx->no_verdict = "not judged (emulation)";
		if (ctx->opts->json)
			fprintf(stderr, "aql-bench: AMD agent 0 is emulated by %s; no figure "
				"below is a result\n", B.kfd->sys->name);
	}
	B.warmup = ctx->opts->quick ? 20 : 1000;
	B.samples = ctx->opts->quick ? 200 : 20000;
	B.rounds = ctx->opts->quick ? 3 : 9;
	B.batch = ctx->opts->quick ? 1000 : 100000;
	B.copy_size = ctx->opts->quick ? (size_t)4 << 20 : (size_t)256 << 20;
	st = aql_code_object_load(B.gpu, image, size, NULL, &B.co);
	if (st == AQL_OK)
		st = aql_code_object_kernel(B.co, "empty", &B.k);
	if (st != AQL_OK)
		return fail("loading the empty kernel", st);
	return make_packets();
}

static void amd_cleanup(struct ctx *ctx)
{
	(void)ctx;
	aql_queue_destroy(B.q);
	aql_signal_destroy(B.sig);
	aql_mem_free(B.kernarg);
	aql_mem_pool_destroy(B.pool);
	aql_code_object_destroy(B.co);
	aql_agent_destroy(B.gpu);
}

static int amd_banner(const struct ctx *ctx)
{
	printf("aql-bench --agent amd: AMD agent 0: %s (%s), %" PRIu32 " CUs, KFD %" PRIu32
	       ".%" PRIu32 "; %s run\n", B.info.name, B.info.isa, B.info.compute_units,
	       B.kfd->major, B.kfd->minor, ctx->opts->quick ? "quick" : "full");
	if (ctx->no_verdict)
		printf("EMULATION: AMD agent 0 is emulated by %s (AQL_KFD_SYS), its CP a "
		       "thread running the host build: no figure below is a result, and the "
		       "goals are not judged\n", B.kfd->sys->name);
	printf("goals on hardware: round trip <= 3 us; >= 2x HIP's hipLaunchKernel + "
	       "hipStreamSynchronize (no HIP here: not measured)\n\n");
	return 0;
}

static const struct bench amd_benches[] = {
	{ "amd_rtt_spin", bench_rtt_spin },
	{ "amd_rtt_block", bench_rtt_block },
	{ "amd_barrier_and_rtt", bench_barrier_rtt },
	{ "amd_dispatch_throughput", bench_throughput },
	{ "amd_rtt_hip", bench_rtt_hip },
	{ "amd_submit_raw_ns", bench_submit_raw },
	{ "amd_submit_typed_ns", bench_submit_typed },
	{ "amd_typed_overhead_ns", bench_typed_overhead },
	{ "amd_graph_replay_host_ns_per_launch", amd_graph_host },
	{ "amd_graph_individual_host_ns_per_launch", amd_graph_individual_host },
	{ "amd_graph_chain_ns", amd_graph_chain },
	{ "amd_graph_chain_individual_ns", amd_graph_chain_individual },
	{ "amd_copy_h2d", bench_copy_h2d },
	{ "amd_copy_d2h", bench_copy_d2h },
	{ "amd_copy_d2d", bench_copy_d2d },
};

static const struct goal amd_goals[] = {
	{ "amd_rtt_goal_ns", "round trip, spin (ns)", "amd_rtt_spin", NULL, false, 3000, "ns" },
	{ "amd_rtt_vs_hip_goal", "HIP launch+sync / aql round trip", "amd_rtt_hip",
	  "amd_rtt_spin", true, 2.0, NULL },
	{ "amd_graph_host_goal", "graph replay / one by one, host ns per launch",
	  "amd_graph_replay_host_ns_per_launch", "amd_graph_individual_host_ns_per_launch",
	  false, 0.2, NULL },
	{ "amd_graph_chain_goal", "graph replay / one by one, chain to completion",
	  "amd_graph_chain_ns", "amd_graph_chain_individual_ns", false, 0.8, NULL },
};

const struct mode bench_mode_amd = {
	.name = "amd",
	.benches = amd_benches,
	.nbenches = ARRAY_SIZE(amd_benches),
	.goals = amd_goals,
	.ngoals = ARRAY_SIZE(amd_goals),
	.setup = amd_setup,
	.cleanup = amd_cleanup,
	.banner = amd_banner,
};
