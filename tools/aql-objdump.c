/* SPDX-License-Identifier: MIT */
/*
 * aql-objdump: describe code objects and offload bundles the way libaql
 * reads them, so that what the loader sees can be checked by eye (default)
 * or by a script (--json, one document for all files).
 *
 * A file is shown as a bundle if it is one (aql_bundle_is_bundle) or if it
 * is an ELF file with a .hip_fatbin section (every bundle in it, as parts);
 * each amdgcn entry of a bundle is then shown as a code object. Anything
 * else goes to aql_code_object_open(). Nothing is loaded: objects are only
 * opened, whatever their target, and those aql does not dispatch are marked.
 * --extract DIR writes each non-empty bundle entry to a file in DIR.
 *
 * A file that cannot be read or understood is reported on stderr with the
 * file name and libaql's reason; the other files are still shown, and the
 * exit status is 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <aql/bundle.h>
#include <aql/code_object.h>
#include <aql/metadata.h>
#include <aql/status.h>
#include <aql/target.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

#define EM_AMDGPU_NUM	224
#define JSON_DEPTH	16

static bool json;
static const char *extract_dir;	/* --extract DIR, or NULL */
static bool text_started;	/* a file was shown: separate the next one */

/* ---- reading files ------------------------------------------------------ */

struct file_buf {
	unsigned char *data;
	size_t size;
};

/* Whole file into memory. On failure, errno-style reason in err. */
static int read_file(const char *path, struct file_buf *fb, int *err)
{
	struct stat stt;
	size_t done = 0;
	ssize_t n;
	int fd;

	fb->data = NULL;
	fb->size = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		goto fail;
	if (fstat(fd, &stt))
		goto fail_close;
	if (S_ISDIR(stt.st_mode)) {
		errno = EISDIR;
		goto fail_close;
	}
	if (!S_ISREG(stt.st_mode) || stt.st_size < 0 ||
	    (uint64_t)stt.st_size > SIZE_MAX - 1) {
		errno = EINVAL;
		goto fail_close;
	}
	/* One spare byte so that an empty file still gets a buffer. */
	fb->data = malloc((size_t)stt.st_size + 1);
	if (!fb->data)
		goto fail_close;
	while (done < (size_t)stt.st_size) {
		n = read(fd, fb->data + done, (size_t)stt.st_size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail_close;
		if (n == 0)
			break;		/* shrank under us: show what is there */
		done += (size_t)n;
	}
	close(fd);
	fb->size = done;
	return 0;
fail_close:
	*err = errno;
	close(fd);
	free(fb->data);
	fb->data = NULL;
	return -1;
fail:
	*err = errno;
	return -1;
}

static bool is_elf(const struct file_buf *fb)
{
	return fb->size >= 4 && !memcmp(fb->data, "\x7f" "ELF", 4);
}

/* ---- JSON writer -------------------------------------------------------- */

/*
 * Just enough JSON: objects and arrays with a comma stack, strings escaped
 * so the document is valid UTF-8 whatever bytes a code object holds
 * (invalid sequences become U+FFFD).
 */
static bool j_first[JSON_DEPTH];
static int j_depth;

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and values past U+10FFFF are invalid. */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
	    (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static void j_string(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), i = 0, len;

	putchar('"');
	while (i < n) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\') {
			putchar('\\');
			putchar(c);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			switch (c) {
			case '\n': fputs("\\n", stdout); break;
			case '\t': fputs("\\t", stdout); break;
			case '\r': fputs("\\r", stdout); break;
			default: printf("\\u%04x", c); break;
			}
			i++;
		} else if ((len = utf8_len(s + i, n - i)) != 0) {
			fwrite(s + i, 1, len, stdout);
			i += len;
		} else {
			fputs("\\ufffd", stdout);
			i++;
		}
	}
	putchar('"');
}

/* Comma and key before a value; key NULL inside arrays. */
static void j_key(const char *key)
{
	/* The deepest document here nests 11 levels. */
	if (j_depth > 0 && j_depth <= JSON_DEPTH) {
		if (!j_first[j_depth - 1])
			putchar(',');
		j_first[j_depth - 1] = false;
	}
	if (key) {
		j_string(key);
		putchar(':');
	}
}

