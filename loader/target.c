/* SPDX-License-Identifier: MIT */
/*
 * AMDGPU target IDs. The processor table follows LLVM's ELF.h
 * (EF_AMDGPU_MACH_*), its TargetParser feature bits and the AMDGPUUsage
 * generic-processor table. Every amdgcn processor is decoded, so that any
 * code object can be read; aql dispatches gfx9 and later only. r600
 * machines are recognised only to say they are unsupported.
 */
#include <stdio.h>
#include <string.h>

#include <aql/target.h>
#include "util/error.h"

#define TRIPLE "amdgcn-amd-amdhsa-"

#define EF_MACH 0x0ffu
#define EF_XNACK_V3 0x100u
#define EF_SRAMECC_V3 0x200u
#define EF_XNACK_V4 0x300u
#define EF_SRAMECC_V4 0xc00u
#define EF_GENERIC_VERSION 0xff000000u
#define EF_GENERIC_SHIFT 24

enum { ABI_V3 = 1, ABI_V4 = 2, ABI_V5 = 3, ABI_V6 = 4 };

/* Which of the two selectable modes a processor has. */
#define F_XNACK 1u
#define F_SRAMECC 2u

struct processor {
	const char *name;
	uint8_t mach;
	uint8_t features;
	uint8_t generic;	/* mach of the generic target covering it, or 0 */
	bool dispatch;		/* gfx9 or later: aql loads it for dispatch */
};

#define GFX9_GENERIC 0x51
#define GFX10_1_GENERIC 0x52
#define GFX10_3_GENERIC 0x53
#define GFX11_GENERIC 0x54
#define GFX12_GENERIC 0x59
#define GFX9_4_GENERIC 0x5f

static const struct processor processors[] = {
	/* gfx6-gfx8: read and listed, never loaded for dispatch. */
	{ "gfx600", 0x20, 0, 0, false },
	{ "gfx601", 0x21, 0, 0, false },
	{ "gfx602", 0x3a, 0, 0, false },
	{ "gfx700", 0x22, 0, 0, false },
	{ "gfx701", 0x23, 0, 0, false },
	{ "gfx702", 0x24, 0, 0, false },
	{ "gfx703", 0x25, 0, 0, false },
	{ "gfx704", 0x26, 0, 0, false },
	{ "gfx705", 0x3b, 0, 0, false },
	{ "gfx801", 0x28, F_XNACK, 0, false },
	{ "gfx802", 0x29, 0, 0, false },
	{ "gfx803", 0x2a, 0, 0, false },
	{ "gfx805", 0x3c, 0, 0, false },
	{ "gfx810", 0x2b, F_XNACK, 0, false },
	{ "gfx900", 0x2c, F_XNACK, GFX9_GENERIC, true },
	{ "gfx902", 0x2d, F_XNACK, GFX9_GENERIC, true },
	{ "gfx904", 0x2e, F_XNACK, GFX9_GENERIC, true },
	{ "gfx906", 0x2f, F_XNACK | F_SRAMECC, GFX9_GENERIC, true },
	{ "gfx908", 0x30, F_XNACK | F_SRAMECC, 0, true },
	{ "gfx909", 0x31, F_XNACK, GFX9_GENERIC, true },
	{ "gfx90a", 0x3f, F_XNACK | F_SRAMECC, 0, true },
	{ "gfx90c", 0x32, F_XNACK, GFX9_GENERIC, true },
	/* gfx940/941 were folded into gfx942 in LLVM 20; ROCm 6 still emits them. */
	{ "gfx940", 0x40, F_XNACK | F_SRAMECC, GFX9_4_GENERIC, true },
	{ "gfx941", 0x4b, F_XNACK | F_SRAMECC, GFX9_4_GENERIC, true },
	{ "gfx942", 0x4c, F_XNACK | F_SRAMECC, GFX9_4_GENERIC, true },
	{ "gfx950", 0x4f, F_XNACK | F_SRAMECC, GFX9_4_GENERIC, true },
	{ "gfx1010", 0x33, F_XNACK, GFX10_1_GENERIC, true },
	{ "gfx1011", 0x34, F_XNACK, GFX10_1_GENERIC, true },
	{ "gfx1012", 0x35, F_XNACK, GFX10_1_GENERIC, true },
	{ "gfx1013", 0x42, F_XNACK, GFX10_1_GENERIC, true },
	{ "gfx1030", 0x36, 0, GFX10_3_GENERIC, true },
	{ "gfx1031", 0x37, 0, GFX10_3_GENERIC, true },
	{ "gfx1032", 0x38, 0, GFX10_3_GENERIC, true },
	{ "gfx1033", 0x39, 0, GFX10_3_GENERIC, true },
	{ "gfx1034", 0x3e, 0, GFX10_3_GENERIC, true },
	{ "gfx1035", 0x3d, 0, GFX10_3_GENERIC, true },
	{ "gfx1036", 0x45, 0, GFX10_3_GENERIC, true },
	{ "gfx1100", 0x41, 0, GFX11_GENERIC, true },
	{ "gfx1101", 0x46, 0, GFX11_GENERIC, true },
	{ "gfx1102", 0x47, 0, GFX11_GENERIC, true },
	{ "gfx1103", 0x44, 0, GFX11_GENERIC, true },
	{ "gfx1150", 0x43, 0, GFX11_GENERIC, true },
	{ "gfx1151", 0x4a, 0, GFX11_GENERIC, true },
	{ "gfx1152", 0x55, 0, GFX11_GENERIC, true },
	{ "gfx1153", 0x58, 0, GFX11_GENERIC, true },
	{ "gfx1200", 0x48, 0, GFX12_GENERIC, true },
	{ "gfx1201", 0x4e, 0, GFX12_GENERIC, true },
	/*
	 * gfx1250 is new and LLVM still moves its feature set; accepting both
	 * modes keeps code from either LLVM generation loadable.
	 */
	{ "gfx1250", 0x49, F_XNACK | F_SRAMECC, 0, true },
	{ "gfx9-generic", GFX9_GENERIC, F_XNACK, 0, true },
	{ "gfx9-4-generic", GFX9_4_GENERIC, F_XNACK | F_SRAMECC, 0, true },
	{ "gfx10-1-generic", GFX10_1_GENERIC, F_XNACK, 0, true },
	{ "gfx10-3-generic", GFX10_3_GENERIC, 0, 0, true },
	{ "gfx11-generic", GFX11_GENERIC, 0, 0, true },
	{ "gfx12-generic", GFX12_GENERIC, 0, 0, true },
};

