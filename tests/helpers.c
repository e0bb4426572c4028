/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "util/sanitizer.h"

unsigned th_passed, th_failed;
char th_last_error[256];
unsigned th_error_calls;

int th_finish(void)
{
	printf("%u passed, %u failed\n", th_passed, th_failed);
	return th_failed ? 1 : 0;
}

uint64_t th_timeout_ns(void)
{
	return AQL_WORK_TIMEOUT_NS;
}

void th_stop(const char *why)
{
	th_failed++;
	fprintf(stderr, "FAIL: %s\nstopping here: the work waited for may still run, so nothing is freed or unloaded\n",
		why);
	printf("%u passed, %u failed\n", th_passed, th_failed);
	fflush(stdout);
	fflush(stderr);
	_exit(1);
}

aql_status th_done(aql_status st)
{
	if (st == AQL_ERR_TIMEOUT)
		th_stop(aql_error_message());
	return st;
}

aql_agent *th_agent(void)
{
	aql_agent *agent;

	if (aql_agent_default(&agent) != AQL_OK) {
		fprintf(stderr, "default agent: %s\n", aql_error_message());
		exit(1);
	}
	return agent;
}

static void record_error(aql_queue *q, aql_status st, const char *message, void *user)
{
	(void)q, (void)st, (void)user;
	snprintf(th_last_error, sizeof(th_last_error), "%s", message);
	__atomic_fetch_add(&th_error_calls, 1, __ATOMIC_RELEASE);
}

aql_queue *th_queue(uint32_t size, enum aql_queue_type type, uint32_t flags)
{
	aql_queue_config config = { .size = size, .type = type, .flags = flags,
				    .full_timeout_ns = TH_TIMEOUT_NS,
				    .error_callback = record_error };
	aql_queue *q;

	if (aql_queue_create(th_agent(), &config, &q) != AQL_OK) {
		fprintf(stderr, "queue: %s\n", aql_error_message());
		exit(1);
	}
	return q;
}

static aql_agent *test_agent;
static pthread_once_t test_agent_once = PTHREAD_ONCE_INIT;

static void open_test_agent(void)
{
	const char *want = getenv("AQL_TEST_AGENT");
	enum aql_agent_kind kind;

	if (!want || !*want || strcmp(want, "cpu") == 0) {
		test_agent = th_agent();
		return;
	}
	if (strcmp(want, "nvidia") == 0) {
		kind = AQL_AGENT_NVIDIA;
	} else if (strcmp(want, "amd") == 0) {
		kind = AQL_AGENT_AMD;
	} else {
		fprintf(stderr, "AQL_TEST_AGENT=%s: expected cpu, nvidia or amd\n", want);
		exit(1);
	}
	if (aql_agent_open(kind, 0, &test_agent) != AQL_OK) {
		fprintf(stderr, "AQL_TEST_AGENT=%s: %s\n", want, aql_error_message());
		exit(1);
	}
	printf("running on %s agent 0\n", kind == AQL_AGENT_AMD ? "AMD" : "NVIDIA");
}

aql_agent *th_test_agent(void)
{
	pthread_once(&test_agent_once, open_test_agent);
	return test_agent;
}

int th_test_gpu(void)
{
	return th_test_agent() != th_agent();
}

enum aql_agent_kind th_test_kind(void)
{
	aql_agent_info info;

	return aql_agent_get_info(th_test_agent(), &info) == AQL_OK ? info.kind : AQL_AGENT_CPU;
}

aql_queue *th_test_queue(uint32_t size, enum aql_queue_type type, uint32_t flags)
{
	const char *resident = getenv("AQL_TEST_RESIDENT");
	aql_queue_config config = { .size = size, .type = type, .flags = flags,
				    .full_timeout_ns = TH_TIMEOUT_NS,
				    .error_callback = record_error };
	aql_queue *q;

	if (resident && !strcmp(resident, "1"))
		config.flags |= AQL_QUEUE_RESIDENT | AQL_QUEUE_RESIDENT_BLOCKS(2);
	if (aql_queue_create(th_test_agent(), &config, &q) != AQL_OK) {
		fprintf(stderr, "queue: %s\n", aql_error_message());
		exit(1);
	}
	return q;
}

