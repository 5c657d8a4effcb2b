package api

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// The public contract lives in docs/CONTRACT.md, beside the code it
// describes: these tests keep its routes, error codes and event kinds the
// ones the gateway serves, in both directions.

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// contractRoute matches a route as the contract writes it in code spans:
// methods joined by |, a path (under /v1, or the vendors' side of
// connections under /connect), {a,b} lists and <collection> expanded.
var contractRoute = regexp.MustCompile("`((?:GET|POST|PATCH|DELETE)(?:\\|(?:GET|POST|PATCH|DELETE))*) (/(?:v1|connect)/[^` ]*)`")

func expandPath(p string) []string {
	if strings.Contains(p, "<collection>") {
		var out []string
		for _, k := range practice.Kinds {
			out = append(out, expandPath(strings.Replace(p, "<collection>", string(k), 1))...)
		}
		return out
	}
	open := strings.Index(p, "{")
	if open < 0 {
		return []string{p}
	}
	end := strings.Index(p[open:], "}") + open
	inner := p[open+1 : end]
	if !strings.Contains(inner, ",") {
		// A path parameter such as {id}.
		var out []string
		for _, rest := range expandPath(p[end+1:]) {
			out = append(out, p[:end+1]+rest)
		}
		return out
	}
	var out []string
	for _, alt := range strings.Split(inner, ",") {
		out = append(out, expandPath(p[:open]+alt+p[end+1:])...)
	}
	return out
}

func TestContractNamesEveryRoute(t *testing.T) {
	doc := readDoc(t, "docs/CONTRACT.md")
	named := map[string]bool{}
	for _, m := range contractRoute.FindAllStringSubmatch(doc, -1) {
		for _, method := range strings.Split(m[1], "|") {
			for _, p := range expandPath(m[2]) {
				named[method+" "+p] = true
			}
		}
	}
	served := map[string]bool{}
	for i := range routes {
		served[routes[i].method+" "+routes[i].pattern] = true
	}
	for r := range served {
		if !named[r] {
			t.Errorf("%s is served but docs/CONTRACT.md does not name it", r)
		}
	}
	for r := range named {
		if !served[r] {
			t.Errorf("docs/CONTRACT.md names %s, which is not served", r)
		}
	}
}

func TestContractNamesEveryErrorCode(t *testing.T) {
	doc := readDoc(t, "docs/CONTRACT.md")
	start := strings.Index(doc, "with these codes:")
	end := strings.Index(doc[start:], "A record of another firm")
	if start < 0 || end < 0 {
		t.Fatal("docs/CONTRACT.md has no list of error codes")
	}
	listed := map[int][]string{}
	group := regexp.MustCompile("(\\d{3}) ((?:`[a-z_]+`(?:,\\s+)?)+)")
	for _, m := range group.FindAllStringSubmatch(doc[start:start+end], -1) {
		status, _ := strconv.Atoi(m[1])
		for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[2], -1) {
			listed[status] = append(listed[status], c[1])
		}
	}
	for status, codes := range errorCodes {
		if !slices.Equal(listed[status], codes) {
			t.Errorf("docs/CONTRACT.md lists %d as %q; the gateway answers %q", status, listed[status], codes)
		}
	}
	for status := range listed {
		if _, ok := errorCodes[status]; !ok {
			t.Errorf("docs/CONTRACT.md lists %d, which the gateway never answers with an error", status)
		}
	}
}

func TestContractNamesEveryEventKind(t *testing.T) {
	doc := readDoc(t, "docs/CONTRACT.md")
	kinds := append(dispatcher.Kinds(), "engagement_letter.signed")
	for _, k := range kinds {
		if !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("docs/CONTRACT.md does not name the event kind %s", k)
		}
	}
	section := doc[strings.Index(doc, "- Kinds:"):]
	section = section[:strings.Index(section, "\n- ")]
	for _, m := range regexp.MustCompile("`([a-z_]+\\.[a-z_]+)`").FindAllStringSubmatch(section, -1) {
		if !slices.Contains(kinds, m[1]) {
			t.Errorf("docs/CONTRACT.md names the event kind %s, which the gateway does not raise", m[1])
		}
	}
}

// Every link in the repository's Markdown points inside the repository (or
// to the web): the documentation travels with the code.
func TestDocumentationLinksStayInTheRepository(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			abs := filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			rel, _ := filepath.Rel(root, abs)
			if strings.HasPrefix(rel, "..") {
				t.Errorf("%s links to %s, outside the repository", strings.TrimPrefix(path, root+"/"), target)
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to %s, which does not exist", strings.TrimPrefix(path, root+"/"), target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
