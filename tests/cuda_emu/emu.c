/* SPDX-License-Identifier: MIT */
/*
 * The emulated CUDA driver: initialisation, devices, primary contexts,
 * memory, copies, error names and cuGetProcAddress. See emu.h.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

#define NV_DECLARE_(name, ret, params) ret name params;
NV_DRIVER_FUNCS(NV_DECLARE_)
#undef NV_DECLARE_
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
			     int *status);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags);

struct emu emu = { .lock = PTHREAD_MUTEX_INITIALIZER, .fail_after = -1 };
EMU_TLS CUcontext emu_current;
EMU_TLS int emu_in_host_fn;
EMU_TLS uint64_t emu_thread_calls;

/*
 * Device memory: one arena per device, apart from every host allocation,
 * so a device pointer is never a host pointer a test could mix up. As on a
 * discrete GPU the host cannot touch it: the arena is PROT_NONE except
 * while a kernel runs (emu_device_enter), and the emulation's own copies,
 * memsets and stream memory operations go through a second, always
 * writable mapping of the same pages (emu_host_view). Host code that
 * touches device memory faults with a message naming the address; host
 * code that races with a running kernel is not caught.
 */
#define ARENA_SIZE (1ull << 30)
#define ARENA_ALIGN 256u

struct range {
	uintptr_t start;
	size_t size;
	int device;			/* device memory: its device */
	int host_alloc;			/* cuMemHostAlloc, not cuMemHostRegister */
	struct CUctx_st *ctx;
};

struct table {
	struct range *v;
	size_t n, cap;
};

static uint8_t *arena;			/* what device pointers point into */
static uint8_t *arena_view;		/* the same pages, for the emulation */
static size_t arena_bytes;
static size_t arena_used[EMU_MAX_DEVICES];
static pthread_mutex_t window_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned window_users;		/* kernels running; under window_lock */
static struct sigaction segv_prev;
static struct table dev_allocs;		/* sorted by start */
static struct table host_ranges;	/* sorted by start */

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;

static void read_mode(void)
{
	const char *m = getenv("AQL_CUDA_EMU_MODE");
	const char *f = getenv("AQL_CUDA_EMU_FAIL_AFTER");

	if (m && !strcmp(m, "stub"))
		emu.mode = EMU_STUB;
	else if (m && !strcmp(m, "old"))
		emu.mode = EMU_OLD;
	else if (m && !strcmp(m, "nodevice"))
		emu.mode = EMU_NODEVICE;
	else if (m && !strcmp(m, "nomemops"))
		emu.mode = EMU_NOMEMOPS;
	if (f && *f)
		emu.fail_after = strtol(f, NULL, 10);
}

static int is_stub(void)
{
	pthread_once(&mode_once, read_mode);
	return emu.mode == EMU_STUB;
}

uint64_t emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void emu_pause(unsigned *spins)
{
	unsigned us = *spins < 7 ? 2u << *spins : 200;
	struct timespec ts = { 0, (long)us * 1000 };

	(*spins)++;
	nanosleep(&ts, NULL);
}

CUresult emu_gate(void)
{
	/* The toolkit's stub returns CUDA_ERROR_STUB_LIBRARY from every call
	 * (ref §3.5, checked locally). */
	if (is_stub())
		return CUDA_ERROR_STUB_LIBRARY;
	/* Host functions must not call CUDA (cuLaunchHostFunc reference);
	 * the driver answers CUDA_ERROR_NOT_PERMITTED. */
	if (emu_in_host_fn)
		return CUDA_ERROR_NOT_PERMITTED;
	/* Every call but the version, error and proc-address queries needs
	 * cuInit first (cuInit reference; ref §3.8). */
	pthread_mutex_lock(&emu.lock);
	CUresult r = !emu.initialized ? CUDA_ERROR_NOT_INITIALIZED : emu.init_result;
	pthread_mutex_unlock(&emu.lock);
	return r;
}

/*
 * emu_gate(), then a live current context, sticky error or not: calls that
 * free or unregister do their work even when the context has a sticky error
 * (so a test can clean up), and then report the error.
 */
