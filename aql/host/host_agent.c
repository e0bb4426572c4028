/* SPDX-License-Identifier: MIT */
/*
 * The CPU agent: an HSA packet processor per queue, on its own thread.
 *
 * The processor polls the header of the slot at the read index, stalling
 * while it is INVALID: it polls (up to idle_spin_ns), then parks on the
 * doorbell signal until the doorbell value changes. Packets run one after
 * another in queue order, so a packet starts only after every earlier one
 * completed: the barrier bit always holds. Kernel dispatches of one
 * work-group (or a handful of work-items) run on the processor thread
 * itself; larger grids are spread over the agent's worker pool, with the
 * processor taking part.
 *
 * Before a packet: its header was loaded with acquire order, which meets
 * any acquire fence scope. After it: header reset to INVALID (the packet
 * is no longer in flight), profiling stamps, completion signal decrement
 * (release, if the packet asks for a release fence), read index advance. A
 * malformed packet stops the queue: error state, completion signal -1,
 * error callback.
 *
 * A thread that waits for a packet's completion signal, or for room in a
 * full ring, may run packets itself while the processor is parked (see
 * "Helpers that run packets" below): the same code, on that thread.
 *
 * A queue's priority is its processor thread's nice value: the one the
 * thread started with for NORMAL, NICE_STEP above for LOW and below for
 * HIGH. The processor is what orders the queue's work against other
 * queues'; the workers are shared by all of them and keep their own.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <aql/channel.h>
#include <aql/mem.h>

#include "aql/agent_impl.h"
#include "aql/timeline.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/futex.h"
#include "util/spin.h"
#include "aql/queue_impl.h"
#include "util/wait.h"
#include "aql/host/workers.h"
#include "aql/host/workgroup.h"
#include "mem/host_mem.h"

#define MAX_WORKGROUP 1024u
#define MAX_PRIVATE (64u << 10)
#define MAX_QUEUE_SIZE (1u << 20)
#define MAX_WORKERS 1024u
#define DEFAULT_GROUP_SEGMENT (64u << 10)
#define DEFAULT_IDLE_SPIN_NS 50000u
/* Grids up to this many work-items run on the processor thread: waking a
 * worker costs more than running them. */
#define INLINE_WORKITEMS 64u
/* The agent dispatch type of copies (aql/copy.h). */
#define FN_COPY 0xffffu
/* Nice values between priorities: each step takes about a tenth of the
 * CPU share of the one above (sched/core.c sched_prio_to_weight). */
#define NICE_STEP 10

struct agent_function {
	uint16_t id;
	aql_agent_fn fn;
	void *user;
};

struct host_agent {
	struct aql_agent base;
	aql_host_agent_config config;
	struct aql_pool *pool;
	pthread_mutex_t functions_lock;
	struct agent_function *functions;
	uint32_t nfunctions;
};

struct processor {
	aql_signal stop;		/* 0 running, 1 stop requested */
	struct aql_queue_impl *q;
	struct host_agent *agent;
	struct aql_wg_exec *exec;
	pthread_t thread;
	struct aql_spin spin;		/* idle polls; the thread's own */
	/* The thread's id, 0 until it stored it; and its nice value then. */
	uint32_t tid;
	int base_nice;
	/* Its place in help_slots while parked, -1 if none; its own. */
	int help_slot;
};

/* WOULD_BLOCK: a barrier's condition was not met by the deadline, and
 * nothing of the packet ran. */
enum outcome { DONE, STOPPED, FAILED, WOULD_BLOCK };

/* Set on processor threads: they run only their own queue's packets. */
static __thread int on_processor;

static struct host_agent *host(aql_agent *agent)
{
	return (struct host_agent *)agent;
}

static int stopping(struct processor *p)
{
	return aql_signal_load(&p->stop, AQL_ACQUIRE) != 0;
}

