/* SPDX-License-Identifier: MIT */
/*
 * Dynamic relocations. An AMDGPU runtime has to apply exactly five types
 * (RELATIVE64, ABS64, ABS32_LO, ABS32_HI, ABS32: what ld.lld emits into a
 * code object's .rela.dyn); a host code object needs RELATIVE, 64-bit
 * absolute, GLOB_DAT and JUMP_SLOT. Anything else means the object expects
 * a loader feature we do not have, so it is refused by name rather than
 * skipped.
 */
#include <stdlib.h>
#include <string.h>

#include "aql/agent_impl.h"
#include "util/error.h"
#include "loader/loader_impl.h"

#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif

enum op {
	OP_NONE,
	OP_RELATIVE64,		/* B + A */
	OP_ABS64,		/* S + A */
	OP_ABS32_LO,		/* (S + A) & 0xffffffff */
	OP_ABS32_HI,		/* (S + A) >> 32 */
	OP_ABS32,		/* S + A, must fit in 32 bits */
	OP_SYMBOL64,		/* S: GLOB_DAT, JUMP_SLOT */
	OP_UNSUPPORTED,
};

struct reloc_type {
	uint32_t type;
	enum op op;
	const char *name;
};

static const struct reloc_type amdgpu_types[] = {
	{ 0, OP_NONE, "R_AMDGPU_NONE" },
	{ 1, OP_ABS32_LO, "R_AMDGPU_ABS32_LO" },
	{ 2, OP_ABS32_HI, "R_AMDGPU_ABS32_HI" },
	{ 3, OP_ABS64, "R_AMDGPU_ABS64" },
	{ 4, OP_UNSUPPORTED, "R_AMDGPU_REL32" },
	{ 5, OP_UNSUPPORTED, "R_AMDGPU_REL64" },
	{ 6, OP_ABS32, "R_AMDGPU_ABS32" },
	{ 7, OP_UNSUPPORTED, "R_AMDGPU_GOTPCREL" },
	{ 8, OP_UNSUPPORTED, "R_AMDGPU_GOTPCREL32_LO" },
	{ 9, OP_UNSUPPORTED, "R_AMDGPU_GOTPCREL32_HI" },
	{ 10, OP_UNSUPPORTED, "R_AMDGPU_REL32_LO" },
	{ 11, OP_UNSUPPORTED, "R_AMDGPU_REL32_HI" },
	{ 13, OP_RELATIVE64, "R_AMDGPU_RELATIVE64" },
	{ 14, OP_UNSUPPORTED, "R_AMDGPU_REL16" },
};

static const struct reloc_type x86_64_types[] = {
	{ 0, OP_NONE, "R_X86_64_NONE" },
	{ 1, OP_ABS64, "R_X86_64_64" },
	{ 2, OP_UNSUPPORTED, "R_X86_64_PC32" },
	{ 5, OP_UNSUPPORTED, "R_X86_64_COPY" },
	{ 6, OP_SYMBOL64, "R_X86_64_GLOB_DAT" },
	{ 7, OP_SYMBOL64, "R_X86_64_JUMP_SLOT" },
	{ 8, OP_RELATIVE64, "R_X86_64_RELATIVE" },
	{ 10, OP_UNSUPPORTED, "R_X86_64_32" },
	{ 16, OP_UNSUPPORTED, "R_X86_64_DTPMOD64 (thread-local storage)" },
	{ 17, OP_UNSUPPORTED, "R_X86_64_DTPOFF64 (thread-local storage)" },
	{ 18, OP_UNSUPPORTED, "R_X86_64_TPOFF64 (thread-local storage)" },
	{ 37, OP_UNSUPPORTED, "R_X86_64_IRELATIVE (ifunc)" },
};

static const struct reloc_type aarch64_types[] = {
	{ 0, OP_NONE, "R_AARCH64_NONE" },
	{ 257, OP_ABS64, "R_AARCH64_ABS64" },
	{ 1024, OP_UNSUPPORTED, "R_AARCH64_COPY" },
	{ 1025, OP_SYMBOL64, "R_AARCH64_GLOB_DAT" },
	{ 1026, OP_SYMBOL64, "R_AARCH64_JUMP_SLOT" },
	{ 1027, OP_RELATIVE64, "R_AARCH64_RELATIVE" },
	{ 1030, OP_UNSUPPORTED, "R_AARCH64_TLS_TPREL64 (thread-local storage)" },
	{ 1032, OP_UNSUPPORTED, "R_AARCH64_IRELATIVE (ifunc)" },
};

static const struct reloc_type *lookup(uint16_t machine, uint32_t type)
{
	static const struct reloc_type unknown = { 0, OP_UNSUPPORTED, NULL };
	const struct reloc_type *t;
	size_t n;

	switch (machine) {
	case EM_AMDGPU: t = amdgpu_types; n = sizeof(amdgpu_types) / sizeof(*t); break;
	case EM_X86_64: t = x86_64_types; n = sizeof(x86_64_types) / sizeof(*t); break;
	case EM_AARCH64: t = aarch64_types; n = sizeof(aarch64_types) / sizeof(*t); break;
	default: return &unknown;
	}
	for (size_t i = 0; i < n; i++)
		if (t[i].type == type)
			return &t[i];
	return &unknown;
}

