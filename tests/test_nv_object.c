/* SPDX-License-Identifier: MIT */
/*
 * PTX code objects (loader/nv_object.c): what opening one describes.
 *
 *   test_nv_object [HOST.so PTX]...
 *
 * Each pair is one single-source kernel file built for the host and as
 * PTX: both must describe the same kernels with the same arguments (names,
 * types, offsets, sizes, kinds, address spaces, access, const-ness), so a
 * typed launch checks its arguments alike on the CPU and CUDA agents. Then
 * hand-written PTX without an argument description, malformed
 * descriptions, cubins and fatbins, and mutated text, which must fail
 * cleanly (exact-size copies, so ASan sees any overread).
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
	CHECK(pi.kind == AQL_CODE_OBJECT_PTX && pi.machine == EM_CUDA,
	      "%s: kind %d machine %u", ptx_path, pi.kind, pi.machine);
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
			      a->flags == 0,
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
	      th_error_has("cubin code objects are not read"), "cubin");
	CHECK(open_bytes(fatbin, sizeof(fatbin), &co) == AQL_ERR_UNSUPPORTED && !co &&
	      th_error_has("fatbin code objects are not read"), "fatbin");
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

int main(int argc, char **argv)
{
	CHECK(argc % 2 == 1, "arguments come in pairs: HOST.so PTX");
	for (int i = 1; i + 1 < argc; i += 2)
		compare_pair(argv[i], argv[i + 1]);
	test_plain();
	test_described();
	test_malformed();
	test_kinds();
	test_mutations();
	return th_finish();
}
