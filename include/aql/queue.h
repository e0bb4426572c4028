/* SPDX-License-Identifier: MIT */
/*
 * User-mode queues: a power-of-two ring of 64-byte packet slots plus a
 * control block laid out as amd_queue_t, so the same memory can be handed
 * to a GPU command processor. Submission is four steps, each one call:
 * reserve a slot, write the body, publish the header, ring the doorbell.
 * aql_queue_submit() does all four for one prepared packet.
 */
#ifndef AQL_QUEUE_H
#define AQL_QUEUE_H

#include <stdint.h>
#include <aql/compat.h>
#include <aql/packet.h>
#include <aql/signal.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_agent aql_agent;

/* hsa_queue_t */
typedef struct aql_hsa_queue {
	uint32_t type;			/* enum aql_queue_type */
	uint32_t features;		/* bit 0 kernel dispatch, bit 1 agent dispatch */
	uint64_t base_address;		/* the ring */
	uint64_t doorbell_signal;	/* aql_signal address */
	uint32_t size;			/* packets, a power of two */
	uint32_t reserved1;
	uint64_t id;
} aql_hsa_queue;

/* amd_queue_t: the control block a command processor reads. */
typedef struct __attribute__((aligned(64))) aql_amd_queue {
	aql_hsa_queue hsa;
	uint32_t caps;
	uint32_t reserved1[3];
	uint64_t write_dispatch_id;
	uint32_t group_segment_aperture_base_hi;
	uint32_t private_segment_aperture_base_hi;
	uint32_t max_cu_id;
	uint32_t max_wave_id;
	uint64_t max_legacy_doorbell_dispatch_id_plus_1;
	uint32_t legacy_doorbell_lock;
	uint32_t reserved2[9];
	uint64_t read_dispatch_id;
	uint32_t read_dispatch_id_field_base_byte_offset;
	uint32_t compute_tmpring_size;
	uint32_t scratch_resource_descriptor[4];
	uint64_t scratch_backing_memory_location;
	uint64_t scratch_backing_memory_byte_size;
	uint32_t scratch_wave64_lane_byte_size;
	uint32_t queue_properties;	/* AQL_AMD_QUEUE_PROPERTY_* */
	uint64_t scratch_last_used_index;
	uint64_t queue_inactive_signal;
	uint32_t reserved4[14];
} aql_amd_queue;

AQL_STATIC_ASSERT(sizeof(aql_amd_queue) == 256, "amd_queue_t is 256 bytes");

enum aql_amd_queue_property {
	AQL_AMD_QUEUE_PROPERTY_IS_PTR64 = 1u << 1,
	/* Set from AQL_QUEUE_PROFILING; the CPU agent and an AMD GPU's
	 * command processor read it per packet, so setting or clearing it
	 * later turns the stamps on or off. */
	AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING = 1u << 3,
};

enum aql_queue_type {
	AQL_QUEUE_MULTI = 0,	/* any number of producer threads */
	AQL_QUEUE_SINGLE = 1,	/* one producer thread at a time */
};

/*
 * A queue's scheduling priority among its agent's queues (see
 * aql_queue_set_priority()); the values are HSA's hsa_amd_queue_priority_t.
 */
enum aql_queue_priority {
	AQL_QUEUE_PRIORITY_LOW = 0,
	AQL_QUEUE_PRIORITY_NORMAL = 1,
	AQL_QUEUE_PRIORITY_HIGH = 2,
};

