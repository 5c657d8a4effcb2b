package vendortest

// A list answer's rows are built from every record of the collection
// before $filter and paging; with tens of thousands of work items that is
// most of a page's time (a third of a second for 50,000). KeepListRows
// keeps them until a record changes, for benchmarks of large practices.

// KeepListRows makes list answers reuse the rows built for the previous
// one until a record changes (an Add, a Move, a Remove, any write through
// the API). Off by default: every answer is built afresh.
func (k *Karbon) KeepListRows(on bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keepRows, k.rows = on, nil
}

// changed drops the kept rows; every change to the double's records calls
// it. The caller holds k.mu.
func (k *Karbon) changed() { k.rows = nil }

// keepList keeps a collection's rows until the next change. The caller
// holds k.mu.
func (k *Karbon) keepList(coll string, rows []map[string]any) {
	if !k.keepRows {
		return
	}
	if k.rows == nil {
		k.rows = map[string][]map[string]any{}
	}
	k.rows[coll] = rows
}
