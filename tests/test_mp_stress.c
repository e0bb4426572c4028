/* SPDX-License-Identifier: MIT */
/*
 * Multi-producer stress: 4 threads submit 10^6 packets each to one MULTI
 * queue. Every packet's kernel marks its own entry, and every completion
 * signal must drop from 1 to exactly 0: a packet run twice would leave a
 * 2 in its entry or -1 in its signal, a lost one a 0 or a timeout.
 * Then a ring that is always full: producers that sleep on it (and are
 * woken a few at a time), some through aql_queue_reserve(), some adding to
 * the write index and polling aql_queue_load_read_index() as HSA programs
 * do; every packet must run exactly once, none lost to a missed wake-up.
 */
#include <pthread.h>
#include <string.h>

#include "helpers.h"

enum { THREADS = 4, PER_THREAD = 1000000, WINDOW = 64 };

struct __attribute__((aligned(16))) mark_args {
	uint8_t *entry;
};

static void mark_kernel(const void *kernarg)
{
	const struct mark_args *a = kernarg;

	(*a->entry)++;
}

static const aql_host_kernel_descriptor mark_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(mark_kernel, struct mark_args, AQL_HOST_KD_NO_BARRIER);

static uint8_t *marks;
static aql_queue *queue;

struct producer {
	pthread_t thread;
	unsigned index;
	unsigned bad_signals;
	unsigned submit_errors;
};

/*
 * Each producer cycles through WINDOW signals and kernarg slots; one is
 * reused only after its previous packet completed with value exactly 0.
 */
static void *produce(void *arg)
{
	struct producer *p = arg;
	aql_signal *signals[WINDOW];
	struct mark_args args[WINDOW];
	uint64_t base = (uint64_t)p->index * PER_THREAD;
	int64_t v;

	for (int i = 0; i < WINDOW; i++)
		signals[i] = th_signal(0);
	for (uint64_t i = 0; i < PER_THREAD; i++) {
		unsigned w = i % WINDOW;
		aql_dispatch_packet d;

		if (i >= WINDOW) {
			if (th_done(aql_signal_wait(signals[w], AQL_COND_LT, 1, TH_TIMEOUT_NS,
						    AQL_WAIT_SPIN_BLOCK, &v)) != AQL_OK || v != 0)
				p->bad_signals++;
		}
		aql_signal_store(signals[w], 1, AQL_RELAXED);
		args[w].entry = &marks[base + i];
		d = th_dispatch1(&mark_kd, &args[w], signals[w]);
		if (aql_queue_submit(queue, (const aql_packet *)&d) != AQL_OK) {
			p->submit_errors++;
			break;
		}
	}
	for (int i = 0; i < WINDOW; i++) {
		if (th_done(aql_signal_wait(signals[i], AQL_COND_LT, 1, TH_TIMEOUT_NS,
					    AQL_WAIT_SPIN_BLOCK, &v)) != AQL_OK || v != 0)
			p->bad_signals++;
		aql_signal_destroy(signals[i]);
	}
	return NULL;
}

enum { FULL_RING = 16, FULL_SUBMITTERS = 6, FULL_POLLERS = 2, FULL_PER_THREAD = 5000 };

struct full_producer {
	pthread_t thread;
	unsigned index;
	int poll;
	unsigned errors;
};

/* Every FULL_PER_THREAD-th packet of a producer signals; the others only
 * mark. The kernargs live as long as the test. */
static struct mark_args full_args[(FULL_SUBMITTERS + FULL_POLLERS) * FULL_PER_THREAD];
static aql_signal *full_done[FULL_SUBMITTERS + FULL_POLLERS];

static void *produce_full(void *arg)
{
	struct full_producer *p = arg;
	uint64_t base = (uint64_t)p->index * FULL_PER_THREAD, id;

	for (uint64_t i = 0; i < FULL_PER_THREAD; i++) {
		aql_dispatch_packet d;

		full_args[base + i].entry = &marks[base + i];
		d = th_dispatch1(&mark_kd, &full_args[base + i],
				 i + 1 == FULL_PER_THREAD ? full_done[p->index] : NULL);
		if (!p->poll) {
			if (aql_queue_submit(queue, (const aql_packet *)&d) != AQL_OK)
				p->errors++;
			continue;
		}
		/* As an HSA program on a MULTI queue: add, poll for room,
		 * write, ring. */
		id = __atomic_fetch_add(&queue->amd->write_dispatch_id, 1, __ATOMIC_RELAXED);
		while (id - aql_queue_load_read_index(queue, 1000000) >= queue->size)
			;
		aql_packet_store(aql_queue_slot(queue, id), (const aql_packet *)&d);
		aql_queue_ring_doorbell(queue, id);
	}
	return NULL;
}

static void test_full_ring(void)
{
	enum { N = FULL_SUBMITTERS + FULL_POLLERS };
	struct full_producer producers[N];
	uint64_t wrong = 0;

	memset(marks, 0, (size_t)N * FULL_PER_THREAD);
	queue = th_queue(FULL_RING, AQL_QUEUE_MULTI, 0);
	for (unsigned i = 0; i < N; i++) {
		full_done[i] = th_signal(1);
		producers[i] = (struct full_producer){ .index = i, .poll = i < FULL_POLLERS };
		pthread_create(&producers[i].thread, NULL, produce_full, &producers[i]);
	}
	for (unsigned i = 0; i < N; i++) {
		pthread_join(producers[i].thread, NULL);
		CHECK(producers[i].errors == 0, "full ring: producer %u: %u submit errors (%s)", i,
		      producers[i].errors, aql_error_message());
		CHECK(th_wait_done(full_done[i]) == 0, "full ring: producer %u's last packet", i);
		aql_signal_destroy(full_done[i]);
	}
	for (size_t i = 0; i < (size_t)N * FULL_PER_THREAD; i++)
		wrong += marks[i] != 1;
	CHECK(wrong == 0, "full ring: %llu of %u packets did not run exactly once",
	      (unsigned long long)wrong, N * FULL_PER_THREAD);
	aql_queue_destroy(queue);
}

int main(void)
{
	struct producer producers[THREADS];
	uint64_t ran_once = 0, wrong = 0;

	marks = calloc((size_t)THREADS * PER_THREAD, 1);
	queue = th_queue(1024, AQL_QUEUE_MULTI, 0);
	for (unsigned i = 0; i < THREADS; i++) {
		producers[i] = (struct producer){ .index = i };
		pthread_create(&producers[i].thread, NULL, produce, &producers[i]);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		pthread_join(producers[i].thread, NULL);
		CHECK(producers[i].bad_signals == 0 && producers[i].submit_errors == 0,
		      "producer %u: %u completion signals not exactly 0, %u submit errors (%s)", i,
		      producers[i].bad_signals, producers[i].submit_errors, aql_error_message());
	}
	for (size_t i = 0; i < (size_t)THREADS * PER_THREAD; i++) {
		ran_once += marks[i] == 1;
		wrong += marks[i] != 1;
	}
	CHECK(ran_once == (uint64_t)THREADS * PER_THREAD && wrong == 0,
	      "%llu packets ran exactly once, %llu did not", (unsigned long long)ran_once,
	      (unsigned long long)wrong);
	CHECK(th_wait_read_index(queue, (uint64_t)THREADS * PER_THREAD) ==
		      (uint64_t)THREADS * PER_THREAD,
	      "read index %llu", (unsigned long long)queue->amd->read_dispatch_id);
	aql_queue_destroy(queue);
	test_full_ring();
	free(marks);
	return th_finish();
}
