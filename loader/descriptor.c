/* SPDX-License-Identifier: MIT */
/*
 * AMDGPU kernel descriptors: the 64 bytes the command processor reads at
 * a dispatch packet's kernel_object. Layout and bit fields as LLVM's
 * AMDGPUUsage documents them ("Kernel Descriptor" and the
 * COMPUTE_PGM_RSRC1/2/3 tables).
 */
#include <pthread.h>
#include <string.h>

#include "util/error.h"
#include "loader/loader_impl.h"

static uint32_t le32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint32_t bits(uint32_t word, unsigned shift, unsigned width)
{
	return (word >> shift) & ((width >= 32 ? 0 : 1u << width) - 1u);
}

void aql_kd_decode(const uint8_t kd[64], aql_kernel_descriptor_info *out)
{
	uint16_t props, preload;

	memset(out, 0, sizeof(*out));
	out->group_segment_fixed_size = le32(kd + 0);
	out->private_segment_fixed_size = le32(kd + 4);
	out->kernarg_size = le32(kd + 8);
	memcpy(&out->kernel_code_entry_byte_offset, kd + 16, 8);
	out->compute_pgm_rsrc3 = le32(kd + 44);
	out->compute_pgm_rsrc1 = le32(kd + 48);
	out->compute_pgm_rsrc2 = le32(kd + 52);
	memcpy(&props, kd + 56, 2);
	memcpy(&preload, kd + 58, 2);
	out->kernel_code_properties = props;
	out->kernarg_preload = preload;
	out->vgpr_granules = bits(out->compute_pgm_rsrc1, 0, 6);
	out->sgpr_granules = bits(out->compute_pgm_rsrc1, 6, 4);
	out->user_sgpr_count = bits(out->compute_pgm_rsrc2, 1, 5);
	out->workitem_id_dims = bits(out->compute_pgm_rsrc2, 11, 2) + 1;
	out->wave32 = bits(props, 10, 1);
	out->uses_dynamic_stack = bits(props, 11, 1);
	out->kernarg_preload_length = (uint8_t)bits(preload, 0, 7);
	out->kernarg_preload_offset = (uint16_t)bits(preload, 7, 9);
}

/* Processor families whose descriptor words differ (AMDGPUUsage tables). */
enum family {
	GFX9 = 1 << 0,
	GFX90A = 1 << 1,	/* gfx90a, gfx94x, gfx950: accumulation VGPRs */
	GFX10 = 1 << 2,
	GFX11 = 1 << 3,
	GFX12 = 1 << 4,
	FAMILIES = 5,
	ALL = (1 << FAMILIES) - 1,
	PRE12 = ALL & ~GFX12,
	WGP = GFX10 | GFX11 | GFX12,
};

