package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/artifactd/artifactd/fault"
	"github.com/artifactd/artifactd/graph"
	"github.com/artifactd/artifactd/hashing"
	"github.com/artifactd/artifactd/replay"
	"github.com/artifactd/artifactd/schema"
	"github.com/artifactd/artifactd/store"
)

// MergeInput is a three-way merge of Theirs (branch or commit) into
// branch Ours (default main), with resolutions keyed like the conflicts.
type MergeInput struct {
	Ours        string                       `json:"ours"`
	Theirs      string                       `json:"theirs"`
	Resolutions map[string]replay.Resolution `json:"resolutions"`
	Author      string                       `json:"author"`
	Message     string                       `json:"message"`
	// IfMatch, when set, is the head the write expects ours to
	// have (an If-Match header; never read from the body): the write is
	// refused as stale, naming If-Match, when the head is another.
	IfMatch *hashing.Digest `json:"-"`
}

// Merge merges in.Theirs into in.Ours with the client's rules: both refs
// are valid, and every value resolution of an artifact matches its type's
// schema and writes no gate output. Conflicts are all reported at once (a
// merge-conflict error, nothing written).
func (s *Service) Merge(ctx context.Context, ctxID string, in MergeInput) (*store.MergeResult, error) {
	if in.Ours == "" {
		in.Ours = store.DefaultBranch
	}
	for _, p := range [][2]string{{"/ours", in.Ours}, {"/theirs", in.Theirs}} {
		if err := CheckRef(p[0][1:], p[1]); err != nil {
			return nil, PointTo(err, p[0])
		}
	}
	// Theirs may be any commit; ours is the branch the merge moves.
	if err := checkBranchField(in.Ours, "/ours"); err != nil {
		return nil, err
	}
	if err := checkLabel(in.Author, "/author", "author"); err != nil {
		return nil, err
	}
	// Theirs is resolved once: the resolutions are checked against the
	// commit that is merged, whatever its branch does meanwhile.
	tc, err := s.ResolveRef(ctx, ctxID, in.Theirs, "theirs")
	if err != nil {
		return nil, err
	}
	if err := s.checkResolutions(ctx, ctxID, &in, tc); err != nil {
		return nil, err
	}
	res, err := s.st.MergeWith(ctx, store.MergeRequest{Context: ctxID, Ours: in.Ours, Theirs: tc, TheirsName: in.Theirs,
		Resolutions: in.Resolutions, Author: in.Author, Message: in.Message, Parent: in.IfMatch, Check: mergeCheck(in.Resolutions, s.types.Validate, func(d hashing.Digest) ([]byte, error) { return s.st.Object(ctx, d) })})
	if err != nil {
		if errors.Is(err, store.ErrStale) && in.IfMatch != nil {
			return nil, s.commitError(ctx, ctxID, in.Ours, true, err)
		}
		return nil, locateMerge(s.branchMissingAt(ctx, ctxID, in.Ours, "/ours", err), in.Resolutions)
	}
	if res.Kind == replay.MergeThreeWay {
		s.countWrite(false)
	}
	return res, nil
}

// locateMerge points a refusal of the merge commit's ops (a quarantine in
// an enforce context, an op the state refuses) at the request field it
// rests on: the resolution of the edge it names when there is one, else
// /theirs, whose changes the merge carries. graph's "op N: " prefix, which
// counts the merge's own ops, is dropped.
func locateMerge(err error, resolutions map[string]replay.Resolution) error {
	ptr := "/theirs"
	var te *graph.TaintError
	if errors.As(err, &te) {
		key := replay.EdgeConflictKey(te.Edge)
		if _, ok := resolutions[key]; ok {
			ptr = resolutionPointer(key)
		}
	}
	return locate(err, func(int, string) string { return ptr })
}

// resolutionPointer is the JSON pointer of the resolution of key in a
// merge's body.
func resolutionPointer(key string) string { return "/resolutions/" + fault.PointerToken(key) }

