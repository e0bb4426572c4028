/* SPDX-License-Identifier: MIT */
/*
 * Signals and events of the AMD agent (aql/kfd/events.c, the signal events
 * of aql/signal.c) on the KFD emulation (AQL_KFD_SYS, one gfx90a): run
 * with AQL_KFD_EMU_VERSION 1.18 (WAIT_EVENTS with the event age) and 1.11
 * (without). The test stands in for the command processor where one is
 * needed: it stores the value, then the event id into the mailbox, then
 * raises the interrupt (kfdemu_event_interrupt). Not run on hardware.
 *
 * - a signal made before the agent and one made after get a KFD SIGNAL
 *   event and a mailbox in the GTT event page; the signal pages are
 *   USERPTR BOs of the GPU;
 * - host stores and device stores wake blocked waiters, also in a wait
 *   that mixes a pool signal with one the pool did not make, and a CPU
 *   queue's barrier on a signal a GPU completes;
 * - timeouts are kept; AQL_WAIT_ACTIVE never sleeps in KFD and
 *   AQL_WAIT_BLOCKED does;
 * - many waiters and producers, host and device stores mixed: no waiter
 *   is left asleep (a stress test for TSan);
 * - a GPU memory fault reaches the fault listeners with a message naming
 *   the address and the kind, a GPU reset one naming it;
 * - with two GPUs (gfx90a,gfx942): the second gets the event page and
 *   every signal block.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "kfd_emu/kfdemu.h"

#define MS 1000000ull

static kfdemu_stats_fn stats_fn;
static kfdemu_bo_at_fn bo_at_fn;
static kfdemu_event_interrupt_fn interrupt_fn;
static kfdemu_vm_fault_fn vm_fault_fn;
static kfdemu_gpu_reset_fn gpu_reset_fn;
static uint32_t gpu_id;

static void load_emu(void)
{
	*(void **)&stats_fn = th_kfdemu_sym("kfdemu_stats");
	*(void **)&bo_at_fn = th_kfdemu_sym("kfdemu_bo_at");
	*(void **)&interrupt_fn = th_kfdemu_sym("kfdemu_event_interrupt");
	*(void **)&vm_fault_fn = th_kfdemu_sym("kfdemu_vm_fault");
	*(void **)&gpu_reset_fn = th_kfdemu_sym("kfdemu_gpu_reset");
}

static struct kfdemu_stats stats(void)
{
	struct kfdemu_stats s;

	CHECK(stats_fn(&s) == 0, "kfdemu_stats");
	return s;
}

/*
 * What the command processor does when it completes a packet. 0, or
 * -ENOENT where another interrupt acknowledged the slot first (the two
 * coalesce: that one's set came after this value).
 */
static int device_store(aql_signal *s, int64_t value)
{
	uint64_t *mailbox = (uint64_t *)(uintptr_t)s->event_mailbox_ptr;

	__atomic_store_n(&s->value, value, __ATOMIC_RELEASE);
	__atomic_store_n(mailbox, s->event_id, __ATOMIC_RELEASE);
	return interrupt_fn(gpu_id, s->event_id);
}

/* Until at least n WAIT_EVENTS calls sleep in the emulation (bounded):
 * the waiter on a signal plus the fault watcher. */
static void sleepers_at_least(uint32_t n)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (stats().event_sleepers < n && th_now_ns() < end)
		th_sleep_ms(1);
	CHECK(stats().event_sleepers >= n, "%u sleepers, want %u", stats().event_sleepers, n);
}

static void check_signal_event(aql_signal *s, const char *what)
{
	struct kfdemu_bo b;

	CHECK(s->event_id > 0 && s->event_id < KFD_SIGNAL_EVENT_LIMIT, "%s: event %u", what,
	      s->event_id);
	CHECK(bo_at_fn(s->event_mailbox_ptr, &b) == 0 && b.domain == KFDEMU_GTT &&
	      b.size == 8 * KFD_SIGNAL_EVENT_LIMIT &&
	      s->event_mailbox_ptr == b.va + 8ull * s->event_id && b.mapped,
	      "%s: mailbox 0x%llx is the slot of event %u in the mapped GTT event page", what,
	      (unsigned long long)s->event_mailbox_ptr, s->event_id);
	CHECK(bo_at_fn((uintptr_t)s, &b) == 0 && b.domain == KFDEMU_USERPTR && b.mapped,
	      "%s: the signal's page is a mapped USERPTR BO", what);
}

