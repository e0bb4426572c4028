/* SPDX-License-Identifier: MIT */
/*
 * The KFD emulation (tests/kfd_emu/) keeps amdkfd's rules, so that the AMD
 * agent's tests can trust it: the topology of both models and how the
 * version changes it, the emulated files, the ioctl dispatcher (range,
 * sizes, direction, the opener's process), ACQUIRE_VM, RUNTIME_ENABLE,
 * the apertures, XNACK, SET_SCRATCH_BACKING_VA before and after the VM,
 * the buffer objects (ALLOC/MAP/UNMAP/FREE, AVAILABLE_MEMORY, the render
 * node's mmap, the BAR and VRAM settings), the events (the event page,
 * SET/RESET, WAIT_EVENTS with and without the event age, the CP's
 * interrupt, a VM fault, a queue exception), user queues and the
 * doorbells, the emulated CP (barriers, completions, CP errors, faults,
 * kernel dispatch of saxpy's host build), the settings and the fault
 * points.
 *
 * Arguments: the emulation library and saxpy's host build (for
 * AQL_KFD_EMU_KERNELS). The library is opened by path and its table
 * used directly, as aql/kfd does. The emulation reads its settings once
 * per load, so each case runs in a forked child that sets them first.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "aql/kfd/kfd_abi.h"
#include "aql/packet.h"
#include "aql/queue.h"
#include "aql/signal.h"
#include "aql/kfd/sys.h"
#include "kfd_emu/kfdemu.h"

#define TOPO AQL_KFD_TOPOLOGY
#define GIB (1ull << 30)

static const char *lib_path;
static const struct aql_kfd_sys *sys;
static kfdemu_stats_fn stats_fn;
static kfdemu_bo_at_fn bo_at_fn;
static kfdemu_queue_at_fn queue_at_fn;

#define EQ(expr, want)                                                         \
	do {                                                                   \
		long long v_ = (long long)(expr), w_ = (long long)(want);      \
		CHECK(v_ == w_, "%s is %lld, expected %lld", #expr, v_, w_);   \
	} while (0)

static void load(void)
{
	void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		th_stop(dlerror());
	sys = dlsym(h, "aql_kfd_sys_v1");
	*(void **)&stats_fn = dlsym(h, "kfdemu_stats");
	*(void **)&bo_at_fn = dlsym(h, "kfdemu_bo_at");
	*(void **)&queue_at_fn = dlsym(h, "kfdemu_queue_at");
	if (!sys || !stats_fn || !bo_at_fn || !queue_at_fn)
		th_stop("aql_kfd_sys_v1, kfdemu_stats, kfdemu_bo_at or kfdemu_queue_at missing");
	CHECK(sys->abi == AQL_KFD_SYS_ABI, "abi %u", sys->abi);
}

static struct kfdemu_stats stats(void)
{
	struct kfdemu_stats s;

	CHECK(stats_fn(&s) == 0, "kfdemu_stats");
	return s;
}

/* The value of key in the file at path (printf-formed), or -1 if absent. */
static long long key(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long long key(const char *key, const char *fmt, ...)
{
	char path[256], buf[4096], *p;
	size_t n = strlen(key);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (sys->read_file(path, buf, sizeof(buf)) < 0)
		return -2;
	for (p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
	return -1;
}

static long long number_file(const char *path)
{
	char buf[64];

	if (sys->read_file(path, buf, sizeof(buf)) < 0)
		return -2;
	return strtoll(buf, NULL, 10);
}

static int count_each(const char *name, void *user)
{
	(void)name;
	++*(int *)user;
	return 0;
}

static int entries(const char *path)
{
	int n = 0, r = sys->list_dir(path, count_each, &n);

	return r ? r : n;
}

static int kfd_open(void)
{
	int fd = sys->open("/dev/kfd", O_RDWR);

	CHECK(fd >= 0, "open /dev/kfd: %d", fd);
	return fd;
}

static uint32_t gpu_id(unsigned node)
{
	char path[128];

	snprintf(path, sizeof(path), TOPO "/nodes/%u/gpu_id", node);
	return (uint32_t)number_file(path);
}

static int acquire(int kfd, int drm_fd, uint32_t id)
{
	struct kfd_ioctl_acquire_vm_args a = { .drm_fd = (uint32_t)drm_fd, .gpu_id = id };

	return sys->ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, &a);
}

static int runtime(int kfd, uint32_t mode)
{
	struct kfd_ioctl_runtime_enable_args a = { .mode_mask = mode };

	return sys->ioctl(kfd, AMDKFD_IOC_RUNTIME_ENABLE, &a);
}

static int scratch(int kfd, uint32_t id)
{
	struct kfd_ioctl_set_scratch_backing_va_args a = { .va_addr = 1ull << 40, .gpu_id = id };

	return sys->ioctl(kfd, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &a);
}

static int apertures(int kfd, struct kfd_process_device_apertures *pa, uint32_t *n)
{
	struct kfd_ioctl_get_process_apertures_new_args a = {
		.kfd_process_device_apertures_ptr = (uintptr_t)pa, .num_of_nodes = *n };
	int r = sys->ioctl(kfd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &a);

	*n = a.num_of_nodes;
	return r;
}

/*
 * Whether the emulation can see an unmapped caller range: it copies
 * through process_vm_readv/writev, which a sandbox may forbid.
 */
static int user_copy_checked(void)
{
	char a = 1, b = 0;
	struct iovec l = { &b, 1 }, r = { &a, 1 };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1 && b == 1;
}

/* One GPU node against its model's values (plan §4; kfd_queue.c sizes). */
static void check_node(unsigned node, const char *model, unsigned render_minor, uint32_t minor)
{
	int gfx942 = !strcmp(model, "gfx942");
	char path[128];
	long long cap;

	snprintf(path, sizeof(path), TOPO "/nodes/%u/properties", node);
	EQ(key("gfx_target_version", "%s", path), gfx942 ? 90402 : 90010);
	EQ(key("simd_count", "%s", path), gfx942 ? 1216 : 440);
	EQ(key("simd_per_cu", "%s", path), 4);
	EQ(key("array_count", "%s", path), gfx942 ? 32 : 8);
	EQ(key("simd_arrays_per_engine", "%s", path), 1);
	EQ(key("max_waves_per_simd", "%s", path), 8);
	EQ(key("wave_front_size", "%s", path), 64);
	EQ(key("lds_size_in_kb", "%s", path), 64);
	EQ(key("max_slots_scratch_cu", "%s", path), 32);
	EQ(key("vendor_id", "%s", path), 0x1002);
	EQ(key("device_id", "%s", path), gfx942 ? 0x74a1 : 0x740c);
	EQ(key("drm_render_minor", "%s", path), render_minor);
	EQ(key("max_engine_clk_fcompute", "%s", path), gfx942 ? 2100 : 1700);
	EQ(key("local_mem_size", "%s", path), 0);
	EQ(key("cpu_cores_count", "%s", path), 0);
	cap = key("capability", "%s", path);
	EQ((cap & HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK) >> HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT,
	   HSA_CAP_DOORBELL_TYPE_2_0);
	CHECK(cap & HSA_CAP_SRAM_EDCSUPPORTED, "no sramecc bit in 0x%llx", cap);
	CHECK(!(cap & HSA_CAP_AQL_QUEUE_DOUBLE_MAP), "double map on gfx9");
	CHECK(!!(cap & 0x8000) == (minor >= 13), "trap debug bit 0x%llx at 1.%u", cap, minor);
	CHECK(cap & HSA_CAP_SVMAPI_SUPPORTED, "no SVM bit in 0x%llx", cap);
	EQ(key("num_xcc", "%s", path), minor >= 13 ? (gfx942 ? 8 : 1) : -1);
	EQ(key("debug_prop", "%s", path) >= 0, minor >= 13);
	EQ(key("cwsr_size", "%s", path), minor >= 18 ? (gfx942 ? 23203840 : 67170304) : -1);
	EQ(key("ctl_stack_size", "%s", path), minor >= 18 ? (gfx942 ? 12288 : 36864) : -1);
	/* the last key of node_show, after the GPU-only ones */
	EQ(key("max_engine_clk_ccompute", "%s", path) > 0, 1);

	EQ(key("heap_type", TOPO "/nodes/%u/mem_banks/0/properties", node), HSA_MEM_HEAP_TYPE_FB_PUBLIC);
	EQ(key("size_in_bytes", TOPO "/nodes/%u/mem_banks/0/properties", node),
	   gfx942 ? 192 * GIB : 64 * GIB);
	EQ(key("width", TOPO "/nodes/%u/mem_banks/0/properties", node), gfx942 ? 8192 : 4096);
	snprintf(path, sizeof(path), TOPO "/nodes/%u/caches", node);
	EQ(entries(path), key("caches_count", TOPO "/nodes/%u/properties", node));
	EQ(entries(path), gfx942 ? 3 : 2);
	EQ(key("level", TOPO "/nodes/%u/caches/0/properties", node), 1);
	EQ(key("size", TOPO "/nodes/%u/caches/0/properties", node), gfx942 ? 32 : 16);
	EQ(key("processor_id_low", TOPO "/nodes/%u/caches/0/properties", node),
	   key("simd_id_base", TOPO "/nodes/%u/properties", node));
	snprintf(path, sizeof(path), TOPO "/nodes/%u/io_links", node);
	EQ(entries(path), 1);
	EQ(key("type", TOPO "/nodes/%u/io_links/0/properties", node), HSA_IOLINK_TYPE_PCIEXPRESS);
	EQ(key("node_from", TOPO "/nodes/%u/io_links/0/properties", node), node);
	EQ(key("node_to", TOPO "/nodes/%u/io_links/0/properties", node), 0);
	snprintf(path, sizeof(path), TOPO "/nodes/%u/name", node);
	{
		char name[64];

		CHECK(sys->read_file(path, name, sizeof(name)) > 0, "%s", path);
		CHECK(!strcmp(name, gfx942 ? "ip discovery\n" : "aldebaran\n"), "name %s", name);
	}
}

/* The CPU node 0 with ngpus links, and the GPU nodes after it. */
static void check_topology(const char **models, unsigned ngpus, uint32_t minor)
{
	char buf[64];

	EQ(entries(TOPO), 3);
	EQ(entries(TOPO "/nodes"), ngpus + 1);
	EQ(number_file(TOPO "/generation_id") >= 0, 1);
	EQ(key("platform_oem", TOPO "/system_properties"), 0);
	EQ(gpu_id(0), 0);
	EQ(key("simd_count", TOPO "/nodes/0/properties"), 0);
	EQ(key("gfx_target_version", TOPO "/nodes/0/properties"), 0);
	EQ(key("cpu_cores_count", TOPO "/nodes/0/properties") > 0, 1);
	EQ(key("io_links_count", TOPO "/nodes/0/properties"), ngpus);
	EQ(entries(TOPO "/nodes/0/io_links"), ngpus);
	EQ(key("heap_type", TOPO "/nodes/0/mem_banks/0/properties"), HSA_MEM_HEAP_TYPE_SYSTEM);
	EQ(key("cwsr_size", TOPO "/nodes/0/properties"), -1);
	for (unsigned i = 0; i < ngpus; i++) {
		EQ(key("node_to", TOPO "/nodes/0/io_links/%u/properties", i), i + 1);
		check_node(i + 1, models[i], 128 + i, minor);
		CHECK(gpu_id(i + 1) != 0, "node %u has gpu_id 0", i + 1);
		for (unsigned j = 0; j < i; j++)
			CHECK(gpu_id(i + 1) != gpu_id(j + 1), "gpu_id %u twice", gpu_id(j + 1));
	}
	/* no more nodes, and only the topology's paths */
	snprintf(buf, sizeof(buf), TOPO "/nodes/%u/gpu_id", ngpus + 1);
	EQ(sys->read_file(buf, buf, sizeof(buf)), -ENOENT);
}

static int stop_at_name(const char *name, void *user)
{
	return !strcmp(name, (const char *)user) ? 7 : 0;
}

static void check_files(void)
{
	char buf[16];
	int p[2];

	EQ(sys->read_file(TOPO "/nodes/9/gpu_id", buf, sizeof(buf)), -ENOENT);
	EQ(sys->read_file(TOPO "/nodes/01/gpu_id", buf, sizeof(buf)), -ENOENT);
	EQ(sys->read_file(TOPO "/nodes/1/caches/7/properties", buf, sizeof(buf)), -ENOENT);
	EQ(sys->read_file(TOPO "/nodes/1/nothing", buf, sizeof(buf)), -ENOENT);
	EQ(sys->read_file("/proc/self/status", buf, sizeof(buf)), -ENOENT);
	EQ(sys->read_file(TOPO "/nodes", buf, sizeof(buf)), -EISDIR);
	EQ(sys->list_dir(TOPO "/generation_id", count_each, &(int){ 0 }), -ENOTDIR);
	EQ(sys->list_dir(TOPO "/nodes/1/nothing", count_each, &(int){ 0 }), -ENOENT);
	EQ(entries(TOPO "/nodes/1/p2p_links"), 0);
	/* each's non-zero value stops the walk and is returned */
	EQ(sys->list_dir(TOPO "/nodes/1", stop_at_name, "caches"), 7);
	/* a short buffer: size - 1 bytes and a NUL */
	EQ(sys->read_file(TOPO "/nodes/1/properties", buf, 5), 4);
	CHECK(!strcmp(buf, "cpu_"), "truncated read gave \"%s\"", buf);

	/* files: /dev/kfd, render nodes of the models, nothing else */
	EQ(sys->open("/dev/dri/renderD130", O_RDWR), -ENOENT);
	EQ(sys->open("/dev/dri/renderD0128", O_RDWR), -ENOENT);
	EQ(sys->open("/dev/dri/card0", O_RDWR), -ENOENT);
	EQ(sys->open("/dev/kfd0", O_RDWR), -ENOENT);
	{
		int a = kfd_open(), b = kfd_open(), r = sys->open("/dev/dri/renderD129", O_RDWR);

		CHECK(a != b && r >= 0 && r != a && r != b, "fds %d %d %d", a, b, r);
		EQ(stats().open_files, 3);
		EQ(sys->close(b), 0);
		EQ(sys->close(b), -EBADF);
		EQ(sys->close(r), 0);
		EQ(sys->close(a), 0);
		EQ(stats().open_files, 0);
	}
	/* a file that is not emulated: its own driver answers */
	CHECK(pipe(p) == 0, "pipe");
	EQ(sys->ioctl(p[0], AMDKFD_IOC_GET_VERSION, buf), -ENOTTY);
	EQ(sys->close(p[0]), -EBADF);
	close(p[0]);
	close(p[1]);
	EQ(sys->ioctl(p[0], AMDKFD_IOC_GET_VERSION, buf), -EBADF);
}

/* kfd_ioctl: range, sizes and direction, the opener's process. */
static void check_dispatch(uint32_t minor)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);
	unsigned char buf[32];
	struct kfd_ioctl_get_version_args v = { 0 };
	struct kfdemu_stats before = stats(), after;
	pid_t child;
	int status;

	EQ(sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	EQ(v.major_version, 1);
	EQ(v.minor_version, minor);
	/* a 4-byte caller gets 4 bytes; a 16-byte one the kernel's 8 and zeros */
	memset(buf, 0xee, sizeof(buf));
	EQ(sys->ioctl(kfd, _IOC(_IOC_READ, 'K', 0x01, 4), buf), 0);
	EQ(buf[0], 1);
	EQ(buf[4], 0xee);
	memset(buf, 0xee, sizeof(buf));
	EQ(sys->ioctl(kfd, _IOC(_IOC_READ | _IOC_WRITE, 'K', 0x01, 16), buf), 0);
	EQ(buf[4], minor);
	EQ(buf[8] | buf[15], 0);
	EQ(buf[16], 0xee);
	/* the number alone picks the ioctl: no type check, the kernel's direction */
	memset(buf, 0, sizeof(buf));
	EQ(sys->ioctl(kfd, _IOW('X', 0x01, struct kfd_ioctl_get_version_args), buf), 0);
	EQ(buf[0], 1);
	/* outside [1, COMMAND_END) */
	EQ(sys->ioctl(kfd, _IOR('K', 0x00, uint64_t), buf), -ENOTTY);
	EQ(sys->ioctl(kfd, _IOR('K', minor >= 13 ? 0x27 : 0x24, uint64_t), buf), -ENOTTY);
	EQ(sys->ioctl(kfd, _IOR('K', 0x80, uint64_t), buf), -ENOTTY);
	/* in range, not modelled yet */
	EQ(sys->ioctl(kfd, AMDKFD_IOC_SET_MEMORY_POLICY, buf), -ENOSYS);
	/* the args copy faults */
	EQ(sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, NULL), -EFAULT);
	EQ(sys->ioctl(kfd, AMDKFD_IOC_ACQUIRE_VM, (void *)16), -EFAULT);
	/* DRM ioctls are not modelled yet */
	EQ(sys->ioctl(render, _IOWR('d', 0x40, uint64_t), buf), -ENOSYS);
	after = stats();
	EQ(after.ioctls[1] - before.ioctls[1], 5);
	EQ(after.ioctls_unemulated - before.ioctls_unemulated, 1);
	EQ(after.ioctls_failed - before.ioctls_failed, 6);
	EQ(after.version_minor, minor);

	/* A forked child cannot use its parent's fd; its own open works. */
	child = fork();
	if (child == 0) {
		struct kfd_ioctl_get_version_args cv = { 0 };
		int own;

		if (sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, &cv) != -EBADF)
			_exit(1);
		own = sys->open("/dev/kfd", O_RDWR);
		if (own < 0 || sys->ioctl(own, AMDKFD_IOC_GET_VERSION, &cv) || cv.major_version != 1)
			_exit(2);
		if (sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, &cv) != -EBADF)
			_exit(3);
		_exit(0);
	}
	CHECK(child > 0 && waitpid(child, &status, 0) == child, "fork");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
	EQ(sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	sys->close(render);
	sys->close(kfd);
}

