/* SPDX-License-Identifier: MIT */
/*
 * The CUDA agent: one CUDA device on its primary context, the one the
 * CUDA runtime and libraries built on it share. Agent memory is device
 * memory (cuMemAlloc), used in kernargs at its device address. Host memory
 * a kernel or a stream operation touches must be registered with the
 * context; thanks to unified addressing it then has the same address on
 * the device, so packets carry host pointers unchanged. aql's own memory
 * (pool blocks, signals) is registered on first use, a pool chunk or a
 * signal page at a time; other host memory is pageable and gets copied
 * through pinned staging by the queues.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <aql/mem.h>

#include "aql/timeline.h"
#include "loader/nv_impl.h"
#include "mem/pages.h"
#include "mem/pool.h"
#include "nv/nv.h"
#include "util/error.h"

/* CUDA's limit of local memory per thread. */
#define MAX_PRIVATE (512u << 10)
#define MAX_QUEUE_SIZE (1u << 20)
/* Bytes of each JIT log kept for an error message. */
#define JIT_LOG_SIZE (16u << 10)

/* A loaded module: what aql_module_load's base points to. The kernels'
 * names follow the array. */
struct nv_module {
	struct nv_module *next, *prev;
	CUmodule module;
	char *ptx;			/* a PTX module's text, for resident queues */
	uint32_t count;
	struct nv_kernel kernels[];
};

/* The agent and what only this file uses. */
struct agent {
	struct nv_agent nv;		/* first */
	pthread_mutex_t module_lock;
	struct nv_module *module_list;	/* loaded, under module_lock */
};

static struct agent *agent_of(aql_agent *agent)
{
	return (struct agent *)agent;
}

/* The context this thread last found or made current in nv_enter(). */
static __thread CUcontext noted;

aql_status nv_enter(struct nv_agent *a)
{
	CUcontext cur = NULL;
	CUresult r = a->cu->cuCtxGetCurrent(&cur);

	noted = NULL;
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuCtxGetCurrent", "NVIDIA agent %u", a->info.device_index);
	if (cur != a->ctx) {
		r = a->cu->cuCtxSetCurrent(a->ctx);
		if (r != CUDA_SUCCESS)
			return nv_fail(r, "cuCtxSetCurrent",
				       "NVIDIA agent %u: making its context current",
				       a->info.device_index);
	}
	noted = a->ctx;
	return AQL_OK;
}

aql_status nv_enter_noted(struct nv_agent *a)
{
	return noted == a->ctx ? AQL_OK : nv_enter(a);
}

