/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/mempolicy.h>

#include "util/error.h"
#include "mem/pages.h"

/* Nodes the masks below can name; Linux's MAX_NUMNODES is at most 1024. */
#define NODE_BITS 1024
#define MASK_WORDS (NODE_BITS / (8 * sizeof(unsigned long)))

typedef struct {
	unsigned long w[MASK_WORDS];
} node_mask;

size_t aql_page_size(void)
{
	static size_t cached;
	size_t size = __atomic_load_n(&cached, __ATOMIC_RELAXED);

	if (!size) {
		size = (size_t)sysconf(_SC_PAGESIZE);
		__atomic_store_n(&cached, size, __ATOMIC_RELAXED);
	}
	return size;
}

aql_status aql_pages_reserve(size_t size, size_t align, void **out)
{
	size_t span = size + align - aql_page_size();
	uintptr_t start, aligned;
	void *p;

	if (span < size)
		return aql_fail(AQL_ERR_NOMEM, "reserving %zu bytes: size overflows", size);
	p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return aql_fail_errno(AQL_ERR_NOMEM, errno,
				      "reserving %zu bytes of address space", size);
	/* Trim to the aligned part so that the range starts on a huge page. */
	start = (uintptr_t)p;
	aligned = (start + align - 1) & ~(uintptr_t)(align - 1);
	if (aligned > start)
		munmap(p, aligned - start);
	if (start + span > aligned + size)
		munmap((void *)(aligned + size), start + span - aligned - size);
	*out = (void *)aligned;
	return AQL_OK;
}

aql_status aql_pages_map_lazy(size_t size, void **out)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return aql_fail_errno(AQL_ERR_NOMEM, errno,
				      "mapping %zu bytes of pool bookkeeping", size);
	*out = p;
	return AQL_OK;
}

void aql_pages_unmap(void *addr, size_t size)
{
	if (addr)
		munmap(addr, size);
}

/* Read a small sysfs or procfs file into buf; returns its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

int aql_pages_advise_huge(void *addr, size_t size)
{
	char mode[128];

	/* "never" accepts the advice and ignores it; report what really happens. */
	if (read_small("/sys/kernel/mm/transparent_hugepage/enabled", mode, sizeof(mode)) < 0 ||
	    strstr(mode, "[never]"))
		return 0;
	return madvise(addr, size, MADV_HUGEPAGE) == 0;
}

/* Parse a sysfs node list ("0", "0-3,8") into mask; 0 on success. */
static int parse_node_list(const char *s, node_mask *mask)
{
	memset(mask, 0, sizeof(*mask));
	while (*s && *s != '\n') {
		char *end;
		unsigned long lo = strtoul(s, &end, 10), hi = lo;

		if (end == s)
			return -1;
		s = end;
		if (*s == '-') {
			hi = strtoul(s + 1, &end, 10);
			if (end == s + 1)
				return -1;
			s = end;
		}
		if (lo > hi || hi >= NODE_BITS)
			return -1;
		for (unsigned long n = lo; n <= hi; n++)
			mask->w[n / (8 * sizeof(long))] |= 1ul << (n % (8 * sizeof(long)));
		if (*s == ',')
			s++;
	}
	return 0;
}

static int mask_has(const node_mask *mask, unsigned long node)
{
	return node < NODE_BITS &&
	       (mask->w[node / (8 * sizeof(long))] >> (node % (8 * sizeof(long)))) & 1;
}

/* The nodes online; a kernel without NUMA has node 0 only. */
static void online_nodes(node_mask *mask, char *list, size_t cap)
{
	if (read_small("/sys/devices/system/node/online", list, cap) < 0 ||
	    parse_node_list(list, mask) != 0) {
		memset(mask, 0, sizeof(*mask));
		mask->w[0] = 1;
		snprintf(list, cap, "0");
	}
	list[strcspn(list, "\n")] = 0;
}

