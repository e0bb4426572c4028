/* SPDX-License-Identifier: MIT */
/*
 * NT_AMDGPU_METADATA parser. The result is one allocation, so that
 * aql_metadata_free() is one free(). One pass fills an arena sized from
 * the note (its strings are shorter than the note, its structures about as
 * large), then gives back what it did not use. A pass that runs out of
 * room still validates the note and adds up what it needs, so a second
 * pass with exactly that much is the rare case.
 */
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "loader/metadata_impl.h"
#include "loader/msgpack.h"
#include "loader/type.h"

/* A spelling with its length, so lookups compare lengths before bytes. */
struct name {
	const char *s;
	uint8_t len;
};

#define N(str) { str, sizeof(str) - 1 }

static const struct name arg_kind_names[AQL_ARG_KIND_COUNT] = {
	[AQL_ARG_UNKNOWN] = N("unknown"),
	[AQL_ARG_BY_VALUE] = N("by_value"),
	[AQL_ARG_GLOBAL_BUFFER] = N("global_buffer"),
	[AQL_ARG_DYNAMIC_SHARED_POINTER] = N("dynamic_shared_pointer"),
	[AQL_ARG_SAMPLER] = N("sampler"),
	[AQL_ARG_IMAGE] = N("image"),
	[AQL_ARG_PIPE] = N("pipe"),
	[AQL_ARG_QUEUE] = N("queue"),
	[AQL_ARG_HIDDEN_GLOBAL_OFFSET_X] = N("hidden_global_offset_x"),
	[AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y] = N("hidden_global_offset_y"),
	[AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z] = N("hidden_global_offset_z"),
	[AQL_ARG_HIDDEN_NONE] = N("hidden_none"),
	[AQL_ARG_HIDDEN_PRINTF_BUFFER] = N("hidden_printf_buffer"),
	[AQL_ARG_HIDDEN_HOSTCALL_BUFFER] = N("hidden_hostcall_buffer"),
	[AQL_ARG_HIDDEN_DEFAULT_QUEUE] = N("hidden_default_queue"),
	[AQL_ARG_HIDDEN_COMPLETION_ACTION] = N("hidden_completion_action"),
	[AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG] = N("hidden_multigrid_sync_arg"),
	[AQL_ARG_HIDDEN_BLOCK_COUNT_X] = N("hidden_block_count_x"),
	[AQL_ARG_HIDDEN_BLOCK_COUNT_Y] = N("hidden_block_count_y"),
	[AQL_ARG_HIDDEN_BLOCK_COUNT_Z] = N("hidden_block_count_z"),
	[AQL_ARG_HIDDEN_GROUP_SIZE_X] = N("hidden_group_size_x"),
	[AQL_ARG_HIDDEN_GROUP_SIZE_Y] = N("hidden_group_size_y"),
	[AQL_ARG_HIDDEN_GROUP_SIZE_Z] = N("hidden_group_size_z"),
	[AQL_ARG_HIDDEN_REMAINDER_X] = N("hidden_remainder_x"),
	[AQL_ARG_HIDDEN_REMAINDER_Y] = N("hidden_remainder_y"),
	[AQL_ARG_HIDDEN_REMAINDER_Z] = N("hidden_remainder_z"),
	[AQL_ARG_HIDDEN_GRID_DIMS] = N("hidden_grid_dims"),
	[AQL_ARG_HIDDEN_HEAP_V1] = N("hidden_heap_v1"),
	[AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE] = N("hidden_dynamic_lds_size"),
	[AQL_ARG_HIDDEN_PRIVATE_BASE] = N("hidden_private_base"),
	[AQL_ARG_HIDDEN_SHARED_BASE] = N("hidden_shared_base"),
	[AQL_ARG_HIDDEN_QUEUE_PTR] = N("hidden_queue_ptr"),
	[AQL_ARG_HIDDEN_TOOL_CORRELATION_ID] = N("hidden_tool_correlation_id"),
};

static const struct name address_space_names[] = {
	[AQL_AS_NONE] = N("none"),
	[AQL_AS_PRIVATE] = N("private"),
	[AQL_AS_GLOBAL] = N("global"),
	[AQL_AS_CONSTANT] = N("constant"),
	[AQL_AS_LOCAL] = N("local"),
	[AQL_AS_GENERIC] = N("generic"),
	[AQL_AS_REGION] = N("region"),
};

