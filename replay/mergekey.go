package replay

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/artifactd/artifactd/graph"
)

// Conflict keys. A conflict's key is what a Resolution names it by, and
// no two conflicts of a merge share one. The plain forms are
//
//	artifact (edit_edit, delete_edit, dangling_edge)  its id
//	edge (edge_attrs, edge_delete_edit)              edge:<from> -<rel>-> <to>
//	cycle                                            cycle:<from> -<rel>-> <to>
//
// An artifact id may hold ':', spaces and "->" (graph.ValidateID), so the
// plain forms alone would be ambiguous: an id such as "edge:a -r-> b"
// reads as an edge's key (readsAsEdge), and an edge with an end holding
// "->" can render as another edge (a -r-> b -r-> c is both "a -r-> b"
// -r-> c and a -r-> "b -r-> c"). Those, and only those, are keyed in the
// escaped form: the prefix ("edge:" or "cycle:"; for an artifact, the one
// its id starts with), then "-> -json-> ", then a JSON object: {"id":…}
// for an artifact, {"from":…,"rel":…,"to":…} for an edge. An escaped key
// reads as an edge (from "->", rel json), so it is no plain artifact key;
// it holds "->" twice, and a plain edge key, whose ends hold none, once.
// So every key reads back as one conflict (ParseKey).
const (
	edgeKeyPrefix  = "edge:"
	cycleKeyPrefix = "cycle:"
	escapeMark     = "-> -json-> "
)

// KeyKind is what a conflict key names.
type KeyKind string

// The kinds of KeyTarget.
const (
	KeyArtifact KeyKind = "artifact"
	KeyEdge     KeyKind = "edge"
	KeyCycle    KeyKind = "cycle"
)

// KeyTarget is what a conflict key names: the artifact ID, or the Edge of
// an edge conflict or the edge that closes a cycle.
type KeyTarget struct {
	Kind KeyKind
	ID   string
	Edge graph.EdgeKey
}

// ArtifactKey returns the key of an artifact conflict of id: the id, or
// its escaped form when the id reads as an edge's or a cycle's key.
func ArtifactKey(id string) string {
	for _, p := range []string{edgeKeyPrefix, cycleKeyPrefix} {
		if rest, ok := strings.CutPrefix(id, p); ok && readsAsEdge(rest) {
			return p + escapeMark + escapedJSON(escapedKey{ID: id})
		}
	}
	return id
}

// readsAsEdge reports whether s splits as from -rel-> to: a non-empty
// from, " -", a relation name, "-> " and a non-empty to. A relation name
// holds no space, so its " -" is the last space before its "-> ".
func readsAsEdge(s string) bool {
	for j := 0; j+3 < len(s); j++ {
		if !strings.HasPrefix(s[j:], "-> ") {
			continue
		}
		i := strings.LastIndexByte(s[:j], ' ')
		if i >= 1 && i+2 <= j && s[i+1] == '-' && graph.ValidateName("rel", s[i+2:j]) == nil {
			return true
		}
	}
	return false
}

// EdgeConflictKey returns the key of an edge conflict of k.
func EdgeConflictKey(k graph.EdgeKey) string { return edgeKeyOf(edgeKeyPrefix, k) }

// CycleKey returns the key of the cycle k closes.
func CycleKey(k graph.EdgeKey) string { return edgeKeyOf(cycleKeyPrefix, k) }

func edgeKeyOf(prefix string, k graph.EdgeKey) string {
	if strings.Contains(k.From, "->") || strings.Contains(k.To, "->") {
		return prefix + escapeMark + escapedJSON(escapedKey{From: k.From, Rel: k.Rel, To: k.To})
	}
	return prefix + k.String()
}

// escapedKey is the JSON object of an escaped key.
type escapedKey struct {
	ID   string `json:"id,omitempty"`
	From string `json:"from,omitempty"`
	Rel  string `json:"rel,omitempty"`
	To   string `json:"to,omitempty"`
}

// escapedJSON encodes e as JSON, '<', '>' and '&' as they are.
func escapedJSON(e escapedKey) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(e) // strings only: cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// ParseKey returns what key names, and false when no conflict has key
// (ArtifactKey, EdgeConflictKey or CycleKey would not return it): a key
// that starts with "edge:" or "cycle:" and reads as an edge after it
// names an edge or a cycle (an artifact when escaped as one), any other
// key an artifact. For every key it accepts, rendering the target again
// gives key back.
func ParseKey(key string) (KeyTarget, bool) {
	kind, rest := KeyArtifact, ""
	switch {
	case strings.HasPrefix(key, edgeKeyPrefix):
		kind, rest = KeyEdge, key[len(edgeKeyPrefix):]
	case strings.HasPrefix(key, cycleKeyPrefix):
		kind, rest = KeyCycle, key[len(cycleKeyPrefix):]
	}
	if kind == KeyArtifact || !readsAsEdge(rest) {
		return KeyTarget{Kind: KeyArtifact, ID: key}, key != ""
	}
	var t KeyTarget
	if esc, ok := strings.CutPrefix(rest, escapeMark); ok {
		var e escapedKey
		dec := json.NewDecoder(strings.NewReader(esc))
		dec.DisallowUnknownFields()
		if dec.Decode(&e) != nil {
			return KeyTarget{}, false
		}
		t = KeyTarget{Kind: kind, Edge: graph.EdgeKey{From: e.From, Rel: e.Rel, To: e.To}}
		if e.ID != "" {
			t = KeyTarget{Kind: KeyArtifact, ID: e.ID}
		}
	} else {
		// Plain: its ends hold no "->", so the first "-> " ends rel,
		// which follows the last space before it and a '-'.
		left, to, _ := strings.Cut(rest, "-> ")
		i := strings.LastIndexByte(left, ' ')
		if i < 0 || i+2 > len(left) {
			return KeyTarget{}, false
		}
		t = KeyTarget{Kind: kind, Edge: graph.EdgeKey{From: left[:i], Rel: left[i+2:], To: to}}
	}
	if t.Kind != KeyArtifact && (t.Edge.From == "" || t.Edge.To == "" || graph.ValidateName("rel", t.Edge.Rel) != nil) {
		return KeyTarget{}, false
	}
	return t, t.key() == key
}

// key renders t as a conflict key.
func (t KeyTarget) key() string {
	switch t.Kind {
	case KeyEdge:
		return EdgeConflictKey(t.Edge)
	case KeyCycle:
		return CycleKey(t.Edge)
	}
	return ArtifactKey(t.ID)
}
