/* SPDX-License-Identifier: MIT */
/*
 * Internal: a msgpack reader for the NT_AMDGPU_METADATA note.
 *
 * Written here instead of taking msgpack-c, mpack or cmp: the note is a few
 * kilobytes, read once, read-only and untrusted. It wants a cursor over one
 * bounded buffer that hands out strings in place (zero-copy), never
 * allocates, checks every length against the bytes left, and refuses
 * nesting deeper than AQL_MP_MAX_DEPTH so that no input can exhaust a stack
 * or an allocator. That is a few hundred lines; a library would bring a DOM,
 * an allocator and one more package for a bare-metal runtime to depend on,
 * and still need the same limits checked around it.
 *
 * Every function is thread safe on distinct readers. Errors are
 * AQL_ERR_INVALID_CODE_OBJECT with a message naming the byte offset.
 */
#ifndef AQL_LOADER_MSGPACK_H
#define AQL_LOADER_MSGPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <aql/status.h>

/* Containers (arrays and maps) nested deeper than this are rejected. */
#define AQL_MP_MAX_DEPTH 32u

enum aql_mp_type {
	AQL_MP_NIL,
	AQL_MP_BOOL,
	AQL_MP_UINT,		/* any integer >= 0, whatever its encoding */
	AQL_MP_INT,		/* a negative integer */
	AQL_MP_FLOAT,		/* float 32 or float 64, widened */
	AQL_MP_STR,
	AQL_MP_BIN,
	AQL_MP_ARRAY,
	AQL_MP_MAP,
	AQL_MP_EXT,
};

/* One decoded value; for containers only the header. */
struct aql_mp_value {
	enum aql_mp_type type;
	size_t offset;			/* of its first byte in the buffer */
	union {
		bool b;
		uint64_t u;
		int64_t i;
		double f;
		struct {		/* str, bin, ext: points into the buffer */
			const uint8_t *ptr;
			uint32_t len;
			int8_t ext_type;
		} bytes;
		uint32_t count;		/* array elements or map pairs */
	};
};

struct aql_mp_reader {
	const uint8_t *start;
	const uint8_t *pos;
	const uint8_t *end;
	unsigned depth;			/* containers entered and not left */
};

/* Start reading [data, data + size). */
void aql_mp_init(struct aql_mp_reader *r, const void *data, size_t size);

/* Byte offset of the next value. */
static inline size_t aql_mp_offset(const struct aql_mp_reader *r)
{
	return (size_t)(r->pos - r->start);
}

/* Bytes not read yet. */
static inline size_t aql_mp_left(const struct aql_mp_reader *r)
{
	return (size_t)(r->end - r->pos);
}

/* "nil", "bool", "unsigned integer", ... for messages. */
const char *aql_mp_type_name(enum aql_mp_type type);

/*
 * Type of the next value without consuming it. Fails at the end of the
 * buffer and on the reserved byte 0xc1.
 */
aql_status aql_mp_peek(const struct aql_mp_reader *r, enum aql_mp_type *type);

/*
 * Read the next value. Strings, bin and ext payloads are skipped over and
 * returned in place. Reading an array or map header enters it: the caller
 * then reads count (arrays) or 2 * count (maps) values and calls
 * aql_mp_leave(). Fails on truncation, on a payload longer than the bytes
 * left, on an element count that cannot fit in the bytes left (every
 * element takes at least one byte) and on entering depth AQL_MP_MAX_DEPTH + 1.
 * On failure the reader position is unspecified.
 */
aql_status aql_mp_read(struct aql_mp_reader *r, struct aql_mp_value *v);

/* Leave the container entered last. */
static inline void aql_mp_leave(struct aql_mp_reader *r)
{
	if (r->depth)
		r->depth--;
}

/*
 * Skip one whole value, nested containers included, without recursion.
 * Fails as aql_mp_read() does anywhere inside it.
 */
aql_status aql_mp_skip(struct aql_mp_reader *r);

/*
 * Typed reads: fail, naming the offset and both types, on any other type.
 *
 * Each is inline for the encodings a note is made of (fixstr and str8,
 * positive fixint and uint8/16/32, fix and 16-bit maps and arrays, bools)
 * because the parser makes tens of thousands of these calls per note and
 * the call, the type classification and the value union cost more than the
 * work. The inline part takes a value only when every check the general
 * reader makes has passed; anything else, error or not, goes untouched to
 * the out-of-line aql_mp_*_any() from the same position, so results and
 * messages are the same either way.
 */

