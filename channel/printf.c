/* SPDX-License-Identifier: MIT */
/*
 * The printf service (aql/printf.h): the table of format strings, the
 * channel handler that formats records (channel/printf_format.c), and the
 * output.
 *
 * Output to a file descriptor goes through io_uring, one write at a time
 * so that the bytes keep their order on a pipe or a file position
 * (offset -1): text gathers in one buffer while the other is written; a
 * full buffer, or the end of a drain, hands it over once the previous
 * write has completed. Short writes are resubmitted for the rest, and an
 * O_NONBLOCK descriptor that says EAGAIN is polled for room first.
 * Without io_uring the same buffer is written with write(2).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <liburing.h>

#include <aql/printf.h>
#include "util/error.h"
#include "channel/printf_impl.h"
#include "util/uring_tsan.h"

#define DEFAULT_BUFFER (64u << 10)
#define MIN_BUFFER 256u
#define MAX_BUFFER (64u << 20)
#define RING_DEPTH 4u
/* Writes that make no progress (0 bytes) before the output is given up. */
#define MAX_ZERO_WRITES 8

/* io_uring user data of the write (the only request). */
#define UD_WRITE 1u

struct entry {
	uint32_t id;
	struct aql_printf_fmt *f;	/* NULL: empty */
};

struct aql_printf {
	pthread_mutex_t lock;

	/* Formats: open addressing on the id, at most half full. */
	struct entry *tab;
	uint32_t tab_size, tab_count;

	/* Output. */
	enum aql_printf_method method;
	FILE *stream;
	int fd;
	char *buf[2];
	uint32_t size;		/* bytes per buffer */
	int cur;		/* the buffer that fills */
	size_t fill;
	struct io_uring ring;
	int have_ring;
	/* The write in flight (io_uring): buffer, length, bytes done. */
	int busy, widx, zero_writes;
	size_t wlen, wdone;
	uint32_t cqes;		/* completions still to come */
	/* Failed writes since the last flush, and the first one's errno. */
	uint64_t failed;
	int first_err;

	struct aql_printf_text text;	/* one record's text */
	aql_printf_stats stats;

	aql_channel **chans;
	uint32_t chan_count;
};

/* ---- formats ---------------------------------------------------------- */

static uint32_t slot_of(uint32_t id, uint32_t size)
{
	return (id * 0x9e3779b1u) & (size - 1);
}

static struct aql_printf_fmt *lookup(const aql_printf *svc, uint32_t id)
{
	uint32_t i;

	if (!svc->tab_size)
		return NULL;
	for (i = slot_of(id, svc->tab_size); svc->tab[i].f; i = (i + 1) & (svc->tab_size - 1))
		if (svc->tab[i].id == id)
			return svc->tab[i].f;
	return NULL;
}

static void insert(aql_printf *svc, uint32_t id, struct aql_printf_fmt *f)
{
	uint32_t i = slot_of(id, svc->tab_size);

	while (svc->tab[i].f)
		i = (i + 1) & (svc->tab_size - 1);
	svc->tab[i] = (struct entry){ id, f };
	svc->tab_count++;
}

/* Room for n more formats. */
static aql_status reserve(aql_printf *svc, uint32_t n)
{
	uint64_t need = (uint64_t)svc->tab_count + n, size = svc->tab_size ? svc->tab_size : 16;
	struct entry *old = svc->tab;
	uint32_t old_size = svc->tab_size;

	while (size < 2 * need)
		size *= 2;
	if (size == svc->tab_size)
		return AQL_OK;
	if (size > (1u << 31))
		return aql_fail(AQL_ERR_NOMEM, "printf: %llu formats are too many",
				(unsigned long long)need);
	svc->tab = calloc(size, sizeof(*svc->tab));
	if (!svc->tab) {
		svc->tab = old;
		return aql_fail(AQL_ERR_NOMEM, "printf: no memory for %llu formats",
				(unsigned long long)need);
	}
	svc->tab_size = (uint32_t)size;
	svc->tab_count = 0;
	for (uint32_t i = 0; i < old_size; i++)
		if (old[i].f)
			insert(svc, old[i].id, old[i].f);
	free(old);
	return AQL_OK;
}

