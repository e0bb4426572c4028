/* SPDX-License-Identifier: MIT */
/* Queues: layout, wrap-around, batch reservation, stalls on INVALID slots,
 * backpressure on a full ring, argument checks, and priorities (the nice
 * value of the queue's processor thread). */
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

/* Kernel that checks it runs in submission order. Kernargs are 16-aligned. */
struct __attribute__((aligned(16))) seq_args {
	uint64_t *next;		/* the index the next packet must carry */
	uint64_t index;
	uint64_t *out_of_order;
};

static void seq_kernel(const void *kernarg)
{
	const struct seq_args *a = kernarg;

	if (*a->next != a->index)
		(*a->out_of_order)++;
	*a->next = a->index + 1;
}

static const aql_host_kernel_descriptor seq_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(seq_kernel, struct seq_args, AQL_HOST_KD_NO_BARRIER);

static uint32_t count_invalid(aql_queue *q)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < q->size; i++)
		n += __atomic_load_n(&q->ring[i].header, __ATOMIC_ACQUIRE) == AQL_PACKET_INVALID;
	return n;
}

static void test_layout(void)
{
	aql_queue *q = th_queue(64, AQL_QUEUE_MULTI, AQL_QUEUE_PROFILING);

	CHECK(q->amd->hsa.size == 64 && q->size == 64, "size %u", q->amd->hsa.size);
	CHECK(q->amd->hsa.base_address == (uint64_t)(uintptr_t)q->ring, "ring address");
	CHECK((q->amd->hsa.base_address & 255) == 0, "ring not 256-byte aligned");
	CHECK(q->amd->hsa.doorbell_signal == aql_signal_handle(q->doorbell), "doorbell");
	CHECK(q->amd->read_dispatch_id_field_base_byte_offset == 128, "read index offset");
	CHECK(q->amd->queue_properties & AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING,
	      "profiling bit not set");
	CHECK(q->amd->hsa.features == 3, "features 0x%x", q->amd->hsa.features);
	CHECK(count_invalid(q) == q->size, "%u of %u slots start INVALID", count_invalid(q),
	      q->size);
	aql_queue_destroy(q);
}

