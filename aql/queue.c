/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/agent_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/spin.h"
#include "aql/queue_impl.h"
#include "graph/graph_impl.h"
#include "aql/timeline.h"
#include "mem/host_mem.h"
#include "mem/pages.h"

#define DEFAULT_SIZE 4096u
#define DEFAULT_FULL_TIMEOUT_NS 1000000000ull
#define SPACE_SPIN_NS 5000u
/* A hardware packet processor wakes no producer: they poll its read
 * index this often, and ask the agent this often whether they may run
 * packets themselves (aql_agent_ops.queue_make_room). */
#define SPACE_POLL_NS 50000u

static uint64_t next_queue_id;
/* Each producer thread's polls of a full ring (util/spin.h). */
static __thread struct aql_spin space_spin;
/* The queue whose error callback this thread runs, if any. */
static __thread struct aql_queue_impl *in_callback;

/* Every queue between its attach and its destroy, for find_pending. */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct aql_queue_impl *live_queues;
/* Live queues whose agent has queue_request: none, and a request is free. */
static uint32_t live_requesters;
/* Queues with a service (aql_queue_set_service()); their flushes end on
 * service_idle. Written under live_lock, read without it. */
static uint32_t live_services;
static pthread_cond_t service_idle = PTHREAD_COND_INITIALIZER;

static aql_status check_config(const aql_agent_info *info, const aql_queue_config *c)
{
	if (c->size == 0 || (c->size & (c->size - 1)) || c->size > info->max_queue_size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"queue size %u: must be a power of two from 1 to %u packets",
				c->size, info->max_queue_size);
	if (c->type != AQL_QUEUE_MULTI && c->type != AQL_QUEUE_SINGLE)
		return aql_fail(AQL_ERR_INVALID_ARG, "queue type %d is unknown", (int)c->type);
	if (c->flags & ~(uint32_t)(AQL_QUEUE_PROFILING | AQL_QUEUE_LOW_PRIORITY |
				   AQL_QUEUE_HIGH_PRIORITY | AQL_QUEUE_RESIDENT |
				   AQL_QUEUE_RESIDENT_BLOCKS(0xff)))
		return aql_fail(AQL_ERR_INVALID_ARG, "queue flags 0x%x has unknown bits", c->flags);
	if ((c->flags & AQL_QUEUE_RESIDENT_BLOCKS(0xff)) && !(c->flags & AQL_QUEUE_RESIDENT))
		return aql_fail(AQL_ERR_INVALID_ARG, "queue flags 0x%x give resident blocks "
				"without AQL_QUEUE_RESIDENT", c->flags);
	if ((c->flags & AQL_QUEUE_LOW_PRIORITY) && (c->flags & AQL_QUEUE_HIGH_PRIORITY))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"queue flags 0x%x ask for both low and high priority", c->flags);
	return AQL_OK;
}

static const char *priority_name(enum aql_queue_priority priority)
{
	return priority == AQL_QUEUE_PRIORITY_LOW ? "low" :
	       priority == AQL_QUEUE_PRIORITY_HIGH ? "high" : "normal";
}

static aql_status no_priorities(aql_agent *agent, enum aql_queue_priority priority)
{
	aql_agent_info info;

	agent->ops->get_info(agent, &info);
	return aql_fail(AQL_ERR_UNSUPPORTED, "%s priority: queues of the %s agent %s have none",
			priority_name(priority), aql_agent_kind_name(info.kind), info.name);
}

/*
 * The ring and the amd_queue_t each take whole pages of their own: a GPU
 * agent maps each as one buffer, and KFD (6.12+, kfd_queue.c
 * kfd_queue_buffer_get) wants the ring's and the read and write pointers'
 * mappings to be exactly theirs.
 */
static size_t ring_bytes(uint32_t size)
{
	return aql_page_round((size_t)size * sizeof(aql_packet));
}

