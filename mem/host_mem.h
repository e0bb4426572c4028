/* SPDX-License-Identifier: MIT */
/*
 * Internal: memory for runtime objects that need whole pages of their own
 * (queue rings and control blocks, the signal pool, host code, which gets
 * mprotect()ed): pool memory (aql/mem.h) shares its chunks, and pinning
 * rings there would spend RLIMIT_MEMLOCK on every queue.
 */
#ifndef AQL_INTERNAL_HOST_MEM_H
#define AQL_INTERNAL_HOST_MEM_H

#include <stddef.h>
#include <aql/status.h>

/*
 * Zeroed memory of size bytes aligned to align (a power of two, at most a
 * page). Whole pages come from mmap, smaller blocks from the C heap.
 * Errors: AQL_ERR_INVALID_ARG (size or alignment), AQL_ERR_NOMEM naming
 * what was asked for.
 */
aql_status aql_host_mem_alloc(size_t size, size_t align, void **out);

/* Free memory from aql_host_mem_alloc(); size must be the one allocated. */
void aql_host_mem_free(void *ptr, size_t size);

#endif
