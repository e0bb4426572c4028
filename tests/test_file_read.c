/* SPDX-License-Identifier: MIT */
/*
 * File loads: io_uring and pread, every direct I/O mode, sizes around the
 * chunk size, ranges, short reads, progress and cancel, the asynchronous
 * form chained into a launch, and the errors. Every read checks its bytes
 * against a pattern that differs at every offset, and a guard past the
 * capacity, so a piece read to the wrong place or past the end shows.
 *
 * Test files go to $AQL_FILE_TEST_DIR or /var/tmp (tmpfs, the usual /tmp,
 * does not exercise O_DIRECT); direct I/O checks are skipped, and said
 * so, where the file system has no O_DIRECT.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <aql/file.h>

#include "helpers.h"

#define CHUNK		(64u << 10)
#define GUARD		4096u
#define GUARD_BYTE	0xa5

static char dir[256];
static int direct_ok;		/* the test directory's file system has O_DIRECT */
static uint32_t dio_align_;	/* its offset alignment */
static int uring_ok;		/* io_uring works in this process */

static uint8_t pat(uint64_t off)
{
	return (uint8_t)((off * 0x9e3779b97f4a7c15ull) >> 56);
}

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static void make_file(const char *path, uint64_t size)
{
	static uint8_t buf[1 << 16];
	FILE *f = fopen(path, "wb");

	if (!f) {
		perror(path);
		exit(1);
	}
	for (uint64_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = (size_t)(size - off < sizeof(buf) ? size - off : sizeof(buf));

		for (size_t i = 0; i < n; i++)
			buf[i] = pat(off + i);
		fwrite(buf, 1, n, f);
	}
	if (fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* Write back and drop the file's pages, so that AUTO chooses O_DIRECT. */
static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

/* Whether any page of the file is in the page cache. */
static int resident(const char *path)
{
	unsigned char vec[2] = { 1, 1 };
	int fd = open(path, O_RDONLY);
	void *map = fd >= 0 ? mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	int in = 1;

	if (map != MAP_FAILED) {
		in = mincore(map, 8192, vec) != 0 || (vec[0] & 1) || (vec[1] & 1);
		munmap(map, 8192);
	}
	if (fd >= 0)
		close(fd);
	return in;
}

/* A buffer of capacity bytes plus a guard, aligned to 4096 + skew. */
static uint8_t *buffer(size_t capacity, size_t skew)
{
	uint8_t *p;

	if (posix_memalign((void **)&p, 4096, capacity + skew + GUARD)) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	memset(p, 0, capacity + skew);
	memset(p + skew + capacity, GUARD_BYTE, GUARD);
	return p + skew;
}

/* Offset of the first byte that differs from the file at file_off, or -1. */
static int64_t mismatch(const uint8_t *p, uint64_t n, uint64_t file_off)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != pat(file_off + i))
			return (int64_t)i;
	return -1;
}

static int guard_intact(const uint8_t *p, size_t capacity)
{
	for (size_t i = 0; i < GUARD; i++)
		if (p[capacity + i] != GUARD_BYTE)
			return 0;
	return 1;
}

static uint64_t round_up(uint64_t n, uint64_t a)
{
	return (n + a - 1) / a * a;
}

static void probe(void)
{
	char path[300];
	struct statx sx;
	struct io_uring ring;
	void *buf;
	int fd;

	path_of(path, sizeof(path), "probe");
	make_file(path, 8192);
	dio_align_ = 4096;
	if (statx(AT_FDCWD, path, 0, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
	    sx.stx_dio_offset_align)
		dio_align_ = sx.stx_dio_offset_align;
	fd = open(path, O_RDONLY | O_DIRECT);
	if (fd >= 0 && posix_memalign(&buf, 4096, 8192) == 0) {
		direct_ok = pread(fd, buf, 4096, 0) == 4096;
		free(buf);
	}
	if (fd >= 0)
		close(fd);
	/* AUTO takes O_DIRECT only for a file out of the page cache (not tmpfs). */
	drop_cache(path);
	direct_ok = direct_ok && !resident(path);
	unlink(path);
	uring_ok = io_uring_queue_init(4, &ring, 0) == 0;
	if (uring_ok)
		io_uring_queue_exit(&ring);
	printf("test dir %s: O_DIRECT %s (alignment %u), io_uring %s\n", dir,
	       direct_ok ? "works" : "unsupported: direct checks skipped", dio_align_,
	       uring_ok ? "works" : "unavailable");
}

static enum aql_file_method want_method(uint32_t flags)
{
	return (flags & AQL_FILE_READ_PREAD) || !uring_ok ? AQL_FILE_METHOD_PREAD
							  : AQL_FILE_METHOD_URING;
}

/* One whole-file read in the given mode, checked in full. */
static void read_case(const char *path, uint64_t size, uint32_t depth,
		      enum aql_file_direct direct, uint32_t flags)
{
	aql_file_read_options o = { .chunk_size = CHUNK, .queue_depth = depth, .direct = direct,
				    .flags = flags };
	size_t capacity = direct == AQL_FILE_DIRECT_ON ? round_up(size, dio_align_) : size;
	aql_file_read_result r;
	uint8_t *dst = buffer(capacity, 0);
	uint64_t want_direct = 0;
	int64_t bad;

	if (direct == AQL_FILE_DIRECT_AUTO) {
		drop_cache(path);
		want_direct = direct_ok ? size / dio_align_ * dio_align_ : 0;
	} else if (direct == AQL_FILE_DIRECT_ON) {
		want_direct = size;
	}
	CHECK_OK(aql_file_read(path, dst, capacity, 0, &o, &r));
	bad = mismatch(dst, size, 0);
	CHECK(r.bytes == size && r.expected == size,
	      "size %llu depth %u direct %d flags %u: read %llu of %llu", (unsigned long long)size,
	      depth, direct, flags, (unsigned long long)r.bytes, (unsigned long long)r.expected);
	CHECK(bad < 0, "size %llu depth %u direct %d flags %u: byte %lld differs",
	      (unsigned long long)size, depth, direct, flags, (long long)bad);
	CHECK(guard_intact(dst, capacity), "size %llu depth %u direct %d: wrote past capacity",
	      (unsigned long long)size, depth, direct);
	CHECK(r.method == want_method(flags), "size %llu: method %s",
	      (unsigned long long)size, aql_file_method_str(r.method));
	CHECK(r.direct_bytes == want_direct,
	      "size %llu depth %u direct %d flags %u: %llu bytes with O_DIRECT, want %llu",
	      (unsigned long long)size, depth, direct, flags,
	      (unsigned long long)r.direct_bytes, (unsigned long long)want_direct);
	free(dst);
}

/* Sizes on and off the chunk size, every depth, both engines, every mode. */
static void test_sizes(void)
{
	static const uint64_t sizes[] = { 0, 1, 4095, 4096, CHUNK - 1, CHUNK, CHUNK + 1,
					  4 * CHUNK, 4 * CHUNK + 777 };
	static const uint32_t depths[] = { 1, 3, 16 };
	static const uint32_t flags[] = { 0, AQL_FILE_READ_PREAD };
	char path[300];

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(path, sizeof(path), "%s/size-%llu", dir, (unsigned long long)sizes[i]);
		make_file(path, sizes[i]);
		for (size_t d = 0; d < 3; d++)
			for (size_t f = 0; f < 2; f++) {
				read_case(path, sizes[i], depths[d], AQL_FILE_DIRECT_OFF, flags[f]);
				if (!direct_ok)
					continue;
				read_case(path, sizes[i], depths[d], AQL_FILE_DIRECT_AUTO, flags[f]);
				read_case(path, sizes[i], depths[d], AQL_FILE_DIRECT_ON, flags[f]);
			}
		unlink(path);
	}
}

