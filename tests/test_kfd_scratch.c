/* SPDX-License-Identifier: MIT */
/*
 * Scratch (private segment) memory of AMD queues (aql/kfd/queue.c) on the
 * KFD emulation, with a kernel that uses 8 KiB of it per work-item
 * (tests/kfd_scratch/scratch.c, its GPU build for the run's model and its
 * host build in AQL_KFD_EMU_KERNELS). Not run on hardware.
 *
 * --hsaco PATH --occupancy full|reduced: the dispatch asks for more
 *   scratch than the old 1 GiB window held at full occupancy; the queue
 *   grows it (CP code 1), the emulated CP checks the absolute address and
 *   COMPUTE_TMPRING_SIZE against the BO behind it, runs the host build,
 *   and every result is right. full: every scratch slot of every CU
 *   backed; reduced (a small AQL_KFD_EMU_VRAM): fewer waves per CU, at
 *   least one. The amd_queue_t's scratch fields are checked either way.
 * --hsaco PATH --expect nomem (a VRAM too small for one wave per CU):
 *   the queue stops with AQL_ERR_NOMEM naming the packet, the bytes per
 *   lane, the bytes one wave per CU needs and the VRAM left.
 * --hsaco PATH --fault base|waves: after a good run the test spoils the
 *   amd_queue_t as a wrong runtime would, and the next dispatch fails:
 *   base (the offset in the window, what aql stored before) a GPU memory
 *   fault at that address; waves (WAVES above what the size holds) the
 *   CP's code 1 again, which stops the queue.
 *
 * With AQL_HIL=1 (tests/hil/run-amd, the kernel's /dev/kfd) the full
 * run checks the results and the amd_queue_t, not the BO behind it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <aql/aql.h>

#include "helpers.h"
#include "aql/kfd/kfd.h"
#include "aql/kfd/kfd_abi.h"
#include "kfd_emu/kfdemu.h"

#define N 4096u
#define WORDS 2048u		/* scratch.c's SCRATCH_WORDS */
#define STRIDE 7u
#define OLD_WINDOW (1ull << 30)

static struct kfd_agent *amd;
static kfdemu_bo_at_fn bo_at_fn;

struct run {
	aql_queue *q;
	aql_mem_pool *pool;
	aql_code_object *co;
	const aql_kernel *k;
	uint32_t *in, *out;
	unsigned char *args;
};

static struct kfd_queue_info info_of(aql_queue *q)
{
	struct kfd_queue_info qi;

	kfd_queue_get_info((const struct aql_queue_impl *)q, &qi);
	return qi;
}

static uint32_t expected(uint32_t i, uint32_t v)
{
	uint32_t sum = 0;

	for (uint32_t j = 0; j < WORDS; j++) {
		uint32_t k = (j * STRIDE + i) % WORDS;

		sum += (v * k + k) * (j + 1);
	}
	return sum;
}

/* Waves per XCC for wpc waves per CU: a multiple of its shader engines. */
static uint64_t xcc_waves(uint32_t wpc)
{
	const struct kfd_node *n = amd->node;
	uint32_t ses = n->array_count / n->simd_arrays_per_engine / n->xccs;
	uint64_t w = (uint64_t)wpc * (n->cus / n->xccs);

	return (w + ses - 1) / ses * ses;
}

