package vendortest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Graph is a double of Microsoft Graph drive items under /v1.0:
// GET /drives/{drive}/items/{item}, .../items/{item}/children,
// /drives/{drive}/root/children and /drives/{drive}/root:/{path}:[/children],
// with $top and @odata.nextLink ($skiptoken), a bearer token required and
// Graph's error body; and the drive's delta feed, GET
// /drives/{drive}/root/delta (token=latest, a previous delta token or
// none; pages of $top with @odata.nextLink, then @odata.deltaLink;
// deleted items with the deleted facet; parents of changed items unless
// the deltaExcludeParent header is sent; 410 resyncRequired for an
// expired token).
type Graph struct {
	URL     string // the API base, .../v1.0
	Token   string
	DriveID string
	Faults  Faults

	// Identity is the vendor's identity service, on the same server;
	// its live access tokens are accepted beside Token.
	Identity *Identity

	srv  *httptest.Server
	tree *tree
}

// NewGraph starts the double with token "graph-token".
func NewGraph() *Graph {
	g := &Graph{Token: "graph-token", DriveID: "b!drive1", tree: newTree("01GRAPH", "01ROOT")}
	g.Identity = newIdentity(microsoftIdentity, "graph-client")
	g.srv = httptest.NewServer(g.Identity.mount(g.Faults.wrap(http.HandlerFunc(g.serve))))
	g.Identity.URL = g.srv.URL
	g.URL = g.srv.URL + "/v1.0"
	return g
}

// Close stops the server.
func (g *Graph) Close() { g.srv.Close() }

// AddFile puts a file at a drive path and returns its item id.
func (g *Graph) AddFile(p string, size int64, mime string, at time.Time) string {
	return g.tree.addFile(p, size, mime, at)
}

// Touch changes a file's lastModifiedDateTime.
func (g *Graph) Touch(id string, at time.Time) { g.tree.touch(id, at) }

// Delete deletes an item, and everything below a folder.
func (g *Graph) Delete(id string) { g.tree.remove(id) }

// Move moves an item into the folder at a drive path.
func (g *Graph) Move(id, dir string, at time.Time) { g.tree.move(id, dir, at) }

// Lookup returns the id of the item at a drive path, "" for none.
func (g *Graph) Lookup(p string) string {
	g.tree.mu.Lock()
	defer g.tree.mu.Unlock()
	if n := g.lookup(p); n != nil {
		return n.id
	}
	return ""
}

// ExpireDelta makes every delta token handed out so far answer 410.
func (g *Graph) ExpireDelta() { g.tree.expire() }

func graphError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg,
		"innerError": map[string]string{"request-id": "test"}}})
	writeJSON(w, status, b)
}

func (g *Graph) item(n *node) map[string]any {
	if n.parent == nil {
		return map[string]any{"id": n.id, "name": "root", "root": map[string]any{}, "folder": map[string]int{"childCount": len(n.children)},
			"createdDateTime": n.created.UTC().Format(time.RFC3339), "lastModifiedDateTime": n.modified.UTC().Format(time.RFC3339),
			"parentReference": map[string]string{"driveId": g.DriveID, "driveType": "documentLibrary"}}
	}
	parentPath := "/drives/" + g.DriveID + "/root:" + strings.TrimSuffix(g.tree.path(n.parent), "/")
	m := map[string]any{
		"id": n.id, "name": n.name, "eTag": "\"{" + n.id + "},1\"", "size": n.size,
		"createdDateTime": n.created.UTC().Format(time.RFC3339), "lastModifiedDateTime": n.modified.UTC().Format(time.RFC3339),
		"webUrl":          "https://contoso.sharepoint.com/sites/Clients/Shared%20Documents" + (&url.URL{Path: g.tree.path(n)}).EscapedPath(),
		"parentReference": map[string]string{"driveId": g.DriveID, "driveType": "documentLibrary", "id": n.parent.id, "path": parentPath},
	}
	if n.folder {
		m["folder"] = map[string]int{"childCount": len(n.children)}
	} else {
		m["file"] = map[string]any{"mimeType": n.mime}
	}
	return m
}

