/* SPDX-License-Identifier: MIT */
/*
 * CUDA queues (nv/queue.c) against the emulated driver (tests/cuda_emu/):
 * raw packets and typed launches on a stream, dependencies as stream waits
 * or host functions, completions, cross-agent chains, pageable copies,
 * faults and destroy; priorities (the stream's, at creation only); the
 * driver calls a typed launch makes on its thread (one), and a context
 * changed behind aql's back.
 *
 * Usage: test_cuda_queue HOST_OBJECT [PTX] [--fault]
 * HOST_OBJECT is saxpy's host build (the emulation runs it), PTX its PTX
 * (without it, the kernel tests are left out). Run with the emulation's
 * folder on LD_LIBRARY_PATH; AQL_CUDA_EMU_MODE=nomemops runs the same
 * packets on the host-function path; --fault runs the fault test, under
 * AQL_CUDA_EMU_FAIL_AFTER=2.
 *
 * With AQL_HIL=1 (tests/hil/run) it runs on the real driver: the
 * emulation's counters are left out, --fault skips, and a real kernel
 * fault (saxpy writing through address 8) is tested last, since it
 * poisons the device context.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "util/clock.h"
#include "cuda_helpers.h"
#include "aql/queue_impl.h"
#include "nv/nv.h"

#define N 256u

static aql_agent *gpu;
static const aql_kernel *saxpy;
static aqlemu_thread_calls_fn thread_calls;
static CUresult (*stream_query)(CUstream stream);
static CUresult (*set_current)(CUcontext ctx);
static CUresult (*stream_priority)(CUstream stream, int *priority);
static int device_path;

static aql_queue *gpu_queue(uint32_t size)
{
	aql_queue_config config = { .size = size, .type = AQL_QUEUE_MULTI,
				    .full_timeout_ns = TH_TIMEOUT_NS };
	aql_queue *q = NULL;

	CHECK_OK(aql_queue_create(gpu, &config, &q));
	if (!q)
		th_stop("no CUDA queue");
	return q;
}

/* Still not done after a while: whatever gates it holds. */
static void check_held(aql_signal *done, const char *what)
{
	th_sleep_ms(30);
	CHECK(aql_signal_load(done, AQL_ACQUIRE) == 1, "%s ran before its dependency (value %lld)",
	      what, (long long)aql_signal_load(done, AQL_ACQUIRE));
}

/* Raw dispatches, each with its own completion signal, then five that
 * share one signal set to 5: its value ends at exactly 0. */
