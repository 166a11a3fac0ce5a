/*
 * kjit — function-pointer types of every exported function, for programs that load
 * libkjit at run time (dlopen + dlsym/dlvsym) instead of linking to it:
 *
 *   PFN_kjit_compile compile = (PFN_kjit_compile)dlsym(lib, "kjit_compile");
 *
 * PFN_<name> is the type of &<name>. Generated from the prototypes by
 * tools/gen_typedefs.sh (do not edit by hand); a test checks that every exported function
 * has its type and that each type matches its prototype.
 */
#ifndef KJIT_TYPEDEFS_H
#define KJIT_TYPEDEFS_H

#include "kjit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- common.h */

typedef int (*PFN_kjit_version)(void);
typedef const char* (*PFN_kjit_version_string)(void);
typedef const char* (*PFN_kjit_status_string)(int status);
typedef const char* (*PFN_kjit_last_error)(void);
typedef kjit_status (*PFN_kjit_nvrtc_version)(const char** out);
typedef void (*PFN_kjit_set_log_callback)(kjit_log_fn fn, void* user);

/* ---- compile.h */

typedef kjit_status (*PFN_kjit_options_create)(kjit_options** out);
typedef kjit_status (*PFN_kjit_options_clone)(const kjit_options* src, kjit_options** out);
typedef void (*PFN_kjit_options_destroy)(kjit_options* opts);
typedef kjit_status (*PFN_kjit_options_set_target)(kjit_options* opts, const char* target);
typedef kjit_status (*PFN_kjit_options_set_device)(kjit_options* opts, int device);
typedef kjit_status (*PFN_kjit_options_set_outputs)(kjit_options* opts, unsigned outputs);
typedef kjit_status (*PFN_kjit_options_set_name)(kjit_options* opts, const char* name);
typedef kjit_status (*PFN_kjit_options_add)(kjit_options* opts, const char* option);
typedef kjit_status (*PFN_kjit_options_add_define)(kjit_options* opts, const char* name,
                                                   const char* value);
typedef kjit_status (*PFN_kjit_options_add_include_path)(kjit_options* opts, const char* path);
typedef kjit_status (*PFN_kjit_options_add_header)(kjit_options* opts, const char* name,
                                                   const char* contents);
typedef kjit_status (*PFN_kjit_options_add_name_expression)(kjit_options* opts,
                                                            const char* expr);
typedef kjit_status (*PFN_kjit_options_set_toolkit)(kjit_options* opts, const char* root);
typedef kjit_status (*PFN_kjit_options_set_pch)(kjit_options* opts, int enabled);
typedef const char* (*PFN_kjit_toolkit_include_path)(void);
typedef kjit_status (*PFN_kjit_compiler_create)(kjit_cache* cache, unsigned threads,
                                                kjit_compiler** out);
typedef void (*PFN_kjit_compiler_destroy)(kjit_compiler* compiler);
typedef kjit_status (*PFN_kjit_compile)(kjit_compiler* compiler, const char* source,
                                        const kjit_options* opts, kjit_binary** out);
typedef kjit_status (*PFN_kjit_source_create)(const char* text, size_t size, kjit_source** out);
typedef void (*PFN_kjit_source_destroy)(kjit_source* source);
typedef kjit_status (*PFN_kjit_compile_source)(kjit_compiler* compiler,
                                               const kjit_source* source,
                                               const kjit_options* opts, kjit_binary** out);
typedef kjit_status (*PFN_kjit_compile_async)(kjit_compiler* compiler, const char* source,
                                              const kjit_options* opts, kjit_future** out);
typedef kjit_status (*PFN_kjit_future_wait)(kjit_future* future, int64_t timeout_ms,
                                            kjit_binary** out);
typedef int (*PFN_kjit_future_ready)(const kjit_future* future);
typedef kjit_status (*PFN_kjit_future_cancel)(kjit_future* future);
typedef void (*PFN_kjit_future_destroy)(kjit_future* future);
typedef kjit_status (*PFN_kjit_compile_many)(kjit_compiler* compiler, size_t count,
                                             const char* const* sources,
                                             const kjit_options* const* opts,
                                             kjit_binary** outs, kjit_status* statuses);
typedef kjit_status (*PFN_kjit_compiler_set_compile_mode)(kjit_compiler* compiler, int mode);
typedef kjit_status (*PFN_kjit_compiler_get_compile_mode)(const kjit_compiler* compiler,
                                                          int* mode);
