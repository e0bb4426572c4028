/* SPDX-License-Identifier: MIT */
/*
 * CUDA queues: the AQL ring of a queue becomes work on one non-blocking
 * stream. Packets are translated, in ring order, under the queue's
 * translation lock, on one of two threads: the thread of a typed launch
 * (aql_timeline_emit() calls nv_queue_flush() right after publishing), or
 * the queue's processor thread, woken by the doorbell, for packets users
 * write into the ring themselves. A translated packet's ring slot retires
 * at once (the driver has copied the kernargs; copies reference the user's
 * buffers); the packet stays in the in-flight list until the stream is
 * past it.
 *
 *   kernel dispatch   cuLaunchKernel: blocks of the work-group size, as
 *                     many as cover the grid; dynamic shared memory is the
 *                     group segment beyond the kernel's static LDS; the
 *                     kernarg block is the launch's parameter buffer;
 *   copy (NV_FN_COPY) cuMemcpy*Async; pageable host memory goes through
 *                     a pinned staging ring, filled or drained by host
 *                     functions in stream order; never a synchronous copy;
 *   barrier-AND       a stream wait "value < 1" per dependency (a failed
 *                     dependency, -1, releases it rather than hanging);
 *   BARRIER_VALUE     a stream wait for LT, GTE and EQ with a full mask;
 *   anything else     (NE, partial masks, barrier-OR) a host function that
 *                     waits on the host.
 *
 * Completion signals on the device path: the translator computes the
 * value the packet's decrement produces and the stream stores it (64-bit
 * stream memory operations, batched). Stores into the timeline signal of
 * typed launches are owed, not enqueued at once: they go out when the
 * batch is full, before a stream wait or host function, when asked
 * (nv_queue_request), at destroy, or by the processor within a bound, so
 * a typed launch costs one driver call. So a completion signal of a packet
 * on a CUDA queue must not be changed by anyone else while the packet is
 * in flight; it may be reset once its value was seen. Each batch of
 * completion stores is bracketed by two progress words, "started" and
 * "landed" (the id after the batch's last packet), which tell the
 * translator exactly whether an earlier store to the same signal has
 * happened. Where the device has no stream memory operations
 * (AQL_SIGNAL_PATH_HOST_CALLBACK), host functions decrement the signals
 * and do the waits.
 *
 * Costs: a host function costs the driver's callback thread (about 100 us
 * each on discrete GPUs, and it runs one at a time for the context), and
 * a host wait blocks that thread until its condition holds, stalling the
 * host functions of every other stream of the context meanwhile. The
 * device writes wake no futex: the processor thread polls the progress
 * words while packets are in flight (a short spin, then sleeps growing to
 * 1 ms) and wakes sleeping waiters of completed signals; a blocked waiter
 * may therefore wake up to that interval late.
 *
 * Faults: an error of the stream (sticky for the context: an illegal
 * address, a failed launch) puts the queue in its error state, naming the
 * error; every packet in flight and every packet still in the ring gets
 * -1 in its completion signal. A driver call refused at translation fails
 * its packet: the queue stops translating, and once the stream has run
 * what came before, the failed packet and all after it get -1.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nv/nv.h"
#include "aql/timeline.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/wait.h"

/* Completion stores in one cuStreamBatchMemOp, between the progress words. */
#define WRITE_BATCH 64u
/* Completion stores owed: the processor puts them on the stream once no
 * new one came for OWED_IDLE_NS, or the oldest waited OWED_MAX_NS. */
#define OWED_IDLE_NS 50000u
#define OWED_MAX_NS 500000u
/* Pinned staging for pageable copies: its size, and the largest piece. */
#define STAGING_SIZE (4u << 20)
#define STAGING_CHUNK (1u << 20)
/* How long a translation waits for staging to come free, and how long a
 * destroy waits for the stream to finish its work. */
#define STALL_NS (60ull * 1000000000ull)
/* The processor's polls while packets are in flight. */
#define POLL_SPIN_NS 20000u
#define POLL_FIRST_SLEEP_NS 50000u
#define POLL_MAX_SLEEP_NS 1000000u
/* A packet id rung but not yet written: poll for it this often. */
#define ANNOUNCED_POLL_NS 100000u
#define SIGN_BIT (UINT64_C(1) << 63)

struct inflight {
	aql_packet packet;		/* a copy, for queue_find_pending */
	uint64_t id;
	aql_signal *signal;		/* completion signal, or NULL */
	int64_t value;			/* device path: the value stored into it */
};

/* The last completion value scheduled for a signal (device path). */
struct scheduled {
	aql_signal *signal;
	int64_t value;
	uint64_t id;
};

struct nvq {
	/* Set by detach; host waits waiting on the host give up at 1. Both
	 * are signals so that aql_wait_conds() watches them. */
	aql_signal stop;
	aql_signal cancel;
	struct nv_agent *a;
	const struct nv_driver *cu;
	struct aql_queue_impl *q;
	CUstream stream;
	int device_path;		/* stream memory operations */
	/* A resident queue's processor (AQL_QUEUE_RESIDENT), which owns the
	 * ring: only the packets it hands back are translated, up to limit. */
	struct nv_resident *res;
	pthread_t thread;
	/* Progress: the id after the last packet whose completion stores the
	 * stream has started / finished. Device-visible. */
	aql_signal *started, *landed;

	/* Translation: everything below, under lock. */
	pthread_mutex_t lock;
	uint64_t next;			/* next packet id to translate */
	uint64_t limit;			/* ids below it may be translated */
	int failed;			/* translate nothing more */
	int halted;			/* failed packets' signals stored */
	/* Completion stores not yet on the stream: ops[1..nwrites]; ops[0]
	 * and the one after them become the progress stores. */
	CUstreamBatchMemOpParams ops[WRITE_BATCH + 2];
	uint32_t nwrites;
	uint32_t owed;			/* atomic: nwrites, read without lock */
	int owed_raw;			/* one owed store is not a typed launch's */
	aql_signal *timeline;		/* typed launches' signal, or NULL */
	uint64_t owed_from;		/* packet id of the first owed store */
	uint64_t owed_first_ns, owed_last_ns;	/* when the first, last came */
	uint64_t batch_last;
	struct scheduled *table;	/* open addressing, by signal */
	uint32_t table_cap, table_used;
	uintptr_t reached_page;		/* signal page known registered */
	unsigned char *staging;
	uint64_t staging_head;
	uint64_t staging_tail;		/* atomic: host functions free staging */

	/* The in-flight list, a ring in id order, under list_lock. */
	pthread_mutex_t list_lock;
	struct inflight *list;
	uint32_t list_cap, list_first, list_count;
	uint64_t done;			/* ids below it finished: stream seen idle */
	uint64_t enqueued;		/* atomic: ids below it are wholly on the stream */

	/* Whether a typed launch must ring the doorbell (nv_queue_flush):
	 * next as of the last translation, and when the processor's sleep
	 * ends (0: awake; UINT64_MAX: not before the doorbell). Atomic. */
	uint64_t translated;
	uint64_t sleep_until;

	/* Host functions not yet returned: counted (atomic), and listed under
	 * calls_lock, so that those a failed stream never runs stay reachable. */
	uint32_t calls;
	pthread_mutex_t calls_lock;
	struct call *call_list;
	uint32_t dead;			/* atomic: the stream failed */
};

/* Work of a host function; freed by it. */
enum call_kind { CALL_WAIT, CALL_SUB, CALL_COPY };

struct call {
	struct call *prev, *next;	/* the queue's list */
	struct nvq *s;
	enum call_kind kind;
	int any;			/* CALL_WAIT: barrier-OR */
	uint32_t n;
	struct aql_wait_cond conds[6];	/* room for the cancel condition */
	aql_signal *signal;		/* CALL_SUB */
	uint64_t id;
	void *dst;			/* CALL_COPY */
	const void *src;
	size_t size;
	uint64_t release;		/* staging tail after it; 0: none */
};

/*
 * Queue states that the driver may still touch after a destroy (host
 * functions not run, a stream that never finished): kept, never freed.
 */
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvq **abandoned;
static uint32_t nabandoned, abandoned_cap;

