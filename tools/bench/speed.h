/* SPDX-License-Identifier: MIT */
/* aql-bench: the plain C and OpenMP loops of the loop-speed rows. */
#ifndef AQL_BENCH_SPEED_H
#define AQL_BENCH_SPEED_H

#include <stdint.h>

void speed_plain_heat_step(const float *in, float *out, uint32_t n, float k);
void speed_plain_mandel(float *out, uint32_t width, uint32_t height, uint32_t iters,
			float step);
#ifdef AQL_BENCH_OPENMP
void speed_omp_mandel(float *out, uint32_t width, uint32_t height, uint32_t iters, float step);
int speed_omp_threads(void);
#endif

#endif
