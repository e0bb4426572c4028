/* SPDX-License-Identifier: MIT */
/*
 * The exported functions aql does not provide. Each checks init, as every
 * entry point does, and returns the code the HSA specification (or ROCr's
 * header, for AMD's functions) gives for the case, with the reason for
 * hsa_status_string(): an agent without images is INVALID_AGENT, an
 * HSA 1.0 code object or program handle can never be valid, and the
 * rest, which the specification gives no code for, HSA_STATUS_ERROR.
 * None of them does part of the work and reports success.
 */
#include <hsa/hsa_ext_finalize.h>
#include <hsa/hsa_ext_image.h>

#include "hsa_impl.h"

/* The arguments go unread: each function fails the same way for any. */
#pragma GCC diagnostic ignored "-Wunused-parameter"

/* An unprovided entry point's body: init checked, then status with the
 * function's name and why (hsa_status_string() gives both). */
#define UNPROVIDED(status, fn, why)                                            \
	do {                                                                   \
		HSA_RT_CHECK_INIT();                                           \
		return hsa_rt_unprovided((hsa_status_t)(status), fn ": " why);  \
	} while (0)

/* The features, each named once. */
#define WHY_IMAGES "images and samplers (no aql agent has an image unit)"
#define WHY_CODE_OBJECTS "HSA 1.0 code objects (load through a code object reader)"
#define WHY_IPC "sharing memory and signals between processes"
#define WHY_FINALIZER "the HSAIL finalizer (programs)"
#define WHY_ASYNC_COPIES "asynchronous copies"
#define WHY_LOCKING "locking host memory for an agent"
#define WHY_EXTERNAL_VARIABLES "defining external variables of an executable"
#define WHY_SVM "SVM attributes and prefetch"
#define WHY_COHERENCY "changing an agent's coherency"
#define WHY_DEALLOC_CALLBACKS "deallocation callbacks"
#define WHY_INTEROP "graphics interop"
#define WHY_POINTER_INFO "pointer information"
#define WHY_CU_MASKS "CU masks"
#define WHY_ISA_POLICIES "floating point round methods and exception policies of ISAs"
#define WHY_CACHES "caches (libaql does not describe them)"

hsa_status_t hsa_agent_iterate_caches(hsa_agent_t agent, hsa_status_t (*callback)(hsa_cache_t cache,
				      void *data), void *data)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_agent_iterate_caches", WHY_CACHES);
}

hsa_status_t hsa_amd_coherency_get_type(hsa_agent_t agent, hsa_amd_coherency_type_t *type)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_coherency_get_type", WHY_COHERENCY);
}

hsa_status_t hsa_amd_coherency_set_type(hsa_agent_t agent, hsa_amd_coherency_type_t type)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_coherency_set_type", WHY_COHERENCY);
}

hsa_status_t hsa_amd_deregister_deallocation_callback(void *ptr,
						      hsa_amd_deallocation_callback_t callback)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_deregister_deallocation_callback",
		   WHY_DEALLOC_CALLBACKS);
}

hsa_status_t hsa_amd_image_create(hsa_agent_t agent,
				  const hsa_ext_image_descriptor_t *image_descriptor,
				  const hsa_amd_image_descriptor_t *image_layout,
				  const void *image_data, hsa_access_permission_t access_permission,
				  hsa_ext_image_t *image)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_amd_image_create", WHY_IMAGES);
}

hsa_status_t hsa_amd_image_get_info_max_dim(hsa_agent_t agent, hsa_agent_info_t attribute,
					    void *value)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_amd_image_get_info_max_dim", WHY_IMAGES);
}

hsa_status_t hsa_amd_interop_map_buffer(uint32_t num_agents, hsa_agent_t *agents,
					int interop_handle, uint32_t flags, size_t *size,
					void * *ptr, size_t *metadata_size, const void * *metadata)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_interop_map_buffer", WHY_INTEROP);
}

hsa_status_t hsa_amd_interop_unmap_buffer(void *ptr)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_interop_unmap_buffer", WHY_INTEROP);
}

hsa_status_t hsa_amd_ipc_memory_attach(const hsa_amd_ipc_memory_t *handle, size_t len,
				       uint32_t num_agents, const hsa_agent_t *mapping_agents,
				       void * *mapped_ptr)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_ipc_memory_attach", WHY_IPC);
}

hsa_status_t hsa_amd_ipc_memory_create(void *ptr, size_t len, hsa_amd_ipc_memory_t *handle)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_ipc_memory_create", WHY_IPC);
}

