//! The link step through nvJitLink: these run without a GPU (explicit targets).

mod common;

use common::TempDir;
use kjit::{Cache, CacheOptions, Compiler, LinkInput, Linker, Options, Outputs, Status, Tier};

const CALLER: &str = r#"extern __device__ float combine(float a, float b);
extern "C" __global__ void apply(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = combine(x[i], y[i]);
}
"#;

const CALLEE: &str = "__device__ float combine(float a, float b) { return a * 3.0f + b * 0.5f; }\n";

fn rdc(outputs: Outputs) -> Options {
    let mut o = Options::new().unwrap();
    o.target("sm_90")
        .unwrap()
        .outputs(outputs)
        .unwrap()
        .add("-rdc=true")
        .unwrap();
    o
}

#[test]
fn lto_ir_links_then_hits() {
    let dir = TempDir::new("link");
    let cache = Cache::open(&CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 0).unwrap();
    let o = rdc(Outputs::LTOIR);
    let a = compiler.compile(CALLER, Some(&o)).unwrap();
    let b = compiler.compile(CALLEE, Some(&o)).unwrap();
    let mut linker = Linker::new(Some(&cache)).unwrap();
    linker
        .add_binary(&a, Some("caller"))
        .unwrap()
        .add_binary(&b, None)
        .unwrap();
    linker.option("-lto").unwrap();
    let first = linker.link().unwrap();
    assert_eq!(first.tier(), Tier::Compiled);
    assert_eq!(first.target(), "sm_90");
    assert!(first.cubin().unwrap().starts_with(b"\x7fELF"));
    assert_eq!(first.kernel_names(), vec!["apply"]);
    let second = linker.link().unwrap();
    assert_ne!(second.tier(), Tier::Compiled);
    assert_eq!(second.cubin(), first.cubin());
    assert_eq!(linker.key().unwrap(), first.key());
}

#[test]
fn ptx_data_and_errors() {
    let compiler = Compiler::new(None, 0).unwrap();
    let o = rdc(Outputs::PTX);
    let a = compiler.compile(CALLER, Some(&o)).unwrap();
    let b = compiler.compile(CALLEE, Some(&o)).unwrap();
    let mut linker = Linker::new(None).unwrap();
    linker.target("sm_90").unwrap();
    linker
        .add_data(LinkInput::Ptx, a.ptx().unwrap().as_bytes(), Some("a"))
        .unwrap();
    linker
        .add_data(LinkInput::Ptx, b.ptx().unwrap().as_bytes(), None)
        .unwrap();
    assert_eq!(linker.link().unwrap().kernel_names(), vec!["apply"]);

    let lto = rdc(Outputs::LTOIR);
    let caller = compiler.compile(CALLER, Some(&lto)).unwrap();
    let mut alone = Linker::new(None).unwrap();
    alone
        .add_binary(&caller, None)
        .unwrap()
        .option("-lto")
        .unwrap();
    let e = alone.link().unwrap_err();
    assert_eq!(e.status(), Status::Link);
    assert!(
        e.log().contains("Unresolved extern function"),
        "{}",
        e.log()
    );

    let mut bad = Linker::new(None).unwrap();
    let e = bad
        .add_data(LinkInput::Cubin, b"garbage", None)
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument);
    assert_eq!(bad.link().unwrap_err().status(), Status::InvalidArgument); // no inputs
    let mut mismatch = Linker::new(None).unwrap();
    mismatch
        .add_binary(&caller, None)
        .unwrap()
        .target("sm_80")
        .unwrap();
    assert_eq!(
        mismatch.link().unwrap_err().status(),
        Status::UnsupportedTarget
    );
    assert!(kjit::nvjitlink_version()
        .unwrap()
        .starts_with("nvJitLink 13."));
}
