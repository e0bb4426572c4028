/* SPDX-License-Identifier: MIT */
/*
 * The device heap and the hostcall service of the AMD agent
 * (aql/kfd/hostcall.c) on the KFD emulation, with host threads playing the
 * GPU's waves exactly as ockl's device code does (hostcall_impl.cl): the
 * buffer's layout and protocol are written here from the facts, not taken
 * from the runtime. The kernels are metadata made here, naming the hidden
 * arguments as a compiler would. Not run on hardware.
 *
 * - a kernel without hidden_heap_v1 / hidden_hostcall_buffer gets only
 *   queue_ptr, and nothing is made for it;
 * - one naming both gets a VRAM heap of 128 KiB, zero but for its three
 *   initial-slab fields, which describe 8 MiB of 2 MiB-aligned VRAM, and
 *   a hostcall buffer the GPU reaches, its prefix and free stack as ockl
 *   expects; a second call gets the same;
 * - DEVMEM: 2 MiB (2 MiB aligned), 10000 bytes (page aligned), both
 *   freed, more than the VRAM and an unknown address answered 0 and
 *   counted; FUNCTION_CALL; an
 *   unknown service answered with zeros and counted;
 * - 8 waves at once, several lanes each, every answer checked (TSan);
 * - the CPU agent supplies neither; with VRAM exhausted the call and a
 *   typed launch fail naming the kernel and the heap (the launch before
 *   its packet), and a later call succeeds;
 * - agent destroy with the service running frees what it made.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "kfd_emu/kfdemu.h"

#define MIB (1ull << 20)
#define HEAP_BYTES (128u << 10)
#define INITIAL_SLABS_AT 108544u	/* heap_t's initial_slabs, then _end, _start */
#define WAVES 8
#define ROUNDS 30

/* ockl's hostcall buffer, as the device reads it. */
struct hc_buffer {
	uint64_t headers, payloads, doorbell, free_stack, ready_stack, index_mask;
};

struct hc_header {
	uint64_t next;
	uint64_t activemask;
	uint32_t service;
	uint32_t control;
};

struct hc_payload {
	uint64_t slots[64][8];
};

static aql_agent *agent;
static aql_queue *queue;
static uint32_t gpu_id;
static kfdemu_event_interrupt_fn interrupt_fn;

static const aql_kernel_arg plain_args[] = {
	{ .offset = 0, .size = 8, .kind = AQL_ARG_GLOBAL_BUFFER },
	{ .offset = 8, .size = 4, .kind = AQL_ARG_HIDDEN_BLOCK_COUNT_X },
	{ .offset = 208, .size = 8, .kind = AQL_ARG_HIDDEN_QUEUE_PTR },
};
static const aql_kernel_arg dm_args[] = {
	{ .offset = 0, .size = 8, .kind = AQL_ARG_GLOBAL_BUFFER },
	{ .offset = 8, .size = 4, .kind = AQL_ARG_HIDDEN_BLOCK_COUNT_X },
	{ .offset = 88, .size = 8, .kind = AQL_ARG_HIDDEN_HOSTCALL_BUFFER },
	{ .offset = 104, .size = 8, .kind = AQL_ARG_HIDDEN_HEAP_V1 },
	{ .offset = 208, .size = 8, .kind = AQL_ARG_HIDDEN_QUEUE_PTR },
};
static const aql_kernel_metadata plain_md = { .name = "plain", .symbol = "plain.kd",
					      .arg_count = 3, .args = plain_args };
static const aql_kernel_metadata dm_md = { .name = "dm", .symbol = "dm.kd",
					   .arg_count = 5, .args = dm_args };
static const aql_kernel plain_kernel = { .name = "plain", .metadata = &plain_md,
					 .kernarg_size = 256, .explicit_arg_count = 1 };
static const aql_kernel dm_kernel = { .name = "dm", .metadata = &dm_md, .kernarg_size = 256,
				      .explicit_arg_count = 1 };
/* For a typed launch that must fail before its packet: a value argument,
 * a kernel object that is never dispatched. */
