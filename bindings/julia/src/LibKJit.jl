# Raw ccall layer: one Julia function per public C function, named and typed as in
# include/kjit/*.h, and the C structs with identical layouts. Generated from the headers
# and checked against them and against libkjit.so by tools/julia_check.
module LibKJit

"Library name passed to every ccall. KJit.__init__ loads ENV[\"KJIT_LIB\"] first when set."
const libkjit = "libkjit.so.0"

"""
    @gcsafe ccall((:name, libkjit), Ret, (T1, ...), args...)

A `ccall` during which the garbage collector may run on Julia's other threads. The
arguments are converted and rooted first; then the thread is marked GC-safe
(`jl_gc_safe_enter`) for exactly the C call, and marked back (`jl_gc_safe_leave`, which
waits for a collection in progress) before anything touches Julia objects again. Used for
every C function that can block (tools/julia_check/blocking.json lists them and why), the
way CUDA.jl calls the blocking driver functions, so that a thread parked in a compile or a
wait never stops garbage collection everywhere else. The C function must not run Julia
code that allocates on this thread (`kjit_cache_list` stays a plain `ccall`).
"""
macro gcsafe(ex)
    Meta.isexpr(ex, :call) && ex.args[1] === :ccall && length(ex.args) >= 4 ||
        throw(ArgumentError("@gcsafe expects ccall((:name, lib), Ret, (Types...,), args...)"))
    target, rettype, types = ex.args[2], ex.args[3], ex.args[4]
    Meta.isexpr(types, :tuple) ||
        throw(ArgumentError("@gcsafe: the argument types must be a literal tuple"))
    args = ex.args[5:end]
    length(args) == length(types.args) ||
        throw(ArgumentError("@gcsafe: $(length(types.args)) argument types, $(length(args)) values"))
    roots = [gensym("root") for _ in args]
    raws = [gensym("raw") for _ in args]
    converts = [:($r = Base.cconvert($(esc(T)), $(esc(a)))) for (r, T, a) in zip(roots, types.args, args)]
    unboxes = [:($p = Base.unsafe_convert($(esc(T)), $r)) for (p, T, r) in zip(raws, types.args, roots)]
    # The C call itself, on the already converted values (built as an Expr: the static
    # check reads every literal ccall as a call of libkjit).
    inner = Expr(:call, :ccall, esc(target), esc(rettype),
                 Expr(:tuple, map(esc, types.args)...), raws...)
    return quote
        $(converts...)
        GC.@preserve $(roots...) begin
            $(unboxes...)
            local gc_state = ccall(:jl_gc_safe_enter, Int8, ())
            local result = $inner
            ccall(:jl_gc_safe_leave, Cvoid, (Int8,), gc_state)
            result
        end
    end
end

"C struct `kjit_worker_info` (compile.h)."
struct kjit_worker_info
    struct_size::UInt32
    running::Cint
    pch_in_use::Cint
    pid::Int64
    uptime_s::Cdouble
    idle_s::Cdouble
    compiles::UInt64
    failures::UInt64
    timeouts::UInt64
    in_flight::UInt64
    crashes::UInt64
    pch_created::UInt64
    pch_used::UInt64
    idle_limit_s::UInt64
    rss_bytes::UInt64
end

"C struct `kjit_cache_options` (cache.h)."
struct kjit_cache_options
    struct_size::UInt32
    directory::Ptr{UInt8}
    max_size_bytes::UInt64
    memory_max_bytes::UInt64
    read_only::Cint
    memory_only::Cint
    remote_url::Ptr{UInt8}
    remote_read_only::Cint
end

"C struct `kjit_cache_stats` (cache.h)."
struct kjit_cache_stats
    struct_size::UInt32
    disk_state::Cint
    memory_hits::UInt64
    disk_hits::UInt64
    remote_hits::UInt64
    misses::UInt64
    compiles::UInt64
    stores::UInt64
    store_failures::UInt64
    corrupt_entries::UInt64
    evictions::UInt64
    waits::UInt64
    compile_ms_saved::Cdouble
    memory_entries::UInt64
    memory_bytes::UInt64
    disk_entries::UInt64
    disk_bytes::UInt64
    max_size_bytes::UInt64
    remote_errors::UInt64
    remote_timeouts::UInt64
    message::NTuple{256,Cchar}
    total_memory_hits::UInt64
    total_disk_hits::UInt64
    total_remote_hits::UInt64
    total_misses::UInt64
    total_compiles::UInt64
    total_corrupt_entries::UInt64
    total_evictions::UInt64
    total_remote_errors::UInt64
    total_remote_timeouts::UInt64
    total_compile_ms_saved::Cdouble
    remote_state::Cint
    not_stored::UInt64
    pch_created::UInt64
    pch_used::UInt64
    pch_failed::UInt64
    total_not_stored::UInt64
    total_pch_created::UInt64
    total_pch_used::UInt64
    total_pch_failed::UInt64
    remote_claims::UInt64
    remote_claim_waits::UInt64
    remote_claim_wait_hits::UInt64
    remote_claim_wait_timeouts::UInt64
    total_remote_claims::UInt64
    total_remote_claim_waits::UInt64
    total_remote_claim_wait_hits::UInt64
    total_remote_claim_wait_timeouts::UInt64
end

"C struct `kjit_cache_entry_info` (cache.h)."
struct kjit_cache_entry_info
    struct_size::UInt32
    key::Ptr{UInt8}
    target::Ptr{UInt8}
    kernels::Ptr{UInt8}
    bytes::UInt64
    created::Int64
    last_used::Int64
    compile_ms::Cdouble
end

"C struct `kjit_kernel_attributes` (kernel.h)."
struct kjit_kernel_attributes
    struct_size::UInt32
    num_regs::Cint
    static_shared_bytes::Cint
    const_bytes::Cint
    local_bytes::Cint
    max_threads_per_block::Cint
    max_dynamic_shared_bytes::Cint
    ptx_version::Cint
    binary_version::Cint
end

"C struct `kjit_launch_config` (kernel.h)."
struct kjit_launch_config
    struct_size::UInt32
    grid::NTuple{3,UInt32}
    block::NTuple{3,UInt32}
    shared_bytes::UInt32
    stream::Ptr{Cvoid}
    cluster::NTuple{3,UInt32}
    cooperative::Cint
