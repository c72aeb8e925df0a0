package archtest

import (
	"bufio"
	"fmt"
	"go/ast"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
)

var (
	// docRef is a reference to a document of the repository: docs/… .md
	// (README.md and the fixtures' READMEs are named by their path too).
	docRef = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]+\.md\b`)
	// sectionRef is a "§" reference: §3, §3.4, §7b, §4.3 step 1, §3.1–3.3.
	sectionRef = regexp.MustCompile(`§\s?([0-9]+[a-z]?(?:\.[0-9]+)*)(?:\s?[–-]\s?([0-9]+[a-z]?(?:\.[0-9]+)*))?`)
	// outside names the documents that lived outside the repository while
	// storectl was written; the repository must say what they said itself.
	outside = regexp.MustCompile(`/work/|shared/docs|\b(rocketmq-format|rabbitmq-format|rabbitmq-quorum-stream-format|rocketmq-5x-format|cli-contract|house-style|model-codebases|prior-art)\.md\b`)
	// mdLink is a relative markdown link to another page.
	mdLink = regexp.MustCompile(`\]\(([A-Za-z0-9_./-]+\.md)(#[^)]*)?\)`)
	// upstreamSpec names a published specification whose own section
	// numbers a comment may cite with "§".
	upstreamSpec = regexp.MustCompile(`\bAMQP 1\.0\b|\bOASIS\b|\bRFC ?[0-9]+`)
)

// pendingPages are pages that code already points at and their authors
// are writing (issue, helper): a reference to one passes until the page
// exists, and then the test fails until the entry is removed here.
var pendingPages = map[string]string{}

// TestDocReferences: every comment that points at a document points
// inside the repository, at a file that exists, and every "§" section it
// cites is a heading of the document it refers to (named in the same
// comment, else elsewhere in the file, else in the package's doc
// comment). The docs' own links between pages resolve too.
func TestDocReferences(t *testing.T) {
	root := testutil.RepoRoot()
	var errs []string
	pkgDoc := map[string]string{} // dir -> the doc the package's doc comment names
	files := repoFiles(t)
	for _, f := range files {
		if f.ast.Doc != nil {
			if m := sectionDoc(f.ast.Doc.Text()); m != "" {
				pkgDoc[f.dir] = m
			}
		}
	}
	nrefs, nsec := 0, 0
	for _, f := range files {
		if under(f.dir, "internal/archtest") {
			continue // its tests spell references as test data
		}
		fileDoc := ""
		for _, cg := range f.ast.Comments {
			if m := sectionDoc(cg.Text()); m != "" && (fileDoc == "" || strings.HasPrefix(m, "docs/formats/")) {
				fileDoc = m
				if strings.HasPrefix(m, "docs/formats/") {
					break
				}
			}
		}
		for _, cg := range f.ast.Comments {
			text := commentText(cg)
			at := func(i int) string {
				return fmt.Sprintf("%s:%d", f.rel, f.fset.Position(cg.Pos()).Line+strings.Count(text[:i], "\n"))
			}
			if loc := outside.FindStringIndex(text); loc != nil {
				errs = append(errs, fmt.Sprintf("%s: %q points outside the repository: say it in docs/ and point there, or at upstream source", at(loc[0]), text[loc[0]:loc[1]]))
			}
			refs := docRef.FindAllStringIndex(text, -1)
			for _, r := range refs {
				nrefs++
				if !exists(root, text[r[0]:r[1]]) {
					errs = append(errs, fmt.Sprintf("%s: %s does not exist", at(r[0]), text[r[0]:r[1]]))
				}
			}
			for _, s := range sectionRef.FindAllStringSubmatchIndex(text, -1) {
				nsec++
				doc := ""
				for _, r := range refs { // the nearest doc named before it in the comment, else the first after
					if r[0] < s[0] || doc == "" {
						doc = text[r[0]:r[1]]
					}
				}
				for _, d := range []string{formatsPage(fileDoc), formatsPage(pkgDoc[f.dir]), fileDoc, pkgDoc[f.dir]} {
					if doc == "" {
						doc = d
					}
				}
				if doc == "" && upstreamSpec.MatchString(text) {
					continue // a section of the published specification the comment names
				}
				if _, pending := pendingPages[doc]; pending && !fileExists(root, doc) {
					continue
				}
				if doc == "" {
					errs = append(errs, fmt.Sprintf("%s: %s names no document: add the docs/ page it refers to", at(s[0]), text[s[0]:s[1]]))
					continue
				}
				for _, g := range [][2]int{{s[2], s[3]}, {s[4], s[5]}} {
					if g[0] < 0 {
						continue
					}
					sec := text[g[0]:g[1]]
					if !hasSection(t, root, doc, sec) {
						errs = append(errs, fmt.Sprintf("%s: §%s is no heading of %s", at(s[0]), sec, doc))
					}
				}
			}
		}
	}
	errs = append(errs, markdownLinks(t, root)...)
	for p, who := range pendingPages {
		if fileExists(root, p) {
			errs = append(errs, fmt.Sprintf("%s exists now (%s): remove it from pendingPages", p, who))
		}
	}
	if nrefs < 20 || nsec < 20 {
		errs = append(errs, fmt.Sprintf("only %d docs/ references and %d § references found: is the parser broken?", nrefs, nsec))
	}
	sort.Strings(errs)
	for _, e := range errs {
		t.Error(e)
	}
}

// sectionDoc is the page a comment's bare "§" references most likely
// cite: its first docs/formats/ page, else its first docs/ page.
func sectionDoc(text string) string {
	all := docRef.FindAllString(text, -1)
	for _, d := range all {
		if strings.HasPrefix(d, "docs/formats/") {
			return d
		}
	}
	if len(all) > 0 {
		return all[0]
	}
	return ""
}

// formatsPage is d when it is a page of docs/formats/, else "".
func formatsPage(d string) string {
	if strings.HasPrefix(d, "docs/formats/") {
		return d
	}
	return ""
}

// commentText is the raw text of a comment group, lines joined by "\n"
// (ast.CommentGroup.Text drops the line structure of /* */ comments and
// directives; line numbers need it kept).
func commentText(cg *ast.CommentGroup) string {
	var b strings.Builder
	for i, c := range cg.List {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

var sections = map[string]map[string]bool{}

// hasSection reports whether the markdown page doc has a heading
// numbered sec ("## 3. …" is §3, "### 3.4 …" is §3.4, "## 7b. …" §7b).
func hasSection(t *testing.T, root, doc, sec string) bool {
	s, ok := sections[doc]
	if !ok {
		s = map[string]bool{}
		sections[doc] = s
		f, err := os.Open(filepath.Join(root, doc))
		if err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "#") {
					continue
				}
				fields := strings.Fields(strings.TrimLeft(line, "#"))
				if len(fields) > 0 {
					s[strings.TrimSuffix(fields[0], ".")] = true
				}
			}
			f.Close()
		}
	}
	return s[sec]
}

