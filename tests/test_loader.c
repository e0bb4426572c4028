/* SPDX-License-Identifier: MIT */
/*
 * The loader: placement and relocation of AMDGPU code objects, device
 * globals, the descriptor/metadata cross-check, V6 objects derived from
 * V5 ones, host objects that ask for what the loader lacks, and malformed
 * ELF input of every kind. Fixtures come as arguments (tests/loader,
 * tests/co); each is recognised by its file name.
 */
#include <gelf.h>
#include <string.h>
#include <sys/mman.h>

#include "helpers.h"
#include <aql/code_object.h>

#define R_AMDGPU_ABS32_LO 1
#define R_AMDGPU_ABS32_HI 2
#define R_AMDGPU_ABS64 3
#define R_AMDGPU_REL32 4
#define R_AMDGPU_ABS32 6

struct image {
	uint8_t *bytes;
	size_t size;
};

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* File offset of the i-th Elf64_Rela of .rela.dyn, or 0. */
static size_t rela_offset(const struct image *im, size_t i, size_t *count)
{
	Elf *e = elf_memory((char *)im->bytes, im->size);
	Elf_Scn *scn = NULL;
	size_t off = 0;

	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_RELA) {
			*count = sh.sh_size / sizeof(Elf64_Rela);
			off = sh.sh_offset + i * sizeof(Elf64_Rela);
			break;
		}
	}
	elf_end(e);
	return off;
}

static Elf64_Rela *rela(struct image *im, size_t i)
{
	size_t n = 0, off = rela_offset(im, i, &n);

	if (!off || i >= n) {
		fprintf(stderr, "fixture lacks relocation %zu\n", i);
		exit(1);
	}
	return (Elf64_Rela *)(im->bytes + off);
}

static struct image copy(const struct image *im)
{
	struct image c = { malloc(im->size), im->size };

	memcpy(c.bytes, im->bytes, im->size);
	return c;
}

static aql_status load(const struct image *im, const aql_load_options *o,
		       aql_code_object **co)
{
	return aql_code_object_load(th_agent(), im->bytes, im->size, o, co);
}

/* Relocation index in .rela.dyn of the entry that patches ptrs[slot]. */
static size_t reloc_for(struct image *im, uint64_t ptrs_vaddr, unsigned slot)
{
	size_t n = 0;

	rela_offset(im, 0, &n);
	for (size_t i = 0; i < n; i++)
		if (rela(im, i)->r_offset == ptrs_vaddr + 8 * slot)
			return i;
	fprintf(stderr, "no relocation for ptrs[%u]\n", slot);
	exit(1);
}

static void test_relocations(const struct image *im)
{
	const uint64_t ext = 0x1122334455667700ull, ext2 = 0xabcdef12345678ull;
	const aql_symbol_binding syms[] = { { "ext_sym", ext }, { "ext_sym2", ext2 } };
	const aql_load_options opts = { syms, 2 };
	aql_code_object *co = NULL;
	uint64_t *gvar, *ptrs;
	void *addr;
	size_t size;

	CHECK_OK(load(im, &opts, &co));
	if (!co)
		return;
	const aql_code_object_info *info = aql_code_object_get_info(co);

	CHECK(((uintptr_t)info->base & 255) == 0, "base %p not 256-byte aligned", info->base);
	CHECK(info->kind == AQL_CODE_OBJECT_AMDGPU && info->version == 4, "kind %d v%u",
	      info->kind, info->version);
	CHECK_OK(aql_code_object_symbol(co, "gvar", &addr, &size));
	gvar = addr;
	CHECK_OK(aql_code_object_symbol(co, "ptrs", &addr, &size));
	ptrs = addr;
	CHECK(*gvar == 42, "device global reads %llu", (unsigned long long)*gvar);
	*gvar = 43;	/* the host writes a device global in place */
	CHECK(*gvar == 43, "device global write lost");
	/* ABS64 against an exported symbol, RELATIVE64 for a hidden one. */
	CHECK(ptrs[0] == (uint64_t)(uintptr_t)gvar, "ptrs[0] %#llx", (unsigned long long)ptrs[0]);
	CHECK(ptrs[1] == (uint64_t)(uintptr_t)gvar + 16, "ptrs[1] %#llx", (unsigned long long)ptrs[1]);
	/* ABS64 against caller-supplied symbols, with and without addend. */
	CHECK(ptrs[2] == ext + 8, "ptrs[2] %#llx", (unsigned long long)ptrs[2]);
	CHECK(ptrs[3] == ext2, "ptrs[3] %#llx", (unsigned long long)ptrs[3]);
	CHECK(ptrs[4] == 0, "ptrs[4] %#llx", (unsigned long long)ptrs[4]);
	CHECK(aql_code_object_symbol(co, "nothing", &addr, &size) == AQL_ERR_NOT_FOUND &&
	      th_error_has("nothing"), "unknown symbol");
	aql_code_object_destroy(co);

	/* Nobody defines ext_sym: the load fails and names it. */
	CHECK(load(im, NULL, &co) == AQL_ERR_NOT_FOUND && th_error_has("ext_sym"),
	      "unresolved symbol");

	/* Opening alone gives no addresses. */
	CHECK_OK(aql_code_object_open(im->bytes, im->size, &co));
	CHECK(aql_code_object_symbol(co, "gvar", &addr, &size) == AQL_ERR_INVALID_ARG,
	      "symbol of an unloaded object");
	aql_code_object_destroy(co);
}