end

"C struct `kjit_gemm_desc` (gemm.h)."
struct kjit_gemm_desc
    struct_size::UInt32
    order::Int32
    trans_a::Int32
    trans_b::Int32
    m::Int64
    n::Int64
    k::Int64
    lda::Int64
    ldb::Int64
    ldc::Int64
    ldd::Int64
    a_type::Int32
    b_type::Int32
    c_type::Int32
    d_type::Int32
    compute::Int32
    epilogue::Int32
    bias_type::Int32
    reserved0::Int32
    batch_count::Int64
    stride_a::Int64
    stride_b::Int64
    stride_c::Int64
    stride_d::Int64
    stride_bias::Int64
    alpha::Cdouble
    beta::Cdouble
    a_scale::Ptr{Cvoid}
    b_scale::Ptr{Cvoid}
    d_scale::Ptr{Cvoid}
end

"C struct `kjit_gemm_options` (gemm.h)."
struct kjit_gemm_options
    struct_size::UInt32
    plan_capacity::UInt32
    autotune::Cint
    autotune_candidates::UInt32
    autotune_warmup::UInt32
    autotune_reps::UInt32
    max_workspace_bytes::UInt64
end

"C struct `kjit_gemm_stats` (gemm.h)."
struct kjit_gemm_stats
    struct_size::UInt32
    runs::UInt64
    memory_hits::UInt64
    disk_hits::UInt64
    misses::UInt64
    heuristic_queries::UInt64
    autotunes::UInt64
    disk_rejected::UInt64
    disk_writes::UInt64
    evictions::UInt64
    plans::UInt64
    workspace_bytes::UInt64
end

"C struct `kjit_grouped_gemm_desc` (grouped_gemm.h)."
struct kjit_grouped_gemm_desc
    struct_size::UInt32
    groups::Int32
    rows::Int64
    n::Int64
    k::Int64
    a_type::Int32
    b_type::Int32
    d_type::Int32
    b_order::Int32
    activation::Int32
    reserved0::Int32
    lda::Int64
    ldb::Int64
    ldc::Int64
    ldd::Int64
    stride_b::Int64
    stride_bias::Int64
    alpha::Cdouble
    beta::Cdouble
    scale_mode::Int32
    reserved1::Int32
end

"C struct `kjit_grouped_gemm_options` (grouped_gemm.h)."
struct kjit_grouped_gemm_options
    struct_size::UInt32
    tile_n::UInt32
    stages::UInt32
    portable_only::Cint
    schedule::Cint
    check_offsets::Cint
    autotune::Cint
    cluster_m::UInt32
end

# ---- common.h --------------------------------------------------------------

"`int kjit_version(void)`"
kjit_version() = ccall((:kjit_version, libkjit), Cint, ())

"`const char* kjit_version_string(void)`"
kjit_version_string() = ccall((:kjit_version_string, libkjit), Ptr{UInt8}, ())

"`const char* kjit_status_string(int status)`"
kjit_status_string(status) = ccall((:kjit_status_string, libkjit), Ptr{UInt8}, (Cint,), status)

"`const char* kjit_last_error(void)`"
kjit_last_error() = ccall((:kjit_last_error, libkjit), Ptr{UInt8}, ())

"`kjit_status kjit_nvrtc_version(const char** out)`"
kjit_nvrtc_version(out) =
    @gcsafe ccall((:kjit_nvrtc_version, libkjit), Cint,
          (Ptr{Ptr{UInt8}},),
          out)

"`void kjit_set_log_callback(kjit_log_fn fn, void* user)`"
kjit_set_log_callback(fn, user) =
    ccall((:kjit_set_log_callback, libkjit), Cvoid,
          (Ptr{Cvoid}, Ptr{Cvoid}),
          fn, user)

# ---- compile.h -------------------------------------------------------------

"`kjit_status kjit_options_create(kjit_options** out)`"
kjit_options_create(out) = ccall((:kjit_options_create, libkjit), Cint, (Ptr{Ptr{Cvoid}},), out)