/* ACQUIRE_VM and what needs the VM, RUNTIME_ENABLE, apertures, XNACK. */
static void check_process(unsigned ngpus, uint32_t minor)
{
	int kfd = kfd_open();
	int r128 = sys->open("/dev/dri/renderD128", O_RDWR);
	int r129 = ngpus > 1 ? sys->open("/dev/dri/renderD129", O_RDWR) : -1;
	int again = sys->open("/dev/dri/renderD128", O_RDWR);
	uint32_t id1 = gpu_id(1), n;
	struct kfd_process_device_apertures pa[3];
	struct kfd_ioctl_set_xnack_mode_args x = { .xnack_enabled = -1 };
	int p[2];

	CHECK(r128 >= 0 && again >= 0, "render opens %d %d", r128, again);
	/* before ACQUIRE_VM: kfd_bind_process_to_device → -ENODEV */
	EQ(scratch(kfd, id1), -ENODEV);
	EQ(scratch(kfd, 0xdead), -EINVAL);
	EQ(stats().vm_acquired, 0);
	EQ(acquire(kfd, r128, 0xdead), -EINVAL);
	EQ(acquire(kfd, 999, id1), -EINVAL);
	CHECK(pipe(p) == 0, "pipe");
	EQ(acquire(kfd, p[0], id1), -EINVAL);
	EQ(acquire(kfd, kfd, id1), -EINVAL);
	if (r129 >= 0)
		EQ(acquire(kfd, r129, id1), -EINVAL);
	EQ(acquire(kfd, r128, id1), 0);
	EQ(acquire(kfd, r128, id1), 0);
	EQ(acquire(kfd, again, id1), -EBUSY);
	EQ(acquire(kfd, p[0], id1), -EBUSY);
	EQ(stats().vm_acquired, 1);
	EQ(scratch(kfd, id1), 0);
	if (r129 >= 0) {
		EQ(scratch(kfd, gpu_id(2)), -ENODEV);
		EQ(acquire(kfd, r129, gpu_id(2)), 0);
		EQ(stats().vm_acquired, 3);
	}
	/* the VM stays when the render fd is closed: the kernel holds the file */
	sys->close(r128);
	EQ(scratch(kfd, id1), 0);
	close(p[0]);
	close(p[1]);

	if (minor >= 13) {
		EQ(runtime(kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK), 0);
		EQ(stats().runtime_enabled, 1);
		EQ(runtime(kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK), -EBUSY);
		EQ(runtime(kfd, 0), 0);
		EQ(stats().runtime_enabled, 0);
		EQ(runtime(kfd, 0), 0);
		EQ(runtime(kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK |
			   KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK), 0);
		EQ(stats().runtime_enabled, 1);
	} else {
		EQ(runtime(kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK), -ENOTTY);
	}

	n = 0;
	EQ(apertures(kfd, NULL, &n), 0);
	EQ(n, ngpus);
	memset(pa, 0xee, sizeof(pa));
	n = ngpus;
	EQ(apertures(kfd, pa, &n), 0);
	EQ(n, ngpus);
	for (unsigned i = 0; i < ngpus; i++) {
		EQ(pa[i].gpu_id, gpu_id(i + 1));
		EQ(pa[i].lds_base, 1ull << 48);
		EQ(pa[i].lds_limit, (1ull << 48) | 0xffffffffull);
		EQ(pa[i].scratch_base, 2ull << 48);
		EQ(pa[i].scratch_limit, (2ull << 48) | 0xffffffffull);
		EQ(pa[i].gpuvm_base, minor >= 15 ? 2ull << 20 : 16ull << 10);
		EQ(pa[i].gpuvm_limit, (1ull << 47) - 1);
		EQ(pa[i].pad, 0);
	}
	if (ngpus > 1) {
		memset(pa, 0xee, sizeof(pa));
		n = 1;
		EQ(apertures(kfd, pa, &n), 0);
		EQ(n, 1);
		EQ(pa[0].gpu_id, id1);
		EQ(pa[1].gpu_id, 0xeeeeeeeeu);
	}
	n = ngpus + 1;
	EQ(apertures(kfd, pa, &n), -EINVAL);
	n = ngpus;
	if (ngpus)
		EQ(apertures(kfd, NULL, &n), -EFAULT);
	if (ngpus && user_copy_checked()) {
		void *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CHECK(gone != MAP_FAILED && munmap(gone, 4096) == 0, "mmap");
		n = ngpus;
		EQ(apertures(kfd, gone, &n), -EFAULT);
	}

	EQ(sys->ioctl(kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
	EQ(x.xnack_enabled, 0);
	x.xnack_enabled = 1;
	EQ(sys->ioctl(kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
	x.xnack_enabled = -1;
	EQ(sys->ioctl(kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
	EQ(x.xnack_enabled, 1);
	EQ(stats().xnack, 1);
	sys->close(again);
	if (r129 >= 0)
		sys->close(r129);
	sys->close(kfd);
}

/* Threads at once: ioctls, opens and closes, topology reads (thread safety
 * is sys.h's contract; TSan runs this). */
static void *hammer(void *arg)
{
	int kfd = *(int *)arg, bad = 0;
	char buf[256];

	for (int i = 0; i < 200; i++) {
		struct kfd_ioctl_get_version_args v = { 0 };
		int fd = sys->open("/dev/dri/renderD128", O_RDWR);

		bad += sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v) != 0 || v.major_version != 1;
		bad += sys->read_file(TOPO "/nodes/1/gpu_id", buf, sizeof(buf)) <= 0;
		bad += fd < 0 || sys->close(fd) != 0;
	}
	return (void *)(intptr_t)bad;
}

static void check_threads(void)
{
	pthread_t t[4];
	int kfd = kfd_open();
	void *bad;

	for (int i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, hammer, &kfd) == 0, "pthread_create");
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &bad);
		EQ((intptr_t)bad, 0);
	}
	EQ(stats().open_files, 1);
	sys->close(kfd);
}

#define MIB (1ull << 20)
#define F(x) KFD_IOC_ALLOC_MEM_FLAGS_##x

static int alloc(int kfd, uint32_t id, uint64_t va, uint64_t size, uint32_t flags,
		 uint64_t *handle, uint64_t *offset)
{
	struct kfd_ioctl_alloc_memory_of_gpu_args a = {
		.va_addr = va, .size = size, .gpu_id = id, .flags = flags,
		.mmap_offset = offset ? *offset : 0,
	};
	int r = sys->ioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);

	if (handle)
		*handle = a.handle;
	if (offset)
		*offset = a.mmap_offset;
	return r;
}

static int free_bo(int kfd, uint64_t handle)
{
	struct kfd_ioctl_free_memory_of_gpu_args a = { .handle = handle };

	return sys->ioctl(kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &a);
}

/* MAP (map != 0) or UNMAP of handle on ids[0..n); *done: n_success in and out. */
static int map_bo(int kfd, int map, uint64_t handle, const uint32_t *ids, uint32_t n,
		  uint32_t *done)
{
	struct kfd_ioctl_map_memory_to_gpu_args a = {
		.handle = handle, .device_ids_array_ptr = (uint64_t)(uintptr_t)ids,
		.n_devices = n, .n_success = done ? *done : 0,
	};
	int r = sys->ioctl(kfd, map ? AMDKFD_IOC_MAP_MEMORY_TO_GPU
				    : AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &a);

	if (done)
		*done = a.n_success;
	return r;
}

static long long available(int kfd, uint32_t id)
{
	struct kfd_ioctl_get_available_memory_args a = { .gpu_id = id };
	int r = sys->ioctl(kfd, AMDKFD_IOC_AVAILABLE_MEMORY, &a);

	return r ? r : (long long)a.available;
}

static struct kfdemu_bo bo_at(void *p)
{
	struct kfdemu_bo b = { 0 };

	CHECK(bo_at_fn(p ? (uint64_t)(uintptr_t)p : 0, &b) == 0, "no BO at %p", p);
	return b;
}

/* A VA range reserved as libhsakmt does: PROT_NONE, through the table. */
static void *reserve(size_t size)
{
	void *p = sys->mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			    -1, 0);

	CHECK((intptr_t)p > 0, "reserve: %ld", (long)(intptr_t)p);
	return p;
}

static void *map_host(int fd, void *va, size_t size, uint64_t offset)
{
	return sys->mmap(va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, offset);
}

/* ALLOC, MAP, UNMAP, FREE, AVAILABLE_MEMORY and the render-node mmap. */
static void check_memory(unsigned ngpus, uint64_t vram)
{
	int kfd = kfd_open(), r128 = sys->open("/dev/dri/renderD128", O_RDWR);
	int other = sys->open("/dev/dri/renderD128", O_RDWR);
	uint32_t id1 = gpu_id(1), id2 = ngpus > 1 ? gpu_id(2) : 0xdead, n, ids[2] = { id1, id2 };
	char *va = reserve(16 * MIB), *host;
	uint64_t h, h_vram, h_pub, h_gtt, h_user, off_vram = 0, off_pub = 0, off_gtt = 0, off;
	struct kfdemu_stats st;
	struct kfdemu_bo b;
	void *user;

	/* kfd_ioctl_alloc_memory_of_gpu, in order */
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, 0, F(VRAM), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, 0xdead, (uint64_t)(uintptr_t)va, MIB, F(VRAM), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, MIB, F(VRAM), NULL, NULL), -ENODEV);
	EQ(available(kfd, 0xdead), -EINVAL);
	EQ(available(kfd, id1), (long long)vram);
	EQ(acquire(kfd, r128, id1), 0);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, 4096, F(DOORBELL), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, 8192, F(MMIO_REMAP), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, MIB, F(WRITABLE), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, MIB, F(USERPTR), NULL, NULL), -EINVAL);

	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, MIB, F(VRAM) | F(WRITABLE), &h_vram, &off_vram), 0);
	EQ(h_vram, (uint64_t)id1 << 32);
	CHECK(off_vram && !(off_vram & 4095), "mmap_offset 0x%llx", (unsigned long long)off_vram);
	/* the emulation's own rule: a VA that holds a BO */
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va + 4096, MIB, F(GTT), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va + MIB, 4096, F(VRAM) | F(PUBLIC), &h_pub, &off_pub), 0);
	EQ(h_pub, (uint64_t)id1 << 32 | 1);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va + 2 * MIB, 100, F(GTT), &h_gtt, &off_gtt), 0);
	EQ(h_gtt, (uint64_t)id1 << 32 | 2);
	/* VRAM counts in 2 MiB steps */
	EQ(available(kfd, id1), (long long)(vram - 4 * MIB));

	/* the render node: exact offset, the ACQUIRE_VM file, CPU access */
	EQ((intptr_t)map_host(r128, va, MIB, off_vram), -EPERM);
	/* inside a BO, not its start: drm_vma_offset_exact_lookup_locked */
	EQ((intptr_t)map_host(r128, va + MIB, 4096, off_vram + 4096), -EINVAL);
	EQ((intptr_t)map_host(r128, va + MIB, 8192, off_pub), -EINVAL);
	EQ((intptr_t)map_host(other, va + MIB, 4096, off_pub), -EACCES);
	EQ((intptr_t)map_host(kfd, va + MIB, 4096, off_pub), -ENOSYS);
	host = map_host(r128, va + MIB, 4096, off_pub);
	CHECK(host == va + MIB, "mmap of the BO at its VA: %p", (void *)host);
	host[7] = 42;
	b = bo_at(va + MIB + 7);
	EQ(b.handle, h_pub);
	EQ(b.domain, KFDEMU_VRAM);
	EQ(b.flags, F(VRAM) | F(PUBLIC));
	EQ(b.size, 4096);
	EQ(b.gpu_id, id1);
	CHECK(b.data && ((char *)b.data)[7] == 42, "the BO's bytes are not the host's");
	host = map_host(r128, va + 2 * MIB, 4096, off_gtt);
	CHECK(host == va + 2 * MIB, "mmap of the GTT BO: %p", (void *)host);
	EQ(bo_at(va + 2 * MIB + 99).domain, KFDEMU_GTT);
	CHECK(bo_at_fn((uint64_t)(uintptr_t)va + 2 * MIB + 100, &b) == -1, "past a BO's size");

	/* DOORBELL and MMIO_REMAP of the right sizes; not mmapped yet */
	off = 0;
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va + 8 * MIB, 8192, F(DOORBELL), &h, &off), 0);
	EQ((intptr_t)sys->mmap(NULL, 8192, PROT_READ, MAP_SHARED, r128, off), -ENOSYS);
	EQ(bo_at(va + 8 * MIB).domain, KFDEMU_DOORBELL);
	EQ(free_bo(kfd, h), 0);
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va + 8 * MIB, 4096, F(MMIO_REMAP), &h, &off), 0);
	EQ(off, (uint64_t)(id1 & 0xffff) << 46);
	EQ(free_bo(kfd, h), 0);

	/* USERPTR: the caller's pages, mapped ones only */
	user = aligned_alloc(4096, 8192);
	CHECK(user != NULL, "aligned_alloc");
	off = (uint64_t)(uintptr_t)user;
	EQ(alloc(kfd, id1, off, 8192, F(USERPTR) | F(WRITABLE) | F(COHERENT), &h_user, &off), 0);
	EQ(off, (uint64_t)(uintptr_t)user);
	b = bo_at(user);
	EQ(b.domain, KFDEMU_USERPTR);
	EQ(b.userptr, off);
	CHECK(b.data == NULL, "USERPTR has no emulation view");
	if (user_copy_checked()) {
		off = (uint64_t)(uintptr_t)va + 4 * MIB;
		EQ(alloc(kfd, id1, off, 4096, F(USERPTR), NULL, &off), -EFAULT);
	}
	st = stats();
	EQ(st.bos, 4);
	EQ(st.bo_bytes[KFDEMU_VRAM], MIB + 4096);
	EQ(st.bo_bytes[KFDEMU_GTT], 4096);
	EQ(st.bo_bytes[KFDEMU_USERPTR], 8192);

	/* kfd_ioctl_map_memory_to_gpu */
	n = 0;
	EQ(map_bo(kfd, 1, h_vram, ids, 0, &n), -EINVAL);
	n = 2;
	EQ(map_bo(kfd, 1, h_vram, ids, 1, &n), -EINVAL);
	n = 0;
	EQ(map_bo(kfd, 1, h_vram, NULL, 1, &n), -EFAULT);
	EQ(map_bo(kfd, 1, (uint64_t)0xdead << 32, ids, 1, &n), -EINVAL);
	EQ(map_bo(kfd, 1, h_vram + 77, ids, 1, &n), -ENOMEM);
	EQ(map_bo(kfd, 1, h_vram, (uint32_t[]){ 0xdead }, 1, &n), -EINVAL);
	EQ(n, 0);
	EQ(map_bo(kfd, 1, h_vram, ids, 1, &n), 0);
	EQ(n, 1);
	EQ(bo_at(va).mapped, 1);
	if (ngpus > 1) {
		/* the peer has no VM yet: the first device stays done */
		n = 0;
		EQ(map_bo(kfd, 1, h_vram, ids, 2, &n), -ENODEV);
		EQ(n, 1);
		EQ(acquire(kfd, sys->open("/dev/dri/renderD129", O_RDWR), id2), 0);
		EQ(map_bo(kfd, 1, h_vram, ids, 2, &n), 0);
		EQ(n, 2);
		EQ(bo_at(va).mapped, 3);
	}
	EQ(free_bo(kfd, h_vram), -EBUSY);
	n = 0;
	EQ(map_bo(kfd, 0, h_vram + 77, ids, 1, &n), -ENOMEM);
	EQ(map_bo(kfd, 0, h_vram, ids, 1, &n), 0);
	EQ(n, 1);
	if (ngpus > 1) {
		EQ(free_bo(kfd, h_vram), -EBUSY);
		EQ(map_bo(kfd, 0, h_vram, ids, 2, &n), 0);
	}
	EQ(bo_at(va).mapped, 0);
	/* unmapping where it is not mapped is nothing to do */
	n = 0;
	EQ(map_bo(kfd, 0, h_vram, ids, 1, &n), 0);

	/* kfd_ioctl_free_memory_of_gpu */
	EQ(free_bo(kfd, (uint64_t)0xdead << 32), -EINVAL);
	EQ(free_bo(kfd, h_vram + 77), -EINVAL);
	EQ(free_bo(kfd, h_vram), 0);
	EQ(free_bo(kfd, h_vram), -EINVAL);
	EQ(available(kfd, id1), (long long)(vram - 2 * MIB));
	/* the freed id is the next one again */
	EQ(alloc(kfd, id1, (uint64_t)(uintptr_t)va, MIB, F(VRAM), &h_vram, NULL), 0);
	EQ(h_vram, (uint64_t)id1 << 32);
	EQ(free_bo(kfd, h_vram), 0);
	EQ(free_bo(kfd, h_pub), 0);
	EQ(free_bo(kfd, h_gtt), 0);
	EQ(free_bo(kfd, h_user), 0);
	st = stats();
	EQ(st.bos, 0);
	EQ(st.bo_bytes[KFDEMU_VRAM] + st.bo_bytes[KFDEMU_GTT] + st.bo_bytes[KFDEMU_USERPTR], 0);
	EQ(available(kfd, id1), (long long)vram);
	CHECK(st.bo_mmaps == 2, "bo_mmaps %llu", (unsigned long long)st.bo_mmaps);
	free(user);
	sys->munmap(va, 16 * MIB);
	sys->close(other);
	sys->close(r128);
	sys->close(kfd);
}

