/* SPDX-License-Identifier: MIT */
/*
 * The amdkfd ioctl ABI for aql/kfd/ and the KFD emulation: the system's
 * <linux/kfd_ioctl.h> (Debian 12: KFD 1.11, Linux 6.1), plus what newer
 * kernels added that aql uses, each under #ifndef so a newer header wins.
 * Only this file includes kfd_ioctl.h (see compat/drm/drm.h for why).
 * Layouts are the kernel's (include/uapi/linux/kfd_ioctl.h); the sizes
 * are asserted below, as aql depends on them.
 */
#ifndef AQL_KFD_ABI_H
#define AQL_KFD_ABI_H

#include <stdint.h>
#include <linux/kfd_ioctl.h>
#include <linux/kfd_sysfs.h>

/* KFD 1.13 (the debugger API): runtime enable (kfd_chardev.c
 * kfd_ioctl_runtime_enable). Optional upstream before CREATE_QUEUE. */
#ifndef AMDKFD_IOC_RUNTIME_ENABLE
struct kfd_ioctl_runtime_enable_args {
	__u64 r_debug;
	__u32 mode_mask;
	__u32 capabilities_mask;
};
#define KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK 1
#define KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK 2
#define AMDKFD_IOC_RUNTIME_ENABLE AMDKFD_IOWR(0x25, struct kfd_ioctl_runtime_enable_args)
#endif

/* The header writes this flag as (1 << 31), a signed shift into the sign
 * bit that C leaves undefined (UBSan stops there): the same bit, unsigned. */
#undef KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
#define KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE (1u << 31)

/* The oldest KFD aql runs on: 1.11, Linux 6.1 (Debian 12). */
#define AQL_KFD_MIN_MAJOR 1u
#define AQL_KFD_MIN_MINOR 11u

_Static_assert(sizeof(struct kfd_ioctl_get_version_args) == 8, "kfd_ioctl_get_version_args");
_Static_assert(sizeof(struct kfd_ioctl_acquire_vm_args) == 8, "kfd_ioctl_acquire_vm_args");
_Static_assert(sizeof(struct kfd_ioctl_runtime_enable_args) == 16,
	       "kfd_ioctl_runtime_enable_args");
_Static_assert(sizeof(struct kfd_ioctl_get_process_apertures_new_args) == 16,
	       "kfd_ioctl_get_process_apertures_new_args");
_Static_assert(sizeof(struct kfd_process_device_apertures) == 56,
	       "kfd_process_device_apertures");
_Static_assert(sizeof(struct kfd_ioctl_alloc_memory_of_gpu_args) == 40,
	       "kfd_ioctl_alloc_memory_of_gpu_args");
_Static_assert(sizeof(struct kfd_ioctl_create_queue_args) >= 88, "kfd_ioctl_create_queue_args");

#endif
