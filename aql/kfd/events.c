/* SPDX-License-Identifier: MIT */
/*
 * Signals and KFD events for the AMD agent.
 *
 * On completion the command processor writes a signal's value, then, when
 * event_mailbox_ptr is set, event_id into that mailbox, and raises an
 * interrupt that makes amdkfd set the event (kfd_events.c
 * kfd_signal_event_interrupt). So each block of 64 pool signals gets a KFD
 * SIGNAL event (auto-reset, as ROCr's) and a slot of the process's event
 * page as mailbox; the 4093 slots left beside the control and host
 * events cover 261 952 signals, a wake reaches at most 64 signals and each
 * waiter re-checks its own value.
 *
 * A sleep on events loses no set that comes after the waiter's last value
 * check (aql_wait_conds arms before it):
 * - KFD 1.14 and later: the waiter passes the event's age as it stood at
 *   arm; WAIT_EVENTS returns at once when the age moved since.
 * - before 1.14: a set with nobody queued leaves an auto-reset event
 *   signaled for the next waiter, but one with a waiter queued is taken by
 *   that waiter alone. So one waiter per event (claimed at arm) sleeps in
 *   WAIT_EVENTS; the others sleep on the futex words, polling every 1 ms.
 * Host stores wake both ways (aql_signal_wake_waiters: SET_EVENT here).
 * Signals the pool did not make (a queue's own stop signal: event_id 0)
 * are only stored by the host; waits on them sleep on the process's host
 * event, which their stores set, so a wait on them and on signals a GPU
 * completes sleeps on both at once.
 *
 * One watcher thread per process sleeps in WAIT_EVENTS on the MEMORY and
 * HW_EXCEPTION events (and a control event) and tells the listeners
 * (kfd_fault_listen) which GPU faulted and how.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/wait.h"

#define SLOTS KFD_SIGNAL_EVENT_LIMIT
/* kfd_event_page_set fills SLOTS slots of the page with 0xFF bytes
 * (UNSIGNALED_EVENT_SLOT) whatever its size, and refuses a smaller page:
 * exactly that much. */
#define PAGE_BYTES (SLOTS * sizeof(uint64_t))
#define SIGNAL_BYTES (64 * sizeof(aql_signal))
#define POLL_NS 1000000u
#define MAX_LISTENERS 8
/* event_id of the signals of a block that got no event: polled */
#define NO_EVENT UINT32_MAX

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;	/* before ev.lock */

static struct {
	pthread_mutex_t lock;
	const struct kfd_process *process;
	uint64_t *page;
	uint64_t page_handle;
	uint32_t page_gpu;
	uint32_t memory_id, hw_id, control_id;
	uint32_t host_id;		/* the event of signals the pool did not make */
	aql_status failed;		/* setup's failure, kept */
	int age;			/* KFD 1.14: WAIT_EVENTS takes event ages */
	int registered;			/* aql_signal_events_register done */
	/* Per topology node: a copy of the first agent opened there, for
	 * memory.c (ops NULL: none yet); agents may be destroyed early. */
	struct kfd_agent *gpus;
	aql_signal **blocks;
	uint32_t nblocks, cap;
	struct {
		kfd_fault_fn fn;
		void *user;
	} listeners[MAX_LISTENERS];
	uint32_t nlisteners;
	int stop, warned;
	pthread_t watcher;
} ev = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Per slot (= SIGNAL event id): the last age a wait saw (1.14), and
 * before 1.14 whether a waiter sleeps in WAIT_EVENTS on it. */
static uint64_t ages[SLOTS];
static uint8_t sleeper[SLOTS];

static struct aql_kept_failure setup_failure;

/*
 * The event a wait on signal sleeps on: its block's; the host event for a
 * signal the pool did not make (event_id 0), which only the host stores;
 * NO_EVENT for one whose block got none.
 */
static uint32_t event_of(const aql_signal *signal)
{
	uint32_t id = __atomic_load_n(&signal->event_id, __ATOMIC_RELAXED);

	return id ? id : ev.host_id;
}

