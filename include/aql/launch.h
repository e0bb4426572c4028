/* SPDX-License-Identifier: MIT */
/*
 * Typed launches: run a loaded kernel with typed buffers and scalars, on
 * any agent, in one call. Before any packet is written the arguments are
 * checked against the kernel's metadata: their number, a buffer for every
 * global_buffer and a scalar of the right size (and kind, where the type
 * names say) for every by_value, element types against pointee types, and
 * an AQL_IN buffer never given to an argument the kernel writes. The grid,
 * work-group and LDS sizes are checked against the kernel and the agent.
 *
 * Then, on the queue, in order: a wait for the dependencies on other
 * queues (a dependency that failed counts as met, as a BARRIER_VALUE
 * packet's does; its own completion reports the failure), copies of the
 * buffer ranges the kernel reads (AQL_IN, AQL_INOUT, and AQL_OUT ones
 * it does not write) that the agent does not hold current, and the
 * dispatch (kernarg segment from the queue's recycled pool, hidden
 * arguments filled). Every packet sets the barrier bit, so the launches
 * of one queue run in submission order, as a CUDA stream does. The
 * launch's completion covers all of it.
 *
 * What the kernel may write (a pointer argument that is not const, nor
 * read_only in the metadata) stays in the agent's copy: the host's copy
 * is brought up to date when the host asks (aql/buffer.h), so chained
 * launches move nothing between them.
 */
#ifndef AQL_LAUNCH_H
#define AQL_LAUNCH_H

#include <stdint.h>
#include <aql/buffer.h>
#include <aql/channel.h>
#include <aql/code_object.h>
#include <aql/completion.h>
#include <aql/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_arg_tag {
	AQL_ARGV_BUFFER = 1,
	AQL_ARGV_SCALAR,	/* a built-in scalar type, by value */
	AQL_ARGV_BYTES,		/* any by-value bytes (a struct) */
	AQL_ARGV_CHANNEL,	/* an aql_channel, for aql_channel_dev * */
	AQL_ARGV_PRINTF,	/* the queue's printf channel: AQL_ARG_PRINTF() */
};

/* One argument of a typed launch; make it with AQL_ARG() or aql_arg_*(). */
typedef struct aql_arg {
	enum aql_arg_tag tag;
	const aql_type *type;	/* scalars; a struct's, if registered */
	aql_buf *buf;
	const void *bytes;
	uint32_t size;
	union {
		int64_t i;
		uint64_t u;
		double d;
		float f;
		unsigned char raw[8];
	} v;
} aql_arg;

static inline aql_arg aql_arg_buf(aql_buf *b)
{
	aql_arg a = { AQL_ARGV_BUFFER, 0, b, 0, 0, { 0 } };

	return a;
}

#define AQL_ARG_SCALAR_(name, T, field, tp)                                    \
	static inline aql_arg aql_arg_##name(T x)                              \
	{                                                                      \
		aql_arg a = { AQL_ARGV_SCALAR, &tp, 0, 0, sizeof(T), { 0 } };  \
		a.v.field = x;                                                 \
		return a;                                                      \
	}
AQL_ARG_SCALAR_(i8, int8_t, i, aql_type_i8)
AQL_ARG_SCALAR_(u8, uint8_t, u, aql_type_u8)
AQL_ARG_SCALAR_(i16, int16_t, i, aql_type_i16)
AQL_ARG_SCALAR_(u16, uint16_t, u, aql_type_u16)
AQL_ARG_SCALAR_(i32, int32_t, i, aql_type_i32)
AQL_ARG_SCALAR_(u32, uint32_t, u, aql_type_u32)
AQL_ARG_SCALAR_(i64, int64_t, i, aql_type_i64)
AQL_ARG_SCALAR_(u64, uint64_t, u, aql_type_u64)
AQL_ARG_SCALAR_(f32, float, f, aql_type_f32)
AQL_ARG_SCALAR_(f64, double, d, aql_type_f64)
#undef AQL_ARG_SCALAR_

