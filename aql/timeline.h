/* SPDX-License-Identifier: MIT */
/*
 * Internal: a queue's state for typed launches and copies. Every packet
 * they write sets the barrier bit and carries the timeline signal (a
 * recorded graph's replay: its last packet only, graph/graph.c), which
 * starts at t->start (AQL_TIMELINE_START, or lower for a signal handed on
 * from a destroyed queue) and which the processor decrements by one per
 * packet that carries it. Packet n of those (counted from 1) has
 * therefore completed, with all
 * before it, once the value is at most start - n: a completion is that
 * threshold, and needs no allocation. A failed or cancelled packet stores
 * -1, which ends every wait.
 *
 * Kernarg segments come from a ring in device-visible host memory; each
 * records the packet whose completion frees it, and a launch that finds
 * the ring full reclaims what completed, or waits for the oldest.
 */
#ifndef AQL_INTERNAL_TIMELINE_H
#define AQL_INTERNAL_TIMELINE_H

#include <stdint.h>

#include <aql/completion.h>
#include <aql/launch.h>
#include <aql/queue.h>

#include "util/lock.h"
#include "aql/queue_impl.h"

#define AQL_TIMELINE_START (INT64_C(1) << 62)
#define AQL_KERNARG_RING_SIZE (256u << 10)
#define AQL_KERNARG_ALIGN 64u
/* Dependencies one launch or copy waits for, at most. */
#define AQL_TIMELINE_MAX_AFTER 64u

struct aql_kernarg_rec {
	uint64_t end;		/* ring position after the segment */
	uint64_t seq;		/* packet whose completion frees it */
};

struct aql_timeline {
	aql_lock lock;
	aql_signal *signal;
	int64_t start;		/* the signal's value before the first packet */
	uint64_t packets;	/* written so far; under lock */
	unsigned char *ring;
	uint64_t head, tail;	/* ring positions, ever growing */
	uint64_t undo_head;	/* head before the segment taken last */
	struct aql_kernarg_rec *recs;
	uint32_t rec_first, rec_count, rec_cap;
	aql_launch_stats stats;
	aql_agent *agent;	/* the queue's; the ring is registered with it */
	aql_agent_info info;	/* the queue's agent's, read once */
};

/* aql_timeline_get() the first time. */
aql_status aql_timeline_make(aql_queue *queue, struct aql_timeline **out);

/*
 * The queue's timeline, made on first use. Errors: AQL_ERR_NOMEM. Acquire:
 * the timeline's set-up by whoever made it is seen.
 */
static inline aql_status aql_timeline_get(aql_queue *queue, struct aql_timeline **out)
{
	*out = __atomic_load_n(&aql_queue_impl(queue)->timeline, __ATOMIC_ACQUIRE);
	return *out ? AQL_OK : aql_timeline_make(queue, out);
}

/* Free it; the queue's processor has stopped. NULL is accepted. */
void aql_timeline_free(struct aql_timeline *t);

/*
 * Under t->lock: a kernarg segment of size bytes (64-aligned). Waits for
 * older launches if the ring is full. Then, still under the lock, either
 * aql_timeline_kernarg_commit() (packets emitted) or _cancel() (not).
 * Errors: AQL_ERR_INVALID_ARG (more than a quarter of the ring),
 * AQL_ERR_TIMEOUT.
 */
aql_status aql_timeline_kernarg(struct aql_timeline *t, aql_queue *queue, size_t size,
				void **out);

/* The segment taken last is freed once packet seq completes. */
static inline void aql_timeline_kernarg_commit(struct aql_timeline *t, uint64_t seq)
{
	t->recs[(t->rec_first + t->rec_count - 1) % t->rec_cap].seq = seq;
}

/* Give back the segment taken last. */
void aql_timeline_kernarg_cancel(struct aql_timeline *t);

/*
 * Give packets[0..n) the timeline as completion signal. Call it well
 * before aql_timeline_emit(): a load of a packet right after a narrower
 * store into it cannot be forwarded and stalls the hot path.
 */
static inline void aql_timeline_sign(const struct aql_timeline *t, aql_packet *packets,
				     uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		packets[i].dispatch.completion_signal = aql_signal_handle(t->signal);
}

/*
 * Under t->lock: write packets[0..n) (headers included, barrier bit set
 * and signed by the caller), ring the doorbell once, and set *done to the
 * completion of the last. Errors: those of aql_queue_reserve(); nothing
 * was written then.
 */
aql_status aql_timeline_emit(struct aql_timeline *t, aql_queue *queue, aql_packet *packets,
			     uint32_t n, aql_completion *done);

/* The completion of the timeline's packet seq. */
static inline aql_completion aql_timeline_completion(struct aql_timeline *t, aql_queue *queue,
						      uint64_t seq)
{
	aql_completion c = { t->signal, t->start - (int64_t)seq + 1, queue };

	return c;
}

/*
 * BARRIER_VALUE packets into out[] (room for n) that wait for those of
 * after[0..n) not met yet and not on t (which its packet order covers);
 * returns their number.
 */
uint32_t aql_timeline_deps(const struct aql_timeline *t, const aql_completion *after,
			   uint32_t n, aql_packet *out);

/*
 * Copy packets being planned: aql_copy_plan_add() encodes one at out[n]
 * (ops->encode_copy) with its header and, where the agent's copies take
 * kernarg memory (agent->copy_args), the next copy_args bytes of args.
 */
struct aql_copy_plan {
	aql_agent *agent;
	aql_packet *out;
	unsigned char *args;
	uint32_t n;
	uint64_t bytes;
};

/* Errors: those of ops->encode_copy; the plan is unchanged then. */
aql_status aql_copy_plan_add(struct aql_copy_plan *plan, void *dst, const void *src,
			     size_t size);

/*
 * aql_queue_copy() with its arguments checked; src NULL asks an agent for
 * zeroes where its encode_copy takes it so (the AMD agent's clear).
 */
aql_status aql_timeline_copy(aql_queue *queue, void *dst, const void *src, size_t size,
			     const aql_completion *after, uint32_t n, aql_completion *done);

/* The header every timeline packet of type type carries. */
static inline uint16_t aql_timeline_header(enum aql_packet_type type)
{
	return aql_packet_header(type, 1, AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
}

#endif
