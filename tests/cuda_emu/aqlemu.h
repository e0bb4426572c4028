/* SPDX-License-Identifier: MIT */
/*
 * The test-only extra of the emulated CUDA driver (tests/cuda_emu/): what
 * it did, counted since the library was loaded. A test finds it with
 * dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW) and dlsym("aqlemu_stats").
 */
#ifndef AQL_TESTS_CUDA_EMU_AQLEMU_H
#define AQL_TESTS_CUDA_EMU_AQLEMU_H

#include <stdint.h>

struct aqlemu_stats {
	uint64_t launches;		/* kernels run to completion on the CPU agent */
	uint64_t launch_faults;		/* launches failed by AQL_CUDA_EMU_FAIL_AFTER */
	uint64_t pageable_sync_copies;	/* Async copies made synchronous: pageable host side */
	uint64_t host_funcs_run;	/* cuLaunchHostFunc functions called */
	uint64_t host_funcs_skipped;	/* not called: the context had a sticky error */
	uint64_t mem_op_waits;		/* stream wait-value operations done */
	uint64_t mem_op_writes;		/* stream write-value operations done */
	uint64_t graph_launches;	/* cuGraphLaunch calls */
	uint64_t ptx_jit_links;		/* PTX modules checked with nvJitLink */
	uint64_t driver_calls;		/* entry points called, by every thread */
};

typedef int (*aqlemu_stats_fn)(struct aqlemu_stats *out);

/* Copy the counters to *out. Returns 0, or -1 if out is NULL. Thread safe. */
int aqlemu_stats(struct aqlemu_stats *out);

typedef uint64_t (*aqlemu_thread_calls_fn)(void);

/* Driver entry points the calling thread called so far (cuGetProcAddress
 * and the error-name lookups included): what a call of aql cost it. */
uint64_t aqlemu_thread_calls(void);

#endif