"`kjit_status kjit_options_clone(const kjit_options* src, kjit_options** out)`"
kjit_options_clone(src, out) =
    ccall((:kjit_options_clone, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          src, out)

"`void kjit_options_destroy(kjit_options* opts)`"
kjit_options_destroy(opts) = ccall((:kjit_options_destroy, libkjit), Cvoid, (Ptr{Cvoid},), opts)

"`kjit_status kjit_options_set_target(kjit_options* opts, const char* target)`"
kjit_options_set_target(opts, target) =
    ccall((:kjit_options_set_target, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          opts, target)

"`kjit_status kjit_options_set_device(kjit_options* opts, int device)`"
kjit_options_set_device(opts, device) =
    ccall((:kjit_options_set_device, libkjit), Cint,
          (Ptr{Cvoid}, Cint),
          opts, device)

"`kjit_status kjit_options_set_outputs(kjit_options* opts, unsigned outputs)`"
kjit_options_set_outputs(opts, outputs) =
    ccall((:kjit_options_set_outputs, libkjit), Cint,
          (Ptr{Cvoid}, Cuint),
          opts, outputs)

"`kjit_status kjit_options_set_name(kjit_options* opts, const char* name)`"
kjit_options_set_name(opts, name) =
    ccall((:kjit_options_set_name, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          opts, name)

"`kjit_status kjit_options_add(kjit_options* opts, const char* option)`"
kjit_options_add(opts, option) =
    ccall((:kjit_options_add, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          opts, option)

"`kjit_status kjit_options_add_define(kjit_options* opts, const char* name, const char* value)`"
kjit_options_add_define(opts, name, value) =
    ccall((:kjit_options_add_define, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{UInt8}),
          opts, name, value)

"`kjit_status kjit_options_add_include_path(kjit_options* opts, const char* path)`"
kjit_options_add_include_path(opts, path) =
    ccall((:kjit_options_add_include_path, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          opts, path)

"`kjit_status kjit_options_add_header(kjit_options* opts, const char* name, const char* contents)`"
kjit_options_add_header(opts, name, contents) =
    ccall((:kjit_options_add_header, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Cstring),
          opts, name, contents)

"`kjit_status kjit_options_add_name_expression(kjit_options* opts, const char* expr)`"
kjit_options_add_name_expression(opts, expr) =
    ccall((:kjit_options_add_name_expression, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          opts, expr)

"`kjit_status kjit_options_set_toolkit(kjit_options* opts, const char* root)`"
kjit_options_set_toolkit(opts, root) =
    ccall((:kjit_options_set_toolkit, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          opts, root)

"`kjit_status kjit_options_set_pch(kjit_options* opts, int enabled)`"
kjit_options_set_pch(opts, enabled) =
    ccall((:kjit_options_set_pch, libkjit), Cint,
          (Ptr{Cvoid}, Cint),
          opts, enabled)

"`const char* kjit_toolkit_include_path(void)`"
kjit_toolkit_include_path() = ccall((:kjit_toolkit_include_path, libkjit), Ptr{UInt8}, ())

"`kjit_status kjit_compiler_create(kjit_cache* cache, unsigned threads, kjit_compiler** out)`"
kjit_compiler_create(cache, threads, out) =
    ccall((:kjit_compiler_create, libkjit), Cint,
          (Ptr{Cvoid}, Cuint, Ptr{Ptr{Cvoid}}),
          cache, threads, out)

"`void kjit_compiler_destroy(kjit_compiler* compiler)`"
kjit_compiler_destroy(compiler) =
    @gcsafe ccall((:kjit_compiler_destroy, libkjit), Cvoid,
          (Ptr{Cvoid},),
          compiler)

"`kjit_status kjit_compile(kjit_compiler* compiler, const char* source, const kjit_options* opts, kjit_binary** out)`"
kjit_compile(compiler, source, opts, out) =
    @gcsafe ccall((:kjit_compile, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          compiler, source, opts, out)

"`kjit_status kjit_source_create(const char* text, size_t size, kjit_source** out)`"
kjit_source_create(text, size, out) =
    ccall((:kjit_source_create, libkjit), Cint,
          (Cstring, Csize_t, Ptr{Ptr{Cvoid}}),
          text, size, out)

"`void kjit_source_destroy(kjit_source* source)`"
kjit_source_destroy(source) = ccall((:kjit_source_destroy, libkjit), Cvoid, (Ptr{Cvoid},), source)

"`kjit_status kjit_compile_source(kjit_compiler* compiler, const kjit_source* source, const kjit_options* opts, kjit_binary** out)`"
kjit_compile_source(compiler, source, opts, out) =
    ccall((:kjit_compile_source, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          compiler, source, opts, out)

"`kjit_status kjit_compile_async(kjit_compiler* compiler, const char* source, const kjit_options* opts, kjit_future** out)`"
kjit_compile_async(compiler, source, opts, out) =
    ccall((:kjit_compile_async, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          compiler, source, opts, out)

"`kjit_status kjit_future_wait(kjit_future* future, int64_t timeout_ms, kjit_binary** out)`"
kjit_future_wait(future, timeout_ms, out) =
    @gcsafe ccall((:kjit_future_wait, libkjit), Cint,
          (Ptr{Cvoid}, Int64, Ptr{Ptr{Cvoid}}),
          future, timeout_ms, out)

"`int kjit_future_ready(const kjit_future* future)`"
kjit_future_ready(future) = ccall((:kjit_future_ready, libkjit), Cint, (Ptr{Cvoid},), future)

"`kjit_status kjit_future_cancel(kjit_future* future)`"
kjit_future_cancel(future) = ccall((:kjit_future_cancel, libkjit), Cint, (Ptr{Cvoid},), future)

"`void kjit_future_destroy(kjit_future* future)`"
kjit_future_destroy(future) = ccall((:kjit_future_destroy, libkjit), Cvoid, (Ptr{Cvoid},), future)

"`kjit_status kjit_compile_many(kjit_compiler* compiler, size_t count, const char* const* sources, const kjit_options* const* opts, kjit_binary** outs, kjit_status* statuses)`"
kjit_compile_many(compiler, count, sources, opts, outs, statuses) =
    @gcsafe ccall((:kjit_compile_many, libkjit), Cint,
          (Ptr{Cvoid}, Csize_t, Ptr{Ptr{UInt8}}, Ptr{Ptr{Cvoid}}, Ptr{Ptr{Cvoid}}, Ptr{Cint}),
          compiler, count, sources, opts, outs, statuses)

"`kjit_status kjit_compiler_set_compile_mode(kjit_compiler* compiler, int mode)`"
kjit_compiler_set_compile_mode(compiler, mode) =
    ccall((:kjit_compiler_set_compile_mode, libkjit), Cint,
          (Ptr{Cvoid}, Cint),
          compiler, mode)

"`kjit_status kjit_compiler_get_compile_mode(const kjit_compiler* compiler, int* mode)`"
kjit_compiler_get_compile_mode(compiler, mode) =
    ccall((:kjit_compiler_get_compile_mode, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Cint}),
          compiler, mode)

"`kjit_status kjit_worker_info_init_sized(kjit_worker_info* info, size_t size)`"
kjit_worker_info_init_sized(info, size) =
    ccall((:kjit_worker_info_init_sized, libkjit), Cint,
          (Ptr{kjit_worker_info}, Csize_t),
          info, size)

"`kjit_status kjit_worker_info_get(kjit_cache* cache, kjit_worker_info* info)`"
kjit_worker_info_get(cache, info) =
    @gcsafe ccall((:kjit_worker_info_get, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_worker_info}),
          cache, info)

"`void kjit_binary_destroy(kjit_binary* binary)`"
kjit_binary_destroy(binary) = ccall((:kjit_binary_destroy, libkjit), Cvoid, (Ptr{Cvoid},), binary)

"`kjit_status kjit_binary_status(const kjit_binary* binary)`"
kjit_binary_status(binary) = ccall((:kjit_binary_status, libkjit), Cint, (Ptr{Cvoid},), binary)

"`const void* kjit_binary_data(const kjit_binary* binary, int kind, size_t* size)`"
kjit_binary_data(binary, kind, size) =
    ccall((:kjit_binary_data, libkjit), Ptr{Cvoid},
          (Ptr{Cvoid}, Cint, Ptr{Csize_t}),
          binary, kind, size)

"`const char* kjit_binary_log(const kjit_binary* binary)`"
kjit_binary_log(binary) = ccall((:kjit_binary_log, libkjit), Ptr{UInt8}, (Ptr{Cvoid},), binary)

"`const char* kjit_binary_target(const kjit_binary* binary)`"
kjit_binary_target(binary) =
    ccall((:kjit_binary_target, libkjit), Ptr{UInt8},
          (Ptr{Cvoid},),
          binary)

"`const char* kjit_binary_key(const kjit_binary* binary)`"
kjit_binary_key(binary) = ccall((:kjit_binary_key, libkjit), Ptr{UInt8}, (Ptr{Cvoid},), binary)

"`int kjit_binary_tier(const kjit_binary* binary)`"
kjit_binary_tier(binary) = ccall((:kjit_binary_tier, libkjit), Cint, (Ptr{Cvoid},), binary)

"`int kjit_binary_stored(const kjit_binary* binary, const char** reason)`"
kjit_binary_stored(binary, reason) =
    ccall((:kjit_binary_stored, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Ptr{UInt8}}),
          binary, reason)

"`double kjit_binary_compile_ms(const kjit_binary* binary)`"
kjit_binary_compile_ms(binary) =
    ccall((:kjit_binary_compile_ms, libkjit), Cdouble,
          (Ptr{Cvoid},),
          binary)

"`const char* kjit_binary_lowered_name(const kjit_binary* binary, const char* expr)`"
kjit_binary_lowered_name(binary, expr) =
    ccall((:kjit_binary_lowered_name, libkjit), Ptr{UInt8},
          (Ptr{Cvoid}, Cstring),
          binary, expr)

"`size_t kjit_binary_name_count(const kjit_binary* binary)`"
kjit_binary_name_count(binary) =
    ccall((:kjit_binary_name_count, libkjit), Csize_t,
          (Ptr{Cvoid},),
          binary)

"`const char* kjit_binary_name_expression(const kjit_binary* binary, size_t index)`"
kjit_binary_name_expression(binary, index) =
    ccall((:kjit_binary_name_expression, libkjit), Ptr{UInt8},
          (Ptr{Cvoid}, Csize_t),
          binary, index)

"`const char* kjit_binary_lowered_name_at(const kjit_binary* binary, size_t index)`"
kjit_binary_lowered_name_at(binary, index) =
    ccall((:kjit_binary_lowered_name_at, libkjit), Ptr{UInt8},
          (Ptr{Cvoid}, Csize_t),
          binary, index)

"`size_t kjit_binary_kernel_count(const kjit_binary* binary)`"
kjit_binary_kernel_count(binary) =
    ccall((:kjit_binary_kernel_count, libkjit), Csize_t,
          (Ptr{Cvoid},),
          binary)

"`const char* kjit_binary_kernel_name(const kjit_binary* binary, size_t index)`"
kjit_binary_kernel_name(binary, index) =
    ccall((:kjit_binary_kernel_name, libkjit), Ptr{UInt8},
          (Ptr{Cvoid}, Csize_t),
          binary, index)

"`kjit_status kjit_binary_param_count(const kjit_binary* binary, const char* kernel, size_t* count)`"
kjit_binary_param_count(binary, kernel, count) =
    ccall((:kjit_binary_param_count, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{Csize_t}),
          binary, kernel, count)

"`kjit_status kjit_binary_param_info(const kjit_binary* binary, const char* kernel, size_t index, size_t* size, size_t* align)`"
kjit_binary_param_info(binary, kernel, index, size, align) =
    ccall((:kjit_binary_param_info, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Csize_t, Ptr{Csize_t}, Ptr{Csize_t}),
          binary, kernel, index, size, align)

"`size_t kjit_binary_advisory_count(const kjit_binary* binary)`"
kjit_binary_advisory_count(binary) =
    ccall((:kjit_binary_advisory_count, libkjit), Csize_t,
          (Ptr{Cvoid},),
          binary)

"`const char* kjit_binary_advisory(const kjit_binary* binary, size_t index)`"
kjit_binary_advisory(binary, index) =
    ccall((:kjit_binary_advisory, libkjit), Ptr{UInt8},
          (Ptr{Cvoid}, Csize_t),
          binary, index)

"`const char* kjit_binary_metadata_json(const kjit_binary* binary)`"
kjit_binary_metadata_json(binary) =
    ccall((:kjit_binary_metadata_json, libkjit), Ptr{UInt8},
          (Ptr{Cvoid},),
          binary)

"`kjit_status kjit_hash_source(const char* data, size_t len, char out_hex[65])`"
kjit_hash_source(data, len, out_hex) =
    ccall((:kjit_hash_source, libkjit), Cint,
          (Ptr{UInt8}, Csize_t, Ptr{UInt8}),
          data, len, out_hex)

"`kjit_status kjit_hash_options(const char* const* options, size_t count, char out_hex[65])`"
kjit_hash_options(options, count, out_hex) =
    ccall((:kjit_hash_options, libkjit), Cint,
          (Ptr{Ptr{UInt8}}, Csize_t, Ptr{UInt8}),
          options, count, out_hex)

"`kjit_status kjit_compute_key(const char* source, const kjit_options* opts, char out_hex[65])`"
kjit_compute_key(source, opts, out_hex) =
    @gcsafe ccall((:kjit_compute_key, libkjit), Cint,
          (Cstring, Ptr{Cvoid}, Ptr{UInt8}),
          source, opts, out_hex)

"`kjit_status kjit_compute_key_cached(kjit_cache* cache, const char* source, const kjit_options* opts, char out_hex[65], int* known)`"
kjit_compute_key_cached(cache, source, opts, out_hex, known) =
    @gcsafe ccall((:kjit_compute_key_cached, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{Cvoid}, Ptr{UInt8}, Ptr{Cint}),
          cache, source, opts, out_hex, known)

# ---- cache.h ---------------------------------------------------------------

"`kjit_status kjit_cache_options_init_sized(kjit_cache_options* opts, size_t size)`"
kjit_cache_options_init_sized(opts, size) =
    ccall((:kjit_cache_options_init_sized, libkjit), Cint,
          (Ptr{kjit_cache_options}, Csize_t),
          opts, size)

"`void kjit_cache_options_init(kjit_cache_options* opts)`"
kjit_cache_options_init(opts) =
    ccall((:kjit_cache_options_init, libkjit), Cvoid,
          (Ptr{kjit_cache_options},),
          opts)

"`kjit_status kjit_cache_open(const kjit_cache_options* opts, kjit_cache** out)`"
kjit_cache_open(opts, out) =
    @gcsafe ccall((:kjit_cache_open, libkjit), Cint,
          (Ptr{kjit_cache_options}, Ptr{Ptr{Cvoid}}),
          opts, out)

"`void kjit_cache_close(kjit_cache* cache)`"
kjit_cache_close(cache) = @gcsafe ccall((:kjit_cache_close, libkjit), Cvoid, (Ptr{Cvoid},), cache)

"`const char* kjit_cache_directory(const kjit_cache* cache)`"
kjit_cache_directory(cache) =
    ccall((:kjit_cache_directory, libkjit), Ptr{UInt8},
          (Ptr{Cvoid},),
          cache)

"`kjit_status kjit_cache_stats_init_sized(kjit_cache_stats* stats, size_t size)`"
kjit_cache_stats_init_sized(stats, size) =
    ccall((:kjit_cache_stats_init_sized, libkjit), Cint,
          (Ptr{kjit_cache_stats}, Csize_t),
          stats, size)

"`kjit_status kjit_cache_stats_get(kjit_cache* cache, kjit_cache_stats* stats)`"
kjit_cache_stats_get(cache, stats) =
    @gcsafe ccall((:kjit_cache_stats_get, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_cache_stats}),
          cache, stats)

"`kjit_status kjit_cache_remote_info(kjit_cache* cache, int probe, const char** out)`"
kjit_cache_remote_info(cache, probe, out) =
    @gcsafe ccall((:kjit_cache_remote_info, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Ptr{Ptr{UInt8}}),
          cache, probe, out)

"`kjit_status kjit_cache_clear_memory(kjit_cache* cache)`"
kjit_cache_clear_memory(cache) =
    ccall((:kjit_cache_clear_memory, libkjit), Cint,
          (Ptr{Cvoid},),
          cache)

"`kjit_status kjit_cache_clear(kjit_cache* cache)`"
kjit_cache_clear(cache) = @gcsafe ccall((:kjit_cache_clear, libkjit), Cint, (Ptr{Cvoid},), cache)

"`kjit_status kjit_cache_get(kjit_cache* cache, const char* key_hex, kjit_binary** out)`"
kjit_cache_get(cache, key_hex, out) =
    @gcsafe ccall((:kjit_cache_get, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{Ptr{Cvoid}}),
          cache, key_hex, out)

"`kjit_status kjit_cache_put(kjit_cache* cache, const kjit_binary* binary)`"
kjit_cache_put(cache, binary) =
    @gcsafe ccall((:kjit_cache_put, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}),
          cache, binary)

"`kjit_status kjit_cache_remove(kjit_cache* cache, const char* key_hex)`"
kjit_cache_remove(cache, key_hex) =
    @gcsafe ccall((:kjit_cache_remove, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          cache, key_hex)

"`kjit_status kjit_cache_list(kjit_cache* cache, kjit_cache_list_fn fn, void* user)`"
kjit_cache_list(cache, fn, user) =
    ccall((:kjit_cache_list, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
          cache, fn, user)

"`kjit_status kjit_cache_verify(kjit_cache* cache, uint64_t* checked, uint64_t* bad)`"
kjit_cache_verify(cache, checked, bad) =
    @gcsafe ccall((:kjit_cache_verify, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{UInt64}, Ptr{UInt64}),
          cache, checked, bad)

"`kjit_status kjit_cache_prune(kjit_cache* cache, uint64_t max_bytes, uint64_t* removed)`"
kjit_cache_prune(cache, max_bytes, removed) =
    @gcsafe ccall((:kjit_cache_prune, libkjit), Cint,
          (Ptr{Cvoid}, UInt64, Ptr{UInt64}),
          cache, max_bytes, removed)

"`kjit_status kjit_cache_export(kjit_cache* cache, const char* path, uint64_t* count)`"
kjit_cache_export(cache, path, count) =
    @gcsafe ccall((:kjit_cache_export, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{UInt64}),
          cache, path, count)

"`kjit_status kjit_cache_import(kjit_cache* cache, const char* path, uint64_t* imported, uint64_t* rejected)`"
kjit_cache_import(cache, path, imported, rejected) =
    @gcsafe ccall((:kjit_cache_import, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{UInt64}, Ptr{UInt64}),
          cache, path, imported, rejected)

# ---- kernel.h --------------------------------------------------------------

"`kjit_status kjit_device_count(int* count)`"
kjit_device_count(count) = @gcsafe ccall((:kjit_device_count, libkjit), Cint, (Ptr{Cint},), count)

"`kjit_status kjit_device_arch(int device, char* out, size_t size)`"
kjit_device_arch(device, out, size) =
    @gcsafe ccall((:kjit_device_arch, libkjit), Cint,
          (Cint, Ptr{UInt8}, Csize_t),
          device, out, size)

"`kjit_status kjit_device_arch_cached(kjit_cache* cache, int device, char* out, size_t size, int* from_record)`"
kjit_device_arch_cached(cache, device, out, size, from_record) =
    @gcsafe ccall((:kjit_device_arch_cached, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Ptr{UInt8}, Csize_t, Ptr{Cint}),
          cache, device, out, size, from_record)

"`kjit_status kjit_device_name(int device, char* out, size_t size)`"
kjit_device_name(device, out, size) =
    @gcsafe ccall((:kjit_device_name, libkjit), Cint,
          (Cint, Ptr{UInt8}, Csize_t),
          device, out, size)

"`kjit_status kjit_driver_version(int* version)`"
kjit_driver_version(version) =
    @gcsafe ccall((:kjit_driver_version, libkjit), Cint,
          (Ptr{Cint},),
          version)

"`kjit_status kjit_kernel_create(kjit_compiler* compiler, const char* source, const char* name, const kjit_options* opts, int device, unsigned flags, kjit_kernel** out, kjit_binary** log_out)`"
kjit_kernel_create(compiler, source, name, opts, device, flags, out, log_out) =
    @gcsafe ccall((:kjit_kernel_create, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Cstring, Ptr{Cvoid}, Cint, Cuint, Ptr{Ptr{Cvoid}}, Ptr{Ptr{Cvoid}}),
          compiler, source, name, opts, device, flags, out, log_out)

"`kjit_status kjit_kernel_from_binary(const kjit_binary* binary, const char* name, int device, unsigned flags, kjit_kernel** out)`"
kjit_kernel_from_binary(binary, name, device, flags, out) =
    @gcsafe ccall((:kjit_kernel_from_binary, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Cint, Cuint, Ptr{Ptr{Cvoid}}),
          binary, name, device, flags, out)

"`void kjit_kernel_destroy(kjit_kernel* kernel)`"
kjit_kernel_destroy(kernel) =
    @gcsafe ccall((:kjit_kernel_destroy, libkjit), Cvoid,
          (Ptr{Cvoid},),
          kernel)

"`int kjit_kernel_load_path(const kjit_kernel* kernel)`"
kjit_kernel_load_path(kernel) =
    ccall((:kjit_kernel_load_path, libkjit), Cint,
          (Ptr{Cvoid},),
          kernel)

"`const char* kjit_kernel_symbol(const kjit_kernel* kernel)`"
kjit_kernel_symbol(kernel) =
    ccall((:kjit_kernel_symbol, libkjit), Ptr{UInt8},
          (Ptr{Cvoid},),
          kernel)

"`kjit_status kjit_kernel_param_count(const kjit_kernel* kernel, size_t* count)`"
kjit_kernel_param_count(kernel, count) =
    ccall((:kjit_kernel_param_count, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Csize_t}),
          kernel, count)

"`kjit_status kjit_kernel_param_info(const kjit_kernel* kernel, size_t index, size_t* offset, size_t* size)`"
kjit_kernel_param_info(kernel, index, offset, size) =
    ccall((:kjit_kernel_param_info, libkjit), Cint,
          (Ptr{Cvoid}, Csize_t, Ptr{Csize_t}, Ptr{Csize_t}),
          kernel, index, offset, size)

"`kjit_status kjit_kernel_param_buffer_size(const kjit_kernel* kernel, size_t* size)`"
kjit_kernel_param_buffer_size(kernel, size) =
    ccall((:kjit_kernel_param_buffer_size, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Csize_t}),
          kernel, size)

"`kjit_status kjit_kernel_attributes_init_sized(kjit_kernel_attributes* attrs, size_t size)`"
kjit_kernel_attributes_init_sized(attrs, size) =
    ccall((:kjit_kernel_attributes_init_sized, libkjit), Cint,
          (Ptr{kjit_kernel_attributes}, Csize_t),
          attrs, size)

"`kjit_status kjit_kernel_get_attributes(const kjit_kernel* kernel, kjit_kernel_attributes* attrs)`"
kjit_kernel_get_attributes(kernel, attrs) =
    ccall((:kjit_kernel_get_attributes, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_kernel_attributes}),
          kernel, attrs)

"`kjit_status kjit_kernel_set_max_dynamic_shared(kjit_kernel* kernel, int bytes)`"
kjit_kernel_set_max_dynamic_shared(kernel, bytes) =
    ccall((:kjit_kernel_set_max_dynamic_shared, libkjit), Cint,
          (Ptr{Cvoid}, Cint),
          kernel, bytes)

"`kjit_status kjit_kernel_occupancy(const kjit_kernel* kernel, int block_size, size_t dynamic_shared, int* blocks_per_sm)`"
kjit_kernel_occupancy(kernel, block_size, dynamic_shared, blocks_per_sm) =
    ccall((:kjit_kernel_occupancy, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Csize_t, Ptr{Cint}),
          kernel, block_size, dynamic_shared, blocks_per_sm)

"`kjit_status kjit_kernel_suggest_block_size(const kjit_kernel* kernel, size_t dynamic_shared, int* min_grid, int* block_size)`"
kjit_kernel_suggest_block_size(kernel, dynamic_shared, min_grid, block_size) =
    ccall((:kjit_kernel_suggest_block_size, libkjit), Cint,
          (Ptr{Cvoid}, Csize_t, Ptr{Cint}, Ptr{Cint}),
          kernel, dynamic_shared, min_grid, block_size)

"`kjit_status kjit_launch_config_init_sized(kjit_launch_config* cfg, size_t size)`"
kjit_launch_config_init_sized(cfg, size) =
    ccall((:kjit_launch_config_init_sized, libkjit), Cint,
          (Ptr{kjit_launch_config}, Csize_t),
          cfg, size)

"`void kjit_launch_config_init(kjit_launch_config* cfg)`"
kjit_launch_config_init(cfg) =
    ccall((:kjit_launch_config_init, libkjit), Cvoid,
          (Ptr{kjit_launch_config},),
          cfg)

"`kjit_status kjit_kernel_launch(kjit_kernel* kernel, const kjit_launch_config* cfg, void** args, size_t count)`"
kjit_kernel_launch(kernel, cfg, args, count) =
    @gcsafe ccall((:kjit_kernel_launch, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_launch_config}, Ptr{Ptr{Cvoid}}, Csize_t),
          kernel, cfg, args, count)

"`kjit_status kjit_kernel_launch_sized(kjit_kernel* kernel, const kjit_launch_config* cfg, void** args, const size_t* sizes, size_t count)`"
kjit_kernel_launch_sized(kernel, cfg, args, sizes, count) =
    @gcsafe ccall((:kjit_kernel_launch_sized, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_launch_config}, Ptr{Ptr{Cvoid}}, Ptr{Csize_t}, Csize_t),
          kernel, cfg, args, sizes, count)

"`kjit_status kjit_kernel_launch_packed(kjit_kernel* kernel, const kjit_launch_config* cfg, const void* buffer, size_t size)`"
kjit_kernel_launch_packed(kernel, cfg, buffer, size) =
    @gcsafe ccall((:kjit_kernel_launch_packed, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_launch_config}, Ptr{Cvoid}, Csize_t),
          kernel, cfg, buffer, size)

"`kjit_status kjit_kernel_launch_params(kjit_kernel* kernel, const kjit_launch_config* cfg, const void* params, size_t size, size_t align)`"
kjit_kernel_launch_params(kernel, cfg, params, size, align) =
    @gcsafe ccall((:kjit_kernel_launch_params, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_launch_config}, Ptr{Cvoid}, Csize_t, Csize_t),
          kernel, cfg, params, size, align)

