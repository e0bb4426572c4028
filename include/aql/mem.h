/* SPDX-License-Identifier: MIT */
/*
 * Device-visible host memory pools, the way HSA memory pools present them:
 * page-aligned, optionally pinned and backed by huge pages, placed on a
 * NUMA node, and of a kind (fine or coarse grained) that every allocation
 * records together with the agents that may access it.
 *
 * A pool reserves one contiguous range of address space when it is created
 * and commits it from the bottom up as it grows; nothing it has committed
 * goes back to the system before the pool is destroyed, so memory freed is
 * reused without system calls. The range is cut into 64 KiB chunks.
 * Allocations of up to AQL_MEM_MAX_CLASS_SIZE bytes take a slot of a size
 * class (powers of two from 64 B, slots aligned to their size) from a
 * lock-free list, so kernarg segments, signals and channel headers cost no
 * system call and no lock. Larger allocations take a run of whole chunks.
 * aql_mem_free() finds the pool from the pointer alone.
 *
 * Pinning uses mlock(), which counts against RLIMIT_MEMLOCK unless the
 * process has CAP_IPC_LOCK. When the limit is too low, the allocation that
 * would cross it fails with AQL_ERR_NOMEM and a message naming the limit,
 * the bytes asked for, and the ways to raise it: `ulimit -l <KiB>` in the
 * shell that starts the program, a "memlock" line in
 * /etc/security/limits.conf (e.g. "@users - memlock 4194304"), or
 * LimitMEMLOCK= in a systemd unit; or create the pool without
 * AQL_MEM_PINNED. The default pools pin, so a process with the common
 * 8 MiB limit and no CAP_IPC_LOCK can pin about that much from them.
 *
 * On the CPU agent fine and coarse grained memory behave alike (host memory
 * is coherent); the kind matters once a GPU agent maps the pool.
 */
#ifndef AQL_MEM_H
#define AQL_MEM_H

#include <stddef.h>
#include <stdint.h>
#include <aql/agent.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_mem_kind {
	AQL_MEM_FINE_GRAINED = 0,	/* coherent while a kernel runs */
	AQL_MEM_COARSE_GRAINED,		/* coherent at dispatch boundaries only */
};

enum aql_mem_pool_flag {
	/* mlock() every committed page: resident, never swapped or moved. */
	AQL_MEM_PINNED = 1u << 0,
	/*
	 * Transparent huge pages: the pool commits 2 MiB-aligned chunks and
	 * marks its range MADV_HUGEPAGE, so the kernel backs it with 2 MiB
	 * pages when it can find them. When THP is unavailable (kernel without
	 * it, or /sys/kernel/mm/transparent_hugepage/enabled is "never") the
	 * pool still works on normal pages and its flags, as reported by
	 * aql_mem_query() and aql_mem_pool_get_stats(), lack this bit.
	 */
	AQL_MEM_HUGE_PAGES = 1u << 1,
};

#define AQL_NUMA_ANY (-1)

/* Slots: 64 B to 32 KiB; larger allocations take runs of 64 KiB chunks. */
#define AQL_MEM_MIN_CLASS_SIZE 64u
#define AQL_MEM_MAX_CLASS_SIZE (32u << 10)
#define AQL_MEM_CHUNK_SIZE (64u << 10)
/* Largest alignment aql_mem_alloc() accepts (the huge page size). */
#define AQL_MEM_MAX_ALIGN ((size_t)2 << 20)
/* Address space a pool reserves by default, and at most. */
#define AQL_MEM_DEFAULT_MAX_SIZE ((size_t)16 << 30)
#define AQL_MEM_MAX_POOL_SIZE ((size_t)128 << 30)
/* Pools that can exist at once, the default ones included. */
#define AQL_MEM_MAX_POOLS 64u
/* Entries of aql_mem_pool_config.agents. */
#define AQL_MEM_MAX_AGENTS 64u

typedef struct aql_mem_pool aql_mem_pool;

typedef struct aql_mem_pool_config {
	enum aql_mem_kind kind;
	uint32_t flags;			/* enum aql_mem_pool_flag */
	/*
	 * Node whose memory backs the pool (mbind MPOL_BIND: pages never
	 * spill to another node), or AQL_NUMA_ANY for no binding.
	 */
	int32_t numa_node;
	/*
	 * With numa_node AQL_NUMA_ANY: bind to this agent's node
	 * (aql_agent_info.numa_node; -1 there means no binding).
	 */
	aql_agent *near_agent;
	aql_agent *const *agents;	/* agents that may access; NULL, 0: all */
	uint32_t agent_count;
	/*
	 * Address space to reserve, rounded up to 2 MiB; it bounds the pool's
	 * size. 0: AQL_MEM_DEFAULT_MAX_SIZE. Reserving costs no memory.
	 */
	size_t max_size;
} aql_mem_pool_config;

/*
 * Create a pool. config may be NULL for a fine-grained, pinned pool on any
 * node, open to every agent. Nothing is committed until the first
 * allocation. Errors: AQL_ERR_INVALID_ARG (unknown kind or flag bits,
 * agent_count without agents or above AQL_MEM_MAX_AGENTS, a NULL agent,
 * max_size above AQL_MEM_MAX_POOL_SIZE, a NUMA node that does not exist or
 * that this process may not use: the message lists the nodes there are),
 * AQL_ERR_NOMEM (the reserve cannot be mapped, or AQL_MEM_MAX_POOLS pools
 * exist), AQL_ERR_SYSTEM (mbind failed). Thread safe.
 */
