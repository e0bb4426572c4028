/* SPDX-License-Identifier: MIT */
/*
 * out[x][y] = in[y][x] * scale + bias over a 2-D grid of width x height,
 * with arguments of every size and alignment so that their layout is
 * checked on every target: a byte, a 16-bit, a 64-bit and a double after
 * narrower ones.
 */
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(transpose, (uint8_t, shift), (aql_global const uint32_t *, in),
		      (uint16_t, width), (uint64_t, bias), (uint32_t, height),
		      (double, scale), (aql_global uint64_t *, out))
{
	uint32_t x = aql_global_id(0), y = aql_global_id(1);

	if (x < width && y < height)
		out[(uint64_t)x * height + y] =
			((uint64_t)(in[(uint64_t)y * width + x] * scale) << shift) + bias;
}