/* A format to add, and where it came from (for messages). */
struct pending {
	uint32_t id;
	uint32_t index;		/* in the caller's table or metadata */
	struct aql_printf_fmt *f;
};

static int by_id(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

static int same_text(const struct aql_printf_fmt *a, const struct aql_printf_fmt *b)
{
	size_t la, lb;
	const char *ta = aql_printf_fmt_text(a, &la), *tb = aql_printf_fmt_text(b, &lb);

	return la == lb && memcmp(ta, tb, la) == 0;
}

static aql_status conflict(uint32_t id, const struct aql_printf_fmt *a, const char *what,
			   const struct aql_printf_fmt *b, const char *what_b)
{
	struct aql_printf_text t = { 0 };
	size_t la, lb;
	const char *ta = aql_printf_fmt_text(a, &la), *tb = aql_printf_fmt_text(b, &lb);
	aql_status st;

	aql_printf_text_appendf(&t, "printf format %u: \"", id);
	aql_printf_text_quote(&t, ta, la, 60);
	aql_printf_text_appendf(&t, "\" (%s) conflicts with \"", what);
	aql_printf_text_quote(&t, tb, lb, 60);
	aql_printf_text_appendf(&t, "\" (%s)", what_b);
	st = aql_fail(AQL_ERR_INVALID_ARG, "%s", t.p ? t.p : "printf: conflicting format ids");
	free(t.p);
	return st;
}

/*
 * Add n parsed formats (taken over, freed on failure): all, or none if
 * an id is taken by another string. source names the origin ("table",
 * "amdhsa.printf").
 */
static aql_status add_pending(aql_printf *svc, struct pending *p, uint32_t n, const char *source)
{
	char a[48], b[48];
	uint32_t kept = 0;
	aql_status st = AQL_OK;

	qsort(p, n, sizeof(*p), by_id);
	pthread_mutex_lock(&svc->lock);
	for (uint32_t i = 0; i < n && !st; i++) {
		const struct aql_printf_fmt *old = lookup(svc, p[i].id);

		snprintf(a, sizeof(a), "%s entry %u", source, p[i].index);
		if (kept && p[kept - 1].id == p[i].id) {
			snprintf(b, sizeof(b), "%s entry %u", source, p[kept - 1].index);
			if (!same_text(p[i].f, p[kept - 1].f))
				st = conflict(p[i].id, p[i].f, a, p[kept - 1].f, b);
		} else if (old) {
			if (!same_text(p[i].f, old))
				st = conflict(p[i].id, p[i].f, a, old, "already registered");
		} else {
			struct pending keep = p[i];

			p[i].f = NULL;
			p[kept++] = keep;
			continue;
		}
		/* A repeat of a string already there: nothing to add. */
		if (!st) {
			aql_printf_fmt_free(p[i].f);
			p[i].f = NULL;
		}
	}
	if (!st)
		st = reserve(svc, kept);
	if (!st) {
		for (uint32_t i = 0; i < kept; i++) {
			insert(svc, p[i].id, p[i].f);
			p[i].f = NULL;
		}
		svc->stats.formats = svc->tab_count;
	}
	pthread_mutex_unlock(&svc->lock);
	for (uint32_t i = 0; i < n; i++)
		aql_printf_fmt_free(p[i].f);
	return st;
}

aql_status aql_printf_add_formats(aql_printf *svc, const char *const *formats,
				  uint32_t count, uint32_t first_id)
{
	struct pending *p;
	uint32_t n = 0;

	if (!svc || (!formats && count))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_add_formats: %s is NULL",
				svc ? "formats" : "svc");
	if (count && (uint64_t)first_id + count - 1 > UINT32_MAX)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_printf_add_formats: ids %u + %u formats pass UINT32_MAX",
				first_id, count);
	if (!count)
		return AQL_OK;
	p = calloc(count, sizeof(*p));
	if (!p)
		return aql_fail(AQL_ERR_NOMEM, "printf: no memory for %u formats", count);
	for (uint32_t i = 0; i < count; i++) {
		if (!formats[i])
			continue;
		p[n] = (struct pending){ first_id + i, i,
					 aql_printf_fmt_parse(formats[i], strlen(formats[i])) };
		if (!p[n++].f) {
			for (uint32_t k = 0; k < n; k++)
				aql_printf_fmt_free(p[k].f);
			free(p);
			return aql_fail(AQL_ERR_NOMEM, "printf: no memory for format %u", first_id + i);
		}
	}
	aql_status st = add_pending(svc, p, n, "table");

	free(p);
	return st;
}

