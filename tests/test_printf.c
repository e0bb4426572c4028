/* SPDX-License-Identifier: MIT */
/*
 * printf over channels (aql/printf.h, aql/kernel_printf.h): every
 * conversion and flag against the C library's snprintf of the same format
 * and value, every diagnostic, the tags AQL_PRINTF() sends, amdhsa.printf
 * strings (hand-built and from tests/co's code objects), output through
 * stdio, io_uring (files, pipes, a non-blocking pipe that fills) and
 * write(2), write errors, one service shared by channels drained on two
 * threads, per-work-item order with many producers (host threads and
 * work-items of tests/printf/kernels.c on the CPU agent), and the GPU
 * builds of those kernels. With AQL_TEST_AGENT=nvidia (helpers.h) only
 * the kernels run, as PTX (--ptx) on the NVIDIA agent.
 *
 * Arguments: --kernels HOST.so, and any of --gpu X.hsaco, --ptx X.ptx,
 * --co X.so (code objects with amdhsa.printf), --missing REASON.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include <aql/printf.h>
#include "printf/formats.h"
#include "printf/host_sender.h"

static const char *kernels_path;
static const char *gpu_paths[16], *ptx_path, *co_paths[16];
/* The AMD test agent's build of the kernels (AQL_TEST_AGENT=amd). */
static const char *hsaco_path;
static unsigned gpu_count, co_count;

/* The strings of the ids in printf/formats.h. */
static const char *const test_formats[PF_COUNT] = {
	[PF_SEQ] = "wi %u seq %u\n",
	[PF_TYPES] = "i=%d u=%u l=%ld ul=%lu f=%.3f d=%g c=%d s=%hu\n",
	[PF_TWELVE] = "%d %u %ld %lu %.1f %.1f %d %d %d %d %c %x\n",
	[PF_NONE] = "no values, 100%% literal\n",
	[PF_PTR] = "%p %p\n",
	[PF_MISMATCH] = "mismatch %d\n",
};

/* ---- helpers ------------------------------------------------------------ */

/* A record built by hand. */
struct rb {
	aql_printf_record r;
	uint32_t n;
};

static void rb_init(struct rb *b, uint32_t id)
{
	memset(b, 0, sizeof(*b));
	b->r.format_id = id;
}

static void rb_put(struct rb *b, uint32_t tag, uint64_t bits)
{
	if (b->n >= AQL_PRINTF_MAX_ARGS)
		return;
	b->r.tags[b->n] = (uint8_t)tag;
	b->r.args[b->n++] = bits;
	b->r.arg_count = b->n;
}

static void rb_i32(struct rb *b, int32_t v) { rb_put(b, AQL_PRINTF_TAG_I32, (uint64_t)(int64_t)v); }
static void rb_u32(struct rb *b, uint32_t v) { rb_put(b, AQL_PRINTF_TAG_U32, v); }
static void rb_i64(struct rb *b, int64_t v) { rb_put(b, AQL_PRINTF_TAG_I64, (uint64_t)v); }
static void rb_u64(struct rb *b, uint64_t v) { rb_put(b, AQL_PRINTF_TAG_U64, v); }
static void rb_ptr(struct rb *b, uint64_t v) { rb_put(b, AQL_PRINTF_TAG_PTR, v); }

static void rb_f64(struct rb *b, double d)
{
	uint64_t bits;

	memcpy(&bits, &d, sizeof(bits));
	rb_put(b, AQL_PRINTF_TAG_F64, bits);
}

static size_t rb_size(const struct rb *b)
{
	return AQL_PRINTF_RECORD_BYTES(b->n);
}

static aql_printf *svc_make(const aql_printf_config *c)
{
	aql_printf *svc = NULL;

	CHECK_OK(aql_printf_create(c, &svc));
	if (!svc)
		exit(1);
	return svc;
}

static aql_printf_stats svc_stats(aql_printf *svc)
{
	aql_printf_stats s = { 0 };

	CHECK_OK(aql_printf_get_stats(svc, &s));
	return s;
}

static aql_channel *chan_make_on(aql_agent *agent, uint32_t slots)
{
	aql_channel_config c = { .slot_count = slots };
	aql_channel *ch = NULL;

	CHECK_OK(aql_channel_create(agent, &c, &ch));
	if (!ch)
		exit(1);
	return ch;
}

static aql_channel *chan_make(uint32_t slots)
{
	return chan_make_on(th_agent(), slots);
}

static int memfd(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	if (fd < 0) {
		perror("memfd_create");
		exit(1);
	}
	return fd;
}

/* The whole contents of fd (malloc'd, NUL-terminated); *len its length. */
static char *contents(int fd, size_t *len)
{
	struct stat st;
	char *p;
	ssize_t n;

	if (fstat(fd, &st) != 0)
		exit(1);
	p = malloc((size_t)st.st_size + 1);
	if (!p)
		exit(1);
	n = pread(fd, p, (size_t)st.st_size, 0);
	*len = n < 0 ? 0 : (size_t)n;
	p[*len] = 0;
	return p;
}

/* Add one format with the given id. */
static void add1(aql_printf *svc, uint32_t id, const char *fmt)
{
	CHECK_OK(aql_printf_add_formats(svc, &fmt, 1, id));
}

/* Format b with svc: returns the status, the text in out. */
static aql_status fmt_rec(aql_printf *svc, const struct rb *b, char *out, size_t cap, size_t *len)
{
	return aql_printf_format(svc, &b->r, rb_size(b), out, cap, len);
}

/* ---- the API's own checks ------------------------------------------------- */

static void test_api_errors(void)
{
	static const struct {
		aql_printf_config c;
		const char *needle;
	} bad[] = {
		{ { .output = (enum aql_printf_output)7 }, "output 7" },
		{ { .output = AQL_PRINTF_STREAM }, "NULL stream" },
		{ { .output = AQL_PRINTF_FD, .fd = -1 }, "fd -1" },
		{ { .flags = 6 }, "unknown bits 0x6" },
		{ { .output = AQL_PRINTF_FD, .fd = 1, .buffer_size = 100 }, "buffer_size 100" },
		{ { .output = AQL_PRINTF_FD, .fd = 1, .buffer_size = (128u << 20) }, "buffer_size" },
	};
	const char *two[] = { "a %d\n", "b %d\n" };
	const char *other = "other %d\n", *same = "a %d\n";
	aql_printf *svc = (aql_printf *)1;
	aql_printf_config c = { .formats = two, .format_count = 2 };
	aql_printf_stats s;
	aql_channel *ch;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		svc = (aql_printf *)1;
		CHECK(aql_printf_create(&bad[i].c, &svc) == AQL_ERR_INVALID_ARG, "config %zu", i);
		CHECK(th_error_has(bad[i].needle), "config %zu", i);
		CHECK(svc == NULL, "config %zu: out not cleared", i);
	}
	CHECK(aql_printf_create(NULL, NULL) == AQL_ERR_INVALID_ARG, "NULL out");
	CHECK(aql_printf_flush(NULL) == AQL_ERR_INVALID_ARG, "flush NULL");
	CHECK(aql_printf_get_stats(NULL, &s) == AQL_ERR_INVALID_ARG, "stats NULL");
	CHECK(aql_printf_destroy(NULL) == AQL_OK, "destroy NULL");

	/* The default: stdout through stdio. */
	svc = svc_make(NULL);
	s = svc_stats(svc);
	CHECK(s.method == AQL_PRINTF_METHOD_STDIO && s.formats == 0, "method %d, %u formats",
	      s.method, s.formats);
	CHECK_OK(aql_printf_destroy(svc));

	svc = svc_make(&c);
	CHECK(svc_stats(svc).formats == 2, "%u formats", svc_stats(svc).formats);
	/* The same string again is fine; another one for a taken id is not. */
	CHECK_OK(aql_printf_add_formats(svc, &same, 1, 0));
	CHECK(aql_printf_add_formats(svc, &other, 1, 1) == AQL_ERR_INVALID_ARG, "conflict");
	CHECK(th_error_has("printf format 1: \"other %d\\n\" (table entry 0) conflicts with \"b %d\\n\" (already registered)"),
	      "conflict message");
	CHECK(aql_printf_add_formats(svc, NULL, 1, 0) == AQL_ERR_INVALID_ARG, "NULL formats");
	CHECK(aql_printf_add_formats(svc, two, 2, UINT32_MAX) == AQL_ERR_INVALID_ARG, "overflow");
	CHECK(th_error_has("pass UINT32_MAX"), "overflow message");
	CHECK_OK(aql_printf_add_formats(svc, two, 1, UINT32_MAX));
	CHECK_OK(aql_printf_add_formats(svc, NULL, 0, 0));
	/* NULL entries are holes. */
	{
		const char *holes[] = { NULL, "x\n", NULL };

		CHECK_OK(aql_printf_add_formats(svc, holes, 3, 100));
		CHECK(svc_stats(svc).formats == 4, "%u formats", svc_stats(svc).formats);
	}
	CHECK(aql_printf_attach(svc, NULL) == AQL_ERR_INVALID_ARG, "attach NULL");
	ch = chan_make(16);
	CHECK(aql_printf_detach(svc, ch) == AQL_ERR_NOT_FOUND, "detach unattached");
	CHECK_OK(aql_printf_attach(svc, ch));
	CHECK_OK(aql_printf_attach(svc, ch));
	CHECK_OK(aql_printf_detach(svc, ch));
	CHECK(aql_printf_detach(svc, ch) == AQL_ERR_NOT_FOUND, "detach twice");
	CHECK(aql_printf_format(NULL, "", 0, NULL, 0, NULL) == AQL_ERR_INVALID_ARG, "format NULL");
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
}

/* ---- conversions against snprintf ------------------------------------------ */