/* Give the relocation of ptrs[slot] another type, keeping its symbol. */
static void retype(struct image *im, uint64_t ptrs_vaddr, unsigned slot, uint32_t type)
{
	Elf64_Rela *r = rela(im, reloc_for(im, ptrs_vaddr, slot));

	r->r_info = ELF64_R_INFO(ELF64_R_SYM(r->r_info), type);
}

/* The 32-bit words of ptrs in a loaded copy, or NULL if it did not load. */
static uint32_t *loaded_ptrs(const struct image *im, const aql_load_options *opts,
			     aql_code_object **co)
{
	void *addr = NULL;
	size_t size;

	CHECK_OK(load(im, opts, co));
	if (*co)
		CHECK_OK(aql_code_object_symbol(*co, "ptrs", &addr, &size));
	return addr;
}

/*
 * ld.lld never emits ABS32_LO/HI/ABS32 dynamically, so retype the fixture's
 * ABS64 relocations and check the 32-bit arithmetic.
 */
static void test_relocation_types(const struct image *im, uint64_t ptrs_vaddr)
{
	const aql_symbol_binding syms[] = { { "ext_sym", 0x1122334455667700ull },
					    { "ext_sym2", 0x89abcdefull } };
	const aql_load_options opts = { syms, 2 };
	struct image c = copy(im);
	aql_code_object *co = NULL;
	uint32_t *w;

	retype(&c, ptrs_vaddr, 2, R_AMDGPU_ABS32_LO);
	retype(&c, ptrs_vaddr, 3, R_AMDGPU_ABS32);
	if ((w = loaded_ptrs(&c, &opts, &co))) {
		CHECK(w[4] == 0x55667708u, "ABS32_LO wrote %#x", w[4]);
		CHECK(w[5] == 0, "ABS32_LO touched the next word: %#x", w[5]);
		CHECK(w[6] == 0x89abcdefu, "ABS32 wrote %#x", w[6]);
	}
	aql_code_object_destroy(co);
	co = NULL;
	retype(&c, ptrs_vaddr, 2, R_AMDGPU_ABS32_HI);
	if ((w = loaded_ptrs(&c, &opts, &co)))
		CHECK(w[4] == 0x11223344u, "ABS32_HI wrote %#x", w[4]);
	aql_code_object_destroy(co);
	/* ABS32 of a value past 4 GiB cannot be represented. */
	retype(&c, ptrs_vaddr, 2, R_AMDGPU_ABS32);
	CHECK(load(&c, &opts, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
	      th_error_has("does not fit in 32 bits"), "ABS32 overflow");
	/* A type the runtime must not apply is named. */
	retype(&c, ptrs_vaddr, 2, R_AMDGPU_REL32);
	CHECK(load(&c, &opts, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
	      th_error_has("R_AMDGPU_REL32"), "REL32 refused");
	rela(&c, reloc_for(&c, ptrs_vaddr, 2))->r_info = ELF64_R_INFO(0, 99);
	CHECK(load(&c, &opts, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
	      th_error_has("unknown relocation type 99"), "unknown type refused");
	/* Relocations outside every segment, and to a symbol index past the table. */
	free(c.bytes);
	c = copy(im);
	rela(&c, reloc_for(&c, ptrs_vaddr, 2))->r_offset = 0x7fff0000;
	CHECK(load(&c, &opts, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
	      th_error_has("outside every loaded segment"), "relocation outside segments");
	free(c.bytes);
	c = copy(im);
	rela(&c, reloc_for(&c, ptrs_vaddr, 2))->r_info = ELF64_R_INFO(9999, R_AMDGPU_ABS64);
	CHECK(load(&c, &opts, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
	      th_error_has("symbol 9999"), "symbol index past the table");
	free(c.bytes);
}

static Elf64_Ehdr *ehdr(struct image *im)
{
	return (Elf64_Ehdr *)im->bytes;
}

static Elf64_Phdr *load_phdr(struct image *im, unsigned n)
{
	Elf64_Phdr *ph = (Elf64_Phdr *)(im->bytes + ehdr(im)->e_phoff);

	for (unsigned i = 0; i < ehdr(im)->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && n-- == 0)
			return &ph[i];
	fprintf(stderr, "fixture lacks PT_LOAD %u\n", n);
	exit(1);
}

static Elf64_Shdr *section(struct image *im, uint32_t type)
{
	Elf64_Shdr *sh = (Elf64_Shdr *)(im->bytes + ehdr(im)->e_shoff);

	for (unsigned i = 0; i < ehdr(im)->e_shnum; i++)
		if (sh[i].sh_type == type)
			return &sh[i];
	fprintf(stderr, "fixture lacks a section of type %u\n", type);
	exit(1);
}

/* The dynamic symbol named name, in the raw bytes. */
static Elf64_Sym *dynsym(struct image *im, const char *name)
{
	Elf64_Shdr *sh = section(im, SHT_DYNSYM);
	Elf64_Shdr *str = (Elf64_Shdr *)(im->bytes + ehdr(im)->e_shoff) + sh->sh_link;
	Elf64_Sym *sym = (Elf64_Sym *)(im->bytes + sh->sh_offset);

	for (size_t i = 0; i < sh->sh_size / sizeof(*sym); i++)
		if (strcmp((char *)im->bytes + str->sh_offset + sym[i].st_name, name) == 0)
			return &sym[i];
	fprintf(stderr, "fixture lacks symbol %s\n", name);
	exit(1);
}

/*
 * A damaged copy must be refused with a message containing needle: by
 * aql_code_object_load() with opts, or by aql_code_object_open() if opts is
 * NULL. Frees the copy.
 */
static void expect_refused(struct image *c, const aql_load_options *opts,
			   const char *what, const char *needle)
{
	aql_code_object *co = NULL;
	aql_status st = opts ? load(c, opts, &co) : aql_code_object_open(c->bytes, c->size, &co);

	CHECK(st != AQL_OK && th_error_has(needle), "%s: %s", what, aql_status_str(st));
	if (st == AQL_OK)
		aql_code_object_destroy(co);
	free(c->bytes);
}

/*
 * Damage the symbol and string tables of a loadable copy: every case must
 * be refused at load with a message that names the problem.
 */
static void test_bad_symbols(const struct image *im)
{
	const aql_symbol_binding syms[] = { { "ext_sym", 1 }, { "ext_sym2", 2 } };
	const aql_load_options opts = { syms, 2 };
	struct image c;

#define EXPECT_LOAD_BAD(what, needle, ...)                                     \
	do {                                                                   \
		c = copy(im);                                                  \
		__VA_ARGS__;                                                   \
		expect_refused(&c, &opts, what, needle);                       \
	} while (0)

	EXPECT_LOAD_BAD("symbol outside every section", "outside every loaded segment",
			dynsym(&c, "gvar")->st_value = 0x7fff0000);
	EXPECT_LOAD_BAD("symbol name past its string table", "outside its string table",
			dynsym(&c, "gvar")->st_name = 0x7fffffff);
	EXPECT_LOAD_BAD("string table index out of range", "string table",
			section(&c, SHT_DYNSYM)->sh_link = 0);
	EXPECT_LOAD_BAD("symbol entry size", "symbol table",
			section(&c, SHT_DYNSYM)->sh_entsize = 16);
	EXPECT_LOAD_BAD("symbol table past the end", "symbol table",
			section(&c, SHT_DYNSYM)->sh_offset = c.size - 8);
	EXPECT_LOAD_BAD("relocation entry size", "relocation section",
			section(&c, SHT_RELA)->sh_entsize = 16);
	EXPECT_LOAD_BAD("relocations past the end", "relocation section",
			section(&c, SHT_RELA)->sh_size = 1u << 30);
#undef EXPECT_LOAD_BAD
}

/* A metadata note whose sizes lie is refused, wherever it points. */
static void test_bad_note(const struct image *im)
{
	Elf64_Shdr *sh;
	aql_code_object *co;
	struct image c;
	uint32_t *nhdr;

	for (unsigned field = 0; field < 2; field++) {
		c = copy(im);
		sh = section(&c, SHT_NOTE);
		nhdr = (uint32_t *)(c.bytes + sh->sh_offset);
		nhdr[field] = 0x7ffffff0;	/* namesz, then descsz */
		CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
		      th_error_has("note"), "note %s too large", field ? "descsz" : "namesz");
		free(c.bytes);
	}
	c = copy(im);
	sh = section(&c, SHT_NOTE);
	nhdr = (uint32_t *)(c.bytes + sh->sh_offset);
	nhdr[1] -= 9;	/* the msgpack ends early */
	CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT,
	      "short metadata: %s", aql_error_message());
	free(c.bytes);
}

/* Each case damages one field of a copy and expects a named refusal. */
static void test_malformed(const struct image *im)
{
	aql_code_object *co = NULL;
	struct image c;
	unsigned failures = 0;

#define EXPECT_BAD(what, needle, ...)                                          \
	do {                                                                   \
		c = copy(im);                                                  \
		__VA_ARGS__;                                                   \
		expect_refused(&c, NULL, what, needle);                        \
	} while (0)

	EXPECT_BAD("not ELF", "not an ELF", c.bytes[1] = 'X');
	EXPECT_BAD("32-bit", "64-bit", c.bytes[EI_CLASS] = ELFCLASS32);
	EXPECT_BAD("big endian", "endian", c.bytes[EI_DATA] = ELFDATA2MSB);
	EXPECT_BAD("executable", "ET_DYN", ehdr(&c)->e_type = ET_EXEC);
	EXPECT_BAD("machine", "machine 3", ehdr(&c)->e_machine = EM_386);
	EXPECT_BAD("OS ABI", "OS ABI", c.bytes[EI_OSABI] = 0);
	EXPECT_BAD("V2", "ABI version 0", c.bytes[EI_ABIVERSION] = 0);
	EXPECT_BAD("phentsize", "program header entries", ehdr(&c)->e_phentsize = 32);
	EXPECT_BAD("phoff", "program header table", ehdr(&c)->e_phoff = c.size - 8);
	EXPECT_BAD("phnum", "program header table", ehdr(&c)->e_phnum = 0xfff0);
	EXPECT_BAD("shoff", "section header table", ehdr(&c)->e_shoff = c.size);
	EXPECT_BAD("no section headers", "no section headers", ehdr(&c)->e_shnum = 0);
	EXPECT_BAD("segment past end", "outside the", load_phdr(&c, 1)->p_offset = c.size);
	EXPECT_BAD("segment file size", "outside the",
		   load_phdr(&c, 1)->p_filesz = load_phdr(&c, 1)->p_memsz = 1ull << 40);
	EXPECT_BAD("huge segment", "limit", load_phdr(&c, 1)->p_memsz = 1ull << 40);
	EXPECT_BAD("filesz > memsz", "outside the",
		   load_phdr(&c, 1)->p_filesz = load_phdr(&c, 1)->p_memsz + 1);
	EXPECT_BAD("overlap", "overlaps", load_phdr(&c, 1)->p_vaddr = load_phdr(&c, 0)->p_vaddr);
	EXPECT_BAD("wrapping vaddr", "limit", load_phdr(&c, 1)->p_vaddr = ~0ull - 4);

	/* Cut short anywhere, the file must be refused, never read past. */
	for (size_t n = 0; n < im->size; n += n < 256 ? 1 : 7) {
		aql_status st = aql_code_object_open(im->bytes, n, &co);

		if (st == AQL_OK) {
			failures++;
			aql_code_object_destroy(co);
		}
	}
	CHECK(failures == 0, "%u truncated copies were accepted", failures);
#undef EXPECT_BAD
}

/* What a runtime would lend the device printf of OpenCL objects. */
static const aql_symbol_binding printf_syms[] = { { "__printf_alloc", 0x1000 } };
static const aql_load_options printf_opts = { printf_syms, 1 };

/* Flip every byte of the headers in turn: no crash, no leak, no hang. */
static void test_corrupt_bytes(const struct image *im)
{
	struct image c = copy(im);
	unsigned ok = 0, bad = 0;

	for (size_t i = 0; i < im->size && i < 4096; i++) {
		aql_code_object *co;

		c.bytes[i] ^= 0xff;
		if (aql_code_object_load(th_agent(), c.bytes, c.size, &printf_opts, &co) == AQL_OK) {
			ok++;
			aql_code_object_destroy(co);
		} else {
			bad++;
			CHECK(aql_error_message()[0] != 0, "byte %zu: failure without a reason", i);
		}
		c.bytes[i] ^= 0xff;
	}
	CHECK(bad > 0, "no corruption was detected");
	printf("corrupted bytes: %u refused, %u still loadable\n", bad, ok);
	free(c.bytes);
}

static uint64_t symbol_vaddr(const struct image *im, const char *name)
{
	aql_code_object *co;
	uint64_t v = 0;
	void *a, *b;
	size_t s;
	const aql_symbol_binding syms[] = { { "ext_sym", 0 }, { "ext_sym2", 0 } };
	const aql_load_options o = { syms, 2 };

	if (load(im, &o, &co) != AQL_OK)
		return 0;
	if (aql_code_object_symbol(co, name, &a, &s) == AQL_OK &&
	    aql_code_object_symbol(co, "gvar", &b, &s) == AQL_OK)
		v = (uint64_t)((uint8_t *)a - (uint8_t *)aql_code_object_get_info(co)->base);
	aql_code_object_destroy(co);
	return v;
}

static void test_host_refusals(const char *path, const char *needle)
{
	aql_code_object *co;
	aql_status st = aql_code_object_load_file(th_agent(), path, NULL, &co);

	CHECK(st != AQL_OK && th_error_has(needle), "%s: %s", path, aql_status_str(st));
	if (st == AQL_OK)
		aql_code_object_destroy(co);
}

/*
 * Open and load read the caller's image in place and keep nothing of it:
 * on read-only memory (a write would fault), and with the bytes wiped
 * after the call, names, metadata and symbols must still be the same.
 */
static void test_image_not_kept(const char *path, const struct image *im)
{
	uint8_t *ro = mmap(NULL, im->size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	aql_code_object *ref = NULL, *opened = NULL, *loaded = NULL;

	CHECK(ro != MAP_FAILED, "%s: mmap", path);
	if (ro == MAP_FAILED)
		return;
	memcpy(ro, im->bytes, im->size);
	mprotect(ro, im->size, PROT_READ);
	CHECK_OK(aql_code_object_open(im->bytes, im->size, &ref));
	CHECK_OK(aql_code_object_open(ro, im->size, &opened));
	CHECK_OK(aql_code_object_load(th_agent(), ro, im->size, &printf_opts, &loaded));
	mprotect(ro, im->size, PROT_READ | PROT_WRITE);
	memset(ro, 0xa5, im->size);
	for (int n = 0; ref && opened && loaded && n < 2; n++) {
		const aql_code_object_info *a = aql_code_object_get_info(ref);
		const aql_code_object_info *b = aql_code_object_get_info(n ? loaded : opened);

		CHECK(a->kernel_count == b->kernel_count, "%s: kernel count", path);
		for (uint32_t i = 0; i < a->kernel_count && i < b->kernel_count; i++) {
			const aql_kernel_metadata *x = a->kernels[i].metadata, *y = b->kernels[i].metadata;

			CHECK(strcmp(a->kernels[i].name, b->kernels[i].name) == 0 &&
			      strcmp(x->symbol, y->symbol) == 0 && x->arg_count == y->arg_count,
			      "%s: kernel %u changed with the image", path, i);
			for (uint32_t j = 0; j < x->arg_count && j < y->arg_count; j++)
				CHECK((x->args[j].name == y->args[j].name ||
				       strcmp(x->args[j].name, y->args[j].name) == 0) &&
				      x->args[j].offset == y->args[j].offset,
				      "%s: kernel %u arg %u changed with the image", path, i, j);
		}
	}
	if (loaded && aql_code_object_get_info(loaded)->kernel_count) {
		const aql_kernel *k = &aql_code_object_get_info(loaded)->kernels[0];
		void *addr = NULL;

		CHECK_OK(aql_code_object_symbol(loaded, k->metadata->symbol, &addr, NULL));
		CHECK((uint64_t)(uintptr_t)addr == k->kernel_object,
		      "%s: symbol %s after the image is gone", path, k->metadata->symbol);
	}
	aql_code_object_destroy(ref);
	aql_code_object_destroy(opened);
	aql_code_object_destroy(loaded);
	munmap(ro, im->size);
}

/* A real code object: kernels found, placed, descriptors where they point. */
static void test_code_object(const char *path)
{
	struct image im;
	aql_code_object *co = NULL;
	int amdgpu = 0;

	im.bytes = th_read_file(path, &im.size);
	CHECK_OK(load(&im, &printf_opts, &co));
	if (aql_error_message()[0] && !co)
		fprintf(stderr, "  %s\n", path);
	if (co) {
		const aql_code_object_info *info = aql_code_object_get_info(co);

		CHECK(info->kernel_count > 0, "%s: no kernels", path);
		amdgpu = info->kind == AQL_CODE_OBJECT_AMDGPU;
		for (uint32_t i = 0; i < info->kernel_count; i++) {
			const aql_kernel *k = &info->kernels[i], *found;
			uint32_t gs;

			CHECK_OK(aql_code_object_kernel(co, k->name, &found));
			CHECK(found == k, "%s: lookup of %s", path, k->name);
			CHECK(k->kernel_object % 64 == 0 &&
			      k->kernel_object >= (uint64_t)(uintptr_t)info->base &&
			      k->kernel_object + 64 <= (uint64_t)(uintptr_t)info->base + info->size,
			      "%s: %s descriptor at %#llx", path, k->name,
			      (unsigned long long)k->kernel_object);
			/* The loaded descriptor is the one decoded. */
			memcpy(&gs, (void *)(uintptr_t)k->kernel_object, 4);
			CHECK(gs == k->descriptor.group_segment_fixed_size,
			      "%s: %s loaded descriptor differs", path, k->name);
			CHECK(k->kernarg_align >= 16 && k->kernarg_size == k->metadata->kernarg_segment_size,
			      "%s: %s kernarg %u/%u", path, k->name, k->kernarg_size, k->kernarg_align);
		}
		aql_code_object_destroy(co);
	}

	/* Disagreement between descriptor and metadata is an error. */
	if (amdgpu) {
		struct image c = copy(&im);

		CHECK_OK(aql_code_object_open(c.bytes, c.size, &co));
		if (co) {
			const aql_kernel *k = &aql_code_object_get_info(co)->kernels[0];
			/* Until loaded, kernel_object is the descriptor's vaddr. */
			uint64_t kd = k->kernel_object;
			Elf64_Phdr *ph = NULL;

			aql_code_object_destroy(co);
			for (unsigned i = 0; ; i++) {
				ph = load_phdr(&c, i);
				if (kd >= ph->p_vaddr && kd < ph->p_vaddr + ph->p_filesz)
					break;
			}
			c.bytes[ph->p_offset + (kd - ph->p_vaddr)] ^= 0x40;	/* group segment size */
			CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
			      th_error_has("group_segment_fixed_size"), "%s: cross-check", path);
			c.bytes[ph->p_offset + (kd - ph->p_vaddr)] ^= 0x40;
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 57] ^= 0x04;	/* wave32 */
			CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
			      th_error_has("wavefront size"), "%s: wave32 cross-check", path);
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 57] ^= 0x04;
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 4] ^= 0x10;	/* private size */
			CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
			      th_error_has("private_segment_fixed_size"), "%s: private cross-check", path);
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 4] ^= 0x10;
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 9] ^= 0x01;	/* kernarg size */
			CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
			      th_error_has("kernarg_size"), "%s: kernarg cross-check", path);
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 9] ^= 0x01;
			c.bytes[ph->p_offset + (kd - ph->p_vaddr) + 16] ^= 0x40;	/* entry offset */
			CHECK(aql_code_object_open(c.bytes, c.size, &co) == AQL_ERR_INVALID_CODE_OBJECT &&
			      th_error_has("256-byte aligned"), "%s: entry cross-check", path);
		}
		free(c.bytes);
	}
	test_image_not_kept(path, &im);
	/* Every code object is also a malformed-input corpus. */
	if (strstr(path, "v5_gfx940"))
		test_corrupt_bytes(&im);
	free(im.bytes);
}

