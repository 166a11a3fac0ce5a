package kjit

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
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

// Every type of the packing table, with the bytes it must produce; a type added to the
// table without a case here fails TestPackCoversEveryTableType.
var packCases = []struct {
	v    any
	want []byte
}{
	{int8(-2), []byte{0xfe}},
	{uint8(0xab), []byte{0xab}},
	{true, []byte{1}},
	{false, []byte{0}},
	{int16(-2), []byte{0xfe, 0xff}},
	{uint16(0x1234), []byte{0x34, 0x12}},
	{int32(-2), []byte{0xfe, 0xff, 0xff, 0xff}},
	{uint32(0x12345678), []byte{0x78, 0x56, 0x34, 0x12}},
	{float32(1), []byte{0, 0, 0x80, 0x3f}},
	{int64(-2), []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	{uint64(0x0102030405060708), []byte{8, 7, 6, 5, 4, 3, 2, 1}},
	{int(-1), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
	{uint(0x0102030405060708), []byte{8, 7, 6, 5, 4, 3, 2, 1}},
	{uintptr(0x10), []byte{0x10, 0, 0, 0, 0, 0, 0, 0}},
	{DevicePtr(0x0102030405060708), []byte{8, 7, 6, 5, 4, 3, 2, 1}},
	{float64(1), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
	{[]byte{9, 8, 7}, []byte{9, 8, 7}},
}

func TestPackEveryType(t *testing.T) {
	for _, c := range packCases {
		n := len(c.want)
		// The value sits at offset 8, behind a 4-byte parameter, in a buffer with slack:
		// only its own bytes may change.
		k := &Kernel{params: []Param{{0, 4}, {8, n}}, bufSize: 8 + n + 8}
		buf, err := k.Pack(int32(7), c.v)
		if err != nil {
			t.Fatalf("%T: %v", c.v, err)
		}
		want := make([]byte, k.bufSize)
		want[0] = 7
		copy(want[8:], c.want)
		if !bytes.Equal(buf, want) {
			t.Errorf("%T %v: got % x, want % x", c.v, c.v, buf, want)
		}
		// One byte more or less than the value's size is refused.
		for _, size := range []int{n - 1, n + 1} {
			if size == 0 {
				continue
			}
			k := &Kernel{params: []Param{{0, size}}, bufSize: size}
			if _, err := k.Pack(c.v); !errors.Is(err, StatusArgumentMismatch) {
				t.Errorf("%T in a %d-byte parameter: want argument mismatch, got %v", c.v, size, err)
			}
		}
	}
}

func TestPackCoversEveryTableType(t *testing.T) {
	tested := map[reflect.Type]bool{}
	for _, c := range packCases {
		tested[reflect.TypeOf(c.v)] = true
	}
	for typ, p := range packers {
		if !tested[typ] {
			t.Errorf("packing table type %v (%d bytes) has no case in packCases", typ, p.size)
		}
	}
	if _, err := (&Kernel{params: []Param{{0, 8}}, bufSize: 8}).Pack(nil); !errors.Is(err, StatusArgumentMismatch) {
		t.Errorf("nil: want argument mismatch, got %v", err)
	}
}