# ---- gemm.h ----------------------------------------------------------------

"`kjit_status kjit_gemm_desc_init_sized(kjit_gemm_desc* desc, size_t size)`"
kjit_gemm_desc_init_sized(desc, size) =
    ccall((:kjit_gemm_desc_init_sized, libkjit), Cint,
          (Ptr{kjit_gemm_desc}, Csize_t),
          desc, size)

"`void kjit_gemm_desc_init(kjit_gemm_desc* desc)`"
kjit_gemm_desc_init(desc) =
    ccall((:kjit_gemm_desc_init, libkjit), Cvoid,
          (Ptr{kjit_gemm_desc},),
          desc)

"`kjit_status kjit_gemm_options_init_sized(kjit_gemm_options* opts, size_t size)`"
kjit_gemm_options_init_sized(opts, size) =
    ccall((:kjit_gemm_options_init_sized, libkjit), Cint,
          (Ptr{kjit_gemm_options}, Csize_t),
          opts, size)

"`void kjit_gemm_options_init(kjit_gemm_options* opts)`"
kjit_gemm_options_init(opts) =
    ccall((:kjit_gemm_options_init, libkjit), Cvoid,
          (Ptr{kjit_gemm_options},),
          opts)

"`kjit_status kjit_gemm_create(kjit_cache* cache, int device, const kjit_gemm_options* options, kjit_gemm** out)`"
kjit_gemm_create(cache, device, options, out) =
    @gcsafe ccall((:kjit_gemm_create, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Ptr{kjit_gemm_options}, Ptr{Ptr{Cvoid}}),
          cache, device, options, out)