enum aql_queue_flag {
	/* Write start_ts/end_ts in completion signals, in the agent's own
	 * ticks: aql_signal_dispatch_time() gives them as nanoseconds. */
	AQL_QUEUE_PROFILING = 1u << 0,
	/* Start at this priority rather than NORMAL; at most one of them.
	 * Flags, not a config field, so that aql_queue_config keeps its
	 * size for programs built against an older header. */
	AQL_QUEUE_LOW_PRIORITY = 1u << 1,
	AQL_QUEUE_HIGH_PRIORITY = 1u << 2,
	/*
	 * NVIDIA agents only: a persistent kernel on the GPU (the resident
	 * processor, nv/README.md) owns the ring and runs its packets in
	 * ring order, polling it from the device: producers submit as
	 * always (reserve, body, header last, doorbell) and no packet costs
	 * a driver call. Kernels of PTX code objects loaded on the agent
	 * before the queue is created run inside it; other packets fall
	 * back, in order, to the translating path and are counted
	 * (aql_queue_resident_fallbacks()). The kernel holds
	 * AQL_QUEUE_RESIDENT_BLOCKS() blocks (AQL_QUEUE_RESIDENT_DEFAULT_BLOCKS
	 * if not given) of 256 threads each until the queue is destroyed;
	 * other work of the program gets the SMs it leaves. Other agents
	 * refuse the flag (AQL_ERR_UNSUPPORTED).
	 */
	AQL_QUEUE_RESIDENT = 1u << 3,
};

/* Flags bits 8-15: the resident processor's blocks, 1 to 255. */
#define AQL_QUEUE_RESIDENT_BLOCKS(n) (((uint32_t)(n) & 0xffu) << 8)
#define AQL_QUEUE_RESIDENT_DEFAULT_BLOCKS 8u

typedef struct aql_queue aql_queue;

/*
 * Called once when the queue stops: on the agent's thread for a malformed
 * packet (message names the packet id and the problem), on the thread
 * that ran a kernel that faulted (on a CPU agent, a waiter or producer
 * may run one: aql_signal_wait(), aql_queue_reserve()), or on a
 * producer's thread when a slot it reserved never became free (see
 * aql_queue_reserve()). It may inactivate the queue; destroying it there
 * fails with AQL_ERR_INVALID_ARG.
 */
typedef void (*aql_queue_error_fn)(aql_queue *queue, aql_status status,
				   const char *message, void *user);

typedef struct aql_queue_config {
	uint32_t size;			/* packets, power of two; 0 means 4096 */
	enum aql_queue_type type;
	uint32_t flags;			/* enum aql_queue_flag */
	uint64_t full_timeout_ns;	/* wait for a free slot; 0 means 1 s */
	aql_queue_error_fn error_callback;
	void *error_user;
} aql_queue_config;

/*
 * The producer-side view of a queue. Fields are read by the inline
 * submission helpers below; treat them as read-only.
 */
struct aql_queue {
	aql_amd_queue *amd;
	aql_packet *ring;
	aql_signal *doorbell;
	uint64_t mask;
	uint32_t size;
	enum aql_queue_type type;
	uint64_t full_timeout_ns;
	/* A lower bound of read_dispatch_id, so the fast path rarely touches
	 * the line the processor writes. Atomic: shared by MULTI producers. */
	uint64_t cached_read;
	/* Non-zero once the queue stopped on an error (aql_status). */
	uint32_t error;
};

/*
 * Create a queue on an agent. config may be NULL for the defaults.
 * Errors: AQL_ERR_INVALID_ARG (size not a power of two, too large for the
 * agent, unknown type or flag, both priority flags), AQL_ERR_NOMEM,
 * AQL_ERR_SYSTEM (the agent's processor could not start), and for a
 * priority flag those of aql_queue_set_priority(). Thread safe.
 */
aql_status aql_queue_create(aql_agent *agent, const aql_queue_config *config,
			    aql_queue **out);

/*
 * How many packets of a resident queue (AQL_QUEUE_RESIDENT) its processor
 * handed to the translating path so far, into *count: dispatches of
 * kernels it has no device-function form of (a cubin, a code object
 * loaded after the queue was created, a kernel with static LDS), of
 * work-groups larger than its block (or, for kernels that may call
 * aql_barrier(), of another size), or with dynamic shared memory; and
 * every packet other than dispatches and barriers. Errors:
 * AQL_ERR_INVALID_ARG (NULL argument, a queue that is not resident).
 * Thread safe; the count only grows.
 */
aql_status aql_queue_resident_fallbacks(aql_queue *queue, uint64_t *count);