static CUresult ctx_for_release(struct CUctx_st **out)
{
	CUresult r = emu_gate();
	struct CUctx_st *c = emu_current;

	if (r != CUDA_SUCCESS)
		return r;
	/* No current context: CUDA_ERROR_INVALID_CONTEXT (ref §3.1). */
	if (!c)
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&emu.lock);
	int live = c->refs > 0;
	pthread_mutex_unlock(&emu.lock);
	if (!live)
		return CUDA_ERROR_INVALID_CONTEXT;
	*out = c;
	return CUDA_SUCCESS;
}

CUresult emu_ctx(struct CUctx_st **out)
{
	struct CUctx_st *c;
	CUresult r = ctx_for_release(&c);

	if (r != CUDA_SUCCESS)
		return r;
	r = atomic_load(&c->sticky);
	if (r != CUDA_SUCCESS)
		return r;
	*out = c;
	return CUDA_SUCCESS;
}

/* Table helpers; callers hold emu.lock. */
static size_t table_lower(const struct table *t, uintptr_t p)
{
	size_t lo = 0, hi = t->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (t->v[mid].start <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;			/* first entry starting after p */
}

/* The entry containing [p, p + n), or NULL. */
static struct range *table_find(struct table *t, uintptr_t p, size_t n)
{
	size_t i = table_lower(t, p);

	if (i == 0)
		return NULL;
	struct range *r = &t->v[i - 1];
	if (p - r->start >= r->size || n > r->size - (p - r->start))
		return NULL;
	return r;
}

static int table_overlaps(const struct table *t, uintptr_t p, size_t n)
{
	size_t i = table_lower(t, p);

	if (i > 0 && t->v[i - 1].start + t->v[i - 1].size > p)
		return 1;
	return i < t->n && t->v[i].start < p + n;
}

static int table_insert(struct table *t, struct range r)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct range *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -1;
		t->v = v;
		t->cap = cap;
	}
	size_t i = table_lower(t, r.start);
	memmove(&t->v[i + 1], &t->v[i], (t->n - i) * sizeof(*t->v));
	t->v[i] = r;
	t->n++;
	return 0;
}

static void table_remove(struct table *t, struct range *r)
{
	size_t i = (size_t)(r - t->v);

	memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(*t->v));
	t->n--;
}

enum emu_mem emu_mem_kind(uintptr_t p, size_t n)
{
	enum emu_mem k = EMU_MEM_NONE;

	pthread_mutex_lock(&emu.lock);
	if (table_find(&dev_allocs, p, n))
		k = EMU_MEM_DEVICE;
	else if (table_find(&host_ranges, p, n))
		k = EMU_MEM_PINNED;
	pthread_mutex_unlock(&emu.lock);
	return k;
}

void *emu_host_view(uintptr_t p)
{
	if (arena && p >= (uintptr_t)arena && p - (uintptr_t)arena < arena_bytes)
		return arena_view + (p - (uintptr_t)arena);
	return (void *)p;
}

/* mprotect fails only on a bad range or out of kernel memory: a fixture
 * that can no longer model the device must stop. */
static void arena_protect(int prot)
{
	if (mprotect(arena, arena_bytes, prot) != 0) {
		perror("aql cuda emulation: mprotect of device memory");
		abort();
	}
}

void emu_device_enter(void)
{
	pthread_mutex_lock(&window_lock);
	if (window_users++ == 0)
		arena_protect(PROT_READ | PROT_WRITE);
	pthread_mutex_unlock(&window_lock);
}

void emu_device_leave(void)
{
	pthread_mutex_lock(&window_lock);
	if (--window_users == 0)
		arena_protect(PROT_NONE);
	pthread_mutex_unlock(&window_lock);
}

static void segv_write(const char *s)
{
	ssize_t n = write(2, s, strlen(s));

	(void)n;
}

/*
 * A fault in device memory is host code reading or writing it, which a real
 * discrete GPU would not allow either: say so, then hand the fault back to
 * the handler before ours (a sanitizer's, or the default), which runs when
 * the access repeats on return.
 */
