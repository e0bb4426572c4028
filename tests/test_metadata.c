/* SPDX-License-Identifier: MIT */
/*
 * The msgpack reader and the NT_AMDGPU_METADATA parser.
 *
 * (a) Hand-encoded notes: every msgpack type and width, unknown keys and
 *     value kinds, each required key missing, wrong types, nesting at and
 *     past the limit, huge lengths, truncation at every byte and byte flips;
 *     each must parse to the expected values or fail cleanly.
 * (b) Code objects built by tests/co/meson.build: the note, taken out with
 *     libelf, must parse to what llvm-readelf of the same LLVM prints.
 *
 * usage: test_metadata [--co NAME PATH VERSION READELF]... [--missing WHY]...
 *                      [--dump-notes DIR]
 * --dump-notes writes each fixture's note to DIR/NAME.note (fuzz corpus).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <aql/metadata.h>
#include "helpers.h"
#include "loader/metadata_impl.h"
#include "loader/msgpack.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- A value tree, and a msgpack writer with a choice of encodings ---- */

enum tt { T_NIL, T_BOOL, T_UINT, T_NEG, T_F32, T_F64, T_STR, T_BIN, T_EXT, T_ARR, T_MAP };

#define T_MAX_KIDS 48

struct tn {
	enum tt type;
	uint64_t u;
	int64_t i;
	double f;
	const char *s;
	uint32_t len;			/* bin/ext payload length */
	unsigned n;
	const char *keys[T_MAX_KIDS];
	struct tn *kids[T_MAX_KIDS];
};

static struct tn pool[1024];
static unsigned pool_used;

static struct tn *tnew(enum tt type)
{
	struct tn *t;

	if (pool_used == COUNT_OF(pool)) {
		fprintf(stderr, "test node pool exhausted\n");
		exit(1);
	}
	t = &pool[pool_used++];
	memset(t, 0, sizeof(*t));
	t->type = type;
	return t;
}

static struct tn *tu(uint64_t v) { struct tn *t = tnew(T_UINT); t->u = v; return t; }
static struct tn *tneg(int64_t v) { struct tn *t = tnew(T_NEG); t->i = v; return t; }
static struct tn *tstr(const char *s) { struct tn *t = tnew(T_STR); t->s = s; return t; }
static struct tn *tbool(bool b) { struct tn *t = tnew(T_BOOL); t->u = b; return t; }
static struct tn *tarr(void) { return tnew(T_ARR); }
static struct tn *tmap(void) { return tnew(T_MAP); }

static struct tn *push(struct tn *a, struct tn *v)
{
	if (a->n == T_MAX_KIDS) {
		fprintf(stderr, "test node full\n");
		exit(1);
	}
	a->kids[a->n++] = v;
	return a;
}

/* Set key in map m, replacing an existing entry. */
static struct tn *put(struct tn *m, const char *key, struct tn *v)
{
	for (unsigned i = 0; i < m->n; i++)
		if (!strcmp(m->keys[i], key)) {
			m->kids[i] = v;
			return m;
		}
	m->keys[m->n] = key;
	return push(m, v);
}

/* Add key even if present (duplicates). */
static struct tn *add(struct tn *m, const char *key, struct tn *v)
{
	m->keys[m->n] = key;
	return push(m, v);
}

static struct tn *get(struct tn *m, const char *key)
{
	for (unsigned i = 0; i < m->n; i++)
		if (!strcmp(m->keys[i], key))
			return m->kids[i];
	fprintf(stderr, "test tree has no key %s\n", key);
	exit(1);
}

static void del(struct tn *m, const char *key)
{
	for (unsigned i = 0; i < m->n; i++)
		if (!strcmp(m->keys[i], key)) {
			memmove(&m->keys[i], &m->keys[i + 1], (m->n - i - 1) * sizeof(m->keys[0]));
			memmove(&m->kids[i], &m->kids[i + 1], (m->n - i - 1) * sizeof(m->kids[0]));
			m->n--;
			return;
		}
	fprintf(stderr, "test tree has no key %s to delete\n", key);
	exit(1);
}

static struct tn *tu_array(unsigned n, const uint32_t *v)
{
	struct tn *a = tarr();

	for (unsigned i = 0; i < n; i++)
		push(a, tu(v[i]));
	return a;
}

/*
 * Encoding choice. int_mode: 0 smallest, 1-4 uint 8/16/32/64, 5-8 int
 * 8/16/32/64 (where the value fits, else the smallest that does); str_mode:
 * 0 fixstr, 1-3 str 8/16/32; box_mode: 0 fix, 1 16-bit, 2 32-bit count.
 * rotate: advance every mode after each use, mixing widths in one note.
 */
struct writer {
	uint8_t *buf;
	size_t len, cap;
	unsigned int_mode, str_mode, box_mode;
	bool rotate;
};

static void w_byte(struct writer *w, uint8_t b)
{
	if (w->len == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 4096;
		w->buf = realloc(w->buf, w->cap);
		if (!w->buf)
			exit(1);
	}
	w->buf[w->len++] = b;
}

static void w_be(struct writer *w, uint64_t v, unsigned bytes)
{
	for (unsigned i = bytes; i-- > 0;)
		w_byte(w, (uint8_t)(v >> (8 * i)));
}

static void w_raw(struct writer *w, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		w_byte(w, ((const uint8_t *)p)[i]);
}

static void w_uint(struct writer *w, uint64_t v)
{
	unsigned mode = w->int_mode;

	if (w->rotate)
		w->int_mode = (w->int_mode + 1) % 9;
	if (mode >= 5) {		/* signed encodings of a non-negative value */
		unsigned bytes = 1u << (mode - 5);

		if (bytes == 8 || v < (1ull << (8 * bytes - 1))) {
			w_byte(w, (uint8_t)(0xd0 + (mode - 5)));
			w_be(w, v, bytes);
			return;
		}
		mode = 0;
	}
	if (mode == 0 && v <= 0x7f) {
		w_byte(w, (uint8_t)v);
		return;
	}
	for (unsigned m = mode ? mode : 1; m <= 4; m++) {
		unsigned bytes = 1u << (m - 1);

		if (bytes == 8 || v < (1ull << (8 * bytes))) {
			w_byte(w, (uint8_t)(0xcc + (m - 1)));
			w_be(w, v, bytes);
			return;
		}
	}
}

static void w_neg(struct writer *w, int64_t v)
{
	if (v >= -32) {
		w_byte(w, (uint8_t)v);
	} else if (v >= INT8_MIN) {
		w_byte(w, 0xd0);
		w_be(w, (uint64_t)v, 1);
	} else if (v >= INT16_MIN) {
		w_byte(w, 0xd1);
		w_be(w, (uint64_t)v, 2);
	} else if (v >= INT32_MIN) {
		w_byte(w, 0xd2);
		w_be(w, (uint64_t)v, 4);
	} else {
		w_byte(w, 0xd3);
		w_be(w, (uint64_t)v, 8);
	}
}

static void w_str(struct writer *w, const char *s)
{
	size_t n = strlen(s);
	unsigned mode = w->str_mode;

	if (w->rotate)
		w->str_mode = (w->str_mode + 1) % 4;
	if (mode == 0 && n < 32)
		w_byte(w, (uint8_t)(0xa0 | n));
	else if (mode <= 1 && n < 256)
		w_byte(w, 0xd9), w_be(w, n, 1);
	else if (mode <= 2 && n < 65536)
		w_byte(w, 0xda), w_be(w, n, 2);
	else
		w_byte(w, 0xdb), w_be(w, n, 4);
	w_raw(w, s, n);
}

/* Array (fix 0x90, 0xdc, 0xdd) or map (fix 0x80, 0xde, 0xdf) header. */
static void w_box(struct writer *w, bool map, uint32_t n)
{
	unsigned mode = w->box_mode;

	if (w->rotate)
		w->box_mode = (w->box_mode + 1) % 3;
	if (mode == 0 && n < 16)
		w_byte(w, (uint8_t)((map ? 0x80 : 0x90) | n));
	else if (mode <= 1 && n < 65536)
		w_byte(w, map ? 0xde : 0xdc), w_be(w, n, 2);
	else
		w_byte(w, map ? 0xdf : 0xdd), w_be(w, n, 4);
}

static void w_tree(struct writer *w, const struct tn *t)
{
	switch (t->type) {
	case T_NIL:
		w_byte(w, 0xc0);
		break;
	case T_BOOL:
		w_byte(w, t->u ? 0xc3 : 0xc2);
		break;
	case T_UINT:
		w_uint(w, t->u);
		break;
	case T_NEG:
		w_neg(w, t->i);
		break;
	case T_F32: {
		float f = (float)t->f;
		uint32_t bits;

		memcpy(&bits, &f, 4);
		w_byte(w, 0xca);
		w_be(w, bits, 4);
		break;
	}
	case T_F64: {
		uint64_t bits;

		memcpy(&bits, &t->f, 8);
		w_byte(w, 0xcb);
		w_be(w, bits, 8);
		break;
	}
	case T_STR:
		w_str(w, t->s);
		break;
	case T_BIN:
		if (t->len < 256)
			w_byte(w, 0xc4), w_be(w, t->len, 1);
		else if (t->len < 65536)
			w_byte(w, 0xc5), w_be(w, t->len, 2);
		else
			w_byte(w, 0xc6), w_be(w, t->len, 4);
		for (uint32_t i = 0; i < t->len; i++)
			w_byte(w, (uint8_t)i);
		break;
	case T_EXT: {
		static const uint32_t fixed[] = { 1, 2, 4, 8, 16 };
		bool done = false;

		for (unsigned i = 0; i < 5 && !done; i++)
			if (t->len == fixed[i]) {
				w_byte(w, (uint8_t)(0xd4 + i));
				done = true;
			}
		if (!done && t->len < 256)
			w_byte(w, 0xc7), w_be(w, t->len, 1);
		else if (!done && t->len < 65536)
			w_byte(w, 0xc8), w_be(w, t->len, 2);
		else if (!done)
			w_byte(w, 0xc9), w_be(w, t->len, 4);
		w_byte(w, 0x05);		/* ext type */
		for (uint32_t i = 0; i < t->len; i++)
			w_byte(w, 0xee);
		break;
	}
	case T_ARR:
		w_box(w, false, t->n);
		for (unsigned i = 0; i < t->n; i++)
			w_tree(w, t->kids[i]);
		break;
	case T_MAP:
		w_box(w, true, t->n);
		for (unsigned i = 0; i < t->n; i++) {
			w_str(w, t->keys[i]);
			w_tree(w, t->kids[i]);
		}
		break;
	}
}

/* Encode t with the given modes; the caller frees w->buf. */
static struct writer encode(const struct tn *t, unsigned int_mode, unsigned str_mode,
			    unsigned box_mode, bool rotate)
{
	struct writer w = { .int_mode = int_mode, .str_mode = str_mode, .box_mode = box_mode,
			    .rotate = rotate };

	w_tree(&w, t);
	return w;
}

/* ---- The reference note and what it must parse to ---- */

static const char *const hidden_kinds[] = {
	"hidden_global_offset_x", "hidden_global_offset_y", "hidden_global_offset_z",
	"hidden_none", "hidden_printf_buffer", "hidden_hostcall_buffer",
	"hidden_default_queue", "hidden_completion_action", "hidden_multigrid_sync_arg",
	"hidden_block_count_x", "hidden_block_count_y", "hidden_block_count_z",
	"hidden_group_size_x", "hidden_group_size_y", "hidden_group_size_z",
	"hidden_remainder_x", "hidden_remainder_y", "hidden_remainder_z",
	"hidden_grid_dims", "hidden_heap_v1", "hidden_dynamic_lds_size",
	"hidden_private_base", "hidden_shared_base", "hidden_queue_ptr",
	"hidden_tool_correlation_id",
};

