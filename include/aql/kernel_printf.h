/* SPDX-License-Identifier: MIT */
/*
 * Device side of printf (aql/printf.h): a work-item sends a format id
 * and its values over a channel; the host formats and prints them.
 * Included by aql/kernel.h; compiles for amdgcn, nvptx64 and the CPU
 * agent.
 *
 *   AQL_KERNEL(k, (aql_global aql_channel_dev *, ch), (float, x))
 *   {
 *           AQL_PRINTF(ch, "%u: %f\n", aql_global_id(0), x);
 *           AQL_PRINTF(ch, 3, aql_global_id(0), x);   // format 3 of the host's table
 *   }
 *
 * AQL_PRINTF(ch, format, ...) takes a format string, sent with the record
 * (at most AQL_PRINTF_MAX_FORMAT bytes with its NUL; the host prints a
 * diagnostic for a longer one), or a format id of the host's table, and
 * 0 to AQL_PRINTF_MAX_ARGS values after it; each value's type is read with _Generic and sent with it, so the
 * host can check it against its conversion. Integers of any size, float
 * and double, and pointers (to global, local or private memory; cast a
 * __constant pointer to an integer) may be passed; as in a C variadic
 * call, types narrower than int become int and float becomes double.
 * Strings cannot be sent: the host prints a diagnostic for %s.
 *
 * It returns what aql_channel_send() does: AQL_CHANNEL_SENT, or
 * AQL_CHANNEL_DROPPED when a drop-mode channel is full (the record is
 * lost and counted), or AQL_CHANNEL_TOO_BIG for a channel whose messages
 * cannot hold AQL_PRINTF_RECORD_BYTES(n) bytes. Like every send it waits
 * while a blocking channel is full.
 */
#ifndef AQL_KERNEL_PRINTF_H
#define AQL_KERNEL_PRINTF_H

#include <aql/kernel.h>
#include <aql/kernel_channel.h>
/* The record only: kernel code does not see the host API. */
#define AQL_PRINTF_RECORD_ONLY_
#include <aql/printf.h>
#undef AQL_PRINTF_RECORD_ONLY_

/* One value and its tag, as the macro builds them. */
typedef struct aql_printf_arg_ {
	uint64_t bits;
	uint32_t tag;		/* enum aql_printf_tag */
} aql_printf_arg_;

/*
 * The value of x, tagged. OpenCL C cannot call a function that _Generic
 * selects, and a selected expression must be valid for every type, so x
 * goes through three selections that each yield x itself or a constant:
 * as an integer, as a double, as a pointer. Only one of them evaluates
 * x, once; the tag says which one is meant.
 */
AQL_INLINE aql_printf_arg_ aql_printf_make_(uint32_t tag, int64_t i, double d,
					    const volatile void *p)
{
	union {
		double d;
		uint64_t u;
	} f;
	aql_printf_arg_ a;

	f.d = d;
	a.tag = tag;
	a.bits = tag == AQL_PRINTF_TAG_I32 ? (uint64_t)(int64_t)(int32_t)i
	       : tag == AQL_PRINTF_TAG_U32 ? (uint64_t)(uint32_t)i
	       : tag == AQL_PRINTF_TAG_F64 ? f.u
	       : tag == AQL_PRINTF_TAG_PTR ? (uint64_t)(uintptr_t)p
	       : (uint64_t)i;
	return a;
}

/* long long is reserved in OpenCL C, where long is already 64 bits. */
#ifdef __OPENCL_C_VERSION__
#define AQL_PRINTF_LL_(signed_, unsigned_)
#else
#define AQL_PRINTF_LL_(signed_, unsigned_) long long: signed_, unsigned long long: unsigned_,
#endif

/* The integer types, each mapped to i32, u32, i64 or u64. */
#define AQL_PRINTF_INTS_(i32, u32, i64, u64)                                   \
	_Bool: i32, char: i32, signed char: i32, unsigned char: i32,           \
	short: i32, unsigned short: i32, int: i32, unsigned int: u32,          \
	long: i64, unsigned long: u64, AQL_PRINTF_LL_(i64, u64)

