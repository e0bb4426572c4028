/* SPDX-License-Identifier: MIT */
/*
 * User queues: CREATE_QUEUE, UPDATE_QUEUE, DESTROY_QUEUE and the process's
 * doorbells, as amdkfd keeps them (kfd_chardev.c kfd_ioctl_create_queue,
 * kfd_queue.c kfd_queue_acquire_buffers, kfd_process_queue_manager.c,
 * kfd_doorbell.c). Only AQL compute queues are modelled; each runs an
 * emulated command processor (cp.c). AQL_KFD_EMU_CHECKS picks which
 * kernel's queue-buffer rules apply. sys.c holds its lock around every
 * call here.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "aql/queue.h"
#include "emu.h"

/* kfd_priv.h KFD_MAX_NUM_OF_QUEUES_PER_PROCESS */
#define MAX_QUEUES 1024
/* The kernel-internal ENOTSUPP that set_queue_properties_from_user returns. */
#define ENOTSUPP 524
/* x86-64 TASK_SIZE_MAX (4-level paging): access_ok's bound */
#define TASK_SIZE_MAX ((1ull << 47) - 4096)
#define PAGE 4096ull

/* The queue buffers a queue holds a reference on (kfd_queue_acquire_buffers). */
enum { BUF_WPTR, BUF_RPTR, BUF_RING, BUF_EOP, BUF_CWSR, BUFS };

struct queue {
	int used;
	const struct emu_gpu *gpu;
	uint32_t doorbell;		/* index in the GPU's doorbell slice */
	uint64_t bufs[BUFS];		/* handles with a queue reference */
	uint32_t held;			/* bit i: bufs[i] is held */
	struct emu_cp *cp;
	/* What CREATE_QUEUE and UPDATE_QUEUE set (kfdemu_queue_at). */
	uint64_t ring;
	uint32_t ring_size;
	uint32_t percentage;
	uint32_t priority;
	uint32_t updates;
};

static struct {
	struct queue queues[MAX_QUEUES];	/* by queue id */
	/* kfd_alloc_process_doorbells: the process's slice per GPU, a memfd
	 * the caller maps and the CPs' own view of it */
	int doorbell_fd[EMU_MAX_GPUS];
	uint64_t *doorbells[EMU_MAX_GPUS];
} qs;

/* kfd_doorbell.c kfd_doorbell_process_slice: 1024 doorbells of 8 bytes
 * from gfx9 on, of 4 before. */
static uint64_t slice(const struct emu_gpu *g)
{
	return emu_model_gfx_version(g->model) >= 90000 ? 8192 : 4096;
}

/* access_ok(addr, size) on x86-64: the range is below the user limit. */
static int access_ok(uint64_t addr, uint64_t size)
{
	return addr <= TASK_SIZE_MAX && size <= TASK_SIZE_MAX - addr;
}

static void release(struct queue *q)
{
	for (int i = 0; i < BUFS; i++)
		if (q->held & 1u << i)
			emu_memory_queue_buffer_put(q->gpu, q->bufs[i]);
	q->held = 0;
}

void emu_queue_reset(void)
{
	for (int i = 0; i < MAX_QUEUES; i++)
		if (qs.queues[i].used)
			emu_cp_stop(qs.queues[i].cp);
	for (uint32_t g = 0; g < emu_config()->ngpus; g++) {
		if (qs.doorbells[g])
			munmap(qs.doorbells[g], slice(&emu_config()->gpus[g]));
		if (qs.doorbell_fd[g] > 0)
			close(qs.doorbell_fd[g]);
	}
	memset(&qs, 0, sizeof(qs));
	emu_cp_reset();
}

void emu_queue_stats(struct kfdemu_stats *out)
{
	out->queues = out->queues_halted = 0;
	for (int i = 0; i < MAX_QUEUES; i++)
		if (qs.queues[i].used) {
			out->queues++;
			out->queues_halted += (uint32_t)emu_cp_halted(qs.queues[i].cp);
		}
}

