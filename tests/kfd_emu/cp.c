/* SPDX-License-Identifier: MIT */
/*
 * The emulated command processor: one thread per AQL queue, doing what
 * the MEC firmware does with the queue's ring, amd_queue_t and doorbell.
 * Everything it reads or writes it reaches through the GPU's VM
 * (memory.c): an address no BO mapped on the GPU holds is a VM fault.
 *
 * The doorbell holds the id of the last packet made valid; the CP
 * processes packets up to the highest id rung, in order, one at a time,
 * and waits on a slot whose header is still INVALID (a producer that
 * rang ahead of it). Packets: BARRIER_AND, BARRIER_OR, AMD's
 * BARRIER_VALUE, and kernel dispatches (kernels.c).
 * Completion: the signal's value is decremented, then, when the signal
 * has a mailbox, its event id is stored there and the interrupt raised
 * (kfd_signal_event_interrupt); then the slot is retired (header INVALID,
 * read_dispatch_id + 1). A packet the CP refuses stores a CP error code
 * (ROCr's DynamicScratchHandler codes) in queue_inactive_signal, raises
 * its event, and stalls the queue until the value is 0 again.
 * While the amd_queue_t's ENABLE_PROFILING bit is set (read per packet,
 * ROCr flips it on a live queue: AqlQueue::SetProfiling), the completion
 * signal's start_ts and end_ts get the GPU's timestamp counter
 * (emu_gpu_clock: 100 MHz, not ns) at the packet's start and end, before
 * the decrement; ROCr converts them (GpuAgent::TranslateTime). Every packet
 * type is stamped (approx: the firmware's rule is not public).
 *
 * The CP never takes sys.c's lock, so DESTROY_QUEUE can stop and join it
 * with the lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aql/packet.h"
#include "aql/queue.h"
#include "aql/signal.h"
#include "emu.h"

/* CP error codes in queue_inactive_signal, bits of a mask (ROCr
 * amd_aql_queue.cpp DynamicScratchHandler); the emulation sets one at a time. */
enum {
	CP_INVALID_PACKET_FORMAT = 32,
	CP_UNSUPPORTED_VENDOR_PACKET = 256,
};

/* The doorbell's value before the first ring: no packet id is this large. */
#define NEVER_RUNG UINT64_MAX

struct emu_cp {
	struct emu_cp_queue q;
	pthread_t thread;
	pid_t owner;			/* the process the thread runs in */
	int stop;			/* set by emu_cp_stop */
	int halted;			/* stopped on its own */
	int window;			/* holds the VRAM window (memory.c) */
};

/* Packets the process's CPs have begun, for queue_stop:N and mem_fault:N. */
static int64_t begun;
/* By GPU node: KFD evicted the process's queues there (a VM fault). */
static int evicted[EMU_MAX_GPUS];

void emu_cp_reset(void)
{
	__atomic_store_n(&begun, 0, __ATOMIC_SEQ_CST);
	for (int i = 0; i < EMU_MAX_GPUS; i++)
		__atomic_store_n(&evicted[i], 0, __ATOMIC_SEQ_CST);
}

static int stopping(struct emu_cp *cp)
{
	return __atomic_load_n(&cp->stop, __ATOMIC_ACQUIRE) ||
	       __atomic_load_n(&evicted[cp->q.gpu->node - 1], __ATOMIC_ACQUIRE);
}

/*
 * One round of waiting: spin a little, then sleep, doubling up to 1 ms,
 * so a destroy is seen within about a millisecond. Returns whether the CP
 * must stop.
 */
static int idle(struct emu_cp *cp, unsigned *round)
{
	struct timespec ts = { 0, 0 };

	if (stopping(cp))
		return 1;
	if (*round < 64) {
		++*round;
		return 0;
	}
	ts.tv_nsec = 1000l << (*round - 64 < 10 ? *round - 64 : 10);
	if (ts.tv_nsec > 1000000)
		ts.tv_nsec = 1000000;
	++*round;
	nanosleep(&ts, NULL);
	return stopping(cp);
}

