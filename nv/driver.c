/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver, loaded at run time so that libaql runs where none is
 * installed. libcuda.so.1 is asked for by its SONAME: the unversioned
 * libcuda.so is what the toolkit's stub library is installed as, and
 * loading it would pick the stub over the driver. Entry points come from
 * cuGetProcAddress at NV_ABI_VERSION, which hands out the ABI versions
 * (the _v2 forms) nv/cuda_abi.h declares, whatever the symbol names of
 * the library are.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nv/nv.h"
#include "util/error.h"

typedef CUresult (*get_proc_v1_fn)(const char *symbol, void **pfn, int cuda_version,
				   uint64_t flags);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static struct nv_driver driver;
static struct aql_kept_failure load_failure;
/* &driver once loaded and initialised, for nv_result_name() and friends
 * on threads that never went through nv_driver_get(). */
static const struct nv_driver *ready;

static const char *known_name(const struct nv_driver *d, CUresult r)
{
	static __thread char buf[32];
	const char *s = NULL;

	if (d && d->cuGetErrorName && d->cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	snprintf(buf, sizeof(buf), "CUDA_ERROR_%d", r);
	return buf;
}

static const char *known_string(const struct nv_driver *d, CUresult r)
{
	const char *s = NULL;

	if (d && d->cuGetErrorString && d->cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
		return s;
	return "unknown error";
}

const char *nv_result_name(CUresult r)
{
	return known_name(__atomic_load_n(&ready, __ATOMIC_ACQUIRE), r);
}

const char *nv_result_string(CUresult r)
{
	return known_string(__atomic_load_n(&ready, __ATOMIC_ACQUIRE), r);
}

aql_status nv_fail(CUresult r, const char *call, const char *fmt, ...)
{
	aql_status st = r == CUDA_ERROR_OUT_OF_MEMORY ? AQL_ERR_NOMEM :
			r == CUDA_ERROR_INVALID_VALUE ? AQL_ERR_INVALID_ARG : AQL_ERR_DEVICE;
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return aql_fail(st, "%s: %s failed: %s (%s)", what, call, nv_result_name(r),
			nv_result_string(r));
}

/* A link names its target too: that is where the stub lives. */
static aql_status stub(const char *path)
{
	char *real = realpath(path, NULL);
	int link = real && strcmp(real, path) != 0;
	aql_status st;

	st = aql_fail(AQL_ERR_UNSUPPORTED,
		    "libcuda.so.1 at %s%s%s%s is the CUDA toolkit's stub library, not a driver "
		    "(every call returns CUDA_ERROR_STUB_LIBRARY): take the toolkit's "
		    "lib64/stubs directory off the library path and install the NVIDIA driver",
		    path, link ? " (" : "", link ? real : "", link ? ")" : "");
	free(real);
	return st;
}

static aql_status no_device(const char *path, int version)
{
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");

	if (visible)
		return aql_fail(AQL_ERR_NOT_FOUND,
			      "CUDA_VISIBLE_DEVICES=\"%s\" hides every NVIDIA device from the "
			      "driver (CUDA %d.%d at %s): unset it or list a device that exists",
			      visible, version / 1000, version % 1000 / 10, path);
	return aql_fail(AQL_ERR_NOT_FOUND,
		      "the NVIDIA driver (CUDA %d.%d at %s) finds no GPU: check that one is "
		      "installed and that the nvidia kernel module is loaded (nvidia-smi)",
		      version / 1000, version % 1000 / 10, path);
}

/*
 * Resolve every entry point. A missing one is remembered (its name and
 * why) rather than reported at once: the version of the driver, found
 * next, says more about the cause. Returns CUDA_ERROR_STUB_LIBRARY if the
 * library answered so.
 */
static CUresult resolve(void *gpa, int v2, const char **missing, int *symbol_status)
{
	struct { const char *name; void **slot; } table[] = {
#define NV_DRIVER_SLOT_(name, ret, params) { #name, (void **)&driver.name },
		NV_DRIVER_FUNCS(NV_DRIVER_SLOT_)
#undef NV_DRIVER_SLOT_
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(*table); i++) {
		void *fn = NULL;
		int status = CU_GET_PROC_ADDRESS_SUCCESS;
		CUresult r = v2 ? ((cu_get_proc_address_v2_fn)gpa)(table[i].name, &fn,
								     NV_ABI_VERSION,
								     CU_GET_PROC_ADDRESS_DEFAULT,
								     &status)
				: ((get_proc_v1_fn)gpa)(table[i].name, &fn, NV_ABI_VERSION,
							CU_GET_PROC_ADDRESS_DEFAULT);

		if (r == CUDA_ERROR_STUB_LIBRARY)
			return r;
		if ((r != CUDA_SUCCESS || !fn) && !*missing) {
			*missing = table[i].name;
			*symbol_status = r != CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ?
					 CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND : status;
		}
		*table[i].slot = fn;
	}
	return CUDA_SUCCESS;
}

static aql_status load(void)
{
	struct link_map *map = NULL;
	const char *path = "libcuda.so.1", *missing = NULL;
	int v2 = 1, symbol_status = 0, version = 0, count = 0;
	CUresult (*get_version)(int *) = NULL;
	void *gpa;
	CUresult r;

	driver.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!driver.handle)
		return aql_fail(AQL_ERR_NOT_FOUND,
			      "no NVIDIA driver is installed: dlopen(\"libcuda.so.1\") failed: %s",
			      dlerror());
	if (dlinfo(driver.handle, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name &&
	    map->l_name[0])
		path = map->l_name;
	gpa = dlsym(driver.handle, "cuGetProcAddress_v2");
	if (!gpa) {
		v2 = 0;
		gpa = dlsym(driver.handle, "cuGetProcAddress");
	}
	if (!gpa)
		return aql_fail(AQL_ERR_UNSUPPORTED,
			      "libcuda.so.1 at %s has no cuGetProcAddress: the NVIDIA driver is "
			      "older than CUDA 11.3, and aql needs CUDA %d.%d or newer: update the driver",
			      path, NV_MIN_DRIVER_VERSION / 1000, NV_MIN_DRIVER_VERSION % 1000 / 10);
	if (resolve(gpa, v2, &missing, &symbol_status) == CUDA_ERROR_STUB_LIBRARY)
		return stub(path);
	get_version = driver.cuDriverGetVersion;
	if (!get_version)
		get_version = (CUresult (*)(int *))dlsym(driver.handle, "cuDriverGetVersion");
	r = get_version ? get_version(&version) : CUDA_ERROR_NOT_FOUND;
	if (r == CUDA_ERROR_STUB_LIBRARY)
		return stub(path);
	if (r != CUDA_SUCCESS)
		return aql_fail(AQL_ERR_DEVICE, "libcuda.so.1 at %s: cuDriverGetVersion failed: %s (%s)",
			      path, known_name(&driver, r), known_string(&driver, r));
	if (version < NV_MIN_DRIVER_VERSION)
		return aql_fail(AQL_ERR_UNSUPPORTED,
			      "the NVIDIA driver at %s supports CUDA %d.%d, and aql needs CUDA %d.%d "
			      "or newer: update the driver", path, version / 1000,
			      version % 1000 / 10, NV_MIN_DRIVER_VERSION / 1000,
			      NV_MIN_DRIVER_VERSION % 1000 / 10);
	if (missing)
		return aql_fail(AQL_ERR_UNSUPPORTED,
			      "the NVIDIA driver at %s (CUDA %d.%d) lacks %s at ABI version %d "
			      "(cuGetProcAddress: %s): update the driver", path, version / 1000,
			      version % 1000 / 10, missing, NV_ABI_VERSION,
			      symbol_status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ?
			      "version not sufficient" : "symbol not found");
	driver.version = version;
	r = driver.cuInit(0);
	if (r == CUDA_ERROR_STUB_LIBRARY)
		return stub(path);
	if (r == CUDA_ERROR_NO_DEVICE)
		return no_device(path, version);
	if (r != CUDA_SUCCESS)
		return aql_fail(AQL_ERR_DEVICE,
			      "the NVIDIA driver at %s (CUDA %d.%d) failed to start: cuInit failed: "
			      "%s (%s)", path, version / 1000, version % 1000 / 10,
			      known_name(&driver, r), known_string(&driver, r));
	r = driver.cuDeviceGetCount(&count);
	if (r != CUDA_SUCCESS)
		return aql_fail(AQL_ERR_DEVICE, "the NVIDIA driver at %s: cuDeviceGetCount failed: %s (%s)",
			      path, known_name(&driver, r), known_string(&driver, r));
	if (count <= 0)
		return no_device(path, version);
	driver.device_count = count;
	return AQL_OK;
}

static void load_once_fn(void)
{
	aql_status st = load();

	if (st == AQL_OK) {
		__atomic_store_n(&ready, &driver, __ATOMIC_RELEASE);
		return;
	}
	aql_keep_failure(&load_failure, st);
	/* Nothing of a library that failed is called again. */
	if (driver.handle)
		dlclose(driver.handle);
	driver = (struct nv_driver){ 0 };
}

aql_status nv_driver_get(const struct nv_driver **out)
{
	pthread_once(&load_once, load_once_fn);
	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
		return aql_fail_kept(&load_failure, "no NVIDIA agent");
	*out = &driver;
	return AQL_OK;
}