static void free_queue(struct aql_queue_impl *q)
{
	pthread_mutex_destroy(&q->priority_lock);
	aql_signal_destroy(q->pub.doorbell);
	aql_host_mem_free(q->pub.ring, ring_bytes(q->pub.size));
	aql_host_mem_free(q->pub.amd, aql_page_size());
	free(q);
}

static aql_status init_memory(struct aql_queue_impl *q, const aql_queue_config *c)
{
	aql_amd_queue *amd;
	aql_status st;

	st = aql_host_mem_alloc(ring_bytes(c->size), aql_page_size(), (void **)&q->pub.ring);
	if (st == AQL_OK)
		st = aql_host_mem_alloc(aql_page_size(), aql_page_size(), (void **)&q->pub.amd);
	/* -1: no packet id has been rung yet, so the first ring (id 0) is a change. */
	if (st == AQL_OK)
		st = aql_signal_create(-1, &q->pub.doorbell);
	if (st != AQL_OK)
		return st;
	for (uint32_t i = 0; i < c->size; i++)
		q->pub.ring[i].header = AQL_PACKET_INVALID;
	amd = q->pub.amd;
	amd->hsa.type = (uint32_t)c->type;
	amd->hsa.base_address = (uint64_t)(uintptr_t)q->pub.ring;
	amd->hsa.doorbell_signal = aql_signal_handle(q->pub.doorbell);
	amd->hsa.size = c->size;
	amd->hsa.id = __atomic_fetch_add(&next_queue_id, 1, __ATOMIC_RELAXED);
	amd->read_dispatch_id_field_base_byte_offset =
		(uint32_t)offsetof(aql_amd_queue, read_dispatch_id);
	amd->queue_properties = AQL_AMD_QUEUE_PROPERTY_IS_PTR64 |
		((c->flags & AQL_QUEUE_PROFILING) ? AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING : 0);
	amd->scratch_last_used_index = UINT64_MAX;
	/* Atomic: the signal may come from the pool with a late waker of its
	 * last use still reading queue_ptr (aql/signal.c). */
	__atomic_store_n(&q->pub.doorbell->queue_ptr, (uint64_t)(uintptr_t)amd, __ATOMIC_RELAXED);
	return AQL_OK;
}