/* By-value bytes, e.g. a struct: aql_arg_bytes(&params, sizeof(params)). */
static inline aql_arg aql_arg_bytes(const void *p, uint32_t size)
{
	aql_arg a = { AQL_ARGV_BYTES, 0, 0, p, size, { 0 } };

	return a;
}

/* A channel, for a kernel argument declared aql_global aql_channel_dev *. */
static inline aql_arg aql_arg_channel(aql_channel *ch)
{
	aql_arg a = { AQL_ARGV_CHANNEL, 0, 0, ch, sizeof(uint64_t), { 0 } };

	a.v.u = aql_channel_device_address(ch);
	return a;
}

/*
 * The launching queue's printf channel, for a kernel argument declared
 * aql_global aql_channel_dev * that the kernel gives AQL_PRINTF(). No
 * set-up: the first launch that passes it makes the channel on the
 * queue's agent, a printf service writing to stdout (aql/printf.h) and
 * a thread that prints records as they come; the queue keeps them until
 * it is destroyed. Text is printed whole, in the order the channel
 * delivers it (each work-item's in its own order); all that a launch
 * printed is on stdout (flushed) when aql_completion_wait() of its
 * completion, or of a later one of the queue, returns AQL_OK, or when
 * aql_queue_destroy() returns. Launches from any threads may share it.
 * The kernel names its formats inline (AQL_PRINTF(ch, "x=%d\n", x));
 * id-based records print a diagnostic here, as no format table is
 * given. For another stream or fd, your own format table, or no output
 * at all, pass a channel of your own with a service attached instead.
 * Errors (of the launch): those of aql_channel_create(),
 * aql_printf_create() and aql_channel_serve_start().
 */
static inline aql_arg aql_arg_printf(void)
{
	aql_arg a = { AQL_ARGV_PRINTF, 0, 0, 0, sizeof(uint64_t), { 0 } };

	return a;
}
#define AQL_ARG_PRINTF() aql_arg_printf()

/* The argument for x: a buffer, a channel, or a scalar of x's type. */
#ifndef __cplusplus
#define AQL_ARG(x)                                                             \
	_Generic((x), aql_buf *: aql_arg_buf, aql_channel *: aql_arg_channel,  \
		 signed char: aql_arg_i8,                                      \
		 char: aql_arg_i8, unsigned char: aql_arg_u8,                  \
		 short: aql_arg_i16, unsigned short: aql_arg_u16,              \
		 int: aql_arg_i32, unsigned int: aql_arg_u32,                  \
		 long: aql_arg_i64, unsigned long: aql_arg_u64,                \
		 long long: aql_arg_i64, unsigned long long: aql_arg_u64,      \
		 float: aql_arg_f32, double: aql_arg_f64)(x)
#endif

typedef struct aql_launch_config {
	uint32_t grid[3];	/* work-items per dimension; 0 in y, z: 1 */
	uint16_t workgroup[3];	/* 0 in x: the kernel's required size, or
				 * the largest of 64, 128, 256 it allows,
				 * at most grid x; on a CPU agent, for a
				 * work-group function the largest it
				 * allows (fibers keep that), at most
				 * what gives each worker a group */
	uint32_t dynamic_lds;	/* bytes after the kernel's static LDS */
	const aql_completion *after;	/* wait for these first */
	uint32_t after_count;
} aql_launch_config;

