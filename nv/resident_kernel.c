/* SPDX-License-Identifier: MIT */
/*
 * The resident processor of a CUDA queue (AQL_QUEUE_RESIDENT): a kernel
 * that stays on the GPU and takes AQL packets from the queue's ring
 * itself, so that a dispatch costs the producer no driver call. Built by
 * aql-kcc twice: as PTX, which nv/resident.c links with the kernels'
 * device-function forms and a generated switch (aql_resident_call), and
 * for the host, which the emulated driver (tests/cuda_emu) runs on an
 * emulated stream with a table of the host builds' device functions in
 * place of the switch. nv/README.md explains the loop and its ordering.
 *
 * Each block runs one work-group at a time with its AQL_RES_BLOCK
 * threads; thread 0 (the leader) talks to the ring and the other blocks,
 * and the block's barrier hands its decision to the other threads.
 */
#include <aql/kernel.h>

#include "resident_abi.h"

#ifdef AQL_KERNEL_TARGET_HOST
/* Bound at load by the emulated driver: case index -> device function. */
struct aql_res_table {
	uint64_t count;
	void (*fn[])(const void *kernarg, const aql_wg_ids *ids);
};
extern const struct aql_res_table aql_resident_table_ __attribute__((visibility("default")));
#define AQL_RES_CALL(index, kernarg, ids) aql_resident_table_.fn[index](kernarg, ids)
#define AQL_RES_ITEM(ids) ((ids).local)
#else
/* The switch generated at link time (nv/resident.c). */
void aql_resident_call(uint32_t index, const void *kernarg, const aql_wg_ids *ids);
#define AQL_RES_CALL(index, kernarg, ids) aql_resident_call(index, kernarg, ids)
#define AQL_RES_ITEM(ids) ((ids).item)
#endif

#define AQL_RES_GLOBAL(T, addr) ((aql_global T *)(uintptr_t)(addr))

enum { CMD_RUN = 1, CMD_STOP };

/* What the leader hands to its block. */
struct res_lds {
	uint32_t cmd;
	uint32_t index;			/* case of the switch */
	uint32_t threads;		/* of the work-group */
	uint32_t units;			/* work-groups of the dispatch */
	uint64_t id;
	uint64_t kernarg;
	aql_wg_ids ids;
};

/* Packet header fields (include/aql/packet.h): type in bits 0-7. */
#define HDR_TYPE(h) ((uint32_t)(h) & 0xffu)
#define TYPE_VENDOR 0u
#define TYPE_INVALID 1u
#define TYPE_DISPATCH 2u
#define TYPE_BARRIER_AND 3u
#define TYPE_BARRIER_OR 5u

/*
 * The processor's atomics. sys_*: host memory shared with the CPU (the
 * ring, the control block, signals), at system scope; dev_*: the blocks'
 * state in device memory, at device scope; loads acquire, stores
 * release, read-modify-writes seq_cst. The host build makes them in
 * libaql (aql/host/host_agent.c lends them): a host code object is not
 * instrumented, so ThreadSanitizer sees the processor's synchronisation
 * only there.
 */
#ifdef AQL_KERNEL_TARGET_HOST
uint64_t aql_host_sync_load(const uint64_t *p);
void aql_host_sync_store(uint64_t *p, uint64_t v);
uint64_t aql_host_sync_add(uint64_t *p, uint64_t v);
uint32_t aql_host_sync_add32(uint32_t *p, uint32_t v);
uint64_t aql_host_sync_cas(uint64_t *p, uint64_t expected, uint64_t desired);
#define sys_load aql_host_sync_load
#define sys_store aql_host_sync_store
#define dev_load aql_host_sync_load
#define dev_store aql_host_sync_store
#define dev_add aql_host_sync_add
#define dev_cas aql_host_sync_cas

/* Decrement the signal's value, then read its waiter count with a seq_cst
 * RMW: the device half of include/aql/signal.h's handshake. */
AQL_INLINE uint32_t signal_decrement(uint64_t signal)
{
	aql_host_sync_add((uint64_t *)(uintptr_t)(signal + 8), (uint64_t)-1);
	return aql_host_sync_add32((uint32_t *)(uintptr_t)(signal + 60), 0);
}
#else
#define sys_load aql_sys_load_acquire_u64_
#define sys_store aql_sys_store_release_u64_
#define dev_load aql_agent_load_acquire_u64_