static void check_setup(aql_signal *early)
{
	aql_signal *s[65];
	struct kfdemu_stats st = stats();
	int events = 0;

	CHECK(st.event_slots == KFD_SIGNAL_EVENT_LIMIT, "%u event slots", st.event_slots);
	check_signal_event(early, "a signal made before the agent");
	for (int i = 0; i < 65; i++)
		s[i] = th_signal(1);
	check_signal_event(s[64], "a signal made after the agent");
	for (int i = 1; i < 65; i++)
		events += s[i]->event_id != s[i - 1]->event_id;
	CHECK(events >= 1 && events <= 2, "65 signals share %d + 1 events", events);
	/* control, MEMORY, HW_EXCEPTION and one per block */
	CHECK(stats().events >= 3 + 2, "%u events", stats().events);
	for (int i = 0; i < 65; i++)
		aql_signal_destroy(s[i]);
}

struct waiter {
	aql_signal *signal;
	enum aql_signal_condition cond;
	int64_t compare;
	uint64_t timeout_ns;
	enum aql_wait_hint hint;
	aql_status st;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->st = aql_signal_wait(w->signal, w->cond, w->compare, w->timeout_ns, w->hint, NULL);
	return NULL;
}

/* A blocked waiter woken by a host store, then by a device store. */
static void check_wakes(void)
{
	aql_signal *s = th_signal(1);
	struct waiter w = { s, AQL_COND_EQ, 0, 60000 * MS, AQL_WAIT_BLOCKED, AQL_ERR_TIMEOUT };
	uint32_t base = stats().event_sleepers;
	pthread_t t;

	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers_at_least(base + 1);
	aql_signal_store(s, 0, AQL_RELEASE);
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK, "host store: %s", aql_status_str(w.st));

	w.compare = 5;
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers_at_least(base + 1);
	CHECK(device_store(s, 5) == 0, "interrupt for event %u", s->event_id);
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK, "device store: %s", aql_status_str(w.st));
	CHECK(*(uint64_t *)(uintptr_t)s->event_mailbox_ptr == UINT64_MAX,
	      "the mailbox is acknowledged");
	aql_signal_destroy(s);
}

struct any_waiter {
	aql_signal *signals[2];
	uint32_t index;
	aql_status st;
};

static void *wait_any_thread(void *arg)
{
	static const enum aql_signal_condition conds[2] = { AQL_COND_EQ, AQL_COND_EQ };
	static const int64_t zero[2] = { 0, 0 };
	struct any_waiter *w = arg;

	w->st = aql_signal_wait_any(2, w->signals, conds, zero, 60000 * MS, AQL_WAIT_BLOCKED,
				    &w->index, NULL);
	return NULL;
}

/*
 * A wait on a pool signal and on one the pool did not make (as a queue's
 * own stop signal; event_id 0) sleeps in WAIT_EVENTS on both, without
 * polling, and either store wakes it.
 */
static void check_mixed(void)
{
	static aql_signal own = { .kind = AQL_SIGNAL_KIND_USER, .value = 1 };
	struct any_waiter w = { { th_signal(1), &own }, 9, AQL_ERR_TIMEOUT };
	uint32_t base = stats().event_sleepers;
	uint64_t waits;
	pthread_t t;

	CHECK(pthread_create(&t, NULL, wait_any_thread, &w) == 0, "pthread_create");
	sleepers_at_least(base + 1);
	waits = stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)];
	th_sleep_ms(100);
	CHECK(stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)] - waits <= 5,
	      "a mixed wait polled: %llu WAIT_EVENTS in 100 ms",
	      (unsigned long long)(stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)] - waits));
	CHECK(device_store(w.signals[0], 0) == 0, "interrupt");
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK && w.index == 0, "device store: %s, index %u", aql_status_str(w.st),
	      w.index);

	aql_signal_store(w.signals[0], 1, AQL_RELAXED);
	CHECK(pthread_create(&t, NULL, wait_any_thread, &w) == 0, "pthread_create");
	sleepers_at_least(base + 1);
	aql_signal_store(&own, 0, AQL_RELEASE);
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK && w.index == 1, "host store: %s, index %u", aql_status_str(w.st),
	      w.index);
	aql_signal_destroy(w.signals[0]);
}

