package vendortest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
// expired token); change notification subscriptions on a drive
// (graph_subscriptions.go). What a consent's grant reaches is served as Graph
// publishes it: GET /sites?search={query} (the sites, paged as children
// are; "*" or nothing matches every one), GET /sites/{site}/drive (a
// site's default document library) and GET /me/drive (the signed-in
// user's OneDrive, the double's first drive).
type Graph struct {
	URL     string // the API base, .../v1.0
	Token   string
	DriveID string
	// SiteID is the site whose default document library is DriveID.
	SiteID string
	Faults Faults

	// Identity is the vendor's identity service, on the same server;
	// its live access tokens are accepted beside Token.
	Identity *Identity

	srv  *httptest.Server
	tree *tree

	mu     sync.Mutex // guards sites, drives and subs
	sites  []graphSite
	drives map[string]*tree
	// subs are the change notification subscriptions, told of changes
	// by push (graph_subscriptions.go).
	subs map[string]*GraphSubscription
	push *pusher
}

// graphSite is a SharePoint site and its default document library.
type graphSite struct {
	id, name, drive string
}

// NewGraph starts the double with token "graph-token".
func NewGraph() *Graph {
	g := &Graph{Token: "graph-token", DriveID: "b!drive1", tree: newTree("01GRAPH", "01ROOT"),
		SiteID: "contoso.sharepoint.com,2c712604-1370-44e7-a1f5-426573fda80a,2d2244c3-251a-49ea-93a8-39e1c3a060fe"}
	g.drives = map[string]*tree{g.DriveID: g.tree}
	g.sites = []graphSite{{id: g.SiteID, name: "Clients", drive: g.DriveID}}
	g.push = startPusher(g.tellChanges)
	g.tree.poke = g.push.poke
	g.Identity = newIdentity(microsoftIdentity, "graph-client")
	g.srv = httptest.NewServer(g.Identity.mount(g.Faults.wrap(http.HandlerFunc(g.serve))))
	g.Identity.URL = g.srv.URL
	g.URL = g.srv.URL + "/v1.0"
	return g
}

// Close stops the server, and the notifications it sends.
func (g *Graph) Close() {
	g.push.stop()
	g.srv.Close()
}

