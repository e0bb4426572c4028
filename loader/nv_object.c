/* SPDX-License-Identifier: MIT */
/*
 * NVIDIA code objects for the CUDA agent. What is accepted:
 *
 *   PTX text: after blanks and comments, the first directive is .version
 *     (the PTX ISA requires it first). Its kernels are the .entry
 *     definitions (nv/ptx.c). A kernel built from include/aql/kernel.h
 *     carries the constant array __aql_md_<kernel>, which gives the
 *     arguments' names, types and const-ness as the host build records
 *     them; the layout (offsets, sizes) is the .param list's, checked
 *     against it. A kernel without one (hand-written PTX, nvcc's) is
 *     described from the .param list alone: names as given (clang's
 *     "<kernel>_param_N"), a .ptr parameter into global or generic memory
 *     as a global buffer of unknown element type with read_write access,
 *     anything else by value with its PTX type's C name.
 *   cubins (ELF, e_machine EM_CUDA): read as PTX entries would list them
 *     (loader/cubin.c): the parameters' offsets and sizes the cubin
 *     records, and the __aql_md_<kernel> object ptxas keeps from the PTX,
 *     decoded as in PTX, so a cubin from aql-kcc's PTX is described as the
 *     PTX is. A cubin records no types, names or alignment: without a
 *     description (nvcc's), arguments are by value, named
 *     "<kernel>_param_<i>", without a type name.
 *   fatbins (magic 0xBA55ED50): described from one entry (loader/fatbin.c):
 *     the first cubin aql reads, else the first PTX; kind CUBIN. The
 *     driver picks the entry it runs.
 *
 * Static LDS is not in the image here; the agent asks the driver at load.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "loader/loader_impl.h"
#include "loader/metadata_impl.h"
#include "loader/nv_impl.h"
#include <aql/ptx.h>

#define MD_PREFIX "__aql_md_"
#define MD_PREFIX_LEN (sizeof(MD_PREFIX) - 1)
#define MD_VERSION 1u
#define MD_HEAD 6u		/* "AQLM", version, argument count */
#define MD_ARG_HEAD 4u		/* flags, size (2), alignment */
#define MD_POINTER 1u		/* the AQL_NV_MD_* flags of aql/kernel.h */
#define MD_CONST 2u
#define MD_VOLATILE 4u
#define MD_MAX_BYTES 65536u
#define CUDA_MAX_WORKGROUP 1024u
#define SHOW 40

/* Bytes of a PTX word: as nv/ptx.c tokenizes. */
static int is_word_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '$' || c == '%' || c == '.';
}

/* A cursor over PTX text that ends at size bytes or the first NUL. */
struct scan {
	const char *p, *end;
	uint32_t line;
};

static int scan_end(const struct scan *s)
{
	return s->p == s->end || *s->p == 0;
}

/* Skip blanks and comments; 0 for a comment never closed. */
static int skip_space(struct scan *s)
{
	while (!scan_end(s)) {
		char c = *s->p;

		if (c == '\n') {
			s->line++;
			s->p++;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
			s->p++;
		} else if (c == '/' && s->end - s->p > 1 && s->p[1] == '/') {
			while (!scan_end(s) && *s->p != '\n')
				s->p++;
		} else if (c == '/' && s->end - s->p > 1 && s->p[1] == '*') {
			s->p += 2;
			while (!scan_end(s) && !(*s->p == '*' && s->end - s->p > 1 && s->p[1] == '/')) {
				s->line += *s->p == '\n';
				s->p++;
			}
			if (scan_end(s))
				return 0;
			s->p += 2;
		} else {
			break;
		}
	}
	return 1;
}

int aql_nv_object_detect(const uint8_t *image, size_t size)
{
	static const char version[] = ".version";
	struct scan s = { (const char *)image, (const char *)image + size, 1 };
	size_t n = sizeof(version) - 1;

	if (!image)
		return 0;
	if (size >= 4 && ((uint32_t)image[0] | (uint32_t)image[1] << 8 |
			  (uint32_t)image[2] << 16 | (uint32_t)image[3] << 24) == AQL_FATBIN_MAGIC)
		return 1;
	if (size >= sizeof(Elf64_Ehdr) && memcmp(image, ELFMAG, SELFMAG) == 0)
		return image[EI_DATA] == ELFDATA2LSB &&
		       (image[18] | image[19] << 8) == EM_CUDA;
	if (!skip_space(&s) || (size_t)(s.end - s.p) < n || memcmp(s.p, version, n) != 0)
		return 0;
	return (size_t)(s.end - s.p) == n || !is_word_char((unsigned char)s.p[n]);
}

