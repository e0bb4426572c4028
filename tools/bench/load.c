/* SPDX-License-Identifier: MIT */
/*
 * aql-bench --load FILE: code-object loading and metadata reading, next
 * to the ROCm code object manager (comgr) if it is installed.
 *
 *
 * load_ms
 *	Per round: read FILE, aql_code_object_load() it on the default
 *	agent, get its info (the kernels are ready); then, untimed,
 *	destroy it. One warm-up round. Median, p90, min, max in ms.
 *
 * metadata_us_per_kernel
 *	Per round: reps times aql_code_object_open() on the bytes already
 *	read (ELF, metadata, descriptors), a walk reading every kernel's
 *	name, sizes, register counts and arguments, then destroy; the
 *	round's time / reps / kernels. reps is calibrated so that a round
 *	lasts a few milliseconds.
 *
 * metadata_parse_us_per_kernel
 *	The same with aql_metadata_parse() on the metadata note alone, to
 *	tell the parser's share from the ELF and descriptor work.
 *	The metadata readers (these two and comgr below) take turns round
 *	by round, so that a noisy spell hits them all alike.
 *
 * comgr_metadata_us_per_kernel
 *	The same for the ROCm code object manager, dlopen()ed at run time
 *	(never linked; AQL_BENCH_COMGR names another library file):
 *	amd_comgr_create_data(EXECUTABLE), set_data, get_data_metadata, and
 *	a walk through amdhsa.kernels reading the same keys, every scalar
 *	converted as a consumer would. Both walks are checked to agree on
 *	kernels, arguments, names and sizes before anything is timed.
 *	Without comgr this peer is skipped, and said so.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gelf.h>
#include <libelf.h>

#include <aql/code_object.h>
#include <aql/metadata.h>

#include "bench.h"

#define NT_AMDGPU_METADATA_NUM	32

struct comgr;

/* The metadata readers --load times, round by round in turn. */
enum { READER_AQL, READER_PARSE, READER_COMGR, READERS };

/* What --load works on, read once before the first benchmark. */
struct load_ctx {
	const char *path;
	unsigned char *image;
	size_t size;
	uint32_t kernels;
	uint32_t args;
	void *note;		/* copy of the NT_AMDGPU_METADATA descriptor */
	size_t note_size;
	int inspect_only;	/* a target aql opens but does not dispatch */
	struct comgr *comgr;	/* NULL: not installed */
	char comgr_why[320];	/* why it is NULL */
	struct duration meta[READERS];	/* see measure_readers() */
};

static struct load_ctx the_load_ctx;

static struct load_ctx *load_of(const struct ctx *ctx)
{
	return ctx->state;
}

/*
 * What a walk read, summed so that the two walks can be compared: names
 * hashed, sizes and counts added up. Reading every value also keeps the
 * compiler from dropping the walk.
 */
struct walk_sum {
	uint64_t kernels;
	uint64_t args;
	uint64_t names;		/* FNV-1a of kernel, symbol, arg and type names */
	uint64_t sizes;		/* kernel sizes, register counts, arg offsets/sizes */
};

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t hash_str(const char *s)
{
	return s ? fnv1a(s, strlen(s)) : 0;
}

static void walk_aql(const aql_metadata *meta, struct walk_sum *sum)
{
	const aql_kernel_metadata *md;
	const aql_kernel_arg *a;
	uint32_t i, j;

	memset(sum, 0, sizeof(*sum));
	for (i = 0; i < meta->kernel_count; i++) {
		md = &meta->kernels[i];
		sum->kernels++;
		sum->names += hash_str(md->name) + hash_str(md->symbol);
		sum->sizes += (uint64_t)md->kernarg_segment_size +
			      md->kernarg_segment_align +
			      md->group_segment_fixed_size +
			      md->private_segment_fixed_size +
			      md->wavefront_size + md->sgpr_count +
			      md->vgpr_count + md->max_flat_workgroup_size;
		for (j = 0; j < md->arg_count; j++) {
			a = &md->args[j];
			sum->args++;
			sum->names += hash_str(a->name) + hash_str(a->type_name);
			sum->sizes += (uint64_t)a->offset + a->size + a->kind +
				      a->address_space + a->access;
		}
	}
}