static void j_open(const char *key, char brace)
{
	j_key(key);
	putchar(brace);
	if (j_depth < JSON_DEPTH)
		j_first[j_depth] = true;
	j_depth++;
}

static void j_obj(const char *key)
{
	j_open(key, '{');
}

static void j_arr(const char *key)
{
	j_open(key, '[');
}

static void j_close(char brace)
{
	j_depth--;
	putchar(brace);
}

static void j_end_obj(void)
{
	j_close('}');
}

static void j_end_arr(void)
{
	j_close(']');
}

static void j_str(const char *key, const char *val)
{
	j_key(key);
	if (val)
		j_string(val);
	else
		fputs("null", stdout);
}

static void j_u64(const char *key, uint64_t val)
{
	j_key(key);
	printf("%" PRIu64, val);
}

static void j_bool(const char *key, bool val)
{
	j_key(key);
	fputs(val ? "true" : "false", stdout);
}

/* -1 (absent) as null, else false/true. */
static void j_tristate(const char *key, int val)
{
	j_key(key);
	fputs(val < 0 ? "null" : val ? "true" : "false", stdout);
}

static void j_hex(const char *key, uint64_t val, int digits)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%0*" PRIx64, digits, val);
	j_str(key, buf);
}

static void j_u32_triple(const char *key, const uint32_t v[3])
{
	j_arr(key);
	j_u64(NULL, v[0]);
	j_u64(NULL, v[1]);
	j_u64(NULL, v[2]);
	j_end_arr();
}

/* ---- human-readable helpers --------------------------------------------- */

/* A string from the file, with control bytes shown as \xNN. */
static void h_string(const char *s)
{
	if (!s) {
		fputs("-", stdout);
		return;
	}
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c < 0x20 || c == 0x7f)
			printf("\\x%02x", c);
		else
			putchar(c);
	}
}

static void h_quoted(const char *s)
{
	putchar('"');
	h_string(s);
	putchar('"');
}

/* Before the first line a file shows: a blank line after the previous. */
static void text_begin(void)
{
	if (text_started)
		putchar('\n');
	text_started = true;
}

/* ---- error reporting ---------------------------------------------------- */