"`void kjit_gemm_destroy(kjit_gemm* gemm)`"
kjit_gemm_destroy(gemm) = @gcsafe ccall((:kjit_gemm_destroy, libkjit), Cvoid, (Ptr{Cvoid},), gemm)

"`kjit_status kjit_gemm_check(const kjit_gemm_desc* desc, const void* A, const void* B, const void* C, const void* D, const void* bias)`"
kjit_gemm_check(desc, A, B, C, D, bias) =
    ccall((:kjit_gemm_check, libkjit), Cint,
          (Ptr{kjit_gemm_desc}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
          desc, A, B, C, D, bias)

"`kjit_status kjit_gemm_run(kjit_gemm* gemm, const kjit_gemm_desc* desc, const void* A, const void* B, const void* C, void* D, const void* bias, void* stream)`"
kjit_gemm_run(gemm, desc, A, B, C, D, bias, stream) =
    @gcsafe ccall((:kjit_gemm_run, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_gemm_desc}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
          gemm, desc, A, B, C, D, bias, stream)

"`kjit_status kjit_gemm_clear_plans(kjit_gemm* gemm)`"
kjit_gemm_clear_plans(gemm) = ccall((:kjit_gemm_clear_plans, libkjit), Cint, (Ptr{Cvoid},), gemm)

"`kjit_status kjit_gemm_stats_init_sized(kjit_gemm_stats* stats, size_t size)`"
kjit_gemm_stats_init_sized(stats, size) =
    ccall((:kjit_gemm_stats_init_sized, libkjit), Cint,
          (Ptr{kjit_gemm_stats}, Csize_t),
          stats, size)

"`kjit_status kjit_gemm_stats_get(const kjit_gemm* gemm, kjit_gemm_stats* stats)`"
kjit_gemm_stats_get(gemm, stats) =
    ccall((:kjit_gemm_stats_get, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_gemm_stats}),
          gemm, stats)