/* One aql round unit: open, walk, destroy. */
static int aql_meta_once(const struct load_ctx *l, struct walk_sum *sum)
{
	aql_code_object *co;
	aql_status st;

	st = aql_code_object_open(l->image, l->size, &co);
	if (st != AQL_OK)
		return fail("aql_code_object_open", st);
	walk_aql(aql_code_object_get_info(co)->metadata, sum);
	aql_code_object_destroy(co);
	return 0;
}

static int dispatchable(const struct load_ctx *l)
{
	const aql_code_object_info *info;
	aql_code_object *co;
	int ok;

	if (aql_code_object_open(l->image, l->size, &co) != AQL_OK)
		return 1;
	info = aql_code_object_get_info(co);
	ok = info->kind != AQL_CODE_OBJECT_AMDGPU || aql_target_dispatchable(&info->target);
	aql_code_object_destroy(co);
	return ok;
}

/* The parser alone, on the note found by load_setup(). */
static int aql_parse_once(const struct load_ctx *l, struct walk_sum *sum)
{
	aql_metadata *md;
	aql_status st;

	st = aql_metadata_parse(l->note, l->note_size, &md);
	if (st != AQL_OK)
		return fail("aql_metadata_parse", st);
	walk_aql(md, sum);
	aql_metadata_free(md);
	return 0;
}

/*
 * A copy of the NT_AMDGPU_METADATA note descriptor of the image in
 * l->note, or NULL if there is none (a host code object). Only for the
 * parser-alone figure, so any libelf trouble just means "no note".
 */