int nv_enter_again(struct nv_agent *a, CUresult r)
{
	CUcontext cur = NULL;

	if (r != CUDA_ERROR_INVALID_CONTEXT && r != CUDA_ERROR_INVALID_HANDLE &&
	    r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
		return 0;
	noted = NULL;
	if (a->cu->cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur == a->ctx)
		return 0;
	return nv_enter(a) == AQL_OK;
}

/* ---- registered host ranges ---- */

/* Index of the first range that ends above p. Under reg_lock. */
static uint32_t range_after(const struct nv_agent *a, uintptr_t p)
{
	uint32_t lo = 0, hi = a->range_count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (a->ranges[mid].end <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether registered ranges cover [start, end) without a gap. Under reg_lock. */
static int covered(const struct nv_agent *a, uintptr_t start, uintptr_t end)
{
	for (uint32_t i = range_after(a, start); i < a->range_count && start < end; i++) {
		if (a->ranges[i].start > start)
			return 0;
		start = a->ranges[i].end;
	}
	return start >= end;
}

static aql_status memlock_fail(struct nv_agent *a, CUresult r, uintptr_t start, size_t size)
{
	struct rlimit rl;
	char limit[32] = "unknown";

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		if (rl.rlim_cur == RLIM_INFINITY)
			snprintf(limit, sizeof(limit), "unlimited");
		else
			snprintf(limit, sizeof(limit), "%llu KiB",
				 (unsigned long long)rl.rlim_cur >> 10);
	}
	return aql_fail(AQL_ERR_NOMEM,
			"NVIDIA agent %u: pinning %zu bytes of host memory at %p failed: "
			"cuMemHostRegister: %s (%s); pinned memory may count against RLIMIT_MEMLOCK "
			"(%s here): raise it (ulimit -l, or memlock in /etc/security/limits.conf)",
			a->info.device_index, size, (void *)start, nv_result_name(r),
			nv_result_string(r), limit);
}

/* Register [start, end) and record it at index at. Under reg_lock. */
static aql_status add_range(struct nv_agent *a, uint32_t at, uintptr_t start, uintptr_t end)
{
	CUresult r;

	if (a->range_count == a->range_cap) {
		uint32_t cap = a->range_cap ? 2 * a->range_cap : 16;
		struct nv_range *grown = realloc(a->ranges, cap * sizeof(*grown));

		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent: registered range list");
		a->ranges = grown;
		a->range_cap = cap;
	}
	r = a->cu->cuMemHostRegister((void *)start, end - start,
				     CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r == CUDA_ERROR_OUT_OF_MEMORY || r == CUDA_ERROR_OPERATING_SYSTEM)
		return memlock_fail(a, r, start, end - start);
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuMemHostRegister", "NVIDIA agent %u: registering %zu bytes at %p",
			       a->info.device_index, (size_t)(end - start), (void *)start);
	memmove(&a->ranges[at + 1], &a->ranges[at], (a->range_count - at) * sizeof(*a->ranges));
	a->ranges[at] = (struct nv_range){ start, end };
	a->range_count++;
	return AQL_OK;
}

/*
 * Register what ranges do not cover yet of [start, end), gap by gap: the
 * driver refuses to register a page twice, and each registration is
 * undone by its own base. Under reg_lock.
 */
static aql_status register_gaps(struct nv_agent *a, uintptr_t start, uintptr_t end)
{
	uint32_t i = range_after(a, start);
	aql_status st;

	while (start < end) {
		uintptr_t stop = end;

		if (i < a->range_count && a->ranges[i].start <= start) {
			start = a->ranges[i++].end;
			continue;
		}
		if (i < a->range_count && a->ranges[i].start < stop)
			stop = a->ranges[i].start;
		st = add_range(a, i, start, stop);
		if (st != AQL_OK)
			return st;
		i++;
		start = stop;
	}
	return AQL_OK;
}

aql_status nv_host_register(struct nv_agent *a, void *ptr, size_t size)
{
	uintptr_t page = aql_page_size();
	uintptr_t start = (uintptr_t)ptr & ~(page - 1);
	uintptr_t end = aql_page_round((uintptr_t)ptr + size);
	aql_status st;

	if (!size)
		return AQL_OK;
	st = nv_enter(a);
	if (st != AQL_OK)
		return st;
	pthread_mutex_lock(&a->reg_lock);
	st = covered(a, start, end) ? AQL_OK : register_gaps(a, start, end);
	pthread_mutex_unlock(&a->reg_lock);
	return st;
}

static int pinned_elsewhere(struct nv_agent *a, uintptr_t p)
{
	unsigned int type = 0;

	return a->cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					    (CUdeviceptr)p) == CUDA_SUCCESS &&
	       type == CU_MEMORYTYPE_HOST;
}

int nv_host_reachable(struct nv_agent *a, const void *ptr, size_t size)
{
	uintptr_t p = (uintptr_t)ptr, start, end;
	aql_mem_info info;
	int hit;

	if (!size)
		size = 1;
	pthread_mutex_lock(&a->reg_lock);
	hit = covered(a, p, p + size);
	pthread_mutex_unlock(&a->reg_lock);
	if (hit)
		return 1;
	/*
	 * aql's pools commit whole chunks, 64 KiB-aligned from a 2 MiB-aligned
	 * base in steps of 256 KiB or 2 MiB (mem/pool.c): the chunks a block
	 * lies in are committed throughout. Only the default pools, which
	 * live until exit: a pool destroyed under a registration would leave
	 * the device the old pages at addresses the process maps anew. Pools
	 * that list the agent register what they commit themselves.
	 */
	if (aql_mem_query(ptr, &info) == AQL_OK) {
		if (p + size > (uintptr_t)info.base + info.size ||
		    !aql_mem_pool_is_default(info.pool))
			return 0;
		start = (uintptr_t)info.base & ~(uintptr_t)(AQL_MEM_CHUNK_SIZE - 1);
		end = ((uintptr_t)info.base + info.size + AQL_MEM_CHUNK_SIZE - 1) &
		      ~(uintptr_t)(AQL_MEM_CHUNK_SIZE - 1);
		return nv_host_register(a, (void *)start, end - start) == AQL_OK;
	}
	/* Pinned by someone else (cuMemHostAlloc, a registration of the
	 * caller's): both ends known to the driver as host memory. */
	return nv_enter(a) == AQL_OK && pinned_elsewhere(a, p) &&
	       pinned_elsewhere(a, p + size - 1);
}