static const struct name access_names[] = {
	[AQL_ACCESS_NONE] = N("none"),
	[AQL_ACCESS_READ_ONLY] = N("read_only"),
	[AQL_ACCESS_WRITE_ONLY] = N("write_only"),
	[AQL_ACCESS_READ_WRITE] = N("read_write"),
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

const char *aql_arg_kind_name(enum aql_arg_kind kind)
{
	return (unsigned)kind < AQL_ARG_KIND_COUNT ? arg_kind_names[kind].s : "unknown";
}

const char *aql_address_space_name(enum aql_address_space as)
{
	return (unsigned)as < COUNT_OF(address_space_names) ? address_space_names[as].s : "unknown";
}

const char *aql_access_name(enum aql_access access)
{
	return (unsigned)access < COUNT_OF(access_names) ? access_names[access].s : "unknown";
}

/* Index of s[0..len) in names[first..n), or 0 (the "absent/unknown" entry). */
static unsigned lookup_name(const struct name *names, unsigned first, unsigned n,
			    const char *s, size_t len)
{
	for (unsigned i = first; i < n; i++)
		if (names[i].len == len && memcmp(names[i].s, s, len) == 0)
			return i;
	return 0;
}

/*
 * s[0..len) spells the literal lit. Testing the length first keeps the
 * compare inside s, and a constant size lets the compiler inline it.
 */
#define SPELLS(s, len, lit) \
	((len) == sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)
#define TRY(s, len, lit, id) \
	do { if (SPELLS(s, len, lit)) return id; } while (0)

/*
 * Every argument has a .value_kind, so this runs as often as the key
 * lookups and gets the same treatment: a jump on the length, then inline
 * compares. The spellings are arg_kind_names'; the tests look up each one.
 */
static enum aql_arg_kind arg_kind_of(const char *s, size_t len)
{
#define KIND(lit, id) TRY(s, len, lit, AQL_ARG_##id)
	switch (len) {
	case 4: KIND("pipe", PIPE); break;
	case 5: KIND("image", IMAGE); KIND("queue", QUEUE); break;
	case 7: KIND("sampler", SAMPLER); break;
	case 8: KIND("by_value", BY_VALUE); break;
	case 11: KIND("hidden_none", HIDDEN_NONE); break;
	case 13: KIND("global_buffer", GLOBAL_BUFFER); break;
	case 14: KIND("hidden_heap_v1", HIDDEN_HEAP_V1); break;
	case 16:
		KIND("hidden_grid_dims", HIDDEN_GRID_DIMS);
		KIND("hidden_queue_ptr", HIDDEN_QUEUE_PTR);
		break;
	case 18:
		KIND("hidden_remainder_x", HIDDEN_REMAINDER_X);
		KIND("hidden_remainder_y", HIDDEN_REMAINDER_Y);
		KIND("hidden_remainder_z", HIDDEN_REMAINDER_Z);
		KIND("hidden_shared_base", HIDDEN_SHARED_BASE);
		break;
	case 19:
		KIND("hidden_group_size_x", HIDDEN_GROUP_SIZE_X);
		KIND("hidden_group_size_y", HIDDEN_GROUP_SIZE_Y);
		KIND("hidden_group_size_z", HIDDEN_GROUP_SIZE_Z);
		KIND("hidden_private_base", HIDDEN_PRIVATE_BASE);
		break;
	case 20:
		KIND("hidden_block_count_x", HIDDEN_BLOCK_COUNT_X);
		KIND("hidden_block_count_y", HIDDEN_BLOCK_COUNT_Y);
		KIND("hidden_block_count_z", HIDDEN_BLOCK_COUNT_Z);
		KIND("hidden_printf_buffer", HIDDEN_PRINTF_BUFFER);
		KIND("hidden_default_queue", HIDDEN_DEFAULT_QUEUE);
		break;
	case 22:
		KIND("hidden_global_offset_x", HIDDEN_GLOBAL_OFFSET_X);
		KIND("hidden_global_offset_y", HIDDEN_GLOBAL_OFFSET_Y);
		KIND("hidden_global_offset_z", HIDDEN_GLOBAL_OFFSET_Z);
		KIND("dynamic_shared_pointer", DYNAMIC_SHARED_POINTER);
		KIND("hidden_hostcall_buffer", HIDDEN_HOSTCALL_BUFFER);
		break;
	case 23: KIND("hidden_dynamic_lds_size", HIDDEN_DYNAMIC_LDS_SIZE); break;
	case 24: KIND("hidden_completion_action", HIDDEN_COMPLETION_ACTION); break;
	case 25: KIND("hidden_multigrid_sync_arg", HIDDEN_MULTIGRID_SYNC_ARG); break;
	case 26: KIND("hidden_tool_correlation_id", HIDDEN_TOOL_CORRELATION_ID); break;
	}
	return AQL_ARG_UNKNOWN;
#undef KIND
}

enum aql_arg_kind aql_arg_kind_from_name(const char *s, size_t len)
{
	return arg_kind_of(s, len);
}

/*
 * Bump allocator. With base NULL it only measures; with base set it hands
 * out memory from [base, base + cap). Running out while filling would mean
 * the two passes diverged: it is recorded, never written past.
 */
struct arena {
	char *base;
	uint64_t cap;
	uint64_t used;		/* 64-bit: counts times sizes cannot wrap */
	bool overflow;
};

static void *arena_take(struct arena *a, uint64_t size, size_t align)
{
	uint64_t off = (a->used + align - 1) & ~(uint64_t)(align - 1);

	a->used = off + size;
	if (!a->base)
		return NULL;
	if (a->used > a->cap) {
		a->overflow = true;
		return NULL;
	}
	return a->base + off;
}

/* count elements of size bytes: 64-bit, so no count can wrap the total. */
static void *arena_array(struct arena *a, uint32_t count, size_t size, size_t align)
{
	return arena_take(a, (uint64_t)count * size, align);
}

static const char *arena_str(struct arena *a, const char *s, size_t len)
{
	char *p = arena_take(a, len + 1, 1);

	if (p) {
		memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

struct parser {
	struct aql_mp_reader r;
	struct arena a;
	uint32_t kernel;	/* index of the kernel being read, for messages */
};

/* Put where it happened in front of the reason already recorded. */
__attribute__((format(printf, 2, 3)))
static aql_status wrap(aql_status st, const char *fmt, ...)
{
	char reason[512], where[256];
	va_list ap;

	snprintf(reason, sizeof(reason), "%s", aql_error_message());
	va_start(ap, fmt);
	vsnprintf(where, sizeof(where), fmt, ap);
	va_end(ap);
	return aql_fail(st, "%s: %s", where, reason);
}

/* Unknown keys are quoted in messages up to this many bytes. */
#define KEY_SHOWN(len) ((int)((len) < 64 ? (len) : 64))

static bool key_is(const char *key, uint32_t len, const char *want)
{
	return strlen(want) == len && memcmp(key, want, len) == 0;
}

/* How a key's value is read and where it is stored. */
enum field_kind {
	F_STR,			/* const char * */
	F_U32,			/* uint32_t */
	F_U32_2,		/* uint32_t[2] from an array of exactly 2 */
	F_U32_3,		/* uint32_t[3] from an array of exactly 3 */
	F_TRISTATE,		/* int8_t 0/1 from a bool or an integer */
	F_ARGS,			/* the .args array */
	F_KIND,			/* enum aql_arg_kind */
	F_AS,			/* enum aql_address_space */
	F_ACCESS,		/* enum aql_access */
	F_FLAG,			/* a bit of uint32_t flags, from a bool or an integer */
};

struct field {
	const char *key;
	uint8_t kind;
	uint16_t off;
	uint32_t bit;
};

/* Kernel keys; the order is the order "required key ... is missing" checks them. */
enum kernel_key {
	KK_NAME, KK_SYMBOL, KK_KERNARG_SIZE, KK_GROUP_SIZE, KK_PRIVATE_SIZE,
	KK_KERNARG_ALIGN, KK_WAVEFRONT_SIZE, KK_SGPR_COUNT, KK_VGPR_COUNT, KK_MAX_FLAT_SIZE,
	KK_ARGS, KK_LANGUAGE, KK_LANGUAGE_VERSION, KK_AGPR_COUNT, KK_SGPR_SPILL_COUNT,
	KK_VGPR_SPILL_COUNT, KK_REQD_SIZE, KK_SIZE_HINT, KK_USES_DYNAMIC_STACK, KK_WGP_MODE,
	KK_UNIFORM_SIZE, KK_COUNT
};

/* KK_NAME .. KK_MAX_FLAT_SIZE */
#define KERNEL_REQUIRED ((1u << (KK_MAX_FLAT_SIZE + 1)) - 1)

#define KFIELD(id, key, kind, member) \
	[id] = { key, kind, offsetof(aql_kernel_metadata, member), 0 }
static const struct field kernel_fields[KK_COUNT] = {
	KFIELD(KK_NAME, ".name", F_STR, name),
	KFIELD(KK_SYMBOL, ".symbol", F_STR, symbol),
	KFIELD(KK_KERNARG_SIZE, ".kernarg_segment_size", F_U32, kernarg_segment_size),
	KFIELD(KK_GROUP_SIZE, ".group_segment_fixed_size", F_U32, group_segment_fixed_size),
	KFIELD(KK_PRIVATE_SIZE, ".private_segment_fixed_size", F_U32, private_segment_fixed_size),
	KFIELD(KK_KERNARG_ALIGN, ".kernarg_segment_align", F_U32, kernarg_segment_align),
	KFIELD(KK_WAVEFRONT_SIZE, ".wavefront_size", F_U32, wavefront_size),
	KFIELD(KK_SGPR_COUNT, ".sgpr_count", F_U32, sgpr_count),
	KFIELD(KK_VGPR_COUNT, ".vgpr_count", F_U32, vgpr_count),
	KFIELD(KK_MAX_FLAT_SIZE, ".max_flat_workgroup_size", F_U32, max_flat_workgroup_size),
	KFIELD(KK_ARGS, ".args", F_ARGS, args),
	KFIELD(KK_LANGUAGE, ".language", F_STR, language),
	KFIELD(KK_LANGUAGE_VERSION, ".language_version", F_U32_2, language_version),
	KFIELD(KK_AGPR_COUNT, ".agpr_count", F_U32, agpr_count),
	KFIELD(KK_SGPR_SPILL_COUNT, ".sgpr_spill_count", F_U32, sgpr_spill_count),
	KFIELD(KK_VGPR_SPILL_COUNT, ".vgpr_spill_count", F_U32, vgpr_spill_count),
	KFIELD(KK_REQD_SIZE, ".reqd_workgroup_size", F_U32_3, reqd_workgroup_size),
	KFIELD(KK_SIZE_HINT, ".workgroup_size_hint", F_U32_3, workgroup_size_hint),
	KFIELD(KK_USES_DYNAMIC_STACK, ".uses_dynamic_stack", F_TRISTATE, uses_dynamic_stack),
	KFIELD(KK_WGP_MODE, ".workgroup_processor_mode", F_TRISTATE, workgroup_processor_mode),
	KFIELD(KK_UNIFORM_SIZE, ".uniform_work_group_size", F_TRISTATE, uniform_work_group_size),
};

/*
 * The kernel_fields index of key, or -1. A jump on the length leaves one to
 * three spellings to compare, each inline; the spellings here must be the
 * table's (the tests parse every key, so a slip shows as a missing key).
 */
static int kernel_key_of(const char *key, uint32_t len)
{
#define KEY(id, lit) TRY(key, len, lit, id)
	switch (len) {
	case 5: KEY(KK_NAME, ".name"); KEY(KK_ARGS, ".args"); break;
	case 7: KEY(KK_SYMBOL, ".symbol"); break;
	case 9: KEY(KK_LANGUAGE, ".language"); break;
	case 11:
		KEY(KK_SGPR_COUNT, ".sgpr_count");
		KEY(KK_VGPR_COUNT, ".vgpr_count");
		KEY(KK_AGPR_COUNT, ".agpr_count");
		break;
	case 15: KEY(KK_WAVEFRONT_SIZE, ".wavefront_size"); break;
	case 17:
		KEY(KK_SGPR_SPILL_COUNT, ".sgpr_spill_count");
		KEY(KK_VGPR_SPILL_COUNT, ".vgpr_spill_count");
		KEY(KK_LANGUAGE_VERSION, ".language_version");
		break;
	case 19: KEY(KK_USES_DYNAMIC_STACK, ".uses_dynamic_stack"); break;
	case 20:
		KEY(KK_REQD_SIZE, ".reqd_workgroup_size");
		KEY(KK_SIZE_HINT, ".workgroup_size_hint");
		break;
	case 21: KEY(KK_KERNARG_SIZE, ".kernarg_segment_size"); break;
	case 22: KEY(KK_KERNARG_ALIGN, ".kernarg_segment_align"); break;
	case 24:
		KEY(KK_MAX_FLAT_SIZE, ".max_flat_workgroup_size");
		KEY(KK_UNIFORM_SIZE, ".uniform_work_group_size");
		break;
	case 25:
		KEY(KK_GROUP_SIZE, ".group_segment_fixed_size");
		KEY(KK_WGP_MODE, ".workgroup_processor_mode");
		break;
	case 27: KEY(KK_PRIVATE_SIZE, ".private_segment_fixed_size"); break;
	}
	return -1;
}

/* Arg keys, in the order "required key ... is missing" checks them. */
enum arg_key {
	AK_OFFSET, AK_SIZE, AK_VALUE_KIND, AK_NAME, AK_TYPE_NAME, AK_POINTEE_ALIGN,
	AK_ADDRESS_SPACE, AK_ACCESS, AK_ACTUAL_ACCESS, AK_IS_CONST, AK_IS_RESTRICT,
	AK_IS_VOLATILE, AK_IS_PIPE, AK_COUNT
};

/* AK_OFFSET .. AK_VALUE_KIND */
#define ARG_REQUIRED ((1u << (AK_VALUE_KIND + 1)) - 1)

#define AFIELD(id, key, kind, member, bit) \
	[id] = { key, kind, offsetof(aql_kernel_arg, member), bit }
static const struct field arg_fields[AK_COUNT] = {
	AFIELD(AK_OFFSET, ".offset", F_U32, offset, 0),
	AFIELD(AK_SIZE, ".size", F_U32, size, 0),
	AFIELD(AK_VALUE_KIND, ".value_kind", F_KIND, kind, 0),
	AFIELD(AK_NAME, ".name", F_STR, name, 0),
	AFIELD(AK_TYPE_NAME, ".type_name", F_STR, type_name, 0),
	AFIELD(AK_POINTEE_ALIGN, ".pointee_align", F_U32, pointee_align, 0),
	AFIELD(AK_ADDRESS_SPACE, ".address_space", F_AS, address_space, 0),
	AFIELD(AK_ACCESS, ".access", F_ACCESS, access, 0),
	AFIELD(AK_ACTUAL_ACCESS, ".actual_access", F_ACCESS, actual_access, 0),
	AFIELD(AK_IS_CONST, ".is_const", F_FLAG, flags, AQL_ARG_IS_CONST),
	AFIELD(AK_IS_RESTRICT, ".is_restrict", F_FLAG, flags, AQL_ARG_IS_RESTRICT),
	AFIELD(AK_IS_VOLATILE, ".is_volatile", F_FLAG, flags, AQL_ARG_IS_VOLATILE),
	AFIELD(AK_IS_PIPE, ".is_pipe", F_FLAG, flags, AQL_ARG_IS_PIPE),
};

_Static_assert(KK_COUNT <= 32 && AK_COUNT <= 32, "seen-key masks are 32 bits");

/* The arg_fields index of key, or -1; as kernel_key_of(). */
static int arg_key_of(const char *key, uint32_t len)
{
	switch (len) {
	case 5: KEY(AK_SIZE, ".size"); KEY(AK_NAME, ".name"); break;
	case 7: KEY(AK_OFFSET, ".offset"); KEY(AK_ACCESS, ".access"); break;
	case 8: KEY(AK_IS_PIPE, ".is_pipe"); break;
	case 9: KEY(AK_IS_CONST, ".is_const"); break;
	case 10: KEY(AK_TYPE_NAME, ".type_name"); break;
	case 11: KEY(AK_VALUE_KIND, ".value_kind"); break;
	case 12:
		KEY(AK_IS_RESTRICT, ".is_restrict");
		KEY(AK_IS_VOLATILE, ".is_volatile");
		break;
	case 14:
		KEY(AK_ADDRESS_SPACE, ".address_space");
		KEY(AK_POINTEE_ALIGN, ".pointee_align");
		KEY(AK_ACTUAL_ACCESS, ".actual_access");
		break;
	}
	return -1;
#undef KEY
}

#undef TRY
#undef SPELLS

/* A bool, or an integer where non-zero means true (LLVM emits both). */
static aql_status read_truth(struct aql_mp_reader *r, bool *out)
{
	enum aql_mp_type type;
	uint64_t v;
	aql_status st;

	st = aql_mp_peek(r, &type);
	if (st != AQL_OK || type == AQL_MP_BOOL)
		return st ? st : aql_mp_read_bool(r, out);
	st = aql_mp_read_uint(r, UINT64_MAX, &v);
	if (st == AQL_OK)
		*out = v != 0;
	return st;
}

static aql_status read_u32_array(struct aql_mp_reader *r, uint32_t *dst, uint32_t want)
{
	uint32_t count;
	uint64_t v;
	aql_status st;

	st = aql_mp_read_array(r, &count);
	if (st != AQL_OK)
		return st;
	if (count != want)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "%u elements instead of %u",
				count, want);
	for (uint32_t i = 0; i < count; i++) {
		st = aql_mp_read_uint(r, UINT32_MAX, &v);
		if (st != AQL_OK)
			return st;
		dst[i] = (uint32_t)v;
	}
	aql_mp_leave(r);
	return AQL_OK;
}

/*
 * Read the value of a scalar field f into obj. Unknown spellings store 0.
 * Inlined into both key loops: it runs once per key, and as a call it cost
 * about as much as the read itself.
 */
__attribute__((always_inline))
static inline aql_status read_field(struct parser *p, const struct field *f, void *obj)
{
	char *dst = (char *)obj + f->off;
	const char *s;
	uint32_t len;
	uint64_t v;
	aql_status st;
	bool b;

	switch (f->kind) {
	case F_STR:
		st = aql_mp_read_str(&p->r, &s, &len);
		if (st == AQL_OK)
			*(const char **)dst = arena_str(&p->a, s, len);
		return st;
	case F_U32:
		st = aql_mp_read_uint(&p->r, UINT32_MAX, &v);
		if (st == AQL_OK)
			*(uint32_t *)dst = (uint32_t)v;
		return st;
	case F_U32_2:
		return read_u32_array(&p->r, (uint32_t *)dst, 2);
	case F_U32_3:
		return read_u32_array(&p->r, (uint32_t *)dst, 3);
	case F_TRISTATE:
		st = read_truth(&p->r, &b);
		if (st == AQL_OK)
			*(int8_t *)dst = b;
		return st;
	case F_FLAG:
		st = read_truth(&p->r, &b);
		if (st == AQL_OK && b)
			*(uint32_t *)dst |= f->bit;
		return st;
	case F_KIND:
	case F_AS:
	case F_ACCESS:
		st = aql_mp_read_str(&p->r, &s, &len);
		if (st != AQL_OK)
			return st;
		if (f->kind == F_KIND)
			*(enum aql_arg_kind *)dst = arg_kind_of(s, len);
		else if (f->kind == F_AS)
			*(enum aql_address_space *)dst = (enum aql_address_space)lookup_name(
				address_space_names, 1, COUNT_OF(address_space_names), s, len);
		else
			*(enum aql_access *)dst = (enum aql_access)
				lookup_name(access_names, 1, COUNT_OF(access_names), s, len);
		return AQL_OK;
	}
	return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "internal: field kind %u", f->kind);
}

/* The first required key (lowest index) that seen lacks. */
static const char *first_missing(const struct field *fields, uint32_t required, uint32_t seen)
{
	return fields[__builtin_ctz(required & ~seen)].key;
}

/* The furthest-reaching argument seen, checked against the kernarg size. */
struct arg_extent {
	uint64_t end;
	uint32_t index, offset, size;
};

static aql_status parse_arg(struct parser *p, uint32_t index, aql_kernel_arg *arg,
			    struct arg_extent *ext)
{
	const char *key;
	uint32_t count, len, seen = 0;
	aql_status st;
	int i;

	memset(arg, 0, sizeof(*arg));
	st = aql_mp_read_map(&p->r, &count);
	if (st != AQL_OK)
		return wrap(st, "kernel %u arg %u", p->kernel, index);
	for (uint32_t n = 0; n < count; n++) {
		st = aql_mp_read_str(&p->r, &key, &len);
		if (st != AQL_OK)
			return wrap(st, "kernel %u arg %u: key", p->kernel, index);
		i = arg_key_of(key, len);
		if (i < 0) {
			st = aql_mp_skip(&p->r);
			if (st != AQL_OK)
				return wrap(st, "kernel %u arg %u key %.*s", p->kernel, index,
					    KEY_SHOWN(len), key);
			continue;
		}
		if (seen & (1u << i))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"kernel %u arg %u: duplicate key %s", p->kernel, index,
					arg_fields[i].key);
		seen |= 1u << i;
		st = read_field(p, &arg_fields[i], arg);
		if (st != AQL_OK)
			return wrap(st, "kernel %u arg %u key %s", p->kernel, index,
				    arg_fields[i].key);
	}
	aql_mp_leave(&p->r);
	if ((seen & ARG_REQUIRED) != ARG_REQUIRED)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %u arg %u: required key %s is missing", p->kernel, index,
				first_missing(arg_fields, ARG_REQUIRED, seen));
	if ((uint64_t)arg->offset + arg->size > ext->end) {
		ext->end = (uint64_t)arg->offset + arg->size;
		ext->index = index;
		ext->offset = arg->offset;
		ext->size = arg->size;
	}
	return AQL_OK;
}

