/* SPDX-License-Identifier: MIT */
/*
 * vector_copy, as in the HSA samples: the code object comes from memory,
 * the input from the coarse-grained region, filled with hsa_memory_copy,
 * the output from the fine-grained one; a 1D grid of 256-item
 * work-groups copies it, and the program checks every element. Run on
 * two queues at once (MULTI), each dispatching half. argv[1]: the
 * library; argv[2]: tests/hsa/vector_copy_kernel.c's host build.
 */
#include <stdlib.h>
#include <string.h>

#include "hsa_test.h"

#define N (256u * 1024u)

struct copy_args {
	const uint32_t *in;
	uint32_t *out;
};

static void dispatch(hsa_queue_t *q, uint64_t kernel_object, void *args, uint32_t items,
		     hsa_signal_t done)
{
	uint64_t id = hsa_queue_add_write_index_scacq_screl(q, 1);
	hsa_kernel_dispatch_packet_t *p = (hsa_kernel_dispatch_packet_t *)q->base_address +
					  (id & (q->size - 1));

	memset((char *)p + 4, 0, sizeof(*p) - 4);
	p->workgroup_size_x = 256;
	p->workgroup_size_y = 1;
	p->workgroup_size_z = 1;
	p->grid_size_x = items;
	p->grid_size_y = 1;
	p->grid_size_z = 1;
	p->kernel_object = kernel_object;
	p->kernarg_address = args;
	p->completion_signal = done;
	ht_publish(p, ht_header(HSA_PACKET_TYPE_KERNEL_DISPATCH),
		   1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS);
	hsa_signal_store_relaxed(q->doorbell_signal, (hsa_signal_value_t)id);
}

int main(int argc, char **argv)
{
	hsa_agent_t agent;
	hsa_queue_t *q[2] = { NULL, NULL };
	hsa_code_object_reader_t reader;
	hsa_executable_t exec;
	hsa_executable_symbol_t symbol;
	uint64_t kernel_object = 0;
	uint32_t kernarg_size = 0, *host, *in = NULL, *out = NULL;
	struct copy_args *args[2] = { NULL, NULL };
	hsa_signal_t done;
	size_t size = 0;
	void *image;

	if (argc < 3) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1 vector_copy.host.so\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	image = ht_read_file(argv[2], &size);
	CHECK(image, "read %s", argv[2]);
	CHECK_OK(hsa_init());
	agent = ht_cpu_agent();
	for (int i = 0; i < 2; i++)
		CHECK_OK(hsa_queue_create(agent, 64, HSA_QUEUE_TYPE_MULTI, NULL, NULL, UINT32_MAX,
					  UINT32_MAX, &q[i]));
	CHECK_OK(hsa_code_object_reader_create_from_memory(image, size, &reader));
	CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					   "", &exec));
	CHECK_OK(hsa_executable_load_agent_code_object(exec, agent, reader, "", NULL));
	CHECK_OK(hsa_executable_freeze(exec, ""));
	CHECK_OK(hsa_executable_get_symbol_by_name(exec, "vector_copy.kd", &agent, &symbol));
	CHECK_OK(hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
						&kernel_object));
	CHECK_OK(hsa_executable_symbol_get_info(symbol,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &kernarg_size));
	CHECK(kernarg_size >= sizeof(struct copy_args), "kernarg size %u", kernarg_size);

	CHECK_OK(hsa_memory_allocate(ht_region(agent, HSA_REGION_GLOBAL_FLAG_COARSE_GRAINED),
				     N * 4, (void **)&in));
	CHECK_OK(hsa_memory_allocate(ht_region(agent, HSA_REGION_GLOBAL_FLAG_FINE_GRAINED),
				     N * 4, (void **)&out));
	for (int i = 0; i < 2; i++)
		CHECK_OK(hsa_memory_allocate(ht_region(agent, HSA_REGION_GLOBAL_FLAG_KERNARG),
					     kernarg_size, (void **)&args[i]));
	host = malloc(N * 4);
	CHECK(host, "malloc");
	CHECK_OK(hsa_signal_create(2, 0, NULL, &done));
	if (ht_failed)
		return ht_finish();
	for (uint32_t i = 0; i < N; i++)
		host[i] = i * 2654435761u;
	CHECK_OK(hsa_memory_copy(in, host, N * 4));
	memset(out, 0, N * 4);
	for (int i = 0; i < 2; i++) {
		memset(args[i], 0, kernarg_size);
		args[i]->in = in + i * (N / 2);
		args[i]->out = out + i * (N / 2);
		dispatch(q[i], kernel_object, args[i], N / 2, done);
	}
	CHECK(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(),
					HSA_WAIT_STATE_BLOCKED) == 0, "both dispatches complete");
	CHECK(!memcmp(out, host, N * 4), "out == in");

	CHECK_OK(hsa_signal_destroy(done));
	for (int i = 0; i < 2; i++) {
		CHECK_OK(hsa_memory_free(args[i]));
		CHECK_OK(hsa_queue_destroy(q[i]));
	}
	CHECK_OK(hsa_memory_free(in));
	CHECK_OK(hsa_memory_free(out));
	CHECK_OK(hsa_executable_destroy(exec));
	CHECK_OK(hsa_code_object_reader_destroy(reader));
	CHECK_OK(hsa_shut_down());
	free(host);
	free(image);
	return ht_finish();
}