/*
 * A CPU queue's barrier on a signal a GPU completes: its processor sleeps
 * on that signal and its own stop signal, and the device store wakes it;
 * then the idle processor sleeps until the queue goes.
 */
static void check_cpu_queue(void)
{
	aql_signal *gate = th_signal(1), *done = th_signal(1);
	aql_barrier_packet b = {
		.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
		.dep_signal = { aql_signal_handle(gate) },
		.completion_signal = aql_signal_handle(done),
	};
	aql_queue *q = th_queue(64, AQL_QUEUE_MULTI, 0);
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	th_submit(q, &b);
	/* the processor is in the blocking phase of its wait on gate */
	while (!__atomic_load_n(&gate->waiters, __ATOMIC_ACQUIRE) && th_now_ns() < end)
		th_sleep_ms(1);
	CHECK(gate->waiters, "the CPU queue's processor does not wait on the barrier");
	CHECK(device_store(gate, 0) == 0, "interrupt");
	CHECK(th_wait_done(done) == 0, "the barrier on the GPU's signal did not complete");
	aql_queue_destroy(q);
	aql_signal_destroy(gate);
	aql_signal_destroy(done);
}

/* Timeouts kept; ACTIVE polls, BLOCKED sleeps in WAIT_EVENTS. */
static void check_timeouts_and_hints(void)
{
	aql_signal *s = th_signal(1);
	struct waiter w = { s, AQL_COND_EQ, 7, 50 * MS, AQL_WAIT_BLOCKED, AQL_OK };
	uint64_t t0 = th_now_ns(), waits;
	uint32_t base = stats().event_sleepers;
	aql_status st;
	pthread_t t;

	st = aql_signal_wait(s, AQL_COND_EQ, 7, 50 * MS, AQL_WAIT_BLOCKED, NULL);
	CHECK(st == AQL_ERR_TIMEOUT, "blocked wait: %s", aql_status_str(st));
	CHECK(th_now_ns() - t0 >= 50 * MS, "a 50 ms wait ended after %llu ns",
	      (unsigned long long)(th_now_ns() - t0));
	CHECK(th_error_has("timed out"), "message: %s", aql_error_message());
	t0 = th_now_ns();
	st = aql_signal_wait(s, AQL_COND_EQ, 7, 30 * MS, AQL_WAIT_SPIN_BLOCK, NULL);
	CHECK(st == AQL_ERR_TIMEOUT && th_now_ns() - t0 >= 30 * MS, "spin-block wait: %s",
	      aql_status_str(st));

	/* ACTIVE: a device store with no interrupt is seen by polling */
	waits = stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)];
	w.hint = AQL_WAIT_ACTIVE;
	w.timeout_ns = 60000 * MS;
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	th_sleep_ms(20);
	__atomic_store_n(&s->value, 7, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK, "active wait: %s", aql_status_str(w.st));
	CHECK(stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)] == waits,
	      "an active wait called WAIT_EVENTS");

	/* BLOCKED: it sleeps in KFD */
	w.hint = AQL_WAIT_BLOCKED;
	w.compare = 8;
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers_at_least(base + 1);
	aql_signal_store(s, 8, AQL_RELEASE);
	pthread_join(t, NULL);
	CHECK(w.st == AQL_OK, "blocked wait: %s", aql_status_str(w.st));
	CHECK(stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)] > waits,
	      "a blocked wait did not call WAIT_EVENTS");
	aql_signal_destroy(s);
}

/*
 * Stress: WAITERS threads, each waiting for every value of one signal in
 * turn; PRODUCERS threads storing 1..ROUNDS into theirs, by host and by
 * device stores in turn. Signals from two blocks, so some waiters share
 * an event and some do not. A lost wake-up leaves a waiter asleep until
 * its timeout.
 */
#define SIGNALS 8
#define WAITERS 8
#define PRODUCERS 2
#define ROUNDS 300

