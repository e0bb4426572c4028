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
	if (a->staging) {
		kfd_mem_unregister(&a->base, a->staging, STAGING_BYTES);
		free(a->staging);
	}
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

	if (!a->blit)
		return aql_fail(AQL_ERR_UNSUPPORTED, "AMD agent %u (%s) cannot copy: %s",
				a->info.device_index, a->node->gfx, a->no_blit);
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

/* One queue copy on the agent's own queue, waited for. Under copy_lock. */
static aql_status copy_now(struct kfd_agent *a, void *dst, const void *src, size_t size)
{
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };
	aql_completion done;
	aql_status st;

	if (!a->copy_queue) {
		st = aql_queue_create(&a->base, &qc, &a->copy_queue);
		if (st != AQL_OK)
			return aql_fail_prefix(st, "the queue of aql_agent_copy()");
		/* The agent's own: aql_agent_destroy() need not wait for it. */
		__atomic_fetch_sub(&a->base.queues, 1, __ATOMIC_RELAXED);
	}
	st = aql_timeline_copy(a->copy_queue, dst, src, size, NULL, 0, &done);
	return st == AQL_OK ? aql_completion_wait(done, AQL_TIMEOUT_INFINITE) : st;
}

/* Copy through the staging buffer: one side is host memory the GPU does
 * not reach (host_is_dst: the destination). Under copy_lock. */
static aql_status copy_staged(struct kfd_agent *a, unsigned char *dst, const unsigned char *src,
			      size_t size, int host_is_dst)
{
	aql_status st = AQL_OK;

	if (!a->staging) {
		if (posix_memalign(&a->staging, aql_page_size(), STAGING_BYTES) != 0) {
			a->staging = NULL;
			return aql_fail(AQL_ERR_NOMEM, "AMD agent %u: %u bytes of copy staging",
					a->info.device_index, STAGING_BYTES);
		}
		st = kfd_mem_register(&a->base, a->staging, STAGING_BYTES);
		if (st != AQL_OK) {
			free(a->staging);
			a->staging = NULL;
			return st;
		}
	}
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
