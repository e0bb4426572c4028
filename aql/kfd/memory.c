/* SPDX-License-Identifier: MIT */
/*
 * Agent memory of an AMD GPU: buffer objects (BOs) of amdkfd placed at a
 * virtual address aql reserves, so that the host's address and the GPU's
 * are one number. VRAM and GTT BOs: reserve the range with an anonymous
 * PROT_NONE mapping, ALLOC_MEMORY_OF_GPU at it, map the render node's
 * offset over it where the host uses the BO, MAP_MEMORY_TO_GPU. Host
 * memory: a USERPTR BO at the host's own address. Freeing is the reverse:
 * UNMAP first, since FREE refuses a BO still mapped with -EBUSY
 * (amdgpu_amdkfd_gpuvm.c amdgpu_amdkfd_gpuvm_free_memory_of_gpu).
 *
 * Every BO of the process is kept in one registry sorted by address, under
 * one lock held across the ioctls, so that registering fills the gaps
 * between ranges exactly once and frees find their BO.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "aql/agent_impl.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "mem/host_mem.h"
#include "mem/pages.h"
#include "util/error.h"

/* BO_SCRATCH: VRAM inside a queue's scratch window, whose addresses the
 * caller reserved (queue.c); like USERPTR it owns no range of its own. */
enum bo_kind { BO_AGENT, BO_CODE, BO_USERPTR, BO_SCRATCH };

struct kfd_bo {
	uintptr_t start, end;		/* page aligned */
	uint64_t handle;
	uint64_t mmap_offset;		/* the render node's, for VRAM and GTT */
	enum bo_kind kind;
	uint32_t host;			/* 1: the host reaches it too */
	uint32_t refs;			/* USERPTR: registrations covering it */
	const aql_code_object *code;	/* BO_CODE: what was loaded there, or NULL */
};

/* A GPU's BOs, in address order, none overlapping. */
struct bo_list {
	struct kfd_bo *bos;
	uint32_t count, cap;
};

static pthread_mutex_t bo_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bo_list *lists;		/* one per topology node */

/* The BO list of a's GPU, NULL (with a message) without memory for it.
 * Under bo_lock. */
static struct bo_list *list_of(const struct kfd_agent *a)
{
	if (!lists && !(lists = calloc(a->process->topo.count, sizeof(*lists)))) {
		aql_fail(AQL_ERR_NOMEM, "no memory for the lists of AMD GPU buffers");
		return NULL;
	}
	return &lists[a->node - a->process->topo.nodes];
}

static struct kfd_agent *agent_of(aql_agent *agent)
{
	return (struct kfd_agent *)agent;
}

/*
 * Not inherited by a fork()ed child (MADV_DONTFORK), as libhsakmt does for
 * what it allocates (fmm.c, queues.c): the child cannot use /dev/kfd, and
 * after fork the parent's next store to a copy-on-write page of a USERPTR
 * BO moves it to a new page, whose MMU notifier stops every queue of the
 * process until the BO is restored (amdgpu_amdkfd_gpuvm.c
 * amdgpu_amdkfd_evict_userptr); a child's share of a render-node mapping
 * would keep the BO's memory alive. Only the whole pages inside the range:
 * a part of a page lies in malloc's heap, which the child keeps. Advice
 * only: a refusal changes what a fork copies, nothing else.
 */
static void dontfork(uintptr_t start, uintptr_t end)
{
	start = aql_page_round(start);
	end &= ~(aql_page_size() - 1);
	if (start < end)
		madvise((void *)start, end - start, MADV_DONTFORK);
}

static int mmap_failed(void *p)
{
	return (uintptr_t)p >= (uintptr_t)-4095;
}