"`kjit_status kjit_cublaslt_version(size_t* out)`"
kjit_cublaslt_version(out) =
    @gcsafe ccall((:kjit_cublaslt_version, libkjit), Cint,
          (Ptr{Csize_t},),
          out)

# ---- grouped_gemm.h --------------------------------------------------------

"`kjit_status kjit_grouped_gemm_desc_init_sized(kjit_grouped_gemm_desc* desc, size_t size)`"
kjit_grouped_gemm_desc_init_sized(desc, size) =
    ccall((:kjit_grouped_gemm_desc_init_sized, libkjit), Cint,
          (Ptr{kjit_grouped_gemm_desc}, Csize_t),
          desc, size)

"`kjit_status kjit_grouped_gemm_options_init_sized(kjit_grouped_gemm_options* opts, size_t size)`"
kjit_grouped_gemm_options_init_sized(opts, size) =
    ccall((:kjit_grouped_gemm_options_init_sized, libkjit), Cint,
          (Ptr{kjit_grouped_gemm_options}, Csize_t),
          opts, size)

"`kjit_status kjit_grouped_gemm_create(kjit_compiler* compiler, int device, const kjit_grouped_gemm_options* options, kjit_grouped_gemm** out)`"
kjit_grouped_gemm_create(compiler, device, options, out) =
    @gcsafe ccall((:kjit_grouped_gemm_create, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Ptr{kjit_grouped_gemm_options}, Ptr{Ptr{Cvoid}}),
          compiler, device, options, out)