/* The general path of each typed read below: every encoding, every error. */
aql_status aql_mp_read_uint_any(struct aql_mp_reader *r, uint64_t max, uint64_t *out);
aql_status aql_mp_read_bool_any(struct aql_mp_reader *r, bool *out);
aql_status aql_mp_read_str_any(struct aql_mp_reader *r, const char **s, uint32_t *len);
aql_status aql_mp_read_array_any(struct aql_mp_reader *r, uint32_t *count);
aql_status aql_mp_read_map_any(struct aql_mp_reader *r, uint32_t *count);

/* Big-endian 16 and 32 bits; the caller checked the bound. */
static inline uint32_t aql_mp_be16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static inline uint32_t aql_mp_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Any integer encoding; fails on negative values and values above max. */
static inline aql_status aql_mp_read_uint(struct aql_mp_reader *r, uint64_t max, uint64_t *out)
{
	const uint8_t *p = r->pos;
	size_t left = aql_mp_left(r);
	uint64_t v;
	unsigned n;

	if (left && p[0] <= 0x7f) {
		v = p[0];
		n = 1;
	} else if (left >= 2 && p[0] == 0xcc) {
		v = p[1];
		n = 2;
	} else if (left >= 3 && p[0] == 0xcd) {
		v = aql_mp_be16(p + 1);
		n = 3;
	} else if (left >= 5 && p[0] == 0xce) {
		v = aql_mp_be32(p + 1);
		n = 5;
	} else {
		return aql_mp_read_uint_any(r, max, out);
	}
	if (v > max)
		return aql_mp_read_uint_any(r, max, out);
	*out = v;
	r->pos += n;
	return AQL_OK;
}

/* A bool. */
static inline aql_status aql_mp_read_bool(struct aql_mp_reader *r, bool *out)
{
	if (r->pos < r->end && (*r->pos | 1) == 0xc3) {
		*out = *r->pos++ == 0xc3;
		return AQL_OK;
	}
	return aql_mp_read_bool_any(r, out);
}

/* A str; *s points into the buffer and is not NUL-terminated. */
static inline aql_status aql_mp_read_str(struct aql_mp_reader *r, const char **s, uint32_t *len)
{
	const uint8_t *p = r->pos;
	size_t left = aql_mp_left(r);
	uint32_t n, head;

	if (left && (p[0] & 0xe0) == 0xa0) {
		n = p[0] & 0x1f;
		head = 1;
	} else if (left >= 2 && p[0] == 0xd9) {
		n = p[1];
		head = 2;
	} else {
		return aql_mp_read_str_any(r, s, len);
	}
	if (n > left - head)
		return aql_mp_read_str_any(r, s, len);
	*s = (const char *)p + head;
	*len = n;
	r->pos = p + head + n;
	return AQL_OK;
}

/*
 * A container header of head bytes and count elements of at least per
 * bytes each, entered if it fits and the depth allows; else false.
 */
static inline bool aql_mp_enter_fast(struct aql_mp_reader *r, uint32_t head, uint32_t count,
				     uint32_t per)
{
	if ((uint64_t)count * per > aql_mp_left(r) - head || r->depth >= AQL_MP_MAX_DEPTH)
		return false;
	r->pos += head;
	r->depth++;
	return true;
}

/* An array header (entered: call aql_mp_leave() after its elements). */
static inline aql_status aql_mp_read_array(struct aql_mp_reader *r, uint32_t *count)
{
	const uint8_t *p = r->pos;
	size_t left = aql_mp_left(r);
	uint32_t n, head;

	if (left && (p[0] & 0xf0) == 0x90) {
		n = p[0] & 0x0f;
		head = 1;
	} else if (left >= 3 && p[0] == 0xdc) {
		n = aql_mp_be16(p + 1);
		head = 3;
	} else {
		return aql_mp_read_array_any(r, count);
	}
	if (!aql_mp_enter_fast(r, head, n, 1))
		return aql_mp_read_array_any(r, count);
	*count = n;
	return AQL_OK;
}

/* A map header (entered: call aql_mp_leave() after its pairs). */
static inline aql_status aql_mp_read_map(struct aql_mp_reader *r, uint32_t *count)
{
	const uint8_t *p = r->pos;
	size_t left = aql_mp_left(r);
	uint32_t n, head;

	if (left && (p[0] & 0xf0) == 0x80) {
		n = p[0] & 0x0f;
		head = 1;
	} else if (left >= 3 && p[0] == 0xde) {
		n = aql_mp_be16(p + 1);
		head = 3;
	} else {
		return aql_mp_read_map_any(r, count);
	}
	if (!aql_mp_enter_fast(r, head, n, 2))
		return aql_mp_read_map_any(r, count);
	*count = n;
	return AQL_OK;
}

#endif
