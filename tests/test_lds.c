/* SPDX-License-Identifier: MIT */
/*
 * LDS layouts and limits (aql/lds.h): static LDS first, dynamic arrays at
 * their alignments, overflow and too many arrays refused, the agent's and
 * each target's limit enforced with a message naming what was asked.
 *
 * Arguments (optional): the builds of tests/kernels/lds_layout.c, named
 * lds_layout.<target>.{so,hsaco,ptx}. The host one is run on the CPU agent
 * with layouts for several work-group sizes and checked against C; the
 * AMDGPU and PTX ones must take the offsets as the host does and declare
 * the same static LDS, so one layout serves every agent.
 */
#include <string.h>

#include "helpers.h"
#include <aql/kernel.h>
#include <aql/lds.h>

_Static_assert(AQL_LDS_DYNAMIC_ALIGN == AQL_DYNAMIC_LDS_ALIGN,
	       "the host layout and aql_dynamic_lds() must agree on the dynamic base");

static uint32_t rng_state = 2024;
static uint32_t rng(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return rng_state >> 1 ^ rng_state << 17;
}

struct vec4 {
	_Alignas(16) float v[4];
};

struct rgb {
	uint8_t r, g, b;
};

static void test_static_first(void)
{
	static const struct { uint32_t stat, base; } cases[] = {
		{ 0, 0 }, { 1, 16 }, { 15, 16 }, { 16, 16 }, { 17, 32 }, { 260, 272 },
		{ 65535, 65536 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		aql_lds_layout l;
		uint32_t off = 99;

		CHECK_OK(aql_lds_layout_init_size(&l, "k", cases[i].stat));
		CHECK(aql_lds_layout_group_size(&l) == cases[i].stat &&
		      aql_lds_layout_dynamic_size(&l) == 0,
		      "static %u, no arrays: group %u, dynamic %u", cases[i].stat,
		      aql_lds_layout_group_size(&l), aql_lds_layout_dynamic_size(&l));
		CHECK_OK(AQL_LDS_ADD(&l, uint8_t, 1, &off));
		CHECK(l.dynamic_base == cases[i].base && off == 0 &&
		      aql_lds_layout_group_size(&l) == cases[i].base + 1,
		      "static %u: dynamic base %u, first offset %u, group %u; want base %u",
		      cases[i].stat, l.dynamic_base, off, aql_lds_layout_group_size(&l),
		      cases[i].base);
	}
}

/* Mixed types: each array at the next multiple of its alignment. */
static void test_mixed_padding(void)
{
	aql_lds_layout l;
	uint32_t a = 99, b = 99, c = 99, d = 99, e = 99, f = 99;
	aql_kernel k = { .name = "mixed", .group_segment_size = 20 };

	CHECK_OK(aql_lds_layout_init(&l, &k));
	CHECK_OK(AQL_LDS_ADD(&l, uint8_t, 3, &a));		/* 0..3 */
	CHECK_OK(AQL_LDS_ADD(&l, double, 2, &b));		/* 8..24 */
	CHECK_OK(AQL_LDS_ADD(&l, struct rgb, 3, &c));		/* 24..33 */
	CHECK_OK(AQL_LDS_ADD(&l, struct vec4, 2, &d));		/* 48..80 */
	CHECK_OK(AQL_LDS_ADD(&l, uint16_t, 0, &e));		/* 80..80 */
	CHECK_OK(AQL_LDS_ADD(&l, uint32_t, 5, &f));		/* 80..100 */
	CHECK(a == 0 && b == 8 && c == 24 && d == 48 && e == 80 && f == 80,
	      "offsets %u %u %u %u %u %u, want 0 8 24 48 80 80", a, b, c, d, e, f);
	CHECK(l.static_size == 20 && l.dynamic_base == 32 && aql_lds_layout_dynamic_size(&l) == 100 &&
	      aql_lds_layout_group_size(&l) == 132,
	      "static %u, base %u, dynamic %u, group %u; want 20, 32, 100, 132", l.static_size,
	      l.dynamic_base, aql_lds_layout_dynamic_size(&l), aql_lds_layout_group_size(&l));
	CHECK(l.count == 6 && strcmp(l.arrays[1].name, "double") == 0 &&
	      l.arrays[1].count == 2 && l.arrays[1].size == 16 && l.arrays[1].align == 8 &&
	      strcmp(l.arrays[3].name, "struct vec4") == 0 && l.arrays[3].align == 16 &&
	      l.arrays[3].size == 32 && l.arrays[2].size == 9 && l.arrays[2].align == 1,
	      "array records: %u arrays, [1] %s x%u %u B align %u, [3] %s align %u", l.count,
	      l.arrays[1].name, l.arrays[1].count, l.arrays[1].size, l.arrays[1].align,
	      l.arrays[3].name, l.arrays[3].align);

	/* The untyped call does the same arithmetic. */
	CHECK_OK(aql_lds_layout_add(&l, 8, 8, 1, &a));
	CHECK(a == 104 && l.arrays[6].name == NULL && aql_lds_layout_group_size(&l) == 32 + 112,
	      "untyped add at %u (want 104), group %u (want 144)", a,
	      aql_lds_layout_group_size(&l));
}

/* Random layouts against the rules: aligned, in order, tight, no overlap. */
static void test_random_layouts(void)
{
	static const uint32_t aligns[] = { 1, 2, 4, 8, 16 };
	unsigned bad = 0;

	for (int round = 0; round < 2000; round++) {
		uint32_t stat = rng() % 70000, n = 1 + rng() % AQL_LDS_MAX_ARRAYS, end = 0;
		aql_lds_layout l;

		if (aql_lds_layout_init_size(&l, "random", stat) != AQL_OK) {
			bad++;
			continue;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint32_t align = aligns[rng() % 5], size = align * (1 + rng() % 4);
			uint32_t count = rng() % 300, off = UINT32_MAX;

			if (aql_lds_layout_add(&l, size, align, count, &off) != AQL_OK) {
				bad++;
				break;
			}
			/* Padding before the array is less than its alignment. */
			bad += off % align != 0 || off < end || off - end >= align ||
			       (l.dynamic_base + off) % align != 0;
			end = off + size * count;
		}
		bad += l.dynamic_base % AQL_LDS_DYNAMIC_ALIGN != 0 || l.dynamic_base < stat ||
		       l.dynamic_base - stat >= AQL_LDS_DYNAMIC_ALIGN ||
		       aql_lds_layout_dynamic_size(&l) != end ||
		       aql_lds_layout_group_size(&l) != (end ? l.dynamic_base + end : stat);
	}
	CHECK(bad == 0, "%u random layouts broke a placement rule", bad);
}

static void test_one_block(void)
{
	aql_kernel k = { .name = "dynlds", .group_segment_size = 260 };
	uint32_t size = 0;

	CHECK_OK(aql_lds_group_size(&k, 256, &size));
	CHECK(size == 272 + 256, "260 static + 256 dynamic: %u, want 528", size);
	CHECK_OK(aql_lds_group_size(&k, 0, &size));
	CHECK(size == 260, "260 static, no dynamic: %u, want 260", size);
	CHECK(aql_lds_group_size(&k, UINT32_MAX - 200, &size) == AQL_ERR_INVALID_ARG &&
	      th_error_has("dynlds") && th_error_has("32-bit"), "a sum over 32 bits is refused");
	CHECK(aql_lds_group_size(&k, 1ull << 40, &size) == AQL_ERR_INVALID_ARG,
	      "2^40 dynamic bytes are refused");
	CHECK(aql_lds_group_size(NULL, 1, &size) == AQL_ERR_INVALID_ARG &&
	      aql_lds_group_size(&k, 1, NULL) == AQL_ERR_INVALID_ARG, "NULL arguments refused");
}

/* An add that must fail, leave l as it was and mark it failed. */
static void expect_refused(aql_lds_layout *l, aql_status st, const char *what,
			   const char *needle)
{
	CHECK(st == AQL_ERR_INVALID_ARG && th_error_has(needle) && th_error_has(l->kernel_name),
	      "%s: %s", what, aql_status_str(st));
	CHECK(l->error == AQL_ERR_INVALID_ARG && aql_lds_layout_group_size(l) == UINT32_MAX &&
	      aql_lds_layout_dynamic_size(l) == 0, "%s: the layout is not marked failed", what);
}

static void test_errors(void)
{
	aql_lds_layout l;
	uint32_t off = 7;
	uint32_t kept;

	/* Each bad request on a fresh layout holding one float. */
#define FRESH()                                                                \
	do {                                                                   \
		CHECK_OK(aql_lds_layout_init_size(&l, "errk", 100));           \
		CHECK_OK(AQL_LDS_ADD(&l, float, 10, NULL));                    \
		off = 7;                                                       \
	} while (0)

	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, 0, 1, 1, &off), "element size 0", "0 bytes");
	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, 6, 3, 1, &off), "alignment 3", "power of two");
	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, 8, 0, 1, &off), "alignment 0", "power of two");
	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, 64, 32, 1, &off), "alignment 32", "exceeds the 16");
	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, 12, 8, 1, &off), "size 12 align 8",
		       "would not all be aligned");
	FRESH();
	expect_refused(&l, AQL_LDS_ADD(&l, double, 1ull << 30, &off), "8 GiB of doubles", "32-bit");
	FRESH();
	expect_refused(&l, AQL_LDS_ADD(&l, int, -1, &off), "a negative count", "32-bit");
	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, (size_t)1 << 33, 8, 1, &off),
		       "one 8 GiB element", "32-bit");
	CHECK(off == 7 && l.count == 1 && l.dynamic_size == 40,
	      "a refused add changed the layout: offset %u, %u arrays, %u bytes", off, l.count,
	      l.dynamic_size);

	/* Each array fits but the sum does not: the second crosses 2^32 - 1. */
	CHECK_OK(aql_lds_layout_init_size(&l, "sum", 100));
	CHECK_OK(AQL_LDS_ADD(&l, uint8_t, UINT32_MAX - 300, &off));
	kept = aql_lds_layout_group_size(&l);
	CHECK(kept == 112 + UINT32_MAX - 300, "group %u before the overflow", kept);
	expect_refused(&l, AQL_LDS_ADD(&l, uint32_t, 60, &off), "the sum over 2^32", "32-bit");
	/* Exactly 2^32 - 1 bytes in all still fits. */
	CHECK_OK(aql_lds_layout_init_size(&l, "edge", 0));
	CHECK_OK(AQL_LDS_ADD(&l, uint8_t, UINT32_MAX, &off));
	CHECK(aql_lds_layout_group_size(&l) == UINT32_MAX && l.error == AQL_OK,
	      "2^32 - 1 bytes: group %u", aql_lds_layout_group_size(&l));

	/* A failed layout stays failed: later adds and the checks report it. */
	FRESH();
	expect_refused(&l, aql_lds_layout_add(&l, 0, 1, 1, NULL), "sticky setup", "0 bytes");
	CHECK(AQL_LDS_ADD(&l, float, 1, &off) == AQL_ERR_INVALID_ARG && off == 7 &&
	      th_error_has("failed before"), "an add after a failure is refused");
	CHECK(aql_lds_layout_check_agent(&l, th_agent()) == AQL_ERR_INVALID_ARG &&
	      th_error_has("errk"), "the agent check reports the failed layout");
