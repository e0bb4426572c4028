/* SPDX-License-Identifier: MIT */
/*
 * The KFD topology in sysfs, as kfd_topology.c prints it (sysprops_show,
 * node_show, mem_show, kfd_cache_show, iolink_show), for a CPU node 0 and
 * the GPU models below. Files are made when read, under AQL_KFD_TOPOLOGY
 * only; every other path is -ENOENT.
 *
 * Model values come from public rocminfo and sysfs dumps of an MI250X
 * (gfx90a, one GCD) and an MI300X (gfx942, SPX: 8 XCCs), and from the
 * kernel's formulas; and a Radeon R9 Fury (gfx803) as a GPU that aql
 * does not support: 32-bit-era doorbells (type 1), no SVM, no sramecc. Those marked "approx" had no public dump to check
 * against; nothing should rely on them being the hardware's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aql/kfd/sys.h"
#include "emu.h"

struct emu_cache {
	uint32_t level;
	uint32_t size_kb;
	uint32_t line;
	uint32_t assoc;
	uint32_t shared_cus;		/* CUs that share one instance: 1, an XCC, or all */
};

struct emu_model {
	const char *name;		/* the target: gfx90a */
	const char *node_name;		/* the name file: amdgpu_asic_name[], lower case */
	uint32_t min_minor;		/* the first KFD 1.x whose kernel has the part */
	uint32_t gfx_target_version;
	uint32_t device_id;
	uint32_t gpu_id;		/* a hash of the device in the kernel (kfd_generate_gpu_id) */
	uint32_t simd_count;		/* whole device */
	uint32_t simd_per_cu;
	uint32_t array_count;		/* whole device */
	uint32_t simd_arrays_per_engine;
	uint32_t cu_per_simd_array;
	uint32_t max_waves_per_simd;
	uint32_t lds_size_in_kb;
	uint32_t num_gws;
	uint32_t max_slots_scratch_cu;
	uint32_t num_xcc;
	uint32_t max_engine_clk_fcompute;
	uint32_t num_sdma_engines;
	uint32_t num_sdma_xgmi_engines;
	uint32_t num_sdma_queues_per_engine;
	uint32_t num_cp_queues;
	uint32_t fw_version;		/* MEC */
	uint32_t sdma_fw_version;
	uint32_t debug_prop;
	uint32_t capability;		/* without the debugger's bits */
	int trap_debug;			/* has the debugger's capabilities (1.13) */
	uint32_t vgpr;			/* VGPR bytes per CU to save (kfd_get_vgpr_size_per_cu) */
	uint64_t vram;
	uint32_t mem_width;
	uint32_t mem_clk_max;
	uint64_t gpu_clock_hz;		/* the timestamp counter's reference clock */
	uint32_t pcie_mbps;
	uint32_t location_id;		/* bus << 8 | device << 3 | function */
	uint64_t unique_id;
	unsigned ncaches;
	struct emu_cache caches[3];
	/* What libdrm tells (sys.h gpu_query) beyond the sysfs values: the
	 * marketing name libdrm's amdgpu.ids gives the device and PCI
	 * revision, the ASIC's revisions and family (amdgpu_drm.h), and
	 * firmware the topology does not print. */
	const char *marketing_name;
	uint32_t pci_rev, chip_rev, external_rev, family_id;
	uint32_t rlc_fw_version, smc_fw_version, sos_fw_version;
};

#define GFX9_CAPS                                                                \
	(HSA_CAP_DOORBELL_TYPE_2_0 << HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT |      \
	 HSA_CAP_WATCH_POINTS_SUPPORTED | 2u << HSA_CAP_WATCH_POINTS_TOTALBITS_SHIFT | \
	 HSA_CAP_MEM_EDCSUPPORTED | HSA_CAP_RASEVENTNOTIFY | HSA_CAP_SRAM_EDCSUPPORTED | \
	 HSA_CAP_SVMAPI_SUPPORTED)

