/* SPDX-License-Identifier: MIT */
/*
 * Single-source kernels (the .c files of tests/kernels, include/aql/kernel.h): each
 * host code object is loaded for the CPU agent and dispatched over several
 * grid and work-group shapes, partial work-groups included, and every
 * output is compared with plain C. Each kernel's AMDGPU code objects
 * (metadata and descriptor) and PTX (entry parameters) must describe the
 * same explicit arguments, at the same offsets, as its host descriptor,
 * and the same static LDS.
 *
 * Arguments: the built files, named <kernel>.<target>.{so,hsaco,ptx}.
 */
#include <string.h>

#include "helpers.h"
#include <aql/code_object.h>
#include <aql/kernarg.h>
#include <aql/ptx.h>

/* What each kernel's source declares; the host descriptor must agree. */
struct want_arg {
	const char *name, *type;	/* type without qualifiers or spaces */
	uint32_t offset, size;
	int pointer, is_const;
};

struct want_kernel {
	const char *name;
	uint32_t lds, flags, kernarg_size, arg_count;
	struct want_arg args[8];
};

static const struct want_kernel wanted[] = {
	{ "saxpy", 0, AQL_HOST_KD_NO_BARRIER | AQL_HOST_KD_WORKGROUP, 32, 4, {
		{ "a", "float", 0, 4, 0, 0 }, { "x", "float*", 8, 8, 1, 1 },
		{ "y", "float*", 16, 8, 1, 0 }, { "n", "uint32_t", 24, 4, 0, 0 } } },
	{ "transpose", 0, AQL_HOST_KD_NO_BARRIER | AQL_HOST_KD_WORKGROUP, 56, 7, {
		{ "shift", "uint8_t", 0, 1, 0, 0 }, { "in", "uint32_t*", 8, 8, 1, 1 },
		{ "width", "uint16_t", 16, 2, 0, 0 }, { "bias", "uint64_t", 24, 8, 0, 0 },
		{ "height", "uint32_t", 32, 4, 0, 0 }, { "scale", "double", 40, 8, 0, 0 },
		{ "out", "uint64_t*", 48, 8, 1, 0 } } },
	{ "reduce", 2048, 0, 32, 4, {
		{ "in", "uint32_t*", 0, 8, 1, 1 }, { "n", "uint32_t", 8, 4, 0, 0 },
		{ "sums", "uint64_t*", 16, 8, 1, 0 }, { "total", "uint64_t*", 24, 8, 1, 0 } } },
	{ "dynlds", 260, 0, 32, 4, {
		{ "in", "uint32_t*", 0, 8, 1, 1 }, { "out", "uint32_t*", 8, 8, 1, 0 },
		{ "n", "uint32_t", 16, 4, 0, 0 }, { "status", "uint32_t*", 24, 8, 1, 0 } } },
	{ "histogram", 256, 0, 24, 3, {
		{ "data", "uint32_t*", 0, 8, 1, 1 }, { "n", "uint32_t", 8, 4, 0, 0 },
		{ "bins", "uint32_t*", 16, 8, 1, 0 } } },
	{ "atomics", 20, 0, 32, 4, {
		{ "vals", "uint32_t*", 0, 8, 1, 1 }, { "n", "uint32_t", 8, 4, 0, 0 },
		{ "g", "uint32_t*", 16, 8, 1, 0 }, { "wide", "uint64_t*", 24, 8, 1, 0 } } },
};
#define KERNELS (sizeof(wanted) / sizeof(wanted[0]))

enum { MAX_WG = 1024 };

static int file_argc;
static char **file_argv;
static aql_queue *queue;

/* The argument naming kernel's file for target (NULL: any target of kind ext). */
static const char *file_for(const char *kernel, const char *target, int i)
{
	const char *base = strrchr(file_argv[i], '/');
	size_t n = strlen(kernel);

	base = base ? base + 1 : file_argv[i];
	if (strncmp(base, kernel, n) != 0 || base[n] != '.')
		return NULL;
	if (target && (strncmp(base + n + 1, target, strlen(target)) != 0 ||
		       base[n + 1 + strlen(target)] != '.'))
		return NULL;
	return file_argv[i];
}

static int has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void *read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	} else if (buf) {
		*size = (size_t)n;
	}
	fclose(f);
	return buf;
}

