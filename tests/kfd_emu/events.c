/* SPDX-License-Identifier: MIT */
/*
 * The process's events (amdkfd kfd_events.c, kfd_chardev.c): the event
 * page, CREATE/DESTROY/SET/RESET_EVENT, WAIT_EVENTS with the event age of
 * 1.14, and what the hardware raises: the CP's end-of-pipe interrupt
 * (kfd_signal_event_interrupt), a VM fault (kfd_signal_vm_fault_event) and
 * a queue's exception (kfd_process.c send_exception_work_handler). Rules
 * are from the 6.6 copy (KFD 1.14) unless a version is named.
 *
 * Locking: the ioctl handlers but emu_wait_events run with sys.c's lock
 * held and take ev.lock inside it; emu_wait_events (it sleeps) and the
 * raisers take ev.lock only. ev.lock is the kernel's event_mutex and
 * every event's spinlock together.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emu.h"

/* kfd_events.h */
#define FIRST_NONSIGNAL_ID 0x40000000u	/* (INT_MAX >> 1) + 1 */
#define LAST_NONSIGNAL_ID 0x7fffffffu	/* INT_MAX */
#define UNSIGNALED_SLOT UINT64_MAX
#define TIMEOUT_INFINITE 0xffffffffu
/* kfd_priv.h KFD_MMAP_TYPE_EVENTS: the offset CREATE_EVENT hands back */
#define MMAP_TYPE_EVENTS (2ull << 62)
/* "Oldest user mode expects 256 event slots": the kernel's own page */
#define KERNEL_PAGE_SLOTS 256

struct waiter;

/* kfd_events.h struct kfd_event */
struct event {
	uint32_t id, type;
	int auto_reset, signaled;
	uint64_t age;
	struct kfd_hsa_memory_exception_data memory;
	struct kfd_hsa_hw_exception_data hw;	/* kept, not copied back (6.1-6.7) */
	struct waiter *queue;		/* the wait queue: waiters not yet freed */
	struct event *next;		/* ev.events, in id order */
};

/* kfd_events.c struct kfd_event_waiter */
struct waiter {
	struct event *event;		/* NULL once the event is destroyed */
	int activated, age_enabled;
	struct waiter *next;		/* on event->queue */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;		/* every set_event and destroy */
	struct event *events;
	/* The signal page: the event page BO's view, or the kernel's own
	 * page when the first signal event came without one. */
	uint64_t *slots;
	uint64_t *own_page;
	uint64_t mapped_size;		/* signal_mapped_size */
	uint64_t handle;		/* signal_handle */
	uint32_t signal_count;		/* starts at 1: id 0 is reserved */
	uint32_t sleepers;		/* WAIT_EVENTS calls asleep now */
} ev = { .lock = PTHREAD_MUTEX_INITIALIZER };

static pthread_once_t wake_once = PTHREAD_ONCE_INIT;

static void wake_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&ev.wake, &a);
	pthread_condattr_destroy(&a);
}

static void lock(void)
{
	pthread_once(&wake_once, wake_init);
	pthread_mutex_lock(&ev.lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&ev.lock);
}

void emu_events_reset(void)
{
	struct event *e, *next;

	lock();
	for (e = ev.events; e; e = next) {
		next = e->next;
		free(e);
	}
	free(ev.own_page);
	ev.events = NULL;
	ev.slots = ev.own_page = NULL;
	ev.mapped_size = ev.handle = 0;
	ev.signal_count = 1;
	ev.sleepers = 0;
	unlock();
}

void emu_events_fork_prepare(void)
{
	lock();
}

void emu_events_fork_done(void)
{
	unlock();
}

uint64_t emu_events_page_handle(void)
{
	return ev.handle;
}

void emu_events_stats(struct kfdemu_stats *out)
{
	lock();
	out->events = 0;
	for (struct event *e = ev.events; e; e = e->next)
		out->events++;
	out->event_slots = (uint32_t)(ev.mapped_size / 8);
	out->event_sleepers = ev.sleepers;
	unlock();
}

