/* SPDX-License-Identifier: MIT */
/*
 * The 2-D Jacobi heat step of jacobi_mpi.c, shared with its kernel and
 * with aql-bench --mpi (tools/bench/mpi.c), which times the same step: the
 * grid of h rows of w points is split into blocks of rows, one per rank,
 * each stored with a halo row above and below (rows + 2 rows of w). The
 * grid's edges hold their values; every other point is the same
 * expression of the same inputs whatever the block, so a split grid gives
 * the bits of a whole one.
 */
#ifndef EXAMPLES_JACOBI_H
#define EXAMPLES_JACOBI_H

#include <stdint.h>

/* The rows [*first, *first + *rows) of an h-row grid that rank of size holds. */
static inline void jacobi_block(uint32_t h, int rank, int size, uint32_t *first, uint32_t *rows)
{
	*first = (uint32_t)((uint64_t)h * (uint32_t)rank / (uint32_t)size);
	*rows = (uint32_t)((uint64_t)h * (uint32_t)(rank + 1) / (uint32_t)size) - *first;
}

/* The initial temperature of grid point (g, j): a hot top edge over a pattern. */
static inline float jacobi_initial(uint32_t g, uint32_t j)
{
	return g == 0 ? 100.0f : (float)((g * 7 + j * 13) % 17);
}

#ifdef aql_global
/*
 * Point (i, j) of a block whose first row is grid row first (i counts
 * from 1, past the halo row), from u into next; r is alpha * dt / dx^2.
 */
static inline void jacobi_point(aql_global const float *u, aql_global float *next, float r,
				uint32_t w, uint32_t first, uint32_t h, uint32_t i, uint32_t j)
{
	uint32_t g = first + i - 1;	/* the row in the grid */
	uint32_t p = i * w + j;

	if (g == 0 || g == h - 1 || j == 0 || j == w - 1)
		next[p] = u[p];
	else
		next[p] = u[p] + r * ((u[p - w] + u[p + w]) + (u[p - 1] + u[p + 1]) - 4.0f * u[p]);
}
#endif

#endif
