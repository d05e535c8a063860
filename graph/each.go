package graph

// RangeArtifacts calls fn for every artifact of the state in no particular
// order until fn returns false. It allocates nothing, for callers that
// aggregate (counts by type or trust) and need no order; fn must not
// change the state.
func (s *State) RangeArtifacts(fn func(a *Artifact) bool) {
	if s.whole() {
		for _, a := range s.artifacts {
			if !fn(a) {
				return
			}
		}
		return
	}
	for _, a := range s.allArtifacts() {
		if !fn(a) {
			return
		}
	}
}

// RangeEdges calls fn for every edge of the state in no particular order
// until fn returns false; like RangeArtifacts it is for aggregation, and
// fn must not change the state.
func (s *State) RangeEdges(fn func(e *Edge) bool) {
	if s.whole() {
		for _, e := range s.edges {
			if !fn(e) {
				return
			}
		}
		return
	}
	for _, e := range s.allEdges() {
		if !fn(e) {
			return
		}
	}
}

// RangeOut calls fn for every edge leaving id in no particular order
// until fn returns false; fn must not change the state.
func (s *State) RangeOut(id string, fn func(e *Edge) bool) {
	for _, e := range s.outOf(id).all() {
		if !fn(e) {
			return
		}
	}
}
