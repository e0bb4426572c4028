/* SPDX-License-Identifier: MIT */
/*
 * Objects that packets in flight use: destroying a code object whose
 * kernel runs or waits in a queue, or a signal a pending packet will
 * touch, is refused with AQL_ERR_BUSY naming the packet and the queue,
 * and leaves the object as it was; once the packets finished, destroy
 * succeeds, also right after the wait for their completion. Destroying a
 * queue waits for its running packet. Usage: test_inflight KERNELS.so
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h"

struct flags {
	uint32_t gate, started, finished;
};

struct rig {
	const char *path;
	aql_code_object *co;
	const aql_kernel *hold;
	struct flags *f;
	void *kernarg;
};

static aql_code_object *load(const char *path)
{
	aql_code_object *co = NULL;

	CHECK_OK(aql_code_object_load_file(th_agent(), path, NULL, &co));
	if (!co)
		exit(1);
	return co;
}

/* A one-work-item dispatch of hold, its kernarg pointing at r->f. */
static aql_dispatch_packet hold_packet(struct rig *r, aql_signal *done)
{
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)r->hold->kernel_object;
	aql_dispatch_packet p = th_dispatch1(kd, r->kernarg, done);
	uint32_t *gate = &r->f->gate, *started = &r->f->started, *finished = &r->f->finished;
	aql_kernarg_value args[] = { { &gate, sizeof(gate) }, { &started, sizeof(started) },
				     { &finished, sizeof(finished) } };

	CHECK_OK(aql_kernarg_build(r->hold, &p, args, 3, NULL, r->kernarg, 256));
	return p;
}

static void wait_started(struct rig *r)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (!__atomic_load_n(&r->f->started, __ATOMIC_SEQ_CST)) {
		if (th_now_ns() > end)
			th_stop("the hold kernel never started");
		th_sleep_ms(1);
	}
}

static void reset(struct rig *r)
{
	memset(r->f, 0, sizeof(*r->f));
}

/* A running kernel: its code object stays; another object goes. */
static void test_running_kernel(struct rig *r)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = hold_packet(r, done);
	aql_code_object *other = load(r->path);
	const aql_kernel *k = NULL;
	char want[64];

	reset(r);
	th_submit(q, &p);
	wait_started(r);
	snprintf(want, sizeof(want), "of queue %llu", (unsigned long long)q->amd->hsa.id);
	CHECK(aql_code_object_destroy(r->co) == AQL_ERR_BUSY && th_error_has("kernel 'hold'") &&
	      th_error_has("packet 0") && th_error_has(want),
	      "destroying the code object of a running kernel");
	/* Refused means untouched: the object still answers. */
	CHECK_OK(aql_code_object_kernel(r->co, "hold", &k));
	CHECK(k == r->hold, "the refused object changed");
	/* Only the object whose code runs is held. */
	CHECK_OK(aql_code_object_destroy(other));
	CHECK(aql_signal_destroy(done) == AQL_ERR_BUSY && th_error_has("completion signal") &&
	      th_error_has(want), "destroying the completion signal of a running packet");
	__atomic_store_n(&r->f->gate, 1, __ATOMIC_SEQ_CST);
	CHECK(th_wait_done(done) == 0 && r->f->finished == 1, "hold did not finish");
	CHECK_OK(aql_signal_destroy(done));
	CHECK_OK(aql_queue_destroy(q));
}

/* A dispatch behind a barrier-AND has not started, and is in flight too;
 * so are the barrier's and a BARRIER_VALUE packet's signals. */
static void test_pending(struct rig *r)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *dep = th_signal(1), *value = th_signal(5), *done = th_signal(1);
	aql_barrier_packet b = {
		.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
		.dep_signal = { 0, aql_signal_handle(dep) },
	};
	aql_barrier_value_packet bv = {
		.header = { .header = aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1,
							AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM),
			    .format = AQL_AMD_PACKET_BARRIER_VALUE },
		.signal = aql_signal_handle(value),
		.value = 0,
		.mask = -1,
		.cond = AQL_COND_EQ,
	};
	aql_dispatch_packet p = hold_packet(r, done);

	reset(r);
	r->f->gate = 1;
	th_submit(q, &b);
	th_submit(q, &bv);
	th_submit(q, &p);
	CHECK(aql_code_object_destroy(r->co) == AQL_ERR_BUSY && th_error_has("kernel 'hold'") &&
	      th_error_has("packet 2"), "destroying the code object of a waiting dispatch");
	CHECK(aql_signal_destroy(dep) == AQL_ERR_BUSY && th_error_has("dependency signal") &&
	      th_error_has("packet 0"), "destroying a barrier-AND's dependency");
	CHECK(aql_signal_destroy(value) == AQL_ERR_BUSY && th_error_has("BARRIER_VALUE signal") &&
	      th_error_has("packet 1"), "destroying a BARRIER_VALUE packet's signal");
	CHECK(r->f->started == 0, "the dispatch ran before its barrier");
	aql_signal_store(dep, 0, AQL_RELEASE);
	aql_signal_store(value, 0, AQL_RELEASE);
	CHECK(th_wait_done(done) == 0 && r->f->finished == 1, "the dispatch did not run");
	CHECK_OK(aql_signal_destroy(dep));
	CHECK_OK(aql_signal_destroy(value));
	CHECK_OK(aql_signal_destroy(done));
	CHECK_OK(aql_queue_destroy(q));
}

