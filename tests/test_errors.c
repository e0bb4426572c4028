/* SPDX-License-Identifier: MIT */
/*
 * Malformed packets: each class stops the queue with a defined outcome
 * (error state, completion signal -1, the signals of the packets queued
 * behind it -1, one callback naming the problem, and later submissions
 * refused), never a crash or a hang. Destroying queues
 * with packets in flight is safe too, and CPU agents keep to their limits
 * and defaults.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "helpers.h"

static void misuse_barrier(const void *kernarg)
{
	(void)kernarg;
	aql_host_barrier();
}

struct __attribute__((aligned(16))) no_args {
	uint64_t unused;
};

static const aql_host_kernel_descriptor misuse_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(misuse_barrier, struct no_args, AQL_HOST_KD_NO_BARRIER);
static const aql_host_kernel_descriptor not_a_kd = { .magic = 0x12345678 };
static struct no_args kernarg;

static aql_dispatch_packet good(aql_signal *done)
{
	const uint32_t grid[3] = { 4, 1, 1 };
	const uint16_t wg[3] = { 2, 1, 1 };

	return th_dispatch(&th_empty_kd, &kernarg, 1, grid, wg, done, 0);
}

/*
 * Submit one bad packet, and behind it (held by a gate until both are in
 * the queue) a good one; check the outcome and that the message has want.
 * The good one never runs: its signal gets -1 too, so its waiter ends.
 */
static void expect_failure(const char *name, aql_packet *bad, const char *want)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1), *behind_done = th_signal(1);
	aql_signal *gate = th_gate_close(q);
	unsigned calls = __atomic_load_n(&th_error_calls, __ATOMIC_ACQUIRE);
	aql_dispatch_packet after = good(NULL), behind = good(behind_done);
	const char *message = NULL;
	aql_status st;

	bad->dispatch.completion_signal = aql_signal_handle(done);
	th_submit(q, bad);
	th_submit(q, &behind);
	th_gate_open(gate);
	CHECK(th_wait_done(done) == -1, "%s: completion signal is %lld, not -1", name,
	      (long long)done->value);
	CHECK(th_wait_done(behind_done) == -1,
	      "%s: the packet behind the failed one has signal %lld, not -1", name,
	      (long long)behind_done->value);
	st = aql_queue_error(q, &message);
	CHECK(st == AQL_ERR_QUEUE_ERROR && strstr(message, want),
	      "%s: state %s, message \"%s\" lacks \"%s\"", name, aql_status_str(st), message, want);
	CHECK(__atomic_load_n(&th_error_calls, __ATOMIC_ACQUIRE) == calls + 1 &&
		      strstr(th_last_error, want),
	      "%s: callback got \"%s\"", name, th_last_error);
	st = aql_queue_submit(q, (const aql_packet *)&after);
	CHECK(st == AQL_ERR_QUEUE_ERROR && strstr(aql_error_message(), want),
	      "%s: submit after the error: %s (%s)", name, aql_status_str(st),
	      aql_error_message());
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(done);
	aql_signal_destroy(behind_done);
	aql_signal_destroy(gate);
}

static void test_malformed(void)
{
	aql_packet p;

	p.dispatch = good(NULL);
	p.dispatch.grid_size_x = 0;
	expect_failure("zero grid", &p, "zero grid size");

	p.dispatch = good(NULL);
	p.dispatch.setup = 2;
	p.dispatch.grid_size_y = 4;
	p.dispatch.workgroup_size_x = 64;
	p.dispatch.workgroup_size_y = 32;
	expect_failure("work-group too large", &p, "exceeds the agent maximum of 1024");

	p.dispatch = good(NULL);
	p.dispatch.setup = 0;
	expect_failure("zero dimensions", &p, "grid dimensions must be 1, 2 or 3");

	p.dispatch = good(NULL);
	p.dispatch.setup = 4;
	expect_failure("four dimensions", &p, "setup 0x4");

	p.dispatch = good(NULL);
	p.dispatch.grid_size_z = 0;
	expect_failure("unused dimension not 1", &p, "dimension 2 is unused");

	p.dispatch = good(NULL);
	p.dispatch.header = 6;
	expect_failure("unknown type", &p, "packet type 6 is unknown");

	p.barrier_value = (aql_barrier_value_packet){ .header = { 0, 9, 0 } };
	expect_failure("unknown vendor format", &p, "vendor packet format 9");

	p.dispatch = good(NULL);
	p.dispatch.kernel_object = 0;
	expect_failure("null kernel object", &p, "kernel_object is null");

	p.dispatch = good(NULL);
	p.dispatch.kernel_object = (uint64_t)(uintptr_t)&not_a_kd;
	expect_failure("not a kernel descriptor", &p, "is not a host kernel descriptor");

	p.dispatch = good(NULL);
	p.dispatch.kernarg_address += 8;
	expect_failure("misaligned kernarg", &p, "is not 16-byte aligned");

	p.dispatch = good(NULL);
	p.dispatch.group_segment_size = 1u << 20;
	expect_failure("group segment too large", &p, "group_segment_size 1048576");

	p.dispatch = good(NULL);
	p.dispatch.kernel_object = (uint64_t)(uintptr_t)&misuse_kd;
	expect_failure("barrier in a no-barrier kernel", &p, "AQL_HOST_KD_NO_BARRIER");

	p.agent = (aql_agent_dispatch_packet){
		.header = aql_packet_header(AQL_PACKET_AGENT_DISPATCH, 0, 0, 0), .type = 777 };
	expect_failure("unregistered agent function", &p, "agent dispatch type 777");

	p.barrier_value = (aql_barrier_value_packet){
		.header = { aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 0, 0, 0),
			    AQL_AMD_PACKET_BARRIER_VALUE, 0 },
		.signal = aql_signal_handle(th_signal(0)), .cond = 7 };
	expect_failure("unknown barrier-value condition", &p, "condition 7 is unknown");
	aql_signal_destroy(aql_signal_from_handle(p.barrier_value.signal));
}