/* A decimal number before a ':' at *s (advanced past the ':'); -1 if none. */
static int64_t field(const char **s)
{
	const char *p = *s;
	int64_t v = 0;

	if (*p < '0' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (*p++ - '0');
		if (v > UINT32_MAX)
			return -1;
	}
	if (*p != ':')
		return -1;
	*s = p + 1;
	return v;
}

/* Undo LLVM's escapes in an amdhsa.printf format: \72 and \a \b \f \n \r \v. */
static size_t unescape(const char *s, char *out)
{
	static const char from[] = "abfnrv", to[] = "\a\b\f\n\r\v";
	size_t n = 0;

	while (*s) {
		const char *e;

		if (s[0] == '\\' && s[1] == '7' && s[2] == '2') {
			out[n++] = ':';
			s += 3;
		} else if (s[0] == '\\' && s[1] && (e = strchr(from, s[1]))) {
			out[n++] = to[e - from];
			s += 2;
		} else {
			out[n++] = *s++;
		}
	}
	out[n] = 0;
	return n;
}

static aql_status bad_entry(uint32_t i, const char *s, const char *why)
{
	struct aql_printf_text t = { 0 };
	aql_status st;

	aql_printf_text_appendf(&t, "amdhsa.printf entry %u \"", i);
	aql_printf_text_quote(&t, s, strlen(s), 60);
	aql_printf_text_appendf(&t, "\": %s", why);
	st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "%s", t.p ? t.p : why);
	free(t.p);
	return st;
}

aql_status aql_printf_add_metadata(aql_printf *svc, const aql_metadata *md)
{
	struct pending *p;
	uint32_t n = 0;
	aql_status st = AQL_OK;
	char *tmp = NULL;

	if (!svc || !md)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_add_metadata: %s is NULL",
				svc ? "md" : "svc");
	if (!md->printf_count)
		return AQL_OK;
	if (!md->printf_formats)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"aql_printf_add_metadata: %u printf formats but no array",
				md->printf_count);
	p = calloc(md->printf_count, sizeof(*p));
	if (!p)
		return aql_fail(AQL_ERR_NOMEM, "printf: no memory for %u formats", md->printf_count);
	for (uint32_t i = 0; i < md->printf_count && !st; i++) {
		const char *s = md->printf_formats[i], *q;
		int64_t id, nsizes;
		size_t len;

		if (!s) {
			st = aql_fail(AQL_ERR_INVALID_CODE_OBJECT, "amdhsa.printf entry %u is NULL", i);
			break;
		}
		q = s;
		if ((id = field(&q)) < 0) {
			st = bad_entry(i, s, "no decimal id followed by ':'");
			break;
		}
		/* HIP's buffered printf: "0:0:<md5>,<format>", keyed by hash. */
		if (id == 0)
			continue;
		if ((nsizes = field(&q)) < 0) {
			st = bad_entry(i, s, "no decimal count of argument sizes followed by ':'");
			break;
		}
		for (int64_t k = 0; k < nsizes; k++)
			if (field(&q) < 0) {
				char why[160];

				snprintf(why, sizeof(why),
					 "it says %lld argument sizes, and size %lld is not a decimal number followed by ':'",
					 (long long)nsizes, (long long)k + 1);
				st = bad_entry(i, s, why);
				break;
			}
		if (st)
			break;
		free(tmp);
		tmp = malloc(strlen(q) + 1);
		if (!tmp) {
			st = aql_fail(AQL_ERR_NOMEM, "printf: no memory for amdhsa.printf entry %u", i);
			break;
		}
		len = unescape(q, tmp);
		p[n] = (struct pending){ (uint32_t)id, i, aql_printf_fmt_parse(tmp, len) };
		if (!p[n++].f)
			st = aql_fail(AQL_ERR_NOMEM, "printf: no memory for amdhsa.printf entry %u", i);
	}
	free(tmp);
	if (!st) {
		st = add_pending(svc, p, n, "amdhsa.printf");
	} else {
		for (uint32_t k = 0; k < n; k++)
			aql_printf_fmt_free(p[k].f);
	}
	free(p);
	return st;
}

