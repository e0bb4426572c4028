/* SPDX-License-Identifier: MIT */
/*
 * AQL queues of an AMD GPU: each aql queue becomes a KFD compute queue of
 * type COMPUTE_AQL whose ring and amd_queue_t are the core's own pages,
 * registered as USERPTR buffers, so that the command processor (CP) reads
 * what aql's producers write. Per queue also an EOP buffer (VRAM), a CWSR
 * area (host memory: the runtime writes its headers) and a
 * queue_inactive_signal, through which the CP reports a packet it refuses.
 * Per GPU, once: the doorbell slice of /dev/kfd mapped, and the scratch
 * window (4 GiB of addresses per XCC) reserved and given to KFD
 * (SET_SCRATCH_BACKING_VA), as libhsakmt does for ROCr's scratch pool.
 *
 * Scratch (plan §9), ROCr's way: a queue starts without it; a dispatch
 * that needs more private segment memory than the queue has is refused
 * by the CP with code 1, and the watcher backs a place in the window
 * with VRAM for every wave the GPU can hold (fewer waves per CU when
 * that does not fit), writes the descriptor, the absolute address and
 * the sizes into the amd_queue_t and stores 0, on which the CP retries.
 *
 * A watcher thread per queue sleeps on the queue_inactive_signal (its KFD
 * event) and looks at the exception payload KFD writes (KFD 1.13+). The
 * queues live in one list, for the fault watcher's kfd_queue_fail_gpu.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "aql/agent_impl.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "aql/queue_impl.h"
#include "mem/pages.h"
#include "util/clock.h"
#include "util/error.h"

/* KFD takes rings of at least 1 KiB (smaller ones it silently enlarges,
 * kfd_chardev.c set_queue_properties_from_user) and checks the ring's
 * mapping only from one page up: a page of packets, as ROCr's minimum. */
#define MIN_PACKETS 64u
#define QUEUE_PERCENTAGE 100u
/* kfd_doorbell.c kfd_doorbell_process_slice: 1024 doorbells of 8 bytes
 * per process on gfx9 and later. */
#define DOORBELL_SLICE 8192u
/* Scratch backing: 64 KiB aligned, as SET_SCRATCH_BACKING_VA takes the
 * address >> 16 (libhsakmt fmm.c); the reservation holds addresses only,
 * 4 GiB per XCC (ROCr GpuAgent::MaxScratchDevice, gfx9 to gfx11). */
#define SCRATCH_ALIGN ((size_t)64 << 10)
#define SCRATCH_PER_XCC ((uint64_t)1 << 32)
/* COMPUTE_TMPRING_SIZE (gfx9): WAVES bits 0-11, WAVESIZE bits 12-24 in
 * 1 KiB units. */
#define TMPRING_WAVES_MAX 0xfffu
#define TMPRING_WAVESIZE_MAX 0x1fffu
#define TMPRING_UNIT 1024u
/* A destroy waits for the queue's packets while they make progress, and
 * gives up once none finished for this long (a dependency that never
 * comes). */
#define DRAIN_STALL_NS (5ull * 1000000000ull)
/* The watcher looks at the exception payload this often: KFD sets the
 * event of err_event_id, shared with other signals' waits. */
#define WATCH_NS (50ull * 1000000ull)
/* kfd_queue.c: DEBUGGER_BYTES_PER_WAVE, DEBUGGER_BYTES_ALIGN. */
#define DEBUG_BYTES_PER_WAVE 32u
#define DEBUG_ALIGN 64u

/* kfd_ioctl.h (1.13) struct kfd_context_save_area_header: the start of
 * each XCC's save area; firmware fills the wave-state part. */
struct cwsr_header {
	uint32_t control_stack_offset, control_stack_size;
	uint32_t wave_state_offset, wave_state_size;
	uint32_t debug_offset, debug_size;
	uint64_t err_payload_addr;
	uint32_t err_event_id, reserved;
};
_Static_assert(sizeof(struct cwsr_header) == 40, "kfd_context_save_area_header");

struct kfd_queue {
	struct aql_queue_impl *q;
	struct kfd_agent *a;
	uint32_t queue_id;		/* KFD's */
	void *eop;
	void *cwsr;
	size_t cwsr_bytes, cwsr_per_xcc, eop_bytes;
	aql_signal *inactive;		/* queue_inactive_signal */
	uint64_t error_reason;		/* err_payload_addr: KFD ORs exception bits in */
	uint8_t *scratch_window;	/* the GPU's, SET_SCRATCH_BACKING_VA */
	size_t scratch_window_bytes;
	void *scratch;			/* this queue's VRAM in it, NULL none */
	size_t scratch_bytes;
	pthread_t watcher;
	uint32_t closing;		/* atomic: the watcher is to return */
	struct kfd_queue *next;
};

