/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <aql/mem.h>

#include "util/error.h"
#include "aql/agent_impl.h"
#include "aql/queue_impl.h"
#include "aql/timeline.h"
#include "graph/graph_impl.h"

/* How long a launch waits for the oldest kernarg segment to come free. */
#define KERNARG_WAIT_NS (60ull * 1000000000ull)

/*
 * Signals of destroyed timelines. Buffers may still hold completions on
 * them, so a timeline signal never becomes an ordinary signal again: a
 * new timeline takes it over and counts on down from its value, which
 * keeps every old threshold met. One cancelled or failed (-1) is never
 * reused, and stays allocated.
 */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static aql_signal **retired;
static uint32_t nretired, retired_cap;

static aql_status take_signal(aql_signal **out)
{
	aql_signal *sig = NULL;

	pthread_mutex_lock(&retired_lock);
	if (nretired)
		sig = retired[--nretired];
	pthread_mutex_unlock(&retired_lock);
	if (sig) {
		*out = sig;
		return AQL_OK;
	}
	return aql_signal_create(AQL_TIMELINE_START, out);
}

static void retire_signal(aql_signal *sig)
{
	aql_signal **grown;

	if (aql_signal_load(sig, AQL_ACQUIRE) < 0)
		return;
	pthread_mutex_lock(&retired_lock);
	if (nretired == retired_cap) {
		grown = realloc(retired, (retired_cap ? 2 * retired_cap : 8) * sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&retired_lock);
			return;
		}
		retired = grown;
		retired_cap = retired_cap ? 2 * retired_cap : 8;
	}
	retired[nretired++] = sig;
	pthread_mutex_unlock(&retired_lock);
}

static aql_status timeline_create(aql_agent *agent, struct aql_timeline **out)
{
	struct aql_timeline *t = calloc(1, sizeof(*t));
	aql_mem_pool *pool;
	aql_status st;

	if (!t)
		return aql_fail(AQL_ERR_NOMEM, "queue launch state: out of memory");
	t->rec_cap = AQL_KERNARG_RING_SIZE / AQL_KERNARG_ALIGN + 1;
	t->recs = calloc(t->rec_cap, sizeof(*t->recs));
	if (!t->recs) {
		free(t);
		return aql_fail(AQL_ERR_NOMEM, "kernarg pool records: out of memory");
	}
	st = aql_mem_pool_default(AQL_MEM_FINE_GRAINED, &pool);
	if (st == AQL_OK)
		st = aql_mem_alloc(pool, AQL_KERNARG_RING_SIZE, 4096, (void **)&t->ring);
	/* The agent reads kernargs, and a GPU's copy kernels their arguments,
	 * from the ring. */
	if (st == AQL_OK && (st = aql_agent_mem_register(agent, t->ring, AQL_KERNARG_RING_SIZE)) ==
				    AQL_OK)
		t->agent = agent;
	if (st == AQL_OK)
		st = take_signal(&t->signal);
	if (st != AQL_OK) {
		if (t->agent)
			aql_agent_mem_unregister(agent, t->ring, AQL_KERNARG_RING_SIZE);
		aql_mem_free(t->ring);
		free(t->recs);
		free(t);
		return st;
	}
	aql_agent_get_info(agent, &t->info);
	t->start = aql_signal_load(t->signal, AQL_RELAXED);
	t->stats.kernarg_bytes = AQL_KERNARG_RING_SIZE;
	*out = t;
	return AQL_OK;
}

aql_status aql_timeline_make(aql_queue *queue, struct aql_timeline **out)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_timeline *t = NULL, *expected = NULL;
	aql_status st;

	st = timeline_create(q->agent, &t);
	if (st != AQL_OK)
		return st;
	/* Two first launches may race: the loser frees its copy. */
	if (!__atomic_compare_exchange_n(&q->timeline, &expected, t, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		aql_timeline_free(t);
		t = expected;
	}
	*out = t;
	return AQL_OK;
}

void aql_timeline_free(struct aql_timeline *t)
{
	if (!t)
		return;
	retire_signal(t->signal);
	if (t->agent)
		aql_agent_mem_unregister(t->agent, t->ring, AQL_KERNARG_RING_SIZE);
	aql_mem_free(t->ring);
	free(t->recs);
	free(t);
}

static int seq_done(const struct aql_timeline *t, uint64_t seq)
{
	return aql_signal_load(t->signal, AQL_ACQUIRE) <= t->start - (int64_t)seq;
}

static void reclaim(struct aql_timeline *t)
{
	while (t->rec_count && seq_done(t, t->recs[t->rec_first].seq)) {
		t->tail = t->recs[t->rec_first].end;
		t->rec_first = (t->rec_first + 1) % t->rec_cap;
		t->rec_count--;
	}
}