#define NPROC (sizeof(processors) / sizeof(processors[0]))

static const struct processor *by_mach(uint32_t mach)
{
	for (size_t i = 0; i < NPROC; i++)
		if (processors[i].mach == mach)
			return &processors[i];
	return NULL;
}

static const struct processor *by_name(const char *name, size_t len)
{
	for (size_t i = 0; i < NPROC; i++)
		if (strlen(processors[i].name) == len && !memcmp(processors[i].name, name, len))
			return &processors[i];
	return NULL;
}

static bool is_generic(const struct processor *p)
{
	return strstr(p->name, "generic") != NULL;
}

static void init_id(aql_target_id *out, const struct processor *p)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->processor, sizeof(out->processor), "%s", p->name);
	out->mach = p->mach;
	out->xnack = (p->features & F_XNACK) ? AQL_FEATURE_ANY : AQL_FEATURE_UNSUPPORTED;
	out->sramecc = (p->features & F_SRAMECC) ? AQL_FEATURE_ANY : AQL_FEATURE_UNSUPPORTED;
}

static const char *state_name(enum aql_feature_state s)
{
	switch (s) {
	case AQL_FEATURE_UNSUPPORTED: return "unsupported";
	case AQL_FEATURE_ANY: return "any";
	case AQL_FEATURE_OFF: return "off";
	case AQL_FEATURE_ON: return "on";
	}
	return "?";
}

/*
 * A V4+ two-bit feature field. "Unsupported" on a processor that has the
 * mode is read as "any": ROCr and comgr give both the same (empty) suffix.
 */
static aql_status v4_feature(const struct processor *p, uint32_t e_flags, uint32_t mask,
			     unsigned flag, const char *what, enum aql_feature_state *out)
{
	unsigned field = (e_flags & mask) / (mask & -mask);

	if (!(p->features & flag)) {
		if (field)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"e_flags 0x%x sets %s to %s, but %s has no %s mode",
					e_flags, what, state_name((enum aql_feature_state)field),
					p->name, what);
		*out = AQL_FEATURE_UNSUPPORTED;
		return AQL_OK;
	}
	*out = field ? (enum aql_feature_state)field : AQL_FEATURE_ANY;
	return AQL_OK;
}