aql_status aql_nv_descs_add(struct aql_nv_descs *ds, const char *kernel, size_t len,
			    uint32_t line, const uint8_t *bytes, uint32_t size,
			    struct aql_nv_desc **out)
{
	struct aql_nv_desc *d;

	if (ds->n == ds->cap) {
		uint32_t cap = ds->cap ? 2 * ds->cap : 8;
		void *v = realloc(ds->v, cap * sizeof(*ds->v));

		if (!v)
			return aql_fail(AQL_ERR_NOMEM, "%u descriptions", cap);
		ds->v = v;
		ds->cap = cap;
	}
	d = &ds->v[ds->n];
	*d = (struct aql_nv_desc){ kernel, len, line, NULL, 0, 0 };
	if (bytes) {
		d->bytes = malloc(size);
		if (!d->bytes)
			return aql_fail(AQL_ERR_NOMEM, "description of %u bytes", size);
		memcpy(d->bytes, bytes, size);
		d->size = size;
	}
	ds->n++;
	*out = d;
	return AQL_OK;
}

void aql_nv_descs_free(struct aql_nv_descs *ds)
{
	for (uint32_t i = 0; i < ds->n; i++)
		free(ds->v[i].bytes);
	free(ds->v);
}

/* The next punctuation byte after blanks, or 0 at the end. */
static char peek_punct(struct scan *s)
{
	if (!skip_space(s) || scan_end(s))
		return 0;
	return *s->p;
}

/* A decimal number of at most max after blanks; -1 if none. */
static long long scan_number(struct scan *s, uint32_t max)
{
	unsigned long long v = 0;
	const char *start;

	if (!skip_space(s))
		return -1;
	start = s->p;
	while (!scan_end(s) && *s->p >= '0' && *s->p <= '9') {
		v = v * 10 + (unsigned)(*s->p - '0');
		s->p++;
		if (v > max)
			return -1;
	}
	if (s->p == start || (!scan_end(s) && is_word_char((unsigned char)*s->p)))
		return -1;
	return (long long)v;
}

/* "[N] = {b, ...}" after the name of a description, into d. */
static aql_status read_desc(struct scan *s, struct aql_nv_desc *d)
{
	const int name_len = d->kernel_len > SHOW ? SHOW : (int)d->kernel_len;
	long long n, b;

#define BAD(what) aql_fail(AQL_ERR_INVALID_CODE_OBJECT,                         \
			   "PTX line %u: description " MD_PREFIX "%.*s: %s", s->line, \
			   name_len, d->kernel, what)
	s->p++;		/* '[' */
	n = scan_number(s, MD_MAX_BYTES);
	if (n <= 0)
		return BAD("needs an array size from 1 to 65536");
	if (peek_punct(s) != ']')
		return BAD("expected ']' after the array size");
	s->p++;
	if (peek_punct(s) != '=')
		return BAD("expected '=' and an initialiser");
	s->p++;
	if (peek_punct(s) != '{')
		return BAD("expected '{' to open the initialiser");
	s->p++;
	d->size = (uint32_t)n;
	d->bytes = malloc(d->size);
	if (!d->bytes)
		return aql_fail(AQL_ERR_NOMEM, "description of %u bytes", d->size);
	for (uint32_t i = 0; i < d->size; i++) {
		if (i && peek_punct(s) != ',')
			return BAD("expected ',' between its bytes");
		s->p += i != 0;
		b = scan_number(s, 255);
		if (b < 0)
			return BAD("has a byte that is not a number from 0 to 255");
		d->bytes[i] = (uint8_t)b;
	}
	if (peek_punct(s) != '}')
		return BAD("has more bytes than its array size, or no closing '}'");
	s->p++;
#undef BAD
	return AQL_OK;
}

/*
 * Find every "__aql_md_<kernel>[" outside comments and strings: the
 * definitions. A use in an instruction is followed by something else.
 */
