/* SPDX-License-Identifier: MIT */
/*
 * The AMD agent's driver entry: /dev/kfd and its version, the topology's
 * GPU nodes as agents, and per GPU the render node, ACQUIRE_VM,
 * RUNTIME_ENABLE and the process apertures. An agent opened here
 * describes itself, has memory (memory.c), signal events (events.c) and
 * queues (queue.c); copies come in a later step of issue 13, and until
 * then they fail with AQL_ERR_UNSUPPORTED.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/agent_impl.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "util/error.h"

/* HSA's limits, which ROCr reports for every GPU agent. */
#define MAX_WORKGROUP 1024u
#define MAX_QUEUE_PACKETS 131072u
/* COMPUTE_TMPRING_SIZE.WAVESIZE: 13 bits of 1 KiB per wave (gfx9). */
#define MAX_WAVE_SCRATCH ((1u << 13) - 1) * 1024u

static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static struct kfd_process process = { .fd = -1 };
static struct aql_kept_failure process_failure;

/*
 * Per GPU node, for the process's lifetime: amdkfd binds the node's VM to
 * the first render-node file given to ACQUIRE_VM and keeps that file;
 * another file is refused with -EBUSY (kfd_chardev.c kfd_ioctl_acquire_vm).
 * Every agent opened on the node shares this.
 */
struct kfd_gpu {
	int render_fd;
	int acquired;
	struct kfd_process_device_apertures apertures;
	/* libdrm's view of the GPU (sys.h gpu_query), asked once after the
	 * first ACQUIRE_VM; a failure is kept, not fatal */
	int queried;
	int query_err;			/* 0 or the query's -errno */
	struct aql_kfd_gpu_query query;
};

static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kfd_gpu *gpus;		/* one per topology node */
static int runtime_enabled;		/* once per process, under gpu_lock */

static aql_status open_kfd(const struct aql_kfd_sys *sys)
{
	struct kfd_ioctl_get_version_args v = { 0 };
	int fd = sys->open("/dev/kfd", O_RDWR), r;

	if (fd == -ENOENT || fd == -ENODEV || fd == -ENXIO)
		return aql_fail(AQL_ERR_NOT_FOUND,
				"no /dev/kfd: the amdgpu kernel driver is not loaded, or it found "
				"no AMD GPU (check lsmod | grep amdgpu and dmesg)");
	if (fd == -EACCES || fd == -EPERM)
		return aql_fail(AQL_ERR_SYSTEM,
				"permission denied on /dev/kfd: add the user to the group that "
				"owns it (render, or video on older distributions: sudo usermod "
				"-aG render,video $USER) and log in again");
	if (fd < 0)
		return aql_fail_errno(AQL_ERR_SYSTEM, -fd, "opening /dev/kfd");
	r = aql_kfd_ioctl(sys, fd, AMDKFD_IOC_GET_VERSION, &v);
	if (r < 0) {
		sys->close(fd);
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "/dev/kfd: AMDKFD_IOC_GET_VERSION");
	}
	if (v.major_version != AQL_KFD_MIN_MAJOR || v.minor_version < AQL_KFD_MIN_MINOR) {
		sys->close(fd);
		if (v.major_version > AQL_KFD_MIN_MAJOR)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"KFD %u.%u is newer than the KFD 1.x aql knows: update aql",
					v.major_version, v.minor_version);
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"KFD %u.%u is older than KFD 1.%u (Linux 6.1), the oldest aql runs "
				"on: update the kernel (or amdgpu-dkms)",
				v.major_version, v.minor_version, AQL_KFD_MIN_MINOR);
	}
	process.fd = fd;
	process.major = v.major_version;
	process.minor = v.minor_version;
	return AQL_OK;
}

/*
 * The process's XNACK mode completes the target ID (kfd_chardev.c
 * kfd_ioctl_set_xnack_mode: a negative value only asks). -EPERM is a
 * kernel without SVM, where XNACK is off; another failure leaves the mode
 * unknown, which the target ID says by naming no xnack.
 */