static aql_status parse_args(struct parser *p, aql_kernel_metadata *k, struct arg_extent *ext)
{
	aql_kernel_arg *args, scratch;
	uint32_t count;
	aql_status st;

	st = aql_mp_read_array(&p->r, &count);
	if (st != AQL_OK)
		return wrap(st, "kernel %u key .args", p->kernel);
	args = arena_array(&p->a, count, sizeof(*args), alignof(aql_kernel_arg));
	for (uint32_t i = 0; i < count; i++) {
		st = parse_arg(p, i, args ? &args[i] : &scratch, ext);
		if (st != AQL_OK)
			return st;
	}
	aql_mp_leave(&p->r);
	k->args = count ? args : NULL;
	k->arg_count = count;
	return AQL_OK;
}

/* The .name in the map at r, without moving r, for messages. */
static void peek_name(const struct aql_mp_reader *r, const char **name, uint32_t *len)
{
	struct aql_mp_reader c = *r;
	const char *key;
	uint32_t count, key_len;

	*name = NULL;
	if (aql_mp_read_map(&c, &count) != AQL_OK)
		return;
	for (uint32_t i = 0; i < count; i++) {
		if (aql_mp_read_str(&c, &key, &key_len) != AQL_OK)
			return;
		if (key_is(key, key_len, ".name")) {
			if (aql_mp_read_str(&c, name, len) != AQL_OK)
				*name = NULL;
			return;
		}
		if (aql_mp_skip(&c) != AQL_OK)
			return;
	}
}