static void find_metadata_note(struct load_ctx *l)
{
	Elf *elf;
	Elf_Scn *scn = NULL;
	Elf_Data *data;
	GElf_Shdr sh;
	GElf_Nhdr nh;
	size_t off, name_off, desc_off;

	l->note = NULL;
	l->note_size = 0;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return;
	elf = elf_memory((char *)l->image, l->size);
	if (!elf)
		return;
	while (!l->note && (scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
			continue;
		data = elf_getdata(scn, NULL);
		off = 0;
		while (data && (off = gelf_getnote(data, off, &nh, &name_off,
						   &desc_off)) > 0) {
			if (nh.n_type != NT_AMDGPU_METADATA_NUM ||
			    nh.n_namesz != 7 ||
			    memcmp((char *)data->d_buf + name_off, "AMDGPU", 7))
				continue;
			/* libelf's buffer dies with elf_end(): copy. */
			l->note = malloc(nh.n_descsz ? nh.n_descsz : 1);
			if (l->note) {
				memcpy(l->note, (char *)data->d_buf + desc_off,
				       nh.n_descsz);
				l->note_size = nh.n_descsz;
			}
			break;
		}
	}
	elf_end(elf);
}

/*
 * The ROCm code object manager, reached through dlopen() only, so aql
 * neither links it nor needs its header. These declarations follow its
 * C ABI (amd_comgr.h, interface 2.x): handles are one-word structs and
 * statuses small enums.
 */
typedef struct { uint64_t handle; } cg_data;
typedef struct { uint64_t handle; } cg_node;
typedef int cg_status;

#define CG_SUCCESS		0
#define CG_DATA_KIND_EXECUTABLE	0x8
#define CG_METADATA_KIND_STRING	0x1

struct comgr {
	void *lib;
	char path[256];
	size_t major, minor;
	void (*get_version)(size_t *major, size_t *minor);
	cg_status (*status_string)(cg_status st, const char **str);
	cg_status (*create_data)(int kind, cg_data *data);
	cg_status (*release_data)(cg_data data);
	cg_status (*set_data)(cg_data data, size_t size, const char *bytes);
	cg_status (*get_data_metadata)(cg_data data, cg_node *md);
	cg_status (*destroy_metadata)(cg_node md);
	cg_status (*metadata_lookup)(cg_node map, const char *key, cg_node *val);
	cg_status (*get_metadata_kind)(cg_node md, int *kind);
	cg_status (*get_metadata_string)(cg_node md, size_t *size, char *str);
	cg_status (*get_metadata_list_size)(cg_node md, size_t *size);
	cg_status (*index_list_metadata)(cg_node md, size_t i, cg_node *val);
};

static int comgr_fail(const struct comgr *cg, const char *call, cg_status st)
{
	const char *str = NULL;

	if (cg->status_string(st, &str) != CG_SUCCESS || !str)
		str = "unknown status";
	progress_clear();
	fprintf(stderr, "aql-bench: %s failed: status %d (%s)\n", call, st, str);
	return -1;
}

/*
 * Open comgr; NULL with the reason in why when it is not there (or is a
 * library without the calls the walk needs), which skips the peer.
 */
static struct comgr *comgr_open(char *why, size_t len)
{
	const char *name = getenv("AQL_BENCH_COMGR");
	struct comgr *cg;
	const char *missing = NULL;

	if (!name || !*name)
		name = COMGR_DEFAULT_LIB;
	cg = calloc(1, sizeof(*cg));
	if (!cg) {
		snprintf(why, len, "comgr: out of memory, peer skipped");
		return NULL;
	}
	cg->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!cg->lib) {
		snprintf(why, len, "comgr: not installed, peer skipped (%s)",
			 dlerror());
		free(cg);
		return NULL;
	}
	snprintf(cg->path, sizeof(cg->path), "%s", name);
#define CG_SYM(field, sym)						\
	do {								\
		*(void **)&cg->field = dlsym(cg->lib, sym);		\
		if (!cg->field && !missing)				\
			missing = sym;					\
	} while (0)
	CG_SYM(get_version, "amd_comgr_get_version");
	CG_SYM(status_string, "amd_comgr_status_string");
	CG_SYM(create_data, "amd_comgr_create_data");
	CG_SYM(release_data, "amd_comgr_release_data");
	CG_SYM(set_data, "amd_comgr_set_data");
	CG_SYM(get_data_metadata, "amd_comgr_get_data_metadata");
	CG_SYM(destroy_metadata, "amd_comgr_destroy_metadata");
	CG_SYM(metadata_lookup, "amd_comgr_metadata_lookup");
	CG_SYM(get_metadata_kind, "amd_comgr_get_metadata_kind");
	CG_SYM(get_metadata_string, "amd_comgr_get_metadata_string");
	CG_SYM(get_metadata_list_size, "amd_comgr_get_metadata_list_size");
	CG_SYM(index_list_metadata, "amd_comgr_index_list_metadata");
#undef CG_SYM
	if (missing) {
		snprintf(why, len, "comgr: %s lacks %s, peer skipped", name,
			 missing);
		dlclose(cg->lib);
		free(cg);
		return NULL;
	}
	cg->get_version(&cg->major, &cg->minor);
	return cg;
}

static void comgr_close(struct comgr *cg)
{
	if (!cg)
		return;
	dlclose(cg->lib);
	free(cg);
}

/*
 * A string-valued key of a map, as a consumer reads it: look up, ask the
 * size, copy. comgr gives numbers as strings too. Absent keys leave buf
 * empty and *found false; that is not an error.
 */
static int cg_get(const struct comgr *cg, cg_node map, const char *key,
		  char *buf, size_t len, bool *found)
{
	cg_node val;
	size_t n = 0;
	int kind = 0;
	cg_status st;

	buf[0] = 0;
	*found = false;
	if (cg->metadata_lookup(map, key, &val) != CG_SUCCESS)
		return 0;
	st = cg->get_metadata_kind(val, &kind);
	if (st == CG_SUCCESS && kind == CG_METADATA_KIND_STRING) {
		st = cg->get_metadata_string(val, &n, NULL);
		if (st == CG_SUCCESS && n > len)
			n = len;	/* longer than any name we compare */
		if (st == CG_SUCCESS)
			st = cg->get_metadata_string(val, &n, buf);
		buf[len - 1] = 0;
		*found = st == CG_SUCCESS;
	}
	cg->destroy_metadata(val);
	if (st != CG_SUCCESS)
		return comgr_fail(cg, "amd_comgr_get_metadata_string", st);
	return 0;
}

