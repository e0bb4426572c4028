/* SPDX-License-Identifier: MIT */
/*
 * Every atomic of aql/kernel.h, on global memory and on LDS, relaxed and
 * seq_cst, with results the host can predict whatever the interleaving:
 *
 *   g[0]  min_u32 of vals        g[1]  max_u32 of vals
 *   g[2]  min_i32 of vals        g[3]  max_i32 of vals
 *   g[4]  counter incremented by a CAS loop
 *   g[5]  last value exchanged in (see xsum)
 *   g[6]  sum over groups of the LDS CAS-loop counter
 *   g[7]  work-items that saw the LDS min/max disagree with the group's
 *   wide[0] sum of vals by add_u64, wide[1] sum of the values xchg
 *   returned, wide[2] counter incremented by a 64-bit CAS loop,
 *   wide[3] sum of sub_u32 results (each item subtracts 1 from g[8])
 */
#include <aql/kernel.h>

struct atomics_lds {
	uint32_t umin, umax, cas_count;
	int32_t smin, smax;
};

AQL_KERNEL_LDS(atomics, struct atomics_lds, (aql_global const uint32_t *, vals),
	       (uint32_t, n), (aql_global uint32_t *, g), (aql_global uint64_t *, wide))
{
	uint32_t i = aql_global_id(0), l = aql_local_id(0), v = i < n ? vals[i] : 0;
	uint32_t old;
	uint64_t old64;

	if (l == 0) {
		lds->umin = UINT32_MAX;
		lds->umax = 0;
		lds->smin = INT32_MAX;
		lds->smax = INT32_MIN;
		lds->cas_count = 0;
	}
	aql_barrier();
	if (i < n) {
		aql_atomic_min_u32(&g[0], v, AQL_RELAXED);
		aql_atomic_max_u32(&g[1], v, AQL_SEQ_CST);
		aql_atomic_min_i32((int32_t *)&g[2], (int32_t)v, AQL_SEQ_CST);
		aql_atomic_max_i32((int32_t *)&g[3], (int32_t)v, AQL_RELAXED);
		old = aql_atomic_load_u32(&g[4], AQL_RELAXED);
		for (;;) {
			uint32_t seen = aql_atomic_cas_u32(&g[4], old, old + 1, AQL_SEQ_CST);

			if (seen == old)
				break;
			old = seen;
		}
		aql_atomic_add_u64(&wide[1], aql_atomic_xchg_u32(&g[5], v, AQL_SEQ_CST),
				   AQL_RELAXED);
		aql_atomic_add_u64(&wide[0], v, AQL_SEQ_CST);
		old64 = wide[2];
		for (;;) {
			uint64_t seen = aql_atomic_cas_u64(&wide[2], old64, old64 + 1, AQL_RELAXED);

			if (seen == old64)
				break;
			old64 = seen;
		}
		aql_atomic_add_u64(&wide[3], aql_atomic_sub_u32(&g[8], 1, AQL_RELAXED),
				   AQL_RELAXED);

		aql_atomic_min_u32(&lds->umin, v, AQL_RELAXED);
		aql_atomic_max_u32(&lds->umax, v, AQL_SEQ_CST);
		aql_atomic_min_i32(&lds->smin, (int32_t)v, AQL_RELAXED);
		aql_atomic_max_i32(&lds->smax, (int32_t)v, AQL_SEQ_CST);
		old = 0;
		for (;;) {
			uint32_t seen = aql_atomic_cas_u32(&lds->cas_count, old, old + 1,
							   AQL_RELAXED);

			if (seen == old)
				break;
			old = seen;
		}
	}
	aql_barrier();
	if (i < n && (lds->umin > v || lds->umax < v || lds->smin > (int32_t)v ||
		      lds->smax < (int32_t)v))
		aql_atomic_add_u32(&g[7], 1, AQL_RELAXED);
	if (l == 0)
		aql_atomic_add_u32(&g[6], aql_atomic_load_u32(&lds->cas_count, AQL_SEQ_CST),
				   AQL_RELAXED);
}