static unsigned node_count(const node_mask *mask)
{
	unsigned n = 0;

	for (size_t i = 0; i < MASK_WORDS; i++)
		n += (unsigned)__builtin_popcountl(mask->w[i]);
	return n;
}

aql_status aql_pages_check_node(int node)
{
	node_mask online, allowed;
	char list[256];

	online_nodes(&online, list, sizeof(list));
	if (node < 0 || !mask_has(&online, (unsigned long)node))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"NUMA node %d does not exist (nodes online: %s)", node, list);
	/* A cpuset may forbid nodes that exist; mbind would then fail. */
	if (syscall(SYS_get_mempolicy, NULL, allowed.w, (unsigned long)NODE_BITS + 1, NULL,
		    (unsigned long)MPOL_F_MEMS_ALLOWED) == 0 &&
	    !mask_has(&allowed, (unsigned long)node))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"NUMA node %d is outside this process's cpuset (nodes online: %s)",
				node, list);
	return AQL_OK;
}

aql_status aql_pages_bind(void *addr, size_t size, int node)
{
	node_mask mask = { { 0 } }, online;
	char list[256];
	int err;

	mask.w[node / (8 * sizeof(long))] = 1ul << (node % (8 * sizeof(long)));
	/* maxnode counts one more than the mask's bits (a historical quirk). */
	if (syscall(SYS_mbind, addr, size, (unsigned long)MPOL_BIND, mask.w,
		    (unsigned long)NODE_BITS + 1, 0ul) == 0)
		return AQL_OK;
	err = errno;
	online_nodes(&online, list, sizeof(list));
	if ((err == ENOSYS || err == EPERM) && node_count(&online) == 1)
		return AQL_OK;
	return aql_fail_errno(AQL_ERR_SYSTEM, err, "mbind of %zu bytes to NUMA node %d", size,
			      node);
}

/* Bytes this process has locked already, from VmLck; 0 if unknown. */
static unsigned long long locked_kib(void)
{
	char buf[4096], *p;

	if (read_small("/proc/self/status", buf, sizeof(buf)) < 0 ||
	    !(p = strstr(buf, "VmLck:")))
		return 0;
	return strtoull(p + 6, NULL, 10);
}

static aql_status pin_failed(int err, size_t size)
{
	struct rlimit rl;
	char limit[64];

	if (err != ENOMEM && err != EPERM)
		return aql_fail_errno(AQL_ERR_NOMEM, err, "pinning %zu bytes with mlock", size);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		snprintf(limit, sizeof(limit), "unknown");
	else if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(limit, sizeof(limit), "unlimited");
	else
		snprintf(limit, sizeof(limit), "%llu bytes (%llu KiB)",
			 (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_cur / 1024);
	return aql_fail(AQL_ERR_NOMEM,
			"pinning %zu bytes with mlock failed (%s): RLIMIT_MEMLOCK is %s and %llu KiB "
			"are locked already; raise it with `ulimit -l <KiB>`, a memlock line in "
			"/etc/security/limits.conf or LimitMEMLOCK= in a systemd unit, or create "
			"the pool without AQL_MEM_PINNED",
			size, strerror(err), limit, locked_kib());
}

aql_status aql_pages_commit(void *addr, size_t size, int pin)
{
	int err;

	if (mprotect(addr, size, PROT_READ | PROT_WRITE) != 0)
		return aql_fail_errno(AQL_ERR_NOMEM, errno, "committing %zu bytes at %p", size,
				      addr);
	/* The system call itself: sanitizers turn the libc mlock() into a no-op. */
	if (!pin || syscall(SYS_mlock, addr, size) == 0)
		return AQL_OK;
	err = errno;
	/* Give back whatever the failed mlock faulted in. */
	syscall(SYS_munlock, addr, size);
	madvise(addr, size, MADV_DONTNEED);
	mprotect(addr, size, PROT_NONE);
	return pin_failed(err, size);
}
