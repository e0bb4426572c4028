/* SPDX-License-Identifier: MIT */
/*
 * LDS layouts. Sizes are summed in 64 bits and compared with UINT32_MAX
 * before they are stored, since the packet's group_segment_size is 32
 * bits: nothing here wraps.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include <aql/lds.h>

static uint64_t align_up(uint64_t v, uint64_t align)
{
	return (v + align - 1) & ~(align - 1);
}

static const char *kname(const char *name)
{
	return name ? name : "(unnamed)";
}

aql_status aql_lds_group_size(const aql_kernel *kernel, uint64_t dynamic_bytes, uint32_t *out)
{
	uint64_t base;

	if (!kernel || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_group_size: NULL argument");
	if (dynamic_bytes == 0) {
		*out = kernel->group_segment_size;
		return AQL_OK;
	}
	base = align_up(kernel->group_segment_size, AQL_LDS_DYNAMIC_ALIGN);
	if (dynamic_bytes > UINT32_MAX || base + dynamic_bytes > UINT32_MAX)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel %s: %u bytes of static LDS and %llu of dynamic LDS exceed the 32-bit group segment size",
				kname(kernel->name), kernel->group_segment_size,
				(unsigned long long)dynamic_bytes);
	*out = (uint32_t)(base + dynamic_bytes);
	return AQL_OK;
}

aql_status aql_lds_layout_init_size(aql_lds_layout *l, const char *name, uint32_t static_size)
{
	uint64_t base = align_up(static_size, AQL_LDS_DYNAMIC_ALIGN);

	if (!l)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_layout_init: NULL layout");
	memset(l, 0, sizeof(*l));
	l->kernel_name = kname(name);
	l->static_size = static_size;
	if (base > UINT32_MAX) {
		l->error = AQL_ERR_INVALID_ARG;
		return aql_fail(AQL_ERR_INVALID_ARG,
				"kernel %s: static LDS of %u bytes leaves no room for dynamic LDS",
				l->kernel_name, static_size);
	}
	l->dynamic_base = (uint32_t)base;
	return AQL_OK;
}

aql_status aql_lds_layout_init(aql_lds_layout *l, const aql_kernel *kernel)
{
	if (!l || !kernel)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_layout_init: NULL argument");
	return aql_lds_layout_init_size(l, kernel->name, kernel->group_segment_size);
}

/* Fail the add of array (name) and mark l failed: later adds and checks fail too. */
static aql_status refuse(aql_lds_layout *l, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static aql_status refuse(aql_lds_layout *l, const char *name, const char *fmt, ...)
{
	char reason[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	l->error = AQL_ERR_INVALID_ARG;
	return aql_fail(AQL_ERR_INVALID_ARG, "kernel %s: dynamic LDS array %u (%s): %s",
			l->kernel_name, l->count, name ? name : "untyped", reason);
}

aql_status aql_lds_layout_add_named(aql_lds_layout *l, const char *name, size_t elem_size,
				    size_t elem_align, uint64_t count, uint32_t *offset)
{
	uint64_t bytes, start, end;
	aql_lds_array *a;

	if (!l)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_layout_add: NULL layout");
	if (l->error != AQL_OK)
		return aql_fail(l->error,
				"kernel %s: dynamic LDS array %u (%s) not placed: the layout failed before (%s)",
				l->kernel_name, l->count, name ? name : "untyped",
				aql_status_str(l->error));
	if (elem_size == 0)
		return refuse(l, name, "elements of 0 bytes");
	if (elem_align == 0 || (elem_align & (elem_align - 1)))
		return refuse(l, name, "alignment %zu is not a power of two", elem_align);
	if (elem_align > AQL_LDS_DYNAMIC_ALIGN)
		return refuse(l, name,
			      "alignment %zu exceeds the %u bytes dynamic LDS is aligned to on every target",
			      elem_align, AQL_LDS_DYNAMIC_ALIGN);
	if (elem_size % elem_align)
		return refuse(l, name, "%zu-byte elements aligned to %zu would not all be aligned",
			      elem_size, elem_align);
	if (l->count >= AQL_LDS_MAX_ARRAYS)
		return refuse(l, name, "a layout holds at most %u arrays", AQL_LDS_MAX_ARRAYS);
	if (elem_size > UINT32_MAX || count > UINT32_MAX / elem_size)
		return refuse(l, name, "%llu elements of %zu bytes exceed the 32-bit group segment size",
			      (unsigned long long)count, elem_size);
	bytes = count * elem_size;
	start = align_up(l->dynamic_size, elem_align);
	end = start + bytes;
	if (l->dynamic_base + end > UINT32_MAX)
		return refuse(l, name,
			      "%llu bytes at dynamic offset %llu, after %u bytes of static LDS, exceed the 32-bit group segment size",
			      (unsigned long long)bytes, (unsigned long long)start, l->static_size);
	a = &l->arrays[l->count++];
	a->name = name;
	a->offset = (uint32_t)start;
	a->count = (uint32_t)count;
	a->size = (uint32_t)bytes;
	a->align = (uint32_t)elem_align;
	l->dynamic_size = (uint32_t)end;
	if (offset)
		*offset = a->offset;
	return AQL_OK;
}

aql_status aql_lds_layout_add(aql_lds_layout *l, size_t elem_size, size_t elem_align,
			      uint64_t count, uint32_t *offset)
{
	return aql_lds_layout_add_named(l, NULL, elem_size, elem_align, count, offset);
}

uint32_t aql_lds_layout_group_size(const aql_lds_layout *l)
{
	if (!l || l->error != AQL_OK)
		return UINT32_MAX;
	/* Without dynamic bytes the static size alone is exact: no padding. */
	return l->dynamic_size ? l->dynamic_base + l->dynamic_size : l->static_size;
}

uint32_t aql_lds_layout_dynamic_size(const aql_lds_layout *l)
{
	return l && l->error == AQL_OK ? l->dynamic_size : 0;
}

/* Append printf output to buf[*len..cap), truncating; *len stays < cap. */
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*len + 1 >= cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *len, cap - *len, fmt, ap);
	va_end(ap);
	if (n > 0)
		*len = (size_t)n >= cap - *len ? cap - 1 : *len + (size_t)n;
}