/*
 * A GPU page fault at va: a page not present (an address no mapped BO
 * holds) or, exec, an instruction fetch from a BO that is not
 * EXECUTABLE. KFD signals the process's MEMORY events and
 * evicts its queues on that GPU (kfd_int_process_v9.c
 * event_interrupt_wq_v9: kfd_dqm_evict_pasid, kfd_signal_vm_fault_event).
 */
static void vm_fault(struct emu_cp *cp, uint64_t va, int exec)
{
	__atomic_store_n(&evicted[cp->q.gpu->node - 1], 1, __ATOMIC_SEQ_CST);
	__atomic_store_n(&cp->halted, 1, __ATOMIC_RELEASE);
	emu_event_vm_fault(cp->q.gpu->gpu_id, va, 0, exec);
}

/* A 64-bit word at va, through the VM: 0, or -EFAULT after a VM fault. */
static int load64(struct emu_cp *cp, uint64_t va, uint64_t *out)
{
	uint64_t *p = emu_memory_gpu_begin(cp->q.gpu, va, 8);

	if (!p) {
		vm_fault(cp, va, 0);
		return -EFAULT;
	}
	*out = __atomic_load_n(p, __ATOMIC_ACQUIRE);
	emu_memory_gpu_end();
	return 0;
}

static int store64(struct emu_cp *cp, uint64_t va, uint64_t v)
{
	uint64_t *p = emu_memory_gpu_begin(cp->q.gpu, va, 8);

	if (!p) {
		vm_fault(cp, va, 0);
		return -EFAULT;
	}
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
	emu_memory_gpu_end();
	return 0;
}

/*
 * What the CP does to a signal: value, then mailbox, then interrupt.
 * set: store v (an error code); else decrement. 0, or -EFAULT.
 */
static int signal_op(struct emu_cp *cp, uint64_t signal, int set, int64_t v)
{
	aql_signal *s = emu_memory_gpu_begin(cp->q.gpu, signal, sizeof(*s));
	uint64_t mailbox;
	uint32_t event;

	if (!s) {
		vm_fault(cp, signal, 0);
		return -EFAULT;
	}
	if (set)
		__atomic_store_n(&s->value, v, __ATOMIC_SEQ_CST);
	else
		__atomic_fetch_sub(&s->value, 1, __ATOMIC_SEQ_CST);
	mailbox = __atomic_load_n(&s->event_mailbox_ptr, __ATOMIC_ACQUIRE);
	event = __atomic_load_n(&s->event_id, __ATOMIC_ACQUIRE);
	emu_memory_gpu_end();
	if (!mailbox)
		return 0;
	if (store64(cp, mailbox, event))
		return -EFAULT;
	/* -ENOENT (no event page yet, or no slot of that id) is the
	 * kernel's silent case too */
	emu_event_interrupt(cp->q.gpu->gpu_id, event);
	return 0;
}

static int cond_met(int64_t value, int64_t mask, int64_t compare, uint32_t cond)
{
	return aql_signal_condition_met((enum aql_signal_condition)cond, value & mask, compare);
}

/*
 * Wait until the signals meet their conditions: all of them (and) or one
 * (or). 0 when met, 1 when the CP must stop or faulted.
 */
static int wait_signals(struct emu_cp *cp, const uint64_t *sig, const int64_t *cmp,
			const int64_t *mask, const uint32_t *cond, int n, int and)
{
	unsigned round = 0;

	for (;;) {
		int met = 0;

		for (int i = 0; i < n; i++) {
			uint64_t v;

			if (load64(cp, sig[i] + offsetof(aql_signal, value), &v))
				return 1;
			met += cond_met((int64_t)v, mask[i], cmp[i], cond[i]);
		}
		if (and ? met == n : met > 0)
			return 0;
		if (idle(cp, &round))
			return 1;
	}
}