aql_status aql_queue_create(aql_agent *agent, const aql_queue_config *config,
			    aql_queue **out)
{
	aql_queue_config c = config ? *config : (aql_queue_config){ 0 };
	struct aql_queue_impl *q;
	aql_agent_info info;
	aql_status st;

	if (!agent || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_queue_create: agent or out is NULL");
	if (c.size == 0)
		c.size = DEFAULT_SIZE;
	if (c.full_timeout_ns == 0)
		c.full_timeout_ns = DEFAULT_FULL_TIMEOUT_NS;
	agent->ops->get_info(agent, &info);
	st = check_config(&info, &c);
	if (st != AQL_OK)
		return st;
	if ((c.flags & AQL_QUEUE_RESIDENT) && !agent->ops->queue_fallbacks)
		return aql_fail(AQL_ERR_UNSUPPORTED, "AQL_QUEUE_RESIDENT: the %s agent %s has no "
				"resident packet processor (NVIDIA agents have one)",
				aql_agent_kind_name(info.kind), info.name);
	if (posix_memalign((void **)&q, 64, sizeof(*q)))
		return aql_fail(AQL_ERR_NOMEM, "aql_queue_create: no memory for the queue");
	*q = (struct aql_queue_impl){ .agent = agent, .flags = c.flags,
				      .error_callback = c.error_callback,
				      .error_user = c.error_user,
				      .priority = AQL_QUEUE_PRIORITY_NORMAL };
	pthread_mutex_init(&q->priority_lock, NULL);
	if (c.flags & AQL_QUEUE_LOW_PRIORITY)
		q->priority = AQL_QUEUE_PRIORITY_LOW;
	if (c.flags & AQL_QUEUE_HIGH_PRIORITY)
		q->priority = AQL_QUEUE_PRIORITY_HIGH;
	q->pub.size = c.size;
	q->pub.mask = c.size - 1;
	q->pub.type = c.type;
	q->pub.full_timeout_ns = c.full_timeout_ns;
	st = init_memory(q, &c);
	if (st == AQL_OK && q->priority != AQL_QUEUE_PRIORITY_NORMAL &&
	    !agent->ops->queue_set_priority)
		st = no_priorities(agent, q->priority);
	if (st == AQL_OK) {
		q->pub.amd->hsa.features = info.queue_features;
		st = agent->ops->queue_attach(agent, q);
	}
	if (st != AQL_OK) {
		free_queue(q);
		return st;
	}
	__atomic_fetch_add(&agent->queues, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&live_lock);
	q->next_live = live_queues;
	live_queues = q;
	if (agent->ops->queue_request)
		__atomic_fetch_add(&live_requesters, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&live_lock);
	*out = &q->pub;
	return AQL_OK;
}

aql_status aql_queue_set_priority(aql_queue *queue, enum aql_queue_priority priority)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	aql_status st = AQL_OK;

	if (!queue)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_queue_set_priority: queue is NULL");
	if ((unsigned)priority > AQL_QUEUE_PRIORITY_HIGH)
		return aql_fail(AQL_ERR_INVALID_ARG, "queue %llu: priority %d is unknown",
				(unsigned long long)queue->amd->hsa.id, (int)priority);
	pthread_mutex_lock(&q->priority_lock);
	if (__atomic_load_n(&q->detached, __ATOMIC_ACQUIRE))
		st = aql_fail(AQL_ERR_QUEUE_ERROR, "queue %llu is inactive: no processor to give "
			      "a priority", (unsigned long long)queue->amd->hsa.id);
	else if (priority != q->priority) {
		if (q->agent->ops->queue_set_priority)
			st = q->agent->ops->queue_set_priority(q->agent, q, priority);
		else
			st = no_priorities(q->agent, priority);
		if (st == AQL_OK)
			q->priority = priority;
	}
	pthread_mutex_unlock(&q->priority_lock);
	return st;
}

aql_status aql_queue_resident_fallbacks(aql_queue *queue, uint64_t *count)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);

	if (!queue || !count)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_queue_resident_fallbacks: queue or count "
				"is NULL");
	if (!(q->flags & AQL_QUEUE_RESIDENT))
		return aql_fail(AQL_ERR_INVALID_ARG, "queue %llu is not resident (created without "
				"AQL_QUEUE_RESIDENT)", (unsigned long long)queue->amd->hsa.id);
	*count = q->agent->ops->queue_fallbacks(q->agent, q);
	return AQL_OK;
}

void aql_queue_cancel_pending(struct aql_queue_impl *q)
{
	uint64_t id = q->pub.amd->read_dispatch_id;
	uint64_t end = __atomic_load_n(&q->pub.amd->write_dispatch_id, __ATOMIC_ACQUIRE);

	for (; id < end && end - id <= q->pub.size; id++) {
		aql_packet *slot = aql_queue_slot(&q->pub, id);
		uint16_t header = __atomic_load_n(&slot->header, __ATOMIC_ACQUIRE);
		uint64_t signal;

		/* A slot still being written is its producer's: not read. */
		if (aql_header_type(header) == AQL_PACKET_INVALID)
			continue;
		signal = slot->dispatch.completion_signal;
		if (signal)
			aql_signal_store(aql_signal_from_handle(signal), -1, AQL_RELEASE);
	}
}

