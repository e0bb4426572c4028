/* SPDX-License-Identifier: MIT */
/*
 * Copies on an AMD GPU: a dispatch of the copy kernel (blit.c) in the
 * queue itself. The command processor then orders a copy with the
 * dispatches around it by the barrier bit every timeline packet carries,
 * and no second queue, signal or interrupt takes part. An SDMA queue would
 * leave the compute units to the kernels, but each copy would cost a
 * signal from the AQL queue to the SDMA queue and one back; which is
 * faster is for the hardware run to measure (docs/hardware.md): this
 * path is not run on hardware.
 *
 * libaql embeds a build of the kernel per processor (meson.build,
 * kfd_blits.h); each agent loads its own at open, like any code object.
 * aql_agent_copy() runs on an internal queue of the agent, made at its
 * first use, and stages host memory the GPU cannot reach through a
 * registered buffer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/completion.h>
#include <aql/copy.h>
#include <aql/kernarg.h>

#include "aql/kfd/kfd.h"
#include "aql/timeline.h"
#include "kfd_blits.h"
#include "mem/pages.h"
#include "util/error.h"

/* Work-items per work-group, and bytes each work-item moves at least:
 * a big copy runs whole waves, a small one few work-items. */
#define BLIT_GROUP 256u
#define BLIT_ITEM_BYTES 64u
/* Work-items per CU at most: enough waves to hide memory latency. */
#define BLIT_ITEMS_PER_CU 2048u
/* The staging buffer of aql_agent_copy() for host memory the GPU does not
 * reach. */
#define STAGING_BYTES (4u << 20)

struct blit_image {
	const char *gfx;
	const unsigned char *image;
	const size_t *size;
};

#define AQL_KFD_BLIT(gfx)                                                      \
	extern const unsigned char aql_kfd_blit_##gfx[];                       \
	extern const size_t aql_kfd_blit_##gfx##_size;
AQL_KFD_BLITS
#undef AQL_KFD_BLIT
#define AQL_KFD_BLIT(gfx) { #gfx, aql_kfd_blit_##gfx, &aql_kfd_blit_##gfx##_size },
static const struct blit_image blits[] = {
	AQL_KFD_BLITS
	{ NULL, NULL, NULL }
};
#undef AQL_KFD_BLIT

static aql_status code_pending(struct kfd_agent *a, int locked);

static struct kfd_agent *agent_of(aql_agent *agent)
{
	return (struct kfd_agent *)agent;
}

void kfd_copy_open(struct kfd_agent *a)
{
	const struct blit_image *b = blits;
	size_t len = 0;

	pthread_mutex_init(&a->copy_lock, NULL);
	while (b->gfx && strcmp(b->gfx, a->node->gfx) != 0)
		b++;
	if (!b->gfx) {
		len = (size_t)snprintf(a->no_blit, sizeof(a->no_blit),
				       "this libaql has no copy kernel for %s (built for:",
				       a->node->gfx);
		for (b = blits; b->gfx && len < sizeof(a->no_blit); b++)
			len += (size_t)snprintf(a->no_blit + len, sizeof(a->no_blit) - len, " %s",
						b->gfx);
		if (len < sizeof(a->no_blit))
			snprintf(a->no_blit + len, sizeof(a->no_blit) - len, "%s)",
				 blits[0].gfx ? "" : " none: no clang with AMDGPU");
		return;
	}
	if (aql_code_object_load(&a->base, b->image, *b->size, NULL, &a->blit_object) != AQL_OK ||
	    aql_code_object_kernel(a->blit_object, "aql_kfd_blit", &a->blit) != AQL_OK) {
		snprintf(a->no_blit, sizeof(a->no_blit), "loading the copy kernel: %s",
			 aql_error_message());
		aql_code_object_destroy(a->blit_object);
		a->blit_object = NULL;
		a->blit = NULL;
		return;
	}
	a->base.copy_args = (a->blit->kernarg_size + AQL_KERNARG_ALIGN - 1) &
			    ~(AQL_KERNARG_ALIGN - 1);
}

void kfd_copy_close(struct kfd_agent *a)
{
	if (a->copy_queue) {
		/* kfd_copy() took it out of the agent's count. */
		__atomic_fetch_add(&a->base.queues, 1, __ATOMIC_RELAXED);
		aql_queue_destroy(a->copy_queue);
	}
	kfd_host_free(&a->base, a->staging, STAGING_BYTES);
	kfd_host_free(&a->base, a->pm4_ib, aql_page_size());
	aql_code_object_destroy(a->blit_object);
	pthread_mutex_destroy(&a->copy_lock);
}

