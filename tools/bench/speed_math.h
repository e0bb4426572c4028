/* SPDX-License-Identifier: MIT */
/*
 * The arithmetic of the loop-speed rows (speed.c), shared by the kernels
 * (speed_kernels.c, built by aql-kcc) and the plain C and OpenMP loops
 * (speed_plain.c, speed_omp.c), so that each pair computes the same thing.
 */
#ifndef AQL_BENCH_SPEED_MATH_H
#define AQL_BENCH_SPEED_MATH_H

#include <stdint.h>

/* One explicit step of the 1-D heat equation at an inner point i. */
static inline float speed_heat(const float *in, int i, float k)
{
	return in[i] + k * (in[i - 1] - 2.0f * in[i] + in[i + 1]);
}

/*
 * Mandelbrot at c = (cr, ci) with a fixed iteration count (no early
 * exit, so every point costs the same): the iterations that stayed in
 * the disc of radius 2.
 */
static inline float speed_mandel(float cr, float ci, uint32_t iters)
{
	float zr = 0.0f, zi = 0.0f, in = 0.0f;

	for (uint32_t k = 0; k < iters; k++) {
		float t = zr * zr - zi * zi + cr;

		zi = 2.0f * zr * zi + ci;
		zr = t;
		in += zr * zr + zi * zi <= 4.0f ? 1.0f : 0.0f;
	}
	return in;
}

#define SPEED_X0 (-2.0f)
#define SPEED_Y0 (-1.25f)

#endif
