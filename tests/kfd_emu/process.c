/* SPDX-License-Identifier: MIT */
/*
 * The kfd_process behind /dev/kfd and the ioctls of discovery: the
 * version, a VM per GPU from its render node, the runtime state, the
 * apertures, XNACK and the scratch backing address. One per process, as
 * amdkfd keeps one per mm. Each refusal names the kernel's rule: file and
 * function in drivers/gpu/drm/amd/amdkfd/, and the version where it
 * matters. sys.c holds its lock around every call here.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "emu.h"

/* kfd_priv.h struct kfd_process_device: one per GPU node. */
struct pdd {
	uint64_t drm_file;		/* the render file of ACQUIRE_VM; 0: none yet */
	uint64_t scratch_va;		/* qpd.sh_hidden_private_base, for scratch later */
};

static struct {
	struct pdd pdds[EMU_MAX_GPUS];
	int runtime_enabled;		/* runtime_info.runtime_state == ENABLED */
	int xnack;
} proc;

void emu_process_reset(void)
{
	memset(&proc, 0, sizeof(proc));
	proc.xnack = emu_config()->xnack;
	/* the CPs first, they raise events and read BOs; then the events,
	 * the event page is a BO */
	emu_queue_reset();
	emu_events_reset();
	emu_memory_reset();
	emu_cache_reset();
}

uint64_t emu_process_vm_file(const struct emu_gpu *gpu)
{
	return proc.pdds[gpu->node - 1].drm_file;
}

void emu_process_stats(struct kfdemu_stats *out)
{
	out->vm_acquired = 0;
	for (uint32_t i = 0; i < emu_config()->ngpus; i++)
		if (proc.pdds[i].drm_file)
			out->vm_acquired |= 1u << i;
	out->runtime_enabled = (uint32_t)proc.runtime_enabled;
	out->xnack = proc.xnack;
}

/* kfd_process_device_data_by_id: the pdd of gpu_id, or NULL. */
static struct pdd *pdd_by_id(uint32_t gpu_id, const struct emu_gpu **gpu)
{
	const struct emu_gpu *g = emu_gpu_by_id(gpu_id);

	if (!g)
		return NULL;
	if (gpu)
		*gpu = g;
	return &proc.pdds[g->node - 1];
}

/* kfd_process.c kfd_bind_process_to_device: the VM must exist. */
static int bind(const struct pdd *pdd)
{
	/* !pdd->drm_priv: no ACQUIRE_VM on this GPU yet */
	return pdd->drm_file ? 0 : -ENODEV;
}

/* kfd_chardev.c kfd_ioctl_get_version: never fails. */
static int get_version(void *data)
{
	struct kfd_ioctl_get_version_args *args = data;

	args->major_version = emu_config()->major;
	args->minor_version = emu_config()->minor;
	return 0;
}

/* kfd_chardev.c kfd_ioctl_acquire_vm */
static int acquire_vm(void *data)
{
	struct kfd_ioctl_acquire_vm_args *args = data;
	const struct emu_gpu *render_gpu, *gpu = NULL;
	struct pdd *pdd;
	uint64_t file;
	int r;

	/* fget(drm_fd) fails: -EINVAL */
	r = emu_render_file((int)args->drm_fd, &render_gpu, &file);
	if (r == -EBADF)
		return -EINVAL;
	pdd = pdd_by_id(args->gpu_id, &gpu);
	if (!pdd)
		return -EINVAL;
	/* Already acquired: the same struct file again is fine, another
	 * one -EBUSY. */
	if (pdd->drm_file)
		return r == 0 && pdd->drm_file == file ? 0 : -EBUSY;
	/*
	 * kfd_process_device_init_vm → amdgpu_file_to_fpriv: a file that is
	 * not an amdgpu DRM file is -EINVAL. A render node of another GPU is
	 * refused too, as the emulation's own rule: the kernel would make
	 * that device's VM this GPU's.
	 */
	if (r || render_gpu != gpu)
		return -EINVAL;
	/* kfd_process_device_init_vm's own failures pass through. */
	if (emu_config()->fail_acquire_vm)
		return emu_config()->fail_acquire_vm;
	pdd->drm_file = file;
	return 0;
}

