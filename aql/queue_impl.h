/* SPDX-License-Identifier: MIT */
/* Internal: the queue as the runtime and its agents see it. */
#ifndef AQL_INTERNAL_QUEUE_IMPL_H
#define AQL_INTERNAL_QUEUE_IMPL_H

#include <pthread.h>
#include <aql/queue.h>

#include "util/clock.h"
#include "util/futex.h"

/*
 * A service that a layer above the core keeps for a queue: its printf
 * channel (channel/printf_queue.c), the only one. flush runs when a completion
 * of the queue has been waited for; destroy when the queue is destroyed,
 * after its packets have ended and no flush runs any more.
 */
struct aql_queue_service {
	void (*flush)(struct aql_queue_service *s);
	void (*destroy)(struct aql_queue_service *s);
	uint32_t users;		/* flushes running; under the live-queue lock */
};

/* A destroy hook (aql_queue_add_destroy_hook()). */
struct aql_queue_hook {
	struct aql_queue_hook *next;
	aql_queue_destroy_fn fn;
	void *user;
};

struct aql_queue_impl {
	aql_queue pub;		/* first: aql_queue * converts to this */
	aql_agent *agent;
	void *agent_state;	/* owned by the attached agent */
	uint32_t flags;
	aql_queue_error_fn error_callback;
	void *error_user;
	struct aql_timeline *timeline;	/* typed launches and copies; lazily */
	struct aql_queue_service *service;	/* set once; the live-queue lock */
	struct aql_graph *graph;	/* the recording it records into, or NULL */
	struct aql_queue_hook *hooks;	/* latest first; the live-queue lock */
	struct aql_queue_impl *next_live;	/* the live-queue list; its lock */
	/* Set before attach (from the flags), then under priority_lock. */
	enum aql_queue_priority priority;
	pthread_mutex_t priority_lock;
	/* Producers waiting for space sleep on space_seq; the processor wakes
	 * them. Own cache line: the processor reads it after every packet. */
	uint32_t space_seq __attribute__((aligned(64)));
	uint32_t space_waiters;
	/* Of them, those that may hold ids beyond the ring (AQL_SPACE_HOLDS). */
	uint32_t space_holders;
	uint32_t error_once;
	/* The agent runs none of the queue's packets any more (it stopped on
	 * a failed packet): aql_queue_find_pending() skips it. Atomic. */
	uint32_t halted;
	/* queue_detach has run (aql_queue_inactivate or destroy). Atomic. */
	uint32_t detached;
	char error_message[256];
};

static inline struct aql_queue_impl *aql_queue_impl(aql_queue *queue)
{
	return (struct aql_queue_impl *)queue;
}

/*
 * The futex bits of a producer asleep on space_seq: one that may hold ids
 * beyond the ring, which the processor cannot pass until it publishes
 * them (a MULTI producer that raced past the full check, an HSA program
 * polling the read index), and one that holds none yet.
 */
#define AQL_SPACE_HOLDS 1u
#define AQL_SPACE_NEW 2u

/*
 * Wake producers waiting for space, if any: all of them, or (some) those
 * that hold ids and one that holds none. The seq_cst load pairs with the
 * seq_cst increments and load in aql_queue_wait_space() and the seq_cst
 * read-index store in aql_queue_retire(): either the producer sees the
 * new read index or this load sees its waiter count; a holder counts
 * itself in space_holders before space_waiters, so seeing the second
 * (seq_cst) means seeing the first.
 */
static inline void aql_queue_wake_producers(struct aql_queue_impl *q, int some)
{
	if (!__atomic_load_n(&q->space_waiters, __ATOMIC_SEQ_CST))
		return;
	if (!some) {
		aql_futex_bump_and_wake(&q->space_seq);
		return;
	}
	__atomic_fetch_add(&q->space_seq, 1, __ATOMIC_RELEASE);
	if (__atomic_load_n(&q->space_holders, __ATOMIC_SEQ_CST))
		aql_futex_wake_bits(&q->space_seq, AQL_SPACE_HOLDS);
	aql_futex_wake_some(&q->space_seq, AQL_SPACE_NEW, 1);
}