static void test_dispatch(void)
{
	aql_queue *q = gpu_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 1.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	struct aqlemu_stats before = th_cuda_stats();
	aql_signal *done[8], *shared = th_signal(5);
	aql_packet p;

	for (int i = 0; i < 8; i++) {
		done[i] = th_signal(1);
		p = th_saxpy_packet(saxpy, &args, 64, done[i]);
		th_submit(q, &p);
	}
	for (int i = 0; i < 8; i++)
		CHECK(th_wait_done(done[i]) == 0, "dispatch %d", i);
	for (int i = 0; i < 5; i++) {
		p = th_saxpy_packet(saxpy, &args, 64, shared);
		th_submit(q, &p);
	}
	CHECK(th_wait_done(shared) == 0, "a signal shared by 5 packets ends at 0");
	th_sleep_ms(5);
	CHECK(aql_signal_load(shared, AQL_ACQUIRE) == 0, "and stays there: %lld",
	      (long long)aql_signal_load(shared, AQL_ACQUIRE));
	CHECK(th_device_all(gpu, y, N, 14.0f), "13 launches of y += x");
	CHECK(!th_cuda_emulated() || th_cuda_stats().launches - before.launches == 13,
	      "13 kernels ran: %llu",
	      (unsigned long long)(th_cuda_stats().launches - before.launches));

	/* A signal reset right after its wait, and used again at once. */
	for (int round = 0; round < 50; round++) {
		aql_signal_store(done[0], 1, AQL_RELEASE);
		p = th_barrier_and(NULL, done[0]);
		th_submit(q, &p);
		if (th_wait_done(done[0]) != 0) {
			CHECK(0, "round %d of a reused signal", round);
			break;
		}
	}
	for (int i = 0; i < 8; i++)
		CHECK_OK(aql_signal_destroy(done[i]));
	CHECK_OK(aql_signal_destroy(shared));
	CHECK_OK(aql_queue_destroy(q));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/*
 * A launch the driver refuses (more blocks than the grid allows) fails its
 * packet, naming the call and the error; what came before it still runs
 * and completes; it and what follows get -1.
 */
static void test_refused_launch(void)
{
	aql_queue *q = gpu_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 1.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	aql_signal *gate = th_signal(1), *first = th_signal(1), *bad = th_signal(1),
		   *after = th_signal(1);
	const char *message = NULL;
	aql_packet p[4];

	/* All at once: the processor refuses the third as soon as it reaches
	 * it, on the stream path before the gate opens. */
	p[0] = th_barrier_and(gate, NULL);
	p[1] = th_saxpy_packet(saxpy, &args, 64, first);
	p[2] = th_saxpy_packet(saxpy, &args, 64, bad);
	p[2].dispatch.workgroup_size_x = 1;
	p[2].dispatch.grid_size_x = UINT32_MAX;
	p[3] = th_saxpy_packet(saxpy, &args, 64, after);
	th_submit_all(q, p, 4);
	for (uint64_t end = th_now_ns() + TH_TIMEOUT_NS;
	     aql_queue_error(q, NULL) == AQL_OK && th_now_ns() < end;)
		th_sleep_ms(1);
	CHECK(aql_queue_error(q, &message) == AQL_ERR_DEVICE, "queue error: %s",
	      aql_status_str(aql_queue_error(q, NULL)));
	CHECK(message && strstr(message, "cuLaunchKernel") &&
	      strstr(message, "CUDA_ERROR_INVALID_VALUE"), "message: %s",
	      message ? message : "(none)");
	CHECK(aql_signal_load(bad, AQL_ACQUIRE) == 1,
	      "the refused packet waits for those before it: %lld",
	      (long long)aql_signal_load(bad, AQL_ACQUIRE));
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK(th_wait_done(first) == 0, "the launch before it ran");
	CHECK(th_wait_done(bad) == -1, "the refused launch failed");
	CHECK(th_wait_done(after) == -1, "the launch after it was cancelled");
	CHECK(th_device_all(gpu, y, N, 2.0f), "only the first launch ran");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal *all[] = { gate, first, bad, after };
	for (int i = 0; i < 4; i++)
		CHECK_OK(aql_signal_destroy(all[i]));
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

/* One gated packet: held while the gate is closed, released by opening. */
static void gated(aql_queue *q, aql_packet p, aql_signal *gate, int64_t open,
		  aql_signal *done, const char *what)
{
	th_submit(q, &p);
	check_held(done, what);
	aql_signal_store(gate, open, AQL_RELEASE);
	CHECK(th_wait_done(done) == 0, "%s released", what);
	aql_signal_store(done, 1, AQL_RELEASE);
}

/*
 * The emulation counts a host function once it has returned, after the
 * signal it changed: counters are read after a destroy drained the queue.
 */
static void test_waits(void)
{
	aql_queue *q = gpu_queue(64);
	aql_signal *gate = th_signal(1), *done = th_signal(1);
	struct aqlemu_stats before = th_cuda_stats(), after;
	aql_packet p;

	gated(q, th_barrier_and(gate, done), gate, 0, done, "barrier-AND");
	aql_signal_store(gate, 10, AQL_RELEASE);
	gated(q, th_barrier_value(gate, AQL_COND_LT, 5, -1, done),
	      gate, 4, done, "BARRIER_VALUE <");
	aql_signal_store(gate, 0, AQL_RELEASE);
	gated(q, th_barrier_value(gate, AQL_COND_GTE, 3, -1, done),
	      gate, 3, done, "BARRIER_VALUE >=");
	gated(q, th_barrier_value(gate, AQL_COND_EQ, 7, -1, done),
	      gate, 7, done, "BARRIER_VALUE ==");
	/* A failed dependency (-1) releases a barrier-AND too. */
	aql_signal_store(gate, 1, AQL_RELEASE);
	gated(q, th_barrier_and(gate, done), gate, -1, done, "barrier-AND on a failed signal");
	CHECK_OK(aql_queue_destroy(q));
	after = th_cuda_stats();
	if (th_cuda_emulated() && device_path) {
		CHECK(after.mem_op_waits - before.mem_op_waits == 5, "five stream waits: %llu",
		      (unsigned long long)(after.mem_op_waits - before.mem_op_waits));
		CHECK(after.host_funcs_run == before.host_funcs_run,
		      "no host function on the device path: %llu",
		      (unsigned long long)(after.host_funcs_run - before.host_funcs_run));
	} else if (th_cuda_emulated()) {
		CHECK(after.mem_op_waits == before.mem_op_waits && after.mem_op_writes ==
		      before.mem_op_writes, "no stream memory operation without them");
		CHECK(after.host_funcs_run - before.host_funcs_run == 10,
		      "5 waits and 5 decrements by host functions: %llu",
		      (unsigned long long)(after.host_funcs_run - before.host_funcs_run));
	}

	/* NE and a partial mask wait on the host, on every device. */
	q = gpu_queue(64);
	before = th_cuda_stats();
	aql_signal_store(gate, 2, AQL_RELEASE);
	gated(q, th_barrier_value(gate, AQL_COND_NE, 2, -1, done),
	      gate, 3, done, "BARRIER_VALUE !=");
	aql_signal_store(gate, 0x10, AQL_RELEASE);
	gated(q, th_barrier_value(gate, AQL_COND_EQ, 1, 0xf, done), gate, 0x21, done,
	      "BARRIER_VALUE == under a mask");
	CHECK_OK(aql_queue_destroy(q));
	after = th_cuda_stats();
	CHECK(!th_cuda_emulated() ||
	      after.host_funcs_run - before.host_funcs_run == (device_path ? 2u : 4u),
	      "host waits: %llu", (unsigned long long)(after.host_funcs_run - before.host_funcs_run));
	CHECK(!th_cuda_emulated() || after.mem_op_waits == before.mem_op_waits,
	      "no stream wait for them");

	/* A signal in use by a packet in flight cannot be destroyed; right
	 * after its wait it can. */
	q = gpu_queue(64);
	aql_signal_store(gate, 1, AQL_RELEASE);
	p = th_barrier_and(gate, done);
	th_submit(q, &p);
	check_held(done, "barrier-AND");
	CHECK(aql_signal_destroy(gate) == AQL_ERR_BUSY, "destroying a dependency in flight");
	CHECK(aql_signal_destroy(done) == AQL_ERR_BUSY, "destroying a completion in flight");
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK(th_wait_done(done) == 0, "released");
	CHECK_OK(aql_signal_destroy(done));
	CHECK_OK(aql_signal_destroy(gate));
	CHECK_OK(aql_queue_destroy(q));
}

/*
 * gate -> CPU barrier (s1) -> CUDA barrier on s1, saxpy (s2) -> CPU barrier
 * on s2 (s3): opened once, waited for at the end only, blocked.
 */
static void test_cross_agent(void)
{
	aql_queue *cpu = th_queue(64, AQL_QUEUE_MULTI, 0), *q = gpu_queue(64);
	aql_signal *gate = th_signal(1), *s1 = th_signal(1), *s2 = th_signal(1), *s3 = th_signal(1);
	float *x = NULL, *y = NULL;
	struct th_saxpy_args args;
	aql_packet p;
	int64_t v = 1;

	if (saxpy) {
		x = th_device_floats(gpu, N, 2.0f);
		y = th_device_floats(gpu, N, 1.0f);
	}
	args = (struct th_saxpy_args){ 1.0f, 0, x, y, N };
	p = th_barrier_and(gate, s1);
	th_submit(cpu, &p);
	if (saxpy) {
		p = th_barrier_and(s1, NULL);
		th_submit(q, &p);
		p = th_saxpy_packet(saxpy, &args, 64, s2);
	} else {
		p = th_barrier_and(s1, s2);
	}
	th_submit(q, &p);
	p = th_barrier_and(s2, s3);
	th_submit(cpu, &p);
	check_held(s3, "the chain");
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK_DONE(aql_signal_wait(s3, AQL_COND_LT, 1, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
	CHECK(v == 0 && aql_signal_load(s2, AQL_ACQUIRE) == 0, "chain ends: s3 %lld, s2 %lld",
	      (long long)v, (long long)aql_signal_load(s2, AQL_ACQUIRE));
	if (saxpy) {
		CHECK(th_device_all(gpu, y, N, 3.0f), "the CUDA kernel of the chain ran once");
		aql_agent_mem_free(gpu, x);
		aql_agent_mem_free(gpu, y);
	}
	CHECK_OK(aql_queue_destroy(cpu));
	CHECK_OK(aql_queue_destroy(q));
	aql_signal *all[] = { gate, s1, s2, s3 };
	for (int i = 0; i < 4; i++)
		CHECK_OK(aql_signal_destroy(all[i]));
}

struct waiter {
	aql_signal *signal;
	int64_t below;			/* waits for a value below it */
	aql_status st;
	int64_t value;
	int woken;			/* returned before its timeout */
};

/* The device's stores wake no one: a waiter asleep in the kernel returns
 * before its timeout only if the processor woke it. */
static void *wait_blocked(void *arg)
{
	struct waiter *w = arg;
	uint64_t deadline = aql_deadline(TH_TIMEOUT_NS);

	w->st = aql_signal_wait(w->signal, AQL_COND_LT, w->below, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED,
				&w->value);
	w->woken = aql_now_ns() < deadline;
	return NULL;
}

/* Waiters asleep in the kernel wake up when the stream completes. */
static void test_blocked_waiters(void)
{
	aql_queue *q = gpu_queue(64);
	aql_signal *gate = th_signal(1), *done = th_signal(1);
	struct waiter w[2] = { { done, 1, AQL_ERR_TIMEOUT, 1, 0 }, { done, 1, AQL_ERR_TIMEOUT, 1, 0 } };
	pthread_t t[2];
	aql_packet p = th_barrier_and(gate, done);

	th_submit(q, &p);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, wait_blocked, &w[i]);
	th_sleep_ms(30);
	aql_signal_store(gate, 0, AQL_RELEASE);
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		CHECK_DONE(w[i].st);
		CHECK(w[i].woken, "waiter %d was woken, not found done at its own timeout", i);
		CHECK(w[i].value == 0, "waiter %d saw %lld", i, (long long)w[i].value);
	}
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_signal_destroy(gate));
	CHECK_OK(aql_signal_destroy(done));
}

/*
 * A typed launch rings the doorbell only when the processor must wake:
 * here it sleeps for good (nothing in flight), and only it can put the
 * owed store on the stream and wake a waiter asleep in the kernel.
 */
static void test_idle_wake(void)
{
	aql_queue *q = gpu_queue(64);
	aql_signal *gate = th_signal(1);
	aql_completion c, dep = { gate, 1, NULL };
	uint64_t *dev = NULL, value = 11;
	struct waiter w;
	pthread_t t;

	CHECK_OK(aql_agent_mem_alloc(gpu, sizeof(value), (void **)&dev));
	CHECK_OK(aql_queue_copy(q, dev, &value, sizeof(value), NULL, 0, &c));
	CHECK_DONE(aql_completion_wait(c, TH_TIMEOUT_NS));
	/* Past the processor's spin: asleep until the doorbell. */
	th_sleep_ms(50);
	CHECK_OK(aql_queue_copy(q, dev, &value, sizeof(value), &dep, 1, &c));
	w = (struct waiter){ c.signal, c.below, AQL_ERR_TIMEOUT, c.below, 0 };
	pthread_create(&t, NULL, wait_blocked, &w);
	th_sleep_ms(30);
	aql_signal_store(gate, 0, AQL_RELEASE);
	pthread_join(t, NULL);
	CHECK_DONE(w.st);
	CHECK(w.woken, "the waiter was woken, not found done at its own timeout");
	CHECK(w.value < c.below, "the copy behind the gate completed: value %lld, below %lld",
	      (long long)w.value, (long long)c.below);
	CHECK_OK(aql_queue_destroy(q));
	aql_agent_mem_free(gpu, dev);
	CHECK_OK(aql_signal_destroy(gate));
}

/* Copies from and to pageable memory go through staging, asynchronously;
 * one larger than the staging ring waits for it to come free. */
static void test_pageable_copy(void)
{
	aql_queue *q = gpu_queue(64);
	size_t sizes[] = { 1000, (3u << 20) + 12, (9u << 20) + 4 };
	struct aqlemu_stats before = th_cuda_stats(), after;

	for (int i = 0; i < 3; i++) {
		size_t size = sizes[i];
		unsigned char *src = malloc(size), *back = calloc(1, size), *dev = NULL;
		aql_completion c;

		for (size_t j = 0; j < size; j++)
			src[j] = (unsigned char)(j * 7 + i);
		CHECK_OK(aql_agent_mem_alloc(gpu, size, (void **)&dev));
		CHECK_OK(aql_queue_copy(q, dev, src, size, NULL, 0, &c));
		CHECK_OK(aql_queue_copy(q, back, dev, size, &c, 1, &c));
		CHECK_DONE(aql_completion_wait(c, TH_TIMEOUT_NS));
		CHECK(memcmp(src, back, size) == 0, "%zu bytes there and back", size);
		aql_agent_mem_free(gpu, dev);
		free(src);
		free(back);
	}
	after = th_cuda_stats();
	CHECK(!th_cuda_emulated() || after.pageable_sync_copies == before.pageable_sync_copies,
	      "no copy made synchronous: %llu",
	      (unsigned long long)(after.pageable_sync_copies - before.pageable_sync_copies));
	CHECK_OK(aql_queue_destroy(q));
}

/*
 * Destroy right after submitting. A typed copy translates every packet
 * before it in the ring: the destroy lets the stream finish them all.
 * Raw packets after it that the processor had not translated yet may be
 * cancelled (-1), never left hanging.
 */
static void test_destroy_in_flight(void)
{
	aql_queue *q = gpu_queue(256);
	aql_signal *done = th_signal(1), *late = th_signal(1);
	uint64_t value = 0x1234567890ull, back = 0, *dev = NULL;
	float *x = NULL, *y = NULL;
	struct th_saxpy_args args;
	aql_completion c;
	aql_packet p;
	int64_t v;

	if (saxpy) {
		x = th_device_floats(gpu, N, 1.0f);
		y = th_device_floats(gpu, N, 0.0f);
	}
	CHECK_OK(aql_agent_mem_alloc(gpu, sizeof(value), (void **)&dev));
	args = (struct th_saxpy_args){ 1.0f, 0, x, y, N };
	for (int i = 0; i < 100; i++) {
		p = saxpy ? th_saxpy_packet(saxpy, &args, 64, i == 99 ? done : NULL) :
		    th_barrier_and(NULL, i == 99 ? done : NULL);
		th_submit(q, &p);
	}
	CHECK_OK(aql_queue_copy(q, dev, &value, sizeof(value), NULL, 0, &c));
	CHECK_OK(aql_queue_copy(q, &back, dev, sizeof(back), &c, 1, &c));
	p = th_barrier_and(NULL, late);
	th_submit(q, &p);
	CHECK_OK(aql_queue_destroy(q));
	CHECK(aql_signal_load(done, AQL_ACQUIRE) == 0, "the last raw packet completed: %lld",
	      (long long)aql_signal_load(done, AQL_ACQUIRE));
	CHECK(aql_signal_load(c.signal, AQL_ACQUIRE) < c.below && back == value,
	      "the copies completed");
	v = aql_signal_load(late, AQL_ACQUIRE);
	CHECK(v == 0 || v == -1, "the packet after them completed or was cancelled: %lld",
	      (long long)v);
	if (saxpy) {
		CHECK(th_device_all(gpu, y, N, 100.0f), "all 100 launches ran");
		aql_agent_mem_free(gpu, x);
		aql_agent_mem_free(gpu, y);
	}
	aql_agent_mem_free(gpu, dev);
	CHECK_OK(aql_signal_destroy(done));
	CHECK_OK(aql_signal_destroy(late));
}

/*
 * Typed work on a CUDA queue owes its completion stores (nv/queue.c): they
 * go on the stream when the batch is full, before a wait of the stream,
 * when asked, within the processor's bound, at destroy. Each way is the
 * only one that delivers in one case below, or the case would hang.
 */
#define OWED_COPIES 512

static void test_owed_stores(void)
{
	aql_queue *q = gpu_queue(1024), *cpu = th_queue(64, AQL_QUEUE_MULTI, 0);
	uint64_t *dev = NULL, value = 7, back = 0, writes;
	struct aqlemu_stats before;
	aql_signal *done = th_signal(1), *gate;
	aql_completion c, d;
	aql_packet p;
	int64_t v = 1;
	uint64_t deadline;
	int polls = 0;

	CHECK_OK(aql_agent_mem_alloc(gpu, 2 * sizeof(uint64_t), (void **)&dev));
	CHECK_OK(aql_queue_copy(q, dev, &value, sizeof(value), NULL, 0, &c));
	CHECK_DONE(aql_completion_wait(c, TH_TIMEOUT_NS));

	/* Back to back behind a closed gate, so that the stream is busy
	 * however fast the machine: the stores share batches (a full one goes
	 * out); the last ones are asked for by the wait. */
	gate = th_signal(1);
	before = th_cuda_stats();
	p = th_barrier_and(gate, NULL);
	CHECK_OK(th_submit(q, &p));
	for (int i = 0; i < OWED_COPIES; i++)
		CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	aql_signal_store(gate, 0, AQL_RELEASE);
	CHECK_DONE(aql_completion_wait(c, TH_TIMEOUT_NS));
	CHECK_OK(aql_signal_destroy(gate));
	writes = th_cuda_stats().mem_op_writes - before.mem_op_writes;
	if (device_path && th_cuda_emulated())
		/* Unbatched, each copy would make 3 (its store and the two
		 * progress words); the processor's time bound may cut a batch
		 * short on a slow machine, hence the margin. */
		CHECK(writes >= OWED_COPIES && writes < 2 * OWED_COPIES,
		      "%u typed copies made %llu stream stores: one per copy and two per batch, batches of several",
		      OWED_COPIES, (unsigned long long)writes);

	/* Polled only with aql_completion_done(). */
	CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	deadline = aql_deadline(TH_TIMEOUT_NS);
	while (!aql_completion_done(c) && aql_now_ns() < deadline)
		polls++;
	CHECK(aql_completion_done(c), "aql_completion_done() saw the copy end (%d polls)", polls);

	/* Waited on the signal, asking nobody: the processor's bound. */
	CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	CHECK_DONE(aql_signal_wait(c.signal, AQL_COND_LT, c.below, TH_TIMEOUT_NS,
				   AQL_WAIT_BLOCKED, &v));

	/* A raw packet of the same queue waits for its earlier completion:
	 * the store goes before the stream's wait, or the queue deadlocks. */
	CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	p = th_barrier_value(c.signal, AQL_COND_LT, c.below, -1, done);
	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0, "a raw packet waited for its queue's typed copy");

	/* Another agent's queue waits for it: typed (the dependency asks)
	 * and raw (nobody asks: the bound). */
	CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	CHECK_OK(aql_queue_copy(cpu, &back, &value, sizeof(value), &c, 1, &d));
	CHECK_DONE(aql_completion_wait(d, TH_TIMEOUT_NS));
	CHECK(back == value, "the CPU queue's copy ran");
	CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	aql_signal_store(done, 1, AQL_RELEASE);
	p = th_barrier_value(c.signal, AQL_COND_LT, c.below, -1, done);
	th_submit(cpu, &p);
	CHECK(th_wait_done(done) == 0, "a CPU queue's raw packet waited for a CUDA typed copy");

	/* Destroyed with stores owed: they are made, not lost or failed. */
	for (int i = 0; i < 20; i++)
		CHECK_OK(aql_queue_copy(q, dev + 1, dev, sizeof(value), NULL, 0, &c));
	CHECK_OK(aql_queue_destroy(q));
	v = aql_signal_load(c.signal, AQL_ACQUIRE);
	CHECK(v >= 0 && v < c.below, "the last copy completed at destroy: value %lld, below %lld",
	      (long long)v, (long long)c.below);
	CHECK_OK(aql_queue_destroy(cpu));
	aql_agent_mem_free(gpu, dev);
	CHECK_OK(aql_signal_destroy(done));
}