/*
 * A profiling stamp of agent (start_ts or end_ts of a completion signal
 * a queue of agent wrote) as CLOCK_MONOTONIC nanoseconds, the clock of
 * aql's timeouts and of the CPU agent's stamps. The CPU agent stamps in
 * those already (the identity); an AMD GPU stamps its timestamp counter's
 * ticks (100 MHz on MI200 and MI300), converted through clock samples
 * KFD takes together (AMDKFD_IOC_GET_CLOCK_COUNTERS), as ROCr does: the
 * answer is within a few microseconds. Errors: AQL_ERR_INVALID_ARG (NULL
 * agent or ns), AQL_ERR_DEVICE (the driver gave no clock sample, named).
 * Thread safe.
 */
aql_status aql_agent_ticks_to_ns(aql_agent *agent, uint64_t tick, uint64_t *ns);

/*
 * The start and end stamps of a packet that completed signal on a
 * profiling queue (AQL_QUEUE_PROFILING) of agent, in nanoseconds as
 * aql_agent_ticks_to_ns() gives them; the end is converted first, so
 * that a fresh clock sample cannot stretch the interval. A stamp of 0
 * (none written: no profiling, or no completion yet) stays 0. Read it
 * after a wait on signal saw the completion; a later packet completing
 * the same signal overwrites the stamps. Errors: AQL_ERR_INVALID_ARG
 * (NULL agent, signal, start_ns or end_ns), those of
 * aql_agent_ticks_to_ns(). Thread safe.
 */
aql_status aql_signal_dispatch_time(aql_agent *agent, const aql_signal *signal,
				    uint64_t *start_ns, uint64_t *end_ns);

/*
 * Stop the queue and free it. Safe with packets in flight: a kernel already
 * running finishes, packets not yet started are dropped and their completion
 * signals are set to -1 so that no waiter hangs. Destroy hooks
 * (aql_queue_add_destroy_hook()) run first. No other thread may use the
 * queue during or after the call. NULL is accepted.
 */
aql_status aql_queue_destroy(aql_queue *queue);

/*
 * A layer above libaql that runs work beside a queue, in its order
 * (libaql-mpi's communication agent), ends that work when the queue is
 * destroyed through a destroy hook.
 */
typedef void (*aql_queue_destroy_fn)(aql_queue *queue, void *user);

/*
 * Have fn(queue, user) run when queue is destroyed: first in
 * aql_queue_destroy(), on its thread, while the queue still works (fn may
 * put it into its error state with aql_queue_set_error(), whose error
 * callback then runs on that thread), the hook added last first. fn must
 * not destroy the queue nor add hooks to it. Errors: AQL_ERR_INVALID_ARG
 * (NULL queue or fn), AQL_ERR_NOMEM. Thread safe; not concurrently with
 * aql_queue_destroy() of the queue.
 */
aql_status aql_queue_add_destroy_hook(aql_queue *queue, aql_queue_destroy_fn fn, void *user);

/*
 * Remove the hook added with fn and user (the latest, if added more than
 * once); none, or one that already ran: nothing happens. Errors:
 * AQL_ERR_INVALID_ARG (NULL queue or fn). Thread safe, and from a hook;
 * not concurrently with aql_queue_destroy() of the queue from another
 * thread.
 */
aql_status aql_queue_remove_destroy_hook(aql_queue *queue, aql_queue_destroy_fn fn, void *user);

/*
 * Stop the queue's packet processor for good, as destroy does, but keep
 * the queue (ring, indices, doorbell) until aql_queue_destroy(): a kernel
 * already running finishes, packets not yet started are dropped with
 * their completion signals set to -1, and later packets are never run.
 * The queue enters its error state (AQL_ERR_QUEUE_ERROR, "inactivated")
 * without calling the error callback, so submissions fail. HSA's
 * hsa_queue_inactivate(). A second call does nothing.
 * Errors: AQL_ERR_INVALID_ARG (queue NULL). Not concurrently with
 * aql_queue_destroy() of the queue.
 */
aql_status aql_queue_inactivate(aql_queue *queue);

