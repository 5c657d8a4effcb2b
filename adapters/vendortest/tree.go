package vendortest

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// tree is a document store's folders and files, shared by the Graph,
// Drive and Dropbox doubles; each renders it in its vendor's shape.
type tree struct {
	mu     sync.Mutex
	prefix string // id prefix, in the vendor's style
	seq    int
	nodes  map[string]*node
	root   *node
}

type node struct {
	id, name string
	parent   *node
	folder   bool
	size     int64
	mime     string
	created  time.Time
	modified time.Time
	children []*node // in name order
	trashed  bool
}

func newTree(prefix, rootID string) *tree {
	r := &node{id: rootID, name: "", folder: true}
	return &tree{prefix: prefix, nodes: map[string]*node{rootID: r}, root: r}
}

func (t *tree) path(n *node) string {
	if n == nil || n == t.root {
		return "/"
	}
	return path.Join(t.path(n.parent), n.name)
}

// folder returns the folder at p, making it and its parents as needed.
func (t *tree) folder(p string, at time.Time) *node {
	cur := t.root
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		if seg == "" {
			continue
		}
		var next *node
		for _, c := range cur.children {
			if c.name == seg && c.folder {
				next = c
			}
		}
		if next == nil {
			next = t.add(cur, seg, true, at)
		}
		cur = next
	}
	return cur
}

func (t *tree) add(parent *node, name string, folder bool, at time.Time) *node {
	t.seq++
	n := &node{id: fmt.Sprintf("%s%06d", t.prefix, t.seq), name: name, parent: parent, folder: folder, created: at, modified: at}
	t.nodes[n.id] = n
	parent.children = append(parent.children, n)
	sort.SliceStable(parent.children, func(i, j int) bool { return parent.children[i].name < parent.children[j].name })
	return n
}

// addFile puts a file at p (folders made as needed) and returns its id.
func (t *tree) addFile(p string, size int64, mime string, at time.Time) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	dir, name := path.Split(p)
	n := t.add(t.folder(dir, at), name, false, at)
	n.size, n.mime = size, mime
	return n.id
}

// touch changes a file's modified time.
func (t *tree) touch(id string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.nodes[id]; n != nil {
		n.modified = at
	}
}

// walk lists every node below n, depth first in name order.
func walkTree(n *node, fn func(*node)) {
	for _, c := range n.children {
		fn(c)
		if c.folder {
			walkTree(c, fn)
		}
	}
}