static aql_status find_descs(const uint8_t *image, size_t size, struct aql_nv_descs *out)
{
	struct scan s = { (const char *)image, (const char *)image + size, 1 };
	aql_status st;

	while (skip_space(&s) && !scan_end(&s)) {
		const char *w = s.p;
		size_t len;
		struct aql_nv_desc *d;

		if (*s.p == '"') {
			s.p++;
			while (!scan_end(&s) && *s.p != '"' && *s.p != '\n')
				s.p += 1 + (*s.p == '\\' && s.end - s.p > 1 && s.p[1] != '\n');
			s.p += !scan_end(&s) && *s.p == '"';
			continue;
		}
		if (!is_word_char((unsigned char)*s.p)) {
			s.p++;
			continue;
		}
		while (!scan_end(&s) && is_word_char((unsigned char)*s.p))
			s.p++;
		len = (size_t)(s.p - w);
		if (len <= MD_PREFIX_LEN || memcmp(w, MD_PREFIX, MD_PREFIX_LEN) != 0 ||
		    peek_punct(&s) != '[')
			continue;
		st = aql_nv_descs_add(out, w + MD_PREFIX_LEN, len - MD_PREFIX_LEN, s.line, NULL, 0,
				      &d);
		if (st != AQL_OK || (st = read_desc(&s, d)) != AQL_OK)
			return st;
	}
	if (!scan_end(&s))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "PTX line %u: comment never closed",
				s.line);
	return AQL_OK;
}

/* Where kernels and descriptions come from, for messages. */
struct source {
	const char *what;		/* "PTX", "cubin" */
	const char *unit;		/* what a desc's line counts: "line", "symbol" */
	int cubin;			/* parameters have no type or alignment */
};

/* The description of entry e, or NULL; a second one is an error. */
static aql_status desc_of(const struct source *src, struct aql_nv_descs *ds,
			  const aql_ptx_entry *e, struct aql_nv_desc **out)
{
	size_t len = strlen(e->name);

	*out = NULL;
	for (uint32_t i = 0; i < ds->n; i++) {
		struct aql_nv_desc *d = &ds->v[i];

		if (d->kernel_len != len || memcmp(d->kernel, e->name, len) != 0)
			continue;
		if (*out)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"%s %s %u: entry '%s' is described twice (%ss %u and %u)",
					src->what, src->unit, d->line, e->name, src->unit,
					(*out)->line, d->line);
		d->used = 1;
		*out = d;
	}
	return AQL_OK;
}

/*
 * The type as the host build spells it: the OpenCL address space keyword
 * aql_global becomes on the GPU is dropped, with the blank after it.
 */
static void host_type_name(const char *in, char *out)
{
	static const char *const spaces[] = { "__global", "__constant", "__local",
					      "__private", "__generic" };
	const char *start = out;

	while (*in) {
		size_t k, n = 0;

		for (k = 0; k < sizeof(spaces) / sizeof(spaces[0]); k++) {
			n = strlen(spaces[k]);
			if (strncmp(in, spaces[k], n) == 0 && !is_word_char((unsigned char)in[n]) &&
			    (out == start || !is_word_char((unsigned char)out[-1])))
				break;
		}
		if (k == sizeof(spaces) / sizeof(spaces[0])) {
			*out++ = *in++;
			continue;
		}
		in += n;
		in += *in == ' ';
	}
	*out = 0;
}

/* A NUL-terminated printable string at *at in d; advances *at past it. */
static const char *desc_string(const struct aql_nv_desc *d, uint32_t *at)
{
	const char *s = (const char *)d->bytes + *at;
	uint32_t i = *at;

	while (i < d->size && d->bytes[i] >= 0x20 && d->bytes[i] < 0x7f)
		i++;
	if (i == *at || i == d->size || d->bytes[i] != 0)
		return NULL;
	*at = i + 1;
	return s;
}

/*
 * Arguments of e from its description d. Type names are rewritten into
 * types (one buffer as large as d, kept by the caller). *align gets the
 * largest argument alignment.
 */
