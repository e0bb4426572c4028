/* SPDX-License-Identifier: MIT */
/*
 * The state of libhsa-runtime64.so.1, aql's HSA runtime layer: the init
 * reference count, the agent table, how HSA handles encode aql objects,
 * and the status helpers every entry point uses. The layer only
 * translates; queues, signals, packets, memory and code objects are
 * libaql's (its public API only).
 *
 * Handles:
 *   hsa_agent_t.handle          address of a struct hsa_rt_agent in hsa_rt.agents
 *   hsa_region_t.handle,
 *   hsa_amd_memory_pool_t.handle address of a struct hsa_rt_region in its
 *                               agent's regions[] (ROCr too gives a region
 *                               and a pool of the same memory one handle)
 *   hsa_isa_t.handle            address of the struct hsa_rt_isa of an agent
 *   hsa_signal_t.handle         the aql_signal (amd_signal_t layout)
 *   hsa_queue_t *               the aql_queue's amd_queue_t, whose first
 *                               member is the hsa_queue_t (a soft queue's
 *                               is laid out alike, with no aql_queue)
 * Table entries are checked by address range, so a stale or foreign
 * handle is refused rather than followed.
 */
#ifndef AQL_HSA_IMPL_H
#define AQL_HSA_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <aql/agent.h>
#include <aql/mem.h>
#include <aql/status.h>

/* CPU agent plus GPUs; agents beyond are left out (hsa_init says so on stderr). */
#define HSA_RT_MAX_AGENTS 32u
#define HSA_RT_MAX_REGIONS 4u

/*
 * Queues per agent (HSA_AGENT_INFO_QUEUES_MAX), enforced by
 * hsa_queue_create: ROCr's default for a GPU agent (GpuAgent's
 * max_queues_), and a power of two no smaller than the minimum size, so
 * a program that takes it for a queue size gets a valid one. Each CPU
 * agent queue is a processor thread, each AMD one a KFD queue.
 */
#define HSA_RT_QUEUES_MAX 128u
/* Smallest queue (HSA_AGENT_INFO_QUEUE_MIN_SIZE), ROCr's minAqlSize_;
 * smaller requests get this size, as ROCr's GpuAgent::QueueCreate does. */
#define HSA_RT_QUEUE_MIN_SIZE 64u

/* Where a region's memory comes from. */
enum hsa_rt_region_kind {
	HSA_RT_REGION_SYSTEM_FINE,	/* host memory, fine grained; kernargs */
	HSA_RT_REGION_SYSTEM_COARSE,	/* host memory, coarse grained */
	HSA_RT_REGION_AGENT,		/* the agent's own memory (aql_agent_mem_alloc) */
};

/*
 * Timestamps (HSA_SYSTEM_INFO_TIMESTAMP, signal wait timeouts, profiling)
 * are CLOCK_MONOTONIC nanoseconds, the clock aql's CPU agent stamps
 * completion signals with; a GPU's stamps are converted to it
 * (aql_signal_dispatch_time, aql_agent_ticks_to_ns).
 */
#define HSA_RT_TIMESTAMP_FREQUENCY 1000000000u
/* Memory regions and pools hand out whole pages (RUNTIME_ALLOC_GRANULE and
 * RUNTIME_ALLOC_ALIGNMENT of every region and pool). */
#define HSA_RT_ALLOC_GRANULE 4096u

struct hsa_rt_agent;

struct hsa_rt_region {
	struct hsa_rt_agent *owner;
	enum hsa_rt_region_kind kind;
	uint32_t global_flags;		/* hsa_region_global_flag_t bits */
	uint64_t size;			/* bytes the region reports */
	uint64_t alloc_max;		/* largest allocation (ALLOC_MAX_SIZE) */
};

struct hsa_rt_isa {
	struct hsa_rt_agent *owner;
	/* "amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-", "nvptx64-nvidia-cuda--sm_90",
	 * "x86_64-unknown-linux-gnu--x86_64" */
	char name[96];
};

struct hsa_rt_agent {
	aql_agent *agent;
	aql_agent_info info;
	hsa_device_type_t device_type;
	uint8_t owned;			/* opened by hsa_init, destroyed at the last shut_down */
	uint32_t queues;		/* live HSA queues, up to HSA_RT_QUEUES_MAX; atomic */
	uint32_t region_count;
	struct hsa_rt_region regions[HSA_RT_MAX_REGIONS];
	struct hsa_rt_isa isa;
};

struct hsa_rt {
	uint32_t refcount;		/* hsa_init() minus hsa_shut_down(); atomic */
	uint32_t agent_count;		/* valid while refcount > 0 */
	struct hsa_rt_agent agents[HSA_RT_MAX_AGENTS];
};

extern struct hsa_rt hsa_rt;

/*
 * Record status with a reason for this thread and return it: the next
 * hsa_status_string() of the same status on this thread gives ROCr's text
 * followed by the reason. fmt is printf-like.
 */