/* V6 objects come from a V5 one: same layout, ABI version 4. */
static void test_v6_from_v5(const char *path)
{
	struct image im;
	aql_code_object *co;

	im.bytes = th_read_file(path, &im.size);
	im.bytes[EI_ABIVERSION] = 4;
	CHECK_OK(aql_code_object_open(im.bytes, im.size, &co));
	if (co) {
		CHECK(aql_code_object_get_info(co)->version == 6, "version %u",
		      aql_code_object_get_info(co)->version);
		aql_code_object_destroy(co);
	}
	/* As a generic target: gfx9-4-generic (0x5f) version 1 covers gfx940. */
	ehdr(&im)->e_flags = (ehdr(&im)->e_flags & ~0xff000000u & ~0xffu) | 0x5f | (1u << 24);
	CHECK_OK(aql_code_object_open(im.bytes, im.size, &co));
	if (co) {
		const aql_code_object_info *info = aql_code_object_get_info(co);

		CHECK(strcmp(info->target.processor, "gfx9-4-generic") == 0 &&
		      info->target.generic_version == 1, "generic target %s v%u",
		      info->target.processor, info->target.generic_version);
		aql_code_object_destroy(co);
	}
	/* A generic version on a V5 object is refused. */
	im.bytes[EI_ABIVERSION] = 3;
	CHECK(aql_code_object_open(im.bytes, im.size, &co) != AQL_OK, "generic version in V5");
	free(im.bytes);
}

