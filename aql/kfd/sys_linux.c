/* SPDX-License-Identifier: MIT */
/*
 * The system table (sys.h): libc's calls with errno turned into -errno
 * and libdrm_amdgpu's queries, or the emulation named by AQL_KFD_SYS. The
 * choice is made once per process; a library that fails to load is the
 * reason, kept, for every later call.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <amdgpu.h>
#include <amdgpu_drm.h>

#include "aql/kfd/sys.h"
#include "util/error.h"

static int sys_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

static int sys_close(int fd)
{
	return close(fd) ? -errno : 0;
}

/* Once: aql_kfd_ioctl() retries, for this table and an emulation's. */
static int sys_ioctl(int fd, unsigned long request, void *arg)
{
	int r = ioctl(fd, request, arg);

	return r < 0 ? -errno : r;
}

int aql_kfd_ioctl(const struct aql_kfd_sys *sys, int fd, unsigned long request, void *arg)
{
	int r;

	do
		r = sys->ioctl(fd, request, arg);
	while (r == -EINTR || r == -EAGAIN);
	return r;
}

static void *sys_mmap(void *addr, size_t length, int prot, int flags, int fd, uint64_t offset)
{
	void *p = mmap(addr, length, prot, flags, fd, (off_t)offset);

	return p == MAP_FAILED ? (void *)(intptr_t)-errno : p;
}

static int sys_munmap(void *addr, size_t length)
{
	return munmap(addr, length) ? -errno : 0;
}

