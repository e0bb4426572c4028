/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "util/error.h"
#include "loader/msgpack.h"

void aql_mp_init(struct aql_mp_reader *r, const void *data, size_t size)
{
	r->start = data;
	r->pos = r->start;
	r->end = size ? r->start + size : r->start;	/* NULL + 0 is undefined in C */
	r->depth = 0;
}

const char *aql_mp_type_name(enum aql_mp_type type)
{
	switch (type) {
	case AQL_MP_NIL: return "nil";
	case AQL_MP_BOOL: return "bool";
	case AQL_MP_UINT: return "unsigned integer";
	case AQL_MP_INT: return "negative integer";
	case AQL_MP_FLOAT: return "float";
	case AQL_MP_STR: return "string";
	case AQL_MP_BIN: return "bin";
	case AQL_MP_ARRAY: return "array";
	case AQL_MP_MAP: return "map";
	case AQL_MP_EXT: return "ext";
	}
	return "unknown";
}

static aql_status truncated(const struct aql_mp_reader *r, size_t at, const char *what,
			    uint64_t need)
{
	return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
			"msgpack: byte %zu: %s needs %llu bytes, %zu left", at, what,
			(unsigned long long)need, aql_mp_left(r));
}

/* Big-endian unsigned of n (1, 2, 4, 8) bytes; the caller checked the bound. */
static uint64_t load_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static enum aql_mp_type type_of(uint8_t b)
{
	if (b <= 0x7f || (b >= 0xcc && b <= 0xcf))
		return AQL_MP_UINT;
	if (b >= 0xe0 || (b >= 0xd0 && b <= 0xd3))
		return AQL_MP_INT;	/* refined to UINT for non-negative values */
	if (b <= 0x8f || b == 0xde || b == 0xdf)
		return AQL_MP_MAP;
	if (b <= 0x9f || b == 0xdc || b == 0xdd)
		return AQL_MP_ARRAY;
	if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb))
		return AQL_MP_STR;
	switch (b) {
	case 0xc0: return AQL_MP_NIL;
	case 0xc2: case 0xc3: return AQL_MP_BOOL;
	case 0xc4: case 0xc5: case 0xc6: return AQL_MP_BIN;
	case 0xca: case 0xcb: return AQL_MP_FLOAT;
	default: return AQL_MP_EXT;	/* 0xc7-0xc9, 0xd4-0xd8; 0xc1 is caught first */
	}
}

static aql_status peek(const struct aql_mp_reader *r, enum aql_mp_type *type)
{
	uint8_t b;

	if (r->pos >= r->end)
		return truncated(r, aql_mp_offset(r), "a value", 1);
	b = *r->pos;
	if (b == 0xc1)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"msgpack: byte %zu: reserved type byte 0xc1", aql_mp_offset(r));
	/* Signed encodings of non-negative values count as unsigned. */
	if (b >= 0xd0 && b <= 0xd3) {
		unsigned n = 1u << (b - 0xd0);

		if (aql_mp_left(r) < 1 + (size_t)n)
			return truncated(r, aql_mp_offset(r), "an integer", 1 + n);
		*type = (r->pos[1] & 0x80) ? AQL_MP_INT : AQL_MP_UINT;
		return AQL_OK;
	}
	*type = type_of(b);
	return AQL_OK;
}

aql_status aql_mp_peek(const struct aql_mp_reader *r, enum aql_mp_type *type)
{
	return peek(r, type);
}

/* Take n header bytes after the type byte, as a big-endian number. */
static aql_status take(struct aql_mp_reader *r, size_t at, unsigned n, uint64_t *out)
{
	if (aql_mp_left(r) < n)
		return truncated(r, at, "a header", 1 + (uint64_t)n);
	*out = load_be(r->pos, n);
	r->pos += n;
	return AQL_OK;
}