/* 10^6 packets through 64 slots: every slot is reused ~15600 times. */
static void test_wraparound(enum aql_queue_type type)
{
	enum { N = 1000000, SIZE = 64 };
	static struct seq_args args[SIZE * 2];
	uint64_t next = 0, out_of_order = 0;
	aql_queue *q = th_queue(SIZE, type, 0);
	aql_signal *done = th_signal(1);

	for (uint64_t i = 0; i < N; i++) {
		/* A kernarg slot is reused only after its packet's slot was:
		 * the queue never holds more than SIZE packets. */
		struct seq_args *a = &args[i % (SIZE * 2)];
		aql_dispatch_packet p;

		*a = (struct seq_args){ &next, i, &out_of_order };
		p = th_dispatch1(&seq_kd, a, i == N - 1 ? done : NULL);
		if (th_submit(q, &p) != AQL_OK)
			break;
	}
	CHECK(th_wait_done(done) == 0, "last packet failed");
	CHECK(next == N && out_of_order == 0, "type %d: ran %llu, %llu out of order", type,
	      (unsigned long long)next, (unsigned long long)out_of_order);
	CHECK(th_wait_read_index(q, N) == N && q->amd->write_dispatch_id == N,
	      "indices read %llu write %llu", (unsigned long long)q->amd->read_dispatch_id,
	      (unsigned long long)q->amd->write_dispatch_id);
	CHECK(count_invalid(q) == SIZE, "%u of %u slots recycled", count_invalid(q), SIZE);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/*
 * Reserve 8 slots, publish them last to first and ring once: the processor
 * must stall on the first INVALID slot and still run them in id order.
 */
static void test_batch_reverse_publish(void)
{
	enum { N = 8 };
	static struct seq_args args[N];
	uint64_t next = 0, out_of_order = 0, first = 0;
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);

	CHECK_OK(aql_queue_reserve(q, N, &first));
	CHECK(first == 0 && q->amd->write_dispatch_id == N, "reserved at %llu",
	      (unsigned long long)first);
	for (int i = N - 1; i >= 0; i--) {
		aql_dispatch_packet p;
		aql_packet *slot = aql_queue_slot(q, first + (uint64_t)i);

		args[i] = (struct seq_args){ &next, (uint64_t)i, &out_of_order };
		p = th_dispatch1(&seq_kd, &args[i], i == N - 1 ? done : NULL);
		aql_packet_store(slot, (const aql_packet *)&p);
		if (i == N - 1) {
			th_sleep_ms(5);
			CHECK(q->amd->read_dispatch_id == 0,
			      "processor ran past INVALID slot 0 (read index %llu)",
			      (unsigned long long)q->amd->read_dispatch_id);
		}
	}
	aql_queue_ring_doorbell(q, first + N - 1);
	CHECK(q->doorbell->value == (int64_t)(first + N - 1), "doorbell holds %lld",
	      (long long)q->doorbell->value);
	CHECK(th_wait_done(done) == 0, "batch failed");
	CHECK(next == N && out_of_order == 0, "ran %llu, %llu out of order",
	      (unsigned long long)next, (unsigned long long)out_of_order);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/* A processor blocked on a barrier lets the ring fill; the next
 * submission must fail within its timeout, having reserved nothing. */
static void test_full_queue(void)
{
	aql_queue_config config = { .size = 4, .full_timeout_ns = 50000000 };
	aql_signal *gate = th_signal(1), *done = th_signal(1);
	aql_barrier_packet wait_gate = {
		.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
		.dep_signal = { aql_signal_handle(gate) },
	};
	uint64_t counter = 0;
	struct th_count_args args __attribute__((aligned(16))) = { &counter };
	aql_dispatch_packet p = th_dispatch1(&th_count_kd, &args, NULL);
	aql_queue *q;
	aql_status st;

	CHECK_OK(aql_queue_create(th_agent(), &config, &q));
	th_submit(q, &wait_gate);
	for (int i = 0; i < 3; i++)
		th_submit(q, &p);
	st = aql_queue_submit(q, (const aql_packet *)&p);
	CHECK(st == AQL_ERR_QUEUE_FULL, "fifth packet: %s", aql_status_str(st));
	CHECK(strstr(aql_error_message(), "full"), "message: %s", aql_error_message());
	CHECK(q->amd->write_dispatch_id == 4, "a failed reservation moved the write index to %llu",
	      (unsigned long long)q->amd->write_dispatch_id);
	aql_signal_store(gate, 0, AQL_RELEASE);
	/* The 50 ms full timeout is for the refusal above, not for a loaded
	 * machine's processor to drain the ring. */
	th_wait_read_index(q, 4);
	p.completion_signal = aql_signal_handle(done);
	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0, "queue did not recover");
	CHECK(counter == 4, "counter %llu", (unsigned long long)counter);
	aql_signal_destroy(gate);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

static void test_bad_arguments(void)
{
	aql_queue_config config = { .size = 48 };
	aql_queue *q = NULL;
	uint64_t id;

	CHECK(aql_queue_create(th_agent(), &config, &q) == AQL_ERR_INVALID_ARG,
	      "size 48 accepted");
	CHECK(strstr(aql_error_message(), "power of two"), "message: %s", aql_error_message());
	config.size = 1u << 30;
	CHECK(aql_queue_create(th_agent(), &config, &q) == AQL_ERR_INVALID_ARG,
	      "size 2^30 accepted");
	config = (aql_queue_config){ .type = 7 };
	CHECK(aql_queue_create(th_agent(), &config, &q) == AQL_ERR_INVALID_ARG, "type 7 accepted");
	config = (aql_queue_config){ .flags = 0x100 };
	CHECK(aql_queue_create(th_agent(), &config, &q) == AQL_ERR_INVALID_ARG,
	      "unknown flag accepted");
	CHECK(aql_queue_create(NULL, NULL, &q) == AQL_ERR_INVALID_ARG, "NULL agent accepted");
	q = th_queue(8, AQL_QUEUE_SINGLE, 0);
	CHECK(aql_queue_reserve(q, 0, &id) == AQL_ERR_INVALID_ARG, "reserve 0 accepted");
	CHECK(aql_queue_reserve(q, 9, &id) == AQL_ERR_INVALID_ARG, "reserve 9 of 8 accepted");
	CHECK(q->amd->write_dispatch_id == 0, "bad reservations moved the write index");
	CHECK(aql_queue_error(q, NULL) == AQL_OK, "fresh queue in error state");
	aql_queue_destroy(q);
	CHECK_OK(aql_queue_destroy(NULL));
}

/* The processor parks on an idle queue; the first ring must wake it. */
static void test_first_packet_after_park(void)
{
	aql_queue *q = th_queue(8, AQL_QUEUE_SINGLE, 0);
	aql_signal *done = th_signal(1);
	uint64_t counter = 0;
	struct th_count_args args __attribute__((aligned(16))) = { &counter };
	aql_dispatch_packet p = th_dispatch1(&th_count_kd, &args, done);

	th_sleep_ms(100);
	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0 && counter == 1, "first packet after a park did not run");
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/*
 * Ring for id 1 while slot 0 is still INVALID, let the processor go idle,
 * then publish slot 0 without ringing again: HSA lets a doorbell run ahead,
 * so the processor must keep checking an announced slot.
 */
static void test_doorbell_ahead(void)
{
	aql_queue *q = th_queue(8, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	uint64_t counter = 0;
	struct th_count_args args __attribute__((aligned(16))) = { &counter };
	aql_dispatch_packet p0 = th_dispatch1(&th_count_kd, &args, NULL);
	aql_dispatch_packet p1 = th_dispatch1(&th_count_kd, &args, done);
	uint64_t first = 0;

	CHECK_OK(aql_queue_reserve(q, 2, &first));
	aql_packet_store(aql_queue_slot(q, first + 1), (const aql_packet *)&p1);
	aql_queue_ring_doorbell(q, first + 1);
	th_sleep_ms(100);
	aql_packet_store(aql_queue_slot(q, first), (const aql_packet *)&p0);
	CHECK(th_wait_done(done) == 0 && counter == 2, "announced packets did not run");
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/* The id of the processor thread of q, found by its name. */
static pid_t processor_tid(aql_queue *q)
{
	char want[32], path[300], comm[32] = "";
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	pid_t tid = 0;

	snprintf(want, sizeof(want), "aql-cpu-q%llu\n", (unsigned long long)q->amd->hsa.id);
	while (d && !tid && (e = readdir(d))) {
		FILE *f;

		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && !strcmp(comm, want))
			tid = (pid_t)atoi(e->d_name);
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	CHECK(tid > 0, "no thread named %s", want);
	return tid;
}

static int nice_of(aql_queue *q)
{
	return getpriority(PRIO_PROCESS, (id_t)processor_tid(q));
}

static int clamp_nice(int n)
{
	return n < -20 ? -20 : n > 19 ? 19 : n;
}

/*
 * Whether a thread of the caller's credentials, at nice 19, may lower its
 * nice value to target: what setpriority() allows the agent (sys.c
 * set_one_prio: CAP_SYS_NICE, or RLIMIT_NICE up to 20 - target).
 */
static void *probe_nice(void *arg)
{
	int *target = arg;

	*target = setpriority(PRIO_PROCESS, 0, 19) == 0 &&
		  setpriority(PRIO_PROCESS, 0, *target) == 0;
	return NULL;
}

static int may_set_nice(int target)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, probe_nice, &target) == 0, "probe thread");
	pthread_join(t, NULL);
	return target;
}

