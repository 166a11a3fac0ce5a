"""
    KJit

Julia bindings for libkjit: compile CUDA C++ at run time with NVRTC, keep the results in a
cache shared by every thread and process of the machine, and launch kernels.

A thin layer over the C API: `KJit.LibKJit` has one `ccall` wrapper per public C function;
the types here own one C handle each (finalizers free them; `close` frees them now), and
every failed call throws a [`KJitError`](@ref) with the status, the library's message and,
for compile errors, NVRTC's log.

Device pointers and streams are plain values (`UInt64`, `Ptr`, or any bits type of the
parameter's size, such as CUDA.jl's `CuPtr`), so the package works with or without CUDA.jl.

The library is `ENV["KJIT_LIB"]` (a path) when set, else `libkjit.so.0` from the system
loader's search path (`LD_LIBRARY_PATH`, `ldconfig`).
"""
module KJit

using Libdl

include("LibKJit.jl")

export KJitError, Cache, CacheStats, CacheEntry, Options, Compiler, Binary, PendingCompile,
       Kernel, Gemm, compile, compile_async, compile_many, compute_key, hash_source,
       hash_options, ptx, cubin, ltoir, compile_log, target, cache_key, tier, compile_ms,
       lowered_name, name_expressions, kernel_names, metadata_json, load_kernel, launch,
       launch_packed, pack_params, param_layout, device_count, device_arch, device_name,
       driver_version, nvrtc_version, set_log_callback, GroupedGemm, grouped_desc,
       grouped_check, grouped_run!, grouped_run_scaled!, grouped_prepare!, grouped_plan_key,
       grouped_offsets_status, grouped_compile

# ---- loading ------------------------------------------------------------------------------

const _lib_handle = Ref{Ptr{Cvoid}}(C_NULL)

function __init__()
    path = get(ENV, "KJIT_LIB", "")
    if !isempty(path)
        # Loaded globally first: the ccalls name "libkjit.so.0", which the dynamic loader
        # then resolves to this already loaded object (its soname).
        _lib_handle[] = Libdl.dlopen(path, Libdl.RTLD_NOW | Libdl.RTLD_GLOBAL)
    end
    v = Int(LibKJit.kjit_version())
    v ÷ 10000 == KJIT_VERSION ÷ 10000 ||
        @warn "libkjit $(version_string()) does not match the KJit bindings ($KJIT_VERSION)"
    return nothing
end

# ---- constants (values from the C headers) ------------------------------------------------

"Version of the headers these bindings follow: major * 10000 + minor * 100 + patch."
const KJIT_VERSION = 300

const KJIT_OK = 0
const KJIT_ERROR_INVALID_ARGUMENT = 1
const KJIT_ERROR_INVALID_HANDLE = 2
const KJIT_ERROR_OUT_OF_MEMORY = 3
const KJIT_ERROR_INVALID_SOURCE = 4
const KJIT_ERROR_COMPILE = 5
const KJIT_ERROR_INVALID_OPTION = 6
const KJIT_ERROR_UNSUPPORTED_TARGET = 7
const KJIT_ERROR_NAME_NOT_FOUND = 8
const KJIT_ERROR_NVRTC = 9
const KJIT_ERROR_CACHE = 10
const KJIT_ERROR_CACHE_CORRUPT = 11
const KJIT_ERROR_NOT_FOUND = 12
const KJIT_ERROR_READ_ONLY = 13
const KJIT_ERROR_CUDA_UNAVAILABLE = 14
const KJIT_ERROR_CUDA = 15
const KJIT_ERROR_ARGUMENT_MISMATCH = 16
const KJIT_ERROR_STALE_HANDLE = 17
const KJIT_ERROR_CUDA_STICKY = 18
const KJIT_ERROR_UNSUPPORTED = 19
const KJIT_ERROR_CANCELLED = 20
const KJIT_ERROR_TIMEOUT = 21
const KJIT_ERROR_BUFFER_TOO_SMALL = 22
const KJIT_ERROR_CUBLAS = 23
const KJIT_ERROR_IO = 24
const KJIT_ERROR_INTERNAL = 99

const OUTPUT_DEFAULT = 0
const OUTPUT_PTX = 1
const OUTPUT_CUBIN = 2
const OUTPUT_LTOIR = 4

const KERNEL_DEFAULT = 0
const KERNEL_NO_RELOAD = 1
const KERNEL_FORCE_PTX = 2

const _TIERS = (:compiled, :memory, :disk, :remote)
const _DISK_STATES = (:ok, :read_only, :disabled, :unavailable)

# ---- errors -------------------------------------------------------------------------------

"""
    KJitError(status, message, log)

A failed kjit call: `status` is the C status code (`KJit.KJIT_ERROR_*`), `message` says
what failed and why, `log` is NVRTC's log for compile errors ("" otherwise).
"""
struct KJitError <: Exception
    status::Int
    message::String
    log::String
end

function Base.showerror(io::IO, e::KJitError)
    print(io, "KJitError: ", status_string(e.status))
    isempty(e.message) || print(io, ": ", e.message)
    isempty(e.log) || print(io, "\n", rstrip(e.log))
end

_str(p::Ptr{UInt8}) = p == C_NULL ? "" : unsafe_string(p)

"Library name of a status, e.g. \"KJIT_ERROR_COMPILE: compilation failed\"."
status_string(status::Integer) = _str(LibKJit.kjit_status_string(status))

"""
    check(status)

The checked-call helper: returns `nothing` for `KJIT_OK`, else throws a `KJitError` with
the calling thread's `kjit_last_error()` message. Call it directly on the result of the
`LibKJit` call (`check(LibKJit.kjit_x(...))`): nothing between the two yields, so the
task cannot have moved to another thread and the message belongs to that call.
"""
@inline function check(status::Integer)
    status == KJIT_OK && return nothing
    throw(KJitError(Int(status), _str(LibKJit.kjit_last_error()), ""))
end

_closed(what) = KJitError(KJIT_ERROR_INVALID_HANDLE, "$what is closed", "")

# A C struct value with `struct_size` set, the given fields, and zeros elsewhere. Built
# here rather than with the library's *_init functions, which write the library's struct
# (possibly newer and larger than the one these bindings know).
_zero(::Type{T}) where {T<:Ptr} = T(C_NULL)
_zero(::Type{NTuple{N,T}}) where {N,T} = ntuple(_ -> _zero(T), N)
_zero(::Type{T}) where {T<:Number} = zero(T)
function _cstruct(::Type{T}; kwargs...) where {T}
    vals = map(fieldnames(T)) do f
        f === :struct_size ? UInt32(sizeof(T)) :
        haskey(kwargs, f) ? convert(fieldtype(T, f), kwargs[f]) : _zero(fieldtype(T, f))
    end
    return T(vals...)
end

# ---- library-wide functions ---------------------------------------------------------------

"Run-time library version: major * 10000 + minor * 100 + patch."
version() = Int(LibKJit.kjit_version())

"Run-time library version as \"major.minor.patch\"."
version_string() = _str(LibKJit.kjit_version_string())

"The NVRTC in use, e.g. \"13.0.88 (CL-36424714)\"."
function nvrtc_version()
    out = Ref{Ptr{UInt8}}(C_NULL)
    check(LibKJit.kjit_nvrtc_version(out))
    return _str(out[])
end

# ---- log messages ---------------------------------------------------------------------------
#
# kjit calls its log callback on whichever thread logs, its worker threads included, and
# sometimes while the calling thread is inside a GC-safe ccall. No user code runs there:
# the C callback (`_log_enqueue`) copies the message into a preallocated queue under a spin
# lock held only for the copy, allocates nothing, throws nothing, and wakes a Julia task
# with `uv_async_send` on a `Base.AsyncCondition` (the pattern the Julia manual gives for
# callbacks from foreign threads). That task (`_log_pump`) calls the user's function.

const _LOG_SLOTS = 256        # messages held between two deliveries; more are counted, dropped
const _LOG_SLOT_BYTES = 1024  # a longer message is cut there (and marked " [...]")

