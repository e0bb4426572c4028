/* SPDX-License-Identifier: MIT */
/*
 * The KFD emulation's system table (aql/kfd/sys.h): the settings, the
 * emulated files (/dev/kfd, the render nodes), amdkfd's ioctl
 * dispatcher (kfd_chardev.c kfd_ioctl) in front of process.c's handlers,
 * and libdrm's queries of a render node.
 * Emulated files are memfds, so their fds are real and never collide with
 * the process's others.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "aql/kfd/sys.h"
#include "emu.h"

#define MAX_FILES 64

enum file_kind { FILE_KFD = 1, FILE_RENDER };

struct file {
	int fd;
	enum file_kind kind;
	pid_t opener;			/* kfd_process belongs to the opener's mm */
	uint64_t id;			/* one per open: the kernel's struct file */
	const struct emu_gpu *gpu;	/* FILE_RENDER */
};

static struct {
	pthread_mutex_t lock;
	struct file files[MAX_FILES];
	uint64_t next_id;
	pid_t process;			/* the pid whose kfd_process the state is */
	uint64_t calls;			/* ioctls that reached a handler (ioctl_eintr) */
	struct kfdemu_stats stats;
} emu = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct emu_config config;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "EINVAL", EINVAL }, { "ENOMEM", ENOMEM }, { "EBUSY", EBUSY }, { "EIO", EIO },
	{ "ENODEV", ENODEV }, { "EACCES", EACCES }, { "ENOENT", ENOENT }, { "EPERM", EPERM },
	{ "EINTR", EINTR }, { "EEXIST", EEXIST }, { "EAGAIN", EAGAIN }, { "EBADF", EBADF },
};

static void config_fail(const char *fmt, const char *what)
{
	if (!config.error[0])
		snprintf(config.error, sizeof(config.error), fmt, what);
}

/*
 * AQL_KFD_EMU_VERSION: "MAJOR.MINOR", the minor at most 18. Versions
 * older than 1.11, and other majors, are modelled as far as GET_VERSION
 * and the topology, for the agent to refuse: with 1.11's ioctl range.
 */
static void read_version(const char *s)
{
	unsigned major, minor;
	char end;

	config.major = 1;
	config.minor = 18;
	if (!s)
		return;
	if (sscanf(s, "%u.%u%c", &major, &minor, &end) != 2 || minor > 18) {
		config_fail("AQL_KFD_EMU_VERSION=%s: not MAJOR.MINOR with MINOR at most 18", s);
		return;
	}
	config.major = major;
	config.minor = minor;
}

static void read_gpus(const char *s)
{
	char name[32];
	uint32_t simd_id = 0x80001000;	/* kfd_crat.c gpu_processor_id_low */

	if (!s)
		s = config.minor >= 13 || config.major != 1 ? "gfx90a,gfx942" : "gfx90a";
	while (*s) {
		size_t n = strcspn(s, ",");
		const struct emu_model *m;
		struct emu_gpu *g;

		if (n == 0 || n >= sizeof(name)) {
			config_fail("AQL_KFD_EMU_GPUS: an empty or over-long name in \"%s\"", s);
			return;
		}
		memcpy(name, s, n);
		name[n] = '\0';
		s += n + (s[n] == ',');
		m = emu_model_find(name);
		if (!m) {
			config_fail("AQL_KFD_EMU_GPUS: no model \"%s\" (gfx90a, gfx942, gfx803)", name);
			return;
		}
		if (config.major == 1 && config.minor < emu_model_min_minor(m)) {
			snprintf(config.error, sizeof(config.error),
				 "AQL_KFD_EMU_GPUS: %s needs KFD 1.%u or newer, not %u.%u", name,
				 emu_model_min_minor(m), config.major, config.minor);
			return;
		}
		if (config.ngpus == EMU_MAX_GPUS) {
			config_fail("AQL_KFD_EMU_GPUS: more than %s GPUs", "8");
			return;
		}
		g = &config.gpus[config.ngpus];
		g->model = m;
		g->node = config.ngpus + 1;
		/* the kernel's gpu_id is a hash, unique per device */
		g->gpu_id = emu_model_gpu_id(m) + config.ngpus;
		g->render_minor = 128 + config.ngpus;
		g->simd_id_base = simd_id;
		simd_id += emu_model_simds(m);
		config.ngpus++;
	}
}

