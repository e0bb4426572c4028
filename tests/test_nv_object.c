/* SPDX-License-Identifier: MIT */
/*
 * NVIDIA code objects (loader/nv_object.c, cubin.c, fatbin.c): what
 * opening one describes.
 *
 *   test_nv_object [--nv DIR] [HOST.so NV]...
 *
 * Each pair is one single-source kernel file built for the host and as
 * PTX, a cubin or a fatbin: both must describe the same kernels with the
 * same arguments (names, types, offsets, sizes, kinds, address spaces,
 * access, const-ness), so a typed launch checks its arguments alike on
 * the CPU and CUDA agents. Then hand-written PTX without an argument
 * description, malformed descriptions, and mutated text; with --nv, the
 * fixtures of tests/co/nv: nvcc's cubin without a description, and
 * cubins and fatbins corrupted here, which must fail cleanly, naming what
 * is wrong (exact-size copies, so ASan sees any overread).
 */
#include <elf.h>
#include <string.h>

#include "helpers.h"

/* Open a copy of exactly n bytes. */
static aql_status open_bytes(const void *bytes, size_t n, aql_code_object **co)
{
	void *copy = malloc(n ? n : 1);
	aql_status st;

	memcpy(copy, bytes, n);
	*co = NULL;
	st = aql_code_object_open(copy, n, co);
	free(copy);
	return st;
}

