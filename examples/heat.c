/* SPDX-License-Identifier: MIT */
/*
 * The 1-D heat equation over time steps: two typed buffers ping-ponged
 * (each step reads one and writes the other), each step launched on the
 * other of two queues and chained to the step before by its completion,
 * with no host round trip until the end. The result is compared with the
 * same arithmetic in plain C. Usage: heat [heat.so]; exits 0 when they
 * agree, 1 otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <aql/aql.h>

#define CHECK(call)                                                            \
	do {                                                                   \
		if ((call) != AQL_OK) {                                        \
			fprintf(stderr, "heat: %s: %s\n", #call,               \
				aql_error_message());                          \
			return 1;                                              \
		}                                                              \
	} while (0)

enum { N = 1 << 16, STEPS = 100 };

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "heat.so";
	const float r = 0.25f;		/* alpha * dt / dx^2, stable below 0.5 */
	aql_agent *agent;
	aql_queue *q[2];
	aql_code_object *co;
	const aql_kernel *heat_step;
	aql_buf *u[2];
	aql_completion done, prev = { 0 };	/* a NULL signal: complete from the start */
	aql_launch_config cfg = { .grid = { N }, .after = &prev, .after_count = 1 };
	float *ref = (float *)calloc(N, sizeof(float));
	float *tmp = (float *)calloc(N, sizeof(float));
	uint32_t wrong = 0;

	if (!ref || !tmp)
		return 1;
	CHECK(aql_agent_default(&agent));
	CHECK(aql_queue_create(agent, NULL, &q[0]));
	CHECK(aql_queue_create(agent, NULL, &q[1]));
	CHECK(aql_code_object_load_file(agent, path, NULL, &co));
	CHECK(aql_code_object_kernel(co, "heat_step", &heat_step));

	/* Both are read and written by some step: AQL_INOUT. */
	CHECK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, NULL, &u[0]));
	CHECK(aql_buf_create(AQL_TYPE(float), N, AQL_INOUT, NULL, &u[1]));
	float *h = aql_buf_data(u[0], float);
	for (uint32_t i = 0; i < N; i++)
		ref[i] = h[i] = i < N / 2 ? 100.0f : 0.0f;	/* a hot half */

	/* Step t reads u[t % 2] and writes u[(t + 1) % 2], on queue t % 2,
	 * after step t - 1: the completion orders the two queues. */
	for (uint32_t t = 0; t < STEPS; t++) {
		CHECK(AQL_LAUNCH(q[t % 2], heat_step, &cfg, &done, AQL_ARG(u[t % 2]),
				 AQL_ARG(u[(t + 1) % 2]), AQL_ARG(r), AQL_ARG((uint32_t)N)));
		prev = done;
	}
	CHECK(aql_completion_wait(done, AQL_TIMEOUT_INFINITE));

	/* The same steps in plain C. */
	for (uint32_t t = 0; t < STEPS; t++) {
		tmp[0] = ref[0];
		tmp[N - 1] = ref[N - 1];
		for (uint32_t i = 1; i < N - 1; i++)
			tmp[i] = ref[i] + r * (ref[i - 1] - 2.0f * ref[i] + ref[i + 1]);
		for (uint32_t i = 0; i < N; i++)
			ref[i] = tmp[i];
	}
	const float *res = aql_buf_data_const(u[STEPS % 2], float);
	for (uint32_t i = 0; i < N; i++)
		wrong += !(fabsf(res[i] - ref[i]) <= 1e-4f);
	printf("heat: %d points, %d steps, %u differ from plain C; u[N/2] = %.4f\n", N, STEPS,
	       wrong, (double)res[N / 2]);

	free(ref);
	free(tmp);
	aql_buf_destroy(u[0]);
	aql_buf_destroy(u[1]);
	aql_queue_destroy(q[0]);
	aql_queue_destroy(q[1]);
	aql_code_object_destroy(co);
	return wrong != 0;
}
