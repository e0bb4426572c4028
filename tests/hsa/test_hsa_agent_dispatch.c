/* SPDX-License-Identifier: MIT */
/*
 * Agent dispatch as the HSA specification describes it: the program makes
 * a soft queue in a region with a doorbell signal of its own, and a thread
 * of its own serves it, running the function each AGENT_DISPATCH packet's
 * type names, writing the result to return_address, signalling completion,
 * invalidating the header and advancing the read index. Producers (one,
 * or three on a MULTI queue) use the usual reserve / write / header last /
 * doorbell sequence through small rings that wrap many times. Also a
 * kernel dispatch queue's barrier-AND waiting on a soft queue's packet,
 * and the code of every bad argument. argv[1]: the library.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "hsa_test.h"

/* The service's functions; HSA leaves types from 0x8000 to the application. */
enum op { OP_ADD = 0x8000, OP_MUL, OP_STOP };

struct service {
	hsa_queue_t *q;
	pthread_t thread;
	uint64_t served;	/* packets run, STOP included; read after join */
	int error;		/* what went wrong, 0 if nothing */
};

static hsa_agent_dispatch_packet_t *slot(const hsa_queue_t *q, uint64_t id)
{
	return (hsa_agent_dispatch_packet_t *)q->base_address + (id & (q->size - 1));
}

static uint64_t expected(uint64_t i)
{
	return i & 1 ? i * (3 * i + 1) : i + (3 * i + 1);
}

/* The program's packet processor. */
static void *serve(void *arg)
{
	struct service *s = arg;
	hsa_queue_t *q = s->q;
	hsa_signal_t doorbell = q->doorbell_signal;
	uint64_t read = hsa_queue_load_read_index_relaxed(q);
	uint64_t deadline = ht_now_ns() + ht_timeout_ns();
	hsa_signal_value_t seen = hsa_signal_load_relaxed(doorbell);

	for (;;) {
		hsa_agent_dispatch_packet_t *p = slot(q, read);
		/* Header and type in one load: producers publish them together. */
		uint32_t word = __atomic_load_n((uint32_t *)p, __ATOMIC_ACQUIRE);
		uint32_t type = (word >> HSA_PACKET_HEADER_TYPE) & ((1u << HSA_PACKET_HEADER_WIDTH_TYPE) - 1);
		uint16_t op = (uint16_t)(word >> 16);
		hsa_signal_t completion;
		uint64_t *ret;
		uint64_t now = ht_now_ns();

		if (type == HSA_PACKET_TYPE_INVALID) {
			if (now >= deadline) {
				s->error = 1;
				return NULL;
			}
			if (q->type == HSA_QUEUE_TYPE_SINGLE)
				/* One producer rings ids in order: sleep until this one. */
				hsa_signal_wait_scacquire(doorbell, HSA_SIGNAL_CONDITION_GTE,
							  (hsa_signal_value_t)read, deadline - now,
							  HSA_WAIT_STATE_BLOCKED);
			else
				/* Producers ring in any order (an earlier id may overwrite a
				 * later one): sleep until any ring, then look at the ring
				 * buffer; the bound covers a ring overwritten unseen. */
				seen = hsa_signal_wait_scacquire(doorbell, HSA_SIGNAL_CONDITION_NE,
								 seen, 10000000,
								 HSA_WAIT_STATE_BLOCKED);
			continue;
		}
		if (type != HSA_PACKET_TYPE_AGENT_DISPATCH) {
			s->error = 2;
			return NULL;
		}
		ret = p->return_address;
		completion = p->completion_signal;
		switch (op) {
		case OP_ADD:
			*ret = p->arg[0] + p->arg[1];
			break;
		case OP_MUL:
			*ret = p->arg[0] * p->arg[1];
			break;
		case OP_STOP:
			break;
		default:
			s->error = 3;
			return NULL;
		}
		if (completion.handle)
			hsa_signal_subtract_screlease(completion, 1);
		/* The slot goes back to the producers: header first, then the index. */
		__atomic_store_n(&p->header, (uint16_t)HSA_PACKET_TYPE_INVALID, __ATOMIC_RELAXED);
		hsa_queue_store_read_index_screlease(q, ++read);
		s->served++;
		if (op == OP_STOP)
			return NULL;
	}
}