static void segv_handler(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	char hex[19] = "0x";

	(void)sig;
	(void)uc;
	if (a >= (uintptr_t)arena && a - (uintptr_t)arena < arena_bytes) {
		for (int i = 0; i < 16; i++)
			hex[2 + i] = "0123456789abcdef"[(a >> (60 - 4 * i)) & 0xf];
		segv_write("aql cuda emulation: host code touched device memory at ");
		segv_write(hex);
		segv_write(" (cuMemAlloc memory is not host accessible on a discrete GPU;"
			   " copy it with cuMemcpyDtoH)\n");
	}
	sigaction(SIGSEGV, &segv_prev, NULL);
}

static int arena_map(size_t bytes)
{
	struct sigaction sa;
	int fd = memfd_create("aql-cuda-emu-device", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	arena_bytes = bytes;
	arena = MAP_FAILED;
	arena_view = MAP_FAILED;
	if (ftruncate(fd, (off_t)bytes) == 0) {
		arena = mmap(NULL, bytes, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
		arena_view = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
				  fd, 0);
	}
	close(fd);
	if (arena == MAP_FAILED || arena_view == MAP_FAILED) {
		if (arena != MAP_FAILED)
			munmap(arena, bytes);
		if (arena_view != MAP_FAILED)
			munmap(arena_view, bytes);
		arena = NULL;
		arena_view = NULL;
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &segv_prev);
	return 0;
}

/* ---- Initialisation and devices ---------------------------------------- */

/* CUDA_VISIBLE_DEVICES: a comma-separated list of ordinals; the list ends
 * at the first entry that is not a valid, unlisted ordinal (CUDA C
 * Programming Guide, "CUDA Environment Variables"). */
static int visible_devices(int physical_count)
{
	const char *v = getenv("CUDA_VISIBLE_DEVICES");
	int n = 0;

	if (!v) {
		for (n = 0; n < physical_count; n++)
			emu.physical[n] = n;
		return n;
	}
	while (*v && n < EMU_MAX_DEVICES) {
		char *end;
		long d;

		while (*v == ' ')
			v++;
		errno = 0;
		d = strtol(v, &end, 10);
		if (end == v || errno || d < 0 || d >= physical_count)
			break;
		while (*end == ' ')
			end++;
		if (*end != ',' && *end)
			break;
		for (int i = 0; i < n; i++)
			if (emu.physical[i] == d)
				return n;
		emu.physical[n++] = (int)d;
		v = *end ? end + 1 : end;
	}
	return n;
}

static CUresult do_init(void)
{
	const char *nd = getenv("AQL_CUDA_EMU_DEVICES");
	int physical = nd && *nd ? atoi(nd) : 1;
	aql_host_agent_config cfg = { 0 };

	if (emu.mode == EMU_NODEVICE)
		return CUDA_ERROR_NO_DEVICE;
	if (physical < 0)
		physical = 0;
	if (physical > EMU_MAX_DEVICES)
		physical = EMU_MAX_DEVICES;
	emu.device_count = visible_devices(physical);
	/* No device (or none left visible): cuInit fails (cuInit reference). */
	if (emu.device_count == 0)
		return CUDA_ERROR_NO_DEVICE;
	if (arena_map(ARENA_SIZE * (size_t)emu.device_count) != 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < emu.device_count; i++) {
		emu.ctx[i].device = i;
		emu.ctx[i].refs = 0;
		emu.ctx[i].flags = 0;
	}
	cfg.workers = 2;
	cfg.max_group_segment_size = EMU_SHARED_OPTIN;
	if (aql_host_agent_create(&cfg, &emu.agent) != AQL_OK) {
		fprintf(stderr, "aql cuda emulation: CPU agent: %s\n", aql_error_message());
		return CUDA_ERROR_OPERATING_SYSTEM;
	}
	return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int flags)
{
	EMU_ENTRY();
	CUresult r;

	if (is_stub())
		return CUDA_ERROR_STUB_LIBRARY;
	/* flags must be 0 (cuInit reference). */
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	if (!emu.initialized) {
		emu.init_result = do_init();
		emu.initialized = 1;
	}
	r = emu.init_result;
	pthread_mutex_unlock(&emu.lock);
	return r;
}

CUresult cuDriverGetVersion(int *version)
{
	EMU_ENTRY();
	/* Callable before cuInit (cuDriverGetVersion reference). */
	if (is_stub())
		return CUDA_ERROR_STUB_LIBRARY;
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = emu.mode == EMU_OLD ? 11080 : 13000;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	EMU_ENTRY();
	CUresult r = emu_gate();

	if (r != CUDA_SUCCESS)
		return r;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = emu.device_count;
	return CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev)
{
	CUresult r = emu_gate();

	if (r != CUDA_SUCCESS)
		return r;
	/* An ordinal out of range: CUDA_ERROR_INVALID_DEVICE (ref §3.8). */
	if (dev < 0 || dev >= emu.device_count)
		return CUDA_ERROR_INVALID_DEVICE;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	EMU_ENTRY();
	CUresult r = emu_gate();

	if (r != CUDA_SUCCESS)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal < 0 || ordinal >= emu.device_count)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);

	if (r != CUDA_SUCCESS)
		return r;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "NVIDIA H100 80GB HBM3 (aql emulation %d)",
		 emu.physical[dev]);
	return CUDA_SUCCESS;
}