static const char *reach_name(enum kfd_reach r)
{
	switch (r) {
	case KFD_REACH_NONE: return "host memory not registered with it";
	case KFD_REACH_OTHER_GPU: return "memory of another GPU";
	default: return "memory it reaches";
	}
}

aql_status kfd_encode_copy(aql_agent *agent, aql_packet *packet, void *dst, const void *src,
			   size_t size, void *args)
{
	struct kfd_agent *a = agent_of(agent);
	aql_dispatch_packet *d = &packet->dispatch;
	uint64_t size64 = size, items;
	aql_kernarg_value vals[3] = {
		{ &dst, sizeof(dst) }, { &src, sizeof(src) }, { &size64, sizeof(size64) },
	};
	enum kfd_reach rd, rs;
	aql_status st;

	if (!a->blit)
		return aql_fail(AQL_ERR_UNSUPPORTED, "AMD agent %u (%s) cannot copy: %s",
				a->info.device_index, a->node->gfx, a->no_blit);
	/* A copy on a queue of the program's: the copy kernel is seen first
	 * (copy_now has done it before its copies reach here). */
	st = code_pending(a, 0);
	if (st != AQL_OK)
		return st;
	memset(packet, 0, sizeof(*packet));
	if (!size) {
		/* Nothing to move: a barrier keeps the packet's place. */
		packet->barrier.header = aql_timeline_header(AQL_PACKET_BARRIER_AND);
		return AQL_OK;
	}
	rd = kfd_mem_reach(a, dst, size);
	rs = src ? kfd_mem_reach(a, src, size) : KFD_REACH_DEVICE;	/* kfd_zero */
	if (rd == KFD_REACH_NONE || rd == KFD_REACH_OTHER_GPU || rs == KFD_REACH_NONE ||
	    rs == KFD_REACH_OTHER_GPU)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"AMD agent %u (%s): a copy of %zu bytes from %p to %p: the %s is %s; "
				"queue copies need memory the GPU reaches (agent memory, typed "
				"buffers, a pool listing the agent); aql_agent_copy() stages other "
				"host memory", a->info.device_index, a->node->gfx, size, src, dst,
				rd == KFD_REACH_NONE || rd == KFD_REACH_OTHER_GPU ? "destination" :
										  "source",
				reach_name(rd == KFD_REACH_NONE || rd == KFD_REACH_OTHER_GPU ? rd : rs));
	items = (size + BLIT_ITEM_BYTES - 1) / BLIT_ITEM_BYTES;
	if (items > (uint64_t)a->info.compute_units * BLIT_ITEMS_PER_CU)
		items = (uint64_t)a->info.compute_units * BLIT_ITEMS_PER_CU;
	d->setup = 1;
	d->workgroup_size_x = (uint16_t)(items < BLIT_GROUP ? items : BLIT_GROUP);
	d->workgroup_size_y = d->workgroup_size_z = 1;
	d->grid_size_x = (uint32_t)items;
	d->grid_size_y = d->grid_size_z = 1;
	d->kernel_object = a->blit->kernel_object;
	d->kernarg_address = (uint64_t)(uintptr_t)args;
	/* The segment and the packet were made for each other: no check fails. */
	aql_kernarg_build(a->blit, d, vals, 3, NULL, args, agent->copy_args);
	d->header = aql_timeline_header(AQL_PACKET_KERNEL_DISPATCH);
	return AQL_OK;
}

/* The agent's own queue, made at its first need. Under copy_lock. */
static aql_status own_queue(struct kfd_agent *a)
{
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };
	aql_status st;

	if (a->copy_queue)
		return AQL_OK;
	st = aql_queue_create(&a->base, &qc, &a->copy_queue);
	if (st != AQL_OK)
		return aql_fail_prefix(st, "the agent's own queue");
	/* The agent's own: aql_agent_destroy() need not wait for it. */
	__atomic_fetch_sub(&a->base.queues, 1, __ATOMIC_RELAXED);
	return AQL_OK;
}

/*
 * PM4 (ROCR-Runtime amd_gpu_pm4.h): a type-3 header has type 3 in bits
 * 30-31, the dwords less 2 in 16-29 and the opcode in 8-15 (the shader
 * type bit is gfx7's only). ACQUIRE_MEM's COHER_CNTL on gfx9, and GCR_CNTL
 * from gfx10, as GpuAgent::InvalidateCodeCaches (amd_gpu_agent.cpp) sets
 * them: the instruction and scalar caches, and L2 (TC) written back and
 * invalidated; COHER_SIZE 0xFFFFFFFF with SIZE_HI 0xFF covers all memory.
 * The emulated CP (tests/kfd_emu/cp.c) spells them again from ROCr on
 * purpose: a bit wrong in one place is caught by the other.
 */