"`void kjit_grouped_gemm_destroy(kjit_grouped_gemm* gg)`"
kjit_grouped_gemm_destroy(gg) =
    @gcsafe ccall((:kjit_grouped_gemm_destroy, libkjit), Cvoid,
          (Ptr{Cvoid},),
          gg)

"`kjit_status kjit_grouped_gemm_check(const kjit_grouped_gemm_desc* desc, const void* A, const void* B, const int32_t* offs, const void* C, const void* D, const void* bias)`"
kjit_grouped_gemm_check(desc, A, B, offs, C, D, bias) =
    ccall((:kjit_grouped_gemm_check, libkjit), Cint,
          (Ptr{kjit_grouped_gemm_desc}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Int32}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
          desc, A, B, offs, C, D, bias)

"`kjit_status kjit_grouped_gemm_run(kjit_grouped_gemm* gg, const kjit_grouped_gemm_desc* desc, const void* A, const void* B, const int32_t* offs, const void* C, void* D, const void* bias, void* stream)`"
kjit_grouped_gemm_run(gg, desc, A, B, offs, C, D, bias, stream) =
    @gcsafe ccall((:kjit_grouped_gemm_run, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_grouped_gemm_desc}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Int32}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
          gg, desc, A, B, offs, C, D, bias, stream)