/*
 * fn in a forked child: a process of its own for the emulation (its first
 * open), so that earlier ACQUIRE_VMs of this one do not hold its VMs.
 */
static void in_child(void (*fn)(void), const char *what)
{
	pid_t child;
	int status;

	fflush(NULL);
	child = fork();
	if (child == 0) {
		th_passed = th_failed = 0;
		fn();
		_exit(th_finish() ? 1 : 0);
	}
	CHECK(child > 0 && waitpid(child, &status, 0) == child, "fork for %s", what);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status 0x%x", what, status);
}

static void memory_64g(void)
{
	check_memory(2, 64 * GIB);
}

static void memory_8m(void)
{
	check_memory(2, 8 * MIB);
}

/* Threads allocating, mapping, unmapping and freeing at once. */
static void *churn(void *arg)
{
	int kfd = ((int *)arg)[0], t = ((int *)arg)[1], bad = 0;
	uint32_t id = gpu_id(1);
	uint64_t va = (1ull << 40) + (uint64_t)t * (1ull << 32);

	for (int i = 0; i < 100; i++) {
		uint64_t h;
		uint32_t n = 0;

		bad += alloc(kfd, id, va, 8192, i & 1 ? F(VRAM) : F(GTT), &h, NULL) != 0;
		bad += map_bo(kfd, 1, h, &id, 1, &n) != 0 || n != 1;
		bad += free_bo(kfd, h) != -EBUSY;
		n = 0;
		bad += map_bo(kfd, 0, h, &id, 1, &n) != 0;
		bad += free_bo(kfd, h) != 0;
	}
	return (void *)(intptr_t)bad;
}

static void check_memory_threads(void)
{
	pthread_t t[4];
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR), args[4][2];
	void *bad;

	EQ(acquire(kfd, render, gpu_id(1)), 0);
	for (int i = 0; i < 4; i++) {
		args[i][0] = kfd;
		args[i][1] = i;
		CHECK(pthread_create(&t[i], NULL, churn, args[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &bad);
		EQ((intptr_t)bad, 0);
	}
	EQ(stats().bos, 0);
	EQ(available(kfd, gpu_id(1)), 64 * GIB);
	sys->close(render);
	sys->close(kfd);
}

/* Events (events.c): the event page, the event kinds, SET/RESET, WAIT_EVENTS
 * with and without the 1.14 event age, and what the CP raises. */
static kfdemu_event_interrupt_fn interrupt_fn;
static kfdemu_vm_fault_fn vm_fault_fn;
static kfdemu_queue_exception_fn queue_exception_fn;
static kfdemu_gpu_reset_fn gpu_reset_fn;

static int create_event(int kfd, uint32_t type, int auto_reset, uint64_t page,
			struct kfd_ioctl_create_event_args *out)
{
	struct kfd_ioctl_create_event_args a = { .event_page_offset = page, .event_type = type,
						 .auto_reset = (uint32_t)auto_reset };
	int r = sys->ioctl(kfd, AMDKFD_IOC_CREATE_EVENT, &a);

	if (out)
		*out = a;
	return r;
}

static int event_op(int kfd, unsigned long cmd, uint32_t id)
{
	struct kfd_ioctl_set_event_args a = { .event_id = id };

	return sys->ioctl(kfd, cmd, &a);
}

/* WAIT_EVENTS on one event: -errno or 0, *result the wait_result; *age
 * in (0: none) and out. */
static int wait1(int kfd, uint32_t id, uint32_t timeout, uint64_t *age, uint32_t *result,
		 struct kfd_event_data *out)
{
	struct kfd_event_data d = { .event_id = id };
	struct kfd_ioctl_wait_events_args a = { .events_ptr = (uint64_t)(uintptr_t)&d,
						.num_events = 1, .timeout = timeout };
	int r;

	if (age)
		memcpy(&d, age, sizeof(*age));
	r = sys->ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &a);
	if (age)
		memcpy(age, &d, sizeof(*age));
	*result = a.wait_result;
	if (out)
		*out = d;
	return r;
}

struct waiting {
	int kfd;
	uint32_t id, result;
	int r;
	struct kfd_event_data data;
};

static void *wait_thread(void *arg)
{
	struct waiting *w = arg;

	w->r = wait1(w->kfd, w->id, 0xffffffffu, NULL, &w->result, &w->data);
	return NULL;
}

/* Until n WAIT_EVENTS calls are asleep (bounded). */
static void sleepers(uint32_t n)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (stats().event_sleepers != n && th_now_ns() < end)
		th_sleep_ms(1);
	EQ(stats().event_sleepers, n);
}

static void check_events(uint32_t minor)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);
	uint32_t id1 = gpu_id(1), res, n = 1;
	char *va = reserve(4 * MIB);
	uint64_t h_page, h_small, h_user, off = 0, age, payload = 4;
	struct kfd_ioctl_create_event_args sig, man, mem, hw, d_ev;
	volatile uint64_t *slots;
	struct waiting w;
	pthread_t t;
	uint64_t t0;
	void *user = malloc(8192);

	EQ(acquire(kfd, render, id1), 0);
	EQ(alloc(kfd, id1, (uintptr_t)va, 32768, F(GTT) | F(WRITABLE), &h_page, &off), 0);
	CHECK(map_host(render, va, 32768, off) == va, "event page mmap");
	EQ(map_bo(kfd, 1, h_page, &id1, 1, &n), 0);
	off = 0;
	EQ(alloc(kfd, id1, (uintptr_t)va + MIB, 16384, F(GTT), &h_small, &off), 0);
	off = (uint64_t)(uintptr_t)user;
	EQ(alloc(kfd, id1, (uintptr_t)va + 2 * MIB, 8192, F(USERPTR), &h_user, &off), 0);
	slots = (volatile uint64_t *)va;
	memset(va, 0, 32768);

	/* kfd_kmap_event_page's refusals, in its order */
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0xdeadull << 32, NULL), -EINVAL);
	if (stats().gpus > 1)
		EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, (uint64_t)gpu_id(2) << 32, NULL),
		   -ENODEV);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, h_page + 100, NULL), -EINVAL);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, h_user, NULL), -EINVAL);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, h_small, NULL), -EINVAL);
	EQ(stats().event_slots, 0);

	/* the page, with the first signal event: slot 0 is reserved */
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, h_page, &sig), 0);
	EQ(sig.event_id, 1);
	EQ(sig.event_slot_index, 1);
	EQ(sig.event_trigger_data, 1);
	EQ(sig.event_page_offset, 2ull << 62);
	EQ(stats().event_slots, 4096);
	EQ(slots[0], -1);
	EQ(slots[4095], -1);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, h_page, NULL), -EINVAL);
	EQ(free_bo(kfd, h_page), -EPERM);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 0, 0, &man), 0);
	EQ(man.event_id, 2);
	EQ(create_event(kfd, KFD_IOC_EVENT_MEMORY, 0, 0, &mem), 0);
	EQ(mem.event_id, 0x40000000);
	EQ(mem.event_page_offset, 0);
	EQ(create_event(kfd, KFD_IOC_EVENT_HW_EXCEPTION, 0, 0, &hw), 0);
	EQ(hw.event_id, 0x40000001);

	/* SET/RESET: only SIGNAL events */
	EQ(event_op(kfd, AMDKFD_IOC_SET_EVENT, mem.event_id), -EINVAL);
	EQ(event_op(kfd, AMDKFD_IOC_RESET_EVENT, hw.event_id), -EINVAL);
	EQ(event_op(kfd, AMDKFD_IOC_SET_EVENT, 77), -EINVAL);
	EQ(event_op(kfd, AMDKFD_IOC_DESTROY_EVENT, 77), -EINVAL);

	/* auto-reset: a set with no waiter stays for one waiter */
	EQ(event_op(kfd, AMDKFD_IOC_SET_EVENT, sig.event_id), 0);
	EQ(wait1(kfd, sig.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(wait1(kfd, sig.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_TIMEOUT);
	/* manual reset: stays until RESET */
	EQ(event_op(kfd, AMDKFD_IOC_SET_EVENT, man.event_id), 0);
	EQ(wait1(kfd, man.event_id, 0, NULL, &res, NULL), 0);
	EQ(wait1(kfd, man.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(event_op(kfd, AMDKFD_IOC_RESET_EVENT, man.event_id), 0);
	EQ(wait1(kfd, man.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_TIMEOUT);

	/* WAIT_EVENTS' refusals and its timeout */
	EQ(wait1(kfd, 77, 0, NULL, &res, NULL), -EINVAL);
	EQ(res, KFD_IOC_WAIT_RESULT_FAIL);
	{
		struct kfd_ioctl_wait_events_args a = { .events_ptr = 8, .num_events = 1 };

		EQ(sys->ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &a), -EFAULT);
	}
	t0 = th_now_ns();
	EQ(wait1(kfd, sig.event_id, 30, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_TIMEOUT);
	CHECK(th_now_ns() - t0 >= 25000000, "a 30 ms wait returned after %llu ns",
	      (unsigned long long)(th_now_ns() - t0));

	/* the event age: from 1.14 an age that differs returns at once */
	age = 1;
	EQ(event_op(kfd, AMDKFD_IOC_SET_EVENT, sig.event_id), 0);
	EQ(wait1(kfd, sig.event_id, 0, NULL, &res, NULL), 0);
	EQ(wait1(kfd, sig.event_id, 0, &age, &res, NULL), 0);
	EQ(res, minor >= 14 ? KFD_IOC_WAIT_RESULT_COMPLETE : KFD_IOC_WAIT_RESULT_TIMEOUT);
	EQ(age, minor >= 14 ? 3 : 1);
	EQ(wait1(kfd, sig.event_id, 0, &age, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_TIMEOUT);

	/* the CP: value, mailbox, then the interrupt wakes the sleeper */
	w = (struct waiting){ .kfd = kfd, .id = sig.event_id };
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers(1);
	EQ(interrupt_fn(id1, sig.event_id), -ENOENT);
	slots[sig.event_id] = sig.event_id;
	EQ(interrupt_fn(0xdead, sig.event_id), -EINVAL);
	EQ(interrupt_fn(id1, sig.event_id), 0);
	pthread_join(t, NULL);
	EQ(w.r, 0);
	EQ(w.result, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(slots[sig.event_id], -1);
	/* a wrong context id: the slots that are signaled are found */
	slots[sig.event_id] = sig.event_id;
	EQ(interrupt_fn(id1, 4000), 0);
	EQ(slots[sig.event_id], -1);
	EQ(wait1(kfd, sig.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);

	/* a VM fault sets the MEMORY event with its data */
	w = (struct waiting){ .kfd = kfd, .id = mem.event_id };
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers(1);
	vm_fault_fn(id1, 0x7654321, 1, 0);
	pthread_join(t, NULL);
	EQ(w.r, 0);
	EQ(w.result, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(w.data.memory_exception_data.va, 0x7654000);
	EQ(w.data.memory_exception_data.gpu_id, id1);
	EQ(w.data.memory_exception_data.failure.ReadOnly, 1);
	EQ(w.data.memory_exception_data.failure.NotPresent, 0);

	/* a GPU reset sets the HW_EXCEPTION event (manual reset here) and,
	 * with ECC, the MEMORY event with the error */
	gpu_reset_fn(id1, 1);
	EQ(wait1(kfd, hw.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(wait1(kfd, hw.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(wait1(kfd, mem.event_id, 0, NULL, &res, &w.data), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(w.data.memory_exception_data.ErrorType, KFD_MEM_ERR_SRAM_ECC);
	EQ(w.data.memory_exception_data.failure.imprecise, 1);

	/* destroying an event fails its waiters with -EIO */
	w = (struct waiting){ .kfd = kfd, .id = man.event_id };
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers(1);
	EQ(event_op(kfd, AMDKFD_IOC_DESTROY_EVENT, man.event_id), 0);
	pthread_join(t, NULL);
	EQ(w.r, -EIO);
	EQ(w.result, KFD_IOC_WAIT_RESULT_FAIL);
	EQ(stats().event_sleepers, 0);

	/* a queue's exception: OR-ed into its payload, its event set */
	EQ(queue_exception_fn((uintptr_t)&payload, sig.event_id, 1), 0);
	EQ(payload, 5);
	EQ(wait1(kfd, sig.event_id, 0, NULL, &res, NULL), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(queue_exception_fn((uintptr_t)&payload, mem.event_id, 2), -EINVAL);
	EQ(queue_exception_fn(8, sig.event_id, 2), -EFAULT);

	/* 4096 slots less the reserved one: -ENOSPC, then a freed id again */
	for (uint32_t i = 2; i < 4096; i++)
		EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0, &d_ev), 0);
	EQ(d_ev.event_id, 4095);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0, NULL), -ENOSPC);
	EQ(create_event(kfd, KFD_IOC_EVENT_MEMORY, 0, 0, NULL), 0);
	EQ(event_op(kfd, AMDKFD_IOC_DESTROY_EVENT, 77), 0);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0, &d_ev), 0);
	EQ(d_ev.event_id, 77);
	EQ(stats().events, 4095 + 3);
	sys->close(render);
	sys->close(kfd);
	free(user);
}

/* No page with the first signal event: the kernel's own 256 slots, and
 * no page after that. */
static void check_events_kernel_page(void)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);
	struct kfd_ioctl_create_event_args a;
	uint64_t h, off = 0;
	char *va = reserve(MIB);

	EQ(acquire(kfd, render, gpu_id(1)), 0);
	EQ(alloc(kfd, gpu_id(1), (uintptr_t)va, 32768, F(GTT), &h, &off), 0);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0, &a), 0);
	EQ(a.event_slot_index, 1);
	EQ(stats().event_slots, 256);
	for (int i = 2; i < 256; i++)
		EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0, NULL), 0);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, 0, NULL), -ENOSPC);
	EQ(create_event(kfd, KFD_IOC_EVENT_SIGNAL, 1, h, NULL), -EINVAL);
	EQ(free_bo(kfd, h), 0);
	sys->close(render);
	sys->close(kfd);
}

static void events_default(void)
{
	check_events(18);
}

static void events_1_11(void)
{
	check_events(11);
}

/* Events on 1.18 (with the event age) and 1.11 (without). */
static void case_events(void)
{
	void *h = dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD);

	*(void **)&interrupt_fn = dlsym(h, "kfdemu_event_interrupt");
	*(void **)&vm_fault_fn = dlsym(h, "kfdemu_vm_fault");
	*(void **)&queue_exception_fn = dlsym(h, "kfdemu_queue_exception");
	*(void **)&gpu_reset_fn = dlsym(h, "kfdemu_gpu_reset");
	if (!interrupt_fn || !vm_fault_fn || !queue_exception_fn || !gpu_reset_fn)
		th_stop("the kfdemu event hooks are missing");
	in_child(stats().version_minor >= 14 ? events_default : events_1_11, "check_events");
	in_child(check_events_kernel_page, "check_events_kernel_page");
}