static const struct emu_model models[] = {
	{
		.name = "gfx90a", .node_name = "aldebaran",
		.min_minor = 5,			/* approx: Linux 5.14 */
		.gfx_target_version = 90010, .device_id = 0x740c, .gpu_id = 0xe3a1,
		.simd_count = 440, .simd_per_cu = 4,		/* 110 CUs */
		.array_count = 8, .simd_arrays_per_engine = 1,
		.cu_per_simd_array = 14,	/* approx */
		.max_waves_per_simd = 8, .lds_size_in_kb = 64, .num_gws = 64,
		.max_slots_scratch_cu = 32, .num_xcc = 1, .max_engine_clk_fcompute = 1700,
		.num_sdma_engines = 2,
		.num_sdma_xgmi_engines = 3,	/* approx */
		.num_sdma_queues_per_engine = 8,
		.num_cp_queues = 24,		/* approx */
		.fw_version = 78, .sdma_fw_version = 8,		/* approx */
		.debug_prop = 0x1d6,		/* approx: watch address mask bits 6..29 */
		/* kfd_topology_set_capabilities: 64-bit doorbells on GC >= 9.0.1,
		 * 4 watch points on gfx9; sramecc, ECC, RAS and SVM (approx) */
		.capability = GFX9_CAPS, .trap_debug = 1, .vgpr = 0x80000,
		.vram = 64ull << 30, .mem_width = 4096,
		.mem_clk_max = 1600,		/* approx */
		/* soc15.c soc15_get_xclk: the vbios's SPLL reference clock on
		 * Aldebaran, 100 MHz (approx: no vbios read here) */
		.gpu_clock_hz = 100000000,
		.pcie_mbps = 32000,		/* approx: PCIe 4.0 x16 */
		.location_id = 0x2900, .unique_id = 0x1a2b3c4d5e6f7081ull,
		.ncaches = 2,
		.caches = {
			{ .level = 1, .size_kb = 16, .line = 64, .assoc = 4, .shared_cus = 1 },
			/* approx, from memory of an MI250X rocminfo */
			{ .level = 2, .size_kb = 8192, .line = 128, .assoc = 16, .shared_cus = 110 },
		},
		/* amdgpu.ids: 740C, 01; soc15.c: external = rev_id + 0x3c on
		 * Aldebaran; rev_id approx; the firmware numbers are made up */
		.marketing_name = "AMD Instinct MI250X / MI250",
		.pci_rev = 0x01, .chip_rev = 1, .external_rev = 0x3d, .family_id = 141,
		.rlc_fw_version = 17, .smc_fw_version = 0x00445300, .sos_fw_version = 0x00210b04,
	},
	{
		.name = "gfx942", .node_name = "ip discovery",
		.min_minor = 13,		/* approx: GC 9.4.3 came with Linux 6.5 */
		.gfx_target_version = 90402, .device_id = 0x74a1, .gpu_id = 0x6c5f,
		.simd_count = 1216, .simd_per_cu = 4,		/* 304 CUs, 38 per XCC */
		.array_count = 32, .simd_arrays_per_engine = 1,
		.cu_per_simd_array = 10,	/* approx */
		.max_waves_per_simd = 8, .lds_size_in_kb = 64, .num_gws = 64,
		.max_slots_scratch_cu = 32, .num_xcc = 8, .max_engine_clk_fcompute = 2100,
		.num_sdma_engines = 2, .num_sdma_xgmi_engines = 14,
		.num_sdma_queues_per_engine = 8, .num_cp_queues = 24,
		.fw_version = 177, .sdma_fw_version = 19,	/* approx */
		.debug_prop = 0x1d7,		/* approx: watch address mask bits 7..29 */
		/* kfd_topology_set_capabilities: 64-bit doorbells on GC >= 9.0.1,
		 * 4 watch points on gfx9; sramecc, ECC, RAS and SVM (approx) */
		.capability = GFX9_CAPS, .trap_debug = 1, .vgpr = 0x80000,
		.vram = 192ull << 30, .mem_width = 8192,
		.mem_clk_max = 1300,		/* approx */
		/* soc15.c soc15_get_xclk: 10000 (10 kHz units) for MP1 13.0.6,
		 * "SMU v13.0.6 SOCs have 100MHz reference clock" (amd-gfx) */
		.gpu_clock_hz = 100000000,
		.pcie_mbps = 64000,		/* approx: PCIe 5.0 x16 */
		.location_id = 0x0c00, .unique_id = 0x7f6e5d4c3b2a1908ull,
		.ncaches = 3,
		.caches = {
			{ .level = 1, .size_kb = 32, .line = 128, .assoc = 4, .shared_cus = 1 },
			{ .level = 2, .size_kb = 4096, .line = 128, .assoc = 16, .shared_cus = 38 },
			/* the Infinity Cache, from a public MI308X rocminfo */
			{ .level = 3, .size_kb = 262144, .line = 64, .assoc = 16, .shared_cus = 304 },
		},
		/* amdgpu.ids: 74A1, 00 (libdrm 2.4.117 and later; older ones
		 * have no name for it); soc15.c: external = rev_id + 0x46 on
		 * GC 9.4.3; rev_id approx; the firmware numbers are made up */
		.marketing_name = "AMD Instinct MI300X",
		.pci_rev = 0x00, .chip_rev = 0, .external_rev = 0x46, .family_id = 141,
		.rlc_fw_version = 10, .smc_fw_version = 0x00557300, .sos_fw_version = 0x00250016,
	},
	{
		/* Every value approx but the target, the device and the doorbell type. */
		.name = "gfx803", .node_name = "fiji",
		.min_minor = 0,
		.gfx_target_version = 80003, .device_id = 0x7300, .gpu_id = 0x4a17,
		.simd_count = 256, .simd_per_cu = 4,		/* 64 CUs */
		.array_count = 4, .simd_arrays_per_engine = 1, .cu_per_simd_array = 16,
		.max_waves_per_simd = 10, .lds_size_in_kb = 64, .num_gws = 0,
		.max_slots_scratch_cu = 32, .num_xcc = 1, .max_engine_clk_fcompute = 1050,
		.num_sdma_engines = 2, .num_sdma_xgmi_engines = 0,
		.num_sdma_queues_per_engine = 2, .num_cp_queues = 24,
		.fw_version = 730, .sdma_fw_version = 58, .debug_prop = 0,
		/* gfx8 doorbells are type 1; watch points as on gfx9 */
		.capability = HSA_CAP_DOORBELL_TYPE_1_0 << HSA_CAP_DOORBELL_TYPE_TOTALBITS_SHIFT |
			      HSA_CAP_WATCH_POINTS_SUPPORTED |
			      2u << HSA_CAP_WATCH_POINTS_TOTALBITS_SHIFT,
		.trap_debug = 0, .vgpr = 0x40000,
		.vram = 4ull << 30, .mem_width = 4096, .mem_clk_max = 500,
		.pcie_mbps = 16000, .location_id = 0x4300, .unique_id = 0,
		.ncaches = 2,
		.caches = {
			{ .level = 1, .size_kb = 16, .line = 64, .assoc = 4, .shared_cus = 1 },
			{ .level = 2, .size_kb = 2048, .line = 64, .assoc = 16, .shared_cus = 64 },
		},
		/* amdgpu.ids: 7300, CB; vi.c: external = rev_id + 0x3c on
		 * Fiji; family VI; the firmware numbers are made up */
		.marketing_name = "AMD Radeon R9 Fury Series",
		.pci_rev = 0xcb, .chip_rev = 0, .external_rev = 0x3c, .family_id = 130,
		.rlc_fw_version = 55, .smc_fw_version = 0x00112a00, .sos_fw_version = 0,
	},
};

