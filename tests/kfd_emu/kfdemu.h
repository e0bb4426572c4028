/* SPDX-License-Identifier: MIT */
/*
 * The test-only extra of the KFD emulation (tests/kfd_emu/): what it did,
 * counted since the library was loaded, and its state. A test finds it
 * with dlopen(path in AQL_KFD_SYS, RTLD_NOLOAD | RTLD_NOW) and
 * dlsym("kfdemu_stats").
 */
#ifndef AQL_TESTS_KFD_EMU_KFDEMU_H
#define AQL_TESTS_KFD_EMU_KFDEMU_H

#include <stdint.h>

/* ioctl numbers counted: _IOC_NR of AMDKFD_IOC_*, below 0x40. */
#define KFDEMU_IOCTL_NRS 64

struct kfdemu_stats {
	uint64_t ioctls[KFDEMU_IOCTL_NRS];	/* calls on /dev/kfd by _IOC_NR, refused ones too */
	uint64_t ioctls_failed;		/* of those, calls that returned -errno */
	uint64_t ioctls_unemulated;	/* in the version's range, not modelled yet: -ENOSYS */
	uint64_t kfd_opens;		/* opens of /dev/kfd that gave an fd */
	uint64_t render_opens;		/* opens of /dev/dri/renderD* that gave an fd */
	uint32_t open_files;		/* emulated files open now */
	uint32_t gpus;			/* GPU nodes in the topology */
	uint32_t version_major;		/* what GET_VERSION reports */
	uint32_t version_minor;
	uint32_t vm_acquired;		/* bit i: ACQUIRE_VM ran on the i-th GPU node */
	uint32_t runtime_enabled;	/* RUNTIME_ENABLE's state is enabled */
	int32_t xnack;			/* the process's XNACK mode */
	char config_error[160];		/* a setting that could not be read; "" when fine */
};

typedef int (*kfdemu_stats_fn)(struct kfdemu_stats *out);

/* Copy the counters and state to *out. Returns 0, or -1 if out is NULL.
 * Thread safe. */
int kfdemu_stats(struct kfdemu_stats *out);

#endif