/* Default options (NULL) read the whole file. */
static void test_defaults(void)
{
	uint64_t size = (3u << 20) + 12345;	/* past the 1 MiB default chunk */
	char path[300];
	aql_file_read_result r;
	uint8_t *dst = buffer(size, 0);

	path_of(path, sizeof(path), "defaults");
	make_file(path, size);
	CHECK_OK(aql_file_read(path, dst, size, 0, NULL, &r));
	CHECK(r.bytes == size && mismatch(dst, size, 0) < 0, "default read: %llu bytes",
	      (unsigned long long)r.bytes);
	CHECK(r.method == want_method(0), "default method %s", aql_file_method_str(r.method));
	/* Cached after make_file: AUTO copies from the page cache. */
	CHECK(r.direct_bytes == 0, "a cached file read with O_DIRECT: %llu bytes",
	      (unsigned long long)r.direct_bytes);
	CHECK(guard_intact(dst, size), "default read wrote past capacity");
	/* A result pointer is optional. */
	memset(dst, 0, size);
	CHECK_OK(aql_file_read(path, dst, size, 0, NULL, NULL));
	CHECK(mismatch(dst, size, 0) < 0, "read without a result");
	unlink(path);
	free(dst);
}

/* Ranges: unaligned head and tail around an O_DIRECT body, and lengths. */
static void test_ranges(void)
{
	static const struct { uint64_t off, len; } cases[] = {
		{ 0, 1 }, { 1000, 200000 }, { 4096, 3 * CHUNK }, { 4 * CHUNK + 100, 677 },
		{ 77, 4 * CHUNK + 700 }, { 4 * CHUNK + 777, 0 },
	};
	uint64_t size = 4 * CHUNK + 777;
	char path[300];

	path_of(path, sizeof(path), "ranges");
	make_file(path, size);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int m = 0; m < 3; m++) {
			enum aql_file_direct direct = m == 0 ? AQL_FILE_DIRECT_OFF
						      : AQL_FILE_DIRECT_AUTO;
			aql_file_read_options o = { .length = cases[i].len, .chunk_size = CHUNK,
						    .queue_depth = 4, .direct = direct,
						    .flags = m == 2 ? AQL_FILE_READ_PREAD : 0 };
			uint64_t want = cases[i].len ? cases[i].len : size - cases[i].off;
			/* dst skewed like the file offset, so the body can be direct. */
			size_t skew = (size_t)(cases[i].off % 4096);
			uint8_t *dst = buffer(want, skew);
			uint64_t head = (dio_align_ - cases[i].off % dio_align_) % dio_align_;
			aql_file_read_result r;

			if (direct == AQL_FILE_DIRECT_AUTO)
				drop_cache(path);
			CHECK_OK(aql_file_read(path, dst, want, cases[i].off, &o, &r));
			CHECK(r.bytes == want && mismatch(dst, want, cases[i].off) < 0,
			      "range %llu+%llu mode %d: %llu bytes, byte %lld differs",
			      (unsigned long long)cases[i].off, (unsigned long long)cases[i].len, m,
			      (unsigned long long)r.bytes,
			      (long long)mismatch(dst, want, cases[i].off));
			CHECK(guard_intact(dst, want), "range %llu+%llu: wrote past capacity",
			      (unsigned long long)cases[i].off, (unsigned long long)cases[i].len);
			if (direct == AQL_FILE_DIRECT_AUTO && direct_ok) {
				uint64_t body = want > head ? (want - head) / dio_align_ * dio_align_ : 0;

				CHECK(r.direct_bytes == body,
				      "range %llu+%llu: %llu bytes with O_DIRECT, want %llu",
				      (unsigned long long)cases[i].off,
				      (unsigned long long)cases[i].len,
				      (unsigned long long)r.direct_bytes, (unsigned long long)body);
			}
			free(dst - skew);
		}
	/* AUTO with a misaligned dst reads it all through the page cache. */
	{
		aql_file_read_options o = { .chunk_size = CHUNK };
		uint8_t *dst = buffer(size, 3);
		aql_file_read_result r;

		drop_cache(path);
		CHECK_OK(aql_file_read(path, dst, size, 0, &o, &r));
		CHECK(r.bytes == size && mismatch(dst, size, 0) < 0 && r.direct_bytes == 0,
		      "misaligned dst: %llu bytes, %llu direct", (unsigned long long)r.bytes,
		      (unsigned long long)r.direct_bytes);
		free(dst - 3);
	}
	unlink(path);
}