/* Reserve a slot, wait until it is free, write the body, publish, ring. 0 on timeout. */
static int submit(hsa_queue_t *q, uint16_t op, uint64_t a, uint64_t b, uint64_t *ret,
		  hsa_signal_t completion)
{
	uint64_t id = hsa_queue_add_write_index_scacq_screl(q, 1);
	uint64_t t0 = ht_now_ns();
	hsa_agent_dispatch_packet_t *p = slot(q, id);

	while (id - hsa_queue_load_read_index_scacquire(q) >= q->size) {
		if (ht_now_ns() - t0 > ht_timeout_ns())
			return 0;
		sched_yield();
	}
	p->reserved0 = 0;
	p->return_address = ret;
	p->arg[0] = a;
	p->arg[1] = b;
	p->arg[2] = p->arg[3] = 0;
	p->reserved2 = 0;
	p->completion_signal = completion;
	ht_publish(p, ht_header(HSA_PACKET_TYPE_AGENT_DISPATCH), op);
	hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)id);
	return 1;
}

struct producer {
	hsa_queue_t *q;
	uint64_t *results;
	uint64_t first, count;
	hsa_signal_t done;
	int ok;
};

/* Packets first..first+count-1: ADD for even ones, MUL for odd ones. */
static void *produce(void *arg)
{
	struct producer *p = arg;

	p->ok = 1;
	for (uint64_t i = p->first; i < p->first + p->count && p->ok; i++)
		p->ok = submit(p->q, i & 1 ? OP_MUL : OP_ADD, i, 3 * i + 1, &p->results[i],
			       p->done);
	return NULL;
}

static void start_service(struct service *s, hsa_queue_t *q)
{
	memset(s, 0, sizeof(*s));
	s->q = q;
	if (pthread_create(&s->thread, NULL, serve, s)) {
		fprintf(stderr, "pthread_create failed\n");
		exit(1);
	}
}

/* STOP the service and join it; it must have run want packets besides. */
static void stop_service(struct service *s, uint64_t want)
{
	CHECK(submit(s->q, OP_STOP, 0, 0, NULL, (hsa_signal_t){ 0 }), "STOP: no free slot");
	pthread_join(s->thread, NULL);
	CHECK(s->error == 0, "service error %d", s->error);
	CHECK(s->served == want + 1, "served %llu of %llu", (unsigned long long)s->served,
	      (unsigned long long)want + 1);
	CHECK(hsa_queue_load_read_index_scacquire(s->q) == want + 1 &&
	      hsa_queue_load_write_index_scacquire(s->q) == want + 1, "indices %llu, %llu",
	      (unsigned long long)hsa_queue_load_read_index_scacquire(s->q),
	      (unsigned long long)hsa_queue_load_write_index_scacquire(s->q));
}

/* A fresh soft queue is as the specification says. */
static void check_fresh(hsa_queue_t *q, uint32_t size, hsa_queue_type32_t type,
			hsa_signal_t doorbell)
{
	int invalid = 1;

	CHECK(q->size == size && q->type == type, "size %u type %u", q->size, q->type);
	CHECK(q->features == HSA_QUEUE_FEATURE_AGENT_DISPATCH, "features 0x%x", q->features);
	CHECK(q->doorbell_signal.handle == doorbell.handle, "doorbell is the program's");
	CHECK(q->base_address && (uintptr_t)q->base_address % 64 == 0, "ring %p",
	      q->base_address);
	for (uint32_t i = 0; i < size; i++)
		invalid &= slot(q, i)->header == HSA_PACKET_TYPE_INVALID;
	CHECK(invalid, "every header starts INVALID");
	CHECK(hsa_queue_load_read_index_relaxed(q) == 0 &&
	      hsa_queue_load_write_index_relaxed(q) == 0, "indices start at 0");
}

