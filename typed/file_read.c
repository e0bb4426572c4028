/* SPDX-License-Identifier: MIT */
/*
 * File loads through io_uring, or pread() where io_uring is unavailable.
 *
 * A read is a plan and an engine. The plan fixes the byte range and which
 * part of it goes through an O_DIRECT descriptor ([dlo, dhi), aligned)
 * and which through the page cache (an unaligned head and tail). The range
 * is handed out in pieces of at most one chunk to a fixed set of slots,
 * one per request in flight; a short read puts the rest of its piece back
 * in its slot. Both engines drive the same slots and the same completion
 * handler, so retries, end-of-file, progress and cancellation behave the
 * same with io_uring and with pread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <liburing.h>

#include <aql/file.h>
#include "util/error.h"
#include "util/uring_tsan.h"

#define DEFAULT_CHUNK		(1u << 20)
#define MAX_CHUNK		(1u << 30)
#define DEFAULT_DEPTH		16u
#define MAX_DEPTH		1024u
/* When statx cannot tell the direct I/O alignment: right for any device. */
#define GUESS_DIO_ALIGN		4096u
/* EINTR/EAGAIN/ECANCELED resubmissions of one piece before pread takes it. */
#define MAX_RETRIES		8
/* Submissions refused with nothing in flight before the read gives up. */
#define MAX_SUBMIT_STALLS	1000

#ifndef __NR_cachestat
#define __NR_cachestat		451	/* on every architecture but alpha */
#endif

enum slot_state { SLOT_FREE, SLOT_READY, SLOT_BUSY };

struct slot {
	uint64_t pos;		/* next byte, relative to the start of the range */
	uint32_t len;		/* bytes still to read from pos */
	uint8_t state;		/* enum slot_state */
	uint8_t direct;		/* through dfd */
	uint8_t retries;
	uint8_t sync;		/* retries ran out: pread finishes it */
};

struct job {
	char *name;		/* for messages */
	int fd, dfd;		/* page cache; O_DIRECT or -1 */
	int own_fd, own_dfd;
	uint8_t *dst;
	uint64_t offset;	/* file offset of dst[0] */
	uint64_t expected;	/* bytes asked for */
	uint64_t total;		/* bytes to read: expected, cut at end of file */
	uint64_t end;		/* bytes requested: total, rounded up for DIRECT_ON */
	uint64_t dlo, dhi;	/* [dlo, dhi) goes through dfd */
	uint32_t off_align;	/* direct I/O file offset and length alignment */
	uint32_t mem_align;	/* direct I/O memory alignment */
	uint32_t chunk, dchunk;	/* piece sizes through fd and dfd */
	uint32_t depth;
	uint64_t interval;	/* bytes between progress calls */
	aql_file_read_options o;
	int *cancel;		/* set by aql_file_read_cancel(), or NULL */

	/* The run. */
	enum aql_file_method method;
	int punt;		/* page cache reads go to io_uring's workers */
	int direct_failed;	/* AUTO met EINVAL: no more O_DIRECT */
	int stop;
	int called;		/* progress was called at least once */
	uint64_t next;		/* first byte not handed to a slot yet */
	uint64_t eof;		/* lowest end of file seen, relative */
	uint64_t hole;		/* lowest byte that failed or was abandoned */
	uint64_t done, direct_done, reported;
	struct slot *slots;
	aql_status status;
	char msg[400];
};

static int notice_printed;

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Record the read's first failure and stop starting requests. */
__attribute__((format(printf, 4, 5)))
static void job_fail(struct job *j, aql_status st, int err, const char *fmt, ...)
{
	va_list ap;
	int n;

	j->stop = 1;
	if (j->status != AQL_OK)
		return;
	j->status = st;
	va_start(ap, fmt);
	n = vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
	if (err && n >= 0 && (size_t)n < sizeof(j->msg))
		snprintf(j->msg + n, sizeof(j->msg) - (size_t)n, ": %s", strerror(err));
}

static void job_close(struct job *j)
{
	if (j->own_dfd && j->dfd >= 0)
		close(j->dfd);
	if (j->own_fd && j->fd >= 0)
		close(j->fd);
	j->fd = j->dfd = -1;
	j->own_fd = j->own_dfd = 0;
	free(j->slots);
	j->slots = NULL;
	free(j->name);
	j->name = NULL;
}

