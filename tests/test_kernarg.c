/* SPDX-License-Identifier: MIT */
/*
 * Kernarg bytes. The expected layouts are tables written from LLVM's
 * AMDGPUUsage ("Code Object V5 Metadata" hidden arguments, and the V4
 * hidden arguments that follow the explicit ones); the builder only sees
 * metadata, so these check that it puts each value where the ABI says.
 * Real V5 objects given as arguments are checked against the same table.
 */
#include <string.h>

#include "helpers.h"
#include <aql/code_object.h>
#include <aql/kernarg.h>

struct field {
	enum aql_arg_kind kind;
	uint32_t offset;	/* from the start of the hidden block */
	uint32_t size;
	uint64_t value;		/* for the packet and hidden values below */
};

/*
 * V5/V6 hidden block for a 2-D grid of 1000 x 7 in 256 x 2 groups, 4096
 * bytes of group segment of which 1024 static, and the hidden values of
 * hidden_in below.
 */
static const struct field v5_table[] = {
	{ AQL_ARG_HIDDEN_BLOCK_COUNT_X, 0, 4, 3 },
	{ AQL_ARG_HIDDEN_BLOCK_COUNT_Y, 4, 4, 3 },
	{ AQL_ARG_HIDDEN_BLOCK_COUNT_Z, 8, 4, 1 },
	{ AQL_ARG_HIDDEN_GROUP_SIZE_X, 12, 2, 256 },
	{ AQL_ARG_HIDDEN_GROUP_SIZE_Y, 14, 2, 2 },
	{ AQL_ARG_HIDDEN_GROUP_SIZE_Z, 16, 2, 1 },
	{ AQL_ARG_HIDDEN_REMAINDER_X, 18, 2, 232 },
	{ AQL_ARG_HIDDEN_REMAINDER_Y, 20, 2, 1 },
	{ AQL_ARG_HIDDEN_REMAINDER_Z, 22, 2, 0 },
	{ AQL_ARG_HIDDEN_TOOL_CORRELATION_ID, 24, 8, 0 },
	{ AQL_ARG_HIDDEN_GLOBAL_OFFSET_X, 40, 8, 5 },
	{ AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y, 48, 8, 6 },
	{ AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z, 56, 8, 7 },
	{ AQL_ARG_HIDDEN_GRID_DIMS, 64, 2, 2 },
	{ AQL_ARG_HIDDEN_PRINTF_BUFFER, 72, 8, 0x1000 },
	{ AQL_ARG_HIDDEN_HOSTCALL_BUFFER, 80, 8, 0x2000 },
	{ AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG, 88, 8, 0x4000 },
	{ AQL_ARG_HIDDEN_HEAP_V1, 96, 8, 0x3000 },
	{ AQL_ARG_HIDDEN_DEFAULT_QUEUE, 104, 8, 0x5000 },
	{ AQL_ARG_HIDDEN_COMPLETION_ACTION, 112, 8, 0x6000 },
	{ AQL_ARG_HIDDEN_DYNAMIC_LDS_SIZE, 120, 4, 3072 },
	{ AQL_ARG_HIDDEN_PRIVATE_BASE, 192, 4, 0 },
	{ AQL_ARG_HIDDEN_SHARED_BASE, 196, 4, 0 },
	{ AQL_ARG_HIDDEN_QUEUE_PTR, 200, 8, 0x7000 },
};

/* V4: the hidden arguments follow the explicit ones, 8 bytes each. */
static const struct field v4_table[] = {
	{ AQL_ARG_HIDDEN_GLOBAL_OFFSET_X, 0, 8, 5 },
	{ AQL_ARG_HIDDEN_GLOBAL_OFFSET_Y, 8, 8, 6 },
	{ AQL_ARG_HIDDEN_GLOBAL_OFFSET_Z, 16, 8, 7 },
	{ AQL_ARG_HIDDEN_HOSTCALL_BUFFER, 24, 8, 0x2000 },
	{ AQL_ARG_HIDDEN_DEFAULT_QUEUE, 32, 8, 0x5000 },
	{ AQL_ARG_HIDDEN_COMPLETION_ACTION, 40, 8, 0x6000 },
	{ AQL_ARG_HIDDEN_MULTIGRID_SYNC_ARG, 48, 8, 0x4000 },
};