/* The host: one CPU node (approx: a 64-core EPYC with 512 GiB). */
#define CPU_CORES 64u
#define CPU_MHZ 3700u
#define CPU_MEM (512ull << 30)

const struct emu_model *emu_model_find(const char *name)
{
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
		if (!strcmp(models[i].name, name))
			return &models[i];
	return NULL;
}

uint32_t emu_model_min_minor(const struct emu_model *model)
{
	return model->min_minor;
}

uint32_t emu_model_gpu_id(const struct emu_model *model)
{
	return model->gpu_id;
}

const char *emu_model_name(const struct emu_model *model)
{
	return model->name;
}

uint32_t emu_model_gfx_version(const struct emu_model *model)
{
	return model->gfx_target_version;
}

uint32_t emu_model_simds(const struct emu_model *model)
{
	return model->simd_count;
}

/*
 * The context save area per XCC and its control stack, as
 * kfd_queue.c kfd_queue_ctx_save_restore_size computes them for gfx8 and
 * gfx9 (8 bytes of control stack per wave, below gfx10.1).
 */
static void cwsr_sizes(const struct emu_model *m, uint32_t *cwsr, uint32_t *ctl, uint32_t *waves_out)
{
	uint32_t cu = m->simd_count / m->simd_per_cu / m->num_xcc;
	uint32_t waves = cu * 40;
	uint32_t se_bound = m->array_count / m->simd_arrays_per_engine * 512;
	/* the model's VGPRs; SGPR 0x4000, LDS 0x10000, HWREG 0x1000 */
	uint32_t wg = cu * (m->vgpr + 0x4000 + 0x10000 + 0x1000);

	if (waves > se_bound)
		waves = se_bound;
	*ctl = (40 + waves * 8 + 8 + 4095) & ~4095u;
	*cwsr = *ctl + ((wg + 4095) & ~4095u);
	if (waves_out)
		*waves_out = waves;
}