static aql_status parse_kernel_map(struct parser *p, aql_kernel_metadata *k)
{
	struct arg_extent ext = { 0 };
	uint32_t count, len, align, seen = 0;
	const char *key;
	aql_status st;
	int i;

	memset(k, 0, sizeof(*k));
	k->uses_dynamic_stack = -1;
	k->workgroup_processor_mode = -1;
	k->uniform_work_group_size = -1;
	st = aql_mp_read_map(&p->r, &count);
	if (st != AQL_OK)
		return wrap(st, "kernel %u", p->kernel);
	for (uint32_t n = 0; n < count; n++) {
		st = aql_mp_read_str(&p->r, &key, &len);
		if (st != AQL_OK)
			return wrap(st, "kernel %u: key", p->kernel);
		i = kernel_key_of(key, len);
		if (i < 0) {
			st = aql_mp_skip(&p->r);
			if (st != AQL_OK)
				return wrap(st, "kernel %u key %.*s", p->kernel, KEY_SHOWN(len),
					    key);
			continue;
		}
		if (seen & (1u << i))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "kernel %u: duplicate key %s",
					p->kernel, kernel_fields[i].key);
		seen |= 1u << i;
		if (i == KK_ARGS) {
			st = parse_args(p, k, &ext);
			if (st != AQL_OK)
				return st;
			continue;
		}
		st = read_field(p, &kernel_fields[i], k);
		if (st != AQL_OK)
			return wrap(st, "kernel %u key %s", p->kernel, kernel_fields[i].key);
	}
	aql_mp_leave(&p->r);

	if ((seen & KERNEL_REQUIRED) != KERNEL_REQUIRED)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %u: required key %s is missing", p->kernel,
				first_missing(kernel_fields, KERNEL_REQUIRED, seen));
	if (ext.end > k->kernarg_segment_size)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %u arg %u: .offset %u + .size %u is past .kernarg_segment_size %u",
				p->kernel, ext.index, ext.offset, ext.size,
				k->kernarg_segment_size);
	align = k->kernarg_segment_align;
	if (!align || (align & (align - 1)))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %u: .kernarg_segment_align %u is not a power of two",
				p->kernel, align);
	if (k->wavefront_size != 32 && k->wavefront_size != 64)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"kernel %u: .wavefront_size %u is neither 32 nor 64", p->kernel,
				k->wavefront_size);
	return AQL_OK;
}

