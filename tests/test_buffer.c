/* SPDX-License-Identifier: MIT */
/*
 * Element types, typed buffers and their host access, views and
 * partitions, agent memory and copies (aql/buffer.h, aql/copy.h), on a
 * CPU agent with separate memory, or on the NVIDIA agent with
 * AQL_TEST_AGENT=nvidia (helpers.h). Launches that use buffers are
 * test_launch's.
 */
#include <string.h>

#include "helpers.h"

struct vec3 {
	double v[3];
};

static void test_types(void)
{
	const aql_type *t = NULL, *again = NULL;

	CHECK(AQL_TYPE(float) == &aql_type_f32 && AQL_TYPE(double) == &aql_type_f64 &&
		      AQL_TYPE(int32_t) == &aql_type_i32 && AQL_TYPE(uint8_t) == &aql_type_u8 &&
		      AQL_TYPE(uint64_t) == &aql_type_u64 && AQL_TYPE(int16_t) == &aql_type_i16,
	      "AQL_TYPE maps a scalar to the wrong descriptor");
	CHECK(aql_type_find("unsigned int") == &aql_type_u32 && aql_type_find("uint") == &aql_type_u32 &&
		      aql_type_find("long") == &aql_type_i64 && aql_type_find("float") == &aql_type_f32,
	      "C and OpenCL spellings of the scalars are not found");
	CHECK(aql_type_find("struct vec3") == NULL, "an unregistered struct was found");
	CHECK_OK(AQL_TYPE_REGISTER(struct vec3, &t));
	CHECK(t && t->size == 24 && t->align == 8 && t->cls == AQL_TYPE_STRUCT &&
		      !strcmp(t->name, "struct vec3"), "registered type %s %u %u",
	      t ? t->name : "-", t ? t->size : 0, t ? t->align : 0);
	CHECK_OK(aql_type_register("struct vec3", 24, 8, &again));
	CHECK(again == t, "registering twice gave two types");
	CHECK(aql_type_register("struct vec3", 32, 8, &again) == AQL_ERR_INVALID_ARG &&
		      th_error_has("already registered with size 24"), "size conflict accepted");
	CHECK(aql_type_register("odd", 6, 4, &again) == AQL_ERR_INVALID_ARG &&
		      th_error_has("not a non-zero multiple of its alignment 4"),
	      "size not a multiple of the alignment accepted");
	CHECK(aql_type_register("odd", 8, 3, &again) == AQL_ERR_INVALID_ARG &&
		      th_error_has("alignment 3"), "alignment 3 accepted");
	CHECK(aql_type_register("", 8, 8, &again) == AQL_ERR_INVALID_ARG, "empty name accepted");
}

static void test_create(void)
{
	aql_buf_config shape = { .name = "grid", .ndim = 3, .shape = { 4, 5, 6 } };
	aql_buf_info info;
	aql_buf *b = NULL;

	CHECK(aql_buf_create(AQL_TYPE(float), 0, AQL_IN, NULL, &b) == AQL_ERR_INVALID_ARG,
	      "0 elements accepted");
	CHECK(aql_buf_create(NULL, 4, AQL_IN, NULL, &b) == AQL_ERR_INVALID_ARG &&
		      th_error_has("is the struct type registered?"), "NULL type accepted");
	CHECK(aql_buf_create(AQL_TYPE(double), UINT64_MAX / 4, AQL_IN, NULL, &b) ==
			      AQL_ERR_INVALID_ARG && th_error_has("overflow"),
	      "an overflowing size accepted");
	CHECK(aql_buf_create(AQL_TYPE(float), 10, (enum aql_direction)9, NULL, &b) ==
			      AQL_ERR_INVALID_ARG, "direction 9 accepted");
	CHECK(aql_buf_create(AQL_TYPE(float), 121, AQL_IN, &shape, &b) == AQL_ERR_INVALID_ARG &&
		      th_error_has("the shape has 120 elements, count is 121"),
	      "a shape that does not match the count accepted");
	CHECK_OK(aql_buf_create(AQL_TYPE(float), 120, AQL_INOUT, &shape, &b));
	CHECK_OK(aql_buf_get_info(b, &info));
	CHECK(info.count == 120 && info.ndim == 3 && info.shape[2] == 6 && info.type == &aql_type_f32 &&
		      !strcmp(info.name, "grid") && !info.is_view && !info.agent,
	      "info: %llu %u %s", (unsigned long long)info.count, info.ndim, info.name);
	/* Zero-filled, page-backed device-visible host memory. */
	const float *h = aql_buf_data_const(b, float);
	float sum = 0;

	for (int i = 0; i < 120 && h; i++)
		sum += h[i] != 0;
	CHECK(h && sum == 0, "a new buffer is not zero-filled");
	CHECK_OK(aql_buf_destroy(b));
}

