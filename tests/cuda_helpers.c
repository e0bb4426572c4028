/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <stdlib.h>

#include "cuda_helpers.h"
#include "helpers.h"

static aqlemu_stats_fn emu_stats;

aql_agent *th_cuda_open(const char *kernels, int hil, void **emu)
{
	aql_agent *gpu = NULL;

	*emu = NULL;
	if (!hil)
		setenv("AQL_CUDA_EMU_KERNELS", kernels, 1);
	if (aql_agent_open(AQL_AGENT_NVIDIA, 0, &gpu) != AQL_OK) {
		fprintf(stderr, "no CUDA agent (is the emulation on LD_LIBRARY_PATH?): %s\n",
			aql_error_message());
		return NULL;
	}
	*emu = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_NOW);
	*(void **)&emu_stats = *emu ? dlsym(*emu, "aqlemu_stats") : NULL;
	if (!emu_stats && !hil) {
		fprintf(stderr, "libcuda.so.1 is not the emulation (no aqlemu_stats); set "
			"AQL_HIL=1 for a real driver\n");
		th_cuda_close(gpu, *emu);
		*emu = NULL;
		return NULL;
	}
	return gpu;
}

void th_cuda_close(aql_agent *gpu, void *emu)
{
	aql_agent_destroy(gpu);
	if (emu)
		dlclose(emu);
}

int th_cuda_emulated(void)
{
	return emu_stats != NULL;
}

struct aqlemu_stats th_cuda_stats(void)
{
	struct aqlemu_stats s = { 0 };

	if (emu_stats)
		emu_stats(&s);
	return s;
}

aql_packet th_saxpy_packet(const aql_kernel *k, const struct th_saxpy_args *args, uint16_t wg,
			   aql_signal *done)
{
	aql_packet p = { 0 };

	p.dispatch.header = th_header(AQL_PACKET_KERNEL_DISPATCH);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = wg;
	p.dispatch.workgroup_size_y = 1;
	p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_x = args->n;
	p.dispatch.grid_size_y = 1;
	p.dispatch.grid_size_z = 1;
	p.dispatch.group_segment_size = k->group_segment_size;
	p.dispatch.kernel_object = k->kernel_object;
	p.dispatch.kernarg_address = (uint64_t)(uintptr_t)args;
	p.dispatch.completion_signal = aql_signal_handle(done);
	return p;
}