/*
 * Messages say "kernel <index>" while parsing; a failure then looks for the
 * kernel's .name and puts it in, so only failures pay for the extra scan.
 */
static aql_status parse_kernel(struct parser *p, uint32_t index, aql_kernel_metadata *k)
{
	struct aql_mp_reader start = p->r;
	char reason[512], who[32];
	const char *name;
	uint32_t len;
	size_t who_len;
	aql_status st;

	p->kernel = index;
	st = parse_kernel_map(p, k);
	if (st == AQL_OK)
		return AQL_OK;
	snprintf(reason, sizeof(reason), "%s", aql_error_message());
	peek_name(&start, &name, &len);
	who_len = (size_t)snprintf(who, sizeof(who), "kernel %u", index);
	if (!name || strncmp(reason, who, who_len) != 0)
		return aql_fail(st, "%s", reason);
	return aql_fail(st, "%s \"%.*s\"%s", who, KEY_SHOWN(len), name, reason + who_len);
}

static aql_status parse_kernels(struct parser *p, aql_metadata *md)
{
	aql_kernel_metadata *kernels, scratch;
	uint32_t count;
	aql_status st;

	st = aql_mp_read_array(&p->r, &count);
	if (st != AQL_OK)
		return wrap(st, "amdhsa.kernels");
	kernels = arena_array(&p->a, count, sizeof(*kernels), alignof(aql_kernel_metadata));
	for (uint32_t i = 0; i < count; i++) {
		st = parse_kernel(p, i, kernels ? &kernels[i] : &scratch);
		if (st != AQL_OK)
			return st;
	}
	aql_mp_leave(&p->r);
	md->kernels = count ? kernels : NULL;
	md->kernel_count = count;
	return AQL_OK;
}

