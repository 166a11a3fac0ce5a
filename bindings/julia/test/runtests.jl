# KJit tests: compile and cache paths run without a GPU (explicit targets); launch tests
# skip without a CUDA driver. Run with the library on the loader path or KJIT_LIB set:
#
#     KJIT_LIB=/path/to/libkjit.so.0 julia --project=bindings/julia -e 'using Pkg; Pkg.test()'

using Test
using KJit
using KJit: LibKJit
using KJit.LibKJit: libkjit

const SAXPY = """
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
const TARGET = "sm_80"

opts() = Options(target=TARGET, options=["-std=c++17"])
ishex64(s) = length(s) == 64 && all(c -> c in "0123456789abcdef", s)

const HEADER_KERNEL = "extern \"C\" __global__ void k(int* out) { out[0] = V; }\n"

# PTX for sm_90 (no GPU needed); program name `name` unless `nothing`.
ptx_opts(name=nothing; options=()) = Options(target="sm_90", outputs=KJit.OUTPUT_PTX, name=name, options=options)

# Rewrite `path` with `contents` of the same size and put its access and modification times
# back (`touch -r` from a stamp file holding the old ones): only the bytes (and the inode's
# change time) differ afterwards.
function rewrite_keeping_size_and_mtime(path, contents)
    before = stat(path)
    @assert before.size == sizeof(contents)
    stamp = tempname()
    run(`touch -r $path $stamp`)
    write(path, contents)
    run(`touch -r $stamp $path`)
    rm(stamp)
    after = stat(path)
    @assert after.size == before.size && after.mtime == before.mtime
end

# The PTX holds `want` and none of the other values V takes in these tests.
holds_only(b, want) = all(v -> occursin(v, ptx(b)) == (v == want), ("111", "222", "33333"))

# Compile `source` (which includes `header`) through a fresh cache while the header
# changes: a hit, then an edit keeping size and mtime, then a new size. Every edit must be
# a miss with the new value.
function check_header_edits(header, source, o)
    dir = mktempdir()
    cache = Cache(directory=dir)
    c = Compiler(cache)
    b1 = compile(c, source; options=o)
    @test tier(b1) == :compiled
    @test holds_only(b1, "111")
    b2 = compile(c, source; options=o)
    @test tier(b2) == :memory
    @test holds_only(b2, "111")

    rewrite_keeping_size_and_mtime(header, "#define V 222\n")
    b3 = compile(c, source; options=o)
    @test tier(b3) == :compiled            # same size and mtime: never a stale hit
    @test holds_only(b3, "222")
    @test cache_key(b3) != cache_key(b1)

    write(header, "#define V 33333\n")
    b4 = compile(c, source; options=o)
    @test tier(b4) == :compiled
    @test holds_only(b4, "33333")

    s = KJit.stats(cache)
    @test (s.compiles, s.stores, s.not_stored) == (3, 3, 0)
    close(c)
    close(cache)

    # Another handle on the same database: the current header's entry, from disk.
    cache2 = Cache(directory=dir)
    c2 = Compiler(cache2)
    b5 = compile(c2, source; options=o)
    @test tier(b5) == :disk
    @test holds_only(b5, "33333")
    close(c2)
    close(cache2)
end

function status_of(f)
    try
        f()
    catch e
        e isa KJitError || rethrow()
        return e.status
    end
    return KJit.KJIT_OK
end

@testset "KJit" begin
    @testset "version and status strings" begin
        @test KJit.version() == KJit.KJIT_VERSION
        @test KJit.version_string() == "0.1.0"
        @test occursin("KJIT_ERROR_COMPILE", KJit.status_string(KJit.KJIT_ERROR_COMPILE))
        @test occursin('.', nvrtc_version())
    end

    @testset "compile without a cache" begin
        c = Compiler()
        o = opts()
        b = compile(c, SAXPY; options=o)
        @test tier(b) == :compiled
        @test target(b) == TARGET
        @test ishex64(cache_key(b))
        @test cache_key(b) == compute_key(SAXPY; options=o)
        @test occursin(".entry saxpy", ptx(b))
        @test kernel_names(b) == ["saxpy"]
        @test cubin(b)[1:4] == UInt8[0x7f, UInt8('E'), UInt8('L'), UInt8('F')]
        @test ltoir(b) === nothing
        @test startswith(lstrip(metadata_json(b)), "{")
        @test compile_ms(b) > 0
        close(b); close(b)
        close(c)
    end

    @testset "compile errors carry the log" begin
        c = Compiler()
        err = try
            compile(c, "extern \"C\" __global__ void broken(int* p) { p[0] = undefined_thing; }\n"; options=opts())
            nothing
        catch e
            e
        end
        @test err isa KJitError
        @test err.status == KJit.KJIT_ERROR_COMPILE
        @test occursin("undefined_thing", err.log)
        @test occursin("undefined_thing", sprint(showerror, err))
        @test status_of(() -> compile(c, ""; options=opts())) == KJit.KJIT_ERROR_INVALID_SOURCE
        bad = Options(target=TARGET, options=["--definitely-not-an-nvrtc-option"])
        @test status_of(() -> compile(c, SAXPY; options=bad)) == KJit.KJIT_ERROR_INVALID_OPTION
        closed = opts()
        close(closed)
        @test status_of(() -> compile(c, SAXPY; options=closed)) == KJit.KJIT_ERROR_INVALID_HANDLE
    end

    @testset "cache tiers: compiled, memory, disk" begin
        dir = mktempdir()
        o = opts()
        cache = Cache(directory=dir)
        @test KJit.directory(cache) == dir
        c = Compiler(cache)
        first = compile(c, SAXPY; options=o)
        second = compile(c, SAXPY; options=o)
        @test tier(first) == :compiled
        @test tier(second) == :memory
        s = KJit.stats(cache)
        @test s.disk_state == :ok
        @test s.compiles == 1
        @test_throws KJitError close(cache)  # a compiler still uses it
        close(c)
        close(cache)

        cache2 = Cache(directory=dir)
        c2 = Compiler(cache2)
        hit = compile(c2, SAXPY; options=o)
        @test tier(hit) == :disk
        @test ptx(hit) == ptx(first)
        @test cubin(hit) == cubin(first)
        k = cache_key(first)
        @test ptx(KJit.lookup(cache2, k)) == ptx(first)
        entries = KJit.list_entries(cache2)
        e = entries[findfirst(x -> x.key == k, entries)]
        @test e.target == TARGET && e.kernels == ["saxpy"] && e.bytes > 0
        @test KJit.verify(cache2)[2] == 0
        delete!(cache2, k)
        @test status_of(() -> KJit.lookup(cache2, k)) == KJit.KJIT_ERROR_NOT_FOUND
        KJit.clear_memory!(cache2)
        KJit.clear!(cache2)
        close(c2)
        close(cache2)
    end

    @testset "read-only cache, export and import" begin
        dir = mktempdir()
        cache = Cache(directory=dir)
        c = Compiler(cache)
        b = compile(c, SAXPY; options=opts())
        file = joinpath(mktempdir(), "entries.kjit")
        @test KJit.export_entries(cache, file) == 1
        ro = Cache(directory=dir, read_only=true)
        @test KJit.stats(ro).disk_state == :read_only
        @test status_of(() -> put!(ro, b)) == KJit.KJIT_ERROR_READ_ONLY
        other = Cache(directory=mktempdir())
        @test KJit.import_entries!(other, file) == (1, 0)
        @test cache_key(KJit.lookup(other, cache_key(b))) == cache_key(b)
        @test KJit.prune!(other, 0) >= 1
    end

    @testset "name expressions, headers, defines, hashes" begin
        o = opts()
        KJit.add_name_expression!(o, "scale<float>")
        b = compile(Compiler(), "template <typename T> __global__ void scale(T* x, T a) { x[threadIdx.x] *= a; }\n"; options=o)
        low = lowered_name(b, "scale<float>")
        @test low !== nothing && startswith(low, "_Z")
        @test lowered_name(b, "scale<double>") === nothing
        @test name_expressions(b) == ["scale<float>" => low]

        src = "#include \"factor.h\"\nextern \"C\" __global__ void k(float* x) { x[0] = FACTOR * SCALE; }\n"
        mk(f, s) = Options(target=TARGET, headers=["factor.h" => "#define FACTOR $f\n"], defines=["SCALE" => s])
        k1 = compute_key(src; options=mk(2, 3))
        @test k1 == compute_key(src; options=mk(2, 3))
        @test k1 != compute_key(src; options=mk(4, 3))
        @test k1 != compute_key(src; options=mk(2, 5))
        @test compute_key(src; options=copy(mk(2, 3))) == k1

        @test hash_source("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        @test hash_options(["ab", "c"]) != hash_options(["a", "bc"])
        @test hash_options(["a", "b"]) != hash_options(["b", "a"])
    end

    @testset "header edits are never served from the cache" begin
        root = mktempdir()
        quoted = "#include \"h.h\"\n" * HEADER_KERNEL
        dirs = Dict(name => mkpath(joinpath(root, name)) for name in ("abs", "cwd", "inc"))
        for d in values(dirs)
            write(joinpath(d, "h.h"), "#define V 111\n")
        end
        write(joinpath(dirs["abs"], "k.cu"), quoted)
        # kjit remembers a header's contents while stat() says it is unchanged and it was
        # last changed at least 2 s before it was read; let the headers settle so that the
        # first compile leaves such a memo for the same-size, same-mtime edit to fool.
        sleep(2.5)
        # The header next to a source named by its absolute path.
        check_header_edits(joinpath(dirs["abs"], "h.h"), quoted, ptx_opts(joinpath(dirs["abs"], "k.cu")))
        # The default program name: its directory is the working directory.
        cd(dirs["cwd"]) do
            check_header_edits(joinpath(dirs["cwd"], "h.h"), quoted, ptx_opts())
        end
        # `#include <h.h>` found through -I.
        check_header_edits(joinpath(dirs["inc"], "h.h"), "#include <h.h>\n" * HEADER_KERNEL,
                           ptx_opts(options=["-I" * dirs["inc"]]))
    end

    @testset "a read the key does not cover is not stored" begin
        # NVRTC looks for ../other/h.h relative to the source's directory, which a computed
        # include hides from kjit's scan: the caller gets the result, nothing is stored.
        root = mktempdir()
        mkpath(joinpath(root, "src"))
        mkpath(joinpath(root, "other"))
        write(joinpath(root, "other", "h.h"), "#define V 111\n")
        source = "#define STR(x) #x\n#include STR(../other/h.h)\n" * HEADER_KERNEL
        k = joinpath(root, "src", "k.cu")
        write(k, source)
        o = ptx_opts(k)
        cache = Cache(directory=mktempdir())
        c = Compiler(cache)
        for i in 1:2
            b = compile(c, source; options=o)
            @test tier(b) == :compiled
            @test holds_only(b, "111")
            s = KJit.stats(cache)
            @test (s.compiles, s.misses, s.not_stored, s.stores, s.disk_entries) == (i, i, i, 0, 0)
        end
        @test isempty(KJit.list_entries(cache))
        close(c)
        close(cache)
    end

    @testset "async and many" begin
        c = Compiler(threads=2)
        f = compile_async(c, SAXPY; options=opts())
        b = wait(f)
        @test isready(f)
        @test occursin(".entry saxpy", ptx(b))
        @test status_of(() -> wait(f; timeout_ms=0)) == KJit.KJIT_ERROR_INVALID_ARGUMENT
        o = opts()
        r = compile_many(c, [SAXPY, "__global__ void g() { oops }"]; options=[o, o])
        @test r[1] isa Binary
        @test r[2] isa KJitError && r[2].status == KJit.KJIT_ERROR_COMPILE && occursin("oops", r[2].log)
    end

    @testset "launch" begin
        n = try
            device_count()
        catch e
            e isa KJitError && e.status == KJit.KJIT_ERROR_CUDA_UNAVAILABLE || rethrow()
            @info "SKIPPED launch tests: $(e.message)"
            @test status_of(() -> Kernel(Compiler(), SAXPY, "saxpy")) == KJit.KJIT_ERROR_CUDA_UNAVAILABLE
            0
        end
        if n > 0
            k = Kernel(Compiler(), SAXPY, "saxpy")
            @test param_layout(k) == ([(0, 4), (4, 4), (8, 8), (16, 8)], 24)
            @test KJit.load_path(k) == :cubin
            buf = pack_params(k, Int32(10), 2.0f0, UInt64(0), UInt64(0))
            @test length(buf) == 24
            @test status_of(() -> pack_params(k, Int64(10), 2.0f0, UInt64(0), UInt64(0))) == KJit.KJIT_ERROR_ARGUMENT_MISMATCH
            @test status_of(() -> launch_packed(k, buf[1:20])) == KJit.KJIT_ERROR_ARGUMENT_MISMATCH
            @test KJit.attributes(k).max_threads_per_block > 0
            # Correctness needs device memory: see README (CUDA.jl: CuArray, pointer(x)).
        end
    end

    @testset "raw layer" begin
        cfg = KJit.default_launch_config()
        @test cfg.struct_size == sizeof(LibKJit.kjit_launch_config) == 56
        @test cfg.grid == (1, 1, 1) && cfg.block == (1, 1, 1)
        @test sizeof(LibKJit.kjit_cache_stats) == 624
        @test fieldoffset(LibKJit.kjit_cache_stats, Base.fieldindex(LibKJit.kjit_cache_stats, :not_stored)) == 496
        @test sizeof(LibKJit.kjit_cache_options) == 56
        d = KJit.gemm_desc(m=4, n=4, k=4, a_type=1)
        @test d.m == 4 && d.alpha == 1.0 && d.batch_count == 1
        @test KJit.gemm_check(d, UInt64(256), UInt64(512), nothing, UInt64(1024)) === nothing
        @test status_of(() -> KJit.gemm_check(d, nothing, UInt64(512), nothing, UInt64(1024))) == KJit.KJIT_ERROR_INVALID_ARGUMENT
    end
    @testset "grouped GEMM without a GPU" begin
        d = KJit.grouped_desc(groups=4, rows=100, n=96, k=64, b_order=KJit.KJIT_GROUPED_B_NK)
        @test d.groups == 4 && d.alpha == 1.0 && d.struct_size == sizeof(LibKJit.kjit_grouped_gemm_desc)
        @test_throws ArgumentError KJit.grouped_desc(groups=4, no_such_field=1)
        @test KJit.grouped_check(d, UInt64(0x1000), UInt64(0x2000), UInt64(0x3000), nothing, UInt64(0x4000)) === nothing
        @test status_of(() -> KJit.grouped_check(d, nothing, UInt64(0x2000), UInt64(0x3000), nothing, UInt64(0x4000))) == KJit.KJIT_ERROR_INVALID_ARGUMENT
        @test status_of(() -> KJit.grouped_check(d, UInt64(0x1000), UInt64(0x2000), UInt64(0x3002), nothing, UInt64(0x4000))) == KJit.KJIT_ERROR_INVALID_ARGUMENT
        f16 = KJit.grouped_desc(groups=4, rows=100, n=96, k=64, a_type=KJit.KJIT_GEMM_F16)
        @test status_of(() -> KJit.grouped_check(f16, UInt64(0x1000), UInt64(0x2000), UInt64(0x3000), nothing, UInt64(0x4000))) == KJit.KJIT_ERROR_UNSUPPORTED
        # The kernels compile through the compiler's cache without a GPU: a second compile hits.
        cache = Cache(directory=mktempdir())
        c = Compiler(cache)
        for target in ("sm_90a", "sm_80")
            b = KJit.grouped_compile(c, target, d)
            @test tier(b) == :compiled && !isempty(kernel_names(b))
            @test tier(KJit.grouped_compile(c, target, d)) == :memory
        end
        swiglu = KJit.grouped_desc(groups=4, rows=100, n=96, k=64, b_order=KJit.KJIT_GROUPED_B_NK,
                                   activation=KJit.KJIT_GROUPED_ACT_SWIGLU)
        @test tier(KJit.grouped_compile(c, "sm_90a", swiglu; with_bias=true)) == :compiled
        ndev = try
            device_count()
        catch e
            e isa KJitError || rethrow()
            0
        end
        if ndev == 0
            @test status_of(() -> KJit.GroupedGemm(c)) == KJit.KJIT_ERROR_CUDA_UNAVAILABLE
        else
            g = KJit.GroupedGemm(c)
            @test startswith(KJit.grouped_plan_key(g, d, UInt64(0x1000), UInt64(0x2000), nothing, UInt64(0x4000)), "grouped-v1 ")
            close(g)
        end
        close(c)
        close(cache)
    end
    @testset "blocking calls are GC-safe" begin
        ex = @macroexpand LibKJit.@gcsafe ccall((:kjit_version, libkjit), Cint, ())
        @test occursin("jl_gc_safe_enter", string(ex)) && occursin("jl_gc_safe_leave", string(ex))
        @test LibKJit.@gcsafe(ccall((:kjit_version, libkjit), Cint, ())) == KJit.version()
        # A thread parked in kjit_future_wait must not stop a collection on this one.
        if Threads.nthreads() > 1
            src = join(["extern \"C\" __global__ void slow$i(float* p) { float a = p[0];\n" *
                        "#pragma unroll\n for (int j = 0; j < 2000; ++j) a = a * p[j % 7] + __sinf(a + j);\n" *
                        " p[1] = a + $(rand(UInt32)); }\n" for i in 1:3])
            f = compile_async(Compiler(), src; options=opts())
            waiter = Threads.@spawn wait(f)
            GC.gc()         # with a plain ccall this waited for the compile (or deadlocked)
            @test fetch(waiter) isa Binary
        else
            @info "SKIPPED GC-while-waiting test: start julia with --threads=2"
        end
    end

    @testset "log messages are delivered on a Julia task" begin
        got = Channel{Tuple{Int,String,Task}}(16)
        set_log_callback((level, msg) -> put!(got, (level, msg, current_task())))
        try
            c = Cache(directory="/proc/kjit-no-such-dir")   # logs why the disk tier is off
            close(c)
            @test timedwait(() -> isready(got), 30) == :ok
            level, msg, task = take!(got)
            @test level in 0:3 && !isempty(msg)
            @test task !== current_task()                    # the delivery task, not a caller
        finally
            set_log_callback(nothing)
        end
    end

    @testset "default stream" begin
        if KJit._default_stream[] === nothing               # CUDA.jl not loaded
            @test_logs (:warn, r"legacy NULL stream") KJit._stream(nothing)
        end
        @test KJit._stream(C_NULL) == C_NULL                 # explicit: no warning
        @test_logs KJit._stream(C_NULL)
        old = KJit._default_stream[]
        KJit._default_stream[] = () -> Ptr{Cvoid}(UInt(0x1234))
        try
            @test KJit._stream(nothing) == Ptr{Cvoid}(UInt(0x1234))
            @test KJit._stream(UInt(0x10)) == Ptr{Cvoid}(UInt(0x10))
        finally
            KJit._default_stream[] = old
        end
    end
end