func (g *Graph) serve(w http.ResponseWriter, r *http.Request) {
	if !accepts(r, g.Token, g.Identity) {
		graphError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token is empty.")
		return
	}
	g.tree.mu.Lock()
	defer g.tree.mu.Unlock()
	p, ok := strings.CutPrefix(r.URL.Path, "/v1.0/drives/"+g.DriveID)
	if !ok || r.Method != http.MethodGet {
		graphError(w, http.StatusNotFound, "itemNotFound", "The resource could not be found.")
		return
	}
	if p == "/root/delta" {
		g.delta(w, r)
		return
	}
	var n *node
	list := false
	switch {
	case p == "/root/children":
		n, list = g.tree.root, true
	case strings.HasPrefix(p, "/root:"):
		rest := strings.TrimPrefix(p, "/root:")
		rest, list = strings.CutSuffix(rest, ":/children")
		rest = strings.TrimSuffix(rest, ":")
		n = g.lookup(rest)
	case strings.HasPrefix(p, "/items/"):
		rest := strings.TrimPrefix(p, "/items/")
		rest, list = strings.CutSuffix(rest, "/children")
		n = g.tree.nodes[rest]
	}
	if n == nil {
		graphError(w, http.StatusNotFound, "itemNotFound", "The resource could not be found.")
		return
	}
	if !list {
		b, _ := json.Marshal(g.item(n))
		writeJSON(w, http.StatusOK, b)
		return
	}
	q := r.URL.Query()
	top := 200
	if v := q.Get("$top"); v != "" {
		top, _ = strconv.Atoi(v)
		if top < 1 || top > 999 {
			graphError(w, http.StatusBadRequest, "invalidRequest", "Invalid page size specified.")
			return
		}
	}
	skip := 0
	if v := q.Get("$skiptoken"); v != "" {
		skip, _ = strconv.Atoi(strings.TrimPrefix(v, "s"))
	}
	end := min(skip+top, len(n.children))
	value := []any{}
	for _, c := range n.children[min(skip, end):end] {
		value = append(value, g.item(c))
	}
	body := map[string]any{"@odata.context": g.URL + "/$metadata#Collection(driveItem)", "value": value}
	if end < len(n.children) {
		nq := url.Values{"$top": {strconv.Itoa(top)}, "$skiptoken": {"s" + strconv.Itoa(end)}}
		if s := q.Get("$select"); s != "" {
			nq.Set("$select", s)
		}
		body["@odata.nextLink"] = g.URL + "/drives/" + g.DriveID + "/items/" + n.id + "/children?" + nq.Encode()
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

func (g *Graph) lookup(p string) *node {
	cur := g.tree.root
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		if seg == "" {
			continue
		}
		var next *node
		for _, c := range cur.children {
			if c.name == seg {
				next = c
			}
		}
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

// delta serves the drive's delta feed. A token is the tree's position;
// a next link's token is "<from>.<to>.<skip>", a page of the changes
// between two positions.
func (g *Graph) delta(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	top := 200
	if v := q.Get("$top"); v != "" {
		top, _ = strconv.Atoi(v)
		if top < 1 || top > 999 {
			graphError(w, http.StatusBadRequest, "invalidRequest", "Invalid page size specified.")
			return
		}
	}
	link := func(token string) string {
		nq := url.Values{"token": {token}, "$top": {strconv.Itoa(top)}}
		if s := q.Get("$select"); s != "" {
			nq.Set("$select", s)
		}
		return g.URL + "/drives/" + g.DriveID + "/root/delta?" + nq.Encode()
	}
	body := map[string]any{"@odata.context": g.URL + "/$metadata#Collection(driveItem)", "value": []any{}}
	token := q.Get("token")
	if token == "latest" {
		body["@odata.deltaLink"] = link(strconv.Itoa(g.tree.rev))
		b, _ := json.Marshal(body)
		writeJSON(w, http.StatusOK, b)
		return
	}
	from, to, skip := -1, g.tree.rev, 0
	if token != "" {
		parts := strings.Split(token, ".")
		var err error
		if from, err = strconv.Atoi(parts[0]); err != nil || (len(parts) != 1 && len(parts) != 3) {
			graphError(w, http.StatusBadRequest, "invalidRequest", "Invalid delta token.")
			return
		}
		if len(parts) == 3 {
			to, _ = strconv.Atoi(parts[1])
			skip, _ = strconv.Atoi(parts[2])
		}
	}
	var changes []change
	if from < 0 {
		// The first enumeration: everything there is.
		walkTree(g.tree.root, func(n *node) { changes = append(changes, change{node: n}) })
	} else {
		cs, ok := g.tree.since(from, to)
		if !ok {
			graphError(w, http.StatusGone, "resyncRequired", "Resync required. Replace any local items with the server's version (including deletes) if you're sure that the service was up to date with your local changes when you last sync'd. Upload any local changes that the server doesn't know about.")
			return
		}
		changes = latest(cs)
	}
	var items []map[string]any
	seen := map[*node]bool{}
	for _, c := range changes {
		if !g.tree.present(c.node) {
			if !seen[c.node] {
				seen[c.node] = true
				items = append(items, g.deleted(c.node))
			}
			continue
		}
		// Graph names the parents of a changed item too, unless asked not
		// to.
		var chain []*node
		for n := c.node; n != nil; n = n.parent {
			chain = append(chain, n)
			if r.Header.Get("deltaExcludeParent") != "" {
				break
			}
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if n := chain[i]; !seen[n] {
				seen[n] = true
				items = append(items, g.deltaItem(n))
			}
		}
	}
	end := min(skip+top, len(items))
	value := []any{}
	for _, it := range items[min(skip, end):end] {
		value = append(value, it)
	}
	body["value"] = value
	if end < len(items) {
		body["@odata.nextLink"] = link(fmt.Sprintf("%d.%d.%d", max(from, -1), to, end))
	} else {
		body["@odata.deltaLink"] = link(strconv.Itoa(to))
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

// deltaItem is an item as delta reports it: with no path in its
// parentReference, since delta does not report the items below a
// renamed folder.
func (g *Graph) deltaItem(n *node) map[string]any {
	m := g.item(n)
	if ref, ok := m["parentReference"].(map[string]string); ok {
		delete(ref, "path")
	}
	return m
}

// deleted is a deleted item as delta reports it (OneDrive for Business
// leaves out the name).
func (g *Graph) deleted(n *node) map[string]any {
	m := map[string]any{"id": n.id, "deleted": map[string]string{"state": "deleted"},
		"parentReference": map[string]string{"driveId": g.DriveID, "driveType": "documentLibrary"}}
	if n.folder {
		m["folder"] = map[string]int{"childCount": 0}
	} else {
		m["file"] = map[string]any{}
	}
	return m
}