/* V3: one bit each, set = on, clear = off (what ROCr and comgr decode). */
static aql_status v3_feature(const struct processor *p, uint32_t e_flags, uint32_t bit,
			     unsigned flag, const char *what, enum aql_feature_state *out)
{
	if (!(p->features & flag)) {
		if (e_flags & bit)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"e_flags 0x%x sets %s, but %s has no %s mode",
					e_flags, what, p->name, what);
		*out = AQL_FEATURE_UNSUPPORTED;
		return AQL_OK;
	}
	*out = (e_flags & bit) ? AQL_FEATURE_ON : AQL_FEATURE_OFF;
	return AQL_OK;
}

aql_status aql_target_from_elf(uint32_t e_flags, uint8_t abi_version, aql_target_id *out)
{
	uint32_t mach = e_flags & EF_MACH;
	uint32_t known = EF_MACH;
	const struct processor *p;
	aql_status st;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_target_from_elf: out is NULL");
	memset(out, 0, sizeof(*out));
	if (abi_version < ABI_V3 || abi_version > ABI_V6)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"EI_ABIVERSION %u is not a code object version aql reads "
				"(1 = V3 to 4 = V6)", abi_version);
	p = by_mach(mach);
	if (!p) {
		if (mach >= 0x01 && mach <= 0x1f)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"EF_AMDGPU_MACH 0x%x is an r600-family GPU, which aql does not run",
					mach);
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"e_flags 0x%x: EF_AMDGPU_MACH 0x%x is not a known AMDGPU processor",
				e_flags, mach);
	}
	init_id(out, p);
	if (abi_version == ABI_V3) {
		known |= EF_XNACK_V3 | EF_SRAMECC_V3;
		st = v3_feature(p, e_flags, EF_XNACK_V3, F_XNACK, "xnack", &out->xnack);
		if (st == AQL_OK)
			st = v3_feature(p, e_flags, EF_SRAMECC_V3, F_SRAMECC, "sramecc", &out->sramecc);
	} else {
		known |= EF_XNACK_V4 | EF_SRAMECC_V4;
		if (abi_version == ABI_V6)
			known |= EF_GENERIC_VERSION;
		st = v4_feature(p, e_flags, EF_XNACK_V4, F_XNACK, "xnack", &out->xnack);
		if (st == AQL_OK)
			st = v4_feature(p, e_flags, EF_SRAMECC_V4, F_SRAMECC, "sramecc", &out->sramecc);
	}
	if (st != AQL_OK)
		goto fail;
	if (e_flags & ~known) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "e_flags 0x%x has bits 0x%x that code object V%u does not define",
			      e_flags, e_flags & ~known, abi_version + 2u);
		goto fail;
	}
	out->generic_version = (e_flags & EF_GENERIC_VERSION) >> EF_GENERIC_SHIFT;
	if (is_generic(p) && abi_version != ABI_V6) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "generic target %s needs code object V6, not V%u",
			      p->name, abi_version + 2u);
		goto fail;
	}
	if (is_generic(p) && out->generic_version == 0) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "generic target %s has no EF_AMDGPU_GENERIC_VERSION (e_flags 0x%x)",
			      p->name, e_flags);
		goto fail;
	}
	if (!is_generic(p) && out->generic_version != 0) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "e_flags 0x%x gives generic version %u to %s, which is not a generic target",
			      e_flags, out->generic_version, p->name);
		goto fail;
	}
	return AQL_OK;
fail:
	memset(out, 0, sizeof(*out));
	return st;
}

