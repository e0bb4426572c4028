/* SPDX-License-Identifier: MIT */
/*
 * aqlbench-native.so: dispatch_throughput's rounds and the round trips of
 * dispatch_rtt_spin and dispatch_rtt_spin_block, built against
 * libaql.so. aql-bench links libaql statically; aql's
 * libhsa-runtime64.so.1 runs on libaql.so. aql-bench loads this module
 * after that library, so both use the same libaql.so and its default CPU
 * agent, and the _so rows are the native peers of the _hsa rows with
 * only the HSA layer between them. hsa.c runs their rounds in turn, so
 * that both see the same machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <aql/aql.h>

#include "empty.h"

#define WAIT_TIMEOUT_NS (30ull * 1000000000ull)

static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int round_of(aql_queue *q, aql_signal *done, uint32_t packets, double *rate)
{
	const aql_packet body = empty_dispatch(0, NULL), last = empty_dispatch(1, done);
	uint64_t t0;

	aql_signal_store(done, 1, AQL_RELAXED);
	t0 = clock_ns();
	if (submit_batch(q, &body, &last, packets) != AQL_OK ||
	    aql_signal_wait(done, AQL_COND_LT, 1, WAIT_TIMEOUT_NS, AQL_WAIT_SPIN_BLOCK,
			    NULL) != AQL_OK)
		return -1;
	*rate = (double)packets * 1e9 / (double)(clock_ns() - t0 + 1);
	return 0;
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
	    aql_signal_create(1, &n->done) == AQL_OK && round_of(n->q, n->done, packets, &warm) == 0)
		return n;
	fprintf(stderr, "aqlbench-native.so: %s\n", n ? aql_error_message() : "out of memory");
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
		t0 = clock_ns();
		if (aql_queue_submit(n->q, &pkt) != AQL_OK ||
		    aql_signal_wait(n->done, AQL_COND_LT, 1, WAIT_TIMEOUT_NS,
				    (enum aql_wait_hint)hint, NULL) != AQL_OK) {
			fprintf(stderr, "aqlbench-native.so: %s\n", aql_error_message());
			return -1;
		}
		if (samples)
			samples[i] = clock_ns() - t0;
	}
	return 0;
}

/* One round of packets: dispatches/s in *rate; 0, or -1 having said why. */
__attribute__((visibility("default")))
int aql_bench_native_round(struct aql_bench_native *n, uint32_t packets, double *rate)
{
	if (round_of(n->q, n->done, packets, rate) == 0)
		return 0;
	fprintf(stderr, "aqlbench-native.so: %s\n", aql_error_message());
	return -1;
}