static void test_host_access(void)
{
	aql_buf_f32 x;
	aql_buf_u16 small;
	float *p;

	CHECK_OK(aql_buf_f32_create(64, AQL_INOUT, NULL, &x));
	p = aql_buf_f32_data(x);
	CHECK(p != NULL, "typed handle access failed: %s", aql_error_message());
	CHECK(aql_buf_data(x.raw, int32_t) == NULL &&
		      th_error_has("holds float, not int32_t"), "float buffer read as int32_t");
	CHECK(aql_buf_data_const(x.raw, double) == NULL && th_error_has("not double"),
	      "float buffer read as double");
	CHECK(aql_buf_host(x.raw, NULL) == NULL, "NULL type accepted");
	CHECK(aql_buf_data(x.raw, float) == p, "untyped and typed access disagree");
	CHECK_OK(aql_buf_u16_create(3, AQL_IN, NULL, &small));
	CHECK(aql_buf_u16_data(small) != NULL && aql_buf_data(small.raw, int16_t) == NULL,
	      "uint16_t buffer read as int16_t");
	aql_buf_destroy(small.raw);
	aql_buf_destroy(x.raw);
}

static void test_views(void)
{
	aql_buf *b = NULL, *parts[3], *v = NULL, *vv = NULL;
	aql_buf_info info;
	uint32_t *h;

	CHECK_OK(aql_buf_create(AQL_TYPE(uint32_t), 10, AQL_INOUT, NULL, &b));
	h = aql_buf_data(b, uint32_t);
	for (uint32_t i = 0; h && i < 10; i++)
		h[i] = i;
	CHECK_OK(aql_buf_partition(b, 3, parts));
	uint64_t want_first[3] = { 0, 4, 7 }, want_count[3] = { 4, 3, 3 };

	for (int i = 0; i < 3; i++) {
		CHECK_OK(aql_buf_get_info(parts[i], &info));
		CHECK(info.first == want_first[i] && info.count == want_count[i] && info.is_view,
		      "part %d: [%llu, +%llu)", i, (unsigned long long)info.first,
		      (unsigned long long)info.count);
		const uint32_t *ph = aql_buf_data_const(parts[i], uint32_t);

		CHECK(ph && ph[0] == want_first[i], "part %d starts at element %u", i, ph ? ph[0] : 99);
	}
	CHECK(aql_buf_partition(b, 11, parts) == AQL_ERR_INVALID_ARG, "11 parts of 10 elements");
	CHECK(aql_buf_slice(b, 8, 3, &v) == AQL_ERR_INVALID_ARG &&
		      th_error_has("[8, 11) are not inside"), "slice past the end accepted");
	CHECK(aql_buf_slice(b, UINT64_MAX, 2, &v) == AQL_ERR_INVALID_ARG, "wrapping slice accepted");
	CHECK_OK(aql_buf_slice(parts[1], 1, 2, &v));
	CHECK_OK(aql_buf_slice(v, 1, 1, &vv));
	CHECK(aql_buf_host_storage(vv) == aql_buf_data(vv, uint32_t) && !aql_buf_host_storage(NULL),
	      "a view's host storage is its first element's");
	CHECK_OK(aql_buf_get_info(vv, &info));
	CHECK(info.first == 6 && info.count == 1 && strstr(info.name, "[6:7]"),
	      "a view of a view: first %llu name %s", (unsigned long long)info.first, info.name);
	CHECK(aql_buf_destroy(b) == AQL_ERR_BUSY && th_error_has("5 view(s)"),
	      "a root with views destroyed");
	aql_buf_destroy(vv);
	aql_buf_destroy(v);
	for (int i = 0; i < 3; i++)
		aql_buf_destroy(parts[i]);
	CHECK_OK(aql_buf_destroy(b));
}

/* A CPU agent with separate memory, or the NVIDIA agent (kept until exit). */
static aql_agent *separate_agent(const aql_host_agent_config *cfg)
{
	aql_agent *agent = NULL;

	if (th_test_gpu())
		return th_test_agent();
	CHECK_OK(aql_host_agent_create(cfg, &agent));
	return agent;
}