/*
 * A typed launch makes one driver call on its thread, cuLaunchKernel: its
 * completion store is owed until someone can observe it. Each way of
 * observing it below must still see every launch complete, or hang.
 */
#define CALL_LAUNCHES 48u
#define BUSY_LAUNCHES 200u

static uint64_t calls_now(void)
{
	return thread_calls ? thread_calls() : 0;
}

static void test_launch_calls(void)
{
	aql_queue *q = gpu_queue(1024), *cpu = th_queue(64, AQL_QUEUE_MULTI, 0);
	aql_launch_config cfg = { .grid = { N } };
	aql_completion c[CALL_LAUNCHES], d;
	aql_buf *x = NULL, *y = NULL;
	uint64_t calls, back = 0, one = 1;
	aql_signal *gate;
	aql_packet p;
	uint32_t launches = 1, bad = 0;
	int64_t v = 0;

	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_IN, NULL, &x));
	CHECK_OK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, NULL, &y));
	if (!x || !y)
		th_stop("no typed buffers");
	for (uint32_t i = 0; i < N; i++) {
		aql_buf_data(x, float)[i] = (float)i;
		aql_buf_data(y, float)[i] = 0.0f;
	}
	/* The first launch moves the buffers; then they stay on the device. */
	CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &c[0], AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG(N)));
	CHECK_DONE(aql_completion_wait(c[0], TH_TIMEOUT_NS));

	/* Each on an idle stream, as a GPU faster than the host finds it, and
	 * asked for by nobody: their stores stay owed. */
	calls = 0;
	for (uint32_t i = 0; i < CALL_LAUNCHES; i++) {
		uint64_t before = calls_now(), deadline = aql_deadline(TH_TIMEOUT_NS);

		CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &c[i], AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
				    AQL_ARG(N)));
		calls += calls_now() - before;
		while (stream_query(nv_queue_stream(aql_queue_impl(q))) == CUDA_ERROR_NOT_READY &&
		       aql_now_ns() < deadline)
			th_sleep_ms(1);
	}
	launches += CALL_LAUNCHES;
	/* At most one each: the queue's processor, woken by its owed-store
	 * bound, may translate a launch published a moment before, and then
	 * its cuLaunchKernel is that thread's (seen under TSan: 47 of 48). */
	if (thread_calls && device_path)
		CHECK(calls <= CALL_LAUNCHES && calls >= CALL_LAUNCHES / 2,
		      "%u typed launches, each on an idle stream, made %llu driver calls on their thread: at most one each (cuLaunchKernel)",
		      CALL_LAUNCHES, (unsigned long long)calls);
	/* Nobody asks: the queue's own bound delivers the stores. */
	CHECK_DONE(aql_signal_wait(c[CALL_LAUNCHES - 1].signal, AQL_COND_LT,
				   c[CALL_LAUNCHES - 1].below, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
	for (uint32_t i = 0; i < CALL_LAUNCHES; i++)
		bad += !aql_completion_done(c[i]);
	CHECK(bad == 0, "%u of %u launches not complete after the last one", bad, CALL_LAUNCHES);

	/* The thread's context changed behind aql's back: the launch finds
	 * out from the driver's refusal and makes it current again. */
	if (set_current) {
		CHECK(set_current(NULL) == CUDA_SUCCESS, "cuCtxSetCurrent(NULL)");
		CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &c[0], AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
				    AQL_ARG(N)));
		launches++;
		CHECK_DONE(aql_completion_wait(c[0], TH_TIMEOUT_NS));
	}

	/* Behind a closed gate: full batches go out, one call per 64. */
	gate = th_signal(1);
	p = th_barrier_and(gate, NULL);
	CHECK_OK(th_submit(q, &p));
	/* Translated by the queue's thread, not by the first launch. */
	th_wait_read_index(q, __atomic_load_n(&q->amd->write_dispatch_id, __ATOMIC_ACQUIRE));
	calls = calls_now();
	for (uint32_t i = 0; i < BUSY_LAUNCHES; i++)
		CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &c[0], AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
				    AQL_ARG(N)));
	calls = calls_now() - calls;
	launches += BUSY_LAUNCHES;
	if (thread_calls && device_path)
		CHECK(calls <= BUSY_LAUNCHES + BUSY_LAUNCHES / 64,
		      "%u typed launches on a busy stream made %llu driver calls on their thread: one each and one per batch of 64 stores",
		      BUSY_LAUNCHES, (unsigned long long)calls);
	aql_signal_store(gate, 0, AQL_RELEASE);
	/* A later cfg.after on another agent asks for it. */
	CHECK_OK(aql_queue_copy(cpu, &back, &one, sizeof(one), &c[0], 1, &d));
	CHECK_DONE(aql_completion_wait(d, TH_TIMEOUT_NS));
	CHECK(back == 1 && aql_completion_done(c[0]), "a CPU copy after the last launch ran after it");
	CHECK_OK(aql_signal_destroy(gate));

	/* A raw packet of the same queue waits for the last launch. */
	CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &c[0], AQL_ARG(1.0f), AQL_ARG(x), AQL_ARG(y),
			    AQL_ARG(N)));
	launches++;
	gate = th_signal(1);
	p = th_barrier_value(c[0].signal, AQL_COND_LT, c[0].below, -1, gate);
	CHECK_OK(th_submit(q, &p));
	CHECK(th_wait_done(gate) == 0, "a raw packet waited for its queue's typed launch");
	CHECK_OK(aql_signal_destroy(gate));

	/* Destroyed with stores owed: made, not lost. */
	for (uint32_t i = 0; i < 10; i++)
		CHECK_OK(AQL_LAUNCH(q, saxpy, &cfg, &c[0], AQL_ARG(1.0f), AQL_ARG(x),
				    AQL_ARG(y), AQL_ARG(N)));
	launches += 10;
	CHECK_OK(aql_queue_destroy(q));
	v = aql_signal_load(c[0].signal, AQL_ACQUIRE);
	CHECK(v >= 0 && v < c[0].below, "the last launch completed at destroy: value %lld, below %lld",
	      (long long)v, (long long)c[0].below);
	/* Every launch ran once: y = launches * x. */
	bad = 0;
	for (uint32_t i = 0; i < N; i++)
		bad += aql_buf_data(y, float)[i] != (float)launches * (float)i;
	CHECK(bad == 0, "%u of %u results wrong after %u launches (y[1] = %g)", bad, N, launches,
	      (double)aql_buf_data(y, float)[1]);
	CHECK_OK(aql_buf_destroy(x));
	CHECK_OK(aql_buf_destroy(y));
	CHECK_OK(aql_queue_destroy(cpu));
}

