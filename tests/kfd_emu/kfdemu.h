/* SPDX-License-Identifier: MIT */
/*
 * The test-only extra of the KFD emulation (tests/kfd_emu/): what it did,
 * counted since the library was loaded, and its state. A test finds it
 * with dlopen(path in AQL_KFD_SYS, RTLD_NOLOAD | RTLD_NOW) and
 * dlsym("kfdemu_stats").
 */
#ifndef AQL_TESTS_KFD_EMU_KFDEMU_H
#define AQL_TESTS_KFD_EMU_KFDEMU_H

#include <stdint.h>

/* ioctl numbers counted: _IOC_NR of AMDKFD_IOC_*, below 0x40. */
#define KFDEMU_IOCTL_NRS 64

/* A buffer object's domain: the first of its KFD_IOC_ALLOC_MEM_FLAGS_*
 * domain bits in the kernel's order. */
enum kfdemu_domain {
	KFDEMU_VRAM,
	KFDEMU_GTT,
	KFDEMU_USERPTR,
	KFDEMU_DOORBELL,
	KFDEMU_MMIO_REMAP,
	KFDEMU_DOMAINS
};

/* One buffer object, as kfdemu_bo_at finds it. */
struct kfdemu_bo {
	uint64_t handle;		/* gpu_id << 32 | idr */
	uint64_t va;			/* the GPU VA of ALLOC (== CPU address in aql) */
	uint64_t size;			/* ALLOC's size */
	uint32_t flags;			/* KFD_IOC_ALLOC_MEM_FLAGS_* */
	uint32_t domain;		/* enum kfdemu_domain */
	uint32_t gpu_id;
	uint32_t mapped;		/* bit i: mapped to the i-th GPU node's VM */
	uint64_t userptr;		/* USERPTR: the host address; else 0 */
	/* the emulation's own view of the BO's bytes (what the GPU would
	 * see), NULL for USERPTR, DOORBELL and MMIO_REMAP */
	void *data;
};

struct kfdemu_stats {
	uint64_t ioctls[KFDEMU_IOCTL_NRS];	/* calls on /dev/kfd by _IOC_NR, refused ones too */
	uint64_t ioctls_failed;		/* of those, calls that returned -errno */
	uint64_t ioctls_unemulated;	/* in the version's range, not modelled yet: -ENOSYS */
	uint64_t kfd_opens;		/* opens of /dev/kfd that gave an fd */
	uint64_t render_opens;		/* opens of /dev/dri/renderD* that gave an fd */
	uint32_t open_files;		/* emulated files open now */
	uint32_t gpus;			/* GPU nodes in the topology */
	uint32_t version_major;		/* what GET_VERSION reports */
	uint32_t version_minor;
	uint32_t vm_acquired;		/* bit i: ACQUIRE_VM ran on the i-th GPU node */
	uint32_t runtime_enabled;	/* RUNTIME_ENABLE's state is enabled */
	int32_t xnack;			/* the process's XNACK mode */
	char config_error[160];		/* a setting that could not be read; "" when fine */
	/* Buffer objects alive now, and their bytes (page-rounded) by domain. */
	uint32_t bos;
	uint64_t bo_bytes[KFDEMU_DOMAINS];
	uint64_t bo_mmaps;		/* render-node mmaps of a BO that succeeded */
	/* User queues alive now, and of those the ones whose CP stopped on
	 * its own (a fault knob, a VM fault, an eviction). */
	uint32_t queues;
	uint32_t queues_halted;
	/* Events alive now, the event page's slots (0: no page), and the
	 * WAIT_EVENTS calls asleep now. */
	uint32_t events;
	uint32_t event_slots;
	uint32_t event_sleepers;
	/* libdrm queries (gpu_query) on emulated render nodes, refused ones too */
	uint64_t drm_queries;
	/* ioctls failed by ioctl_eintr and ioctl_eagain (AQL_KFD_EMU_FAIL) */
	uint64_t ioctls_eintr;
	uint64_t ioctls_eagain;
};

typedef int (*kfdemu_stats_fn)(struct kfdemu_stats *out);

/* Copy the counters and state to *out. Returns 0, or -1 if out is NULL.
 * Thread safe. */