static unsigned width_of(enum op op)
{
	return op == OP_ABS32_LO || op == OP_ABS32_HI || op == OP_ABS32 ? 4 : 8;
}

static int find_binding(const aql_symbol_binding *b, uint32_t n, const char *name,
			uint64_t *out)
{
	for (uint32_t i = 0; i < n; i++)
		if (b[i].name && strcmp(b[i].name, name) == 0) {
			*out = b[i].address;
			return 1;
		}
	return 0;
}

/*
 * Resolve symbol index i to an address: base-relative for a symbol the
 * object defines (the caller adds the load bias), absolute otherwise.
 */
static aql_status symbol_value(const struct aql_code_object *co, uint64_t i,
			       const aql_load_options *opts, uint64_t *out,
			       int *defined)
{
	const char *name;
	GElf_Sym sym;

	*defined = 0;
	*out = 0;
	if (i == 0)
		return AQL_OK;
	if (i >= co->symbol_count || !gelf_getsym(co->symbols, (int)i, &sym))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"relocation names symbol %llu of %zu",
				(unsigned long long)i, co->symbol_count);
	name = aql_co_symbol_name(co, &sym);
	if (!name)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"symbol %llu has a name outside its string table",
				(unsigned long long)i);
	if (sym.st_shndx == SHN_ABS) {
		*out = sym.st_value;
		return AQL_OK;
	}
	if (sym.st_shndx != SHN_UNDEF) {
		if (sym.st_shndx >= SHN_LORESERVE || !aql_co_segment(co, sym.st_value, 0))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"symbol %s (value %#llx, section %u) lies outside every loaded segment",
					name, (unsigned long long)sym.st_value, sym.st_shndx);
		*out = sym.st_value;
		*defined = 1;
		return AQL_OK;
	}
	if (opts && find_binding(opts->symbols, opts->symbol_count, name, out))
		return AQL_OK;
	if (co->agent && co->agent->ops->builtins) {
		uint32_t n;
		const aql_symbol_binding *b = co->agent->ops->builtins(co->agent, co->info.kind, &n);

		if (find_binding(b, n, name, out))
			return AQL_OK;
	}
	if (GELF_ST_BIND(sym.st_info) == STB_WEAK)
		return AQL_OK;
	return aql_fail(AQL_ERR_NOT_FOUND,
			"undefined symbol %s: neither the load options nor the agent define it",
			name);
}

typedef aql_status (*reloc_fn)(struct aql_code_object *co, const GElf_Rela *r,
			       const struct reloc_type *t, void *ctx);

/* Call fn for every entry of every allocated relocation section. */
static aql_status for_each_reloc(struct aql_code_object *co, reloc_fn fn, void *ctx)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(co->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC))
			continue;
		if (sh.sh_type == SHT_REL)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"relocation section %zu has no addends (SHT_REL); only SHT_RELA is supported",
					elf_ndxscn(scn));
		if (sh.sh_type == SHT_RELR && sh.sh_size)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"packed relative relocations (SHT_RELR, section %zu) are not supported; link without -z pack-relative-relocs",
					elf_ndxscn(scn));
		if (sh.sh_type != SHT_RELA)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d || sh.sh_entsize != sizeof(Elf64_Rela) || d->d_size % sizeof(Elf64_Rela))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"relocation section %zu is unreadable or its entries are not %zu bytes",
					elf_ndxscn(scn), sizeof(Elf64_Rela));
		if (d->d_size && sh.sh_link != 0 &&
		    (!co->symbols || elf_getdata(elf_getscn(co->elf, sh.sh_link), NULL) != co->symbols))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"relocation section %zu refers to a symbol table other than the dynamic one",
					elf_ndxscn(scn));
		for (size_t i = 0; i < d->d_size / sizeof(Elf64_Rela); i++) {
			GElf_Rela r;
			const struct reloc_type *t;
			aql_status st;

			gelf_getrela(d, (int)i, &r);
			t = lookup(co->info.machine, (uint32_t)GELF_R_TYPE(r.r_info));
			if (t->op == OP_NONE)
				continue;
			if (t->op == OP_UNSUPPORTED) {
				if (t->name)
					return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
							"relocation %s (type %u) at %#llx is not supported by this loader",
							t->name, (unsigned)GELF_R_TYPE(r.r_info),
							(unsigned long long)r.r_offset);
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"unknown relocation type %u at %#llx for machine %u",
						(unsigned)GELF_R_TYPE(r.r_info),
						(unsigned long long)r.r_offset, co->info.machine);
			}
			if (!aql_co_segment(co, r.r_offset, width_of(t->op)))
				return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						"relocation %s at %#llx lies outside every loaded segment",
						t->name, (unsigned long long)r.r_offset);
			st = fn(co, &r, t, ctx);
			if (st != AQL_OK)
				return st;
		}
	}
	return AQL_OK;
}