static int cg_hash(const struct comgr *cg, cg_node map, const char *key,
		   uint64_t *acc)
{
	char buf[1024];
	bool found;

	if (cg_get(cg, map, key, buf, sizeof(buf), &found))
		return -1;
	if (found)
		*acc += fnv1a(buf, strlen(buf));
	return 0;
}

static int cg_number(const struct comgr *cg, cg_node map, const char *key,
		     uint64_t *acc)
{
	char buf[64];
	bool found;

	if (cg_get(cg, map, key, buf, sizeof(buf), &found))
		return -1;
	if (found)
		*acc += strtoull(buf, NULL, 0);
	return 0;
}

/* Keys read from every kernel map, and from every .args entry. */
static const char *const cg_kernel_numbers[] = {
	".kernarg_segment_size", ".kernarg_segment_align",
	".group_segment_fixed_size", ".private_segment_fixed_size",
	".wavefront_size", ".sgpr_count", ".vgpr_count",
	".max_flat_workgroup_size",
};

static const char *const cg_arg_strings[] = {
	".value_kind", ".address_space", ".access",
};

/* The enum aql gives for what comgr spells out, so that sums compare. */
static uint64_t cg_enum_value(const char *key, const char *val)
{
	static const char *const spaces[] = {
		"", "private", "global", "constant", "local", "generic", "region",
	};
	static const char *const access[] = {
		"", "read_only", "write_only", "read_write",
	};
	uint32_t i;

	if (!strcmp(key, ".address_space")) {
		for (i = 1; i < ARRAY_SIZE(spaces); i++)
			if (!strcmp(val, spaces[i]))
				return i;
	} else if (!strcmp(key, ".access")) {
		for (i = 1; i < ARRAY_SIZE(access); i++)
			if (!strcmp(val, access[i]))
				return i;
	} else {
		for (i = 1; i < AQL_ARG_KIND_COUNT; i++)
			if (!strcmp(val, aql_arg_kind_name((enum aql_arg_kind)i)))
				return i;
	}
	return 0;
}

static int cg_walk_arg(const struct comgr *cg, cg_node arg,
		       struct walk_sum *sum)
{
	char buf[64];
	bool found;
	size_t i;

	sum->args++;
	if (cg_hash(cg, arg, ".name", &sum->names) ||
	    cg_hash(cg, arg, ".type_name", &sum->names) ||
	    cg_number(cg, arg, ".offset", &sum->sizes) ||
	    cg_number(cg, arg, ".size", &sum->sizes))
		return -1;
	for (i = 0; i < ARRAY_SIZE(cg_arg_strings); i++) {
		if (cg_get(cg, arg, cg_arg_strings[i], buf, sizeof(buf), &found))
			return -1;
		if (found)
			sum->sizes += cg_enum_value(cg_arg_strings[i], buf);
	}
	return 0;
}

static int cg_walk_kernel(const struct comgr *cg, cg_node kern,
			  struct walk_sum *sum)
{
	cg_node args, arg;
	size_t nargs = 0, i;
	cg_status st;
	int rc = 0;