hsa_status_t hsa_amd_ipc_memory_detach(void *mapped_ptr)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_ipc_memory_detach", WHY_IPC);
}

hsa_status_t hsa_amd_ipc_signal_attach(const hsa_amd_ipc_signal_t *handle, hsa_signal_t *signal)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_ipc_signal_attach", WHY_IPC);
}

hsa_status_t hsa_amd_ipc_signal_create(hsa_signal_t signal, hsa_amd_ipc_signal_t *handle)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_ipc_signal_create", WHY_IPC);
}

hsa_status_t hsa_amd_memory_async_copy(void *dst, hsa_agent_t dst_agent, const void *src,
				       hsa_agent_t src_agent, size_t size, uint32_t num_dep_signals,
				       const hsa_signal_t *dep_signals,
				       hsa_signal_t completion_signal)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_memory_async_copy", WHY_ASYNC_COPIES);
}

hsa_status_t hsa_amd_memory_async_copy_rect(const hsa_pitched_ptr_t *dst,
					    const hsa_dim3_t *dst_offset,
					    const hsa_pitched_ptr_t *src,
					    const hsa_dim3_t *src_offset, const hsa_dim3_t *range,
					    hsa_agent_t copy_agent, hsa_amd_copy_direction_t dir,
					    uint32_t num_dep_signals,
					    const hsa_signal_t *dep_signals,
					    hsa_signal_t completion_signal)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_memory_async_copy_rect", WHY_ASYNC_COPIES);
}

hsa_status_t hsa_amd_memory_lock(void *host_ptr, size_t size, hsa_agent_t *agents, int num_agent,
				 void * *agent_ptr)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_memory_lock", WHY_LOCKING);
}

hsa_status_t hsa_amd_memory_lock_to_pool(void *host_ptr, size_t size, hsa_agent_t *agents,
					 int num_agent, hsa_amd_memory_pool_t pool, uint32_t flags,
					 void * *agent_ptr)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_memory_lock_to_pool", WHY_LOCKING);
}

hsa_status_t hsa_amd_memory_migrate(const void *ptr, hsa_amd_memory_pool_t memory_pool,
				    uint32_t flags)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_memory_migrate", "migrating memory between pools");
}

hsa_status_t hsa_amd_memory_unlock(void *host_ptr)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_memory_unlock", WHY_LOCKING);
}

hsa_status_t hsa_amd_pointer_info(const void *ptr, hsa_amd_pointer_info_t *info,
				  void *(*alloc)(size_t), uint32_t *num_agents_accessible,
				  hsa_agent_t * *accessible)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_pointer_info", WHY_POINTER_INFO);
}

hsa_status_t hsa_amd_pointer_info_set_userdata(const void *ptr, void *userdata)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_pointer_info_set_userdata", WHY_POINTER_INFO);
}

hsa_status_t hsa_amd_profiling_async_copy_enable(bool enable)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_profiling_async_copy_enable", WHY_ASYNC_COPIES);
}

hsa_status_t hsa_amd_profiling_get_async_copy_time(hsa_signal_t signal,
						   hsa_amd_profiling_async_copy_time_t *time)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_profiling_get_async_copy_time", WHY_ASYNC_COPIES);
}

hsa_status_t hsa_amd_queue_cu_get_mask(const hsa_queue_t *queue, uint32_t num_cu_mask_count,
				       uint32_t *cu_mask)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_queue_cu_get_mask", WHY_CU_MASKS);
}

hsa_status_t hsa_amd_queue_cu_set_mask(const hsa_queue_t *queue, uint32_t num_cu_mask_count,
				       const uint32_t *cu_mask)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_queue_cu_set_mask", WHY_CU_MASKS);
}

hsa_status_t hsa_amd_register_deallocation_callback(void *ptr,
						    hsa_amd_deallocation_callback_t callback,
						    void *user_data)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_register_deallocation_callback",
		   WHY_DEALLOC_CALLBACKS);
}

hsa_status_t hsa_amd_register_system_event_handler(hsa_amd_system_event_callback_t callback,
						   void *data)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_register_system_event_handler",
		   "system event handlers");
}

hsa_status_t hsa_cache_get_info(hsa_cache_t cache, hsa_cache_info_t attribute, void *value)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CACHE, "hsa_cache_get_info", WHY_CACHES);
}