/* Several threads submit typed copies and raw packets to one queue. */
#define STRESS_THREADS 4
#define STRESS_ROUNDS 200

struct stress {
	aql_queue *q;
	int index;
	uint64_t *dev;
	int failures;
};

static void *stress_thread(void *arg)
{
	struct stress *s = arg;
	aql_signal *done = th_signal(1);
	uint64_t value, back = 0;
	int64_t got = 1;
	aql_completion c;
	aql_packet p;

	/* CHECK is not thread safe: failures are counted here. */
	for (int r = 0; r < STRESS_ROUNDS && !s->failures; r++) {
		if (s->index % 2) {
			aql_signal_store(done, 1, AQL_RELEASE);
			p = th_barrier_and(NULL, done);
			if (aql_queue_submit(s->q, &p) != AQL_OK ||
			    th_done(aql_signal_wait(done, AQL_COND_LT, 1, TH_TIMEOUT_NS,
						    AQL_WAIT_SPIN_BLOCK, &got)) != AQL_OK || got != 0)
				s->failures++;
			continue;
		}
		value = (uint64_t)s->index << 32 | (uint64_t)r;
		if (aql_queue_copy(s->q, s->dev, &value, sizeof(value), NULL, 0, &c) != AQL_OK ||
		    aql_queue_copy(s->q, &back, s->dev, sizeof(back), &c, 1, &c) != AQL_OK ||
		    th_done(aql_completion_wait(c, TH_TIMEOUT_NS)) != AQL_OK || back != value)
			s->failures++;
	}
	aql_signal_destroy(done);
	return NULL;
}