/*
 * Stall with code in queue_inactive_signal until the runtime stores 0
 * back. 0 to retry the packet, 1 to stop.
 */
static int cp_error(struct emu_cp *cp, uint32_t code)
{
	uint64_t inactive, v;
	unsigned round = 0;

	if (load64(cp, cp->q.amd_queue + offsetof(aql_amd_queue, queue_inactive_signal), &inactive))
		return 1;
	if (!inactive) {
		fprintf(stderr, "kfd-emu: queue %u: CP error %u and no queue_inactive_signal\n",
			cp->q.queue_id, code);
		__atomic_store_n(&cp->halted, 1, __ATOMIC_RELEASE);
		return 1;
	}
	if (signal_op(cp, inactive, 1, code))
		return 1;
	do {
		if (idle(cp, &round))
			return 1;
		if (load64(cp, inactive + offsetof(aql_signal, value), &v))
			return 1;
	} while (v);
	return 0;
}

/*
 * AMD_AQL_FORMAT_PM4_IB, the vendor packet ROCr runs PM4 through on gfx9
 * (amd_aql_queue.cpp AqlQueue::ExecutePM4, struct amd_aql_pm4_ib): u16
 * header, u16 format 1, four dwords of PM4 INDIRECT_BUFFER at byte 4,
 * dw_cnt_remain 0xA at byte 20, eight reserved dwords, the completion
 * signal at byte 56. Encodings: ROCr amd_gpu_pm4.h; PM4 type-3 header:
 * type 3 in bits 30-31, dwords - 2 in 16-29, the opcode in 8-15, shader
 * type bit 1 (gfx7 only).
 */
#define AMD_FORMAT_PM4_IB 1
#define PM4_TYPE3(op, dwords) (3u << 30 | ((dwords) - 2u) << 16 | (op) << 8)
#define PM4_INDIRECT_BUFFER 0x3fu
#define PM4_ACQUIRE_MEM 0x58u
#define PM4_IB_VALID (1u << 23)
/* ACQUIRE_MEM COHER_CNTL on gfx9 (GpuAgent::InvalidateCodeCaches) */
#define COHER_TC_WB (1u << 18)
#define COHER_TC (1u << 23)
#define COHER_SH_KCACHE (1u << 27)
#define COHER_SH_ICACHE (1u << 29)
#define COHER_CODE (COHER_SH_ICACHE | COHER_SH_KCACHE | COHER_TC)

static uint32_t dw(const aql_packet *p, int i)
{
	uint32_t v;

	memcpy(&v, p->bytes + 4 * i, 4);
	return v;
}

static int pm4_refuse(struct emu_cp *cp, uint32_t *code, const char *why)
{
	fprintf(stderr, "kfd-emu: queue %u: PM4 IB packet refused: %s\n", cp->q.queue_id, why);
	*code = CP_INVALID_PACKET_FORMAT;
	return -1;
}

/*
 * The one PM4 the emulation runs: an IB of a single gfx9 ACQUIRE_MEM (7
 * dwords) that invalidates I$, K$ and L2 (TC), as ROCr's
 * GpuAgent::InvalidateCodeCaches sends after loading code; COHER_SIZE in
 * 256-byte units (0xFFFFFFFF with SIZE_HI 0xFF: all), COHER_BASE >> 8.
 * Anything else in the packet or the IB is refused with code 32.
 */