hsa_status_t hsa_code_object_deserialize(void *serialized_code_object,
					 size_t serialized_code_object_size, const char *options,
					 hsa_code_object_t *code_object)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_code_object_deserialize", WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_object_destroy(hsa_code_object_t code_object)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_code_object_destroy",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_object_get_info(hsa_code_object_t code_object,
				      hsa_code_object_info_t attribute, void *value)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_code_object_get_info",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_object_get_symbol(hsa_code_object_t code_object, const char *symbol_name,
					hsa_code_symbol_t *symbol)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_code_object_get_symbol",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_object_get_symbol_from_name(hsa_code_object_t code_object,
						  const char *module_name, const char *symbol_name,
						  hsa_code_symbol_t *symbol)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_code_object_get_symbol_from_name",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_object_iterate_symbols(hsa_code_object_t code_object,
					     hsa_status_t (*callback)(hsa_code_object_t code_object,
					     hsa_code_symbol_t symbol, void *data), void *data)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_code_object_iterate_symbols",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_object_serialize(hsa_code_object_t code_object,
				       hsa_status_t (*alloc_callback)(size_t size,
				       hsa_callback_data_t data, void * *address),
				       hsa_callback_data_t callback_data, const char *options,
				       void * *serialized_code_object,
				       size_t *serialized_code_object_size)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_code_object_serialize",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_code_symbol_get_info(hsa_code_symbol_t code_symbol,
				      hsa_code_symbol_info_t attribute, void *value)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_SYMBOL, "hsa_code_symbol_get_info",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_executable_agent_global_variable_define(hsa_executable_t executable,
							 hsa_agent_t agent,
							 const char *variable_name, void *address)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_executable_agent_global_variable_define",
		   WHY_EXTERNAL_VARIABLES);
}

hsa_status_t hsa_executable_global_variable_define(hsa_executable_t executable,
						   const char *variable_name, void *address)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_executable_global_variable_define",
		   WHY_EXTERNAL_VARIABLES);
}

hsa_status_t hsa_executable_load_code_object(hsa_executable_t executable, hsa_agent_t agent,
					     hsa_code_object_t code_object, const char *options)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "hsa_executable_load_code_object",
		   WHY_CODE_OBJECTS);
}

hsa_status_t hsa_executable_load_program_code_object(hsa_executable_t executable,
						     hsa_code_object_reader_t code_object_reader,
						     const char *options,
						     hsa_loaded_code_object_t *loaded_code_object)
{
	UNPROVIDED(HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS,
		   "hsa_executable_load_program_code_object",
		   "program code objects (aql loads code objects for an agent)");
}

hsa_status_t hsa_executable_readonly_variable_define(hsa_executable_t executable, hsa_agent_t agent,
						     const char *variable_name, void *address)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_executable_readonly_variable_define",
		   WHY_EXTERNAL_VARIABLES);
}

hsa_status_t hsa_ext_image_clear(hsa_agent_t agent, hsa_ext_image_t image, const void *data,
				 const hsa_ext_image_region_t *image_region)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_clear", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_copy(hsa_agent_t agent, hsa_ext_image_t src_image,
				const hsa_dim3_t *src_offset, hsa_ext_image_t dst_image,
				const hsa_dim3_t *dst_offset, const hsa_dim3_t *range)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_copy", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_create(hsa_agent_t agent,
				  const hsa_ext_image_descriptor_t *image_descriptor,
				  const void *image_data, hsa_access_permission_t access_permission,
				  hsa_ext_image_t *image)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_create", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_create_with_layout(hsa_agent_t agent,
					      const hsa_ext_image_descriptor_t *image_descriptor,
					      const void *image_data,
					      hsa_access_permission_t access_permission,
					      hsa_ext_image_data_layout_t image_data_layout,
					      size_t image_data_row_pitch,
					      size_t image_data_slice_pitch, hsa_ext_image_t *image)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_create_with_layout", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_data_get_info(hsa_agent_t agent,
					 const hsa_ext_image_descriptor_t *image_descriptor,
					 hsa_access_permission_t access_permission,
					 hsa_ext_image_data_info_t *image_data_info)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_data_get_info", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_data_get_info_with_layout(hsa_agent_t agent,
						     const hsa_ext_image_descriptor_t *image_descriptor,
						     hsa_access_permission_t access_permission,
						     hsa_ext_image_data_layout_t image_data_layout,
						     size_t image_data_row_pitch,
						     size_t image_data_slice_pitch,
						     hsa_ext_image_data_info_t *image_data_info)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_data_get_info_with_layout",
		   WHY_IMAGES);
}

hsa_status_t hsa_ext_image_destroy(hsa_agent_t agent, hsa_ext_image_t image)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_destroy", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_export(hsa_agent_t agent, hsa_ext_image_t src_image, void *dst_memory,
				  size_t dst_row_pitch, size_t dst_slice_pitch,
				  const hsa_ext_image_region_t *image_region)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_export", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_get_capability(hsa_agent_t agent, hsa_ext_image_geometry_t geometry,
					  const hsa_ext_image_format_t *image_format,
					  uint32_t *capability_mask)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_get_capability", WHY_IMAGES);
}

