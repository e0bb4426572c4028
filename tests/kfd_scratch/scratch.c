/* SPDX-License-Identifier: MIT */
/*
 * scratch_sum: the KFD emulation's fixture for scratch (private segment)
 * memory (tests/test_kfd_scratch.c). Each work-item fills a private array
 * of SCRATCH_WORDS words (8 KiB) and reads it back in an order that
 * depends on its id and on stride, so the GPU builds keep it in scratch
 * (private_segment_fixed_size of 8 KiB and more in the descriptor):
 *   out[i] = sum over j of (in[i] * k + k) * (j + 1),
 *   k = (j * stride + i) mod SCRATCH_WORDS, in 32-bit arithmetic.
 */
#include <aql/kernel.h>

#define SCRATCH_WORDS 2048u

AQL_KERNEL_NO_BARRIER(scratch_sum, (aql_global const uint32_t *, in),
		      (aql_global uint32_t *, out), (uint32_t, n), (uint32_t, stride))
{
	uint32_t i = aql_global_id(0), sum = 0;
	uint32_t buf[SCRATCH_WORDS];

	if (i >= n)
		return;
	for (uint32_t j = 0; j < SCRATCH_WORDS; j++)
		buf[j] = in[i] * j + j;
	for (uint32_t j = 0; j < SCRATCH_WORDS; j++)
		sum += buf[(j * stride + i) % SCRATCH_WORDS] * (j + 1);
	out[i] = sum;
}
