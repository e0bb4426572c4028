/* SPDX-License-Identifier: MIT */
/*
 * Opening and loading code objects. Opening validates the ELF structure
 * once: program headers, the symbol table and the metadata, and decodes
 * every kernel descriptor; loading then only copies segments into agent
 * memory and applies relocations, so every later access is to data that
 * has already been bounds-checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aql/agent_impl.h"
#include "util/error.h"
#include "aql/queue_impl.h"
#include "loader/loader_impl.h"
#include "loader/metadata_impl.h"
#include "mem/pages.h"

#define ELFOSABI_AMDGPU_HSA 64
#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif
#define NT_AMDGPU_METADATA 32
#define MAX_FILE_SIZE (1ull << 30)

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE EM_NONE
#endif

const struct aql_segment *aql_co_segment(const struct aql_code_object *co,
					 uint64_t vaddr, uint64_t size)
{
	for (uint32_t i = 0; i < co->segment_count; i++) {
		const struct aql_segment *s = &co->segments[i];

		if (vaddr >= s->vaddr && vaddr - s->vaddr <= s->memsz &&
		    size <= s->memsz - (vaddr - s->vaddr))
			return s;
	}
	return NULL;
}

const void *aql_co_file_bytes(const struct aql_code_object *co, uint64_t vaddr,
			      uint64_t size)
{
	const struct aql_segment *s = aql_co_segment(co, vaddr, size);

	if (!s || vaddr - s->vaddr > s->filesz || size > s->filesz - (vaddr - s->vaddr))
		return NULL;
	return co->image + s->offset + (vaddr - s->vaddr);
}

const char *aql_co_symbol_name(const struct aql_code_object *co, const GElf_Sym *sym)
{
	return sym->st_name < co->strtab_size ? co->strtab + sym->st_name : NULL;
}

_Static_assert(sizeof(GElf_Sym) == sizeof(Elf64_Sym), "GElf_Sym is Elf64_Sym");

/* Symbol i < symbol_count; memcpy, as the table need not be aligned. */
static void symbol_at(const struct aql_code_object *co, size_t i, GElf_Sym *out)
{
	memcpy(out, co->symtab + i * sizeof(Elf64_Sym), sizeof(Elf64_Sym));
}

/*
 * Kernel symbols are mangled C++ names, often over 100 bytes: take 8 bytes
 * a step (multiply, then fold the high bits down so every byte reaches the
 * low ones the table uses) rather than FNV's one.
 */
static uint32_t name_hash(const char *s, size_t len)
{
	uint64_t h = len * 0x9e3779b97f4a7c15ull, w;

	for (; len >= 8; s += 8, len -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, s, len);
	h = (h ^ w) * 0xff51afd7ed558ccdull;
	return (uint32_t)(h ^ (h >> 32));
}

/* The slot holding name, or the empty slot where it would go. */
static struct aql_symbol_slot *probe(const struct aql_code_object *co, const char *name,
				     uint32_t hash, GElf_Sym *sym)
{
	for (uint32_t h = hash;; h++) {
		struct aql_symbol_slot *slot = &co->symbol_hash[h & co->symbol_hash_mask];

		if (slot->index == 0)
			return slot;
		if (slot->hash != hash)
			continue;
		symbol_at(co, slot->index - 1, sym);
		/* Only symbols whose names are in bounds are indexed. */
		if (strcmp(co->strtab + sym->st_name, name) == 0)
			return slot;
	}
}

size_t aql_co_find_symbol(const struct aql_code_object *co, const char *name,
			  GElf_Sym *out)
{
	const struct aql_symbol_slot *slot;

	if (!co->symbol_hash)
		return 0;
	slot = probe(co, name, name_hash(name, strlen(name)), out);
	return slot->index ? slot->index - 1 : 0;
}

void aql_co_kernels_from_metadata(struct aql_code_object *co)
{
	for (uint32_t i = 0; i < co->metadata->kernel_count; i++) {
		const aql_kernel_metadata *md = &co->metadata->kernels[i];
		aql_kernel *k = &co->kernels[i];

		k->name = md->name;
		k->metadata = md;
		k->descriptor.kernarg_size = md->kernarg_segment_size;
		k->kernarg_size = md->kernarg_segment_size;
		k->kernarg_align = md->kernarg_segment_align > 16 ? md->kernarg_segment_align : 16;
		k->explicit_arg_count = md->arg_count;
	}
}