#define PM4_TYPE3(op, dwords) (3u << 30 | ((dwords) - 2u) << 16 | (op) << 8)
#define PM4_INDIRECT_BUFFER 0x3fu
#define PM4_ACQUIRE_MEM 0x58u
#define PM4_IB_VALID (1u << 23)
#define COHER_TC_WB (1u << 18)
#define COHER_TC (1u << 23)
#define COHER_SH_KCACHE (1u << 27)
#define COHER_SH_ICACHE (1u << 29)
#define GCR_GLI_INV_ALL 1u
#define GCR_GLK_INV (1u << 7)
#define GCR_GLV_INV (1u << 8)
#define GCR_GL1_INV (1u << 9)
#define GCR_GL2_INV (1u << 14)
/* The vendor packet format of a PM4 indirect buffer (amd_aql_queue.cpp
 * AqlQueue::ExecutePM4, gfx9 and later). */
#define AMD_FORMAT_PM4_IB 1u

/*
 * Invalidate the GPU's code caches: an ACQUIRE_MEM in a PM4 indirect
 * buffer, run by a vendor packet on the agent's own queue (as ROCr's
 * ExecutePM4 on its utility queue), waited for on the queue's timeline
 * signal, whose KFD event the CP's completion sets. Under copy_lock.
 */
static aql_status invalidate_now(struct kfd_agent *a)
{
	uint32_t gfx_major = a->node->gfx_target_version / 10000, dwords;
	uint32_t pkt[16] = { 0 };
	struct aql_timeline *t;
	aql_completion done;
	const char *why;
	aql_packet p;
	uint64_t ib;
	aql_status st;

	if ((st = own_queue(a)) != AQL_OK)
		return st;
	if (!a->pm4_ib &&
	    (st = kfd_host_alloc(&a->base, aql_page_size(), (void **)&a->pm4_ib)) != AQL_OK)
		return st;
	memset(a->pm4_ib, 0, 8 * sizeof(uint32_t));
	if (gfx_major < 10) {
		dwords = 7;
		a->pm4_ib[1] = COHER_SH_ICACHE | COHER_SH_KCACHE | COHER_TC | COHER_TC_WB;
	} else {
		dwords = 8;
		a->pm4_ib[7] = GCR_GLI_INV_ALL | GCR_GLK_INV | GCR_GLV_INV | GCR_GL1_INV |
			       GCR_GL2_INV;
	}
	a->pm4_ib[0] = PM4_TYPE3(PM4_ACQUIRE_MEM, dwords);
	a->pm4_ib[2] = 0xffffffffu;
	a->pm4_ib[3] = 0xffu;
	ib = (uint64_t)(uintptr_t)a->pm4_ib;
	pkt[0] = (uint32_t)aql_timeline_header(AQL_PACKET_VENDOR_SPECIFIC) |
		 AMD_FORMAT_PM4_IB << 16;
	pkt[1] = PM4_TYPE3(PM4_INDIRECT_BUFFER, 4);
	pkt[2] = (uint32_t)ib & ~3u;
	pkt[3] = (uint32_t)(ib >> 32) & 0xffffu;
	pkt[4] = dwords | PM4_IB_VALID;
	pkt[5] = 0xa;			/* dw_cnt_remain */
	memcpy(&p, pkt, sizeof(p));
	if ((st = aql_timeline_get(a->copy_queue, &t)) != AQL_OK)
		return st;
	aql_lock_take(&t->lock);
	aql_timeline_sign(t, &p, 1);
	st = aql_timeline_emit(t, a->copy_queue, &p, 1, &done);
	aql_lock_release(&t->lock);
	if (st == AQL_OK)
		st = aql_completion_wait(done, AQL_TIMEOUT_INFINITE);
	if (st == AQL_ERR_QUEUE_ERROR && aql_queue_error(a->copy_queue, &why) != AQL_OK)
		return aql_fail(st, "the agent's own queue stopped: %s", why);
	if (st == AQL_OK)
		__atomic_store_n(&a->code_pending, 0, __ATOMIC_RELEASE);
	return st;
}

aql_status kfd_code_loaded(aql_agent *agent, const aql_code_object *co)
{
	const aql_code_object_info *info = aql_code_object_get_info(co);
	struct kfd_agent *a = agent_of(agent);
	char what[128];
	aql_status st;

	kfd_code_note(agent, co);

	/* The copy kernel, loaded at open: the first copy invalidates
	 * (copy_now, kfd_encode_copy), so an agent that never copies makes
	 * no queue. */
	if (!a->opened) {
		__atomic_store_n(&a->code_pending, 1, __ATOMIC_RELEASE);
		return AQL_OK;
	}
	pthread_mutex_lock(&a->copy_lock);
	st = invalidate_now(a);
	pthread_mutex_unlock(&a->copy_lock);
	if (st == AQL_OK)
		return st;
	snprintf(what, sizeof(what), "AMD agent %u (%s): invalidating the code caches after "
		 "loading %zu bytes of code at %p", a->info.device_index, a->node->gfx,
		 info->size, info->base);
	return aql_fail_prefix(st, what);
}