static int fault(const char *s, size_t n, const char *what, int *slot, int dflt)
{
	size_t w = strlen(what);

	if (n < w || strncmp(s, what, w) || (n > w && s[w] != '='))
		return 0;
	*slot = -dflt;
	if (n == w)
		return 1;
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (strlen(errnos[i].name) == n - w - 1 && !strncmp(s + w + 1, errnos[i].name, n - w - 1)) {
			*slot = -errnos[i].err;
			/* A point fires on every call, and the agent retries
			 * these two for ever, as libhsakmt does: ioctl_eintr
			 * and ioctl_eagain model them. */
			if (*slot == -EINTR || *slot == -EAGAIN)
				config_fail("AQL_KFD_EMU_FAIL: %s: a fault point cannot be EINTR "
					    "or EAGAIN (use ioctl_eintr, ioctl_eagain)", what);
			return 1;
		}
	config_fail("AQL_KFD_EMU_FAIL: no errno named in \"%s\"", s);
	return 1;
}

/* alloc_enomem or alloc_enomem:N: the allocations after the first N fail. */
static int alloc_fault(const char *s, size_t n)
{
	const char *what = "alloc_enomem";
	size_t w = strlen(what);
	char num[24], *end;

	if (n < w || strncmp(s, what, w) || (n > w && s[w] != ':'))
		return 0;
	config.fail_alloc_after = 0;
	if (n == w)
		return 1;
	if (n - w - 1 == 0 || n - w - 1 >= sizeof(num)) {
		config_fail("AQL_KFD_EMU_FAIL: alloc_enomem:N needs a count in \"%s\"", s);
		return 1;
	}
	memcpy(num, s + w + 1, n - w - 1);
	num[n - w - 1] = '\0';
	config.fail_alloc_after = (int64_t)strtoull(num, &end, 10);
	if (*end || num[0] == '-' || config.fail_alloc_after < 0)
		config_fail("AQL_KFD_EMU_FAIL: alloc_enomem:N needs a count in \"%s\"", s);
	return 1;
}

/* what:N, the CPs' packet count of queue_stop and mem_fault. */
static int count_fault(const char *s, size_t n, const char *what, int64_t *slot)
{
	size_t w = strlen(what);
	char num[24], *end;

	if (n < w || strncmp(s, what, w) || (n > w && s[w] != ':'))
		return 0;
	if (n <= w + 1 || n - w - 1 >= sizeof(num)) {
		config_fail("AQL_KFD_EMU_FAIL: %s needs a packet count N", s);
		return 1;
	}
	memcpy(num, s + w + 1, n - w - 1);
	num[n - w - 1] = '\0';
	*slot = (int64_t)strtoull(num, &end, 10);
	if (*end || num[0] < '0' || num[0] > '9' || *slot < 0)
		config_fail("AQL_KFD_EMU_FAIL: %s needs a packet count N", s);
	return 1;
}

/*
 * ioctl_eintr:every=N|first=N, ioctl_eagain:...: every Nth ioctl (N at
 * least 2, so the retry can pass), or the first N, fail with EINTR or
 * EAGAIN before any work, as a signal does before the kernel's handler
 * sleeps (kfd_events.c kfd_wait_on_events, the interruptible waits of
 * MAP and UNMAP) and as init_user_pages' -EAGAIN does for USERPTR
 * (amdgpu_amdkfd_gpuvm.c): the kernel undid what it began.
 */