/* Index of the first BO that ends above p. Under bo_lock. */
static uint32_t bo_after(const struct bo_list *l, uintptr_t p)
{
	uint32_t lo = 0, hi = l->count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (l->bos[mid].end <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The BO of kind starting at p, or NULL. Under bo_lock. */
static struct kfd_bo *bo_at(struct bo_list *l, uintptr_t p, enum bo_kind kind)
{
	uint32_t i = bo_after(l, p);

	if (i < l->count && l->bos[i].start == p && l->bos[i].kind == kind)
		return &l->bos[i];
	return NULL;
}

/* Room for one more BO. Under bo_lock. */
static aql_status bo_reserve_slot(struct bo_list *l)
{
	if (l->count == l->cap) {
		uint32_t cap = l->cap ? 2 * l->cap : 32;
		struct kfd_bo *grown = realloc(l->bos, cap * sizeof(*grown));

		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "no memory for the list of AMD GPU buffers");
		l->bos = grown;
		l->cap = cap;
	}
	return AQL_OK;
}

/* Keep b in address order. Under bo_lock, with a slot. */
static void bo_insert(struct bo_list *l, const struct kfd_bo *b)
{
	uint32_t at = bo_after(l, b->start);

	memmove(&l->bos[at + 1], &l->bos[at], (l->count - at) * sizeof(*l->bos));
	l->bos[at] = *b;
	l->count++;
}

static void bo_remove(struct bo_list *l, struct kfd_bo *b)
{
	uint32_t at = (uint32_t)(b - l->bos);

	memmove(&l->bos[at], &l->bos[at + 1], (l->count - at - 1) * sizeof(*l->bos));
	l->count--;
}

aql_status kfd_mem_available(const struct kfd_agent *a, uint64_t *out)
{
	struct kfd_ioctl_get_available_memory_args m = { .gpu_id = a->node->gpu_id };
	int r;

	*out = 0;
	if (a->process->minor < 9)
		return aql_fail(AQL_ERR_UNSUPPORTED, "KFD %u.%u has no AMDKFD_IOC_AVAILABLE_MEMORY",
				a->process->major, a->process->minor);
	r = aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_AVAILABLE_MEMORY, &m);
	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s: AMDKFD_IOC_AVAILABLE_MEMORY",
				      a->node->gfx);
	*out = m.available;
	return AQL_OK;
}

/* Why ALLOC_MEMORY_OF_GPU refused (kfd_chardev.c kfd_ioctl_alloc_memory_of_gpu). */
static aql_status alloc_fail(const struct kfd_agent *a, int r, uint32_t flags, size_t size)
{
	const char *gfx = a->node->gfx;
	uint32_t idx = a->info.device_index;
	uint64_t avail;

	if (r == -ENOMEM && (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)) {
		if (kfd_mem_available(a, &avail) != AQL_OK)
			return aql_fail(AQL_ERR_NOMEM,
					"VRAM exhausted on %s agent %u: %zu bytes asked, free "
					"memory unknown", gfx, idx, size);
		return aql_fail(AQL_ERR_NOMEM,
				"VRAM exhausted on %s agent %u: %zu bytes asked, %llu bytes "
				"free (AMDKFD_IOC_AVAILABLE_MEMORY)", gfx, idx, size,
				(unsigned long long)avail);
	}
	if (r == -ENOMEM)
		return aql_fail(AQL_ERR_NOMEM,
				"%s agent %u: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU of %zu bytes of %s "
				"memory: out of memory (KFD limits system memory a process may "
				"give its GPUs)", gfx, idx, size,
				flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR ? "registered host" : "GTT");
	/* The check comes before any other of the VRAM path. */
	if (r == -EINVAL && (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) &&
	    (flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"%s agent %u: host-visible VRAM refused: the PCI BAR is small; "
				"enable Resizable BAR / Above 4G decoding in the firmware setup",
				gfx, idx);
	return aql_fail_errno(AQL_ERR_DEVICE, -r,
			      "%s agent %u: AMDKFD_IOC_ALLOC_MEMORY_OF_GPU of %zu bytes (flags "
			      "0x%x)", gfx, idx, size, flags);
}

static int gpu_unmap(const struct kfd_agent *a, uint64_t handle)
{
	uint32_t id = a->node->gpu_id;
	struct kfd_ioctl_unmap_memory_from_gpu_args u = {
		.handle = handle,
		.device_ids_array_ptr = (uintptr_t)&id,
		.n_devices = 1,
	};

	return aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &u);
}