static int env_no_uring(void)
{
	const char *v = getenv("AQL_FILE_NO_URING");

	return v && *v && strcmp(v, "0") != 0;
}

/* ---- the plan ------------------------------------------------------- */

/* The same file again, through /proc, with other flags; -1 if not. */
static int reopen(int fd, const struct stat *st, int flags)
{
	char path[40];
	struct stat st2;
	int nfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	nfd = open(path, flags | O_CLOEXEC | O_NOCTTY);
	if (nfd < 0)
		return -1;
	if (fstat(nfd, &st2) || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
		close(nfd);
		return -1;
	}
	return nfd;
}

struct cachestat_range_ {
	uint64_t off, len;
};

struct cachestat_ {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

/* Bytes of the range that sit in the page cache, or -1 if unknown. */
static int64_t cached_bytes(int fd, uint64_t off, uint64_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct cachestat_range_ r = { off - off % page, 0 };
	struct cachestat_ cs;
	unsigned char vec[4096];
	uint64_t start, pages, resident = 0;
	void *map;

	r.len = off + len - r.off;
	if (syscall(__NR_cachestat, fd, &r, &cs, 0) == 0)
		return (int64_t)min64(cs.nr_cache * page, len);
	/* Before Linux 6.5: mincore() on a mapping, which faults nothing in. */
	start = r.off;
	if (r.len > SIZE_MAX)
		return -1;
	map = mmap(NULL, (size_t)r.len, PROT_READ, MAP_SHARED, fd, (off_t)start);
	if (map == MAP_FAILED)
		return -1;
	pages = (r.len + page - 1) / page;
	for (uint64_t i = 0; i < pages; i += sizeof(vec)) {
		uint64_t n = min64(sizeof(vec), pages - i);

		if (mincore((char *)map + i * page, (size_t)(n * page), vec)) {
			munmap(map, (size_t)r.len);
			return -1;
		}
		for (uint64_t k = 0; k < n; k++)
			resident += vec[k] & 1;
	}
	munmap(map, (size_t)r.len);
	return (int64_t)min64(resident * page, len);
}

/*
 * Direct I/O alignment of the file: 0 if its file system says it has no
 * direct I/O, a safe guess if it does not say.
 */
static void dio_align(int fd, uint32_t *off_align, uint32_t *mem_align)
{
	struct statx sx;

	*off_align = *mem_align = GUESS_DIO_ALIGN;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 &&
	    (sx.stx_mask & STATX_DIOALIGN)) {
		*off_align = sx.stx_dio_offset_align;
		*mem_align = sx.stx_dio_mem_align ? sx.stx_dio_mem_align : 1;
		if (*off_align & (*off_align - 1) || *mem_align & (*mem_align - 1))
			*off_align = *mem_align = GUESS_DIO_ALIGN;
	}
}

static aql_status check_options(const aql_file_read_options *o)
{
	if (o->chunk_size > MAX_CHUNK)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: chunk size %u exceeds %u",
				o->chunk_size, MAX_CHUNK);
	if (o->queue_depth > MAX_DEPTH)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: queue depth %u exceeds %u",
				o->queue_depth, MAX_DEPTH);
	if ((unsigned)o->direct > AQL_FILE_DIRECT_ON)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: direct mode %d is unknown",
				(int)o->direct);
	if (o->flags & ~(uint32_t)(AQL_FILE_READ_PREAD | AQL_FILE_READ_SHORT_OK))
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: flags 0x%x has unknown bits",
				o->flags);
	return AQL_OK;
}

/* The range to read, from the file's size. */
static aql_status plan_range(struct job *j, const struct stat *st, size_t capacity)
{
	uint64_t size = (uint64_t)st->st_size, avail;

	if (j->o.length > capacity)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"file %s: length %" PRIu64 " exceeds the capacity of %zu bytes",
				j->name, j->o.length, capacity);
	if (j->offset > size)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"file %s: offset %" PRIu64 " is past its end (%" PRIu64 " bytes)",
				j->name, j->offset, size);
	avail = size - j->offset;
	j->expected = j->o.length ? j->o.length : avail;
	j->total = j->expected;
	if (j->total > avail) {
		if (!(j->o.flags & AQL_FILE_READ_SHORT_OK))
			return aql_fail(AQL_ERR_INVALID_ARG,
					"file %s: range of %" PRIu64 " bytes at offset %" PRIu64
					" runs past its end (%" PRIu64 " bytes)",
					j->name, j->total, j->offset, size);
		j->total = avail;
	}
	if (j->total > capacity)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"file %s: %" PRIu64 " bytes from offset %" PRIu64
				" do not fit in the capacity of %zu bytes",
				j->name, j->total, j->offset, capacity);
	j->end = j->total;
	return AQL_OK;
}