static aql_status decode_desc(const struct source *src, const aql_ptx_entry *e,
			      const struct aql_nv_desc *d, aql_kernel_arg *args, char *types,
			      uint32_t *max_align)
{
	const uint8_t *b = d->bytes;
	uint32_t at = MD_HEAD;

#define BAD(fmt, ...) aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "%s %s %u: description of '%s': " \
			       fmt, src->what, src->unit, d->line, e->name, __VA_ARGS__)
	if (d->size < MD_HEAD || memcmp(b, "AQLM", 4) != 0)
		return BAD("%s", "does not start with \"AQLM\"");
	if (b[4] != MD_VERSION)
		return BAD("version %u, this loader reads version %u", b[4], MD_VERSION);
	if (b[5] != e->param_count)
		return BAD("%u arguments, the entry has %u parameters", b[5], e->param_count);
	*max_align = 1;
	for (uint32_t i = 0; i < e->param_count; i++) {
		const aql_ptx_param *p = &e->params[i];
		aql_kernel_arg *a = &args[i];
		uint32_t flags, size, align;
		const char *type, *name;

		if (d->size - at < MD_ARG_HEAD)
			return BAD("argument %u lies past its end", i);
		flags = b[at];
		size = b[at + 1] | (uint32_t)b[at + 2] << 8;
		align = b[at + 3];
		at += MD_ARG_HEAD;
		if ((type = desc_string(d, &at)) == NULL || (name = desc_string(d, &at)) == NULL)
			return BAD("argument %u: its type or name is not a printable, terminated string",
				   i);
		if ((flags & ~(MD_POINTER | MD_CONST | MD_VOLATILE)) ||
		    (!(flags & MD_POINTER) && flags))
			return BAD("argument %u '%s': flags %#x", i, name, flags);
		if (!src->cubin && (size != p->size || align != p->align))
			return BAD("argument %u '%s' (%s) is %u bytes aligned to %u, its .param %s is %u aligned to %u",
				   i, name, type, size, align, p->name, p->size, p->align);
		/* A cubin records no alignment: the offset must agree with it. */
		if (src->cubin && (size != p->size || !align || (align & (align - 1)) ||
				   p->offset % align))
			return BAD("argument %u '%s' (%s) is %u bytes aligned to %u, the cubin records %u bytes at offset %u",
				   i, name, type, size, align, p->size, p->offset);
		if ((flags & MD_POINTER) && size != 8)
			return BAD("argument %u '%s' is a %u-byte pointer", i, name, size);
		host_type_name(type, types);
		a->name = name;
		a->type_name = types;
		types += strlen(types) + 1;
		a->offset = p->offset;
		a->size = p->size;
		a->kind = flags & MD_POINTER ? AQL_ARG_GLOBAL_BUFFER : AQL_ARG_BY_VALUE;
		a->address_space = flags & MD_POINTER ? AQL_AS_GLOBAL : AQL_AS_NONE;
		a->flags = (flags & MD_CONST ? AQL_ARG_IS_CONST : 0) |
			   (flags & MD_VOLATILE ? AQL_ARG_IS_VOLATILE : 0);
		if (align > *max_align)
			*max_align = align;
	}
	if (at != d->size)
		return BAD("%u bytes after its last argument", d->size - at);
#undef BAD
	return AQL_OK;
}