typedef kjit_status (*PFN_kjit_worker_info_init_sized)(kjit_worker_info* info, size_t size);
typedef kjit_status (*PFN_kjit_worker_info_get)(kjit_cache* cache, kjit_worker_info* info);
typedef void (*PFN_kjit_binary_destroy)(kjit_binary* binary);
typedef kjit_status (*PFN_kjit_binary_status)(const kjit_binary* binary);
typedef const void* (*PFN_kjit_binary_data)(const kjit_binary* binary, int kind, size_t* size);
typedef const char* (*PFN_kjit_binary_log)(const kjit_binary* binary);
typedef const char* (*PFN_kjit_binary_target)(const kjit_binary* binary);
typedef const char* (*PFN_kjit_binary_key)(const kjit_binary* binary);
typedef int (*PFN_kjit_binary_tier)(const kjit_binary* binary);
typedef int (*PFN_kjit_binary_stored)(const kjit_binary* binary, const char** reason);
typedef double (*PFN_kjit_binary_compile_ms)(const kjit_binary* binary);
typedef const char* (*PFN_kjit_binary_lowered_name)(const kjit_binary* binary,
                                                    const char* expr);
typedef size_t (*PFN_kjit_binary_name_count)(const kjit_binary* binary);
typedef const char* (*PFN_kjit_binary_name_expression)(const kjit_binary* binary, size_t index);
typedef const char* (*PFN_kjit_binary_lowered_name_at)(const kjit_binary* binary, size_t index);
typedef size_t (*PFN_kjit_binary_kernel_count)(const kjit_binary* binary);
typedef const char* (*PFN_kjit_binary_kernel_name)(const kjit_binary* binary, size_t index);
typedef kjit_status (*PFN_kjit_binary_param_count)(const kjit_binary* binary,
                                                   const char* kernel, size_t* count);
typedef kjit_status (*PFN_kjit_binary_param_info)(const kjit_binary* binary, const char* kernel,
                                                  size_t index, size_t* size, size_t* align);
typedef size_t (*PFN_kjit_binary_advisory_count)(const kjit_binary* binary);
typedef const char* (*PFN_kjit_binary_advisory)(const kjit_binary* binary, size_t index);
typedef const char* (*PFN_kjit_binary_metadata_json)(const kjit_binary* binary);
typedef kjit_status (*PFN_kjit_hash_source)(const char* data, size_t len, char out_hex[65]);
typedef kjit_status (*PFN_kjit_hash_options)(const char* const* options, size_t count,
                                             char out_hex[65]);
typedef kjit_status (*PFN_kjit_compute_key)(const char* source, const kjit_options* opts,
                                            char out_hex[65]);
typedef kjit_status (*PFN_kjit_compute_key_cached)(kjit_cache* cache, const char* source,
                                                   const kjit_options* opts, char out_hex[65],
                                                   int* known);

/* ---- cache.h */

typedef kjit_status (*PFN_kjit_cache_options_init_sized)(kjit_cache_options* opts, size_t size);
typedef void (*PFN_kjit_cache_options_init)(kjit_cache_options* opts);
typedef kjit_status (*PFN_kjit_cache_open)(const kjit_cache_options* opts, kjit_cache** out);
typedef void (*PFN_kjit_cache_close)(kjit_cache* cache);
typedef const char* (*PFN_kjit_cache_directory)(const kjit_cache* cache);
typedef kjit_status (*PFN_kjit_cache_stats_init_sized)(kjit_cache_stats* stats, size_t size);
typedef kjit_status (*PFN_kjit_cache_stats_get)(kjit_cache* cache, kjit_cache_stats* stats);
typedef kjit_status (*PFN_kjit_cache_remote_info)(kjit_cache* cache, int probe,
                                                  const char** out);
typedef kjit_status (*PFN_kjit_cache_clear_memory)(kjit_cache* cache);
typedef kjit_status (*PFN_kjit_cache_clear)(kjit_cache* cache);
typedef kjit_status (*PFN_kjit_cache_get)(kjit_cache* cache, const char* key_hex,
                                          kjit_binary** out);
typedef kjit_status (*PFN_kjit_cache_put)(kjit_cache* cache, const kjit_binary* binary);
typedef kjit_status (*PFN_kjit_cache_remove)(kjit_cache* cache, const char* key_hex);
typedef kjit_status (*PFN_kjit_cache_list)(kjit_cache* cache, kjit_cache_list_fn fn,
                                           void* user);
typedef kjit_status (*PFN_kjit_cache_verify)(kjit_cache* cache, uint64_t* checked,
                                             uint64_t* bad);
typedef kjit_status (*PFN_kjit_cache_prune)(kjit_cache* cache, uint64_t max_bytes,
                                            uint64_t* removed);
typedef kjit_status (*PFN_kjit_cache_export)(kjit_cache* cache, const char* path,
                                             uint64_t* count);