#undef FRESH

	/* Static LDS so large that no dynamic base fits in 32 bits. */
	CHECK(aql_lds_layout_init_size(&l, "huge", UINT32_MAX - 3) == AQL_ERR_INVALID_ARG &&
	      th_error_has("huge") && aql_lds_layout_group_size(&l) == UINT32_MAX,
	      "static LDS of 2^32 - 4 bytes");
	CHECK(AQL_LDS_ADD(&l, uint8_t, 1, &off) == AQL_ERR_INVALID_ARG, "add to a failed init");

	CHECK(aql_lds_layout_init(NULL, NULL) == AQL_ERR_INVALID_ARG &&
	      aql_lds_layout_init_size(NULL, "x", 0) == AQL_ERR_INVALID_ARG &&
	      aql_lds_layout_add(NULL, 4, 4, 1, &off) == AQL_ERR_INVALID_ARG &&
	      aql_lds_layout_group_size(NULL) == UINT32_MAX &&
	      aql_lds_layout_check_agent(NULL, th_agent()) == AQL_ERR_INVALID_ARG &&
	      aql_lds_layout_check_target(&l, NULL) == AQL_ERR_INVALID_ARG,
	      "NULL arguments are refused");
}

static void test_too_many(void)
{
	aql_lds_layout l;
	uint32_t off = 0;
	unsigned ok = 0;

	CHECK_OK(aql_lds_layout_init_size(&l, "many", 0));
	for (uint32_t i = 0; i < AQL_LDS_MAX_ARRAYS; i++)
		ok += AQL_LDS_ADD(&l, uint32_t, 1, &off) == AQL_OK && off == i * 4;
	CHECK(ok == AQL_LDS_MAX_ARRAYS, "%u of %u arrays placed", ok, AQL_LDS_MAX_ARRAYS);
	expect_refused(&l, AQL_LDS_ADD(&l, uint32_t, 1, &off), "one array too many", "at most 16");
	CHECK(l.count == AQL_LDS_MAX_ARRAYS && off == (AQL_LDS_MAX_ARRAYS - 1) * 4,
	      "the extra array changed the layout");
}