static int bo_free_handle(const struct kfd_agent *a, uint64_t handle)
{
	struct kfd_ioctl_free_memory_of_gpu_args f = { .handle = handle };

	return aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f);
}

/* Whether the BO's address range was reserved by bo_create. */
static int owns_range(enum bo_kind kind)
{
	return kind == BO_AGENT || kind == BO_CODE;
}

/* size bytes of addresses at align (a power of two, at least a page):
 * reserve align - page more and give back what lies outside. */
static void *reserve(const struct aql_kfd_sys *sys, size_t size, size_t align)
{
	size_t extra = align - aql_page_size();
	uintptr_t p, at;

	p = (uintptr_t)sys->mmap(NULL, size + extra, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mmap_failed((void *)p) || !extra)
		return (void *)p;
	at = (p + align - 1) & ~(uintptr_t)(align - 1);
	if (at > p)
		sys->munmap((void *)p, at - p);
	if (p + extra > at)
		sys->munmap((void *)(at + size), p + extra - at);
	return (void *)at;
}

/*
 * Make a BO of size bytes with flags at va (USERPTR: the host's range;
 * BO_SCRATCH: the caller's reserved range), or at a range reserved here
 * (AGENT and CODE, va 0), mapped to the GPU and, for
 * host_prot other than PROT_NONE, to the host; *out is its address.
 * Under bo_lock.
 */
static aql_status bo_create(const struct kfd_agent *a, struct bo_list *l, enum bo_kind kind, uint32_t flags,
			    int host_prot, uintptr_t va, size_t size, size_t align, void **out)
{
	const struct aql_kfd_sys *sys = a->process->sys;
	uint32_t id = a->node->gpu_id;
	struct kfd_ioctl_alloc_memory_of_gpu_args al = { .size = size, .gpu_id = id,
							 .flags = flags };
	struct kfd_ioctl_map_memory_to_gpu_args m = { .device_ids_array_ptr = (uintptr_t)&id,
						       .n_devices = 1 };
	struct kfd_bo b = { .kind = kind };
	int userptr = kind == BO_USERPTR, r;
	aql_status st;
	void *p;

	if ((st = bo_reserve_slot(l)) != AQL_OK)
		return st;
	if (owns_range(kind)) {
		/* NORESERVE: the range only holds the address; the BO is
		 * the memory. */
		p = reserve(sys, size, align);
		if (mmap_failed(p))
			return aql_fail_errno(AQL_ERR_NOMEM, (int)-(intptr_t)p,
					      "%s agent %u: reserving %zu bytes of addresses",
					      a->node->gfx, a->info.device_index, size);
		va = (uintptr_t)p;
	}
	al.va_addr = va;
	al.mmap_offset = userptr ? va : 0;
	r = aql_kfd_ioctl(sys, a->process->fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &al);
	if (r < 0) {
		st = alloc_fail(a, r, flags, size);
		goto unreserve;
	}
	if (host_prot != PROT_NONE) {
		p = sys->mmap((void *)va, size, host_prot, MAP_SHARED | MAP_FIXED, a->render_fd,
			      al.mmap_offset);
		if (mmap_failed(p)) {
			st = aql_fail_errno(AQL_ERR_SYSTEM, (int)-(intptr_t)p,
					    "%s agent %u: mapping a %zu-byte buffer for the host "
					    "through its render node", a->node->gfx,
					    a->info.device_index, size);
			goto free;
		}
		dontfork(va, va + size);
	}
	m.handle = al.handle;
	r = aql_kfd_ioctl(sys, a->process->fd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m);
	if (r < 0 || m.n_success != 1) {
		st = aql_fail_errno(r == -ENOMEM ? AQL_ERR_NOMEM : AQL_ERR_DEVICE,
				    r < 0 ? -r : EIO,
				    "%s agent %u: AMDKFD_IOC_MAP_MEMORY_TO_GPU of %zu bytes at "
				    "0x%llx (%u of 1 GPUs mapped)", a->node->gfx,
				    a->info.device_index, size, (unsigned long long)va,
				    m.n_success);
		/* A partial map is undone before the free, which refuses
		 * a mapped BO. */
		if (m.n_success)
			gpu_unmap(a, al.handle);
		goto free;
	}
	b.start = va;
	b.end = va + size;
	b.handle = al.handle;
	b.mmap_offset = al.mmap_offset;
	b.host = userptr || host_prot != PROT_NONE;
	b.refs = 1;
	bo_insert(l, &b);
	*out = (void *)va;
	return AQL_OK;
free:
	bo_free_handle(a, al.handle);
unreserve:
	if (owns_range(kind))
		sys->munmap((void *)va, size);
	return st;
}