mutable struct _LogQueue
    lock::Threads.Atomic{Int} # 0 free, 1 held: a spin lock with no safepoint and no finalizers
    bytes::Vector{UInt8}      # _LOG_SLOTS slots of _LOG_SLOT_BYTES
    lens::Vector{Int}         # bytes used in each slot
    levels::Vector{Cint}
    cut::Vector{Bool}         # the message was longer than a slot
    head::Int                 # slot (0-based) of the oldest queued message
    count::Int                # queued messages
    dropped::Int              # messages that found the queue full
    async::Ptr{Cvoid}         # uv_async_t* of the delivery task's AsyncCondition, or C_NULL
    # The delivery task's copies, filled under the lock (no allocation while it is held).
    out_bytes::Vector{UInt8}
    out_lens::Vector{Int}
    out_levels::Vector{Cint}
    out_cut::Vector{Bool}
end

_LogQueue() = _LogQueue(Threads.Atomic{Int}(0), zeros(UInt8, _LOG_SLOTS * _LOG_SLOT_BYTES),
                        zeros(Int, _LOG_SLOTS), zeros(Cint, _LOG_SLOTS), fill(false, _LOG_SLOTS),
                        0, 0, 0, C_NULL, zeros(UInt8, _LOG_SLOTS * _LOG_SLOT_BYTES),
                        zeros(Int, _LOG_SLOTS), zeros(Cint, _LOG_SLOTS), fill(false, _LOG_SLOTS))

const _log_queue = _LogQueue()

@inline function _spin_lock(a::Threads.Atomic{Int})
    while Threads.atomic_cas!(a, 0, 1) != 0
    end
    return nothing
end

@inline _spin_unlock(a::Threads.Atomic{Int}) = (Threads.atomic_xchg!(a, 0); nothing)

# The C log callback: runs on kjit's threads. Copies and wakes, nothing else.
function _log_enqueue(level::Cint, message::Ptr{UInt8}, user::Ptr{Cvoid})::Cvoid
    q = _log_queue
    n = message == C_NULL ? 0 : Int(ccall(:strlen, Csize_t, (Ptr{UInt8},), message))
    _spin_lock(q.lock)
    if q.count == _LOG_SLOTS
        q.dropped += 1
    else
        slot = (q.head + q.count) % _LOG_SLOTS
        m = min(n, _LOG_SLOT_BYTES)
        m > 0 && unsafe_copyto!(pointer(q.bytes, slot * _LOG_SLOT_BYTES + 1), message, m)
        @inbounds q.lens[slot+1] = m
        @inbounds q.levels[slot+1] = level
        @inbounds q.cut[slot+1] = n > m
        q.count += 1
    end
    # Sent under the lock: set_log_callback(nothing) clears q.async under it before it
    # closes the condition, so no send can reach a closed handle.
    q.async == C_NULL || ccall(:uv_async_send, Cint, (Ptr{Cvoid},), q.async)
    _spin_unlock(q.lock)
    return nothing
end

# Takes the queued messages (on the delivery task): copies under the lock, builds strings after.
function _log_take!()
    q = _log_queue
    _spin_lock(q.lock)
    n, dropped = q.count, q.dropped
    for i in 0:n-1
        slot = (q.head + i) % _LOG_SLOTS
        m = @inbounds q.lens[slot+1]
        m > 0 && unsafe_copyto!(pointer(q.out_bytes, i * _LOG_SLOT_BYTES + 1),
                                pointer(q.bytes, slot * _LOG_SLOT_BYTES + 1), m)
        @inbounds q.out_lens[i+1] = m
        @inbounds q.out_levels[i+1] = q.levels[slot+1]
        @inbounds q.out_cut[i+1] = q.cut[slot+1]
    end
    q.head, q.count, q.dropped = 0, 0, 0
    _spin_unlock(q.lock)
    msgs = Vector{Tuple{Int,String}}(undef, n)
    for i in 1:n
        text = GC.@preserve q unsafe_string(pointer(q.out_bytes, (i - 1) * _LOG_SLOT_BYTES + 1),
                                            q.out_lens[i])
        msgs[i] = (Int(q.out_levels[i]), q.out_cut[i] ? text * " [...]" : text)
    end
    dropped > 0 && push!(msgs, (2, "kjit: $dropped log message(s) dropped (more than " *
                                   "$_LOG_SLOTS between two deliveries)"))
    return msgs
end

const _log_callback = Ref{Any}(nothing)
const _log_async = Ref{Any}(nothing)      # the delivery task's AsyncCondition
const _log_setup = ReentrantLock()

# One taker at a time: the delivery task and set_log_callback(nothing) share the copies.
const _log_drain = ReentrantLock()

function _log_deliver()
    msgs = lock(_log_take!, _log_drain)
    for (level, message) in msgs
        f = _log_callback[]
        f === nothing && continue
        try
            f(level, message)
        catch e
            @error "KJit log callback threw" exception = (e, catch_backtrace())
        end
    end
end

# The delivery task: waits for uv_async_send, delivers, until the condition is closed.
function _log_pump(cond::Base.AsyncCondition)
    while isopen(cond)
        try
            wait(cond)
        catch e
            e isa EOFError || rethrow()
        end
        _log_deliver()
    end
end

"""
    set_log_callback(f)

Route the library's diagnostics to `f(level::Int, message::String)` (level 0 debug ...
3 error); `nothing` restores the default (stderr when `KJIT_LOG` is set).

`f` never runs on kjit's threads: the library's callback only queues the message (up to
$_LOG_SLOTS between deliveries, each cut at $_LOG_SLOT_BYTES bytes; more are counted and
reported as dropped) and wakes a Julia task that calls `f`. So `f` may allocate, print,
log and even call kjit, but it runs a little after the event, and a message logged just
before the process exits may not be delivered.
"""
function set_log_callback(f)
    lock(_log_setup) do
        q = _log_queue
        if f === nothing
            LibKJit.kjit_set_log_callback(C_NULL, C_NULL)
            cond = _log_async[]
            if cond !== nothing
                _spin_lock(q.lock)
                q.async = C_NULL
                _spin_unlock(q.lock)
                _log_deliver()               # what was queued goes to the old callback
                _log_callback[] = nothing
                close(cond)
                _log_async[] = nothing
            end
            _log_callback[] = nothing
        else
            _log_callback[] = f
            if _log_async[] === nothing
                cond = Base.AsyncCondition()
                _log_async[] = cond
                _spin_lock(q.lock)
                q.async = Base.unsafe_convert(Ptr{Cvoid}, cond)  # its uv_async_t*
                _spin_unlock(q.lock)
                errormonitor(Threads.@spawn _log_pump(cond))
            end
            cb = @cfunction(_log_enqueue, Cvoid, (Cint, Ptr{UInt8}, Ptr{Cvoid}))
            LibKJit.kjit_set_log_callback(cb, C_NULL)
        end
    end
    return nothing
end

"SHA-256 of `data` as 64 lowercase hex digits."
function hash_source(data::Union{AbstractString,AbstractVector{UInt8}})
    bytes = data isa AbstractString ? Vector{UInt8}(codeunits(String(data))) : Vector{UInt8}(data)
    out = zeros(UInt8, 65)
    GC.@preserve bytes out begin
        check(LibKJit.kjit_hash_source(pointer(bytes), length(bytes), pointer(out)))
    end
    return String(out[1:64])
end

"SHA-256 over a length-prefixed, order-sensitive encoding of `options`."
function hash_options(options::AbstractVector{<:AbstractString})
    strs = [_cstring(s) for s in options]
    ptrs = Ptr{UInt8}[pointer(s) for s in strs]
    out = zeros(UInt8, 65)
    GC.@preserve strs ptrs out begin
        check(LibKJit.kjit_hash_options(pointer(ptrs), length(ptrs), pointer(out)))
    end
    return String(out[1:64])
end

function _cstring(s::AbstractString)
    str = String(s)
    occursin('\0', str) && throw(KJitError(KJIT_ERROR_INVALID_ARGUMENT, "string contains a NUL byte", ""))
    return str
end

# ---- devices ------------------------------------------------------------------------------

"Number of CUDA devices; throws `KJitError` with `KJIT_ERROR_CUDA_UNAVAILABLE` without a driver."
function device_count()
    n = Ref{Cint}(0)
    check(LibKJit.kjit_device_count(n))
    return Int(n[])