static void query_xnack(void)
{
	struct kfd_ioctl_set_xnack_mode_args a = { .xnack_enabled = -1 };
	int r = aql_kfd_ioctl(process.sys, process.fd, AMDKFD_IOC_SET_XNACK_MODE, &a);
	enum aql_feature_state mode = r == -EPERM ? AQL_FEATURE_OFF :
				      r < 0 ? AQL_FEATURE_ANY :
				      a.xnack_enabled ? AQL_FEATURE_ON : AQL_FEATURE_OFF;

	for (uint32_t i = 0; i < process.topo.count; i++) {
		struct kfd_node *n = &process.topo.nodes[i];

		if (n->target.processor[0] && n->target.xnack != AQL_FEATURE_UNSUPPORTED) {
			n->target.xnack = mode;
			aql_target_format(&n->target, n->target_id, sizeof(n->target_id));
		}
	}
}

/*
 * The node's render node, opened at discovery and kept (as libhsakmt's
 * topology.c opens it in topology_sysfs_check_node_supported): a node
 * whose render node is absent (a container given only some of
 * /dev/dri) or refused is no agent, with its reason.
 */
static void render_open(struct kfd_node *n, struct kfd_gpu *g)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/dev/dri/renderD%u", n->drm_render_minor);
	r = process.sys->open(path, O_RDWR);
	if (r >= 0)
		g->render_fd = r;
	else if (r == -ENOENT)
		kfd_node_unusable(n, AQL_ERR_NOT_FOUND,
				  "%s: no render node %s: a container must be given it with "
				  "/dev/kfd (docker --device=%s)", n->gfx, path, path);
	else if (r == -EACCES || r == -EPERM)
		kfd_node_unusable(n, AQL_ERR_SYSTEM,
				  "%s: permission denied on %s (%s): add the user to the render "
				  "group (sudo usermod -aG render $USER) and log in again, or allow "
				  "the device in the container's device cgroup", n->gfx, path,
				  strerror(-r));
	else
		kfd_node_unusable(n, AQL_ERR_SYSTEM, "%s: opening its render node %s: %s", n->gfx,
				  path, strerror(-r));
}

static aql_status load(void)
{
	const struct kfd_node *first = NULL;
	aql_status st;

	if ((st = aql_kfd_sys_get(&process.sys)) != AQL_OK || (st = open_kfd(process.sys)) != AQL_OK)
		return st;
	st = kfd_topology_scan(process.sys, AQL_KFD_TOPOLOGY, &process.topo);
	if (st == AQL_OK && !(gpus = calloc(process.topo.count, sizeof(*gpus))))
		st = aql_fail(AQL_ERR_NOMEM, "no memory for %u GPU nodes", process.topo.count);
	if (st != AQL_OK) {
		kfd_topology_free(&process.topo);
		process.sys->close(process.fd);
		process.fd = -1;
		return st;
	}
	query_xnack();
	for (uint32_t i = 0; i < process.topo.count; i++) {
		gpus[i].render_fd = -1;
		if (process.topo.nodes[i].usable == AQL_OK)
			render_open(&process.topo.nodes[i], &gpus[i]);
		if (process.topo.nodes[i].usable == AQL_OK)
			process.usable++;
		else if (!first)
			first = &process.topo.nodes[i];
	}
	/* The process and topology stay: aql-info lists the nodes aql
	 * cannot run, with their reasons. */
	if (!process.usable)
		return aql_fail(first->usable, "%s%s", first->reason,
				process.topo.count > 1 ? "; no other GPU node is usable either" : "");
	return AQL_OK;
}

static void load_once(void)
{
	aql_status st = load();

	if (st != AQL_OK)
		aql_keep_failure(&process_failure, st);
}

aql_status kfd_process_get(const struct kfd_process **out)
{
	pthread_once(&process_once, load_once);
	if (process.fd < 0)
		return aql_fail_kept(&process_failure, "no AMD agent");
	*out = &process;
	return AQL_OK;
}