aql_code_object *th_load_kernels(const char *host_path, const char *gpu_path)
{
	const char *path = th_test_gpu() ? gpu_path : host_path;
	aql_code_object *co = NULL;

	if (!path) {
		fprintf(stderr, "no %s kernels given for this agent\n",
			th_test_gpu() ? "GPU" : "host");
		exit(1);
	}
	if (aql_code_object_load_file(th_test_agent(), path, NULL, &co) != AQL_OK) {
		fprintf(stderr, "%s: %s\n", path, aql_error_message());
		exit(1);
	}
	return co;
}

void th_skip(const char *what, const char *why)
{
	printf("skipped on this agent: %s (%s)\n", what, why);
}

aql_dispatch_packet th_dispatch(const aql_host_kernel_descriptor *kd, const void *kernarg,
				unsigned dims, const uint32_t grid[3], const uint16_t wg[3],
				aql_signal *completion, int barrier)
{
	aql_dispatch_packet p = {
		.header = aql_packet_header(AQL_PACKET_KERNEL_DISPATCH, barrier,
					    AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM),
		.setup = (uint16_t)dims,
		.workgroup_size_x = wg[0], .workgroup_size_y = wg[1], .workgroup_size_z = wg[2],
		.grid_size_x = grid[0], .grid_size_y = grid[1], .grid_size_z = grid[2],
		.group_segment_size = kd->group_segment_fixed_size,
		.private_segment_size = kd->private_segment_fixed_size,
		.kernel_object = (uint64_t)(uintptr_t)kd,
		.kernarg_address = (uint64_t)(uintptr_t)kernarg,
		.completion_signal = aql_signal_handle(completion),
	};
	return p;
}

aql_dispatch_packet th_dispatch1(const aql_host_kernel_descriptor *kd, const void *kernarg,
				 aql_signal *completion)
{
	static const uint32_t grid[3] = { 1, 1, 1 };
	static const uint16_t wg[3] = { 1, 1, 1 };

	return th_dispatch(kd, kernarg, 1, grid, wg, completion, 0);
}

aql_status th_submit(aql_queue *q, const void *packet)
{
	aql_packet p;
	aql_status st;

	memcpy(&p, packet, sizeof(p));
	st = aql_queue_submit(q, &p);
	if (st != AQL_OK)
		CHECK(0, "submit: %s", aql_error_message());
	return st;
}

aql_status th_submit_all(aql_queue *q, const aql_packet *packets, uint32_t n)
{
	uint64_t first = 0;
	aql_status st = aql_queue_reserve(q, n, &first);

	if (st != AQL_OK) {
		CHECK(0, "reserve %u packets: %s", n, aql_error_message());
		return st;
	}
	for (uint32_t i = n; i-- > 0;)
		aql_packet_store(aql_queue_slot(q, first + i), &packets[i]);
	aql_queue_ring_doorbell(q, first + n - 1);
	return AQL_OK;
}

int64_t th_wait_done(aql_signal *signal)
{
	int64_t v = 1;
	aql_status st = th_done(aql_signal_wait(signal, AQL_COND_LT, 1, TH_TIMEOUT_NS,
						AQL_WAIT_SPIN_BLOCK, &v));

	CHECK(st == AQL_OK, "completion wait: %s", aql_error_message());
	return v;
}

uint64_t th_wait_read_index(aql_queue *q, uint64_t id)
{
	uint64_t end = th_now_ns() + TH_TIMEOUT_NS, read;

	while ((read = __atomic_load_n(&q->amd->read_dispatch_id, __ATOMIC_ACQUIRE)) < id) {
		if (th_now_ns() > end) {
			char why[128];

			snprintf(why, sizeof(why), "queue %llu: read index %llu, waited for %llu",
				 (unsigned long long)q->amd->hsa.id, (unsigned long long)read,
				 (unsigned long long)id);
			th_stop(why);
		}
		th_sleep_ms(1);
	}
	return read;
}

aql_signal *th_signal(int64_t initial)
{
	aql_signal *s;

	if (aql_signal_create(initial, &s) != AQL_OK) {
		fprintf(stderr, "signal: %s\n", aql_error_message());
		exit(1);
	}
	return s;
}