/* A type name without qualifiers, address spaces or blanks: "float*". */
static void normalize_type(const char *in, char *out, size_t cap)
{
	static const char *const drop[] = { "const", "volatile", "restrict", "__restrict",
					    "__global", "global", "aql_global" };
	size_t o = 0;

	while (in && *in && o + 1 < cap) {
		size_t w = 0;
		int dropped = 0;

		while ((in[w] >= 'a' && in[w] <= 'z') || (in[w] >= 'A' && in[w] <= 'Z') ||
		       (in[w] >= '0' && in[w] <= '9') || in[w] == '_')
			w++;
		for (size_t d = 0; w && d < sizeof(drop) / sizeof(drop[0]); d++)
			if (strlen(drop[d]) == w && strncmp(in, drop[d], w) == 0)
				dropped = 1;
		if (!w) {
			if (*in != ' ' && *in != '\t')
				out[o++] = *in;
			in++;
			continue;
		}
		for (size_t i = 0; !dropped && i < w && o + 1 < cap; i++)
			out[o++] = in[i];
		in += w;
	}
	out[o] = 0;
}

/* ---------------------------------------------------------------------- */
/* Descriptions                                                            */

/* The host descriptor against what the source declares. */
static void check_host_descriptor(const struct want_kernel *w, const aql_kernel *k)
{
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object;

	CHECK(kd && kd->magic == AQL_HOST_KD_MAGIC && kd->entry && kd->name &&
	      strcmp(kd->name, w->name) == 0, "%s: descriptor magic, entry, name", w->name);
	if (!kd)
		return;
	CHECK(kd->group_segment_fixed_size == w->lds && k->group_segment_size == w->lds &&
	      k->metadata->group_segment_fixed_size == w->lds,
	      "%s: static LDS: descriptor %u, kernel %u, metadata %u, want %u", w->name,
	      kd->group_segment_fixed_size, k->group_segment_size,
	      k->metadata->group_segment_fixed_size, w->lds);
	CHECK(kd->flags == w->flags, "%s: flags %#x, want %#x", w->name, kd->flags, w->flags);
	CHECK(kd->kernarg_size == w->kernarg_size && kd->kernarg_align == 16,
	      "%s: kernarg %u bytes aligned %u, want %u aligned 16", w->name, kd->kernarg_size,
	      kd->kernarg_align, w->kernarg_size);
	CHECK(kd->max_flat_workgroup_size == MAX_WG &&
	      k->metadata->max_flat_workgroup_size == MAX_WG,
	      "%s: max work-group %u", w->name, kd->max_flat_workgroup_size);
	CHECK(kd->arg_count == w->arg_count && k->explicit_arg_count == w->arg_count &&
	      k->metadata->arg_count == w->arg_count, "%s: %u args (kernel %u, metadata %u), want %u",
	      w->name, kd->arg_count, k->explicit_arg_count, k->metadata->arg_count, w->arg_count);
	for (uint32_t i = 0; i < kd->arg_count && i < w->arg_count; i++) {
		const aql_host_kernel_arg *a = &kd->args[i];
		const aql_kernel_arg *m = &k->metadata->args[i];
		const struct want_arg *e = &w->args[i];
		char type[64];

		normalize_type(a->type_name, type, sizeof(type));
		CHECK(strcmp(a->name, e->name) == 0 && strcmp(type, e->type) == 0 &&
		      a->offset == e->offset && a->size == e->size && a->align == e->size &&
		      a->kind == (e->pointer ? AQL_ARG_GLOBAL_BUFFER : AQL_ARG_BY_VALUE) &&
		      a->address_space == (e->pointer ? AQL_AS_GLOBAL : AQL_AS_NONE) &&
		      a->flags == (e->is_const ? AQL_ARG_IS_CONST : 0),
		      "%s arg %u: %s '%s' offset %u size %u align %u kind %u as %u flags %#x", w->name,
		      i, a->name, a->type_name, a->offset, a->size, a->align, a->kind,
		      a->address_space, a->flags);
		CHECK(m->name && strcmp(m->name, a->name) == 0 && m->offset == a->offset &&
		      m->size == a->size && (unsigned)m->kind == a->kind &&
		      (unsigned)m->address_space == a->address_space && m->flags == a->flags,
		      "%s arg %u: loader metadata differs from the descriptor", w->name, i);
	}
}

