/* SPDX-License-Identifier: MIT */
/*
 * Cubins: the ELF files ptxas and nvcc write for one NVIDIA architecture.
 * The format is undocumented; what is read here was checked against
 * CUDA 13.0's ptxas and nvcc output:
 *
 *   ELF header: ELFCLASS64, little endian, e_machine EM_CUDA (190). The SM
 *     is in e_flags: bits 8..15 when EI_ABIVERSION is 8 (what CUDA 13
 *     writes: 0x6005004 for sm_80, 0x6005a04 for sm_90); bits 0..7 when it
 *     is 7, older toolkits, which set EF_CUDA_64BIT_ADDRESS (0x400) for
 *     64-bit code (as LLVM's BinaryFormat/ELF.h reads them; no such file
 *     was made here).
 *   Kernels: STT_FUNC symbols with st_other bit 0x10 (device functions
 *     have 0), defined in section ".text.<name>".
 *   Their parameters: section ".nv.info.<name>", whose sh_info is the
 *     kernel's .text section: records {u8 format, u8 attribute, ...};
 *     formats 0x01 to 0x03 carry 2 more bytes, format 0x04 a u16 size and
 *     that many bytes. Attributes read, all others skipped:
 *       0x17 KPARAM_INFO, 12 bytes: u32 index, u16 ordinal, u16 offset,
 *            u32 with the size in bytes at bits 18..31 (0x0011f000: 4);
 *       0x19 CBANK_PARAM_SIZE, format 0x03: the parameter block's size;
 *       0x05 MAX_THREADS and 0x10 REQNTID, 12 bytes: three u32, the
 *            PTX's .maxntid and .reqntid.
 *     A kernel without parameters has no KPARAM_INFO and no
 *     CBANK_PARAM_SIZE. No record gives a parameter's alignment or type.
 *   Argument descriptions: OBJECT symbols __aql_md_<kernel>, the PTX's
 *     .const arrays (ptxas places them in .nv.constant3); st_value and
 *     st_size give their bytes within their section.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elf.h>

#include "util/error.h"
#include "loader/loader_impl.h"
#include "loader/nv_impl.h"

#define EF_CUDA_64BIT_ADDRESS 0x400u
#define STO_CUDA_ENTRY 0x10u
#define EIFMT_NVAL 0x01u
#define EIFMT_HVAL 0x03u
#define EIFMT_SVAL 0x04u
#define EIATTR_MAX_THREADS 0x05u
#define EIATTR_REQNTID 0x10u
#define EIATTR_KPARAM_INFO 0x17u
#define EIATTR_CBANK_PARAM_SIZE 0x19u
#define MD_PREFIX "__aql_md_"
#define MD_MAX_BYTES 65536u
#define SHDR_SIZE 64u
#define SYM_SIZE 24u

static uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p)
{
	return rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

struct sec {
	const char *name;
	uint32_t type, info;
	uint64_t offset, size;
};

struct cubin {
	const uint8_t *image;
	size_t size;
	const uint8_t *shdrs;
	uint32_t shnum;
	const char *shstr;
	uint64_t shstr_size;
};

/* [offset, offset + size) within the image. */
static int in_image(const struct cubin *c, uint64_t offset, uint64_t size)
{
	return offset <= c->size && size <= c->size - offset;
}

/* A terminated string at at within [base, base + size), or NULL. */
static const char *string_at(const char *base, uint64_t size, uint64_t at)
{
	if (at >= size || !memchr(base + at, 0, size - at))
		return NULL;
	return base + at;
}

/* Section i, its name checked and, unless SHT_NOBITS, its bytes in the image. */
static aql_status section(const struct cubin *c, uint32_t i, struct sec *out)
{
	const uint8_t *h = c->shdrs + (size_t)i * SHDR_SIZE;

	out->type = rd32(h + 4);
	out->offset = rd64(h + 24);
	out->size = rd64(h + 32);
	out->info = rd32(h + 44);
	out->name = c->shstr ? string_at(c->shstr, c->shstr_size, rd32(h)) : "";
	if (!out->name)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: section %u: its name lies outside the section name table", i);
	if (out->type != SHT_NOBITS && !in_image(c, out->offset, out->size))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: section %u (%.40s): %llu bytes at offset %llu lie outside the %zu-byte file",
				i, out->name, (unsigned long long)out->size,
				(unsigned long long)out->offset, c->size);
	return AQL_OK;
}