static void test_agent_limit(void)
{
	aql_host_agent_config config = { .workers = 1, .max_group_segment_size = 4096 };
	aql_agent_info info;
	aql_agent *small = NULL;
	aql_lds_layout l;
	uint32_t fit;

	/* The default CPU agent: 64 KiB unless configured otherwise. */
	CHECK_OK(aql_agent_get_info(th_agent(), &info));
	CHECK(info.max_group_segment_size == 65536, "default agent LDS limit %u",
	      info.max_group_segment_size);
	fit = (info.max_group_segment_size - 1024) / 4;
	CHECK_OK(aql_lds_layout_init_size(&l, "agentk", 1020));
	CHECK_OK(AQL_LDS_ADD(&l, float, fit, NULL));
	CHECK(aql_lds_layout_group_size(&l) == info.max_group_segment_size,
	      "layout of exactly the limit: %u", aql_lds_layout_group_size(&l));
	CHECK_OK(aql_lds_layout_check_agent(&l, th_agent()));
	CHECK_OK(AQL_LDS_ADD(&l, uint8_t, 1, NULL));
	CHECK(aql_lds_layout_check_agent(&l, th_agent()) == AQL_ERR_INVALID_ARG &&
	      th_error_has("kernel agentk") && th_error_has("65537 bytes") &&
	      th_error_has("65536-byte limit") && th_error_has("static 1020") &&
	      th_error_has("float[16128] 64512 at +1024") && th_error_has("uint8_t[1] 1 at +65536") &&
	      th_error_has("padding 4") && th_error_has(info.name),
	      "one byte over the default agent's limit");

	/* A private agent with a smaller limit refuses what the default takes. */
	CHECK_OK(aql_host_agent_create(&config, &small));
	if (!small)
		return;
	CHECK_OK(aql_lds_layout_init_size(&l, "smallk", 0));
	CHECK_OK(AQL_LDS_ADD(&l, uint64_t, 512, NULL));
	CHECK_OK(aql_lds_layout_check_agent(&l, small));
	CHECK_OK(AQL_LDS_ADD(&l, uint16_t, 1, NULL));
	CHECK(aql_lds_layout_check_agent(&l, small) == AQL_ERR_INVALID_ARG &&
	      th_error_has("4098 bytes") && th_error_has("4096-byte limit"),
	      "over a 4 KiB agent limit");
	CHECK_OK(aql_lds_layout_check_agent(&l, th_agent()));
	CHECK_OK(aql_agent_destroy(small));
}

