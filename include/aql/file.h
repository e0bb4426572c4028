/* SPDX-License-Identifier: MIT */
/*
 * File loads: read a file, or a byte range of it, straight into caller
 * memory (typically a device-visible host buffer). Reads go through
 * io_uring, cut into chunks with several in flight, and use O_DIRECT where
 * the destination address, file offset and length allow it and the file
 * is not in the page cache already; without
 * io_uring (old kernel, seccomp, the io_uring_disabled sysctl) the same
 * plan runs with pread(), after a one-line notice on stderr printed once
 * per process.
 *
 * The asynchronous form runs the read on a thread of its own and
 * completes on an aql_signal, so a barrier-AND packet can make a kernel
 * launch wait for the data without a host round trip.
 *
 * Speed: reads through the page cache go to io_uring's worker threads,
 * several pieces at once. O_DIRECT throughput depends on how many
 * physically contiguous segments a request has: a destination backed by
 * huge pages reads faster than one in 4 KiB pages. io_uring registered
 * (fixed) buffers are not used: registering the destination for a single
 * read pins all of it first, which cost more than it saved in 4 KiB pages
 * and about as much in huge pages (measured on a 256 MiB file).
 *
 * Setting the environment variable AQL_FILE_NO_URING to a non-empty value
 * other than "0" forces the pread path, as AQL_FILE_READ_PREAD does.
 */
#ifndef AQL_FILE_H
#define AQL_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <aql/signal.h>
#include <aql/status.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether to read with O_DIRECT (bypassing the page cache). */
enum aql_file_direct {
	/*
	 * Where allowed: the aligned body of the range goes through O_DIRECT,
	 * an unaligned head or tail through the page cache. The page cache
	 * serves it all when dst is misaligned against the offset, the file
	 * system refuses O_DIRECT (EINVAL at open or on a read), or half the
	 * range or more is cached already (copying it beats reading the
	 * device again).
	 */
	AQL_FILE_DIRECT_AUTO = 0,
	AQL_FILE_DIRECT_OFF,	/* always through the page cache */
	/*
	 * All of the range through O_DIRECT, or an error: dst and offset
	 * must be aligned to the file's direct I/O alignment. An unaligned
	 * end is rounded up to that alignment, which needs the room in
	 * capacity and may write dst past the bytes reported, up to the
	 * rounded end.
	 */
	AQL_FILE_DIRECT_ON,
};

/* How a read was done. */
enum aql_file_method {
	AQL_FILE_METHOD_NONE = 0,	/* nothing was read yet */
	AQL_FILE_METHOD_URING,		/* io_uring */
	AQL_FILE_METHOD_PREAD,		/* pread(), forced or as the fallback */
};

enum aql_file_read_flag {
	/* Use pread() even where io_uring works (as AQL_FILE_NO_URING=1). */
	AQL_FILE_READ_PREAD = 1u << 0,
	/*
	 * Reaching the end of the file before the expected end is not an
	 * error: the read reports the bytes it got, as read() does. Without
	 * it a range past the end of the file is refused up front and a file
	 * that shrinks during the read is an error.
	 */
	AQL_FILE_READ_SHORT_OK = 1u << 1,
};

/*
 * Progress of a read: done of total bytes are in dst (done counts
 * completed pieces, which may finish out of order; total is the bytes the
 * read will ask for). Called after at least progress_interval more bytes
 * completed, and once more at the end: the last call of a read that
 * succeeds has done == total (an empty read gets one call, 0 of 0).
 * Return 0 to go on, or non-zero to cancel the read; no call follows.
 * Called on the reading thread (the caller's, or the background thread of
 * an asynchronous read), never concurrently for one read.
 */
typedef int (*aql_file_progress_fn)(uint64_t done, uint64_t total, void *user);

/* Zero-initialised fields take the defaults. */
typedef struct aql_file_read_options {
	/* Bytes to read from offset; 0: up to the end of the file. */
	uint64_t length;
	/* Bytes per read request; 0: 1 MiB. At most 1 GiB. */
	uint32_t chunk_size;
	/* Requests in flight at once; 0: 16. At most 1024. */
	uint32_t queue_depth;
	enum aql_file_direct direct;
	uint32_t flags;			/* enum aql_file_read_flag */
	aql_file_progress_fn progress;	/* NULL: no progress calls */
	void *progress_user;
	/* Bytes between progress calls, at least; 0: chunk_size. */
	uint64_t progress_interval;
} aql_file_read_options;

typedef struct aql_file_read_result {
	uint64_t bytes;		/* bytes in dst, from dst[0], read from offset */
	uint64_t expected;	/* bytes asked for: length, or file size - offset */
	uint64_t direct_bytes;	/* of bytes, those read with O_DIRECT */
	enum aql_file_method method;
} aql_file_read_result;