static aql_status check_limit(const aql_lds_layout *l, uint32_t limit, const char *what,
			      const char *where)
{
	uint32_t total = aql_lds_layout_group_size(l);
	uint64_t arrays = 0;
	char msg[480];
	size_t len = 0;

	if (l->error != AQL_OK)
		return aql_fail(l->error,
				"kernel %s: the LDS layout cannot be checked: building it failed (%s)",
				l->kernel_name, aql_status_str(l->error));
	if (total <= limit)
		return AQL_OK;
	append(msg, sizeof(msg), &len,
	       "kernel %s needs %u bytes of LDS per work-group, over the %u-byte limit of %s %s: static %u",
	       l->kernel_name, total, limit, what, where, l->static_size);
	for (uint32_t i = 0; i < l->count; i++) {
		const aql_lds_array *a = &l->arrays[i];

		append(msg, sizeof(msg), &len, ", %s[%u] %u at +%u", a->name ? a->name : "array",
		       a->count, a->size, l->dynamic_base + a->offset);
		arrays += a->size;
	}
	append(msg, sizeof(msg), &len, ", alignment padding %llu",
	       (unsigned long long)(total - l->static_size - arrays));
	return aql_fail(AQL_ERR_INVALID_ARG, "%s", msg);
}

aql_status aql_lds_layout_check_agent(const aql_lds_layout *l, aql_agent *agent)
{
	aql_agent_info info;
	aql_status st;

	if (!l || !agent)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_layout_check_agent: NULL argument");
	st = aql_agent_get_info(agent, &info);
	if (st != AQL_OK)
		return st;
	info.name[sizeof(info.name) - 1] = 0;
	return check_limit(l, info.max_group_segment_size, "agent", info.name);
}