/* O_DIRECT ON: aligned works; misaligned dst, offset or capacity is refused. */
static void test_direct_on(void)
{
	aql_file_read_options o = { .chunk_size = CHUNK, .direct = AQL_FILE_DIRECT_ON };
	uint64_t size = 2 * CHUNK + 5;
	size_t cap = round_up(size, dio_align_);
	aql_file_read_result r;
	char path[300];
	uint8_t *dst;

	if (!direct_ok) {
		printf("O_DIRECT ON checks skipped\n");
		return;
	}
	path_of(path, sizeof(path), "direct-on");
	make_file(path, size);
	dst = buffer(cap, 1);
	CHECK(aql_file_read(path, dst, cap, 0, &o, &r) == AQL_ERR_UNSUPPORTED &&
		      th_error_has("aligned") && th_error_has(path),
	      "misaligned dst accepted with O_DIRECT ON");
	free(dst - 1);
	dst = buffer(cap, 0);
	CHECK(aql_file_read(path, dst, cap - dio_align_, dio_align_ / 2, &o, &r) ==
			      AQL_ERR_UNSUPPORTED && th_error_has("offset"),
	      "misaligned offset accepted with O_DIRECT ON");
	CHECK(aql_file_read(path, dst, size, 0, &o, &r) == AQL_ERR_UNSUPPORTED &&
		      th_error_has("capacity"),
	      "no room to round up accepted with O_DIRECT ON");
	CHECK(guard_intact(dst, cap), "refused reads wrote");
	/* A range that ends unaligned inside the file: rounded, within capacity. */
	o.length = CHUNK + 3;
	CHECK_OK(aql_file_read(path, dst, cap, 0, &o, &r));
	CHECK(r.bytes == CHUNK + 3 && r.direct_bytes == CHUNK + 3 &&
		      mismatch(dst, CHUNK + 3, 0) < 0,
	      "ON range: %llu bytes, %llu direct", (unsigned long long)r.bytes,
	      (unsigned long long)r.direct_bytes);
	CHECK(guard_intact(dst, cap), "ON range wrote past capacity");
	free(dst);
	unlink(path);
}

/* tmpfs: AUTO and OFF work whatever its O_DIRECT support. */
static void test_tmpfs(void)
{
	char path[64];
	uint64_t size = 3 * CHUNK + 1;
	aql_file_read_options o = { .chunk_size = CHUNK };
	aql_file_read_result r;
	uint8_t *dst = buffer(size, 0);
	struct stat st;

	if (stat("/dev/shm", &st)) {
		free(dst);
		return;
	}
	snprintf(path, sizeof(path), "/dev/shm/aql-test-file-read-%d", (int)getpid());
	make_file(path, size);
	CHECK_OK(aql_file_read(path, dst, size, 0, &o, &r));
	CHECK(r.bytes == size && mismatch(dst, size, 0) < 0, "tmpfs: %llu bytes",
	      (unsigned long long)r.bytes);
	unlink(path);
	free(dst);
}