struct cmp {
	aql_printf *svc;
	uint32_t next_id;
	unsigned checked, mismatches;
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
static int expect_v(char *out, size_t cap, const char *fmt, va_list ap)
{
	return vsnprintf(out, cap, fmt, ap);
}
#pragma GCC diagnostic pop

static int expect(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = expect_v(out, cap, fmt, ap);
	va_end(ap);
	return n;
}

/* Compare the service's text of b (format fmt) with want (n bytes). */
static void compare(struct cmp *c, const char *fmt, const struct rb *b, const char *want, int n)
{
	static char got[16384];
	size_t len = 0;
	aql_status st = fmt_rec(c->svc, b, got, sizeof(got), &len);

	c->checked++;
	if (st != AQL_OK || n < 0 || len != (size_t)n || memcmp(got, want, len) != 0) {
		if (c->mismatches++ < 10)
			fprintf(stderr, "  format \"%s\": got \"%.*s\" (%s), want \"%.*s\"\n", fmt,
				(int)len, got, st ? aql_error_message() : "ok", n < 0 ? 0 : n, want);
	}
}

static uint32_t add_fmt(struct cmp *c, const char *fmt)
{
	uint32_t id = c->next_id++;

	add1(c->svc, id, fmt);
	return id;
}

static void test_integers(struct cmp *c)
{
	static const char *const lens[] = { "", "hh", "h", "l", "ll", "z", "j", "t" };
	static const char *const widths[] = { "", "1", "12" };
	static const char *const precs[] = { "", ".0", ".5" };
	static const int64_t values[] = {
		0, 1, -1, 42, -42, 127, 128, 255, -129, 65535, 65536, INT32_MAX, INT32_MIN,
		(int64_t)UINT32_MAX, INT64_MAX, INT64_MIN, -1000000007, 0x123456789abLL,
	};
	static char want[16384];
	const char *convs = "diuxXoc";

	for (const char *cv = convs; *cv; cv++)
		for (size_t li = 0; li < 8; li++) {
			int sgn = *cv == 'd' || *cv == 'i' || *cv == 'c', wide = li >= 3;

			if (*cv == 'c' && li)
				continue;
			for (unsigned fl = 0; fl < 32; fl++)
				for (size_t wi = 0; wi < 3; wi++)
					for (size_t pi = 0; pi < 3; pi++) {
						char fmt[64], flags[8], *f = flags;
						uint32_t id;

						for (int k = 0; k < 5; k++)
							if (fl & (1u << k))
								*f++ = "-+ #0"[k];
						*f = 0;
						snprintf(fmt, sizeof(fmt), "<%%%s%s%s%s%c>", flags, widths[wi],
							 precs[pi], lens[li], *cv);
						id = add_fmt(c, fmt);
						for (size_t vi = 0; vi < sizeof(values) / sizeof(values[0]); vi++) {
							int64_t v = values[vi];
							struct rb b;
							int n;

							rb_init(&b, id);
							if (wide) {
								if (sgn)
									rb_i64(&b, v);
								else
									rb_u64(&b, (uint64_t)v);
								n = sgn ? expect(want, sizeof(want), fmt, (long long)v)
									: expect(want, sizeof(want), fmt,
										 (unsigned long long)v);
							} else {
								if (sgn)
									rb_i32(&b, (int32_t)v);
								else
									rb_u32(&b, (uint32_t)v);
								n = sgn ? expect(want, sizeof(want), fmt, (int)(int32_t)v)
									: expect(want, sizeof(want), fmt,
										 (unsigned)(uint32_t)v);
							}
							compare(c, fmt, &b, want, n);
						}
					}
		}
}

/* Flag sets for the floating conversions: each flag, and some together. */
static const char *const float_flags[] = { "", "-", "+", " ", "#", "0", "-+", "+0", " #0", "-#0 +" };

static void test_floats(struct cmp *c)
{
	static const char *const lens[] = { "", "l", "L" };
	static const char *const widths[] = { "", "1", "24" };
	static const char *const precs[] = { "", ".0", ".3", ".17" };
	const double values[] = {
		0.0, -0.0, 1.0, -1.5, 0.1, 2.5, 1e-300, DBL_MIN, DBL_MIN / 4, 3.141592653589793,
		-123456789.125, INFINITY, -INFINITY, NAN, -NAN, 1e21, 9.999e-5,
	};
	/* %f of these prints hundreds of digits: fewer formats. */
	const double huge[] = { 1e300, -DBL_MAX };
	static char want[16384];
	const char *convs = "eEfFgGaA";

	for (const char *cv = convs; *cv; cv++)
		for (size_t li = 0; li < 3; li++)
			for (size_t fl = 0; fl < sizeof(float_flags) / sizeof(float_flags[0]); fl++)
				for (size_t wi = 0; wi < 3; wi++)
					for (size_t pi = 0; pi < 4; pi++) {
						char fmt[64];
						uint32_t id;

						snprintf(fmt, sizeof(fmt), "[%%%s%s%s%s%c]", float_flags[fl],
							 widths[wi], precs[pi], lens[li], *cv);
						id = add_fmt(c, fmt);
						for (size_t vi = 0; vi < sizeof(values) / sizeof(values[0]) + 2; vi++) {
							double v = vi < sizeof(values) / sizeof(values[0])
								   ? values[vi]
								   : huge[vi - sizeof(values) / sizeof(values[0])];
							struct rb b;
							int n;

							if (vi >= sizeof(values) / sizeof(values[0]) &&
							    (fl > 2 || wi == 1 || pi == 1))
								continue;
							rb_init(&b, id);
							rb_f64(&b, v);
							n = li == 2 ? expect(want, sizeof(want), fmt, (long double)v)
								    : expect(want, sizeof(want), fmt, v);
							compare(c, fmt, &b, want, n);
						}
					}
}

static void test_pointers_and_text(struct cmp *c)
{
	static const char *const widths[] = { "", "1", "24" };
	static const uint64_t values[] = { 0, 1, 0x1234, 0x7fffdeadbeef, UINT64_MAX };
	static char want[16384];

	for (unsigned fl = 0; fl < 32; fl++)
		for (size_t wi = 0; wi < 3; wi++) {
			char fmt[64], flags[8], *f = flags;
			uint32_t id;

			for (int k = 0; k < 5; k++)
				if (fl & (1u << k))
					*f++ = "-+ #0"[k];
			*f = 0;
			snprintf(fmt, sizeof(fmt), "p=%%%s%sp.", flags, widths[wi]);
			id = add_fmt(c, fmt);
			for (size_t vi = 0; vi < sizeof(values) / sizeof(values[0]); vi++) {
				struct rb b;

				rb_init(&b, id);
				rb_ptr(&b, values[vi]);
				compare(c, fmt, &b, want,
					expect(want, sizeof(want), fmt, (void *)(uintptr_t)values[vi]));
			}
		}
	/* Text around conversions, %%, several conversions, no conversion. */
	{
		const char *fmt = "100%% of %d is %5.1f%%; %x%c|%-4u|\t\"q\"\n";
		uint32_t id = add_fmt(c, fmt);
		struct rb b;

		rb_init(&b, id);
		rb_i32(&b, -7);
		rb_f64(&b, 99.25);
		rb_u32(&b, 0xbeef);
		rb_i32(&b, '!');
		rb_u32(&b, 12);
		compare(c, fmt, &b, want,
			expect(want, sizeof(want), fmt, -7, 99.25, 0xbeefu, '!', 12u));
		fmt = "plain text, no conversions\n";
		rb_init(&b, add_fmt(c, fmt));
		compare(c, fmt, &b, want, expect(want, sizeof(want), "%s", fmt));
		fmt = "";
		rb_init(&b, add_fmt(c, fmt));
		compare(c, "(empty)", &b, want, 0);
		/* A %c of 0 prints a NUL byte. */
		fmt = "a%cb";
		rb_init(&b, add_fmt(c, fmt));
		rb_i32(&b, 0);
		compare(c, fmt, &b, "a\0b", 3);
		/* The largest width and precision allowed. */
		fmt = "%4096.4096f|";
		rb_init(&b, add_fmt(c, fmt));
		rb_f64(&b, -1e300);
		compare(c, fmt, &b, want, expect(want, sizeof(want), fmt, -1e300));
		/* A 32-bit value for a 64-bit conversion is printed whole. */
		fmt = "%ld %lu %lld %zx";
		rb_init(&b, add_fmt(c, fmt));
		rb_i32(&b, -5);
		rb_u32(&b, 4000000000u);
		rb_i32(&b, INT32_MIN);
		rb_u32(&b, 0xffffffffu);
		compare(c, fmt, &b, want, expect(want, sizeof(want), fmt, -5L, 4000000000UL,
						 (long long)INT32_MIN, (size_t)0xffffffffu));
	}
}

/* '*' widths and precisions taken from the values. */
static void test_stars(struct cmp *c)
{
	static const int widths[] = { -20, -1, 0, 5, 30, 4096, -4096 };
	static const int precs[] = { -3, 0, 4, 40 };
	static char want[16384];
	const char *f1 = "(%*d)", *f2 = "(%-*.*f)", *f3 = "(%.*e)", *f4 = "(%*.*x)";
	uint32_t i1 = add_fmt(c, f1), i2 = add_fmt(c, f2), i3 = add_fmt(c, f3);
	uint32_t i4 = add_fmt(c, f4);

	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++)
		for (size_t p = 0; p < sizeof(precs) / sizeof(precs[0]); p++) {
			struct rb b;

			rb_init(&b, i1);
			rb_i32(&b, widths[w]);
			rb_i32(&b, -12345);
			compare(c, f1, &b, want, expect(want, sizeof(want), f1, widths[w], -12345));
			rb_init(&b, i2);
			rb_i32(&b, widths[w]);
			/* An unsigned int is taken for '*' too. */
			if (precs[p] >= 0)
				rb_u32(&b, (uint32_t)precs[p]);
			else
				rb_i32(&b, precs[p]);
			rb_f64(&b, 2.0 / 3.0);
			compare(c, f2, &b, want, expect(want, sizeof(want), f2, widths[w], precs[p],
							2.0 / 3.0));
			rb_init(&b, i3);
			rb_i32(&b, precs[p]);
			rb_f64(&b, -6.02214076e23);
			compare(c, f3, &b, want, expect(want, sizeof(want), f3, precs[p],
							-6.02214076e23));
			rb_init(&b, i4);
			rb_i32(&b, widths[w]);
			rb_i32(&b, precs[p]);
			rb_u32(&b, 0xabcu);
			compare(c, f4, &b, want, expect(want, sizeof(want), f4, widths[w], precs[p],
							0xabcu));
		}
}

static void test_conversions(void)
{
	struct cmp c = { .svc = svc_make(NULL), .next_id = 1000 };

	test_integers(&c);
	test_floats(&c);
	test_pointers_and_text(&c);
	test_stars(&c);
	CHECK(c.mismatches == 0, "%u of %u records differ from snprintf", c.mismatches,
	      c.checked);
	CHECK(c.checked > 100000, "only %u records compared", c.checked);
	printf("conversions: %u records compared with snprintf, %u formats\n", c.checked,
	       svc_stats(c.svc).formats);
	CHECK_OK(aql_printf_destroy(c.svc));
}

/* ---- diagnostics ------------------------------------------------------------ */

