/* SPDX-License-Identifier: MIT */
/*
 * Queues as an HSA conformance program uses them, with their error paths:
 * as many queues as HSA_AGENT_INFO_QUEUES_MAX says (in an array sized by
 * it) and OUT_OF_RESOURCES past it, destroyed from several threads at
 * once; a queue whose size is QUEUES_MAX, driven by the index atomics;
 * a dispatch with no kernel object, reported to the error callback from
 * a runtime thread while the program waits in a signal wait; and
 * hsa_queue_inactivate. argv[1]: the library.
 */
#include <pthread.h>
#include <string.h>

#include "hsa_test.h"

#define DESTROYERS 4

static hsa_agent_t cpu;

static hsa_signal_t signal_new(hsa_signal_value_t value)
{
	hsa_signal_t s = { 0 };

	CHECK_OK(hsa_signal_create(value, 0, NULL, &s));
	return s;
}

/* Write a barrier-AND packet (dep may be 0) with completion signal done; return its id. */
static uint64_t barrier(hsa_queue_t *q, hsa_signal_t dep, hsa_signal_t done)
{
	uint64_t id = hsa_queue_add_write_index_scacq_screl(q, 1);
	hsa_barrier_and_packet_t *p;

	while (id - hsa_queue_load_read_index_scacquire(q) >= q->size)
		;
	p = (hsa_barrier_and_packet_t *)q->base_address + (id & (q->size - 1));
	memset((char *)p + 4, 0, sizeof(*p) - 4);
	p->dep_signal[0] = dep;
	p->completion_signal = done;
	ht_publish(p, ht_header(HSA_PACKET_TYPE_BARRIER_AND), 0);
	hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)id);
	return id;
}

static hsa_signal_value_t wait_below(hsa_signal_t s, hsa_signal_value_t v, uint64_t ns)
{
	return hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_LT, v, ns, HSA_WAIT_STATE_BLOCKED);
}

struct share {
	hsa_queue_t **q;
	uint32_t first, count;
	unsigned failed;
};

static void *destroy_share(void *arg)
{
	struct share *s = arg;

	for (uint32_t i = s->first; i < s->first + s->count; i++)
		if (hsa_queue_destroy(s->q[i]) != HSA_STATUS_SUCCESS)
			s->failed++;
	return NULL;
}

/* QUEUES_MAX queues in an array of that size, one more refused, destroyed by several threads. */
static void queues_max(void)
{
	uint32_t max = 0, min = 0, created = 0;
	hsa_queue_t *extra = NULL;

	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUES_MAX, &max));
	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &min));
	CHECK(max >= 1 && max <= 1024, "QUEUES_MAX %u is a real limit", max);
	if (max < 1 || max > 1024)
		return;
	hsa_queue_t *q[max];
	struct share share[DESTROYERS];
	pthread_t t[DESTROYERS];

	for (uint32_t i = 0; i < max; i++) {
		hsa_status_t st = hsa_queue_create(cpu, min, HSA_QUEUE_TYPE_MULTI, NULL, NULL,
						   UINT32_MAX, UINT32_MAX, &q[i]);

		CHECK(st == HSA_STATUS_SUCCESS, "queue %u of %u: %s", i, max, ht_status_text(st));
		if (st != HSA_STATUS_SUCCESS)
			break;
		created++;
	}
	CHECK_ST(hsa_queue_create(cpu, min, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &extra), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
	for (uint32_t i = 0; i < DESTROYERS; i++) {
		share[i] = (struct share){ q, created * i / DESTROYERS,
					   created * (i + 1) / DESTROYERS - created * i / DESTROYERS, 0 };
		CHECK(pthread_create(&t[i], NULL, destroy_share, &share[i]) == 0, "thread %u", i);
	}
	for (uint32_t i = 0; i < DESTROYERS; i++) {
		pthread_join(t[i], NULL);
		CHECK(share[i].failed == 0, "destroyer %u: %u destroys failed", i, share[i].failed);
	}
	/* Each was destroyed once: a second destroy is refused, and the slots are free again. */
	if (created)
		CHECK_ST(hsa_queue_destroy(q[0]), HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_OK(hsa_queue_create(cpu, min, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &extra));
	CHECK_OK(hsa_queue_destroy(extra));
}

/* Two threads destroy the same queues: each is destroyed exactly once. */
struct race {
	hsa_queue_t **q;
	uint32_t n, ok, invalid;
};

static void *destroy_all(void *arg)
{
	struct race *r = arg;

	for (uint32_t i = 0; i < r->n; i++) {
		hsa_status_t st = hsa_queue_destroy(r->q[i]);

		r->ok += st == HSA_STATUS_SUCCESS;
		r->invalid += st == HSA_STATUS_ERROR_INVALID_QUEUE;
	}
	return NULL;
}

static void destroy_race(void)
{
	hsa_queue_t *q[16];
	struct race r[2] = { { q, 16, 0, 0 }, { q, 16, 0, 0 } };
	pthread_t t[2];

	for (int i = 0; i < 16; i++)
		CHECK_OK(hsa_queue_create(cpu, 64, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
					  UINT32_MAX, &q[i]));
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, destroy_all, &r[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(r[0].ok + r[1].ok == 16 && r[0].invalid + r[1].invalid == 16,
	      "16 queues destroyed twice: %u + %u succeeded, %u + %u refused", r[0].ok, r[1].ok,
	      r[0].invalid, r[1].invalid);
}

/* A queue of QUEUES_MAX packets (a common slip) works with every index atomic. */
static void size_from_queues_max(void)
{
	uint32_t max = 0, min = 0, qmax = 0;
	hsa_signal_t done = signal_new(0);
	hsa_queue_t *q = NULL;
	uint64_t id = 0;

	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUES_MAX, &max));
	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &min));
	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &qmax));
	CHECK(min >= 64 && !(min & (min - 1)), "QUEUE_MIN_SIZE %u is a usable power of two", min);
	CHECK(!(max & (max - 1)) && max >= min && max <= qmax,
	      "QUEUES_MAX %u is a power of two in [%u, %u]", max, min, qmax);
	CHECK_OK(hsa_queue_create(cpu, max, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q));
	if (!q)
		return;
	CHECK(q->size == max, "queue size %u, asked %u", q->size, max);
	CHECK(hsa_queue_load_write_index_relaxed(q) == 0 &&
	      hsa_queue_load_read_index_relaxed(q) == 0, "a new queue starts at 0");
	CHECK(hsa_queue_cas_write_index_relaxed(q, 5, 9) == 0, "cas with a wrong expectation");
	CHECK(hsa_queue_load_write_index_scacquire(q) == 0, "the failed cas wrote nothing");
	/* Three times round the ring, one packet at a time and in batches. */
	hsa_signal_store_relaxed(done, 3 * max);
	for (uint32_t i = 0; i < 3 * max; i++)
		id = barrier(q, (hsa_signal_t){ 0 }, done);
	CHECK(id == 3 * max - 1, "last id %llu", (unsigned long long)id);
	CHECK(wait_below(done, 1, ht_timeout_ns()) == 0, "%u packets completed", 3 * max);
	CHECK(hsa_queue_load_read_index_scacquire(q) == 3 * max, "read index %llu",
	      (unsigned long long)hsa_queue_load_read_index_scacquire(q));
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(done));
}

