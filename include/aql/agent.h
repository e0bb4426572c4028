/* SPDX-License-Identifier: MIT */
/*
 * Agents run packets. Every agent sits behind the same small interface, so
 * code that creates queues and submits packets never knows which one it
 * talks to. The CPU agent is built in and is the default.
 */
#ifndef AQL_AGENT_H
#define AQL_AGENT_H

#include <stdint.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_agent aql_agent;

enum aql_agent_kind {
	AQL_AGENT_CPU = 0,	/* the CPU agent (aql/host/) */
	AQL_AGENT_NVIDIA,	/* an NVIDIA GPU through the CUDA driver API (nv/) */
	AQL_AGENT_AMD,		/* an AMD GPU through /dev/kfd (aql/kfd/) */
	AQL_AGENT_KIND_COUNT
};

/* How an agent makes a signal change that its packets cause. */
enum aql_signal_path {
	AQL_SIGNAL_PATH_HOST = 0,	/* a host thread (the CPU agent's processor) */
	AQL_SIGNAL_PATH_DEVICE,		/* the device: CUDA stream memory operations */
	AQL_SIGNAL_PATH_HOST_CALLBACK,	/* a driver host callback (cuLaunchHostFunc) */
};

typedef struct aql_agent_info {
	char name[64];
	enum aql_agent_kind kind;
	uint32_t compute_units;		/* CPU agent: its workers */
	uint32_t max_workgroup_size;	/* work-items in one work-group */
	uint16_t max_workgroup_dim[3];
	uint32_t max_group_segment_size;	/* bytes of LDS per work-group */
	uint32_t max_private_segment_size;	/* bytes per work-item */
	uint32_t max_queue_size;	/* packets */
	uint32_t queue_features;	/* as aql_hsa_queue.features */
	int32_t numa_node;		/* node nearest the agent; -1: spans all */
	uint8_t unified_memory;		/* agent memory is host memory (aql/copy.h) */
	uint8_t signal_path;		/* enum aql_signal_path */
	/* Its kernels can wake a sleeping host thread (an eventfd, an
	 * interrupt); 0: host waiters must poll (nvptx has no interrupt). */
	uint8_t wakes_host;
	uint32_t wavefront_size;	/* work-items that run in lock step (CUDA: 32) */
	uint32_t max_grid_dim[3];	/* work-items per dimension */
	/* LDS a work-group gets without asking (CUDA: 48 KiB); up to
	 * max_group_segment_size (CUDA: the opt-in maximum) on request. */
	uint32_t default_group_segment_size;
	uint64_t memory_size;		/* bytes of agent memory; 0: host memory */
	char isa[32];			/* "sm_90", "gfx942:sramecc+:xnack-", "x86_64" */
	uint32_t device_index;		/* among agents of its kind (the CUDA ordinal) */
	/* CUDA: cuDriverGetVersion(); AMD: the KFD version as major * 1000 +
	 * minor * 10 (1.16: 1160); 0 if none. */
	uint32_t driver_version;
} aql_agent_info;

/*
 * How many agents of kind this machine offers. 0 with AQL_OK never
 * happens: when there are none the call fails, and aql_error_message()
 * says why (for NVIDIA: no libcuda.so.1, the toolkit's stub library, a
 * driver older than aql needs, no device, or CUDA_VISIBLE_DEVICES hiding
 * every device; for AMD: an emulation in AQL_KFD_SYS that does not load,
 * no /dev/kfd, permission denied on it, a KFD older than 1.11, no GPU
 * node, only GPUs aql cannot run). Errors: AQL_ERR_NOT_FOUND (no driver
 * or no device), AQL_ERR_UNSUPPORTED (a stub or too old driver; a kind
 * libaql was built without), AQL_ERR_SYSTEM (AMD: permission denied),
 * AQL_ERR_DEVICE (the driver failed), AQL_ERR_INVALID_ARG.
 * Thread safe; the answer is found once per process.
 */
aql_status aql_agent_count(enum aql_agent_kind kind, uint32_t *count);