/* The record (data, size) prints exactly want, as a diagnostic. */
static void expect_diag_raw(aql_printf *svc, const void *data, size_t size, const char *want)
{
	char got[1024];
	size_t len = 0;
	aql_status st = aql_printf_format(svc, data, size, got, sizeof(got), &len);
	size_t wl = strlen(want);

	CHECK(st == AQL_ERR_INVALID_ARG, "want a diagnostic \"%s\", got %s", want,
	      aql_status_str(st));
	CHECK(len == strlen(got) && strcmp(got, want) == 0, "got \"%s\"\n    want \"%s\"", got,
	      want);
	/* The message is the line without "[aql printf: " and "]\n". */
	CHECK(wl > 15 && strlen(aql_error_message()) == wl - 15 &&
	      strncmp(aql_error_message(), want + 13, wl - 15) == 0,
	      "message \"%s\" for \"%s\"", aql_error_message(), want);
}

static void expect_diag(aql_printf *svc, const struct rb *b, const char *want)
{
	expect_diag_raw(svc, &b->r, rb_size(b), want);
}

/* A format that cannot be printed: any record using it gets why. */
static void expect_bad_format(aql_printf *svc, uint32_t id, const char *fmt, unsigned values,
			      const char *why)
{
	char want[512];
	struct rb b;

	add1(svc, id, fmt);
	rb_init(&b, id);
	for (unsigned i = 0; i < values; i++)
		rb_i32(&b, 1);
	snprintf(want, sizeof(want), "[aql printf: format %u: %s]\n", id, why);
	expect_diag(svc, &b, want);
}

static void test_diagnostics(void)
{
	aql_printf *svc = svc_make(NULL);
	uint8_t raw[AQL_PRINTF_RECORD_BYTES(AQL_PRINTF_MAX_ARGS) + 8] = { 0 };
	char got[256];
	struct rb b;

	add1(svc, 1, "%d and %f\n");
	add1(svc, 2, "%p\n");
	add1(svc, 3, "%*d|\n");
	add1(svc, 4, "%.*f|\n");
	add1(svc, 5, "%x %c\n");

	/* The record itself. */
	expect_diag_raw(svc, raw, 3,
			"[aql printf: a record of 3 bytes, shorter than its 24-byte header]\n");
	raw[0] = 7;
	expect_diag_raw(svc, raw, 10,
			"[aql printf: format 7: a record of 10 bytes, shorter than its 24-byte header]\n");
	raw[4] = 13;
	expect_diag_raw(svc, raw, sizeof(raw),
			"[aql printf: format 7: the record says 13 arguments; at most 12 fit]\n");
	rb_init(&b, 1);
	rb_i32(&b, 1);
	rb_f64(&b, 2);
	expect_diag_raw(svc, &b.r, rb_size(&b) - 1,
			"[aql printf: format 1: a record of 39 bytes; 2 arguments take 40]\n");
	expect_diag_raw(svc, &b.r, rb_size(&b) + 8,
			"[aql printf: format 1: a record of 48 bytes; 2 arguments take 40]\n");
	b.r.tags[1] = 9;
	expect_diag(svc, &b, "[aql printf: format 1: argument 2 has the unknown type tag 9]\n");
	b.r.tags[1] = 0;
	expect_diag(svc, &b, "[aql printf: format 1: argument 2 has the unknown type tag 0]\n");
	b.r.tags[1] = AQL_PRINTF_TAG_F64;
	b.r.reserved = 5;
	expect_diag(svc, &b, "[aql printf: format 1: the record's reserved word is 0x5, not 0]\n");
	b.r.reserved = 0;
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK && !strcmp(got, "1 and 2.000000\n"),
	      "the repaired record: \"%s\"", got);

	/* Ids and counts. */
	rb_init(&b, 77);
	rb_i32(&b, 1);
	expect_diag(svc, &b, "[aql printf: unknown format 77 (a record of 1 arguments)]\n");
	rb_init(&b, 1);
	rb_i32(&b, 1);
	expect_diag(svc, &b, "[aql printf: format 1 reads 2 arguments; the record has 1]\n");
	rb_f64(&b, 1);
	rb_f64(&b, 1);
	expect_diag(svc, &b, "[aql printf: format 1 reads 2 arguments; the record has 3]\n");
	rb_init(&b, 2);
	expect_diag(svc, &b, "[aql printf: format 2 reads 1 argument; the record has 0]\n");

	/* Types. */
	rb_init(&b, 1);
	rb_f64(&b, 1);
	rb_f64(&b, 2);
	expect_diag(svc, &b, "[aql printf: format 1: argument 1 is a double, %d wants an integer]\n");
	rb_init(&b, 1);
	rb_i64(&b, 1);
	rb_f64(&b, 2);
	expect_diag(svc, &b,
		    "[aql printf: format 1: argument 1 is a 64-bit integer, %d wants an int (32 bits; use %l for 64)]\n");
	rb_init(&b, 1);
	rb_i32(&b, 1);
	rb_u32(&b, 2);
	expect_diag(svc, &b,
		    "[aql printf: format 1: argument 2 is a 32-bit unsigned integer, %f wants a double]\n");
	rb_init(&b, 1);
	rb_ptr(&b, 1);
	rb_f64(&b, 2);
	expect_diag(svc, &b, "[aql printf: format 1: argument 1 is a pointer, %d wants an integer]\n");
	rb_init(&b, 2);
	rb_u64(&b, 0x1000);
	expect_diag(svc, &b,
		    "[aql printf: format 2: argument 1 is a 64-bit unsigned integer, %p wants a pointer]\n");
	rb_init(&b, 5);
	rb_u32(&b, 1);
	rb_f64(&b, 65);
	expect_diag(svc, &b,
		    "[aql printf: format 5: argument 2 is a double, %c wants an integer (a character)]\n");
	rb_init(&b, 3);
	rb_f64(&b, 5);
	rb_i32(&b, 1);
	expect_diag(svc, &b,
		    "[aql printf: format 3: argument 1 (the width of %*d) is a double; '*' wants an int]\n");
	rb_init(&b, 3);
	rb_i64(&b, 5);
	rb_i32(&b, 1);
	expect_diag(svc, &b,
		    "[aql printf: format 3: argument 1 (the width of %*d) is a 64-bit integer; '*' wants an int]\n");
	rb_init(&b, 3);
	rb_i32(&b, 4097);
	rb_i32(&b, 1);
	expect_diag(svc, &b,
		    "[aql printf: format 3: argument 1 (the width of %*d) is 4097, beyond the limit of 4096]\n");
	rb_init(&b, 3);
	rb_i32(&b, INT32_MIN);
	rb_i32(&b, 1);
	expect_diag(svc, &b,
		    "[aql printf: format 3: argument 1 (the width of %*d) is -2147483648, beyond the limit of 4096]\n");
	rb_init(&b, 4);
	rb_u32(&b, 3000000000u);
	rb_f64(&b, 1);
	expect_diag(svc, &b,
		    "[aql printf: format 4: argument 1 (the precision of %.*f) is 3000000000, beyond the limit of 4096]\n");
	rb_init(&b, 4);
	rb_i32(&b, 2);
	rb_i32(&b, 1);
	expect_diag(svc, &b, "[aql printf: format 4: argument 2 is a 32-bit integer, %.*f wants a double]\n");

	/* Formats the service cannot print. */
	expect_bad_format(svc, 10, "name %s\n", 1,
			  "%s is not supported: strings cannot be sent from the device (in \"%s\")");
	expect_bad_format(svc, 11, "%d%n\n", 2,
			  "%n is not supported: the device has nothing to store the count in (in \"%n\")");
	expect_bad_format(svc, 12, "%-8s|", 1,
			  "%s is not supported: strings cannot be sent from the device (in \"%-8s\")");
	expect_bad_format(svc, 13, "%lc", 1, "%lc (a wide character) is not supported (in \"%lc\")");
	expect_bad_format(svc, 14, "%y", 1, "unknown conversion 'y' (in \"%y\")");
	expect_bad_format(svc, 15, "%1$d", 1,
			  "positional arguments (n$) are not supported (in \"%1$\")");
	expect_bad_format(svc, 16, "50%", 0, "the format ends inside a conversion (in \"%\")");
	expect_bad_format(svc, 17, "%-5.", 0, "the format ends inside a conversion (in \"%-5.\")");
	expect_bad_format(svc, 18, "%5%", 0,
			  "%% takes no flags, width, precision or length (in \"%5%\")");
	expect_bad_format(svc, 19, "%5000d", 1,
			  "a width of 5000 is above the limit of 4096 (in \"%5000\")");
	expect_bad_format(svc, 20, "%.99999999999f", 1,
			  "a precision of 99999999999 is above the limit of 4096 (in \"%.99999999999\")");
	expect_bad_format(svc, 21, "%Ld", 1, "length modifier 'L' does not apply to %d (in \"%Ld\")");
	expect_bad_format(svc, 22, "%hf", 1, "length modifier 'h' does not apply to %f (in \"%hf\")");
	expect_bad_format(svc, 23, "%lp", 1, "length modifier 'l' does not apply to %p (in \"%lp\")");
	expect_bad_format(svc, 24, "%hhc", 1,
			  "length modifier 'hh' does not apply to %c (in \"%hhc\")");
	expect_bad_format(svc, 25, "%\001", 1, "unknown conversion '\\x01' (in \"%\\x01\")");
	expect_bad_format(svc, 26, "%d %d %d %d %d %d %d %d %d %d %d %d %d", 12,
			  "the format reads 13 values; a record carries at most 12");
	/* The first problem is the one reported. */
	expect_bad_format(svc, 27, "%s %n", 2,
			  "%s is not supported: strings cannot be sent from the device (in \"%s\")");
	/* Control characters in a quoted conversion stay on one line. */
	expect_bad_format(svc, 28, "%\n", 0, "unknown conversion '\\x0a' (in \"%\\n\")");
	CHECK_OK(aql_printf_destroy(svc));
}

/* Diagnostics in the output: counted, and the records after them print. */
/* Records that carry their format (AQL_PRINTF_INLINE), built by hand. */
static void test_inline_formats(void)
{
	aql_printf *svc = svc_make(NULL);
	unsigned char rec[sizeof(aql_printf_record) + AQL_PRINTF_MAX_FORMAT + 8];
	char got[512];
	size_t len = 0, at;
	struct rb b;

	rb_init(&b, AQL_PRINTF_INLINE);
	rb_i32(&b, -3);
	rb_f64(&b, 0.5);
	at = rb_size(&b);
	memcpy(rec, &b.r, at);
	memcpy(rec + at, "%d and %.2f\n", 13);
	CHECK(aql_printf_format(svc, rec, at + 13, got, sizeof(got), &len) == AQL_OK &&
	      !strcmp(got, "-3 and 0.50\n"), "inline: \"%s\"", got);
	/* The table is not asked: an id of UINT32_MAX is the inline one. */
	add1(svc, AQL_PRINTF_INLINE, "table %d %f\n");
	CHECK(aql_printf_format(svc, rec, at + 13, got, sizeof(got), &len) == AQL_OK &&
	      !strcmp(got, "-3 and 0.50\n"), "inline beside a table entry: \"%s\"", got);
	memcpy(rec + at, "%d %d\n", 7);
	expect_diag_raw(svc, rec, at + 7,
			"[aql printf: format 4294967295: argument 2 is a double, %d wants an integer]\n");
	memset(rec + at, 'a', AQL_PRINTF_MAX_FORMAT);
	expect_diag_raw(svc, rec, at + AQL_PRINTF_MAX_FORMAT,
			"[aql printf: an inline format of 256 bytes without its NUL (at most 256 with it)]\n");
	memcpy(rec + at, "x\n\0zz", 5);
	expect_diag_raw(svc, rec, at + 5,
			"[aql printf: an inline format of 2 bytes and 2 more after its NUL]\n");
	CHECK_OK(aql_printf_destroy(svc));
}