/*
 * Index the defined symbols by name, once: kernels, relocations and
 * lookups by the caller then cost one probe each instead of a scan. Each
 * slot keeps the whole hash, so a probe compares names only on a match.
 */
static aql_status index_symbols(struct aql_code_object *co)
{
	uint32_t cap = 16;

	while (cap < 2 * co->symbol_count)
		cap <<= 1;
	co->symbol_hash = calloc(cap, sizeof(*co->symbol_hash));
	if (!co->symbol_hash)
		return aql_fail(AQL_ERR_NOMEM, "index of %zu symbols", co->symbol_count);
	co->symbol_hash_mask = cap - 1;
	for (size_t i = 1; i < co->symbol_count; i++) {
		struct aql_symbol_slot *slot;
		GElf_Sym sym, other;
		const char *n;
		uint32_t hash;

		symbol_at(co, i, &sym);
		/* A local of .symtab must not shadow the global of that name. */
		if (sym.st_shndx == SHN_UNDEF || GELF_ST_BIND(sym.st_info) == STB_LOCAL)
			continue;
		n = aql_co_symbol_name(co, &sym);
		if (!n)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"symbol %zu has a name outside its string table", i);
		hash = name_hash(n, strlen(n));
		slot = probe(co, n, hash, &other);
		if (slot->index == 0)	/* else the first definition wins */
			*slot = (struct aql_symbol_slot){ (uint32_t)i + 1, hash };
	}
	return AQL_OK;
}

/* Header checks that decide what kind of code object this is. */
static aql_status read_header(struct aql_code_object *co, GElf_Ehdr *eh)
{
	aql_code_object_info *info = &co->info;
	aql_status st;

	if (elf_kind(co->elf) != ELF_K_ELF || !gelf_getehdr(co->elf, eh))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: not an ELF file");
	if (eh->e_type != ET_DYN)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"code object: e_type %u is not ET_DYN; link it as a shared object (ld.lld -shared)",
				eh->e_type);
	info->machine = eh->e_machine;
	if (eh->e_machine == EM_AMDGPU) {
		uint8_t abi = eh->e_ident[EI_ABIVERSION];

		if (eh->e_ident[EI_OSABI] != ELFOSABI_AMDGPU_HSA)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"AMDGPU code object: OS ABI %u is not AMDGPU_HSA (64)",
					eh->e_ident[EI_OSABI]);
		if (abi < 1 || abi > 4)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"AMDGPU code object: ABI version %u is not supported; code object V3 to V6 (ABI versions 1 to 4) are",
					abi);
		info->kind = AQL_CODE_OBJECT_AMDGPU;
		info->version = abi + 2u;
		st = aql_target_from_elf(eh->e_flags, abi, &info->target);
		if (st != AQL_OK)
			return st;
	} else if (eh->e_machine == HOST_MACHINE && HOST_MACHINE != EM_NONE) {
		info->kind = AQL_CODE_OBJECT_HOST;
	} else {
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"code object: machine %u is neither AMDGPU (224) nor this host's (%u)",
				eh->e_machine, HOST_MACHINE);
	}
	/* Symbols and relocations are found through the sections. */
	if (eh->e_shnum == 0)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"code object has no section headers; the loader finds symbols and relocations through them");
	if ((eh->e_shentsize != sizeof(Elf64_Shdr) ||
			    eh->e_shoff > co->image_size ||
			    eh->e_shnum > (co->image_size - eh->e_shoff) / sizeof(Elf64_Shdr)))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"code object: section header table (%u entries at %#llx) lies outside the %zu-byte file",
				eh->e_shnum, (unsigned long long)eh->e_shoff, co->image_size);
	if (eh->e_phentsize != sizeof(Elf64_Phdr))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"code object: program header entries of %u bytes, not %zu",
				eh->e_phentsize, sizeof(Elf64_Phdr));
	return AQL_OK;
}