int kfdemu_stats(struct kfdemu_stats *out);

/*
 * The live BO whose [va, va + size) holds addr, copied to *out. Returns
 * 0, -1 when no BO holds it or out is NULL. Thread safe.
 */
int kfdemu_bo_at(uint64_t addr, struct kfdemu_bo *out);
typedef int (*kfdemu_bo_at_fn)(uint64_t addr, struct kfdemu_bo *out);

/*
 * A test standing in for the command processor: what the CP's END_OF_PIPE
 * interrupt with this context id does (emu.h emu_event_interrupt), after
 * the test stored the signal's value and then event_id into its mailbox.
 * 0 when an event was set, -errno otherwise. Thread safe.
 */
int kfdemu_event_interrupt(uint32_t gpu_id, uint32_t event_id);
typedef int (*kfdemu_event_interrupt_fn)(uint32_t gpu_id, uint32_t event_id);

/* A GPU memory fault at va (emu.h emu_event_vm_fault). Thread safe. */
void kfdemu_vm_fault(uint32_t gpu_id, uint64_t va, int write, int exec);
typedef void (*kfdemu_vm_fault_fn)(uint32_t gpu_id, uint64_t va, int write, int exec);

/* A GPU reset (emu.h emu_event_gpu_reset). Thread safe. */
void kfdemu_gpu_reset(uint32_t gpu_id, int ecc);
typedef void (*kfdemu_gpu_reset_fn)(uint32_t gpu_id, int ecc);

/* A user queue as CREATE_QUEUE and the UPDATE_QUEUEs since made it. */
struct kfdemu_queue {
	uint32_t gpu_id;
	uint32_t ring_size;		/* bytes */
	uint64_t ring;
	uint32_t percentage;		/* queue_percentage's low byte */
	uint32_t priority;		/* 0-15 */
	uint32_t updates;		/* UPDATE_QUEUEs that succeeded */
};

/* Queue queue_id (KFD's id) copied to *out: 0, or -1 when there is no
 * such queue or out is NULL. Thread safe. */
int kfdemu_queue_at(uint32_t queue_id, struct kfdemu_queue *out);
typedef int (*kfdemu_queue_at_fn)(uint32_t queue_id, struct kfdemu_queue *out);

/* Hidden argument kinds recorded: enum aql_arg_kind (aql/metadata.h) values below this. */
#define KFDEMU_HIDDEN_KINDS 48

/*
 * A kernel dispatch whose hidden arguments the emulated CP checked
 * (kernels.c), recorded right after the check: the kernel, its code
 * object version, and the hidden arguments its metadata names, as the
 * packet's kernarg block carried them. Dispatches refused before (a bad
 * packet, no host build) are not recorded.
 */
struct kfdemu_dispatch {
	uint64_t seq;			/* dispatches recorded so far, this one included */
	char kernel[256];		/* the .kd symbol's name, without ".kd" */
	uint32_t version;		/* code object version: 4, 5, 6 */
	/* 0: passed, the host build runs next; else the CP code
	 * (queue_inactive_signal), or UINT32_MAX for a VM fault */
	uint32_t cp_code;
	char why[200];			/* the refusal or fault, "" when it ran */
	uint64_t named;			/* bit k: the metadata names kind k */
	uint64_t value[KFDEMU_HIDDEN_KINDS];	/* by kind; the last one named wins */
};

/*
 * The last dispatch of kernel (its name without ".kd"), or with kernel
 * NULL the last of any, copied to *out: 0, or -1 when there was none or
 * out is NULL. The emulation keeps the last of the 64 kernels seen most
 * recently. Thread safe.
 */
int kfdemu_dispatch_last(const char *kernel, struct kfdemu_dispatch *out);
typedef int (*kfdemu_dispatch_last_fn)(const char *kernel, struct kfdemu_dispatch *out);

/* A queue's exception (emu.h emu_event_queue_exception). Thread safe. */
int kfdemu_queue_exception(uint64_t err_payload_addr, uint32_t err_event_id, uint64_t ec_mask);
typedef int (*kfdemu_queue_exception_fn)(uint64_t err_payload_addr, uint32_t err_event_id,
					 uint64_t ec_mask);

#endif