static int pm4_ib(struct emu_cp *cp, const aql_packet *p, uint32_t *code)
{
	uint64_t ib, size, base;
	uint32_t a[7];
	const uint32_t *mem;

	if (dw(p, 1) != PM4_TYPE3(PM4_INDIRECT_BUFFER, 4) || (dw(p, 2) & 3) ||
	    (dw(p, 3) >> 16) || (dw(p, 4) & ~(PM4_IB_VALID | 0xfffffu)) ||
	    !(dw(p, 4) & PM4_IB_VALID) || dw(p, 5) != 0xa)
		return pm4_refuse(cp, code, "not an INDIRECT_BUFFER jump with dw_cnt_remain 0xA");
	for (int i = 6; i < 14; i++)
		if (dw(p, i))
			return pm4_refuse(cp, code, "reserved dwords not 0");
	if ((dw(p, 4) & 0xfffffu) != 7)
		return pm4_refuse(cp, code, "the IB is not one ACQUIRE_MEM of 7 dwords");
	ib = dw(p, 2) | (uint64_t)dw(p, 3) << 32;
	mem = emu_memory_gpu_begin(cp->q.gpu, ib, sizeof(a));
	if (!mem) {
		vm_fault(cp, ib, 0);
		return 1;
	}
	memcpy(a, mem, sizeof(a));
	emu_memory_gpu_end();
	if (a[0] != PM4_TYPE3(PM4_ACQUIRE_MEM, 7))
		return pm4_refuse(cp, code, "the IB is not one ACQUIRE_MEM of 7 dwords");
	if ((a[1] & COHER_CODE) != COHER_CODE)
		return pm4_refuse(cp, code, "ACQUIRE_MEM does not invalidate I$, K$ and L2 "
				  "(SH_ICACHE, SH_KCACHE, TC)");
	if (a[3] >> 8 || a[5] >> 24)
		return pm4_refuse(cp, code, "ACQUIRE_MEM COHER_SIZE_HI or COHER_BASE_HI out of "
				  "range");
	size = (a[2] | (uint64_t)a[3] << 32) << 8;
	base = (a[4] | (uint64_t)a[5] << 32) << 8;
	if (!size)
		return pm4_refuse(cp, code, "ACQUIRE_MEM of COHER_SIZE 0");
	if (emu_cache_invalidate(cp->q.gpu, base, size)) {
		fprintf(stderr, "kfd-emu: queue %u: out of host memory for the code caches\n",
			cp->q.queue_id);
		__atomic_store_n(&cp->halted, 1, __ATOMIC_RELEASE);
		return 1;
	}
	return 0;
}

/* Run one packet: 0 done, -1 refused with code *code, 1 stop. */
static int run(struct emu_cp *cp, const aql_packet *p, uint32_t *code)
{
	uint64_t sig[5];
	int64_t cmp[5], mask[5];
	uint32_t cond[5];
	int n = 0;

	switch (aql_header_type(p->header)) {
	case AQL_PACKET_BARRIER_AND:
	case AQL_PACKET_BARRIER_OR:
		for (int i = 0; i < 5; i++)
			if (p->barrier.dep_signal[i]) {
				sig[n] = p->barrier.dep_signal[i];
				cmp[n] = 0;
				mask[n] = -1;
				cond[n++] = AQL_COND_EQ;
			}
		/* a null handle is met; an OR of none is met at once */
		if (!n)
			return 0;
		return wait_signals(cp, sig, cmp, mask, cond, n,
				    aql_header_type(p->header) == AQL_PACKET_BARRIER_AND);
	case AQL_PACKET_VENDOR_SPECIFIC:
		if (p->barrier_value.header.format == AMD_FORMAT_PM4_IB &&
		    !p->barrier_value.header.reserved)
			return pm4_ib(cp, p, code);
		if (p->barrier_value.header.format != AQL_AMD_PACKET_BARRIER_VALUE) {
			*code = CP_UNSUPPORTED_VENDOR_PACKET;
			return -1;
		}
		if (!p->barrier_value.signal || p->barrier_value.cond > AQL_COND_GTE) {
			*code = CP_INVALID_PACKET_FORMAT;
			return -1;
		}
		sig[0] = p->barrier_value.signal;
		cmp[0] = p->barrier_value.value;
		mask[0] = p->barrier_value.mask;
		cond[0] = p->barrier_value.cond;
		return wait_signals(cp, sig, cmp, mask, cond, 1, 1);
	case AQL_PACKET_KERNEL_DISPATCH: {
		char why[200] = "";
		uint64_t va = 0;
		int exec = 0, r;

		emu_memory_window_hold(&cp->window);
		r = emu_kernel_dispatch(&cp->q, &p->dispatch, why, sizeof(why), &va, &exec);

		if (r < 0) {
			if (why[0])
				fprintf(stderr, "kfd-emu: queue %u: VM fault at 0x%llx: %s\n",
					cp->q.queue_id, (unsigned long long)va, why);
			vm_fault(cp, va, exec);
			return 1;
		}
		if (r) {
			/* Code 1 asks the runtime for scratch: every first
			 * dispatch that needs some, not worth a line. */
			if (r != 1)
				fprintf(stderr, "kfd-emu: queue %u: CP error %d: %s\n",
					cp->q.queue_id, r, why);
			*code = (uint32_t)r;
			return -1;
		}
		return 0;
	}
	default:
		/* AGENT_DISPATCH is for CPU agents; other types are unknown */
		*code = CP_INVALID_PACKET_FORMAT;
		return -1;
	}
}

