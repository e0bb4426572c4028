/* SPDX-License-Identifier: MIT */
/*
 * aql-bench, default mode, typed launches (aql/launch.h).
 *
 * The kernel is axpy from tests/launch/kernels.c (float a, const float *x,
 * float *y, uint32_t n), built for the host and embedded in aql-bench, run
 * on one 64-element grid on the default agent (unified memory: the launch
 * copies nothing, so only its bookkeeping is timed).
 *
 * launch_raw_ns
 *	Per dispatch: a batch of 256 submissions of a prepared axpy packet
 *	with a prepared kernarg segment (aql_queue_submit: reserve, store,
 *	ring) on a SINGLE queue, timed as a whole and divided by 256. A
 *	barrier packet on a closed signal holds the queue during the batch,
 *	so that the packet processor does not pull the lines the submitter
 *	writes: both batches measure the submitting thread's own work. The
 *	gate is then opened and the batch awaited, untimed.
 *
 * launch_typed_ns
 *	The same batch made of aql_launch() calls with two buffers and two
 *	scalars: argument checks against the metadata, buffer range checks
 *	and records, a kernarg segment from the queue's pool, the packet.
 *
 * launch_overhead_ns
 *	Per round, the two batches run back to back (raw first) and the
 *	round's sample is typed minus raw: what a typed launch adds over
 *	writing the raw packet. Percentiles over rounds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define BATCH 256u
#define GRID 64u

extern const unsigned char aql_bench_kernels[];
extern const size_t aql_bench_kernels_size;

struct launch_bench {
	aql_code_object *co;
	const aql_kernel *axpy;
	aql_queue *q;
	aql_buf *x, *y;
	void *kernarg;
	aql_packet packet;
	aql_signal *done;
	aql_signal *gate;
};

static int lb_open(struct ctx *ctx, struct launch_bench *b)
{
	aql_queue_config qc = { .size = 4096, .type = AQL_QUEUE_SINGLE };
	aql_kernarg_value v[4];
	float a = 2.0f;
	uint32_t n = GRID;
	void *px, *py;
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
		st = aql_signal_create(0, &b->done);
	if (st == AQL_OK)
		st = aql_signal_create(0, &b->gate);
	if (st != AQL_OK)
		return fail("launch set-up", st);
	b->kernarg = aligned_alloc(64, 256);
	px = aql_buf_data(b->x, float);
	py = aql_buf_data(b->y, float);
	if (!b->kernarg || !px || !py)
		return fail_errno("launch set-up", ENOMEM);
	/* The raw packet gets the same geometry and bytes a launch makes. */
	memset(&b->packet, 0, sizeof(b->packet));
	b->packet.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1,
						      AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	b->packet.dispatch.setup = 1;
	b->packet.dispatch.workgroup_size_x = GRID;
	b->packet.dispatch.workgroup_size_y = b->packet.dispatch.workgroup_size_z = 1;
	b->packet.dispatch.grid_size_x = GRID;
	b->packet.dispatch.grid_size_y = b->packet.dispatch.grid_size_z = 1;
	b->packet.dispatch.kernel_object = b->axpy->kernel_object;
	b->packet.dispatch.kernarg_address = (uint64_t)(uintptr_t)b->kernarg;
	v[0] = (aql_kernarg_value){ &a, sizeof(a) };
	v[1] = (aql_kernarg_value){ &px, sizeof(px) };
	v[2] = (aql_kernarg_value){ &py, sizeof(py) };
	v[3] = (aql_kernarg_value){ &n, sizeof(n) };
	st = aql_kernarg_build(b->axpy, &b->packet.dispatch, v, 4, NULL, b->kernarg, 256);
	if (st != AQL_OK)
		return fail("aql_kernarg_build", st);
	return 0;
}

static void lb_close(struct launch_bench *b)
{
	aql_queue_destroy(b->q);
	aql_buf_destroy(b->x);
	aql_buf_destroy(b->y);
	aql_signal_destroy(b->done);
	aql_signal_destroy(b->gate);
	aql_code_object_destroy(b->co);
	free(b->kernarg);
}

/* Let the packets held by queue_hold() run. */
static void gate_open(struct launch_bench *b)
{
	aql_signal_store(b->gate, 0, AQL_RELEASE);
}

/* ns per raw submission over one batch; the last packet signals. */
static int raw_batch(struct launch_bench *b, double *ns)
{
	uint64_t t0, t;
	aql_status st = AQL_OK;

	if (queue_hold(b->q, b->gate))
		return -1;
	aql_signal_store(b->done, 1, AQL_RELAXED);
	b->packet.dispatch.completion_signal = 0;
	t0 = now_ns();
	for (uint32_t i = 0; i < BATCH && st == AQL_OK; i++) {
		if (i == BATCH - 1)
			b->packet.dispatch.completion_signal = aql_signal_handle(b->done);
		st = aql_queue_submit(b->q, &b->packet);
	}
	t = now_ns() - t0;
	gate_open(b);
	if (st != AQL_OK)
		return fail("aql_queue_submit", st);
	st = aql_signal_wait(b->done, AQL_COND_LT, 1, WAIT_TIMEOUT_NS, AQL_WAIT_ACTIVE, NULL);
	if (st != AQL_OK)
		return fail("aql_signal_wait", st);
	*ns = (double)t / BATCH;
	return 0;
}

static int typed_batch(struct launch_bench *b, double *ns)
{
	aql_launch_config c = { .grid = { GRID }, .workgroup = { GRID } };
	aql_completion done = { 0 };
	uint64_t t0, t;
	aql_status st = AQL_OK;

	if (queue_hold(b->q, b->gate))
		return -1;
	t0 = now_ns();
	for (uint32_t i = 0; i < BATCH && st == AQL_OK; i++)
		st = AQL_LAUNCH(b->q, b->axpy, &c, &done, AQL_ARG(2.0f), AQL_ARG(b->x),
				AQL_ARG(b->y), AQL_ARG(GRID));
	t = now_ns() - t0;
	gate_open(b);
	if (st != AQL_OK)
		return fail("aql_launch", st);
	st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
	if (st != AQL_OK)
		return fail("aql_completion_wait", st);
	*ns = (double)t / BATCH;
	return 0;
}

static int launch_round(void *user, double *raw, double *typed)
{
	struct launch_bench *b = user;

	return raw_batch(b, raw) || typed_batch(b, typed) ? -1 : 0;
}

/* All three metrics come from one run (raw then typed batches, ten
 * rounds warming up); the first bench runs it. */
static struct latency lat[3];

int bench_launch_raw(struct ctx *ctx, struct result *res)
{
	struct launch_bench b;
	int rc = -1;

	if (!lb_open(ctx, &b))
		rc = pair_rounds(ctx->opts->quick ? 200 : 2000, 10, launch_round, &b, lat);
	lb_close(&b);
	res->kind = RESULT_LATENCY;
	res->lat = lat[0];
	return rc;
}

int bench_launch_typed(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	res->kind = RESULT_LATENCY;
	res->lat = lat[1];
	return 0;
}

int bench_launch_overhead(struct ctx *ctx, struct result *res)
{
	(void)ctx;
	res->kind = RESULT_LATENCY;
	res->lat = lat[2];
	return 0;
}