/* Undo bo_create; b leaves the registry. Under bo_lock. Failures are
 * printed: the caller's free has no way to return them. */
static void bo_destroy(const struct kfd_agent *a, struct bo_list *l, struct kfd_bo *b)
{
	const struct aql_kfd_sys *sys = a->process->sys;
	struct kfd_bo gone = *b;
	int r;

	bo_remove(l, b);
	r = gpu_unmap(a, gone.handle);
	if (r == 0)
		r = bo_free_handle(a, gone.handle);
	if (r < 0)
		fprintf(stderr, "libaql: %s agent %u: freeing the %zu-byte buffer at 0x%llx: "
			"%s; its memory stays allocated\n", a->node->gfx, a->info.device_index,
			(size_t)(gone.end - gone.start), (unsigned long long)gone.start,
			strerror(-r));
	/* libhsakmt frees a BO before unmapping its pages, so the kernel
	 * never sees them go while the BO holds them. */
	if (owns_range(gone.kind))
		sys->munmap((void *)gone.start, gone.end - gone.start);
}

static aql_status alloc_kind(aql_agent *agent, enum bo_kind kind, uint32_t flags,
			     int host_prot, size_t size, size_t align, void **out)
{
	struct kfd_agent *a = agent_of(agent);
	size_t bytes = aql_page_round(size ? size : 1);
	struct bo_list *l;
	aql_status st;

	if (bytes < size)
		return aql_fail(AQL_ERR_NOMEM, "%s agent %u: %zu bytes is more than an address "
				"space", a->node->gfx, a->info.device_index, size);
	pthread_mutex_lock(&bo_lock);
	l = list_of(a);
	st = l ? bo_create(a, l, kind, flags, host_prot, 0, bytes, align, out) : AQL_ERR_NOMEM;
	pthread_mutex_unlock(&bo_lock);
	return st;
}

/* VRAM the host never maps: the host reaches it by copies, and on a small
 * BAR it could not map it at all. */
aql_status kfd_mem_alloc(aql_agent *agent, size_t size, void **out)
{
	return kfd_mem_alloc_aligned(agent, size, aql_page_size(), out);
}

aql_status kfd_mem_alloc_aligned(aql_agent *agent, size_t size, size_t align, void **out)
{
	return alloc_kind(agent, BO_AGENT,
			  KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
			  KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE, PROT_NONE, size, align, out);
}

/*
 * Host-visible system memory the GPU reaches (GTT), for the runtime's own
 * structures: the event page (events.c). Kept until exit.
 */