aql_status aql_queue_add_destroy_hook(aql_queue *queue, aql_queue_destroy_fn fn, void *user)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_queue_hook *h;

	if (!queue || !fn)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_queue_add_destroy_hook: a queue and a function are required");
	h = malloc(sizeof(*h));
	if (!h)
		return aql_fail(AQL_ERR_NOMEM, "queue %llu: no memory for a destroy hook",
				(unsigned long long)queue->amd->hsa.id);
	pthread_mutex_lock(&live_lock);
	*h = (struct aql_queue_hook){ q->hooks, fn, user };
	q->hooks = h;
	pthread_mutex_unlock(&live_lock);
	return AQL_OK;
}

aql_status aql_queue_remove_destroy_hook(aql_queue *queue, aql_queue_destroy_fn fn, void *user)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_queue_hook *gone = NULL;

	if (!queue || !fn)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_queue_remove_destroy_hook: a queue and a function are required");
	pthread_mutex_lock(&live_lock);
	for (struct aql_queue_hook **pp = &q->hooks; *pp; pp = &(*pp)->next) {
		if ((*pp)->fn == fn && (*pp)->user == user) {
			gone = *pp;
			*pp = gone->next;
			break;
		}
	}
	pthread_mutex_unlock(&live_lock);
	free(gone);
	return AQL_OK;
}

/* Run and free the queue's destroy hooks: taken off the queue first, so
 * that a hook may remove itself (a no-op then) and none runs twice. */
static void run_destroy_hooks(struct aql_queue_impl *q)
{
	struct aql_queue_hook *h;

	pthread_mutex_lock(&live_lock);
	h = q->hooks;
	q->hooks = NULL;
	pthread_mutex_unlock(&live_lock);
	while (h) {
		struct aql_queue_hook *next = h->next;

		h->fn(&q->pub, h->user);
		free(h);
		h = next;
	}
}

aql_status aql_queue_destroy(aql_queue *queue)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct aql_queue_impl **pp;

	if (!queue)
		return AQL_OK;
	/* Its caller (the processor, or a producer) still uses the queue. */
	if (in_callback == q)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"queue %llu: aql_queue_destroy from its own error callback; "
				"inactivate it there and destroy it after the callback returns",
				(unsigned long long)queue->amd->hsa.id);
	run_destroy_hooks(q);
	if (__atomic_load_n(&q->graph, __ATOMIC_RELAXED))
		aql_graph_queue_gone(q);
	if (!__atomic_exchange_n(&q->detached, 1, __ATOMIC_ACQ_REL)) {
		q->agent->ops->queue_detach(q->agent, q);
		aql_queue_cancel_pending(q);
	} else if (q->agent_state) {
		/* Inactivated from its error callback: the detach is ours. */
		q->agent->ops->queue_detach(q->agent, q);
	}
	/* Only now: until its packets were cancelled they were in flight. */
	pthread_mutex_lock(&live_lock);
	for (pp = &live_queues; *pp != q; pp = &(*pp)->next_live)
		;
	*pp = q->next_live;
	if (q->agent->ops->queue_request)
		__atomic_fetch_sub(&live_requesters, 1, __ATOMIC_RELAXED);
	if (q->service) {
		__atomic_fetch_sub(&live_services, 1, __ATOMIC_RELAXED);
		while (q->service->users)
			pthread_cond_wait(&service_idle, &live_lock);
	}
	pthread_mutex_unlock(&live_lock);
	if (q->service)
		q->service->destroy(q->service);
	aql_timeline_free(q->timeline);
	__atomic_fetch_sub(&q->agent->queues, 1, __ATOMIC_RELAXED);
	free_queue(q);
	return AQL_OK;
}

