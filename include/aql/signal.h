/* SPDX-License-Identifier: MIT */
/*
 * Signals: 64-byte objects laid out as amd_signal_t, so a packet's
 * completion_signal (the signal's address) can be handed to a GPU command
 * processor unchanged.
 *
 * Waking blocked host waiters: amd_signal_t's two reserved words at offset 56
 * hold a futex sequence number and a waiter count, and its reserved1 a
 * sleep mark (0 none, 1 someone may sleep, 2 a wake-up is under way). No
 * device writes them. A waiter does "waiters++ (seq_cst RMW); read the
 * sequence; mark 1 (seq_cst exchange); re-check value; sleep only if the
 * sequence is unchanged". Every value-changing op is "update value; read
 * waiters with a seq_cst RMW; if non-zero, read the mark with a seq_cst
 * RMW; if it is not 0, mark 2, bump the sequence, wake, and put 0 back
 * unless a waiter marked 1 meanwhile". RMWs of one word are totally
 * ordered, and each reads from the one before it: an op whose RMW comes
 * after the waiter's sees it and wakes it (or sees 0, which only a wake
 * that began after the waiter read the sequence puts back, once it has
 * woken); a waiter whose RMW comes after the op's synchronises with it and
 * sees the new value. No wake-up is lost or left to a thread that may be
 * preempted, an op with no waiter makes no system call, and once a wake-up
 * is done the ops after it make none: a waiter woken but not yet running
 * (beside busy threads, for milliseconds) costs them nothing. The first
 * RMW hits the line the value op just wrote. An op that finds the mark
 * also checks the conditions the sleepers listed (aql/signal.c) and wakes
 * none when no condition is met by the value it finds: a waiter for the
 * last of many launches sleeps through the decrements of those before it.
 */
#ifndef AQL_SIGNAL_H
#define AQL_SIGNAL_H

#include <stdint.h>
#include <aql/compat.h>
#include <aql/packet.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_signal_kind {
	AQL_SIGNAL_KIND_INVALID = 0,
	AQL_SIGNAL_KIND_USER = 1,
	AQL_SIGNAL_KIND_DOORBELL = -1,
};

typedef struct __attribute__((aligned(64))) aql_signal {
	int64_t kind;			/* enum aql_signal_kind */
	union {
		int64_t value;
		uint64_t hardware_doorbell_ptr;	/* kind == DOORBELL only */
	};
	uint64_t event_mailbox_ptr;
	uint32_t event_id;
	uint32_t sleeping;		/* amd_signal_t reserved1: the sleep mark */
	/* Profiling: the packet's start and end in its agent's ticks (ns
	 * on the CPU agent; aql_signal_dispatch_time() converts). A queue's
	 * doorbell (queue_ptr set) is never stamped. */
	uint64_t start_ts;
	uint64_t end_ts;
	uint64_t queue_ptr;
	uint32_t wake_seq;		/* amd_signal_t reserved3[0] */
	uint32_t waiters;		/* amd_signal_t reserved3[1] */
} aql_signal;

AQL_STATIC_ASSERT(sizeof(aql_signal) == 64, "aql_signal must match amd_signal_t");

/* Ordering of a signal op, as the HSA _relaxed/_scacquire/_screlease forms. */
enum aql_memory_order {
	AQL_RELAXED,
	AQL_ACQUIRE,
	AQL_RELEASE,
	AQL_ACQ_REL,
};

enum aql_wait_hint {
	AQL_WAIT_ACTIVE,	/* spin until the condition or the deadline */
	/* spin briefly (up to 20 us; less on a thread whose recent waits
	 * outlasted that), then sleep in the kernel */
	AQL_WAIT_SPIN_BLOCK,
	AQL_WAIT_BLOCKED,	/* sleep at once; burns no CPU while waiting */
};

#define AQL_TIMEOUT_INFINITE UINT64_MAX

/*
 * Allocate a USER signal with the given initial value from device-visible
 * host memory. Errors: AQL_ERR_INVALID_ARG (out is NULL), AQL_ERR_NOMEM.
 * Thread safe.
 */
aql_status aql_signal_create(int64_t initial, aql_signal **out);

