/* SPDX-License-Identifier: MIT */
/*
 * aqlbench-native.so: the native peers of the HSA rows, built against
 * libaql.so. aql-bench links libaql statically; aql's
 * libhsa-runtime64.so.1 runs on libaql.so. aql-bench loads this module
 * after that library, so both use the same libaql.so and its default CPU
 * agent, and only the HSA layer lies between a _so row and its _hsa row.
 * The round trips are dispatch_rtt_spin's and dispatch_rtt_spin_block's
 * (aql_queue_submit, aql_signal_wait); the throughput rounds run
 * publish.h's producer, the HSA program's, on aql's own atomics and
 * aql_queue_load_read_index(). hsa.c runs their rounds in turn, so that
 * both see the same machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <aql/aql.h>

#include "empty.h"
#include "publish.h"

#define WAIT_TIMEOUT_NS (30ull * 1000000000ull)
/* hsa/queue.c's READ_WAIT_NS */
#define READ_WAIT_NS 2000000u

/* publish.h's producer on aql's own atomics, as aql_queue_reserve() and
 * aql_queue_ring_doorbell() use them. */
static uint64_t so_load_write(void *q)
{
	return __atomic_load_n(&((aql_queue *)q)->amd->write_dispatch_id, __ATOMIC_RELAXED);
}

static void so_store_write(void *q, uint64_t id)
{
	__atomic_store_n(&((aql_queue *)q)->amd->write_dispatch_id, id, __ATOMIC_RELAXED);
}

/* As hsa_queue_load_read_index_scacquire() in aql's HSA layer: a full
 * ring's poll leaves the processor the CPU. */
static uint64_t so_load_read(void *q)
{
	return aql_queue_load_read_index(q, READ_WAIT_NS);
}

static void so_ring(void *q, uint64_t id)
{
	aql_queue_ring_doorbell(q, id);
}

static const struct publish_ops so_ops = {
	so_load_write, so_store_write, so_load_read, so_ring,
};

/* packets back to back, the last one signalling (barrier set): dispatches/s
 * in *rate; 0, or -1 having said why. */
static int round_of(aql_queue *q, aql_signal *done, uint32_t packets, double *rate)
{
	const aql_packet body = empty_dispatch(0, NULL), last = empty_dispatch(1, done);
	struct publish_queue pq = { .q = q, .ring = q->ring, .size = q->size,
				    .read = so_load_read(q) };
	uint64_t t0;

	aql_signal_store(done, 1, AQL_RELAXED);
	t0 = aql_now_ns();
	for (uint32_t i = 1; i < packets; i++)
		if (publish_packet(&pq, &body, &so_ops, WAIT_TIMEOUT_NS))
			goto full;
	if (publish_packet(&pq, &last, &so_ops, WAIT_TIMEOUT_NS))
		goto full;
	if (aql_signal_wait(done, AQL_COND_LT, 1, WAIT_TIMEOUT_NS, AQL_WAIT_SPIN_BLOCK, NULL) !=
	    AQL_OK) {
		fprintf(stderr, "aqlbench-native.so: %s\n", aql_error_message());
		return -1;
	}
	*rate = (double)packets * 1e9 / (double)(aql_now_ns() - t0 + 1);
	return 0;
full:
	fprintf(stderr, "aqlbench-native.so: queue %llu stays full\n",
		(unsigned long long)q->amd->hsa.id);
	return -1;
}

/* A queue of the default agent and its completion signal, one warm-up
 * round run. */
struct aql_bench_native {
	aql_queue *q;
	aql_signal *done;
};

__attribute__((visibility("default")))
void aql_bench_native_close(struct aql_bench_native *n)
{
	if (!n)
		return;
	aql_queue_destroy(n->q);
	aql_signal_destroy(n->done);
	free(n);
}

__attribute__((visibility("default")))
struct aql_bench_native *aql_bench_native_open(uint32_t queue_size, uint32_t packets)
{
	aql_queue_config c = { .size = queue_size, .type = AQL_QUEUE_SINGLE };
	struct aql_bench_native *n = calloc(1, sizeof(*n));
	aql_agent *agent;
	double warm;

	if (n && aql_agent_default(&agent) == AQL_OK &&
	    aql_queue_create(agent, &c, &n->q) == AQL_OK &&
	    aql_signal_create(1, &n->done) == AQL_OK) {
		if (round_of(n->q, n->done, packets, &warm) == 0)
			return n;
	} else {
		fprintf(stderr, "aqlbench-native.so: %s\n", n ? aql_error_message() : "out of memory");
	}
	aql_bench_native_close(n);
	return NULL;
}

/*
 * count round trips of one empty dispatch, each waited for with hint (an
 * enum aql_wait_hint), as dispatch_rtt_spin and dispatch_rtt_spin_block
 * do; each one's nanoseconds in samples[] (NULL: a warm-up). 0, or -1
 * having said why.
 */
__attribute__((visibility("default")))
int aql_bench_native_rtt(struct aql_bench_native *n, int hint, uint64_t *samples, uint32_t count)
{
	const aql_packet pkt = empty_dispatch(0, n->done);
	uint64_t t0;

	for (uint32_t i = 0; i < count; i++) {
		aql_signal_store(n->done, 1, AQL_RELAXED);
		t0 = aql_now_ns();
		if (aql_queue_submit(n->q, &pkt) != AQL_OK ||
		    aql_signal_wait(n->done, AQL_COND_LT, 1, WAIT_TIMEOUT_NS,
				    (enum aql_wait_hint)hint, NULL) != AQL_OK) {
			fprintf(stderr, "aqlbench-native.so: %s\n", aql_error_message());
			return -1;
		}
		if (samples)
			samples[i] = aql_now_ns() - t0;
	}
	return 0;
}

/* One round of packets: dispatches/s in *rate; 0, or -1 having said why. */
__attribute__((visibility("default")))
int aql_bench_native_round(struct aql_bench_native *n, uint32_t packets, double *rate)
{
	return round_of(n->q, n->done, packets, rate);
}
