/* SPDX-License-Identifier: MIT */
/*
 * printf from kernels, over a channel (aql/channel.h). A work-item sends
 * a record: a format id and up to AQL_PRINTF_MAX_ARGS typed 64-bit
 * values (AQL_PRINTF() in aql/kernel_printf.h, part of aql/kernel.h).
 * The host looks the id up in a table of format strings, formats the
 * values with the C library's snprintf, one conversion at a time, and
 * writes the text to a stdio stream, or to a file descriptor through
 * io_uring (write(2) where io_uring is unavailable).
 *
 *   static const char *const formats[] = { "item %u: %.3f\n" };
 *   aql_printf_config c = { .formats = formats, .format_count = 1 };
 *   aql_printf *p;
 *   aql_printf_create(&c, &p);
 *   aql_printf_attach(p, ch);            // ch from aql_channel_create()
 *   ... AQL_LAUNCH(q, k, &cfg, &done, AQL_ARG(ch), ...);
 *   ... aql_channel_drain(ch, 0, NULL, NULL, NULL) until done ...
 *   aql_printf_flush(p);
 *
 *   // in the kernel: AQL_PRINTF(ch, 0, aql_global_id(0), x);
 *
 * Format strings come from the kernel itself (AQL_PRINTF(ch, "fmt", ...):
 * the record carries the text, AQL_PRINTF_INLINE), from the program (a
 * table given at creation or added later; the id is the index) or from
 * a code object's amdhsa.printf metadata (the ids LLVM gave OpenCL
 * printf calls). A typed launch given AQL_ARG_PRINTF() (aql/launch.h)
 * needs none of the calls below: the queue makes its own channel and
 * service, printing to stdout.
 *
 * The text of a record is formatted whole before it is written, so
 * records never interleave, and a record's text comes out in the order
 * the channel delivered it: one work-item's records keep their order.
 *
 * Conversions: d i u o x X c e E f F g G a A p and %%, with flags
 * (- + space # 0 '), a width and a precision (numbers up to 4096, or '*'
 * taking an int from the values) and length modifiers hh h l ll j z t
 * (and L for the floating conversions). An integer conversion without l,
 * ll, j, z or t reads an int: a 64-bit value for it is refused rather
 * than cut.
 *
 * A record that cannot be printed faithfully (an unknown id, an inline
 * format without its NUL within AQL_PRINTF_MAX_FORMAT bytes, too few or
 * too many values, a value of the wrong type for its conversion, %s or
 * %n, which the device cannot send, a malformed or truncated record)
 * prints one line instead, "[aql printf: ...]", saying what is wrong,
 * and is counted in the statistics; the next record prints as usual.
 *
 * The first part of this header is the record both sides share: plain C
 * that compiles as OpenCL C too, and all that kernel code (which gets it
 * through aql/kernel_printf.h) sees.
 */
#ifndef AQL_PRINTF_RECORD_H
#define AQL_PRINTF_RECORD_H

#ifndef __OPENCL_C_VERSION__
#include <stdint.h>
#endif
#include <aql/compat.h>

/* Values one record carries at most. */
#define AQL_PRINTF_MAX_ARGS 12u

/*
 * The format_id of a record that carries its format string after its
 * values (AQL_PRINTF(ch, "literal", ...)): the text and its NUL, at most
 * AQL_PRINTF_MAX_FORMAT bytes with the NUL.
 */
#define AQL_PRINTF_INLINE 0xffffffffu
#define AQL_PRINTF_MAX_FORMAT 256u

/*
 * What a value is. Integers travel as 64 bits, sign- or zero-extended by
 * the sender; narrower types than int were promoted to int, and floats
 * to double, as C variadic arguments are.
 */
enum aql_printf_tag {
	AQL_PRINTF_TAG_I32 = 1,		/* int (or a promoted narrower type) */
	AQL_PRINTF_TAG_U32 = 2,		/* unsigned int */
	AQL_PRINTF_TAG_I64 = 3,		/* long, long long */
	AQL_PRINTF_TAG_U64 = 4,		/* unsigned long, size_t */
	AQL_PRINTF_TAG_F64 = 5,		/* double: the IEEE bits */
	AQL_PRINTF_TAG_PTR = 6,		/* a pointer's address */
};

