/* SPDX-License-Identifier: MIT */
/* What progress_kernel.c sends and progress.c receives. */
#ifndef EXAMPLES_PROGRESS_H
#define EXAMPLES_PROGRESS_H

/* The printf format's id: formats[PROGRESS_FORMAT] on the host. */
#define PROGRESS_FORMAT 0

struct progress {
	uint32_t group;
	uint32_t first;		/* the group's first result */
};

#endif
