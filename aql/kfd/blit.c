/* SPDX-License-Identifier: MIT */
/*
 * The AMD agent's copy kernel (copy.c): dst[0, size) = src[0, size), or
 * zeroes where src is NULL, the work-items of a 1-D grid taking turns
 * (grid stride), 16 bytes at a time where the two addresses agree modulo
 * 16, else byte by byte. libaql embeds its build for each GPU processor a
 * clang here knows; the KFD emulation runs its host build. A copy packet's
 * grid is never empty.
 */
#include <aql/kernel.h>

/* 16 bytes that the GPU moves in one load and one store. */
typedef struct {
	uint64_t lo, hi;
} aql_kfd_blit16;

AQL_KERNEL_NO_BARRIER(aql_kfd_blit, (aql_global unsigned char *, dst),
		      (aql_global const unsigned char *, src), (uint64_t, size))
{
	uint64_t i = aql_global_id(0), step = aql_global_size(0);
	uint64_t head = size, body = 0;

	if (!src) {
		for (uint64_t k = i; k < size; k += step)
			dst[k] = 0;
		return;
	}
	if ((((uintptr_t)dst ^ (uintptr_t)src) & 15) == 0) {
		head = (16 - ((uintptr_t)dst & 15)) & 15;
		if (head > size)
			head = size;
		body = (size - head) / 16;
	}
	{
		aql_global aql_kfd_blit16 *d = (aql_global aql_kfd_blit16 *)(dst + head);
		aql_global const aql_kfd_blit16 *s =
			(aql_global const aql_kfd_blit16 *)(src + head);

		for (uint64_t k = i; k < body; k += step)
			d[k] = s[k];
	}
	/* The bytes before the aligned body, and those after it. */
	for (uint64_t k = i; k < head; k += step)
		dst[k] = src[k];
	for (uint64_t k = head + body * 16 + i; k < size; k += step)
		dst[k] = src[k];
}