static void test_diagnostics_in_output(void)
{
	int fd = memfd("diag");
	aql_printf_config c = { .output = AQL_PRINTF_FD, .fd = fd, .formats = test_formats,
				.format_count = PF_COUNT };
	aql_printf *svc = svc_make(&c);
	aql_channel *ch = chan_make(64);
	uint64_t dev = aql_channel_device_address(ch);
	aql_printf_record bad = { .format_id = PF_SEQ, .arg_count = 1,
				  .tags = { AQL_PRINTF_TAG_F64 } };
	const char *want = "wi 1 seq 2\n"
			   "[aql printf: format 0 reads 2 arguments; the record has 1]\n"
			   "[aql printf: unknown format 99 (a record of 0 arguments)]\n"
			   "[aql printf: a record of 2 bytes, shorter than its 24-byte header]\n"
			   "wi 3 seq 4\n";
	aql_printf_record unknown = { .format_id = 99 };
	struct rb good;
	aql_printf_stats s;
	uint32_t got = 0;
	size_t len;
	char *text;

	CHECK_OK(aql_printf_attach(svc, ch));
	rb_init(&good, PF_SEQ);
	rb_u32(&good, 1);
	rb_u32(&good, 2);
	CHECK(pf_host_send_raw(dev, &good.r, rb_size(&good)) == 0, "send");
	CHECK(pf_host_send_raw(dev, &bad, AQL_PRINTF_RECORD_BYTES(1)) == 0,
	      "send");
	CHECK(pf_host_send_raw(dev, &unknown, AQL_PRINTF_HEADER_BYTES) == 0,
	      "send");
	CHECK(pf_host_send_raw(dev, "xy", 2) == 0, "send");
	good.r.args[0] = 3;
	good.r.args[1] = 4;
	CHECK(pf_host_send_raw(dev, &good.r, rb_size(&good)) == 0, "send");
	CHECK_OK(aql_channel_drain(ch, 0, NULL, NULL, &got));
	CHECK(got == 5, "drained %u", got);
	CHECK_OK(aql_printf_flush(svc));
	text = contents(fd, &len);
	CHECK(len == strlen(want) && !strcmp(text, want), "output:\n%s", text);
	s = svc_stats(svc);
	CHECK(s.records == 5 && s.errors == 3 && s.bytes == strlen(want),
	      "records %llu errors %llu bytes %llu", (unsigned long long)s.records,
	      (unsigned long long)s.errors, (unsigned long long)s.bytes);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
	close(fd);
}

/* ---- amdhsa.printf ---------------------------------------------------------- */

static void test_metadata(void)
{
	const char *ok[] = {
		"1:2:4:4:x = %d, id = %u\\n",
		"2:0:a\\72b\\72c 100%%\\n",
		"3:1:8:raw: colon %f\\n",
		"0:0:deadbeefcafef00d,hip buffered %d",
		"0:0:ffffffff,\"Non const format string\"",
		"4:1:4:\\a\\b\\f\\r\\v\\q\\\\%d\\7",
		"5:0:",
		"4294967295:1:8:max %lu",
		"6:3:4:4:4:%d",	/* fewer conversions than sizes: the record decides */
	};
	aql_metadata md = { .printf_count = sizeof(ok) / sizeof(ok[0]), .printf_formats = ok };
	static const struct {
		const char *entry, *needle;
	} bad[] = {
		{ "x:1:4:%d", "entry 1 \"x:1:4:%d\": no decimal id followed by ':'" },
		{ "12", "entry 1 \"12\": no decimal id followed by ':'" },
		{ "4294967296:0:%d", "no decimal id followed by ':'" },
		{ "9:", "entry 1 \"9:\": no decimal count of argument sizes followed by ':'" },
		{ "9:2:4:x%d", "it says 2 argument sizes, and size 2 is not a decimal number followed by ':'" },
		{ "9:4000000000:4:", "it says 4000000000 argument sizes, and size 2 is not" },
		{ "9:1:-4:%d", "size 1 is not a decimal number" },
	};
	aql_printf *svc = svc_make(NULL);
	char got[256];
	struct rb b;

	CHECK_OK(aql_printf_add_metadata(svc, &md));
	CHECK(svc_stats(svc).formats == 7, "%u formats", svc_stats(svc).formats);
	rb_init(&b, 1);
	rb_i32(&b, -3);
	rb_u32(&b, 9);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK && !strcmp(got, "x = -3, id = 9\n"),
	      "entry 1: \"%s\"", got);
	/* Cut to the buffer, NUL-terminated; the length is the whole text's. */
	{
		size_t len = 0;

		memset(got, 'z', sizeof(got));
		CHECK(fmt_rec(svc, &b, got, 5, &len) == AQL_OK && !strcmp(got, "x = ") && len == 15,
		      "cut: \"%.8s\", %zu", got, len);
		CHECK(fmt_rec(svc, &b, NULL, 0, &len) == AQL_OK && len == 15, "length only: %zu", len);
	}
	rb_init(&b, 2);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK && !strcmp(got, "a:b:c 100%\n"),
	      "entry 2: \"%s\"", got);
	rb_init(&b, 3);
	rb_f64(&b, 0.5);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK &&
	      !strcmp(got, "raw: colon 0.500000\n"), "entry 3: \"%s\"", got);
	rb_init(&b, 4);
	rb_i32(&b, 8);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK &&
	      !strcmp(got, "\a\b\f\r\v\\q\\\\8\\7"), "entry 4: \"%s\"", got);
	rb_init(&b, 5);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK && !strcmp(got, ""),
	      "entry 5: \"%s\"", got);
	rb_init(&b, UINT32_MAX);
	rb_u64(&b, 7);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK && !strcmp(got, "max 7"),
	      "entry max: \"%s\"", got);
	rb_init(&b, 6);
	rb_i32(&b, 6);
	CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK && !strcmp(got, "6"),
	      "entry 6: \"%s\"", got);
	/* HIP's hash-keyed entries were skipped: id 0 is unknown. */
	rb_init(&b, 0);
	rb_i32(&b, 1);
	expect_diag(svc, &b, "[aql printf: unknown format 0 (a record of 1 arguments)]\n");
	/* The same metadata again: the same strings, nothing changes. */
	CHECK_OK(aql_printf_add_metadata(svc, &md));
	CHECK(svc_stats(svc).formats == 7, "%u formats", svc_stats(svc).formats);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *two[] = { "50:0:fine", bad[i].entry };
		aql_metadata m = { .printf_count = 2, .printf_formats = two };

		CHECK(aql_printf_add_metadata(svc, &m) == AQL_ERR_INVALID_CODE_OBJECT, "bad %zu", i);
		CHECK(th_error_has(bad[i].needle), "bad %zu", i);
		/* All or nothing: entry 0 was not added either. */
		rb_init(&b, 50);
		expect_diag(svc, &b, "[aql printf: unknown format 50 (a record of 0 arguments)]\n");
	}
	{
		const char *conflict[] = { "60:0:sixty", "1:0:not x\\n" };
		const char *twice[] = { "61:0:one", "61:0:two" };
		const char *dup[] = { "62:0:same", "62:0:same" };
		const char *null_entry[] = { NULL };
		aql_metadata m = { .printf_count = 2, .printf_formats = conflict };

		CHECK(aql_printf_add_metadata(svc, &m) == AQL_ERR_INVALID_ARG, "conflict");
		CHECK(th_error_has("printf format 1: \"not x\\n\" (amdhsa.printf entry 1) conflicts with \"x = %d, id = %u\\n\" (already registered)"),
		      "conflict message");
		rb_init(&b, 60);
		expect_diag(svc, &b, "[aql printf: unknown format 60 (a record of 0 arguments)]\n");
		m.printf_formats = twice;
		CHECK(aql_printf_add_metadata(svc, &m) == AQL_ERR_INVALID_ARG, "conflict within");
		CHECK(th_error_has("printf format 61: \"two\" (amdhsa.printf entry 1) conflicts with \"one\" (amdhsa.printf entry 0)"),
		      "conflict within message");
		m.printf_formats = dup;
		CHECK_OK(aql_printf_add_metadata(svc, &m));
		m.printf_count = 1;
		m.printf_formats = null_entry;
		CHECK(aql_printf_add_metadata(svc, &m) == AQL_ERR_INVALID_CODE_OBJECT, "NULL entry");
		m.printf_formats = NULL;
		CHECK(aql_printf_add_metadata(svc, &m) == AQL_ERR_INVALID_ARG, "NULL array");
		CHECK(aql_printf_add_metadata(svc, NULL) == AQL_ERR_INVALID_ARG, "NULL md");
		CHECK(aql_printf_add_code_object(svc, NULL) == AQL_ERR_INVALID_ARG, "NULL co");
	}
	CHECK_OK(aql_printf_destroy(svc));
}

/* tests/co's code objects: with_printf's "x = %d, id = %u\n" is id 1. */
static void test_code_objects(void)
{
	unsigned used = 0;

	for (unsigned i = 0; i < co_count; i++) {
		aql_printf *svc = svc_make(NULL);
		aql_code_object *co = NULL;
		const aql_metadata *md;
		size_t size;
		void *image = th_read_file(co_paths[i], &size);
		char got[128];
		struct rb b;

		CHECK_OK(aql_code_object_open(image, size, &co));
		free(image);
		if (!co)
			continue;
		md = aql_code_object_get_info(co)->metadata;
		CHECK(md->printf_count == 1, "%s: %u printf strings", co_paths[i], md->printf_count);
		CHECK_OK(aql_printf_add_code_object(svc, co));
		rb_init(&b, 1);
		rb_i32(&b, 42);
		rb_u32(&b, 7);
		CHECK(fmt_rec(svc, &b, got, sizeof(got), NULL) == AQL_OK &&
		      !strcmp(got, "x = 42, id = 7\n"), "%s: \"%s\"", co_paths[i], got);
		/* Two builds of one source share their strings. */
		CHECK_OK(aql_printf_add_code_object(svc, co));
		aql_code_object_destroy(co);
		CHECK_OK(aql_printf_destroy(svc));
		used++;
	}
	printf("amdhsa.printf: %u code objects from tests/co%s\n", used,
	       used ? "" : " (none built here)");
}