/* Per GPU node, kept until exit. */
struct qgpu {
	uint8_t *doorbells;		/* the slice, mapped at the first queue */
	uint8_t *scratch_window;	/* NULL until set */
	size_t scratch_window_bytes;	/* SCRATCH_PER_XCC per XCC */
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kfd_queue *queues;
static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;
static struct qgpu *qgpus;
static pthread_once_t listen_once = PTHREAD_ONCE_INIT;
static aql_status listen_status;

static struct kfd_agent *agent_of(aql_agent *agent)
{
	return (struct kfd_agent *)agent;
}

/*
 * HSA's low, normal and high as KFD's 0-15, ROCr's way: it passes
 * HSA_QUEUE_PRIORITY_MINIMUM, _NORMAL and _HIGH (-3, 0, 2) to libhsakmt,
 * whose priority_map {0,3,5,7,9,11,15} gives 0, 7 and 11; 15 ROCr keeps
 * for PC sampling. The MQD's pipe priority is LOW, MEDIUM and HIGH for
 * them (kfd_mqd_manager.c pipe_priority_map).
 */
static uint32_t kfd_priority(enum aql_queue_priority priority)
{
	static const uint32_t map[] = { 0, 7, 11 };

	return map[priority];
}

/* The CWSR sizes of a node, per XCC (kfd_queue.c
 * kfd_queue_ctx_save_restore_size; plan §5). */
struct cwsr_sizes {
	uint64_t cwsr, ctl_stack, debug, total, eop;
};

static uint32_t vgpr_bytes(uint32_t gfxv)
{
	if (gfxv == 90008 || gfxv == 90010 || (gfxv >= 90400 && gfxv < 90500) || gfxv == 90500)
		return 0x80000;
	if (gfxv == 110000 || gfxv == 110001 || gfxv == 120000 || gfxv == 120001)
		return 0x60000;
	return 0x40000;
}

static void cwsr_sizes(const struct kfd_node *n, struct cwsr_sizes *out)
{
	uint32_t gfxv = n->gfx_target_version, xcc = n->xccs;
	uint64_t cu = n->simd_count / n->simd_per_cu / xcc;
	uint64_t waves = cu * 32, wg, ctl;

	if (gfxv < 100100) {
		uint64_t se_bound = (uint64_t)n->array_count / n->simd_arrays_per_engine * 512;

		waves = cu * 40 < se_bound ? cu * 40 : se_bound;
	}
	wg = cu * (vgpr_bytes(gfxv) + 0x4000 +
		   (gfxv == 90500 ? (uint64_t)n->lds_size_in_kb << 10 : 0x10000) + 0x1000);
	wg = (wg + 4095) & ~4095ull;
	ctl = (40 + waves * (gfxv >= 100100 ? 12 : 8) + 8 + 4095) & ~4095ull;
	if (gfxv >= 100100 && gfxv < 110000 && ctl > 0x7000)
		ctl = 0x7000;
	/* The node's own numbers where sysfs has them (Linux 6.18+ and
	 * stable): the kernel checks against those. */
	out->ctl_stack = n->ctl_stack_size ? n->ctl_stack_size : ctl;
	out->cwsr = n->cwsr_size ? n->cwsr_size : ctl + wg;
	out->debug = (waves * DEBUG_BYTES_PER_WAVE + DEBUG_ALIGN - 1) & ~(uint64_t)(DEBUG_ALIGN - 1);
	out->total = ((out->cwsr + out->debug) * xcc + 4095) & ~4095ull;
	out->eop = gfxv == 80002 ? 0x8000 : 4096;
}

/*
 * Each XCC's header (libhsakmt queues.c fill_cwsr_header): where the debug
 * area is, and from KFD 1.13 where KFD reports the queue's exceptions.
 */
static void fill_cwsr(struct kfd_queue *k, const struct cwsr_sizes *s)
{
	const struct kfd_node *n = k->a->node;
	uint32_t xcc = n->xccs;

	for (uint32_t i = 0; i < xcc; i++) {
		struct cwsr_header *h =
			(struct cwsr_header *)((uint8_t *)k->cwsr + (size_t)i * s->cwsr);

		h->debug_offset = (uint32_t)((xcc - i) * s->cwsr);
		h->debug_size = (uint32_t)(s->debug * xcc);
		if (k->a->process->minor >= 13) {
			h->err_payload_addr = (uint64_t)(uintptr_t)&k->error_reason;
			h->err_event_id = k->inactive->event_id;
		}
	}
}

/* The GPU's doorbells and scratch address, once. Under gpu_lock. */
static struct qgpu *qgpu_of(const struct kfd_agent *a)
{
	if (!qgpus && !(qgpus = calloc(a->process->topo.count, sizeof(*qgpus)))) {
		aql_fail(AQL_ERR_NOMEM, "no memory for the AMD GPUs' queue state");
		return NULL;
	}
	return &qgpus[a->node - a->process->topo.nodes];
}

/*
 * The GPU's scratch window, once, given to KFD as libhsakmt's
 * fmm_allocate_scratch does for ROCr's pool. KFD keeps it as the
 * process's sh_hidden_private_base and writes it to the register only
 * without HWS (kfd_chardev.c kfd_ioctl_set_scratch_backing_va); gfx9's
 * MAP_PROCESS has no field for it (kfd_pm4_headers_ai.h). The waves find
 * their scratch at the absolute address in the amd_queue_t (fill_scratch).
 * Under gpu_lock.
 */
static aql_status set_scratch(const struct kfd_agent *a, struct qgpu *g)
{
	struct kfd_ioctl_set_scratch_backing_va_args s = { .gpu_id = a->node->gpu_id };
	size_t bytes = (size_t)(SCRATCH_PER_XCC * a->node->xccs);
	aql_status st;
	void *va;
	int r;

	if (g->scratch_window)
		return AQL_OK;
	st = aql_pages_reserve(bytes, SCRATCH_ALIGN, &va);
	if (st != AQL_OK)
		return st;
	s.va_addr = (uint64_t)(uintptr_t)va >> 16;
	r = aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &s);
	if (r < 0) {
		aql_pages_unmap(va, bytes);
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s agent %u: AMDKFD_IOC_SET_SCRATCH_BACKING_VA",
				      a->node->gfx, a->info.device_index);
	}
	g->scratch_window = va;
	g->scratch_window_bytes = bytes;
	return AQL_OK;
}