void emu_model_queue_props(const struct emu_model *m, struct emu_queue_props *out)
{
	uint32_t waves;

	cwsr_sizes(m, &out->cwsr_size, &out->ctl_stack_size, &waves);
	/* DEBUGGER_BYTES_PER_WAVE 32, DEBUGGER_BYTES_ALIGN 64 */
	out->debug_memory_size = (waves * 32 + 63) & ~63u;
	/* Tonga's 0x8000; 4096 for every other gfx8 and gfx9 part */
	out->eop_buffer_size = m->gfx_target_version == 80002 ? 0x8000 : 4096;
	out->num_xcc = m->num_xcc;
	out->lds_size = m->lds_size_in_kb << 10;
	out->cus = m->simd_count / m->simd_per_cu;
	out->max_slots_scratch_cu = m->max_slots_scratch_cu;
	out->waves_per_cu = m->simd_per_cu * m->max_waves_per_simd;
	/* kfd_process_queue_manager.c pqm_create_queue: the HWS limit, 127;
	 * 255 on GC 9.4.3, 9.4.4 and 9.5.0 */
	out->max_queues = m->gfx_target_version >= 90402 && m->gfx_target_version < 100000 ? 255
											      : 127;
}

struct out {
	char *buf;
	size_t size, len;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->len >= o->size)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->len += (size_t)n;
}

static void prop(struct out *o, const char *key, uint64_t value)
{
	put(o, "%s %llu\n", key, (unsigned long long)value);
}

