package vendortest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// GDrive is a double of the Google Drive API v3 files resource under
// /drive/v3: files.list with q "'<id>' in parents and trashed = false",
// pageSize and nextPageToken; files.get; a bearer token required and
// Google's error body. Sizes are strings, as Drive writes int64s.
type GDrive struct {
	URL    string // the API base, .../drive/v3
	Token  string
	Faults Faults

	srv  *httptest.Server
	tree *tree
}

// NewGDrive starts the double with token "drive-token"; the root folder's
// id is "root".
func NewGDrive() *GDrive {
	d := &GDrive{Token: "drive-token", tree: newTree("1drv", "root")}
	d.srv = httptest.NewServer(d.Faults.wrap(http.HandlerFunc(d.serve)))
	d.URL = d.srv.URL + "/drive/v3"
	return d
}

// Close stops the server.
func (d *GDrive) Close() { d.srv.Close() }

// AddFile puts a file at a path below the root and returns its id.
func (d *GDrive) AddFile(p string, size int64, mime string, at time.Time) string {
	return d.tree.addFile(p, size, mime, at)
}

func driveError(w http.ResponseWriter, status int, reason, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg,
		"errors": []map[string]string{{"domain": "global", "reason": reason, "message": msg}}}})
	writeJSON(w, status, b)
}

func (d *GDrive) file(n *node) map[string]any {
	m := map[string]any{"kind": "drive#file", "id": n.id, "name": n.name,
		"createdTime": n.created.UTC().Format(time.RFC3339Nano), "modifiedTime": n.modified.UTC().Format(time.RFC3339Nano),
		"webViewLink": "https://drive.google.com/file/d/" + n.id + "/view", "parents": []string{n.parent.id}, "trashed": n.trashed}
	if n.folder {
		m["mimeType"] = "application/vnd.google-apps.folder"
		m["webViewLink"] = "https://drive.google.com/drive/folders/" + n.id
	} else {
		m["mimeType"] = n.mime
		m["size"] = strconv.FormatInt(n.size, 10)
	}
	return m
}

var parentsQuery = regexp.MustCompile(`^'([^']+)' in parents(?: and trashed = false)?$`)

func (d *GDrive) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+d.Token {
		driveError(w, http.StatusUnauthorized, "authError", "Invalid Credentials")
		return
	}
	d.tree.mu.Lock()
	defer d.tree.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.Path, "/drive/v3/files")
	if !ok || r.Method != http.MethodGet {
		driveError(w, http.StatusNotFound, "notFound", "Not Found")
		return
	}
	if id := strings.TrimPrefix(rest, "/"); id != "" {
		n := d.tree.nodes[id]
		if n == nil || n == d.tree.root {
			driveError(w, http.StatusNotFound, "notFound", "File not found: "+id+".")
			return
		}
		b, _ := json.Marshal(d.file(n))
		writeJSON(w, http.StatusOK, b)
		return
	}
	q := r.URL.Query()
	m := parentsQuery.FindStringSubmatch(q.Get("q"))
	if m == nil {
		driveError(w, http.StatusBadRequest, "invalid", "Invalid Value")
		return
	}
	parent := d.tree.nodes[m[1]]
	if parent == nil {
		driveError(w, http.StatusNotFound, "notFound", "File not found: "+m[1]+".")
		return
	}
	size := 100
	if v := q.Get("pageSize"); v != "" {
		size, _ = strconv.Atoi(v)
		if size < 1 || size > 1000 {
			driveError(w, http.StatusBadRequest, "invalid", "Invalid Value")
			return
		}
	}
	start := 0
	if v := q.Get("pageToken"); v != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(v, "tok"))
		if err != nil {
			driveError(w, http.StatusBadRequest, "invalid", "Invalid Value")
			return
		}
		start = n
	}
	// Drive lists folders first when asked orderBy=folder,name.
	kids := append([]*node(nil), parent.children...)
	if strings.HasPrefix(q.Get("orderBy"), "folder") {
		var folders, files []*node
		for _, k := range kids {
			if k.folder {
				folders = append(folders, k)
			} else {
				files = append(files, k)
			}
		}
		kids = append(folders, files...)
	}
	end := min(start+size, len(kids))
	files := []any{}
	for _, c := range kids[min(start, end):end] {
		files = append(files, d.file(c))
	}
	body := map[string]any{"kind": "drive#fileList", "incompleteSearch": false, "files": files}
	if end < len(kids) {
		body["nextPageToken"] = "tok" + strconv.Itoa(end)
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}
