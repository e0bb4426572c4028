/* SPDX-License-Identifier: MIT */
/*
 * Internal: the part of the CUDA driver API's ABI that aql uses, written
 * here so that libaql builds where no CUDA toolkit is installed. Values and
 * layouts are those of the CUDA 13.0 cuda.h (facts of the ABI, checked
 * against /usr/local/cuda/include/cuda.h by tests/test_cuda_abi.c when a
 * toolkit is present). Only what the CUDA agent, its tests and the driver
 * emulation (tests/cuda_emu/) need is here.
 */
#ifndef AQL_NV_CUDA_ABI_H
#define AQL_NV_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUlinkState_st *CUlinkState;
typedef struct CUgraphNode_st *CUgraphNode;
typedef void (*CUhostFn)(void *user);

/* CUresult values. */
enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_STUB_LIBRARY = 34,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_IMAGE = 200,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
	CUDA_ERROR_NOT_MAPPED = 211,
	CUDA_ERROR_INVALID_PTX = 218,
	CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
	CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
	CUDA_ERROR_INVALID_SOURCE = 300,
	CUDA_ERROR_FILE_NOT_FOUND = 301,
	CUDA_ERROR_SHARED_OBJECT_INIT_FAILED = 303,
	CUDA_ERROR_OPERATING_SYSTEM = 304,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
	CUDA_ERROR_LAUNCH_TIMEOUT = 702,
	CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708,
	CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
	CUDA_ERROR_ASSERT = 710,
	CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
	CUDA_ERROR_HARDWARE_STACK_ERROR = 714,
	CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
	CUDA_ERROR_MISALIGNED_ADDRESS = 716,
	CUDA_ERROR_INVALID_ADDRESS_SPACE = 717,
	CUDA_ERROR_INVALID_PC = 718,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_SYSTEM_DRIVER_MISMATCH = 803,
	CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804,
	CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
	CUDA_ERROR_UNKNOWN = 999,
};

/* CUdevice_attribute values. */
enum {
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
	CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
	CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
	CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
	CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
	CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
	CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
	CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
	CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
	CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
	CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
	CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
	CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
	CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
	CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
	CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
	CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED = 86,
	CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
	CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
	CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
};