hsa_status_t hsa_rt_fail(hsa_status_t status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The HSA status for a libaql failure (st != AQL_OK), recorded with
 * aql_error_message() as the reason. generic is what st means where no
 * more precise HSA code fits (AQL_ERR_INVALID_ARG, AQL_ERR_NOT_FOUND).
 */
hsa_status_t hsa_rt_from_aql(aql_status st, hsa_status_t generic);

/*
 * HSA_STATUS_SUCCESS while the runtime is initialised, else
 * HSA_STATUS_ERROR_NOT_INITIALIZED (recorded). Every entry point but
 * hsa_init() and hsa_status_string() starts with it, as ROCr's do.
 */
static inline hsa_status_t hsa_rt_check_init(void)
{
	if (__atomic_load_n(&hsa_rt.refcount, __ATOMIC_ACQUIRE) != 0)
		return HSA_STATUS_SUCCESS;
	return hsa_rt_fail(HSA_STATUS_ERROR_NOT_INITIALIZED, "hsa_init() has not been called");
}

/* Return early from an entry point when the runtime is not initialised. */
/* The agent's smallest queue: HSA_RT_QUEUE_MIN_SIZE, or its largest if less. */
static inline uint32_t hsa_rt_queue_min_size(const struct hsa_rt_agent *a)
{
	return a->info.max_queue_size < HSA_RT_QUEUE_MIN_SIZE ? a->info.max_queue_size
							       : HSA_RT_QUEUE_MIN_SIZE;
}

#define HSA_RT_CHECK_INIT()                                                    \
	do {                                                                   \
		hsa_status_t init_st_ = hsa_rt_check_init();                   \
		if (init_st_ != HSA_STATUS_SUCCESS)                            \
			return init_st_;                                       \
	} while (0)

/*
 * An entry point aql does not provide: record why and return status (the
 * code the HSA specification gives for the case). what names the
 * function or feature.
 */
hsa_status_t hsa_rt_unprovided(hsa_status_t status, const char *what);

/*
 * A set of live objects, so that a handle is checked before it is
 * followed: signals, signal groups, queues, executables, their symbols,
 * code object readers, blocks of agent memory (hsa/set.c).
 */
struct hsa_rt_set {
	pthread_mutex_t lock;
	void **slots;
	size_t cap, count, used;	/* used: count plus tombstones */
};

#define HSA_RT_SET_INIT { PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0 }

/* Add item (not NULL, not yet in the set): 0, or -1 when out of memory. */
int hsa_rt_set_add(struct hsa_rt_set *set, void *item);
/* Remove item: 1 if it was there, else 0 (the handle was not live). */
int hsa_rt_set_remove(struct hsa_rt_set *set, const void *item);
/* 1 if item is live. */
int hsa_rt_set_has(struct hsa_rt_set *set, const void *item);
/* A live item that match() accepts for key, or NULL; match runs under the set's lock. */
void *hsa_rt_set_find(struct hsa_rt_set *set, int (*match)(const void *item, const void *key),
		      const void *key);

/* Remove and return any live item, or NULL when the set is empty. */
void *hsa_rt_set_pop(struct hsa_rt_set *set);

/*
 * The last hsa_shut_down() releases what the program left, as ROCr does:
 * the asynchronous handler thread and queues first (their processors
 * stop), then executables and readers, signal groups and signals, and
 * blocks of agent memory, before the agents are closed. Handles to them
 * are dead afterwards.
 */
void hsa_rt_release_async(void);
void hsa_rt_release_queues(void);
void hsa_rt_release_executables(void);
void hsa_rt_release_signals(void);
void hsa_rt_release_memory(void);

/*
 * hsa_memory_allocate() from region r and hsa_memory_free(), without the
 * init and handle checks: for memory the layer itself places in a region.
 */
hsa_status_t hsa_rt_allocate(struct hsa_rt_region *r, size_t size, void **ptr);
hsa_status_t hsa_rt_free(void *ptr);

/* 1 if signal was made by hsa_signal_create() and not destroyed since. */
int hsa_rt_signal_live(hsa_signal_t signal);

/* The table entry of a handle, or NULL when it is not one. */
struct hsa_rt_agent *hsa_rt_agent_from(hsa_agent_t agent);
struct hsa_rt_region *hsa_rt_region_from(uint64_t handle);
struct hsa_rt_isa *hsa_rt_isa_from(hsa_isa_t isa);

static inline hsa_agent_t hsa_rt_agent_handle(const struct hsa_rt_agent *a)
{
	return (hsa_agent_t){ (uint64_t)(uintptr_t)a };
}

static inline hsa_region_t hsa_rt_region_handle(const struct hsa_rt_region *r)
{
	return (hsa_region_t){ (uint64_t)(uintptr_t)r };
}

static inline hsa_amd_memory_pool_t hsa_rt_pool_handle(const struct hsa_rt_region *r)
{
	return (hsa_amd_memory_pool_t){ (uint64_t)(uintptr_t)r };
}

static inline hsa_isa_t hsa_rt_isa_handle(const struct hsa_rt_isa *isa)
{
	return (hsa_isa_t){ (uint64_t)(uintptr_t)isa };
}

#endif