end

function _device_string(f, device::Integer)
    buf = zeros(UInt8, 256)
    GC.@preserve buf begin
        check(f(device, pointer(buf), length(buf)))
    end
    return String(buf[1:something(findfirst(==(0x00), buf), 257)-1])
end

"Exact architecture of a device as an NVRTC target, e.g. \"sm_90\"."
device_arch(device::Integer=0) = _device_string(LibKJit.kjit_device_arch, device)

"Device name, e.g. \"NVIDIA H200\"."
device_name(device::Integer=0) = _device_string(LibKJit.kjit_device_name, device)

"CUDA driver version, e.g. 13000."
function driver_version()
    v = Ref{Cint}(0)
    check(LibKJit.kjit_driver_version(v))
    return Int(v[])
end

# ---- cache --------------------------------------------------------------------------------

"""
    Cache(; directory=nothing, max_size_bytes=0, memory_max_bytes=0, read_only=false,
            memory_only=false)

The persistent kernel cache: an in-process memory tier over one SQLite database shared by
every thread and process of the machine. Opening never fails because of the disk (an
unusable directory gives a memory-only cache; `stats(c).message` says why). Safe to share
between tasks and threads. `close(c)` after closing the compilers that use it.
"""
mutable struct Cache
    handle::Ptr{Cvoid}
    users::Threads.Atomic{Int}  # open compilers bound to this cache
    close_requested::Bool       # finalized while compilers were open: the last one closes it

    function Cache(; directory::Union{AbstractString,Nothing}=nothing, max_size_bytes::Integer=0,
                   memory_max_bytes::Integer=0, read_only::Bool=false, memory_only::Bool=false,
                   remote_url::Union{AbstractString,Nothing}=nothing, remote_read_only::Bool=false)
        dir = directory === nothing ? nothing : _cstring(directory)
        remote = remote_url === nothing ? nothing : _cstring(remote_url)
        out = Ref{Ptr{Cvoid}}(C_NULL)
        GC.@preserve dir remote begin
            o = _cstruct(LibKJit.kjit_cache_options;
                         directory=dir === nothing ? Ptr{UInt8}(C_NULL) : pointer(dir),
                         max_size_bytes=max_size_bytes, memory_max_bytes=memory_max_bytes,
                         read_only=Cint(read_only), memory_only=Cint(memory_only),
                         remote_url=remote === nothing ? Ptr{UInt8}(C_NULL) : pointer(remote),
                         remote_read_only=Cint(remote_read_only))
            check(LibKJit.kjit_cache_open(Ref(o), out))
        end
        c = new(out[], Threads.Atomic{Int}(0), false)
        return finalizer(_finalize_cache, c)
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, c::Cache) = c.handle

function _close_cache!(c::Cache)
    h = c.handle
    c.handle = C_NULL
    h == C_NULL || LibKJit.kjit_cache_close(h)
    return nothing
end

function _finalize_cache(c::Cache)
    if c.users[] > 0
        c.close_requested = true
    else
        _close_cache!(c)
    end
    return nothing
end

"Close the cache. Throws while compilers created with it are still open."
function Base.close(c::Cache)
    n = c.users[]
    n > 0 && throw(KJitError(KJIT_ERROR_INVALID_ARGUMENT,
                             "cache still used by $n open compiler(s): close them first", ""))
    _close_cache!(c)
end

Base.isopen(c::Cache) = c.handle != C_NULL

"Directory of the cache (\"\" for a memory-only cache)."
directory(c::Cache) = _str(LibKJit.kjit_cache_directory(c))

"""
Counters and sizes of a cache handle (`kjit_cache_stats`); `disk_state` is a Symbol.
`not_stored` counts compiles whose result was not stored because NVRTC read a file the
cache key does not cover (the log says which); the caller still got the result, and such
a program is compiled again on every request. The `total_*` fields count every process
that has used the cache database, this one included.
"""
struct CacheStats
    disk_state::Symbol
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
    compile_ms_saved::Float64
    memory_entries::UInt64
    memory_bytes::UInt64
    disk_entries::UInt64
    disk_bytes::UInt64
    max_size_bytes::UInt64
    remote_errors::UInt64
    remote_timeouts::UInt64
    message::String
    not_stored::UInt64
    pch_created::UInt64
    pch_used::UInt64
    pch_failed::UInt64
    remote_claims::UInt64
    remote_claim_waits::UInt64
    remote_claim_wait_hits::UInt64
    remote_claim_wait_timeouts::UInt64
    total_memory_hits::UInt64
    total_disk_hits::UInt64
    total_remote_hits::UInt64
    total_misses::UInt64
    total_compiles::UInt64
    total_corrupt_entries::UInt64
    total_evictions::UInt64
    total_remote_errors::UInt64
    total_remote_timeouts::UInt64
    total_compile_ms_saved::Float64
    total_not_stored::UInt64
    total_pch_created::UInt64
    total_pch_used::UInt64
    total_pch_failed::UInt64
    total_remote_claims::UInt64
    total_remote_claim_waits::UInt64
    total_remote_claim_wait_hits::UInt64
    total_remote_claim_wait_timeouts::UInt64
end

function stats(c::Cache)
    r = Ref(_cstruct(LibKJit.kjit_cache_stats))
    check(LibKJit.kjit_cache_stats_get(c, r))
    s = r[]
    msg = UInt8[reinterpret(UInt8, ch) for ch in s.message]
    state = 0 <= s.disk_state < 4 ? _DISK_STATES[s.disk_state+1] : Symbol("state_$(s.disk_state)")
    message = String(msg[1:something(findfirst(==(0x00), msg), length(msg) + 1)-1])
    # Every other field is the C struct's field of the same name.
    field(f) = f === :disk_state ? state : f === :message ? message : getfield(s, f)
    return CacheStats(map(field, fieldnames(CacheStats))...)
end

"Drop the in-process memory tier; the disk is untouched."
clear_memory!(c::Cache) = check(LibKJit.kjit_cache_clear_memory(c))

"Remove every entry from both tiers."
clear!(c::Cache) = check(LibKJit.kjit_cache_clear(c))

"The entry stored under `key` (64 hex digits), checksums verified."
function lookup(c::Cache, key::AbstractString)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(LibKJit.kjit_cache_get(c, key, out))
    return Binary(out[])
end

"Remove one entry from both tiers (`KJIT_ERROR_NOT_FOUND` if it was not there)."
Base.delete!(c::Cache, key::AbstractString) = (check(LibKJit.kjit_cache_remove(c, key)); c)

"One disk entry as listed by [`list_entries`](@ref)."
struct CacheEntry
    key::String
    target::String
    kernels::Vector{String}
    bytes::UInt64
    created::Int64
    last_used::Int64
    compile_ms::Float64
end

function _list_callback(info::Ptr{LibKJit.kjit_cache_entry_info}, user::Ptr{Cvoid})::Cint
    entries = unsafe_pointer_to_objref(user)::Vector{CacheEntry}
    i = unsafe_load(info)
    k = _str(i.kernels)
    push!(entries, CacheEntry(_str(i.key), _str(i.target),
                              isempty(k) ? String[] : String.(split(k, ',')),
                              i.bytes, i.created, i.last_used, i.compile_ms))
    return Cint(0)
end

"Every disk entry, most recently used first."
function list_entries(c::Cache)
    entries = CacheEntry[]
    cb = @cfunction(_list_callback, Cint, (Ptr{LibKJit.kjit_cache_entry_info}, Ptr{Cvoid}))
    GC.@preserve entries begin
        check(LibKJit.kjit_cache_list(c, cb, pointer_from_objref(entries)))
    end
    return entries
end

"Check every disk entry (bad ones are removed); returns `(checked, bad)`."
function verify(c::Cache)
    checked, bad = Ref{UInt64}(0), Ref{UInt64}(0)
    check(LibKJit.kjit_cache_verify(c, checked, bad))
    return (Int(checked[]), Int(bad[]))
end

"Evict least-recently-used entries until the disk tier holds at most `max_bytes`; returns the count."
function prune!(c::Cache, max_bytes::Integer)
    removed = Ref{UInt64}(0)
    check(LibKJit.kjit_cache_prune(c, max_bytes, removed))
    return Int(removed[])