static struct event *lookup(uint32_t id)
{
	for (struct event *e = ev.events; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

/* idr_alloc(lo, end): the lowest free id in [lo, end), linked in order;
 * -ENOSPC when none is free. */
static int insert(struct event *n, uint32_t lo, uint64_t end)
{
	struct event **at = &ev.events;
	uint64_t id = lo;

	while (*at && (*at)->id < lo)
		at = &(*at)->next;
	while (*at && (*at)->id == id) {
		id++;
		at = &(*at)->next;
	}
	if (id >= end)
		return -ENOSPC;
	n->id = (uint32_t)id;
	n->next = *at;
	*at = n;
	return 0;
}

static uint64_t slot_load(uint32_t id)
{
	return __atomic_load_n(&ev.slots[id], __ATOMIC_ACQUIRE);
}

/* kfd_events.c set_event, with ev.lock held. */
static void set_event(struct event *e)
{
	/* an auto-reset event set with a waiter queued wakes it and stays
	 * clear; with none, it stays signaled for the next one */
	e->signaled = !e->auto_reset || !e->queue;
	/* never wrap back to 0 (no age) or 1 (the first) */
	if (!++e->age)
		e->age = 2;
	for (struct waiter *w = e->queue; w; w = w->next)
		w->activated = 1;
	pthread_cond_broadcast(&ev.wake);
}

/*
 * kfd_events.c kfd_kmap_event_page, with sys.c's lock held: the dGPU's
 * event page is a BO the caller allocated, named by its handle.
 */
static int kmap_event_page(uint64_t handle)
{
	const struct emu_gpu *g;
	struct kfdemu_bo bo;

	/* "Event page is already set" (also after the kernel's own page) */
	if (ev.slots)
		return -EINVAL;
	/* kfd_process_device_data_by_id(GET_GPU_ID) */
	g = emu_gpu_by_id((uint32_t)(handle >> 32));
	if (!g)
		return -EINVAL;
	/* kfd_bind_process_to_device */
	if (!emu_process_vm_file(g))
		return -ENODEV;
	/* kfd_process_device_translate_handle: "Can't find BO" */
	if (emu_memory_by_handle(handle, &bo))
		return -EINVAL;
	/* amdgpu_amdkfd_gpuvm_map_gtt_bo_to_kernel: "userptr can't be mapped
	 * to kernel". A VRAM BO is pinned into GTT there (it moves); DOORBELL
	 * and MMIO_REMAP BOs are refused as the emulation's own rule (approx:
	 * the kernel's pin into GTT of those domains is not modelled). */
	if (bo.domain != KFDEMU_GTT && bo.domain != KFDEMU_VRAM)
		return -EINVAL;
	/*
	 * kfd_event_page_set memsets KFD_SIGNAL_EVENT_LIMIT * 8 bytes of the
	 * page whatever its size: a smaller BO would be written past its
	 * end. The emulation refuses it (its own rule) rather than do that.
	 */
	if (bo.size < KFD_SIGNAL_EVENT_LIMIT * 8) {
		fprintf(stderr, "kfd-emu: an event page of %llu bytes: the kernel writes %u\n",
			(unsigned long long)bo.size, KFD_SIGNAL_EVENT_LIMIT * 8);
		return -EINVAL;
	}
	lock();
	ev.slots = bo.data;
	memset(ev.slots, 0xff, KFD_SIGNAL_EVENT_LIMIT * 8);
	/* signal_mapped_size = amdgpu_bo_size */
	ev.mapped_size = bo.size;
	ev.handle = handle;
	unlock();
	return 0;
}

/* kfd_chardev.c kfd_ioctl_create_event → kfd_events.c kfd_event_create */
int emu_create_event(void *data)
{
	struct kfd_ioctl_create_event_args *args = data;
	struct event *e;
	int r;

	/* "For dGPUs the event page is allocated in user mode": its handle
	 * comes with the first call (any later one is refused above) */
	if (args->event_page_offset) {
		r = kmap_event_page(args->event_page_offset);
		if (r)
			return r;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	/* the type is not checked: all but SIGNAL and DEBUG are "other" */
	e->type = args->event_type;
	e->auto_reset = args->auto_reset != 0;
	e->age = 1;
	args->event_page_offset = 0;
	lock();
	if (e->type == KFD_IOC_EVENT_SIGNAL || e->type == KFD_IOC_EVENT_DEBUG_EVENT) {
		/* create_signal_event: every slot taken → -ENOSPC */
		if (ev.mapped_size && ev.signal_count == ev.mapped_size / 8) {
			r = -ENOSPC;
			goto out;
		}
		/* allocate_event_notification_slot: no page yet → the
		 * kernel's own 256 slots, which the host could only see
		 * through an mmap of /dev/kfd (not emulated) */
		if (!ev.slots) {
			ev.own_page = malloc(KFD_SIGNAL_EVENT_LIMIT * 8);
			if (!ev.own_page) {
				r = -ENOMEM;
				goto out;
			}
			memset(ev.own_page, 0xff, KFD_SIGNAL_EVENT_LIMIT * 8);
			ev.slots = ev.own_page;
			ev.mapped_size = KERNEL_PAGE_SLOTS * 8;
		}
		/* id 0 is reserved (kfd_event_init_process) */
		r = insert(e, 1, ev.mapped_size / 8);
		if (r)
			goto out;
		__atomic_store_n(&ev.slots[e->id], UNSIGNALED_SLOT, __ATOMIC_RELAXED);
		ev.signal_count++;
		args->event_page_offset = MMAP_TYPE_EVENTS;
		args->event_slot_index = e->id;
	} else {
		/* create_other_event */
		r = insert(e, FIRST_NONSIGNAL_ID, (uint64_t)LAST_NONSIGNAL_ID + 1);
		if (r)
			goto out;
	}
	args->event_id = e->id;
	args->event_trigger_data = e->id;
out:
	unlock();
	if (r)
		free(e);
	return r;
}

/* kfd_events.c kfd_event_destroy: waiters return FAIL / -EIO. */
int emu_destroy_event(void *data)
{
	const struct kfd_ioctl_destroy_event_args *args = data;
	struct event **at, *e;

	lock();
	for (at = &ev.events; *at && (*at)->id != args->event_id; at = &(*at)->next)
		;
	e = *at;
	if (!e) {
		unlock();
		return -EINVAL;
	}
	for (struct waiter *w = e->queue; w; w = w->next)
		w->event = NULL;
	pthread_cond_broadcast(&ev.wake);
	if (e->type == KFD_IOC_EVENT_SIGNAL || e->type == KFD_IOC_EVENT_DEBUG_EVENT)
		ev.signal_count--;
	*at = e->next;
	unlock();
	free(e);
	return 0;
}

/* kfd_set_event / kfd_reset_event: only SIGNAL events
 * (event_can_be_cpu_signaled), else -EINVAL, as an unknown id is. */
static int set_or_reset(uint32_t id, int set)
{
	struct event *e;
	int r = 0;

	lock();
	e = lookup(id);
	if (!e || e->type != KFD_IOC_EVENT_SIGNAL)
		r = -EINVAL;
	else if (set)
		set_event(e);
	else
		e->signaled = 0;
	unlock();
	return r;
}

int emu_set_event(void *data)
{
	return set_or_reset(((struct kfd_ioctl_set_event_args *)data)->event_id, 1);
}

int emu_reset_event(void *data)
{
	return set_or_reset(((struct kfd_ioctl_reset_event_args *)data)->event_id, 0);
}

/*
 * The 1.14 kfd_event_data names the union's first 8 bytes
 * signal_event_data.last_event_age; the 1.11 header has no name for them.
 */
static uint64_t age_of(const struct kfd_event_data *d)
{
	uint64_t age;

	memcpy(&age, d, sizeof(age));
	return age;
}

/* kfd_events.c init_event_waiter, with ev.lock held. */
static int init_waiter(struct waiter *w, const struct kfd_event_data *d)
{
	struct event *e = lookup(d->event_id);

	if (!e)
		return -EINVAL;
	w->event = e;
	w->activated = e->signaled;
	e->signaled = e->signaled && !e->auto_reset;
	/* 1.14: a SIGNAL event whose age differs from the caller's
	 * (0: no age) has been set since the caller last looked */
	if (emu_at_least(14) && e->type == KFD_IOC_EVENT_SIGNAL && age_of(d)) {
		w->age_enabled = 1;
		if (e->age != age_of(d))
			w->activated = 1;
	}
	if (!w->activated) {
		w->next = e->queue;
		e->queue = w;
	}
	return 0;
}

/* kfd_events.c test_event_condition */
static uint32_t condition(const struct waiter *w, uint32_t n, int all)
{
	uint32_t activated = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (!w[i].event)
			return KFD_IOC_WAIT_RESULT_FAIL;
		if (w[i].activated) {
			if (!all)
				return KFD_IOC_WAIT_RESULT_COMPLETE;
			activated++;
		}
	}
	return activated == n ? KFD_IOC_WAIT_RESULT_COMPLETE : KFD_IOC_WAIT_RESULT_TIMEOUT;
}

/* kfd_events.c copy_signaled_event_data: a MEMORY event's data, and from
 * 1.14 a SIGNAL event's age where the caller passed one. */
static int copy_back(const struct waiter *w, uint32_t n, struct kfd_event_data *user)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct event *e = w[i].event;

		if (!e)
			return -EINVAL;
		if (!w[i].activated)
			continue;
		if (e->type == KFD_IOC_EVENT_MEMORY &&
		    emu_copy_to_user(&user[i].memory_exception_data, &e->memory, sizeof(e->memory)))
			return -EFAULT;
		if (e->type == KFD_IOC_EVENT_SIGNAL && w[i].age_enabled &&
		    emu_copy_to_user(&user[i], &e->age, sizeof(e->age)))
			return -EFAULT;
	}
	return 0;
}