/* The fault knobs: 0 to run the packet, 1 when the CP stopped or faulted. */
static int knobs(struct emu_cp *cp, uint64_t slot_va)
{
	const struct emu_config *c = emu_config();
	int64_t n;

	if (c->fail_queue_stop < 0 && c->fail_mem_fault < 0)
		return 0;
	n = __atomic_fetch_add(&begun, 1, __ATOMIC_SEQ_CST);
	if (c->fail_queue_stop >= 0 && n >= c->fail_queue_stop) {
		__atomic_store_n(&cp->halted, 1, __ATOMIC_RELEASE);
		return 1;
	}
	if (c->fail_mem_fault >= 0 && n == c->fail_mem_fault) {
		/* the packet reads memory that is not there */
		vm_fault(cp, slot_va, 0);
		return 1;
	}
	return 0;
}

/* Whether the queue profiles: -1 after a VM fault. */
static int profiling(struct emu_cp *cp)
{
	uint64_t va = cp->q.amd_queue + offsetof(aql_amd_queue, queue_properties);
	uint32_t *p = emu_memory_gpu_begin(cp->q.gpu, va, 4);
	uint32_t props;

	if (!p) {
		vm_fault(cp, va, 0);
		return -1;
	}
	props = __atomic_load_n(p, __ATOMIC_RELAXED);
	emu_memory_gpu_end();
	return !!(props & AQL_AMD_QUEUE_PROPERTY_ENABLE_PROFILING);
}

/* Process packet id; 0 when retired, 1 when the CP must stop. */
static int process(struct emu_cp *cp, uint64_t id)
{
	uint64_t slot_va = cp->q.ring + (id * 64) % cp->q.ring_size;
	aql_packet pkt, *slot;
	unsigned round = 0;
	uint32_t code = 0;
	uint64_t start = 0;
	int r, prof;

	for (;;) {
		slot = emu_memory_gpu_begin(cp->q.gpu, slot_va, 64);
		if (!slot) {
			vm_fault(cp, slot_va, 0);
			return 1;
		}
		pkt.header = __atomic_load_n(&slot->header, __ATOMIC_ACQUIRE);
		if (aql_header_type(pkt.header) != AQL_PACKET_INVALID) {
			memcpy(pkt.bytes + 2, slot->bytes + 2, 62);
			emu_memory_gpu_end();
			break;
		}
		emu_memory_gpu_end();
		/* rung ahead of the producer that owns this slot: wait */
		if (idle(cp, &round))
			return 1;
	}
	if (knobs(cp, slot_va) || (prof = profiling(cp)) < 0)
		return 1;
	if (prof)
		start = emu_gpu_clock(cp->q.gpu);
	/*
	 * The packets before this one are complete (one at a time), so the
	 * barrier bit holds. Fences of any scope are met: the acquire by the
	 * header's and the signals' acquire loads, the release by the
	 * completion's seq_cst decrement and the retiring release stores.
	 */
	while ((r = run(cp, &pkt, &code)) < 0)
		if (cp_error(cp, code))
			return 1;
	if (r)
		return 1;
	/* The slot is retired before the completion, as the CP's read index
	 * passes a packet once it has it: whoever sees the completion sees
	 * the packet gone from the ring. */
	slot = emu_memory_gpu_begin(cp->q.gpu, slot_va, 64);
	if (!slot) {
		vm_fault(cp, slot_va, 0);
		return 1;
	}
	__atomic_store_n(&slot->header, (uint16_t)AQL_PACKET_INVALID, __ATOMIC_RELEASE);
	emu_memory_gpu_end();
	if (store64(cp, cp->q.amd_queue + offsetof(aql_amd_queue, read_dispatch_id), id + 1))
		return 1;
	/* completion_signal sits at the same offset in every packet type */
	if (!pkt.dispatch.completion_signal)
		return 0;
	if (prof && (store64(cp, pkt.dispatch.completion_signal + offsetof(aql_signal, start_ts),
			     start) ||
		     store64(cp, pkt.dispatch.completion_signal + offsetof(aql_signal, end_ts),
			     emu_gpu_clock(cp->q.gpu))))
		return 1;
	return signal_op(cp, pkt.dispatch.completion_signal, 0, 0) != 0;
}