static void test_stress(void)
{
	aql_queue *q = gpu_queue(128);
	struct stress s[STRESS_THREADS];
	pthread_t t[STRESS_THREADS];

	for (int i = 0; i < STRESS_THREADS; i++) {
		s[i] = (struct stress){ q, i, NULL, 0 };
		CHECK_OK(aql_agent_mem_alloc(gpu, sizeof(uint64_t), (void **)&s[i].dev));
		pthread_create(&t[i], NULL, stress_thread, &s[i]);
	}
	for (int i = 0; i < STRESS_THREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK(s[i].failures == 0, "stress thread %d: %s", i, aql_error_message());
		aql_agent_mem_free(gpu, s[i].dev);
	}
	CHECK(aql_queue_error(q, NULL) == AQL_OK, "the queue is fine");
	CHECK_OK(aql_queue_destroy(q));
}

/* Under AQL_CUDA_EMU_FAIL_AFTER=2: the third launch faults. */
static void test_fault(void)
{
	aql_queue *q = gpu_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 1.0f);
	struct th_saxpy_args args = { 1.0f, 0, x, y, N };
	aql_signal *done[6], *gate = th_signal(1);
	struct waiter w;
	pthread_t t;
	const char *message = NULL;
	aql_packet p, all[6];

	for (int i = 0; i < 6; i++)
		done[i] = th_signal(1);
	/* The last waits on a gate, so that a packet is certainly in flight
	 * when the fault hits; a waiter sleeps on it. All at once, so that
	 * the fault cannot stop the queue before the last is in. */
	for (int i = 0; i < 5; i++)
		all[i] = th_saxpy_packet(saxpy, &args, 64, done[i]);
	all[5] = th_barrier_and(gate, done[5]);
	th_submit_all(q, all, 6);
	w = (struct waiter){ done[5], 1, AQL_ERR_TIMEOUT, 1, 0 };
	pthread_create(&t, NULL, wait_blocked, &w);
	for (int i = 0; i < 5; i++) {
		int64_t v = th_wait_done(done[i]);

		CHECK(i < 2 ? v == 0 : v < 0, "launch %d ends with %lld", i, (long long)v);
	}
	pthread_join(t, NULL);
	CHECK_DONE(w.st);
	CHECK(w.woken, "the blocked waiter was woken, not found done at its own timeout");
	CHECK(w.value < 0, "the blocked waiter saw %lld", (long long)w.value);
	CHECK(aql_queue_error(q, &message) == AQL_ERR_DEVICE, "queue error %s",
	      aql_status_str(aql_queue_error(q, NULL)));
	CHECK(message && strstr(message, "CUDA_ERROR_ILLEGAL_ADDRESS"), "message: %s",
	      message ? message : "(none)");
	p = th_barrier_and(NULL, NULL);
	CHECK(aql_queue_submit(q, &p) == AQL_ERR_QUEUE_ERROR, "later submissions fail");
	CHECK_OK(aql_queue_destroy(q));
	for (int i = 0; i < 6; i++)
		CHECK_OK(aql_signal_destroy(done[i]));
	CHECK_OK(aql_signal_destroy(gate));
}

