/* SPDX-License-Identifier: MIT */
/*
 * The process's buffer objects: ALLOC_MEMORY_OF_GPU, FREE, MAP, UNMAP and
 * AVAILABLE_MEMORY, and the render-node mmap that gives the host a BO.
 * VRAM and GTT BOs live in a memfd each: the host maps it through the
 * render node at the BO's fake offset, and the emulation keeps its own
 * view of it (what the GPU would see). USERPTR BOs are the caller's own
 * pages. Each refusal names the kernel's rule (drivers/gpu/drm/amd/:
 * amdkfd/kfd_chardev.c, amdgpu/amdgpu_amdkfd_gpuvm.c, amdgpu/amdgpu_vm.c,
 * amdgpu/amdgpu_gem.c). sys.c holds its lock around every call here;
 * the command processors (cp.c) read the table without it, under the
 * table's own lock, which every change here also takes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "emu.h"

#define MAX_BOS 4096
#define PAGE 4096ull
#define ALIGN_UP(x, a) (((x) + (a) - 1) & ~((a) - 1))

/* amdgpu_amdkfd.h VRAM_AVAILABLITY_ALIGN: VRAM is counted in 2 MiB steps. */
#define VRAM_ALIGN (2ull << 20)

/* drm_vma_manager: fake offsets start above 4 GiB (DRM_FILE_PAGE_OFFSET_START). */
#define FAKE_OFFSET_START (1ull << 32)

/* kfd_priv.h KFD_MMAP_GPU_ID: the /dev/kfd offset of a GPU's MMIO page. */
#define KFD_MMAP_GPU_ID(id) (((uint64_t)(id) & 0xffff) << 46)

/* amdgpu_amdkfd_gpuvm.c struct kgd_mem, one per handle. */
struct bo {
	int used;
	const struct emu_gpu *gpu;
	uint32_t idr;			/* the pdd's alloc_idr id */
	uint32_t flags;
	enum kfdemu_domain domain;
	uint64_t va, size, bytes;	/* bytes: size rounded to pages */
	uint64_t offset;		/* the render node's fake offset; 0: none */
	uint64_t userptr;
	uint32_t mapped;		/* bit i: mapped to GPU node i + 1's VM */
	/* amdgpu_bo_va.queue_refcount per VM: queues using the BO (6.12) */
	uint32_t queue_refs[EMU_MAX_GPUS];
	int memfd;			/* VRAM, GTT: the backing; else -1 */
	void *data;			/* the emulation's own mapping of memfd */
	/* VRAM without CPU access (the window, below): 1 while mapped at va for
	 * host builds; checked: va was looked at, reserved: the host holds
	 * va .. va + bytes as one PROT_NONE reservation */
	int windowed, checked, reserved;
};

static struct {
	struct bo bos[MAX_BOS];
	uint64_t next_offset;
	uint64_t vram_used[EMU_MAX_GPUS];	/* VRAM_ALIGN-rounded */
	uint64_t allocs;			/* ALLOC calls that reached the allocator */
} mem;

/* Held for writing around every change of mem.bos, for reading by the CPs. */
static pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;

/*
 * Host builds of kernels reach memory at its GPU address, which aql makes
 * the host's own. VRAM without CPU access has none: there the agent holds
 * a PROT_NONE reservation. While any CP holds the window (from its first
 * dispatch until it runs out of packets), each such BO is mapped over its
 * reservation from its memfd, and the reservation is put back when the
 * last CP lets go: outside kernels the host still faults on VRAM, as on a
 * GPU with a small BAR. vram_gen counts maps of such BOs, so that a hold
 * looks for new ones only when there are. window_lock comes before
 * table_lock.
 */
static pthread_mutex_t window_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned window_users;
static uint64_t vram_gen, window_gen;	/* window_gen: vram_gen last mapped */

static int cpu_less_vram(const struct bo *b)
{
	return b->domain == KFDEMU_VRAM && !(b->flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC);
}