/*
 * kfd_chardev.c kfd_ioctl_runtime_enable (1.13): with ENABLE,
 * runtime_enable(); without, runtime_disable(), which always succeeds.
 */
static int runtime_enable(void *data)
{
	const struct kfd_ioctl_runtime_enable_args *args = data;

	if (!(args->mode_mask & KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK)) {
		proc.runtime_enabled = 0;
		return 0;
	}
	/* runtime_enable: state not DISABLED → -EBUSY */
	if (proc.runtime_enabled)
		return -EBUSY;
	/* runtime_enable: a device with queues (qpd.queue_count) → -EEXIST */
	if (emu_queue_count())
		return -EEXIST;
	if (emu_config()->fail_runtime_enable)
		return emu_config()->fail_runtime_enable;
	proc.runtime_enabled = 1;
	return 0;
}

/*
 * kfd_flat_memory.c kfd_init_apertures: kfd_init_apertures_v9 for gfx9
 * dGPUs, kfd_init_apertures_vi for gfx8 ones.
 */
static void apertures(const struct emu_gpu *g, struct kfd_process_device_apertures *a)
{
	int gfx9 = emu_model_gfx_version(g->model) >= 90000;

	memset(a, 0, sizeof(*a));
	a->gpu_id = g->gpu_id;
	/* MAKE_LDS_APP_BASE_V9, MAKE_SCRATCH_APP_BASE_V9; the _VI ones */
	a->lds_base = gfx9 ? 1ull << 48 : 1ull << 61;
	a->scratch_base = gfx9 ? 2ull << 48 : (1ull << 61) + 0x100000000ull;
	/* MAKE_LDS_APP_LIMIT, MAKE_SCRATCH_APP_LIMIT */
	a->lds_limit = a->lds_base | 0xffffffffull;
	a->scratch_limit = a->scratch_base | 0xffffffffull;
	/*
	 * SVM_USER_BASE (16 KiB) until the TBA/TMA move of early 2024, then
	 * AMDGPU_VA_RESERVED_BOTTOM (2 MiB); tied here to 1.15 (approx).
	 */
	a->gpuvm_base = emu_at_least(15) ? 2ull << 20 : 16ull << 10;
	/*
	 * gpuvm_size: the VM below the hole (AMDGPU_GMC_HOLE_START), 47 bits
	 * on gfx9; 40 bits on gfx8 (approx, amdgpu_vm_adjust_size).
	 */
	a->gpuvm_limit = (1ull << (gfx9 ? 47 : 40)) - 1;
}

/* kfd_chardev.c kfd_ioctl_get_process_apertures_new */
static int get_process_apertures_new(void *data)
{
	struct kfd_ioctl_get_process_apertures_new_args *args = data;
	const struct emu_config *c = emu_config();
	struct kfd_process_device_apertures pa[EMU_MAX_GPUS];
	uint32_t n = 0, i = 0;

	/* one pdd per GPU the device cgroup allows (kfd_flat_memory.c
	 * kfd_init_apertures skips the others) */
	for (uint32_t g = 0; g < c->ngpus; g++)
		n += !c->gpus[g].denied;

	/* 0 nodes: the count of pdds (one per GPU), nothing else */
	if (args->num_of_nodes == 0) {
		args->num_of_nodes = n;
		return 0;
	}
	/*
	 * More nodes than the topology has GPUs: -EINVAL ("Add upper bound
	 * check for num_of_nodes", amd-gfx, 2026). Older kernels allocated
	 * num_of_nodes entries and filled min(n_pdds, num_of_nodes).
	 */
	if (args->num_of_nodes > n)
		return -EINVAL;
	for (uint32_t g = 0; g < c->ngpus && i < args->num_of_nodes; g++)
		if (!c->gpus[g].denied)
			apertures(&c->gpus[g], &pa[i++]);
	args->num_of_nodes = i;
	return emu_copy_to_user((void *)(uintptr_t)args->kfd_process_device_apertures_ptr, pa,
				i * sizeof(pa[0]));
}