uint32_t emu_queue_count(void)
{
	uint32_t n = 0;

	for (int i = 0; i < MAX_QUEUES; i++)
		n += qs.queues[i].used != 0;
	return n;
}

static uint32_t gpu_queues(const struct emu_gpu *g)
{
	uint32_t n = 0;

	for (int i = 0; i < MAX_QUEUES; i++)
		n += qs.queues[i].used && qs.queues[i].gpu == g;
	return n;
}

/* kfd_doorbell.c kfd_alloc_process_doorbells: the slice, once per GPU. */
static int doorbells_alloc(const struct emu_gpu *g)
{
	uint32_t i = g->node - 1;
	void *p;

	if (qs.doorbells[i])
		return 0;
	qs.doorbell_fd[i] = memfd_create("kfd-emu:doorbells", MFD_CLOEXEC);
	if (qs.doorbell_fd[i] < 0 || ftruncate(qs.doorbell_fd[i], (off_t)slice(g))) {
		if (qs.doorbell_fd[i] >= 0)
			close(qs.doorbell_fd[i]);
		qs.doorbell_fd[i] = 0;
		return -ENOMEM;
	}
	p = mmap(NULL, slice(g), PROT_READ | PROT_WRITE, MAP_SHARED, qs.doorbell_fd[i], 0);
	if (p == MAP_FAILED) {
		close(qs.doorbell_fd[i]);
		qs.doorbell_fd[i] = 0;
		return -ENOMEM;
	}
	qs.doorbells[i] = p;
	return 0;
}

/*
 * kfd_queue.c kfd_queue_acquire_buffers (6.12, "Validate user queue
 * buffers"; the CWSR size rule relaxed to at-least by 15bd4958fe38, late
 * 2025): every buffer an exact GPU mapping of this GPU's VM, with a queue
 * reference each. Every refusal is -EINVAL.
 */
static int acquire_buffers(struct queue *q, const struct kfd_ioctl_create_queue_args *a,
			   uint32_t ring_size)
{
	const struct emu_config *c = emu_config();
	struct emu_queue_props n;
	uint64_t ring_bytes = ring_size, total;
	int r;

	if (c->checks == EMU_CHECKS_6_1)
		return 0;
	emu_model_queue_props(q->gpu->model, &n);
	/* "AQL queues on GFX7 and GFX8 appear twice their actual size" */
	if (emu_model_gfx_version(q->gpu->model) < 90000)
		ring_bytes /= 2;
	r = emu_memory_queue_buffer_get(q->gpu, a->write_pointer_address, PAGE, &q->bufs[BUF_WPTR]);
	if (r)
		goto fail;
	q->held |= 1u << BUF_WPTR;
	r = emu_memory_queue_buffer_get(q->gpu, a->read_pointer_address, PAGE, &q->bufs[BUF_RPTR]);
	if (r)
		goto fail;
	q->held |= 1u << BUF_RPTR;
	r = emu_memory_queue_buffer_get(q->gpu, a->ring_base_address, ring_bytes, &q->bufs[BUF_RING]);
	if (r)
		goto fail;
	q->held |= 1u << BUF_RING;
	/* EOP: only when given, of the node's eop_buffer_size */
	if (a->eop_buffer_address) {
		r = -EINVAL;
		if (a->eop_buffer_size != n.eop_buffer_size)
			goto fail;
		r = emu_memory_queue_buffer_get(q->gpu, a->eop_buffer_address, a->eop_buffer_size,
						&q->bufs[BUF_EOP]);
		if (r)
			goto fail;
		q->held |= 1u << BUF_EOP;
	}
	r = -EINVAL;
	if (a->ctl_stack_size != n.ctl_stack_size)
		goto fail;
	if (c->checks == EMU_CHECKS_6_12 ? a->ctx_save_restore_size != n.cwsr_size
					 : a->ctx_save_restore_size < n.cwsr_size)
		goto fail;
	/* per XCC, save area and debug area; 6.12 the node's size, later the
	 * caller's, in 64 bits (the Jul 2026 overflow fix) */
	total = (uint64_t)(c->checks == EMU_CHECKS_6_12 ? n.cwsr_size : a->ctx_save_restore_size) +
		n.debug_memory_size;
	total = (total * n.num_xcc + PAGE - 1) & ~(PAGE - 1);
	/* (an SVM range with GPU_ALWAYS_MAPPED would do too: no SVM here) */
	r = emu_memory_queue_buffer_get(q->gpu, a->ctx_save_restore_address, total,
					&q->bufs[BUF_CWSR]);
	if (r)
		goto fail;
	q->held |= 1u << BUF_CWSR;
	return 0;
fail:
	release(q);
	return r;
}