int main(int argc, char **argv)
{
	aql_code_object *co;

	elf_version(EV_CURRENT);
	CHECK(aql_code_object_load_file(th_agent(), "/nonexistent/x.hsaco", NULL, &co) ==
	      AQL_ERR_NOT_FOUND && th_error_has("/nonexistent/x.hsaco"), "missing file");
	CHECK(aql_code_object_load_file(th_agent(), "/tmp", NULL, &co) == AQL_ERR_INVALID_ARG &&
	      th_error_has("regular file"), "directory");
	CHECK(aql_code_object_open("", 0, &co) == AQL_ERR_INVALID_CODE_OBJECT, "empty image");

	for (int i = 1; i < argc; i++) {
		const char *p = argv[i];

		if (ends_with(p, "reloc-relr.hsaco")) {
			const aql_symbol_binding syms[] = { { "ext_sym", 1 }, { "ext_sym2", 2 } };
			const aql_load_options opts = { syms, 2 };

			CHECK(aql_code_object_load_file(th_agent(), p, &opts, &co) ==
			      AQL_ERR_INVALID_CODE_OBJECT && th_error_has("SHT_RELR"), "RELR refused");
		} else if (ends_with(p, "reloc.s")) {
			fprintf(stderr, "llvm-mc or ld.lld missing: relocation fixture not built\n");
			th_failed++;
		} else if (ends_with(p, "reloc.hsaco")) {
			struct image im;

			im.bytes = th_read_file(p, &im.size);
			test_relocations(&im);
			test_relocation_types(&im, symbol_vaddr(&im, "ptrs"));
			test_malformed(&im);
			test_bad_symbols(&im);
			free(im.bytes);
		} else if (ends_with(p, "tls.so")) {
			test_host_refusals(p, "thread-local");
		} else if (ends_with(p, "ctor.so")) {
			test_host_refusals(p, "constructors");
		} else if (ends_with(p, "needed.so")) {
			test_host_refusals(p, "DT_NEEDED");
		} else {
			test_code_object(p);
			if (strstr(p, "v5_gfx940")) {
				struct image im;

				im.bytes = th_read_file(p, &im.size);
				test_bad_note(&im);
				free(im.bytes);
				test_v6_from_v5(p);
			}
		}
	}
	return th_finish();
}