static void case_default(void)
{
	static const char *models[] = { "gfx90a", "gfx942" };

	CHECK(!strcmp(sys->name, "kfd-emu 1.18 gfx90a,gfx942"), "name %s", sys->name);
	EQ(stats().gpus, 2);
	check_topology(models, 2, 18);
	check_files();
	check_dispatch(18);
	check_process(2, 18);
	check_threads();
	in_child(memory_64g, "check_memory");
	in_child(check_memory_threads, "check_memory_threads");
}

/* AQL_KFD_EMU_VRAM: a small VRAM, and -ENOMEM past it. */
static void case_vram(void)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);
	uint64_t h[3], base = 1ull << 40;

	EQ(key("size_in_bytes", TOPO "/nodes/1/mem_banks/0/properties"), 8 * MIB);
	in_child(memory_8m, "check_memory");
	EQ(acquire(kfd, render, gpu_id(1)), 0);
	EQ(alloc(kfd, gpu_id(1), base, 4 * MIB, F(VRAM), &h[0], NULL), 0);
	EQ(alloc(kfd, gpu_id(1), base + 4 * MIB, 3 * MIB, F(VRAM), &h[1], NULL), 0);
	EQ(available(kfd, gpu_id(1)), 0);
	EQ(alloc(kfd, gpu_id(1), base + 8 * MIB, 4096, F(VRAM), NULL, NULL), -ENOMEM);
	EQ(alloc(kfd, gpu_id(1), base + 8 * MIB, ~0ull - 4095, F(VRAM), NULL, NULL), -ENOMEM);
	/* GTT is not VRAM */
	EQ(alloc(kfd, gpu_id(1), base + 8 * MIB, 4096, F(GTT), &h[2], NULL), 0);
	EQ(free_bo(kfd, h[1]), 0);
	EQ(available(kfd, gpu_id(1)), 4 * MIB);
	EQ(free_bo(kfd, h[0]), 0);
	EQ(free_bo(kfd, h[2]), 0);
	sys->close(render);
	sys->close(kfd);
}

/* AQL_KFD_EMU_BAR=small: VRAM is FB_PRIVATE, host-visible VRAM refused. */
static void case_small_bar(void)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);
	uint64_t h, off = 0, base = 1ull << 40;
	void *va;

	EQ(key("heap_type", TOPO "/nodes/1/mem_banks/0/properties"), HSA_MEM_HEAP_TYPE_FB_PRIVATE);
	/* before the VM check */
	EQ(alloc(kfd, gpu_id(1), base, MIB, F(VRAM) | F(PUBLIC), NULL, NULL), -EINVAL);
	EQ(acquire(kfd, render, gpu_id(1)), 0);
	EQ(alloc(kfd, gpu_id(1), base, MIB, F(VRAM) | F(PUBLIC) | F(EXECUTABLE), NULL, NULL), -EINVAL);
	/* the loader's way on a small BAR: GTT, host-visible */
	va = reserve(MIB);
	EQ(alloc(kfd, gpu_id(1), (uint64_t)(uintptr_t)va, MIB, F(GTT) | F(EXECUTABLE), &h, &off), 0);
	CHECK(map_host(render, va, MIB, off) == va, "GTT mmap");
	EQ(free_bo(kfd, h), 0);
	sys->munmap(va, MIB);
	sys->close(render);
	sys->close(kfd);
}

/* AQL_KFD_EMU_FAIL=alloc_enomem:2: the third ALLOC and later fail. */
static void case_alloc_enomem(void)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);
	uint64_t base = 1ull << 40;

	EQ(acquire(kfd, render, gpu_id(1)), 0);
	/* refusals before the allocator do not count */
	EQ(alloc(kfd, gpu_id(1), base, MIB, F(WRITABLE), NULL, NULL), -EINVAL);
	EQ(alloc(kfd, gpu_id(1), base, MIB, F(VRAM), NULL, NULL), 0);
	EQ(alloc(kfd, gpu_id(1), base + MIB, MIB, F(GTT), NULL, NULL), 0);
	EQ(alloc(kfd, gpu_id(1), base + 2 * MIB, MIB, F(GTT), NULL, NULL), -ENOMEM);
	EQ(alloc(kfd, gpu_id(1), base + 2 * MIB, MIB, F(VRAM), NULL, NULL), -ENOMEM);
	EQ(stats().bos, 2);
	sys->close(render);
	sys->close(kfd);
}

/* AQL_KFD_EMU_VERSION set in the environment. */
static void case_version(void)
{
	static const char *models[] = { "gfx90a", "gfx942" };
	unsigned minor = (unsigned)atoi(strchr(getenv("AQL_KFD_EMU_VERSION"), '.') + 1);
	unsigned ngpus = minor >= 13 ? 2 : 1;
	int kfd;

	check_topology(models, ngpus, minor);
	check_dispatch(minor);
	check_process(ngpus, minor);
	if (minor < 13) {
		kfd = kfd_open();
		/* 1.11: AVAILABLE_MEMORY (0x23) is the last ioctl; gpu_id 0 is unknown */
		EQ(sys->ioctl(kfd, _IOWR('K', 0x23, uint64_t[2]), &(uint64_t[2]){ 0 }), -EINVAL);
		EQ(sys->ioctl(kfd, _IOWR('K', 0x24, uint64_t[2]), &(uint64_t[2]){ 0 }), -ENOTTY);
		sys->close(kfd);
	}
}