	sum->kernels++;
	if (cg_hash(cg, kern, ".name", &sum->names) ||
	    cg_hash(cg, kern, ".symbol", &sum->names))
		return -1;
	for (i = 0; i < ARRAY_SIZE(cg_kernel_numbers); i++)
		if (cg_number(cg, kern, cg_kernel_numbers[i], &sum->sizes))
			return -1;
	if (cg->metadata_lookup(kern, ".args", &args) != CG_SUCCESS)
		return 0;	/* a kernel without arguments */
	st = cg->get_metadata_list_size(args, &nargs);
	if (st != CG_SUCCESS)
		rc = comgr_fail(cg, "amd_comgr_get_metadata_list_size", st);
	for (i = 0; !rc && i < nargs; i++) {
		st = cg->index_list_metadata(args, i, &arg);
		if (st != CG_SUCCESS) {
			rc = comgr_fail(cg, "amd_comgr_index_list_metadata", st);
			break;
		}
		rc = cg_walk_arg(cg, arg, sum);
		cg->destroy_metadata(arg);
	}
	cg->destroy_metadata(args);
	return rc;
}

/* One comgr round unit: data object, metadata, walk, release. */
static int comgr_meta_once(const struct load_ctx *l, struct walk_sum *sum)
{
	const struct comgr *cg = l->comgr;
	cg_data data = { 0 };
	cg_node root = { 0 }, kernels = { 0 }, kern;
	bool have_root = false, have_kernels = false;
	size_t n = 0, i;
	cg_status st;
	int rc = -1;

	memset(sum, 0, sizeof(*sum));
	st = cg->create_data(CG_DATA_KIND_EXECUTABLE, &data);
	if (st != CG_SUCCESS)
		return comgr_fail(cg, "amd_comgr_create_data", st);
	st = cg->set_data(data, l->size, (const char *)l->image);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_set_data", st);
		goto out;
	}
	st = cg->get_data_metadata(data, &root);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_get_data_metadata", st);
		goto out;
	}
	have_root = true;
	st = cg->metadata_lookup(root, "amdhsa.kernels", &kernels);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_metadata_lookup(amdhsa.kernels)", st);
		goto out;
	}
	have_kernels = true;
	st = cg->get_metadata_list_size(kernels, &n);
	if (st != CG_SUCCESS) {
		comgr_fail(cg, "amd_comgr_get_metadata_list_size", st);
		goto out;
	}
	for (i = 0; i < n; i++) {
		st = cg->index_list_metadata(kernels, i, &kern);
		if (st != CG_SUCCESS) {
			comgr_fail(cg, "amd_comgr_index_list_metadata", st);
			goto out;
		}
		rc = cg_walk_kernel(cg, kern, sum);
		cg->destroy_metadata(kern);
		if (rc)
			goto out;
	}
	rc = 0;
out:
	if (have_kernels)
		cg->destroy_metadata(kernels);
	if (have_root)
		cg->destroy_metadata(root);
	cg->release_data(data);
	return rc;
}

typedef int (*meta_fn)(const struct load_ctx *l, struct walk_sum *sum);

/* reps calls of once; the time per kernel in us. */
static int time_reps(const struct load_ctx *l, meta_fn once, uint32_t reps,
		     double *us)
{
	struct walk_sum sum;
	uint64_t t0 = now_ns();
	uint32_t i;

	for (i = 0; i < reps; i++)
		if (once(l, &sum))
			return -1;
	*us = (double)(now_ns() - t0) / 1e3 / reps / l->kernels;
	return 0;
}

/*
 * All readers at once, interleaved: round r times aql, then the parser,
 * then comgr, so that a slow spell of this (virtual) machine hits every
 * reader alike instead of one metric. Each reader first runs once
 * untimed, which warms caches and lazy set-up and calibrates its reps.
 * The results wait in load_of(ctx)->meta for the benches that report them.
 */
