/* SPDX-License-Identifier: MIT */
/* Kernels for test_inflight: one that stays running until the host lets it go. */
#include <aql/kernel.h>

/* Set *started, then spin until *gate is non-zero, then set *finished. */
AQL_KERNEL_NO_BARRIER(hold, (aql_global uint32_t *, gate), (aql_global uint32_t *, started),
		      (aql_global uint32_t *, finished))
{
	aql_atomic_store_u32(started, 1, AQL_SEQ_CST);
	while (!aql_atomic_load_u32(gate, AQL_SEQ_CST))
		;
	aql_atomic_store_u32(finished, 1, AQL_SEQ_CST);
}

/* Does nothing: a second kernel, in a second code object. */
AQL_KERNEL_NO_BARRIER(idle, (uint32_t, unused))
{
	(void)unused;
}