/* kfd_events.c free_waiters: off every wait queue. */
static void free_waiters(struct waiter *w, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct waiter **at;

		if (!w[i].event)
			continue;
		for (at = &w[i].event->queue; *at; at = &(*at)->next)
			if (*at == &w[i]) {
				*at = w[i].next;
				break;
			}
	}
	free(w);
}

/*
 * kfd_events.c kfd_wait_on_events, without sys.c's lock. Signals are not
 * delivered to an emulated sleep, so -ERESTARTSYS/-EINTR never happen.
 */
int emu_wait_events(void *data)
{
	struct kfd_ioctl_wait_events_args *args = data;
	struct kfd_event_data *user = (struct kfd_event_data *)(uintptr_t)args->events_ptr;
	uint32_t n = args->num_events, result = KFD_IOC_WAIT_RESULT_FAIL;
	struct timespec deadline;
	struct waiter *w;
	int r = 0;

	/* kcalloc(num_events): 0 events is a valid, empty wait */
	w = calloc(n ? n : 1, sizeof(*w));
	if (!w) {
		args->wait_result = KFD_IOC_WAIT_RESULT_FAIL;
		return -ENOMEM;
	}
	/* user_timeout_to_jiffies: 0 looks once, ~0 is infinite, the rest
	 * capped at 2^31 - 1 ms */
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	if (args->timeout != TIMEOUT_INFINITE) {
		uint32_t ms = args->timeout > 0x7fffffffu ? 0x7fffffffu : args->timeout;

		deadline.tv_sec += ms / 1000;
		deadline.tv_nsec += (long)(ms % 1000) * 1000000;
		if (deadline.tv_nsec >= 1000000000) {
			deadline.tv_sec++;
			deadline.tv_nsec -= 1000000000;
		}
	}
	lock();
	for (uint32_t i = 0; i < n && !r; i++) {
		struct kfd_event_data d;

		r = emu_copy_from_user(&d, &user[i], sizeof(d));
		if (!r)
			r = init_waiter(&w[i], &d);
	}
	if (!r) {
		result = condition(w, n, args->wait_for_all != 0);
		if (result == KFD_IOC_WAIT_RESULT_TIMEOUT && args->timeout) {
			int timed_out = 0;

			ev.sleepers++;
			while (result == KFD_IOC_WAIT_RESULT_TIMEOUT && !timed_out) {
				if (args->timeout == TIMEOUT_INFINITE)
					pthread_cond_wait(&ev.wake, &ev.lock);
				else
					timed_out = pthread_cond_timedwait(&ev.wake, &ev.lock,
									   &deadline) == ETIMEDOUT;
				result = condition(w, n, args->wait_for_all != 0);
			}
			ev.sleepers--;
		}
		if (result == KFD_IOC_WAIT_RESULT_COMPLETE)
			r = copy_back(w, n, user);
	}
	free_waiters(w, n);
	unlock();
	if (r)
		result = KFD_IOC_WAIT_RESULT_FAIL;
	else if (result == KFD_IOC_WAIT_RESULT_FAIL)
		r = -EIO;
	args->wait_result = result;
	return r;
}