"`kjit_status kjit_grouped_gemm_run_scaled(kjit_grouped_gemm* gg, const kjit_grouped_gemm_desc* desc, const void* A, const void* B, const int32_t* offs, const void* C, void* D, const void* bias, const float* scale_a, const float* scale_b, void* stream)`"
kjit_grouped_gemm_run_scaled(gg, desc, A, B, offs, C, D, bias, scale_a, scale_b, stream) =
    @gcsafe ccall((:kjit_grouped_gemm_run_scaled, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_grouped_gemm_desc}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Int32}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cfloat}, Ptr{Cfloat}, Ptr{Cvoid}),
          gg, desc, A, B, offs, C, D, bias, scale_a, scale_b, stream)

"`kjit_status kjit_grouped_gemm_prepare(kjit_grouped_gemm* gg, const kjit_grouped_gemm_desc* desc, int with_bias)`"
kjit_grouped_gemm_prepare(gg, desc, with_bias) =
    @gcsafe ccall((:kjit_grouped_gemm_prepare, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_grouped_gemm_desc}, Cint),
          gg, desc, with_bias)

"`kjit_status kjit_grouped_gemm_plan_key(kjit_grouped_gemm* gg, const kjit_grouped_gemm_desc* desc, const void* A, const void* B, const void* C, const void* D, const void* bias, char* buf, size_t size, size_t* needed)`"
kjit_grouped_gemm_plan_key(gg, desc, A, B, C, D, bias, buf, size, needed) =
    ccall((:kjit_grouped_gemm_plan_key, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{kjit_grouped_gemm_desc}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}, Ptr{UInt8}, Csize_t, Ptr{Csize_t}),
          gg, desc, A, B, C, D, bias, buf, size, needed)

"`kjit_status kjit_grouped_gemm_offsets_status(kjit_grouped_gemm* gg)`"
kjit_grouped_gemm_offsets_status(gg) =
    ccall((:kjit_grouped_gemm_offsets_status, libkjit), Cint,
          (Ptr{Cvoid},),
          gg)

"`kjit_status kjit_grouped_gemm_compile(kjit_compiler* compiler, const char* target, const kjit_grouped_gemm_desc* desc, const kjit_grouped_gemm_options* options, int with_bias, kjit_binary** out)`"
kjit_grouped_gemm_compile(compiler, target, desc, options, with_bias, out) =
    ccall((:kjit_grouped_gemm_compile, libkjit), Cint,
          (Ptr{Cvoid}, Cstring, Ptr{kjit_grouped_gemm_desc}, Ptr{kjit_grouped_gemm_options}, Cint, Ptr{Ptr{Cvoid}}),
          compiler, target, desc, options, with_bias, out)

# ---- link.h ----------------------------------------------------------------

"`kjit_status kjit_linker_create(kjit_cache* cache, kjit_linker** out)`"
kjit_linker_create(cache, out) =
    ccall((:kjit_linker_create, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          cache, out)

"`void kjit_linker_destroy(kjit_linker* linker)`"
kjit_linker_destroy(linker) = ccall((:kjit_linker_destroy, libkjit), Cvoid, (Ptr{Cvoid},), linker)

"`kjit_status kjit_linker_set_target(kjit_linker* linker, const char* target)`"
kjit_linker_set_target(linker, target) =
    ccall((:kjit_linker_set_target, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          linker, target)

"`kjit_status kjit_linker_add_option(kjit_linker* linker, const char* option)`"
kjit_linker_add_option(linker, option) =
    ccall((:kjit_linker_add_option, libkjit), Cint,
          (Ptr{Cvoid}, Cstring),
          linker, option)

"`kjit_status kjit_linker_set_outputs(kjit_linker* linker, unsigned outputs)`"
kjit_linker_set_outputs(linker, outputs) =
    ccall((:kjit_linker_set_outputs, libkjit), Cint,
          (Ptr{Cvoid}, Cuint),
          linker, outputs)

"`kjit_status kjit_linker_add_binary(kjit_linker* linker, const kjit_binary* binary, const char* name)`"
kjit_linker_add_binary(linker, binary, name) =
    ccall((:kjit_linker_add_binary, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{UInt8}),
          linker, binary, name)

"`kjit_status kjit_linker_add_data(kjit_linker* linker, int kind, const void* data, size_t size, const char* name)`"
kjit_linker_add_data(linker, kind, data, size, name) =
    ccall((:kjit_linker_add_data, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Ptr{Cvoid}, Csize_t, Ptr{UInt8}),
          linker, kind, data, size, name)

"`kjit_status kjit_linker_add_file(kjit_linker* linker, int kind, const char* path)`"
kjit_linker_add_file(linker, kind, path) =
    ccall((:kjit_linker_add_file, libkjit), Cint,
          (Ptr{Cvoid}, Cint, Cstring),
          linker, kind, path)

"`kjit_status kjit_link(kjit_linker* linker, kjit_binary** out)`"
kjit_link(linker, out) =
    ccall((:kjit_link, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}),
          linker, out)

"`kjit_status kjit_linker_key(kjit_linker* linker, char out_hex[65])`"
kjit_linker_key(linker, out_hex) =
    ccall((:kjit_linker_key, libkjit), Cint,
          (Ptr{Cvoid}, Ptr{UInt8}),
          linker, out_hex)

"`kjit_status kjit_nvjitlink_version(const char** out)`"
kjit_nvjitlink_version(out) =
    ccall((:kjit_nvjitlink_version, libkjit), Cint,
          (Ptr{Ptr{UInt8}},),
          out)

end # module LibKJit
