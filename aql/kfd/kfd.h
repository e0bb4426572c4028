/* SPDX-License-Identifier: MIT */
/*
 * Internal to aql/kfd/, the AMD agent: the KFD topology as read from sysfs
 * (topology.c) and the process-wide KFD state (device.c). aql-info reads
 * the topology through kfd_process_get(), and libdrm's view through
 * kfd_gpu_query(), for what aql_agent_info does not hold (chip ID, PCI
 * address, caches, marketing name, clocks, firmware).
 */
#ifndef AQL_KFD_H
#define AQL_KFD_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <aql/agent.h>
#include <aql/code_object.h>
#include <aql/kernarg.h>
#include <aql/queue.h>
#include "aql/agent_impl.h"
#include <aql/target.h>
#include "aql/kfd/sys.h"

/* Cache levels kept per node: L1, L2, L3 (MI300's Infinity Cache). */
#define KFD_CACHE_LEVELS 3

/*
 * One GPU node of the topology: the keys of nodes/N/properties by name
 * (0 where a kernel does not print one), the sums of its mem_banks, and
 * what is derived from them.
 */
struct kfd_node {
	uint32_t node_id;		/* N in nodes/N: KFD's node number */
	uint32_t gpu_id;		/* nodes/N/gpu_id: every GPU ioctl names it */
	char name[64];			/* nodes/N/name ("" if absent) */

	uint32_t simd_count, simd_per_cu, array_count, simd_arrays_per_engine;
	uint32_t cu_per_simd_array, max_waves_per_simd, lds_size_in_kb, wave_front_size;
	uint32_t max_slots_scratch_cu, gfx_target_version, vendor_id, device_id;
	uint32_t location_id, domain, drm_render_minor, num_xcc, max_engine_clk_fcompute;
	uint32_t fw_version, sdma_fw_version, capability, num_sdma_engines, num_cp_queues;
	uint64_t local_mem_size, cwsr_size, ctl_stack_size;

	uint64_t vram_size;		/* mem_banks of heap type FB_PUBLIC/FB_PRIVATE */
	uint32_t vram_public;		/* 1: a bank is FB_PUBLIC (a large BAR) */
	uint32_t mem_clk_max;		/* MHz, the largest of the banks */
	uint32_t cache_kb[KFD_CACHE_LEVELS];	/* first cache of each level, KiB */
	uint32_t io_links;
	int32_t cpu_node;		/* the CPU node an io_link leads to, -1 none */

	/* Derived: CUs = simd_count / simd_per_cu, SEs = array_count /
	 * simd_arrays_per_engine, waves/CU = max_waves_per_simd * simd_per_cu,
	 * XCCs = num_xcc (absent before Linux 6.4: 1). */
	uint32_t cus, ses, waves_per_cu, xccs;
	char gfx[16];			/* "gfx90a", from gfx_target_version */
	/* gfx with sramecc from capability and the process's xnack mode
	 * (device.c; any where unknown) */
	aql_target_id target;
	char target_id[32];		/* its canonical form, "gfx90a:sramecc+:xnack-" */

	/* AQL_OK when aql can run it; otherwise why not (the node is still
	 * listed by aql-info). */
	aql_status usable;
	char reason[256];
};

/* The GPU nodes of a topology, in node order. */
struct kfd_topology {
	uint32_t generation;		/* generation_id the scan saw */
	uint32_t count;
	struct kfd_node *nodes;
};

/*
 * Scan the topology at root through sys: every GPU node, usable or not.
 * The scan is repeated when generation_id changes under it. Errors:
 * AQL_ERR_NOT_FOUND (no topology, no GPU node in it, or a node's gpu_id
 * or properties missing), AQL_ERR_NOMEM, AQL_ERR_SYSTEM (a read failed),
 * AQL_ERR_DEVICE (a topology that keeps changing); each named. Release
 * with kfd_topology_free(). Thread safe (no shared state).
 */
aql_status kfd_topology_scan(const struct aql_kfd_sys *sys, const char *root,
			     struct kfd_topology *out);
void kfd_topology_free(struct kfd_topology *topo);