static void test_target_limits(void)
{
	static const struct { const char *id; uint32_t bytes; } targets[] = {
		{ "gfx900", 65536 }, { "gfx90a", 65536 }, { "gfx90a:sramecc+:xnack-", 65536 },
		{ "gfx940", 65536 }, { "gfx942", 65536 }, { "gfx950", 163840 },
		{ "gfx1030", 65536 }, { "gfx1100", 65536 }, { "gfx1151", 65536 },
		{ "gfx1201", 65536 }, { "gfx1250", 327680 }, { "gfx9-4-generic", 65536 },
		{ "gfx12-generic", 65536 },
	};
	aql_target_id t, unknown = { .processor = "gfx1300" };
	aql_lds_layout l;
	uint32_t bytes;

	for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
		bytes = 0;
		CHECK_OK(aql_target_parse(targets[i].id, &t));
		CHECK_OK(aql_lds_target_limit(&t, &bytes));
		CHECK(bytes == targets[i].bytes, "%s: LDS limit %u, want %u", targets[i].id, bytes,
		      targets[i].bytes);
	}
	CHECK(aql_lds_target_limit(&unknown, &bytes) == AQL_ERR_NOT_FOUND &&
	      th_error_has("gfx1300"), "an unknown processor has no limit");
	CHECK(aql_lds_target_limit(NULL, &bytes) == AQL_ERR_INVALID_ARG, "NULL target");

	/* 100 KiB fits gfx950's 160 KiB, not gfx90a's 64 KiB. */
	CHECK_OK(aql_lds_layout_init_size(&l, "bigtile", 4096));
	CHECK_OK(AQL_LDS_ADD(&l, double, 12288, NULL));
	CHECK(aql_lds_layout_group_size(&l) == 4096 + 98304, "100 KiB layout: %u",
	      aql_lds_layout_group_size(&l));
	CHECK_OK(aql_target_parse("gfx950", &t));
	CHECK_OK(aql_lds_layout_check_target(&l, &t));
	CHECK_OK(aql_target_parse("gfx90a", &t));
	CHECK(aql_lds_layout_check_target(&l, &t) == AQL_ERR_INVALID_ARG &&
	      th_error_has("kernel bigtile") && th_error_has("102400 bytes") &&
	      th_error_has("65536-byte limit of target gfx90a") && th_error_has("static 4096") &&
	      th_error_has("double[12288] 98304 at +4096"), "100 KiB on gfx90a");
	/* gfx950's limit is exact: 160 KiB passes, one more byte does not. */
	CHECK_OK(aql_lds_layout_init_size(&l, "edge950", 0));
	CHECK_OK(AQL_LDS_ADD(&l, uint8_t, 163840, NULL));
	CHECK_OK(aql_target_parse("gfx950", &t));
	CHECK_OK(aql_lds_layout_check_target(&l, &t));
	CHECK_OK(AQL_LDS_ADD(&l, uint8_t, 1, NULL));
	CHECK(aql_lds_layout_check_target(&l, &t) == AQL_ERR_INVALID_ARG &&
	      th_error_has("163841 bytes") && th_error_has("163840-byte limit"),
	      "one byte over gfx950's limit");
	CHECK(aql_lds_layout_check_target(&l, &unknown) == AQL_ERR_NOT_FOUND,
	      "checking against an unknown processor");
}

