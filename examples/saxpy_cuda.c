/* SPDX-License-Identifier: MIT */
/*
 * saxpy.c on an NVIDIA GPU: the same kernel file built as PTX,
 *   aql-kcc --target sm_75 -o saxpy.ptx saxpy_kernel.c
 * and the same calls; only the agent and the code object differ. Buffers
 * get device memory: x is copied in, y in and back, by their directions.
 * Usage: saxpy_cuda [saxpy.ptx]. Exits 0 when every result is right, 77
 * when there is no NVIDIA agent (saying why), 1 otherwise. CI runs it on
 * the emulated driver (tests/cuda_emu).
 */
#include <stdio.h>
#include <aql/aql.h>

#define CHECK(call)                                                            \
	do {                                                                   \
		if ((call) != AQL_OK) {                                        \
			fprintf(stderr, "saxpy_cuda: %s: %s\n", #call,         \
				aql_error_message());                          \
			return 1;                                              \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "saxpy.ptx";
	const uint32_t n = 100000;	/* not a multiple of the work-group */
	aql_agent *gpu;
	aql_queue *q;
	aql_code_object *co;
	const aql_kernel *saxpy;
	aql_buf *x, *y;
	aql_completion done;
	aql_launch_config cfg = { .grid = { n } };
	aql_launch_stats stats;
	uint32_t wrong = 0;

	if (aql_agent_open(AQL_AGENT_NVIDIA, 0, &gpu) != AQL_OK) {
		fprintf(stderr, "saxpy_cuda: no NVIDIA agent: %s\n", aql_error_message());
		return 77;
	}
	CHECK(aql_queue_create(gpu, NULL, &q));		/* a CUDA stream */
	CHECK(aql_code_object_load_file(gpu, path, NULL, &co));
	CHECK(aql_code_object_kernel(co, "saxpy", &saxpy));

	CHECK(aql_buf_create(AQL_TYPE(float), n, AQL_IN, NULL, &x));
	CHECK(aql_buf_create(AQL_TYPE(float), n, AQL_INOUT, NULL, &y));
	float *hx = aql_buf_data(x, float), *hy = aql_buf_data(y, float);
	for (uint32_t i = 0; i < n; i++) {
		hx[i] = (float)i;
		hy[i] = 1.0f;
	}

	CHECK(AQL_LAUNCH(q, saxpy, &cfg, &done, AQL_ARG(2.0f), AQL_ARG(x), AQL_ARG(y),
			 AQL_ARG(n)));
	CHECK(aql_completion_wait(done, AQL_TIMEOUT_INFINITE));

	const float *ry = aql_buf_data_const(y, float);
	for (uint32_t i = 0; i < n; i++)
		wrong += ry[i] != 2.0f * (float)i + 1.0f;
	CHECK(aql_launch_get_stats(q, &stats));
	printf("saxpy_cuda: %u elements, %u wrong; %llu copies in, %llu back\n", n, wrong,
	       (unsigned long long)stats.copies_in, (unsigned long long)stats.copies_out);

	aql_buf_destroy(x);
	aql_buf_destroy(y);
	aql_queue_destroy(q);
	aql_code_object_destroy(co);
	aql_agent_destroy(gpu);
	return wrong != 0;
}