/* The doorbell slice holding doorbell_offset, mapped once. Under gpu_lock. */
static aql_status map_doorbells(const struct kfd_agent *a, struct qgpu *g, uint64_t offset)
{
	void *p;

	if (g->doorbells)
		return AQL_OK;
	p = a->process->sys->mmap(NULL, DOORBELL_SLICE, PROT_READ | PROT_WRITE, MAP_SHARED,
				  a->process->fd, (off_t)(offset & ~(uint64_t)(DOORBELL_SLICE - 1)));
	if ((uintptr_t)p >= (uintptr_t)-4095)
		return aql_fail_errno(AQL_ERR_DEVICE, (int)-(intptr_t)p,
				      "%s agent %u: mapping its doorbells from /dev/kfd",
				      a->node->gfx, a->info.device_index);
	g->doorbells = p;
	return AQL_OK;
}

/* Give -1 to the completion signals of the packets not retired; they
 * will not run. Their waiters wake. */
static void fail_pending(struct aql_queue_impl *q)
{
	aql_queue *queue = &q->pub;
	uint64_t id = __atomic_load_n(&queue->amd->read_dispatch_id, __ATOMIC_ACQUIRE);
	uint64_t end = __atomic_load_n(&queue->amd->write_dispatch_id, __ATOMIC_ACQUIRE);

	for (; id < end && end - id <= queue->size; id++) {
		aql_packet *slot = aql_queue_slot(queue, id);
		uint16_t header = __atomic_load_n(&slot->header, __ATOMIC_ACQUIRE);
		uint64_t signal = slot->dispatch.completion_signal;

		if (aql_header_type(header) != AQL_PACKET_INVALID && signal)
			aql_signal_store(aql_signal_from_handle(signal), -1, AQL_RELEASE);
	}
}

/* The queue runs nothing more: its error, its packets -1. */
static void stop_queue(struct aql_queue_impl *q, aql_status status, const char *msg)
{
	aql_queue_fail(q, status, "%s", msg);
	aql_queue_halt(q);
	fail_pending(q);
}

/*
 * The CP's code in queue_inactive_signal is a bit mask, read in ROCr's
 * order (amd_aql_queue.cpp DynamicScratchHandler): 0x1 and 0x400 ask for
 * scratch (wave64, wave32) and are answered alone; the others are
 * errors, named here in ROCr's words, every bit that is set.
 */
#define CP_SCRATCH_REQUEST 0x401u

static void cp_code_names(uint32_t code, char *buf, size_t size)
{
	static const struct { uint32_t bit; const char *name; } bits[] = {
		{ 0x2, "invalid grid or work-group dimensions" },
		{ 0x4, "invalid group segment (LDS) size" },
		{ 0x8, "invalid or NULL code object" },
		{ 0x20, "invalid packet format" },
		{ 0x40, "work-group too large" },
		{ 0x80, "out of VGPRs" },
		{ 0x100, "unsupported vendor-specific packet" },
		{ 0x20000000, "memory violation (an address beyond 48 bits)" },
		{ 0x40000000, "illegal instruction" },
		{ 0x80000000u, "debug trap" },
	};
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]) && used < size; i++)
		if (code & bits[i].bit)
			used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? "; " : "",
						 bits[i].name);
	if (!used)
		snprintf(buf, size, "a code ROCr does not name");
}

