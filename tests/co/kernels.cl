/* SPDX-License-Identifier: MIT */
/*
 * Kernels whose metadata covers what the parser must read: by-value
 * arguments of every size and alignment (a struct too), global pointers with
 * and without const/restrict/volatile, constant and __local pointers,
 * static LDS, images, samplers, pipes, a device queue, printf, hidden arguments read
 * through the implicit argument pointer, a device global and workgroup
 * size attributes. Built with -nogpulib: no OpenCL builtins, so the work
 * item index comes from the dispatch packet.
 */

#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable

struct pair {
	char tag;
	double value;
	short small[3];
};

__global int counter = 7;

static size_t global_id_x(void)
{
	__constant ushort *packet = (__constant ushort *)__builtin_amdgcn_dispatch_ptr();

	/* hsa_kernel_dispatch_packet_t.workgroup_size_x is at byte 4. */
	return (size_t)__builtin_amdgcn_workgroup_id_x() * packet[2] +
	       __builtin_amdgcn_workitem_id_x();
}

__kernel void vec_add(__global float *restrict out, __global const float *a,
		      __global const float *b, uint n)
{
	size_t i = global_id_x();

	if (i < n)
		out[i] = a[i] + b[i];
}

__kernel void by_value(__global long *out, char c, uchar uc, short s, int i, long l,
		       float f, double d, float4 v4, struct pair p, uchar3 u3, half2 h2)
{
	out[0] = c + uc + s + i + l + (long)f + (long)d + (long)v4.w + p.tag +
		 (long)p.value + p.small[2] + u3.z + (long)(float)h2.y;
}

__kernel void local_args(__global float *out, __local float *a, __local int4 *b, uint n)
{
	__local float tile[64];
	size_t lid = __builtin_amdgcn_workitem_id_x();

	tile[lid & 63] = a[lid] + (float)b[lid].y;
	__builtin_amdgcn_s_barrier();
	out[global_id_x()] = tile[(lid + 1) & 63] * n;
}

__kernel void qualifiers(volatile __global int *v, __global const int *restrict c,
			 __constant int *k, const __global int *const cc)
{
	*v = c[0] + k[1] + cc[2];
}

__kernel void with_printf(__global int *out, int x)
{
	printf("x = %d, id = %u\n", x, (uint)global_id_x());
	out[0] = x;
}

__kernel void offsets(__global ulong *out)
{
	__constant ulong *implicit = (__constant ulong *)__builtin_amdgcn_implicitarg_ptr();

	out[0] = implicit[0] + implicit[1] + implicit[2];
}

__kernel void uses_global(__global int *out)
{
	out[global_id_x()] = counter++;
}

__kernel __attribute__((reqd_work_group_size(64, 2, 1)))
__attribute__((vec_type_hint(float4)))
void fixed_size(__global float4 *out)
{
	out[global_id_x()] = (float4)(1.0f);
}

__kernel __attribute__((work_group_size_hint(128, 1, 1)))
void size_hint(__global int *out)
{
	out[0] = 1;
}

__kernel void images(__read_only image2d_t in, __write_only image2d_t out,
		     sampler_t smp, __global int *flag)
{
	flag[0] = 1;
}

__kernel void pipes(__read_only pipe int in, __write_only pipe float out, __global int *flag)
{
	flag[0] = 2;
}

__kernel void device_queue(queue_t q, __global int *flag)
{
	flag[0] = 3;
}

__kernel void no_args(void)
{
}