/*
 * Release a signal. NULL is accepted. Thread safe. Errors: AQL_ERR_BUSY
 * while a packet in flight in any queue (submitted and not finished) uses
 * it as its completion signal or as a dependency (barrier-AND/OR,
 * BARRIER_VALUE), naming the packet and the queue; the signal then stays
 * valid. The caller guarantees that no thread waits on it and that no
 * packet using it is being submitted meanwhile. Freeing it right after a
 * wait on it returned is safe: the packet has finished by then, and
 * signal memory is pooled, so the processor's wake-up after its decrement
 * touches valid memory.
 */
aql_status aql_signal_destroy(aql_signal *signal);

/*
 * Block until cond(value, compare) holds or timeout_ns passes. On success
 * the observed value is stored in *observed (if not NULL) and the load has
 * acquire order. Errors: AQL_ERR_TIMEOUT (the message gives the last value),
 * AQL_ERR_INVALID_ARG (bad condition or hint). Thread safe; any number of
 * threads may wait on one signal.
 *
 * A wait may run the packets it waits for on the calling thread: when a
 * packet near the head of a CPU agent's queue has this signal as its
 * completion signal, with only packets without a completion signal ahead
 * of it (a recorded graph's replay; on a MULTI queue they may be other
 * threads'), and the queue's processor thread is parked (or woken and not
 * yet running), the waiting thread runs them, and the packets right
 * behind that complete the same signal, as the processor would (same
 * order, fences, profiling, read index). So a kernel on a CPU agent must
 * not wait for a thread that waits for its packet's signal or a later
 * packet's in its queue (for what that thread does after the wait, or
 * for a lock it holds meanwhile), and a wait may return later than
 * timeout_ns by the run time of such packets (at most 64). A wait runs
 * none when its timeout ends within 1 ms (a short timed wait is a poll),
 * from inside a kernel, or on an agent made with
 * aql_host_agent_config.no_wait_help; nor packets of other signals,
 * malformed packets (the processor fails them, as without help) or
 * barriers whose condition is unmet. A kernel fault on the waiting thread
 * stops the queue as on the processor, and its error callback then runs
 * on the waiting thread.
 */
aql_status aql_signal_wait(aql_signal *signal, enum aql_signal_condition cond,
			   int64_t compare, uint64_t timeout_ns,
			   enum aql_wait_hint hint, int64_t *observed);

/*
 * Wait until any of n (1..64) signals meets its own condition. On success
 * *index names the first signal found satisfied. Same errors, ordering and
 * thread safety as aql_signal_wait(). Blocking uses one kernel wait on all
 * the signals where the kernel offers futex_waitv.
 */
aql_status aql_signal_wait_any(uint32_t n, aql_signal *const *signals,
			       const enum aql_signal_condition *conds,
			       const int64_t *compares, uint64_t timeout_ns,
			       enum aql_wait_hint hint, uint32_t *index,
			       int64_t *observed);

/*
 * Wait helpers: work a waiting thread may do itself rather than sleep
 * until another thread does it (the CPU agent runs a waiter's packet,
 * libaql-mpi progresses its operations this way). Every signal wait in
 * the runtime calls each registered helper with the signals it waits on:
 * before it sleeps, and while it polls at its first poll and every 64
 * after. help returns nonzero when it did work (the wait checks its
 * signals again at once), 0 otherwise. It runs on the waiting thread,
 * must not block, and should cost a load or two when it has nothing to
 * do; one that polls for the wait's work may do so for a few tens of
 * microseconds, never past aql_wait_helper_deadline(), since the helpers
 * registered after it wait their turn. Waits inside it call no helpers.
 */
struct aql_wait_helper {
	int (*help)(const struct aql_wait_helper *helper, uint32_t n,
		    aql_signal *const *signals);
};

/*
 * Register helper (static storage: helpers are never removed, so it must
 * stay valid until the process exits); registering it again does nothing.
 * Errors: AQL_ERR_INVALID_ARG (NULL helper or help), AQL_ERR_BUSY (all
 * AQL_WAIT_HELPERS_MAX places taken). Thread safe.
 */
#define AQL_WAIT_HELPERS_MAX 8
aql_status aql_wait_helper_register(const struct aql_wait_helper *helper);

/*
 * Inside a helper's help: the deadline of the wait that called it, as
 * CLOCK_MONOTONIC nanoseconds (UINT64_MAX: the wait has none), so that a
 * helper that polls for a while stops in time. 0 on a thread that is not
 * running a helper. Thread safe (per thread).
 */