/* kfd_events.c set_event_from_interrupt: acknowledge_signal, then set. */
static void set_from_interrupt(struct event *e)
{
	if (e && (e->type == KFD_IOC_EVENT_SIGNAL || e->type == KFD_IOC_EVENT_DEBUG_EVENT)) {
		__atomic_store_n(&ev.slots[e->id], UNSIGNALED_SLOT, __ATOMIC_RELEASE);
		set_event(e);
	}
}

/*
 * kfd_events.c kfd_signal_event_interrupt(pasid, event_id, 32), as
 * kfd_int_process_v9.c calls it for the CP's END_OF_PIPE: all 32 bits of
 * the id are valid, so the slot of that id is looked at first; when it is
 * not signaled, every slot that is gets its event set.
 */
int emu_event_interrupt(uint32_t gpu_id, uint32_t event_id)
{
	struct event *e = NULL;
	int r = -ENOENT;

	if (!emu_gpu_by_id(gpu_id))
		return -EINVAL;
	lock();
	if (!ev.slots) {
		unlock();
		return -ENOENT;
	}
	if (event_id < KFD_SIGNAL_EVENT_LIMIT && slot_load(event_id) != UNSIGNALED_SLOT)
		e = lookup(event_id);
	if (e) {
		set_from_interrupt(e);
		r = 0;
	} else {
		for (e = ev.events; e && e->id < KFD_SIGNAL_EVENT_LIMIT; e = e->next)
			if (slot_load(e->id) != UNSIGNALED_SLOT) {
				set_from_interrupt(e);
				r = 0;
			}
	}
	unlock();
	return r;
}