/* Whether [va, va + bytes) lies in one PROT_NONE private mapping of the
 * host: the agent's reservation, which a fixed mapping may replace. */
static int reserved_at(uint64_t va, uint64_t bytes)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long long lo, hi;
	char perms[8], line[512];
	int ok = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) == 3 && lo <= va && va < hi) {
			ok = va + bytes <= hi && strcmp(perms, "---p") == 0;
			break;
		}
	if (f)
		fclose(f);
	return ok;
}

static void window_put_back(struct bo *b)
{
	if (mmap((void *)(uintptr_t)b->va, b->bytes, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
		fprintf(stderr, "kfd-emu: putting back the reservation of VRAM at 0x%llx: %s\n",
			(unsigned long long)b->va, strerror(errno));
	b->windowed = 0;
}

/* Map what is not mapped yet. Under window_lock. */
static void window_map(void)
{
	uint64_t gen = __atomic_load_n(&vram_gen, __ATOMIC_ACQUIRE);

	if (gen == window_gen)
		return;
	pthread_rwlock_rdlock(&table_lock);
	for (int i = 0; i < MAX_BOS; i++) {
		struct bo *b = &mem.bos[i];

		if (!b->used || b->windowed || !b->mapped || !cpu_less_vram(b))
			continue;
		if (!b->checked) {
			b->checked = 1;
			b->reserved = reserved_at(b->va, b->bytes);
			if (!b->reserved)
				fprintf(stderr, "kfd-emu: VRAM at 0x%llx (%llu bytes) has no host "
					"reservation at its address: host builds cannot reach it\n",
					(unsigned long long)b->va, (unsigned long long)b->bytes);
		}
		if (b->reserved && mmap((void *)(uintptr_t)b->va, b->bytes, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_FIXED, b->memfd, 0) != MAP_FAILED)
			b->windowed = 1;
	}
	pthread_rwlock_unlock(&table_lock);
	window_gen = gen;
}

void emu_memory_window_hold(int *held)
{
	pthread_mutex_lock(&window_lock);
	if (!*held) {
		*held = 1;
		window_users++;
	}
	window_map();
	pthread_mutex_unlock(&window_lock);
}

void emu_memory_window_release(int *held)
{
	if (!*held)
		return;
	pthread_mutex_lock(&window_lock);
	*held = 0;
	if (--window_users == 0) {
		pthread_rwlock_rdlock(&table_lock);
		for (int i = 0; i < MAX_BOS; i++)
			if (mem.bos[i].used && mem.bos[i].windowed)
				window_put_back(&mem.bos[i]);
		pthread_rwlock_unlock(&table_lock);
		/* the next hold maps them all again */
		window_gen = __atomic_load_n(&vram_gen, __ATOMIC_ACQUIRE) - 1;
	}
	pthread_mutex_unlock(&window_lock);
}

static void bo_drop(struct bo *b)
{
	if (b->windowed)
		window_put_back(b);
	if (b->data)
		munmap(b->data, b->bytes);
	if (b->memfd >= 0)
		close(b->memfd);
	if (b->domain == KFDEMU_VRAM)
		mem.vram_used[b->gpu->node - 1] -= ALIGN_UP(b->bytes, VRAM_ALIGN);
	memset(b, 0, sizeof(*b));
}

void emu_memory_reset(void)
{
	/* A forked child's first open: the parent's BOs are not its own,
	 * but the memfds and views it inherited are, and are let go. */
	pthread_rwlock_wrlock(&table_lock);
	for (int i = 0; i < MAX_BOS; i++)
		if (mem.bos[i].used)
			bo_drop(&mem.bos[i]);
	memset(&mem, 0, sizeof(mem));
	window_users = 0;
	mem.next_offset = FAKE_OFFSET_START;
	pthread_rwlock_unlock(&table_lock);
}

static uint64_t handle_of(const struct bo *b)
{
	return (uint64_t)b->gpu->gpu_id << 32 | b->idr;
}

/* kfd_process_device_translate_handle: the BO of a handle, or NULL. */
static struct bo *bo_by_handle(uint64_t handle)
{
	for (int i = 0; i < MAX_BOS; i++)
		if (mem.bos[i].used && handle_of(&mem.bos[i]) == handle)
			return &mem.bos[i];
	return NULL;
}

/* A BO of g, or one mapped to g's VM, in [va, va + bytes): each GPU has
 * a VM of its own, so BOs of two GPUs may share an address. */
static int overlaps(const struct emu_gpu *g, uint64_t va, uint64_t bytes)
{
	for (int i = 0; i < MAX_BOS; i++) {
		const struct bo *b = &mem.bos[i];

		if (b->used && (b->gpu == g || (b->mapped & 1u << (g->node - 1))) &&
		    va < b->va + b->bytes && b->va < va + bytes)
			return 1;
	}
	return 0;
}

/* kfd_dev_is_large_bar: no private (host-invisible) VRAM. */
static int large_bar(void)
{
	return !emu_config()->small_bar;
}

/* kfd_doorbell.c kfd_doorbell_process_slice: 1024 queues' doorbells,
 * 8 bytes each from gfx9 on, 4 before. */
static uint64_t doorbell_slice(const struct emu_gpu *g)
{
	return emu_model_gfx_version(g->model) >= 90000 ? 8192 : 4096;
}

/*
 * amdgpu_ttm.c amdgpu_ttm_tt_get_user_pages: a USERPTR range with a page
 * that is not mapped readable fails vma_lookup / hmm_range_fault: -EFAULT.
 */
static int user_range_mapped(uint64_t addr, uint64_t size)
{
	unsigned char byte;

	if (addr + size < addr)
		return 0;
	for (uint64_t p = addr & ~(PAGE - 1); p < addr + size; p += PAGE)
		if (emu_copy_from_user(&byte, (const void *)(uintptr_t)p, 1))
			return 0;
	return 1;
}

static enum kfdemu_domain domain_of(uint32_t flags)
{
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
		return KFDEMU_VRAM;
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT)
		return KFDEMU_GTT;
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)
		return KFDEMU_USERPTR;
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL)
		return KFDEMU_DOORBELL;
	if (flags & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)
		return KFDEMU_MMIO_REMAP;
	return KFDEMU_DOMAINS;
}