aql_status aql_cubin_sm(const uint8_t *image, size_t size, uint32_t *sm)
{
	uint32_t flags;

	if (size < sizeof(Elf64_Ehdr) || memcmp(image, ELFMAG, SELFMAG) != 0)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "cubin: shorter than an ELF header");
	if (image[EI_CLASS] != ELFCLASS64)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"cubin: a 32-bit ELF file; the CUDA agent runs 64-bit code");
	if (image[EI_DATA] != ELFDATA2LSB || rd16(image + 18) != EM_CUDA)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: not a little-endian EM_CUDA ELF file");
	flags = rd32(image + 48);
	switch (image[EI_ABIVERSION]) {
	case 7:
		if (!(flags & EF_CUDA_64BIT_ADDRESS))
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"cubin: 32-bit addressing (e_flags %#x); the CUDA agent runs 64-bit code",
					flags);
		*sm = flags & 0xff;
		break;
	case 8:
		*sm = flags >> 8 & 0xff;
		break;
	default:
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"cubin: CUDA ELF ABI version %u; this loader reads versions 7 and 8",
				image[EI_ABIVERSION]);
	}
	if (*sm < 10)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "cubin: e_flags %#x name no SM", flags);
	return AQL_OK;
}

/* What one kernel's .nv.info section says. */
struct kparam {
	uint32_t offset, size;
	int seen;
};

struct kern {
	const char *name;
	size_t name_len;
	uint32_t sym;
	uint32_t info_sec;		/* its .nv.info.<name> */
	uint32_t nparams;
	struct kparam *params;
	uint32_t block;			/* CBANK_PARAM_SIZE */
	uint32_t maxntid[3], reqntid[3];
};

