/* SPDX-License-Identifier: MIT */
/*
 * Internal: the kernarg fill without aql_kernarg_build()'s checks, for
 * typed launches, which have checked every argument against the metadata
 * already and made the packet themselves.
 */
#ifndef AQL_LOADER_KERNARG_IMPL_H
#define AQL_LOADER_KERNARG_IMPL_H

#include <string.h>
#include <aql/kernarg.h>

/* The common sizes as single moves: a libc call per argument would cost
 * more than the rest of a typed launch's kernarg fill. */
static inline void aql_kernarg_copy(uint8_t *dst, const void *src, uint32_t size)
{
	switch (size) {
	case 4:
		memcpy(dst, src, 4);
		break;
	case 8:
		memcpy(dst, src, 8);
		break;
	default:
		if (size)
			memcpy(dst, src, size);
	}
}

/*
 * The hidden arguments of kernel (those after its explicit ones) into out,
 * whose other bytes the caller has set. packet's grid, work-group sizes,
 * setup and group_segment_size (at least the kernel's static LDS) are set,
 * and every argument lies inside kernel->kernarg_size. hidden may be NULL.
 */
void aql_kernarg_fill_hidden(const aql_kernel *kernel, const aql_dispatch_packet *packet,
			     const aql_kernarg_hidden *hidden, void *out);

#endif