/* The lowest free id of the GPU's alloc_idr (idr_alloc from 0). */
static uint32_t idr_alloc(const struct emu_gpu *g)
{
	for (uint32_t id = 0;; id++) {
		int taken = 0;

		for (int i = 0; i < MAX_BOS && !taken; i++)
			taken = mem.bos[i].used && mem.bos[i].gpu == g && mem.bos[i].idr == id;
		if (!taken)
			return id;
	}
}

/* The backing of a VRAM or GTT BO: a memfd and the emulation's view. */
static int back(struct bo *b)
{
	char name[40];

	snprintf(name, sizeof(name), "kfd-emu:bo@%llx", (unsigned long long)b->va);
	b->memfd = memfd_create(name, MFD_CLOEXEC);
	if (b->memfd < 0)
		return -ENOMEM;
	if (ftruncate(b->memfd, (off_t)b->bytes))
		return -ENOMEM;
	b->data = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
	if (b->data == MAP_FAILED) {
		b->data = NULL;
		return -ENOMEM;
	}
	/* amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu asks for VRAM with
	 * VRAM_WIPE_ON_RELEASE, not VRAM_CLEARED: a fresh BO holds whatever
	 * was there. Old bytes (up to 16 MiB of them, to spare the host's
	 * memory) show code that takes zeroes for granted. */
	if (b->domain == KFDEMU_VRAM)
		memset(b->data, 0xa5, b->bytes < (16u << 20) ? b->bytes : (16u << 20));
	return 0;
}