static const struct {
	aql_kd_field field;
	unsigned families;
} fields[] = {
#define F(fam, n, w, s, b) { { n, AQL_KD_##w, s, b }, fam }
	F(ALL, "GRANULATED_WORKITEM_VGPR_COUNT", RSRC1, 0, 6),
	F(ALL, "GRANULATED_WAVEFRONT_SGPR_COUNT", RSRC1, 6, 4),
	F(ALL, "PRIORITY", RSRC1, 10, 2),
	F(ALL, "FLOAT_ROUND_MODE_32", RSRC1, 12, 2),
	F(ALL, "FLOAT_ROUND_MODE_16_64", RSRC1, 14, 2),
	F(ALL, "FLOAT_DENORM_MODE_32", RSRC1, 16, 2),
	F(ALL, "FLOAT_DENORM_MODE_16_64", RSRC1, 18, 2),
	F(ALL, "PRIV", RSRC1, 20, 1),
	F(PRE12, "ENABLE_DX10_CLAMP", RSRC1, 21, 1),
	F(GFX12, "WG_RR_EN", RSRC1, 21, 1),
	F(ALL, "DEBUG_MODE", RSRC1, 22, 1),
	F(PRE12, "ENABLE_IEEE_MODE", RSRC1, 23, 1),
	F(GFX12, "DISABLE_PERF", RSRC1, 23, 1),
	F(ALL, "BULKY", RSRC1, 24, 1),
	F(ALL, "CDBG_USER", RSRC1, 25, 1),
	F(ALL, "FP16_OVFL", RSRC1, 26, 1),
	F(WGP, "WGP_MODE", RSRC1, 29, 1),
	F(WGP, "MEM_ORDERED", RSRC1, 30, 1),
	F(WGP, "FWD_PROGRESS", RSRC1, 31, 1),
	F(ALL, "ENABLE_PRIVATE_SEGMENT", RSRC2, 0, 1),
	F(ALL, "USER_SGPR_COUNT", RSRC2, 1, 5),
	F(PRE12, "ENABLE_TRAP_HANDLER", RSRC2, 6, 1),
	F(ALL, "ENABLE_SGPR_WORKGROUP_ID_X", RSRC2, 7, 1),
	F(ALL, "ENABLE_SGPR_WORKGROUP_ID_Y", RSRC2, 8, 1),
	F(ALL, "ENABLE_SGPR_WORKGROUP_ID_Z", RSRC2, 9, 1),
	F(ALL, "ENABLE_SGPR_WORKGROUP_INFO", RSRC2, 10, 1),
	F(ALL, "ENABLE_VGPR_WORKITEM_ID", RSRC2, 11, 2),
	F(ALL, "ENABLE_EXCEPTION_ADDRESS_WATCH", RSRC2, 13, 1),
	F(ALL, "ENABLE_EXCEPTION_MEMORY", RSRC2, 14, 1),
	F(ALL, "GRANULATED_LDS_SIZE", RSRC2, 15, 9),
	F(ALL, "ENABLE_EXCEPTION_IEEE_754_FP_INVALID_OPERATION", RSRC2, 24, 1),
	F(ALL, "ENABLE_EXCEPTION_FP_DENORMAL_SOURCE", RSRC2, 25, 1),
	F(ALL, "ENABLE_EXCEPTION_IEEE_754_FP_DIVISION_BY_ZERO", RSRC2, 26, 1),
	F(ALL, "ENABLE_EXCEPTION_IEEE_754_FP_OVERFLOW", RSRC2, 27, 1),
	F(ALL, "ENABLE_EXCEPTION_IEEE_754_FP_UNDERFLOW", RSRC2, 28, 1),
	F(ALL, "ENABLE_EXCEPTION_IEEE_754_FP_INEXACT", RSRC2, 29, 1),
	F(ALL, "ENABLE_EXCEPTION_INT_DIVIDE_BY_ZERO", RSRC2, 30, 1),
	F(GFX90A, "ACCUM_OFFSET", RSRC3, 0, 6),
	F(GFX90A, "TG_SPLIT", RSRC3, 16, 1),
	F(GFX10 | GFX11, "SHARED_VGPR_COUNT", RSRC3, 0, 4),
	F(GFX11, "INST_PREF_SIZE", RSRC3, 4, 6),
	F(GFX12, "INST_PREF_SIZE", RSRC3, 4, 8),
	F(GFX11, "TRAP_ON_START", RSRC3, 10, 1),
	F(GFX11, "TRAP_ON_END", RSRC3, 11, 1),
	F(GFX12, "GLG_EN", RSRC3, 13, 1),
	F(GFX11 | GFX12, "IMAGE_OP", RSRC3, 31, 1),
	F(ALL, "ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER", PROPERTIES, 0, 1),
	F(ALL, "ENABLE_SGPR_DISPATCH_PTR", PROPERTIES, 1, 1),
	F(ALL, "ENABLE_SGPR_QUEUE_PTR", PROPERTIES, 2, 1),
	F(ALL, "ENABLE_SGPR_KERNARG_SEGMENT_PTR", PROPERTIES, 3, 1),
	F(ALL, "ENABLE_SGPR_DISPATCH_ID", PROPERTIES, 4, 1),
	F(ALL, "ENABLE_SGPR_FLAT_SCRATCH_INIT", PROPERTIES, 5, 1),
	F(ALL, "ENABLE_SGPR_PRIVATE_SEGMENT_SIZE", PROPERTIES, 6, 1),
	F(ALL, "ENABLE_WAVEFRONT_SIZE32", PROPERTIES, 10, 1),
	F(ALL, "USES_DYNAMIC_STACK", PROPERTIES, 11, 1),
	F(ALL, "KERNARG_PRELOAD_SPEC_LENGTH", PRELOAD, 0, 7),
	F(ALL, "KERNARG_PRELOAD_SPEC_OFFSET", PRELOAD, 7, 9),
#undef F
};

#define FIELD_COUNT (sizeof(fields) / sizeof(fields[0]))

/* One contiguous table per family, so callers get a plain array. */
static aql_kd_field tables[FAMILIES][FIELD_COUNT];
static uint32_t table_size[FAMILIES];