static int measure_readers(struct ctx *ctx)
{
	struct load_ctx *l = load_of(ctx);
	const meta_fn fns[READERS] = {
		aql_meta_once,
		l->note ? aql_parse_once : NULL,
		l->comgr ? comgr_meta_once : NULL,
	};
	uint32_t n = ctx->sz.meta_rounds, reps[READERS] = { 0 }, r, k;
	double *v[READERS] = { NULL };
	double one;
	int rc = -1;

	if (!l->kernels) {
		progress_clear();
		fprintf(stderr, "aql-bench: %s has no kernels: no time per "
			"kernel to report\n", l->path);
		return -1;
	}
	for (k = 0; k < READERS; k++) {
		if (!fns[k])
			continue;
		v[k] = calloc(n, sizeof(*v[k]));
		if (!v[k]) {
			fail_errno("calloc", ENOMEM);
			goto out;
		}
		if (time_reps(l, fns[k], 1, &one))
			goto out;
		one *= 1e3 * l->kernels;	/* ns per call */
		reps[k] = one >= 1 ? (uint32_t)(ctx->sz.meta_round_ns / one) : 1000;
		reps[k] = reps[k] < 1 ? 1 : reps[k] > 1000 ? 1000 : reps[k];
	}
	for (r = 0; r < n; r++)
		for (k = 0; k < READERS; k++)
			if (fns[k] && time_reps(l, fns[k], reps[k], &v[k][r]))
				goto out;
	for (k = 0; k < READERS; k++)
		if (fns[k])
			duration_stats(v[k], n, "us/kernel", reps[k], l->kernels,
				       &l->meta[k]);
	rc = 0;
out:
	for (k = 0; k < READERS; k++)
		free(v[k]);
	return rc;
}

static void report_reader(struct ctx *ctx, struct result *res, int k)
{
	res->kind = RESULT_DURATION;
	res->dur = load_of(ctx)->meta[k];
}

static int bench_meta_aql(struct ctx *ctx, struct result *res)
{
	if (measure_readers(ctx))
		return -1;
	report_reader(ctx, res, READER_AQL);
	return 0;
}

static int bench_parse_aql(struct ctx *ctx, struct result *res)
{
	if (!load_of(ctx)->note) {
		res->kind = RESULT_SKIPPED;
		res->skipped = "no NT_AMDGPU_METADATA note (host code object?)";
		return 0;
	}
	report_reader(ctx, res, READER_PARSE);
	return 0;
}

static int bench_meta_comgr(struct ctx *ctx, struct result *res)
{
	if (!load_of(ctx)->comgr) {
		res->kind = RESULT_SKIPPED;
		res->skipped = load_of(ctx)->comgr_why;
		return 0;
	}
	report_reader(ctx, res, READER_COMGR);
	return 0;
}

static int bench_load_ms(struct ctx *ctx, struct result *res)
{
	const struct load_ctx *l = load_of(ctx);
	uint32_t n = ctx->sz.load_rounds, r;
	const aql_code_object_info *info;
	aql_code_object *co;
	unsigned char *buf;
	size_t size;
	aql_status st;
	uint64_t t0, t;
	double *v = calloc(n, sizeof(*v));
	int rc = -1;

	if (!v)
		return fail_errno("calloc", ENOMEM);
	if (l->inspect_only) {
		res->kind = RESULT_SKIPPED;
		res->skipped = "aql opens this target but does not dispatch it (gfx6-gfx8)";
		free(v);
		return 0;
	}
	/* Round 0 warms up and is not recorded. */
	for (r = 0; r <= n; r++) {
		t0 = now_ns();
		if (slurp(l->path, &buf, &size)) {
			read_fail(l->path, errno);
			goto out;
		}
		st = aql_code_object_load(ctx->agent, buf, size, NULL, &co);
		if (st != AQL_OK) {
			free(buf);
			fail("aql_code_object_load", st);
			goto out;
		}
		info = aql_code_object_get_info(co);
		t = now_ns() - t0;
		if (info->kernel_count != l->kernels) {
			progress_clear();
			fprintf(stderr, "aql-bench: loading %s gave %" PRIu32
				" kernels, opening it %" PRIu32 "\n", l->path,
				info->kernel_count, l->kernels);
			aql_code_object_destroy(co);
			free(buf);
			goto out;
		}
		aql_code_object_destroy(co);
		free(buf);
		if (r)
			v[r - 1] = (double)t / 1e6;
	}
	res->kind = RESULT_DURATION;
	duration_stats(v, n, "ms", 1, l->kernels, &res->dur);
	rc = 0;
out:
	free(v);
	return rc;
}

