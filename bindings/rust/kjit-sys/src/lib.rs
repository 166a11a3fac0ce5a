//! Raw FFI declarations for libkjit, one to one with `include/kjit/*.h`.
//!
//! Everything here is `unsafe` and follows the C documentation in the headers exactly;
//! the `kjit` crate is the safe layer on top.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_double, c_int, c_uint, c_void};

// ---- common.h ----------------------------------------------------------------------------

pub const KJIT_VERSION_MAJOR: c_int = 0;
pub const KJIT_VERSION_MINOR: c_int = 3;
pub const KJIT_VERSION_PATCH: c_int = 0;
pub const KJIT_VERSION: c_int =
    KJIT_VERSION_MAJOR * 10000 + KJIT_VERSION_MINOR * 100 + KJIT_VERSION_PATCH;

/// `kjit_status` (a C enum: int-sized).
pub type kjit_status = c_int;

pub const KJIT_OK: kjit_status = 0;
pub const KJIT_ERROR_INVALID_ARGUMENT: kjit_status = 1;
pub const KJIT_ERROR_INVALID_HANDLE: kjit_status = 2;
pub const KJIT_ERROR_OUT_OF_MEMORY: kjit_status = 3;
pub const KJIT_ERROR_INVALID_SOURCE: kjit_status = 4;
pub const KJIT_ERROR_COMPILE: kjit_status = 5;
pub const KJIT_ERROR_INVALID_OPTION: kjit_status = 6;
pub const KJIT_ERROR_UNSUPPORTED_TARGET: kjit_status = 7;
pub const KJIT_ERROR_NAME_NOT_FOUND: kjit_status = 8;
pub const KJIT_ERROR_NVRTC: kjit_status = 9;
pub const KJIT_ERROR_CACHE: kjit_status = 10;
pub const KJIT_ERROR_CACHE_CORRUPT: kjit_status = 11;
pub const KJIT_ERROR_NOT_FOUND: kjit_status = 12;
pub const KJIT_ERROR_READ_ONLY: kjit_status = 13;
pub const KJIT_ERROR_CUDA_UNAVAILABLE: kjit_status = 14;
pub const KJIT_ERROR_CUDA: kjit_status = 15;
pub const KJIT_ERROR_ARGUMENT_MISMATCH: kjit_status = 16;
pub const KJIT_ERROR_STALE_HANDLE: kjit_status = 17;
pub const KJIT_ERROR_CUDA_STICKY: kjit_status = 18;
pub const KJIT_ERROR_UNSUPPORTED: kjit_status = 19;
pub const KJIT_ERROR_CANCELLED: kjit_status = 20;
pub const KJIT_ERROR_TIMEOUT: kjit_status = 21;
pub const KJIT_ERROR_BUFFER_TOO_SMALL: kjit_status = 22;
pub const KJIT_ERROR_CUBLAS: kjit_status = 23;
pub const KJIT_ERROR_IO: kjit_status = 24;
pub const KJIT_ERROR_LINK: kjit_status = 25;
pub const KJIT_ERROR_NVJITLINK: kjit_status = 26;
pub const KJIT_ERROR_INTERNAL: kjit_status = 99;

pub const KJIT_LOG_DEBUG: c_int = 0;
pub const KJIT_LOG_INFO: c_int = 1;
pub const KJIT_LOG_WARN: c_int = 2;
pub const KJIT_LOG_ERROR: c_int = 3;

pub type kjit_log_fn =
    Option<unsafe extern "C" fn(level: c_int, message: *const c_char, user: *mut c_void)>;

