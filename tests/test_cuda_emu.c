/* SPDX-License-Identifier: MIT */
/*
 * The emulated CUDA driver (tests/cuda_emu/) keeps the driver's rules, so
 * that the CUDA agent's tests can trust it: cuInit state, devices and
 * CUDA_VISIBLE_DEVICES, primary contexts and the per-thread current
 * context, memory, pageable and pinned copies, stream order and
 * NOT_READY, stream memory operations, events, host functions, modules
 * and launches of host-built kernels, capture and graphs, the sticky
 * fault of AQL_CUDA_EMU_FAIL_AFTER, the modes, and device memory the
 * host cannot touch.
 *
 * Arguments: [--nv DIR] the emulated libcuda.so.1, then saxpy's host
 * build and, if built, its PTX; DIR (tests/co/nv) holds saxpy's cubins and
 * fatbins, which load as the driver loads them or are refused. The library is opened by path and its entry points
 * resolved through cuGetProcAddress_v2, as libaql does. Settings the
 * emulation reads once per process run in forked children.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "nv/cuda_abi.h"
#include "cuda_emu/aqlemu.h"

#define CUDA_ERROR_ILLEGAL_STATE 401

static struct {
#define NV_MEMBER_(name, ret, params) ret (*name) params;
	NV_DRIVER_FUNCS(NV_MEMBER_)
#undef NV_MEMBER_
} cu;
static aqlemu_stats_fn stats_fn;
static const char *lib_path, *host_path, *ptx_path, *nv_dir;

#define CU_EQ(call, want)                                                      \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		CHECK(r_ == (want), "%s returned %d, expected %d", #call, r_, (int)(want)); \
	} while (0)
#define CU_OK(call) CU_EQ(call, CUDA_SUCCESS)

/* The emulation's handle, for what aql does not resolve. */
static void *lib;

