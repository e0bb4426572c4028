/* SPDX-License-Identifier: MIT */
/*
 * The hidden arguments an AMD agent supplies besides the queue:
 * hidden_heap_v1, the heap of device malloc (ockl dm.cl), and
 * hidden_hostcall_buffer, the buffer of the hostcall service (ockl
 * hostcall_impl.cl), which device malloc calls for memory. Both are made
 * per agent at the first launch of a kernel whose metadata names them and
 * freed at agent destroy. The layouts and the protocol are ockl's, as
 * ROCm's CLR sets them up (rocdevice.cpp HiddenHeapAlloc, devhostcall.cpp).
 * Not run on hardware.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/agent_impl.h"
#include "aql/kfd/kfd.h"
#include "mem/pages.h"
#include "util/error.h"

/* dm.cl's heap_t: all zeroes is its empty state; CLR's size for it. */
#define HEAP_BYTES (128u << 10)
/* heap_t's initial_slabs, initial_slabs_end and initial_slabs_start: the
 * first slab to hand out and the range of the slabs made with the heap. */
#define HEAP_INITIAL_SLABS 108544u
/* Slabs are 2 MiB and 2 MiB aligned: dm.cl finds a block's slab by
 * masking its address. 4 of them: CLR's HIP_INITIAL_DM_SIZE of 8 MiB. */
#define SLAB_BYTES (2u << 20)
#define INITIAL_SLABS 4u

/* The buffer's prefix, what the device reads: every member a u64. */
struct hc_buffer {
	uint64_t headers;		/* struct hc_header[packets] */
	uint64_t payloads;		/* struct hc_payload[packets] */
	uint64_t doorbell;		/* an hsa_signal_t: the aql_signal's address */
	uint64_t free_stack;		/* tagged packet pointers, 0: empty */
	uint64_t ready_stack;
	uint64_t index_mask;		/* packets - 1; the bits above are the tag */
};

struct hc_header {
	uint64_t next;
	uint64_t activemask;		/* the lanes of the wave that take part */
	uint32_t service;
	uint32_t control;		/* bit 0: READY, the host has not answered */
};

/* Eight u64 per lane in, the first two back. */
struct hc_payload {
	uint64_t slots[64][8];
};

enum { HC_READY = 1u };
enum { SERVICE_FUNCTION_CALL = 1, SERVICE_PRINTF = 2, SERVICE_DEVMEM = 3 };

#define HEADERS_AT 64u

struct kfd_hostcall {
	struct kfd_agent *agent;
	struct hc_buffer *buf;		/* host memory registered with the GPU */
	size_t bytes;
	struct hc_header *headers;
	struct hc_payload *payloads;
	aql_signal *doorbell;
	pthread_t thread;
	int stop;			/* atomic: destroy asks the thread to end */
	pthread_mutex_t lock;		/* devmem and stats */
	void **devmem;			/* VRAM the device asked for, not yet freed */
	uint32_t ndevmem, capdevmem;
	struct kfd_hostcall_stats stats;
};

static struct kfd_agent *agent_of(aql_agent *agent)
{
	return (struct kfd_agent *)agent;
}

/* A lane answered with zeros for why; the first reason is kept and
 * printed once, the rest only counted. Under h->lock. */