/* Signals come in page-sized blocks (aql/signal.c), so the page holds
 * signals only. */
aql_status nv_signal_reach(struct nv_agent *a, aql_signal *signal)
{
	return nv_host_register(a, signal, sizeof(*signal));
}

static aql_status mem_register(aql_agent *agent, void *ptr, size_t size)
{
	return nv_host_register(nv_agent_of(agent), ptr, size);
}

/* Undo the registrations that lie inside [ptr, ptr + size), as
 * aql/pool_agents.c gives back what it registered. */
static void mem_unregister(aql_agent *agent, void *ptr, size_t size)
{
	struct nv_agent *a = nv_agent_of(agent);
	uintptr_t start = (uintptr_t)ptr, end = start + size;
	uint32_t i, kept = 0;
	CUresult r;

	if (nv_enter(a) != AQL_OK) {
		fprintf(stderr, "libaql: %s; host memory stays registered\n", aql_error_message());
		return;
	}
	pthread_mutex_lock(&a->reg_lock);
	for (i = 0; i < a->range_count; i++) {
		struct nv_range rg = a->ranges[i];

		if (rg.start >= start && rg.end <= end) {
			r = a->cu->cuMemHostUnregister((void *)rg.start);
			if (r != CUDA_SUCCESS)
				fprintf(stderr, "libaql: NVIDIA agent %u: cuMemHostUnregister(%p) failed: %s (%s)\n",
					a->info.device_index, (void *)rg.start, nv_result_name(r),
					nv_result_string(r));
			continue;
		}
		a->ranges[kept++] = rg;
	}
	a->range_count = kept;
	pthread_mutex_unlock(&a->reg_lock);
}

/* ---- agent memory and copies ---- */

static aql_status mem_alloc(aql_agent *agent, size_t size, void **out)
{
	struct nv_agent *a = nv_agent_of(agent);
	CUdeviceptr d = 0;
	aql_status st = nv_enter(a);
	CUresult r;

	if (st != AQL_OK)
		return st;
	r = a->cu->cuMemAlloc(&d, size);
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuMemAlloc", "NVIDIA agent %u: %zu bytes of agent memory",
			       a->info.device_index, size);
	/* cuMemsetD8 is asynchronous to the host for device memory; the
	 * legacy stream's synchronisation makes the zeros land before any
	 * other stream or copy can see the block. */
	r = a->cu->cuMemsetD8(d, 0, size);
	if (r == CUDA_SUCCESS)
		r = a->cu->cuStreamSynchronize(NULL);
	if (r != CUDA_SUCCESS) {
		st = nv_fail(r, "cuMemsetD8", "NVIDIA agent %u: zeroing %zu bytes of agent memory",
			     a->info.device_index, size);
		a->cu->cuMemFree(d);
		return st;
	}
	*out = (void *)(uintptr_t)d;
	return AQL_OK;
}

static void mem_free(aql_agent *agent, void *ptr)
{
	struct nv_agent *a = nv_agent_of(agent);
	CUresult r;

	if (nv_enter(a) != AQL_OK) {
		fprintf(stderr, "libaql: %s; agent memory %p not freed\n", aql_error_message(), ptr);
		return;
	}
	r = a->cu->cuMemFree((CUdeviceptr)(uintptr_t)ptr);
	if (r != CUDA_SUCCESS)
		fprintf(stderr, "libaql: NVIDIA agent %u: cuMemFree(%p) failed: %s (%s)\n",
			a->info.device_index, ptr, nv_result_name(r), nv_result_string(r));
}

/* Whether p is device memory (of any context: unified addressing lets
 * the driver copy between devices). Host memory, registered or not, is
 * not; the driver answers INVALID_VALUE for memory it does not know. */