/*
 * Which part goes through O_DIRECT; open_direct(j, arg) gives an O_DIRECT
 * descriptor of the file, or -errno.
 */
static aql_status plan_direct(struct job *j, size_t capacity,
			      int (*open_direct)(struct job *, void *), void *arg)
{
	int on = j->o.direct == AQL_FILE_DIRECT_ON;
	uint64_t head, body;
	int64_t cached;
	int fd;

	j->dlo = j->dhi = 0;
	if (j->o.direct == AQL_FILE_DIRECT_OFF || j->total == 0)
		return AQL_OK;
	dio_align(j->fd, &j->off_align, &j->mem_align);
	if (!j->off_align) {
		if (on)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"file %s: its file system has no direct I/O (O_DIRECT)",
					j->name);
		return AQL_OK;
	}
	head = (j->off_align - j->offset % j->off_align) % j->off_align;
	if (on) {
		uint64_t end = (j->total + j->off_align - 1) / j->off_align * j->off_align;

		if (head || (uintptr_t)j->dst % j->mem_align)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"file %s: O_DIRECT needs offset %" PRIu64
					" aligned to %u and dst %p aligned to %u",
					j->name, j->offset, j->off_align, (void *)j->dst,
					j->mem_align);
		if (end > capacity)
			return aql_fail(AQL_ERR_UNSUPPORTED,
					"file %s: O_DIRECT rounds the %" PRIu64 "-byte read up to %"
					PRIu64 " bytes (alignment %u), more than the capacity of %zu",
					j->name, j->total, end, j->off_align, capacity);
		j->dhi = j->end = end;
	} else {
		if (head >= j->total || (uintptr_t)(j->dst + head) % j->mem_align)
			return AQL_OK;
		body = (j->total - head) / j->off_align * j->off_align;
		if (!body)
			return AQL_OK;
		/* Copying from the page cache beats reading the device again. */
		cached = cached_bytes(j->fd, j->offset, j->total);
		if (cached >= 0 && (uint64_t)cached >= j->total / 2)
			return AQL_OK;
		j->dlo = head;
		j->dhi = head + body;
	}
	fd = open_direct(j, arg);
	if (fd < 0) {
		j->dlo = j->dhi = 0;
		j->end = j->total;
		if (on)
			return aql_fail_errno(-fd == EINVAL ? AQL_ERR_UNSUPPORTED : AQL_ERR_SYSTEM, -fd,
					      "file %s: opening it with O_DIRECT", j->name);
		return AQL_OK;
	}
	j->dfd = fd;
	return AQL_OK;
}

static aql_status plan_finish(struct job *j, void *dst, uint64_t offset,
			      const aql_file_read_options *opts, int *cancel)
{
	j->dst = dst;
	j->offset = offset;
	j->cancel = cancel;
	j->o = opts ? *opts : (aql_file_read_options){ 0 };
	j->chunk = j->o.chunk_size ? j->o.chunk_size : DEFAULT_CHUNK;
	j->depth = j->o.queue_depth ? j->o.queue_depth : DEFAULT_DEPTH;
	j->interval = j->o.progress_interval ? j->o.progress_interval : j->chunk;
	j->eof = j->hole = UINT64_MAX;
	j->slots = calloc(j->depth, sizeof(*j->slots));
	if (!j->slots)
		return aql_fail(AQL_ERR_NOMEM, "file %s: no memory for %u read slots",
				j->name, j->depth);
	return AQL_OK;
}

static aql_status plan_checks(const void *dst, size_t capacity, uint64_t offset,
			      const aql_file_read_options *opts)
{
	if (!dst && capacity)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: dst is NULL with capacity %zu",
				capacity);
	if (offset > INT64_MAX)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: offset %" PRIu64 " is too large",
				offset);
	return opts ? check_options(opts) : AQL_OK;
}

