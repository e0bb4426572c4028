/* SPDX-License-Identifier: MIT */
/*
 * Kernel dispatch for the emulated CP (cp.c). The packet's kernel_object
 * is found in the code BO the agent's loader filled (the first PT_LOAD
 * holds the ELF header, the dynamic symbols and the descriptors, as lld
 * lays out AMDGPU code objects; the image starts at the BO or at a
 * 256-byte boundary in it); the `.kd` symbol at that address names
 * the kernel, whose host build (a host code object from
 * AQL_KFD_EMU_KERNELS, colon-separated, as AQL_CUDA_EMU_KERNELS for the
 * CUDA emulation) runs on a private CPU agent over the packet's grid with
 * the kernarg block the agent built, AMDGPU layout. What the CP and the
 * hardware would refuse is checked first, against the packet: the
 * descriptor, the kernarg block, the group segment and, in a code object
 * V5 hidden block, every hidden argument the runtime fills.
 *
 * The host kernel reaches buffers at their GPU addresses, which aql makes
 * the host's: USERPTR memory, and GTT or public VRAM the agent mapped at
 * its VA, and VRAM without CPU access, which the emulation maps over the
 * agent's reservation while CPs run kernels (cp.c holds the window).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aql/agent.h"
#include "aql/code_object.h"
#include "aql/host_kernel.h"
#include "aql/metadata.h"
#include "aql/queue.h"
#include "aql/signal.h"
#include "emu.h"

#define MAX_HOST_OBJECTS 16
#define EM_AMDGPU 224
#define PT_DYNAMIC 2
#define DT_NULL 0
#define DT_HASH 4
#define DT_STRTAB 5
#define DT_SYMTAB 6

/* The host build of libaql's copy kernel (meson.build embeds it). */
extern const unsigned char kfdemu_blit_host[];
extern const size_t kfdemu_blit_host_size;

/* The private CPU agent and the host builds, made at the first dispatch:
 * the copy kernel's, then those of AQL_KFD_EMU_KERNELS. */
static struct {
	pthread_once_t once;
	pthread_mutex_t lock;		/* one host dispatch at a time */
	aql_agent *agent;
	aql_queue *queue;
	aql_signal *done;
	aql_code_object *objects[MAX_HOST_OBJECTS];
	int count;
	char error[160];
} host = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

static void host_init(void)
{
	aql_host_agent_config cfg = { .workers = 2 };
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };
	const char *list = getenv("AQL_KFD_EMU_KERNELS");
	char path[4096];

	if (aql_host_agent_create(&cfg, &host.agent) != AQL_OK ||
	    aql_queue_create(host.agent, &qc, &host.queue) != AQL_OK ||
	    aql_signal_create(0, &host.done) != AQL_OK ||
	    aql_code_object_load(host.agent, kfdemu_blit_host, kfdemu_blit_host_size, NULL,
				 &host.objects[host.count++]) != AQL_OK) {
		snprintf(host.error, sizeof(host.error), "the CPU agent for host builds: %s",
			 aql_error_message());
		return;
	}
	while (list && *list && host.count < MAX_HOST_OBJECTS) {
		const char *end = strchr(list, ':');
		size_t n = end ? (size_t)(end - list) : strlen(list);

		if (n > 0 && n < sizeof(path)) {
			memcpy(path, list, n);
			path[n] = 0;
			if (aql_code_object_load_file(host.agent, path, NULL,
						      &host.objects[host.count]) == AQL_OK)
				host.count++;
			else
				fprintf(stderr, "kfd-emu: AQL_KFD_EMU_KERNELS: %s: %s\n", path,
					aql_error_message());
		}
		list = end ? end + 1 : list + n;
	}
}

/* The host build of kernel name (without ".kd"), or NULL. */
static const aql_kernel *host_kernel(const char *name)
{
	const aql_kernel *k;

	for (int i = 0; i < host.count; i++)
		if (aql_code_object_kernel(host.objects[i], name, &k) == AQL_OK)
			return k;
	return NULL;
}