static int interrupt_fault(const char *s, size_t n, const char *what, uint64_t *every,
			   uint64_t *first)
{
	size_t w = strlen(what);
	char num[24], *end;
	uint64_t *slot;
	size_t k;

	if (n < w || strncmp(s, what, w) || (n > w && s[w] != ':'))
		return 0;
	if (n > w + 7 && !strncmp(s + w, ":every=", 7)) {
		slot = every;
		k = w + 7;
	} else if (n > w + 7 && !strncmp(s + w, ":first=", 7)) {
		slot = first;
		k = w + 7;
	} else {
		config_fail("AQL_KFD_EMU_FAIL: %s needs :every=N or :first=N", s);
		return 1;
	}
	if (n - k >= sizeof(num) || s[k] < '0' || s[k] > '9') {
		config_fail("AQL_KFD_EMU_FAIL: %s needs a count N", s);
		return 1;
	}
	memcpy(num, s + k, n - k);
	num[n - k] = '\0';
	*slot = strtoull(num, &end, 10);
	/* every=1 would fail the retries too: a caller that retries would spin */
	if (*end || !*slot || (slot == every && *slot < 2))
		config_fail("AQL_KFD_EMU_FAIL: %s needs a count N (every: at least 2)", s);
	return 1;
}

/* AQL_KFD_EMU_FAIL: comma-separated fault points, each POINT or POINT=ERRNO. */
static void read_faults(const char *s)
{
	config.fail_alloc_after = -1;
	config.fail_queue_stop = -1;
	config.fail_mem_fault = -1;
	if (!s)
		return;
	while (*s) {
		size_t n = strcspn(s, ",");

		if (!alloc_fault(s, n) &&
		    !interrupt_fault(s, n, "ioctl_eintr", &config.eintr_every,
				     &config.eintr_first) &&
		    !interrupt_fault(s, n, "ioctl_eagain", &config.eagain_every,
				     &config.eagain_first) &&
		    !count_fault(s, n, "queue_stop", &config.fail_queue_stop) &&
		    !count_fault(s, n, "mem_fault", &config.fail_mem_fault) &&
		    !fault(s, n, "create_queue", &config.fail_create_queue, ENOMEM) &&
		    !fault(s, n, "update_queue", &config.fail_update_queue, ETIME) &&
		    !fault(s, n, "open_kfd", &config.fail_open_kfd, ENOENT) &&
		    !fault(s, n, "open_render", &config.fail_open_render, EACCES) &&
		    !fault(s, n, "acquire_vm", &config.fail_acquire_vm, ENOMEM) &&
		    !fault(s, n, "runtime_enable", &config.fail_runtime_enable, EEXIST) &&
		    !fault(s, n, "drm_query", &config.fail_drm_query, EBADF)) {
			config_fail("AQL_KFD_EMU_FAIL: no fault point in \"%s\" (README.md lists "
				    "them)", s);
			return;
		}
		s += n + (s[n] == ',');
	}
}

/*
 * AQL_KFD_EMU_DENY, AQL_KFD_EMU_NO_RENDER: comma-separated GPU nodes
 * (KFD node numbers, 1 up) that the device cgroup denies the process, or
 * whose render node the container's /dev lacks.
 */
static void read_nodes(const char *var, const char *s, int deny)
{
	while (s && *s) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (end == s || (*end && *end != ',') || v < 1 || v > config.ngpus) {
			snprintf(config.error, sizeof(config.error),
				 "%s: \"%s\" is not a list of GPU nodes 1 to %u", var, s, config.ngpus);
			return;
		}
		if (deny)
			config.gpus[v - 1].denied = 1;
		else
			config.gpus[v - 1].no_render = 1;
		s = end + (*end == ',');
	}
}

/* AQL_KFD_EMU_BAR=large|small, AQL_KFD_EMU_VRAM=<bytes>, at least 1 MiB. */
static void read_memory(const char *bar, const char *vram)
{
	char *end;

	if (bar && strcmp(bar, "large") && strcmp(bar, "small"))
		config_fail("AQL_KFD_EMU_BAR=%s: not large or small", bar);
	config.small_bar = bar && !strcmp(bar, "small");
	if (!vram)
		return;
	config.vram = strtoull(vram, &end, 10);
	if (*end || vram[0] < '0' || vram[0] > '9' || config.vram < (1u << 20)) {
		config.vram = 0;
		config_fail("AQL_KFD_EMU_VRAM=%s: not a byte count of at least 1048576", vram);
	}
}

