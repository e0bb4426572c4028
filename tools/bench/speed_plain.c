/* SPDX-License-Identifier: MIT */
/* The plain C peers of speed_kernels.c, built with the same flags as aql-kcc builds
 * those (tools/meson.build: speed_flags). */
#include <stddef.h>

#include "speed.h"
#include "speed_math.h"

void speed_plain_heat_step(const float *in, float *out, uint32_t n, float k)
{
	for (int i = 1; i < (int)n - 1; i++)
		out[i] = speed_heat(in, i, k);
}

void speed_plain_mandel(float *out, uint32_t width, uint32_t height, uint32_t iters,
			float step)
{
	for (uint32_t y = 0; y < height; y++)
		for (uint32_t x = 0; x < width; x++)
			out[(size_t)y * width + x] = speed_mandel(SPEED_X0 + step * (float)x,
								  SPEED_Y0 + step * (float)y, iters);
}
