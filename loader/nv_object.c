/* SPDX-License-Identifier: MIT */
/* Placeholder until PTX code objects land (issue 12, in progress). */
#include "loader/loader_impl.h"
#include "util/error.h"

int aql_nv_object_detect(const uint8_t *image, size_t size)
{
	(void)image;
	(void)size;
	return 0;
}

aql_status aql_nv_object_describe(struct aql_code_object *co)
{
	(void)co;
	return aql_fail(AQL_ERR_UNSUPPORTED, "PTX code objects are not read yet");
}