/* Stop the queue on packet id, naming the reason; fail its signal. */
static enum outcome fail_packet(struct processor *p, uint64_t id,
				const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static enum outcome fail_packet(struct processor *p, uint64_t id,
				const char *fmt, ...)
{
	char reason[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	aql_queue_fail(p->q, AQL_ERR_QUEUE_ERROR, "packet %llu (slot %llu): %s",
		       (unsigned long long)id,
		       (unsigned long long)(id & p->q->pub.mask), reason);
	/* The processor runs nothing more: the work-groups of this packet, if
	 * any ran, have all returned. */
	aql_queue_halt(p->q);
	/* This packet's signal -1, and those of the packets behind it, which
	 * will not run either (as on the AMD agent): a recorded graph's
	 * replay signals only its last packet. */
	aql_queue_cancel_pending(p->q);
	return FAILED;
}

/*
 * Wait until any condition holds, the queue stops, or deadline_ns passes
 * (WOULD_BLOCK).
 * The stop signal is one more condition, so a destroy wakes a processor
 * blocked on a barrier. Producers asleep on a full ring are woken first:
 * a quarter ring's retirement woke only one of them, and the signal waited
 * for may be one that another would store after its submission.
 */
static enum outcome wait_or_stop(struct processor *p, struct aql_wait_cond *conds,
				 uint32_t n, uint64_t spin_ns, uint64_t deadline_ns)
{
	uint32_t index = 0;

	aql_queue_wake_space(p->q);
	conds[n] = (struct aql_wait_cond){ &p->stop, -1, 1, AQL_COND_EQ };
	if (aql_wait_conds(n + 1, conds, deadline_ns, spin_ns, &index, NULL) != AQL_OK)
		return WOULD_BLOCK;
	return index == n ? STOPPED : DONE;
}

static const char *validate_dispatch(struct processor *p, const aql_dispatch_packet *d,
				     char *buf, size_t len)
{
	const struct host_agent *a = p->agent;
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)d->kernel_object;
	const uint32_t *grid = &d->grid_size_x;
	const uint16_t *wg = &d->workgroup_size_x;
	uint32_t dims = d->setup & AQL_DISPATCH_DIMS_MASK;
	uint64_t items = 1;

	if (d->setup > 3 || dims == 0) {
		snprintf(buf, len, "setup 0x%x: grid dimensions must be 1, 2 or 3", d->setup);
		return buf;
	}
	for (uint32_t i = 0; i < 3; i++) {
		if (i < dims && (grid[i] == 0 || wg[i] == 0)) {
			snprintf(buf, len, "zero %s size in dimension %u",
				 grid[i] == 0 ? "grid" : "work-group", i);
			return buf;
		}
		if (i >= dims && (grid[i] != 1 || wg[i] != 1)) {
			snprintf(buf, len, "dimension %u is unused (grid has %u) but its grid size is %u and work-group size %u; both must be 1",
				 i, dims, grid[i], wg[i]);
			return buf;
		}
		items *= wg[i];
	}
	if (items > MAX_WORKGROUP) {
		snprintf(buf, len, "work-group of %llu work-items exceeds the agent maximum of %u",
			 (unsigned long long)items, MAX_WORKGROUP);
		return buf;
	}
	if (!kd)
		return "kernel_object is null";
	if (kd->magic != AQL_HOST_KD_MAGIC || !kd->entry) {
		snprintf(buf, len, "kernel_object %p is not a host kernel descriptor (magic 0x%x)",
			 (const void *)kd, kd->magic);
		return buf;
	}
	if (kd->max_flat_workgroup_size && items > kd->max_flat_workgroup_size) {
		snprintf(buf, len, "work-group of %llu work-items exceeds the kernel's maximum of %u",
			 (unsigned long long)items, kd->max_flat_workgroup_size);
		return buf;
	}
	if (d->kernarg_address % 16) {
		snprintf(buf, len, "kernarg_address 0x%llx is not 16-byte aligned",
			 (unsigned long long)d->kernarg_address);
		return buf;
	}
	if (!d->kernarg_address && kd->kernarg_size)
		return "kernarg_address is null but the kernel takes arguments";
	if (d->group_segment_size > a->config.max_group_segment_size ||
	    d->group_segment_size < kd->group_segment_fixed_size) {
		snprintf(buf, len, "group_segment_size %u is outside [%u, %u] (kernel's static size, agent limit)",
			 d->group_segment_size, kd->group_segment_fixed_size,
			 a->config.max_group_segment_size);
		return buf;
	}
	if (d->private_segment_size > MAX_PRIVATE ||
	    d->private_segment_size < kd->private_segment_fixed_size) {
		snprintf(buf, len, "private_segment_size %u is outside [%u, %u]",
			 d->private_segment_size, kd->private_segment_fixed_size, MAX_PRIVATE);
		return buf;
	}
	return NULL;
}

static enum outcome run_dispatch(struct processor *p, aql_packet *slot, uint64_t id)
{
	const aql_dispatch_packet *d = &slot->dispatch;
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)d->kernel_object;
	struct aql_job job;
	const char *bad;
	char buf[160];
	uint64_t groups;
	int fault = 0;

	bad = validate_dispatch(p, d, buf, sizeof(buf));
	if (bad)
		return fail_packet(p, id, "%s", bad);
	groups = (uint64_t)aql_wg_count(d->grid_size_x, d->workgroup_size_x) *
		 aql_wg_count(d->grid_size_y, d->workgroup_size_y) *
		 aql_wg_count(d->grid_size_z, d->workgroup_size_z);
	if (groups == 1 || (uint64_t)d->grid_size_x * d->grid_size_y * d->grid_size_z <=
				   INLINE_WORKITEMS) {
		for (uint64_t g = 0; g < groups; g++)
			fault |= aql_wg_run(p->exec, d, kd, g, id);
	} else {
		job = (struct aql_job){ .packet = d, .kd = kd, .dispatch_id = id,
					.total = groups };
		fault = aql_pool_run(p->agent->pool, p->exec, &job);
	}
	if (fault)
		return fail_packet(p, id, "kernel at %p called aql_host_barrier() although its descriptor has AQL_HOST_KD_NO_BARRIER, or a work-item stack could not be mapped",
				   (void *)(uintptr_t)kd->entry_address);
	return DONE;
}

/* The conditions of a barrier-AND/OR packet: one per non-null handle. */
static uint32_t barrier_deps(const aql_barrier_packet *b, struct aql_wait_cond *conds)
{
	uint32_t n = 0;

	for (int i = 0; i < 5; i++)
		if (b->dep_signal[i])
			conds[n++] = (struct aql_wait_cond){
				aql_signal_from_handle(b->dep_signal[i]), -1, 0, AQL_COND_EQ };
	return n;
}

static enum outcome run_barrier(struct processor *p, aql_packet *slot, uint64_t deadline_ns)
{
	const aql_barrier_packet *b = &slot->barrier;
	struct aql_wait_cond conds[6];
	uint32_t n = barrier_deps(b, conds);
	enum outcome out;

	if (aql_header_type(b->header) == AQL_PACKET_BARRIER_OR)
		return wait_or_stop(p, conds, n, AQL_WAIT_SPIN_NS, deadline_ns);
	/* AND: a null handle counts as satisfied; wait for each of the rest. */
	for (uint32_t i = 0; i < n; i++) {
		struct aql_wait_cond one[2] = { conds[i] };

		out = wait_or_stop(p, one, 1, AQL_WAIT_SPIN_NS, deadline_ns);
		if (out != DONE)
			return out;
	}
	return DONE;
}

/* The condition of a BARRIER_VALUE packet into *c; 0 if it is malformed. */
static int barrier_value_cond(const aql_barrier_value_packet *b, struct aql_wait_cond *c)
{
	if (!b->signal || b->cond > AQL_COND_GTE)
		return 0;
	*c = (struct aql_wait_cond){ aql_signal_from_handle(b->signal), b->mask, b->value,
				     (enum aql_signal_condition)b->cond };
	return 1;
}

static enum outcome run_barrier_value(struct processor *p, aql_packet *slot, uint64_t id,
				      uint64_t deadline_ns)
{
	const aql_barrier_value_packet *b = &slot->barrier_value;
	struct aql_wait_cond conds[2];

	if (!barrier_value_cond(b, conds))
		return b->signal ? fail_packet(p, id, "BARRIER_VALUE condition %u is unknown", b->cond)
				 : fail_packet(p, id, "BARRIER_VALUE packet has a null signal");
	return wait_or_stop(p, conds, 1, AQL_WAIT_SPIN_NS, deadline_ns);
}

/* The function registered for an agent dispatch type; fn NULL if none. */
static struct agent_function find_function(struct host_agent *agent, uint16_t type)
{
	struct agent_function f = { 0 };