static aql_status open_text(const char *text, aql_code_object **co)
{
	return open_bytes(text, strlen(text), co);
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static const aql_kernel *find(const aql_code_object_info *info, const char *name)
{
	for (uint32_t i = 0; i < info->kernel_count; i++)
		if (strcmp(info->kernels[i].name, name) == 0)
			return &info->kernels[i];
	return NULL;
}

/* A cubin or a fatbin, rather than PTX text. */
static int is_binary(const uint8_t *b, size_t n)
{
	static const uint8_t fatbin[4] = { 0x50, 0xed, 0x55, 0xba };

	return n >= 4 && (memcmp(b, ELFMAG, SELFMAG) == 0 || memcmp(b, fatbin, 4) == 0);
}

static void compare_pair(const char *host_path, const char *ptx_path)
{
	size_t hn, pn;
	void *hbytes = th_read_file(host_path, &hn), *pbytes = th_read_file(ptx_path, &pn);
	aql_code_object *host = NULL, *ptx = NULL;
	aql_code_object_info hi, pi;

	CHECK_OK(aql_code_object_open(hbytes, hn, &host));
	CHECK_OK(open_bytes(pbytes, pn, &ptx));
	if (!host || !ptx)
		goto out;
	hi = *aql_code_object_get_info(host);
	pi = *aql_code_object_get_info(ptx);
	CHECK(pi.kind == (is_binary(pbytes, pn) ? AQL_CODE_OBJECT_CUBIN : AQL_CODE_OBJECT_PTX) &&
	      pi.machine == EM_CUDA, "%s: kind %d machine %u", ptx_path, pi.kind, pi.machine);
	CHECK(hi.kernel_count == pi.kernel_count && pi.kernel_count > 0,
	      "%s: %u kernels, %s: %u", host_path, hi.kernel_count, ptx_path, pi.kernel_count);
	for (uint32_t i = 0; i < hi.kernel_count; i++) {
		const aql_kernel *h = &hi.kernels[i], *p = find(&pi, h->name);
		const aql_kernel_metadata *hm = h->metadata, *pm;
		uint32_t end = 0;

		CHECK(p != NULL, "%s: no kernel %s", ptx_path, h->name);
		if (!p)
			continue;
		pm = p->metadata;
		CHECK(strcmp(pm->symbol, h->name) == 0, "%s: symbol %s", h->name, pm->symbol);
		CHECK(pm->arg_count == hm->arg_count && p->explicit_arg_count == pm->arg_count,
		      "%s: %u args on the host, %u (%u explicit) in PTX", h->name, hm->arg_count,
		      pm->arg_count, p->explicit_arg_count);
		for (uint32_t j = 0; j < hm->arg_count && j < pm->arg_count; j++) {
			const aql_kernel_arg *a = &hm->args[j], *b = &pm->args[j];

			CHECK(same_str(a->name, b->name) && same_str(a->type_name, b->type_name) &&
			      a->type == b->type && a->offset == b->offset && a->size == b->size &&
			      a->kind == b->kind && a->address_space == b->address_space &&
			      a->access == b->access && a->flags == b->flags &&
			      a->pointee_align == b->pointee_align,
			      "%s arg %u: host %s '%s' @%u+%u kind %d as %d access %d flags %#x; "
			      "PTX %s '%s' @%u+%u kind %d as %d access %d flags %#x", h->name, j,
			      a->name, a->type_name, a->offset, a->size, a->kind, a->address_space,
			      a->access, a->flags, b->name, b->type_name, b->offset, b->size,
			      b->kind, b->address_space, b->access, b->flags);
			if (b->offset + b->size > end)
				end = b->offset + b->size;
		}
		/* PTX packs the parameters: no tail padding, unlike a C struct. */
		CHECK(p->kernarg_size == end && p->kernarg_size <= h->kernarg_size &&
		      pm->kernarg_segment_size == end && p->kernarg_align >= 16,
		      "%s: PTX kernarg %u (align %u), args end at %u, host %u", h->name,
		      p->kernarg_size, p->kernarg_align, end, h->kernarg_size);
		CHECK(p->kernel_object == 0 && pm->wavefront_size == 32 &&
		      pm->max_flat_workgroup_size == 1024, "%s: object %llu wave %u wg %u",
		      h->name, (unsigned long long)p->kernel_object, pm->wavefront_size,
		      pm->max_flat_workgroup_size);
	}
out:
	aql_code_object_destroy(host);
	aql_code_object_destroy(ptx);
	free(hbytes);
	free(pbytes);
}

/* PTX as nvcc or a person writes it: no description. */
static const char plain[] =
	"// hand-written\n"
	"/* a block\n   comment */\n"
	"\t.version 7.8\n"
	".target sm_80\n"
	".address_size 64\n"
	".const .align 4 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};\n"
	".visible .entry scale(\n"
	"\t.param .u64 .ptr .global .align 4 scale_param_0,\n"
	"\t.param .f32 scale_param_1,\n"
	"\t.param .u64 raw,\n"
	"\t.param .s32 scale_param_3,\n"
	"\t.param .align 8 .b8 blob[12],\n"
	"\t.param .u64 .ptr .shared sh\n"
	") .reqntid 64, 2\n"
	"{\n\tmov.u64 %rd1, __aql_md_scale;\n\tret;\n}\n"
	".visible .entry none()\n{\n\tret;\n}\n";

static void test_plain(void)
{
	static const struct {
		const char *name, *type;
		uint32_t offset, size;
		enum aql_arg_kind kind;
		enum aql_access access;
	} want[] = {
		{ "scale_param_0", NULL, 0, 8, AQL_ARG_GLOBAL_BUFFER, AQL_ACCESS_READ_WRITE },
		{ "scale_param_1", "float", 8, 4, AQL_ARG_BY_VALUE, AQL_ACCESS_NONE },
		{ "raw", "uint64_t", 16, 8, AQL_ARG_BY_VALUE, AQL_ACCESS_NONE },
		{ "scale_param_3", "int32_t", 24, 4, AQL_ARG_BY_VALUE, AQL_ACCESS_NONE },
		{ "blob", NULL, 32, 12, AQL_ARG_BY_VALUE, AQL_ACCESS_NONE },
		{ "sh", "uint64_t", 48, 8, AQL_ARG_BY_VALUE, AQL_ACCESS_NONE },
	};
	aql_code_object *co = NULL;
	aql_code_object_info info;

	CHECK_OK(open_text(plain, &co));
	if (!co)
		return;
	info = *aql_code_object_get_info(co);
	CHECK(info.kind == AQL_CODE_OBJECT_PTX && info.kernel_count == 2 && info.base == NULL,
	      "kind %d, %u kernels", info.kind, info.kernel_count);
	if (info.kernel_count == 2) {
		const aql_kernel *k = &info.kernels[0];
		const aql_kernel_metadata *md = k->metadata;

		CHECK(strcmp(k->name, "scale") == 0 && md->arg_count == 6 &&
		      k->explicit_arg_count == 6 && k->kernarg_size == 56 &&
		      md->kernarg_segment_align == 8 && md->max_flat_workgroup_size == 128 &&
		      md->reqd_workgroup_size[0] == 64 && md->reqd_workgroup_size[1] == 2,
		      "%s: %u args, kernarg %u align %u, wg %u", k->name, md->arg_count,
		      k->kernarg_size, md->kernarg_segment_align, md->max_flat_workgroup_size);
		for (uint32_t i = 0; i < md->arg_count && i < 6; i++) {
			const aql_kernel_arg *a = &md->args[i];

			CHECK(strcmp(a->name, want[i].name) == 0 && same_str(a->type_name, want[i].type) &&
			      a->offset == want[i].offset && a->size == want[i].size &&
			      a->kind == want[i].kind && a->access == want[i].access &&
			      a->flags == (want[i].type && !strncmp(want[i].type, "uint", 4)
					   ? AQL_ARG_SIGN_UNKNOWN : 0u),
			      "arg %u: %s %s @%u+%u kind %d access %d", i, a->name,
			      a->type_name ? a->type_name : "(none)", a->offset, a->size, a->kind,
			      a->access);
		}
		CHECK(md->args[0].address_space == AQL_AS_GLOBAL && md->args[0].pointee_align == 4,
		      "a .ptr .global is a global buffer, pointee align %u",
		      md->args[0].pointee_align);
		CHECK(strcmp(info.kernels[1].name, "none") == 0 &&
		      info.kernels[1].metadata->arg_count == 0 && info.kernels[1].kernarg_size == 0,
		      "none: %u args", info.kernels[1].metadata->arg_count);
	}
	aql_code_object_destroy(co);
}

/* A module of one described kernel k(float a, const int *p). */
#define HEAD ".version 7.8\n.target sm_75\n.address_size 64\n"
#define ENTRY ".visible .entry k(\n.param .f32 k_param_0,\n.param .u64 k_param_1\n)\n{\nret;\n}\n"
#define ARG_A "0, 4, 0, 4, 102, 108, 111, 97, 116, 0, 97, 0"	/* float a */
/* __global const int * p */
#define ARG_P "3, 8, 0, 8, 95, 95, 103, 108, 111, 98, 97, 108, 32, 99, 111, 110, 115, " \
	"116, 32, 105, 110, 116, 32, 42, 0, 112, 0"
#define DESC(n, head, body) \
	".visible .const .align 1 .b8 __aql_md_k[" n "] = {" head ", " body "};\n"
#define GOOD_HEAD "65, 81, 76, 77, 1, 2"
#define GOOD DESC("45", GOOD_HEAD, ARG_A ", " ARG_P)

static void test_described(void)
{
	aql_code_object *co = NULL;
	aql_code_object_info info;

	CHECK_OK(open_text(HEAD GOOD ENTRY, &co));
	if (!co)
		return;
	info = *aql_code_object_get_info(co);
	if (info.kernel_count == 1 && info.kernels[0].metadata->arg_count == 2) {
		const aql_kernel_arg *a = info.kernels[0].metadata->args;

		CHECK(strcmp(a[0].name, "a") == 0 && strcmp(a[0].type_name, "float") == 0 &&
		      a[0].kind == AQL_ARG_BY_VALUE && a[0].flags == 0 && a[0].type != NULL,
		      "a: %s %s", a[0].name, a[0].type_name);
		CHECK(strcmp(a[1].name, "p") == 0 && strcmp(a[1].type_name, "const int *") == 0 &&
		      a[1].kind == AQL_ARG_GLOBAL_BUFFER && a[1].address_space == AQL_AS_GLOBAL &&
		      a[1].flags == AQL_ARG_IS_CONST && a[1].offset == 8,
		      "p: %s '%s' kind %d flags %#x", a[1].name, a[1].type_name, a[1].kind,
		      a[1].flags);
	} else {
		CHECK(0, "%u kernels", info.kernel_count);
	}
	aql_code_object_destroy(co);
	/* The description may follow the entry, and the entry may read it. */
	CHECK_OK(open_text(HEAD ".visible .entry k(\n.param .f32 k_param_0,\n.param .u64 k_param_1\n)\n"
			   "{\nld.const.u8 %rs1, [__aql_md_k+4];\nret;\n}\n" GOOD, &co));
	aql_code_object_destroy(co);
}

static void test_malformed(void)
{
	static const struct { const char *text, *want; } cases[] = {
		{ HEAD DESC("45", "65, 81, 76, 78, 1, 2", ARG_A ", " ARG_P) ENTRY,
		  "line 4: description of 'k': does not start with \"AQLM\"" },
		{ HEAD DESC("45", "65, 81, 76, 77, 2, 2", ARG_A ", " ARG_P) ENTRY,
		  "version 2, this loader reads version 1" },
		{ HEAD DESC("45", "65, 81, 76, 77, 1, 3", ARG_A ", " ARG_P) ENTRY,
		  "3 arguments, the entry has 2 parameters" },
		{ HEAD DESC("18", GOOD_HEAD, ARG_A) ENTRY, "argument 1 lies past its end" },
		{ HEAD DESC("46", GOOD_HEAD, ARG_A ", " ARG_P ", 0") ENTRY,
		  "1 bytes after its last argument" },
		{ HEAD DESC("44", GOOD_HEAD, ARG_A ", " "3, 8, 0, 8, 95, 95, 103, 108, 111, 98, 97, 108, 32, 99, 111, 110, 115, 116, 32, 105, 110, 116, 32, 42, 0, 112")
		  ENTRY, "argument 1: its type or name is not a printable, terminated string" },
		{ HEAD DESC("45", GOOD_HEAD, "0, 4, 0, 4, 102, 108, 111, 97, 116, 0, 9, 0, " ARG_P) ENTRY,
		  "its type or name is not a printable" },
		{ HEAD DESC("45", GOOD_HEAD, "0, 8, 0, 8, 102, 108, 111, 97, 116, 0, 97, 0, " ARG_P) ENTRY,
		  "argument 0 'a' (float) is 8 bytes aligned to 8, its .param k_param_0 is 4 aligned to 4" },
		{ HEAD DESC("45", GOOD_HEAD, "2, 4, 0, 4, 102, 108, 111, 97, 116, 0, 97, 0, " ARG_P) ENTRY,
		  "argument 0 'a': flags 0x2" },
		{ HEAD DESC("45", GOOD_HEAD, "0, 4, 0, 4, 102, 108, 111, 97, 116, 0, 97, 0, 9, 8, 0, 8, 95, 95, 103, 108, 111, 98, 97, 108, 32, 99, 111, 110, 115, 116, 32, 105, 110, 116, 32, 42, 0, 112, 0")
		  ENTRY, "argument 1 'p': flags 0x9" },
		{ HEAD DESC("45", GOOD_HEAD, ARG_A ", " ARG_P) ENTRY
		  ".const .b8 __aql_md_k[6] = {65, 81, 76, 77, 1, 0};\n",
		  "line 12: entry 'k' is described twice (lines 4 and 12)" },
		{ HEAD ".const .b8 __aql_md_gone[6] = {65, 81, 76, 77, 1, 0};\n" ENTRY,
		  "line 4: description __aql_md_gone names no .entry" },
		{ HEAD ".const .b8 __aql_md_k[] = {1};\n" ENTRY,
		  "line 4: description __aql_md_k: needs an array size from 1 to 65536" },
		{ HEAD ".const .b8 __aql_md_k[65537] = {1};\n" ENTRY, "needs an array size" },
		{ HEAD ".const .b8 __aql_md_k[2 = {1, 2};\n" ENTRY, "expected ']' after the array size" },
		{ HEAD ".extern .const .b8 __aql_md_k[2];\n" ENTRY, "expected '=' and an initialiser" },
		{ HEAD ".const .b8 __aql_md_k[2] = 1;\n" ENTRY, "expected '{' to open the initialiser" },
		{ HEAD ".const .b8 __aql_md_k[3] = {1, 2};\n" ENTRY, "expected ',' between its bytes" },
		{ HEAD ".const .b8 __aql_md_k[2] = {1 2};\n" ENTRY, "expected ',' between its bytes" },
		{ HEAD ".const .b8 __aql_md_k[2] = {1, 256};\n" ENTRY, "not a number from 0 to 255" },
		{ HEAD ".const .b8 __aql_md_k[2] = {1, -1};\n" ENTRY, "not a number from 0 to 255" },
		{ HEAD ".const .b8 __aql_md_k[2] = {1, 0x2};\n" ENTRY, "not a number from 0 to 255" },
		{ HEAD ".const .b8 __aql_md_k[1] = {1, 2};\n" ENTRY, "more bytes than its array size" },
		{ HEAD ".const .b8 __aql_md_k[2] = {1, };\n" ENTRY, "line 4: description __aql_md_k: has a byte that is not" },
		{ ".version 7.8\n.address_size 32\n" ENTRY, "PTX with .address_size 32" },
		{ ".version 7.8\n.entry k(.param .u24 x) {}\n", "line 2: entry 'k': unknown parameter type '.u24'" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aql_code_object *co = NULL;
		aql_status st = open_text(cases[i].text, &co);

		CHECK((st == AQL_ERR_INVALID_CODE_OBJECT || st == AQL_ERR_UNSUPPORTED) && !co &&
		      strstr(aql_error_message(), cases[i].want),
		      "case %zu: %s: got \"%s\", want \"%s\"", i, aql_status_str(st),
		      aql_error_message(), cases[i].want);
		aql_code_object_destroy(co);
	}
}

/* What is recognised as an NVIDIA code object, and what is refused. */
static void test_kinds(void)
{
	uint8_t elf[sizeof(Elf64_Ehdr)] = { 0x7f, 'E', 'L', 'F', ELFCLASS64, ELFDATA2LSB, EV_CURRENT };
	static const uint8_t fatbin[16] = { 0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0 };
	aql_code_object *co = NULL;

	elf[18] = EM_CUDA;
	CHECK(open_bytes(elf, sizeof(elf), &co) == AQL_ERR_UNSUPPORTED && !co &&
	      th_error_has("cubin: CUDA ELF ABI version 0; this loader reads versions 7 and 8"),
	      "cubin header: %s", aql_error_message());
	elf[EI_CLASS] = ELFCLASS32;
	CHECK(open_bytes(elf, sizeof(elf), &co) == AQL_ERR_UNSUPPORTED && !co &&
	      th_error_has("a 32-bit ELF file"), "32-bit cubin: %s", aql_error_message());
	CHECK(open_bytes(fatbin, sizeof(fatbin), &co) == AQL_ERR_UNSUPPORTED && !co &&
	      th_error_has("a fatbin of nothing: no entry aql reads"), "empty fatbin: %s",
	      aql_error_message());
	/* Not PTX: no .version first, or a longer word. */
	CHECK(open_text(".target sm_80\n.version 7.8\n", &co) == AQL_ERR_INVALID_CODE_OBJECT &&
	      th_error_has("ELF"), ".target first");
	CHECK(open_text(".versionx 7.8\n", &co) == AQL_ERR_INVALID_CODE_OBJECT, ".versionx");
	CHECK(open_text("/* .version 7.8", &co) == AQL_ERR_INVALID_CODE_OBJECT,
	      "in an open comment");
	/* An empty module opens with no kernels. */
	CHECK_OK(open_text("  // x\n.version 8.0", &co));
	CHECK(co && aql_code_object_get_info(co)->kernel_count == 0, "empty module");
	aql_code_object_destroy(co);
}

/*
 * Every prefix of a described module, and single-byte changes: each opens
 * or fails with a status and message, never crashes or overreads.
 */
static void test_mutations(void)
{
	static const char text[] = HEAD GOOD ENTRY;
	static const char flips[] = { '{', '}', '[', ']', ',', '=', '0', '9', '"', '/', '*', ' ', 0, 1 };
	size_t n = strlen(text);
	unsigned ok = 0, bad = 0, wrong = 0;

	for (size_t len = 0; len <= n; len++) {
		aql_code_object *co = NULL;
		aql_status st = open_bytes(text, len, &co);

		ok += st == AQL_OK;
		bad += st == AQL_ERR_INVALID_CODE_OBJECT && aql_error_message()[0];
		wrong += st != AQL_OK && st != AQL_ERR_INVALID_CODE_OBJECT;
		aql_code_object_destroy(co);
	}
	for (size_t at = 0; at < n; at++)
		for (size_t f = 0; f < sizeof(flips); f++) {
			char copy[sizeof(text)];
			aql_code_object *co = NULL;
			aql_status st;

			memcpy(copy, text, n);
			copy[at] = flips[f];
			st = open_bytes(copy, n, &co);
			wrong += st != AQL_OK && st != AQL_ERR_INVALID_CODE_OBJECT &&
				 st != AQL_ERR_UNSUPPORTED;
			aql_code_object_destroy(co);
		}
	CHECK(wrong == 0 && ok > 0 && bad > 0, "%u opened, %u rejected, %u other", ok, bad, wrong);
}

/* ---- cubins and fatbins (tests/co/nv) ---- */

static uint8_t *read_fixture(const char *dir, const char *name, size_t *n)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return th_read_file(path, n);
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const uint8_t *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* The section header of the section named name in an ELF64 image. */
static uint8_t *section_header(uint8_t *elf, const char *name)
{
	uint8_t *sh = elf + get64(elf + 40);
	uint16_t n = get16(elf + 60);
	const char *names = (const char *)elf + get64(sh + get16(elf + 62) * 64 + 24);

	for (uint16_t i = 0; i < n; i++)
		if (strcmp(names + get32(sh + i * 64), name) == 0)
			return sh + i * 64;
	return NULL;
}

/* nvcc's cubin: no description, so generic names and no types. */
static void test_plain_cubin(const char *dir)
{
	static const uint32_t offset[] = { 0, 8, 16, 20 }, size[] = { 8, 8, 4, 4 };
	size_t n;
	uint8_t *bytes = read_fixture(dir, "plain.sm_90.cubin", &n);
	aql_code_object *co = NULL;

	CHECK_OK(open_bytes(bytes, n, &co));
	if (co) {
		const aql_code_object_info *info = aql_code_object_get_info(co);
		const aql_kernel_metadata *md = info->kernels[0].metadata;

		CHECK(info->kind == AQL_CODE_OBJECT_CUBIN && info->kernel_count == 1 &&
		      strcmp(md->name, "scale") == 0 && md->arg_count == 4 &&
		      info->kernels[0].kernarg_size == 24 && md->kernarg_segment_align == 8 &&
		      md->max_flat_workgroup_size == 256,
		      "plain cubin: kind %d, %u kernels, %s: %u args, kernarg %u align %u, wg %u",
		      info->kind, info->kernel_count, md->name, md->arg_count,
		      info->kernels[0].kernarg_size, md->kernarg_segment_align,
		      md->max_flat_workgroup_size);
		for (uint32_t i = 0; i < md->arg_count && i < 4; i++) {
			const aql_kernel_arg *a = &md->args[i];
			char want[32];

			snprintf(want, sizeof(want), "scale_param_%u", i);
			CHECK(strcmp(a->name, want) == 0 && a->type_name == NULL &&
			      a->offset == offset[i] && a->size == size[i] &&
			      a->kind == AQL_ARG_BY_VALUE && a->flags == 0,
			      "plain arg %u: %s %s @%u+%u kind %d", i, a->name,
			      a->type_name ? a->type_name : "-", a->offset, a->size, a->kind);
		}
	}
	aql_code_object_destroy(co);
	free(bytes);
}

/* Open a copy of image with f applied; expect status want and text in the message. */
static void expect(const uint8_t *image, size_t n, void (*f)(uint8_t *, size_t *),
		   aql_status want, const char *text, const char *what)
{
	uint8_t *copy = malloc(n);
	aql_code_object *co = NULL;
	aql_status st;

	memcpy(copy, image, n);
	f(copy, &n);
	st = open_bytes(copy, n, &co);
	CHECK(st == want && !co && strstr(aql_error_message(), text),
	      "%s: got %s \"%s\", want %s \"%s\"", what, aql_status_str(st), aql_error_message(),
	      aql_status_str(want), text);
	aql_code_object_destroy(co);
	free(copy);
}

/* Corruptions of saxpy.sm_80.cubin. Its .nv.info.saxpy holds, in order:
 * CUDA_API_VERSION (8 bytes), an NVAL (4), PARAM_CBANK (12),
 * CBANK_PARAM_SIZE (4) and the KPARAM_INFO of parameters 3, 2, 1, 0
 * (16 each, from offset 0x1c). */
#define KPARAM(i) (0x1c + 16 * (3 - (i)))
static uint8_t *info_of(uint8_t *b)
{
	return b + get64(section_header(b, ".nv.info.saxpy") + 24);
}
static void shoff_out(uint8_t *b, size_t *n) { put64(b + 40, *n); }
static void info_out(uint8_t *b, size_t *n) { put64(section_header(b, ".nv.info.saxpy") + 24, *n - 8); }
static void info_cut(uint8_t *b, size_t *n) { (void)n; put64(section_header(b, ".nv.info.saxpy") + 32, KPARAM(1) + 8); }
static void record_long(uint8_t *b, size_t *n) { (void)n; put16(info_of(b) + KPARAM(0) + 2, 0x80); }
static void ordinal_twice(uint8_t *b, size_t *n) { (void)n; put16(info_of(b) + KPARAM(2) + 8, 1); }
static void ordinal_gap(uint8_t *b, size_t *n) { (void)n; put16(info_of(b) + KPARAM(2) + 8, 5); }
static void overlap(uint8_t *b, size_t *n) { (void)n; put16(info_of(b) + KPARAM(1) + 10, 2); }
static void wrong_size(uint8_t *b, size_t *n) { (void)n; put32(info_of(b) + KPARAM(0) + 12, 0x0021f000); }
static void small_block(uint8_t *b, size_t *n) { (void)n; put16(info_of(b) + 0x18 + 2, 16); }
static void bad_format(uint8_t *b, size_t *n) { (void)n; info_of(b)[KPARAM(3)] = 7; }
static void abi9(uint8_t *b, size_t *n) { (void)n; b[EI_ABIVERSION] = 9; }
static void abi7_32(uint8_t *b, size_t *n) { (void)n; b[EI_ABIVERSION] = 7; put32(b + 48, 80); }
static void no_info(uint8_t *b, size_t *n)
{
	(void)n;
	put32(section_header(b, ".nv.info.saxpy") + 44, 0);
}
static void desc_out(uint8_t *b, size_t *n)
{
	uint8_t *sh = section_header(b, ".symtab");
	uint8_t *syms = b + get64(sh + 24);

	(void)n;
	for (uint64_t i = 0; i < get64(sh + 32) / 24; i++)
		if (syms[i * 24 + 4] == (STB_GLOBAL << 4 | STT_OBJECT))
			put64(syms + i * 24 + 16, 0x10000);
}
static void info_nobits(uint8_t *b, size_t *n)
{
	uint8_t *sh = section_header(b, ".nv.info.saxpy");

	put32(sh + 4, SHT_NOBITS);
	put64(sh + 24, *n + 4096);
}
static void trunc_cubin(uint8_t *b, size_t *n) { (void)b; *n = get64(b + 40) + 64; }

static void test_bad_cubins(const char *dir)
{
	static const struct {
		void (*f)(uint8_t *, size_t *);
		aql_status st;
		const char *want;
	} cases[] = {
		{ shoff_out, AQL_ERR_INVALID_CODE_OBJECT, "section headers at offset" },
		{ trunc_cubin, AQL_ERR_INVALID_CODE_OBJECT, "section headers at offset" },
		{ info_out, AQL_ERR_INVALID_CODE_OBJECT, "(.nv.info.saxpy): 112 bytes at offset" },
		{ info_cut, AQL_ERR_INVALID_CODE_OBJECT, "kernel 'saxpy': .nv.info.saxpy: the record at offset 60 (attribute 0x17) has 8 bytes past the section's end" },
		{ record_long, AQL_ERR_INVALID_CODE_OBJECT, "the record at offset 76 (attribute 0x17) has" },
		{ ordinal_twice, AQL_ERR_INVALID_CODE_OBJECT, "two KPARAM_INFO records for parameter 1" },
		{ ordinal_gap, AQL_ERR_INVALID_CODE_OBJECT, "4 KPARAM_INFO records, but ordinals up to 5" },
		{ overlap, AQL_ERR_INVALID_CODE_OBJECT, "parameter 1 at offset 2 overlaps parameter 0 (4 bytes at 0)" },
		{ wrong_size, AQL_ERR_INVALID_CODE_OBJECT, "cubin symbol 10: description of 'saxpy': argument 0 'a' (float) is 4 bytes aligned to 4, the cubin records 8 bytes at offset 0" },
		{ small_block, AQL_ERR_INVALID_CODE_OBJECT, "CBANK_PARAM_SIZE 16, but parameter 3 ends at 28" },
		{ bad_format, AQL_ERR_INVALID_CODE_OBJECT, "the record at offset 28 has unknown format 0x7" },
		{ abi9, AQL_ERR_UNSUPPORTED, "CUDA ELF ABI version 9" },
		{ abi7_32, AQL_ERR_UNSUPPORTED, "32-bit addressing" },
		{ no_info, AQL_ERR_INVALID_CODE_OBJECT, "belongs to section 0" },
		{ info_nobits, AQL_ERR_INVALID_CODE_OBJECT, "kernel 'saxpy' has no .nv.info.saxpy section" },
		{ desc_out, AQL_ERR_INVALID_CODE_OBJECT, "description __aql_md_saxpy: 65536 bytes at 0 are not within" },
	};
	size_t n;
	uint8_t *bytes = read_fixture(dir, "saxpy.sm_80.cubin", &n);
	unsigned ok = 0, bad = 0, wrong = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char what[32];

		snprintf(what, sizeof(what), "cubin case %zu", i);
		expect(bytes, n, cases[i].f, cases[i].st, cases[i].want, what);
	}
	/* Every prefix, and every byte set to 0 and to 0xff. */
	for (size_t len = 0; len < n; len++) {
		aql_code_object *co = NULL;
		aql_status st = open_bytes(bytes, len, &co);

		bad += st == AQL_ERR_INVALID_CODE_OBJECT;
		wrong += st == AQL_OK || (st != AQL_ERR_INVALID_CODE_OBJECT && st != AQL_ERR_UNSUPPORTED);
		aql_code_object_destroy(co);
	}
	for (size_t at = 0; at < n; at++)
		for (int v = 0; v < 2; v++) {
			uint8_t old = bytes[at];
			aql_code_object *co = NULL;
			aql_status st;

			bytes[at] = v ? 0xff : 0;
			st = open_bytes(bytes, n, &co);
			bytes[at] = old;
			ok += st == AQL_OK;
			wrong += st != AQL_OK && st != AQL_ERR_INVALID_CODE_OBJECT &&
				 st != AQL_ERR_UNSUPPORTED;
			aql_code_object_destroy(co);
		}
	CHECK(wrong == 0 && ok > 0 && bad > 0, "cubin mutations: %u opened, %u rejected, %u other",
	      ok, bad, wrong);
	free(bytes);
}

/* The first entry's header in a fatbin. */
static void fat_total(uint8_t *b, size_t *n) { put64(b + 8, *n); }
static void fat_entry_size(uint8_t *b, size_t *n) { (void)n; put64(b + 16 + 8, 1ull << 40); }
static void fat_entry_header(uint8_t *b, size_t *n) { (void)n; put32(b + 16 + 4, 8); }
static void fat_version(uint8_t *b, size_t *n) { (void)n; put16(b + 4, 2); }
static void fat_zstd_corrupt(uint8_t *b, size_t *n) { (void)n; put32(b + 16 + 64, 0); }
static void fat_raw_size(uint8_t *b, size_t *n) { (void)n; put64(b + 16 + 0x38, 3551); }
static void fat_both(uint8_t *b, size_t *n) { (void)n; b[16 + 0x29] |= 0xa0; }
static void nothing(uint8_t *b, size_t *n) { (void)b; (void)n; }

static void test_bad_fatbins(const char *dir)
{
	static const struct {
		const char *file;
		void (*f)(uint8_t *, size_t *);
		aql_status st;
		const char *want;
	} cases[] = {
		{ "saxpy.fatbin", fat_total, AQL_ERR_INVALID_CODE_OBJECT, "fatbin: 8472 bytes of entries, the file has 8456 after the header" },
		{ "saxpy.fatbin", fat_entry_size, AQL_ERR_INVALID_CODE_OBJECT, "fatbin entry 0: a 64-byte header and 1099511627776 bytes of payload at offset 16 lie outside" },
		{ "saxpy.fatbin", fat_entry_header, AQL_ERR_INVALID_CODE_OBJECT, "fatbin entry 0: a 8-byte header" },
		{ "saxpy.fatbin", fat_version, AQL_ERR_INVALID_CODE_OBJECT, "fatbin: version 2" },
		{ "saxpy.fatbin", fat_both, AQL_ERR_INVALID_CODE_OBJECT, "fatbin entry 0: flags 0xa011 say both LZ4 and zstd" },
		{ "saxpy.zstd.fatbin", fat_zstd_corrupt, AQL_ERR_INVALID_CODE_OBJECT, "the zstd stream of its sm_80 entry is corrupt" },
		{ "saxpy.zstd.fatbin", fat_raw_size, AQL_ERR_INVALID_CODE_OBJECT, "the zstd stream of its sm_80 entry holds 3552 bytes, its header says 3551" },
		{ "saxpy.lz4.fatbin", nothing, AQL_ERR_UNSUPPORTED, "a fatbin of cubin sm_90 (LZ4), PTX sm_75 (LZ4): no entry aql reads" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n;
		uint8_t *bytes = read_fixture(dir, cases[i].file, &n);
		char what[64];

		snprintf(what, sizeof(what), "fatbin case %zu (%s)", i, cases[i].file);
		expect(bytes, n, cases[i].f, cases[i].st, cases[i].want, what);
		free(bytes);
	}
	/* A corrupt cubin inside a fatbin is named as its entry. */
	{
		size_t n;
		uint8_t *bytes = read_fixture(dir, "saxpy.fatbin", &n);

		bytes[16 + 64 + EI_ABIVERSION] = 9;
		expect(bytes, n, nothing, AQL_ERR_UNSUPPORTED,
		       "fatbin entry 0 (cubin for sm_80): cubin: CUDA ELF ABI version 9", "fatbin entry");
		free(bytes);
	}
	/* Every prefix of a compressed fatbin fails cleanly. */
	{
		size_t n;
		uint8_t *bytes = read_fixture(dir, "saxpy.zstd.fatbin", &n);
		unsigned wrong = 0;

		for (size_t len = 0; len < n; len++) {
			aql_code_object *co = NULL;
			aql_status st = open_bytes(bytes, len, &co);

			wrong += st != AQL_ERR_INVALID_CODE_OBJECT;
			aql_code_object_destroy(co);
		}
		CHECK(wrong == 0, "%u prefixes of saxpy.zstd.fatbin not refused as invalid", wrong);
		free(bytes);
	}
}

int main(int argc, char **argv)
{
	const char *nv = NULL;
	int first = 1;

	if (argc > 2 && strcmp(argv[1], "--nv") == 0) {
		nv = argv[2];
		first = 3;
	}
	CHECK((argc - first) % 2 == 0, "arguments come in pairs: HOST.so NV");
	for (int i = first; i + 1 < argc; i += 2)
		compare_pair(argv[i], argv[i + 1]);
	if (nv) {
		test_plain_cubin(nv);
		test_bad_cubins(nv);
		test_bad_fatbins(nv);
	}
	test_plain();
	test_described();
	test_malformed();
	test_kinds();
	test_mutations();
	return th_finish();
}
