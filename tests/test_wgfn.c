/* SPDX-License-Identifier: MIT */
/*
 * Work-group functions (AQL_KERNEL_NO_BARRIER's host build) and the CPU
 * agent's default geometry:
 *  - every id and size a kernel asks for, in its body or in a helper
 *    function outside it, is the same as the fiber path's and as computed
 *    here, for grids that are not multiples of the group, 2-D and 3-D,
 *    groups of one and groups larger than the grid;
 *  - a code object that asks for ids only in kernel bodies carries no
 *    aql_ids_outside mark (its work-group functions take the loop that
 *    vectorises), one that asks in a helper does;
 *  - a kernel with a barrier still meets it (fibers);
 *  - the default work-group of a typed launch is the largest allowed for
 *    a work-group function, 256 for fibers;
 *  - a typed launch of 256 work-items with the default work-group runs
 *    on two workers of a two-worker agent at once; an explicit work-group
 *    of 256 stays one group.
 * Usage: test_wgfn IDS.so HELPER.so
 */
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "wgfn/ids.h"

struct geom {
	uint32_t grid[3];
	uint16_t wg[3];
};

static const struct geom geoms[] = {
	{ { 1000, 1, 1 }, { 64, 1, 1 } },	/* last group partial */
	{ { 37, 5, 1 }, { 8, 2, 1 } },		/* 2-D, partial in x and y */
	{ { 9, 7, 5 }, { 4, 3, 2 } },		/* 3-D, partial in all */
	{ { 300, 1, 1 }, { 1, 1, 1 } },		/* groups of one */
	{ { 5, 3, 3 }, { 16, 4, 4 } },		/* one group, larger than the grid */
	{ { 1, 1, 1 }, { 1, 1, 1 } },
};

static aql_agent *agent;
static aql_queue *queue;

static uint32_t groups_of(uint32_t grid, uint32_t wg)
{
	return grid / wg + (grid % wg != 0);
}

/* Run kernel name of co over g, recording into a fresh array. */
static uint32_t *run_ids(aql_code_object *co, const char *name, const struct geom *g)
{
	const aql_kernel *k = th_kernel(co, name);
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)k->kernel_object;
	size_t n = (size_t)g->grid[0] * g->grid[1] * g->grid[2];
	uint32_t *rec = calloc(n * WGFN_STRIDE, sizeof(*rec));
	void *kernarg = aligned_alloc(16, 16);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p;
	unsigned dims = g->grid[2] > 1 ? 3 : g->grid[1] > 1 ? 2 : 1;

	if (!rec || !kernarg)
		th_stop("no memory");
	memcpy(kernarg, &rec, sizeof(rec));
	p = th_dispatch(kd, kernarg, dims, g->grid, g->wg, done, 1);
	th_submit(queue, &p);
	CHECK(th_wait_done(done) == 0, "%s on %ux%ux%u / %ux%ux%u failed: %s", name,
	      g->grid[0], g->grid[1], g->grid[2], g->wg[0], g->wg[1], g->wg[2], th_last_error);
	aql_signal_destroy(done);
	free(kernarg);
	return rec;
}

/* rec against the ids each work-item must have seen. */
static void check_ids(const char *name, const struct geom *g, const uint32_t *rec)
{
	uint32_t bad = 0, i = 0;

	for (uint32_t z = 0; z < g->grid[2]; z++)
		for (uint32_t y = 0; y < g->grid[1]; y++)
			for (uint32_t x = 0; x < g->grid[0]; x++, i++) {
				const uint32_t *r = rec + (size_t)i * WGFN_STRIDE;
				uint32_t gid[3] = { x, y, z }, want[WGFN_STRIDE] = { 0 };

				for (int d = 0; d < 3; d++) {
					uint32_t wg = g->wg[d], grp = gid[d] / wg;
					uint32_t left = g->grid[d] - grp * wg;

					want[WGFN_LOCAL + d] = gid[d] % wg;
					want[WGFN_GROUP + d] = grp;
					want[WGFN_SIZE + d] = left < wg ? left : wg;
					want[WGFN_WG + d] = wg;
					want[WGFN_GRID + d] = g->grid[d];
					want[WGFN_GID + d] = gid[d];
				}
				want[WGFN_NGROUPS] = groups_of(g->grid[0], g->wg[0]);
				want[WGFN_LINEAR] = (want[WGFN_LOCAL + 2] * want[WGFN_SIZE + 1] +
						     want[WGFN_LOCAL + 1]) * want[WGFN_SIZE] +
						    want[WGFN_LOCAL];
				if (memcmp(r, want, sizeof(want)) && bad++ < 3)
					CHECK(0, "%s on %ux%ux%u / %ux%ux%u: work-item (%u,%u,%u): local (%u,%u,%u) group (%u,%u,%u) size (%u,%u,%u) linear %u gid (%u,%u,%u), want local (%u,%u,%u) group (%u,%u,%u) size (%u,%u,%u) linear %u",
					      name, g->grid[0], g->grid[1], g->grid[2], g->wg[0], g->wg[1],
					      g->wg[2], x, y, z, r[0], r[1], r[2], r[3], r[4], r[5], r[6],
					      r[7], r[8], r[WGFN_LINEAR], r[WGFN_GID], r[WGFN_GID + 1],
					      r[WGFN_GID + 2], want[0], want[1], want[2], want[3], want[4],
					      want[5], want[6], want[7], want[8], want[WGFN_LINEAR]);
			}
	CHECK(bad == 0, "%s on %ux%ux%u / %ux%ux%u: %u work-items saw wrong ids", name,
	      g->grid[0], g->grid[1], g->grid[2], g->wg[0], g->wg[1], g->wg[2], bad);
}