static int is_device(struct nv_agent *a, const void *p)
{
	unsigned int type = 0;

	return a->cu->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
					    (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS &&
	       type == CU_MEMORYTYPE_DEVICE;
}

static aql_status copy(aql_agent *agent, void *dst, const void *src, size_t size)
{
	struct nv_agent *a = nv_agent_of(agent);
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
	aql_status st = nv_enter(a);
	int dd, sd;
	CUresult r;
	const char *call;

	if (st != AQL_OK)
		return st;
	dd = is_device(a, dst);
	sd = is_device(a, src);
	if (!dd && !sd) {
		memmove(dst, src, size);
		return AQL_OK;
	}
	if (dd && sd) {
		call = "cuMemcpyDtoD";
		r = a->cu->cuMemcpyDtoD(d, s, size);
	} else if (dd) {
		call = "cuMemcpyHtoD";
		r = a->cu->cuMemcpyHtoD(d, src, size);
	} else {
		call = "cuMemcpyDtoH";
		r = a->cu->cuMemcpyDtoH(dst, s, size);
	}
	/* Device-to-device copies, and host-to-device ones from pageable
	 * memory, may return before the bytes arrive; they run on the
	 * legacy stream, which the synchronisation drains. */
	if (r == CUDA_SUCCESS && dd) {
		call = "cuStreamSynchronize";
		r = a->cu->cuStreamSynchronize(NULL);
	}
	if (r != CUDA_SUCCESS)
		return nv_fail(r, call, "NVIDIA agent %u: copying %zu bytes from %p to %p",
			       a->info.device_index, size, src, dst);
	return AQL_OK;
}

static aql_status encode_copy(aql_agent *agent, aql_packet *packet, void *dst,
			      const void *src, size_t size, void *args)
{
	(void)agent, (void)args;
	memset(packet, 0, sizeof(*packet));
	packet->header = aql_timeline_header(AQL_PACKET_AGENT_DISPATCH);
	packet->agent.type = NV_FN_COPY;
	packet->agent.arg[0] = (uint64_t)(uintptr_t)dst;
	packet->agent.arg[1] = (uint64_t)(uintptr_t)src;
	packet->agent.arg[2] = size;
	return AQL_OK;
}

static const char *kind_name(enum aql_code_object_kind kind)
{
	switch (kind) {
	case AQL_CODE_OBJECT_HOST: return "host";
	case AQL_CODE_OBJECT_AMDGPU: return "AMDGPU";
	case AQL_CODE_OBJECT_PTX: return "PTX";
	case AQL_CODE_OBJECT_CUBIN: return "cubin";
	}
	return "unknown";
}

static aql_status code_alloc(aql_agent *agent, enum aql_code_object_kind kind, size_t size,
			     void **out)
{
	(void)agent;
	(void)size;
	(void)out;
	return aql_fail(AQL_ERR_UNSUPPORTED,
			"the NVIDIA agent runs PTX and cubin code objects, not %s ones",
			kind_name(kind));
}

/* ---- modules ---- */

/* The log's lines, joined by "; " into out (truncated): a message is one line. */
static void join_lines(const char *log, char *out, size_t size)
{
	size_t n = 0;

	out[0] = 0;
	while (*log && n + 1 < size) {
		size_t len = strcspn(log, "\n");

		while (len && (log[len - 1] == ' ' || log[len - 1] == '\r'))
			len--;
		if (len) {
			n += (size_t)snprintf(out + n, size - n, "%s%.*s", n ? "; " : "", (int)len, log);
			if (n >= size)
				break;
		}
		log += strcspn(log, "\n");
		if (*log)
			log++;
	}
}

/*
 * The driver's refusal of a module, with the JIT's log. For
 * NO_BINARY_FOR_GPU, what the image holds beside the device's SM: the
 * driver says only that nothing fits.
 */
static aql_status jit_fail(struct nv_agent *a, CUresult r, const struct aql_module_load *load,
			   enum aql_code_object_kind kind, const char *log)
{
	char joined[512], held[256] = "";
	aql_status st;

	join_lines(log, joined, sizeof(joined));
	if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
		aql_nv_object_summary(load->image, load->size, held, sizeof(held));
	switch (r) {
	case CUDA_ERROR_INVALID_PTX:
	case CUDA_ERROR_INVALID_IMAGE:
	case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
	case CUDA_ERROR_NO_BINARY_FOR_GPU:
		st = AQL_ERR_INVALID_CODE_OBJECT;
		break;
	default:
		st = r == CUDA_ERROR_OUT_OF_MEMORY ? AQL_ERR_NOMEM : AQL_ERR_DEVICE;
	}
	if (held[0])
		return aql_fail(st, "NVIDIA agent %u (%s): the driver refused the %s module: "
				"cuModuleLoadDataEx failed: %s (%s): the device is %s, the image is %s, "
				"with no code for it%s%s", a->info.device_index, a->info.isa,
				kind_name(kind), nv_result_name(r), nv_result_string(r), a->info.isa,
				held, joined[0] ? "; JIT log: " : "", joined);
	return aql_fail(st, "NVIDIA agent %u (%s): the driver refused the %s module: "
			"cuModuleLoadDataEx failed: %s (%s)%s%s", a->info.device_index,
			a->info.isa, kind_name(kind), nv_result_name(r), nv_result_string(r),
			joined[0] ? "; JIT log: " : "", joined);
}

/* cuModuleLoadDataEx with the JIT's error log kept for the message. PTX
 * is text the driver reads up to its NUL; images from files may lack one. */
static aql_status load_image(struct nv_agent *a, enum aql_code_object_kind kind,
			     const struct aql_module_load *load, CUmodule *out)
{
	char *logs = calloc(2, JIT_LOG_SIZE), *text = NULL;
	const void *image = load->image;
	int options[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
			  CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES };
	void *values[4];
	aql_status st = AQL_OK;
	CUresult r;

	if (!logs)
		return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent: JIT log buffers");
	if (kind == AQL_CODE_OBJECT_PTX &&
	    (!load->size || ((const char *)load->image)[load->size - 1])) {
		text = malloc(load->size + 1);
		if (!text) {
			free(logs);
			return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent: a copy of %zu bytes of PTX",
					load->size);
		}
		memcpy(text, load->image, load->size);
		text[load->size] = 0;
		image = text;
	}
	values[0] = logs;
	values[1] = (void *)(uintptr_t)JIT_LOG_SIZE;
	values[2] = logs + JIT_LOG_SIZE;
	values[3] = (void *)(uintptr_t)JIT_LOG_SIZE;
	r = a->cu->cuModuleLoadDataEx(out, image, 4, options, values);
	if (r != CUDA_SUCCESS) {
		logs[JIT_LOG_SIZE - 1] = 0;
		st = jit_fail(a, r, load, kind, logs);
	}
	free(text);
	free(logs);
	return st;
}