#define AQL_PRINTF_NULL_ ((const volatile void *)0)
#define AQL_PRINTF_TAG_OF_(x)                                                  \
	_Generic((x), AQL_PRINTF_INTS_(AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_U32, \
				       AQL_PRINTF_TAG_I64, AQL_PRINTF_TAG_U64) \
		 float: AQL_PRINTF_TAG_F64, double: AQL_PRINTF_TAG_F64,        \
		 default: AQL_PRINTF_TAG_PTR)
#define AQL_PRINTF_AS_INT_(x)                                                  \
	_Generic((x), AQL_PRINTF_INTS_((x), (x), (x), (x)) default: 0)
#define AQL_PRINTF_AS_DOUBLE_(x)                                               \
	_Generic((x), float: (x), double: (x), default: 0.0)
#define AQL_PRINTF_AS_PTR_(x)                                                  \
	_Generic((x), AQL_PRINTF_INTS_(AQL_PRINTF_NULL_, AQL_PRINTF_NULL_,     \
				       AQL_PRINTF_NULL_, AQL_PRINTF_NULL_)     \
		 float: AQL_PRINTF_NULL_, double: AQL_PRINTF_NULL_, default: (x))

/* The tagged value of x, for the record. */
#define AQL_PRINTF_ARG(x)                                                      \
	aql_printf_make_(AQL_PRINTF_TAG_OF_(x), AQL_PRINTF_AS_INT_(x),         \
			 AQL_PRINTF_AS_DOUBLE_(x), AQL_PRINTF_AS_PTR_(x))

/*
 * Build the record of n values and send it: with format id, or, when fmt
 * is not NULL, with fmt's text after the values (AQL_PRINTF_INLINE).
 */
#ifdef __OPENCL_C_VERSION__
typedef __constant char aql_printf_char_;	/* where OpenCL puts literals */
#else
typedef const char aql_printf_char_;
#endif
AQL_INLINE int aql_printf_send_(aql_global aql_channel_dev *ch, uint32_t id,
				aql_printf_char_ *fmt, uint32_t n, const aql_printf_arg_ *args)
{
	union {
		aql_printf_record r;
		uint8_t b[sizeof(aql_printf_record) + AQL_PRINTF_MAX_FORMAT];
	} m;
	uint32_t size = AQL_PRINTF_RECORD_BYTES(n), k = 0;

	m.r.format_id = fmt ? AQL_PRINTF_INLINE : id;
	m.r.arg_count = n;
	m.r.reserved = 0;
	for (uint32_t i = 0; i < AQL_PRINTF_MAX_ARGS; i++)
		m.r.tags[i] = i < n ? (uint8_t)args[i].tag : 0;
	for (uint32_t i = 0; i < n; i++)
		m.r.args[i] = args[i].bits;
	/* A longer text goes without its NUL: the host says so. */
	if (fmt) {
		while (k < AQL_PRINTF_MAX_FORMAT && fmt[k]) {
			m.b[size + k] = (uint8_t)fmt[k];
			k++;
		}
		if (k < AQL_PRINTF_MAX_FORMAT)
			m.b[size + k++] = 0;
	}
	return aql_channel_send(ch, AQL_CHANNEL_KIND_PRINTF, m.b, size + k);
}

/* The format argument as an id (0 for a string) and as a string (or NULL). */
#ifdef __OPENCL_C_VERSION__
#define AQL_PRINTF_IDV_(f) _Generic((f), __constant char *: 0u, default: (f))
#define AQL_PRINTF_FMT_(f)                                                     \
	_Generic((f), __constant char *: (f), default: (__constant char *)0)
#else
#define AQL_PRINTF_IDV_(f) _Generic((f), char *: 0u, const char *: 0u, default: (f))
#define AQL_PRINTF_FMT_(f)                                                     \
	_Generic((f), char *: (f), const char *: (f), default: (const char *)0)
#endif

/*
 * AQL_PRINTF(ch, id, values...): the values after the id are counted
 * (over AQL_PRINTF_MAX_ARGS: an error naming AQL_PRINTF_TOO_MANY_VALUES)
 * and passed as an array of tagged values.
 */
#define AQL_PRINTF(ch, ...)                                                    \
	AQL_PP_CAT(AQL_PRINTF_N_, AQL_PRINTF_NARG_(__VA_ARGS__))(ch, __VA_ARGS__)

