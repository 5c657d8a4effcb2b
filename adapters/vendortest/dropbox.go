package vendortest

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dropbox is a double of the Dropbox API v2 files endpoints:
// POST /2/files/list_folder (recursive, limit), /2/files/list_folder/continue
// and /2/files/get_metadata, with a bearer token required and Dropbox's
// 409 endpoint errors ("path/not_found/.."). Changes come as Dropbox
// publishes them: /2/files/list_folder/get_latest_cursor, then
// list_folder/continue with the entries changed since, in order (a
// deleted file or folder as one DeletedMetadata at its path, a moved one
// as that and the entries at its new path, everything below a moved
// folder included), 409 reset for a cursor that has expired; and
// /2/files/list_revisions, which names the file last at a path;
// /2/users/get_current_account; and the app's webhook
// (dropbox_webhooks.go).
type Dropbox struct {
	URL    string
	Token  string
	Faults Faults

	// Identity is the vendor's identity service, on the same server;
	// its live access tokens are accepted beside Token.
	Identity *Identity

	// AccountID is the account the double's files are of.
	AccountID string

	srv  *httptest.Server
	tree *tree
	// hooks are the app's webhooks, told of changes by push
	// (dropbox_webhooks.go).
	hookMu       sync.Mutex
	hooks, extra []string
	sent, failed int
	push         *pusher
}

// NewDropbox starts the double with token "dropbox-token".
func NewDropbox() *Dropbox {
	d := &Dropbox{Token: "dropbox-token", tree: newTree("id:dbx", "id:root"), AccountID: "dbid:AAH4f99T0taONIb-OurWxbNQ6ywGRopQngc"}
	d.push = startPusher(d.tellChanges)
	d.tree.poke = d.push.poke
	d.Identity = newIdentity(dropboxIdentity, "dropbox-client")
	d.srv = httptest.NewServer(d.Identity.mount(d.Faults.wrap(http.HandlerFunc(d.serve))))
	d.Identity.URL = d.srv.URL
	d.URL = d.srv.URL
	return d
}

// Close stops the server, and the notifications it sends.
func (d *Dropbox) Close() {
	d.push.stop()
	d.srv.Close()
}

// AddFile puts a file at a path and returns its id ("id:...").
func (d *Dropbox) AddFile(p string, size int64, at time.Time) string {
	return d.tree.addFile(p, size, "", at)
}

// Touch changes a file's server_modified.
func (d *Dropbox) Touch(id string, at time.Time) { d.tree.touch(id, at) }

// Delete deletes a file, or a folder with everything below it.
func (d *Dropbox) Delete(id string) { d.tree.remove(id) }

// Move moves a file or folder into the folder at a path.
func (d *Dropbox) Move(id, dir string, at time.Time) { d.tree.move(id, dir, at) }

// Lookup returns the id of the file or folder at a path, "" for none.
func (d *Dropbox) Lookup(p string) string { return d.tree.lookup(p) }

// ExpireCursors makes every cursor of changes handed out so far answer
// reset.
func (d *Dropbox) ExpireCursors() { d.tree.expire() }

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
	if !accepts(r, d.Token, d.Identity) {
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
		Mode      string `json:"mode"`
	}
	if err := json.Unmarshal(body, &arg); err != nil {
		writeJSON(w, http.StatusBadRequest, []byte(`Error in call to API function "files/list_folder": request body: could not decode input as JSON`))
		return
	}
	if r.URL.Path == "/2/users/get_current_account" {
		b, _ := json.Marshal(map[string]any{"account_id": d.AccountID, "email": "office@birchstreet.example",
			"name": map[string]string{"display_name": "Birch Street CPAs"}, "disabled": false})
		writeJSON(w, http.StatusOK, b)
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
	case "/2/files/list_folder/get_latest_cursor":
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
		b, _ := json.Marshal(map[string]string{"cursor": feedCursor(arg.Path, d.tree.rev, limit)})
		writeJSON(w, http.StatusOK, b)
	case "/2/files/list_revisions":
		d.revisions(w, arg.Path, arg.Mode)
	case "/2/files/list_folder/continue":
		raw, err := base64.RawURLEncoding.DecodeString(arg.Cursor)
		if err != nil {
			dropboxError(w, http.StatusConflict, "reset/..")
			return
		}
		if f, ok := strings.CutPrefix(string(raw), "feed|"); ok {
			d.changes(w, f)
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

// feedCursor is a cursor of the changes below dir after position rev.
func feedCursor(dir string, rev, limit int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("feed|" + strconv.Itoa(rev) + "|" + strconv.Itoa(limit) + "|" + dir))
}

// changes answers list_folder/continue on a cursor of changes: the
// entries of the changes after its position, up to its limit.
func (d *Dropbox) changes(w http.ResponseWriter, cursor string) {
	parts := strings.SplitN(cursor, "|", 3)
	if len(parts) != 3 {
		dropboxError(w, http.StatusConflict, "reset/..")
		return
	}
	rev, _ := strconv.Atoi(parts[0])
	limit, _ := strconv.Atoi(parts[1])
	dir := strings.ToLower(parts[2])
	cs, ok := d.tree.since(rev, d.tree.rev)
	if !ok {
		dropboxError(w, http.StatusConflict, "reset/..")
		return
	}
	under := func(p string) bool { return dir == "" || strings.HasPrefix(strings.ToLower(p), dir+"/") }
	entries := []any{}
	deleted := func(p string) {
		if under(p) {
			entries = append(entries, map[string]any{".tag": "deleted", "name": path.Base(p), "path_display": p, "path_lower": strings.ToLower(p)})
		}
	}
	done := 0
	for _, c := range cs {
		if len(entries) >= limit {
			break
		}
		n := c.node
		switch {
		case c.gone:
			if c.top {
				deleted(c.from)
			}
		case c.moved:
			deleted(c.from)
			if d.tree.present(n) && under(d.tree.path(n)) {
				entries = append(entries, d.meta(n))
				walkTree(n, func(c *node) { entries = append(entries, d.meta(c)) })
			}
		case d.tree.present(n) && under(d.tree.path(n)):
			entries = append(entries, d.meta(n))
		}
		rev = c.rev
		done++
	}
	b, _ := json.Marshal(map[string]any{"entries": entries, "cursor": feedCursor(parts[2], rev, limit), "has_more": done < len(cs)})
	writeJSON(w, http.StatusOK, b)
}

// revisions answers list_revisions in path mode: the file at p, or the
// one that last left it.
func (d *Dropbox) revisions(w http.ResponseWriter, p, mode string) {
	if mode != "" && mode != "path" {
		dropboxError(w, http.StatusBadRequest, "bad_request/")
		return
	}
	n := d.find(p)
	deleted := n == nil
	if deleted {
		n = d.tree.left[strings.ToLower(p)]
	}
	switch {
	case n == nil:
		dropboxError(w, http.StatusConflict, "path/not_found/..")
		return
	case n.folder:
		dropboxError(w, http.StatusConflict, "path/not_file/..")
		return
	}
	body := map[string]any{"is_deleted": deleted, "entries": []any{d.meta(n)}}
	if deleted {
		body["server_deleted"] = n.modified.UTC().Format(time.RFC3339)
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}