/* The C name of a scalar PTX parameter type, or NULL. */
static const char *c_type(const char *ptx)
{
	static const char *const names[][2] = {
		{ ".u8", "uint8_t" }, { ".s8", "int8_t" }, { ".b8", "uint8_t" },
		{ ".u16", "uint16_t" }, { ".s16", "int16_t" }, { ".b16", "uint16_t" },
		{ ".u32", "uint32_t" }, { ".s32", "int32_t" }, { ".b32", "uint32_t" },
		{ ".u64", "uint64_t" }, { ".s64", "int64_t" }, { ".b64", "uint64_t" },
		{ ".f32", "float" }, { ".f64", "double" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(ptx, names[i][0]) == 0)
			return names[i][1];
	return NULL;
}

/*
 * The alignment a cubin parameter without a description is given: its
 * size's, up to 8, lowered until its offset is a multiple. The cubin does
 * not record one; this is what the C types of such sizes would have.
 */
static uint32_t guessed_align(const aql_ptx_param *p)
{
	uint32_t a = 8;

	while (a > 1 && (a / 2 >= p->size || p->offset % a))
		a /= 2;
	return a;
}

/*
 * Arguments of an entry without a description, from its .param list or
 * its cubin's records; the largest alignment into *max_align.
 */
static void plain_args(const aql_ptx_entry *e, aql_kernel_arg *args, uint32_t *max_align)
{
	*max_align = e->param_align;
	for (uint32_t i = 0; i < e->param_count; i++) {
		const aql_ptx_param *p = &e->params[i];
		aql_kernel_arg *a = &args[i];
		int buffer = p->is_pointer && p->size == 8 &&
			     (p->space == AQL_PTX_SPACE_GLOBAL || p->space == AQL_PTX_SPACE_GENERIC);

		a->name = p->name;
		a->type_name = buffer || p->count != 1 ? NULL : c_type(p->type);
		/* .s32 says signed; .u32 and .b32 are also what compilers emit for int. */
		if (a->type_name && (p->type[1] == 'u' || p->type[1] == 'b'))
			a->flags |= AQL_ARG_SIGN_UNKNOWN;
		a->offset = p->offset;
		a->size = p->size;
		a->pointee_align = buffer ? p->pointee_align : 0;
		a->kind = buffer ? AQL_ARG_GLOBAL_BUFFER : AQL_ARG_BY_VALUE;
		a->address_space = buffer ? AQL_AS_GLOBAL : AQL_AS_NONE;
		a->access = buffer ? AQL_ACCESS_READ_WRITE : AQL_ACCESS_NONE;
		if (!p->align && guessed_align(p) > *max_align)
			*max_align = guessed_align(p);
	}
}

static uint32_t workgroup_limit(const aql_ptx_entry *e)
{
	const uint32_t *dims = e->reqntid[0] ? e->reqntid : e->maxntid;
	uint64_t n = 1;

	if (!dims[0])
		return CUDA_MAX_WORKGROUP;
	for (int i = 0; i < 3; i++)
		n *= dims[i] ? dims[i] : 1;
	return n < CUDA_MAX_WORKGROUP ? (uint32_t)n : CUDA_MAX_WORKGROUP;
}

/*
 * co's metadata and kernels from the entries of m (PTX, or a cubin read
 * as PTX would be) and the descriptions ds found beside them.
 */
static aql_status describe_entries(struct aql_code_object *co, const struct source *src,
				   const aql_ptx_module *m, struct aql_nv_descs *ds)
{
	aql_kernel_metadata *mds = NULL;
	aql_kernel_arg **args = NULL;
	char **types = NULL;
	uint32_t n = m->entry_count;
	aql_status st;

	mds = calloc(n + 1, sizeof(*mds));
	args = calloc(n + 1, sizeof(*args));
	types = calloc(n + 1, sizeof(*types));
	co->kernels = calloc(n + 1, sizeof(*co->kernels));
	if (!mds || !args || !types || !co->kernels) {
		st = aql_fail(AQL_ERR_NOMEM, "%u %s kernels", n, src->what);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		const aql_ptx_entry *e = &m->entries[i];
		aql_kernel_metadata *md = &mds[i];
		struct aql_nv_desc *d;
		uint32_t align = 1;

		args[i] = calloc(e->param_count + 1, sizeof(**args));
		if (!args[i]) {
			st = aql_fail(AQL_ERR_NOMEM, "kernel %s: %u arguments", e->name,
				      e->param_count);
			goto out;
		}
		if ((st = desc_of(src, ds, e, &d)) != AQL_OK)
			goto out;
		if (d) {
			types[i] = malloc(d->size);
			if (!types[i]) {
				st = aql_fail(AQL_ERR_NOMEM, "kernel %s: description", e->name);
				goto out;
			}
			st = decode_desc(src, e, d, args[i], types[i], &align);
			if (st != AQL_OK)
				goto out;
		} else {
			plain_args(e, args[i], &align);
		}
		md->name = e->name;
		md->symbol = e->name;
		md->language = src->cubin ? "cubin" : "PTX";
		md->language_version[0] = m->version[0];
		md->language_version[1] = m->version[1];
		md->kernarg_segment_size = e->param_size;
		md->kernarg_segment_align = src->cubin ? align : e->param_align;
		md->max_flat_workgroup_size = workgroup_limit(e);
		md->wavefront_size = 32;
		memcpy(md->reqd_workgroup_size, e->reqntid, sizeof(e->reqntid));
		md->uses_dynamic_stack = -1;
		md->workgroup_processor_mode = -1;
		md->uniform_work_group_size = -1;
		md->arg_count = e->param_count;
		md->args = args[i];
	}
	for (uint32_t i = 0; i < ds->n; i++)
		if (!ds->v[i].used) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "%s %s %u: description " MD_PREFIX "%.*s names no %s",
				      src->what, src->unit, ds->v[i].line,
				      ds->v[i].kernel_len > SHOW ? SHOW : (int)ds->v[i].kernel_len,
				      ds->v[i].kernel, src->cubin ? "kernel" : ".entry");
			goto out;
		}
	if ((st = aql_metadata_build(mds, n, &co->metadata)) != AQL_OK)
		goto out;
	aql_co_kernels_from_metadata(co);
out:
	for (uint32_t i = 0; args && types && i <= n; i++) {
		free(args[i]);
		free(types[i]);
	}
	free(mds);
	free(args);
	free(types);
	return st;
}