static void load(void)
{
	void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	cu_get_proc_address_v2_fn gpa;
	int status;

	if (!h)
		th_stop(dlerror());
	lib = h;
	*(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
	*(void **)&stats_fn = dlsym(h, "aqlemu_stats");
	if (!gpa || !stats_fn)
		th_stop("cuGetProcAddress_v2 or aqlemu_stats missing");
	/* Its own libaql stays private: nothing of it is exported. */
	CHECK(!dlsym(h, "aql_agent_default") && !dlsym(h, "aql_ptx_parse") &&
	      !dlsym(h, "aql_queue_create"), "the emulation exports libaql symbols");
	/* The stub refuses cuGetProcAddress too: take the symbols by name. */
	void *p = NULL;
	if (gpa("cuInit", &p, NV_ABI_VERSION, 0, &status) == CUDA_ERROR_STUB_LIBRARY) {
#define NV_DLSYM_(name, ret, params) *(void **)&cu.name = dlsym(h, #name);
		NV_DRIVER_FUNCS(NV_DLSYM_)
#undef NV_DLSYM_
		return;
	}
#define NV_RESOLVE_(name, ret, params)                                         \
	if (gpa(#name, (void **)&cu.name, NV_ABI_VERSION, 0, &status) != CUDA_SUCCESS || \
	    status != CU_GET_PROC_ADDRESS_SUCCESS || !cu.name ||                \
	    dlsym(h, #name) != (void *)cu.name)                                 \
		th_stop("cannot resolve " #name);
	NV_DRIVER_FUNCS(NV_RESOLVE_)
#undef NV_RESOLVE_
	p = (void *)1;
	CHECK(gpa("cuNoSuchCall", &p, NV_ABI_VERSION, 0, &status) == CUDA_ERROR_NOT_FOUND &&
	      status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && !p, "unknown symbol found");
}

static struct aqlemu_stats stats(void)
{
	struct aqlemu_stats s;

	stats_fn(&s);
	return s;
}

/* Retain device 0's primary context and make it current. */
static CUcontext open_ctx(void)
{
	CUcontext ctx = NULL;

	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx, 0));
	CU_OK(cu.cuCtxSetCurrent(ctx));
	return ctx;
}

/* Run fn in a child process with env (NAME=VALUE, ..., NULL) set before
 * the library is loaded; its failures fail the test. */
static void in_child(const char *what, void (*fn)(void), const char *const *env)
{
	pid_t pid = fork();
	int status = 0;

	if (pid == 0) {
		for (; env && *env; env++)
			putenv((char *)*env);
		load();
		fn();
		_exit(th_failed ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "%s: child failed (status %d)", what, status);
}

/* ---- Modes and devices (children) --------------------------------------- */

static void stub_mode(void)
{
	const char *s = "x";
	int v = 0;

	CU_EQ(cu.cuInit(0), CUDA_ERROR_STUB_LIBRARY);
	CU_EQ(cu.cuDriverGetVersion(&v), CUDA_ERROR_STUB_LIBRARY);
	CU_EQ(cu.cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s), CUDA_ERROR_STUB_LIBRARY);
	CU_EQ(cu.cuDeviceGetCount(&v), CUDA_ERROR_STUB_LIBRARY);
}

static void nodevice_mode(void)
{
	int n = 0;

	CU_EQ(cu.cuInit(0), CUDA_ERROR_NO_DEVICE);
	CU_EQ(cu.cuDeviceGetCount(&n), CUDA_ERROR_NO_DEVICE);
}

static void old_mode(void)
{
	static const char ptx80[] =
		".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n";
	CUmodule m;
	int v = 0;

	CU_OK(cu.cuDriverGetVersion(&v));
	CHECK(v == 11080, "old mode: version %d", v);
	/* A CUDA 11.8 driver takes PTX up to ISA 7.8. */
	open_ctx();
	CU_EQ(cu.cuModuleLoadDataEx(&m, ptx80, 0, NULL, NULL), CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
}

static void visible_reordered(void)
{
	char name[128];
	int n = 0;

	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGetCount(&n));
	CHECK(n == 2, "CUDA_VISIBLE_DEVICES=2,0 of 3: %d devices", n);
	CU_OK(cu.cuDeviceGetName(name, sizeof(name), 0));
	CHECK(strstr(name, "emulation 2") != NULL, "device 0 is %s", name);
	CU_OK(cu.cuDeviceGetName(name, sizeof(name), 1));
	CHECK(strstr(name, "emulation 0") != NULL, "device 1 is %s", name);
	CU_EQ(cu.cuDeviceGetName(name, sizeof(name), 2), CUDA_ERROR_INVALID_DEVICE);
}

static void visible_stops_at_invalid(void)
{
	int n = 0;

	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGetCount(&n));
	CHECK(n == 1, "CUDA_VISIBLE_DEVICES=1,7,0 of 2: %d devices", n);
}

static void visible_none(void)
{
	CU_EQ(cu.cuInit(0), CUDA_ERROR_NO_DEVICE);
}

static void nomemops_mode(void)
{
	CUstreamBatchMemOpParams op;
	uint64_t *word;
	int v = -1;

	open_ctx();
	CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
	CHECK(v == 0, "nomemops: attribute %d", v);
	CU_OK(cu.cuMemHostAlloc((void **)&word, 64, 0));
	CU_EQ(cu.cuStreamWriteValue64(NULL, (CUdeviceptr)(uintptr_t)word, 1, 0),
	      CUDA_ERROR_NOT_SUPPORTED);
	CU_EQ(cu.cuStreamWaitValue64(NULL, (CUdeviceptr)(uintptr_t)word, 1, 0),
	      CUDA_ERROR_NOT_SUPPORTED);
	memset(&op, 0, sizeof(op));
	op.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
	op.writeValue.address = (CUdeviceptr)(uintptr_t)word;
	CU_EQ(cu.cuStreamBatchMemOp(NULL, 1, &op, 0), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- Kernels ------------------------------------------------------------ */

struct saxpy {
	CUmodule mod;
	CUfunction fn;
	CUdeviceptr x, y;
	uint32_t n;
};

static char *read_text(const char *path)
{
	size_t size;
	char *data = th_read_file(path, &size);
	char *text = malloc(size + 1);

	if (!text)
		th_stop("out of memory");
	memcpy(text, data, size);
	text[size] = 0;
	free(data);
	return text;
}

/* saxpy from image (PTX, a cubin or a fatbin), on n elements. */
static void saxpy_setup_image(struct saxpy *k, uint32_t n, const void *image)
{
	float *h = malloc(n * sizeof(float));

	setenv("AQL_CUDA_EMU_KERNELS", host_path, 1);
	CU_OK(cu.cuModuleLoadDataEx(&k->mod, image, 0, NULL, NULL));
	CU_OK(cu.cuModuleGetFunction(&k->fn, k->mod, "saxpy"));
	CU_OK(cu.cuMemAlloc(&k->x, n * sizeof(float)));
	CU_OK(cu.cuMemAlloc(&k->y, n * sizeof(float)));
	for (uint32_t i = 0; i < n; i++)
		h[i] = (float)i;
	CU_OK(cu.cuMemcpyHtoD(k->x, h, n * sizeof(float)));
	for (uint32_t i = 0; i < n; i++)
		h[i] = 1.0f;
	CU_OK(cu.cuMemcpyHtoD(k->y, h, n * sizeof(float)));
	k->n = n;
	free(h);
}

static void saxpy_setup(struct saxpy *k, uint32_t n)
{
	char *ptx = read_text(ptx_path);

	saxpy_setup_image(k, n, ptx);
	free(ptx);
}

static CUresult saxpy_launch(struct saxpy *k, float a, CUstream s)
{
	void *params[] = { &a, &k->x, &k->y, &k->n };

	return cu.cuLaunchKernel(k->fn, (k->n + 63) / 64, 1, 1, 64, 1, 1, 0, s, params, NULL);
}

/* y[i] == i * a_total + 1 for every i. */
static int saxpy_check(struct saxpy *k, float a_total)
{
	float *h = malloc(k->n * sizeof(float));
	int bad = 0;

	CU_OK(cu.cuMemcpyDtoH(h, k->y, k->n * sizeof(float)));
	for (uint32_t i = 0; i < k->n; i++)
		bad += h[i] != (float)i * a_total + 1.0f;
	free(h);
	return bad == 0;
}

static void saxpy_teardown(struct saxpy *k)
{
	CU_OK(cu.cuMemFree(k->x));
	CU_OK(cu.cuMemFree(k->y));
	CU_OK(cu.cuModuleUnload(k->mod));
}

static void set_flag(void *p)
{
	__atomic_store_n((int *)p, 1, __ATOMIC_RELEASE);
}

static void fail_after(void)
{
	struct saxpy k;
	CUstream s;
	CUdeviceptr d;
	int ran = 0;

	open_ctx();
	saxpy_setup(&k, 256);
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(saxpy_launch(&k, 1.0f, s));
	CU_OK(saxpy_launch(&k, 1.0f, s));	/* faults */
	CU_OK(cu.cuLaunchHostFunc(s, set_flag, &ran));
	CU_EQ(cu.cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CHECK(!ran, "a host function ran after the fault");
	CHECK(stats().launch_faults == 1 && stats().launches == 1 &&
	      stats().host_funcs_skipped == 1, "fault counters");
	/* Sticky: every later call on the context reports it. */
	CU_EQ(cu.cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuMemAlloc(&d, 64), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(saxpy_launch(&k, 1.0f, s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuLaunchHostFunc(s, set_flag, &ran), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuStreamDestroy(s), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuMemFree(k.x), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuMemFree(k.y), CUDA_ERROR_ILLEGAL_ADDRESS);
	CU_EQ(cu.cuModuleUnload(k.mod), CUDA_ERROR_ILLEGAL_ADDRESS);
}

/*
 * Device memory is not host memory, as on a discrete GPU: the driver's
 * copies (pageable and pinned, synchronous and Async), memsets, stream
 * memory operations and kernels reach it; host code faults, and the
 * emulation names the cause. Ends in that fault.
 */
static void device_memory_closed(void)
{
	CUdeviceptr d;
	CUstream s;
	uint64_t w = 7, *pinned, *pageable = calloc(2, sizeof(uint64_t));

	open_ctx();
	CU_OK(cu.cuMemAlloc(&d, 4096));
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuMemHostAlloc((void **)&pinned, 64, 0));
	CU_OK(cu.cuMemsetD8(d, 0, 4096));
	CU_OK(cu.cuMemcpyHtoD(d, &w, sizeof(w)));
	CU_OK(cu.cuStreamWriteValue64(s, d + 8, 9, 0));
	CU_OK(cu.cuStreamWaitValue64(s, d, 7, CU_STREAM_WAIT_VALUE_EQ));
	CU_OK(cu.cuMemcpyDtoDAsync(d + 16, d, 16, s));
	CU_OK(cu.cuMemcpyDtoHAsync(pinned, d + 16, 16, s));
	CU_OK(cu.cuMemcpyDtoHAsync(pageable, d, 16, s));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(pinned[0] == 7 && pinned[1] == 9 && pageable && pageable[0] == 7 && pageable[1] == 9,
	      "copies of device memory");
	if (ptx_path) {
		struct saxpy k;

		saxpy_setup(&k, 256);
		CU_OK(saxpy_launch(&k, 2.0f, s));
		CU_OK(cu.cuStreamSynchronize(s));
		CHECK(saxpy_check(&k, 2.0f), "a kernel on device memory");
	}
	if (th_failed)
		_exit(1);
	fprintf(stderr, "reading device memory from the host\n");
	w = *(volatile uint64_t *)(uintptr_t)d;
	fprintf(stderr, "the host read device memory: %llu\n", (unsigned long long)w);
	_exit(0);
}

/* Run device_memory_closed() in a child; it must die of the fault, after
 * its checks, with the emulation's message. */
static void host_access_faults(void)
{
	int fds[2];
	char out[4096];
	size_t len = 0;
	ssize_t n;
	int status = 0;
	pid_t pid;

	if (pipe(fds) != 0)
		th_stop("pipe");
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], 2);
		load();
		device_memory_closed();
	}
	close(fds[1]);
	while (len < sizeof(out) - 1 && (n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
		len += (size_t)n;
	out[len] = 0;
	close(fds[0]);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0) &&
		      strstr(out, "reading device memory from the host") &&
		      strstr(out, "host code touched device memory at"),
	      "host access to device memory: status %#x, stderr:\n%s", status, out);
}

/* ---- The main process: normal mode -------------------------------------- */

static void *no_context_thread(void *arg)
{
	CUcontext ctx = (CUcontext)1;
	CUdeviceptr d;

	(void)arg;
	CU_OK(cu.cuCtxGetCurrent(&ctx));
	CHECK(ctx == NULL, "a fresh thread has a current context");
	CU_EQ(cu.cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
	CU_EQ(cu.cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_CONTEXT);
	return NULL;
}

static CUcontext init_and_contexts(void)
{
	CUcontext ctx = NULL, cur = (CUcontext)1;
	CUdevice dev = -1;
	CUdeviceptr d;
	unsigned flags = 99;
	int n = 0, v = 0, active = -1;
	pthread_t t;

	/* Before cuInit. */
	CU_EQ(cu.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
	CU_EQ(cu.cuCtxGetCurrent(&cur), CUDA_ERROR_NOT_INITIALIZED);
	CU_OK(cu.cuDriverGetVersion(&v));
	CHECK(v >= NV_MIN_DRIVER_VERSION, "driver version %d", v);
	CU_EQ(cu.cuInit(1), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuInit(0));
	CU_OK(cu.cuDeviceGetCount(&n));
	CHECK(n == 1, "%d devices", n);
	CU_EQ(cu.cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
	CU_EQ(cu.cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuDeviceGet(&dev, 0));
	CU_EQ(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3), CUDA_ERROR_INVALID_DEVICE);
	CU_EQ(cu.cuDeviceGetAttribute(&v, 9999, 0), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
	CHECK(v == 132, "SMs %d", v);
	CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0));
	CHECK(v == 232448, "opt-in shared %d", v);
	CU_OK(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
	CHECK(v == 1, "64-bit mem ops %d", v);

	/* Primary context: release without retain fails; retain does not make
	 * it current; no context, no work. */
	CU_EQ(cu.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	CU_EQ(cu.cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
	CU_OK(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 0 && flags == 0, "inactive: flags %u active %d", flags, active);
	CU_OK(cu.cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
	CU_EQ(cu.cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD),
	      CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuDevicePrimaryCtxRetain(&ctx, 0));
	CU_OK(cu.cuCtxGetCurrent(&cur));
	CHECK(cur == NULL, "retain made the context current");
	CU_OK(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 1 && flags == CU_CTX_SCHED_BLOCKING_SYNC, "active: flags %u active %d",
	      flags, active);
	CU_OK(cu.cuCtxSetCurrent(ctx));
	CU_OK(cu.cuCtxGetCurrent(&cur));
	CHECK(cur == ctx, "current context");
	if (pthread_create(&t, NULL, no_context_thread, NULL) != 0)
		th_stop("pthread_create");
	pthread_join(t, NULL);
	/* A second retain and release balance. */
	CU_OK(cu.cuDevicePrimaryCtxRetain(&cur, 0));
	CHECK(cur == ctx, "one primary context");
	CU_OK(cu.cuDevicePrimaryCtxRelease(0));
	return ctx;
}

static void memory(CUcontext ctx)
{
	CUdeviceptr d = 0, d2 = 0, dp = 0;
	CUcontext owner = NULL;
	unsigned type = 0;
	size_t free_b = 0, total = 0;
	void *host = NULL, *hp = NULL;
	char *buf = malloc(8192);

	CU_EQ(cu.cuMemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemAlloc(&d, 100));
	CU_OK(cu.cuMemAlloc(&d2, 1));
	CHECK(d % 256 == 0 && d2 % 256 == 0 && d2 != d, "allocations %#llx %#llx",
	      (unsigned long long)d, (unsigned long long)d2);
	CU_OK(cu.cuMemGetInfo(&free_b, &total));
	CHECK(free_b < total && total > 0, "mem info %zu of %zu", free_b, total);
	CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 10));
	CHECK(type == CU_MEMORYTYPE_DEVICE, "device memory type %u", type);
	CU_OK(cu.cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, d));
	CHECK(owner == ctx, "owner context");
	CU_EQ(cu.cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, d),
	      CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuMemFree(d + 16), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFree(d));
	CU_EQ(cu.cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFree(d2));
	/* Host memory the driver does not know. */
	CU_EQ(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				       (CUdeviceptr)(uintptr_t)buf), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuMemHostGetDevicePointer(&dp, buf, 0), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	/* Registration: overlap refused, same address on the device. */
	CU_OK(cu.cuMemHostRegister(buf + 4096, 4096, CU_MEMHOSTREGISTER_DEVICEMAP));
	CU_EQ(cu.cuMemHostRegister(buf, 4097, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CU_EQ(cu.cuMemHostRegister(buf + 8000, 100, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	CU_OK(cu.cuMemHostGetDevicePointer(&dp, buf + 4100, 0));
	CHECK(dp == (CUdeviceptr)(uintptr_t)(buf + 4100), "registered device pointer");
	CU_OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp));
	CHECK(type == CU_MEMORYTYPE_HOST, "registered memory type %u", type);
	CU_OK(cu.cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, dp));
	CHECK(hp == buf + 4100, "host pointer");
	CU_EQ(cu.cuMemHostUnregister(buf + 4100), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CU_OK(cu.cuMemHostUnregister(buf + 4096));
	CU_OK(cu.cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
	CU_OK(cu.cuMemHostGetDevicePointer(&dp, host, 0));
	CHECK(dp == (CUdeviceptr)(uintptr_t)host, "host-allocated device pointer");
	CU_EQ(cu.cuMemHostUnregister(host), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CU_EQ(cu.cuMemFreeHost(buf), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFreeHost(host));
	/* Copies and memset round trip. */
	CU_OK(cu.cuMemAlloc(&d, 4096));
	CU_OK(cu.cuMemsetD8(d, 0x5a, 4096));
	CU_OK(cu.cuMemcpyDtoH(buf, d, 4096));
	CHECK(buf[0] == 0x5a && buf[4095] == 0x5a, "memset");
	CU_EQ(cu.cuMemcpyHtoD(d + 4000, buf, 200), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuMemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)(buf + 4096), 16),
	      CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuMemFree(d));
	free(buf);
}

static void errors(void)
{
	const char *s = NULL;

	CU_OK(cu.cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
	CHECK(s && !strcmp(s, "CUDA_ERROR_ILLEGAL_ADDRESS"), "name %s", s ? s : "NULL");
	CU_OK(cu.cuGetErrorString(CUDA_ERROR_NOT_READY, &s));
	CHECK(s && *s, "string");
	s = "x";
	CU_EQ(cu.cuGetErrorName(12345, &s), CUDA_ERROR_INVALID_VALUE);
	CHECK(s == NULL, "unknown code leaves a name");
	CU_EQ(cu.cuGetErrorString(12345, NULL), CUDA_ERROR_INVALID_VALUE);
}

struct order {
	int seen[8];
	int n;
};

static struct order order;

static void note(void *p)
{
	order.seen[order.n++] = (int)(intptr_t)p;
}

static void call_cuda(void *p)
{
	CUstream s;

	*(CUresult *)p = cu.cuStreamCreate(&s, 0);
}

/* NOT_READY for a while, then done once *word is made to satisfy it. */
static void wait_released(CUstream s, uint64_t *word, uint64_t release)
{
	th_sleep_ms(20);
	CU_EQ(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	__atomic_store_n(word, release, __ATOMIC_RELEASE);
	CU_OK(cu.cuStreamSynchronize(s));
	CU_OK(cu.cuStreamQuery(s));
}

static void streams_and_memops(void)
{
	CUstream s, s2;
	uint64_t *word, *word2;
	char *pinned, *pageable = malloc(4096);
	CUdeviceptr d;
	CUresult nested = CUDA_SUCCESS;
	uint64_t below, base;
	struct aqlemu_stats st0, st1;
	CUstreamBatchMemOpParams ops[2];
	CUevent e, e2, et;
	float ms = -1;

	CU_EQ(cu.cuStreamCreate(&s, 4), CUDA_ERROR_INVALID_VALUE);
	/* Priorities: the range least 0 to greatest -5, others clamped to it. */
	{
		int least = 1, greatest = 1, p = 1;
		CUresult (*get_priority)(CUstream, int *);

		*(void **)&get_priority = dlsym(lib, "cuStreamGetPriority");
		CHECK(get_priority != NULL, "no cuStreamGetPriority");
		CU_OK(cu.cuCtxGetStreamPriorityRange(&least, &greatest));
		CHECK(least == 0 && greatest == -5, "priority range %d..%d", least, greatest);
		CU_OK(cu.cuCtxGetStreamPriorityRange(NULL, NULL));
		CU_EQ(cu.cuStreamCreateWithPriority(&s, 4, -1), CUDA_ERROR_INVALID_VALUE);
		CU_OK(cu.cuStreamCreateWithPriority(&s, 0, -100));
		CU_OK(get_priority(s, &p));
		CHECK(p == -5, "priority -100 became %d", p);
		CU_OK(cu.cuStreamDestroy(s));
		CU_OK(cu.cuStreamCreateWithPriority(&s, 0, 3));
		CU_OK(get_priority(s, &p));
		CHECK(p == 0, "priority 3 became %d", p);
		CU_EQ(get_priority(s, NULL), CUDA_ERROR_INVALID_VALUE);
		CU_OK(cu.cuStreamDestroy(s));
		CU_EQ(get_priority(s, &p), CUDA_ERROR_INVALID_HANDLE);
	}
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuMemHostAlloc((void **)&word, 64, 0));
	CU_OK(cu.cuMemHostAlloc((void **)&pinned, 4096, 0));
	word2 = word + 1;
	*word = 0;
	*word2 = 0;
	CU_OK(cu.cuMemAlloc(&d, 4096));

	/* Order and NOT_READY: host functions behind a wait run in order,
	 * after it is satisfied. */
	CU_OK(cu.cuLaunchHostFunc(s, note, (void *)1));
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_EQ));
	CU_OK(cu.cuLaunchHostFunc(s, note, (void *)2));
	CU_OK(cu.cuLaunchHostFunc(s, note, (void *)3));
	wait_released(s, word, 1);
	CHECK(order.n == 3 && order.seen[0] == 1 && order.seen[1] == 2 && order.seen[2] == 3,
	      "host function order (%d ran)", order.n);
	/* Host functions may not call the driver. */
	CU_OK(cu.cuLaunchHostFunc(s, call_cuda, &nested));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(nested == CUDA_ERROR_NOT_PERMITTED, "CUDA from a host function: %d", nested);

	/* Pinned async copies run in stream order; pageable ones wait for
	 * the stream and copy before returning, and are counted. */
	memset(pinned, 7, 4096);
	CU_OK(cu.cuMemcpyHtoD(d, pinned, 4096));
	memset(pinned, 0, 4096);
	st0 = stats();
	*word = 0;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_GEQ));
	CU_OK(cu.cuMemcpyDtoHAsync(pinned, d, 4096, s));
	th_sleep_ms(20);
	CHECK(pinned[0] == 0, "a pinned copy ran before the wait before it");
	wait_released(s, word, 1);
	CHECK(pinned[0] == 7 && pinned[4095] == 7, "pinned copy");
	st1 = stats();
	CHECK(st1.pageable_sync_copies == st0.pageable_sync_copies, "pinned copy counted pageable");
	memset(pageable, 0, 4096);
	CU_OK(cu.cuMemcpyDtoHAsync(pageable, d, 4096, s));
	CHECK(pageable[0] == 7 && pageable[4095] == 7, "pageable copy not done at return");
	CU_OK(cu.cuMemcpyHtoDAsync(d, pageable, 16, s));
	CHECK(stats().pageable_sync_copies == st0.pageable_sync_copies + 2, "pageable count");

	/* Stream memory operations: only driver-known memory, aligned. */
	CU_EQ(cu.cuStreamWriteValue64(s, (CUdeviceptr)(uintptr_t)pageable, 1, 0),
	      CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word + 4, 1, 0),
	      CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 1, 7), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuStreamWriteValue64(s, (CUdeviceptr)(uintptr_t)word, 1, 4), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuStreamWriteValue64(s, d + 8, 0x1122334455667788ull, 0));
	CU_OK(cu.cuStreamSynchronize(s));
	uint64_t got = 0;
	CU_OK(cu.cuMemcpyDtoH(&got, d + 8, 8));
	CHECK(got == 0x1122334455667788ull, "write value to device memory: %#llx",
	      (unsigned long long)got);

	/* "value < below", how aql expresses completion, is the cyclic GEQ
	 * with below ^ 2^63: met at once for 5 < 6, waits for 7 < 6. */
	below = 6;
	*word = 5;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, below ^ (1ull << 63),
				     CU_STREAM_WAIT_VALUE_GEQ));
	CU_OK(cu.cuStreamSynchronize(s));
	*word = 7;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, below ^ (1ull << 63),
				     CU_STREAM_WAIT_VALUE_GEQ));
	wait_released(s, word, (uint64_t)-3);	/* -3 < 6 */
	/* Cyclic GEQ across the wrap: UINT64_MAX - 1 + 3 is >= it. */
	base = UINT64_MAX - 1;
	*word = base;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, base + 3,
				     CU_STREAM_WAIT_VALUE_GEQ));
	wait_released(s, word, base + 3);
	/* AND and NOR. */
	*word = 0x10;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 0x3, CU_STREAM_WAIT_VALUE_AND));
	wait_released(s, word, 0x12);
	*word = ~0ull;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 0xf0, CU_STREAM_WAIT_VALUE_NOR));
	wait_released(s, word, 0xf);

	/* A wait sees a write made by another stream. */
	*word = 0;
	*word2 = 0;
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 2, CU_STREAM_WAIT_VALUE_EQ));
	CU_OK(cu.cuStreamWriteValue64(s, (CUdeviceptr)(uintptr_t)word2, 9, 0));
	memset(ops, 0, sizeof(ops));
	ops[0].operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
	ops[0].writeValue.address = (CUdeviceptr)(uintptr_t)word;
	ops[0].writeValue.value64 = 2;
	ops[1].operation = CU_STREAM_MEM_OP_BARRIER;
	CU_EQ(cu.cuStreamBatchMemOp(s2, 2, ops, 1), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuStreamBatchMemOp(s2, 2, ops, 0));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(*word2 == 9, "wait on another stream's write");

	/* 32-bit operations in a batch: the cyclic GEQ wraps at 2^32. */
	uint32_t *w32 = (uint32_t *)word2;
	*w32 = 0xfffffff0u;
	memset(ops, 0, sizeof(ops));
	ops[0].operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
	ops[0].waitValue.address = (CUdeviceptr)(uintptr_t)w32;
	ops[0].waitValue.value = 0x10;
	ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
	ops[1].operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
	ops[1].writeValue.address = (CUdeviceptr)(uintptr_t)(w32 + 1);
	ops[1].writeValue.value = 77;
	CU_OK(cu.cuStreamBatchMemOp(s, 2, ops, 0));
	th_sleep_ms(20);
	CU_EQ(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
	CHECK(w32[1] != 77, "a batch write passed its wait");
	__atomic_store_n(w32, 0x10u, __ATOMIC_RELEASE);
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(w32[1] == 77, "batch write after its wait");

	/* Events: cross-stream waits, queries, elapsed time. */
	CU_OK(cu.cuEventCreate(&e, 0));
	CU_OK(cu.cuEventCreate(&e2, 0));
	CU_OK(cu.cuEventCreate(&et, CU_EVENT_DISABLE_TIMING));
	CU_OK(cu.cuEventQuery(e));
	*word = 0;
	*word2 = 0;
	CU_OK(cu.cuEventRecord(e, s));
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_EQ));
	CU_OK(cu.cuEventRecord(e2, s));
	CU_OK(cu.cuEventRecord(et, s));
	CU_OK(cu.cuEventSynchronize(e));	/* its time is before the sleep */
	CU_OK(cu.cuStreamWaitEvent(s2, e2, 0));
	CU_OK(cu.cuStreamWriteValue64(s2, (CUdeviceptr)(uintptr_t)word2, 5, 0));
	th_sleep_ms(20);
	CU_EQ(cu.cuEventQuery(e2), CUDA_ERROR_NOT_READY);
	CU_EQ(cu.cuStreamQuery(s2), CUDA_ERROR_NOT_READY);
	CU_EQ(cu.cuEventElapsedTime(&ms, e, e2), CUDA_ERROR_NOT_READY);
	CHECK(*word2 == 0, "a stream passed an event wait early");
	__atomic_store_n(word, 1, __ATOMIC_RELEASE);
	CU_OK(cu.cuEventSynchronize(e2));
	CU_OK(cu.cuStreamSynchronize(s2));
	CHECK(*word2 == 5, "event wait then write");
	CU_OK(cu.cuEventElapsedTime(&ms, e, e2));
	CHECK(ms >= 19.0f, "elapsed %f ms across a 20 ms wait", (double)ms);
	CU_EQ(cu.cuEventElapsedTime(&ms, e, et), CUDA_ERROR_INVALID_HANDLE);
	CU_OK(cu.cuEventDestroy(e));
	CU_OK(cu.cuEventDestroy(e2));
	CU_OK(cu.cuEventDestroy(et));
	CU_EQ(cu.cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);

	/* Destroy with work pending: it still completes. */
	static int late;
	*word = 0;
	CU_OK(cu.cuStreamWaitValue64(s2, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_EQ));
	CU_OK(cu.cuLaunchHostFunc(s2, set_flag, &late));
	CU_OK(cu.cuStreamDestroy(s2));
	CU_EQ(cu.cuStreamQuery(s2), CUDA_ERROR_INVALID_HANDLE);
	__atomic_store_n(word, 1, __ATOMIC_RELEASE);
	uint64_t end = th_now_ns() + th_timeout_ns();
	while (!__atomic_load_n(&late, __ATOMIC_ACQUIRE) && th_now_ns() < end)
		th_sleep_ms(1);
	CHECK(late, "work of a destroyed stream did not complete");

	CU_OK(cu.cuStreamDestroy(s));
	CU_OK(cu.cuMemFree(d));
	CU_OK(cu.cuMemFreeHost(word));
	CU_OK(cu.cuMemFreeHost(pinned));
	free(pageable);
}

