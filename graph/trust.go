package graph

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Role is how an artifact type earns its base trust (DESIGN.md, "Trust and
// quarantine").
type Role string

// The roles a type can have.
const (
	// RoleSource is a trusted input, confirmed by itself (question,
	// user_input).
	RoleSource Role = "source"
	// RoleDerived is confirmed iff all of its dependencies are.
	RoleDerived Role = "derived"
	// RoleFetchVerdict is confirmed iff its data's verdict is RETRIEVED.
	RoleFetchVerdict Role = "fetch_verdict"
	// RoleNever is never confirmed (tool_error).
	RoleNever Role = "never"
)

// Valid reports whether r is one of the four roles.
func (r Role) Valid() bool {
	switch r {
	case RoleSource, RoleDerived, RoleFetchVerdict, RoleNever:
		return true
	}
	return false
}

// VerdictRetrieved is the one fetch verdict that confirms a fetch_verdict
// artifact; FAILED, UNKNOWN and anything else do not.
const VerdictRetrieved = "RETRIEVED"

// BuiltinRoles returns the role of a built-in type: fetch_verdict has the
// fetch_verdict rule, tool_error is never confirmed, question and
// user_input are sources, and document, tool_output, effect, model_call,
// evidence, claim, answer and note are derived. ok is false for any other
// type. Its signature fits the roleOf argument of RoleBase.
func BuiltinRoles(typ string) (role Role, ok bool) {
	switch typ {
	case "fetch_verdict":
		return RoleFetchVerdict, true
	case "tool_error":
		return RoleNever, true
	case "question", "user_input":
		return RoleSource, true
	case "document", "tool_output", "effect", "model_call", "evidence", "claim", "answer", "note":
		return RoleDerived, true
	}
	return "", false
}

// BuiltinTypes returns the names of the built-in types, sorted.
func BuiltinTypes() []string {
	return []string{"answer", "claim", "document", "effect", "evidence", "fetch_verdict",
		"model_call", "note", "question", "tool_error", "tool_output", "user_input"}
}

// BaseFunc decides an artifact's base trust: whether it may be confirmed
// at all, before its dependencies are considered. When ok is false, reason
// says why in a short human-readable form, such as
// "fetch_verdict FAILED (transport.empty_body)", "tool_error" or
// `unknown type "x"`. A BaseFunc must be a deterministic function of the
// artifact (its type and content), or trust would differ between replays
// of the same commit.
type BaseFunc func(a *Artifact) (ok bool, reason string)

// RoleBase returns the BaseFunc of DESIGN.md: an artifact's type is looked
// up with roleOf (BuiltinRoles when nil); a source or derived type is
// base-true, a never type base-false with the type name as reason, a
// fetch_verdict type base-true iff verdictOf reports VerdictRetrieved, and
// an unknown type base-false. verdictOf (VerdictFromData of a.Data when
// nil) exists because a state may hold artifacts without their Data: the
// caller can load the payload there.
func RoleBase(roleOf func(typ string) (Role, bool), verdictOf func(a *Artifact) (verdict, reason string)) BaseFunc {
	if roleOf == nil {
		roleOf = BuiltinRoles
	}
	if verdictOf == nil {
		verdictOf = func(a *Artifact) (string, string) { return VerdictFromData(a.Data) }
	}
	return func(a *Artifact) (bool, string) {
		role, ok := roleOf(a.Type)
		if !ok {
			return false, fmt.Sprintf("unknown type %q", a.Type)
		}
		switch role {
		case RoleSource, RoleDerived:
			return true, ""
		case RoleNever:
			return false, a.Type
		case RoleFetchVerdict:
			v, why := verdictOf(a)
			if v == VerdictRetrieved {
				return true, ""
			}
			msg := a.Type + " " + v
			if v == "" {
				msg = a.Type + " without a verdict"
			}
			if why != "" {
				msg += " (" + why + ")"
			}
			return false, msg
		}
		return false, fmt.Sprintf("type %q has unknown role %q", a.Type, role)
	}
}

// VerdictFromData reads the "verdict" and "reason" string members of a
// fetch_verdict's data object. Missing members, other JSON types, nil or
// malformed data give empty strings (which RoleBase treats as not
// retrieved).
func VerdictFromData(data json.RawMessage) (verdict, reason string) {
	if len(data) == 0 {
		return "", ""
	}
	var v struct {
		Verdict json.RawMessage `json:"verdict"`
		Reason  json.RawMessage `json:"reason"`
	}
	if json.Unmarshal(data, &v) != nil {
		return "", ""
	}
	return jsonString(v.Verdict), jsonString(v.Reason)
}

// jsonString returns the value of a JSON string, or "" for anything else.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Status is an artifact's trust status.
type Status string

// The trust statuses.
const (
	// StatusConfirmed: base-true and every dependency confirmed.
	StatusConfirmed Status = "confirmed"
	// StatusQuarantined: base-true but resting, directly or not, on an
	// unconfirmed artifact.
	StatusQuarantined Status = "quarantined"
	// StatusPoisonRoot: base-false.
	StatusPoisonRoot Status = "poison_root"
)

// MaxTrustPath is the most ids a Trust.Path holds. A longer shortest path
// is cut after MaxTrustPath ids and PathTruncated is set; the path goes on
// from the Explain of its last id. The cap keeps a report of a long
// quarantined chain linear in size.
const MaxTrustPath = 64

// Trust is one artifact's trust. For a poison root Reason says why its base
// is false. For a quarantined artifact Roots lists, sorted, every poison
// root among its dependency ancestors, and Path is one shortest dependency
// path from the artifact to a poison root: ids starting with the artifact
// itself and ending with the root. Among several shortest paths the one
// whose successive ids are smallest is chosen, so the path is a function of
// the state alone. The zero Status means the artifact does not exist.
// Slices may be shared between Trust values and must not be modified.
type Trust struct {
	ID            string   `json:"id"`
	Status        Status   `json:"status"`
	Reason        string   `json:"reason,omitempty"`
	Roots         []string `json:"roots,omitempty"`
	Path          []string `json:"path,omitempty"`
	PathTruncated bool     `json:"path_truncated,omitempty"`
}

// Root is a poison root with the number of artifacts it quarantines.
type Root struct {
	ID          string `json:"id"`
	Reason      string `json:"reason"`
	BlastRadius int    `json:"blast_radius"`
}

// TrustReport is the trust of every artifact of a state. PoisonRoots and
// Quarantined are sorted by id and never nil; BlastRadius is the number of
// quarantined artifacts (each counted once however many roots it rests
// on) and Confirmed the number of confirmed ones. Confirmed artifacts are
// not listed, so that a report costs what the unconfirmed region costs:
// use Trust for any artifact, ConfirmedIDs for the sorted list.
type TrustReport struct {
	PoisonRoots []Root  `json:"poison_roots"`
	Quarantined []Trust `json:"quarantined"`
	BlastRadius int     `json:"blast_radius"`
	Confirmed   int     `json:"confirmed"`
	// idx numbers the unconfirmed artifacts: i < len(PoisonRoots) is
	// PoisonRoots[i], any other is Quarantined[pos[i]].
	idx map[string]int32
	pos []int32
}

// Trust returns the trust of id, which must be an artifact of the state
// the report was computed from: an id the report does not list as
// unconfirmed is reported confirmed.
func (r *TrustReport) Trust(id string) Trust {
	i, ok := r.idx[id]
	switch {
	case !ok:
		return Trust{ID: id, Status: StatusConfirmed}
	case int(i) < len(r.PoisonRoots):
		p := r.PoisonRoots[i]
		return Trust{ID: p.ID, Status: StatusPoisonRoot, Reason: p.Reason}
	}
	return r.Quarantined[r.pos[i]]
}

// ConfirmedIDs returns the confirmed artifacts of s, sorted; s must be the
// state the report was computed from. It costs a sort of all ids.
func (r *TrustReport) ConfirmedIDs(s *State) []string {
	out := make([]string, 0, s.nArt)
	for id := range s.allArtifacts() {
		if _, bad := r.idx[id]; !bad {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// ComputeTrust computes the trust of every artifact of s from scratch. It
// calls base once per artifact, then visits only the unconfirmed region:
// everything below a poison root, found by walking dependents. Statuses,
// paths and the total blast radius cost O(V+E); root lists and per-root
// blast radii add the total size of the distinct root sets, which is small
// unless many artifacts each rest on their own combination of many roots,
// and sorting the quarantined ids.
func ComputeTrust(s *State, base BaseFunc) *TrustReport {
	var roots []rootInfo
	for id, a := range s.allArtifacts() {
		if ok, why := base(a); !ok {
			roots = append(roots, rootInfo{id: id, reason: why})
		}
	}
	return buildReport(s, roots)
}

type rootInfo struct{ id, reason string }

// taint is the unconfirmed region of a state: every poison root and
// everything that depends on one. Roots come first, sorted by id, so a
// root's index is also its rank. Dependents of ids[i] (one entry per
// dependency edge) are adj[start[i]:start[i+1]].
type taint struct {
	ids   []string
	idx   map[string]int32
	nroot int
	// bad[i] counts dependency edges from ids[i] to members of the region.
	bad   []int32
	start []int32
	adj   []int32
}

// findTaint walks dependents breadth-first from the roots (sorted by id).
func findTaint(s *State, roots []string) *taint {
	t := &taint{nroot: len(roots)}
	if len(roots) == 0 {
		return t
	}
	t.idx = make(map[string]int32, len(roots))
	t.ids = append(t.ids, roots...)
	for i, id := range roots {
		t.idx[id] = int32(i)
	}
	t.bad = make([]int32, len(roots))
	var dep relCache
	for i := 0; i < len(t.ids); i++ {
		t.start = append(t.start, int32(len(t.adj)))
		for k := range s.inOf(t.ids[i]).all() {
			if !dep.depends(s.rels, k.Rel) {
				continue
			}
			j, ok := t.idx[k.From]
			if !ok {
				j = int32(len(t.ids))
				t.idx[k.From] = j
				t.ids = append(t.ids, k.From)
				t.bad = append(t.bad, 0)
			}
			t.bad[j]++
			t.adj = append(t.adj, j)
		}
	}
	t.start = append(t.start, int32(len(t.adj)))
	return t
}

// relCache remembers the last relation looked up: edges met in a walk
// mostly share a few relations, and comparing equal strings is cheaper
// than hashing them.
type relCache struct {
	rel string
	dep bool
	ok  bool
}

func (c *relCache) depends(rels Relations, rel string) bool {
	if !c.ok || rel != c.rel {
		c.rel, c.dep, c.ok = rel, rels.Depends(rel), true
	}
	return c.dep
}

// rootSets interns sorted sets of root ranks; set 0 is the empty set.
type rootSets struct {
	members [][]int32
	byKey   map[string]int32
	unions  map[uint64]int32
	single  map[int32]int32
	key     []byte
	strs    [][]string
}

func newRootSets() *rootSets {
	return &rootSets{members: [][]int32{nil}, byKey: map[string]int32{"": 0},
		unions: make(map[uint64]int32), single: make(map[int32]int32)}
}

func (rs *rootSets) intern(m []int32) int32 {
	rs.key = rs.key[:0]
	for _, r := range m {
		rs.key = binary.LittleEndian.AppendUint32(rs.key, uint32(r))
	}
	if id, ok := rs.byKey[string(rs.key)]; ok {
		return id
	}
	id := int32(len(rs.members))
	rs.members = append(rs.members, slices.Clone(m))
	rs.byKey[string(rs.key)] = id
	return id
}

func (rs *rootSets) singleton(r int32) int32 {
	if id, ok := rs.single[r]; ok {
		return id
	}
	id := rs.intern([]int32{r})
	rs.single[r] = id
	return id
}

func (rs *rootSets) union(a, b int32) int32 {
	if a == b || b == 0 {
		return a
	}
	if a == 0 {
		return b
	}
	if a > b {
		a, b = b, a
	}
	k := uint64(a)<<32 | uint64(b)
	if id, ok := rs.unions[k]; ok {
		return id
	}
	x, y := rs.members[a], rs.members[b]
	m := make([]int32, 0, len(x)+len(y))
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] < y[j]:
			m = append(m, x[i])
			i++
		case x[i] > y[j]:
			m = append(m, y[j])
			j++
		default:
			m = append(m, x[i])
			i++
			j++
		}
	}
	m = append(append(m, x[i:]...), y[j:]...)
	id := rs.intern(m)
	rs.unions[k] = id
	return id
}

// strings returns the ids of set id (shared, read-only).
func (rs *rootSets) strings(id int32, ids []string) []string {
	for len(rs.strs) < len(rs.members) {
		rs.strs = append(rs.strs, nil)
	}
	if rs.strs[id] == nil && len(rs.members[id]) > 0 {
		out := make([]string, len(rs.members[id]))
		for i, r := range rs.members[id] {
			out[i] = ids[r]
		}
		rs.strs[id] = out
	}
	return rs.strs[id]
}

// buildReport computes the report given the poison roots (any order).
func buildReport(s *State, roots []rootInfo) *TrustReport {
	slices.SortFunc(roots, func(a, b rootInfo) int { return strings.Compare(a.id, b.id) })
	rootIDs := make([]string, len(roots))
	for i, r := range roots {
		rootIDs[i] = r.id
	}
	tn := findTaint(s, rootIDs)
	n, R := len(tn.ids), tn.nroot

	// One pass in topological order (Kahn's algorithm over the region):
	// root sets, distance to the nearest root and the next hop on the
	// smallest shortest path.
	pending := slices.Clone(tn.bad)
	dist := make([]int32, n)
	next := make([]int32, n)
	set := make([]int32, n)
	queue := make([]int32, 0, n)
	for i := range n {
		next[i] = -1
		if i >= R {
			dist[i] = math.MaxInt32
		}
		if pending[i] == 0 {
			queue = append(queue, int32(i))
		}
	}
	rs := newRootSets()
	for q := 0; q < len(queue); q++ {
		y := queue[q]
		out := set[y]
		if int(y) < R {
			out = rs.union(out, rs.singleton(y))
		}
		for _, x := range tn.adj[tn.start[y]:tn.start[y+1]] {
			set[x] = rs.union(set[x], out)
			if int(x) >= R {
				if d := dist[y] + 1; d < dist[x] || d == dist[x] && tn.ids[y] < tn.ids[next[x]] {
					dist[x], next[x] = d, y
				}
			}
			if pending[x]--; pending[x] == 0 {
				queue = append(queue, x)
			}
		}
	}

	rep := &TrustReport{
		PoisonRoots: make([]Root, R),
		Quarantined: make([]Trust, 0, n-R),
		BlastRadius: n - R,
		Confirmed:   s.nArt - n,
		idx:         tn.idx,
		pos:         make([]int32, n),
	}
	for i, r := range roots {
		rep.PoisonRoots[i] = Root{ID: r.id, Reason: r.reason}
	}
	perSet := make([]int, len(rs.members))
	order := make([]int32, 0, n-R)
	for i := R; i < n; i++ {
		perSet[set[i]]++
		order = append(order, int32(i))
	}
	for sid, c := range perSet {
		for _, r := range rs.members[sid] {
			rep.PoisonRoots[r].BlastRadius += c
		}
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(tn.ids[a], tn.ids[b]) })
	// Paths share one backing array; each is capped to its own length.
	total := 0
	for _, i := range order {
		total += min(int(dist[i])+1, MaxTrustPath)
	}
	arena := make([]string, 0, total)
	for _, i := range order {
		t := Trust{ID: tn.ids[i], Status: StatusQuarantined, Roots: rs.strings(set[i], tn.ids)}
		start := len(arena)
		for cur := i; ; cur = next[cur] {
			if len(arena)-start == MaxTrustPath {
				t.PathTruncated = true
				break
			}
			arena = append(arena, tn.ids[cur])
			if int(cur) < R {
				break
			}
		}
		t.Path = arena[start:len(arena):len(arena)]
		rep.pos[i] = int32(len(rep.Quarantined))
		rep.Quarantined = append(rep.Quarantined, t)
	}
	return rep
}