static aql_status read_segments(struct aql_code_object *co, const GElf_Ehdr *eh)
{
	uint64_t end = 0, page = aql_page_size();
	size_t phnum = eh->e_phnum;

	/* Checked here: libelf quietly reports 0 headers for a bad table. */
	if (phnum == PN_XNUM || eh->e_phoff > co->image_size ||
	    phnum > (co->image_size - eh->e_phoff) / sizeof(Elf64_Phdr))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: program header table lies outside the file");
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		struct aql_segment *s;

		if (!gelf_getphdr(co->elf, (int)i, &ph))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: unreadable program header");
		if (ph.p_type == PT_TLS && ph.p_memsz)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"code object: thread-local storage (PT_TLS) is not supported");
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		if (co->segment_count == AQL_LOADER_MAX_SEGMENTS)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"code object: more than %u PT_LOAD segments",
					AQL_LOADER_MAX_SEGMENTS);
		if (ph.p_filesz > ph.p_memsz ||
		    ph.p_offset > co->image_size ||
		    ph.p_filesz > co->image_size - ph.p_offset)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"code object: PT_LOAD %zu (offset %#llx, file size %#llx, memory size %#llx) lies outside the %zu-byte file",
					i, (unsigned long long)ph.p_offset,
					(unsigned long long)ph.p_filesz,
					(unsigned long long)ph.p_memsz, co->image_size);
		if (ph.p_vaddr > AQL_LOADER_MAX_SPAN ||
		    ph.p_memsz > AQL_LOADER_MAX_SPAN - ph.p_vaddr)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"code object: PT_LOAD %zu at %#llx of %#llx bytes ends past the %llu-byte limit",
					i, (unsigned long long)ph.p_vaddr,
					(unsigned long long)ph.p_memsz,
					(unsigned long long)AQL_LOADER_MAX_SPAN);
		if (ph.p_vaddr < end)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"code object: PT_LOAD %zu at %#llx overlaps or precedes the one before it (ending at %#llx)",
					i, (unsigned long long)ph.p_vaddr,
					(unsigned long long)end);
		s = &co->segments[co->segment_count++];
		*s = (struct aql_segment){ ph.p_vaddr, ph.p_memsz, ph.p_offset,
					   ph.p_filesz, ph.p_flags };
		end = ph.p_vaddr + ph.p_memsz;
	}
	if (co->segment_count == 0)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: no PT_LOAD segment");
	co->vaddr_lo = co->segments[0].vaddr & ~(page - 1);
	co->span = end - co->vaddr_lo;
	co->alloc_size = aql_page_round(co->span);
	return AQL_OK;
}

static aql_status read_symbols(struct aql_code_object *co)
{
	Elf_Scn *scn = NULL, *dynsym = NULL, *symtab = NULL;

	while ((scn = elf_nextscn(co->elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: unreadable section header");
		if (sh.sh_type == SHT_DYNSYM && !dynsym)
			dynsym = scn;
		else if (sh.sh_type == SHT_SYMTAB && !symtab)
			symtab = scn;
	}
	scn = dynsym ? dynsym : symtab;
	if (!scn)
		return AQL_OK;	/* no symbols: no kernels, nothing to relocate against */

	GElf_Shdr sh;
	Elf_Data *d;

	gelf_getshdr(scn, &sh);
	d = elf_getdata(scn, NULL);
	if (!d || sh.sh_entsize != sizeof(Elf64_Sym) || d->d_size % sizeof(Elf64_Sym))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"code object: symbol table is unreadable or its entries are not %zu bytes: %s",
				sizeof(Elf64_Sym), elf_errmsg(-1));
	co->symbols = d;
	co->symtab = d->d_buf;
	co->symbol_count = d->d_buf ? d->d_size / sizeof(Elf64_Sym) : 0;
	if (co->symbol_count > UINT32_MAX / 4)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: too many symbols");

	Elf_Scn *strscn = sh.sh_link ? elf_getscn(co->elf, sh.sh_link) : NULL;
	GElf_Shdr strsh;
	Elf_Data *str = strscn && gelf_getshdr(strscn, &strsh) &&
			strsh.sh_type == SHT_STRTAB ? elf_getdata(strscn, NULL) : NULL;

	/* Terminated at its end, every in-bounds name is a C string. */
	if (!str || !str->d_buf || str->d_size == 0 ||
	    ((const char *)str->d_buf)[str->d_size - 1])
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: symbol table has no valid string table");
	co->strtab = str->d_buf;
	co->strtab_size = str->d_size;
	return index_symbols(co);
}

/* The NT_AMDGPU_METADATA note; an object without one has no kernels. */
static aql_status read_amdgpu_metadata(struct aql_code_object *co)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(co->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off, next;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"code object: note section lies outside the file: %s",
					elf_errmsg(-1));
		while ((next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type == NT_AMDGPU_METADATA && nh.n_namesz == 7 &&
			    memcmp((const char *)d->d_buf + name_off, "AMDGPU", 7) == 0)
				return aql_metadata_parse((const char *)d->d_buf + desc_off,
							  nh.n_descsz, &co->metadata);
			off = next;
		}
		if (off < d->d_size)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"code object: malformed note at offset %zu of a %zu-byte note section",
					off, (size_t)d->d_size);
	}
	return aql_metadata_build(NULL, 0, &co->metadata);
}