end

"Write every disk entry to one export file (signed when `KJIT_EXPORT_KEY` is set); returns the count."
function export_entries(c::Cache, path::AbstractString)
    n = Ref{UInt64}(0)
    check(LibKJit.kjit_cache_export(c, path, n))
    return Int(n[])
end

"""Read an export file (entries are verified; with `KJIT_EXPORT_KEY` set, only signed ones
are accepted); returns `(imported, rejected)`. An export file is trusted input: importing
someone else's is running their code."""
function import_entries!(c::Cache, path::AbstractString)
    imported, rejected = Ref{UInt64}(0), Ref{UInt64}(0)
    check(LibKJit.kjit_cache_import(c, path, imported, rejected))
    return (Int(imported[]), Int(rejected[]))
end

# ---- options ------------------------------------------------------------------------------

"""
    Options(; target=nothing, device=nothing, outputs=nothing, name=nothing, options=(),
              defines=(), include_paths=(), headers=(), name_expressions=())

Compile options builder. `defines` holds names or `name => value` pairs, `headers` holds
`name => contents` pairs. Any number of concurrent compiles may use one `Options`, but it
must not be changed while they run.
"""
mutable struct Options
    handle::Ptr{Cvoid}

    function Options(handle::Ptr{Cvoid})
        return finalizer(close, new(handle))
    end
end

function Options(; target=nothing, device=nothing, outputs=nothing, name=nothing, options=(),
                 defines=(), include_paths=(), headers=(), name_expressions=())
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(LibKJit.kjit_options_create(out))
    o = Options(out[])
    target === nothing || set_target!(o, target)
    device === nothing || set_device!(o, device)
    outputs === nothing || set_outputs!(o, outputs)
    name === nothing || set_name!(o, name)
    foreach(s -> add_option!(o, s), options)
    for d in defines
        d isa Pair ? add_define!(o, first(d), last(d)) : add_define!(o, d)
    end
    foreach(p -> add_include_path!(o, p), include_paths)
    foreach(h -> add_header!(o, first(h), last(h)), headers)
    foreach(e -> add_name_expression!(o, e), name_expressions)
    return o
end

function Base.unsafe_convert(::Type{Ptr{Cvoid}}, o::Options)
    o.handle == C_NULL && throw(_closed("options"))
    return o.handle
end

function Base.close(o::Options)
    h = o.handle
    o.handle = C_NULL
    h == C_NULL || LibKJit.kjit_options_destroy(h)
    return nothing
end

"Deep copy."
function Base.copy(o::Options)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(LibKJit.kjit_options_clone(o, out))
    return Options(out[])
end

set_target!(o::Options, t::AbstractString) = (check(LibKJit.kjit_options_set_target(o, t)); o)
set_device!(o::Options, d::Integer) = (check(LibKJit.kjit_options_set_device(o, d)); o)
set_outputs!(o::Options, m::Integer) = (check(LibKJit.kjit_options_set_outputs(o, m)); o)
set_name!(o::Options, n::AbstractString) = (check(LibKJit.kjit_options_set_name(o, n)); o)
"CUDA toolkit whose headers are found without -I: `nothing` automatic, \"\" off, or a root."
function set_toolkit!(o::Options, root::Union{Nothing,AbstractString})
    check(root === nothing ? LibKJit.kjit_options_set_toolkit(o, C_NULL) :
          LibKJit.kjit_options_set_toolkit(o, root))
    return o
end
"Automatic precompiled headers for header-heavy programs (default on)."
set_pch!(o::Options, enabled::Bool) = (check(LibKJit.kjit_options_set_pch(o, enabled ? 1 : 0)); o)
"The automatically found CUDA toolkit's include directories, in search order."
toolkit_include_dirs() = filter(!isempty, split(unsafe_string(LibKJit.kjit_toolkit_include_path()), ':'))
add_option!(o::Options, s::AbstractString) = (check(LibKJit.kjit_options_add(o, s)); o)
function add_define!(o::Options, name::AbstractString, value=nothing)
    v = value === nothing ? nothing : _cstring(string(value))
    GC.@preserve v begin
        check(LibKJit.kjit_options_add_define(o, name, v === nothing ? Ptr{UInt8}(C_NULL) : pointer(v)))
    end
    return o
end
add_include_path!(o::Options, p::AbstractString) = (check(LibKJit.kjit_options_add_include_path(o, p)); o)
add_header!(o::Options, n::AbstractString, c::AbstractString) = (check(LibKJit.kjit_options_add_header(o, n, c)); o)
add_name_expression!(o::Options, e::AbstractString) = (check(LibKJit.kjit_options_add_name_expression(o, e)); o)

_opts_ptr(::Nothing) = C_NULL
function _opts_ptr(o::Options)
    o.handle == C_NULL && throw(_closed("options"))
    return o.handle
end

"The cache key `compile` would use for `(source, options)`, without compiling."
function compute_key(source::AbstractString; options::Union{Options,Nothing}=nothing)
    out = zeros(UInt8, 65)
    GC.@preserve options out begin
        check(LibKJit.kjit_compute_key(source, _opts_ptr(options), pointer(out)))
    end
    return String(out[1:64])
end

# ---- binaries -----------------------------------------------------------------------------

"""
A compiled result: immutable, safe to share between tasks and threads. Accessors return
copies (`ptx`, `cubin`, `ltoir`, `compile_log`, `target`, `cache_key`, `tier`, ...).
"""
mutable struct Binary
    handle::Ptr{Cvoid}

    function Binary(handle::Ptr{Cvoid})
        return finalizer(close, new(handle))
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, b::Binary) = b.handle

function Base.close(b::Binary)
    h = b.handle
    b.handle = C_NULL
    h == C_NULL || LibKJit.kjit_binary_destroy(h)
    return nothing
end

"Store a successful binary under its own key."
Base.put!(c::Cache, b::Binary) = check(LibKJit.kjit_cache_put(c, b))

"Status of the binary: `KJIT_OK` for a usable one."
binary_status(b::Binary) = Int(LibKJit.kjit_binary_status(b))

"Bytes of one output (`OUTPUT_PTX`, `OUTPUT_CUBIN`, `OUTPUT_LTOIR`), or `nothing`."
function data(b::Binary, kind::Integer)
    size = Ref{Csize_t}(0)
    return GC.@preserve b begin
        p = LibKJit.kjit_binary_data(b, kind, size)
        p == C_NULL ? nothing : copy(unsafe_wrap(Array, Ptr{UInt8}(p), Int(size[])))
    end
end

"PTX text, or `nothing`."
ptx(b::Binary) = (d = data(b, OUTPUT_PTX); d === nothing ? nothing : String(d))
cubin(b::Binary) = data(b, OUTPUT_CUBIN)
ltoir(b::Binary) = data(b, OUTPUT_LTOIR)

"NVRTC's log (warnings on success)."
compile_log(b::Binary) = GC.@preserve b _str(LibKJit.kjit_binary_log(b))
"Exact target compiled for, e.g. \"sm_90\"."
target(b::Binary) = GC.@preserve b _str(LibKJit.kjit_binary_target(b))
"Cache key: 64 lowercase hex digits."
cache_key(b::Binary) = GC.@preserve b _str(LibKJit.kjit_binary_key(b))
"Metadata as a JSON object (a String)."
metadata_json(b::Binary) = GC.@preserve b _str(LibKJit.kjit_binary_metadata_json(b))
"Milliseconds NVRTC took when this result was first compiled."
compile_ms(b::Binary) = Float64(LibKJit.kjit_binary_compile_ms(b))

"Where the binary came from: `:compiled`, `:memory`, `:disk` or `:remote`."
function tier(b::Binary)
    t = Int(LibKJit.kjit_binary_tier(b))
    return 0 <= t < 4 ? _TIERS[t+1] : Symbol("tier_$t")
end

"Lowered (mangled) name of a name expression given at compile time, or `nothing`."
function lowered_name(b::Binary, expr::AbstractString)
    return GC.@preserve b begin
        p = LibKJit.kjit_binary_lowered_name(b, expr)
        p == C_NULL ? nothing : unsafe_string(p)
    end