/* A packet runs on the queue at whatever priority. */
static void check_runs(aql_queue *q)
{
	aql_signal *done = th_signal(1);
	uint64_t counter = 0;
	struct th_count_args args __attribute__((aligned(16))) = { &counter };
	aql_dispatch_packet p = th_dispatch1(&th_count_kd, &args, done);

	CHECK_OK(th_submit(q, &p));
	CHECK(th_wait_done(done) == 0 && counter == 1, "packet on a reniced queue did not run");
	aql_signal_destroy(done);
}

/* A raise that the process may not make: refused by name, nothing changed. */
static void check_raise_refused(aql_queue *q, enum aql_queue_priority to, int want_nice)
{
	CHECK(aql_queue_set_priority(q, to) == AQL_ERR_SYSTEM, "raise to %d not refused", to);
	CHECK(strstr(aql_error_message(), "CAP_SYS_NICE") != NULL, "refusal says: %s",
	      aql_error_message());
	CHECK(nice_of(q) == want_nice, "refused raise left nice %d, want %d", nice_of(q),
	      want_nice);
}

/*
 * Priorities as nice values, base the creating thread's: LOW is base + 10,
 * HIGH base - 10. Raising (to HIGH, or from LOW back to NORMAL) is allowed
 * exactly where setpriority() lets this process lower a thread's nice
 * value that far; each outcome is checked against a probe of that rule.
 */