/* ---- what AQL_PRINTF() sends ------------------------------------------------ */

struct captured {
	uint8_t data[4][AQL_PRINTF_RECORD_BYTES(AQL_PRINTF_MAX_ARGS)];
	uint32_t size[4], kind[4], n;
};

static int capture(const aql_channel_msg *m, void *ctx)
{
	struct captured *c = ctx;

	if (c->n < 4 && m->size <= sizeof(c->data[0])) {
		memcpy(c->data[c->n], m->data, m->size);
		c->size[c->n] = m->size;
		c->kind[c->n] = m->kind;
	}
	c->n++;
	return 0;
}

static void test_tags(void)
{
	static const uint8_t tags100[12] = {
		AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_I32,
		AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_I32, AQL_PRINTF_TAG_U32,
		AQL_PRINTF_TAG_I64, AQL_PRINTF_TAG_U64, AQL_PRINTF_TAG_I64, AQL_PRINTF_TAG_U64,
	};
	static const uint64_t vals100[12] = {
		(uint64_t)-1, (uint64_t)-2, 250, (uint64_t)-3, 65535, 1, (uint64_t)-4,
		4000000000u, (uint64_t)-5, 6, (uint64_t)-7, 8,
	};
	aql_channel *ch = chan_make(16);
	struct captured cap = { 0 };
	aql_printf_record r;
	volatile int target = 5;
	int counter = 0;
	double d;

	CHECK(pf_host_tags(aql_channel_device_address(ch), &target, &counter) == 0, "sends");
	CHECK(counter == 1, "(*counter)++ evaluated %d times", counter);
	CHECK_OK(aql_channel_drain(ch, 0, capture, &cap, NULL));
	CHECK(cap.n == 3, "%u records", cap.n);
	if (cap.n != 3) {
		CHECK_OK(aql_channel_destroy(ch));
		return;
	}
	for (int i = 0; i < 3; i++)
		CHECK(cap.kind[i] == AQL_CHANNEL_KIND_PRINTF, "record %d kind %u", i, cap.kind[i]);
	memcpy(&r, cap.data[0], sizeof(r));
	CHECK(cap.size[0] == AQL_PRINTF_RECORD_BYTES(12) && r.format_id == 100 && r.arg_count == 12 &&
	      r.reserved == 0, "record 100: %u bytes, id %u, %u values", cap.size[0], r.format_id,
	      r.arg_count);
	for (int i = 0; i < 12; i++)
		CHECK(r.tags[i] == tags100[i] && r.args[i] == vals100[i],
		      "record 100 value %d: tag %u bits 0x%llx", i, r.tags[i],
		      (unsigned long long)r.args[i]);
	memset(&r, 0, sizeof(r));
	memcpy(&r, cap.data[1], cap.size[1]);
	CHECK(cap.size[1] == AQL_PRINTF_RECORD_BYTES(5) && r.format_id == 101 && r.arg_count == 5,
	      "record 101: %u bytes, %u values", cap.size[1], r.arg_count);
	CHECK(r.tags[0] == AQL_PRINTF_TAG_F64 && r.tags[1] == AQL_PRINTF_TAG_F64 &&
	      r.tags[2] == AQL_PRINTF_TAG_PTR && r.tags[3] == AQL_PRINTF_TAG_PTR &&
	      r.tags[4] == AQL_PRINTF_TAG_I32, "record 101 tags %u %u %u %u %u", r.tags[0],
	      r.tags[1], r.tags[2], r.tags[3], r.tags[4]);
	memcpy(&d, &r.args[0], sizeof(d));
	CHECK(d == 1.5, "float promoted: %g", d);
	memcpy(&d, &r.args[1], sizeof(d));
	CHECK(d == -2.25, "double: %g", d);
	CHECK(r.args[2] == 0 && r.args[3] == (uint64_t)(uintptr_t)&target && r.args[4] == 0,
	      "pointers 0x%llx 0x%llx, counter %llu", (unsigned long long)r.args[2],
	      (unsigned long long)r.args[3], (unsigned long long)r.args[4]);
	for (int i = 5; i < 12; i++)
		CHECK(r.tags[i] == 0, "unused tag %d is %u", i, r.tags[i]);
	memcpy(&r, cap.data[2], AQL_PRINTF_HEADER_BYTES);
	CHECK(cap.size[2] == AQL_PRINTF_HEADER_BYTES && r.format_id == 102 && r.arg_count == 0,
	      "record 102: %u bytes", cap.size[2]);
	CHECK_OK(aql_channel_destroy(ch));
}

/* ---- output ----------------------------------------------------------------- */

/* The lines "wi P seq I\n" for producers [first, first + producers) and I < count. */
static char *seq_text(uint32_t first, uint32_t producers, uint32_t count, size_t *len)
{
	size_t cap = (size_t)producers * count * 32 + 1, n = 0;
	char *text = malloc(cap);

	if (!text)
		exit(1);
	for (uint32_t p = first; p < first + producers; p++)
		for (uint32_t i = 0; i < count; i++)
			n += (size_t)snprintf(text + n, cap - n, "wi %u seq %u\n", p, i);
	*len = n;
	return text;
}

/* Parse the decimal at *p (advanced), below end; -1 if there is none. */
static int64_t decimal(const char **p, const char *end)
{
	int64_t v = 0;
	const char *q = *p;

	while (q < end && *q >= '0' && *q <= '9' && v < UINT32_MAX)
		v = v * 10 + (*q++ - '0');
	if (q == *p)
		return -1;
	*p = q;
	return v;
}

/* Whether the len bytes at p start with the string s (advanced past it). */
static int literal(const char **p, const char *end, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(end - *p) < n || memcmp(*p, s, n))
		return 0;
	*p += n;
	return 1;
}

/*
 * Check that text is exactly the lines "wi P seq I\n" for P < producers,
 * I < count, each producer's in order; returns the number of faults.
 */
static unsigned check_seq(const char *what, const char *text, size_t len, uint32_t producers,
			  uint32_t count)
{
	uint32_t *next = calloc(producers, sizeof(*next));
	unsigned faults = 0, lines = 0;
	const char *p = text, *end = text + len;

	if (!next)
		exit(1);
	while (p < end) {
		const char *line = p, *nl = memchr(p, '\n', (size_t)(end - p));
		int64_t w = -1, q = -1;

		if (literal(&p, end, "wi ") && (w = decimal(&p, end)) >= 0 &&
		    literal(&p, end, " seq ") && (q = decimal(&p, end)) >= 0 &&
		    literal(&p, end, "\n") && w < producers && q == next[w]) {
			next[w]++;
		} else {
			if (faults++ < 5)
				fprintf(stderr, "  %s: line %u is \"%.*s\"\n", what, lines,
					(int)((nl ? nl : end) - line), line);
			p = nl ? nl + 1 : end;
		}
		lines++;
	}
	for (uint32_t w = 0; w < producers; w++)
		if (next[w] != count && faults++ < 10)
			fprintf(stderr, "  %s: producer %u printed %u of %u\n", what, w, next[w], count);
	free(next);
	CHECK(faults == 0, "%s: %u faults in %u lines", what, faults, lines);
	return faults;
}

/* Send records from the host and drain them: n records of producer 0. */
static void send_and_drain(aql_channel *ch, uint32_t producer, uint32_t n)
{
	uint32_t got = 0;

	CHECK(pf_host_seq(aql_channel_device_address(ch), producer, n) == 0, "sends");
	CHECK_OK(aql_channel_drain(ch, 0, NULL, NULL, &got));
	CHECK(got == n, "drained %u of %u", got, n);
}

static void test_stdio(void)
{
	FILE *f = tmpfile();
	aql_printf_config c = { .output = AQL_PRINTF_STREAM, .stream = f, .formats = test_formats,
				.format_count = PF_COUNT };
	aql_printf *svc;
	aql_channel *ch = chan_make(1024);
	aql_printf_stats s;
	size_t len, wl;
	char *text, *want = seq_text(0, 1, 300, &wl);

	if (!f) {
		CHECK(0, "tmpfile: %s", strerror(errno));
		return;
	}
	svc = svc_make(&c);
	CHECK_OK(aql_printf_attach(svc, ch));
	send_and_drain(ch, 0, 300);
	CHECK_OK(aql_printf_flush(svc));
	text = contents(fileno(f), &len);
	CHECK(len == wl && !memcmp(text, want, wl), "stdio output of %zu bytes, want %zu", len, wl);
	s = svc_stats(svc);
	CHECK(s.method == AQL_PRINTF_METHOD_STDIO && s.records == 300 && s.bytes == wl &&
	      s.writes == 0 && s.errors == 0, "stats: method %d records %llu bytes %llu", s.method,
	      (unsigned long long)s.records, (unsigned long long)s.bytes);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
	fclose(f);
	free(want);
}

/*
 * io_uring into a file: a drain's text is written at its end, in one
 * write (the channel calls the handler with NULL when a drain ends); a
 * full buffer is written before.
 */
static void test_uring_file(void)
{
	int fd = memfd("uring");
	aql_printf_config c = { .output = AQL_PRINTF_FD, .fd = fd, .formats = test_formats,
				.format_count = PF_COUNT, .buffer_size = 4096 };
	aql_printf *svc = svc_make(&c);
	aql_channel *ch = chan_make(4096);
	aql_printf_stats s = svc_stats(svc);
	size_t len, wl, first;
	char *text, *want = seq_text(0, 1, 3000, &wl);

	free(seq_text(0, 1, 100, &first));
	CHECK(s.method == AQL_PRINTF_METHOD_URING, "method %d", s.method);
	CHECK_OK(aql_printf_attach(svc, ch));
	/*
	 * 100 records: 1190 bytes, less than a buffer. The drain's end
	 * submits them in one write, which completes in the background.
	 */
	send_and_drain(ch, 0, 100);
	s = svc_stats(svc);
	CHECK(s.writes == 1, "after one drain: %llu writes", (unsigned long long)s.writes);
	for (uint64_t t0 = th_now_ns(); (text = contents(fd, &len)) && len < first &&
					 th_now_ns() - t0 < TH_TIMEOUT_NS; free(text))
		th_sleep_ms(1);
	CHECK(len == first && !memcmp(text, want, len), "after one drain: %zu bytes in the file",
	      len);
	free(text);
	/* An empty drain writes nothing. */
	CHECK_OK(aql_channel_drain(ch, 0, NULL, NULL, NULL));
	CHECK(svc_stats(svc).writes == s.writes, "empty drain wrote");
	/* 2900 more, in one drain: 4 KiB buffers fill and go out before its end. */
	CHECK(pf_host_seq(aql_channel_device_address(ch), 0, 3000) == 0, "sends");
	CHECK_OK(aql_channel_drain(ch, 0, NULL, NULL, NULL));
	CHECK_OK(aql_printf_flush(svc));
	s = svc_stats(svc);
	text = contents(fd, &len);
	/* The first 100 went out twice over: the file holds both runs. */
	CHECK(len == first + wl && !memcmp(text, want, first) && !memcmp(text + first, want, wl),
	      "file of %zu bytes, want %zu", len, first + wl);
	CHECK(s.bytes == len && s.writes >= wl / 4096 + 1 && s.write_errors == 0,
	      "bytes %llu writes %llu errors %llu", (unsigned long long)s.bytes,
	      (unsigned long long)s.writes, (unsigned long long)s.write_errors);
	free(text);
	free(want);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
	close(fd);
}