/// Opaque handle types. Only ever used behind pointers.
#[repr(C)]
pub struct kjit_cache {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_options {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_compiler {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_binary {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_future {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_kernel {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_gemm {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_linker {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_grouped_gemm {
    _private: [u8; 0],
}
#[repr(C)]
pub struct kjit_source {
    _private: [u8; 0],
}

// ---- compile.h ---------------------------------------------------------------------------

pub const KJIT_OUTPUT_PTX: c_uint = 1;
pub const KJIT_OUTPUT_CUBIN: c_uint = 2;
pub const KJIT_OUTPUT_LTOIR: c_uint = 4;
/// kjit_source_create()'s size for a NUL-terminated text (since 0.3).
pub const KJIT_SOURCE_NUL_TERMINATED: usize = usize::MAX;

pub const KJIT_TIER_COMPILED: c_int = 0;
pub const KJIT_TIER_MEMORY: c_int = 1;
pub const KJIT_TIER_DISK: c_int = 2;
pub const KJIT_TIER_REMOTE: c_int = 3;

pub const KJIT_COMPILE_MODE_AUTO: c_int = 0;
pub const KJIT_COMPILE_MODE_WORKER: c_int = 1;
pub const KJIT_COMPILE_MODE_INPROCESS: c_int = 2;

/// Since 0.2: state of the compile worker that serves a cache (`kjit_worker_info_get`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct kjit_worker_info {
    pub struct_size: u32,
    pub running: c_int,
    pub pch_in_use: c_int,
    pub pid: i64,
    pub uptime_s: c_double,
    pub idle_s: c_double,
    pub compiles: u64,
    pub failures: u64,
    pub timeouts: u64,
    pub in_flight: u64,
    pub crashes: u64,
    pub pch_created: u64,
    pub pch_used: u64,
    pub idle_limit_s: u64,
    pub rss_bytes: u64,
}

// ---- cache.h -----------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kjit_cache_options {
    pub struct_size: u32,
    pub directory: *const c_char,
    pub max_size_bytes: u64,
    pub memory_max_bytes: u64,
    pub read_only: c_int,
    pub memory_only: c_int,
    pub remote_url: *const c_char,
    pub remote_read_only: c_int,
}

pub const KJIT_DISK_OK: c_int = 0;
pub const KJIT_DISK_READ_ONLY: c_int = 1;
pub const KJIT_DISK_DISABLED: c_int = 2;
pub const KJIT_DISK_UNAVAILABLE: c_int = 3;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct kjit_cache_stats {
    pub struct_size: u32,
    pub disk_state: c_int,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub remote_hits: u64,
    pub misses: u64,
    pub compiles: u64,
    pub stores: u64,
    pub store_failures: u64,
    pub corrupt_entries: u64,
    pub evictions: u64,
    pub waits: u64,
    pub compile_ms_saved: c_double,
    pub memory_entries: u64,
    pub memory_bytes: u64,
    pub disk_entries: u64,
    pub disk_bytes: u64,
    pub max_size_bytes: u64,
    pub remote_errors: u64,
    pub remote_timeouts: u64,
    pub message: [c_char; 256],
    pub total_memory_hits: u64,
    pub total_disk_hits: u64,
    pub total_remote_hits: u64,
    pub total_misses: u64,
    pub total_compiles: u64,
    pub total_corrupt_entries: u64,
    pub total_evictions: u64,
    pub total_remote_errors: u64,
    pub total_remote_timeouts: u64,
    pub total_compile_ms_saved: c_double,
    pub remote_state: c_int,
    /// Since 0.2: compiles whose result was not stored because NVRTC read a file the
    /// cache key does not cover (the caller still got the result).
    pub not_stored: u64,
    /// Since 0.2: compiles that created, used, or could not make a precompiled header.
    pub pch_created: u64,
    pub pch_used: u64,
    pub pch_failed: u64,
    /// Since 0.2: not_stored and the PCH counts over every process of the database.
    pub total_not_stored: u64,
    pub total_pch_created: u64,
    pub total_pch_used: u64,
    pub total_pch_failed: u64,
    /// Since 0.2: fleet-wide claims in the remote tier (this handle, then every process).
    pub remote_claims: u64,
    pub remote_claim_waits: u64,
    pub remote_claim_wait_hits: u64,
    pub remote_claim_wait_timeouts: u64,
    pub total_remote_claims: u64,
    pub total_remote_claim_waits: u64,
    pub total_remote_claim_wait_hits: u64,
    pub total_remote_claim_wait_timeouts: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kjit_cache_entry_info {
    pub struct_size: u32,
    pub key: *const c_char,
    pub target: *const c_char,
    pub kernels: *const c_char,
    pub bytes: u64,
    pub created: i64,
    pub last_used: i64,
    pub compile_ms: c_double,
}

pub type kjit_cache_list_fn =
    Option<unsafe extern "C" fn(info: *const kjit_cache_entry_info, user: *mut c_void) -> c_int>;

// ---- kernel.h ----------------------------------------------------------------------------

pub const KJIT_LOAD_CUBIN: c_int = 0;
pub const KJIT_LOAD_PTX: c_int = 1;

pub const KJIT_KERNEL_DEFAULT: c_uint = 0;
pub const KJIT_KERNEL_NO_RELOAD: c_uint = 1;
pub const KJIT_KERNEL_FORCE_PTX: c_uint = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct kjit_kernel_attributes {
    pub struct_size: u32,
    pub num_regs: c_int,
    pub static_shared_bytes: c_int,
    pub const_bytes: c_int,
    pub local_bytes: c_int,
    pub max_threads_per_block: c_int,
    pub max_dynamic_shared_bytes: c_int,
    pub ptx_version: c_int,
    pub binary_version: c_int,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kjit_launch_config {
    pub struct_size: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub stream: *mut c_void,
    pub cluster: [u32; 3],
    pub cooperative: c_int,
}

impl kjit_launch_config {
    /// Same as `KJIT_LAUNCH_CONFIG_INIT`.
    pub const INIT: kjit_launch_config = kjit_launch_config {
        struct_size: std::mem::size_of::<kjit_launch_config>() as u32,
        grid: [1, 1, 1],
        block: [1, 1, 1],
        shared_bytes: 0,
        stream: std::ptr::null_mut(),
        cluster: [0, 0, 0],
        cooperative: 0,
    };
}

// ---- gemm.h ------------------------------------------------------------------------------

pub const KJIT_GEMM_DTYPE_DEFAULT: i32 = 0;
pub const KJIT_GEMM_F32: i32 = 1;
pub const KJIT_GEMM_F16: i32 = 2;
pub const KJIT_GEMM_BF16: i32 = 3;
pub const KJIT_GEMM_F8_E4M3: i32 = 4;
pub const KJIT_GEMM_F8_E5M2: i32 = 5;
pub const KJIT_GEMM_F64: i32 = 6;

pub const KJIT_GEMM_COMPUTE_DEFAULT: i32 = 0;
pub const KJIT_GEMM_COMPUTE_F32: i32 = 1;
pub const KJIT_GEMM_COMPUTE_TF32: i32 = 2;
pub const KJIT_GEMM_COMPUTE_F16: i32 = 3;
pub const KJIT_GEMM_COMPUTE_F64: i32 = 4;
pub const KJIT_GEMM_COMPUTE_F32_FAST_F16: i32 = 5;
pub const KJIT_GEMM_COMPUTE_F32_FAST_BF16: i32 = 6;

pub const KJIT_GEMM_COL_MAJOR: i32 = 0;
pub const KJIT_GEMM_ROW_MAJOR: i32 = 1;
pub const KJIT_GEMM_OP_N: i32 = 0;
pub const KJIT_GEMM_OP_T: i32 = 1;

pub const KJIT_GEMM_EPILOGUE_NONE: i32 = 0;
pub const KJIT_GEMM_EPILOGUE_BIAS: i32 = 1;
pub const KJIT_GEMM_EPILOGUE_RELU: i32 = 2;
pub const KJIT_GEMM_EPILOGUE_RELU_BIAS: i32 = 3;
pub const KJIT_GEMM_EPILOGUE_GELU: i32 = 4;
pub const KJIT_GEMM_EPILOGUE_GELU_BIAS: i32 = 5;

// grouped_gemm.h
pub const KJIT_GROUPED_B_KN: i32 = 0;
pub const KJIT_GROUPED_B_NK: i32 = 1;
pub const KJIT_GROUPED_ACT_NONE: i32 = 0;
pub const KJIT_GROUPED_ACT_RELU: i32 = 1;
pub const KJIT_GROUPED_ACT_GELU: i32 = 2;
pub const KJIT_GROUPED_ACT_SILU: i32 = 3;
/// silu(gate) * up over B's two column halves; D has n/2 columns. @since 0.3
pub const KJIT_GROUPED_ACT_SWIGLU: i32 = 4;
pub const KJIT_GROUPED_SCHEDULE_AUTO: i32 = 0;
pub const KJIT_GROUPED_SCHEDULE_COOPERATIVE: i32 = 1;
pub const KJIT_GROUPED_SCHEDULE_PINGPONG: i32 = 2;
/// No scales (fp8 or bf16). @since 0.3
pub const KJIT_GROUPED_SCALE_NONE: i32 = 0;
/// One fp32 per row of A and per column of each B_g; fp8 e4m3 inputs only. @since 0.3
pub const KJIT_GROUPED_SCALE_ROWWISE: i32 = 1;
/// Per row and 128-wide K block (A), per 128 x 128 block (B); fp8 inputs only. @since 0.3
pub const KJIT_GROUPED_SCALE_BLOCK128: i32 = 2;

/// `kjit_grouped_gemm_desc` (grouped_gemm.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct kjit_grouped_gemm_desc {
    pub struct_size: u32,
    pub groups: i32,
    pub rows: i64,
    pub n: i64,
    pub k: i64,
    pub a_type: i32,
    pub b_type: i32,
    pub d_type: i32,
    pub b_order: i32,
    pub activation: i32,
    pub reserved0: i32,
    pub lda: i64,
    pub ldb: i64,
    pub ldc: i64,
    pub ldd: i64,
    pub stride_b: i64,
    pub stride_bias: i64,
    pub alpha: f64,
    pub beta: f64,
    /// A `KJIT_GROUPED_SCALE_*` value. @since 0.3
    pub scale_mode: i32,
    /// Must be 0. @since 0.3
    pub reserved1: i32,
}

impl kjit_grouped_gemm_desc {
    /// Same as `KJIT_GROUPED_GEMM_DESC_INIT`.
    pub const INIT: kjit_grouped_gemm_desc = kjit_grouped_gemm_desc {
        struct_size: std::mem::size_of::<kjit_grouped_gemm_desc>() as u32,
        groups: 0,
        rows: 0,
        n: 0,
        k: 0,
        a_type: 0,
        b_type: 0,
        d_type: 0,
        b_order: KJIT_GROUPED_B_KN,
        activation: KJIT_GROUPED_ACT_NONE,
        reserved0: 0,
        lda: 0,
        ldb: 0,
        ldc: 0,
        ldd: 0,
        stride_b: 0,
        stride_bias: 0,
        alpha: 1.0,
        beta: 0.0,
        scale_mode: KJIT_GROUPED_SCALE_NONE,
        reserved1: 0,
    };
}

/// `kjit_grouped_gemm_options` (grouped_gemm.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kjit_grouped_gemm_options {
    pub struct_size: u32,
    pub tile_n: u32,
    pub stages: u32,
    pub portable_only: c_int,
    pub schedule: c_int,
    /// Since 0.3.
    pub check_offsets: c_int,
    /// Since 0.3.
    pub autotune: c_int,
    /// Since 0.3.
    pub cluster_m: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct kjit_gemm_desc {
    pub struct_size: u32,
    pub order: i32,
    pub trans_a: i32,
    pub trans_b: i32,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    pub lda: i64,
    pub ldb: i64,
    pub ldc: i64,
    pub ldd: i64,
    pub a_type: i32,
    pub b_type: i32,
    pub c_type: i32,
    pub d_type: i32,
    pub compute: i32,
    pub epilogue: i32,
    pub bias_type: i32,
    pub reserved0: i32,
    pub batch_count: i64,
    pub stride_a: i64,
    pub stride_b: i64,
    pub stride_c: i64,
    pub stride_d: i64,
    pub stride_bias: i64,
    pub alpha: c_double,
    pub beta: c_double,
    pub a_scale: *const c_void,
    pub b_scale: *const c_void,
    pub d_scale: *const c_void,
}

impl kjit_gemm_desc {
    /// Same as `KJIT_GEMM_DESC_INIT`.
    pub const INIT: kjit_gemm_desc = kjit_gemm_desc {
        struct_size: std::mem::size_of::<kjit_gemm_desc>() as u32,
        order: KJIT_GEMM_COL_MAJOR,
        trans_a: KJIT_GEMM_OP_N,
        trans_b: KJIT_GEMM_OP_N,
        m: 0,
        n: 0,
        k: 0,
        lda: 0,
        ldb: 0,
        ldc: 0,
        ldd: 0,
        a_type: KJIT_GEMM_DTYPE_DEFAULT,
        b_type: KJIT_GEMM_DTYPE_DEFAULT,
        c_type: KJIT_GEMM_DTYPE_DEFAULT,
        d_type: KJIT_GEMM_DTYPE_DEFAULT,
        compute: KJIT_GEMM_COMPUTE_DEFAULT,
        epilogue: KJIT_GEMM_EPILOGUE_NONE,
        bias_type: KJIT_GEMM_DTYPE_DEFAULT,
        reserved0: 0,
        batch_count: 1,
        stride_a: 0,
        stride_b: 0,
        stride_c: 0,
        stride_d: 0,
        stride_bias: 0,
        alpha: 1.0,
        beta: 0.0,
        a_scale: std::ptr::null(),
        b_scale: std::ptr::null(),
        d_scale: std::ptr::null(),
    };
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kjit_gemm_options {
    pub struct_size: u32,
    pub plan_capacity: u32,
    pub autotune: c_int,
    pub autotune_candidates: u32,
    pub autotune_warmup: u32,
    pub autotune_reps: u32,
    pub max_workspace_bytes: u64,
}

impl kjit_gemm_options {
    /// Same as `KJIT_GEMM_OPTIONS_INIT`.
    pub const INIT: kjit_gemm_options = kjit_gemm_options {
        struct_size: std::mem::size_of::<kjit_gemm_options>() as u32,
        plan_capacity: 0,
        autotune: 0,
        autotune_candidates: 0,
        autotune_warmup: 0,
        autotune_reps: 0,
        max_workspace_bytes: 0,
    };
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kjit_gemm_stats {
    pub struct_size: u32,
    pub runs: u64,
    pub memory_hits: u64,
    pub disk_hits: u64,
    pub misses: u64,
    pub heuristic_queries: u64,
    pub autotunes: u64,
    pub disk_rejected: u64,
    pub disk_writes: u64,
    pub evictions: u64,
    pub plans: u64,
    pub workspace_bytes: u64,
}

extern "C" {
    // common.h
    pub fn kjit_version() -> c_int;
    pub fn kjit_version_string() -> *const c_char;
    pub fn kjit_status_string(status: c_int) -> *const c_char;
    pub fn kjit_last_error() -> *const c_char;
    pub fn kjit_nvrtc_version(out: *mut *const c_char) -> kjit_status;
    pub fn kjit_set_log_callback(f: kjit_log_fn, user: *mut c_void);

    // compile.h: options
    pub fn kjit_options_create(out: *mut *mut kjit_options) -> kjit_status;
    pub fn kjit_options_clone(src: *const kjit_options, out: *mut *mut kjit_options)
        -> kjit_status;
    pub fn kjit_options_destroy(opts: *mut kjit_options);
    pub fn kjit_options_set_target(opts: *mut kjit_options, target: *const c_char) -> kjit_status;
    pub fn kjit_options_set_device(opts: *mut kjit_options, device: c_int) -> kjit_status;
    pub fn kjit_options_set_outputs(opts: *mut kjit_options, outputs: c_uint) -> kjit_status;
    pub fn kjit_options_set_name(opts: *mut kjit_options, name: *const c_char) -> kjit_status;
    pub fn kjit_options_set_toolkit(opts: *mut kjit_options, root: *const c_char) -> kjit_status;
    pub fn kjit_options_set_pch(opts: *mut kjit_options, enabled: c_int) -> kjit_status;
    pub fn kjit_toolkit_include_path() -> *const c_char;
    pub fn kjit_options_add(opts: *mut kjit_options, option: *const c_char) -> kjit_status;
    pub fn kjit_options_add_define(
        opts: *mut kjit_options,
        name: *const c_char,
        value: *const c_char,
    ) -> kjit_status;
    pub fn kjit_options_add_include_path(
        opts: *mut kjit_options,
        path: *const c_char,
    ) -> kjit_status;
    pub fn kjit_options_add_header(
        opts: *mut kjit_options,
        name: *const c_char,
        contents: *const c_char,
    ) -> kjit_status;
    pub fn kjit_options_add_name_expression(
        opts: *mut kjit_options,
        expr: *const c_char,
    ) -> kjit_status;

    // compile.h: compiler
    pub fn kjit_compiler_create(
        cache: *mut kjit_cache,
        threads: c_uint,
        out: *mut *mut kjit_compiler,
    ) -> kjit_status;
    pub fn kjit_compiler_destroy(compiler: *mut kjit_compiler);
    pub fn kjit_compile(
        compiler: *mut kjit_compiler,
        source: *const c_char,
        opts: *const kjit_options,
        out: *mut *mut kjit_binary,
    ) -> kjit_status;
    /// Since 0.3.
    pub fn kjit_source_create(
        text: *const c_char,
        size: usize,
        out: *mut *mut kjit_source,
    ) -> kjit_status;
    /// Since 0.3.
    pub fn kjit_source_destroy(source: *mut kjit_source);
    /// Since 0.3.
    pub fn kjit_compile_source(
        compiler: *mut kjit_compiler,
        source: *const kjit_source,
        opts: *const kjit_options,
        out: *mut *mut kjit_binary,
    ) -> kjit_status;
    pub fn kjit_compile_async(
        compiler: *mut kjit_compiler,
        source: *const c_char,
        opts: *const kjit_options,
        out: *mut *mut kjit_future,
    ) -> kjit_status;
    pub fn kjit_future_wait(
        future: *mut kjit_future,
        timeout_ms: i64,
        out: *mut *mut kjit_binary,
    ) -> kjit_status;
    pub fn kjit_future_ready(future: *const kjit_future) -> c_int;
    pub fn kjit_future_cancel(future: *mut kjit_future) -> kjit_status;
    pub fn kjit_future_destroy(future: *mut kjit_future);
    /// Since 0.2.
    pub fn kjit_compiler_set_compile_mode(compiler: *mut kjit_compiler, mode: c_int)
        -> kjit_status;
    /// Since 0.2.
    pub fn kjit_compiler_get_compile_mode(
        compiler: *const kjit_compiler,
        mode: *mut c_int,
    ) -> kjit_status;
    /// Since 0.2.
    pub fn kjit_worker_info_init_sized(info: *mut kjit_worker_info, size: usize) -> kjit_status;
    /// Since 0.2.
    pub fn kjit_worker_info_get(cache: *mut kjit_cache, info: *mut kjit_worker_info)
        -> kjit_status;
    pub fn kjit_compile_many(
        compiler: *mut kjit_compiler,
        count: usize,
        sources: *const *const c_char,
        opts: *const *const kjit_options,
        outs: *mut *mut kjit_binary,
        statuses: *mut kjit_status,
    ) -> kjit_status;

    // compile.h: binaries
    pub fn kjit_binary_destroy(binary: *mut kjit_binary);
    pub fn kjit_binary_status(binary: *const kjit_binary) -> kjit_status;
    pub fn kjit_binary_data(
        binary: *const kjit_binary,
        kind: c_int,
        size: *mut usize,
    ) -> *const c_void;
    pub fn kjit_binary_log(binary: *const kjit_binary) -> *const c_char;
    pub fn kjit_binary_target(binary: *const kjit_binary) -> *const c_char;
    pub fn kjit_binary_key(binary: *const kjit_binary) -> *const c_char;
    pub fn kjit_binary_tier(binary: *const kjit_binary) -> c_int;
    /// Since 0.2: 1 kept by the cache, 0 compiled and not stored (`*reason` says why), -1 bad handle.
    pub fn kjit_binary_stored(binary: *const kjit_binary, reason: *mut *const c_char) -> c_int;
    pub fn kjit_binary_compile_ms(binary: *const kjit_binary) -> c_double;
    /// Since 0.2: a kernel's parameter count, and each one's size and alignment, from its PTX.
    pub fn kjit_binary_param_count(
        binary: *const kjit_binary,
        kernel: *const c_char,
        count: *mut usize,
    ) -> kjit_status;
    pub fn kjit_binary_param_info(
        binary: *const kjit_binary,
        kernel: *const c_char,
        index: usize,
        size: *mut usize,
        align: *mut usize,
    ) -> kjit_status;
    /// Since 0.2: ptxas's performance advisories in the compile log.
    pub fn kjit_binary_advisory_count(binary: *const kjit_binary) -> usize;
    pub fn kjit_binary_advisory(binary: *const kjit_binary, index: usize) -> *const c_char;
    pub fn kjit_binary_lowered_name(
        binary: *const kjit_binary,
        expr: *const c_char,
    ) -> *const c_char;
    pub fn kjit_binary_name_count(binary: *const kjit_binary) -> usize;
    pub fn kjit_binary_name_expression(binary: *const kjit_binary, index: usize) -> *const c_char;
    pub fn kjit_binary_lowered_name_at(binary: *const kjit_binary, index: usize) -> *const c_char;
    pub fn kjit_binary_kernel_count(binary: *const kjit_binary) -> usize;
    pub fn kjit_binary_kernel_name(binary: *const kjit_binary, index: usize) -> *const c_char;
    pub fn kjit_binary_metadata_json(binary: *const kjit_binary) -> *const c_char;

    // compile.h: hashes
    pub fn kjit_hash_source(data: *const c_char, len: usize, out_hex: *mut c_char) -> kjit_status;
    pub fn kjit_hash_options(
        options: *const *const c_char,
        count: usize,
        out_hex: *mut c_char,
    ) -> kjit_status;
    pub fn kjit_compute_key(
        source: *const c_char,
        opts: *const kjit_options,
        out_hex: *mut c_char,
    ) -> kjit_status;
    /// Since 0.2: the key without compiling; `*known` 0 when only a compile can tell.
    pub fn kjit_compute_key_cached(
        cache: *mut kjit_cache,
        source: *const c_char,
        opts: *const kjit_options,
        out_hex: *mut c_char,
        known: *mut c_int,
    ) -> kjit_status;

    // cache.h
    /// The 0.1.0 function: writes the 0.1.0 struct. Prefer `kjit_cache_options_init_sized`.
    pub fn kjit_cache_options_init(opts: *mut kjit_cache_options);
    /// Since 0.2: writes the defaults within `size` bytes only (pass `size_of` of ours).
    pub fn kjit_cache_options_init_sized(opts: *mut kjit_cache_options, size: usize)
        -> kjit_status;
    /// Since 0.2.
    pub fn kjit_cache_stats_init_sized(stats: *mut kjit_cache_stats, size: usize) -> kjit_status;
    pub fn kjit_cache_open(
        opts: *const kjit_cache_options,
        out: *mut *mut kjit_cache,
    ) -> kjit_status;
    pub fn kjit_cache_close(cache: *mut kjit_cache);
    pub fn kjit_cache_directory(cache: *const kjit_cache) -> *const c_char;
    pub fn kjit_cache_stats_get(
        cache: *mut kjit_cache,
        stats: *mut kjit_cache_stats,
    ) -> kjit_status;
    pub fn kjit_cache_clear_memory(cache: *mut kjit_cache) -> kjit_status;
    /// Since 0.2: the remote tier's topology and counters as JSON (`*out` lives until the
    /// next call on this thread).
    pub fn kjit_cache_remote_info(
        cache: *mut kjit_cache,
        probe: c_int,
        out: *mut *const c_char,
    ) -> kjit_status;
    pub fn kjit_cache_clear(cache: *mut kjit_cache) -> kjit_status;
    pub fn kjit_cache_get(
        cache: *mut kjit_cache,
        key_hex: *const c_char,
        out: *mut *mut kjit_binary,
    ) -> kjit_status;
    pub fn kjit_cache_put(cache: *mut kjit_cache, binary: *const kjit_binary) -> kjit_status;
    pub fn kjit_cache_remove(cache: *mut kjit_cache, key_hex: *const c_char) -> kjit_status;
    pub fn kjit_cache_list(
        cache: *mut kjit_cache,
        f: kjit_cache_list_fn,
        user: *mut c_void,
    ) -> kjit_status;
    pub fn kjit_cache_verify(
        cache: *mut kjit_cache,
        checked: *mut u64,
        bad: *mut u64,
    ) -> kjit_status;
    pub fn kjit_cache_prune(
        cache: *mut kjit_cache,
        max_bytes: u64,
        removed: *mut u64,
    ) -> kjit_status;
    pub fn kjit_cache_export(
        cache: *mut kjit_cache,
        path: *const c_char,
        count: *mut u64,
    ) -> kjit_status;
    pub fn kjit_cache_import(
        cache: *mut kjit_cache,
        path: *const c_char,
        imported: *mut u64,
        rejected: *mut u64,
    ) -> kjit_status;

    // kernel.h: devices
    pub fn kjit_device_count(count: *mut c_int) -> kjit_status;
    pub fn kjit_device_arch(device: c_int, out: *mut c_char, size: usize) -> kjit_status;
    pub fn kjit_device_arch_cached(
        cache: *mut kjit_cache,
        device: c_int,
        out: *mut c_char,
        size: usize,
        from_record: *mut c_int,
    ) -> kjit_status;
    pub fn kjit_device_name(device: c_int, out: *mut c_char, size: usize) -> kjit_status;
    pub fn kjit_driver_version(version: *mut c_int) -> kjit_status;

    // kernel.h: kernels
    pub fn kjit_kernel_create(
        compiler: *mut kjit_compiler,
        source: *const c_char,
        name: *const c_char,
        opts: *const kjit_options,
        device: c_int,
        flags: c_uint,
        out: *mut *mut kjit_kernel,
        log_out: *mut *mut kjit_binary,
    ) -> kjit_status;
    pub fn kjit_kernel_from_binary(
        binary: *const kjit_binary,
        name: *const c_char,
        device: c_int,
        flags: c_uint,
        out: *mut *mut kjit_kernel,
    ) -> kjit_status;
    pub fn kjit_kernel_destroy(kernel: *mut kjit_kernel);
    pub fn kjit_kernel_load_path(kernel: *const kjit_kernel) -> c_int;
    pub fn kjit_kernel_symbol(kernel: *const kjit_kernel) -> *const c_char;
    pub fn kjit_kernel_param_count(kernel: *const kjit_kernel, count: *mut usize) -> kjit_status;
    pub fn kjit_kernel_param_info(
        kernel: *const kjit_kernel,
        index: usize,
        offset: *mut usize,
        size: *mut usize,
    ) -> kjit_status;
    pub fn kjit_kernel_param_buffer_size(
        kernel: *const kjit_kernel,
        size: *mut usize,
    ) -> kjit_status;
    pub fn kjit_kernel_get_attributes(
        kernel: *const kjit_kernel,
        attrs: *mut kjit_kernel_attributes,
    ) -> kjit_status;
    pub fn kjit_kernel_set_max_dynamic_shared(
        kernel: *mut kjit_kernel,
        bytes: c_int,
    ) -> kjit_status;
    pub fn kjit_kernel_occupancy(
        kernel: *const kjit_kernel,
        block_size: c_int,
        dynamic_shared: usize,
        blocks_per_sm: *mut c_int,
    ) -> kjit_status;
    pub fn kjit_kernel_suggest_block_size(
        kernel: *const kjit_kernel,
        dynamic_shared: usize,
        min_grid: *mut c_int,
        block_size: *mut c_int,
    ) -> kjit_status;

    // kernel.h: launch
    /// The 0.1.0 function: writes the 0.1.0 struct. Prefer `kjit_launch_config_init_sized`.
    pub fn kjit_launch_config_init(cfg: *mut kjit_launch_config);
    /// Since 0.2: writes the defaults within `size` bytes only.
    pub fn kjit_launch_config_init_sized(cfg: *mut kjit_launch_config, size: usize) -> kjit_status;
    /// Since 0.2.
    pub fn kjit_kernel_attributes_init_sized(
        attrs: *mut kjit_kernel_attributes,
        size: usize,
    ) -> kjit_status;
    pub fn kjit_kernel_launch(
        kernel: *mut kjit_kernel,
        cfg: *const kjit_launch_config,
        args: *mut *mut c_void,
        count: usize,
    ) -> kjit_status;
    pub fn kjit_kernel_launch_sized(
        kernel: *mut kjit_kernel,
        cfg: *const kjit_launch_config,
        args: *mut *mut c_void,
        sizes: *const usize,
        count: usize,
    ) -> kjit_status;
    pub fn kjit_kernel_launch_packed(
        kernel: *mut kjit_kernel,
        cfg: *const kjit_launch_config,
        buffer: *const c_void,
        size: usize,
    ) -> kjit_status;
    /// Since 0.2: a kernel that takes one struct, its size and alignment checked first.
    pub fn kjit_kernel_launch_params(
        kernel: *mut kjit_kernel,
        cfg: *const kjit_launch_config,
        params: *const c_void,
        size: usize,
        align: usize,
    ) -> kjit_status;
    // gemm.h
    /// The 0.1.0 functions: they write the 0.1.0 structs. Prefer the `_sized` ones.
    pub fn kjit_gemm_desc_init(desc: *mut kjit_gemm_desc);
    pub fn kjit_gemm_options_init(opts: *mut kjit_gemm_options);
    /// Since 0.2: write the defaults within `size` bytes only.
    pub fn kjit_gemm_desc_init_sized(desc: *mut kjit_gemm_desc, size: usize) -> kjit_status;
    pub fn kjit_gemm_options_init_sized(opts: *mut kjit_gemm_options, size: usize) -> kjit_status;
    pub fn kjit_gemm_stats_init_sized(stats: *mut kjit_gemm_stats, size: usize) -> kjit_status;
    pub fn kjit_gemm_create(
        cache: *mut kjit_cache,
        device: c_int,
        options: *const kjit_gemm_options,
        out: *mut *mut kjit_gemm,
    ) -> kjit_status;
    pub fn kjit_gemm_destroy(gemm: *mut kjit_gemm);
    pub fn kjit_gemm_check(
        desc: *const kjit_gemm_desc,
        a: *const c_void,
        b: *const c_void,
        c: *const c_void,
        d: *const c_void,
        bias: *const c_void,
    ) -> kjit_status;
    pub fn kjit_gemm_run(
        gemm: *mut kjit_gemm,
        desc: *const kjit_gemm_desc,
        a: *const c_void,
        b: *const c_void,
        c: *const c_void,
        d: *mut c_void,
        bias: *const c_void,
        stream: *mut c_void,
    ) -> kjit_status;
    pub fn kjit_gemm_clear_plans(gemm: *mut kjit_gemm) -> kjit_status;
    pub fn kjit_gemm_stats_get(gemm: *const kjit_gemm, stats: *mut kjit_gemm_stats) -> kjit_status;
    pub fn kjit_cublaslt_version(out: *mut usize) -> kjit_status;

    // grouped_gemm.h (since 0.2)
    pub fn kjit_grouped_gemm_desc_init_sized(
        desc: *mut kjit_grouped_gemm_desc,
        size: usize,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_options_init_sized(
        opts: *mut kjit_grouped_gemm_options,
        size: usize,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_create(
        compiler: *mut kjit_compiler,
        device: c_int,
        options: *const kjit_grouped_gemm_options,
        out: *mut *mut kjit_grouped_gemm,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_destroy(gg: *mut kjit_grouped_gemm);
    pub fn kjit_grouped_gemm_check(
        desc: *const kjit_grouped_gemm_desc,
        a: *const c_void,
        b: *const c_void,
        offs: *const i32,
        c: *const c_void,
        d: *const c_void,
        bias: *const c_void,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_run(
        gg: *mut kjit_grouped_gemm,
        desc: *const kjit_grouped_gemm_desc,
        a: *const c_void,
        b: *const c_void,
        offs: *const i32,
        c: *const c_void,
        d: *mut c_void,
        bias: *const c_void,
        stream: *mut c_void,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_prepare(
        gg: *mut kjit_grouped_gemm,
        desc: *const kjit_grouped_gemm_desc,
        with_bias: c_int,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_plan_key(
        gg: *mut kjit_grouped_gemm,
        desc: *const kjit_grouped_gemm_desc,
        a: *const c_void,
        b: *const c_void,
        c: *const c_void,
        d: *const c_void,
        bias: *const c_void,
        buf: *mut c_char,
        size: usize,
        needed: *mut usize,
    ) -> kjit_status;

    // grouped_gemm.h (since 0.3)
    pub fn kjit_grouped_gemm_run_scaled(
        gg: *mut kjit_grouped_gemm,
        desc: *const kjit_grouped_gemm_desc,
        a: *const c_void,
        b: *const c_void,
        offs: *const i32,
        c: *const c_void,
        d: *mut c_void,
        bias: *const c_void,
        scale_a: *const f32,
        scale_b: *const f32,
        stream: *mut c_void,
    ) -> kjit_status;
    pub fn kjit_grouped_gemm_offsets_status(gg: *mut kjit_grouped_gemm) -> kjit_status;
    pub fn kjit_grouped_gemm_compile(
        compiler: *mut kjit_compiler,
        target: *const c_char,
        desc: *const kjit_grouped_gemm_desc,
        options: *const kjit_grouped_gemm_options,
        with_bias: c_int,
        out: *mut *mut kjit_binary,
    ) -> kjit_status;
}

// ---- link.h (since 0.2) ------------------------------------------------------------------

pub const KJIT_LINK_INPUT_AUTO: c_int = 0;
pub const KJIT_LINK_INPUT_CUBIN: c_int = 1;
pub const KJIT_LINK_INPUT_PTX: c_int = 2;
pub const KJIT_LINK_INPUT_LTOIR: c_int = 3;
pub const KJIT_LINK_INPUT_FATBIN: c_int = 4;
pub const KJIT_LINK_INPUT_OBJECT: c_int = 5;
pub const KJIT_LINK_INPUT_LIBRARY: c_int = 6;

extern "C" {
    pub fn kjit_linker_create(cache: *mut kjit_cache, out: *mut *mut kjit_linker) -> kjit_status;
    pub fn kjit_linker_destroy(linker: *mut kjit_linker);
    pub fn kjit_linker_set_target(linker: *mut kjit_linker, target: *const c_char) -> kjit_status;
    pub fn kjit_linker_add_option(linker: *mut kjit_linker, option: *const c_char) -> kjit_status;
    pub fn kjit_linker_set_outputs(linker: *mut kjit_linker, outputs: c_uint) -> kjit_status;
    pub fn kjit_linker_add_binary(
        linker: *mut kjit_linker,
        binary: *const kjit_binary,
        name: *const c_char,
    ) -> kjit_status;
    pub fn kjit_linker_add_data(
        linker: *mut kjit_linker,
        kind: c_int,
        data: *const c_void,
        size: usize,
        name: *const c_char,
    ) -> kjit_status;
    pub fn kjit_linker_add_file(
        linker: *mut kjit_linker,
        kind: c_int,
        path: *const c_char,
    ) -> kjit_status;
    pub fn kjit_link(linker: *mut kjit_linker, out: *mut *mut kjit_binary) -> kjit_status;
    pub fn kjit_linker_key(linker: *mut kjit_linker, out_hex: *mut c_char) -> kjit_status;
    pub fn kjit_nvjitlink_version(out: *mut *const c_char) -> kjit_status;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    // Sizes and offsets are checked against the C compiler's view of the headers in
    // tests/layout.rs.

    // The sized init functions write our struct, and nothing past it: each struct sits in
    // front of a canary, which must survive.
    #[repr(C, align(8))]
    struct Guarded<T: Copy> {
        value: T,
        canary: [u8; 64],
    }

    fn init_sized<T: Copy>(init: unsafe extern "C" fn(*mut T, usize) -> kjit_status) -> T {
        let mut g: Guarded<T> = unsafe { std::mem::zeroed() };
        unsafe {
            std::ptr::write_bytes(
                &mut g as *mut Guarded<T> as *mut u8,
                0xAB,
                size_of::<Guarded<T>>(),
            )
        };
        let status = unsafe { init(&mut g.value, size_of::<T>()) };
        assert_eq!(status, KJIT_OK);
        // Bytes past our struct (padding up to the canary included) are the caller's.
        let bytes = unsafe {
            std::slice::from_raw_parts(
                &g as *const Guarded<T> as *const u8,
                size_of::<Guarded<T>>(),
            )
        };
        assert!(
            bytes[size_of::<T>()..].iter().all(|&b| b == 0xAB),
            "wrote past the struct"
        );
        g.value
    }

    #[test]
    fn launch_config_init_matches_the_library() {
        let c = init_sized(kjit_launch_config_init_sized);
        assert_eq!(c.struct_size as usize, size_of::<kjit_launch_config>());
        assert_eq!(c.grid, [1, 1, 1]);
        assert_eq!(c.block, [1, 1, 1]);
        assert_eq!(c.shared_bytes, 0);
        assert_eq!(c.cluster, [0, 0, 0]);
        assert_eq!(c.cooperative, 0);
        assert!(c.stream.is_null());
    }

    #[test]
    fn cache_options_init_matches_the_library() {
        let o = init_sized(kjit_cache_options_init_sized);
        assert_eq!(o.struct_size as usize, size_of::<kjit_cache_options>());
        assert!(o.directory.is_null() && o.remote_url.is_null());
        assert_eq!(o.remote_read_only, 0);
        assert_eq!(
            (
                o.max_size_bytes,
                o.memory_max_bytes,
                o.read_only,
                o.memory_only
            ),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn gemm_inits_match_the_library() {
        assert_eq!(init_sized(kjit_gemm_desc_init_sized), kjit_gemm_desc::INIT);
        assert_eq!(
            init_sized(kjit_gemm_options_init_sized),
            kjit_gemm_options::INIT
        );
        let s = init_sized(kjit_gemm_stats_init_sized);
        assert_eq!(
            (s.struct_size as usize, s.runs),
            (size_of::<kjit_gemm_stats>(), 0)
        );
    }

    #[test]
    fn stats_and_attribute_inits_zero_our_struct() {
        let s = init_sized(kjit_cache_stats_init_sized);
        assert_eq!(s.struct_size as usize, size_of::<kjit_cache_stats>());
        assert_eq!((s.misses, s.total_pch_failed, s.message[0]), (0, 0, 0));
        let a = init_sized(kjit_kernel_attributes_init_sized);
        assert_eq!(a.struct_size as usize, size_of::<kjit_kernel_attributes>());
        assert_eq!(a.num_regs, 0);
    }

    #[test]
    fn a_size_below_the_first_release_is_refused() {
        let mut c = kjit_launch_config::INIT;
        let status = unsafe { kjit_launch_config_init_sized(&mut c, 8) };
        assert_eq!(status, KJIT_ERROR_INVALID_ARGUMENT);
        // Nothing was written.
        assert_eq!(c.struct_size, kjit_launch_config::INIT.struct_size);
    }

    #[test]
    fn version_matches_the_header() {
        assert_eq!(unsafe { kjit_version() }, KJIT_VERSION);
    }
}