/* count packets through a soft queue of size slots, from 1 + extra producers. */
static void run(hsa_region_t fine, hsa_queue_type32_t type, uint32_t size, uint64_t count,
		unsigned extra)
{
	struct producer prod[3];
	struct service s;
	pthread_t threads[2];
	uint64_t *results = calloc(count, sizeof(*results));
	hsa_signal_t doorbell, done;
	hsa_queue_t *q = NULL;
	uint64_t wrong = 0, share = count / (extra + 1);

	CHECK_OK(hsa_signal_create(-1, 0, NULL, &doorbell));
	CHECK_OK(hsa_signal_create((hsa_signal_value_t)count, 0, NULL, &done));
	CHECK_OK(hsa_soft_queue_create(fine, size, type, HSA_QUEUE_FEATURE_AGENT_DISPATCH,
				       doorbell, &q));
	if (!q || !results)
		exit(1);
	check_fresh(q, size, type, doorbell);
	for (uint64_t i = 0; i < count; i++)
		results[i] = UINT64_MAX;
	start_service(&s, q);
	for (unsigned t = 0; t <= extra; t++)
		prod[t] = (struct producer){ q, results, t * share,
					     t == extra ? count - t * share : share, done, 0 };
	for (unsigned t = 1; t <= extra; t++)
		if (pthread_create(&threads[t - 1], NULL, produce, &prod[t]))
			exit(1);
	produce(&prod[0]);
	for (unsigned t = 1; t <= extra; t++)
		pthread_join(threads[t - 1], NULL);
	for (unsigned t = 0; t <= extra; t++)
		CHECK(prod[t].ok, "producer %u found no free slot", t);
	CHECK(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(),
					HSA_WAIT_STATE_BLOCKED) == 0, "%llu packets completed",
	      (unsigned long long)count);
	for (uint64_t i = 0; i < count; i++)
		wrong += results[i] != expected(i);
	CHECK(wrong == 0, "%llu of %llu results wrong", (unsigned long long)wrong,
	      (unsigned long long)count);
	stop_service(&s, count);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_ST(hsa_queue_destroy(q), HSA_STATUS_ERROR_INVALID_QUEUE);
	/* The doorbell stays the program's. */
	CHECK_OK(hsa_signal_destroy(doorbell));
	CHECK_OK(hsa_signal_destroy(done));
	free(results);
}

/* Not completed within 20 ms (a dependency holds it back). */
static int held(hsa_signal_t s)
{
	return hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_EQ, 0, 20000000,
					 HSA_WAIT_STATE_BLOCKED) != 0;
}

/* A barrier-AND on aql's queue waits for a packet of the soft queue. */
static void cross_queue(hsa_agent_t cpu, hsa_region_t fine)
{
	hsa_barrier_and_packet_t and_ = { 0 };
	hsa_signal_t doorbell, dep, c;
	hsa_queue_t *hq = NULL, *q = NULL;
	struct service s;
	uint64_t result = 0, id;
	char *slot_;

	CHECK_OK(hsa_queue_create(cpu, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &hq));
	CHECK_OK(hsa_signal_create(-1, 0, NULL, &doorbell));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &dep));
	CHECK_OK(hsa_signal_create(1, 0, NULL, &c));
	CHECK_OK(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE,
				       HSA_QUEUE_FEATURE_AGENT_DISPATCH, doorbell, &q));
	if (!hq || !q)
		exit(1);
	CHECK(q->id != hq->id, "soft queue id %llu is aql's queue's too",
	      (unsigned long long)q->id);
	start_service(&s, q);

	and_.dep_signal[0] = dep;
	and_.completion_signal = c;
	id = hsa_queue_add_write_index_screlease(hq, 1);
	slot_ = (char *)hq->base_address + (id % hq->size) * 64;
	memcpy(slot_ + 4, (const char *)&and_ + 4, 60);
	ht_publish(slot_, ht_header(HSA_PACKET_TYPE_BARRIER_AND), 0);
	hsa_signal_store_screlease(hq->doorbell_signal, (hsa_signal_value_t)id);
	CHECK(held(c), "barrier-AND before the agent dispatch ran");

	CHECK(submit(q, OP_ADD, 40, 2, &result, dep), "no free slot");
	CHECK(hsa_signal_wait_scacquire(c, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(),
					HSA_WAIT_STATE_BLOCKED) == 0, "barrier-AND completed");
	CHECK(result == 42, "result %llu after the barrier", (unsigned long long)result);
	stop_service(&s, 1);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_queue_destroy(hq));
	CHECK_OK(hsa_signal_destroy(doorbell));
	CHECK_OK(hsa_signal_destroy(dep));
	CHECK_OK(hsa_signal_destroy(c));
}

