/* SPDX-License-Identifier: MIT */
/*
 * Kernel dispatch on the CPU agent: ids over 1-, 2- and 3-D grids with
 * partial work-groups, a tree reduction in the group segment with
 * work-group barriers, private segments, agent dispatch and profiling.
 */
#include <string.h>

#include "helpers.h"

/* Each work-item records its ids; the host checks each appears once. */
struct __attribute__((aligned(16))) ids_args {
	uint32_t *hits;		/* one per global work-item, linear */
	uint32_t *bad;
};

static void ids_kernel(const void *kernarg)
{
	const struct ids_args *a = kernarg;
	const aql_host_workitem *wi = aql_host_current();
	const aql_dispatch_packet *p = wi->packet;
	uint32_t g[3], linear;

	for (unsigned d = 0; d < 3; d++) {
		g[d] = aql_host_global_id(d);
		if (wi->local_id[d] >= wi->group_size[d] || g[d] >= (&p->grid_size_x)[d])
			__atomic_fetch_add(a->bad, 1, __ATOMIC_RELAXED);
	}
	linear = (g[2] * p->grid_size_y + g[1]) * p->grid_size_x + g[0];
	__atomic_fetch_add(&a->hits[linear], 1, __ATOMIC_RELAXED);
}

static const aql_host_kernel_descriptor ids_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(ids_kernel, struct ids_args, AQL_HOST_KD_NO_BARRIER);

static void test_ids(unsigned dims, uint32_t gx, uint32_t gy, uint32_t gz,
		     uint16_t wx, uint16_t wy, uint16_t wz)
{
	const uint32_t grid[3] = { gx, gy, gz };
	const uint16_t wg[3] = { wx, wy, wz };
	size_t n = (size_t)gx * gy * gz, once = 0;
	uint32_t *hits = calloc(n, sizeof(*hits)), bad = 0;
	struct ids_args args = { hits, &bad };
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = th_dispatch(&ids_kd, &args, dims, grid, wg, done, 0);

	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0, "%uD dispatch failed", dims);
	for (size_t i = 0; i < n; i++)
		once += hits[i] == 1;
	CHECK(once == n && bad == 0, "%uD grid %ux%ux%u wg %ux%ux%u: %zu of %zu ran once, %u bad ids",
	      dims, gx, gy, gz, wx, wy, wz, once, n, bad);
	free(hits);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/*
 * Tree reduction in LDS: each work-item loads one value into the group
 * segment, then halves the active range with a barrier between steps.
 * Without a working barrier, work-items read partial sums not yet written.
 */
enum { RED_WG = 256, RED_GROUPS = 16 };

struct __attribute__((aligned(16))) reduce_args {
	const uint64_t *in;
	uint64_t *out;		/* one sum per work-group */
};

static void reduce_kernel(const void *kernarg)
{
	const struct reduce_args *a = kernarg;
	const aql_host_workitem *wi = aql_host_current();
	uint64_t *lds = wi->group_segment;
	uint32_t l = wi->local_id[0];

	lds[l] = a->in[aql_host_global_id(0)];
	aql_host_barrier();
	for (uint32_t stride = RED_WG / 2; stride > 0; stride /= 2) {
		if (l < stride)
			lds[l] += lds[l + stride];
		aql_host_barrier();
	}
	if (l == 0)
		a->out[wi->group_id[0]] = lds[0];
}

static const aql_host_kernel_descriptor reduce_kd = {
	.group_segment_fixed_size = RED_WG * sizeof(uint64_t),
	.kernarg_size = sizeof(struct reduce_args),
	.kernarg_align = 16,
	.entry = reduce_kernel,
	.magic = AQL_HOST_KD_MAGIC,
};

static void test_reduction(void)
{
	static uint64_t in[RED_WG * RED_GROUPS], out[RED_GROUPS];
	struct reduce_args args = { in, out };
	const uint32_t grid[3] = { RED_WG * RED_GROUPS, 1, 1 };
	const uint16_t wg[3] = { RED_WG, 1, 1 };
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = th_dispatch(&reduce_kd, &args, 1, grid, wg, done, 0);
	unsigned right = 0;

	for (unsigned i = 0; i < RED_WG * RED_GROUPS; i++)
		in[i] = (uint64_t)i * 2654435761u % 1000003u;
	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0, "reduction dispatch failed");
	for (unsigned g = 0; g < RED_GROUPS; g++) {
		uint64_t want = 0;

		for (unsigned i = 0; i < RED_WG; i++)
			want += in[g * RED_WG + i];
		right += out[g] == want;
	}
	CHECK(right == RED_GROUPS, "%u of %u group sums match the C reference", right,
	      RED_GROUPS);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/* Private segments are per work-item and survive a barrier. */