static void test_ids(aql_code_object *ids, aql_code_object *helper)
{
	const aql_host_kernel_descriptor *kd =
		(const aql_host_kernel_descriptor *)(uintptr_t)th_kernel(ids, "ids_wg")->kernel_object;

	CHECK(kd->flags & AQL_HOST_KD_WORKGROUP, "ids_wg: flags %#x lack AQL_HOST_KD_WORKGROUP",
	      kd->flags);
	for (size_t i = 0; i < sizeof(geoms) / sizeof(geoms[0]); i++) {
		uint32_t *wg = run_ids(ids, "ids_wg", &geoms[i]);
		uint32_t *fiber = run_ids(ids, "ids_fiber", &geoms[i]);
		uint32_t *help = run_ids(helper, "ids_helper", &geoms[i]);

		check_ids("ids_wg", &geoms[i], wg);
		check_ids("ids_fiber", &geoms[i], fiber);
		check_ids("ids_helper", &geoms[i], help);
		free(wg);
		free(fiber);
		free(help);
	}
}

/* Whether the ELF file at path has a section named name; -1 if unreadable. */
static int has_section(const char *path, const char *name)
{
	int fd = open(path, O_RDONLY), found = -1;
	Elf *elf = NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;

	if (fd >= 0 && elf_version(EV_CURRENT) != EV_NONE &&
	    (elf = elf_begin(fd, ELF_C_READ, NULL)) && !elf_getshdrstrndx(elf, &shstrndx))
		for (found = 0; !found && (scn = elf_nextscn(elf, scn));) {
			const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name)
							       : NULL;

			found = n && !strcmp(n, name);
		}
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	return found;
}

/*
 * The mark that makes work-group functions keep the work-item current
 * (include/aql/kernel.h) comes only from ids asked for outside a body:
 * the device-function form every kernel also defines must not make it.
 */
static void test_outside_mark(const char *ids_path, const char *helper_path)
{
	CHECK(has_section(ids_path, "aql_ids_outside") == 0,
	      "%s asks for ids only in kernel bodies, yet has an aql_ids_outside section (or is unreadable)",
	      ids_path);
	CHECK(has_section(helper_path, "aql_ids_outside") == 1,
	      "%s asks for ids in a helper, yet has no aql_ids_outside section", helper_path);
}

/*
 * A barrier kernel (fibers) still meets its barrier: groups of wg
 * mirrored. given 0: the default, which for fibers (a stack mapping each)
 * stays 256 on a grid that gives every worker a group of that.
 */
static void test_barrier(aql_code_object *co, uint32_t n, uint16_t given, uint32_t wg)
{
	const aql_kernel *k = th_kernel(co, "mirror");
	aql_buf *out = th_buf(AQL_TYPE(uint32_t), n);
	aql_launch_config cfg = { .grid = { n }, .workgroup = { given } };
	aql_completion done;
	const uint32_t *o;
	uint32_t bad = 0;

	CHECK_OK(AQL_LAUNCH(queue, k, &cfg, &done, AQL_ARG(out), AQL_ARG(n)));
	CHECK_DONE(aql_completion_wait(done, th_timeout_ns()));
	o = aql_buf_data(out, uint32_t);
	for (uint32_t i = 0; o && i < n; i++) {
		uint32_t base = i / wg * wg, size = n - base < wg ? n - base : wg;
		uint32_t want = base + size - 1 - (i - base);

		if (o[i] != want && bad++ < 3)
			CHECK(0, "mirror, work-group %u: out[%u] = %u, want %u", wg, i, o[i], want);
	}
	CHECK(o && bad == 0, "mirror, work-group %u given (%u wanted): %u wrong", given, wg, bad);
	aql_buf_destroy(out);
}