typedef kjit_status (*PFN_kjit_cache_import)(kjit_cache* cache, const char* path,
                                             uint64_t* imported, uint64_t* rejected);

/* ---- kernel.h */

typedef kjit_status (*PFN_kjit_device_count)(int* count);
typedef kjit_status (*PFN_kjit_device_arch)(int device, char* out, size_t size);
typedef kjit_status (*PFN_kjit_device_arch_cached)(kjit_cache* cache, int device, char* out,
                                                   size_t size, int* from_record);
typedef kjit_status (*PFN_kjit_device_name)(int device, char* out, size_t size);
typedef kjit_status (*PFN_kjit_driver_version)(int* version);
typedef kjit_status (*PFN_kjit_kernel_create)(kjit_compiler* compiler, const char* source,
                                              const char* name, const kjit_options* opts,
                                              int device, unsigned flags, kjit_kernel** out,
                                              kjit_binary** log_out);
typedef kjit_status (*PFN_kjit_kernel_from_binary)(const kjit_binary* binary, const char* name,
                                                   int device, unsigned flags,
                                                   kjit_kernel** out);
typedef void (*PFN_kjit_kernel_destroy)(kjit_kernel* kernel);
typedef int (*PFN_kjit_kernel_load_path)(const kjit_kernel* kernel);
typedef const char* (*PFN_kjit_kernel_symbol)(const kjit_kernel* kernel);
typedef kjit_status (*PFN_kjit_kernel_param_count)(const kjit_kernel* kernel, size_t* count);
typedef kjit_status (*PFN_kjit_kernel_param_info)(const kjit_kernel* kernel, size_t index,
                                                  size_t* offset, size_t* size);
typedef kjit_status (*PFN_kjit_kernel_param_buffer_size)(const kjit_kernel* kernel,
                                                         size_t* size);
typedef kjit_status (*PFN_kjit_kernel_attributes_init_sized)(kjit_kernel_attributes* attrs,
                                                             size_t size);
typedef kjit_status (*PFN_kjit_kernel_get_attributes)(const kjit_kernel* kernel,
                                                      kjit_kernel_attributes* attrs);
typedef kjit_status (*PFN_kjit_kernel_set_max_dynamic_shared)(kjit_kernel* kernel, int bytes);
typedef kjit_status (*PFN_kjit_kernel_occupancy)(const kjit_kernel* kernel, int block_size,
                                                 size_t dynamic_shared, int* blocks_per_sm);
typedef kjit_status (*PFN_kjit_kernel_suggest_block_size)(const kjit_kernel* kernel,
                                                          size_t dynamic_shared, int* min_grid,
                                                          int* block_size);
typedef kjit_status (*PFN_kjit_launch_config_init_sized)(kjit_launch_config* cfg, size_t size);
typedef void (*PFN_kjit_launch_config_init)(kjit_launch_config* cfg);
typedef kjit_status (*PFN_kjit_kernel_launch)(kjit_kernel* kernel,
                                              const kjit_launch_config* cfg, void** args,
                                              size_t count);
typedef kjit_status (*PFN_kjit_kernel_launch_sized)(kjit_kernel* kernel,
                                                    const kjit_launch_config* cfg, void** args,
                                                    const size_t* sizes, size_t count);
typedef kjit_status (*PFN_kjit_kernel_launch_packed)(kjit_kernel* kernel,
                                                     const kjit_launch_config* cfg,
                                                     const void* buffer, size_t size);
typedef kjit_status (*PFN_kjit_kernel_launch_params)(kjit_kernel* kernel,
                                                     const kjit_launch_config* cfg,
                                                     const void* params, size_t size,
                                                     size_t align);

/* ---- gemm.h */

typedef kjit_status (*PFN_kjit_gemm_desc_init_sized)(kjit_gemm_desc* desc, size_t size);
typedef void (*PFN_kjit_gemm_desc_init)(kjit_gemm_desc* desc);
typedef kjit_status (*PFN_kjit_gemm_options_init_sized)(kjit_gemm_options* opts, size_t size);
typedef void (*PFN_kjit_gemm_options_init)(kjit_gemm_options* opts);
typedef kjit_status (*PFN_kjit_gemm_create)(kjit_cache* cache, int device,
                                            const kjit_gemm_options* options, kjit_gemm** out);
typedef void (*PFN_kjit_gemm_destroy)(kjit_gemm* gemm);
typedef kjit_status (*PFN_kjit_gemm_check)(const kjit_gemm_desc* desc, const void* A,
                                           const void* B, const void* C, const void* D,
                                           const void* bias);