static int is_kd_name(const char *n)
{
	size_t len = strlen(n);

	return len > 3 && strcmp(n + len - 3, ".kd") == 0;
}

static uint32_t count_explicit(const aql_kernel_metadata *md)
{
	uint32_t n = 0;

	while (n < md->arg_count && md->args[n].kind < AQL_ARG_HIDDEN_GLOBAL_OFFSET_X)
		n++;
	return n;
}

/* kd_used[i] counts the kernels whose descriptor is symbol i. */
static aql_status describe_kernels(struct aql_code_object *co, uint8_t *kd_used)
{
	const aql_metadata *md = co->metadata;
	aql_status st;

	for (uint32_t i = 0; i < md->kernel_count; i++) {
		const aql_kernel_metadata *km = &md->kernels[i];
		aql_kernel *k = &co->kernels[i];
		const uint8_t *bytes;
		GElf_Sym sym;
		size_t index = aql_co_find_symbol(co, km->symbol, &sym);

		if (!index)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"kernel %s: its descriptor symbol %s is not defined",
					km->name, km->symbol);
		if (kd_used[index]++)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"kernel %s: descriptor %s already belongs to another kernel",
					km->name, km->symbol);
		bytes = aql_co_file_bytes(co, sym.st_value, 64);
		if (!bytes || (sym.st_value & 63))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"kernel %s: descriptor %s at %#llx is not 64 bytes of file data aligned to 64",
					km->name, km->symbol, (unsigned long long)sym.st_value);
		k->name = km->name;
		k->metadata = km;
		aql_kd_decode(bytes, &k->descriptor);
		st = aql_kd_check(co, sym.st_value, &k->descriptor, km);
		if (st != AQL_OK)
			return st;
		k->kernarg_size = km->kernarg_segment_size;
		k->kernarg_align = km->kernarg_segment_align > 16 ? km->kernarg_segment_align : 16;
		k->group_segment_size = km->group_segment_fixed_size;
		k->private_segment_size = km->private_segment_fixed_size;
		k->explicit_arg_count = count_explicit(km);
		/* Until loaded, kernel_object holds the descriptor's vaddr. */
		k->kernel_object = sym.st_value;
	}
	/*
	 * A descriptor without metadata could not be dispatched correctly. The
	 * index holds each defined name's first definition, the symbols this
	 * check is about; the lowest such index is named, whatever the slot order.
	 */
	size_t orphan = 0;

	for (uint32_t s = 0; co->symbol_hash && s <= co->symbol_hash_mask; s++) {
		size_t i = co->symbol_hash[s].index;
		GElf_Sym sym;

		if (i-- == 0 || kd_used[i] || (orphan && i > orphan))
			continue;
		symbol_at(co, i, &sym);
		if (is_kd_name(co->strtab + sym.st_name))
			orphan = i;
	}
	if (orphan) {
		GElf_Sym sym;

		symbol_at(co, orphan, &sym);
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel descriptor %s has no entry in the metadata",
				co->strtab + sym.st_name);
	}
	return AQL_OK;
}