/* kfd_chardev.c set_queue_properties_from_user, in its order. */
static int check_properties(struct kfd_ioctl_create_queue_args *a)
{
	/* bits 8-15 of the percentage are the PM4 target XCC */
	if ((a->queue_percentage & 0xff) > KFD_MAX_QUEUE_PERCENTAGE)
		return -EINVAL;
	if (a->queue_priority > KFD_MAX_QUEUE_PRIORITY)
		return -EINVAL;
	if (a->ring_base_address && !access_ok(a->ring_base_address, sizeof(uint64_t)))
		return -EFAULT;
	if (a->ring_size & (a->ring_size - 1))
		return -EINVAL;
	/* e90711946b53 (stable back to 5.4): a smaller ring is raised */
	if (a->ring_size < KFD_MIN_QUEUE_RING_SIZE)
		a->ring_size = KFD_MIN_QUEUE_RING_SIZE;
	if (!access_ok(a->read_pointer_address, sizeof(uint32_t)) ||
	    !access_ok(a->write_pointer_address, sizeof(uint32_t)))
		return -EFAULT;
	if (a->eop_buffer_address && !access_ok(a->eop_buffer_address, sizeof(uint32_t)))
		return -EFAULT;
	if (a->ctx_save_restore_address && !access_ok(a->ctx_save_restore_address, sizeof(uint32_t)))
		return -EFAULT;
	switch (a->queue_type) {
	case KFD_IOC_QUEUE_TYPE_COMPUTE_AQL:
		return 0;
	case KFD_IOC_QUEUE_TYPE_COMPUTE:
	case KFD_IOC_QUEUE_TYPE_SDMA:
	case KFD_IOC_QUEUE_TYPE_SDMA_XGMI:
	case 4:				/* SDMA_BY_ENG_ID, 1.17 */
		fprintf(stderr, "kfd-emu: only AQL compute queues are emulated: -ENOSYS\n");
		return -ENOSYS;
	default:
		return -ENOTSUPP;
	}
}