/* AQL_KFD_EMU_GPU_CLOCK_HZ=<Hz>: the GPUs' timestamp counter rate. */
static void read_clock(const char *hz)
{
	char *end;

	if (!hz)
		return;
	config.gpu_clock_hz = strtoull(hz, &end, 10);
	if (*end || hz[0] < '0' || hz[0] > '9' || config.gpu_clock_hz < 1000 ||
	    config.gpu_clock_hz > 10000000000ull) {
		config.gpu_clock_hz = 0;
		config_fail("AQL_KFD_EMU_GPU_CLOCK_HZ=%s: not a rate from 1000 to 10000000000", hz);
	}
}

/* AQL_KFD_EMU_CHECKS=6.1|6.12|2025: the queue-buffer rules of that kernel. */
static void read_checks(const char *s)
{
	config.checks = EMU_CHECKS_2025;
	if (!s || !strcmp(s, "2025"))
		return;
	if (!strcmp(s, "6.1"))
		config.checks = EMU_CHECKS_6_1;
	else if (!strcmp(s, "6.12"))
		config.checks = EMU_CHECKS_6_12;
	else
		config_fail("AQL_KFD_EMU_CHECKS=%s: not 6.1, 6.12 or 2025", s);
}

static void read_config(void)
{
	const char *x = getenv("AQL_KFD_EMU_XNACK");

	read_version(getenv("AQL_KFD_EMU_VERSION"));
	/*
	 * AMDKFD_COMMAND_END: 0x24 in 1.11 (the last ioctl 0x23,
	 * AVAILABLE_MEMORY), 0x25 in 1.12 (EXPORT_DMABUF), 0x27 from 1.13
	 * (RUNTIME_ENABLE 0x25, DBG_TRAP 0x26) through 1.18.
	 */
	config.command_end = config.minor >= 13 ? 0x27 : config.minor == 12 ? 0x25 : 0x24;
	read_gpus(getenv("AQL_KFD_EMU_GPUS"));
	read_faults(getenv("AQL_KFD_EMU_FAIL"));
	if (!config.error[0])
		read_nodes("AQL_KFD_EMU_DENY", getenv("AQL_KFD_EMU_DENY"), 1);
	if (!config.error[0])
		read_nodes("AQL_KFD_EMU_NO_RENDER", getenv("AQL_KFD_EMU_NO_RENDER"), 0);
	read_memory(getenv("AQL_KFD_EMU_BAR"), getenv("AQL_KFD_EMU_VRAM"));
	read_checks(getenv("AQL_KFD_EMU_CHECKS"));
	read_clock(getenv("AQL_KFD_EMU_GPU_CLOCK_HZ"));
	if (x && strcmp(x, "0") && strcmp(x, "1"))
		config_fail("AQL_KFD_EMU_XNACK=%s: not 0 or 1", x);
	config.xnack = x && !strcmp(x, "1");
	if (config.error[0]) {
		config.ngpus = 0;
		fprintf(stderr, "kfd-emu: %s\n", config.error);
	}
}

const struct emu_config *emu_config(void)
{
	pthread_once(&config_once, read_config);
	return &config;
}

int emu_at_least(uint32_t minor)
{
	const struct emu_config *c = emu_config();

	return c->major > 1 || (c->major == 1 && c->minor >= minor);
}

const struct emu_gpu *emu_gpu_by_id(uint32_t gpu_id)
{
	const struct emu_config *c = emu_config();

	for (uint32_t i = 0; i < c->ngpus; i++)
		if (c->gpus[i].gpu_id == gpu_id && !c->gpus[i].denied)
			return &c->gpus[i];
	return NULL;
}

/*
 * copy_from_user/copy_to_user: through process_vm_readv/writev on this
 * process, which fail with EFAULT on an unmapped range as the kernel's
 * copies do. Where a sandbox forbids them, a range in the first page is
 * still -EFAULT and the rest is copied directly.
 */
