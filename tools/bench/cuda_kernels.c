/* SPDX-License-Identifier: MIT */
/*
 * Kernels for aql-bench --agent cuda (tools/bench/cuda.c), built with
 * aql-kcc as PTX (what the NVIDIA agent runs) and for the host (what the
 * CPU agent runs in the cross-agent chain, and what the emulated driver
 * runs in place of the PTX); both are embedded in aql-bench.
 */
#include <aql/kernel.h>

/* Does nothing: every figure taken with it is launch overhead. The
 * argument keeps the parameter block the shape of a real one. */
AQL_KERNEL_NO_BARRIER(empty, (uint32_t, n))
{
	(void)n;
}