aql_status aql_target_parse(const char *str, aql_target_id *out)
{
	const struct processor *p;
	const char *s, *colon;
	bool seen_xnack = false, seen_sramecc = false;
	size_t len;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_target_parse: out is NULL");
	memset(out, 0, sizeof(*out));
	if (!str)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_target_parse: target ID is NULL");
	s = str;
	/* "amdgcn-amd-amdhsa--gfx90a" (empty environment), or older "...-gfx90a". */
	if (!strncmp(s, TRIPLE, strlen(TRIPLE))) {
		s += strlen(TRIPLE);
		if (*s == '-')
			s++;
	}
	colon = strchr(s, ':');
	len = colon ? (size_t)(colon - s) : strlen(s);
	if (len == 0)
		return aql_fail(AQL_ERR_INVALID_ARG, "target ID \"%s\" names no processor", str);
	p = by_name(s, len);
	if (!p)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"target ID \"%s\": unknown processor \"%.*s\"", str,
				(int)(len > 32 ? 32 : len), s);
	init_id(out, p);
	while (colon) {
		const char *f = colon + 1;
		enum aql_feature_state state;
		bool xnack;
		size_t flen;

		colon = strchr(f, ':');
		flen = colon ? (size_t)(colon - f) : strlen(f);
		if (flen < 2 || (f[flen - 1] != '+' && f[flen - 1] != '-'))
			goto bad_feature;
		state = f[flen - 1] == '+' ? AQL_FEATURE_ON : AQL_FEATURE_OFF;
		if (flen - 1 == 5 && !memcmp(f, "xnack", 5))
			xnack = true;
		else if (flen - 1 == 7 && !memcmp(f, "sramecc", 7))
			xnack = false;
		else
			goto bad_feature;
		if (xnack ? seen_xnack : seen_sramecc) {
			memset(out, 0, sizeof(*out));
			return aql_fail(AQL_ERR_INVALID_ARG,
					"target ID \"%s\" gives %s twice", str,
					xnack ? "xnack" : "sramecc");
		}
		if (!(p->features & (xnack ? F_XNACK : F_SRAMECC))) {
			memset(out, 0, sizeof(*out));
			return aql_fail(AQL_ERR_INVALID_ARG,
					"target ID \"%s\": %s has no %s mode", str, p->name,
					xnack ? "xnack" : "sramecc");
		}
		if (xnack) {
			seen_xnack = true;
			out->xnack = state;
		} else {
			seen_sramecc = true;
			out->sramecc = state;
		}
		continue;
bad_feature:
		memset(out, 0, sizeof(*out));
		return aql_fail(AQL_ERR_INVALID_ARG,
				"target ID \"%s\": feature \"%.*s\" is not xnack+, xnack-, "
				"sramecc+ or sramecc-", str, (int)(flen > 32 ? 32 : flen), f);
	}
	return AQL_OK;
}

static const char *suffix(enum aql_feature_state s)
{
	return s == AQL_FEATURE_ON ? "+" : s == AQL_FEATURE_OFF ? "-" : NULL;
}

size_t aql_target_format(const aql_target_id *id, char *buf, size_t size)
{
	const char *name = "unknown", *sram, *xnack;
	int name_len = 7, n;

	if (!buf)
		size = 0;
	if (!id) {
		if (size)
			buf[0] = '\0';
		return 0;
	}
	/* strnlen: processor need not be terminated if a caller filled it by hand. */
	if (id->processor[0]) {
		name = id->processor;
		name_len = (int)strnlen(id->processor, sizeof(id->processor));
	}
	sram = suffix(id->sramecc);
	xnack = suffix(id->xnack);
	n = snprintf(buf, size, "%.*s%s%s%s%s", name_len, name,
		     sram ? ":sramecc" : "", sram ? sram : "",
		     xnack ? ":xnack" : "", xnack ? xnack : "");
	return n < 0 ? 0 : (size_t)n;
}

static bool feature_ok(enum aql_feature_state code, enum aql_feature_state agent)
{
	if (code == AQL_FEATURE_ANY || code == AQL_FEATURE_UNSUPPORTED)
		return true;
	return code == agent;
}

bool aql_target_compatible(const aql_target_id *code, const aql_target_id *agent)
{
	const struct processor *cp, *ap;

	if (!code || !agent)
		return false;
	cp = by_mach(code->mach);
	ap = by_mach(agent->mach);
	if (!cp || !ap)
		return false;
	if (cp != ap && !(is_generic(cp) && ap->generic == cp->mach))
		return false;
	return feature_ok(code->xnack, agent->xnack) && feature_ok(code->sramecc, agent->sramecc);
}

bool aql_target_dispatchable(const aql_target_id *id)
{
	const struct processor *p = id ? by_mach(id->mach) : NULL;

	return p && p->dispatch;
}
