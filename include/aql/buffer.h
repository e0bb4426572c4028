/* SPDX-License-Identifier: MIT */
/*
 * Typed buffers: arrays that know their element type, their length (and
 * optionally a shape), where their valid copies live and which way data
 * flows when a kernel uses them. The same code runs on every agent: a
 * buffer has host storage (device-visible host memory) and, once an agent
 * uses it, agent storage; launches and the copy calls here keep the two in
 * step, and copy nothing where the agent's memory is the host's.
 *
 * Data stays where it was last written. A launch that writes a buffer
 * leaves the result in the agent's copy; it comes back to the host only
 * when asked: by host access (aql_buf_data() and the accessors below), by
 * aql_buf_wait(), by aql_buf_to_host() at a chosen point of a queue, or
 * by a launch on another agent. Host writes, declared by the writable
 * accessor, are copied to the agent by the next launch that reads them.
 * docs/memory.md has the table of what moves when.
 *
 * Element types are values of aql_type. The scalar types are built in and
 * named at compile time with AQL_TYPE(T); user structs are registered once
 * with AQL_TYPE_REGISTER(T, &type). Host access checks the type: asking
 * for float elements of an int32_t buffer is an error, never a
 * reinterpretation. AQL_BUF_DECLARE(tag, T) makes a typed handle whose
 * accessors the compiler checks.
 *
 * Partitions: aql_buf_slice() and aql_buf_partition() give views of
 * disjoint (or any) element ranges that share their root's storage. A
 * launch may write a range only while no launch it is not ordered after
 * uses an overlapping range (see aql/launch.h), which is what lets disjoint
 * partitions be written by concurrent launches safely.
 */
#ifndef AQL_BUFFER_H
#define AQL_BUFFER_H

#include <stddef.h>
#include <stdint.h>
#include <aql/compat.h>
#include <aql/agent.h>
#include <aql/completion.h>
#include <aql/file.h>
#include <aql/queue.h>

