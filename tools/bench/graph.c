/* SPDX-License-Identifier: MIT */
/*
 * aql-bench, default mode, recorded graphs (aql/graph.h) against the same
 * typed launches made one by one.
 *
 * The chain: 32 launches of axpy (the 4-argument kernel of launch.c, one
 * 64-element grid, two buffers and two scalars) on one SINGLE queue of the
 * default agent, recorded once and instantiated.
 *
 * graph_replay_host_ns_per_launch
 *	Host time of one aql_graph_exec_replay() of the chain, divided by 32.
 *	A barrier packet on a closed signal holds the queue while it is
 *	timed, as launch.c does, so that only the submitting thread's work
 *	is measured; then the gate opens and the replay is awaited, untimed.
 * graph_individual_host_ns_per_launch
 *	The same for the 32 AQL_LAUNCH calls, right after, in the same round.
 * graph_chain_ns
 *	One replay from the call to its completion (aql_completion_wait).
 * graph_chain_individual_ns
 *	The 32 launches from the first call to the last one's completion.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define CHAIN 32u
#define GRID 64u

extern const unsigned char aql_bench_kernels[];
extern const size_t aql_bench_kernels_size;

struct graph_bench {
	aql_code_object *co;
	const aql_kernel *axpy;
	aql_queue *q;
	aql_buf *x, *y;
	aql_graph_exec *exec;
	aql_signal *gate;
	bool gated;		/* the host-time rounds hold the queue */
};

static aql_status launch_chain(struct graph_bench *b, aql_completion *done)
{
	aql_launch_config c = { .grid = { GRID }, .workgroup = { GRID } };
	aql_status st = AQL_OK;

	for (uint32_t i = 0; i < CHAIN && st == AQL_OK; i++)
		st = AQL_LAUNCH(b->q, b->axpy, &c, done, AQL_ARG(2.0f), AQL_ARG(b->x),
				AQL_ARG(b->y), AQL_ARG(GRID));
	return st;
}

static int gb_open(struct ctx *ctx, struct graph_bench *b)
{
	aql_queue_config qc = { .size = 4096, .type = AQL_QUEUE_SINGLE };
	aql_graph *g = NULL;
	aql_status st;

	memset(b, 0, sizeof(*b));
	st = aql_code_object_load(ctx->agent, aql_bench_kernels, aql_bench_kernels_size, NULL,
				  &b->co);
	if (st == AQL_OK)
		st = aql_code_object_kernel(b->co, "axpy", &b->axpy);
	if (st == AQL_OK)
		st = aql_queue_create(ctx->agent, &qc, &b->q);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(float), GRID, AQL_IN, NULL, &b->x);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(float), GRID, AQL_INOUT, NULL, &b->y);
	if (st == AQL_OK)
		st = aql_signal_create(0, &b->gate);
	if (st != AQL_OK)
		return fail("graph set-up", st);
	st = aql_graph_begin(b->q, &g);
	if (st == AQL_OK)
		st = launch_chain(b, NULL);
	if (g && st == AQL_OK)
		st = aql_graph_end(g);
	if (st == AQL_OK)
		st = aql_graph_instantiate(g, &b->exec);
	aql_graph_destroy(g);
	return st == AQL_OK ? 0 : fail("graph recording", st);
}

static void gb_close(struct graph_bench *b)
{
	aql_graph_exec_destroy(b->exec);
	aql_queue_destroy(b->q);
	aql_buf_destroy(b->x);
	aql_buf_destroy(b->y);
	aql_signal_destroy(b->gate);
	aql_code_object_destroy(b->co);
}

static int gate_close(struct graph_bench *b)
{
	aql_packet p;
	aql_status st;

	memset(&p, 0, sizeof(p));
	p.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					     AQL_FENCE_SYSTEM);
	p.barrier.dep_signal[0] = aql_signal_handle(b->gate);
	aql_signal_store(b->gate, 1, AQL_RELAXED);
	st = aql_queue_submit(b->q, &p);
	return st == AQL_OK ? 0 : fail("aql_queue_submit", st);
}

/* ns of one chain, replayed (graph) or launched one by one. */
static int chain(struct graph_bench *b, bool graph, double *ns)
{
	aql_completion done = { 0 };
	uint64_t t0, t;
	aql_status st;

	if (b->gated && gate_close(b))
		return -1;
	t0 = now_ns();
	st = graph ? aql_graph_exec_replay(b->exec, b->q, &done) : launch_chain(b, &done);
	t = now_ns() - t0;
	if (b->gated)
		aql_signal_store(b->gate, 0, AQL_RELEASE);
	if (st != AQL_OK)
		return fail(graph ? "aql_graph_exec_replay" : "aql_launch", st);
	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	if (!b->gated)
		t = now_ns() - t0;
	if (st != AQL_OK)
		return fail("aql_completion_wait", st);
	*ns = b->gated ? (double)t / CHAIN : (double)t;
	return 0;
}

static int graph_round(void *user, double *replay, double *individual)
{
	struct graph_bench *b = user;

	return chain(b, true, replay) || chain(b, false, individual) ? -1 : 0;
}

/* Both pairs come from one run; the first bench runs it. */
static struct latency host[3], whole[3];

int bench_graph_replay_host(struct ctx *ctx, struct result *res)
{
	uint32_t rounds = ctx->opts->quick ? 100 : 1000;
	struct graph_bench b;
	int rc = -1;

	if (!gb_open(ctx, &b)) {
		b.gated = true;
		rc = pair_rounds(rounds, 10, graph_round, &b, host);
		b.gated = false;
		if (!rc)
			rc = pair_rounds(rounds, 10, graph_round, &b, whole);
	}
	gb_close(&b);
	res->kind = RESULT_LATENCY;
	res->lat = host[0];
	return rc;
}

static int row(struct result *res, struct latency lat)
{
	res->kind = RESULT_LATENCY;
	res->lat = lat;
	return 0;
}

int bench_graph_individual_host(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return row(res, host[1]);
}

int bench_graph_chain(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return row(res, whole[0]);
}

int bench_graph_chain_individual(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	return row(res, whole[1]);
}
