/* SPDX-License-Identifier: MIT */
/*
 * Everything the AMD agent (aql/kfd/) does to the system goes through one
 * table: opening /dev/kfd and render nodes, ioctls, mmaps and reading the
 * KFD topology in sysfs. The real table is libc's (sys_linux.c). Tests put
 * a strict emulation of amdkfd in its place (tests/kfd_emu/): a separate
 * shared library named by the environment variable AQL_KFD_SYS, which
 * exports `const struct aql_kfd_sys aql_kfd_sys_v1`. The table is chosen
 * once per process, so it is the one place that says what the agent asks
 * of the kernel. libdrm's amdgpu queries make their own ioctls, so the
 * table holds the whole query (gpu_query) rather than its ioctls.
 *
 * Every function returns 0 (or an fd, or a byte count) on success and
 * -errno on failure, never sets errno. All are thread safe.
 */
#ifndef AQL_KFD_SYS_H
#define AQL_KFD_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <aql/status.h>

/* Bumped when the table changes; a table of another version is refused. */
#define AQL_KFD_SYS_ABI 2u

/* The KFD topology's root in sysfs (kfd_topology.c). */
#define AQL_KFD_TOPOLOGY "/sys/devices/virtual/kfd/kfd/topology"

/* One memory heap of AMDGPU_INFO_MEMORY (struct drm_amdgpu_heap_info), bytes. */
struct aql_kfd_heap {
	uint64_t total;			/* total_heap_size */
	uint64_t usable;		/* usable_heap_size: less what the kernel pinned */
	uint64_t used;			/* heap_usage: every process's */
	uint64_t max_allocation;	/* the largest single BO the kernel would make */
};

/*
 * What libdrm_amdgpu says of a GPU that the KFD topology does not: its
 * name, the ASIC's revision, clocks, memory heaps and firmware.
 */
struct aql_kfd_gpu_query {
	char marketing_name[128];	/* amdgpu_get_marketing_name; "" when libdrm has none */
	char failed[64];		/* on failure, the libdrm call that failed */
	/* amdgpu_query_gpu_info */
	uint32_t asic_id;		/* the PCI device ID */
	uint32_t pci_rev;		/* the PCI revision ID */
	uint32_t chip_rev, chip_external_rev, family_id;	/* AMDGPU_FAMILY_* */
	uint32_t max_engine_clock_mhz, max_memory_clock_mhz;
	/* AMDGPU_INFO_MEMORY: all VRAM, the part the host can map, GTT */
	struct aql_kfd_heap vram, visible_vram, gtt;
	/* amdgpu_query_firmware_version, instance and index 0: the MEC
	 * (compute), RLC, SDMA engine 0, SMC (power) and PSP SOS microcode */
	uint32_t fw_mec, fw_rlc, fw_sdma, fw_smc, fw_sos;
};

struct aql_kfd_sys {
	uint32_t abi;			/* AQL_KFD_SYS_ABI */
	const char *name;		/* "linux", or the emulation's own name */
	/* open(2) with O_CLOEXEC added: /dev/kfd, /dev/dri/renderD<minor>. */
	int (*open)(const char *path, int flags);
	int (*close)(int fd);
	/* ioctl(2) on an fd from open: KFD's and DRM's, once; the agent
	 * calls it through aql_kfd_ioctl(), never directly. */
	int (*ioctl)(int fd, unsigned long request, void *arg);
	/* mmap(2), the result or (void *)(intptr_t)-errno; munmap(2). */
	void *(*mmap)(void *addr, size_t length, int prot, int flags, int fd, uint64_t offset);
	int (*munmap)(void *addr, size_t length);
	/*
	 * Read the file at path (a sysfs file under AQL_KFD_TOPOLOGY) into
	 * buf, at most size - 1 bytes, NUL-terminated: the bytes read, or
	 * -ENOENT where it does not exist, or another -errno.
	 */
	long (*read_file)(const char *path, char *buf, size_t size);
	/*
	 * Call each(name, user) for every entry of the folder at path but "."
	 * and "..", in no set order; stop early when each returns non-zero
	 * and return that value. 0 when done, -errno (-ENOENT: no folder).
	 */
	int (*list_dir)(const char *path, int (*each)(const char *name, void *user), void *user);
	/*
	 * libdrm_amdgpu's queries on render_fd, a render node from open:
	 * 0 and *out filled, or -errno with out->failed naming the call
	 * (-EBADF where render_fd is not open, -ENOTTY where it is no DRM
	 * device). render_fd stays open and its own.
	 */
	int (*gpu_query)(int render_fd, struct aql_kfd_gpu_query *out);
};

/*
 * sys->ioctl, again while it fails with -EINTR or -EAGAIN, as libhsakmt's
 * hsakmt_ioctl does (libhsakmt.c): a signal during an interruptible wait
 * (MAP and UNMAP wait for page-table updates, WAIT_EVENTS sleeps) or
 * USERPTR pages not yet available (amdgpu_amdkfd_gpuvm.c init_user_pages)
 * change nothing the caller must undo. The same args go again: an
 * interrupted WAIT_EVENTS has written the time left into args->timeout
 * (kfd_events.c kfd_wait_on_events, Linux 6.0), so the retry does not
 * restart the full timeout. The retries are not counted, as in libhsakmt:
 * each -EINTR is a signal delivered, each -EAGAIN a race with an MMU
 * notifier, and a bound would turn a busy signal handler into a failure.
 * Every other result is sys->ioctl's. Thread safe.
 */
int aql_kfd_ioctl(const struct aql_kfd_sys *sys, int fd, unsigned long request, void *arg);

/*
 * The table for this process: libc's unless AQL_KFD_SYS names an
 * emulation, read once (secure_getenv: never in a setuid program).
 * Errors: AQL_ERR_NOT_FOUND when the named library does not load or has
 * no aql_kfd_sys_v1, AQL_ERR_UNSUPPORTED for another ABI version; the
 * message names the library. Thread safe.
 */
aql_status aql_kfd_sys_get(const struct aql_kfd_sys **out);

#endif
