// Package docs holds no code, only the test that keeps architecture.md (the
// packages, and which of them may import which) true to the tree. It lives
// beside the page it checks, so that `go test ./docs` is the obvious run
// after editing it, and `go test ./...` runs it with everything else.
package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// page is architecture.md as messages name it, from the repository's root.
const page = "docs/architecture.md"

// TestArchitecture compares the import arrows between the module's own
// packages, as `go list` reports them from the non-test files, with the
// ```imports block of architecture.md, and the module's packages with the
// page's bullets under "## Packages".
func TestArchitecture(t *testing.T) {
	d := readDesign(t)
	g := readGraph(t)

	// Every package is named in the block and in the list, and every name
	// there is a package.
	for _, p := range slices.Sorted(maps.Keys(g.imports)) {
		_, inBlock := d.allowed[p]
		_, inList := d.listed[p]
		line := strings.TrimSpace(fmt.Sprintf("%s -> %s", p, strings.Join(slices.Sorted(maps.Keys(g.imports[p])), ", ")))
		bullet := fmt.Sprintf("- `%s` — what it owns, in one line.", p)
		switch {
		case !inBlock && !inList:
			t.Errorf("package %s (folder %s) is new to %s. Describe it there:\n"+
				"\tunder \"## Packages\", add the bullet\n\t\t%s\n"+
				"\tand in the ```imports block, add the line (these are its imports today; each is a design decision)\n\t\t%s",
				p, g.folder(p), page, bullet, line)
		case !inBlock:
			t.Errorf("package %s (folder %s) has a bullet under \"## Packages\" in %s but no line in its ```imports block. Add the line\n\t\t%s\n"+
				"\t(these are its imports today; each is a design decision)", p, g.folder(p), page, line)
		case !inList:
			t.Errorf("package %s has a line in the ```imports block of %s but no bullet under \"## Packages\". Add\n\t\t%s",
				p, page, bullet)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(d.allowed)) {
		if _, ok := g.imports[p]; !ok {
			also := ""
			if n, ok := d.listed[p]; ok {
				also = fmt.Sprintf(", and its bullet under \"## Packages\" (line %d)", n)
			}
			t.Errorf("%s:%d: names package %s, but the module has no such package (no folder %s/). "+
				"If it moved, write its new path there; if it is gone, delete that line%s.",
				page, d.line[p], p, p, also)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(d.listed)) {
		_, inCode := g.imports[p]
		_, inBlock := d.allowed[p]
		if !inCode && !inBlock {
			t.Errorf("%s:%d: the bullet for %s names no package of the module: rename it if the package moved, delete it if it is gone.",
				page, d.listed[p], p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(d.allowed)) {
		for _, q := range d.allowed[p] {
			if _, ok := g.imports[q]; !ok {
				t.Errorf("%s:%d: %s may import %s, but the module has no package %s: "+
					"write its new path if it moved, or take it off that line if it is gone.", page, d.line[p], p, q, q)
			}
		}
	}

	// Every arrow of the code is allowed.
	for _, p := range slices.Sorted(maps.Keys(g.imports)) {
		allowed, ok := d.allowed[p]
		if !ok {
			continue // told above
		}
		for _, q := range slices.Sorted(maps.Keys(g.imports[p])) {
			if slices.Contains(allowed, q) {
				continue
			}
			want := []string{q}
			for _, a := range allowed {
				if _, ok := g.imports[a]; ok {
					want = append(want, a)
				}
			}
			slices.Sort(want)
			t.Errorf("%s imports %s (in %s), and %s does not allow it. Either\n"+
				"\t- remove the import (if %s needs little of %s, declare an interface for it where it is used, and let daemon hand over the value), or\n"+
				"\t- if the design should change, make line %d of %s read\n\t\t%s -> %s\n"+
				"\t  and say why in the same change.",
				p, q, strings.Join(g.importers(t, p, q), ", "), page, p, q, d.line[p], page, p, strings.Join(want, ", "))
		}
	}

	// An arrow the code no longer has is harmless, but the page should
	// not keep allowing it for nothing.
	for _, p := range slices.Sorted(maps.Keys(d.allowed)) {
		imports, ok := g.imports[p]
		if !ok {
			continue
		}
		for _, q := range d.allowed[p] {
			if _, exists := g.imports[q]; exists && !imports[q] {
				t.Logf("note: %s:%d allows %s -> %s, which no code uses any more; take %s off that line unless it is wanted soon.",
					page, d.line[p], p, q, q)
			}
		}
	}
}

// design is what architecture.md says: for each package, the packages it
// may import, the line of the block that says so, and the line of its
// bullet under "## Packages".
type design struct {
	allowed map[string][]string
	line    map[string]int
	listed  map[string]int
}

// readDesign reads architecture.md. The block is the lines between
// "```imports" and the next "```": each is "package -> a, b, c" ("package ->"
// for none), with "#" starting a comment. A bullet is a line under
// "## Packages" that starts with "- `package`".
func readDesign(t *testing.T) design {
	t.Helper()
	data, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatalf("%v: %s is the page this test keeps true; restore it", err, page)
	}
	d := design{allowed: map[string][]string{}, line: map[string]int{}, listed: map[string]int{}}
	const (
		prose = iota
		packages
		block
	)
	state, sawBlock := prose, false
	for i, text := range strings.Split(string(data), "\n") {
		n := i + 1
		text = strings.TrimRight(text, "\r")
		switch {
		case state == block && strings.HasPrefix(text, "```"):
			state = prose
			continue
		case state == block:
			readArrow(t, &d, n, text)
			continue
		case strings.TrimSpace(text) == "```imports":
			if sawBlock {
				t.Errorf("%s:%d: a second ```imports block; keep every arrow in the first one, and delete this one.", page, n)
			}
			state, sawBlock = block, true
			continue
		case strings.HasPrefix(text, "## "):
			state = prose
			if strings.TrimSpace(text) == "## Packages" {
				state = packages
			}
			continue
		}
		if state != packages {
			continue
		}
		rest, ok := strings.CutPrefix(text, "- `")
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, "`")
		if !ok {
			t.Errorf("%s:%d: a bullet under \"## Packages\" starts with \"- `\" but its backquote is not closed: write \"- `package` — what it owns\".", page, n)
			continue
		}
		if m, dup := d.listed[name]; dup {
			t.Errorf("%s:%d: %s has a bullet already, on line %d: keep one.", page, n, name, m)
		}
		d.listed[name] = n
	}
	if !sawBlock {
		t.Fatalf("%s has no ```imports block: the test reads the allowed arrows from it (see the page's \"Who imports whom\").", page)
	}
	if state == block {
		t.Fatalf("%s: the ```imports block is not closed: end it with a line of three backquotes.", page)
	}
	return d
}

// readArrow reads line n of the block into d.
func readArrow(t *testing.T, d *design, n int, text string) {
	t.Helper()
	text, _, _ = strings.Cut(text, "#")
	if strings.TrimSpace(text) == "" {
		return
	}
	from, to, ok := strings.Cut(text, "->")
	from = strings.TrimSpace(from)
	if !ok || from == "" || strings.ContainsAny(from, " \t,") {
		t.Errorf("%s:%d: %q is not an arrow: write the package, then \"->\", then the packages it may import separated by commas (nothing for none), e.g.\n\t\tfiles -> mediatype, storage",
			page, n, strings.TrimSpace(text))
		return
	}
	if m, dup := d.line[from]; dup {
		t.Errorf("%s:%d: %s has a line already, on line %d: merge them into one.", page, n, from, m)
		return
	}
	var allowed []string
	for _, q := range strings.Split(to, ",") {
		q = strings.TrimSpace(q)
		switch {
		case q == "":
			continue
		case strings.ContainsAny(q, " \t"):
			t.Errorf("%s:%d: %q: separate the packages %s may import with commas.", page, n, q, from)
			continue
		case q == from:
			t.Errorf("%s:%d: %s may not import itself: take it off its own line.", page, n, from)
			continue
		case slices.Contains(allowed, q):
			t.Errorf("%s:%d: %s is listed twice: keep one.", page, n, q)
			continue
		}
		allowed = append(allowed, q)
	}
	d.allowed[from] = allowed
	d.line[from] = n
}

// graph is the module's packages and the arrows between them, on every
// platform that counts.
type graph struct {
	module  string                     // the module's path
	root    string                     // its folder
	imports map[string]map[string]bool // package → the module's packages its non-test files import
	files   map[string]map[string]bool // package → its non-test files
}

// platforms are the GOOS values whose files count: those releases are built
// for (.goreleaser.yaml) and the one running the test.
func platforms() []string {
	p := []string{"linux", "darwin"}
	if !slices.Contains(p, runtime.GOOS) {
		p = append(p, runtime.GOOS)
	}
	return p
}

// listed is what `go list -json` says of a package.
type listed struct {
	ImportPath string
	Dir        string
	Module     *struct {
		Path string
		Dir  string
		Main bool
	}
	GoFiles, CgoFiles, Imports []string
	Error                      *struct{ Err string }
}

// readGraph runs `go list` at the repository's root for each platform, on
// both modules of the workspace (the daemon's, and the Go client's in
// client/, whose packages are named from the root like the others).
// Imports lists what a package's non-test files import (its test files'
// imports are in TestImports and XTestImports, which are left out).
func readGraph(t *testing.T) *graph {
	t.Helper()
	g := &graph{imports: map[string]map[string]bool{}, files: map[string]map[string]bool{}}
	for _, goos := range platforms() {
		// `go test` puts the go command of its own GOROOT first in PATH.
		cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Dir,Module,GoFiles,CgoFiles,Imports,Error", "./...", "./client/...")
		cmd.Dir = ".." // the repository's root
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOOS=%s go list ./...: %v\n%s", goos, err, stderr.Bytes())
		}
		var pkgs []listed
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p listed
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("GOOS=%s go list: reading its output: %v", goos, err)
			}
			if p.Module == nil || !p.Module.Main {
				continue
			}
			if p.Error != nil && !strings.Contains(p.Error.Err, "build constraints exclude all Go files") {
				t.Fatalf("GOOS=%s go list: package %s: %s\n(the import graph cannot be read until that is fixed)", goos, p.ImportPath, p.Error.Err)
			}
			// The root's module has the shortest path: the client's is
			// within it.
			if g.module == "" || len(p.Module.Path) < len(g.module) {
				g.module, g.root = p.Module.Path, p.Module.Dir
			}
			pkgs = append(pkgs, p)
		}
		for _, p := range pkgs {
			name := g.name(p.ImportPath)
			if g.imports[name] == nil {
				g.imports[name], g.files[name] = map[string]bool{}, map[string]bool{}
			}
			for _, q := range p.Imports {
				if g.own(q) {
					g.imports[name][g.name(q)] = true
				}
			}
			for _, f := range slices.Concat(p.GoFiles, p.CgoFiles) {
				g.files[name][filepath.Join(p.Dir, f)] = true
			}
		}
	}
	if len(g.imports) == 0 {
		t.Fatal("go list ./... found no package of the module")
	}
	return g
}