struct reader {
	int fd;
	unsigned delay_us;	/* between reads */
	size_t chunk;
	char *buf;
	size_t len, cap;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;

	for (;;) {
		ssize_t n;

		if (r->len + r->chunk > r->cap) {
			r->cap = (r->cap + r->chunk) * 2;
			r->buf = realloc(r->buf, r->cap);
			if (!r->buf)
				exit(1);
		}
		n = read(r->fd, r->buf + r->len, r->chunk);
		if (n > 0)
			r->len += (size_t)n;
		else if (n == 0 || errno != EINTR)
			break;
		if (r->delay_us)
			usleep(r->delay_us);
	}
	return NULL;
}

/*
 * A pipe read slowly by another thread: a small pipe fills, writes come
 * back short (blocking) or EAGAIN (O_NONBLOCK) and are finished later.
 */
static void test_pipe(unsigned flags, int nonblock)
{
	int p[2];
	aql_printf_config c = { .output = AQL_PRINTF_FD, .formats = test_formats,
				.format_count = PF_COUNT, .flags = flags };
	struct reader r = { .delay_us = 200, .chunk = 1500 };
	aql_printf *svc;
	aql_channel *ch = chan_make(1024);
	pthread_t t;
	aql_printf_stats s;
	size_t wl;
	char *want = seq_text(0, 1, 20000, &wl), what[64];

	if (pipe2(p, O_CLOEXEC) != 0) {
		CHECK(0, "pipe: %s", strerror(errno));
		return;
	}
	fcntl(p[1], F_SETPIPE_SZ, 4096);
	if (nonblock)
		fcntl(p[1], F_SETFL, fcntl(p[1], F_GETFL) | O_NONBLOCK);
	c.fd = p[1];
	r.fd = p[0];
	svc = svc_make(&c);
	CHECK_OK(aql_printf_attach(svc, ch));
	pthread_create(&t, NULL, read_all, &r);
	for (uint32_t i = 0; i < 20000; i += 500) {
		/* 500 records of producer 0, numbered on. */
		uint64_t dev = aql_channel_device_address(ch);
		struct rb b;

		for (uint32_t k = i; k < i + 500; k++) {
			rb_init(&b, PF_SEQ);
			rb_u32(&b, 0);
			rb_u32(&b, k);
			CHECK(pf_host_send_raw(dev, &b.r, rb_size(&b)) == 0,
			      "send");
		}
		CHECK_OK(aql_channel_drain(ch, 0, NULL, NULL, NULL));
	}
	CHECK_OK(aql_printf_flush(svc));
	s = svc_stats(svc);
	CHECK_OK(aql_printf_destroy(svc));
	close(p[1]);
	pthread_join(t, NULL);
	close(p[0]);
	snprintf(what, sizeof(what), "pipe%s, %s", nonblock ? " (O_NONBLOCK)" : "",
		 flags ? "write(2)" : "io_uring");
	CHECK(r.len == wl && !memcmp(r.buf, want, wl), "%s: read %zu bytes, want %zu", what, r.len,
	      wl);
	CHECK(s.bytes == wl && s.write_errors == 0 &&
	      s.method == (flags ? AQL_PRINTF_METHOD_WRITE : AQL_PRINTF_METHOD_URING),
	      "%s: bytes %llu errors %llu method %d", what, (unsigned long long)s.bytes,
	      (unsigned long long)s.write_errors, s.method);
	/* The 4 KiB pipe took each 64 KiB buffer in pieces. */
	CHECK(s.writes > wl / 4096, "%s: %llu writes", what, (unsigned long long)s.writes);
	check_seq(what, r.buf, r.len, 1, 20000);
	free(r.buf);
	free(want);
	CHECK_OK(aql_channel_destroy(ch));
}

static void test_pipe_uring(void)
{
	test_pipe(0, 0);
}

static void test_pipe_uring_nonblock(void)
{
	test_pipe(0, 1);
}

static void test_pipe_write_nonblock(void)
{
	test_pipe(AQL_PRINTF_NO_URING, 1);
}

/* The write(2) fallback: asked for, or because io_uring is unavailable. */
static void test_write_fallback(void)
{
	int fd = memfd("write"), err = memfd("stderr"), saved;
	aql_printf_config c = { .output = AQL_PRINTF_FD, .fd = fd, .formats = test_formats,
				.format_count = PF_COUNT, .flags = AQL_PRINTF_NO_URING };
	aql_printf *svc;
	aql_channel *ch = chan_make(1024);
	aql_printf_stats s;
	size_t len, wl;
	char *text, *want = seq_text(7, 1, 200, &wl), notice[160];

	/* Asked for: no notice. */
	fflush(stderr);
	saved = dup(2);
	dup2(err, 2);
	svc = svc_make(&c);
	fflush(stderr);
	dup2(saved, 2);
	text = contents(err, &len);
	CHECK(len == 0, "a notice for AQL_PRINTF_NO_URING: %s", text);
	free(text);
	CHECK_OK(aql_printf_attach(svc, ch));
	send_and_drain(ch, 7, 200);
	text = contents(fd, &len);
	s = svc_stats(svc);
	/* write(2) at the end of the drain, without a flush. */
	CHECK(s.method == AQL_PRINTF_METHOD_WRITE && s.writes == 1 && len == wl &&
	      !memcmp(text, want, wl), "method %d writes %llu, %zu bytes", s.method,
	      (unsigned long long)s.writes, len);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));

	/* io_uring unavailable: one line on stderr says so. */
	setenv("AQL_PRINTF_NO_URING", "1", 1);
	c.flags = 0;
	fflush(stderr);
	dup2(err, 2);
	svc = svc_make(&c);
	unsetenv("AQL_PRINTF_NO_URING");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	text = contents(err, &len);
	snprintf(notice, sizeof(notice),
		 "aql: printf output to fd %d: io_uring unavailable (AQL_PRINTF_NO_URING is set); using write(2)\n",
		 fd);
	CHECK(!strcmp(text, notice), "notice \"%s\"", text);
	free(text);
	s = svc_stats(svc);
	CHECK(s.method == AQL_PRINTF_METHOD_WRITE, "method %d", s.method);
	CHECK_OK(aql_printf_attach(svc, ch));
	send_and_drain(ch, 7, 200);
	CHECK_OK(aql_printf_flush(svc));
	text = contents(fd, &len);
	CHECK(len == 2 * wl && !memcmp(text + wl, want, wl), "%zu bytes", len);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
	close(fd);
	close(err);
	free(want);
}

/* A pipe nobody reads: the writes fail, are counted, and flush says so. */
static void test_write_errors(void)
{
	static const enum aql_printf_output outs[] = { AQL_PRINTF_FD, AQL_PRINTF_FD,
						       AQL_PRINTF_STREAM };
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);

	for (int i = 0; i < 3; i++) {
		aql_printf_config c = { .output = outs[i], .formats = test_formats,
					.format_count = PF_COUNT,
					.flags = i == 1 ? AQL_PRINTF_NO_URING : 0 };
		aql_channel *ch = chan_make(1024);
		aql_printf *svc;
		FILE *f = NULL;
		aql_printf_stats s;
		aql_status st;
		char needle[64];
		int p[2];

		if (pipe2(p, O_CLOEXEC) != 0)
			exit(1);
		close(p[0]);
		c.fd = p[1];
		if (outs[i] == AQL_PRINTF_STREAM)
			c.stream = f = fdopen(p[1], "w");
		svc = svc_make(&c);
		CHECK_OK(aql_printf_attach(svc, ch));
		send_and_drain(ch, 0, 100);
		st = aql_printf_flush(svc);
		CHECK(st == AQL_ERR_SYSTEM, "case %d: flush gave %s", i, aql_status_str(st));
		if (f)
			snprintf(needle, sizeof(needle), "its stdio stream: 1 writes failed, the first: %s",
				 strerror(EPIPE));
		else
			snprintf(needle, sizeof(needle), "fd %d: 1 writes failed, the first: %s", p[1],
				 strerror(EPIPE));
		CHECK(th_error_has(needle), "case %d", i);
		s = svc_stats(svc);
		CHECK(s.write_errors == 1 && s.records == 100, "case %d: %llu write errors", i,
		      (unsigned long long)s.write_errors);
		/* Reported once; the next flush is clean. */
		CHECK_OK(aql_printf_flush(svc));
		CHECK_OK(aql_printf_destroy(svc));
		CHECK_OK(aql_channel_destroy(ch));
		if (f)
			fclose(f);
		else
			close(p[1]);
	}
	signal(SIGPIPE, old);
}

/* ---- one service, two channels, two draining threads ------------------------ */

struct drainer {
	aql_channel *ch;
	int *stop;
	aql_status st;
};

static void *drain_loop(void *arg)
{
	struct drainer *d = arg;

	for (;;) {
		int stop = __atomic_load_n(d->stop, __ATOMIC_ACQUIRE);
		aql_status st = aql_channel_drain(d->ch, 0, NULL, NULL, NULL);

		if (st && !d->st)
			d->st = st;
		if (stop)
			break;
		aql_channel_wait(d->ch, 1000000);
	}
	return NULL;
}

struct producer {
	aql_channel *ch;
	uint32_t id, count, failed;
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	p->failed = pf_host_seq(aql_channel_device_address(p->ch), p->id, p->count);
	return NULL;
}