/*
 * On the real driver: a launch that writes through address 8 faults the
 * device. The queue enters its error state naming the error; the launch
 * and everything after it get negative values, a blocked waiter returns,
 * later submissions fail and destroy is safe. What ran before keeps 0.
 * The context stays unusable: run last.
 */
static void test_device_fault(void)
{
	aql_queue *q = gpu_queue(64);
	float *x = th_device_floats(gpu, N, 1.0f), *y = th_device_floats(gpu, N, 1.0f);
	struct th_saxpy_args good = { 1.0f, 0, x, y, N };
	struct th_saxpy_args bad = { 1.0f, 0, x, (float *)(uintptr_t)8, N };
	aql_signal *done[4], *gate = th_signal(1);
	const char *message = NULL;
	struct waiter w;
	pthread_t t;
	aql_packet p, all[3];

	for (int i = 0; i < 4; i++)
		done[i] = th_signal(1);
	p = th_saxpy_packet(saxpy, &good, 64, done[0]);
	th_submit(q, &p);
	CHECK(th_wait_done(done[0]) == 0, "the launch before the fault");
	/* The last held by a gate never opened: certainly in flight at the
	 * fault. All at once, so that the fault cannot stop the queue before
	 * the last is in. */
	all[0] = th_saxpy_packet(saxpy, &bad, 64, done[1]);
	all[1] = th_saxpy_packet(saxpy, &good, 64, done[2]);
	all[2] = th_barrier_and(gate, done[3]);
	th_submit_all(q, all, 3);
	w = (struct waiter){ done[3], 1, AQL_ERR_TIMEOUT, 1, 0 };
	pthread_create(&t, NULL, wait_blocked, &w);
	for (int i = 1; i < 3; i++) {
		int64_t v = th_wait_done(done[i]);

		CHECK(v < 0, "launch %d ends with %lld", i, (long long)v);
	}
	pthread_join(t, NULL);
	CHECK_DONE(w.st);
	CHECK(w.woken, "the blocked waiter was woken, not found done at its own timeout");
	CHECK(w.value < 0, "the blocked waiter saw %lld", (long long)w.value);
	CHECK(aql_signal_load(done[0], AQL_ACQUIRE) == 0, "the launch before it keeps 0: %lld",
	      (long long)aql_signal_load(done[0], AQL_ACQUIRE));
	CHECK(aql_queue_error(q, &message) == AQL_ERR_DEVICE, "queue error %s",
	      aql_status_str(aql_queue_error(q, NULL)));
	CHECK(message && strstr(message, "CUDA_ERROR_ILLEGAL_ADDRESS"), "message: %s",
	      message ? message : "(none)");
	printf("device fault: %s\n", message ? message : "(none)");
	p = th_barrier_and(NULL, NULL);
	CHECK(aql_queue_submit(q, &p) == AQL_ERR_QUEUE_ERROR, "later submissions fail");
	CHECK_OK(aql_queue_destroy(q));
	for (int i = 0; i < 4; i++)
		CHECK_OK(aql_signal_destroy(done[i]));
	CHECK_OK(aql_signal_destroy(gate));
	/* The context is gone: freeing may fail, and must not crash. */
	aql_agent_mem_free(gpu, x);
	aql_agent_mem_free(gpu, y);
}

