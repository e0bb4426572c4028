/* SPDX-License-Identifier: MIT */
/*
 * <linux/kfd_ioctl.h> includes <drm/drm.h>, which Debian 12 ships only as
 * libdrm-dev's <libdrm/drm.h>. kfd_ioctl.h needs nothing from it but the
 * __u32/__u64 types and the _IOC macros, so this stands in for it (only
 * aql/kfd/kfd_abi.h is built with this folder on the include path).
 */
#ifndef AQL_KFD_COMPAT_DRM_H
#define AQL_KFD_COMPAT_DRM_H

#include <linux/ioctl.h>
#include <linux/types.h>

#endif