aql_status aql_printf_add_code_object(aql_printf *svc, const aql_code_object *co)
{
	if (!svc || !co)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_add_code_object: %s is NULL",
				svc ? "co" : "svc");
	return aql_printf_add_metadata(svc, aql_code_object_get_info(co)->metadata);
}

/* ---- output ----------------------------------------------------------- */

static void write_failed(aql_printf *svc, int err)
{
	if (!svc->failed++)
		svc->first_err = err;
	svc->stats.write_errors++;
}

/* write(2) all of p, waiting out EAGAIN on a non-blocking descriptor. */
static void write_all(aql_printf *svc, const char *p, size_t n)
{
	int zero = 0;

	while (n) {
		ssize_t w = write(svc->fd, p, n);

		svc->stats.writes++;
		if (w > 0) {
			p += w;
			n -= (size_t)w;
			svc->stats.bytes += (uint64_t)w;
			zero = 0;
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pfd = { .fd = svc->fd, .events = POLLOUT };

			if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
				write_failed(svc, errno);
				return;
			}
		} else if (w == 0 && ++zero < MAX_ZERO_WRITES) {
			continue;
		} else {
			write_failed(svc, w < 0 ? errno : EIO);
			return;
		}
	}
}

/* Queue the rest of the write in flight and submit it. */
static void submit_write(aql_printf *svc)
{
	struct io_uring_sqe *sqe;
	int ret = -EBUSY;

	RING_BEGIN();
	sqe = io_uring_get_sqe(&svc->ring);
	if (sqe) {
		io_uring_prep_write(sqe, svc->fd, svc->buf[svc->widx] + svc->wdone,
				    (unsigned)(svc->wlen - svc->wdone), (uint64_t)-1);
		io_uring_sqe_set_data64(sqe, UD_WRITE);
		do
			ret = io_uring_submit(&svc->ring);
		while (ret == -EINTR);
	}
	RING_END();
	if (ret != 1) {
		/*
		 * The ring refused it, with nothing else in flight: it may
		 * still hold the entry, so it is not used again. This buffer
		 * and the rest go out with write(2).
		 */
		fprintf(stderr, "aql: printf output to fd %d: io_uring submission failed (%s); using write(2)\n",
			svc->fd, strerror(ret < 0 ? -ret : EBUSY));
		svc->method = svc->stats.method = AQL_PRINTF_METHOD_WRITE;
		svc->busy = 0;
		write_all(svc, svc->buf[svc->widx] + svc->wdone, svc->wlen - svc->wdone);
		return;
	}
	svc->cqes++;
	svc->stats.writes++;
}

static void complete(aql_printf *svc, int res)
{
	svc->cqes--;
	if (!svc->busy)
		return;
	if (res > 0) {
		svc->wdone += (size_t)res;
		svc->stats.bytes += (uint64_t)res;
		svc->zero_writes = 0;
		if (svc->wdone < svc->wlen)
			submit_write(svc);	/* a short write: the rest */
		else
			svc->busy = 0;
	} else if (res == -EAGAIN) {
		/* An O_NONBLOCK descriptor that is full: wait for room. */
		struct pollfd pfd = { .fd = svc->fd, .events = POLLOUT };

		while (poll(&pfd, 1, -1) < 0 && errno == EINTR)
			;
		submit_write(svc);
	} else if (res == -EINTR || (res == 0 && ++svc->zero_writes < MAX_ZERO_WRITES)) {
		submit_write(svc);
	} else {
		svc->busy = 0;
		write_failed(svc, res < 0 ? -res : EIO);
	}
}

/* Handle completions; with wait, until the write in flight is done. */
static void reap(aql_printf *svc, int wait)
{
	struct io_uring_cqe *cqe;
	int ret, res;

	while (svc->cqes) {
		RING_BEGIN();
		ret = wait && svc->busy ? io_uring_wait_cqe(&svc->ring, &cqe)
					: io_uring_peek_cqe(&svc->ring, &cqe);
		if (!ret) {
			res = cqe->res;
			io_uring_cqe_seen(&svc->ring, cqe);
		}
		RING_END();
		if (ret == -EINTR)
			continue;
		if (ret == -EAGAIN && wait && svc->busy)
			continue;
		if (ret) {
			if (ret != -EAGAIN && svc->busy) {
				/* The ring is unusable: count the rest as lost. */
				svc->busy = 0;
				write_failed(svc, -ret);
			}
			return;
		}
		complete(svc, res);
	}
}