static void node_properties(struct out *o, uint32_t node)
{
	const struct emu_config *c = emu_config();
	const struct emu_gpu *g = node ? &c->gpus[node - 1] : NULL;
	const struct emu_model *m = g ? g->model : NULL;
	uint32_t cap = 0, cwsr = 0, ctl = 0;

	prop(o, "cpu_cores_count", m ? 0 : CPU_CORES);
	prop(o, "simd_count", m ? m->simd_count : 0);
	prop(o, "mem_banks_count", 1);
	prop(o, "caches_count", m ? m->ncaches : 0);
	prop(o, "io_links_count", m ? 1 : c->ngpus);
	prop(o, "p2p_links_count", 0);
	prop(o, "cpu_core_id_base", 0);
	prop(o, "simd_id_base", g ? g->simd_id_base : 0);
	prop(o, "max_waves_per_simd", m ? m->max_waves_per_simd : 0);
	prop(o, "lds_size_in_kb", m ? m->lds_size_in_kb : 0);
	prop(o, "gds_size_in_kb", 0);
	prop(o, "num_gws", m ? m->num_gws : 0);
	prop(o, "wave_front_size", m ? 64 : 0);
	prop(o, "array_count", m ? m->array_count : 0);
	prop(o, "simd_arrays_per_engine", m ? m->simd_arrays_per_engine : 0);
	prop(o, "cu_per_simd_array", m ? m->cu_per_simd_array : 0);
	prop(o, "simd_per_cu", m ? m->simd_per_cu : 0);
	prop(o, "max_slots_scratch_cu", m ? m->max_slots_scratch_cu : 0);
	prop(o, "gfx_target_version", m ? m->gfx_target_version : 0);
	prop(o, "vendor_id", m ? 0x1002 : 0);
	prop(o, "device_id", m ? m->device_id : 0);
	prop(o, "location_id", m ? m->location_id + (node - 1) * 0x1000 : 0);
	prop(o, "domain", 0);
	prop(o, "drm_render_minor", g ? g->render_minor : 0);
	prop(o, "hive_id", 0);
	prop(o, "num_sdma_engines", m ? m->num_sdma_engines : 0);
	prop(o, "num_sdma_xgmi_engines", m ? m->num_sdma_xgmi_engines : 0);
	prop(o, "num_sdma_queues_per_engine", m ? m->num_sdma_queues_per_engine : 0);
	prop(o, "num_cp_queues", m ? m->num_cp_queues : 0);
	if (m) {
		cwsr_sizes(m, &cwsr, &ctl, NULL);
		/*
		 * Published since upstream 8fc2796dea6f (late 2025, backported
		 * to stable): tied here to 1.18, the newest version modelled.
		 */
		if (emu_at_least(18)) {
			prop(o, "cwsr_size", cwsr);
			prop(o, "ctl_stack_size", ctl);
		}
		cap = m->capability;
		/* The debugger API (1.13): trap debug support, wave launch
		 * trap override and mode, precise memory operations. */
		if (m->trap_debug && emu_at_least(13))
			cap |= 0x8000 | 0x10000 | 0x20000 | 0x40000;
		prop(o, "max_engine_clk_fcompute", m->max_engine_clk_fcompute);
		/* node_show prints 0: VRAM sizes are in mem_banks */
		prop(o, "local_mem_size", 0);
		prop(o, "fw_version", m->fw_version);
		prop(o, "capability", cap);
		if (emu_at_least(13))
			prop(o, "debug_prop", m->debug_prop);
		prop(o, "sdma_fw_version", m->sdma_fw_version);
		prop(o, "unique_id", m->unique_id + node);
		/* num_xcc came with GC 9.4.3 (Linux 6.5, approx 1.13) */
		if (emu_at_least(13))
			prop(o, "num_xcc", m->num_xcc);
	}
	prop(o, "max_engine_clk_ccompute", CPU_MHZ);
}

static void mem_properties(struct out *o, const struct emu_model *m)
{
	/*
	 * kfd_crat.c kfd_create_vcrat_image_gpu: FB_PUBLIC when all VRAM is
	 * host-visible (a large BAR), FB_PRIVATE when some is not.
	 */
	uint32_t fb = emu_config()->small_bar ? HSA_MEM_HEAP_TYPE_FB_PRIVATE
					     : HSA_MEM_HEAP_TYPE_FB_PUBLIC;

	prop(o, "heap_type", m ? fb : HSA_MEM_HEAP_TYPE_SYSTEM);
	prop(o, "size_in_bytes", m ? emu_model_vram(m) : CPU_MEM);
	prop(o, "flags", 0);
	prop(o, "width", m ? m->mem_width : 64);
	prop(o, "mem_clk_max", m ? m->mem_clk_max : 3200);
}