static aql_status check_file(const struct stat *st, const char *name)
{
	if (S_ISDIR(st->st_mode))
		return aql_fail_errno(AQL_ERR_SYSTEM, EISDIR, "file %s", name);
	if (!S_ISREG(st->st_mode))
		return aql_fail(AQL_ERR_UNSUPPORTED, "file %s is not a regular file", name);
	return AQL_OK;
}

static int open_direct_path(struct job *j, void *arg)
{
	int fd = open(arg, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOCTTY);

	(void)j;
	return fd < 0 ? -errno : fd;
}

/* Open path and plan the read; on success the caller runs and closes j. */
static aql_status plan_path(struct job *j, const char *path, void *dst, size_t capacity,
			    uint64_t offset, const aql_file_read_options *opts, int *cancel)
{
	struct stat st;
	aql_status st_;
	int fl;

	*j = (struct job){ .fd = -1, .dfd = -1 };
	if (!path)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: path is NULL");
	st_ = plan_checks(dst, capacity, offset, opts);
	if (st_ != AQL_OK)
		return st_;
	j->name = strdup(path);
	if (!j->name)
		return aql_fail(AQL_ERR_NOMEM, "file %s: no memory", path);
	st_ = plan_finish(j, dst, offset, opts, cancel);
	if (st_ != AQL_OK)
		goto fail;
	/* O_NONBLOCK: a FIFO must not block the open; cleared below. */
	j->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (j->fd < 0) {
		st_ = aql_fail_errno(errno == ENOENT ? AQL_ERR_NOT_FOUND : AQL_ERR_SYSTEM, errno,
				     "file %s", path);
		goto fail;
	}
	j->own_fd = 1;
	if (fstat(j->fd, &st)) {
		st_ = aql_fail_errno(AQL_ERR_SYSTEM, errno, "file %s: fstat", path);
		goto fail;
	}
	st_ = check_file(&st, path);
	if (st_ != AQL_OK)
		goto fail;
	/* io_uring would fail reads of an O_NONBLOCK file with EAGAIN. */
	fl = fcntl(j->fd, F_GETFL);
	if (fl < 0 || fcntl(j->fd, F_SETFL, fl & ~O_NONBLOCK)) {
		st_ = aql_fail_errno(AQL_ERR_SYSTEM, errno, "file %s: fcntl", path);
		goto fail;
	}
	st_ = plan_range(j, &st, capacity);
	if (st_ == AQL_OK)
		st_ = plan_direct(j, capacity, open_direct_path, (void *)path);
	if (st_ == AQL_OK)
		return AQL_OK;
fail:
	job_close(j);
	return st_;
}

struct fd_src {
	int fd;
	int fl;
	const struct stat *st;
};

static int open_direct_fd(struct job *j, void *arg)
{
	struct fd_src *s = arg;
	int fd;

	if (s->fl & O_DIRECT)
		return s->fd;
	fd = reopen(s->fd, s->st, O_RDONLY | O_DIRECT);
	if (fd < 0)
		return -EINVAL;
	j->own_dfd = 1;
	return fd;
}

static aql_status plan_fd(struct job *j, int fd, const char *name, void *dst, size_t capacity,
			  uint64_t offset, const aql_file_read_options *opts)
{
	struct stat st;
	struct fd_src src = { fd, 0, &st };
	char label[32];
	aql_status st_;

	*j = (struct job){ .fd = -1, .dfd = -1 };
	if (fd < 0)
		return aql_fail(AQL_ERR_INVALID_ARG, "file read: fd %d is negative", fd);
	st_ = plan_checks(dst, capacity, offset, opts);
	if (st_ != AQL_OK)
		return st_;
	snprintf(label, sizeof(label), "fd %d", fd);
	j->name = strdup(name ? name : label);
	if (!j->name)
		return aql_fail(AQL_ERR_NOMEM, "file %s: no memory", name ? name : label);
	st_ = plan_finish(j, dst, offset, opts, NULL);
	if (st_ != AQL_OK)
		goto fail;
	src.fl = fcntl(fd, F_GETFL);
	if (src.fl < 0 || fstat(fd, &st)) {
		st_ = aql_fail_errno(AQL_ERR_SYSTEM, errno, "file %s", j->name);
		goto fail;
	}
	if ((src.fl & O_ACCMODE) == O_WRONLY) {
		st_ = aql_fail_errno(AQL_ERR_SYSTEM, EBADF, "file %s: not open for reading", j->name);
		goto fail;
	}
	st_ = check_file(&st, j->name);
	if (st_ != AQL_OK)
		goto fail;
	j->fd = fd;
	/* Unaligned pieces need the page cache; EAGAIN would need retries. */
	if (src.fl & (O_NONBLOCK | O_DIRECT)) {
		int nfd = reopen(fd, &st, O_RDONLY);

		if (nfd >= 0) {
			j->fd = nfd;
			j->own_fd = 1;
		}
	}
	st_ = plan_range(j, &st, capacity);
	if (st_ == AQL_OK)
		st_ = plan_direct(j, capacity, open_direct_fd, &src);
	if (st_ == AQL_OK)
		return AQL_OK;
fail:
	job_close(j);
	return st_;
}