static void setup(struct run *r, const char *hsaco)
{
	aql_agent *agent = &amd->base;
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agents = &agent, .agent_count = 1 };
	aql_queue_config qc = { .size = 64, .type = AQL_QUEUE_MULTI };
	uint64_t ptr;

	memset(r, 0, sizeof(*r));
	CHECK_OK(aql_code_object_load_file(agent, hsaco, NULL, &r->co));
	if (r->co)
		CHECK_OK(aql_code_object_kernel(r->co, "scratch_sum", &r->k));
	CHECK_OK(aql_mem_pool_create(&pc, &r->pool));
	CHECK_OK(aql_queue_create(agent, &qc, &r->q));
	if (!r->k || !r->pool || !r->q)
		th_stop("no kernel, pool or queue");
	CHECK_OK(aql_mem_alloc(r->pool, N * 4, 64, (void **)&r->in));
	CHECK_OK(aql_mem_alloc(r->pool, N * 4, 64, (void **)&r->out));
	CHECK_OK(aql_mem_alloc(r->pool, r->k->kernarg_size, r->k->kernarg_align,
			       (void **)&r->args));
	if (!r->in || !r->out || !r->args)
		th_stop("no pool memory");
	for (uint32_t i = 0; i < N; i++)
		r->in[i] = i * 2654435761u;
	/* in, out, n, stride (AMDGPU layout) */
	memset(r->args, 0, r->k->kernarg_size);
	ptr = (uintptr_t)r->in;
	memcpy(r->args, &ptr, 8);
	ptr = (uintptr_t)r->out;
	memcpy(r->args + 8, &ptr, 8);
	memcpy(r->args + 16, &(uint32_t){ N }, 4);
	memcpy(r->args + 20, &(uint32_t){ STRIDE }, 4);
}

static void teardown(struct run *r)
{
	CHECK_OK(aql_queue_destroy(r->q));
	aql_mem_free(r->args);
	aql_mem_free(r->in);
	aql_mem_free(r->out);
	CHECK_OK(aql_mem_pool_destroy(r->pool));
	CHECK_OK(aql_code_object_destroy(r->co));
}

/* One dispatch of scratch_sum; its completion value. */
static int64_t dispatch(struct run *r)
{
	aql_signal *done = th_signal(1);
	aql_packet p = { 0 };
	int64_t v;

	for (uint32_t i = 0; i < N; i++)
		r->out[i] = 0xdeadbeef;
	p.dispatch.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, 1, AQL_FENCE_SYSTEM,
					      AQL_FENCE_SYSTEM);
	p.dispatch.setup = 1;
	p.dispatch.workgroup_size_x = 64;
	p.dispatch.workgroup_size_y = p.dispatch.workgroup_size_z = 1;
	p.dispatch.grid_size_x = N;
	p.dispatch.grid_size_y = p.dispatch.grid_size_z = 1;
	p.dispatch.group_segment_size = r->k->group_segment_size;
	p.dispatch.private_segment_size = r->k->private_segment_size;
	p.dispatch.kernel_object = r->k->kernel_object;
	p.dispatch.kernarg_address = (uintptr_t)r->args;
	p.dispatch.completion_signal = aql_signal_handle(done);
	CHECK(th_submit(r->q, &p) == AQL_OK, "scratch_sum dispatch");
	v = th_wait_done(done);
	aql_signal_destroy(done);
	return v;
}

/* The queue's error once it has one (bounded wait). */
static aql_status queue_error(aql_queue *q, const char **msg)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS;

	while (aql_queue_error(q, msg) == AQL_OK && th_now_ns() < end)
		th_sleep_ms(1);
	return aql_queue_error(q, msg);
}