static aql_status find_kernel(struct nv_agent *a, CUmodule module, struct nv_kernel *k,
			      const char *name)
{
	static const struct { int attr; const char *what; } attrs[] = {
		{ CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "static shared memory" },
		{ CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "largest block" },
		{ CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, "dynamic shared memory" },
	};
	uint32_t *slots[] = { &k->static_lds, &k->max_threads, &k->dynamic_lds_allowed };
	CUresult r = a->cu->cuModuleGetFunction(&k->fn, module, name);

	if (r == CUDA_ERROR_NOT_FOUND)
		return aql_fail(AQL_ERR_NOT_FOUND,
				"NVIDIA agent %u: the driver finds no kernel \"%s\" in the module "
				"(cuModuleGetFunction: %s)", a->info.device_index, name,
				nv_result_name(r));
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuModuleGetFunction", "NVIDIA agent %u: kernel \"%s\"",
			       a->info.device_index, name);
	for (size_t i = 0; i < sizeof(attrs) / sizeof(*attrs); i++) {
		int v = 0;

		r = a->cu->cuFuncGetAttribute(&v, attrs[i].attr, k->fn);
		if (r != CUDA_SUCCESS)
			return nv_fail(r, "cuFuncGetAttribute", "NVIDIA agent %u: %s of kernel \"%s\"",
				       a->info.device_index, attrs[i].what, name);
		*slots[i] = v > 0 ? (uint32_t)v : 0;
	}
	return AQL_OK;
}

static void module_free(struct nv_agent *a, struct nv_module *m)
{
	CUresult r = a->cu->cuModuleUnload(m->module);

	if (r != CUDA_SUCCESS)
		fprintf(stderr, "libaql: NVIDIA agent %u: cuModuleUnload failed: %s (%s)\n",
			a->info.device_index, nv_result_name(r), nv_result_string(r));
	free(m->ptx);
	free(m);
}