	pthread_mutex_lock(&agent->functions_lock);
	for (uint32_t i = 0; i < agent->nfunctions; i++)
		if (agent->functions[i].id == type)
			f = agent->functions[i];
	pthread_mutex_unlock(&agent->functions_lock);
	return f;
}

static enum outcome run_agent_function(struct processor *p, aql_packet *slot, uint64_t id)
{
	const aql_agent_dispatch_packet *a = &slot->agent;
	struct agent_function f;

	if (a->type == FN_COPY) {
		memcpy((void *)(uintptr_t)a->arg[0], (const void *)(uintptr_t)a->arg[1],
		       (size_t)a->arg[2]);
		return DONE;
	}
	f = find_function(p->agent, a->type);
	if (!f.fn)
		return fail_packet(p, id, "no function is registered for agent dispatch type %u",
				   a->type);
	f.fn(a->arg, a->return_address, f.user);
	return DONE;
}

/* deadline_ns bounds a barrier's wait (WOULD_BLOCK after it). */
static enum outcome run_packet(struct processor *p, aql_packet *slot, uint16_t header,
			       uint64_t id, uint64_t deadline_ns)
{
	switch (aql_header_type(header)) {
	case AQL_PACKET_KERNEL_DISPATCH:
		return run_dispatch(p, slot, id);
	case AQL_PACKET_BARRIER_AND:
	case AQL_PACKET_BARRIER_OR:
		return run_barrier(p, slot, deadline_ns);
	case AQL_PACKET_AGENT_DISPATCH:
		return run_agent_function(p, slot, id);
	case AQL_PACKET_VENDOR_SPECIFIC:
		if (slot->barrier_value.header.format == AQL_AMD_PACKET_BARRIER_VALUE)
			return run_barrier_value(p, slot, id, deadline_ns);
		return fail_packet(p, id, "vendor packet format %u is unknown",
				   slot->barrier_value.header.format);
	default:
		return fail_packet(p, id, "packet type %u is unknown",
				   (unsigned)aql_header_type(header));
	}
}

/* Launch, run and retire the valid packet at id (a barrier waits until
 * deadline_ns: WOULD_BLOCK, and nothing retired). */
static enum outcome process(struct processor *p, aql_packet *slot, uint16_t header,
			    uint64_t id, uint64_t deadline_ns)
{
	uint64_t start = 0, handle;
	enum outcome out;
	aql_signal *signal;
	/* Read per packet, as a CP reads it: the HSA layer's
	 * hsa_amd_profiling_set_profiler_enabled() flips it on a live queue. */
	int profiling = __atomic_load_n(&p->q->pub.amd->queue_properties, __ATOMIC_RELAXED) &
			AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING;

	/* Any acquire scope is already met: the header and every dependency
	 * signal are loaded with acquire order, and host memory is coherent. */
	if (profiling)
		start = aql_now_ns();
	out = run_packet(p, slot, header, id, deadline_ns);
	if (out != DONE)
		return out;
	handle = slot->dispatch.completion_signal;
	aql_queue_finish(slot);
	/* Retire before the completion, as a command processor moves its read
	 * pointer when it takes a packet: a program that saw the completion
	 * then finds the read index past it (HSA programs check it). */
	aql_queue_retire(p->q, id);
	if (handle) {
		signal = aql_signal_from_handle(handle);
		/* Atomic: packets of several queues may share the signal. */
		if (profiling) {
			__atomic_store_n(&signal->start_ts, start, __ATOMIC_RELAXED);
			__atomic_store_n(&signal->end_ts, aql_now_ns(), __ATOMIC_RELAXED);
		}
		/* The release fence scope becomes the decrement's order. */
		aql_signal_sub(signal, 1, aql_header_release(header) != AQL_FENCE_NONE
						  ? AQL_RELEASE : AQL_RELAXED);
	}
	return DONE;
}

/*
 * Helpers that run packets. Beside busy threads a parked processor, once
 * woken, waits for a CPU, and so does the thread that waits for its
 * packet: two wake-ups per packet. Instead, a thread that waits for
 * signal S (a wait helper, aql/signal.c) runs the packet at the head of a
 * parked processor's queue itself when S is that packet's completion
 * signal, with the processor's own code (process()). A producer that
 * waits for room in the ring (aql_agent_ops.queue_make_room) runs the
 * packets at the head the same way, as many as the room it waits for:
 * otherwise it would wait, the ring full, for the woken processor to get
 * a CPU, up to a time slice.
 *
 * Claims: a parked processor puts itself in a free help slot (release
 * CAS 0 -> p) and takes it back when it runs again (acquire CAS p -> 0).
 * A helper claims a slot with an acquire CAS p -> p | HELD and lets go
 * with a store of p; while it holds it, it is the queue's processor: it
 * reads and advances read_dispatch_id, which is the processor's packet id
 * (the processor reloads it when it takes its slot back). Each claim
 * synchronises with the one before it, so the owners' accesses to the
 * queue are ordered as one thread's. A processor that finds its slot held
 * sleeps on the slot's released word: it marks reclaiming, reads the
 * word, then the owner (all seq_cst); the helper stores the owner, then
 * reads reclaiming (seq_cst): one of them sees the other. The slots are
 * static, so a helper never touches a processor it has not claimed: a
 * processor cannot leave (nor its queue go) while a helper holds its slot.
 * The processor's own per-packet path does none of this.
 *
 * A waiter runs only packets whose completion signal it waits for (and
 * those without one ahead of them), a producer only those before the room
 * it waits for, from the head, and only those that would run at once: no
 * barrier whose condition is unmet (it must not block), no malformed
 * packet (the processor fails it, so the error callback runs on a runtime
 * thread, as without help). Not from a kernel (a helper inside a
 * work-item would nest work-groups) nor a processor thread, nor when the
 * wait's deadline is under HELP_MIN_LEFT_NS away: a short timed wait is a
 * poll, and its caller may do what the packet needs once it returns.
 */
/* A processor that finds every slot taken parks unhelped, as before. */
#define HELP_SLOTS 64
#define HELD ((uintptr_t)1)
#define HELP_MIN_LEFT_NS 1000000u
/* A processor polls its held slot this often (a few microseconds) before
 * it sleeps on it. */
#define RECLAIM_POLLS 256u