aql_status aql_timeline_kernarg(struct aql_timeline *t, aql_queue *queue, size_t size,
				void **out)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	uint64_t pos, off;
	aql_status st;

	size = (size + AQL_KERNARG_ALIGN - 1) & ~(size_t)(AQL_KERNARG_ALIGN - 1);
	if (!size)
		size = AQL_KERNARG_ALIGN;
	if (size > AQL_KERNARG_RING_SIZE / 4)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernarg segment of %zu bytes exceeds the pool's limit of %u",
				size, AQL_KERNARG_RING_SIZE / 4);
	for (;;) {
		pos = t->head;
		off = pos % AQL_KERNARG_RING_SIZE;
		/* A segment never wraps: skip the ring's tail end. */
		if (off + size > AQL_KERNARG_RING_SIZE)
			pos += AQL_KERNARG_RING_SIZE - off;
		if (pos + size - t->tail <= AQL_KERNARG_RING_SIZE)
			break;
		reclaim(t);
		if (pos + size - t->tail <= AQL_KERNARG_RING_SIZE)
			break;
		t->stats.kernarg_waits++;
		if (q->agent->ops->queue_request)
			q->agent->ops->queue_request(q->agent, q);
		st = aql_signal_wait(t->signal, AQL_COND_LT,
				     t->start - (int64_t)t->recs[t->rec_first].seq + 1,
				     KERNARG_WAIT_NS, AQL_WAIT_SPIN_BLOCK, NULL);
		if (st != AQL_OK)
			return aql_fail(st, "no kernarg segment came free on queue %llu: packet %llu of its launches has not completed",
					(unsigned long long)queue->amd->hsa.id,
					(unsigned long long)t->recs[t->rec_first].seq);
	}
	t->undo_head = t->head;
	t->head = pos + size;
	/* Until committed, its seq is one no packet reaches before the
	 * launch is emitted: the wait above only ever waits for older ones. */
	t->recs[(t->rec_first + t->rec_count) % t->rec_cap] =
		(struct aql_kernarg_rec){ t->head, UINT64_MAX };
	t->rec_count++;
	*out = t->ring + pos % AQL_KERNARG_RING_SIZE;
	return AQL_OK;
}

void aql_timeline_kernarg_cancel(struct aql_timeline *t)
{
	t->rec_count--;
	t->head = t->undo_head;
}

aql_status aql_timeline_emit(struct aql_timeline *t, aql_queue *queue, aql_packet *packets,
			     uint32_t n, aql_completion *done)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	uint64_t first = 0;
	aql_status st = aql_queue_reserve(queue, n, &first);

	if (st != AQL_OK)
		return st;
	for (uint32_t i = 0; i < n; i++)
		aql_packet_store(aql_queue_slot(queue, first + i), &packets[i]);
	/* An agent that starts the packets on this thread rings its own
	 * doorbell, only when its processor must wake: a ring it does not
	 * need costs a futex wake and a thread contending for the queue. */
	if (q->agent->ops->queue_flush)
		q->agent->ops->queue_flush(q->agent, q, first + n - 1);
	else
		aql_queue_ring_doorbell(queue, first + n - 1);
	t->packets += n;
	if (done)
		*done = aql_timeline_completion(t, queue, t->packets);
	return AQL_OK;
}

uint32_t aql_timeline_deps(const struct aql_timeline *t, const aql_completion *after,
			   uint32_t n, aql_packet *out)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		aql_completion c = after[i];

		if (c.signal == t->signal || aql_completion_done(c))
			continue;
		memset(&out[k], 0, sizeof(out[k]));
		out[k].barrier_value.header.header = aql_timeline_header(AQL_PACKET_VENDOR_SPECIFIC);
		out[k].barrier_value.header.format = AQL_AMD_PACKET_BARRIER_VALUE;
		out[k].barrier_value.signal = aql_signal_handle(c.signal);
		out[k].barrier_value.value = c.below;
		out[k].barrier_value.mask = -1;
		out[k].barrier_value.cond = AQL_COND_LT;
		k++;
	}
	return k;
}

aql_status aql_completion_wait(aql_completion c, uint64_t timeout_ns)
{
	int64_t value = 0;
	aql_status st;

	if (!c.signal)
		return AQL_OK;
	aql_completion_request(c);
	st = aql_signal_wait(c.signal, AQL_COND_LT, c.below, timeout_ns, AQL_WAIT_SPIN_BLOCK,
			     &value);
	if (st != AQL_OK)
		return st;
	/* The queue may be gone by now (destroy cancels): name, don't read it. */
	if (value < 0 && c.signal == aql_graph_marker)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"completion of recorded work (node %lld of a graph): it runs only when the graph is replayed; wait for aql_graph_exec_replay()'s completion",
				(long long)c.below - 1);
	if (value < 0)
		return aql_fail(AQL_ERR_QUEUE_ERROR,
				"the work failed or was cancelled (signal value %lld)%s",
				(long long)value,
				c.queue ? "; aql_queue_error() on its queue gives the reason" : "");
	/* What the work printed through the queue's printf channel is out. */
	aql_queue_flush_service(c.queue);
	return AQL_OK;
}