/* Orders queue_find_pending against detach freeing the state. */
static pthread_mutex_t hook_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t progress(const aql_signal *word)
{
	return (uint64_t)aql_signal_load(word, AQL_ACQUIRE);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

/* ---- failing ---- */

/* -1 into the signals of the packets still in the ring: under lock, with
 * the queue halted. Their slots retire, so the ring never fills up. */
static void cancel_ring(struct nvq *s)
{
	aql_queue *queue = &s->q->pub;
	uint64_t end = __atomic_load_n(&queue->amd->write_dispatch_id, __ATOMIC_ACQUIRE);

	for (; s->next < end; s->next++) {
		aql_packet *slot = aql_queue_slot(queue, s->next);
		uint64_t signal;

		if (aql_header_type(__atomic_load_n(&slot->header, __ATOMIC_ACQUIRE)) ==
		    AQL_PACKET_INVALID)
			break;
		signal = slot->dispatch.completion_signal;
		aql_queue_finish(slot);
		if (signal)
			aql_signal_store(aql_signal_from_handle(signal), -1, AQL_RELEASE);
		aql_queue_retire(s->q, s->next);
	}
}

/* Whether the stream's store of e's completion value is seen (device path). */
static int value_stored(const struct inflight *e)
{
	return e->value != INT64_MIN && aql_signal_load(e->signal, AQL_ACQUIRE) <= e->value;
}

/*
 * Stop for good: nothing of the queue runs any more (the stream failed, or
 * ran everything before the failed packet). -1 into every signal in
 * flight or in the ring. Under lock.
 */
static void halt(struct nvq *s)
{
	uint64_t limit;

	aql_queue_halt(s->q);
	s->halted = 1;
	/* Owed stores never go out: their packets get -1 below. */
	s->nwrites = 0;
	s->owed_raw = 0;
	__atomic_store_n(&s->owed, 0, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->list_lock);
	limit = progress(s->landed);
	if (s->done > limit)
		limit = s->done;
	for (uint32_t i = 0; i < s->list_count; i++) {
		struct inflight *e = &s->list[(s->list_first + i) % s->list_cap];

		/* Packets that completed before the failure keep their value;
		 * their sleeping waiters still need the wake-up. */
		if (!e->signal)
			continue;
		if (e->id >= limit && !value_stored(e))
			aql_signal_store(e->signal, -1, AQL_RELEASE);
		else
			aql_signal_notify_(e->signal);
	}
	s->list_count = 0;
	pthread_mutex_unlock(&s->list_lock);
	cancel_ring(s);
}

/* The in-flight list is empty: after a failed packet, halt now. Under lock. */
static void halt_if_drained(struct nvq *s)
{
	uint32_t count;

	if (!s->failed || s->halted)
		return;
	pthread_mutex_lock(&s->list_lock);
	count = s->list_count;
	pthread_mutex_unlock(&s->list_lock);
	if (!count)
		halt(s);
}

/*
 * Packet id cannot be translated: the queue's error state names it; it and
 * every packet after it get -1 once what the stream already has is done.
 * Under lock. Returns 0.
 */
static int fail_packet(struct nvq *s, uint64_t id, aql_status status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail_packet(struct nvq *s, uint64_t id, aql_status status, const char *fmt, ...)
{
	char reason[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	aql_queue_fail(s->q, status, "CUDA queue %llu, packet %llu (slot %llu): %s",
		       (unsigned long long)s->q->pub.amd->hsa.id, (unsigned long long)id,
		       (unsigned long long)(id & s->q->pub.mask), reason);
	s->failed = 1;
	halt_if_drained(s);
	return 0;
}

static int fail_call(struct nvq *s, uint64_t id, CUresult r, const char *call,
		     const char *what)
{
	return fail_packet(s, id, AQL_ERR_DEVICE, "%s: %s failed: %s (%s)", what, call,
			   nv_result_name(r), nv_result_string(r));
}

/* The stream failed (a sticky error of the context): stop at once. */
static void fail_stream(struct nvq *s, CUresult r)
{
	aql_queue_fail(s->q, AQL_ERR_DEVICE,
		       "CUDA queue %llu: the stream failed: %s (%s); the device context is unusable from here on",
		       (unsigned long long)s->q->pub.amd->hsa.id, nv_result_name(r),
		       nv_result_string(r));
	__atomic_store_n(&s->dead, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&s->lock);
	s->failed = 1;
	if (!s->halted)
		halt(s);
	pthread_mutex_unlock(&s->lock);
}

/* ---- host functions ---- */

static void run_call(void *user)
{
	struct call *c = user;
	struct nvq *s = c->s;
	struct aql_wait_cond one[2];
	int helped;

	switch (c->kind) {
	case CALL_WAIT:
		/* On the driver's callback thread: no CPU agent kernel runs
		 * here (a kernel's CUDA call from a callback would deadlock). */
		helped = aql_wait_help_off(1);
		c->conds[c->n] = (struct aql_wait_cond){ &s->cancel, -1, 1, AQL_COND_EQ };
		if (c->any) {
			aql_wait_conds(c->n + 1, c->conds, UINT64_MAX, AQL_WAIT_SPIN_NS, NULL, NULL);
		} else {
			for (uint32_t i = 0; i < c->n; i++) {
				uint32_t index = 0;

				one[0] = c->conds[i];
				one[1] = c->conds[c->n];
				aql_wait_conds(2, one, UINT64_MAX, AQL_WAIT_SPIN_NS, &index, NULL);
				if (index == 1)
					break;
			}
		}
		aql_wait_help_off(helped);
		break;
	case CALL_SUB:
		/* Progress first: a thread that sees the decrement finds the
		 * packet finished (a destroy right after a wait succeeds). */
		aql_signal_store(s->landed, (int64_t)(c->id + 1), AQL_RELEASE);
		aql_signal_sub(c->signal, 1, AQL_RELEASE);
		break;
	case CALL_COPY:
		if (c->size)
			memcpy(c->dst, c->src, c->size);
		if (c->release)
			__atomic_store_n(&s->staging_tail, c->release, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_lock(&s->calls_lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->call_list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&s->calls_lock);
	free(c);
	/* The last touch of the queue's state: detach waits for it. */
	__atomic_fetch_sub(&s->calls, 1, __ATOMIC_RELEASE);
}

static struct call *new_call(struct nvq *s, uint64_t id, enum call_kind kind)
{
	struct call *c = calloc(1, sizeof(*c));

	if (!c) {
		fail_packet(s, id, AQL_ERR_NOMEM, "no memory for a host function");
		return NULL;
	}
	c->s = s;
	c->kind = kind;
	c->id = id;
	return c;
}

static int flush_writes(struct nvq *s);

/* Enqueue c on the stream; c is freed either way. */
static int host_call(struct nvq *s, struct call *c, uint64_t id, const char *what)
{
	CUresult r;

	if (!flush_writes(s)) {
		free(c);
		return 0;
	}
	__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->calls_lock);
	c->prev = NULL;
	c->next = s->call_list;
	if (c->next)
		c->next->prev = c;
	s->call_list = c;
	pthread_mutex_unlock(&s->calls_lock);
	r = s->cu->cuLaunchHostFunc(s->stream, run_call, c);
	if (r != CUDA_SUCCESS) {
		pthread_mutex_lock(&s->calls_lock);
		s->call_list = c->next;
		if (c->next)
			c->next->prev = NULL;
		pthread_mutex_unlock(&s->calls_lock);
		__atomic_fetch_sub(&s->calls, 1, __ATOMIC_RELAXED);
		free(c);
		return fail_call(s, id, r, "cuLaunchHostFunc", what);
	}
	return 1;
}

/* ---- stream memory operations ---- */

static int reach(struct nvq *s, aql_signal *signal, uint64_t id)
{
	uintptr_t page = (uintptr_t)signal & ~(uintptr_t)4095;

	if (page == s->reached_page)
		return 1;
	if (nv_signal_reach(s->a, signal) != AQL_OK)
		return fail_packet(s, id, AQL_ERR_DEVICE, "signal %p: %s", (void *)signal,
				   aql_error_message());
	s->reached_page = page;
	return 1;
}

/* -1 into the signals of a batch the driver refused: nobody else will. */
static void fail_batch(struct nvq *s)
{
	for (uint32_t i = 1; i <= s->nwrites; i++) {
		aql_signal *sig = (aql_signal *)(uintptr_t)(s->ops[i].writeValue.address -
							     offsetof(aql_signal, value));

		aql_signal_store(sig, -1, AQL_RELEASE);
	}
	s->nwrites = 0;
	s->owed_raw = 0;
	__atomic_store_n(&s->owed, 0, __ATOMIC_RELAXED);
}

/* Put the completion stores collected so far (owed) on the stream, between
 * the progress words. Under lock. */
static int flush_writes(struct nvq *s)
{
	CUstreamBatchMemOpParams *first = &s->ops[0], *last = &s->ops[s->nwrites + 1];
	CUresult r;

	if (!s->nwrites)
		return 1;
	memset(first, 0, sizeof(*first));
	first->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
	first->writeValue.address = (CUdeviceptr)(uintptr_t)&s->started->value;
	first->writeValue.value64 = s->batch_last + 1;
	*last = *first;
	last->writeValue.address = (CUdeviceptr)(uintptr_t)&s->landed->value;
	do
		r = s->cu->cuStreamBatchMemOp(s->stream, s->nwrites + 2, s->ops, 0);
	while (r != CUDA_SUCCESS && nv_enter_again(s->a, r));
	if (r != CUDA_SUCCESS) {
		fail_batch(s);
		return fail_call(s, s->batch_last, r, "cuStreamBatchMemOp",
				 "storing completion signals");
	}
	s->nwrites = 0;
	s->owed_raw = 0;
	__atomic_store_n(&s->owed, 0, __ATOMIC_RELAXED);
	/* Every packet translated so far is wholly on the stream. */
	__atomic_store_n(&s->enqueued, s->next, __ATOMIC_RELEASE);
	return 1;
}

/*
 * Whether the stream has stored the completion value of packet id. When it
 * is between the progress words it is storing right now: wait for it.
 */
static int stored(struct nvq *s, uint64_t id)
{
	uint64_t deadline;

	if (progress(s->landed) > id)
		return 1;
	if (progress(s->started) <= id)
		return 0;
	nv_enter(s->a);
	deadline = aql_deadline(STALL_NS);
	while (progress(s->landed) <= id) {
		CUresult r = s->cu->cuStreamQuery(s->stream);

		if ((r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) || aql_now_ns() >= deadline)
			break;
		aql_cpu_relax();
	}
	return 1;
}

static uint32_t table_slot(const struct nvq *s, const aql_signal *signal)
{
	uint64_t h = (uint64_t)(uintptr_t)signal >> 6;

	return (uint32_t)((h * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & (s->table_cap - 1);
}

/* Rebuild with room for twice as many, keeping only stores not yet known
 * to have happened. */
static int table_grow(struct nvq *s, uint64_t id)
{
	struct scheduled *old = s->table;
	uint32_t old_cap = s->table_cap;
	uint64_t landed = progress(s->landed);
	uint32_t used = 0;

	for (uint32_t i = 0; i < old_cap; i++)
		used += old[i].signal && old[i].id >= landed;
	s->table_cap = old_cap ? old_cap : 16;
	while (used * 2 >= s->table_cap)
		s->table_cap *= 2;
	s->table = calloc(s->table_cap, sizeof(*s->table));
	if (!s->table) {
		s->table = old;
		s->table_cap = old_cap;
		return fail_packet(s, id, AQL_ERR_NOMEM, "no memory for the completion table");
	}
	s->table_used = 0;
	for (uint32_t i = 0; i < old_cap; i++) {
		if (!old[i].signal || old[i].id < landed)
			continue;
		uint32_t j = table_slot(s, old[i].signal);

		while (s->table[j].signal)
			j = (j + 1) & (s->table_cap - 1);
		s->table[j] = old[i];
		s->table_used++;
	}
	free(old);
	return 1;
}

/* The value the decrement of packet id's completion produces; recorded. */
static int next_value(struct nvq *s, aql_signal *signal, uint64_t id, int64_t *value)
{
	uint32_t j;

	if ((s->table_used + 1) * 2 > s->table_cap && !table_grow(s, id))
		return 0;
	j = table_slot(s, signal);
	while (s->table[j].signal && s->table[j].signal != signal)
		j = (j + 1) & (s->table_cap - 1);
	if (s->table[j].signal && !stored(s, s->table[j].id))
		*value = s->table[j].value - 1;
	else
		*value = aql_signal_load(signal, AQL_ACQUIRE) - 1;
	if (!s->table[j].signal)
		s->table_used++;
	s->table[j] = (struct scheduled){ signal, *value, id };
	return 1;
}

/* Stream waits, one per condition; all are LT, GTE or EQ with a full mask. */
static int device_waits(struct nvq *s, const struct aql_wait_cond *conds, uint32_t n,
			uint64_t id)
{
	CUstreamBatchMemOpParams ops[5];
	CUresult r;

	if (!n)
		return 1;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t v = (uint64_t)conds[i].compare;
		unsigned int flags = CU_STREAM_WAIT_VALUE_GEQ;

		if (!reach(s, conds[i].signal, id))
			return 0;
		/* "value < v" is the cyclic GEQ against v with the sign bit
		 * flipped, for values less than 2^63 apart. */
		if (conds[i].cond == AQL_COND_LT)
			v ^= SIGN_BIT;
		else if (conds[i].cond == AQL_COND_EQ)
			flags = CU_STREAM_WAIT_VALUE_EQ;
		memset(&ops[i], 0, sizeof(ops[i]));
		ops[i].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
		ops[i].waitValue.address = (CUdeviceptr)(uintptr_t)&conds[i].signal->value;
		ops[i].waitValue.value64 = v;
		ops[i].waitValue.flags = flags;
	}
	if (!flush_writes(s))
		return 0;
	if (n == 1)
		r = s->cu->cuStreamWaitValue64(s->stream, ops[0].waitValue.address,
					       ops[0].waitValue.value64, ops[0].waitValue.flags);
	else
		r = s->cu->cuStreamBatchMemOp(s->stream, n, ops, 0);
	if (r != CUDA_SUCCESS)
		return fail_call(s, id, r, n == 1 ? "cuStreamWaitValue64" : "cuStreamBatchMemOp",
				 "a dependency wait");
	return 1;
}

/* Waits the stream cannot do itself: a host function waits. */
static int host_waits(struct nvq *s, const struct aql_wait_cond *conds, uint32_t n, int any,
		      uint64_t id)
{
	struct call *c;

	if (!n)
		return 1;
	c = new_call(s, id, CALL_WAIT);
	if (!c)
		return 0;
	c->any = any;
	c->n = n;
	memcpy(c->conds, conds, n * sizeof(*conds));
	return host_call(s, c, id, "a dependency wait on the host");
}

/* ---- packets ---- */

aql_status nv_dispatch_args(struct nv_agent *a, const aql_dispatch_packet *d,
			    struct nv_dispatch *out, char *why, size_t len)
{
	struct nv_kernel *k = (struct nv_kernel *)(uintptr_t)d->kernel_object;
	const aql_agent_info *info = &a->info;
	const uint32_t *grid = &d->grid_size_x;
	const uint16_t *wg = &d->workgroup_size_x;
	uint32_t dims = d->setup & AQL_DISPATCH_DIMS_MASK, dyn, allowed;
	uint64_t items = 1;
	CUresult r;

	if (d->setup > 3 || dims == 0) {
		snprintf(why, len, "setup 0x%x: grid dimensions must be 1, 2 or 3", d->setup);
		return AQL_ERR_QUEUE_ERROR;
	}
	if (!k) {
		snprintf(why, len, "kernel_object is null");
		return AQL_ERR_QUEUE_ERROR;
	}
	for (uint32_t i = 0; i < 3; i++) {
		if (i < dims && (grid[i] == 0 || wg[i] == 0)) {
			snprintf(why, len, "zero %s size in dimension %u",
				 grid[i] == 0 ? "grid" : "work-group", i);
			return AQL_ERR_QUEUE_ERROR;
		}
		if (i >= dims && (grid[i] != 1 || wg[i] != 1)) {
			snprintf(why, len,
				 "dimension %u is unused (grid has %u) but its grid size is %u and work-group size %u; both must be 1",
				 i, dims, grid[i], wg[i]);
			return AQL_ERR_QUEUE_ERROR;
		}
		if (wg[i] > info->max_workgroup_dim[i]) {
			snprintf(why, len, "work-group size %u in dimension %u exceeds the device's %u",
				 wg[i], i, info->max_workgroup_dim[i]);
			return AQL_ERR_QUEUE_ERROR;
		}
		out->blocks[i] = grid[i] / wg[i] + (grid[i] % wg[i] != 0);
		out->wg[i] = wg[i];
		items *= wg[i];
	}
	if (k->max_threads && items > k->max_threads) {
		snprintf(why, len, "work-group of %llu work-items exceeds kernel %s's maximum of %u",
			 (unsigned long long)items, k->name, k->max_threads);
		return AQL_ERR_QUEUE_ERROR;
	}
	if (k->kernarg_size && !d->kernarg_address) {
		snprintf(why, len, "kernarg_address is null but kernel %s takes %u bytes of arguments",
			 k->name, k->kernarg_size);
		return AQL_ERR_QUEUE_ERROR;
	}
	if (d->group_segment_size < k->static_lds ||
	    d->group_segment_size > info->max_group_segment_size) {
		snprintf(why, len,
			 "group_segment_size %u is outside [%u, %u] (kernel %s's static size, device limit)",
			 d->group_segment_size, k->static_lds, info->max_group_segment_size, k->name);
		return AQL_ERR_QUEUE_ERROR;
	}
	dyn = d->group_segment_size - k->static_lds;
	/* Beyond the default a kernel must ask for its dynamic shared memory;
	 * once per kernel and size, by whichever queue gets there first. */
	allowed = __atomic_load_n(&k->dynamic_lds_allowed, __ATOMIC_ACQUIRE);
	if (d->group_segment_size > info->default_group_segment_size && dyn > allowed) {
		if (nv_enter(a) != AQL_OK) {
			snprintf(why, len, "%s", aql_error_message());
			return AQL_ERR_DEVICE;
		}
		r = a->cu->cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
					      (int)dyn);
		if (r != CUDA_SUCCESS) {
			snprintf(why, len,
				 "kernel %s: %u bytes of dynamic shared memory: cuFuncSetAttribute failed: %s (%s)",
				 k->name, dyn, nv_result_name(r), nv_result_string(r));
			return AQL_ERR_DEVICE;
		}
		while (allowed < dyn &&
		       !__atomic_compare_exchange_n(&k->dynamic_lds_allowed, &allowed, dyn, 0,
						    __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			;
	}
	out->k = k;
	out->dyn = dyn;
	out->size = k->kernarg_size;
	out->extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;
	out->extra[1] = (void *)(uintptr_t)d->kernarg_address;
	out->extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;
	out->extra[3] = &out->size;
	out->extra[4] = CU_LAUNCH_PARAM_END;
	return AQL_OK;
}

static int launch(struct nvq *s, const aql_dispatch_packet *d, uint64_t id)
{
	struct nv_dispatch l;
	char why[200];
	aql_status st = nv_dispatch_args(s->a, d, &l, why, sizeof(why));
	CUresult r;

	if (st != AQL_OK)
		return fail_packet(s, id, st, "%s", why);
	/*
	 * Typed launches' completion stores stay owed: a kernel waits for no
	 * signal, and a fault of this launch fails the timeline anyway. Those
	 * of raw packets go first: their packets finished, whatever this one
	 * does.
	 */
	if (s->owed_raw && !flush_writes(s))
		return 0;
	do
		r = s->cu->cuLaunchKernel(l.k->fn, l.blocks[0], l.blocks[1], l.blocks[2], l.wg[0],
					  l.wg[1], l.wg[2], l.dyn, s->stream, NULL,
					  l.size ? l.extra : NULL);
	while (r != CUDA_SUCCESS && nv_enter_again(s->a, r));
	if (r != CUDA_SUCCESS)
		return fail_packet(s, id, AQL_ERR_DEVICE,
				   "kernel %s, %ux%ux%u blocks of %ux%ux%u, %u bytes of dynamic shared memory: cuLaunchKernel failed: %s (%s)",
				   l.k->name, l.blocks[0], l.blocks[1], l.blocks[2], l.wg[0], l.wg[1],
				   l.wg[2], l.dyn, nv_result_name(r), nv_result_string(r));
	return 1;
}

static int barrier(struct nvq *s, const aql_barrier_packet *b, uint64_t id)
{
	struct aql_wait_cond conds[5];
	uint32_t n = 0;

	for (int i = 0; i < 5; i++)
		if (b->dep_signal[i])
			conds[n++] = (struct aql_wait_cond){
				aql_signal_from_handle(b->dep_signal[i]), -1, 1, AQL_COND_LT };
	if (aql_header_type(b->header) == AQL_PACKET_BARRIER_OR)
		return host_waits(s, conds, n, 1, id);
	if (!s->device_path)
		return host_waits(s, conds, n, 0, id);
	return device_waits(s, conds, n, id);
}

static int barrier_value(struct nvq *s, const aql_barrier_value_packet *b, uint64_t id)
{
	struct aql_wait_cond c;

	if (!b->signal)
		return fail_packet(s, id, AQL_ERR_QUEUE_ERROR, "BARRIER_VALUE packet has a null signal");
	if (b->cond > AQL_COND_GTE)
		return fail_packet(s, id, AQL_ERR_QUEUE_ERROR, "BARRIER_VALUE condition %u is unknown",
				   b->cond);
	c = (struct aql_wait_cond){ aql_signal_from_handle(b->signal), b->mask, b->value,
				    (enum aql_signal_condition)b->cond };
	if (!s->device_path || b->mask != -1 || b->cond == AQL_COND_NE)
		return host_waits(s, &c, 1, 0, id);
	return device_waits(s, &c, 1, id);
}

static int is_device(struct nvq *s, const void *p)
{
	unsigned int type = 0;

	return s->cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					    (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	       type == CU_MEMORYTYPE_DEVICE;
}

/* n bytes of staging, waiting for older copies to free it. */
static unsigned char *staging_take(struct nvq *s, size_t n, uint64_t id, uint64_t *end)
{
	uint64_t pos, deadline = 0, nap = 1000;
	CUresult r;

	if (!s->staging) {
		r = s->cu->cuMemHostAlloc((void **)&s->staging, STAGING_SIZE,
					  CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
		if (r != CUDA_SUCCESS) {
			s->staging = NULL;
			fail_call(s, id, r, "cuMemHostAlloc", "pinned staging for a pageable copy");
			return NULL;
		}
	}
	pos = s->staging_head;
	if (pos % STAGING_SIZE + n > STAGING_SIZE)
		pos += STAGING_SIZE - pos % STAGING_SIZE;
	while (pos + n - __atomic_load_n(&s->staging_tail, __ATOMIC_ACQUIRE) > STAGING_SIZE) {
		if (!deadline)
			deadline = aql_deadline(STALL_NS);
		r = s->cu->cuStreamQuery(s->stream);
		if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
			fail_call(s, id, r, "cuStreamQuery", "waiting for pinned staging");
			return NULL;
		}
		if (aql_now_ns() >= deadline) {
			fail_packet(s, id, AQL_ERR_TIMEOUT,
				    "pinned staging for a pageable copy did not come free within %llu s: the copies before it are held up on the stream",
				    STALL_NS / 1000000000ull);
			return NULL;
		}
		sleep_ns(nap);
		nap = nap * 2 > POLL_MAX_SLEEP_NS ? POLL_MAX_SLEEP_NS : nap * 2;
	}
	s->staging_head = pos + n;
	*end = pos + n;
	return s->staging + pos % STAGING_SIZE;
}

/* dst or src (not both) is pageable: piece by piece through staging. */
static int staged_copy(struct nvq *s, unsigned char *dst, const unsigned char *src,
		       size_t size, int to_device, uint64_t id)
{
	for (size_t off = 0; off < size; off += STAGING_CHUNK) {
		size_t n = size - off < STAGING_CHUNK ? size - off : STAGING_CHUNK;
		uint64_t end = 0;
		unsigned char *stage = staging_take(s, n, id, &end);
		struct call *fill, *done;
		CUresult r;

		if (!stage)
			return 0;
		fill = new_call(s, id, CALL_COPY);
		done = fill ? new_call(s, id, CALL_COPY) : NULL;
		if (!done) {
			free(fill);
			return 0;
		}
		if (to_device) {
			*fill = (struct call){ .s = s, .kind = CALL_COPY, .dst = stage,
					       .src = src + off, .size = n };
			*done = (struct call){ .s = s, .kind = CALL_COPY, .release = end };
			if (!host_call(s, fill, id, "filling pinned staging")) {
				free(done);
				return 0;
			}
			r = s->cu->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)(dst + off), stage, n,
						     s->stream);
		} else {
			*done = (struct call){ .s = s, .kind = CALL_COPY, .dst = dst + off,
					       .src = stage, .size = n, .release = end };
			free(fill);
			r = s->cu->cuMemcpyDtoHAsync(stage, (CUdeviceptr)(uintptr_t)(src + off), n,
						     s->stream);
		}
		if (r != CUDA_SUCCESS) {
			free(done);
			return fail_call(s, id, r, to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync",
					 "a copy through pinned staging");
		}
		if (!host_call(s, done, id, to_device ? "freeing pinned staging"
						      : "draining pinned staging"))
			return 0;
	}
	return 1;
}

static int copy(struct nvq *s, const aql_agent_dispatch_packet *p, uint64_t id)
{
	unsigned char *dst = (unsigned char *)(uintptr_t)p->arg[0];
	const unsigned char *src = (const unsigned char *)(uintptr_t)p->arg[1];
	size_t size = (size_t)p->arg[2];
	int dd, sd;
	CUresult r;
	const char *call;
	struct call *c;

	if (!size)
		return 1;
	if (!dst || !src)
		return fail_packet(s, id, AQL_ERR_QUEUE_ERROR, "copy of %zu bytes from %p to %p",
				   size, (const void *)src, (void *)dst);
	dd = is_device(s, dst);
	sd = is_device(s, src);
	if (!dd && !sd) {
		/* Host to host: the CPU copies, in stream order. */
		c = new_call(s, id, CALL_COPY);
		if (!c)
			return 0;
		c->dst = dst;
		c->src = src;
		c->size = size;
		return host_call(s, c, id, "a host-to-host copy");
	}
	if (dd && !sd && !nv_host_reachable(s->a, src, size))
		return staged_copy(s, dst, src, size, 1, id);
	if (sd && !dd && !nv_host_reachable(s->a, dst, size))
		return staged_copy(s, dst, src, size, 0, id);
	/* As for a launch: a raw packet's owed store goes before a copy
	 * that may fault. */
	if (s->owed_raw && !flush_writes(s))
		return 0;
	if (dd && sd) {
		call = "cuMemcpyDtoDAsync";
		r = s->cu->cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
					     size, s->stream);
	} else if (dd) {
		call = "cuMemcpyHtoDAsync";
		r = s->cu->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst, src, size, s->stream);
	} else {
		call = "cuMemcpyDtoHAsync";
		r = s->cu->cuMemcpyDtoHAsync(dst, (CUdeviceptr)(uintptr_t)src, size, s->stream);
	}
	if (r != CUDA_SUCCESS)
		return fail_call(s, id, r, call, "a copy");
	return 1;
}

static int translate(struct nvq *s, const aql_packet *p, uint64_t id);

/* A graph replay: its segments in order, a CUDA graph as one launch. */
static int graph_replay(struct nvq *s, const aql_agent_dispatch_packet *p, uint64_t id)
{
	const struct nv_graph *g = (const struct nv_graph *)(uintptr_t)p->arg[0];
	CUresult r;

	for (uint32_t i = 0; i < g->nsegs; i++) {
		const struct nv_graph_seg *seg = &g->segs[i];

		if (!seg->exec) {
			if (!translate(s, &seg->packet, id))
				return 0;
			continue;
		}
		/* As before a launch: raw packets' stores go first. */
		if (s->owed_raw && !flush_writes(s))
			return 0;
		do
			r = s->cu->cuGraphLaunch(seg->exec, s->stream);
		while (r != CUDA_SUCCESS && nv_enter_again(s->a, r));
		if (r != CUDA_SUCCESS)
			return fail_packet(s, id, AQL_ERR_DEVICE,
					   "a graph replay's %u launches (graph packets %u to %u): cuGraphLaunch failed: %s (%s)",
					   seg->count, seg->first, seg->first + seg->count - 1,
					   nv_result_name(r), nv_result_string(r));
	}
	return 1;
}

static int agent_dispatch(struct nvq *s, const aql_agent_dispatch_packet *p, uint64_t id)
{
	if (p->type == NV_FN_COPY)
		return copy(s, p, id);
	if (p->type == NV_FN_GRAPH)
		return graph_replay(s, p, id);
	return fail_packet(s, id, AQL_ERR_UNSUPPORTED,
			   "agent dispatch type %u: the NVIDIA agent runs no registered functions",
			   p->type);
}

/* The completion signal's decrement, after the packet's work; the packet
 * is the last one in flight. */
static int complete(struct nvq *s, aql_signal *signal, uint64_t id)
{
	CUstreamBatchMemOpParams *op;
	struct call *c;
	int64_t value;

	if (!signal)
		return 1;
	if (!s->device_path) {
		c = new_call(s, id, CALL_SUB);
		if (!c)
			return 0;
		c->signal = signal;
		return host_call(s, c, id, "a completion signal decrement");
	}
	if (!reach(s, signal, id) || !next_value(s, signal, id, &value))
		return 0;
	pthread_mutex_lock(&s->list_lock);
	s->list[(s->list_first + s->list_count - 1) % s->list_cap].value = value;
	pthread_mutex_unlock(&s->list_lock);
	s->owed_last_ns = aql_now_ns();
	if (!s->nwrites) {
		s->owed_from = id;
		s->owed_first_ns = s->owed_last_ns;
	}
	op = &s->ops[++s->nwrites];
	memset(op, 0, sizeof(*op));
	op->writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
	op->writeValue.address = (CUdeviceptr)(uintptr_t)&signal->value;
	op->writeValue.value64 = (uint64_t)value;
	s->batch_last = id;
	s->owed_raw |= signal != s->timeline;
	__atomic_store_n(&s->owed, s->nwrites, __ATOMIC_RELAXED);
	return s->nwrites < WRITE_BATCH || flush_writes(s);
}

/* Packet id goes in flight; complete() sets the value it stores. */
static int push_inflight(struct nvq *s, const aql_packet *p, uint64_t id, aql_signal *signal)
{
	struct inflight *grown;
	uint32_t cap;

	pthread_mutex_lock(&s->list_lock);
	if (s->list_count == s->list_cap) {
		cap = s->list_cap ? 2 * s->list_cap : 64;
		grown = malloc(cap * sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&s->list_lock);
			return fail_packet(s, id, AQL_ERR_NOMEM, "no memory for the in-flight list");
		}
		for (uint32_t i = 0; i < s->list_count; i++)
			grown[i] = s->list[(s->list_first + i) % s->list_cap];
		free(s->list);
		s->list = grown;
		s->list_cap = cap;
		s->list_first = 0;
	}
	s->list[(s->list_first + s->list_count++) % s->list_cap] =
		(struct inflight){ *p, id, signal, INT64_MIN };
	pthread_mutex_unlock(&s->list_lock);
	return 1;
}

/* The packet's work, up to its completion. */
static int translate(struct nvq *s, const aql_packet *p, uint64_t id)
{
	int ok;

	/* Launches and graph replays retry on a context changed behind aql's
	 * back; the rest make sure of it first. */
	if (aql_header_type(p->header) != AQL_PACKET_KERNEL_DISPATCH &&
	    !(aql_header_type(p->header) == AQL_PACKET_AGENT_DISPATCH &&
	      p->agent.type == NV_FN_GRAPH) &&
	    nv_enter(s->a) != AQL_OK)
		return fail_packet(s, id, AQL_ERR_DEVICE, "%s", aql_error_message());
	switch (aql_header_type(p->header)) {
	case AQL_PACKET_KERNEL_DISPATCH:
		ok = launch(s, &p->dispatch, id);
		break;
	case AQL_PACKET_BARRIER_AND:
	case AQL_PACKET_BARRIER_OR:
		ok = barrier(s, &p->barrier, id);
		break;
	case AQL_PACKET_AGENT_DISPATCH:
		ok = agent_dispatch(s, &p->agent, id);
		break;
	case AQL_PACKET_VENDOR_SPECIFIC:
		if (p->barrier_value.header.format == AQL_AMD_PACKET_BARRIER_VALUE) {
			ok = barrier_value(s, &p->barrier_value, id);
			break;
		}
		return fail_packet(s, id, AQL_ERR_QUEUE_ERROR, "vendor packet format %u is unknown",
				   p->barrier_value.header.format);
	default:
		return fail_packet(s, id, AQL_ERR_QUEUE_ERROR, "packet type %u is unknown",
				   (unsigned)aql_header_type(p->header));
	}
	return ok;
}

/*
 * Translate every packet published so far, in ring order. Stores into the
 * queue's timeline signal (typed launches) stay owed: a typed launch makes
 * one driver call. Those of other packets go on the stream at the end, as
 * do all of a failed queue: a raw packet's round trip asks nobody. Under
 * lock.
 */
static void translate_ready(struct nvq *s)
{
	aql_queue *queue = &s->q->pub;
	struct aql_timeline *t = __atomic_load_n(&s->q->timeline, __ATOMIC_ACQUIRE);
	uint64_t first = s->next, id;
	aql_signal *signal;

	if (s->failed) {
		if (s->halted)
			cancel_ring(s);
		return;
	}
	if (nv_enter_noted(s->a) != AQL_OK) {
		fail_packet(s, s->next, AQL_ERR_DEVICE, "%s", aql_error_message());
		return;
	}
	s->timeline = t ? t->signal : NULL;
	for (;;) {
		aql_packet *slot = aql_queue_slot(queue, s->next);
		uint16_t header = __atomic_load_n(&slot->header, __ATOMIC_ACQUIRE);
		aql_packet p;

		if (aql_header_type(header) == AQL_PACKET_INVALID || s->next >= s->limit)
			break;
		memcpy(&p, slot, sizeof(p));
		p.header = header;
		signal = aql_signal_from_handle(p.dispatch.completion_signal);
		id = s->next;
		if (!translate(s, &p, id) || !push_inflight(s, &p, id, signal))
			break;
		/* The slot retires before the completion is enqueued: a thread
		 * that saw the completion never finds the packet in the ring. */
		aql_queue_finish(slot);
		aql_queue_retire(s->q, id);
		s->next++;
		if (!complete(s, signal, id))
			break;
	}
	/* Typed stores stay owed even on an idle stream: a launch makes one
	 * driver call, and whoever observes the completion asks for it. */
	if (s->owed_raw || s->failed)
		flush_writes(s);
	/* Only with its completion store on the stream too (or failed) is a
	 * packet finished once the stream is idle. */
	if (!s->nwrites)
		__atomic_store_n(&s->enqueued, s->next, __ATOMIC_RELEASE);
	else
		__atomic_store_n(&s->enqueued, s->owed_from, __ATOMIC_RELEASE);
	/* Seq_cst: one side of the handshake with the processor's sleep. */
	if (s->next != first)
		__atomic_store_n(&s->translated, s->next, __ATOMIC_SEQ_CST);
}

/* When the owed stores must be on the stream. Under lock, with some owed. */
static uint64_t owed_due(const struct nvq *s)
{
	uint64_t due = s->owed_last_ns + OWED_IDLE_NS;

	return s->owed_first_ns + OWED_MAX_NS < due ? s->owed_first_ns + OWED_MAX_NS : due;
}

/*
 * The doorbell wakes the processor, which then takes the lock beside the
 * next launch: rung only when the processor would sleep too long. It must
 * watch new packets in flight (it sleeps for good only with none), put
 * owed stores on the stream by their bound, and wind down a failed queue.
 */
void nv_queue_flush(aql_agent *agent, struct aql_queue_impl *q, uint64_t last)
{
	struct nvq *s = q->agent_state;
	uint64_t first, need;

	(void)agent;
	/* A resident queue's processor takes the packets from the ring. */
	if (s->res)
		return;
	pthread_mutex_lock(&s->lock);
	first = s->next;
	translate_ready(s);
	need = s->next != first ? UINT64_MAX - 1 : UINT64_MAX;
	if (s->nwrites && owed_due(s) < need)
		need = owed_due(s);
	if (s->failed)
		need = 0;
	pthread_mutex_unlock(&s->lock);
	/* translated was stored seq_cst before this load, and the processor
	 * stores sleep_until before it loads translated: either it sees the
	 * new packets or this sees its sleep. */
	if (__atomic_load_n(&s->sleep_until, __ATOMIC_SEQ_CST) > need)
		aql_queue_ring_doorbell(&s->q->pub, last);
}

void nv_queue_request(aql_agent *agent, struct aql_queue_impl *q)
{
	struct nvq *s;

	(void)agent;
	pthread_mutex_lock(&hook_lock);
	s = q->agent_state;
	/* Nothing owed, the common case: no lock, no driver call. */
	if (s && __atomic_load_n(&s->owed, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&s->lock);
		if (s->nwrites && nv_enter_noted(s->a) == AQL_OK)
			flush_writes(s);
		pthread_mutex_unlock(&s->lock);
	}
	pthread_mutex_unlock(&hook_lock);
}

/* Owed stores past their bound go on the stream; returns when the next
 * ones fall due (0: none owed). Under lock. */
static uint64_t flush_due(struct nvq *s)
{
	uint64_t now, due;

	if (!s->nwrites)
		return 0;
	now = aql_now_ns();
	due = owed_due(s);
	if (now < due)
		return due;
	flush_writes(s);
	return 0;
}

/* ---- completions ---- */

/*
 * Drop the packets the stream is past and wake the sleeping waiters of
 * their signals: the device's stores wake no one. With query, ask the
 * stream too (which finds an idle stream, and faults). Returns how many
 * packets remain in flight; *reaped (may be NULL) how many finished.
 */
static uint32_t reap(struct nvq *s, int query, uint32_t *reaped)
{
	aql_signal *wake[32];
	uint32_t n, left, total = 0;
	uint64_t upto, limit;
	CUresult r;

	if (query && !__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) {
		upto = __atomic_load_n(&s->enqueued, __ATOMIC_ACQUIRE);
		r = s->cu->cuStreamQuery(s->stream);
		if (r == CUDA_SUCCESS) {
			pthread_mutex_lock(&s->list_lock);
			if (upto > s->done)
				s->done = upto;
			pthread_mutex_unlock(&s->list_lock);
		} else if (r != CUDA_ERROR_NOT_READY) {
			fail_stream(s, r);
			if (reaped)
				*reaped = 0;
			return 0;
		}
	}
	do {
		n = 0;
		pthread_mutex_lock(&s->list_lock);
		limit = progress(s->landed);
		if (s->done > limit)
			limit = s->done;
		while (s->list_count && n < 32) {
			struct inflight *e = &s->list[s->list_first];

			if (e->id >= limit)
				break;
			if (e->signal)
				wake[n++] = e->signal;
			s->list_first = (s->list_first + 1) % s->list_cap;
			s->list_count--;
		}
		left = s->list_count;
		pthread_mutex_unlock(&s->list_lock);
		for (uint32_t i = 0; i < n; i++)
			aql_signal_notify_(wake[i]);
		total += n;
	} while (n == 32);
	if (reaped)
		*reaped = total;
	return left;
}

static int stopping(struct nvq *s)
{
	return aql_signal_load(&s->stop, AQL_ACQUIRE) != 0;
}

/*
 * The processor: translates what producers write into the ring themselves
 * (woken by the doorbell, as the CPU agent's processor), and watches the
 * packets in flight: a spin after new work, then sleeps growing to 1 ms.
 */
static void *processor_main(void *arg)
{
	struct nvq *s = arg;
	aql_queue *queue = &s->q->pub;
	uint64_t nap = 0, next, due;
	uint32_t left, reaped;
	struct aql_wait_cond conds[2];
	int failed;

	if (nv_enter(s->a) != AQL_OK)
		aql_queue_fail(s->q, AQL_ERR_DEVICE, "CUDA queue %llu: the processor thread: %s",
			       (unsigned long long)queue->amd->hsa.id, aql_error_message());
	while (!stopping(s)) {
		int64_t rung = aql_signal_load(queue->doorbell, AQL_ACQUIRE);
		uint64_t deadline = UINT64_MAX, spin = POLL_SPIN_NS;

		pthread_mutex_lock(&s->lock);
		translate_ready(s);
		due = flush_due(s);
		next = s->next;
		failed = s->failed;
		pthread_mutex_unlock(&s->lock);
		left = reap(s, 1, &reaped);
		if (!left && failed) {
			pthread_mutex_lock(&s->lock);
			halt_if_drained(s);
			pthread_mutex_unlock(&s->lock);
		}
		if (!failed && aql_header_type(__atomic_load_n(&aql_queue_slot(queue, next)->header,
							       __ATOMIC_ACQUIRE)) != AQL_PACKET_INVALID)
			continue;
		aql_queue_wake_space(s->q);
		if (!left || reaped)
			nap = 0;
		if (left && !nap) {
			deadline = aql_deadline(POLL_SPIN_NS);
			nap = POLL_FIRST_SLEEP_NS;
		} else if (left) {
			deadline = aql_deadline(nap);
			spin = 0;
			nap = nap * 2 > POLL_MAX_SLEEP_NS ? POLL_MAX_SLEEP_NS : nap * 2;
		} else if (rung >= (int64_t)next) {
			/* Rung ahead of its header: the producer is writing it. */
			deadline = aql_deadline(ANNOUNCED_POLL_NS);
		}
		if (due && due < deadline)
			deadline = due;
		/* Typed launches ring only a processor that sleeps too long:
		 * say how long, then look for packets translated since this
		 * pass (the other half of nv_queue_flush's handshake). */
		__atomic_store_n(&s->sleep_until, deadline, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&s->translated, __ATOMIC_SEQ_CST) == next) {
			conds[0] = (struct aql_wait_cond){ queue->doorbell, -1, rung, AQL_COND_NE };
			conds[1] = (struct aql_wait_cond){ &s->stop, -1, 1, AQL_COND_EQ };
			aql_wait_conds(2, conds, deadline, spin, NULL, NULL);
		}
		__atomic_store_n(&s->sleep_until, 0, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* ---- attach, detach ---- */

static void abandon(struct nvq *s)
{
	struct nvq **grown;

	pthread_mutex_lock(&abandoned_lock);
	if (nabandoned == abandoned_cap) {
		grown = realloc(abandoned, (abandoned_cap ? 2 * abandoned_cap : 8) * sizeof(*grown));
		if (grown) {
			abandoned = grown;
			abandoned_cap = abandoned_cap ? 2 * abandoned_cap : 8;
		}
	}
	/* Without room the state leaks unreferenced: still never freed. */
	if (nabandoned < abandoned_cap)
		abandoned[nabandoned++] = s;
	pthread_mutex_unlock(&abandoned_lock);
}

static void free_state(struct nvq *s)
{
	if (s->staging)
		s->cu->cuMemFreeHost(s->staging);
	aql_signal_destroy(s->started);
	aql_signal_destroy(s->landed);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->list_lock);
	pthread_mutex_destroy(&s->calls_lock);
	free(s->table);
	free(s->list);
	free(s);
}

/*
 * The queue's stream at its priority: LOW the context's least, HIGH its
 * greatest, NORMAL CUDA's default 0 (which drivers report as the least).
 * *call names the driver call that failed.
 */
static CUresult stream_create(struct nvq *s, const char **call)
{
	int least = 0, greatest = 0, priority = 0;
	CUresult r = CUDA_SUCCESS;

	*call = "cuCtxGetStreamPriorityRange";
	if (s->q->priority != AQL_QUEUE_PRIORITY_NORMAL)
		r = s->cu->cuCtxGetStreamPriorityRange(&least, &greatest);
	if (r != CUDA_SUCCESS)
		return r;
	if (s->q->priority == AQL_QUEUE_PRIORITY_LOW)
		priority = least;
	if (s->q->priority == AQL_QUEUE_PRIORITY_HIGH)
		priority = greatest;
	*call = "cuStreamCreateWithPriority";
	return s->cu->cuStreamCreateWithPriority(&s->stream, CU_STREAM_NON_BLOCKING, priority);
}

/*
 * A stream's priority is fixed when it is made, and swapping the queue's
 * stream for another would have to order the new one after the old
 * one's work (packets, owed completion stores): refused.
 */
aql_status nv_queue_set_priority(aql_agent *agent, struct aql_queue_impl *q,
				 enum aql_queue_priority priority)
{
	(void)priority;
	return aql_fail(AQL_ERR_UNSUPPORTED, "NVIDIA agent %u: queue %llu's CUDA stream took "
			"its priority when it was created (cuStreamCreateWithPriority): create "
			"the queue with AQL_QUEUE_LOW_PRIORITY or AQL_QUEUE_HIGH_PRIORITY",
			nv_agent_of(agent)->info.device_index,
			(unsigned long long)q->pub.amd->hsa.id);
}

/* For tests: the queue's stream. */
CUstream nv_queue_stream(const struct aql_queue_impl *q)
{
	return ((const struct nvq *)q->agent_state)->stream;
}

aql_status nv_queue_attach(aql_agent *agent, struct aql_queue_impl *q)
{
	struct nv_agent *a = nv_agent_of(agent);
	const char *call;
	struct nvq *s;
	char name[16];
	aql_status st;
	CUresult r;
	int err;

	st = nv_enter(a);
	if (st != AQL_OK)
		return st;
	if (posix_memalign((void **)&s, 64, sizeof(*s)))
		return aql_fail(AQL_ERR_NOMEM, "CUDA queue: no memory");
	*s = (struct nvq){ .a = a, .cu = a->cu, .q = q,
			   .device_path = a->info.signal_path == AQL_SIGNAL_PATH_DEVICE,
			   .next = q->pub.amd->read_dispatch_id, .limit = UINT64_MAX };
	s->stop.kind = AQL_SIGNAL_KIND_USER;
	s->cancel.kind = AQL_SIGNAL_KIND_USER;
	s->done = s->enqueued = s->translated = s->next;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->list_lock, NULL);
	pthread_mutex_init(&s->calls_lock, NULL);
	st = aql_signal_create((int64_t)s->next, &s->started);
	if (st == AQL_OK)
		st = aql_signal_create((int64_t)s->next, &s->landed);
	if (st == AQL_OK)
		st = nv_signal_reach(a, s->started);
	if (st == AQL_OK)
		st = nv_signal_reach(a, s->landed);
	if (st != AQL_OK)
		goto fail;
	r = stream_create(s, &call);
	if (r != CUDA_SUCCESS) {
		st = nv_fail(r, call, "NVIDIA agent %u: a queue's stream", a->info.device_index);
		goto fail;
	}
	q->agent_state = s;
	if (q->flags & AQL_QUEUE_RESIDENT) {
		s->limit = s->next;
		st = nv_resident_start(a, q, &s->res);
		if (st == AQL_OK)
			return AQL_OK;
		q->agent_state = NULL;
		a->cu->cuStreamDestroy(s->stream);
		goto fail;
	}
	err = pthread_create(&s->thread, NULL, processor_main, s);
	if (err) {
		q->agent_state = NULL;
		a->cu->cuStreamDestroy(s->stream);
		st = aql_fail_errno(AQL_ERR_SYSTEM, err, "CUDA queue: starting the processor thread");
		goto fail;
	}
	snprintf(name, sizeof(name), "aql-cuda-q%llu", (unsigned long long)q->pub.amd->hsa.id);
	pthread_setname_np(s->thread, name);
	return AQL_OK;
fail:
	free_state(s);
	return st;
}

/* Wait for the stream to run what it has, waking waiters as packets
 * finish. Returns the last cuStreamQuery result: NOT_READY if the wait
 * ran out. */
static CUresult drain(struct nvq *s)
{
	uint64_t deadline = aql_deadline(STALL_NS), nap = 1000;
	CUresult r;

	for (;;) {
		uint64_t upto = __atomic_load_n(&s->enqueued, __ATOMIC_ACQUIRE);

		r = s->cu->cuStreamQuery(s->stream);
		if (r == CUDA_SUCCESS) {
			pthread_mutex_lock(&s->list_lock);
			s->done = upto;
			pthread_mutex_unlock(&s->list_lock);
		}
		if (r != CUDA_ERROR_NOT_READY || aql_now_ns() >= deadline)
			return r;
		reap(s, 0, NULL);
		sleep_ns(nap);
		nap = nap * 2 > POLL_MAX_SLEEP_NS ? POLL_MAX_SLEEP_NS : nap * 2;
	}
}

void nv_queue_detach(aql_agent *agent, struct aql_queue_impl *q)
{
	struct nvq *s = q->agent_state;
	CUresult r = CUDA_SUCCESS;
	int keep = 0, entered;

	(void)agent;
	if (s->res) {
		/* The processor stops between packets; the ring's packets
		 * from where it stopped on are the core's to cancel. */
		nv_resident_stop(s->res);
		s->res = NULL;
		pthread_mutex_lock(&s->lock);
		s->next = __atomic_load_n(&q->pub.amd->read_dispatch_id, __ATOMIC_ACQUIRE);
		pthread_mutex_unlock(&s->lock);
	} else {
		aql_signal_store(&s->stop, 1, AQL_RELEASE);
		pthread_join(s->thread, NULL);
	}
	entered = nv_enter(s->a) == AQL_OK;
	pthread_mutex_lock(&s->lock);
	/* Owed stores go out; without the context, halt() below gives
	 * their packets -1. */
	if (entered)
		flush_writes(s);
	s->failed = 1;
	pthread_mutex_unlock(&s->lock);
	if (!entered) {
		aql_queue_fail(q, AQL_ERR_DEVICE, "CUDA queue %llu: at destroy: %s",
			       (unsigned long long)q->pub.amd->hsa.id, aql_error_message());
		r = CUDA_ERROR_INVALID_CONTEXT;
	} else if (!__atomic_load_n(&s->dead, __ATOMIC_ACQUIRE)) {
		r = drain(s);
	}
	if (r == CUDA_SUCCESS) {
		reap(s, 0, NULL);
	} else if (r == CUDA_ERROR_NOT_READY) {
		aql_queue_fail(q, AQL_ERR_TIMEOUT,
			       "CUDA queue %llu destroyed while its stream was still busy after %llu s (a dependency that never came?): its packets got -1",
			       (unsigned long long)q->pub.amd->hsa.id, STALL_NS / 1000000000ull);
		aql_signal_store(&s->cancel, 1, AQL_RELEASE);
		keep = 1;
	} else if (r != CUDA_ERROR_INVALID_CONTEXT) {
		fail_stream(s, r);
	}
	pthread_mutex_lock(&s->lock);
	if (!s->halted && r != CUDA_SUCCESS)
		halt(s);
	pthread_mutex_unlock(&s->lock);
	/* A busy stream is released by the driver once its work ends. */
	if (r != CUDA_ERROR_INVALID_CONTEXT)
		s->cu->cuStreamDestroy(s->stream);
	pthread_mutex_lock(&hook_lock);
	q->agent_state = NULL;
	pthread_mutex_unlock(&hook_lock);
	/* Host functions the stream never ran (after a fault) may still run
	 * or hold the state: keep it. */
	if (keep || __atomic_load_n(&s->calls, __ATOMIC_ACQUIRE))
		abandon(s);
	else
		free_state(s);
}

/* ---- the resident processor's translating path ---- */

int nv_queue_run_one(struct aql_queue_impl *q, uint64_t id, const int *stop)
{
	struct nvq *s = q->agent_state;
	uint64_t nap = 1000;
	int failed;

	pthread_mutex_lock(&s->lock);
	/* The processor ran every packet before id itself. */
	if (!s->failed)
		s->next = id;
	s->limit = id + 1;
	translate_ready(s);
	if (!s->failed && s->nwrites)
		flush_writes(s);
	pthread_mutex_unlock(&s->lock);
	/* In ring order: the processor goes on once this packet finished;
	 * a destroy stops the wait (its drain waits for the stream). */
	while (reap(s, 1, NULL) && !__atomic_load_n(stop, __ATOMIC_ACQUIRE)) {
		sleep_ns(nap);
		nap = nap * 2 > POLL_MAX_SLEEP_NS ? POLL_MAX_SLEEP_NS : nap * 2;
	}
	pthread_mutex_lock(&s->lock);
	halt_if_drained(s);
	failed = s->failed;
	pthread_mutex_unlock(&s->lock);
	return !failed;
}

void nv_queue_resident_failed(struct aql_queue_impl *q, CUresult r)
{
	struct nvq *s = q->agent_state;

	aql_queue_fail(q, AQL_ERR_DEVICE,
		       "CUDA queue %llu: its resident processor failed: %s (%s); the device "
		       "context is unusable from here on", (unsigned long long)q->pub.amd->hsa.id,
		       nv_result_name(r), nv_result_string(r));
	__atomic_store_n(&s->dead, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&s->lock);
	s->next = __atomic_load_n(&q->pub.amd->read_dispatch_id, __ATOMIC_ACQUIRE);
	s->failed = 1;
	if (!s->halted)
		halt(s);
	pthread_mutex_unlock(&s->lock);
}

uint64_t nv_queue_fallbacks(aql_agent *agent, struct aql_queue_impl *q)
{
	struct nvq *s;
	uint64_t n = 0;

	(void)agent;
	pthread_mutex_lock(&hook_lock);
	s = q->agent_state;
	if (s && s->res)
		n = nv_resident_fallbacks(s->res);
	pthread_mutex_unlock(&hook_lock);
	return n;
}

int nv_queue_find_pending(aql_agent *agent, struct aql_queue_impl *q,
			  int (*match)(const aql_packet *packet, void *user), void *user,
			  aql_packet *found, uint64_t *packet_id)
{
	struct nvq *s;
	uint64_t limit;
	int hit = 0;

	(void)agent;
	pthread_mutex_lock(&hook_lock);
	s = q->agent_state;
	if (s) {
		pthread_mutex_lock(&s->list_lock);
		limit = progress(s->landed);
		if (s->done > limit)
			limit = s->done;
		for (uint32_t i = 0; i < s->list_count && !hit; i++) {
			const struct inflight *e = &s->list[(s->list_first + i) % s->list_cap];

			/* Its completion value seen: finished, though the
			 * progress word may not have landed yet. */
			if (e->id < limit || (e->signal && value_stored(e)))
				continue;
			if (match(&e->packet, user)) {
				*found = e->packet;
				*packet_id = e->id;
				hit = 1;
			}
		}
		pthread_mutex_unlock(&s->list_lock);
	}
	pthread_mutex_unlock(&hook_lock);
	return hit;
}