static void *cp_main(void *arg)
{
	struct emu_cp *cp = arg;
	uint64_t rd, wr;
	unsigned round = 0;
	int warned = 0;

	if (load64(cp, cp->q.amd_queue + offsetof(aql_amd_queue, read_dispatch_id), &rd))
		return NULL;
	for (;;) {
		uint64_t bell = __atomic_load_n(cp->q.doorbell, __ATOMIC_ACQUIRE);

		if (bell == NEVER_RUNG || bell < rd) {
			/* out of packets: the host faults on VRAM again */
			emu_memory_window_release(&cp->window);
			if (idle(cp, &round))
				break;
			continue;
		}
		round = 0;
		/* a doorbell past write_dispatch_id rings a packet that no
		 * producer reserved: an agent bug, said once */
		if (!warned &&
		    !load64(cp, cp->q.amd_queue + offsetof(aql_amd_queue, write_dispatch_id), &wr) &&
		    bell >= wr) {
			fprintf(stderr, "kfd-emu: queue %u: doorbell %llu is past write_dispatch_id "
				"%llu\n", cp->q.queue_id, (unsigned long long)bell,
				(unsigned long long)wr);
			warned = 1;
		}
		if (process(cp, rd))
			break;
		rd++;
	}
	emu_memory_window_release(&cp->window);
	/* stopped by a knob, a fault or an eviction: wait for the destroy */
	if (!__atomic_load_n(&cp->stop, __ATOMIC_ACQUIRE))
		__atomic_store_n(&cp->halted, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&cp->stop, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
	return NULL;
}

int emu_cp_start(const struct emu_cp_queue *q, struct emu_cp **out)
{
	struct emu_cp *cp = calloc(1, sizeof(*cp));

	if (!cp)
		return -ENOMEM;
	cp->q = *q;
	cp->owner = getpid();
	__atomic_store_n(q->doorbell, NEVER_RUNG, __ATOMIC_RELEASE);
	if (pthread_create(&cp->thread, NULL, cp_main, cp)) {
		free(cp);
		return -ENOMEM;
	}
	*out = cp;
	return 0;
}

void emu_cp_stop(struct emu_cp *cp)
{
	__atomic_store_n(&cp->stop, 1, __ATOMIC_RELEASE);
	/* a forked child has its parent's CPs' memory, not their threads */
	if (cp->owner == getpid())
		pthread_join(cp->thread, NULL);
	free(cp);
}

int emu_cp_halted(const struct emu_cp *cp)
{
	return __atomic_load_n(&cp->halted, __ATOMIC_ACQUIRE);
}
