package vendortest

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// Dropbox is a double of the Dropbox API v2 files endpoints:
// POST /2/files/list_folder (recursive, limit), /2/files/list_folder/continue
// and /2/files/get_metadata, with a bearer token required and Dropbox's
// 409 endpoint errors ("path/not_found/..").
type Dropbox struct {
	URL    string
	Token  string
	Faults Faults

	srv  *httptest.Server
	tree *tree
}

// NewDropbox starts the double with token "dropbox-token".
func NewDropbox() *Dropbox {
	d := &Dropbox{Token: "dropbox-token", tree: newTree("id:dbx", "id:root")}
	d.srv = httptest.NewServer(d.Faults.wrap(http.HandlerFunc(d.serve)))
	d.URL = d.srv.URL
	return d
}

// Close stops the server.
func (d *Dropbox) Close() { d.srv.Close() }

// AddFile puts a file at a path and returns its id ("id:...").
func (d *Dropbox) AddFile(p string, size int64, at time.Time) string {
	return d.tree.addFile(p, size, "", at)
}

func dropboxError(w http.ResponseWriter, status int, summary string) {
	tag, _, _ := strings.Cut(summary, "/")
	b, _ := json.Marshal(map[string]any{"error_summary": summary, "error": map[string]any{".tag": tag}})
	writeJSON(w, status, b)
}

func (d *Dropbox) meta(n *node) map[string]any {
	p := d.tree.path(n)
	m := map[string]any{"name": n.name, "id": n.id, "path_display": p, "path_lower": strings.ToLower(p)}
	if n.folder {
		m[".tag"] = "folder"
		return m
	}
	m[".tag"] = "file"
	m["client_modified"] = n.created.UTC().Format(time.RFC3339)
	m["server_modified"] = n.modified.UTC().Format(time.RFC3339)
	m["rev"] = "a1c10ce0dd78"
	m["size"] = n.size
	m["is_downloadable"] = true
	m["content_hash"] = "599d71033d700ac892a0e48fa61b125d0f5994be12c8093a5f9a5a2f1dc2ed7c"
	return m
}

func (d *Dropbox) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+d.Token {
		dropboxError(w, http.StatusUnauthorized, "invalid_access_token/")
		return
	}
	if r.Method != http.MethodPost {
		dropboxError(w, http.StatusBadRequest, "bad_request/")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var arg struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
		Limit     int    `json:"limit"`
		Cursor    string `json:"cursor"`
	}
	if err := json.Unmarshal(body, &arg); err != nil {
		writeJSON(w, http.StatusBadRequest, []byte(`Error in call to API function "files/list_folder": request body: could not decode input as JSON`))
		return
	}
	d.tree.mu.Lock()
	defer d.tree.mu.Unlock()
	switch r.URL.Path {
	case "/2/files/get_metadata":
		n := d.find(arg.Path)
		if n == nil || n == d.tree.root {
			dropboxError(w, http.StatusConflict, "path/not_found/..")
			return
		}
		b, _ := json.Marshal(d.meta(n))
		writeJSON(w, http.StatusOK, b)
	case "/2/files/list_folder":
		n := d.find(arg.Path)
		if arg.Path == "" {
			n = d.tree.root
		}
		if n == nil || !n.folder {
			dropboxError(w, http.StatusConflict, "path/not_found/..")
			return
		}
		limit := arg.Limit
		if limit <= 0 || limit > 2000 {
			limit = 2000
		}
		var entries []*node
		if arg.Recursive {
			walkTree(n, func(c *node) { entries = append(entries, c) })
		} else {
			entries = n.children
		}
		var all []string
		for _, e := range entries {
			all = append(all, e.id)
		}
		d.page(w, strings.Join(all, ","), 0, limit)
	case "/2/files/list_folder/continue":
		raw, err := base64.RawURLEncoding.DecodeString(arg.Cursor)
		if err != nil {
			dropboxError(w, http.StatusConflict, "reset/..")
			return
		}
		ids, pos, _ := strings.Cut(string(raw), "|")
		off, lim, _ := strings.Cut(pos, ":")
		o, _ := strconv.Atoi(off)
		l, _ := strconv.Atoi(lim)
		d.page(w, ids, o, l)
	default:
		dropboxError(w, http.StatusBadRequest, "bad_request/")
	}
}

// page answers entries of a listing from off. The cursor carries the
// listing as it was at its start and the next offset, so a cursor always
// continues the same sequence, as Dropbox's do.
func (d *Dropbox) page(w http.ResponseWriter, ids string, off, limit int) {
	var list []string
	if ids != "" {
		list = strings.Split(ids, ",")
	}
	end := min(off+limit, len(list))
	entries := []any{}
	for _, id := range list[min(off, end):end] {
		if n := d.tree.nodes[id]; n != nil {
			entries = append(entries, d.meta(n))
		}
	}
	cursor := base64.RawURLEncoding.EncodeToString([]byte(ids + "|" + strconv.Itoa(end) + ":" + strconv.Itoa(limit)))
	b, _ := json.Marshal(map[string]any{"entries": entries, "cursor": cursor, "has_more": end < len(list)})
	writeJSON(w, http.StatusOK, b)
}

// find resolves "id:..." or a path, ignoring case as Dropbox does.
func (d *Dropbox) find(p string) *node {
	if strings.HasPrefix(p, "id:") {
		return d.tree.nodes[p]
	}
	var found *node
	walkTree(d.tree.root, func(n *node) {
		if strings.EqualFold(d.tree.path(n), p) {
			found = n
		}
	})
	return found
}