const struct kfd_node *kfd_agent_node(const struct kfd_process *p, uint32_t index)
{
	for (uint32_t i = 0; i < p->topo.count; i++)
		if (p->topo.nodes[i].usable == AQL_OK && index-- == 0)
			return &p->topo.nodes[i];
	return NULL;
}

static aql_status count(uint32_t *out)
{
	const struct kfd_process *p;
	aql_status st = kfd_process_get(&p);

	if (st != AQL_OK)
		return st;
	if (!p->usable)
		return aql_fail_kept(&process_failure, "no AMD agent");
	*out = p->usable;
	return AQL_OK;
}

/* KFD 1.13 and later: once per process, before the first queue. */
static aql_status runtime_enable(void)
{
	struct kfd_ioctl_runtime_enable_args a = {
		.mode_mask = KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK,
	};
	int r;

	if (runtime_enabled || process.minor < 13)
		return AQL_OK;
	r = aql_kfd_ioctl(process.sys, process.fd, AMDKFD_IOC_RUNTIME_ENABLE, &a);
	/* kfd_chardev.c runtime_enable: -EBUSY is a runtime enabled before
	 * (by another runtime in this process), the state aql wants; -EEXIST
	 * is queues made before it. A signal while an attached debugger holds
	 * the call (-EINTR) is retried by aql_kfd_ioctl. */
	if (r == -EEXIST)
		return aql_fail(AQL_ERR_BUSY,
				"AMDKFD_IOC_RUNTIME_ENABLE: another runtime in this process has "
				"already created KFD queues (EEXIST); aql must own the GPU runtime "
				"of the process");
	if (r < 0 && r != -EBUSY)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "/dev/kfd: AMDKFD_IOC_RUNTIME_ENABLE");
	runtime_enabled = 1;
	return AQL_OK;
}

static aql_status find_apertures(const struct kfd_node *n, struct kfd_gpu *g)
{
	struct kfd_ioctl_get_process_apertures_new_args a = { 0 };
	struct kfd_process_device_apertures *list;
	aql_status st;
	int r;

	/* num_of_nodes 0 asks how many GPUs the process has. */
	r = aql_kfd_ioctl(process.sys, process.fd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &a);
	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r,
				      "%s: AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", n->gfx);
	list = calloc(a.num_of_nodes ? a.num_of_nodes : 1, sizeof(*list));
	if (!list)
		return aql_fail(AQL_ERR_NOMEM, "%s: no memory for %u apertures", n->gfx,
				a.num_of_nodes);
	a.kfd_process_device_apertures_ptr = (uintptr_t)list;
	r = aql_kfd_ioctl(process.sys, process.fd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &a);
	st = r < 0 ? aql_fail_errno(AQL_ERR_DEVICE, -r,
				    "%s: AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", n->gfx) :
		     aql_fail(AQL_ERR_DEVICE,
			      "%s: KFD lists no apertures for gpu_id %u among %u GPUs",
			      n->gfx, n->gpu_id, a.num_of_nodes);
	for (uint32_t i = 0; r >= 0 && i < a.num_of_nodes; i++) {
		if (list[i].gpu_id == n->gpu_id) {
			g->apertures = list[i];
			st = AQL_OK;
			break;
		}
	}
	free(list);
	return st;
}