/* Another major version: reported as set, for the agent to refuse. */
static void case_major(void)
{
	int kfd = kfd_open();
	struct kfd_ioctl_get_version_args v = { 0 };

	EQ(sys->ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	EQ(v.major_version, 2);
	EQ(v.minor_version, 0);
	EQ(entries(TOPO "/nodes"), 3);
	sys->close(kfd);
}

static void case_nogpu(void)
{
	int kfd = kfd_open();
	uint32_t n = 5;

	check_topology(NULL, 0, 18);
	EQ(sys->open("/dev/dri/renderD128", O_RDWR), -ENOENT);
	EQ(apertures(kfd, NULL, &(uint32_t){ 0 }), 0);
	EQ(apertures(kfd, NULL, &n), -EINVAL);
	CHECK(!strcmp(sys->name, "kfd-emu 1.18"), "name %s", sys->name);
	sys->close(kfd);
}

static void case_gfx942(void)
{
	static const char *models[] = { "gfx942", "gfx942" };

	check_topology(models, 2, 18);
	check_process(2, 18);
}

/* A GPU aql does not support, beside one it does: gfx8 values and apertures. */
static void case_gfx803(void)
{
	static const char *models[] = { "gfx90a" };
	const char *props = TOPO "/nodes/2/properties";
	struct kfd_process_device_apertures pa[2];
	uint32_t n = 2;
	long long cap = key("capability", "%s", props);
	int kfd, render;
	char name[16];

	EQ(entries(TOPO "/nodes"), 3);
	check_node(1, models[0], 128, 18);
	EQ(key("gfx_target_version", "%s", props), 80003);
	EQ(key("drm_render_minor", "%s", props), 129);
	EQ((cap & HSA_CAP_DOORBELL_TYPE_TOTALBITS_MASK) >> HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT,
	   HSA_CAP_DOORBELL_TYPE_1_0);
	EQ(cap & (HSA_CAP_SRAM_EDCSUPPORTED | HSA_CAP_SVMAPI_SUPPORTED | 0x8000), 0);
	EQ(key("num_xcc", "%s", props), 1);
	/* kfd_queue_ctx_save_restore_size: 64 CUs, 2048 waves, VGPR 0x40000 */
	EQ(key("ctl_stack_size", "%s", props), 20480);
	EQ(key("cwsr_size", "%s", props), 22302720);
	CHECK(sys->read_file(TOPO "/nodes/2/name", name, sizeof(name)) > 0 &&
	      !strcmp(name, "fiji\n"), "name %s", name);

	kfd = kfd_open();
	render = sys->open("/dev/dri/renderD129", O_RDWR);
	EQ(acquire(kfd, render, gpu_id(2)), 0);
	EQ(apertures(kfd, pa, &n), 0);
	EQ(n, 2);
	EQ(pa[0].lds_base, 1ull << 48);
	EQ(pa[1].gpu_id, gpu_id(2));
	EQ(pa[1].lds_base, 1ull << 61);
	EQ(pa[1].scratch_base, (1ull << 61) + (1ull << 32));
	EQ(pa[1].scratch_limit, (1ull << 61) + (1ull << 32) + 0xffffffffull);
	EQ(pa[1].gpuvm_limit, (1ull << 40) - 1);
	sys->close(render);
	sys->close(kfd);
}

static void case_no_kfd(void)
{
	EQ(sys->open("/dev/kfd", O_RDWR), -ENOENT);
	EQ(stats().kfd_opens, 0);
	/* the topology is still there, as sysfs is without access to /dev/kfd */
	EQ(entries(TOPO "/nodes"), 3);
}

static void case_kfd_eacces(void)
{
	EQ(sys->open("/dev/kfd", O_RDWR), -EACCES);
	EQ(stats().open_files, 0);
}

static void case_render_eacces(void)
{
	int kfd = kfd_open();

	EQ(sys->open("/dev/dri/renderD128", O_RDWR), -EACCES);
	EQ(sys->open("/dev/dri/renderD129", O_RDWR), -EACCES);
	sys->close(kfd);
}

static void case_faults(void)
{
	int kfd = kfd_open(), render = sys->open("/dev/dri/renderD128", O_RDWR);

	EQ(acquire(kfd, render, gpu_id(1)), -ENOMEM);
	EQ(stats().vm_acquired, 0);
	EQ(scratch(kfd, gpu_id(1)), -ENODEV);
	EQ(runtime(kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK), -EEXIST);
	EQ(stats().runtime_enabled, 0);
	EQ(runtime(kfd, 0), 0);
	sys->close(render);
	sys->close(kfd);
}

static void case_xnack(void)
{
	int kfd = kfd_open();
	struct kfd_ioctl_set_xnack_mode_args x = { .xnack_enabled = -1 };

	EQ(sys->ioctl(kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
	EQ(x.xnack_enabled, 1);
	sys->close(kfd);
}

/* A setting that cannot be read: every open and read is refused. */
static void case_bad_setting(void)
{
	char buf[64];
	struct kfdemu_stats s = stats();

	CHECK(s.config_error[0], "no error for a bad setting");
	EQ(s.gpus, 0);
	EQ(sys->open("/dev/kfd", O_RDWR), -EINVAL);
	EQ(sys->read_file(TOPO "/generation_id", buf, sizeof(buf)), -EINVAL);
	EQ(sys->list_dir(TOPO, count_each, &(int){ 0 }), -EINVAL);
}

/*
 * User queues and the emulated CP (queue.c, cp.c). A fixture builds what
 * the AMD agent builds for a queue: ring and amd_queue_t as USERPTR BOs
 * of whole pages, EOP and CWSR in VRAM of the node's sizes, a page of
 * signals, all mapped on the GPU; the test then writes packets into the
 * ring and rings the doorbell through the /dev/kfd mapping, as the
 * agent's producers do.
 */
#define RING_BYTES 4096u
#define DOORBELL_TYPE (3ull << 62)	/* kfd_priv.h KFD_MMAP_TYPE_DOORBELL */
#define RING_PACKETS (RING_BYTES / 64)

struct qfix {
	int kfd, render;
	uint32_t id;
	aql_packet *ring;
	aql_amd_queue *amd;
	aql_signal *sig;		/* 64 signals */
	uint64_t *mailbox;		/* in the signals' page */
	char *vram;			/* the reserved VA of EOP and CWSR */
	uint64_t h_ring, h_amd, h_sig, h_eop, h_cwsr;
	uint32_t cwsr_size, ctl_size;
	uint64_t cwsr_total;
	struct kfd_ioctl_create_queue_args args;
	uint64_t *bells;		/* the doorbell slice, mapped */
};

/* The node's CWSR sizes: per XCC and the whole BO (kfd_queue.c). */
static void cwsr_of(const char *model, uint32_t *cwsr, uint32_t *ctl, uint64_t *total)
{
	/* plan §5's numbers */
	if (!strcmp(model, "gfx942")) {
		*cwsr = 0x1621000;
		*ctl = 0x3000;
		*total = 0xB167000;
	} else {
		*cwsr = 0x400F000;
		*ctl = 0x9000;
		*total = 0x402F000;
	}
}

static void *host_pages(size_t size)
{
	void *p = sys->mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK((intptr_t)p > 0, "mmap: %ld", (long)(intptr_t)p);
	return p;
}

static uint64_t userptr(struct qfix *f, void *p, uint64_t size)
{
	uint64_t h = 0, off = (uint64_t)(uintptr_t)p;
	uint32_t n = 0;

	EQ(alloc(f->kfd, f->id, off, size, F(USERPTR) | F(WRITABLE), &h, &off), 0);
	EQ(map_bo(f->kfd, 1, h, &f->id, 1, &n), 0);
	return h;
}

static uint64_t vram_bo(struct qfix *f, char *va, uint64_t size)
{
	uint64_t h = 0;
	uint32_t n = 0;

	EQ(alloc(f->kfd, f->id, (uint64_t)(uintptr_t)va, size, F(VRAM) | F(WRITABLE), &h, NULL), 0);
	EQ(map_bo(f->kfd, 1, h, &f->id, 1, &n), 0);
	return h;
}

static void fix_open(struct qfix *f, const char *model)
{
	memset(f, 0, sizeof(*f));
	f->kfd = kfd_open();
	f->render = sys->open("/dev/dri/renderD128", O_RDWR);
	f->id = gpu_id(1);
	EQ(acquire(f->kfd, f->render, f->id), 0);
	cwsr_of(model, &f->cwsr_size, &f->ctl_size, &f->cwsr_total);
	f->ring = host_pages(RING_BYTES);
	f->amd = host_pages(4096);
	f->sig = host_pages(4096);
	f->mailbox = (uint64_t *)(f->sig + 63);
	f->vram = reserve(f->cwsr_total + 2 * MIB);
	f->h_ring = userptr(f, f->ring, RING_BYTES);
	f->h_amd = userptr(f, f->amd, 4096);
	f->h_sig = userptr(f, f->sig, 4096);
	f->h_eop = vram_bo(f, f->vram, 4096);
	f->h_cwsr = vram_bo(f, f->vram + MIB, f->cwsr_total);
	for (uint32_t i = 0; i < RING_PACKETS; i++)
		f->ring[i].header = AQL_PACKET_INVALID;
	f->args = (struct kfd_ioctl_create_queue_args){
		.ring_base_address = (uintptr_t)f->ring,
		.write_pointer_address = (uintptr_t)&f->amd->write_dispatch_id,
		.read_pointer_address = (uintptr_t)&f->amd->read_dispatch_id,
		.ring_size = RING_BYTES, .gpu_id = f->id,
		.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, .queue_percentage = 100,
		.queue_priority = 7, .eop_buffer_address = (uintptr_t)f->vram,
		.eop_buffer_size = 4096, .ctx_save_restore_address = (uintptr_t)(f->vram + MIB),
		.ctx_save_restore_size = f->cwsr_size, .ctl_stack_size = f->ctl_size,
	};
}

static int create(struct qfix *f, struct kfd_ioctl_create_queue_args *a)
{
	return sys->ioctl(f->kfd, AMDKFD_IOC_CREATE_QUEUE, a);
}

static int destroy(struct qfix *f, uint32_t queue_id)
{
	struct kfd_ioctl_destroy_queue_args a = { .queue_id = queue_id };

	return sys->ioctl(f->kfd, AMDKFD_IOC_DESTROY_QUEUE, &a);
}

/* A CREATE_QUEUE with one field changed by fn: its result. */
static int create_with(struct qfix *f, void (*fn)(struct kfd_ioctl_create_queue_args *))
{
	struct kfd_ioctl_create_queue_args a = f->args;

	fn(&a);
	return create(f, &a);
}

static void bad_percent(struct kfd_ioctl_create_queue_args *a) { a->queue_percentage = 101; }
static void xcc_percent(struct kfd_ioctl_create_queue_args *a) { a->queue_percentage = 0x164; }
static void bad_priority(struct kfd_ioctl_create_queue_args *a) { a->queue_priority = 16; }
static void bad_ring(struct kfd_ioctl_create_queue_args *a) { a->ring_base_address = 1ull << 47; }
static void ring_not_pow2(struct kfd_ioctl_create_queue_args *a) { a->ring_size = 3000; }
static void ring_half(struct kfd_ioctl_create_queue_args *a) { a->ring_size = RING_BYTES / 2; }
static void ring_small(struct kfd_ioctl_create_queue_args *a) { a->ring_size = 512; }
static void ring_double(struct kfd_ioctl_create_queue_args *a) { a->ring_size = RING_BYTES * 2; }
static void bad_rptr(struct kfd_ioctl_create_queue_args *a) { a->read_pointer_address = ~0ull; }
static void bad_wptr(struct kfd_ioctl_create_queue_args *a) { a->write_pointer_address = 1ull << 60; }
static void bad_eop_va(struct kfd_ioctl_create_queue_args *a) { a->eop_buffer_address = 1ull << 63; }
static void bad_cwsr_va(struct kfd_ioctl_create_queue_args *a) { a->ctx_save_restore_address = 1ull << 50; }
static void bad_type(struct kfd_ioctl_create_queue_args *a) { a->queue_type = 7; }
static void pm4_type(struct kfd_ioctl_create_queue_args *a) { a->queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE; }
static void bad_gpu(struct kfd_ioctl_create_queue_args *a) { a->gpu_id = 0xdead; }
static void eop_size(struct kfd_ioctl_create_queue_args *a) { a->eop_buffer_size = 8192; }
static void eop_unmapped(struct kfd_ioctl_create_queue_args *a) { a->eop_buffer_address += 4096 * 4; }
static void ctl_size(struct kfd_ioctl_create_queue_args *a) { a->ctl_stack_size += 4096; }
static void cwsr_small(struct kfd_ioctl_create_queue_args *a) { a->ctx_save_restore_size -= 4096; }
static void cwsr_large(struct kfd_ioctl_create_queue_args *a) { a->ctx_save_restore_size += 4096; }

static void *doorbells(struct qfix *f, uint64_t offset)
{
	return sys->mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, f->kfd, offset & ~0x1fffull);
}

/* CREATE/DESTROY/UPDATE_QUEUE and the doorbell mmap, refusals first. */
static void check_queue_rules(const char *model, int checks)
{
	struct qfix f;
	struct kfd_ioctl_create_queue_args a;
	struct kfd_ioctl_update_queue_args u;
	uint64_t base = DOORBELL_TYPE;
	uint32_t n;
	void *bell;

	fix_open(&f, model);
	base |= (uint64_t)(f.id & 0xffff) << 46;
	/* no doorbells before the first queue (1.14+), a wrong length, an
	 * unknown GPU */
	EQ((intptr_t)doorbells(&f, base), -ENOMEM);
	EQ((intptr_t)sys->mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, f.kfd, base), -EINVAL);
	EQ((intptr_t)doorbells(&f, DOORBELL_TYPE | 0x1234ull << 46), -ENODEV);

	/* set_queue_properties_from_user, then the device, then the buffers */
	EQ(create_with(&f, bad_percent), -EINVAL);
	EQ(create_with(&f, bad_priority), -EINVAL);
	EQ(create_with(&f, bad_ring), -EFAULT);
	EQ(create_with(&f, ring_not_pow2), -EINVAL);
	EQ(create_with(&f, bad_rptr), -EFAULT);
	EQ(create_with(&f, bad_wptr), -EFAULT);
	EQ(create_with(&f, bad_eop_va), -EFAULT);
	EQ(create_with(&f, bad_cwsr_va), -EFAULT);
	EQ(create_with(&f, bad_type), -524);
	EQ(create_with(&f, pm4_type), -ENOSYS);
	EQ(create_with(&f, bad_gpu), -EINVAL);
	a = f.args;
	a.gpu_id = gpu_id(2);
	EQ(create(&f, &a), -ESRCH);
	if (checks >= 612) {
		EQ(create_with(&f, ring_double), -EINVAL);
		/* a pointer inside a BO, not at the start of its mapping */
		a = f.args;
		a.read_pointer_address = (uintptr_t)(f.vram + MIB + 8192);
		EQ(create(&f, &a), -EINVAL);
		EQ(create_with(&f, eop_size), -EINVAL);
		EQ(create_with(&f, eop_unmapped), -EINVAL);
		EQ(create_with(&f, ctl_size), -EINVAL);
		EQ(create_with(&f, cwsr_small), -EINVAL);
		/* 6.12 wants the node's size; later kernels at least it, with
		 * a BO of the larger total: this one is the node's */
		EQ(create_with(&f, cwsr_large), -EINVAL);
		/* the refusals took no reference: the ring unmaps and maps back */
		n = 0;
		EQ(map_bo(f.kfd, 0, f.h_ring, &f.id, 1, &n), 0);
		EQ(create(&f, &f.args), -EINVAL);
		n = 0;
		EQ(map_bo(f.kfd, 1, f.h_ring, &f.id, 1, &n), 0);
	}
	EQ(stats().queues, 0);

	/* Two queues: ids and doorbells in order; the 96-byte struct of
	 * 1.17+ works as the 88-byte one; the XCC bits of the percentage
	 * are not a percentage. */
	a = f.args;
	EQ(create(&f, &a), 0);
	EQ(a.queue_id, 0);
	EQ(a.doorbell_offset, base);
	{
		unsigned char big[96] = { 0 };

		memcpy(big, &f.args, sizeof(f.args));
		EQ(sys->ioctl(f.kfd, _IOWR('K', 0x02, unsigned char[96]), big), 0);
		memcpy(&a, big, sizeof(a));
		EQ(a.queue_id, 1);
		EQ(a.doorbell_offset, base | 8);
	}
	EQ(create_with(&f, xcc_percent), 0);
	/* below a page only the ring's start is checked (expected_size >> 12
	 * is 0): a smaller ring in the page's BO passes, one under 1024 is
	 * raised to 1024 */
	EQ(create_with(&f, ring_half), 0);
	EQ(create_with(&f, ring_small), 0);
	EQ(stats().queues, 5);
	if (checks == 61)
		EQ(create_with(&f, ctl_size), 0);
	/* the doorbell slice maps now, twice if asked */
	bell = doorbells(&f, a.doorbell_offset);
	CHECK((intptr_t)bell > 0, "doorbell mmap: %ld", (long)(intptr_t)bell);
	EQ((intptr_t)sys->mmap(NULL, 8192, PROT_READ, MAP_SHARED, f.kfd, base + 8192 * 0) > 0, 1);

	/* the buffers are the queues' while they live (6.12+) */
	n = 0;
	EQ(map_bo(f.kfd, 0, f.h_ring, &f.id, 1, &n), checks >= 612 ? -EBUSY : 0);
	if (checks < 612)
		EQ(map_bo(f.kfd, 1, f.h_ring, &f.id, 1, &n), 0);
	n = 0;
	EQ(map_bo(f.kfd, 0, f.h_cwsr, &f.id, 1, &n), checks >= 612 ? -EBUSY : 0);
	if (checks < 612)
		EQ(map_bo(f.kfd, 1, f.h_cwsr, &f.id, 1, &n), 0);
	/* queues block RUNTIME_ENABLE and XNACK changes */
	EQ(runtime(f.kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK), -EEXIST);
	{
		struct kfd_ioctl_set_xnack_mode_args x = { .xnack_enabled = 1 };

		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), -EBUSY);
	}

	/* UPDATE_QUEUE: creation's checks, the id, then (6.12+) the ring's
	 * mapping; with the queue's own ring the priority changes */
	{
		struct kfdemu_queue kq;

		EQ(queue_at_fn(0, &kq), 0);
		EQ(kq.priority, 7);
		EQ(kq.ring == (uintptr_t)f.ring && kq.ring_size == RING_BYTES, 1);
		u = (struct kfd_ioctl_update_queue_args){
			.ring_base_address = (uintptr_t)f.ring, .queue_id = 0,
			.ring_size = RING_BYTES, .queue_percentage = 100, .queue_priority = 16 };
		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_UPDATE_QUEUE, &u), -EINVAL);
		u.queue_priority = 15;
		u.ring_size = RING_BYTES + 64;
		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_UPDATE_QUEUE, &u), -EINVAL);
		u.ring_size = RING_BYTES;
		u.queue_percentage = 101;
		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_UPDATE_QUEUE, &u), -EINVAL);
		u.queue_percentage = 100;
		u.queue_id = 77;
		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_UPDATE_QUEUE, &u), -EFAULT);
		u.queue_id = 0;
		/* twice the ring's BO: not its mapping (6.12+); before, a
		 * move the emulation does not model */
		u.ring_size = RING_BYTES * 2;
		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_UPDATE_QUEUE, &u), checks >= 612 ? -EFAULT : -ENOSYS);
		u.ring_size = RING_BYTES;
		EQ(queue_at_fn(0, &kq), 0);
		EQ(kq.priority == 7 && kq.updates == 0, 1);
		EQ(sys->ioctl(f.kfd, AMDKFD_IOC_UPDATE_QUEUE, &u), 0);
		EQ(queue_at_fn(0, &kq), 0);
		EQ(kq.priority == 15 && kq.percentage == 100 && kq.updates == 1, 1);
		EQ(queue_at_fn(77, &kq), -1);
	}

	/* DESTROY: unknown ids, then each queue once; the buffers go back */
	EQ(destroy(&f, 77), -EINVAL);
	EQ(destroy(&f, 5000), -EINVAL);
	for (uint32_t i = 0; i < (checks == 61 ? 6u : 5u); i++)
		EQ(destroy(&f, i), 0);
	EQ(destroy(&f, 0), -EINVAL);
	EQ(stats().queues, 0);
	n = 0;
	EQ(map_bo(f.kfd, 0, f.h_ring, &f.id, 1, &n), 0);
	EQ(free_bo(f.kfd, f.h_ring), 0);
	n = 0;
	EQ(map_bo(f.kfd, 0, f.h_cwsr, &f.id, 1, &n), 0);
	EQ(free_bo(f.kfd, f.h_cwsr), 0);
	EQ(runtime(f.kfd, KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK), 0);
}

/* The HWS limit: 127 queues on gfx90a, 255 on gfx942, then -ENOSPC. */
static void check_queue_limit(uint32_t limit)
{
	struct qfix f;
	struct kfd_ioctl_create_queue_args a;

	fix_open(&f, limit == 255 ? "gfx942" : "gfx90a");
	for (uint32_t i = 0; i < limit; i++) {
		a = f.args;
		EQ(create(&f, &a), 0);
	}
	a = f.args;
	EQ(create(&f, &a), -ENOSPC);
	EQ(destroy(&f, limit - 1), 0);
	a = f.args;
	EQ(create(&f, &a), 0);
	EQ(a.queue_id, limit - 1);
	for (uint32_t i = 0; i < limit; i++)
		EQ(destroy(&f, i), 0);
}

/* Wait until *p == want (bounded); whether it came. */
static int wait_eq(const int64_t *p, int64_t want)
{
	struct timespec ts = { 0, 100000 };

	for (uint64_t waited = 0; waited < TH_TIMEOUT_NS; waited += 100000) {
		if (__atomic_load_n(p, __ATOMIC_ACQUIRE) == want)
			return 1;
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* Long enough for a CP that would wrongly go on to have done so. */
static void settle(void)
{
	struct timespec ts = { 0, 20000000 };

	nanosleep(&ts, NULL);
}

struct cpq {
	struct qfix f;
	uint32_t queue_id;
	uint64_t next;			/* the next packet id */
	char *bells;			/* the doorbell slice, mapped */
	volatile uint64_t *bell;
};

static void cpq_open(struct cpq *q)
{
	struct kfd_ioctl_create_queue_args a;

	fix_open(&q->f, "gfx90a");
	a = q->f.args;
	EQ(create(&q->f, &a), 0);
	q->queue_id = a.queue_id;
	q->next = 0;
	q->bells = doorbells(&q->f, a.doorbell_offset);
	CHECK((intptr_t)q->bells > 0, "doorbell mmap");
	q->bell = (volatile uint64_t *)(q->bells + (a.doorbell_offset & 0x1fff));
}

/* Write a packet (body first, header last) at the next id; its id. */
static uint64_t put(struct cpq *q, const aql_packet *p, int ring)
{
	uint64_t id = q->next++;
	aql_packet *slot = &q->f.ring[id % RING_PACKETS];
	uint32_t first;

	memcpy(slot->bytes + 4, p->bytes + 4, 60);
	memcpy(&first, p->bytes, 4);
	if (q->f.amd->write_dispatch_id < q->next)
		__atomic_store_n(&q->f.amd->write_dispatch_id, q->next, __ATOMIC_RELEASE);
	__atomic_store_n((uint32_t *)slot, first, __ATOMIC_RELEASE);
	if (ring)
		__atomic_store_n(q->bell, id, __ATOMIC_RELEASE);
	return id;
}

static aql_packet barrier(enum aql_packet_type type, aql_signal *dep0, aql_signal *dep1,
			  aql_signal *done)
{
	aql_packet p = { 0 };

	p.barrier.header = aql_packet_header(type, 1, AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	p.barrier.dep_signal[0] = (uintptr_t)dep0;
	p.barrier.dep_signal[1] = (uintptr_t)dep1;
	p.barrier.completion_signal = (uintptr_t)done;
	return p;
}

static aql_packet barrier_value(aql_signal *s, int64_t value, uint32_t cond, aql_signal *done)
{
	aql_packet p = { 0 };

	p.barrier_value.header.header =
		aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1, AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
	p.barrier_value.header.format = AQL_AMD_PACKET_BARRIER_VALUE;
	p.barrier_value.signal = (uintptr_t)s;
	p.barrier_value.value = value;
	p.barrier_value.mask = -1;
	p.barrier_value.cond = cond;
	p.barrier_value.completion_signal = (uintptr_t)done;
	return p;
}

static int64_t val(aql_signal *s)
{
	return __atomic_load_n(&s->value, __ATOMIC_ACQUIRE);
}

static void set(aql_signal *s, int64_t v)
{
	__atomic_store_n(&s->value, v, __ATOMIC_SEQ_CST);
}

/* The CP: barriers, BARRIER_VALUE, completion and mailbox, the wait on
 * an INVALID slot, CP errors, and a destroy while the CP waits. */
static void check_cp(void)
{
	struct cpq q;
	aql_signal *s;
	aql_packet p;
	uint64_t id;

	cpq_open(&q);
	s = q.f.sig;
	for (int i = 0; i < 12; i++)
		set(&s[i], 1);
	/* a packet written but not rung is not run */
	p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, &s[0]);
	put(&q, &p, 0);
	settle();
	EQ(val(&s[0]), 1);
	/* rung: runs, completes and retires */
	__atomic_store_n(q.bell, 0, __ATOMIC_RELEASE);
	CHECK(wait_eq(&s[0].value, 0), "empty barrier completes");
	CHECK(wait_eq((int64_t *)&q.f.amd->read_dispatch_id, 1), "read_dispatch_id 1");
	EQ(__atomic_load_n(&q.f.ring[0].header, __ATOMIC_ACQUIRE), AQL_PACKET_INVALID);

	/* AND waits for every dependency */
	p = barrier(AQL_PACKET_BARRIER_AND, &s[1], &s[2], &s[3]);
	put(&q, &p, 1);
	set(&s[1], 0);
	settle();
	EQ(val(&s[3]), 1);
	set(&s[2], 0);
	CHECK(wait_eq(&s[3].value, 0), "AND completes when both deps are 0");
	/* OR for one; a completion with a mailbox stores the event id there */
	set(&s[1], 1);
	s[4].event_mailbox_ptr = (uintptr_t)q.f.mailbox;
	s[4].event_id = 77;
	p = barrier(AQL_PACKET_BARRIER_OR, &s[1], &s[2], &s[4]);
	put(&q, &p, 1);
	CHECK(wait_eq(&s[4].value, 0), "OR completes on one dep");
	EQ(__atomic_load_n(q.f.mailbox, __ATOMIC_ACQUIRE), 77);
	/* BARRIER_VALUE: GTE 7 */
	set(&s[5], 5);
	p = barrier_value(&s[5], 7, AQL_COND_GTE, &s[6]);
	put(&q, &p, 1);
	settle();
	EQ(val(&s[6]), 1);
	set(&s[5], 8);
	CHECK(wait_eq(&s[6].value, 0), "BARRIER_VALUE completes");

	/* rung ahead of an unpublished slot: the CP waits for it, in order */
	set(&s[0], 1);
	set(&s[1], 1);
	q.next++;
	p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, &s[1]);
	id = put(&q, &p, 1);
	settle();
	EQ(val(&s[1]), 1);
	q.next = id - 1;
	p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, &s[0]);
	put(&q, &p, 0);
	q.next = id + 1;
	CHECK(wait_eq(&s[0].value, 0) && wait_eq(&s[1].value, 0), "both complete in order");
	CHECK(wait_eq((int64_t *)&q.f.amd->read_dispatch_id, (int64_t)q.next), "all retired");

	/* a CP error: code 256 in queue_inactive_signal, the queue stalls */
	set(&s[10], 0);
	q.f.amd->queue_inactive_signal = (uintptr_t)&s[10];
	p = barrier_value(&s[5], 0, AQL_COND_EQ, &s[7]);
	p.barrier_value.header.format = 9;
	put(&q, &p, 1);
	CHECK(wait_eq(&s[10].value, 256), "unsupported vendor packet: code 256");
	p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, &s[8]);
	put(&q, &p, 1);
	settle();
	EQ(val(&s[7]), 1);
	EQ(val(&s[8]), 1);
	/* destroy while the CP stalls: it stops, nothing more is written */
	EQ(destroy(&q.f, q.queue_id), 0);
	set(&s[10], 0);
	settle();
	EQ(val(&s[7]), 1);
	EQ(val(&s[8]), 1);
	EQ(stats().queues, 0);
}