typedef kjit_status (*PFN_kjit_gemm_run)(kjit_gemm* gemm, const kjit_gemm_desc* desc,
                                         const void* A, const void* B, const void* C, void* D,
                                         const void* bias, void* stream);
typedef kjit_status (*PFN_kjit_gemm_clear_plans)(kjit_gemm* gemm);
typedef kjit_status (*PFN_kjit_gemm_stats_init_sized)(kjit_gemm_stats* stats, size_t size);
typedef kjit_status (*PFN_kjit_gemm_stats_get)(const kjit_gemm* gemm, kjit_gemm_stats* stats);
typedef kjit_status (*PFN_kjit_cublaslt_version)(size_t* out);

/* ---- grouped_gemm.h */

typedef kjit_status (*PFN_kjit_grouped_gemm_desc_init_sized)(kjit_grouped_gemm_desc* desc,
                                                             size_t size);
typedef kjit_status (*PFN_kjit_grouped_gemm_options_init_sized)(kjit_grouped_gemm_options* opts,
                                                                size_t size);
typedef kjit_status (*PFN_kjit_grouped_gemm_create)(kjit_compiler* compiler, int device,
                                                    const kjit_grouped_gemm_options* options,
                                                    kjit_grouped_gemm** out);
typedef void (*PFN_kjit_grouped_gemm_destroy)(kjit_grouped_gemm* gg);
typedef kjit_status (*PFN_kjit_grouped_gemm_check)(const kjit_grouped_gemm_desc* desc,
                                                   const void* A, const void* B,
                                                   const int32_t* offs, const void* C,
                                                   const void* D, const void* bias);
typedef kjit_status (*PFN_kjit_grouped_gemm_run)(kjit_grouped_gemm* gg,
                                                 const kjit_grouped_gemm_desc* desc,
                                                 const void* A, const void* B,
                                                 const int32_t* offs, const void* C, void* D,
                                                 const void* bias, void* stream);
typedef kjit_status (*PFN_kjit_grouped_gemm_run_scaled)(kjit_grouped_gemm* gg,
                                                        const kjit_grouped_gemm_desc* desc,
                                                        const void* A, const void* B,
                                                        const int32_t* offs, const void* C,
                                                        void* D, const void* bias,
                                                        const float* scale_a,
                                                        const float* scale_b, void* stream);
typedef kjit_status (*PFN_kjit_grouped_gemm_prepare)(kjit_grouped_gemm* gg,
                                                     const kjit_grouped_gemm_desc* desc,
                                                     int with_bias);
typedef kjit_status (*PFN_kjit_grouped_gemm_plan_key)(kjit_grouped_gemm* gg,
                                                      const kjit_grouped_gemm_desc* desc,
                                                      const void* A, const void* B,
                                                      const void* C, const void* D,
                                                      const void* bias, char* buf, size_t size,
                                                      size_t* needed);
typedef kjit_status (*PFN_kjit_grouped_gemm_offsets_status)(kjit_grouped_gemm* gg);
typedef kjit_status (*PFN_kjit_grouped_gemm_compile)(kjit_compiler* compiler,
                                                     const char* target,
                                                     const kjit_grouped_gemm_desc* desc,
                                                     const kjit_grouped_gemm_options* options,
                                                     int with_bias, kjit_binary** out);

/* ---- link.h */

typedef kjit_status (*PFN_kjit_linker_create)(kjit_cache* cache, kjit_linker** out);
typedef void (*PFN_kjit_linker_destroy)(kjit_linker* linker);
typedef kjit_status (*PFN_kjit_linker_set_target)(kjit_linker* linker, const char* target);
typedef kjit_status (*PFN_kjit_linker_add_option)(kjit_linker* linker, const char* option);
typedef kjit_status (*PFN_kjit_linker_set_outputs)(kjit_linker* linker, unsigned outputs);
typedef kjit_status (*PFN_kjit_linker_add_binary)(kjit_linker* linker,
                                                  const kjit_binary* binary, const char* name);
typedef kjit_status (*PFN_kjit_linker_add_data)(kjit_linker* linker, int kind, const void* data,
                                                size_t size, const char* name);
typedef kjit_status (*PFN_kjit_linker_add_file)(kjit_linker* linker, int kind,
                                                const char* path);
typedef kjit_status (*PFN_kjit_link)(kjit_linker* linker, kjit_binary** out);
typedef kjit_status (*PFN_kjit_linker_key)(kjit_linker* linker, char out_hex[65]);
typedef kjit_status (*PFN_kjit_nvjitlink_version)(const char** out);

#ifdef __cplusplus
}
#endif

#endif /* KJIT_TYPEDEFS_H */