static const aql_kernarg_hidden hidden_in = {
	.global_offset = { 5, 6, 7 },
	.printf_buffer = 0x1000,
	.hostcall_buffer = 0x2000,
	.heap_v1 = 0x3000,
	.multigrid_sync_arg = 0x4000,
	.default_queue = 0x5000,
	.completion_action = 0x6000,
	.queue_ptr = 0x7000,
};

#define EXPLICIT_END 16u	/* int at 0, pointer at 8 */
#define MAX_ARGS 32

static aql_dispatch_packet packet_2d(void)
{
	aql_dispatch_packet p = {
		.setup = 2,
		.workgroup_size_x = 256, .workgroup_size_y = 2, .workgroup_size_z = 1,
		.grid_size_x = 1000, .grid_size_y = 7, .grid_size_z = 1,
		.group_segment_size = 4096,
	};
	return p;
}

/* A kernel whose metadata lists two explicit args then the table's. */
static void make_kernel(const struct field *t, size_t n, uint32_t size,
			aql_kernel_arg *args, aql_kernel_metadata *md, aql_kernel *k)
{
	memset(args, 0, sizeof(*args) * MAX_ARGS);
	args[0] = (aql_kernel_arg){ .name = "n", .type_name = "int", .offset = 0, .size = 4,
				    .kind = AQL_ARG_BY_VALUE };
	args[1] = (aql_kernel_arg){ .name = "out", .type_name = "float*", .offset = 8,
				    .size = 8, .kind = AQL_ARG_GLOBAL_BUFFER,
				    .address_space = AQL_AS_GLOBAL };
	for (size_t i = 0; i < n; i++)
		args[2 + i] = (aql_kernel_arg){ .offset = EXPLICIT_END + t[i].offset,
						.size = t[i].size, .kind = t[i].kind };
	*md = (aql_kernel_metadata){ .name = "k", .symbol = "k.kd",
				     .kernarg_segment_size = size, .kernarg_segment_align = 8,
				     .group_segment_fixed_size = 1024,
				     .arg_count = (uint32_t)(2 + n), .args = args };
	*k = (aql_kernel){ .name = "k", .metadata = md, .kernarg_size = size,
			   .kernarg_align = 16, .group_segment_size = 1024,
			   .explicit_arg_count = 2 };
}

static void check_table(const char *what, const struct field *t, size_t n, uint32_t size)
{
	aql_kernel_arg args[MAX_ARGS];
	aql_kernel_metadata md;
	aql_kernel k;
	aql_dispatch_packet p = packet_2d();
	uint8_t out[512], expect[512] = { 0 };
	int32_t nval = -12345;
	uint64_t ptr = 0xdeadbeef00ull;
	const aql_kernarg_value vals[2] = { { &nval, 4 }, { &ptr, 8 } };

	make_kernel(t, n, size, args, &md, &k);
	memcpy(expect, &nval, 4);
	memcpy(expect + 8, &ptr, 8);
	for (size_t i = 0; i < n; i++)
		memcpy(expect + EXPLICIT_END + t[i].offset, &t[i].value, t[i].size);
	memset(out, 0xaa, sizeof(out));
	CHECK_OK(aql_kernarg_build(&k, &p, vals, 2, &hidden_in, out, sizeof(out)));
	for (uint32_t i = 0; i < size; i++)
		CHECK(out[i] == expect[i], "%s: byte %u is %#x, expected %#x", what, i, out[i],
		      expect[i]);
	CHECK(out[size] == 0xaa, "%s: wrote past the segment", what);

	/* Without hidden values the runtime-supplied slots are zero. */
	CHECK_OK(aql_kernarg_build(&k, &p, vals, 2, NULL, out, sizeof(out)));
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 0;

		memcpy(&v, out + EXPLICIT_END + t[i].offset, t[i].size);
		if (t[i].kind == AQL_ARG_HIDDEN_PRINTF_BUFFER || t[i].kind == AQL_ARG_HIDDEN_QUEUE_PTR)
			CHECK(v == 0, "%s: %s is %#llx without hidden values", what,
			      aql_arg_kind_name(t[i].kind), (unsigned long long)v);
	}
}

