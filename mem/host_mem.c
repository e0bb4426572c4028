/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/error.h"
#include "mem/host_mem.h"

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

aql_status aql_host_mem_alloc(size_t size, size_t align, void **out)
{
	void *p;

	if (size == 0 || align == 0 || (align & (align - 1)) || align > page_size())
		return aql_fail(AQL_ERR_INVALID_ARG,
				"host memory: size %zu / alignment %zu invalid (alignment must be a power of two up to the page size)",
				size, align);
	if (size >= page_size()) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return aql_fail_errno(AQL_ERR_NOMEM, errno,
					      "host memory: mmap of %zu bytes", size);
	} else {
		if (align < sizeof(void *))
			align = sizeof(void *);
		if (posix_memalign(&p, align, size))
			return aql_fail(AQL_ERR_NOMEM,
					"host memory: %zu bytes aligned to %zu", size, align);
		memset(p, 0, size);
	}
	*out = p;
	return AQL_OK;
}

void aql_host_mem_free(void *ptr, size_t size)
{
	if (!ptr)
		return;
	if (size >= page_size())
		munmap(ptr, size);
	else
		free(ptr);
}