static aql_status module_load(aql_agent *agent, enum aql_code_object_kind kind,
			      struct aql_module_load *load)
{
	struct agent *ag = agent_of(agent);
	struct nv_agent *a = &ag->nv;
	uint32_t n = load->kernel_count;
	size_t size = sizeof(struct nv_module) + n * sizeof(struct nv_kernel);
	struct nv_module *m;
	CUmodule module = NULL;
	aql_status st;
	char *names;

	if (kind != AQL_CODE_OBJECT_PTX && kind != AQL_CODE_OBJECT_CUBIN)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"the NVIDIA agent runs PTX and cubin code objects, not %s ones",
				kind_name(kind));
	for (uint32_t i = 0; i < n; i++)
		size += strlen(load->kernel_names[i]) + 1;
	m = calloc(1, size);
	if (!m)
		return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent: a module of %u kernels", n);
	if ((st = nv_enter(a)) != AQL_OK || (st = load_image(a, kind, load, &module)) != AQL_OK) {
		free(m);
		return st;
	}
	m->module = module;
	m->count = n;
	if (kind == AQL_CODE_OBJECT_PTX && !(m->ptx = strndup(load->image, load->size))) {
		module_free(a, m);
		return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent: a copy of %zu bytes of PTX",
				load->size);
	}
	names = (char *)&m->kernels[n];
	for (uint32_t i = 0; i < n; i++) {
		struct nv_kernel *k = &m->kernels[i];
		size_t len = strlen(load->kernel_names[i]) + 1;

		k->name = memcpy(names, load->kernel_names[i], len);
		names += len;
		k->kernarg_size = load->kernarg_sizes[i];
		st = find_kernel(a, module, k, k->name);
		if (st != AQL_OK) {
			module_free(a, m);
			return st;
		}
		load->kernel_objects[i] = (uint64_t)(uintptr_t)k;
		load->group_segment_sizes[i] = k->static_lds;
		load->max_workgroup_sizes[i] = k->max_threads;
	}
	load->base = m;
	load->base_size = size;
	pthread_mutex_lock(&ag->module_lock);
	m->next = ag->module_list;
	if (m->next)
		m->next->prev = m;
	ag->module_list = m;
	a->modules++;
	pthread_mutex_unlock(&ag->module_lock);
	return AQL_OK;
}

aql_status nv_modules_each_ptx(struct nv_agent *a,
			       aql_status (*f)(void *user, const char *ptx,
					       struct nv_kernel *kernels, uint32_t count),
			       void *user)
{
	struct agent *ag = agent_of(&a->base);
	aql_status st = AQL_OK;
	struct nv_module *m;

	pthread_mutex_lock(&ag->module_lock);
	/* Oldest first: the list's head is the latest load. */
	for (m = ag->module_list; m && m->next; m = m->next)
		;
	for (; m && st == AQL_OK; m = m->prev)
		if (m->ptx)
			st = f(user, m->ptx, m->kernels, m->count);
	pthread_mutex_unlock(&ag->module_lock);
	return st;
}

static void module_unload(aql_agent *agent, void *base)
{
	struct agent *ag = agent_of(agent);
	struct nv_module *m = base;

	pthread_mutex_lock(&ag->module_lock);
	if (m->prev)
		m->prev->next = m->next;
	else
		ag->module_list = m->next;
	if (m->next)
		m->next->prev = m->prev;
	ag->nv.modules--;
	pthread_mutex_unlock(&ag->module_lock);
	if (nv_enter(&ag->nv) != AQL_OK) {
		fprintf(stderr, "libaql: %s; module not unloaded\n", aql_error_message());
		free(m);
		return;
	}
	module_free(&ag->nv, m);
}

/* ---- the agent ---- */

static void get_info(aql_agent *agent, aql_agent_info *info)
{
	*info = nv_agent_of(agent)->info;
}

static void destroy(aql_agent *agent)
{
	struct agent *ag = agent_of(agent);
	struct nv_agent *a = &ag->nv;
	int entered = nv_enter(a) == AQL_OK;
	CUresult r;

	/* Code objects the caller never destroyed: their modules die with
	 * the context anyway; only the memory is ours to give back. */
	while (ag->module_list) {
		struct nv_module *m = ag->module_list;

		ag->module_list = m->next;
		if (entered)
			module_free(a, m);
		else
			free(m);
	}
	for (uint32_t i = 0; entered && i < a->range_count; i++)
		a->cu->cuMemHostUnregister((void *)a->ranges[i].start);
	r = a->cu->cuDevicePrimaryCtxRelease(a->device);
	if (r != CUDA_SUCCESS)
		fprintf(stderr, "libaql: NVIDIA agent %u: cuDevicePrimaryCtxRelease failed: %s (%s)\n",
			a->info.device_index, nv_result_name(r), nv_result_string(r));
	pthread_mutex_destroy(&a->reg_lock);
	pthread_mutex_destroy(&ag->module_lock);
	free(a->ranges);
	free(ag);
}