/* ---- pieces, completions, progress ----------------------------------- */

/* Hand the next piece of the range to s; 0 if none is left to start. */
static int next_piece(struct job *j, struct slot *s)
{
	uint64_t p = j->next, n;
	int direct = 0;

	if (j->stop || p >= j->end || p >= j->eof)
		return 0;
	if (p < j->dlo) {
		n = min64(j->chunk, j->dlo - p);
	} else if (p < j->dhi) {
		n = min64(j->dchunk, j->dhi - p);
		direct = !j->direct_failed;
	} else {
		n = min64(j->chunk, j->end - p);
	}
	*s = (struct slot){ .pos = p, .len = (uint32_t)n, .state = SLOT_READY,
			    .direct = (uint8_t)direct };
	j->next = p + n;
	return 1;
}

/* The slot gives up: the range is incomplete from its position on. */
static void slot_abandon(struct job *j, struct slot *s)
{
	j->hole = min64(j->hole, s->pos);
	s->state = SLOT_FREE;
}

static int aligned_for_direct(const struct job *j, const struct slot *s)
{
	return (j->offset + s->pos) % j->off_align == 0 && s->len % j->off_align == 0 &&
	       (uintptr_t)(j->dst + s->pos) % j->mem_align == 0;
}

/* Handle the result of one request of slot s: res bytes, or -errno. */
static void complete(struct job *j, struct slot *s, int res)
{
	int err;

	if (res > 0) {
		uint64_t got = min64((uint64_t)res, s->len);

		if (s->pos < j->total) {
			j->done += min64(got, j->total - s->pos);
			if (s->direct)
				j->direct_done += min64(got, j->total - s->pos);
		}
		s->pos += got;
		s->len -= (uint32_t)got;
		if (s->len == 0 || s->pos >= j->total) {
			s->state = SLOT_FREE;
			return;
		}
		/* A short read: ask again for the rest. */
		if (s->direct && !aligned_for_direct(j, s))
			s->direct = 0;
		s->retries = 0;
		s->state = SLOT_READY;
		if (j->stop)
			slot_abandon(j, s);
		return;
	}
	if (res == 0) {
		j->eof = min64(j->eof, s->pos);
		s->state = SLOT_FREE;
		return;
	}
	err = -res;
	if (j->stop) {
		slot_abandon(j, s);
		return;
	}
	if (err == EINTR || err == EAGAIN || err == ECANCELED) {
		if (++s->retries <= MAX_RETRIES) {
			s->state = SLOT_READY;
			return;
		}
		if (!s->sync) {
			s->sync = 1;
			s->retries = 0;
			s->state = SLOT_READY;
			return;
		}
	}
	if (err == EINVAL && s->direct && j->o.direct != AQL_FILE_DIRECT_ON) {
		j->direct_failed = 1;
		s->direct = 0;
		s->state = SLOT_READY;
		return;
	}
	job_fail(j, err == EINVAL && s->direct ? AQL_ERR_UNSUPPORTED : AQL_ERR_SYSTEM, err,
		 "file %s: reading %u bytes at offset %" PRIu64 "%s", j->name, s->len,
		 j->offset + s->pos, s->direct ? " with O_DIRECT" : "");
	slot_abandon(j, s);
}

static void cancel_job(struct job *j, const char *by)
{
	job_fail(j, AQL_ERR_SYSTEM, ECANCELED,
		 "file %s: read canceled by %s after %" PRIu64 " of %" PRIu64 " bytes",
		 j->name, by, j->done, j->total);
}