/* Mark n unusable with st and the reason, "KFD node N (gpu_id G): " and
 * fmt's text. */
void kfd_node_unusable(struct kfd_node *n, aql_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * The process's KFD: /dev/kfd, opened once and kept open until exit, since
 * amdkfd keys its process by the mm (kfd_process.c): a second open would
 * return the same process, and closing would not end it.
 */
struct kfd_process {
	const struct aql_kfd_sys *sys;
	int fd;				/* /dev/kfd */
	uint32_t major, minor;		/* AMDKFD_IOC_GET_VERSION */
	struct kfd_topology topo;
	uint32_t usable;		/* usable nodes: the agents */
};

/*
 * The process's KFD, found on first call: the system table, /dev/kfd,
 * the version policy (major 1, minor >= 11) and the topology. Errors, each
 * with aql_error_message() saying why there is no AMD agent:
 * AQL_ERR_NOT_FOUND (no /dev/kfd, no GPU node, an emulation that does not
 * load, permission denied on /dev/kfd), AQL_ERR_UNSUPPORTED (KFD too old
 * or new, an emulation of another ABI), AQL_ERR_SYSTEM, AQL_ERR_DEVICE.
 * On success *out lists every GPU node, usable or not, and lives until
 * exit. Thread safe; the answer is found once per process.
 */
aql_status kfd_process_get(const struct kfd_process **out);

/* The node of AMD agent index (the index-th usable node), NULL if none. */
const struct kfd_node *kfd_agent_node(const struct kfd_process *p, uint32_t index);

/*
 * What libdrm said of node n's GPU (sys.h gpu_query), asked once, when
 * its first agent opened: 0 and *out; the query's -errno with
 * out->failed naming the libdrm call; -ENODATA before any agent of n
 * opened; -EINVAL for a node not of the process's topology. The agent
 * works either way. Thread safe.
 */
int kfd_gpu_query(const struct kfd_node *n, struct aql_kfd_gpu_query *out);

/* A GET_CLOCK_COUNTERS sample: the GPU's counter and CLOCK_MONOTONIC ns. */
struct kfd_clock_sample {
	uint64_t gpu, ns;
};

/*
 * An opened AMD agent (device.c): what memory.c needs of it. The node's
 * render node and VM are the process's, shared by every agent of the node.
 */
struct kfd_agent {
	aql_agent base;
	aql_agent_info info;
	const struct kfd_process *process;
	const struct kfd_node *node;
	int render_fd;			/* the node's, acquired as its VM */
	/* the process's apertures on the node (GET_PROCESS_APERTURES_NEW) */
	const struct kfd_process_device_apertures *apertures;
	/* Copies (copy.c): the copy kernel, or why there is none; the queue
	 * and staging buffer of aql_agent_copy(), made at its first need. */
	aql_code_object *blit_object;
	const aql_kernel *blit;
	char no_blit[160];
	pthread_mutex_t copy_lock;
	aql_queue *copy_queue;
	void *staging;
	/* Code caches (copy.c): the page holding the PM4 of an invalidation,
	 * made at its first need; code_pending: code loaded while the agent
	 * opened (the copy kernel), not yet invalidated; opened: open is done. */
	uint32_t *pm4_ib;
	int code_pending, opened;
	/* The device heap and its initial slabs, and the hostcall service
	 * (hostcall.c), made at their first need under hidden_lock. */
	pthread_mutex_t hidden_lock;
	void *heap, *heap_slabs;
	struct kfd_hostcall *hostcall;
	/* Profiling stamps (clock.c), under clock_lock: the first sample
	 * (clock_started: taken), the latest, and the ratio for ticks
	 * before the first (0 until needed). */
	pthread_mutex_t clock_lock;
	int clock_started;
	struct kfd_clock_sample clock_t0, clock_t1;
	double clock_early_ratio;
};

/*
 * Agent memory through AMDKFD_IOC_ALLOC_MEMORY_OF_GPU (memory.c); the ops
 * of struct aql_agent_ops by those names. Every BO sits at the same
 * address for the host and the GPU. Errors: AQL_ERR_NOMEM (VRAM or host
 * memory exhausted, with what is free), AQL_ERR_UNSUPPORTED (a code kind
 * other than AMDGPU), AQL_ERR_INVALID_ARG (host-visible VRAM on a small
 * BAR, what is not registered), AQL_ERR_DEVICE (another refusal, naming the
 * ioctl and errno), AQL_ERR_SYSTEM (an mmap of the table). Thread safe.
 */
aql_status kfd_mem_alloc(aql_agent *agent, size_t size, void **out);
/* kfd_mem_alloc at an address that is a multiple of align, a power of two
 * of at least a page (2 MiB for the device heap's slabs). */
aql_status kfd_mem_alloc_aligned(aql_agent *agent, size_t size, size_t align, void **out);
void kfd_mem_free(aql_agent *agent, void *ptr);
aql_status kfd_mem_register(aql_agent *agent, void *ptr, size_t size);
/* kfd_mem_register() of memory the runtime made for the GPU's use alone
 * (rings, amd_queue_t, CWSR areas, signal blocks, the hostcall buffer):
 * its whole pages are also kept from fork()ed children (MADV_DONTFORK).
 * Memory a program registers (pools, typed buffers) stays forkable. */
aql_status kfd_mem_register_own(aql_agent *agent, void *ptr, size_t size);
/* Host memory of its own pages (aql_host_mem_alloc) registered with
 * kfd_mem_register_own(), for the runtime's use with the GPU (CWSR areas,
 * the hostcall buffer, PM4 and copy staging); kfd_host_free() undoes it.
 * Errors: AQL_ERR_NOMEM, those of registering. */
aql_status kfd_host_alloc(aql_agent *agent, size_t size, void **out);
void kfd_host_free(aql_agent *agent, void *ptr, size_t size);
void kfd_mem_unregister(aql_agent *agent, void *ptr, size_t size);
aql_status kfd_code_alloc(aql_agent *agent, enum aql_code_object_kind kind, size_t size,
			  void **out);
void kfd_code_free(aql_agent *agent, void *base, size_t size);
/* Note co as what is loaded in its code memory (kfd_code_loaded), so that
 * kfd_code_kernel_name() finds its kernels until kfd_code_free(). */
void kfd_code_note(aql_agent *agent, const aql_code_object *co);
/* "kernel NAME" for a kernel_object of code loaded on agent's GPU, else
 * "kernel_object 0x...", into buf. Thread safe. */
void kfd_code_kernel_name(aql_agent *agent, uint64_t kernel_object, char *buf, size_t size);
/* Scratch VRAM at the first free, align-aligned place of the window
 * [base, base + window) the caller reserved (no host mapping); errors as
 * kfd_mem_alloc. */
aql_status kfd_scratch_alloc(aql_agent *agent, void *base, size_t window, size_t align,
			     size_t size, void **out);
void kfd_scratch_free(aql_agent *agent, void *ptr);
/* VRAM KFD would still allocate for the agent (AMDKFD_IOC_AVAILABLE_MEMORY,
 * KFD 1.9): 0 with a message where it cannot say. */
aql_status kfd_mem_available(const struct kfd_agent *a, uint64_t *out);
/* How a's GPU reaches a range of memory (kfd_mem_reach). */
enum kfd_reach {
	KFD_REACH_NONE,		/* host memory not registered with the GPU */
	KFD_REACH_HOST,		/* a BO the host maps too: GTT, USERPTR, code */
	KFD_REACH_DEVICE,	/* VRAM without a host mapping */
	KFD_REACH_OTHER_GPU,	/* VRAM of another GPU */
};

/* How a's GPU reaches [ptr, ptr + size): all of it within its BOs, else
 * KFD_REACH_NONE (or KFD_REACH_OTHER_GPU); DEVICE where any of it is.
 * Thread safe. */
enum kfd_reach kfd_mem_reach(const struct kfd_agent *a, const void *ptr, size_t size);

/*
 * Copies (copy.c): a dispatch of the copy kernel (blit.c) that libaql
 * embeds per processor. kfd_copy_open loads it for a at open; without it
 * (no build for the processor, a failed load: a->no_blit says which) the
 * agent opens and refuses copies. kfd_copy_close frees what copies made.
 * kfd_encode_copy and kfd_copy are the ops of struct aql_agent_ops by
 * those names. Thread safe.
 */
void kfd_copy_open(struct kfd_agent *a);
void kfd_copy_close(struct kfd_agent *a);
aql_status kfd_encode_copy(aql_agent *agent, aql_packet *packet, void *dst, const void *src,
			   size_t size, void *args);
aql_status kfd_copy(aql_agent *agent, void *dst, const void *src, size_t size);
/*
 * After co's code was written through the host mapping (the op
 * code_loaded): note it (kfd_code_note), invalidate the GPU's instruction, scalar and L2
 * caches with a PM4 ACQUIRE_MEM on the agent's own queue, and wait for
 * it (a KFD event wait). Code the copy kernel's load wrote while the
 * agent opened is left for the first copy. Errors: those of queues and
 * memory.c, AQL_ERR_QUEUE_ERROR (the CP refused it), each naming the
 * agent. Thread safe.
 */
aql_status kfd_code_loaded(aql_agent *agent, const aql_code_object *co);
/* Zero [dst, dst + size) of a's memory with the copy kernel (its src NULL),
 * waited for: amdkfd does not promise cleared VRAM. Errors: those of
 * copies, AQL_ERR_UNSUPPORTED without the copy kernel. */
aql_status kfd_zero(struct kfd_agent *a, void *dst, size_t size);

/*
 * The hidden arguments a kernel names that the agent supplies
 * (hostcall.c): hidden_heap_v1, device malloc's heap (128 KiB of zeroed
 * VRAM with 8 MiB of initial slabs), and hidden_hostcall_buffer, the
 * hostcall buffer with its listener thread, which serves device memory
 * requests and function calls. Each is made at the first kernel that
 * names it and freed by kfd_hidden_close. kfd_kernel_hidden is the op of
 * struct aql_agent_ops by that name; errors: those of memory.c and
 * copies, AQL_ERR_SYSTEM (the thread), named with the kernel. Thread safe.
 */
void kfd_hidden_open(struct kfd_agent *a);
void kfd_hidden_close(struct kfd_agent *a);
aql_status kfd_kernel_hidden(aql_agent *agent, const aql_kernel *kernel,
			     struct aql_kernarg_hidden *out);
/* What the hostcall service has answered: lanes served, lanes answered
 * with zeros for a failure (an unknown service or address, memory
 * exhausted) and the first such failure's reason. */
struct kfd_hostcall_stats {
	uint64_t requests;
	uint64_t failures;
	char first_failure[256];
};
/* AQL_OK and *out, or AQL_ERR_NOT_FOUND before the service started.
 * Thread safe. */
aql_status kfd_hostcall_get_stats(aql_agent *agent, struct kfd_hostcall_stats *out);

/*
 * Profiling stamps (clock.c): the GPU's timestamp counter ticks that the
 * CP writes into start_ts and end_ts, as CLOCK_MONOTONIC ns, correlated
 * through AMDKFD_IOC_GET_CLOCK_COUNTERS as ROCr's TranslateTime does.
 * kfd_clock_open takes the first sample (a failure is tried again at the
 * first conversion); kfd_ticks_to_ns is the op of struct aql_agent_ops by
 * that name; errors: AQL_ERR_DEVICE naming the ioctl or the counter.
 * Thread safe.
 */
void kfd_clock_open(struct kfd_agent *a);
void kfd_clock_close(struct kfd_agent *a);
aql_status kfd_ticks_to_ns(aql_agent *agent, uint64_t tick, uint64_t *ns);

/*
 * A GTT BO of size bytes on a's GPU for the runtime itself, at one
 * address for the host and the GPU, never freed; *handle is its KFD
 * handle (to map it on other GPUs). Errors as kfd_mem_alloc.
 */
aql_status kfd_gtt_alloc(aql_agent *agent, size_t size, void **out, uint64_t *handle);

/*
 * Signals and events (events.c). At the first AMD agent opened: the
 * process's event page (32 KiB of GTT, 4096 slots), its MEMORY and
 * HW_EXCEPTION events and the fault watcher, and the signal pool's events
 * (aql_signal_events, util/wait.h): a KFD SIGNAL event per block of 64
 * signals, whose id and mailbox (its slot of the page) go into every
 * signal of the block, and each block registered with every GPU opened.
 * Every agent open calls kfd_events_open(a): the page is mapped to a's
 * GPU and the signal blocks registered with it. Errors: those of memory.c
 * and AQL_ERR_DEVICE naming the ioctl that failed. Thread safe.
 */
aql_status kfd_events_open(struct kfd_agent *a);

/*
 * A GPU fault the watcher saw: gpu_id (0: every GPU) and a message naming
 * the address and kind ("GPU memory fault at 0x... on gfx90a (gpu_id N):
 * write to a read-only page"). Listeners (queue.c) put the GPU's queues
 * into their error state with it. fn runs on the watcher thread; it must
 * not call kfd_fault_listen.
 */
typedef void (*kfd_fault_fn)(uint32_t gpu_id, aql_status status, const char *msg, void *user);
/* Add a listener, kept until exit. AQL_OK or AQL_ERR_NOMEM. Thread safe. */
aql_status kfd_fault_listen(kfd_fault_fn fn, void *user);

/*
 * Queues (queue.c): an aql queue as a KFD AQL compute queue. The ops of
 * struct aql_agent_ops by those names. kfd_queue_attach registers the
 * ring and the amd_queue_t page, allocates the EOP buffer and the CWSR
 * area, creates the queue, maps the GPU's doorbells and makes the queue's
 * doorbell signal ring them. Errors: AQL_ERR_NOMEM, AQL_ERR_DEVICE (the
 * ioctl and errno named), AQL_ERR_BUSY (the GPU's queue limit), and those
 * of memory.c. kfd_queue_detach drains the queue (bounded), destroys it
 * and frees what attach made. Thread safe.
 */
aql_status kfd_queue_attach(aql_agent *agent, struct aql_queue_impl *q);
void kfd_queue_detach(aql_agent *agent, struct aql_queue_impl *q);

/*
 * The queue's priority through AMDKFD_IOC_UPDATE_QUEUE (aql_queue_set_priority();
 * attach puts q->priority in CREATE_QUEUE). Errors: AQL_ERR_DEVICE with
 * KFD's errno. Thread safe; the core serialises calls per queue.
 */
aql_status kfd_queue_set_priority(aql_agent *agent, struct aql_queue_impl *q,
				  enum aql_queue_priority priority);

/* What a queue of an AMD agent holds, for tests and tools. */
struct kfd_queue_info {
	uint32_t queue_id;		/* KFD's */
	void *eop, *cwsr;		/* the EOP buffer and the CWSR area */
	size_t eop_bytes, cwsr_bytes;
	size_t cwsr_per_xcc;		/* ctx_save_restore_size: XCC i's area at i times it */
	const uint64_t *error_reason;	/* err_payload_addr of the CWSR headers */
	void *scratch;			/* its scratch VRAM, NULL none yet */
	size_t scratch_bytes;		/* all XCCs' */
	const void *scratch_window;	/* the GPU's SET_SCRATCH_BACKING_VA */
	size_t scratch_window_bytes;	/* 4 GiB per XCC */
};

/* Fill *out for q, a queue attached to an AMD agent. Thread safe while q
 * lives; the scratch members change when a dispatch grows it (read them
 * once the dispatch finished). */
void kfd_queue_get_info(const struct aql_queue_impl *q, struct kfd_queue_info *out);

/*
 * Put every queue of the GPU gpu_id (0: of every GPU) into its error
 * state with status and msg: later submissions fail with it, the packets
 * in flight get -1 in their completion signals and their waiters wake.
 * For the fault watcher (a kfd_fault_fn). Thread safe.
 */
void kfd_queue_fail_gpu(uint32_t gpu_id, aql_status status, const char *msg);

#endif