static void test_priority(void)
{
	int base = getpriority(PRIO_PROCESS, 0);
	int low = clamp_nice(base + 10), high = clamp_nice(base - 10);
	int may_normal = may_set_nice(base), may_high = may_set_nice(high);
	aql_queue_config c = { .size = 8, .flags = AQL_QUEUE_HIGH_PRIORITY };
	aql_queue *q = th_queue(8, AQL_QUEUE_SINGLE, AQL_QUEUE_LOW_PRIORITY), *hq = NULL;
	aql_status st;

	printf("priority: nice %d; back to it %s, to %d %s\n", base,
	       may_normal ? "allowed" : "refused", high, may_high ? "allowed" : "refused");
	CHECK(nice_of(q) == low, "LOW queue at nice %d", nice_of(q));
	check_runs(q);
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_LOW));
	if (may_normal) {
		CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_NORMAL));
		CHECK(nice_of(q) == base, "NORMAL again at nice %d", nice_of(q));
	} else {
		check_raise_refused(q, AQL_QUEUE_PRIORITY_NORMAL, low);
	}
	if (may_high) {
		CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_HIGH));
		CHECK(nice_of(q) == high, "HIGH at nice %d", nice_of(q));
	} else {
		check_raise_refused(q, AQL_QUEUE_PRIORITY_HIGH, nice_of(q));
	}
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_LOW));
	CHECK(nice_of(q) == low, "LOW at nice %d", nice_of(q));
	check_runs(q);
	st = aql_queue_create(th_agent(), &c, &hq);
	if (may_high) {
		CHECK(st == AQL_OK && nice_of(hq) == high, "HIGH queue: %s", aql_error_message());
		check_runs(hq);
	} else {
		CHECK(st == AQL_ERR_SYSTEM && !hq && strstr(aql_error_message(), "CAP_SYS_NICE"),
		      "HIGH queue without the right: %s", aql_error_message());
	}
	aql_queue_destroy(hq);
	aql_queue_destroy(q);
	CHECK(getpriority(PRIO_PROCESS, 0) == base, "the creating thread's nice changed");
}

/*
 * The refusals even where this process may raise priorities (root, as CI
 * runs): this thread drops CAP_SYS_NICE and the process's RLIMIT_NICE is
 * set to 0. Last: it cannot be undone.
 */