/* Agent memory, synchronous copies and queued copies with completions. */
static void test_copies(void)
{
	aql_host_agent_config cfg = { .workers = 1, .separate_memory = 1 };
	aql_mem_pool_config pc = { .kind = AQL_MEM_FINE_GRAINED, .numa_node = AQL_NUMA_ANY,
				   .agent_count = 1 };
	aql_mem_pool *pool = NULL;
	aql_agent *agent = NULL;
	aql_queue *q = NULL;
	enum { N = 1 << 16 };
	/* Queued copies read host memory when they run: host comes from a
	 * pool that lists the agent, which every agent reaches (a GPU's copy
	 * kernel too); back is malloc's, which synchronous copies stage. */
	unsigned char *host = NULL, *back = malloc(N), *dev = NULL, *dev2 = NULL;
	aql_completion c1, c2;
	int bad = 0;

	agent = separate_agent(&cfg);
	pc.agents = &agent;
	CHECK_OK(aql_mem_pool_create(&pc, &pool));
	CHECK_OK(aql_mem_alloc(pool, N, 64, (void **)&host));
	if (!host || !back)
		th_stop("no host memory for the copies");
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	CHECK(aql_agent_mem_alloc(agent, 0, (void **)&dev) == AQL_ERR_INVALID_ARG, "0 bytes allocated");
	CHECK_OK(aql_agent_mem_alloc(agent, N, (void **)&dev));
	CHECK_OK(aql_agent_mem_alloc(agent, N, (void **)&dev2));
	CHECK(dev && ((uintptr_t)dev & 255) == 0, "agent memory %p is not 256-byte aligned", (void *)dev);
	for (int i = 0; i < N; i++)
		host[i] = (unsigned char)(i * 7);
	/* Device memory is read and written through copies only. */
	CHECK_OK(aql_agent_copy(agent, dev, host, N));
	CHECK_OK(aql_agent_copy(agent, back, dev, N));
	CHECK(memcmp(back, host, N) == 0, "synchronous copy to agent memory differs");
	CHECK(aql_agent_copy(agent, NULL, host, 4) == AQL_ERR_INVALID_ARG, "NULL dst accepted");
	memset(back, 0, N);
	CHECK_OK(aql_agent_copy(agent, dev, back, N));
	/* Two queued copies, the second after the first: host -> dev -> dev2. */
	CHECK_OK(aql_queue_copy(q, dev, host, N, NULL, 0, &c1));
	CHECK_OK(aql_queue_copy(q, dev2, dev, N, &c1, 1, &c2));
	CHECK_DONE(aql_completion_wait(c2, TH_TIMEOUT_NS));
	CHECK(aql_completion_done(c1), "an earlier copy is not done after a later one");
	CHECK_OK(aql_agent_copy(agent, back, dev2, N));
	for (int i = 0; i < N; i++)
		bad += back[i] != (unsigned char)(i * 7);
	CHECK(bad == 0, "%d bytes differ after two queued copies", bad);
	aql_agent_mem_free(agent, dev);
	aql_agent_mem_free(agent, dev2);
	aql_queue_destroy(q);
	aql_mem_free(host);
	CHECK_OK(aql_mem_pool_destroy(pool));
	if (!th_test_gpu())
		CHECK_OK(aql_agent_destroy(agent));
	free(back);
}

/* aql_buf_to_agent copies only what the host changed (by host access, or
 * declared with aql_buf_host_written()), piece by piece. */
static void test_to_agent(void)
{
	aql_host_agent_config cfg = { .workers = 1, .separate_memory = 1 };
	aql_agent *agent = NULL;
	aql_queue *q = NULL;
	aql_buf *b = NULL, *parts[4];
	aql_launch_stats s;
	aql_completion done;
	aql_buf_info info;

	agent = separate_agent(&cfg);
	CHECK_OK(aql_queue_create(agent, NULL, &q));
	CHECK_OK(aql_buf_create(AQL_TYPE(int32_t), 400, AQL_IN, NULL, &b));
	CHECK_OK(aql_buf_partition(b, 4, parts));
	CHECK_OK(aql_buf_to_agent(b, q, NULL));
	CHECK_OK(aql_buf_get_info(b, &info));
	CHECK(info.agent == agent, "the buffer is not bound to the agent it went to");
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == 1 && s.bytes_in == 1600, "first: %llu copies, %llu bytes",
	      (unsigned long long)s.copies_in, (unsigned long long)s.bytes_in);
	CHECK_OK(aql_buf_to_agent(b, q, NULL));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == 1, "an unchanged buffer was copied again");
	/* Change parts 0 and 2 on the host: two pieces of 100 elements. */
	CHECK(aql_buf_data(parts[0], int32_t) && aql_buf_data(parts[2], int32_t), "part access");
	CHECK_OK(aql_buf_to_agent(b, q, &done));
	CHECK_DONE(aql_completion_wait(done, TH_TIMEOUT_NS));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == 3 && s.bytes_in == 2400, "after two parts changed: %llu copies, %llu bytes",
	      (unsigned long long)s.copies_in, (unsigned long long)s.bytes_in);
	/* Work in q's order writes part 1's host storage: it goes next. */
	CHECK(aql_buf_host_written(NULL, q) == AQL_ERR_INVALID_ARG &&
	      aql_buf_host_written(b, NULL) == AQL_ERR_INVALID_ARG, "NULL buffer or queue refused");
	CHECK_OK(aql_buf_host_written(parts[1], q));
	CHECK_OK(aql_buf_to_agent(b, q, NULL));
	CHECK_OK(aql_launch_get_stats(q, &s));
	CHECK(s.copies_in == 4 && s.bytes_in == 2800,
	      "after a part was written in queue order: %llu copies, %llu bytes",
	      (unsigned long long)s.copies_in, (unsigned long long)s.bytes_in);
	for (int i = 0; i < 4; i++)
		aql_buf_destroy(parts[i]);
	CHECK_OK(aql_buf_destroy(b));
	aql_queue_destroy(q);
	if (!th_test_gpu())
		CHECK_OK(aql_agent_destroy(agent));
}

int main(void)
{
	test_types();
	test_create();
	test_host_access();
	test_views();
	test_copies();
	test_to_agent();
	return th_finish();
}