static int kfd_ioctl(unsigned long cmd, void *args)
{
	return aql_kfd_ioctl(ev.process->sys, ev.process->fd, cmd, args);
}

/* One line on stderr for the first failure of a path that has no caller
 * to return it to (the waits it concerns poll every 1 ms); later ones are
 * the same story. */
static void warn(const char *what, int r)
{
	if (!__atomic_exchange_n(&ev.warned, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "libaql: AMD signal events: %s: %s\n", what, strerror(-r));
}

static int create_event(uint32_t type, int auto_reset, uint64_t page,
			struct kfd_ioctl_create_event_args *out)
{
	*out = (struct kfd_ioctl_create_event_args){ .event_page_offset = page,
						     .event_type = type,
						     .auto_reset = (uint32_t)auto_reset };
	return kfd_ioctl(AMDKFD_IOC_CREATE_EVENT, out);
}

static const char *gfx_of(uint32_t gpu_id)
{
	for (uint32_t i = 0; i < ev.process->topo.count; i++)
		if (ev.process->topo.nodes[i].gpu_id == gpu_id)
			return ev.process->topo.nodes[i].gfx;
	return "an unknown GPU";
}

static void tell(uint32_t gpu_id, const char *msg)
{
	uint32_t n;

	pthread_mutex_lock(&ev.lock);
	n = ev.nlisteners;
	pthread_mutex_unlock(&ev.lock);
	/* listeners are only ever added, in order */
	for (uint32_t i = 0; i < n; i++)
		ev.listeners[i].fn(gpu_id, AQL_ERR_DEVICE, msg, ev.listeners[i].user);
}

/* kfd_hsa_memory_exception_data, in words. */
static void memory_fault(const struct kfd_hsa_memory_exception_data *m)
{
	static const char *const errors[] = { "", "ECC error in SRAM", "poisoned data consumed",
					      "GPU hang" };
	const char *error = m->ErrorType < 4 ? errors[m->ErrorType] : "RAS error";
	char msg[256];

	if (!m->failure.NotPresent && !m->failure.ReadOnly && !m->failure.NoExecute &&
	    m->ErrorType)
		snprintf(msg, sizeof(msg), "GPU memory error on %s (gpu_id %u): %s",
			 gfx_of(m->gpu_id), m->gpu_id, error);
	else
		snprintf(msg, sizeof(msg), "GPU memory fault at 0x%llx on %s (gpu_id %u): %s%s%s%s",
			 (unsigned long long)m->va, gfx_of(m->gpu_id), m->gpu_id,
			 m->failure.ReadOnly   ? "write to a read-only page" :
			 m->failure.NoExecute  ? "execute of a non-executable page" :
			 m->failure.NotPresent ? "page not present" : "access refused",
			 m->failure.imprecise ? " (address imprecise)" : "",
			 m->ErrorType ? ", " : "", error);
	tell(m->gpu_id, msg);
}

/*
 * The watcher. MEMORY is auto-reset and says which GPU in its data
 * (copied back only when it fired). HW_EXCEPTION's data is copied back
 * only by kernels with the November 2023 fix to copy_signaled_event_data
 * (kfd_events.c; approx. Linux 6.8), not by 6.1 to 6.7, and no KFD
 * version tells which. So it is not read: the event is manual-reset and
 * looked at alone, and a GPU reset is reported once, for every GPU, and
 * no longer watched.
 */
static void *watch(void *arg)
{
	int hw = 1;

	(void)arg;
	for (;;) {
		struct kfd_event_data d[3] = { { .event_id = ev.control_id },
					       { .event_id = ev.memory_id },
					       { .event_id = ev.hw_id } };
		struct kfd_ioctl_wait_events_args w = { .events_ptr = (uintptr_t)d,
							.num_events = hw ? 3 : 2,
							.timeout = 0xffffffffu };
		int r = kfd_ioctl(AMDKFD_IOC_WAIT_EVENTS, &w);

		if (r < 0) {
			fprintf(stderr, "libaql: the AMD fault watcher stops: "
				"AMDKFD_IOC_WAIT_EVENTS: %s\n", strerror(-r));
			return NULL;
		}
		if (__atomic_load_n(&ev.stop, __ATOMIC_ACQUIRE))
			return NULL;
		if (d[1].memory_exception_data.gpu_id)
			memory_fault(&d[1].memory_exception_data);
		if (hw) {
			struct kfd_ioctl_wait_events_args h = { .events_ptr = (uintptr_t)&d[2],
								.num_events = 1 };

			d[2] = (struct kfd_event_data){ .event_id = ev.hw_id };
			if (kfd_ioctl(AMDKFD_IOC_WAIT_EVENTS, &h) == 0 &&
			    h.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE) {
				hw = 0;
				tell(0, "AMD GPU reset (KFD HW_EXCEPTION event: a hang or an ECC "
					"error); the memory of its queues is lost");
			}
		}
	}
}

static void watch_stop(void)
{
	struct kfd_ioctl_set_event_args s = { .event_id = ev.control_id };

	__atomic_store_n(&ev.stop, 1, __ATOMIC_RELEASE);
	if (kfd_ioctl(AMDKFD_IOC_SET_EVENT, &s) == 0)
		pthread_join(ev.watcher, NULL);
}

aql_status kfd_fault_listen(kfd_fault_fn fn, void *user)
{
	aql_status st = AQL_OK;

	pthread_mutex_lock(&ev.lock);
	if (ev.nlisteners == MAX_LISTENERS) {
		st = aql_fail(AQL_ERR_NOMEM, "AMD fault listeners: all %d taken", MAX_LISTENERS);
	} else {
		ev.listeners[ev.nlisteners].fn = fn;
		ev.listeners[ev.nlisteners].user = user;
		ev.nlisteners++;
	}
	pthread_mutex_unlock(&ev.lock);
	return st;
}

/* Make a block's memory visible to the GPU of node i. Under ev.lock. */
static aql_status block_register(aql_signal *b, uint32_t i)
{
	return kfd_mem_register_own(&ev.gpus[i].base, b, SIGNAL_BYTES);
}

/* aql_signal_events.block, with the pool's lock held. */
static void block_add(aql_signal *b, uint32_t n)
{
	struct kfd_ioctl_create_event_args c;
	aql_signal **grown;
	int r;

	pthread_mutex_lock(&ev.lock);
	if (ev.nblocks == ev.cap) {
		grown = realloc(ev.blocks, (ev.cap ? 2 * ev.cap : 16) * sizeof(*grown));
		if (!grown) {
			warn("no memory for the list of signal blocks", -ENOMEM);
			goto out;
		}
		ev.blocks = grown;
		ev.cap = ev.cap ? 2 * ev.cap : 16;
	}
	r = create_event(KFD_IOC_EVENT_SIGNAL, 1, 0, &c);
	if (r < 0) {
		warn("AMDKFD_IOC_CREATE_EVENT for a block of signals", r);
		for (uint32_t i = 0; i < n; i++)
			__atomic_store_n(&b[i].event_id, NO_EVENT, __ATOMIC_RELAXED);
		goto out;
	}
	for (uint32_t i = 0; i < ev.process->topo.count; i++)
		if (ev.gpus[i].base.ops && block_register(b, i) != AQL_OK)
			fprintf(stderr, "libaql: AMD signals: %s\n", aql_error_message());
	for (uint32_t i = 0; i < n; i++) {
		__atomic_store_n(&b[i].event_mailbox_ptr, (uintptr_t)&ev.page[c.event_slot_index],
				 __ATOMIC_RELAXED);
		__atomic_store_n(&b[i].event_id, c.event_id, __ATOMIC_RELAXED);
	}
	ev.blocks[ev.nblocks++] = b;
out:
	pthread_mutex_unlock(&ev.lock);
}

/* The first occurrence of conds[i]'s event among conds[0..i]. */
static int first_of(const struct aql_wait_cond *c, uint32_t i)
{
	for (uint32_t j = 0; j < i; j++)
		if (event_of(c[j].signal) == event_of(c[i].signal))
			return 0;
	return 1;
}

/* Tickets before 1.14: 1 claimed by this waiter, 2 a repeat of an
 * earlier entry's event, 0 another waiter sleeps on it. */
static void arm(uint32_t n, const struct aql_wait_cond *c, uint64_t *ticket)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = event_of(c[i].signal);

		if (id == NO_EVENT)
			ticket[i] = 0;
		else if (ev.age)
			ticket[i] = __atomic_load_n(&ages[id], __ATOMIC_ACQUIRE);
		else if (!first_of(c, i))
			ticket[i] = 2;
		else
			ticket[i] = !__atomic_exchange_n(&sleeper[id], 1, __ATOMIC_ACQ_REL);
	}
}