static aql_signal *stress_sig[SIGNALS];

static void *stress_wait(void *arg)
{
	aql_signal *s = stress_sig[(uintptr_t)arg % SIGNALS];
	int64_t seen = 0;
	enum aql_wait_hint hint = (uintptr_t)arg & 1 ? AQL_WAIT_BLOCKED : AQL_WAIT_SPIN_BLOCK;

	while (seen < ROUNDS) {
		aql_status st = aql_signal_wait(s, AQL_COND_GTE, seen + 1, TH_TIMEOUT_NS, hint,
						&seen);

		if (st != AQL_OK)
			return (void *)(uintptr_t)st;
	}
	return NULL;
}

static void *stress_produce(void *arg)
{
	uintptr_t p = (uintptr_t)arg;

	for (int64_t r = 1; r <= ROUNDS; r++) {
		for (uintptr_t i = p; i < SIGNALS; i += PRODUCERS) {
			if ((r + (int64_t)i) & 1)
				aql_signal_store(stress_sig[i], r, AQL_RELEASE);
			else if (device_store(stress_sig[i], r) == -EINVAL)
				return (void *)1;
		}
		/* let the waiters fall asleep now and then */
		if (r % 32 == 0)
			th_sleep_ms(2);
	}
	return NULL;
}

static void check_stress(void)
{
	aql_signal *all[130];
	pthread_t w[WAITERS], p[PRODUCERS];
	uint64_t waits = stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)];
	uint32_t a = 0, b = 0;
	void *ret;

	/* half the signals on one event, half on another */
	for (int i = 0; i < 130; i++)
		all[i] = th_signal(0);
	for (int i = 0; i < 130; i++) {
		if (a < SIGNALS / 2 && all[i]->event_id == all[0]->event_id)
			stress_sig[a++] = all[i];
		else if (b < SIGNALS / 2 && all[i]->event_id != all[0]->event_id)
			stress_sig[SIGNALS / 2 + b++] = all[i];
	}
	CHECK(a == SIGNALS / 2 && b == SIGNALS / 2, "130 signals on %u + %u events", a, b);
	if (a != SIGNALS / 2 || b != SIGNALS / 2)
		return;
	for (uintptr_t i = 0; i < WAITERS; i++)
		CHECK(pthread_create(&w[i], NULL, stress_wait, (void *)i) == 0, "pthread_create");
	for (uintptr_t i = 0; i < PRODUCERS; i++)
		CHECK(pthread_create(&p[i], NULL, stress_produce, (void *)i) == 0, "pthread_create");
	for (int i = 0; i < PRODUCERS; i++) {
		pthread_join(p[i], &ret);
		CHECK(ret == NULL, "producer %d: an interrupt was refused", i);
	}
	for (int i = 0; i < WAITERS; i++) {
		pthread_join(w[i], &ret);
		CHECK(ret == NULL, "waiter %d: %s", i, aql_status_str((aql_status)(uintptr_t)ret));
	}
	waits = stats().ioctls[_IOC_NR(AMDKFD_IOC_WAIT_EVENTS)] - waits;
	printf("stress: %llu sleeps in WAIT_EVENTS\n", (unsigned long long)waits);
	CHECK(waits > 0, "no waiter slept in WAIT_EVENTS");
	for (int i = 0; i < 130; i++)
		aql_signal_destroy(all[i]);
}

/* The fault watcher's report, as a listener (queue.c) gets it. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int count;
	uint32_t gpu_id;
	char msg[256];
} heard = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, "" };

static void listen_fault(uint32_t id, aql_status st, const char *msg, void *user)
{
	(void)user;
	pthread_mutex_lock(&heard.lock);
	heard.count++;
	heard.gpu_id = st == AQL_ERR_DEVICE ? id : 0;
	snprintf(heard.msg, sizeof(heard.msg), "%s", msg);
	pthread_cond_broadcast(&heard.cond);
	pthread_mutex_unlock(&heard.lock);
}

/* Until the listener heard n reports in all (bounded); under heard.lock. */
static void heard_until(int n)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(TH_TIMEOUT_NS / 1000000000u);
	while (heard.count < n && pthread_cond_timedwait(&heard.cond, &heard.lock, &until) == 0)
		;
}