/*
 * The payload of an AQL_CHANNEL_KIND_PRINTF message: the 24-byte header,
 * then arg_count values (AQL_PRINTF_RECORD_BYTES(arg_count) bytes in all;
 * the rest of args[] is not sent). Little-endian, as every agent is.
 */
typedef struct aql_printf_record {
	uint32_t format_id;
	uint32_t arg_count;			/* 0 .. AQL_PRINTF_MAX_ARGS */
	uint8_t tags[AQL_PRINTF_MAX_ARGS];	/* enum aql_printf_tag */
	uint32_t reserved;			/* 0 */
	uint64_t args[AQL_PRINTF_MAX_ARGS];
} aql_printf_record;

#define AQL_PRINTF_HEADER_BYTES 24u
#define AQL_PRINTF_RECORD_BYTES(n) (AQL_PRINTF_HEADER_BYTES + 8u * (uint32_t)(n))

#ifndef __OPENCL_C_VERSION__
AQL_STATIC_ASSERT(sizeof(aql_printf_record) == AQL_PRINTF_RECORD_BYTES(AQL_PRINTF_MAX_ARGS),
	       "printf record layout");
AQL_STATIC_ASSERT(__builtin_offsetof(aql_printf_record, args) == AQL_PRINTF_HEADER_BYTES,
	       "printf record header");
#endif

#endif /* AQL_PRINTF_RECORD_H */

/* ---------------------------------------------------------------------- */
/* Host API                                                                */

#if !defined(AQL_PRINTF_H) && !defined(__OPENCL_C_VERSION__) && !defined(AQL_PRINTF_RECORD_ONLY_)
#define AQL_PRINTF_H

#include <stddef.h>
#include <stdio.h>
#include <aql/channel.h>
#include <aql/code_object.h>
#include <aql/metadata.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aql_printf aql_printf;

/* Where the text goes. */
enum aql_printf_output {
	AQL_PRINTF_STDOUT = 0,	/* stdio's stdout */
	AQL_PRINTF_STREAM,	/* config.stream, through stdio */
	AQL_PRINTF_FD,		/* config.fd, through io_uring or write(2) */
};

enum aql_printf_flag {
	/* AQL_PRINTF_FD: write(2) from the draining thread, no io_uring. */
	AQL_PRINTF_NO_URING = 1u << 0,
};

/* How the service writes (aql_printf_stats.method). */
enum aql_printf_method {
	AQL_PRINTF_METHOD_STDIO = 0,
	AQL_PRINTF_METHOD_URING,
	AQL_PRINTF_METHOD_WRITE,
};

typedef struct aql_printf_config {
	enum aql_printf_output output;
	FILE *stream;		/* AQL_PRINTF_STREAM; not closed */
	int fd;			/* AQL_PRINTF_FD; not closed */
	uint32_t flags;		/* enum aql_printf_flag */
	/*
	 * AQL_PRINTF_FD: bytes of text gathered before a write, 256 B to
	 * 64 MiB; 0: 64 KiB. Two such buffers: one being written while the
	 * other fills.
	 */
	uint32_t buffer_size;
	/* The program's format strings: formats[i] has id i; NULL: none. */
	const char *const *formats;
	uint32_t format_count;
} aql_printf_config;

typedef struct aql_printf_stats {
	uint64_t records;	/* records received */
	uint64_t errors;	/* of them, printed as a diagnostic line */
	uint64_t bytes;		/* bytes written (fd) or given to the stream */
	uint64_t writes;	/* write requests to the fd (io_uring or write(2)) */
	uint64_t write_errors;	/* writes that failed; the bytes were lost */
	uint32_t formats;	/* format strings known */
	enum aql_printf_method method;
} aql_printf_stats;

/*
 * Create a printf service. config may be NULL: stdout, no formats yet.
 * With AQL_PRINTF_FD the service sets up an io_uring; if io_uring is
 * unavailable (or the kernel cannot write at the file position, or the
 * environment sets AQL_PRINTF_NO_URING=1) it says so in one line on
 * stderr and uses write(2). Output errors do not stop
 * the service: they are counted, and the next aql_printf_flush() reports
 * them.
 *
 * Errors: AQL_ERR_INVALID_ARG naming the field (an unknown output or
 * flag, a NULL stream, a negative fd, a buffer size out of range);
 * the errors of aql_printf_add_formats() for config.formats;
 * AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_printf_create(const aql_printf_config *config, aql_printf **out);

/*
 * Write what is buffered, wait for it, and free svc. Returns the error
 * aql_printf_flush() would. The channels it is attached to are not
 * touched (they may be gone already) and keep its handler: destroy them
 * first, or detach them (after stopping their serve threads), before
 * they are drained again. NULL is accepted.
 */
