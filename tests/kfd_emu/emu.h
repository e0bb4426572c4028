/* SPDX-License-Identifier: MIT */
/*
 * The KFD emulation's parts (tests/kfd_emu/): settings, files and the
 * ioctl dispatcher (sys.c), the topology models and their sysfs files
 * (topology.c), and the process state behind the ioctls (process.c).
 * Internal to the library.
 */
#ifndef AQL_TESTS_KFD_EMU_EMU_H
#define AQL_TESTS_KFD_EMU_EMU_H

#include <stdint.h>
#include <stddef.h>

#include "aql/kfd/kfd_abi.h"
#include "aql/packet.h"
#include "kfdemu.h"

/* At most this many GPU nodes: AQL_KFD_EMU_GPUS names them. */
#define EMU_MAX_GPUS 8

struct emu_model;

struct emu_gpu {
	const struct emu_model *model;
	uint32_t node;			/* KFD node id (0 is the CPU) */
	uint32_t gpu_id;
	uint32_t render_minor;		/* /dev/dri/renderD<render_minor> */
	uint32_t simd_id_base;		/* the node's first SIMD id (kfd_crat.c) */
	int denied;			/* AQL_KFD_EMU_DENY: the device cgroup denies it */
	int no_render;			/* AQL_KFD_EMU_NO_RENDER: no render node in /dev */
};

/* Settings, read once from the environment (sys.c). */
struct emu_config {
	char error[160];		/* the setting that could not be read; "" when fine */
	uint32_t major, minor;		/* AQL_KFD_EMU_VERSION */
	uint32_t command_end;		/* AMDKFD_COMMAND_END of that version */
	uint32_t ngpus;
	struct emu_gpu gpus[EMU_MAX_GPUS];
	int xnack;			/* AQL_KFD_EMU_XNACK: the process's first mode */
	/* AQL_KFD_EMU_FAIL: the -errno each fault point returns, 0 if none. */
	int fail_open_kfd;
	int fail_open_render;
	int fail_acquire_vm;
	int fail_runtime_enable;
	int fail_drm_query;		/* drm_query[=ERRNO]: libdrm's query (gpu_query) */
	/* alloc_enomem[:N]: ALLOC_MEMORY_OF_GPU calls after the first N get
	 * -ENOMEM; -1 when the fault is not set. */
	int64_t fail_alloc_after;
	/* AQL_KFD_EMU_CHECKS: which kernel's queue-buffer rules (queue.c) */
	enum { EMU_CHECKS_6_1, EMU_CHECKS_6_12, EMU_CHECKS_2025 } checks;
	int fail_create_queue;		/* create_queue[=ERRNO] */
	int fail_update_queue;		/* update_queue[=ERRNO] */
	/* queue_stop:N, mem_fault:N: the process's CPs complete N packets,
	 * then stop, or fault on the next; -1 when not set. */
	int64_t fail_queue_stop;
	int64_t fail_mem_fault;
	int small_bar;			/* AQL_KFD_EMU_BAR=small */
	uint64_t vram;			/* AQL_KFD_EMU_VRAM; 0: the model's */
	/* ioctl_eintr:every=N|first=N, ioctl_eagain:...: every Nth ioctl, or
	 * the first N, fail before any work; 0 when not set. */
	uint64_t eintr_every, eintr_first, eagain_every, eagain_first;
	uint64_t gpu_clock_hz;		/* AQL_KFD_EMU_GPU_CLOCK_HZ; 0: the model's */
};

/* The settings; never NULL. Thread safe. */
const struct emu_config *emu_config(void);

/* Whether the emulated KFD is version 1.minor or newer. */
int emu_at_least(uint32_t minor);

/* The GPU with this gpu_id, or NULL; NULL for one the device cgroup
 * denies, which the process has no device data of (kfd_flat_memory.c
 * kfd_init_apertures skips it), so every ioctl naming it is -EINVAL. */
const struct emu_gpu *emu_gpu_by_id(uint32_t gpu_id);

/* Copies between the caller's memory and the kernel's copy of the args:
 * 0, or -EFAULT where the caller's range is not mapped (kfd_ioctl). */
int emu_copy_from_user(void *dst, const void *src, size_t n);
int emu_copy_to_user(void *dst, const void *src, size_t n);