end

"`expression => lowered name` pairs, in order."
function name_expressions(b::Binary)
    return GC.@preserve b begin
        n = Int(LibKJit.kjit_binary_name_count(b))
        [_str(LibKJit.kjit_binary_name_expression(b, i)) =>
         _str(LibKJit.kjit_binary_lowered_name_at(b, i)) for i in 0:n-1]
    end
end

"`__global__` entry points found in the PTX, in order."
function kernel_names(b::Binary)
    return GC.@preserve b begin
        n = Int(LibKJit.kjit_binary_kernel_count(b))
        [_str(LibKJit.kjit_binary_kernel_name(b, i)) for i in 0:n-1]
    end
end

# ---- compiler -----------------------------------------------------------------------------

"""
    Compiler(cache=nothing; threads=0)

The NVRTC front end; with a cache, every compile goes through it. Safe to share between
tasks and threads. `threads` bounds the worker pool of async/many compiles (0 = cores).
"""
mutable struct Compiler
    handle::Ptr{Cvoid}
    cache::Union{Cache,Nothing}  # keeps the cache alive and open while the compiler lives

    function Compiler(cache::Union{Cache,Nothing}=nothing; threads::Integer=0)
        cache !== nothing && cache.handle == C_NULL && throw(_closed("cache"))
        out = Ref{Ptr{Cvoid}}(C_NULL)
        check(LibKJit.kjit_compiler_create(cache === nothing ? C_NULL : cache.handle, threads, out))
        cache === nothing || Threads.atomic_add!(cache.users, 1)
        return finalizer(close, new(out[], cache))
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, c::Compiler) = c.handle

function Base.close(c::Compiler)
    h = c.handle
    h == C_NULL && return nothing
    c.handle = C_NULL
    LibKJit.kjit_compiler_destroy(h)
    cache = c.cache
    c.cache = nothing
    if cache !== nothing && Threads.atomic_sub!(cache.users, 1) == 1 && cache.close_requested
        _close_cache!(cache)
    end
    return nothing
end

# On KJIT_ERROR_COMPILE the library hands back a binary holding the log: read it into the
# error and free it. The message is read first, before any other kjit call.
function _compile_result(status::Integer, ptr::Ptr{Cvoid})
    status == KJIT_OK && return Binary(ptr)
    msg = _str(LibKJit.kjit_last_error())
    log = ""
    if ptr != C_NULL
        log = _str(LibKJit.kjit_binary_log(ptr))
        LibKJit.kjit_binary_destroy(ptr)
    end
    throw(KJitError(Int(status), msg, log))
end

"""
    compile(compiler, source; options=nothing) -> Binary

Compile (or hit the cache). A compile error throws `KJitError` with status
`KJIT_ERROR_COMPILE` and NVRTC's log in `log`.
"""
function compile(c::Compiler, source::AbstractString; options::Union{Options,Nothing}=nothing)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    st = GC.@preserve options LibKJit.kjit_compile(c, source, _opts_ptr(options), out)
    return _compile_result(st, out[])
end

"A compile running on the compiler's worker pool; `close` cancels it if still running."
mutable struct PendingCompile
    handle::Ptr{Cvoid}

    function PendingCompile(handle::Ptr{Cvoid})
        return finalizer(close, new(handle))
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, f::PendingCompile) = f.handle

function Base.close(f::PendingCompile)
    h = f.handle
    f.handle = C_NULL
    h == C_NULL || LibKJit.kjit_future_destroy(h)
    return nothing
end

"Start a compile on the worker pool; `wait` for its `Binary`."
function compile_async(c::Compiler, source::AbstractString; options::Union{Options,Nothing}=nothing)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    GC.@preserve options begin
        check(LibKJit.kjit_compile_async(c, source, _opts_ptr(options), out))
    end
    return PendingCompile(out[])
end

"""
    wait(f::PendingCompile; timeout_ms=-1) -> Binary

Wait up to `timeout_ms` (negative = forever) and return what `compile` would have; throws
`KJIT_ERROR_TIMEOUT` when not done yet. The result can be taken once. Blocks the calling
thread inside the library.
"""
function Base.wait(f::PendingCompile; timeout_ms::Integer=-1)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    st = LibKJit.kjit_future_wait(f, timeout_ms, out)
    return _compile_result(st, out[])
end

Base.isready(f::PendingCompile) = LibKJit.kjit_future_ready(f) == 1
cancel(f::PendingCompile) = check(LibKJit.kjit_future_cancel(f))

"""
    compile_many(compiler, sources; options=nothing) -> Vector{Union{Binary,KJitError}}

Compile `sources` in parallel; `options` is `nothing` or one `Options`/`nothing` per source.
Argument errors (detected before anything runs) are thrown.
"""
function compile_many(c::Compiler, sources::AbstractVector{<:AbstractString}; options=nothing)
    n = length(sources)
    options === nothing || length(options) == n ||
        throw(KJitError(KJIT_ERROR_INVALID_ARGUMENT, "$n sources but $(length(options)) options", ""))
    strs = String[_cstring(s) for s in sources]
    srcs = Ptr{UInt8}[pointer(s) for s in strs]
    opts = options === nothing ? Ptr{Cvoid}[] : Ptr{Cvoid}[_opts_ptr(o) for o in options]
    outs = fill(C_NULL, n)
    statuses = zeros(Cint, n)
    local st, msg
    GC.@preserve strs srcs options opts outs statuses begin
        st = LibKJit.kjit_compile_many(c, n, pointer(srcs),
                                       options === nothing ? Ptr{Ptr{Cvoid}}(C_NULL) : pointer(opts),
                                       pointer(outs), pointer(statuses))
        msg = _str(LibKJit.kjit_last_error())
    end
    if st != KJIT_OK && all(==(0), statuses) && all(==(C_NULL), outs)
        throw(KJitError(Int(st), msg, ""))
    end
    first_failed = findfirst(!=(0), statuses)
    results = Vector{Union{Binary,KJitError}}(undef, n)
    for i in 1:n
        if statuses[i] == KJIT_OK
            results[i] = Binary(outs[i])
        else
            log = ""
            if outs[i] != C_NULL
                log = _str(LibKJit.kjit_binary_log(outs[i]))
                LibKJit.kjit_binary_destroy(outs[i])
            end
            results[i] = KJitError(Int(statuses[i]), i == first_failed ? msg : "", log)
        end
    end
    return results
end

# ---- kernels ------------------------------------------------------------------------------

"""
A loaded, launchable kernel. Any number of tasks and threads may launch one `Kernel` at
once; `close` it when done (not while launches of it run).
"""
mutable struct Kernel
    handle::Ptr{Cvoid}
    params::Vector{Tuple{Int,Int}}  # (offset, size) of each parameter in the packed buffer
    buffer_size::Int

    function Kernel(handle::Ptr{Cvoid})
        k = finalizer(close, new(handle, Tuple{Int,Int}[], 0))
        n = Ref{Csize_t}(0)
        check(LibKJit.kjit_kernel_param_count(k, n))
        for i in 0:Int(n[])-1
            off, sz = Ref{Csize_t}(0), Ref{Csize_t}(0)
            check(LibKJit.kjit_kernel_param_info(k, i, off, sz))
            push!(k.params, (Int(off[]), Int(sz[])))
        end
        total = Ref{Csize_t}(0)
        check(LibKJit.kjit_kernel_param_buffer_size(k, total))
        k.buffer_size = Int(total[])
        return k
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, k::Kernel) = k.handle

function Base.close(k::Kernel)
    h = k.handle
    k.handle = C_NULL
    h == C_NULL || LibKJit.kjit_kernel_destroy(h)
    return nothing
end

"""
    Kernel(compiler, source, name; options=nothing, device=0, flags=KERNEL_DEFAULT)

Compile-or-hit `source` for `device` and load the kernel `name` (an extern "C" name, a
mangled name, or a name expression).
"""
function Kernel(c::Compiler, source::AbstractString, name::AbstractString;
                options::Union{Options,Nothing}=nothing, device::Integer=0,
                flags::Integer=KERNEL_DEFAULT)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    log = Ref{Ptr{Cvoid}}(C_NULL)
    st = GC.@preserve options LibKJit.kjit_kernel_create(c, source, name, _opts_ptr(options),
                                                          device, flags, out, log)
    if st != KJIT_OK
        _compile_result(st, log[])  # throws, with the log when there is one
    end
    log[] == C_NULL || LibKJit.kjit_binary_destroy(log[])
    return Kernel(out[])