/*
 * Read the file, open it once for its kernel count, and check that the
 * comgr walk, if comgr is there, reads the same things the aql walk does.
 */
static int load_setup(struct ctx *ctx)
{
	struct load_ctx *l = &the_load_ctx;
	struct walk_sum a, c;

	ctx->state = l;
	l->path = ctx->opts->path;
	if (slurp(l->path, &l->image, &l->size))
		return read_fail(l->path, errno);
	if (aql_meta_once(l, &a)) {
		fprintf(stderr, "aql-bench: %s is not a code object libaql "
			"reads\n", l->path);
		return -1;
	}
	l->kernels = (uint32_t)a.kernels;
	l->inspect_only = !dispatchable(l);
	l->args = (uint32_t)a.args;
	find_metadata_note(l);
	if (!l->note) {
		/* A host code object: nothing comgr could read. */
		snprintf(l->comgr_why, sizeof(l->comgr_why),
			 "comgr: no AMDGPU metadata in %s, peer skipped", l->path);
		return 0;
	}
	l->comgr = comgr_open(l->comgr_why, sizeof(l->comgr_why));
	if (!l->comgr)
		return 0;
	if (comgr_meta_once(l, &c)) {
		fprintf(stderr, "aql-bench: comgr cannot read %s\n", l->path);
		return -1;
	}
	if (memcmp(&a, &c, sizeof(a))) {
		fprintf(stderr, "aql-bench: aql and comgr read %s differently: "
			"kernels %" PRIu64 "/%" PRIu64 ", args %" PRIu64 "/%"
			PRIu64 ", names %016" PRIx64 "/%016" PRIx64
			", sizes %" PRIu64 "/%" PRIu64 "\n", l->path,
			a.kernels, c.kernels, a.args, c.args, a.names, c.names,
			a.sizes, c.sizes);
		return -1;
	}
	return 0;
}

static void load_cleanup(struct ctx *ctx)
{
	comgr_close(load_of(ctx)->comgr);
	load_of(ctx)->comgr = NULL;
	free(load_of(ctx)->image);
	load_of(ctx)->image = NULL;
	free(load_of(ctx)->note);
	load_of(ctx)->note = NULL;
}

static int load_banner(const struct ctx *ctx)
{
	const struct load_ctx *l = load_of(ctx);
	aql_agent_info info;
	aql_status st = aql_agent_get_info(ctx->agent, &info);

	if (st != AQL_OK)
		return fail("aql_agent_get_info", st);
	printf("aql-bench --load %s: %zu bytes, %" PRIu32 " kernels, %" PRIu32
	       " args\nagent \"%s\", %s run\n", l->path, l->size, l->kernels,
	       l->args, info.name, ctx->opts->quick ? "quick" : "full");
	if (l->comgr)
		printf("comgr: %s, interface %zu.%zu\n", l->comgr->path,
		       l->comgr->major, l->comgr->minor);
	else
		printf("%s\n", l->comgr_why);
	putchar('\n');
	return 0;
}

/* The peer runs right after aql, on the same bytes and the same CPU state. */
static const struct bench load_benches[] = {
	{ "load_ms",			  bench_load_ms },
	{ "metadata_us_per_kernel",	  bench_meta_aql },
	{ "metadata_parse_us_per_kernel", bench_parse_aql },
	{ "comgr_metadata_us_per_kernel", bench_meta_comgr },
};

static const struct goal load_goals[] = {
	{ "ratio_comgr_over_aql",
	  "comgr / aql metadata_us_per_kernel",
	  "comgr_metadata_us_per_kernel", "metadata_us_per_kernel", true, 10.0, NULL },
};

const struct mode bench_mode_load = {
	.name = "load",
	.benches = load_benches,
	.nbenches = ARRAY_SIZE(load_benches),
	.goals = load_goals,
	.ngoals = ARRAY_SIZE(load_goals),
	.setup = load_setup,
	.cleanup = load_cleanup,
	.banner = load_banner,
};