uint64_t aql_wait_helper_deadline(void);

/* Slow path of every value-changing op: wake all sleeping waiters. */
void aql_signal_wake_waiters(aql_signal *signal);

static inline uint64_t aql_signal_handle(const aql_signal *signal)
{
	return (uint64_t)(uintptr_t)signal;
}

static inline aql_signal *aql_signal_from_handle(uint64_t handle)
{
	return (aql_signal *)(uintptr_t)handle;
}

static inline int aql_signal_condition_met(enum aql_signal_condition cond,
					   int64_t value, int64_t compare)
{
	switch (cond) {
	case AQL_COND_EQ: return value == compare;
	case AQL_COND_NE: return value != compare;
	case AQL_COND_LT: return value < compare;
	case AQL_COND_GTE: return value >= compare;
	}
	return 0;
}

static inline int aql_order_load_(enum aql_memory_order order)
{
	return order == AQL_ACQUIRE || order == AQL_ACQ_REL ? __ATOMIC_ACQUIRE
							    : __ATOMIC_RELAXED;
}

static inline int aql_order_store_(enum aql_memory_order order)
{
	return order == AQL_RELEASE || order == AQL_ACQ_REL ? __ATOMIC_RELEASE
							    : __ATOMIC_RELAXED;
}

static inline int aql_order_rmw_(enum aql_memory_order order)
{
	switch (order) {
	case AQL_ACQUIRE: return __ATOMIC_ACQUIRE;
	case AQL_RELEASE: return __ATOMIC_RELEASE;
	case AQL_ACQ_REL: return __ATOMIC_ACQ_REL;
	default: return __ATOMIC_RELAXED;
	}
}

/* The updater half of the wake protocol (see the top of this file). */
static inline void aql_signal_notify_(aql_signal *signal)
{
	if (__atomic_fetch_add(&signal->waiters, 0, __ATOMIC_SEQ_CST))
		aql_signal_wake_waiters(signal);
}

/*
 * Value ops. order is AQL_RELAXED, AQL_ACQUIRE, AQL_RELEASE or AQL_ACQ_REL;
 * loads ignore the release half and stores the acquire half. RMW ops return
 * the previous value. All are thread safe and lock-free.
 */
static inline int64_t aql_signal_load(const aql_signal *signal,
				      enum aql_memory_order order)
{
	return __atomic_load_n(&signal->value, aql_order_load_(order));
}

static inline void aql_signal_store(aql_signal *signal, int64_t value,
				    enum aql_memory_order order)
{
	__atomic_store_n(&signal->value, value, aql_order_store_(order));
	aql_signal_notify_(signal);
}

#define AQL_SIGNAL_RMW_(name, builtin)                                         \
	static inline int64_t aql_signal_##name(aql_signal *signal, int64_t v, \
						enum aql_memory_order order)   \
	{                                                                      \
		int64_t old = builtin(&signal->value, v, aql_order_rmw_(order)); \
		aql_signal_notify_(signal);                                    \
		return old;                                                    \
	}
AQL_SIGNAL_RMW_(add, __atomic_fetch_add)
AQL_SIGNAL_RMW_(sub, __atomic_fetch_sub)
AQL_SIGNAL_RMW_(and, __atomic_fetch_and)
AQL_SIGNAL_RMW_(or, __atomic_fetch_or)
AQL_SIGNAL_RMW_(xor, __atomic_fetch_xor)
AQL_SIGNAL_RMW_(exchange, __atomic_exchange_n)
#undef AQL_SIGNAL_RMW_

/* Compare-and-swap: returns the value seen; it equals expected on success. */
static inline int64_t aql_signal_cas(aql_signal *signal, int64_t expected,
				     int64_t desired, enum aql_memory_order order)
{
	int mo = aql_order_rmw_(order);
	int fail = mo == __ATOMIC_RELEASE ? __ATOMIC_RELAXED
		 : mo == __ATOMIC_ACQ_REL ? __ATOMIC_ACQUIRE : mo;

	if (__atomic_compare_exchange_n(&signal->value, &expected, desired, 0,
					mo, fail))
		aql_signal_notify_(signal);
	return expected;
}

#ifdef __cplusplus
}
#endif

#endif
