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
 *   cubins (ELF, e_machine EM_CUDA) and fatbins (magic 0xBA55ED50) are
 *     recognised, so that their error says what they are, and refused with
 *     AQL_ERR_UNSUPPORTED: their parameter layout (.nv.info sections) is
 *     not read; load the PTX instead.
 *
 * Static LDS is not in the text; the agent asks the driver at load.
 */
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "loader/loader_impl.h"
#include "loader/metadata_impl.h"
#include <aql/ptx.h>

#define FATBIN_MAGIC 0xba55ed50u
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
			  (uint32_t)image[2] << 16 | (uint32_t)image[3] << 24) == FATBIN_MAGIC)
		return 1;
	if (size >= sizeof(Elf64_Ehdr) && memcmp(image, ELFMAG, SELFMAG) == 0)
		return image[EI_DATA] == ELFDATA2LSB &&
		       (image[18] | image[19] << 8) == EM_CUDA;
	if (!skip_space(&s) || (size_t)(s.end - s.p) < n || memcmp(s.p, version, n) != 0)
		return 0;
	return (size_t)(s.end - s.p) == n || !is_word_char((unsigned char)s.p[n]);
}

/* One __aql_md_<kernel> definition found in the text. */
struct desc {
	const char *kernel;		/* in the text, kernel_len bytes */
	size_t kernel_len;
	uint32_t line;
	uint8_t *bytes;
	uint32_t size;
	int used;
};

struct descs {
	struct desc *v;
	uint32_t n, cap;
};

static void descs_free(struct descs *d)
{
	for (uint32_t i = 0; i < d->n; i++)
		free(d->v[i].bytes);
	free(d->v);
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
static aql_status read_desc(struct scan *s, struct desc *d)
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
static aql_status find_descs(const uint8_t *image, size_t size, struct descs *out)
{
	struct scan s = { (const char *)image, (const char *)image + size, 1 };
	aql_status st;

	while (skip_space(&s) && !scan_end(&s)) {
		const char *w = s.p;
		size_t len;
		struct desc *d;

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
		if (out->n == out->cap) {
			uint32_t cap = out->cap ? 2 * out->cap : 8;
			void *v = realloc(out->v, cap * sizeof(*out->v));

			if (!v)
				return aql_fail(AQL_ERR_NOMEM, "%u descriptions", cap);
			out->v = v;
			out->cap = cap;
		}
		d = &out->v[out->n++];
		*d = (struct desc){ w + MD_PREFIX_LEN, len - MD_PREFIX_LEN, s.line, NULL, 0, 0 };
		if ((st = read_desc(&s, d)) != AQL_OK)
			return st;
	}
	if (!scan_end(&s))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "PTX line %u: comment never closed",
				s.line);
	return AQL_OK;
}