/* The number of arguments after the first (the id), 0 .. 12. */
#define AQL_PRINTF_NARG_(...)                                                  \
	AQL_PRINTF_PICK_(__VA_ARGS__, TOO_MANY_VALUES, 12, 11, 10, 9, 8, 7, 6, \
			 5, 4, 3, 2, 1, 0, 0)
#define AQL_PRINTF_PICK_(_0, _1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11,     \
			 _12, _13, n, ...) n

#define AQL_PRINTF_N_0(ch, id)                                                 \
	aql_printf_send_((ch), AQL_PRINTF_IDV_(id), AQL_PRINTF_FMT_(id), 0, NULL)
#define AQL_PRINTF_VALUES_(ch, id, n, ...)                                     \
	aql_printf_send_((ch), AQL_PRINTF_IDV_(id), AQL_PRINTF_FMT_(id), n,    \
			 (const aql_printf_arg_[]){ __VA_ARGS__ })
#define AQL_PRINTF_N_1(ch, id, a)                                              \
	AQL_PRINTF_VALUES_(ch, id, 1, AQL_PRINTF_ARG(a))
#define AQL_PRINTF_N_2(ch, id, a, b)                                           \
	AQL_PRINTF_VALUES_(ch, id, 2, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b))
#define AQL_PRINTF_N_3(ch, id, a, b, c)                                        \
	AQL_PRINTF_VALUES_(ch, id, 3, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c))
#define AQL_PRINTF_N_4(ch, id, a, b, c, d)                                     \
	AQL_PRINTF_VALUES_(ch, id, 4, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d))
#define AQL_PRINTF_N_5(ch, id, a, b, c, d, e)                                  \
	AQL_PRINTF_VALUES_(ch, id, 5, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e))
#define AQL_PRINTF_N_6(ch, id, a, b, c, d, e, f)                               \
	AQL_PRINTF_VALUES_(ch, id, 6, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f))
#define AQL_PRINTF_N_7(ch, id, a, b, c, d, e, f, g)                            \
	AQL_PRINTF_VALUES_(ch, id, 7, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f), AQL_PRINTF_ARG(g))
#define AQL_PRINTF_N_8(ch, id, a, b, c, d, e, f, g, h)                         \
	AQL_PRINTF_VALUES_(ch, id, 8, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f), AQL_PRINTF_ARG(g), AQL_PRINTF_ARG(h))
#define AQL_PRINTF_N_9(ch, id, a, b, c, d, e, f, g, h, i)                      \
	AQL_PRINTF_VALUES_(ch, id, 9, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),    \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f), AQL_PRINTF_ARG(g), AQL_PRINTF_ARG(h), \
			   AQL_PRINTF_ARG(i))
#define AQL_PRINTF_N_10(ch, id, a, b, c, d, e, f, g, h, i, j)                  \
	AQL_PRINTF_VALUES_(ch, id, 10, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),   \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f), AQL_PRINTF_ARG(g), AQL_PRINTF_ARG(h), \
			   AQL_PRINTF_ARG(i), AQL_PRINTF_ARG(j))
#define AQL_PRINTF_N_11(ch, id, a, b, c, d, e, f, g, h, i, j, k)               \
	AQL_PRINTF_VALUES_(ch, id, 11, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),   \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f), AQL_PRINTF_ARG(g), AQL_PRINTF_ARG(h), \
			   AQL_PRINTF_ARG(i), AQL_PRINTF_ARG(j), AQL_PRINTF_ARG(k))
#define AQL_PRINTF_N_12(ch, id, a, b, c, d, e, f, g, h, i, j, k, l)            \
	AQL_PRINTF_VALUES_(ch, id, 12, AQL_PRINTF_ARG(a), AQL_PRINTF_ARG(b),   \
			   AQL_PRINTF_ARG(c), AQL_PRINTF_ARG(d), AQL_PRINTF_ARG(e), \
			   AQL_PRINTF_ARG(f), AQL_PRINTF_ARG(g), AQL_PRINTF_ARG(h), \
			   AQL_PRINTF_ARG(i), AQL_PRINTF_ARG(j), AQL_PRINTF_ARG(k), \
			   AQL_PRINTF_ARG(l))

#endif