// markdownLinks checks the relative links between the pages of docs/
// and README.md.
func markdownLinks(t *testing.T, root string) []string {
	var errs []string
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	more, _ := filepath.Glob(filepath.Join(root, "docs", "*", "*.md"))
	pages = append(append(pages, more...), filepath.Join(root, "README.md"))
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		text := string(b)
		if loc := outside.FindStringIndex(text); loc != nil {
			errs = append(errs, fmt.Sprintf("%s: %q points outside the repository", rel, text[loc[0]:loc[1]]))
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := path.Join(path.Dir(rel), m[1])
			if !exists(root, target) {
				errs = append(errs, fmt.Sprintf("%s: link to %s, which does not exist", rel, m[1]))
			}
		}
	}
	return errs
}

// TestDocReferencesCheck: the patterns find what they look for.
func TestDocReferencesCheck(t *testing.T) {
	for _, c := range []struct {
		text string
		secs []string
	}{
		{"(docs/formats/rocketmq.md §3.6)", []string{"3.6"}},
		{"the §3.4 condition", []string{"3.4"}},
		{"(§3.1–3.3, §7b)", []string{"3.1", "3.3", "7b"}},
		{"§4.3 step 1", []string{"4.3"}},
	} {
		var got []string
		for _, m := range sectionRef.FindAllStringSubmatch(c.text, -1) {
			got = append(got, m[1])
			if m[2] != "" {
				got = append(got, m[2])
			}
		}
		if strings.Join(got, " ") != strings.Join(c.secs, " ") {
			t.Errorf("%q: sections %v, want %v", c.text, got, c.secs)
		}
	}
	// The samples are spelled in pieces so that this file does not itself
	// read as a pointer out of the repository to a grep for them.
	const md = ".md"
	for _, s := range []string{"/work/shared/docs/rocketmq-format" + md, "rabbitmq-format" + md + " §2", "see cli-contract" + md} {
		if !outside.MatchString(s) {
			t.Errorf("%q not caught as outside the repository", s)
		}
	}
	if docRef.FindString("see docs/formats/osiris.md, §2") != "docs/formats/osiris.md" {
		t.Error("docs/ reference not found")
	}
}

// exists reports whether the repository has the page, or it is pending.
func exists(root, rel string) bool {
	if _, pending := pendingPages[rel]; pending {
		return true
	}
	return fileExists(root, rel)
}

func fileExists(root, rel string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}
