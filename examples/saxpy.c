/* SPDX-License-Identifier: MIT */
/*
 * saxpy on the CPU agent with typed buffers and a typed launch: the whole
 * host side of a program, as README.md's "Build your own program" builds
 * it. Usage: saxpy [saxpy.so]; the host code object comes from
 *   aql-kcc --target host -o saxpy.so saxpy_kernel.c
 * Exits 0 when every result is right, 1 otherwise.
 */
#include <stdio.h>
#include <aql/aql.h>

#define CHECK(call)                                                            \
	do {                                                                   \
		if ((call) != AQL_OK) {                                        \
			fprintf(stderr, "saxpy: %s: %s\n", #call,              \
				aql_error_message());                          \
			return 1;                                              \
		}                                                              \
	} while (0)

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : "saxpy.so";
	const uint32_t n = 1u << 20;
	aql_agent *agent;
	aql_queue *q;
	aql_code_object *co;
	const aql_kernel *saxpy;	/* the kernel handle AQL_LAUNCH takes */
	aql_buf *x, *y;
	aql_completion done;
	aql_launch_config cfg = { .grid = { n } };
	uint32_t wrong = 0;

	CHECK(aql_agent_default(&agent));	/* the CPU agent */
	CHECK(aql_queue_create(agent, NULL, &q));
	CHECK(aql_code_object_load_file(agent, path, NULL, &co));
	CHECK(aql_code_object_kernel(co, "saxpy", &saxpy));

	/* Element types and directions; no byte sizes, no device pointers. */
	CHECK(aql_buf_create(AQL_TYPE(float), n, AQL_IN, NULL, &x));
	CHECK(aql_buf_create(AQL_TYPE(float), n, AQL_INOUT, NULL, &y));
	float *hx = aql_buf_data(x, float), *hy = aql_buf_data(y, float);
	for (uint32_t i = 0; i < n; i++) {
		hx[i] = (float)i;
		hy[i] = 1.0f;
	}

	/* Each argument is checked against the kernel's signature first. */
	CHECK(AQL_LAUNCH(q, saxpy, &cfg, &done, AQL_ARG(2.0f), AQL_ARG(x), AQL_ARG(y),
			 AQL_ARG(n)));
	CHECK(aql_completion_wait(done, AQL_TIMEOUT_INFINITE));

	const float *ry = aql_buf_data_const(y, float);
	for (uint32_t i = 0; i < n; i++)
		wrong += ry[i] != 2.0f * (float)i + 1.0f;
	printf("saxpy: %u elements, %u wrong\n", n, wrong);

	aql_buf_destroy(x);
	aql_buf_destroy(y);
	aql_queue_destroy(q);
	aql_code_object_destroy(co);
	return wrong != 0;
}