aql_status aql_printf_destroy(aql_printf *svc);

/*
 * Add format strings: formats[i] gets id first_id + i; NULL entries are
 * skipped. Adding an id again with the same string is allowed; with a
 * different one it is an error, and nothing of the call is added.
 * Strings are copied. A format whose conversions the service cannot
 * print (%s, say) is accepted; records using it print a diagnostic.
 *
 * Errors: AQL_ERR_INVALID_ARG (NULL svc, NULL formats with a count, ids
 * past UINT32_MAX, an id already taken by another string: the message
 * names the id and both strings); AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_printf_add_formats(aql_printf *svc, const char *const *formats,
				  uint32_t count, uint32_t first_id);

/*
 * Add the amdhsa.printf strings of code object metadata. Each is
 * "ID:N:SIZE_1:...:SIZE_N:FORMAT", as LLVM's OpenCL printf lowering
 * writes them: the decimal id, the number of argument sizes, the sizes
 * (not used here: records carry their own), then the format, in which
 * "\72" stands for ':' and \a \b \f \n \r \v for those characters (other
 * backslashes are kept, and a raw ':' in the format is taken as itself).
 * Entries with id 0 are HIP's hash-keyed buffered printf formats
 * ("0:0:<md5>,<format>"), which no record can name; they are skipped.
 * All or nothing, as aql_printf_add_formats().
 *
 * Errors: AQL_ERR_INVALID_CODE_OBJECT naming the entry and what in it is
 * malformed; AQL_ERR_INVALID_ARG (NULL arguments, a conflicting id, as
 * above); AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_printf_add_metadata(aql_printf *svc, const aql_metadata *md);

/* aql_printf_add_metadata() on the metadata of co (opened or loaded). */
aql_status aql_printf_add_code_object(aql_printf *svc, const aql_code_object *co);

/*
 * Handle the AQL_CHANNEL_KIND_PRINTF messages of ch: installs the
 * service's handler with aql_channel_set_handler(), so drains of ch (and
 * its serve thread) print them. Several channels may share a service;
 * their records are printed one at a time, whole. Attaching again is a
 * no-op. The text of each drain is written when the drain ends (fd
 * output; a stdio stream is flushed then), or earlier when a buffer
 * fills.
 *
 * Errors: AQL_ERR_INVALID_ARG (NULL); AQL_ERR_NOMEM. Thread safe with
 * other calls on svc, but, as aql_channel_set_handler(), not with drains
 * of ch.
 */
aql_status aql_printf_attach(aql_printf *svc, aql_channel *ch);

/*
 * Stop handling ch's printf records (its handler is removed). Errors:
 * AQL_ERR_INVALID_ARG (NULL); AQL_ERR_NOT_FOUND (not attached). Thread
 * safety as aql_printf_attach().
 */
aql_status aql_printf_detach(aql_printf *svc, aql_channel *ch);

/*
 * Write everything buffered and wait until it is written (fd), or
 * fflush() the stream. Errors: AQL_ERR_SYSTEM when writes failed since
 * the last flush, naming the output, the count and the first error (the
 * bytes of those writes are lost); AQL_ERR_INVALID_ARG (NULL). Thread
 * safe.
 */
aql_status aql_printf_flush(aql_printf *svc);

/*
 * Format one record as the service would print it, without printing or
 * counting it: the text (or the diagnostic line) goes to out, cut to cap
 * bytes with a terminating NUL (if cap > 0); *len (if not NULL) gets the
 * full length. data and size are the message payload. Returns AQL_OK for
 * a record printed as text, AQL_ERR_INVALID_ARG for one printed as a
 * diagnostic (aql_error_message() says why). Thread safe.
 */
aql_status aql_printf_format(aql_printf *svc, const void *data, size_t size, char *out,
			     size_t cap, size_t *len);

/* Fill *out. Errors: AQL_ERR_INVALID_ARG (NULL). Thread safe. */
aql_status aql_printf_get_stats(aql_printf *svc, aql_printf_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* host API */