static int priority_of(aql_queue *q)
{
	int p = 1;

	CHECK(stream_priority(nv_queue_stream(aql_queue_impl(q)), &p) == CUDA_SUCCESS,
	      "cuStreamGetPriority");
	return p;
}

/*
 * A queue's stream takes LOW/HIGH from the creation flags: the context's
 * least and greatest priority (the emulation's 0 and -5), NORMAL CUDA's
 * default 0. A later change is refused, naming why; setting the priority
 * the queue has is nothing to do. The queues run packets.
 */
static void test_priority(void)
{
	aql_queue_config c = { .size = 64, .flags = AQL_QUEUE_HIGH_PRIORITY,
			       .full_timeout_ns = TH_TIMEOUT_NS };
	aql_queue *normal = gpu_queue(64), *high = NULL, *low = NULL;

	CHECK_OK(aql_queue_create(gpu, &c, &high));
	c.flags = AQL_QUEUE_LOW_PRIORITY;
	CHECK_OK(aql_queue_create(gpu, &c, &low));
	if (!high || !low)
		th_stop("no CUDA queue with a priority");
	CHECK(priority_of(normal) == 0 && priority_of(low) == 0, "NORMAL %d, LOW %d",
	      priority_of(normal), priority_of(low));
	CHECK(th_cuda_emulated() ? priority_of(high) == -5 : priority_of(high) <= 0, "HIGH %d",
	      priority_of(high));
	CHECK(aql_queue_set_priority(normal, AQL_QUEUE_PRIORITY_HIGH) == AQL_ERR_UNSUPPORTED &&
	      strstr(aql_error_message(), "cuStreamCreateWithPriority"), "change: %s",
	      aql_error_message());
	CHECK(priority_of(normal) == 0, "a refused change moved the stream to %d",
	      priority_of(normal));
	CHECK_OK(aql_queue_set_priority(high, AQL_QUEUE_PRIORITY_HIGH));
	for (aql_queue **q = (aql_queue *[]){ normal, high, low, NULL }; *q; q++) {
		aql_signal *done = th_signal(1);
		aql_packet p = { 0 };

		p.barrier.header = th_header(AQL_PACKET_BARRIER_AND);
		p.barrier.completion_signal = aql_signal_handle(done);
		CHECK(th_submit(*q, &p) == AQL_OK && th_wait_done(done) == 0,
		      "barrier on a queue with a priority");
		aql_signal_destroy(done);
	}
	CHECK_OK(aql_queue_destroy(low));
	CHECK_OK(aql_queue_destroy(high));
	CHECK_OK(aql_queue_destroy(normal));
}