/*
 * Put the queue into its error state for work that runs beside it in its
 * order (libaql-mpi's communication agent), as a failed packet does: the
 * error callback runs with status and message, aql_queue_error() returns
 * them, and the packet processor stops as aql_queue_inactivate() stops it
 * (packets not yet started are dropped, their completion signals set to
 * -1). A queue already in its error state keeps its first error.
 * Errors: AQL_ERR_INVALID_ARG (NULL, status AQL_OK). Thread safe; not
 * concurrently with aql_queue_destroy() of the queue.
 */
aql_status aql_queue_set_error(aql_queue *queue, aql_status status, const char *message);

/*
 * The queue's error state: AQL_OK, or the status it stopped with; *message
 * (if not NULL) gets the reason. Thread safe.
 */
aql_status aql_queue_error(aql_queue *queue, const char **message);

/*
 * Set the queue's priority among its agent's queues; setting the current
 * one does nothing. Packets already running finish as they were.
 * - AMD GPU: KFD's UPDATE_QUEUE with priority 0, 7 or 11 of its 0-15, as
 *   ROCr maps HSA's low, normal and high; the command processor picks the
 *   queue's dispatches and waves by it.
 * - CPU: the nice value of the queue's packet processor thread: the one
 *   it started with (the creating thread's), LOW 10 above it, HIGH 10
 *   below (within -20..19). Work-groups that the agent's shared workers
 *   run keep theirs.
 * - NVIDIA: only at creation, by the flags: the queue's CUDA stream takes
 *   the context's greatest priority for HIGH, its least for LOW (CUDA's
 *   default, so the same as NORMAL), and keeps it: a change is
 *   AQL_ERR_UNSUPPORTED.
 * Errors: AQL_ERR_INVALID_ARG (queue NULL, unknown priority),
 * AQL_ERR_UNSUPPORTED (the agent has no queue priorities), AQL_ERR_SYSTEM
 * (CPU: raising a thread's priority, LOW back to NORMAL too, needs
 * CAP_SYS_NICE or an RLIMIT_NICE allowance), AQL_ERR_DEVICE (the driver
 * refused), AQL_ERR_QUEUE_ERROR (the queue was inactivated). After an
 * error the queue keeps its priority.
 * Thread safe; calls on one queue take turns. Not during
 * aql_queue_destroy() of the queue.
 */
aql_status aql_queue_set_priority(aql_queue *queue, enum aql_queue_priority priority);

/* Slow paths of aql_queue_reserve(); see there. */
aql_status aql_queue_wait_space(aql_queue *queue, uint64_t first, uint32_t n,
				int reserved);
aql_status aql_queue_report_error(aql_queue *queue);

/*
 * The read index (acquire), for a producer that writes packets itself and
 * polls the read index for room, as HSA programs do
 * (hsa_queue_load_read_index_* is this in aql's libhsa-runtime64). While
 * the ring is full (write_dispatch_id - read_dispatch_id >= size) and the
 * agent's packet processor runs on the CPUs, the poll leaves it the CPU:
 * the call waits as aql_queue_reserve() does (polls for a learnt while,
 * then sleeps until the processor frees room, or runs packets itself
 * while the processor is parked) until the read index moved, for at most
 * timeout_ns, and returns it then. Otherwise (room, a hardware processor,
 * a queue in its error state) it returns at once. The caller checks the
 * answer as it would a plain load's. Thread safe.
 */
uint64_t aql_queue_load_read_index(aql_queue *queue, uint64_t timeout_ns);

static inline aql_packet *aql_queue_slot(aql_queue *queue, uint64_t id)
{
	return &queue->ring[id & queue->mask];
}