static aql_status acquire_vm(const struct kfd_node *n, struct kfd_gpu *g)
{
	struct kfd_ioctl_acquire_vm_args a = { .gpu_id = n->gpu_id };
	char path[64];
	int r;

	/* the render node was opened at discovery (render_open) */
	snprintf(path, sizeof(path), "/dev/dri/renderD%u", n->drm_render_minor);
	a.drm_fd = (uint32_t)g->render_fd;
	r = aql_kfd_ioctl(process.sys, process.fd, AMDKFD_IOC_ACQUIRE_VM, &a);
	/* kfd_chardev.c kfd_ioctl_acquire_vm: -EBUSY when the VM was acquired
	 * through another file, -EINVAL for a file or gpu_id it rejects. */
	if (r == -EBUSY)
		return aql_fail(AQL_ERR_BUSY,
				"%s: AMDKFD_IOC_ACQUIRE_VM: another runtime in this process (ROCr?) "
				"already holds the GPU's VM through its own %s file (EBUSY)",
				n->gfx, path);
	if (r == -EINVAL)
		return aql_fail(AQL_ERR_DEVICE,
				"%s: AMDKFD_IOC_ACQUIRE_VM refused %s for gpu_id %u (EINVAL): the "
				"render node is not this GPU's", n->gfx, path, n->gpu_id);
	if (r < 0)
		return aql_fail_errno(r == -ENOMEM ? AQL_ERR_NOMEM : AQL_ERR_DEVICE, -r,
				      "%s: AMDKFD_IOC_ACQUIRE_VM on %s", n->gfx, path);
	g->acquired = 1;
	return AQL_OK;
}

/* Bring the node's GPU up for this process; done once, kept until exit. */
static aql_status gpu_open(const struct kfd_node *n)
{
	struct kfd_gpu *g = &gpus[n - process.topo.nodes];
	aql_status st = AQL_OK;

	pthread_mutex_lock(&gpu_lock);
	if (!g->acquired && (st = acquire_vm(n, g)) == AQL_OK &&
	    (st = runtime_enable()) == AQL_OK)
		st = find_apertures(n, g);
	if (st != AQL_OK)
		g->acquired = 0;
	if (g->acquired && !g->queried) {
		g->query_err = process.sys->gpu_query(g->render_fd, &g->query);
		g->queried = 1;
	}
	pthread_mutex_unlock(&gpu_lock);
	return st;
}

int kfd_gpu_query(const struct kfd_node *n, struct aql_kfd_gpu_query *out)
{
	const struct kfd_gpu *g;
	int r = -ENODATA;

	if (!n || n < process.topo.nodes || n >= process.topo.nodes + process.topo.count)
		return -EINVAL;
	g = &gpus[n - process.topo.nodes];
	pthread_mutex_lock(&gpu_lock);
	if (g->queried) {
		*out = g->query;
		r = g->query_err;
	}
	pthread_mutex_unlock(&gpu_lock);
	return r;
}

static void fill_info(const struct kfd_node *n, uint32_t index, aql_agent_info *in)
{
	*in = (aql_agent_info){
		.kind = AQL_AGENT_AMD,
		.compute_units = n->cus,
		.max_workgroup_size = MAX_WORKGROUP,
		.max_workgroup_dim = { MAX_WORKGROUP, MAX_WORKGROUP, MAX_WORKGROUP },
		.max_group_segment_size = n->lds_size_in_kb * 1024,
		.default_group_segment_size = n->lds_size_in_kb * 1024,
		.max_private_segment_size = MAX_WAVE_SCRATCH / n->wave_front_size,
		.max_queue_size = MAX_QUEUE_PACKETS,
		.queue_features = 1,	/* kernel dispatch */
		.numa_node = n->cpu_node,
		/* The command processor writes completion signals and wakes
		 * their waiters through KFD events (events.c); kernels wake
		 * no one (that takes s_sendmsg with an event id). */
		.signal_path = AQL_SIGNAL_PATH_DEVICE,
		.wakes_host = 0,
		.wavefront_size = n->wave_front_size,
		.max_grid_dim = { UINT32_MAX, UINT32_MAX, UINT32_MAX },
		/* The topology's: every dGPU node has its banks (libdrm's VRAM
		 * heap, the same size, is aql-info's alone). */
		.memory_size = n->vram_size,
		.device_index = index,
		.driver_version = process.major * 1000 + process.minor * 10,
	};
	snprintf(in->name, sizeof(in->name), "%s", n->gfx);
	snprintf(in->isa, sizeof(in->isa), "%s", n->target_id);
}