static void disarm(uint32_t n, const struct aql_wait_cond *c, const uint64_t *ticket)
{
	for (uint32_t i = 0; i < n && !ev.age; i++)
		if (ticket[i] == 1 && event_of(c[i].signal) != NO_EVENT)
			__atomic_store_n(&sleeper[event_of(c[i].signal)], 0, __ATOMIC_RELEASE);
}

static uint64_t sleep_events(uint32_t n, const struct aql_wait_cond *c, const uint64_t *ticket,
			     uint64_t deadline_ns)
{
	struct kfd_event_data d[64];
	struct kfd_ioctl_wait_events_args w = { .events_ptr = (uintptr_t)d };
	uint64_t now = aql_now_ns(), ms;
	int r;

	for (uint32_t i = 0; i < n; i++) {
		if (event_of(c[i].signal) == NO_EVENT || (!ev.age && ticket[i] == 0)) {
			disarm(n, c, ticket);
			return now + POLL_NS;
		}
		if (!first_of(c, i))
			continue;
		d[w.num_events] = (struct kfd_event_data){ .event_id = event_of(c[i].signal) };
		/* kfd_event_data.signal_event_data.last_event_age (1.14) */
		if (ev.age)
			memcpy(&d[w.num_events], &ticket[i], sizeof(ticket[i]));
		w.num_events++;
	}
	/* the deadline passed since the caller looked: it looks again */
	if (now >= deadline_ns) {
		disarm(n, c, ticket);
		return 0;
	}
	/* whole ms, rounded up; ~0 is infinite, so a finite wait stays below */
	ms = deadline_ns == UINT64_MAX ? 0xffffffffu : (deadline_ns - now + 999999) / 1000000;
	w.timeout = ms > 0xfffffffeu ? 0xfffffffeu : (uint32_t)(ms ? ms : 1);
	r = kfd_ioctl(AMDKFD_IOC_WAIT_EVENTS, &w);
	disarm(n, c, ticket);
	if (r < 0) {
		warn("AMDKFD_IOC_WAIT_EVENTS", r);
		return now + POLL_NS;
	}
	for (uint32_t i = 0; r == 0 && ev.age && i < w.num_events; i++) {
		uint64_t age;

		memcpy(&age, &d[i], sizeof(age));
		__atomic_store_n(&ages[d[i].event_id], age, __ATOMIC_RELEASE);
	}
	return 0;
}