/* An H100 SXM5 (sm_90) as the CUDA C Programming Guide's compute
 * capability 9.0 table and deviceQuery on one report it. */
static int attribute(int attrib, int dev, int *value)
{
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: *value = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = 2147483647; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: *value = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = (int)EMU_SHARED_DEFAULT; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
	case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = 1980000; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
	case CU_DEVICE_ATTRIBUTE_INTEGRATED: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *value = 0x18 + emu.physical[dev]; break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *value = 2619000; break;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *value = 5120; break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 50 * 1024 * 1024; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = EMU_SM / 10; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = EMU_SM % 10; break;
	case CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED: *value = 0; break;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: *value = 1; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = (int)EMU_SHARED_OPTIN; break;
	case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
		*value = emu.mode != EMU_NOMEMOPS;
		break;
	default:
		return -1;
	}
	return 0;
}

CUresult cuDeviceGetAttribute(int *value, int attrib, CUdevice dev)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);

	if (r != CUDA_SUCCESS)
		return r;
	/* NULL out-pointers and unknown attributes: CUDA_ERROR_INVALID_VALUE
	 * (cuDeviceGetAttribute reference; ref §3.8). */
	if (!value || attribute(attrib, dev, value) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);

	if (r != CUDA_SUCCESS)
		return r;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = ARENA_SIZE;
	return CUDA_SUCCESS;
}