/*
 * The scratch descriptor and sizes of the amd_queue_t for lane bytes per
 * work-item and waves per XCC, as ROCr's AqlQueue::InitScratchSRD fills
 * them for gfx9 (SQ_BUF_RSRC_WORD1/3 bit layout checked against ROCr's
 * registers.h; the SQ_SEL_*, BUF_*_FORMAT and SQ_RSRC_BUF values,
 * 4/5/6/7, 4, 4 and 0, are from the same header, not checked on
 * hardware). Sizes are per XCC. scratch_backing_memory_location is the
 * absolute GPU address (AcquireQueueMainScratch: ISA major > 8; gfx8 took
 * an offset from SH_HIDDEN_PRIVATE_BASE): with HWS nothing else tells
 * the firmware where the scratch is.
 */
static void fill_scratch(struct kfd_queue *k, uint64_t lane, uint32_t wave_kib, uint32_t waves)
{
	aql_amd_queue *amd = k->q->pub.amd;
	const struct kfd_node *n = k->a->node;
	uint64_t base = (uint64_t)(uintptr_t)k->scratch;
	uint64_t per_xcc = k->scratch_bytes / n->xccs;

	amd->scratch_resource_descriptor[0] = (uint32_t)base;
	/* BASE_ADDRESS_HI 0-15, SWIZZLE_ENABLE 31 */
	amd->scratch_resource_descriptor[1] = (uint32_t)((base >> 32) & 0xffff) | 1u << 31;
	amd->scratch_resource_descriptor[2] = (uint32_t)per_xcc;	/* NUM_RECORDS */
	/* DST_SEL_XYZW = X,Y,Z,W; NUM_FORMAT UINT; DATA_FORMAT 32;
	 * ELEMENT_SIZE 1 (4 bytes); INDEX_STRIDE 3 (64); ADD_TID_ENABLE;
	 * TYPE 0 (buffer) */
	amd->scratch_resource_descriptor[3] = 4u | 5u << 3 | 6u << 6 | 7u << 9 | 4u << 12 |
					      4u << 15 | 1u << 19 | 3u << 21 | 1u << 23;
	amd->scratch_backing_memory_location = base;
	amd->compute_tmpring_size = waves | wave_kib << 12;
	amd->scratch_backing_memory_byte_size = per_xcc;
	amd->scratch_wave64_lane_byte_size = (uint32_t)lane;
}

/* Waves per XCC for wpc waves per CU: a multiple of the XCC's shader
 * engines (ROCr FillComputeTmpRingSize asserts it). */
static uint32_t xcc_waves(const struct kfd_node *n, uint32_t wpc)
{
	uint32_t xcc = n->xccs;
	uint32_t ses = n->simd_arrays_per_engine ? n->array_count / n->simd_arrays_per_engine / xcc : 1;
	uint32_t waves = wpc * (n->cus / xcc);

	if (!ses)
		ses = 1;
	return (waves + ses - 1) / ses * ses;
}

/*
 * CP code 1: scratch for the packet the CP stopped at, align16(private
 * segment size) bytes per lane of 64 (ROCr's DynamicScratchHandler; plan
 * §9), for max_slots_scratch_cu waves per CU; where that does not fit
 * the window (4 GiB per XCC) or VRAM, fewer waves per CU, down to one
 * (ROCr AcquireQueueMainScratch: "reduce occupancy"); COMPUTE_TMPRING_SIZE
 * tells the CP how many waves it may run. The old VRAM goes first, as
 * ROCr releases before it acquires (aql/kfd/README.md: why that is safe).
 * AQL_OK when the CP may retry; else the queue's error, with why in msg.
 */