/* topology.c */
const struct emu_model *emu_model_find(const char *name);
/* The oldest KFD minor version (1.x) whose kernel has the model. */
uint32_t emu_model_min_minor(const struct emu_model *model);
uint32_t emu_model_gpu_id(const struct emu_model *model);
uint32_t emu_model_simds(const struct emu_model *model);
uint32_t emu_model_gfx_version(const struct emu_model *model);
const char *emu_model_name(const struct emu_model *model);
/* The VRAM bytes of a GPU of this model: AQL_KFD_EMU_VRAM or the model's. */
uint64_t emu_model_vram(const struct emu_model *model);
/*
 * The GPU's timestamp counter (RLC_GPU_CLOCK_COUNT), which GET_CLOCK_COUNTERS
 * reads and the CP writes into profiled signals: ticks of the model's
 * reference clock (AQL_KFD_EMU_GPU_CLOCK_HZ). Thread safe.
 */
uint64_t emu_gpu_clock(const struct emu_gpu *gpu);
/* What libdrm's queries say of a GPU of this model (sys.h gpu_query),
 * with no memory in use. */
struct aql_kfd_gpu_query;
void emu_model_drm(const struct emu_model *model, struct aql_kfd_gpu_query *out);
/* A node's queue properties (kfd_queue.c kfd_queue_ctx_save_restore_size,
 * the HWS queue limit). */
struct emu_queue_props {
	uint32_t cwsr_size, ctl_stack_size, debug_memory_size;	/* per XCC */
	uint32_t eop_buffer_size;
	uint32_t num_xcc;
	uint32_t lds_size;		/* bytes of LDS per work-group */
	uint32_t max_queues;
	uint32_t cus;			/* whole device */
	uint32_t max_slots_scratch_cu;
	uint32_t waves_per_cu;		/* resident: simd_per_cu * max_waves_per_simd */
};
void emu_model_queue_props(const struct emu_model *model, struct emu_queue_props *out);
long emu_read_file(const char *path, char *buf, size_t size);
int emu_list_dir(const char *path, int (*each)(const char *name, void *user), void *user);

/* process.c; all but emu_ioctl_lookup are called with sys.c's lock held. */
typedef int (*emu_ioctl_fn)(void *args);
/*
 * The kernel's own command for ioctl number nr (amdkfd_ioctls[]) and its
 * handler, or 0 when the emulation does not model that ioctl yet.
 */
unsigned int emu_ioctl_lookup(unsigned int nr, emu_ioctl_fn *fn);
/* A new process opened /dev/kfd: the first open after exec or fork. */
void emu_process_reset(void);
void emu_process_stats(struct kfdemu_stats *out);
/* The render file that ACQUIRE_VM gave gpu's VM, 0 when none yet. */
uint64_t emu_process_vm_file(const struct emu_gpu *gpu);

/* memory.c, called with sys.c's lock held: the buffer objects. */
int emu_alloc_memory_of_gpu(void *args);
int emu_free_memory_of_gpu(void *args);
int emu_map_memory_to_gpu(void *args);
int emu_unmap_memory_from_gpu(void *args);
int emu_available_memory(void *args);
/* Drop every BO: a new process. */
void emu_memory_reset(void);
void emu_memory_stats(struct kfdemu_stats *out);
int emu_memory_lookup(uint64_t addr, struct kfdemu_bo *out);
/*
 * mmap of a render node (file_id on gpu) at offset: the BO whose fake
 * offset it is, mapped at addr. The address, or -errno.
 */
void *emu_memory_mmap(const struct emu_gpu *gpu, uint64_t file_id, void *addr, size_t length,
		      int prot, int flags, uint64_t offset);

/*
 * memory.c, for queues. kfd_queue.c kfd_queue_buffer_get: the BO mapped
 * on gpu's VM whose mapping starts at addr's page and, when size is at
 * least a page, is exactly size bytes; its queue reference taken. 0 and
 * *handle, or -EINVAL. With sys.c's lock held.
 */
int emu_memory_queue_buffer_get(const struct emu_gpu *gpu, uint64_t addr, uint64_t size,
				uint64_t *handle);
