/* SPDX-License-Identifier: MIT */
/*
 * Kernel dispatch for the emulated CP (cp.c). The packet's kernel_object
 * is found in the code BO the agent's loader filled (the first PT_LOAD
 * holds the ELF header, the dynamic symbols and the descriptors, as lld
 * lays out AMDGPU code objects; the image starts at the BO or at a
 * 256-byte boundary in it); the `.kd` symbol at that address names
 * the kernel, whose host build (a host code object from
 * AQL_KFD_EMU_KERNELS, colon-separated, as AQL_CUDA_EMU_KERNELS for the
 * CUDA emulation) runs on a private CPU agent over the packet's grid with
 * the kernarg block the agent built, AMDGPU layout. What the CP and the
 * hardware would refuse is checked first, against the packet: the
 * descriptor, the kernarg block, the group segment and every hidden
 * argument the kernel's metadata names (code object V4, V5 and V6): those
 * the packet fixes, the queue pointer, and the device heap and hostcall
 * buffer a GPU would use (ockl's layouts: dm.cl, hostcall_impl.cl).
 *
 * The host kernel reaches buffers at their GPU addresses, which aql makes
 * the host's: USERPTR memory, and GTT or public VRAM the agent mapped at
 * its VA, and VRAM without CPU access, which the emulation maps over the
 * agent's reservation while CPs run kernels (cp.c holds the window).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/agent.h"
#include "aql/code_object.h"
#include "aql/host_kernel.h"
#include "aql/metadata.h"
#include "aql/queue.h"
#include "aql/signal.h"
#include "emu.h"

#define MAX_HOST_OBJECTS 16
#define EM_AMDGPU 224
#define PT_DYNAMIC 2
#define DT_NULL 0
#define DT_HASH 4
#define DT_STRTAB 5
#define DT_SYMTAB 6
#define PT_NOTE 4
#define NT_AMDGPU_METADATA 32
#define MAX_IMAGES 32
#define MAX_RECORDS 64
#define MAX_HIDDEN 64

_Static_assert(AQL_ARG_KIND_COUNT <= KFDEMU_HIDDEN_KINDS && KFDEMU_HIDDEN_KINDS <= 64,
	       "kfdemu_dispatch holds every hidden kind, and named is a 64-bit mask");

/* The host build of libaql's copy kernel (meson.build embeds it). */
extern const unsigned char kfdemu_blit_host[];
extern const size_t kfdemu_blit_host_size;

/* The private CPU agent and the host builds, made at the first dispatch:
 * the copy kernel's, then those of AQL_KFD_EMU_KERNELS. */
static struct {
	pthread_once_t once;
	pthread_mutex_t lock;		/* one host dispatch at a time */
	aql_agent *agent;
	aql_queue *queue;
	aql_signal *done;
	aql_code_object *objects[MAX_HOST_OBJECTS];
	int count;
	char error[160];
} host = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

static void host_init(void)
{
	aql_host_agent_config cfg = { .workers = 2 };
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };
	const char *list = getenv("AQL_KFD_EMU_KERNELS");
	char path[4096];

	if (aql_host_agent_create(&cfg, &host.agent) != AQL_OK ||
	    aql_queue_create(host.agent, &qc, &host.queue) != AQL_OK ||
	    aql_signal_create(0, &host.done) != AQL_OK ||
	    aql_code_object_load(host.agent, kfdemu_blit_host, kfdemu_blit_host_size, NULL,
				 &host.objects[host.count++]) != AQL_OK) {
		snprintf(host.error, sizeof(host.error), "the CPU agent for host builds: %s",
			 aql_error_message());
		return;
	}
	while (list && *list && host.count < MAX_HOST_OBJECTS) {
		const char *end = strchr(list, ':');
		size_t n = end ? (size_t)(end - list) : strlen(list);

		if (n > 0 && n < sizeof(path)) {
			memcpy(path, list, n);
			path[n] = 0;
			if (aql_code_object_load_file(host.agent, path, NULL,
						      &host.objects[host.count]) == AQL_OK)
				host.count++;
			else
				fprintf(stderr, "kfd-emu: AQL_KFD_EMU_KERNELS: %s: %s\n", path,
					aql_error_message());
		}
		list = end ? end + 1 : list + n;
	}
}

/* The host build of kernel name (without ".kd"), or NULL. */
static const aql_kernel *host_kernel(const char *name)
{
	const aql_kernel *k;

	for (int i = 0; i < host.count; i++)
		if (aql_code_object_kernel(host.objects[i], name, &k) == AQL_OK)
			return k;
	return NULL;
}

