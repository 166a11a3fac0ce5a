package kjit

import "testing"

func groupedDesc() GroupedDesc {
	d := NewGroupedDesc()
	d.Groups, d.Rows, d.N, d.K, d.BOrder = 4, 100, 96, 64, GroupedBNK
	return d
}

func TestGroupedCheckWithoutGPU(t *testing.T) {
	d := groupedDesc()
	must(t, GroupedCheck(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0))
	wantStatus(t, GroupedCheck(&d, 0, 0x2000, 0x3000, 0, 0x4000, 0), StatusInvalidArgument)
	wantStatus(t, GroupedCheck(&d, 0x1000, 0x2000, 0x3002, 0, 0x4000, 0), StatusInvalidArgument)
	d.AType = GemmF16
	wantStatus(t, GroupedCheck(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0), StatusUnsupported)
	d = groupedDesc()
	d.Beta = 1 // C is read
	wantStatus(t, GroupedCheck(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0), StatusInvalidArgument)
}

func TestGroupedHandleNeedsADevice(t *testing.T) {
	comp, err := NewCompiler(nil, 1)
	must(t, err)
	defer comp.Close()
	g, err := NewGroupedGemm(comp, 0, nil)
	if n, derr := DeviceCount(); derr != nil || n == 0 {
		wantStatus(t, err, StatusCUDAUnavailable)
		return
	}
	must(t, err)
	defer g.Close()
	d := groupedDesc()
	key, err := g.PlanKey(&d, 0x1000, 0x2000, 0, 0x4000, 0)
	must(t, err)
	if len(key) < 10 || key[:11] != "grouped-v1 " {
		t.Fatal(key)
	}
}

func TestGroupedCheckScaledWithoutGPU(t *testing.T) {
	for _, mode := range []int32{GroupedScaleRowwise, GroupedScaleBlock128} {
		d := groupedDesc()
		d.AType, d.BType, d.ScaleMode = GemmF8E4M3, GemmF8E4M3, mode
		must(t, GroupedCheckScaled(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0, 0x5000, 0x6000))
		// One scale without the other: refused by the binding.
		err := GroupedCheckScaled(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0, 0x5000, 0)
		wantStatus(t, err, StatusInvalidArgument)
		if e := err.(*Error); e.Message != "scale_a and scale_b come together" {
			t.Fatal(e.Message)
		}
		// No scales where the mode needs them, an unaligned scale: refused by the library.
		wantStatus(t, GroupedCheckScaled(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0, 0, 0), StatusInvalidArgument)
		wantStatus(t, GroupedCheckScaled(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0, 0x5002, 0x6000), StatusInvalidArgument)
		// Scales given with GroupedScaleNone.
		d.ScaleMode = GroupedScaleNone
		wantStatus(t, GroupedCheckScaled(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0, 0x5000, 0x6000), StatusInvalidArgument)
	}
	// Scales with bf16 inputs.
	d := groupedDesc()
	d.ScaleMode = GroupedScaleRowwise
	wantStatus(t, GroupedCheckScaled(&d, 0x1000, 0x2000, 0x3000, 0, 0x4000, 0, 0x5000, 0x6000), StatusUnsupported)
}