#ifdef __cplusplus
extern "C" {
#endif

enum aql_type_class {
	AQL_TYPE_SIGNED = 1,
	AQL_TYPE_UNSIGNED,
	AQL_TYPE_FLOAT,
	AQL_TYPE_STRUCT,
};

typedef struct aql_type {
	const char *name;	/* "float", "int32_t", "struct particle" */
	uint32_t size;		/* bytes; a multiple of align */
	uint32_t align;		/* a power of two */
	enum aql_type_class cls;
} aql_type;

extern const aql_type aql_type_i8, aql_type_u8, aql_type_i16, aql_type_u16,
	aql_type_i32, aql_type_u32, aql_type_i64, aql_type_u64, aql_type_f32,
	aql_type_f64;

/* The built-in aql_type of scalar type T, chosen at compile time. */
#ifndef __cplusplus
#define AQL_TYPE(T)                                                            \
	_Generic((T *)0,                                                       \
		 signed char *: &aql_type_i8, unsigned char *: &aql_type_u8,   \
		 char *: &aql_type_i8, short *: &aql_type_i16,                 \
		 unsigned short *: &aql_type_u16, int *: &aql_type_i32,        \
		 unsigned int *: &aql_type_u32, long *: &aql_type_i64,         \
		 unsigned long *: &aql_type_u64, long long *: &aql_type_i64,   \
		 unsigned long long *: &aql_type_u64, float *: &aql_type_f32,  \
		 double *: &aql_type_f64)
#endif

/*
 * Register a struct element type (or return the one registered before
 * under the same name, size and alignment). Types live until exit.
 * Errors: AQL_ERR_INVALID_ARG (empty name, size 0 or not a multiple of
 * align, align not a power of two, the name registered before with
 * another size or alignment: the message gives both). Thread safe.
 */
aql_status aql_type_register(const char *name, size_t size, size_t align,
			     const aql_type **out);

#define AQL_TYPE_REGISTER(T, out)                                              \
	aql_type_register(#T, sizeof(T), AQL_ALIGNOF(T), (out))

/*
 * The registered or built-in type called name ("float", "uint32_t",
 * "struct particle"; C spellings such as "unsigned int" are accepted for
 * the scalars), or NULL. Thread safe.
 */
const aql_type *aql_type_find(const char *name);

enum aql_direction {
	AQL_IN = 1,		/* the kernel reads it: copied to the agent */
	AQL_OUT,		/* the kernel writes all of it: the result */
	AQL_INOUT,		/* both (results come back when asked) */
};

typedef struct aql_buf aql_buf;

typedef struct aql_buf_config {
	const char *name;	/* for messages; NULL: "buffer #<n>" */
	uint32_t ndim;		/* 0 or 1: a plain array; up to 4 */
	uint64_t shape[4];	/* ndim > 1: extents, row-major; product = count */
} aql_buf_config;

/*
 * A buffer of count elements of type, zero-filled, in device-visible host
 * memory; agent storage is made on first use by an agent. config may be
 * NULL. Errors: AQL_ERR_INVALID_ARG (NULL type, count 0, count * size
 * overflowing, a shape that does not multiply to count), AQL_ERR_NOMEM.
 * Thread safe.
 */
aql_status aql_buf_create(const aql_type *type, uint64_t count,
			  enum aql_direction dir, const aql_buf_config *config,
			  aql_buf **out);

/*
 * Destroy a buffer or a view. A root with live views or with launches in
 * flight is refused (AQL_ERR_BUSY, naming them). NULL is accepted.
 */
aql_status aql_buf_destroy(aql_buf *buf);

/*
 * A view of elements [first, first + count) of buf (itself a view or a
 * root), with buf's type and direction, sharing its root's storage.
 * Errors: AQL_ERR_INVALID_ARG (the range is not inside buf), AQL_ERR_NOMEM.
 * Thread safe.
 */
aql_status aql_buf_slice(aql_buf *buf, uint64_t first, uint64_t count,
			 aql_buf **out);

/*
 * Split buf into n (1..count) disjoint views covering it, as equal as the
 * count allows (the first count % n get one element more). out[] gets n
 * views. Errors: as aql_buf_slice(). Thread safe.
 */
aql_status aql_buf_partition(aql_buf *buf, uint32_t n, aql_buf **out);

typedef struct aql_buf_info {
	const char *name;
	const aql_type *type;
	uint64_t count;		/* elements */
	uint64_t first;		/* of a view, in its root; 0 for a root */
	uint32_t ndim;
	uint64_t shape[4];
	enum aql_direction dir;
	int is_view;
	aql_agent *agent;	/* holding agent storage, or NULL */
	/* Copies of the root's ranges made so far, each way, by launches,
	 * host access and the calls here (none on a unified agent). */
	uint64_t moves_to_agent, moves_to_host;
	uint64_t bytes_to_agent, bytes_to_host;
} aql_buf_info;

/* Describe buf. Errors: AQL_ERR_INVALID_ARG (NULL). Thread safe. */
aql_status aql_buf_get_info(const aql_buf *buf, aql_buf_info *out);

/* Change the direction later launches use. Thread safe. */
aql_status aql_buf_set_direction(aql_buf *buf, enum aql_direction dir);

/*
 * Host pointer to buf's elements, checked to be of type, with the host's
 * copy of the range brought up to date: the parts that launches wrote on
 * an agent with memory of its own are copied back first (synchronously;
 * only once: the copy stays current until the next such launch). The copy
 * back holds the process-wide buffer lock: until it ends, every other
 * thread's host access, buffer copy and launch with buffer arguments
 * waits, whatever buffer and queue it uses.
 *
 * NULL (with the reason in aql_error_message()) if type is not buf's; if
 * work in flight still writes the range (AQL_ERR_BUSY, naming the kernel
 * or copy: nothing waits here, wait for its completion or call
 * aql_buf_wait() first), or reads it (writable access only); or if the
 * copy back fails. The writable form declares a host write: it marks the
 * range as changed on the host, so the next launch that reads it copies
 * it to the agent again. The const form declares a read only. The
 * pointer stays valid until the buffer is destroyed, but its contents are
 * current only until the next launch that writes the range: ask again
 * after that launch completed. Thread safe.
 */
void *aql_buf_host(aql_buf *buf, const aql_type *type);
const void *aql_buf_host_const(aql_buf *buf, const aql_type *type);

/* Typed host access: float *x = aql_buf_data(buf, float). */
#define aql_buf_data(buf, T) ((T *)aql_buf_host((buf), AQL_TYPE(T)))
#define aql_buf_data_const(buf, T) ((const T *)aql_buf_host_const((buf), AQL_TYPE(T)))

/*
 * The host storage of buf's first element, with no check and no copy: for
 * a library that hands it to another transport in queue order
 * (libaql-mpi). The caller orders its use after the work that uses the
 * range, and after aql_buf_to_host() where an agent with memory of its
 * own holds the current copy. NULL if buf is NULL. Thread safe.
 */
void *aql_buf_host_storage(aql_buf *buf);

/*
 * Declare that work run in queue's order, after what was submitted to
 * queue so far, writes all of buf's range in its host storage (a
 * library's transport: libaql-mpi's queue-ordered receive): the range
 * counts as changed on the host from now on, replacing what only the
 * agent's copy held (queue aql_buf_to_host() first where the work writes
 * only part of it), so the next launch that reads it copies it to the
 * agent, in its queue's order. The work itself is not tracked: order
 * other uses of the range after its end. Errors: AQL_ERR_INVALID_ARG
 * (NULL), AQL_ERR_BUSY (work in flight on another queue uses the range,
 * named), AQL_ERR_NOMEM. Thread safe.
 */
aql_status aql_buf_host_written(aql_buf *buf, aql_queue *queue);
/*
 * Make the agent's copy of buf's range current on agent, on queue: copies
 * only what the host changed since. *done (may be NULL: wait here) gets
 * the completion. Errors: AQL_ERR_BUSY (work in flight on another queue
 * writes the range), those of aql_queue_copy(). Thread safe.
 */
aql_status aql_buf_to_agent(aql_buf *buf, aql_queue *queue, aql_completion *done);

/*
 * Queue, on queue (whose agent must hold buf's storage), a copy back to
 * the host of the parts of buf's range that only the agent's copy holds,
 * after everything submitted to queue before: the explicit point at which
 * a result comes back, with no host wait. *done (may be NULL: wait here)
 * gets the completion; until it, host access to the range is refused
 * (AQL_ERR_BUSY). Nothing to copy: *done is the completion of the last
 * write in flight on the range, if any. Counted in aql_launch_get_stats()
 * as copies_out. Errors: AQL_ERR_INVALID_ARG (NULL, storage on another
 * agent), AQL_ERR_BUSY (work in flight on another queue uses the range),
 * AQL_ERR_NOMEM, those of aql_queue_copy(). Thread safe.
 */
aql_status aql_buf_to_host(aql_buf *buf, aql_queue *queue, aql_completion *done);

/*
 * Wait until no work in flight uses buf's range, then bring the host's
 * copy of it up to date, as host access does (holding the buffer lock
 * while it copies, as there). Errors: AQL_ERR_TIMEOUT,
 * AQL_ERR_QUEUE_ERROR (some of that work failed or was cancelled), those
 * of aql_agent_copy(). Thread safe.
 */
aql_status aql_buf_wait(aql_buf *buf, uint64_t timeout_ns);

/*
 * Fill buf's range with count * element-size bytes of path from offset,
 * with aql_file_read() (io_uring, O_DIRECT where the alignment allows, or
 * pread): the file must hold them all. opts may be NULL; its length must
 * be 0 or that byte count. The range then counts as changed on the host.
 *
 * completion NULL: the read is done when the call returns. Otherwise it
 * runs in the background and *op gets its handle (free it with
 * aql_file_read_free()); completion is decremented when the data is in,
 * or set to -1 on failure (aql/file.h), and until then the range counts as
 * written by work in flight: pass aql_completion_of_signal(completion) in
 * a launch's after to use the data with no host round trip.
 *
 * Errors: AQL_ERR_INVALID_ARG (NULL, a length that is not the range's),
 * AQL_ERR_BUSY (work in flight uses the range), and those of
 * aql_file_read() and aql_file_read_async(). Thread safe.
 */
aql_status aql_buf_read_file(aql_buf *buf, const char *path, uint64_t offset,
			     const aql_file_read_options *opts, aql_signal *completion,
			     aql_file_read_op **op);

/*
 * A typed handle whose accessors the compiler checks. After
 * AQL_BUF_DECLARE(f32, float): aql_buf_f32 h; aql_buf_f32_create(n, AQL_IN,
 * NULL, &h); float *p = aql_buf_f32_data(h); h.raw is the aql_buf * for
 * launches. A struct tag registers its type on first create.
 */
#define AQL_BUF_DECLARE(tag, T)                                                \
	typedef struct aql_buf_##tag {                                         \
		aql_buf *raw;                                                  \
	} aql_buf_##tag;                                                       \
	static inline AQL_MAYBE_UNUSED const aql_type *aql_buf_##tag##_type(void)\
	{                                                                      \
		static const aql_type *cached;                                 \
		const aql_type *t = __atomic_load_n(&cached, __ATOMIC_ACQUIRE);\
		if (t)                                                         \
			return t;                                              \
		t = aql_type_find(#T);                                         \
		if (!t && aql_type_register(#T, sizeof(T), AQL_ALIGNOF(T), &t))   \
			return (const aql_type *)0;                            \
		__atomic_store_n(&cached, t, __ATOMIC_RELEASE);                \
		return t;                                                      \
	}                                                                      \
	static inline AQL_MAYBE_UNUSED aql_status aql_buf_##tag##_create(      \
		uint64_t count, enum aql_direction dir,                        \
		const aql_buf_config *config, aql_buf_##tag *out)              \
	{                                                                      \
		return aql_buf_create(aql_buf_##tag##_type(), count, dir,      \
				      config, &out->raw);                      \
	}                                                                      \
	static inline AQL_MAYBE_UNUSED T *aql_buf_##tag##_data(aql_buf_##tag h)\
	{                                                                      \
		return (T *)aql_buf_host(h.raw, aql_buf_##tag##_type());       \
	}                                                                      \
	static inline AQL_MAYBE_UNUSED const T *                               \
	aql_buf_##tag##_data_const(aql_buf_##tag h)                            \
	{                                                                      \
		return (const T *)aql_buf_host_const(h.raw,                    \
						     aql_buf_##tag##_type());  \
	}

AQL_BUF_DECLARE(i8, int8_t)
AQL_BUF_DECLARE(u8, uint8_t)
AQL_BUF_DECLARE(i16, int16_t)
AQL_BUF_DECLARE(u16, uint16_t)
AQL_BUF_DECLARE(i32, int32_t)
AQL_BUF_DECLARE(u32, uint32_t)
AQL_BUF_DECLARE(i64, int64_t)
AQL_BUF_DECLARE(u64, uint64_t)
AQL_BUF_DECLARE(f32, float)
AQL_BUF_DECLARE(f64, double)

#ifdef __cplusplus
}

/* C++: overloads where C uses _Generic, with the same names. */
#define AQL_TYPE_OF_(T, t)                                                     \
	inline const aql_type *aql_type_of_(T *) { return &(t); }
AQL_TYPE_OF_(signed char, aql_type_i8)
AQL_TYPE_OF_(unsigned char, aql_type_u8)
AQL_TYPE_OF_(char, aql_type_i8)
AQL_TYPE_OF_(short, aql_type_i16)
AQL_TYPE_OF_(unsigned short, aql_type_u16)
AQL_TYPE_OF_(int, aql_type_i32)
AQL_TYPE_OF_(unsigned int, aql_type_u32)
AQL_TYPE_OF_(long, aql_type_i64)
AQL_TYPE_OF_(unsigned long, aql_type_u64)
AQL_TYPE_OF_(long long, aql_type_i64)
AQL_TYPE_OF_(unsigned long long, aql_type_u64)
AQL_TYPE_OF_(float, aql_type_f32)
AQL_TYPE_OF_(double, aql_type_f64)
#undef AQL_TYPE_OF_
#define AQL_TYPE(T) aql_type_of_(static_cast<T *>(nullptr))
#endif

#endif