static const struct aql_agent_ops nv_agent_ops = {
	.get_info = get_info,
	.queue_attach = nv_queue_attach,
	.queue_set_priority = nv_queue_set_priority,
	.queue_detach = nv_queue_detach,
	.queue_flush = nv_queue_flush,
	.queue_find_pending = nv_queue_find_pending,
	.queue_request = nv_queue_request,
	.queue_fallbacks = nv_queue_fallbacks,
	.destroy = destroy,
	.code_alloc = code_alloc,
	.mem_alloc = mem_alloc,
	.mem_free = mem_free,
	.copy = copy,
	.encode_copy = encode_copy,
	.mem_register = mem_register,
	.mem_unregister = mem_unregister,
	.module_load = module_load,
	.module_unload = module_unload,
	.graph_build = nv_graph_build,
	.graph_update = nv_graph_update,
	.graph_launch = nv_graph_launch,
	.graph_destroy = nv_graph_destroy,
};

static aql_status attr(struct nv_agent *a, int which, const char *what, int *out)
{
	CUresult r = a->cu->cuDeviceGetAttribute(out, which, a->device);

	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuDeviceGetAttribute", "NVIDIA agent %u: %s",
			       a->info.device_index, what);
	return AQL_OK;
}

/* The NUMA node of the device's PCI function, from sysfs; -1 if unknown. */
static int32_t numa_node_of(int domain, int bus, int dev)
{
	char path[96];
	FILE *f;
	int node = -1;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/numa_node",
		 (unsigned)domain, (unsigned)bus, (unsigned)dev);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%d", &node) != 1)
		node = -1;
	fclose(f);
	return node;
}