/* A run whose results are right, and the scratch behind it. */
static void check_run(struct run *r, int full)
{
	const struct kfd_node *n = amd->node;
	const aql_amd_queue *a = r->q->amd;
	uint64_t lane = ((uint64_t)r->k->private_segment_size + 15) & ~15ull, wave = lane * 64;
	uint64_t need = wave * n->cus * n->max_slots_scratch_cu;
	const char *why = "";
	struct kfd_queue_info qi;
	struct kfdemu_bo b;
	uint64_t base, waves, per_xcc;
	uint32_t bad = 0;

	printf("%s: scratch_sum: %u private bytes per work-item; full occupancy needs %llu "
	       "bytes (%u CUs of %u waves)\n", n->gfx, r->k->private_segment_size,
	       (unsigned long long)need, n->cus, n->max_slots_scratch_cu);
	CHECK(r->k->private_segment_size >= WORDS * 4,
	      "the kernel's private segment: %u bytes", r->k->private_segment_size);
	CHECK(need > OLD_WINDOW, "full occupancy needs %llu bytes, not above the old window",
	      (unsigned long long)need);
	CHECK(dispatch(r) == 0, "scratch_sum's signal (queue: %s)",
	      (aql_queue_error(r->q, &why), why));
	for (uint32_t i = 0; i < N; i++)
		bad += r->out[i] != expected(i, r->in[i]);
	CHECK(bad == 0, "%u of %u results wrong (out[1] = %u, want %u)", bad, N, r->out[1],
	      expected(1, r->in[1]));

	qi = info_of(r->q);
	base = (uint64_t)(uintptr_t)qi.scratch;
	waves = a->compute_tmpring_size & 0xfff;
	per_xcc = a->scratch_backing_memory_byte_size;
	printf("%s: scratch at 0x%llx, %zu bytes: %llu waves per XCC of %u KiB\n", n->gfx,
	       (unsigned long long)base, qi.scratch_bytes, (unsigned long long)waves,
	       a->compute_tmpring_size >> 12);
	CHECK(per_xcc && per_xcc <= UINT32_MAX && a->scratch_resource_descriptor[2] == per_xcc,
	      "NUM_RECORDS %u for %llu bytes per XCC", a->scratch_resource_descriptor[2],
	      (unsigned long long)per_xcc);
	CHECK(qi.scratch && a->scratch_backing_memory_location == base,
	      "scratch_backing_memory_location 0x%llx, the scratch at %p",
	      (unsigned long long)a->scratch_backing_memory_location, qi.scratch);
	if (bo_at_fn)
		CHECK(bo_at_fn(base, &b) == 0 && b.va == base && b.size == qi.scratch_bytes &&
		      b.domain == KFDEMU_VRAM && b.mapped, "the scratch BO");
	CHECK((const uint8_t *)qi.scratch >= (const uint8_t *)qi.scratch_window &&
	      base + qi.scratch_bytes <= (uint64_t)(uintptr_t)qi.scratch_window +
	      qi.scratch_window_bytes && qi.scratch_window_bytes == (4ull << 30) * n->xccs,
	      "the scratch in the window of 4 GiB per XCC");
	CHECK(a->scratch_wave64_lane_byte_size == lane &&
	      (a->compute_tmpring_size >> 12) == wave / 1024 &&
	      per_xcc == waves * wave && qi.scratch_bytes == per_xcc * n->xccs &&
	      a->scratch_resource_descriptor[2] == per_xcc,
	      "scratch sizes: %llu per XCC, %u per lane, tmpring 0x%x",
	      (unsigned long long)per_xcc, a->scratch_wave64_lane_byte_size,
	      a->compute_tmpring_size);
	if (full)
		CHECK(waves == xcc_waves(n->max_slots_scratch_cu) && qi.scratch_bytes == need,
		      "full occupancy: %llu waves per XCC, %zu bytes (want %llu, %llu)",
		      (unsigned long long)waves, qi.scratch_bytes,
		      (unsigned long long)xcc_waves(n->max_slots_scratch_cu),
		      (unsigned long long)need);
	else
		CHECK(waves < xcc_waves(n->max_slots_scratch_cu) && waves >= xcc_waves(1) &&
		      qi.scratch_bytes < need,
		      "reduced occupancy: %llu waves per XCC (one per CU: %llu, all: %llu)",
		      (unsigned long long)waves, (unsigned long long)xcc_waves(1),
		      (unsigned long long)xcc_waves(n->max_slots_scratch_cu));
}