/* Drop a queue reference of emu_memory_queue_buffer_get. With the lock held. */
void emu_memory_queue_buffer_put(const struct emu_gpu *gpu, uint64_t handle);
/*
 * The emulation's view of [addr, addr + size) in gpu's VM, for the CP:
 * NULL when no BO mapped there holds the whole range (a GPU page fault).
 * On success the BOs cannot change until emu_memory_gpu_end(). Any
 * thread, without sys.c's lock.
 */
void *emu_memory_gpu_begin(const struct emu_gpu *gpu, uint64_t addr, uint64_t size);
/* As emu_memory_gpu_begin, and the BO described in *out. */
void *emu_memory_gpu_begin_bo(const struct emu_gpu *gpu, uint64_t addr, uint64_t size,
			      struct kfdemu_bo *out);
void emu_memory_gpu_end(void);
/* For the code caches (cache.c): fn on every EXECUTABLE BO mapped on gpu
 * that meets [lo, hi), with the bytes the GPU reads there, under the
 * table's read lock. Any thread, without sys.c's lock. */
void emu_memory_each_code(const struct emu_gpu *gpu, uint64_t lo, uint64_t hi,
			  void (*fn)(const struct kfdemu_bo *bo, const void *bytes, void *user),
			  void *user);
/*
 * Before a host build runs: VRAM without CPU access is mapped at its
 * addresses from a CP's hold (each hold maps what came since) until the
 * last CP holding it lets go (memory.c says why). *held: the caller's.
 */
void emu_memory_window_hold(int *held);
void emu_memory_window_release(int *held);

/* kfd_priv.h: what a /dev/kfd mmap offset maps, in its top two bits. */
#define KFD_MMAP_TYPE_MASK (3ull << 62)
#define KFD_MMAP_TYPE_DOORBELL (3ull << 62)
#define KFD_MMAP_TYPE_EVENTS (2ull << 62)
#define KFD_MMAP_GPU_ID_SHIFT 46
#define KFD_MMAP_GPU_ID_MASK (0xffffull << KFD_MMAP_GPU_ID_SHIFT)

/* queue.c: CREATE/DESTROY/UPDATE_QUEUE and the doorbells, with sys.c's lock held. */
int emu_create_queue(void *args);
int emu_destroy_queue(void *args);
int emu_update_queue(void *args);
/* Stop every queue and drop it: a new process (a forked child drops its
 * parent's without touching their threads, which it does not have). */
void emu_queue_reset(void);
/* Queues alive now, of all GPUs. */
uint32_t emu_queue_count(void);
void emu_queue_stats(struct kfdemu_stats *out);
/* Queue queue_id as kfdemu_queue_at reports it: 0, or -1 for none. */
int emu_queue_at(uint32_t queue_id, struct kfdemu_queue *out);
/* mmap of /dev/kfd at a KFD_MMAP_TYPE_DOORBELL offset: the address, or -errno. */
void *emu_doorbell_mmap(void *addr, size_t length, int prot, int flags, uint64_t offset);

/* cp.c: the command processor of one queue, a thread. */
struct emu_cp;
struct emu_cp_queue {
	const struct emu_gpu *gpu;
	uint32_t queue_id;
	uint64_t ring;			/* GPU VA of the ring */
	uint32_t ring_size;		/* bytes */
	uint64_t amd_queue;		/* GPU VA of the amd_queue_t */
	uint64_t *doorbell;		/* the emulation's view of the doorbell */
};
/* Start the CP of q: 0, or -errno. With sys.c's lock held. */
int emu_cp_start(const struct emu_cp_queue *q, struct emu_cp **out);
/* Stop cp and wait until it has: it touches nothing afterwards. */
void emu_cp_stop(struct emu_cp *cp);
/* Whether cp stopped on its own (a fault knob, a fault). */
int emu_cp_halted(const struct emu_cp *cp);
/* Reset the fault knobs' packet count: a new process. */
void emu_cp_reset(void);

/*
 * kernels.c: run the KERNEL_DISPATCH packet p of queue q on the host
 * build of its kernel (AQL_KFD_EMU_KERNELS), on the CP's thread. 0 when
 * it ran; a CP error code (queue_inactive_signal) with why saying what;
 * or -1 for a VM fault at *fault_va (*fault_exec: an instruction fetch
 * from memory that is not EXECUTABLE). Thread safe; one host dispatch
 * runs at a time.
 */