static aql_status describe_amdgpu_kernels(struct aql_code_object *co)
{
	const aql_metadata *md = co->metadata;
	uint8_t *kd_used;
	aql_status st;

	co->kernels = calloc(md->kernel_count ? md->kernel_count : 1, sizeof(*co->kernels));
	kd_used = calloc(co->symbol_count + 1, 1);
	if (!co->kernels || !kd_used) {
		free(kd_used);
		return aql_fail(AQL_ERR_NOMEM, "%u kernels", md->kernel_count);
	}
	st = describe_kernels(co, kd_used);
	free(kd_used);
	return st;
}

static void init_libelf(void)
{
	elf_version(EV_CURRENT);
}

/*
 * The identification bytes libelf would convert for another class or byte
 * order, checked first: so libelf only ever reads the caller's image.
 */
static aql_status check_ident(const uint8_t *image, size_t size)
{
	if (size > MAX_FILE_SIZE)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"code object of %zu bytes exceeds the %llu-byte limit",
				size, (unsigned long long)MAX_FILE_SIZE);
	if (size < sizeof(Elf64_Ehdr))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"code object: %zu bytes is shorter than an ELF header", size);
	if (memcmp(image, ELFMAG, SELFMAG) != 0)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: not an ELF file");
	if (image[EI_CLASS] != ELFCLASS64)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: not a 64-bit ELF file");
	if (image[EI_DATA] != ELFDATA2LSB)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: not little endian");
	return AQL_OK;
}

/*
 * Read the caller's image in place: nothing is copied, and detach() drops
 * every pointer into it before the public call returns.
 */
static aql_status co_open(const uint8_t *image, size_t size, aql_code_object **out)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct aql_code_object *co;
	GElf_Ehdr eh;
	aql_status st;

	if (aql_nv_object_detect(image, size)) {
		if (size > MAX_FILE_SIZE)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"code object of %zu bytes exceeds the %llu-byte limit",
					size, (unsigned long long)MAX_FILE_SIZE);
		co = calloc(1, sizeof(*co));
		if (!co)
			return aql_fail(AQL_ERR_NOMEM, "code object");
		co->image = image;
		co->image_size = size;
		if ((st = aql_nv_object_describe(co)) != AQL_OK)
			goto fail;
		goto described;
	}
	if ((st = check_ident(image, size)) != AQL_OK)
		return st;
	pthread_once(&once, init_libelf);
	co = calloc(1, sizeof(*co));
	if (!co)
		return aql_fail(AQL_ERR_NOMEM, "code object");
	co->image = image;
	co->image_size = size;
	/* libelf takes a char *, but checked as above it does not write. */
	co->elf = elf_memory((char *)(uintptr_t)image, size);
	if (!co->elf) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "code object: %s", elf_errmsg(-1));
		goto fail;
	}
	if ((st = read_header(co, &eh)) != AQL_OK ||
	    (st = read_segments(co, &eh)) != AQL_OK ||
	    (st = read_symbols(co)) != AQL_OK)
		goto fail;
	if (co->info.kind == AQL_CODE_OBJECT_AMDGPU) {
		if ((st = read_amdgpu_metadata(co)) != AQL_OK ||
		    (st = describe_amdgpu_kernels(co)) != AQL_OK)
			goto fail;
	} else if ((st = aql_host_object_describe(co)) != AQL_OK) {
		goto fail;
	}
described:
	co->info.metadata = co->metadata;
	co->info.kernel_count = co->metadata->kernel_count;
	co->info.kernels = co->kernels;
	co->info.size = co->alloc_size;
	*out = co;
	return AQL_OK;
fail:
	aql_code_object_destroy(co);
	return st;
}

/*
 * What aql_code_object_symbol() reads once the image is gone: a copy of
 * the symbol and string tables (a few percent of a file with debug info).
 */
static aql_status keep_symbols(struct aql_code_object *co)
{
	size_t syms = co->symbol_count * sizeof(Elf64_Sym);
	uint8_t *copy;

	if (!co->symbol_hash)
		return AQL_OK;
	copy = malloc(syms + co->strtab_size);
	if (!copy)
		return aql_fail(AQL_ERR_NOMEM, "symbol table of %zu bytes",
				syms + co->strtab_size);
	/* Either table may be empty (and NULL) in a malformed object. */
	if (syms)
		memcpy(copy, co->symtab, syms);
	if (co->strtab_size)
		memcpy(copy + syms, co->strtab, co->strtab_size);
	co->symbol_copy = copy;
	co->symtab = copy;
	co->strtab = (const char *)copy + syms;
	return AQL_OK;
}