aql_status aql_lds_layout_check_target(const aql_lds_layout *l, const aql_target_id *target)
{
	uint32_t limit;
	aql_status st;

	if (!l || !target)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_layout_check_target: NULL argument");
	st = aql_lds_target_limit(target, &limit);
	if (st != AQL_OK)
		return st;
	return check_limit(l, limit, "target", target->processor);
}

/*
 * LDS bytes one work-group may allocate, per processor. Source: LLVM's
 * AMDGPU target definitions, llvm/lib/Target/AMDGPU/AMDGPU.td, where the
 * subtarget feature AddressableLocalMemorySize (FeatureAddressableLocal-
 * MemorySize65536/163840/327680) is that per-work-group maximum: 65536
 * for the GFX9 ISA versions 9.0.x (gfx900-gfx90c, gfx9-generic), for
 * gfx940, gfx941, gfx942 and gfx9-4-generic, for every GFX10 and GFX11
 * processor (the generation features imply it) and for GFX12
 * (gfx1200/gfx1201, gfx12-generic); 163840 for ISA version 9.5 (gfx950);
 * 327680 for gfx1250. LLVM checks the same numbers in
 * llvm/test/CodeGen/AMDGPU/lds-limit-diagnostics.ll ("local memory ...
 * exceeds limit" per -mcpu) and lds-limit-diagnostics-gfx1250.ll.
 * The names are those loader/target.c knows (gfx9 and later).
 */
#define KIB(n) ((n) * 1024u)

static const struct {
	const char *processor;
	uint32_t bytes;
} lds_limits[] = {
	{ "gfx900", KIB(64) }, { "gfx902", KIB(64) }, { "gfx904", KIB(64) },
	{ "gfx906", KIB(64) }, { "gfx908", KIB(64) }, { "gfx909", KIB(64) },
	{ "gfx90a", KIB(64) }, { "gfx90c", KIB(64) },
	{ "gfx940", KIB(64) }, { "gfx941", KIB(64) }, { "gfx942", KIB(64) },
	{ "gfx950", KIB(160) },
	{ "gfx1010", KIB(64) }, { "gfx1011", KIB(64) }, { "gfx1012", KIB(64) },
	{ "gfx1013", KIB(64) },
	{ "gfx1030", KIB(64) }, { "gfx1031", KIB(64) }, { "gfx1032", KIB(64) },
	{ "gfx1033", KIB(64) }, { "gfx1034", KIB(64) }, { "gfx1035", KIB(64) },
	{ "gfx1036", KIB(64) },
	{ "gfx1100", KIB(64) }, { "gfx1101", KIB(64) }, { "gfx1102", KIB(64) },
	{ "gfx1103", KIB(64) }, { "gfx1150", KIB(64) }, { "gfx1151", KIB(64) },
	{ "gfx1152", KIB(64) }, { "gfx1153", KIB(64) },
	{ "gfx1200", KIB(64) }, { "gfx1201", KIB(64) },
	{ "gfx1250", KIB(320) },
	/* Code for a generic target must fit its smallest processor. */
	{ "gfx9-generic", KIB(64) }, { "gfx9-4-generic", KIB(64) },
	{ "gfx10-1-generic", KIB(64) }, { "gfx10-3-generic", KIB(64) },
	{ "gfx11-generic", KIB(64) }, { "gfx12-generic", KIB(64) },
};

aql_status aql_lds_target_limit(const aql_target_id *target, uint32_t *bytes)
{
	size_t n;

	if (!target || !bytes)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_lds_target_limit: NULL argument");
	n = strnlen(target->processor, sizeof(target->processor));
	for (size_t i = 0; i < sizeof(lds_limits) / sizeof(lds_limits[0]); i++) {
		if (strlen(lds_limits[i].processor) == n &&
		    memcmp(lds_limits[i].processor, target->processor, n) == 0) {
			*bytes = lds_limits[i].bytes;
			return AQL_OK;
		}
	}
	return aql_fail(AQL_ERR_NOT_FOUND, "no LDS limit is known for processor \"%.*s\"",
			(int)n, target->processor);
}