/* An AMDGPU build of the kernel against its host descriptor. */
static void check_hsaco(const struct want_kernel *w, const aql_host_kernel_descriptor *kd,
			const char *path)
{
	size_t size = 0;
	void *image = read_file(path, &size);
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;

	CHECK(image != NULL, "cannot read %s", path);
	if (!image)
		return;
	CHECK_OK(aql_code_object_open(image, size, &co));
	free(image);
	if (!co)
		return;
	CHECK(aql_code_object_get_info(co)->kind == AQL_CODE_OBJECT_AMDGPU, "%s: not AMDGPU", path);
	CHECK_OK(aql_code_object_kernel(co, w->name, &k));
	if (k) {
		const aql_kernel_metadata *md = k->metadata;

		CHECK(k->group_segment_size == kd->group_segment_fixed_size &&
		      md->group_segment_fixed_size == kd->group_segment_fixed_size,
		      "%s: static LDS: descriptor %u, metadata %u, host %u", path,
		      k->group_segment_size, md->group_segment_fixed_size,
		      kd->group_segment_fixed_size);
		CHECK(md->max_flat_workgroup_size == kd->max_flat_workgroup_size,
		      "%s: max work-group %u, host %u", path, md->max_flat_workgroup_size,
		      kd->max_flat_workgroup_size);
		CHECK(k->explicit_arg_count == kd->arg_count, "%s: %u explicit args, host %u",
		      path, k->explicit_arg_count, kd->arg_count);
		for (uint32_t i = 0; i < k->explicit_arg_count && i < kd->arg_count; i++) {
			const aql_kernel_arg *m = &md->args[i];
			const aql_host_kernel_arg *a = &kd->args[i];
			char mt[64], ht[64];

			normalize_type(m->type_name, mt, sizeof(mt));
			normalize_type(a->type_name, ht, sizeof(ht));
			CHECK(m->name && strcmp(m->name, a->name) == 0 && strcmp(mt, ht) == 0 &&
			      m->offset == a->offset && m->size == a->size &&
			      (unsigned)m->kind == a->kind &&
			      (unsigned)m->address_space == a->address_space &&
			      (m->flags & AQL_ARG_IS_CONST) == (a->flags & AQL_ARG_IS_CONST),
			      "%s arg %u: %s '%s' offset %u size %u kind %s as %s flags %#x; host: %s '%s' offset %u size %u kind %u as %u flags %#x",
			      path, i, m->name ? m->name : "?", m->type_name ? m->type_name : "?",
			      m->offset, m->size, aql_arg_kind_name(m->kind),
			      aql_address_space_name(m->address_space), m->flags, a->name,
			      a->type_name, a->offset, a->size, a->kind, a->address_space,
			      a->flags);
		}
	}
	aql_code_object_destroy(co);
}

/* The PTX of the kernel against its host descriptor. */
static void check_ptx(const struct want_kernel *w, const aql_host_kernel_descriptor *kd,
		      const char *path)
{
	size_t size = 0;
	char *text = read_file(path, &size);
	aql_ptx_module *m = NULL;
	const aql_ptx_entry *e = NULL;

	CHECK(text != NULL, "cannot read %s", path);
	if (!text)
		return;
	CHECK_OK(aql_ptx_parse(text, size, &m));
	free(text);
	if (!m)
		return;
	/* The target is the file name's: <kernel>.<target>.ptx. */
	const char *dot = strrchr(path, '.'), *sm = dot;

	while (sm > path && sm[-1] != '.' && sm[-1] != '/')
		sm--;
	CHECK(m->address_size == 64 && m->target && strlen(m->target) == (size_t)(dot - sm) &&
	      strncmp(m->target, sm, (size_t)(dot - sm)) == 0,
	      "%s: address size %u target %s", path, m->address_size, m->target);
	CHECK_OK(aql_ptx_entry_find(m, w->name, &e));
	if (e) {
		CHECK(e->linkage == AQL_PTX_LINKAGE_VISIBLE, "%s: entry not .visible", path);
		CHECK(e->param_count == kd->arg_count, "%s: %u params, host %u args", path,
		      e->param_count, kd->arg_count);
		for (uint32_t i = 0; i < e->param_count && i < kd->arg_count; i++) {
			const aql_ptx_param *p = &e->params[i];
			const aql_host_kernel_arg *a = &kd->args[i];

			CHECK(p->offset == a->offset && p->size == a->size && p->align == a->align,
			      "%s param %u (%s %s): offset %u size %u align %u; host %s: offset %u size %u align %u",
			      path, i, p->type, p->name, p->offset, p->size, p->align, a->name,
			      a->offset, a->size, a->align);
		}
	}
	aql_ptx_free(m);
}

/* ---------------------------------------------------------------------- */
/* Dispatch                                                                */

/*
 * Run k over grid in work-groups of wg, with dyn_lds bytes of dynamic LDS
 * after the static LDS. Returns 1 if the packet completed.
 */
