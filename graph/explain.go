package graph

import "slices"

// explainer computes Trust values like trustTxn.explain, memoising each
// unconfirmed artifact's distance to its nearest poison root, its next hop
// on the way there and its set of roots, so that explaining many artifacts
// costs one pass over the unconfirmed region they rest on instead of one
// walk of that region per artifact. For every id it returns exactly what
// explain would: the same roots, the same shortest path (smallest ids
// first among equals), the same truncation.
type explainer struct {
	tx *trustTxn
	s  *State
	// memo holds the explained unconfirmed artifacts.
	memo map[string]*hop
}

// hop is one unconfirmed artifact's memo entry.
type hop struct {
	dist  int32  // dependency edges to the nearest poison root (0: a root)
	next  string // the smallest-id neighbour one step closer; "" for a root
	roots []string
}

func newExplainer(tx *trustTxn, s *State) *explainer {
	return &explainer{tx: tx, s: s, memo: make(map[string]*hop)}
}

// Explainer returns a function that explains artifacts of s like Explain,
// sharing work between calls: an audit of a 20,000-deep quarantined chain
// costs one pass over the chain, not one per artifact. The function must
// not be used after s or t changes.
func (t *TrustIndex) Explainer(s *State) func(id string) Trust {
	ex := newExplainer(&trustTxn{t: t}, s)
	return ex.explain
}

// unconfirmedDeps returns the unconfirmed dependencies of id.
func (ex *explainer) unconfirmedDeps(id string) []string {
	var out []string
	for k := range ex.s.outOf(id).all() {
		if !ex.s.rels.Depends(k.Rel) {
			continue
		}
		if d, ok := ex.tx.get(k.To); ok && !d.conf {
			out = append(out, k.To)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// fill computes the memo entry of id and of every unconfirmed artifact it
// rests on, children first, with an explicit stack (chains are deep).
func (ex *explainer) fill(id string) *hop {
	if h := ex.memo[id]; h != nil {
		return h
	}
	type frame struct {
		id   string
		deps []string
	}
	stack := []frame{{id: id, deps: ex.unconfirmedDeps(id)}}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		pushed := false
		for _, d := range f.deps {
			if ex.memo[d] == nil {
				stack = append(stack, frame{id: d, deps: ex.unconfirmedDeps(d)})
				pushed = true
				break
			}
		}
		if pushed {
			continue
		}
		st, _ := ex.tx.get(f.id)
		h := &hop{}
		if !st.base {
			h.roots = []string{f.id}
		} else {
			h.dist = -1
		}
		for _, d := range f.deps { // sorted: the first at the least distance wins
			c := ex.memo[d]
			h.roots = mergeSorted(h.roots, c.roots)
			if st.base && (h.dist < 0 || c.dist+1 < h.dist) {
				h.dist, h.next = c.dist+1, d
			}
		}
		ex.memo[f.id] = h
		stack = stack[:len(stack)-1]
	}
	return ex.memo[id]
}

// explain returns id's Trust (see TrustIndex.Explain).
func (ex *explainer) explain(id string) Trust {
	st, ok := ex.tx.get(id)
	switch {
	case !ok:
		return Trust{ID: id}
	case st.conf:
		return Trust{ID: id, Status: StatusConfirmed}
	case !st.base:
		return Trust{ID: id, Status: StatusPoisonRoot, Reason: ex.tx.reasonOf(id)}
	}
	h := ex.fill(id)
	tr := Trust{ID: id, Status: StatusQuarantined, Roots: h.roots, Path: []string{id}}
	for cur := h; cur.dist > 0; cur = ex.memo[cur.next] {
		if len(tr.Path) == MaxTrustPath {
			tr.PathTruncated = true
			break
		}
		tr.Path = append(tr.Path, cur.next)
	}
	return tr
}

// mergeSorted returns the sorted union of two sorted, duplicate-free
// slices, sharing a when b adds nothing.
func mergeSorted(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, a[i:]...)
	out = append(out, b[j:]...)
	if len(out) == len(a) {
		return a
	}
	return out
}