/* Destroy while a kernel runs and 100 more packets wait behind it. */
struct __attribute__((aligned(16))) sleep_args {
	unsigned ms;
	int *started;
	int *finished;
};

static void sleep_kernel(const void *kernarg)
{
	const struct sleep_args *a = kernarg;

	__atomic_store_n(a->started, 1, __ATOMIC_RELEASE);
	th_sleep_ms(a->ms);
	*a->finished = 1;
}

static const aql_host_kernel_descriptor sleep_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(sleep_kernel, struct sleep_args, AQL_HOST_KD_NO_BARRIER);

static void test_destroy_in_flight(void)
{
	enum { WAITING = 100 };
	aql_queue *q = th_queue(128, AQL_QUEUE_MULTI, 0);
	aql_signal *running = th_signal(1), *waiting[WAITING];
	int started = 0, finished = 0, cancelled = 0;
	struct sleep_args args = { 50, &started, &finished };
	aql_dispatch_packet p = th_dispatch1(&sleep_kd, &args, running);

	th_submit(q, &p);
	for (int i = 0; i < WAITING; i++) {
		waiting[i] = th_signal(1);
		p.completion_signal = aql_signal_handle(waiting[i]);
		th_submit(q, &p);
	}
	/* A loaded machine may not have started the kernel yet; destroy must
	 * find it running, not cancel it. */
	for (uint64_t end = th_now_ns() + TH_TIMEOUT_NS;
	     !__atomic_load_n(&started, __ATOMIC_ACQUIRE); th_sleep_ms(1))
		if (th_now_ns() > end)
			th_stop("the kernel never started");
	CHECK_OK(aql_queue_destroy(q));
	CHECK(finished == 1 && running->value == 0,
	      "running kernel: finished %d, signal %lld", finished, (long long)running->value);
	for (int i = 0; i < WAITING; i++) {
		cancelled += waiting[i]->value == -1;
		aql_signal_destroy(waiting[i]);
	}
	CHECK(cancelled == WAITING, "%d of %d waiting packets cancelled", cancelled, WAITING);
	aql_signal_destroy(running);
}

static void test_agents(void)
{
	aql_host_agent_config config = { .workers = 3 };
	aql_agent *agent = NULL;
	aql_agent_info info;
	aql_queue *q;

	CHECK_OK(aql_host_agent_create(&config, &agent));
	CHECK_OK(aql_agent_get_info(agent, &info));
	CHECK(info.compute_units == 3 && info.kind == AQL_AGENT_CPU &&
		      !strcmp(info.name, "aql-cpu"), "info %s %u", info.name, info.compute_units);
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	CHECK(aql_agent_destroy(agent) == AQL_ERR_INVALID_ARG &&
		      strstr(aql_error_message(), "1 queue"), "agent with a queue destroyed: %s",
	      aql_error_message());
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_agent_destroy(agent));
	CHECK(aql_agent_destroy(th_agent()) == AQL_ERR_INVALID_ARG, "default agent destroyed");
	config.workers = 5000;
	CHECK(aql_host_agent_create(&config, &agent) == AQL_ERR_INVALID_ARG,
	      "5000 workers accepted");
}

/* workers 0: one per CPU the creating thread may run on. */
static uint32_t default_workers_on(const cpu_set_t *set)
{
	aql_host_agent_config config = { 0 };
	aql_agent *agent = NULL;
	aql_agent_info info = { 0 };

	CHECK(sched_setaffinity(0, sizeof(*set), set) == 0, "sched_setaffinity: %s",
	      strerror(errno));
	CHECK_OK(aql_host_agent_create(&config, &agent));
	if (agent) {
		CHECK_OK(aql_agent_get_info(agent, &info));
		CHECK_OK(aql_agent_destroy(agent));
	}
	return info.compute_units;
}

static void test_default_workers(void)
{
	cpu_set_t all, one;
	uint32_t n;
	int first = 0;

	if (sched_getaffinity(0, sizeof(all), &all) != 0) {
		CHECK(0, "sched_getaffinity: %s", strerror(errno));
		return;
	}
	while (!CPU_ISSET(first, &all))
		first++;
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	n = default_workers_on(&one);
	CHECK(n == 1, "bound to CPU %d: %u workers, expected 1", first, n);
	n = default_workers_on(&all);
	CHECK(n == (uint32_t)CPU_COUNT(&all), "on %d CPUs: %u workers", CPU_COUNT(&all), n);
}

static void test_status_names(void)
{
	for (int st = AQL_OK; st <= AQL_ERR_SYSTEM; st++)
		CHECK(strncmp(aql_status_str((aql_status)st), "AQL_", 4) == 0,
		      "status %d is named \"%s\"", st, aql_status_str((aql_status)st));
	CHECK(!strcmp(aql_status_str((aql_status)99), "unknown status"), "status 99 named");
}

int main(void)
{
	test_status_names();
	test_malformed();
	test_destroy_in_flight();
	test_agents();
	test_default_workers();
	return th_finish();
}