/* Wake every producer waiting for space: the processor ran out of
 * packets, so none may sleep on room that nobody would fill. */
static inline void aql_queue_wake_space(struct aql_queue_impl *q)
{
	aql_queue_wake_producers(q, 0);
}

/*
 * The packet in slot has finished: reset its header to INVALID. From here
 * on aql_queue_find_pending() no longer counts it as in flight. Release,
 * and before the completion signal: a thread that waited for the signal
 * and then destroys what the packet used finds it INVALID (a packet whose
 * release fence scope is NONE decrements its signal relaxed, and gets that
 * guarantee only on x86).
 */
static inline void aql_queue_finish(aql_packet *slot)
{
	__atomic_store_n(&slot->header, (uint16_t)AQL_PACKET_INVALID, __ATOMIC_RELEASE);
}

/*
 * The agent has stopped running the queue for good (after a failed
 * packet): nothing of it is in flight any more. Release, and before the
 * failed packet's signal is stored, so that a waiter that saw the signal
 * may destroy what the queue's packets use.
 */
static inline void aql_queue_halt(struct aql_queue_impl *q)
{
	__atomic_store_n(&q->halted, 1, __ATOMIC_RELEASE);
}

/*
 * Retire the finished packet at id: advance read_dispatch_id. The header
 * was reset first (aql_queue_finish), so a producer that sees the new read
 * index can never have its fresh header overwritten by that reset.
 * Producers asleep on a full ring are woken each quarter ring, not each
 * packet: one system call frees room for many packets. Not all of them:
 * those that hold ids, and one that holds none, which has room for more
 * packets than it takes before it polls again. Woken together, every
 * sleeper would want a CPU at once, and beside busy threads the processor
 * would keep a fraction of one; one at a time, each fills the room and
 * sleeps again behind the others, so they take turns in order. The
 * processor wakes all of them whenever it runs out of packets or waits
 * on a barrier's signals, so none sleeps on room that nobody fills.
 */
static inline void aql_queue_retire(struct aql_queue_impl *q, uint64_t id)
{
	__atomic_store_n(&q->pub.amd->read_dispatch_id, id + 1, __ATOMIC_SEQ_CST);
	if (((id + 1) & (q->pub.mask >> 2)) == 0)
		aql_queue_wake_producers(q, 1);
}

/*
 * The packets in flight from the read index on will never run (the queue
 * halted, or is being destroyed): give their completion signals -1, so
 * that no waiter hangs. Not thread safe against the queue's processor.
 */
void aql_queue_cancel_pending(struct aql_queue_impl *q);

/*
 * Put the queue in its error state with a reason: later submissions fail
 * with AQL_ERR_QUEUE_ERROR, and the error callback runs once, on the
 * calling thread. Returns status.
 */
aql_status aql_queue_fail(struct aql_queue_impl *q, aql_status status,
			  const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Look through every live queue for a packet in flight (published and not
 * finished: the running one, and those waiting behind it) for which
 * match(packet, user) is nonzero. Returns 1 and copies the first one to
 * *found with its queue and packet ids, or returns 0. Costs a walk over
 * the packets in flight, on the caller's thread, and nothing on the
 * submission or processing paths. A packet published while the walk runs
 * may be missed: callers document that race as their caller's to avoid.
 */
int aql_queue_find_pending(int (*match)(const aql_packet *packet, void *user), void *user,
			   aql_packet *found, uint64_t *queue_id, uint64_t *packet_id);

/*
 * Give the queue its service, unless it has one: returns the one it keeps
 * (s, or the earlier one; the caller frees s then). Thread safe.
 */
struct aql_queue_service *aql_queue_set_service(aql_queue *queue, struct aql_queue_service *s);
/* Run the flush of a live queue's service; a no-op for a destroyed queue. */
void aql_queue_flush_service(aql_queue *queue);

#endif