static void test_shared_service(void)
{
	enum { PRODUCERS = 6, COUNT = 3000 };
	int fd = memfd("shared"), stop = 0;
	aql_printf_config c = { .output = AQL_PRINTF_FD, .fd = fd, .formats = test_formats,
				.format_count = PF_COUNT, .buffer_size = 8192 };
	aql_printf *svc = svc_make(&c);
	aql_channel *ch[2] = { chan_make(64), chan_make(128) };
	struct drainer d[2] = { { ch[0], &stop, AQL_OK }, { ch[1], &stop, AQL_OK } };
	struct producer p[PRODUCERS];
	pthread_t dt[2], pt[PRODUCERS];
	aql_printf_stats s;
	size_t len;
	char *text;

	CHECK_OK(aql_printf_attach(svc, ch[0]));
	CHECK_OK(aql_printf_attach(svc, ch[1]));
	for (int i = 0; i < 2; i++)
		pthread_create(&dt[i], NULL, drain_loop, &d[i]);
	for (uint32_t i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ ch[i & 1], i, COUNT, 0 };
		pthread_create(&pt[i], NULL, produce, &p[i]);
	}
	for (int i = 0; i < PRODUCERS; i++) {
		pthread_join(pt[i], NULL);
		CHECK(p[i].failed == 0, "producer %d: %u sends failed", i, p[i].failed);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++) {
		pthread_join(dt[i], NULL);
		CHECK(d[i].st == AQL_OK, "drainer %d: %s", i, aql_status_str(d[i].st));
	}
	CHECK_OK(aql_printf_flush(svc));
	text = contents(fd, &len);
	check_seq("shared service", text, len, PRODUCERS, COUNT);
	s = svc_stats(svc);
	CHECK(s.records == PRODUCERS * COUNT && s.errors == 0 && s.bytes == len,
	      "records %llu bytes %llu", (unsigned long long)s.records, (unsigned long long)s.bytes);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch[0]));
	CHECK_OK(aql_channel_destroy(ch[1]));
	close(fd);
}

/* ---- kernels on the CPU agent ------------------------------------------------ */

/* Drain ch until done completes, then once more. */
static void consume(aql_channel *ch, aql_completion done)
{
	uint64_t deadline = th_now_ns() + 3 * TH_TIMEOUT_NS;

	for (;;) {
		int finished = aql_completion_done(done);

		CHECK_OK(aql_channel_drain(ch, 0, NULL, NULL, NULL));
		if (finished)
			break;
		aql_channel_wait(ch, 1000000);
		if (th_now_ns() > deadline) {
			CHECK(0, "the kernel did not finish");
			break;
		}
	}
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
}

/* Many work-items, each printing a numbered sequence through a small ring. */
static void test_kernel_order(aql_code_object *co, aql_queue *q, int stdio)
{
	enum { N = 1000, COUNT = 40 };
	int fd = memfd("kernel");
	FILE *f = stdio ? fdopen(dup(fd), "w") : NULL;
	aql_printf_config c = { .output = stdio ? AQL_PRINTF_STREAM : AQL_PRINTF_FD, .fd = fd,
				.stream = f, .formats = test_formats, .format_count = PF_COUNT };
	aql_printf *svc = svc_make(&c);
	aql_channel *ch = chan_make_on(th_test_agent(), 256);
	aql_buf *failed = th_buf(AQL_TYPE(uint32_t), N);
	aql_launch_config cfg = { .grid = { N }, .workgroup = { 50 } };
	aql_completion done = { 0 };
	aql_channel_stats cs;
	const uint32_t *fl;
	uint32_t count = COUNT, bad = 0;
	size_t len;
	char *text;

	CHECK_OK(aql_printf_attach(svc, ch));
	CHECK_OK(AQL_LAUNCH(q, th_kernel(co, "printf_seq"), &cfg, &done, AQL_ARG(ch), AQL_ARG(count),
			    AQL_ARG(failed)));
	consume(ch, done);
	CHECK_OK(aql_printf_flush(svc));
	fl = aql_buf_data_const(failed, uint32_t);
	for (uint32_t i = 0; fl && i < N; i++)
		bad += fl[i];
	CHECK(fl && bad == 0, "%u sends failed", bad);
	CHECK_OK(aql_channel_get_stats(ch, &cs));
	text = contents(fd, &len);
	check_seq(stdio ? "kernel, stdio" : "kernel, io_uring", text, len, N, COUNT);
	CHECK(svc_stats(svc).records == N * COUNT && cs.received == N * COUNT,
	      "records %llu, channel received %llu", (unsigned long long)svc_stats(svc).records,
	      (unsigned long long)cs.received);
	printf("kernel order (%s): %u work-items x %u records, %llu full waits\n",
	       stdio ? "stdio" : "io_uring", N, COUNT, (unsigned long long)cs.full_waits);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
	CHECK_OK(aql_buf_destroy(failed));
	if (f)
		fclose(f);
	close(fd);
}

/* The text pf_send_types() should give, up to the pointer line. */
static size_t types_text(char *out, size_t cap, int32_t i, uint32_t u, int64_t l, uint64_t ul,
			 float f, double d)
{
	int n = snprintf(out, cap, "i=%d u=%u l=%ld ul=%lu f=%.3f d=%g c=%d s=%hu\n", i, u, (long)l,
			 (unsigned long)ul, (double)f, d, (int)(int8_t)i,
			 (unsigned short)(uint16_t)u);

	n += snprintf(out + n, cap - (size_t)n, "%d %u %ld %lu %.1f %.1f %d %d %d %d %c %x\n", 1, 2u,
		      3l, 4ul, 5.0, 6.0, -7, 8, -9, 10, 'k', (unsigned)i);
	n += snprintf(out + n, cap - (size_t)n, "no values, 100%% literal\n");
	return (size_t)n;
}

/* Check the output of pf_send_types(); p is its pointer, if known. */
static void check_types(const char *what, const char *text, size_t len, int32_t i, uint32_t u,
			int64_t l, uint64_t ul, float f, double d, const void *p)
{
	char want[512], ptr[64];
	const char *mismatch = "[aql printf: format 5: argument 1 is a double, %d wants an integer]\n";
	size_t wl = types_text(want, sizeof(want), i, u, l, ul, f, d);
	void *a = NULL, *b = NULL;
	const char *line;
	int n = 0;

	CHECK(len > wl && !memcmp(text, want, wl), "%s: got\n%.*s\nwant\n%s", what, (int)len, text,
	      want);
	if (len <= wl)
		return;
	line = text + wl;
	CHECK(sscanf(line, "%p %p\n%n", &a, &b, &n) == 2 && n > 0 && a && b && a != b,
	      "%s: pointer line \"%.40s\"", what, line);
	if (p) {
		snprintf(ptr, sizeof(ptr), "%p ", p);
		CHECK(!strncmp(line, ptr, strlen(ptr)), "%s: pointer line \"%.40s\", want %s", what,
		      line, ptr);
	}
	CHECK(n > 0 && len == wl + (size_t)n + strlen(mismatch) &&
	      !strcmp(line + n, mismatch), "%s: last line \"%s\"", what, n > 0 ? line + n : "");
}

static void test_kernel_types(aql_code_object *co, aql_queue *q)
{
	static const struct {
		int32_t i;
		uint32_t u;
		int64_t l;
		uint64_t ul;
		float f;
		double d;
	} cases[] = {
		{ -5, 4000000000u, -9000000000LL, 18000000000000000000ULL, 1.25f, -1e-7 },
		{ INT32_MAX, 0, INT64_MIN, 0, -0.0f, 6.5e300 },
	};
	int fd = memfd("types");
	aql_printf_config c = { .output = AQL_PRINTF_FD, .fd = fd, .formats = test_formats,
				.format_count = PF_COUNT };

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		aql_printf *svc = svc_make(&c);
		aql_channel *ch = chan_make_on(th_test_agent(), 16);
		aql_buf *out = th_buf(AQL_TYPE(int32_t), 1);
		aql_launch_config cfg = { .grid = { 1 } };
		aql_completion done = { 0 };
		const int32_t *o;
		int32_t host_out = 0;
		size_t len;
		char *text;

		ftruncate(fd, 0);
		lseek(fd, 0, SEEK_SET);
		CHECK_OK(aql_printf_attach(svc, ch));
		CHECK_OK(AQL_LAUNCH(q, th_kernel(co, "printf_types"), &cfg, &done, AQL_ARG(ch),
				    AQL_ARG(cases[k].i), AQL_ARG(cases[k].u), AQL_ARG(cases[k].l),
				    AQL_ARG(cases[k].ul), AQL_ARG(cases[k].f), AQL_ARG(cases[k].d),
				    AQL_ARG(out)));
		consume(ch, done);
		CHECK_OK(aql_printf_flush(svc));
		o = aql_buf_data_const(out, int32_t);
		CHECK(o && o[0] == 0, "kernel's sends: %d", o ? o[0] : -1);
		text = contents(fd, &len);
		check_types("kernel printf_types", text, len, cases[k].i, cases[k].u, cases[k].l,
			    cases[k].ul, cases[k].f, cases[k].d, NULL);
		free(text);

		/*
		 * The same from a host thread, where the pointer is known. A
		 * host thread sends through a channel of the CPU agent: an
		 * NVIDIA agent's descriptor is in its memory, which the host
		 * cannot touch.
		 */
		aql_channel *hch = th_test_gpu() ? chan_make(16) : ch;

		if (hch != ch)
			CHECK_OK(aql_printf_attach(svc, hch));
		ftruncate(fd, 0);
		lseek(fd, 0, SEEK_SET);
		CHECK(pf_host_types(aql_channel_device_address(hch), cases[k].i, cases[k].u,
				    cases[k].l, cases[k].ul, cases[k].f, cases[k].d, &host_out) == 0,
		      "host sends");
		CHECK_OK(aql_channel_drain(hch, 0, NULL, NULL, NULL));
		CHECK_OK(aql_printf_flush(svc));
		text = contents(fd, &len);
		check_types("host printf_types", text, len, cases[k].i, cases[k].u, cases[k].l,
			    cases[k].ul, cases[k].f, cases[k].d, &host_out);
		free(text);
		CHECK(svc_stats(svc).errors == 2, "%llu errors",
		      (unsigned long long)svc_stats(svc).errors);
		CHECK_OK(aql_printf_destroy(svc));
		if (hch != ch)
			CHECK_OK(aql_channel_destroy(hch));
		CHECK_OK(aql_channel_destroy(ch));
		CHECK_OK(aql_buf_destroy(out));
	}
	close(fd);
}

/*
 * The lines of printf_inline: n work-items, count lines each in order,
 * and the line of work-item 0; 0 when they are all there and nothing else.
 */
