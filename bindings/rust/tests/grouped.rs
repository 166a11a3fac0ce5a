//! Grouped GEMM paths that run without a GPU: problem checks, the struct layouts against
//! the library's defaults, handle creation without a driver.

mod common;

use kjit::{
    grouped_check, grouped_compile, grouped_desc, sys, Compiler, DevicePtr, GroupedGemm,
    GroupedOptions, Status,
};

fn desc() -> kjit::GroupedDesc {
    let mut d = grouped_desc();
    d.groups = 4;
    d.rows = 100;
    d.n = 96;
    d.k = 64;
    d.b_order = sys::KJIT_GROUPED_B_NK;
    d
}

#[test]
fn grouped_desc_matches_the_library_defaults() {
    let mut c = grouped_desc();
    c.alpha = 7.0;
    let st = unsafe {
        sys::kjit_grouped_gemm_desc_init_sized(&mut c, std::mem::size_of::<kjit::GroupedDesc>())
    };
    assert_eq!(st, 0);
    assert_eq!(c, grouped_desc());
    let mut o = sys::kjit_grouped_gemm_options::default();
    let st = unsafe {
        sys::kjit_grouped_gemm_options_init_sized(
            &mut o,
            std::mem::size_of::<sys::kjit_grouped_gemm_options>(),
        )
    };
    assert_eq!(st, 0);
    assert_eq!(
        o.struct_size as usize,
        std::mem::size_of::<sys::kjit_grouped_gemm_options>()
    );
    assert_eq!(
        (o.tile_n, o.stages, o.portable_only, o.schedule),
        (0, 0, 0, 0)
    );
}

#[test]
fn grouped_check_validates_problems_without_a_gpu() {
    let d = desc();
    let (a, b, offs, out) = (
        DevicePtr(0x1000),
        DevicePtr(0x2000),
        DevicePtr(0x3000),
        DevicePtr(0x4000),
    );
    grouped_check(&d, a, b, offs, None, out, None).unwrap();
    let e = grouped_check(&d, DevicePtr(0), b, offs, None, out, None).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    let e = grouped_check(&d, a, b, DevicePtr(0x3002), None, out, None).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "misaligned offs: {e}");
    let mut f16 = desc();
    f16.a_type = sys::KJIT_GEMM_F16;
    let e = grouped_check(&f16, a, b, offs, None, out, None).unwrap_err();
    assert_eq!(e.status(), Status::Unsupported, "{e}");
    let mut beta = desc();
    beta.beta = 1.0;
    let e = grouped_check(&beta, a, b, offs, None, out, None).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "C missing: {e}");
}

#[test]
fn grouped_handle_needs_a_device() {
    let compiler = Compiler::new(None, 1).unwrap();
    match kjit::device_count() {
        Ok(n) if n > 0 => {
            let gg = GroupedGemm::new(&compiler, 0, &GroupedOptions::default()).unwrap();
            let d = desc();
            let key = gg
                .plan_key(
                    &d,
                    DevicePtr(0x1000),
                    DevicePtr(0x2000),
                    None,
                    DevicePtr(0x4000),
                    None,
                )
                .unwrap();
            assert!(key.starts_with("grouped-v1 "), "{key}");
        }
        _ => {
            let e = GroupedGemm::new(&compiler, 0, &GroupedOptions::default()).unwrap_err();
            assert_eq!(e.status(), Status::CudaUnavailable, "{e}");
        }
    }
}