end

"Load kernel `name` from a compiled binary onto `device`."
function load_kernel(b::Binary, name::AbstractString; device::Integer=0, flags::Integer=KERNEL_DEFAULT)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    check(LibKJit.kjit_kernel_from_binary(b, name, device, flags, out))
    return Kernel(out[])
end

"How the code was loaded: `:cubin` or `:ptx`."
function load_path(k::Kernel)
    p = Int(LibKJit.kjit_kernel_load_path(k))
    return p == 0 ? :cubin : p == 1 ? :ptx : Symbol("load_path_$p")
end

"Mangled symbol of the loaded function."
symbol(k::Kernel) = GC.@preserve k _str(LibKJit.kjit_kernel_symbol(k))

"`(offset, size)` of each parameter in the packed buffer, and the buffer's total size."
param_layout(k::Kernel) = (copy(k.params), k.buffer_size)

"Kernel attributes as a NamedTuple."
function attributes(k::Kernel)
    r = Ref(_cstruct(LibKJit.kjit_kernel_attributes))
    check(LibKJit.kjit_kernel_get_attributes(k, r))
    a = r[]
    return (num_regs=Int(a.num_regs), static_shared_bytes=Int(a.static_shared_bytes),
            const_bytes=Int(a.const_bytes), local_bytes=Int(a.local_bytes),
            max_threads_per_block=Int(a.max_threads_per_block),
            max_dynamic_shared_bytes=Int(a.max_dynamic_shared_bytes),
            ptx_version=Int(a.ptx_version), binary_version=Int(a.binary_version))
end

"Raise the kernel's maximum dynamic shared memory."
set_max_dynamic_shared!(k::Kernel, bytes::Integer) = check(LibKJit.kjit_kernel_set_max_dynamic_shared(k, bytes))

"Maximum active blocks per SM."
function occupancy(k::Kernel, block_size::Integer, dynamic_shared::Integer=0)
    n = Ref{Cint}(0)
    check(LibKJit.kjit_kernel_occupancy(k, block_size, dynamic_shared, n))
    return Int(n[])
end

"`(min_grid, block_size)` that maximises occupancy."
function suggest_block_size(k::Kernel, dynamic_shared::Integer=0)
    g, b = Ref{Cint}(0), Ref{Cint}(0)
    check(LibKJit.kjit_kernel_suggest_block_size(k, dynamic_shared, g, b))
    return (Int(g[]), Int(b[]))
end

_dim3(x::Integer) = (UInt32(x), UInt32(1), UInt32(1))
_dim3(x::NTuple{1,Integer}) = (UInt32(x[1]), UInt32(1), UInt32(1))
_dim3(x::NTuple{2,Integer}) = (UInt32(x[1]), UInt32(x[2]), UInt32(1))
_dim3(x::NTuple{3,Integer}) = (UInt32(x[1]), UInt32(x[2]), UInt32(x[3]))

# ---- streams ------------------------------------------------------------------------------
#
# `stream=nothing`, the default of every launch and of gemm_run!, is CUDA.jl's task-local
# stream (`CUDA.stream()`) when CUDA.jl is loaded: the package extension KJitCUDAExt sets
# `_default_stream`. Without CUDA.jl it is the legacy NULL stream, which serialises with
# every other blocking stream of the context; the first such launch warns. `stream=C_NULL`
# asks for the legacy stream explicitly (no warning).

"Set by the CUDA.jl extension: a function returning the task-local stream's handle."
const _default_stream = Ref{Any}(nothing)

function _stream(::Nothing)
    f = _default_stream[]
    f === nothing || return Ptr{Cvoid}(f())
    @warn("KJit: launching on the legacy NULL stream (CUDA.jl is not loaded). Load CUDA.jl " *
          "to launch on its task-local stream, or pass stream= (C_NULL for this one) " *
          "to choose.", maxlog = 1)
    return C_NULL
end
_stream(s::Ptr) = Ptr{Cvoid}(s)
_stream(s::Integer) = Ptr{Cvoid}(UInt(s))

function _launch_config(grid, block, shared_bytes, stream, cluster, cooperative)
    return _cstruct(LibKJit.kjit_launch_config; grid=_dim3(grid), block=_dim3(block),
                    shared_bytes=shared_bytes, stream=_stream(stream),
                    cluster=cluster === nothing ? (UInt32(0), UInt32(0), UInt32(0)) : _dim3(cluster),
                    cooperative=Cint(cooperative))
end

"""
    pack_params(kernel, args...) -> Vector{UInt8}

Lay `args` out in a packed parameter buffer. Each argument must be a bits value whose
size equals its parameter's: `Int32`, `Float32`, `UInt64` device addresses, `Ptr`s,
CUDA.jl `CuPtr`s, `NTuple`s or bits structs passed by value.
"""
function pack_params(k::Kernel, args...)
    length(args) == length(k.params) ||
        throw(KJitError(KJIT_ERROR_ARGUMENT_MISMATCH,
                        "kernel $(symbol(k)) has $(length(k.params)) parameters, $(length(args)) arguments given", ""))
    buf = zeros(UInt8, k.buffer_size)
    GC.@preserve buf begin
        for (i, a) in enumerate(args)
            off, sz = k.params[i]
            isbits(a) || throw(KJitError(KJIT_ERROR_ARGUMENT_MISMATCH,
                                         "argument $i: $(typeof(a)) is not a bits type", ""))
            sizeof(a) == sz || throw(KJitError(KJIT_ERROR_ARGUMENT_MISMATCH,
                                               "argument $i: kernel expects $sz bytes, $(typeof(a)) has $(sizeof(a))", ""))
            unsafe_store!(Ptr{typeof(a)}(pointer(buf) + off), a)
        end
    end
    return buf
end

"""
    launch_packed(kernel, buffer; grid=1, block=1, shared_bytes=0, stream=nothing,
                  cluster=nothing, cooperative=false)

Launch with a packed parameter buffer (see [`pack_params`](@ref)); its length must equal
the kernel's parameter buffer size. Asynchronous on `stream`: a `Ptr` or integer handle
(`stream.handle` of a CUDA.jl `CuStream`, or the `CuStream` itself with CUDA.jl loaded).

!!! warning "The default stream"
    `stream=nothing` (the default) is CUDA.jl's task-local stream, `CUDA.stream()`, when
    CUDA.jl is loaded, and otherwise the **legacy NULL stream**, which synchronises with
    all other work on the device (a warning says so once). Pass `stream=C_NULL` to choose
    the legacy stream explicitly. The kernel's device must be CUDA.jl's current device
    when the task-local stream is used.
"""
function launch_packed(k::Kernel, buffer::Vector{UInt8}; grid=1, block=1, shared_bytes::Integer=0,
                       stream=nothing, cluster=nothing, cooperative::Bool=false)
    cfg = Ref(_launch_config(grid, block, shared_bytes, stream, cluster, cooperative))
    GC.@preserve buffer begin
        check(LibKJit.kjit_kernel_launch_packed(k, cfg, pointer(buffer), length(buffer)))
    end
    return nothing
end

"""
    launch(kernel, args...; grid=1, block=1, shared_bytes=0, stream=nothing, cluster=nothing,
           cooperative=false)

Pack `args` (see [`pack_params`](@ref)) and launch. Device memory the kernel uses must stay
allocated until the launch completes.
"""
function launch(k::Kernel, args...; kwargs...)
    return launch_packed(k, pack_params(k, args...); kwargs...)
end