static aql_status apply_one(struct aql_code_object *co, const GElf_Rela *r,
			    const struct reloc_type *t, void *ctx)
{
	const aql_load_options *opts = ctx;
	uint64_t bias = (uint64_t)(uintptr_t)co->info.base - co->vaddr_lo;
	uint8_t *where = (uint8_t *)co->info.base + (r->r_offset - co->vaddr_lo);
	uint64_t s, v;
	uint32_t v32;
	int defined;
	aql_status st;

	st = symbol_value(co, GELF_R_SYM(r->r_info), opts, &s, &defined);
	if (st != AQL_OK)
		return aql_fail_prefix(st, t->name);
	if (defined)
		s += bias;
	switch (t->op) {
	case OP_RELATIVE64: v = bias + (uint64_t)r->r_addend; break;
	case OP_SYMBOL64: v = s; break;
	default: v = s + (uint64_t)r->r_addend; break;
	}
	switch (t->op) {
	case OP_ABS32_LO:
		v32 = (uint32_t)v;
		break;
	case OP_ABS32_HI:
		v32 = (uint32_t)(v >> 32);
		break;
	case OP_ABS32:
		if (v > UINT32_MAX)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"%s at %#llx: value %#llx does not fit in 32 bits",
					t->name, (unsigned long long)r->r_offset,
					(unsigned long long)v);
		v32 = (uint32_t)v;
		break;
	default:
		memcpy(where, &v, 8);
		return AQL_OK;
	}
	memcpy(where, &v32, 4);
	return AQL_OK;
}

aql_status aql_co_relocate(struct aql_code_object *co, const aql_load_options *opts)
{
	return for_each_reloc(co, apply_one, (void *)opts);
}

struct aql_reloc_pointer {
	uint64_t vaddr;
	uint64_t value;		/* the vaddr it points to, unless why */
	const char *why;	/* NULL, or why it cannot be followed */
};

struct pointer_list {
	struct aql_reloc_pointer *items;
	size_t count, capacity;
};

static aql_status collect_one(struct aql_code_object *co, const GElf_Rela *r,
			      const struct reloc_type *t, void *ctx)
{
	struct pointer_list *l = ctx;
	struct aql_reloc_pointer p = { .vaddr = r->r_offset };
	uint64_t s;
	int defined;

	if (t->op == OP_RELATIVE64) {
		p.value = (uint64_t)r->r_addend;
	} else if (t->op == OP_ABS64 || t->op == OP_SYMBOL64) {
		if (symbol_value(co, GELF_R_SYM(r->r_info), NULL, &s, &defined) != AQL_OK ||
		    !defined)
			p.why = "refers to a symbol the object does not define";
		p.value = s + (t->op == OP_ABS64 ? (uint64_t)r->r_addend : 0);
	} else {
		p.why = "is relocated by a 32-bit relocation";
	}
	if (l->count == l->capacity) {
		size_t cap = l->capacity ? 2 * l->capacity : 64;
		void *grown = realloc(l->items, cap * sizeof(*l->items));

		if (!grown)
			return aql_fail(AQL_ERR_NOMEM, "%zu relocated pointers", cap);
		l->items = grown;
		l->capacity = cap;
	}
	l->items[l->count++] = p;
	return AQL_OK;
}

static int by_vaddr(const void *a, const void *b)
{
	const struct aql_reloc_pointer *x = a, *y = b;

	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

aql_status aql_co_index_pointers(struct aql_code_object *co)
{
	struct pointer_list l = { 0 };
	aql_status st = for_each_reloc(co, collect_one, &l);

	if (st != AQL_OK) {
		free(l.items);
		return st;
	}
	if (l.count)
		qsort(l.items, l.count, sizeof(*l.items), by_vaddr);
	co->pointers = l.items;
	co->pointer_count = l.count;
	return AQL_OK;
}

aql_status aql_co_read_pointer(const struct aql_code_object *co, uint64_t vaddr,
			       uint64_t *out)
{
	const struct aql_reloc_pointer key = { .vaddr = vaddr }, *p;
	const void *bytes;

	p = co->pointer_count ? bsearch(&key, co->pointers, co->pointer_count,
					sizeof(key), by_vaddr) : NULL;
	if (p) {
		if (p->why)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "pointer at %#llx %s",
					(unsigned long long)vaddr, p->why);
		*out = p->value;
		return AQL_OK;
	}
	bytes = aql_co_file_bytes(co, vaddr, 8);
	if (!bytes)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"pointer at %#llx lies outside the file data",
				(unsigned long long)vaddr);
	memcpy(out, bytes, 8);
	return AQL_OK;
}