aql_status kfd_gtt_alloc(aql_agent *agent, size_t size, void **out, uint64_t *handle)
{
	struct kfd_agent *a = agent_of(agent);
	aql_status st;

	st = alloc_kind(agent, BO_AGENT,
			KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
			KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED,
			PROT_READ | PROT_WRITE, size, aql_page_size(), out);
	if (st != AQL_OK)
		return st;
	pthread_mutex_lock(&bo_lock);
	*handle = bo_at(list_of(a), (uintptr_t)*out, BO_AGENT)->handle;
	pthread_mutex_unlock(&bo_lock);
	return AQL_OK;
}

/* Free the BO of kind starting at ptr; what is not one is reported. */
static void free_kind(aql_agent *agent, enum bo_kind kind, void *ptr, const char *what)
{
	struct kfd_agent *a = agent_of(agent);
	struct kfd_bo *b = NULL;
	struct bo_list *l;

	pthread_mutex_lock(&bo_lock);
	l = list_of(a);
	if (l && (b = bo_at(l, (uintptr_t)ptr, kind)))
		bo_destroy(a, l, b);
	pthread_mutex_unlock(&bo_lock);
	if (!b)
		fprintf(stderr, "libaql: %s agent %u: %p is not %s of this agent; nothing "
			"freed\n", a->node->gfx, a->info.device_index, ptr, what);
}

void kfd_mem_free(aql_agent *agent, void *ptr)
{
	free_kind(agent, BO_AGENT, ptr, "agent memory");
}

/*
 * Scratch VRAM for a queue: the first gap of size bytes, at align, in the
 * window [base, base + window) that the caller reserved, found among the
 * GPU's BOs (every queue of the GPU takes its scratch from one window).
 */
aql_status kfd_scratch_alloc(aql_agent *agent, void *base, size_t window, size_t align,
			     size_t size, void **out)
{
	struct kfd_agent *a = agent_of(agent);
	uintptr_t at = (uintptr_t)base, end = at + window;
	size_t bytes = aql_page_round(size);
	struct bo_list *l;
	aql_status st;

	pthread_mutex_lock(&bo_lock);
	l = list_of(a);
	if (!l) {
		pthread_mutex_unlock(&bo_lock);
		return AQL_ERR_NOMEM;
	}
	for (uint32_t i = bo_after(l, at); i < l->count && l->bos[i].start < end; i++) {
		if (l->bos[i].start >= at && l->bos[i].start - at >= bytes)
			break;
		at = (l->bos[i].end + align - 1) & ~(uintptr_t)(align - 1);
	}
	if (bytes < size || at > end || end - at < bytes)
		st = aql_fail(AQL_ERR_NOMEM, "%s agent %u: no room for %zu bytes of scratch in "
			      "its %zu-byte scratch window", a->node->gfx, a->info.device_index,
			      size, window);
	else
		st = bo_create(a, l, BO_SCRATCH,
			       KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
			       KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE, PROT_NONE, at, bytes, 0, out);
	pthread_mutex_unlock(&bo_lock);
	return st;
}

void kfd_scratch_free(aql_agent *agent, void *ptr)
{
	free_kind(agent, BO_SCRATCH, ptr, "scratch memory");
}

/*
 * Code is written by the loader through the host mapping, so it needs
 * host-visible memory: VRAM through a large BAR, else GTT (system memory
 * the GPU reaches over PCIe).
 */
aql_status kfd_code_alloc(aql_agent *agent, enum aql_code_object_kind kind, size_t size,
			  void **out)
{
	struct kfd_agent *a = agent_of(agent);
	uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
	aql_status st;

	if (kind != AQL_CODE_OBJECT_AMDGPU)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"%s agent %u runs AMDGPU code objects only", a->node->gfx,
				a->info.device_index);
	flags |= a->node->vram_public ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM |
					KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC :
					KFD_IOC_ALLOC_MEM_FLAGS_GTT;
	st = alloc_kind(agent, BO_CODE, flags, PROT_READ | PROT_WRITE, size, aql_page_size(), out);
	/* A BO's pages are not known to be cleared: the loader relies on
	 * zeroes between segments. */
	if (st == AQL_OK)
		memset(*out, 0, aql_page_round(size ? size : 1));
	return st;
}

