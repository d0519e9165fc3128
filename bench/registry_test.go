package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// benchFuncs finds every `func BenchmarkX(b *testing.B)` in the module's
// test files, by package folder ("./e2e") and name.
func benchFuncs(t *testing.T, root string) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The go tool skips these too; testdata may hold Go files
			// that are fixtures, not code.
			if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(rel)
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && isBenchmark(fn) {
				found[pkg] = append(found[pkg], fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// isBenchmark is what `go test` runs as a benchmark: BenchmarkX with X not
// starting with a lower-case letter, taking one *testing.B.
func isBenchmark(fn *ast.FuncDecl) bool {
	name, ok := strings.CutPrefix(fn.Name.Name, "Benchmark")
	if !ok || (name != "" && strings.ToLower(name[:1]) == name[:1] && strings.ToUpper(name[:1]) != name[:1]) {
		return false
	}
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) > 1 {
		return false
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "B"
}

// Every benchmark in the module is in the registry, every one the registry
// names exists, and each entry's -bench runs exactly its functions.
func TestRegistryListsEveryBenchmark(t *testing.T) {
	found := benchFuncs(t, "..")
	listed := map[string]bool{}
	names := map[string]bool{}
	for _, e := range registry {
		if names[e.Name] {
			t.Errorf("two entries named %q", e.Name)
		}
		names[e.Name] = true
		if e.Pkg == "" {
			if len(e.Funcs) > 0 || e.Bench != "" {
				t.Errorf("%s: a load tool entry (no Pkg) with Go benchmarks", e.Name)
			}
			continue
		}
		if len(e.Funcs) == 0 {
			t.Errorf("%s: no Funcs", e.Name)
		}
		re, err := regexp.Compile(topLevel(e.Bench))
		if err != nil {
			t.Errorf("%s: -bench %q: %v", e.Name, e.Bench, err)
			continue
		}
		for _, fn := range e.Funcs {
			listed[e.Pkg+"."+fn] = true
			if !slices.Contains(found[e.Pkg], fn) {
				t.Errorf("%s lists %s in %s, which has no such benchmark (found %v)", e.Name, fn, e.Pkg, found[e.Pkg])
			}
		}
		for _, fn := range found[e.Pkg] {
			if re.MatchString(fn) != slices.Contains(e.Funcs, fn) {
				t.Errorf("%s: -bench %q and Funcs %v disagree about %s", e.Name, e.Bench, e.Funcs, fn)
			}
		}
	}
	for pkg, fns := range found {
		for _, fn := range fns {
			if !listed[pkg+"."+fn] {
				t.Errorf("%s.%s is not in bench/registry.go: add it, so that `go run ./bench all` runs it", pkg, fn)
			}
		}
	}
}

// topLevel is the part of a -bench regexp that matches top-level names: the
// testing package splits the pattern at slashes.
func topLevel(bench string) string {
	top, _, _ := strings.Cut(bench, "/")
	return top
}

func TestRegistryQuickAndFull(t *testing.T) {
	for _, e := range registry {
		if e.Measures == "" || len(e.Metrics) == 0 {
			t.Errorf("%s: no Measures or Metrics", e.Name)
		}
		for _, quick := range []bool{false, true} {
			for _, kv := range entryEnv(e, quick) {
				if !strings.HasPrefix(kv, "BLUELINE_BENCH_") || !strings.Contains(kv, "=") {
					t.Errorf("%s: environment %q: want BLUELINE_BENCH_…=value", e.Name, kv)
				}
			}
			if e.Pkg == "" {
				if _, err := parseOptions(loadArgs(e, quick)[3:], newSilentFlagSet()); err != nil {
					t.Errorf("%s (quick %v): %v", e.Name, quick, err)
				}
			}
		}
	}
}
