/* SPDX-License-Identifier: MIT */
/* speed_plain_mandel() over all cores with OpenMP: the rows' parallel peer. */
#include <stddef.h>
#include <omp.h>

#include "speed.h"
#include "speed_math.h"

void speed_omp_mandel(float *out, uint32_t width, uint32_t height, uint32_t iters, float step)
{
#pragma omp parallel for schedule(static)
	for (uint32_t y = 0; y < height; y++)
		for (uint32_t x = 0; x < width; x++)
			out[(size_t)y * width + x] = speed_mandel(SPEED_X0 + step * (float)x,
								  SPEED_Y0 + step * (float)y, iters);
}

int speed_omp_threads(void)
{
	return omp_get_max_threads();
}
