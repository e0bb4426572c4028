/* SPDX-License-Identifier: MIT */
/*
 * hidden_read: the KFD emulation's fixture for the hidden arguments of
 * the device heap and hostcall (tests/test_kfd_hidden.c). Work-item 0
 * writes what its kernarg block holds there: out[0]
 * hidden_hostcall_buffer, out[1] hidden_heap_v1, out[2]
 * hidden_queue_ptr (0 where the code object version has no such
 * argument). Reading them makes the compiler list them in the metadata
 * (the attributor's amdgpu-no-hostcall-ptr, amdgpu-no-heap-ptr and
 * amdgpu-no-queue-ptr cannot be proven).
 *
 * The GPU builds read them at the implicit argument pointer: code object
 * V5 at +80, +96 and +200; V4 (built with -DHIDDEN_V4) has the hostcall
 * buffer at +24 and neither of the others. The host build, which the
 * emulated CP runs with the GPU build's kernarg block, reads the same
 * bytes: the hidden block starts at the first 8-byte boundary after the
 * explicit arguments, at 16, and v4 says which layout the GPU build has.
 */
#include <aql/kernel.h>

AQL_KERNEL_NO_BARRIER(hidden_read, (aql_global uint64_t *, out), (uint32_t, v4))
{
#if AQL_KERNEL_TARGET_AMDGCN
	__constant const uint64_t *h = (__constant const uint64_t *)__builtin_amdgcn_implicitarg_ptr();

	(void)v4;
	if (aql_global_id(0) == 0) {
#ifdef HIDDEN_V4
		out[0] = h[3];
		out[1] = 0;
		out[2] = 0;
#else
		out[0] = h[10];
		out[1] = h[12];
		out[2] = h[25];
#endif
	}
#elif AQL_KERNEL_TARGET_HOST
	const uint64_t *h = (const uint64_t *)((const char *)(uintptr_t)
		aql_host_workitem_current()->packet->kernarg_address + 16);

	if (aql_global_id(0) == 0) {
		out[0] = v4 ? h[3] : h[10];
		out[1] = v4 ? 0 : h[12];
		out[2] = v4 ? 0 : h[25];
	}
#else
	(void)v4;
	if (aql_global_id(0) == 0)
		out[0] = out[1] = out[2] = 0;
#endif
}