uint64_t emu_gpu_clock(const struct emu_gpu *g)
{
	uint64_t hz = emu_config()->gpu_clock_hz ? emu_config()->gpu_clock_hz
						 : g->model->gpu_clock_hz;
	struct timespec ts;

	/*
	 * A free-running oscillator, so CLOCK_MONOTONIC_RAW (not slewed by
	 * NTP); offset per GPU, as each counts from its own power-up.
	 */
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	ts.tv_sec += 1000 * g->node;
	return (uint64_t)ts.tv_sec * hz + (uint64_t)ts.tv_nsec * hz / 1000000000u;
}

uint64_t emu_model_vram(const struct emu_model *m)
{
	return emu_config()->vram ? emu_config()->vram : m->vram;
}

/* amdgpu_vm.h AMDGPU_VM_RESERVED_VRAM: kept from every VRAM heap. */
#define VM_RESERVED_VRAM (8ull << 20)
/* The PCI BAR of a small-BAR GPU (approx: the classic 256 MiB). */
#define SMALL_BAR (256ull << 20)

static void drm_heap(struct aql_kfd_heap *h, uint64_t total, uint64_t usable)
{
	/* amdgpu_kms.c amdgpu_info_ioctl, AMDGPU_INFO_MEMORY: nothing pinned */
	*h = (struct aql_kfd_heap){ .total = total, .usable = usable,
				    .max_allocation = usable * 3 / 4 };
}

void emu_model_drm(const struct emu_model *m, struct aql_kfd_gpu_query *out)
{
	uint64_t vram = emu_model_vram(m), visible = emu_config()->small_bar ? SMALL_BAR : vram;

	*out = (struct aql_kfd_gpu_query){
		.asic_id = m->device_id, .pci_rev = m->pci_rev, .chip_rev = m->chip_rev,
		.chip_external_rev = m->external_rev, .family_id = m->family_id,
		/* the sysfs clocks and DEV_INFO's come from the same dpm
		 * levels (amdgpu_amdkfd.c, amdgpu_kms.c), in MHz and kHz */
		.max_engine_clock_mhz = m->max_engine_clk_fcompute,
		.max_memory_clock_mhz = m->mem_clk_max,
		/* the topology's fw_version and sdma_fw_version are the MEC's
		 * and SDMA instance 0's, as AMDGPU_INFO_FW_VERSION gives them */
		.fw_mec = m->fw_version, .fw_rlc = m->rlc_fw_version,
		.fw_sdma = m->sdma_fw_version, .fw_smc = m->smc_fw_version,
		.fw_sos = m->sos_fw_version,
	};
	snprintf(out->marketing_name, sizeof(out->marketing_name), "%s", m->marketing_name);
	drm_heap(&out->vram, vram, vram - VM_RESERVED_VRAM);
	drm_heap(&out->visible_vram, visible, visible < out->vram.usable ? visible :
						out->vram.usable);
	/* approx: TTM's default GTT limit, half the host's memory */
	drm_heap(&out->gtt, CPU_MEM / 2, CPU_MEM / 2);
}

static void cache_properties(struct out *o, const struct emu_gpu *g, const struct emu_cache *k)
{
	const struct emu_model *m = g->model;
	uint32_t cus = m->simd_count / m->simd_per_cu;
	uint32_t bits = (cus + 7) & ~7u;

	prop(o, "processor_id_low", g->simd_id_base);
	prop(o, "level", k->level);
	prop(o, "size", k->size_kb);
	prop(o, "cache_line_size", k->line);
	prop(o, "cache_lines_per_tag", 1);
	prop(o, "association", k->assoc);
	prop(o, "latency", 0);
	prop(o, "type", HSA_CACHE_TYPE_DATA | HSA_CACHE_TYPE_HSACU);
	/* kfd_cache_show: one "0," or "1," per bit, the last ',' a newline;
	 * this is the first instance's map, over the device's CUs */
	put(o, "sibling_map ");
	for (uint32_t i = 0; i < bits; i++)
		put(o, "%u%c", i < k->shared_cus, i + 1 < bits ? ',' : '\n');
}