static void fault(uint64_t va, int write, int exec, const char *kind)
{
	char want[64];
	int count;

	pthread_mutex_lock(&heard.lock);
	count = heard.count;
	pthread_mutex_unlock(&heard.lock);
	vm_fault_fn(gpu_id, va, write, exec);
	pthread_mutex_lock(&heard.lock);
	heard_until(count + 1);
	snprintf(want, sizeof(want), "at 0x%llx on gfx9", (unsigned long long)(va & ~4095ull));
	CHECK(heard.count == count + 1 && heard.gpu_id == gpu_id && strstr(heard.msg, want) &&
	      strstr(heard.msg, kind), "fault report for %s: \"%s\"", kind, heard.msg);
	pthread_mutex_unlock(&heard.lock);
}

/* A GPU reset (a hang): reported once, for every GPU; then an ECC
 * error. */
static void reset(void)
{
	int count;

	pthread_mutex_lock(&heard.lock);
	count = heard.count;
	pthread_mutex_unlock(&heard.lock);
	gpu_reset_fn(gpu_id, 0);
	pthread_mutex_lock(&heard.lock);
	heard_until(count + 1);
	CHECK(heard.count == count + 1 && heard.gpu_id == 0 && strstr(heard.msg, "GPU reset"),
	      "reset report: \"%s\"", heard.msg);
	/* an ECC reset after it: only the MEMORY event's error is news */
	gpu_reset_fn(gpu_id, 1);
	heard_until(count + 2);
	CHECK(heard.count == count + 2 && heard.gpu_id == gpu_id &&
	      strstr(heard.msg, "ECC error in SRAM"), "ECC report: \"%s\"", heard.msg);
	pthread_mutex_unlock(&heard.lock);
}

static void check_faults(void)
{
	CHECK_OK(kfd_fault_listen(listen_fault, NULL));
	fault(0x7f0012345678ull, 1, 0, "write to a read-only page");
	fault(0x100000, 0, 0, "page not present");
	fault(0x200000, 0, 1, "execute of a non-executable page");
}

/* A second GPU: the event page mapped to it, every signal block
 * registered with it, and its faults named. */
static void check_second_gpu(void)
{
	uint64_t user = stats().bo_bytes[KFDEMU_USERPTR];
	aql_signal *s = th_signal(1);
	aql_agent *second = NULL;
	struct kfdemu_bo b;
	uint32_t first_id = gpu_id;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 1, &second) == AQL_OK, "AMD agent 1: %s",
	      aql_error_message());
	if (!second)
		return;
	CHECK(bo_at_fn(s->event_mailbox_ptr, &b) == 0 && b.mapped == 3,
	      "the event page is mapped to GPUs %#x", b.mapped);
	CHECK(stats().bo_bytes[KFDEMU_USERPTR] == 2 * user,
	      "%llu bytes of signals registered, %llu with one GPU",
	      (unsigned long long)stats().bo_bytes[KFDEMU_USERPTR], (unsigned long long)user);
	gpu_id = ((struct kfd_agent *)second)->node->gpu_id;
	fault(0x300000, 0, 0, "page not present");
	gpu_id = first_id;
	aql_signal_destroy(s);
	CHECK(aql_agent_destroy(second) == AQL_OK, "destroy: %s", aql_error_message());
}

int main(void)
{
	aql_signal *early = th_signal(3);
	aql_agent *agent = NULL;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	/* aql loaded the emulation */
	load_emu();
	gpu_id = ((struct kfd_agent *)agent)->node->gpu_id;
	/* the fault watcher asleep, so that each later sleeper counts */
	sleepers_at_least(1);
	printf("KFD %u.%u\n", stats().version_major, stats().version_minor);
	check_setup(early);
	check_wakes();
	check_mixed();
	check_cpu_queue();
	check_timeouts_and_hints();
	check_stress();
	check_faults();
	if (stats().gpus > 1)
		check_second_gpu();
	/* last: the watcher no longer watches for resets after one */
	reset();
	aql_signal_destroy(early);
	CHECK(aql_agent_destroy(agent) == AQL_OK, "destroy: %s", aql_error_message());
	return th_finish();
}