aql_status aql_mem_pool_create(const aql_mem_pool_config *config, aql_mem_pool **out);

/*
 * Destroy a pool and return its memory to the system. Refused with
 * AQL_ERR_INVALID_ARG while allocations are live (the message says how
 * many and how many bytes), and for the default pools. NULL is accepted.
 * Thread safe with respect to other pools; no call may use this pool or
 * its memory concurrently, and the handle is dead afterwards.
 */
aql_status aql_mem_pool_destroy(aql_mem_pool *pool);

/*
 * The process-wide pool of a kind: pinned, on any node, open to every
 * agent, AQL_MEM_DEFAULT_MAX_SIZE of address space; created on first use
 * and kept until exit. Errors: AQL_ERR_INVALID_ARG (kind or out),
 * AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_mem_pool_default(enum aql_mem_kind kind, aql_mem_pool **out);

/*
 * The process-wide unpinned pool of a kind, for bulk data: typed buffers'
 * host storage and the CPU agent's agent memory come from it, so that
 * their size is not bounded by RLIMIT_MEMLOCK (an agent that needs pages
 * locked for DMA registers them itself). Otherwise as
 * aql_mem_pool_default().
 */
aql_status aql_mem_pool_data(enum aql_mem_kind kind, aql_mem_pool **out);

/*
 * Allocate size bytes aligned to align (a power of two up to
 * AQL_MEM_MAX_ALIGN; 0 means no requirement). The block is aligned to at
 * least min(its usable size, AQL_MEM_CHUNK_SIZE), so blocks of a page or
 * more are page aligned. Contents are unspecified (zero the first time the
 * memory is used). Sizes up to AQL_MEM_MAX_CLASS_SIZE (alignment
 * included) take no lock and make no system call unless the pool must grow.
 * Errors: AQL_ERR_INVALID_ARG (pool or out NULL, the pool destroyed, size
 * 0, alignment not a power of two or too large, size beyond the pool's
 * reserve), AQL_ERR_NOMEM (the reserve is used up, or committing or pinning
 * failed; see RLIMIT_MEMLOCK at the top of this file). Thread safe.
 */
aql_status aql_mem_alloc(aql_mem_pool *pool, size_t size, size_t align, void **out);

/*
 * Free a block from aql_mem_alloc() of any pool; NULL is accepted. A
 * pointer that is not a live block's start (foreign, interior, already
 * freed) is a programming error: it is reported on stderr with the reason
 * and otherwise ignored. Double frees are caught unless two threads free
 * the same block at once. Thread safe.
 */
void aql_mem_free(void *ptr);

/*
 * As aql_mem_free(), but a bad pointer is returned as AQL_ERR_INVALID_ARG
 * (foreign, interior, or not allocated: the message says which) instead of
 * printed. NULL is AQL_OK. Thread safe.
 */
aql_status aql_mem_free_checked(void *ptr);

typedef struct aql_mem_info {
	aql_mem_pool *pool;
	enum aql_mem_kind kind;
	uint32_t flags;			/* the pool's effective flags */
	int32_t numa_node;		/* the pool's node; AQL_NUMA_ANY if unbound */
	void *base;			/* start of the block */
	size_t size;			/* usable size: the class or run size */
	size_t offset;			/* of the queried pointer in the block */
	aql_agent *const *agents;	/* may access; valid while the pool lives */
	uint32_t agent_count;		/* 0: every agent */
} aql_mem_info;

/*
 * Describe the live block containing ptr (its start or any byte inside).
 * Errors: AQL_ERR_NOT_FOUND (no pool owns ptr, or ptr lies in a pool but
 * in no live block: the message says which), AQL_ERR_INVALID_ARG (out
 * NULL). Thread safe; the answer is stale if the block is freed meanwhile.
 */
aql_status aql_mem_query(const void *ptr, aql_mem_info *out);

/*
 * 1 if agent may access the live block containing ptr, else 0 (also for a
 * pointer no pool owns and a NULL agent). Thread safe.
 */
int aql_mem_agent_may_access(const void *ptr, const aql_agent *agent);

typedef struct aql_mem_pool_stats {
	enum aql_mem_kind kind;
	uint32_t flags;			/* effective, as in aql_mem_info */
	int32_t numa_node;
	size_t reserved;		/* address space held */
	size_t committed;		/* bytes made usable; never shrinks */
	size_t pinned;			/* of those, locked by mlock() */
	size_t slab_bytes;		/* committed chunks cut into size classes */
	size_t large_bytes;		/* chunks in live large blocks */
	size_t bytes_in_use;		/* usable bytes of live blocks */
	size_t bytes_in_use_peak;
	uint64_t allocations_in_use;
	uint64_t allocations_in_use_peak;
	uint64_t grow_count;		/* times the pool committed more memory */
} aql_mem_pool_stats;

/*
 * Fill *out. The in-use counts are exact when no call on the pool runs
 * concurrently. Errors: AQL_ERR_INVALID_ARG (NULL, destroyed pool).
 * Thread safe.
 */
aql_status aql_mem_pool_get_stats(aql_mem_pool *pool, aql_mem_pool_stats *out);

#ifdef __cplusplus
}
#endif

#endif
