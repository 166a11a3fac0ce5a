package kjit

import "testing"

func TestGemmCheckWithoutGPU(t *testing.T) {
	d := NewGemmDesc()
	d.M, d.N, d.K, d.AType = 64, 32, 16, GemmF32
	must(t, GemmCheck(&d, 0x1000, 0x2000, 0, 0x3000, 0))
	wantStatus(t, GemmCheck(&d, 0, 0x2000, 0, 0x3000, 0), StatusInvalidArgument)
	wantStatus(t, GemmCheck(&d, 0x1002, 0x2000, 0, 0x3000, 0), StatusInvalidArgument)
	d.M = 0
	wantStatus(t, GemmCheck(&d, 0x1000, 0x2000, 0, 0x3000, 0), StatusInvalidArgument)
}

func TestGemmHandleNeedsADevice(t *testing.T) {
	cache := openCache(t, &CacheOptions{MemoryOnly: true})
	g, err := NewGemm(cache, 0, nil)
	if _, derr := DeviceCount(); derr != nil {
		wantStatus(t, err, StatusCUDAUnavailable)
	} else {
		must(t, err)
		s, err := g.Stats()
		must(t, err)
		if s.Runs != 0 {
			t.Fatal(s)
		}
		g.Close()
	}
	if v, err := CuBLASLtVersion(); err != nil {
		wantStatus(t, err, StatusCUBLAS)
	} else if v <= 0 {
		t.Fatal(v)
	}
}