/* A kernel dispatch with no dimensions: code 2; a destroy while the CP
 * waits on a dependency that never comes. */
static void check_cp_more(void)
{
	struct cpq q;
	aql_signal *s;
	aql_packet p;

	cpq_open(&q);
	s = q.f.sig;
	set(&s[0], 1);
	q.f.amd->queue_inactive_signal = (uintptr_t)&s[1];
	memset(&p, 0, sizeof(p));
	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.completion_signal = (uintptr_t)&s[0];
	put(&q, &p, 1);
	CHECK(wait_eq(&s[1].value, 2), "dispatch of 0 dimensions: code 2");
	EQ(val(&s[0]), 1);
	/* the runtime clears the code: the CP retries the same packet */
	set(&s[1], 0);
	CHECK(wait_eq(&s[1].value, 2), "the retry fails again");
	EQ(destroy(&q.f, q.queue_id), 0);

	{
		struct kfd_ioctl_create_queue_args a = q.f.args;

		EQ(create(&q.f, &a), 0);
		q.queue_id = a.queue_id;
	}
	memset(q.f.amd, 0, sizeof(*q.f.amd));
	for (uint32_t i = 0; i < RING_PACKETS; i++)
		q.f.ring[i].header = AQL_PACKET_INVALID;
	q.next = 0;
	set(&s[2], 1);
	set(&s[3], 1);
	p = barrier(AQL_PACKET_BARRIER_AND, &s[2], NULL, &s[3]);
	put(&q, &p, 1);
	settle();
	EQ(destroy(&q.f, q.queue_id), 0);
	set(&s[2], 0);
	settle();
	EQ(val(&s[3]), 1);
}

/*
 * The CP's completion of a signal with a mailbox in the event page wakes
 * a WAIT_EVENTS sleeper (value, then mailbox, then interrupt).
 */
static void check_cp_event(void)
{
	struct cpq q;
	struct kfd_ioctl_create_event_args ev;
	struct waiting w;
	pthread_t t;
	char *page = reserve(32768);
	uint64_t h, off = 0;
	uint32_t n = 0;
	volatile uint64_t *slots = (volatile uint64_t *)page;
	aql_packet p;

	cpq_open(&q);
	EQ(alloc(q.f.kfd, q.f.id, (uintptr_t)page, 32768, F(GTT) | F(WRITABLE), &h, &off), 0);
	CHECK(map_host(q.f.render, page, 32768, off) == page, "event page mmap");
	EQ(map_bo(q.f.kfd, 1, h, &q.f.id, 1, &n), 0);
	EQ(create_event(q.f.kfd, KFD_IOC_EVENT_SIGNAL, 1, h, &ev), 0);
	set(&q.f.sig[0], 1);
	q.f.sig[0].event_mailbox_ptr = (uintptr_t)&slots[ev.event_slot_index];
	q.f.sig[0].event_id = ev.event_id;
	w = (struct waiting){ .kfd = q.f.kfd, .id = ev.event_id };
	CHECK(pthread_create(&t, NULL, wait_thread, &w) == 0, "pthread_create");
	sleepers(1);
	p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, &q.f.sig[0]);
	put(&q, &p, 1);
	pthread_join(t, NULL);
	EQ(w.r, 0);
	EQ(w.result, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(val(&q.f.sig[0]), 0);
	/* kfd_signal_event_interrupt acknowledged the slot */
	EQ(__atomic_load_n(&slots[ev.event_slot_index], __ATOMIC_ACQUIRE), -1);
	EQ(destroy(&q.f, q.queue_id), 0);
}

/* A completion signal the GPU cannot reach: a VM fault; the process's
 * queues on that GPU are evicted. */
static void check_cp_fault(void)
{
	struct cpq q;
	aql_signal *lost = host_pages(4096);
	struct kfd_ioctl_create_queue_args a;
	aql_packet p;

	struct kfd_ioctl_create_event_args mem;
	struct kfd_event_data d;
	uint32_t res;

	cpq_open(&q);
	a = q.f.args;
	EQ(create(&q.f, &a), 0);
	EQ(create_event(q.f.kfd, KFD_IOC_EVENT_MEMORY, 0, 0, &mem), 0);
	set(lost, 1);
	p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, lost);
	put(&q, &p, 1);
	for (int i = 0; i < 1000 && stats().queues_halted < 2; i++)
		settle();
	EQ(stats().queues_halted, 2);
	EQ(val(lost), 1);
	/* the MEMORY event has the address: a write, page not present */
	EQ(wait1(q.f.kfd, mem.event_id, 0, NULL, &res, &d), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(d.memory_exception_data.va, (uintptr_t)lost);
	EQ(d.memory_exception_data.gpu_id, q.f.id);
	EQ(d.memory_exception_data.failure.NotPresent, 1);
	EQ(destroy(&q.f, q.queue_id), 0);
	EQ(destroy(&q.f, a.queue_id), 0);
}

/* AQL_KFD_EMU_FAIL's queue points: the packets before N run. */
static void check_cp_knob(int64_t n, int fault)
{
	struct cpq q;
	struct kfd_ioctl_create_queue_args a;
	aql_packet p;

	cpq_open(&q);
	/* a second queue on the GPU, idle: evicted by a fault only */
	a = q.f.args;
	EQ(create(&q.f, &a), 0);
	for (int i = 0; i < n + 2; i++) {
		set(&q.f.sig[i], 1);
		p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, &q.f.sig[i]);
		put(&q, &p, 1);
	}
	for (int i = 0; i < n; i++)
		CHECK(wait_eq(&q.f.sig[i].value, 0), "packet %d runs", i);
	for (int i = 0; i < 1000 && stats().queues_halted < (fault ? 2u : 1u); i++)
		settle();
	settle();
	EQ(stats().queues_halted, fault ? 2 : 1);
	EQ(val(&q.f.sig[n]), 1);
	EQ(val(&q.f.sig[n + 1]), 1);
	EQ(__atomic_load_n(&q.f.amd->read_dispatch_id, __ATOMIC_ACQUIRE), (uint64_t)n);
	EQ(destroy(&q.f, q.queue_id), 0);
	EQ(destroy(&q.f, a.queue_id), 0);
}

/*
 * Producers on two threads share a queue (reserve by CAS on
 * write_dispatch_id, ring their own id, possibly out of order), with a
 * second queue busy at once; every packet completes once. For TSan.
 */
struct producer {
	struct cpq *q;
	aql_signal *done;
	int packets;
};

static void *produce(void *arg)
{
	struct producer *pr = arg;
	struct cpq *q = pr->q;

	for (int i = 0; i < pr->packets; i++) {
		uint64_t id = __atomic_fetch_add(&q->f.amd->write_dispatch_id, 1, __ATOMIC_SEQ_CST);
		aql_packet p = barrier(AQL_PACKET_BARRIER_AND, NULL, NULL, pr->done);
		aql_packet *slot = &q->f.ring[id % RING_PACKETS];
		uint32_t first;
		unsigned spins = 0;

		/* the slot is free once the CP has retired id - RING_PACKETS */
		while (__atomic_load_n(&q->f.amd->read_dispatch_id, __ATOMIC_ACQUIRE) + RING_PACKETS <= id)
			if (++spins > 1000) {
				struct timespec ts = { 0, 50000 };

				nanosleep(&ts, NULL);
			}
		memcpy(slot->bytes + 4, p.bytes + 4, 60);
		memcpy(&first, p.bytes, 4);
		__atomic_store_n((uint32_t *)slot, first, __ATOMIC_RELEASE);
		/* Rung only upwards (UINT64_MAX: never rung): the emulated CP runs
		 * to the id in the doorbell, and a smaller id stored over the
		 * other producer's larger one would strand that packet. (ROCr's
		 * notes allow a MULTI queue's doorbell to go backwards; the
		 * emulation does not model that yet.) */
		uint64_t bell = __atomic_load_n(q->bell, __ATOMIC_RELAXED);

		while ((bell == UINT64_MAX || bell < id) &&
		       !__atomic_compare_exchange_n(q->bell, &bell, id, 0, __ATOMIC_RELEASE,
						    __ATOMIC_RELAXED))
			;
	}
	return NULL;
}