struct callback_seen {
	hsa_signal_t called;
	hsa_status_t status;
	hsa_queue_t *source;
	pthread_t thread;
	void *data;
};

static void on_error(hsa_status_t status, hsa_queue_t *source, void *data)
{
	struct callback_seen *seen = data;

	seen->status = status;
	seen->source = source;
	seen->thread = pthread_self();
	seen->data = data;
	hsa_signal_store_screlease(seen->called, 0);
}

/* kernel_object 0: the callback gets INVALID_CODE_OBJECT and the queue, on a runtime thread. */
static void null_kernel_object(void)
{
	struct callback_seen seen = { .called = signal_new(1) };
	hsa_signal_t done = signal_new(1);
	hsa_kernel_dispatch_packet_t *p;
	hsa_queue_t *q = NULL;
	uint64_t id;

	CHECK_OK(hsa_queue_create(cpu, 64, HSA_QUEUE_TYPE_MULTI, on_error, &seen, UINT32_MAX,
				  UINT32_MAX, &q));
	if (!q)
		return;
	id = hsa_queue_add_write_index_relaxed(q, 1);
	p = (hsa_kernel_dispatch_packet_t *)q->base_address + (id & (q->size - 1));
	memset((char *)p + 4, 0, sizeof(*p) - 4);
	p->workgroup_size_x = p->workgroup_size_y = p->workgroup_size_z = 1;
	p->grid_size_x = p->grid_size_y = p->grid_size_z = 1;
	p->kernel_object = 0;
	p->completion_signal = done;
	ht_publish(p, ht_header(HSA_PACKET_TYPE_KERNEL_DISPATCH), 1);
	hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)id);
	CHECK(hsa_signal_wait_scacquire(seen.called, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(),
					HSA_WAIT_STATE_BLOCKED) == 0, "the error callback ran");
	CHECK(seen.status == HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "callback status 0x%x: %s",
	      (unsigned)seen.status, ht_status_text(seen.status));
	CHECK(seen.source == q && seen.data == &seen, "callback source %p data %p, queue %p",
	      (void *)seen.source, seen.data, (void *)q);
	CHECK(!pthread_equal(seen.thread, pthread_self()), "the callback ran on a runtime thread");
	CHECK(wait_below(done, 1, ht_timeout_ns()) < 1, "the failed packet's signal went down");
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(done));
	CHECK_OK(hsa_signal_destroy(seen.called));
}