/* Hand the buffer that fills to the output. */
static void seal(aql_printf *svc)
{
	if (!svc->fill)
		return;
	if (svc->method == AQL_PRINTF_METHOD_WRITE) {
		write_all(svc, svc->buf[svc->cur], svc->fill);
		svc->fill = 0;
		return;
	}
	reap(svc, 1);
	svc->widx = svc->cur;
	svc->wlen = svc->fill;
	svc->wdone = 0;
	svc->busy = 1;
	svc->zero_writes = 0;
	svc->cur ^= 1;
	svc->fill = 0;
	submit_write(svc);
}

static void out_text(aql_printf *svc, const char *p, size_t n)
{
	if (svc->method == AQL_PRINTF_METHOD_STDIO) {
		size_t w = fwrite(p, 1, n, svc->stream);

		svc->stats.bytes += w;
		if (w < n)
			write_failed(svc, errno ? errno : EIO);
		return;
	}
	while (n) {
		size_t c = svc->size - svc->fill < n ? svc->size - svc->fill : n;

		memcpy(svc->buf[svc->cur] + svc->fill, p, c);
		svc->fill += c;
		p += c;
		n -= c;
		if (svc->fill == svc->size)
			seal(svc);
	}
}

/* The end of a drain: what it printed goes out. */
static void batch_end(aql_printf *svc)
{
	if (svc->method == AQL_PRINTF_METHOD_STDIO) {
		if (fflush(svc->stream))
			write_failed(svc, errno ? errno : EIO);
		return;
	}
	if (svc->method == AQL_PRINTF_METHOD_URING)
		reap(svc, 0);
	seal(svc);
}

static void record(aql_printf *svc, const void *data, size_t size)
{
	static const char nomem[] = "[aql printf: out of memory formatting a record]\n";
	const struct aql_printf_fmt *f = NULL;
	uint32_t id;
	int bad;

	svc->text.len = 0;
	svc->text.nomem = 0;
	if (size >= sizeof(id)) {
		memcpy(&id, data, sizeof(id));
		f = lookup(svc, id);
	}
	bad = aql_printf_fmt_record(f, data, size, &svc->text);
	svc->stats.records++;
	if (svc->text.nomem) {
		svc->stats.errors++;
		out_text(svc, nomem, sizeof(nomem) - 1);
		return;
	}
	svc->stats.errors += (uint64_t)bad;
	out_text(svc, svc->text.p, svc->text.len);
}

/* The AQL_CHANNEL_KIND_PRINTF handler; NULL: the drain has ended. */
static int on_message(const aql_channel_msg *m, void *ctx)
{
	aql_printf *svc = ctx;

	pthread_mutex_lock(&svc->lock);
	if (m)
		record(svc, m->data, m->size);
	else
		batch_end(svc);
	pthread_mutex_unlock(&svc->lock);
	return 0;
}

/* ---- the service ------------------------------------------------------ */

static int env_no_uring(void)
{
	const char *v = getenv("AQL_PRINTF_NO_URING");

	return v && *v && strcmp(v, "0") != 0;
}

/* Set up io_uring for the fd, or say in one line why write(2) is used. */
static void open_uring(aql_printf *svc)
{
	struct io_uring_params p = { 0 };
	const char *why = NULL;
	int ret = 0;

	if (env_no_uring()) {
		why = "AQL_PRINTF_NO_URING is set";
	} else if ((ret = io_uring_queue_init_params(RING_DEPTH, &svc->ring, &p)) < 0) {
		why = strerror(-ret);
	} else if (!(p.features & IORING_FEAT_RW_CUR_POS)) {
		io_uring_queue_exit(&svc->ring);
		why = "the kernel cannot write at the file position";
	}
	if (why) {
		fprintf(stderr, "aql: printf output to fd %d: io_uring unavailable (%s); using write(2)\n",
			svc->fd, why);
		svc->method = AQL_PRINTF_METHOD_WRITE;
		return;
	}
	svc->have_ring = 1;
	svc->method = AQL_PRINTF_METHOD_URING;
}