/* Parse the records of k's .nv.info section s. */
static aql_status read_info(const struct cubin *c, const struct sec *s, struct kern *k)
{
	const uint8_t *p = c->image + s->offset, *end = p + s->size;
	uint32_t cap = (uint32_t)(s->size / 16), block = 0, last = 0;
	int has_block = 0;

#define BAD(...) aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "cubin: kernel '%.*s': " __VA_ARGS__)
#define NAME (int)(k->name_len > 64 ? 64 : k->name_len), k->name
	k->params = calloc(cap ? cap : 1, sizeof(*k->params));
	if (!k->params)
		return aql_fail(AQL_ERR_NOMEM, "cubin: parameters of a kernel");
	while (p < end) {
		uint32_t at = (uint32_t)(p - (c->image + s->offset)), fmt, attr, len;
		const uint8_t *v;

		if (end - p < 4)
			return BAD("%s: a record at offset %u is cut short", NAME, s->name, at);
		fmt = p[0];
		attr = p[1];
		if (fmt == EIFMT_SVAL) {
			len = rd16(p + 2);
			if ((size_t)(end - p - 4) < len)
				return BAD("%s: the record at offset %u (attribute %#x) has %u bytes past the section's end",
					   NAME, s->name, at, attr, len - (uint32_t)(end - p - 4));
			v = p + 4;
			p += 4 + len;
		} else if (fmt >= EIFMT_NVAL && fmt <= EIFMT_HVAL) {
			len = 2;
			v = p + 2;
			p += 4;
		} else {
			return BAD("%s: the record at offset %u has unknown format %#x", NAME, s->name,
				   at, fmt);
		}
		switch (attr) {
		case EIATTR_KPARAM_INFO: {
			uint32_t ord, off, size;

			if (fmt != EIFMT_SVAL || len != 12)
				return BAD("%s: KPARAM_INFO at offset %u is %u bytes, not 12", NAME,
					   s->name, at, len);
			ord = rd16(v + 4);
			off = rd16(v + 6);
			size = rd32(v + 8) >> 18;
			if (k->nparams == cap || ord >= cap)
				return BAD("%s: parameter ordinal %u is beyond the %u parameters the section has room for",
					   NAME, s->name, ord, cap);
			if (k->params[ord].seen)
				return BAD("%s: two KPARAM_INFO records for parameter %u", NAME,
					   s->name, ord);
			if (!size)
				return BAD("%s: parameter %u has size 0", NAME, s->name, ord);
			k->params[ord] = (struct kparam){ off, size, 1 };
			k->nparams++;
			if (ord + 1 > last)
				last = ord + 1;
			break;
		}
		case EIATTR_CBANK_PARAM_SIZE:
			if (fmt != EIFMT_HVAL)
				return BAD("%s: CBANK_PARAM_SIZE at offset %u has format %#x, not 0x03",
					   NAME, s->name, at, fmt);
			block = rd16(v);
			has_block = 1;
			break;
		case EIATTR_MAX_THREADS:
		case EIATTR_REQNTID:
			if (fmt != EIFMT_SVAL || len != 12)
				return BAD("%s: %s at offset %u is %u bytes, not 12", NAME, s->name,
					   attr == EIATTR_REQNTID ? "REQNTID" : "MAX_THREADS", at, len);
			for (int d = 0; d < 3; d++)
				(attr == EIATTR_REQNTID ? k->reqntid : k->maxntid)[d] = rd32(v + 4 * d);
			break;
		default:
			break;
		}
	}
	if (last != k->nparams)
		return BAD("%s: %u KPARAM_INFO records, but ordinals up to %u", NAME, s->name,
			   k->nparams, last - 1);
	for (uint32_t i = 1; i < k->nparams; i++) {
		const struct kparam *a = &k->params[i - 1], *b = &k->params[i];

		if (b->offset < a->offset + a->size)
			return BAD("%s: parameter %u at offset %u overlaps parameter %u (%u bytes at %u)",
				   NAME, s->name, i, b->offset, i - 1, a->size, a->offset);
	}
	if (k->nparams) {
		const struct kparam *l = &k->params[k->nparams - 1];

		if (!has_block)
			return BAD("%s: no CBANK_PARAM_SIZE record for its %u parameters", NAME,
				   s->name, k->nparams);
		if (block < l->offset + l->size)
			return BAD("%s: CBANK_PARAM_SIZE %u, but parameter %u ends at %u", NAME,
				   s->name, block, k->nparams - 1, l->offset + l->size);
	}
	k->block = block;
#undef NAME
#undef BAD
	return AQL_OK;
}

/* The cubin's ELF header, section table and section names. */
static aql_status read_sections(struct cubin *c, uint32_t *sm)
{
	const uint8_t *eh = c->image;
	uint64_t shoff;
	uint32_t shstrndx;
	struct sec s;
	aql_status st;

	if ((st = aql_cubin_sm(c->image, c->size, sm)) != AQL_OK)
		return st;
	shoff = rd64(eh + 40);
	c->shnum = rd16(eh + 60);
	shstrndx = rd16(eh + 62);
	if (rd16(eh + 58) != SHDR_SIZE || c->shnum == 0 || shstrndx >= c->shnum)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: section headers of %u bytes, %u of them, names in section %u",
				rd16(eh + 58), c->shnum, shstrndx);
	if (!in_image(c, shoff, (uint64_t)c->shnum * SHDR_SIZE))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: %u section headers at offset %llu lie outside the %zu-byte file",
				c->shnum, (unsigned long long)shoff, c->size);
	/* Not read here, but the driver loads by them: they must be there. */
	if (rd16(eh + 56) && (rd16(eh + 54) != 56 ||
			      !in_image(c, rd64(eh + 32), (uint64_t)rd16(eh + 56) * 56)))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: %u program headers of %u bytes at offset %llu lie outside the %zu-byte file",
				rd16(eh + 56), rd16(eh + 54), (unsigned long long)rd64(eh + 32),
				c->size);
	c->shdrs = c->image + shoff;
	if ((st = section(c, shstrndx, &s)) != AQL_OK)
		return st;
	if (s.type != SHT_STRTAB)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"cubin: section %u holds no section names", shstrndx);
	c->shstr = (const char *)c->image + s.offset;
	c->shstr_size = s.size;
	return AQL_OK;
}