static unsigned check_inline(const char *what, const char *text, size_t len, uint32_t n,
			     uint32_t count, double x)
{
	uint32_t *next = calloc(n, sizeof(*next)), extra = 0, bad = 0;
	const char *p = text, *end = text + len;

	if (!next)
		exit(1);
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		unsigned id, k, used = 0;
		double v;

		if (!nl)
			nl = end;
		if (nl - p == 15 && !memcmp(p, "no values, 100%", 15))
			extra++;
		else if (sscanf(p, "item %u line %u x=%lf%n", &id, &k, &v, (int *)&used) != 3 ||
			 p + used != nl || id >= n || k != next[id]++ || v != x)
			bad++;
		p = nl + 1;
	}
	for (uint32_t i = 0; i < n; i++)
		bad += next[i] != count;
	bad += extra != 1;
	CHECK(!bad, "%s: %u lines wrong or missing in\n%.*s", what, bad,
	      (int)(len > 400 ? 400 : len), text);
	free(next);
	return bad;
}

/*
 * A queue's own printf channel (AQL_ARG_PRINTF()): no channel, service or
 * thread made here. stdout goes to a memfd; all that a launch printed is
 * there when its completion wait returns, and at queue destroy.
 */
static void test_kernel_default(aql_code_object *co)
{
	enum { N = 96, COUNT = 3 };
	aql_queue *q = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	const aql_kernel *k = th_kernel(co, "printf_inline");
	aql_launch_config cfg = { .grid = { N }, .workgroup = { 32 } };
	aql_completion done = { 0 };
	uint32_t count = COUNT;
	float x = 2.5f;
	int fd = memfd("stdout"), saved;
	size_t len;
	char *text;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	dup2(fd, STDOUT_FILENO);
	CHECK_OK(AQL_LAUNCH(q, k, &cfg, &done, AQL_ARG_PRINTF(), AQL_ARG(count), AQL_ARG(x)));
	CHECK_OK(aql_completion_wait(done, TH_TIMEOUT_NS));
	text = contents(fd, &len);
	check_inline("after the wait", text, len, N, COUNT, 2.5);
	free(text);

	/* Again, on the channel the first launch made; a wrong use is refused. */
	CHECK(AQL_LAUNCH(q, k, &cfg, &done, AQL_ARG_PRINTF(), AQL_ARG_PRINTF(), AQL_ARG(x)) ==
	      AQL_ERR_INVALID_ARG && strstr(aql_error_message(), "'count'") &&
	      strstr(aql_error_message(), "got a channel"),
	      "AQL_ARG_PRINTF() for a uint32_t: %s", aql_error_message());
	ftruncate(fd, 0);
	lseek(fd, 0, SEEK_SET);
	x = -1.0f;
	CHECK_OK(AQL_LAUNCH(q, k, &cfg, &done, AQL_ARG_PRINTF(), AQL_ARG(count), AQL_ARG(x)));
	aql_completion_request(done);
	CHECK_OK(aql_signal_wait(done.signal, AQL_COND_LT, done.below, TH_TIMEOUT_NS,
				 AQL_WAIT_BLOCKED, NULL));
	CHECK_OK(aql_queue_destroy(q));
	text = contents(fd, &len);
	check_inline("after queue destroy", text, len, N, COUNT, -1.0);
	free(text);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(fd);
	printf("queue's printf channel: %u work-items x %u lines, twice\n", N, COUNT);
}

enum { RACE_THREADS = 4, RACE_N = 32 };

struct race {
	aql_queue *q;
	const aql_kernel *k;
	pthread_barrier_t *start;
	aql_status st;
};

static void *launch_printf(void *arg)
{
	struct race *r = arg;
	aql_launch_config cfg = { .grid = { RACE_N }, .workgroup = { 32 } };
	aql_completion done = { 0 };
	uint32_t count = 1;
	float x = 1.0f;

	pthread_barrier_wait(r->start);
	r->st = AQL_LAUNCH(r->q, r->k, &cfg, &done, AQL_ARG_PRINTF(), AQL_ARG(count), AQL_ARG(x));
	if (r->st == AQL_OK)
		r->st = aql_completion_wait(done, TH_TIMEOUT_NS);
	return NULL;
}

/*
 * First launches racing on a fresh queue: one printf channel stays (the
 * others are freed) and every launch's lines come out.
 */
static void test_kernel_default_race(aql_code_object *co)
{
	aql_queue *q = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	struct race r[RACE_THREADS];
	pthread_t t[RACE_THREADS];
	pthread_barrier_t start;
	int fd = memfd("stdout"), saved;
	unsigned lines = 0;
	size_t len;
	char *text;

	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	dup2(fd, STDOUT_FILENO);
	pthread_barrier_init(&start, NULL, RACE_THREADS);
	for (int i = 0; i < RACE_THREADS; i++) {
		r[i] = (struct race){ .q = q, .k = th_kernel(co, "printf_inline"), .start = &start };
		pthread_create(&t[i], NULL, launch_printf, &r[i]);
	}
	for (int i = 0; i < RACE_THREADS; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&start);
	CHECK_OK(aql_queue_destroy(q));
	text = contents(fd, &len);
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	free(text);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(fd);
	for (int i = 0; i < RACE_THREADS; i++)
		CHECK(r[i].st == AQL_OK, "racing launch %d: %s", i, aql_status_str(r[i].st));
	CHECK(lines == RACE_THREADS * (RACE_N + 1), "%u lines from %u racing launches, want %u",
	      lines, RACE_THREADS, RACE_THREADS * (RACE_N + 1));
}

/* Many host threads on one channel: per-producer order. */
static void test_host_order(void)
{
	enum { PRODUCERS = 24, COUNT = 2000 };
	int fd = memfd("host");
	aql_printf_config c = { .output = AQL_PRINTF_FD, .fd = fd, .formats = test_formats,
				.format_count = PF_COUNT };
	aql_printf *svc = svc_make(&c);
	aql_channel *ch = chan_make(128);
	struct producer p[PRODUCERS];
	pthread_t pt[PRODUCERS], dt;
	int stop = 0;
	struct drainer d = { ch, &stop, AQL_OK };
	size_t len;
	char *text;

	CHECK_OK(aql_printf_attach(svc, ch));
	pthread_create(&dt, NULL, drain_loop, &d);
	for (uint32_t i = 0; i < PRODUCERS; i++) {
		p[i] = (struct producer){ ch, i, COUNT, 0 };
		pthread_create(&pt[i], NULL, produce, &p[i]);
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(pt[i], NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(dt, NULL);
	CHECK(d.st == AQL_OK, "drain: %s", aql_status_str(d.st));
	CHECK_OK(aql_printf_flush(svc));
	text = contents(fd, &len);
	check_seq("host threads", text, len, PRODUCERS, COUNT);
	free(text);
	CHECK_OK(aql_printf_destroy(svc));
	CHECK_OK(aql_channel_destroy(ch));
	close(fd);
}

static void test_kernels(void)
{
	aql_code_object *co = NULL;
	aql_queue *q;

	if (!kernels_path) {
		CHECK(0, "no --kernels given");
		return;
	}
	co = th_load_kernels(kernels_path,
			     th_test_kind() == AQL_AGENT_AMD ? hsaco_path : ptx_path);
	q = th_test_queue(256, AQL_QUEUE_MULTI, 0);
	test_kernel_order(co, q, 0);
	test_kernel_order(co, q, 1);
	test_kernel_types(co, q);
	test_kernel_default(co);
	test_kernel_default_race(co);
	CHECK_OK(aql_queue_destroy(q));
	aql_code_object_destroy(co);
}

/* The GPU builds of tests/printf/kernels.c: both kernels are there. */
static void test_gpu_builds(void)
{
	for (unsigned i = 0; i < gpu_count; i++) {
		size_t size;
		void *image = th_read_file(gpu_paths[i], &size);
		aql_code_object *co = NULL;
		const aql_kernel *k = NULL;

		CHECK_OK(aql_code_object_open(image, size, &co));
		free(image);
		if (!co)
			continue;
		CHECK_OK(aql_code_object_kernel(co, "printf_seq", &k));
		CHECK_OK(aql_code_object_kernel(co, "printf_types", &k));
		CHECK_OK(aql_code_object_kernel(co, "printf_inline", &k));
		aql_code_object_destroy(co);
	}
	if (ptx_path) {
		size_t size;
		char *ptx = th_read_file(ptx_path, &size), *text = malloc(size + 1);

		if (!text)
			exit(1);
		memcpy(text, ptx, size);
		text[size] = 0;
		CHECK(strstr(text, ".entry printf_seq(") && strstr(text, ".entry printf_types("),
		      "%s: the kernels' entries are missing", ptx_path);
		free(text);
		free(ptx);
	}
	printf("GPU builds: %u code objects, %s PTX\n", gpu_count, ptx_path ? "and" : "no");
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--kernels") && i + 1 < argc)
			kernels_path = argv[++i];
		else if (!strcmp(argv[i], "--gpu") && i + 1 < argc && gpu_count < 16)
			gpu_paths[gpu_count++] = argv[++i];
		else if (!strcmp(argv[i], "--ptx") && i + 1 < argc)
			ptx_path = argv[++i];
		else if (!strcmp(argv[i], "--hsaco") && i + 1 < argc)
			hsaco_path = argv[++i];
		else if (!strcmp(argv[i], "--co") && i + 1 < argc && co_count < 16)
			co_paths[co_count++] = argv[++i];
		else if (!strcmp(argv[i], "--missing") && i + 1 < argc)
			printf("not built here: %s\n", argv[++i]);
		else {
			fprintf(stderr, "unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	static const struct {
		const char *name;
		void (*fn)(void);
	} tests[] = {
		{ "api errors", test_api_errors },
		{ "conversions", test_conversions },
		{ "diagnostics", test_diagnostics },
		{ "diagnostics in output", test_diagnostics_in_output },
		{ "inline formats", test_inline_formats },
		{ "metadata", test_metadata },
		{ "code objects", test_code_objects },
		{ "tags", test_tags },
		{ "stdio", test_stdio },
		{ "io_uring file", test_uring_file },
		{ "pipe", test_pipe_uring },
		{ "pipe, O_NONBLOCK", test_pipe_uring_nonblock },
		{ "pipe, O_NONBLOCK, write(2)", test_pipe_write_nonblock },
		{ "write(2) fallback", test_write_fallback },
		{ "write errors", test_write_errors },
		{ "shared service", test_shared_service },
		{ "host thread order", test_host_order },
		{ "kernels", test_kernels },
		{ "GPU builds", test_gpu_builds },
	};

	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		uint64_t t0 = th_now_ns();

		/* Only the kernels depend on the agent; the CPU run does the rest. */
		if (th_test_gpu() && tests[i].fn != test_kernels) {
			th_skip(tests[i].name, "host-side printf, the same on every agent");
			continue;
		}
		tests[i].fn();
		printf("%-28s %6.0f ms\n", tests[i].name, (double)(th_now_ns() - t0) / 1e6);
	}
	return th_finish();
}