hsa_status_t hsa_ext_image_get_capability_with_layout(hsa_agent_t agent,
						      hsa_ext_image_geometry_t geometry,
						      const hsa_ext_image_format_t *image_format,
						      hsa_ext_image_data_layout_t image_data_layout,
						      uint32_t *capability_mask)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_get_capability_with_layout",
		   WHY_IMAGES);
}

hsa_status_t hsa_ext_image_import(hsa_agent_t agent, const void *src_memory, size_t src_row_pitch,
				  size_t src_slice_pitch, hsa_ext_image_t dst_image,
				  const hsa_ext_image_region_t *image_region)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_image_import", WHY_IMAGES);
}

hsa_status_t hsa_ext_program_add_module(hsa_ext_program_t program, hsa_ext_module_t module)
{
	UNPROVIDED(HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "hsa_ext_program_add_module",
		   WHY_FINALIZER);
}

hsa_status_t hsa_ext_program_create(hsa_machine_model_t machine_model, hsa_profile_t profile,
				    hsa_default_float_rounding_mode_t default_float_rounding_mode,
				    const char *options, hsa_ext_program_t *program)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_ext_program_create", WHY_FINALIZER);
}

hsa_status_t hsa_ext_program_destroy(hsa_ext_program_t program)
{
	UNPROVIDED(HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "hsa_ext_program_destroy", WHY_FINALIZER);
}

hsa_status_t hsa_ext_program_finalize(hsa_ext_program_t program, hsa_isa_t isa,
				      int32_t call_convention,
				      hsa_ext_control_directives_t control_directives,
				      const char *options, hsa_code_object_type_t code_object_type,
				      hsa_code_object_t *code_object)
{
	UNPROVIDED(HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "hsa_ext_program_finalize", WHY_FINALIZER);
}

hsa_status_t hsa_ext_program_get_info(hsa_ext_program_t program, hsa_ext_program_info_t attribute,
				      void *value)
{
	UNPROVIDED(HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "hsa_ext_program_get_info", WHY_FINALIZER);
}

hsa_status_t hsa_ext_program_iterate_modules(hsa_ext_program_t program,
					     hsa_status_t (*callback)(hsa_ext_program_t program,
					     hsa_ext_module_t module, void *data), void *data)
{
	UNPROVIDED(HSA_EXT_STATUS_ERROR_INVALID_PROGRAM, "hsa_ext_program_iterate_modules",
		   WHY_FINALIZER);
}

hsa_status_t hsa_ext_sampler_create(hsa_agent_t agent,
				    const hsa_ext_sampler_descriptor_t *sampler_descriptor,
				    hsa_ext_sampler_t *sampler)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_sampler_create", WHY_IMAGES);
}

hsa_status_t hsa_ext_sampler_destroy(hsa_agent_t agent, hsa_ext_sampler_t sampler)
{
	UNPROVIDED(HSA_STATUS_ERROR_INVALID_AGENT, "hsa_ext_sampler_destroy", WHY_IMAGES);
}

hsa_status_t hsa_isa_get_exception_policies(hsa_isa_t isa, hsa_profile_t profile, uint16_t *mask)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_isa_get_exception_policies", WHY_ISA_POLICIES);
}

hsa_status_t hsa_isa_get_round_method(hsa_isa_t isa, hsa_fp_type_t fp_type,
				      hsa_flush_mode_t flush_mode, hsa_round_method_t *round_method)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_isa_get_round_method", WHY_ISA_POLICIES);
}

hsa_status_t hsa_amd_svm_attributes_set(void *ptr, size_t size,
					hsa_amd_svm_attribute_pair_t *attribute_list,
					size_t attribute_count)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_svm_attributes_set", WHY_SVM);
}

hsa_status_t hsa_amd_svm_attributes_get(void *ptr, size_t size,
					hsa_amd_svm_attribute_pair_t *attribute_list,
					size_t attribute_count)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_svm_attributes_get", WHY_SVM);
}

hsa_status_t hsa_amd_svm_prefetch_async(void *ptr, size_t size, hsa_agent_t agent,
					uint32_t num_dep_signals, const hsa_signal_t *dep_signals,
					hsa_signal_t completion_signal)
{
	UNPROVIDED(HSA_STATUS_ERROR, "hsa_amd_svm_prefetch_async", WHY_SVM);
}