/* ---------------------------------------------------------------------- */
/* The lds_layout kernel                                                   */

#define ARG(x) { &(x), sizeof(x) }

/* The kernel's layout: the order and types of its AQL_LDS_ARRAY()s. */
static aql_status kernel_layout(aql_lds_layout *l, const aql_kernel *k, uint32_t wg,
				uint32_t off[3])
{
	aql_status st = aql_lds_layout_init(l, k);

	if (st == AQL_OK)
		st = AQL_LDS_ADD(l, uint16_t, wg, &off[0]);
	if (st == AQL_OK)
		st = AQL_LDS_ADD(l, double, wg, &off[1]);
	if (st == AQL_OK)
		st = AQL_LDS_ADD(l, uint8_t, wg, &off[2]);
	return st;
}

/*
 * Dispatch k over grid items of n inputs in groups of wg, with the
 * offsets off and group_segment_size gss; out[] gets n results. Returns
 * 1 if the packet completed.
 */
static int dispatch(aql_queue *q, const aql_kernel *k, uint32_t n, uint32_t grid, uint16_t wg,
		    const uint32_t *in, uint64_t *out, uint32_t status[3], const uint32_t off[3],
		    uint32_t gss)
{
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object;
	const uint32_t g3[3] = { grid, 1, 1 };
	const uint16_t w3[3] = { wg, 1, 1 };
	size_t bytes = (k->kernarg_size + 63) / 64 * 64;
	void *kernarg = aligned_alloc(64, bytes);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = th_dispatch(kd, kernarg, 1, g3, w3, done, 0);
	const uint32_t *inc = in;
	uint32_t *statusp = status;
	aql_kernarg_value args[] = { ARG(inc), ARG(out), ARG(n), ARG(statusp),
				     ARG(off[0]), ARG(off[1]), ARG(off[2]) };
	int64_t v = -1;

	p.group_segment_size = gss;
	CHECK_OK(aql_kernarg_build(k, &p, args, 7, NULL, kernarg, bytes));
	if (th_submit(q, &p) == AQL_OK)
		v = th_wait_done(done);
	CHECK(v == 0, "lds_layout grid %u wg %u: completion %lld (%s)", grid, wg, (long long)v,
	      th_last_error);
	aql_signal_destroy(done);
	free(kernarg);
	return v == 0;
}