static uint64_t rd(const unsigned char *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * The name of the `.kd` symbol at offset kd_off of the image at img
 * (bytes long), copied to name; 0, or -1 when the image has no such
 * symbol or is not a loaded AMDGPU ELF.
 */
static int kd_name(const unsigned char *img, uint64_t bytes, uint64_t kd_off, char *name,
		   size_t size)
{
	uint64_t phoff, symtab = 0, strtab = 0, hash = 0, nsyms;
	uint32_t phnum;

	if (bytes < 64 || memcmp(img, "\177ELF", 4) || img[4] != 2 || rd(img + 18, 2) != EM_AMDGPU)
		return -1;
	phoff = rd(img + 32, 8);
	phnum = (uint32_t)rd(img + 56, 2);
	if (phoff > bytes || (uint64_t)phnum * 56 > bytes - phoff)
		return -1;
	for (uint32_t i = 0; i < phnum; i++) {
		const unsigned char *ph = img + phoff + (uint64_t)i * 56;
		uint64_t va = rd(ph + 16, 8), sz = rd(ph + 32, 8);

		if (rd(ph, 4) != PT_DYNAMIC)
			continue;
		if (va > bytes || sz > bytes - va)
			return -1;
		for (uint64_t d = va; d + 16 <= va + sz; d += 16) {
			uint64_t tag = rd(img + d, 8), val = rd(img + d + 8, 8);

			if (tag == DT_NULL)
				break;
			if (tag == DT_HASH)
				hash = val;
			else if (tag == DT_STRTAB)
				strtab = val;
			else if (tag == DT_SYMTAB)
				symtab = val;
		}
	}
	if (!hash || !symtab || !strtab || hash + 8 > bytes)
		return -1;
	nsyms = rd(img + hash + 4, 4);		/* nchain */
	if (symtab > bytes || nsyms > (bytes - symtab) / 24)
		return -1;
	for (uint64_t i = 1; i < nsyms; i++) {
		const unsigned char *s = img + symtab + i * 24;
		uint64_t at = strtab + rd(s, 4), len;

		if (rd(s + 8, 8) != kd_off || at >= bytes)
			continue;
		len = strnlen((const char *)img + at, bytes - at);
		if (len < 4 || len == bytes - at || len - 3 >= size ||
		    strcmp((const char *)img + at + len - 3, ".kd"))
			continue;
		memcpy(name, img + at, len - 3);
		name[len - 3] = 0;
		return 0;
	}
	return -1;
}

static int fail(char *why, size_t n, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t n, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return code;
}

/*
 * The NT_AMDGPU_METADATA note's descriptor in the loaded image at img
 * (bytes long), found through its PT_NOTE (lld places .note in the first
 * PT_LOAD): 0 with *off and *size, or -1.
 */
static int find_note(const unsigned char *img, uint64_t bytes, uint64_t *off, uint64_t *size)
{
	uint64_t phoff = rd(img + 32, 8);
	uint32_t phnum = (uint32_t)rd(img + 56, 2);

	if (phoff > bytes || (uint64_t)phnum * 56 > bytes - phoff)
		return -1;
	for (uint32_t i = 0; i < phnum; i++) {
		const unsigned char *ph = img + phoff + (uint64_t)i * 56;
		uint64_t at = rd(ph + 16, 8), sz = rd(ph + 32, 8), end;

		if (rd(ph, 4) != PT_NOTE || at > bytes || sz > bytes - at)
			continue;
		for (end = at + sz; at < end && end - at >= 12;) {
			uint64_t namesz = rd(img + at, 4), descsz = rd(img + at + 4, 4);
			uint64_t name = at + 12, desc = name + ((namesz + 3) & ~3ull);

			if (desc > end || descsz > end - desc)
				break;
			if (rd(img + at + 8, 4) == NT_AMDGPU_METADATA && namesz == 7 &&
			    !memcmp(img + name, "AMDGPU", 7)) {
				*off = desc;
				*size = descsz;
				return 0;
			}
			at = desc + ((descsz + 3) & ~3ull);
		}
	}
	return -1;
}

/* One hidden argument a kernel's metadata names. */
struct hidden_arg {
	enum aql_arg_kind kind;
	uint32_t offset, size;
};

/*
 * The metadata of the code object images kernels ran from, parsed once
 * per image: keyed by the code BO's handle and the image's address, and
 * the note's bytes compared, as a freed BO's handle and address come
 * back for the next code object.
 */
static struct {
	pthread_mutex_t lock;
	struct image {
		uint64_t handle, base;
		unsigned char *note;
		uint64_t note_size;
		aql_metadata *md;
	} images[MAX_IMAGES];
	unsigned next;			/* the slot the next image replaces */
} meta = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The hidden arguments of kernel name in the image whose metadata note is
 * note (size bytes), copied to out (at most MAX_HIDDEN; *count set): 0,
 * or -1 with why set when the note does not parse or names no such kernel.
 */
static int hidden_args(uint64_t handle, uint64_t base, const unsigned char *note, uint64_t size,
		       const char *name, struct hidden_arg *out, uint32_t *count, char *why,
		       size_t why_size)
{
	const aql_kernel_metadata *km = NULL;
	struct image *im = NULL;
	size_t len = strlen(name);
	int r = -1;

	pthread_mutex_lock(&meta.lock);
	for (unsigned i = 0; i < MAX_IMAGES && !im; i++)
		if (meta.images[i].md && meta.images[i].handle == handle &&
		    meta.images[i].base == base && meta.images[i].note_size == size &&
		    !memcmp(meta.images[i].note, note, size))
			im = &meta.images[i];
	if (!im) {
		aql_metadata *md = NULL;
		unsigned char *copy = malloc(size ? size : 1);

		if (!copy || aql_metadata_parse(note, size, &md) != AQL_OK) {
			fail(why, why_size, 8, "the metadata of the code object at 0x%llx: %s",
			     (unsigned long long)base, copy ? aql_error_message() : "out of memory");
			free(copy);
			goto out;
		}
		memcpy(copy, note, size);
		im = &meta.images[meta.next];
		meta.next = (meta.next + 1) % MAX_IMAGES;
		free(im->note);
		aql_metadata_free(im->md);
		*im = (struct image){ handle, base, copy, size, md };
	}
	for (uint32_t i = 0; i < im->md->kernel_count && !km; i++) {
		const char *sym = im->md->kernels[i].symbol;

		if (sym && !strncmp(sym, name, len) && !strcmp(sym + len, ".kd"))
			km = &im->md->kernels[i];
	}
	if (!km) {
		fail(why, why_size, 8, "the metadata of the code object at 0x%llx has no kernel %s.kd",
		     (unsigned long long)base, name);
		goto out;
	}
	*count = 0;
	for (uint32_t i = 0; i < km->arg_count; i++) {
		const aql_kernel_arg *a = &km->args[i];

		if (a->kind < AQL_ARG_HIDDEN_GLOBAL_OFFSET_X)
			continue;
		if (*count == MAX_HIDDEN) {
			fail(why, why_size, 8, "kernel %s names over %d hidden arguments", name,
			     MAX_HIDDEN);
			goto out;
		}
		out[(*count)++] = (struct hidden_arg){ a->kind, a->offset, a->size };
	}
	r = 0;
out:
	pthread_mutex_unlock(&meta.lock);
	return r;
}

/* The last dispatch of each of the kernels seen most recently (the hook). */
static struct {
	pthread_mutex_t lock;
	uint64_t seq;
	struct kfdemu_dispatch last[MAX_RECORDS];	/* by kernel name */
	unsigned next;
	int newest;			/* index of the last recorded, -1 none */
} rec = { .lock = PTHREAD_MUTEX_INITIALIZER, .newest = -1 };

static void record(const struct kfdemu_dispatch *d)
{
	int at = -1;

	pthread_mutex_lock(&rec.lock);
	for (int i = 0; i < MAX_RECORDS && at < 0; i++)
		if (rec.last[i].seq && !strcmp(rec.last[i].kernel, d->kernel))
			at = i;
	if (at < 0) {
		at = (int)rec.next;
		rec.next = (rec.next + 1) % MAX_RECORDS;
	}
	rec.last[at] = *d;
	rec.last[at].seq = ++rec.seq;
	rec.newest = at;
	pthread_mutex_unlock(&rec.lock);
}

int kfdemu_dispatch_last(const char *kernel, struct kfdemu_dispatch *out)
{
	int r = -1;

	if (!out)
		return -1;
	pthread_mutex_lock(&rec.lock);
	for (int i = 0; i < MAX_RECORDS && r < 0; i++)
		if (rec.last[i].seq && (kernel ? !strcmp(rec.last[i].kernel, kernel) :
						 i == rec.newest)) {
			*out = rec.last[i];
			r = 0;
		}
	pthread_mutex_unlock(&rec.lock);
	return r;
}

/* AMDGPU kernel descriptor fields (rocr_abi.md §4). */
struct kd {
	uint32_t group_fixed;
	uint32_t kernarg_size;
	int64_t entry_offset;
};

/*
 * The first address of [addr, addr + size) that no BO mapped on gpu
 * holds, with *bo the BO holding addr; 0 when all of it is mapped. With
 * host, a BO the host cannot reach coherently (VRAM) counts as a hole
 * too, and *vram says which it was.
 */
static uint64_t hole(const struct emu_gpu *gpu, uint64_t addr, uint64_t size, int host,
		     int *vram)
{
	uint64_t end = addr + size < addr ? UINT64_MAX : addr + size;
	struct kfdemu_bo bo;

	*vram = 0;
	while (addr < end) {
		if (!emu_memory_gpu_begin_bo(gpu, addr, 1, &bo))
			return addr ? addr : 1;
		emu_memory_gpu_end();
		if (host && bo.domain != KFDEMU_GTT && bo.domain != KFDEMU_USERPTR) {
			*vram = 1;
			return addr;
		}
		addr = bo.va + bo.size;
	}
	return 0;
}

/* dm.cl's heap_t: its size as CLR allocates it, and
 * the initial-slab fields. */
#define HEAP_BYTES (128u << 10)
#define HEAP_INITIAL_SLABS 108544
#define HEAP_INITIAL_SLABS_END 108552
#define HEAP_INITIAL_SLABS_START 108560
#define SLAB_BYTES (2ull << 20)

/*
 * hidden_heap_v1 as a GPU whose kernel calls malloc depends on it: 0 when
 * it holds, 32 with why, -1 for the VM fault such a GPU would take at
 * *fault_va (why set too).
 */
static int check_heap(const struct emu_cp_queue *q, uint64_t heap, char *why, size_t n,
		      uint64_t *fault_va)
{
	const unsigned char *h;
	struct kfdemu_bo bo;
	uint64_t start, end, next, at;
	int vram;

	at = hole(q->gpu, heap, HEAP_BYTES, 0, &vram);
	if (at) {
		*fault_va = at;
		return fail(why, n, -1, "hidden_heap_v1 0x%llx: the %u KiB heap is not all "
			    "mapped on the GPU (VM fault at 0x%llx)", (unsigned long long)heap,
			    HEAP_BYTES >> 10, (unsigned long long)at);
	}
	h = emu_memory_gpu_begin_bo(q->gpu, heap, 1, &bo);
	if (!h)
		return fail(why, n, 32, "hidden_heap_v1 0x%llx: its BO went away",
			    (unsigned long long)heap);
	/* The heap takes device-scope atomics from every wave (dm.cl); in
	 * system memory those need the platform's PCIe AtomicOps, which KFD
	 * does not promise, so CLR and aql put it in VRAM. The slabs are
	 * ordinary memory and may lie anywhere the GPU maps. */
	if (bo.domain != KFDEMU_VRAM) {
		emu_memory_gpu_end();
		return fail(why, n, 32, "hidden_heap_v1 0x%llx: not in VRAM (domain %u)",
			    (unsigned long long)heap, bo.domain);
	}
	if (heap - bo.va > bo.size - HEAP_BYTES) {
		emu_memory_gpu_end();
		return fail(why, n, 32, "hidden_heap_v1 0x%llx: less than %u KiB of its VRAM BO "
			    "after it", (unsigned long long)heap, HEAP_BYTES >> 10);
	}
	next = rd(h + HEAP_INITIAL_SLABS, 8);
	end = rd(h + HEAP_INITIAL_SLABS_END, 8);
	start = rd(h + HEAP_INITIAL_SLABS_START, 8);
	emu_memory_gpu_end();
	/* dealloc finds a block's slab as addr & ~(2 MiB - 1) */
	if (start % SLAB_BYTES || end % SLAB_BYTES)
		return fail(why, n, 32, "hidden_heap_v1 0x%llx: initial slabs [0x%llx, 0x%llx) "
			    "not 2 MiB aligned", (unsigned long long)heap,
			    (unsigned long long)start, (unsigned long long)end);
	if (start > end)
		return fail(why, n, 32, "hidden_heap_v1 0x%llx: initial_slabs_start 0x%llx above "
			    "initial_slabs_end 0x%llx", (unsigned long long)heap,
			    (unsigned long long)start, (unsigned long long)end);
	/* initial_slabs only grows from the start, a slab per fetch-add;
	 * waves racing for the last ones take it past the end (dm.cl
	 * obtain_new_slab), which is how the heap sees them used up */
	if (next < start)
		return fail(why, n, 32, "hidden_heap_v1 0x%llx: initial_slabs 0x%llx below "
			    "initial_slabs_start 0x%llx", (unsigned long long)heap,
			    (unsigned long long)next, (unsigned long long)start);
	at = hole(q->gpu, start, end - start, 0, &vram);
	if (at) {
		*fault_va = at;
		return fail(why, n, -1, "hidden_heap_v1 0x%llx: initial slabs [0x%llx, 0x%llx) "
			    "not mapped on the GPU (VM fault at 0x%llx)", (unsigned long long)heap,
			    (unsigned long long)start, (unsigned long long)end,
			    (unsigned long long)at);
	}
	return 0;
}

/* The hostcall buffer's prefix and packets (ockl hostcall_impl.cl). */
#define HC_PREFIX 48
#define HC_HEADER 24
#define HC_PAYLOAD 4096

/* n * size, saturated. */
static uint64_t times(uint64_t n, uint64_t size)
{
	return n > UINT64_MAX / size ? UINT64_MAX : n * size;
}

/*
 * One region of the hostcall buffer: a VM fault (-1) where the GPU
 * finds no mapping, 32 where the BO is VRAM: the listener's atomic
 * exchange of ready_stack and its reads of packets the GPU writes need
 * memory both reach coherently, which BAR-mapped VRAM is not.
 */
static int hc_region(const struct emu_cp_queue *q, uint64_t hb, const char *what, uint64_t addr,
		     uint64_t size, char *why, size_t n, uint64_t *fault_va)
{
	int vram;
	uint64_t at = hole(q->gpu, addr, size, 1, &vram);

	if (!at)
		return 0;
	if (vram)
		return fail(why, n, 32, "hidden_hostcall_buffer 0x%llx: %s at 0x%llx in VRAM, "
			    "which the host listener does not reach coherently (GTT or USERPTR)",
			    (unsigned long long)hb, what, (unsigned long long)at);
	*fault_va = at;
	return fail(why, n, -1, "hidden_hostcall_buffer 0x%llx: %s [0x%llx, +%llu) not mapped "
		    "on the GPU (VM fault at 0x%llx)", (unsigned long long)hb, what,
		    (unsigned long long)addr, (unsigned long long)size, (unsigned long long)at);
}

/* hidden_hostcall_buffer as a GPU calling the host depends on it: as check_heap. */
static int check_hostcall(const struct emu_cp_queue *q, uint64_t hb, const struct emu_queue_props *props,
			  char *why, size_t n, uint64_t *fault_va)
{
	const unsigned char *b;
	const aql_signal *sig;
	uint64_t headers, payloads, doorbell, mask, packets, waves, mailbox;
	uint32_t event_id;
	int r = hc_region(q, hb, "the buffer", hb, HC_PREFIX, why, n, fault_va);

	if (r)
		return r;
	b = emu_memory_gpu_begin(q->gpu, hb, HC_PREFIX);
	if (!b)
		return fail(why, n, 32, "hidden_hostcall_buffer 0x%llx: its BO went away",
			    (unsigned long long)hb);
	headers = rd(b, 8);
	payloads = rd(b + 8, 8);
	doorbell = rd(b + 16, 8);
	mask = rd(b + 40, 8);
	emu_memory_gpu_end();
	/* packet pointers are index | tag: index = ptr & index_mask */
	packets = mask + 1;
	waves = (uint64_t)props->cus * props->waves_per_cu;
	if (!packets || (mask & packets))
		return fail(why, n, 32, "hidden_hostcall_buffer 0x%llx: index_mask 0x%llx + 1 is "
			    "not a power of two", (unsigned long long)hb, (unsigned long long)mask);
	/* each resident wave may hold a packet; with fewer, waves wait on an
	 * empty free stack while the waves holding packets wait on them */
	if (packets < waves)
		return fail(why, n, 32, "hidden_hostcall_buffer 0x%llx: index_mask + 1 = %llu "
			    "packets for %llu resident waves", (unsigned long long)hb,
			    (unsigned long long)packets, (unsigned long long)waves);
	/* the packets behind them: one per resident wave at least; the mask
	 * rounds that count up, and indices past the packets the runtime
	 * put on the free stack are never used (CLR sizes it so) */
	r = hc_region(q, hb, "the headers", headers, times(waves, HC_HEADER), why, n, fault_va);
	if (!r)
		r = hc_region(q, hb, "the payloads", payloads, times(waves, HC_PAYLOAD), why, n,
			      fault_va);
	if (r)
		return r;
	/* the doorbell: an amd_signal_t a GPU adds to, then wakes its waiter
	 * through the mailbox and event (else nobody hears the call) */
	sig = emu_memory_gpu_begin(q->gpu, doorbell, sizeof(*sig));
	if (!sig) {
		*fault_va = doorbell;
		return fail(why, n, -1, "hidden_hostcall_buffer 0x%llx: doorbell signal 0x%llx "
			    "not mapped on the GPU (VM fault)", (unsigned long long)hb,
			    (unsigned long long)doorbell);
	}
	mailbox = __atomic_load_n(&sig->event_mailbox_ptr, __ATOMIC_RELAXED);
	event_id = __atomic_load_n(&sig->event_id, __ATOMIC_RELAXED);
	emu_memory_gpu_end();
	if (!mailbox || !event_id)
		return fail(why, n, 32, "hidden_hostcall_buffer 0x%llx: doorbell signal 0x%llx "
			    "has event_mailbox_ptr 0x%llx, event_id %u: a GPU add would wake no one",
			    (unsigned long long)hb, (unsigned long long)doorbell,
			    (unsigned long long)mailbox, event_id);
	return 0;
}

/*
 * The hidden arguments h names in the kernarg block args (kernarg_size
 * bytes), each against what the packet and queue say: 0, a CP code or -1
 * (a VM fault at *fault_va) with why naming the argument; *d gets the
 * values.
 */
static int check_hidden(const struct emu_cp_queue *q, const aql_dispatch_packet *p,
			const struct kd *kd, const char *name, const struct hidden_arg *h,
			uint32_t count, const unsigned char *args, struct kfdemu_dispatch *d,
			char *why, size_t why_size, uint64_t *fault_va)
{
	const uint32_t grid[3] = { p->grid_size_x, p->grid_size_y, p->grid_size_z };
	const uint32_t wg[3] = { p->workgroup_size_x, p->workgroup_size_y, p->workgroup_size_z };
	struct emu_queue_props props;
	uint64_t heap = 0, hostcall = 0;
	int r;

	emu_model_queue_props(q->gpu->model, &props);
	for (uint32_t i = 0; i < count; i++) {
		enum aql_arg_kind k = h[i].kind;
		uint32_t size = h[i].size < 8 ? h[i].size : 8;
		const char *whose = "the packet's";
		uint64_t v, want;
		unsigned dim;

		if (h[i].offset > kd->kernarg_size || h[i].size > kd->kernarg_size - h[i].offset)
			return fail(why, why_size, 8, "%s of kernel %s at %u lies past the "
				    "descriptor's kernarg_size %u", aql_arg_kind_name(k), name,
				    h[i].offset, kd->kernarg_size);
		v = rd(args + h[i].offset, (int)size);
		d->named |= 1ull << k;
		d->value[k] = v;
		switch (k) {
		case AQL_ARG_HIDDEN_BLOCK_COUNT_X:
		case AQL_ARG_HIDDEN_BLOCK_COUNT_Y:
		case AQL_ARG_HIDDEN_BLOCK_COUNT_Z:
			dim = k - AQL_ARG_HIDDEN_BLOCK_COUNT_X;
			want = grid[dim] / wg[dim];
			break;
		case AQL_ARG_HIDDEN_GROUP_SIZE_X:
		case AQL_ARG_HIDDEN_GROUP_SIZE_Y:
		case AQL_ARG_HIDDEN_GROUP_SIZE_Z:
			want = wg[k - AQL_ARG_HIDDEN_GROUP_SIZE_X];
			break;
		case AQL_ARG_HIDDEN_REMAINDER_X:
		case AQL_ARG_HIDDEN_REMAINDER_Y:
		case AQL_ARG_HIDDEN_REMAINDER_Z:
			dim = k - AQL_ARG_HIDDEN_REMAINDER_X;
			want = grid[dim] % wg[dim];
			break;
		case AQL_ARG_HIDDEN_GRID_DIMS:
			want = p->setup & AQL_DISPATCH_DIMS_MASK;
			break;
		case AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE:
			want = p->group_segment_size - kd->group_fixed;
			break;
		case AQL_ARG_HIDDEN_QUEUE_PTR:
			want = q->amd_queue;
			whose = "the queue's amd_queue_t";
			break;
		/* HSA dispatches have no global offset; and aql has no printf
		 * buffer in CLR's layout, no device-side enqueue (default queue,
		 * completion action) and no multi-grid launch, so it passes none
		 * (docs/channels.md) */
		case AQL_ARG_HIDDEN_GLOBAL_OFFSET_X:
		case AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y:
		case AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z:
		case AQL_ARG_HIDDEN_PRINTF_BUFFER:
		case AQL_ARG_HIDDEN_DEFAULT_QUEUE:
		case AQL_ARG_HIDDEN_COMPLETION_ACTION:
		case AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG:
			want = 0;
			whose = "none is passed";
			break;
		/* checked below, once every value is recorded */
		case AQL_ARG_HIDDEN_HEAP_V1:
			heap = v;
			continue;
		case AQL_ARG_HIDDEN_HOSTCALL_BUFFER:
			hostcall = v;
			continue;
		default:
			/* hidden_none; the gfx8 apertures (no GPU aql runs has
			 * them); the tool correlation id (a profiler's) */
			continue;
		}
		if (size < 8)
			want &= (1ull << (8 * size)) - 1;
		if (v != want)
			return fail(why, why_size, 32, "%s of kernel %s is 0x%llx, not 0x%llx (%s)",
				    aql_arg_kind_name(k), name, (unsigned long long)v,
				    (unsigned long long)want, whose);
	}
	/* A zero is accepted: hardware faults only when the kernel really
	 * calls malloc or the host, which the emulation cannot know. */
	if (heap && (r = check_heap(q, heap, why, why_size, fault_va)))
		return r;
	if (hostcall && (r = check_hostcall(q, hostcall, &props, why, why_size, fault_va)))
		return r;
	return 0;
}

/*
 * The queue's scratch for p (plan §9; ROCr DynamicScratchHandler,
 * AqlQueue::InitScratchSRD, FillComputeTmpRingSize). Code 1, which the
 * runtime answers by growing it and storing 0 (the CP then retries), while
 * the amd_queue_t gives too little: scratch_wave64_lane_byte_size under
 * align16(private_segment_size), COMPUTE_TMPRING_SIZE.WAVESIZE under 64
 * lanes of that, WAVES 0, or the per-XCC scratch_backing_memory_byte_size
 * under WAVES waves of WAVESIZE KiB (the emulation's own check: the CP
 * runs up to WAVES waves per XCC and does not read the size, so on a GPU
 * the waves would overrun into the next XCC's part unseen).
 * Then the waves' memory: scratch_backing_memory_location is the absolute
 * GPU address of the backing (ROCr AcquireQueueMainScratch for ISA major
 * > 8, tinygrad's scratch.va_addr; with HWS on gfx9 nothing else gives the
 * firmware a base: kfd_pm4_headers_ai.h's MAP_PROCESS has no such field,
 * and kfd_ioctl_set_scratch_backing_va writes the register only without
 * HWS), and XCC i's part starts at it plus i times the per-XCC size: all
 * of it in one BO mapped on the GPU, else the first access is a VM fault
 * at the first byte outside (at the base when the base is outside).
 * 0 when enough; 1; or UINT32_MAX for a VM fault at *fault_va.
 */
static uint32_t scratch(const struct emu_cp_queue *q, const aql_dispatch_packet *p,
			const struct emu_queue_props *props, char *why, size_t why_size,
			uint64_t *fault_va)
{
	const aql_amd_queue *amd = emu_memory_gpu_begin(q->gpu, q->amd_queue, sizeof(*amd));
	uint64_t lane = (p->private_segment_size + 15ull) & ~15ull, have, lane_have, base, end;
	uint32_t tmpring, waves, wave_kib, xcc = props->num_xcc ? props->num_xcc : 1;
	struct kfdemu_bo bo;

	if (!amd) {
		*fault_va = q->amd_queue;
		return UINT32_MAX;
	}
	have = __atomic_load_n(&amd->scratch_backing_memory_byte_size, __ATOMIC_ACQUIRE);
	lane_have = __atomic_load_n(&amd->scratch_wave64_lane_byte_size, __ATOMIC_ACQUIRE);
	tmpring = __atomic_load_n(&amd->compute_tmpring_size, __ATOMIC_ACQUIRE);
	base = __atomic_load_n(&amd->scratch_backing_memory_location, __ATOMIC_ACQUIRE);
	emu_memory_gpu_end();
	/* COMPUTE_TMPRING_SIZE (gfx9): WAVES 0-11, WAVESIZE 12-24 in KiB */
	waves = tmpring & 0xfff;
	wave_kib = tmpring >> 12 & 0x1fff;
	if (lane_have < lane || (uint64_t)wave_kib * 1024 < lane * 64 || !waves ||
	    have < (uint64_t)waves * wave_kib * 1024)
		return (uint32_t)fail(why, why_size, 1, "scratch of %llu bytes per XCC (%llu per "
				      "lane), %u waves of %u KiB, for %llu bytes per lane",
				      (unsigned long long)have, (unsigned long long)lane_have,
				      waves, wave_kib, (unsigned long long)lane);
	end = base + have * xcc;
	if (end < base || !emu_memory_gpu_begin_bo(q->gpu, base, 1, &bo)) {
		*fault_va = base;
		fail(why, why_size, 0, "scratch_backing_memory_location 0x%llx is in no BO "
		     "mapped on the GPU", (unsigned long long)base);
		return UINT32_MAX;
	}
	emu_memory_gpu_end();
	if (end > bo.va + bo.size) {
		*fault_va = bo.va + bo.size;
		fail(why, why_size, 0, "scratch at 0x%llx, %llu bytes for %u XCCs, runs past its "
		     "BO's end at 0x%llx", (unsigned long long)base, (unsigned long long)(have * xcc),
		     xcc, (unsigned long long)(bo.va + bo.size));
		return UINT32_MAX;
	}
	return 0;
}

int emu_kernel_dispatch(const struct emu_cp_queue *q, const aql_dispatch_packet *p, char *why,
			size_t why_size, uint64_t *fault_va, int *fault_exec)
{
	unsigned dims = p->setup & AQL_DISPATCH_DIMS_MASK;
	const uint32_t grid[3] = { p->grid_size_x, p->grid_size_y, p->grid_size_z };
	const uint32_t wg[3] = { p->workgroup_size_x, p->workgroup_size_y, p->workgroup_size_z };
	struct emu_queue_props props;
	struct kfdemu_bo bo;
	const unsigned char *img;
	unsigned char *code;
	uint64_t code_va = 0, code_size = 0;
	const aql_kernel *k;
	unsigned char *args;
	aql_dispatch_packet hp;
	aql_packet raw;
	char name[256];
	struct kd kd;
	struct hidden_arg hidden[MAX_HIDDEN];
	struct kfdemu_dispatch d;
	unsigned char *note;
	uint64_t note_off = 0, note_size = 0, handle, base;
	uint32_t count = 0, version;
	uint32_t dyn;
	int64_t v = 0;
	int r;

	/* the CP's packet checks (ROCr's codes: 2 dimensions, 64 work-group
	 * size, 4 group memory, 8 code object, 32 packet format) */
	if (dims == 0)
		return fail(why, why_size, 2, "setup has 0 dimensions");
	for (unsigned d = 0; d < 3; d++)
		if (!wg[d] || !grid[d] || (d >= dims && (wg[d] != 1 || grid[d] != 1)))
			return fail(why, why_size, 2, "dimension %c: grid %u, work-group %u",
				    "xyz"[d], grid[d], wg[d]);
	if ((uint64_t)wg[0] * wg[1] * wg[2] > 1024)
		return fail(why, why_size, 64, "work-group of %llu work-items, over 1024",
			    (unsigned long long)wg[0] * wg[1] * wg[2]);
	emu_model_queue_props(q->gpu->model, &props);
	if (p->group_segment_size > props.lds_size)
		return fail(why, why_size, 4, "group segment %u bytes, over the %u of LDS",
			    p->group_segment_size, props.lds_size);
	if (p->private_segment_size) {
		uint32_t r = scratch(q, p, &props, why, why_size, fault_va);

		*fault_exec = 0;
		if (r)
			return r == UINT32_MAX ? -1 : (int)r;
	}
	if (!p->kernel_object || p->kernel_object % 64)
		return fail(why, why_size, 8, "kernel_object 0x%llx is not 64-byte aligned",
			    (unsigned long long)p->kernel_object);
	if (!p->kernarg_address || p->kernarg_address % 16)
		return fail(why, why_size, 32, "kernarg_address 0x%llx is not 16-byte aligned",
			    (unsigned long long)p->kernarg_address);

	/* the descriptor's page must be mapped (else a VM fault), and the
	 * entry in an EXECUTABLE BO (else the fetch is an execute fault of
	 * an NX page); the bytes come from the code caches (cache.c) */
	img = emu_memory_gpu_begin_bo(q->gpu, p->kernel_object, 64, &bo);
	if (!img) {
		*fault_va = p->kernel_object;
		*fault_exec = 0;
		return -1;
	}
	kd.entry_offset = (int64_t)rd(img + 16, 8);
	emu_memory_gpu_end();
	if (!(bo.flags & KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE)) {
		*fault_va = p->kernel_object + (uint64_t)kd.entry_offset;
		*fault_exec = 1;
		return -1;
	}
	code = emu_cache_code(q->gpu, p->kernel_object, &code_va, &code_size);
	if (!code || p->kernel_object - code_va > code_size - 64) {
		free(code);
		fprintf(stderr, "kfd-emu: queue %u: kernel_object 0x%llx: written since the last "
			"ACQUIRE_MEM that invalidated I$, K$ and L2, and the caches hold no "
			"code there: a fault\n", q->queue_id, (unsigned long long)p->kernel_object);
		*fault_va = p->kernel_object;
		*fault_exec = 0;
		return -1;
	}
	img = code;
	kd.group_fixed = (uint32_t)rd(img + (p->kernel_object - code_va), 4);
	kd.kernarg_size = (uint32_t)rd(img + (p->kernel_object - code_va) + 8, 4);
	kd.entry_offset = (int64_t)rd(img + (p->kernel_object - code_va) + 16, 8);
	/* the entry: 256-byte aligned, fetched from an EXECUTABLE BO */
	if ((p->kernel_object + (uint64_t)kd.entry_offset) % 256) {
		free(code);
		return fail(why, why_size, 8, "kernel entry 0x%llx is not 256-byte aligned",
			    (unsigned long long)(p->kernel_object + (uint64_t)kd.entry_offset));
	}
	if (!(bo.flags & KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE) ||
	    p->kernel_object + (uint64_t)kd.entry_offset - bo.va >= bo.size) {
		free(code);
		*fault_va = p->kernel_object + (uint64_t)kd.entry_offset;
		*fault_exec = 1;
		return -1;
	}
	/* the image starts at the BO or, where the loader shares a BO among
	 * code objects, at an AMD_ISA_ALIGN_BYTES (256) boundary below the
	 * descriptor */
	for (base = (p->kernel_object - code_va) & ~255ull;; base -= 256) {
		if (!kd_name(img + base, code_size - base, p->kernel_object - code_va - base, name,
			     sizeof(name)))
			break;
		if (base == 0) {
			free(code);
			return fail(why, why_size, 8, "no .kd symbol at kernel_object 0x%llx in "
				    "a code object of the BO at 0x%llx",
				    (unsigned long long)p->kernel_object,
				    (unsigned long long)code_va);
		}
	}
	/* The metadata, which says where the hidden arguments are: not the
	 * CP's business, but the emulation checks against it what the
	 * kernel will read (its own rule: an image without it is refused). */
	version = img[base + 8] + 2u;		/* EI_ABIVERSION 2: V4 */
	handle = bo.handle;
	if (find_note(img + base, code_size - base, &note_off, &note_size)) {
		free(code);
		return fail(why, why_size, 8, "no AMDGPU metadata note in the code object of "
			    "kernel %s", name);
	}
	note = malloc(note_size ? note_size : 1);
	if (note)
		memcpy(note, img + base + note_off, note_size);
	free(code);
	if (!note)
		return fail(why, why_size, 8, "out of host memory for the metadata of %s", name);
	base += code_va;
	r = hidden_args(handle, base, note, note_size, name, hidden, &count, why, why_size);
	free(note);
	if (r)
		return 8;
	if (p->group_segment_size < kd.group_fixed)
		return fail(why, why_size, 4, "group segment %u bytes, under the kernel's %u",
			    p->group_segment_size, kd.group_fixed);

	pthread_once(&host.once, host_init);
	if (host.error[0])
		return fail(why, why_size, 8, "%s", host.error);
	k = host_kernel(name);
	if (!k)
		return fail(why, why_size, 8, "no host build of kernel %s in AQL_KFD_EMU_KERNELS",
			    name);

	/* the kernarg block, copied out of the VM: it must all be mapped */
	args = aligned_alloc(64, ((size_t)kd.kernarg_size + 63) & ~(size_t)63);
	if (!args)
		return fail(why, why_size, 8, "out of host memory for the kernarg copy");
	if (kd.kernarg_size) {
		const void *src = emu_memory_gpu_begin(q->gpu, p->kernarg_address, kd.kernarg_size);

		if (!src) {
			free(args);
			*fault_va = p->kernarg_address;
			*fault_exec = 0;
			return -1;
		}
		memcpy(args, src, kd.kernarg_size);
		emu_memory_gpu_end();
	}
	memset(&d, 0, sizeof(d));
	snprintf(d.kernel, sizeof(d.kernel), "%s", name);
	d.version = version;
	r = check_hidden(q, p, &kd, name, hidden, count, args, &d, why, why_size, fault_va);
	if (r) {
		d.cp_code = r < 0 ? UINT32_MAX : (uint32_t)r;
		snprintf(d.why, sizeof(d.why), "%s", why);
		record(&d);
		free(args);
		*fault_exec = 0;
		return r;
	}
	record(&d);

	/* run it; the dynamic LDS is what the packet gives beyond the GPU
	 * build's static LDS, placed after the host build's (their static
	 * sizes differ where the compiler drops an unused variable) */
	hp = *p;
	dyn = (kd.group_fixed + 15) & ~15u;	/* AQL_DYNAMIC_LDS_ALIGN */
	dyn = p->group_segment_size > dyn ? p->group_segment_size - dyn : 0;
	hp.group_segment_size = dyn ? ((k->group_segment_size + 15) & ~15u) + dyn :
				      k->group_segment_size;
	hp.kernel_object = k->kernel_object;
	hp.kernarg_address = (uint64_t)(uintptr_t)args;
	hp.completion_signal = aql_signal_handle(host.done);
	hp.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
				      AQL_FENCE_SYSTEM);
	memcpy(&raw, &hp, sizeof(hp));
	pthread_mutex_lock(&host.lock);
	aql_signal_store(host.done, 1, AQL_RELAXED);
	if (aql_queue_submit(host.queue, &raw) != AQL_OK ||
	    aql_signal_wait(host.done, AQL_COND_LT, 1, AQL_TIMEOUT_INFINITE, AQL_WAIT_SPIN_BLOCK,
			    &v) != AQL_OK || v < 0) {
		pthread_mutex_unlock(&host.lock);
		free(args);
		return fail(why, why_size, 8, "the host build of %s failed: %s", name,
			    aql_error_message());
	}
	pthread_mutex_unlock(&host.lock);
	free(args);
	return 0;
}