struct help_slot {
	uintptr_t owner;	/* 0 free, p parked, p | HELD claimed */
	/* The parked processor's queue, for producers to find it: a hint
	 * (relaxed), checked once the slot is claimed. */
	struct aql_queue_impl *queue;
	int cpu;		/* the CPU it parked on; a hint too */
	uint32_t released;	/* futex sequence, bumped when a helper lets go */
	uint32_t reclaiming;	/* the processor waits for the slot; its own */
} __attribute__((aligned(64)));

static struct help_slot help_slots[HELP_SLOTS];
/* Slots [0, help_end) have been used. Relaxed: a waiter that misses a
 * processor that just parked only leaves the packet to it. */
static uint32_t help_end;
static int helper_registered;

/* A parked processor offers its queue's head to waiters and producers. */
static void open_to_helpers(struct processor *p)
{
	uint32_t end = __atomic_load_n(&help_end, __ATOMIC_RELAXED);

	p->help_slot = -1;
	if (p->agent->config.no_wait_help || !helper_registered)
		return;
	for (uint32_t i = 0; i < HELP_SLOTS; i++) {
		uintptr_t none = 0;

		if (__atomic_load_n(&help_slots[i].owner, __ATOMIC_RELAXED) ||
		    !__atomic_compare_exchange_n(&help_slots[i].owner, &none, (uintptr_t)p, 0,
						 __ATOMIC_RELEASE, __ATOMIC_RELAXED))
			continue;
		p->help_slot = (int)i;
		__atomic_store_n(&help_slots[i].queue, p->q, __ATOMIC_RELAXED);
		__atomic_store_n(&help_slots[i].cpu, sched_getcpu(), __ATOMIC_RELAXED);
		while (end <= i && !__atomic_compare_exchange_n(&help_end, &end, i + 1, 0,
								__ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
		return;
	}
}

/* The processor runs again: take its slot back, waiting for a helper that
 * holds it. Returns the id of the next packet, past those helpers ran. */
static uint64_t close_to_helpers(struct processor *p, uint64_t id)
{
	struct help_slot *s;
	uintptr_t me = (uintptr_t)p, owner;
	uint32_t seq;

	if (p->help_slot < 0)
		return id;
	s = &help_slots[p->help_slot];
	for (uint32_t polls = 0;; polls++) {
		owner = me;
		if (__atomic_compare_exchange_n(&s->owner, &owner, 0, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
		/* A waiter's packet is often short: poll before the sleep that
		 * would cost the waiter a FUTEX_WAKE when it lets go. */
		if (polls < RECLAIM_POLLS) {
			aql_cpu_relax();
			continue;
		}
		__atomic_store_n(&s->reclaiming, 1, __ATOMIC_SEQ_CST);
		seq = __atomic_load_n(&s->released, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->owner, __ATOMIC_SEQ_CST) == (me | HELD))
			aql_futex_wait(&s->released, seq, UINT64_MAX);
		__atomic_store_n(&s->reclaiming, 0, __ATOMIC_RELAXED);
	}
	/* Written by this thread or by a waiter whose release the CAS read. */
	return __atomic_load_n(&p->q->pub.amd->read_dispatch_id, __ATOMIC_RELAXED);
}

static int waited_for(uint64_t handle, uint32_t n, aql_signal *const *signals)
{
	for (uint32_t i = 0; handle && i < n; i++)
		if (aql_signal_handle(signals[i]) == handle)
			return 1;
	return 0;
}

/* Would the valid packet in slot run to its end at once, without error? */
static int runs_at_once(struct processor *p, const aql_packet *slot, uint16_t header)
{
	struct aql_wait_cond conds[6];
	char buf[160];
	uint32_t n, met = 0;
	int64_t v;

	switch (aql_header_type(header)) {
	case AQL_PACKET_KERNEL_DISPATCH:
		return !validate_dispatch(p, &slot->dispatch, buf, sizeof(buf));
	case AQL_PACKET_AGENT_DISPATCH:
		return slot->agent.type == FN_COPY ||
		       find_function(p->agent, slot->agent.type).fn != NULL;
	case AQL_PACKET_BARRIER_AND:
	case AQL_PACKET_BARRIER_OR:
		n = barrier_deps(&slot->barrier, conds);
		break;
	case AQL_PACKET_VENDOR_SPECIFIC:
		n = slot->barrier_value.header.format == AQL_AMD_PACKET_BARRIER_VALUE &&
		    barrier_value_cond(&slot->barrier_value, conds);
		if (!n)
			return 0;
		break;
	default:
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		v = __atomic_load_n(&conds[i].signal->value, __ATOMIC_RELAXED);
		met += aql_signal_condition_met(conds[i].cond, v & conds[i].mask,
						conds[i].compare);
	}
	/* OR: one met (none given: never); AND and BARRIER_VALUE: all. */
	return aql_header_type(header) == AQL_PACKET_BARRIER_OR ? met > 0 : met == n;
}

/*
 * What a helper that holds p's slot runs from the head: for a waiter the
 * packets that complete the n signals it waits for, and those without a
 * completion signal ahead of them (they must run first: a recorded
 * graph's replay signals only its last packet); for a producer (queue
 * set) those before id until, if the slot's processor is queue's.
 */
struct help_want {
	uint32_t n;
	aql_signal *const *signals;
	const struct aql_queue_impl *queue;
	uint64_t until;
};

/* How far a waiter looks past the head for its own packets. */
#define HELP_SCAN 64u

/* The id past the last packet from id on that a waiter may run: published
 * packets without a completion signal, then its own, up to the first that
 * is neither. */
static uint64_t waiter_until(aql_queue *q, uint64_t id, const struct help_want *want)
{
	uint64_t start = id, until = id, end = id + (q->size < HELP_SCAN ? q->size : HELP_SCAN);

	for (; id < end; id++) {
		aql_packet *slot = aql_queue_slot(q, id);
		uint64_t handle;

		if (aql_header_type(__atomic_load_n(&slot->header, __ATOMIC_ACQUIRE)) ==
		    AQL_PACKET_INVALID)
			break;
		handle = slot->dispatch.completion_signal;
		if (waited_for(handle, want->n, want->signals))
			until = id + 1;
		else if (handle || until != start)
			break;
	}
	return until;
}

/* A helper holds p's slot: run what it wants. Nonzero if it ran one. */
static int run_for_helper(struct processor *p, const struct help_want *want)
{
	struct aql_queue_impl *q = p->q;
	uint64_t id = __atomic_load_n(&q->pub.amd->read_dispatch_id, __ATOMIC_RELAXED);
	uint64_t until = want->queue ? want->until : waiter_until(&q->pub, id, want);
	enum outcome out = DONE;
	int ran = 0;

	while (out == DONE && id < until && !stopping(p) &&
	       !__atomic_load_n(&q->halted, __ATOMIC_RELAXED)) {
		aql_packet *slot = aql_queue_slot(&q->pub, id);
		uint16_t header = __atomic_load_n(&slot->header, __ATOMIC_ACQUIRE);

		if (aql_header_type(header) == AQL_PACKET_INVALID || !runs_at_once(p, slot, header))
			break;
		/* A barrier whose condition changed since: WOULD_BLOCK, at once. */
		out = process(p, slot, header, id++, 0);
		ran |= out == DONE || out == FAILED;
	}
	/* As the processor does when it runs out of packets. */
	if (ran)
		aql_queue_wake_space(q);
	return ran;
}

/* Whether this thread may help, with a wait or room wait ending at
 * deadline_ns; the clock is read only when it is finite. */
static int may_help(uint64_t deadline_ns)
{
	if (on_processor || aql_host_workitem_current())
		return 0;
	return deadline_ns == UINT64_MAX || deadline_ns >= aql_now_ns() + HELP_MIN_LEFT_NS;
}

/*
 * Claim slot s, parked by owner, run what want names, and let go: 1 if it
 * ran a packet, 0 if none would run, -1 if the claim failed (another
 * helper, the processor back) or a producer's queue hint was stale.
 */
static int help_once(struct help_slot *s, uintptr_t owner, const struct help_want *want)
{
	struct processor *p = (struct processor *)owner;
	int ran = -1;

	if (!__atomic_compare_exchange_n(&s->owner, &owner, owner | HELD, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return -1;
	if (!want->queue || p->q == want->queue)
		ran = run_for_helper(p, want);
	__atomic_store_n(&s->owner, owner, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->reclaiming, __ATOMIC_SEQ_CST))
		aql_futex_bump_and_wake(&s->released);
	return ran;
}

static int help_waiter(const struct aql_wait_helper *helper, uint32_t n,
		       aql_signal *const *signals)
{
	uint32_t end = __atomic_load_n(&help_end, __ATOMIC_RELAXED);
	const struct help_want want = { n, signals, NULL, 0 };
	int ran = 0, checked = 0;

	(void)helper;
	for (uint32_t i = 0; i < end; i++) {
		struct help_slot *s = &help_slots[i];
		uintptr_t owner = __atomic_load_n(&s->owner, __ATOMIC_RELAXED);

		if (!owner || (owner & HELD))
			continue;
		/* The clock only once a processor is parked. */
		if (!checked++ && !may_help(aql_wait_helper_deadline()))
			return 0;
		ran |= help_once(s, owner, &want) > 0;
	}
	return ran;
}

/*
 * A producer waits for room in q's ring (aql_agent_ops.queue_make_room)
 * while q's processor is parked, or woken and not yet running. On another
 * CPU, the woken processor waits there for a CPU (beside a busy thread, a
 * time slice): the producer runs the packets at the head itself, as a
 * waiter does, so that they do not wait for it. On the producer's own CPU
 * the woken processor preempts the producer (its short slice) and runs
 * them with nothing moving between caches; were the producer to run them
 * instead, the two would take turns, the processor polling for packets
 * that the producer cannot write meanwhile. So there the producer waits
 * ROOM_HELP_AFTER_NS first (a processor of a lower priority may not
 * preempt it), and then goes on helping at once while the processor
 * stays parked.
 */
#define ROOM_HELP_AFTER_NS 100000u

/* The queue this thread ran packets of when it last asked; its own. */
static __thread const struct aql_queue_impl *room_helped;

/* 1 ran packets, 0 runs none, -1 ask again soon (queue_make_room). */
static int make_room(aql_agent *agent, struct aql_queue_impl *q, uint64_t until,
		     uint64_t waited_ns, uint64_t deadline_ns)
{
	uint32_t end = __atomic_load_n(&help_end, __ATOMIC_RELAXED), i;
	const struct help_want want = { 0, NULL, q, until };
	struct help_slot *s = NULL;
	uintptr_t owner = 0;
	int made = 0;

	(void)agent;
	for (i = 0; i < end && !s; i++)
		if ((owner = __atomic_load_n(&help_slots[i].owner, __ATOMIC_RELAXED)) &&
		    __atomic_load_n(&help_slots[i].queue, __ATOMIC_RELAXED) == q)
			s = &help_slots[i];
	if (s && may_help(deadline_ns)) {
		/* Held by another helper, or parked on this CPU not long
		 * ago: the room may come soon, or the claim later. */
		if ((owner & HELD) ||
		    (waited_ns < ROOM_HELP_AFTER_NS && room_helped != q &&
		     __atomic_load_n(&s->cpu, __ATOMIC_RELAXED) == sched_getcpu()))
			made = -1;
		else
			made = help_once(s, owner, &want);
	}
	room_helped = made > 0 ? q : NULL;
	return made;
}

static const struct aql_wait_helper host_helper = { help_waiter };
static pthread_once_t helper_once = PTHREAD_ONCE_INIT;

static void register_helper(void)
{
	/* Without it no processor offers its packets; nothing else changes. */
	helper_registered = aql_wait_helper_register(&host_helper) == AQL_OK;
}

/*
 * The slot for packet id is INVALID: poll it for up to idle_spin_ns (less
 * after waits that outlasted it: util/spin.h), then sleep on the doorbell.
 * The doorbell value is read before the header is checked again, so a
 * ring after that check changes the value and ends the sleep.
 * If id was already rung, its producer is still writing it (or rang ahead,
 * which HSA allows): nothing more will change the doorbell, so the
 * processor keeps polling, in short sleeps, as a command processor stalls.
 */
#define ANNOUNCED_POLL_NS 100000u

/* Returns the id of the next packet: waiters may have run some meanwhile. */
static uint64_t wait_for_packet(struct processor *p, aql_packet *slot, uint64_t id)
{
	aql_signal *db = p->q->pub.doorbell;
	uint64_t max = p->agent->config.idle_spin_ns, start = aql_now_ns();
	uint64_t end = start + aql_spin_budget(&p->spin, max), now = start;
	struct aql_wait_cond conds[2];
	int64_t rung;

	aql_queue_wake_space(p->q);
	for (uint32_t i = 1;; i++) {
		if (aql_header_type(__atomic_load_n(&slot->header, __ATOMIC_ACQUIRE)) !=
		    AQL_PACKET_INVALID || stopping(p))
			goto out;
		/* The clock is read on the first poll and every 64th after it,
		 * so even a tiny budget is kept. */
		if ((i & 63) == 1 && (now = aql_now_ns()) >= end)
			break;
		aql_cpu_relax();
	}
	rung = aql_signal_load(db, AQL_ACQUIRE);
	conds[0] = (struct aql_wait_cond){ db, -1, rung, AQL_COND_NE };
	if (aql_header_type(__atomic_load_n(&slot->header, __ATOMIC_ACQUIRE)) ==
	    AQL_PACKET_INVALID) {
		open_to_helpers(p);
		wait_or_stop(p, conds, 1, 0,
			     rung >= (int64_t)id ? aql_deadline(ANNOUNCED_POLL_NS) : UINT64_MAX);
		id = close_to_helpers(p, id);
	}
	now = aql_now_ns();
out:
	aql_spin_learn(&p->spin, max, now - start);
	return id;
}

/*
 * Ask for short time slices (Linux 6.12+: sched_attr.sched_runtime of a
 * fair thread is its EEVDF slice request, kernel/sched/syscalls.c).
 * Beside a busy thread a woken processor with the default slice waits for
 * that thread's slice to run out, up to a tick or more; one whose slice is
 * shorter preempts it at once (PREEMPT_SHORT), and its share of the CPU is
 * unchanged. Only a SCHED_OTHER or SCHED_BATCH thread (as inherited from
 * its creator) asks, keeping its policy, nice value and flags; a shorter
 * request is kept. Older kernels ignore sched_runtime there. Threads a
 * kernel starts on the processor inherit the slice.
 */
#define PROCESSOR_SLICE_NS 100000u

/* The kernel's struct sched_attr as of SCHED_ATTR_SIZE_VER0 (48 bytes):
 * <linux/sched/types.h> clashes with <sched.h>. */
struct processor_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;
	uint64_t sched_deadline;
	uint64_t sched_period;
};

static void ask_short_slices(void)
{
	struct processor_sched_attr attr;

	if (syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0) ||
	    (attr.sched_policy != SCHED_OTHER && attr.sched_policy != SCHED_BATCH) ||
	    (attr.sched_runtime && attr.sched_runtime <= PROCESSOR_SLICE_NS))
		return;
	attr.size = sizeof(attr);
	attr.sched_runtime = PROCESSOR_SLICE_NS;
	syscall(SYS_sched_setattr, 0, &attr, 0);
}

static void *processor_main(void *arg)
{
	struct processor *p = arg;
	aql_queue *q = &p->q->pub;
	uint64_t id = q->amd->read_dispatch_id;
	struct aql_wait_cond none[1];

	on_processor = 1;
	ask_short_slices();
	__atomic_store_n(&p->tid, (uint32_t)gettid(), __ATOMIC_RELEASE);
	aql_futex_wake_all(&p->tid);
	while (!stopping(p)) {
		aql_packet *slot = aql_queue_slot(q, id);
		uint16_t header = __atomic_load_n(&slot->header, __ATOMIC_ACQUIRE);

		if (aql_header_type(header) == AQL_PACKET_INVALID) {
			id = wait_for_packet(p, slot, id);
			/* A packet a waiter ran may have failed at run time. */
			if (__atomic_load_n(&p->q->halted, __ATOMIC_RELAXED))
				goto dead;
			continue;
		}
		switch (process(p, slot, header, id, UINT64_MAX)) {
		case DONE:
			id++;
			break;
		case FAILED:
			goto dead;
		default:	/* STOPPED: no deadline, so never WOULD_BLOCK */
			return NULL;
		}
	}
	return NULL;
dead:
	/* The queue is dead; sleep until it is destroyed. */
	wait_or_stop(p, none, 0, 0, UINT64_MAX);
	return NULL;
}

static int nice_of(const struct processor *p, enum aql_queue_priority priority)
{
	int nice = p->base_nice + (priority == AQL_QUEUE_PRIORITY_LOW ? NICE_STEP :
				   priority == AQL_QUEUE_PRIORITY_HIGH ? -NICE_STEP : 0);

	return nice < -20 ? -20 : nice > 19 ? 19 : nice;
}

/* Move the processor thread from one priority's nice value to another's. */
static aql_status renice(struct processor *p, enum aql_queue_priority from,
			 enum aql_queue_priority to)
{
	unsigned long long id = p->q->pub.amd->hsa.id;
	int old = nice_of(p, from), nice = nice_of(p, to);

	if (setpriority(PRIO_PROCESS, (id_t)p->tid, nice) == 0)
		return AQL_OK;
	/* sys.c set_one_prio: a lower value without can_nice() is EACCES. */
	if (errno == EACCES || errno == EPERM)
		return aql_fail(AQL_ERR_SYSTEM, "CPU agent: queue %llu's packet processor from "
				"nice %d to %d: raising a queue's priority needs CAP_SYS_NICE or "
				"an RLIMIT_NICE allowance", id, old, nice);
	return aql_fail_errno(AQL_ERR_SYSTEM, errno, "CPU agent: nice %d for queue %llu's "
			      "packet processor", nice, id);
}

static aql_status queue_set_priority(aql_agent *agent, struct aql_queue_impl *q,
				     enum aql_queue_priority priority)
{
	(void)agent;
	return renice(q->agent_state, q->priority, priority);
}

/* The processor's thread id, once it has stored it, and its nice value. */
static void await_tid(struct processor *p)
{
	while (!__atomic_load_n(&p->tid, __ATOMIC_ACQUIRE))
		aql_futex_wait(&p->tid, 0, UINT64_MAX);
	errno = 0;
	p->base_nice = getpriority(PRIO_PROCESS, (id_t)p->tid);
	/* -1 is a nice value too; only errno tells a failure (then the
	 * thread inherited the caller's). */
	if (errno)
		p->base_nice = getpriority(PRIO_PROCESS, 0);
}

static void stop_processor(struct processor *p)
{
	aql_signal_store(&p->stop, 1, AQL_RELEASE);
	pthread_join(p->thread, NULL);
	aql_wg_exec_destroy(p->exec);
	free(p);
}

static aql_status queue_attach(aql_agent *agent, struct aql_queue_impl *q)
{
	struct processor *p;
	char name[16];
	aql_status st;
	int err;

	if (posix_memalign((void **)&p, 64, sizeof(*p)))
		return aql_fail(AQL_ERR_NOMEM, "CPU agent: no memory for a packet processor");
	*p = (struct processor){ .q = q, .agent = host(agent), .help_slot = -1 };
	p->stop.kind = AQL_SIGNAL_KIND_USER;
	st = aql_wg_exec_create(MAX_WORKGROUP, &p->exec);
	if (st != AQL_OK) {
		free(p);
		return st;
	}
	q->agent_state = p;
	err = pthread_create(&p->thread, NULL, processor_main, p);
	if (err) {
		aql_wg_exec_destroy(p->exec);
		free(p);
		return aql_fail_errno(AQL_ERR_SYSTEM, err, "CPU agent: starting the packet processor");
	}
	snprintf(name, sizeof(name), "aql-cpu-q%llu", (unsigned long long)q->pub.amd->hsa.id);
	pthread_setname_np(p->thread, name);
	await_tid(p);
	if (q->priority != AQL_QUEUE_PRIORITY_NORMAL) {
		st = renice(p, AQL_QUEUE_PRIORITY_NORMAL, q->priority);
		if (st != AQL_OK) {
			stop_processor(p);
			q->agent_state = NULL;
			return st;
		}
	}
	return AQL_OK;
}

static void queue_detach(aql_agent *agent, struct aql_queue_impl *q)
{
	(void)agent;
	stop_processor(q->agent_state);
	q->agent_state = NULL;
}

#if defined(__x86_64__)
#define HOST_ISA "x86_64"
#elif defined(__aarch64__)
#define HOST_ISA "aarch64"
#elif defined(__riscv) && __riscv_xlen == 64
#define HOST_ISA "riscv64"
#else
#define HOST_ISA "host"
#endif

static void get_info(aql_agent *agent, aql_agent_info *info)
{
	struct host_agent *a = host(agent);

	*info = (aql_agent_info){
		.name = "aql-cpu",
		.kind = AQL_AGENT_CPU,
		.compute_units = a->config.workers,
		.max_workgroup_size = MAX_WORKGROUP,
		.max_workgroup_dim = { MAX_WORKGROUP, MAX_WORKGROUP, MAX_WORKGROUP },
		.max_group_segment_size = a->config.max_group_segment_size,
		.max_private_segment_size = MAX_PRIVATE,
		.max_queue_size = MAX_QUEUE_SIZE,
		.queue_features = 3,	/* kernel dispatch | agent dispatch */
		.numa_node = -1,	/* workers run on every CPU */
		.unified_memory = !a->config.separate_memory,
		.signal_path = AQL_SIGNAL_PATH_HOST,
		.wakes_host = 1,
		.wavefront_size = 1,	/* work-items are fibers, one at a time */
		.max_grid_dim = { UINT32_MAX, UINT32_MAX, UINT32_MAX },
		.default_group_segment_size = a->config.max_group_segment_size,
		.isa = HOST_ISA,
	};
}

static aql_status register_function(aql_agent *agent, uint16_t id, aql_agent_fn fn,
				    void *user)
{
	struct host_agent *a = host(agent);
	struct agent_function *grown;
	uint32_t i;

	pthread_mutex_lock(&a->functions_lock);
	for (i = 0; i < a->nfunctions && a->functions[i].id != id; i++)
		;
	if (i == a->nfunctions && fn) {
		grown = realloc(a->functions, (i + 1) * sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&a->functions_lock);
			return aql_fail(AQL_ERR_NOMEM, "CPU agent: no memory to register function %u", id);
		}
		a->functions = grown;
		a->nfunctions++;
	}
	if (fn)
		a->functions[i] = (struct agent_function){ id, fn, user };
	else if (i < a->nfunctions)
		a->functions[i] = a->functions[--a->nfunctions];
	pthread_mutex_unlock(&a->functions_lock);
	return AQL_OK;
}

static void destroy(aql_agent *agent)
{
	struct host_agent *a = host(agent);

	aql_pool_destroy(a->pool);
	pthread_mutex_destroy(&a->functions_lock);
	free(a->functions);
	free(a);
}

/*
 * Host code objects run here, so their memory ends up executable. AMDGPU
 * code objects are placed and relocated in host memory as well, which lets
 * the loader run end to end without a GPU; dispatching one fails on its
 * descriptor's magic.
 */
static aql_status code_alloc(aql_agent *agent, enum aql_code_object_kind kind,
			     size_t size, void **out)
{
	(void)agent;
	(void)kind;
	return aql_host_mem_alloc(size, (size_t)sysconf(_SC_PAGESIZE), out);
}

static aql_status code_protect(aql_agent *agent, void *addr, size_t size, int prot)
{
	(void)agent;
	if (mprotect(addr, size, prot) != 0)
		return aql_fail_errno(AQL_ERR_SYSTEM, errno,
				      "mprotect(%p, %zu) for a code object", addr, size);
	return AQL_OK;
}

static void code_free(aql_agent *agent, void *base, size_t size)
{
	(void)agent;
	aql_host_mem_free(base, size);
}

/* Agent memory is ordinary host memory, from the coarse-grained data pool:
 * the agent sees it coherent only at packet boundaries, as a GPU's VRAM. */
static aql_status mem_alloc(aql_agent *agent, size_t size, void **out)
{
	aql_mem_pool *pool;
	aql_status st;

	(void)agent;
	st = aql_mem_pool_data(AQL_MEM_COARSE_GRAINED, &pool);
	if (st == AQL_OK)
		st = aql_mem_alloc(pool, size, 256, out);
	if (st == AQL_OK)
		memset(*out, 0, size);
	return st;
}

static void mem_free(aql_agent *agent, void *ptr)
{
	(void)agent;
	aql_mem_free(ptr);
}

static aql_status copy(aql_agent *agent, void *dst, const void *src, size_t size)
{
	(void)agent;
	memmove(dst, src, size);
	return AQL_OK;
}

/* A copy is an agent dispatch of a reserved type that the processor runs
 * itself, so that it keeps its place among the queue's packets. */
static aql_status encode_copy(aql_agent *agent, aql_packet *packet, void *dst,
			      const void *src, size_t size, void *args)
{
	(void)agent, (void)args;
	memset(packet, 0, sizeof(*packet));
	packet->header = aql_timeline_header(AQL_PACKET_AGENT_DISPATCH);
	packet->agent.type = FN_COPY;
	packet->agent.arg[0] = (uint64_t)(uintptr_t)dst;
	packet->agent.arg[1] = (uint64_t)(uintptr_t)src;
	packet->agent.arg[2] = size;
	return AQL_OK;
}

/*
 * Atomics made in libaql for host builds that synchronise with host
 * threads through memory alone (the resident CUDA processor's host build,
 * nv/resident_kernel.c): a host code object is not instrumented, so a
 * sanitizer sees its synchronisation only when libaql makes it.
 */
static uint64_t host_sync_load(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void host_sync_store(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static uint64_t host_sync_add(uint64_t *p, uint64_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

static uint32_t host_sync_add32(uint32_t *p, uint32_t v)
{
	return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

static uint64_t host_sync_cas(uint64_t *p, uint64_t expected, uint64_t desired)
{
	__atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
	return expected;
}

/* What the CPU agent lends to kernels in host code objects. */
static const aql_symbol_binding host_builtins[] = {
	{ "aql_host_sync_load", (uint64_t)(uintptr_t)host_sync_load },
	{ "aql_host_sync_store", (uint64_t)(uintptr_t)host_sync_store },
	{ "aql_host_sync_add", (uint64_t)(uintptr_t)host_sync_add },
	{ "aql_host_sync_add32", (uint64_t)(uintptr_t)host_sync_add32 },
	{ "aql_host_sync_cas", (uint64_t)(uintptr_t)host_sync_cas },
	{ "aql_host_workitem_current", (uint64_t)(uintptr_t)aql_host_workitem_current },
	{ "aql_host_barrier", (uint64_t)(uintptr_t)aql_host_barrier },
	{ "aql_channel_host_wake", (uint64_t)(uintptr_t)aql_channel_host_wake },
	{ "aql_channel_host_wait_room", (uint64_t)(uintptr_t)aql_channel_host_wait_room },
	{ "aql_channel_host_pause", (uint64_t)(uintptr_t)aql_channel_host_pause },
	{ "memcpy", (uint64_t)(uintptr_t)memcpy },
	{ "memmove", (uint64_t)(uintptr_t)memmove },
	{ "memset", (uint64_t)(uintptr_t)memset },
};

static const aql_symbol_binding *builtins(aql_agent *agent, enum aql_code_object_kind kind,
					  uint32_t *count)
{
	(void)agent;
	*count = kind == AQL_CODE_OBJECT_HOST ?
		 (uint32_t)(sizeof(host_builtins) / sizeof(*host_builtins)) : 0;
	return host_builtins;
}

static const struct aql_agent_ops host_agent_ops = {
	.get_info = get_info,
	.queue_attach = queue_attach,
	.queue_detach = queue_detach,
	.queue_set_priority = queue_set_priority,
	.queue_make_room = make_room,
	.register_function = register_function,
	.destroy = destroy,
	.code_alloc = code_alloc,
	.code_protect = code_protect,
	.code_free = code_free,
	.mem_alloc = mem_alloc,
	.mem_free = mem_free,
	.copy = copy,
	.encode_copy = encode_copy,
	.builtins = builtins,
};

/*
 * The default worker count: the CPUs the calling thread may run on, as
 * nproc counts them. An MPI rank bound to one core (Open MPI's default
 * for a few ranks, MPICH's -bind-to core), or a program under taskset or
 * a cpuset, would otherwise start a worker per online CPU, all of them
 * taking turns on the CPUs it has; the threads the agent starts inherit
 * that mask. Every online CPU where the mask cannot be read.
 */
static uint32_t default_workers(void)
{
	cpu_set_t set;
	long cpus;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (uint32_t)CPU_COUNT(&set);
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus < 1 ? 1 : cpus > MAX_WORKERS ? MAX_WORKERS : (uint32_t)cpus;
}

aql_status aql_host_agent_create(const aql_host_agent_config *config, aql_agent **out)
{
	aql_host_agent_config c = config ? *config : (aql_host_agent_config){ 0 };
	struct host_agent *a;
	aql_status st;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_host_agent_create: out is NULL");
	if (c.workers == 0)
		c.workers = default_workers();
	if (c.workers > MAX_WORKERS)
		return aql_fail(AQL_ERR_INVALID_ARG, "CPU agent: %u workers requested, at most %u",
				c.workers, MAX_WORKERS);
	if (c.idle_spin_ns == 0)
		c.idle_spin_ns = DEFAULT_IDLE_SPIN_NS;
	if (c.max_group_segment_size == 0)
		c.max_group_segment_size = DEFAULT_GROUP_SEGMENT;
	pthread_once(&helper_once, register_helper);
	a = calloc(1, sizeof(*a));
	if (!a)
		return aql_fail(AQL_ERR_NOMEM, "CPU agent: no memory");
	a->base.ops = &host_agent_ops;
	a->config = c;
	pthread_mutex_init(&a->functions_lock, NULL);
	/* The processor of the dispatching queue is one of the workers. */
	st = aql_pool_create(c.workers - 1, MAX_WORKGROUP, &a->pool);
	if (st != AQL_OK) {
		pthread_mutex_destroy(&a->functions_lock);
		free(a);
		return st;
	}
	*out = &a->base;
	return AQL_OK;
}

static aql_status open_default(aql_agent **out)
{
	return aql_host_agent_create(NULL, out);
}

static aql_status count_agents(uint32_t *count)
{
	*count = 1;
	return AQL_OK;
}

static aql_status open_agent(uint32_t index, aql_agent **out)
{
	(void)index;
	return aql_host_agent_create(NULL, out);
}

const struct aql_agent_driver aql_host_agent_driver = {
	.name = "CPU",
	.kind = AQL_AGENT_CPU,
	.open_default = open_default,
	.count = count_agents,
	.open = open_agent,
};