/*
 * Open agent index (0 .. count - 1) of kind: a new agent each call,
 * released with aql_agent_destroy(). A CPU agent is created with the
 * defaults (aql_host_agent_create(NULL)); an NVIDIA agent is CUDA device
 * index as the driver numbers them after CUDA_VISIBLE_DEVICES, on its
 * primary context (retained here, released at destroy). An AMD agent is
 * the index-th GPU node of the KFD topology that aql can run; its render
 * node and VM (ACQUIRE_VM) stay with the process after destroy, since
 * amdkfd binds the VM to that one file. Errors: those of
 * aql_agent_count(), AQL_ERR_INVALID_ARG (index out of range),
 * AQL_ERR_NOMEM; AMD: AQL_ERR_SYSTEM (the render node), AQL_ERR_BUSY
 * (another runtime of the process holds the GPU), AQL_ERR_DEVICE (an
 * ioctl failed), each named. Thread safe.
 */
aql_status aql_agent_open(enum aql_agent_kind kind, uint32_t index, aql_agent **out);

/* "cpu", "nvidia", "amd"; "unknown" for other values. Thread safe. */
const char *aql_agent_kind_name(enum aql_agent_kind kind);

/*
 * The process-wide CPU agent, created on first use with the defaults (one
 * worker per CPU the first caller may run on) and kept until exit.
 * Errors: AQL_ERR_NOMEM, AQL_ERR_SYSTEM. Thread safe.
 */
aql_status aql_agent_default(aql_agent **out);

typedef struct aql_host_agent_config {
	/* Threads that run a dispatch's work-groups, the dispatching queue's
	 * processor among them (so 1: the processor alone); 0: one per CPU
	 * in the creating thread's affinity mask (an MPI rank bound to one
	 * core gets the processor alone). */
	uint32_t workers;
	/* The most a processor polls before parking (0: 50 us); less after
	 * idle waits that outlasted it (docs/benchmarks.md, --contention). */
	uint64_t idle_spin_ns;
	uint32_t max_group_segment_size;	/* 0: 64 KiB */
	/* Keep agent memory apart from host memory, as a discrete GPU does,
	 * so that every copy a GPU needs also happens here (aql/copy.h). */
	uint8_t separate_memory;
	/* Run every packet on its queue's processor thread: no thread that
	 * waits for a packet, or for room in a full ring, runs it itself
	 * (aql_signal_wait() and aql_queue_reserve() say when one does). For
	 * kernels that wait for what their waiter or producer does next, or
	 * that need the processor's thread (its priority, its CPU). */
	uint8_t no_wait_help;
} aql_host_agent_config;

/*
 * Create a private CPU agent. config may be NULL for the defaults.
 * Errors: AQL_ERR_INVALID_ARG, AQL_ERR_NOMEM, AQL_ERR_SYSTEM. Thread safe.
 */
aql_status aql_host_agent_create(const aql_host_agent_config *config,
				 aql_agent **out);

/*
 * Destroy an agent made with aql_host_agent_create(). Its queues and the
 * typed buffers with storage on it must be destroyed first
 * (AQL_ERR_INVALID_ARG names how many remain). The default
 * agent cannot be destroyed. NULL is accepted.
 */
aql_status aql_agent_destroy(aql_agent *agent);

/* Fill *info. Errors: AQL_ERR_INVALID_ARG. Thread safe. */
aql_status aql_agent_get_info(aql_agent *agent, aql_agent_info *info);

/*
 * Host function run by an AGENT_DISPATCH packet whose type field is the id
 * it was registered under: arg is the packet's arg[4], return_address its
 * return_address.
 */
typedef void (*aql_agent_fn)(const uint64_t arg[4], uint64_t return_address,
			     void *user);

/* Agent dispatch types from here up are libaql's own (copies). */
#define AQL_AGENT_FN_RESERVED 0xff00u

/*
 * Register fn for AGENT_DISPATCH packets of type id, replacing any earlier
 * one; fn NULL unregisters. Errors: AQL_ERR_INVALID_ARG (id reserved),
 * AQL_ERR_UNSUPPORTED (the agent takes no agent dispatch). Thread safe; a
 * packet already running keeps the function it started with.
 */
aql_status aql_agent_register_function(aql_agent *agent, uint16_t id,
				       aql_agent_fn fn, void *user);

#ifdef __cplusplus
}
#endif

#endif