static void empty_kernel(const void *kernarg)
{
	(void)kernarg;
}

static void count_kernel(const void *kernarg)
{
	const struct th_count_args *a = kernarg;

	__atomic_fetch_add(a->counter, 1, __ATOMIC_RELAXED);
}

struct th_empty_args {
	uint64_t unused;
};

const aql_host_kernel_descriptor th_empty_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(empty_kernel, struct th_empty_args, AQL_HOST_KD_NO_BARRIER);
const aql_host_kernel_descriptor th_count_kd =
	AQL_HOST_KERNEL_DESCRIPTOR(count_kernel, struct th_count_args, AQL_HOST_KD_NO_BARRIER);

const aql_kernel *th_kernel(aql_code_object *co, const char *name)
{
	const aql_kernel *k = NULL;

	CHECK_OK(aql_code_object_kernel(co, name, &k));
	if (!k)
		exit(1);
	return k;
}

aql_buf *th_buf(const aql_type *type, uint64_t n)
{
	aql_buf *b = NULL;

	CHECK_OK(aql_buf_create(type, n, AQL_INOUT, NULL, &b));
	if (!b)
		exit(1);
	memset(aql_buf_host(b, type), 0, n * type->size);
	return b;
}

uint64_t th_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void th_sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

void *th_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	long n;
	void *buf;

	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)n + 1)) ||
	    fread(buf, 1, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	*size = (size_t)n;
	return buf;
}

int th_error_has(const char *needle)
{
	if (strstr(aql_error_message(), needle))
		return 1;
	fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", aql_error_message(), needle);
	return 0;
}

void *th_kfdemu_sym(const char *name)
{
	const char *path = getenv("AQL_KFD_SYS");
	void *lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	void *fn = lib ? dlsym(lib, name) : NULL;

	/* The library stays loaded: aql holds it. */
	if (lib)
		dlclose(lib);
	if (!fn)
		th_stop("no kfdemu symbols in AQL_KFD_SYS");
	return fn;
}

void th_check_saxpy(aql_agent *agent, const char *hsaco, const char *where)
{
	enum { N = 1000 };
	aql_queue_config qc = { .size = 64, .full_timeout_ns = TH_TIMEOUT_NS };
	aql_launch_config c = { .grid = { N } };
	aql_code_object *co = NULL;
	const aql_kernel *k = NULL;
	aql_queue *q = NULL;
	aql_completion done;
	aql_buf_f32 x, y;
	float *hx, *hy;
	int bad = 0;

	CHECK_OK(aql_queue_create(agent, &qc, &q));
	CHECK_OK(aql_code_object_load_file(agent, hsaco, NULL, &co));
	CHECK_OK(aql_code_object_kernel(co, "saxpy", &k));
	CHECK_OK(aql_buf_f32_create(N, AQL_IN, NULL, &x));
	CHECK_OK(aql_buf_f32_create(N, AQL_INOUT, NULL, &y));
	hx = aql_buf_f32_data(x);
	hy = aql_buf_f32_data(y);
	if (!q || !k || !hx || !hy)
		th_stop("saxpy or its buffers");
	for (int i = 0; i < N; i++) {
		hx[i] = (float)i;
		hy[i] = 1.0f;
	}
	CHECK_OK(AQL_LAUNCH(q, k, &c, &done, AQL_ARG(2.0f), AQL_ARG(x.raw), AQL_ARG(y.raw),
			    AQL_ARG((uint32_t)N)));
	CHECK_OK(th_done(aql_completion_wait(done, TH_TIMEOUT_NS)));
	CHECK_OK(aql_buf_wait(y.raw, TH_TIMEOUT_NS));
	hy = aql_buf_f32_data(y);
	for (int i = 0; hy && i < N; i++)
		bad += hy[i] != 2.0f * (float)i + 1.0f;
	CHECK(hy && !bad, "saxpy %s: %d wrong", where, bad);
	CHECK_OK(aql_buf_destroy(x.raw));
	CHECK_OK(aql_buf_destroy(y.raw));
	CHECK_OK(aql_queue_destroy(q));
	CHECK_OK(aql_code_object_destroy(co));
}