/* The code BO holding addr, or NULL. Under bo_lock. */
static struct kfd_bo *code_bo_at(struct bo_list *l, uintptr_t addr)
{
	uint32_t i = bo_after(l, addr);

	if (i < l->count && l->bos[i].start <= addr && l->bos[i].kind == BO_CODE)
		return &l->bos[i];
	return NULL;
}

void kfd_code_note(aql_agent *agent, const aql_code_object *co)
{
	const aql_code_object_info *info = aql_code_object_get_info(co);
	struct bo_list *l;
	struct kfd_bo *b;

	pthread_mutex_lock(&bo_lock);
	if ((l = list_of(agent_of(agent))) && (b = code_bo_at(l, (uintptr_t)info->base)))
		b->code = co;
	pthread_mutex_unlock(&bo_lock);
}

void kfd_code_kernel_name(aql_agent *agent, uint64_t kernel_object, char *buf, size_t size)
{
	const aql_code_object_info *info;
	struct bo_list *l;
	struct kfd_bo *b;

	snprintf(buf, size, "kernel_object 0x%llx", (unsigned long long)kernel_object);
	/* Under the lock: kfd_code_free takes the BO, and with it the
	 * object, away only under it. */
	pthread_mutex_lock(&bo_lock);
	if ((l = list_of(agent_of(agent))) && (b = code_bo_at(l, (uintptr_t)kernel_object)) &&
	    b->code) {
		info = aql_code_object_get_info(b->code);
		for (uint32_t i = 0; i < info->kernel_count; i++)
			if (info->kernels[i].kernel_object == kernel_object)
				snprintf(buf, size, "kernel %s", info->kernels[i].name);
	}
	pthread_mutex_unlock(&bo_lock);
}

void kfd_code_free(aql_agent *agent, void *base, size_t size)
{
	(void)size;
	free_kind(agent, BO_CODE, base, "code memory");
}

/* Drop one registration of the USERPTR BOs that meet [start, end), and
 * free those it was the last of. Under bo_lock. */
static void unref_range(const struct kfd_agent *a, struct bo_list *l, uintptr_t start,
			uintptr_t end)
{
	for (uint32_t i = bo_after(l, start); i < l->count && l->bos[i].start < end;) {
		if (l->bos[i].kind == BO_USERPTR && --l->bos[i].refs == 0)
			bo_destroy(a, l, &l->bos[i]);
		else
			i++;
	}
}

/*
 * Host memory becomes a USERPTR BO per page-rounded gap between the GPU's
 * registered ranges, so a page is registered once however many pools,
 * signals or typed buffers share it; each BO counts the registrations that
 * cover it, and the last one to go frees it. Agent or code memory is not
 * host memory: refused.
 */
aql_status kfd_mem_register(aql_agent *agent, void *ptr, size_t size)
{
	struct kfd_agent *a = agent_of(agent);
	uintptr_t first = (uintptr_t)ptr & ~(aql_page_size() - 1), start = first;
	uintptr_t end = aql_page_round((uintptr_t)ptr + size);
	uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
			 KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
	struct bo_list *l;
	aql_status st = AQL_OK;
	uint32_t i;
	void *got;

	if (!ptr || !size || end < start)
		return aql_fail(AQL_ERR_INVALID_ARG, "%s agent %u: registering [%p, +%zu)",
				a->node->gfx, a->info.device_index, ptr, size);
	pthread_mutex_lock(&bo_lock);
	if (!(l = list_of(a)))
		st = AQL_ERR_NOMEM;
	for (i = l ? bo_after(l, start) : 0; l && i < l->count && l->bos[i].start < end; i++) {
		if (l->bos[i].kind != BO_USERPTR) {
			st = aql_fail(AQL_ERR_INVALID_ARG,
				      "%s agent %u: [%p, +%zu) overlaps the agent's own memory at "
				      "0x%llx, which needs no registering", a->node->gfx,
				      a->info.device_index, ptr, size,
				      (unsigned long long)l->bos[i].start);
			break;
		}
	}
	while (st == AQL_OK && start < end) {
		uintptr_t gap_end = end;

		i = bo_after(l, start);
		if (i < l->count && l->bos[i].start <= start) {
			l->bos[i].refs++;
			start = l->bos[i].end;
			continue;
		}
		if (i < l->count && l->bos[i].start < end)
			gap_end = l->bos[i].start;
		st = bo_create(a, l, BO_USERPTR, flags, PROT_NONE, start, gap_end - start, 0,
			       &got);
		if (st == AQL_OK)
			start = gap_end;
	}
	/* Nothing half done: what this call counted or made goes again. */
	if (st != AQL_OK && l && start > first)
		unref_range(a, l, first, start);
	pthread_mutex_unlock(&bo_lock);
	return st;
}