// own reports whether an import path is one of the module's packages.
func (g *graph) own(path string) bool {
	return path == g.module || strings.HasPrefix(path, g.module+"/")
}

// name is a package's path as the page writes it: relative to the module,
// "." for the root.
func (g *graph) name(path string) string {
	if path == g.module {
		return "."
	}
	return strings.TrimPrefix(path, g.module+"/")
}

// folder is where a package's files are, from the repository's root.
func (g *graph) folder(name string) string {
	if name == "." {
		return "the repository's root"
	}
	return name + "/"
}

// importers names the files of package p that import package q, from the
// repository's root.
func (g *graph) importers(t *testing.T, p, q string) []string {
	t.Helper()
	path := g.module
	if q != "." {
		path += "/" + q
	}
	var names []string
	fset := token.NewFileSet()
	for _, file := range slices.Sorted(maps.Keys(g.files[p])) {
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Logf("reading the imports of %s: %v", file, err)
			continue
		}
		for _, spec := range f.Imports {
			if v, _ := strconv.Unquote(spec.Path.Value); v == path {
				rel, err := filepath.Rel(g.root, file)
				if err != nil {
					rel = file
				}
				names = append(names, filepath.ToSlash(rel))
				break
			}
		}
	}
	if len(names) == 0 {
		return []string{"one of its files"}
	}
	return names
}
