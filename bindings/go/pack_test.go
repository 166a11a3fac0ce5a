package kjit

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// Packing runs without a GPU: a Kernel value with a known layout stands in for a loaded
// one (saxpy: int n, float a, const float* x, float* y).
func TestPackLaysOutArgumentsByOffset(t *testing.T) {
	k := &Kernel{params: []Param{{0, 4}, {4, 4}, {8, 8}, {16, 8}}, bufSize: 24}
	buf, err := k.Pack(int32(1000), float32(2.5), DevicePtr(0x1122334455667788), uintptr(0x99))
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(buf) != 24 || le.Uint32(buf[0:]) != 1000 || math.Float32frombits(le.Uint32(buf[4:])) != 2.5 ||
		le.Uint64(buf[8:]) != 0x1122334455667788 || le.Uint64(buf[16:]) != 0x99 {
		t.Fatalf("% x", buf)
	}
	raw := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if _, err := k.Pack(int32(1), float32(1), raw, uint64(2)); err != nil {
		t.Fatal(err)
	}
}

func TestPackRefusesMismatches(t *testing.T) {
	k := &Kernel{params: []Param{{0, 4}, {4, 4}, {8, 8}, {16, 8}}, bufSize: 24}
	cases := [][]any{
		{int32(1), float32(1), DevicePtr(0)},                         // too few
		{int32(1), float32(1), DevicePtr(0), DevicePtr(0), int32(1)}, // too many
		{int64(1), float32(1), DevicePtr(0), DevicePtr(0)},           // 8 bytes for an int
		{int32(1), float64(1), DevicePtr(0), DevicePtr(0)},           // double for a float
		{int32(1), float32(1), int32(0), DevicePtr(0)},               // 4 bytes for a pointer
		{int32(1), float32(1), "x", DevicePtr(0)},                    // unsupported type
		{int32(1), float32(1), []byte{1, 2, 3}, DevicePtr(0)},        // short bytes
	}
	for i, args := range cases {
		if _, err := k.Pack(args...); !errors.Is(err, StatusArgumentMismatch) {
			t.Errorf("case %d: want argument mismatch, got %v", i, err)
		}
	}
}

func TestLaunchConfigZeroValueIsOneThread(t *testing.T) {
	var cfg LaunchConfig
	c := cfg.c()
	for i := 0; i < 3; i++ {
		if c.grid[i] != 1 || c.block[i] != 1 || c.cluster[i] != 0 {
			t.Fatal("zero config")
		}
	}
	if int(c.struct_size) != 56 {
		t.Fatal("struct_size", c.struct_size)
	}
	fe := ForElements(1000, 256)
	if fe.Grid != [3]uint32{4, 1, 1} || fe.Block != [3]uint32{256, 1, 1} {
		t.Fatal(fe)
	}
}