static aql_status parse_printf(struct parser *p, aql_metadata *md)
{
	const char **formats, *s;
	uint32_t count, len;
	aql_status st;

	st = aql_mp_read_array(&p->r, &count);
	if (st != AQL_OK)
		return wrap(st, "amdhsa.printf");
	formats = arena_array(&p->a, count, sizeof(*formats), alignof(const char *));
	for (uint32_t i = 0; i < count; i++) {
		st = aql_mp_read_str(&p->r, &s, &len);
		if (st != AQL_OK)
			return wrap(st, "amdhsa.printf[%u]", i);
		s = arena_str(&p->a, s, len);
		if (formats)
			formats[i] = s;
	}
	aql_mp_leave(&p->r);
	md->printf_formats = count ? formats : NULL;
	md->printf_count = count;
	return AQL_OK;
}

enum root_key { ROOT_VERSION, ROOT_TARGET, ROOT_PRINTF, ROOT_KERNELS, ROOT_KEYS };
static const char *const root_keys[ROOT_KEYS] = {
	[ROOT_VERSION] = "amdhsa.version",
	[ROOT_TARGET] = "amdhsa.target",
	[ROOT_PRINTF] = "amdhsa.printf",
	[ROOT_KERNELS] = "amdhsa.kernels",
};

static aql_status parse_root(struct parser *p, aql_metadata *md)
{
	uint32_t count, len, seen = 0;
	const char *key, *s;
	aql_status st;
	unsigned i;

	st = aql_mp_read_map(&p->r, &count);
	if (st != AQL_OK)
		return wrap(st, "metadata root");
	for (uint32_t n = 0; n < count; n++) {
		st = aql_mp_read_str(&p->r, &key, &len);
		if (st != AQL_OK)
			return wrap(st, "metadata root key");
		for (i = 0; i < ROOT_KEYS; i++)
			if (key_is(key, len, root_keys[i]))
				break;
		if (i == ROOT_KEYS) {
			st = aql_mp_skip(&p->r);
			if (st != AQL_OK)
				return wrap(st, "metadata key %.*s", KEY_SHOWN(len), key);
			continue;
		}
		if (seen & (1u << i))
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "metadata: duplicate key %s",
					root_keys[i]);
		seen |= 1u << i;
		switch ((enum root_key)i) {
		case ROOT_VERSION:
			st = read_u32_array(&p->r, md->version, 2);
			if (st != AQL_OK)
				return wrap(st, "amdhsa.version");
			break;
		case ROOT_TARGET:
			st = aql_mp_read_str(&p->r, &s, &len);
			if (st != AQL_OK)
				return wrap(st, "amdhsa.target");
			md->target = arena_str(&p->a, s, len);
			break;
		case ROOT_PRINTF:
			st = parse_printf(p, md);
			break;
		case ROOT_KERNELS:
			st = parse_kernels(p, md);
			break;
		case ROOT_KEYS:
			break;
		}
		if (st != AQL_OK)
			return st;
	}
	aql_mp_leave(&p->r);
	if (!(seen & (1u << ROOT_VERSION)))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"metadata: required key amdhsa.version is missing");
	/* A new major version is an incompatible layout. */
	if (md->version[0] != 1)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"metadata: amdhsa.version %u.%u is not version 1.x",
				md->version[0], md->version[1]);
	return AQL_OK;
}