/* kfd_chardev.c kfd_ioctl_create_queue */
int emu_create_queue(void *data)
{
	struct kfd_ioctl_create_queue_args *a = data;
	struct emu_queue_props n;
	const struct emu_gpu *g;
	struct queue nq, *q = NULL;
	struct emu_cp_queue cq;
	uint32_t id = 0, bell;
	int r;

	r = check_properties(a);
	if (r)
		return r;
	/* kfd_process_device_data_by_id: "Could not find gpu id" */
	g = emu_gpu_by_id(a->gpu_id);
	if (!g)
		return -EINVAL;
	/* kfd_bind_process_to_device fails: -ESRCH */
	if (!emu_process_vm_file(g))
		return -ESRCH;
	r = doorbells_alloc(g);
	if (r)
		return r;
	nq = (struct queue){ .gpu = g };
	r = acquire_buffers(&nq, a, a->ring_size);
	if (r)
		return r;
	/* pqm_create_queue: the HWS limit of the device, then a queue id
	 * (find_available_queue_slot: none left, -ENOMEM) */
	emu_model_queue_props(g->model, &n);
	r = gpu_queues(g) >= n.max_queues ? -ENOSPC : -ENOMEM;
	for (; r == -ENOMEM && id < MAX_QUEUES; id++)
		if (!qs.queues[id].used) {
			q = &qs.queues[id];
			r = 0;
			break;
		}
	/* AQL_KFD_EMU_FAIL=create_queue: the queue manager refuses */
	if (!r)
		r = emu_config()->fail_create_queue;
	if (r) {
		release(&nq);
		return r;
	}
	/*
	 * allocate_doorbell: the lowest doorbell free in the process's slice
	 * (the kernel also keeps SDMA doorbells out of it, not modelled).
	 */
	for (bell = 0; bell < slice(g) / 8; bell++) {
		int taken = 0;

		for (int i = 0; i < MAX_QUEUES && !taken; i++)
			taken = qs.queues[i].used && qs.queues[i].gpu == g && qs.queues[i].doorbell == bell;
		if (!taken)
			break;
	}
	nq.doorbell = bell;
	cq = (struct emu_cp_queue){
		.gpu = g, .queue_id = id, .ring = a->ring_base_address, .ring_size = a->ring_size,
		.amd_queue = a->read_pointer_address - offsetof(aql_amd_queue, read_dispatch_id),
		.doorbell = &qs.doorbells[g->node - 1][bell],
	};
	r = emu_cp_start(&cq, &nq.cp);
	if (r) {
		release(&nq);
		return r;
	}
	nq.used = 1;
	nq.ring = a->ring_base_address;
	nq.ring_size = a->ring_size;
	nq.percentage = a->queue_percentage & 0xff;
	nq.priority = a->queue_priority;
	*q = nq;
	a->queue_id = id;
	/* KFD_MMAP_TYPE_DOORBELL | gpu_id, and on SOC15 the doorbell's byte
	 * offset in the slice */
	a->doorbell_offset = KFD_MMAP_TYPE_DOORBELL |
			     (uint64_t)(g->gpu_id & 0xffff) << KFD_MMAP_GPU_ID_SHIFT;
	if (emu_model_gfx_version(g->model) >= 90000)
		a->doorbell_offset |= (uint64_t)bell * 8;
	return 0;
}

/*
 * kfd_chardev.c kfd_ioctl_destroy_queue → pqm_destroy_queue: the HQD is
 * preempted (the CP stops here, before the ioctl returns), then the
 * queue's buffer references go, so UNMAP and FREE work again.
 */
int emu_destroy_queue(void *data)
{
	const struct kfd_ioctl_destroy_queue_args *a = data;
	struct queue *q;

	/* "Queue id does not match any known queue" */
	if (a->queue_id >= MAX_QUEUES || !qs.queues[a->queue_id].used)
		return -EINVAL;
	q = &qs.queues[a->queue_id];
	emu_cp_stop(q->cp);
	release(q);
	memset(q, 0, sizeof(*q));
	return 0;
}

/*
 * kfd_chardev.c kfd_ioctl_update_queue: percentage, priority, ring size
 * and address checked as at creation, a ring under 1 KiB raised to it;
 * then pqm_update_queue_properties: an unknown id -EFAULT, and from 6.12
 * ("Validate user queue update") a ring that is not exactly the GPU
 * mapping of a BO -EFAULT, its queue reference moving to the new ring.
 * The new priority and percentage are kept for kfdemu_queue_at; the
 * emulated CP runs at one speed whatever they are. What the kernel also
 * takes is not modelled (-ENOSYS): another ring, and a NULL ring or
 * percentage 0, which unmap the queue.
 */