aql_status kfd_mem_register_own(aql_agent *agent, void *ptr, size_t size)
{
	dontfork((uintptr_t)ptr, (uintptr_t)ptr + size);
	return kfd_mem_register(agent, ptr, size);
}

aql_status kfd_host_alloc(aql_agent *agent, size_t size, void **out)
{
	aql_status st = aql_host_mem_alloc(size, aql_page_size(), out);

	if (st == AQL_OK && (st = kfd_mem_register_own(agent, *out, size)) != AQL_OK) {
		aql_host_mem_free(*out, size);
		*out = NULL;
	}
	return st;
}

void kfd_host_free(aql_agent *agent, void *ptr, size_t size)
{
	if (!ptr)
		return;
	kfd_mem_unregister(agent, ptr, size);
	aql_host_mem_free(ptr, size);
}

/* Give back one registration of the page-rounded [ptr, ptr + size), as
 * aql/pool_agents.c and typed buffers give back what they registered. */
void kfd_mem_unregister(aql_agent *agent, void *ptr, size_t size)
{
	struct kfd_agent *a = agent_of(agent);
	struct bo_list *l;

	pthread_mutex_lock(&bo_lock);
	l = list_of(a);
	if (l)
		unref_range(a, l, (uintptr_t)ptr & ~(aql_page_size() - 1),
			    aql_page_round((uintptr_t)ptr + size));
	pthread_mutex_unlock(&bo_lock);
}

enum kfd_reach kfd_mem_reach(const struct kfd_agent *a, const void *ptr, size_t size)
{
	const struct kfd_topology *topo = &a->process->topo;
	uintptr_t p = (uintptr_t)ptr, end = p + (size ? size : 1);
	enum kfd_reach reach = KFD_REACH_NONE;
	struct bo_list *l;

	pthread_mutex_lock(&bo_lock);
	l = list_of(a);
	for (uint32_t i = l ? bo_after(l, p) : 0; l && i < l->count && l->bos[i].start <= p; i++) {
		/* Adjacent BOs may share a range (registered gaps). */
		if (reach == KFD_REACH_NONE || !l->bos[i].host)
			reach = l->bos[i].host ? KFD_REACH_HOST : KFD_REACH_DEVICE;
		p = l->bos[i].end;
		if (p >= end)
			break;
	}
	if (p < end)
		reach = KFD_REACH_NONE;
	/* Another GPU's memory: the host may not touch it either. */
	for (uint32_t g = 0; reach == KFD_REACH_NONE && lists && g < topo->count; g++) {
		struct bo_list *o = &lists[g];
		uint32_t i = bo_after(o, (uintptr_t)ptr);

		if (o != l && i < o->count && !o->bos[i].host &&
		    o->bos[i].start < (uintptr_t)ptr + (size ? size : 1))
			reach = KFD_REACH_OTHER_GPU;
	}
	pthread_mutex_unlock(&bo_lock);
	return reach;
}