static void bad_creates(hsa_agent_t cpu, hsa_region_t fine)
{
	const uint32_t agent = HSA_QUEUE_FEATURE_AGENT_DISPATCH;
	hsa_region_t coarse = ht_region(cpu, HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED);
	hsa_signal_t doorbell, dead;
	hsa_queue_t *q = NULL, *hq = NULL;

	CHECK_OK(hsa_signal_create(-1, 0, NULL, &doorbell));
	CHECK_OK(hsa_signal_create(0, 0, NULL, &dead));
	CHECK_OK(hsa_signal_destroy(dead));
	CHECK_OK(hsa_queue_create(cpu, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &hq));
	CHECK_ST(hsa_soft_queue_create((hsa_region_t){ 8 }, 4, HSA_QUEUE_TYPE_SINGLE, agent,
				       doorbell, &q), HSA_STATUS_ERROR_INVALID_REGION);
	CHECK_ST(hsa_soft_queue_create(coarse, 4, HSA_QUEUE_TYPE_SINGLE, agent, doorbell, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 0, HSA_QUEUE_TYPE_SINGLE, agent, doorbell, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 12, HSA_QUEUE_TYPE_SINGLE, agent, doorbell, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 1u << 31, HSA_QUEUE_TYPE_MULTI, agent, doorbell,
				       &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 4, 7, agent, doorbell, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE, 0, doorbell, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE, agent | 4, doorbell, &q),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE, agent,
				       (hsa_signal_t){ 0 }, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE, agent, dead, &q),
		 HSA_STATUS_ERROR_INVALID_SIGNAL);
	/* aql's queue's doorbell is not the program's signal. */
	CHECK_ST(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE, agent,
				       hq->doorbell_signal, &q), HSA_STATUS_ERROR_INVALID_SIGNAL);
	CHECK_ST(hsa_soft_queue_create(fine, 4, HSA_QUEUE_TYPE_SINGLE, agent, doorbell, NULL),
		 HSA_STATUS_ERROR_INVALID_ARGUMENT);

	/* Size 1 and both features are fine; nothing stamps a soft queue's packets. */
	CHECK_OK(hsa_soft_queue_create(fine, 1, HSA_QUEUE_TYPE_MULTI,
				       agent | HSA_QUEUE_FEATURE_KERNEL_DISPATCH, doorbell, &q));
	CHECK_ST(hsa_amd_profiling_set_profiler_enabled(q, 1), HSA_STATUS_ERROR);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_queue_destroy(hq));
	CHECK_OK(hsa_signal_destroy(doorbell));
}

int main(int argc, char **argv)
{
	hsa_agent_t cpu;
	hsa_region_t fine;
	hsa_signal_t doorbell;
	hsa_queue_t *q = NULL, *left = NULL;

	if (argc < 2) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_soft_queue_create((hsa_region_t){ 8 }, 4, HSA_QUEUE_TYPE_SINGLE,
				       HSA_QUEUE_FEATURE_AGENT_DISPATCH, (hsa_signal_t){ 8 }, &q),
		 HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	cpu = ht_cpu_agent();
	fine = ht_region(cpu, HSA_REGION_GLOBAL_FLAG_FINE_GRAINED);
	bad_creates(cpu, fine);
	run(fine, HSA_QUEUE_TYPE_SINGLE, 4, 1000, 0);
	run(fine, HSA_QUEUE_TYPE_MULTI, 8, 3000, 2);
	cross_queue(cpu, fine);

	/* The last hsa_shut_down releases a soft queue left behind. */
	CHECK_OK(hsa_signal_create(-1, 0, NULL, &doorbell));
	CHECK_OK(hsa_soft_queue_create(fine, 16, HSA_QUEUE_TYPE_SINGLE,
				       HSA_QUEUE_FEATURE_AGENT_DISPATCH, doorbell, &left));
	CHECK_OK(hsa_shut_down());
	CHECK_OK(hsa_init());
	CHECK_ST(hsa_queue_destroy(left), HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