AQL_INLINE void dev_store(aql_global uint64_t *p, uint64_t v)
{
	__nvvm_membar_gl();
	*(volatile aql_global uint64_t *)p = v;
	__nvvm_membar_gl();
}

AQL_INLINE uint64_t dev_add(aql_global uint64_t *p, uint64_t v)
{
	return aql_atomic_add_u64((uint64_t *)p, v, AQL_SEQ_CST);
}

AQL_INLINE uint64_t dev_cas(aql_global uint64_t *p, uint64_t expected, uint64_t desired)
{
	return aql_atomic_cas_u64((uint64_t *)p, expected, desired, AQL_SEQ_CST);
}

/* The decrement at system scope between full system fences (membar.sys):
 * the fence after it orders the load of the waiter count after it. */
AQL_INLINE uint32_t signal_decrement(uint64_t signal)
{
	__nvvm_membar_sys();
	__asm__ __volatile__("red.sys.global.add.u64 [%0], %1;" ::"l"(signal + 8),
			     "l"((uint64_t)-1) : "memory");
	__nvvm_membar_sys();
	return *(volatile aql_global uint32_t *)(uintptr_t)(signal + 60);
}
#endif

/* Word `word` (8 bytes) of a slot, with system-scope acquire: the
 * producer stores the header (word 0) last, with release. */
AQL_INLINE uint64_t slot_word(uint64_t ring, uint64_t id, uint32_t mask, uint32_t word)
{
	return sys_load(AQL_RES_GLOBAL(uint64_t, ring + (id & mask) * 64u + word * 8u));
}

/* A signal's value (amd_signal_t: offset 8), seen at system scope. */
AQL_INLINE int64_t signal_value(uint64_t signal)
{
	return (int64_t)sys_load(AQL_RES_GLOBAL(uint64_t, signal + 8));
}

AQL_INLINE int cond_met(uint32_t cond, int64_t v, int64_t compare)
{
	return cond == 0 ? v == compare : cond == 1 ? v != compare
	     : cond == 2 ? v < compare : v >= compare;
}

/*
 * Whether the barrier packet at word 0 = w0 may complete: AND, every
 * dependency below 1 (a failed one, -1, releases it too, as on the
 * translating queue); OR, one of them; BARRIER_VALUE, its condition.
 */
AQL_INLINE int barrier_ready(aql_global struct aql_res_ctl *ctl, uint64_t id, uint64_t w0)
{
	uint32_t type = HDR_TYPE(w0), mask = ctl->mask;
	int any = 0, all = 1;

	if (type == TYPE_VENDOR) {
		uint64_t signal = slot_word(ctl->ring, id, mask, 1);
		int64_t value = (int64_t)slot_word(ctl->ring, id, mask, 2);
		int64_t vmask = (int64_t)slot_word(ctl->ring, id, mask, 3);
		uint32_t cond = (uint32_t)slot_word(ctl->ring, id, mask, 4);

		return cond_met(cond, signal_value(signal) & vmask, value);
	}
	for (uint32_t i = 0; i < 5; i++) {
		uint64_t dep = slot_word(ctl->ring, id, mask, 1 + i);

		if (!dep)
			continue;
		if (signal_value(dep) < 1)
			any = 1;
		else
			all = 0;
	}
	return type == TYPE_BARRIER_AND ? all : any;
}

/*
 * Let the blocks go on to packet id + 1: its claim word first, then cur,
 * so that a block that sees the new cur finds the claim word for it.
 */
static void next_packet(aql_global struct aql_res_ctl *ctl, uint64_t id)
{
	aql_global struct aql_res_state *st = AQL_RES_GLOBAL(struct aql_res_state, ctl->state);

	dev_store(&st->done, 0);
	dev_store(&st->claim, (id + 1) << 32);
	dev_store(&st->cur, id + 1);
}

/*
 * Packet id is done: its slot's header back to INVALID, the read index
 * past it, then its completion signal decremented, all at system scope
 * and in that order (a thread that saw the completion finds the packet
 * out of the ring, as on the CPU agent). A sleeping host waiter is woken
 * by the host: the signal goes into the wake ring when, after a full
 * fence, its waiter count is not zero (the device half of the handshake
 * in include/aql/signal.h). Then the next packet's claim word, and cur,
 * which lets the other blocks go on.
 */