static void test_errors(void)
{
	aql_file_read_options o = { 0 };
	aql_file_read_result r;
	uint8_t *dst = buffer(8192, 0);
	char path[300], missing[300], fifo[300], big[80];
	int fd;

	path_of(path, sizeof(path), "errors");
	make_file(path, 5000);
	path_of(missing, sizeof(missing), "no-such-file");
	CHECK(aql_file_read(missing, dst, 8192, 0, NULL, &r) == AQL_ERR_NOT_FOUND &&
		      th_error_has(missing) && th_error_has("No such file"),
	      "missing file");
	CHECK(r.bytes == 0 && r.method == AQL_FILE_METHOD_NONE, "missing file result");
	CHECK(aql_file_read(dir, dst, 8192, 0, NULL, NULL) == AQL_ERR_SYSTEM &&
		      th_error_has("Is a directory") && th_error_has(dir),
	      "directory");
	path_of(fifo, sizeof(fifo), "fifo");
	if (mkfifo(fifo, 0600) == 0) {
		/* Must not block in open() waiting for a writer. */
		CHECK(aql_file_read(fifo, dst, 8192, 0, NULL, NULL) == AQL_ERR_UNSUPPORTED &&
			      th_error_has("not a regular file"),
		      "fifo");
		unlink(fifo);
	}
	CHECK(aql_file_read(path, dst, 4999, 0, NULL, &r) == AQL_ERR_INVALID_ARG &&
		      th_error_has("5000") && th_error_has("4999") && th_error_has(path),
	      "file larger than capacity");
	CHECK(guard_intact(dst, 8192) && dst[0] == 0, "a refused read wrote dst");
	o.length = 6000;
	CHECK(aql_file_read(path, dst, 5999, 0, &o, NULL) == AQL_ERR_INVALID_ARG &&
		      th_error_has("6000") && th_error_has("5999"),
	      "length larger than capacity");
	/* A range past the end: refused, or read short with SHORT_OK. */
	o.length = 1000;
	CHECK(aql_file_read(path, dst, 8192, 4500, &o, NULL) == AQL_ERR_INVALID_ARG &&
		      th_error_has("past its end"),
	      "range past the end accepted");
	o.flags = AQL_FILE_READ_SHORT_OK;
	CHECK_OK(aql_file_read(path, dst, 8192, 4500, &o, &r));
	CHECK(r.bytes == 500 && r.expected == 1000 && mismatch(dst, 500, 4500) < 0,
	      "short range: %llu of %llu", (unsigned long long)r.bytes,
	      (unsigned long long)r.expected);
	o = (aql_file_read_options){ 0 };
	CHECK(aql_file_read(path, dst, 8192, 5001, NULL, NULL) == AQL_ERR_INVALID_ARG &&
		      th_error_has("5001"),
	      "offset past the end");
	CHECK_OK(aql_file_read(path, dst, 0, 5000, NULL, &r));
	CHECK(r.bytes == 0, "offset at the end read %llu", (unsigned long long)r.bytes);
	CHECK(aql_file_read(path, NULL, 10, 0, NULL, NULL) == AQL_ERR_INVALID_ARG,
	      "NULL dst accepted");
	CHECK(aql_file_read(NULL, dst, 10, 0, NULL, NULL) == AQL_ERR_INVALID_ARG,
	      "NULL path accepted");
	o.chunk_size = (1u << 30) + 1;
	CHECK(aql_file_read(path, dst, 8192, 0, &o, NULL) == AQL_ERR_INVALID_ARG,
	      "huge chunk accepted");
	o = (aql_file_read_options){ .queue_depth = 1025 };
	CHECK(aql_file_read(path, dst, 8192, 0, &o, NULL) == AQL_ERR_INVALID_ARG,
	      "huge depth accepted");
	o = (aql_file_read_options){ .direct = 7 };
	CHECK(aql_file_read(path, dst, 8192, 0, &o, NULL) == AQL_ERR_INVALID_ARG,
	      "direct mode 7 accepted");
	o = (aql_file_read_options){ .flags = 1u << 20 };
	CHECK(aql_file_read(path, dst, 8192, 0, &o, NULL) == AQL_ERR_INVALID_ARG,
	      "unknown flag accepted");

	/* fd form. */
	CHECK(aql_file_read_fd(-1, NULL, dst, 8192, 0, NULL, NULL) == AQL_ERR_INVALID_ARG,
	      "negative fd");
	fd = open(path, O_RDONLY);
	close(fd);
	snprintf(big, sizeof(big), "fd %d", fd);
	CHECK(aql_file_read_fd(fd, NULL, dst, 8192, 0, NULL, NULL) == AQL_ERR_SYSTEM &&
		      th_error_has(big) && th_error_has("Bad file descriptor"),
	      "closed fd");
	fd = open(path, O_WRONLY);
	CHECK(aql_file_read_fd(fd, "w", dst, 8192, 0, NULL, NULL) == AQL_ERR_SYSTEM &&
		      th_error_has("not open for reading"),
	      "write-only fd");
	close(fd);
	unlink(path);
	free(dst);
}