aql_status aql_printf_create(const aql_printf_config *config, aql_printf **out)
{
	aql_printf_config c = config ? *config : (aql_printf_config){ 0 };
	aql_printf *svc;
	aql_status st;

	if (!out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_create: out is NULL");
	*out = NULL;
	if (c.output > AQL_PRINTF_FD)
		return aql_fail(AQL_ERR_INVALID_ARG, "printf config: output %d is unknown",
				(int)c.output);
	if (c.output == AQL_PRINTF_STREAM && !c.stream)
		return aql_fail(AQL_ERR_INVALID_ARG,
				"printf config: output AQL_PRINTF_STREAM with a NULL stream");
	if (c.output == AQL_PRINTF_FD && c.fd < 0)
		return aql_fail(AQL_ERR_INVALID_ARG, "printf config: output AQL_PRINTF_FD with fd %d",
				c.fd);
	if (c.flags & ~(uint32_t)AQL_PRINTF_NO_URING)
		return aql_fail(AQL_ERR_INVALID_ARG, "printf config: flags 0x%x has unknown bits 0x%x",
				c.flags, c.flags & ~(uint32_t)AQL_PRINTF_NO_URING);
	if (c.buffer_size && (c.buffer_size < MIN_BUFFER || c.buffer_size > MAX_BUFFER))
		return aql_fail(AQL_ERR_INVALID_ARG,
				"printf config: buffer_size %u is not from %u bytes to %u MiB",
				c.buffer_size, MIN_BUFFER, MAX_BUFFER >> 20);

	svc = calloc(1, sizeof(*svc));
	if (!svc)
		return aql_fail(AQL_ERR_NOMEM, "printf: out of memory");
	pthread_mutex_init(&svc->lock, NULL);
	svc->fd = -1;
	svc->method = AQL_PRINTF_METHOD_STDIO;
	svc->stream = c.output == AQL_PRINTF_STREAM ? c.stream : stdout;
	if (c.output == AQL_PRINTF_FD) {
		svc->fd = c.fd;
		svc->size = c.buffer_size ? c.buffer_size : DEFAULT_BUFFER;
		svc->stream = NULL;
		if (c.flags & AQL_PRINTF_NO_URING)
			svc->method = AQL_PRINTF_METHOD_WRITE;
		else
			open_uring(svc);
		svc->buf[0] = malloc(svc->size);
		svc->buf[1] = svc->method == AQL_PRINTF_METHOD_URING ? malloc(svc->size) : NULL;
		if (!svc->buf[0] || (svc->method == AQL_PRINTF_METHOD_URING && !svc->buf[1])) {
			aql_printf_destroy(svc);
			return aql_fail(AQL_ERR_NOMEM, "printf: no memory for two %u-byte buffers",
					svc->size);
		}
	}
	svc->stats.method = svc->method;
	if ((st = aql_printf_add_formats(svc, c.formats, c.formats ? c.format_count : 0, 0))) {
		aql_printf_destroy(svc);
		return st;
	}
	*out = svc;
	return AQL_OK;
}

/* Write what is buffered and wait for it; the error of failed writes. */
static aql_status flush_locked(aql_printf *svc)
{
	uint64_t failed;
	int err;

	batch_end(svc);
	if (svc->method == AQL_PRINTF_METHOD_URING)
		reap(svc, 1);
	failed = svc->failed;
	err = svc->first_err;
	svc->failed = 0;
	svc->first_err = 0;
	if (!failed)
		return AQL_OK;
	if (svc->method == AQL_PRINTF_METHOD_STDIO)
		return aql_fail(AQL_ERR_SYSTEM, "printf output to its stdio stream: %llu writes failed, the first: %s",
				(unsigned long long)failed, strerror(err));
	return aql_fail(AQL_ERR_SYSTEM, "printf output to fd %d: %llu writes failed, the first: %s",
			svc->fd, (unsigned long long)failed, strerror(err));
}

aql_status aql_printf_flush(aql_printf *svc)
{
	aql_status st;

	if (!svc)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_flush: svc is NULL");
	pthread_mutex_lock(&svc->lock);
	st = flush_locked(svc);
	pthread_mutex_unlock(&svc->lock);
	return st;
}

aql_status aql_printf_destroy(aql_printf *svc)
{
	aql_status st;

	if (!svc)
		return AQL_OK;
	pthread_mutex_lock(&svc->lock);
	st = flush_locked(svc);
	pthread_mutex_unlock(&svc->lock);
	if (svc->have_ring)
		io_uring_queue_exit(&svc->ring);
	for (uint32_t i = 0; i < svc->tab_size; i++)
		aql_printf_fmt_free(svc->tab[i].f);
	free(svc->tab);
	free(svc->buf[0]);
	free(svc->buf[1]);
	free(svc->text.p);
	free(svc->chans);
	pthread_mutex_destroy(&svc->lock);
	free(svc);
	return st;
}

aql_status aql_printf_attach(aql_printf *svc, aql_channel *ch)
{
	aql_channel **chans;
	aql_status st = AQL_OK;
	uint32_t i;

	if (!svc || !ch)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_attach: %s is NULL",
				svc ? "ch" : "svc");
	pthread_mutex_lock(&svc->lock);
	for (i = 0; i < svc->chan_count && svc->chans[i] != ch; i++)
		;
	if (i == svc->chan_count) {
		chans = realloc(svc->chans, (i + 1) * sizeof(*chans));
		if (!chans) {
			st = aql_fail(AQL_ERR_NOMEM, "printf: no memory to attach a channel");
		} else {
			svc->chans = chans;
			st = aql_channel_set_handler(ch, AQL_CHANNEL_KIND_PRINTF, on_message, svc);
			if (!st)
				svc->chans[svc->chan_count++] = ch;
		}
	}
	pthread_mutex_unlock(&svc->lock);
	return st;
}