/*
 * Reserve n consecutive packet ids (1 <= n <= size); *first gets the first.
 * The slots are INVALID and owned by the caller until it publishes them.
 *
 * MULTI queues reserve with one 64-bit fetch-add on write_dispatch_id. A
 * full queue is checked before the add, so the common full case waits (up
 * to full_timeout_ns) and fails with AQL_ERR_QUEUE_FULL having reserved
 * nothing. Producers racing past that check may own ids beyond the ring;
 * they wait for the processor to free them. If that wait times out too,
 * the queue enters the error state, since an id it owns can never be filled.
 * SINGLE queues use a plain load and store.
 *
 * On a CPU agent, a producer that waits for room while the queue's
 * processor thread is parked (or woken and not yet running) runs the
 * packets at the head itself, as the processor would, until it has room
 * for n and a few more: beside busy threads a woken processor may wait a
 * time slice for a CPU. (Where the processor parked on the producer's
 * CPU, only after 100 us: woken, it preempts the producer.) So a kernel
 * there must not wait for what its producer does after a submission that
 * found the ring full, nor for a lock the producer holds meanwhile; the
 * reserve may return later than full_timeout_ns by the run time of such
 * packets, and a kernel fault there calls the error callback on the
 * producer's thread. It runs none from inside a kernel, with under 1 ms
 * of the timeout left, on an agent made with
 * aql_host_agent_config.no_wait_help, nor malformed packets or barriers
 * whose condition is unmet (aql_signal_wait() has the same rules).
 *
 * Errors: AQL_ERR_INVALID_ARG (n), AQL_ERR_QUEUE_FULL, AQL_ERR_QUEUE_ERROR.
 * Thread safe for MULTI queues; one thread at a time for SINGLE queues.
 */
static inline aql_status aql_queue_reserve(aql_queue *queue, uint32_t n,
					   uint64_t *first)
{
	uint64_t *wp = &queue->amd->write_dispatch_id;
	uint64_t read = __atomic_load_n(&queue->cached_read, __ATOMIC_ACQUIRE);
	uint64_t w = __atomic_load_n(wp, __ATOMIC_RELAXED);
	aql_status st;

	if (__atomic_load_n(&queue->error, __ATOMIC_RELAXED))
		return aql_queue_report_error(queue);
	if (n - 1u >= queue->size)
		return aql_queue_wait_space(queue, w, n, 0);
	if (w + n - read > queue->size) {
		st = aql_queue_wait_space(queue, w, n, 0);
		if (st != AQL_OK)
			return st;
	}
	if (queue->type == AQL_QUEUE_SINGLE) {
		__atomic_store_n(wp, w + n, __ATOMIC_RELAXED);
	} else {
		w = __atomic_fetch_add(wp, n, __ATOMIC_RELAXED);
		read = __atomic_load_n(&queue->cached_read, __ATOMIC_ACQUIRE);
		if (w + n - read > queue->size) {
			st = aql_queue_wait_space(queue, w, n, 1);
			if (st != AQL_OK)
				return st;
		}
	}
	*first = w;
	return AQL_OK;
}

/*
 * Tell the agent that packets up to id are published. Stores id (the last
 * valid packet, not id + 1) with release order. A hardware doorbell is one
 * MMIO store; a host doorbell is a signal store that wakes a parked packet
 * processor. Thread safe.
 */
static inline void aql_queue_ring_doorbell(aql_queue *queue, uint64_t id)
{
	aql_signal *db = queue->doorbell;

	if (db->kind == AQL_SIGNAL_KIND_DOORBELL)
		__atomic_store_n((uint64_t *)(uintptr_t)db->hardware_doorbell_ptr,
				 id, __ATOMIC_RELEASE);
	else
		aql_signal_store(db, (int64_t)id, AQL_RELEASE);
}

/*
 * Submit one prepared packet: reserve, aql_packet_store(), ring. Same
 * errors and thread safety as aql_queue_reserve().
 */
static inline aql_status aql_queue_submit(aql_queue *queue, const aql_packet *packet)
{
	uint64_t id = 0;
	aql_status st = aql_queue_reserve(queue, 1, &id);

	if (st != AQL_OK)
		return st;
	aql_packet_store(aql_queue_slot(queue, id), packet);
	aql_queue_ring_doorbell(queue, id);
	return AQL_OK;
}

#ifdef __cplusplus
}
#endif

#endif