/* Progress call and cancel check after a batch of completions. */
static void report(struct job *j, int final)
{
	if (j->cancel && __atomic_load_n(j->cancel, __ATOMIC_ACQUIRE))
		cancel_job(j, "aql_file_read_cancel()");
	if (!j->o.progress || j->stop)
		return;
	if (final ? j->called && j->reported == j->done : j->done - j->reported < j->interval)
		return;
	j->reported = j->done;
	j->called = 1;
	if (j->o.progress(j->done, j->total, j->o.progress_user))
		cancel_job(j, "the progress callback");
}

/* One pread() for slot s. */
static void pread_once(struct job *j, struct slot *s)
{
	ssize_t r = pread(s->direct ? j->dfd : j->fd, j->dst + s->pos, s->len,
			  (off_t)(j->offset + s->pos));

	complete(j, s, r < 0 ? -errno : (int)r);
}

/* ---- engines --------------------------------------------------------- */

static void run_pread(struct job *j)
{
	struct slot *s = &j->slots[0];

	j->method = AQL_FILE_METHOD_PREAD;
	while (next_piece(j, s)) {
		while (s->state == SLOT_READY && !j->stop)
			pread_once(j, s);
		if (s->state != SLOT_FREE)
			slot_abandon(j, s);
		report(j, 0);
	}
}

static int ring_init(struct io_uring *ring, unsigned depth)
{
	static const unsigned flags[] = {
		IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
		IORING_SETUP_COOP_TASKRUN,
		0,
	};
	int ret = -EINVAL;

	/* Older kernels refuse newer flags with EINVAL: try without. */
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]) && ret == -EINVAL; i++) {
		struct io_uring_params p = { .flags = flags[i] };

		ret = io_uring_queue_init_params(depth, ring, &p);
	}
	return ret;
}

/* Queue the read of slot s; 0 if the submission queue is full. */
static int queue(struct job *j, struct io_uring *ring, struct slot *s)
{
	struct io_uring_sqe *sqe;

	RING_BEGIN();
	sqe = io_uring_get_sqe(ring);
	if (sqe) {
		io_uring_prep_read(sqe, s->direct ? j->dfd : j->fd, j->dst + s->pos, s->len,
				   j->offset + s->pos);
		io_uring_sqe_set_data64(sqe, (uint64_t)(s - j->slots));
		/*
		 * A page cache read tried inline copies in this thread, one
		 * piece after another, no faster than read(); in io_uring's
		 * workers the pieces are copied, or wait for the device, on
		 * every core at once. O_DIRECT reads are asynchronous anyway.
		 */
		if (j->punt && !s->direct)
			io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	}
	RING_END();
	if (!sqe)
		return 0;
	s->state = SLOT_BUSY;
	return 1;
}

/* Take one completion, if there is one: its slot index and result. */
static int take_cqe(struct io_uring *ring, uint64_t *slot, int *res)
{
	struct io_uring_cqe *cqe;
	int got;

	RING_BEGIN();
	got = io_uring_peek_cqe(ring, &cqe) == 0;
	if (got) {
		*slot = io_uring_cqe_get_data64(cqe);
		*res = cqe->res;
		io_uring_cqe_seen(ring, cqe);
	}
	RING_END();
	return got;
}

/* Submission entries queued but not yet handed to the kernel. */
static unsigned unsubmitted(struct io_uring *ring)
{
	unsigned n;

	RING_BEGIN();
	n = io_uring_sq_ready(ring);
	RING_END();
	return n;
}

/*
 * Queue a request for every slot with something to read; returns the
 * slots busy. The ring has a submission entry for every slot.
 */
static unsigned fill(struct job *j, struct io_uring *ring)
{
	unsigned busy = 0;

	for (uint32_t i = 0; i < j->depth; i++) {
		struct slot *s = &j->slots[i];

		if (s->state == SLOT_FREE && !next_piece(j, s))
			continue;
		if (s->state == SLOT_READY && j->stop)
			slot_abandon(j, s);
		/* Retries ran out: finish it here, synchronously. */
		while (s->state == SLOT_READY && s->sync && !j->stop)
			pread_once(j, s);
		if (s->state == SLOT_READY && !queue(j, ring, s)) {
			job_fail(j, AQL_ERR_SYSTEM, EBUSY, "file %s: io_uring queue full", j->name);
			slot_abandon(j, s);
		}
		busy += s->state == SLOT_BUSY;
	}
	return busy;
}