/* Drop every pointer into the caller's image; an opened object keeps no symbols. */
static void detach(struct aql_code_object *co)
{
	elf_end(co->elf);
	co->elf = NULL;
	co->image = NULL;
	co->symbols = NULL;
	if (co->symbol_copy)
		return;
	free(co->symbol_hash);
	co->symbol_hash = NULL;
	co->symtab = NULL;
	co->strtab = NULL;
	co->strtab_size = 0;
	co->symbol_count = 0;
}

aql_status aql_code_object_open(const void *image, size_t size, aql_code_object **out)
{
	aql_status st;

	if (!image || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_code_object_open: NULL %s",
				image ? "out" : "image");
	st = co_open(image, size, out);
	if (st == AQL_OK)
		detach(*out);
	return st;
}

static int prot_of(uint32_t flags)
{
	return (flags & PF_R ? PROT_READ : 0) | (flags & PF_W ? PROT_WRITE : 0) |
	       (flags & PF_X ? PROT_EXEC : 0);
}

/*
 * Host code: each page gets the union of the protections of the segments
 * on it, so a page shared by code and data stays usable for both.
 */
static aql_status protect_host(struct aql_code_object *co)
{
	uint64_t page = aql_page_size();
	uint8_t *base = co->info.base;

	for (uint64_t p = 0; p < co->alloc_size; p += page) {
		int prot = 0;

		for (uint32_t i = 0; i < co->segment_count; i++) {
			const struct aql_segment *s = &co->segments[i];
			uint64_t lo = s->vaddr - co->vaddr_lo, hi = lo + s->memsz;

			if (lo < p + page && hi > p)
				prot |= prot_of(s->flags);
		}
		aql_status st = co->agent->ops->code_protect(co->agent, base + p, page,
							     prot ? prot : PROT_NONE);
		if (st != AQL_OK)
			return st;
	}
	return AQL_OK;
}

static int is_module_kind(enum aql_code_object_kind kind)
{
	return kind == AQL_CODE_OBJECT_PTX || kind == AQL_CODE_OBJECT_CUBIN;
}

/* PTX and cubins: the agent's driver loads the whole image itself. */
static aql_status module_load(aql_agent *agent, struct aql_code_object *co)
{
	uint32_t n = co->info.kernel_count;
	const char **names = calloc(n ? n : 1, sizeof(*names));
	uint64_t *objects = calloc(n ? n : 1, sizeof(*objects));
	uint32_t *lds = calloc(n ? n : 1, sizeof(*lds));
	uint32_t *wg = calloc(n ? n : 1, sizeof(*wg));
	uint32_t *kernarg = calloc(n ? n : 1, sizeof(*kernarg));
	struct aql_module_load load = {
		.image = co->image, .size = co->image_size, .kernel_count = n,
		.kernel_names = names, .kernarg_sizes = kernarg, .kernel_objects = objects,
		.group_segment_sizes = lds, .max_workgroup_sizes = wg,
	};
	aql_status st;

	if (!names || !objects || !lds || !wg || !kernarg) {
		st = aql_fail(AQL_ERR_NOMEM, "code object of %u kernels", n);
		goto out;
	}
	if (!agent->ops->module_load) {
		st = aql_fail(AQL_ERR_UNSUPPORTED, "this agent does not run %s code objects",
			      co->info.kind == AQL_CODE_OBJECT_PTX ? "PTX" : "cubin");
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		names[i] = co->kernels[i].metadata->symbol;
		kernarg[i] = co->kernels[i].kernarg_size;
	}
	st = agent->ops->module_load(agent, co->info.kind, &load);
	if (st != AQL_OK)
		goto out;
	co->agent = agent;
	co->info.base = load.base;
	co->alloc_size = load.base_size;
	/* The metadata is the loader's own: what the driver found is final. */
	for (uint32_t i = 0; i < n; i++) {
		aql_kernel *k = &co->kernels[i];
		aql_kernel_metadata *md = (aql_kernel_metadata *)(uintptr_t)k->metadata;

		k->kernel_object = objects[i];
		k->group_segment_size = lds[i];
		k->descriptor.group_segment_fixed_size = lds[i];
		md->group_segment_fixed_size = lds[i];
		if (wg[i] && (!md->max_flat_workgroup_size || wg[i] < md->max_flat_workgroup_size))
			md->max_flat_workgroup_size = wg[i];
	}
out:
	free(names);
	free(objects);
	free(lds);
	free(wg);
	free(kernarg);
	return st;
}

