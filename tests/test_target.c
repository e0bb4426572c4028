/* SPDX-License-Identifier: MIT */
/*
 * Target IDs: every processor's e_flags decode for each code object version,
 * format and parse back; the error cases; and which code runs on which
 * agent. The expectations below are written from LLVM's ELF.h and
 * AMDGPUUsage, not from loader/target.c, so a wrong table entry fails here.
 */
#include <string.h>

#include <aql/target.h>
#include "helpers.h"

struct proc {
	const char *name;
	uint32_t mach;
	bool xnack, sramecc;
	bool generic;
};

static const struct proc procs[] = {
	/* gfx6-gfx8: read, never dispatched (the first OLD_PROCS entries). */
	{ "gfx600", 0x20, false, false, false },
	{ "gfx601", 0x21, false, false, false },
	{ "gfx602", 0x3a, false, false, false },
	{ "gfx700", 0x22, false, false, false },
	{ "gfx701", 0x23, false, false, false },
	{ "gfx702", 0x24, false, false, false },
	{ "gfx703", 0x25, false, false, false },
	{ "gfx704", 0x26, false, false, false },
	{ "gfx705", 0x3b, false, false, false },
	{ "gfx801", 0x28, true, false, false },
	{ "gfx802", 0x29, false, false, false },
	{ "gfx803", 0x2a, false, false, false },
	{ "gfx805", 0x3c, false, false, false },
	{ "gfx810", 0x2b, true, false, false },
	{ "gfx900", 0x2c, true, false, false },
	{ "gfx902", 0x2d, true, false, false },
	{ "gfx904", 0x2e, true, false, false },
	{ "gfx906", 0x2f, true, true, false },
	{ "gfx908", 0x30, true, true, false },
	{ "gfx909", 0x31, true, false, false },
	{ "gfx90a", 0x3f, true, true, false },
	{ "gfx90c", 0x32, true, false, false },
	{ "gfx940", 0x40, true, true, false },
	{ "gfx941", 0x4b, true, true, false },
	{ "gfx942", 0x4c, true, true, false },
	{ "gfx950", 0x4f, true, true, false },
	{ "gfx1010", 0x33, true, false, false },
	{ "gfx1011", 0x34, true, false, false },
	{ "gfx1012", 0x35, true, false, false },
	{ "gfx1013", 0x42, true, false, false },
	{ "gfx1030", 0x36, false, false, false },
	{ "gfx1031", 0x37, false, false, false },
	{ "gfx1032", 0x38, false, false, false },
	{ "gfx1033", 0x39, false, false, false },
	{ "gfx1034", 0x3e, false, false, false },
	{ "gfx1035", 0x3d, false, false, false },
	{ "gfx1036", 0x45, false, false, false },
	{ "gfx1100", 0x41, false, false, false },
	{ "gfx1101", 0x46, false, false, false },
	{ "gfx1102", 0x47, false, false, false },
	{ "gfx1103", 0x44, false, false, false },
	{ "gfx1150", 0x43, false, false, false },
	{ "gfx1151", 0x4a, false, false, false },
	{ "gfx1152", 0x55, false, false, false },
	{ "gfx1153", 0x58, false, false, false },
	{ "gfx1200", 0x48, false, false, false },
	{ "gfx1201", 0x4e, false, false, false },
	{ "gfx1250", 0x49, true, true, false },
	{ "gfx9-generic", 0x51, true, false, true },
	{ "gfx9-4-generic", 0x5f, true, true, true },
	{ "gfx10-1-generic", 0x52, true, false, true },
	{ "gfx10-3-generic", 0x53, false, false, true },
	{ "gfx11-generic", 0x54, false, false, true },
	{ "gfx12-generic", 0x59, false, false, true },
};

#define NPROCS (sizeof(procs) / sizeof(procs[0]))
#define OLD_PROCS 14

static const char *sign(enum aql_feature_state s)
{
	return s == AQL_FEATURE_ON ? "+" : s == AQL_FEATURE_OFF ? "-" : NULL;
}