static const aql_kernel_arg dm_value_args[] = {
	{ .offset = 0, .size = 8, .kind = AQL_ARG_BY_VALUE },
	{ .offset = 88, .size = 8, .kind = AQL_ARG_HIDDEN_HOSTCALL_BUFFER },
	{ .offset = 104, .size = 8, .kind = AQL_ARG_HIDDEN_HEAP_V1 },
};
static const aql_kernel_metadata dm_value_md = { .name = "dm_value", .symbol = "dm_value.kd",
						 .arg_count = 3, .args = dm_value_args };
static const aql_kernel dm_value_kernel = { .name = "dm_value", .metadata = &dm_value_md,
					    .kernel_object = 0x1000, .kernarg_size = 256,
					    .kernarg_align = 16, .explicit_arg_count = 1 };

static uint32_t live_bos(void)
{
	struct kfdemu_stats s;

	CHECK(((kfdemu_stats_fn)th_kfdemu_sym("kfdemu_stats"))(&s) == 0, "kfdemu_stats");
	return s.bos;
}

static int bo_at(uint64_t p, struct kfdemu_bo *out)
{
	return ((kfdemu_bo_at_fn)th_kfdemu_sym("kfdemu_bo_at"))(p, out);
}

static struct kfd_hostcall_stats stats(void)
{
	struct kfd_hostcall_stats s;

	CHECK(kfd_hostcall_get_stats(agent, &s) == AQL_OK, "hostcall stats: %s",
	      aql_error_message());
	return s;
}

/*
 * One wave's hostcall, as ockl's device code makes it: pop a packet off
 * the free stack, fill it, push it onto the ready stack, ring the
 * doorbell (add, mailbox, interrupt), spin until the host clears READY,
 * read each lane's answer, return the packet with its tag bumped.
 */