/* Whether name is prefix followed by [rest, rest + len). */
static int name_is(const char *name, const char *prefix, const char *rest, size_t len)
{
	size_t n = strlen(prefix);

	return strncmp(name, prefix, n) == 0 && strlen(name + n) == len &&
	       memcmp(name + n, rest, len) == 0;
}

static void kerns_free(struct kern *ks, uint32_t n)
{
	for (uint32_t i = 0; ks && i < n; i++)
		free(ks[i].params);
	free(ks);
}

/* The module: entries, parameters and every string in one allocation. */
static aql_status build(const struct kern *ks, uint32_t n, aql_ptx_module **out)
{
	size_t total = sizeof(aql_ptx_module) + n * sizeof(aql_ptx_entry), pcount = 0;
	aql_ptx_module *m;
	aql_ptx_entry *e;
	aql_ptx_param *p;
	char *str;

	for (uint32_t i = 0; i < n; i++) {
		pcount += ks[i].nparams;
		total += ks[i].name_len + 1 + ks[i].nparams * (ks[i].name_len + 18);
	}
	total += pcount * sizeof(aql_ptx_param);
	m = calloc(1, total);
	if (!m)
		return aql_fail(AQL_ERR_NOMEM, "cubin: %u kernels", n);
	e = (aql_ptx_entry *)(m + 1);
	p = (aql_ptx_param *)(e + n);
	str = (char *)(p + pcount);
	m->address_size = 64;
	m->entry_count = n;
	m->entries = e;
	for (uint32_t i = 0; i < n; i++, e++) {
		const struct kern *k = &ks[i];

		e->name = memcpy(str, k->name, k->name_len);
		str += k->name_len + 1;
		e->linkage = AQL_PTX_LINKAGE_VISIBLE;
		e->line = k->sym;
		e->param_count = k->nparams;
		e->params = p;
		e->param_size = k->block;
		e->param_align = 1;
		memcpy(e->maxntid, k->maxntid, sizeof(e->maxntid));
		memcpy(e->reqntid, k->reqntid, sizeof(e->reqntid));
		for (uint32_t j = 0; j < k->nparams; j++, p++) {
			int len = sprintf(str, "%s_param_%u", e->name, j);

			p->name = str;
			str += len + 1;
			p->type = "";
			p->offset = k->params[j].offset;
			p->size = k->params[j].size;
			p->count = 1;
			p->line = k->sym;
		}
	}
	*out = m;
	return AQL_OK;
}