/* ---- Primary contexts --------------------------------------------------- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);

	if (r != CUDA_SUCCESS)
		return r;
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	/* Retain counts a reference; it does not make the context current
	 * (cuDevicePrimaryCtxRetain reference; ref §3.2). */
	pthread_mutex_lock(&emu.lock);
	if (emu.ctx[dev].refs == 0) {
		/* What a destroyed context dropped is gone before it revives. */
		pthread_mutex_unlock(&emu.lock);
		emu_ctx_drain(&emu.ctx[dev]);
		pthread_mutex_lock(&emu.lock);
	}
	if (emu.ctx[dev].refs++ == 0)
		atomic_store(&emu.ctx[dev].sticky, CUDA_SUCCESS);
	pthread_mutex_unlock(&emu.lock);
	*ctx = &emu.ctx[dev];
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);
	struct CUctx_st *c;
	int last;

	if (r != CUDA_SUCCESS)
		return r;
	c = &emu.ctx[dev];
	/* Release without a retain fails (ref §3.2). */
	pthread_mutex_lock(&emu.lock);
	if (c->refs == 0) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	last = --c->refs == 0;
	/* The last release destroys the context: what its streams still
	 * hold is dropped (the emulation never waits on work that may wait
	 * forever), and a thread that has it current has no usable context
	 * until it is retained again. */
	if (last)
		atomic_store(&c->sticky, CUDA_ERROR_CONTEXT_IS_DESTROYED);
	pthread_mutex_unlock(&emu.lock);
	if (last)
		emu_ctx_drain(c);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);

	if (r != CUDA_SUCCESS)
		return r;
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	*flags = emu.ctx[dev].flags;
	*active = emu.ctx[dev].refs > 0;
	pthread_mutex_unlock(&emu.lock);
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
	EMU_ENTRY();
	CUresult r = check_device(dev);
	unsigned sched = flags & 0x07;

	if (r != CUDA_SUCCESS)
		return r;
	/* One scheduling policy at most, plus MAP_HOST (0x08) and
	 * LMEM_RESIZE_TO_MAX (0x10) (CUctx_flags in cuda.h). The _v2 form
	 * sets flags of an active context too. */
	if ((flags & ~0x1fu) || (sched != 0 && (sched & (sched - 1))))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	emu.ctx[dev].flags = flags;
	pthread_mutex_unlock(&emu.lock);
	return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *ctx)
{
	EMU_ENTRY();
	CUresult r = emu_gate();

	if (r != CUDA_SUCCESS)
		return r;
	if (!ctx)
		return CUDA_ERROR_INVALID_VALUE;
	/* A fresh thread has none: NULL with CUDA_SUCCESS (ref §3.1). */
	*ctx = emu_current;
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	int ok;

	if (r != CUDA_SUCCESS)
		return r;
	if (!ctx) {
		emu_current = NULL;
		return CUDA_SUCCESS;
	}
	pthread_mutex_lock(&emu.lock);
	ok = 0;
	for (int i = 0; i < emu.device_count; i++)
		ok |= ctx == &emu.ctx[i] && ctx->refs > 0;
	pthread_mutex_unlock(&emu.lock);
	if (!ok)
		return CUDA_ERROR_INVALID_CONTEXT;
	emu_current = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	emu_ctx_drain(c);
	return atomic_load(&c->sticky);
}

/* ---- Memory ------------------------------------------------------------- */

CUresult cuMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (!free_bytes || !total_bytes)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	*free_bytes = ARENA_SIZE - arena_used[c->device];
	*total_bytes = ARENA_SIZE;
	pthread_mutex_unlock(&emu.lock);
	return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *ptr, size_t size)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* Size 0: CUDA_ERROR_INVALID_VALUE (cuMemAlloc reference). */
	if (!ptr || size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (size > ARENA_SIZE)
		return CUDA_ERROR_OUT_OF_MEMORY;
	size_t rounded = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	uintptr_t base = (uintptr_t)arena + (uintptr_t)c->device * ARENA_SIZE;
	uintptr_t at = base;

	/* First fit among this device's allocations, in address order. */
	pthread_mutex_lock(&emu.lock);
	for (size_t i = table_lower(&dev_allocs, base - 1); i < dev_allocs.n; i++) {
		struct range *a = &dev_allocs.v[i];

		if (a->start >= base + ARENA_SIZE)
			break;
		if (a->start - at >= rounded)
			break;
		at = a->start + ((a->size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1));
	}
	if (at + rounded > base + ARENA_SIZE ||
	    table_insert(&dev_allocs, (struct range){ at, size, c->device, 0, c }) != 0) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	arena_used[c->device] += rounded;
	pthread_mutex_unlock(&emu.lock);
	*ptr = at;
	return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr ptr)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = ctx_for_release(&c);
	struct range *a;

	if (r != CUDA_SUCCESS)
		return r;
	/* Only the start of a live allocation (cuMemFree reference). */
	pthread_mutex_lock(&emu.lock);
	a = table_find(&dev_allocs, (uintptr_t)ptr, 1);
	if (!a || a->start != (uintptr_t)ptr) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	arena_used[a->device] -= (a->size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	table_remove(&dev_allocs, a);
	pthread_mutex_unlock(&emu.lock);
	return atomic_load(&c->sticky);
}