struct __attribute__((aligned(16))) private_args {
	uint32_t *bad;
};

static void private_kernel(const void *kernarg)
{
	const struct private_args *a = kernarg;
	const aql_host_workitem *wi = aql_host_current();
	uint32_t *mine = wi->private_segment, id = aql_host_global_id(0);

	for (int i = 0; i < 16; i++)
		mine[i] = id * 16 + (uint32_t)i;
	aql_host_barrier();
	for (int i = 0; i < 16; i++)
		if (mine[i] != id * 16 + (uint32_t)i)
			__atomic_fetch_add(a->bad, 1, __ATOMIC_RELAXED);
}

static const aql_host_kernel_descriptor private_kd = {
	.private_segment_fixed_size = 64,
	.kernarg_size = sizeof(struct private_args),
	.kernarg_align = 16,
	.entry = private_kernel,
	.magic = AQL_HOST_KD_MAGIC,
};

static void test_private(void)
{
	uint32_t bad = 0;
	struct private_args args = { &bad };
	const uint32_t grid[3] = { 512, 1, 1 };
	const uint16_t wg[3] = { 128, 1, 1 };
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = th_dispatch(&private_kd, &args, 1, grid, wg, done, 0);

	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0 && bad == 0, "%u private words overwritten", bad);
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/* Agent dispatch runs the registered function with the packet's arguments. */
static void add_fn(const uint64_t arg[4], uint64_t return_address, void *user)
{
	*(uint64_t *)(uintptr_t)return_address = arg[0] + arg[1] + arg[2] + arg[3];
	(*(int *)user)++;
}

static void test_agent_dispatch(void)
{
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, 0);
	aql_signal *done = th_signal(1);
	uint64_t result = 0;
	int calls = 0;
	aql_agent_dispatch_packet p = {
		.header = aql_packet_header(AQL_PACKET_AGENT_DISPATCH, 0, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
		.type = 0x8001,
		.return_address = (uint64_t)(uintptr_t)&result,
		.arg = { 1, 20, 300, 4000 },
		.completion_signal = aql_signal_handle(done),
	};

	CHECK_OK(aql_agent_register_function(th_agent(), 0x8001, add_fn, &calls));
	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0, "agent dispatch failed");
	CHECK(result == 4321 && calls == 1, "result %llu after %d calls",
	      (unsigned long long)result, calls);
	CHECK_OK(aql_agent_register_function(th_agent(), 0x8001, NULL, NULL));
	aql_signal_destroy(done);
	aql_queue_destroy(q);
}

/* Profiling queues stamp start and end around the kernel. */
struct __attribute__((aligned(16))) sleep_args {
	unsigned ms;
};

static void sleep_kernel(const void *kernarg)
{
	th_sleep_ms(((const struct sleep_args *)kernarg)->ms);
}

static const aql_host_kernel_descriptor sleep_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(sleep_kernel, struct sleep_args, AQL_HOST_KD_NO_BARRIER);

static void test_profiling(void)
{
	struct sleep_args args = { 5 };
	aql_signal *done = th_signal(1);
	aql_dispatch_packet p = th_dispatch1(&sleep_kd, &args, done);
	aql_queue *q = th_queue(16, AQL_QUEUE_MULTI, AQL_QUEUE_PROFILING);
	aql_queue *plain = th_queue(16, AQL_QUEUE_MULTI, 0);

	th_submit(q, &p);
	CHECK(th_wait_done(done) == 0, "profiled dispatch failed");
	CHECK(done->start_ts && done->end_ts >= done->start_ts + 5000000,
	      "start %llu end %llu: kernel slept 5 ms", (unsigned long long)done->start_ts,
	      (unsigned long long)done->end_ts);
	done->start_ts = done->end_ts = 0;
	aql_signal_store(done, 1, AQL_RELAXED);
	th_submit(plain, &p);
	CHECK(th_wait_done(done) == 0 && done->start_ts == 0 && done->end_ts == 0,
	      "queue without profiling wrote timestamps");
	aql_queue_destroy(q);
	aql_queue_destroy(plain);
	aql_signal_destroy(done);
}

int main(void)
{
	test_ids(1, 1, 1, 1, 1, 1, 1);
	test_ids(1, 1000, 1, 1, 64, 1, 1);
	test_ids(2, 37, 23, 1, 8, 4, 1);
	test_ids(3, 17, 9, 5, 4, 4, 2);
	test_ids(3, 64, 32, 8, 16, 8, 4);
	test_reduction();
	test_private();
	test_agent_dispatch();
	test_profiling();
	return th_finish();
}