static aql_status grow_scratch(struct kfd_queue *k, char *msg, size_t msg_size)
{
	aql_amd_queue *amd = k->q->pub.amd;
	const struct kfd_node *n = k->a->node;
	uint64_t id = __atomic_load_n(&amd->read_dispatch_id, __ATOMIC_ACQUIRE);
	const aql_packet *slot = aql_queue_slot(&k->q->pub, id);
	uint64_t lane, wave, size = 0, have = amd->scratch_wave64_lane_byte_size;
	uint32_t xcc = n->xccs, wpc, waves = 0;
	char why[256] = "", kernel[96];

	if (aql_header_type(__atomic_load_n(&slot->header, __ATOMIC_ACQUIRE)) !=
	    AQL_PACKET_KERNEL_DISPATCH) {
		snprintf(msg, msg_size, "CP code 1 (scratch) for packet %llu, not a kernel "
			 "dispatch", (unsigned long long)id);
		return AQL_ERR_QUEUE_ERROR;
	}
	kfd_code_kernel_name(&k->a->base, slot->dispatch.kernel_object, kernel, sizeof(kernel));
	/* align16 of the packet's size: a wave is whole KiB (1024 / 64) */
	lane = ((uint64_t)slot->dispatch.private_segment_size + 15) & ~15ull;
	wave = lane * 64;
	/* Refused again with this much there: growing would loop. */
	if (lane <= have) {
		snprintf(msg, msg_size, "the command processor refused packet %llu for scratch "
			 "again, with %llu bytes per lane there (CP code 1)",
			 (unsigned long long)id, (unsigned long long)have);
		return AQL_ERR_QUEUE_ERROR;
	}
	if (n->gfx_target_version / 10000 != 9) {
		snprintf(msg, msg_size, "packet %llu needs scratch, built for gfx9 only (CP "
			 "code 1)", (unsigned long long)id);
		return AQL_ERR_UNSUPPORTED;
	}
	if (wave / TMPRING_UNIT > TMPRING_WAVESIZE_MAX) {
		snprintf(msg, msg_size, "packet %llu (%s) needs %llu scratch "
			 "bytes per lane: %llu KiB per wave, over COMPUTE_TMPRING_SIZE's %u KiB "
			 "(CP code 1)", (unsigned long long)id, kernel, (unsigned long long)lane,
			 (unsigned long long)(wave / TMPRING_UNIT), TMPRING_WAVESIZE_MAX);
		return AQL_ERR_NOMEM;
	}
	if (k->scratch) {
		kfd_scratch_free(&k->a->base, k->scratch);
		k->scratch = NULL;
		k->scratch_bytes = 0;
		amd->compute_tmpring_size = 0;
		amd->scratch_backing_memory_location = 0;
		amd->scratch_backing_memory_byte_size = 0;
		amd->scratch_wave64_lane_byte_size = 0;
	}
	if (!n->max_slots_scratch_cu) {
		snprintf(msg, msg_size, "packet %llu (%s) needs scratch, and KFD node %u "
			 "gives no scratch slots per CU (max_slots_scratch_cu 0)",
			 (unsigned long long)id, kernel, n->node_id);
		return AQL_ERR_UNSUPPORTED;
	}
	for (wpc = n->max_slots_scratch_cu; wpc >= 1; wpc--) {
		waves = xcc_waves(n, wpc);
		size = (uint64_t)waves * wave * xcc;
		/* NUM_RECORDS and the amd_queue_t's size are 32 bits per XCC
		 * (fill_scratch): 4 GiB itself would read as 0. */
		if ((uint64_t)waves * wave > SCRATCH_PER_XCC - 1) {
			snprintf(why, sizeof(why), "over the %llu-byte scratch window of %u XCCs "
				 "(4 GiB less one per XCC)",
				 (unsigned long long)((SCRATCH_PER_XCC - 1) * xcc), xcc);
			continue;
		}
		if (waves > TMPRING_WAVES_MAX) {
			snprintf(why, sizeof(why), "%u waves per XCC, over COMPUTE_TMPRING_SIZE's "
				 "%u", waves, TMPRING_WAVES_MAX);
			continue;
		}
		if (kfd_scratch_alloc(&k->a->base, k->scratch_window, k->scratch_window_bytes,
				      SCRATCH_ALIGN, (size_t)size, &k->scratch) == AQL_OK)
			break;
		snprintf(why, sizeof(why), "%s", aql_error_message());
	}
	if (!k->scratch) {
		snprintf(msg, msg_size, "no scratch for packet %llu (%s): %llu "
			 "bytes per lane need %llu bytes for one wave on each of %u CUs: %s",
			 (unsigned long long)id, kernel, (unsigned long long)lane,
			 (unsigned long long)size, n->cus, why);
		return AQL_ERR_NOMEM;
	}
	k->scratch_bytes = (size_t)size;
	fill_scratch(k, lane, (uint32_t)(wave / TMPRING_UNIT), waves);
	return AQL_OK;
}

static void *watch(void *arg)
{
	struct kfd_queue *k = arg;
	aql_amd_queue *amd = k->q->pub.amd;
	char msg[512];
	uint64_t reason;
	int64_t code;

	for (;;) {
		aql_signal_wait(k->inactive, AQL_COND_NE, 0, WATCH_NS, AQL_WAIT_BLOCKED, NULL);
		code = aql_signal_load(k->inactive, AQL_ACQUIRE);
		reason = __atomic_load_n(&k->error_reason, __ATOMIC_ACQUIRE);
		/* After the loads: the destroy's wake-up store comes after
		 * closing, so a value it stored is never taken for a code. */
		if (__atomic_load_n(&k->closing, __ATOMIC_ACQUIRE))
			return NULL;
		if ((uint32_t)code & CP_SCRATCH_REQUEST) {
			char why[400];
			aql_status st = grow_scratch(k, why, sizeof(why));

			if (st == AQL_OK) {
				/* After the amd_queue_t's stores: the CP
				 * reads them once it sees 0. */
				aql_signal_store(k->inactive, 0, AQL_RELEASE);
				continue;
			}
			snprintf(msg, sizeof(msg), "AMD queue %llu (%s): %s",
				 (unsigned long long)amd->hsa.id, k->a->node->gfx, why);
			stop_queue(k->q, st, msg);
			return NULL;
		}
		if (code) {
			char names[256];

			/* The CP waits on the packet for a 0 it never gets:
			 * the queue stays stopped until its destroy. */
			cp_code_names((uint32_t)code, names, sizeof(names));
			snprintf(msg, sizeof(msg), "AMD queue %llu (%s): the command processor "
				 "refused packet %llu: %s (CP code %lld)",
				 (unsigned long long)amd->hsa.id, k->a->node->gfx,
				 (unsigned long long)__atomic_load_n(&amd->read_dispatch_id,
								     __ATOMIC_ACQUIRE),
				 names, (long long)code);
			stop_queue(k->q, AQL_ERR_QUEUE_ERROR, msg);
			return NULL;
		}
		if (reason) {
			snprintf(msg, sizeof(msg), "AMD queue %llu (%s): KFD stopped the queue on "
				 "an exception (KFD_EC mask 0x%llx)", (unsigned long long)amd->hsa.id,
				 k->a->node->gfx, (unsigned long long)reason);
			stop_queue(k->q, AQL_ERR_DEVICE, msg);
			return NULL;
		}
	}
}