static aql_status describe_ptx(struct aql_code_object *co, const uint8_t *image, size_t size)
{
	static const struct source src = { "PTX", "line", 0 };
	aql_ptx_module *m = NULL;
	struct aql_nv_descs ds = { 0 };
	aql_status st;

	if ((st = aql_ptx_parse((const char *)image, size, &m)) != AQL_OK)
		return st;
	if (m->address_size == 32)
		st = aql_fail(AQL_ERR_UNSUPPORTED,
			      "PTX with .address_size 32: the CUDA agent runs 64-bit PTX");
	else if ((st = find_descs(image, size, &ds)) == AQL_OK)
		st = describe_entries(co, &src, m, &ds);
	aql_nv_descs_free(&ds);
	aql_ptx_free(m);
	return st;
}

static aql_status describe_cubin(struct aql_code_object *co, const uint8_t *image, size_t size)
{
	static const struct source src = { "cubin", "symbol", 1 };
	aql_ptx_module *m = NULL;
	struct aql_nv_descs ds = { 0 };
	uint32_t sm;
	aql_status st;

	if ((st = aql_cubin_read(image, size, &sm, &m, &ds)) == AQL_OK)
		st = describe_entries(co, &src, m, &ds);
	aql_nv_descs_free(&ds);
	aql_ptx_free(m);
	return st;
}

/*
 * A fatbin is described from one entry it holds: the first cubin aql
 * reads (uncompressed or zstd), else the first such PTX. Every entry is
 * the same device code built for another architecture.
 */
static aql_status describe_fatbin(struct aql_code_object *co)
{
	static const uint16_t order[] = { AQL_FATBIN_CUBIN, AQL_FATBIN_PTX };
	struct aql_fatbin_entry *es = malloc(AQL_FATBIN_MAX_ENTRIES * sizeof(*es));
	uint32_t count = 0, pick = UINT32_MAX;
	const uint8_t *bytes;
	uint8_t *owned = NULL;
	size_t size, used;
	aql_status st;

	if (!es)
		return aql_fail(AQL_ERR_NOMEM, "fatbin entries");
	st = aql_fatbin_entries(co->image, co->image_size, es, AQL_FATBIN_MAX_ENTRIES, &count,
				&used);
	for (int o = 0; o < 2 && pick == UINT32_MAX; o++)
		for (uint32_t i = 0; i < count && pick == UINT32_MAX; i++)
			if (es[i].kind == order[o] && es[i].compression != AQL_FATBIN_LZ4)
				pick = i;
	if (st == AQL_OK && pick == UINT32_MAX) {
		char held[256];

		aql_nv_object_summary(co->image, co->image_size, held, sizeof(held));
		st = aql_fail(AQL_ERR_UNSUPPORTED,
			      "%s: no entry aql reads: aql reads cubin and PTX entries uncompressed "
			      "or zstd-compressed, not LZ4; build it with fatbinary's default compression "
			      "or none (fatbinary --compress=false, nvcc --no-compress)",
			      held);
	}
	if (st == AQL_OK && (st = aql_fatbin_payload(&es[pick], &bytes, &size, &owned)) == AQL_OK) {
		if (es[pick].kind == AQL_FATBIN_CUBIN)
			st = describe_cubin(co, bytes, size);
		else
			st = describe_ptx(co, bytes, size);
		if (st != AQL_OK) {
			char prefix[64];

			snprintf(prefix, sizeof(prefix), "fatbin entry %u (%s for sm_%u)", pick,
				 es[pick].kind == AQL_FATBIN_CUBIN ? "cubin" : "PTX", es[pick].sm);
			aql_fail_prefix(st, prefix);
		}
	}
	free(owned);
	free(es);
	return st;
}

aql_status aql_nv_object_describe(struct aql_code_object *co)
{
	const uint8_t *b = co->image;

	co->info.machine = EM_CUDA;
	if (co->image_size >= 4 && b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba) {
		co->info.kind = AQL_CODE_OBJECT_CUBIN;
		return describe_fatbin(co);
	}
	if (co->image_size >= SELFMAG && memcmp(b, ELFMAG, SELFMAG) == 0) {
		co->info.kind = AQL_CODE_OBJECT_CUBIN;
		return describe_cubin(co, co->image, co->image_size);
	}
	co->info.kind = AQL_CODE_OBJECT_PTX;
	return describe_ptx(co, co->image, co->image_size);
}