/*
 * Launch kernel on queue with args[0..n), as described above; *done (if
 * not NULL) gets the completion, valid until the queue is destroyed. On
 * any error nothing was submitted.
 *
 * Errors: AQL_ERR_INVALID_ARG naming the kernel, the argument's index and
 * name, and both types (wrong count, buffer for a by_value or scalar for
 * a global_buffer, size or element type mismatch, an integer of the
 * other signedness whose value would change meaning, such as -1 for a
 * uint32_t (one that fits is taken), AQL_IN buffer to a written
 * argument), or the limit a grid, work-group or LDS size breaks;
 * AQL_ERR_BUSY when a buffer range this launch would write (or read) is
 * written (or read) by work in flight on another queue that the launch is
 * not ordered after (pass that work's completion in after); also, even
 * for work it is ordered after, when a buffer has storage on another
 * agent where work in flight uses it (the move goes through the host and
 * waits for nothing: aql_buf_wait() first), and when the host changed a
 * buffer's range in more than four pieces whose gaps writes in flight
 * (this queue's earlier launches included) still produce (wait for those
 * writes, or write the host data in fewer pieces); AQL_ERR_NOMEM;
 * AQL_ERR_QUEUE_FULL, AQL_ERR_QUEUE_ERROR from the queue; on an AMD agent,
 * the first launch of a kernel that names the device heap or hostcall
 * buffer fails as aql_queue_hidden_args() does where it cannot make them.
 *
 * Thread safe: launches on one queue from several threads are serialised
 * by the queue's launch lock.
 */
aql_status aql_launch(aql_queue *queue, const aql_kernel *kernel,
		      const aql_launch_config *config, const aql_arg *args,
		      uint32_t n, aql_completion *done);

/* aql_launch(q, k, cfg, args, n, done) with the arguments listed inline. */
#ifndef __cplusplus
#define AQL_LAUNCH(queue, kernel, config, done, ...)                           \
	aql_launch((queue), (kernel), (config),                                \
		   (const aql_arg[]){ __VA_ARGS__ },                           \
		   (uint32_t)(sizeof((aql_arg[]){ __VA_ARGS__ }) /             \
			      sizeof(aql_arg)),                                \
		   (done))
#endif

typedef struct aql_launch_stats {
	uint64_t launches;
	uint64_t copies_in;		/* copy packets to the agent */
	uint64_t copies_out;		/* copy packets back (aql_buf_to_host) */
	uint64_t bytes_in, bytes_out;
	uint64_t kernarg_bytes;		/* size of the kernarg pool */
	uint64_t kernarg_waits;		/* launches that waited for a free segment */
} aql_launch_stats;

/*
 * Counters of the typed launches and copies made on queue so far. Copies
 * back made by host access are not on a queue: aql_buf_info counts every
 * copy of a buffer. Errors: AQL_ERR_INVALID_ARG. Thread safe.
 */
aql_status aql_launch_get_stats(aql_queue *queue, aql_launch_stats *out);

#ifdef __cplusplus
}

/* C++: overloads where C uses _Generic, and an array for the compound literal. */
#define AQL_ARG_OF_(T, fn)                                                     \
	inline aql_arg aql_arg_of_(T x) { return fn(x); }
AQL_ARG_OF_(aql_buf *, aql_arg_buf)
AQL_ARG_OF_(aql_channel *, aql_arg_channel)
AQL_ARG_OF_(signed char, aql_arg_i8)
AQL_ARG_OF_(char, aql_arg_i8)
AQL_ARG_OF_(unsigned char, aql_arg_u8)
AQL_ARG_OF_(short, aql_arg_i16)
AQL_ARG_OF_(unsigned short, aql_arg_u16)
AQL_ARG_OF_(int, aql_arg_i32)
AQL_ARG_OF_(unsigned int, aql_arg_u32)
AQL_ARG_OF_(long, aql_arg_i64)
AQL_ARG_OF_(unsigned long, aql_arg_u64)
AQL_ARG_OF_(long long, aql_arg_i64)
AQL_ARG_OF_(unsigned long long, aql_arg_u64)
AQL_ARG_OF_(float, aql_arg_f32)
AQL_ARG_OF_(double, aql_arg_f64)
#undef AQL_ARG_OF_
#define AQL_ARG(x) aql_arg_of_(x)

template <unsigned N>
inline aql_status aql_launch_list_(aql_queue *queue, const aql_kernel *kernel,
				   const aql_launch_config *config, aql_completion *done,
				   const aql_arg (&args)[N])
{
	return aql_launch(queue, kernel, config, args, N, done);
}
#define AQL_LAUNCH(queue, kernel, config, done, ...)                           \
	aql_launch_list_((queue), (kernel), (config), (done), { __VA_ARGS__ })
#endif

#endif