static int run(const aql_kernel *k, const aql_kernarg_value *args, unsigned dims,
	       uint32_t gx, uint32_t gy, uint16_t wx, uint16_t wy, uint32_t dyn_lds)
{
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object;
	const uint32_t grid[3] = { gx, gy, 1 };
	const uint16_t wg[3] = { wx, wy, 1 };
	size_t bytes = (k->kernarg_size + 63) / 64 * 64;
	void *kernarg = aligned_alloc(64, bytes ? bytes : 64);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = th_dispatch(kd, kernarg, dims, grid, wg, done, 0);
	int64_t v = -1;

	p.group_segment_size = (kd->group_segment_fixed_size + 15) / 16 * 16 + dyn_lds;
	CHECK_OK(aql_kernarg_build(k, &p, args, k->explicit_arg_count, NULL, kernarg, bytes));
	if (th_submit(queue, &p) == AQL_OK)
		v = th_wait_done(done);
	CHECK(v == 0, "%s over %ux%u in %ux%u: completion %lld (%s)", k->name, gx, gy, wx, wy,
	      (long long)v, th_last_error);
	aql_signal_destroy(done);
	free(kernarg);
	return v == 0;
}

#define ARG(x) { &(x), sizeof(x) }

static uint32_t rng_state = 12345;
static uint32_t rng(void)
{
	rng_state = rng_state * 1103515245u + 12345u;
	return rng_state >> 1 ^ rng_state << 17;
}