/* One pass over the note; *mdp is the result in the arena, or scratch. */
static aql_status run(struct parser *p, const void *data, size_t size, aql_metadata *scratch,
		      aql_metadata **mdp)
{
	aql_metadata *md;
	aql_status st;
	size_t left;

	aql_mp_init(&p->r, data, size);
	md = arena_take(&p->a, sizeof(*md), alignof(aql_metadata));
	if (!md)
		md = scratch;
	memset(md, 0, sizeof(*md));
	st = parse_root(p, md);
	if (st != AQL_OK)
		return st;
	/* Note descriptors are padded to 4 (or 8) bytes with zeros. */
	left = aql_mp_left(&p->r);
	for (size_t i = 0; i < left; i++)
		if (left > 7 || p->r.pos[i] != 0)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"metadata: %zu bytes after the root map at byte %zu",
					left, aql_mp_offset(&p->r));
	*mdp = md;
	return AQL_OK;
}

/* The element type of every argument: typed launches compare it. */
static void resolve_types(aql_metadata *md)
{
	aql_kernel_metadata *k = (aql_kernel_metadata *)md->kernels;

	for (uint32_t i = 0; i < md->kernel_count; i++) {
		aql_kernel_arg *args = (aql_kernel_arg *)k[i].args;

		for (uint32_t j = 0; j < k[i].arg_count; j++) {
			int pointer = 0;

			args[j].type = aql_type_of_name(args[j].type_name, &pointer);
		}
	}
}

/* p at its offset in an arena moved from old to base, or NULL. */
static const char *moved(const char *p, uintptr_t old, char *base)
{
	return p ? base + ((uintptr_t)p - old) : NULL;
}

/* Every pointer of md into its arena, once the arena moved from old. */
static void rebase(aql_metadata *md, uintptr_t old)
{
	char *base = (char *)md;
	aql_kernel_metadata *k;

	md->target = moved(md->target, old, base);
	md->printf_formats = (const char **)moved((const char *)md->printf_formats, old, base);
	for (uint32_t i = 0; i < md->printf_count; i++)
		((const char **)md->printf_formats)[i] = moved(md->printf_formats[i], old, base);
	md->kernels = k = (aql_kernel_metadata *)moved((const char *)md->kernels, old, base);
	for (uint32_t i = 0; i < md->kernel_count; i++) {
		aql_kernel_arg *a = (aql_kernel_arg *)moved((const char *)k[i].args, old, base);

		k[i].name = moved(k[i].name, old, base);
		k[i].symbol = moved(k[i].symbol, old, base);
		k[i].language = moved(k[i].language, old, base);
		k[i].args = a;
		for (uint32_t j = 0; j < k[i].arg_count; j++) {
			a[j].name = moved(a[j].name, old, base);
			a[j].type_name = moved(a[j].type_name, old, base);
		}
	}
}