/* The canonical string, built independently of aql_target_format(). */
static void expected_string(const char *name, enum aql_feature_state x,
			    enum aql_feature_state s, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s%s%s", name, sign(s) ? ":sramecc" : "",
		 sign(s) ? sign(s) : "", sign(x) ? ":xnack" : "", sign(x) ? sign(x) : "");
}

/* Decode, check, format, compare, parse back, compare. */
static void round_trip(const struct proc *p, uint32_t flags, uint8_t abi,
		       enum aql_feature_state x, enum aql_feature_state s, uint32_t gv)
{
	aql_target_id id, back;
	char want[64], got[64];
	aql_status st;

	st = aql_target_from_elf(flags, abi, &id);
	CHECK(st == AQL_OK, "%s: e_flags 0x%x abi %u: %s (%s)", p->name, flags, abi,
	      aql_status_str(st), aql_error_message());
	if (st != AQL_OK)
		return;
	CHECK(!strcmp(id.processor, p->name) && id.mach == p->mach,
	      "e_flags 0x%x decoded as %s/0x%x, not %s/0x%x", flags, id.processor, id.mach,
	      p->name, p->mach);
	CHECK(id.xnack == x && id.sramecc == s && id.generic_version == gv,
	      "%s e_flags 0x%x abi %u: xnack %d sramecc %d gv %u, want %d %d %u", p->name,
	      flags, abi, id.xnack, id.sramecc, id.generic_version, x, s, gv);
	expected_string(p->name, x, s, want, sizeof(want));
	CHECK(aql_target_format(&id, got, sizeof(got)) == strlen(want) && !strcmp(got, want),
	      "e_flags 0x%x formats as \"%s\", want \"%s\"", flags, got, want);
	st = aql_target_parse(got, &back);
	CHECK(st == AQL_OK && back.mach == id.mach && !strcmp(back.processor, id.processor) &&
		      back.xnack == id.xnack && back.sramecc == id.sramecc,
	      "\"%s\" does not parse back: %s", got, aql_error_message());
}

static const enum aql_feature_state v4_states[] = { AQL_FEATURE_ANY, AQL_FEATURE_OFF,
						    AQL_FEATURE_ON };

static void test_table(void)
{
	for (size_t i = 0; i < NPROCS; i++) {
		const struct proc *p = &procs[i];

		/* V3: a set bit is on, a clear one off (unsupported if the mode is absent). */
		if (!p->generic) {
			for (unsigned xb = 0; xb < (p->xnack ? 2u : 1u); xb++)
				for (unsigned sb = 0; sb < (p->sramecc ? 2u : 1u); sb++)
					round_trip(p, p->mach | xb * 0x100 | sb * 0x200, 1,
						   !p->xnack ? AQL_FEATURE_UNSUPPORTED :
						   xb ? AQL_FEATURE_ON : AQL_FEATURE_OFF,
						   !p->sramecc ? AQL_FEATURE_UNSUPPORTED :
						   sb ? AQL_FEATURE_ON : AQL_FEATURE_OFF, 0);
		}
		/* V4, V5, V6: two-bit fields; generic targets only in V6, versioned. */
		for (uint8_t abi = 2; abi <= 4; abi++) {
			static const uint32_t versions[] = { 1, 2, 255 };
			unsigned nx = p->xnack ? 3 : 1, ns = p->sramecc ? 3 : 1;

			if (p->generic && abi != 4)
				continue;
			for (unsigned v = 0; v < (p->generic ? 3u : 1u); v++) {
				uint32_t gv = p->generic ? versions[v] : 0;

				for (unsigned xi = 0; xi < nx; xi++) {
					for (unsigned si = 0; si < ns; si++) {
						enum aql_feature_state x = p->xnack ? v4_states[xi] :
							AQL_FEATURE_UNSUPPORTED;
						enum aql_feature_state s = p->sramecc ? v4_states[si] :
							AQL_FEATURE_UNSUPPORTED;

						round_trip(p, p->mach | (uint32_t)x << 8 |
							   (uint32_t)s << 10 | gv << 24,
							   abi, x, s, gv);
					}
				}
			}
		}
	}
}

static bool in_table(uint32_t mach)
{
	for (size_t i = 0; i < NPROCS; i++)
		if (procs[i].mach == mach)
			return true;
	return false;
}