/* Many threads, each with its own stream: every entry point is thread safe. */
struct worker_arg {
	CUcontext ctx;
	uint64_t *words;
	int index;
	int host_runs;
	CUresult failed;
	const char *failed_call;
};

static void count_run(void *p)
{
	((struct worker_arg *)p)->host_runs++;
}

/* CHECK's tally is not thread safe: threads count their own failures. */
#define TCU(call)                                                              \
	do {                                                                   \
		CUresult r_ = (call);                                          \
		if (r_ != CUDA_SUCCESS && !a->failed)                          \
			a->failed = r_, a->failed_call = #call;                \
	} while (0)

static void *stream_user(void *p)
{
	struct worker_arg *a = p;
	CUstream s;
	CUdeviceptr d;
	uint64_t *w = &a->words[a->index * 8];

	TCU(cu.cuCtxSetCurrent(a->ctx));
	TCU(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	TCU(cu.cuMemAlloc(&d, 256));
	for (uint64_t i = 1; i <= 50; i++) {
		TCU(cu.cuStreamWriteValue64(s, (CUdeviceptr)(uintptr_t)w, i, 0));
		TCU(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)w, i, CU_STREAM_WAIT_VALUE_EQ));
		TCU(cu.cuLaunchHostFunc(s, count_run, a));
		TCU(cu.cuMemcpyDtoDAsync(d, d + 128, 64, s));
	}
	TCU(cu.cuStreamSynchronize(s));
	TCU(cu.cuStreamDestroy(s));
	TCU(cu.cuMemFree(d));
	return NULL;
}

