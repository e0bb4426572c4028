/* SPDX-License-Identifier: MIT */
/* What the id kernels of test_wgfn record per work-item, WGFN_STRIDE words. */
#ifndef WGFN_IDS_H
#define WGFN_IDS_H

#define WGFN_STRIDE 20u
#define WGFN_LOCAL 0u		/* local id x, y, z */
#define WGFN_GROUP 3u		/* group id */
#define WGFN_SIZE 6u		/* local size */
#define WGFN_WG 9u		/* enqueued local size */
#define WGFN_GRID 12u		/* global size */
#define WGFN_NGROUPS 15u	/* num_groups x (y, z left out to fit) */
#define WGFN_LINEAR 16u		/* local linear id */
#define WGFN_GID 17u		/* global id x, y, z */

/* Record into rec[...] at the work-item's linear global id; ID(q, d) is
 * the query, as the file spells it. */
#define WGFN_RECORD(rec, ID)                                                   \
	do {                                                                   \
		uint32_t gx_ = ID(global_id, 0), gy_ = ID(global_id, 1);       \
		uint32_t gz_ = ID(global_id, 2);                               \
		aql_global uint32_t *r_ = (rec) + ((uint64_t)(gz_ * ID(global_size, 1) + gy_) * \
						   ID(global_size, 0) + gx_) * WGFN_STRIDE; \
		for (unsigned d_ = 0; d_ < 3; d_++) {                          \
			r_[WGFN_LOCAL + d_] = ID(local_id, d_);                \
			r_[WGFN_GROUP + d_] = ID(group_id, d_);                \
			r_[WGFN_SIZE + d_] = ID(local_size, d_);               \
			r_[WGFN_WG + d_] = ID(enqueued_local_size, d_);        \
			r_[WGFN_GRID + d_] = ID(global_size, d_);              \
			r_[WGFN_GID + d_] = ID(global_id, d_);                 \
		}                                                              \
		r_[WGFN_NGROUPS] = ID(num_groups, 0);                          \
		r_[WGFN_LINEAR] = aql_local_linear_id();                       \
	} while (0)

#endif