static aql_status co_load(aql_agent *agent, struct aql_code_object *co,
			  const aql_load_options *opts)
{
	uint8_t *base;
	aql_status st;
	void *mem;
	char target[64];

	if (is_module_kind(co->info.kind))
		return module_load(agent, co);
	/* Opening reads every target; only dispatch needs one aql runs. */
	if (co->info.kind == AQL_CODE_OBJECT_AMDGPU &&
	    !aql_target_dispatchable(&co->info.target)) {
		aql_target_format(&co->info.target, target, sizeof(target));
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"code object for %s cannot be loaded for dispatch: aql runs "
				"gfx9 and later (aql_code_object_open still reads it)", target);
	}
	st = agent->ops->code_alloc(agent, co->info.kind, co->alloc_size, &mem);
	if (st != AQL_OK)
		return st;
	co->agent = agent;
	co->info.base = base = mem;
	for (uint32_t i = 0; i < co->segment_count; i++) {
		const struct aql_segment *s = &co->segments[i];

		memcpy(base + (s->vaddr - co->vaddr_lo), co->image + s->offset, s->filesz);
	}
	st = aql_co_relocate(co, opts);
	if (st != AQL_OK)
		return st;
	for (uint32_t i = 0; i < co->info.kernel_count; i++)
		co->kernels[i].kernel_object += (uint64_t)(uintptr_t)base - co->vaddr_lo;
	if (co->info.kind == AQL_CODE_OBJECT_HOST && (st = protect_host(co)) != AQL_OK)
		return st;
	return agent->ops->code_loaded ? agent->ops->code_loaded(agent, co) : AQL_OK;
}

static aql_status check_agent(aql_agent *agent, const void *what, aql_code_object **out)
{
	if (!agent || !what || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_code_object_load: NULL %s",
				!agent ? "agent" : !what ? "image" : "out");
	return AQL_OK;
}

/* Open the caller's image and load it, keeping nothing of the image. */
static aql_status open_and_load(aql_agent *agent, const uint8_t *image, size_t size,
				const aql_load_options *opts, aql_code_object **out)
{
	aql_code_object *co;
	aql_status st = co_open(image, size, &co);

	if (st != AQL_OK)
		return st;
	st = co_load(agent, co, opts);
	if (st == AQL_OK)
		st = keep_symbols(co);
	if (st != AQL_OK) {
		aql_code_object_destroy(co);
		return st;
	}
	detach(co);
	*out = co;
	return AQL_OK;
}

aql_status aql_code_object_load(aql_agent *agent, const void *image, size_t size,
				const aql_load_options *opts, aql_code_object **out)
{
	aql_status st = check_agent(agent, image, out);

	return st == AQL_OK ? open_and_load(agent, image, size, opts, out) : st;
}

aql_status aql_code_object_load_file(aql_agent *agent, const char *path,
				     const aql_load_options *opts, aql_code_object **out)
{
	struct stat sb;
	uint8_t *image;
	aql_status st;
	size_t got = 0;
	int fd;

	if ((st = check_agent(agent, path, out)) != AQL_OK)
		return st;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return aql_fail_errno(errno == ENOENT ? AQL_ERR_NOT_FOUND : AQL_ERR_SYSTEM,
				      errno, "code object %s", path);
	if (fstat(fd, &sb) != 0) {
		int err = errno;

		close(fd);
		return aql_fail_errno(AQL_ERR_SYSTEM, err, "code object %s", path);
	}
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > MAX_FILE_SIZE) {
		close(fd);
		return aql_fail(AQL_ERR_INVALID_ARG,
				"code object %s is not a regular file of at most %llu bytes",
				path, (unsigned long long)MAX_FILE_SIZE);
	}
	image = malloc(sb.st_size ? (size_t)sb.st_size : 1);
	if (!image) {
		close(fd);
		return aql_fail(AQL_ERR_NOMEM, "code object %s of %lld bytes", path,
				(long long)sb.st_size);
	}
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, image + got, (size_t)sb.st_size - got);

		if (n <= 0) {
			int err = n < 0 ? errno : EIO;

			close(fd);
			free(image);
			return aql_fail_errno(AQL_ERR_SYSTEM, err, "reading code object %s", path);
		}
		got += (size_t)n;
	}
	close(fd);
	st = open_and_load(agent, image, got, opts, out);
	free(image);
	return st == AQL_OK ? st : aql_fail_prefix(st, path);
}