#[test]
fn grouped_compile_for_a_target_then_hits() {
    let dir = common::TempDir::new("grouped-compile");
    let cache = kjit::Cache::open(&kjit::CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 1).unwrap();
    let d = desc();
    let opts = GroupedOptions {
        portable_only: true,
        ..Default::default()
    };
    let first = grouped_compile(&compiler, "sm_80", &d, &opts, false).unwrap();
    assert_eq!(first.tier(), kjit::Tier::Compiled);
    let again = grouped_compile(&compiler, "sm_80", &d, &opts, false).unwrap();
    assert_ne!(again.tier(), kjit::Tier::Compiled);
    assert_eq!(again.key(), first.key());
    let e = grouped_compile(&compiler, "compute_80", &d, &opts, false).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    let tuned = GroupedOptions {
        autotune: true,
        tile_n: 128,
        ..Default::default()
    };
    let e = grouped_compile(&compiler, "sm_90a", &d, &tuned, false).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
}

fn fp8_desc(mode: i32) -> kjit::GroupedDesc {
    let mut d = desc();
    d.a_type = sys::KJIT_GEMM_F8_E4M3;
    d.b_type = sys::KJIT_GEMM_F8_E4M3;
    d.scale_mode = mode;
    d
}

#[test]
fn grouped_scaled_arguments_are_checked_without_a_gpu() {
    let (a, b, offs, out) = (
        DevicePtr(0x1000),
        DevicePtr(0x2000),
        DevicePtr(0x3000),
        DevicePtr(0x4000),
    );
    let (sa, sb) = (Some(DevicePtr(0x5000)), Some(DevicePtr(0x6000)));
    for mode in [
        sys::KJIT_GROUPED_SCALE_ROWWISE,
        sys::KJIT_GROUPED_SCALE_BLOCK128,
    ] {
        let d = fp8_desc(mode);
        kjit::grouped_check_scaled(&d, a, b, offs, None, out, None, sa, sb).unwrap();
        // One scale without the other: refused by the binding.
        let e = kjit::grouped_check_scaled(&d, a, b, offs, None, out, None, sa, None).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument, "{e}");
        assert!(e.message().contains("scale_a and scale_b"), "{e}");
        // No scales where the mode needs them, an unaligned scale: refused by the library.
        let e =
            kjit::grouped_check_scaled(&d, a, b, offs, None, out, None, None, None).unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument, "{e}");
        let e = kjit::grouped_check_scaled(
            &d,
            a,
            b,
            offs,
            None,
            out,
            None,
            Some(DevicePtr(0x5002)),
            sb,
        )
        .unwrap_err();
        assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    }
    // Scales with bf16 inputs.
    let mut bf = desc();
    bf.scale_mode = sys::KJIT_GROUPED_SCALE_ROWWISE;
    let e = kjit::grouped_check_scaled(&bf, a, b, offs, None, out, None, sa, sb).unwrap_err();
    assert_eq!(e.status(), Status::Unsupported, "{e}");
    // Scales given with KJIT_GROUPED_SCALE_NONE.
    let none = fp8_desc(sys::KJIT_GROUPED_SCALE_NONE);
    let e = kjit::grouped_check_scaled(&none, a, b, offs, None, out, None, sa, sb).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
}

#[test]
fn grouped_compile_fp8_for_sm90a_then_hits() {
    let dir = common::TempDir::new("grouped-compile-fp8");
    let cache = kjit::Cache::open(&kjit::CacheOptions::in_dir(dir.path())).unwrap();
    let compiler = Compiler::new(Some(&cache), 1).unwrap();
    let opts = GroupedOptions::default();
    let row = fp8_desc(sys::KJIT_GROUPED_SCALE_ROWWISE);
    let first = grouped_compile(&compiler, "sm_90a", &row, &opts, false).unwrap();
    assert_eq!(first.tier(), kjit::Tier::Compiled);
    let again = grouped_compile(&compiler, "sm_90a", &row, &opts, false).unwrap();
    assert_ne!(again.tier(), kjit::Tier::Compiled);
    assert_eq!(again.key(), first.key());
    let block = fp8_desc(sys::KJIT_GROUPED_SCALE_BLOCK128);
    let other = grouped_compile(&compiler, "sm_90a", &block, &opts, false).unwrap();
    assert_ne!(other.key(), first.key());
}