/* Permission denied, in a child that gives up root (root reads anything). */
static void test_permission(void)
{
	char path[300];
	uint8_t buf[16];
	pid_t pid;
	int status = -1;

	path_of(path, sizeof(path), "secret");
	make_file(path, 10);
	chmod(path, 0);
	pid = fork();
	if (pid == 0) {
		aql_status st;

		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(3);
		st = aql_file_read(path, buf, sizeof(buf), 0, NULL, NULL);
		if (st != AQL_ERR_SYSTEM || !strstr(aql_error_message(), "Permission denied")) {
			fprintf(stderr, "permission: %s: %s\n", aql_status_str(st),
				aql_error_message());
			_exit(1);
		}
		_exit(0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0,
	      "permission denied not reported as AQL_ERR_SYSTEM (child status %d)", status);
	unlink(path);
}

struct progress_log {
	uint64_t calls, last, total, min_step;
	uint64_t cancel_at;	/* return 1 once done reaches it; 0: never */
	uint64_t calls_after_cancel;
	int canceled, monotonic;
	const char *truncate_path;	/* shrink the file on the first call */
	uint64_t truncate_to;
};

static int on_progress(uint64_t done, uint64_t total, void *user)
{
	struct progress_log *p = user;

	if (p->canceled)
		p->calls_after_cancel++;
	if (p->calls && done <= p->last)
		p->monotonic = 0;
	/* The final call may come sooner than the interval. */
	if (p->calls && done < total && done - p->last < p->min_step)
		p->min_step = done - p->last;
	p->calls++;
	p->last = done;
	p->total = total;
	if (p->truncate_path && p->calls == 1 && truncate(p->truncate_path, (off_t)p->truncate_to))
		perror("truncate");
	if (p->cancel_at && done >= p->cancel_at) {
		p->canceled = 1;
		return 1;
	}
	return 0;
}

static void test_progress(void)
{
	uint64_t size = (1u << 20) + 5, interval = 256u << 10;
	char path[300];
	uint8_t *dst = buffer(size, 0), *snap = malloc(size);

	path_of(path, sizeof(path), "progress");
	make_file(path, size);
	for (int m = 0; m < 2; m++) {
		struct progress_log log = { .min_step = UINT64_MAX, .monotonic = 1 };
		aql_file_read_options o = { .chunk_size = CHUNK, .queue_depth = 4,
					    .progress = on_progress, .progress_user = &log,
					    .progress_interval = interval,
					    .flags = m ? AQL_FILE_READ_PREAD : 0 };
		aql_file_read_result r;
		aql_status st;

		CHECK_OK(aql_file_read(path, dst, size, 0, &o, &r));
		CHECK(log.calls >= 4 && log.calls <= size / interval + 2,
		      "engine %d: %llu progress calls", m, (unsigned long long)log.calls);
		CHECK(log.last == size && log.total == size && log.monotonic,
		      "engine %d: last call %llu of %llu", m, (unsigned long long)log.last,
		      (unsigned long long)log.total);
		/* All but the final call are at least interval apart. */
		CHECK(log.min_step >= interval, "engine %d: progress step %llu below the interval",
		      m, (unsigned long long)log.min_step);

		/* Cancel from the callback. */
		log = (struct progress_log){ .min_step = UINT64_MAX, .monotonic = 1,
					     .cancel_at = interval };
		memset(dst, 0, size);
		st = aql_file_read(path, dst, size, 0, &o, &r);
		CHECK(st == AQL_ERR_SYSTEM && th_error_has("canceled") && th_error_has(path),
		      "engine %d: cancel gave %s", m, aql_status_str(st));
		CHECK(log.canceled && log.calls_after_cancel == 0,
		      "engine %d: %llu calls after cancel", m,
		      (unsigned long long)log.calls_after_cancel);
		CHECK(r.bytes < size && mismatch(dst, r.bytes, 0) < 0,
		      "engine %d: canceled read reports %llu bytes", m,
		      (unsigned long long)r.bytes);
		/* Every request was reaped: nothing lands in dst afterwards. */
		memcpy(snap, dst, size);
		th_sleep_ms(30);
		CHECK(memcmp(snap, dst, size) == 0, "engine %d: dst changed after the read returned",
		      m);
	}
	/* Progress on an empty file: one call, 0 of 0. */
	{
		struct progress_log log = { .min_step = UINT64_MAX, .monotonic = 1 };
		aql_file_read_options o = { .progress = on_progress, .progress_user = &log };

		path_of(path, sizeof(path), "progress-empty");
		make_file(path, 0);
		CHECK_OK(aql_file_read(path, dst, 0, 0, &o, NULL));
		CHECK(log.calls == 1 && log.last == 0 && log.total == 0, "empty file: %llu calls",
		      (unsigned long long)log.calls);
		unlink(path);
	}
	path_of(path, sizeof(path), "progress");
	unlink(path);
	free(snap);
	free(dst);
}

/* A file that shrinks during the read: an error, or a short read. */
static void test_shrink(void)
{
	uint64_t size = 4u << 20, cut = (1u << 20) + 100;
	uint8_t *dst = buffer(size, 0);
	char path[300];

	path_of(path, sizeof(path), "shrink");
	for (int m = 0; m < 4; m++) {
		struct progress_log log = { .min_step = UINT64_MAX, .monotonic = 1,
					    .truncate_path = path, .truncate_to = cut };
		aql_file_read_options o = { .chunk_size = CHUNK, .queue_depth = 4,
					    .progress = on_progress, .progress_user = &log,
					    .direct = AQL_FILE_DIRECT_OFF,
					    .flags = (m & 1 ? AQL_FILE_READ_PREAD : 0) |
						     (m & 2 ? AQL_FILE_READ_SHORT_OK : 0) };
		aql_file_read_result r;
		aql_status st;

		make_file(path, size);
		memset(dst, 0, size);
		st = aql_file_read(path, dst, size, 0, &o, &r);
		if (m & 2) {
			CHECK(st == AQL_OK, "mode %d: short read with SHORT_OK: %s", m,
			      aql_error_message());
		} else {
			CHECK(st == AQL_ERR_SYSTEM && th_error_has("shrank") && th_error_has(path),
			      "mode %d: a shrunk file gave %s", m, aql_status_str(st));
		}
		CHECK(r.bytes == cut && r.expected == size,
		      "mode %d: %llu of %llu bytes reported, file now %llu", m,
		      (unsigned long long)r.bytes, (unsigned long long)r.expected,
		      (unsigned long long)cut);
		CHECK(mismatch(dst, cut, 0) < 0, "mode %d: content before the cut", m);
		CHECK(guard_intact(dst, size), "mode %d: wrote past capacity", m);
	}
	unlink(path);
	free(dst);
}

static void test_forced_fallback(void)
{
	uint64_t size = 2 * CHUNK + 3;
	aql_file_read_options o = { .chunk_size = CHUNK };
	aql_file_read_result r;
	uint8_t *dst = buffer(size, 0);
	char path[300];

	path_of(path, sizeof(path), "forced");
	make_file(path, size);
	setenv("AQL_FILE_NO_URING", "1", 1);
	CHECK_OK(aql_file_read(path, dst, size, 0, &o, &r));
	CHECK(r.method == AQL_FILE_METHOD_PREAD && mismatch(dst, size, 0) < 0,
	      "AQL_FILE_NO_URING=1: method %s", aql_file_method_str(r.method));
	setenv("AQL_FILE_NO_URING", "0", 1);
	CHECK_OK(aql_file_read(path, dst, size, 0, &o, &r));
	CHECK(r.method == want_method(0), "AQL_FILE_NO_URING=0: method %s",
	      aql_file_method_str(r.method));
	unsetenv("AQL_FILE_NO_URING");
	o.flags = AQL_FILE_READ_PREAD;
	memset(dst, 0, size);
	CHECK_OK(aql_file_read(path, dst, size, 0, &o, &r));
	CHECK(r.method == AQL_FILE_METHOD_PREAD && mismatch(dst, size, 0) < 0,
	      "AQL_FILE_READ_PREAD: method %s", aql_file_method_str(r.method));
	CHECK(strcmp(aql_file_method_str(AQL_FILE_METHOD_URING), "io_uring") == 0 &&
		      strcmp(aql_file_method_str(AQL_FILE_METHOD_PREAD), "pread") == 0 &&
		      strcmp(aql_file_method_str(99), "none") == 0,
	      "method names");
	unlink(path);
	free(dst);
}

/*
 * io_uring refused as seccomp or an old kernel would: in a child with a
 * filter failing io_uring_setup with ENOSYS, reads still work, by pread,
 * and the notice appears exactly once.
 */
static void test_real_fallback(void)
{
	uint64_t size = 3 * CHUNK + 9;
	char path[300], out[1024] = "";
	int fds[2], status = -1;
	ssize_t n, len = 0;
	pid_t pid;

	path_of(path, sizeof(path), "fallback");
	make_file(path, size);
	if (pipe(fds)) {
		perror("pipe");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct sock_filter filter[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { sizeof(filter) / sizeof(filter[0]), filter };
		aql_file_read_options o = { .chunk_size = CHUNK };
		aql_file_read_result r;
		uint8_t *dst = buffer(size, 0);
		int bad = 0;

		dup2(fds[1], 2);
		close(fds[0]);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			_exit(3);
		for (int i = 0; i < 2; i++) {
			memset(dst, 0, size);
			bad |= aql_file_read(path, dst, size, 0, &o, &r) != AQL_OK ||
			       r.method != AQL_FILE_METHOD_PREAD || r.bytes != size ||
			       mismatch(dst, size, 0) >= 0;
		}
		_exit(bad);
	}
	close(fds[1]);
	while (len < (ssize_t)sizeof(out) - 1 &&
	       (n = read(fds[0], out + len, sizeof(out) - 1 - (size_t)len)) > 0)
		len += n;
	out[len] = 0;
	close(fds[0]);
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		      WEXITSTATUS(status) == 0,
	      "reads without io_uring failed (child status %d)", status);
	CHECK(strstr(out, "io_uring unavailable") && strstr(out, "pread") &&
		      !strstr(strstr(out, "io_uring unavailable") + 1, "io_uring unavailable") &&
		      strchr(out, '\n') == strrchr(out, '\n'),
	      "notice not printed exactly once on one line: \"%s\"", out);
	unlink(path);
}

/* The fd form: position untouched, O_DIRECT through a second open. */
static void test_fd(void)
{
	uint64_t size = 5 * CHUNK + 11;
	aql_file_read_options o = { .chunk_size = CHUNK, .queue_depth = 2 };
	aql_file_read_result r;
	uint8_t *dst = buffer(size, 0);
	char path[300];
	int fd;

	path_of(path, sizeof(path), "fd");
	make_file(path, size);
	fd = open(path, O_RDONLY);
	lseek(fd, 7, SEEK_SET);
	drop_cache(path);
	CHECK_OK(aql_file_read_fd(fd, path, dst, size, 0, &o, &r));
	CHECK(r.bytes == size && mismatch(dst, size, 0) < 0, "fd read %llu",
	      (unsigned long long)r.bytes);
	CHECK(!direct_ok || r.direct_bytes == size / dio_align_ * dio_align_,
	      "fd read: %llu bytes with O_DIRECT", (unsigned long long)r.direct_bytes);
	CHECK(lseek(fd, 0, SEEK_CUR) == 7, "fd position moved");
	CHECK(fcntl(fd, F_GETFD) >= 0, "fd closed by the read");
	close(fd);
	/* O_NONBLOCK and O_DIRECT descriptors, read at an unaligned range. */
	for (int k = 0; k < 2; k++) {
		fd = open(path, O_RDONLY | (k ? O_DIRECT : O_NONBLOCK));
		if (fd < 0)
			continue;
		memset(dst, 0, size);
		o.length = size - 100;
		CHECK_OK(aql_file_read_fd(fd, NULL, dst, size, 50, &o, &r));
		CHECK(r.bytes == size - 100 && mismatch(dst, size - 100, 50) < 0,
		      "fd %s: %llu bytes", k ? "O_DIRECT" : "O_NONBLOCK",
		      (unsigned long long)r.bytes);
		close(fd);
	}
	unlink(path);
	free(dst);
}

/* Several threads read the same file at once into their own buffers. */
struct reader {
	const char *path;
	uint64_t size;
	int ok;
};

static void *reader_main(void *arg)
{
	struct reader *rd = arg;
	aql_file_read_options o = { .chunk_size = CHUNK, .queue_depth = 8 };
	uint8_t *dst = malloc(rd->size);

	rd->ok = dst && aql_file_read(rd->path, dst, rd->size, 0, &o, NULL) == AQL_OK &&
		 mismatch(dst, rd->size, 0) < 0;
	free(dst);
	return NULL;
}

static void test_threads(void)
{
	char path[300];
	struct reader rd[4];
	pthread_t t[4];

	path_of(path, sizeof(path), "threads");
	make_file(path, 8 * CHUNK + 1);
	for (int i = 0; i < 4; i++) {
		rd[i] = (struct reader){ path, 8 * CHUNK + 1, 0 };
		pthread_create(&t[i], NULL, reader_main, &rd[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(rd[i].ok, "thread %d read failed", i);
	}
	unlink(path);
}

/* A kernel that sums the bytes it is given. */
struct sum_args {
	const uint8_t *data;
	uint64_t n;
	uint64_t *sum;
};

static void sum_kernel(const void *kernarg)
{
	const struct sum_args *a = kernarg;
	uint64_t s = 0;

	for (uint64_t i = 0; i < a->n; i++)
		s += a->data[i];
	__atomic_store_n(a->sum, s + 1, __ATOMIC_RELEASE);	/* +1: 0 means not run */
}

static const aql_host_kernel_descriptor sum_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(sum_kernel, struct sum_args, AQL_HOST_KD_NO_BARRIER);

/* Holds a read in its progress callback until released. */
struct gate {
	int open;
	int seen;
	int cancel;
};

static int gate_progress(uint64_t done, uint64_t total, void *user)
{
	struct gate *g = user;

	(void)done, (void)total;
	__atomic_store_n(&g->seen, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&g->open, __ATOMIC_ACQUIRE))
		th_sleep_ms(1);
	return __atomic_load_n(&g->cancel, __ATOMIC_ACQUIRE);
}

static void *open_gate_later(void *arg)
{
	struct gate *g = arg;

	th_sleep_ms(20);
	__atomic_store_n(&g->open, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void wait_seen(struct gate *g)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (!__atomic_load_n(&g->seen, __ATOMIC_ACQUIRE)) {
		if (th_now_ns() > end)
			th_stop("the read's progress callback never ran");
		th_sleep_ms(1);
	}
}

/*
 * The asynchronous form: a launch behind a barrier-AND on the read's
 * signal runs only after the data is in, and sees all of it.
 */
static void test_async_chain(void)
{
	uint64_t size = 16 * CHUNK + 3, want = 1, sum = 0;
	uint8_t *dst = buffer(size, 0);
	struct gate g = { 0 };
	aql_file_read_options o = { .chunk_size = CHUNK, .progress = gate_progress,
				    .progress_user = &g };
	aql_signal *read_done = th_signal(1), *kernel_done = th_signal(1);
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	struct sum_args args __attribute__((aligned(16))) = { dst, size, &sum };
	aql_barrier_packet b = {
		.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
		.dep_signal = { aql_signal_handle(read_done) },
	};
	aql_dispatch_packet p = th_dispatch1(&sum_kd, &args, kernel_done);
	aql_file_read_result r;
	aql_file_read_op *op = NULL;
	char path[300];
	int64_t v = 1;

	path_of(path, sizeof(path), "async");
	make_file(path, size);
	for (uint64_t i = 0; i < size; i++)
		want += pat(i);
	CHECK_OK(aql_file_read_async(path, dst, size, 0, &o, read_done, &op));
	th_submit(q, &b);
	th_submit(q, &p);
	wait_seen(&g);
	th_sleep_ms(20);
	CHECK(__atomic_load_n(&sum, __ATOMIC_ACQUIRE) == 0, "kernel ran before the read ended");
	CHECK(aql_signal_load(read_done, AQL_ACQUIRE) == 1, "signal changed early");
	CHECK(aql_file_read_wait(op, 0, NULL) == AQL_ERR_TIMEOUT && th_error_has("running"),
	      "a running read did not time out");
	__atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
	/* A waiter sees the signal reach 0. */
	CHECK_DONE(aql_signal_wait(read_done, AQL_COND_EQ, 0, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
	CHECK(v == 0, "read signal %lld", (long long)v);
	CHECK(th_wait_done(kernel_done) == 0, "kernel did not complete");
	CHECK(__atomic_load_n(&sum, __ATOMIC_ACQUIRE) == want,
	      "kernel saw sum %llu, want %llu", (unsigned long long)sum,
	      (unsigned long long)want);
	CHECK_DONE(aql_file_read_wait(op, TH_TIMEOUT_NS, &r));
	CHECK(r.bytes == size && mismatch(dst, size, 0) < 0, "async read %llu bytes",
	      (unsigned long long)r.bytes);
	aql_file_read_free(op);
	aql_queue_destroy(q);
	aql_signal_destroy(kernel_done);
	aql_signal_destroy(read_done);
	unlink(path);
	free(dst);
}

static void test_async(void)
{
	uint64_t size = 8 * CHUNK + 1;
	uint8_t *a = buffer(size, 0), *b = buffer(size, 0);
	aql_file_read_options o = { .chunk_size = CHUNK };
	aql_signal *s = th_signal(2);
	aql_file_read_op *op1 = NULL, *op2 = NULL, *op = (aql_file_read_op *)&o;
	aql_file_read_result r;
	char path[300], missing[300];
	int64_t v = 2;

	path_of(path, sizeof(path), "async2");
	make_file(path, size);
	/* Two reads on one signal of value 2: 0 after both. */
	CHECK_OK(aql_file_read_async(path, a, size, 0, &o, s, &op1));
	CHECK_OK(aql_file_read_async(path, b, size, 0, &o, s, &op2));
	CHECK_DONE(aql_signal_wait(s, AQL_COND_LT, 1, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
	CHECK(v == 0, "two reads left the signal at %lld", (long long)v);
	CHECK_DONE(aql_file_read_wait(op1, TH_TIMEOUT_NS, NULL));
	CHECK_DONE(aql_file_read_wait(op2, TH_TIMEOUT_NS, &r));
	CHECK(r.bytes == size && mismatch(a, size, 0) < 0 && mismatch(b, size, 0) < 0,
	      "two async reads");
	aql_file_read_free(op1);
	aql_file_read_free(op2);

	/* A missing file fails at once; signal untouched, no handle. */
	aql_signal_store(s, 1, AQL_RELAXED);
	path_of(missing, sizeof(missing), "no-such-async");
	CHECK(aql_file_read_async(missing, a, size, 0, &o, s, &op) == AQL_ERR_NOT_FOUND &&
		      th_error_has(missing),
	      "async missing file");
	CHECK(op == NULL && aql_signal_load(s, AQL_RELAXED) == 1, "failed start left state");
	CHECK(aql_file_read_async(path, a, size, 0, &o, s, NULL) == AQL_ERR_INVALID_ARG,
	      "NULL out accepted");
	CHECK(aql_file_read_wait(NULL, 0, NULL) == AQL_ERR_INVALID_ARG, "wait on NULL");
	aql_file_read_cancel(NULL);
	aql_file_read_free(NULL);

	/* Failure during the read: the signal goes to -1, wait gives the error. */
	{
		struct progress_log log = { .min_step = UINT64_MAX, .monotonic = 1,
					    .truncate_path = path, .truncate_to = CHUNK + 1000 };
		aql_file_read_options so = { .chunk_size = CHUNK, .queue_depth = 1,
					     .progress = on_progress, .progress_user = &log };

		CHECK_OK(aql_file_read_async(path, a, size, 0, &so, s, &op));
		CHECK_DONE(aql_signal_wait(s, AQL_COND_LT, 1, TH_TIMEOUT_NS, AQL_WAIT_BLOCKED, &v));
		CHECK(v == -1, "failed read left the signal at %lld", (long long)v);
		CHECK(th_done(aql_file_read_wait(op, TH_TIMEOUT_NS, &r)) == AQL_ERR_SYSTEM &&
			      th_error_has("shrank"),
		      "async failure status");
		CHECK(r.bytes == CHUNK + 1000, "async failure reports %llu bytes",
		      (unsigned long long)r.bytes);
		aql_file_read_free(op);
		make_file(path, size);
	}

	/* Cancel while running. */
	{
		struct gate g = { 0 };
		aql_file_read_options go = { .chunk_size = CHUNK, .queue_depth = 1,
					     .progress = gate_progress, .progress_user = &g };

		aql_signal_store(s, 1, AQL_RELAXED);
		CHECK_OK(aql_file_read_async(path, a, size, 0, &go, s, &op));
		wait_seen(&g);
		aql_file_read_cancel(op);
		__atomic_store_n(&g.open, 1, __ATOMIC_RELEASE);
		CHECK(th_done(aql_file_read_wait(op, TH_TIMEOUT_NS, &r)) == AQL_ERR_SYSTEM &&
			      th_error_has("aql_file_read_cancel"),
		      "canceled async read");
		CHECK(aql_signal_load(s, AQL_ACQUIRE) == -1, "canceled read signal %lld",
		      (long long)aql_signal_load(s, AQL_RELAXED));
		CHECK(r.bytes < size, "canceled read got everything");
		aql_file_read_free(op);
	}

	/* Free while running: canceled and joined; the signal says so. */
	{
		struct gate g = { 0 };
		aql_file_read_options go = { .chunk_size = CHUNK, .queue_depth = 1,
					     .progress = gate_progress, .progress_user = &g };
		pthread_t t;

		aql_signal_store(s, 1, AQL_RELAXED);
		CHECK_OK(aql_file_read_async(path, a, size, 0, &go, s, &op));
		wait_seen(&g);
		/* free() blocks until the callback returns: open the gate later. */
		pthread_create(&t, NULL, open_gate_later, &g);
		aql_file_read_free(op);
		pthread_join(t, NULL);
		v = aql_signal_load(s, AQL_ACQUIRE);
		CHECK(v == -1, "freed read left the signal at %lld", (long long)v);
	}

	/* No signal: the handle alone. */
	CHECK_OK(aql_file_read_async(path, b, size, 0, &o, NULL, &op));
	CHECK_DONE(aql_file_read_wait(op, TH_TIMEOUT_NS, &r));
	CHECK(r.bytes == size, "signal-less async read");
	aql_file_read_free(op);

	aql_signal_destroy(s);
	unlink(path);
	free(a);
	free(b);
}

int main(void)
{
	const char *base = getenv("AQL_FILE_TEST_DIR");

	snprintf(dir, sizeof(dir), "%s/aql-file-read-XXXXXX", base && *base ? base : "/var/tmp");
	if (!mkdtemp(dir)) {
		perror(dir);
		return 1;
	}
	probe();
	test_sizes();
	test_defaults();
	test_ranges();
	test_direct_on();
	test_tmpfs();
	test_errors();
	test_permission();
	test_progress();
	test_shrink();
	test_forced_fallback();
	test_real_fallback();
	test_fd();
	test_threads();
	test_async_chain();
	test_async();
	rmdir(dir);
	return th_finish();
}