/* A kernel dispatch whose kernel_object lies in the loaded range of co. */
static int runs_code_of(const aql_packet *p, void *user)
{
	const aql_code_object *co = user;
	uint64_t base = (uint64_t)(uintptr_t)co->info.base;

	return aql_header_type(p->header) == AQL_PACKET_KERNEL_DISPATCH &&
	       p->dispatch.kernel_object - base < co->alloc_size;
}

static const char *kernel_name_at(const aql_code_object *co, uint64_t kernel_object)
{
	for (uint32_t i = 0; i < co->info.kernel_count; i++)
		if (co->kernels[i].kernel_object == kernel_object)
			return co->kernels[i].name;
	return "(not a kernel descriptor)";
}

aql_status aql_code_object_destroy(aql_code_object *co)
{
	uint64_t queue_id, packet_id;
	aql_packet p;

	if (!co)
		return AQL_OK;
	if (co->info.base && aql_queue_find_pending(runs_code_of, co, &p, &queue_id, &packet_id))
		return aql_fail(AQL_ERR_BUSY,
				"code object still in use: kernel '%s' is in flight in packet %llu of queue %llu",
				kernel_name_at(co, p.dispatch.kernel_object),
				(unsigned long long)packet_id, (unsigned long long)queue_id);
	if (co->info.base && is_module_kind(co->info.kind))
		co->agent->ops->module_unload(co->agent, co->info.base);
	else if (co->info.base)
		co->agent->ops->code_free(co->agent, co->info.base, co->alloc_size);
	if (co->elf)
		elf_end(co->elf);
	aql_metadata_free(co->metadata);
	free(co->kernels);
	free(co->symbol_hash);
	free(co->pointers);
	free(co->symbol_copy);
	free(co);
	return AQL_OK;
}

const aql_code_object_info *aql_code_object_get_info(const aql_code_object *co)
{
	return &co->info;
}

aql_status aql_code_object_kernel(const aql_code_object *co, const char *name,
				  const aql_kernel **out)
{
	if (!co || !name || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_code_object_kernel: NULL argument");
	for (uint32_t i = 0; i < co->info.kernel_count; i++) {
		const aql_kernel *k = &co->kernels[i];

		if (strcmp(k->name, name) == 0 || strcmp(k->metadata->symbol, name) == 0) {
			*out = k;
			return AQL_OK;
		}
	}
	return aql_fail(AQL_ERR_NOT_FOUND, "no kernel named %s in the code object (%u kernels)",
			name, co->info.kernel_count);
}

aql_status aql_code_object_symbol(const aql_code_object *co, const char *name,
				  void **address, size_t *size)
{
	GElf_Sym sym;

	if (!co || !name || !address)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_code_object_symbol: NULL argument");
	if (!co->info.base)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"symbol %s: the code object was opened, not loaded", name);
	if (!aql_co_find_symbol(co, name, &sym))
		return aql_fail(AQL_ERR_NOT_FOUND, "no symbol named %s in the code object", name);
	if (sym.st_shndx >= SHN_LORESERVE || !aql_co_segment(co, sym.st_value, sym.st_size))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"symbol %s at %#llx (%llu bytes) lies outside every loaded segment",
				name, (unsigned long long)sym.st_value,
				(unsigned long long)sym.st_size);
	*address = (uint8_t *)co->info.base + (sym.st_value - co->vaddr_lo);
	if (size)
		*size = sym.st_size;
	return AQL_OK;
}