/*
 * The processor marks a packet finished before it decrements the
 * completion signal, so whoever saw the signal may destroy at once.
 * Repeated, since the window it closes is short.
 */
static void test_destroy_after_wait(struct rig *r)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_SINGLE, 0);
	unsigned busy = 0;

	for (int i = 0; i < 200; i++) {
		aql_code_object *co = load(r->path);
		const aql_kernel *k = th_kernel(co, "idle");
		aql_signal *done = th_signal(1);
		aql_dispatch_packet p = th_dispatch1(
			(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object,
			r->kernarg, done);
		uint32_t unused = 0;
		aql_kernarg_value arg = { &unused, sizeof(unused) };

		CHECK_OK(aql_kernarg_build(k, &p, &arg, 1, NULL, r->kernarg, 256));
		th_submit(q, &p);
		CHECK(th_wait_done(done) == 0, "idle failed");
		busy += aql_signal_destroy(done) != AQL_OK;
		busy += aql_code_object_destroy(co) != AQL_OK;
	}
	CHECK(busy == 0, "%u destroys right after the completion were refused: %s", busy,
	      aql_error_message());
	CHECK_OK(aql_queue_destroy(q));
}

/*
 * A packet the processor refuses stops the queue for good: once its
 * signal reads -1, nothing of the queue is in flight, so its code object
 * and signals, also those of packets queued behind it, may go.
 */
static void test_failed_packet(struct rig *r)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_SINGLE, 0);
	aql_code_object *co = load(r->path);
	const aql_kernel *k = th_kernel(co, "idle");
	aql_signal *bad_done = th_signal(1), *next_done = th_signal(1);
	aql_dispatch_packet bad = th_dispatch1(
		(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object, r->kernarg,
		bad_done);
	aql_dispatch_packet next = bad;

	aql_packet slots[2];
	uint64_t first = 0;

	bad.grid_size_x = 0;	/* malformed: the processor stops the queue on it */
	next.completion_signal = aql_signal_handle(next_done);
	/* next is in the ring before bad is published, so the processor finds
	 * it queued behind bad whenever it gets there. */
	slots[0].dispatch = bad;
	slots[1].dispatch = next;
	CHECK_OK(aql_queue_reserve(q, 2, &first));
	aql_packet_store(aql_queue_slot(q, first + 1), &slots[1]);
	aql_packet_store(aql_queue_slot(q, first), &slots[0]);
	aql_queue_ring_doorbell(q, first + 1);
	CHECK(th_wait_done(bad_done) == -1, "the malformed packet did not fail");
	CHECK(aql_queue_error(q, NULL) != AQL_OK, "the queue is not in its error state");
	CHECK_OK(aql_signal_destroy(bad_done));
	CHECK_OK(aql_signal_destroy(next_done));
	CHECK_OK(aql_code_object_destroy(co));
	CHECK_OK(aql_queue_destroy(q));
}

struct opener {
	struct rig *r;
	uint32_t seen_started;
};

static void *open_gate_later(void *arg)
{
	struct opener *o = arg;

	wait_started(o->r);
	o->seen_started = 1;
	th_sleep_ms(50);
	__atomic_store_n(&o->r->f->gate, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Queue destroy waits for the running packet; then its code may go. */
static void test_queue_destroy_waits(struct rig *r)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = hold_packet(r, done);
	struct opener o = { r, 0 };
	pthread_t t;

	reset(r);
	th_submit(q, &p);
	wait_started(r);
	pthread_create(&t, NULL, open_gate_later, &o);
	CHECK_OK(aql_queue_destroy(q));
	CHECK(__atomic_load_n(&r->f->finished, __ATOMIC_SEQ_CST) == 1 && done->value == 0,
	      "queue destroy returned while its kernel ran (finished %u, signal %lld)",
	      r->f->finished, (long long)done->value);
	pthread_join(t, NULL);
	CHECK_OK(aql_signal_destroy(done));
}

int main(int argc, char **argv)
{
	struct rig r = { 0 };

	if (argc != 2) {
		fprintf(stderr, "usage: %s KERNELS.so\n", argv[0]);
		return 2;
	}
	r.path = argv[1];
	r.co = load(r.path);
	r.hold = th_kernel(r.co, "hold");
	r.f = calloc(1, sizeof(*r.f));
	r.kernarg = aligned_alloc(64, 256);
	if (!r.f || !r.kernarg)
		return 1;
	test_running_kernel(&r);
	test_pending(&r);
	test_destroy_after_wait(&r);
	test_failed_packet(&r);
	test_queue_destroy_waits(&r);
	CHECK_OK(aql_code_object_destroy(r.co));
	free(r.kernarg);
	free(r.f);
	return th_finish();
}