static long sys_read_file(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	int fd;

	if (size == 0)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (len < size - 1) {
		ssize_t n = read(fd, buf + len, size - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;

			close(fd);
			return -err;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	buf[len] = '\0';
	return (long)len;
}

static int sys_list_dir(const char *path, int (*each)(const char *name, void *user), void *user)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int r = 0;

	if (!d)
		return -errno;
	while (r == 0 && (errno = 0, e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			r = each(e->d_name, user);
	}
	if (r == 0 && errno)
		r = -errno;
	closedir(d);
	return r;
}

static void heap(struct aql_kfd_heap *out, const struct drm_amdgpu_heap_info *in)
{
	*out = (struct aql_kfd_heap){ in->total_heap_size, in->usable_heap_size, in->heap_usage,
				      in->max_allocation };
}

static int query(amdgpu_device_handle dev, struct aql_kfd_gpu_query *out)
{
	const struct {
		unsigned type;
		const char *name;
		uint32_t *version;
	} fws[] = {
		{ AMDGPU_INFO_FW_GFX_MEC, "MEC", &out->fw_mec },
		{ AMDGPU_INFO_FW_GFX_RLC, "RLC", &out->fw_rlc },
		{ AMDGPU_INFO_FW_SDMA, "SDMA", &out->fw_sdma },
		{ AMDGPU_INFO_FW_SMC, "SMC", &out->fw_smc },
		{ AMDGPU_INFO_FW_SOS, "SOS", &out->fw_sos },
	};
	struct drm_amdgpu_memory_info mem;
	struct amdgpu_gpu_info gi;
	const char *name;
	int r;

	/* A copy of what amdgpu_device_initialize asked the kernel. */
	amdgpu_query_gpu_info(dev, &gi);
	out->asic_id = gi.asic_id;
	out->pci_rev = gi.pci_rev_id;
	out->chip_rev = gi.chip_rev;
	out->chip_external_rev = gi.chip_external_rev;
	out->family_id = gi.family_id;
	out->max_engine_clock_mhz = (uint32_t)(gi.max_engine_clk / 1000);	/* kHz */
	out->max_memory_clock_mhz = (uint32_t)(gi.max_memory_clk / 1000);
	/* NULL or a generic name, by libdrm version, when its amdgpu.ids
	 * lacks the device */
	name = amdgpu_get_marketing_name(dev);
	snprintf(out->marketing_name, sizeof(out->marketing_name), "%s", name ? name : "");
	r = amdgpu_query_info(dev, AMDGPU_INFO_MEMORY, sizeof(mem), &mem);
	if (r) {
		snprintf(out->failed, sizeof(out->failed), "amdgpu_query_info(AMDGPU_INFO_MEMORY)");
		return r;
	}
	heap(&out->vram, &mem.vram);
	heap(&out->visible_vram, &mem.cpu_accessible_vram);
	heap(&out->gtt, &mem.gtt);
	for (size_t i = 0; i < sizeof(fws) / sizeof(fws[0]); i++) {
		uint32_t feature;

		r = amdgpu_query_firmware_version(dev, fws[i].type, 0, 0, fws[i].version, &feature);
		if (r) {
			snprintf(out->failed, sizeof(out->failed), "amdgpu_query_firmware_version(%s)",
				 fws[i].name);
			return r;
		}
	}
	return 0;
}

/*
 * libdrm's ioctls retry -EINTR and -EAGAIN themselves (xf86drm.c
 * drmIoctl), so the queries need no loop here.
 *
 * libdrm's amdgpu_device_initialize dups the fd and keeps one device per
 * GPU, reference-counted, until the last deinitialize (amdgpu_device.c):
 * the dup is the same open file, so the render node's VM is untouched.
 */
static int sys_gpu_query(int render_fd, struct aql_kfd_gpu_query *out)
{
	amdgpu_device_handle dev;
	uint32_t major, minor;
	int r;

	*out = (struct aql_kfd_gpu_query){ 0 };
	r = amdgpu_device_initialize(render_fd, &major, &minor, &dev);
	if (r) {
		snprintf(out->failed, sizeof(out->failed), "amdgpu_device_initialize");
		/* amdgpu_get_auth passes drmIoctl's -1 on, for a file that is
		 * not a render node and refused DRM_IOCTL_GET_CLIENT */
		if (r == -1)
			r = fcntl(render_fd, F_GETFD) < 0 ? -EBADF : -ENOTTY;
		return r;
	}
	r = query(dev, out);
	amdgpu_device_deinitialize(dev);
	return r;
}

static const struct aql_kfd_sys linux_sys = {
	.abi = AQL_KFD_SYS_ABI,
	.name = "linux",
	.open = sys_open,
	.close = sys_close,
	.ioctl = sys_ioctl,
	.mmap = sys_mmap,
	.munmap = sys_munmap,
	.read_file = sys_read_file,
	.list_dir = sys_list_dir,
	.gpu_query = sys_gpu_query,
};

static pthread_once_t choose_once = PTHREAD_ONCE_INIT;
static const struct aql_kfd_sys *chosen;
static struct aql_kept_failure choose_failure;

/* Why there is no table: kept for every later call. */
#define refuse(st, ...) aql_keep_failure(&choose_failure, aql_fail(st, __VA_ARGS__))

static void choose(void)
{
	const char *path = secure_getenv("AQL_KFD_SYS");
	const struct aql_kfd_sys *t;
	void *lib;

	if (!path || !path[0]) {
		chosen = &linux_sys;
		return;
	}
	/* Kept loaded until exit: the table's functions live in it. */
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		refuse(AQL_ERR_NOT_FOUND, "the KFD emulation AQL_KFD_SYS=%s does not load: %s",
		       path, dlerror());
		return;
	}
	t = dlsym(lib, "aql_kfd_sys_v1");
	if (!t) {
		refuse(AQL_ERR_NOT_FOUND, "the KFD emulation AQL_KFD_SYS=%s has no aql_kfd_sys_v1",
		       path);
		dlclose(lib);
		return;
	}
	if (t->abi != AQL_KFD_SYS_ABI) {
		refuse(AQL_ERR_UNSUPPORTED,
		       "the KFD emulation AQL_KFD_SYS=%s has table ABI %u, and this libaql needs %u: "
		       "rebuild it with this aql", path, t->abi, AQL_KFD_SYS_ABI);
		dlclose(lib);
		return;
	}
	if (!t->name || !t->open || !t->close || !t->ioctl || !t->mmap || !t->munmap ||
	    !t->read_file || !t->list_dir || !t->gpu_query) {
		refuse(AQL_ERR_UNSUPPORTED,
		       "the KFD emulation AQL_KFD_SYS=%s leaves an entry of aql_kfd_sys_v1 empty",
		       path);
		dlclose(lib);
		return;
	}
	chosen = t;
}

aql_status aql_kfd_sys_get(const struct aql_kfd_sys **out)
{
	pthread_once(&choose_once, choose);
	if (!chosen)
		return aql_fail_kept(&choose_failure, NULL);
	*out = chosen;
	return AQL_OK;
}
