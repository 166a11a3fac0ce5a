//! GEMM paths that run without a GPU: problem checks, handle creation without a driver.

use kjit::{gemm_check, gemm_desc, Cache, CacheOptions, DevicePtr, Gemm, GemmOptions, Status};

#[test]
fn gemm_check_validates_problems_without_a_gpu() {
    let mut d = gemm_desc();
    d.m = 64;
    d.n = 32;
    d.k = 16;
    d.a_type = kjit::sys::KJIT_GEMM_F32;
    let (a, b, c) = (DevicePtr(0x1000), DevicePtr(0x2000), DevicePtr(0x3000));
    gemm_check(&d, a, b, None, c, None).unwrap();
    let e = gemm_check(&d, DevicePtr(0), b, None, c, None).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "{e}");
    let e = gemm_check(&d, DevicePtr(0x1002), b, None, c, None).unwrap_err();
    assert_eq!(e.status(), Status::InvalidArgument, "misaligned A: {e}");
    d.m = 0;
    assert_eq!(
        gemm_check(&d, a, b, None, c, None).unwrap_err().status(),
        Status::InvalidArgument
    );
}

#[test]
fn gemm_handle_needs_a_device() {
    let cache = Cache::open(&CacheOptions {
        memory_only: true,
        ..Default::default()
    })
    .unwrap();
    match kjit::device_count() {
        Err(_) => {
            let e = Gemm::new(Some(&cache), 0, &GemmOptions::default()).unwrap_err();
            assert_eq!(e.status(), Status::CudaUnavailable, "{e}");
        }
        Ok(_) => {
            let g = Gemm::new(Some(&cache), 0, &GemmOptions::default()).unwrap();
            assert_eq!(g.stats().unwrap().runs, 0);
        }
    }
    // The owned form keeps a share of the cache while it lives and gives it back after.
    let shared = std::sync::Arc::new(cache);
    match Gemm::with_cache(std::sync::Arc::clone(&shared), 0, &GemmOptions::default()) {
        Err(e) => assert_eq!(e.status(), Status::CudaUnavailable, "{e}"),
        Ok(g) => {
            assert_eq!(std::sync::Arc::strong_count(&shared), 2);
            let g = std::thread::spawn(move || g.stats().map(|s| s.runs)).join().unwrap();
            assert_eq!(g.unwrap(), 0);
        }
    }
    assert_eq!(std::sync::Arc::strong_count(&shared), 1);
    match kjit::cublaslt_version() {
        Ok(v) => assert!(v > 0),
        Err(e) => assert_eq!(e.status(), Status::Cublas, "{e}"),
    }
}