static aql_status take_payload(struct aql_mp_reader *r, struct aql_mp_value *v, uint64_t len,
			       const char *what)
{
	if (len > aql_mp_left(r))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"msgpack: byte %zu: %s of %llu bytes runs past the end (%zu left)",
				v->offset, what, (unsigned long long)len, aql_mp_left(r));
	v->bytes.ptr = r->pos;
	v->bytes.len = (uint32_t)len;
	r->pos += len;
	return AQL_OK;
}

static aql_status enter(struct aql_mp_reader *r, struct aql_mp_value *v, uint64_t count)
{
	/* Each element takes at least one byte, each map pair two. */
	uint64_t min_bytes = v->type == AQL_MP_MAP ? 2 * count : count;

	if (min_bytes > aql_mp_left(r))
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"msgpack: byte %zu: %s of %llu %s cannot fit in the %zu bytes left",
				v->offset, aql_mp_type_name(v->type), (unsigned long long)count,
				v->type == AQL_MP_MAP ? "pairs" : "elements", aql_mp_left(r));
	if (r->depth >= AQL_MP_MAX_DEPTH)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"msgpack: byte %zu: %s nested deeper than %u levels",
				v->offset, aql_mp_type_name(v->type), AQL_MP_MAX_DEPTH);
	v->count = (uint32_t)count;
	r->depth++;
	return AQL_OK;
}

/* aql_mp_read(), called directly: the exported name may be interposed. */
static aql_status read_value(struct aql_mp_reader *r, struct aql_mp_value *v)
{
	size_t at = aql_mp_offset(r);
	uint64_t n = 0;
	aql_status st;
	uint8_t b;

	st = peek(r, &v->type);
	if (st != AQL_OK)
		return st;
	v->offset = at;
	b = *r->pos++;

	if (b <= 0x7f) {
		v->u = b;
		return AQL_OK;
	}
	if (b >= 0xe0) {
		v->i = (int8_t)b;
		return AQL_OK;
	}
	if (b <= 0x8f)
		return enter(r, v, b & 0x0f);
	if (b <= 0x9f)
		return enter(r, v, b & 0x0f);
	if (b <= 0xbf)
		return take_payload(r, v, b & 0x1f, "string");

	switch (b) {
	case 0xc0:
		return AQL_OK;
	case 0xc2:
	case 0xc3:
		v->b = b == 0xc3;
		return AQL_OK;
	case 0xc4: case 0xc5: case 0xc6:
		st = take(r, at, 1u << (b - 0xc4), &n);
		return st ? st : take_payload(r, v, n, "bin");
	case 0xc7: case 0xc8: case 0xc9:
		st = take(r, at, 1u << (b - 0xc7), &n);
		if (st == AQL_OK && aql_mp_left(r) < 1)
			st = truncated(r, at, "an ext type", 1);
		if (st != AQL_OK)
			return st;
		v->bytes.ext_type = (int8_t)*r->pos++;
		return take_payload(r, v, n, "ext");
	case 0xca: {
		float f;
		uint32_t bits;

		st = take(r, at, 4, &n);
		if (st != AQL_OK)
			return st;
		bits = (uint32_t)n;
		memcpy(&f, &bits, sizeof(f));
		v->f = f;
		return AQL_OK;
	}
	case 0xcb:
		st = take(r, at, 8, &n);
		if (st == AQL_OK)
			memcpy(&v->f, &n, sizeof(v->f));
		return st;
	case 0xcc: case 0xcd: case 0xce: case 0xcf:
		return take(r, at, 1u << (b - 0xcc), &v->u);
	case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
		unsigned bytes = 1u << (b - 0xd0);

		/* peek checked the length; sign-extend from the top byte. */
		st = take(r, at, bytes, &n);
		if (st != AQL_OK)
			return st;
		if (bytes < 8 && (n >> (8 * bytes - 1)))
			n |= ~0ull << (8 * bytes);
		v->i = (int64_t)n;
		return AQL_OK;
	}
	case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
		if (aql_mp_left(r) < 1)
			return truncated(r, at, "an ext type", 2);
		v->bytes.ext_type = (int8_t)*r->pos++;
		return take_payload(r, v, 1u << (b - 0xd4), "fixext");
	case 0xd9: case 0xda: case 0xdb:
		st = take(r, at, 1u << (b - 0xd9), &n);
		return st ? st : take_payload(r, v, n, "string");
	case 0xdc: case 0xdd:
	case 0xde: case 0xdf:
		st = take(r, at, (b & 1) ? 4 : 2, &n);
		return st ? st : enter(r, v, n);
	}
	/* Every byte is handled above; 0xc1 was refused by peek. */
	return aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "msgpack: byte %zu: bad type 0x%02x", at, b);
}