/*
 * Room for the result of a size-byte note in most cases: real notes need
 * 0.75 to 1 times their size (long mangled names, a few keys per argument);
 * notes of bare arguments need more and take the second pass.
 */
static uint64_t first_guess(size_t size)
{
	return (uint64_t)size + size / 4 + sizeof(aql_metadata) + 256;
}

aql_status aql_metadata_parse(const void *data, size_t size, aql_metadata **out)
{
	struct parser p = { 0 };
	aql_metadata scratch, *md = NULL;
	aql_status st;
	uint64_t need;
	void *shrunk;

	if (!out || !data)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_metadata_parse: data or out is NULL");
	*out = NULL;
	if (size == 0)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "metadata: empty note");
	need = first_guess(size);
	for (int pass = 0;; pass++) {
		p.a = (struct arena){ .base = need <= SIZE_MAX ? malloc((size_t)need) : NULL,
				      .cap = need };
		if (!p.a.base)
			return aql_fail(AQL_ERR_NOMEM, "metadata: %llu bytes",
					(unsigned long long)need);
		st = run(&p, data, size, &scratch, &md);
		if (st == AQL_OK && !p.a.overflow && (char *)md != p.a.base)
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "metadata: internal: no header");
		if (st != AQL_OK) {
			free(p.a.base);
			return st;
		}
		if (!p.a.overflow)
			break;
		/* The pass went on measuring: now the exact size is known. */
		free(p.a.base);
		if (pass == 1)
			return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
					"metadata: internal: passes disagree");
		need = p.a.used;
	}
	if (p.a.used < p.a.cap) {
		uintptr_t old = (uintptr_t)md;

		/* Shrinking may still move a large (mapped) block. */
		shrunk = realloc(md, (size_t)p.a.used);
		if (shrunk && (uintptr_t)shrunk != old)
			rebase(shrunk, old);
		if (shrunk)
			md = shrunk;
	}
	resolve_types(md);
	*out = md;
	return AQL_OK;
}

void aql_metadata_free(aql_metadata *md)
{
	free(md);
}

static const char *dup_str(struct arena *a, const char *s)
{
	return s ? arena_str(a, s, strlen(s)) : NULL;
}

/* Deep copy of src into the arena (measured only while a->base is NULL). */
static void copy_into(struct arena *a, const aql_metadata *src)
{
	aql_metadata scratch_md, *md = arena_take(a, sizeof(*md), alignof(aql_metadata));
	aql_kernel_metadata scratch_k, *kernels;
	aql_kernel_arg scratch_a, *args;
	const char **formats, *s;

	if (!md)
		md = &scratch_md;
	*md = *src;
	md->target = dup_str(a, src->target);
	formats = arena_array(a, src->printf_count, sizeof(*formats), alignof(const char *));
	for (uint32_t i = 0; i < src->printf_count; i++) {
		s = dup_str(a, src->printf_formats[i]);
		if (formats)
			formats[i] = s;
	}
	md->printf_formats = src->printf_count ? formats : NULL;
	kernels = arena_array(a, src->kernel_count, sizeof(*kernels), alignof(aql_kernel_metadata));
	for (uint32_t i = 0; i < src->kernel_count; i++) {
		const aql_kernel_metadata *sk = &src->kernels[i];
		aql_kernel_metadata *k = kernels ? &kernels[i] : &scratch_k;

		*k = *sk;
		k->name = dup_str(a, sk->name);
		k->symbol = dup_str(a, sk->symbol);
		k->language = dup_str(a, sk->language);
		args = arena_array(a, sk->arg_count, sizeof(*args), alignof(aql_kernel_arg));
		for (uint32_t j = 0; j < sk->arg_count; j++) {
			aql_kernel_arg *arg = args ? &args[j] : &scratch_a;

			*arg = sk->args[j];
			arg->name = dup_str(a, sk->args[j].name);
			arg->type_name = dup_str(a, sk->args[j].type_name);
		}
		k->args = sk->arg_count ? args : NULL;
	}
	md->kernels = src->kernel_count ? kernels : NULL;
}

aql_status aql_metadata_copy(const aql_metadata *src, aql_metadata **out)
{
	struct arena a = { 0 };

	if (!src || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_metadata_copy: src or out is NULL");
	if ((src->kernel_count && !src->kernels) || (src->printf_count && !src->printf_formats))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_metadata_copy: %u kernels, %u printf formats, NULL array",
				src->kernel_count, src->printf_count);
	for (uint32_t i = 0; i < src->kernel_count; i++)
		if (src->kernels[i].arg_count && !src->kernels[i].args)
			return aql_fail(AQL_ERR_INVALID_ARG,
					"aql_metadata_copy: kernel %u has %u args and NULL args",
					i, src->kernels[i].arg_count);
	copy_into(&a, src);
	a = (struct arena){ .base = a.used <= SIZE_MAX ? malloc((size_t)a.used) : NULL,
			    .cap = a.used };
	if (!a.base)
		return aql_fail(AQL_ERR_NOMEM, "metadata: %llu bytes", (unsigned long long)a.cap);
	/* The header is the arena's first allocation. */
	copy_into(&a, src);
	*out = (aql_metadata *)a.base;
	resolve_types(*out);
	return AQL_OK;
}

aql_status aql_metadata_build(const aql_kernel_metadata *kernels, uint32_t count,
			      aql_metadata **out)
{
	const aql_metadata src = { .kernel_count = count, .kernels = kernels };

	return aql_metadata_copy(&src, out);
}