static void report(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void report(const char *path, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "aql-objdump: %s: ", path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "aql_code_object_open: AQL_ERR_...: malformed code object: <why>" */
static void aql_reason(char *buf, size_t len, const char *call, aql_status st)
{
	const char *msg = aql_error_message();

	snprintf(buf, len, "%s: %s: %s", call, aql_status_str(st),
		 msg && *msg ? msg : "(no detail)");
}

/* ---- names -------------------------------------------------------------- */

static const char *machine_name(uint16_t m)
{
	switch (m) {
	case 3: return "EM_386";
	case 62: return "EM_X86_64";
	case 183: return "EM_AARCH64";
	case 190: return "EM_CUDA";
	case 243: return "EM_RISCV";
	case EM_AMDGPU_NUM: return "EM_AMDGPU";
	}
	return "unknown";
}

static const char *kind_name(enum aql_code_object_kind k)
{
	switch (k) {
	case AQL_CODE_OBJECT_AMDGPU: return "amdgpu";
	case AQL_CODE_OBJECT_HOST: return "host";
	case AQL_CODE_OBJECT_PTX: return "ptx";
	case AQL_CODE_OBJECT_CUBIN: return "cubin";
	}
	return "unknown";
}

static const char *const word_names[] = {
	[AQL_KD_RSRC1] = "compute_pgm_rsrc1",
	[AQL_KD_RSRC2] = "compute_pgm_rsrc2",
	[AQL_KD_RSRC3] = "compute_pgm_rsrc3",
	[AQL_KD_PROPERTIES] = "kernel_code_properties",
	[AQL_KD_PRELOAD] = "kernarg_preload",
};

/* The descriptor words, in the order they sit in the 64 bytes. */
struct kd_word {
	const char *name;
	int digits;		/* hex digits: the word's width */
	int field_word;		/* enum aql_kd_word, or -1: no named fields */
};

static const struct kd_word kd_words[] = {
	{ "group_segment_fixed_size", 8, -1 },
	{ "private_segment_fixed_size", 8, -1 },
	{ "kernarg_size", 8, -1 },
	{ "kernel_code_entry_byte_offset", 16, -1 },
	{ "compute_pgm_rsrc3", 8, AQL_KD_RSRC3 },
	{ "compute_pgm_rsrc1", 8, AQL_KD_RSRC1 },
	{ "compute_pgm_rsrc2", 8, AQL_KD_RSRC2 },
	{ "kernel_code_properties", 4, AQL_KD_PROPERTIES },
	{ "kernarg_preload", 4, AQL_KD_PRELOAD },
};

static uint64_t kd_word_value(const aql_kernel_descriptor_info *kd, size_t i)
{
	switch (i) {
	case 0: return kd->group_segment_fixed_size;
	case 1: return kd->private_segment_fixed_size;
	case 2: return kd->kernarg_size;
	case 3: return (uint64_t)kd->kernel_code_entry_byte_offset;
	case 4: return kd->compute_pgm_rsrc3;
	case 5: return kd->compute_pgm_rsrc1;
	case 6: return kd->compute_pgm_rsrc2;
	case 7: return kd->kernel_code_properties;
	case 8: return kd->kernarg_preload;
	}
	return 0;
}

/* Host descriptors carry only the first four words. */
static size_t kd_word_count(enum aql_code_object_kind kind)
{
	return kind == AQL_CODE_OBJECT_AMDGPU ? ARRAY_SIZE(kd_words) : 4;
}

static const char *word_name(enum aql_kd_word w)
{
	return (size_t)w < ARRAY_SIZE(word_names) && word_names[w]
	       ? word_names[w] : "unknown";
}

static const aql_kd_field *kd_fields_for(const aql_code_object_info *info,
					 uint32_t *count)
{
	*count = 0;
	if (info->kind != AQL_CODE_OBJECT_AMDGPU)
		return NULL;
	return aql_kd_fields(&info->target, count);
}

/* Whether aql would load it for dispatch; opening works for all. */
static bool dispatchable(const aql_code_object_info *info)
{
	return info->kind != AQL_CODE_OBJECT_AMDGPU || aql_target_dispatchable(&info->target);
}

/* ---- code objects: JSON ------------------------------------------------- */

static void json_arg(const aql_kernel_arg *a, uint32_t index)
{
	j_obj(NULL);
	j_u64("index", index);
	j_u64("offset", a->offset);
	j_u64("size", a->size);
	j_str("value_kind", aql_arg_kind_name(a->kind));
	j_str("address_space", a->address_space == AQL_AS_NONE ? NULL
			       : aql_address_space_name(a->address_space));
	j_str("access", a->access == AQL_ACCESS_NONE ? NULL
			: aql_access_name(a->access));
	j_str("actual_access", a->actual_access == AQL_ACCESS_NONE ? NULL
			       : aql_access_name(a->actual_access));
	j_str("name", a->name);
	j_str("type_name", a->type_name);
	j_u64("pointee_align", a->pointee_align);
	j_bool("is_const", a->flags & AQL_ARG_IS_CONST);
	j_bool("is_restrict", a->flags & AQL_ARG_IS_RESTRICT);
	j_bool("is_volatile", a->flags & AQL_ARG_IS_VOLATILE);
	j_bool("is_pipe", a->flags & AQL_ARG_IS_PIPE);
	j_end_obj();
}

static void json_descriptor(const aql_code_object_info *info,
			    const aql_kernel_descriptor_info *kd)
{
	const aql_kd_field *f;
	uint32_t n, i;
	size_t w;

	j_obj("descriptor");
	j_obj("words");
	for (w = 0; w < kd_word_count(info->kind); w++)
		j_hex(kd_words[w].name, kd_word_value(kd, w), kd_words[w].digits);
	j_end_obj();
	j_obj("decoded");
	j_u64("vgpr_granules", kd->vgpr_granules);
	j_u64("sgpr_granules", kd->sgpr_granules);
	j_u64("user_sgpr_count", kd->user_sgpr_count);
	j_u64("workitem_id_dims", kd->workitem_id_dims);
	j_bool("wave32", kd->wave32);
	j_bool("uses_dynamic_stack", kd->uses_dynamic_stack);
	j_u64("kernarg_preload_length", kd->kernarg_preload_length);
	j_u64("kernarg_preload_offset", kd->kernarg_preload_offset);
	j_end_obj();
	j_arr("fields");
	f = kd_fields_for(info, &n);
	for (i = 0; f && i < n; i++) {
		j_obj(NULL);
		j_str("word", word_name(f[i].word));
		j_str("name", f[i].name);
		j_u64("shift", f[i].shift);
		j_u64("width", f[i].width);
		j_u64("value", aql_kd_field_value(kd, &f[i]));
		j_end_obj();
	}
	j_end_arr();
	j_end_obj();
}

static void json_kernel(const aql_code_object_info *info, const aql_kernel *k)
{
	const aql_kernel_metadata *md = k->metadata;
	uint32_t i;

	j_obj(NULL);
	j_str("name", k->name);
	j_str("symbol", md->symbol);
	j_str("language", md->language);
	j_arr("language_version");
	j_u64(NULL, md->language_version[0]);
	j_u64(NULL, md->language_version[1]);
	j_end_arr();
	j_u64("kernarg_size", k->kernarg_size);
	j_u64("kernarg_align", k->kernarg_align);
	j_u64("group_segment_size", k->group_segment_size);
	j_u64("private_segment_size", k->private_segment_size);
	j_u64("wavefront_size", md->wavefront_size);
	j_u64("sgpr_count", md->sgpr_count);
	j_u64("vgpr_count", md->vgpr_count);
	j_u64("agpr_count", md->agpr_count);
	j_u64("sgpr_spill_count", md->sgpr_spill_count);
	j_u64("vgpr_spill_count", md->vgpr_spill_count);
	j_u64("max_flat_workgroup_size", md->max_flat_workgroup_size);
	j_u32_triple("reqd_workgroup_size", md->reqd_workgroup_size);
	j_u32_triple("workgroup_size_hint", md->workgroup_size_hint);
	j_tristate("uses_dynamic_stack", md->uses_dynamic_stack);
	j_tristate("workgroup_processor_mode", md->workgroup_processor_mode);
	j_tristate("uniform_work_group_size", md->uniform_work_group_size);
	j_u64("explicit_arg_count", k->explicit_arg_count);
	j_arr("args");
	for (i = 0; i < md->arg_count; i++)
		json_arg(&md->args[i], i);
	j_end_arr();
	json_descriptor(info, &k->descriptor);
	j_end_obj();
}

static void json_code_object(const aql_code_object_info *info)
{
	const aql_metadata *md = info->metadata;
	char target[64];
	uint32_t i;

	j_obj("code_object");
	j_str("kind", kind_name(info->kind));
	j_u64("version", info->version);
	j_u64("machine", info->machine);
	j_str("machine_name", machine_name(info->machine));
	if (info->kind == AQL_CODE_OBJECT_AMDGPU) {
		aql_target_format(&info->target, target, sizeof(target));
		j_str("target", target);
	} else {
		j_str("target", NULL);
	}
	j_bool("dispatchable", dispatchable(info));
	j_arr("metadata_version");
	j_u64(NULL, md->version[0]);
	j_u64(NULL, md->version[1]);
	j_end_arr();
	j_str("metadata_target", md->target);
	j_arr("printf");
	for (i = 0; i < md->printf_count; i++)
		j_str(NULL, md->printf_formats[i]);
	j_end_arr();
	j_u64("kernel_count", info->kernel_count);
	j_arr("kernels");
	for (i = 0; i < info->kernel_count; i++)
		json_kernel(info, &info->kernels[i]);
	j_end_arr();
	j_end_obj();
}

/* ---- code objects: text ------------------------------------------------- */

static void text_flags(uint32_t flags)
{
	static const struct { uint32_t bit; const char *name; } names[] = {
		{ AQL_ARG_IS_CONST, "const" },
		{ AQL_ARG_IS_RESTRICT, "restrict" },
		{ AQL_ARG_IS_VOLATILE, "volatile" },
		{ AQL_ARG_IS_PIPE, "pipe" },
	};
	const char *sep = " [";
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		if (flags & names[i].bit) {
			printf("%s%s", sep, names[i].name);
			sep = " ";
		}
	}
	if (*sep == ' ' && sep[1] == 0)
		putchar(']');
}

static void text_args(const aql_kernel_metadata *md, const char *ind)
{
	const aql_kernel_arg *a;
	uint32_t i;

	if (!md->arg_count) {
		printf("%s    args: none\n", ind);
		return;
	}
	printf("%s    args:\n%s      %3s %6s %5s  %-28s %-9s %-10s %s\n", ind,
	       ind, "#", "offset", "size", "value kind", "space", "access",
	       "name : type");
	for (i = 0; i < md->arg_count; i++) {
		a = &md->args[i];
		printf("%s      %3" PRIu32 " %6" PRIu32 " %5" PRIu32 "  %-28s %-9s %-10s ",
		       ind, i, a->offset, a->size, aql_arg_kind_name(a->kind),
		       a->address_space == AQL_AS_NONE ? "-"
		       : aql_address_space_name(a->address_space),
		       a->access == AQL_ACCESS_NONE ? "-"
		       : aql_access_name(a->access));
		h_string(a->name);
		fputs(" : ", stdout);
		h_string(a->type_name);
		text_flags(a->flags);
		putchar('\n');
	}
}

static void text_descriptor(const aql_code_object_info *info,
			    const aql_kernel_descriptor_info *kd, const char *ind)
{
	const aql_kd_field *f;
	uint32_t n, i;
	size_t w;

	f = kd_fields_for(info, &n);
	printf("%s    descriptor:\n", ind);
	for (w = 0; w < kd_word_count(info->kind); w++) {
		printf("%s      %-30s 0x%0*" PRIx64 "\n", ind, kd_words[w].name,
		       kd_words[w].digits, kd_word_value(kd, w));
		for (i = 0; f && kd_words[w].field_word >= 0 && i < n; i++)
			if ((int)f[i].word == kd_words[w].field_word)
				printf("%s        %-48s %" PRIu32 "\n", ind,
				       f[i].name, aql_kd_field_value(kd, &f[i]));
	}
}

static void text_kernel(const aql_code_object_info *info, const aql_kernel *k,
			const char *ind)
{
	const aql_kernel_metadata *md = k->metadata;

	printf("%s  kernel ", ind);
	h_string(k->name);
	printf(" (symbol ");
	h_string(md->symbol);
	printf(")\n");
	printf("%s    kernarg %" PRIu32 " bytes, align %" PRIu32
	       ", %" PRIu32 " explicit arg(s)\n", ind, k->kernarg_size,
	       k->kernarg_align, k->explicit_arg_count);
	printf("%s    segments: group %" PRIu32 " bytes, private %" PRIu32
	       " bytes per work-item\n", ind, k->group_segment_size,
	       k->private_segment_size);
	printf("%s    wavefront %" PRIu32 ", sgpr %" PRIu32 ", vgpr %" PRIu32
	       ", agpr %" PRIu32 ", max flat work-group size %" PRIu32 "\n",
	       ind, md->wavefront_size, md->sgpr_count, md->vgpr_count,
	       md->agpr_count, md->max_flat_workgroup_size);
	if (md->language) {
		printf("%s    language ", ind);
		h_string(md->language);
		printf(" %" PRIu32 ".%" PRIu32 "\n", md->language_version[0],
		       md->language_version[1]);
	}
	text_args(md, ind);
	text_descriptor(info, &k->descriptor, ind);
}

/* The first line starts with prefix ("k.hsaco: "), the others with ind. */
static void text_code_object(const aql_code_object_info *info,
			     const char *prefix, const char *indent)
{
	const aql_metadata *md = info->metadata;
	char target[64];
	uint32_t i;

	if (!*indent)
		text_begin();
	printf("%s%s code object", prefix, kind_name(info->kind));
	if (info->kind == AQL_CODE_OBJECT_AMDGPU) {
		aql_target_format(&info->target, target, sizeof(target));
		printf(" v%" PRIu32 ", target %s", info->version, target);
		if (!dispatchable(info))
			printf(" (inspection only: aql does not dispatch %s)",
			       info->target.processor);
	}
	printf(", e_machine %" PRIu16 " (%s), %" PRIu32 " kernel(s)\n",
	       info->machine, machine_name(info->machine), info->kernel_count);
	if (info->kind == AQL_CODE_OBJECT_HOST) {
		printf("%smetadata from the host kernel descriptors\n", indent);
	} else {
		printf("%smetadata version %" PRIu32 ".%" PRIu32, indent,
		       md->version[0], md->version[1]);
		if (md->target) {
			printf(", target ");
			h_string(md->target);
		}
		putchar('\n');
	}
	for (i = 0; i < md->printf_count; i++) {
		printf("%sprintf[%" PRIu32 "] ", indent, i);
		h_quoted(md->printf_formats[i]);
		putchar('\n');
	}
	for (i = 0; i < info->kernel_count; i++)
		text_kernel(info, &info->kernels[i], indent);
}

/* ---- files -------------------------------------------------------------- */

/*
 * Open and show one code object. where names it in messages ("k.hsaco",
 * "b.bundle: bundle entry 1"); prefix and indent as text_code_object().
 * Returns 0, or -1 after reporting why not.
 */
static int show_code_object(const char *where, const void *data, size_t size,
			    const char *prefix, const char *indent)
{
	aql_code_object *co;
	char why[768];
	aql_status st;

	st = aql_code_object_open(data, size, &co);
	if (st != AQL_OK) {
		aql_reason(why, sizeof(why), "aql_code_object_open", st);
		report(where, "%s", why);
		if (json)
			j_str("error", why);
		return -1;
	}
	if (json)
		json_code_object(aql_code_object_get_info(co));
	else
		text_code_object(aql_code_object_get_info(co), prefix, indent);
	aql_code_object_destroy(co);
	return 0;
}

/*
 * Write entry i to extract_dir; out gets the file's path. Returns 0, or
 * -1 after reporting why not.
 */
static int extract_entry(const char *path, const aql_bundle_entry *e, uint32_t i,
			 char *out, size_t len)
{
	size_t done = 0, at;
	ssize_t n;
	int fd;

	at = (size_t)snprintf(out, len, "%s/%" PRIu32 "-", extract_dir, i);
	for (const char *c = e->id; *c && at + 1 < len; c++)
		out[at++] = *c == '/' ? '_' : *c;
	out[at < len ? at : len - 1] = 0;
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		report(path, "--extract: %s: %s", out, strerror(errno));
		return -1;
	}
	while (done < e->size) {
		n = write(fd, (const char *)e->data + done, e->size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			report(path, "--extract: writing %s: %s", out,
			       n < 0 ? strerror(errno) : "nothing written");
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	if (close(fd)) {
		report(path, "--extract: closing %s: %s", out, strerror(errno));
		return -1;
	}
	return 0;
}

static int show_bundle(const char *path, const struct file_buf *fb,
		       aql_bundle *b)
{
	uint32_t n = aql_bundle_count(b), parts = aql_bundle_part_count(b), i;
	const aql_bundle_entry *e;
	char where[4096], target[64], file[4096];
	uint64_t offset;
	bool in_file, extracted;
	int rc = 0;

	if (json) {
		j_str("format", "bundle");
		j_u64("parts", parts);
		j_arr("entries");
	} else {
		text_begin();
		printf("%s: offload bundle, %" PRIu32 " entr%s", path, n,
		       n == 1 ? "y" : "ies");
		if (parts > 1)
			printf(" in %" PRIu32 " bundles", parts);
		putchar('\n');
	}
	for (i = 0; i < n; i++) {
		e = aql_bundle_get(b, i);
		/* Entries of a compressed bundle live outside the file. */
		in_file = (const unsigned char *)e->data >= fb->data &&
			  e->size <= fb->size &&
			  (const unsigned char *)e->data - fb->data <=
			  (ptrdiff_t)(fb->size - e->size);
		offset = in_file ? (uint64_t)((const unsigned char *)e->data -
					      fb->data) : 0;
		target[0] = 0;
		if (e->is_amdgcn)
			aql_target_format(&e->target, target, sizeof(target));
		extracted = false;
		if (extract_dir && e->size) {
			if (extract_entry(path, e, i, file, sizeof(file)))
				rc = -1;
			else
				extracted = true;
		}
		if (json) {
			j_obj(NULL);
			j_u64("index", i);
			j_u64("part", e->part);
			j_str("id", e->id);
			if (in_file)
				j_u64("offset", offset);
			else
				j_str("offset", NULL);
			j_u64("size", e->size);
			j_bool("amdgcn", e->is_amdgcn);
			j_str("target", e->is_amdgcn ? target : NULL);
			j_str("extracted", extracted ? file : NULL);
		} else {
			printf("  entry %" PRIu32 ": ", i);
			if (parts > 1)
				printf("bundle %" PRIu32 ", ", e->part);
			h_quoted(e->id);
			if (in_file)
				printf(", offset %" PRIu64, offset);
			else
				printf(", decompressed");
			printf(", size %zu", e->size);
			if (e->is_amdgcn)
				printf(", target %s", target);
			if (extracted) {
				printf(", extracted to ");
				h_string(file);
			}
			putchar('\n');
		}
		if (e->is_amdgcn) {
			snprintf(where, sizeof(where), "%s: bundle entry %" PRIu32,
				 path, i);
			if (show_code_object(where, e->data, e->size, "    ",
					     "    "))
				rc = -1;
		}
		if (json)
			j_end_obj();
	}
	if (json)
		j_end_arr();
	return rc;
}

/*
 * A bundle, or an ELF file carrying one in .hip_fatbin, or else a code
 * object. *b is the open bundle, or NULL for a code object; returns -1 if
 * the file is a bundle (or carries one) that cannot be opened.
 */
static int find_bundle(const char *path, const struct file_buf *fb,
		       aql_bundle **b)
{
	char why[768];
	aql_status st;

	*b = NULL;
	if (!aql_bundle_is_bundle(fb->data, fb->size) && !is_elf(fb))
		return 0;
	st = aql_bundle_open(fb->data, fb->size, b);
	/* An ELF without .hip_fatbin is a plain code object. */
	if (st == AQL_OK || (st == AQL_ERR_NOT_FOUND && is_elf(fb)))
		return 0;
	*b = NULL;
	aql_reason(why, sizeof(why), "aql_bundle_open", st);
	report(path, "%s", why);
	if (json)
		j_str("error", why);
	return -1;
}

static int show_file(const char *path)
{
	struct file_buf fb;
	char prefix[4096];
	aql_bundle *b;
	int err = 0, rc;

	if (json) {
		j_obj(NULL);
		j_str("path", path);
	}
	if (read_file(path, &fb, &err)) {
		report(path, "%s", strerror(err));
		if (json) {
			j_str("error", strerror(err));
			j_bool("ok", false);
			j_end_obj();
		}
		return -1;
	}
	rc = find_bundle(path, &fb, &b);
	if (!rc && b) {
		rc = show_bundle(path, &fb, b);
		aql_bundle_close(b);
	} else if (!rc) {
		if (json)
			j_str("format", "code_object");
		snprintf(prefix, sizeof(prefix), "%s: ", path);
		rc = show_code_object(path, fb.data, fb.size, prefix, "");
	}
	if (json) {
		j_bool("ok", rc == 0);
		j_end_obj();
	}
	free(fb.data);
	return rc;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: aql-objdump [--json] [--extract DIR] FILE...\n"
		"\n"
		"Show code objects (.hsaco, host code objects) and clang offload\n"
		"bundles (also inside an ELF's .hip_fatbin) as libaql reads them:\n"
		"target, metadata, kernels, arguments and kernel descriptors.\n"
		"\n"
		"  --json          one JSON document {\"files\":[...]} on stdout\n"
		"  --extract DIR   write each non-empty bundle entry to DIR/<index>-<id>\n"
		"                  (one FILE only)\n"
		"                  (DIR must exist; compressed entries decompressed)\n"
		"  --help          show this text\n"
		"\n"
		"Exit status 1 if any file could not be read or understood.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "extract", required_argument, NULL, 'x' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, i, rc = 0;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'x':
			extract_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "aql-objdump: no file given\n");
		usage(stderr);
		return 2;
	}
	/* Entries are named by index: a second file's would overwrite them. */
	if (extract_dir && argc - optind > 1) {
		fprintf(stderr, "aql-objdump: --extract takes one FILE, %d given\n",
			argc - optind);
		return 2;
	}
	if (json) {
		j_obj(NULL);
		j_arr("files");
	}
	for (i = optind; i < argc; i++) {
		if (show_file(argv[i]))
			rc = 1;
	}
	if (json) {
		j_end_arr();
		j_end_obj();
		putchar('\n');
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "aql-objdump: writing output: %s\n",
			strerror(errno));
		return 1;
	}
	return rc;
}