static void test_priority_unprivileged(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	struct rlimit lim;
	aql_queue_config c = { .size = 8, .flags = AQL_QUEUE_HIGH_PRIORITY };
	aql_queue *q, *high = NULL;
	int base = getpriority(PRIO_PROCESS, 0);

	if (!may_set_nice(base))
		return;
	CHECK(syscall(SYS_capget, &h, d) == 0, "capget: %s", strerror(errno));
	d[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
	CHECK(syscall(SYS_capset, &h, d) == 0, "capset: %s", strerror(errno));
	CHECK(getrlimit(RLIMIT_NICE, &lim) == 0, "getrlimit");
	lim.rlim_cur = 0;
	CHECK(setrlimit(RLIMIT_NICE, &lim) == 0, "setrlimit: %s", strerror(errno));
	if (may_set_nice(base)) {
		printf("note: raising priorities is allowed without CAP_SYS_NICE\n");
		return;
	}
	q = th_queue(8, AQL_QUEUE_SINGLE, 0);
	check_raise_refused(q, AQL_QUEUE_PRIORITY_HIGH, base);
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_LOW));
	check_raise_refused(q, AQL_QUEUE_PRIORITY_NORMAL, clamp_nice(base + 10));
	check_runs(q);
	aql_queue_destroy(q);
	CHECK(aql_queue_create(th_agent(), &c, &high) == AQL_ERR_SYSTEM && !high,
	      "HIGH queue created without the right");
}

static void test_priority_arguments(void)
{
	aql_queue_config c = { .size = 8, .flags = AQL_QUEUE_LOW_PRIORITY | AQL_QUEUE_HIGH_PRIORITY };
	aql_queue *q = NULL;

	CHECK(aql_queue_create(th_agent(), &c, &q) == AQL_ERR_INVALID_ARG && !q,
	      "both priority flags accepted");
	CHECK(strstr(aql_error_message(), "both low and high"), "says: %s", aql_error_message());
	CHECK(aql_queue_set_priority(NULL, AQL_QUEUE_PRIORITY_LOW) == AQL_ERR_INVALID_ARG,
	      "NULL queue accepted");
	q = th_queue(8, AQL_QUEUE_SINGLE, 0);
	CHECK(aql_queue_set_priority(q, (enum aql_queue_priority)3) == AQL_ERR_INVALID_ARG,
	      "priority 3 accepted");
	CHECK(aql_queue_set_priority(q, (enum aql_queue_priority)-1) == AQL_ERR_INVALID_ARG,
	      "priority -1 accepted");
	CHECK_OK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_NORMAL));
	aql_queue_destroy(q);
}

/* A barrier-AND packet waiting for dep, completing done. */
static aql_packet gated(aql_signal *dep, aql_signal *done)
{
	aql_packet p;

	memset(&p, 0, sizeof(p));
	p.barrier.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
						 AQL_FENCE_SYSTEM);
	p.barrier.dep_signal[0] = aql_signal_handle(dep);
	p.barrier.completion_signal = aql_signal_handle(done);
	return p;
}

/*
 * aql_queue_inactivate: the waiting packet is dropped (-1), the queue is
 * in its error state without a callback, nothing more runs, the memory
 * stays until destroy; a second call does nothing.
 */
static void test_inactivate(void)
{
	aql_queue *q = th_queue(8, AQL_QUEUE_MULTI, 0);
	aql_signal *gate = th_signal(1), *held = th_signal(1);
	unsigned calls = __atomic_load_n(&th_error_calls, __ATOMIC_ACQUIRE);
	aql_packet p = gated(gate, held);
	const char *message = NULL;

	CHECK_OK(th_submit(q, &p));
	CHECK_OK(aql_queue_inactivate(q));
	CHECK(th_wait_done(held) == -1, "the waiting packet was not dropped");
	CHECK(aql_queue_error(q, &message) == AQL_ERR_QUEUE_ERROR && strstr(message, "inactivated"),
	      "error state: \"%s\"", message ? message : "");
	CHECK(__atomic_load_n(&th_error_calls, __ATOMIC_ACQUIRE) == calls,
	      "the error callback ran on inactivation");
	CHECK(aql_queue_submit(q, &p) == AQL_ERR_QUEUE_ERROR, "a submission was accepted");
	CHECK_OK(aql_queue_inactivate(q));
	CHECK(aql_queue_inactivate(NULL) == AQL_ERR_INVALID_ARG, "NULL queue");
	CHECK(aql_queue_set_priority(q, AQL_QUEUE_PRIORITY_LOW) == AQL_ERR_QUEUE_ERROR &&
	      th_error_has("inactive"), "a priority for an inactive queue: %s",
	      aql_error_message());
	CHECK(q->amd->hsa.size == 8, "the queue's memory is still there");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
	aql_signal_destroy(held);
}