aql_status aql_queue_inactivate(aql_queue *queue)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);

	int was;

	if (!queue)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_queue_inactivate: queue is NULL");
	/* Under the priority lock: a priority change in progress finishes
	 * on the processor first, a later one sees the queue inactive. */
	pthread_mutex_lock(&q->priority_lock);
	was = __atomic_exchange_n(&q->detached, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_unlock(&q->priority_lock);
	if (was)
		return AQL_OK;
	/* The error state first, so producers stop, but no callback: the
	 * program asked for this. */
	if (!__atomic_exchange_n(&q->error_once, 1, __ATOMIC_ACQ_REL)) {
		snprintf(q->error_message, sizeof(q->error_message), "queue %llu was inactivated",
			 (unsigned long long)queue->amd->hsa.id);
		__atomic_store_n(&q->pub.error, (uint32_t)AQL_ERR_QUEUE_ERROR, __ATOMIC_RELEASE);
		aql_futex_bump_and_wake(&q->space_seq);
	}
	/* The callback runs on the agent's own threads (a processor, a
	 * watcher), which a detach would join or lock: halted now, the
	 * queue is detached by aql_queue_destroy(). */
	if (in_callback != q)
		q->agent->ops->queue_detach(q->agent, q);
	aql_queue_halt(q);
	aql_queue_cancel_pending(q);
	return AQL_OK;
}

aql_status aql_queue_set_error(aql_queue *queue, aql_status status, const char *message)
{
	if (!queue || !message || status == AQL_OK)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_queue_set_error: a queue, a failing status and a message are required");
	aql_queue_fail(aql_queue_impl(queue), status, "%s", message);
	return aql_queue_inactivate(queue);
}

/*
 * The packet at id if it is in flight. The header is loaded with acquire,
 * so that the body read after it is the one published with it. Meanwhile
 * the packet may finish and a producer reuse the slot: so the body is read
 * word by word, and kept only if afterwards the packet is still unretired
 * and its header unchanged (a seqlock's check).
 */
static int pending_at(aql_queue *queue, uint64_t id, aql_packet *out)
{
	aql_packet *slot = aql_queue_slot(queue, id);
	uint32_t *word = (uint32_t *)slot, *copy = (uint32_t *)out;
	uint32_t first = __atomic_load_n(&word[0], __ATOMIC_ACQUIRE);

	if (aql_header_type((uint16_t)first) == AQL_PACKET_INVALID)
		return 0;
	copy[0] = first;
	/* Acquire loads keep the checks below after them (free on x86). */
	for (size_t i = 1; i < sizeof(*out) / sizeof(*word); i++)
		copy[i] = __atomic_load_n(&word[i], __ATOMIC_ACQUIRE);
	return __atomic_load_n(&word[0], __ATOMIC_RELAXED) == first &&
	       __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_RELAXED) <= id;
}

struct aql_queue_service *aql_queue_set_service(aql_queue *queue, struct aql_queue_service *s)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);

	pthread_mutex_lock(&live_lock);
	if (!q->service) {
		__atomic_store_n(&q->service, s, __ATOMIC_RELEASE);
		__atomic_fetch_add(&live_services, 1, __ATOMIC_RELAXED);
	}
	s = q->service;
	pthread_mutex_unlock(&live_lock);
	return s;
}

void aql_queue_flush_service(aql_queue *queue)
{
	struct aql_queue_service *s = NULL;

	if (!queue || !__atomic_load_n(&live_services, __ATOMIC_RELAXED))
		return;
	/* queue may be destroyed: only a live one is touched. */
	pthread_mutex_lock(&live_lock);
	for (struct aql_queue_impl *q = live_queues; q; q = q->next_live)
		if (&q->pub == queue) {
			s = q->service;
			if (s)
				s->users++;
			break;
		}
	pthread_mutex_unlock(&live_lock);
	if (!s)
		return;
	/* Not under the lock: the flush writes output, which may block. */
	s->flush(s);
	pthread_mutex_lock(&live_lock);
	s->users--;
	pthread_cond_broadcast(&service_idle);
	pthread_mutex_unlock(&live_lock);
}