// checkResolutions holds value resolutions of artifacts to the client's
// rules: the data must match its type's schema, no value may be of a
// reserved type (a fetch_verdict, which only the gate writes; an effect,
// which only the outbox does) or a gate output, and none may replace an
// artifact that is one of those on either side: a gate's verdict or tool
// error is superseded only by a new gate result, never by a client's
// value, or a merge would turn a FAILED read into a confirmed note.
// Take-resolutions copy a version one side already has and need no
// check.
func (s *Service) checkResolutions(ctx context.Context, ctxID string, in *MergeInput, theirs *replay.Commit) error {
	var sides []*replay.Commit // ours, theirs: resolved on first need
	for key, res := range in.Resolutions {
		ptr := resolutionPointer(key)
		// What the key names, as the merge reads it; a key that names
		// no conflict is reported unused, and only the rules of every
		// resolution apply to it.
		tgt, known := replay.ParseKey(key)
		artifact, cycle := known && tgt.Kind == replay.KeyArtifact, known && tgt.Kind == replay.KeyCycle
		switch {
		case res.Take != "" && len(res.Value) > 0:
			return &fault.Error{Code: fault.Invalid, Detail: "a resolution takes a side or gives a value, not both",
				Errors: []fault.FieldError{{Pointer: ptr, Rule: "oneOf", Detail: "take or value"}}}
		case res.Take == "" && len(res.Value) == 0:
			return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("the resolution of %q takes no side and gives no value", key),
				Errors: []fault.FieldError{{Pointer: ptr, Rule: "oneOf", Detail: "take or value"}}}
		case res.Take != "" && res.Take != replay.TakeOurs && res.Take != replay.TakeTheirs:
			return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("take must be %q or %q, not %q", replay.TakeOurs, replay.TakeTheirs, res.Take),
				Errors: []fault.FieldError{{Pointer: ptr + "/take", Rule: "enum", Detail: "ours or theirs"}}}
		case len(res.Value) > 0 && cycle:
			return &fault.Error{Code: fault.Invalid, Detail: "a cycle is resolved by taking a side: ours drops theirs' edge that closes it, theirs keeps it",
				Errors: []fault.FieldError{{Pointer: ptr + "/value", Rule: "not", Detail: "take ours or theirs"}}}
		}
		// Type and produced_by describe the value written for an
		// artifact: beside a take, or for an edge's attrs, they would be
		// dropped unsaid.
		for _, f := range []struct{ name, val string }{{"type", res.Type}, {"produced_by", res.ProducedBy}} {
			switch {
			case f.val == "":
			case known && !artifact:
				return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("the resolution of %q sets %s, which only an artifact's value has: an edge's value is its attrs", key, f.name),
					Errors: []fault.FieldError{{Pointer: ptr + "/" + f.name, Rule: "not", Detail: "an edge resolution has no " + f.name}}}
			case len(res.Value) == 0:
				return &fault.Error{Code: fault.Invalid, Detail: fmt.Sprintf("the resolution of %q sets %s but gives no value: a take keeps that side's version as it is", key, f.name),
					Errors: []fault.FieldError{{Pointer: ptr + "/" + f.name, Rule: "dependentRequired", Detail: f.name + " goes with a value"}}}
			}
		}
		// A value's producer is a new produced_by, held to the rules of
		// names as every other write's.
		if err := checkLabel(res.ProducedBy, ptr+"/produced_by", "produced_by"); err != nil {
			return err
		}
		if len(res.Value) == 0 || !artifact { // a cycle's value was refused above
			continue
		}
		id := tgt.ID
		if strings.HasPrefix(id, graph.ReservedIDPrefix) {
			// A definition (or any reserved id) is written from the
			// registry, never from a client's data.
			return &fault.Error{Code: fault.Invalid,
				Detail: fmt.Sprintf("the resolution of %q gives a value, but ids starting with %q are reserved for the definitions a context records from the registry: take ours or theirs (and register the type or relation again to change it)", key, graph.ReservedIDPrefix),
				Errors: []fault.FieldError{{Pointer: ptr + "/value", Rule: "reserved", Detail: "take ours or theirs"}}}
		}
		if sides == nil {
			ours, err := s.st.Resolve(ctx, ctxID, in.Ours)
			if err != nil {
				return err
			}
			sides = []*replay.Commit{ours, theirs}
		}
		// The merged version keeps ours' type, else theirs', unless the
		// resolution names one.
		typ := res.Type
		for _, c := range sides {
			a, _, err := s.st.ArtifactAt(ctx, ctxID, c, id)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if owner := gateWriter(a.Type); owner != "" {
				return reservedResolution(ptr+"/value", a.Type, fmt.Sprintf("a merge resolution cannot replace the %s %q with a value: only %s writes it; take ours or theirs", a.Type, id, owner))
			}
			if typ == "" {
				typ = a.Type
			}
		}
		if owner := gateWriter(typ); owner != "" {
			return reservedResolution(ptr+"/type", typ, fmt.Sprintf("a merge resolution cannot write a %s value: only %s writes one; take ours or theirs", typ, owner))
		}
		if typ != "" {
			if err := s.types.Validate(typ, mustDecode(res.Value), ptr+"/value"); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergeCheck is the merge commit's check, run in the committer: that of
// its values (valuesCheck, validating with validate, the registry's),
// then that of its definitions (definitionsCheck, reading the data of
// versions put by hash with object).
func mergeCheck(resolutions map[string]replay.Resolution, validate func(typ string, data any, ptr string) error, object func(hashing.Digest) ([]byte, error)) func(*graph.State, []graph.Change) error {
	values, defs := valuesCheck(resolutions, validate), definitionsCheck(resolutions, object)
	return func(st *graph.State, changes []graph.Change) error {
		if err := values(st, changes); err != nil {
			return err
		}
		return defs(st, changes)
	}
}

// definitionsCheck refuses a merge commit that puts data its type's
// definition in the merged history refuses: a version from theirs
// written under a definition that ours has changed since, a version
// taken from ours under one theirs changed, or a value resolution the
// history's definition refuses although the registry's accepts it. A
// merge records no definition of its own, so the merged state's
// definition (the state the check sees) is the one the chain holds the
// put to — the one an import of the context checks it against. The error
// names every such artifact (up to maxFieldErrors): at its resolution
// when it has one, else at /theirs.
func definitionsCheck(resolutions map[string]replay.Resolution, object func(hashing.Digest) ([]byte, error)) func(*graph.State, []graph.Change) error {
	compiled := map[string]*schema.Schema{} // by type and schema; one merge's
	return func(st *graph.State, changes []graph.Change) error {
		var out []fault.FieldError
		first, failed := "", 0
		for _, ch := range changes {
			if ch.Noop || ch.Op.Op != graph.OpPut || ch.Next == nil {
				continue
			}
			def := st.TypeDef(ch.Next.Type)
			if def == nil || len(def.Schema) == 0 {
				continue
			}
			key := def.Name + "\x00" + string(def.Schema)
			sch := compiled[key]
			if sch == nil {
				var err error
				if sch, err = schema.Compile(def.Name, def.Schema); err != nil {
					return fmt.Errorf("%w: type %q as the merged history defines it: %w", store.ErrCorrupt, def.Name, err)
				}
				compiled[key] = sch
			}
			data := ch.Op.Data
			if len(data) == 0 {
				// A version one side has: stored, and put by its hash.
				var err error
				if data, err = object(ch.Op.ContentHash); err != nil {
					return err
				}
			}
			if sch.Validate(data) == nil {
				continue
			}
			ptr := "/theirs"
			if res, ok := resolutions[replay.ArtifactKey(ch.Op.ID)]; ok {
				ptr = resolutionPointer(replay.ArtifactKey(ch.Op.ID))
				if len(res.Value) > 0 {
					ptr += "/value"
				}
			}
			if failed++; first == "" {
				first = ch.Op.ID
			}
			if len(out) < maxFieldErrors {
				out = append(out, fault.FieldError{Pointer: ptr, Rule: "schema",
					Detail: fmt.Sprintf("%s %q does not match its type as the merged history defines it", ch.Next.Type, ch.Op.ID)})
			}
		}
		if failed == 0 {
			return nil
		}
		what := fmt.Sprintf("%q", first)
		if failed > 1 {
			what = fmt.Sprintf("%q and %d more", first, failed-1)
		}
		return &fault.Error{Code: fault.Invalid, Errors: out,
			Detail: fmt.Sprintf("the merge would hold %s as data its type's definition in the merged history refuses: "+
				"a version written under an older definition, or a resolution value; write the artifact again on its branch (it is then checked against the current definition) or resolve it with a value that definition accepts", what)}
	}
}

// valuesCheck is the merge commit's check, run in the committer: the
// artifact a value resolution writes must not replace a reserved type or
// a gate output on ours as the merge lands on it (a verdict recorded
// there after checkResolutions looked), nor be one, and its data must
// match, by validate, the type it is written as — which, when the
// resolution names none, is ours' type as the merge lands on it, perhaps
// not the one checkResolutions saw. Theirs is the commit
// checkResolutions read.
func valuesCheck(resolutions map[string]replay.Resolution, validate func(typ string, data any, ptr string) error) func(*graph.State, []graph.Change) error {
	return func(_ *graph.State, changes []graph.Change) error {
		for _, ch := range changes {
			key := replay.ArtifactKey(ch.Op.ID)
			res, ok := resolutions[key]
			if ch.Noop || !ok || len(res.Value) == 0 || ch.Op.Op != graph.OpPut {
				continue
			}
			for _, a := range []*graph.Artifact{ch.Prev, ch.Next} {
				if a == nil {
					continue
				}
				if owner := gateWriter(a.Type); owner != "" {
					return reservedResolution(resolutionPointer(key)+"/value", a.Type,
						fmt.Sprintf("a merge resolution cannot give %q a value: it is a %s on ours now, which only %s writes; take ours or theirs", ch.Op.ID, a.Type, owner))
				}
			}
			if ch.Next != nil && len(ch.Op.Data) > 0 {
				if err := validate(ch.Next.Type, mustDecode(ch.Op.Data), resolutionPointer(key)+"/value"); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// reservedResolution refuses a value resolution over a reserved type or a
// gate output (typ), naming the field at ptr.
func reservedResolution(ptr, typ, detail string) error {
	return &fault.Error{Code: fault.ReservedType, Detail: detail,
		Errors: []fault.FieldError{{Pointer: ptr, Rule: "reserved", Detail: typ}}}
}

// gateWriter returns the only path that writes artifacts of typ, a
// reserved type or a gate output, or "" when clients may write them.
func gateWriter(typ string) string {
	if w := reservedWriters[typ]; w != "" {
		return w
	}
	return gateOwned[typ]
}