int emu_update_queue(void *data)
{
	struct kfd_ioctl_update_queue_args *a = data;
	uint32_t ring_size = a->ring_size;
	uint64_t ring = 0;
	struct queue *q;

	if ((a->queue_percentage & 0xff) > KFD_MAX_QUEUE_PERCENTAGE)
		return -EINVAL;
	if (a->queue_priority > KFD_MAX_QUEUE_PRIORITY)
		return -EINVAL;
	if (a->ring_base_address && !access_ok(a->ring_base_address, sizeof(uint64_t)))
		return -EFAULT;
	if (ring_size & (ring_size - 1))
		return -EINVAL;
	if (ring_size < KFD_MIN_QUEUE_RING_SIZE)
		ring_size = KFD_MIN_QUEUE_RING_SIZE;
	/* "No queue %d exists for update operation" */
	if (a->queue_id >= MAX_QUEUES || !qs.queues[a->queue_id].used)
		return -EFAULT;
	q = &qs.queues[a->queue_id];
	/* "ring buf 0x%llx size 0x%llx not mapped on GPU" */
	if (a->ring_base_address && emu_config()->checks != EMU_CHECKS_6_1 &&
	    emu_memory_queue_buffer_get(q->gpu, a->ring_base_address, ring_size, &ring))
		return -EFAULT;
	if (!a->ring_base_address || (a->queue_percentage & 0xff) == 0 ||
	    a->ring_base_address != q->ring || ring_size != q->ring_size) {
		if (ring)
			emu_memory_queue_buffer_put(q->gpu, ring);
		fprintf(stderr, "kfd-emu: UPDATE_QUEUE that moves or unmaps the queue is not "
			"emulated: -ENOSYS\n");
		return -ENOSYS;
	}
	if (ring) {
		emu_memory_queue_buffer_put(q->gpu, q->bufs[BUF_RING]);
		q->bufs[BUF_RING] = ring;
	}
	q->percentage = a->queue_percentage & 0xff;
	q->priority = a->queue_priority;
	/* AQL_KFD_EMU_FAIL=update_queue: dqm's update_queue fails after the
	 * properties were set (-ETIME: the HWS did not answer the unmap,
	 * device_queue_manager.c execute_queues_cpsch) */
	if (emu_config()->fail_update_queue)
		return emu_config()->fail_update_queue;
	q->updates++;
	return 0;
}

int emu_queue_at(uint32_t queue_id, struct kfdemu_queue *out)
{
	const struct queue *q;

	if (queue_id >= MAX_QUEUES || !qs.queues[queue_id].used)
		return -1;
	q = &qs.queues[queue_id];
	*out = (struct kfdemu_queue){ .gpu_id = q->gpu->gpu_id, .ring = q->ring,
				      .ring_size = q->ring_size, .percentage = q->percentage,
				      .priority = q->priority, .updates = q->updates };
	return 0;
}

/*
 * kfd_chardev.c kfd_mmap, type DOORBELL → kfd_doorbell.c kfd_doorbell_mmap:
 * the process's doorbell slice of the GPU in the offset.
 */
void *emu_doorbell_mmap(void *addr, size_t length, int prot, int flags, uint64_t offset)
{
	const struct emu_gpu *g = NULL;
	uint32_t id = (uint32_t)((offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT);
	void *p;

	for (uint32_t i = 0; i < emu_config()->ngpus && !g; i++)
		if ((emu_config()->gpus[i].gpu_id & 0xffff) == id)
			g = &emu_config()->gpus[i];
	if (!g)
		return (void *)(intptr_t)-ENODEV;
	if (length != slice(g))
		return (void *)(intptr_t)-EINVAL;
	/*
	 * kfd_get_process_doorbells: none yet. Since the doorbell rework
	 * (Linux 6.6, tied here to 1.14) they come with the first queue;
	 * before, with the process's device data.
	 */
	if (!qs.doorbells[g->node - 1] && (emu_at_least(14) || doorbells_alloc(g)))
		return (void *)(intptr_t)-ENOMEM;
	p = mmap(addr, length, prot, flags, qs.doorbell_fd[g->node - 1], 0);
	return p == MAP_FAILED ? (void *)(intptr_t)-errno : p;
}