static const enum aql_arg_kind hidden_enums[] = {
	AQL_ARG_HIDDEN_GLOBAL_OFFSET_X, AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y, AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z,
	AQL_ARG_HIDDEN_NONE, AQL_ARG_HIDDEN_PRINTF_BUFFER, AQL_ARG_HIDDEN_HOSTCALL_BUFFER,
	AQL_ARG_HIDDEN_DEFAULT_QUEUE, AQL_ARG_HIDDEN_COMPLETION_ACTION,
	AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG, AQL_ARG_HIDDEN_BLOCK_COUNT_X,
	AQL_ARG_HIDDEN_BLOCK_COUNT_Y, AQL_ARG_HIDDEN_BLOCK_COUNT_Z, AQL_ARG_HIDDEN_GROUP_SIZE_X,
	AQL_ARG_HIDDEN_GROUP_SIZE_Y, AQL_ARG_HIDDEN_GROUP_SIZE_Z, AQL_ARG_HIDDEN_REMAINDER_X,
	AQL_ARG_HIDDEN_REMAINDER_Y, AQL_ARG_HIDDEN_REMAINDER_Z, AQL_ARG_HIDDEN_GRID_DIMS,
	AQL_ARG_HIDDEN_HEAP_V1, AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE, AQL_ARG_HIDDEN_PRIVATE_BASE,
	AQL_ARG_HIDDEN_SHARED_BASE, AQL_ARG_HIDDEN_QUEUE_PTR, AQL_ARG_HIDDEN_TOOL_CORRELATION_ID,
};

_Static_assert(COUNT_OF(hidden_kinds) == COUNT_OF(hidden_enums), "hidden kinds");

/* Explicit args 0-7, hidden args 8.., then one of an unknown kind. */
#define REF_EXPLICIT 8u
#define REF_ARGS (REF_EXPLICIT + (unsigned)COUNT_OF(hidden_kinds) + 1)
#define REF_KERNARG_SIZE 400u
#define REF_ARGS_END (64u + 8u * ((unsigned)COUNT_OF(hidden_kinds) + 1))	/* last arg's end */

static struct tn *ref_arg(uint32_t offset, uint32_t size, const char *kind)
{
	struct tn *a = tmap();

	put(a, ".offset", tu(offset));
	put(a, ".size", tu(size));
	put(a, ".value_kind", tstr(kind));
	return a;
}

static struct tn *ref_kernel0(void)
{
	static const uint32_t lang[] = { 2, 0 }, reqd[] = { 64, 2, 1 }, hint[] = { 32, 4, 2 };
	struct tn *k = tmap(), *args = tarr(), *a;
	uint32_t off = 64;

	put(k, ".name", tstr("k0"));
	put(k, ".symbol", tstr("k0.kd"));
	put(k, ".language", tstr("OpenCL C"));
	put(k, ".language_version", tu_array(2, lang));
	put(k, ".kernarg_segment_size", tu(REF_KERNARG_SIZE));
	put(k, ".kernarg_segment_align", tu(16));
	put(k, ".group_segment_fixed_size", tu(300));
	put(k, ".private_segment_fixed_size", tu(70000));
	put(k, ".max_flat_workgroup_size", tu(1024));
	put(k, ".wavefront_size", tu(64));
	put(k, ".sgpr_count", tu(20));
	put(k, ".vgpr_count", tu(130));
	put(k, ".agpr_count", tu(4));
	put(k, ".sgpr_spill_count", tu(1));
	put(k, ".vgpr_spill_count", tu(65536));
	put(k, ".reqd_workgroup_size", tu_array(3, reqd));
	put(k, ".workgroup_size_hint", tu_array(3, hint));
	put(k, ".uses_dynamic_stack", tbool(false));
	put(k, ".workgroup_processor_mode", tu(1));	/* LLVM writes an integer here */
	put(k, ".uniform_work_group_size", tbool(true));

	a = ref_arg(0, 8, "global_buffer");
	put(a, ".name", tstr("out"));
	put(a, ".type_name", tstr("float*"));
	put(a, ".address_space", tstr("global"));
	put(a, ".access", tstr("read_write"));
	put(a, ".actual_access", tstr("write_only"));
	put(a, ".is_restrict", tbool(true));
	put(a, ".is_volatile", tbool(true));
	push(args, a);
	a = ref_arg(8, 8, "global_buffer");
	put(a, ".name", tstr("in"));
	put(a, ".address_space", tstr("constant"));
	put(a, ".is_const", tbool(true));
	put(a, ".actual_access", tstr("read_only"));
	put(a, ".pointee_align", tu(16));
	push(args, a);
	a = ref_arg(16, 4, "by_value");
	put(a, ".name", tstr("n"));
	put(a, ".type_name", tstr("uint"));
	push(args, a);
	a = ref_arg(24, 4, "dynamic_shared_pointer");
	put(a, ".address_space", tstr("local"));
	put(a, ".pointee_align", tu(4));
	push(args, a);
	a = ref_arg(32, 8, "pipe");
	put(a, ".is_pipe", tu(1));
	put(a, ".access", tstr("write_only"));
	put(a, ".address_space", tstr("generic"));
	push(args, a);
	a = ref_arg(40, 8, "image");
	put(a, ".access", tstr("read_only"));
	put(a, ".address_space", tstr("private"));
	push(args, a);
	a = ref_arg(48, 8, "sampler");
	put(a, ".address_space", tstr("region"));
	push(args, a);
	push(args, ref_arg(56, 8, "queue"));
	for (unsigned i = 0; i < COUNT_OF(hidden_kinds); i++, off += 8)
		push(args, ref_arg(off, 8, hidden_kinds[i]));
	push(args, ref_arg(off, 8, "hidden_from_the_future"));
	put(k, ".args", args);
	return k;
}

/* Only the required keys. */
static struct tn *ref_kernel1(void)
{
	struct tn *k = tmap();

	put(k, ".name", tstr("k1_minimal"));
	put(k, ".symbol", tstr("k1_minimal.kd"));
	put(k, ".kernarg_segment_size", tu(0));
	put(k, ".group_segment_fixed_size", tu(0));
	put(k, ".private_segment_fixed_size", tu(0));
	put(k, ".kernarg_segment_align", tu(4));
	put(k, ".wavefront_size", tu(32));
	put(k, ".sgpr_count", tu(2));
	put(k, ".vgpr_count", tu(1));
	put(k, ".max_flat_workgroup_size", tu(256));
	return k;
}

static struct tn *ref_note(void)
{
	static const uint32_t version[] = { 1, 2 };
	struct tn *root, *printfs, *kernels;

