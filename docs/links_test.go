package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestLinks follows every relative link of the repository's Markdown pages
// (README.md, docs/, packaging/ and the rest): the file or folder it names
// exists, and its #anchor, if any, is a heading of the page it points to.
// Links to other sites are not followed (the test runs offline).
func TestLinks(t *testing.T) {
	pages := markdownPages(t)
	if len(pages) < 3 {
		t.Fatalf("found only %d Markdown pages: %v", len(pages), pages)
	}
	anchors := map[string]map[string]bool{} // page → its headings' anchors
	anchorsOf := func(page string) map[string]bool {
		a, ok := anchors[page]
		if !ok {
			a = headingAnchors(t, page)
			anchors[page] = a
		}
		return a
	}
	checked := 0
	for _, page := range pages {
		for _, l := range pageLinks(t, page) {
			checked++
			target, anchor, _ := strings.Cut(l.target, "#")
			dest := page // "#anchor" alone: a heading of this page
			if target != "" {
				dest = path.Join(path.Dir(page), target)
				if dest == ".." || strings.HasPrefix(dest, "../") || path.IsAbs(target) {
					t.Errorf("%s:%d: the link %s leaves the repository: link a file in it, or a full https:// address", page, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join("..", filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d: the link %s names %s, which is not in the repository: fix the path, or link the page that exists", page, l.line, l.target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: the link %s names #%s, but %s has no heading with that anchor", page, l.line, l.target, anchor, dest)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check")
	}
}

// TestHeadingAnchor pins the heading-to-anchor rule TestLinks relies on, as
// GitHub renders it.
func TestHeadingAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"The Messages bridge: a line on a Mac":    "the-messages-bridge-a-line-on-a-mac",
		"AI agents (MCP)":                         "ai-agents-mcp",
		"Over HTTP: `/mcp` on the API's listener": "over-http-mcp-on-the-apis-listener",
		"Health, metrics and backup":              "health-metrics-and-backup",
		"The [console](docs/x.md) — in short":     "the-console--in-short",
		"snake_case and CAPS":                     "snake_case-and-caps",
	} {
		if got := anchorOf(heading); got != want {
			t.Errorf("anchorOf(%q) = %q, want %q", heading, got, want)
		}
	}
}

// markdownPages is every .md file of the repository, from its root, outside
// hidden folders and goreleaser's output.
func markdownPages(t *testing.T) []string {
	t.Helper()
	var pages []string
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, ".."+string(filepath.Separator)))
		if d.IsDir() {
			if p != ".." && (strings.HasPrefix(d.Name(), ".") || rel == "packaging/dist") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".md") {
			pages = append(pages, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

type link struct {
	target string
	line   int
}

var (
	// ](target) or ](target "title"): the end of an inline link or image,
	// whatever its text.
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// [name]: target, a reference definition.
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?([^\s>]+)>?`)
	codeSpan = regexp.MustCompile("`[^`]*`")
	// Any scheme (https:, mailto:) names something outside the repository.
	scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// pageLinks is the relative links of a page, outside code.
func pageLinks(t *testing.T, page string) []link {
	t.Helper()
	var links []link
	eachProseLine(t, page, func(n int, line string) {
		line = codeSpan.ReplaceAllString(line, "``")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if !scheme.MatchString(target) {
				links = append(links, link{target: target, line: n})
			}
		}
	})
	return links
}

// headingAnchors is the anchors of a page's headings: the #… that link to
// them, numbered as GitHub numbers repeated ones (x, x-1, x-2).
func headingAnchors(t *testing.T, page string) map[string]bool {
	t.Helper()
	anchors := map[string]bool{}
	seen := map[string]int{}
	eachProseLine(t, page, func(_ int, line string) {
		text, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") || len(line)-len(strings.TrimLeft(line, "#")) > 6 {
			return
		}
		a := anchorOf(strings.TrimSpace(text))
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	})
	return anchors
}

var inlineMarkup = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// anchorOf is a heading's anchor as GitHub makes it: the text without its
// link targets, in lower case, without punctuation but - and _, each space a -.
func anchorOf(heading string) string {
	heading = inlineMarkup.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// eachProseLine calls f with each line of a page outside fenced code
// blocks, numbered from 1.
func eachProseLine(t *testing.T, page string, f func(n int, line string)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(page)))
	if err != nil {
		t.Fatal(err)
	}
	fence := ""
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(nil, 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "```"), strings.HasPrefix(trimmed, "~~~"):
			fence = trimmed[:3]
			continue
		}
		f(n, line)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s: %v", page, err)
	}
}