static void complete(aql_global struct aql_res_ctl *ctl, uint64_t id)
{
	uint64_t slot = ctl->ring + (id & ctl->mask) * 64u;
	uint64_t signal = slot_word(ctl->ring, id, ctl->mask, 7);
	uint32_t round = 0;

	sys_store(AQL_RES_GLOBAL(uint64_t, slot),
		  (slot_word(ctl->ring, id, ctl->mask, 0) & ~(uint64_t)0xffff) | TYPE_INVALID);
	sys_store(AQL_RES_GLOBAL(uint64_t, ctl->read_index), id + 1);
	if (signal && signal_decrement(signal)) {
		uint64_t tail = ctl->wake_tail;

		while (tail - sys_load(&ctl->wake_head) >= AQL_RES_WAKE)
			aql_channel_pause_(round++);
		ctl->wake[tail % AQL_RES_WAKE] = signal;
		sys_store(&ctl->wake_tail, tail + 1);
	}
	next_packet(ctl, id);
}

/* The kernel table's entry for object, or -1: a linear search, as queues
 * link few kernels. */
AQL_INLINE int32_t find_kernel(aql_global struct aql_res_ctl *ctl, uint64_t object)
{
	aql_global struct aql_res_kernel *k = AQL_RES_GLOBAL(struct aql_res_kernel, ctl->kernels);

	for (uint32_t i = 0; i < ctl->kernel_count; i++)
		if (k[i].object == object)
			return (int32_t)i;
	return -1;
}

/*
 * A dispatch the processor runs itself: a kernel with a device-function
 * form in the table, 1 to 3 dimensions, work-groups that fit the block
 * (exactly, unless it never calls aql_barrier()), no dynamic shared
 * memory (none is reserved) and fewer than 2^32 work-groups. Fills *l
 * but for the group ids; 0 for any other dispatch, which the host runs.
 */
static int runnable(aql_global struct aql_res_ctl *ctl, uint64_t id, uint64_t w0,
		    aql_local struct res_lds *l)
{
	uint64_t w1 = slot_word(ctl->ring, id, ctl->mask, 1);
	uint64_t w2 = slot_word(ctl->ring, id, ctl->mask, 2);
	uint64_t w3 = slot_word(ctl->ring, id, ctl->mask, 3);
	uint32_t dims = (uint32_t)(w0 >> 16) & 3u;
	uint32_t wg[3] = { (uint32_t)(w0 >> 32) & 0xffffu, (uint32_t)(w0 >> 48),
			   (uint32_t)w1 & 0xffffu };
	uint32_t grid[3] = { (uint32_t)(w1 >> 32), (uint32_t)w2, (uint32_t)(w2 >> 32) };
	uint64_t units = 1;
	uint32_t threads;
	int32_t k;

	if (dims < 1 || (uint32_t)(w3 >> 32) != 0)
		return 0;
	k = find_kernel(ctl, slot_word(ctl->ring, id, ctl->mask, 4));
	if (k < 0)
		return 0;
	for (uint32_t d = 0; d < 3; d++) {
		if (d >= dims && (wg[d] != 1 || grid[d] != 1))
			return 0;
		if (!wg[d] || !grid[d])
			return 0;
		l->ids.wg[d] = wg[d];
		l->ids.size[d] = wg[d];
		units *= (grid[d] + wg[d] - 1) / wg[d];
		l->ids.grid[d] = (grid[d] + wg[d] - 1) / wg[d] * wg[d];
	}
	threads = wg[0] * wg[1] * wg[2];
	if (threads > AQL_RES_BLOCK || units > 0xffffffffu)
		return 0;
	if (!(AQL_RES_GLOBAL(struct aql_res_kernel, ctl->kernels)[k].flags & AQL_RES_NO_BARRIER) &&
	    threads != AQL_RES_BLOCK)
		return 0;
	l->index = AQL_RES_GLOBAL(struct aql_res_kernel, ctl->kernels)[k].index;
	l->threads = threads;
	l->units = (uint32_t)units;
	l->kernarg = slot_word(ctl->ring, id, ctl->mask, 5);
	return 1;
}

/*
 * Wait, polling, until word says the host has run packet id (returned) or
 * the barrier may complete; 0 if the host asks the processor to stop
 * first.
 */