int main(int argc, char **argv)
{
	const char *env = getenv("AQL_HIL");
	int hil = env && !strcmp(env, "1");
	aql_code_object *co = NULL;
	aql_agent_info info;
	const char *ptx = NULL;
	int fault = 0;
	void *emu;

	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--fault"))
			fault = 1;
		else
			ptx = argv[i];
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s HOST_OBJECT [PTX] [--fault]\n", argv[0]);
		return 2;
	}
	if (fault && hil) {
		printf("SKIP: AQL_HIL=1: the fault test needs the emulation's fault injection\n");
		return 77;
	}
	gpu = th_cuda_open(argv[1], hil, &emu);
	if (!gpu)
		return 1;
	*(void **)&thread_calls = emu ? dlsym(emu, "aqlemu_thread_calls") : NULL;
	*(void **)&stream_query = emu ? dlsym(emu, "cuStreamQuery") : NULL;
	*(void **)&set_current = emu ? dlsym(emu, "cuCtxSetCurrent") : NULL;
	*(void **)&stream_priority = emu ? dlsym(emu, "cuStreamGetPriority") : NULL;
	if (!stream_priority || !stream_query) {
		fprintf(stderr, "libcuda.so.1 has no cuStreamGetPriority or cuStreamQuery\n");
		return 1;
	}
	if (!th_cuda_emulated())
		printf("note: AQL_HIL=1, the real driver: the emulation's counts of launches, stream waits, host functions and synchronous copies are not checked\n");
	CHECK_OK(aql_agent_get_info(gpu, &info));
	device_path = info.signal_path == AQL_SIGNAL_PATH_DEVICE;
	if (ptx) {
		CHECK_OK(aql_code_object_load_file(gpu, ptx, NULL, &co));
		if (co)
			CHECK_OK(aql_code_object_kernel(co, "saxpy", &saxpy));
	}
	if (fault) {
		if (!saxpy)
			th_stop("the fault test needs the PTX");
		test_fault();
	} else {
		if (saxpy) {
			test_dispatch();
			test_refused_launch();
		}
		test_waits();
		test_priority();
		test_cross_agent();
		test_blocked_waiters();
		test_idle_wake();
		test_pageable_copy();
		test_destroy_in_flight();
		test_owed_stores();
		if (saxpy)
			test_launch_calls();
		test_stress();
		/* Never on the emulation: it would run the write on the host. */
		if (!th_cuda_emulated() && saxpy)
			test_device_fault();
		else if (!th_cuda_emulated())
			printf("note: no PTX of saxpy; the device fault is not tested\n");
	}
	if (co)
		aql_code_object_destroy(co);
	th_cuda_close(gpu, emu);
	return th_finish();
}