static void wake(aql_signal *signal)
{
	struct kfd_ioctl_set_event_args s = { .event_id = event_of(signal) };
	int r;

	/* waiters on a signal with no event poll its futex word */
	if (s.event_id == NO_EVENT)
		return;
	r = kfd_ioctl(AMDKFD_IOC_SET_EVENT, &s);
	if (r < 0)
		warn("AMDKFD_IOC_SET_EVENT", r);
}

static const struct aql_signal_events signal_events = {
	.block = block_add,
	.arm = arm,
	.disarm = disarm,
	.sleep = sleep_events,
	.wake = wake,
};

/* The page and the process's events, at the first agent. Under ev.lock. */
static aql_status setup(struct kfd_agent *a)
{
	struct kfd_ioctl_create_event_args c;
	aql_status st;
	void *page;
	int r;

	ev.process = a->process;
	ev.age = a->process->minor >= 14;
	ev.gpus = calloc(a->process->topo.count, sizeof(*ev.gpus));
	if (!ev.gpus)
		return aql_fail(AQL_ERR_NOMEM, "no memory for the AMD event state");
	st = kfd_gtt_alloc(&a->base, PAGE_BYTES, &page, &ev.page_handle);
	if (st != AQL_OK)
		return st;
	ev.page = page;
	ev.page_gpu = a->node->gpu_id;
	/* The page goes with the first CREATE_EVENT (kfd_chardev.c
	 * kfd_ioctl_create_event), here the watcher's control event. */
	r = create_event(KFD_IOC_EVENT_SIGNAL, 1, ev.page_handle, &c);
	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s: AMDKFD_IOC_CREATE_EVENT with the "
				      "event page", a->node->gfx);
	ev.control_id = c.event_id;
	r = create_event(KFD_IOC_EVENT_SIGNAL, 1, 0, &c);
	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s: AMDKFD_IOC_CREATE_EVENT of the "
				      "host event", a->node->gfx);
	ev.host_id = c.event_id;
	/* A VM fault with no MEMORY event goes unreported (kfd_events.c
	 * kfd_signal_vm_fault_event): it must exist before any queue. */
	r = create_event(KFD_IOC_EVENT_MEMORY, 1, 0, &c);
	if (r == 0) {
		ev.memory_id = c.event_id;
		r = create_event(KFD_IOC_EVENT_HW_EXCEPTION, 0, 0, &c);
	}
	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s: AMDKFD_IOC_CREATE_EVENT of the "
				      "MEMORY and HW_EXCEPTION events", a->node->gfx);
	ev.hw_id = c.event_id;
	/* KFD starts every event at age 1 (kfd_event_create) */
	for (uint32_t i = 0; i < SLOTS; i++)
		ages[i] = 1;
	r = pthread_create(&ev.watcher, NULL, watch, NULL);
	if (r)
		return aql_fail_errno(AQL_ERR_SYSTEM, r, "starting the AMD fault watcher");
	atexit(watch_stop);
	return AQL_OK;
}