"""
    launch_sized(kernel, args...; kwargs...)

Launch through `kjit_kernel_launch_sized`: one pointer per argument plus its size, both
checked by the library (for callers that want the library's per-argument size check).
"""
function launch_sized(k::Kernel, args...; grid=1, block=1, shared_bytes::Integer=0,
                      stream=nothing, cluster=nothing, cooperative::Bool=false)
    refs = Any[Ref(a) for a in args]
    ptrs = Ptr{Cvoid}[]
    sizes = Csize_t[sizeof(a) for a in args]
    cfg = Ref(_launch_config(grid, block, shared_bytes, stream, cluster, cooperative))
    GC.@preserve refs ptrs sizes begin
        for r in refs
            push!(ptrs, Base.unsafe_convert(Ptr{Cvoid}, r))
        end
        check(LibKJit.kjit_kernel_launch_sized(k, cfg, pointer(ptrs), pointer(sizes), length(args)))
    end
    return nothing
end

"""
    launch_raw(kernel, ptrs::Vector{Ptr{Cvoid}}; kwargs...)

`cuLaunchKernel`-style launch through `kjit_kernel_launch`: `ptrs[i]` points at the value of
parameter `i` (the caller keeps that memory alive and sized right; only the count is
checked).
"""
function launch_raw(k::Kernel, ptrs::Vector{Ptr{Cvoid}}; grid=1, block=1, shared_bytes::Integer=0,
                    stream=nothing, cluster=nothing, cooperative::Bool=false)
    cfg = Ref(_launch_config(grid, block, shared_bytes, stream, cluster, cooperative))
    GC.@preserve ptrs begin
        check(LibKJit.kjit_kernel_launch(k, cfg, pointer(ptrs), length(ptrs)))
    end
    return nothing
end

# The library's defaults for a struct, written by its *_init_sized function within the
# struct these bindings know (struct_size = sizeof(T)).
function _library_init(f, ::Type{T}) where {T}
    r = Ref{T}()
    check(f(r, sizeof(T)))
    return r[]
end

"The library's default launch configuration (`kjit_launch_config_init`)."
default_launch_config() = _library_init(LibKJit.kjit_launch_config_init_sized, LibKJit.kjit_launch_config)

"The library's default cache options (`kjit_cache_options_init`)."
default_cache_options() = _library_init(LibKJit.kjit_cache_options_init_sized, LibKJit.kjit_cache_options)

# ---- GEMM (cuBLASLt) ----------------------------------------------------------------------

"""
    gemm_desc(; m, n, k, a_type, kwargs...) -> LibKJit.kjit_gemm_desc

A GEMM problem: the library's defaults (`kjit_gemm_desc_init`) with the given fields of
`kjit_gemm_desc` replaced (names as in the C struct; see include/kjit/gemm.h).
"""
function gemm_desc(; kwargs...)
    T = LibKJit.kjit_gemm_desc
    d = _library_init(LibKJit.kjit_gemm_desc_init_sized, T)
    d = T(UInt32(sizeof(T)), Base.tail(ntuple(i -> getfield(d, i), fieldcount(T)))...)
    for k in keys(kwargs)
        k in fieldnames(T) || throw(ArgumentError("kjit_gemm_desc has no field $k"))
    end
    vals = [haskey(kwargs, f) ? convert(fieldtype(T, f), kwargs[f]) : getfield(d, f) for f in fieldnames(T)]
    return T(vals...)
end

_dptr(::Nothing) = C_NULL
_dptr(p::Ptr) = Ptr{Cvoid}(p)
_dptr(p::Integer) = Ptr{Cvoid}(UInt(p))
_dptr(p) = reinterpret(Ptr{Cvoid}, p)  # bits device-pointer types such as CuPtr

"Check a GEMM problem and its device pointers without a GPU."
function gemm_check(desc::LibKJit.kjit_gemm_desc, A, B, C, D, bias=nothing)
    check(LibKJit.kjit_gemm_check(Ref(desc), _dptr(A), _dptr(B), _dptr(C), _dptr(D), _dptr(bias)))
end

"""
    Gemm(cache=nothing; device=0, autotune=false, plan_capacity=0, max_workspace_bytes=0)

A cuBLASLt GEMM handle with a plan cache (persisted in `cache` when given).
"""
mutable struct Gemm
    handle::Ptr{Cvoid}
    cache::Union{Cache,Nothing}

    function Gemm(cache::Union{Cache,Nothing}=nothing; device::Integer=0, autotune::Bool=false,
                  plan_capacity::Integer=0, max_workspace_bytes::Integer=0)
        cache !== nothing && cache.handle == C_NULL && throw(_closed("cache"))
        o = _cstruct(LibKJit.kjit_gemm_options; plan_capacity=plan_capacity,
                     autotune=Cint(autotune), max_workspace_bytes=max_workspace_bytes)
        out = Ref{Ptr{Cvoid}}(C_NULL)
        check(LibKJit.kjit_gemm_create(cache === nothing ? C_NULL : cache.handle, device, Ref(o), out))
        cache === nothing || Threads.atomic_add!(cache.users, 1)
        return finalizer(close, new(out[], cache))
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, g::Gemm) = g.handle

function Base.close(g::Gemm)
    h = g.handle
    h == C_NULL && return nothing
    g.handle = C_NULL
    LibKJit.kjit_gemm_destroy(h)
    cache = g.cache
    g.cache = nothing
    if cache !== nothing && Threads.atomic_sub!(cache.users, 1) == 1 && cache.close_requested
        _close_cache!(cache)
    end
    return nothing
end

"Enqueue D = epilogue(alpha * op(A) * op(B) + beta * C) on `stream` (`nothing`: as for
[`launch_packed`](@ref), CUDA.jl's task-local stream when CUDA.jl is loaded, else the legacy
NULL stream)."
function gemm_run!(g::Gemm, desc::LibKJit.kjit_gemm_desc, A, B, C, D; bias=nothing, stream=nothing)
    check(LibKJit.kjit_gemm_run(g, Ref(desc), _dptr(A), _dptr(B), _dptr(C), _dptr(D), _dptr(bias),
                                _stream(stream)))
end

"Drop every plan of the handle's memory tier."
gemm_clear_plans!(g::Gemm) = check(LibKJit.kjit_gemm_clear_plans(g))

"Counters of a GEMM handle as a NamedTuple."
function gemm_stats(g::Gemm)
    T = LibKJit.kjit_gemm_stats
    r = Ref(_cstruct(T))
    check(LibKJit.kjit_gemm_stats_get(g, r))
    s = r[]
    return NamedTuple{Base.tail(fieldnames(T))}(map(f -> Int(getfield(s, f)), Base.tail(fieldnames(T))))
end

# ---- grouped GEMM (mixture-of-experts layers; kjit's own kernels) ----------------------------

# Values of the C enums of gemm.h and grouped_gemm.h (checked against the headers).
const KJIT_GEMM_F32 = 1
const KJIT_GEMM_F16 = 2
const KJIT_GEMM_BF16 = 3
const KJIT_GEMM_F8_E4M3 = 4
const KJIT_GEMM_F8_E5M2 = 5
const KJIT_GEMM_F64 = 6
const KJIT_GROUPED_B_KN = 0
const KJIT_GROUPED_B_NK = 1
const KJIT_GROUPED_ACT_NONE = 0
const KJIT_GROUPED_ACT_RELU = 1
const KJIT_GROUPED_ACT_GELU = 2
const KJIT_GROUPED_ACT_SILU = 3
const KJIT_GROUPED_ACT_SWIGLU = 4
const KJIT_GROUPED_SCALE_NONE = 0
const KJIT_GROUPED_SCALE_ROWWISE = 1
const KJIT_GROUPED_SCALE_BLOCK128 = 2
const KJIT_GROUPED_SCHEDULE_AUTO = 0
const KJIT_GROUPED_SCHEDULE_COOPERATIVE = 1
const KJIT_GROUPED_SCHEDULE_PINGPONG = 2