/* VRAM too small for one wave per CU. */
static void expect_nomem(struct run *r)
{
	const struct kfd_node *n = amd->node;
	uint64_t lane = ((uint64_t)r->k->private_segment_size + 15) & ~15ull;
	char want[128];
	const char *msg = "";

	CHECK(dispatch(r) == -1, "the dispatch's signal");
	snprintf(want, sizeof(want), "%llu bytes per lane need %llu bytes for one wave on "
		 "each of %u CUs", (unsigned long long)lane,
		 (unsigned long long)(lane * 64 * xcc_waves(1) * n->xccs), n->cus);
	printf("queue error: %s\n", (queue_error(r->q, &msg), msg));
	CHECK(queue_error(r->q, &msg) == AQL_ERR_NOMEM && strstr(msg, "packet 0") &&
	      strstr(msg, "(kernel scratch_sum)") && strstr(msg, want) &&
	      strstr(msg, "VRAM exhausted"), "queue error: %s", msg);
	CHECK(info_of(r->q).scratch == NULL && r->q->amd->scratch_backing_memory_byte_size == 0,
	      "scratch after the failed growth");
}

/* The amd_queue_t spoilt after a good run: the next dispatch fails. */
static void expect_fault(struct run *r, const char *what)
{
	aql_amd_queue *a = r->q->amd;
	struct kfd_queue_info qi;
	const char *msg = "";
	char want[64];

	check_run(r, 1);
	qi = info_of(r->q);
	if (!strcmp(what, "base")) {
		uint64_t off = (uint64_t)((const uint8_t *)qi.scratch -
					  (const uint8_t *)qi.scratch_window);

		__atomic_store_n(&a->scratch_backing_memory_location, off, __ATOMIC_RELEASE);
		CHECK(dispatch(r) == -1, "the dispatch with an offset for a base");
		snprintf(want, sizeof(want), "GPU memory fault at 0x%llx", (unsigned long long)off);
		CHECK(queue_error(r->q, &msg) != AQL_OK && strstr(msg, want), "queue error: %s",
		      msg);
	} else {
		uint32_t t = a->compute_tmpring_size;

		__atomic_store_n(&a->compute_tmpring_size, t + 1, __ATOMIC_RELEASE);
		CHECK(dispatch(r) == -1, "the dispatch with one wave more than the size holds");
		CHECK(queue_error(r->q, &msg) == AQL_ERR_QUEUE_ERROR &&
		      strstr(msg, "for scratch again"), "queue error: %s", msg);
	}
}

int main(int argc, char **argv)
{
	const char *hsaco = NULL, *occupancy = "full", *expect = "", *fault = "";
	aql_agent *agent = NULL;
	struct run r;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--hsaco"))
			hsaco = argv[i + 1];
		else if (!strcmp(argv[i], "--occupancy"))
			occupancy = argv[i + 1];
		else if (!strcmp(argv[i], "--expect"))
			expect = argv[i + 1];
		else if (!strcmp(argv[i], "--fault"))
			fault = argv[i + 1];
	}
	if (!hsaco) {
		printf("SKIP: no GPU build of scratch_sum (no clang here knows the target)\n");
		return 77;
	}
	CHECK(aql_agent_open(AQL_AGENT_AMD, 0, &agent) == AQL_OK, "AMD agent 0: %s",
	      aql_error_message());
	if (!agent)
		return th_finish();
	amd = (struct kfd_agent *)agent;
	/* On hardware (AQL_HIL=1, tests/hil/run-amd): no emulation to ask
	 * for the BO behind the scratch; the results and fields are checked. */
	if (!getenv("AQL_HIL") || strcmp(getenv("AQL_HIL"), "1"))
		*(void **)&bo_at_fn = th_kfdemu_sym("kfdemu_bo_at");
	setup(&r, hsaco);
	if (!strcmp(expect, "nomem"))
		expect_nomem(&r);
	else if (fault[0])
		expect_fault(&r, fault);
	else
		check_run(&r, !strcmp(occupancy, "full"));
	teardown(&r);
	CHECK_OK(aql_agent_destroy(agent));
	return th_finish();
}