static struct kfd_agent *agent_of(aql_agent *agent)
{
	return (struct kfd_agent *)agent;
}

static void get_info(aql_agent *agent, aql_agent_info *info)
{
	*info = agent_of(agent)->info;
}

/* The GPU's render node and VM stay with the process (struct kfd_gpu). */
static void destroy(aql_agent *agent)
{
	/* Before the copies: the heap's VRAM and the service's go first. */
	kfd_hidden_close(agent_of(agent));
	kfd_copy_close(agent_of(agent));
	kfd_clock_close(agent_of(agent));
	free(agent_of(agent));
}

/* aql_agent_mem_alloc() promises zeroes; a fresh BO holds what the VRAM
 * held (amdkfd allocates it with VRAM_WIPE_ON_RELEASE, not VRAM_CLEARED:
 * amdgpu_amdkfd_gpuvm.c). The agent's own buffers (EOP) need none. */
static aql_status mem_alloc(aql_agent *agent, size_t size, void **out)
{
	aql_status st = kfd_mem_alloc(agent, size, out);

	if (st == AQL_OK && (st = kfd_zero(agent_of(agent), *out, size)) != AQL_OK) {
		kfd_mem_free(agent, *out);
		*out = NULL;
	}
	return st;
}

/* code_protect stays NULL: the loader protects host code only, and the
 * GPU's code stays readable and writable for the host as on ROCr;
 * code_loaded invalidates the GPU's code caches. */
static const struct aql_agent_ops kfd_agent_ops = {
	.get_info = get_info,
	.destroy = destroy,
	.queue_attach = kfd_queue_attach,
	.queue_detach = kfd_queue_detach,
	.queue_set_priority = kfd_queue_set_priority,
	.code_alloc = kfd_code_alloc,
	.code_free = kfd_code_free,
	.code_loaded = kfd_code_loaded,
	.mem_alloc = mem_alloc,
	.mem_free = kfd_mem_free,
	.copy = kfd_copy,
	.encode_copy = kfd_encode_copy,
	.mem_register = kfd_mem_register,
	.mem_unregister = kfd_mem_unregister,
	.kernel_hidden = kfd_kernel_hidden,
	.ticks_to_ns = kfd_ticks_to_ns,
};

static aql_status open_agent(uint32_t index, aql_agent **out)
{
	const struct kfd_process *p;
	const struct kfd_node *n;
	struct kfd_agent *a;
	aql_status st;

	if ((st = count(&(uint32_t){ 0 })) != AQL_OK || (st = kfd_process_get(&p)) != AQL_OK)
		return st;
	n = kfd_agent_node(p, index);
	if (!n)
		return aql_fail(AQL_ERR_INVALID_ARG, "amd agent %u does not exist: there are %u",
				index, p->usable);
	if ((st = gpu_open(n)) != AQL_OK)
		return st;
	a = calloc(1, sizeof(*a));
	if (!a)
		return aql_fail(AQL_ERR_NOMEM, "no memory for AMD agent %u", index);
	a->base.ops = &kfd_agent_ops;
	a->process = p;
	a->node = n;
	a->render_fd = gpus[n - p->topo.nodes].render_fd;
	a->apertures = &gpus[n - p->topo.nodes].apertures;
	fill_info(n, index, &a->info);
	st = kfd_events_open(a);
	if (st != AQL_OK) {
		free(a);
		return st;
	}
	kfd_clock_open(a);
	kfd_copy_open(a);
	kfd_hidden_open(a);
	a->opened = 1;
	*out = &a->base;
	return AQL_OK;
}

/* The CPU agent stays the default: a GPU is only used when asked for. */
static aql_status open_default(aql_agent **out)
{
	(void)out;
	return aql_fail(AQL_ERR_NOT_FOUND, "an AMD agent is never the default agent");
}

const struct aql_agent_driver aql_kfd_agent_driver = {
	.name = "amd",
	.kind = AQL_AGENT_AMD,
	.open_default = open_default,
	.count = count,
	.open = open_agent,
};