aql_status aql_printf_detach(aql_printf *svc, aql_channel *ch)
{
	aql_status st;
	uint32_t i;

	if (!svc || !ch)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_detach: %s is NULL",
				svc ? "ch" : "svc");
	pthread_mutex_lock(&svc->lock);
	for (i = 0; i < svc->chan_count && svc->chans[i] != ch; i++)
		;
	if (i == svc->chan_count) {
		st = aql_fail(AQL_ERR_NOT_FOUND, "aql_printf_detach: the channel is not attached");
	} else {
		st = aql_channel_set_handler(ch, AQL_CHANNEL_KIND_PRINTF, NULL, NULL);
		svc->chans[i] = svc->chans[--svc->chan_count];
	}
	pthread_mutex_unlock(&svc->lock);
	return st;
}

aql_status aql_printf_format(aql_printf *svc, const void *data, size_t size, char *out,
			     size_t cap, size_t *len)
{
	struct aql_printf_text t = { 0 };
	const struct aql_printf_fmt *f = NULL;
	aql_status st = AQL_OK;
	uint32_t id;
	int bad;

	if (len)
		*len = 0;
	if (!svc || (!data && size) || (!out && cap))
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_format: %s is NULL",
				!svc ? "svc" : !out && cap ? "out" : "data");
	pthread_mutex_lock(&svc->lock);
	if (size >= sizeof(id)) {
		memcpy(&id, data, sizeof(id));
		f = lookup(svc, id);
	}
	bad = aql_printf_fmt_record(f, data, size, &t);
	pthread_mutex_unlock(&svc->lock);
	if (t.nomem) {
		free(t.p);
		return aql_fail(AQL_ERR_NOMEM, "printf: out of memory formatting a record");
	}
	if (bad)	/* without the brackets and the newline */
		st = aql_fail(AQL_ERR_INVALID_ARG, "%.*s", (int)(t.len >= 15 ? t.len - 15 : 0),
			      t.len >= 15 ? t.p + 13 : "");
	if (cap) {
		size_t n = t.len < cap - 1 ? t.len : cap - 1;

		memcpy(out, t.p ? t.p : "", n);
		out[n] = 0;
	}
	if (len)
		*len = t.len;
	free(t.p);
	return st;
}

aql_status aql_printf_get_stats(aql_printf *svc, aql_printf_stats *out)
{
	if (!svc || !out)
		return aql_fail(AQL_ERR_INVALID_ARG, "aql_printf_get_stats: %s is NULL",
				svc ? "out" : "svc");
	pthread_mutex_lock(&svc->lock);
	*out = svc->stats;
	pthread_mutex_unlock(&svc->lock);
	return AQL_OK;
}