aql_status aql_mp_read(struct aql_mp_reader *r, struct aql_mp_value *v)
{
	return read_value(r, v);
}

aql_status aql_mp_skip(struct aql_mp_reader *r)
{
	/* Elements still to read in each open container; read() bounds the depth. */
	uint64_t todo[AQL_MP_MAX_DEPTH];
	unsigned open = 0;
	struct aql_mp_value v;
	aql_status st;

	do {
		st = read_value(r, &v);
		if (st != AQL_OK)
			return st;
		if (v.type == AQL_MP_ARRAY || v.type == AQL_MP_MAP) {
			uint64_t n = v.type == AQL_MP_MAP ? 2 * (uint64_t)v.count : v.count;

			if (n) {
				todo[open++] = n;
				continue;
			}
			aql_mp_leave(r);
		}
		while (open && --todo[open - 1] == 0) {
			open--;
			aql_mp_leave(r);
		}
	} while (open);
	return AQL_OK;
}

static aql_status expect(struct aql_mp_reader *r, enum aql_mp_type want, struct aql_mp_value *v)
{
	enum aql_mp_type type = AQL_MP_NIL;	/* peek sets it; GCC cannot see that */
	aql_status st;

	st = peek(r, &type);
	if (st != AQL_OK)
		return st;
	if (type != want)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"msgpack: byte %zu: expected %s, found %s", aql_mp_offset(r),
				aql_mp_type_name(want), aql_mp_type_name(type));
	return read_value(r, v);
}

aql_status aql_mp_read_uint_any(struct aql_mp_reader *r, uint64_t max, uint64_t *out)
{
	struct aql_mp_value v;
	aql_status st;

	st = expect(r, AQL_MP_UINT, &v);
	if (st != AQL_OK)
		return st;
	if (v.u > max)
		return aql_fail(AQL_ERR_INVALID_CODE_OBJECT,
				"msgpack: byte %zu: %llu is above the limit %llu", v.offset,
				(unsigned long long)v.u, (unsigned long long)max);
	*out = v.u;
	return AQL_OK;
}

aql_status aql_mp_read_bool_any(struct aql_mp_reader *r, bool *out)
{
	struct aql_mp_value v;
	aql_status st;

	st = expect(r, AQL_MP_BOOL, &v);
	if (st == AQL_OK)
		*out = v.b;
	return st;
}

aql_status aql_mp_read_str_any(struct aql_mp_reader *r, const char **s, uint32_t *len)
{
	struct aql_mp_value v;
	aql_status st;

	st = expect(r, AQL_MP_STR, &v);
	if (st == AQL_OK) {
		*s = (const char *)v.bytes.ptr;
		*len = v.bytes.len;
	}
	return st;
}

aql_status aql_mp_read_array_any(struct aql_mp_reader *r, uint32_t *count)
{
	struct aql_mp_value v;
	aql_status st;

	st = expect(r, AQL_MP_ARRAY, &v);
	if (st == AQL_OK)
		*count = v.count;
	return st;
}

aql_status aql_mp_read_map_any(struct aql_mp_reader *r, uint32_t *count)
{
	struct aql_mp_value v;
	aql_status st;

	st = expect(r, AQL_MP_MAP, &v);
	if (st == AQL_OK)
		*count = v.count;
	return st;
}