/* kfd_chardev.c kfd_ioctl_alloc_memory_of_gpu, in the kernel's order. */
int emu_alloc_memory_of_gpu(void *data)
{
	struct kfd_ioctl_alloc_memory_of_gpu_args *args = data;
	const struct emu_gpu *g;
	enum kfdemu_domain domain = domain_of(args->flags);
	struct bo *b = NULL;
	uint64_t bytes;
	int r;

	if (args->size == 0)
		return -EINVAL;
	/* (the SVM range checks, -EADDRINUSE, have no SVM ranges to meet) */
	g = emu_gpu_by_id(args->gpu_id);
	if (!g)
		return -EINVAL;
	/* "Alloc host visible vram on small bar is not allowed" */
	if ((args->flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) &&
	    (args->flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC) && !large_bar())
		return -EINVAL;
	/* kfd_bind_process_to_device: no ACQUIRE_VM on this GPU */
	if (!emu_process_vm_file(g))
		return -ENODEV;
	if (domain == KFDEMU_DOORBELL && args->size != doorbell_slice(g))
		return -EINVAL;
	if (domain == KFDEMU_MMIO_REMAP && args->size != PAGE)
		return -EINVAL;
	/* amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: no domain bit */
	if (domain == KFDEMU_DOMAINS)
		return -EINVAL;
	/* ... USERPTR takes the host address in mmap_offset */
	if (domain == KFDEMU_USERPTR && !args->mmap_offset)
		return -EINVAL;
	bytes = ALIGN_UP(args->size, PAGE);
	if (bytes < args->size)
		return -ENOMEM;
	/*
	 * The emulation's own rule: a VA already holding a BO in the GPU's
	 * VM is -EINVAL here, where the kernel refuses the overlap when it
	 * maps the VA
	 * (amdgpu_vm.c amdgpu_vm_bo_map, "conflict with", -EINVAL).
	 */
	if (overlaps(g, args->va_addr, bytes))
		return -EINVAL;
	/* AQL_KFD_EMU_FAIL=alloc_enomem[:N] */
	if (emu_config()->fail_alloc_after >= 0 &&
	    mem.allocs++ >= (uint64_t)emu_config()->fail_alloc_after)
		return -ENOMEM;
	/*
	 * amdgpu_amdkfd_reserve_mem_limit: VRAM past the device's size is
	 * -ENOMEM (counted in VRAM_AVAILABLITY_ALIGN steps; the kernel also
	 * holds back page-table reserve, not modelled).
	 */
	if (domain == KFDEMU_VRAM &&
	    (bytes > emu_model_vram(g->model) ||
	     mem.vram_used[g->node - 1] + ALIGN_UP(bytes, VRAM_ALIGN) > emu_model_vram(g->model)))
		return -ENOMEM;
	if (domain == KFDEMU_USERPTR && !user_range_mapped(args->mmap_offset, args->size))
		return -EFAULT;
	for (int i = 0; i < MAX_BOS && !b; i++)
		if (!mem.bos[i].used)
			b = &mem.bos[i];
	/* idr_alloc failure: -EFAULT ("Failed to allocate IDR") */
	if (!b)
		return -EFAULT;
	pthread_rwlock_wrlock(&table_lock);
	*b = (struct bo){ .used = 1, .gpu = g, .idr = idr_alloc(g), .flags = args->flags,
			  .domain = domain, .va = args->va_addr, .size = args->size,
			  .bytes = bytes, .memfd = -1 };
	/* counted first: bo_drop gives it back */
	if (domain == KFDEMU_VRAM)
		mem.vram_used[g->node - 1] += ALIGN_UP(bytes, VRAM_ALIGN);
	if (domain == KFDEMU_USERPTR) {
		b->userptr = args->mmap_offset;
	} else if (domain == KFDEMU_VRAM || domain == KFDEMU_GTT) {
		r = back(b);
		if (r) {
			bo_drop(b);
			pthread_rwlock_unlock(&table_lock);
			return r;
		}
	}
	pthread_rwlock_unlock(&table_lock);
	/* amdgpu_bo_mmap_offset for every BO but USERPTR; MMIO_REMAP's
	 * offset is /dev/kfd's own. */
	if (domain != KFDEMU_USERPTR) {
		b->offset = mem.next_offset;
		mem.next_offset += bytes;
	}
	args->handle = handle_of(b);
	if (domain == KFDEMU_MMIO_REMAP)
		args->mmap_offset = KFD_MMAP_GPU_ID(g->gpu_id);
	else if (domain != KFDEMU_USERPTR)
		args->mmap_offset = b->offset;
	return 0;
}