static void fault_listener(uint32_t gpu_id, aql_status status, const char *msg, void *user)
{
	(void)user;
	kfd_queue_fail_gpu(gpu_id, status, msg);
}

static void start_listening(void)
{
	listen_status = kfd_fault_listen(fault_listener, NULL);
}

void kfd_queue_fail_gpu(uint32_t gpu_id, aql_status status, const char *msg)
{
	pthread_mutex_lock(&list_lock);
	for (struct kfd_queue *k = queues; k; k = k->next) {
		if (gpu_id && k->a->node->gpu_id != gpu_id)
			continue;
		stop_queue(k->q, status, msg);
	}
	pthread_mutex_unlock(&list_lock);
}

static aql_status create_fail(const struct kfd_agent *a, int r)
{
	const char *gfx = a->node->gfx;
	unsigned idx = a->info.device_index;

	/* kfd_process_queue_manager.c pqm_create_queue: the HWS limit of the
	 * device (127; 255 on GC 9.4.3+) */
	if (r == -ENOSPC)
		return aql_fail(AQL_ERR_BUSY, "%s agent %u: AMDKFD_IOC_CREATE_QUEUE: the GPU runs "
				"as many queues as it can (ENOSPC): destroy one first", gfx, idx);
	if (r == -ENOMEM)
		return aql_fail(AQL_ERR_NOMEM, "%s agent %u: AMDKFD_IOC_CREATE_QUEUE: no memory "
				"for the queue (ENOMEM)", gfx, idx);
	if (r == -EINVAL)
		return aql_fail(AQL_ERR_DEVICE, "%s agent %u: AMDKFD_IOC_CREATE_QUEUE refused the "
				"queue's buffers or sizes (EINVAL)", gfx, idx);
	return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s agent %u: AMDKFD_IOC_CREATE_QUEUE", gfx, idx);
}

static void destroy_kfd_queue(const struct kfd_agent *a, uint32_t id)
{
	struct kfd_ioctl_destroy_queue_args d = { .queue_id = id };
	int r = aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_DESTROY_QUEUE, &d);

	if (r < 0)
		fprintf(stderr, "libaql: %s agent %u: AMDKFD_IOC_DESTROY_QUEUE of queue %u: %s\n",
			a->node->gfx, a->info.device_index, id, strerror(-r));
}

/* Undo what attach made, in reverse; NULL members were not made. */
static void free_parts(struct kfd_queue *k)
{
	aql_queue *queue = &k->q->pub;

	kfd_host_free(&k->a->base, k->cwsr, k->cwsr_bytes);
	if (k->eop)
		kfd_mem_free(&k->a->base, k->eop);
	if (k->scratch)
		kfd_scratch_free(&k->a->base, k->scratch);
	aql_signal_destroy(k->inactive);
	kfd_mem_unregister(&k->a->base, queue->amd, aql_page_size());
	kfd_mem_unregister(&k->a->base, queue->ring, (size_t)queue->size * sizeof(aql_packet));
	free(k);
}

/* amd_queue_t as ROCr's AqlQueue fills it for a gfx9 GPU. */
static void fill_amd_queue(struct kfd_queue *k)
{
	aql_amd_queue *amd = k->q->pub.amd;
	const struct kfd_node *n = k->a->node;

	amd->max_cu_id = n->cus - 1;
	amd->max_wave_id = n->waves_per_cu - 1;
	amd->group_segment_aperture_base_hi = (uint32_t)(k->a->apertures->lds_base >> 32);
	amd->private_segment_aperture_base_hi = (uint32_t)(k->a->apertures->scratch_base >> 32);
	/* No scratch until a dispatch needs it (CP code 1): size 0, and
	 * COMPUTE_TMPRING_SIZE 0. */
	amd->compute_tmpring_size = 0;
	amd->scratch_backing_memory_location = 0;
	amd->scratch_backing_memory_byte_size = 0;
	amd->scratch_wave64_lane_byte_size = 0;
	amd->queue_inactive_signal = aql_signal_handle(k->inactive);
}