static void build_tables(void)
{
	for (unsigned f = 0; f < FAMILIES; f++)
		for (size_t i = 0; i < FIELD_COUNT; i++)
			if (fields[i].families & (1u << f))
				tables[f][table_size[f]++] = fields[i].field;
}

static enum family family_of(const char *p)
{
	if (strncmp(p, "gfx12", 5) == 0)
		return GFX12;
	if (strncmp(p, "gfx11", 5) == 0)
		return GFX11;
	if (strncmp(p, "gfx10", 5) == 0)
		return GFX10;
	if (strcmp(p, "gfx90a") == 0 || strncmp(p, "gfx94", 5) == 0 ||
	    strcmp(p, "gfx950") == 0 || strcmp(p, "gfx9-4-generic") == 0)
		return GFX90A;
	return GFX9;
}

const aql_kd_field *aql_kd_fields(const aql_target_id *target, uint32_t *count)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	unsigned f = (unsigned)__builtin_ctz(family_of(target ? target->processor : ""));

	pthread_once(&once, build_tables);
	*count = table_size[f];
	return tables[f];
}

uint32_t aql_kd_field_value(const aql_kernel_descriptor_info *kd, const aql_kd_field *f)
{
	uint32_t word = 0;

	switch (f->word) {
	case AQL_KD_RSRC1: word = kd->compute_pgm_rsrc1; break;
	case AQL_KD_RSRC2: word = kd->compute_pgm_rsrc2; break;
	case AQL_KD_RSRC3: word = kd->compute_pgm_rsrc3; break;
	case AQL_KD_PROPERTIES: word = kd->kernel_code_properties; break;
	case AQL_KD_PRELOAD: word = kd->kernarg_preload; break;
	}
	return bits(word, f->shift, f->width);
}

static aql_status disagree(const aql_kernel_metadata *md, const char *what,
			   uint64_t kd_value, uint64_t md_value)
{
	return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			"kernel %s: descriptor %s is %llu but the metadata says %llu",
			md->name, what, (unsigned long long)kd_value,
			(unsigned long long)md_value);
}

aql_status aql_kd_check(const struct aql_code_object *co, uint64_t kd_vaddr,
			const aql_kernel_descriptor_info *kd,
			const aql_kernel_metadata *md)
{
	const struct aql_segment *code;
	uint64_t entry;

	if (kd->group_segment_fixed_size != md->group_segment_fixed_size)
		return disagree(md, "group_segment_fixed_size",
				kd->group_segment_fixed_size, md->group_segment_fixed_size);
	if (kd->private_segment_fixed_size != md->private_segment_fixed_size)
		return disagree(md, "private_segment_fixed_size",
				kd->private_segment_fixed_size, md->private_segment_fixed_size);
	/* 0 means "unspecified" in the descriptor. */
	if (kd->kernarg_size && kd->kernarg_size != md->kernarg_segment_size)
		return disagree(md, "kernarg_size", kd->kernarg_size, md->kernarg_segment_size);
	if ((kd->wave32 ? 32u : 64u) != md->wavefront_size)
		return disagree(md, "wavefront size", kd->wave32 ? 32 : 64, md->wavefront_size);
	if (md->uses_dynamic_stack >= 0 &&
	    kd->uses_dynamic_stack != (uint8_t)md->uses_dynamic_stack)
		return disagree(md, "uses_dynamic_stack", kd->uses_dynamic_stack,
				(uint64_t)md->uses_dynamic_stack);
	if (md->workgroup_processor_mode >= 0 && family_of(co->info.target.processor) & WGP &&
	    ((kd->compute_pgm_rsrc1 >> 29) & 1) != (uint32_t)md->workgroup_processor_mode)
		return disagree(md, "WGP_MODE", (kd->compute_pgm_rsrc1 >> 29) & 1,
				(uint64_t)md->workgroup_processor_mode);
	if ((uint64_t)kd->kernel_code_entry_byte_offset > UINT64_MAX - kd_vaddr &&
	    kd->kernel_code_entry_byte_offset > 0)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %s: entry offset overflows", md->name);
	entry = kd_vaddr + (uint64_t)kd->kernel_code_entry_byte_offset;
	code = aql_co_segment(co, entry, 4);
	if (!code || !(code->flags & PF_X) || (entry & 255))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %s: entry point %#llx (descriptor %#llx %+lld) is not a 256-byte aligned address in an executable segment",
				md->name, (unsigned long long)entry,
				(unsigned long long)kd_vaddr,
				(long long)kd->kernel_code_entry_byte_offset);
	return AQL_OK;
}
