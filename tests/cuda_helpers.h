/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the CUDA-agent tests: the agent on the emulated driver
 * (tests/cuda_emu) or, with AQL_HIL=1, the real one; the emulation's
 * counters; saxpy's dispatch packet.
 */
#ifndef AQL_TESTS_CUDA_HELPERS_H
#define AQL_TESTS_CUDA_HELPERS_H

#include <aql/aql.h>

#include "tests/cuda_emu/aqlemu.h"

/* saxpy's kernel arguments (tests/kernels/saxpy.c): y += a * x. */
struct th_saxpy_args {
	float a;
	uint32_t pad;
	const float *x;
	float *y;
	uint32_t n;
} __attribute__((aligned(16)));

/*
 * NVIDIA agent 0, the emulation running the host builds in kernels (a
 * colon-separated list, AQL_CUDA_EMU_KERNELS) unless hil; NULL, having said
 * why, when there is no agent or libcuda.so.1 is not the emulation and not
 * hil. *emu: the loaded libcuda.so.1 (NULL if none), for dlsym and
 * th_cuda_close().
 */
aql_agent *th_cuda_open(const char *kernels, int hil, void **emu);

/* Destroys the agent and lets go of the library. */
void th_cuda_close(aql_agent *gpu, void *emu);

/* Whether the emulation's counters are there (not on the real driver). */
int th_cuda_emulated(void);

/* The emulation's counters; zero on the real driver. */
struct aqlemu_stats th_cuda_stats(void);

/* A one-dimensional dispatch of k over args->n items, wg to a group. */
aql_packet th_saxpy_packet(const aql_kernel *k, const struct th_saxpy_args *args, uint16_t wg,
			   aql_signal *done);

#endif
