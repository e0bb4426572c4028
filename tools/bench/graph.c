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

/* One chain's recording and its measurement (graph_measure()). */
struct graph_bench {
	aql_queue *q;
	graph_chain_fn launch;
	void *user;
	uint32_t launches;
	aql_graph_exec *exec;
	aql_signal *gate;
	bool gated;		/* the host-time rounds hold the queue */
};

/* ns of one chain, replayed (graph) or launched one by one. */
static int chain(struct graph_bench *b, bool graph, double *ns)
{
	aql_completion done = { 0 };
	uint64_t t0, t;
	aql_status st;

	if (b->gated && queue_hold(b->q, b->gate))
		return -1;
	t0 = now_ns();
	st = graph ? aql_graph_exec_replay(b->exec, b->q, &done) : b->launch(b->user, b->q, &done);
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
	*ns = b->gated ? (double)t / b->launches : (double)t;
	return 0;
}

static int graph_round(void *user, double *replay, double *individual)
{
	struct graph_bench *b = user;

	return chain(b, true, replay) || chain(b, false, individual) ? -1 : 0;
}

int graph_measure(aql_queue *q, graph_chain_fn launch, void *user, uint32_t launches,
		  uint32_t rounds, struct latency host[3], struct latency whole[3])
{
	struct graph_bench b = { .q = q, .launch = launch, .user = user, .launches = launches };
	aql_graph *g = NULL;
	aql_status st = aql_signal_create(0, &b.gate);
	int rc = -1;

	if (st == AQL_OK)
		st = aql_graph_begin(q, &g);
	if (st == AQL_OK)
		st = launch(user, q, NULL);
	if (g && st == AQL_OK)
		st = aql_graph_end(g);
	if (st == AQL_OK)
		st = aql_graph_instantiate(g, &b.exec);
	aql_graph_destroy(g);
	if (st != AQL_OK) {
		fail("graph recording", st);
	} else {
		b.gated = true;
		rc = pair_rounds(rounds, 10, graph_round, &b, host);
		b.gated = false;
		if (!rc)
			rc = pair_rounds(rounds, 10, graph_round, &b, whole);
	}
	aql_graph_exec_destroy(b.exec);
	aql_signal_destroy(b.gate);
	return rc;
}

/* The default mode's chain: axpy on two typed buffers. */
struct axpy_chain {
	aql_code_object *co;
	const aql_kernel *axpy;
	aql_queue *q;
	aql_buf *x, *y;
};

static aql_status launch_axpy(void *user, aql_queue *q, aql_completion *done)
{
	struct axpy_chain *a = user;
	aql_launch_config c = { .grid = { GRID }, .workgroup = { GRID } };
	aql_status st = AQL_OK;

	for (uint32_t i = 0; i < CHAIN && st == AQL_OK; i++)
		st = AQL_LAUNCH(q, a->axpy, &c, done, AQL_ARG(2.0f), AQL_ARG(a->x),
				AQL_ARG(a->y), AQL_ARG(GRID));
	return st;
}

/* Both pairs come from one run; the first bench runs it. */
static struct latency host[3], whole[3];

int bench_graph_replay_host(struct ctx *ctx, struct result *res)
{
	aql_queue_config qc = { .size = 4096, .type = AQL_QUEUE_SINGLE };
	struct axpy_chain a = { 0 };
	aql_status st;
	int rc = -1;

	st = aql_code_object_load(ctx->agent, aql_bench_kernels, aql_bench_kernels_size, NULL,
				  &a.co);
	if (st == AQL_OK)
		st = aql_code_object_kernel(a.co, "axpy", &a.axpy);
	if (st == AQL_OK)
		st = aql_queue_create(ctx->agent, &qc, &a.q);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(float), GRID, AQL_IN, NULL, &a.x);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(float), GRID, AQL_INOUT, NULL, &a.y);
	if (st != AQL_OK)
		fail("graph set-up", st);
	else
		rc = graph_measure(a.q, launch_axpy, &a, CHAIN, ctx->opts->quick ? 100 : 1000,
				   host, whole);
	aql_queue_destroy(a.q);
	aql_buf_destroy(a.x);
	aql_buf_destroy(a.y);
	aql_code_object_destroy(a.co);
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