static void check_cp_threads(void)
{
	enum { PACKETS = 400 };
	struct cpq q;
	struct kfd_ioctl_create_queue_args a;
	struct producer pr[2];
	pthread_t t[2];

	cpq_open(&q);
	set(&q.f.sig[0], 2 * PACKETS);
	for (int i = 0; i < 2; i++) {
		pr[i] = (struct producer){ .q = &q, .done = &q.f.sig[0], .packets = PACKETS };
		CHECK(pthread_create(&t[i], NULL, produce, &pr[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	CHECK(wait_eq(&q.f.sig[0].value, 0), "all %d packets complete", 2 * PACKETS);
	CHECK(wait_eq((int64_t *)&q.f.amd->read_dispatch_id, 2 * PACKETS), "all retired");
	/* a queue destroyed and made again many times while its CP polls */
	for (int i = 0; i < 20; i++) {
		EQ(destroy(&q.f, q.queue_id), 0);
		a = q.f.args;
		EQ(create(&q.f, &a), 0);
		q.queue_id = a.queue_id;
	}
	EQ(destroy(&q.f, q.queue_id), 0);
}

/*
 * Kernel dispatch (kernels.c) on a code object built here: the layout lld
 * gives an AMDGPU one (the first PT_LOAD holds the ELF header, the
 * dynamic section, its hash, symbols and strings, and the descriptor) and
 * one `saxpy.kd`, whose host build AQL_KFD_EMU_KERNELS names, and the
 * metadata note (PT_NOTE) that says where its hidden arguments are. The
 * kernarg block is saxpy's (a, x, y, n), then a code object V5 hidden
 * block.
 */
#define SAXPY_N 100u
#define SAXPY_WG 32u
#define HIDDEN 32u			/* align(28, 8) */
#define KERNARG (HIDDEN + 256u)

static void put_u(unsigned char *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A little msgpack: strings under 32 bytes, unsigned numbers. */
static unsigned char *mp_str(unsigned char *o, const char *str)
{
	size_t n = strlen(str);

	*o++ = (unsigned char)(0xa0 | n);
	memcpy(o, str, n);
	return o + n;
}

static unsigned char *mp_uint(unsigned char *o, uint32_t v)
{
	if (v < 128) {
		*o++ = (unsigned char)v;
		return o;
	}
	*o++ = 0xce;
	for (int i = 3; i >= 0; i--)
		*o++ = (unsigned char)(v >> (8 * i));
	return o;
}

/* The metadata note's descriptor (V5, metadata 1.2) of kernel name, with
 * saxpy's arguments and the hidden ones this test fills: its end. */
static unsigned char *saxpy_metadata(unsigned char *o, const char *name, const char *symbol)
{
	static const struct {
		const char *kind;
		uint32_t offset, size;
	} args[] = {
		{ "by_value", 0, 4 }, { "by_value", 8, 8 }, { "by_value", 16, 8 },
		{ "by_value", 24, 4 },
		{ "hidden_block_count_x", HIDDEN + 0, 4 }, { "hidden_block_count_y", HIDDEN + 4, 4 },
		{ "hidden_block_count_z", HIDDEN + 8, 4 }, { "hidden_group_size_x", HIDDEN + 12, 2 },
		{ "hidden_group_size_y", HIDDEN + 14, 2 }, { "hidden_group_size_z", HIDDEN + 16, 2 },
		{ "hidden_remainder_x", HIDDEN + 18, 2 }, { "hidden_remainder_y", HIDDEN + 20, 2 },
		{ "hidden_remainder_z", HIDDEN + 22, 2 }, { "hidden_grid_dims", HIDDEN + 64, 2 },
		{ "hidden_dynamic_lds_size", HIDDEN + 120, 4 },
		{ "hidden_queue_ptr", HIDDEN + 200, 8 },
	};
	static const struct {
		const char *key;
		uint32_t v;
	} fields[] = {
		{ ".kernarg_segment_size", KERNARG }, { ".group_segment_fixed_size", 0 },
		{ ".private_segment_fixed_size", 0 }, { ".kernarg_segment_align", 8 },
		{ ".wavefront_size", 64 }, { ".sgpr_count", 16 }, { ".vgpr_count", 8 },
		{ ".max_flat_workgroup_size", 1024 },
	};
	size_t nargs = sizeof(args) / sizeof(args[0]);

	*o++ = 0x82;
	o = mp_str(o, "amdhsa.version");
	*o++ = 0x92;
	o = mp_uint(o, 1);
	o = mp_uint(o, 2);
	o = mp_str(o, "amdhsa.kernels");
	*o++ = 0x91;
	*o++ = 0x8b;
	o = mp_str(mp_str(o, ".name"), name);
	o = mp_str(mp_str(o, ".symbol"), symbol);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		o = mp_uint(mp_str(o, fields[i].key), fields[i].v);
	o = mp_str(o, ".args");
	*o++ = 0xdc;			/* array 16 */
	*o++ = (unsigned char)(nargs >> 8);
	*o++ = (unsigned char)nargs;
	for (size_t i = 0; i < nargs; i++) {
		*o++ = 0x83;
		o = mp_uint(mp_str(o, ".offset"), args[i].offset);
		o = mp_uint(mp_str(o, ".size"), args[i].size);
		o = mp_str(mp_str(o, ".value_kind"), args[i].kind);
	}
	return o;
}

/* The image: ELF header, PT_LOAD, PT_DYNAMIC and PT_NOTE, .dynamic at
 * 0x200, .hash at 0x300, .dynsym at 0x340, .dynstr at 0x3a0, the
 * descriptor at 0x400, the entry at 0x500, the note at 0x600. */
static void code_object(unsigned char *img, const char *kd_symbol)
{
	char name[64];
	unsigned char *end;

	memset(img, 0, 4096);
	memcpy(img, "\177ELF\2\1\1", 7);
	put_u(img + 16, 3, 2);			/* ET_DYN */
	put_u(img + 18, 224, 2);		/* EM_AMDGPU */
	put_u(img + 20, 1, 4);
	put_u(img + 32, 64, 8);			/* e_phoff */
	put_u(img + 52, 64, 2);
	put_u(img + 54, 56, 2);
	put_u(img + 56, 3, 2);
	put_u(img + 64, 1, 4);			/* PT_LOAD of the page */
	put_u(img + 64 + 32, 4096, 8);
	put_u(img + 64 + 40, 4096, 8);
	put_u(img + 120, 2, 4);			/* PT_DYNAMIC */
	put_u(img + 120 + 16, 0x200, 8);
	put_u(img + 120 + 32, 0x40, 8);
	put_u(img + 0x200, 4, 8);		/* DT_HASH */
	put_u(img + 0x208, 0x300, 8);
	put_u(img + 0x210, 6, 8);		/* DT_SYMTAB */
	put_u(img + 0x218, 0x340, 8);
	put_u(img + 0x220, 5, 8);		/* DT_STRTAB */
	put_u(img + 0x228, 0x3a0, 8);
	put_u(img + 0x300, 1, 4);		/* nbucket */
	put_u(img + 0x304, 2, 4);		/* nchain */
	put_u(img + 0x308, 1, 4);
	put_u(img + 0x340 + 24, 1, 4);		/* st_name */
	img[0x340 + 24 + 4] = 0x11;		/* GLOBAL OBJECT */
	put_u(img + 0x340 + 24 + 8, 0x400, 8);
	put_u(img + 0x340 + 24 + 16, 64, 8);
	strcpy((char *)img + 0x3a1, kd_symbol);
	put_u(img + 0x400 + 8, KERNARG, 4);	/* kernarg_size */
	put_u(img + 0x400 + 16, 0x100, 8);	/* entry at 0x500 */
	snprintf(name, sizeof(name), "%.*s", (int)strlen(kd_symbol) - 3, kd_symbol);
	end = saxpy_metadata(img + 0x600 + 20, name, kd_symbol);
	put_u(img + 0x600, 7, 4);		/* namesz */
	put_u(img + 0x604, (uint64_t)(end - (img + 0x614)), 4);
	put_u(img + 0x608, 32, 4);		/* NT_AMDGPU_METADATA */
	memcpy(img + 0x60c, "AMDGPU", 7);
	put_u(img + 176, 4, 4);			/* PT_NOTE */
	put_u(img + 176 + 16, 0x600, 8);
	put_u(img + 176 + 32, (uint64_t)(end - (img + 0x600)), 8);
}

struct disp {
	struct cpq q;
	unsigned char *code;		/* EXECUTABLE USERPTR page */
	unsigned char *data;		/* not EXECUTABLE */
	unsigned char *kernarg;
	uint32_t *ib;			/* the PM4 of the code caches' invalidation */
	int no_invalidate;		/* start_one: no invalidation before the packet */
	float *x, *y;
};

/*
 * A runtime's invalidation of the code caches after writing code (ROCr
 * GpuAgent::InvalidateCodeCaches through AqlQueue::ExecutePM4): the PM4
 * IB vendor packet jumping to ib, which holds a gfx9 ACQUIRE_MEM with
 * COHER_CNTL coher (SH_ICACHE 1 << 29, SH_KCACHE 1 << 27, TC 1 << 23) over
 * all memory.
 */
static aql_packet invalidation(uint32_t *ib, uint32_t coher)
{
	uint32_t pkt[16] = { 0 };
	aql_packet p;

	memset(ib, 0, 7 * sizeof(*ib));
	ib[0] = 3u << 30 | 5u << 16 | 0x58u << 8;
	ib[1] = coher;
	ib[2] = 0xffffffffu;
	ib[3] = 0xffu;
	pkt[0] = aql_packet_header(AQL_PACKET_VENDOR_SPECIFIC, 1, AQL_FENCE_SYSTEM,
				   AQL_FENCE_SYSTEM) | 1u << 16;
	pkt[1] = 3u << 30 | 2u << 16 | 0x3fu << 8;
	pkt[2] = (uint32_t)(uintptr_t)ib;
	pkt[3] = (uint32_t)((uintptr_t)ib >> 32);
	pkt[4] = 7 | 1u << 23;
	pkt[5] = 0xa;
	memcpy(&p, pkt, sizeof(p));
	return p;
}

#define COHER_CODE (1u << 29 | 1u << 27 | 1u << 23)

static void disp_open(struct disp *d)
{
	uint64_t h, off;
	uint32_t n = 0;

	cpq_open(&d->q);
	d->code = host_pages(4096);
	d->data = host_pages(4096);
	d->kernarg = host_pages(4096);
	d->ib = host_pages(4096);
	d->no_invalidate = 0;
	d->x = host_pages(4096);
	d->y = host_pages(4096);
	off = (uintptr_t)d->code;
	EQ(alloc(d->q.f.kfd, d->q.f.id, off, 4096, F(USERPTR) | F(EXECUTABLE), &h, &off), 0);
	EQ(map_bo(d->q.f.kfd, 1, h, &d->q.f.id, 1, &n), 0);
	userptr(&d->q.f, d->data, 4096);
	userptr(&d->q.f, d->kernarg, 4096);
	userptr(&d->q.f, d->ib, 4096);
	userptr(&d->q.f, d->x, 4096);
	userptr(&d->q.f, d->y, 4096);
	code_object(d->code, "saxpy.kd");
	code_object(d->data, "saxpy.kd");
	/* run_one makes a queue per packet */
	EQ(destroy(&d->q.f, d->q.queue_id), 0);
}

/* saxpy's kernarg block for packet p, hidden arguments as a runtime
 * fills them. */
static void saxpy_args(struct disp *d, const aql_dispatch_packet *p)
{
	unsigned char *k = d->kernarg, *h = k + HIDDEN;
	const uint32_t grid[3] = { p->grid_size_x, p->grid_size_y, p->grid_size_z };
	const uint16_t wg[3] = { p->workgroup_size_x, p->workgroup_size_y, p->workgroup_size_z };
	float a = 2.0f;

	memset(k, 0, KERNARG);
	memcpy(k, &a, 4);
	put_u(k + 8, (uintptr_t)d->x, 8);
	put_u(k + 16, (uintptr_t)d->y, 8);
	put_u(k + 24, SAXPY_N, 4);
	for (int i = 0; i < 3; i++) {
		put_u(h + 4 * i, grid[i] / wg[i], 4);
		put_u(h + 12 + 2 * i, wg[i], 2);
		put_u(h + 18 + 2 * i, grid[i] % wg[i], 2);
	}
	put_u(h + 64, p->setup & AQL_DISPATCH_DIMS_MASK, 2);
	put_u(h + 120, p->group_segment_size, 4);
	put_u(h + 200, (uintptr_t)d->q.f.amd, 8);
}

static aql_packet saxpy_packet(struct disp *d, unsigned char *code, aql_signal *done)
{
	aql_packet p = { 0 };

	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = SAXPY_WG;
	p.dispatch.workgroup_size_y = p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_x = SAXPY_N;
	p.dispatch.grid_size_y = p.dispatch.grid_size_z = 1;
	p.dispatch.kernel_object = (uintptr_t)code + 0x400;
	p.dispatch.kernarg_address = (uintptr_t)d->kernarg;
	p.dispatch.completion_signal = (uintptr_t)done;
	return p;
}

/* Put p on a fresh queue and ring it. */
static void start_one(struct disp *d, const aql_packet *p, int fill_args)
{
	struct kfd_ioctl_create_queue_args a = d->q.f.args;
	aql_signal *done = (aql_signal *)(uintptr_t)p->dispatch.completion_signal;
	aql_signal *inactive = &d->q.f.sig[20];

	memset(d->q.f.amd, 0, sizeof(*d->q.f.amd));
	for (uint32_t i = 0; i < RING_PACKETS; i++)
		d->q.f.ring[i].header = AQL_PACKET_INVALID;
	d->q.f.amd->queue_inactive_signal = (uintptr_t)inactive;
	set(inactive, 0);
	set(done, 1);
	EQ(create(&d->q.f, &a), 0);
	d->q.queue_id = a.queue_id;
	d->q.bell = (volatile uint64_t *)(d->q.bells + (a.doorbell_offset & 0x1fff));
	d->q.next = 0;
	if (fill_args)
		saxpy_args(d, &p->dispatch);
	if (!d->no_invalidate) {
		aql_packet inv = invalidation(d->ib, COHER_CODE);

		put(&d->q, &inv, 0);
	}
	put(&d->q, p, 1);
}

/* How p ends: a CP code (0: completed), or -1 when the queue stopped
 * (a VM fault). */
static int64_t wait_one(struct disp *d, const aql_packet *p)
{
	aql_signal *done = (aql_signal *)(uintptr_t)p->dispatch.completion_signal;
	aql_signal *inactive = &d->q.f.sig[20];
	int64_t r = -2;

	for (uint64_t waited = 0; waited < TH_TIMEOUT_NS && r == -2; waited += 1000000) {
		if (val(done) == 0)
			r = 0;
		else if (val(inactive))
			r = val(inactive);
		else if (stats().queues_halted)
			r = -1;
		else
			th_sleep_ms(1);
	}
	return r;
}

/* Run p on a fresh queue: how it ends (wait_one). */
static int64_t run_one(struct disp *d, const aql_packet *p, int fill_args)
{
	int64_t r;

	start_one(d, p, fill_args);
	r = wait_one(d, p);
	EQ(destroy(&d->q.f, d->q.queue_id), 0);
	return r;
}

/* A 64 KiB VRAM BO for scratch, mapped on the GPU. */
static void *scratch_bo(struct qfix *f)
{
	char *va = reserve(64 << 10);

	vram_bo(f, va, 64 << 10);
	return va;
}

static void check_dispatch_kernels(void)
{
	struct disp d;
	aql_signal *done;
	aql_packet p;

	disp_open(&d);
	done = &d.q.f.sig[21];
	for (uint32_t i = 0; i < SAXPY_N; i++) {
		d.x[i] = (float)i;
		d.y[i] = 1.0f;
	}
	/* the host build runs over the grid, the last group partial */
	p = saxpy_packet(&d, d.code, done);
	EQ(run_one(&d, &p, 1), 0);
	for (uint32_t i = 0; i < SAXPY_N; i++)
		CHECK(d.y[i] == 2.0f * (float)i + 1.0f, "y[%u] = %g", i, (double)d.y[i]);
	EQ(d.y[SAXPY_N], 0.0f);

	/* each hidden argument the runtime got wrong: code 32 */
	{
		static const unsigned at[] = { 0, 12, 18, 64, 120, 200 };

		for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
			saxpy_args(&d, &p.dispatch);
			d.kernarg[HIDDEN + at[i]] ^= 1;
			EQ(run_one(&d, &p, 0), 32);
		}
	}
	/* the packet's own errors */
	p = saxpy_packet(&d, d.code, done);
	p.dispatch.workgroup_size_x = 2048;
	EQ(run_one(&d, &p, 1), 64);
	p = saxpy_packet(&d, d.code, done);
	p.dispatch.grid_size_y = 2;
	EQ(run_one(&d, &p, 1), 2);
	p = saxpy_packet(&d, d.code, done);
	p.dispatch.group_segment_size = 65537;
	EQ(run_one(&d, &p, 1), 4);
	p = saxpy_packet(&d, d.code, done);
	p.dispatch.kernel_object += 8;
	EQ(run_one(&d, &p, 1), 8);
	p = saxpy_packet(&d, d.code, done);
	p.dispatch.kernarg_address += 8;
	EQ(run_one(&d, &p, 1), 32);
	/* too little scratch: code 1; the runtime grows it and stores 0, the
	 * CP runs the packet again: 48 bytes a lane, 4 waves of 3 KiB */
	p = saxpy_packet(&d, d.code, done);
	p.dispatch.private_segment_size = 40;
	start_one(&d, &p, 1);
	EQ(wait_one(&d, &p), 1);
	EQ(val(done), 1);
	d.q.f.amd->scratch_wave64_lane_byte_size = 48;
	d.q.f.amd->compute_tmpring_size = 4 | 3u << 12;
	d.q.f.amd->scratch_backing_memory_byte_size = 48 * 64 * 4 - 1;
	d.q.f.amd->scratch_backing_memory_location = (uintptr_t)scratch_bo(&d.q.f);
	set(&d.q.f.sig[20], 0);
	EQ(wait_one(&d, &p), 1);
	/* WAVESIZE under 64 lanes of 48 bytes */
	d.q.f.amd->compute_tmpring_size = 4 | 2u << 12;
	d.q.f.amd->scratch_backing_memory_byte_size = 48 * 64 * 4;
	set(&d.q.f.sig[20], 0);
	EQ(wait_one(&d, &p), 1);
	d.q.f.amd->compute_tmpring_size = 4 | 3u << 12;
	set(&d.q.f.sig[20], 0);
	EQ(wait_one(&d, &p), 0);
	EQ(destroy(&d.q.f, d.q.queue_id), 0);
	/* a code object 4 KiB into a shared code BO */
	{
		unsigned char *two = host_pages(8192);
		uint64_t h, off = (uintptr_t)two;
		uint32_t n = 0;

		EQ(alloc(d.q.f.kfd, d.q.f.id, off, 8192, F(USERPTR) | F(EXECUTABLE), &h, &off), 0);
		EQ(map_bo(d.q.f.kfd, 1, h, &d.q.f.id, 1, &n), 0);
		memset(two, 0xcc, 4096);
		code_object(two + 4096, "saxpy.kd");
		for (uint32_t i = 0; i < SAXPY_N; i++)
			d.y[i] = 1.0f;
		p = saxpy_packet(&d, two + 4096, done);
		EQ(run_one(&d, &p, 1), 0);
		EQ(d.y[SAXPY_N - 1], 2.0f * (float)(SAXPY_N - 1) + 1.0f);
	}
	/* a kernel with no host build */
	code_object(d.code, "nosuch.kd");
	p = saxpy_packet(&d, d.code, done);
	EQ(run_one(&d, &p, 1), 8);
	EQ(val(done), 1);
	/* no metadata note (PT_NOTE dropped): nothing says where the hidden
	 * arguments are */
	code_object(d.code, "saxpy.kd");
	put_u(d.code + 56, 2, 2);
	p = saxpy_packet(&d, d.code, done);
	EQ(run_one(&d, &p, 1), 8);
	/* the note again, changed in place: read anew, not from the cache */
	code_object(d.code, "saxpy.kd");
	put_u(d.code + 0x604, 3, 4);		/* descsz: a truncated map */
	p = saxpy_packet(&d, d.code, done);
	EQ(run_one(&d, &p, 1), 8);
	code_object(d.code, "saxpy.kd");
	EQ(run_one(&d, &p, 1), 0);
}

/*
 * The code caches (kfd_emu/cache.c): code changed since the last
 * invalidation runs stale, code written where the caches held none
 * faults, and only a well-formed ACQUIRE_MEM of I$, K$ and L2 is run.
 */
static void check_code_cache(void)
{
	struct disp d;
	aql_signal *done;
	aql_packet p, inv;

	disp_open(&d);
	done = &d.q.f.sig[21];
	p = saxpy_packet(&d, d.code, done);
	EQ(run_one(&d, &p, 1), 0);
	/* changed in place, not invalidated: the caches still run saxpy */
	code_object(d.code, "nosuch.kd");
	d.no_invalidate = 1;
	EQ(run_one(&d, &p, 1), 0);
	d.no_invalidate = 0;
	EQ(run_one(&d, &p, 1), 8);
	/* an ACQUIRE_MEM that leaves out I$, K$ or L2 is refused: code 32 */
	{
		static const uint32_t partial[] = { 1u << 27 | 1u << 23, 1u << 29 | 1u << 23,
						    1u << 29 | 1u << 27 };

		for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++) {
			inv = invalidation(d.ib, partial[i]);
			inv.dispatch.completion_signal = (uintptr_t)done;
			d.no_invalidate = 1;
			EQ(run_one(&d, &inv, 0), 32);
		}
		/* a reserved dword set */
		inv = invalidation(d.ib, COHER_CODE);
		inv.bytes[24] = 1;
		inv.dispatch.completion_signal = (uintptr_t)done;
		EQ(run_one(&d, &inv, 0), 32);
		/* the IB not 7 dwords */
		inv = invalidation(d.ib, COHER_CODE);
		inv.bytes[16] = 8;
		inv.dispatch.completion_signal = (uintptr_t)done;
		EQ(run_one(&d, &inv, 0), 32);
		d.no_invalidate = 0;
	}
	/* a well-formed one completes its signal */
	inv = invalidation(d.ib, COHER_CODE | 1u << 18);
	inv.dispatch.completion_signal = (uintptr_t)done;
	d.no_invalidate = 1;
	EQ(run_one(&d, &inv, 0), 0);
	/* a new code BO written after the last invalidation: a fault */
	{
		unsigned char *fresh = host_pages(4096);
		uint64_t h, off = (uintptr_t)fresh;
		uint32_t n = 0;

		EQ(alloc(d.q.f.kfd, d.q.f.id, off, 4096, F(USERPTR) | F(EXECUTABLE), &h, &off), 0);
		EQ(map_bo(d.q.f.kfd, 1, h, &d.q.f.id, 1, &n), 0);
		code_object(fresh, "saxpy.kd");
		p = saxpy_packet(&d, fresh, done);
		EQ(run_one(&d, &p, 1), -1);
	}
}

/* Scratch whose base is not a mapped BO's absolute address (0x10000, an
 * offset in a window): a VM fault there, the GPU's queues stop. */
static void check_dispatch_scratch_fault(void)
{
	struct disp d;
	struct kfd_ioctl_create_event_args mem;
	struct kfd_event_data ev;
	aql_packet p;
	uint32_t res;

	disp_open(&d);
	EQ(create_event(d.q.f.kfd, KFD_IOC_EVENT_MEMORY, 0, 0, &mem), 0);
	p = saxpy_packet(&d, d.code, &d.q.f.sig[21]);
	p.dispatch.private_segment_size = 48;
	start_one(&d, &p, 1);
	EQ(wait_one(&d, &p), 1);
	d.q.f.amd->scratch_wave64_lane_byte_size = 48;
	d.q.f.amd->compute_tmpring_size = 4 | 3u << 12;
	d.q.f.amd->scratch_backing_memory_byte_size = 48 * 64 * 4;
	d.q.f.amd->scratch_backing_memory_location = 0x10000;
	set(&d.q.f.sig[20], 0);
	EQ(wait_one(&d, &p), -1);
	EQ(wait1(d.q.f.kfd, mem.event_id, 0, NULL, &res, &ev), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	EQ(ev.memory_exception_data.va, 0x10000);
	EQ(ev.memory_exception_data.failure.NotPresent, 1);
	EQ(destroy(&d.q.f, d.q.queue_id), 0);
}

/* A descriptor in memory that is not EXECUTABLE: the entry's fetch is an
 * execute fault, the GPU's queues stop. */
static void check_dispatch_nx(void)
{
	struct disp d;
	struct kfd_ioctl_create_event_args mem;
	struct kfd_event_data ev;
	aql_packet p;
	uint32_t res;

	disp_open(&d);
	EQ(create_event(d.q.f.kfd, KFD_IOC_EVENT_MEMORY, 0, 0, &mem), 0);
	p = saxpy_packet(&d, d.data, &d.q.f.sig[21]);
	EQ(run_one(&d, &p, 1), -1);
	EQ(wait1(d.q.f.kfd, mem.event_id, 0, NULL, &res, &ev), 0);
	EQ(res, KFD_IOC_WAIT_RESULT_COMPLETE);
	/* the entry's page */
	EQ(ev.memory_exception_data.va, (uintptr_t)d.data);
	EQ(ev.memory_exception_data.failure.NoExecute, 1);
}

/* saxpy.gfx90a.hsaco from the command line, when clang could build it */
static const char *hsaco_path;

static uint64_t rd_le(const unsigned char *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * The real code object, its PT_LOADs placed in an EXECUTABLE BO as
 * ROCr's loader places them (base + p_vaddr; saxpy has no relocations),
 * dispatched with its explicit arguments (code object V4: no V5 block).
 */
static void check_dispatch_hsaco(void)
{
	static unsigned char file[65536];
	struct disp d;
	FILE *f = fopen(hsaco_path, "rb");
	size_t size = f ? fread(file, 1, sizeof(file), f) : 0;
	uint64_t phoff = rd_le(file + 32, 8), h, off, kd_va = 0;
	uint32_t phnum = (uint32_t)rd_le(file + 56, 2), n = 0;
	unsigned char *base;
	aql_packet p;
	float a = 3.0f;

	if (f)
		fclose(f);
	CHECK(size > 64 && size < sizeof(file), "read %s", hsaco_path);
	if (size <= 64 || size >= sizeof(file))
		return;
	disp_open(&d);
	base = host_pages(65536);
	off = (uintptr_t)base;
	EQ(alloc(d.q.f.kfd, d.q.f.id, off, 65536, F(USERPTR) | F(EXECUTABLE), &h, &off), 0);
	EQ(map_bo(d.q.f.kfd, 1, h, &d.q.f.id, 1, &n), 0);
	for (uint32_t i = 0; i < phnum; i++) {
		const unsigned char *ph = file + phoff + (uint64_t)i * 56;

		if (rd_le(ph, 4) == 1 && rd_le(ph + 16, 8) + rd_le(ph + 40, 8) <= 65536)
			memcpy(base + rd_le(ph + 16, 8), file + rd_le(ph + 8, 8), rd_le(ph + 32, 8));
	}
	/* saxpy.kd's value, from the file's section headers (SHT_DYNSYM) */
	for (uint32_t i = 0; i < rd_le(file + 60, 2); i++) {
		const unsigned char *sh = file + rd_le(file + 40, 8) + (uint64_t)i * 64;
		const unsigned char *str;

		if (rd_le(sh + 4, 4) != 11)
			continue;
		str = file + rd_le(file + rd_le(file + 40, 8) + rd_le(sh + 40, 4) * 64 + 24, 8);
		for (uint64_t s = 0; s < rd_le(sh + 32, 8); s += 24) {
			const unsigned char *sym = file + rd_le(sh + 24, 8) + s;

			if (!strcmp((const char *)str + rd_le(sym, 4), "saxpy.kd"))
				kd_va = (uintptr_t)base + rd_le(sym + 8, 8);
		}
	}
	CHECK(kd_va, "saxpy.kd in %s", hsaco_path);
	if (!kd_va)
		return;
	for (uint32_t i = 0; i < SAXPY_N; i++) {
		d.x[i] = (float)i;
		d.y[i] = 1.0f;
	}
	p = saxpy_packet(&d, d.code, &d.q.f.sig[21]);
	p.dispatch.kernel_object = kd_va;
	memset(d.kernarg, 0, 512);
	memcpy(d.kernarg, &a, 4);
	put_u(d.kernarg + 8, (uintptr_t)d.x, 8);
	put_u(d.kernarg + 16, (uintptr_t)d.y, 8);
	put_u(d.kernarg + 24, SAXPY_N, 4);
	EQ(run_one(&d, &p, 0), 0);
	for (uint32_t i = 0; i < SAXPY_N; i++)
		CHECK(d.y[i] == 3.0f * (float)i + 1.0f, "y[%u] = %g", i, (double)d.y[i]);
}

static void case_dispatch(void)
{
	in_child(check_dispatch_kernels, "check_dispatch_kernels");
	in_child(check_dispatch_nx, "check_dispatch_nx");
	in_child(check_code_cache, "check_code_cache");
	in_child(check_dispatch_scratch_fault, "check_dispatch_scratch_fault");
	if (hsaco_path)
		in_child(check_dispatch_hsaco, "check_dispatch_hsaco");
}

static void queues_2025(void)
{
	check_queue_rules("gfx90a", 2025);
}

static void case_queues(void)
{
	in_child(queues_2025, "check_queue_rules");
	in_child(check_cp, "check_cp");
	in_child(check_cp_more, "check_cp_more");
	in_child(check_cp_event, "check_cp_event");
	in_child(check_cp_fault, "check_cp_fault");
	in_child(check_cp_threads, "check_cp_threads");
}

static void case_queues_6_12(void)
{
	check_queue_rules("gfx90a", 612);
}

static void case_queues_6_1(void)
{
	check_queue_rules("gfx90a", 61);
}

static void case_queue_limit_gfx90a(void)
{
	check_queue_limit(127);
}

static void case_queue_limit_gfx942(void)
{
	check_queue_limit(255);
}

/* AQL_KFD_EMU_CHECKS=2025: a CWSR area larger than the node's, in a BO of
 * the larger total, is accepted. */
static void case_cwsr_larger(void)
{
	struct qfix f;
	struct kfd_ioctl_create_queue_args a;
	uint64_t h;
	uint32_t n = 0;

	fix_open(&f, "gfx90a");
	EQ(map_bo(f.kfd, 0, f.h_cwsr, &f.id, 1, &n), 0);
	EQ(free_bo(f.kfd, f.h_cwsr), 0);
	/* (cwsr + 4096 + debug) * 1 XCC */
	h = vram_bo(&f, f.vram + MIB, f.cwsr_total + 4096);
	a = f.args;
	a.ctx_save_restore_size += 4096;
	EQ(create(&f, &a), 0);
	EQ(destroy(&f, a.queue_id), 0);
	(void)h;
}

static void case_create_fault(void)
{
	struct qfix f;
	struct kfd_ioctl_create_queue_args a;

	fix_open(&f, "gfx90a");
	a = f.args;
	EQ(create(&f, &a), -EBUSY);
	EQ(stats().queues, 0);
	/* the refused queue took no buffer */
	{
		uint32_t n = 0;

		EQ(map_bo(f.kfd, 0, f.h_ring, &f.id, 1, &n), 0);
	}
}

/* Exit with a queue whose CP waits on a dependency: the library's
 * destructor stops it (the case's exit status says it did not crash). */
static void case_exit_live(void)
{
	struct cpq q;
	aql_packet p;

	cpq_open(&q);
	set(&q.f.sig[0], 1);
	set(&q.f.sig[1], 1);
	p = barrier(AQL_PACKET_BARRIER_AND, &q.f.sig[0], NULL, &q.f.sig[1]);
	put(&q, &p, 1);
	settle();
	EQ(stats().queues, 1);
}

static void case_queue_stop(void)
{
	check_cp_knob(3, 0);
}

static void case_mem_fault(void)
{
	check_cp_knob(2, 1);
}

/* AQL_KFD_EMU_KERNELS=<the host build of saxpy>, from the command line */
static char kernels_env[4200];

static const struct {
	const char *name;
	void (*run)(void);
	const char *env[3];		/* NAME=VALUE settings */
} cases[] = {
	{ "default", case_default, { NULL } },
	{ "events", case_events, { NULL } },
	{ "events_1_11", case_events, { "AQL_KFD_EMU_VERSION=1.11" } },
	{ "1.11", case_version, { "AQL_KFD_EMU_VERSION=1.11" } },
	{ "1.13", case_version, { "AQL_KFD_EMU_VERSION=1.13" } },
	{ "1.14", case_version, { "AQL_KFD_EMU_VERSION=1.14" } },
	{ "1.16", case_version, { "AQL_KFD_EMU_VERSION=1.16" } },
	{ "1.18", case_version, { "AQL_KFD_EMU_VERSION=1.18" } },
	{ "1.5", case_version, { "AQL_KFD_EMU_VERSION=1.5" } },
	{ "2.0", case_major, { "AQL_KFD_EMU_VERSION=2.0" } },
	{ "nogpu", case_nogpu, { "AQL_KFD_EMU_GPUS=" } },
	{ "gfx942", case_gfx942, { "AQL_KFD_EMU_GPUS=gfx942,gfx942" } },
	{ "gfx803", case_gfx803, { "AQL_KFD_EMU_GPUS=gfx90a,gfx803" } },
	{ "no_kfd", case_no_kfd, { "AQL_KFD_EMU_FAIL=open_kfd" } },
	{ "kfd_eacces", case_kfd_eacces, { "AQL_KFD_EMU_FAIL=open_kfd=EACCES" } },
	{ "render_eacces", case_render_eacces, { "AQL_KFD_EMU_FAIL=open_render" } },
	{ "faults", case_faults, { "AQL_KFD_EMU_FAIL=acquire_vm=ENOMEM,runtime_enable" } },
	{ "xnack", case_xnack, { "AQL_KFD_EMU_XNACK=1" } },
	{ "bad_model", case_bad_setting, { "AQL_KFD_EMU_GPUS=gfx90a,gfx1234" } },
	{ "too_new_model", case_bad_setting,
	  { "AQL_KFD_EMU_VERSION=1.11", "AQL_KFD_EMU_GPUS=gfx942" } },
	{ "bad_version", case_bad_setting, { "AQL_KFD_EMU_VERSION=1.x" } },
	{ "bad_fault", case_bad_setting, { "AQL_KFD_EMU_FAIL=acquire_vm=EWHAT" } },
	{ "bad_point", case_bad_setting, { "AQL_KFD_EMU_FAIL=destroy_queue" } },
	{ "bad_xnack", case_bad_setting, { "AQL_KFD_EMU_XNACK=yes" } },
	{ "vram", case_vram, { "AQL_KFD_EMU_VRAM=8388608" } },
	{ "small_bar", case_small_bar, { "AQL_KFD_EMU_BAR=small" } },
	{ "alloc_enomem", case_alloc_enomem, { "AQL_KFD_EMU_FAIL=alloc_enomem:2" } },
	{ "bad_bar", case_bad_setting, { "AQL_KFD_EMU_BAR=medium" } },
	{ "bad_vram", case_bad_setting, { "AQL_KFD_EMU_VRAM=8G" } },
	{ "bad_alloc_fault", case_bad_setting, { "AQL_KFD_EMU_FAIL=alloc_enomem:x" } },
	{ "queues", case_queues, { NULL } },
	{ "queues_6.12", case_queues_6_12, { "AQL_KFD_EMU_CHECKS=6.12" } },
	{ "queues_6.1", case_queues_6_1, { "AQL_KFD_EMU_CHECKS=6.1" } },
	{ "queue_limit_gfx90a", case_queue_limit_gfx90a, { NULL } },
	{ "queue_limit_gfx942", case_queue_limit_gfx942, { "AQL_KFD_EMU_GPUS=gfx942" } },
	{ "cwsr_larger", case_cwsr_larger, { "AQL_KFD_EMU_CHECKS=2025" } },
	{ "create_fault", case_create_fault, { "AQL_KFD_EMU_FAIL=create_queue=EBUSY" } },
	{ "queue_stop", case_queue_stop, { "AQL_KFD_EMU_FAIL=queue_stop:3" } },
	{ "mem_fault", case_mem_fault, { "AQL_KFD_EMU_FAIL=mem_fault:2" } },
	{ "bad_checks", case_bad_setting, { "AQL_KFD_EMU_CHECKS=6.5" } },
	{ "bad_stop", case_bad_setting, { "AQL_KFD_EMU_FAIL=queue_stop" } },
	{ "dispatch", case_dispatch, { kernels_env } },
	{ "exit_live", case_exit_live, { NULL } },
};

int main(int argc, char **argv)
{
	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: %s libaqlkfdemu.so saxpy.host.so [saxpy.gfx90a.hsaco]\n",
			argv[0]);
		return 2;
	}
	lib_path = argv[1];
	hsaco_path = argc == 4 ? argv[3] : NULL;
	snprintf(kernels_env, sizeof(kernels_env), "AQL_KFD_EMU_KERNELS=%s", argv[2]);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pid_t child;
		int status;

		fflush(NULL);
		child = fork();
		if (child == 0) {
			unsetenv("AQL_KFD_EMU_VERSION");
			unsetenv("AQL_KFD_EMU_GPUS");
			unsetenv("AQL_KFD_EMU_FAIL");
			unsetenv("AQL_KFD_EMU_XNACK");
			unsetenv("AQL_KFD_EMU_BAR");
			unsetenv("AQL_KFD_EMU_VRAM");
			unsetenv("AQL_KFD_EMU_CHECKS");
			unsetenv("AQL_KFD_EMU_KERNELS");
			for (int e = 0; e < 3 && cases[i].env[e]; e++)
				putenv((char *)cases[i].env[e]);
			th_passed = th_failed = 0;
			load();
			cases[i].run();
			exit(th_finish() ? 1 : 0);
		}
		CHECK(child > 0 && waitpid(child, &status, 0) == child, "fork for %s", cases[i].name);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "case %s: status 0x%x",
		      cases[i].name, status);
	}
	return th_finish();
}