/* kfd_chardev.c kfd_ioctl_set_scratch_backing_va */
static int set_scratch_backing_va(void *data)
{
	struct kfd_ioctl_set_scratch_backing_va_args *args = data;
	struct pdd *pdd = pdd_by_id(args->gpu_id, NULL);
	int r;

	if (!pdd)
		return -EINVAL;
	r = bind(pdd);
	if (r)
		return r;
	pdd->scratch_va = args->va_addr;
	return 0;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * kfd_chardev.c kfd_ioctl_get_clock_counters: never fails. The GPU's
 * counter (amdgpu_amdkfd_get_gpu_clock_counter) where gpu_id is a pdd's,
 * else 0 ("Node without GPU resource"); no VM needed. cpu_clock_counter
 * is ktime_get_raw_ns, system_clock_counter ktime_get_boottime_ns, at
 * system_clock_freq 1 GHz.
 */
static int get_clock_counters(void *data)
{
	struct kfd_ioctl_get_clock_counters_args *args = data;
	const struct emu_gpu *gpu = NULL;

	uint64_t before, after;

	pdd_by_id(args->gpu_id, &gpu);
	/* Together: a sample this thread was preempted within is taken
	 * again, so that a busy test machine does not skew the pair. */
	for (int i = 0; i < 100; i++) {
		before = clock_ns(CLOCK_BOOTTIME);
		args->gpu_clock_counter = gpu ? emu_gpu_clock(gpu) : 0;
		args->cpu_clock_counter = clock_ns(CLOCK_MONOTONIC_RAW);
		after = clock_ns(CLOCK_BOOTTIME);
		if (after - before < 20000)
			break;
	}
	args->system_clock_counter = before + (after - before) / 2;
	args->system_clock_freq = 1000000000u;
	return 0;
}

/*
 * kfd_chardev.c kfd_ioctl_set_xnack_mode (1.5): a negative mode queries.
 * gfx90a and gfx942 both support XNACK, so kfd_process_xnack_mode never
 * refuses (-EPERM) here.
 */
static int set_xnack_mode(void *data)
{
	struct kfd_ioctl_set_xnack_mode_args *args = data;

	if (args->xnack_enabled < 0) {
		args->xnack_enabled = proc.xnack;
		return 0;
	}
	/* "Changing XNACK mode while user queues exist" */
	if (emu_queue_count())
		return -EBUSY;
	proc.xnack = args->xnack_enabled != 0;
	return 0;
}

#define IOCTL(name, fn) [_IOC_NR(AMDKFD_IOC_##name)] = { AMDKFD_IOC_##name, fn }

static const struct {
	unsigned int cmd;
	emu_ioctl_fn fn;
} ioctls[] = {
	IOCTL(GET_VERSION, get_version),
	IOCTL(CREATE_QUEUE, emu_create_queue),
	IOCTL(DESTROY_QUEUE, emu_destroy_queue),
	IOCTL(UPDATE_QUEUE, emu_update_queue),
	IOCTL(CREATE_EVENT, emu_create_event),
	IOCTL(DESTROY_EVENT, emu_destroy_event),
	IOCTL(SET_EVENT, emu_set_event),
	IOCTL(RESET_EVENT, emu_reset_event),
	IOCTL(WAIT_EVENTS, emu_wait_events),
	IOCTL(SET_SCRATCH_BACKING_VA, set_scratch_backing_va),
	IOCTL(GET_CLOCK_COUNTERS, get_clock_counters),
	IOCTL(GET_PROCESS_APERTURES_NEW, get_process_apertures_new),
	IOCTL(ACQUIRE_VM, acquire_vm),
	IOCTL(ALLOC_MEMORY_OF_GPU, emu_alloc_memory_of_gpu),
	IOCTL(FREE_MEMORY_OF_GPU, emu_free_memory_of_gpu),
	IOCTL(MAP_MEMORY_TO_GPU, emu_map_memory_to_gpu),
	IOCTL(UNMAP_MEMORY_FROM_GPU, emu_unmap_memory_from_gpu),
	IOCTL(SET_XNACK_MODE, set_xnack_mode),
	IOCTL(AVAILABLE_MEMORY, emu_available_memory),
	IOCTL(RUNTIME_ENABLE, runtime_enable),
};

unsigned int emu_ioctl_lookup(unsigned int nr, emu_ioctl_fn *fn)
{
	if (nr >= sizeof(ioctls) / sizeof(ioctls[0]) || !ioctls[nr].fn)
		return 0;
	*fn = ioctls[nr].fn;
	return ioctls[nr].cmd;
}
