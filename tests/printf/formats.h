/* SPDX-License-Identifier: MIT */
/*
 * The format ids of tests/printf/kernels.c, shared by the kernels and
 * test_printf (which holds the strings); plain C that also compiles as
 * OpenCL C.
 */
#ifndef AQL_TEST_PRINTF_FORMATS_H
#define AQL_TEST_PRINTF_FORMATS_H

enum printf_test_format {
	PF_SEQ = 0,		/* "wi %u seq %u\n": work-item, sequence */
	PF_TYPES,		/* one of each value type */
	PF_TWELVE,		/* twelve values */
	PF_NONE,		/* no values */
	PF_PTR,			/* a global and a private pointer */
	PF_MISMATCH,		/* a double for %d: a diagnostic */
	PF_COUNT
};

#endif