static int user_copy(void *dst, const void *src, size_t n, int to_user)
{
	struct iovec local = { to_user ? (void *)src : dst, n };
	struct iovec remote = { to_user ? dst : (void *)src, n };
	uintptr_t user = (uintptr_t)remote.iov_base;
	ssize_t r;

	if (n == 0)
		return 0;
	if (user < 4096 || user + n < user)
		return -EFAULT;
	r = to_user ? process_vm_writev(getpid(), &local, 1, &remote, 1, 0)
		    : process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
	if (r == (ssize_t)n)
		return 0;
	if (r < 0 && (errno == ENOSYS || errno == EPERM)) {
		memcpy(dst, src, n);
		return 0;
	}
	return -EFAULT;
}

int emu_copy_from_user(void *dst, const void *src, size_t n)
{
	return user_copy(dst, src, n, 0);
}

int emu_copy_to_user(void *dst, const void *src, size_t n)
{
	return user_copy(dst, src, n, 1);
}

static struct file *file_of(int fd)
{
	for (int i = 0; i < MAX_FILES; i++)
		if (emu.files[i].kind && emu.files[i].fd == fd)
			return &emu.files[i];
	return NULL;
}

int emu_render_file(int fd, const struct emu_gpu **gpu, uint64_t *file_id)
{
	struct file *f = file_of(fd);

	if (!f)
		return fcntl(fd, F_GETFD) < 0 ? -EBADF : -EINVAL;
	if (f->kind != FILE_RENDER)
		return -EINVAL;
	*gpu = f->gpu;
	*file_id = f->id;
	return 0;
}

static const struct emu_gpu *render_node(const char *path)
{
	const struct emu_config *c = emu_config();
	const char *prefix = "/dev/dri/renderD";
	char *end;
	unsigned long minor;

	if (strncmp(path, prefix, strlen(prefix)))
		return NULL;
	path += strlen(prefix);
	if (*path < '1' || *path > '9')
		return NULL;
	minor = strtoul(path, &end, 10);
	if (*end)
		return NULL;
	for (uint32_t i = 0; i < c->ngpus; i++)
		if (c->gpus[i].render_minor == minor)
			return &c->gpus[i];
	return NULL;
}

static int emu_open(const char *path, int flags)
{
	const struct emu_config *c = emu_config();
	const struct emu_gpu *gpu = NULL;
	enum file_kind kind;
	struct file *f = NULL;
	int fd, fail;

	(void)flags;
	if (!path)
		return -EFAULT;
	if (c->error[0])
		return -EINVAL;
	if (!strcmp(path, "/dev/kfd")) {
		kind = FILE_KFD;
		fail = c->fail_open_kfd;
	} else if ((gpu = render_node(path))) {
		kind = FILE_RENDER;
		fail = c->fail_open_render;
		/* a container's /dev without the node; a node the device
		 * cgroup denies (device_cgroup.c devcgroup_check_permission,
		 * from the open of the character device) */
		if (gpu->no_render)
			return -ENOENT;
		if (gpu->denied)
			return -EPERM;
	} else {
		return -ENOENT;
	}
	if (fail)
		return fail;
	fd = memfd_create(kind == FILE_KFD ? "kfd-emu:kfd" : "kfd-emu:render", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&emu.lock);
	for (int i = 0; i < MAX_FILES && !f; i++)
		if (!emu.files[i].kind)
			f = &emu.files[i];
	if (!f) {
		pthread_mutex_unlock(&emu.lock);
		close(fd);
		return -EMFILE;
	}
	/* kfd_open → kfd_create_process: one process per mm, made by the
	 * first open; a forked child's first open makes its own. */
	if (kind == FILE_KFD && emu.process != getpid()) {
		emu.process = getpid();
		emu_process_reset();
	}
	*f = (struct file){ .fd = fd, .kind = kind, .opener = getpid(), .id = ++emu.next_id,
			    .gpu = gpu };
	if (kind == FILE_KFD)
		emu.stats.kfd_opens++;
	else
		emu.stats.render_opens++;
	pthread_mutex_unlock(&emu.lock);
	return fd;
}

static int emu_close(int fd)
{
	struct file *f;

	pthread_mutex_lock(&emu.lock);
	f = file_of(fd);
	if (f)
		f->kind = 0;
	pthread_mutex_unlock(&emu.lock);
	if (!f)
		return -EBADF;
	return close(fd) ? -errno : 0;
}