/* CUfunction_attribute values. */
enum {
	CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
	CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
	CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
	CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
	CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
	CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
	CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
	CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

/* CUjit_option values. */
enum {
	CU_JIT_INFO_LOG_BUFFER = 3,
	CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
	CU_JIT_ERROR_LOG_BUFFER = 5,
	CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
	CU_JIT_TARGET_FROM_CUCONTEXT = 8,
	CU_JIT_LOG_VERBOSE = 12,
};

/* CUjitInputType values (cuLinkAddData). */
enum {
	CU_JIT_INPUT_CUBIN = 0,
	CU_JIT_INPUT_PTX = 1,
	CU_JIT_NUM_INPUT_TYPES = 6,
};

/* Context flags (cuDevicePrimaryCtxSetFlags). */
enum {
	CU_CTX_SCHED_AUTO = 0x00,
	CU_CTX_SCHED_SPIN = 0x01,
	CU_CTX_SCHED_YIELD = 0x02,
	CU_CTX_SCHED_BLOCKING_SYNC = 0x04,
	CU_CTX_MAP_HOST = 0x08,
};

enum { CU_STREAM_DEFAULT = 0x0, CU_STREAM_NON_BLOCKING = 0x1 };

enum {
	CU_EVENT_DEFAULT = 0x0,
	CU_EVENT_BLOCKING_SYNC = 0x1,
	CU_EVENT_DISABLE_TIMING = 0x2,
};

/* cuMemHostRegister / cuMemHostAlloc flags. */
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02

/* CUpointer_attribute and CUmemorytype values. */
enum {
	CU_POINTER_ATTRIBUTE_CONTEXT = 1,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
	CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
};
enum { CU_MEMORYTYPE_HOST = 0x01, CU_MEMORYTYPE_DEVICE = 0x02 };

/*
 * Stream memory operations. GEQ compares cyclically: it holds when
 * (int64_t)(*addr - value) >= 0.
 */
enum {
	CU_STREAM_WAIT_VALUE_GEQ = 0x0,
	CU_STREAM_WAIT_VALUE_EQ = 0x1,
	CU_STREAM_WAIT_VALUE_AND = 0x2,
	CU_STREAM_WAIT_VALUE_NOR = 0x3,
	CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30,
};
enum {
	CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
	CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 0x1,
};
enum {
	CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1,
	CU_STREAM_MEM_OP_WRITE_VALUE_32 = 2,
	CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES = 3,
	CU_STREAM_MEM_OP_WAIT_VALUE_64 = 4,
	CU_STREAM_MEM_OP_WRITE_VALUE_64 = 5,
	CU_STREAM_MEM_OP_BARRIER = 6,
};

/* CUstreamBatchMemOpParams: 48 bytes; the first field is the operation. */
typedef union CUstreamBatchMemOpParams {
	uint32_t operation;
	struct {
		uint32_t operation;
		CUdeviceptr address;
		union {
			uint32_t value;
			uint64_t value64;
		};
		unsigned int flags;
		CUdeviceptr alias;
	} waitValue, writeValue;
	uint64_t pad[6];
} CUstreamBatchMemOpParams;

_Static_assert(sizeof(CUstreamBatchMemOpParams) == 48, "CUstreamBatchMemOpParams is 48 bytes");

/* cuLaunchKernel's extra[]: a packed parameter buffer and its size. */
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* A kernel node of a graph: CUDA 12's CUDA_KERNEL_NODE_PARAMS_v2, which
 * cuGraphAddKernelNode and cuGraphExecKernelNodeSetParams take at ABI
 * 12000 (their _v2 forms). kern and ctx are read only when func is NULL. */
typedef struct CUkern_st *CUkernel;
typedef struct {
	CUfunction func;
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	void **kernelParams;
	void **extra;
	CUkernel kern;
	CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;

_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == 72, "CUDA_KERNEL_NODE_PARAMS_v2 is 72 bytes");

/* Stream capture, for the CUDA-graph peer in aql-bench. */
enum { CU_STREAM_CAPTURE_MODE_GLOBAL = 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
       CU_STREAM_CAPTURE_MODE_RELAXED = 2 };

/* cuGetProcAddress. */
enum { CU_GET_PROC_ADDRESS_DEFAULT = 0 };
enum {
	CU_GET_PROC_ADDRESS_SUCCESS = 0,
	CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
	CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
typedef CUresult (*cu_get_proc_address_v2_fn)(const char *symbol, void **pfn, int cuda_version,
					      uint64_t flags, int *symbol_status);

/* The oldest driver aql runs on (cuDriverGetVersion), and the ABI version
 * of the entry points it asks cuGetProcAddress for: the _v2 forms. */
#define NV_MIN_DRIVER_VERSION 12000
#define NV_ABI_VERSION 12000

/*
 * Every entry point the CUDA agent uses: X(name, return, parameters).
 * nv/driver.c resolves each through cuGetProcAddress at NV_ABI_VERSION;
 * the emulation (tests/cuda_emu/) defines each, under its plain name.
 */
#define NV_DRIVER_FUNCS(X)                                                                    \
	X(cuGetErrorName, CUresult, (CUresult error, const char **str))                      \
	X(cuGetErrorString, CUresult, (CUresult error, const char **str))                    \
	X(cuInit, CUresult, (unsigned int flags))                                            \
	X(cuDriverGetVersion, CUresult, (int *version))                                      \
	X(cuDeviceGetCount, CUresult, (int *count))                                          \
	X(cuDeviceGet, CUresult, (CUdevice *device, int ordinal))                            \
	X(cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev))                    \
	X(cuDeviceGetAttribute, CUresult, (int *value, int attrib, CUdevice dev))            \
	X(cuDeviceTotalMem, CUresult, (size_t *bytes, CUdevice dev))                         \
	X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *ctx, CUdevice dev))                \
	X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice dev))                               \
	X(cuDevicePrimaryCtxGetState, CUresult, (CUdevice dev, unsigned int *flags, int *active)) \
	X(cuDevicePrimaryCtxSetFlags, CUresult, (CUdevice dev, unsigned int flags))          \
	X(cuCtxGetCurrent, CUresult, (CUcontext *ctx))                                       \
	X(cuCtxSetCurrent, CUresult, (CUcontext ctx))                                        \
	X(cuCtxSynchronize, CUresult, (void))                                                \
	X(cuCtxGetStreamPriorityRange, CUresult, (int *least, int *greatest))                \
	X(cuMemGetInfo, CUresult, (size_t *free_bytes, size_t *total_bytes))                 \
	X(cuModuleLoadDataEx, CUresult, (CUmodule *module, const void *image,                \
					 unsigned int n, int *options, void **values))       \
	X(cuModuleUnload, CUresult, (CUmodule module))                                       \
	X(cuModuleGetFunction, CUresult, (CUfunction *fn, CUmodule module, const char *name)) \
	X(cuModuleGetGlobal, CUresult, (CUdeviceptr *ptr, size_t *bytes, CUmodule module,    \
					const char *name))                                   \
	X(cuLinkCreate, CUresult, (unsigned int n, int *options, void **values,             \
				   CUlinkState *state))                                 \
	X(cuLinkAddData, CUresult, (CUlinkState state, int type, void *data, size_t size,    \
				    const char *name, unsigned int n, int *options,     \
				    void **values))                                     \
	X(cuLinkComplete, CUresult, (CUlinkState state, void **cubin, size_t *size))         \
	X(cuLinkDestroy, CUresult, (CUlinkState state))                                      \
	X(cuFuncGetAttribute, CUresult, (int *value, int attrib, CUfunction fn))             \
	X(cuFuncSetAttribute, CUresult, (CUfunction fn, int attrib, int value))              \
	X(cuLaunchKernel, CUresult, (CUfunction fn, unsigned int gx, unsigned int gy,        \
				     unsigned int gz, unsigned int bx, unsigned int by,      \
				     unsigned int bz, unsigned int shared, CUstream stream,  \
				     void **params, void **extra))                           \
	X(cuLaunchHostFunc, CUresult, (CUstream stream, CUhostFn fn, void *user))            \
	X(cuMemAlloc, CUresult, (CUdeviceptr *ptr, size_t size))                             \
	X(cuMemFree, CUresult, (CUdeviceptr ptr))                                            \
	X(cuMemHostAlloc, CUresult, (void **ptr, size_t size, unsigned int flags))           \
	X(cuMemFreeHost, CUresult, (void *ptr))                                              \
	X(cuMemHostRegister, CUresult, (void *ptr, size_t size, unsigned int flags))         \
	X(cuMemHostUnregister, CUresult, (void *ptr))                                        \
	X(cuMemHostGetDevicePointer, CUresult, (CUdeviceptr *dev, void *host, unsigned int flags)) \
	X(cuPointerGetAttribute, CUresult, (void *data, int attrib, CUdeviceptr ptr))        \
	X(cuMemcpyHtoD, CUresult, (CUdeviceptr dst, const void *src, size_t size))           \
	X(cuMemcpyDtoH, CUresult, (void *dst, CUdeviceptr src, size_t size))                 \
	X(cuMemcpyDtoD, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t size))           \
	X(cuMemcpyHtoDAsync, CUresult, (CUdeviceptr dst, const void *src, size_t size,       \
					CUstream stream))                                    \
	X(cuMemcpyDtoHAsync, CUresult, (void *dst, CUdeviceptr src, size_t size,             \
					CUstream stream))                                    \
	X(cuMemcpyDtoDAsync, CUresult, (CUdeviceptr dst, CUdeviceptr src, size_t size,       \
					CUstream stream))                                    \
	X(cuMemsetD8, CUresult, (CUdeviceptr dst, unsigned char value, size_t n))            \
	X(cuStreamCreate, CUresult, (CUstream *stream, unsigned int flags))                  \
	X(cuStreamCreateWithPriority, CUresult, (CUstream *stream, unsigned int flags,       \
						 int priority))                              \
	X(cuStreamDestroy, CUresult, (CUstream stream))                                      \
	X(cuStreamQuery, CUresult, (CUstream stream))                                        \
	X(cuStreamSynchronize, CUresult, (CUstream stream))                                  \
	X(cuStreamWaitEvent, CUresult, (CUstream stream, CUevent event, unsigned int flags)) \
	X(cuStreamWaitValue64, CUresult, (CUstream stream, CUdeviceptr addr, uint64_t value, \
					  unsigned int flags))                               \
	X(cuStreamWriteValue64, CUresult, (CUstream stream, CUdeviceptr addr, uint64_t value, \
					   unsigned int flags))                              \
	X(cuStreamBatchMemOp, CUresult, (CUstream stream, unsigned int count,                \
					 CUstreamBatchMemOpParams *ops, unsigned int flags)) \
	X(cuEventCreate, CUresult, (CUevent *event, unsigned int flags))                     \
	X(cuEventRecord, CUresult, (CUevent event, CUstream stream))                         \
	X(cuEventQuery, CUresult, (CUevent event))                                           \
	X(cuEventSynchronize, CUresult, (CUevent event))                                     \
	X(cuEventDestroy, CUresult, (CUevent event))                                         \
	X(cuEventElapsedTime, CUresult, (float *ms, CUevent start, CUevent end))             \
	X(cuStreamBeginCapture, CUresult, (CUstream stream, int mode))                       \
	X(cuStreamEndCapture, CUresult, (CUstream stream, CUgraph *graph))                   \
	X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *exec, CUgraph graph,          \
						  unsigned long long flags))                 \
	X(cuGraphLaunch, CUresult, (CUgraphExec exec, CUstream stream))                      \
	X(cuGraphExecDestroy, CUresult, (CUgraphExec exec))                                  \
	X(cuGraphDestroy, CUresult, (CUgraph graph))                                         \
	X(cuGraphCreate, CUresult, (CUgraph *graph, unsigned int flags))                     \
	X(cuGraphAddKernelNode, CUresult, (CUgraphNode *node, CUgraph graph,                 \
					   const CUgraphNode *deps, size_t ndeps,            \
					   const CUDA_KERNEL_NODE_PARAMS *params))           \
	X(cuGraphExecKernelNodeSetParams, CUresult, (CUgraphExec exec, CUgraphNode node,     \
						     const CUDA_KERNEL_NODE_PARAMS *params))

#endif