static int wait_for(aql_global struct aql_res_ctl *ctl, uint64_t id, uint64_t w0, int host)
{
	uint32_t round = 0;

	for (;;) {
		if (host ? sys_load(&ctl->returned) > id : barrier_ready(ctl, id, w0))
			return 1;
		if (sys_load(&ctl->stop))
			return 0;
		aql_channel_pause_(round++);
	}
}

/*
 * The leader's step: claim the next work-group of the current packet
 * (CMD_RUN with l filled), or run a packet that is one unit (a barrier,
 * or one handed to the host) and look again; CMD_STOP once the host asks
 * for it, checked before every claim, so that the processor stops
 * between packets.
 */
static void lead(aql_global struct aql_res_ctl *ctl, aql_local struct res_lds *l)
{
	aql_global struct aql_res_state *st = AQL_RES_GLOBAL(struct aql_res_state, ctl->state);
	uint32_t round = 0;

	for (;;) {
		uint64_t id = dev_load(&st->cur), claim, w0;
		uint32_t units = 1, type;
		int run;

		if (sys_load(&ctl->stop)) {
			l->cmd = CMD_STOP;
			return;
		}
		claim = dev_load(&st->claim);
		w0 = slot_word(ctl->ring, id, ctl->mask, 0);
		type = HDR_TYPE(w0);
		if ((uint32_t)(claim >> 32) != (uint32_t)id || type == TYPE_INVALID) {
			aql_channel_pause_(round++);
			continue;
		}
		run = type == TYPE_DISPATCH && runnable(ctl, id, w0, l);
		if (run)
			units = l->units;
		if ((uint32_t)claim >= units) {
			/* Every unit taken: the last block to finish moves on. */
			aql_channel_pause_(round++);
			continue;
		}
		if (dev_cas(&st->claim, claim, claim + 1) != claim)
			continue;
		round = 0;
		if (run) {
			uint32_t u = (uint32_t)claim, nx = l->ids.grid[0] / l->ids.wg[0],
				 ny = l->ids.grid[1] / l->ids.wg[1];

			l->ids.group[0] = u % nx;
			l->ids.group[1] = u / nx % ny;
			l->ids.group[2] = u / nx / ny;
			l->id = id;
			l->cmd = CMD_RUN;
			return;
		}
		if (type == TYPE_BARRIER_AND || type == TYPE_BARRIER_OR ||
		    (type == TYPE_VENDOR && ((w0 >> 16) & 0xffu) == 2u &&
		     (uint32_t)slot_word(ctl->ring, id, ctl->mask, 4) <= 3u)) {
			if (!wait_for(ctl, id, w0, 0)) {
				l->cmd = CMD_STOP;
				return;
			}
			complete(ctl, id);
			continue;
		}
		/* Anything else goes to the host, which runs it on the
		 * translating path, its completion included. */
		sys_store(&ctl->handed, id + 1);
		if (!wait_for(ctl, id, w0, 1)) {
			l->cmd = CMD_STOP;
			return;
		}
		next_packet(ctl, id);
	}
}

AQL_KERNEL_LDS(aql_resident_processor, struct res_lds,
	       (aql_global struct aql_res_ctl *, ctl))
{
	aql_global struct aql_res_state *st = AQL_RES_GLOBAL(struct aql_res_state, ctl->state);
	uint32_t tid = aql_local_id(0);

	for (;;) {
		uint32_t cmd;

		if (tid == 0)
			lead(ctl, lds);
		aql_barrier();
		cmd = lds->cmd;
		if (cmd == CMD_STOP)
			return;
		if (tid < lds->threads) {
			aql_wg_ids ids = lds->ids;
			uint32_t x = lds->ids.wg[0], y = lds->ids.wg[1];

			AQL_RES_ITEM(ids)[0] = tid % x;
			AQL_RES_ITEM(ids)[1] = tid / x % y;
			AQL_RES_ITEM(ids)[2] = tid / x / y;
			AQL_RES_CALL(lds->index, (const void *)(uintptr_t)lds->kernarg, &ids);
		}
		aql_barrier();
		/* The block's work-items are done (the barrier); the
		 * seq_cst add makes their writes visible to the block that
		 * finishes the packet, which completes it. */
		if (tid == 0 && dev_add(&st->done, 1) + 1 == lds->units)
			complete(ctl, lds->id);
	}
}
