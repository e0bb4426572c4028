/* SPDX-License-Identifier: MIT */
/*
 * Internal to the emulated CUDA driver (tests/cuda_emu/): its state and
 * the helpers its files share. The emulation is a test fixture: it refuses
 * what the real driver refuses, with the same codes; each rule names its
 * source (the CUDA Driver API reference, cuda.h's documentation, or
 * ../shared/reference/cuda_driver.md, "ref §n").
 *
 *   emu.c      init, devices, contexts, memory, copies, errors, proc table;
 *   stream.c   streams and their workers, events, host functions, stream
 *              memory operations, launches, capture and graphs;
 *   module.c   modules: PTX checks (nvJitLink when present), binding
 *              entries to their host builds, function attributes.
 */
#ifndef AQL_TESTS_CUDA_EMU_EMU_H
#define AQL_TESTS_CUDA_EMU_EMU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <aql/aql.h>
#include <aql/ptx.h>

#include "nv/cuda_abi.h"
#include "aqlemu.h"

/* A code the emulation returns that aql itself never names. */
#define CUDA_ERROR_ILLEGAL_STATE 401

#define EMU_MAX_DEVICES 8
#define EMU_SHARED_DEFAULT (48u * 1024)		/* per block without opt-in */
#define EMU_SHARED_OPTIN 232448u		/* H100: 227 KiB */
#define EMU_MAX_THREADS 1024u
#define EMU_SM 90u				/* compute capability 9.0 */

enum emu_mode { EMU_NORMAL, EMU_STUB, EMU_OLD, EMU_NODEVICE, EMU_NOMEMOPS };

struct CUctx_st {
	int device;			/* ordinal after CUDA_VISIBLE_DEVICES */
	int refs;			/* primary context retains; under emu.lock */
	unsigned flags;
	_Atomic CUresult sticky;	/* a fault: every later call returns it */
	_Atomic uint64_t pending;	/* stream operations queued, not done */
	struct CUstream_st *null_stream;
};

struct emu {
	pthread_mutex_t lock;		/* every table below */
	enum emu_mode mode;
	int initialized;
	CUresult init_result;
	int device_count;
	int physical[EMU_MAX_DEVICES];	/* visible ordinal -> emulated device */
	struct CUctx_st ctx[EMU_MAX_DEVICES];
	aql_agent *agent;		/* private CPU agent that runs kernels */
	long fail_after;		/* -1: never */
	_Atomic long launches_ok;
	struct aqlemu_stats_atomic {
		_Atomic uint64_t launches, launch_faults, pageable_sync_copies,
			host_funcs_run, host_funcs_skipped, mem_op_waits,
			mem_op_writes, graph_launches, ptx_jit_links,
			driver_calls;
	} stats;
};

extern struct emu emu;

/*
 * The calling thread's current context, and whether it runs a host function.
 * Static TLS (initial-exec), though aql dlopens this library: glibc
 * mallocs a dlopened library's dynamic TLS and frees an exited thread's
 * block from whichever thread next reuses its stack, which TSan, seeing no
 * order between the two, reported as a race with the stream worker's last
 * store (in about one TSan run of the suite in seven).
 */
#define EMU_TLS __thread __attribute__((tls_model("initial-exec")))
extern EMU_TLS CUcontext emu_current;
extern EMU_TLS int emu_in_host_fn;

/* Driver calls the calling thread made (aqlemu_thread_calls). */
extern EMU_TLS uint64_t emu_thread_calls;

/* The first statement of every driver entry point: it is counted, in all
 * and for the calling thread, so tests can assert what a launch costs. */
#define EMU_ENTRY()                                                           \
	do {                                                                  \
		emu_thread_calls++;                                           \
		atomic_fetch_add_explicit(&emu.stats.driver_calls, 1,         \
					  memory_order_relaxed);              \
	} while (0)

/* The checks every entry point makes: stub mode, cuInit, host function. */
CUresult emu_gate(void);

/* emu_gate(), then the current context; its sticky error if it has one. */
CUresult emu_ctx(struct CUctx_st **out);

/* Takes item off the list at head (linked through ->next) under emu.lock:
 * out is item, or NULL when the handle is not on the list (destroyed
 * already, or never made). */
#define EMU_LIST_TAKE(head, item, out)                                  \
	do {                                                            \
		__typeof__(head) *p_;                                   \
		(out) = NULL;                                           \
		pthread_mutex_lock(&emu.lock);                          \
		for (p_ = &(head); *p_; p_ = &(*p_)->next) {            \
			if (*p_ == (item)) {                            \
				(out) = *p_;                            \
				*p_ = (out)->next;                      \
				break;                                  \
			}                                               \
		}                                                       \
		pthread_mutex_unlock(&emu.lock);                        \
	} while (0)

/* out is item if it is on the list at head, else NULL; under emu.lock. */
#define EMU_LIST_FIND(head, item, out)                                  \
	do {                                                            \
		for ((out) = (head); (out) && (out) != (item);          \
		     (out) = (out)->next)                               \
			;                                               \
	} while (0)

/* Puts item at the front of the list at head under emu.lock. */
#define EMU_LIST_PUSH(head, item)                                       \
	do {                                                            \
		pthread_mutex_lock(&emu.lock);                          \
		(item)->next = (head);                                  \
		(head) = (item);                                        \
		pthread_mutex_unlock(&emu.lock);                        \
	} while (0)

/* A memory range's kind, for copies and stream memory operations. */
enum emu_mem { EMU_MEM_NONE, EMU_MEM_DEVICE, EMU_MEM_PINNED };
enum emu_mem emu_mem_kind(uintptr_t p, size_t n);

/*
 * Device memory as the emulation itself reaches it: p if p is not device
 * memory, else its address in a mapping the host can always use.
 */
void *emu_host_view(uintptr_t p);

/*
 * Make device memory accessible to host code (the CPU agent running a
 * kernel) until the matching emu_device_leave(); the last leave makes it
 * inaccessible again. Thread safe.
 */
void emu_device_enter(void);
void emu_device_leave(void);

/* Poll-with-sleep pause: grows from 2 us to 200 us with *spins. */
void emu_pause(unsigned *spins);

uint64_t emu_now_ns(void);

/* Streams (stream.c). */
struct CUstream_st;
CUresult emu_stream_get(struct CUctx_st *ctx, CUstream h, struct CUstream_st **out);
CUresult emu_stream_sync(struct CUstream_st *s);
/* Copy n bytes in stream order; synchronous if sync is set. */
CUresult emu_stream_copy(struct CUstream_st *s, void *dst, const void *src, size_t n, int sync);
void emu_ctx_drain(struct CUctx_st *ctx);

/* Functions (module.c). */
struct emu_fn_launch {
	const aql_kernel *kernel;	/* host build */
	struct CUctx_st *ctx;		/* its module's context */
	uint32_t static_lds;
	_Atomic long *pending;		/* of its module */
};
CUresult emu_fn_get(CUfunction fn, struct emu_fn_launch *out, uint32_t *max_threads,
		    uint32_t *dyn_max, const aql_ptx_entry **entry);

#endif