/* The description of entry e, or NULL; a second one is an error. */
static aql_status desc_of(struct descs *ds, const aql_ptx_entry *e, struct desc **out)
{
	size_t len = strlen(e->name);

	*out = NULL;
	for (uint32_t i = 0; i < ds->n; i++) {
		struct desc *d = &ds->v[i];

		if (d->kernel_len != len || memcmp(d->kernel, e->name, len) != 0)
			continue;
		if (*out)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"PTX line %u: entry '%s' is described twice (lines %u and %u)",
					d->line, e->name, (*out)->line, d->line);
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
static const char *desc_string(const struct desc *d, uint32_t *at)
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
 * types (one buffer as large as d, kept by the caller).
 */
static aql_status decode_desc(const aql_ptx_entry *e, const struct desc *d,
			      aql_kernel_arg *args, char *types)
{
	const uint8_t *b = d->bytes;
	uint32_t at = MD_HEAD;

#define BAD(...) aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "PTX line %u: description of '%s': " \
			  __VA_ARGS__)
	if (d->size < MD_HEAD || memcmp(b, "AQLM", 4) != 0)
		return BAD("does not start with \"AQLM\"", d->line, e->name);
	if (b[4] != MD_VERSION)
		return BAD("version %u, this loader reads version %u", d->line, e->name, b[4],
			   MD_VERSION);
	if (b[5] != e->param_count)
		return BAD("%u arguments, the entry has %u parameters", d->line, e->name, b[5],
			   e->param_count);
	for (uint32_t i = 0; i < e->param_count; i++) {
		const aql_ptx_param *p = &e->params[i];
		aql_kernel_arg *a = &args[i];
		uint32_t flags, size, align;
		const char *type, *name;

		if (d->size - at < MD_ARG_HEAD)
			return BAD("argument %u lies past its end", d->line, e->name, i);
		flags = b[at];
		size = b[at + 1] | (uint32_t)b[at + 2] << 8;
		align = b[at + 3];
		at += MD_ARG_HEAD;
		if ((type = desc_string(d, &at)) == NULL || (name = desc_string(d, &at)) == NULL)
			return BAD("argument %u: its type or name is not a printable, terminated string",
				   d->line, e->name, i);
		if ((flags & ~(MD_POINTER | MD_CONST | MD_VOLATILE)) ||
		    (!(flags & MD_POINTER) && flags))
			return BAD("argument %u '%s': flags %#x", d->line, e->name, i, name, flags);
		if (size != p->size || align != p->align)
			return BAD("argument %u '%s' (%s) is %u bytes aligned to %u, its .param %s is %u aligned to %u",
				   d->line, e->name, i, name, type, size, align, p->name, p->size,
				   p->align);
		if ((flags & MD_POINTER) && size != 8)
			return BAD("argument %u '%s' is a %u-byte pointer", d->line, e->name, i,
				   name, size);
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
	}
	if (at != d->size)
		return BAD("%u bytes after its last argument", d->line, e->name, d->size - at);
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

/* Arguments of an entry without a description, from its .param list. */
static void plain_args(const aql_ptx_entry *e, aql_kernel_arg *args)
{
	for (uint32_t i = 0; i < e->param_count; i++) {
		const aql_ptx_param *p = &e->params[i];
		aql_kernel_arg *a = &args[i];
		int buffer = p->is_pointer && p->size == 8 &&
			     (p->space == AQL_PTX_SPACE_GLOBAL || p->space == AQL_PTX_SPACE_GENERIC);

		a->name = p->name;
		a->type_name = buffer || p->count != 1 ? NULL : c_type(p->type);
		a->offset = p->offset;
		a->size = p->size;
		a->pointee_align = buffer ? p->pointee_align : 0;
		a->kind = buffer ? AQL_ARG_GLOBAL_BUFFER : AQL_ARG_BY_VALUE;
		a->address_space = buffer ? AQL_AS_GLOBAL : AQL_AS_NONE;
		a->access = buffer ? AQL_ACCESS_READ_WRITE : AQL_ACCESS_NONE;
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

static aql_status describe_ptx(struct aql_code_object *co)
{
	aql_ptx_module *m = NULL;
	struct descs ds = { 0 };
	aql_kernel_metadata *mds = NULL;
	aql_kernel_arg **args = NULL;
	char **types = NULL;
	uint32_t n = 0;
	aql_status st;

	co->info.kind = AQL_CODE_OBJECT_PTX;
	co->info.machine = EM_CUDA;
	if ((st = aql_ptx_parse((const char *)co->image, co->image_size, &m)) != AQL_OK)
		return st;
	if (m->address_size == 32) {
		st = aql_fail(AQL_ERR_UNSUPPORTED,
			      "PTX with .address_size 32: the CUDA agent runs 64-bit PTX");
		goto out;
	}
	if ((st = find_descs(co->image, co->image_size, &ds)) != AQL_OK)
		goto out;
	n = m->entry_count;
	mds = calloc(n + 1, sizeof(*mds));
	args = calloc(n + 1, sizeof(*args));
	types = calloc(n + 1, sizeof(*types));
	co->kernels = calloc(n + 1, sizeof(*co->kernels));
	if (!mds || !args || !types || !co->kernels) {
		st = aql_fail(AQL_ERR_NOMEM, "%u PTX kernels", n);
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		const aql_ptx_entry *e = &m->entries[i];
		aql_kernel_metadata *md = &mds[i];
		struct desc *d;

		args[i] = calloc(e->param_count + 1, sizeof(**args));
		if (!args[i]) {
			st = aql_fail(AQL_ERR_NOMEM, "kernel %s: %u arguments", e->name,
				      e->param_count);
			goto out;
		}
		if ((st = desc_of(&ds, e, &d)) != AQL_OK)
			goto out;
		if (d) {
			types[i] = malloc(d->size);
			if (!types[i]) {
				st = aql_fail(AQL_ERR_NOMEM, "kernel %s: description", e->name);
				goto out;
			}
			if ((st = decode_desc(e, d, args[i], types[i])) != AQL_OK)
				goto out;
		} else {
			plain_args(e, args[i]);
		}
		md->name = e->name;
		md->symbol = e->name;
		md->language = "PTX";
		md->language_version[0] = m->version[0];
		md->language_version[1] = m->version[1];
		md->kernarg_segment_size = e->param_size;
		md->kernarg_segment_align = e->param_align;
		md->max_flat_workgroup_size = workgroup_limit(e);
		md->wavefront_size = 32;
		memcpy(md->reqd_workgroup_size, e->reqntid, sizeof(e->reqntid));
		md->uses_dynamic_stack = -1;
		md->workgroup_processor_mode = -1;
		md->uniform_work_group_size = -1;
		md->arg_count = e->param_count;
		md->args = args[i];
	}
	for (uint32_t i = 0; i < ds.n; i++)
		if (!ds.v[i].used) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				      "PTX line %u: description " MD_PREFIX "%.*s names no .entry",
				      ds.v[i].line,
				      ds.v[i].kernel_len > SHOW ? SHOW : (int)ds.v[i].kernel_len,
				      ds.v[i].kernel);
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
	descs_free(&ds);
	aql_ptx_free(m);
	return st;
}

aql_status aql_nv_object_describe(struct aql_code_object *co)
{
	const uint8_t *b = co->image;

	if (co->image_size >= 4 && b[0] == 0x50 && b[1] == 0xed && b[2] == 0x55 && b[3] == 0xba)
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"CUDA fatbin code objects are not read: aql needs each kernel's argument layout, which it reads from PTX; load the PTX instead");
	if (co->image_size >= SELFMAG && memcmp(b, ELFMAG, SELFMAG) == 0) {
		co->info.kind = AQL_CODE_OBJECT_CUBIN;
		co->info.machine = EM_CUDA;
		return aql_fail(AQL_ERR_UNSUPPORTED,
				"cubin code objects are not read: aql needs each kernel's argument layout, which it reads from PTX; load the PTX instead");
	}
	return describe_ptx(co);
}