static uint64_t rd(const unsigned char *p, int bytes)
{
	uint64_t v = 0;

	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/*
 * The name of the `.kd` symbol at offset kd_off of the image at img
 * (bytes long), copied to name; 0, or -1 when the image has no such
 * symbol or is not a loaded AMDGPU ELF.
 */
static int kd_name(const unsigned char *img, uint64_t bytes, uint64_t kd_off, char *name,
		   size_t size)
{
	uint64_t phoff, symtab = 0, strtab = 0, hash = 0, nsyms;
	uint32_t phnum;

	if (bytes < 64 || memcmp(img, "\177ELF", 4) || img[4] != 2 || rd(img + 18, 2) != EM_AMDGPU)
		return -1;
	phoff = rd(img + 32, 8);
	phnum = (uint32_t)rd(img + 56, 2);
	if (phoff > bytes || (uint64_t)phnum * 56 > bytes - phoff)
		return -1;
	for (uint32_t i = 0; i < phnum; i++) {
		const unsigned char *ph = img + phoff + (uint64_t)i * 56;
		uint64_t va = rd(ph + 16, 8), sz = rd(ph + 32, 8);

		if (rd(ph, 4) != PT_DYNAMIC)
			continue;
		if (va > bytes || sz > bytes - va)
			return -1;
		for (uint64_t d = va; d + 16 <= va + sz; d += 16) {
			uint64_t tag = rd(img + d, 8), val = rd(img + d + 8, 8);

			if (tag == DT_NULL)
				break;
			if (tag == DT_HASH)
				hash = val;
			else if (tag == DT_STRTAB)
				strtab = val;
			else if (tag == DT_SYMTAB)
				symtab = val;
		}
	}
	if (!hash || !symtab || !strtab || hash + 8 > bytes)
		return -1;
	nsyms = rd(img + hash + 4, 4);		/* nchain */
	if (symtab > bytes || nsyms > (bytes - symtab) / 24)
		return -1;
	for (uint64_t i = 1; i < nsyms; i++) {
		const unsigned char *s = img + symtab + i * 24;
		uint64_t at = strtab + rd(s, 4), len;

		if (rd(s + 8, 8) != kd_off || at >= bytes)
			continue;
		len = strnlen((const char *)img + at, bytes - at);
		if (len < 4 || len == bytes - at || len - 3 >= size ||
		    strcmp((const char *)img + at + len - 3, ".kd"))
			continue;
		memcpy(name, img + at, len - 3);
		name[len - 3] = 0;
		return 0;
	}
	return -1;
}

static int fail(char *why, size_t n, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t n, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return code;
}

/* AMDGPU kernel descriptor fields (rocr_abi.md §4). */
struct kd {
	uint32_t group_fixed;
	uint32_t kernarg_size;
	int64_t entry_offset;
};

/*
 * The hidden arguments of a code object V5 block at h against the packet:
 * NULL, or the name of the first that differs.
 */
static const char *check_hidden(const unsigned char *h, const aql_dispatch_packet *p,
				const struct kd *kd, uint64_t amd_queue)
{
	static const char *const count[3] = { "hidden_block_count_x", "hidden_block_count_y",
					      "hidden_block_count_z" };
	static const char *const group[3] = { "hidden_group_size_x", "hidden_group_size_y",
					      "hidden_group_size_z" };
	static const char *const rem[3] = { "hidden_remainder_x", "hidden_remainder_y",
					    "hidden_remainder_z" };
	const uint32_t grid[3] = { p->grid_size_x, p->grid_size_y, p->grid_size_z };
	const uint32_t wg[3] = { p->workgroup_size_x, p->workgroup_size_y, p->workgroup_size_z };

	for (int d = 0; d < 3; d++) {
		if (rd(h + 4 * d, 4) != grid[d] / wg[d])
			return count[d];
		if (rd(h + 12 + 2 * d, 2) != wg[d])
			return group[d];
		if (rd(h + 18 + 2 * d, 2) != grid[d] % wg[d])
			return rem[d];
	}
	if (rd(h + 64, 2) != (p->setup & AQL_DISPATCH_DIMS_MASK))
		return "hidden_grid_dims";
	if (rd(h + 120, 4) != p->group_segment_size - kd->group_fixed)
		return "hidden_dynamic_lds_size";
	if (rd(h + 200, 8) != amd_queue)
		return "hidden_queue_ptr";
	return NULL;
}

/*
 * The queue's scratch for p (plan §9, ROCr DynamicScratchHandler): each
 * wave in flight needs 64 lanes of align16(private_segment_size) bytes,
 * with at most max_slots_scratch_cu waves per CU. Too little in the
 * amd_queue_t's scratch fields is CP code 1, which the runtime answers by
 * growing it and storing 0 (the CP then retries). 0 when enough; 1; or
 * UINT32_MAX for a VM fault reading the amd_queue_t.
 */
static uint32_t scratch(const struct emu_cp_queue *q, const aql_dispatch_packet *p,
			const struct emu_queue_props *props, char *why, size_t why_size,
			uint64_t *fault_va)
{
	const aql_amd_queue *amd = emu_memory_gpu_begin(q->gpu, q->amd_queue, sizeof(*amd));
	uint64_t lane = (p->private_segment_size + 15ull) & ~15ull, have, lane_have;
	uint64_t per_group = (((uint64_t)p->workgroup_size_x * p->workgroup_size_y *
			       p->workgroup_size_z) + 63) / 64;
	uint64_t groups = (uint64_t)((p->grid_size_x + p->workgroup_size_x - 1) / p->workgroup_size_x) *
			  ((p->grid_size_y + p->workgroup_size_y - 1) / p->workgroup_size_y) *
			  ((p->grid_size_z + p->workgroup_size_z - 1) / p->workgroup_size_z);
	uint64_t waves = groups * per_group, slots = (uint64_t)props->cus * props->max_slots_scratch_cu;

	if (!amd) {
		*fault_va = q->amd_queue;
		return UINT32_MAX;
	}
	have = __atomic_load_n(&amd->scratch_backing_memory_byte_size, __ATOMIC_ACQUIRE);
	lane_have = __atomic_load_n(&amd->scratch_wave64_lane_byte_size, __ATOMIC_ACQUIRE);
	emu_memory_gpu_end();
	if (waves > slots)
		waves = slots;
	if (lane_have < lane || have < lane * 64 * waves)
		return (uint32_t)fail(why, why_size, 1, "scratch of %llu bytes (%llu per lane) for "
				      "%llu bytes per lane and %llu waves",
				      (unsigned long long)have, (unsigned long long)lane_have,
				      (unsigned long long)lane, (unsigned long long)waves);
	return 0;
}

int emu_kernel_dispatch(const struct emu_cp_queue *q, const aql_dispatch_packet *p, char *why,
			size_t why_size, uint64_t *fault_va, int *fault_exec)
{
	unsigned dims = p->setup & AQL_DISPATCH_DIMS_MASK;
	const uint32_t grid[3] = { p->grid_size_x, p->grid_size_y, p->grid_size_z };
	const uint32_t wg[3] = { p->workgroup_size_x, p->workgroup_size_y, p->workgroup_size_z };
	struct emu_queue_props props;
	struct kfdemu_bo bo;
	const unsigned char *img;
	const aql_kernel *k;
	unsigned char *args;
	aql_dispatch_packet hp;
	aql_packet raw;
	char name[256];
	struct kd kd;
	uint64_t explicit_end = 0, hidden;
	uint32_t dyn;
	int64_t v = 0;

	/* the CP's packet checks (ROCr's codes: 2 dimensions, 64 work-group
	 * size, 4 group memory, 8 code object, 32 packet format) */
	if (dims == 0)
		return fail(why, why_size, 2, "setup has 0 dimensions");
	for (unsigned d = 0; d < 3; d++)
		if (!wg[d] || !grid[d] || (d >= dims && (wg[d] != 1 || grid[d] != 1)))
			return fail(why, why_size, 2, "dimension %c: grid %u, work-group %u",
				    "xyz"[d], grid[d], wg[d]);
	if ((uint64_t)wg[0] * wg[1] * wg[2] > 1024)
		return fail(why, why_size, 64, "work-group of %llu work-items, over 1024",
			    (unsigned long long)wg[0] * wg[1] * wg[2]);
	emu_model_queue_props(q->gpu->model, &props);
	if (p->group_segment_size > props.lds_size)
		return fail(why, why_size, 4, "group segment %u bytes, over the %u of LDS",
			    p->group_segment_size, props.lds_size);
	if (p->private_segment_size) {
		uint32_t r = scratch(q, p, &props, why, why_size, fault_va);

		if (r)
			return r == UINT32_MAX ? -1 : (int)r;
	}
	if (!p->kernel_object || p->kernel_object % 64)
		return fail(why, why_size, 8, "kernel_object 0x%llx is not 64-byte aligned",
			    (unsigned long long)p->kernel_object);
	if (!p->kernarg_address || p->kernarg_address % 16)
		return fail(why, why_size, 32, "kernarg_address 0x%llx is not 16-byte aligned",
			    (unsigned long long)p->kernarg_address);

	/* the descriptor, read through the VM */
	img = emu_memory_gpu_begin_bo(q->gpu, p->kernel_object, 64, &bo);
	if (!img) {
		*fault_va = p->kernel_object;
		*fault_exec = 0;
		return -1;
	}
	img -= p->kernel_object - bo.va;
	kd.group_fixed = (uint32_t)rd(img + (p->kernel_object - bo.va), 4);
	kd.kernarg_size = (uint32_t)rd(img + (p->kernel_object - bo.va) + 8, 4);
	kd.entry_offset = (int64_t)rd(img + (p->kernel_object - bo.va) + 16, 8);
	/* the entry: 256-byte aligned, fetched from an EXECUTABLE BO (else
	 * the fetch is an execute fault of an NX page) */
	if ((p->kernel_object + (uint64_t)kd.entry_offset) % 256) {
		emu_memory_gpu_end();
		return fail(why, why_size, 8, "kernel entry 0x%llx is not 256-byte aligned",
			    (unsigned long long)(p->kernel_object + (uint64_t)kd.entry_offset));
	}
	if (!(bo.flags & KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE) ||
	    p->kernel_object + (uint64_t)kd.entry_offset - bo.va >= bo.size) {
		emu_memory_gpu_end();
		*fault_va = p->kernel_object + (uint64_t)kd.entry_offset;
		*fault_exec = 1;
		return -1;
	}
	/* the image starts at the BO or, where the loader shares a BO among
	 * code objects, at an AMD_ISA_ALIGN_BYTES (256) boundary below the
	 * descriptor */
	for (uint64_t base = (p->kernel_object - bo.va) & ~255ull;; base -= 256) {
		if (!kd_name(img + base, bo.size - base, p->kernel_object - bo.va - base, name,
			     sizeof(name)))
			break;
		if (base == 0) {
			emu_memory_gpu_end();
			return fail(why, why_size, 8, "no .kd symbol at kernel_object 0x%llx in "
				    "a code object of the BO at 0x%llx",
				    (unsigned long long)p->kernel_object,
				    (unsigned long long)bo.va);
		}
	}
	emu_memory_gpu_end();
	if (p->group_segment_size < kd.group_fixed)
		return fail(why, why_size, 4, "group segment %u bytes, under the kernel's %u",
			    p->group_segment_size, kd.group_fixed);

	pthread_once(&host.once, host_init);
	if (host.error[0])
		return fail(why, why_size, 8, "%s", host.error);
	k = host_kernel(name);
	if (!k)
		return fail(why, why_size, 8, "no host build of kernel %s in AQL_KFD_EMU_KERNELS",
			    name);

	/* the kernarg block, copied out of the VM: it must all be mapped */
	args = aligned_alloc(64, ((size_t)kd.kernarg_size + 63) & ~(size_t)63);
	if (!args)
		return fail(why, why_size, 8, "out of host memory for the kernarg copy");
	if (kd.kernarg_size) {
		const void *src = emu_memory_gpu_begin(q->gpu, p->kernarg_address, kd.kernarg_size);

		if (!src) {
			free(args);
			*fault_va = p->kernarg_address;
			*fault_exec = 0;
			return -1;
		}
		memcpy(args, src, kd.kernarg_size);
		emu_memory_gpu_end();
	}
	/* a V5 hidden block follows the explicit arguments, 8-aligned */
	for (uint32_t i = 0; i < k->explicit_arg_count && i < k->metadata->arg_count; i++) {
		const aql_kernel_arg *a = &k->metadata->args[i];

		if (a->offset + a->size > explicit_end)
			explicit_end = a->offset + a->size;
	}
	hidden = (explicit_end + 7) & ~7ull;
	if (kd.kernarg_size >= hidden + 256) {
		const char *bad = check_hidden(args + hidden, p, &kd, q->amd_queue);

		if (bad) {
			free(args);
			return fail(why, why_size, 32, "%s of kernel %s does not match the packet",
				    bad, name);
		}
	}

	/* run it; the dynamic LDS is what the packet gives beyond the GPU
	 * build's static LDS, placed after the host build's (their static
	 * sizes differ where the compiler drops an unused variable) */
	hp = *p;
	dyn = (kd.group_fixed + 15) & ~15u;	/* AQL_DYNAMIC_LDS_ALIGN */
	dyn = p->group_segment_size > dyn ? p->group_segment_size - dyn : 0;
	hp.group_segment_size = dyn ? ((k->group_segment_size + 15) & ~15u) + dyn :
				      k->group_segment_size;
	hp.kernel_object = k->kernel_object;
	hp.kernarg_address = (uint64_t)(uintptr_t)args;
	hp.completion_signal = aql_signal_handle(host.done);
	hp.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
				      AQL_FENCE_SYSTEM);
	memcpy(&raw, &hp, sizeof(hp));
	pthread_mutex_lock(&host.lock);
	aql_signal_store(host.done, 1, AQL_RELAXED);
	if (aql_queue_submit(host.queue, &raw) != AQL_OK ||
	    aql_signal_wait(host.done, AQL_COND_LT, 1, AQL_TIMEOUT_INFINITE, AQL_WAIT_SPIN_BLOCK,
			    &v) != AQL_OK || v < 0) {
		pthread_mutex_unlock(&host.lock);
		free(args);
		return fail(why, why_size, 8, "the host build of %s failed: %s", name,
			    aql_error_message());
	}
	pthread_mutex_unlock(&host.lock);
	free(args);
	return 0;
}