static void warn_unemulated(unsigned int nr)
{
	static uint64_t warned;

	if (nr < 64 && !(warned & 1ull << nr)) {
		warned |= 1ull << nr;
		fprintf(stderr, "kfd-emu: ioctl 0x%02x is not emulated yet: -ENOSYS\n", nr);
	}
}

/* kfd_chardev.c kfd_ioctl, with the lock held. */
/* The -errno ioctl_eintr or ioctl_eagain gives this call, or 0. Under
 * emu.lock. */
static int interrupted(void)
{
	const struct emu_config *c = emu_config();
	uint64_t k = ++emu.calls;

	if ((c->eintr_every && k % c->eintr_every == 0) || k <= c->eintr_first) {
		emu.stats.ioctls_eintr++;
		return -EINTR;
	}
	if ((c->eagain_every && k % c->eagain_every == 0) || k <= c->eagain_first) {
		emu.stats.ioctls_eagain++;
		return -EAGAIN;
	}
	return 0;
}

static int kfd_ioctl(struct file *f, unsigned long request, void *arg)
{
	unsigned int cmd = (unsigned int)request, nr = _IOC_NR(cmd), kcmd;
	unsigned int usize, asize;
	unsigned char stack[128], *kdata = stack;
	emu_ioctl_fn fn;
	int r;

	/* Outside [AMDKFD_COMMAND_START, AMDKFD_COMMAND_END): -ENOTTY. The
	 * type byte is not checked; the number alone picks the ioctl. */
	if (nr < 1 || nr >= emu_config()->command_end)
		return -ENOTTY;
	/* Only the process that opened /dev/kfd may use the fd: -EBADF. */
	if (f->opener != getpid() || emu.process != getpid())
		return -EBADF;
	kcmd = emu_ioctl_lookup(nr, &fn);
	if (!kcmd) {
		emu.stats.ioctls_unemulated++;
		warn_unemulated(nr);
		return -ENOSYS;
	}
	/*
	 * The caller's _IOC_SIZE is copied in and out; the kernel's struct,
	 * when larger, is zero-filled past it. Direction bits are the
	 * kernel's, never the caller's.
	 */
	usize = asize = _IOC_SIZE(cmd);
	if (_IOC_SIZE(kcmd) > asize)
		asize = _IOC_SIZE(kcmd);
	if (asize > sizeof(stack)) {
		kdata = malloc(asize);
		if (!kdata)
			return -ENOMEM;
	}
	memset(kdata, 0, asize);
	if (_IOC_DIR(kcmd) & _IOC_WRITE) {
		r = emu_copy_from_user(kdata, arg, usize);
		if (r)
			goto out;
	}
	/* ioctl_eintr, ioctl_eagain: the handler's work undone, the args
	 * copied back as they came (kfd_ioctl copies out on failure too) */
	r = interrupted();
	/* WAIT_EVENTS sleeps: without the lock, as the kernel's wait drops
	 * its mutexes (events.c has its own lock) */
	if (!r && nr == _IOC_NR(AMDKFD_IOC_WAIT_EVENTS)) {
		pthread_mutex_unlock(&emu.lock);
		r = fn(kdata);
		pthread_mutex_lock(&emu.lock);
	} else if (!r) {
		r = fn(kdata);
	}
	if ((_IOC_DIR(kcmd) & _IOC_READ) && emu_copy_to_user(arg, kdata, usize))
		r = -EFAULT;
out:
	if (kdata != stack)
		free(kdata);
	return r;
}

