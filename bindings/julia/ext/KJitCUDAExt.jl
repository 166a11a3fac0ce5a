"""
    KJitCUDAExt

Loaded with CUDA.jl: launches and GEMMs without `stream=` run on CUDA.jl's task-local
stream (`CUDA.stream()`) instead of the legacy NULL stream, and a `CuStream` may be passed
as `stream=` directly.
"""
module KJitCUDAExt

using KJit
using CUDA

KJit._stream(s::CUDA.CuStream) = Ptr{Cvoid}(s.handle)

function __init__()
    KJit._default_stream[] = () -> CUDA.stream().handle
    return nothing
end

end # module KJitCUDAExt