/* kfd_chardev.c kfd_ioctl_free_memory_of_gpu */
int emu_free_memory_of_gpu(void *data)
{
	const struct kfd_ioctl_free_memory_of_gpu_args *args = data;
	struct bo *b;

	/* "Free signal BO is not allowed": the event page, before the handle
	 * is looked at */
	if (emu_events_page_handle() && args->handle == emu_events_page_handle())
		return -EPERM;
	if (!emu_gpu_by_id((uint32_t)(args->handle >> 32)))
		return -EINVAL;
	b = bo_by_handle(args->handle);
	if (!b)
		return -EINVAL;
	/* amdgpu_amdkfd_gpuvm_free_memory_of_gpu: "is still mapped" */
	if (b->mapped)
		return -EBUSY;
	pthread_mutex_lock(&window_lock);
	pthread_rwlock_wrlock(&table_lock);
	bo_drop(b);
	pthread_rwlock_unlock(&table_lock);
	pthread_mutex_unlock(&window_lock);
	return 0;
}

/*
 * kfd_chardev.c kfd_ioctl_map_memory_to_gpu / kfd_ioctl_unmap_memory_from_gpu:
 * the checks both share, then one device at a time from n_success on.
 */
static int map_or_unmap(struct kfd_ioctl_map_memory_to_gpu_args *args, int map)
{
	uint32_t ids[EMU_MAX_GPUS * 4];
	const struct emu_gpu *g;
	struct bo *b;
	int r;

	if (args->n_devices == 0)
		return -EINVAL;
	if (args->n_success > args->n_devices)
		return -EINVAL;
	/* kmalloc_array of n_devices: the emulation bounds it instead */
	if (args->n_devices > sizeof(ids) / sizeof(ids[0]))
		return -ENOMEM;
	r = emu_copy_from_user(ids, (const void *)(uintptr_t)args->device_ids_array_ptr,
			       args->n_devices * sizeof(ids[0]));
	if (r)
		return r;
	g = emu_gpu_by_id((uint32_t)(args->handle >> 32));
	if (!g)
		return -EINVAL;
	/* map binds (-ENODEV without ACQUIRE_VM); unmap does not */
	if (map && !emu_process_vm_file(g))
		return -ENODEV;
	b = bo_by_handle(args->handle);
	if (!b)
		return -ENOMEM;
	for (uint32_t i = args->n_success; i < args->n_devices; i++) {
		const struct emu_gpu *peer = emu_gpu_by_id(ids[i]);
		uint32_t bit;

		if (!peer)
			return -EINVAL;
		bit = 1u << (peer->node - 1);
		if (map) {
			if (!emu_process_vm_file(peer))
				return -ENODEV;
			/* amdgpu_vm.c amdgpu_vm_bo_map: a VA off the GPU page */
			if (b->va & (PAGE - 1))
				return -EINVAL;
			/* already mapped on that VM: nothing to do */
			pthread_rwlock_wrlock(&table_lock);
			b->mapped |= bit;
			if (cpu_less_vram(b))
				__atomic_fetch_add(&vram_gen, 1, __ATOMIC_RELEASE);
			pthread_rwlock_unlock(&table_lock);
		} else {
			/* amdgpu_amdkfd_gpuvm_unmap_memory_from_gpu: a BO a live
			 * queue uses on that VM (6.12); one not mapped there is
			 * skipped */
			if ((b->mapped & bit) && b->queue_refs[peer->node - 1])
				return -EBUSY;
			pthread_rwlock_wrlock(&table_lock);
			b->mapped &= ~bit;
			pthread_rwlock_unlock(&table_lock);
		}
		args->n_success = i + 1;
	}
	return 0;
}