static int emu_ioctl(int fd, unsigned long request, void *arg)
{
	struct file *f;
	unsigned int nr = _IOC_NR((unsigned int)request);
	int r;

	pthread_mutex_lock(&emu.lock);
	f = file_of(fd);
	if (!f) {
		pthread_mutex_unlock(&emu.lock);
		/* not an emulated file: the fd's own driver would answer */
		return fcntl(fd, F_GETFD) < 0 ? -EBADF : -ENOTTY;
	}
	if (f->kind == FILE_RENDER) {
		pthread_mutex_unlock(&emu.lock);
		fprintf(stderr, "kfd-emu: DRM ioctls are not emulated yet: -ENOSYS\n");
		return -ENOSYS;
	}
	r = kfd_ioctl(f, request, arg);
	if (nr < KFDEMU_IOCTL_NRS)
		emu.stats.ioctls[nr]++;
	if (r < 0)
		emu.stats.ioctls_failed++;
	pthread_mutex_unlock(&emu.lock);
	return r;
}

/*
 * libdrm_amdgpu's queries (sys.h gpu_query) on an emulated render node:
 * amdgpu_device_initialize, then what amdgpu_kms.c amdgpu_info_ioctl
 * answers for the node's model. An fd that is not open is -EBADF, as the
 * real table finds it (libdrm's amdgpu_get_auth fails DRM_IOCTL_GET_CLIENT
 * on it); any other fd is -ENOTTY, the emulation's own rule (the kernel
 * would hand GET_CLIENT to that file's driver: /dev/kfd would run its own
 * ioctl 5). The drm_query fault fails amdgpu_device_initialize, by default
 * as libdrm does for a GPU whose acceleration is not working (-EBADF,
 * AMDGPU_INFO_ACCEL_WORKING 0). Heap usage is not counted: 0.
 */
static int emu_gpu_query(int fd, struct aql_kfd_gpu_query *out)
{
	const struct emu_config *c = emu_config();
	struct file *f;
	int r = 0;

	*out = (struct aql_kfd_gpu_query){ 0 };
	pthread_mutex_lock(&emu.lock);
	f = file_of(fd);
	if (!f)
		r = fcntl(fd, F_GETFD) < 0 ? -EBADF : -ENOTTY;
	else if (f->kind != FILE_RENDER)
		r = -ENOTTY;
	else if (c->fail_drm_query)
		r = c->fail_drm_query;
	if (f)
		emu.stats.drm_queries++;
	if (r) {
		snprintf(out->failed, sizeof(out->failed), "amdgpu_device_initialize");
		pthread_mutex_unlock(&emu.lock);
		return r;
	}
	emu_model_drm(f->gpu->model, out);
	pthread_mutex_unlock(&emu.lock);
	return 0;
}

/*
 * Anonymous mappings and files that are not emulated go to libc; a render
 * node maps the BO whose fake offset it is given (memory.c); /dev/kfd maps
 * the doorbells (queue.c) by the type in the offset (kfd_chardev.c kfd_mmap).
 */
static void *emu_mmap(void *addr, size_t length, int prot, int flags, int fd, uint64_t offset)
{
	struct file *f = NULL;
	void *p;

	pthread_mutex_lock(&emu.lock);
	if (fd >= 0)
		f = file_of(fd);
	if (f && f->kind == FILE_RENDER) {
		p = emu_memory_mmap(f->gpu, f->id, addr, length, prot, flags, offset);
		if ((uintptr_t)p < (uintptr_t)-4095)
			emu.stats.bo_mmaps++;
		pthread_mutex_unlock(&emu.lock);
		return p;
	}
	if (f && (offset & KFD_MMAP_TYPE_MASK) == KFD_MMAP_TYPE_DOORBELL) {
		/* kfd_get_process(current): a process that has not opened
		 * /dev/kfd itself (a forked child) has none, -EINVAL */
		p = emu.process == getpid() ? emu_doorbell_mmap(addr, length, prot, flags, offset)
					    : (void *)(intptr_t)-EINVAL;
		pthread_mutex_unlock(&emu.lock);
		return p;
	}
	pthread_mutex_unlock(&emu.lock);
	if (f) {
		fprintf(stderr, "kfd-emu: mmap of /dev/kfd is not emulated yet\n");
		return (void *)(intptr_t)-ENOSYS;
	}
	p = mmap(addr, length, prot, flags, fd, (off_t)offset);
	return p == MAP_FAILED ? (void *)(intptr_t)-errno : p;
}

static int emu_munmap(void *addr, size_t length)
{
	return munmap(addr, length) ? -errno : 0;
}