static int wave_call(struct hc_buffer *b, uint32_t service, uint64_t lanes,
		     uint64_t (*slots)[8], uint64_t (*ret)[2])
{
	struct hc_header *hd = (struct hc_header *)(uintptr_t)b->headers;
	struct hc_payload *pl = (struct hc_payload *)(uintptr_t)b->payloads;
	aql_signal *db = aql_signal_from_handle(b->doorbell);
	uint64_t mask = b->index_mask, p, next, top;
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;
	struct hc_header *h;

	for (;;) {
		p = __atomic_load_n(&b->free_stack, __ATOMIC_ACQUIRE);
		if (!p)
			return -1;
		next = __atomic_load_n(&hd[p & mask].next, __ATOMIC_RELAXED);
		if (__atomic_compare_exchange_n(&b->free_stack, &p, next, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			break;
	}
	h = &hd[p & mask];
	h->service = service;
	h->activemask = lanes;
	__atomic_store_n(&h->control, 1, __ATOMIC_RELAXED);
	for (uint64_t l = lanes; l; l &= l - 1)
		memcpy(pl[p & mask].slots[__builtin_ctzll(l)], slots[__builtin_ctzll(l)],
		       8 * sizeof(uint64_t));
	top = __atomic_load_n(&b->ready_stack, __ATOMIC_RELAXED);
	do
		__atomic_store_n(&h->next, top, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&b->ready_stack, &top, p, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	__atomic_fetch_add(&db->value, 1, __ATOMIC_RELEASE);
	__atomic_store_n((uint64_t *)(uintptr_t)db->event_mailbox_ptr, db->event_id,
			 __ATOMIC_RELEASE);
	interrupt_fn(gpu_id, db->event_id);
	while (__atomic_load_n(&h->control, __ATOMIC_ACQUIRE) & 1) {
		if (th_now_ns() > end)
			return -2;
		sched_yield();
	}
	for (uint64_t l = lanes; l; l &= l - 1) {
		ret[__builtin_ctzll(l)][0] = pl[p & mask].slots[__builtin_ctzll(l)][0];
		ret[__builtin_ctzll(l)][1] = pl[p & mask].slots[__builtin_ctzll(l)][1];
	}
	p += mask + 1;
	if (!p)
		p = mask + 1;
	top = __atomic_load_n(&b->free_stack, __ATOMIC_RELAXED);
	do
		__atomic_store_n(&h->next, top, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&b->free_stack, &top, p, 0, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	return 0;
}

/* One lane's request; its two answers. */
static int call1(struct hc_buffer *b, uint32_t service, const uint64_t in[8], uint64_t out[2])
{
	uint64_t slots[64][8] = { { 0 } }, ret[64][2] = { { 0 } };
	int r;

	memcpy(slots[5], in, sizeof(slots[5]));
	r = wave_call(b, service, 1ull << 5, slots, ret);
	out[0] = ret[5][0];
	out[1] = ret[5][1];
	return r;
}

static void host_fn(uint64_t out[2], const uint64_t in[7])
{
	uint64_t sum = 0;

	for (int i = 0; i < 7; i++)
		sum += in[i] * (uint64_t)(i + 1);
	out[0] = sum;
	out[1] = ~in[0];
}

static void check_plain(void)
{
	aql_kernarg_hidden h;
	uint32_t before = live_bos();

	CHECK(aql_queue_hidden_args(queue, &plain_kernel, &h) == AQL_OK, "plain kernel: %s",
	      aql_error_message());
	CHECK(h.queue_ptr == (uint64_t)(uintptr_t)queue->amd && !h.heap_v1 && !h.hostcall_buffer &&
	      !h.printf_buffer && !h.completion_action,
	      "plain kernel: queue 0x%llx heap 0x%llx hostcall 0x%llx",
	      (unsigned long long)h.queue_ptr, (unsigned long long)h.heap_v1,
	      (unsigned long long)h.hostcall_buffer);
	CHECK(live_bos() == before, "plain kernel: %u BOs made", live_bos() - before);
	CHECK(aql_queue_hidden_args(NULL, &plain_kernel, &h) == AQL_ERR_INVALID_ARG &&
	      th_error_has("queue"), "a NULL queue is refused by name");
	CHECK(kfd_hostcall_get_stats(agent, &(struct kfd_hostcall_stats){ 0 }) ==
	      AQL_ERR_NOT_FOUND, "no hostcall service before a kernel needs it");
}

/* The CPU agent supplies neither: the kernel gets only its queue. */
static void check_cpu(void)
{
	aql_queue *q = th_queue(64, AQL_QUEUE_MULTI, 0);
	aql_kernarg_hidden h;

	CHECK(aql_queue_hidden_args(q, &dm_kernel, &h) == AQL_OK &&
	      h.queue_ptr == (uint64_t)(uintptr_t)q->amd && !h.heap_v1 && !h.hostcall_buffer,
	      "CPU agent: heap 0x%llx, hostcall 0x%llx", (unsigned long long)h.heap_v1,
	      (unsigned long long)h.hostcall_buffer);
	CHECK_OK(aql_queue_destroy(q));
}

/* With VRAM all but taken, the heap's slabs do not fit: the call fails
 * naming the kernel and the heap, leaves nothing behind, and the next
 * call once VRAM is free makes them. */
static void check_enomem(void)
{
	aql_agent *a3 = NULL;
	aql_queue *q3 = NULL;
	aql_kernarg_hidden h;
	uint64_t avail = 0;
	uint32_t before;
	void *fill = NULL;
	aql_arg arg;
	aql_status st;

	CHECK_OK(aql_agent_open(AQL_AGENT_AMD, 0, &a3));
	if (!a3)
		return;
	CHECK_OK(aql_queue_create(a3, NULL, &q3));
	/* The copy queue the heap's clearing needs, made before VRAM runs out. */
	CHECK_OK(aql_agent_mem_alloc(a3, 4096, &fill));
	aql_agent_mem_free(a3, fill);
	CHECK_OK(kfd_mem_available((struct kfd_agent *)a3, &avail));
	CHECK(avail > 8 * MIB && kfd_mem_alloc(a3, avail - 4 * MIB, &fill) == AQL_OK,
	      "taking %llu bytes of VRAM: %s", (unsigned long long)avail, aql_error_message());
	before = live_bos();
	arg = aql_arg_bytes(&avail, sizeof(avail));
	st = aql_launch(q3, &dm_value_kernel, &(aql_launch_config){ .grid = { 1 } }, &arg, 1,
			NULL);
	CHECK(st == AQL_ERR_NOMEM && th_error_has("kernel 'dm_value'") &&
	      th_error_has("device heap") && q3->amd->write_dispatch_id == 0,
	      "a typed launch fails before its packet: %s (%s), write index %llu",
	      aql_status_str(st), aql_error_message(),
	      (unsigned long long)q3->amd->write_dispatch_id);
	st = aql_queue_hidden_args(q3, &dm_kernel, &h);
	CHECK(st == AQL_ERR_NOMEM && th_error_has("kernel 'dm'") && th_error_has("device heap"),
	      "VRAM exhausted: %s (%s)", aql_status_str(st), aql_error_message());
	CHECK(h.queue_ptr == (uint64_t)(uintptr_t)q3->amd && !h.heap_v1 && !h.hostcall_buffer,
	      "the failed call gives only the queue");
	CHECK(live_bos() == before, "%u BOs left by the failure", live_bos() - before);
	if (fill)
		kfd_mem_free(a3, fill);
	CHECK(aql_queue_hidden_args(q3, &dm_kernel, &h) == AQL_OK && h.heap_v1 &&
	      h.hostcall_buffer, "with VRAM back, the heap is made: %s", aql_error_message());
	CHECK_OK(aql_queue_destroy(q3));
	CHECK_OK(aql_agent_destroy(a3));
}

static void check_heap(uint64_t heap)
{
	unsigned char *bytes = malloc(HEAP_BYTES);
	uint64_t f[3];
	struct kfdemu_bo b;
	size_t odd = 0;

	CHECK(bo_at(heap, &b) == 0 && b.va == heap && b.domain == KFDEMU_VRAM &&
	      b.size >= HEAP_BYTES && b.mapped,
	      "the heap is a mapped VRAM BO of 128 KiB (domain %u, %llu bytes)", b.domain,
	      (unsigned long long)b.size);
	if (!bytes)
		th_stop("no memory");
	memset(bytes, 0xa5, HEAP_BYTES);
	CHECK_OK(aql_agent_copy(agent, bytes, (void *)(uintptr_t)heap, HEAP_BYTES));
	memcpy(f, bytes + INITIAL_SLABS_AT, sizeof(f));
	for (size_t i = 0; i < HEAP_BYTES; i++)
		odd += (i < INITIAL_SLABS_AT || i >= INITIAL_SLABS_AT + sizeof(f)) && bytes[i];
	CHECK(odd == 0, "the heap holds %zu non-zero bytes besides its initial slabs", odd);
	CHECK(f[0] && f[0] == f[2] && f[1] == f[0] + 8 * MIB && f[0] % (2 * MIB) == 0,
	      "initial slabs 0x%llx..0x%llx, start 0x%llx", (unsigned long long)f[0],
	      (unsigned long long)f[1], (unsigned long long)f[2]);
	CHECK(bo_at(f[0], &b) == 0 && b.va == f[0] && b.domain == KFDEMU_VRAM &&
	      b.size >= 8 * MIB && b.mapped,
	      "the slabs are a mapped VRAM BO of 8 MiB (domain %u, %llu bytes)", b.domain,
	      (unsigned long long)b.size);
	free(bytes);
}

static void check_buffer(struct hc_buffer *b)
{
	const struct kfd_node *n = ((struct kfd_agent *)agent)->node;
	uint64_t waves = (uint64_t)n->cus * n->waves_per_cu;
	/* The listener runs beside this: the stacks are read atomically. */
	uint64_t free_top = __atomic_load_n(&b->free_stack, __ATOMIC_RELAXED);
	uint64_t ready = __atomic_load_n(&b->ready_stack, __ATOMIC_RELAXED);
	uint64_t packets = free_top + 1, seen = 0, p;
	struct hc_header *hd = (struct hc_header *)(uintptr_t)b->headers;
	aql_signal *db = aql_signal_from_handle(b->doorbell);
	unsigned char *visited = calloc(b->index_mask + 1, 1);
	struct kfdemu_bo bo;

	CHECK(packets >= waves && ((b->index_mask + 1) & b->index_mask) == 0 &&
	      b->index_mask >= packets - 1 && b->index_mask / 2 < packets - 1,
	      "%llu packets, index mask 0x%llx, for %u CUs of %u waves",
	      (unsigned long long)packets, (unsigned long long)b->index_mask, n->cus,
	      n->waves_per_cu);
	CHECK(b->headers % 8 == 0 && b->payloads % 64 == 0 &&
	      b->headers >= (uintptr_t)b + sizeof(*b) &&
	      b->payloads >= b->headers + packets * sizeof(struct hc_header),
	      "headers at 0x%llx, payloads at 0x%llx", (unsigned long long)b->headers,
	      (unsigned long long)b->payloads);
	CHECK(bo_at((uintptr_t)b, &bo) == 0 && bo.mapped &&
	      bo_at(b->payloads + packets * sizeof(struct hc_payload) - 1, &bo) == 0,
	      "the GPU reaches the whole buffer");
	CHECK(db && db->kind == AQL_SIGNAL_KIND_USER && db->event_mailbox_ptr && db->event_id,
	      "the doorbell is a signal with a KFD event");
	CHECK(ready == 0, "ready stack 0x%llx, free stack 0x%llx", (unsigned long long)ready,
	      (unsigned long long)free_top);
	/* Each packet once, then 0; a repeat or an index past the last
	 * packet stops the walk. */
	for (p = free_top; p && visited;
	     p = __atomic_load_n(&hd[p & b->index_mask].next, __ATOMIC_RELAXED)) {
		if ((p & b->index_mask) >= packets || visited[p & b->index_mask])
			break;
		visited[p & b->index_mask] = 1;
		seen++;
	}
	CHECK(seen == packets && p == 0, "the free stack holds %llu of %llu packets, then 0x%llx",
	      (unsigned long long)seen, (unsigned long long)packets, (unsigned long long)p);
	free(visited);
}

static void check_devmem(struct hc_buffer *b)
{
	uint64_t in[8] = { 0 }, out[2], big, small;
	struct kfd_hostcall_stats s0 = stats(), s;
	struct kfdemu_bo bo;
	aql_agent_info info;
	char want[64];

	in[1] = 2 * MIB;
	CHECK(call1(b, 3, in, out) == 0, "DEVMEM 2 MiB answered");
	big = out[0];
	CHECK(big && big % (2 * MIB) == 0 && bo_at(big, &bo) == 0 && bo.va == big &&
	      bo.domain == KFDEMU_VRAM && bo.size >= 2 * MIB && bo.mapped,
	      "2 MiB of device memory at 0x%llx, 2 MiB aligned, a VRAM BO",
	      (unsigned long long)big);
	in[1] = 10000;
	CHECK(call1(b, 3, in, out) == 0, "DEVMEM 10000 bytes answered");
	small = out[0];
	CHECK(small && small % 4096 == 0 && bo_at(small, &bo) == 0 && bo.va == small &&
	      bo.domain == KFDEMU_VRAM && bo.size >= 10000,
	      "10000 bytes at 0x%llx, page aligned, a VRAM BO", (unsigned long long)small);
	in[1] = 0;
	in[0] = big;
	CHECK(call1(b, 3, in, out) == 0 && bo_at(big, &bo) != 0, "the 2 MiB freed");
	in[0] = small;
	CHECK(call1(b, 3, in, out) == 0 && bo_at(small, &bo) != 0, "the 10000 bytes freed");
	CHECK(stats().failures == s0.failures, "no failure counted so far");
	aql_agent_get_info(agent, &info);
	in[0] = 0;
	in[1] = info.memory_size + 4096;
	CHECK(call1(b, 3, in, out) == 0 && out[0] == 0, "DEVMEM of more than the VRAM answered 0");
	s = stats();
	snprintf(want, sizeof(want), "device malloc of %llu bytes",
		 (unsigned long long)in[1]);
	CHECK(s.failures == s0.failures + 1 && strstr(s.first_failure, want),
	      "and counted (%llu), the first failure kept: %s", (unsigned long long)s.failures,
	      s.first_failure);
	s0 = s;
	in[0] = small;
	CHECK(call1(b, 3, in, out) == 0 && out[0] == 0, "a second free answered 0");
	s = stats();
	CHECK(s.failures == s0.failures + 1, "the unknown free is counted (%llu)",
	      (unsigned long long)s.failures);
}

static void check_calls(struct hc_buffer *b)
{
	uint64_t in[8] = { (uint64_t)(uintptr_t)host_fn, 3, 5, 7, 11, 13, 17, 19 }, out[2];
	struct kfd_hostcall_stats s0 = stats();

	CHECK(call1(b, 1, in, out) == 0 && out[0] == 3 + 10 + 21 + 44 + 65 + 102 + 133 &&
	      out[1] == ~3ull, "FUNCTION_CALL: %llu, 0x%llx", (unsigned long long)out[0],
	      (unsigned long long)out[1]);
	in[0] = 42;
	CHECK(call1(b, 77, in, out) == 0 && out[0] == 0 && out[1] == 0,
	      "an unknown service is answered with zeros");
	CHECK(call1(b, 2, in, out) == 0 && out[0] == 0 && out[1] == 0,
	      "printf through hostcall is answered with zeros");
	CHECK(stats().failures == s0.failures + 2, "both counted (%llu)",
	      (unsigned long long)stats().failures);
}

struct wave_arg {
	struct hc_buffer *b;
	unsigned seed;
	int bad;
};

/* Function calls on a varying set of lanes, every third round a
 * DEVMEM alloc and free on each lane. */
static void *wave_thread(void *p)
{
	struct wave_arg *w = p;
	uint64_t slots[64][8], ret[64][2];

	for (int r = 0; r < ROUNDS && !w->bad; r++) {
		uint64_t lanes = ((uint64_t)rand_r(&w->seed) << 32 | (uint64_t)rand_r(&w->seed)) |
				 1ull << (r % 64);
		int devmem = r % 3 == 2;

		for (int l = 0; l < 64; l++) {
			slots[l][0] = devmem ? 0 : (uint64_t)(uintptr_t)host_fn;
			for (int i = 1; i < 8; i++)
				slots[l][i] = devmem ? (i == 1 ? 4096u * (1 + l % 3) : 0)
						     : (uint64_t)rand_r(&w->seed);
		}
		if (wave_call(w->b, devmem ? 3 : 1, lanes, slots, ret)) {
			w->bad = 1;
			break;
		}
		for (uint64_t m = lanes; m; m &= m - 1) {
			int l = __builtin_ctzll(m);
			uint64_t want[2];

			if (devmem) {
				w->bad |= !ret[l][0] || ret[l][0] % 4096;
				slots[l][0] = ret[l][0];
				slots[l][1] = 0;
				continue;
			}
			host_fn(want, &slots[l][1]);
			w->bad |= ret[l][0] != want[0] || ret[l][1] != want[1];
		}
		if (devmem && !w->bad && wave_call(w->b, 3, lanes, slots, ret))
			w->bad = 1;
	}
	return NULL;
}

static void check_stress(struct hc_buffer *b)
{
	struct wave_arg w[WAVES];
	pthread_t t[WAVES];
	struct kfd_hostcall_stats s0 = stats(), s;
	uint32_t before = live_bos();
	int bad = 0;

	for (int i = 0; i < WAVES; i++) {
		w[i] = (struct wave_arg){ b, 1234u + (unsigned)i, 0 };
		CHECK(pthread_create(&t[i], NULL, wave_thread, &w[i]) == 0, "wave %d", i);
	}
	for (int i = 0; i < WAVES; i++) {
		pthread_join(t[i], NULL);
		bad += w[i].bad;
	}
	s = stats();
	CHECK(bad == 0, "%d of %d waves got a wrong or no answer", bad, WAVES);
	CHECK(s.failures == s0.failures && s.requests > s0.requests,
	      "%llu lanes served, %llu failed", (unsigned long long)(s.requests - s0.requests),
	      (unsigned long long)(s.failures - s0.failures));
	CHECK(live_bos() == before, "%u BOs after the stress, %u before", live_bos(), before);
}

/* A second agent of the same GPU: its heap, slabs, buffer and a block
 * the device never freed all go with it. */
static void check_destroy(void)
{
	aql_agent *a2 = NULL;
	aql_queue *q2 = NULL;
	aql_kernarg_hidden h;
	struct hc_buffer *b;
	struct kfdemu_bo bo;
	uint64_t in[8] = { 0, 3 * MIB }, out[2] = { 0 }, slabs = 0;
	uint32_t before;

	CHECK_OK(aql_agent_open(AQL_AGENT_AMD, 0, &a2));
	if (!a2)
		return;
	before = live_bos();
	CHECK_OK(aql_queue_create(a2, NULL, &q2));
	CHECK_OK(aql_queue_hidden_args(q2, &dm_kernel, &h));
	b = (struct hc_buffer *)(uintptr_t)h.hostcall_buffer;
	CHECK(b && call1(b, 3, in, out) == 0 && out[0], "a block the device keeps");
	CHECK_OK(aql_agent_copy(a2, &slabs, (char *)(uintptr_t)h.heap_v1 + INITIAL_SLABS_AT + 16,
				sizeof(slabs)));
	CHECK_OK(aql_queue_destroy(q2));
	CHECK_OK(aql_agent_destroy(a2));
	CHECK(bo_at(h.heap_v1, &bo) != 0 && bo_at(slabs, &bo) != 0 && bo_at(out[0], &bo) != 0 &&
	      bo_at(h.hostcall_buffer, &bo) != 0,
	      "heap, slabs, the kept block and the buffer are gone");
	CHECK(live_bos() <= before, "%u BOs after destroy, %u before the agent's first queue",
	      live_bos(), before);
}

int main(void)
{
	aql_kernarg_hidden h, again;
	struct hc_buffer *b;

	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	interrupt_fn = (kfdemu_event_interrupt_fn)th_kfdemu_sym("kfdemu_event_interrupt");
	gpu_id = ((struct kfd_agent *)agent)->node->gpu_id;
	CHECK_OK(aql_queue_create(agent, NULL, &queue));
	if (!queue)
		return th_finish();
	check_plain();
	CHECK(aql_queue_hidden_args(queue, &dm_kernel, &h) == AQL_OK, "dm kernel: %s",
	      aql_error_message());
	CHECK(h.queue_ptr == (uint64_t)(uintptr_t)queue->amd && h.heap_v1 && h.hostcall_buffer,
	      "dm kernel: heap 0x%llx, hostcall 0x%llx", (unsigned long long)h.heap_v1,
	      (unsigned long long)h.hostcall_buffer);
	CHECK(aql_queue_hidden_args(queue, &dm_kernel, &again) == AQL_OK &&
	      again.heap_v1 == h.heap_v1 && again.hostcall_buffer == h.hostcall_buffer,
	      "a second call gets the same heap and buffer");
	if (h.heap_v1 && h.hostcall_buffer) {
		b = (struct hc_buffer *)(uintptr_t)h.hostcall_buffer;
		check_heap(h.heap_v1);
		check_buffer(b);
		check_devmem(b);
		check_calls(b);
		check_stress(b);
	}
	CHECK_OK(aql_queue_destroy(queue));
	check_cpu();
	check_enomem();
	check_destroy();
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