/* Register, allocate and create; the queue then runs. */
static aql_status create(struct kfd_queue *k, const struct cwsr_sizes *s, uint64_t *doorbell_offset)
{
	struct kfd_agent *a = k->a;
	aql_queue *queue = &k->q->pub;
	size_t ring = (size_t)queue->size * sizeof(aql_packet);
	struct kfd_ioctl_create_queue_args c = {
		.ring_base_address = (uint64_t)(uintptr_t)queue->ring,
		.write_pointer_address = (uint64_t)(uintptr_t)&queue->amd->write_dispatch_id,
		.read_pointer_address = (uint64_t)(uintptr_t)&queue->amd->read_dispatch_id,
		.ring_size = (uint32_t)ring,
		.gpu_id = a->node->gpu_id,
		.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
		.queue_percentage = QUEUE_PERCENTAGE,
		.queue_priority = kfd_priority(k->q->priority),
		.eop_buffer_size = s->eop,
		.ctx_save_restore_size = (uint32_t)s->cwsr,
		.ctl_stack_size = (uint32_t)s->ctl_stack,
	};
	aql_status st;
	int r;

	if ((st = kfd_mem_register_own(&a->base, queue->ring, ring)) != AQL_OK ||
	    (st = kfd_mem_register_own(&a->base, queue->amd, aql_page_size())) != AQL_OK ||
	    (st = aql_signal_create(0, &k->inactive)) != AQL_OK ||
	    (st = kfd_mem_alloc(&a->base, s->eop, &k->eop)) != AQL_OK)
		return st;
	k->eop_bytes = s->eop;
	k->cwsr_bytes = s->total;
	k->cwsr_per_xcc = s->cwsr;
	if ((st = kfd_host_alloc(&a->base, s->total, &k->cwsr)) != AQL_OK)
		return st;
	fill_cwsr(k, s);
	fill_amd_queue(k);
	c.eop_buffer_address = (uint64_t)(uintptr_t)k->eop;
	c.ctx_save_restore_address = (uint64_t)(uintptr_t)k->cwsr;
	r = aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_CREATE_QUEUE, &c);
	if (r < 0)
		return create_fail(a, r);
	k->queue_id = c.queue_id;
	*doorbell_offset = c.doorbell_offset;
	return AQL_OK;
}

aql_status kfd_queue_attach(aql_agent *agent, struct aql_queue_impl *q)
{
	struct kfd_agent *a = agent_of(agent);
	uint64_t doorbell_offset = 0;
	struct cwsr_sizes s;
	struct kfd_queue *k;
	struct qgpu *g;
	aql_status st;

	if (q->pub.size < MIN_PACKETS)
		return aql_fail(AQL_ERR_INVALID_ARG, "%s agent %u: a queue of %u packets: AMD GPU "
				"queues take %u packets or more", a->node->gfx,
				a->info.device_index, q->pub.size, MIN_PACKETS);
	pthread_once(&listen_once, start_listening);
	if (listen_status != AQL_OK)
		return aql_fail(listen_status, "%s agent %u: no fault listener for its queues",
				a->node->gfx, a->info.device_index);
	k = calloc(1, sizeof(*k));
	if (!k)
		return aql_fail(AQL_ERR_NOMEM, "no memory for an AMD queue");
	k->q = q;
	k->a = a;
	cwsr_sizes(a->node, &s);
	pthread_mutex_lock(&gpu_lock);
	g = qgpu_of(a);
	st = g ? set_scratch(a, g) : AQL_ERR_NOMEM;
	if (st == AQL_OK) {
		k->scratch_window = g->scratch_window;
		k->scratch_window_bytes = g->scratch_window_bytes;
	}
	pthread_mutex_unlock(&gpu_lock);
	if (st == AQL_OK)
		st = create(k, &s, &doorbell_offset);
	if (st != AQL_OK) {
		free_parts(k);
		return st;
	}
	pthread_mutex_lock(&gpu_lock);
	st = map_doorbells(a, g, doorbell_offset);
	pthread_mutex_unlock(&gpu_lock);
	if (st == AQL_OK && pthread_create(&k->watcher, NULL, watch, k))
		st = aql_fail(AQL_ERR_SYSTEM, "%s agent %u: no thread to watch a queue",
			      a->node->gfx, a->info.device_index);
	if (st != AQL_OK) {
		destroy_kfd_queue(a, k->queue_id);
		free_parts(k);
		return st;
	}
	/* gfx9: a 64-bit doorbell that takes the last packet id made valid
	 * (aql_queue_ring_doorbell). */
	q->pub.doorbell->kind = AQL_SIGNAL_KIND_DOORBELL;
	q->pub.doorbell->hardware_doorbell_ptr =
		(uint64_t)(uintptr_t)(g->doorbells + (doorbell_offset & (DOORBELL_SLICE - 1)));
	q->agent_state = k;
	pthread_mutex_lock(&list_lock);
	k->next = queues;
	queues = k;
	pthread_mutex_unlock(&list_lock);
	return AQL_OK;
}