/* Inactivate: pending work is dropped, later packets never run, destroy still works. */
static void inactivate(void)
{
	hsa_signal_t gate = signal_new(1), held = signal_new(1), later = signal_new(1);
	hsa_signal_t first = signal_new(1);
	hsa_queue_t *q = NULL;

	CHECK_OK(hsa_queue_create(cpu, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q));
	if (!q)
		return;
	barrier(q, (hsa_signal_t){ 0 }, first);
	CHECK(wait_below(first, 1, ht_timeout_ns()) == 0, "a packet before inactivation runs");
	barrier(q, gate, held);
	CHECK(wait_below(held, 1, 20000000) == 1, "the gated packet waits for its gate");
	CHECK_OK(hsa_queue_inactivate(q));
	CHECK(wait_below(held, 1, ht_timeout_ns()) < 0, "the pending packet was aborted (-1)");
	CHECK_OK(hsa_queue_inactivate(q));
	barrier(q, (hsa_signal_t){ 0 }, later);
	hsa_signal_store_screlease(gate, 0);
	CHECK(wait_below(later, 1, 50000000) == 1, "a packet after inactivation never runs");
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_ST(hsa_queue_inactivate(q), HSA_STATUS_ERROR_INVALID_QUEUE);
	CHECK_ST(hsa_queue_inactivate(NULL), HSA_STATUS_ERROR_INVALID_QUEUE);
	hsa_signal_destroy(gate);
	hsa_signal_destroy(held);
	hsa_signal_destroy(later);
	hsa_signal_destroy(first);
}

static void error_paths(void)
{
	uint32_t qmax = 0;
	hsa_queue_t *q = NULL;

	CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE, &qmax));
	CHECK_ST(hsa_queue_create(cpu, 96, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_create(cpu, qmax * 2, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_ARGUMENT);
	CHECK_ST(hsa_queue_create((hsa_agent_t){ 0 }, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL,
				  UINT32_MAX, UINT32_MAX, &q), HSA_STATUS_ERROR_INVALID_AGENT);
	/* Below the minimum the queue gets the minimum, as on ROCr. */
	CHECK_OK(hsa_queue_create(cpu, 2, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX,
				  UINT32_MAX, &q));
	if (q) {
		uint32_t min = 0;

		CHECK_OK(hsa_agent_get_info(cpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE, &min));
		CHECK(q->size == min, "size %u for a request of 2 (minimum %u)", q->size, min);
		CHECK_OK(hsa_queue_destroy(q));
	}
	CHECK_ST(hsa_queue_destroy((hsa_queue_t *)&qmax), HSA_STATUS_ERROR_INVALID_QUEUE);
}

/* A soft queue's processor is the program: it moves the read index itself. */
static void soft_queue_indices(void)
{
	hsa_region_t fine = ht_region(cpu, HSA_REGION_GLOBAL_FLAG_FINE_GRAINED);
	hsa_signal_t doorbell = signal_new(0);
	uint32_t mask[4] = { 0 };
	hsa_queue_t *q = NULL;

	CHECK_OK(hsa_soft_queue_create(fine, 64, HSA_QUEUE_TYPE_SINGLE,
				       HSA_QUEUE_FEATURE_AGENT_DISPATCH, doorbell, &q));
	if (!q)
		return;
	hsa_queue_store_write_index_relaxed(q, 3);
	hsa_queue_store_read_index_relaxed(q, 2);
	CHECK(hsa_queue_load_read_index_acquire(q) == 2, "read index stored relaxed");
	hsa_queue_store_read_index_release(q, 3);
	CHECK(hsa_queue_load_read_index_scacquire(q) == 3, "read index stored with release");
	CHECK_OK(hsa_queue_inactivate(q));
	CHECK_UNPROVIDED(hsa_amd_queue_cu_get_mask(q, 32, mask), HSA_STATUS_ERROR);
	CHECK_UNPROVIDED(hsa_amd_queue_cu_set_mask(q, 32, mask), HSA_STATUS_ERROR);
	CHECK_OK(hsa_queue_destroy(q));
	CHECK_OK(hsa_signal_destroy(doorbell));
}

int main(int argc, char **argv)
{
	hsa_queue_t *q;

	if (argc < 2)
		return 2;
	ht_require_aql(argv[1]);
	CHECK_ST(hsa_queue_create((hsa_agent_t){ 1 }, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, 0, 0,
				  &q), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_ST(hsa_queue_inactivate(NULL), HSA_STATUS_ERROR_NOT_INITIALIZED);
	CHECK_OK(hsa_init());
	cpu = ht_cpu_agent();
	queues_max();
	destroy_race();
	size_from_queues_max();
	null_kernel_object();
	inactivate();
	soft_queue_indices();
	error_paths();
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