static void complete_cqe(struct job *j, uint64_t i, int res)
{
	if (i < j->depth && j->slots[i].state == SLOT_BUSY)
		complete(j, &j->slots[i], res);
}

static void reap(struct job *j, struct io_uring *ring)
{
	uint64_t i;
	int res;

	while (take_cqe(ring, &i, &res))
		complete_cqe(j, i, res);
}

/* Wait for every request the kernel has, after a failed submission. */
static void drain(struct job *j, struct io_uring *ring, unsigned busy)
{
	unsigned in_kernel = busy - unsubmitted(ring);
	struct io_uring_cqe *cqe;
	uint64_t i;
	int res;

	while (in_kernel) {
		int ret;

		RING_BEGIN();
		ret = io_uring_wait_cqe(ring, &cqe);
		RING_END();
		if (ret == -EINTR || ret == -EAGAIN)
			continue;
		if (ret < 0)
			break;	/* the ring is unusable; queue_exit waits for the rest */
		while (in_kernel && take_cqe(ring, &i, &res)) {
			in_kernel--;
			complete_cqe(j, i, res);
		}
	}
	for (uint32_t k = 0; k < j->depth; k++)
		if (j->slots[k].state != SLOT_FREE)
			slot_abandon(j, &j->slots[k]);
}

static void run_uring(struct job *j, struct io_uring *ring)
{
	unsigned busy, stalls = 0;
	int ret;

	j->method = AQL_FILE_METHOD_URING;
	/* One piece: nothing to overlap, and the inline copy costs least. */
	j->punt = j->end > j->chunk && j->depth > 1;
	while ((busy = fill(j, ring)) > 0) {
		ret = io_uring_submit_and_wait(ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) {
			job_fail(j, AQL_ERR_SYSTEM, -ret, "file %s: io_uring_enter", j->name);
			drain(j, ring, busy);
			break;
		}
		if (ret < 0 && busy == unsubmitted(ring)) {
			/* Nothing in flight to wait for: back off, but not forever. */
			if (++stalls > MAX_SUBMIT_STALLS) {
				job_fail(j, AQL_ERR_SYSTEM, -ret, "file %s: io_uring_enter", j->name);
				drain(j, ring, busy);
				break;
			}
			usleep(1000);
		} else {
			stalls = 0;
		}
		reap(j, ring);
		report(j, 0);
	}
}

static void run(struct job *j)
{
	struct io_uring ring;
	int ret;

	j->dchunk = j->chunk;
	if (j->dhi > j->dlo) {
		uint32_t a = j->off_align > j->mem_align ? j->off_align : j->mem_align;

		j->dchunk = j->chunk < a ? a : j->chunk / a * a;
	}
	if ((j->o.flags & AQL_FILE_READ_PREAD) || env_no_uring()) {
		run_pread(j);
	} else if ((ret = ring_init(&ring, j->depth)) < 0) {
		if (!__atomic_exchange_n(&notice_printed, 1, __ATOMIC_RELAXED))
			fprintf(stderr, "aql: io_uring unavailable (%s); reading files with pread\n",
				strerror(-ret));
		run_pread(j);
	} else {
		run_uring(j, &ring);
		io_uring_queue_exit(&ring);
	}
	report(j, 1);
}

/* Run a planned job, close it, fill result; the read's status. */
static aql_status finish(struct job *j, aql_file_read_result *result)
{
	uint64_t bytes;

	run(j);
	bytes = min64(min64(j->total, j->eof), min64(j->hole, j->next));
	if (j->status == AQL_OK && bytes < j->expected &&
	    !(j->o.flags & AQL_FILE_READ_SHORT_OK))
		job_fail(j, AQL_ERR_SYSTEM, 0,
			 "file %s ended after %" PRIu64 " of %" PRIu64 " bytes from offset %" PRIu64
			 " (it shrank during the read)",
			 j->name, bytes, j->expected, j->offset);
	if (result)
		*result = (aql_file_read_result){
			.bytes = bytes, .expected = j->expected,
			.direct_bytes = min64(j->direct_done, bytes),
			.method = j->method,
		};
	job_close(j);
	if (j->status != AQL_OK)
		return aql_fail(j->status, "%s", j->msg);
	return AQL_OK;
}

/* ---- public ---------------------------------------------------------- */

