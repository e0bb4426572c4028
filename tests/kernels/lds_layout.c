/* SPDX-License-Identifier: MIT */
/*
 * Three dynamic LDS arrays of different element types, placed by the
 * host's layout builder (aql/lds.h) and reached with AQL_LDS_ARRAY(), next
 * to 20 bytes of static LDS. Each work-item stores its input's high half,
 * the whole value and its low byte in the three arrays; after a barrier it
 * reads them back from other work-items of the group:
 *
 *   out[i] = vals[(l + 1) % size] | keys[size - 1 - l] << 32
 *            | tags[(l + 2) % size] << 48
 *
 * so arrays that overlap each other or the static LDS, or sit at offsets
 * the host did not give, show in the output. Work-item 0 of each group
 * counts in status[0] arrays that are misaligned or outside the dynamic
 * LDS, and static marks that did not survive; global work-item 0 reports
 * status[1] the dynamic LDS size and status[2] the distance from the
 * static LDS to aql_dynamic_lds().
 */
#include <aql/kernel.h>

#define LDS_LAYOUT_MARKS 5

struct lds_layout_static {
	uint32_t mark[LDS_LAYOUT_MARKS];
};

AQL_KERNEL_LDS(lds_layout, struct lds_layout_static, (aql_global const uint32_t *, in),
	       (aql_global uint64_t *, out), (uint32_t, n), (aql_global uint32_t *, status),
	       (uint32_t, keys_off), (uint32_t, vals_off), (uint32_t, tags_off))
{
	AQL_LDS_ARRAY(uint16_t, keys, keys_off);
	AQL_LDS_ARRAY(double, vals, vals_off);
	AQL_LDS_ARRAY(uint8_t, tags, tags_off);
	uint32_t l = aql_local_id(0), size = aql_local_size(0), wg = aql_enqueued_local_size(0);
	uint32_t i = aql_global_id(0), g = aql_group_id(0);
	uint32_t v = i < n ? in[i] : 0;

	if (l == 0) {
		if (!AQL_LDS_ARRAY_FITS(uint16_t, keys_off, wg) ||
		    !AQL_LDS_ARRAY_FITS(double, vals_off, wg) ||
		    !AQL_LDS_ARRAY_FITS(uint8_t, tags_off, wg))
			aql_atomic_add_u32(&status[0], 1, AQL_RELAXED);
		for (uint32_t k = 0; k < LDS_LAYOUT_MARKS; k++)
			lds->mark[k] = 0x5a000000u | (g * LDS_LAYOUT_MARKS + k);
	}
	if (i == 0) {
		status[1] = aql_dynamic_lds_size();
		status[2] = (uint32_t)((uintptr_t)aql_dynamic_lds() - (uintptr_t)lds);
	}
	keys[l] = (uint16_t)(v >> 16);
	vals[l] = (double)v;
	tags[l] = (uint8_t)v;
	aql_barrier();
	if (i < n)
		out[i] = (uint64_t)vals[(l + 1) % size] | (uint64_t)keys[size - 1 - l] << 32 |
			 (uint64_t)tags[(l + 2) % size] << 48;
	if (l == 0)
		for (uint32_t k = 0; k < LDS_LAYOUT_MARKS; k++)
			if (lds->mark[k] != (0x5a000000u | (g * LDS_LAYOUT_MARKS + k)))
				aql_atomic_add_u32(&status[0], 1, AQL_RELAXED);
}