aql_status kfd_queue_set_priority(aql_agent *agent, struct aql_queue_impl *q,
				  enum aql_queue_priority priority)
{
	struct kfd_agent *a = agent_of(agent);
	const struct kfd_queue *k = q->agent_state;
	/* The ring goes with every update: pqm_update_queue_properties takes
	 * a NULL one as "disable the queue" (and from 6.12 checks that it is
	 * the exact mapping of a BO, -EFAULT otherwise). */
	struct kfd_ioctl_update_queue_args u = {
		.ring_base_address = (uint64_t)(uintptr_t)q->pub.ring,
		.queue_id = k->queue_id,
		.ring_size = (uint32_t)((size_t)q->pub.size * sizeof(aql_packet)),
		.queue_percentage = QUEUE_PERCENTAGE,
		.queue_priority = kfd_priority(priority),
	};
	int r = aql_kfd_ioctl(a->process->sys, a->process->fd, AMDKFD_IOC_UPDATE_QUEUE, &u);

	if (r < 0)
		return aql_fail_errno(AQL_ERR_DEVICE, -r, "%s agent %u: AMDKFD_IOC_UPDATE_QUEUE of "
				      "queue %u to priority %u", a->node->gfx,
				      a->info.device_index, k->queue_id, u.queue_priority);
	return AQL_OK;
}

void kfd_queue_get_info(const struct aql_queue_impl *q, struct kfd_queue_info *out)
{
	const struct kfd_queue *k = q->agent_state;

	*out = (struct kfd_queue_info){ .queue_id = k->queue_id, .eop = k->eop,
					.cwsr = k->cwsr, .eop_bytes = k->eop_bytes,
					.cwsr_bytes = k->cwsr_bytes,
					.cwsr_per_xcc = k->cwsr_per_xcc,
					.error_reason = &k->error_reason,
					.scratch = k->scratch, .scratch_bytes = k->scratch_bytes,
					.scratch_window = k->scratch_window,
					.scratch_window_bytes = k->scratch_window_bytes };
}

/* Wait while the queue's packets finish; 0 when all did, else 1 (none
 * finished for DRAIN_STALL_NS, or the queue stopped). */
static int drain(struct kfd_queue *k)
{
	aql_amd_queue *amd = k->q->pub.amd;
	uint64_t last = __atomic_load_n(&amd->read_dispatch_id, __ATOMIC_ACQUIRE);
	uint64_t deadline = aql_deadline(DRAIN_STALL_NS), nap = 1000;

	for (;;) {
		uint64_t rd = __atomic_load_n(&amd->read_dispatch_id, __ATOMIC_ACQUIRE);

		if (rd >= __atomic_load_n(&amd->write_dispatch_id, __ATOMIC_ACQUIRE))
			return 0;
		if (__atomic_load_n(&k->q->halted, __ATOMIC_ACQUIRE))
			return 1;
		if (rd != last) {
			last = rd;
			deadline = aql_deadline(DRAIN_STALL_NS);
			nap = 1000;
		} else if (aql_now_ns() >= deadline) {
			return 1;
		}
		nanosleep(&(struct timespec){ 0, (long)nap }, NULL);
		nap = nap * 2 > 1000000 ? 1000000 : nap * 2;
	}
}

void kfd_queue_detach(aql_agent *agent, struct aql_queue_impl *q)
{
	struct kfd_agent *a = agent_of(agent);
	struct kfd_queue *k = q->agent_state, **pp;

	if (drain(k) && !__atomic_load_n(&q->halted, __ATOMIC_ACQUIRE))
		aql_queue_fail(q, AQL_ERR_TIMEOUT,
			       "AMD queue %llu (%s) destroyed with packet %llu unfinished for %llu s "
			       "(a dependency that never came?): it and those after it got -1",
			       (unsigned long long)q->pub.amd->hsa.id, a->node->gfx,
			       (unsigned long long)q->pub.amd->read_dispatch_id,
			       DRAIN_STALL_NS / 1000000000ull);
	pthread_mutex_lock(&list_lock);
	for (pp = &queues; *pp != k; pp = &(*pp)->next)
		;
	*pp = k->next;
	pthread_mutex_unlock(&list_lock);
	/* The CP writes nothing after DESTROY_QUEUE returns: the core's
	 * cancel then gives what did not run -1. */
	destroy_kfd_queue(a, k->queue_id);
	__atomic_store_n(&k->closing, 1, __ATOMIC_RELEASE);
	aql_signal_store(k->inactive, 1, AQL_RELEASE);
	pthread_join(k->watcher, NULL);
	q->pub.doorbell->kind = AQL_SIGNAL_KIND_USER;
	q->pub.doorbell->value = -1;
	q->agent_state = NULL;
	free_parts(k);
}
