/* SPDX-License-Identifier: MIT */
/*
 * Status codes and their text. hsa_status_string() gives ROCr's text for
 * a code, so programs that print it read as they do on ROCr; when the last
 * failing call of this thread returned that code, aql's reason (what was
 * wrong or what aql does not provide) follows it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <hsa/hsa_ext_finalize.h>
#include <hsa/hsa_ext_image.h>

#include "hsa_impl.h"

/* int: hsa_ext_amd.h and the extensions add codes in enums of their own. */
static const struct {
	int status;
	const char *text;
} texts[] = {
	{ HSA_STATUS_SUCCESS, "HSA_STATUS_SUCCESS: The function has been executed successfully." },
	{ HSA_STATUS_INFO_BREAK, "HSA_STATUS_INFO_BREAK: A traversal over a list of elements has been interrupted by the application before completing." },
	{ HSA_STATUS_ERROR, "HSA_STATUS_ERROR: A generic error has occurred." },
	{ HSA_STATUS_ERROR_INVALID_ARGUMENT, "HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments does not meet a precondition stated in the documentation of the corresponding formal argument." },
	{ HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: The requested queue creation is not valid." },
	{ HSA_STATUS_ERROR_INVALID_ALLOCATION, "HSA_STATUS_ERROR_INVALID_ALLOCATION: The requested allocation is not valid." },
	{ HSA_STATUS_ERROR_INVALID_AGENT, "HSA_STATUS_ERROR_INVALID_AGENT: The agent is invalid." },
	{ HSA_STATUS_ERROR_INVALID_REGION, "HSA_STATUS_ERROR_INVALID_REGION: The memory region is invalid." },
	{ HSA_STATUS_ERROR_INVALID_SIGNAL, "HSA_STATUS_ERROR_INVALID_SIGNAL: The signal is invalid." },
	{ HSA_STATUS_ERROR_INVALID_QUEUE, "HSA_STATUS_ERROR_INVALID_QUEUE: The queue is invalid." },
	{ HSA_STATUS_ERROR_OUT_OF_RESOURCES, "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources. This error may also occur when the core runtime library needs to spawn threads or create internal OS-specific events." },
	{ HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: The AQL packet is malformed." },
	{ HSA_STATUS_ERROR_RESOURCE_FREE, "HSA_STATUS_ERROR_RESOURCE_FREE: An error has been detected while releasing a resource." },
	{ HSA_STATUS_ERROR_NOT_INITIALIZED, "HSA_STATUS_ERROR_NOT_INITIALIZED: An API other than hsa_init has been invoked while the reference count of the HSA runtime is zero." },
	{ HSA_STATUS_ERROR_REFCOUNT_OVERFLOW, "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW: The maximum reference count for the object has been reached." },
	{ HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: The arguments passed to a functions are not compatible." },
	{ HSA_STATUS_ERROR_INVALID_INDEX, "HSA_STATUS_ERROR_INVALID_INDEX: The index is invalid." },
	{ HSA_STATUS_ERROR_INVALID_ISA, "HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid." },
	{ HSA_STATUS_ERROR_INVALID_ISA_NAME, "HSA_STATUS_ERROR_INVALID_ISA_NAME: The instruction set architecture name is invalid." },
	{ HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT: The code object is invalid." },
	{ HSA_STATUS_ERROR_INVALID_EXECUTABLE, "HSA_STATUS_ERROR_INVALID_EXECUTABLE: The executable is invalid." },
	{ HSA_STATUS_ERROR_FROZEN_EXECUTABLE, "HSA_STATUS_ERROR_FROZEN_EXECUTABLE: The executable is frozen." },
	{ HSA_STATUS_ERROR_INVALID_SYMBOL_NAME, "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: There is no symbol with the given name." },
	{ HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED, "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED: The variable is already defined." },
	{ HSA_STATUS_ERROR_VARIABLE_UNDEFINED, "HSA_STATUS_ERROR_VARIABLE_UNDEFINED: The variable is undefined." },
	{ HSA_STATUS_ERROR_EXCEPTION, "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception." },
	{ HSA_STATUS_ERROR_INVALID_CODE_SYMBOL, "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL: The code object symbol is invalid." },
	{ HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL, "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: The executable symbol is invalid." },
	{ HSA_STATUS_ERROR_INVALID_FILE, "HSA_STATUS_ERROR_INVALID_FILE: The file descriptor is invalid." },
	{ HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: The code object reader is invalid." },
	{ HSA_STATUS_ERROR_INVALID_CACHE, "HSA_STATUS_ERROR_INVALID_CACHE: The cache is invalid." },
	{ HSA_STATUS_ERROR_INVALID_WAVEFRONT, "HSA_STATUS_ERROR_INVALID_WAVEFRONT: The wavefront is invalid." },
	{ HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP, "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP: The signal group is invalid." },
	{ HSA_STATUS_ERROR_INVALID_RUNTIME_STATE, "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE: The HSA runtime is not in the configuration state." },
	{ HSA_STATUS_ERROR_FATAL, "HSA_STATUS_ERROR_FATAL: The queue received an error that may require process termination." },
	{ HSA_STATUS_ERROR_INVALID_MEMORY_POOL, "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: The memory pool is invalid." },
	{ HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION, "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address." },
	{ HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION, "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION: The agent attempted to execute an illegal shader instruction." },
	{ HSA_STATUS_ERROR_MEMORY_FAULT, "HSA_STATUS_ERROR_MEMORY_FAULT: Agent attempted to access an inaccessible address." },
	{ HSA_STATUS_CU_MASK_REDUCED, "HSA_STATUS_CU_MASK_REDUCED: The CU mask was successfully set but the mask attempted to enable a CU which was disabled for the process.  CUs disabled for the process remain disabled." },
	{ HSA_EXT_STATUS_ERROR_IMAGE_FORMAT_UNSUPPORTED, "HSA_EXT_STATUS_ERROR_IMAGE_FORMAT_UNSUPPORTED: Image format is not supported." },
	{ HSA_EXT_STATUS_ERROR_IMAGE_SIZE_UNSUPPORTED, "HSA_EXT_STATUS_ERROR_IMAGE_SIZE_UNSUPPORTED: Image size is not supported." },
	{ HSA_EXT_STATUS_ERROR_IMAGE_PITCH_UNSUPPORTED, "HSA_EXT_STATUS_ERROR_IMAGE_PITCH_UNSUPPORTED: Image pitch is not supported or invalid." },
	{ HSA_EXT_STATUS_ERROR_SAMPLER_DESCRIPTOR_UNSUPPORTED, "HSA_EXT_STATUS_ERROR_SAMPLER_DESCRIPTOR_UNSUPPORTED: Sampler descriptor is not supported or invalid." },
	{ HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "HSA_EXT_STATUS_ERROR_INVALID_PROGRAM: Invalid program" },
	{ HSA_EXT_STATUS_ERROR_INVALID_MODULE, "HSA_EXT_STATUS_ERROR_INVALID_MODULE: Invalid module" },
	{ HSA_EXT_STATUS_ERROR_INCOMPATIBLE_MODULE, "HSA_EXT_STATUS_ERROR_INCOMPATIBLE_MODULE: Incompatible module" },
	{ HSA_EXT_STATUS_ERROR_MODULE_ALREADY_INCLUDED, "HSA_EXT_STATUS_ERROR_MODULE_ALREADY_INCLUDED: Module already included" },
	{ HSA_EXT_STATUS_ERROR_SYMBOL_MISMATCH, "HSA_EXT_STATUS_ERROR_SYMBOL_MISMATCH: Symbol mismatch" },
	{ HSA_EXT_STATUS_ERROR_FINALIZATION_FAILED, "HSA_EXT_STATUS_ERROR_FINALIZATION_FAILED: Finalization failed" },
	{ HSA_EXT_STATUS_ERROR_DIRECTIVE_MISMATCH, "HSA_EXT_STATUS_ERROR_DIRECTIVE_MISMATCH: Directive mismatch" },
};

/* The last failure of this thread: its code and ROCr's text with the reason. */
static _Thread_local struct {
	hsa_status_t status;
	char text[512];
} last;

static const char *base_text(hsa_status_t status)
{
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (texts[i].status == (int)status)
			return texts[i].text;
	return NULL;
}

hsa_status_t hsa_rt_fail(hsa_status_t status, const char *fmt, ...)
{
	const char *base = base_text(status);
	va_list ap;
	int n;

	n = snprintf(last.text, sizeof(last.text), "%s aql: ", base ? base : "HSA status");
	if (n < 0 || (size_t)n >= sizeof(last.text))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(last.text + n, sizeof(last.text) - (size_t)n, fmt, ap);
	va_end(ap);
	last.status = status;
	return status;
}

hsa_status_t hsa_rt_from_aql(aql_status st, hsa_status_t generic)
{
	hsa_status_t status;

	switch (st) {
	case AQL_ERR_NOMEM:
		status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
		break;
	case AQL_ERR_INVALID_CODE_OBJECT:
		status = HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
		break;
	case AQL_ERR_QUEUE_ERROR:
		status = HSA_STATUS_ERROR_INVALID_PACKET_FORMAT;
		break;
	case AQL_ERR_SYSTEM:
	case AQL_ERR_DEVICE:
	case AQL_ERR_BUSY:
	case AQL_ERR_TIMEOUT:
	case AQL_ERR_QUEUE_FULL:
		status = HSA_STATUS_ERROR;
		break;
	default:
		status = generic;
		break;
	}
	return hsa_rt_fail(status, "%s (%s)", aql_error_message(), aql_status_str(st));
}

hsa_status_t hsa_rt_unprovided(hsa_status_t status, const char *what)
{
	return hsa_rt_fail(status, "%s is not provided by aql's HSA layer", what);
}

hsa_status_t hsa_status_string(hsa_status_t status, const char **status_string)
{
	const char *base = base_text(status);

	/* As the specification and ROCr's IS_OPEN(): not before hsa_init(). */
	HSA_RT_CHECK_INIT();
	if (!status_string)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT, "status_string is NULL");
	if (!base)
		return hsa_rt_fail(HSA_STATUS_ERROR_INVALID_ARGUMENT,
				   "0x%x is not an HSA status code", (unsigned)status);
	*status_string = last.status == status && last.text[0] ? last.text : base;
	return HSA_STATUS_SUCCESS;
}