aql_status aql_file_read(const char *path, void *dst, size_t capacity, uint64_t offset,
			 const aql_file_read_options *opts, aql_file_read_result *result)
{
	struct job j;
	aql_status st;

	if (result)
		*result = (aql_file_read_result){ 0 };
	st = plan_path(&j, path, dst, capacity, offset, opts, NULL);
	if (st != AQL_OK)
		return st;
	return finish(&j, result);
}

aql_status aql_file_read_fd(int fd, const char *name, void *dst, size_t capacity,
			    uint64_t offset, const aql_file_read_options *opts,
			    aql_file_read_result *result)
{
	struct job j;
	aql_status st;

	if (result)
		*result = (aql_file_read_result){ 0 };
	st = plan_fd(&j, fd, name, dst, capacity, offset, opts);
	if (st != AQL_OK)
		return st;
	return finish(&j, result);
}

struct aql_file_read_op {
	struct job job;
	pthread_t thread;
	aql_signal *completion;
	aql_signal *ended;	/* 1 until the thread is done with everything but this */
	int cancel;
	aql_status status;
	aql_file_read_result result;
	char message[512];
};

static void *read_thread(void *arg)
{
	struct aql_file_read_op *op = arg;

	op->status = finish(&op->job, &op->result);
	if (op->status != AQL_OK)
		snprintf(op->message, sizeof(op->message), "%s", aql_error_message());
	if (op->completion) {
		if (op->status == AQL_OK)
			aql_signal_sub(op->completion, 1, AQL_RELEASE);
		else
			aql_signal_store(op->completion, -1, AQL_RELEASE);
	}
	aql_signal_store(op->ended, 0, AQL_RELEASE);
	return NULL;
}

aql_status aql_file_read_async(const char *path, void *dst, size_t capacity, uint64_t offset,
			       const aql_file_read_options *opts, aql_signal *completion,
			       aql_file_read_op **out)
{
	struct aql_file_read_op *op;
	aql_status st;
	int err;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_file_read_async: out is NULL");
	*out = NULL;
	op = calloc(1, sizeof(*op));
	if (!op)
		return aql_fail(AQL_ERR_NOMEM, "aql_file_read_async: no memory for the handle");
	st = aql_signal_create(1, &op->ended);
	if (st != AQL_OK) {
		free(op);
		return st;
	}
	st = plan_path(&op->job, path, dst, capacity, offset, opts, &op->cancel);
	if (st != AQL_OK)
		goto fail;
	op->completion = completion;
	err = pthread_create(&op->thread, NULL, read_thread, op);
	if (err) {
		st = aql_fail_errno(AQL_ERR_SYSTEM, err, "file %s: starting the read thread", path);
		job_close(&op->job);
		goto fail;
	}
	*out = op;
	return AQL_OK;
fail:
	aql_signal_destroy(op->ended);
	free(op);
	return st;
}

aql_status aql_file_read_wait(aql_file_read_op *op, uint64_t timeout_ns,
			      aql_file_read_result *result)
{
	aql_status st;

	if (!op)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_file_read_wait: op is NULL");
	st = aql_signal_wait(op->ended, AQL_COND_EQ, 0, timeout_ns, AQL_WAIT_BLOCKED, NULL);
	if (st == AQL_ERR_TIMEOUT)
		return aql_fail(AQL_ERR_TIMEOUT, "file read still running after %" PRIu64 " ns",
				timeout_ns);
	if (st != AQL_OK)
		return st;
	if (result)
		*result = op->result;
	if (op->status != AQL_OK)
		return aql_fail(op->status, "%s", op->message);
	return AQL_OK;
}

void aql_file_read_cancel(aql_file_read_op *op)
{
	if (op)
		__atomic_store_n(&op->cancel, 1, __ATOMIC_RELEASE);
}

void aql_file_read_free(aql_file_read_op *op)
{
	if (!op)
		return;
	aql_file_read_cancel(op);
	pthread_join(op->thread, NULL);
	aql_signal_destroy(op->ended);
	free(op);
}

const char *aql_file_method_str(enum aql_file_method method)
{
	switch (method) {
	case AQL_FILE_METHOD_URING: return "io_uring";
	case AQL_FILE_METHOD_PREAD: return "pread";
	case AQL_FILE_METHOD_NONE: break;
	}
	return "none";
}