static void threads(CUcontext ctx)
{
	struct worker_arg args[4];
	pthread_t t[4];
	uint64_t *words;

	CU_OK(cu.cuMemHostAlloc((void **)&words, 4 * 64, 0));
	memset(words, 0, 4 * 64);
	for (int i = 0; i < 4; i++) {
		args[i] = (struct worker_arg){ ctx, words, i, 0, CUDA_SUCCESS, NULL };
		if (pthread_create(&t[i], NULL, stream_user, &args[i]) != 0)
			th_stop("pthread_create");
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
		CHECK(args[i].failed == CUDA_SUCCESS, "thread %d: %s returned %d", i,
		      args[i].failed_call, args[i].failed);
	for (int i = 0; i < 4; i++)
		CHECK(args[i].host_runs == 50 && words[i * 8] == 50, "thread %d: %d runs, word %llu",
		      i, args[i].host_runs, (unsigned long long)words[i * 8]);
	CU_OK(cu.cuMemFreeHost(words));
}

static const char bad_ptx[] =
	".version 7.8\n.target sm_75\n.address_size 64\n"
	".visible .entry broken(.param .u64 p)\n{\n\tbogus.instruction %r1;\n\tret;\n}\n";
static const char new_ptx[] =
	".version 9.9\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n";

static int toolkit_present(void)
{
	const char *home = getenv("CUDA_HOME");
	char path[4096];

	if (home && *home) {
		snprintf(path, sizeof(path), "%s/lib64/libnvJitLink.so.13", home);
		if (access(path, R_OK) == 0)
			return 1;
	}
	return access("/usr/local/cuda/lib64/libnvJitLink.so.13", R_OK) == 0;
}

static void modules(void)
{
	char log[4096];
	int opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *vals[] = { log, (void *)(uintptr_t)sizeof(log) };
	char small[16];
	void *small_vals[] = { small, (void *)(uintptr_t)sizeof(small) };
	CUmodule m;

	CU_EQ(cu.cuModuleLoadDataEx(&m, new_ptx, 2, opts, vals), CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
	if (toolkit_present()) {
		/* The JIT's log reaches the caller's buffer (ref §3.7). */
		log[0] = 0;
		CU_EQ(cu.cuModuleLoadDataEx(&m, bad_ptx, 2, opts, vals), CUDA_ERROR_INVALID_PTX);
		CHECK(strstr(log, "line 6") != NULL && strstr(log, "error") != NULL, "JIT log: %s", log);
		CHECK((uintptr_t)vals[1] == strlen(log), "log size written back");
		memset(small, 'x', sizeof(small));
		CU_EQ(cu.cuModuleLoadDataEx(&m, bad_ptx, 2, opts, small_vals),
		      CUDA_ERROR_INVALID_PTX);
		CHECK(small[sizeof(small) - 1] == 0 && strlen(small) == sizeof(small) - 1,
		      "log truncated and terminated");
		CHECK(stats().ptx_jit_links >= 2, "nvJitLink not used");
	}
	CU_EQ(cu.cuModuleLoadDataEx(&m, "this is not PTX {", 0, NULL, NULL), CUDA_ERROR_INVALID_PTX);
}

/* An entry that calls a function another input must define. */
static const char caller_ptx[] =
	".version 7.8\n.target sm_75\n.address_size 64\n"
	".extern .func callee_fn(.param .b64 a);\n"
	".visible .entry caller()\n{\n\t.reg .b64 %rd<1>;\n\tmov.u64 %rd0, 0;\n"
	"\t{\n\t.param .b64 a;\n\tst.param.b64 [a], %rd0;\n"
	"\tcall.uni callee_fn, (a);\n\t}\n\tret;\n}\n";

/* The linker's rules: PTX only, NUL-terminated, externs defined at
 * Complete, the image the state's, handles checked. */
static void linker(void)
{
	char log[512];
	int opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *vals[] = { log, (void *)(uintptr_t)sizeof(log) };
	char unterminated[4] = { '.', 'v', 'e', 'r' };
	CUlinkState ls, gone;
	void *image = NULL;
	size_t size = 0;

	CU_EQ(cu.cuLinkCreate(0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuLinkCreate(2, opts, vals, &ls));
	CU_EQ(cu.cuLinkAddData(ls, CU_JIT_INPUT_PTX, unterminated, sizeof(unterminated), "u", 0,
			       NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLinkAddData(ls, CU_JIT_NUM_INPUT_TYPES, (void *)caller_ptx,
			       sizeof(caller_ptx), "c", 0, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)caller_ptx, sizeof(caller_ptx),
			       "c", 0, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
	CU_EQ(cu.cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)new_ptx, sizeof(new_ptx), "n", 0,
			       NULL, NULL), CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
	CU_OK(cu.cuLinkAddData(ls, CU_JIT_INPUT_PTX, (void *)caller_ptx, sizeof(caller_ptx),
			       "c", 0, NULL, NULL));
	log[0] = 0;
	CU_EQ(cu.cuLinkComplete(ls, &image, &size), CUDA_ERROR_INVALID_IMAGE);
	CHECK(strstr(log, "callee_fn") != NULL, "the undefined name in the log: %s", log);
	CU_EQ(cu.cuLinkComplete(ls, NULL, &size), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuLinkDestroy(ls));
	gone = ls;
	CU_EQ(cu.cuLinkAddData(gone, CU_JIT_INPUT_PTX, (void *)caller_ptx, sizeof(caller_ptx),
			       "c", 0, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
	CU_EQ(cu.cuLinkComplete(gone, &image, &size), CUDA_ERROR_INVALID_HANDLE);
	CU_EQ(cu.cuLinkDestroy(gone), CUDA_ERROR_INVALID_HANDLE);
}

static void kernels(void)
{
	struct saxpy k;
	char *ptx = read_text(ptx_path);
	char log[512];
	int opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *vals[] = { log, (void *)(uintptr_t)sizeof(log) };
	CUfunction f;
	CUstream s, cap;
	CUgraph g;
	CUgraphExec x;
	int v = 0;
	uint64_t launches;

	/* No host build: the module cannot run. */
	unsetenv("AQL_CUDA_EMU_KERNELS");
	log[0] = 0;
	CU_EQ(cu.cuModuleLoadDataEx(&k.mod, ptx, 2, opts, vals), CUDA_ERROR_INVALID_IMAGE);
	CHECK(strstr(log, "AQL_CUDA_EMU_KERNELS") != NULL, "log: %s", log);
	free(ptx);

	saxpy_setup(&k, 1000);
	CU_EQ(cu.cuModuleGetFunction(&f, k.mod, "nope"), CUDA_ERROR_NOT_FOUND);
	CU_OK(cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.fn));
	CHECK(v >= 64 && v <= 1024, "max threads %d", v);
	CU_OK(cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.fn));
	CHECK(v == 48 * 1024, "dynamic shared %d", v);
	CU_OK(cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, k.fn));
	CHECK(v == 90, "binary version %d", v);
	CU_EQ(cu.cuFuncGetAttribute(&v, 77, k.fn), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

	launches = stats().launches;
	CU_OK(saxpy_launch(&k, 2.0f, s));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(saxpy_check(&k, 2.0f), "saxpy with kernelParams");
	CHECK(stats().launches == launches + 1, "launch count");

	/* The extra form: a packed buffer of exactly the PTX parameter size. */
	struct { float a; uint32_t pad; CUdeviceptr x, y; uint32_t n; uint32_t pad2; } pb = {
		1.0f, 0, k.x, k.y, k.n, 0 };
	size_t size = 28;
	void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &pb, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
			  CU_LAUNCH_PARAM_END };
	CU_OK(cu.cuLaunchKernel(k.fn, 16, 1, 1, 64, 1, 1, 0, s, NULL, extra));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(saxpy_check(&k, 3.0f), "saxpy with extra");
	size = 32;
	CU_EQ(cu.cuLaunchKernel(k.fn, 16, 1, 1, 64, 1, 1, 0, s, NULL, extra), CUDA_ERROR_INVALID_VALUE);
	size = 28;

	/* Checked at the call. */
	void *params[] = { &pb.a, &k.x, &k.y, &k.n };
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 1, 1, 64, 1, 1, 0, s, params, extra), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 1, 1, 64, 1, 1, 0, s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 1, 1, 1025, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 1, 1, 64, 32, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 1, 1, 1, 1, 65, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 65536, 1, 64, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 0, 1, 1, 64, 1, 1, 0, s, params, NULL), CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel(k.fn, 1, 1, 1, 64, 1, 1, 48 * 1024 + 1, s, params, NULL),
	      CUDA_ERROR_INVALID_VALUE);
	CU_EQ(cu.cuLaunchKernel((CUfunction)&v, 1, 1, 1, 64, 1, 1, 0, s, params, NULL),
	      CUDA_ERROR_INVALID_HANDLE);
	CU_EQ(cu.cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 232449),
	      CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuFuncSetAttribute(k.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
	CU_OK(cu.cuLaunchKernel(k.fn, 16, 1, 1, 64, 1, 1, 100000, s, params, NULL));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(saxpy_check(&k, 4.0f), "saxpy with opt-in shared memory");

	/* Capture: launches are recorded, not run, and replay per launch. */
	CU_EQ(cu.cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
	      CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CU_OK(cu.cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
	CU_EQ(cu.cuStreamEndCapture(cap, &g), CUDA_ERROR_ILLEGAL_STATE);
	CU_OK(cu.cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
	launches = stats().launches;
	CU_OK(saxpy_launch(&k, 1.0f, cap));
	CU_OK(saxpy_launch(&k, 1.0f, cap));
	CU_EQ(cu.cuStreamSynchronize(cap), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
	CU_OK(cu.cuStreamEndCapture(cap, &g));
	CHECK(stats().launches == launches, "captured launches ran");
	CU_OK(cu.cuGraphInstantiateWithFlags(&x, g, 0));
	CU_OK(cu.cuGraphLaunch(x, s));
	CU_OK(cu.cuGraphLaunch(x, s));
	CU_OK(cu.cuStreamSynchronize(s));
	CHECK(saxpy_check(&k, 8.0f), "graph replay");
	CHECK(stats().launches == launches + 4 && stats().graph_launches >= 2, "graph launches");
	CU_OK(cu.cuGraphExecDestroy(x));
	CU_OK(cu.cuGraphDestroy(g));
	CU_EQ(cu.cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
	CU_OK(cu.cuStreamDestroy(cap));
	CU_OK(cu.cuStreamDestroy(s));
	saxpy_teardown(&k);
}

/* ---- Cubins and fatbins ------------------------------------------------- */

static uint8_t *read_nv(const char *name, size_t *n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", nv_dir, name);
	return th_read_file(path, n);
}

/* Load name; expect want, and text in the JIT log when it fails. */
static void load_nv(const char *name, const uint8_t *image, CUresult want, const char *text)
{
	char log[1024] = "";
	int opts[] = { CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES };
	void *vals[] = { log, (void *)(uintptr_t)sizeof(log) };
	CUmodule m = NULL;
	CUresult r = cu.cuModuleLoadDataEx(&m, image, 2, opts, vals);

	CHECK(r == want && (!text || strstr(log, text)), "%s: CUresult %d (want %d), log \"%s\"",
	      name, r, want, log);
	if (r == CUDA_SUCCESS)
		CU_OK(cu.cuModuleUnload(m));
}

static void binaries(void)
{
	static const char *const names[] = { "saxpy.sm_80.cubin", "saxpy.sm_90.cubin",
					     "saxpy.sm_100.cubin", "saxpy.fatbin",
					     "saxpy.zstd.fatbin", "saxpy.ptx.fatbin",
					     "saxpy.lz4.fatbin", "plain.sm_90.cubin" };
	uint8_t *img[8];
	size_t size[8];
	struct saxpy k;
	uint64_t links;

	for (int i = 0; i < 8; i++)
		img[i] = read_nv(names[i], &size[i]);
	setenv("AQL_CUDA_EMU_KERNELS", host_path, 1);
	/* A cubin runs on its own SM only: sm_90 here. */
	load_nv(names[0], img[0], CUDA_ERROR_NO_BINARY_FOR_GPU, "a cubin for sm_80");
	load_nv(names[2], img[2], CUDA_ERROR_NO_BINARY_FOR_GPU, "a cubin for sm_100");
	/* Fatbins: the sm_90 cubin, or the PTX beside an sm_100 one. */
	links = stats().ptx_jit_links;
	load_nv(names[1], img[1], CUDA_SUCCESS, NULL);
	load_nv(names[3], img[3], CUDA_SUCCESS, NULL);
	load_nv(names[4], img[4], CUDA_SUCCESS, NULL);
	CHECK(stats().ptx_jit_links == links, "a fatbin with an sm_90 cubin was JIT-compiled");
	load_nv(names[5], img[5], CUDA_SUCCESS, NULL);
	if (toolkit_present())
		CHECK(stats().ptx_jit_links == links + 1, "the PTX of saxpy.ptx.fatbin was not taken");
	load_nv(names[6], img[6], CUDA_ERROR_INVALID_IMAGE, "LZ4");
	/* nvcc's scale has no host build here. */
	load_nv(names[7], img[7], CUDA_ERROR_INVALID_IMAGE, "AQL_CUDA_EMU_KERNELS");
	/* saxpy.ptx.fatbin cut to its first entry, the sm_100 cubin: its
	 * header's size of the entries made that entry's header and payload. */
	{
		uint64_t first = 0;

		for (int b = 7; b >= 0; b--)
			first = first << 8 | img[5][16 + 8 + b];
		first += (uint32_t)(img[5][16 + 4] | img[5][16 + 5] << 8);
		for (int b = 0; b < 8; b++)
			img[5][8 + b] = (uint8_t)(first >> 8 * b);
	}
	load_nv("saxpy.ptx.fatbin, cut", img[5], CUDA_ERROR_NO_BINARY_FOR_GPU,
		"no cubin or PTX for this sm_90 device");

	/* The sm_90 cubin runs, its parameter block checked against the
	 * cubin's recorded size. */
	saxpy_setup_image(&k, 1000, img[1]);
	{
		CUstream s;
		float a = 2.0f;
		struct { float a; uint32_t pad; CUdeviceptr x, y; uint32_t n; } pb = {
			1.0f, 0, k.x, k.y, k.n };
		size_t bytes = 28;
		void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &pb, CU_LAUNCH_PARAM_BUFFER_SIZE,
				  &bytes, CU_LAUNCH_PARAM_END };

		CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
		CU_OK(saxpy_launch(&k, a, s));
		CU_OK(cu.cuLaunchKernel(k.fn, 16, 1, 1, 64, 1, 1, 0, s, NULL, extra));
		CU_OK(cu.cuStreamSynchronize(s));
		CHECK(saxpy_check(&k, 3.0f), "saxpy from the sm_90 cubin");
		bytes = 24;
		CU_EQ(cu.cuLaunchKernel(k.fn, 16, 1, 1, 64, 1, 1, 0, s, NULL, extra),
		      CUDA_ERROR_INVALID_VALUE);
		CU_OK(cu.cuStreamDestroy(s));
	}
	saxpy_teardown(&k);
	for (int i = 0; i < 8; i++)
		free(img[i]);
}

/* The last release destroys the context at once: work that would wait
 * forever is dropped, and the context must be retained again. */
static void context_destroy(CUcontext ctx)
{
	static int ran;
	CUcontext again;
	CUstream s;
	CUdeviceptr d;
	uint64_t *word;
	int active = -1;
	unsigned flags;

	CU_OK(cu.cuMemHostAlloc((void **)&word, 64, 0));
	*word = 0;
	CU_OK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CU_OK(cu.cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)word, 1, CU_STREAM_WAIT_VALUE_EQ));
	CU_OK(cu.cuLaunchHostFunc(s, set_flag, &ran));
	CU_OK(cu.cuDevicePrimaryCtxRelease(0));
	CU_OK(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
	CHECK(active == 0, "released context active");
	CU_EQ(cu.cuMemAlloc(&d, 64), CUDA_ERROR_INVALID_CONTEXT);
	CU_EQ(cu.cuCtxSetCurrent(ctx), CUDA_ERROR_INVALID_CONTEXT);
	__atomic_store_n(word, 1, __ATOMIC_RELEASE);
	th_sleep_ms(20);
	CHECK(!__atomic_load_n(&ran, __ATOMIC_ACQUIRE), "work of a destroyed context ran");
	CU_OK(cu.cuDevicePrimaryCtxRetain(&again, 0));
	CHECK(again == ctx, "the primary context handle changed");
	CU_OK(cu.cuCtxSetCurrent(again));
	CU_OK(cu.cuStreamSynchronize(NULL));
	CU_OK(cu.cuCtxSetCurrent(NULL));
	CU_OK(cu.cuDevicePrimaryCtxRelease(0));
}

int main(int argc, char **argv)
{
	static const char *const stub[] = { "AQL_CUDA_EMU_MODE=stub", NULL };
	static const char *const nodev[] = { "AQL_CUDA_EMU_MODE=nodevice", NULL };
	static const char *const old[] = { "AQL_CUDA_EMU_MODE=old", NULL };
	static const char *const nomem[] = { "AQL_CUDA_EMU_MODE=nomemops", NULL };
	static const char *const vis[] = { "AQL_CUDA_EMU_DEVICES=3", "CUDA_VISIBLE_DEVICES=2,0",
					   NULL };
	static const char *const vis_bad[] = { "AQL_CUDA_EMU_DEVICES=2",
					       "CUDA_VISIBLE_DEVICES=1,7,0", NULL };
	static const char *const vis_empty[] = { "CUDA_VISIBLE_DEVICES=", NULL };
	static const char *const vis_none[] = { "CUDA_VISIBLE_DEVICES=3", NULL };
	static const char *const fault[] = { "AQL_CUDA_EMU_FAIL_AFTER=1", NULL };
	CUcontext ctx;

	if (argc > 2 && strcmp(argv[1], "--nv") == 0) {
		nv_dir = argv[2];
		argc -= 2;
		argv += 2;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: %s [--nv DIR] libcuda.so.1 saxpy.host.so [saxpy.ptx]\n",
			argv[0]);
		return 2;
	}
	lib_path = argv[1];
	host_path = argv[2];
	ptx_path = argc > 3 ? argv[3] : NULL;

	/* Children first, while this process has no threads. */
	in_child("stub", stub_mode, stub);
	in_child("nodevice", nodevice_mode, nodev);
	in_child("old", old_mode, old);
	in_child("nomemops", nomemops_mode, nomem);
	in_child("visible 2,0", visible_reordered, vis);
	in_child("visible 1,7,0", visible_stops_at_invalid, vis_bad);
	in_child("visible empty", visible_none, vis_empty);
	in_child("visible 3 of 1", visible_none, vis_none);
	if (ptx_path)
		in_child("fail after", fail_after, fault);
	host_access_faults();

	load();
	ctx = init_and_contexts();
	memory(ctx);
	errors();
	streams_and_memops();
	threads(ctx);
	modules();
	linker();
	if (ptx_path)
		kernels();
	else
		printf("no PTX built here: kernel launches not checked\n");
	if (nv_dir)
		binaries();
	context_destroy(ctx);
	CU_EQ(cu.cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
	return th_finish();
}