static uint32_t saturate(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static aql_status fill_info(struct nv_agent *a)
{
	enum {
		THREADS, BX, BY, BZ, GX, GY, GZ, SHARED, OPTIN, WARP, SMS, MAJOR, MINOR,
		MEMOPS, UVA, HOSTPTR, MAPHOST, DOMAIN, BUS, DEV, NATTR
	};
	static const struct { int id; const char *what; } attrs[NATTR] = {
		[THREADS] = { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "threads per block" },
		[BX] = { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "block x" },
		[BY] = { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, "block y" },
		[BZ] = { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, "block z" },
		[GX] = { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "grid x" },
		[GY] = { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "grid y" },
		[GZ] = { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "grid z" },
		[SHARED] = { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory" },
		[OPTIN] = { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
			    "opt-in shared memory" },
		[WARP] = { CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size" },
		[SMS] = { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessors" },
		[MAJOR] = { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability" },
		[MINOR] = { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability" },
		[MEMOPS] = { CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
			     "64-bit stream memory operations" },
		[UVA] = { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified addressing" },
		[HOSTPTR] = { CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
			      "host pointers for registered memory" },
		[MAPHOST] = { CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "mapped host memory" },
		[DOMAIN] = { CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, "PCI domain" },
		[BUS] = { CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, "PCI bus" },
		[DEV] = { CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, "PCI device" },
	};
	int v[NATTR];
	aql_agent_info *info = &a->info;
	size_t total = 0;
	aql_status st;
	CUresult r;

	for (int i = 0; i < NATTR; i++)
		if ((st = attr(a, attrs[i].id, attrs[i].what, &v[i])) != AQL_OK)
			return st;
	/* Packets carry host pointers as they are (nv/README.md). */
	if (!v[UVA] || !v[HOSTPTR] || !v[MAPHOST])
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"NVIDIA agent %u: the device lacks unified addressing or the use "
				"of registered host memory at its host address, which aql needs",
				info->device_index);
	r = a->cu->cuDeviceGetName(info->name, sizeof(info->name), a->device);
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuDeviceGetName", "NVIDIA agent %u", info->device_index);
	info->name[sizeof(info->name) - 1] = 0;
	r = a->cu->cuDeviceTotalMem(&total, a->device);
	if (r != CUDA_SUCCESS)
		return nv_fail(r, "cuDeviceTotalMem", "NVIDIA agent %u", info->device_index);
	info->kind = AQL_AGENT_NVIDIA;
	snprintf(info->isa, sizeof(info->isa), "sm_%d%d", v[MAJOR], v[MINOR]);
	info->compute_units = (uint32_t)v[SMS];
	info->wavefront_size = (uint32_t)v[WARP];
	info->max_workgroup_size = (uint32_t)v[THREADS];
	for (int d = 0; d < 3; d++) {
		info->max_workgroup_dim[d] = (uint16_t)(v[BX + d] > UINT16_MAX ? UINT16_MAX : v[BX + d]);
		info->max_grid_dim[d] = saturate((uint64_t)v[GX + d] * (uint64_t)v[BX + d]);
	}
	info->default_group_segment_size = (uint32_t)v[SHARED];
	info->max_group_segment_size = (uint32_t)(v[OPTIN] > v[SHARED] ? v[OPTIN] : v[SHARED]);
	info->max_private_segment_size = MAX_PRIVATE;
	info->max_queue_size = MAX_QUEUE_SIZE;
	info->queue_features = 3;	/* kernel dispatch | agent dispatch (copies) */
	info->numa_node = numa_node_of(v[DOMAIN], v[BUS], v[DEV]);
	info->unified_memory = 0;
	info->wakes_host = 0;
	info->memory_size = total;
	a->mem_ops = v[MEMOPS] != 0;
	info->signal_path = a->mem_ops ? AQL_SIGNAL_PATH_DEVICE : AQL_SIGNAL_PATH_HOST_CALLBACK;
	info->driver_version = (uint32_t)a->cu->version;
	return AQL_OK;
}

static aql_status open_agent(uint32_t index, aql_agent **out)
{
	const struct nv_driver *cu;
	struct agent *ag;
	struct nv_agent *a;
	aql_status st;
	CUresult r;

	if ((st = nv_driver_get(&cu)) != AQL_OK)
		return st;
	ag = calloc(1, sizeof(*ag));
	if (!ag)
		return aql_fail(AQL_ERR_NOMEM, "NVIDIA agent %u: no memory", index);
	a = &ag->nv;
	a->base.ops = &nv_agent_ops;
	a->cu = cu;
	a->info.device_index = index;
	pthread_mutex_init(&a->reg_lock, NULL);
	pthread_mutex_init(&ag->module_lock, NULL);
	r = cu->cuDeviceGet(&a->device, (int)index);
	if (r != CUDA_SUCCESS) {
		st = nv_fail(r, "cuDeviceGet", "NVIDIA agent %u", index);
		goto fail;
	}
	r = cu->cuDevicePrimaryCtxRetain(&a->ctx, a->device);
	if (r != CUDA_SUCCESS) {
		st = nv_fail(r, "cuDevicePrimaryCtxRetain", "NVIDIA agent %u", index);
		goto fail;
	}
	if ((st = nv_enter(a)) != AQL_OK || (st = fill_info(a)) != AQL_OK) {
		cu->cuDevicePrimaryCtxRelease(a->device);
		goto fail;
	}
	*out = &a->base;
	return AQL_OK;
fail:
	pthread_mutex_destroy(&a->reg_lock);
	pthread_mutex_destroy(&ag->module_lock);
	free(ag);
	return st;
}

static aql_status count_agents(uint32_t *count)
{
	const struct nv_driver *cu;
	aql_status st = nv_driver_get(&cu);

	if (st == AQL_OK)
		*count = (uint32_t)cu->device_count;
	return st;
}

/* A GPU is opened by asking for it; the default stays the CPU agent, so
 * that a program's behaviour does not change with the machine. */
static aql_status open_default(aql_agent **out)
{
	(void)out;
	return aql_fail(AQL_ERR_UNSUPPORTED,
			"the default agent is the CPU agent; open NVIDIA agents with aql_agent_open()");
}

const struct aql_agent_driver aql_nv_agent_driver = {
	.name = "NVIDIA",
	.kind = AQL_AGENT_NVIDIA,
	.open_default = open_default,
	.count = count_agents,
	.open = open_agent,
};