/*
 * Read path from offset into dst, at most capacity bytes, and fill
 * *result (may be NULL). opts may be NULL (all defaults). Blocks until the
 * read is done. With a progress callback, a non-zero return cancels the
 * read: requests in flight are waited for, none is started after, and the
 * call fails as below. The file is opened for this call and closed before
 * it returns.
 *
 * What is read: opts->length bytes, or with length 0 the rest of the
 * file from offset (its size when opened; a file that grows meanwhile is
 * read only that far). Only regular files are read.
 *
 * Errors, each message naming the file:
 * - AQL_ERR_NOT_FOUND: path does not exist.
 * - AQL_ERR_SYSTEM: open, stat or a read failed, with the errno text
 *   (permission denied, a directory (EISDIR), an I/O error; a read error
 *   also names the offset); the file ended before the expected bytes
 *   were read (it shrank during the read) unless AQL_FILE_READ_SHORT_OK;
 *   the progress callback or aql_file_read_cancel() canceled the read
 *   (errno text of ECANCELED).
 * - AQL_ERR_INVALID_ARG: dst NULL with capacity > 0, path NULL, options
 *   out of range, the bytes to read exceed capacity (both sizes named),
 *   offset past the end of the file, or offset + length past it without
 *   AQL_FILE_READ_SHORT_OK.
 * - AQL_ERR_UNSUPPORTED: not a regular file (a FIFO, a device, a
 *   socket); AQL_FILE_DIRECT_ON with a misaligned dst or offset, no room
 *   to round the end up, or a file system that refuses O_DIRECT.
 * - AQL_ERR_NOMEM.
 * On failure result->bytes still tells how many bytes from dst[0] were
 * read completely (0 if the read never started); dst past them may have
 * been written. Nothing is ever written outside dst[0, capacity).
 *
 * Thread safe: concurrent reads, of the same file too, are independent.
 */
aql_status aql_file_read(const char *path, void *dst, size_t capacity, uint64_t offset,
			 const aql_file_read_options *opts, aql_file_read_result *result);

/*
 * As aql_file_read(), on an open file descriptor (its file position is
 * neither used nor moved; it stays open). name labels the file in error
 * messages (NULL: "fd N"). For O_DIRECT the file is opened a second time
 * through /proc/self/fd; if that fails, AUTO reads through fd alone.
 * An fd opened with O_DIRECT itself must meet the alignment for every
 * piece, so pass AQL_FILE_DIRECT_ON or an aligned range with it.
 * Errors and thread safety as aql_file_read(); AQL_ERR_INVALID_ARG for a
 * negative fd, AQL_ERR_SYSTEM for a closed one (EBADF).
 */
aql_status aql_file_read_fd(int fd, const char *name, void *dst, size_t capacity,
			    uint64_t offset, const aql_file_read_options *opts,
			    aql_file_read_result *result);

typedef struct aql_file_read_op aql_file_read_op;

/*
 * Start reading path into dst on a background thread and return at once
 * with the read's handle in *out. Opening, the size checks and every
 * other argument check happen here, so a missing file or a destination
 * too small fails the call itself (same errors as aql_file_read()); then
 * nothing was started, *out is NULL and completion is untouched.
 *
 * When the read ends, completion (if not NULL) changes once, with
 * release order, so a waiter that sees the change also sees the data:
 * - success: it is decremented by 1. A signal created with value 1 goes
 *   to 0; one created with value n goes to 0 after n reads completed.
 *   A barrier-AND packet on it makes a launch wait for the data.
 * - failure or cancellation: it is set to -1 (a negative value, as a
 *   failed packet's signal; later decrements keep it negative). A
 *   barrier-AND waits for exactly 0, so a launch chained behind a failed
 *   read never runs: learn of the failure from aql_file_read_wait() or a
 *   wait for the signal to drop below 1, then tear the queue down.
 * The thread touches neither completion nor dst after that change, so
 * a waiter may reuse both at once. The progress callback, if any, runs on
 * the background thread. Errors: as aql_file_read(), and AQL_ERR_SYSTEM
 * when no thread can be started. out must not be NULL (the handle must be
 * freed with aql_file_read_free()). Thread safe.
 */
aql_status aql_file_read_async(const char *path, void *dst, size_t capacity, uint64_t offset,
			       const aql_file_read_options *opts, aql_signal *completion,
			       aql_file_read_op **out);

/*
 * Wait up to timeout_ns (AQL_TIMEOUT_INFINITE: no limit; 0: just poll)
 * for the read to end. Returns the read's own status and sets this
 * thread's error message to the read's, and fills *result (may be NULL).
 * Errors: AQL_ERR_TIMEOUT if the read is still running (the handle stays
 * valid; wait again or free it), AQL_ERR_INVALID_ARG for a NULL op, or
 * the read's error. Thread safe; several threads may wait on one op, but
 * none may wait while another frees it, and the read's own progress
 * callback must not wait on it.
 */
aql_status aql_file_read_wait(aql_file_read_op *op, uint64_t timeout_ns,
			      aql_file_read_result *result);

/*
 * Ask a running read to stop: no request is started after, those in
 * flight are waited for, and the read fails with AQL_ERR_SYSTEM
 * (ECANCELED), its signal set to -1. No effect on a read that already
 * ended. Returns at once. NULL is accepted. Thread safe.
 */
void aql_file_read_cancel(aql_file_read_op *op);

/*
 * Release the handle. A read still running is canceled and waited for
 * first (bounded by the requests already in flight), so after this
 * returns the read writes neither dst nor its signal. NULL is accepted.
 * Not to be called concurrently with another call on the same op, nor
 * from the read's own progress callback (it would wait for itself).
 */
void aql_file_read_free(aql_file_read_op *op);

/* "io_uring", "pread" or "none". Never NULL. Thread safe. */
const char *aql_file_method_str(enum aql_file_method method);

#ifdef __cplusplus
}
#endif

#endif