static void refuse(struct kfd_hostcall *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void refuse(struct kfd_hostcall *h, const char *fmt, ...)
{
	va_list ap;

	if (h->stats.failures++)
		return;
	va_start(ap, fmt);
	vsnprintf(h->stats.first_failure, sizeof(h->stats.first_failure), fmt, ap);
	va_end(ap);
	fprintf(stderr, "libaql: %s agent %u: hostcall: %s (later failures are only counted)\n",
		h->agent->node->gfx, h->agent->info.device_index, h->stats.first_failure);
}

/* DEVMEM: slot[1] bytes of VRAM (2 MiB aligned for a slab), or the free
 * of slot[0]; the address or 0 back in slot[0]. Under h->lock. */
static void devmem(struct kfd_hostcall *h, uint64_t *slot)
{
	uint64_t addr = slot[0], size = slot[1];
	void *p = NULL;

	slot[0] = slot[1] = 0;
	if (size) {
		if (h->ndevmem == h->capdevmem) {
			uint32_t cap = h->capdevmem ? 2 * h->capdevmem : 16;
			void **d = realloc(h->devmem, cap * sizeof(*d));

			if (!d) {
				refuse(h, "device malloc of %llu bytes: no host memory to track it",
				       (unsigned long long)size);
				return;
			}
			h->devmem = d;
			h->capdevmem = cap;
		}
		if (kfd_mem_alloc_aligned(&h->agent->base, size,
					  size == SLAB_BYTES ? SLAB_BYTES : aql_page_size(),
					  &p) != AQL_OK) {
			refuse(h, "device malloc of %llu bytes: %s", (unsigned long long)size,
			       aql_error_message());
			return;
		}
		h->devmem[h->ndevmem++] = p;
		slot[0] = (uint64_t)(uintptr_t)p;
		return;
	}
	for (uint32_t i = 0; i < h->ndevmem; i++)
		if ((uint64_t)(uintptr_t)h->devmem[i] == addr) {
			kfd_mem_free(&h->agent->base, h->devmem[i]);
			h->devmem[i] = h->devmem[--h->ndevmem];
			return;
		}
	if (addr)
		refuse(h, "device free of 0x%llx, which device malloc did not hand out",
		       (unsigned long long)addr);
	else
		refuse(h, "a device memory request with neither address nor size");
}

typedef void (*hc_function)(uint64_t out[2], const uint64_t in[7]);

/* One lane's request, answered in place. */
static void serve(struct kfd_hostcall *h, uint32_t service, uint64_t *slot)
{
	if (service == SERVICE_FUNCTION_CALL && slot[0]) {
		uint64_t out[2] = { 0, 0 };

		((hc_function)(uintptr_t)slot[0])(out, &slot[1]);
		slot[0] = out[0];
		slot[1] = out[1];
		pthread_mutex_lock(&h->lock);
		h->stats.requests++;
		pthread_mutex_unlock(&h->lock);
		return;
	}
	pthread_mutex_lock(&h->lock);
	h->stats.requests++;
	if (service == SERVICE_DEVMEM) {
		devmem(h, slot);
	} else {
		if (service == SERVICE_FUNCTION_CALL)
			refuse(h, "a function call to address 0");
		else if (service == SERVICE_PRINTF)
			refuse(h, "printf through hostcall (service 2) is not served by aql");
		else
			refuse(h, "unknown service %u", service);
		slot[0] = slot[1] = 0;
	}
	pthread_mutex_unlock(&h->lock);
}

/* Take every packet the waves pushed and answer it. Each wave has at most
 * one packet in the stack, so the order does not matter. */
static void serve_ready(struct kfd_hostcall *h)
{
	uint64_t mask = h->buf->index_mask;
	uint64_t p;

	/* The listener also wakes on its timeout: an empty stack is left
	 * unwritten, so an idle agent stores nothing into the shared buffer. */
	if (!__atomic_load_n(&h->buf->ready_stack, __ATOMIC_RELAXED))
		return;
	p = __atomic_exchange_n(&h->buf->ready_stack, 0, __ATOMIC_ACQUIRE);
	while (p) {
		struct hc_header *hd = &h->headers[p & mask];
		struct hc_payload *pl = &h->payloads[p & mask];
		/* Read before the answer: the wave reuses the header after. */
		uint64_t next = __atomic_load_n(&hd->next, __ATOMIC_RELAXED);
		uint64_t lanes = hd->activemask;

		for (; lanes; lanes &= lanes - 1)
			serve(h, hd->service, pl->slots[__builtin_ctzll(lanes)]);
		__atomic_fetch_and(&hd->control, ~(uint32_t)HC_READY, __ATOMIC_RELEASE);
		p = next;
	}
}

/*
 * The listener: one thread per agent, since each agent has its own buffer
 * and doorbell and so one blocking wait. A wave adds 1 to the doorbell
 * after pushing its packet; the thread waits for the value to change.
 * The wait is bounded, as CLR's is, so that a wake-up lost to the
 * device's interrupt costs latency, not a hang.
 */
static void *listen_thread(void *arg)
{
	struct kfd_hostcall *h = arg;
	int64_t seen = 0;

	while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
		aql_signal_wait(h->doorbell, AQL_COND_NE, seen, 20 * 1000 * 1000, AQL_WAIT_BLOCKED,
				&seen);
		serve_ready(h);
	}
	return NULL;
}

