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

/* Typed reads: fail, naming the offset and both types, on any other type. */

/* Any integer encoding; fails on negative values and values above max. */
aql_status aql_mp_read_uint(struct aql_mp_reader *r, uint64_t max, uint64_t *out);
aql_status aql_mp_read_bool(struct aql_mp_reader *r, bool *out);
/* A str; *s points into the buffer and is not NUL-terminated. */
aql_status aql_mp_read_str(struct aql_mp_reader *r, const char **s, uint32_t *len);
/* An array header (entered: call aql_mp_leave() after its elements). */
aql_status aql_mp_read_array(struct aql_mp_reader *r, uint32_t *count);
/* A map header (entered: call aql_mp_leave() after its pairs). */
aql_status aql_mp_read_map(struct aql_mp_reader *r, uint32_t *count);

#endif