void aql_completion_request(aql_completion c)
{
	if (!c.queue || !c.signal || !__atomic_load_n(&live_requesters, __ATOMIC_RELAXED) ||
	    aql_signal_load(c.signal, AQL_ACQUIRE) < c.below)
		return;
	/* c.queue may be destroyed: only a live one is touched. */
	pthread_mutex_lock(&live_lock);
	for (struct aql_queue_impl *q = live_queues; q; q = q->next_live) {
		if (&q->pub != c.queue)
			continue;
		if (q->agent->ops->queue_request)
			q->agent->ops->queue_request(q->agent, q);
		break;
	}
	pthread_mutex_unlock(&live_lock);
}

int aql_queue_find_pending(int (*match)(const aql_packet *packet, void *user), void *user,
			   aql_packet *found, uint64_t *queue_id, uint64_t *packet_id)
{
	int hit = 0;

	pthread_mutex_lock(&live_lock);
	for (struct aql_queue_impl *q = live_queues; q && !hit; q = q->next_live) {
		aql_queue *queue = &q->pub;
		uint64_t id = __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_ACQUIRE);
		uint64_t end = __atomic_load_n(&queue->amd->write_dispatch_id, __ATOMIC_ACQUIRE);

		if (__atomic_load_n(&q->halted, __ATOMIC_ACQUIRE))
			continue;
		/* end - id can exceed the ring only while producers wait for room. */
		if (end - id > queue->size)
			end = id + queue->size;
		for (; id < end && !hit; id++) {
			if (pending_at(queue, id, found) && match(found, user)) {
				*queue_id = queue->amd->hsa.id;
				*packet_id = id;
				hit = 1;
			}
		}
		if (!hit && q->agent->ops->queue_find_pending &&
		    q->agent->ops->queue_find_pending(q->agent, q, match, user, found, packet_id)) {
			*queue_id = queue->amd->hsa.id;
			hit = 1;
		}
	}
	pthread_mutex_unlock(&live_lock);
	return hit;
}

aql_status aql_queue_fail(struct aql_queue_impl *q, aql_status status,
			  const char *fmt, ...)
{
	va_list ap;

	if (__atomic_exchange_n(&q->error_once, 1, __ATOMIC_ACQ_REL))
		return status;
	va_start(ap, fmt);
	vsnprintf(q->error_message, sizeof(q->error_message), fmt, ap);
	va_end(ap);
	/* Release: a producer that sees the error also sees the message. */
	__atomic_store_n(&q->pub.error, (uint32_t)status, __ATOMIC_RELEASE);
	/* Producers asleep on a full ring must see the error now. */
	aql_futex_bump_and_wake(&q->space_seq);
	if (q->error_callback) {
		in_callback = q;
		q->error_callback(&q->pub, status, q->error_message, q->error_user);
		in_callback = NULL;
	}
	return status;
}

aql_status aql_queue_hidden_args(aql_queue *queue, const aql_kernel *kernel,
				 aql_kernarg_hidden *out)
{
	aql_agent *agent;

	if (!queue || !kernel || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_queue_hidden_args: %s is NULL",
				!queue ? "queue" : !kernel ? "kernel" : "out");
	*out = (aql_kernarg_hidden){ .queue_ptr = (uint64_t)(uintptr_t)queue->amd };
	agent = aql_queue_impl(queue)->agent;
	/* The explicit arguments come first: no hidden ones, nothing to supply. */
	if (!agent->ops->kernel_hidden || kernel->metadata->arg_count <= kernel->explicit_arg_count)
		return AQL_OK;
	return agent->ops->kernel_hidden(agent, kernel, out);
}

aql_status aql_queue_error(aql_queue *queue, const char **message)
{
	aql_status st = (aql_status)__atomic_load_n(&queue->error, __ATOMIC_ACQUIRE);

	if (message)
		*message = st == AQL_OK ? "" : aql_queue_impl(queue)->error_message;
	return st;
}

aql_status aql_queue_report_error(aql_queue *queue)
{
	const char *message;
	aql_status st = aql_queue_error(queue, &message);

	return aql_fail(AQL_ERR_QUEUE_ERROR, "queue %llu stopped (%s): %s",
			(unsigned long long)queue->amd->hsa.id, aql_status_str(st), message);
}

