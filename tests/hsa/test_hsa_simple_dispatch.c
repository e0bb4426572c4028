/* SPDX-License-Identifier: MIT */
/*
 * simple_dispatch, as the HSA specification walks through it: find the
 * kernel agent, make a queue, load the kernel's code object into an
 * executable, look up "saxpy.kd", write a kernel dispatch packet into the
 * ring, publish its header, ring the doorbell, wait on the completion
 * signal, and check y = a * x + y. argv[1]: the library; argv[2]: the
 * host build of tests/kernels/saxpy.c.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "hsa_test.h"

#define N 1000u

/* saxpy's explicit arguments, laid out as the kernel reads them. */
struct saxpy_args {
	float a;
	const float *x;
	float *y;
	uint32_t n;
};

static hsa_status_t find_kernel_agent(hsa_agent_t agent, void *data)
{
	uint32_t features = 0;
	hsa_device_type_t type;

	hsa_agent_get_info(agent, HSA_AGENT_INFO_FEATURE, &features);
	hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
	/* aql runs host code objects on its CPU agent. */
	if ((features & HSA_AGENT_FEATURE_KERNEL_DISPATCH) && type == HSA_DEVICE_TYPE_CPU) {
		*(hsa_agent_t *)data = agent;
		return HSA_STATUS_INFO_BREAK;
	}
	return HSA_STATUS_SUCCESS;
}

int main(int argc, char **argv)
{
	hsa_agent_t agent = { 0 };
	hsa_queue_t *queue = NULL;
	hsa_code_object_reader_t reader;
	hsa_executable_t exec;
	hsa_executable_symbol_t symbol;
	hsa_region_t kernarg_region, data_region;
	uint64_t kernel_object = 0;
	uint32_t kernarg_size = 0, group_size = 0, private_size = 0, result = 1;
	struct saxpy_args *args = NULL;
	float *x = NULL, *y = NULL;
	hsa_kernel_dispatch_packet_t *packet;
	uint64_t id;
	int fd;

	if (argc < 3) {
		fprintf(stderr, "usage: %s libhsa-runtime64.so.1 saxpy.host.so\n", argv[0]);
		return 2;
	}
	ht_require_aql(argv[1]);
	CHECK_OK(hsa_init());
	CHECK(hsa_iterate_agents(find_kernel_agent, &agent) == HSA_STATUS_INFO_BREAK,
	      "no kernel agent");
	CHECK_OK(hsa_queue_create(agent, 4, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, 0, 0, &queue));

	fd = open(argv[2], O_RDONLY);
	CHECK(fd >= 0, "open %s", argv[2]);
	CHECK_OK(hsa_code_object_reader_create_from_file(fd, &reader));
	CHECK_OK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
					   NULL, &exec));
	CHECK_OK(hsa_executable_load_agent_code_object(exec, agent, reader, NULL, NULL));
	CHECK_OK(hsa_executable_freeze(exec, NULL));
	CHECK_OK(hsa_executable_validate(exec, &result));
	CHECK(result == 0, "validation result %u", result);
	CHECK_OK(hsa_executable_get_symbol_by_name(exec, "saxpy.kd", &agent, &symbol));
	CHECK_OK(hsa_executable_symbol_get_info(symbol, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT,
						&kernel_object));
	CHECK_OK(hsa_executable_symbol_get_info(symbol,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &kernarg_size));
	CHECK_OK(hsa_executable_symbol_get_info(symbol,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &group_size));
	CHECK_OK(hsa_executable_symbol_get_info(symbol,
		HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &private_size));
	CHECK(kernel_object != 0, "kernel object");
	CHECK(kernarg_size >= sizeof(struct saxpy_args), "kernarg size %u", kernarg_size);

	kernarg_region = ht_region(agent, HSA_REGION_GLOBAL_FLAG_KERNARG);
	data_region = ht_region(agent, HSA_REGION_GLOBAL_FLAG_FINE_GRAINED);
	CHECK_OK(hsa_memory_allocate(kernarg_region, kernarg_size, (void **)&args));
	CHECK_OK(hsa_memory_allocate(data_region, N * sizeof(float), (void **)&x));
	CHECK_OK(hsa_memory_allocate(data_region, N * sizeof(float), (void **)&y));
	if (ht_failed)
		return ht_finish();
	for (uint32_t i = 0; i < N; i++) {
		x[i] = (float)i;
		y[i] = 1.0f;
	}
	memset(args, 0, kernarg_size);
	*args = (struct saxpy_args){ 2.0f, x, y, N };

	/* The packet at the first free slot, everything but its header first. */
	id = hsa_queue_add_write_index_relaxed(queue, 1);
	packet = (hsa_kernel_dispatch_packet_t *)queue->base_address + id % queue->size;
	memset((char *)packet + 4, 0, sizeof(*packet) - 4);
	packet->workgroup_size_x = 64;
	packet->workgroup_size_y = 1;
	packet->workgroup_size_z = 1;
	packet->grid_size_x = N;
	packet->grid_size_y = 1;
	packet->grid_size_z = 1;
	packet->private_segment_size = private_size;
	packet->group_segment_size = group_size;
	packet->kernel_object = kernel_object;
	packet->kernarg_address = args;
	CHECK_OK(hsa_signal_create(1, 0, NULL, &packet->completion_signal));
	hsa_signal_t done = packet->completion_signal;
	ht_publish(packet, ht_header(HSA_PACKET_TYPE_KERNEL_DISPATCH),
		   1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS);
	hsa_signal_store_screlease(queue->doorbell_signal, (hsa_signal_value_t)id);
	CHECK(hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_EQ, 0, ht_timeout_ns(),
					HSA_WAIT_STATE_BLOCKED) == 0, "the dispatch completes");

	unsigned bad = 0;
	for (uint32_t i = 0; i < N; i++)
		bad += y[i] != 2.0f * (float)i + 1.0f;
	CHECK(bad == 0, "%u of %u results wrong (y[1] = %g)", bad, N, (double)y[1]);

	CHECK_OK(hsa_signal_destroy(done));
	CHECK_OK(hsa_memory_free(args));
	CHECK_OK(hsa_memory_free(x));
	CHECK_OK(hsa_memory_free(y));
	CHECK_OK(hsa_executable_destroy(exec));
	CHECK_OK(hsa_code_object_reader_destroy(reader));
	close(fd);
	CHECK_OK(hsa_queue_destroy(queue));
	CHECK_OK(hsa_shut_down());
	return ht_finish();
}
