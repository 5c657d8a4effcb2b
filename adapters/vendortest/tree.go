package vendortest

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tree is a document store's folders and files, shared by the Graph,
// Drive and Dropbox doubles; each renders it in its vendor's shape. It
// logs every change a test makes, from which each double serves its
// vendor's change feed.
type tree struct {
	mu     sync.Mutex
	prefix string // id prefix, in the vendor's style
	seq    int
	nodes  map[string]*node
	root   *node

	// rev numbers the changes in log; a feed position is the rev of the
	// last change it has seen. Positions below floor have expired.
	rev, floor int
	log        []change
	// removed keeps deleted nodes, by id, for feeds to describe.
	removed map[string]*node
	// left is the file that last left a path (lowercased), by deletion
	// or move, for Dropbox's list_revisions.
	left map[string]*node
	// dirty says a change was made since the double last told its
	// subscribers, and poke tells the double's pusher (nil: none).
	dirty atomic.Bool
	poke  func()
}

// change is one logged change to a node.
type change struct {
	rev  int
	node *node
	// gone says the node was deleted; moved that it was moved. from is
	// its path before (deleted or moved).
	gone, moved bool
	from        string
	// top says the change was made to this node, not to a folder above
	// it (a deleted folder logs each node below it too).
	top bool
}

func (t *tree) record(c change) {
	t.rev++
	c.rev = t.rev
	t.log = append(t.log, c)
	t.dirty.Store(true)
	if t.poke != nil {
		t.poke()
	}
}

// since returns the changes after position pos, up to rev to, and
// whether pos has expired.
func (t *tree) since(pos, to int) ([]change, bool) {
	if pos < t.floor || pos > t.rev {
		return nil, false
	}
	i := sort.Search(len(t.log), func(i int) bool { return t.log[i].rev > pos })
	j := sort.Search(len(t.log), func(i int) bool { return t.log[i].rev > to })
	return t.log[i:max(i, j)], true
}

// latest returns each node changed in cs once, at its last change, in
// the order of those changes.
func latest(cs []change) []change {
	last := map[*node]int{}
	for i, c := range cs {
		last[c.node] = i
	}
	var out []change
	for i, c := range cs {
		if last[c.node] == i {
			out = append(out, c)
		}
	}
	return out
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
	return &tree{prefix: prefix, nodes: map[string]*node{rootID: r}, root: r,
		removed: map[string]*node{}, left: map[string]*node{}}
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
	attach(parent, n)
	t.record(change{node: n, top: true})
	return n
}

func attach(parent, n *node) {
	n.parent = parent
	parent.children = append(parent.children, n)
	sort.SliceStable(parent.children, func(i, j int) bool { return parent.children[i].name < parent.children[j].name })
}

func detach(n *node) {
	kids := n.parent.children
	for i, c := range kids {
		if c == n {
			n.parent.children = append(kids[:i:i], kids[i+1:]...)
			return
		}
	}
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
		t.record(change{node: n, top: true})
	}
}

// remove deletes a file or a folder with everything below it.
func (t *tree) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[id]
	if n == nil || n == t.root {
		return
	}
	from := t.path(n)
	var below []*node
	walkTree(n, func(c *node) { below = append(below, c) })
	paths := map[*node]string{}
	for _, c := range below {
		paths[c] = t.path(c)
	}
	detach(n)
	for _, c := range append(below, n) {
		delete(t.nodes, c.id)
		t.removed[c.id] = c
		p := from
		if c != n {
			p = paths[c]
		}
		if !c.folder {
			t.left[strings.ToLower(p)] = c
		}
		t.record(change{node: c, gone: true, from: p, top: c == n})
	}
}

// move puts a file or folder in the folder at dir (made as needed).
func (t *tree) move(id, dir string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.nodes[id]
	if n == nil || n == t.root {
		return
	}
	from := t.path(n)
	if !n.folder {
		t.left[strings.ToLower(from)] = n
	}
	detach(n)
	attach(t.folder(dir, at), n)
	n.modified = at
	t.record(change{node: n, moved: true, from: from, top: true})
}

// expire retires every feed position handed out so far.
func (t *tree) expire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rev++
	t.floor = t.rev
}

// present says whether a node is still in the tree.
func (t *tree) present(n *node) bool { return t.nodes[n.id] == n }

// walk lists every node below n, depth first in name order.
func walkTree(n *node, fn func(*node)) {
	for _, c := range n.children {
		fn(c)
		if c.folder {
			walkTree(c, fn)
		}
	}
}

// lookup returns the id of the node at path p, "" for none.
func (t *tree) lookup(p string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := ""
	walkTree(t.root, func(n *node) {
		if t.path(n) == p {
			id = n.id
		}
	})
	return id
}