struct hook_log {
	char order[8];
	unsigned n;
	int64_t held;	/* the gated packet's signal when a hook ran */
	aql_signal *signal;
};

static void hook_a(aql_queue *q, void *user)
{
	struct hook_log *log = user;

	/* Before the destroy stops the queue: its packet still waits. */
	log->held = aql_signal_load(log->signal, AQL_ACQUIRE);
	CHECK_OK(aql_queue_set_error(q, AQL_ERR_QUEUE_ERROR, "hook_a ended the work beside it"));
	CHECK(aql_signal_load(log->signal, AQL_ACQUIRE) == -1,
	      "the hook's aql_queue_set_error() dropped the waiting packet");
	log->order[log->n++] = 'a';
}

static void hook_b(aql_queue *q, void *user)
{
	struct hook_log *log = user;

	/* Removing itself from its own run is a no-op. */
	CHECK_OK(aql_queue_remove_destroy_hook(q, hook_b, user));
	log->order[log->n++] = 'b';
}

/*
 * Destroy hooks: run first in aql_queue_destroy(), the latest first, each
 * once, while the queue still works; a removed one does not run.
 */
static void test_destroy_hooks(void)
{
	aql_queue *q = th_queue(8, AQL_QUEUE_MULTI, 0);
	aql_signal *gate = th_signal(1), *held = th_signal(1);
	struct hook_log log = { .signal = held }, other = { .signal = held };
	aql_packet p = gated(gate, held);

	CHECK(aql_queue_add_destroy_hook(NULL, hook_a, &log) == AQL_ERR_INVALID_ARG &&
	      aql_queue_add_destroy_hook(q, NULL, &log) == AQL_ERR_INVALID_ARG &&
	      aql_queue_remove_destroy_hook(q, NULL, &log) == AQL_ERR_INVALID_ARG,
	      "NULL queue or function refused");
	CHECK_OK(th_submit(q, &p));
	CHECK_OK(aql_queue_add_destroy_hook(q, hook_a, &log));
	CHECK_OK(aql_queue_add_destroy_hook(q, hook_a, &other));
	CHECK_OK(aql_queue_add_destroy_hook(q, hook_b, &log));
	CHECK_OK(aql_queue_remove_destroy_hook(q, hook_a, &other));
	CHECK_OK(aql_queue_remove_destroy_hook(q, hook_b, &other));
	CHECK_OK(aql_queue_destroy(q));
	log.order[log.n] = 0;
	CHECK(!strcmp(log.order, "ba") && other.n == 0, "hooks ran as \"%s\" (want \"ba\"), the "
	      "removed one %u times", log.order, other.n);
	CHECK(log.held == 1, "the hook ran while the queue still held its packet (%lld)",
	      (long long)log.held);
	aql_signal_destroy(gate);
	aql_signal_destroy(held);
}

/*
 * aql_queue_set_error(), for work run beside the queue (libaql-mpi): the
 * callback gets the message, the queue keeps it, the waiting packet is
 * dropped and submissions fail; the first error stays.
 */
