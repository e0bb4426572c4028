/* SPDX-License-Identifier: MIT */
/*
 * aql-bench, default mode: kernels at loop speed on the CPU agent.
 *
 * The kernels (speed_kernels.c) are built by aql-kcc for the host and
 * embedded; their plain C peers (speed_plain.c, and speed_omp.c with
 * OpenMP) are built with the same flags (tools/meson.build: speed_flags).
 * Each row is the median over rounds, the first round discarded.
 *
 * plainc_stencil_ns_per_point, kernel_stencil_ns_per_point
 *	A 1-D heat stencil of STENCIL_N floats, two buffers ping-ponged over
 *	time steps: the plain loop, and one launch per step (chained on one
 *	queue) of a kernel with one point per work-item and the default
 *	geometry, on a CPU agent with one worker. ns per point and step.
 *
 * plainc_compute_ns_per_item, kernel_compute_ns_per_item
 *	Mandelbrot over a 2-D grid with a fixed iteration count per point
 *	(compute bound): the plain loop, and one launch on a one-worker
 *	agent. ns per point.
 *
 * openmp_compute_ns_per_item, kernel_compute_all_ns_per_item
 *	The same over all cores: an OpenMP loop (its default thread count)
 *	and one launch on the default CPU agent (one worker per CPU).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "speed.h"

#define STENCIL_N (1u << 20)
#define STENCIL_K 0.25f
#define MANDEL_W 1024u
#define MANDEL_ITERS 64u
#define MANDEL_STEP (2.5f / MANDEL_W)

extern const unsigned char aql_bench_speed_kernels[];
extern const size_t aql_bench_speed_kernels_size;

struct speed {
	aql_agent *agent;	/* owned unless it is ctx->agent */
	aql_code_object *co;
	const aql_kernel *heat, *mandel;
	aql_queue *q;
	aql_buf *a, *b;
};

static uint32_t rounds(const struct ctx *ctx)
{
	return ctx->opts->quick ? 3 : 9;
}

static uint32_t heat_steps(const struct ctx *ctx)
{
	return ctx->opts->quick ? 4 : 20;
}

static uint32_t mandel_rows(const struct ctx *ctx)
{
	return ctx->opts->quick ? 64 : 256;
}

static void speed_close(struct ctx *ctx, struct speed *s)
{
	aql_queue_destroy(s->q);
	aql_buf_destroy(s->a);
	aql_buf_destroy(s->b);
	aql_code_object_destroy(s->co);
	if (s->agent && s->agent != ctx->agent)
		aql_agent_destroy(s->agent);
}

/* One worker, or (workers 0) the default agent; buffers of n floats. */
static int speed_open(struct ctx *ctx, struct speed *s, uint32_t workers, size_t n)
{
	aql_host_agent_config ac = { .workers = workers };
	aql_queue_config qc = { .size = 256, .type = AQL_QUEUE_SINGLE };
	aql_status st = AQL_OK;
	float *pa, *pb;

	memset(s, 0, sizeof(*s));
	if (workers)
		st = aql_host_agent_create(&ac, &s->agent);
	else
		s->agent = ctx->agent;
	if (st == AQL_OK)
		st = aql_code_object_load(s->agent, aql_bench_speed_kernels,
					  aql_bench_speed_kernels_size, NULL, &s->co);
	if (st == AQL_OK)
		st = aql_code_object_kernel(s->co, "speed_heat_step", &s->heat);
	if (st == AQL_OK)
		st = aql_code_object_kernel(s->co, "speed_mandel_grid", &s->mandel);
	if (st == AQL_OK)
		st = aql_queue_create(s->agent, &qc, &s->q);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(float), n, AQL_INOUT, NULL, &s->a);
	if (st == AQL_OK)
		st = aql_buf_create(AQL_TYPE(float), n, AQL_INOUT, NULL, &s->b);
	if (st != AQL_OK) {
		fail("loop-speed set-up", st);
		speed_close(ctx, s);
		return -1;
	}
	pa = aql_buf_data(s->a, float);
	pb = aql_buf_data(s->b, float);
	for (size_t i = 0; i < n; i++)
		pa[i] = pb[i] = (float)(i % 97) * 0.01f;
	return 0;
}

/* A round's ns per item of each of rounds(ctx) + 1 rounds, the first
 * dropped, as a duration in unit. */
static int finish(struct ctx *ctx, struct result *res, double *v, const char *unit)
{
	res->kind = RESULT_DURATION;
	duration_stats(v + 1, rounds(ctx), unit, 1, 0, &res->dur);
	return 0;
}