/*
 * Whether ids first..first+n-1 fit in the ring. Before reserving, first is
 * only a guess that other producers may have overtaken, so it is reloaded
 * (after the read index, so it is never older than it).
 */
static int has_space(aql_queue *queue, uint64_t *first, uint32_t n, int reserved)
{
	uint64_t read = __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_SEQ_CST);

	__atomic_store_n(&queue->cached_read, read, __ATOMIC_RELEASE);
	if (!reserved)
		*first = __atomic_load_n(&queue->amd->write_dispatch_id, __ATOMIC_RELAXED);
	return *first + n - read <= queue->size;
}

/* Until when a producer waiting for space sleeps before it looks again:
 * a hardware processor wakes nobody, nor does a processor the agent may
 * let the producer stand in for later (asked_later). */
static uint64_t wake_by(const aql_queue *queue, uint64_t deadline, int asked_later)
{
	uint64_t poll;

	if (queue->doorbell->kind != AQL_SIGNAL_KIND_DOORBELL && !asked_later)
		return deadline;
	poll = aql_deadline(SPACE_POLL_NS);
	return poll < deadline ? poll : deadline;
}

/*
 * What a full-ring wait waits for: ids first..first+n-1 to fit, in
 * has_space()'s terms, and a batch more while it polls. A read-index poll
 * (aql_queue_load_read_index()) also ends when the processor finds no
 * packet at the read index: the one it waits for may be the poller's own.
 */
struct room {
	uint64_t first;
	uint32_t n, batch;
	int reserved;
	int poll;
};

static int room_now(aql_queue *queue, struct room *r, int polling)
{
	uint64_t read;

	if (has_space(queue, &r->first, polling ? r->batch : r->n, r->reserved))
		return 1;
	if (!r->poll)
		return 0;
	read = __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_SEQ_CST);
	return aql_header_type(__atomic_load_n(&aql_queue_slot(queue, read)->header,
					       __ATOMIC_ACQUIRE)) == AQL_PACKET_INVALID;
}

/*
 * Poll (for the thread's learnt budget), then sleep, until room_now(). 1
 * then; 0 on the queue's error or at deadline_ns. A waiter that may hold
 * ids beyond the ring sleeps as AQL_SPACE_HOLDS, which every freed quarter
 * wakes; one that holds none as AQL_SPACE_NEW.
 */
static int await_room(struct aql_queue_impl *q, struct room *r, uint64_t deadline_ns)
{
	aql_queue *queue = &q->pub;
	int (*make_room)(aql_agent *, struct aql_queue_impl *, uint64_t, uint64_t, uint64_t) =
		q->agent->ops->queue_make_room;
	uint64_t start = aql_now_ns();
	uint64_t spin_end = start + aql_spin_budget(&space_spin, SPACE_SPIN_NS);
	uint32_t seq, polls = 0;
	int slept = 0, room, spinning, made = 0;

	while (!(room = room_now(queue, r, aql_now_ns() < spin_end))) {
		if (__atomic_load_n(&queue->error, __ATOMIC_ACQUIRE) || aql_now_ns() >= deadline_ns)
			break;
		spinning = aql_now_ns() < spin_end;
		/* A processor that is not running would keep the producer
		 * waiting for a CPU to come to it (beside busy threads, a time
		 * slice): the agent may let the producer run packets itself.
		 * Asked on the first look, every 64th and before each sleep,
		 * for the room a poll waits for. */
		if (make_room && ((polls++ & 63) == 0 || !spinning) &&
		    (made = make_room(q->agent, q, r->first + r->batch - queue->size,
				      aql_now_ns() - start, deadline_ns)) > 0)
			continue;
		if (spinning) {
			aql_cpu_relax();
			continue;
		}
		slept = 1;
		/* Pairs with aql_queue_wake_producers(): announce, then re-check. */
		if (r->reserved)
			__atomic_fetch_add(&q->space_holders, 1, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&q->space_waiters, 1, __ATOMIC_SEQ_CST);
		seq = __atomic_load_n(&q->space_seq, __ATOMIC_ACQUIRE);
		if (!room_now(queue, r, 0) && !__atomic_load_n(&queue->error, __ATOMIC_ACQUIRE))
			aql_futex_wait_bits(&q->space_seq, seq,
					    r->reserved ? AQL_SPACE_HOLDS : AQL_SPACE_NEW,
					    wake_by(queue, deadline_ns, made < 0));
		__atomic_fetch_sub(&q->space_waiters, 1, __ATOMIC_RELAXED);
		if (r->reserved)
			__atomic_fetch_sub(&q->space_holders, 1, __ATOMIC_RELAXED);
	}
	aql_spin_learn(&space_spin, SPACE_SPIN_NS, slept ? aql_now_ns() - start : 0);
	return room;
}