static void test_set_error(void)
{
	aql_queue *q = th_queue(8, AQL_QUEUE_MULTI, 0);
	aql_signal *gate = th_signal(1), *held = th_signal(1);
	unsigned calls = __atomic_load_n(&th_error_calls, __ATOMIC_ACQUIRE);
	aql_packet p = gated(gate, held);
	const char *message = NULL;

	CHECK_OK(th_submit(q, &p));
	CHECK(aql_queue_set_error(q, AQL_OK, "no") == AQL_ERR_INVALID_ARG &&
	      aql_queue_set_error(NULL, AQL_ERR_QUEUE_ERROR, "no") == AQL_ERR_INVALID_ARG,
	      "a NULL queue or AQL_OK refused");
	CHECK_OK(aql_queue_set_error(q, AQL_ERR_SYSTEM, "MPI_Irecv failed on rank 1 (peer 0, tag 5)"));
	CHECK(th_wait_done(held) == -1, "the waiting packet was not dropped");
	CHECK(aql_queue_error(q, &message) == AQL_ERR_SYSTEM && strstr(message, "tag 5"),
	      "error state: \"%s\"", message ? message : "");
	CHECK(__atomic_load_n(&th_error_calls, __ATOMIC_ACQUIRE) == calls + 1 &&
	      strstr(th_last_error, "peer 0"), "the error callback: \"%s\"", th_last_error);
	CHECK_OK(aql_queue_set_error(q, AQL_ERR_QUEUE_ERROR, "second"));
	CHECK(aql_queue_error(q, &message) == AQL_ERR_SYSTEM && !strstr(message, "second"),
	      "the first error stays: \"%s\"", message ? message : "");
	CHECK(aql_queue_submit(q, &p) == AQL_ERR_QUEUE_ERROR, "a submission was accepted");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(gate);
	aql_signal_destroy(held);
}

static struct {
	aql_status inactivate, destroy;
	char message[256];
	aql_signal *returned;
} from_cb;

static void inactivate_in_callback(aql_queue *queue, aql_status status, const char *message,
				   void *user)
{
	(void)status;
	(void)message;
	(void)user;
	from_cb.inactivate = aql_queue_inactivate(queue);
	from_cb.destroy = aql_queue_destroy(queue);
	snprintf(from_cb.message, sizeof(from_cb.message), "%s", aql_error_message());
	aql_signal_store(from_cb.returned, 0, AQL_RELEASE);
}

/*
 * The error callback runs on the processor's thread (a dispatch with no
 * kernel): inactivating the queue there works, destroying it there fails
 * with a message, and destroy afterwards frees everything.
 */
static void test_inactivate_from_callback(void)
{
	static _Alignas(16) uint64_t args[2];
	aql_queue_config c = { .size = 8, .type = AQL_QUEUE_MULTI,
			       .error_callback = inactivate_in_callback };
	aql_signal *done = th_signal(1);
	aql_packet bad = { .dispatch = th_dispatch1(&th_empty_kd, args, done) };
	aql_queue *q = NULL;

	bad.dispatch.kernel_object = 0;
	from_cb.returned = th_signal(1);
	CHECK_OK(aql_queue_create(th_agent(), &c, &q));
	if (!q)
		return;
	CHECK_OK(th_submit(q, &bad));
	CHECK(th_wait_done(done) == -1, "the bad packet's signal");
	CHECK(th_wait_done(from_cb.returned) == 0, "the callback returned");
	CHECK(from_cb.inactivate == AQL_OK, "inactivate in the callback: %s",
	      aql_status_str(from_cb.inactivate));
	CHECK(from_cb.destroy == AQL_ERR_INVALID_ARG && strstr(from_cb.message, "error callback"),
	      "destroy in the callback: %s, \"%s\"", aql_status_str(from_cb.destroy),
	      from_cb.message);
	CHECK(aql_queue_submit(q, &bad) == AQL_ERR_QUEUE_ERROR, "a submission was accepted");
	CHECK_OK(aql_queue_destroy(q));
	aql_signal_destroy(done);
	aql_signal_destroy(from_cb.returned);
}

int main(void)
{
	test_inactivate();
	test_set_error();
	test_destroy_hooks();
	test_inactivate_from_callback();
	test_first_packet_after_park();
	test_doorbell_ahead();
	test_layout();
	test_wraparound(AQL_QUEUE_MULTI);
	test_wraparound(AQL_QUEUE_SINGLE);
	test_batch_reverse_publish();
	test_full_queue();
	test_bad_arguments();
	test_priority_arguments();
	test_priority();
	test_priority_unprivileged();
	return th_finish();
}