static void run_saxpy(const aql_kernel *k)
{
	static const struct { uint32_t n, grid; uint16_t wg; } shapes[] = {
		{ 1000, 1000, 64 }, { 1000, 1024, 256 }, { 4097, 4097, 1024 }, { 5, 5, 1 },
		{ 100, 128, 128 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t n = shapes[s].n, good = 0;
		float a = 2.5f, *x = malloc((n + 16) * sizeof(float)),
		      *y = malloc((n + 16) * sizeof(float));
		const float *xc = x;
		aql_kernarg_value args[] = { ARG(a), ARG(xc), ARG(y), ARG(n) };

		for (uint32_t i = 0; i < n + 16; i++) {
			x[i] = (float)(i % 13);
			y[i] = (float)(i % 7);
		}
		if (run(k, args, 1, shapes[s].grid, 1, shapes[s].wg, 1, 0))
			for (uint32_t i = 0; i < n + 16; i++)
				good += y[i] == (i < n ? 2.5f * (float)(i % 13) + (float)(i % 7)
						       : (float)(i % 7));
		CHECK(good == n + 16, "saxpy n %u grid %u wg %u: %u of %u right", n,
		      shapes[s].grid, shapes[s].wg, good, n + 16);
		free(x);
		free(y);
	}
}

static void run_transpose(const aql_kernel *k)
{
	static const struct { uint16_t w; uint32_t h, gx, gy; uint16_t wx, wy; } shapes[] = {
		{ 37, 23, 37, 23, 8, 4 }, { 64, 64, 64, 64, 16, 16 }, { 1, 100, 1, 100, 1, 64 },
		{ 100, 1, 100, 1, 32, 1 }, { 37, 23, 40, 24, 8, 8 }, { 5, 3, 5, 3, 32, 32 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint16_t width = shapes[s].w;
		uint32_t height = shapes[s].h, n = width * height, good = 0;
		uint8_t shift = 3;
		uint64_t bias = 0x100000000ull;
		double scale = 1.5;
		uint32_t *in = malloc(n * sizeof(*in));
		uint64_t *out = calloc(n + 1, sizeof(*out));
		const uint32_t *inc = in;
		aql_kernarg_value args[] = { ARG(shift), ARG(inc), ARG(width), ARG(bias),
					     ARG(height), ARG(scale), ARG(out) };

		for (uint32_t i = 0; i < n; i++)
			in[i] = rng() % 1000;
		out[n] = 0xdeadbeef;
		if (run(k, args, 2, shapes[s].gx, shapes[s].gy, shapes[s].wx, shapes[s].wy, 0))
			for (uint32_t y = 0; y < height; y++)
				for (uint32_t x = 0; x < width; x++)
					good += out[(uint64_t)x * height + y] ==
						((uint64_t)(in[y * width + x] * scale) << shift) + bias;
		CHECK(good == n && out[n] == 0xdeadbeef,
		      "transpose %ux%u grid %ux%u wg %ux%u: %u of %u right", width, height,
		      shapes[s].gx, shapes[s].gy, shapes[s].wx, shapes[s].wy, good, n);
		free(in);
		free(out);
	}
}

static void run_reduce(const aql_kernel *k)
{
	static const struct { uint32_t n; uint16_t wg; } shapes[] = {
		{ 1000, 256 }, { 4096, 256 }, { 777, 100 }, { 50, 64 }, { 1, 1 }, { 300, 3 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t n = shapes[s].n, wg = shapes[s].wg, groups = (n + wg - 1) / wg, good = 0;
		uint32_t *in = malloc(n * sizeof(*in));
		uint64_t *sums = calloc(groups, sizeof(*sums)), total = 0, want_total = 0;
		uint64_t *totalp = &total;
		const uint32_t *inc = in;
		aql_kernarg_value args[] = { ARG(inc), ARG(n), ARG(sums), ARG(totalp) };

		for (uint32_t i = 0; i < n; i++) {
			in[i] = rng();
			want_total += in[i];
		}
		if (run(k, args, 1, n, 1, shapes[s].wg, 1, 0))
			for (uint32_t g = 0; g < groups; g++) {
				uint64_t want = 0;

				for (uint32_t i = g * wg; i < n && i < (g + 1) * wg; i++)
					want += in[i];
				good += sums[g] == want;
			}
		CHECK(good == groups && total == want_total,
		      "reduce n %u wg %u: %u of %u group sums right, total %llu want %llu", n, wg,
		      good, groups, (unsigned long long)total, (unsigned long long)want_total);
		free(in);
		free(sums);
	}
}

static void run_dynlds(const aql_kernel *k)
{
	static const struct { uint32_t n; uint16_t wg; uint32_t extra; } shapes[] = {
		{ 200, 64, 0 }, { 64, 64, 32 }, { 100, 7, 4 }, { 1, 1, 0 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t n = shapes[s].n, wg = shapes[s].wg, good = 0, status[3] = { 0, 0, 0 };
		uint32_t dyn = wg * 4 + shapes[s].extra;
		uint32_t *in = malloc(n * sizeof(*in)), *out = calloc(n, sizeof(*out));
		uint32_t *statusp = status;
		const uint32_t *inc = in;
		aql_kernarg_value args[] = { ARG(inc), ARG(out), ARG(n), ARG(statusp) };

		for (uint32_t i = 0; i < n; i++)
			in[i] = rng();
		if (run(k, args, 1, n, 1, shapes[s].wg, 1, dyn))
			for (uint32_t i = 0; i < n; i++) {
				uint32_t start = i / wg * wg;
				uint32_t size = n - start < wg ? n - start : wg;

				good += out[i] == in[start + size - 1 - (i - start)];
			}
		CHECK(good == n && status[0] == 0,
		      "dynlds n %u wg %u: %u of %u reversed, %u errors", n, wg, good, n, status[0]);
		CHECK(status[1] == dyn && status[2] == 272,
		      "dynlds wg %u: dynamic LDS %u bytes at static + %u, want %u at + 272", wg,
		      status[1], status[2], dyn);
		free(in);
		free(out);
	}
}

static void run_histogram(const aql_kernel *k)
{
	static const struct { uint32_t n; uint16_t wg; } shapes[] = {
		{ 10000, 128 }, { 1000, 1 }, { 5000, 1000 }, { 64, 64 }, { 3, 32 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t n = shapes[s].n, bins[64] = { 0 }, want[64] = { 0 }, good = 0;
		uint32_t *data = malloc(n * sizeof(*data)), *binsp = bins;
		const uint32_t *datac = data;
		aql_kernarg_value args[] = { ARG(datac), ARG(n), ARG(binsp) };

		for (uint32_t i = 0; i < n; i++) {
			data[i] = rng() % 1000;
			want[data[i] % 64]++;
		}
		if (run(k, args, 1, n, 1, shapes[s].wg, 1, 0))
			for (unsigned b = 0; b < 64; b++)
				good += bins[b] == want[b];
		CHECK(good == 64, "histogram n %u wg %u: %u of 64 bins right", n, shapes[s].wg, good);
		free(data);
	}
}

static void run_atomics(const aql_kernel *k)
{
	static const struct { uint32_t n; uint16_t wg; } shapes[] = {
		{ 5000, 64 }, { 1000, 1000 }, { 33, 8 }, { 1, 1 },
	};

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		uint32_t n = shapes[s].n, umin = UINT32_MAX, umax = 0, found = 0;
		int32_t smin = INT32_MAX, smax = INT32_MIN;
		uint64_t sum = 0, subs = 0, wide[4] = { 0 }, *widep = wide;
		uint32_t g[9] = { UINT32_MAX, 0, (uint32_t)INT32_MAX, (uint32_t)INT32_MIN, 0, 12345,
				  0, 0, n + 100 };
		uint32_t *vals = malloc(n * sizeof(*vals)), *gp = g;
		const uint32_t *valsc = vals;
		aql_kernarg_value args[] = { ARG(valsc), ARG(n), ARG(gp), ARG(widep) };

		for (uint32_t i = 0; i < n; i++) {
			vals[i] = rng();
			umin = vals[i] < umin ? vals[i] : umin;
			umax = vals[i] > umax ? vals[i] : umax;
			smin = (int32_t)vals[i] < smin ? (int32_t)vals[i] : smin;
			smax = (int32_t)vals[i] > smax ? (int32_t)vals[i] : smax;
			sum += vals[i];
			subs += n + 100 - i;
		}
		if (!run(k, args, 1, n, 1, shapes[s].wg, 1, 0))
			goto out;
		for (uint32_t i = 0; i < n; i++)
			found += g[5] == vals[i];
		CHECK(g[0] == umin && g[1] == umax && (int32_t)g[2] == smin && (int32_t)g[3] == smax,
		      "atomics n %u: min/max u32 %u %u (want %u %u), i32 %d %d (want %d %d)", n,
		      g[0], g[1], umin, umax, (int32_t)g[2], (int32_t)g[3], smin, smax);
		CHECK(g[4] == n && wide[2] == n, "atomics n %u: CAS counters %u and %llu", n, g[4],
		      (unsigned long long)wide[2]);
		CHECK(found > 0 && wide[1] + g[5] == 12345 + sum,
		      "atomics n %u: exchange lost or made up a value (last %u)", n, g[5]);
		CHECK(wide[0] == sum, "atomics n %u: add_u64 %llu, want %llu", n,
		      (unsigned long long)wide[0], (unsigned long long)sum);
		CHECK(g[6] == n && g[7] == 0, "atomics n %u: LDS CAS count %u, LDS min/max errors %u",
		      n, g[6], g[7]);
		CHECK(g[8] == 100 && wide[3] == subs, "atomics n %u: sub_u32 left %u, olds sum %llu",
		      n, g[8], (unsigned long long)wide[3]);
out:
		free(vals);
	}
}

static void (*const runners[KERNELS])(const aql_kernel *) = {
	run_saxpy, run_transpose, run_reduce, run_dynlds, run_histogram, run_atomics,
};

/* ---------------------------------------------------------------------- */

static void test_kernel(size_t w_index)
{
	const struct want_kernel *w = &wanted[w_index];
	const char *host = NULL;
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;
	unsigned hsaco = 0, ptx = 0;

	for (int i = 0; i < file_argc && !host; i++)
		host = file_for(w->name, "host", i);
	CHECK(host != NULL, "%s: no host code object among the arguments", w->name);
	if (!host)
		return;
	CHECK_OK(aql_code_object_load_file(th_agent(), host, NULL, &co));
	if (!co)
		return;
	CHECK(aql_code_object_get_info(co)->kind == AQL_CODE_OBJECT_HOST &&
	      aql_code_object_get_info(co)->kernel_count == 1, "%s: host object kind/kernels", host);
	CHECK_OK(aql_code_object_kernel(co, w->name, &k));
	if (k && k->kernel_object) {
		const aql_host_kernel_descriptor *kd =
			(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object;

		check_host_descriptor(w, k);
		runners[w_index](k);
		for (int i = 0; i < file_argc; i++) {
			const char *f = file_for(w->name, NULL, i);

			if (f && has_suffix(f, ".hsaco")) {
				check_hsaco(w, kd, f);
				hsaco++;
			} else if (f && has_suffix(f, ".ptx")) {
				check_ptx(w, kd, f);
				ptx++;
			}
		}
		printf("%s: ran on the CPU agent; %u AMDGPU code objects and %u PTX agree\n",
		       w->name, hsaco, ptx);
	}
	aql_code_object_destroy(co);
}

int main(int argc, char **argv)
{
	file_argc = argc - 1;
	file_argv = argv + 1;
	queue = th_queue(64, AQL_QUEUE_MULTI, 0);
	for (size_t i = 0; i < KERNELS; i++)
		test_kernel(i);
	aql_queue_destroy(queue);
	return th_finish();
}