/* Every other mach value is refused: r600 ones as unsupported, the rest as bad. */
static void test_unknown_machs(void)
{
	aql_target_id id;

	for (uint32_t mach = 0; mach <= 0xff; mach++) {
		bool r600 = mach >= 0x01 && mach <= 0x1f;
		aql_status st;

		if (in_table(mach))
			continue;
		st = aql_target_from_elf(mach, 2, &id);
		CHECK(st == (r600 ? AQL_ERR_UNSUPPORTED : AQL_ERR_INVALID_CODE_OBJECT) &&
			      id.mach == 0,
		      "mach 0x%x: %s (%s)", mach, aql_status_str(st), aql_error_message());
	}
}

/* Every target reads; only gfx9 and later (and their generics) dispatch. */
static void test_dispatchable(void)
{
	aql_target_id id;

	for (size_t i = 0; i < NPROCS; i++) {
		CHECK_OK(aql_target_parse(procs[i].name, &id));
		CHECK(aql_target_dispatchable(&id) == (i >= OLD_PROCS),
		      "%s: dispatchable %d", procs[i].name, aql_target_dispatchable(&id));
	}
	CHECK_OK(aql_target_from_elf(0x2a, 2, &id));
	CHECK(!strcmp(id.processor, "gfx803") && !aql_target_dispatchable(&id),
	      "gfx803 from e_flags: %s", id.processor);
	memset(&id, 0, sizeof(id));
	CHECK(!aql_target_dispatchable(&id) && !aql_target_dispatchable(NULL),
	      "unknown or NULL target dispatchable");
}

static void expect_elf_error(uint32_t flags, uint8_t abi, aql_status want, const char *text)
{
	aql_target_id id;
	aql_status st = aql_target_from_elf(flags, abi, &id);

	CHECK(st == want && strstr(aql_error_message(), text) && id.mach == 0 &&
		      id.processor[0] == '\0',
	      "e_flags 0x%x abi %u: %s \"%s\", want %s with \"%s\"", flags, abi,
	      aql_status_str(st), aql_error_message(), aql_status_str(want), text);
}

