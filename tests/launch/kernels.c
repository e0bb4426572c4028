/* SPDX-License-Identifier: MIT */
/*
 * Kernels for test_launch and aql-bench: each exercises one rule of typed
 * launches (direction, element types, by-value kinds, limits).
 */
#include <aql/kernel.h>

struct particle {
	float pos[3];
	uint32_t id;
};

/* y = a * x + y: a read-only input, an in-out output. */
AQL_KERNEL_NO_BARRIER(axpy, (float, a), (aql_global const float *, x),
		      (aql_global float *, y), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		y[i] = a * x[i] + y[i];
}

/* out[i] = in[i] * 2: writes every element of out, reads nothing of it. */
AQL_KERNEL_NO_BARRIER(twice, (aql_global const int32_t *, in),
		      (aql_global int32_t *, out), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		out[i] = in[i] * 2;
}

/* data[i] += add, on a range given by the buffer (a partition). */
AQL_KERNEL_NO_BARRIER(add_i32, (aql_global int32_t *, data), (int32_t, add), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		data[i] += add;
}

/* A registered struct type as elements, and a double by value. */
AQL_KERNEL_NO_BARRIER(move, (aql_global struct particle *, p), (double, dt), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		for (int k = 0; k < 3; k++)
			p[i].pos[k] += (float)dt * (float)(k + 1);
}

/* Each work-item writes its group and local id: shows the work-group size. */
AQL_KERNEL(group_ids, (aql_global uint32_t *, out), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	aql_barrier();
	if (i < n)
		out[i] = aql_group_id(0) * 1000 + aql_local_id(0);
}

/* A buffer of 64-bit elements through a pointer that is not const. */
AQL_KERNEL_NO_BARRIER(fill_u64, (aql_global uint64_t *, out), (uint64_t, value), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i < n)
		out[i] = value + i;
}

struct twenty_bytes {
	uint8_t b[20];
};

/* The dynamic LDS a work-item sees, next to 20 bytes of static LDS. */
AQL_KERNEL_LDS(dynamic_size, struct twenty_bytes, (aql_global uint32_t *, out))
{
	if (aql_global_id(0) == 0) {
		lds->b[0] = 1;
		out[0] = aql_dynamic_lds_size();
	}
}

/* One step of the 1-D heat equation; the two ends are held fixed. */
AQL_KERNEL_NO_BARRIER(heat_step, (aql_global const float *, in), (aql_global float *, out),
		      (float, k), (uint32_t, n))
{
	uint32_t i = aql_global_id(0);

	if (i >= n)
		return;
	if (i == 0 || i == n - 1)
		out[i] = in[i];
	else
		out[i] = in[i] + k * ((in[i - 1] - 2.0f * in[i]) + in[i + 1]);
}