int emu_map_memory_to_gpu(void *data)
{
	return map_or_unmap(data, 1);
}

int emu_unmap_memory_from_gpu(void *data)
{
	return map_or_unmap(data, 0);
}

/*
 * kfd_chardev.c kfd_ioctl_get_available_memory → amdgpu_amdkfd.c
 * amdgpu_amdkfd_get_available_memory: VRAM not yet counted, rounded down
 * to VRAM_AVAILABLITY_ALIGN.
 */
int emu_available_memory(void *data)
{
	struct kfd_ioctl_get_available_memory_args *args = data;
	const struct emu_gpu *g = emu_gpu_by_id(args->gpu_id);
	uint64_t size, used;

	if (!g)
		return -EINVAL;
	size = emu_model_vram(g->model);
	used = mem.vram_used[g->node - 1];
	args->available = used < size ? (size - used) & ~(VRAM_ALIGN - 1) : 0;
	return 0;
}

void *emu_memory_mmap(const struct emu_gpu *gpu, uint64_t file_id, void *addr, size_t length,
		      int prot, int flags, uint64_t offset)
{
	struct bo *b = NULL;
	void *p;

	/* drm_gem.c drm_gem_mmap: drm_vma_offset_exact_lookup_locked finds
	 * the BO that starts at offset, or -EINVAL */
	for (int i = 0; i < MAX_BOS && !b; i++)
		if (mem.bos[i].used && mem.bos[i].offset == offset && mem.bos[i].gpu == gpu)
			b = &mem.bos[i];
	if (!b || length == 0)
		return (void *)(intptr_t)-EINVAL;
	/* drm_vma_node_is_allowed: only the render file of ACQUIRE_VM
	 * (drm_vma_node_allow in alloc_memory_of_gpu) may map it */
	if (emu_process_vm_file(gpu) != file_id)
		return (void *)(intptr_t)-EACCES;
	/* drm_gem_mmap_obj: a mapping longer than the BO */
	if (ALIGN_UP(length, PAGE) > b->bytes)
		return (void *)(intptr_t)-EINVAL;
	if (b->domain == KFDEMU_DOORBELL || b->domain == KFDEMU_MMIO_REMAP) {
		fprintf(stderr, "kfd-emu: mmap of a doorbell or MMIO BO is not emulated yet\n");
		return (void *)(intptr_t)-ENOSYS;
	}
	/*
	 * amdgpu_gem.c amdgpu_gem_object_mmap: a BO made without CPU access
	 * (VRAM without PUBLIC is AMDGPU_GEM_CREATE_NO_CPU_ACCESS in
	 * amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu) → -EPERM.
	 */
	if (b->domain == KFDEMU_VRAM && !(b->flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC))
		return (void *)(intptr_t)-EPERM;
	p = mmap(addr, length, prot, flags, b->memfd, 0);
	return p == MAP_FAILED ? (void *)(intptr_t)-errno : p;
}

void emu_memory_stats(struct kfdemu_stats *out)
{
	out->bos = 0;
	memset(out->bo_bytes, 0, sizeof(out->bo_bytes));
	for (int i = 0; i < MAX_BOS; i++)
		if (mem.bos[i].used) {
			out->bos++;
			out->bo_bytes[mem.bos[i].domain] += mem.bos[i].bytes;
		}
}

static void describe_bo(const struct bo *b, struct kfdemu_bo *out)
{
	*out = (struct kfdemu_bo){ .handle = handle_of(b), .va = b->va, .size = b->size,
				   .flags = b->flags, .domain = b->domain,
				   .gpu_id = b->gpu->gpu_id, .mapped = b->mapped,
				   .userptr = b->userptr, .data = b->data };
}