aql_status aql_cubin_read(const uint8_t *image, size_t size, uint32_t *sm,
			  aql_ptx_module **out, struct aql_nv_descs *descs)
{
	struct cubin c = { image, size, NULL, 0, NULL, 0 };
	uint32_t *info_of = NULL, nk = 0, nsyms, symtab = 0;
	struct kern *ks = NULL;
	const uint8_t *syms;
	const char *str;
	uint64_t str_size;
	struct sec s, t;
	aql_status st;

	*out = NULL;
	if ((st = read_sections(&c, sm)) != AQL_OK)
		return st;
	/* Each kernel's .nv.info section, by the .text section in its sh_info. */
	info_of = calloc(c.shnum, sizeof(*info_of));
	if (!info_of)
		return aql_fail(AQL_ERR_NOMEM, "cubin: %u sections", c.shnum);
	for (uint32_t i = 1; i < c.shnum; i++) {
		if ((st = section(&c, i, &s)) != AQL_OK)
			goto out;
		if (s.type == SHT_SYMTAB && !symtab)
			symtab = i;
		if (strncmp(s.name, ".nv.info.", 9) != 0)
			continue;
		if (s.info == 0 || s.info >= c.shnum || info_of[s.info]) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "cubin: section %u (%.64s) belongs to section %u, which is not a kernel's or has another",
				      i, s.name, s.info);
			goto out;
		}
		info_of[s.info] = i;
	}
	if (!symtab) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "cubin: no symbol table");
		goto out;
	}
	section(&c, symtab, &s);
	if (s.size % SYM_SIZE || s.size / SYM_SIZE > UINT32_MAX) {
		st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			      "cubin: a symbol table of %llu bytes", (unsigned long long)s.size);
		goto out;
	}
	syms = image + s.offset;
	nsyms = (uint32_t)(s.size / SYM_SIZE);
	{
		uint32_t link = rd32(c.shdrs + (size_t)symtab * SHDR_SIZE + 40);

		if (link == 0 || link >= c.shnum || (st = section(&c, link, &t)) != AQL_OK ||
		    t.type != SHT_STRTAB) {
			if (st == AQL_OK)
				st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					      "cubin: the symbol table's names are not in a string table (section %u)",
					      link);
			goto out;
		}
	}
	str = (const char *)image + t.offset;
	str_size = t.size;
	ks = calloc(nsyms ? nsyms : 1, sizeof(*ks));
	if (!ks) {
		st = aql_fail(AQL_ERR_NOMEM, "cubin: %u symbols", nsyms);
		goto out;
	}
	for (uint32_t i = 1; i < nsyms; i++) {
		const uint8_t *sym = syms + (size_t)i * SYM_SIZE;
		const char *name = string_at(str, str_size, rd32(sym));
		uint32_t type = sym[4] & 0xf, shndx = rd16(sym + 6);
		uint64_t value = rd64(sym + 8), bytes = rd64(sym + 16);
		size_t len;

		if (!name) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "cubin: symbol %u: its name lies outside the string table", i);
			goto out;
		}
		len = strlen(name);
		if (type == STT_FUNC && (sym[5] & STO_CUDA_ENTRY)) {
			struct kern *k = &ks[nk];

			if (len == 0 || len > AQL_LOADER_MAX_NAME) {
				st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					      "cubin: kernel symbol %u has a name of %zu bytes (1 to %u)",
					      i, len, AQL_LOADER_MAX_NAME);
				goto out;
			}
			if (shndx == 0 || shndx >= c.shnum || (st = section(&c, shndx, &t)) != AQL_OK ||
			    !name_is(t.name, ".text.", name, len)) {
				if (st == AQL_OK)
					st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						      "cubin: kernel symbol %u (%.64s) is not defined in its own .text section",
						      i, name);
				goto out;
			}
			if (!info_of[shndx] || (st = section(&c, info_of[shndx], &t)) != AQL_OK ||
			    t.type == SHT_NOBITS || !name_is(t.name, ".nv.info.", name, len)) {
				if (st == AQL_OK)
					st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						      "cubin: kernel '%.64s' has no .nv.info.%.64s section",
						      name, name);
				goto out;
			}
			*k = (struct kern){ .name = name, .name_len = len, .sym = i,
					    .info_sec = info_of[shndx] };
			nk++;
			if ((st = read_info(&c, &t, k)) != AQL_OK)
				goto out;
		} else if (type == STT_OBJECT && descs && len > strlen(MD_PREFIX) &&
			   strncmp(name, MD_PREFIX, strlen(MD_PREFIX)) == 0) {
			struct aql_nv_desc *d;

			if (shndx == 0 || shndx >= c.shnum || (st = section(&c, shndx, &t)) != AQL_OK ||
			    t.type == SHT_NOBITS || bytes == 0 || bytes > MD_MAX_BYTES ||
			    value > t.size || bytes > t.size - value) {
				if (st == AQL_OK)
					st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
						      "cubin symbol %u: description %.64s: %llu bytes at %llu are not within a section's bytes (at most 65536)",
						      i, name, (unsigned long long)bytes,
						      (unsigned long long)value);
				goto out;
			}
			st = aql_nv_descs_add(descs, name + strlen(MD_PREFIX), len - strlen(MD_PREFIX),
					      i, image + t.offset + value, (uint32_t)bytes, &d);
			if (st != AQL_OK)
				goto out;
		}
	}
	st = build(ks, nk, out);
out:
	kerns_free(ks, nk);
	free(info_of);
	return st;
}