	pool_used = 0;
	root = tmap();
	printfs = tarr();
	kernels = tarr();
	put(root, "amdhsa.version", tu_array(2, version));
	put(root, "amdhsa.target", tstr("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"));
	push(printfs, tstr("1:1:4:x = %d\\n"));
	/* Long enough for str16 when the mode asks for the smallest width. */
	push(printfs, tstr("2:0:" "................................................................"
			   "................................................................"
			   "................................................................"
			   "................................................................"));
	put(root, "amdhsa.printf", printfs);
	push(kernels, ref_kernel0());
	push(kernels, ref_kernel1());
	put(root, "amdhsa.kernels", kernels);
	return root;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* Compare md with what ref_note() says; tag names the variant. */
static void check_ref(const char *tag, const aql_metadata *md)
{
	const aql_kernel_metadata *k;
	const aql_kernel_arg *a;

	CHECK(md->version[0] == 1 && md->version[1] == 2, "%s: version %u.%u", tag,
	      md->version[0], md->version[1]);
	CHECK(str_eq(md->target, "amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"), "%s: target %s",
	      tag, md->target);
	CHECK(md->printf_count == 2 && str_eq(md->printf_formats[0], "1:1:4:x = %d\\n") &&
		      strlen(md->printf_formats[1]) == 260,
	      "%s: printf", tag);
	CHECK(md->kernel_count == 2, "%s: %u kernels", tag, md->kernel_count);
	if (md->kernel_count != 2)
		return;
	k = &md->kernels[0];
	CHECK(str_eq(k->name, "k0") && str_eq(k->symbol, "k0.kd") && str_eq(k->language, "OpenCL C"),
	      "%s: k0 strings", tag);
	CHECK(k->language_version[0] == 2 && k->language_version[1] == 0, "%s: language version", tag);
	CHECK(k->kernarg_segment_size == REF_KERNARG_SIZE && k->kernarg_segment_align == 16 &&
		      k->group_segment_fixed_size == 300 && k->private_segment_fixed_size == 70000 &&
		      k->max_flat_workgroup_size == 1024 && k->wavefront_size == 64,
	      "%s: k0 sizes %u %u %u %u %u %u", tag, k->kernarg_segment_size,
	      k->kernarg_segment_align, k->group_segment_fixed_size,
	      k->private_segment_fixed_size, k->max_flat_workgroup_size, k->wavefront_size);
	CHECK(k->sgpr_count == 20 && k->vgpr_count == 130 && k->agpr_count == 4 &&
		      k->sgpr_spill_count == 1 && k->vgpr_spill_count == 65536,
	      "%s: k0 registers", tag);
	CHECK(k->reqd_workgroup_size[0] == 64 && k->reqd_workgroup_size[1] == 2 &&
		      k->reqd_workgroup_size[2] == 1 && k->workgroup_size_hint[0] == 32 &&
		      k->workgroup_size_hint[1] == 4 && k->workgroup_size_hint[2] == 2,
	      "%s: k0 workgroup sizes", tag);
	CHECK(k->uses_dynamic_stack == 0 && k->workgroup_processor_mode == 1 &&
		      k->uniform_work_group_size == 1,
	      "%s: k0 tristates %d %d %d", tag, k->uses_dynamic_stack,
	      k->workgroup_processor_mode, k->uniform_work_group_size);
	CHECK(k->arg_count == REF_ARGS, "%s: k0 %u args", tag, k->arg_count);
	if (k->arg_count == REF_ARGS) {
		a = k->args;
		CHECK(str_eq(a[0].name, "out") && str_eq(a[0].type_name, "float*") &&
			      a[0].offset == 0 && a[0].size == 8 &&
			      a[0].kind == AQL_ARG_GLOBAL_BUFFER &&
			      a[0].address_space == AQL_AS_GLOBAL &&
			      a[0].access == AQL_ACCESS_READ_WRITE &&
			      a[0].actual_access == AQL_ACCESS_WRITE_ONLY &&
			      a[0].flags == (AQL_ARG_IS_RESTRICT | AQL_ARG_IS_VOLATILE) &&
			      a[0].pointee_align == 0,
		      "%s: arg 0", tag);
		CHECK(str_eq(a[1].name, "in") && !a[1].type_name && a[1].offset == 8 &&
			      a[1].address_space == AQL_AS_CONSTANT && a[1].flags == AQL_ARG_IS_CONST &&
			      a[1].access == AQL_ACCESS_NONE &&
			      a[1].actual_access == AQL_ACCESS_READ_ONLY && a[1].pointee_align == 16,
		      "%s: arg 1", tag);
		CHECK(str_eq(a[2].name, "n") && str_eq(a[2].type_name, "uint") &&
			      a[2].kind == AQL_ARG_BY_VALUE && a[2].size == 4 &&
			      a[2].address_space == AQL_AS_NONE && a[2].flags == 0,
		      "%s: arg 2", tag);
		CHECK(!a[3].name && a[3].kind == AQL_ARG_DYNAMIC_SHARED_POINTER &&
			      a[3].address_space == AQL_AS_LOCAL && a[3].pointee_align == 4,
		      "%s: arg 3", tag);
		CHECK(a[4].kind == AQL_ARG_PIPE && a[4].flags == AQL_ARG_IS_PIPE &&
			      a[4].access == AQL_ACCESS_WRITE_ONLY &&
			      a[4].address_space == AQL_AS_GENERIC,
		      "%s: arg 4", tag);
		CHECK(a[5].kind == AQL_ARG_IMAGE && a[5].access == AQL_ACCESS_READ_ONLY &&
			      a[5].address_space == AQL_AS_PRIVATE,
		      "%s: arg 5", tag);
		CHECK(a[6].kind == AQL_ARG_SAMPLER && a[6].address_space == AQL_AS_REGION,
		      "%s: arg 6", tag);
		CHECK(a[7].kind == AQL_ARG_QUEUE && a[7].offset == 56, "%s: arg 7", tag);
		for (unsigned i = 0; i < COUNT_OF(hidden_kinds); i++)
			CHECK(a[REF_EXPLICIT + i].kind == hidden_enums[i] &&
				      a[REF_EXPLICIT + i].offset == 64 + 8 * i &&
				      a[REF_EXPLICIT + i].size == 8,
			      "%s: hidden arg %s: kind %d offset %u", tag, hidden_kinds[i],
			      a[REF_EXPLICIT + i].kind, a[REF_EXPLICIT + i].offset);
		CHECK(a[REF_ARGS - 1].kind == AQL_ARG_UNKNOWN, "%s: unknown kind gave %d", tag,
		      a[REF_ARGS - 1].kind);
	}
	k = &md->kernels[1];
	CHECK(str_eq(k->name, "k1_minimal") && str_eq(k->symbol, "k1_minimal.kd") && !k->language &&
		      k->arg_count == 0 && k->wavefront_size == 32 && k->vgpr_count == 1 &&
		      k->agpr_count == 0 && k->reqd_workgroup_size[0] == 0 &&
		      k->uses_dynamic_stack == -1 && k->workgroup_processor_mode == -1 &&
		      k->uniform_work_group_size == -1 && k->language_version[0] == 0,
	      "%s: k1 defaults", tag);
}

static aql_status parse_tree(const struct tn *t, aql_metadata **md)
{
	struct writer w = encode(t, 0, 0, 0, false);
	aql_status st = aql_metadata_parse(w.buf, w.len, md);

	free(w.buf);
	return st;
}

static void expect_ok(const char *what, const struct tn *t)
{
	aql_metadata *md = NULL;
	aql_status st = parse_tree(t, &md);

	CHECK(st == AQL_OK && md, "%s: %s: %s", what, aql_status_str(st), aql_error_message());
	aql_metadata_free(md);
}

/* Parsing t must fail with INVALID_CODE_OBJECT and a message holding want1/2. */
static void expect_fail(const char *what, const struct tn *t, const char *want1, const char *want2)
{
	aql_metadata *md = (aql_metadata *)&md;
	aql_status st = parse_tree(t, &md);
	const char *msg = aql_error_message();

	CHECK(st == AQL_ERR_INVALID_CODE_OBJECT && !md, "%s: got %s (%s)", what,
	      aql_status_str(st), msg);
	CHECK((!want1 || strstr(msg, want1)) && (!want2 || strstr(msg, want2)),
	      "%s: message \"%s\" lacks \"%s\" / \"%s\"", what, msg, want1 ? want1 : "",
	      want2 ? want2 : "");
	if (st == AQL_OK)
		aql_metadata_free(md);
}

/* ---- (a) the reader on its own ---- */

/* A copy of bytes in a buffer of exactly len bytes, so ASan sees over-reads. */
static uint8_t *exact_copy(const void *bytes, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	if (!p)
		exit(1);
	if (len)
		memcpy(p, bytes, len);
	return p;
}

struct rcase {
	const char *name;
	uint8_t b[24];
	size_t len;		/* whole encoding, elements of containers included */
	size_t header;		/* what one aql_mp_read consumes */
	enum aql_mp_type type;
	uint64_t u;		/* uint, bool; count of array/map; length of str/bin/ext */
	int64_t i;
	double f;
};

static const struct rcase rcases[] = {
	{ "fixint 0", { 0x00 }, 1, 1, AQL_MP_UINT, 0, 0, 0 },
	{ "fixint 127", { 0x7f }, 1, 1, AQL_MP_UINT, 127, 0, 0 },
	{ "uint8", { 0xcc, 0xff }, 2, 2, AQL_MP_UINT, 255, 0, 0 },
	{ "uint16", { 0xcd, 0x12, 0x34 }, 3, 3, AQL_MP_UINT, 0x1234, 0, 0 },
	{ "uint32", { 0xce, 0x89, 0xab, 0xcd, 0xef }, 5, 5, AQL_MP_UINT, 0x89abcdef, 0, 0 },
	{ "uint64", { 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe }, 9, 9, AQL_MP_UINT,
	  UINT64_MAX - 1, 0, 0 },
	{ "int8 +", { 0xd0, 0x7f }, 2, 2, AQL_MP_UINT, 127, 0, 0 },
	{ "int8 -", { 0xd0, 0x80 }, 2, 2, AQL_MP_INT, 0, -128, 0 },
	{ "int16 +", { 0xd1, 0x01, 0x00 }, 3, 3, AQL_MP_UINT, 256, 0, 0 },
	{ "int16 -", { 0xd1, 0x80, 0x00 }, 3, 3, AQL_MP_INT, 0, -32768, 0 },
	{ "int32 -", { 0xd2, 0xff, 0xff, 0xff, 0xfe }, 5, 5, AQL_MP_INT, 0, -2, 0 },
	{ "int32 +", { 0xd2, 0x00, 0x01, 0x00, 0x00 }, 5, 5, AQL_MP_UINT, 65536, 0, 0 },
	{ "int64 min", { 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0 }, 9, 9, AQL_MP_INT, 0, INT64_MIN, 0 },
	{ "int64 max", { 0xd3, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, 9, 9, AQL_MP_UINT,
	  INT64_MAX, 0, 0 },
	{ "negative fixint -1", { 0xff }, 1, 1, AQL_MP_INT, 0, -1, 0 },
	{ "negative fixint -32", { 0xe0 }, 1, 1, AQL_MP_INT, 0, -32, 0 },
	{ "nil", { 0xc0 }, 1, 1, AQL_MP_NIL, 0, 0, 0 },
	{ "false", { 0xc2 }, 1, 1, AQL_MP_BOOL, 0, 0, 0 },
	{ "true", { 0xc3 }, 1, 1, AQL_MP_BOOL, 1, 0, 0 },
	{ "float32", { 0xca, 0x3f, 0xc0, 0, 0 }, 5, 5, AQL_MP_FLOAT, 0, 0, 1.5 },
	{ "float64", { 0xcb, 0x40, 0x04, 0, 0, 0, 0, 0, 0 }, 9, 9, AQL_MP_FLOAT, 0, 0, 2.5 },
	{ "fixstr", { 0xa3, 'a', 'b', 'c' }, 4, 4, AQL_MP_STR, 3, 0, 0 },
	{ "empty fixstr", { 0xa0 }, 1, 1, AQL_MP_STR, 0, 0, 0 },
	{ "str8", { 0xd9, 2, 'h', 'i' }, 4, 4, AQL_MP_STR, 2, 0, 0 },
	{ "str16", { 0xda, 0, 1, 'x' }, 4, 4, AQL_MP_STR, 1, 0, 0 },
	{ "str32", { 0xdb, 0, 0, 0, 2, 'y', 'z' }, 7, 7, AQL_MP_STR, 2, 0, 0 },
	{ "bin8", { 0xc4, 2, 1, 2 }, 4, 4, AQL_MP_BIN, 2, 0, 0 },
	{ "bin16", { 0xc5, 0, 1, 9 }, 4, 4, AQL_MP_BIN, 1, 0, 0 },
	{ "bin32", { 0xc6, 0, 0, 0, 0 }, 5, 5, AQL_MP_BIN, 0, 0, 0 },
	{ "fixext1", { 0xd4, 5, 1 }, 3, 3, AQL_MP_EXT, 1, 5, 0 },
	{ "fixext2", { 0xd5, 5, 1, 2 }, 4, 4, AQL_MP_EXT, 2, 5, 0 },
	{ "fixext4", { 0xd6, 0xff, 1, 2, 3, 4 }, 6, 6, AQL_MP_EXT, 4, -1, 0 },
	{ "fixext8", { 0xd7, 1, 1, 2, 3, 4, 5, 6, 7, 8 }, 10, 10, AQL_MP_EXT, 8, 1, 0 },
	{ "fixext16", { 0xd8, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, 18, 18,
	  AQL_MP_EXT, 16, 2, 0 },
	{ "ext8", { 0xc7, 3, 0x80, 'a', 'b', 'c' }, 6, 6, AQL_MP_EXT, 3, -128, 0 },
	{ "ext16", { 0xc8, 0, 1, 7, 'x' }, 5, 5, AQL_MP_EXT, 1, 7, 0 },
	{ "ext32", { 0xc9, 0, 0, 0, 0, 7 }, 6, 6, AQL_MP_EXT, 0, 7, 0 },
	{ "fixarray", { 0x92, 1, 2 }, 3, 1, AQL_MP_ARRAY, 2, 0, 0 },
	{ "array16", { 0xdc, 0, 1, 0xc0 }, 4, 3, AQL_MP_ARRAY, 1, 0, 0 },
	{ "array32", { 0xdd, 0, 0, 0, 1, 0xc0 }, 6, 5, AQL_MP_ARRAY, 1, 0, 0 },
	{ "fixmap", { 0x81, 0xa1, 'a', 1 }, 4, 1, AQL_MP_MAP, 1, 0, 0 },
	{ "map16", { 0xde, 0, 1, 0xa1, 'a', 1 }, 6, 3, AQL_MP_MAP, 1, 0, 0 },
	{ "map32", { 0xdf, 0, 0, 0, 1, 0xa1, 'a', 0xc0 }, 8, 5, AQL_MP_MAP, 1, 0, 0 },
	{ "empty map32", { 0xdf, 0, 0, 0, 0 }, 5, 5, AQL_MP_MAP, 0, 0, 0 },
};

static void test_reader_types(void)
{
	for (unsigned c = 0; c < COUNT_OF(rcases); c++) {
		const struct rcase *rc = &rcases[c];
		uint8_t *buf = exact_copy(rc->b, rc->len);
		struct aql_mp_reader r;
		struct aql_mp_value v;
		enum aql_mp_type peeked = AQL_MP_NIL;
		aql_status st;
		bool same;

		aql_mp_init(&r, buf, rc->len);
		CHECK(aql_mp_peek(&r, &peeked) == AQL_OK && peeked == rc->type, "%s: peek %s",
		      rc->name, aql_mp_type_name(peeked));
		st = aql_mp_read(&r, &v);
		CHECK(st == AQL_OK && v.type == rc->type && v.offset == 0,
		      "%s: %s, type %s", rc->name, aql_error_message(), aql_mp_type_name(v.type));
		CHECK(aql_mp_offset(&r) == rc->header, "%s: consumed %zu, not %zu", rc->name,
		      aql_mp_offset(&r), rc->header);
		switch (rc->type) {
		case AQL_MP_UINT: same = v.u == rc->u; break;
		case AQL_MP_INT: same = v.i == rc->i; break;
		case AQL_MP_BOOL: same = v.b == (rc->u != 0); break;
		case AQL_MP_FLOAT: same = v.f == rc->f; break;
		case AQL_MP_STR: case AQL_MP_BIN:
			same = v.bytes.len == rc->u && v.bytes.ptr == buf + rc->len - rc->u;
			break;
		case AQL_MP_EXT:
			same = v.bytes.len == rc->u && v.bytes.ext_type == rc->i &&
			       v.bytes.ptr == buf + rc->len - rc->u;
			break;
		case AQL_MP_ARRAY: case AQL_MP_MAP:
			same = v.count == rc->u && r.depth == 1;
			break;
		default: same = true; break;
		}
		CHECK(st == AQL_OK && same, "%s: decoded value differs", rc->name);

		/* The whole value skips to its end. */
		aql_mp_init(&r, buf, rc->len);
		st = aql_mp_skip(&r);
		CHECK(st == AQL_OK && aql_mp_left(&r) == 0 && r.depth == 0, "%s: skip: %s, %zu left",
		      rc->name, aql_error_message(), aql_mp_left(&r));
		free(buf);

		/* Every strict prefix is refused, by read (header) or skip (payload). */
		for (size_t n = 0; n < rc->len; n++) {
			buf = exact_copy(rc->b, n);
			aql_mp_init(&r, buf, n);
			st = aql_mp_skip(&r);
			CHECK(st == AQL_ERR_INVALID_CODE_OBJECT, "%s: prefix of %zu bytes: %s",
			      rc->name, n, aql_status_str(st));
			free(buf);
		}
	}
}

static void test_reader_errors(void)
{
	static const uint8_t reserved[] = { 0xc1 };
	static const uint8_t neg[] = { 0xff }, big[] = { 0xcd, 0x01, 0x00 }, str[] = { 0xa1, 'x' };
	struct aql_mp_reader r;
	enum aql_mp_type type;
	uint64_t u = 0;
	uint8_t deep[40];
	bool b;

	aql_mp_init(&r, reserved, sizeof(reserved));
	CHECK(aql_mp_peek(&r, &type) == AQL_ERR_INVALID_CODE_OBJECT &&
		      strstr(aql_error_message(), "0xc1"),
	      "0xc1: %s", aql_error_message());
	aql_mp_init(&r, neg, sizeof(neg));
	CHECK(aql_mp_read_uint(&r, UINT64_MAX, &u) == AQL_ERR_INVALID_CODE_OBJECT &&
		      strstr(aql_error_message(), "negative integer"),
	      "negative as uint: %s", aql_error_message());
	aql_mp_init(&r, big, sizeof(big));
	CHECK(aql_mp_read_uint(&r, 255, &u) == AQL_ERR_INVALID_CODE_OBJECT &&
		      strstr(aql_error_message(), "256"),
	      "uint above max: %s", aql_error_message());
	aql_mp_init(&r, big, sizeof(big));
	CHECK(aql_mp_read_uint(&r, 256, &u) == AQL_OK && u == 256, "uint at max");
	aql_mp_init(&r, str, sizeof(str));
	CHECK(aql_mp_read_bool(&r, &b) == AQL_ERR_INVALID_CODE_OBJECT &&
		      strstr(aql_error_message(), "expected bool, found string"),
	      "string as bool: %s", aql_error_message());

	/* 32 nested arrays are the limit; 33 are refused, by read and by skip. */
	for (unsigned levels = 31; levels <= 33; levels++) {
		uint32_t count = 0;
		aql_status st = AQL_OK;

		memset(deep, 0x91, levels);
		deep[levels] = 0xc0;
		aql_mp_init(&r, deep, levels + 1);
		CHECK((aql_mp_skip(&r) == AQL_OK) == (levels <= 32), "skip %u levels: %s", levels,
		      aql_error_message());
		aql_mp_init(&r, deep, levels + 1);
		for (unsigned i = 0; i < levels && st == AQL_OK; i++)
			st = aql_mp_read_array(&r, &count);
		CHECK((st == AQL_OK) == (levels <= 32) &&
			      (st == AQL_OK || strstr(aql_error_message(), "deeper than 32")),
		      "read %u levels: %s", levels, aql_error_message());
	}
}

/* ---- (a) the parser on hand-encoded notes ---- */

static void test_widths(void)
{
	unsigned variants = 0;

	for (unsigned im = 0; im < 9; im++)
		for (unsigned sm = 0; sm < 4; sm++)
			for (unsigned bm = 0; bm < 3; bm++)
				for (int rot = 0; rot < 2; rot++) {
					struct writer w = encode(ref_note(), im, sm, bm, rot);
					aql_metadata *md = NULL;
					char tag[64];
					aql_status st;

					snprintf(tag, sizeof(tag), "widths int %u str %u box %u%s",
						 im, sm, bm, rot ? " rotating" : "");
					st = aql_metadata_parse(w.buf, w.len, &md);
					CHECK(st == AQL_OK, "%s: %s", tag, aql_error_message());
					if (st == AQL_OK)
						check_ref(tag, md);
					aql_metadata_free(md);
					free(w.buf);
					variants++;
				}
	printf("reference note parsed in %u encodings\n", variants);
}

/* Values of every type, nested, for unknown keys to carry. */
static struct tn *every_type(void)
{
	static const uint32_t bin_lens[] = { 0, 299, 70000 };
	static const uint32_t ext_lens[] = { 1, 2, 4, 8, 16, 3, 300, 70000 };
	struct tn *a = tarr(), *m = tmap(), *t;

	push(a, tnew(T_NIL));
	push(a, tbool(true));
	push(a, tu(UINT64_MAX));
	push(a, tneg(-5));
	push(a, tneg(INT64_MIN));
	t = tnew(T_F32);
	t->f = 1.5;
	push(a, t);
	t = tnew(T_F64);
	t->f = -2.25;
	push(a, t);
	push(a, tstr("a string"));
	for (unsigned i = 0; i < COUNT_OF(bin_lens); i++) {
		t = tnew(T_BIN);
		t->len = bin_lens[i];
		push(a, t);
	}
	for (unsigned i = 0; i < COUNT_OF(ext_lens); i++) {
		t = tnew(T_EXT);
		t->len = ext_lens[i];
		push(a, t);
	}
	put(m, "nested", a);
	put(m, ".offset", tstr("not the arg's offset"));
	return m;
}

static void test_unknown(void)
{
	struct tn *root = ref_note();
	struct tn *k0 = get(root, "amdhsa.kernels")->kids[0];
	struct tn *a0 = get(k0, ".args")->kids[0];
	aql_metadata *md = NULL;
	aql_status st;

	put(root, "amdhsa.future", every_type());
	put(root, "amdhsa.kernels.v2", tnew(T_NIL));
	put(k0, ".future_key", every_type());
	put(k0, ".kind", tstr("normal"));
	put(k0, ".vec_type_hint", tstr("float4"));
	put(k0, ".device_enqueue_symbol", tstr("k0.enqueue"));
	put(k0, ".cluster_dims", tu_array(3, (const uint32_t[]){ 1, 1, 1 }));
	put(a0, ".value_type", tstr("f32"));
	put(a0, ".future", every_type());
	st = parse_tree(root, &md);
	CHECK(st == AQL_OK, "unknown keys: %s", aql_error_message());
	if (st == AQL_OK)
		check_ref("unknown keys", md);
	aql_metadata_free(md);

	/* An unknown address space or access spelling reads as absent. */
	root = ref_note();
	k0 = get(root, "amdhsa.kernels")->kids[0];
	put(get(k0, ".args")->kids[3], ".address_space", tstr("scratch_v2"));
	put(get(k0, ".args")->kids[3], ".access", tstr("sometimes"));
	md = NULL;
	st = parse_tree(root, &md);
	CHECK(st == AQL_OK, "unknown spellings: %s", aql_error_message());
	if (st == AQL_OK) {
		const aql_kernel_arg *a = &md->kernels[0].args[3];

		CHECK(a->address_space == AQL_AS_NONE && a->access == AQL_ACCESS_NONE &&
			      a->kind == AQL_ARG_DYNAMIC_SHARED_POINTER && a->pointee_align == 4,
		      "unknown spellings: as %d access %d", a->address_space, a->access);
	}
	aql_metadata_free(md);
}

static const char *const kernel_required[] = {
	".name", ".symbol", ".kernarg_segment_size", ".group_segment_fixed_size",
	".private_segment_fixed_size", ".kernarg_segment_align", ".wavefront_size",
	".sgpr_count", ".vgpr_count", ".max_flat_workgroup_size",
};
static const char *const arg_required[] = { ".offset", ".size", ".value_kind" };

static void test_missing(void)
{
	char what[96];

	for (unsigned i = 0; i < COUNT_OF(kernel_required); i++) {
		struct tn *root = ref_note();

		del(get(root, "amdhsa.kernels")->kids[1], kernel_required[i]);
		snprintf(what, sizeof(what), "kernel without %s", kernel_required[i]);
		/* Without .name the kernel is named by its index. */
		expect_fail(what, root, kernel_required[i], i == 0 ? "kernel 1" : "k1_minimal");
	}
	for (unsigned i = 0; i < COUNT_OF(arg_required); i++) {
		struct tn *root = ref_note();
		struct tn *k0 = get(root, "amdhsa.kernels")->kids[0];

		del(get(k0, ".args")->kids[2], arg_required[i]);
		snprintf(what, sizeof(what), "arg without %s", arg_required[i]);
		expect_fail(what, root, arg_required[i], "kernel 0 \"k0\" arg 2");
	}
	{
		struct tn *root = ref_note();

		del(root, "amdhsa.version");
		expect_fail("no amdhsa.version", root, "amdhsa.version", "missing");
	}
	{
		/* Optional keys may all be absent: V3 had no target, a note no kernels. */
		struct tn *root = ref_note();
		aql_metadata *md = NULL;

		del(root, "amdhsa.target");
		del(root, "amdhsa.printf");
		del(root, "amdhsa.kernels");
		put(root, "amdhsa.version", tu_array(2, (const uint32_t[]){ 1, 0 }));
		CHECK(parse_tree(root, &md) == AQL_OK && md && !md->target && md->kernel_count == 0 &&
			      !md->kernels && md->printf_count == 0 && md->version[1] == 0,
		      "minimal note: %s", aql_error_message());
		aql_metadata_free(md);
	}
}

static struct tn *tf64(double f)
{
	struct tn *t = tnew(T_F64);

	t->f = f;
	return t;
}

static void test_wrong_types(void)
{
	/* Each case builds its value after ref_note() so the pool holds both. */
#define WRONG(what, where, key, value_expr, want)                                         \
	do {                                                                               \
		struct tn *root_ = ref_note();                                             \
		struct tn *k0_ = get(root_, "amdhsa.kernels")->kids[0];                    \
		struct tn *m_ = (where) == 0 ? root_ : (where) == 1 ? k0_ :                \
				get(k0_, ".args")->kids[2];                                \
		put(m_, key, value_expr);                                                  \
		expect_fail(what, root_, want, NULL);                                      \
	} while (0)

	WRONG("size as string", 1, ".kernarg_segment_size", tstr("400"), ".kernarg_segment_size");
	WRONG("negative sgpr count", 1, ".sgpr_count", tneg(-1), ".sgpr_count");
	WRONG("vgpr count above 32 bits", 1, ".vgpr_count", tu(1ull << 32), ".vgpr_count");
	WRONG("float size", 2, ".size", tf64(4.0), ".size");
	WRONG("name as integer", 1, ".name", tu(5), ".name");
	WRONG("args as map", 1, ".args", tmap(), ".args");
	WRONG("language_version of 1", 1, ".language_version", tu_array(1, (const uint32_t[]){ 2 }),
	      ".language_version");
	WRONG("reqd_workgroup_size of 4", 1, ".reqd_workgroup_size",
	      tu_array(4, (const uint32_t[]){ 1, 2, 3, 4 }), ".reqd_workgroup_size");
	WRONG("uses_dynamic_stack as string", 1, ".uses_dynamic_stack", tstr("no"),
	      ".uses_dynamic_stack");
	WRONG("value_kind as integer", 2, ".value_kind", tu(1), ".value_kind");
	WRONG("is_const as string", 2, ".is_const", tstr("yes"), ".is_const");
	WRONG("address_space as nil", 2, ".address_space", tnew(T_NIL), ".address_space");
	WRONG("version as string", 0, "amdhsa.version", tstr("1.2"), "amdhsa.version");
	WRONG("version of 3", 0, "amdhsa.version", tu_array(3, (const uint32_t[]){ 1, 2, 0 }),
	      "amdhsa.version");
	WRONG("version 2.0", 0, "amdhsa.version", tu_array(2, (const uint32_t[]){ 2, 0 }),
	      "amdhsa.version 2.0");
	WRONG("kernels as map", 0, "amdhsa.kernels", tmap(), "amdhsa.kernels");
	WRONG("target as bool", 0, "amdhsa.target", tbool(true), "amdhsa.target");
	WRONG("printf of integers", 0, "amdhsa.printf", push(tarr(), tu(1)), "amdhsa.printf[0]");
	WRONG("kernel as array", 0, "amdhsa.kernels", push(tarr(), tarr()), "kernel 0");
	WRONG("arg as string", 1, ".args", push(tarr(), tstr("x")), "kernel 0 \"k0\" arg 0");
	WRONG("wavefront 48", 1, ".wavefront_size", tu(48), ".wavefront_size");
	WRONG("kernarg align 12", 1, ".kernarg_segment_align", tu(12), ".kernarg_segment_align");
	WRONG("kernarg align 0", 1, ".kernarg_segment_align", tu(0), ".kernarg_segment_align");
	WRONG("args past kernarg size", 1, ".kernarg_segment_size", tu(REF_ARGS_END - 1),
	      ".kernarg_segment_size");
	WRONG("arg past kernarg size", 2, ".offset", tu(REF_KERNARG_SIZE - 3), "arg 2");
	WRONG("arg offset + size wraps 32 bits", 2, ".size", tu(UINT32_MAX), "arg 2");
#undef WRONG
	{
		/* Args may end exactly at the kernarg size. */
		struct tn *root = ref_note();

		put(get(root, "amdhsa.kernels")->kids[0], ".kernarg_segment_size", tu(REF_ARGS_END));
		expect_ok("args ending at the kernarg size", root);
	}

	{
		struct tn *root = ref_note();

		add(get(root, "amdhsa.kernels")->kids[1], ".sgpr_count", tu(3));
		expect_fail("duplicate kernel key", root, "duplicate key .sgpr_count", "k1_minimal");
	}
	{
		struct tn *root = ref_note();

		add(root, "amdhsa.target", tstr("again"));
		expect_fail("duplicate root key", root, "duplicate key amdhsa.target", NULL);
	}
	{
		/* A root that is not a map, and a map key that is not a string. */
		static const uint8_t not_map[] = { 0x91, 0xc0 };
		static const uint8_t int_key[] = { 0x81, 0x01, 0xc0 };
		aql_metadata *md = NULL;

		CHECK(aql_metadata_parse(not_map, sizeof(not_map), &md) == AQL_ERR_INVALID_CODE_OBJECT &&
			      strstr(aql_error_message(), "expected map"),
		      "root array: %s", aql_error_message());
		CHECK(aql_metadata_parse(int_key, sizeof(int_key), &md) == AQL_ERR_INVALID_CODE_OBJECT &&
			      strstr(aql_error_message(), "expected string"),
		      "integer key: %s", aql_error_message());
		CHECK(aql_metadata_parse(NULL, 4, &md) == AQL_ERR_INVALID_ARG, "NULL data");
		CHECK(aql_metadata_parse(not_map, 2, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
		CHECK(aql_metadata_parse(not_map, 0, &md) == AQL_ERR_INVALID_CODE_OBJECT && !md,
		      "empty note");
	}
}

/* levels nested arrays as the value of key in the map picked by where. */
static void nest(int where, unsigned levels, bool ok)
{
	struct tn *root = ref_note();
	struct tn *m = where == 0 ? root : get(root, "amdhsa.kernels")->kids[0];
	struct tn *v = tnew(T_NIL);
	char what[64];

	for (unsigned i = 0; i < levels; i++)
		v = push(i % 2 ? tarr() : tmap(), v);
	/* Maps need string keys: give each a name. */
	for (struct tn *t = v; t->type != T_NIL; t = t->kids[0])
		if (t->type == T_MAP)
			t->keys[0] = "k";
	put(m, where == 0 ? "x.deep" : ".x_deep", v);
	snprintf(what, sizeof(what), "%u levels under %s", levels, where ? "a kernel" : "the root");
	if (ok)
		expect_ok(what, root);
	else
		expect_fail(what, root, "deeper than 32", NULL);
}

static void test_nesting(void)
{
	/* The root map is level 1; amdhsa.kernels[0] is level 3. */
	nest(0, 31, true);
	nest(0, 32, false);
	nest(1, 29, true);
	nest(1, 30, false);
}

static void test_huge_lengths(void)
{
	static const struct {
		const char *name;
		uint8_t b[40];
		size_t len;
	} cases[] = {
		{ "root map32 of 2^32-1 pairs", { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0 }, 6 },
		{ "root map16 of 65535 pairs", { 0xde, 0xff, 0xff, 0xa1, 'x', 0xc0 }, 6 },
		{ "key str32 of 2^32-1 bytes", { 0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a' }, 7 },
		{ "kernels array32 of 2^32-1", { 0x81, 0xae, 'a', 'm', 'd', 'h', 's', 'a', '.', 'k', 'e',
		  'r', 'n', 'e', 'l', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 0x80 }, 22 },
		{ "kernels array16 of 65535", { 0x81, 0xae, 'a', 'm', 'd', 'h', 's', 'a', '.', 'k', 'e',
		  'r', 'n', 'e', 'l', 's', 0xdc, 0xff, 0xff, 0x80, 0x80 }, 21 },
		{ "printf array32 of 2^31", { 0x81, 0xad, 'a', 'm', 'd', 'h', 's', 'a', '.', 'p', 'r',
		  'i', 'n', 't', 'f', 0xdd, 0x80, 0, 0, 0, 0xa0 }, 21 },
		{ "unknown bin32 of 2^32-1", { 0x81, 0xa1, 'x', 0xc6, 0xff, 0xff, 0xff, 0xff, 0 }, 9 },
		{ "unknown ext32 of 2^32-1", { 0x81, 0xa1, 'x', 0xc9, 0xff, 0xff, 0xff, 0xff, 1, 0 },
		  10 },
		{ "unknown str16 past the end", { 0x81, 0xa1, 'x', 0xda, 0x00, 0x10, 'a' }, 7 },
		{ "unknown array of 3 in 2 bytes", { 0x81, 0xa1, 'x', 0x93, 0xc0, 0xc0 }, 6 },
		{ "unknown map of 2 in 3 bytes", { 0x81, 0xa1, 'x', 0x82, 0xa0, 0xc0, 0xa0 }, 7 },
	};

	for (unsigned i = 0; i < COUNT_OF(cases); i++) {
		uint8_t *buf = exact_copy(cases[i].b, cases[i].len);
		aql_metadata *md = NULL;
		aql_status st = aql_metadata_parse(buf, cases[i].len, &md);

		CHECK(st == AQL_ERR_INVALID_CODE_OBJECT && !md, "%s: %s", cases[i].name,
		      aql_status_str(st));
		free(buf);
	}
	{
		/* A long but honest array of nils is fine (written by hand: the tree is small). */
		struct writer w = { 0 };
		aql_metadata *md = NULL;

		w_box(&w, true, 2);
		w_str(&w, "amdhsa.version");
		w_box(&w, false, 2);
		w_uint(&w, 1);
		w_uint(&w, 1);
		w_str(&w, "x.nils");
		w_byte(&w, 0xdd);
		w_be(&w, 10000, 4);
		for (int i = 0; i < 10000; i++)
			w_byte(&w, 0xc0);
		CHECK(aql_metadata_parse(w.buf, w.len, &md) == AQL_OK && md->version[1] == 1,
		      "10000 nils: %s", aql_error_message());
		aql_metadata_free(md);
		free(w.buf);
	}
}

/* Every strict prefix of note fails cleanly. */
static void truncate_all(const char *tag, const uint8_t *note, size_t size)
{
	unsigned bad = 0;

	for (size_t n = 0; n < size; n++) {
		uint8_t *buf = exact_copy(note, n);
		aql_metadata *md = NULL;
		aql_status st = aql_metadata_parse(buf, n, &md);

		if (st != AQL_ERR_INVALID_CODE_OBJECT || md) {
			if (!bad++)
				fprintf(stderr, "%s: prefix of %zu bytes gave %s\n", tag, n,
					aql_status_str(st));
			aql_metadata_free(md);
		}
		free(buf);
	}
	CHECK(bad == 0, "%s: %u of %zu prefixes not refused", tag, bad, size);
}

static void test_truncation(void)
{
	struct writer w = encode(ref_note(), 0, 0, 0, false);

	truncate_all("reference note", w.buf, w.len);
	free(w.buf);
	w = encode(ref_note(), 4, 3, 2, false);
	truncate_all("reference note, widest encodings", w.buf, w.len);
	free(w.buf);
}

/* Corrupt each byte a few ways: parse must succeed or fail cleanly. */
static void test_flips(void)
{
	static const uint8_t values[] = { 0xc1, 0xdf, 0xdd, 0xdb, 0xc6, 0xc9, 0xc0, 0x00, 0xff };
	struct writer w = encode(ref_note(), 0, 0, 0, true);
	unsigned ok = 0, refused = 0, other = 0;

	for (size_t at = 0; at < w.len; at++) {
		for (unsigned v = 0; v < COUNT_OF(values) + 2; v++) {
			uint8_t *buf = exact_copy(w.buf, w.len);
			aql_metadata *md = NULL;
			aql_status st;

			if (v < COUNT_OF(values))
				buf[at] = values[v];
			else
				buf[at] ^= v == COUNT_OF(values) ? 0x01 : 0x80;
			st = aql_metadata_parse(buf, w.len, &md);
			if (st == AQL_OK && md)
				ok++;
			else if (st == AQL_ERR_INVALID_CODE_OBJECT && !md)
				refused++;
			else
				other++;
			aql_metadata_free(md);
			free(buf);
		}
	}
	CHECK(other == 0 && refused > 0, "byte flips: %u parsed, %u refused, %u otherwise", ok,
	      refused, other);
	free(w.buf);
}

static void test_trailing(void)
{
	struct writer w = encode(ref_note(), 0, 0, 0, false);
	size_t len = w.len;
	aql_metadata *md = NULL;

	for (int i = 0; i < 8; i++)
		w_byte(&w, 0);
	CHECK(aql_metadata_parse(w.buf, len + 3, &md) == AQL_OK, "3 bytes of padding: %s",
	      aql_error_message());
	aql_metadata_free(md);
	md = NULL;
	CHECK(aql_metadata_parse(w.buf, len + 7, &md) == AQL_OK, "7 bytes of padding: %s",
	      aql_error_message());
	aql_metadata_free(md);
	md = NULL;
	CHECK(aql_metadata_parse(w.buf, len + 8, &md) == AQL_ERR_INVALID_CODE_OBJECT && !md,
	      "8 trailing zero bytes accepted");
	w.buf[len + 1] = 1;
	CHECK(aql_metadata_parse(w.buf, len + 3, &md) == AQL_ERR_INVALID_CODE_OBJECT && !md,
	      "non-zero trailing byte accepted");
	free(w.buf);
}

static void test_names(void)
{
	for (int k = 1; k < AQL_ARG_KIND_COUNT; k++) {
		const char *name = aql_arg_kind_name((enum aql_arg_kind)k);

		CHECK(strcmp(name, "unknown") &&
			      aql_arg_kind_from_name(name, strlen(name)) == (enum aql_arg_kind)k,
		      "kind %d spelled %s does not round-trip", k, name);
	}
	for (unsigned i = 0; i < COUNT_OF(hidden_kinds); i++)
		CHECK(!strcmp(aql_arg_kind_name(hidden_enums[i]), hidden_kinds[i]), "%s",
		      hidden_kinds[i]);
	CHECK(!strcmp(aql_arg_kind_name(AQL_ARG_BY_VALUE), "by_value") &&
		      !strcmp(aql_arg_kind_name(AQL_ARG_HIDDEN_BLOCK_COUNT_X), "hidden_block_count_x") &&
		      !strcmp(aql_arg_kind_name(AQL_ARG_UNKNOWN), "unknown") &&
		      !strcmp(aql_arg_kind_name(AQL_ARG_KIND_COUNT), "unknown") &&
		      !strcmp(aql_arg_kind_name((enum aql_arg_kind)-1), "unknown"),
	      "kind names");
	CHECK(aql_arg_kind_from_name("by_valu", 7) == AQL_ARG_UNKNOWN &&
		      aql_arg_kind_from_name("by_values", 9) == AQL_ARG_UNKNOWN &&
		      aql_arg_kind_from_name("by_values", 8) == AQL_ARG_BY_VALUE,
	      "kind lookup compares lengths");
	CHECK(!strcmp(aql_address_space_name(AQL_AS_GLOBAL), "global") &&
		      !strcmp(aql_address_space_name(AQL_AS_LOCAL), "local") &&
		      !strcmp(aql_address_space_name(AQL_AS_REGION), "region") &&
		      !strcmp(aql_address_space_name(AQL_AS_NONE), "none") &&
		      !strcmp(aql_address_space_name((enum aql_address_space)7), "unknown"),
	      "address space names");
	CHECK(!strcmp(aql_access_name(AQL_ACCESS_READ_ONLY), "read_only") &&
		      !strcmp(aql_access_name(AQL_ACCESS_WRITE_ONLY), "write_only") &&
		      !strcmp(aql_access_name(AQL_ACCESS_READ_WRITE), "read_write") &&
		      !strcmp(aql_access_name(AQL_ACCESS_NONE), "none") &&
		      !strcmp(aql_access_name((enum aql_access)4), "unknown"),
	      "access names");
}

/*
 * Bare arguments make a result larger than its note, so the parser's first
 * arena is too small: the pass that measured must lead to the same result.
 */
static void test_large_result(void)
{
	enum { KERNELS = 4, ARGS = 40 };
	static const uint32_t version[] = { 1, 2 };
	struct tn *root, *kernels;
	aql_metadata *md = NULL;
	struct writer w;
	int bad = 0;

	pool_used = 0;
	root = tmap();
	kernels = tarr();
	put(root, "amdhsa.version", tu_array(2, version));
	for (int k = 0; k < KERNELS; k++) {
		struct tn *kern = ref_kernel1(), *args = tarr();

		put(kern, ".kernarg_segment_size", tu(ARGS));
		for (uint32_t i = 0; i < ARGS; i++)
			push(args, ref_arg(i, 1, i % 2 ? "pipe" : "queue"));
		put(kern, ".args", args);
		push(kernels, kern);
	}
	put(root, "amdhsa.kernels", kernels);
	w = encode(root, 0, 0, 0, false);
	/* The parser's first guess is 1.25 times the note and a little. */
	CHECK(KERNELS * (ARGS * sizeof(aql_kernel_arg) + sizeof(aql_kernel_metadata)) >
	      w.len + w.len / 4 + sizeof(aql_metadata) + 256,
	      "premise: %zu-byte note, %zu-byte result", w.len,
	      KERNELS * (ARGS * sizeof(aql_kernel_arg) + sizeof(aql_kernel_metadata)));
	CHECK_OK(aql_metadata_parse(w.buf, w.len, &md));
	for (uint32_t k = 0; md && k < md->kernel_count; k++) {
		const aql_kernel_metadata *km = &md->kernels[k];

		bad += strcmp(km->name, "k1_minimal") || strcmp(km->symbol, "k1_minimal.kd") ||
		       km->arg_count != ARGS;
		for (uint32_t i = 0; i < km->arg_count; i++)
			bad += km->args[i].offset != i || km->args[i].size != 1 ||
			       km->args[i].kind != (i % 2 ? AQL_ARG_PIPE : AQL_ARG_QUEUE);
	}
	CHECK(md && md->kernel_count == KERNELS && bad == 0, "%d fields differ", bad);
	aql_metadata_free(md);
	free(w.buf);
}

static void test_build(void)
{
	char name[] = "host_kernel", type[] = "int*";
	aql_kernel_arg args[2] = {
		{ .name = name, .type_name = type, .offset = 0, .size = 8,
		  .kind = AQL_ARG_GLOBAL_BUFFER, .address_space = AQL_AS_GLOBAL },
		{ .offset = 8, .size = 4, .kind = AQL_ARG_BY_VALUE },
	};
	aql_kernel_metadata k[2] = {
		{ .name = name, .symbol = "host_kernel.kd", .kernarg_segment_size = 16,
		  .kernarg_segment_align = 8, .arg_count = 2, .args = args,
		  .uses_dynamic_stack = -1 },
		{ .name = "empty", .symbol = NULL },
	};
	aql_metadata *md = NULL, *copy = NULL;
	struct writer w;

	CHECK_OK(aql_metadata_build(k, 2, &md));
	if (md) {
		/* The copy owns its strings. */
		name[0] = 'X';
		type[0] = 'X';
		CHECK(md->kernel_count == 2 && str_eq(md->kernels[0].name, "host_kernel") &&
			      md->kernels[0].name != name &&
			      str_eq(md->kernels[0].symbol, "host_kernel.kd") &&
			      md->kernels[0].arg_count == 2 && md->kernels[0].args != args &&
			      str_eq(md->kernels[0].args[0].type_name, "int*") &&
			      md->kernels[0].args[1].size == 4 && !md->kernels[0].args[1].name &&
			      md->kernels[0].kernarg_segment_size == 16 &&
			      md->kernels[0].uses_dynamic_stack == -1 &&
			      str_eq(md->kernels[1].name, "empty") && !md->kernels[1].symbol &&
			      !md->kernels[1].args && !md->target && md->version[0] == 0,
		      "built metadata differs");
		/* Everything lives in the one block md points to. */
		for (uint32_t i = 0; i < md->kernel_count; i++)
			CHECK((const char *)md->kernels[i].name > (const char *)md &&
				      (const char *)md->kernels[i].name < (const char *)md + 4096,
			      "kernel %u name outside the block", i);
		aql_metadata_free(md);
	}
	CHECK(aql_metadata_build(NULL, 1, &md) == AQL_ERR_INVALID_ARG, "NULL kernels");
	k[1].arg_count = 1;
	CHECK(aql_metadata_build(k, 2, &md) == AQL_ERR_INVALID_ARG, "NULL args");
	CHECK(aql_metadata_build(NULL, 0, &md) == AQL_OK && md->kernel_count == 0, "no kernels");
	aql_metadata_free(md);
	aql_metadata_free(NULL);

	/* A parsed note copies to an equal one. */
	w = encode(ref_note(), 0, 0, 0, false);
	md = NULL;
	if (aql_metadata_parse(w.buf, w.len, &md) == AQL_OK) {
		CHECK_OK(aql_metadata_copy(md, &copy));
		aql_metadata_free(md);
		if (copy)
			check_ref("copy of the reference", copy);
		aql_metadata_free(copy);
	} else {
		CHECK(0, "reference note: %s", aql_error_message());
	}
	free(w.buf);
}

/* ---- (b) code objects, compared with llvm-readelf ---- */

#define NT_AMDGPU_METADATA 32

/* The NT_AMDGPU_METADATA descriptor of the ELF at path, in an exact-size buffer. */
static uint8_t *read_note(const char *path, size_t *size)
{
	uint8_t *desc = NULL;
	Elf_Scn *scn = NULL;
	Elf *elf;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return NULL;
	}
	elf = elf_begin(fd, ELF_C_READ, NULL);
	while (elf && !desc && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;
		GElf_Nhdr nhdr;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		while (data && !desc &&
		       (off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
			if (nhdr.n_type == NT_AMDGPU_METADATA && nhdr.n_namesz == 7 &&
			    !memcmp((const char *)data->d_buf + name_off, "AMDGPU", 7)) {
				desc = exact_copy((const char *)data->d_buf + desc_off, nhdr.n_descsz);
				*size = nhdr.n_descsz;
			}
		}
	}
	if (!desc)
		fprintf(stderr, "%s: no NT_AMDGPU_METADATA note (%s)\n", path, elf_errmsg(-1));
	elf_end(elf);
	close(fd);
	return desc;
}

/*
 * The YAML subset llvm-readelf prints for the note: block maps and
 * sequences by indentation, flow "[]", scalars plain, 'single' or "double"
 * quoted, or tagged ("!str n").
 */
enum ytype { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ytype type;
	char *text;
	unsigned n, cap;
	char **keys;
	struct ynode **kids;
};

struct yline {
	int indent;
	char *text;
};

struct yparser {
	struct yline *lines;
	size_t n, i;
};

static struct ynode *y_new(enum ytype type)
{
	struct ynode *y = calloc(1, sizeof(*y));

	if (!y)
		exit(1);
	y->type = type;
	return y;
}

static void y_add(struct ynode *y, char *key, struct ynode *kid)
{
	if (y->n == y->cap) {
		y->cap = y->cap ? 2 * y->cap : 8;
		y->keys = realloc(y->keys, y->cap * sizeof(*y->keys));
		y->kids = realloc(y->kids, y->cap * sizeof(*y->kids));
		if (!y->keys || !y->kids)
			exit(1);
	}
	y->keys[y->n] = key;
	y->kids[y->n++] = kid;
}

static void y_free(struct ynode *y)
{
	if (!y)
		return;
	for (unsigned i = 0; i < y->n; i++) {
		free(y->keys[i]);
		y_free(y->kids[i]);
	}
	free(y->keys);
	free(y->kids);
	free(y->text);
	free(y);
}

static struct ynode *y_get(const struct ynode *map, const char *key)
{
	if (!map || map->type != Y_MAP)
		return NULL;
	for (unsigned i = 0; i < map->n; i++)
		if (!strcmp(map->keys[i], key))
			return map->kids[i];
	return NULL;
}

/* Decode one scalar from raw[0..len). */
static char *y_decode(const char *raw, size_t len)
{
	char *out = malloc(len + 1), *o = out;
	const char *end = raw + len;

	if (!out)
		exit(1);
	while (raw < end && *raw == ' ')
		raw++;
	while (end > raw && end[-1] == ' ')
		end--;
	if (raw < end && *raw == '!') {		/* a tag, e.g. !str */
		while (raw < end && *raw != ' ')
			raw++;
		while (raw < end && *raw == ' ')
			raw++;
	}
	if (raw < end && *raw == '\'') {
		for (raw++; raw < end; raw++) {
			if (*raw == '\'' && raw + 1 < end && raw[1] == '\'')
				*o++ = *raw++;
			else if (*raw == '\'')
				break;
			else
				*o++ = *raw;
		}
	} else if (raw < end && *raw == '"') {
		for (raw++; raw < end && *raw != '"'; raw++) {
			if (*raw != '\\' || raw + 1 >= end) {
				*o++ = *raw;
				continue;
			}
			switch (*++raw) {
			case 'n': *o++ = '\n'; break;
			case 't': *o++ = '\t'; break;
			case 'r': *o++ = '\r'; break;
			case '0': *o++ = '\0'; break;
			case 'x':
				if (raw + 2 < end) {
					char hex[3] = { raw[1], raw[2], 0 };

					*o++ = (char)strtol(hex, NULL, 16);
					raw += 2;
				}
				break;
			default: *o++ = *raw; break;
			}
		}
	} else {
		memcpy(o, raw, (size_t)(end - raw));
		o += end - raw;
	}
	*o = '\0';
	return out;
}

/* A value on the same line as its key or dash: flow [..] or a scalar. */
static struct ynode *y_inline(const char *raw)
{
	struct ynode *y;

	while (*raw == ' ')
		raw++;
	if (*raw == '[') {
		const char *p = raw + 1, *close = strrchr(raw, ']');

		y = y_new(Y_SEQ);
		while (close && p < close) {
			const char *comma = memchr(p, ',', (size_t)(close - p));
			const char *stop = comma ? comma : close;
			struct ynode *s = y_new(Y_SCALAR);

			s->text = y_decode(p, (size_t)(stop - p));
			if (*s->text || comma)
				y_add(y, NULL, s);
			else
				y_free(s);
			p = stop + 1;
		}
		return y;
	}
	if (*raw == '{' && raw[1] == '}')
		return y_new(Y_MAP);
	y = y_new(Y_SCALAR);
	y->text = y_decode(raw, strlen(raw));
	return y;
}

static bool y_is_item(const char *t)
{
	return t[0] == '-' && (t[1] == ' ' || t[1] == '\0');
}

/* Length of the key if t is "key: value" or "key:", else 0. */
static size_t y_key_len(const char *t)
{
	const char *colon;
	size_t len;

	if (*t == '\'' || *t == '"' || *t == '[' || *t == '!')
		return 0;
	colon = strstr(t, ": ");
	if (colon)
		return (size_t)(colon - t);
	len = strlen(t);
	return len && t[len - 1] == ':' ? len - 1 : 0;
}

static struct ynode *y_block(struct yparser *p, int indent)
{
	struct yline *l = &p->lines[p->i];
	struct ynode *y;

	if (y_is_item(l->text)) {
		y = y_new(Y_SEQ);
		while (p->i < p->n && p->lines[p->i].indent == indent &&
		       y_is_item(p->lines[p->i].text)) {
			char *t;

			l = &p->lines[p->i];
			t = l->text + 1;
			while (*t == ' ')
				t++;
			if (!*t) {		/* "-" alone: the item is the block below */
				p->i++;
				if (p->i < p->n && p->lines[p->i].indent > indent)
					y_add(y, NULL, y_block(p, p->lines[p->i].indent));
				else
					y_add(y, NULL, y_inline(""));
				continue;
			}
			/* The item's text is a line of its own, indented past the dash. */
			l->indent = indent + (int)(t - l->text);
			l->text = t;
			y_add(y, NULL, y_block(p, l->indent));
		}
		return y;
	}
	if (y_key_len(l->text)) {
		y = y_new(Y_MAP);
		while (p->i < p->n && p->lines[p->i].indent == indent &&
		       !y_is_item(p->lines[p->i].text) && y_key_len(p->lines[p->i].text)) {
			size_t klen;
			char *key, *value;

			l = &p->lines[p->i++];
			klen = y_key_len(l->text);
			key = y_decode(l->text, klen);
			value = l->text + klen + 1;
			while (*value == ' ')
				value++;
			if (*value)
				y_add(y, key, y_inline(value));
			else if (p->i < p->n && (p->lines[p->i].indent > indent ||
						 (p->lines[p->i].indent == indent &&
						  y_is_item(p->lines[p->i].text))))
				y_add(y, key, y_block(p, p->lines[p->i].indent));
			else
				y_add(y, key, y_inline(""));
		}
		return y;
	}
	p->i++;
	return y_inline(l->text);
}

/* Run readelf --notes and parse the document it prints; NULL on failure. */
static struct ynode *readelf_notes(const char *readelf, const char *path)
{
	char cmd[4096], *out = NULL, *line, *save;
	size_t len = 0, cap = 0, got;
	struct yparser p = { 0 };
	struct ynode *root = NULL;
	bool in_doc = false;
	FILE *f;
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s' --notes '%s'", readelf, path);
	f = popen(cmd, "r");
	if (!f) {
		fprintf(stderr, "popen %s: %s\n", cmd, strerror(errno));
		return NULL;
	}
	do {
		if (len + 65536 > cap) {
			cap = cap ? 2 * cap : 1 << 20;
			out = realloc(out, cap + 1);
			if (!out)
				exit(1);
		}
		got = fread(out + len, 1, cap - len, f);
		len += got;
	} while (got > 0);
	rc = pclose(f);
	out[len] = '\0';
	if (rc != 0) {
		fprintf(stderr, "%s exited with %d\n", cmd, rc);
		free(out);
		return NULL;
	}
	p.lines = calloc(len / 2 + 1, sizeof(*p.lines));
	if (!p.lines)
		exit(1);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *t = line;

		while (*t == ' ')
			t++;
		if (!in_doc) {
			in_doc = !strcmp(t, "---");
			continue;
		}
		if (!strcmp(t, "..."))
			break;
		if (!*t)
			continue;
		p.lines[p.n++] = (struct yline){ .indent = (int)(t - line), .text = t };
	}
	if (p.n) {
		root = y_block(&p, p.lines[0].indent);
		if (p.i != p.n) {
			fprintf(stderr, "%s: YAML line %zu not understood: %s\n", cmd, p.i,
				p.lines[p.i].text);
			y_free(root);
			root = NULL;
		}
	} else {
		fprintf(stderr, "%s: no YAML document in the output\n", cmd);
	}
	free(p.lines);
	free(out);
	return root;
}

static bool y_u32(const struct ynode *y, uint32_t *out)
{
	char *end;
	unsigned long long v;

	if (!y || y->type != Y_SCALAR || !*y->text)
		return false;
	errno = 0;
	v = strtoull(y->text, &end, 10);
	if (*end || errno || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

static int y_truth(const struct ynode *y)
{
	if (!y || y->type != Y_SCALAR)
		return -2;
	if (!strcmp(y->text, "true") || !strcmp(y->text, "1"))
		return 1;
	if (!strcmp(y->text, "false") || !strcmp(y->text, "0"))
		return 0;
	return -2;
}

struct field_ref {
	const char *key;
	size_t off;
	unsigned n;		/* arrays: element count; flags: the bit */
};

#define KOFF(m) offsetof(aql_kernel_metadata, m)
#define AOFF(m) offsetof(aql_kernel_arg, m)

static const struct field_ref kernel_u32s[] = {
	{ ".kernarg_segment_size", KOFF(kernarg_segment_size), 1 },
	{ ".kernarg_segment_align", KOFF(kernarg_segment_align), 1 },
	{ ".group_segment_fixed_size", KOFF(group_segment_fixed_size), 1 },
	{ ".private_segment_fixed_size", KOFF(private_segment_fixed_size), 1 },
	{ ".max_flat_workgroup_size", KOFF(max_flat_workgroup_size), 1 },
	{ ".wavefront_size", KOFF(wavefront_size), 1 },
	{ ".sgpr_count", KOFF(sgpr_count), 1 },
	{ ".vgpr_count", KOFF(vgpr_count), 1 },
	{ ".agpr_count", KOFF(agpr_count), 1 },
	{ ".sgpr_spill_count", KOFF(sgpr_spill_count), 1 },
	{ ".vgpr_spill_count", KOFF(vgpr_spill_count), 1 },
	{ ".language_version", KOFF(language_version), 2 },
	{ ".reqd_workgroup_size", KOFF(reqd_workgroup_size), 3 },
	{ ".workgroup_size_hint", KOFF(workgroup_size_hint), 3 },
};
static const struct field_ref kernel_strs[] = {
	{ ".name", KOFF(name), 0 }, { ".symbol", KOFF(symbol), 0 }, { ".language", KOFF(language), 0 },
};
static const struct field_ref kernel_tristates[] = {
	{ ".uses_dynamic_stack", KOFF(uses_dynamic_stack), 0 },
	{ ".workgroup_processor_mode", KOFF(workgroup_processor_mode), 0 },
	{ ".uniform_work_group_size", KOFF(uniform_work_group_size), 0 },
};
static const char *const kernel_not_stored[] = {
	".args", ".vec_type_hint", ".kind", ".device_enqueue_symbol",
};
static const struct field_ref arg_u32s[] = {
	{ ".offset", AOFF(offset), 1 }, { ".size", AOFF(size), 1 },
	{ ".pointee_align", AOFF(pointee_align), 1 },
};
static const struct field_ref arg_strs[] = {
	{ ".name", AOFF(name), 0 }, { ".type_name", AOFF(type_name), 0 },
};
static const struct field_ref arg_flags[] = {
	{ ".is_const", 0, AQL_ARG_IS_CONST }, { ".is_restrict", 0, AQL_ARG_IS_RESTRICT },
	{ ".is_volatile", 0, AQL_ARG_IS_VOLATILE }, { ".is_pipe", 0, AQL_ARG_IS_PIPE },
};
static const char *const arg_not_stored[] = { ".value_type" };

static bool in_refs(const struct field_ref *refs, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(refs[i].key, key))
			return true;
	return false;
}

static bool in_names(const char *const *names, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], key))
			return true;
	return false;
}

static unsigned unchecked_keys;

/* Keys readelf printed that the parser does not store. */
static void note_unchecked(const char *where, const struct ynode *map, const char *const *skip,
			   size_t nskip, const struct field_ref *const *refs, const size_t *nrefs,
			   size_t ntables)
{
	for (unsigned i = 0; i < map->n; i++) {
		bool known = in_names(skip, nskip, map->keys[i]);

		for (size_t t = 0; t < ntables && !known; t++)
			known = in_refs(refs[t], nrefs[t], map->keys[i]);
		if (!known && unchecked_keys++ < 20)
			printf("note: %s: readelf key %s is not compared\n", where, map->keys[i]);
	}
}

static void compare_u32s(const char *where, const struct ynode *map, const void *obj,
			 const struct field_ref *refs, size_t n)
{
	for (size_t f = 0; f < n; f++) {
		const uint32_t *got = (const uint32_t *)((const char *)obj + refs[f].off);
		const struct ynode *y = y_get(map, refs[f].key);
		uint32_t want[3] = { 0, 0, 0 };
		bool ok = true;

		if (y && refs[f].n == 1) {
			ok = y_u32(y, &want[0]);
		} else if (y) {
			ok = y->type == Y_SEQ && y->n == refs[f].n;
			for (unsigned i = 0; ok && i < refs[f].n; i++)
				ok = y_u32(y->kids[i], &want[i]);
		}
		for (unsigned i = 0; ok && i < refs[f].n; i++)
			ok = got[i] == want[i];
		CHECK(ok, "%s %s: readelf %s, parsed %u", where, refs[f].key,
		      y ? (y->type == Y_SCALAR ? y->text : "[...]") : "(absent)", got[0]);
	}
}

static void compare_strs(const char *where, const struct ynode *map, const void *obj,
			 const struct field_ref *refs, size_t n)
{
	for (size_t f = 0; f < n; f++) {
		const char *got = *(const char *const *)((const char *)obj + refs[f].off);
		const struct ynode *y = y_get(map, refs[f].key);

		CHECK(y ? y->type == Y_SCALAR && got && !strcmp(got, y->text) : !got,
		      "%s %s: readelf \"%s\", parsed \"%s\"", where, refs[f].key,
		      y && y->text ? y->text : "(absent)", got ? got : "(NULL)");
	}
}

/* A name-valued key: readelf's spelling against the parsed enum's name. */
static void compare_name(const char *where, const struct ynode *map, const char *key,
			 const char *got, bool absent)
{
	const struct ynode *y = y_get(map, key);

	CHECK(y ? y->type == Y_SCALAR && !strcmp(y->text, got) : absent,
	      "%s %s: readelf %s, parsed %s", where, key, y && y->text ? y->text : "(absent)", got);
}

static void compare_arg(const char *where, const struct ynode *y, const aql_kernel_arg *a)
{
	static const struct field_ref *const tables[] = { arg_u32s, arg_strs, arg_flags };
	static const size_t sizes[] = { COUNT_OF(arg_u32s), COUNT_OF(arg_strs), COUNT_OF(arg_flags) };
	uint32_t flags = 0;

	CHECK(y->type == Y_MAP, "%s: readelf entry is not a map", where);
	if (y->type != Y_MAP)
		return;
	compare_u32s(where, y, a, arg_u32s, COUNT_OF(arg_u32s));
	compare_strs(where, y, a, arg_strs, COUNT_OF(arg_strs));
	compare_name(where, y, ".value_kind", aql_arg_kind_name(a->kind), false);
	CHECK(a->kind != AQL_ARG_UNKNOWN, "%s: .value_kind %s not known to the parser", where,
	      y_get(y, ".value_kind") ? y_get(y, ".value_kind")->text : "(absent)");
	compare_name(where, y, ".address_space", aql_address_space_name(a->address_space),
		     a->address_space == AQL_AS_NONE);
	compare_name(where, y, ".access", aql_access_name(a->access), a->access == AQL_ACCESS_NONE);
	compare_name(where, y, ".actual_access", aql_access_name(a->actual_access),
		     a->actual_access == AQL_ACCESS_NONE);
	for (size_t f = 0; f < COUNT_OF(arg_flags); f++)
		if (y_truth(y_get(y, arg_flags[f].key)) == 1)
			flags |= arg_flags[f].n;
	CHECK(flags == a->flags, "%s: flags: readelf 0x%x, parsed 0x%x", where, flags, a->flags);
	note_unchecked(where, y, (const char *const[]){ ".value_kind", ".address_space", ".access",
							".actual_access", arg_not_stored[0] },
		       5, tables, sizes, 3);
}

static void compare_kernel(const char *where, const struct ynode *y, const aql_kernel_metadata *k)
{
	static const struct field_ref *const tables[] = { kernel_u32s, kernel_strs, kernel_tristates };
	static const size_t sizes[] = { COUNT_OF(kernel_u32s), COUNT_OF(kernel_strs),
					COUNT_OF(kernel_tristates) };
	const struct ynode *args;
	char at[192];

	CHECK(y->type == Y_MAP, "%s: readelf entry is not a map", where);
	if (y->type != Y_MAP)
		return;
	compare_u32s(where, y, k, kernel_u32s, COUNT_OF(kernel_u32s));
	compare_strs(where, y, k, kernel_strs, COUNT_OF(kernel_strs));
	for (size_t f = 0; f < COUNT_OF(kernel_tristates); f++) {
		int8_t got = *(const int8_t *)((const char *)k + kernel_tristates[f].off);
		const struct ynode *t = y_get(y, kernel_tristates[f].key);

		CHECK(t ? y_truth(t) == got : got == -1, "%s %s: readelf %s, parsed %d", where,
		      kernel_tristates[f].key, t ? t->text : "(absent)", got);
	}
	args = y_get(y, ".args");
	CHECK(args ? args->type == Y_SEQ && args->n == k->arg_count : k->arg_count == 0,
	      "%s: readelf has %u args, parsed %u", where, args ? args->n : 0, k->arg_count);
	for (uint32_t i = 0; args && args->type == Y_SEQ && i < args->n && i < k->arg_count; i++) {
		snprintf(at, sizeof(at), "%s arg %u", where, i);
		compare_arg(at, args->kids[i], &k->args[i]);
	}
	note_unchecked(where, y, kernel_not_stored, COUNT_OF(kernel_not_stored), tables, sizes, 3);
}

static void compare_with_readelf(const char *fixture, const struct ynode *root,
				 const aql_metadata *md)
{
	const struct ynode *y;
	char where[160];

	y = y_get(root, "amdhsa.version");
	CHECK(y && y->type == Y_SEQ && y->n == 2, "%s: readelf has no amdhsa.version", fixture);
	if (y && y->type == Y_SEQ && y->n == 2) {
		uint32_t v0 = 0, v1 = 0;

		CHECK(y_u32(y->kids[0], &v0) && y_u32(y->kids[1], &v1) && v0 == md->version[0] &&
			      v1 == md->version[1],
		      "%s: version: readelf %u.%u, parsed %u.%u", fixture, v0, v1, md->version[0],
		      md->version[1]);
	}
	y = y_get(root, "amdhsa.target");
	CHECK(y ? md->target && !strcmp(y->text, md->target) : !md->target,
	      "%s: target: readelf %s, parsed %s", fixture, y ? y->text : "(absent)",
	      md->target ? md->target : "(NULL)");
	y = y_get(root, "amdhsa.printf");
	CHECK(y ? y->type == Y_SEQ && y->n == md->printf_count : md->printf_count == 0,
	      "%s: printf: readelf %u formats, parsed %u", fixture, y ? y->n : 0, md->printf_count);
	for (uint32_t i = 0; y && y->type == Y_SEQ && i < y->n && i < md->printf_count; i++)
		CHECK(!strcmp(y->kids[i]->text, md->printf_formats[i]),
		      "%s: printf %u: readelf \"%s\", parsed \"%s\"", fixture, i, y->kids[i]->text,
		      md->printf_formats[i]);
	y = y_get(root, "amdhsa.kernels");
	CHECK(y && y->type == Y_SEQ && y->n == md->kernel_count,
	      "%s: readelf has %u kernels, parsed %u", fixture, y ? y->n : 0, md->kernel_count);
	for (uint32_t i = 0; y && y->type == Y_SEQ && i < y->n && i < md->kernel_count; i++) {
		snprintf(where, sizeof(where), "%s kernel %u (%s)", fixture, i,
			 md->kernels[i].name ? md->kernels[i].name : "?");
		compare_kernel(where, y->kids[i], &md->kernels[i]);
	}
}

static const aql_kernel_metadata *find_kernel(const aql_metadata *md, const char *name)
{
	for (uint32_t i = 0; i < md->kernel_count; i++)
		if (!strcmp(md->kernels[i].name, name))
			return &md->kernels[i];
	return NULL;
}

static const aql_kernel_arg *find_arg(const aql_kernel_metadata *k, const char *name)
{
	for (uint32_t i = 0; k && i < k->arg_count; i++)
		if (k->args[i].name && !strcmp(k->args[i].name, name))
			return &k->args[i];
	return NULL;
}

static bool has_kind(const aql_kernel_metadata *k, enum aql_arg_kind kind)
{
	for (uint32_t i = 0; k && i < k->arg_count; i++)
		if (k->args[i].kind == kind)
			return true;
	return false;
}

/* What kernels.cl must give, whatever readelf says. */
static void spot_check(const char *fx, int version, const aql_metadata *md)
{
	static const char *const names[] = {
		"vec_add", "by_value", "local_args", "qualifiers", "with_printf", "offsets",
		"uses_global", "fixed_size", "size_hint", "images", "pipes", "device_queue", "no_args",
	};
	bool wave32 = strstr(fx, "gfx10") || strstr(fx, "gfx11");
	const aql_kernel_metadata *k;
	const aql_kernel_arg *a;

	CHECK(md->version[0] == 1 && md->version[1] == (version >= 5 ? 2u : 1u),
	      "%s: version %u.%u for V%d", fx, md->version[0], md->version[1], version);
	CHECK(md->target && !strncmp(md->target, "amdgcn-amd-amdhsa--gfx", 22), "%s: target %s", fx,
	      md->target ? md->target : "(NULL)");
	CHECK(md->kernel_count == COUNT_OF(names), "%s: %u kernels", fx, md->kernel_count);
	for (unsigned i = 0; i < COUNT_OF(names); i++) {
		char symbol[64];

		k = find_kernel(md, names[i]);
		snprintf(symbol, sizeof(symbol), "%s.kd", names[i]);
		CHECK(k && !strcmp(k->symbol, symbol) && k->wavefront_size == (wave32 ? 32u : 64u) &&
			      k->kernarg_segment_align >= 4 && str_eq(k->language, "OpenCL C") &&
			      k->language_version[0] == 2,
		      "%s: kernel %s", fx, names[i]);
		if (k && version >= 5)
			CHECK(k->uses_dynamic_stack >= 0, "%s: %s: V5 has .uses_dynamic_stack", fx,
			      names[i]);
		if (k && strstr(fx, "v5_gfx940"))
			CHECK(k->uniform_work_group_size == 1, "%s: %s: uniform work groups", fx,
			      names[i]);
	}
	k = find_kernel(md, "vec_add");
	a = find_arg(k, "out");
	CHECK(a && a->kind == AQL_ARG_GLOBAL_BUFFER && a->address_space == AQL_AS_GLOBAL &&
		      a->flags == AQL_ARG_IS_RESTRICT && a->offset == 0 && a->size == 8,
	      "%s: vec_add out", fx);
	a = find_arg(k, "a");
	CHECK(a && a->flags == AQL_ARG_IS_CONST && a->offset == 8, "%s: vec_add a", fx);
	a = find_arg(k, "n");
	CHECK(a && a->kind == AQL_ARG_BY_VALUE && a->size == 4 && a->offset == 24 &&
		      str_eq(a->type_name, "uint"),
	      "%s: vec_add n", fx);
	k = find_kernel(md, "by_value");
	a = find_arg(k, "p");
	CHECK(a && a->size == 24 && a->offset % 8 == 0 && str_eq(a->type_name, "struct pair"),
	      "%s: by_value p", fx);
	a = find_arg(k, "v4");
	CHECK(a && a->size == 16 && a->offset % 16 == 0, "%s: by_value v4", fx);
	a = find_arg(k, "c");
	CHECK(a && a->size == 1 && a->offset == 8, "%s: by_value c", fx);
	CHECK(find_arg(k, "u3") && find_arg(k, "u3")->size == 4, "%s: by_value u3", fx);
	k = find_kernel(md, "local_args");
	a = find_arg(k, "b");
	CHECK(k && k->group_segment_fixed_size >= 256 && a &&
		      a->kind == AQL_ARG_DYNAMIC_SHARED_POINTER && a->address_space == AQL_AS_LOCAL,
	      "%s: local_args", fx);
	k = find_kernel(md, "qualifiers");
	CHECK(find_arg(k, "v") && find_arg(k, "v")->flags == AQL_ARG_IS_VOLATILE, "%s: volatile", fx);
	a = find_arg(k, "c");
	CHECK(a && a->flags == (AQL_ARG_IS_CONST | AQL_ARG_IS_RESTRICT), "%s: const restrict", fx);
	a = find_arg(k, "k");
	CHECK(a && a->address_space == AQL_AS_CONSTANT, "%s: __constant", fx);
	k = find_kernel(md, "with_printf");
	CHECK(has_kind(k, AQL_ARG_HIDDEN_PRINTF_BUFFER) && md->printf_count == 1 &&
		      strstr(md->printf_formats[0], "x = %d, id = %u"),
	      "%s: printf", fx);
	k = find_kernel(md, "offsets");
	CHECK(has_kind(k, AQL_ARG_HIDDEN_GLOBAL_OFFSET_X) &&
		      has_kind(k, AQL_ARG_HIDDEN_BLOCK_COUNT_X) == (version >= 5),
	      "%s: offsets hidden args", fx);
	k = find_kernel(md, "fixed_size");
	CHECK(k && k->reqd_workgroup_size[0] == 64 && k->reqd_workgroup_size[1] == 2 &&
		      k->reqd_workgroup_size[2] == 1 && k->max_flat_workgroup_size == 128,
	      "%s: fixed_size", fx);
	k = find_kernel(md, "size_hint");
	CHECK(k && k->workgroup_size_hint[0] == 128 && k->workgroup_size_hint[1] == 1,
	      "%s: size_hint", fx);
	k = find_kernel(md, "images");
	CHECK(find_arg(k, "in") && find_arg(k, "in")->kind == AQL_ARG_IMAGE &&
		      find_arg(k, "in")->access == AQL_ACCESS_READ_ONLY && find_arg(k, "out") &&
		      find_arg(k, "out")->access == AQL_ACCESS_WRITE_ONLY && find_arg(k, "smp") &&
		      find_arg(k, "smp")->kind == AQL_ARG_SAMPLER,
	      "%s: images", fx);
	k = find_kernel(md, "pipes");
	CHECK(find_arg(k, "in") && find_arg(k, "in")->kind == AQL_ARG_PIPE &&
		      (find_arg(k, "in")->flags & AQL_ARG_IS_PIPE),
	      "%s: pipes", fx);
	k = find_kernel(md, "device_queue");
	CHECK(find_arg(k, "q") && find_arg(k, "q")->kind == AQL_ARG_QUEUE, "%s: queue", fx);
	k = find_kernel(md, "no_args");
	CHECK(k && k->arg_count == 0 && k->kernarg_segment_size == 0, "%s: no_args", fx);
}

static void spot_check_many(const char *fx, const aql_metadata *md)
{
	unsigned bad = 0;

	for (uint32_t i = 0; i < md->kernel_count; i++) {
		char name[32];

		snprintf(name, sizeof(name), "many_%04u", i);
		bad += strcmp(md->kernels[i].name, name) != 0 || md->kernels[i].arg_count == 0;
	}
	CHECK(md->kernel_count >= 100 && bad == 0, "%s: %u kernels, %u misnamed", fx,
	      md->kernel_count, bad);
}

static void test_fixture(const char *name, const char *path, int version, const char *readelf,
			 const char *dump_dir)
{
	aql_metadata *md = NULL;
	struct ynode *yaml;
	uint8_t *note;
	size_t size = 0;
	aql_status st;

	note = read_note(path, &size);
	CHECK(note, "%s: no metadata note in %s", name, path);
	if (!note)
		return;
	if (dump_dir) {
		char out[4096];
		FILE *f;

		snprintf(out, sizeof(out), "%s/%s.note", dump_dir, name);
		f = fopen(out, "wb");
		CHECK(f && fwrite(note, 1, size, f) == size && fclose(f) == 0, "write %s", out);
	}
	st = aql_metadata_parse(note, size, &md);
	CHECK(st == AQL_OK, "%s: %s", name, aql_error_message());
	yaml = readelf_notes(readelf, path);
	CHECK(yaml, "%s: cannot read %s --notes", name, readelf);
	if (st == AQL_OK && yaml) {
		unsigned failed = th_failed;

		compare_with_readelf(name, yaml, md);
		if (!strcmp(name, "many"))
			spot_check_many(name, md);
		else
			spot_check(name, version, md);
		printf("%s: %u kernels, %zu-byte note, %s\n", name, md->kernel_count, size,
		       th_failed == failed ? "matches readelf" : "MISMATCH");
	}
	if (strcmp(name, "many"))
		truncate_all(name, note, size);
	y_free(yaml);
	aql_metadata_free(md);
	free(note);
}

/* The reference note with unknown keys of every type, mixed widths: a fuzz seed. */
static void dump_reference(const char *dir)
{
	struct tn *root = ref_note();
	struct tn *extra = every_type(), *nested = get(extra, "nested");
	struct writer w;
	char path[4096];
	unsigned kept = 0;
	FILE *f;

	/* Seeds stay small: leave out the 70000-byte bin and ext. */
	for (unsigned i = 0; i < nested->n; i++)
		if (nested->kids[i]->len < 65536)
			nested->kids[kept++] = nested->kids[i];
	nested->n = kept;
	put(get(root, "amdhsa.kernels")->kids[0], ".future_key", extra);
	put(root, "amdhsa.future", extra);
	w = encode(root, 0, 0, 0, true);
	snprintf(path, sizeof(path), "%s/reference.note", dir);
	f = fopen(path, "wb");
	CHECK(f && fwrite(w.buf, 1, w.len, f) == w.len && fclose(f) == 0, "write %s", path);
	free(w.buf);
}

int main(int argc, char **argv)
{
	const char *dump_dir = NULL;
	unsigned fixtures = 0, missing = 0;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--dump-notes") && i + 1 < argc)
			dump_dir = argv[i + 1];

	test_reader_types();
	test_reader_errors();
	test_widths();
	test_unknown();
	test_missing();
	test_wrong_types();
	test_nesting();
	test_huge_lengths();
	test_truncation();
	test_flips();
	test_trailing();
	test_names();
	test_build();
	test_large_result();
	if (dump_dir)
		dump_reference(dump_dir);

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--co") && i + 4 < argc) {
			test_fixture(argv[i + 1], argv[i + 2], atoi(argv[i + 3]), argv[i + 4], dump_dir);
			fixtures++;
			i += 4;
		} else if (!strcmp(argv[i], "--missing") && i + 1 < argc) {
			printf("SKIP fixture %s\n", argv[++i]);
			missing++;
		} else if (!strcmp(argv[i], "--dump-notes") && i + 1 < argc) {
			i++;
		} else {
			fprintf(stderr, "usage: %s [--co NAME PATH VERSION READELF]... "
				"[--missing WHY]... [--dump-notes DIR]\n", argv[0]);
			return 2;
		}
	}
	printf("%u code objects compared with llvm-readelf, %u not built\n", fixtures, missing);
	return th_finish();
}
