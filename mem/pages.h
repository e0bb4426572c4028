/* SPDX-License-Identifier: MIT */
/*
 * Internal: the OS side of memory pools. Address space is reserved
 * inaccessible and without swap accounting, then committed (made readable
 * and writable, and pinned on request) from the bottom up. NUMA placement
 * uses the mbind/get_mempolicy system calls directly: they are all a pool
 * needs, so libnuma would add a dependency and no function.
 */
#ifndef AQL_INTERNAL_PAGES_H
#define AQL_INTERNAL_PAGES_H

#include <stddef.h>
#include <aql/status.h>

#define AQL_HUGE_PAGE_SIZE ((size_t)2 << 20)

size_t aql_page_size(void);

/* x rounded up to a whole number of pages. */
static inline size_t aql_page_round(size_t x)
{
	return (x + aql_page_size() - 1) & ~(aql_page_size() - 1);
}

/*
 * Reserve size bytes (a multiple of the page size) of address space
 * aligned to align (a power of two, at least a page), inaccessible until
 * committed. Errors: AQL_ERR_NOMEM naming what was asked for.
 */
aql_status aql_pages_reserve(size_t size, size_t align, void **out);

/*
 * Zeroed, readable and writable memory for bookkeeping, of which only the
 * pages touched use memory. Errors: AQL_ERR_NOMEM.
 */
aql_status aql_pages_map_lazy(size_t size, void **out);

/* Unmap what the two calls above returned. */
void aql_pages_unmap(void *addr, size_t size);

/*
 * Mark a reserved range MADV_HUGEPAGE. Returns 1 if transparent huge
 * pages can back it, 0 if THP is off or missing (the range then stays on
 * normal pages; not an error).
 */
int aql_pages_advise_huge(void *addr, size_t size);

/*
 * Check that NUMA node exists and this process may place memory there.
 * Errors: AQL_ERR_INVALID_ARG naming the node and the nodes online.
 */
aql_status aql_pages_check_node(int node);

/*
 * Bind a reserved range to node (MPOL_BIND) before any page is touched.
 * Where the kernel has no NUMA support or forbids the call and the system
 * has a single node, placement is trivially right and this succeeds.
 * Errors: AQL_ERR_SYSTEM.
 */
aql_status aql_pages_bind(void *addr, size_t size, int node);

/*
 * Make a reserved range readable and writable; with pin, also mlock() it,
 * which faults every page in. On failure the range is inaccessible again.
 * Errors: AQL_ERR_NOMEM (the pinning message names RLIMIT_MEMLOCK, its
 * value, the bytes asked for and how to raise it), AQL_ERR_SYSTEM.
 */
aql_status aql_pages_commit(void *addr, size_t size, int pin);

#endif