"""
    grouped_desc(; groups, rows, n, k, kwargs...) -> LibKJit.kjit_grouped_gemm_desc

A grouped GEMM problem, D[rows of group g] = act(alpha * A[rows of g] * B_g + beta * C + bias_g):
the library's defaults (`kjit_grouped_gemm_desc_init`) with the given fields of
`kjit_grouped_gemm_desc` replaced (names as in the C struct; see include/kjit/grouped_gemm.h),
for example `grouped_desc(groups=8, rows=8192, n=28672, k=4096, b_order=KJIT_GROUPED_B_NK)`.
"""
function grouped_desc(; kwargs...)
    T = LibKJit.kjit_grouped_gemm_desc
    d = _library_init(LibKJit.kjit_grouped_gemm_desc_init_sized, T)
    for k in keys(kwargs)
        k in fieldnames(T) || throw(ArgumentError("kjit_grouped_gemm_desc has no field $k"))
        k === :struct_size && throw(ArgumentError("struct_size is the library's to set"))
    end
    vals = [haskey(kwargs, f) ? convert(fieldtype(T, f), kwargs[f]) : getfield(d, f) for f in fieldnames(T)]
    return T(vals...)
end

"""
    grouped_check(desc, A, B, offs, C, D, bias=nothing)

Check a grouped GEMM problem and its device pointers without a GPU (dtypes, shapes, strides,
alignment); throws `KJitError` with the reason.
"""
function grouped_check(desc::LibKJit.kjit_grouped_gemm_desc, A, B, offs, C, D, bias=nothing)
    check(LibKJit.kjit_grouped_gemm_check(Ref(desc), _dptr(A), _dptr(B), Ptr{Int32}(_dptr(offs)),
                                          _dptr(C), _dptr(D), _dptr(bias)))
end

# kjit_grouped_gemm_options: the library's struct size, the given fields.
function _grouped_options(tile_n, stages, portable_only, schedule, check_offsets, autotune,
                          cluster_m=0)
    T = LibKJit.kjit_grouped_gemm_options
    o = _library_init(LibKJit.kjit_grouped_gemm_options_init_sized, T)
    return T(o.struct_size, UInt32(tile_n), UInt32(stages), Cint(portable_only), Cint(schedule),
             Cint(check_offsets), Cint(autotune), UInt32(cluster_m))
end

"""
    GroupedGemm(compiler; device=0, tile_n=0, stages=0, portable_only=false, schedule=0,
                check_offsets=false, autotune=false, cluster_m=0)

A grouped GEMM handle for `device`: its kernels are rendered per configuration and compiled
through `compiler` (and its cache). `cluster_m` 2 runs the sm_90a kernel in clusters of two
CTAs that share each copy of B's tile (bf16 inputs; 0: chosen per shape). Safe to share between tasks and
threads; `close` frees it.
"""
mutable struct GroupedGemm
    handle::Ptr{Cvoid}
    compiler::Union{Compiler,Nothing}  # kernels are compiled and cached through it

    function GroupedGemm(compiler::Compiler; device::Integer=0, tile_n::Integer=0,
                         stages::Integer=0, portable_only::Bool=false, schedule::Integer=0,
                         check_offsets::Bool=false, autotune::Bool=false,
                         cluster_m::Integer=0)
        compiler.handle == C_NULL && throw(_closed("compiler"))
        o = _grouped_options(tile_n, stages, portable_only, schedule, check_offsets, autotune,
                             cluster_m)
        out = Ref{Ptr{Cvoid}}(C_NULL)
        check(LibKJit.kjit_grouped_gemm_create(compiler, device, Ref(o), out))
        return finalizer(close, new(out[], compiler))
    end
end

Base.unsafe_convert(::Type{Ptr{Cvoid}}, g::GroupedGemm) = g.handle

function Base.close(g::GroupedGemm)
    h = g.handle
    h == C_NULL && return nothing
    g.handle = C_NULL
    LibKJit.kjit_grouped_gemm_destroy(h)
    g.compiler = nothing
    return nothing
end

_open(g::GroupedGemm) = (g.handle == C_NULL && throw(_closed("grouped GEMM handle")); g)

"""
    grouped_run!(g, desc, A, B, offs, C, D; bias=nothing, stream=nothing)

Enqueue the grouped GEMM on `stream` (`nothing`: as for [`launch_packed`](@ref)). `offs` is a
device array of `groups` Int32 cumulative row ends (torch's `offs`): no host sync. Pass
`nothing` for C when beta is 0.
"""
function grouped_run!(g::GroupedGemm, desc::LibKJit.kjit_grouped_gemm_desc, A, B, offs, C, D;
                      bias=nothing, stream=nothing)
    check(LibKJit.kjit_grouped_gemm_run(_open(g), Ref(desc), _dptr(A), _dptr(B),
                                        Ptr{Int32}(_dptr(offs)), _dptr(C), _dptr(D), _dptr(bias),
                                        _stream(stream)))
end

"""
    grouped_run_scaled!(g, desc, A, B, offs, C, D, scale_a, scale_b; bias=nothing, stream=nothing)

[`grouped_run!`](@ref) with fp8 e4m3 A and B (`a_type = b_type = KJIT_GEMM_F8_E4M3`) and the
fp32 scales of `desc.scale_mode`: `KJIT_GROUPED_SCALE_ROWWISE` (scale_a: rows, scale_b:
groups x n) or `KJIT_GROUPED_SCALE_BLOCK128` (scale_a: rows x cld(k, 128), scale_b: groups x
cld(n, 128) x cld(k, 128)); D is bf16.
"""
function grouped_run_scaled!(g::GroupedGemm, desc::LibKJit.kjit_grouped_gemm_desc, A, B, offs, C, D,
                             scale_a, scale_b; bias=nothing, stream=nothing)
    check(LibKJit.kjit_grouped_gemm_run_scaled(_open(g), Ref(desc), _dptr(A), _dptr(B),
                                               Ptr{Int32}(_dptr(offs)), _dptr(C), _dptr(D),
                                               _dptr(bias), Ptr{Cfloat}(_dptr(scale_a)),
                                               Ptr{Cfloat}(_dptr(scale_b)), _stream(stream)))
end

"Compile (or hit) and load the kernel a run of `desc` would use, before the first run."
function grouped_prepare!(g::GroupedGemm, desc::LibKJit.kjit_grouped_gemm_desc; with_bias::Bool=false)
    check(LibKJit.kjit_grouped_gemm_prepare(_open(g), Ref(desc), Cint(with_bias)))
end

"The configuration (plan key) a run of `desc` with these pointers would use, as a String."
function grouped_plan_key(g::GroupedGemm, desc::LibKJit.kjit_grouped_gemm_desc, A, B, C, D; bias=nothing)
    needed = Ref{Csize_t}(0)
    buf = Vector{UInt8}(undef, 256)
    while true
        check(LibKJit.kjit_grouped_gemm_plan_key(_open(g), Ref(desc), _dptr(A), _dptr(B), _dptr(C),
                                                 _dptr(D), _dptr(bias), buf, length(buf), needed))
        needed[] < length(buf) && return String(buf[1:needed[]])
        resize!(buf, needed[] + 1)
    end
end

"""
    grouped_offsets_status(g)

Read and clear the handle's offset record (check_offsets mode), after the checked calls'
streams are synchronised: throws `KJitError` (KJIT_ERROR_INVALID_ARGUMENT) naming the call,
the group and the values when one had bad offsets.
"""
grouped_offsets_status(g::GroupedGemm) = check(LibKJit.kjit_grouped_gemm_offsets_status(_open(g)))

"""
    grouped_compile(compiler, target, desc; with_bias=false, tile_n=0, stages=0,
                    portable_only=false, schedule=0) -> Binary

Compile (or find in the cache) the kernel a handle would use for `desc` on a device of
architecture `target` ("sm_90a", "sm_80", ...). Needs no GPU: warms a cache before a service
starts.
"""
function grouped_compile(c::Compiler, target::AbstractString, desc::LibKJit.kjit_grouped_gemm_desc;
                         with_bias::Bool=false, tile_n::Integer=0, stages::Integer=0,
                         portable_only::Bool=false, schedule::Integer=0)
    c.handle == C_NULL && throw(_closed("compiler"))
    o = _grouped_options(tile_n, stages, portable_only, schedule, false, false)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    st = LibKJit.kjit_grouped_gemm_compile(c, target, Ref(desc), Ref(o), Cint(with_bias), out)
    return _compile_result(st, out[])
end

"cuBLASLt's run-time version, e.g. 130100."
function cublaslt_version()
    v = Ref{Csize_t}(0)
    check(LibKJit.kjit_cublaslt_version(v))
    return Int(v[])
end

end # module KJit