/* How many of out[0..n) match plain C for the inputs in. */
static uint32_t count_right(const uint32_t *in, const uint64_t *out, uint32_t n, uint32_t grid,
			    uint32_t wg)
{
	uint32_t good = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t s = i / wg * wg, l = i - s, size = grid - s < wg ? grid - s : wg;
		uint32_t a = s + (l + 1) % size, b = s + size - 1 - l, c = s + (l + 2) % size;
		uint64_t want = (uint64_t)(a < n ? in[a] : 0) |
				(uint64_t)((b < n ? in[b] : 0) >> 16) << 32 |
				(uint64_t)((c < n ? in[c] : 0) & 0xff) << 48;

		good += out[i] == want;
	}
	return good;
}

static void run_kernel(const char *path)
{
	static const struct { uint32_t n, grid; uint16_t wg; } shapes[] = {
		{ 1000, 1000, 64 }, { 100, 100, 7 }, { 5, 5, 1 }, { 3000, 3000, 1000 },
		{ 200, 256, 256 }, { 77, 77, 33 }, { 1024, 1024, 1024 },
	};
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;
	aql_queue *q;

	CHECK_OK(aql_code_object_load_file(th_agent(), path, NULL, &co));
	if (!co)
		return;
	CHECK_OK(aql_code_object_kernel(co, "lds_layout", &k));
	if (!k) {
		aql_code_object_destroy(co);
		return;
	}
	CHECK(k->group_segment_size == 20 && k->explicit_arg_count == 7,
	      "%s: static LDS %u, %u arguments; want 20 and 7", path, k->group_segment_size,
	      k->explicit_arg_count);
	q = th_queue(64, AQL_QUEUE_MULTI, 0);
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t n = shapes[s].n, grid = shapes[s].grid, wg = shapes[s].wg;
		uint32_t *in = malloc(n * sizeof(*in)), status[3] = { 0, 0, 0 }, off[3], good = 0;
		uint64_t *out = calloc(n, sizeof(*out));
		aql_lds_layout l;

		for (uint32_t i = 0; i < n; i++)
			in[i] = rng();
		CHECK_OK(kernel_layout(&l, k, wg, off));
		CHECK_OK(aql_lds_layout_check_agent(&l, th_agent()));
		/* uint16_t, double, uint8_t: the doubles after 2 * wg rounded up to 8. */
		CHECK(off[0] == 0 && off[1] == (2 * wg + 7) / 8 * 8 && off[2] == off[1] + 8 * wg &&
		      aql_lds_layout_group_size(&l) == 32 + off[2] + wg,
		      "wg %u: offsets %u %u %u, group %u", wg, off[0], off[1], off[2],
		      aql_lds_layout_group_size(&l));
		if (dispatch(q, k, n, grid, wg, in, out, status, off, aql_lds_layout_group_size(&l)))
			good = count_right(in, out, n, grid, wg);
		CHECK(good == n && status[0] == 0,
		      "lds_layout n %u grid %u wg %u: %u of %u right, %u errors", n, grid, wg, good,
		      n, status[0]);
		CHECK(status[1] == aql_lds_layout_dynamic_size(&l) && status[2] == l.dynamic_base,
		      "wg %u: kernel saw %u dynamic bytes at static + %u, want %u at + %u", wg,
		      status[1], status[2], aql_lds_layout_dynamic_size(&l), l.dynamic_base);
		free(in);
		free(out);
	}

	/*
	 * Controls, so the checks above are known to bite: the byte array on
	 * top of the doubles corrupts the output; a uint16_t array at an odd
	 * offset (x86 stores it anyway) is reported by AQL_LDS_ARRAY_FITS.
	 */
	{
		uint32_t n = 256, wg = 64, in[256], status[3] = { 0, 0, 0 }, off[3], good = n;
		uint64_t out[256];
		aql_lds_layout l;

		for (uint32_t i = 0; i < n; i++)
			in[i] = rng() | 0x01000100u;
		CHECK_OK(kernel_layout(&l, k, wg, off));
		off[2] = off[1];
		if (dispatch(q, k, n, n, (uint16_t)wg, in, out, status, off,
			     aql_lds_layout_group_size(&l)))
			good = count_right(in, out, n, n, wg);
		CHECK(good < n && status[0] == 0, "overlapping arrays went unnoticed: %u of %u right",
		      good, n);
		CHECK_OK(kernel_layout(&l, k, wg, off));
		off[0] = 1;
		status[0] = 0;
		dispatch(q, k, n, n, (uint16_t)wg, in, out, status, off, aql_lds_layout_group_size(&l));
		CHECK(status[0] == n / wg, "a misaligned array: %u groups complained, want %u",
		      status[0], n / wg);
	}
	aql_queue_destroy(q);
	aql_code_object_destroy(co);
}