int kfdemu_stats(struct kfdemu_stats *out)
{
	const struct emu_config *c = emu_config();

	if (!out)
		return -1;
	pthread_mutex_lock(&emu.lock);
	*out = emu.stats;
	out->open_files = 0;
	for (int i = 0; i < MAX_FILES; i++)
		out->open_files += emu.files[i].kind != 0;
	out->gpus = c->ngpus;
	out->version_major = c->major;
	out->version_minor = c->minor;
	snprintf(out->config_error, sizeof(out->config_error), "%s", c->error);
	if (emu.process == getpid()) {
		emu_process_stats(out);
		emu_memory_stats(out);
		emu_queue_stats(out);
		emu_events_stats(out);
	}
	else
		out->xnack = c->xnack;
	pthread_mutex_unlock(&emu.lock);
	return 0;
}

int kfdemu_event_interrupt(uint32_t gpu_id, uint32_t event_id)
{
	return emu_event_interrupt(gpu_id, event_id);
}

void kfdemu_vm_fault(uint32_t gpu_id, uint64_t va, int write, int exec)
{
	emu_event_vm_fault(gpu_id, va, write, exec);
}

void kfdemu_gpu_reset(uint32_t gpu_id, int ecc)
{
	emu_event_gpu_reset(gpu_id, ecc);
}

int kfdemu_queue_exception(uint64_t err_payload_addr, uint32_t err_event_id, uint64_t ec_mask)
{
	return emu_event_queue_exception(err_payload_addr, err_event_id, ec_mask);
}

int kfdemu_queue_at(uint32_t queue_id, struct kfdemu_queue *out)
{
	int r = -1;

	if (!out)
		return -1;
	pthread_mutex_lock(&emu.lock);
	if (emu.process == getpid())
		r = emu_queue_at(queue_id, out);
	pthread_mutex_unlock(&emu.lock);
	return r;
}

int kfdemu_bo_at(uint64_t addr, struct kfdemu_bo *out)
{
	int r = -1;

	if (!out)
		return -1;
	pthread_mutex_lock(&emu.lock);
	if (emu.process == getpid())
		r = emu_memory_lookup(addr, out);
	pthread_mutex_unlock(&emu.lock);
	return r;
}

/* "kfd-emu 1.18 gfx90a,gfx942": what aql-info shows as the table's name. */
static char name[64] = "kfd-emu";

static void fork_prepare(void)
{
	pthread_mutex_lock(&emu.lock);
	emu_events_fork_prepare();
}

static void fork_done(void)
{
	emu_events_fork_done();
	pthread_mutex_unlock(&emu.lock);
}

/* Process exit: the CPs stop first, as KFD tears the queues down, so that
 * none reads memory the process's own exit handlers let go. */
__attribute__((destructor)) static void stop_queues(void)
{
	pthread_mutex_lock(&emu.lock);
	if (emu.process == getpid())
		emu_queue_reset();
	pthread_mutex_unlock(&emu.lock);
}

__attribute__((constructor)) static void describe(void)
{
	const struct emu_config *c = emu_config();
	size_t len = strlen(name);

	/* A child forked while another thread is in an ioctl gets a lock
	 * that is free, and its own process at its first open. */
	pthread_atfork(fork_prepare, fork_done, fork_done);

	len += (size_t)snprintf(name + len, sizeof(name) - len, " %u.%u", c->major, c->minor);
	for (uint32_t i = 0; i < c->ngpus && len < sizeof(name); i++)
		len += (size_t)snprintf(name + len, sizeof(name) - len, "%c%s", i ? ',' : ' ',
					emu_model_name(c->gpus[i].model));
}

const struct aql_kfd_sys aql_kfd_sys_v1 = {
	.abi = AQL_KFD_SYS_ABI,
	.name = name,
	.open = emu_open,
	.close = emu_close,
	.ioctl = emu_ioctl,
	.mmap = emu_mmap,
	.munmap = emu_munmap,
	.read_file = emu_read_file,
	.list_dir = emu_list_dir,
	.gpu_query = emu_gpu_query,
};
