/* SPDX-License-Identifier: MIT */
/*
 * Resident CUDA queues (AQL_QUEUE_RESIDENT, nv/resident.c and
 * nv/resident_kernel.c) against the emulated driver, which runs the
 * processor's host build on an emulated stream polling the same ring:
 * dispatches in ring order through the linked device-function forms,
 * barriers, completions across agents, fallback to the translating path
 * (counted), malformed packets, many producers, teardown with packets in
 * flight, typed launches, and a processor that faults.
 *
 * Usage: test_cuda_resident SAXPY_HOST SAXPY_PTX PROCESSOR_HOST [--fault]
 * (the host builds the emulation runs, saxpy's PTX). --fault runs only
 * the fault test, under AQL_CUDA_EMU_FAIL_AFTER=0. With AQL_HIL=1
 * (tests/hil/run) it runs on the real driver, without the emulation's
 * launch counts; --fault then skips.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "cuda_helpers.h"

#define N 512u
#define BLOCKS 2u

static aql_agent *gpu;
static const aql_kernel *saxpy;
static const char *ptx_path;

static aql_queue *resident_queue(uint32_t size)
{
	aql_queue_config config = { .size = size, .type = AQL_QUEUE_MULTI,
				    .flags = AQL_QUEUE_RESIDENT | AQL_QUEUE_RESIDENT_BLOCKS(BLOCKS),
				    .full_timeout_ns = TH_TIMEOUT_NS };
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(gpu, &config, &q));
	if (!q)
		th_stop("no resident queue");
	return q;
}

static uint64_t fallbacks(aql_queue *q)
{
	uint64_t n = UINT64_MAX;

	CHECK_OK(aql_queue_resident_fallbacks(q, &n));
	return n;
}

/*
 * Dispatches run by the processor itself, in ring order, each completing
 * its own signal: y += 2x twenty times. No launch per packet: the
 * emulation counts a launch when it ends, so the processor's shows only
 * at destroy.
 */
static void test_dispatch_order(void)
{
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 0.0f);
	struct aqlemu_stats before = th_cuda_stats();
	aql_queue *q = resident_queue(64);
	struct aqlemu_stats started = th_cuda_stats();

	CHECK(!th_cuda_emulated() || started.launches == before.launches,
	      "the processor runs until destroy");
	struct th_saxpy_args args = { 2.0f, 0, x, y, N };
	aql_signal *done[20];
	aql_packet p;

	for (int i = 0; i < 20; i++) {
		done[i] = th_signal(1);
		p = th_saxpy_packet(saxpy, &args, 64, done[i]);
		th_submit(q, &p);
	}
	for (int i = 0; i < 20; i++)
		CHECK(th_wait_done(done[i]) == 0, "dispatch %d", i);
	CHECK(th_device_all(gpu, y, N, 40.0f), "20 dispatches of y += 2x, each over all of y");
	/* The emulation counts a launch when it ends: the processor's at
	 * destroy, so none here if the processor ran them all. */
	CHECK(!th_cuda_emulated() || th_cuda_stats().launches - started.launches == 0,
	      "no launch per packet: %llu launches for 20 dispatches",
	      (unsigned long long)(th_cuda_stats().launches - started.launches));
	CHECK(fallbacks(q) == 0, "nothing fell back: %llu", (unsigned long long)fallbacks(q));
	CHECK_OK(aql_queue_destroy(q));
	CHECK(!th_cuda_emulated() || th_cuda_stats().launches - before.launches == 1,
	      "one launch in all: the processor's");
	for (int i = 0; i < 20; i++)
		CHECK_OK(aql_signal_destroy(done[i]));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/* A barrier-AND, and a BARRIER_VALUE, hold what follows them until their
 * condition holds; a dependency that failed (-1) releases the AND. */