/* Launch meet over 256 work-items with work-group wg (0: the default);
 * return the groups that ran and the distinct workers seen. */
static void meet(aql_code_object *co, uint16_t wg, uint32_t want, uint32_t *groups,
		 uint32_t *workers)
{
	const aql_kernel *k = th_kernel(co, "meet");
	aql_buf *arrived = th_buf(AQL_TYPE(uint32_t), 1), *who = th_buf(AQL_TYPE(uint64_t), 256);
	aql_launch_config cfg = { .grid = { 256 }, .workgroup = { wg } };
	aql_completion done;
	const uint64_t *w;
	uint64_t seen[256];

	*groups = *workers = 0;
	CHECK_OK(AQL_LAUNCH(queue, k, &cfg, &done, AQL_ARG(arrived), AQL_ARG(who),
			    AQL_ARG(want)));
	CHECK_DONE(aql_completion_wait(done, 3 * th_timeout_ns()));
	*groups = *aql_buf_data(arrived, uint32_t);
	w = aql_buf_data(who, uint64_t);
	for (uint32_t i = 0; w && i < 256; i++) {
		uint32_t j = 0;

		while (j < *workers && seen[j] != w[i])
			j++;
		if (j == *workers)
			seen[(*workers)++] = w[i];
	}
	aql_buf_destroy(arrived);
	aql_buf_destroy(who);
}

/* The default work-group kernel name gets on a grid of n on two workers. */
static uint32_t default_wg(aql_code_object *co, const char *name, uint32_t n)
{
	aql_buf *rec = th_buf(AQL_TYPE(uint32_t), (uint64_t)n * WGFN_STRIDE);
	aql_launch_config cfg = { .grid = { n } };
	aql_completion done;
	const uint32_t *r;
	uint32_t wg = 0;

	CHECK_OK(AQL_LAUNCH(queue, th_kernel(co, name), &cfg, &done, AQL_ARG(rec)));
	CHECK_DONE(aql_completion_wait(done, 3 * th_timeout_ns()));
	r = aql_buf_data_const(rec, uint32_t);
	if (r)
		wg = r[WGFN_WG];
	aql_buf_destroy(rec);
	return wg;
}

/* A work-group function's default group is the largest allowed (one call
 * each); a fiber kernel's stays 256: each fiber maps a stack. */
static void test_default_size(aql_code_object *co)
{
	uint32_t wg = default_wg(co, "ids_wg", 4096), fiber = default_wg(co, "ids_fiber", 4096);

	CHECK(wg == 1024, "ids_wg on 4096 work-items: default work-group %u, want 1024", wg);
	CHECK(fiber == 256, "ids_fiber on 4096 work-items: default work-group %u, want 256", fiber);
}

static void test_default_spread(aql_code_object *co)
{
	uint32_t groups, workers;

	meet(co, 0, 2, &groups, &workers);
	CHECK(groups >= 2 && workers >= 2,
	      "256 work-items, default work-group, 2 workers: %u groups on %u workers, want both >= 2",
	      groups, workers);
	meet(co, 256, 1, &groups, &workers);
	CHECK(groups == 1 && workers == 1,
	      "256 work-items, work-group 256 given: %u groups on %u workers, want 1 and 1",
	      groups, workers);
}

int main(int argc, char **argv)
{
	aql_host_agent_config ac = { .workers = 2 };
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_SINGLE };
	aql_code_object *ids = NULL, *helper = NULL;

	if (argc != 3) {
		fprintf(stderr, "usage: %s IDS.so HELPER.so\n", argv[0]);
		return 2;
	}
	CHECK_OK(aql_host_agent_create(&ac, &agent));
	CHECK_OK(aql_queue_create(agent, &qc, &queue));
	CHECK_OK(aql_code_object_load_file(agent, argv[1], NULL, &ids));
	CHECK_OK(aql_code_object_load_file(agent, argv[2], NULL, &helper));
	if (!agent || !queue || !ids || !helper)
		return th_finish();
	test_outside_mark(argv[1], argv[2]);
	test_ids(ids, helper);
	test_barrier(ids, 1000, 64, 64);
	test_barrier(ids, 2048, 0, 256);
	test_default_size(ids);
	test_default_spread(ids);
	aql_code_object_destroy(ids);
	aql_code_object_destroy(helper);
	aql_queue_destroy(queue);
	aql_agent_destroy(agent);
	return th_finish();
}
