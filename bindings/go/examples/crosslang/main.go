// Command crosslang is the Go leg of the cross-language cache test (driven by
// bindings/test_bindings.sh):
//
//	crosslang <cache-dir> <source.cu> <ptx-out> <expected-tier: compiled|memory|disk>
//
// It compiles the source with the options every leg uses (target sm_80, -std=c++17,
// -DBLOCK=256, PTX + CUBIN), writes the PTX and fails unless the tier is as expected.
package main

import (
	"fmt"
	"os"

	kjit "github.com/kjit-dev/kjit/bindings/go"
)

func run(dir, sourceFile, ptxOut string) (kjit.Tier, error) {
	src, err := os.ReadFile(sourceFile)
	if err != nil {
		return 0, err
	}
	cache, err := kjit.OpenCache(&kjit.CacheOptions{Dir: dir})
	if err != nil {
		return 0, err
	}
	defer cache.Close()
	compiler, err := kjit.NewCompiler(cache, 0)
	if err != nil {
		return 0, err
	}
	defer compiler.Close()
	opts, err := kjit.NewOptions()
	if err != nil {
		return 0, err
	}
	defer opts.Close()
	for _, step := range []error{
		opts.SetTarget("sm_80"),
		opts.Add("-std=c++17"),
		opts.AddDefine("BLOCK", "256"),
		opts.SetOutputs(kjit.OutputPTX | kjit.OutputCUBIN),
	} {
		if step != nil {
			return 0, step
		}
	}
	bin, err := compiler.Compile(string(src), opts)
	if err != nil {
		return 0, err
	}
	defer bin.Close()
	if err := os.WriteFile(ptxOut, []byte(bin.PTX()), 0o644); err != nil {
		return 0, err
	}
	fmt.Printf("go: key %s tier %s\n", bin.Key(), bin.Tier())
	return bin.Tier(), nil
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintf(os.Stderr, "usage: %s <cache-dir> <source.cu> <ptx-out> <compiled|memory|disk>\n", os.Args[0])
		os.Exit(2)
	}
	want := map[string]kjit.Tier{"compiled": kjit.TierCompiled, "memory": kjit.TierMemory, "disk": kjit.TierDisk}
	w, ok := want[os.Args[4]]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown tier %s\n", os.Args[4])
		os.Exit(2)
	}
	tier, err := run(os.Args[1], os.Args[2], os.Args[3])
	if err != nil {
		fmt.Fprintf(os.Stderr, "go: %v\n", err)
		os.Exit(1)
	}
	if tier != w {
		fmt.Fprintf(os.Stderr, "go: expected tier %s, got %s\n", w, tier)
		os.Exit(1)
	}
}