static void test_barriers(void)
{
	aql_queue *q = resident_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 0.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	aql_signal *gate = th_signal(1), *b1 = th_signal(1), *d1 = th_signal(1);
	aql_signal *level = th_signal(0), *b2 = th_signal(1), *d2 = th_signal(1);
	aql_signal *failed = th_signal(1), *b3 = th_signal(1);
	aql_packet p;

	p = th_barrier_and(gate, b1);
	th_submit(q, &p);
	p = th_saxpy_packet(saxpy, &args, 64, d1);
	th_submit(q, &p);
	p = th_barrier_value(level, AQL_COND_GTE, 5, -1, b2);
	th_submit(q, &p);
	p = th_saxpy_packet(saxpy, &args, 32, d2);
	th_submit(q, &p);
	th_sleep_ms(30);
	CHECK(aql_signal_load(d1, AQL_ACQUIRE) == 1 && aql_signal_load(b1, AQL_ACQUIRE) == 1,
	      "the dispatch waits for the barrier-AND");
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK(th_wait_done(d1) == 0, "the barrier-AND released its dispatch");
	th_sleep_ms(30);
	CHECK(aql_signal_load(d2, AQL_ACQUIRE) == 1, "the dispatch waits for BARRIER_VALUE GTE 5");
	aql_signal_store(level, 4, AQL_RELEASE);
	th_sleep_ms(10);
	CHECK(aql_signal_load(d2, AQL_ACQUIRE) == 1, "4 is not >= 5");
	aql_signal_store(level, 7, AQL_RELEASE);
	CHECK(th_wait_done(d2) == 0 && th_wait_done(b2) == 0, "BARRIER_VALUE released at 7");
	CHECK(th_device_all(gpu, y, N, 2.0f), "both dispatches ran once");
	p = th_barrier_and(failed, b3);
	th_submit(q, &p);
	aql_signal_store(failed, -1, AQL_RELEASE);
	CHECK(th_wait_done(b3) == 0, "a failed dependency releases a barrier-AND");
	CHECK(fallbacks(q) == 0, "barriers run on the processor");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal *all[] = { gate, b1, d1, level, b2, d2, failed, b3 };
	for (size_t i = 0; i < sizeof(all) / sizeof(*all); i++)
		CHECK_OK(aql_signal_destroy(all[i]));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/*
 * Packets the processor cannot run go, in ring order, to the translating
 * path: here work-groups larger than its block (512 > 256). Each is
 * counted, and ring order holds around them: the sum is the same in any
 * order, but a packet run twice or skipped shows.
 */
static void test_fallback(void)
{
	/* A second code object with the same kernel, loaded before the
	 * queue: a link takes one definition, so it is left out whole. */
	aql_code_object *later = NULL;
	const aql_kernel *saxpy_later = NULL, *linked = saxpy;

	CHECK_OK(aql_code_object_load_file(gpu, ptx_path, NULL, &later));
	if (later)
		CHECK_OK(aql_code_object_kernel(later, "saxpy", &saxpy_later));

	aql_queue *q = resident_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 0.0f);
	struct th_saxpy_args a1 = { 1.0f, 0, x, y, N }, a10 = { 10.0f, 0, x, y, N };
	aql_signal *done[4];
	aql_packet p;

	for (int i = 0; i < 4; i++)
		done[i] = th_signal(1);
	p = th_saxpy_packet(saxpy, &a1, 64, done[0]);
	th_submit(q, &p);
	p = th_saxpy_packet(saxpy, &a10, 512, done[1]);		/* falls back */
	th_submit(q, &p);
	p = th_saxpy_packet(saxpy, &a1, 128, done[2]);
	th_submit(q, &p);
	p = th_saxpy_packet(saxpy, &a10, 512, done[3]);		/* falls back */
	th_submit(q, &p);
	for (int i = 0; i < 4; i++)
		CHECK(th_wait_done(done[i]) == 0, "packet %d", i);
	CHECK(th_device_all(gpu, y, N, 22.0f), "all four ran once");
	CHECK(fallbacks(q) == 2, "two fell back: %llu", (unsigned long long)fallbacks(q));

	if (saxpy_later) {
		saxpy = saxpy_later;
		aql_signal_store(done[0], 1, AQL_RELEASE);
		p = th_saxpy_packet(saxpy, &a1, 64, done[0]);
		th_submit(q, &p);
		CHECK(th_wait_done(done[0]) == 0, "the second object's kernel ran");
		CHECK(th_device_all(gpu, y, N, 23.0f), "once");
		CHECK(fallbacks(q) == 3, "on the translating path: %llu",
		      (unsigned long long)fallbacks(q));
		saxpy = linked;
	}
	CHECK_OK(aql_queue_destroy(q));
	aql_code_object_destroy(later);
	for (int i = 0; i < 4; i++)
		CHECK_OK(aql_signal_destroy(done[i]));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/* A malformed packet fails the queue as on the translating queue: its
 * signal and those after it get -1, and the queue says why. */
static void test_malformed(void)
{
	aql_queue *q = resident_queue(64);
	aql_signal *ok = th_signal(1), *bad = th_signal(1), *after = th_signal(1);
	aql_packet p;

	p = th_barrier_and(NULL, ok);
	th_submit(q, &p);
	p = th_barrier_and(NULL, bad);
	p.dispatch.header = th_header(AQL_PACKET_KERNEL_DISPATCH);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = 0;	/* no work-group size */
	th_submit(q, &p);
	p = th_barrier_and(NULL, after);
	th_submit(q, &p);
	CHECK(th_wait_done(ok) == 0, "the packet before it completes");
	CHECK(th_wait_done(bad) == -1, "the malformed packet gets -1");
	CHECK(th_wait_done(after) == -1, "and the one after it");
	const char *why = "";

	CHECK(aql_queue_error(q, &why) != AQL_OK, "the queue is in its error state");
	CHECK(strstr(why, "packet 1") != NULL, "naming the packet: %s", why);
	aql_queue_destroy(q);
	CHECK_OK(aql_signal_destroy(ok));
	CHECK_OK(aql_signal_destroy(bad));
	CHECK_OK(aql_signal_destroy(after));
}

/* CPU agent -> resident queue -> CPU agent, only the last awaited; and
 * waiters asleep in the kernel woken by the host thread. */
static void test_cross_agent(void)
{
	aql_queue *cpu = th_queue(64, AQL_QUEUE_MULTI, 0), *q = resident_queue(64);
	aql_signal *gate = th_signal(1), *s1 = th_signal(1), *s2 = th_signal(1), *s3 = th_signal(1);
	float *x = th_device_floats(gpu, N, 2.0f), *y = th_device_floats(gpu, N, 1.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	aql_packet p;
	int64_t v = 1;

	p = th_barrier_and(gate, s1);
	th_submit(cpu, &p);
	p = th_barrier_and(s1, NULL);
	th_submit(q, &p);
	p = th_saxpy_packet(saxpy, &args, 64, s2);
	th_submit(q, &p);
	p = th_barrier_and(s2, s3);
	th_submit(cpu, &p);
	th_sleep_ms(30);
	CHECK(aql_signal_load(s3, AQL_ACQUIRE) == 1, "the chain waits for its gate");
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK_DONE(aql_signal_wait(s3, AQL_COND_LT, 1, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
	CHECK(v == 0 && aql_signal_load(s2, AQL_ACQUIRE) == 0, "chain ends: s3 %lld, s2 %lld",
	      (long long)v, (long long)aql_signal_load(s2, AQL_ACQUIRE));
	CHECK(th_device_all(gpu, y, N, 3.0f), "the resident kernel of the chain ran once");
	/* A waiter asleep on a signal the processor completes is woken. */
	aql_signal_store(s2, 1, AQL_RELEASE);
	p = th_saxpy_packet(saxpy, &args, 64, s2);
	th_submit(q, &p);
	CHECK_DONE(aql_signal_wait(s2, AQL_COND_LT, 1, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
	CHECK(v == 0, "a blocked waiter saw the completion: %lld", (long long)v);
	CHECK_OK(aql_queue_destroy(cpu));
	CHECK_OK(aql_queue_destroy(q));
	aql_signal *all[] = { gate, s1, s2, s3 };
	for (int i = 0; i < 4; i++)
		CHECK_OK(aql_signal_destroy(all[i]));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

struct producer {
	aql_queue *q;
	struct th_saxpy_args *args;
	aql_signal *done;
	int count;
};

static void *produce(void *arg)
{
	struct producer *pr = arg;

	for (int i = 0; i < pr->count; i++) {
		aql_packet p = th_saxpy_packet(saxpy, pr->args, 64, pr->done);

		th_submit(pr->q, &p);
	}
	return NULL;
}

/* Four producers on one resident queue of 16 slots (so they wait for
 * room the processor frees): every packet runs once. */
static void test_producers(void)
{
	enum { P = 4, EACH = 25 };
	aql_queue *q = resident_queue(16);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 0.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	aql_signal *done = th_signal(P * EACH);
	struct producer pr[P];
	pthread_t t[P];

	for (int i = 0; i < P; i++) {
		pr[i] = (struct producer){ q, &args, done, EACH };
		pthread_create(&t[i], NULL, produce, &pr[i]);
	}
	for (int i = 0; i < P; i++)
		pthread_join(t[i], NULL);
	CHECK(th_wait_done(done) == 0, "all %d packets completed", P * EACH);
	CHECK(th_device_all(gpu, y, N, (float)(P * EACH)), "each ran once");
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_signal_destroy(done));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/* Destroyed with packets held behind a barrier that never opens: the
 * processor stops between packets, and they get -1. */
static void test_destroy_in_flight(void)
{
	aql_queue *q = resident_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 0.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	aql_signal *gate = th_signal(1), *b = th_signal(1), *d[5];
	aql_packet p;

	p = th_barrier_and(gate, b);
	th_submit(q, &p);
	for (int i = 0; i < 5; i++) {
		d[i] = th_signal(1);
		p = th_saxpy_packet(saxpy, &args, 64, d[i]);
		th_submit(q, &p);
	}
	th_sleep_ms(20);
	CHECK_OK(aql_queue_destroy(q));
	CHECK(aql_signal_load(b, AQL_ACQUIRE) == -1, "the held barrier got -1");
	for (int i = 0; i < 5; i++)
		CHECK(aql_signal_load(d[i], AQL_ACQUIRE) == -1, "packet %d behind it got -1", i);
	CHECK(th_device_all(gpu, y, N, 0.0f), "none of them ran");
	CHECK_OK(aql_signal_destroy(gate));
	CHECK_OK(aql_signal_destroy(b));
	for (int i = 0; i < 5; i++)
		CHECK_OK(aql_signal_destroy(d[i]));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/* The same typed program: buffers and AQL_LAUNCH on a resident queue. */
static void test_typed(void)
{
	aql_queue *q = resident_queue(64);
	aql_buf *x, *y;
	aql_completion done;
	aql_launch_config cfg = { .grid = { N }, .workgroup = { 64 } };

	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_IN, NULL, &x));
	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, NULL, &y));
	for (uint32_t i = 0; i < N; i++) {
		aql_buf_data(x, float)[i] = (float)i;
		aql_buf_data(y, float)[i] = 1.0f;
	}
	CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &done, AQL_ARG(3.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG(N)));
	CHECK_OK(aql_completion_wait(done, TH_TIMEOUT_NS));
	int right = 1;

	for (uint32_t i = 0; i < N; i++)
		right &= aql_buf_data(y, float)[i] == 3.0f * (float)i + 1.0f;
	CHECK(right, "a typed saxpy on a resident queue");
	/* x and y are copied to the agent by copy packets (agent dispatches),
	 * which the translating path runs; the dispatch itself does not
	 * fall back. */
	CHECK(fallbacks(q) == 2, "two copies fell back, not the dispatch: %llu",
	      (unsigned long long)fallbacks(q));
	CHECK_OK(aql_queue_destroy(q));
	aql_buf_destroy(x);
	aql_buf_destroy(y);
}

/* Refusals: the flag on the CPU agent; the count on a queue that is not
 * resident; blocks without the flag. */
static void test_refusals(void)
{
	aql_queue_config config = { .flags = AQL_QUEUE_RESIDENT };
	aql_queue *q = NULL, *plain = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_agent *cpu;
	uint64_t n;

	CHECK_OK(aql_agent_default(&cpu));
	CHECK(aql_queue_create(cpu, &config, &q) == AQL_ERR_UNSUPPORTED,
	      "the CPU agent refuses AQL_QUEUE_RESIDENT");
	config.flags = AQL_QUEUE_RESIDENT_BLOCKS(4);
	CHECK(aql_queue_create(gpu, &config, &q) == AQL_ERR_INVALID_ARG,
	      "resident blocks without the flag");
	CHECK(aql_queue_resident_fallbacks(plain, &n) == AQL_ERR_INVALID_ARG,
	      "a queue that is not resident has no fallback count");
	CHECK_OK(aql_queue_destroy(plain));
}

/* The processor's launch faults (AQL_CUDA_EMU_FAIL_AFTER=0): the queue
 * names the driver's error, and its packets get -1, none hangs. */
static void test_fault(void)
{
	aql_queue *q = resident_queue(64);
	aql_signal *d = th_signal(1);
	aql_packet p = th_barrier_and(NULL, d);

	/* The host thread may have seen the fault already: then the queue
	 * refuses the packet; otherwise it gets -1. */
	if (aql_queue_submit(q, &p) == AQL_OK)
		CHECK(th_wait_done(d) == -1, "a packet of a faulted processor gets -1");
	else
		CHECK(aql_signal_load(d, AQL_ACQUIRE) == 1, "a refused packet never ran");
	const char *why = "";

	CHECK(aql_queue_error(q, &why) == AQL_ERR_DEVICE, "the queue is in error");
	CHECK(strstr(why, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL, "with the driver's error: %s", why);
	aql_queue_destroy(q);
	CHECK_OK(aql_signal_destroy(d));
}

int main(int argc, char **argv)
{
	const char *env = getenv("AQL_HIL");
	int hil = env && !strcmp(env, "1");
	aql_code_object *co = NULL;
	char kernels[8192];
	int fault = argc > 4 && !strcmp(argv[4], "--fault");
	void *emu;

	if (argc < 4) {
		fprintf(stderr, "usage: %s SAXPY_HOST SAXPY_PTX PROCESSOR_HOST [--fault]\n", argv[0]);
		return 2;
	}
	if (fault && hil) {
		printf("SKIP: AQL_HIL=1: the fault test needs the emulation's fault injection\n");
		return 77;
	}
	snprintf(kernels, sizeof(kernels), "%s:%s", argv[1], argv[3]);
	gpu = th_cuda_open(kernels, hil, &emu);
	if (!gpu)
		return 1;
	ptx_path = argv[2];
	CHECK_OK(aql_code_object_load_file(gpu, ptx_path, NULL, &co));
	if (co)
		CHECK_OK(aql_code_object_kernel(co, "saxpy", &saxpy));
	if (!saxpy)
		th_stop("no saxpy");
	if (fault) {
		test_fault();
	} else {
		test_refusals();
		test_dispatch_order();
		test_barriers();
		test_fallback();
		test_cross_agent();
		test_producers();
		test_destroy_in_flight();
		test_typed();
		test_malformed();
	}
	aql_code_object_destroy(co);
	th_cuda_close(gpu, emu);
	return th_finish();
}
