/* SPDX-License-Identifier: MIT */
/*
 * Kernels for aql-bench --agent cuda and --agent amd (tools/bench/cuda.c,
 * amd.c), built with aql-kcc as PTX (what the NVIDIA agent runs), for
 * gfx90a and gfx942 (what the AMD agent runs) and for the host (what the
 * CPU agent runs in the cross-agent chain, and what the emulated drivers
 * run in place of the GPU builds); all are embedded in aql-bench.
 */
#include <aql/kernel.h>

/* Does nothing: every figure taken with it is launch overhead. The
 * argument keeps the parameter block the shape of a real one. */
AQL_KERNEL_NO_BARRIER(empty, (uint32_t, n))
{
	(void)n;
}
