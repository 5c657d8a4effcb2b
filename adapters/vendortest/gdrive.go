package vendortest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GDrive is a double of the Google Drive API v3 files resource under
// /drive/v3: files.list with q "'<id>' in parents and trashed = false",
// pageSize and nextPageToken; files.get; a bearer token required and
// Google's error body. Sizes are strings, as Drive writes int64s. Its
// changes resource serves changes.getStartPageToken and changes.list
// (pageToken, pageSize, nextPageToken then newStartPageToken; each file
// once at its latest state, removed or trashed; 400 for a page token
// that has expired), and push notification channels on changes
// (changes.watch, channels.stop: gdrive_channels.go).
type GDrive struct {
	URL    string // the API base, .../drive/v3
	Token  string
	Faults Faults

	// Identity is the vendor's identity service, on the same server;
	// its live access tokens are accepted beside Token.
	Identity *Identity

	srv  *httptest.Server
	tree *tree
	// channels are the push notification channels on changes, told by
	// push (gdrive_channels.go); syncs are those owed their sync message.
	chMu     sync.Mutex
	channels map[string]*DriveChannel
	syncs    []string
	messages int
	push     *pusher
}

// NewGDrive starts the double with token "drive-token"; the root folder's
// id is "root".
func NewGDrive() *GDrive {
	d := &GDrive{Token: "drive-token", tree: newTree("1drv", "root")}
	d.push = startPusher(d.tellChanges)
	d.tree.poke = d.push.poke
	d.Identity = newIdentity(googleIdentity, "drive-client")
	d.srv = httptest.NewServer(d.Identity.mount(d.Faults.wrap(http.HandlerFunc(d.serve))))
	d.Identity.URL = d.srv.URL
	d.URL = d.srv.URL + "/drive/v3"
	return d
}

// Close stops the server, and the notifications it sends.
func (d *GDrive) Close() {
	d.push.stop()
	d.srv.Close()
}

// AddFile puts a file at a path below the root and returns its id.
func (d *GDrive) AddFile(p string, size int64, mime string, at time.Time) string {
	return d.tree.addFile(p, size, mime, at)
}

// Touch changes a file's modifiedTime.
func (d *GDrive) Touch(id string, at time.Time) { d.tree.touch(id, at) }

// Delete deletes a file for good, and everything below a folder.
func (d *GDrive) Delete(id string) { d.tree.remove(id) }

// Move moves a file or folder into the folder at a path below the root.
func (d *GDrive) Move(id, dir string, at time.Time) { d.tree.move(id, dir, at) }

// Trash moves a file or folder to the trash, with everything below it.
func (d *GDrive) Trash(id string) {
	d.tree.mu.Lock()
	defer d.tree.mu.Unlock()
	n := d.tree.nodes[id]
	if n == nil || n == d.tree.root {
		return
	}
	for _, c := range append([]*node{n}, collect(n)...) {
		c.trashed = true
		d.tree.record(change{node: c, top: c == n})
	}
}

// Lookup returns the id of the file or folder at a path below the root,
// "" for none.
func (d *GDrive) Lookup(p string) string { return d.tree.lookup(p) }

// ExpireChanges makes every page token handed out so far refused.
func (d *GDrive) ExpireChanges() { d.tree.expire() }

func collect(n *node) []*node {
	var out []*node
	walkTree(n, func(c *node) { out = append(out, c) })
	return out
}

func driveError(w http.ResponseWriter, status int, reason, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg,
		"errors": []map[string]string{{"domain": "global", "reason": reason, "message": msg}}}})
	writeJSON(w, status, b)
}

func (d *GDrive) file(n *node) map[string]any {
	m := map[string]any{"kind": "drive#file", "id": n.id, "name": n.name,
		"createdTime": n.created.UTC().Format(time.RFC3339Nano), "modifiedTime": n.modified.UTC().Format(time.RFC3339Nano),
		"webViewLink": "https://drive.google.com/file/d/" + n.id + "/view", "trashed": n.trashed}
	// My Drive's root folder has no parents.
	if n.parent != nil {
		m["parents"] = []string{n.parent.id}
	} else {
		m["name"] = "My Drive"
	}
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
	if !accepts(r, d.Token, d.Identity) {
		driveError(w, http.StatusUnauthorized, "authError", "Invalid Credentials")
		return
	}
	switch r.URL.Path {
	case "/drive/v3/changes/watch":
		d.watch(w, r)
		return
	case "/drive/v3/channels/stop":
		d.stop(w, r)
		return
	}
	d.tree.mu.Lock()
	defer d.tree.mu.Unlock()
	switch r.URL.Path {
	case "/drive/v3/changes/startPageToken":
		b, _ := json.Marshal(map[string]string{"kind": "drive#startPageToken", "startPageToken": strconv.Itoa(d.tree.rev + 1)})
		writeJSON(w, http.StatusOK, b)
		return
	case "/drive/v3/changes":
		d.changes(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/drive/v3/files")
	if !ok || r.Method != http.MethodGet {
		driveError(w, http.StatusNotFound, "notFound", "Not Found")
		return
	}
	if id := strings.TrimPrefix(rest, "/"); id != "" {
		n := d.tree.nodes[id]
		if n == nil {
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

// changes serves changes.list. A page token is the first change it
// covers; a next page token is "<first>.<last>.<skip>", a page of the
// changes between two positions.
func (d *GDrive) changes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	invalid := func(param string) {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": 400, "message": "Invalid Value",
			"errors": []map[string]string{{"domain": "global", "reason": "invalid", "message": "Invalid Value",
				"locationType": "parameter", "location": param}}}})
		writeJSON(w, http.StatusBadRequest, b)
	}
	size := 100
	if v := q.Get("pageSize"); v != "" {
		size, _ = strconv.Atoi(v)
		if size < 1 || size > 1000 {
			invalid("pageSize")
			return
		}
	}
	parts := strings.Split(q.Get("pageToken"), ".")
	first, err := strconv.Atoi(parts[0])
	if err != nil || (len(parts) != 1 && len(parts) != 3) {
		invalid("pageToken")
		return
	}
	to, skip := d.tree.rev, 0
	if len(parts) == 3 {
		to, _ = strconv.Atoi(parts[1])
		skip, _ = strconv.Atoi(parts[2])
	}
	cs, ok := d.tree.since(first-1, to)
	if !ok {
		invalid("pageToken")
		return
	}
	all := latest(cs)
	end := min(skip+size, len(all))
	out := []any{}
	for _, c := range all[min(skip, end):end] {
		ch := map[string]any{"kind": "drive#change", "changeType": "file", "fileId": c.node.id,
			"time": c.node.modified.UTC().Format(time.RFC3339Nano), "removed": !d.tree.present(c.node)}
		if d.tree.present(c.node) {
			ch["file"] = d.file(c.node)
		}
		out = append(out, ch)
	}
	body := map[string]any{"kind": "drive#changeList", "changes": out}
	if end < len(all) {
		body["nextPageToken"] = fmt.Sprintf("%d.%d.%d", first, to, end)
	} else {
		body["newStartPageToken"] = strconv.Itoa(to + 1)
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}