static void iolink_properties(struct out *o, uint32_t from, uint32_t to, uint32_t mbps)
{
	prop(o, "type", HSA_IOLINK_TYPE_PCIEXPRESS);
	prop(o, "version_major", 0);
	prop(o, "version_minor", 0);
	prop(o, "node_from", from);
	prop(o, "node_to", to);
	prop(o, "weight", 20);		/* approx */
	prop(o, "min_latency", 0);
	prop(o, "max_latency", 0);
	prop(o, "min_bandwidth", mbps);	/* approx */
	prop(o, "max_bandwidth", mbps);
	prop(o, "recommended_transfer_size", 0);
	prop(o, "flags", 1);		/* approx: enabled */
}

/* What a path names: a folder (its entries) or a file (its text). */
enum kind { NONE, DIR_ROOT, DIR_NODES, DIR_NODE, DIR_BANKS, DIR_CACHES, DIR_LINKS,
	    DIR_EMPTY, DIR_ENTRY, FILE_TEXT };

struct where {
	enum kind kind;
	uint32_t node;
	uint32_t index;			/* DIR_ENTRY: a bank, cache or link */
	enum kind parent;		/* DIR_ENTRY: which */
};

/* Reads a decimal with no sign or leading zero; -1 if s is not one. */
static long number(const char *s, size_t len)
{
	long v = 0;

	if (len == 0 || len > 6 || (len > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int component(const char **p, const char *want)
{
	size_t n = strlen(want);

	if (strncmp(*p, want, n) || ((*p)[n] && (*p)[n] != '/'))
		return 0;
	*p += n;
	return 1;
}

static const char *next(const char *p, size_t *len)
{
	if (*p != '/')
		return NULL;
	p++;
	*len = strcspn(p, "/");
	return p;
}

/* Counts of a node's banks, caches and links. */
static uint32_t entries(uint32_t node, enum kind k)
{
	const struct emu_config *c = emu_config();

	switch (k) {
	case DIR_BANKS:
		return 1;
	case DIR_CACHES:
		return node ? c->gpus[node - 1].model->ncaches : 0;
	case DIR_LINKS:
		return node ? 1 : c->ngpus;
	default:
		return 0;
	}
}

/*
 * Find path; for a file, write its text to o. Returns the kind, or NONE
 * (not there).
 */
static enum kind resolve(const char *path, struct where *w, struct out *o)
{
	const struct emu_config *c = emu_config();
	const char *p = path, *s;
	size_t len;
	long v;

	memset(w, 0, sizeof(*w));
	if (!component(&p, AQL_KFD_TOPOLOGY))
		return NONE;
	if (!*p || !strcmp(p, "/"))
		return w->kind = DIR_ROOT;
	if (!strcmp(p, "/generation_id")) {
		/* sys_props.generation_count: one per device added (approx) */
		if (o)
			put(o, "%u\n", c->ngpus + 1);
		return FILE_TEXT;
	}
	if (!strcmp(p, "/system_properties")) {
		if (o) {
			prop(o, "platform_oem", 0);
			prop(o, "platform_id", 0);
			prop(o, "platform_rev", 0);
		}
		return FILE_TEXT;
	}
	p++;
	if (!component(&p, "nodes"))
		return NONE;
	if (!*p || !strcmp(p, "/"))
		return w->kind = DIR_NODES;
	s = next(p, &len);
	v = number(s, len);
	if (v < 0 || (uint32_t)v > c->ngpus)
		return NONE;
	w->node = (uint32_t)v;
	p = s + len;
	if (!*p || !strcmp(p, "/"))
		return w->kind = DIR_NODE;
	if (!strcmp(p, "/gpu_id")) {
		if (o)
			put(o, "%u\n", w->node ? c->gpus[w->node - 1].gpu_id : 0);
		return FILE_TEXT;
	}
	if (!strcmp(p, "/name")) {
		if (o)
			put(o, "%s\n", w->node ? c->gpus[w->node - 1].model->node_name : "");
		return FILE_TEXT;
	}
	if (!strcmp(p, "/properties")) {
		if (o)
			node_properties(o, w->node);
		return FILE_TEXT;
	}
	p++;
	if (component(&p, "p2p_links") || component(&p, "perf"))
		return *p && strcmp(p, "/") ? NONE : (w->kind = DIR_EMPTY);
	if (component(&p, "mem_banks"))
		w->parent = DIR_BANKS;
	else if (component(&p, "caches"))
		w->parent = DIR_CACHES;
	else if (component(&p, "io_links"))
		w->parent = DIR_LINKS;
	else
		return NONE;
	if (!*p || !strcmp(p, "/"))
		return w->kind = w->parent;
	s = next(p, &len);
	v = number(s, len);
	if (v < 0 || (uint32_t)v >= entries(w->node, w->parent))
		return NONE;
	w->index = (uint32_t)v;
	p = s + len;
	if (!*p || !strcmp(p, "/"))
		return w->kind = DIR_ENTRY;
	if (strcmp(p, "/properties"))
		return NONE;
	if (o) {
		const struct emu_gpu *g = w->node ? &c->gpus[w->node - 1] : NULL;

		if (w->parent == DIR_BANKS)
			mem_properties(o, g ? g->model : NULL);
		else if (w->parent == DIR_CACHES)
			cache_properties(o, g, &g->model->caches[w->index]);
		else if (g)
			iolink_properties(o, w->node, 0, g->model->pcie_mbps);
		else
			iolink_properties(o, 0, w->index + 1, c->gpus[w->index].model->pcie_mbps);
	}
	return FILE_TEXT;
}

long emu_read_file(const char *path, char *buf, size_t size)
{
	/* sysfs files are at most a page (sysfs_kf_seq_show) */
	char page[4096];
	struct out o = { page, sizeof(page), 0 };
	struct where w;
	enum kind k;
	size_t n;

	if (!path || (!buf && size))
		return -EFAULT;
	if (emu_config()->error[0])
		return -EINVAL;
	k = resolve(path, &w, &o);
	if (k == NONE)
		return -ENOENT;
	if (k != FILE_TEXT)
		return -EISDIR;
	/* kfd_topology.c node_show, mem_show, kfd_cache_show, iolink_show:
	 * -EPERM from every file of a GPU node the device cgroup denies
	 * (kfd_devcgroup_check_permission); its folders still list */
	if (w.node && emu_config()->gpus[w.node - 1].denied)
		return -EPERM;
	if (size == 0)
		return 0;
	n = o.len < size - 1 ? o.len : size - 1;
	memcpy(buf, page, n);
	buf[n] = '\0';
	return (long)n;
}

static int each_number(uint32_t count, int (*each)(const char *, void *), void *user)
{
	char name[16];
	int r;

	for (uint32_t i = 0; i < count; i++) {
		snprintf(name, sizeof(name), "%u", i);
		r = each(name, user);
		if (r)
			return r;
	}
	return 0;
}

static int each_name(const char *const *names, int (*each)(const char *, void *), void *user)
{
	int r;

	for (; *names; names++) {
		r = each(*names, user);
		if (r)
			return r;
	}
	return 0;
}

int emu_list_dir(const char *path, int (*each)(const char *name, void *user), void *user)
{
	static const char *const root[] = { "generation_id", "system_properties", "nodes", NULL };
	static const char *const node[] = { "gpu_id", "name", "properties", "mem_banks", "caches",
					    "io_links", "p2p_links", "perf", NULL };
	static const char *const entry[] = { "properties", NULL };
	struct where w;

	if (!path || !each)
		return -EFAULT;
	if (emu_config()->error[0])
		return -EINVAL;
	switch (resolve(path, &w, NULL)) {
	case NONE:
		return -ENOENT;
	case FILE_TEXT:
		return -ENOTDIR;
	case DIR_ROOT:
		return each_name(root, each, user);
	case DIR_NODES:
		return each_number(emu_config()->ngpus + 1, each, user);
	case DIR_NODE:
		return each_name(node, each, user);
	case DIR_BANKS:
	case DIR_CACHES:
	case DIR_LINKS:
		return each_number(entries(w.node, w.kind), each, user);
	case DIR_ENTRY:
		return each_name(entry, each, user);
	default:
		return 0;
	}
}