/* Code loaded at open not yet invalidated: do it now, under copy_lock
 * unless locked says the caller holds it. */
static aql_status code_pending(struct kfd_agent *a, int locked)
{
	aql_status st = AQL_OK;
	char what[128];

	if (!__atomic_load_n(&a->code_pending, __ATOMIC_ACQUIRE))
		return AQL_OK;
	if (!locked)
		pthread_mutex_lock(&a->copy_lock);
	if (__atomic_load_n(&a->code_pending, __ATOMIC_ACQUIRE))
		st = invalidate_now(a);
	if (!locked)
		pthread_mutex_unlock(&a->copy_lock);
	if (st == AQL_OK)
		return st;
	snprintf(what, sizeof(what), "AMD agent %u (%s): invalidating the code caches for the "
		 "copy kernel", a->info.device_index, a->node->gfx);
	return aql_fail_prefix(st, what);
}

/* One queue copy on the agent's own queue, waited for. Under copy_lock. */
static aql_status copy_now(struct kfd_agent *a, void *dst, const void *src, size_t size)
{
	aql_completion done;
	aql_status st;

	if ((st = own_queue(a)) != AQL_OK || (st = code_pending(a, 1)) != AQL_OK)
		return st;
	st = aql_timeline_copy(a->copy_queue, dst, src, size, NULL, 0, &done);
	return st == AQL_OK ? aql_completion_wait(done, AQL_TIMEOUT_INFINITE) : st;
}

/* Copy through the staging buffer: one side is host memory the GPU does
 * not reach (host_is_dst: the destination). Under copy_lock. */
static aql_status copy_staged(struct kfd_agent *a, unsigned char *dst, const unsigned char *src,
			      size_t size, int host_is_dst)
{
	aql_status st = AQL_OK;

	if (!a->staging && (st = kfd_host_alloc(&a->base, STAGING_BYTES, &a->staging)) != AQL_OK)
		return st;
	for (size_t done = 0; done < size && st == AQL_OK; done += STAGING_BYTES) {
		size_t n = size - done < STAGING_BYTES ? size - done : STAGING_BYTES;

		if (host_is_dst) {
			st = copy_now(a, a->staging, src + done, n);
			if (st == AQL_OK)
				memcpy(dst + done, a->staging, n);
		} else {
			memcpy(a->staging, src + done, n);
			st = copy_now(a, dst + done, a->staging, n);
		}
	}
	return st;
}

aql_status kfd_copy(aql_agent *agent, void *dst, const void *src, size_t size)
{
	struct kfd_agent *a = agent_of(agent);
	enum kfd_reach rd = kfd_mem_reach(a, dst, size), rs = kfd_mem_reach(a, src, size);
	aql_status st;

	if (rd == KFD_REACH_OTHER_GPU || rs == KFD_REACH_OTHER_GPU)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"AMD agent %u (%s): a copy of %zu bytes from %p to %p: the %s is "
				"memory of another GPU; copy through the host", a->info.device_index,
				a->node->gfx, size, src, dst,
				rd == KFD_REACH_OTHER_GPU ? "destination" : "source");
	/* The host reaches both: no GPU work. */
	if (rd != KFD_REACH_DEVICE && rs != KFD_REACH_DEVICE) {
		memmove(dst, src, size);
		return AQL_OK;
	}
	pthread_mutex_lock(&a->copy_lock);
	if (rd == KFD_REACH_NONE)
		st = copy_staged(a, dst, src, size, 1);
	else if (rs == KFD_REACH_NONE)
		st = copy_staged(a, dst, src, size, 0);
	else
		st = copy_now(a, dst, src, size);
	pthread_mutex_unlock(&a->copy_lock);
	return st;
}

aql_status kfd_zero(struct kfd_agent *a, void *dst, size_t size)
{
	aql_status st;

	if (!a->blit)
		return aql_fail(AQL_ERR_UNSUPPORTED, "AMD agent %u (%s) cannot clear its memory: %s",
				a->info.device_index, a->node->gfx, a->no_blit);
	pthread_mutex_lock(&a->copy_lock);
	st = copy_now(a, dst, NULL, size);
	pthread_mutex_unlock(&a->copy_lock);
	return st;
}