/* ---------------------------------------------------------------------- */
/* The GPU builds take the same layout                                     */

static void *read_all(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	} else if (buf) {
		*size = (size_t)n;
	}
	fclose(f);
	return buf;
}

static const char *const offset_args[3] = { "keys_off", "vals_off", "tags_off" };

static void check_hsaco(const char *path)
{
	size_t size = 0;
	void *image = read_all(path, &size);
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;
	aql_lds_layout gpu, host;
	aql_kernel host_k = { .name = "lds_layout", .group_segment_size = 20 };
	uint32_t goff[3], hoff[3];
	unsigned hidden_lds = 0;

	CHECK(image != NULL, "cannot read %s", path);
	if (!image)
		return;
	CHECK_OK(aql_code_object_open(image, size, &co));
	free(image);
	if (!co)
		return;
	CHECK_OK(aql_code_object_kernel(co, "lds_layout", &k));
	if (k) {
		const aql_kernel_metadata *md = k->metadata;

		CHECK(k->group_segment_size == 20 && md->group_segment_fixed_size == 20,
		      "%s: static LDS %u (metadata %u), want the host's 20", path,
		      k->group_segment_size, md->group_segment_fixed_size);
		CHECK(k->explicit_arg_count == 7, "%s: %u explicit arguments", path,
		      k->explicit_arg_count);
		for (uint32_t i = 0; i < 3 && k->explicit_arg_count == 7; i++) {
			const aql_kernel_arg *a = &md->args[4 + i];

			CHECK(a->kind == AQL_ARG_BY_VALUE && a->size == 4 && a->offset == 32 + 4 * i &&
			      a->name && strcmp(a->name, offset_args[i]) == 0,
			      "%s: argument %u is %s %s size %u at %u, want by_value %s size 4 at %u",
			      path, 4 + i, aql_arg_kind_name(a->kind), a->name ? a->name : "?",
			      a->size, a->offset, offset_args[i], 32 + 4 * i);
		}
		/*
		 * aql_dynamic_lds() finds dynamic LDS from the static size and the
		 * packet, with no extern LDS array: LLVM sees no dynamic LDS, so the
		 * kernel asks for no hidden_dynamic_lds_size, and the packet's
		 * group_segment_size is all it needs.
		 */
		for (uint32_t i = 0; i < md->arg_count; i++)
			hidden_lds += md->args[i].kind == AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE;
		CHECK(hidden_lds == 0, "%s: %u hidden_dynamic_lds_size arguments", path, hidden_lds);
		/* One layout for every agent: the GPU kernel's equals the host's. */
		CHECK_OK(kernel_layout(&gpu, k, 100, goff));
		CHECK_OK(kernel_layout(&host, &host_k, 100, hoff));
		CHECK(memcmp(goff, hoff, sizeof(goff)) == 0 &&
		      aql_lds_layout_group_size(&gpu) == aql_lds_layout_group_size(&host),
		      "%s: layout for 100 work-items: group %u, host %u", path,
		      aql_lds_layout_group_size(&gpu), aql_lds_layout_group_size(&host));
		CHECK_OK(aql_lds_layout_check_target(&gpu, &aql_code_object_get_info(co)->target));
		/* 8000 work-items need 88032 bytes: over 64 KiB. */
		CHECK_OK(kernel_layout(&gpu, k, 8000, goff));
		CHECK(aql_lds_layout_check_target(&gpu, &aql_code_object_get_info(co)->target) ==
		      AQL_ERR_INVALID_ARG && th_error_has("lds_layout") &&
		      th_error_has(aql_code_object_get_info(co)->target.processor),
		      "%s: 8000 work-items of arrays over the target's limit", path);
	}
	aql_code_object_destroy(co);
}