// AddSite adds a site named name with a default document library of its
// own, empty, and returns their ids.
func (g *Graph) AddSite(name string) (siteID, driveID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := len(g.sites) + 1
	siteID = fmt.Sprintf("contoso.sharepoint.com,%08x-0000-4000-8000-%012x,%08x-0000-4000-8000-%012x", n, n, n, n)
	driveID = fmt.Sprintf("b!drive%d", n)
	g.sites = append(g.sites, graphSite{id: siteID, name: name, drive: driveID})
	t := newTree(fmt.Sprintf("0%dGRAPH", n), fmt.Sprintf("0%dROOT", n))
	t.poke = g.push.poke
	g.drives[driveID] = t
	return siteID, driveID
}

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
	if n := lookupNode(g.tree, p); n != nil {
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

// item is node n of drive d as Graph answers it.
func (g *Graph) item(d graphDrive, n *node) map[string]any {
	if n.parent == nil {
		return map[string]any{"id": n.id, "name": "root", "root": map[string]any{}, "folder": map[string]int{"childCount": len(n.children)},
			"createdDateTime": n.created.UTC().Format(time.RFC3339), "lastModifiedDateTime": n.modified.UTC().Format(time.RFC3339),
			"parentReference": map[string]string{"driveId": d.id, "driveType": "documentLibrary"}}
	}
	parentPath := "/drives/" + d.id + "/root:" + strings.TrimSuffix(d.tree.path(n.parent), "/")
	m := map[string]any{
		"id": n.id, "name": n.name, "eTag": "\"{" + n.id + "},1\"", "size": n.size,
		"createdDateTime": n.created.UTC().Format(time.RFC3339), "lastModifiedDateTime": n.modified.UTC().Format(time.RFC3339),
		"webUrl":          d.webURL + (&url.URL{Path: d.tree.path(n)}).EscapedPath(),
		"parentReference": map[string]string{"driveId": d.id, "driveType": "documentLibrary", "id": n.parent.id, "path": parentPath},
	}
	if n.folder {
		m["folder"] = map[string]int{"childCount": len(n.children)}
	} else {
		m["file"] = map[string]any{"mimeType": n.mime}
	}
	return m
}

// graphDrive is one drive as a request names it.
type graphDrive struct {
	id     string
	webURL string // its site's Shared Documents
	tree   *tree
}

func (g *Graph) serve(w http.ResponseWriter, r *http.Request) {
	if !accepts(r, g.Token, g.Identity) {
		graphError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "Access token is empty.")
		return
	}
	p, ok := strings.CutPrefix(r.URL.Path, "/v1.0")
	if rest, sub := strings.CutPrefix(p, "/subscriptions"); ok && sub && (rest == "" || strings.HasPrefix(rest, "/")) {
		g.subscriptions(w, r, rest)
		return
	}
	if !ok || r.Method != http.MethodGet {
		graphError(w, http.StatusNotFound, "itemNotFound", "The resource could not be found.")
		return
	}
	switch {
	case p == "/sites":
		g.searchSites(w, r)
		return
	case p == "/me/drive":
		g.drive(w, g.DriveID)
		return
	case strings.HasPrefix(p, "/sites/") && strings.HasSuffix(p, "/drive"):
		site := strings.TrimSuffix(strings.TrimPrefix(p, "/sites/"), "/drive")
		g.mu.Lock()
		drive := ""
		for _, s := range g.sites {
			if s.id == site {
				drive = s.drive
			}
		}
		g.mu.Unlock()
		if drive == "" {
			graphError(w, http.StatusNotFound, "itemNotFound", "Requested site could not be found")
			return
		}
		g.drive(w, drive)
		return
	}
	rest, ok := strings.CutPrefix(p, "/drives/")
	id, p, _ := strings.Cut(rest, "/")
	p = "/" + p
	d, found := g.driveOf(id)
	if !ok || !found {
		graphError(w, http.StatusNotFound, "itemNotFound", "The resource could not be found.")
		return
	}
	d.tree.mu.Lock()
	defer d.tree.mu.Unlock()
	if p == "/root/delta" {
		g.delta(w, r, d)
		return
	}
	var n *node
	list := false
	switch {
	case p == "/root/children":
		n, list = d.tree.root, true
	case strings.HasPrefix(p, "/root:"):
		rest := strings.TrimPrefix(p, "/root:")
		rest, list = strings.CutSuffix(rest, ":/children")
		rest = strings.TrimSuffix(rest, ":")
		n = lookupNode(d.tree, rest)
	case strings.HasPrefix(p, "/items/"):
		rest := strings.TrimPrefix(p, "/items/")
		rest, list = strings.CutSuffix(rest, "/children")
		n = d.tree.nodes[rest]
	}
	if n == nil {
		graphError(w, http.StatusNotFound, "itemNotFound", "The resource could not be found.")
		return
	}
	if !list {
		b, _ := json.Marshal(g.item(d, n))
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
		value = append(value, g.item(d, c))
	}
	body := map[string]any{"@odata.context": g.URL + "/$metadata#Collection(driveItem)", "value": value}
	if end < len(n.children) {
		nq := url.Values{"$top": {strconv.Itoa(top)}, "$skiptoken": {"s" + strconv.Itoa(end)}}
		if s := q.Get("$select"); s != "" {
			nq.Set("$select", s)
		}
		body["@odata.nextLink"] = g.URL + "/drives/" + d.id + "/items/" + n.id + "/children?" + nq.Encode()
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}

// lookupNode is the node at path p of t, nil for none.
func lookupNode(t *tree, p string) *node {
	cur := t.root
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
func (g *Graph) delta(w http.ResponseWriter, r *http.Request, d graphDrive) {
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
		return g.URL + "/drives/" + d.id + "/root/delta?" + nq.Encode()
	}
	body := map[string]any{"@odata.context": g.URL + "/$metadata#Collection(driveItem)", "value": []any{}}
	token := q.Get("token")
	if token == "latest" {
		body["@odata.deltaLink"] = link(strconv.Itoa(d.tree.rev))
		b, _ := json.Marshal(body)
		writeJSON(w, http.StatusOK, b)
		return
	}
	from, to, skip := -1, d.tree.rev, 0
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
		walkTree(d.tree.root, func(n *node) { changes = append(changes, change{node: n}) })
	} else {
		cs, ok := d.tree.since(from, to)
		if !ok {
			graphError(w, http.StatusGone, "resyncRequired", "Resync required. Replace any local items with the server's version (including deletes) if you're sure that the service was up to date with your local changes when you last sync'd. Upload any local changes that the server doesn't know about.")
			return
		}
		changes = latest(cs)
	}
	var items []map[string]any
	seen := map[*node]bool{}
	for _, c := range changes {
		if !d.tree.present(c.node) {
			if !seen[c.node] {
				seen[c.node] = true
				items = append(items, g.deleted(d, c.node))
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
				items = append(items, g.deltaItem(d, n))
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
func (g *Graph) deltaItem(d graphDrive, n *node) map[string]any {
	m := g.item(d, n)
	if ref, ok := m["parentReference"].(map[string]string); ok {
		delete(ref, "path")
	}
	return m
}

// deleted is a deleted item as delta reports it (OneDrive for Business
// leaves out the name).
func (g *Graph) deleted(d graphDrive, n *node) map[string]any {
	m := map[string]any{"id": n.id, "deleted": map[string]string{"state": "deleted"},
		"parentReference": map[string]string{"driveId": d.id, "driveType": "documentLibrary"}}
	if n.folder {
		m["folder"] = map[string]int{"childCount": 0}
	} else {
		m["file"] = map[string]any{}
	}
	return m
}

// driveOf is the drive of id, with its site's address.
func (g *Graph) driveOf(id string) (graphDrive, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.drives[id]
	if !ok {
		return graphDrive{}, false
	}
	d := graphDrive{id: id, tree: t, webURL: "https://contoso.sharepoint.com/Shared%20Documents"}
	for _, s := range g.sites {
		if s.drive == id {
			d.webURL = siteURL(s) + "/Shared%20Documents"
		}
	}
	return d, true
}

func siteURL(s graphSite) string {
	return "https://contoso.sharepoint.com/sites/" + url.PathEscape(strings.ReplaceAll(s.name, " ", ""))
}

// drive answers drive id as Graph's drive resource.
func (g *Graph) drive(w http.ResponseWriter, id string) {
	d, ok := g.driveOf(id)
	if !ok {
		graphError(w, http.StatusNotFound, "itemNotFound", "The resource could not be found.")
		return
	}
	d.tree.mu.Lock()
	created := d.tree.root.created
	d.tree.mu.Unlock()
	b, _ := json.Marshal(map[string]any{
		"@odata.context": g.URL + "/$metadata#drives/$entity",
		"id":             d.id, "name": "Documents", "driveType": "documentLibrary", "description": "",
		"webUrl":          strings.TrimSuffix(d.webURL, "/"),
		"createdDateTime": created.UTC().Format(time.RFC3339), "lastModifiedDateTime": created.UTC().Format(time.RFC3339),
		"owner": map[string]any{"group": map[string]string{"displayName": "Contoso"}},
		"quota": map[string]any{"deleted": 0, "remaining": 27487790694400, "state": "normal", "total": 27487790694400, "used": 0},
	})
	writeJSON(w, http.StatusOK, b)
}

// searchSites answers GET /sites?search={query}: the sites whose name has
// every word of the query ("*" or none: every site), paged by $top with
// @odata.nextLink. Graph lists no site without the search parameter.
func (g *Graph) searchSites(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	top := 200
	if v := q.Get("$top"); v != "" {
		top, _ = strconv.Atoi(v)
		if top < 1 || top > 999 {
			graphError(w, http.StatusBadRequest, "invalidRequest", "Invalid page size specified.")
			return
		}
	}
	skip, _ := strconv.Atoi(q.Get("$skiptoken"))
	var words []string
	if search := strings.Trim(q.Get("search"), `"`); search != "*" {
		words = strings.Fields(strings.ToLower(search))
	}
	g.mu.Lock()
	var found []graphSite
	for _, s := range g.sites {
		match := q.Has("search")
		for _, w := range words {
			match = match && strings.Contains(strings.ToLower(s.name), w)
		}
		if match {
			found = append(found, s)
		}
	}
	g.mu.Unlock()
	end := min(skip+top, len(found))
	value := []any{}
	for _, s := range found[min(skip, end):end] {
		value = append(value, map[string]any{
			"id": s.id, "name": strings.ReplaceAll(s.name, " ", ""), "displayName": s.name, "webUrl": siteURL(s),
			"createdDateTime": "2024-01-15T10:00:00Z", "lastModifiedDateTime": "2026-03-02T09:00:00Z",
		})
	}
	body := map[string]any{"@odata.context": g.URL + "/$metadata#sites", "value": value}
	if end < len(found) {
		nq := url.Values{"search": {q.Get("search")}, "$top": {strconv.Itoa(top)}, "$skiptoken": {strconv.Itoa(end)}}
		body["@odata.nextLink"] = g.URL + "/sites?" + nq.Encode()
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, b)
}