CUresult cuMemHostAlloc(void **ptr, size_t size, unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);
	void *p;

	if (r != CUDA_SUCCESS)
		return r;
	/* PORTABLE, DEVICEMAP, WRITECOMBINED (cuMemHostAlloc reference). */
	if (!ptr || size == 0 || (flags & ~0x07u))
		return CUDA_ERROR_INVALID_VALUE;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&emu.lock);
	if (table_insert(&host_ranges, (struct range){ (uintptr_t)p, size, -1, 1, c }) != 0) {
		pthread_mutex_unlock(&emu.lock);
		munmap(p, size);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&emu.lock);
	*ptr = p;
	return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *ptr)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = ctx_for_release(&c);
	struct range *h;
	size_t size;

	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&emu.lock);
	h = table_find(&host_ranges, (uintptr_t)ptr, 1);
	if (!h || h->start != (uintptr_t)ptr || !h->host_alloc) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	size = h->size;
	table_remove(&host_ranges, h);
	pthread_mutex_unlock(&emu.lock);
	munmap(ptr, size);
	return atomic_load(&c->sticky);
}

CUresult cuMemHostRegister(void *ptr, size_t size, unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY (cuMemHostRegister
	 * reference). With unified addressing every registration is mapped
	 * at its host address. */
	if (!ptr || size == 0 || (flags & ~0x0fu))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	/* Overlapping a registered range (cuMemHostRegister reference). */
	if (table_overlaps(&host_ranges, (uintptr_t)ptr, size)) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	}
	if (table_insert(&host_ranges, (struct range){ (uintptr_t)ptr, size, -1, 0, c }) != 0) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&emu.lock);
	return CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void *ptr)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = ctx_for_release(&c);
	struct range *h;

	if (r != CUDA_SUCCESS)
		return r;
	/* Only the base of a registration (cuMemHostUnregister reference). */
	pthread_mutex_lock(&emu.lock);
	h = table_find(&host_ranges, (uintptr_t)ptr, 1);
	if (!h || h->start != (uintptr_t)ptr || h->host_alloc) {
		pthread_mutex_unlock(&emu.lock);
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	}
	table_remove(&host_ranges, h);
	pthread_mutex_unlock(&emu.lock);
	return atomic_load(&c->sticky);
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *dev, void *host, unsigned int flags)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	/* flags must be 0 (cuMemHostGetDevicePointer reference). */
	if (!dev || !host || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (emu_mem_kind((uintptr_t)host, 1) != EMU_MEM_PINNED)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = (CUdeviceptr)(uintptr_t)host;
	return CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, int attrib, CUdeviceptr ptr)
{
	EMU_ENTRY();
	CUresult r = emu_gate();
	struct range *a, found;
	int device;

	if (r != CUDA_SUCCESS)
		return r;
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&emu.lock);
	a = table_find(&dev_allocs, (uintptr_t)ptr, 1);
	device = a != NULL;
	if (!a)
		a = table_find(&host_ranges, (uintptr_t)ptr, 1);
	if (a)
		found = *a;
	pthread_mutex_unlock(&emu.lock);
	/* Memory the driver does not know: CUDA_ERROR_INVALID_VALUE
	 * (cuPointerGetAttribute reference). */
	if (!a)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = found.ctx;
		break;
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned *)data = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
		break;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = ptr;
		break;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		/* Device memory has no host address. */
		if (device)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = (void *)(uintptr_t)ptr;
		break;
	default:
		return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

/* ---- Copies ------------------------------------------------------------- */

/*
 * A copy between host memory and the device, or within the device. Each
 * device side must be device memory or mapped host memory; an Async copy
 * whose host side is pageable runs synchronously after the stream drains,
 * as the driver does (ref §3.3), and is counted.
 */
static CUresult copy(uintptr_t dst, int dst_dev, uintptr_t src, int src_dev, size_t n,
		     CUstream stream, int async)
{
	struct CUctx_st *c;
	struct CUstream_st *s;
	CUresult r = emu_ctx(&c);
	int pageable = 0;

	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	if (dst_dev && emu_mem_kind(dst, n) == EMU_MEM_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	if (src_dev && emu_mem_kind(src, n) == EMU_MEM_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	if (!dst_dev && emu_mem_kind(dst, n) == EMU_MEM_NONE)
		pageable = 1;
	if (!src_dev && emu_mem_kind(src, n) == EMU_MEM_NONE)
		pageable = 1;
	r = emu_stream_get(c, async ? stream : NULL, &s);
	if (r != CUDA_SUCCESS)
		return r;
	if (async && pageable)
		atomic_fetch_add(&emu.stats.pageable_sync_copies, 1);
	return emu_stream_copy(s, emu_host_view(dst), emu_host_view(src), n, !async || pageable);
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t size)
{
	EMU_ENTRY();
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 0, size, NULL, 0);
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t size)
{
	EMU_ENTRY();
	return copy((uintptr_t)dst, 0, (uintptr_t)src, 1, size, NULL, 0);
}

CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t size)
{
	EMU_ENTRY();
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 1, size, NULL, 0);
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t size, CUstream stream)
{
	EMU_ENTRY();
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 0, size, stream, 1);
}

CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t size, CUstream stream)
{
	EMU_ENTRY();
	return copy((uintptr_t)dst, 0, (uintptr_t)src, 1, size, stream, 1);
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t size, CUstream stream)
{
	EMU_ENTRY();
	return copy((uintptr_t)dst, 1, (uintptr_t)src, 1, size, stream, 1);
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n)
{
	EMU_ENTRY();
	struct CUctx_st *c;
	struct CUstream_st *s;
	CUresult r = emu_ctx(&c);

	if (r != CUDA_SUCCESS)
		return r;
	if (n == 0)
		return CUDA_SUCCESS;
	if (emu_mem_kind((uintptr_t)dst, n) == EMU_MEM_NONE)
		return CUDA_ERROR_INVALID_VALUE;
	r = emu_stream_get(c, NULL, &s);
	if (r != CUDA_SUCCESS)
		return r;
	r = emu_stream_sync(s);
	if (r != CUDA_SUCCESS)
		return r;
	memset(emu_host_view((uintptr_t)dst), value, n);
	return CUDA_SUCCESS;
}

/* ---- Errors ------------------------------------------------------------- */

static const struct {
	CUresult code;
	const char *name, *text;
} errors[] = {
	{ 0, "CUDA_SUCCESS", "no error" },
	{ 1, "CUDA_ERROR_INVALID_VALUE", "an argument is out of its accepted range" },
	{ 2, "CUDA_ERROR_OUT_OF_MEMORY", "the allocation could not be satisfied" },
	{ 3, "CUDA_ERROR_NOT_INITIALIZED", "cuInit has not been called successfully" },
	{ 4, "CUDA_ERROR_DEINITIALIZED", "the driver is shutting down" },
	{ 34, "CUDA_ERROR_STUB_LIBRARY", "the loaded libcuda is the toolkit's stub, not a driver" },
	{ 100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is present or visible" },
	{ 101, "CUDA_ERROR_INVALID_DEVICE", "the device ordinal names no device" },
	{ 200, "CUDA_ERROR_INVALID_IMAGE", "the module image is not valid for this device" },
	{ 201, "CUDA_ERROR_INVALID_CONTEXT", "there is no valid current context" },
	{ 209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "the image has no code this device can run" },
	{ 211, "CUDA_ERROR_NOT_MAPPED", "the resource is not mapped" },
	{ 218, "CUDA_ERROR_INVALID_PTX", "the PTX failed to compile" },
	{ 221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "the PTX JIT compiler is not available" },
	{ 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the PTX ISA version is newer than this driver" },
	{ 300, "CUDA_ERROR_INVALID_SOURCE", "the kernel source is not valid" },
	{ 301, "CUDA_ERROR_FILE_NOT_FOUND", "the file was not found" },
	{ 303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "a shared object failed to initialise" },
	{ 304, "CUDA_ERROR_OPERATING_SYSTEM", "an operating system call failed" },
	{ 400, "CUDA_ERROR_INVALID_HANDLE", "the handle is not a live resource" },
	{ 401, "CUDA_ERROR_ILLEGAL_STATE", "the resource is not in a state for this operation" },
	{ 500, "CUDA_ERROR_NOT_FOUND", "the named symbol was not found" },
	{ 600, "CUDA_ERROR_NOT_READY", "the work has not finished yet" },
	{ 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "a kernel accessed an illegal address; the context is unusable" },
	{ 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "the launch needs more resources than are available" },
	{ 702, "CUDA_ERROR_LAUNCH_TIMEOUT", "the kernel ran past the watchdog's limit" },
	{ 708, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "the primary context is already active" },
	{ 709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "the context has been destroyed" },
	{ 710, "CUDA_ERROR_ASSERT", "a device-side assertion failed" },
	{ 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "the host range overlaps a registered range" },
	{ 713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "the host pointer is not a registered range" },
	{ 714, "CUDA_ERROR_HARDWARE_STACK_ERROR", "a kernel hit a call-stack fault" },
	{ 715, "CUDA_ERROR_ILLEGAL_INSTRUCTION", "a kernel executed an illegal instruction" },
	{ 716, "CUDA_ERROR_MISALIGNED_ADDRESS", "a kernel accessed a misaligned address" },
	{ 717, "CUDA_ERROR_INVALID_ADDRESS_SPACE", "a kernel used an address in the wrong state space" },
	{ 718, "CUDA_ERROR_INVALID_PC", "a kernel's program counter became invalid" },
	{ 719, "CUDA_ERROR_LAUNCH_FAILED", "a kernel failed while running" },
	{ 800, "CUDA_ERROR_NOT_PERMITTED", "the operation is not permitted here" },
	{ 801, "CUDA_ERROR_NOT_SUPPORTED", "the operation is not supported on this device" },
	{ 803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "the driver and the kernel module versions differ" },
	{ 804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward compatibility is not supported on this device" },
	{ 900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "the operation is not allowed while the stream is captured" },
	{ 999, "CUDA_ERROR_UNKNOWN", "an unknown internal error" },
};

static CUresult error_lookup(CUresult code, const char **str, int name)
{
	if (is_stub())
		return CUDA_ERROR_STUB_LIBRARY;
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		if (errors[i].code == code) {
			*str = name ? errors[i].name : errors[i].text;
			return CUDA_SUCCESS;
		}
	}
	/* An unknown code: CUDA_ERROR_INVALID_VALUE and *str = NULL
	 * (cuGetErrorName reference; ref §3.5). */
	*str = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **str)
{
	EMU_ENTRY();
	return error_lookup(error, str, 1);
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
	EMU_ENTRY();
	return error_lookup(error, str, 0);
}

/* ---- cuGetProcAddress --------------------------------------------------- */

static const struct {
	const char *name;
	void *fn;
} procs[] = {
#define NV_PROC_(name, ret, params) { #name, (void *)name },
	NV_DRIVER_FUNCS(NV_PROC_)
#undef NV_PROC_
	{ "cuGetProcAddress", (void *)cuGetProcAddress_v2 },
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
			     int *status)
{
	EMU_ENTRY();
	if (is_stub())
		return CUDA_ERROR_STUB_LIBRARY;
	if (!symbol || !pfn || (flags & ~(uint64_t)0x7))
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	/* The emulation serves the ABI of CUDA 12.0 and later: the _v2
	 * forms, under their plain names. */
	if (version < NV_ABI_VERSION) {
		if (status)
			*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
		return CUDA_ERROR_NOT_FOUND;
	}
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		if (!strcmp(procs[i].name, symbol)) {
			*pfn = procs[i].fn;
			if (status)
				*status = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	}
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

int aqlemu_stats(struct aqlemu_stats *out)
{
	if (!out)
		return -1;
	out->launches = atomic_load(&emu.stats.launches);
	out->launch_faults = atomic_load(&emu.stats.launch_faults);
	out->pageable_sync_copies = atomic_load(&emu.stats.pageable_sync_copies);
	out->host_funcs_run = atomic_load(&emu.stats.host_funcs_run);
	out->host_funcs_skipped = atomic_load(&emu.stats.host_funcs_skipped);
	out->mem_op_waits = atomic_load(&emu.stats.mem_op_waits);
	out->mem_op_writes = atomic_load(&emu.stats.mem_op_writes);
	out->graph_launches = atomic_load(&emu.stats.graph_launches);
	out->ptx_jit_links = atomic_load(&emu.stats.ptx_jit_links);
	out->driver_calls = atomic_load(&emu.stats.driver_calls);
	return 0;
}

uint64_t aqlemu_thread_calls(void)
{
	return emu_thread_calls;
}