static void test_elf_cases(void)
{
	aql_target_id id;

	/* What clang-14/16 really emit (see tests/bundles for the objects). */
	CHECK_OK(aql_target_from_elf(0x73f, 2, &id));
	CHECK(id.xnack == AQL_FEATURE_ON && id.sramecc == AQL_FEATURE_ANY, "gfx90a:xnack+");
	CHECK_OK(aql_target_from_elf(0xe30, 2, &id));
	CHECK(!strcmp(id.processor, "gfx908") && id.xnack == AQL_FEATURE_OFF &&
		      id.sramecc == AQL_FEATURE_ON, "gfx908:sramecc+:xnack-");
	CHECK_OK(aql_target_from_elf(0x32f, 1, &id));
	CHECK(id.xnack == AQL_FEATURE_ON && id.sramecc == AQL_FEATURE_ON, "V3 gfx906 default");
	CHECK_OK(aql_target_from_elf(0x22f, 1, &id));
	CHECK(id.xnack == AQL_FEATURE_OFF && id.sramecc == AQL_FEATURE_ON, "V3 gfx906:xnack-");
	CHECK_OK(aql_target_from_elf(0x41, 3, &id));
	CHECK(id.xnack == AQL_FEATURE_UNSUPPORTED && id.sramecc == AQL_FEATURE_UNSUPPORTED,
	      "gfx1100 has neither mode");
	/* "Unsupported" on a processor with the mode reads as "any", as in ROCr. */
	CHECK_OK(aql_target_from_elf(0x3f, 3, &id));
	CHECK(id.xnack == AQL_FEATURE_ANY && id.sramecc == AQL_FEATURE_ANY, "gfx90a field 0");
	CHECK_OK(aql_target_from_elf(0x01000051, 4, &id));
	CHECK(id.generic_version == 1 && !strcmp(id.processor, "gfx9-generic"), "gfx9-generic v1");

	expect_elf_error(0x141, 2, AQL_ERR_INVALID_CODE_OBJECT, "xnack");	/* gfx1100 */
	expect_elf_error(0x441, 3, AQL_ERR_INVALID_CODE_OBJECT, "sramecc");
	expect_elf_error(0x536, 2, AQL_ERR_INVALID_CODE_OBJECT, "gfx1030 has no");
	expect_elf_error(0x141, 1, AQL_ERR_INVALID_CODE_OBJECT, "gfx1100 has no xnack");
	expect_elf_error(0x22c, 1, AQL_ERR_INVALID_CODE_OBJECT, "gfx900 has no sramecc");
	expect_elf_error(0x43f, 1, AQL_ERR_INVALID_CODE_OBJECT, "bits 0x400");
	expect_elf_error(0x103f, 2, AQL_ERR_INVALID_CODE_OBJECT, "bits 0x1000");
	expect_elf_error(0x0100003f, 3, AQL_ERR_INVALID_CODE_OBJECT, "bits 0x1000000");
	expect_elf_error(0x0100003f, 4, AQL_ERR_INVALID_CODE_OBJECT, "not a generic target");
	expect_elf_error(0x51, 4, AQL_ERR_INVALID_CODE_OBJECT, "no EF_AMDGPU_GENERIC_VERSION");
	expect_elf_error(0x151, 3, AQL_ERR_INVALID_CODE_OBJECT, "needs code object V6");
	expect_elf_error(0x51, 1, AQL_ERR_INVALID_CODE_OBJECT, "needs code object V6");
	expect_elf_error(0x3f, 0, AQL_ERR_UNSUPPORTED, "EI_ABIVERSION 0");
	expect_elf_error(0x3f, 5, AQL_ERR_UNSUPPORTED, "EI_ABIVERSION 5");
	expect_elf_error(0x00, 2, AQL_ERR_INVALID_CODE_OBJECT, "not a known");
	expect_elf_error(0x01, 2, AQL_ERR_UNSUPPORTED, "r600");
	CHECK(aql_target_from_elf(0x3f, 2, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
}

static void expect_parse(const char *str, const char *canonical)
{
	aql_target_id id;
	char buf[64];
	aql_status st = aql_target_parse(str, &id);

	CHECK(st == AQL_OK, "\"%s\": %s (%s)", str, aql_status_str(st), aql_error_message());
	if (st == AQL_OK) {
		aql_target_format(&id, buf, sizeof(buf));
		CHECK(!strcmp(buf, canonical), "\"%s\" -> \"%s\", want \"%s\"", str, buf, canonical);
	}
}

static void expect_parse_error(const char *str, const char *text)
{
	aql_target_id id;
	aql_status st = aql_target_parse(str, &id);

	CHECK(st == AQL_ERR_INVALID_ARG && strstr(aql_error_message(), text) && id.mach == 0,
	      "\"%s\": %s \"%s\", want INVALID_ARG with \"%s\"", str ? str : "(null)",
	      aql_status_str(st), aql_error_message(), text);
}

static void test_parse(void)
{
	aql_target_id id;

	expect_parse("gfx90a", "gfx90a");
	expect_parse("gfx90a:xnack+", "gfx90a:xnack+");
	expect_parse("gfx942:xnack-:sramecc+", "gfx942:sramecc+:xnack-");
	expect_parse("gfx942:sramecc+:xnack-", "gfx942:sramecc+:xnack-");
	expect_parse("amdgcn-amd-amdhsa--gfx90a:xnack-", "gfx90a:xnack-");
	expect_parse("amdgcn-amd-amdhsa-gfx906", "gfx906");
	expect_parse("gfx9-4-generic:sramecc-", "gfx9-4-generic:sramecc-");
	expect_parse("gfx1100", "gfx1100");
	CHECK_OK(aql_target_parse("gfx1100", &id));
	CHECK(id.xnack == AQL_FEATURE_UNSUPPORTED && id.sramecc == AQL_FEATURE_UNSUPPORTED &&
		      id.mach == 0x41 && id.generic_version == 0, "gfx1100 features");
	CHECK_OK(aql_target_parse("gfx90a:sramecc-", &id));
	CHECK(id.xnack == AQL_FEATURE_ANY && id.sramecc == AQL_FEATURE_OFF, "gfx90a:sramecc-");

	expect_parse_error("", "names no processor");
	expect_parse_error(":xnack+", "names no processor");
	expect_parse_error("amdgcn-amd-amdhsa--", "names no processor");
	expect_parse_error("gfx", "unknown processor");
	expect_parse_error("GFX90A", "unknown processor");
	expect_parse_error("gfx90a ", "unknown processor");
	expect_parse_error("x86_64-unknown-linux-gnu", "unknown processor");
	expect_parse("gfx803", "gfx803");
	expect_parse("gfx801:xnack+", "gfx801:xnack+");
	expect_parse_error("gfx803:xnack+", "gfx803 has no xnack");
	expect_parse_error("gfx90a:", "feature \"\"");
	expect_parse_error("gfx90a::xnack+", "feature \"\"");
	expect_parse_error("gfx90a:xnack+:", "feature \"\"");
	expect_parse_error("gfx90a:xnack", "feature \"xnack\"");
	expect_parse_error("gfx90a:+", "feature \"+\"");
	expect_parse_error("gfx90a:xnack*", "feature \"xnack*\"");
	expect_parse_error("gfx90a:sram-ecc+", "feature \"sram-ecc+\"");
	expect_parse_error("gfx90a:wavefrontsize64+", "wavefrontsize64+");
	expect_parse_error("gfx90a:xnack+:xnack-", "xnack twice");
	expect_parse_error("gfx90a:sramecc+:xnack+:sramecc+", "sramecc twice");
	expect_parse_error("gfx1100:xnack+", "gfx1100 has no xnack");
	expect_parse_error("gfx900:sramecc-", "gfx900 has no sramecc");
	expect_parse_error("gfx9-generic:sramecc+", "has no sramecc");
	expect_parse_error(NULL, "NULL");
	CHECK(aql_target_parse("gfx90a", NULL) == AQL_ERR_INVALID_ARG, "NULL out");
}

static void test_format(void)
{
	aql_target_id id = { 0 };
	char buf[8];

	CHECK_OK(aql_target_parse("gfx942:xnack-:sramecc+", &id));
	CHECK(aql_target_format(&id, buf, sizeof(buf)) == 22 && !strcmp(buf, "gfx942:"),
	      "truncated format gave \"%s\"", buf);
	CHECK(aql_target_format(&id, NULL, 0) == 22, "length query");
	memset(&id, 0, sizeof(id));
	CHECK(aql_target_format(&id, buf, sizeof(buf)) == 7 && !strcmp(buf, "unknown"),
	      "empty id gave \"%s\"", buf);
	CHECK(aql_target_format(NULL, buf, sizeof(buf)) == 0 && buf[0] == '\0', "NULL id");
}

static bool compatible(const char *code, const char *agent)
{
	aql_target_id c, a;

	if (aql_target_parse(code, &c) != AQL_OK || aql_target_parse(agent, &a) != AQL_OK) {
		CHECK(0, "cannot parse %s or %s: %s", code, agent, aql_error_message());
		return false;
	}
	return aql_target_compatible(&c, &a);
}

static const struct {
	const char *code, *agent;
	bool ok;
} matrix[] = {
	{ "gfx90a", "gfx90a:sramecc+:xnack+", true },
	{ "gfx90a", "gfx90a", true },
	{ "gfx90a:xnack+", "gfx90a:sramecc+:xnack+", true },
	{ "gfx90a:xnack+", "gfx90a:sramecc+:xnack-", false },
	{ "gfx90a:xnack-", "gfx90a:xnack-", true },
	{ "gfx90a:xnack-", "gfx90a:xnack+", false },
	/* An agent whose mode is unknown (any) matches no pinned code. */
	{ "gfx90a:xnack+", "gfx90a", false },
	{ "gfx90a:xnack-", "gfx90a:sramecc+", false },
	{ "gfx90a:sramecc+", "gfx90a:sramecc+:xnack-", true },
	{ "gfx90a:sramecc+", "gfx90a:sramecc-:xnack-", false },
	{ "gfx90a:sramecc-", "gfx90a:xnack-", false },
	{ "gfx90a:sramecc-:xnack+", "gfx90a:sramecc-:xnack+", true },
	{ "gfx90a:sramecc-:xnack+", "gfx90a:sramecc-:xnack-", false },
	{ "gfx90a:sramecc-:xnack+", "gfx90a:sramecc+:xnack+", false },
	{ "gfx90a", "gfx908", false },
	{ "gfx908", "gfx90a", false },
	{ "gfx940", "gfx942", false },
	{ "gfx1100", "gfx1100", true },
	{ "gfx1100", "gfx1101", false },
	{ "gfx11-generic", "gfx1101", true },
	{ "gfx11-generic", "gfx1153", true },
	{ "gfx11-generic", "gfx1200", false },
	{ "gfx11-generic", "gfx11-generic", true },
	{ "gfx1101", "gfx11-generic", false },
	{ "gfx9-generic:xnack+", "gfx906:xnack+", true },
	{ "gfx9-generic:xnack+", "gfx906:xnack-", false },
	{ "gfx9-generic:xnack+", "gfx906", false },
	{ "gfx9-generic", "gfx906:sramecc+:xnack-", true },
	{ "gfx9-4-generic:sramecc+", "gfx942:sramecc+:xnack-", true },
	{ "gfx9-4-generic:sramecc+", "gfx942:sramecc-:xnack-", false },
	{ "gfx9-4-generic:xnack-", "gfx950:xnack-", true },
	{ "gfx10-1-generic:xnack-", "gfx1013:xnack-", true },
	{ "gfx10-1-generic:xnack-", "gfx1013:xnack+", false },
	{ "gfx10-3-generic", "gfx1036", true },
	{ "gfx12-generic", "gfx1201", true },
	{ "gfx12-generic", "gfx1250", false },
};

/* Which processors each generic target covers (AMDGPUUsage, LLVM 20). */
static const struct {
	const char *generic;
	const char *covers[10];
} generics[] = {
	{ "gfx9-generic", { "gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c" } },
	{ "gfx9-4-generic", { "gfx940", "gfx941", "gfx942", "gfx950" } },
	{ "gfx10-1-generic", { "gfx1010", "gfx1011", "gfx1012", "gfx1013" } },
	{ "gfx10-3-generic", { "gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034",
			       "gfx1035", "gfx1036" } },
	{ "gfx11-generic", { "gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
			     "gfx1152", "gfx1153" } },
	{ "gfx12-generic", { "gfx1200", "gfx1201" } },
};

static void test_compatible(void)
{
	aql_target_id a, unknown = { 0 };

	for (size_t i = 0; i < sizeof(matrix) / sizeof(matrix[0]); i++)
		CHECK(compatible(matrix[i].code, matrix[i].agent) == matrix[i].ok,
		      "code %s on agent %s should be %s", matrix[i].code, matrix[i].agent,
		      matrix[i].ok ? "compatible" : "incompatible");
	for (size_t g = 0; g < sizeof(generics) / sizeof(generics[0]); g++) {
		for (size_t i = 0; i < NPROCS; i++) {
			bool covered = !strcmp(procs[i].name, generics[g].generic);

			for (size_t k = 0; k < 10 && generics[g].covers[k]; k++)
				covered |= !strcmp(procs[i].name, generics[g].covers[k]);
			CHECK(compatible(generics[g].generic, procs[i].name) == covered,
			      "%s %s %s", generics[g].generic,
			      covered ? "should cover" : "should not cover", procs[i].name);
			/* A concrete processor's code runs only on that processor. */
			if (!procs[i].generic)
				CHECK(compatible(procs[i].name, generics[g].covers[0]) ==
					      !strcmp(procs[i].name, generics[g].covers[0]),
				      "%s code on %s", procs[i].name, generics[g].covers[0]);
		}
	}
	CHECK_OK(aql_target_parse("gfx90a", &a));
	CHECK(!aql_target_compatible(&unknown, &a) && !aql_target_compatible(&a, &unknown),
	      "an unknown target matches nothing");
	CHECK(!aql_target_compatible(NULL, &a) && !aql_target_compatible(&a, NULL), "NULL");
}

int main(void)
{
	test_table();
	test_unknown_machs();
	test_dispatchable();
	test_elf_cases();
	test_parse();
	test_format();
	test_compatible();
	return th_finish();
}