/* a's GPU joins: the page mapped to it, every signal block registered.
 * Under ev.lock. */
static aql_status gpu_add(struct kfd_agent *a, uint32_t node)
{
	uint32_t id = a->node->gpu_id;
	struct kfd_ioctl_map_memory_to_gpu_args m = { .handle = ev.page_handle,
						       .device_ids_array_ptr = (uintptr_t)&id,
						       .n_devices = 1 };
	aql_status st = AQL_OK;
	int r;

	if (id != ev.page_gpu) {
		r = kfd_ioctl(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m);
		if (r < 0)
			return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s: AMDKFD_IOC_MAP_MEMORY_TO_GPU "
					      "of the event page", a->node->gfx);
	}
	ev.gpus[node] = *a;
	for (uint32_t i = 0; i < ev.nblocks && st == AQL_OK; i++)
		st = block_register(ev.blocks[i], node);
	return st;
}

aql_status kfd_events_open(struct kfd_agent *a)
{
	uint32_t node = (uint32_t)(a->node - a->process->topo.nodes);
	aql_status st = AQL_OK;
	int first = 0;

	pthread_mutex_lock(&open_lock);
	pthread_mutex_lock(&ev.lock);
	/* a failed setup is not retried: it may have made events */
	if (ev.failed)
		st = aql_fail_kept(&setup_failure, "AMD signal events");
	else if (!ev.process && (st = setup(a)) != AQL_OK)
		ev.failed = aql_keep_failure(&setup_failure, st);
	if (st == AQL_OK && !ev.gpus[node].base.ops)
		st = gpu_add(a, node);
	if (st == AQL_OK && !ev.registered)
		first = ev.registered = 1;
	pthread_mutex_unlock(&ev.lock);
	/* block_add takes ev.lock under the pool's lock */
	if (first)
		st = aql_signal_events_register(&signal_events);
	pthread_mutex_unlock(&open_lock);
	return st;
}