aql_status aql_queue_wait_space(aql_queue *queue, uint64_t first, uint32_t n,
				int reserved)
{
	struct aql_queue_impl *q = aql_queue_impl(queue);
	struct room r = { .first = first, .n = n, .reserved = reserved };

	if (n == 0 || n > queue->size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"queue %llu: cannot reserve %u packets in a ring of %u",
				(unsigned long long)queue->amd->hsa.id, n, queue->size);
	/*
	 * While polling, a producer that reserved nothing yet waits for room
	 * for a batch more: one that takes each slot as it frees runs in
	 * lockstep with the processor, the two taking turns at the same cache
	 * lines for every packet. One that holds ids waits for them alone,
	 * since the processor cannot pass them.
	 */
	r.batch = reserved ? n : queue->size - n >= queue->size / 16 ? n + queue->size / 16 :
		  queue->size;
	if (await_room(q, &r, aql_deadline(queue->full_timeout_ns)))
		return AQL_OK;
	first = r.first;
	if (__atomic_load_n(&queue->error, __ATOMIC_ACQUIRE))
		return aql_queue_report_error(queue);
	/* The batch is a poll's wish: never fail with room for n. */
	if (has_space(queue, &first, n, reserved))
		return AQL_OK;
	if (reserved)
		aql_queue_fail(q, AQL_ERR_QUEUE_FULL,
			       "packet id %llu was reserved but the ring stayed full for %llu ns",
			       (unsigned long long)first,
			       (unsigned long long)queue->full_timeout_ns);
	return aql_fail(AQL_ERR_QUEUE_FULL,
			"queue %llu full: %u packet(s) did not fit within %llu ns (write index %llu, read index %llu, size %u)",
			(unsigned long long)queue->amd->hsa.id, n,
			(unsigned long long)queue->full_timeout_ns,
			(unsigned long long)first,
			(unsigned long long)queue->amd->read_dispatch_id,
			queue->size);
}

uint64_t aql_queue_load_read_index(aql_queue *queue, uint64_t timeout_ns)
{
	uint64_t read = __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_ACQUIRE);
	/* In has_space()'s terms: ids up to read + size - 1 fit once the read
	 * index moved past read, and a batch more once it passed read + batch.
	 * The poller may hold ids (a MULTI producer that added to the write
	 * index first), so it is a holder. */
	struct room r = { .first = read + queue->size, .n = 1, .batch = queue->size / 16 + 1,
			  .reserved = 1, .poll = 1 };

	if (__atomic_load_n(&queue->amd->write_dispatch_id, __ATOMIC_RELAXED) - read <
		    queue->size || queue->doorbell->kind == AQL_SIGNAL_KIND_DOORBELL ||
	    __atomic_load_n(&queue->error, __ATOMIC_RELAXED))
		return read;
	await_room(aql_queue_impl(queue), &r, aql_deadline(timeout_ns));
	return __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_ACQUIRE);
}
