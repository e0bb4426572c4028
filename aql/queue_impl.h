/* SPDX-License-Identifier: MIT */
/* Internal: the queue as the runtime and its agents see it. */
#ifndef AQL_INTERNAL_QUEUE_IMPL_H
#define AQL_INTERNAL_QUEUE_IMPL_H

#include <aql/queue.h>

#include "util/futex.h"

struct aql_queue_impl {
	aql_queue pub;		/* first: aql_queue * converts to this */
	aql_agent *agent;
	void *agent_state;	/* owned by the attached agent */
	uint32_t flags;
	aql_queue_error_fn error_callback;
	void *error_user;
	struct aql_timeline *timeline;	/* typed launches and copies; lazily */
	/* Producers waiting for space sleep on space_seq; the processor wakes
	 * them. Own cache line: the processor reads it after every packet. */
	uint32_t space_seq __attribute__((aligned(64)));
	uint32_t space_waiters;
	uint32_t error_once;
	char error_message[256];
};

static inline struct aql_queue_impl *aql_queue_impl(aql_queue *queue)
{
	return (struct aql_queue_impl *)queue;
}

/*
 * Wake producers waiting for space, if any. The seq_cst load pairs with
 * the seq_cst increment and load in aql_queue_wait_space() and the seq_cst
 * read-index store in aql_queue_retire(): either the producer sees the new
 * read index or this load sees its waiter count.
 */
static inline void aql_queue_wake_space(struct aql_queue_impl *q)
{
	if (__atomic_load_n(&q->space_waiters, __ATOMIC_SEQ_CST))
		aql_futex_bump_and_wake(&q->space_seq);
}

/*
 * Retire the packet at id: reset its header to INVALID, then advance
 * read_dispatch_id. The header goes first so a producer that sees the new
 * read index can never have its fresh header overwritten by this reset.
 * Producers asleep on a full ring are woken each quarter ring, not each
 * packet: one system call frees room for many packets. The processor also
 * wakes them whenever it runs out of packets, so none sleeps on room that
 * already exists.
 */
static inline void aql_queue_retire(struct aql_queue_impl *q, aql_packet *slot,
				    uint64_t id)
{
	__atomic_store_n(&slot->header, (uint16_t)AQL_PACKET_INVALID, __ATOMIC_RELAXED);
	__atomic_store_n(&q->pub.amd->read_dispatch_id, id + 1, __ATOMIC_SEQ_CST);
	if (((id + 1) & (q->pub.mask >> 2)) == 0)
		aql_queue_wake_space(q);
}

/*
 * Put the queue in its error state with a reason: later submissions fail
 * with AQL_ERR_QUEUE_ERROR, and the error callback runs once, on the
 * calling thread. Returns status.
 */
aql_status aql_queue_fail(struct aql_queue_impl *q, aql_status status,
			  const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