/*
 * kfd_events.c kfd_signal_vm_fault_event: every MEMORY event of the
 * process gets the fault's data and is set. The fault's kind: a write to
 * a read-only page, an execute of an NX page, else a page not present.
 */
void emu_event_vm_fault(uint32_t gpu_id, uint64_t va, int write, int exec)
{
	struct kfd_hsa_memory_exception_data d = {
		.failure = { .NotPresent = !write && !exec, .ReadOnly = write != 0,
			     .NoExecute = exec != 0 },
		.va = va & ~4095ull,		/* page_addr << PAGE_SHIFT */
		.gpu_id = gpu_id,
	};
	int found = 0;

	lock();
	for (struct event *e = ev.events; e; e = e->next)
		if (e->type == KFD_IOC_EVENT_MEMORY) {
			e->memory = d;
			set_event(e);
			found = 1;
		}
	unlock();
	if (!found)
		fprintf(stderr, "kfd-emu: GPU memory fault at 0x%llx with no MEMORY event\n",
			(unsigned long long)va);
}

/*
 * kfd_events.c kfd_signal_reset_event: every HW_EXCEPTION event gets the
 * reset's data (whole memory lost) and is set; with an ECC cause, every
 * MEMORY event gets an imprecise SRAM ECC error too.
 */
void emu_event_gpu_reset(uint32_t gpu_id, int ecc)
{
	struct kfd_hsa_memory_exception_data m = {
		.failure = { .imprecise = 1 }, .gpu_id = gpu_id, .ErrorType = KFD_MEM_ERR_SRAM_ECC,
	};

	lock();
	for (struct event *e = ev.events; e; e = e->next) {
		if (e->type == KFD_IOC_EVENT_HW_EXCEPTION) {
			e->hw = (struct kfd_hsa_hw_exception_data){
				.memory_lost = 1, .gpu_id = gpu_id,
				.reset_cause = ecc ? KFD_HW_EXCEPTION_ECC : KFD_HW_EXCEPTION_GPU_HANG,
			};
			set_event(e);
		}
		if (e->type == KFD_IOC_EVENT_MEMORY && ecc) {
			e->memory = m;
			set_event(e);
		}
	}
	unlock();
}

/*
 * kfd_process.c send_exception_work_handler (1.13): the codes are OR-ed
 * into the queue's error payload (read, OR, written back, as the kernel
 * does with copy_from_user/copy_to_user), then kfd_set_event(err_event_id).
 */
int emu_event_queue_exception(uint64_t err_payload_addr, uint32_t err_event_id, uint64_t ec_mask)
{
	uint64_t *payload = (uint64_t *)(uintptr_t)err_payload_addr;
	uint64_t cur;
	int r;

	r = emu_copy_from_user(&cur, payload, sizeof(cur));
	if (r)
		return r;
	cur |= ec_mask;
	r = emu_copy_to_user(payload, &cur, sizeof(cur));
	if (r)
		return r;
	return set_or_reset(err_event_id, 1);
}