static void check_ptx(const char *path)
{
	size_t size = 0;
	char *text = read_all(path, &size);
	aql_ptx_module *m = NULL;
	const aql_ptx_entry *e = NULL;

	CHECK(text != NULL, "cannot read %s", path);
	if (!text)
		return;
	CHECK_OK(aql_ptx_parse(text, size, &m));
	free(text);
	if (!m)
		return;
	CHECK_OK(aql_ptx_entry_find(m, "lds_layout", &e));
	if (e) {
		CHECK(e->param_count == 7, "%s: %u parameters", path, e->param_count);
		for (uint32_t i = 0; i < 3 && e->param_count == 7; i++)
			CHECK(e->params[4 + i].size == 4 && e->params[4 + i].offset == 32 + 4 * i,
			      "%s: parameter %u size %u at %u, want 4 at %u", path, 4 + i,
			      e->params[4 + i].size, e->params[4 + i].offset, 32 + 4 * i);
	}
	aql_ptx_free(m);
}

static int has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

int main(int argc, char **argv)
{
	unsigned host = 0, hsaco = 0, ptx = 0;

	test_static_first();
	test_mixed_padding();
	test_random_layouts();
	test_one_block();
	test_errors();
	test_too_many();
	test_agent_limit();
	test_target_limits();
	for (int i = 1; i < argc; i++) {
		if (has_suffix(argv[i], ".so")) {
			run_kernel(argv[i]);
			host++;
		} else if (has_suffix(argv[i], ".hsaco")) {
			check_hsaco(argv[i]);
			hsaco++;
		} else if (has_suffix(argv[i], ".ptx")) {
			check_ptx(argv[i]);
			ptx++;
		} else {
			CHECK(0, "argument %s is not a .so, .hsaco or .ptx", argv[i]);
		}
	}
	if (argc > 1) {
		CHECK(host == 1, "%u host builds of lds_layout among the arguments", host);
		printf("lds_layout: %u host run, %u AMDGPU and %u PTX builds checked\n", host,
		       hsaco, ptx);
	}
	return th_finish();
}
