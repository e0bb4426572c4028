/* SPDX-License-Identifier: MIT */
/* The smallest kernel worth bundling: no device library needed. */
__kernel void add_one(__global int *p)
{
	p[__builtin_amdgcn_workitem_id_x()] += 1;
}