static int heat_rows(struct ctx *ctx, struct result *res, bool kernel)
{
	uint32_t steps = heat_steps(ctx), n = STENCIL_N;
	double v[16];
	struct speed s;
	int ret = 0;

	if (speed_open(ctx, &s, 1, n))
		return -1;
	for (uint32_t r = 0; r <= rounds(ctx) && !ret; r++) {
		uint64_t t0 = now_ns();

		for (uint32_t t = 0; t < steps && !ret; t++) {
			aql_buf *in = t & 1 ? s.b : s.a, *out = t & 1 ? s.a : s.b;
			aql_launch_config cfg = { .grid = { n } };
			aql_completion done;
			aql_status st;

			if (!kernel) {
				speed_plain_heat_step(aql_buf_data(in, float),
						      aql_buf_data(out, float), n, STENCIL_K);
				continue;
			}
			st = AQL_LAUNCH(s.q, s.heat, &cfg, &done, AQL_ARG(in), AQL_ARG(out),
					AQL_ARG(n), AQL_ARG(STENCIL_K));
			if (st == AQL_OK && t + 1 == steps)
				st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
			if (st != AQL_OK)
				ret = fail("heat step", st);
		}
		v[r] = (double)(now_ns() - t0) / ((double)steps * n);
	}
	speed_close(ctx, &s);
	return ret ? ret : finish(ctx, res, v, "ns/point");
}

int bench_plainc_stencil(struct ctx *ctx, struct result *res)
{
	return heat_rows(ctx, res, false);
}

int bench_kernel_stencil(struct ctx *ctx, struct result *res)
{
	return heat_rows(ctx, res, true);
}

enum mandel_way { MANDEL_PLAIN, MANDEL_KERNEL_ONE, MANDEL_OPENMP, MANDEL_KERNEL_ALL };

static int mandel_rows_run(struct ctx *ctx, struct result *res, enum mandel_way way)
{
	uint32_t h = mandel_rows(ctx), w = MANDEL_W, iters = MANDEL_ITERS;
	float step = MANDEL_STEP;
	double v[16];
	struct speed s;
	int ret = 0;

	if (speed_open(ctx, &s, way == MANDEL_KERNEL_ALL ? 0 : 1, (size_t)w * h))
		return -1;
	for (uint32_t r = 0; r <= rounds(ctx) && !ret; r++) {
		aql_launch_config cfg = { .grid = { w, h } };
		aql_completion done;
		aql_status st;
		uint64_t t0 = now_ns();

		switch (way) {
		case MANDEL_PLAIN:
			speed_plain_mandel(aql_buf_data(s.a, float), w, h, iters, step);
			break;
#ifdef AQL_BENCH_OPENMP
		case MANDEL_OPENMP:
			speed_omp_mandel(aql_buf_data(s.a, float), w, h, iters, step);
			break;
#endif
		default:
			st = AQL_LAUNCH(s.q, s.mandel, &cfg, &done, AQL_ARG(s.a), AQL_ARG(w),
					AQL_ARG(h), AQL_ARG(iters), AQL_ARG(step));
			if (st == AQL_OK)
				st = aql_completion_wait(done, WAIT_TIMEOUT_NS);
			if (st != AQL_OK)
				ret = fail("mandelbrot launch", st);
		}
		v[r] = (double)(now_ns() - t0) / ((double)w * h);
	}
	speed_close(ctx, &s);
	return ret ? ret : finish(ctx, res, v, "ns/item");
}

int bench_plainc_compute(struct ctx *ctx, struct result *res)
{
	return mandel_rows_run(ctx, res, MANDEL_PLAIN);
}

int bench_kernel_compute(struct ctx *ctx, struct result *res)
{
	return mandel_rows_run(ctx, res, MANDEL_KERNEL_ONE);
}

int bench_openmp_compute(struct ctx *ctx, struct result *res)
{
#ifdef AQL_BENCH_OPENMP
	return mandel_rows_run(ctx, res, MANDEL_OPENMP);
#else
	(void)ctx;
	res->kind = RESULT_SKIPPED;
	res->skipped = "built without OpenMP (none found, or a TSan build)";
	return 0;
#endif
}

int bench_kernel_compute_all(struct ctx *ctx, struct result *res)
{
	return mandel_rows_run(ctx, res, MANDEL_KERNEL_ALL);
}