static uint32_t next_pow2(uint32_t x)
{
	uint32_t p = 2;

	while (p < x)
		p <<= 1;
	return p;
}

static void hostcall_free(struct kfd_hostcall *h)
{
	kfd_host_free(&h->agent->base, h->buf, h->bytes);
	aql_signal_destroy(h->doorbell);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/*
 * The buffer: one packet for every wave the GPU can hold (a wave waits in
 * at most one; the index mask is the next power of two less one, as ockl
 * takes the index from a pointer's low bits), in host memory the GPU reaches, with every packet on the
 * free stack; the doorbell; the thread. Under a->hidden_lock.
 */
static aql_status hostcall_make(struct kfd_agent *a, struct kfd_hostcall **out)
{
	uint32_t waves = a->node->cus * a->node->waves_per_cu;
	uint32_t n = waves > 2 ? waves : 2, mask = next_pow2(n) - 1;
	size_t payloads_at = aql_page_round(HEADERS_AT + (size_t)n * sizeof(struct hc_header));
	struct kfd_hostcall *h = calloc(1, sizeof(*h));
	aql_status st;
	int r;

	if (!h)
		return aql_fail(AQL_ERR_NOMEM, "no memory for the hostcall service");
	h->agent = a;
	pthread_mutex_init(&h->lock, NULL);
	h->bytes = payloads_at + (size_t)n * sizeof(struct hc_payload);
	st = aql_signal_create(0, &h->doorbell);
	if (st == AQL_OK)
		st = kfd_host_alloc(&a->base, h->bytes, (void **)&h->buf);
	if (st != AQL_OK) {
		hostcall_free(h);
		return st;
	}
	h->headers = (struct hc_header *)((char *)h->buf + HEADERS_AT);
	h->payloads = (struct hc_payload *)((char *)h->buf + payloads_at);
	/* Packet i links to i - 1; packet 0 enters as tag 1 so that its
	 * pointer is not 0, which ends the stack. */
	for (uint32_t i = 1; i < n; i++)
		h->headers[i].next = i == 1 ? (uint64_t)mask + 1 : i - 1;
	*h->buf = (struct hc_buffer){
		.headers = (uint64_t)(uintptr_t)h->headers,
		.payloads = (uint64_t)(uintptr_t)h->payloads,
		.doorbell = aql_signal_handle(h->doorbell),
		.free_stack = n - 1,
		.index_mask = mask,
	};
	r = pthread_create(&h->thread, NULL, listen_thread, h);
	if (r) {
		hostcall_free(h);
		return aql_fail_errno(AQL_ERR_SYSTEM, r, "starting the hostcall thread");
	}
	*out = h;
	return AQL_OK;
}

/* The heap, zeroed, and its initial slabs written into it. Under
 * a->hidden_lock. */
static aql_status heap_make(struct kfd_agent *a)
{
	uint64_t init[3];
	void *heap = NULL, *slabs = NULL;
	aql_status st;

	st = kfd_mem_alloc(&a->base, HEAP_BYTES, &heap);
	if (st == AQL_OK)
		st = kfd_mem_alloc_aligned(&a->base, (size_t)INITIAL_SLABS * SLAB_BYTES, SLAB_BYTES,
					   &slabs);
	if (st == AQL_OK)
		st = kfd_zero(a, heap, HEAP_BYTES);
	if (st == AQL_OK) {
		init[0] = init[2] = (uint64_t)(uintptr_t)slabs;
		init[1] = init[0] + (uint64_t)INITIAL_SLABS * SLAB_BYTES;
		st = kfd_copy(&a->base, (char *)heap + HEAP_INITIAL_SLABS, init, sizeof(init));
	}
	if (st != AQL_OK) {
		if (slabs)
			kfd_mem_free(&a->base, slabs);
		if (heap)
			kfd_mem_free(&a->base, heap);
		return st;
	}
	a->heap_slabs = slabs;
	__atomic_store_n(&a->heap, heap, __ATOMIC_RELEASE);
	return AQL_OK;
}

void kfd_hidden_open(struct kfd_agent *a)
{
	pthread_mutex_init(&a->hidden_lock, NULL);
}

/* Bounded: the thread never waits on a wave, and a wave still waiting
 * on the host at destroy is the program's bug (it spins on). */
void kfd_hidden_close(struct kfd_agent *a)
{
	struct kfd_hostcall *h = a->hostcall;

	if (h) {
		__atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
		aql_signal_add(h->doorbell, 1, AQL_RELEASE);
		pthread_join(h->thread, NULL);
		for (uint32_t i = 0; i < h->ndevmem; i++)
			kfd_mem_free(&a->base, h->devmem[i]);
		free(h->devmem);
		hostcall_free(h);
	}
	if (a->heap) {
		kfd_mem_free(&a->base, a->heap_slabs);
		kfd_mem_free(&a->base, a->heap);
	}
	pthread_mutex_destroy(&a->hidden_lock);
}

aql_status kfd_kernel_hidden(aql_agent *agent, const aql_kernel *kernel, aql_kernarg_hidden *out)
{
	struct kfd_agent *a = agent_of(agent);
	const aql_kernel_metadata *md = kernel->metadata;
	int heap = 0, hostcall = 0;
	struct kfd_hostcall *h;
	void *hp;
	aql_status st = AQL_OK;

	for (uint32_t i = kernel->explicit_arg_count; i < md->arg_count; i++) {
		heap |= md->args[i].kind == AQL_ARG_HIDDEN_HEAP_V1;
		hostcall |= md->args[i].kind == AQL_ARG_HIDDEN_HOSTCALL_BUFFER;
	}
	hp = heap ? __atomic_load_n(&a->heap, __ATOMIC_ACQUIRE) : NULL;
	h = hostcall ? __atomic_load_n(&a->hostcall, __ATOMIC_ACQUIRE) : NULL;
	if ((heap && !hp) || (hostcall && !h)) {
		pthread_mutex_lock(&a->hidden_lock);
		if (heap && !a->heap && (st = heap_make(a)) != AQL_OK)
			aql_fail_prefix(st, "device heap");
		if (st == AQL_OK && hostcall && !a->hostcall) {
			st = hostcall_make(a, &h);
			if (st == AQL_OK)
				__atomic_store_n(&a->hostcall, h, __ATOMIC_RELEASE);
			else
				aql_fail_prefix(st, "hostcall buffer");
		}
		hp = a->heap;
		h = a->hostcall;
		pthread_mutex_unlock(&a->hidden_lock);
		if (st != AQL_OK) {
			char why[160];

			snprintf(why, sizeof(why), "kernel '%s'", kernel->name);
			return aql_fail_prefix(st, why);
		}
	}
	if (heap)
		out->heap_v1 = (uint64_t)(uintptr_t)hp;
	if (hostcall)
		out->hostcall_buffer = (uint64_t)(uintptr_t)h->buf;
	return AQL_OK;
}

aql_status kfd_hostcall_get_stats(aql_agent *agent, struct kfd_hostcall_stats *out)
{
	struct kfd_agent *a = agent_of(agent);
	struct kfd_hostcall *h;

	pthread_mutex_lock(&a->hidden_lock);
	h = a->hostcall;
	if (h) {
		pthread_mutex_lock(&h->lock);
		*out = h->stats;
		pthread_mutex_unlock(&h->lock);
	} else {
		*out = (struct kfd_hostcall_stats){ 0 };
	}
	pthread_mutex_unlock(&a->hidden_lock);
	return h ? AQL_OK : aql_fail(AQL_ERR_NOT_FOUND, "no hostcall service on the agent yet");
}