static void test_errors(void)
{
	aql_kernel_arg args[MAX_ARGS];
	aql_kernel_metadata md;
	aql_kernel k;
	aql_dispatch_packet p = packet_2d();
	uint8_t out[512];
	int32_t nval = 1;
	uint64_t ptr = 0;
	aql_kernarg_value vals[2] = { { &nval, 4 }, { &ptr, 8 } };

	make_kernel(v5_table, sizeof(v5_table) / sizeof(*v5_table), 272, args, &md, &k);
	CHECK(aql_kernarg_build(&k, &p, vals, 1, NULL, out, sizeof(out)) == AQL_ERR_INVALID_ARG &&
	      th_error_has("takes 2 arguments, 1 given"), "count");
	vals[0].size = 8;
	CHECK(aql_kernarg_build(&k, &p, vals, 2, NULL, out, sizeof(out)) == AQL_ERR_INVALID_ARG &&
	      th_error_has("argument 0 (n int) is 4 bytes, 8 given"), "size");
	vals[0].size = 4;
	CHECK(aql_kernarg_build(&k, &p, vals, 2, NULL, out, 100) == AQL_ERR_INVALID_ARG &&
	      th_error_has("smaller than its 272-byte segment"), "small buffer");
	p.group_segment_size = 512;
	CHECK(aql_kernarg_build(&k, &p, vals, 2, NULL, out, sizeof(out)) == AQL_ERR_INVALID_ARG &&
	      th_error_has("static LDS"), "group segment below static LDS");
	p = packet_2d();
	p.workgroup_size_y = 0;
	CHECK(aql_kernarg_build(&k, &p, vals, 2, NULL, out, sizeof(out)) == AQL_ERR_INVALID_ARG &&
	      th_error_has("zero dimension"), "zero work-group size");
}

/* A real V5 kernel's hidden arguments sit where the table says. */
static void check_object(const char *path)
{
	size_t size;
	void *image = th_read_file(path, &size);
	aql_code_object *co;
	unsigned checked = 0;

	CHECK_OK(aql_code_object_open(image, size, &co));
	free(image);
	if (!co)
		return;
	const aql_code_object_info *info = aql_code_object_get_info(co);

	for (uint32_t i = 0; info->version >= 5 && i < info->kernel_count; i++) {
		const aql_kernel_metadata *md = info->kernels[i].metadata;
		uint32_t block = 0;

		for (uint32_t a = 0; a < md->arg_count; a++) {
			const aql_kernel_arg *arg = &md->args[a];

			if (arg->kind < AQL_ARG_HIDDEN_GLOBAL_OFFSET_X) {
				block = (arg->offset + arg->size + 7) & ~7u;
				continue;
			}
			for (size_t t = 0; t < sizeof(v5_table) / sizeof(*v5_table); t++) {
				if (v5_table[t].kind != arg->kind)
					continue;
				CHECK(arg->offset == block + v5_table[t].offset &&
				      arg->size == v5_table[t].size,
				      "%s: %s %s at %u+%u, table says %u+%u", path, md->name,
				      aql_arg_kind_name(arg->kind), arg->offset, arg->size,
				      block + v5_table[t].offset, v5_table[t].size);
				checked++;
			}
		}
	}
	printf("%s: %u hidden arguments checked against the table\n", path, checked);
	CHECK(info->version < 5 || checked > 0, "%s: a V5 object with no hidden arguments", path);
	aql_code_object_destroy(co);
}

int main(int argc, char **argv)
{
	check_table("V5", v5_table, sizeof(v5_table) / sizeof(*v5_table), EXPLICIT_END + 256);
	check_table("V4", v4_table, sizeof(v4_table) / sizeof(*v4_table), EXPLICIT_END + 56);
	test_errors();
	for (int i = 1; i < argc; i++)
		check_object(argv[i]);
	return th_finish();
}