int emu_memory_by_handle(uint64_t handle, struct kfdemu_bo *out)
{
	const struct bo *b = bo_by_handle(handle);

	if (!b)
		return -EINVAL;
	describe_bo(b, out);
	return 0;
}

int emu_memory_lookup(uint64_t addr, struct kfdemu_bo *out)
{
	for (int i = 0; i < MAX_BOS; i++) {
		const struct bo *b = &mem.bos[i];

		if (b->used && addr >= b->va && addr < b->va + b->size) {
			describe_bo(b, out);
			return 0;
		}
	}
	return -1;
}

/* The BO mapped on gpu's VM whose range holds addr, or NULL. */
static struct bo *mapped_at(const struct emu_gpu *gpu, uint64_t addr)
{
	for (int i = 0; i < MAX_BOS; i++) {
		struct bo *b = &mem.bos[i];

		if (b->used && (b->mapped & 1u << (gpu->node - 1)) && addr >= b->va &&
		    addr - b->va < b->bytes)
			return b;
	}
	return NULL;
}

int emu_memory_queue_buffer_get(const struct emu_gpu *gpu, uint64_t addr, uint64_t size,
				uint64_t *handle)
{
	/* amdgpu_vm_bo_lookup_mapping on the GPU page of addr */
	struct bo *b = mapped_at(gpu, addr);
	uint64_t pages = size / PAGE;

	/* "expected size ... not equal to mapping": the mapping must start
	 * at addr's page and end at its last one; size 0 checks the start */
	if (!b || addr / PAGE != b->va / PAGE || (pages && b->bytes / PAGE != pages))
		return -EINVAL;
	b->queue_refs[gpu->node - 1]++;
	*handle = handle_of(b);
	return 0;
}

void emu_memory_queue_buffer_put(const struct emu_gpu *gpu, uint64_t handle)
{
	struct bo *b = bo_by_handle(handle);

	if (b && b->queue_refs[gpu->node - 1])
		b->queue_refs[gpu->node - 1]--;
}

void *emu_memory_gpu_begin_bo(const struct emu_gpu *gpu, uint64_t addr, uint64_t size,
			      struct kfdemu_bo *out)
{
	struct bo *b;

	pthread_rwlock_rdlock(&table_lock);
	b = mapped_at(gpu, addr);
	/* the GPU reads what the BO holds: its memfd, or the user's pages */
	if (b && size <= b->bytes - (addr - b->va) && (b->data || b->userptr)) {
		if (out)
			describe_bo(b, out);
		return (char *)(b->data ? b->data : (void *)(uintptr_t)b->userptr) + (addr - b->va);
	}
	pthread_rwlock_unlock(&table_lock);
	return NULL;
}

void emu_memory_each_code(const struct emu_gpu *gpu, uint64_t lo, uint64_t hi,
			  void (*fn)(const struct kfdemu_bo *bo, const void *bytes, void *user),
			  void *user)
{
	struct kfdemu_bo d;

	pthread_rwlock_rdlock(&table_lock);
	for (int i = 0; i < MAX_BOS; i++) {
		const struct bo *b = &mem.bos[i];

		if (!b->used || !(b->mapped & 1u << (gpu->node - 1)) ||
		    !(b->flags & KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE) || b->va >= hi ||
		    b->va + b->size <= lo || (!b->data && !b->userptr))
			continue;
		describe_bo(b, &d);
		fn(&d, b->data ? b->data : (void *)(uintptr_t)b->userptr, user);
	}
	pthread_rwlock_unlock(&table_lock);
}

void *emu_memory_gpu_begin(const struct emu_gpu *gpu, uint64_t addr, uint64_t size)
{
	return emu_memory_gpu_begin_bo(gpu, addr, size, NULL);
}

void emu_memory_gpu_end(void)
{
	pthread_rwlock_unlock(&table_lock);
}