aql_signal *th_gate_close(aql_queue *q)
{
	aql_signal *gate = th_signal(1);
	aql_barrier_packet b = {
		.header = aql_packet_header(AQL_PACKET_BARRIER_AND, 1, AQL_FENCE_SYSTEM,
					    AQL_FENCE_SYSTEM),
		.dep_signal = { aql_signal_handle(gate) },
	};

	th_submit(q, &b);
	return gate;
}

void th_gate_open(aql_signal *gate)
{
	aql_signal_store(gate, 0, AQL_RELEASE);
}

void th_check_agent_copies(aql_agent *agent, const char *where)
{
	enum { N = 300000 };
	unsigned char *src = malloc(N), *dst = malloc(N);
	void *v1 = NULL, *v2 = NULL;
	int zero = 1;

	CHECK_OK(aql_agent_mem_alloc(agent, N, &v1));
	CHECK_OK(aql_agent_mem_alloc(agent, N, &v2));
	if (!src || !dst || !v1 || !v2)
		th_stop("no memory for the copies");
	memset(dst, 0xee, N);
	CHECK_OK(aql_agent_copy(agent, dst, v1, N));
	for (size_t i = 0; i < N; i++)
		zero &= dst[i] == 0;
	CHECK(zero, "fresh agent memory is zeroed %s", where);
	for (size_t i = 0; i < N; i++)
		src[i] = (unsigned char)(i * 131 + (i >> 9) + 7);
	CHECK_OK(aql_agent_copy(agent, v1, src, N));
	CHECK_OK(aql_agent_copy(agent, v2, v1, N));
	CHECK_OK(aql_agent_copy(agent, dst, v2, N));
	CHECK(!memcmp(src, dst, N), "%d bytes through agent memory %s", N, where);
	aql_agent_mem_free(agent, v1);
	aql_agent_mem_free(agent, v2);
	free(src);
	free(dst);
}

uint16_t th_header(enum aql_packet_type type)
{
	return aql_packet_header(type, 1, AQL_FENCE_SYSTEM, AQL_FENCE_SYSTEM);
}

aql_packet th_barrier_and(aql_signal *dep, aql_signal *done)
{
	aql_packet p = { 0 };

	p.barrier.header = th_header(AQL_PACKET_BARRIER_AND);
	p.barrier.dep_signal[2] = aql_signal_handle(dep);
	p.barrier.completion_signal = aql_signal_handle(done);
	return p;
}

aql_packet th_barrier_value(aql_signal *sig, enum aql_signal_condition cond, int64_t value,
			    int64_t mask, aql_signal *done)
{
	aql_packet p = { 0 };

	p.barrier_value.header.header = th_header(AQL_PACKET_VENDOR_SPECIFIC);
	p.barrier_value.header.format = AQL_AMD_PACKET_BARRIER_VALUE;
	p.barrier_value.signal = aql_signal_handle(sig);
	p.barrier_value.cond = cond;
	p.barrier_value.value = value;
	p.barrier_value.mask = mask;
	p.barrier_value.completion_signal = aql_signal_handle(done);
	return p;
}

float *th_device_floats(aql_agent *agent, uint32_t n, float v)
{
	float *host = malloc(n * sizeof(float)), *dev = NULL;

	if (!host)
		th_stop("out of memory");
	for (uint32_t i = 0; i < n; i++)
		host[i] = v;
	CHECK_OK(aql_agent_mem_alloc(agent, n * sizeof(float), (void **)&dev));
	if (!dev)
		th_stop("no device memory");
	CHECK_OK(aql_agent_copy(agent, dev, host, n * sizeof(float)));
	free(host);
	return dev;
}

int th_device_all(aql_agent *agent, const float *dev, uint32_t n, float v)
{
	float *host = malloc(n * sizeof(float));
	int ok = host && aql_agent_copy(agent, host, dev, n * sizeof(float)) == AQL_OK;

	for (uint32_t i = 0; ok && i < n; i++)
		ok = host[i] == v;
	if (!ok && host)
		fprintf(stderr, "device floats: [0] = %g [%u] = %g, expected %g\n",
			(double)host[0], n - 1, (double)host[n - 1], (double)v);
	free(host);
	return ok;
}