int emu_kernel_dispatch(const struct emu_cp_queue *q, const aql_dispatch_packet *p, char *why,
			size_t why_size, uint64_t *fault_va, int *fault_exec);

/*
 * cache.c: the GPU's code caches (I$, K$, L2), which hold what the
 * EXECUTABLE BOs held at the last invalidation. emu_cache_invalidate: a
 * PM4 ACQUIRE_MEM invalidating them over [base, base + size) on gpu, 0
 * or -ENOMEM. emu_cache_code: a copy (free() it) of what they hold for
 * the BO that held addr, with its va and size; NULL when they hold none.
 * emu_cache_reset: a new process. Thread safe.
 */
int emu_cache_invalidate(const struct emu_gpu *gpu, uint64_t base, uint64_t size);
unsigned char *emu_cache_code(const struct emu_gpu *gpu, uint64_t addr, uint64_t *va,
			      uint64_t *size);
void emu_cache_reset(void);

/* sys.c, with its lock held: the render node file fd names, for
 * ACQUIRE_VM. 0 and *gpu, *file_id set; -EBADF where fd is not open;
 * -EINVAL where it is open but not an emulated render node. */
int emu_render_file(int fd, const struct emu_gpu **gpu, uint64_t *file_id);

/* memory.c, with sys.c's lock held: the live BO of a handle, copied to
 * *out; -EINVAL when there is none. */
int emu_memory_by_handle(uint64_t handle, struct kfdemu_bo *out);

/*
 * events.c: the process's events. The ioctl handlers run with sys.c's
 * lock held, all but emu_wait_events, which sleeps and runs without it.
 */
int emu_create_event(void *args);
int emu_destroy_event(void *args);
int emu_set_event(void *args);
int emu_reset_event(void *args);
int emu_wait_events(void *args);
/* A new process: no events, no event page. */
void emu_events_reset(void);
void emu_events_stats(struct kfdemu_stats *out);
/* The event page BO's handle (FREE of it is -EPERM), 0 when none.
 * With sys.c's lock held. */
uint64_t emu_events_page_handle(void);
/* sys.c's fork handlers, after taking and before giving back its lock. */
void emu_events_fork_prepare(void);
void emu_events_fork_done(void);

/*
 * What the hardware raises, for the emulated command processor (cp.c).
 * Callable from any thread, without sys.c's lock.
 *
 * emu_event_interrupt: the CP's END_OF_PIPE interrupt with context id
 * event_id, after it stored the signal's value and then event_id into
 * the signal's mailbox (the event page slot): the slot is acknowledged
 * (-1) and its event set, waking its waiters (kfd_signal_event_interrupt).
 * 0 when an event was set; -ENOENT when no slot was signaled (no page,
 * or the mailbox was not written); -EINVAL for an unknown gpu_id.
 *
 * emu_event_vm_fault: a GPU memory fault at va on gpu_id; write: a write
 * to a read-only page, exec: an execute of an NX page, neither: a page
 * not present. Every MEMORY event gets the data and is set
 * (kfd_signal_vm_fault_event). Stopping the GPU's queues, which the kernel
 * does first (kfd_dqm_evict_pasid), is the caller's part.
 *
 * emu_event_gpu_reset: gpu_id was reset (a hang, or with ecc an SRAM ECC
 * error): every HW_EXCEPTION event is set, and with ecc every MEMORY
 * event with an imprecise ECC error (kfd_signal_reset_event).
 *
 * emu_event_queue_exception (1.13): KFD's per-queue exception: ec_mask
 * (KFD_EC_MASK bits) OR-ed into the 64-bit *err_payload_addr, then
 * SET_EVENT of err_event_id (send_exception_work_handler); the two come
 * from the queue's CWSR header. 0, -EFAULT where the payload is not
 * mapped, -EINVAL where err_event_id is not a SIGNAL event.
 */
int emu_event_interrupt(uint32_t gpu_id, uint32_t event_id);
void emu_event_vm_fault(uint32_t gpu_id, uint64_t va, int write, int exec);
void emu_event_gpu_reset(uint32_t gpu_id, int ecc);
int emu_event_queue_exception(uint64_t err_payload_addr, uint32_t err_event_id, uint64_t ec_mask);

#endif
